#!/usr/bin/python3
"""replay_loop.py - an independent reference of the recall loop in torch fp32.

Written from the loop's specification (docs/LOOP.md), not from the engine's C code, so that a
trace of `recall replay` can be judged against a second implementation with `recall compare`.
Needs only Python 3, torch (1.13 or newer) and numpy; optionally the `regex` module for the
Qwen2 pre-tokenizer (`\\p{L}`, `\\p{N}`; Debian: python3-regex).

Everything it runs is written out here: safetensors / npz / pooler.pt readers, the byte-level
BPE tokenizer (encode and decode) and the BERT WordPiece tokenizer, the Qwen2 decoder with a KV
cache, the AttnPoolSP pooler, the gate, the bridge head, the BERT encoder (CLS + L2), torch.topk
for the retrieval, the benchmark problems (random.Random(N)), and the loop itself in both modes
(faithful: every sealed block runs a standalone forward whose q_proj capture replaces the gate
feature; clean: no seal forward) for the arms SP, RC_bge and FULL.

    replay_loop.py run --world DIR --bench FILE --problem N [--mode faithful|clean]
                       [--arm RC_bge|SP|FULL] [--quant fp32|nf4] [--threshold T] --trace OUT.json
    replay_loop.py selfcheck --world DIR     (stage checks against the HF dumps a world ships)

DIR holds qwen2/, bge/, pooler.pt (or pooler.safetensors / .npz), gate.npz and bge_head.npz;
the loop geometry comes from qwen2/config.json's optional "recall_loop" and gate.npz's
optional `layers` (see docs/REPLAY.md). The trace has the schema that
`recall replay --trace` writes and `recall compare` reads.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time
import unicodedata

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(int(os.environ.get("REPLAY_THREADS", "1")))

# ---- file readers -------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
              "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """name -> fp32 (or integer) torch tensor; BF16 is widened exactly (its bits are the high half)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = blob[base + lo:base + hi]
        shape = tuple(info["shape"])
        if info["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u16.view(np.float32).reshape(shape)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")).reshape(shape)
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float32)
        out[name] = torch.from_numpy(np.array(arr))
    return out


def read_model_weights(folder):
    """model.safetensors, or the shards a model.safetensors.index.json names."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for s in shards:
        out.update(read_safetensors(os.path.join(folder, s)))
    return out


def read_npz(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: np.array(z[k]) for k in z.files}


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ---- byte-level BPE (the Qwen2 / DeepSeek tokenizer.json) ---------------------------------

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_alphabet():
    """GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100.."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _split_added(text, added):
    """Pieces of text, each (string, id or None): the added tokens are matched first, leftmost
    then longest (HF AddedVocabulary), on the raw text."""
    if not added:
        return [(text, None)] if text else []
    out, i = [], 0
    keys = sorted(added, key=len, reverse=True)
    while i < len(text):
        best = None
        for k in keys:  # earliest start; at one start the longest (keys are longest first)
            j = text.find(k, i)
            if j >= 0 and (best is None or j < best[0]):
                best = (j, k)
        if best is None:
            out.append((text[i:], None))
            break
        j, k = best
        if j > i:
            out.append((text[i:j], None))
        out.append((k, added[k]))
        i = j + len(k)
    return out


