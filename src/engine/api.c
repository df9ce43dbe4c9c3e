/* api.c - the public library API (recall.h) over the engine's internal modules.
 *
 * recall_model = an rc_blob (mapped, or read into a buffer from the caller's allocator) + the BPE
 * tokenizer of its TOK_BPE section + a lazily opened rc_qwen2 for recall_forward.
 * recall_loop  = an rc_recall (recall_loop.h) borrowing the model's blob.
 * The stages one at a time (API version 7): the encoder, its tokenizer, the pooler and the heads
 * are opened on the model at their first call; the pooler reads embeddings through recall_forward's
 * decoder. recall_turn keeps the turn's record for recall_turn_trace.
 * Memory budget: model->reserved counts the estimated bytes of everything opened on the model
 * (blob buffer, forward context, loops); each open first checks estimate + reserved against
 * max_memory, so a blob whose declared sizes are too big fails before anything is allocated.
 */
#include "recall.h"

#include "bert.h"
#include "blob.h"
#include "chat.h"
#include "draft.h"
#include "heads.h"
#include "ops.h"
#include "pooler.h"
#include "qwen2.h"
#include "recall_loop.h"
#include "rope.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"
#include "turn_json.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct recall_model {
    recall_allocator al;
    uint64_t max_memory, reserved;
    void *buffer; /* the blob bytes when read into memory by us (allocator-owned), else NULL */
    rc_blob *blob;
    rc_bpe *bpe;
    recall_model_info info;
    const char *rope_scaling; /* recall_open_opts.rope_scaling (borrowed until model_finish) */
    recall_kv kv;             /* recall_open_opts.kv: recall_forward's cache */
    rc_qwen2 *fwd;        /* recall_forward's decoder, reopened when a longer input needs more cache */
    uint64_t fwd_reserved;
    rc_exec_opts fwd_opts; /* recall_forward's execution: recall_open_opts.numerics; threads, simd: the environment */
    rc_exec *fwd_ex;      /* q8: recall_forward's execution context, and the context that owns the */
    rc_qwen2 *fwd_base;   /* packed weights every reopened fwd borrows (packed once) */
    int n_loops;
    recall_model_dims dims; /* read from the blob's keys at open */
    rc_bert *bert;        /* recall_embed's encoder, opened at its first call */
    rc_wp *wp;            /* recall_bert_tokenize's tokenizer, loaded at its first call */
    rc_pooler *pooler;    /* recall_pool's, opened at its first call */
    rc_heads *heads;      /* recall_gate / recall_bridge's, opened at the first call */
    float *bridge_q, *bridge_k; /* recall_bridge's projections [bridge.d] */
};

struct recall_loop {
    recall_model *m;
    rc_recall *r;
    recall_loop_opts o;
    uint64_t reserved;
    long drafted, accepted; /* the last turn's (recall_loop_draft_stats) */
    rc_turn last;           /* the last turn's record (recall_turn_trace) */
    int has_last;
};

/* ---- allocation ------------------------------------------------------------------------------ */

static void *std_alloc(void *ctx, size_t n) {
    (void)ctx;
    return malloc(n ? n : 1);
}
static void std_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}
static const recall_allocator std_allocator = {std_alloc, std_free, NULL};

static void *al_alloc(const recall_allocator *al, size_t n) { return al->alloc(al->ctx, n ? n : 1); }
static void al_free(const recall_allocator *al, void *p) {
    if (p) al->free(al->ctx, p);
}

void recall_free(const recall_model *m, void *p) {
    if (m) al_free(&m->al, p);
    else free(p);
}

/* Copies an engine (malloc'd) array into allocator memory and frees the original. */
static recall_status adopt(const recall_model *m, void *src, size_t bytes, void **dst, recall_err *err) {
    *dst = al_alloc(&m->al, bytes);
    if (!*dst) {
        free(src);
        return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory copying %zu bytes", bytes);
    }
    if (bytes) memcpy(*dst, src, bytes);
    free(src);
    return RECALL_OK;
}

/* ---- memory estimates (from declared sizes, before allocating) -------------------------------- */

static int64_t cfg_i64(const rc_blob *b, const char *key, int64_t dflt) {
    int64_t v = 0;
    recall_err e = {0};
    return rc_blob_get_i64(b, key, &v, &e) == RECALL_OK ? v : dflt;
}

/* Bytes an rc_qwen2 with a cache of max_ctx positions allocates: K and V caches, RoPE tables and
 * the per-chunk scratch (activations, attention scores, logits). An estimate from the config; it
 * errs on the high side. Saturates instead of overflowing on hostile sizes. */
static uint64_t sat_mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t sat_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

static uint64_t qwen2_bytes(const rc_blob *b, int64_t max_ctx, recall_kv kvs, int q8) {
    uint64_t L = (uint64_t)cfg_i64(b, "qwen2.layers", 0), H = (uint64_t)cfg_i64(b, "qwen2.hidden", 0);
    uint64_t NH = (uint64_t)cfg_i64(b, "qwen2.heads", 0), NKV = (uint64_t)cfg_i64(b, "qwen2.kv_heads", 0);
    uint64_t D = (uint64_t)cfg_i64(b, "qwen2.head_dim", 0), F = (uint64_t)cfg_i64(b, "qwen2.ffn", 0);
    uint64_t V = (uint64_t)cfg_i64(b, "qwen2.vocab", 0), C = (uint64_t)(max_ctx > 0 ? max_ctx : 0);
    uint64_t kv = sat_mul(sat_mul(sat_mul(kvs == RECALL_KV_F16 ? 2 * 2 : 2 * 4, L), C), sat_mul(NKV, D));
    uint64_t rope = sat_mul(sat_mul(C, D), 4);
    uint64_t row = sat_add(sat_add(sat_mul(6, H), sat_mul(2, F)), sat_add(sat_mul(3, sat_mul(NH, D)), sat_mul(NH, C)));
    /* the exact chunk at its largest (RC_QWEN2_CHUNK_MAX: some kernel paths ask for more rows) */
    const uint64_t rows = RC_QWEN2_CHUNK_MAX > RC_QWEN2_CHUNK ? RC_QWEN2_CHUNK_MAX : RC_QWEN2_CHUNK;
    uint64_t scratch = sat_add(sat_mul(sat_mul(rows, row), 4), sat_mul(4 * 4, V));
    if (q8 && RC_QWEN2_CHUNK_Q8 > rows) { /* q8's larger chunk (its rows without the scores term,
                                             which is not per row) and its quantised rows */
        const uint64_t wide = F > H ? F : H, extra = RC_QWEN2_CHUNK_Q8 - rows;
        const uint64_t row8 = sat_add(sat_add(sat_mul(6, H), sat_mul(2, F)), sat_mul(3, sat_mul(NH, D)));
        scratch = sat_add(scratch, sat_add(sat_mul(sat_mul(extra, row8), 4), sat_mul(RC_QWEN2_CHUNK_Q8, wide * 2)));
    }
    return sat_add(sat_add(kv, rope), scratch);
}

/* Bytes of the q8 profile's packed decoder (q8.h): 4.5 bits per nf4 weight, 9 per other weight,
 * rows rounded up to 16 (an estimate from the config, on the high side). */
