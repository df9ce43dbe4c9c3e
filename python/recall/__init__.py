"""recall - the recall engine (librecall.so) in-process, for checking it against a Python reference.

    import recall
    m = recall.open("build/worldA-f32.blob")
    out = m.forward(ids, capture=["logits", "hidden", "q_proj"])   # numpy arrays the library wrote
    loop = m.loop(mode="faithful", arm="RC_bge")
    turn = loop.turn(feed)
    for ev in turn: ...                                            # streamed as the loop runs
    turn.reply.ids, turn.trace                                     # the reply, the turn's trace record

A thin layer over the C API (src/recall.h, docs/API.md) through ctypes: every result is the
library's, bit for bit; errors are RecallError carrying the library's message and status. numpy
is used when it is installed (arrays written in place by the library, no copies); without it the
results are array.array / lists. Long calls release the GIL. A model and its loops take one lock,
so two Python threads sharing them take turns; two models run side by side.
"""
import array
import json
import queue
import threading
import weakref

from . import _lib as L  # the module; _dll below is the loaded library

try:
    import numpy as _np
except ImportError:  # numpy is optional
    _np = None

__all__ = ["open", "RecallError", "Model", "Loop", "Turn", "Event", "Reply", "Forward", "Score",
           "build_problem", "replay", "write_trace", "read_trace", "lib_path", "API_VERSION"]

_dll = L.load()
lib_path = _dll.path
API_VERSION = L.API_VERSION

STATUS = ["OK", "IO", "FORMAT", "CHECKSUM", "VERSION", "UNSUPPORTED", "NOMEM", "ARG", "SHAPE", "MISSING", "LIMIT",
          "SECURITY", "CANCELLED"]
MODES = {"faithful": 0, "clean": 1}
ARMS = {"RC_bge": 0, "SP": 1, "FULL": 2}
EDGES = {"off": 0, "inject": 1, "exchange": 2}
SPANS = {"block": 0, "exchange": 1}
RERANKS = {"off": 0, "words": 1, "single": 2}
KVS = {"f32": 0, "f16": 1}
NUMERICS = {"exact": 0, "q8": 1}
EVENT_KINDS = ["token", "rebuild", "gate", "fire"]


class RecallError(Exception):
    """A library error: .status (e.g. "ARG", "LIMIT", "FORMAT"), .code (recall_status), the message."""

    def __init__(self, code, message):
        self.code = code
        self.status = STATUS[code] if 0 <= code < len(STATUS) else str(code)
        super().__init__(message)


def _check(status, err, what):
    if status:
        msg = err.msg.decode("utf-8", "replace") or (_dll.recall_strerror(status) or b"").decode()
        raise RecallError(status, msg or "%s failed (status %d)" % (what, status))


def _name(table, value, what):
    if isinstance(value, int) and value in table.values():
        return value
    if value not in table:
        raise RecallError(7, "%s %r: expected one of %s" % (what, value, ", ".join(table)))
    return table[value]


# ---- buffers: numpy arrays when numpy is there, array.array otherwise -------------------------

def _ids(ids):
    """ids as contiguous int32 (a list, a numpy array, a torch tensor...), and a pointer to them."""
    if _np is not None:
        if hasattr(ids, "detach"):  # a torch tensor: its values, not the tensor
            ids = ids.detach().cpu().numpy()
        a = _np.ascontiguousarray(_np.asarray(ids).reshape(-1))
        if a.size and not _np.issubdtype(a.dtype, _np.integer):
            raise RecallError(7, "ids: expected integers, got %s" % a.dtype)
        if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
            raise RecallError(7, "ids: a value outside int32")
        a = a.astype(_np.int32, copy=False)
        return a, a.ctypes.data_as(L.c_int32_p)
    try:
        a = array.array("i", [int(i) for i in ids])
    except OverflowError:
        raise RecallError(7, "ids: a value outside int32") from None
    return a, ctypes_ptr(a, L.c_int32_p)


def _floats(x, what):
    if _np is not None:
        if hasattr(x, "detach"):
            x = x.detach().cpu().numpy()
        a = _np.ascontiguousarray(_np.asarray(x, dtype=_np.float32).reshape(-1))
        return a, a.ctypes.data_as(L.c_float_p)
    a = array.array("f", [float(v) for v in x])
    return a, ctypes_ptr(a, L.c_float_p)


