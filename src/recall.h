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
 *   - ABI (docs/API.md): the option structs begin with struct_size, the size of the struct as the
 *     caller was compiled; the *_init macros below set it (and zero the rest before the defaults).
 *     The library reads only those bytes: a field the caller's struct does not reach keeps its
 *     default, and bytes past the fields this library knows must be zero (RECALL_E_VERSION
 *     otherwise, naming both sizes). Fields are only ever appended, and zero means the default of
 *     each. Programs built against the header of API version 1 (structs without struct_size) keep
 *     working: the plain symbols recall_open, recall_open_mem, recall_loop_open,
 *     recall_open_opts_init and recall_loop_opts_init keep the version-1 layouts; this header maps
 *     those names to the *2 entry points. The output structs (recall_model_info, recall_reply,
 *     recall_event, recall_allocator, recall_err) are frozen: they never grow.
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

#define RECALL_API_VERSION 7 /* 2: struct_size in the option structs; 3: pooler_cache_mb, kv, numerics; 4: edge; 5: span, rerank; 6: rerank single; 7: captures, score, encoder, pooler, heads, turn traces */

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

/* KV cache storage (recall_open_opts.kv, recall_loop_opts.kv). */
typedef enum { RECALL_KV_F32 = 0, RECALL_KV_F16 = 1 } recall_kv;

typedef struct {
    size_t struct_size; /* sizeof this struct as the caller was compiled: recall_open_opts_init sets it */
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
    /* KV cache storage of recall_forward's decoder: RECALL_KV_F32 (the default, exact) or
     * RECALL_KV_F16 (binary16: half the bytes; K and V rounded to nearest even as they enter the
     * cache, the math fp32; an approximation, deterministic like the rest). */
    recall_kv kv;
    /* The numerics profile of recall_forward's decoder: RECALL_NUMERICS_EXACT (0, the default:
     * the reference fp32 order, bitwise the same everywhere) or RECALL_NUMERICS_Q8 (int8 layer
     * matmuls, deterministic in their own right; packs the decoder at the first recall_forward and
     * counts it against max_memory). Its distance to exact: docs/PROFILES.md. */
    int numerics;
    /* New fields go here, at the end; zero must mean the default. */
} recall_open_opts;

/* Zeroes the caller's struct_size bytes, then sets struct_size and the defaults (all zero). */
void recall_open_opts_init2(recall_open_opts *o, size_t struct_size);
#define recall_open_opts_init(o) recall_open_opts_init2((o), sizeof *(o))

/* o may be NULL (defaults). On failure *out is NULL. A struct_size below this API's first layout,
 * or unknown nonzero bytes past the known fields, are refused (RECALL_E_ARG / RECALL_E_VERSION). */
recall_status recall_open2(const char *path, const recall_open_opts *o, recall_model **out, recall_err *err);
#define recall_open recall_open2
/* A blob already in memory; buf must outlive the model (it is not copied). */
recall_status recall_open_mem2(const void *buf, size_t len, const recall_open_opts *o, recall_model **out,
                               recall_err *err);
#define recall_open_mem recall_open_mem2
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
/* The reference chat template for one exchange (docs/LOOP.md):
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
/* recall_loop_opts.edge (since API version 4; docs/LOOP.md, "The window's edge"). */
enum { RECALL_EDGE_OFF = 0, RECALL_EDGE_INJECT = 1, RECALL_EDGE_EXCHANGE = 2 };
/* recall_loop_opts.span (since API version 5; docs/LOOP.md, "Whole exchanges"). */
enum { RECALL_SPAN_BLOCK = 0, RECALL_SPAN_EXCHANGE = 1 };
/* recall_loop_opts.rerank (since API version 5; docs/LOOP.md, "Words the user asked in"). */
enum { RECALL_RERANK_OFF = 0, RECALL_RERANK_WORDS = 1, RECALL_RERANK_SINGLE = 2 /* since API version 6 */ };

