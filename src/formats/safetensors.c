/* safetensors.c - bounds-checked safetensors reader (see safetensors.h). */
#include "safetensors.h"

#include "blob.h"
#include "json.h"
#include "mem.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifndef RECALL_NO_MMAP
#include <sys/mman.h>
#endif

typedef struct {
    char *path;
    uint8_t *base;
    size_t size;
    int mapped;
} st_file;

struct rc_st {
    st_file *files;
    size_t n_files;
    rc_st_tensor *t;
    size_t n, cap;
};

static recall_status map_file(const char *path, st_file *f, recall_err *err) {
    memset(f, 0, sizeof *f);
    f->path = strdup(path);
    if (!f->path) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    int fd;
    RC_TRY(rc_open_regular(path, &fd, &f->size, err));
#ifndef RECALL_NO_MMAP
    if (f->size) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            f->base = m;
            f->mapped = 1;
        }
    }
#endif
    if (!f->mapped) {
        f->base = malloc(f->size ? f->size : 1);
        if (!f->base) {
            close(fd);
            return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory (%zu bytes)", path, f->size);
        }
        size_t got = 0;
        while (got < f->size) {
            ssize_t r = read(fd, f->base + got, f->size - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        if (got != f->size) {
            close(fd);
            return rc_fail(err, RECALL_E_IO, "%s: short read", path);
        }
    }
    close(fd);
    return RECALL_OK;
}

static void unmap_file(st_file *f) {
#ifndef RECALL_NO_MMAP
    if (f->mapped) munmap(f->base, f->size);
    else
#endif
        free(f->base);
    free(f->path);
}

static int parse_dtype(const char *s, rc_dtype *dt) {
    static const struct { const char *n; rc_dtype t; } map[] = {
        {"F32", RC_DT_F32}, {"BF16", RC_DT_BF16}, {"F16", RC_DT_F16},
        {"I32", RC_DT_I32}, {"I64", RC_DT_I64},   {"U8", RC_DT_U8},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i].n) == 0) {
            *dt = map[i].t;
            return 1;
        }
    return 0;
}

typedef struct {
    uint64_t b, e;
    size_t idx;
} range;

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b ? 1 : 0;
}

/* The data section of one file image, for the per-entry checks and messages. */
typedef struct {
    const uint8_t *data;
    uint64_t data_len, header_len;
    const char *what;
} st_image;

/* shape: up to RC_MAX_DIMS non-negative ints; *numel their product (bounded well below 2^64). */
static recall_status parse_shape(const st_image *im, const char *name, const json_value *js, rc_st_tensor *t,
                                 uint64_t *numel, recall_err *err) {
    if (js->len > RC_MAX_DIMS)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s': %zu dims (max %d)", im->what, name, js->len, RC_MAX_DIMS);
    t->ndim = (int)js->len;
    uint64_t n = 1;
    for (size_t d = 0; d < js->len; d++) {
        const json_value *x = &js->items[d];
        if (x->type != JSON_NUM || !x->is_int || x->i < 0 || x->i > (int64_t)1 << 40)
            return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': bad shape entry", im->what, name);
        t->shape[d] = x->i;
        if (x->i && n > (UINT64_MAX >> 8) / (uint64_t)x->i)
            return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': shape overflows", im->what, name);
        n *= (uint64_t)x->i;
    }
    *numel = n;
    return RECALL_OK;
}

/* One header entry {"dtype", "shape", "data_offsets"} checked against the data section and
 * appended to st (names unique across all files). */
