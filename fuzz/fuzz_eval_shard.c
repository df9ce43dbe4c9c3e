/* fuzz_eval_shard.c - libFuzzer target: arbitrary bytes as a `recall eval --shard` JSON document
 * (eval.h), the file `recall eval --merge` reads. The reader must refuse it with one line naming
 * the file, or accept it without reading outside the buffer. An accepted shard is merged alone
 * (the same-run checks, the cover of every job, the sums) and, when that succeeds, written to
 * /dev/null; two copies of it must then be refused (every job held twice). */
#include "eval.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int parse(const uint8_t *data, size_t size, rc_eval_shard *s, recall_err *err) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    return rc_eval_shard_parse(s, "fuzz.json", text, size, err) != RECALL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rc_eval_shard s[2];
    recall_err err = {0};
    if (parse(data, size, &s[0], &err)) {
        if (strncmp(err.msg, "fuzz.json", 9) != 0) abort(); /* a refusal names the file */
        rc_eval_shard_free(&s[0]);
        return 0;
    }
    rc_eval_merge m;
    recall_err e2 = {0};
    if (rc_eval_merge_plan(s, 1, &m, &e2) == RECALL_OK) {
        FILE *f = fopen("/dev/null", "w");
        if (!f || rc_eval_merge_write(f, s, 1, &m, &e2) != RECALL_OK) abort();
        fclose(f);
        rc_eval_merge_free(&m);
        recall_err e3 = {0};
        if (parse(data, size, &s[1], &e3)) abort(); /* the same bytes parse again */
        if (rc_eval_merge_plan(s, 2, &m, &e3) == RECALL_OK) abort(); /* every job twice */
        rc_eval_shard_free(&s[1]);
    }
    rc_eval_merge_free(&m);
    rc_eval_shard_free(&s[0]);
    return 0;
}
