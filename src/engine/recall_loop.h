/* recall_loop.h - the recall loop (docs/LOOP.md): one assistant turn from the whole conversation.
 *
 * Per turn (nothing but token ids survives between turns; rc_recall_reply in recall.c is this, step
 * for step):
 *   prime:   [BOS] through the model; it stays at cache position 0 (MQ = 1). (The fast schedule
 *            may resume instead: see below.)
 *   repeat until done: c0 = len(gen); R = min(c0, window) (FULL: c0); nd = c0 - R
 *     evict_and_seal: gen[absorbed:nd] -> archive buf (seal every `block` ids; faithful mode runs
 *              the sealed block standalone, positions 0.., and its last q_proj capture replaces
 *              the gate feature); kept = gen[0:nd]
 *     gate_and_fire: RC arm, once sealed blocks exist or buf >= buf_min: s = gate(feature); fire
 *              if s > threshold -> BGE retrieval of the top-k candidates; their ids are injected
 *              (a later fire replaces an earlier injection)
 *     rebuild: crop to [BOS]; forward [SP = pooler(embed(kept))][embed(injected)][embed(window)]
 *              (opts.edge: the edge span between the injected ids and the window, see rc_edge)
 *     run_chunk: `chunk` single-token steps: feed tokens are teacher-forced, then greedy argmax
 *              until EOS (not kept) or turn_cap generated tokens
 *              (opts.draft > 0: several greedy steps share one forward that verifies a
 *              drafted continuation, draft.h; drafts never cross the chunk's end, so never a
 *              rebuild, nor the turn cap; every record is plain decoding's)
 *   finish_turn: the reply is gen after the feed.
 * A feed of any length works on the recall arms: a message longer than the window is forced
 * through chunk by chunk while the window slides over it, and what scrolls out goes to the gist
 * and the archive. Only FULL (everything in the cache) is bounded by the model's positions.
 * Modes: faithful (the reference, with the seal quirk) and clean (no seal forward).
 * Schedules: the reference one, and the default fast one that computes the same bits with less
 * work: forced tokens go through one multi-row forward per chunk, a rebuild keeps the cache rows
 * whose inputs and positions are unchanged, sealed blocks are BERT-encoded once, and a turn whose
 * feed extends the previous turn's tokens resumes from the state that turn left (in memory only;
 * nothing but token ids is ever persisted).
 * Arms: SP (no recall), RC_bge (recall), FULL (no eviction, the whole history in the window).
 */
#ifndef RECALL_RECALL_LOOP_H
#define RECALL_RECALL_LOOP_H

#include "blob.h"
#include "pool.h"
#include "status.h"

typedef enum { RC_MODE_FAITHFUL = 0, RC_MODE_CLEAN = 1 } rc_loop_mode;
typedef enum { RC_ARM_RC_BGE = 0, RC_ARM_SP = 1, RC_ARM_FULL = 2 } rc_arm;
/* The window's edge (docs/LOOP.md, "The window's edge"): RC_EDGE_INJECT adds, while an injection
 * is alive, the text around the window's start to the injected text when the bridge head finds it
 * as relevant as what the fire injected; RC_EDGE_EXCHANGE starts the window where the exchange
 * it would cut starts. */
typedef enum { RC_EDGE_OFF = 0, RC_EDGE_INJECT = 1, RC_EDGE_EXCHANGE = 2 } rc_edge;
/* What one pick injects (docs/LOOP.md, "Whole exchanges"): RC_SPAN_BLOCK the sealed block as it is
 * (the reference), RC_SPAN_EXCHANGE the block widened to the exchanges it cuts (a user's message
 * and the reply, closed by EOS), so that a fact
 * sealed half in one block and half in the next is injected whole. */
typedef enum { RC_SPAN_BLOCK = 0, RC_SPAN_EXCHANGE = 1 } rc_span;
/* How a fire chooses (docs/LOOP.md, "Words the user asked in"): RC_RERANK_OFF by the bridge head
 * (the reference), RC_RERANK_WORDS by the bridge's scores fused with the words of the user's
 * message being answered (retriever.h rc_retrieve_rerank_words), RC_RERANK_SINGLE the same, and
 * the one candidate alone when the words single it out ("One block when the words single it
 * out"). */
typedef enum { RC_RERANK_OFF = 0, RC_RERANK_WORDS = 1, RC_RERANK_SINGLE = 2 } rc_rerank;

