/* heads.c - gate score and bridge towers (math in heads.h, order in ops.h). */
#include "heads.h"

#include "ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    rc_mat w0, w2;
    float *b0, *b2;
} tower;

struct rc_heads {
    int F, qdim, kdim, d;
    float *coef, *mean, *scale, intercept, thresh;
    tower tq, tk;
    float *vecs, *z, *hid;
};

void rc_heads_close(rc_heads *h) {
    if (!h) return;
    free(h->vecs);
    free(h->z);
    free(h->hid);
    free(h);
}

static recall_status load_tower(const rc_blob *b, const char *pre, int in, int d, tower *t, float **v,
                                recall_err *err) {
    char nm[96];
    snprintf(nm, sizeof nm, "bridge.%s.0.weight", pre);
    RC_TRY(rc_blob_mat(b, nm, d, in, &t->w0, err));
    snprintf(nm, sizeof nm, "bridge.%s.2.weight", pre);
    RC_TRY(rc_blob_mat(b, nm, d, d, &t->w2, err));
    t->b0 = *v;
    t->b2 = *v + d;
    *v += 2 * d;
    snprintf(nm, sizeof nm, "bridge.%s.0.bias", pre);
    RC_TRY(rc_blob_vec(b, nm, d, t->b0, err));
    snprintf(nm, sizeof nm, "bridge.%s.2.bias", pre);
    return rc_blob_vec(b, nm, d, t->b2, err);
}

/* The gate and the bridge head's sizes and weights into h (its buffers allocated here). */
static recall_status heads_load(rc_heads *h, const rc_blob *b, recall_err *err) {
    RC_TRY(rc_blob_get_int(b, "gate.dim", 1, 1 << 24, &h->F, err));
    RC_TRY(rc_blob_get_int(b, "bridge.qdim", 1, 1 << 24, &h->qdim, err));
    RC_TRY(rc_blob_get_int(b, "bridge.kdim", 1, 1 << 24, &h->kdim, err));
    RC_TRY(rc_blob_get_int(b, "bridge.d", 1, 1 << 24, &h->d, err));
    if (h->qdim != h->F) {
        return rc_fail(err, RECALL_E_SHAPE, "%s: bridge.qdim %d != gate.dim %d", rc_blob_path(b), h->qdim, h->F);
    }
    h->vecs = (float *)calloc(3 * (size_t)h->F + 4 * (size_t)h->d + 2, sizeof(float));
    h->z = (float *)calloc((size_t)(h->F > h->kdim ? h->F : h->kdim), sizeof(float));
    h->hid = (float *)calloc((size_t)h->d, sizeof(float));
    if (!h->vecs || !h->z || !h->hid) {
        return rc_fail(err, RECALL_E_NOMEM, "heads: out of memory");
    }
    float *v = h->vecs;
    h->coef = v;
    h->mean = v + h->F;
    h->scale = v + 2 * (size_t)h->F;
    v += 3 * (size_t)h->F;
    RC_TRY(rc_blob_vec(b, "gate.coef", h->F, h->coef, err));
    RC_TRY(rc_blob_vec(b, "gate.mean", h->F, h->mean, err));
    RC_TRY(rc_blob_vec(b, "gate.scale", h->F, h->scale, err));
    RC_TRY(rc_blob_vec(b, "gate.intercept", 1, v, err));
    RC_TRY(rc_blob_vec(b, "gate.thresh", 1, v + 1, err));
    h->intercept = v[0];
    h->thresh = v[1];
    v += 2;
    RC_TRY(load_tower(b, "Wq", h->qdim, h->d, &h->tq, &v, err));
    RC_TRY(load_tower(b, "Wk", h->kdim, h->d, &h->tk, &v, err));
    return RECALL_OK;
}

recall_status rc_heads_open(const rc_blob *b, rc_heads **out, recall_err *err) {
    *out = NULL;
    rc_heads *h = (rc_heads *)calloc(1, sizeof *h);
    if (!h) return rc_fail(err, RECALL_E_NOMEM, "heads: out of memory");
    recall_status st = heads_load(h, b, err);
    if (st != RECALL_OK) {
        rc_heads_close(h);
        return st;
    }
    *out = h;
    return RECALL_OK;
}

int rc_gate_dim(const rc_heads *h) { return h->F; }
float rc_gate_thresh(const rc_heads *h) { return h->thresh; }
int rc_bridge_qdim(const rc_heads *h) { return h->qdim; }
int rc_bridge_kdim(const rc_heads *h) { return h->kdim; }
int rc_bridge_d(const rc_heads *h) { return h->d; }

float rc_gate_score(const rc_heads *h, const float *f) {
    for (int i = 0; i < h->F; i++) h->z[i] = (f[i] - h->mean[i]) / h->scale[i];
    return rc_dot_f32(h->z, h->coef, (size_t)h->F) + h->intercept;
}

int rc_gate_fires(const rc_heads *h, float score) { return score > h->thresh; }

static void run_tower(rc_heads *h, const tower *t, const float *x, float *out) {
    rc_matvec(&t->w0, t->b0, x, h->hid);
    for (int i = 0; i < h->d; i++) h->hid[i] = rc_gelu(h->hid[i]);
    rc_matvec(&t->w2, t->b2, h->hid, out);
}

void rc_bridge_query(rc_heads *h, const float *f, float *out) { run_tower(h, &h->tq, f, out); }
void rc_bridge_key(rc_heads *h, const float *e, float *out) { run_tower(h, &h->tk, e, out); }

float rc_bridge_score(const rc_heads *h, const float *q, const float *k) { return rc_dot_f32(q, k, (size_t)h->d); }
