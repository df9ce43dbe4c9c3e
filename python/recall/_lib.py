"""_lib.py - librecall.so through ctypes: the structs and signatures of src/recall.h.

The library is looked up in this order (the first that exists wins):
  1. the file named by the environment variable RECALL_LIB;
  2. librecall.so.0 / librecall.so next to this package (`make python` copies it there, so that
     `pip install ./python` installs it with the package);
  3. build/librecall.so of the checkout this package sits in (python/../build/);
  4. the system's librecall.so.0 (`make install`; the dynamic loader's search path).
Every entry point is called through ctypes.CDLL, which releases the GIL for the call's duration.
"""
import ctypes
import os

API_VERSION = 7  # the RECALL_API_VERSION these structs mirror

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_float_p = ctypes.POINTER(ctypes.c_float)
c_double_p = ctypes.POINTER(ctypes.c_double)


class recall_err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class recall_model_info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("vocab", "max_pos", "hidden", "layers", "bos_id", "eos_id")]


class recall_open_opts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("flags", ctypes.c_uint), ("max_memory", ctypes.c_uint64),
                ("allocator", ctypes.c_void_p), ("rope_scaling", ctypes.c_char_p), ("kv", ctypes.c_int),
                ("numerics", ctypes.c_int)]


class recall_model_dims(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t)]
                + [(n, ctypes.c_int) for n in ("vocab", "max_pos", "hidden", "layers", "bos_id", "eos_id", "heads",
                                               "kv_heads", "head_dim", "n_gate")]
                + [("gate_layers", ctypes.c_int * 8), ("gate_dim", ctypes.c_int), ("gate_threshold", ctypes.c_float)]
                + [(n, ctypes.c_int) for n in ("bridge_qdim", "bridge_kdim", "bert_hidden", "bert_max_ids", "n_sp",
                                               "pooler_hidden")])


class recall_forward_out(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("logits", c_float_p), ("logits_len", ctypes.c_size_t),
                ("logits_last", c_float_p), ("logits_last_len", ctypes.c_size_t),
                ("hidden", c_float_p), ("hidden_len", ctypes.c_size_t),
                ("q_gate", c_float_p), ("q_gate_len", ctypes.c_size_t)]


class recall_loop_opts(ctypes.Structure):
    _fields_ = ([("struct_size", ctypes.c_size_t)]
                + [(n, ctypes.c_int) for n in ("window", "block", "chunk", "k", "turn_cap", "buf_min")]
                + [("threshold", ctypes.c_float), ("mode", ctypes.c_int), ("arm", ctypes.c_int)]
                + [(n, ctypes.c_int) for n in ("fire_once", "hysteresis", "use_floor")]
                + [("floor", ctypes.c_float), ("reference_schedule", ctypes.c_int), ("max_feed", ctypes.c_size_t),
                   ("threads", ctypes.c_int), ("simd", ctypes.c_char_p), ("max_ctx", ctypes.c_int),
                   ("draft", ctypes.c_int), ("pooler_cache_mb", ctypes.c_int), ("kv", ctypes.c_int),
                   ("numerics", ctypes.c_int), ("edge", ctypes.c_int), ("span", ctypes.c_int),
                   ("rerank", ctypes.c_int)])


class recall_event(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("token", ctypes.c_int32), ("c0", ctypes.c_int), ("score", ctypes.c_float),
                ("fired", ctypes.c_int), ("injected", ctypes.c_int), ("n_candidates", ctypes.c_int),
                ("ids", c_int32_p), ("n_ids", ctypes.c_int), ("has_sp", ctypes.c_int), ("inj_len", ctypes.c_int),
                ("window_len", ctypes.c_int), ("reused", ctypes.c_int)]


class recall_reply(ctypes.Structure):
    _fields_ = [("ids", c_int32_p), ("n_ids", ctypes.c_size_t), ("n_gates", ctypes.c_int), ("n_fires", ctypes.c_int),
                ("n_rebuilds", ctypes.c_int), ("min_margin", ctypes.c_float)]


EVENT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(recall_event))