class BPETokenizer:
    def __init__(self, folder):
        tj = read_json(os.path.join(folder, "tokenizer.json"))
        model = tj["model"]
        if model.get("type") != "BPE":
            raise ValueError("%s/tokenizer.json: model type %r, expected BPE" % (folder, model.get("type")))
        self.vocab = dict(model["vocab"])
        self.ranks = {}
        for r, m in enumerate(model["merges"]):
            a, b = m if isinstance(m, list) else m.split(" ", 1)
            self.ranks[(a, b)] = r
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self.added = {}
        for a in tj.get("added_tokens", []):
            if a.get("normalized"):
                raise ValueError("%s: normalized added token %r is not supported" % (folder, a["content"]))
            self.added[a["content"]] = a["id"]
            self.vocab.setdefault(a["content"], a["id"])
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        for t, i in self.added.items():
            self.id_to_token[i] = t
        norm = tj.get("normalizer")
        self.nfc = bool(norm) and norm.get("type") == "NFC"
        if norm and norm.get("type") not in ("NFC",):
            raise ValueError("%s: normalizer %r is not supported" % (folder, norm.get("type")))
        self.pattern = self._find_pattern(tj.get("pre_tokenizer"))
        try:
            import regex  # \p{L} / \p{N}: the stdlib re has no Unicode property classes
        except ImportError:
            raise SystemExit("replay_loop.py: the `regex` module is needed for the Qwen2 pre-tokenizer "
                             "(Debian: apt-get install python3-regex)")
        self.rx = regex.compile(self.pattern)
        self.byte_to_char = _byte_alphabet()
        self.char_to_byte = {c: b for b, c in self.byte_to_char.items()}
        self.cache = {}
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        self.config = read_json(cfg_path) if os.path.exists(cfg_path) else {}

    @staticmethod
    def _find_pattern(pre):
        if pre is None:
            return QWEN2_PATTERN
        items = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
        for p in items:
            if p.get("type") == "Split":
                if p.get("behavior") != "Isolated" or p.get("invert"):
                    raise ValueError("pre-tokenizer Split with behavior %r is not supported" % p.get("behavior"))
                return p["pattern"]["Regex"]
        return QWEN2_PATTERN

    def special_id(self, key):
        """The id of tokenizer_config's bos_token / eos_token (a string or {content})."""
        v = self.config.get(key)
        if isinstance(v, dict):
            v = v.get("content")
        return self.vocab.get(v) if v is not None else None

    def _bpe(self, word):
        if word in self.cache:
            return self.cache[word]
        if self.ignore_merges and word in self.vocab:
            ids = [self.vocab[word]]
        else:
            syms = list(word)
            while len(syms) > 1:  # merge the lowest-rank pair, leftmost first
                best, at = None, -1
                for i in range(len(syms) - 1):
                    r = self.ranks.get((syms[i], syms[i + 1]))
                    if r is not None and (best is None or r < best):
                        best, at = r, i
                if best is None:
                    break
                syms[at:at + 2] = [syms[at] + syms[at + 1]]
            ids = [self.vocab[s] for s in syms]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        """add_special_tokens=False."""
        ids = []
        for piece, aid in _split_added(text, self.added):
            if aid is not None:
                ids.append(aid)
                continue
            if self.nfc:
                piece = unicodedata.normalize("NFC", piece)
            pos = 0
            for m in self.rx.finditer(piece):  # Isolated: matches and the gaps between them
                if m.start() > pos:
                    ids += self._word(piece[pos:m.start()])
                ids += self._word(m.group(0))
                pos = m.end()
            if pos < len(piece):
                ids += self._word(piece[pos:])
        return ids

    def _word(self, s):
        if not s:
            return []
        return self._bpe("".join(self.byte_to_char[b] for b in s.encode("utf-8")))

    def decode(self, ids):
        """HF decode(skip_special_tokens=False): each token's bytes (its ByteLevel bytes, or its
        UTF-8 when a char is outside the byte alphabet, e.g. the fullwidth bars of the specials),
        joined, then invalid UTF-8 replaced per maximal subpart (Rust from_utf8_lossy)."""
        out = bytearray()
        for i in ids:
            t = self.id_to_token.get(int(i))
            if t is None:
                continue
            try:
                out += bytes(self.char_to_byte[c] for c in t)
            except KeyError:
                out += t.encode("utf-8")
        return out.decode("utf-8", errors="replace")


# ---- BERT WordPiece (HF BertNormalizer + BertPreTokenizer + WordPiece) ---------------------

# char::is_whitespace (the White_Space property)
_WHITE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(c):
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in _CJK)


def _is_punc(c):
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


class WordPieceTokenizer:
    def __init__(self, folder):
        tj_path = os.path.join(folder, "tokenizer.json")
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        cfg = read_json(cfg_path) if os.path.exists(cfg_path) else {}
        self.lowercase = bool(cfg.get("do_lower_case", True))
        self.strip_accents = cfg.get("strip_accents")
        self.chinese = bool(cfg.get("tokenize_chinese_chars", True))
        self.clean = True
        self.max_chars = 100
        self.prefix = "##"
        self.unk = "[UNK]"
        specials = [cfg.get(k, d) for k, d in (("pad_token", "[PAD]"), ("unk_token", "[UNK]"), ("cls_token", "[CLS]"),
                                              ("sep_token", "[SEP]"), ("mask_token", "[MASK]"))]
        if os.path.exists(tj_path):
            # The fast tokenizer is what transformers loads when tokenizer.json exists: its
            # WordPiece vocab wins over vocab.txt.
            tj = read_json(tj_path)
            model = tj["model"]
            if model.get("type") != "WordPiece":
                raise ValueError("%s: model type %r, expected WordPiece" % (tj_path, model.get("type")))
            self.vocab = dict(model["vocab"])
            self.unk = model.get("unk_token", self.unk)
            self.prefix = model.get("continuing_subword_prefix", self.prefix)
            self.max_chars = model.get("max_input_chars_per_word", self.max_chars)
            n = tj.get("normalizer") or {}
            if n.get("type") == "BertNormalizer":
                self.clean = n.get("clean_text", True)
                self.chinese = n.get("handle_chinese_chars", True)
                self.strip_accents = n.get("strip_accents")
                self.lowercase = n.get("lowercase", True)
            self.added = {a["content"]: a["id"] for a in tj.get("added_tokens", [])}
        else:
            with open(os.path.join(folder, "vocab.txt"), encoding="utf-8") as f:
                toks = f.read().split("\n")
            if toks and toks[-1] == "":
                toks.pop()
            self.vocab = {}
            for i, t in enumerate(toks):
                self.vocab.setdefault(t, i)
            self.added = {s: self.vocab[s] for s in specials if s in self.vocab}
        self.cls = self.vocab[cfg.get("cls_token", "[CLS]")]
        self.sep = self.vocab[cfg.get("sep_token", "[SEP]")]
        self.unk_id = self.vocab[self.unk]

    def _normalize(self, s):
        if self.clean:
            s = "".join(" " if c in _WHITE else c for c in s
                        if not (c == "\0" or c == "\ufffd" or (c not in "\t\n\r" and unicodedata.category(c)[0] == "C")))
        if self.chinese:
            s = "".join(" %s " % c if _is_cjk(c) else c for c in s)
        strip = self.strip_accents if self.strip_accents is not None else self.lowercase
        if strip:
            s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            s = "".join(c.lower() for c in s)  # per char, as the Rust normalizer (no final sigma rule)
        return s

    def _words(self, s):
        words, cur = [], []
        for c in s:
            if c in _WHITE:
                if cur:
                    words.append("".join(cur))
                    cur = []
            elif _is_punc(c):
                if cur:
                    words.append("".join(cur))
                    cur = []
                words.append(c)
            else:
                cur.append(c)
        if cur:
            words.append("".join(cur))
        return words

    def _wordpiece(self, w):
        if len(w) > self.max_chars:
            return [self.unk_id]
        out, start = [], 0
        while start < len(w):
            end, cur = len(w), None
            while start < end:
                sub = w[start:end]
                if start > 0:
                    sub = self.prefix + sub
                if sub in self.vocab:
                    cur = self.vocab[sub]
                    break
                end -= 1
            if cur is None:
                return [self.unk_id]
            out.append(cur)
            start = end
        return out

    def encode(self, text, max_len=512):
        """[CLS] ids [SEP], truncated to max_len (sentence-transformers max_seq_length)."""
        ids = []
        for piece, aid in _split_added(text, self.added):
            if aid is not None:
                ids.append(aid)
                continue
            for w in self._words(self._normalize(piece)):
                ids += self._wordpiece(w)
        return [self.cls] + ids[:max_len - 2] + [self.sep]