static uint64_t q8_pack_bytes(const rc_blob *b) {
    uint64_t L = (uint64_t)cfg_i64(b, "qwen2.layers", 0), H = (uint64_t)cfg_i64(b, "qwen2.hidden", 0);
    uint64_t NH = (uint64_t)cfg_i64(b, "qwen2.heads", 0), NKV = (uint64_t)cfg_i64(b, "qwen2.kv_heads", 0);
    uint64_t D = (uint64_t)cfg_i64(b, "qwen2.head_dim", 0), F = (uint64_t)cfg_i64(b, "qwen2.ffn", 0);
    const uint64_t rows = sat_add(sat_add(sat_mul(NH, D) + 15, sat_mul(2, sat_mul(NKV, D) + 15)),
                                  sat_add(H + 15, sat_mul(2, F + 15)));
    const uint64_t per_layer = sat_add(sat_mul(rows, H), sat_mul(H + 15, F)); /* o and down: H rows */
    const rc_tensor *t = rc_blob_find(b, "qwen2.model.layers.0.mlp.gate_proj.weight");
    const uint64_t bits = t && t->dtype == RC_DT_NF4 ? 9 : 18; /* per two weights */
    return sat_mul(sat_mul(L, per_layer), bits) / 16;
}

/* Bytes an rc_bert allocates (bert.h): six rows of H and one of the FFN width per input position
 * (up to min(max_pos, max_seq)), a score row per worker (counted for 64), the layer vectors. The
 * RC_bge arm opens it; every fire encodes through it. */
static uint64_t bert_bytes(const rc_blob *b) {
    uint64_t H = (uint64_t)cfg_i64(b, "bert.hidden", 0), F = (uint64_t)cfg_i64(b, "bert.ffn", 0);
    uint64_t L = (uint64_t)cfg_i64(b, "bert.layers", 0), P = (uint64_t)cfg_i64(b, "bert.max_pos", 0);
    uint64_t S = (uint64_t)cfg_i64(b, "bert.max_seq", (int64_t)P), N = S < P ? S : P;
    const uint64_t rows = sat_mul(N, sat_add(sat_add(sat_mul(6, H), F), 64));
    const uint64_t vecs = sat_add(sat_mul(L, sat_add(sat_mul(9, H), F)), sat_mul(3, H));
    return sat_mul(sat_add(rows, vecs), 4);
}

static recall_status reserve(recall_model *m, uint64_t bytes, const char *what, recall_err *err) {
    if (m->max_memory && (bytes > m->max_memory || m->reserved > m->max_memory - bytes))
        return rc_fail(err, RECALL_E_LIMIT,
                       "recall: %s needs about %llu bytes (%llu already in use), over the memory limit of %llu bytes",
                       what, (unsigned long long)bytes, (unsigned long long)m->reserved,
                       (unsigned long long)m->max_memory);
    m->reserved += bytes;
    return RECALL_OK;
}

/* ---- models ------------------------------------------------------------------------------------ */

/* ---- ABI: option structs as their callers were compiled (recall.h, docs/API.md) ----------------
 *
 * A caller's struct holds struct_size bytes. The library reads the fields it knows that lie
 * within them; the ones beyond keep their defaults; bytes past the last field it knows must be
 * zero (a newer caller asking for something this library cannot do).
 * _MIN: the end of the first layout of API version 2 (its last fields, rope_scaling and draft);
 * no caller of version 2 has a smaller struct, and these never move.
 * _END: the end of the last field this library knows: when a field is appended, move _END to it. */
#define OPEN_OPTS_MIN (offsetof(recall_open_opts, rope_scaling) + sizeof(const char *))
#define LOOP_OPTS_MIN (offsetof(recall_loop_opts, draft) + sizeof(int))
#define OPEN_OPTS_END (offsetof(recall_open_opts, numerics) + sizeof(int))
#define LOOP_OPTS_END (offsetof(recall_loop_opts, rerank) + sizeof(int))

/* *out (holding the defaults, struct_size its own) takes the caller's known fields. */
static recall_status take_sized(const void *caller, size_t min, size_t end, void *out, const char *what,
                                recall_err *err) {
    const size_t size = *(const size_t *)caller; /* struct_size is the first member */
    const unsigned char *c = caller;
    if (size < min)
        return rc_fail(err, RECALL_E_ARG, "%s: struct_size %zu is below the %zu bytes of this API's options (set it "
                       "with the _init macro of recall.h)", what, size, min);
    for (size_t i = end; i < size; i++)
        if (c[i])
            return rc_fail(err, RECALL_E_VERSION, "%s: the caller's options of %zu bytes set byte %zu, past the %zu "
                           "bytes this library knows (built against a newer recall.h)", what, size, i, end);
    memcpy((char *)out + sizeof(size_t), c + sizeof(size_t), (size < end ? size : end) - sizeof(size_t));
    return RECALL_OK;
}

/* Zeroes the caller's size bytes and copies the defaults d (of this library's size) into them. */
static void give_sized(void *o, size_t size, void *d, size_t end) {
    *(size_t *)d = size;
    memset(o, 0, size);
    memcpy(o, d, size < end ? size : end);
}

void recall_open_opts_init2(recall_open_opts *o, size_t struct_size) {
    recall_open_opts d;
    memset(&d, 0, sizeof d);
    give_sized(o, struct_size, &d, OPEN_OPTS_END);
}

/* The options of an open, from the caller's struct (NULL: the defaults). */
static recall_status open_opts(const recall_open_opts *o, recall_open_opts *out, recall_err *err) {
    recall_open_opts_init2(out, sizeof *out);
    return o ? take_sized(o, OPEN_OPTS_MIN, OPEN_OPTS_END, out, "recall_open_opts", err) : RECALL_OK;
}

static recall_status model_new(const recall_open_opts *o, recall_model **out, recall_err *err) {
    const recall_allocator *al = o && o->allocator ? o->allocator : &std_allocator;
    if (!al->alloc || !al->free) return rc_fail(err, RECALL_E_ARG, "recall: allocator without alloc/free");
    recall_model *m = al_alloc(al, sizeof *m);
    if (!m) return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    memset(m, 0, sizeof *m);
    m->al = *al;
    m->max_memory = o ? o->max_memory : 0;
    m->rope_scaling = o ? o->rope_scaling : NULL;
    m->kv = o ? o->kv : RECALL_KV_F32;
    m->fwd_opts = (rc_exec_opts){.numerics = o ? o->numerics : RECALL_NUMERICS_EXACT};
    if (rc_kv_dtype_check((int)m->kv, err) || rc_exec_opts_check(&m->fwd_opts, err)) {
        al_free(al, m);
        return RECALL_E_ARG;
    }
    *out = m;
    return RECALL_OK;
}

/* The stages' shapes from the blob's keys (each stage checks its own when it opens; a key out of
 * range here is reported as 0 and refused by that stage). */
static int cfg_int(const rc_blob *b, const char *key) {
    const int64_t v = cfg_i64(b, key, 0);
    return v > 0 && v <= (1 << 24) ? (int)v : 0;
}

