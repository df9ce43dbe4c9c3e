/* qwen2.c - Qwen2 decoder forward with a KV cache, scalar reference (math and order in qwen2.h
 * and ops.h; RoPE profiles in rope.h). All state lives in the rc_qwen2 context. Open: read_dims,
 * read_gate_layers, check_context (the one context rule), bind_weights, alloc_scratch, then the
 * RoPE inverse frequencies. Weights and row scratch are set up at open;
 * the KV cache, the RoPE tables and the attention score rows grow with the positions in use
 * (RC_QWEN2_KV_UNIT, then doubling, capped at max_ctx; rc_qwen2_reserve sizes them once).
 * Growing copies the cached rows unchanged and every table entry is a pure function of its
 * position, so growth never changes a result bit. The K / V layout (kv_off), the decode split
 * (attn_grain) and the huge-page advice (kv_alloc) decide only how fast decode streams the cache
 * at depth, never a bit. */
#include "qwen2.h"

#include "kv_pages.h"
#include "mem.h"
#include "ops.h"
#include "pool.h"
#include "q8.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif
#include <time.h>

typedef struct {
    rc_mat q, k, v, o, gate, up, down;
    float *bq, *bk, *bv, *ln1, *ln2; /* fp32 copies (in m->vecs) */
} layer_w;

/* The q8 profile's packed weights (q8.h): per layer q, k, v, o, gate, up, down (lm_head stays
 * exact), in one huge-page-advised arena. Made at open by the first context;
 * rc_qwen2_open_shared contexts borrow it. */
enum { Q8_Q, Q8_K, Q8_V, Q8_O, Q8_GATE, Q8_UP, Q8_DOWN, Q8_PER_LAYER };
typedef struct {
    rc_q8mat *mats; /* [layers * Q8_PER_LAYER] */
    int n;
    void *arena;
    size_t arena_len; /* rc_huge_map's length; 0: the arena came from aligned_alloc */
    size_t bytes;
    double seconds;
} q8_pack;

struct rc_qwen2 {
    rc_qwen2_config c;
    int qd, kvd;        /* NH*D, NKV*D */
    rc_mat embed, lm_head;
    layer_w *L;
    float *vecs;        /* arena: biases and norm weights */
    float *final_norm;
    int max_ctx, n_cached;
    int cap;            /* positions allocated in kc / vc / rope / scores (0 .. max_ctx) */
    int chunk;          /* rows per forward chunk: RC_QWEN2_CHUNK (the kernels' matmul_rows where they ask,
                         * at most RC_QWEN2_CHUNK_MAX), or RC_QWEN2_CHUNK_Q8 under q8 */
    int att_pairs, att_tile; /* attention blocking (rc_qwen2_set_attn_blocking) */
    rc_kv_dtype kv;      /* the element of kc / vc / gk / gv (rc_qwen2_set_kv_dtype) */
    size_t kv_esz;      /* its bytes: 4 (f32) or 2 (f16) */
    void *kc, *vc;      /* [NL][NKV][cap][D] (kv_off), K after RoPE (kv_alloc) */
    float *rope_cos, *rope_sin; /* [cap][D/2] */
    float *inv_freq;    /* [D/2] */
    float scale;        /* (float)(1/sqrt(D)) */
    /* scratch for one chunk of rows */
    float *x, *xn, *q, *k, *v, *att, *g, *u, *scores;
    float *gate_q;      /* [n_gate][qd] */
    const rc_exec *ex;  /* kernels + thread pool (borrowed, or own_ex) */
    rc_exec *own_ex;
    /* q8 profile (ex->opts.numerics == RC_NUMERICS_Q8): the packed weights (owned when q8_own) and the
     * quantised rows of one matmul input */
    q8_pack *q8;
    int q8_own;
    rc_q8act xa;
    uint8_t *q8x;       /* [NL] RC_Q8X_* bits of the matrices q8 leaves exact (RC_Q8_EXACT_KEY), or NULL */
    char q8x_spec[96];  /* their canonical SPEC */
    /* page-sparse decode (kv_pages.h), all NULL / 0 while kvp.page == 0 */
    rc_kv_pages_opts kvp;
    float *kmin, *kmax;    /* [ceil(cap / page)][NL][kvd]: elementwise key bounds per page */
    int max_pages;         /* ceil(max_ctx / page) */
    rc_kvp_rank *rank;     /* [NKV][max_pages] selection scratch */
    unsigned char *keep;   /* [NKV][max_pages] */
    void *gk, *gv;         /* [NKV][gather_cap][D]: the selected K / V rows of one decode step */
    int gather_cap;        /* positions per KV head in gk / gv */
    int *n_sel;            /* [NKV] positions gathered */
};

static void kv_pages_free(rc_qwen2 *m);

/* The K and V arrays. Decode reads every cached key and value of every layer once per step, so
 * they are 2 MiB aligned and advised for transparent huge pages where the OS offers them (Linux
 * MADV_HUGEPAGE; advisory, nothing depends on it): with 4 KiB pages a 512-position f32 cache of the
 * real-shape model spans 7,168 pages, more than the second-level TLB holds, walked every step. */