# ---- models -------------------------------------------------------------------------------

NF4_CODES = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
             -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
             0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
             0.7229568362236023, 1.0]


def nf4_quantize(w):
    """(codes uint8 per element, absmax per 64-block) of a weight, blocks over the row-major flattening."""
    x = w.reshape(-1).float()
    nblk = (x.numel() + 63) // 64
    pad = torch.zeros(nblk * 64, dtype=torch.float32)
    pad[:x.numel()] = x
    blk = pad.view(nblk, 64)
    absmax = blk.abs().amax(dim=1)
    inv = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))  # fp32 reciprocal
    n = blk * inv[:, None]
    c = np.array(NF4_CODES, dtype=np.float64)
    mids = torch.tensor(((c[:-1] + c[1:]) / 2).astype(np.float32))
    codes = (n[..., None] > mids).sum(-1).to(torch.uint8)
    codes[absmax == 0] = 7
    return codes.view(-1)[:x.numel()], absmax


def nf4_dequantize(w):
    codes, absmax = nf4_quantize(w)
    table = torch.tensor(NF4_CODES, dtype=torch.float32)
    nblk = absmax.numel()
    full = torch.zeros(nblk * 64, dtype=torch.long)
    full[:codes.numel()] = codes.long()
    vals = table[full].view(nblk, 64) * absmax[:, None]
    return vals.view(-1)[:codes.numel()].view(w.shape)


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class Qwen2:
    """Qwen2ForCausalLM in fp32 with a KV cache (RoPE rotate-half, GQA, RMSNorm, q/k/v bias).
    Every forward records the q_proj output (after bias, before RoPE) of the capture layers at
    the last row: the gate feature."""

    def __init__(self, folder, quant="fp32", capture_layers=(8, 14, 20)):
        cfg = read_json(os.path.join(folder, "config.json"))
        self.cfg = cfg
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim") or self.H // self.nh
        self.nl = cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        rp = cfg.get("rope_parameters") or {}
        self.theta = float(cfg.get("rope_theta", rp.get("rope_theta", 10000.0)))
        scaling = cfg.get("rope_scaling") or ({} if rp.get("rope_type", "default") == "default" else rp)
        if scaling and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
            raise ValueError("%s: rope scaling %r is not supported by the replay" % (folder, scaling))
        w = read_model_weights(folder)
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed) if not cfg.get("tie_word_embeddings") else self.embed
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(self.nl):
            p = "model.layers.%d." % i
            L = {k: w[p + n] for k, n in (("ln1", "input_layernorm.weight"), ("ln2", "post_attention_layernorm.weight"),
                                         ("wq", "self_attn.q_proj.weight"), ("bq", "self_attn.q_proj.bias"),
                                         ("wk", "self_attn.k_proj.weight"), ("bk", "self_attn.k_proj.bias"),
                                         ("wv", "self_attn.v_proj.weight"), ("bv", "self_attn.v_proj.bias"),
                                         ("wo", "self_attn.o_proj.weight"), ("wg", "mlp.gate_proj.weight"),
                                         ("wu", "mlp.up_proj.weight"), ("wd", "mlp.down_proj.weight"))}
            if quant == "nf4":
                for k in ("wq", "wk", "wv", "wo", "wg", "wu", "wd"):
                    L[k] = nf4_dequantize(L[k])
            self.layers.append(L)
        self.capture = tuple(capture_layers)
        d = self.hd
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.rope_len = 0
        self._grow_rope(4096)
        self.q_last = None  # the gate feature of the latest forward
        self.reset_cache()

    def _grow_rope(self, n):
        if n <= self.rope_len:
            return
        n = max(n, 2 * self.rope_len)
        pos = torch.arange(n, dtype=torch.float32)
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.rope_len = n

    def reset_cache(self):
        self.cap = 0
        self.len = 0
        self.kc = [None] * self.nl
        self.vc = [None] * self.nl

    def crop(self, n):
        self.len = min(self.len, n)

    def _ensure(self, need):
        if need <= self.cap:
            return
        cap = max(need, 2 * self.cap, 1024)
        for i in range(self.nl):
            k = torch.zeros(self.nkv, cap, self.hd)
            v = torch.zeros(self.nkv, cap, self.hd)
            if self.kc[i] is not None:
                k[:, :self.len] = self.kc[i][:, :self.len]
                v[:, :self.len] = self.vc[i][:, :self.len]
            self.kc[i], self.vc[i] = k, v
        self.cap = cap

    @staticmethod
    def _rms(x, w, eps):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + eps))

    @staticmethod
    def _rot(x, cos, sin):
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
        return x * cos + rot * sin

    def forward(self, x, logits=True, last_layer=None):
        """x: [T, H] input embeddings appended to the cache at positions len..len+T-1. Returns the
        last row's logits (or None). Runs layers [0, last_layer] only when given (no logits)."""
        T = x.shape[0]
        p0 = self.len
        self._ensure(p0 + T)
        self._grow_rope(p0 + T)
        cos, sin = self.cos[p0:p0 + T], self.sin[p0:p0 + T]
        S = p0 + T
        grp = self.nh // self.nkv
        mask = None
        if T > 1:
            qi = torch.arange(T)[:, None] + p0
            kj = torch.arange(S)[None, :]
            mask = torch.where(kj <= qi, 0.0, float("-inf")).to(torch.float32)
        qcap = {}
        nl = self.nl if last_layer is None else last_layer + 1
        for li in range(nl):
            L = self.layers[li]
            h = self._rms(x, L["ln1"], self.eps)
            q = F.linear(h, L["wq"], L["bq"])
            if li in self.capture:
                qcap[li] = q[-1].clone()
            k = F.linear(h, L["wk"], L["bk"])
            v = F.linear(h, L["wv"], L["bv"])
            q = self._rot(q.view(T, self.nh, self.hd).transpose(0, 1), cos, sin)      # [nh, T, hd]
            k = self._rot(k.view(T, self.nkv, self.hd).transpose(0, 1), cos, sin)     # [nkv, T, hd]
            v = v.view(T, self.nkv, self.hd).transpose(0, 1)
            self.kc[li][:, p0:S] = k
            self.vc[li][:, p0:S] = v
            K, V = self.kc[li][:, :S], self.vc[li][:, :S]
            qg = q.reshape(self.nkv, grp * T, self.hd)                               # heads h = kv * grp + g
            sc = torch.matmul(qg, K.transpose(1, 2)) / math.sqrt(self.hd)            # [nkv, grp*T, S]
            if mask is not None:
                sc = sc.view(self.nkv, grp, T, S) + mask
                sc = sc.view(self.nkv, grp * T, S)
            a = torch.matmul(torch.softmax(sc, dim=-1), V)                           # [nkv, grp*T, hd]
            a = a.view(self.nh, T, self.hd).transpose(0, 1).reshape(T, self.nh * self.hd)
            x = x + F.linear(a, L["wo"])
            h = self._rms(x, L["ln2"], self.eps)
            x = x + F.linear(F.silu(F.linear(h, L["wg"])) * F.linear(h, L["wu"]), L["wd"])
        self.len = S
        self.q_last = torch.cat([qcap[li] for li in self.capture]) if len(qcap) == len(self.capture) else None
        if not logits:
            return None
        return F.linear(self._rms(x[-1:], self.norm, self.eps), self.lm_head)[0]

    def embed_ids(self, ids):
        return self.embed[torch.tensor(ids, dtype=torch.long)]


