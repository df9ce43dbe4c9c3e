/* cli_model.c - model subcommands for inspection and golden comparison:
 *   recall forward BLOB --ids '[1,2,3]' --dump OUT.npz   logits [T,V], hidden_last [NL+1,H],
 *                                                        q_layers [n_gate,T,NH*D], ids [T]
 *   recall embed   BLOB --file TEXT --dump OUT.npz       ids [n], emb [H] (bge CLS, L2-normalised)
 *   recall pool    BLOB --ids '[...]' --dump OUT.npz     sp [n_sp,H] from the Qwen2 embeddings
 * forward and pool also take --tokens-file F (the same ids from a file); forward adds --ctx N (the
 * instance context), --rope-scaling, and --decode-from N (later ids one call each: the decode path)
 * with --kv-pages PAGE:BUDGET (kv_pages.h). Every option: the tables in cli_opts.c.
 *   recall heads   BLOB --q F.npy [--emb E.npy]          prints the gate score and bridge score
 * Only this file prints; the library returns errors as values. */
#include "bert.h"
#include "blob.h"
#include "cli.h"
#include "compare.h"
#include "heads.h"
#include "json.h"
#include "npy.h"
#include "pooler.h"
#include "qwen2.h"
#include "tokenize_wordpiece.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static recall_status read_npy_f32(const char *path, float **out, size_t *n, recall_err *err) {
    char *buf = NULL;
    size_t len = 0;
    rc_npy a;
    RC_TRY(rc_read_file(path, &buf, &len, err));
    recall_status st = rc_npy_parse(buf, len, path, &a, err);
    if (!st) {
        st = rc_npy_to_f32(&a, path, out, err);
        *n = (size_t)a.numel;
        rc_npy_free(&a);
    }
    free(buf);
    return st;
}

/* The forward itself: ids[0..n0) in one call, then one call per id (the decode path); every
 * row's logits into logits[T][V], its gate-layer q into q[n_gate][T][QD], hid at the last row. */
static recall_status forward_rows(rc_qwen2 *m, const int32_t *ids, int T, int n0, float *logits, float *hid, float *q,
                                  recall_err *err) {
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    const size_t V = (size_t)c->vocab, QD = (size_t)c->heads * (size_t)c->head_dim;
    if (n0 >= T) {
        rc_qwen2_fwd f = {.ids = ids, .n = T, .logits_all = logits, .hidden_last = hid, .q_all = q};
        return rc_qwen2_forward(m, &f, err);
    }
    float *q0 = malloc(((size_t)c->n_gate * (size_t)(n0 ? n0 : 1) * QD) * sizeof(float));
    if (!q0) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    recall_status st = RECALL_OK;
    if (n0) {
        rc_qwen2_fwd f = {.ids = ids, .n = n0, .logits_all = logits, .q_all = q0};
        st = rc_qwen2_forward(m, &f, err);
        for (int g = 0; !st && g < c->n_gate; g++)
            memcpy(q + (size_t)g * T * QD, q0 + (size_t)g * n0 * QD, (size_t)n0 * QD * sizeof(float));
    }
    for (int t = n0; !st && t < T; t++) {
        rc_qwen2_fwd f = {.ids = ids + t, .n = 1, .logits_last = logits + (size_t)t * V,
                          .hidden_last = t == T - 1 ? hid : NULL};
        st = rc_qwen2_forward(m, &f, err);
        for (int g = 0; !st && g < c->n_gate; g++)
            memcpy(q + ((size_t)g * T + (size_t)t) * QD, rc_qwen2_gate_q(m) + (size_t)g * QD, QD * sizeof(float));
    }
    free(q0);
    return st;
}