#define RC_KV_HUGE ((size_t)2 << 20)
static void *kv_alloc(size_t bytes) {
    const size_t len = (bytes + RC_KV_HUGE - 1) / RC_KV_HUGE * RC_KV_HUGE;
    void *p = NULL;
    if (!len || posix_memalign(&p, RC_KV_HUGE, len)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}
static void q8_pack_free(q8_pack *p) {
    if (!p) return;
    if (p->arena_len) rc_huge_unmap(p->arena, p->arena_len);
    else free(p->arena);
    free(p->mats);
    free(p);
}

void rc_qwen2_close(rc_qwen2 *m) {
    if (!m) return;
    if (m->q8_own) q8_pack_free(m->q8);
    rc_q8act_free(&m->xa);
    RC_FREE(m->q8x, m->L, m->vecs, m->kc, m->vc, m->rope_cos, m->rope_sin, m->inv_freq, m->x, m->xn, m->q, m->k, m->v,
            m->att, m->g, m->u, m->scores, m->gate_q);
    kv_pages_free(m);
    rc_exec_close(m->own_ex);
    free(m);
}

static float *falloc(size_t n) {
    return (float *)calloc(n ? n : 1, sizeof(float));
}

recall_status rc_qwen2_open(const rc_blob *b, int max_ctx, rc_qwen2 **out, recall_err *err) {
    return rc_qwen2_open_ex(b, max_ctx, NULL, out, err);
}

/* Dimensions, norms, RoPE base and profile, special ids: the config keys qwen2.* and qwen2.rope.*. */
static recall_status read_dims(const rc_blob *b, rc_qwen2_config *c, recall_err *err) {
    double eps;
    RC_TRY(rc_blob_get_int(b, "qwen2.hidden", 1, 1 << 16, &c->hidden, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.layers", 1, 1024, &c->layers, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.heads", 1, 1024, &c->heads, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.kv_heads", 1, 1024, &c->kv_heads, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.head_dim", 2, 4096, &c->head_dim, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.ffn", 1, 1 << 20, &c->ffn, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.vocab", 1, 1 << 24, &c->vocab, err));
    RC_TRY(rc_blob_get_int(b, "qwen2.max_pos", 1, 1 << 24, &c->max_pos, err));
    /* bos/eos are informational here (the loop reads them); -1 when the blob has none */
    c->bos_id = c->eos_id = -1;
    if (rc_blob_kv_find(b, "qwen2.bos_id")) RC_TRY(rc_blob_get_int(b, "qwen2.bos_id", 0, c->vocab - 1, &c->bos_id, err));
    if (rc_blob_kv_find(b, "qwen2.eos_id")) RC_TRY(rc_blob_get_int(b, "qwen2.eos_id", 0, c->vocab - 1, &c->eos_id, err));
    RC_TRY(rc_blob_get_f64(b, "qwen2.rms_eps", &eps, err));
    RC_TRY(rc_blob_get_f64(b, "qwen2.rope_theta", &c->rope_theta, err));
    c->rms_eps = (float)eps;
    if (!(eps > 0.0 && eps < 1.0) || !(c->rope_theta > 1.0 && c->rope_theta < 1e12))
        return rc_fail(err, RECALL_E_FORMAT, "%s: qwen2.rms_eps / rope_theta out of range", rc_blob_path(b));
    if (c->head_dim % 2 || c->heads % c->kv_heads)
        return rc_fail(err, RECALL_E_FORMAT, "%s: qwen2 head_dim must be even and heads a multiple of kv_heads",
                       rc_blob_path(b));
    RC_TRY(rc_rope_read(b, &c->rope, err));
    RC_TRY(rc_rope_blob_positions(b, &c->trained_pos, err));
    return RECALL_OK;
}

/* gate.layers (default 8, 14, 20 where the model has them) */
static recall_status read_gate_layers(const rc_blob *b, rc_qwen2_config *c, recall_err *err) {
    const rc_blob_kv *kv = rc_blob_kv_find(b, "gate.layers");
    if (!kv) {
        const int def[3] = {8, 14, 20};
        for (int i = 0; i < 3; i++)
            if (def[i] < c->layers) c->gate_layers[c->n_gate++] = def[i];
        return RECALL_OK;
    }
    if (kv->type != RC_KV_I64 || kv->count < 1 || kv->count > RC_QWEN2_MAX_GATE)
        return rc_fail(err, RECALL_E_FORMAT, "%s: gate.layers malformed", rc_blob_path(b));
    for (uint32_t i = 0; i < kv->count; i++) {
        if (kv->v.i[i] < 0 || kv->v.i[i] >= c->layers)
            return rc_fail(err, RECALL_E_FORMAT, "%s: gate.layers[%u] = %lld outside [0, %d)", rc_blob_path(b), i,
                           (long long)kv->v.i[i], c->layers);
        c->gate_layers[c->n_gate++] = (int)kv->v.i[i];
    }
    return RECALL_OK;
}

/* REQ-CTX-001: the one context rule. Never clamp silently; name both numbers. */
static recall_status check_context(const rc_blob *b, const rc_qwen2_config *c, int max_ctx, recall_err *err) {
    if (max_ctx > c->trained_pos) {
        char prof[192];
        rc_rope_describe(&c->rope, c->max_pos, prof, sizeof prof);
        return rc_fail(err, RECALL_E_LIMIT,
                       "%s: a context of %d positions was requested but the model was trained on %d (rope %s)",
                       rc_blob_path(b), max_ctx, c->trained_pos, prof);
    }
    if (max_ctx < 1)
        return rc_fail(err, RECALL_E_ARG, "qwen2: context of %d positions requested; at least 1 is needed", max_ctx);
    return RECALL_OK;
}

/* Zero-copy views of every weight matrix; fp32 copies of the biases and norm weights. */
static recall_status bind_weights(rc_qwen2 *m, const rc_blob *b, recall_err *err) {
    const rc_qwen2_config *c = &m->c;
    const int H = c->hidden, NL = c->layers, F = c->ffn;
    RC_TRY(rc_blob_mat(b, "qwen2.model.embed_tokens.weight", c->vocab, H, &m->embed, err));
    if (rc_blob_find(b, "qwen2.lm_head.weight"))
        RC_TRY(rc_blob_mat(b, "qwen2.lm_head.weight", c->vocab, H, &m->lm_head, err));
    else
        m->lm_head = m->embed; /* tied embeddings */
    size_t per_layer = (size_t)m->qd + 2 * (size_t)m->kvd + 2 * (size_t)H;
    m->L = (layer_w *)calloc((size_t)NL, sizeof(layer_w));
    m->vecs = falloc(per_layer * (size_t)NL + (size_t)H);
    if (!m->L || !m->vecs) return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for %d layers", NL);
    for (int l = 0; l < NL; l++) {
        layer_w *w = &m->L[l];
        char nm[RC_TENSOR_NAME_LEN + 32];
        float *vp = m->vecs + per_layer * (size_t)l;
        w->bq = vp;
        w->bk = w->bq + m->qd;
        w->bv = w->bk + m->kvd;
        w->ln1 = w->bv + m->kvd;
        w->ln2 = w->ln1 + H;
#define MAT(field, suffix, rows, cols)                                                           \
    snprintf(nm, sizeof nm, "qwen2.model.layers.%d.%s", l, suffix);                              \
    RC_TRY(rc_blob_mat(b, nm, rows, cols, &w->field, err))
#define VEC(field, suffix, n)                                                                    \
    snprintf(nm, sizeof nm, "qwen2.model.layers.%d.%s", l, suffix);                              \
    RC_TRY(rc_blob_vec(b, nm, n, w->field, err))
        MAT(q, "self_attn.q_proj.weight", m->qd, H);
        MAT(k, "self_attn.k_proj.weight", m->kvd, H);
        MAT(v, "self_attn.v_proj.weight", m->kvd, H);
        MAT(o, "self_attn.o_proj.weight", H, m->qd);
        MAT(gate, "mlp.gate_proj.weight", F, H);
        MAT(up, "mlp.up_proj.weight", F, H);
        MAT(down, "mlp.down_proj.weight", H, F);
        VEC(bq, "self_attn.q_proj.bias", m->qd);
        VEC(bk, "self_attn.k_proj.bias", m->kvd);
        VEC(bv, "self_attn.v_proj.bias", m->kvd);
        VEC(ln1, "input_layernorm.weight", H);
        VEC(ln2, "post_attention_layernorm.weight", H);
#undef MAT
#undef VEC
    }
    m->final_norm = m->vecs + per_layer * (size_t)NL;
    return rc_blob_vec(b, "qwen2.model.norm.weight", H, m->final_norm, err);
}

/* Row scratch for one chunk of m->chunk rows, allocated once. */
static recall_status alloc_scratch(rc_qwen2 *m, recall_err *err) {
    const size_t R = (size_t)m->chunk, H = (size_t)m->c.hidden, F = (size_t)m->c.ffn;
    m->inv_freq = falloc((size_t)(m->c.head_dim / 2));
    m->x = falloc(R * H);
    m->xn = falloc(R * H);
    m->q = falloc(R * (size_t)m->qd);
    m->k = falloc(R * (size_t)m->kvd);
    m->v = falloc(R * (size_t)m->kvd);
    m->att = falloc(R * (size_t)m->qd);
    m->g = falloc(R * F);
    m->u = falloc(R * F);
    m->gate_q = falloc((size_t)m->c.n_gate * (size_t)m->qd);
    if (!m->inv_freq || !m->x || !m->xn || !m->q || !m->k || !m->v || !m->att || !m->g || !m->u || !m->gate_q)
        return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory (max_ctx %d)", m->max_ctx);
    return RECALL_OK;
}

static double mono_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- attention kept exact under q8 (qwen2.h, RC_Q8_EXACT_KEY) ---------------------------- */

static const char Q8X_LETTERS[] = "qkvo"; /* bit i of a mask: Q8_Q + i */

recall_status rc_q8_exact_parse(const char *spec, int layers, uint8_t *mask, recall_err *err) {
    memset(mask, 0, (size_t)layers);
    const char *s = spec;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*s)) break;
        const long a = strtol(s, &end, 10);
        long b = a;
        if (*end == '-') {
            if (!isdigit((unsigned char)end[1])) break;
            b = strtol(end + 1, &end, 10);
        }
        if (*end != ':') break;
        if (b < a || b >= layers)
            return rc_fail(err, RECALL_E_ARG, "q8 exact layers \"%s\": layers %ld-%ld are not a range of 0-%d", spec,
                           a, b, layers - 1);
        unsigned bits = 0;
        for (s = end + 1; *s && *s != ','; s++) {
            const char *p = strchr(Q8X_LETTERS, *s);
            if (!p || (bits >> (p - Q8X_LETTERS) & 1u)) return rc_fail(err, RECALL_E_ARG,
                    "q8 exact layers \"%s\": '%c' is not one more of the letters q, k, v, o", spec, *s);
            bits |= 1u << (p - Q8X_LETTERS);
        }
        if (!bits) break;
        for (long l = a; l <= b; l++) {
            if (mask[l]) return rc_fail(err, RECALL_E_ARG, "q8 exact layers \"%s\": layer %ld named twice", spec, l);
            mask[l] = (uint8_t)bits;
        }
        if (!*s) return RECALL_OK;
        s++;
    }
    memset(mask, 0, (size_t)layers);
    return rc_fail(err, RECALL_E_ARG, "q8 exact layers \"%s\": expected LAYER:LETTERS or FIRST-LAST:LETTERS, "
                   "comma-separated, LETTERS from q, k, v, o (e.g. 0-1:qkvo)", spec);
}

