/* convert.c - original artifacts -> one recall blob (see convert.h, weights/FORMAT.md).
 *
 *   qwen2/  config.json + safetensors   -> qwen2.* config keys, qwen2.<HF name> tensors
 *   bge/    sentence-transformers dir   -> bert.* keys, bert.<name> tensors (CLS pooling only)
 *   pooler  .pt | .safetensors | .npz   -> pooler.* keys, pooler.<key> tensors (fp32)
 *   gate    .npz                        -> gate.* tensors (fp32)
 *   bridge  .npz                        -> bridge.* keys and tensors (fp32)
 *   tokenizer.json, vocab.txt           -> RC_SECT_TOK_BPE, RC_SECT_TOK_WORDPIECE sections
 *
 * Decoder weight matrices (q/k/v/o/gate/up/down) are written as f32, bf16 or nf4 (--weights);
 * embeddings and lm_head stay f32 (f32 mode) or bf16 (bf16/nf4 modes, exact when the source
 * is bf16). The BERT encoder's six matrices per layer are written as f32, bf16 or nf4
 * (--bge-weights); its word embeddings follow them (f32, bf16, nf4: at bge-base shape they are
 * a quarter of the encoder's parameters), its position and token-type embeddings stay f32 (1.5 MB
 * at bge-base shape; every token reads a position row). Norms, biases, pooler and heads are
 * always f32. Output is deterministic: the tensor order is fixed by the config, never by the
 * source file's order.
 */
#include "convert.h"

#include "blob.h"
#include "json.h"
#include "lm_screen.h"
#include "names.h"
#include "nf4.h"
#include "npy.h"
#include "pickle.h"
#include "qwen2.h" /* RC_QWEN2_MAX_GATE */
#include "rope.h"
#include "safetensors.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef RECALL_NO_THREADS
#include <pthread.h>
#endif

/* ---- small helpers ----------------------------------------------------------------------- */

typedef struct {
    const rc_convert_opts *o;
    rc_blob_writer *w;
    recall_err *err;
    int n_done, n_total;
    uint8_t *nf4_keep; /* [layers] RC_Q8X_* bits of the attention projections --nf4-keep stores in bf16 */
} conv;

static void progress(conv *c, const char *fmt, const char *a, const char *b) {
    if (!c->o->progress) return;
    char line[9000];
    snprintf(line, sizeof line, fmt, a, b);
    c->o->progress(c->o->progress_ctx, line);
}

static recall_status json_int(const json_value *root, const char *path, const char *file, int64_t *out,
                              recall_err *err) {
    const json_value *v = json_path(root, path);
    if (!v) return rc_fail(err, RECALL_E_MISSING, "%s: key \"%s\" missing", file, path);
    if (v->type != JSON_NUM || !v->is_int)
        return rc_fail(err, RECALL_E_FORMAT, "%s: key \"%s\" is not an integer", file, path);
    *out = v->i;
    return RECALL_OK;
}

static recall_status json_num(const json_value *root, const char *path, const char *file, double *out,
                              recall_err *err) {
    const json_value *v = json_path(root, path);
    if (!v) return rc_fail(err, RECALL_E_MISSING, "%s: key \"%s\" missing", file, path);
    if (v->type != JSON_NUM) return rc_fail(err, RECALL_E_FORMAT, "%s: key \"%s\" is not a number", file, path);
    *out = v->num;
    return RECALL_OK;
}

static recall_status kv1(conv *c, const char *key, int64_t v) { return rc_writer_kv_i64(c->w, key, &v, 1, c->err); }

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static uint16_t f32_to_bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* NF4 blocks are independent, so quantising slices of a tensor on several threads gives the
 * same bytes as one pass; conversion time is dominated by it at the 1.5B shape. */
typedef struct {
    const float *w;
    size_t n;
    uint8_t *codes;
    float *absmax;
} nf4_job;

static void *nf4_worker(void *arg) {
    nf4_job *j = arg;
    rc_nf4_quantize(j->w, j->n, j->codes, j->absmax);
    return NULL;
}

static void nf4_quantize_parallel(const float *w, size_t n, uint8_t *codes, float *absmax) {
    enum { MAX_T = 8 };
    size_t nblk = n / RECALL_NF4_BLOCK, t = 1;
#ifndef RECALL_NO_THREADS
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    t = cpus > 1 ? (size_t)(cpus < MAX_T ? cpus : MAX_T) : 1;
    if (nblk < 4096) t = 1;
    nf4_job jobs[MAX_T];
    pthread_t th[MAX_T];
    int started[MAX_T] = {0};
    for (size_t i = 0; i < t; i++) {
        size_t b0 = nblk * i / t, b1 = nblk * (i + 1) / t;
        jobs[i] = (nf4_job){w + b0 * RECALL_NF4_BLOCK, (b1 - b0) * RECALL_NF4_BLOCK, codes + b0 * RECALL_NF4_BLOCK / 2,
                            absmax + b0};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, nf4_worker, &jobs[i]) == 0;
    }
    nf4_worker(&jobs[0]);
    for (size_t i = 1; i < t; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else nf4_worker(&jobs[i]); /* no thread: do the slice here */
    }
#else
    (void)t;
    nf4_job all = {w, nblk * RECALL_NF4_BLOCK, codes, absmax}; /* one slice, this thread */
    nf4_worker(&all);
#endif
}

/* Tensor output choices. */
enum store { ST_F32, ST_BF16, ST_NF4 };

/* The storage a --weights / --bge-weights value names (the value was checked by rc_convert). */
static enum store store_of(const char *wm) {
    return wm && strcmp(wm, "nf4") == 0 ? ST_NF4 : wm && strcmp(wm, "bf16") == 0 ? ST_BF16 : ST_F32;
}

