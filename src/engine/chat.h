/* chat.h - the reference chat template and the benchmarks' two answer checks: the engine's part
 * of what the harness (src/harness/) scores, kept here because the public API exports them
 * (recall_chat_segment, recall_eval_recall_ok / _retrieved_ok, recall_longctx_exact).
 * The rules themselves are stated in eval.h (recall_ok, retrieved_ok) and longctx.h (exact match). */
#ifndef RECALL_CHAT_H
#define RECALL_CHAT_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

struct rc_bpe;

/* The reference chat template (docs/LOOP.md, "The turn and the chat template"), encoded without
 * added specials:
 *   [EOS string if with_eos] "<｜User｜>" user "<｜Assistant｜>" [assistant]
 * Special strings are matched inside the text, as the reference tokenizer does. */
recall_status rc_chat_segment(const struct rc_bpe *bpe, int eos_id, int with_eos, const char *user,
                              const char *assistant, int32_t **ids, size_t *n, recall_err *err);

/* 1 when `value`, without the characters of `drop` and ASCII lower-cased, occurs in `text` treated
 * the same way (an empty value occurs everywhere). recall_ok: drop ", "; retrieved_ok: drop ",". */
int rc_eval_contains(const char *text, const char *value, const char *drop);

/* The answer read from a reply's text (the exact-match rule of longctx.h) into answer[cap]; returns 1 when it equals
 * expected exactly. */
int rc_lctx_answer(const char *reply, const char *expected, char *answer, size_t cap);

#endif