static recall_status read_dims(recall_model *m, recall_err *err) {
    const rc_blob *b = m->blob;
    recall_model_dims *d = &m->dims;
    const recall_model_info *in = &m->info;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->vocab = in->vocab, d->max_pos = in->max_pos, d->hidden = in->hidden, d->layers = in->layers;
    d->bos_id = in->bos_id, d->eos_id = in->eos_id;
    d->heads = cfg_int(b, "qwen2.heads"), d->kv_heads = cfg_int(b, "qwen2.kv_heads");
    d->head_dim = cfg_int(b, "qwen2.head_dim");
    const rc_blob_kv *kv = rc_blob_kv_find(b, "gate.layers"); /* as the decoder reads it (qwen2.c) */
    if (!kv) {
        const int def[3] = {8, 14, 20};
        for (int i = 0; i < 3; i++)
            if (def[i] < d->layers) d->gate_layers[d->n_gate++] = def[i];
    } else {
        if (kv->type != RC_KV_I64 || kv->count < 1 || kv->count > 8)
            return rc_fail(err, RECALL_E_FORMAT, "%s: gate.layers malformed", rc_blob_path(b));
        for (uint32_t i = 0; i < kv->count; i++) {
            if (kv->v.i[i] < 0 || kv->v.i[i] >= d->layers)
                return rc_fail(err, RECALL_E_FORMAT, "%s: gate.layers[%u] = %lld outside [0, %d)", rc_blob_path(b), i,
                               (long long)kv->v.i[i], d->layers);
            d->gate_layers[d->n_gate++] = (int)kv->v.i[i];
        }
    }
    d->gate_dim = cfg_int(b, "gate.dim");
    double thresh = 0; /* as the loop reads its default (recall_loop.h) */
    recall_err ignored = {0};
    if (rc_blob_get_f64(b, "gate.thresh", &thresh, &ignored) == RECALL_OK) d->gate_threshold = (float)thresh;
    d->bridge_qdim = cfg_int(b, "bridge.qdim"), d->bridge_kdim = cfg_int(b, "bridge.kdim");
    d->bert_hidden = cfg_int(b, "bert.hidden");
    const int bp = cfg_int(b, "bert.max_pos"), bs = rc_blob_kv_find(b, "bert.max_seq") ? cfg_int(b, "bert.max_seq") : bp;
    d->bert_max_ids = bs < bp ? bs : bp;
    d->n_sp = cfg_int(b, "pooler.n_sp"), d->pooler_hidden = cfg_int(b, "pooler.hidden");
    return RECALL_OK;
}

static recall_status model_finish(recall_model *m, recall_err *err) {
    if (m->rope_scaling) { /* the runtime profile: every decoder opened on this model uses it */
        rc_rope_profile p;
        RC_TRY(rc_rope_parse(m->rope_scaling, &p, err));
        RC_TRY(rc_rope_attach(m->blob, &p, err));
        m->rope_scaling = NULL;
    }
    const rc_blob *b = m->blob;
    size_t size;
    const void *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
    if (!sec) return rc_fail(err, RECALL_E_MISSING, "%s: no BPE tokenizer section", rc_blob_path(b));
    /* The tokenizer tables are a few times the section's size (merges hash, vocab index). */
    RC_TRY(reserve(m, sat_mul(4, size), "the tokenizer", err));
    RC_TRY(rc_bpe_load(sec, size, &m->bpe, err));
    recall_model_info *in = &m->info;
    in->vocab = (int)cfg_i64(b, "qwen2.vocab", 0);
    in->max_pos = 0;
    RC_TRY(rc_rope_blob_positions(b, &in->max_pos, err)); /* trained positions under the profile */
    in->hidden = (int)cfg_i64(b, "qwen2.hidden", 0);
    in->layers = (int)cfg_i64(b, "qwen2.layers", 0);
    in->bos_id = (int)cfg_i64(b, "tok.bos", -1);
    in->eos_id = (int)cfg_i64(b, "tok.eos", -1);
    if (in->vocab < 1 || in->vocab > (1 << 24) || in->max_pos < 1 || in->max_pos > (1 << 24))
        return rc_fail(err, RECALL_E_FORMAT, "%s: qwen2.vocab %d / qwen2.max_pos %d out of range", rc_blob_path(b),
                       in->vocab, in->max_pos);
    if (in->eos_id < 0 || in->eos_id >= in->vocab)
        return rc_fail(err, RECALL_E_FORMAT, "%s: tok.eos %d outside the vocab (%d)", rc_blob_path(b), in->eos_id,
                       in->vocab);
    return read_dims(m, err);
}

recall_status recall_open_mem2(const void *buf, size_t len, const recall_open_opts *caller, recall_model **out,
                               recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "recall_open_mem: out is NULL");
    *out = NULL;
    if (!buf) return rc_fail(err, RECALL_E_ARG, "recall_open_mem: buf is NULL");
    recall_open_opts opts, *o = &opts;
    RC_TRY(open_opts(caller, &opts, err));
    recall_model *m;
    RC_TRY(model_new(o, &m, err));
    unsigned fl = o && (o->flags & RECALL_OPEN_VERIFY) ? RC_OPEN_VERIFY : 0;
    if (o && (o->flags & RECALL_OPEN_HUGEPAGES)) fl |= RC_OPEN_HUGEPAGES;
    recall_status s = rc_blob_open_mem(buf, len, "<memory>", fl, &m->blob, err);
    if (!s) s = model_finish(m, err);
    if (s) {
        recall_close(m);
        return s;
    }
    *out = m;
    return RECALL_OK;
}

