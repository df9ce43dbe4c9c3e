/* gen_synth.c - writes a synthetic recall world at the REAL shapes, with random weights:
 *
 *   OUT/qwen2/   DeepSeek-R1-Distill-Qwen-1.5B shape: hidden 1536, 28 layers, 12 heads / 2 KV
 *                heads, FFN 8960, vocab 151936, bf16, real tensor names, written as two shards
 *                + model.safetensors.index.json (exercises the sharded path); the real
 *                tokenizer.json is copied in from --tokenizers DIR
 *   OUT/bge/     bge-base-en-v1.5 shape: hidden 768, 12 layers, 12 heads, FFN 3072, vocab 30522,
 *                fp32, sentence-transformers layout, the real vocab.txt
 *   OUT/pooler.safetensors  AttnPoolSP 32 x 1536, 3 blocks, FFN 2048, no args (heads default 8)
 *   OUT/gate.npz, OUT/bge_head.npz  gate [4608] and bridge head (qdim 4608, kdim 768, d 128)
 *
 * Nothing here is committed: `make synth` builds it under build/synth (about 3.6 GB).
 * Weights are uniform in +-0.035 (std ~0.02) from a fixed xorshift stream, so reruns are
 * byte-identical. Norm weights are 1, biases small.
 *
 * --copy-world writes OUT/qwen2 only: the same shapes and dtypes (so every step costs what it
 * costs on the random world), but a model that COPIES, which random weights never do. o_proj and
 * down_proj are scaled by 2^-12, so the residual stream stays the token's own embedding, and
 * lm_head is the embedding with its rows rotated inside groups of 32 ids (the special tokens at
 * the end map to themselves): greedy decoding then walks t -> 32*(t/32) + (t+1)%32, a 32-token
 * cycle, and a reply repeats what followed the same token earlier in the prompt. bench_draft uses
 * it to measure --draft on a copy-heavy turn (`make synth-copy`).
 */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    uint64_t s;
} rng;

static float urand(rng *r, float a) {
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return a * ((float)(r->s >> 40) / (float)(1u << 23) - 1.0f);
}

typedef enum { F_RAND, F_ONES, F_ROT_EMBED } fill;

/* --copy-world: lm_head rows are the embedding's, rotated inside groups of COPY_GROUP ids below
 * COPY_PLAIN_FROM (the special tokens from there on keep their own row) */
#define COPY_GROUP 32
#define COPY_PLAIN_FROM 151616

typedef struct {
    char name[160];
    int bf16;
    int ndim;
    int64_t shape[2];
    fill how;
    float scale;
} spec;

typedef struct {
    spec *s;
    size_t n, cap;
    uint16_t *embed; /* --copy-world: the bf16 embedding, kept while written for F_ROT_EMBED */
} speclist;

static void add(speclist *l, const char *name, int bf16, int ndim, int64_t a, int64_t b, fill how, float scale) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->s = realloc(l->s, l->cap * sizeof *l->s);
        if (!l->s) exit(1);
    }
    spec *s = &l->s[l->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->bf16 = bf16;
    s->ndim = ndim;
    s->shape[0] = a;
    s->shape[1] = b;
    s->how = how;
    s->scale = scale;
}

/* One layer's (or block's) tensors: PREFIX.i.SUFFIX for each row of ts, in order. */
typedef struct {
    const char *s;
    int nd;
    int64_t a, c;
    fill how;
    float sc;
} tspec;
static void add_layer(speclist *l, const char *prefix, int64_t i, int bf16, const tspec *ts, size_t n) {
    char name[160];
    for (size_t k = 0; k < n; k++) {
        snprintf(name, sizeof name, "%s.%lld.%s", prefix, (long long)i, ts[k].s);
        add(l, name, bf16, ts[k].nd, ts[k].a, ts[k].c, ts[k].how, ts[k].sc);
    }
}

static int64_t numel(const spec *s) { return s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1]; }
static size_t nbytes(const spec *s) { return (size_t)numel(s) * (s->bf16 ? 2 : 4); }