void rc_q8_exact_format(const uint8_t *mask, int layers, char *out, size_t n) {
    size_t k = 0;
    if (n) out[0] = '\0';
    for (int l = 0, e; l < layers; l = e + 1) {
        for (e = l; e + 1 < layers && mask[e + 1] == mask[l];) e++;
        if (!mask[l]) continue;
        char item[48];
        int len = e > l ? snprintf(item, sizeof item, "%s%d-%d:", k ? "," : "", l, e)
                        : snprintf(item, sizeof item, "%s%d:", k ? "," : "", l);
        for (int i = 0; i < 4; i++)
            if (mask[l] >> i & 1) item[len++] = Q8X_LETTERS[i];
        item[len] = '\0';
        if (k + (size_t)len >= n) return; /* truncated: callers size out for the longest SPEC */
        memcpy(out + k, item, (size_t)len + 1);
        k += (size_t)len;
    }
}

/* The blob's RC_Q8_EXACT_KEY, if any: untrusted like any other byte of it, so parsed and checked
 * against the layer count before anything runs, under either profile. */
static recall_status read_q8_exact(rc_qwen2 *m, const rc_blob *b, recall_err *err) {
    const rc_blob_kv *kv = rc_blob_kv_find(b, RC_Q8_EXACT_KEY);
    if (!kv) return RECALL_OK;
    if (kv->type != RC_KV_STR)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s is not a string", rc_blob_path(b), RC_Q8_EXACT_KEY);
    char spec[sizeof kv->v.s + 1];
    memcpy(spec, kv->v.s, sizeof kv->v.s);
    spec[sizeof kv->v.s] = '\0';
    m->q8x = calloc((size_t)m->c.layers, 1);
    if (!m->q8x) return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory");
    recall_err e = {0};
    if (rc_q8_exact_parse(spec, m->c.layers, m->q8x, &e))
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s: %s", rc_blob_path(b), RC_Q8_EXACT_KEY, e.msg);
    rc_q8_exact_format(m->q8x, m->c.layers, m->q8x_spec, sizeof m->q8x_spec);
    return RECALL_OK;
}

/* Layer l's matrix i (Q8_Q .. Q8_DOWN) stays exact under q8. */
static int q8_exempt(const rc_qwen2 *m, int l, int i) { return m->q8x && i <= Q8_O && (m->q8x[l] >> i & 1); }

const char *rc_qwen2_q8_exact(const rc_qwen2 *m) { return m->q8 && m->q8x ? m->q8x_spec : ""; }

/* The q8 profile's packed weights of every decoder layer matrix (q8.h) but those kept exact,
 * packed on the context's threads. A matrix q8 cannot take (columns not a multiple of 32) fails
 * the open. */
/* Layer l's matrix i (Q8_Q .. Q8_DOWN). */
static const rc_mat *layer_mat(const rc_qwen2 *m, int l, int i) {
    const layer_w *w = &m->L[l];
    const rc_mat *src[Q8_PER_LAYER] = {&w->q, &w->k, &w->v, &w->o, &w->gate, &w->up, &w->down};
    return src[i];
}

static recall_status q8_pack_build(rc_qwen2 *m, const rc_blob *b, recall_err *err) {
    const int NL = m->c.layers;
    q8_pack *p = calloc(1, sizeof *p);
    if (p) p->mats = calloc((size_t)NL * Q8_PER_LAYER, sizeof *p->mats);
    if (!p || !p->mats) {
        free(p);
        return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for the q8 weights");
    }
    m->q8 = p;
    m->q8_own = 1;
    const double t0 = mono_seconds();
    p->n = NL * Q8_PER_LAYER;
    for (int i = 0; i < p->n; i++) {
        if (q8_exempt(m, i / Q8_PER_LAYER, i % Q8_PER_LAYER)) continue; /* stays zeroed: never packed */
        recall_status st = rc_q8_shape(layer_mat(m, i / Q8_PER_LAYER, i % Q8_PER_LAYER), &p->mats[i], err);
        if (st) return rc_fail(err, st, "%s: qwen2 layer %d matrix %d (q8 profile): %s", rc_blob_path(b),
                               i / Q8_PER_LAYER, i % Q8_PER_LAYER, err ? err->msg : "");
        p->bytes += rc_q8_bytes(&p->mats[i]);
    }
    p->arena = rc_huge_map(p->bytes, &p->arena_len);
    if (!p->arena) p->arena = aligned_alloc(64, p->bytes);
    if (!p->arena) return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for the q8 weights (%zu bytes)", p->bytes);
    size_t off = 0;
    for (int i = 0; i < p->n; i++) {
        if (q8_exempt(m, i / Q8_PER_LAYER, i % Q8_PER_LAYER)) continue;
        rc_q8_place(&p->mats[i], (uint8_t *)p->arena + off);
        off += rc_q8_bytes(&p->mats[i]);
        const rc_mat *w = layer_mat(m, i / Q8_PER_LAYER, i % Q8_PER_LAYER);
        rc_exec_q8_pack(m->ex, w, &p->mats[i]);
        /* the q8 matmuls read only the packed copy: the mapped weights' pages are released (a
         * 1.5B holds 737 MB of them), and fault in again if anything reads them */
        rc_mat_release(b, w, 0, w->rows);
    }
    p->seconds = mono_seconds() - t0;
    return RECALL_OK;
}

/* The packed matrix q8 multiplies by, or NULL for one it leaves exact. */
static const rc_q8mat *q8_layer(const rc_qwen2 *m, int l, int i) {
    return q8_exempt(m, l, i) ? NULL : &m->q8->mats[l * Q8_PER_LAYER + i];
}

/* base: NULL, or a context whose blob, execution context and q8 weights this one shares. */
static recall_status open_ctx(const rc_blob *b, int max_ctx, const rc_exec *ex, const rc_qwen2 *base, rc_qwen2 **out,
                              recall_err *err) {
    *out = NULL;
    rc_qwen2 *m = (rc_qwen2 *)calloc(1, sizeof *m);
    if (!m) return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory");
    recall_status st = RECALL_OK;
    if (!ex) {
        st = rc_exec_open(NULL, &m->own_ex, err);
        ex = m->own_ex;
    }
    m->ex = ex;
    if (!st) st = read_dims(b, &m->c, err);
    if (!st) st = read_gate_layers(b, &m->c, err);
    if (!st) st = check_context(b, &m->c, max_ctx, err);
    if (st) {
        rc_qwen2_close(m);
        return st;
    }
    m->max_ctx = max_ctx;
    m->kv = RC_KV_DT_F32;
    m->kv_esz = sizeof(float);
    rc_qwen2_set_attn_blocking(m, RC_QWEN2_ATT_PAIRS, RC_QWEN2_ATT_TILE);
    m->qd = m->c.heads * m->c.head_dim;
    m->kvd = m->c.kv_heads * m->c.head_dim;
    m->scale = (float)(1.0 / sqrt((double)m->c.head_dim));
    m->chunk = ex->k.matmul_rows > 0 ? ex->k.matmul_rows : RC_QWEN2_CHUNK; /* the kernels may want more rows */
    if (m->chunk > RC_QWEN2_CHUNK_MAX) m->chunk = RC_QWEN2_CHUNK_MAX;             /* what the memory estimate counts */
    if (ex->opts.numerics == RC_NUMERICS_Q8) m->chunk = RC_QWEN2_CHUNK_Q8;
    st = bind_weights(m, b, err);
    if (!st) st = read_q8_exact(m, b, err);
    if (!st) st = alloc_scratch(m, err);
    if (!st && ex->opts.numerics == RC_NUMERICS_Q8) {
        if (base) m->q8 = base->q8; /* borrowed */
        else st = q8_pack_build(m, b, err);
        /* the quantised rows of the widest matmul input: hidden, heads x head_dim or ffn columns */
        int64_t wide = m->c.hidden > m->qd ? m->c.hidden : m->qd;
        if (m->c.ffn > wide) wide = m->c.ffn;
        if (!st) st = rc_q8act_reserve(&m->xa, m->chunk, wide, err);
    }
    if (st) {
        rc_qwen2_close(m);
        return st;
    }
    /* RoPE inverse frequencies and attention factor (rope.h); the per-position tables are
     * filled as the cache grows */
    rc_rope_inv_freq(&m->c.rope, m->c.rope_theta, m->c.head_dim, m->inv_freq, &m->c.rope_attention);
    *out = m;
    return RECALL_OK;
}