def ctypes_ptr(a, ptype):
    import ctypes
    addr = a.buffer_info()[0] if len(a) else 0
    return ctypes.cast(addr, ptype)


def _empty(shape, kind="f"):
    """A zeroed output buffer of shape and its pointer (float32 'f', float64 'd', int32 'i')."""
    n = 1
    for s in shape:
        n *= s
    ptype = {"f": L.c_float_p, "d": L.c_double_p, "i": L.c_int32_p}[kind]
    if _np is not None:
        a = _np.zeros(shape, dtype={"f": _np.float32, "d": _np.float64, "i": _np.int32}[kind])
        return a, (a.ctypes.data_as(ptype) if n else None), n
    a = array.array(kind, bytes(n * array.array(kind).itemsize))
    return a, (ctypes_ptr(a, ptype) if n else None), n


def _take_ids(ptr, n):
    return [ptr[i] for i in range(n)]


# ---- results -----------------------------------------------------------------------------------

class Forward:
    """recall_forward_capture's outputs: logits [n][vocab], logits_last [vocab], hidden
    [layers+1][hidden] (at the last position), q_proj [n_gate][n][heads*head_dim] (None when not
    captured). The names of `recall forward --dump` are aliases: hidden_last, q_layers."""

    def __init__(self, **kw):
        self.logits = kw.get("logits")
        self.logits_last = kw.get("logits_last")
        self.hidden = kw.get("hidden")
        self.q_proj = kw.get("q_proj")

    hidden_last = property(lambda self: self.hidden)
    q_layers = property(lambda self: self.q_proj)


class Score:
    """Teacher-forced scoring of one sequence: nll[j] (float64) and greedy[j] (int32) for the
    target ids[j+1], j = 0 .. n-2."""

    def __init__(self, nll, greedy):
        self.nll, self.greedy = nll, greedy


class Event:
    """One event of a turn, as recall_event carries it: kind "token" (token), "rebuild" (c0,
    has_sp, inj_len, window_len, reused), "gate" (c0, score, fired), "fire" (c0, score, injected,
    n_candidates, ids: the injected ids)."""
    __slots__ = ("kind", "token", "c0", "score", "fired", "injected", "n_candidates", "ids", "has_sp", "inj_len",
                 "window_len", "reused")

    def __init__(self, ev):
        self.kind = EVENT_KINDS[ev.kind] if 0 <= ev.kind < len(EVENT_KINDS) else ev.kind
        for f in ("token", "c0", "score", "fired", "injected", "n_candidates", "has_sp", "inj_len", "window_len",
                  "reused"):
            setattr(self, f, getattr(ev, f))
        self.ids = _take_ids(ev.ids, ev.n_ids) if ev.ids and ev.n_ids > 0 else []

    def as_dict(self):
        return {f: getattr(self, f) for f in self.__slots__}

    def __eq__(self, other):
        return isinstance(other, Event) and self.as_dict() == other.as_dict()

    def __repr__(self):
        keep = {"token": ("token",), "rebuild": ("c0", "has_sp", "inj_len", "window_len", "reused"),
                "gate": ("c0", "score", "fired"), "fire": ("c0", "score", "injected", "n_candidates", "ids")}
        return "Event(%s)" % ", ".join([repr(self.kind)] + ["%s=%r" % (f, getattr(self, f))
                                                             for f in keep.get(self.kind, ())])


class Reply:
    """recall_reply: ids (EOS not included), n_gates, n_fires, n_rebuilds, min_margin; text."""

    def __init__(self, ids, n_gates, n_fires, n_rebuilds, min_margin, text):
        self.ids, self.n_gates, self.n_fires, self.n_rebuilds = ids, n_gates, n_fires, n_rebuilds
        self.min_margin, self.text = min_margin, text


# ---- the model ---------------------------------------------------------------------------------