static void die(const char *what) {
    fprintf(stderr, "gen_synth: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Writes specs [from, to) as one safetensors file, streaming the data. */
static void write_st(const char *path, speclist *l, size_t from, size_t to, rng *r) {
    size_t cap = 1 << 20, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (size_t i = from; i < to; i++) {
        spec *s = &l->s[i];
        char shape[64];
        if (s->ndim == 1) snprintf(shape, sizeof shape, "[%lld]", (long long)s->shape[0]);
        else snprintf(shape, sizeof shape, "[%lld,%lld]", (long long)s->shape[0], (long long)s->shape[1]);
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                                s->name, s->bf16 ? "BF16" : "F32", shape, (unsigned long long)off,
                                (unsigned long long)(off + nbytes(s)));
        off += nbytes(s);
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) die(path);
    uint64_t hl = len;
    unsigned char hb[8];
    for (int i = 0; i < 8; i++) hb[i] = (unsigned char)(hl >> (8 * i));
    fwrite(hb, 1, 8, f);
    fwrite(h, 1, len, f);
    free(h);
    size_t chunk = 1 << 20;
    float *buf = malloc(chunk * 4);
    uint16_t *hbuf = malloc(chunk * 2);
    for (size_t i = from; i < to; i++) {
        spec *s = &l->s[i];
        int64_t n = numel(s);
        if (s->how == F_ROT_EMBED) { /* row v = embedding row of v's predecessor in its group */
            const int64_t cols = s->shape[1];
            for (int64_t v = 0; v < s->shape[0]; v++) {
                const int64_t g = v - v % COPY_GROUP,
                              src = v < COPY_PLAIN_FROM ? g + (v - g + COPY_GROUP - 1) % COPY_GROUP : v;
                if (fwrite(l->embed + src * cols, 2, (size_t)cols, f) != (size_t)cols) die(path);
            }
            continue;
        }
        uint16_t *keep = l->embed && !strcmp(s->name, "model.embed_tokens.weight") ? l->embed : NULL;
        for (int64_t done = 0; done < n;) {
            size_t m = (size_t)(n - done) < chunk ? (size_t)(n - done) : chunk;
            for (size_t k = 0; k < m; k++) buf[k] = s->how == F_ONES ? 1.0f + urand(r, s->scale) : urand(r, s->scale);
            if (s->bf16) {
                for (size_t k = 0; k < m; k++) {
                    uint32_t u;
                    memcpy(&u, &buf[k], 4);
                    hbuf[k] = (uint16_t)(u >> 16);
                }
                if (keep) memcpy(keep + done, hbuf, m * 2);
                if (fwrite(hbuf, 2, m, f) != m) die(path);
            } else if (fwrite(buf, 4, m, f) != m) {
                die(path);
            }
            done += (int64_t)m;
        }
    }
    free(buf);
    free(hbuf);
    if (fclose(f) != 0) die(path);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) die(path);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    if (!a) die(from);
    if (!b) die(to);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n) die(to);
    fclose(a);
    if (fclose(b) != 0) die(to);
}

static void npz_add_rand(rc_npz_writer *w, const char *key, int ndim, int64_t a, int64_t b, rng *r, float scale,
                         float base) {
    int64_t n = ndim == 0 ? 1 : ndim == 1 ? a : a * b;
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = base + urand(r, scale);
    int64_t shape[2] = {a, b};
    recall_err err = {0};
    if (rc_npz_writer_add(w, key, RC_NPY_F32, ndim, shape, x, &err)) {
        fprintf(stderr, "gen_synth: %s\n", err.msg);
        exit(1);
    }
    free(x);
}

/* Copies TOKDIR/from to OUT/to (the real tokenizer files next to the synthetic weights). */
static void copy_tok(const char *tokdir, const char *from, const char *out, const char *to) {
    char p[4096], q[4096];
    snprintf(p, sizeof p, "%s/%s", tokdir, from);
    snprintf(q, sizeof q, "%s/%s", out, to);
    copy_file(p, q);
}