recall_status rc_qwen2_open_ex(const rc_blob *b, int max_ctx, const rc_exec *ex, rc_qwen2 **out, recall_err *err) {
    return open_ctx(b, max_ctx, ex, NULL, out, err);
}

recall_status rc_qwen2_open_shared(const rc_blob *b, int max_ctx, const rc_qwen2 *base, rc_qwen2 **out,
                                   recall_err *err) {
    return open_ctx(b, max_ctx, base->ex, base, out, err);
}

int rc_qwen2_numerics(const rc_qwen2 *m) { return m->q8 ? RC_NUMERICS_Q8 : RC_NUMERICS_EXACT; }

void rc_qwen2_q8_stats(const rc_qwen2 *m, size_t *bytes, double *seconds) {
    *bytes = m->q8 ? m->q8->bytes : 0;
    *seconds = m->q8 ? m->q8->seconds : 0.0;
}

const rc_qwen2_config *rc_qwen2_cfg(const rc_qwen2 *m) { return &m->c; }
int rc_qwen2_chunk_rows(const rc_qwen2 *m) { return m->chunk; }
const float *rc_qwen2_gate_q(const rc_qwen2 *m) { return m->gate_q; }
int rc_qwen2_n_cached(const rc_qwen2 *m) { return m->n_cached; }
int rc_qwen2_max_ctx(const rc_qwen2 *m) { return m->max_ctx; }
int rc_qwen2_kv_capacity(const rc_qwen2 *m) { return m->cap; }

size_t rc_qwen2_kv_bytes_for(const rc_qwen2 *m, int positions) {
    return 2 * (size_t)m->c.layers * (size_t)positions * (size_t)m->kvd * m->kv_esz;
}

size_t rc_qwen2_kv_bytes(const rc_qwen2 *m) { return rc_qwen2_kv_bytes_for(m, m->cap); }

/* Moves the cache to `cap` positions (> m->cap, <= max_ctx): new K/V arrays with the same
 * per-layer layout at the new stride, the first n_cached rows of each layer copied bit for bit;
 * RoPE rows for the new positions computed by the open-time formula. On failure nothing changes. */
static recall_status grow_to(rc_qwen2 *m, int cap, recall_err *err) {
    const int NL = m->c.layers, half = m->c.head_dim / 2;
    const size_t kvd = (size_t)m->kvd, ncap = (size_t)cap, esz = m->kv_esz;
    char *kc = (char *)kv_alloc((size_t)NL * ncap * kvd * esz);
    char *vc = (char *)kv_alloc((size_t)NL * ncap * kvd * esz);
    float *rc = (float *)realloc(m->rope_cos, ncap * (size_t)half * sizeof(float));
    if (rc) m->rope_cos = rc;
    float *rs = rc ? (float *)realloc(m->rope_sin, ncap * (size_t)half * sizeof(float)) : NULL;
    if (rs) m->rope_sin = rs;
    float *sc = (float *)malloc(ncap * RC_QWEN2_ATT_PAIRS * (size_t)m->ex->threads * sizeof(float)); /* attn_heads' rows */
    int meta_ok = 1;
    if (m->kvp.page && rc && rs) { /* page-major: the pages already folded stay where they are */
        const size_t pages = (ncap + (size_t)m->kvp.page - 1) / (size_t)m->kvp.page;
        const size_t bytes = pages * (size_t)NL * kvd * sizeof(float);
        float *mn = (float *)realloc(m->kmin, bytes);
        if (mn) m->kmin = mn;
        float *mx = mn ? (float *)realloc(m->kmax, bytes) : NULL;
        if (mx) m->kmax = mx;
        meta_ok = mn && mx;
    }
    if (!kc || !vc || !rc || !rs || !sc || !meta_ok) {
        free(kc);
        free(vc);
        free(sc);
        /* a realloc that succeeded only enlarged a table whose old rows are intact */
        return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory growing the KV cache to %d positions (%zu bytes)",
                       cap, rc_qwen2_kv_bytes_for(m, cap));
    }
    const size_t D = (size_t)m->c.head_dim, rows = (size_t)m->n_cached * D * esz; /* one (layer, KV head) */
    for (size_t lh = 0; rows && lh < (size_t)NL * (size_t)m->c.kv_heads; lh++) {
        memcpy(kc + lh * ncap * D * esz, (const char *)m->kc + lh * (size_t)m->cap * D * esz, rows);
        memcpy(vc + lh * ncap * D * esz, (const char *)m->vc + lh * (size_t)m->cap * D * esz, rows);
    }
    const int yarn = m->c.rope.type == RC_ROPE_YARN;
    const float att = m->c.rope_attention;
    for (int p = m->cap; p < cap; p++)
        for (int i = 0; i < half; i++) {
            float *sn = &m->rope_sin[(size_t)p * half + i], *cs = &m->rope_cos[(size_t)p * half + i];
            rc_sincosf(m->inv_freq[i] * (float)p, sn, cs);
            if (yarn) { /* transformers: cos() * attention_scaling, sin() * attention_scaling */
                *sn = *sn * att;
                *cs = *cs * att;
            }
        }
    free(m->kc);
    free(m->vc);
    free(m->scores);
    m->kc = kc;
    m->vc = vc;
    m->scores = sc;
    m->cap = cap;
    return RECALL_OK;
}

const char *rc_kv_dtype_name(rc_kv_dtype t) { return t == RC_KV_DT_F16 ? "f16" : "f32"; }

int rc_kv_dtype_parse(const char *s) {
    if (s && !strcmp(s, "f32")) return RC_KV_DT_F32;
    if (s && !strcmp(s, "f16")) return RC_KV_DT_F16;
    return -1;
}

recall_status rc_kv_dtype_check(int kv, recall_err *err) {
    if (kv == RC_KV_DT_F32 || kv == RC_KV_DT_F16) return RECALL_OK;
    return rc_fail(err, RECALL_E_ARG, "kv storage %d unknown (f32 = %d, f16 = %d)", kv, RC_KV_DT_F32, RC_KV_DT_F16);
}

rc_kv_dtype rc_qwen2_kv_dtype(const rc_qwen2 *m) { return m->kv; }

