/* recall.h - the public C library API of recall (librecall.a / librecall.so, pkg-config "recall").
 *
 * What it exposes: open a weight blob (made by `recall convert`), tokenize / detokenize text with
 * the blob's Qwen2 BPE tokenizer, build chat-template segments, run the decoder on a list of ids
 * (the logits of the last one), and run one assistant turn of the recall loop with callbacks that
 * stream the generated ids and the loop's trace events (rebuilds, gate scores, retrieval fires).
 *
 * Conventions:
 *   - Every function that can fail returns a recall_status (RECALL_OK = 0) and, when `err` is not
 *     NULL, fills it with one line naming the file / tensor / number at fault. Initialise the
 *     recall_err to {0} before the first call: the first error recorded is kept.
 *     recall_strerror(code) names a code. The library never prints and never exits.
 *   - Handles are opaque. A recall_model may be shared by several recall_loop handles that are
 *     used from ONE thread at a time; recall_forward and recall_turn mutate their handle, so two
 *     threads need two handles (two models may map the same file).
 *   - Arrays returned to the caller (ids, text, replies) are allocated with the model's allocator
 *     and released with recall_free / recall_reply_free.
 *   - Allocator scope (honest): a caller-supplied recall_allocator serves every allocation made
 *     by this API layer itself (handles, returned arrays, and the whole blob buffer when the blob
 *     is read into memory instead of mapped). The engine underneath (tokenizer tables, KV caches,
 *     scratch, thread pool) uses malloc/free; that memory is bounded in advance by
 *     recall_open_opts.max_memory, which is checked against the sizes the blob declares before
 *     anything is allocated.
 *   - Thread count / SIMD path: recall_loop_opts.threads / .simd, else the RECALL_THREADS /
 *     RECALL_SIMD environment variables (default: 1 thread, best SIMD path); results are bitwise
 *     identical for every choice. recall_forward uses the environment's choice.
 *   - Numerics profile: recall_open_opts.numerics (recall_forward) and recall_loop_opts.numerics;
 *     exact by default. The q8 profile is bitwise identical for every thread count and path too,
 *     but not to exact.
 */
#ifndef RECALL_PUBLIC_API_H
#define RECALL_PUBLIC_API_H

#include "status.h" /* recall_status, recall_err, recall_strerror */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RECALL_API_VERSION 1

/* Numerics profiles (recall_open_opts.numerics, recall_loop_opts.numerics). */
enum { RECALL_NUMERICS_EXACT = 0, RECALL_NUMERICS_Q8 = 1 };

/* ---- allocation --------------------------------------------------------------------------- */

typedef struct {
    void *(*alloc)(void *ctx, size_t size); /* returns NULL on failure; alignment as malloc */
    void (*free)(void *ctx, void *ptr);     /* ptr may be NULL */
    void *ctx;
} recall_allocator;

/* ---- models ------------------------------------------------------------------------------- */

typedef struct recall_model recall_model;

enum {
    RECALL_OPEN_VERIFY = 1u << 0, /* check the body and every tensor checksum at open */
    RECALL_OPEN_NO_MMAP = 1u << 1, /* read the blob into memory (always so with -DRECALL_NO_MMAP) */
    RECALL_OPEN_HUGEPAGES = 1u << 2 /* copy it into memory advised for transparent huge pages
                                       (fewer TLB misses while decoding; costs the read at open) */
};

typedef struct {
    unsigned flags;
    /* Upper bound in bytes on the memory an open / loop may need, estimated from the sizes the
     * blob declares (blob buffer when read into memory, KV caches, logits, scratch); 0 = none.
     * A request above it fails with RECALL_E_LIMIT naming both numbers. Mapped file pages are
     * not counted (the kernel pages them in and out). */
    uint64_t max_memory;
    const recall_allocator *allocator; /* NULL = malloc/free; copied, must stay valid */
    /* "yarn:FACTOR:ORIG": a YaRN RoPE profile for a blob that declares none (NULL = the blob's
     * own profile). One that contradicts the blob's fails with RECALL_E_ARG naming both. The
     * model's max_pos becomes floor(FACTOR x ORIG). */
    const char *rope_scaling;
    /* The numerics profile of recall_forward's decoder: RECALL_NUMERICS_EXACT (0, the default:
     * the reference fp32 order, bitwise the same everywhere) or RECALL_NUMERICS_Q8 (int8 layer
     * matmuls, deterministic in their own right; packs the decoder at the first recall_forward and
     * counts it against max_memory). Its distance to exact: docs/PROFILES.md. */
    int numerics;
} recall_open_opts;