static void write_npz(rc_npz_writer *w, const char *out, const char *name) {
    char p[4096];
    recall_err err = {0};
    snprintf(p, sizeof p, "%s/%s", out, name);
    if (rc_npz_writer_write(w, p, &err)) {
        fprintf(stderr, "gen_synth: %s\n", err.msg);
        exit(1);
    }
    rc_npz_writer_free(w);
}

/* Qwen2 1.5B in two shards with their index, its config and tokenizer (the copy world: see the
 * file header). */
static void write_qwen2(const char *out, const char *tokdir, int copy_world, rng *r) {
    char p[4096];
    const int64_t H = 1536, L = 28, KV = 256, F = 8960, V = 151936;
    speclist ql = {0};
    const float mix = copy_world ? 0.035f / 4096.0f : 0.035f; /* o_proj, down_proj: see the header */
    if (copy_world && !(ql.embed = malloc((size_t)(V * H) * 2))) die("embedding copy");
    add(&ql, "model.embed_tokens.weight", 1, 2, V, H, F_RAND, 0.035f);
    const tspec layer[] = {
        {"input_layernorm.weight", 1, H, 0, F_ONES, 0.05f},
        {"self_attn.q_proj.weight", 2, H, H, F_RAND, 0.035f},
        {"self_attn.q_proj.bias", 1, H, 0, F_RAND, 0.1f},
        {"self_attn.k_proj.weight", 2, KV, H, F_RAND, 0.035f},
        {"self_attn.k_proj.bias", 1, KV, 0, F_RAND, 0.1f},
        {"self_attn.v_proj.weight", 2, KV, H, F_RAND, 0.035f},
        {"self_attn.v_proj.bias", 1, KV, 0, F_RAND, 0.1f},
        {"self_attn.o_proj.weight", 2, H, H, F_RAND, mix},
        {"post_attention_layernorm.weight", 1, H, 0, F_ONES, 0.05f},
        {"mlp.gate_proj.weight", 2, F, H, F_RAND, 0.035f},
        {"mlp.up_proj.weight", 2, F, H, F_RAND, 0.035f},
        {"mlp.down_proj.weight", 2, H, F, F_RAND, mix},
    };
    for (int64_t l = 0; l < L; l++) add_layer(&ql, "model.layers", l, 1, layer, sizeof layer / sizeof layer[0]);
    add(&ql, "model.norm.weight", 1, 1, H, 0, F_ONES, 0.05f);
    add(&ql, "lm_head.weight", 1, 2, V, H, copy_world ? F_ROT_EMBED : F_RAND, 0.035f);
    size_t half = 1 + 14 * 12; /* embeddings + layers 0..13 in shard 1 */
    fprintf(stderr, "gen_synth: qwen2 shard 1/2\n");
    snprintf(p, sizeof p, "%s/qwen2/model-00001-of-00002.safetensors", out);
    write_st(p, &ql, 0, half, r);
    fprintf(stderr, "gen_synth: qwen2 shard 2/2\n");
    snprintf(p, sizeof p, "%s/qwen2/model-00002-of-00002.safetensors", out);
    write_st(p, &ql, half, ql.n, r);
    snprintf(p, sizeof p, "%s/qwen2/model.safetensors.index.json", out);
    FILE *f = fopen(p, "w");
    if (!f) die(p);
    fprintf(f, "{\"metadata\":{},\"weight_map\":{");
    for (size_t i = 0; i < ql.n; i++)
        fprintf(f, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "", ql.s[i].name, i < half ? 1 : 2);
    fprintf(f, "}}\n");
    if (fclose(f) != 0) die(p);
    snprintf(p, sizeof p, "%s/qwen2/config.json", out);
    write_text(p, "{\"architectures\":[\"Qwen2ForCausalLM\"],\"bos_token_id\":151643,\"eos_token_id\":151643,"
                  "\"hidden_act\":\"silu\",\"hidden_size\":1536,\"intermediate_size\":8960,"
                  "\"max_position_embeddings\":131072,\"model_type\":\"qwen2\",\"num_attention_heads\":12,"
                  "\"num_hidden_layers\":28,\"num_key_value_heads\":2,\"rms_norm_eps\":1e-06,\"rope_theta\":10000,"
                  "\"rope_scaling\":null,\"sliding_window\":4096,\"tie_word_embeddings\":false,"
                  "\"torch_dtype\":\"bfloat16\",\"use_sliding_window\":false,\"vocab_size\":151936}\n");
    copy_tok(tokdir, "deepseek-r1-distill-qwen/tokenizer.json", out, "qwen2/tokenizer.json");
    copy_tok(tokdir, "deepseek-r1-distill-qwen/tokenizer_config.json", out, "qwen2/tokenizer_config.json");
    free(ql.embed);
    free(ql.s);
}