/* The names of the mode, the arm and the edge, each parsed and printed here only (the CLI's --mode,
 * --arm, --edge and arm lists, the harness's files, the traces); the lists of accepted names are
 * the macros. A parser returns the value, or -1 with RECALL_E_ARG in err (when not NULL):
 * "mode 'X': expected faithful or clean". A printer returns "?" for a value that is none. */
#define RC_MODE_NAMES "faithful or clean"
#define RC_ARM_NAMES "RC_bge, SP or FULL"
#define RC_EDGE_NAMES "off, inject or exchange"
#define RC_SPAN_NAMES "block or exchange"
#define RC_RERANK_NAMES "off, words or single"
int rc_mode_parse(const char *s, recall_err *err);
int rc_arm_parse(const char *s, recall_err *err);
int rc_edge_parse(const char *s, recall_err *err);
int rc_span_parse(const char *s, recall_err *err);
int rc_rerank_parse(const char *s, recall_err *err);
const char *rc_mode_name(int mode);
const char *rc_arm_name(int arm);
const char *rc_edge_name(int edge);
const char *rc_span_name(int span);
const char *rc_rerank_name(int rerank);

/* The loop's options: the one home of every knob the CLI, the public API and the loop share (the
 * CLI parses into cli_args.loop, api.c maps recall_loop_opts onto it in one place), documented
 * here and validated once (rc_recall_opts_check). */
typedef struct {
    int window, block, chunk, k, turn_cap, buf_min; /* defaults: the blob's loop.* keys */
    float threshold;                                /* default: the gate file's thresh */
    rc_loop_mode mode;
    rc_arm arm;
    /* Precision-side options the reference recommends; all off by default. */
    int fire_once;        /* at most one fire per turn */
    int hysteresis;       /* inject only after this many consecutive scores above threshold (0/1: off) */
    int use_floor;        /* inject only if the best bridge score >= floor */
    float floor;
    /* 1: run the plain reference schedule (every feed token its own forward, every rebuild from
     * scratch, every candidate BERT-encoded at every fire, every turn replayed from BOS).
     * 0 (default): the fast schedule, whose outputs are bitwise the same. */
    int reference_schedule;
    /* Execution (pool.h, where threads, simd and numerics are documented): threads and simd give
     * bitwise the same results for every choice; numerics picks the decoder's profile. */
    rc_exec_opts exec;
    /* FULL arm: the instance context (positions its KV cache may grow to); 0 = the positions the
     * model was trained for (rope.h). Above them the open fails naming both numbers. */
    int max_ctx;
    /* Exact speculative decoding (draft.h): greedy steps verify up to `draft` tokens proposed by
     * prompt lookup in one multi-row forward and keep the longest agreeing prefix. 0 = off
     * (one forward per token), at most RC_DRAFT_MAX. Every output and record is the same bits. */
    int draft;
    /* lm_head screening of the greedy picks (lm_screen.h; the same bits either way):
     * RC_LM_SCREEN_AUTO (0) = RECALL_LM_SCREEN=on|off|auto if set, else on when the blob holds the
     * int8 copy; RC_LM_SCREEN_ON = required (an error without it); RC_LM_SCREEN_OFF = never. */
    int lm_screen;
    /* The pooler's K/V cache (pooler.h) in MiB: the K and V rows of the oldest evicted tokens
     * are kept between rebuilds instead of recomputed (36 KiB per token at real shape). 0 = the
     * default, RC_POOLER_CACHE_MB; < 0 = off. The reference schedule never caches. Same bits. */
    int pooler_cache_mb;
    /* KV cache storage of the loop's decoders (qwen2.h rc_kv_dtype): RC_KV_DT_F32 (0, exact) or
     * RC_KV_DT_F16 (half the bytes, an approximation named in every output). */
    int kv;
    /* rc_edge. RC_EDGE_OFF (0, default): the reference layout. RC_EDGE_INJECT (clean mode only;
     * faithful mode reproduces the reference, which has none, so the open refuses it): while an
     * injection is alive, each rebuild bridge-scores the edge span gen[nd - block : nd + block]
     * (the last block evicted and the window's first block) against the query of the fire that
     * made the injection, and if it reaches the score of the weakest candidate that fire injected,
     * runs [SP][injected][edge span][window]: a fact straddling the window's start is then whole
     * in the injected part while the reply is written. Up to 2 x block more positions.
     * RC_EDGE_EXCHANGE (clean mode only, likewise): the window never starts inside an exchange (a
     * user's message and the reply, closed by EOS): at every rebuild its start nd moves back to
     * just after the EOS before it, at most 2 x block; the gist and the archive still end at nd. A
     * fact whose exchange the window's start reaches stays whole in view while the reply is
     * written. Up to 2 x block more positions. */
    int edge;
    /* rc_span. RC_SPAN_BLOCK (0, default): a fire injects its top-k candidates as sealed (the
     * reference). RC_SPAN_EXCHANGE (clean mode only, refused in faithful mode like the edge): each
     * chosen candidate's ids gen[s:e] are widened to the exchanges they cut, backwards to just
     * after the EOS before s and forwards to the EOS at or after e (not kept), at most block / 2
     * ids each way and never past the evicted history; overlapping spans are joined in order. The candidates and their scores are the reference's; only what
     * is injected grows, by up to k x block positions. */
    int span;
    /* rc_rerank. RC_RERANK_OFF (0, default): a fire takes the bridge head's top k (the
     * reference). RC_RERANK_WORDS (clean mode only, refused in faithful mode like the edge): the
     * top k of the bridge's scores added to a score by the words of the user's message being
     * answered, each scaled to [0, 1] over the candidates (the last <｜User｜> message in gen[0:c0]; rc_retrieve_rerank_words); the
     * candidates and their bridge scores are the reference's, the records keep them.
     * RC_RERANK_SINGLE (clean mode only): as words, but when one candidate's word score is above
     * every other's and it leads the sum, it is injected alone (a second block, chosen by like
     * words, is most often another fact, whose value the reply would copy). */
    int rerank;
    /* Calibration (calibrate.h): 1 = also score the gate on the q of every token as it is run
     * (forced or generated; not the rebuilds' rows), each an RC_EV_SCORE event. The gate still
     * decides only at rebuilds, so nothing else changes. RC_bge arm only; 0 = off (default). */
    int score_rows;
} rc_recall_opts;
#define RC_POOLER_CACHE_MB 256
enum { RC_LM_SCREEN_AUTO = 0, RC_LM_SCREEN_ON = 1, RC_LM_SCREEN_OFF = 2 };