class Model:
    """An opened blob (recall.open). Close it with close() or a with-block; a closed model
    raises RecallError on every call."""

    def __init__(self, source, verify=False, no_mmap=False, max_memory=0, rope_scaling=None, kv="f32",
                 numerics="exact"):
        import ctypes
        self._h = None
        self._lock = threading.RLock()
        self._loops = weakref.WeakSet()
        self._buf = None
        o = L.recall_open_opts()
        _dll.recall_open_opts_init2(ctypes.byref(o), ctypes.sizeof(o))
        o.flags = (1 if verify else 0) | (2 if no_mmap else 0)
        o.max_memory = int(max_memory)
        self._rope = rope_scaling.encode() if rope_scaling else None
        o.rope_scaling = self._rope
        o.kv = _name(KVS, kv, "kv")
        o.numerics = _name(NUMERICS, numerics, "numerics")
        err = L.recall_err()
        h = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            # the library keeps pointing at the bytes: a 64-byte aligned copy that lives with the model
            raw = ctypes.create_string_buffer(len(data) + 64)
            off = (-ctypes.addressof(raw)) % 64
            ctypes.memmove(ctypes.addressof(raw) + off, data, len(data))
            self._buf = raw
            st = _dll.recall_open_mem2(ctypes.addressof(raw) + off, len(data), ctypes.byref(o), ctypes.byref(h),
                                       ctypes.byref(err))
        else:
            import os
            st = _dll.recall_open2(os.fsencode(source), ctypes.byref(o), ctypes.byref(h), ctypes.byref(err))
        _check(st, err, "recall_open")
        self._h = h.value
        info = L.recall_model_info()
        _dll.recall_model_get_info(self._h, ctypes.byref(info))
        d = L.recall_model_dims()
        _dll.recall_model_get_dims2(self._h, ctypes.byref(d), ctypes.sizeof(d))
        self.dims = {f: (list(getattr(d, f))[:d.n_gate] if f == "gate_layers" else getattr(d, f))
                     for f, _ in L.recall_model_dims._fields_ if f != "struct_size"}
        self.info = {f: getattr(info, f) for f, _ in info._fields_}
        self.vocab, self.max_pos, self.hidden = info.vocab, info.max_pos, info.hidden
        self.layers, self.bos_id, self.eos_id = info.layers, info.bos_id, info.eos_id

    # handles
    def _handle(self):
        if self._h is None:
            raise RecallError(7, "recall: the model is closed")
        return self._h

    def close(self):
        """Closes the model's loops, then the model. Safe to call twice."""
        with self._lock:
            for lp in list(self._loops):
                lp.close()
            if self._h is not None:
                _dll.recall_close(self._h)
                self._h = None
                self._buf = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _call(self, fn, *args, what=None):
        import ctypes
        err = L.recall_err()
        with self._lock:
            st = fn(self._handle(), *args, ctypes.byref(err))
        _check(st, err, what or fn.__name__)

    def _take(self, ptr, n):
        out = _take_ids(ptr, n)
        _dll.recall_free(self._h, ptr)
        return out

    # tokenizers
    def tokenize(self, text, add_special=False):
        """The blob's Qwen2 BPE: a list of ids (add_special: the template's BOS)."""
        import ctypes
        b = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
        ids, n = L.c_int32_p(), ctypes.c_size_t()
        with self._lock:
            self._call(_dll.recall_tokenize, b, len(b), int(bool(add_special)), ctypes.byref(ids), ctypes.byref(n))
            return self._take(ids, n.value)

    def detokenize(self, ids, skip_special=False):
        """UTF-8 text of ids (ids outside the vocab are dropped, as Hugging Face does)."""
        import ctypes
        a, p = _ids(ids)
        text, n = ctypes.c_void_p(), ctypes.c_size_t()
        with self._lock:
            self._call(_dll.recall_detokenize, p, len(a), int(bool(skip_special)), ctypes.byref(text), ctypes.byref(n))
            raw = ctypes.string_at(text.value, n.value)
            _dll.recall_free(self._h, text.value)
        return raw.decode("utf-8", "replace")

    def chat_segment(self, user, assistant=None, with_eos=False):
        """[EOS if with_eos] "<｜User｜>" user "<｜Assistant｜>" [assistant] as ids."""
        import ctypes
        ids, n = L.c_int32_p(), ctypes.c_size_t()
        with self._lock:
            self._call(_dll.recall_chat_segment, int(bool(with_eos)), user.encode("utf-8"),
                       assistant.encode("utf-8") if assistant is not None else None, ctypes.byref(ids),
                       ctypes.byref(n))
            return self._take(ids, n.value)

    def bert_tokenize(self, text):
        """The blob's WordPiece: [CLS] ... [SEP] ids, as `recall embed` encodes."""
        import ctypes
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids, n = L.c_int32_p(), ctypes.c_size_t()
        with self._lock:
            self._call(_dll.recall_bert_tokenize, b, len(b), ctypes.byref(ids), ctypes.byref(n))
            return self._take(ids, n.value)

    # stages
    CAPTURES = {"logits": "logits", "logits_last": "logits_last", "hidden": "hidden", "hidden_last": "hidden",
                "q_proj": "q_gate", "q_layers": "q_gate", "q": "q_gate"}

    def forward(self, ids, capture=("logits",)):
        """The decoder from position 0 over ids in one pass. capture: any of "logits" (every
        position), "logits_last", "hidden" ("hidden_last"), "q_proj" ("q_layers"): the arrays of
        `recall forward --dump`, bitwise."""
        import ctypes
        want = set()
        for c in ([capture] if isinstance(capture, str) else capture):
            if c not in self.CAPTURES:
                raise RecallError(7, "capture %r: expected any of %s" % (c, ", ".join(self.CAPTURES)))
            want.add(self.CAPTURES[c])
        a, p = _ids(ids)
        n, d = len(a), self.dims
        shapes = {"logits": (n, d["vocab"]), "logits_last": (d["vocab"],), "hidden": (d["layers"] + 1, d["hidden"]),
                  "q_gate": (d["n_gate"], n, d["heads"] * d["head_dim"])}
        o = L.recall_forward_out()
        _dll.recall_forward_out_init2(ctypes.byref(o), ctypes.sizeof(o))
        res = {}
        for k in want:
            buf, ptr, cnt = _empty(shapes[k] if n else (0,))
            res[k] = buf
            setattr(o, k, ptr)
            setattr(o, k + "_len", cnt if ptr else 0)
        self._call(_dll.recall_forward_capture, p, n, ctypes.byref(o))
        return Forward(logits=res.get("logits"), logits_last=res.get("logits_last"), hidden=res.get("hidden"),
                       q_proj=res.get("q_gate"))

    def logits(self, ids):
        """recall_forward: the last position's logits [vocab]."""
        a, p = _ids(ids)
        buf, ptr, cnt = _empty((self.vocab,))
        self._call(_dll.recall_forward, p, len(a), ptr, cnt)
        return buf

    def score(self, ids):
        """Teacher-forced: nll and greedy of every position j for target ids[j+1] (`recall score
        --per-position` on one chunk)."""
        a, p = _ids(ids)
        m = max(len(a) - 1, 0)
        nll, pn, _ = _empty((m,), "d")
        greedy, pg, _ = _empty((m,), "i")
        self._call(_dll.recall_score, p, len(a), pn, pg, m)
        return Score(nll, greedy)

    def embed(self, text_or_ids):
        """The BERT encoder: the L2-normalised CLS embedding [bert_hidden] of a text (WordPiece,
        as `recall embed`) or of WordPiece ids."""
        ids = self.bert_tokenize(text_or_ids) if isinstance(text_or_ids, (str, bytes)) else text_or_ids
        a, p = _ids(ids)
        buf, ptr, cnt = _empty((max(self.dims["bert_hidden"], 1),))
        self._call(_dll.recall_embed, p, len(a), ptr, cnt)
        return buf

    def pool(self, ids):
        """The pooler (AttnPoolSP) over the decoder's embeddings of ids: [n_sp][hidden]."""
        a, p = _ids(ids)
        buf, ptr, cnt = _empty((max(self.dims["n_sp"], 1), max(self.dims["pooler_hidden"], 1)))
        self._call(_dll.recall_pool, p, len(a), ptr, cnt)
        return buf

    def gate(self, q):
        """The gate on a feature [gate_dim]: (score, fires)."""
        import ctypes
        a, p = _floats(q, "q")
        s, f = ctypes.c_float(), ctypes.c_int()
        self._call(_dll.recall_gate, p, len(a), ctypes.byref(s), ctypes.byref(f))
        return s.value, bool(f.value)

    def bridge(self, q, emb):
        """The bridge head's score of a block embedded as emb [bridge_kdim] for the feature q."""
        import ctypes
        a, p = _floats(q, "q")
        b, pb = _floats(emb, "emb")
        s = ctypes.c_float()
        self._call(_dll.recall_bridge, p, len(a), pb, len(b), ctypes.byref(s))
        return s.value

    def gate_feature(self, q_proj, pos=-1):
        """The gate's feature at one position of a forward's q_proj capture: the gate layers' rows
        one after the other (as the loop reads them)."""
        if _np is not None:
            return _np.ascontiguousarray(_np.asarray(q_proj)[:, pos, :].reshape(-1))
        raise RecallError(7, "gate_feature needs numpy")

    def loop(self, **opts):
        """A recall loop on this model (Loop's options)."""
        return Loop(self, **opts)


