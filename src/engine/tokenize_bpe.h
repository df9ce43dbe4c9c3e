/* tokenize_bpe.h - Qwen2 / DeepSeek-R1 byte-level BPE, exact to Hugging Face tokenizers (Rust).
 *
 * Pipeline of rc_bpe_encode (the one of HF's tokenizer.json it accepts):
 *   1. added tokens (normalized:false) are found in the raw text, leftmost-longest, and split
 *      out as single ids;
 *   2. every other span: NFC, then the Qwen2 Split regex (hand-written scanner, see .c),
 *      then ByteLevel bytes->chars, then BPE merges by rank;
 *   3. add_special != 0: the TemplateProcessing ids around the sequence (BOS for R1).
 * rc_bpe_decode: id -> token string (skipping special added tokens on request, ids out of range
 * dropped as HF does), ByteLevel chars -> bytes, then UTF-8 repair with one U+FFFD per maximal
 * invalid subsequence (Rust String::from_utf8_lossy).
 *
 * Invalid UTF-8 in encoder input is NOT an error: each maximal invalid subsequence is replaced
 * by U+FFFD (the bytes EF BF BD) before anything else, exactly as Rust's from_utf8_lossy /
 * Python's errors="replace" would; NUL bytes are ordinary characters (len is authoritative).
 *
 * Binary section layout (RC_SECT_TOK_BPE): weights/FORMAT_TOKENIZERS.md.
 * Returned ids / text are malloc'd; the caller frees them with free().
 */
#ifndef RECALL_TOKENIZE_BPE_H
#define RECALL_TOKENIZE_BPE_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rc_bpe rc_bpe;

/* Validates tokenizer.json (every component must be one this implementation reproduces
 * exactly; others fail with RECALL_E_UNSUPPORTED / RECALL_E_MISSING naming the JSON path) and
 * serialises it. tokenizer_config_path may be NULL (it is only checked to be JSON). */
recall_status rc_bpe_build_from_json(const char *tokenizer_json_path,
                                     const char *tokenizer_config_path, uint8_t **section,
                                     size_t *size, recall_err *err);
/* Parses a section (hostile input: every offset and id is bounds-checked). The section bytes
 * are not referenced after return. */
recall_status rc_bpe_load(const void *section, size_t size, rc_bpe **out, recall_err *err);
void rc_bpe_free(rc_bpe *t);

recall_status rc_bpe_encode(const rc_bpe *t, const char *text, size_t len, int add_special,
                            int32_t **ids, size_t *n, recall_err *err);
/* *text is NUL-terminated valid UTF-8; *len excludes the NUL. */
recall_status rc_bpe_decode(const rc_bpe *t, const int32_t *ids, size_t n, int skip_special,
                            char **text, size_t *len, recall_err *err);

int32_t rc_bpe_token_id(const rc_bpe *t, const char *token_string); /* -1 if absent */
/* Token string (byte-level form for model tokens) or NULL; *len gets its byte length. */
const char *rc_bpe_token_str(const rc_bpe *t, int32_t id, size_t *len);
int rc_bpe_is_special(const rc_bpe *t, int32_t id);
/* 1 for any added token (tokenizer.json's added_tokens, special or not: "<｜User｜>",
 * "<｜Assistant｜>", "<think>" as well as BOS / EOS): the chat template's markers. */
int rc_bpe_is_added(const rc_bpe *t, int32_t id);
size_t rc_bpe_vocab_size(const rc_bpe *t); /* max id + 1 */

#endif