recall_status rc_qwen2_set_kv_dtype(rc_qwen2 *m, rc_kv_dtype t, recall_err *err) {
    RC_TRY(rc_kv_dtype_check((int)t, err));
    if (t == m->kv) return RECALL_OK;
    if (m->n_cached)
        return rc_fail(err, RECALL_E_ARG, "qwen2: the kv storage changes only while the cache is empty (%d positions "
                       "cached)", m->n_cached);
    const size_t esz = t == RC_KV_DT_F16 ? sizeof(uint16_t) : sizeof(float);
    const size_t n = (size_t)m->c.layers * (size_t)m->cap * (size_t)m->kvd;
    void *kc = NULL, *vc = NULL;
    if (n) { /* the positions already allocated, at the new element size */
        kc = kv_alloc(n * esz);
        vc = kv_alloc(n * esz);
        if (!kc || !vc) {
            free(kc);
            free(vc);
            return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for a %s KV cache of %d positions", rc_kv_dtype_name(t),
                           m->cap);
        }
    }
    free(m->kc);
    free(m->vc);
    free(m->gk); /* the page gather buffers regrow at the new size on demand */
    free(m->gv);
    m->kc = kc;
    m->vc = vc;
    m->gk = m->gv = NULL;
    m->gather_cap = 0;
    m->kv = t;
    m->kv_esz = esz;
    return RECALL_OK;
}

const float *rc_qwen2_inv_freq(const rc_qwen2 *m) { return m->inv_freq; }

void rc_qwen2_set_attn_blocking(rc_qwen2 *m, int pairs, int tile) {
    m->att_pairs = pairs < 1 ? 1 : pairs > RC_QWEN2_ATT_PAIRS ? RC_QWEN2_ATT_PAIRS : pairs;
    m->att_tile = tile > 0 ? tile : 0;
}

recall_status rc_qwen2_rope_row(rc_qwen2 *m, int pos, const float **cos_row, const float **sin_row, recall_err *err) {
    if (pos < 0 || pos >= m->max_ctx)
        return rc_fail(err, RECALL_E_LIMIT, "qwen2: RoPE row %d outside the context [0, %d)", pos, m->max_ctx);
    RC_TRY(rc_qwen2_reserve(m, pos + 1, err));
    const size_t half = (size_t)(m->c.head_dim / 2);
    *cos_row = m->rope_cos + (size_t)pos * half;
    *sin_row = m->rope_sin + (size_t)pos * half;
    return RECALL_OK;
}

recall_status rc_qwen2_reserve(rc_qwen2 *m, int n, recall_err *err) {
    if (n < 0 || n > m->max_ctx)
        return rc_fail(err, RECALL_E_LIMIT, "qwen2: cannot reserve %d positions; the context holds %d", n, m->max_ctx);
    if (n <= m->cap) return RECALL_OK;
    long cap = ((long)n + RC_QWEN2_KV_UNIT - 1) / RC_QWEN2_KV_UNIT * RC_QWEN2_KV_UNIT;
    return grow_to(m, cap > m->max_ctx ? m->max_ctx : (int)cap, err);
}

/* On-demand growth: the first unit, then doubling, capped at max_ctx. */
static recall_status grow_for(rc_qwen2 *m, int need, recall_err *err) {
    if (need <= m->cap) return RECALL_OK;
    long cap = m->cap ? m->cap : RC_QWEN2_KV_UNIT;
    while (cap < need) cap *= 2;
    return grow_to(m, cap > m->max_ctx ? m->max_ctx : (int)cap, err);
}

/* The key bounds of page `page`, layer l: [kvd] floats each (all KV heads). */
static float *page_min(const rc_qwen2 *m, int page, int l) {
    return m->kmin + ((size_t)page * (size_t)m->c.layers + (size_t)l) * (size_t)m->kvd;
}
static float *page_max(const rc_qwen2 *m, int page, int l) {
    return m->kmax + ((size_t)page * (size_t)m->c.layers + (size_t)l) * (size_t)m->kvd;
}

/* Element offset of (layer l, KV head h, position pos) in kc / vc, laid out [NL][NKV][cap][D]: the
 * keys one KV head attends over are contiguous (decode streams them; a page holds 8 positions of
 * it in f32, 16 in f16, instead of every other 512 bytes of 4 positions). */
static size_t kv_off(const rc_qwen2 *m, int l, int h, int pos) {
    return (((size_t)l * (size_t)m->c.kv_heads + (size_t)h) * (size_t)m->cap + (size_t)pos) * (size_t)m->c.head_dim;
}

/* The cached K row of position pos at layer l, all KV heads [kvd], as fp32 into out: the values
 * attention reads (f16 widened). */
static void cached_k_row(const rc_qwen2 *m, int l, int pos, float *out) {
    const int D = m->c.head_dim;
    for (int h = 0; h < m->c.kv_heads; h++) {
        const size_t off = kv_off(m, l, h, pos);
        float *o = out + (size_t)h * D;
        if (m->kv == RC_KV_DT_F32) {
            memcpy(o, (const float *)m->kc + off, (size_t)D * sizeof(float));
        } else {
            const uint16_t *k = (const uint16_t *)m->kc + off;
            for (int i = 0; i < D; i++) o[i] = rc_f16_to_f32(k[i]);
        }
    }
}

/* Refolds the key bounds of positions [pos0, n) from the cache, every layer; pos0 starts a page.
 * Called between forwards, so the row scratch m->k is free to hold a cached row. */
static void refold_pages(rc_qwen2 *m, int pos0, int n) {
    const int P = m->kvp.page;
    if (pos0 >= n) return; /* nothing cached (the cache may not exist yet) */
    for (int l = 0; l < m->c.layers; l++)
        for (int pos = pos0; pos < n; pos++) {
            cached_k_row(m, l, pos, m->k);
            rc_kvp_fold(page_min(m, pos / P, l), page_max(m, pos / P, l), m->k, (size_t)m->kvd, pos % P == 0);
        }
}

recall_status rc_qwen2_crop(rc_qwen2 *m, int n, recall_err *err) {
    if (n < 0 || n > m->n_cached)
        return rc_fail(err, RECALL_E_ARG, "qwen2: crop to %d outside [0, %d]", n, m->n_cached);
    m->n_cached = n;
    /* a page cut in the middle forgets the keys past n; a page that starts at n restarts on append */
    if (m->kvp.page && n % m->kvp.page) refold_pages(m, n - n % m->kvp.page, n);
    return RECALL_OK;
}

static void kv_pages_free(rc_qwen2 *m) {
    free(m->kmin);
    free(m->kmax);
    free(m->rank);
    free(m->keep);
    free(m->gk);
    free(m->gv);
    free(m->n_sel);
    m->kmin = m->kmax = m->gk = m->gv = NULL;
    m->rank = NULL;
    m->keep = NULL;
    m->n_sel = NULL;
    m->gather_cap = m->max_pages = 0;
    memset(&m->kvp, 0, sizeof m->kvp);
}

recall_status rc_qwen2_set_kv_pages(rc_qwen2 *m, const rc_kv_pages_opts *o, recall_err *err) {
    if (o && o->page && (o->page < 1 || o->budget < 0))
        return rc_fail(err, RECALL_E_ARG, "qwen2: kv pages %d:%d: the page must be >= 1 and the budget >= 0", o->page,
                       o->budget);
    kv_pages_free(m);
    if (!o || !o->page) return RECALL_OK;
    const int P = o->page, NKV = m->c.kv_heads;
    const size_t pages = ((size_t)m->cap + (size_t)P - 1) / (size_t)P;
    const size_t meta = pages * (size_t)m->c.layers * (size_t)m->kvd;
    m->max_pages = (int)(((long)m->max_ctx + P - 1) / P);
    m->kmin = falloc(meta);
    m->kmax = falloc(meta);
    m->rank = (rc_kvp_rank *)calloc((size_t)NKV * (size_t)m->max_pages, sizeof(rc_kvp_rank));
    m->keep = (unsigned char *)calloc((size_t)NKV * (size_t)m->max_pages, 1);
    m->n_sel = (int *)calloc((size_t)NKV, sizeof(int));
    if (!m->kmin || !m->kmax || !m->rank || !m->keep || !m->n_sel) {
        kv_pages_free(m);
        return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for the kv page bounds (%zu pages)", pages);
    }
    m->kvp = *o;
    refold_pages(m, 0, m->n_cached);
    return RECALL_OK;
}

