/* json.c - strict JSON reader into one arena (see json.h). Recursion is bounded so hostile
 * input cannot exhaust the stack. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 256

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_chunk;

struct json_doc {
    arena_chunk *chunks;
    json_value root;
};

typedef struct {
    const char *s;
    size_t n, p;
    const char *what;
    json_doc *doc;
    recall_err *err;
    int depth;
} parser;

static void *arena_alloc(json_doc *d, size_t size) {
    size = (size + 15u) & ~(size_t)15u;
    arena_chunk *c = d->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > (1u << 20) ? size : (1u << 20);
        arena_chunk *nc = malloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->next = d->chunks;
        nc->used = 0;
        nc->cap = cap;
        d->chunks = nc;
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

static recall_status perr(parser *ps, const char *msg) {
    return rc_fail(ps->err, RECALL_E_FORMAT, "%s: JSON error at byte %zu: %s", ps->what, ps->p,
                   msg);
}

static void skip_ws(parser *ps) {
    while (ps->p < ps->n) {
        char c = ps->s[ps->p];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            ps->p++;
        else
            break;
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_u16(parser *ps, unsigned *out) {
    if (ps->n - ps->p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(ps->s[ps->p + i]);
        if (h < 0) return 0;
        v = v * 16 + (unsigned)h;
    }
    ps->p += 4;
    *out = v;
    return 1;
}

static size_t put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses a string starting at the opening quote. Decoded text is never longer than the source. */
static recall_status parse_string(parser *ps, const char **out, size_t *out_len) {
    size_t start = ++ps->p, end = start;
    while (end < ps->n && ps->s[end] != '"') {
        if (ps->s[end] == '\\') end++;
        end++;
    }
    if (end >= ps->n) return perr(ps, "unterminated string");
    unsigned char *o = arena_alloc(ps->doc, end - start + 1);
    if (!o) return rc_fail(ps->err, RECALL_E_NOMEM, "%s: out of memory parsing JSON", ps->what);
    size_t k = 0;
    while (ps->p < end) {
        unsigned char c = (unsigned char)ps->s[ps->p];
        if (c < 0x20) return perr(ps, "control character in string");
        if (c != '\\') { o[k++] = c; ps->p++; continue; }
        ps->p++;
        char e = ps->s[ps->p++];
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_u16(ps, &cp)) return perr(ps, "bad \\u escape");
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (ps->p + 6 <= end && ps->s[ps->p] == '\\' && ps->s[ps->p + 1] == 'u') {
                    ps->p += 2;
                    if (!read_u16(ps, &lo)) return perr(ps, "bad \\u escape");
                    if (lo >= 0xDC00 && lo < 0xE000)
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    else {
                        k += put_utf8(o + k, 0xFFFD); /* lone high surrogate, as serde does lossy */
                        cp = lo;
                    }
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            k += put_utf8(o + k, cp);
            break;
        }
        default: return perr(ps, "bad escape");
        }
    }
    ps->p = end + 1;
    o[k] = 0;
    *out = (const char *)o;
    *out_len = k;
    return RECALL_OK;
}

static recall_status parse_number(parser *ps, json_value *v) {
    size_t st = ps->p;
    int is_int = 1;
    if (ps->p < ps->n && ps->s[ps->p] == '-') ps->p++;
    if (ps->p >= ps->n) return perr(ps, "bad number");
    if (ps->s[ps->p] == '0') {
        ps->p++;
    } else if (ps->s[ps->p] >= '1' && ps->s[ps->p] <= '9') {
        while (ps->p < ps->n && ps->s[ps->p] >= '0' && ps->s[ps->p] <= '9') ps->p++;
    } else {
        return perr(ps, "bad number");
    }
    if (ps->p < ps->n && ps->s[ps->p] == '.') {
        is_int = 0;
        ps->p++;
        if (ps->p >= ps->n || ps->s[ps->p] < '0' || ps->s[ps->p] > '9') return perr(ps, "bad fraction");
        while (ps->p < ps->n && ps->s[ps->p] >= '0' && ps->s[ps->p] <= '9') ps->p++;
    }
    if (ps->p < ps->n && (ps->s[ps->p] == 'e' || ps->s[ps->p] == 'E')) {
        is_int = 0;
        ps->p++;
        if (ps->p < ps->n && (ps->s[ps->p] == '+' || ps->s[ps->p] == '-')) ps->p++;
        if (ps->p >= ps->n || ps->s[ps->p] < '0' || ps->s[ps->p] > '9') return perr(ps, "bad exponent");
        while (ps->p < ps->n && ps->s[ps->p] >= '0' && ps->s[ps->p] <= '9') ps->p++;
    }
    char buf[64];
    size_t len = ps->p - st;
    if (len >= sizeof buf) {
        /* Very long literals: only the double matters. */
        char *tmp = malloc(len + 1);
        if (!tmp) return rc_fail(ps->err, RECALL_E_NOMEM, "%s: out of memory", ps->what);
        memcpy(tmp, ps->s + st, len);
        tmp[len] = 0;
        v->num = strtod(tmp, NULL);
        free(tmp);
        is_int = 0;
    } else {
        memcpy(buf, ps->s + st, len);
        buf[len] = 0;
        v->num = strtod(buf, NULL);
        if (is_int) {
            errno = 0;
            long long ll = strtoll(buf, NULL, 10);
            if (errno == ERANGE) is_int = 0;
            v->i = (int64_t)ll;
        }
    }
    v->type = JSON_NUM;
    v->is_int = is_int;
    return RECALL_OK;
}