void recall_open_opts_init(recall_open_opts *o);

/* o may be NULL (defaults). On failure *out is NULL. */
recall_status recall_open(const char *path, const recall_open_opts *o, recall_model **out, recall_err *err);
/* A blob already in memory; buf must outlive the model (it is not copied). */
recall_status recall_open_mem(const void *buf, size_t len, const recall_open_opts *o, recall_model **out,
                              recall_err *err);
void recall_close(recall_model *m); /* NULL is fine; close every loop of m first */

typedef struct {
    int vocab;     /* decoder vocabulary (logits length) */
    int max_pos;   /* positions the decoder was trained on (under its RoPE profile: YaRN's
                      floor(factor x original), else qwen2.max_pos) */
    int hidden, layers;
    int bos_id, eos_id;
} recall_model_info;
void recall_model_get_info(const recall_model *m, recall_model_info *out);

/* Frees an array this API returned (ids, text). NULL is fine. */
void recall_free(const recall_model *m, void *p);

/* ---- tokenizer ---------------------------------------------------------------------------- */

/* len bytes of UTF-8 (invalid sequences become U+FFFD, as the reference does); add_special adds
 * the tokenizer's template ids (BOS). *ids: n_ids ids, free with recall_free. */
recall_status recall_tokenize(const recall_model *m, const char *text, size_t len, int add_special, int32_t **ids,
                              size_t *n_ids, recall_err *err);
/* Ids out of range are dropped (as Hugging Face does); *text is NUL-terminated UTF-8. */
recall_status recall_detokenize(const recall_model *m, const int32_t *ids, size_t n_ids, int skip_special,
                                char **text, size_t *len, recall_err *err);
/* The reference chat template for one exchange (RECALL_SPEC §1.3):
 *   [EOS if with_eos] "<｜User｜>" user "<｜Assistant｜>" [assistant if not NULL]
 * A conversation's feed is the concatenation: with_eos = 0 for the first exchange, 1 after. */
recall_status recall_chat_segment(const recall_model *m, int with_eos, const char *user, const char *assistant,
                                  int32_t **ids, size_t *n_ids, recall_err *err);

/* ---- decoder ------------------------------------------------------------------------------ */

/* Runs ids[0..n) through the decoder from position 0 (no BOS is added) and writes the logits of
 * the last position to logits[0..vocab). logits_len must be >= vocab. Ids are range-checked;
 * n must be 1 .. max_pos (RECALL_E_LIMIT otherwise, numbers named). */
recall_status recall_forward(recall_model *m, const int32_t *ids, size_t n, float *logits, size_t logits_len,
                             recall_err *err);

/* ---- the recall loop ---------------------------------------------------------------------- */

typedef enum { RECALL_MODE_FAITHFUL = 0, RECALL_MODE_CLEAN = 1 } recall_mode;
typedef enum { RECALL_ARM_RC_BGE = 0, RECALL_ARM_SP = 1, RECALL_ARM_FULL = 2 } recall_arm;