def open(source, **kw):  # noqa: A001 - the package's verb
    """A Model from a blob's path or its bytes. Options: verify, no_mmap, max_memory,
    rope_scaling ("yarn:FACTOR:ORIG"), kv ("f32"/"f16"), numerics ("exact"/"q8")."""
    return Model(source, **kw)


# ---- the loop ----------------------------------------------------------------------------------

class Loop:
    """A recall loop (recall_loop_open) with the command line's loop options: mode ("faithful",
    "clean"), arm ("RC_bge", "SP", "FULL"), edge ("off", "inject", "exchange"), span ("block",
    "exchange"), rerank ("off", "words", "single"), top_k, threshold, numerics ("exact", "q8"), kv
    ("f32", "f16"), threads, simd, draft, window, block, chunk, turn_cap, buf_min, fire_once,
    hysteresis, floor, reference_schedule, max_feed, max_ctx, pooler_cache_mb."""

    def __init__(self, model, mode="faithful", arm="RC_bge", edge="off", span="block", rerank="off", top_k=None,
                 threshold=None, numerics="exact", kv="f32", threads=0, simd=None, draft=0, window=None, block=None,
                 chunk=None, turn_cap=None, buf_min=None, fire_once=False, hysteresis=0, floor=None,
                 reference_schedule=False, max_feed=0, max_ctx=0, pooler_cache_mb=0):
        import ctypes
        self._h = None
        self.model = model
        o = L.recall_loop_opts()
        with model._lock:
            _dll.recall_loop_opts_init2(model._handle(), ctypes.byref(o), ctypes.sizeof(o))
        o.mode = _name(MODES, mode, "mode")
        o.arm = _name(ARMS, arm, "arm")
        o.edge = _name(EDGES, edge, "edge")
        o.span = _name(SPANS, span, "span")
        o.rerank = _name(RERANKS, rerank, "rerank")
        o.kv = _name(KVS, kv, "kv")
        o.numerics = _name(NUMERICS, numerics, "numerics")
        for name, v in (("k", top_k), ("window", window), ("block", block), ("chunk", chunk),
                        ("turn_cap", turn_cap), ("buf_min", buf_min)):
            if v is not None:
                setattr(o, name, int(v))
        if threshold is not None:
            o.threshold = float(threshold)
        if floor is not None:
            o.use_floor, o.floor = 1, float(floor)
        o.fire_once, o.hysteresis = int(bool(fire_once)), int(hysteresis)
        o.reference_schedule, o.max_feed, o.max_ctx = int(bool(reference_schedule)), int(max_feed), int(max_ctx)
        o.threads, o.draft, o.pooler_cache_mb = int(threads), int(draft), int(pooler_cache_mb)
        self._simd = simd.encode() if simd else None
        o.simd = self._simd
        self.opts = {f: getattr(o, f) for f, _ in o._fields_ if f not in ("struct_size", "simd")}
        self.opts.update(mode=mode, arm=arm, edge=edge, span=span, rerank=rerank, kv=kv, numerics=numerics, simd=simd)
        err = L.recall_err()
        h = ctypes.c_void_p()
        with model._lock:
            st = _dll.recall_loop_open2(model._handle(), ctypes.byref(o), ctypes.byref(h), ctypes.byref(err))
        _check(st, err, "recall_loop_open")
        self._h = h.value
        model._loops.add(self)

    def _handle(self):
        if self._h is None:
            raise RecallError(7, "recall: the loop is closed")
        self.model._handle()
        return self._h

    def close(self):
        with self.model._lock:
            if self._h is not None:
                _dll.recall_loop_close(self._h)
                self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def reset(self):
        """A new conversation (drops what was carried between turns; results do not change)."""
        with self.model._lock:
            _dll.recall_loop_reset(self._handle())

    def turn(self, feed):
        """One assistant turn on the conversation so far (ids ending with an open user exchange):
        a Turn, whose iteration streams the events as the loop runs."""
        return Turn(self, feed)

    def reply(self, feed):
        """One turn run to its end: the Turn (events, reply, trace)."""
        t = Turn(self, feed)
        t.wait()
        return t

    def draft_stats(self):
        import ctypes
        d, a = ctypes.c_long(), ctypes.c_long()
        err = L.recall_err()
        with self.model._lock:
            st = _dll.recall_loop_draft_stats(self._handle(), ctypes.byref(d), ctypes.byref(a), ctypes.byref(err))
        _check(st, err, "recall_loop_draft_stats")
        return d.value, a.value


