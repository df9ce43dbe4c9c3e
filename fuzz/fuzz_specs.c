/* fuzz_specs.c - libFuzzer target: the two option strings parsed in the library, every input
 * through both: `--rope-scaling` (rc_rope_parse) and `--kv-pages` (rc_kvp_parse). Each accepts or
 * refuses with a message; what one accepts must be in range and parse again, printed back in its
 * canonical spelling, to the same value; a refusal leaves a message. */
#include "kv_pages.h"
#include "rope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 256) return 0;
    char text[257];
    memcpy(text, data, size);
    text[size] = 0; /* the CLI hands over C strings: an embedded NUL ends it there */

    rc_rope_profile p;
    recall_err err = {0};
    if (rc_rope_parse(text, &p, &err) == RECALL_OK) {
        recall_err e2 = {0};
        if (p.type != RC_ROPE_YARN || rc_rope_check(&p, "fuzz", &e2) != RECALL_OK) abort();
        if (rc_rope_trained_positions(&p, 0) < 1 || rc_rope_trained_positions(&p, 0) > (1 << 24)) abort();
        char again[128], line[256];
        snprintf(again, sizeof again, "yarn:%.17g:%lld", p.factor, (long long)p.orig);
        rc_rope_profile q;
        if (rc_rope_parse(again, &q, &e2) != RECALL_OK || memcmp(&p, &q, sizeof p)) abort();
        rc_rope_describe(&p, 4096, line, sizeof line);
        if (!strstr(line, "yarn:")) abort();
    } else if (err.code == RECALL_OK || !err.msg[0]) {
        abort();
    }

    rc_kv_pages_opts o = {0};
    recall_err ek = {0};
    if (rc_kvp_parse(text, &o, &ek) == RECALL_OK) {
        if (o.page < 1 || o.page > 65536 || o.budget < 0 || o.budget > (1 << 30)) abort();
        char again[64];
        snprintf(again, sizeof again, "%d:%d", o.page, o.budget);
        rc_kv_pages_opts q = {0};
        recall_err e2 = {0};
        if (rc_kvp_parse(again, &q, &e2) != RECALL_OK || q.page != o.page || q.budget != o.budget) abort();
    } else if (ek.code == RECALL_OK || !ek.msg[0]) {
        abort();
    }
    return 0;
}