class Pooler:
    """AttnPoolSP: n_sp learned queries attend to the positionally encoded token embeddings."""

    def __init__(self, path, heads=None):
        if path.endswith(".safetensors"):
            sd, args = read_safetensors(path), {}
        elif path.endswith(".npz"):
            sd, args = {k: torch.from_numpy(v).float() for k, v in read_npz(path).items()}, {}
        else:
            ck = torch.load(path, map_location="cpu")
            sd = ck["pooler"]
            args = ck.get("args") or ck.get("src_args") or {}
        self.sd = {k: v.float() for k, v in sd.items()}
        self.heads = heads or int(args.get("heads", 8))
        self.n_sp, self.H = self.sd["query"].shape
        self.nblocks = sum(1 for k in self.sd if k.endswith(".lnq1.weight"))
        self.out_scale = float(self.sd["out_scale"].abs())

    def _ln(self, x, pre):
        return F.layer_norm(x, (self.H,), self.sd[pre + ".weight"], self.sd[pre + ".bias"], 1e-5)

    def _mha(self, pre, q, kv):
        W, b = self.sd[pre + ".in_proj_weight"], self.sd[pre + ".in_proj_bias"]
        H, nh = self.H, self.heads
        d = H // nh
        Q = F.linear(q, W[:H], b[:H]).view(-1, nh, d).transpose(0, 1)
        K = F.linear(kv, W[H:2 * H], b[H:2 * H]).view(-1, nh, d).transpose(0, 1)
        V = F.linear(kv, W[2 * H:], b[2 * H:]).view(-1, nh, d).transpose(0, 1)
        a = torch.softmax(torch.matmul(Q, K.transpose(1, 2)) / math.sqrt(d), dim=-1)
        o = torch.matmul(a, V).transpose(0, 1).reshape(-1, H)
        return F.linear(o, self.sd[pre + ".out_proj.weight"], self.sd[pre + ".out_proj.bias"])

    def __call__(self, past):
        """past: [L, H] fp32 token embeddings -> [n_sp, H], every row of norm |out_scale|."""
        L, H = past.shape
        q = self.sd["query"].clone()
        P = None
        if L > 0:
            n = max(L, 1024)
            pos = torch.arange(n, dtype=torch.float32)[:, None]
            div = torch.exp(torch.arange(0, H, 2, dtype=torch.float32) * (-math.log(10000.0) / H))
            pe = torch.zeros(n, H)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)
            P = past + pe[:L]
        for i in range(self.nblocks):
            b = "blocks.%d" % i
            if P is not None:
                kn = self._ln(P, b + ".lnk")
                q = q + self._mha(b + ".cross", self._ln(q, b + ".lnq1"), kn)
            n = self._ln(q, b + ".lnq2")
            q = q + self._mha(b + ".selfa", n, n)
            h = self._ln(q, b + ".lnq3")
            q = q + F.linear(gelu_erf(F.linear(h, self.sd[b + ".ffn.0.weight"], self.sd[b + ".ffn.0.bias"])),
                             self.sd[b + ".ffn.2.weight"], self.sd[b + ".ffn.2.bias"])
        sp = self._ln(q, "ln_out")
        return sp / sp.norm(dim=-1, keepdim=True).clamp_min(1e-6) * self.out_scale


