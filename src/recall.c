/* recall.c - the recall loop, one turn at a time (recall.h; RECALL_SPEC §3). */
#include "recall.h"

#include "heads.h"
#include "pooler.h"
#include "qwen2.h"
#include "retriever.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct rc_recall {
    const rc_blob *blob;
    rc_recall_opts o;
    rc_qwen2 *llm;   /* the conversation: [BOS][SP][injected][window][chunk] */
    rc_qwen2 *seal;  /* faithful mode: standalone forward of each sealed block */
    rc_pooler *pooler;
    rc_bert *bert;
    rc_heads *heads;
    rc_bpe *bpe;
    rc_wp *wp;
    int H, V, bos, eos, n_sp, gate_dim;
    float *last, *prime_last, *gq; /* [V], [V], [gate_dim] */
    float *rows;                   /* rebuild input rows, grown on demand */
    size_t cap_rows;
    float *past;                   /* pooler input rows, grown on demand */
    size_t cap_past;
};

static recall_status cfg_int(const rc_blob *b, const char *key, int dflt, int *out) {
    int64_t v;
    recall_err e = {0};
    *out = rc_blob_get_i64(b, key, &v, &e) == RECALL_OK ? (int)v : dflt;
    return RECALL_OK;
}

void rc_recall_defaults(const rc_blob *b, rc_recall_opts *o) {
    memset(o, 0, sizeof *o);
    cfg_int(b, "loop.window", 512, &o->window);
    cfg_int(b, "loop.block", 128, &o->block);
    cfg_int(b, "loop.chunk", 64, &o->chunk);
    cfg_int(b, "loop.k", 2, &o->k);
    cfg_int(b, "loop.turn_cap", 110, &o->turn_cap);
    cfg_int(b, "loop.buf_min", 16, &o->buf_min);
    double t;
    recall_err e = {0};
    o->threshold = rc_blob_get_f64(b, "gate.thresh", &t, &e) == RECALL_OK ? (float)t : -2.858f;
    o->mode = RC_MODE_FAITHFUL;
    o->arm = RC_ARM_RC_BGE;
}

void rc_recall_close(rc_recall *r) {
    if (!r) return;
    rc_qwen2_close(r->llm);
    rc_qwen2_close(r->seal);
    rc_pooler_close(r->pooler);
    rc_bert_close(r->bert);
    rc_heads_close(r->heads);
    rc_bpe_free(r->bpe);
    rc_wp_free(r->wp);
    free(r->last);
    free(r->prime_last);
    free(r->gq);
    free(r->rows);
    free(r->past);
    free(r);
}

const struct rc_bpe *rc_recall_bpe(const rc_recall *r) { return r->bpe; }
int rc_recall_eos(const rc_recall *r) { return r->eos; }