typedef struct { int c0; float score; int fired; } rc_gate_rec;
typedef struct {
    int c0;
    float score;
    int ncand;
    float *bridge;
    int ntop;
    int top[8];
    int32_t *rid;
    int nrid;
    int injected; /* 0 when hysteresis / floor held the injection back */
} rc_fire_rec;
typedef struct {
    int c0, has_sp, inj_len, window_len;
    int edge_len; /* tokens of the edge span between the injected ids and the window (opts.edge) */
    int reused; /* prefix rows kept from the cache instead of recomputed (fast schedule) */
} rc_rebuild_rec;
typedef struct { int c0; int32_t ids[5]; float logits[5]; } rc_top5_rec;
typedef struct { int pos; float margin; } rc_margin_rec;

/* Everything one turn did, in the schema of the loop goldens. */
typedef struct {
    int32_t *reply;
    int n_reply;
    rc_gate_rec *gates;
    int n_gates, cap_gates;
    rc_fire_rec *fires;
    int n_fires, cap_fires;
    rc_rebuild_rec *rebuilds;
    int n_rebuilds, cap_rebuilds;
    rc_top5_rec *top5;
    int n_top5, cap_top5;
    float min_margin; /* +inf when nothing was generated */
    rc_margin_rec *low;
    int n_low, cap_low;
    /* work done (statistics, not part of the golden schema) */
    long rows_computed; /* decoder rows run through the model (prime, rebuilds, chunk steps, seals) */
    long rows_reused;   /* rows the fast schedule proved identical and kept */
    /* Of rows_computed: rebuild rows behind a gist that differs from the cached one, and the
     * faithful seal forwards. On the fast schedule of a conversation it resumes, a changed gist
     * pools a longer history than any before, so no bit-exact schedule could have those rows
     * already: every one reaches the rebuild's observed logits (rebuild_top5). With the seal
     * rows (their q is the gate feature) and the generated tokens they are a turn's floor. */
    long rows_new_gist, rows_seal;
    int bert_encodes;   /* candidate blocks run through BERT */
    long drafted, accepted; /* draft tokens verified / accepted (opts.draft > 0) */
    int verifies;           /* multi-row forwards that verified a draft */
} rc_turn;