static recall_status parse_value(parser *ps, json_value *v);

/* Children are collected in a temporary heap vector, then copied into the arena. */
typedef struct {
    json_value *vals;
    const char **keys;
    size_t *klens;
    size_t n, cap;
} childvec;

static int childvec_push(childvec *cv) {
    if (cv->n == cv->cap) {
        size_t nc = cv->cap ? cv->cap * 2 : 8;
        json_value *nv = realloc(cv->vals, nc * sizeof *nv);
        if (!nv) return 0;
        cv->vals = nv;
        const char **nk = realloc(cv->keys, nc * sizeof *nk);
        if (!nk) return 0;
        cv->keys = nk;
        size_t *nl = realloc(cv->klens, nc * sizeof *nl);
        if (!nl) return 0;
        cv->klens = nl;
        cv->cap = nc;
    }
    memset(&cv->vals[cv->n], 0, sizeof cv->vals[0]);
    cv->n++;
    return 1;
}

static void childvec_free(childvec *cv) {
    free(cv->vals);
    free(cv->keys);
    free(cv->klens);
}

static recall_status finish_children(parser *ps, json_value *v, childvec *cv, int is_obj) {
    v->len = cv->n;
    if (cv->n) {
        v->items = arena_alloc(ps->doc, cv->n * sizeof *v->items);
        if (!v->items) return rc_fail(ps->err, RECALL_E_NOMEM, "%s: out of memory", ps->what);
        memcpy(v->items, cv->vals, cv->n * sizeof *v->items);
        if (is_obj) {
            v->keys = arena_alloc(ps->doc, cv->n * sizeof *v->keys);
            v->key_lens = arena_alloc(ps->doc, cv->n * sizeof *v->key_lens);
            if (!v->keys || !v->key_lens)
                return rc_fail(ps->err, RECALL_E_NOMEM, "%s: out of memory", ps->what);
            memcpy(v->keys, cv->keys, cv->n * sizeof *v->keys);
            memcpy(v->key_lens, cv->klens, cv->n * sizeof *v->key_lens);
        }
    }
    return RECALL_OK;
}