/* Writes a safetensors tensor under `name` with the given storage, after checking its shape. */
static recall_status put_st(conv *c, const rc_st *st, const char *src_name, const char *name, int ndim,
                            const int64_t *shape, enum store how) {
    const rc_st_tensor *t = rc_st_find(st, src_name);
    if (!t) {
        const rc_st_tensor *any = rc_st_at(st, 0);
        return rc_fail(c->err, RECALL_E_MISSING, "%s: tensor '%s' missing", any ? any->file : "safetensors", src_name);
    }
    if (t->dtype != RC_DT_F32 && t->dtype != RC_DT_BF16 && t->dtype != RC_DT_F16)
        return rc_fail(c->err, RECALL_E_SHAPE, "%s: tensor '%s' has dtype %s, expected a float type", t->file, src_name,
                       rc_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == shape[d];
    if (!ok) {
        char got[80] = "", want[80] = "";
        size_t gl = 0, wl = 0;
        for (int d = 0; d < t->ndim && gl < 60; d++) gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        for (int d = 0; d < ndim && wl < 60; d++) wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", d ? "," : "", (long long)shape[d]);
        return rc_fail(c->err, RECALL_E_SHAPE, "%s: tensor '%s' has shape [%s], config implies [%s]", t->file, src_name,
                       got, want);
    }
    size_t n = (size_t)t->numel;
    const char *dtn = "f32";
    if (how == ST_BF16 && t->dtype == RC_DT_BF16) {
        void *copy = malloc(t->nbytes ? t->nbytes : 1);
        if (!copy) return rc_fail(c->err, RECALL_E_NOMEM, "out of memory for '%s'", src_name);
        memcpy(copy, t->data, t->nbytes);
        RC_TRY(rc_writer_tensor(c->w, name, RC_DT_BF16, ndim, shape, copy, t->nbytes, c->err));
        dtn = "bf16";
    } else {
        float *f;
        RC_TRY(rc_st_to_f32(t, &f, c->err));
        if (how == ST_F32) {
            RC_TRY(rc_writer_tensor(c->w, name, RC_DT_F32, ndim, shape, f, n * 4, c->err));
        } else if (how == ST_BF16) {
            uint16_t *h = malloc(n * 2 + 2);
            if (!h) {
                free(f);
                return rc_fail(c->err, RECALL_E_NOMEM, "out of memory for '%s'", src_name);
            }
            for (size_t i = 0; i < n; i++) h[i] = f32_to_bf16_rne(f[i]);
            free(f);
            RC_TRY(rc_writer_tensor(c->w, name, RC_DT_BF16, ndim, shape, h, n * 2, c->err));
            dtn = "bf16";
        } else {
            if (n % RECALL_NF4_BLOCK) {
                free(f);
                return rc_fail(c->err, RECALL_E_SHAPE, "%s: tensor '%s': %zu elements, not a multiple of the nf4 block %u",
                               t->file, src_name, n, RECALL_NF4_BLOCK);
            }
            size_t nb = (size_t)rc_nf4_nbytes(n);
            uint8_t *q = calloc(1, nb);
            if (!q) {
                free(f);
                return rc_fail(c->err, RECALL_E_NOMEM, "out of memory for '%s'", src_name);
            }
            nf4_quantize_parallel(f, n, q, (float *)(q + rc_nf4_absmax_offset(n)));
            free(f);
            RC_TRY(rc_writer_tensor(c->w, name, RC_DT_NF4, ndim, shape, q, nb, c->err));
            dtn = "nf4";
        }
    }
    c->n_done++;
    char idx[64];
    snprintf(idx, sizeof idx, "%d", c->n_done);
    progress(c, "  [%s] %s", idx, name);
    (void)dtn;
    return RECALL_OK;
}

/* Writes a malloc'd fp32 array (ownership passes to the writer). */
static recall_status put_f32(conv *c, const char *name, int ndim, const int64_t *shape, float *data) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)shape[d];
    RC_TRY(rc_writer_tensor(c->w, name, RC_DT_F32, ndim, shape, data, n * 4, c->err));
    c->n_done++;
    char idx[64];
    snprintf(idx, sizeof idx, "%d", c->n_done);
    progress(c, "  [%s] %s", idx, name);
    return RECALL_OK;
}

/* ---- Qwen2 ------------------------------------------------------------------------------- */

/* The recall loop's geometry: loop.* keys. config.json may carry it in an optional
 * "recall_loop" object (a world trained for another geometry); absent keys keep the reference's. */
enum { LOOP_WINDOW, LOOP_BLOCK, LOOP_CHUNK, LOOP_K, LOOP_TURN_CAP, LOOP_BUF_MIN, LOOP_N };
static const char *const LOOP_KEYS[LOOP_N] = {"window", "block", "chunk", "k", "turn_cap", "buf_min"};
static const int64_t LOOP_DEFAULTS[LOOP_N] = {512, 128, 64, 2, 110, 16};

typedef struct {
    int64_t hidden, layers, heads, kv_heads, head_dim, ffn, vocab, max_pos;
    double eps, theta;
    rc_rope_profile rope;
    int64_t loop[LOOP_N];
} qwen2_cfg;

/* config.json's optional "recall_loop": {"window": .., "block": .., "chunk": .., "k": ..,
 * "turn_cap": .., "buf_min": ..}; each key optional, a positive integer (turn_cap may be 0). */
static recall_status qwen2_loop(const json_value *r, const char *path, int64_t loop[LOOP_N], recall_err *err) {
    memcpy(loop, LOOP_DEFAULTS, sizeof LOOP_DEFAULTS);
    const json_value *o = json_get(r, "recall_loop");
    if (!o || o->type == JSON_NULL) return RECALL_OK;
    if (o->type != JSON_OBJ) return rc_fail(err, RECALL_E_FORMAT, "%s: \"recall_loop\" is not an object", path);
    for (size_t i = 0; i < o->len; i++) {
        int k = 0;
        while (k < LOOP_N && strcmp(o->keys[i], LOOP_KEYS[k])) k++;
        if (k == LOOP_N)
            return rc_fail(err, RECALL_E_FORMAT, "%s: recall_loop.%s is not a loop key (window, block, chunk, k, "
                           "turn_cap, buf_min)", path, o->keys[i]);
        const json_value *v = &o->items[i];
        if (v->type != JSON_NUM || !v->is_int || v->i < (k == LOOP_TURN_CAP ? 0 : 1) || v->i > (1 << 24))
            return rc_fail(err, RECALL_E_FORMAT, "%s: recall_loop.%s is not an integer in %d..%d", path, o->keys[i],
                           k == LOOP_TURN_CAP ? 0 : 1, 1 << 24);
        loop[k] = v->i;
    }
    return RECALL_OK;
}

/* An optional number of the rope object: absent or null leaves *v; 0 when transformers reads it
 * with `or` (beta_fast / beta_slow) also keeps the default. */
static recall_status rope_num(const json_value *obj, const char *key, const char *file, double *v, recall_err *err) {
    const json_value *x = json_get(obj, key);
    if (!x || x->type == JSON_NULL) return RECALL_OK;
    if (x->type != JSON_NUM) return rc_fail(err, RECALL_E_FORMAT, "%s: rope key \"%s\" is not a number", file, key);
    if (x->num != 0.0) *v = x->num;
    return RECALL_OK;
}

/* The RoPE profile: transformers 4's `rope_scaling` or transformers 5's `rope_parameters`, type
 * under `rope_type` or (older) `type`. Plain RoPE and YaRN are read; any other type is refused
 * with its name. YaRN as transformers 5 reads it: an absent factor is max_pos / original, an
 * absent original is max_position_embeddings. */
static recall_status qwen2_rope(const json_value *r, const char *path, int64_t max_pos, rc_rope_profile *p,
                                recall_err *err) {
    memset(p, 0, sizeof *p);
    const json_value *o = json_get(r, "rope_scaling");
    if (!o || o->type == JSON_NULL) o = json_get(r, "rope_parameters");
    if (!o || o->type == JSON_NULL) return RECALL_OK;
    if (o->type != JSON_OBJ) return rc_fail(err, RECALL_E_FORMAT, "%s: rope_scaling / rope_parameters is not an object", path);
    const json_value *t = json_get_type(o, "rope_type", JSON_STR);
    if (!t) t = json_get_type(o, "type", JSON_STR);
    if (!t || !strcmp(t->str, "default")) return RECALL_OK;
    if (strcmp(t->str, "yarn") != 0)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: rope type \"%s\" is not supported (only default and yarn)",
                       path, t->str);
    double factor = 0.0, orig = (double)max_pos;
    const json_value *ov = json_get(o, "original_max_position_embeddings");
    if (ov && ov->type != JSON_NULL) {
        if (ov->type != JSON_NUM || !ov->is_int)
            return rc_fail(err, RECALL_E_FORMAT, "%s: rope original_max_position_embeddings is not an integer", path);
        orig = (double)ov->i;
    }
    RC_TRY(rope_num(o, "factor", path, &factor, err));
    if (factor == 0.0) {
        if (!(ov && ov->type == JSON_NUM))
            return rc_fail(err, RECALL_E_MISSING, "%s: yarn needs \"factor\" or \"original_max_position_embeddings\"", path);
        factor = (double)max_pos / orig;
    }
    rc_rope_yarn_init(p, factor, (int64_t)orig);
    RC_TRY(rope_num(o, "beta_fast", path, &p->beta_fast, err));
    RC_TRY(rope_num(o, "beta_slow", path, &p->beta_slow, err));
    RC_TRY(rope_num(o, "mscale", path, &p->mscale, err));
    RC_TRY(rope_num(o, "mscale_all_dim", path, &p->mscale_all_dim, err));
    RC_TRY(rope_num(o, "attention_factor", path, &p->attention_factor, err));
    const json_value *tr = json_get(o, "truncate");
    if (tr && tr->type == JSON_BOOL) p->truncate = tr->num != 0.0;
    else if (tr && tr->type != JSON_NULL) return rc_fail(err, RECALL_E_FORMAT, "%s: rope truncate is not a boolean", path);
    return rc_rope_check(p, path, err);
}