const rc_kv_pages_opts *rc_qwen2_kv_pages(const rc_qwen2 *m) { return &m->kvp; }

recall_status rc_qwen2_kv_page_bounds(const rc_qwen2 *m, int layer, int page, const float **mn, const float **mx,
                                      recall_err *err) {
    if (!m->kvp.page || layer < 0 || layer >= m->c.layers || page < 0 ||
        (long)page * m->kvp.page >= m->n_cached)
        return rc_fail(err, RECALL_E_ARG, "qwen2: no kv page %d at layer %d (page size %d, %d positions cached)", page,
                       layer, m->kvp.page, m->n_cached);
    *mn = page_min(m, page, layer);
    *mx = page_max(m, page, layer);
    return RECALL_OK;
}

recall_status rc_qwen2_k_row(const rc_qwen2 *m, int layer, int pos, float *out, recall_err *err) {
    if (layer < 0 || layer >= m->c.layers || pos < 0 || pos >= m->n_cached)
        return rc_fail(err, RECALL_E_ARG, "qwen2: no cached key at layer %d, position %d (%d layers, %d positions)",
                       layer, pos, m->c.layers, m->n_cached);
    cached_k_row(m, layer, pos, out);
    return RECALL_OK;
}

/* The gather buffers for a decode step at position pos: at most (budget/page + 3) pages. */
static recall_status grow_gather(rc_qwen2 *m, int pos, recall_err *err) {
    const long pages = (long)m->kvp.budget / m->kvp.page + 3;
    long need = pages * m->kvp.page;
    if (need > pos + 1) need = pos + 1;
    if (need <= m->gather_cap) return RECALL_OK;
    const size_t n = (size_t)m->c.kv_heads * (size_t)need * (size_t)m->c.head_dim;
    void *gk = calloc(n, m->kv_esz), *gv = calloc(n, m->kv_esz);
    if (!gk || !gv) {
        free(gk);
        free(gv);
        return rc_fail(err, RECALL_E_NOMEM, "qwen2: out of memory for the kv page gather (%ld positions)", need);
    }
    free(m->gk);
    free(m->gv);
    m->gk = gk;
    m->gv = gv;
    m->gather_cap = (int)need;
    return RECALL_OK;
}

/* ids[0 .. n) are the history's ids[base ..]: error messages name that index */
static recall_status embed_at(const rc_qwen2 *m, const int32_t *ids, int n, int base, float *out, recall_err *err) {
    for (int t = 0; t < n; t++) {
        if (ids[t] < 0 || ids[t] >= m->c.vocab)
            return rc_fail(err, RECALL_E_ARG, "qwen2: token id %d at index %d outside [0, %d)", (int)ids[t], base + t,
                           m->c.vocab);
        rc_mat_row_f32(&m->embed, ids[t], out + (size_t)t * (size_t)m->c.hidden);
    }
    return RECALL_OK;
}

recall_status rc_qwen2_embed(const rc_qwen2 *m, const int32_t *ids, int n, float *out, recall_err *err) {
    return embed_at(m, ids, n, 0, out, err);
}

recall_status rc_qwen2_embed_rows(void *ctx, int j0, int n, float *dst, recall_err *err) {
    const rc_qwen2_id_rows *r = ctx;
    return embed_at(r->m, r->ids + j0, n, j0, dst, err);
}

/* The quantised-rows buffer shaped for nr rows of cols (alloc_scratch reserved the largest). */
static rc_q8act *q8_input(rc_qwen2 *m, int nr, int64_t cols) {
    m->xa.cols = cols;
    m->xa.nb = cols / RC_Q8_BLOCK;
    m->xa.n = nr;
    return &m->xa;
}

/* Y[t][r] = W[r,:] . X[t] (+ b[r]) for t < nr; output rows split over the pool. q8: the packed
 * weight (q8.h), or NULL for the exact profile. */
static void matmul_rows(rc_qwen2 *m, const rc_mat *w, const rc_q8mat *q8, const float *bias, const float *X, int nr,
                        float *Y) {
    if (!q8) {
        rc_exec_matmul(m->ex, w, bias, X, (size_t)w->cols, nr, Y, (size_t)w->rows);
        return;
    }
    const rc_mm_part one = {w, bias, Y, (size_t)w->rows, q8};
    rc_exec_q8_quant(m->ex, X, (size_t)w->cols, nr, q8_input(m, nr, w->cols));
    rc_exec_q8_matmul_parts(m->ex, &one, 1, &m->xa, nr);
}

/* attention of rows [0, nr) (positions pos0..) for heads [h0, h1): one worker per head range.
 * sparse: one decode row over the rows gathered per KV head by select_pages. */
typedef struct {
    const rc_qwen2 *m;
    const void *kc, *vc; /* m->kc / m->vc (elements of m->kv) */
    int nr, pos0, sparse, layer;
    int t_first; /* rows [t_first, nr): the last layer skips rows whose output nobody reads */
} attn_job;

/* The scores of one (head, row) pair over keys [j0, j0 + len) of K (rows of ld elements), into
 * s[j0 ..], and their weighted sum of V's rows into out: the kernels of the cache's element. */
static void pair_scores(const rc_qwen2 *m, const float *q, const void *K, size_t ld, int j0, int len, float *s) {
    const rc_kernels *k = &m->ex->k;
    const size_t D = (size_t)m->c.head_dim, at = (size_t)j0 * ld;
    if (m->kv == RC_KV_DT_F16) k->attn_scores_f16(q, (const uint16_t *)K + at, ld, len, D, m->scale, s + j0);
    else k->attn_scores(q, (const float *)K + at, ld, len, D, m->scale, s + j0);
}
static void pair_wsum(const rc_qwen2 *m, const float *s, const void *V, size_t ld, int j0, int len, float *out) {
    const rc_kernels *k = &m->ex->k;
    const size_t D = (size_t)m->c.head_dim, at = (size_t)j0 * ld;
    if (m->kv == RC_KV_DT_F16) k->attn_wsum_f16(s + j0, (const uint16_t *)V + at, ld, len, D, out);
    else k->attn_wsum(s + j0, (const float *)V + at, ld, len, D, out);
}

/* Blocks of up to att_pairs (query head, row) pairs that share a KV head walk the keys in tiles
 * of att_tile: each tile of K, then of V, comes from memory once per block and is reused from
 * L2 by every pair (one layer's K and V are 32 MiB per KV head at 32k positions; read once per
 * row they made long prefills memory-bound). Each pair still has its own scores, its full
 * softmax and its ascending-key weighted sum: a score does not depend on which keys share its
 * call and attn_wsum continues from out, so the bits are those of one call per row. */