typedef struct {
    size_t struct_size; /* sizeof this struct as the caller was compiled: recall_loop_opts_init sets it */
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
    const char *simd; /* NULL = RECALL_SIMD or the best path; scalar|avx2|avx512|neon|wasm (same bits) */
    /* The FULL arm's instance context: the positions its KV cache may grow to (it allocates only
     * what the conversation uses). 0 = the model's max_pos; above max_pos the open fails with
     * RECALL_E_LIMIT naming both numbers. */
    int max_ctx;
    /* Exact speculative decoding: up to `draft` tokens guessed by prompt lookup (the longest
     * recent n-gram of the conversation, continued as it continued before) are verified in one
     * multi-row forward; the longest prefix that the greedy choices confirm is kept. 0 = off,
     * at most 32. Replies, events and margins are bitwise those of draft 0; only speed differs. */
    int draft;
    /* Memory for the pooler's K/V cache, in MiB: the key and value rows of the oldest evicted
     * tokens (36 KiB per token at the 1.5B shape) are kept between rebuilds instead of being
     * recomputed, so a rebuild's pooler time grows far slower with the history; tokens past the
     * budget are recomputed every rebuild. 0 = the default (256 MiB), < 0 = no cache. With
     * open_opts.max_memory set, the cache gets at most what the limit leaves after the loop's
     * own needs. Replies and events are bitwise the same for every value; only speed and memory
     * differ. */
    int pooler_cache_mb;
    /* KV cache storage of the loop's decoders (as recall_open_opts.kv); RECALL_KV_F16 halves the
     * KV bytes and changes the results (measured distance in docs/KV.md). */
    recall_kv kv;
    /* The decoder's numerics profile: RECALL_NUMERICS_EXACT (0, default) or RECALL_NUMERICS_Q8
     * (int8 layer matmuls; lm_head, attention and norms stay exact; the loop packs the decoder at
     * open). Replies, events and margins are then the q8 profile's (docs/PROFILES.md). */
    int numerics;
    /* The window's edge: RECALL_EDGE_OFF (0, default, the reference layout) or RECALL_EDGE_INJECT
     * (clean mode only; RECALL_E_ARG in faithful mode, which reproduces the reference): while an
     * injection is alive, the text around the window's start (the last block evicted and the
     * window's first block) is injected too when the bridge head scores it at least as high as
     * the weakest block the fire injected, so that a fact straddling the window's start stays
     * whole while the reply is written. Up to 2 x block more positions. Since API version 4.
     * RECALL_EDGE_EXCHANGE (clean mode only; since API version 5): the window starts where the
     * exchange it would cut starts (after the EOS that closed the one before, at most 2 x block
     * earlier), so a fact at the window's start stays whole in view while the reply is written. */
    int edge;
    /* What a fire injects: RECALL_SPAN_BLOCK (0, default, the reference: the chosen blocks as
     * sealed) or RECALL_SPAN_EXCHANGE (clean mode only; RECALL_E_ARG in faithful mode): each chosen
     * block widened to the exchanges it cuts (a user's message and the reply, closed by EOS; up to
     * block / 2 ids each way, inside the evicted
     * history), so that a fact sealed across two blocks is injected whole. The choice of blocks
     * is the same. Up to k x block more positions. Since API version 5. */
    int span;
    /* How a fire chooses: RECALL_RERANK_OFF (0, default, the reference: the bridge head's top k)
     * or RECALL_RERANK_WORDS (clean mode only; RECALL_E_ARG in faithful mode): the top k of the
     * bridge head's scores added to a score by the words of the user's message being answered
     * (each scaled to [0, 1] over the candidates). Since API version 5. RECALL_RERANK_SINGLE (since
     * API version 6; clean mode only): the same, and when one candidate's word score is above every
     * other's and it leads the sum, that candidate alone is injected. */
    int rerank;
    /* New fields go here, at the end; zero must mean the default. */
} recall_loop_opts;

typedef struct recall_loop recall_loop;

/* Zeroes the caller's struct_size bytes, then sets struct_size and the blob's defaults (faithful
 * mode, RC_bge arm). */
void recall_loop_opts_init2(const recall_model *m, recall_loop_opts *o, size_t struct_size);
#define recall_loop_opts_init(m, o) recall_loop_opts_init2((m), (o), sizeof *(o))
/* o NULL = defaults; struct_size as for recall_open. The loop borrows m: close the loop before
 * the model. */
recall_status recall_loop_open2(recall_model *m, const recall_loop_opts *o, recall_loop **out, recall_err *err);
#define recall_loop_open recall_loop_open2
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
/* The last recall_turn's speculative decoding (recall_loop_opts.draft > 0): tokens guessed by
 * prompt lookup and verified, and those kept (both 0 with draft 0). recall_reply is frozen, so the
 * counts are read here. Since API version 3. */
recall_status recall_loop_draft_stats(const recall_loop *l, long *drafted, long *accepted, recall_err *err);

/* ---- the stages one at a time (since API version 7) ---------------------------------------
 * What `recall forward --dump`, `score`, `embed`, `pool` and `heads` compute, for a caller that
 * checks each stage against its own reference (docs/VERIFYING.md). Every output buffer comes with
 * its length in elements; one shorter than the model needs is refused (RECALL_E_ARG, both numbers
 * named) before anything is computed. */

/* The shapes of the stages, written into the caller's struct_size bytes (a struct of an older
 * header gets its fields; the fields a newer header added stay as the caller set them). Fields
 * of a stage the blob lacks are 0. */
typedef struct {
    size_t struct_size;       /* sizeof this struct as the caller was compiled: the macro sets it */
    int vocab, max_pos, hidden, layers, bos_id, eos_id; /* as recall_model_info */
    int heads, kv_heads, head_dim; /* the decoder's attention: q_proj rows are heads x head_dim */
    int n_gate;               /* layers whose q_proj the gate reads (gate_layers[0 .. n_gate)) */
    int gate_layers[8];
    int gate_dim;             /* the gate's feature: n_gate x heads x head_dim */
    float gate_threshold;     /* the gate file's threshold (fires when score > it) */
    int bridge_qdim, bridge_kdim; /* the bridge head's inputs: a gate feature, a BERT embedding */
    int bert_hidden, bert_max_ids; /* the encoder's embedding width and its longest input */
    int n_sp, pooler_hidden;  /* the pooler's soft tokens [n_sp][pooler_hidden] */
} recall_model_dims;
void recall_model_get_dims2(const recall_model *m, recall_model_dims *out, size_t struct_size);
#define recall_model_get_dims(m, o) recall_model_get_dims2((m), (o), sizeof *(o))

