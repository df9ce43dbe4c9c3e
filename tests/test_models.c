/* test_models.c - the model forwards (qwen2, pooler, bert, gate/bridge heads) against the
 * independent worldA goldens (HF transformers fp32), plus the bitwise determinism contracts:
 * bf16 blob == f32 blob, token-by-token decode == one-shot prefill, crop + re-prefill == fresh. */
#include "blob.h"
#include "json.h"
#include "nf4.h"
#include "fixture.h"
#include "heads.h"
#include "bert.h"
#include "ops.h"
#include "pooler.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WA "tests/golden/worldA/"

static float *nanbuf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* max |got - want| / max |want| (NaN-propagating: a NaN in got gives +inf) */
static double rel_err(const float *got, const float *want, size_t n) {
    double md = 0, mw = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (d != d) d = INFINITY;
        if (d > md) md = d;
        if (fabs(want[i]) > mw) mw = fabs(want[i]);
    }
    return mw > 0 ? md / mw : md;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct {
    double logits, hidden, q, embeds_logits, embeds_q, embeds_sp;
    int greedy_ok;
} qwen2_errs;

/* rel_err of got against the golden array `key` (its numel must be n; n 0: not checked). */
static double golden_err(const char *golden, const char *key, const float *got, size_t n) {
    size_t ng;
    float *g = fixture_npz_f32(golden, key, &ng);
    if (n) cr_assert_eq(ng, n);
    const double e = rel_err(got, g, ng);
    free(g);
    return e;
}