class Gate:
    def __init__(self, path):
        z = read_npz(path)
        self.coef, self.mean, self.scale = (torch.from_numpy(z[k].astype(np.float32)) for k in ("coef", "mean", "scale"))
        self.intercept = float(np.float32(z["intercept"]))
        self.thresh = np.float32(z["thresh"]) if "thresh" in z else np.float32(0.0)
        self.extra = {k: z[k] for k in z if k not in ("coef", "intercept", "mean", "scale", "thresh")}

    def score(self, f):
        """((f - mean) / scale) . coef in float32, plus the intercept (StandardScaler + logistic)."""
        return float(torch.dot((f - self.mean) / self.scale, self.coef)) + self.intercept


class Bridge:
    def __init__(self, path):
        z = read_npz(path)
        self.w = {k: torch.from_numpy(v.astype(np.float32)) for k, v in z.items() if k.startswith("W")}

    def _tower(self, t, x):
        h = gelu_erf(F.linear(x, self.w[t + ".0.weight"], self.w[t + ".0.bias"]))
        return F.linear(h, self.w[t + ".2.weight"], self.w[t + ".2.bias"])

    def query(self, f):
        return self._tower("Wq", f)

    def key(self, e):
        return self._tower("Wk", e)


class Bert:
    """BertModel -> last_hidden_state[0] (CLS) -> L2 normalised (sentence-transformers)."""

    def __init__(self, folder):
        cfg = read_json(os.path.join(folder, "config.json"))
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nl = cfg["num_hidden_layers"]
        self.eps = cfg.get("layer_norm_eps", 1e-12)
        if cfg.get("hidden_act", "gelu") != "gelu":
            raise ValueError("%s: hidden_act %r, expected gelu" % (folder, cfg.get("hidden_act")))
        w = read_model_weights(folder)
        self.w = {(k[5:] if k.startswith("bert.") else k): v for k, v in w.items()}
        st = os.path.join(folder, "sentence_bert_config.json")
        self.max_len = int(read_json(st).get("max_seq_length", 512)) if os.path.exists(st) else 512
        pool = os.path.join(folder, "1_Pooling", "config.json")
        if os.path.exists(pool) and not read_json(pool).get("pooling_mode_cls_token", False):
            raise ValueError("%s: only CLS pooling is supported" % pool)
        self.tok = WordPieceTokenizer(folder)

    def _ln(self, x, pre):
        return F.layer_norm(x, (self.H,), self.w[pre + ".weight"], self.w[pre + ".bias"], self.eps)

    def _lin(self, x, pre):
        return F.linear(x, self.w[pre + ".weight"], self.w[pre + ".bias"])

    def encode_ids(self, ids):
        w = self.w
        T = len(ids)
        x = (w["embeddings.word_embeddings.weight"][torch.tensor(ids)] + w["embeddings.position_embeddings.weight"][:T]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        d = self.H // self.nh
        for i in range(self.nl):
            p = "encoder.layer.%d." % i
            q = self._lin(x, p + "attention.self.query").view(T, self.nh, d).transpose(0, 1)
            k = self._lin(x, p + "attention.self.key").view(T, self.nh, d).transpose(0, 1)
            v = self._lin(x, p + "attention.self.value").view(T, self.nh, d).transpose(0, 1)
            a = torch.softmax(torch.matmul(q, k.transpose(1, 2)) / math.sqrt(d), dim=-1)
            c = torch.matmul(a, v).transpose(0, 1).reshape(T, self.H)
            x = self._ln(self._lin(c, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = gelu_erf(self._lin(x, p + "intermediate.dense"))
            x = self._ln(self._lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        cls = x[0]
        return cls / cls.norm().clamp_min(1e-12)

    def encode_text(self, text):
        return self.encode_ids(self.tok.encode(text, self.max_len))


# ---- the world and its loop geometry ------------------------------------------------------

DEFAULT_GEOMETRY = {"RW": 512, "C": 64, "BLOCK": 128, "RECALL_K": 2, "TURN_CAP": 110, "BUF_MIN": 16,
                    "LAYERS": [8, 14, 20]}
# qwen2/config.json's optional "recall_loop" object -> the trace's constant names
LOOP_KEYS = {"window": "RW", "chunk": "C", "block": "BLOCK", "k": "RECALL_K", "turn_cap": "TURN_CAP",
             "buf_min": "BUF_MIN"}


def load_geometry(qwen2_cfg, gate):
    """The reference's geometry, overridden by config.json's "recall_loop" (window, block, chunk,
    k, turn_cap, buf_min; each optional) and by the gate file's integer array `layers` (the
    gate layers in feature order)."""
    g = dict(DEFAULT_GEOMETRY)
    for k, v in (qwen2_cfg.get("recall_loop") or {}).items():
        if k not in LOOP_KEYS:
            raise ValueError("config.json: recall_loop.%s is not a loop key (%s)" % (k, ", ".join(LOOP_KEYS)))
        g[LOOP_KEYS[k]] = int(v)
    if "layers" in gate.extra:
        g["LAYERS"] = [int(x) for x in np.asarray(gate.extra["layers"]).reshape(-1)]
    return g


class World:
    def __init__(self, folder, quant="fp32", geometry=None):
        self.folder = folder
        self.gate = Gate(os.path.join(folder, "gate.npz"))
        self.geo = load_geometry(read_json(os.path.join(folder, "qwen2", "config.json")), self.gate)
        if geometry:
            self.geo.update({k: v for k, v in geometry.items() if v is not None})
        self.tok = BPETokenizer(os.path.join(folder, "qwen2"))
        self.llm = Qwen2(os.path.join(folder, "qwen2"), quant, self.geo["LAYERS"])
        for p in ("pooler.pt", "pooler.safetensors", "pooler.npz"):
            if os.path.exists(os.path.join(folder, p)):
                self.pooler = Pooler(os.path.join(folder, p))
                break
        else:
            raise FileNotFoundError("%s: no pooler.pt / pooler.safetensors / pooler.npz" % folder)
        self.bridge = Bridge(os.path.join(folder, "bge_head.npz"))
        self.bert = Bert(os.path.join(folder, "bge"))
        cfg = self.llm.cfg
        self.bos = self.tok.special_id("bos_token")
        if self.bos is None:
            self.bos = cfg.get("bos_token_id")
        self.eos = self.tok.special_id("eos_token")
        if self.eos is None:
            self.eos = cfg.get("eos_token_id")
        self.eos_text = self.tok.id_to_token[self.eos]


# ---- the benchmark problems ---------------------------------------------------------------

def build_problem(bench, i):
    """Problem i, drawn as the reference does with random.Random(i)."""
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


# ---- the recall loop ----------------------------------------------------------------------

def topk_chosen(scores, k):
    """torch.topk on CPU (its tie order is the reference's), then chronological order."""
    _, idx = torch.topk(scores, k)
    return sorted(int(i) for i in idx)


class Loop:
    def __init__(self, world, mode="faithful", arm="RC_bge", threshold=None):
        if mode not in ("faithful", "clean"):
            raise ValueError("mode %r: expected faithful or clean" % mode)
        if arm not in ("RC_bge", "SP", "FULL"):
            raise ValueError("arm %r: expected RC_bge, SP or FULL" % arm)
        self.w, self.mode, self.arm = world, mode, arm
        self.thr = np.float32(world.gate.thresh if threshold is None else threshold)

    def _seal_feature(self, block_ids):
        """faithful mode: a standalone forward of the sealed block (no BOS, positions 0..),
        whose q_proj capture replaces the gate feature; the decode cache is left alone."""
        llm = self.w.llm
        saved = (llm.kc, llm.vc, llm.len, llm.cap)
        llm.reset_cache()
        llm.forward(llm.embed_ids(block_ids), logits=False, last_layer=max(self.w.geo["LAYERS"]))
        q = llm.q_last
        llm.kc, llm.vc, llm.len, llm.cap = saved
        return q

    def _retrieve(self, blocks, buf, f):
        w, geo = self.w, self.w.geo
        cands = list(blocks) + ([list(buf)] if len(buf) >= geo["BUF_MIN"] else [])
        qv = w.bridge.query(f)
        scores = torch.stack([torch.dot(qv, w.bridge.key(w.bert.encode_text(w.tok.decode(c)))) for c in cands])
        top = topk_chosen(scores, min(geo["RECALL_K"], len(cands)))
        rid = [t for i in top for t in cands[i]]
        return cands, scores, top, rid

    def reply(self, feed):
        w, geo, llm = self.w, self.w.geo, self.w.llm
        RW, C, BLOCK, CAP = geo["RW"], geo["C"], geo["BLOCK"], geo["TURN_CAP"]
        rc = self.arm.startswith("RC")
        rec = {"gates": [], "fires": [], "rebuilds": [], "rebuild_top5": [], "margins": []}
        gen, kept, absorbed, fi, newtok = [], [], 0, 0, 0
        blocks, buf, rid_cur = [], [], None
        llm.reset_cache()
        prime_last = llm.forward(llm.embed_ids([w.bos]))
        gq = llm.q_last
        MQ = llm.len
        done = False
        while not done:
            c0 = len(gen)
            R = c0 if self.arm == "FULL" else min(c0, RW)
            nd = c0 - R
            if nd > absorbed:                                   # (1) eviction
                new = gen[absorbed:nd]
                if rc:
                    buf += new
                    while len(buf) >= BLOCK:
                        blk, buf = buf[:BLOCK], buf[BLOCK:]
                        blocks.append(blk)
                        if self.mode == "faithful":
                            gq = self._seal_feature(blk)
                kept += new
                absorbed = nd
            if rc and (blocks or len(buf) >= geo["BUF_MIN"]):  # (2) gate
                s = w.gate.score(gq)
                fired = s > float(self.thr)
                rec["gates"].append([c0, s, fired])
                if fired:
                    cands, scores, top, rid = self._retrieve(blocks, buf, gq)
                    if rid:
                        rid_cur = rid
                        rec["fires"].append({"c0": c0, "score": s, "ncand": len(cands),
                                             "bridge": [float(x) for x in scores], "top": top, "rid": rid,
                                             "injected": True})
            parts = []                                          # (3) rebuild
            has_sp = bool(kept) and self.arm != "FULL"
            if has_sp:
                parts.append(w.pooler(llm.embed_ids(kept)))
            if rid_cur:
                parts.append(llm.embed_ids(rid_cur))
            if R > 0:
                parts.append(llm.embed_ids(gen[c0 - R:c0]))
            llm.crop(MQ)
            if parts:
                last = llm.forward(torch.cat(parts))
                gq = llm.q_last
            else:
                last = prime_last
            rec["rebuilds"].append([c0, int(has_sp), len(rid_cur or []), R])
            v5, i5 = torch.topk(last, 5)
            rec["rebuild_top5"].append([c0, [int(i) for i in i5], [float(x) for x in v5]])
            for _ in range(C):                                  # (4) chunk
                if fi < len(feed):
                    t = feed[fi]
                    fi += 1
                else:
                    v2, i2 = torch.topk(last, 2)
                    t = int(torch.argmax(last))
                    rec["margins"].append([len(gen), float(v2[0] - v2[1])])
                    if t == w.eos or newtok >= CAP:
                        done = True
                        break
                    newtok += 1
                gen.append(t)
                last = llm.forward(llm.embed_ids([t]))
                gq = llm.q_last
        return gen[len(feed):], rec


def chat_segment(world, has_history, user, assistant=None):
    return (world.eos_text if has_history else "") + "<｜User｜>" + user + "<｜Assistant｜>" + (assistant or "")


def run_problem(world, bench, problem, mode, arm, threshold=None, quant="fp32", log=sys.stderr):
    loop = Loop(world, mode, arm, threshold)
    steps = build_problem(bench, problem)
    history, turns = [], []
    t_start = time.time()
    for st in steps:
        if "a" in st:  # forced turn: user and assistant in one segment
            history += world.tok.encode(chat_segment(world, bool(history), st["u"], st["a"]))
            continue
        feed = history + world.tok.encode(chat_segment(world, bool(history), st["u"]))
        t0 = time.time()
        reply, rec = loop.reply(feed)
        margins = [m for _, m in rec["margins"]]
        turns.append({"kind": st["kind"], "user": st["u"], "feed_len": len(feed), "reply": reply,
                      "reply_text": world.tok.decode(reply), "gates": rec["gates"], "fires": rec["fires"],
                      "rebuilds": rec["rebuilds"], "rebuild_top5": rec["rebuild_top5"],
                      "greedy_min_margin": min(margins) if margins else None,
                      "greedy_low_margin": [[p, m] for p, m in rec["margins"] if m < 1e-3]})
        history = feed + reply
        if log:
            print("turn %d (%s): feed %d tokens, reply %d tokens, %d gate checks, %d fires (%.1f s)"
                  % (len(turns), st["kind"], len(feed), len(reply), len(rec["gates"]), len(rec["fires"]),
                     time.time() - t0), file=log)
    geo = world.geo
    return {"seed": problem, "mode": mode, "arm": arm, "threshold": float(loop.thr), "quant": quant,
            "producer": "tools/replay/replay_loop.py (torch %s, fp32)" % torch.__version__,
            "constants": {"RW": geo["RW"], "C": geo["C"], "BLOCK": geo["BLOCK"], "RECALL_K": geo["RECALL_K"],
                          "TURN_CAP": geo["TURN_CAP"], "BUF_MIN": geo["BUF_MIN"], "LAYERS": list(geo["LAYERS"])},
            "steps": steps, "turns": turns, "final_history": history, "seconds": round(time.time() - t_start, 1)}


# ---- trace output -------------------------------------------------------------------------

def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def write_trace(doc, path):
    """One turn per line; written to PATH.tmp.PID then renamed."""
    body = dict(doc)
    turns = body.pop("turns")
    hist = body.pop("final_history")
    lines = [json.dumps(_finite(t), ensure_ascii=True) for t in turns]
    text = json.dumps(_finite(body), ensure_ascii=True)[:-1]
    text += ',\n"turns": [\n' + ",\n".join(lines) + '],\n"final_history": ' + json.dumps(hist) + "}\n"
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, path)


# ---- stage self-checks ---------------------------------------------------------------------

def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def selfcheck(world_dir, quant):
    """Compares each stage with the HF dumps a world may ship (qwen2_{fp32,nf4}.npz, pooler.npz,
    bge.npz + bge_tokens.json, nf4_layer0_q_proj.npz); prints one line per check."""
    w = World(world_dir, quant)
    ok = True

    def report(name, rel, tol):
        nonlocal ok
        good = rel <= tol
        ok &= good
        print("  %-34s max rel %.3g (tol %.0e)  %s" % (name, rel, tol, "PASS" if good else "FAIL"))

    p = os.path.join(world_dir, "qwen2_%s.npz" % quant)
    if os.path.exists(p):
        z = read_npz(p)
        ids = [int(i) for i in z["ids"]]
        llm = w.llm
        logits = []
        llm.reset_cache()
        for i, t in enumerate(ids):
            logits.append(llm.forward(llm.embed_ids([t])))
        report("qwen2 logits (one token at a time)", _rel(torch.stack(logits), z["logits"]), 1e-4)
        llm.reset_cache()
        llm.forward(llm.embed_ids(ids[:1]))
        sp = w.pooler(llm.embed_ids(ids[1:30]))
        report("pooler on ids[1:30]", _rel(sp, z["embeds_sp"]), 1e-5)
        last = llm.forward(torch.cat([sp, llm.embed_ids(ids[30:])]))
        report("inputs_embeds logits", _rel(last, z["embeds_logits_last"]), 1e-4)
        report("inputs_embeds q (gate feature)", _rel(llm.q_last, z["embeds_q_last"]), 1e-4)
        llm.reset_cache()
        out = llm.forward(llm.embed_ids(ids))
        greedy = []
        for _ in range(len(z["greedy"])):
            t = int(torch.argmax(out))
            greedy.append(t)
            out = llm.forward(llm.embed_ids([t]))
        same = greedy == [int(x) for x in z["greedy"]]
        ok &= same
        print("  %-34s %s" % ("greedy continuation ids", "identical  PASS" if same else "DIFFER  FAIL"))
    p = os.path.join(world_dir, "pooler.npz")
    if os.path.exists(p):
        z = read_npz(p)
        for k in sorted((k for k in z if k.startswith("ids_")), key=lambda s: int(s[4:])):
            n = k[4:]
            report("pooler L=%s" % n, _rel(w.pooler(w.llm.embed_ids([int(i) for i in z[k]])), z["out_" + n]), 1e-5)
    p = os.path.join(world_dir, "bge_tokens.json")
    if os.path.exists(p):
        bt = read_json(p)
        ids = [w.bert.tok.encode(t) for t in bt["texts"]]
        same = ids == bt["ids"]
        ok &= same
        print("  %-34s %s" % ("WordPiece ids of bge_tokens.json", "identical  PASS" if same else "DIFFER  FAIL"))
        if os.path.exists(os.path.join(world_dir, "bge.npz")):
            emb = torch.stack([w.bert.encode_ids(i) for i in bt["ids"]])
            report("BERT CLS + L2", _rel(emb, read_npz(os.path.join(world_dir, "bge.npz"))["emb"]), 1e-5)
    p = os.path.join(world_dir, "nf4_layer0_q_proj.npz")
    if os.path.exists(p):
        z = read_npz(p)
        wq = read_model_weights(os.path.join(world_dir, "qwen2"))["model.layers.0.self_attn.q_proj.weight"]
        codes, absmax = nf4_quantize(wq)
        c = codes.numpy().astype(np.uint8)
        packed = (c[0::2] << 4) | c[1::2]
        same = np.array_equal(packed, z["packed"]) and np.array_equal(absmax.numpy(), z["absmax"])
        ok &= same
        print("  %-34s %s" % ("NF4 codes + absmax of layer 0 q", "identical  PASS" if same else "DIFFER  FAIL"))
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one benchmark problem through the loop, written as a trace")
    r.add_argument("--world", required=True, help="folder with qwen2/, bge/, pooler.pt, gate.npz, bge_head.npz")
    r.add_argument("--bench", required=True, help="benchmark data (recall_bench.json format)")
    r.add_argument("--problem", type=int, required=True)
    r.add_argument("--mode", default="faithful", choices=["faithful", "clean"])
    r.add_argument("--arm", default="RC_bge", choices=["RC_bge", "SP", "FULL"])
    r.add_argument("--quant", default="fp32", choices=["fp32", "nf4"],
                   help="nf4: decoder Linear weights replaced by their NF4 dequantisation")
    r.add_argument("--threshold", type=float, help="gate threshold (default: the gate file's thresh)")
    for k in ("window", "chunk", "block", "k", "turn_cap", "buf_min"):
        r.add_argument("--" + k.replace("_", "-"), type=int, help="loop geometry override")
    r.add_argument("--trace", required=True, help="output trace JSON")
    s = sub.add_parser("selfcheck", help="stage checks against the HF dumps shipped with a world")
    s.add_argument("--world", required=True)
    s.add_argument("--quant", default="fp32", choices=["fp32", "nf4"])
    a = ap.parse_args(argv)
    with torch.no_grad():
        if a.cmd == "selfcheck":
            ok = selfcheck(a.world, a.quant)
            print("selfcheck: %s" % ("PASS" if ok else "FAIL"))
            return 0 if ok else 1
        geo = {LOOP_KEYS[k]: getattr(a, k) for k in LOOP_KEYS}
        world = World(a.world, a.quant, geo)
        bench = read_json(a.bench)
        doc = run_problem(world, bench, a.problem, a.mode, a.arm, a.threshold, a.quant)
        write_trace(doc, a.trace)
        print("wrote %s (%.1f s)" % (a.trace, doc["seconds"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