static recall_status qwen2_config(conv *c, const char *dir, qwen2_cfg *q) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_doc *doc;
    RC_TRY(json_read_file(path, &doc, c->err));
    const json_value *r = json_root(doc);
    recall_status s = RECALL_OK;
    const json_value *mt = json_get_type(r, "model_type", JSON_STR);
    if (mt && strcmp(mt->str, "qwen2") != 0)
        s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: model_type \"%s\", expected \"qwen2\"", path, mt->str);
    if (!s) s = json_int(r, "hidden_size", path, &q->hidden, c->err);
    if (!s) s = json_int(r, "num_hidden_layers", path, &q->layers, c->err);
    if (!s) s = json_int(r, "num_attention_heads", path, &q->heads, c->err);
    if (!s) s = json_int(r, "num_key_value_heads", path, &q->kv_heads, c->err);
    if (!s) s = json_int(r, "intermediate_size", path, &q->ffn, c->err);
    if (!s) s = json_int(r, "vocab_size", path, &q->vocab, c->err);
    if (!s) s = json_int(r, "max_position_embeddings", path, &q->max_pos, c->err);
    if (!s) s = json_num(r, "rms_norm_eps", path, &q->eps, c->err);
    if (!s) {
        /* transformers 5 nests it under rope_parameters; older configs keep it top-level. */
        const json_value *th = json_get(r, "rope_theta");
        if (!th) th = json_path(r, "rope_parameters.rope_theta");
        if (!th || th->type != JSON_NUM)
            s = rc_fail(c->err, RECALL_E_MISSING, "%s: neither \"rope_theta\" nor \"rope_parameters.rope_theta\"", path);
        else
            q->theta = th->num;
    }
    if (!s) s = qwen2_rope(r, path, q->max_pos, &q->rope, c->err);
    if (!s) s = qwen2_loop(r, path, q->loop, c->err);
    if (!s) {
        const json_value *act = json_get_type(r, "hidden_act", JSON_STR);
        if (!s && act && strcmp(act->str, "silu") != 0)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: hidden_act \"%s\", expected \"silu\"", path, act->str);
        const json_value *sw = json_get(r, "use_sliding_window");
        if (!s && sw && sw->type == JSON_BOOL && sw->num)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: sliding-window attention is not supported", path);
        const json_value *tie = json_get(r, "tie_word_embeddings");
        if (!s && tie && tie->type == JSON_BOOL && tie->num)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: tied embeddings are not supported (lm_head must be its own tensor)", path);
    }
    if (!s) {
        const json_value *hd = json_get(r, "head_dim");
        q->head_dim = (hd && hd->type == JSON_NUM && hd->is_int) ? hd->i : (q->heads ? q->hidden / q->heads : 0);
        if (q->hidden <= 0 || q->layers <= 0 || q->heads <= 0 || q->kv_heads <= 0 || q->ffn <= 0 || q->vocab <= 0 ||
            q->heads % q->kv_heads || q->head_dim * q->heads != q->hidden || q->head_dim % 2 || q->max_pos <= 0 ||
            q->hidden > (1 << 20) || q->ffn > (1 << 22) || q->vocab > (1 << 24) || q->layers > 1024)
            s = rc_fail(c->err, RECALL_E_FORMAT, "%s: inconsistent dimensions (hidden %lld, heads %lld, kv heads %lld)",
                        path, (long long)q->hidden, (long long)q->heads, (long long)q->kv_heads);
    }
    json_free(doc);
    return s;
}

/* The int8 screening copy of lm_head (src/engine/lm_screen.h), built from the values the blob stores
 * (bf16-rounded when lm_head is written as bf16): codes, scales and the two norms per row. */
static recall_status put_screen(conv *c, const rc_st *st, enum store how) {
    const rc_st_tensor *t = rc_st_find(st, "lm_head.weight");
    if (!t || t->ndim != 2) return rc_fail(c->err, RECALL_E_MISSING, "lm_head screen: no 2-D lm_head.weight");
    float *f;
    RC_TRY(rc_st_to_f32(t, &f, c->err));
    const int64_t V = t->shape[0], H = t->shape[1], G = H / RC_LM_SCREEN_GROUP;
    if (how == ST_BF16)
        for (int64_t i = 0; i < V * H; i++) {
            uint32_t u = (uint32_t)f32_to_bf16_rne(f[i]) << 16;
            memcpy(&f[i], &u, 4);
        }
    const rc_mat w = {RC_DT_F32, f, NULL, V, H};
    int8_t *q = malloc((size_t)(V * H));
    float *sc = malloc((size_t)(V * (G ? G : 1)) * sizeof *sc), *nm = malloc((size_t)V * 2 * sizeof *nm);
    recall_status s = q && sc && nm ? rc_lmscreen_build(&w, q, sc, nm, c->err)
                                    : rc_fail(c->err, RECALL_E_NOMEM, "lm_head screen: out of memory");
    free(f);
    if (s) {
        free(q);
        free(sc);
        free(nm);
        return s;
    }
    const int64_t sq[2] = {V, H}, ss[2] = {V, G}, sn[2] = {V, 2};
    s = rc_writer_tensor(c->w, RC_LM_SCREEN_Q, RC_DT_U8, 2, sq, q, (size_t)(V * H), c->err);
    if (s) {
        free(sc);
        free(nm);
        return s;
    }
    s = rc_writer_tensor(c->w, RC_LM_SCREEN_SCALE, RC_DT_F32, 2, ss, sc, (size_t)(V * G) * 4, c->err);
    if (s) {
        free(nm);
        return s;
    }
    RC_TRY(rc_writer_tensor(c->w, RC_LM_SCREEN_NORM, RC_DT_F32, 2, sn, nm, (size_t)V * 8, c->err));
    c->n_done += 3;
    char idx[32];
    snprintf(idx, sizeof idx, "%d", c->n_done);
    progress(c, "  [%s] %s (+ scale, norm)", idx, RC_LM_SCREEN_Q);
    return RECALL_OK;
}