/* Runs every qwen2 golden of one npz against one blob. */
static qwen2_errs check_qwen2(const char *weights, const char *golden) {
    qwen2_errs e = {0};
    rc_blob *b = fixture_open_worldA(weights);
    rc_qwen2 *m = fixture_qwen2(b, 128);
    recall_err err = {0};
    const rc_qwen2_config *c = rc_qwen2_cfg(m);
    size_t n_ids;
    int *ids_i = fixture_npz_i32(golden, "ids", &n_ids);
    int T = (int)n_ids, V = c->vocab, H = c->hidden, QD = c->heads * c->head_dim;
    cr_assert_eq(T, 37);
    int32_t ids[64];
    for (int t = 0; t < T; t++) ids[t] = ids_i[t];
    float *logits = nanbuf((size_t)T * V), *hid = nanbuf((size_t)(c->layers + 1) * H),
          *q = nanbuf((size_t)3 * T * QD), *last = nanbuf((size_t)V);
    rc_qwen2_fwd f = {.ids = ids, .n = T, .logits_all = logits, .logits_last = last, .hidden_last = hid, .q_all = q};
    cr_assert_eq(c->n_gate, 3);
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    e.logits = golden_err(golden, "logits", logits, (size_t)T * V);
    e.hidden = golden_err(golden, "hidden_last", hid, (size_t)(c->layers + 1) * H);
    e.q = golden_err(golden, "q_layers", q, (size_t)3 * T * QD);
    cr_assert_eq(memcmp(last, logits + (size_t)(T - 1) * V, (size_t)V * 4), 0);
    /* the gate capture = q_all rows of the last position */
    for (int gi = 0; gi < 3; gi++)
        cr_assert_eq(memcmp(rc_qwen2_gate_q(m) + (size_t)gi * QD, q + ((size_t)gi * T + T - 1) * QD, (size_t)QD * 4), 0);
    /* greedy continuation with the cache */
    size_t ng;
    int *greedy = fixture_npz_i32(golden, "greedy", &ng);
    e.greedy_ok = 1;
    for (size_t i = 0; i < ng; i++) {
        int tok = argmax(last, V);
        if (tok != greedy[i]) {
            e.greedy_ok = 0;
            break;
        }
        int32_t id = tok;
        rc_qwen2_fwd d = {.ids = &id, .n = 1, .logits_last = last};
        cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
    }
    free(greedy);
    /* embeds path: BOS primed, then [embeds_sp (golden pooler output), embed(ids[30:])] */
    cr_assert_eq(rc_qwen2_crop(m, 0, &err), RECALL_OK);
    int32_t bos = ids[0];
    rc_qwen2_fwd pb = {.ids = &bos, .n = 1};
    cr_assert_eq(rc_qwen2_forward(m, &pb, &err), RECALL_OK, "%s", err.msg);
    size_t nsp;
    float *sp = fixture_npz_f32(golden, "embeds_sp", &nsp);
    int nspr = (int)(nsp / H), ne = nspr + (T - 30);
    float *emb = nanbuf((size_t)ne * H);
    memcpy(emb, sp, nsp * 4);
    cr_assert_eq(rc_qwen2_embed(m, ids + 30, T - 30, emb + nsp, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2_fwd fe = {.embeds = emb, .n = ne, .logits_last = last};
    cr_assert_eq(rc_qwen2_forward(m, &fe, &err), RECALL_OK, "%s", err.msg);
    e.embeds_logits = golden_err(golden, "embeds_logits_last", last, 0);
    e.embeds_q = golden_err(golden, "embeds_q_last", rc_qwen2_gate_q(m), (size_t)3 * QD);
    free(sp);
    free(emb);
    free(ids_i);
    free(logits);
    free(hid);
    free(q);
    free(last);
    rc_qwen2_close(m);
    rc_blob_close(b);
    return e;
}

/* Every qwen2 golden of one npz within 1e-4 (relative) on one blob, the greedy ids exact. */
static void expect_qwen2_goldens(const char *weights, const char *golden) {
    qwen2_errs e = check_qwen2(weights, golden);
    fprintf(stderr, "qwen2 %s: logits %.3g hidden %.3g q %.3g embeds_logits %.3g embeds_q %.3g greedy %d\n", weights,
            e.logits, e.hidden, e.q, e.embeds_logits, e.embeds_q, e.greedy_ok);
    cr_expect_lt(e.logits, 1e-4);
    cr_expect_lt(e.hidden, 1e-4);
    cr_expect_lt(e.q, 1e-4);
    cr_expect_lt(e.embeds_logits, 1e-4);
    cr_expect_lt(e.embeds_q, 1e-4);
    cr_expect(e.greedy_ok);
}

Test(models_qwen2, fp32_goldens) { expect_qwen2_goldens("f32", WA "qwen2_fp32.npz"); }

Test(models_qwen2, nf4_goldens) { expect_qwen2_goldens("nf4", WA "qwen2_nf4.npz"); }

Test(models_pooler, goldens_all_L) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_pooler *p = NULL;
    cr_assert_eq(rc_pooler_open(b, &p, &err), RECALL_OK, "%s", err.msg);
    rc_qwen2 *m = fixture_qwen2(b, 8);
    const rc_pooler_config *c = rc_pooler_cfg(p);
    cr_assert_eq(c->n_sp, 8);
    cr_assert_eq(c->hidden, 64);
    const int Ls[5] = {0, 1, 7, 130, 700};
    double worst = 0;
    for (int k = 0; k < 5; k++) {
        char key[32];
        size_t n, nw;
        snprintf(key, sizeof key, "ids_%d", Ls[k]);
        int *ids = fixture_npz_i32(WA "pooler.npz", key, &n);
        cr_assert_eq(n, (size_t)Ls[k]);
        int32_t *id32 = malloc((n + 1) * sizeof(int32_t));
        for (size_t i = 0; i < n; i++) id32[i] = ids[i];
        float *past = nanbuf(n * 64), *out = nanbuf(8 * 64);
        cr_assert_eq(rc_qwen2_embed(m, id32, (int)n, past, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_pooler_run(p, n ? past : NULL, Ls[k], out, &err), RECALL_OK, "%s", err.msg);
        snprintf(key, sizeof key, "out_%d", Ls[k]);
        float *want = fixture_npz_f32(WA "pooler.npz", key, &nw);
        cr_assert_eq(nw, (size_t)8 * 64);
        double e = rel_err(out, want, nw);
        fprintf(stderr, "pooler L=%d: rel err %.3g\n", Ls[k], e);
        cr_expect_lt(e, 1e-5, "L = %d", Ls[k]);
        if (e > worst) worst = e;
        /* rerun: bitwise identical (no state leaks between calls) */
        float *again = nanbuf(8 * 64);
        cr_assert_eq(rc_pooler_run(p, n ? past : NULL, Ls[k], again, &err), RECALL_OK);
        cr_expect_eq(memcmp(out, again, sizeof(float) * 8 * 64), 0);
        free(again);
        free(want);
        free(out);
        free(past);
        free(id32);
        free(ids);
    }
    rc_qwen2_close(m);
    rc_pooler_close(p);
    rc_blob_close(b);
}

Test(models_bert, goldens_10_texts) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_bert *m = NULL;
    cr_assert_eq(rc_bert_open(b, &m, &err), RECALL_OK, "%s", err.msg);
    char *txt = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    cr_assert_eq(rc_read_file(WA "bge_tokens.json", &txt, &len, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(json_parse(txt, len, "bge_tokens.json", &doc, &err), RECALL_OK, "%s", err.msg);
    const json_value *ids = json_get_type(json_root(doc), "ids", JSON_ARR);
    cr_assert(ids);
    cr_assert_eq(ids->len, 10);
    size_t ne;
    float *want = fixture_npz_f32(WA "bge.npz", "emb", &ne);
    cr_assert_eq(ne, (size_t)10 * 64);
    float *got = nanbuf(ne);
    int32_t buf[512];
    for (size_t i = 0; i < 10; i++) {
        const json_value *a = &ids->items[i];
        cr_assert(a->len >= 2 && a->len <= 512);
        for (size_t t = 0; t < a->len; t++) buf[t] = (int32_t)a->items[t].i;
        cr_assert_eq(rc_bert_embed(m, buf, (int)a->len, got + i * 64, &err), RECALL_OK, "%s", err.msg);
    }
    double e = rel_err(got, want, ne);
    fprintf(stderr, "bert: rel err %.3g\n", e);
    cr_expect_lt(e, 1e-5);
    /* out-of-range ids and over-long inputs are refused */
    buf[0] = 1000;
    cr_expect_eq(rc_bert_embed(m, buf, 1, got, &err), RECALL_E_ARG);
    cr_expect_eq(rc_bert_embed(m, buf, 513, got, &err), RECALL_E_LIMIT);
    free(got);
    free(want);
    json_free(doc);
    free(txt);
    rc_bert_close(m);
    rc_blob_close(b);
}

/* independent double-precision references for the heads */
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

Test(models_heads, gate_and_bridge) {
    rc_blob *b = fixture_open_worldA("f32");
    recall_err err = {0};
    rc_heads *h = NULL;
    cr_assert_eq(rc_heads_open(b, &h, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_gate_dim(h), 192);
    cr_assert_eq(rc_bridge_kdim(h), 64);
    cr_assert_eq(rc_bridge_d(h), 32);
    cr_assert_eq(rc_gate_thresh(h), 0.0f);
    size_t n;
    float *f = fixture_npz_f32(WA "qwen2_fp32.npz", "embeds_q_last", &n);
    cr_assert_eq(n, 192);
    float *coef = fixture_npz_f32(WA "gate.npz", "coef", &n), *mean = fixture_npz_f32(WA "gate.npz", "mean", &n),
          *scale = fixture_npz_f32(WA "gate.npz", "scale", &n), *icpt = fixture_npz_f32(WA "gate.npz", "intercept", &n);
    double s_ref = icpt[0];
    for (int i = 0; i < 192; i++) s_ref += ((double)f[i] - mean[i]) / scale[i] * coef[i];
    float s = rc_gate_score(h, f);
    double gerr = fabs(s - s_ref) / fabs(s_ref);
    fprintf(stderr, "gate score %.7g ref %.7g rel %.3g\n", s, s_ref, gerr);
    cr_expect_lt(gerr, 1e-5);
    cr_expect_eq(rc_gate_fires(h, s), s > 0.0f);
    cr_expect(rc_gate_fires(h, 1e-30f));
    cr_expect(!rc_gate_fires(h, 0.0f)); /* strict */

    /* bridge: query from f, keys from the 10 golden BGE embeddings */
    const char *keys[8] = {"Wq.0.weight", "Wq.0.bias", "Wq.2.weight", "Wq.2.bias",
                           "Wk.0.weight", "Wk.0.bias", "Wk.2.weight", "Wk.2.bias"};
    float *W[8];
    for (int i = 0; i < 8; i++) W[i] = fixture_npz_f32(WA "bge_head.npz", keys[i], &n);
    float *E = fixture_npz_f32(WA "bge.npz", "emb", &n);
    double qd[32], kd[32], hid[32];
    for (int r = 0; r < 32; r++) {
        double a = W[1][r];
        for (int c = 0; c < 192; c++) a += (double)W[0][r * 192 + c] * f[c];
        hid[r] = ref_gelu(a);
    }
    for (int r = 0; r < 32; r++) {
        double a = W[3][r];
        for (int c = 0; c < 32; c++) a += (double)W[2][r * 32 + c] * hid[c];
        qd[r] = a;
    }
    float q[32], k[32];
    rc_bridge_query(h, f, q);
    double worst = 0;
    for (int j = 0; j < 10; j++) {
        const float *e = E + j * 64;
        for (int r = 0; r < 32; r++) {
            double a = W[5][r];
            for (int c = 0; c < 64; c++) a += (double)W[4][r * 64 + c] * e[c];
            hid[r] = ref_gelu(a);
        }
        double ref = 0, mag = 0;
        for (int r = 0; r < 32; r++) {
            double a = W[7][r];
            for (int c = 0; c < 32; c++) a += (double)W[6][r * 32 + c] * hid[c];
            kd[r] = a;
            ref += qd[r] * kd[r];
            mag += fabs(qd[r] * kd[r]);
        }
        rc_bridge_key(h, e, k);
        float sc = rc_bridge_score(h, q, k);
        double rel = fabs(sc - ref) / mag; /* relative to the sum of |terms| (cancellation-proof) */
        if (rel > worst) worst = rel;
    }
    fprintf(stderr, "bridge: worst rel err %.3g\n", worst);
    cr_expect_lt(worst, 1e-5);
    for (int i = 0; i < 8; i++) free(W[i]);
    free(E);
    free(f);
    free(coef);
    free(mean);
    free(scale);
    free(icpt);
    rc_heads_close(h);
    rc_blob_close(b);
}

/* Full-vocab logits of a one-shot prefill of ids[0..T) vs other schedules: bitwise. */
Test(models_qwen2, decode_equals_prefill_and_crop_bitwise) {
    rc_blob *b = fixture_open_worldA("nf4");
    rc_qwen2 *m = fixture_qwen2(b, 96);
    recall_err err = {0};
    const int V = rc_qwen2_cfg(m)->vocab, QD = 64;
    size_t n;
    int *ids_i = fixture_npz_i32(WA "qwen2_fp32.npz", "ids", &n);
    int T = (int)n;
    int32_t ids[64];
    for (int t = 0; t < T; t++) ids[t] = ids_i[t];
    float *ref = nanbuf((size_t)T * V), *got = nanbuf((size_t)T * V), *q_ref = nanbuf((size_t)3 * QD);
    rc_qwen2_fwd f = {.ids = ids, .n = T, .logits_all = ref};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    memcpy(q_ref, rc_qwen2_gate_q(m), (size_t)3 * QD * 4);
    cr_assert_eq(rc_qwen2_n_cached(m), T);
    /* token by token */
    cr_assert_eq(rc_qwen2_crop(m, 0, &err), RECALL_OK);
    for (int t = 0; t < T; t++) {
        rc_qwen2_fwd d = {.ids = ids + t, .n = 1, .logits_last = got + (size_t)t * V};
        cr_assert_eq(rc_qwen2_forward(m, &d, &err), RECALL_OK, "%s", err.msg);
    }
    cr_expect_eq(memcmp(got, ref, (size_t)T * V * 4), 0, "decode != prefill");
    cr_expect_eq(memcmp(q_ref, rc_qwen2_gate_q(m), (size_t)3 * QD * 4), 0);
    /* crop(11) + re-prefill of the rest in uneven pieces (crossing the chunk size) */
    cr_assert_eq(rc_qwen2_crop(m, 11, &err), RECALL_OK);
    for (size_t i = 0; i < (size_t)T * V; i++) got[i] = NAN;
    rc_qwen2_fwd p1 = {.ids = ids + 11, .n = 3, .logits_all = got + (size_t)11 * V};
    rc_qwen2_fwd p2 = {.ids = ids + 14, .n = T - 14, .logits_all = got + (size_t)14 * V};
    cr_assert_eq(rc_qwen2_forward(m, &p1, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(m, &p2, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(memcmp(got + (size_t)11 * V, ref + (size_t)11 * V, (size_t)(T - 11) * V * 4), 0, "crop + re-prefill");
    /* a fresh context agrees too, and the embeds path equals the ids path bitwise */
    rc_qwen2 *m2 = NULL;
    cr_assert_eq(rc_qwen2_open(b, 40, &m2, &err), RECALL_OK, "%s", err.msg);
    float *emb = nanbuf((size_t)T * 64);
    cr_assert_eq(rc_qwen2_embed(m2, ids, T, emb, &err), RECALL_OK);
    rc_qwen2_fwd fe = {.embeds = emb, .n = T, .logits_all = got};
    cr_assert_eq(rc_qwen2_forward(m2, &fe, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(memcmp(got, ref, (size_t)T * V * 4), 0, "embeds path");
    /* limits and bad ids */
    rc_qwen2_fwd big = {.embeds = emb, .n = 4};
    cr_expect_eq(rc_qwen2_forward(m2, &big, &err), RECALL_E_LIMIT);
    cr_expect_eq(rc_qwen2_crop(m2, T + 1, &err), RECALL_E_ARG);
    int32_t bad = V;
    rc_qwen2_fwd fb = {.ids = &bad, .n = 1};
    cr_assert_eq(rc_qwen2_crop(m2, 0, &err), RECALL_OK);
    cr_expect_eq(rc_qwen2_forward(m2, &fb, &err), RECALL_E_ARG);
    cr_expect_eq(rc_qwen2_n_cached(m2), 0);
    free(emb);
    rc_qwen2_close(m2);
    free(ids_i);
    free(ref);
    free(got);
    free(q_ref);
    rc_qwen2_close(m);
    rc_blob_close(b);
}

/* The last layer runs attention, o_proj and the MLP only for rows whose output was asked for
 * (qwen2.c forward_chunk): 150 rows = 3 chunks, asked for (a) every row, (b) the last row only,
 * (c) nothing (a cache fill). Every output and the decode steps after each are bitwise the same. */
Test(models_qwen2, last_layer_skip_keeps_every_output_bitwise) {
    rc_blob *b = fixture_open_worldA("nf4");
    recall_err err = {0};
    enum { T = 150, STEPS = 3 };
    rc_qwen2 *m[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) cr_assert_eq(rc_qwen2_open(b, T + STEPS, &m[i], &err), RECALL_OK, "%s", err.msg);
    const rc_qwen2_config *c = rc_qwen2_cfg(m[0]);
    const int V = c->vocab, H = c->hidden, NL = c->layers;
    int32_t ids[T + STEPS];
    uint32_t s = 7;
    for (int i = 0; i < T + STEPS; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
    float *all = nanbuf((size_t)T * V), *normed_all = nanbuf((size_t)T * H), *hid_a = nanbuf((size_t)(NL + 1) * H);
    float *last = nanbuf((size_t)V), *normed_last = nanbuf((size_t)H), *hid_b = nanbuf((size_t)(NL + 1) * H);
    rc_qwen2_fwd fa = {.ids = ids, .n = T, .logits_all = all, .normed_all = normed_all, .hidden_last = hid_a};
    rc_qwen2_fwd fb = {.ids = ids, .n = T, .logits_last = last, .normed_last = normed_last, .hidden_last = hid_b};
    rc_qwen2_fwd fc = {.ids = ids, .n = T};
    cr_assert_eq(rc_qwen2_forward(m[0], &fa, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(m[1], &fb, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(m[2], &fc, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(memcmp(last, all + (size_t)(T - 1) * V, (size_t)V * 4), 0, "logits of the last row");
    cr_expect_eq(memcmp(normed_last, normed_all + (size_t)(T - 1) * H, (size_t)H * 4), 0, "normed last row");
    cr_expect_eq(memcmp(hid_b, hid_a, (size_t)(NL + 1) * H * 4), 0, "hidden_last");
    /* the caches: decode steps after each agree */
    float *dec = nanbuf((size_t)3 * V);
    for (int k = 0; k < STEPS; k++) {
        for (int i = 0; i < 3; i++) {
            rc_qwen2_fwd d = {.ids = ids + T + k, .n = 1, .logits_last = dec + (size_t)i * V};
            cr_assert_eq(rc_qwen2_forward(m[i], &d, &err), RECALL_OK, "%s", err.msg);
        }
        cr_expect_eq(memcmp(dec + V, dec, (size_t)V * 4), 0, "step %d after a last-row-only prefill", k);
        cr_expect_eq(memcmp(dec + 2 * (size_t)V, dec, (size_t)V * 4), 0, "step %d after a cache fill", k);
    }
    free(all);
    free(normed_all);
    free(hid_a);
    free(last);
    free(normed_last);
    free(hid_b);
    free(dec);
    for (int i = 0; i < 3; i++) rc_qwen2_close(m[i]);
    rc_blob_close(b);
}

Test(models_qwen2, bf16_blob_equals_f32_blob_bitwise) {
    rc_blob *bf = fixture_open_worldA("f32"), *bb = fixture_open_worldA("bf16");
    recall_err err = {0};
    rc_qwen2 *mf = NULL, *mb = NULL;
    cr_assert_eq(rc_qwen2_open(bf, 64, &mf, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_open(bb, 64, &mb, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_blob_find(bb, "qwen2.model.layers.0.self_attn.q_proj.weight")->dtype, RC_DT_BF16);
    cr_assert_eq(rc_blob_find(bf, "qwen2.model.layers.0.self_attn.q_proj.weight")->dtype, RC_DT_F32);
    size_t n;
    int *ids_i = fixture_npz_i32(WA "qwen2_fp32.npz", "ids", &n);
    int32_t ids[64];
    for (size_t t = 0; t < n; t++) ids[t] = ids_i[t];
    const int V = rc_qwen2_cfg(mf)->vocab, NH = rc_qwen2_cfg(mf)->layers + 1;
    float *a = nanbuf(n * V), *c = nanbuf(n * V), *ha = nanbuf((size_t)NH * 64), *hc = nanbuf((size_t)NH * 64);
    rc_qwen2_fwd fa = {.ids = ids, .n = (int)n, .logits_all = a, .hidden_last = ha};
    rc_qwen2_fwd fc = {.ids = ids, .n = (int)n, .logits_all = c, .hidden_last = hc};
    cr_assert_eq(rc_qwen2_forward(mf, &fa, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_qwen2_forward(mb, &fc, &err), RECALL_OK, "%s", err.msg);
    cr_expect_eq(memcmp(a, c, n * V * 4), 0);
    cr_expect_eq(memcmp(ha, hc, (size_t)NH * 64 * 4), 0);
    free(a);
    free(c);
    free(ha);
    free(hc);
    free(ids_i);
    rc_qwen2_close(mf);
    rc_qwen2_close(mb);
    rc_blob_close(bf);
    rc_blob_close(bb);
}

/* The converter's NF4 (our quantiser) reproduces the golden bytes of layer 0 q_proj, both via the
 * nf4 blob and by quantising the f32 blob's tensor directly. */
Test(models_nf4, layer0_q_proj_bytes) {
    size_t np, na;
    float *packed_f = fixture_npz_f32(WA "nf4_layer0_q_proj.npz", "packed", &np);
    float *absmax = fixture_npz_f32(WA "nf4_layer0_q_proj.npz", "absmax", &na);
    cr_assert_eq(np, 2048);
    cr_assert_eq(na, 64);
    uint8_t packed[2048];
    for (size_t i = 0; i < np; i++) packed[i] = (uint8_t)packed_f[i];
    rc_blob *bf = fixture_open_worldA("f32"), *bn = fixture_open_worldA("nf4");
    const rc_tensor *tf = rc_blob_find(bf, "qwen2.model.layers.0.self_attn.q_proj.weight");
    const rc_tensor *tn = rc_blob_find(bn, "qwen2.model.layers.0.self_attn.q_proj.weight");
    cr_assert(tf && tn);
    cr_assert_eq(tf->numel, 4096);
    cr_assert_eq(tn->dtype, RC_DT_NF4);
    uint8_t codes[2048];
    float am[64];
    cr_assert_eq(rc_nf4_quantize((const float *)tf->data, 4096, codes, am), 0);
    cr_expect_eq(memcmp(codes, packed, 2048), 0);
    cr_expect_eq(memcmp(am, absmax, 64 * 4), 0);
    cr_expect_eq(memcmp(tn->data, packed, 2048), 0);
    cr_expect_eq(memcmp(tn->absmax, absmax, 64 * 4), 0);
    free(packed_f);
    free(absmax);
    rc_blob_close(bf);
    rc_blob_close(bn);
}
