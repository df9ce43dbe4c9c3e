#!/usr/bin/python3
"""q8lab.py - where the q8 numerics profile's distance to exact comes from, on a Qwen2 world.

    OMP_NUM_THREADS=1 /usr/bin/python3 tools/train_world/lab/q8lab.py --ids IDS.json \
        [--qwen2 tests/golden/trained/qwen2] [--chunk 2048] \
        [--engine-exact EXACT.json --engine-q8 Q8.json] \
        [--ablate | scheme options] [--top N] [--matstats] [--json OUT]

What it computes. A float32 PyTorch forward of the Qwen2 decoder in DIR (config.json +
model.safetensors), scored as `recall score --chunk N` scores: the ids cut into chunks of N, each
chunk from an empty cache, positions [N/2, N-1) of every chunk scored (NLL in double from the
fp32 logits, greedy = the first largest logit). The q8 profile of simd/q8.h is emulated on any
subset of the seven layer matrices (q, k, v, o, gate, up, down of every layer; lm_head,
embeddings, norms, RoPE, attention and SiLU always exact):

  activations: per input row and block of B (32) columns, the largest |x| is a PEAK when it
      exceeds T (1.25) times the second largest: it is kept aside in fp32 and the rest are
      quantised with the second largest's scale; q = round-half-even(x * (127/a)), d = a/127;
  weights (f32): per row and block of B, symmetric int8 with the block's largest |w|, no peaks;
  the product: sum over blocks of (int sums) x (w scale x x scale), plus each peak's
      p x (its column's int8 weight x w scale). Emulated as the product of the dequantised
      matrices (same values; the engine's fp32 epilogue order is not reproduced bit for bit).

Every scheme knob is an option: which layers / matrix kinds run q8, weights-only or
activations-only quantisation, the block size, the peak threshold (or none), up to N peaks a
block. Each run is compared position by position with this script's own exact forward (mean and
max |dNLL|, greedy agreement over the scored positions); with --engine-exact / --engine-q8
(`recall score --per-position --json` files of the same ids) the exact forward and the all-q8
emulation are first checked against the engine's. --ablate runs the standard table (all q8, each
kind exact, each layer exact, weights / activations only, blocks 16 / 64, peak variants, and the
cheap fixes). --top lists the positions with the largest |dNLL| (token, context, exact margin of
the top two logits: are they near-ties?). --matstats prints each layer matrix's local q8 error
(relative rms of its output on the exact forward's own inputs) and how often its input blocks
have peaks.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

KINDS = ("q", "k", "v", "o", "gate", "up", "down")
SAFE_DT = {"F32": np.float32, "F16": np.float16, "BF16": None}


# ---- model --------------------------------------------------------------------------------------

def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        buf = f.read()
    out = {}
    for name, meta in head.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = buf[a:b]
        if meta["dtype"] == "BF16":
            u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=SAFE_DT[meta["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(arr.reshape(meta["shape"]).copy())
    return out


class Model:
    def __init__(self, folder):
        self.cfg = json.load(open(os.path.join(folder, "config.json")))
        c = self.cfg
        self.H, self.L = c["hidden_size"], c["num_hidden_layers"]
        self.nh, self.nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.D = self.H // self.nh
        self.eps = float(c["rms_norm_eps"])
        self.theta = float(c["rope_theta"])
        sd = load_safetensors(os.path.join(folder, "model.safetensors"))
        self.embed = sd["model.embed_tokens.weight"]
        self.lm_head = sd["lm_head.weight"] if "lm_head.weight" in sd else self.embed
        self.norm = sd["model.norm.weight"]
        self.layers = []
        for l in range(self.L):
            p = "model.layers.%d." % l
            self.layers.append({
                "ln1": sd[p + "input_layernorm.weight"], "ln2": sd[p + "post_attention_layernorm.weight"],
                "q": sd[p + "self_attn.q_proj.weight"], "bq": sd.get(p + "self_attn.q_proj.bias"),
                "k": sd[p + "self_attn.k_proj.weight"], "bk": sd.get(p + "self_attn.k_proj.bias"),
                "v": sd[p + "self_attn.v_proj.weight"], "bv": sd.get(p + "self_attn.v_proj.bias"),
                "o": sd[p + "self_attn.o_proj.weight"],
                "gate": sd[p + "mlp.gate_proj.weight"], "up": sd[p + "mlp.up_proj.weight"],
                "down": sd[p + "mlp.down_proj.weight"],
            })
        half = self.D // 2
        i = torch.arange(half, dtype=torch.float32)
        self.inv_freq = 1.0 / torch.pow(torch.tensor(self.theta, dtype=torch.float32), (2 * i) / self.D)

    def macs(self):
        """multiply-adds per token of each layer matrix kind (one layer) and of lm_head"""
        m = {k: self.layers[0][k].shape[0] * self.layers[0][k].shape[1] for k in KINDS}
        return m, self.lm_head.shape[0] * self.lm_head.shape[1]


def rmsnorm(x, w, eps):
    var = (x * x).mean(-1, keepdim=True)
    return w * (x * (1.0 / torch.sqrt(var + eps)))


# ---- the q8 scheme ------------------------------------------------------------------------------

TINY = 2.0 ** -96


def quant_blocks(x, block, peak, npeaks, qmax=127.0, passes=1):
    """x [..., K] -> the dequantised values the q8 product sees (peaks kept exact), and a mask of
    the peaks. peak: threshold (None: no peaks), npeaks: at most this many a block. passes > 1:
    the residual x - (what the earlier passes give) is quantised again per block (each pass one more
    int8 plane, one more int8 product with the same other operand: an int16-like value)."""
    shp = x.shape
    K = shp[-1]
    assert K % block == 0, "columns %d not a multiple of the block %d" % (K, block)
    xb = x.reshape(-1, K // block, block)
    ax = xb.abs()
    pk = torch.zeros_like(xb, dtype=torch.bool)
    if peak is None or npeaks == 0:
        a = ax.amax(-1, keepdim=True)
    else:
        kk = min(npeaks + 1, block)
        top, idx = torch.topk(ax, kk, dim=-1)
        a = top[..., 0:1].clone()
        alive = torch.ones_like(a, dtype=torch.bool)  # still taking peaks in this block
        for j in range(npeaks):
            nxt = top[..., j + 1:j + 2] if j + 1 < kk else torch.zeros_like(a)
            is_pk = alive & ((top[..., j:j + 1] > torch.tensor(peak, dtype=torch.float32) * nxt) | (nxt < TINY))
            is_pk = is_pk & (top[..., j:j + 1] >= TINY)
            pk.scatter_(-1, idx[..., j:j + 1], is_pk)
            a = torch.where(is_pk, nxt, a)
            alive = is_pk
    rest = torch.where(pk, torch.zeros_like(xb), xb)
    acc = torch.zeros_like(xb)
    for _ in range(passes):
        a = torch.where(a < TINY, torch.zeros_like(a), a)
        s = torch.where(a > 0, torch.tensor(qmax, dtype=torch.float32) / torch.where(a > 0, a, torch.ones_like(a)),
                        torch.zeros_like(a))
        q = torch.round(rest * s)  # fp32 product, then round half to even
        part = q * (a / qmax)
        acc = acc + part
        rest = rest - part
        a = rest.abs().amax(-1, keepdim=True)
    xq = torch.where(pk, xb, acc)
    return xq.reshape(shp), pk.reshape(shp)


DEFAULTS = {"exact": False, "weights": True, "acts": True, "block": 32, "wblock": None, "peak": 1.25, "npeaks": 1,
            "wpeak": None, "apasses": 1, "wpasses": 1, "qmax": 127.0}


class Scheme:
    """Which layer matrices run q8, and how. Every field has the shipped profile's default; per
    (layer, kind) overrides are applied in order: [(layers or None, kinds or None, {param: value})]."""

    def __init__(self, name="q8", layers=None, kinds=None, exact_mats=(), overrides=(), block_for=None,
                 wblock_for=None, peak_for=None, npeaks_for=None, **base):
        self.name = name
        self.layers = layers  # None: every layer
        self.kinds = tuple(kinds) if kinds is not None else KINDS
        self.exact_mats = set(exact_mats)  # {(layer, kind)} kept exact
        unknown = set(base) - set(DEFAULTS)
        assert not unknown, "unknown scheme fields %s" % unknown
        self.base = dict(DEFAULTS, **base)
        self.overrides = list(overrides)
        for key, dct in (("block", block_for), ("wblock", wblock_for), ("peak", peak_for), ("npeaks", npeaks_for)):
            for k, v in (dct or {}).items():
                self.overrides.append((None, [k], {key: v}))

    def params(self, l, kind):
        """None (exact) or the parameters of layer l's matrix `kind`"""
        if self.layers is not None and l not in self.layers:
            return None
        if kind not in self.kinds or (l, kind) in self.exact_mats:
            return None
        p = dict(self.base)
        for ls, ks, d in self.overrides:
            if (ls is None or l in ls) and (ks is None or kind in ks):
                p.update(d)
        if p["exact"]:
            return None
        if p["wblock"] is None:
            p["wblock"] = p["block"]
        return p

    def on(self, l, kind):
        return self.params(l, kind) is not None


