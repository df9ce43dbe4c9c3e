/* json.h - a small strict JSON (RFC 8259) reader for config.json, tokenizer.json,
 * safetensors headers, npy headers (after translation) and the benchmark file.
 *
 * The whole document is parsed into one arena; json_free releases everything. Strings are
 * decoded UTF-8 (escapes resolved, surrogate pairs joined, NUL allowed: use .len).
 * Object keys keep their document order. Errors name the byte offset.
 */
#ifndef RECALL_JSON_H
#define RECALL_JSON_H

#include "status.h"

#include <stdint.h>
#include <stdio.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    size_t offset;       /* byte offset of the value in the source text */
    int is_int;          /* JSON_NUM: literal had no fraction/exponent and fits int64 */
    int64_t i;           /* JSON_NUM: exact value when is_int */
    double num;          /* JSON_NUM: value as double; JSON_BOOL: 0 or 1 */
    const char *str;     /* JSON_STR: NUL-terminated decoded text */
    size_t len;          /* JSON_STR: byte length; JSON_ARR/JSON_OBJ: element count */
    json_value *items;   /* JSON_ARR: elements; JSON_OBJ: values */
    const char **keys;   /* JSON_OBJ: keys (NUL-terminated) */
    size_t *key_lens;    /* JSON_OBJ: key byte lengths */
};

typedef struct json_doc json_doc;

/* Parses text[0..len). `what` names the source in error messages (e.g. a file path). */
recall_status json_parse(const char *text, size_t len, const char *what, json_doc **out,
                         recall_err *err);
const json_value *json_root(const json_doc *doc);
void json_free(json_doc *doc);

/* Lookups; return NULL when absent or of another type. */
const json_value *json_get(const json_value *obj, const char *key);
const json_value *json_get_type(const json_value *obj, const char *key, json_type t);
/* Dotted path lookup through objects, e.g. "rope_parameters.rope_theta". */
const json_value *json_path(const json_value *root, const char *dotted);

const char *json_type_name(json_type t);

/* Exact tests on a value that may be NULL (absent): a string equal to s, the literal false / true. */
int json_is_str(const json_value *v, const char *s);
int json_is_false(const json_value *v);
int json_is_true(const json_value *v);

/* Writing JSON (the CLI's documents): a string with ", \ and control characters escaped; a
 * number with 9 significant digits (a float, or a double made from one, reads back to the same
 * value), non-finite as null (JSON has no infinities); an array of ids "[1, 2, 3]". */
void rc_json_put_str(FILE *f, const char *s);
void rc_json_put_num(FILE *f, double x);
void rc_json_put_ids(FILE *f, const int32_t *ids, int n);

/* Reads a whole file into a malloc'd NUL-terminated buffer. */
recall_status rc_read_file(const char *path, char **out, size_t *len, recall_err *err);
/* Reads and parses a JSON file (errors name the path); json_free *doc. */
recall_status json_read_file(const char *path, json_doc **doc, recall_err *err);

#endif