int cli_forward(const cli_args *a) {
    if (!a->ids && !a->tokens_file) return cli_usage_error("forward", "--ids or --tokens-file is required");
    if (a->kvp.random && !a->kvp.page) return cli_usage_error("forward", "--kv-pages-random needs --kv-pages PAGE:BUDGET");
    const long n0 = a->decode_from;
    if (a->kvp.page && n0 < 0)
        return cli_usage_error("forward", "--kv-pages acts on decode steps only: add --decode-from N");
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *ex = NULL;
    rc_qwen2 *m = NULL;
    int32_t *ids = NULL;
    int T = 0, rc = 1;
    float *logits = NULL, *hid = NULL, *q = NULL;
    rc_npz_writer *w = NULL;
    if (cli_get_ids(a, &ids, &T, &err) || cli_blob_open(a, a->pos[0], 0, &b, &err)) goto out;
    if (T < 1) {
        rc_fail(&err, RECALL_E_ARG, "%s: at least one id needed", cli_ids_source(a));
        goto out;
    }
    const int ctx = a->ctx ? a->ctx : T; /* the instance context; rc_qwen2_open names the trained limit */
    if (T > ctx) {
        rc_fail(&err, RECALL_E_LIMIT, "%d positions requested, the context holds %d (--ctx)", T, ctx);
        goto out;
    }
    if (cli_exec_open(a, &ex, &err) || rc_qwen2_open_ex(b, ctx, ex, &m, &err) ||
        rc_qwen2_set_kv_dtype(m, (rc_kv_dtype)a->loop.kv, &err) || rc_qwen2_set_kv_pages(m, &a->kvp, &err))
        goto out;
    cli_banner("forward", ex->k.name, ex->threads);
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    const size_t V = (size_t)c->vocab, H = (size_t)c->hidden, QD = (size_t)c->heads * (size_t)c->head_dim;
    logits = malloc((size_t)T * V * sizeof(float));
    hid = malloc(((size_t)c->layers + 1) * H * sizeof(float));
    q = malloc(((size_t)c->n_gate * (size_t)T * QD + 1) * sizeof(float));
    if (!logits || !hid || !q) {
        rc_fail(&err, RECALL_E_NOMEM, "out of memory");
        goto out;
    }
    if (forward_rows(m, ids, T, n0 < 0 || n0 > T ? T : (int)n0, logits, hid, q, &err)) goto out;
    {
        char prof[320];
        rc_rope_describe(&c->rope, c->max_pos, prof, sizeof prof);
        printf("context %d of %d trained positions, rope %s\n", rc_qwen2_max_ctx(m), c->trained_pos, prof);
        cli_numerics_describe(m, prof, sizeof prof);
        printf("numerics %s\n", prof);
        if (n0 >= 0 && n0 < T) {
            char kvp[128];
            cli_kv_pages_describe(&a->kvp, kvp, sizeof kvp);
            printf("prefill %ld ids, decode %ld, attention %s\n", n0, T - n0, kvp);
        }
    }
    printf("kv %s\n", rc_kv_dtype_name(rc_qwen2_kv_dtype(m)));
    printf("kv_bytes %zu (%d positions allocated for %d in use)\n", rc_qwen2_kv_bytes(m), rc_qwen2_kv_capacity(m),
           rc_qwen2_n_cached(m));
    if (a->dump) {
        int64_t s1[1] = {T}, s2[2] = {T, (int64_t)V}, s3[2] = {c->layers + 1, (int64_t)H},
                s4[3] = {c->n_gate, T, (int64_t)QD}, s5[1] = {1};
        const int32_t kv_bits[1] = {rc_qwen2_kv_dtype(m) == RC_KV_DT_F16 ? 16 : 32}; /* recall compare names it */
        if (rc_npz_writer_new(&w, &err) || rc_npz_writer_add(w, "ids", RC_NPY_I32, 1, s1, ids, &err) ||
            rc_npz_writer_add(w, "logits", RC_NPY_F32, 2, s2, logits, &err) ||
            rc_npz_writer_add(w, "hidden_last", RC_NPY_F32, 2, s3, hid, &err) ||
            rc_npz_writer_add(w, "q_layers", RC_NPY_F32, 3, s4, q, &err) ||
            rc_npz_writer_add(w, RC_CMP_KV_ARRAY, RC_NPY_I32, 1, s5, kv_bits, &err))
            goto out;
        /* a q8 dump says so (compare names it); an exact dump keeps its arrays */
        const int32_t q8flag = 1;
        const int64_t s0[1] = {1};
        if (rc_qwen2_numerics(m) == RC_NUMERICS_Q8 && rc_npz_writer_add(w, "numerics_q8", RC_NPY_I32, 1, s0, &q8flag, &err))
            goto out;
        if (rc_npz_writer_write(w, a->dump, &err)) goto out;
    } else {
        const float *last = logits + (size_t)(T - 1) * V;
        size_t best = 0;
        for (size_t i = 1; i < V; i++)
            if (last[i] > last[best]) best = i;
        printf("argmax %zu logit %.9g\n", best, (double)last[best]);
    }
    rc = 0;
out:
    if (rc) cli_fail("forward", &err);
    rc_npz_writer_free(w);
    free(logits);
    free(hid);
    free(q);
    free(ids);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return rc;
}