static recall_status parse_entry(rc_st *st, const st_image *im, const char *name, size_t name_len,
                                 const json_value *v, recall_err *err) {
    const char *what = im->what;
    const json_value *jd = json_get_type(v, "dtype", JSON_STR);
    const json_value *js = json_get_type(v, "shape", JSON_ARR);
    const json_value *jo = json_get_type(v, "data_offsets", JSON_ARR);
    if (!jd || !js || !jo || jo->len != 2)
        return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': missing dtype/shape/data_offsets", what, name);
    if (strlen(name) != name_len || !*name)
        return rc_fail(err, RECALL_E_FORMAT, "%s: tensor name with NUL byte or empty", what);
    rc_st_tensor t;
    memset(&t, 0, sizeof t);
    if (!parse_dtype(jd->str, &t.dtype))
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s': unsupported dtype %s", what, name, jd->str);
    uint64_t numel = 1;
    RC_TRY(parse_shape(im, name, js, &t, &numel, err));
    uint64_t off[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        const json_value *x = &jo->items[k];
        if (x->type != JSON_NUM || !x->is_int || x->i < 0)
            return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': bad data_offsets", what, name);
        off[k] = (uint64_t)x->i;
    }
    uint64_t want = numel * rc_dtype_size(t.dtype);
    if (off[0] > off[1] || off[1] > im->data_len)
        return rc_fail(err, RECALL_E_FORMAT,
                       "%s: tensor '%s': data_offsets [%llu, %llu] out of range (data section is %llu bytes, "
                       "starts at byte %llu)", what, name, (unsigned long long)off[0], (unsigned long long)off[1],
                       (unsigned long long)im->data_len, (unsigned long long)(8 + im->header_len));
    if (off[1] - off[0] != want)
        return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': %llu data bytes, dtype %s x shape needs %llu", what,
                       name, (unsigned long long)(off[1] - off[0]), jd->str, (unsigned long long)want);
    rc_st_tensor *grown = rc_grow(st->t, st->n, &st->cap, sizeof *grown, 64);
    if (!grown) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    st->t = grown;
    if (RC_NAME_INDEX(st->t, st->n, rc_st_tensor, name, name) < st->n)
        return rc_fail(err, RECALL_E_FORMAT, "%s: duplicate tensor '%s'", what, name);
    t.name = strdup(name);
    if (!t.name) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    t.numel = (int64_t)numel;
    t.data = im->data + off[0];
    t.nbytes = (size_t)want;
    t.file = what;
    st->t[st->n++] = t;
    return RECALL_OK;
}

/* The tensors this image added (st->t[first ..]) may not share data bytes. */
static recall_status check_overlaps(const rc_st *st, size_t first, const st_image *im, recall_err *err) {
    size_t nr = st->n - first;
    if (!nr) return RECALL_OK;
    range *r = malloc(nr * sizeof *r);
    if (!r) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    for (size_t i = 0; i < nr; i++) {
        r[i].b = (uint64_t)(st->t[first + i].data - im->data);
        r[i].e = r[i].b + st->t[first + i].nbytes;
        r[i].idx = first + i;
    }
    qsort(r, nr, sizeof *r, cmp_range);
    recall_status s = RECALL_OK;
    for (size_t i = 1; i < nr && !s; i++)
        if (r[i].b < r[i - 1].e)
            s = rc_fail(err, RECALL_E_FORMAT, "%s: tensors '%s' and '%s' overlap at data offset %llu", im->what,
                        st->t[r[i - 1].idx].name, st->t[r[i].idx].name, (unsigned long long)r[i].b);
    free(r);
    return s;
}

/* Parses one file image and appends its tensors. */
static recall_status parse_image(rc_st *st, const uint8_t *buf, size_t len, const char *what, recall_err *err) {
    if (len < 8) return rc_fail(err, RECALL_E_FORMAT, "%s: truncated: %zu bytes, no header length", what, len);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | buf[i];
    if (hl > len - 8)
        return rc_fail(err, RECALL_E_FORMAT, "%s: header length %llu runs past end of file (%zu bytes)", what,
                       (unsigned long long)hl, len);
    if (hl > (100u << 20)) return rc_fail(err, RECALL_E_LIMIT, "%s: header of %llu bytes exceeds 100 MiB", what,
                                          (unsigned long long)hl);
    json_doc *doc;
    char jwhat[600];
    snprintf(jwhat, sizeof jwhat, "%s (header)", what);
    RC_TRY(json_parse((const char *)buf + 8, (size_t)hl, jwhat, &doc, err));
    const json_value *root = json_root(doc);
    st_image im = {buf + 8 + hl, len - 8 - hl, hl, what};
    size_t first = st->n;
    recall_status s = RECALL_OK;
    if (root->type != JSON_OBJ) s = rc_fail(err, RECALL_E_FORMAT, "%s: header is not a JSON object", what);
    for (size_t i = 0; !s && i < root->len; i++)
        if (strcmp(root->keys[i], "__metadata__") != 0)
            s = parse_entry(st, &im, root->keys[i], root->key_lens[i], &root->items[i], err);
    if (!s) s = check_overlaps(st, first, &im, err);
    json_free(doc);
    return s;
}

static rc_st *st_new(void) { return calloc(1, sizeof(rc_st)); }