recall_status rc_recall_open(const rc_blob *b, const rc_recall_opts *o, rc_recall **out, recall_err *err) {
    *out = NULL;
    if (o->window < 1 || o->block < 1 || o->chunk < 1 || o->k < 1 || o->k > RC_MAX_K || o->turn_cap < 0 ||
        o->buf_min < 1)
        return rc_fail(err, RECALL_E_ARG, "recall: window %d, block %d, chunk %d, k %d (1..%d), turn cap %d invalid",
                       o->window, o->block, o->chunk, o->k, RC_MAX_K, o->turn_cap);
    rc_recall *r = calloc(1, sizeof *r);
    if (!r) return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    r->blob = b;
    r->o = *o;
    recall_status s = RECALL_OK;
    int64_t v;
    if (!s) s = rc_blob_get_i64(b, "tok.bos", &v, err);
    r->bos = (int)v;
    if (!s) s = rc_blob_get_i64(b, "tok.eos", &v, err);
    r->eos = (int)v;
    if (!s) s = rc_blob_get_i64(b, "qwen2.max_pos", &v, err);
    int max_pos = (int)v;
    if (!s) {
        size_t size;
        const void *sec = rc_blob_section(b, RC_SECT_TOK_BPE, &size);
        s = sec ? rc_bpe_load(sec, size, &r->bpe, err)
                : rc_fail(err, RECALL_E_MISSING, "%s: no BPE tokenizer section", rc_blob_path(b));
    }
    if (!s && o->arm != RC_ARM_FULL) s = rc_pooler_open(b, &r->pooler, err);
    if (!s && r->pooler) r->n_sp = rc_pooler_cfg(r->pooler)->n_sp;
    int max_ctx = 1 + r->n_sp + o->k * o->block + o->window + o->chunk;
    if (o->arm == RC_ARM_FULL) max_ctx = max_pos < 16384 ? max_pos : 16384;
    if (!s && max_ctx > max_pos)
        s = rc_fail(err, RECALL_E_LIMIT,
                    "recall: the loop needs %d positions (1 + %d SP + %d x %d injected + %d window + %d chunk) but "
                    "the model was trained on %d", max_ctx, r->n_sp, o->k, o->block, o->window, o->chunk, max_pos);
    if (!s) s = rc_qwen2_open(b, max_ctx, &r->llm, err);
    if (!s) {
        r->H = rc_qwen2_cfg(r->llm)->hidden;
        r->V = rc_qwen2_cfg(r->llm)->vocab;
        if (r->bos < 0 || r->bos >= r->V || r->eos < 0 || r->eos >= r->V)
            s = rc_fail(err, RECALL_E_FORMAT, "%s: tok.bos %d / tok.eos %d outside the vocab (%d)", rc_blob_path(b),
                        r->bos, r->eos, r->V);
    }
    if (!s && o->arm == RC_ARM_RC_BGE) {
        size_t size;
        const void *sec = rc_blob_section(b, RC_SECT_TOK_WORDPIECE, &size);
        s = sec ? rc_wp_load(sec, size, &r->wp, err)
                : rc_fail(err, RECALL_E_MISSING, "%s: no WordPiece tokenizer section", rc_blob_path(b));
        if (!s) s = rc_bert_open(b, &r->bert, err);
        if (!s) s = rc_heads_open(b, &r->heads, err);
        if (!s && o->mode == RC_MODE_FAITHFUL) s = rc_qwen2_open(b, o->block, &r->seal, err);
    }
    if (!s) {
        const rc_qwen2_config *c = rc_qwen2_cfg(r->llm);
        r->gate_dim = c->n_gate * c->heads * c->head_dim;
        if (r->heads && rc_gate_dim(r->heads) != r->gate_dim)
            s = rc_fail(err, RECALL_E_SHAPE, "%s: gate expects %d features, the model captures %d", rc_blob_path(b),
                        rc_gate_dim(r->heads), r->gate_dim);
    }
    if (!s) {
        r->last = malloc((size_t)r->V * sizeof *r->last);
        r->prime_last = malloc((size_t)r->V * sizeof *r->prime_last);
        r->gq = calloc((size_t)(r->gate_dim ? r->gate_dim : 1), sizeof *r->gq);
        if (!r->last || !r->prime_last || !r->gq) s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    }
    if (s) {
        rc_recall_close(r);
        return s;
    }
    *out = r;
    return RECALL_OK;
}

void rc_turn_free(rc_turn *t) {
    free(t->reply);
    free(t->gates);
    for (int i = 0; i < t->n_fires; i++) {
        free(t->fires[i].bridge);
        free(t->fires[i].rid);
    }
    free(t->fires);
    free(t->rebuilds);
    free(t->top5);
    free(t->low);
    memset(t, 0, sizeof *t);
}

/* Appends one record to a growable array; returns NULL on allocation failure. */
static void *push(void **arr, int *n, int *cap, size_t size) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        void *na = realloc(*arr, (size_t)nc * size);
        if (!na) return NULL;
        *arr = na;
        *cap = nc;
    }
    void *p = (char *)*arr + (size_t)(*n)++ * size;
    memset(p, 0, size);
    return p;
}
#define PUSH(t, field) push((void **)&(t)->field, &(t)->n_##field, &(t)->cap_##field, sizeof *(t)->field)

static float *grow_rows(float **p, size_t *cap, size_t n) {
    if (n > *cap) {
        float *np = realloc(*p, n * sizeof *np);
        if (!np) return NULL;
        *p = np;
        *cap = n;
    }
    return *p;
}

/* Top-5 of the logits, descending; equal values keep the lower id first. */
static void top5(const float *x, int V, rc_top5_rec *rec) {
    int n = 0;
    for (int i = 0; i < V; i++) {
        int j = n < 5 ? n++ : 5;
        if (j == 5 && !(x[i] > rec->logits[4])) continue;
        if (j == 5) j = 4;
        while (j > 0 && x[i] > rec->logits[j - 1]) {
            rec->logits[j] = rec->logits[j - 1];
            rec->ids[j] = rec->ids[j - 1];
            j--;
        }
        rec->logits[j] = x[i];
        rec->ids[j] = i;
    }
}