def parse_override(text):
    """'layers=0,1 kinds=q,k,v apasses=2 exact=1' -> (layers, kinds, params)"""
    ls = ks = None
    d = {}
    for tok in text.split():
        k, _, v = tok.partition("=")
        if k == "layers":
            ls = [int(x) for x in v.split(",")]
        elif k == "kinds":
            ks = v.split(",")
        elif k in ("exact", "weights", "acts"):
            d[k] = v not in ("0", "no", "false")
        elif k in ("peak", "wpeak"):
            d[k] = None if v == "none" else float(v)
        elif k == "qmax":
            d[k] = float(v)
        elif k in DEFAULTS:
            d[k] = int(v)
        else:
            raise SystemExit("--override: unknown key %r (layers, kinds, %s)" % (k, ", ".join(DEFAULTS)))
    return ls, ks, d


EXACT = Scheme("exact", kinds=())


class Runner:
    def __init__(self, model):
        self.m = model
        self._wcache = {}

    def weight(self, l, kind, p):
        w = self.m.layers[l][kind]
        if not p["weights"]:
            return w
        key = (l, kind, p["wblock"], p["wpeak"], p["qmax"], p["wpasses"])
        if key not in self._wcache:
            wq, _ = quant_blocks(w, p["wblock"], p["wpeak"], 1, p["qmax"], p["wpasses"])
            self._wcache[key] = wq
        return self._wcache[key]

    def mm(self, x, l, kind, sch, bias=None, stats=None):
        w = self.m.layers[l][kind]
        p = sch.params(l, kind)
        if p is not None:
            wq = self.weight(l, kind, p)
            xq = quant_blocks(x, p["block"], p["peak"], p["npeaks"], p["qmax"], p["apasses"])[0] if p["acts"] else x
            y = xq @ wq.t()
        else:
            y = x @ w.t()
        if stats is not None:  # local error of the shipped q8 on this exact input
            ye = x @ w.t()
            xq, pm = quant_blocks(x, 32, 1.25, 1)
            wq, _ = quant_blocks(w, 32, None, 1)
            yq = xq @ wq.t()
            xe, we = (x, wq), (xq, w)
            e_all = ((yq - ye) ** 2).sum().item()
            e_w = ((xe[0] @ xe[1].t() - ye) ** 2).sum().item()
            e_a = ((we[0] @ we[1].t() - ye) ** 2).sum().item()
            s = stats.setdefault((l, kind), {"err": 0.0, "err_w": 0.0, "err_a": 0.0, "ref": 0.0, "pk": 0, "blocks": 0,
                                             "absmax": 0.0})
            s["err"] += e_all
            s["err_w"] += e_w
            s["err_a"] += e_a
            s["ref"] += (ye ** 2).sum().item()
            s["pk"] += int(pm.sum().item())
            s["blocks"] += pm.numel() // 32
            s["absmax"] = max(s["absmax"], x.abs().max().item())
        if bias is not None:
            y = y + bias
        return y

    def forward(self, ids, sch, stats=None):
        m = self.m
        T = len(ids)
        x = m.embed[torch.as_tensor(ids, dtype=torch.long)].clone()
        pos = torch.arange(T, dtype=torch.float32)
        ang = pos[:, None] * m.inv_freq[None, :]  # fp32 product, as the engine
        cos = torch.cos(ang.double()).float()
        sin = torch.sin(ang.double()).float()
        mask = torch.full((T, T), float("-inf")).triu(1)
        scale = float(np.float32(1.0 / math.sqrt(m.D)))
        half = m.D // 2
        rep = m.nh // m.nkv

        def rope(t):  # t [heads, T, D]
            a, b = t[..., :half], t[..., half:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)

        for l in range(m.L):
            W = m.layers[l]
            xn = rmsnorm(x, W["ln1"], m.eps)
            q = self.mm(xn, l, "q", sch, W["bq"], stats)
            k = self.mm(xn, l, "k", sch, W["bk"], stats)
            v = self.mm(xn, l, "v", sch, W["bv"], stats)
            q = rope(q.view(T, m.nh, m.D).transpose(0, 1))
            k = rope(k.view(T, m.nkv, m.D).transpose(0, 1))
            v = v.view(T, m.nkv, m.D).transpose(0, 1)
            k = k.repeat_interleave(rep, 0)
            v = v.repeat_interleave(rep, 0)
            att = torch.softmax((q @ k.transpose(1, 2)) * scale + mask, -1) @ v
            att = att.transpose(0, 1).reshape(T, m.nh * m.D)
            x = x + self.mm(att, l, "o", sch, None, stats)
            xn = rmsnorm(x, W["ln2"], m.eps)
            g = self.mm(xn, l, "gate", sch, None, stats)
            u = self.mm(xn, l, "up", sch, None, stats)
            h = torch.nn.functional.silu(g) * u
            x = x + self.mm(h, l, "down", sch, None, stats)
        x = rmsnorm(x, m.norm, m.eps)
        return x @ m.lm_head.t()