/* bge-base-en-v1.5 in the sentence-transformers layout, with the real vocab. */
static void write_bge(const char *out, const char *tokdir, rng *r) {
    char p[4096];
    const int64_t BH = 768, BL = 12, BF = 3072, BV = 30522;
    speclist bl = {0};
    add(&bl, "embeddings.word_embeddings.weight", 0, 2, BV, BH, F_RAND, 0.035f);
    add(&bl, "embeddings.position_embeddings.weight", 0, 2, 512, BH, F_RAND, 0.035f);
    add(&bl, "embeddings.token_type_embeddings.weight", 0, 2, 2, BH, F_RAND, 0.035f);
    add(&bl, "embeddings.LayerNorm.weight", 0, 1, BH, 0, F_ONES, 0.05f);
    add(&bl, "embeddings.LayerNorm.bias", 0, 1, BH, 0, F_RAND, 0.02f);
    const tspec layer[] = {
        {"attention.self.query.weight", 2, BH, BH, F_RAND, 0.035f},
        {"attention.self.query.bias", 1, BH, 0, F_RAND, 0.02f},
        {"attention.self.key.weight", 2, BH, BH, F_RAND, 0.035f},
        {"attention.self.key.bias", 1, BH, 0, F_RAND, 0.02f},
        {"attention.self.value.weight", 2, BH, BH, F_RAND, 0.035f},
        {"attention.self.value.bias", 1, BH, 0, F_RAND, 0.02f},
        {"attention.output.dense.weight", 2, BH, BH, F_RAND, 0.035f},
        {"attention.output.dense.bias", 1, BH, 0, F_RAND, 0.02f},
        {"attention.output.LayerNorm.weight", 1, BH, 0, F_ONES, 0.05f},
        {"attention.output.LayerNorm.bias", 1, BH, 0, F_RAND, 0.02f},
        {"intermediate.dense.weight", 2, BF, BH, F_RAND, 0.035f},
        {"intermediate.dense.bias", 1, BF, 0, F_RAND, 0.02f},
        {"output.dense.weight", 2, BH, BF, F_RAND, 0.035f},
        {"output.dense.bias", 1, BH, 0, F_RAND, 0.02f},
        {"output.LayerNorm.weight", 1, BH, 0, F_ONES, 0.05f},
        {"output.LayerNorm.bias", 1, BH, 0, F_RAND, 0.02f},
    };
    for (int64_t l = 0; l < BL; l++) add_layer(&bl, "encoder.layer", l, 0, layer, sizeof layer / sizeof layer[0]);
    add(&bl, "pooler.dense.weight", 0, 2, BH, BH, F_RAND, 0.035f);
    add(&bl, "pooler.dense.bias", 0, 1, BH, 0, F_RAND, 0.02f);
    fprintf(stderr, "gen_synth: bge\n");
    snprintf(p, sizeof p, "%s/bge/model.safetensors", out);
    write_st(p, &bl, 0, bl.n, r);
    snprintf(p, sizeof p, "%s/bge/config.json", out);
    write_text(p, "{\"architectures\":[\"BertModel\"],\"hidden_act\":\"gelu\",\"hidden_size\":768,"
                  "\"intermediate_size\":3072,\"layer_norm_eps\":1e-12,\"max_position_embeddings\":512,"
                  "\"model_type\":\"bert\",\"num_attention_heads\":12,\"num_hidden_layers\":12,"
                  "\"pad_token_id\":0,\"position_embedding_type\":\"absolute\",\"type_vocab_size\":2,"
                  "\"vocab_size\":30522}\n");
    snprintf(p, sizeof p, "%s/bge/sentence_bert_config.json", out);
    write_text(p, "{\"max_seq_length\": 512, \"do_lower_case\": true}\n");
    snprintf(p, sizeof p, "%s/bge/1_Pooling/config.json", out);
    write_text(p, "{\"word_embedding_dimension\": 768, \"pooling_mode_cls_token\": true, "
                  "\"pooling_mode_mean_tokens\": false, \"pooling_mode_max_tokens\": false, "
                  "\"pooling_mode_mean_sqrt_len_tokens\": false}\n");
    copy_tok(tokdir, "bge-base-en-v1.5/vocab.txt", out, "bge/vocab.txt");
    copy_tok(tokdir, "bge-base-en-v1.5/tokenizer_config.json", out, "bge/tokenizer_config.json");
    free(bl.s);
}