static recall_status qwen2_tensors(conv *c, const char *dir, const qwen2_cfg *q) {
    rc_st *st;
    RC_TRY(rc_st_open(dir, &st, c->err));
    enum store lin = store_of(c->o->weights);
    enum store emb = lin == ST_F32 ? ST_F32 : ST_BF16;
    int64_t H = q->hidden, KV = q->kv_heads * q->head_dim, F = q->ffn, V = q->vocab;
    char src[256], dst[300];
    recall_status s = RECALL_OK;
#define PUT(srcname, how, nd, ...)                                                              \
    do {                                                                                        \
        int64_t shp_[] = {__VA_ARGS__};                                                         \
        snprintf(dst, sizeof dst, "qwen2.%s", srcname);                                         \
        if (!s) s = put_st(c, st, srcname, dst, nd, shp_, how);                                 \
    } while (0)
    PUT("model.embed_tokens.weight", emb, 2, V, H);
    for (int64_t l = 0; l < q->layers && !s; l++) {
        /* lin: a Linear weight; its RC_Q8X_* bit for --nf4-keep (0: not an attention projection) */
        const struct { const char *n; int lin, bit; int64_t r, k; } mats[] = {
            {"self_attn.q_proj.weight", 1, RC_Q8X_Q, H, H},  {"self_attn.q_proj.bias", 0, 0, H, 0},
            {"self_attn.k_proj.weight", 1, RC_Q8X_K, KV, H}, {"self_attn.k_proj.bias", 0, 0, KV, 0},
            {"self_attn.v_proj.weight", 1, RC_Q8X_V, KV, H}, {"self_attn.v_proj.bias", 0, 0, KV, 0},
            {"self_attn.o_proj.weight", 1, RC_Q8X_O, H, H},  {"input_layernorm.weight", 0, 0, H, 0},
            {"post_attention_layernorm.weight", 0, 0, H, 0}, {"mlp.gate_proj.weight", 1, 0, F, H},
            {"mlp.up_proj.weight", 1, 0, F, H},              {"mlp.down_proj.weight", 1, 0, H, F},
        };
        for (size_t i = 0; i < sizeof mats / sizeof mats[0] && !s; i++) {
            snprintf(src, sizeof src, "model.layers.%lld.%s", (long long)l, mats[i].n);
            if (mats[i].lin)
                PUT(src, c->nf4_keep && (c->nf4_keep[l] & mats[i].bit) ? ST_BF16 : lin, 2, mats[i].r, mats[i].k);
            else
                PUT(src, ST_F32, 1, mats[i].r);
        }
    }
    PUT("model.norm.weight", ST_F32, 1, H);
    PUT("lm_head.weight", emb, 2, V, H);
#undef PUT
    if (!s && c->o->lm_head_screen) s = put_screen(c, st, emb);
    rc_st_close(st);
    return s;
}

/* --q8-exact and --nf4-keep: SPEC (qwen2.h) checked against the decoder's layers, stored as `key`
 * in canonical form (only when given: a blob converted without it keeps its bytes); *mask_out, if
 * not NULL, keeps the layers' bits. */
static recall_status attention_spec_key(conv *c, const qwen2_cfg *q, const char *flag, const char *spec_in,
                                        const char *key, uint8_t **mask_out) {
    uint8_t *mask = malloc((size_t)q->layers);
    if (!mask) return rc_fail(c->err, RECALL_E_NOMEM, "convert: out of memory");
    recall_err e = {0};
    char spec[8 * RC_KV_MAX_VALUES + 1];
    recall_status s = rc_q8_exact_parse(spec_in, (int)q->layers, mask, &e);
    if (s) s = rc_fail(c->err, s, "convert: %s: %s (the decoder has %lld layers)", flag, e.msg, (long long)q->layers);
    else {
        char full[16 * 1024];
        rc_q8_exact_format(mask, (int)q->layers, full, sizeof full);
        if (strlen(full) >= sizeof spec)
            s = rc_fail(c->err, RECALL_E_ARG, "convert: %s: \"%s\" is longer than the %zu bytes a blob key holds",
                        flag, full, sizeof spec - 1);
        else s = rc_writer_kv_str(c->w, key, full, c->err);
    }
    if (!s && mask_out) *mask_out = mask;
    else free(mask);
    return s;
}

static recall_status qwen2_keys(conv *c, const qwen2_cfg *q) {
    RC_TRY(kv1(c, "qwen2.hidden", q->hidden));
    RC_TRY(kv1(c, "qwen2.layers", q->layers));
    RC_TRY(kv1(c, "qwen2.heads", q->heads));
    RC_TRY(kv1(c, "qwen2.kv_heads", q->kv_heads));
    RC_TRY(kv1(c, "qwen2.head_dim", q->head_dim));
    RC_TRY(kv1(c, "qwen2.ffn", q->ffn));
    RC_TRY(kv1(c, "qwen2.vocab", q->vocab));
    RC_TRY(kv1(c, "qwen2.max_pos", q->max_pos));
    RC_TRY(rc_writer_kv_f64(c->w, "qwen2.rms_eps", q->eps, c->err));
    RC_TRY(rc_writer_kv_f64(c->w, "qwen2.rope_theta", q->theta, c->err));
    RC_TRY(rc_writer_kv_str(c->w, "qwen2.weights", c->o->weights ? c->o->weights : "f32", c->err));
    if (c->o->q8_exact) RC_TRY(attention_spec_key(c, q, "--q8-exact", c->o->q8_exact, RC_Q8_EXACT_KEY, NULL));
    if (c->o->nf4_keep)
        RC_TRY(attention_spec_key(c, q, "--nf4-keep", c->o->nf4_keep, RC_NF4_KEEP_KEY, &c->nf4_keep));
    const rc_rope_profile *p = &q->rope;
    if (p->type != RC_ROPE_YARN) return RECALL_OK; /* plain RoPE: no qwen2.rope.* keys (blob unchanged) */
    RC_TRY(rc_writer_kv_str(c->w, RC_ROPE_KEY_TYPE, "yarn", c->err));
    RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_FACTOR, p->factor, c->err));
    RC_TRY(kv1(c, RC_ROPE_KEY_ORIG, p->orig));
    RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_BETA_FAST, p->beta_fast, c->err));
    RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_BETA_SLOW, p->beta_slow, c->err));
    if (p->mscale > 0.0) RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_MSCALE, p->mscale, c->err));
    if (p->mscale_all_dim > 0.0) RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_MSCALE_ALL, p->mscale_all_dim, c->err));
    if (p->attention_factor > 0.0) RC_TRY(rc_writer_kv_f64(c->w, RC_ROPE_KEY_ATTN, p->attention_factor, c->err));
    return kv1(c, RC_ROPE_KEY_TRUNCATE, p->truncate);
}

/* ---- BERT (bge) -------------------------------------------------------------------------- */

typedef struct {
    int64_t hidden, layers, heads, ffn, vocab, max_pos, type_vocab, max_seq;
    double eps;
} bert_cfg;

static recall_status bert_config(conv *c, const char *dir, bert_cfg *b) {
    char path[4096];
    json_doc *doc;
    recall_status s;
    snprintf(path, sizeof path, "%s/config.json", dir);
    RC_TRY(json_read_file(path, &doc, c->err));
    const json_value *r = json_root(doc);
    s = json_int(r, "hidden_size", path, &b->hidden, c->err);
    if (!s) s = json_int(r, "num_hidden_layers", path, &b->layers, c->err);
    if (!s) s = json_int(r, "num_attention_heads", path, &b->heads, c->err);
    if (!s) s = json_int(r, "intermediate_size", path, &b->ffn, c->err);
    if (!s) s = json_int(r, "vocab_size", path, &b->vocab, c->err);
    if (!s) s = json_int(r, "max_position_embeddings", path, &b->max_pos, c->err);
    if (!s) s = json_int(r, "type_vocab_size", path, &b->type_vocab, c->err);
    if (!s) s = json_num(r, "layer_norm_eps", path, &b->eps, c->err);
    if (!s) {
        const json_value *act = json_get_type(r, "hidden_act", JSON_STR);
        if (act && strcmp(act->str, "gelu") != 0)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: hidden_act \"%s\", only exact-erf \"gelu\" is supported", path,
                        act->str);
        const json_value *pe = json_get_type(r, "position_embedding_type", JSON_STR);
        if (!s && pe && strcmp(pe->str, "absolute") != 0)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: position_embedding_type \"%s\" not supported", path, pe->str);
    }
    if (!s && (b->hidden <= 0 || b->heads <= 0 || b->hidden % b->heads || b->layers <= 0 || b->ffn <= 0 ||
               b->vocab <= 0 || b->max_pos <= 0 || b->type_vocab <= 0 || b->hidden > (1 << 16) || b->layers > 256))
        s = rc_fail(c->err, RECALL_E_FORMAT, "%s: inconsistent dimensions", path);
    json_free(doc);
    if (s) return s;

    b->max_seq = b->max_pos;
    snprintf(path, sizeof path, "%s/sentence_bert_config.json", dir);
    if (file_exists(path)) {
        RC_TRY(json_read_file(path, &doc, c->err));
        const json_value *m = json_get(json_root(doc), "max_seq_length");
        if (m && m->type == JSON_NUM && m->is_int && m->i > 0 && m->i <= b->max_pos) b->max_seq = m->i;
        json_free(doc);
    }
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    if (file_exists(path)) {
        RC_TRY(json_read_file(path, &doc, c->err));
        r = json_root(doc);
        static const char *other[] = {"pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                                      "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                                      "pooling_mode_lasttoken"};
        const json_value *cls = json_get_type(r, "pooling_mode_cls_token", JSON_BOOL);
        if (!cls || !cls->num)
            s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: pooling mode is not CLS (pooling_mode_cls_token must be true)",
                        path);
        for (size_t i = 0; !s && i < sizeof other / sizeof other[0]; i++) {
            const json_value *v = json_get_type(r, other[i], JSON_BOOL);
            if (v && v->num)
                s = rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: %s is set; only CLS pooling is supported", path, other[i]);
        }
        json_free(doc);
    }
    return s;
}