typedef struct {
    int window, block, chunk, k, turn_cap, buf_min; /* defaults: the blob's loop.* keys */
    float threshold;                                /* default: the blob's gate.thresh */
    recall_mode mode;
    recall_arm arm;
    int fire_once, hysteresis, use_floor;
    float floor;
    int reference_schedule; /* 1: the slow reference schedule (same bits) */
    /* Longest feed (conversation so far, in tokens) recall_turn accepts; 0 = no limit beyond
     * what the arm itself can hold (the FULL arm keeps everything in its KV cache). */
    size_t max_feed;
    int threads;      /* worker threads for this loop; 0 = RECALL_THREADS or 1 (same bits for any) */
    const char *simd; /* NULL = RECALL_SIMD or the best path; scalar|avx2|avx512|neon (same bits) */
    /* The FULL arm's instance context: the positions its KV cache may grow to (it allocates only
     * what the conversation uses). 0 = the model's max_pos; above max_pos the open fails with
     * RECALL_E_LIMIT naming both numbers. */
    int max_ctx;
    /* Exact speculative decoding: up to `draft` tokens guessed by prompt lookup (the longest
     * recent n-gram of the conversation, continued as it continued before) are verified in one
     * multi-row forward; the longest prefix that the greedy choices confirm is kept. 0 = off,
     * at most 32. Replies, events and margins are bitwise those of draft 0; only speed differs. */
    int draft;
    /* The decoder's numerics profile: RECALL_NUMERICS_EXACT (0, default) or RECALL_NUMERICS_Q8
     * (int8 layer matmuls; lm_head, attention and norms stay exact; the loop packs the decoder at
     * open). Replies, events and margins are then the q8 profile's (docs/PROFILES.md). */
    int numerics;
} recall_loop_opts;

typedef struct recall_loop recall_loop;

/* Fills o with the blob's defaults (faithful mode, RC_bge arm). */
void recall_loop_opts_init(const recall_model *m, recall_loop_opts *o);
/* o NULL = defaults. The loop borrows m: close the loop before the model. */
recall_status recall_loop_open(recall_model *m, const recall_loop_opts *o, recall_loop **out, recall_err *err);
void recall_loop_close(recall_loop *l);
/* Start of a new conversation (drops the state carried between turns; results do not depend on
 * it, only speed does). */
void recall_loop_reset(recall_loop *l);

typedef enum {
    RECALL_EV_TOKEN = 0, /* a generated id, streamed as it is chosen */
    RECALL_EV_REBUILD,   /* the cache was rebuilt: [BOS][SP][injected][window] */
    RECALL_EV_GATE,      /* the gate scored the evicted history */
    RECALL_EV_FIRE       /* the gate fired: retrieval ran */
} recall_event_kind;

typedef struct {
    recall_event_kind kind;
    int32_t token;          /* TOKEN */
    int c0;                 /* REBUILD / GATE / FIRE: generated-history length at the event */
    float score;            /* GATE / FIRE: gate score */
    int fired;              /* GATE: 1 if score > threshold */
    int injected;           /* FIRE: 0 when hysteresis / floor held the injection back */
    int n_candidates;       /* FIRE: sealed blocks scored */
    const int32_t *ids;     /* FIRE: the retrieved ids injected (valid during the callback) */
    int n_ids;
    int has_sp, inj_len, window_len, reused; /* REBUILD */
} recall_event;

/* Called on the turn's thread, in order, while the turn runs. Return 0 to go on; anything else
 * cancels the turn at that point: recall_turn returns RECALL_E_CANCELLED with an empty reply,
 * and the loop drops what it carried between turns (the next turn recomputes from its feed, so
 * its results are the same as if nothing had been cancelled). */
typedef int (*recall_event_fn)(void *ctx, const recall_event *ev);

typedef struct {
    int32_t *ids;      /* the reply (EOS not included); free with recall_reply_free */
    size_t n_ids;
    int n_gates, n_fires, n_rebuilds;
    float min_margin;  /* smallest top1 - top2 logit gap of a greedy choice; +inf if none */
} recall_reply;

/* One assistant turn: feed = the whole conversation so far (no BOS), ending with the open user
 * exchange (recall_chat_segment(..., assistant = NULL)). on_event may be NULL. On the recall arms
 * the feed, and any message in it, may be longer than the window (the window slides over it); the
 * FULL arm needs BOS + feed + turn_cap + 1 positions (RECALL_E_LIMIT with the numbers otherwise). */
recall_status recall_turn(recall_loop *l, const int32_t *feed, size_t n_feed, recall_event_fn on_event, void *ctx,
                          recall_reply *out, recall_err *err);
void recall_reply_free(const recall_loop *l, recall_reply *r);

#ifdef __cplusplus
}
#endif
#endif