recall_status rc_st_open_mem(const uint8_t *buf, size_t len, const char *what, rc_st **out, recall_err *err) {
    *out = NULL;
    rc_st *st = st_new();
    if (!st) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    recall_status s = parse_image(st, buf, len, what, err);
    if (s) {
        rc_st_close(st);
        return s;
    }
    *out = st;
    return RECALL_OK;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}
static int exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static recall_status add_file(rc_st *st, const char *path, recall_err *err) {
    st_file *nf = realloc(st->files, (st->n_files + 1) * sizeof *nf);
    if (!nf) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    st->files = nf;
    st_file *f = &st->files[st->n_files];
    recall_status s = map_file(path, f, err);
    st->n_files++; /* counted even on failure so close() releases what was set */
    if (s) return s;
    return parse_image(st, f->base, f->size, f->path, err);
}

recall_status rc_st_open(const char *path, rc_st **out, recall_err *err) {
    *out = NULL;
    rc_st *st = st_new();
    if (!st) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    recall_status s = RECALL_OK;
    char p[4096];
    if (!is_dir(path)) {
        s = add_file(st, path, err);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors", path);
        if (exists(p)) {
            s = add_file(st, p, err);
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
            char *text;
            size_t tl;
            if (!exists(p)) {
                s = rc_fail(err, RECALL_E_MISSING, "%s: neither model.safetensors nor model.safetensors.index.json", path);
            } else if (!(s = rc_read_file(p, &text, &tl, err))) {
                json_doc *doc;
                s = json_parse(text, tl, p, &doc, err);
                free(text);
                if (!s) {
                    const json_value *wm = json_get_type(json_root(doc), "weight_map", JSON_OBJ);
                    if (!wm) s = rc_fail(err, RECALL_E_FORMAT, "%s: no \"weight_map\" object", p);
                    /* Each distinct shard once, in first-appearance order. */
                    for (size_t i = 0; !s && i < wm->len; i++) {
                        const json_value *f = &wm->items[i];
                        if (f->type != JSON_STR || strchr(f->str, '/') || strstr(f->str, "..")) {
                            s = rc_fail(err, RECALL_E_FORMAT, "%s: weight_map[\"%s\"] is not a plain shard file name", p,
                                        wm->keys[i]);
                            break;
                        }
                        int seen = 0;
                        for (size_t j = 0; j < i; j++)
                            if (strcmp(wm->items[j].str, f->str) == 0) seen = 1;
                        if (seen) continue;
                        char sp[4096];
                        snprintf(sp, sizeof sp, "%s/%s", path, f->str);
                        s = add_file(st, sp, err);
                    }
                    for (size_t i = 0; !s && i < wm->len; i++)
                        if (!rc_st_find(st, wm->keys[i]))
                            s = rc_fail(err, RECALL_E_MISSING, "%s: tensor '%s' listed in weight_map but not in %s", p,
                                        wm->keys[i], wm->items[i].str);
                    json_free(doc);
                }
            }
        }
    }
    if (s) {
        rc_st_close(st);
        return s;
    }
    *out = st;
    return RECALL_OK;
}

void rc_st_close(rc_st *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    for (size_t i = 0; i < st->n_files; i++) unmap_file(&st->files[i]);
    free(st->files);
    free(st);
}

size_t rc_st_count(const rc_st *st) { return st->n; }
const rc_st_tensor *rc_st_at(const rc_st *st, size_t i) { return i < st->n ? &st->t[i] : NULL; }

const rc_st_tensor *rc_st_find(const rc_st *st, const char *name) {
    size_t i = RC_NAME_INDEX(st->t, st->n, rc_st_tensor, name, name);
    return i < st->n ? &st->t[i] : NULL;
}

static float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3FF;
            bits = sign | exp << 23 | man << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

recall_status rc_st_to_f32(const rc_st_tensor *t, float **out, recall_err *err) {
    *out = NULL;
    float *o = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *o);
    if (!o) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory converting '%s'", t->file, t->name);
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        if (t->dtype == RC_DT_F32) {
            memcpy(&o[i], p + 4 * i, 4);
        } else if (t->dtype == RC_DT_BF16) {
            uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&o[i], &bits, 4);
        } else if (t->dtype == RC_DT_F16) {
            o[i] = half_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        } else {
            free(o);
            return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s': dtype %s is not floating point", t->file,
                           t->name, rc_dtype_name(t->dtype));
        }
    }
    *out = o;
    return RECALL_OK;
}