static recall_status parse_container(parser *ps, json_value *v, int is_obj) {
    char close = is_obj ? '}' : ']';
    v->type = is_obj ? JSON_OBJ : JSON_ARR;
    ps->p++;
    if (++ps->depth > JSON_MAX_DEPTH) return perr(ps, "nesting too deep");
    childvec cv = {0};
    recall_status st = RECALL_OK;
    skip_ws(ps);
    if (ps->p < ps->n && ps->s[ps->p] == close) {
        ps->p++;
        goto done;
    }
    for (;;) {
        if (!childvec_push(&cv)) { st = rc_fail(ps->err, RECALL_E_NOMEM, "%s: out of memory", ps->what); goto done; }
        skip_ws(ps);
        if (is_obj) {
            if (ps->p >= ps->n || ps->s[ps->p] != '"') { st = perr(ps, "expected object key"); goto done; }
            st = parse_string(ps, &cv.keys[cv.n - 1], &cv.klens[cv.n - 1]);
            if (st) goto done;
            skip_ws(ps);
            if (ps->p >= ps->n || ps->s[ps->p] != ':') { st = perr(ps, "expected ':'"); goto done; }
            ps->p++;
        }
        st = parse_value(ps, &cv.vals[cv.n - 1]);
        if (st) goto done;
        skip_ws(ps);
        if (ps->p < ps->n && ps->s[ps->p] == ',') { ps->p++; continue; }
        if (ps->p < ps->n && ps->s[ps->p] == close) { ps->p++; break; }
        st = perr(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto done;
    }
done:
    if (!st) st = finish_children(ps, v, &cv, is_obj);
    childvec_free(&cv);
    ps->depth--;
    return st;
}

static int match_lit(parser *ps, const char *lit) {
    size_t l = strlen(lit);
    if (ps->n - ps->p >= l && memcmp(ps->s + ps->p, lit, l) == 0) {
        ps->p += l;
        return 1;
    }
    return 0;
}

static recall_status parse_value(parser *ps, json_value *v) {
    skip_ws(ps);
    if (ps->p >= ps->n) return perr(ps, "unexpected end of input");
    v->offset = ps->p;
    char c = ps->s[ps->p];
    if (c == '{') return parse_container(ps, v, 1);
    if (c == '[') return parse_container(ps, v, 0);
    if (c == '"') {
        v->type = JSON_STR;
        return parse_string(ps, &v->str, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, v);
    if (match_lit(ps, "true")) { v->type = JSON_BOOL; v->num = 1; return RECALL_OK; }
    if (match_lit(ps, "false")) { v->type = JSON_BOOL; v->num = 0; return RECALL_OK; }
    if (match_lit(ps, "null")) { v->type = JSON_NULL; return RECALL_OK; }
    return perr(ps, "unexpected character");
}

recall_status json_parse(const char *text, size_t len, const char *what, json_doc **out,
                         recall_err *err) {
    *out = NULL;
    json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
    parser ps = {text, len, 0, what, doc, err, 0};
    recall_status st = parse_value(&ps, &doc->root);
    if (!st) {
        skip_ws(&ps);
        if (ps.p != ps.n) st = perr(&ps, "trailing characters after the document");
    }
    if (st) {
        json_free(doc);
        return st;
    }
    *out = doc;
    return RECALL_OK;
}

const json_value *json_root(const json_doc *doc) { return &doc->root; }

void json_free(json_doc *doc) {
    if (!doc) return;
    arena_chunk *c = doc->chunks;
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    free(doc);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJ) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->len; i++)
        if (obj->key_lens[i] == kl && memcmp(obj->keys[i], key, kl) == 0) return &obj->items[i];
    return NULL;
}

const json_value *json_get_type(const json_value *obj, const char *key, json_type t) {
    const json_value *v = json_get(obj, key);
    return (v && v->type == t) ? v : NULL;
}

const json_value *json_path(const json_value *root, const char *dotted) {
    char part[128];
    const json_value *v = root;
    while (v && *dotted) {
        const char *dot = strchr(dotted, '.');
        size_t l = dot ? (size_t)(dot - dotted) : strlen(dotted);
        if (l >= sizeof part) return NULL;
        memcpy(part, dotted, l);
        part[l] = 0;
        v = json_get(v, part);
        dotted += l + (dot ? 1 : 0);
    }
    return v;
}

const char *json_type_name(json_type t) {
    static const char *names[] = {"null", "bool", "number", "string", "array", "object"};
    return (unsigned)t < 6 ? names[t] : "?";
}

int json_is_str(const json_value *v, const char *s) {
    return v && v->type == JSON_STR && strlen(s) == v->len && memcmp(v->str, s, v->len) == 0;
}
int json_is_false(const json_value *v) { return v && v->type == JSON_BOOL && v->num == 0; }
int json_is_true(const json_value *v) { return v && v->type == JSON_BOOL && v->num != 0; }

recall_status rc_read_file(const char *path, char **out, size_t *len, recall_err *err) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return rc_fail(err, RECALL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return rc_fail(err, RECALL_E_IO, "%s: cannot seek", path);
    }
    long sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return rc_fail(err, RECALL_E_IO, "%s: cannot determine size", path);
    }
    char *buf = malloc((size_t)sz + 1);
    if (!buf) {
        fclose(f);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory reading %ld bytes", path, sz);
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    if (got != (size_t)sz) {
        free(buf);
        return rc_fail(err, RECALL_E_IO, "%s: short read (%zu of %ld bytes)", path, got, sz);
    }
    buf[sz] = 0;
    *out = buf;
    *len = (size_t)sz;
    return RECALL_OK;
}

/* ---- writing ------------------------------------------------------------------------------------ */

void rc_json_put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\r') fputs("\\r", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void rc_json_put_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.9g", x);
    else fputs("null", f);
}

void rc_json_put_ids(FILE *f, const int32_t *ids, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fputc(']', f);
}

recall_status json_read_file(const char *path, json_doc **doc, recall_err *err) {
    char *text;
    size_t len;
    *doc = NULL;
    RC_TRY(rc_read_file(path, &text, &len, err));
    recall_status s = json_parse(text, len, path, doc, err); /* the document keeps its own copy */
    free(text);
    return s;
}