static void attn_heads(void *ctx, int64_t h0, int64_t h1, int worker) {
    const attn_job *j = ctx;
    const rc_qwen2 *m = j->m;
    const rc_kernels *k = &m->ex->k;
    const int D = m->c.head_dim, group = m->c.heads / m->c.kv_heads;
    float *sbuf = m->scores + (size_t)worker * RC_QWEN2_ATT_PAIRS * (size_t)m->cap;
    const int P = m->att_pairs, T = m->att_tile > 0 ? m->att_tile : m->cap;
    for (int64_t hs = h0; hs < h1;) {
        const int kvh = (int)hs / group;
        int64_t he = (int64_t)(kvh + 1) * group; /* heads [hs, he) share KV head kvh */
        if (he > h1) he = h1;
        if (he - hs > P) he = hs + P;
        const int nh = (int)(he - hs), R = P / nh; /* rows per block */
        const size_t esz = m->kv_esz, ld = (size_t)D; /* rows of one KV head are contiguous */
        const char *K = (const char *)j->kc + kv_off(m, j->layer, kvh, 0) * esz;
        const char *V = (const char *)j->vc + kv_off(m, j->layer, kvh, 0) * esz;
        if (j->sparse) {
            K = (const char *)m->gk + (size_t)kvh * m->gather_cap * D * esz;
            V = (const char *)m->gv + (size_t)kvh * m->gather_cap * D * esz;
        }
        for (int t0 = j->t_first; t0 < j->nr; t0 += R) {
            const int rn = j->nr - t0 < R ? j->nr - t0 : R;
            const int nmax = j->sparse ? m->n_sel[kvh] : j->pos0 + t0 + rn; /* keys of the block's last row */
#define PAIR_N(r) (j->sparse ? m->n_sel[kvh] : j->pos0 + t0 + (r) + 1)
#define PAIR_S(a, r) (sbuf + ((size_t)(a) * rn + (size_t)(r)) * (size_t)m->cap)
#define PAIR_OFF(a, r) ((size_t)(t0 + (r)) * m->qd + (size_t)(hs + (a)) * D)
            for (int j0 = 0; j0 < nmax; j0 += T)
                for (int a = 0; a < nh; a++)
                    for (int r = 0; r < rn; r++) {
                        const int n = PAIR_N(r), len = n - j0 < T ? n - j0 : T;
                        if (len > 0) pair_scores(m, m->q + PAIR_OFF(a, r), K, ld, j0, len, PAIR_S(a, r));
                    }
            for (int a = 0; a < nh; a++)
                for (int r = 0; r < rn; r++) {
                    k->softmax(PAIR_S(a, r), (size_t)PAIR_N(r));
                    memset(m->att + PAIR_OFF(a, r), 0, (size_t)D * sizeof(float));
                }
            for (int j0 = 0; j0 < nmax; j0 += T)
                for (int a = 0; a < nh; a++)
                    for (int r = 0; r < rn; r++) {
                        const int n = PAIR_N(r), len = n - j0 < T ? n - j0 : T;
                        if (len > 0) pair_wsum(m, PAIR_S(a, r), V, ld, j0, len, m->att + PAIR_OFF(a, r));
                    }
#undef PAIR_N
#undef PAIR_S
#undef PAIR_OFF
        }
        hs = he;
    }
}

/* Query heads per unit of the attention split over the pool. A call whose rows fit in one block of
 * pairs (decode, a draft verify) is bound by reading K and V, not by arithmetic: units of
 * ceil(heads / threads) heads, at most one KV group, let each thread stream the keys and values it
 * needs once, where single heads taken one by one made the threads read every KV head's cache
 * several times over (9 passes over the 2 KV heads instead of 2, at 2 threads). Longer calls keep
 * single heads: each is long work the guided split balances. Bits do not depend on the split. */
static int64_t attn_grain(const rc_qwen2 *m, int rows) {
    const int group = m->c.heads / m->c.kv_heads, threads = m->ex->threads;
    if (rows * group > RC_QWEN2_ATT_PAIRS || threads < 2) return 1;
    const int per_thread = (m->c.heads + threads - 1) / threads;
    return per_thread < group ? per_thread : group;
}

/* Page selection of a decode row at position pos0 (kv_pages.h), KV heads [g0, g1): ranks the
 * candidate pages by the largest bound over the group's query heads, then gathers the kept
 * pages' K and V rows in ascending position order into gk / gv. */
static void select_pages(void *ctx, int64_t g0, int64_t g1, int worker) {
    const attn_job *j = ctx;
    const rc_qwen2 *m = j->m;
    (void)worker;
    const int P = m->kvp.page, D = m->c.head_dim, group = m->c.heads / m->c.kv_heads, pos = j->pos0;
    const int n_pages = pos / P + 1, n_cand = n_pages - 3;
    const int ranked = !m->kvp.random && m->kvp.budget / P < n_cand; /* else the bounds are not needed */
    for (int64_t g = g0; g < g1; g++) {
        const int kvh = (int)g;
        rc_kvp_rank *rank = m->rank + (size_t)kvh * m->max_pages;
        unsigned char *keep = m->keep + (size_t)kvh * m->max_pages;
        for (int p = 1; ranked && p < n_pages - 2; p++) {
            const float *mn = page_min(m, p, j->layer) + (size_t)kvh * D, *mx = page_max(m, p, j->layer) + (size_t)kvh * D;
            double best = -INFINITY;
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                const double b = rc_kvp_bound(m->q + (size_t)h * D, mn, mx, (size_t)D);
                if (b > best) best = b;
            }
            rank[p].bound = best;
        }
        rc_kvp_select(&m->kvp, n_pages, rank, j->layer, kvh, pos, keep);
        const size_t esz = m->kv_esz, row = (size_t)D * esz; /* one position of one KV head, in bytes */
        char *gk = (char *)m->gk + (size_t)kvh * m->gather_cap * row, *gv = (char *)m->gv + (size_t)kvh * m->gather_cap * row;
        const char *kc = (const char *)j->kc + kv_off(m, j->layer, kvh, 0) * esz;
        const char *vc = (const char *)j->vc + kv_off(m, j->layer, kvh, 0) * esz;
        int n = 0;
        for (int p = 0; p < n_pages; p++) { /* a page's rows are contiguous: one copy each */
            if (!keep[p]) continue;
            const int end = (p + 1) * P < pos + 1 ? (p + 1) * P : pos + 1;
            memcpy(gk + (size_t)n * row, kc + (size_t)p * P * row, (size_t)(end - p * P) * row);
            memcpy(gv + (size_t)n * row, vc + (size_t)p * P * row, (size_t)(end - p * P) * row);
            n += end - p * P;
        }
        m->n_sel[kvh] = n;
    }
}

static void rope(float *vec, int nheads, int D, const float *cs, const float *sn) {
    const int half = D / 2;
    for (int h = 0; h < nheads; h++) {
        float *x = vec + (size_t)h * D;
        for (int i = 0; i < half; i++) {
            float a = x[i], b = x[i + half];
            x[i] = a * cs[i] - b * sn[i];
            x[i + half] = b * cs[i] + a * sn[i];
        }
    }
}

/* Position pos of layer l's cache from the fp32 rows k (after RoPE) and v [kvd]. F16: each value
 * rounded to nearest even; with page bounds on, k is then overwritten by the widened cached
 * values, the keys attention reads, which the bounds must cover. */
static void store_kv_row(rc_qwen2 *m, int l, int pos, float *k, const float *v) {
    const size_t D = (size_t)m->c.head_dim;
    for (int h = 0; h < m->c.kv_heads; h++) {
        const size_t off = kv_off(m, l, h, pos);
        float *kh = k + (size_t)h * D;
        const float *vh = v + (size_t)h * D;
        if (m->kv == RC_KV_DT_F32) {
            memcpy((float *)m->kc + off, kh, D * sizeof(float));
            memcpy((float *)m->vc + off, vh, D * sizeof(float));
            continue;
        }
        uint16_t *kc = (uint16_t *)m->kc + off;
        m->ex->k.f32_to_f16(kh, kc, D);
        m->ex->k.f32_to_f16(vh, (uint16_t *)m->vc + off, D);
        if (m->kvp.page)
            for (size_t i = 0; i < D; i++) kh[i] = rc_f16_to_f32(kc[i]);
    }
}