static recall_status bert_tensors(conv *c, const char *dir, const bert_cfg *b) {
    rc_st *st;
    RC_TRY(rc_st_open(dir, &st, c->err));
    const enum store lin = store_of(c->o->bge_weights);
    int prefixed = rc_st_find(st, "bert.embeddings.word_embeddings.weight") != NULL;
    int64_t H = b->hidden, F = b->ffn;
    char src[256], dst[300];
    recall_status s = RECALL_OK;
#define PUTB(name, how, nd, ...)                                                                \
    do {                                                                                        \
        int64_t shp_[] = {__VA_ARGS__};                                                         \
        snprintf(src, sizeof src, "%s%s", prefixed ? "bert." : "", name);                      \
        snprintf(dst, sizeof dst, "bert.%s", name);                                             \
        if (!s) s = put_st(c, st, src, dst, nd, shp_, how);                                     \
    } while (0)
    PUTB("embeddings.word_embeddings.weight", lin, 2, b->vocab, H);
    PUTB("embeddings.position_embeddings.weight", ST_F32, 2, b->max_pos, H);
    PUTB("embeddings.token_type_embeddings.weight", ST_F32, 2, b->type_vocab, H);
    PUTB("embeddings.LayerNorm.weight", ST_F32, 1, H);
    PUTB("embeddings.LayerNorm.bias", ST_F32, 1, H);
    for (int64_t l = 0; l < b->layers && !s; l++) {
        const struct { const char *n; int64_t r, k; } ts[] = {
            {"attention.self.query.weight", H, H}, {"attention.self.query.bias", H, 0},
            {"attention.self.key.weight", H, H},   {"attention.self.key.bias", H, 0},
            {"attention.self.value.weight", H, H}, {"attention.self.value.bias", H, 0},
            {"attention.output.dense.weight", H, H}, {"attention.output.dense.bias", H, 0},
            {"attention.output.LayerNorm.weight", H, 0}, {"attention.output.LayerNorm.bias", H, 0},
            {"intermediate.dense.weight", F, H},   {"intermediate.dense.bias", F, 0},
            {"output.dense.weight", H, F},         {"output.dense.bias", H, 0},
            {"output.LayerNorm.weight", H, 0},     {"output.LayerNorm.bias", H, 0},
        };
        for (size_t i = 0; i < sizeof ts / sizeof ts[0] && !s; i++) {
            char n[200];
            snprintf(n, sizeof n, "encoder.layer.%lld.%s", (long long)l, ts[i].n);
            if (ts[i].k)
                PUTB(n, lin, 2, ts[i].r, ts[i].k);
            else
                PUTB(n, ST_F32, 1, ts[i].r);
        }
    }
#undef PUTB
    rc_st_close(st);
    return s;
}

static recall_status bert_keys(conv *c, const bert_cfg *b) {
    RC_TRY(kv1(c, "bert.hidden", b->hidden));
    RC_TRY(kv1(c, "bert.layers", b->layers));
    RC_TRY(kv1(c, "bert.heads", b->heads));
    RC_TRY(kv1(c, "bert.ffn", b->ffn));
    RC_TRY(kv1(c, "bert.vocab", b->vocab));
    RC_TRY(kv1(c, "bert.max_pos", b->max_pos));
    RC_TRY(kv1(c, "bert.type_vocab", b->type_vocab));
    RC_TRY(kv1(c, "bert.max_seq", b->max_seq));
    RC_TRY(rc_writer_kv_f64(c->w, "bert.ln_eps", b->eps, c->err));
    /* only when not f32: an f32 encoder's blob keeps the bytes converters wrote before the key
     * (rc_blob_weights reads its absence as f32) */
    if (store_of(c->o->bge_weights) != ST_F32) RC_TRY(rc_writer_kv_str(c->w, "bert.weights", c->o->bge_weights, c->err));
    return RECALL_OK;
}

/* ---- fp32 state dicts from .pt / .safetensors / .npz ------------------------------------ */

typedef struct {
    char *name;
    int ndim;
    int64_t shape[RC_MAX_DIMS];
    float *data;
} ftensor;

typedef struct {
    ftensor *t;
    size_t n;
    int64_t heads; /* from a .pt's args/src_args, else -1 */
    char heads_bad[256]; /* why args.heads is unusable (present but not an int), else "" */
    char what[512];
} fdict;

static void fdict_free(fdict *d) {
    for (size_t i = 0; i < d->n; i++) {
        free(d->t[i].name);
        free(d->t[i].data);
    }
    free(d->t);
    memset(d, 0, sizeof *d);
}

static recall_status fdict_add(fdict *d, const char *name, int ndim, const int64_t *shape, float *data,
                               recall_err *err) {
    if (ndim > RC_MAX_DIMS) {
        free(data);
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s' has %d dims (max %d)", d->what, name, ndim, RC_MAX_DIMS);
    }
    ftensor *nt = realloc(d->t, (d->n + 1) * sizeof *nt);
    if (!nt) {
        free(data);
        return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    }
    d->t = nt;
    ftensor *t = &d->t[d->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) {
        free(data);
        return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    }
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    d->n++;
    return RECALL_OK;
}

