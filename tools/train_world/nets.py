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
        # matrices' and the embeddings' (lm_head keeps 0.02): docs/WORLD.md measured that a copy
        # forms with 1/sqrt(hidden) and 1.0 and not with 0.02
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
