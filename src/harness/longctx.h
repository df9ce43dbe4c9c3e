/* longctx.h - deterministic exact-answer cases for long context (docs/LONG_CONTEXT.md,
 * REQ-CTX-003 / REQ-CTX-005): a single needle, a needle among three distractor keys,
 * variable tracking, each hidden in a pinned haystack at a requested depth and put through the
 * reference chat template (docs/LOOP.md). `recall longctx` (src/cli/cli_longctx.c) answers
 * them greedily on the FULL, SP and RC_bge arms.
 *
 * The haystack: printable-ASCII text (tab and newline allowed; any other byte is refused), so a
 * token boundary is a byte boundary. It is tokenized once with the blob's BPE: n tokens.
 *
 * A case (task T, length N, depth D, seed S) is built as:
 *   rng      splitmix64 seeded from XXH64 of (S, T, N, D) (rc_lctx_case_seed): a case does not
 *            depend on which other lengths / depths were asked for.
 *   answer   a 6-digit decimal number (100000..999999) that does not occur in the haystack slice.
 *   inserts  needle:   "The special magic number is V." at D
 *            multikey: "The special magic number for KEY is V." for 4 distinct keys: the asked
 *                      one at D, three distractors (other keys and values) at seeded depths
 *            vartrack: "VAR A = V.", "VAR B = VAR A.", "VAR C = VAR B.", "VAR D = VAR C."
 *                      (names of 5 capitals): the first at D, the hops at seeded depths in [D, 1],
 *                      in chain order; the question asks for VAR D
 *            each insert is "\n\n" + sentence + "\n\n".
 *   user     INTRO + haystack[off : off+H] with every insert spliced in at haystack token
 *            round(depth x H) (ties in insert order) + "\n\n" + QUESTION
 *   prompt   rc_chat_segment(user) = "<｜User｜>" user "<｜Assistant｜>" (no BOS: the loop adds it)
 *   H, off   H is searched so that the prompt holds exactly N tokens (else the longest prompt
 *            below N found): prompt_tokens <= N always. off = floor(u x (n - H + 1)) with u
 *            uniform in [0, 1) from the rng. A haystack with fewer than H tokens fails
 *            (RECALL_E_LIMIT naming both numbers); so does an N below the case's fixed text.
 * Depth, measured on the prompt's tokens: the context is the tokens from the first one holding a
 * haystack byte (after INTRO) up to the first one holding a byte of the question; its haystack
 * tokens are those not holding a byte of an insert. depth_actual = (haystack tokens before the
 * key insert) / (haystack tokens in the context). The key insert is the needle, the asked key,
 * or the value assignment VAR A = V.
 * Exact match (rc_lctx_answer): the reply text (special tokens skipped) after its last "</think>"
 * if any, leading whitespace skipped, cut at the next newline, trailing whitespace trimmed,
 * equals the expected digits.
 * The answer recorded is that text, cut to whole UTF-8 characters if it does not fit.
 */
#ifndef RECALL_LONGCTX_H
#define RECALL_LONGCTX_H

#include "chat.h" /* rc_lctx_answer: the exact-match rule below */
#include "status.h"

#include <stddef.h>
#include <stdint.h>

struct rc_bpe;

typedef enum { RC_LCTX_NEEDLE = 0, RC_LCTX_MULTIKEY, RC_LCTX_VARTRACK, RC_LCTX_NTASKS } rc_lctx_task;

const char *rc_lctx_task_name(rc_lctx_task t);
/* "needle" / "multikey" / "vartrack" -> 0, else -1. */
int rc_lctx_task_parse(const char *s, rc_lctx_task *out);

/* The haystack text and its tokens (byte offset of every token boundary). */
typedef struct {
    char *text;
    size_t len;
    int32_t *ids;
    int n;         /* tokens */
    size_t *off;   /* n + 1 byte offsets: token i is text[off[i] .. off[i+1]) */
    uint64_t xxh64; /* of the text bytes */
} rc_lctx_haystack;

/* From text (copied): refuses a byte outside printable ASCII, tab and newline, and text that
 * already holds an insert's marker ("magic number", "VAR "), naming the offset. `what` names
 * the text in errors (a path). */
recall_status rc_lctx_haystack_from_text(const struct rc_bpe *bpe, const char *text, size_t len, const char *what,
                                         rc_lctx_haystack *out, recall_err *err);
recall_status rc_lctx_haystack_load(const struct rc_bpe *bpe, const char *path, rc_lctx_haystack *out,
                                    recall_err *err);
void rc_lctx_haystack_free(rc_lctx_haystack *h);

#define RC_LCTX_MAX_INSERTS 4

typedef struct {
    rc_lctx_task task;
    int len;                 /* N requested */
    double depth;            /* D requested, in [0, 1] */
    uint64_t seed;           /* S */
    int32_t *ids;            /* the prompt: n_ids <= len tokens */
    int n_ids;
    uint64_t ids_xxh64;      /* rc_xxh64_ids(ids) */
    char *user;              /* the user message */
    char question[128];
    char expected[8];        /* 6 digits */
    int hay_off, hay_tokens; /* the haystack slice: tokens [hay_off, hay_off + hay_tokens) */
    int n_inserts, key;      /* inserts in prompt order; key: the one the question asks about */
    int ins_first[RC_LCTX_MAX_INSERTS], ins_last[RC_LCTX_MAX_INSERTS]; /* prompt token span, inclusive */
    double ins_depth[RC_LCTX_MAX_INSERTS];                             /* requested */
    int ctx_first, ctx_end;  /* the context's token span [first, end) */
    double depth_actual;
} rc_lctx_case;

/* The case's rng seed (see above). */
uint64_t rc_lctx_case_seed(uint64_t seed, rc_lctx_task task, int len, double depth);

/* Builds one case. */
recall_status rc_lctx_build(const struct rc_bpe *bpe, const rc_lctx_haystack *h, rc_lctx_task task, int len,
                            double depth, uint64_t seed, rc_lctx_case *out, recall_err *err);
void rc_lctx_case_free(rc_lctx_case *c);


#endif