/* AttnPoolSP: 32 soft tokens, 3 blocks, FFN 2048. */
static void write_pooler(const char *out, rng *r) {
    char p[4096];
    const int64_t H = 1536;
    speclist pl = {0};
    add(&pl, "query", 0, 2, 32, H, F_RAND, 0.035f);
    const tspec ts[] = {
        {"lnq1.weight", 1, H, 0, F_ONES, 0.05f}, {"lnq1.bias", 1, H, 0, F_RAND, 0.02f},
        {"lnk.weight", 1, H, 0, F_ONES, 0.05f},  {"lnk.bias", 1, H, 0, F_RAND, 0.02f},
        {"cross.in_proj_weight", 2, 3 * H, H, F_RAND, 0.035f}, {"cross.in_proj_bias", 1, 3 * H, 0, F_RAND, 0.02f},
        {"cross.out_proj.weight", 2, H, H, F_RAND, 0.035f},   {"cross.out_proj.bias", 1, H, 0, F_RAND, 0.02f},
        {"lnq2.weight", 1, H, 0, F_ONES, 0.05f}, {"lnq2.bias", 1, H, 0, F_RAND, 0.02f},
        {"selfa.in_proj_weight", 2, 3 * H, H, F_RAND, 0.035f}, {"selfa.in_proj_bias", 1, 3 * H, 0, F_RAND, 0.02f},
        {"selfa.out_proj.weight", 2, H, H, F_RAND, 0.035f},   {"selfa.out_proj.bias", 1, H, 0, F_RAND, 0.02f},
        {"lnq3.weight", 1, H, 0, F_ONES, 0.05f}, {"lnq3.bias", 1, H, 0, F_RAND, 0.02f},
        {"ffn.0.weight", 2, 2048, H, F_RAND, 0.035f}, {"ffn.0.bias", 1, 2048, 0, F_RAND, 0.02f},
        {"ffn.2.weight", 2, H, 2048, F_RAND, 0.035f}, {"ffn.2.bias", 1, H, 0, F_RAND, 0.02f},
    };
    for (int b = 0; b < 3; b++) add_layer(&pl, "blocks", b, 0, ts, sizeof ts / sizeof ts[0]);
    add(&pl, "ln_out.weight", 0, 1, H, 0, F_ONES, 0.05f);
    add(&pl, "ln_out.bias", 0, 1, H, 0, F_RAND, 0.02f);
    add(&pl, "out_scale", 0, 1, 1, 0, F_ONES, 0.0f); /* written as [1]; the converter accepts [1] or 0-d */
    fprintf(stderr, "gen_synth: pooler\n");
    snprintf(p, sizeof p, "%s/pooler.safetensors", out);
    write_st(p, &pl, 0, pl.n, r);
    free(pl.s);
}