P = ctypes.c_void_p
E = ctypes.POINTER(recall_err)
S = ctypes.c_int  # recall_status
SZ = ctypes.c_size_t
_SIGNATURES = {
    "recall_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "recall_open2": (S, [ctypes.c_char_p, ctypes.POINTER(recall_open_opts), ctypes.POINTER(P), E]),
    "recall_open_mem2": (S, [P, SZ, ctypes.POINTER(recall_open_opts), ctypes.POINTER(P), E]),
    "recall_open_opts_init2": (None, [ctypes.POINTER(recall_open_opts), SZ]),
    "recall_close": (None, [P]),
    "recall_free": (None, [P, P]),
    "recall_model_get_info": (None, [P, ctypes.POINTER(recall_model_info)]),
    "recall_model_get_dims2": (None, [P, ctypes.POINTER(recall_model_dims), SZ]),
    "recall_tokenize": (S, [P, ctypes.c_char_p, SZ, ctypes.c_int, ctypes.POINTER(c_int32_p), ctypes.POINTER(SZ), E]),
    "recall_detokenize": (S, [P, c_int32_p, SZ, ctypes.c_int, ctypes.POINTER(P), ctypes.POINTER(SZ), E]),
    "recall_chat_segment": (S, [P, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(c_int32_p),
                                ctypes.POINTER(SZ), E]),
    "recall_forward": (S, [P, c_int32_p, SZ, c_float_p, SZ, E]),
    "recall_forward_out_init2": (None, [ctypes.POINTER(recall_forward_out), SZ]),
    "recall_forward_capture": (S, [P, c_int32_p, SZ, ctypes.POINTER(recall_forward_out), E]),
    "recall_score": (S, [P, c_int32_p, SZ, c_double_p, c_int32_p, SZ, E]),
    "recall_bert_tokenize": (S, [P, ctypes.c_char_p, SZ, ctypes.POINTER(c_int32_p), ctypes.POINTER(SZ), E]),
    "recall_embed": (S, [P, c_int32_p, SZ, c_float_p, SZ, E]),
    "recall_pool": (S, [P, c_int32_p, SZ, c_float_p, SZ, E]),
    "recall_gate": (S, [P, c_float_p, SZ, c_float_p, ctypes.POINTER(ctypes.c_int), E]),
    "recall_bridge": (S, [P, c_float_p, SZ, c_float_p, SZ, c_float_p, E]),
    "recall_loop_opts_init2": (None, [P, ctypes.POINTER(recall_loop_opts), SZ]),
    "recall_loop_open2": (S, [P, ctypes.POINTER(recall_loop_opts), ctypes.POINTER(P), E]),
    "recall_loop_close": (None, [P]),
    "recall_loop_reset": (None, [P]),
    "recall_turn": (S, [P, c_int32_p, SZ, EVENT_FN, P, ctypes.POINTER(recall_reply), E]),
    "recall_reply_free": (None, [P, ctypes.POINTER(recall_reply)]),
    "recall_turn_trace": (S, [P, ctypes.POINTER(P), ctypes.POINTER(SZ), E]),
    "recall_loop_draft_stats": (S, [P, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_long), E]),
}


def candidates():
    """The paths tried, in order (the module's docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if os.environ.get("RECALL_LIB"):
        out.append(os.environ["RECALL_LIB"])
    out += [os.path.join(here, n) for n in ("librecall.so.0", "librecall.so")]
    out.append(os.path.join(os.path.dirname(os.path.dirname(here)), "build", "librecall.so"))
    return out


def load():
    tried = []
    for path in candidates():
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
        tried.append(path)
    else:
        try:
            lib = ctypes.CDLL("librecall.so.0")
            path = "librecall.so.0"
        except OSError:
            raise ImportError("recall: librecall.so not found (tried %s and the system's librecall.so.0); run "
                              "`make python` in the checkout or set RECALL_LIB" % ", ".join(tried)) from None
    missing = [n for n in _SIGNATURES if not hasattr(lib, n)]
    if missing:
        raise ImportError("recall: %s lacks %s (API version %d needed; rebuild with `make python`)"
                          % (path, ", ".join(missing), API_VERSION))
    for name, (res, args) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    lib.path = path
    return lib