def score(runner, ids, chunk, sch, stats=None, keep_logits=False):
    """Per scored position (llama-perplexity's protocol, as `recall score`): nll (double), greedy,
    and the exact-side facts used by --top (margin of the top two logits, p of the target)."""
    first = chunk // 2
    out = {"chunk": [], "pos": [], "target": [], "nll": [], "greedy": [], "margin": [], "logits": []}
    with torch.no_grad():
        for c in range(len(ids) // chunk):
            part = ids[c * chunk:(c + 1) * chunk]
            lg = runner.forward(part, sch, stats)[first:chunk - 1]
            tgt = torch.as_tensor(part[first + 1:chunk], dtype=torch.long)
            lgd = lg.double()
            lse = torch.logsumexp(lgd, -1)
            nll = lse - lgd.gather(1, tgt[:, None])[:, 0]
            greedy = torch.argmax(lg, -1)  # first maximum
            top2 = torch.topk(lg, 2, -1).values
            out["chunk"] += [c] * len(tgt)
            out["pos"] += list(range(first, chunk - 1))
            out["target"] += tgt.tolist()
            out["nll"] += nll.tolist()
            out["greedy"] += greedy.tolist()
            out["margin"] += (top2[:, 0] - top2[:, 1]).tolist()
            if keep_logits:
                out["logits"].append(lg)
    for k in ("nll", "margin"):
        out[k] = np.array(out[k])
    for k in ("greedy", "target", "chunk", "pos"):
        out[k] = np.array(out[k], dtype=np.int64)
    return out


def distance(a, b):
    d = np.abs(a["nll"] - b["nll"])
    agree = int((a["greedy"] == b["greedy"]).sum())
    i = int(d.argmax())
    return {"mean_abs": float(d.mean()), "max_abs": float(d.max()), "mean": float((a["nll"] - b["nll"]).mean()),
            "agree": agree, "n": len(d), "agree_pct": 100.0 * agree / len(d),
            "worst": (int(a["chunk"][i]), int(a["pos"][i]))}


def load_engine(path):
    d = json.load(open(path))
    P = [p for p in d["positions"] if p["scored"]]
    return {"chunk": np.array([p["chunk"] for p in P]), "pos": np.array([p["pos"] for p in P]),
            "target": np.array([p["target"] for p in P]), "nll": np.array([p["nll"] for p in P]),
            "greedy": np.array([p["greedy"] for p in P]), "numerics": d.get("numerics")}


# ---- tokens as text -----------------------------------------------------------------------------

def token_texts(folder):
    t = json.load(open(os.path.join(folder, "tokenizer.json")))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from tok import bytes_to_unicode  # the byte alphabet of the world's BPE (tools/train_world/tok.py)
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    out = {}
    for s, i in t["model"]["vocab"].items():
        out[i] = bytes(u2b.get(ch, 63) for ch in s).decode("utf-8", "replace")
    for a in t.get("added_tokens", []):
        out[a["id"]] = a["content"]
    return out


# ---- the runs -----------------------------------------------------------------------------------

def ablation_schemes(L):
    S = [Scheme("all q8 (shipped: block 32, peaks > 1.25x, 1 peak)")]
    for k in KINDS:
        S.append(Scheme("%s exact" % k, kinds=[x for x in KINDS if x != k]))
    for k in KINDS:
        S.append(Scheme("only %s q8" % k, kinds=[k]))
    S.append(Scheme("attention q,k,v,o exact (MLP q8)", kinds=["gate", "up", "down"]))
    S.append(Scheme("MLP gate,up,down exact (attn q8)", kinds=["q", "k", "v", "o"]))
    for l in range(L):
        S.append(Scheme("layer %d exact" % l, layers=[x for x in range(L) if x != l]))
    for l in range(L):
        S.append(Scheme("only layer %d q8" % l, layers=[l]))
    S += [Scheme("weights int8 only (activations exact)", acts=False),
          Scheme("activations int8 only (weights exact)", weights=False),
          Scheme("block 16", block=16), Scheme("block 64", block=64),
          Scheme("block 16, weights only 16 (acts 32)", wblock_for={k: 16 for k in KINDS}),
          Scheme("block 16 acts, weights 32", block=16, wblock_for={k: 32 for k in KINDS}),
          Scheme("no peaks", peak=None),
          Scheme("peaks > 1.5x", peak=1.5), Scheme("peaks > 1.1x", peak=1.1), Scheme("peaks > 1.0x (always)", peak=1.0),
          Scheme("2 peaks / block (> 1.25x each)", npeaks=2), Scheme("4 peaks / block (> 1.25x each)", npeaks=4),
          Scheme("2 peaks / block (> 1.0x: top 2 always)", npeaks=2, peak=1.0),
          Scheme("weights with peaks too (> 1.25x)", wpeak=1.25)]
    if L >= 2:  # the cheap fixes (the trained world's sensitive matrices: attention of layers 0-1)
        ov = lambda ls, ks, **d: (ls, ks, d)  # noqa: E731
        S += [Scheme("fix: v,k of L0-1 + o of L0 + q of L1 exact",
                     overrides=[ov([0, 1], ["v", "k"], exact=True), ov([0], ["o"], exact=True),
                                ov([1], ["q"], exact=True)]),
              Scheme("fix: v,k,o of L0-1 exact", overrides=[ov([0, 1], ["v", "k", "o"], exact=True)]),
              Scheme("fix: q,k,v,o of L0-1 exact", overrides=[ov([0, 1], ["q", "k", "v", "o"], exact=True)]),
              Scheme("fix: layers 0-1 exact", overrides=[ov([0, 1], None, exact=True)]),
              Scheme("fix: q,k,v,o of L0-1 int16-like (2 int8 planes, acts and weights)",
                     overrides=[ov([0, 1], ["q", "k", "v", "o"], apasses=2, wpasses=2)]),
              Scheme("fix: q,k,v,o of L0-1, 2 planes for acts only",
                     overrides=[ov([0, 1], ["q", "k", "v", "o"], apasses=2)]),
              Scheme("fix: q,k,v,o of L0-1, 2 planes for weights only",
                     overrides=[ov([0, 1], ["q", "k", "v", "o"], wpasses=2)]),
              Scheme("fix: every q,k,v,o int16-like (2 planes)", kinds=KINDS,
                     overrides=[ov(None, ["q", "k", "v", "o"], apasses=2, wpasses=2)])]
    return S


def fmt_row(name, r, macs_exact=None):
    extra = "" if macs_exact is None else " %.1f %% |" % macs_exact
    return "| %s | %.4f | %.3f | %+.4f | %.2f %% (%d) |%s" % (name, r["mean_abs"], r["max_abs"], r["mean"],
                                                             r["agree_pct"], r["agree"], extra)


def exact_share(model, sch):
    """share of the layer matrices' multiply-adds the scheme leaves exact"""
    per, _ = model.macs()
    tot = sum(per.values()) * model.L
    ex = sum(per[k] for l in range(model.L) for k in KINDS if not sch.on(l, k))
    return 100.0 * ex / tot


def parse_mats(s):
    out = []
    for t in s.split(","):
        if t:
            l, k = t.split(":")
            out.append((int(l), k))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--qwen2", default=os.path.join(here, "..", "..", "..", "tests", "golden", "trained", "qwen2"),
                    help="Hugging Face Qwen2 folder (default: the bundled trained world)")
    ap.add_argument("--ids", required=True, help="JSON array of token ids (the first N*chunk are used)")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--engine-exact", help="`recall score --per-position --json` file, exact profile")
    ap.add_argument("--engine-q8", help="the same under --numerics q8")
    ap.add_argument("--ablate", action="store_true", help="run the standard ablation table")
    ap.add_argument("--top", type=int, default=0, help="list the N positions of largest |dNLL| (scheme below)")
    ap.add_argument("--top-engine", action="store_true",
                    help="--top on the engine files' NLLs and greedy tokens instead of an emulated scheme")
    ap.add_argument("--matstats", action="store_true", help="per layer matrix local q8 error on exact inputs")
    ap.add_argument("--json", help="write every run's figures (and --top rows) as JSON")
    g = ap.add_argument_group("one scheme (default: the shipped q8)")
    g.add_argument("--kinds", default=",".join(KINDS), help="matrix kinds in q8 (comma list; others exact)")
    g.add_argument("--layers", help="layers in q8 (comma list; default all)")
    g.add_argument("--exact-mats", default="", help="layer:kind pairs kept exact, e.g. 0:down,3:down")
    g.add_argument("--only", choices=["both", "weights", "acts"], default="both",
                   help="quantise weights and activations (both), only weights, only activations")
    g.add_argument("--block", type=int, default=32)
    g.add_argument("--peak", default="1.25", help="peak threshold, or 'none'")
    g.add_argument("--npeaks", type=int, default=1, help="at most this many peaks a block")
    g.add_argument("--wpeak", default="none", help="peak rule for the weights too (threshold or none)")
    g.add_argument("--override", action="append", default=[],
                   help="per-matrix settings, applied in order, e.g. 'layers=0,1 kinds=v exact=1' or "
                        "'kinds=q,k,v,o apasses=2' (keys: layers, kinds, %s)" % ", ".join(DEFAULTS))
    g.add_argument("--name", default="the scheme of these options")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=OVERRIDE[;OVERRIDE..]",
                    help="one more scheme to run: the shipped one with these --override settings, e.g. "
                         "'v0,1 exact=layers=0,1 kinds=v exact=1' (repeatable)")
    ap.add_argument("--per-matrix", action="store_true",
                    help="each layer matrix alone in q8 (the rest exact): its share of the distance")
    a = ap.parse_args()

    torch.set_num_threads(1)
    model = Model(a.qwen2)
    runner = Runner(model)
    ids = json.load(open(a.ids))
    n = len(ids) // a.chunk * a.chunk
    ids = ids[:n]
    res = {"ids": a.ids, "n_ids": n, "chunk": a.chunk, "runs": []}
    t0 = time.time()
    ex = score(runner, ids, a.chunk, EXACT, keep_logits=bool(a.top))
    print("exact forward: %d scored positions, mean NLL %.6f, PPL %.4f (%.1f s)" %
          (len(ex["nll"]), ex["nll"].mean(), math.exp(ex["nll"].mean()), time.time() - t0))

    def check(eng, mine, what):
        if not eng:
            return
        e = load_engine(eng)
        assert (e["target"] == mine["target"]).all(), "%s: the engine file scored other ids" % eng
        r = distance(mine, e)
        print("%s vs engine (%s): mean |dNLL| %.2e, max %.2e, greedy agree %.2f %% (%d/%d)" %
              (what, e["numerics"], r["mean_abs"], r["max_abs"], r["agree_pct"], r["agree"], r["n"]))
        res["check_" + what.replace(" ", "_")] = r
        return e

    check(a.engine_exact, ex, "python exact")
    shipped = Scheme("all q8 (shipped)")
    q8 = None
    if a.engine_q8 or a.ablate:
        q8 = score(runner, ids, a.chunk, shipped)
        eq8 = check(a.engine_q8, q8, "python q8")
        if eq8 is not None and a.engine_exact:
            eex = load_engine(a.engine_exact)
            re = distance(eq8, eex)
            rp = distance(q8, ex)
            print("distance to exact: engine mean |dNLL| %.4f max %.3f agree %.2f %%; emulation %.4f max %.3f agree "
                  "%.2f %%" % (re["mean_abs"], re["max_abs"], re["agree_pct"], rp["mean_abs"], rp["max_abs"],
                               rp["agree_pct"]))
            de, dp = np.abs(eq8["nll"] - eex["nll"]), np.abs(q8["nll"] - ex["nll"])
            print("  per-position correlation of |dNLL| engine vs emulation: %.3f" % np.corrcoef(de, dp)[0, 1])
            res["engine_distance"] = re

    if a.matstats:
        stats = {}
        with torch.no_grad():
            for c in range(n // a.chunk):
                runner.forward(ids[c * a.chunk:(c + 1) * a.chunk], EXACT, stats)
        print("\nlocal q8 error per layer matrix (shipped scheme, on the exact forward's inputs):")
        print("| layer | matrix | rel rms err (both) | weights only | acts only | blocks with a peak | max |x| |")
        print("|---|---|---|---|---|---|---|")
        for (l, k), s in sorted(stats.items()):
            print("| %d | %s | %.3f %% | %.3f %% | %.3f %% | %.1f %% | %.2f |" % (
                l, k, 100 * math.sqrt(s["err"] / s["ref"]), 100 * math.sqrt(s["err_w"] / s["ref"]),
                100 * math.sqrt(s["err_a"] / s["ref"]), 100.0 * s["pk"] / s["blocks"], s["absmax"]))
        res["matstats"] = {"%d:%s" % lk: dict(s) for lk, s in stats.items()}

    schemes = []
    default_scheme = (a.kinds == ",".join(KINDS) and not a.layers and not a.exact_mats and a.only == "both" and
                      a.block == 32 and a.peak == "1.25" and a.npeaks == 1 and a.wpeak == "none" and not a.override)
    if a.ablate:
        schemes = ablation_schemes(model.L)
    elif not a.per_matrix and not a.variant:
        p = None if a.peak == "none" else float(a.peak)
        wp = None if a.wpeak == "none" else float(a.wpeak)
        schemes = [Scheme(a.name, layers=None if not a.layers else [int(x) for x in a.layers.split(",")],
                          kinds=[k for k in a.kinds.split(",") if k], exact_mats=parse_mats(a.exact_mats),
                          weights=a.only != "acts", acts=a.only != "weights", block=a.block, peak=p,
                          npeaks=a.npeaks, wpeak=wp, overrides=[parse_override(o) for o in a.override])]
    for v in a.variant:
        name, _, ov = v.partition("=")
        schemes.append(Scheme(name, overrides=[parse_override(o) for o in ov.split(";") if o.strip()]))
    if a.per_matrix:
        schemes += [Scheme("only %d:%s q8" % (l, k), layers=[l], kinds=[k]) for l in range(model.L) for k in KINDS]
    if schemes:
        print("\n| scheme | mean \\|dNLL\\| | max \\|dNLL\\| | mean dNLL | greedy agreement | layer MACs exact |")
        print("|---|---|---|---|---|---|")
    last = None
    for sch in schemes:
        t1 = time.time()
        reuse = q8 is not None and (sch.name.startswith("all q8") or (default_scheme and not a.ablate))
        r_ = q8 if reuse else score(runner, ids, a.chunk, sch)
        d = distance(r_, ex)
        print(fmt_row(sch.name, d, exact_share(model, sch)), flush=True)
        d["scheme"] = sch.name
        d["exact_macs_pct"] = exact_share(model, sch)
        d["seconds"] = time.time() - t1
        res["runs"].append(d)
        last = r_
    if a.top and a.top_engine:
        if not (a.engine_exact and a.engine_q8):
            raise SystemExit("--top-engine needs --engine-exact and --engine-q8")
        eex, eq8 = load_engine(a.engine_exact), load_engine(a.engine_q8)
        print("\n--top on the engine's own figures (%s vs %s); margins and ranks from this script's exact logits"
              % (a.engine_q8, a.engine_exact))
        ex_e = dict(ex, nll=eex["nll"], greedy=eex["greedy"])
        top_rows(a, model, ids, ex_e, eq8, res)
    elif a.top:
        sc = last if (last is not None and not a.ablate) else (q8 if q8 is not None else score(runner, ids, a.chunk,
                                                                                                 shipped))
        top_rows(a, model, ids, ex, sc, res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


def esc(t):
    return json.dumps(t, ensure_ascii=False)[1:-1].replace("|", "\\|")


def top_rows(a, model, ids, ex, sc, res):
    tt = token_texts(a.qwen2)
    d = sc["nll"] - ex["nll"]
    ad = np.abs(d)
    order = np.argsort(-ad)
    tot = ad.sum()
    print("\n|dNLL| concentration: top 10 positions carry %.1f %% of the total, top 1 %% (%d) %.1f %%, top 10 %% %.1f %%"
          % (100 * ad[order[:10]].sum() / tot, len(ad) // 100, 100 * ad[order[:len(ad) // 100]].sum() / tot,
             100 * ad[order[:len(ad) // 10]].sum() / tot))
    lg = torch.cat(ex["logits"])  # exact logits of the scored positions
    p_ex = torch.softmax(lg.double(), -1)
    ranks = (lg > lg.gather(1, torch.as_tensor(ex["target"])[:, None])).sum(1).numpy()
    # how |dNLL| depends on the exact side's certainty
    pt = np.exp(-ex["nll"])
    for lo, hi in ((0, 0.01), (0.01, 0.1), (0.1, 0.5), (0.5, 0.9), (0.9, 1.01)):
        s = (pt >= lo) & (pt < hi)
        if s.any():
            print("  exact p(target) in [%.2f, %.2f): %4d positions, mean |dNLL| %.4f, share of the total %.1f %%" %
                  (lo, hi, s.sum(), ad[s].mean(), 100 * ad[s].sum() / tot))
    flips = np.nonzero(sc["greedy"] != ex["greedy"])[0]
    if len(flips):
        mg = ex["margin"][flips]
        print("greedy flips: %d; exact top-2 logit margin there: median %.3f, max %.3f; < 0.1: %d, < 0.3: %d "
              "(all positions: median margin %.3f)" % (len(flips), np.median(mg), mg.max(), (mg < 0.1).sum(),
                                                       (mg < 0.3).sum(), np.median(ex["margin"])))
    print("\n| chunk:pos | context (last 12 tokens) | target | exact NLL | q8 NLL | dNLL | exact p(tgt) | rank | "
          "greedy ex / q8 | exact top-2 margin |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for i in order[:a.top]:
        c, p = int(ex["chunk"][i]), int(ex["pos"][i])
        base = c * a.chunk
        ctx = "".join(tt.get(t, "?") for t in ids[base + max(0, p - 11):base + p + 1])
        tgt = tt.get(int(ex["target"][i]), "?")
        ge, gq = tt.get(int(ex["greedy"][i]), "?"), tt.get(int(sc["greedy"][i]), "?")
        row = {"chunk": c, "pos": p, "context": ctx, "target": tgt, "nll_exact": float(ex["nll"][i]),
               "nll_q8": float(sc["nll"][i]), "p_exact": float(p_ex[i, ex["target"][i]]), "rank": int(ranks[i]),
               "greedy_exact": ge, "greedy_q8": gq, "margin": float(ex["margin"][i])}
        rows.append(row)
        print("| %d:%d | %s | %s | %.3f | %.3f | %+.3f | %.3f | %d | %s / %s | %.3f |" % (
            c, p, esc(ctx), esc(tgt), row["nll_exact"], row["nll_q8"], row["nll_q8"] - row["nll_exact"],
            row["p_exact"], row["rank"], esc(ge), esc(gq), row["margin"]))
    res["top"] = rows


if __name__ == "__main__":
    main()