int cli_pool(const cli_args *a) {
    if (!a->ids && !a->tokens_file) return cli_usage_error("pool", "--ids or --tokens-file is required");
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *ex = NULL;
    rc_qwen2 *m = NULL;
    rc_pooler *p = NULL;
    int32_t *ids = NULL;
    int L = 0, rc = 1;
    float *sp = NULL;
    rc_npz_writer *w = NULL;
    if (cli_get_ids(a, &ids, &L, &err) || cli_blob_open(a, a->pos[0], 0, &b, &err) || cli_exec_open(a, &ex, &err) ||
        rc_qwen2_open_ex(b, 1, ex, &m, &err) || rc_pooler_open_ex(b, ex, &p, &err))
        goto out;
    cli_banner("pool", ex->k.name, ex->threads);
    const rc_pooler_config *c = rc_pooler_cfg(p);
    if (c->hidden != rc_qwen2_cfg(m)->hidden) {
        rc_fail(&err, RECALL_E_SHAPE, "pooler hidden %d != qwen2 hidden %d", c->hidden, rc_qwen2_cfg(m)->hidden);
        goto out;
    }
    sp = malloc((size_t)c->n_sp * (size_t)c->hidden * sizeof(float));
    if (!sp) {
        rc_fail(&err, RECALL_E_NOMEM, "out of memory");
        goto out;
    }
    rc_qwen2_id_rows rows = {m, ids}; /* embedded a tile at a time: memory flat in L */
    const rc_pooler_src src = {rc_qwen2_embed_rows, &rows, NULL};
    if (rc_pooler_run_src(p, &src, L, sp, &err)) goto out;
    if (a->dump) {
        int64_t s[2] = {c->n_sp, c->hidden};
        if (rc_npz_writer_new(&w, &err) || rc_npz_writer_add(w, "sp", RC_NPY_F32, 2, s, sp, &err) ||
            rc_npz_writer_write(w, a->dump, &err))
            goto out;
    } else {
        for (int r = 0; r < c->n_sp; r++) {
            double s = 0;
            for (int i = 0; i < c->hidden; i++) s += (double)sp[(size_t)r * c->hidden + i] * sp[(size_t)r * c->hidden + i];
            printf("row %d norm %.7f\n", r, s > 0 ? sqrt(s) : 0.0);
        }
    }
    rc = 0;
out:
    if (rc) cli_fail("pool", &err);
    rc_npz_writer_free(w);
    free(sp);
    free(ids);
    rc_pooler_close(p);
    rc_qwen2_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return rc;
}