/* One chunk of nr rows at positions pos0.., rows [row0, row0+nr) of the call. */
static void forward_chunk(rc_qwen2 *m, const rc_qwen2_fwd *f, int row0, int nr, int pos0) {
    const rc_qwen2_config *c = &m->c;
    const int H = c->hidden, D = c->head_dim, NL = c->layers, half = D / 2;
    const int last_chunk = row0 + nr == f->n;
    float *X = m->x;
    if (f->ids) {
        for (int t = 0; t < nr; t++) rc_mat_row_f32(&m->embed, f->ids[row0 + t], X + (size_t)t * H);
    } else {
        memcpy(X, f->embeds + (size_t)row0 * H, (size_t)nr * H * sizeof(float));
    }
    float *hid = f->hidden_last;
    /* The last layer's output feeds only the final norm and lm_head: a row whose logits / normed
     * state nobody asked for needs that layer's K and V (the cache) but not its attention, o_proj
     * and MLP. Rows are independent, so skipping them changes no bit of the rows kept. */
    const int wants_all = f->logits_all || f->normed_all;
    const int wants_last = last_chunk && (f->logits_last || f->normed_last || hid);
    const int t_keep = wants_all ? 0 : wants_last ? nr - 1 : nr; /* the last layer keeps rows [t_keep, nr) */
    for (int l = 0; l < NL; l++) {
        const layer_w *w = &m->L[l];
        if (hid && last_chunk) memcpy(hid + (size_t)l * H, X + (size_t)(nr - 1) * H, (size_t)H * sizeof(float));
        for (int t = 0; t < nr; t++) rc_rmsnorm(X + (size_t)t * H, w->ln1, c->rms_eps, m->xn + (size_t)t * H, (size_t)H);
        { /* q, k, v of the same rows: one parallel section */
            const int q8 = m->q8 != NULL;
            const rc_mm_part qkv[3] = {{&w->q, w->bq, m->q, (size_t)w->q.rows, q8 ? q8_layer(m, l, Q8_Q) : NULL},
                                       {&w->k, w->bk, m->k, (size_t)w->k.rows, q8 ? q8_layer(m, l, Q8_K) : NULL},
                                       {&w->v, w->bv, m->v, (size_t)w->v.rows, q8 ? q8_layer(m, l, Q8_V) : NULL}};
            if (q8) { /* the parts q8 leaves exact (q8_layer NULL) run exact; each output is its own */
                rc_mm_part pq[3], pe[3];
                int nq = 0, ne = 0;
                for (int i = 0; i < 3; i++) {
                    if (qkv[i].q8) pq[nq++] = qkv[i];
                    else pe[ne++] = qkv[i];
                }
                if (ne) rc_exec_matmul_parts(m->ex, pe, ne, m->xn, (size_t)H, nr);
                if (nq) {
                    rc_exec_q8_quant(m->ex, m->xn, (size_t)H, nr, q8_input(m, nr, H));
                    rc_exec_q8_matmul_parts(m->ex, pq, nq, &m->xa, nr);
                }
            } else {
                rc_exec_matmul_parts(m->ex, qkv, 3, m->xn, (size_t)H, nr);
            }
        }
        for (int gi = 0; gi < c->n_gate; gi++) {
            if (c->gate_layers[gi] != l) continue;
            if (f->q_all)
                memcpy(f->q_all + ((size_t)gi * f->n + row0) * m->qd, m->q, (size_t)nr * m->qd * sizeof(float));
            if (last_chunk)
                memcpy(m->gate_q + (size_t)gi * m->qd, m->q + (size_t)(nr - 1) * m->qd, (size_t)m->qd * sizeof(float));
        }
        for (int t = 0; t < nr; t++) {
            const int pos = pos0 + t;
            const float *cs = m->rope_cos + (size_t)pos * half, *sn = m->rope_sin + (size_t)pos * half;
            rope(m->q + (size_t)t * m->qd, c->heads, D, cs, sn);
            rope(m->k + (size_t)t * m->kvd, c->kv_heads, D, cs, sn);
            store_kv_row(m, l, pos, m->k + (size_t)t * m->kvd, m->v + (size_t)t * m->kvd);
            if (m->kvp.page)
                rc_kvp_fold(page_min(m, pos / m->kvp.page, l), page_max(m, pos / m->kvp.page, l),
                            m->k + (size_t)t * m->kvd, (size_t)m->kvd, pos % m->kvp.page == 0);
        }
        const int t0 = l == NL - 1 ? t_keep : 0, n0 = nr - t0; /* rows [t0, nr) go on */
        if (n0 == 0) break;
        {
            /* a decode step (a call of one row) attends to the selected pages; prefill densely */
            attn_job aj = {m, m->kc, m->vc, nr, pos0, m->kvp.page && f->n == 1, l, t0};
            if (aj.sparse) rc_pool_for(m->ex->pool, c->kv_heads, 1, select_pages, &aj);
            rc_pool_for(m->ex->pool, c->heads, attn_grain(m, n0), attn_heads, &aj);
        }
        float *Xr = X + (size_t)t0 * H, *xn = m->xn + (size_t)t0 * H;
        matmul_rows(m, &w->o, m->q8 ? q8_layer(m, l, Q8_O) : NULL, NULL, m->att + (size_t)t0 * m->qd, n0, xn);
        for (size_t i = 0; i < (size_t)n0 * H; i++) Xr[i] = Xr[i] + xn[i];
        for (int t = 0; t < n0; t++) rc_rmsnorm(Xr + (size_t)t * H, w->ln2, c->rms_eps, xn + (size_t)t * H, (size_t)H);
        if (m->q8) { /* g = silu(gate x) * (up x) */
            rc_exec_q8_quant(m->ex, xn, (size_t)H, n0, q8_input(m, n0, H));
            rc_exec_q8_swiglu(m->ex, q8_layer(m, l, Q8_GATE), q8_layer(m, l, Q8_UP), &m->xa, n0, m->g, m->u);
        } else {
            rc_exec_swiglu(m->ex, &w->gate, &w->up, xn, (size_t)H, n0, m->g, m->u);
        }
        matmul_rows(m, &w->down, m->q8 ? q8_layer(m, l, Q8_DOWN) : NULL, NULL, m->g, n0, xn);
        for (size_t i = 0; i < (size_t)n0 * H; i++) Xr[i] = Xr[i] + xn[i];
    }
    for (int t = t_keep; t < nr; t++) rc_rmsnorm(X + (size_t)t * H, m->final_norm, c->rms_eps, X + (size_t)t * H, (size_t)H);
    if (hid && last_chunk) memcpy(hid + (size_t)NL * H, X + (size_t)(nr - 1) * H, (size_t)H * sizeof(float));
    if (f->normed_all) memcpy(f->normed_all + (size_t)row0 * H, X, (size_t)nr * H * sizeof(float));
    if (f->normed_last && last_chunk) memcpy(f->normed_last, X + (size_t)(nr - 1) * H, (size_t)H * sizeof(float));
    const size_t V = (size_t)c->vocab;
    /* lm_head runs exact in both profiles (q8.h) */
    if (f->logits_all) matmul_rows(m, &m->lm_head, NULL, NULL, X, nr, f->logits_all + (size_t)row0 * V);
    if (f->logits_last && last_chunk) {
        if (f->logits_all)
            memcpy(f->logits_last, f->logits_all + (size_t)(f->n - 1) * V, V * sizeof(float));
        else
            matmul_rows(m, &m->lm_head, NULL, NULL, X + (size_t)(nr - 1) * H, 1, f->logits_last);
    }
}

recall_status rc_qwen2_forward(rc_qwen2 *m, const rc_qwen2_fwd *f, recall_err *err) {
    if (!f || f->n < 1 || (!f->ids) == (!f->embeds))
        return rc_fail(err, RECALL_E_ARG, "qwen2: forward needs n >= 1 and exactly one of ids / embeds");
    if (f->n > m->max_ctx - m->n_cached)
        return rc_fail(err, RECALL_E_LIMIT, "qwen2: %d cached + %d new positions exceed max_ctx %d", m->n_cached,
                       f->n, m->max_ctx);
    if (f->ids)
        for (int t = 0; t < f->n; t++)
            if (f->ids[t] < 0 || f->ids[t] >= m->c.vocab)
                return rc_fail(err, RECALL_E_ARG, "qwen2: token id %d at index %d outside [0, %d)", (int)f->ids[t], t,
                               m->c.vocab);
    RC_TRY(grow_for(m, m->n_cached + f->n, err));
    if (m->kvp.page && f->n == 1) RC_TRY(grow_gather(m, m->n_cached, err));
    for (int row0 = 0; row0 < f->n; row0 += m->chunk) {
        int nr = f->n - row0 < m->chunk ? f->n - row0 : m->chunk;
        forward_chunk(m, f, row0, nr, m->n_cached);
        m->n_cached += nr;
    }
    return RECALL_OK;
}