_DONE = object()


class Turn:
    """A running turn. Iterating it yields Event objects as the loop emits them (the turn runs on
    a worker thread; the GIL is free while it computes). Leaving the iteration early (break,
    close()) cancels the turn (RECALL_E_CANCELLED; the loop stays usable). After the end:
    .events (all of them), .reply (Reply), .trace (the turn's record in the trace schema, a dict)
    and .trace_json (its bytes as `recall replay --trace` writes them).
    The record covers the whole conversation; the events cover what this turn computed: after a
    turn on the same loop, the state it carried is reused and its records are not streamed again,
    so the events are the record's last ones (all of them after reset())."""

    def __init__(self, loop, feed):
        self.loop = loop
        self.feed_ids, self._p = _ids(feed)
        self.feed = [int(x) for x in self.feed_ids]
        self.events = []
        self.reply = self.trace = self.trace_json = None
        self._q = queue.Queue()
        self._cancel = False
        self._error = None
        self._finished = False
        loop._handle()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        import ctypes
        lp, m = self.loop, self.loop.model

        def on_event(ctx, evp):
            ev = Event(evp.contents)
            self._q.put(ev)
            return 1 if self._cancel else 0

        cb = L.EVENT_FN(on_event)
        r = L.recall_reply()
        err = L.recall_err()
        try:
            with m._lock:
                h = lp._handle()
                st = _dll.recall_turn(h, self._p, len(self.feed_ids), cb, None, ctypes.byref(r), ctypes.byref(err))
                if st == 0:
                    ids = _take_ids(r.ids, r.n_ids)
                    _dll.recall_reply_free(h, ctypes.byref(r))
                    js, n = ctypes.c_void_p(), ctypes.c_size_t()
                    err2 = L.recall_err()
                    st2 = _dll.recall_turn_trace(h, ctypes.byref(js), ctypes.byref(n), ctypes.byref(err2))
                    _check(st2, err2, "recall_turn_trace")
                    # the reply's text as the library wrote it: bytes that are not UTF-8 (a token
                    # can end inside a character) kept as surrogates, written back unchanged
                    self.trace_json = ctypes.string_at(js.value, n.value).decode("utf-8", "surrogateescape")
                    _dll.recall_free(m._h, js.value)
                    self.trace = json.loads(self.trace_json)
                    self.reply = Reply(ids, r.n_gates, r.n_fires, r.n_rebuilds, r.min_margin,
                                       m.detokenize(ids))
            _check(st, err, "recall_turn")
        except BaseException as e:  # handed to the consumer
            self._error = e
        finally:
            self._q.put(_DONE)

    def __iter__(self):
        try:
            while not self._finished:
                ev = self._q.get()
                if ev is _DONE:
                    self._finished = True
                    break
                self.events.append(ev)
                yield ev
        finally:
            if self._thread.is_alive():  # left early: cancel, then drain
                self._cancel = True
                self.wait(raise_error=False)
        self._thread.join()
        if self._error is not None:
            raise self._error

    @property
    def cancelled(self):
        """True when the turn was left early (break, close()) and stopped there."""
        return isinstance(self._error, RecallError) and self._error.status == "CANCELLED"

    def close(self):
        """Cancels the turn if it is still running."""
        self._cancel = True
        self.wait(raise_error=False)

    def wait(self, raise_error=True):
        """Runs the turn to its end (collecting the events not yet iterated)."""
        while not self._finished:
            ev = self._q.get()
            if ev is _DONE:
                self._finished = True
                break
            self.events.append(ev)
        self._thread.join()
        if raise_error and self._error is not None:
            raise self._error
        return self