int cli_embed(const cli_args *a) {
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_exec *ex = NULL;
    rc_bert *m = NULL;
    rc_wp *tok = NULL;
    char *text = NULL;
    size_t tlen = 0, n = 0, secsz = 0;
    int32_t *ids = NULL;
    float *emb = NULL;
    int rc = 1;
    rc_npz_writer *w = NULL;
    if (rc_read_file(a->file, &text, &tlen, &err) || cli_blob_open(a, a->pos[0], 0, &b, &err) ||
        cli_exec_open(a, &ex, &err) || rc_bert_open_ex(b, ex, &m, &err))
        goto out;
    cli_banner("embed", ex->k.name, ex->threads);
    const void *sec = rc_blob_section(b, RC_SECT_TOK_WORDPIECE, &secsz);
    if (!sec) {
        rc_fail(&err, RECALL_E_MISSING, "%s: no WordPiece tokenizer section", a->pos[0]);
        goto out;
    }
    if (rc_wp_load(sec, secsz, &tok, &err) || rc_wp_encode(tok, text, tlen, 1, &ids, &n, &err)) goto out;
    const int H = rc_bert_cfg(m)->hidden;
    emb = malloc((size_t)H * sizeof(float));
    if (!emb) {
        rc_fail(&err, RECALL_E_NOMEM, "out of memory");
        goto out;
    }
    if (rc_bert_embed(m, ids, (int)n, emb, &err)) goto out;
    if (a->dump) {
        int64_t s1[1] = {(int64_t)n}, s2[1] = {H};
        if (rc_npz_writer_new(&w, &err) || rc_npz_writer_add(w, "ids", RC_NPY_I32, 1, s1, ids, &err) ||
            rc_npz_writer_add(w, "emb", RC_NPY_F32, 1, s2, emb, &err) || rc_npz_writer_write(w, a->dump, &err))
            goto out;
    } else {
        printf("ids");
        for (size_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
        printf("\nemb[0..4]");
        for (int i = 0; i < H && i < 4; i++) printf(" %.7g", (double)emb[i]);
        printf("\n");
    }
    rc = 0;
out:
    if (rc) cli_fail("embed", &err);
    rc_npz_writer_free(w);
    free(emb);
    free(ids);
    free(text);
    rc_wp_free(tok);
    rc_bert_close(m);
    rc_exec_close(ex);
    rc_blob_close(b);
    return rc;
}

int cli_heads(const cli_args *a) {
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_heads *h = NULL;
    float *f = NULL, *e = NULL, *qv = NULL, *kv = NULL;
    size_t nf = 0, ne = 0;
    int rc = 1;
    if (cli_blob_open(a, a->pos[0], 0, &b, &err) || rc_heads_open(b, &h, &err) || read_npy_f32(a->q, &f, &nf, &err))
        goto out;
    if (nf != (size_t)rc_gate_dim(h)) {
        rc_fail(&err, RECALL_E_SHAPE, "%s: %zu values, gate.dim is %d", a->q, nf, rc_gate_dim(h));
        goto out;
    }
    float s = rc_gate_score(h, f);
    printf("gate %.9g fire %d\n", (double)s, rc_gate_fires(h, s));
    if (a->emb) {
        if (read_npy_f32(a->emb, &e, &ne, &err)) goto out;
        if (ne != (size_t)rc_bridge_kdim(h)) {
            rc_fail(&err, RECALL_E_SHAPE, "%s: %zu values, bridge.kdim is %d", a->emb, ne, rc_bridge_kdim(h));
            goto out;
        }
        qv = malloc((size_t)rc_bridge_d(h) * sizeof(float));
        kv = malloc((size_t)rc_bridge_d(h) * sizeof(float));
        if (!qv || !kv) {
            rc_fail(&err, RECALL_E_NOMEM, "out of memory");
            goto out;
        }
        rc_bridge_query(h, f, qv);
        rc_bridge_key(h, e, kv);
        printf("bridge %.9g\n", (double)rc_bridge_score(h, qv, kv));
    }
    rc = 0;
out:
    if (rc) cli_fail("heads", &err);
    free(f);
    free(e);
    free(qv);
    free(kv);
    rc_heads_close(h);
    rc_blob_close(b);
    return rc;
}
