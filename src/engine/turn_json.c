/* turn_json.c - an rc_turn as the fields of a loop trace's turn object (turn_json.h). */
#include "turn_json.h"

#include "json.h"
#include "tokenize_bpe.h"

#include <stdlib.h>

void rc_turn_json_fields(FILE *f, const rc_turn *t, const rc_bpe *bpe, int edge) {
    char *text = NULL;
    size_t tl = 0;
    recall_err err = {0};
    if (rc_bpe_decode(bpe, t->reply, (size_t)t->n_reply, 0, &text, &tl, &err)) text = NULL;
    fputs("\"reply\": ", f);
    rc_json_put_ids(f, t->reply, t->n_reply);
    fputs(", \"reply_text\": ", f);
    rc_json_put_str(f, text ? text : "");
    free(text);
    fputs(", \"gates\": [", f);
    for (int i = 0; i < t->n_gates; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->gates[i].c0);
        rc_json_put_num(f, t->gates[i].score);
        fprintf(f, ", %s]", t->gates[i].fired ? "true" : "false");
    }
    fputs("], \"fires\": [", f);
    for (int i = 0; i < t->n_fires; i++) {
        const rc_fire_rec *r = &t->fires[i];
        fprintf(f, "%s{\"c0\": %d, \"score\": ", i ? ", " : "", r->c0);
        rc_json_put_num(f, r->score);
        fprintf(f, ", \"ncand\": %d, \"bridge\": [", r->ncand);
        for (int c = 0; c < r->ncand; c++) {
            if (c) fputs(", ", f);
            rc_json_put_num(f, r->bridge[c]);
        }
        fputs("], \"top\": ", f);
        rc_json_put_ids(f, r->top, r->ntop);
        fputs(", \"rid\": ", f);
        rc_json_put_ids(f, r->rid, r->nrid);
        fprintf(f, ", \"injected\": %s}", r->injected ? "true" : "false");
    }
    fputs("], \"rebuilds\": [", f);
    for (int i = 0; i < t->n_rebuilds; i++)
        fprintf(f, "%s[%d, %d, %d, %d]", i ? ", " : "", t->rebuilds[i].c0, t->rebuilds[i].has_sp,
                t->rebuilds[i].inj_len, t->rebuilds[i].window_len);
    if (edge) {
        fputs("], \"rebuild_edge\": [", f); /* the edge span's tokens of each rebuild (--edge inject) */
        for (int i = 0; i < t->n_rebuilds; i++) fprintf(f, "%s%d", i ? ", " : "", t->rebuilds[i].edge_len);
    }
    fputs("], \"rebuild_reused\": [", f); /* prefix rows each rebuild kept (fast schedule) */
    for (int i = 0; i < t->n_rebuilds; i++) fprintf(f, "%s%d", i ? ", " : "", t->rebuilds[i].reused);
    fprintf(f, "], \"rows_computed\": %ld, \"rows_reused\": %ld, \"bert_encodes\": %d", t->rows_computed,
            t->rows_reused, t->bert_encodes);
    fputs(", \"rebuild_top5\": [", f);
    for (int i = 0; i < t->n_top5; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->top5[i].c0);
        rc_json_put_ids(f, t->top5[i].ids, 5);
        fputs(", [", f);
        for (int k = 0; k < 5; k++) {
            if (k) fputs(", ", f);
            rc_json_put_num(f, t->top5[i].logits[k]);
        }
        fputs("]]", f);
    }
    fputs("], \"greedy_min_margin\": ", f);
    rc_json_put_num(f, t->min_margin);
    fputs(", \"greedy_low_margin\": [", f);
    for (int i = 0; i < t->n_low; i++) {
        fprintf(f, "%s[%d, ", i ? ", " : "", t->low[i].pos);
        rc_json_put_num(f, t->low[i].margin);
        fputc(']', f);
    }
    fputc(']', f);
}
