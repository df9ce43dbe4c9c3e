/* tokenize_wordpiece.h - BERT WordPiece (bert-base-uncased / bge), exact to HF tokenizers.
 *
 * Built from vocab.txt (token = line, id = line index, trailing whitespace trimmed; a string
 * listed twice keeps its LAST id, as HF's HashMap does) and tokenizer_config.json
 * (do_lower_case, strip_accents, tokenize_chinese_chars, model_max_length, the special token
 * strings). Special ids are looked up by string ("[CLS]" is 101 in bge-base, 2 in worldA).
 *
 * rc_wp_encode: the special tokens present in the vocab are matched in the raw text first
 * (leftmost-longest, as HF added tokens with normalized:false); every other span goes through
 * BertNormalizer (clean text, CJK spacing, NFD + drop Mn when stripping accents, Unicode
 * lowercase), BertPreTokenizer (split on whitespace, isolate each punctuation char) and greedy
 * longest-match WordPiece with "##" continuations ([UNK] for an unmatched word or one over
 * max_input_chars_per_word = 100 chars). The ids are then truncated to model_max_length (512):
 * with add_special the content keeps max_len - 2 ids and is wrapped as [CLS] ... [SEP].
 * rc_wp_decode: HF's WordPiece decoder ("##" joins, spaces otherwise, cleanup of " ." etc.).
 *
 * Invalid UTF-8 in encoder input is replaced by U+FFFD per maximal invalid subsequence (which
 * clean_text then drops, as HF drops U+FFFD); never an error. Section layout:
 * weights/FORMAT_TOKENIZERS.md. Returned ids / text are malloc'd; free() them.
 */
#ifndef RECALL_TOKENIZE_WORDPIECE_H
#define RECALL_TOKENIZE_WORDPIECE_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rc_wp rc_wp;

/* tokenizer_config_path may be NULL (BERT defaults: lowercase, 512, [CLS]/[SEP]/...). */
recall_status rc_wp_build(const char *vocab_txt_path, const char *tokenizer_config_path,
                          uint8_t **section, size_t *size, recall_err *err);
/* The same from a BERT tokenizer.json (model.vocab, BertNormalizer flags, added special tokens,
 * [CLS] $A [SEP] template); model_max_length still comes from tokenizer_config.json. Use this when
 * the model directory has a tokenizer.json: Hugging Face loads that file, not vocab.txt (worldA's
 * bge tokenizer.json holds only the 5 special tokens, so every word there encodes to [UNK]). */
recall_status rc_wp_build_from_json(const char *tokenizer_json_path,
                                    const char *tokenizer_config_path, uint8_t **section,
                                    size_t *size, recall_err *err);
recall_status rc_wp_load(const void *section, size_t size, rc_wp **out, recall_err *err);
void rc_wp_free(rc_wp *t);

recall_status rc_wp_encode(const rc_wp *t, const char *text, size_t len, int add_special,
                           int32_t **ids, size_t *n, recall_err *err);
recall_status rc_wp_decode(const rc_wp *t, const int32_t *ids, size_t n, int skip_special,
                           char **text, size_t *len, recall_err *err);

int32_t rc_wp_token_id(const rc_wp *t, const char *token_string); /* -1 if absent */
const char *rc_wp_token_str(const rc_wp *t, int32_t id, size_t *len);
int rc_wp_is_special(const rc_wp *t, int32_t id);
size_t rc_wp_vocab_size(const rc_wp *t);
size_t rc_wp_max_len(const rc_wp *t); /* model_max_length, 0 = unlimited */
int32_t rc_wp_cls_id(const rc_wp *t);
int32_t rc_wp_sep_id(const rc_wp *t);

#endif
