"""nets.py - the world's networks in plain torch, with the Hugging Face parameter names and the
numerics the engine implements (src/qwen2.h, src/pooler.h, src/bert.h, src/heads.h):

  Qwen2: RMSNorm (fp32), q/k/v with bias, RoPE rotate-half with inv_freq theta^(-2i/d), GQA,
         SwiGLU MLP, untied lm_head. forward() takes ids or embeddings (rows of SP soft tokens).
  AttnPoolSP: sinusoidal PE on the input, 32 -> n_sp learned queries, blocks of cross-attention,
         self-attention and an erf-GELU FFN (pre-LN, eps 1e-5), LN out, rows scaled to |out_scale|.
  BERT: post-LN encoder (eps 1e-12), erf GELU, CLS pooling + L2 normalisation (sentence-transformers).
  Bridge head: Wq, Wk = Linear -> erf GELU -> Linear; score = Wq(q) . Wk(e).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, h, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        v = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(v + self.eps))


class Qwen2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        H, NH, NKV, D, FF, V = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"], cfg["vocab"]
        self.embed_tokens = nn.Embedding(V, H)
        self.layers = nn.ModuleList()
        for _ in range(cfg["layers"]):
            l = nn.Module()
            l.input_layernorm = RMSNorm(H, cfg["eps"])
            l.post_attention_layernorm = RMSNorm(H, cfg["eps"])
            l.self_attn = nn.Module()
            l.self_attn.q_proj = nn.Linear(H, NH * D)
            l.self_attn.k_proj = nn.Linear(H, NKV * D)
            l.self_attn.v_proj = nn.Linear(H, NKV * D)
            l.self_attn.o_proj = nn.Linear(NH * D, H, bias=False)
            l.mlp = nn.Module()
            l.mlp.gate_proj = nn.Linear(H, FF, bias=False)
            l.mlp.up_proj = nn.Linear(H, FF, bias=False)
            l.mlp.down_proj = nn.Linear(FF, H, bias=False)
            self.layers.append(l)
        self.norm = RMSNorm(H, cfg["eps"])
        self.lm_head = nn.Linear(H, V, bias=False)
        inv = 1.0 / (cfg["theta"] ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        self.register_buffer("inv_freq", inv, persistent=False)
        # std 0.02 everywhere (the recipe's committed world); cfg init_std / emb_std set the layer
        # matrices' and the embeddings' (lm_head keeps 0.02): bench/NOTES.md ("How the copy was
        # learned") measured that a copy forms with 1/sqrt(hidden) and 1.0 and not with 0.02
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02 if m is self.lm_head else cfg.get("init_std", 0.02))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=cfg.get("emb_std", 0.02))
        if cfg.get("tie"):  # trained with lm_head = embed_tokens; written as two tensors (untied file)
            self.lm_head.weight = self.embed_tokens.weight

    def hf_state_dict(self):
        sd = {}
        for k, v in self.state_dict().items():
            sd[k if k.startswith("lm_head") else "model." + k] = v.detach().clone().contiguous()
        return sd

    def rope(self, T, device=None):
        pos = torch.arange(T, dtype=torch.int64).float()
        fr = torch.outer(pos, self.inv_freq)
        emb = torch.cat([fr, fr], -1)
        return emb.cos(), emb.sin()

    def forward(self, x, q_layers=(), attn_mask=None, select=None):
        """x: [B, T, H] input rows (embeddings); positions 0..T-1; causal (attn_mask: an extra
        [B, 1, T, T] additive mask or None). Returns (logits [B,T,V] or, with a bool mask
        select [B,T], [N,V] for the selected rows; {layer: q_proj out [B,T,NH*D]})."""
        c = self.cfg
        B, T, _ = x.shape
        NH, NKV, D = c["heads"], c["kv_heads"], c["head_dim"]
        cos, sin = self.rope(T)
        causal = torch.full((T, T), float("-inf")).triu(1)
        mask = causal if attn_mask is None else causal + attn_mask
        qs = {}

        def rot(t):
            t1, t2 = t[..., : D // 2], t[..., D // 2:]
            return t * cos + torch.cat([-t2, t1], -1) * sin

        for li, l in enumerate(self.layers):
            h = l.input_layernorm(x)
            q = l.self_attn.q_proj(h)
            if li in q_layers:
                qs[li] = q
            k = l.self_attn.k_proj(h)
            v = l.self_attn.v_proj(h)
            q = rot(q.view(B, T, NH, D).transpose(1, 2))
            k = rot(k.view(B, T, NKV, D).transpose(1, 2)).repeat_interleave(NH // NKV, 1)
            v = v.view(B, T, NKV, D).transpose(1, 2).repeat_interleave(NH // NKV, 1)
            if attn_mask is None:  # one fused pass (scale, mask, matmul) a row: the [NH, T, T] scores are the cost
                a = torch.cat([torch.baddbmm(mask, q[b], k[b].transpose(1, 2), alpha=1.0 / math.sqrt(D)).softmax(-1)
                               @ v[b] for b in range(B)]).view(B, NH, T, D)
            else:
                att = (q @ k.transpose(-1, -2)) / math.sqrt(D) + mask
                a = att.softmax(-1) @ v
            x = x + l.self_attn.o_proj(a.transpose(1, 2).reshape(B, T, NH * D))
            h = l.post_attention_layernorm(x)
            x = x + l.mlp.down_proj(F.silu(l.mlp.gate_proj(h)) * l.mlp.up_proj(h))
        if select is not None:  # logits of the selected rows only: [N, V]
            return self.lm_head(self.norm(x[select])), qs
        return self.lm_head(self.norm(x)), qs


class PoolBlock(nn.Module):
    def __init__(self, H, heads, ffn):
        super().__init__()
        self.lnq1 = nn.LayerNorm(H)
        self.lnk = nn.LayerNorm(H)
        self.cross = nn.MultiheadAttention(H, heads, batch_first=True)
        self.lnq2 = nn.LayerNorm(H)
        self.selfa = nn.MultiheadAttention(H, heads, batch_first=True)
        self.lnq3 = nn.LayerNorm(H)
        self.ffn = nn.Sequential(nn.Linear(H, ffn), nn.GELU(), nn.Linear(ffn, H))


class AttnPoolSP(nn.Module):
    def __init__(self, H, n_sp, heads, blocks, ffn):
        super().__init__()
        self.H = H
        self.query = nn.Parameter(torch.randn(n_sp, H) * 0.02)
        self.blocks = nn.ModuleList([PoolBlock(H, heads, ffn) for _ in range(blocks)])
        self.ln_out = nn.LayerNorm(H)
        self.out_scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, past):
        """past: [L, H] token embeddings (L >= 1) -> [n_sp, H]."""
        L, H = past.shape
        pos = torch.arange(L, dtype=torch.float32)[:, None]
        div = torch.exp(-math.log(10000.0) * torch.arange(0, H, 2, dtype=torch.float32) / H)
        pe = torch.zeros(L, H)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        P = (past + pe)[None]
        q = self.query[None]
        for b in self.blocks:
            kn = b.lnk(P)
            q = q + b.cross(b.lnq1(q), kn, kn, need_weights=False)[0]
            n = b.lnq2(q)
            q = q + b.selfa(n, n, n, need_weights=False)[0]
            q = q + b.ffn(b.lnq3(q))
        sp = self.ln_out(q)[0]
        return sp / sp.norm(dim=-1, keepdim=True).clamp_min(1e-6) * self.out_scale.abs()


class BertLayer(nn.Module):
    def __init__(self, H, heads, ffn):
        super().__init__()
        self.heads = heads
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        self.attention.self.query = nn.Linear(H, H)
        self.attention.self.key = nn.Linear(H, H)
        self.attention.self.value = nn.Linear(H, H)
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(H, H)
        self.attention.output.LayerNorm = nn.LayerNorm(H, eps=1e-12)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(H, ffn)
        self.output = nn.Module()
        self.output.dense = nn.Linear(ffn, H)
        self.output.LayerNorm = nn.LayerNorm(H, eps=1e-12)

    def forward(self, x, mask):
        B, T, H = x.shape
        nh, d = self.heads, H // self.heads
        s = self.attention.self

        def sh(t):
            return t.view(B, T, nh, d).transpose(1, 2)

        att = (sh(s.query(x)) @ sh(s.key(x)).transpose(-1, -2)) / math.sqrt(d) + mask
        a = (att.softmax(-1) @ sh(s.value(x))).transpose(1, 2).reshape(B, T, H)
        x = self.attention.output.LayerNorm(x + self.attention.output.dense(a))
        h = F.gelu(self.intermediate.dense(x))
        return self.output.LayerNorm(x + self.output.dense(h))


class Bert(nn.Module):
    def __init__(self, vocab, H, layers, heads, ffn, max_pos=512):
        super().__init__()
        self.embeddings = nn.Module()
        self.embeddings.word_embeddings = nn.Embedding(vocab, H, padding_idx=0)
        self.embeddings.position_embeddings = nn.Embedding(max_pos, H)
        self.embeddings.token_type_embeddings = nn.Embedding(2, H)
        self.embeddings.LayerNorm = nn.LayerNorm(H, eps=1e-12)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList([BertLayer(H, heads, ffn) for _ in range(layers)])
        self.pooler = nn.Module()
        self.pooler.dense = nn.Linear(H, H)  # unused (CLS pooling), kept as in a BertModel checkpoint
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids, lens):
        """ids [B, T] padded with 0, lens [B] -> CLS rows, L2-normalised [B, H]."""
        B, T = ids.shape
        e = self.embeddings
        x = e.word_embeddings(ids) + e.position_embeddings(torch.arange(T))[None] + e.token_type_embeddings(
            torch.zeros_like(ids))
        x = e.LayerNorm(x)
        keep = torch.arange(T)[None, :] < lens[:, None]
        mask = torch.zeros(B, 1, 1, T).masked_fill(~keep[:, None, None, :], float("-inf"))
        for l in self.encoder.layer:
            x = l(x, mask)
        cls = x[:, 0]
        return cls / cls.norm(dim=-1, keepdim=True).clamp_min(1e-12)


class Bridge(nn.Module):
    def __init__(self, qdim, kdim, d):
        super().__init__()
        self.qdim, self.kdim, self.d = qdim, kdim, d
        self.Wq = nn.Sequential(nn.Linear(qdim, d), nn.GELU(), nn.Linear(d, d))
        self.Wk = nn.Sequential(nn.Linear(kdim, d), nn.GELU(), nn.Linear(d, d))


def grow_qwen2(model, new, after=(), seed=0):
    """A larger Qwen2 that computes what `model` computes, to start a bigger decoder from a trained
    one (train.py --grow). new: the larger config (hidden, heads, kv_heads, ffn, layers may grow;
    head_dim, vocab and theta stay). Every new unit starts silent: the new hidden dims, heads, FFN
    neurons and layers are read through random weights but written through zeros, so the residual
    stream's new dims are 0, a new head or neuron adds 0 and a new layer is the identity; the norms'
    weights shrink by sqrt(H/H') because the mean square is now taken over H' dims of which only H
    are not 0. The gradients reach the zero writers through the random readers, so every new unit
    learns. after: the old layer indices after which the new layers go (the rest at the end).
    Old head g keeps its key/value head (heads are grouped NH/NKV to one, as before, when the
    groups keep their size). Returns (the larger model, the new index of each old layer)."""
    c = model.cfg
    H, NH, NKV, D, FF, L = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["ffn"], c["layers"]
    H2, NH2, NKV2, FF2, L2 = new["hidden"], new["heads"], new["kv_heads"], new["ffn"], new["layers"]
    if new["head_dim"] != D or H2 < H or NH2 < NH or NKV2 < NKV or FF2 < FF or L2 < L or NH2 // NKV2 != NH // NKV:
        raise ValueError("grow_qwen2: the new config must be at least as large, with the same head_dim and group size")
    g = torch.Generator().manual_seed(seed)
    big = Qwen2(dict(c, **new))
    s = math.sqrt(H / H2)
    rstd = 1.0 / math.sqrt(H2)

    def rnd(*shape, std=rstd):
        return torch.randn(*shape, generator=g) * std

    def reader(old_w, out_old, out_new, in_old, in_new, std=rstd):
        # [out_new, in_new]: old block kept, the rest random (they read dims or feed units that start at 0)
        w = rnd(out_new, in_new, std=std)
        w[:out_old, :in_old] = old_w
        return w

    def writer(old_w, out_old, out_new, in_old, in_new):
        w = torch.zeros(out_new, in_new)
        w[:out_old, :in_old] = old_w
        return w

    def norm(old_w):
        return torch.cat([old_w * s, torch.full((H2 - H,), s)])

    with torch.no_grad():
        big.embed_tokens.weight.copy_(writer(model.embed_tokens.weight, model.embed_tokens.weight.shape[0],
                                             big.embed_tokens.weight.shape[0], H, H2))
        big.norm.weight.copy_(norm(model.norm.weight))
        big.lm_head.weight.copy_(reader(model.lm_head.weight, c["vocab"], new.get("vocab", c["vocab"]), H, H2, std=0.02))
        slots = []  # where each old layer goes
        extra = L2 - L
        for i in range(L):
            slots.append(len(slots) + sum(1 for a in after[:extra] if a < i))
        for i, ol in enumerate(model.layers):
            nl = big.layers[slots[i]]
            nl.input_layernorm.weight.copy_(norm(ol.input_layernorm.weight))
            nl.post_attention_layernorm.weight.copy_(norm(ol.post_attention_layernorm.weight))
            a, b = ol.self_attn, nl.self_attn
            b.q_proj.weight.copy_(reader(a.q_proj.weight, NH * D, NH2 * D, H, H2))
            b.q_proj.bias.copy_(torch.cat([a.q_proj.bias, torch.zeros((NH2 - NH) * D)]))
            for p in ("k_proj", "v_proj"):
                getattr(b, p).weight.copy_(reader(getattr(a, p).weight, NKV * D, NKV2 * D, H, H2))
                getattr(b, p).bias.copy_(torch.cat([getattr(a, p).bias, torch.zeros((NKV2 - NKV) * D)]))
            b.o_proj.weight.copy_(writer(a.o_proj.weight, H, H2, NH * D, NH2 * D))
            m, n = ol.mlp, nl.mlp
            n.gate_proj.weight.copy_(reader(m.gate_proj.weight, FF, FF2, H, H2))
            n.up_proj.weight.copy_(reader(m.up_proj.weight, FF, FF2, H, H2))
            n.down_proj.weight.copy_(writer(m.down_proj.weight, H, H2, FF, FF2))
        for j, nl in enumerate(big.layers):
            if j in slots:
                continue
            for p in (nl.self_attn.o_proj, nl.mlp.down_proj):
                p.weight.zero_()
            for p in (nl.self_attn.q_proj, nl.self_attn.k_proj, nl.self_attn.v_proj, nl.mlp.gate_proj, nl.mlp.up_proj):
                p.weight.copy_(rnd(*p.weight.shape))
    return big, slots
