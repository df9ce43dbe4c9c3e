/* turn_json.h - one assistant turn of the recall loop (an rc_turn, recall_loop.h) as the fields of
 * a trace's turn object, in the schema of the loop goldens (docs/VERIFYING.md, "Loop traces"):
 *
 *   "reply": [ids], "reply_text": "...", "gates": [[c0, score, fired], ...],
 *   "fires": [{"c0", "score", "ncand", "bridge": [ncand], "top": [k], "rid": [ids], "injected"}],
 *   "rebuilds": [[c0, has_sp, inj_len, window_len], ...], ["rebuild_edge": [edge_len, ...],]
 *   "rebuild_reused": [...], "rows_computed", "rows_reused", "bert_encodes",
 *   "rebuild_top5": [[c0, [5 ids], [5 logits]], ...], "greedy_min_margin", "greedy_low_margin"
 *
 * without the braces and without the fields a caller knows before the turn runs (kind, user,
 * feed_len), which `recall replay --trace` writes first. One writer for the command line and the
 * library (recall_turn_trace), so that both give the same bytes. */
#ifndef RC_TURN_JSON_H
#define RC_TURN_JSON_H

#include "recall_loop.h"

#include <stdio.h>

struct rc_bpe;

/* edge: the loop's edge is RC_EDGE_INJECT, so each rebuild's edge span is listed too (a trace of
 * a loop without it keeps the schema it had before the option existed). The reply's text is
 * decoded with bpe; a reply that does not decode gets "". */
void rc_turn_json_fields(FILE *f, const rc_turn *t, const struct rc_bpe *bpe, int edge);

#endif