# ---- the benchmark's problems and whole traces ---------------------------------------------------

def build_problem(bench, i):
    """Problem i of a benchmark (recall_bench.json's format), drawn with random.Random(i) as the
    reference and `recall replay --problem i` draw it: a list of steps {"kind", "u", ["a"],
    ["kw", "val"]}. tools/replay/replay_loop.py has the same few lines on purpose: that replay is
    the independent check of the engine and this package must install without the checkout, so
    neither imports the other; the bitwise tests compare both with the CLI's draw."""
    import random
    r = random.Random(i)
    facts = r.sample(range(len(bench["facts"])), 3)
    casual = r.sample(bench["casual"], len(bench["casual"]))
    order = r.sample(range(3), 3)
    steps = []
    for f in facts:
        kw, val = bench["facts"][f]
        steps.append({"kind": "fact", "u": bench["fact_user"].format(kw=kw, val=val), "a": bench["fact_assistant"]})
    for u, a in casual[:9]:
        steps.append({"kind": "filler", "u": u, "a": a})
    for u, _ in casual[9:11]:
        steps.append({"kind": "probe", "u": u})
    for j in order:
        kw, val = bench["facts"][facts[j]]
        steps.append({"kind": "q", "u": bench["question_user"].format(kw=kw, val=val), "kw": kw, "val": val})
    return steps


