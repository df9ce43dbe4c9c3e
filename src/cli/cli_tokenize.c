/* cli_tokenize.c - `recall tokenize` and `recall detokenize`.
 *
 *   recall tokenize BLOB [--bge] [--special] [--file F]   text (F, else stdin) -> JSON id array
 *   recall detokenize BLOB [--bge] [--skip-special]       JSON id array on stdin -> text
 * The tokenizer is the blob's RC_SECT_TOK_BPE section (Qwen2 byte-level BPE) or, with --bge,
 * RC_SECT_TOK_WORDPIECE. Exit codes: 0 ok, 1 error, 2 usage.
 */
#include "blob.h"
#include "cli.h"
#include "json.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct {
    rc_blob *blob;
    rc_bpe *bpe;
    rc_wp *wp;
} cli_tok;

static int open_tok(const char *path, int bge, cli_tok *t, recall_err *err) {
    memset(t, 0, sizeof *t);
    if (rc_blob_open(path, 0, &t->blob, err)) return 1;
    size_t size = 0;
    const void *sec = rc_blob_section(t->blob, bge ? RC_SECT_TOK_WORDPIECE : RC_SECT_TOK_BPE, &size);
    if (!sec) {
        rc_fail(err, RECALL_E_MISSING, "%s: no %s tokenizer section", path, bge ? "WordPiece" : "BPE");
        return 1;
    }
    return bge ? rc_wp_load(sec, size, &t->wp, err) != RECALL_OK
               : rc_bpe_load(sec, size, &t->bpe, err) != RECALL_OK;
}

static void close_tok(cli_tok *t) {
    rc_bpe_free(t->bpe);
    rc_wp_free(t->wp);
    if (t->blob) rc_blob_close(t->blob);
}

static int read_stream(FILE *f, char **out, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return 1;
    for (;;) {
        if (n == cap) {
            char *q = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!q) { free(buf); return 1; }
            buf = q;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) { free(buf); return 1; }
    *out = buf;
    *len = n;
    return 0;
}

int cli_tokenize(const cli_args *a) {
    const char *blob = a->pos[0], *file = a->file;
    const int bge = a->use_bge, special = a->special;
    recall_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (rc_read_file(file, &text, &len, &err)) { fprintf(stderr, "recall: %s\n", err.msg); return 1; }
    } else if (read_stream(stdin, &text, &len)) {
        fprintf(stderr, "recall: cannot read stdin\n");
        return 1;
    }
    cli_tok t;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = open_tok(blob, bge, &t, &err);
    if (!rc)
        rc = (bge ? rc_wp_encode(t.wp, text, len, special, &ids, &n, &err)
                  : rc_bpe_encode(t.bpe, text, len, special, &ids, &n, &err)) != RECALL_OK;
    if (rc) {
        fprintf(stderr, "recall: %s\n", err.msg);
    } else {
        putchar('[');
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
        puts("]");
    }
    free(ids);
    free(text);
    close_tok(&t);
    return rc;
}

int cli_detokenize(const cli_args *a) {
    const char *blob = a->pos[0];
    const int bge = a->use_bge, skip = a->skip_special;
    char *in = NULL;
    size_t len = 0;
    if (read_stream(stdin, &in, &len)) { fprintf(stderr, "recall: cannot read stdin\n"); return 1; }
    recall_err err = {0};
    json_doc *doc = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    size_t tl = 0;
    cli_tok t;
    memset(&t, 0, sizeof t);
    int rc = json_parse(in, len, "stdin", &doc, &err) != RECALL_OK;
    const json_value *arr = rc ? NULL : json_root(doc);
    if (!rc && (!arr || arr->type != JSON_ARR)) {
        rc_fail(&err, RECALL_E_FORMAT, "stdin: expected a JSON array of token ids");
        rc = 1;
    }
    if (!rc) {
        ids = malloc((arr->len + 1) * sizeof *ids);
        if (!ids) { rc_fail(&err, RECALL_E_NOMEM, "out of memory"); rc = 1; }
        for (size_t i = 0; !rc && i < arr->len; i++) {
            const json_value *v = &arr->items[i];
            if (v->type != JSON_NUM || !v->is_int || v->i < INT32_MIN || v->i > INT32_MAX) {
                rc_fail(&err, RECALL_E_FORMAT, "stdin: element %zu is not an integer id", i);
                rc = 1;
            } else {
                ids[i] = (int32_t)v->i;
            }
        }
    }
    if (!rc) rc = open_tok(blob, bge, &t, &err);
    if (!rc)
        rc = (bge ? rc_wp_decode(t.wp, ids, arr->len, skip, &text, &tl, &err)
                  : rc_bpe_decode(t.bpe, ids, arr->len, skip, &text, &tl, &err)) != RECALL_OK;
    if (rc) fprintf(stderr, "recall: %s\n", err.msg);
    else {
        fwrite(text, 1, tl, stdout);
        putchar('\n');
    }
    free(text);
    free(ids);
    json_free(doc);
    free(in);
    close_tok(&t);
    return rc;
}