void rc_turn_free(rc_turn *t);

typedef enum { RC_EV_REBUILD, RC_EV_GATE, RC_EV_FIRE, RC_EV_TOKEN, RC_EV_SCORE } rc_event_kind;
typedef struct {
    rc_event_kind kind;
    /* rc_rebuild_rec / rc_gate_rec / rc_fire_rec; NULL for tokens; RC_EV_SCORE (opts.score_rows):
     * an rc_gate_rec whose c0 is the scored token's position in the conversation, fired 0 */
    const void *rec;
    int32_t token;    /* RC_EV_TOKEN: a generated id (streamed as it is chosen) */
} rc_event;
/* Returns 0 to go on; anything else cancels the turn (RECALL_E_CANCELLED, nothing carried to
 * the next turn). */
typedef int (*rc_event_fn)(void *ctx, const rc_event *ev);

typedef struct rc_recall rc_recall;

void rc_recall_defaults(const rc_blob *b, rc_recall_opts *o);
#define RC_TURN_CAP_MAX (1 << 28) /* the most reply tokens a turn may be allowed (turn_cap) */
/* The one validation of the loop's options, with one message per option; rc_recall_open runs it,
 * and so does the public API before it estimates memory (recall_loop_open). The bounds keep every
 * product the size checks form inside int. */
recall_status rc_recall_opts_check(const rc_recall_opts *o, recall_err *err);
/* The part of it that judges mode, arm and edge (each known; edge inject only in clean mode), one
 * message each. The CLI runs it as it parses, before anything runs; the rest of the check waits
 * for the blob's defaults. */
recall_status rc_recall_mode_check(const rc_recall_opts *o, recall_err *err);
/* The positions a recall-arm loop of checked options runs in: BOS, the n_sp soft tokens, k picks
 * (a block each, two with span exchange), the edge's rows (2 x block with edge inject on RC_bge or
 * edge exchange), the window and a chunk. The FULL arm's context is its instance context instead. */
int64_t rc_recall_positions(const rc_recall_opts *o, int64_t n_sp);
recall_status rc_recall_open(const rc_blob *b, const rc_recall_opts *o, rc_recall **out, recall_err *err);
void rc_recall_close(rc_recall *r);
/* Runs one turn for `feed` (the whole conversation so far, user turn included). */
recall_status rc_recall_reply(rc_recall *r, const int32_t *feed, int n_feed, rc_event_fn on_event, void *ctx,
                              rc_turn *turn, recall_err *err);

/* Drops the state the fast schedule carries between turns (start of a new conversation). */
void rc_recall_forget(rc_recall *r);

/* Tokenizers of the blob, for building feeds and decoding replies. */
struct rc_bpe;
const struct rc_bpe *rc_recall_bpe(const rc_recall *r);
int rc_recall_eos(const rc_recall *r);
/* The active SIMD path name and thread count (for --trace and progress lines). */
const char *rc_recall_simd_name(const rc_recall *r);
int rc_recall_threads(const rc_recall *r);

/* What the greedy picks read since open: picks made, whether screening is on, rows whose exact
 * logit was computed, picks that fell back to all V logits, and lm_head bytes read (screening
 * only: int8 copy + scales + norms + exact rows; 0 when off). */
typedef struct {
    int screening;
    long picks, exact_rows, full;
    double bytes, full_bytes; /* full_bytes: what the same picks read without screening */
} rc_lm_stats;
void rc_recall_lm_stats(const rc_recall *r, rc_lm_stats *out);
/* "on|off|auto" -> RC_LM_SCREEN_*; -1 when unknown (CLI and environment parsing); and back. */
#define RC_LM_SCREEN_NAMES "on, off or auto"
int rc_lm_screen_parse(const char *s);
const char *rc_lm_screen_name(int m);
/* The screening asked for, after the environment: RC_LM_SCREEN_AUTO takes RECALL_LM_SCREEN's value
 * when it is set and not empty (-1 when that value is not one of RC_LM_SCREEN_NAMES: rc_recall_open
 * refuses it); any other mode is returned as it is. The loop, `info` and eval records all read
 * screening through this one function. */
int rc_lm_screen_resolve(int mode);
/* The pooler's cache and scratch (pooler.h) after the latest rebuild; all zero on the FULL arm. */
struct rc_pooler_stats;
void rc_recall_pooler_stats(const rc_recall *r, struct rc_pooler_stats *out);

#endif