static const ftensor *fdict_find(const fdict *d, const char *name) {
    size_t i = RC_NAME_INDEX(d->t, d->n, ftensor, name, name);
    return i < d->n ? &d->t[i] : NULL;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static recall_status load_pt(const char *path, fdict *d, recall_err *err) {
    char *buf;
    size_t len;
    RC_TRY(rc_read_file(path, &buf, &len, err));
    rc_torch_file *tf;
    recall_status s = rc_torch_load(buf, len, path, &tf, err);
    free(buf);
    if (s) return s;
    const rc_pv *root = rc_torch_root(tf);
    const rc_pv *sd = rc_pv_dict_get(root, "pooler");
    if (!sd) sd = rc_pv_dict_get(root, "state_dict");
    if (!sd) sd = root; /* a bare state dict */
    if (rc_pv_kind_of(sd) != RC_PV_DICT) {
        rc_torch_free(tf);
        return rc_fail(err, RECALL_E_FORMAT, "%s: expected a dict of tensors (or {\"pooler\": ...}), found %s", path,
                       rc_pv_kind_name(rc_pv_kind_of(sd)));
    }
    /* args.heads, else src_args.heads: a Python int or a numpy integer scalar (np.int64(4) reads
     * as 4, pickle.h). Absent: the default applies. Present but not an int (a float, a str, an
     * array): remembered, and refused where the head count is needed (pooler_part). */
    d->heads = -1;
    static const char *const holders[] = {"args", "src_args"};
    for (size_t k = 0; k < 2 && d->heads < 0 && !d->heads_bad[0]; k++) {
        const rc_pv *hv = rc_pv_dict_get(rc_pv_dict_get(root, holders[k]), "heads");
        int64_t h;
        if (!hv) continue;
        if (rc_pv_as_int(hv, &h)) d->heads = h;
        else
            snprintf(d->heads_bad, sizeof d->heads_bad, "'%s.heads' is a %s, not an int", holders[k],
                     rc_pv_kind_name(rc_pv_kind_of(hv)));
    }
    for (size_t i = 0; i < rc_pv_len(sd) && !s; i++) {
        rc_torch_tensor t;
        s = rc_torch_dict_tensor(sd, i, &t, err);
        if (s) break;
        float *f;
        s = rc_torch_tensor_f32(&t, &f, err);
        if (s) break;
        s = fdict_add(d, t.name, t.ndim, t.shape, f, err);
    }
    rc_torch_free(tf);
    return s;
}

static recall_status load_st(const char *path, fdict *d, recall_err *err) {
    rc_st *st;
    RC_TRY(rc_st_open(path, &st, err));
    recall_status s = RECALL_OK;
    d->heads = -1;
    for (size_t i = 0; i < rc_st_count(st) && !s; i++) {
        const rc_st_tensor *t = rc_st_at(st, i);
        float *f;
        s = rc_st_to_f32(t, &f, err);
        if (!s) s = fdict_add(d, t->name, t->ndim, t->shape, f, err);
    }
    rc_st_close(st);
    return s;
}

static recall_status load_npz(const char *path, fdict *d, recall_err *err) {
    rc_npz *z;
    RC_TRY(rc_npz_open(path, &z, err));
    recall_status s = RECALL_OK;
    d->heads = -1;
    for (size_t i = 0; i < rc_npz_count(z) && !s; i++) {
        char key[256];
        if (!rc_npz_key(z, i, key, sizeof key)) {
            s = rc_fail(err, RECALL_E_FORMAT, "%s: member %zu has an unusable name", path, i);
            break;
        }
        float *f;
        int ndim;
        int64_t shape[16];
        s = rc_npz_get_f32(z, key, &f, &ndim, shape, err);
        if (!s) s = fdict_add(d, key, ndim, shape, f, err);
    }
    rc_npz_close(z);
    return s;
}

static recall_status load_fdict(const char *path, fdict *d, recall_err *err) {
    memset(d, 0, sizeof *d);
    snprintf(d->what, sizeof d->what, "%s", path);
    recall_status s;
    if (ends_with(path, ".pt") || ends_with(path, ".pth") || ends_with(path, ".bin"))
        s = load_pt(path, d, err);
    else if (ends_with(path, ".safetensors"))
        s = load_st(path, d, err);
    else if (ends_with(path, ".npz"))
        s = load_npz(path, d, err);
    else
        s = rc_fail(err, RECALL_E_UNSUPPORTED, "%s: unknown file type (expected .pt, .safetensors or .npz)", path);
    if (s) fdict_free(d);
    return s;
}

/* Checks shape, then moves the tensor into the blob as `prefix.name`. */
static recall_status take(conv *c, fdict *d, const char *prefix, const char *name, int ndim, const int64_t *shape) {
    ftensor *t = (ftensor *)fdict_find(d, name);
    if (!t) return rc_fail(c->err, RECALL_E_MISSING, "%s: tensor '%s' missing", d->what, name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[80] = "", want[80] = "";
        size_t gl = 0, wl = 0;
        for (int i = 0; i < t->ndim && gl < 60; i++) gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        for (int i = 0; i < ndim && wl < 60; i++) wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", i ? "," : "", (long long)shape[i]);
        return rc_fail(c->err, RECALL_E_SHAPE, "%s: tensor '%s' has shape [%s], expected [%s]", d->what, name, got, want);
    }
    char dst[300];
    snprintf(dst, sizeof dst, "%s.%s", prefix, name);
    float *data = t->data;
    t->data = NULL;
    return put_f32(c, dst, ndim, shape, data);
}

/* ---- pooler, gate, bridge ---------------------------------------------------------------- */

static recall_status pooler_part(conv *c, int64_t H_model) {
    fdict d;
    RC_TRY(load_fdict(c->o->pooler_path, &d, c->err));
    recall_status s = RECALL_OK;
    const ftensor *q = fdict_find(&d, "query");
    int64_t n_sp = 0, H = 0, nblocks = 0, ffn = 0, heads = 0;
    if (!q || q->ndim != 2) {
        s = rc_fail(c->err, RECALL_E_MISSING, "%s: tensor 'query' [n_sp, hidden] missing", d.what);
        goto out;
    }
    n_sp = q->shape[0];
    H = q->shape[1];
    if (H_model > 0 && H != H_model) {
        s = rc_fail(c->err, RECALL_E_SHAPE, "%s: pooler hidden %lld does not match the Qwen2 hidden %lld", d.what,
                    (long long)H, (long long)H_model);
        goto out;
    }
    for (size_t i = 0; i < d.n; i++) {
        long long bi;
        char tail[64];
        if (sscanf(d.t[i].name, "blocks.%lld.%63s", &bi, tail) == 2 && strcmp(tail, "lnq1.weight") == 0) nblocks++;
    }
    const ftensor *f0 = fdict_find(&d, "blocks.0.ffn.0.weight");
    if (!nblocks || !f0 || f0->ndim != 2) {
        s = rc_fail(c->err, RECALL_E_MISSING, "%s: no pooler blocks (blocks.0.lnq1.weight / blocks.0.ffn.0.weight)", d.what);
        goto out;
    }
    ffn = f0->shape[0];
    if (c->o->pooler_heads <= 0 && d.heads_bad[0]) {
        s = rc_fail(c->err, RECALL_E_FORMAT, "%s: %s (give the head count with --pooler-heads)", d.what, d.heads_bad);
        goto out;
    }
    heads = c->o->pooler_heads > 0 ? c->o->pooler_heads : d.heads > 0 ? d.heads : 8;
    if (H % heads) {
        s = rc_fail(c->err, RECALL_E_SHAPE, "%s: hidden %lld is not divisible by %lld heads", d.what, (long long)H,
                    (long long)heads);
        goto out;
    }
    {
        int64_t sq[] = {n_sp, H}, sh[] = {H}, s3[] = {3 * H, H}, s3b[] = {3 * H}, shh[] = {H, H}, sf[] = {ffn, H},
                sfb[] = {ffn}, sfo[] = {H, ffn};
        s = take(c, &d, "pooler", "query", 2, sq);
        for (int64_t b = 0; b < nblocks && !s; b++) {
            const struct { const char *n; int nd; const int64_t *sh; } ts[] = {
                {"lnq1.weight", 1, sh}, {"lnq1.bias", 1, sh}, {"lnk.weight", 1, sh}, {"lnk.bias", 1, sh},
                {"cross.in_proj_weight", 2, s3}, {"cross.in_proj_bias", 1, s3b},
                {"cross.out_proj.weight", 2, shh}, {"cross.out_proj.bias", 1, sh},
                {"lnq2.weight", 1, sh}, {"lnq2.bias", 1, sh},
                {"selfa.in_proj_weight", 2, s3}, {"selfa.in_proj_bias", 1, s3b},
                {"selfa.out_proj.weight", 2, shh}, {"selfa.out_proj.bias", 1, sh},
                {"lnq3.weight", 1, sh}, {"lnq3.bias", 1, sh},
                {"ffn.0.weight", 2, sf}, {"ffn.0.bias", 1, sfb}, {"ffn.2.weight", 2, sfo}, {"ffn.2.bias", 1, sh},
            };
            for (size_t i = 0; i < sizeof ts / sizeof ts[0] && !s; i++) {
                char n[128];
                snprintf(n, sizeof n, "blocks.%lld.%s", (long long)b, ts[i].n);
                s = take(c, &d, "pooler", n, ts[i].nd, ts[i].sh);
            }
        }
        if (!s) s = take(c, &d, "pooler", "ln_out.weight", 1, sh);
        if (!s) s = take(c, &d, "pooler", "ln_out.bias", 1, sh);
        if (!s) {
            const ftensor *os = fdict_find(&d, "out_scale");
            if (!os) s = rc_fail(c->err, RECALL_E_MISSING, "%s: tensor 'out_scale' missing", d.what);
            else if (os->ndim == 0) s = take(c, &d, "pooler", "out_scale", 0, NULL);
            else {
                int64_t one[] = {1};
                s = take(c, &d, "pooler", "out_scale", 1, one);
            }
        }
    }
    if (!s) s = kv1(c, "pooler.n_sp", n_sp);
    if (!s) s = kv1(c, "pooler.hidden", H);
    if (!s) s = kv1(c, "pooler.heads", heads);
    if (!s) s = kv1(c, "pooler.blocks", nblocks);
    if (!s) s = kv1(c, "pooler.ffn", ffn);
    if (!s) s = rc_writer_kv_f64(c->w, "pooler.ln_eps", 1e-5, c->err);
out:
    fdict_free(&d);
    return s;
}

static recall_status gate_part(conv *c, int64_t F) {
    fdict d;
    RC_TRY(load_fdict(c->o->gate_path, &d, c->err));
    int64_t sf[] = {F};
    recall_status s = take(c, &d, "gate", "coef", 1, sf);
    if (!s) s = take(c, &d, "gate", "mean", 1, sf);
    if (!s) s = take(c, &d, "gate", "scale", 1, sf);
    if (!s) s = take(c, &d, "gate", "intercept", 0, NULL);
    if (!s) {
        ftensor *t = (ftensor *)fdict_find(&d, "thresh");
        if (c->o->set_gate_threshold) {
            if (!t || t->ndim != 0 || !isfinite(c->o->gate_threshold))
                s = rc_fail(c->err, RECALL_E_ARG, "%s: --threshold %g needs a finite value and the gate's 0-d thresh",
                            c->o->gate_path, c->o->gate_threshold);
            else t->data[0] = (float)c->o->gate_threshold; /* the kv and the tensor carry the same value */
        }
        if (!s && t && t->ndim == 0)
            s = rc_writer_kv_f64(c->w, "gate.thresh", (double)t->data[0], c->err);
        if (!s && t) s = take(c, &d, "gate", "thresh", 0, NULL);
    }
    if (!s) s = kv1(c, "gate.dim", F);
    fdict_free(&d);
    return s;
}

static recall_status bridge_part(conv *c, int64_t qdim_want, int64_t kdim_want) {
    rc_npz *z;
    RC_TRY(rc_npz_open(c->o->bridge_path, &z, c->err));
    int64_t qdim = 0, kdim = 0, dd = 0;
    recall_status s = rc_npz_get_i64(z, "qdim", &qdim, c->err);
    if (!s) s = rc_npz_get_i64(z, "kdim", &kdim, c->err);
    if (!s) s = rc_npz_get_i64(z, "d", &dd, c->err);
    rc_npz_close(z);
    if (s) return s;
    if (qdim != qdim_want || (kdim_want > 0 && kdim != kdim_want) || dd <= 0 || dd > 65536)
        return rc_fail(c->err, RECALL_E_SHAPE,
                       "%s: bridge head qdim %lld / kdim %lld / d %lld do not match the gate feature (%lld) and "
                       "BERT hidden (%lld)", c->o->bridge_path, (long long)qdim, (long long)kdim, (long long)dd,
                       (long long)qdim_want, (long long)kdim_want);
    fdict d;
    RC_TRY(load_fdict(c->o->bridge_path, &d, c->err));
    int64_t q0[] = {dd, qdim}, k0[] = {dd, kdim}, b[] = {dd}, w2[] = {dd, dd};
    s = take(c, &d, "bridge", "Wq.0.weight", 2, q0);
    if (!s) s = take(c, &d, "bridge", "Wq.0.bias", 1, b);
    if (!s) s = take(c, &d, "bridge", "Wq.2.weight", 2, w2);
    if (!s) s = take(c, &d, "bridge", "Wq.2.bias", 1, b);
    if (!s) s = take(c, &d, "bridge", "Wk.0.weight", 2, k0);
    if (!s) s = take(c, &d, "bridge", "Wk.0.bias", 1, b);
    if (!s) s = take(c, &d, "bridge", "Wk.2.weight", 2, w2);
    if (!s) s = take(c, &d, "bridge", "Wk.2.bias", 1, b);
    if (!s) s = kv1(c, "bridge.qdim", qdim);
    if (!s) s = kv1(c, "bridge.kdim", kdim);
    if (!s) s = kv1(c, "bridge.d", dd);
    fdict_free(&d);
    return s;
}

/* ---- tokenizers -------------------------------------------------------------------------- */

static recall_status special_id(conv *c, const rc_bpe *t, const char *key, const char *str, const char *file) {
    int32_t id = rc_bpe_token_id(t, str);
    if (id < 0) return rc_fail(c->err, RECALL_E_MISSING, "%s: special token \"%s\" not in the vocabulary", file, str);
    return kv1(c, key, id);
}

static recall_status tokenizer_part(conv *c, int64_t qwen_vocab, int64_t bert_vocab) {
    char tj[4096], tc[4096];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", c->o->qwen2_dir);
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", c->o->qwen2_dir);
    uint8_t *sec;
    size_t size;
    RC_TRY(rc_bpe_build_from_json(tj, file_exists(tc) ? tc : NULL, &sec, &size, c->err));
    rc_bpe *bpe;
    recall_status s = rc_bpe_load(sec, size, &bpe, c->err);
    if (s) {
        free(sec);
        return s;
    }
    if (qwen_vocab > 0 && (int64_t)rc_bpe_vocab_size(bpe) > qwen_vocab)
        s = rc_fail(c->err, RECALL_E_SHAPE, "%s: tokenizer has ids up to %zu but the model vocab is %lld", tj,
                    rc_bpe_vocab_size(bpe) - 1, (long long)qwen_vocab);
    if (!s) s = special_id(c, bpe, "tok.bos", "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", tj);
    if (!s) s = special_id(c, bpe, "tok.eos", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", tj);
    if (!s) s = special_id(c, bpe, "tok.user", "<\xef\xbd\x9cUser\xef\xbd\x9c>", tj);
    if (!s) s = special_id(c, bpe, "tok.assistant", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", tj);
    if (!s) s = kv1(c, "tok.vocab", (int64_t)rc_bpe_vocab_size(bpe));
    rc_bpe_free(bpe);
    if (s) {
        free(sec);
        return s;
    }
    RC_TRY(rc_writer_section(c->w, RC_SECT_TOK_BPE, sec, size, c->err));
    progress(c, "  tokenizer %s%s", tj, "");

    /* Like Hugging Face's AutoTokenizer, a tokenizer.json wins over vocab.txt when both exist
     * (worldA's bge tokenizer.json has only the 5 special tokens, and the goldens follow it). */
    char vt[4096];
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", c->o->bge_dir);
    snprintf(vt, sizeof vt, "%s/tokenizer.json", c->o->bge_dir);
    if (file_exists(vt)) {
        RC_TRY(rc_wp_build_from_json(vt, file_exists(tc) ? tc : NULL, &sec, &size, c->err));
    } else {
        snprintf(vt, sizeof vt, "%s/vocab.txt", c->o->bge_dir);
        RC_TRY(rc_wp_build(vt, file_exists(tc) ? tc : NULL, &sec, &size, c->err));
    }
    rc_wp *wp;
    s = rc_wp_load(sec, size, &wp, c->err);
    if (s) {
        free(sec);
        return s;
    }
    if (bert_vocab > 0 && (int64_t)rc_wp_vocab_size(wp) > bert_vocab)
        s = rc_fail(c->err, RECALL_E_SHAPE, "%s: %zu tokens but the BERT vocab is %lld", vt, rc_wp_vocab_size(wp),
                    (long long)bert_vocab);
    rc_wp_free(wp);
    if (s) {
        free(sec);
        return s;
    }
    RC_TRY(rc_writer_section(c->w, RC_SECT_TOK_WORDPIECE, sec, size, c->err));
    progress(c, "  tokenizer %s%s", vt, "");
    return RECALL_OK;
}

/* ---- entry point ------------------------------------------------------------------------- */

static recall_status loop_keys(conv *c, const qwen2_cfg *q) {
    for (int i = 0; i < LOOP_N; i++) {
        char key[32];
        snprintf(key, sizeof key, "loop.%s", LOOP_KEYS[i]);
        RC_TRY(kv1(c, key, q->loop[i]));
    }
    return RECALL_OK;
}

/* The gate layers: gate.npz's optional integer array `layers` (1..RC_QWEN2_MAX_GATE distinct
 * decoder layers, in feature order), else the reference's 8, 14, 20. */
static recall_status gate_layers(conv *c, const qwen2_cfg *q, int64_t *layers, int *n) {
    static const int64_t def[3] = {8, 14, 20};
    *n = 3;
    memcpy(layers, def, sizeof def);
    const char *path = c->o->gate_path;
    rc_npz *z;
    RC_TRY(rc_npz_open(path, &z, c->err));
    recall_status s = RECALL_OK;
    if (rc_npz_has(z, "layers")) {
        rc_npy a;
        s = rc_npz_get(z, "layers", &a, c->err);
        if (!s) {
            if ((a.dtype != RC_NPY_I64 && a.dtype != RC_NPY_I32) || a.ndim != 1 || a.numel < 1 ||
                a.numel > RC_QWEN2_MAX_GATE)
                s = rc_fail(c->err, RECALL_E_FORMAT, "%s: 'layers' must be a 1-d integer array of 1..%d layers", path,
                            RC_QWEN2_MAX_GATE);
            for (uint64_t i = 0; !s && i < a.numel; i++) {
                const uint8_t *p = (const uint8_t *)a.data + i * a.itemsize;
                int64_t v = 0;
                for (size_t b = 0; b < a.itemsize; b++) v |= (int64_t)p[b] << (8 * b);
                if (a.itemsize == 4) v = (int32_t)(uint32_t)v;
                for (uint64_t j = 0; j < i; j++)
                    if (layers[j] == v) v = -1;
                if (v < 0 || v >= q->layers)
                    s = rc_fail(c->err, RECALL_E_SHAPE, "%s: layers[%llu] is not a distinct layer in 0..%lld", path,
                                (unsigned long long)i, (long long)q->layers - 1);
                layers[i] = v;
            }
            *n = (int)a.numel;
            rc_npy_free(&a);
        }
    }
    rc_npz_close(z);
    return s;
}

recall_status rc_convert(const rc_convert_opts *o, recall_err *err) {
    if (!o->out_path || !o->qwen2_dir || !o->bge_dir)
        return rc_fail(err, RECALL_E_ARG, "convert needs --qwen2 DIR, --bge DIR and -o OUT");
    if (!o->tokenizers_only && (!o->pooler_path || !o->gate_path || !o->bridge_path))
        return rc_fail(err, RECALL_E_ARG, "convert needs --pooler, --gate and --bridge (or --tokenizers-only)");
    const char *wm = o->weights ? o->weights : "f32";
    if (strcmp(wm, "f32") && strcmp(wm, "bf16") && strcmp(wm, "nf4"))
        return rc_fail(err, RECALL_E_ARG, "--weights %s: expected f32, bf16 or nf4", wm);
    const char *bm = o->bge_weights ? o->bge_weights : "f32";
    if (strcmp(bm, "f32") && strcmp(bm, "bf16") && strcmp(bm, "nf4"))
        return rc_fail(err, RECALL_E_ARG, "--bge-weights %s: expected f32, bf16 or nf4", bm);
    if (o->nf4_keep && strcmp(wm, "nf4"))
        return rc_fail(err, RECALL_E_ARG, "--nf4-keep %s needs --weights nf4 (the decoder is %s)", o->nf4_keep, wm);
    conv c = {o, NULL, err, 0, 0, NULL};
    RC_TRY(rc_writer_new(&c.w, err));
    recall_status s = RECALL_OK;
    RC_TRY(rc_writer_kv_str(c.w, "blob.kind", o->tokenizers_only ? "tokenizers" : "recall", err));
    if (o->tokenizers_only) {
        s = tokenizer_part(&c, 0, 0);
    } else {
        qwen2_cfg q;
        bert_cfg b;
        memset(&q, 0, sizeof q);
        memset(&b, 0, sizeof b);
        s = qwen2_config(&c, o->qwen2_dir, &q);
        if (!s) s = bert_config(&c, o->bge_dir, &b);
        int64_t layers[RC_QWEN2_MAX_GATE];
        int n_gate = 0;
        if (!s) s = gate_layers(&c, &q, layers, &n_gate);
        for (int i = 0; !s && i < n_gate; i++)
            if (layers[i] >= q.layers)
                s = rc_fail(err, RECALL_E_SHAPE, "%s: gate layer %lld does not exist (model has %lld layers)",
                            o->qwen2_dir, (long long)layers[i], (long long)q.layers);
        if (!s) s = qwen2_keys(&c, &q);
        if (!s) s = bert_keys(&c, &b);
        if (!s) s = rc_writer_kv_i64(c.w, "gate.layers", layers, (uint32_t)n_gate, err);
        if (!s) s = loop_keys(&c, &q);
        if (!s) s = tokenizer_part(&c, q.vocab, b.vocab);
        if (!s) progress(&c, "qwen2 %s (%s weights)", o->qwen2_dir, wm);
        if (!s) s = qwen2_tensors(&c, o->qwen2_dir, &q);
        if (!s) progress(&c, "bert %s (%s weights)", o->bge_dir, bm);
        if (!s) s = bert_tensors(&c, o->bge_dir, &b);
        if (!s) progress(&c, "pooler %s%s", o->pooler_path, "");
        if (!s) s = pooler_part(&c, q.hidden);
        if (!s) progress(&c, "gate %s%s", o->gate_path, "");
        if (!s) s = gate_part(&c, n_gate * q.heads * q.head_dim);
        if (!s) progress(&c, "bridge %s%s", o->bridge_path, "");
        if (!s) s = bridge_part(&c, n_gate * q.heads * q.head_dim, b.hidden);
    }
    if (!s) progress(&c, "writing %s%s", o->out_path, "");
    if (!s) s = rc_writer_write(c.w, o->out_path, NULL, NULL, err);
    rc_writer_free(c.w);
    free(c.nf4_keep);
    return s;
}