/* Reads the whole file into allocator memory (the no-mmap path), checking the size first. */
static recall_status read_file(recall_model *m, const char *path, size_t *len, recall_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return rc_fail(err, RECALL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rc_fail(err, RECALL_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        fclose(f);
        return rc_fail(err, RECALL_E_LIMIT, "%s: %llu bytes do not fit this host's address space", path,
                       (unsigned long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    recall_status s = reserve(m, n, "reading the blob into memory", err);
    if (s) {
        fclose(f);
        return rc_wrap(err, "%s: ", path);
    }
    m->buffer = al_alloc(&m->al, n);
    if (!m->buffer) {
        fclose(f);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = n ? fread(m->buffer, 1, n, f) : 0;
    fclose(f);
    if (got != n) return rc_fail(err, RECALL_E_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    *len = n;
    return RECALL_OK;
}

recall_status recall_open2(const char *path, const recall_open_opts *caller, recall_model **out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "recall_open: out is NULL");
    *out = NULL;
    if (!path) return rc_fail(err, RECALL_E_ARG, "recall_open: path is NULL");
    recall_open_opts opts, *o = &opts;
    RC_TRY(open_opts(caller, &opts, err));
    recall_model *m;
    RC_TRY(model_new(o, &m, err));
    unsigned fl = o && (o->flags & RECALL_OPEN_VERIFY) ? RC_OPEN_VERIFY : 0;
    int no_mmap = o && (o->flags & RECALL_OPEN_NO_MMAP);
#ifdef RECALL_NO_MMAP
    no_mmap = 1;
#endif
    recall_status s;
    if (no_mmap) {
        size_t len = 0;
        s = read_file(m, path, &len, err);
        if (!s) s = rc_blob_open_mem(m->buffer, len, path, fl, &m->blob, err);
    } else {
        s = rc_blob_open(path, fl, &m->blob, err);
    }
    if (!s) s = model_finish(m, err);
    if (s) {
        recall_close(m);
        return s;
    }
    *out = m;
    return RECALL_OK;
}

void recall_close(recall_model *m) {
    if (!m) return;
    rc_bert_close(m->bert);
    rc_wp_free(m->wp);
    rc_pooler_close(m->pooler);
    rc_heads_close(m->heads);
    free(m->bridge_q);
    free(m->bridge_k);
    rc_qwen2_close(m->fwd);
    rc_qwen2_close(m->fwd_base);
    rc_exec_close(m->fwd_ex);
    rc_bpe_free(m->bpe);
    rc_blob_close(m->blob);
    recall_allocator al = m->al;
    al_free(&al, m->buffer);
    al_free(&al, m);
}

void recall_model_get_info(const recall_model *m, recall_model_info *out) { *out = m->info; }

/* ---- tokenizer --------------------------------------------------------------------------------- */

recall_status recall_tokenize(const recall_model *m, const char *text, size_t len, int add_special, int32_t **ids,
                              size_t *n_ids, recall_err *err) {
    if (!m || !ids || !n_ids || (!text && len))
        return rc_fail(err, RECALL_E_ARG, "recall_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    int32_t *raw;
    size_t n;
    RC_TRY(rc_bpe_encode(m->bpe, text ? text : "", len, add_special, &raw, &n, err));
    RC_TRY(adopt(m, raw, n * sizeof *raw, (void **)ids, err));
    *n_ids = n;
    return RECALL_OK;
}

recall_status recall_detokenize(const recall_model *m, const int32_t *ids, size_t n_ids, int skip_special,
                                char **text, size_t *len, recall_err *err) {
    if (!m || !text || (!ids && n_ids)) return rc_fail(err, RECALL_E_ARG, "recall_detokenize: NULL argument");
    *text = NULL;
    char *raw;
    size_t n;
    static const int32_t none[1] = {0};
    RC_TRY(rc_bpe_decode(m->bpe, ids ? ids : none, n_ids, skip_special, &raw, &n, err));
    RC_TRY(adopt(m, raw, n + 1, (void **)text, err));
    if (len) *len = n;
    return RECALL_OK;
}

recall_status recall_chat_segment(const recall_model *m, int with_eos, const char *user, const char *assistant,
                                  int32_t **ids, size_t *n_ids, recall_err *err) {
    if (!m || !user || !ids || !n_ids) return rc_fail(err, RECALL_E_ARG, "recall_chat_segment: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    int32_t *raw;
    size_t n;
    RC_TRY(rc_chat_segment(m->bpe, m->info.eos_id, with_eos, user, assistant, &raw, &n, err));
    RC_TRY(adopt(m, raw, n * sizeof *raw, (void **)ids, err));
    *n_ids = n;
    return RECALL_OK;
}

/* ---- decoder ----------------------------------------------------------------------------------- */

static recall_status check_ids(const recall_model *m, const int32_t *ids, size_t n, const char *what,
                               recall_err *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->info.vocab)
            return rc_fail(err, RECALL_E_ARG, "%s: token %ld at position %zu is outside the vocab (%d)", what,
                           (long)ids[i], i, m->info.vocab);
    return RECALL_OK;
}

/* recall_forward's decoder holding at least n positions, its cache empty. */
static recall_status fwd_ready(recall_model *m, size_t n, recall_err *err) {
    if (!m->fwd || rc_qwen2_max_ctx(m->fwd) < (int)n) {
        /* Grow in powers of two so that a caller walking up in length reopens O(log n) times. */
        int ctx = 64;
        while (ctx < (int)n) ctx = ctx > m->info.max_pos / 2 ? m->info.max_pos : ctx * 2;
        if (ctx > m->info.max_pos) ctx = m->info.max_pos;
        rc_qwen2_close(m->fwd);
        m->fwd = NULL;
        m->reserved -= m->fwd_reserved;
        m->fwd_reserved = 0;
        uint64_t need = qwen2_bytes(m->blob, ctx, m->kv, m->fwd_opts.numerics == RC_NUMERICS_Q8);
        RC_TRY(reserve(m, need, "the forward context", err));
        recall_status s = RECALL_OK;
        if (m->fwd_opts.numerics == RC_NUMERICS_Q8 && !m->fwd_base) { /* once: the packed weights */
            const uint64_t pack = q8_pack_bytes(m->blob);
            s = reserve(m, pack, "the q8 profile's packed decoder", err);
            if (!s) {
                if (!m->fwd_ex) s = rc_exec_open(&m->fwd_opts, &m->fwd_ex, err);
                if (!s) s = rc_qwen2_open_ex(m->blob, 1, m->fwd_ex, &m->fwd_base, err);
                if (s) m->reserved -= pack;
            }
        }
        if (!s)
            s = m->fwd_base ? rc_qwen2_open_shared(m->blob, ctx, m->fwd_base, &m->fwd, err)
                            : rc_qwen2_open(m->blob, ctx, &m->fwd, err);
        if (!s) s = rc_qwen2_set_kv_dtype(m->fwd, (rc_kv_dtype)m->kv, err);
        if (s) {
            rc_qwen2_close(m->fwd);
            m->fwd = NULL;
            m->reserved -= need;
            return s;
        }
        m->fwd_reserved = need;
    }
    return rc_qwen2_crop(m->fwd, 0, err);
}

/* The checks every decoder entry point makes on its input, before any compute. */
static recall_status check_input(const recall_model *m, const int32_t *ids, size_t n, size_t n_min, const char *what,
                                 recall_err *err) {
    if (n < n_min)
        return rc_fail(err, RECALL_E_ARG, "%s: %zu input ids, at least %zu needed", what, n, n_min);
    if (n > (size_t)m->info.max_pos) /* REQ-CTX-001: before any compute, both numbers named */
        return rc_fail(err, RECALL_E_LIMIT, "%s: %zu ids exceed the model's %d trained positions", what, n,
                       m->info.max_pos);
    return check_ids(m, ids, n, what, err);
}

recall_status recall_forward(recall_model *m, const int32_t *ids, size_t n, float *logits, size_t logits_len,
                             recall_err *err) {
    if (!m || !ids || !logits) return rc_fail(err, RECALL_E_ARG, "recall_forward: NULL argument");
    if (n == 0) return rc_fail(err, RECALL_E_ARG, "recall_forward: no input ids");
    if (logits_len < (size_t)m->info.vocab)
        return rc_fail(err, RECALL_E_ARG, "recall_forward: logits buffer of %zu floats, the vocab needs %d", logits_len,
                       m->info.vocab);
    RC_TRY(check_input(m, ids, n, 1, "recall_forward", err));
    RC_TRY(fwd_ready(m, n, err));
    rc_qwen2_fwd f = {0};
    f.ids = ids;
    f.n = (int)n;
    f.logits_last = logits;
    return rc_qwen2_forward(m->fwd, &f, err);
}

/* ---- the stages one at a time (API version 7) -------------------------------------------------- */

#define DIMS_END (offsetof(recall_model_dims, pooler_hidden) + sizeof(int))
#define FWD_OUT_MIN (offsetof(recall_forward_out, q_gate_len) + sizeof(size_t)) /* its first layout */
#define FWD_OUT_END FWD_OUT_MIN

void recall_model_get_dims2(const recall_model *m, recall_model_dims *out, size_t struct_size) {
    if (!m || !out || struct_size < sizeof(size_t)) return;
    recall_model_dims d = m->dims;
    d.struct_size = struct_size;
    memcpy(out, &d, struct_size < DIMS_END ? struct_size : DIMS_END);
}

void recall_forward_out_init2(recall_forward_out *o, size_t struct_size) {
    recall_forward_out d;
    memset(&d, 0, sizeof d);
    give_sized(o, struct_size, &d, FWD_OUT_END);
}

/* A caller's buffer of have elements where need are written: NULL / 0 is "not asked for". */
static recall_status check_out(const void *p, size_t have, uint64_t need, const char *what, const char *name,
                               recall_err *err) {
    if ((p == NULL) != (have == 0))
        return rc_fail(err, RECALL_E_ARG, "%s: %s is %s but its length is %zu", what, name, p ? "set" : "NULL", have);
    if (p && have < need)
        return rc_fail(err, RECALL_E_ARG, "%s: %s holds %zu floats, %llu needed", what, name, have,
                       (unsigned long long)need);
    return RECALL_OK;
}

recall_status recall_forward_capture(recall_model *m, const int32_t *ids, size_t n, const recall_forward_out *caller,
                                     recall_err *err) {
    static const char what[] = "recall_forward_capture";
    if (!m || !caller || (!ids && n)) return rc_fail(err, RECALL_E_ARG, "%s: NULL argument", what);
    recall_forward_out o;
    recall_forward_out_init2(&o, sizeof o);
    RC_TRY(take_sized(caller, FWD_OUT_MIN, FWD_OUT_END, &o, "recall_forward_out", err));
    RC_TRY(check_input(m, ids, n, 1, what, err));
    const recall_model_dims *d = &m->dims;
    const size_t V = (size_t)d->vocab, QD = (size_t)d->heads * (size_t)d->head_dim;
    RC_TRY(check_out(o.logits, o.logits_len, (uint64_t)n * V, what, "logits", err));
    RC_TRY(check_out(o.logits_last, o.logits_last_len, V, what, "logits_last", err));
    RC_TRY(check_out(o.hidden, o.hidden_len, ((size_t)d->layers + 1) * (size_t)d->hidden, what, "hidden", err));
    RC_TRY(check_out(o.q_gate, o.q_gate_len, (uint64_t)d->n_gate * n * QD, what, "q_gate", err));
    RC_TRY(fwd_ready(m, n, err));
    const rc_qwen2_config *c = rc_qwen2_cfg(m->fwd); /* the decoder's own shapes must be the ones named */
    if ((size_t)c->heads * (size_t)c->head_dim != QD || c->n_gate != d->n_gate || c->hidden != d->hidden)
        return rc_fail(err, RECALL_E_SHAPE, "%s: the decoder's shapes differ from the blob's keys", what);
    rc_qwen2_fwd f = {.ids = ids, .n = (int)n, .logits_all = o.logits, .logits_last = o.logits_last,
                      .hidden_last = o.hidden, .q_all = o.q_gate};
    if (o.logits && o.logits_last) f.logits_last = NULL; /* one lm_head pass; the last row copied */
    RC_TRY(rc_qwen2_forward(m->fwd, &f, err));
    if (o.logits && o.logits_last) memcpy(o.logits_last, o.logits + (n - 1) * V, V * sizeof(float));
    return RECALL_OK;
}

#define SCORE_ROWS 64 /* rows per forward call (as `recall score`): bounds the logits to 64 x vocab */

recall_status recall_score(recall_model *m, const int32_t *ids, size_t n, double *nll, int32_t *greedy,
                           size_t out_len, recall_err *err) {
    static const char what[] = "recall_score";
    if (!m || (!ids && n)) return rc_fail(err, RECALL_E_ARG, "%s: NULL argument", what);
    RC_TRY(check_input(m, ids, n, 2, what, err));
    if ((nll || greedy) && out_len < n - 1)
        return rc_fail(err, RECALL_E_ARG, "%s: outputs of %zu values, %zu positions are scored", what, out_len, n - 1);
    RC_TRY(fwd_ready(m, n, err));
    const size_t V = (size_t)m->info.vocab;
    float *logits = malloc(SCORE_ROWS * V * sizeof(float));
    if (!logits) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %d x %zu logits", what, SCORE_ROWS, V);
    recall_status s = RECALL_OK;
    for (size_t r0 = 0; !s && r0 < n; r0 += SCORE_ROWS) {
        const size_t nr = n - r0 < SCORE_ROWS ? n - r0 : SCORE_ROWS;
        rc_qwen2_fwd f = {.ids = ids + r0, .n = (int)nr, .logits_all = logits};
        s = rc_qwen2_forward(m->fwd, &f, err);
        for (size_t t = 0; !s && t < nr && r0 + t + 1 < n; t++) {
            int g;
            const double v = rc_row_nll(logits + t * V, V, ids[r0 + t + 1], &g);
            if (nll) nll[r0 + t] = v;
            if (greedy) greedy[r0 + t] = g;
        }
    }
    free(logits);
    return s;
}

static recall_status wp_ready(recall_model *m, recall_err *err) {
    if (m->wp) return RECALL_OK;
    size_t size;
    const void *sec = rc_blob_section(m->blob, RC_SECT_TOK_WORDPIECE, &size);
    if (!sec) return rc_fail(err, RECALL_E_MISSING, "%s: no WordPiece tokenizer section", rc_blob_path(m->blob));
    RC_TRY(reserve(m, sat_mul(4, size), "the WordPiece tokenizer", err));
    return rc_wp_load(sec, size, &m->wp, err);
}

recall_status recall_bert_tokenize(recall_model *m, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                                   recall_err *err) {
    if (!m || !ids || !n_ids || (!text && len))
        return rc_fail(err, RECALL_E_ARG, "recall_bert_tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    RC_TRY(wp_ready(m, err));
    int32_t *raw;
    size_t n;
    RC_TRY(rc_wp_encode(m->wp, text ? text : "", len, 1, &raw, &n, err));
    RC_TRY(adopt(m, raw, n * sizeof *raw, (void **)ids, err));
    *n_ids = n;
    return RECALL_OK;
}

recall_status recall_embed(recall_model *m, const int32_t *ids, size_t n, float *emb, size_t emb_len,
                           recall_err *err) {
    static const char what[] = "recall_embed";
    if (!m || !emb || (!ids && n)) return rc_fail(err, RECALL_E_ARG, "%s: NULL argument", what);
    if (!m->bert) {
        RC_TRY(reserve(m, bert_bytes(m->blob), "the BERT encoder", err));
        RC_TRY(rc_bert_open(m->blob, &m->bert, err));
    }
    const rc_bert_config *c = rc_bert_cfg(m->bert);
    const int most = c->max_seq < c->max_pos ? c->max_seq : c->max_pos;
    if (n < 1 || n > (size_t)most)
        return rc_fail(err, n ? RECALL_E_LIMIT : RECALL_E_ARG, "%s: %zu ids, the encoder takes 1 .. %d", what, n, most);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= c->vocab)
            return rc_fail(err, RECALL_E_ARG, "%s: token %ld at position %zu is outside the encoder's vocab (%d)", what,
                           (long)ids[i], i, c->vocab);
    RC_TRY(check_out(emb, emb_len, (size_t)c->hidden, what, "emb", err));
    return rc_bert_embed(m->bert, ids, (int)n, emb, err);
}

recall_status recall_pool(recall_model *m, const int32_t *ids, size_t n, float *sp, size_t sp_len, recall_err *err) {
    static const char what[] = "recall_pool";
    if (!m || !sp || (!ids && n)) return rc_fail(err, RECALL_E_ARG, "%s: NULL argument", what);
    RC_TRY(check_ids(m, ids, n, what, err));
    if (n > (size_t)INT_MAX / 2) return rc_fail(err, RECALL_E_LIMIT, "%s: %zu ids, this build takes %d", what, n, INT_MAX / 2);
    if (!m->pooler) RC_TRY(rc_pooler_open(m->blob, &m->pooler, err));
    const rc_pooler_config *c = rc_pooler_cfg(m->pooler);
    if (c->hidden != m->info.hidden)
        return rc_fail(err, RECALL_E_SHAPE, "%s: pooler hidden %d != qwen2 hidden %d", what, c->hidden, m->info.hidden);
    RC_TRY(check_out(sp, sp_len, (size_t)c->n_sp * (size_t)c->hidden, what, "sp", err));
    RC_TRY(fwd_ready(m, 1, err)); /* its embedding table: the rows the pooler reads */
    rc_qwen2_id_rows rows = {m->fwd, ids}; /* embedded a tile at a time: memory flat in n */
    const rc_pooler_src src = {rc_qwen2_embed_rows, &rows, NULL};
    return rc_pooler_run_src(m->pooler, &src, (int)n, sp, err);
}

static recall_status heads_ready(recall_model *m, recall_err *err) {
    if (m->heads) return RECALL_OK;
    RC_TRY(rc_heads_open(m->blob, &m->heads, err));
    const size_t d = (size_t)rc_bridge_d(m->heads);
    m->bridge_q = malloc(d * sizeof(float));
    m->bridge_k = malloc(d * sizeof(float));
    if (!m->bridge_q || !m->bridge_k) return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory for the bridge head");
    return RECALL_OK;
}

recall_status recall_gate(recall_model *m, const float *q, size_t q_len, float *score, int *fires, recall_err *err) {
    if (!m || !q || !score) return rc_fail(err, RECALL_E_ARG, "recall_gate: NULL argument");
    RC_TRY(heads_ready(m, err));
    if (q_len != (size_t)rc_gate_dim(m->heads))
        return rc_fail(err, RECALL_E_SHAPE, "recall_gate: a feature of %zu values, gate.dim is %d", q_len,
                       rc_gate_dim(m->heads));
    *score = rc_gate_score(m->heads, q);
    if (fires) *fires = rc_gate_fires(m->heads, *score);
    return RECALL_OK;
}

recall_status recall_bridge(recall_model *m, const float *q, size_t q_len, const float *emb, size_t emb_len,
                            float *score, recall_err *err) {
    if (!m || !q || !emb || !score) return rc_fail(err, RECALL_E_ARG, "recall_bridge: NULL argument");
    RC_TRY(heads_ready(m, err));
    if (q_len != (size_t)rc_bridge_qdim(m->heads) || emb_len != (size_t)rc_bridge_kdim(m->heads))
        return rc_fail(err, RECALL_E_SHAPE, "recall_bridge: a feature of %zu and an embedding of %zu values, "
                       "bridge.qdim is %d and bridge.kdim %d", q_len, emb_len, rc_bridge_qdim(m->heads),
                       rc_bridge_kdim(m->heads));
    rc_bridge_query(m->heads, q, m->bridge_q);
    rc_bridge_key(m->heads, emb, m->bridge_k);
    *score = rc_bridge_score(m->heads, m->bridge_q, m->bridge_k);
    return RECALL_OK;
}

/* ---- the recall loop --------------------------------------------------------------------------- */

/* recall_loop_opts onto the engine's rc_recall_opts (recall_loop.h: every option documented and
 * checked there), in both directions, as (public field, engine field); mode and arm are enums of
 * their own on each side, pooler_cache_mb is budgeted below. The version-1 struct has the first ones. */
#define LOOP_FIELDS_V1(X)                                                                                  \
    X(window, window) X(block, block) X(chunk, chunk) X(k, k) X(turn_cap, turn_cap) X(buf_min, buf_min)   \
    X(threshold, threshold) X(fire_once, fire_once) X(hysteresis, hysteresis) X(use_floor, use_floor)     \
    X(floor, floor) X(reference_schedule, reference_schedule) X(threads, exec.threads) X(simd, exec.simd)  \
    X(max_ctx, max_ctx) X(draft, draft)
#define LOOP_FIELDS(X) LOOP_FIELDS_V1(X) X(kv, kv) X(numerics, exec.numerics) X(edge, edge) X(span, span) X(rerank, rerank)

void recall_loop_opts_init2(const recall_model *m, recall_loop_opts *caller, size_t struct_size) {
    recall_loop_opts d;
    rc_recall_opts r;
    rc_recall_defaults(m->blob, &r);
    memset(&d, 0, sizeof d);
#define FROM_ENGINE(pub, eng) d.pub = r.eng;
    LOOP_FIELDS(FROM_ENGINE)
#undef FROM_ENGINE
    d.mode = (recall_mode)r.mode;
    d.arm = (recall_arm)r.arm;
    give_sized(caller, struct_size, &d, LOOP_OPTS_END);
}

/* The one place the public options become the engine's (then checked by rc_recall_opts_check). */
static void loop_to_engine(const recall_model *m, const recall_loop_opts *o, rc_recall_opts *r) {
    rc_recall_defaults(m->blob, r);
#define TO_ENGINE(pub, eng) r->eng = o->pub;
    LOOP_FIELDS(TO_ENGINE)
#undef TO_ENGINE
    r->mode = (rc_loop_mode)o->mode;
    r->arm = (rc_arm)o->arm;
    r->pooler_cache_mb = o->pooler_cache_mb;
}

/* The memory a loop of checked options needs (the bounds of rc_recall_opts_check keep every
 * product inside int); the instance context of FULL is checked here, before anything is allocated. */
static recall_status loop_estimate(const recall_model *m, const rc_recall_opts *o, uint64_t *bytes,
                                   recall_err *err) {
    const int lim = 1 << 20;
    int64_t n_sp = o->arm == RC_ARM_FULL ? 0 : cfg_i64(m->blob, "pooler.n_sp", 0);
    if (n_sp < 0 || n_sp > lim) n_sp = lim;
    int64_t ctx = rc_recall_positions(o, n_sp); /* the same positions rc_recall_open sizes */
    if (o->max_ctx < 0 || o->max_ctx > m->info.max_pos) /* REQ-CTX-001: before anything is allocated */
        return rc_fail(err, o->max_ctx < 0 ? RECALL_E_ARG : RECALL_E_LIMIT,
                       "recall_loop_open: a context of %d positions was requested but the model was trained on %d",
                       o->max_ctx, m->info.max_pos);
    if (o->arm == RC_ARM_FULL) ctx = o->max_ctx > 0 ? o->max_ctx : m->info.max_pos;
    const int q8 = o->exec.numerics == RC_NUMERICS_Q8;
    uint64_t b = qwen2_bytes(m->blob, ctx, (recall_kv)o->kv, q8);
    if (o->arm == RC_ARM_RC_BGE && o->mode == RC_MODE_FAITHFUL)
        b = sat_add(b, qwen2_bytes(m->blob, o->block, (recall_kv)o->kv, q8));
    if (q8) b = sat_add(b, q8_pack_bytes(m->blob)); /* shared by the seal context */
    if (o->arm == RC_ARM_RC_BGE) b = sat_add(b, bert_bytes(m->blob)); /* the encoder a fire runs */
    if (o->draft > 0) /* the verify forward's logits of up to min(draft + 1, chunk) rows */
        b = sat_add(b, (uint64_t)(o->draft < o->chunk ? o->draft + 1 : o->chunk) * (uint64_t)m->info.vocab * 4u);
    *bytes = b;
    return RECALL_OK;
}

recall_status recall_loop_open2(recall_model *m, const recall_loop_opts *caller, recall_loop **out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "recall_loop_open: out is NULL");
    *out = NULL;
    if (!m) return rc_fail(err, RECALL_E_ARG, "recall_loop_open: model is NULL");
    recall_loop_opts opts, *o = &opts;
    recall_loop_opts_init2(m, &opts, sizeof opts);
    if (caller) RC_TRY(take_sized(caller, LOOP_OPTS_MIN, LOOP_OPTS_END, &opts, "recall_loop_opts", err));
    rc_recall_opts r;
    loop_to_engine(m, o, &r);
    RC_TRY(rc_recall_opts_check(&r, err));
    uint64_t need = 0;
    RC_TRY(loop_estimate(m, &r, &need, err));
    /* The pooler's cache is optional (the same bits at any size): it is counted in the
     * reservation and, under max_memory, gets at most what the limit leaves. */
    uint64_t cache = o->pooler_cache_mb < 0 || o->reference_schedule || o->arm == RECALL_ARM_FULL ? 0
                     : (uint64_t)(o->pooler_cache_mb ? o->pooler_cache_mb : RC_POOLER_CACHE_MB) << 20;
    if (m->max_memory) {
        const uint64_t used = sat_add(m->reserved, need);
        const uint64_t room = m->max_memory > used ? m->max_memory - used : 0;
        if (cache > room) cache = room >> 20 << 20;
    }
    RC_TRY(reserve(m, need, "the recall loop (KV caches and scratch)", err));
    if (cache) m->reserved += cache;
    need += cache;
    recall_loop *l = al_alloc(&m->al, sizeof *l);
    if (!l) {
        m->reserved -= need;
        return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    }
    memset(l, 0, sizeof *l);
    l->m = m;
    l->o = *o;
    l->reserved = need;
    r.pooler_cache_mb = cache ? (int)(cache >> 20) : -1;
    recall_status s = rc_recall_open(m->blob, &r, &l->r, err);
    if (s) {
        m->reserved -= need;
        al_free(&m->al, l);
        return s;
    }
    m->n_loops++;
    *out = l;
    return RECALL_OK;
}

void recall_loop_close(recall_loop *l) {
    if (!l) return;
    if (l->has_last) rc_turn_free(&l->last);
    rc_recall_close(l->r);
    l->m->reserved -= l->reserved;
    l->m->n_loops--;
    recall_model *m = l->m;
    al_free(&m->al, l);
}

void recall_loop_reset(recall_loop *l) {
    if (l) rc_recall_forget(l->r);
}

typedef struct {
    recall_event_fn fn;
    void *ctx;
} event_bridge;

/* Translates the engine's trace records into the public event struct (no allocation). */
static int on_engine_event(void *ctx, const rc_event *ev) {
    const event_bridge *br = ctx;
    recall_event e;
    memset(&e, 0, sizeof e);
    switch (ev->kind) {
    case RC_EV_TOKEN:
        e.kind = RECALL_EV_TOKEN;
        e.token = ev->token;
        break;
    case RC_EV_REBUILD: {
        const rc_rebuild_rec *r = ev->rec;
        e.kind = RECALL_EV_REBUILD;
        e.c0 = r->c0;
        e.has_sp = r->has_sp;
        e.inj_len = r->inj_len;
        e.window_len = r->window_len;
        e.reused = r->reused;
        break;
    }
    case RC_EV_GATE: {
        const rc_gate_rec *g = ev->rec;
        e.kind = RECALL_EV_GATE;
        e.c0 = g->c0;
        e.score = g->score;
        e.fired = g->fired;
        break;
    }
    case RC_EV_FIRE: {
        const rc_fire_rec *f = ev->rec;
        e.kind = RECALL_EV_FIRE;
        e.c0 = f->c0;
        e.score = f->score;
        e.fired = 1;
        e.injected = f->injected;
        e.n_candidates = f->ncand;
        e.ids = f->rid;
        e.n_ids = f->nrid;
        break;
    }
    default: return 0;
    }
    return br->fn(br->ctx, &e);
}

recall_status recall_loop_draft_stats(const recall_loop *l, long *drafted, long *accepted, recall_err *err) {
    if (!l || !drafted || !accepted) return rc_fail(err, RECALL_E_ARG, "recall_loop_draft_stats: NULL argument");
    *drafted = l->drafted;
    *accepted = l->accepted;
    return RECALL_OK;
}

recall_status recall_turn(recall_loop *l, const int32_t *feed, size_t n_feed, recall_event_fn on_event, void *ctx,
                          recall_reply *out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "recall_turn: out is NULL");
    memset(out, 0, sizeof *out);
    if (!l || (!feed && n_feed)) return rc_fail(err, RECALL_E_ARG, "recall_turn: NULL argument");
    if (n_feed == 0) return rc_fail(err, RECALL_E_ARG, "recall_turn: empty feed (start with recall_chat_segment)");
    /* The loop's history buffer holds feed + reply + one chunk in int positions. */
    const size_t reply = (size_t)l->o.turn_cap + (size_t)l->o.chunk;
    size_t hard = reply < (size_t)INT_MAX / 8 ? (size_t)INT_MAX / 8 - reply : 0;
    if (l->o.max_feed && n_feed > l->o.max_feed)
        return rc_fail(err, RECALL_E_LIMIT, "recall_turn: the conversation has %zu tokens, the limit is %zu", n_feed,
                       l->o.max_feed);
    if (n_feed > hard)
        return rc_fail(err, RECALL_E_LIMIT, "recall_turn: the conversation has %zu tokens, this build holds %zu",
                       n_feed, hard);
    if (l->o.arm == RECALL_ARM_FULL) {
        int cap = l->o.max_ctx > 0 ? l->o.max_ctx : l->m->info.max_pos; /* the instance context */
        size_t need = 1 + n_feed + (size_t)l->o.turn_cap + 1;
        if (need > (size_t)cap)
            return rc_fail(err, RECALL_E_LIMIT,
                           "recall_turn: the FULL arm needs %zu positions (BOS + %zu history + %d reply + 1), the "
                           "context holds %d",
                           need, n_feed, l->o.turn_cap, cap);
    }
    RC_TRY(check_ids(l->m, feed, n_feed, "recall_turn", err));
    if (l->has_last) { /* a turn that fails leaves no record behind */
        rc_turn_free(&l->last);
        l->has_last = 0;
    }
    event_bridge br = {on_event, ctx};
    rc_turn t;
    recall_status s = rc_recall_reply(l->r, feed, (int)n_feed, on_event ? on_engine_event : NULL, &br, &t, err);
    if (s) {
        rc_turn_free(&t);
        return s;
    }
    size_t n = t.n_reply > 0 ? (size_t)t.n_reply : 0;
    out->ids = al_alloc(&l->m->al, n * sizeof *out->ids);
    if (!out->ids) {
        rc_turn_free(&t);
        return rc_fail(err, RECALL_E_NOMEM, "recall_turn: out of memory for a %zu-token reply", n);
    }
    if (n) memcpy(out->ids, t.reply, n * sizeof *out->ids);
    out->n_ids = n;
    out->n_gates = t.n_gates;
    out->n_fires = t.n_fires;
    out->n_rebuilds = t.n_rebuilds;
    out->min_margin = t.min_margin;
    l->drafted = t.drafted;
    l->accepted = t.accepted;
    l->last = t; /* kept for recall_turn_trace */
    l->has_last = 1;
    return RECALL_OK;
}

recall_status recall_turn_trace(const recall_loop *l, char **json, size_t *len, recall_err *err) {
    if (!l || !json) return rc_fail(err, RECALL_E_ARG, "recall_turn_trace: NULL argument");
    *json = NULL;
    if (len) *len = 0;
    if (!l->has_last)
        return rc_fail(err, RECALL_E_ARG, "recall_turn_trace: the loop has no finished turn (none yet, or the last "
                       "one failed or was cancelled)");
    char *raw = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&raw, &n);
    if (!f) return rc_fail(err, RECALL_E_NOMEM, "recall_turn_trace: out of memory");
    fputc('{', f);
    rc_turn_json_fields(f, &l->last, l->m->bpe, l->o.edge == RECALL_EDGE_INJECT);
    fputc('}', f);
    if (fclose(f) != 0 || !raw) {
        free(raw);
        return rc_fail(err, RECALL_E_NOMEM, "recall_turn_trace: out of memory");
    }
    RC_TRY(adopt(l->m, raw, n + 1, (void **)json, err));
    if (len) *len = n;
    return RECALL_OK;
}

void recall_reply_free(const recall_loop *l, recall_reply *r) {
    if (!r) return;
    if (l) al_free(&l->m->al, r->ids);
    else free(r->ids);
    memset(r, 0, sizeof *r);
}

/* ---- scoring ------------------------------------------------------------------------------------ */

int recall_eval_recall_ok(const char *reply_text, const char *value) {
    return rc_eval_contains(reply_text, value, ", ");
}

int recall_eval_retrieved_ok(const char *block_text, const char *value) {
    return rc_eval_contains(block_text, value, ",");
}

int recall_longctx_exact(const char *reply_text, const char *expected) {
    return rc_lctx_answer(reply_text, expected, NULL, 0);
}

/* ---- API version 1: the plain symbols, for programs built against its header ----------------------
 * Their option structs had no struct_size (tests/abi_v1/recall.h holds that header); each entry
 * point converts them into the current options and calls the version-2 one. Kept as long as the
 * soname is librecall.so.0 (docs/API.md). */
#undef recall_open_opts_init
#undef recall_open
#undef recall_open_mem
#undef recall_loop_opts_init
#undef recall_loop_open

typedef struct {
    unsigned flags;
    uint64_t max_memory;
    const recall_allocator *allocator;
    const char *rope_scaling;
} v1_open_opts;

typedef struct {
    int window, block, chunk, k, turn_cap, buf_min;
    float threshold;
    recall_mode mode;
    recall_arm arm;
    int fire_once, hysteresis, use_floor;
    float floor;
    int reference_schedule;
    size_t max_feed;
    int threads;
    const char *simd;
    int max_ctx;
    int draft;
} v1_loop_opts;

void recall_open_opts_init(v1_open_opts *o);
recall_status recall_open(const char *path, const v1_open_opts *v, recall_model **out, recall_err *err);
recall_status recall_open_mem(const void *buf, size_t len, const v1_open_opts *v, recall_model **out,
                              recall_err *err);
void recall_loop_opts_init(const recall_model *m, v1_loop_opts *o);
recall_status recall_loop_open(recall_model *m, const v1_loop_opts *v, recall_loop **out, recall_err *err);

void recall_open_opts_init(v1_open_opts *o) { memset(o, 0, sizeof *o); }

static const recall_open_opts *from_v1_open(const v1_open_opts *v, recall_open_opts *o) {
    if (!v) return NULL;
    recall_open_opts_init2(o, sizeof *o);
    o->flags = v->flags;
    o->max_memory = v->max_memory;
    o->allocator = v->allocator;
    o->rope_scaling = v->rope_scaling;
    return o;
}

recall_status recall_open(const char *path, const v1_open_opts *v, recall_model **out, recall_err *err) {
    recall_open_opts o;
    return recall_open2(path, from_v1_open(v, &o), out, err);
}

recall_status recall_open_mem(const void *buf, size_t len, const v1_open_opts *v, recall_model **out,
                              recall_err *err) {
    recall_open_opts o;
    return recall_open_mem2(buf, len, from_v1_open(v, &o), out, err);
}

/* Every field of version 1 (the current struct has them all, under the same names and types). */
#define V1_LOOP_FIELDS(X) LOOP_FIELDS_V1(X) X(mode, mode) X(arm, arm) X(max_feed, max_feed)

void recall_loop_opts_init(const recall_model *m, v1_loop_opts *v) {
    recall_loop_opts o;
    recall_loop_opts_init2(m, &o, sizeof o);
    memset(v, 0, sizeof *v);
#define TO_V1(f, eng) v->f = o.f;
    V1_LOOP_FIELDS(TO_V1)
#undef TO_V1
}

recall_status recall_loop_open(recall_model *m, const v1_loop_opts *v, recall_loop **out, recall_err *err) {
    if (!v || !m) return recall_loop_open2(m, NULL, out, err);
    recall_loop_opts o;
    recall_loop_opts_init2(m, &o, sizeof o);
#define FROM_V1(f, eng) o.f = v->f;
    V1_LOOP_FIELDS(FROM_V1)
#undef FROM_V1
    return recall_loop_open2(m, &o, out, err);
}