def replay(model, bench, problem, on_turn=None, **loop_opts):
    """One benchmark problem through a loop of loop_opts, as `recall replay`: the trace document
    (a dict in the schema `recall compare` reads; write it with write_trace). bench: a dict or a
    path to the benchmark's JSON."""
    if not isinstance(bench, dict):
        with _builtin_open(bench, encoding="utf-8") as f:
            bench = json.load(f)
    steps = build_problem(bench, problem)
    with Loop(model, **loop_opts) as lp:
        history, turns = [], []
        for st in steps:
            if "a" in st:
                history += model.chat_segment(st["u"], st["a"], with_eos=bool(history))
                continue
            feed = history + model.chat_segment(st["u"], with_eos=bool(history))
            t = lp.reply(feed)
            rec = {"kind": st["kind"], "user": st["u"], "feed_len": len(feed)}
            rec.update(t.trace)
            rec["_trace_json"] = t.trace_json
            turns.append(rec)
            if on_turn:
                on_turn(len(turns) - 1, t)
            history = feed + t.reply.ids
        o = lp.opts
    doc = {"seed": problem, "mode": o["mode"], "arm": o["arm"], "kv": o["kv"], "numerics": o["numerics"],
           "threshold": float("%.9g" % o["threshold"]), "constants": {"RW": o["window"], "C": o["chunk"], "BLOCK": o["block"],
                                                      "RECALL_K": o["k"], "TURN_CAP": o["turn_cap"]},
           "producer": "python recall (librecall %s)" % lib_path}
    for key, default in (("edge", "off"), ("span", "block"), ("rerank", "off")):
        if o[key] != default:
            doc[key] = o[key]
    doc["steps"], doc["turns"], doc["final_history"] = steps, turns, history
    return doc


def _builtin_open(*a, **kw):
    import builtins
    return builtins.open(*a, **kw)


def _json_str(s):
    return json.dumps(s, ensure_ascii=False)


def write_trace(doc, path):
    """The trace document as `recall replay --trace` lays it out: one turn per line, each turn's
    record the library's own bytes (recall_turn_trace)."""
    head = {k: v for k, v in doc.items() if k not in ("steps", "turns", "final_history")}
    text = json.dumps(head, ensure_ascii=False)[:-1]
    text += ',\n"steps": ' + json.dumps(doc["steps"], ensure_ascii=False) + ',\n"turns": [\n'
    lines = []
    for t in doc["turns"]:
        body = t.get("_trace_json")
        if body is None:
            body = json.dumps({k: v for k, v in t.items() if k not in ("kind", "user", "feed_len")},
                              ensure_ascii=False)
        lines.append('{"kind": %s, "user": %s, "feed_len": %d, %s' % (_json_str(t["kind"]), _json_str(t["user"]),
                                                                     t["feed_len"], body[1:]))
    text += ",\n".join(lines) + '],\n"final_history": ' + json.dumps(doc["final_history"]) + "}\n"
    with _builtin_open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)


def read_trace(path):
    """A trace file as a dict (text that is not UTF-8 kept as surrogates, as write_trace keeps it)."""
    with _builtin_open(path, encoding="utf-8", errors="surrogateescape") as f:
        return json.load(f)