/* Where recall_forward_capture writes (NULL or a zero length: not captured). Initialise with
 * recall_forward_out_init; fields are only ever appended. */
typedef struct {
    size_t struct_size;
    float *logits;      size_t logits_len;      /* [n][vocab]: every position's logits */
    float *logits_last; size_t logits_last_len; /* [vocab]: the last position's */
    float *hidden;      size_t hidden_len;      /* [layers + 1][hidden]: Hugging Face's hidden_states
                                                   at the last position (0 = embeddings, i = input of
                                                   layer i, layers = after the final norm) */
    float *q_gate;      size_t q_gate_len;      /* [n_gate][n][heads x head_dim]: q_proj of every
                                                   position at the gate layers, before RoPE */
} recall_forward_out;
void recall_forward_out_init2(recall_forward_out *o, size_t struct_size);
#define recall_forward_out_init(o) recall_forward_out_init2((o), sizeof *(o))
/* The decoder from position 0 over ids[0..n) in one pass (as recall_forward; the same bits as
 * `recall forward --dump`), writing the captures out asks for. */
recall_status recall_forward_capture(recall_model *m, const int32_t *ids, size_t n, const recall_forward_out *out,
                                     recall_err *err);

/* Teacher-forced scoring from position 0 (`recall score --per-position` on one chunk of n ids):
 * for j in 0 .. n-2, with the fp32 logits of position j and the target ids[j+1],
 *   nll[j] = -(logit[target] - lse) in double, lse = max + log(sum exp((double)logit - max)),
 *   greedy[j] = argmax of the logits (the lowest id on ties).
 * n must be 2 .. max_pos; out_len >= n - 1. Either output may be NULL. */
recall_status recall_score(recall_model *m, const int32_t *ids, size_t n, double *nll, int32_t *greedy,
                           size_t out_len, recall_err *err);

/* The blob's BERT WordPiece tokenizer: len bytes of UTF-8 as [CLS] ... [SEP] (what `recall embed`
 * encodes). *ids: free with recall_free. */
recall_status recall_bert_tokenize(recall_model *m, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                                   recall_err *err);
/* The encoder: emb[0 .. bert_hidden) = the L2-normalised CLS embedding of ids[0..n)
 * (1 <= n <= bert_max_ids). */
recall_status recall_embed(recall_model *m, const int32_t *ids, size_t n, float *emb, size_t emb_len,
                           recall_err *err);
/* The pooler (AttnPoolSP): the decoder's embeddings of ids[0..n) squeezed into
 * sp[n_sp][pooler_hidden] (`recall pool --dump`); n may be 0. */
recall_status recall_pool(recall_model *m, const int32_t *ids, size_t n, float *sp, size_t sp_len,
                          recall_err *err);
/* The gate on a feature q[gate_dim] (a position's q_gate rows, layer after layer): its score, and
 * *fires = score > gate_threshold. fires may be NULL. */
recall_status recall_gate(recall_model *m, const float *q, size_t q_len, float *score, int *fires, recall_err *err);
/* The bridge head: the score of a block embedded as emb[bridge_kdim] for the gate feature
 * q[bridge_qdim]. */
recall_status recall_bridge(recall_model *m, const float *q, size_t q_len, const float *emb, size_t emb_len,
                            float *score, recall_err *err);

/* The last recall_turn of l as the fields of a trace's turn object, the bytes `recall replay
 * --trace` writes after "kind", "user" and "feed_len" (docs/VERIFYING.md, "Loop traces"),
 * between braces: {"reply": [...], "reply_text": ..., "gates": ..., "fires": ..., ...}.
 * NUL-terminated; free with recall_free on the loop's model. RECALL_E_ARG before the first turn
 * or after a cancelled one. */
recall_status recall_turn_trace(const recall_loop *l, char **json, size_t *len, recall_err *err);

/* ---- scoring: the numbers `recall eval` and `recall longctx` report ------------------------ */

/* The recall benchmark's checks of a question turn: recall_ok = the fact's value, without commas
 * and spaces and ASCII lower-cased, occurs in the reply's text treated the same way;
 * retrieved_ok = the same without commas only, in the decoded text of an injected block.
 * 1 or 0 (an empty value occurs everywhere). */
int recall_eval_recall_ok(const char *reply_text, const char *value);
int recall_eval_retrieved_ok(const char *block_text, const char *value);
/* The long-context tasks' exact match: the reply's text after its last "</think>" (if any), from
 * its first non-blank character to the next newline, trailing whitespace trimmed, equals
 * `expected`. 1 or 0. */
int recall_longctx_exact(const char *reply_text, const char *expected);

#ifdef __cplusplus
}
#endif
#endif
