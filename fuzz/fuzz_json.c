/* fuzz_json.c - libFuzzer target: arbitrary bytes through the JSON reader, then a walk of the
 * whole tree (every string length and element count must be consistent). */
#include "json.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t walk(const json_value *v, int depth) {
    if (depth > 300) abort(); /* the parser bounds nesting at 256 */
    size_t n = 1;
    if (v->type == JSON_STR && strlen(v->str) > v->len) abort();
    if (v->type == JSON_ARR || v->type == JSON_OBJ)
        for (size_t i = 0; i < v->len; i++) {
            if (v->type == JSON_OBJ && (!v->keys[i] || strlen(v->keys[i]) > v->key_lens[i])) abort();
            n += walk(&v->items[i], depth + 1);
        }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_doc *doc;
    recall_err err = {0};
    if (json_parse((const char *)data, size, "fuzz.json", &doc, &err) != RECALL_OK) return 0;
    (void)walk(json_root(doc), 0);
    (void)json_path(json_root(doc), "a.b.c");
    json_free(doc);
    return 0;
}