/* The gate [4608] and the bridge head (qdim 4608, kdim 768, d 128). */
static void write_heads(const char *out, rng *r) {
    recall_err err = {0};
    rc_npz_writer *w;
    if (rc_npz_writer_new(&w, &err)) die("npz writer");
    npz_add_rand(w, "coef", 1, 4608, 0, r, 0.05f, 0.0f);
    npz_add_rand(w, "intercept", 0, 0, 0, r, 0.0f, -6.2547f);
    npz_add_rand(w, "mean", 1, 4608, 0, r, 0.5f, 0.0f);
    npz_add_rand(w, "scale", 1, 4608, 0, r, 0.5f, 1.0f);
    npz_add_rand(w, "thresh", 0, 0, 0, r, 0.0f, -2.8222f);
    write_npz(w, out, "gate.npz");
    if (rc_npz_writer_new(&w, &err)) die("npz writer");
    int64_t dims[3] = {4608, 768, 128};
    const char *dn[3] = {"qdim", "kdim", "d"};
    for (int i = 0; i < 3; i++)
        if (rc_npz_writer_add(w, dn[i], RC_NPY_I64, 0, NULL, &dims[i], &err)) die("npz writer");
    npz_add_rand(w, "Wq.0.weight", 2, 128, 4608, r, 0.035f, 0.0f);
    npz_add_rand(w, "Wq.0.bias", 1, 128, 0, r, 0.02f, 0.0f);
    npz_add_rand(w, "Wq.2.weight", 2, 128, 128, r, 0.035f, 0.0f);
    npz_add_rand(w, "Wq.2.bias", 1, 128, 0, r, 0.02f, 0.0f);
    npz_add_rand(w, "Wk.0.weight", 2, 128, 768, r, 0.035f, 0.0f);
    npz_add_rand(w, "Wk.0.bias", 1, 128, 0, r, 0.02f, 0.0f);
    npz_add_rand(w, "Wk.2.weight", 2, 128, 128, r, 0.035f, 0.0f);
    npz_add_rand(w, "Wk.2.bias", 1, 128, 0, r, 0.02f, 0.0f);
    write_npz(w, out, "bge_head.npz");
}

int main(int argc, char **argv) {
    const int copy_world = argc == 4 && !strcmp(argv[1], "--copy-world");
    if (argc != 3 + copy_world) {
        fprintf(stderr, "usage: gen_synth [--copy-world] OUTDIR TOKENIZER_DIR\n"
                        "  TOKENIZER_DIR holds deepseek-r1-distill-qwen/ and bge-base-en-v1.5/ (tests/golden/tokenizers)\n"
                        "  --copy-world: OUTDIR/qwen2 only, a model whose greedy replies copy (see the file header)\n");
        return 2;
    }
    const char *out = argv[1 + copy_world], *tokdir = argv[2 + copy_world];
    char p[4096];
    mkdir(out, 0755);
    snprintf(p, sizeof p, "%s/qwen2", out);
    mkdir(p, 0755);
    if (!copy_world) {
        snprintf(p, sizeof p, "%s/bge", out);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/bge/1_Pooling", out);
        mkdir(p, 0755);
    }
    rng r = {0x9E3779B97F4A7C15ULL}; /* one stream, in this order: reruns are byte-identical */
    write_qwen2(out, tokdir, copy_world, &r);
    if (copy_world) {
        fprintf(stderr, "gen_synth: wrote %s/qwen2 (copy world)\n", out);
        return 0;
    }
    write_bge(out, tokdir, &r);
    write_pooler(out, &r);
    write_heads(out, &r);
    fprintf(stderr, "gen_synth: wrote %s\n", out);
    return 0;
}
