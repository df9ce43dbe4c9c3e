/* retriever.h - the block archive (token ids only) and BGE-on-demand retrieval (docs/LOOP.md).
 *
 * Archive: evicted ids are appended to `buf`; every full `block` ids are sealed into a block.
 * Candidates at a fire: all sealed blocks (chronological) plus `buf` as a pseudo-block when it
 * holds at least buf_min ids.
 *
 * Retrieval for the raw gate feature f[qdim]:
 *   qz = Wq(f)                                               [d]
 *   for each candidate c: text = BPE decode(ids, specials kept)
 *                         e = BERT(WordPiece([CLS] text [SEP], truncated to max_seq))  [kdim]
 *                         kz = Wk(e); score_c = dot(qz, kz)
 *   top = torch.topk(score, min(k, ncand)) on CPU, ties included (topk.h), re-sorted ascending;
 *   rid = concatenation of the chosen candidates' ids.
 * Nothing here persists across turns. The reference recomputes every block embedding at every
 * fire; rc_key_cache keeps the bridge keys of sealed blocks instead (same bits, less work).
 */
#ifndef RECALL_RETRIEVER_H
#define RECALL_RETRIEVER_H

#include "bert.h"
#include "heads.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"
#include "topk.h" /* the selection rule, shared with the loop's rebuild_top5 records */

typedef struct {
    int32_t *buf;
    int n_buf, cap_buf;
    int32_t *blocks; /* n_blocks * block ids */
    int n_blocks, cap_blocks;
    int block;
} rc_archive;

void rc_archive_init(rc_archive *a, int block);
void rc_archive_free(rc_archive *a);
void rc_archive_reset(rc_archive *a);
/* Appends ids to buf (no sealing: the caller seals so it can run the faithful seal forward). */
recall_status rc_archive_push(rc_archive *a, const int32_t *ids, int n, recall_err *err);
/* Moves the first `block` ids of buf into a new sealed block; returns a pointer to them. */
const int32_t *rc_archive_seal(rc_archive *a, recall_err *err);
int rc_archive_n_candidates(const rc_archive *a, int buf_min);

#define RC_MAX_K 8

typedef struct {
    int ncand;
    float *bridge;   /* [ncand] scores, chronological */
    int ntop;
    int top[RC_MAX_K];  /* the chosen candidates, ascending (chronological) */
    int32_t *rid;    /* concatenated ids of the chosen candidates */
    int nrid;
} rc_retrieval;

void rc_retrieval_free(rc_retrieval *r);

typedef struct {
    const rc_bpe *bpe;
    const rc_wp *wp;
    rc_bert *bert;
    rc_heads *heads;
    int max_seq; /* WordPiece truncation (bert.max_seq) */
} rc_retriever;

/* Bridge keys Wk(BERT(text)) of sealed blocks 0..n-1. A sealed block never changes, so its key
 * is computed once and reused (bitwise what a fresh computation gives); the pending buffer is
 * always encoded afresh. Vectors only live in memory: nothing here is persisted. */
typedef struct {
    float *kz;   /* [cap][d] */
    int n, cap, d;
    int encodes; /* BERT runs so far (statistics) */
} rc_key_cache;

void rc_key_cache_free(rc_key_cache *c);

/* cache may be NULL (the reference schedule: every candidate encoded at every fire). */
recall_status rc_retrieve_bge(const rc_retriever *rt, const rc_archive *a, const float *f, int k, int buf_min,
                              rc_key_cache *cache, rc_retrieval *out, recall_err *err);

/* The bridge score a candidate holding ids[0..n) would get from a fire on the raw gate feature f:
 * dot(Wq(f), Wk(BERT(text))), every step as rc_retrieve_bge takes it (the loop's edge span,
 * docs/LOOP.md "The window's edge"). */
recall_status rc_retrieve_score(const rc_retriever *rt, const float *f, const int32_t *ids, int n, float *score,
                                recall_err *err);

/* The loop's opts.rerank words and single (docs/LOOP.md, "Words the user asked in"): rv's candidates (its
 * bridge scores as rc_retrieve_bge computed them) chosen again, top k, by the bridge's score
 * fused with a score by the words of the query q[0:nq] (the user's message being answered):
 *   words    the distinct ids of q that are not special tokens
 *   weight   log(ncand / the candidates holding the word), in double (rc_log_d: no libm)
 *   lexical  per candidate, the sum of the weights of the words it holds (in the query's order)
 *   fused    per candidate, its bridge score and its lexical score each scaled to [0, 1] over
 *            the candidates (min-max: (x - min) / (max - min), 0 where max = min; a NaN or +inf
 *            bridge score scales to 1, -inf to 0), added (score fusion, CombSUM)
 * top = the k highest fused (ties: bridge score, then earlier), re-sorted ascending; rid rebuilt.
 * single (opts.rerank single): when the highest fused candidate's lexical score is strictly above
 * every other candidate's, top is that candidate alone (the words single it out; a second pick
 * would be chosen by like words, most often another fact); else the k as above.
 * rv->bridge is left as it was. Deterministic: no threads, one order. */
recall_status rc_retrieve_rerank_words(const rc_archive *a, const rc_bpe *bpe, const int32_t *q, int nq, int k,
                                       int single, rc_retrieval *rv, recall_err *err);

#endif