static recall_status forward_ids(rc_recall *r, rc_qwen2 *m, const int32_t *ids, int n, float *logits,
                                 recall_err *err) {
    rc_qwen2_fwd f;
    memset(&f, 0, sizeof f);
    f.ids = ids;
    f.n = n;
    f.logits_last = logits;
    RC_TRY(rc_qwen2_forward(m, &f, err));
    memcpy(r->gq, rc_qwen2_gate_q(m), (size_t)r->gate_dim * sizeof *r->gq);
    return RECALL_OK;
}

recall_status rc_recall_reply(rc_recall *r, const int32_t *feed, int n_feed, rc_event_fn on_event, void *ctx,
                              rc_turn *turn, recall_err *err) {
    memset(turn, 0, sizeof *turn);
    turn->min_margin = INFINITY;
    const rc_recall_opts *o = &r->o;
    for (int i = 0; i < n_feed; i++)
        if (feed[i] < 0 || feed[i] >= r->V)
            return rc_fail(err, RECALL_E_ARG, "recall: feed token %d at position %d is outside the vocab (%d)", feed[i],
                           i, r->V);
    if (o->arm == RC_ARM_FULL && 1 + n_feed + o->turn_cap + 1 > rc_qwen2_max_ctx(r->llm))
        return rc_fail(err, RECALL_E_LIMIT, "recall: FULL arm needs %d positions for %d history tokens, the cache holds %d",
                       1 + n_feed + o->turn_cap + 1, n_feed, rc_qwen2_max_ctx(r->llm));
    int cap_gen = n_feed + o->turn_cap + o->chunk + 1;
    int32_t *gen = malloc((size_t)cap_gen * sizeof *gen);
    if (!gen) return rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
    int n_gen = 0, absorbed = 0, fi = 0, newtok = 0, done = 0, fired_this_turn = 0, above = 0;
    int32_t *rid = NULL;
    int nrid = 0;
    rc_archive ar;
    rc_archive_init(&ar, o->block);
    rc_retriever rt = {r->bpe, r->wp, r->bert, r->heads, 512};
    if (r->bert) rt.max_seq = rc_bert_cfg(r->bert)->max_seq;
    const int H = r->H, V = r->V, RC = o->arm == RC_ARM_RC_BGE;
    recall_status s = RECALL_OK;

    /* prime: BOS lives at position 0 for the whole turn */
    s = rc_qwen2_crop(r->llm, 0, err);
    int32_t bos = r->bos;
    if (!s) s = forward_ids(r, r->llm, &bos, 1, r->prime_last, err);
    const int MQ = rc_qwen2_n_cached(r->llm);

    while (!s && !done) {
        int c0 = n_gen;
        int R = o->arm == RC_ARM_FULL ? c0 : (c0 < o->window ? c0 : o->window);
        int nd = c0 - R;
        /* (1) eviction */
        if (nd > absorbed) {
            if (RC) {
                s = rc_archive_push(&ar, gen + absorbed, nd - absorbed, err);
                while (!s && ar.n_buf >= ar.block) {
                    const int32_t *blk = rc_archive_seal(&ar, err);
                    if (!blk) {
                        s = err && err->code ? err->code : RECALL_E_NOMEM;
                        break;
                    }
                    if (o->mode == RC_MODE_FAITHFUL) { /* standalone, positions 0.., no lm_head */
                        s = rc_qwen2_crop(r->seal, 0, err);
                        if (!s) s = forward_ids(r, r->seal, blk, ar.block, NULL, err);
                    }
                }
            }
            absorbed = nd;
        }
        /* (2) gate */
        if (!s && RC && (ar.n_blocks > 0 || ar.n_buf >= o->buf_min)) {
            rc_gate_rec *g = PUSH(turn, gates);
            if (!g) {
                s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
                break;
            }
            g->c0 = c0;
            g->score = rc_gate_score(r->heads, r->gq);
            int over = g->score > o->threshold;
            above = over ? above + 1 : 0;
            g->fired = over && !(o->fire_once && fired_this_turn) && above >= (o->hysteresis > 1 ? o->hysteresis : 1);
            if (on_event) on_event(ctx, &(rc_event){RC_EV_GATE, g, 0});
            if (g->fired) {
                rc_retrieval rv;
                s = rc_retrieve_bge(&rt, &ar, r->gq, o->k, o->buf_min, &rv, err);
                if (s) break;
                rc_fire_rec *f = PUSH(turn, fires);
                if (!f) {
                    rc_retrieval_free(&rv);
                    s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
                    break;
                }
                f->c0 = c0;
                f->score = g->score;
                f->ncand = rv.ncand;
                f->bridge = rv.bridge;
                f->ntop = rv.ntop;
                memcpy(f->top, rv.top, sizeof f->top);
                f->rid = rv.rid;
                f->nrid = rv.nrid;
                float best = -INFINITY;
                for (int i = 0; i < rv.ncand; i++)
                    if (rv.bridge[i] > best) best = rv.bridge[i];
                f->injected = rv.nrid > 0 && !(o->use_floor && !(best >= o->floor));
                if (f->injected) { /* replaces any earlier injection */
                    rid = f->rid;
                    nrid = f->nrid;
                    fired_this_turn = 1;
                }
                if (on_event) on_event(ctx, &(rc_event){RC_EV_FIRE, f, 0});
            }
        }
        if (s) break;
        /* (3) rebuild: crop to [BOS], then [SP][injected][window] as one forward */
        int has_sp = nd > 0 && o->arm != RC_ARM_FULL;
        int rows = (has_sp ? r->n_sp : 0) + nrid + R;
        rc_rebuild_rec *rb = PUSH(turn, rebuilds);
        if (!rb || !grow_rows(&r->rows, &r->cap_rows, (size_t)(rows ? rows : 1) * H)) {
            s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
            break;
        }
        rb->c0 = c0;
        rb->has_sp = has_sp;
        rb->inj_len = nrid;
        rb->window_len = R;
        float *row = r->rows;
        if (has_sp) {
            if (!grow_rows(&r->past, &r->cap_past, (size_t)nd * H)) {
                s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
                break;
            }
            s = rc_qwen2_embed(r->llm, gen, nd, r->past, err);
            if (!s) s = rc_pooler_run(r->pooler, r->past, nd, row, err);
            row += (size_t)r->n_sp * H;
        }
        if (!s && nrid) {
            s = rc_qwen2_embed(r->llm, rid, nrid, row, err);
            row += (size_t)nrid * H;
        }
        if (!s && R) s = rc_qwen2_embed(r->llm, gen + c0 - R, R, row, err);
        if (!s) s = rc_qwen2_crop(r->llm, MQ, err);
        if (s) break;
        if (rows) {
            rc_qwen2_fwd f;
            memset(&f, 0, sizeof f);
            f.embeds = r->rows;
            f.n = rows;
            f.logits_last = r->last;
            s = rc_qwen2_forward(r->llm, &f, err);
            if (s) break;
            memcpy(r->gq, rc_qwen2_gate_q(r->llm), (size_t)r->gate_dim * sizeof *r->gq);
        } else {
            memcpy(r->last, r->prime_last, (size_t)V * sizeof *r->last);
        }
        if (on_event) on_event(ctx, &(rc_event){RC_EV_REBUILD, rb, 0});
        rc_top5_rec *t5 = PUSH(turn, top5);
        if (!t5) {
            s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
            break;
        }
        t5->c0 = c0;
        top5(r->last, V, t5);
        /* (4) chunk */
        for (int step = 0; step < o->chunk && !s; step++) {
            int32_t t;
            if (fi < n_feed) {
                t = feed[fi++];
            } else {
                int b1 = 0, b2 = -1;
                for (int i = 1; i < V; i++)
                    if (r->last[i] > r->last[b1]) b1 = i;
                for (int i = 0; i < V; i++)
                    if (i != b1 && (b2 < 0 || r->last[i] > r->last[b2])) b2 = i;
                t = b1;
                float mg = b2 >= 0 ? r->last[b1] - r->last[b2] : INFINITY;
                if (mg < turn->min_margin) turn->min_margin = mg;
                if (mg < 1e-3f) {
                    rc_margin_rec *lm = PUSH(turn, low);
                    if (!lm) {
                        s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
                        break;
                    }
                    lm->pos = n_gen;
                    lm->margin = mg;
                }
                if (t == r->eos || newtok >= o->turn_cap) {
                    done = 1;
                    break;
                }
                newtok++;
                if (on_event) on_event(ctx, &(rc_event){RC_EV_TOKEN, NULL, t});
            }
            gen[n_gen++] = t;
            s = forward_ids(r, r->llm, &t, 1, r->last, err);
        }
    }
    rc_archive_free(&ar);
    if (!s) {
        turn->n_reply = n_gen - n_feed;
        turn->reply = malloc((size_t)(turn->n_reply > 0 ? turn->n_reply : 1) * sizeof *turn->reply);
        if (!turn->reply) s = rc_fail(err, RECALL_E_NOMEM, "recall: out of memory");
        else if (turn->n_reply > 0) memcpy(turn->reply, gen + n_feed, (size_t)turn->n_reply * sizeof *gen);
    }
    free(gen);
    if (s) rc_turn_free(turn);
    return s;
}
