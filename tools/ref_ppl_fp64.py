#!/usr/bin/env python3
"""ref_ppl_fp64.py - fp64 perplexity of a recall blob's Qwen2 decoder, the HF formulas in numpy.

The arbiter for `recall score` at length: random (synthetic) weights amplify rounding differences,
so the reference runs every operation in float64 on the blob's own weights, dequantised exactly as
simd/nf4.c does (value = NF4_CODEBOOK[code] * absmax in one fp32 multiply, then widened to fp64);
bf16 tensors are widened by a 16-bit shift, f32 ones as they are. Reading the blob, not the HF
folder, makes the reference see the very weights `recall score` sees (an nf4 blob holds nf4 linear
weights, bf16 embeddings / lm_head, f32 norms and biases).

Model (transformers' Qwen2ForCausalLM, eager attention), per row at position p, all float64:
  x = embed_tokens[id]
  per layer: h = RMSNorm(x) (x * 1/sqrt(mean(x^2) + eps) * w);
    q, k, v = h W^T + b; RoPE (rotate_half) with inv_freq = 1 / theta^(2i/D), angle = p * inv_freq;
    GQA causal attention: softmax(q k^T / sqrt(D)) v over positions <= p; x += o_proj(att);
    h = RMSNorm(x); x += down(silu(gate h) * up h)
  logits = lm_head(RMSNorm(x)) for the scored rows only.
Protocol (llama-perplexity's, as `recall score`): ids cut into floor(n / N) chunks of N, each from
an empty cache at positions 0..N-1 (--bos replaces each chunk's first id by tok.bos); positions
j in [N/2, N-1) predict id j+1; nll = logsumexp(logits) - logits[target]; PPL = exp(mean nll).

usage: env -u OPENBLAS_CORETYPE /usr/bin/python3 tools/ref_ppl_fp64.py BLOB --tokens-file IDS
           --chunk N [--chunks K] [--bos] [--json OUT] [--compare RECALL_SCORE.json]
           [--llama LLAMA_PERPLEXITY_LOG ...] [--load FP64.json]
  --tokens-file   a JSON array of ids, or ids separated by whitespace (as `recall score`)
  --chunks K      score only the first K chunks (default: all)
  --json OUT      per-chunk PPL and per-position nll / greedy argmax
  --compare F     a `recall score --per-position --json` file of the same ids (or a prefix of
                  them) and --chunk (targets checked position by position): prints
                  mean and max |dNLL|, greedy agreement and both PPLs per chunk
  --llama LOG     (repeatable) a llama-perplexity log of the same text and -c N: its running
                  estimates "[k]PPL," give each chunk's PPL (equal scored counts per chunk:
                  chunk k's mean nll = k ln P_k - (k-1) ln P_(k-1)); printed beside the others
  --load F        take the fp64 results from an earlier --json F instead of computing them
Only numpy; OpenBLAS threads follow OPENBLAS_NUM_THREADS (use 2 on a shared machine).
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xxh64 import xxh64  # noqa: E402  (tools/xxh64.py: the project's checksum, seed 0)

NF4_CODEBOOK = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)

DT_F32, DT_BF16, DT_F16, DT_NF4 = 1, 2, 3, 4
SECT_CONFIG, SECT_TENSORS = 1, 2


class Blob:
    """Read-only view of a recall blob (src/formats/blob.h layout): config keys and tensors as fp32."""

    def __init__(self, path):
        self.mm = np.memmap(path, dtype=np.uint8, mode="r")
        hdr = bytes(self.mm[:128])
        if hdr[:8] != b"RECALLB\x1a":
            raise SystemExit(f"{path}: not a recall blob")
        n_sect, sect_off = struct.unpack_from("<IQ", hdr, 28)
        self.kv, self.tensors = {}, {}
        for s in range(n_sect):
            kind, count, off, _size, _ck = struct.unpack_from("<IIQQQ", bytes(self.mm[sect_off + 32 * s:sect_off + 32 * s + 32]))
            if kind == SECT_CONFIG:
                for i in range(count):
                    e = bytes(self.mm[off + 128 * i:off + 128 * i + 128])
                    key = e[:48].rstrip(b"\0").decode()
                    typ, cnt = struct.unpack_from("<II", e, 48)
                    if typ == 1:
                        v = struct.unpack_from(f"<{cnt}q", e, 56)
                    elif typ == 2:
                        v = struct.unpack_from(f"<{cnt}d", e, 56)
                    else:
                        v = (e[56:56 + cnt].decode(),)
                    self.kv[key] = v[0] if len(v) == 1 else v
            elif kind == SECT_TENSORS:
                for i in range(count):
                    e = bytes(self.mm[off + 192 * i:off + 192 * i + 192])
                    name = e[:104].rstrip(b"\0").decode()
                    dtype, ndim, _block, _flags = struct.unpack_from("<IIII", e, 104)
                    shape = struct.unpack_from("<4Q", e, 120)[:ndim]
                    toff, nbytes = struct.unpack_from("<QQ", e, 152)
                    self.tensors[name] = (dtype, tuple(int(d) for d in shape), int(toff), int(nbytes))

    def f32(self, name):
        """The tensor's exact fp32 values (nf4: codebook[code] * absmax, one fp32 multiply)."""
        dtype, shape, off, nbytes = self.tensors[name]
        numel = int(np.prod(shape))
        raw = self.mm[off:off + nbytes]
        if dtype == DT_F32:
            return np.frombuffer(raw, dtype="<f4", count=numel).reshape(shape)
        if dtype == DT_BF16:
            u = np.frombuffer(raw, dtype="<u2", count=numel).astype(np.uint32) << 16
            return u.view(np.float32).reshape(shape)
        if dtype == DT_F16:
            return np.frombuffer(raw, dtype="<f2", count=numel).astype(np.float32).reshape(shape)
        if dtype == DT_NF4:
            packed = np.frombuffer(raw, dtype=np.uint8, count=numel // 2)
            codes = np.empty(numel, dtype=np.uint8)
            codes[0::2] = packed >> 4  # element 2j in the high nibble
            codes[1::2] = packed & 15
            amax_off = (numel // 2 + 63) // 64 * 64
            absmax = np.frombuffer(raw[amax_off:], dtype="<f4", count=numel // 64)
            vals = NF4_CODEBOOK[codes].reshape(-1, 64) * absmax[:, None]  # fp32 * fp32 -> fp32
            return vals.reshape(shape)
        raise SystemExit(f"{name}: dtype {dtype} not handled")

    def f64(self, name):
        return self.f32(name).astype(np.float64)


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_tables(T, D, theta):
    inv_freq = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([ang, ang], axis=1)
    return np.cos(emb), np.sin(emb)


def apply_rope(x, cos, sin):
    """x [T, heads, D]; HF rotate_half."""
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def forward_chunk(b, cfg, ids, first, log=None):
    """Hidden states after the final norm for rows [first, T-1) of one chunk (fp64)."""
    T, H, NL = len(ids), cfg["hidden"], cfg["layers"]
    NH, NKV, D, eps = cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["eps"]
    P = "qwen2.model."
    x = b.f32(P + "embed_tokens.weight")[np.asarray(ids)].astype(np.float64)
    cos, sin = rope_tables(T, D, cfg["theta"])
    mask = np.triu(np.full((T, T), -np.inf), 1)
    scale = 1.0 / math.sqrt(D)
    t0 = time.time()
    for li in range(NL):
        L = f"{P}layers.{li}."
        h = rmsnorm(x, b.f64(L + "input_layernorm.weight"), eps)
        q = h @ b.f64(L + "self_attn.q_proj.weight").T + b.f64(L + "self_attn.q_proj.bias")
        k = h @ b.f64(L + "self_attn.k_proj.weight").T + b.f64(L + "self_attn.k_proj.bias")
        v = h @ b.f64(L + "self_attn.v_proj.weight").T + b.f64(L + "self_attn.v_proj.bias")
        q = apply_rope(q.reshape(T, NH, D), cos, sin)
        k = apply_rope(k.reshape(T, NKV, D), cos, sin)
        v = v.reshape(T, NKV, D)
        att = np.empty((T, NH, D))
        g = NH // NKV
        for hh in range(NH):
            s = q[:, hh, :] @ k[:, hh // g, :].T * scale + mask
            s -= s.max(axis=1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=1, keepdims=True)
            att[:, hh, :] = s @ v[:, hh // g, :]
        x = x + att.reshape(T, NH * D) @ b.f64(L + "self_attn.o_proj.weight").T
        h = rmsnorm(x, b.f64(L + "post_attention_layernorm.weight"), eps)
        gt = h @ b.f64(L + "mlp.gate_proj.weight").T
        up = h @ b.f64(L + "mlp.up_proj.weight").T
        x = x + (gt / (1.0 + np.exp(-gt)) * up) @ b.f64(L + "mlp.down_proj.weight").T
        if log:
            log(f"layer {li + 1}/{NL}: {time.time() - t0:.1f} s")
    return rmsnorm(x[first:T - 1], b.f64(P + "norm.weight"), eps)


def score_rows(b, hn, targets, vslice=16384):
    """nll and greedy argmax (lowest id on ties) per row, lm_head streamed over vocab slices."""
    name = "qwen2.lm_head.weight" if "qwen2.lm_head.weight" in b.tensors else "qwen2.model.embed_tokens.weight"
    V = b.tensors[name][1][0]
    R = hn.shape[0]
    m = np.full(R, -np.inf)
    ssum = np.zeros(R)
    best = np.full(R, -np.inf)
    arg = np.zeros(R, dtype=np.int64)
    tgt = np.zeros(R)
    W = b.f32(name)
    for v0 in range(0, V, vslice):
        lg = hn @ W[v0:v0 + vslice].astype(np.float64).T
        mx = lg.max(axis=1)
        nm = np.maximum(m, mx)
        ssum = ssum * np.exp(m - nm) + np.exp(lg - nm[:, None]).sum(axis=1)
        m = nm
        am = lg.argmax(axis=1)  # first maximum in the slice
        upd = mx > best  # strict: an earlier slice keeps a tie
        arg[upd] = am[upd] + v0
        best[upd] = mx[upd]
        inside = (targets >= v0) & (targets < v0 + lg.shape[1])
        tgt[inside] = lg[np.nonzero(inside)[0], targets[inside] - v0]
    return m + np.log(ssum) - tgt, arg


def read_ids(path):
    text = open(path).read().strip()
    return [int(t) for t in (json.loads(text) if text.startswith("[") else text.split())]


def xxh64_ids(ids):
    """XXH64 (seed 0) of the int32 ids in little-endian order, as `recall score` prints it."""
    return f"{xxh64(struct.pack(f'<{len(ids)}i', *ids)):016x}"


def compute(b, cfg, kv, ids, N, n_chunk, first, bos):
    out = dict(n_tokens=len(ids), ids_xxh64=xxh64_ids(ids), n_ctx=N, n_chunks=n_chunk, first=first, bos=bos,
               chunk_ppl=[], positions=[])
    all_nll = []
    for c in range(n_chunk):
        t0 = time.time()
        chunk = list(ids[c * N:(c + 1) * N])
        if bos:
            chunk[0] = kv["tok.bos"]
        hn = forward_chunk(b, cfg, chunk, first, log=lambda s: print(f"  chunk {c}: {s}", file=sys.stderr, flush=True))
        targets = np.asarray(chunk[first + 1:N], dtype=np.int64)
        nll, greedy = score_rows(b, hn, targets)
        all_nll.extend(nll.tolist())
        ppl = math.exp(float(np.mean(nll)))
        out["chunk_ppl"].append(ppl)
        for j in range(len(nll)):
            out["positions"].append(dict(chunk=c, pos=first + j, target=int(targets[j]), nll=float(nll[j]),
                                         greedy=int(greedy[j])))
        print(f"chunk {c}: ppl {ppl:.6f} (mean nll {np.mean(nll):.9f}), {time.time() - t0:.1f} s", flush=True)
    out["mean_nll"] = float(np.mean(all_nll))
    out["ppl"] = math.exp(out["mean_nll"])
    print(f"fp64 PPL {out['ppl']:.6f} over {len(all_nll)} positions")
    return out


def llama_chunk_ppl(path):
    """Per-chunk PPL from llama-perplexity's running estimates "[k]P," (k = 1, 2, ...)."""
    import re
    est = [float(v) for _, v in re.findall(r"\[(\d+)\]([0-9.]+),", open(path, errors="replace").read())]
    out, prev = [], 0.0
    for k, p in enumerate(est, 1):
        cur = k * math.log(p)
        out.append(math.exp(cur - prev))
        prev = cur
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("blob")
    ap.add_argument("--tokens-file", required=True)
    ap.add_argument("--chunk", type=int, help="the chunk length N (recall score --chunk N); required")
    ap.add_argument("--ctx", help=argparse.SUPPRESS)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--bos", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--compare")
    ap.add_argument("--llama", action="append", default=[])
    ap.add_argument("--load")
    a = ap.parse_args()
    if a.ctx is not None:
        raise SystemExit("--ctx is now --chunk N: the chunk length, as recall score --chunk N")
    if a.chunk is None:
        ap.error("--chunk N is required")
    b = Blob(a.blob)
    kv = b.kv
    cfg = dict(hidden=kv["qwen2.hidden"], layers=kv["qwen2.layers"], heads=kv["qwen2.heads"],
               kv_heads=kv["qwen2.kv_heads"], head_dim=kv["qwen2.head_dim"], eps=kv["qwen2.rms_eps"],
               theta=kv["qwen2.rope_theta"])
    if any(k.startswith("qwen2.rope.") for k in kv):
        raise SystemExit("the blob carries a RoPE scaling profile; this reference evaluates plain RoPE only")
    ids = read_ids(a.tokens_file)
    N = a.chunk
    n_chunk = len(ids) // N
    if a.chunks:
        n_chunk = min(n_chunk, a.chunks)
    if n_chunk < 1:
        raise SystemExit(f"{len(ids)} ids: shorter than one chunk of {N}")
    first = N // 2
    print(f"ids {len(ids)} xxh64 {xxh64_ids(ids)}; ctx {N}; chunks {n_chunk}; scored per chunk {N - first - 1}", flush=True)
    if a.load:
        out = json.load(open(a.load))
        if out["ids_xxh64"] != xxh64_ids(ids) or out["n_ctx"] != N or out["bos"] != a.bos:
            raise SystemExit(f"{a.load}: other ids, ctx or bos")
        n_chunk = min(n_chunk, out["n_chunks"])
    else:
        out = compute(b, cfg, kv, ids, N, n_chunk, first, a.bos)
    if a.json and not a.load:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f)
        import os
        os.replace(a.json + ".tmp", a.json)
    llama = [(path, llama_chunk_ppl(path)) for path in a.llama]
    for path, ppl in llama:
        print(f"llama-perplexity {path}: per-chunk PPL " + ", ".join(f"{p:.4f}" for p in ppl))
    if a.compare:
        ours = json.load(open(a.compare))
        if ours["n_ctx"] != N or ours["bos"] != a.bos:
            raise SystemExit(f"{a.compare}: another --chunk or --bos ({ours['n_ctx']}, {ours['bos']})")
        mine = {(p["chunk"], p["pos"]): p for p in out["positions"]}
        # same ids (the recall run may have had a prefix of these ids): every target must match
        if any((p["chunk"], p["pos"]) in mine and mine[(p["chunk"], p["pos"])]["target"] != p["target"]
               for p in ours["positions"]):
            raise SystemExit(f"{a.compare}: other ids")
        print("| chunk | fp64 PPL | recall PPL (rel. to fp64) | mean / max \\|dNLL\\| | greedy = fp64 | "
              + " | ".join(f"llama.cpp {path} (rel.)" for path, _ in llama) + " |")
        for c in range(n_chunk):
            d, agree, n, onll = [], 0, 0, []
            for p in ours["positions"]:
                if p["chunk"] != c or not p.get("scored", True) or (c, p["pos"]) not in mine:
                    continue
                r = mine[(c, p["pos"])]
                d.append(abs(p["nll"] - r["nll"]))
                onll.append(p["nll"])
                agree += p["greedy"] == r["greedy"]
                n += 1
            ref = out["chunk_ppl"][c]
            rp = math.exp(np.mean(onll))
            cells = [f"{lp[c]:.4f} ({(lp[c] / ref - 1) * 100:+.3f} %)" if c < len(lp) else "-" for _, lp in llama]
            print(f"| {c} | {ref:.4f} | {rp:.4f} ({(rp / ref - 1) * 100:+.5f} %) | {np.mean(d):.2g} / {np.max(d):.2g} | "
                  f"{agree}/{n} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
