/* npy.c - NumPy .npy / .npz: header parsing, conversion to float32, and an npz writer.
 *
 * The .npy header is a Python dict literal; it is parsed natively with a tiny grammar that
 * covers everything numpy.lib.format writes:
 *   dict  := '{' (key ':' value ',')* [key ':' value] '}'  whitespace anywhere
 *   key   := 'descr' | 'fortran_order' | 'shape'            (each exactly once)
 *   value := quoted string | True | False | '(' [int (',' int)* [',']] ')'
 * Array elements are decoded byte by byte as little-endian, so neither alignment nor host
 * byte order matters.
 *
 * The npz writer lays out, per member: local header (30 B) + "<key>.npy" + .npy bytes; then
 * the central directory and the end record. No zip64: archives over 4 GiB are refused.
 */
#include "npy.h"

#include "atomic_file.h"

#include "checksum.h"
#include "mem.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t NPY_MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct {
    rc_npy_dtype dtype;
    const char *descr; /* the descr numpy writes */
    const char *name;
    size_t size;
} dtype_info;

static const dtype_info DTYPES[] = {
    {RC_NPY_BOOL, "|b1", "bool", 1},   {RC_NPY_I8, "|i1", "int8", 1},       {RC_NPY_U8, "|u1", "uint8", 1},
    {RC_NPY_I16, "<i2", "int16", 2},   {RC_NPY_U16, "<u2", "uint16", 2},    {RC_NPY_I32, "<i4", "int32", 4},
    {RC_NPY_U32, "<u4", "uint32", 4},  {RC_NPY_I64, "<i8", "int64", 8},     {RC_NPY_U64, "<u8", "uint64", 8},
    {RC_NPY_F16, "<f2", "float16", 2}, {RC_NPY_F32, "<f4", "float32", 4}, {RC_NPY_F64, "<f8", "float64", 8},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

static const dtype_info *dtype_lookup(rc_npy_dtype t) {
    for (size_t i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dtype == t) return &DTYPES[i];
    return NULL;
}

const char *rc_npy_dtype_name(rc_npy_dtype t) {
    const dtype_info *d = dtype_lookup(t);
    return d ? d->name : "invalid";
}

size_t rc_npy_dtype_size(rc_npy_dtype t) {
    const dtype_info *d = dtype_lookup(t);
    return d ? d->size : 0;
}

rc_dtype rc_npy_to_rc_dtype(rc_npy_dtype t) {
    switch (t) {
    case RC_NPY_F32: return RC_DT_F32;
    case RC_NPY_F16: return RC_DT_F16;
    case RC_NPY_I32: return RC_DT_I32;
    case RC_NPY_I64: return RC_DT_I64;
    case RC_NPY_U8: return RC_DT_U8;
    default: return (rc_dtype)0;
    }
}

/* ---- little-endian element access --------------------------------------------------------- */

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

static void store_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

static uint64_t host_bits(const void *src, size_t n) {
    uint64_t v = 0;
    switch (n) {
    case 1: { uint8_t x; memcpy(&x, src, 1); v = x; break; }
    case 2: { uint16_t x; memcpy(&x, src, 2); v = x; break; }
    case 4: { uint32_t x; memcpy(&x, src, 4); v = x; break; }
    default: memcpy(&v, src, 8); break;
    }
    return v;
}

/* IEEE half -> single, exact (subnormals, infinities and NaN payloads preserved). */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | mant << 13;
    } else if (exp != 0) {
        bits = sign | (exp + 112u) << 23 | mant << 13;
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exp = 113;
        while (!(mant & 0x400u)) mant <<= 1, exp--;
        bits = sign | exp << 23 | (mant & 0x3ffu) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- header parsing ----------------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, pos, base; /* base: offset of the header in the file, for messages */
    const char *what;
    recall_err *err;
} hparser;

static recall_status hbad(hparser *p, const char *msg) {
    return rc_fail(p->err, RECALL_E_FORMAT, "%s: npy header: %s at byte %zu", p->what, msg, p->base + p->pos);
}

static void skip_ws(hparser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                               p->s[p->pos] == '\r'))
        p->pos++;
}

static int peek(hparser *p) {
    skip_ws(p);
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static recall_status expect(hparser *p, char c) {
    if (peek(p) != (unsigned char)c) {
        char msg[32];
        snprintf(msg, sizeof msg, "expected '%c'", c);
        return hbad(p, msg);
    }
    p->pos++;
    return RECALL_OK;
}

/* Quoted string without escapes; copied (NUL-terminated) into out[cap]. */
static recall_status parse_string(hparser *p, char *out, size_t cap) {
    int q = peek(p);
    if (q != '\'' && q != '"') return hbad(p, "expected a quoted string");
    size_t start = ++p->pos;
    while (p->pos < p->len && p->s[p->pos] != q) {
        if (p->s[p->pos] == '\\' || p->s[p->pos] == '\n' || p->s[p->pos] == 0) return hbad(p, "bad string");
        p->pos++;
    }
    if (p->pos >= p->len) return hbad(p, "unterminated string");
    size_t n = p->pos - start;
    if (n >= cap) {
        p->pos = start;
        return hbad(p, "string too long");
    }
    memcpy(out, p->s + start, n);
    out[n] = 0;
    p->pos++;
    return RECALL_OK;
}

static int match_word(hparser *p, const char *w) {
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0) return 0;
    /* Not a prefix of a longer identifier. */
    if (p->pos + n < p->len) {
        char c = p->s[p->pos + n];
        if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 0;
    }
    p->pos += n;
    return 1;
}

static recall_status parse_shape(hparser *p, rc_npy *a) {
    RC_TRY(expect(p, '('));
    a->ndim = 0;
    for (;;) {
        int c = peek(p);
        if (c == ')') break;
        if (c < '0' || c > '9') return hbad(p, "expected a dimension");
        int64_t v = 0;
        int digits = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            if (++digits > 18) return hbad(p, "dimension too large");
            v = v * 10 + (p->s[p->pos++] - '0');
        }
        if (p->pos < p->len && p->s[p->pos] == 'L') p->pos++; /* Python 2 long */
        if (a->ndim >= RC_NPY_MAX_DIMS)
            return rc_fail(p->err, RECALL_E_UNSUPPORTED, "%s: npy array has more than %d dimensions", p->what,
                           RC_NPY_MAX_DIMS);
        a->shape[a->ndim++] = v;
        c = peek(p);
        if (c == ',') {
            p->pos++;
        } else if (c != ')') {
            return hbad(p, "expected ',' or ')' in shape");
        }
    }
    p->pos++;
    return RECALL_OK;
}

/* Maps a descr to a dtype: '<' or '|' little-endian numeric only. */
static recall_status parse_descr(const char *descr, const char *what, rc_npy *a, recall_err *err) {
    char order = descr[0];
    if (order == '<' || order == '|') {
        for (size_t i = 0; i < N_DTYPES; i++) {
            const dtype_info *d = &DTYPES[i];
            if (strcmp(descr + 1, d->descr + 1) != 0) continue;
            /* '|' (no byte order) only makes sense for one-byte types; '<u1' is also fine. */
            if (order == '|' && d->size != 1) break;
            a->dtype = d->dtype;
            a->itemsize = d->size;
            memcpy(a->descr, descr, 3); /* same length as d->descr */
            a->descr[3] = 0;
            return RECALL_OK;
        }
    }
    return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: unsupported npy dtype '%s'%s", what, descr,
                   order == '>' ? " (big-endian)" : "");
}

static recall_status parse_header(hparser *p, rc_npy *a) {
    char key[16], descr[40];
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    RC_TRY(expect(p, '{'));
    for (;;) {
        if (peek(p) == '}') break;
        size_t key_pos = p->pos;
        RC_TRY(parse_string(p, key, sizeof key));
        RC_TRY(expect(p, ':'));
        peek(p);
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (peek(p) == '[')
                return rc_fail(p->err, RECALL_E_UNSUPPORTED, "%s: structured npy dtypes are not supported", p->what);
            RC_TRY(parse_string(p, descr, sizeof descr));
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
            if (match_word(p, "True"))
                fortran = 1;
            else if (!match_word(p, "False"))
                return hbad(p, "fortran_order must be True or False");
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            RC_TRY(parse_shape(p, a));
            have_shape = 1;
        } else {
            p->pos = key_pos;
            return hbad(p, "unexpected or repeated key");
        }
        int c = peek(p);
        if (c == ',') {
            p->pos++;
        } else if (c != '}') {
            return hbad(p, "expected ',' or '}'");
        }
    }
    p->pos++;
    skip_ws(p);
    if (p->pos != p->len) return hbad(p, "trailing bytes after the dict");
    if (!have_descr || !have_fortran || !have_shape)
        return rc_fail(p->err, RECALL_E_FORMAT, "%s: npy header lacks '%s'", p->what,
                       !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    RC_TRY(parse_descr(descr, p->what, a, p->err));
    if (fortran)
        return rc_fail(p->err, RECALL_E_UNSUPPORTED,
                       "%s: fortran_order=True arrays are not supported (save a C-contiguous array)", p->what);
    return RECALL_OK;
}

recall_status rc_npy_parse(const void *buf, size_t len, const char *what, rc_npy *out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "rc_npy_parse: NULL output");
    memset(out, 0, sizeof *out);
    if (!what) what = "npy";
    if (!buf && len) return rc_fail(err, RECALL_E_ARG, "%s: NULL buffer", what);
    const uint8_t *b = buf;
    if (len < 10 || memcmp(b, NPY_MAGIC, 6) != 0)
        return rc_fail(err, RECALL_E_FORMAT, "%s: not an npy file (bad magic)", what);
    int major = b[6], minor = b[7];
    size_t hstart, hlen;
    if (major == 1 && minor == 0) {
        hstart = 10;
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) return rc_fail(err, RECALL_E_FORMAT, "%s: npy header truncated at byte %zu", what, len);
        hstart = 12;
        hlen = (size_t)load_le(b + 8, 4);
    } else {
        return rc_fail(err, RECALL_E_VERSION, "%s: npy format version %d.%d is not supported", what, major, minor);
    }
    if (hlen > len - hstart)
        return rc_fail(err, RECALL_E_FORMAT, "%s: npy header of %zu bytes runs past the end (%zu bytes)", what,
                       hlen, len);
    out->major = major;
    out->minor = minor;

    hparser p = {.s = (const char *)b + hstart, .len = hlen, .base = hstart, .what = what, .err = err};
    recall_status st = parse_header(&p, out);
    if (st != RECALL_OK) return st;

    uint64_t numel = 1;
    for (int i = 0; i < out->ndim; i++) {
        uint64_t d = (uint64_t)out->shape[i];
        if (d && numel > SIZE_MAX / out->itemsize / d)
            return rc_fail(err, RECALL_E_LIMIT, "%s: npy array is too large", what);
        numel *= d;
    }
    out->numel = numel;
    out->nbytes = (size_t)numel * out->itemsize;
    out->data_offset = hstart + hlen;
    size_t have = len - out->data_offset;
    if (have != out->nbytes) {
        char shape[160];
        size_t n = 0;
        shape[0] = 0;
        for (int i = 0; i < out->ndim && n < sizeof shape - 24; i++)
            n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "", (long long)out->shape[i]);
        return rc_fail(err, RECALL_E_FORMAT, "%s: npy data is %zu bytes (from byte %zu) but %s [%s] needs %zu%s", what,
                       have, out->data_offset, out->descr, shape, out->nbytes,
                       have < out->nbytes ? " (truncated)" : " (trailing bytes)");
    }
    out->data = b + out->data_offset;
    return RECALL_OK;
}

void rc_npy_free(rc_npy *a) {
    if (!a) return;
    free(a->owned);
    memset(a, 0, sizeof *a);
}

/* ---- conversion --------------------------------------------------------------------------- */

recall_status rc_npy_to_f32(const rc_npy *a, const char *what, float **out, recall_err *err) {
    if (out) *out = NULL;
    if (!a || !out || (!a->data && a->numel)) return rc_fail(err, RECALL_E_ARG, "rc_npy_to_f32: NULL argument");
    if (!what) what = "npy";
    size_t n = (size_t)a->numel, sz = a->itemsize;
    if (!dtype_lookup(a->dtype) || sz != rc_npy_dtype_size(a->dtype) || n > SIZE_MAX / sizeof(float) ||
        a->nbytes != n * sz)
        return rc_fail(err, RECALL_E_ARG, "%s: inconsistent npy descriptor", what);
    float *f = malloc(n ? n * sizeof(float) : 1);
    if (!f) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %zu floats", what, n);
    const uint8_t *src = a->data;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = load_le(src + i * sz, sz);
        float x;
        switch (a->dtype) {
        case RC_NPY_BOOL: x = v ? 1.0f : 0.0f; break;
        case RC_NPY_I8: x = (float)(int8_t)(uint8_t)v; break;
        case RC_NPY_U8: x = (float)(uint8_t)v; break;
        case RC_NPY_I16: x = (float)(int16_t)(uint16_t)v; break;
        case RC_NPY_U16: x = (float)(uint16_t)v; break;
        case RC_NPY_I32: x = (float)(int32_t)(uint32_t)v; break;
        case RC_NPY_U32: x = (float)(uint32_t)v; break;
        case RC_NPY_I64: x = (float)(int64_t)v; break;
        case RC_NPY_U64: x = (float)v; break;
        case RC_NPY_F16: x = half_to_float((uint16_t)v); break;
        case RC_NPY_F32: {
            uint32_t bits = (uint32_t)v;
            memcpy(&x, &bits, 4);
            break;
        }
        default: { /* RC_NPY_F64: rounds to nearest; out-of-range values become +-inf */
            double d;
            memcpy(&d, &v, 8);
            x = (float)d;
            break;
        }
        }
        f[i] = x;
    }
    *out = f;
    return RECALL_OK;
}

recall_status rc_npy_scalar_i64(const rc_npy *a, const char *what, int64_t *out, recall_err *err) {
    if (!a || !out || !a->data) return rc_fail(err, RECALL_E_ARG, "rc_npy_scalar_i64: NULL argument");
    if (!what) what = "npy";
    int is_int = a->dtype == RC_NPY_BOOL || a->dtype == RC_NPY_I8 || a->dtype == RC_NPY_U8 ||
                 a->dtype == RC_NPY_I16 || a->dtype == RC_NPY_U16 || a->dtype == RC_NPY_I32 ||
                 a->dtype == RC_NPY_U32 || a->dtype == RC_NPY_I64 || a->dtype == RC_NPY_U64;
    if (!is_int || a->numel != 1 || a->nbytes != a->itemsize || a->itemsize != rc_npy_dtype_size(a->dtype))
        return rc_fail(err, RECALL_E_SHAPE, "%s: expected one integer, got %s with %llu elements", what,
                       rc_npy_dtype_name(a->dtype), (unsigned long long)a->numel);
    uint64_t v = load_le(a->data, a->itemsize);
    switch (a->dtype) {
    case RC_NPY_I8: *out = (int8_t)(uint8_t)v; break;
    case RC_NPY_I16: *out = (int16_t)(uint16_t)v; break;
    case RC_NPY_I32: *out = (int32_t)(uint32_t)v; break;
    case RC_NPY_I64: *out = (int64_t)v; break;
    case RC_NPY_U64:
        if (v > (uint64_t)INT64_MAX)
            return rc_fail(err, RECALL_E_LIMIT, "%s: uint64 value %llu does not fit int64", what, (unsigned long long)v);
        *out = (int64_t)v;
        break;
    case RC_NPY_BOOL: *out = v != 0; break;
    default: *out = (int64_t)v; break;
    }
    return RECALL_OK;
}

/* ---- encoding ----------------------------------------------------------------------------- */

recall_status rc_npy_encode(rc_npy_dtype dtype, int ndim, const int64_t *shape, const void *data,
                            uint8_t **out, size_t *out_len, recall_err *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    const dtype_info *d = dtype_lookup(dtype);
    if (!out || !out_len || !d || ndim < 0 || ndim > RC_NPY_MAX_DIMS || (ndim && !shape))
        return rc_fail(err, RECALL_E_ARG, "npy encode: bad dtype, ndim or NULL argument");
    /* numpy: "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", then spaces and
     * '\n' so that magic+version+length+header is a multiple of 64 (a full 64 if already). */
    char header[512];
    size_t n = (size_t)snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", d->descr);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return rc_fail(err, RECALL_E_ARG, "npy encode: negative dimension %lld", (long long)shape[i]);
        uint64_t dim = (uint64_t)shape[i];
        if (dim && numel > SIZE_MAX / 2 / d->size / dim) return rc_fail(err, RECALL_E_LIMIT, "npy encode: array too large");
        numel *= dim;
        n += (size_t)snprintf(header + n, sizeof header - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    n += (size_t)snprintf(header + n, sizeof header - n, "%s), }", ndim == 1 ? "," : "");
    size_t pad = 64 - (10 + n + 1) % 64;
    size_t hlen = n + pad + 1;
    size_t nbytes = (size_t)numel * d->size;
    if (nbytes && !data) return rc_fail(err, RECALL_E_ARG, "npy encode: NULL data");
    if (nbytes > SIZE_MAX - 10 - hlen) return rc_fail(err, RECALL_E_LIMIT, "npy encode: array too large");
    uint8_t *buf = malloc(10 + hlen + nbytes);
    if (!buf) return rc_fail(err, RECALL_E_NOMEM, "npy encode: out of memory for %zu bytes", 10 + hlen + nbytes);
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    store_le(buf + 8, hlen, 2);
    memcpy(buf + 10, header, n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    uint8_t *dst = buf + 10 + hlen;
    const uint8_t *src = data;
    for (size_t i = 0; i < (size_t)numel; i++) store_le(dst + i * d->size, host_bits(src + i * d->size, d->size), d->size);
    *out = buf;
    *out_len = 10 + hlen + nbytes;
    return RECALL_OK;
}

/* ---- npz reading -------------------------------------------------------------------------- */

struct rc_npz {
    rc_zip zip;
    uint8_t *owned; /* file contents when opened from a path */
};

recall_status rc_npz_open_mem(const void *buf, size_t len, const char *what, rc_npz **out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "rc_npz_open_mem: NULL output");
    *out = NULL;
    rc_npz *npz = calloc(1, sizeof *npz);
    if (!npz) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what ? what : "npz");
    recall_status st = rc_zip_open(&npz->zip, buf, len, what ? what : "npz", err);
    if (st != RECALL_OK) {
        free(npz);
        return st;
    }
    *out = npz;
    return RECALL_OK;
}

recall_status rc_npz_open(const char *path, rc_npz **out, recall_err *err) {
    if (!out || !path) return rc_fail(err, RECALL_E_ARG, "rc_npz_open: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return rc_fail(err, RECALL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat stt;
    if (fstat(fileno(f), &stt) != 0 || stt.st_size < 0 || (uint64_t)stt.st_size > SIZE_MAX - 1) {
        fclose(f);
        return rc_fail(err, RECALL_E_IO, "%s: cannot determine the file size", path);
    }
    size_t len = (size_t)stt.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(f);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %zu bytes", path, len);
    }
    size_t got = fread(buf, 1, len, f);
    int read_err = ferror(f);
    fclose(f);
    if (got != len || read_err) {
        free(buf);
        return rc_fail(err, RECALL_E_IO, "%s: short read (%zu of %zu bytes)", path, got, len);
    }
    recall_status st = rc_npz_open_mem(buf, len, path, out, err);
    if (st != RECALL_OK) {
        free(buf);
        return st;
    }
    (*out)->owned = buf;
    return RECALL_OK;
}

void rc_npz_close(rc_npz *npz) {
    if (!npz) return;
    rc_zip_close(&npz->zip);
    free(npz->owned);
    free(npz);
}

const rc_zip *rc_npz_zip(const rc_npz *npz) { return npz ? &npz->zip : NULL; }
size_t rc_npz_count(const rc_npz *npz) { return npz ? npz->zip.n : 0; }

const char *rc_npz_key(const rc_npz *npz, size_t i, char *key, size_t cap) {
    if (!npz || i >= npz->zip.n || !key) return NULL;
    const char *name = npz->zip.entries[i].name;
    size_t n = strlen(name);
    if (n >= 4 && strcmp(name + n - 4, ".npy") == 0) n -= 4;
    if (n >= cap) return NULL;
    memcpy(key, name, n);
    key[n] = 0;
    return key;
}

static const rc_zip_entry *find_member(const rc_npz *npz, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < npz->zip.n; i++) {
        const char *name = npz->zip.entries[i].name;
        if (strncmp(name, key, n) == 0 && strcmp(name + n, ".npy") == 0) return &npz->zip.entries[i];
    }
    return rc_zip_find(&npz->zip, key);
}

int rc_npz_has(const rc_npz *npz, const char *key) { return npz && key && find_member(npz, key) != NULL; }

recall_status rc_npz_get(const rc_npz *npz, const char *key, rc_npy *out, recall_err *err) {
    if (out) memset(out, 0, sizeof *out);
    if (!npz || !key || !out) return rc_fail(err, RECALL_E_ARG, "rc_npz_get: NULL argument");
    const rc_zip_entry *e = find_member(npz, key);
    if (!e) {
        char names[200];
        size_t n = 0;
        names[0] = 0;
        for (size_t i = 0; i < npz->zip.n && n < sizeof names - 1; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", npz->zip.entries[i].name);
        return rc_fail(err, RECALL_E_MISSING, "%s: no array '%s' (members: %s)", npz->zip.what, key, names);
    }
    char what[320];
    snprintf(what, sizeof what, "%s: %s", npz->zip.what, e->name);
    if (e->method == 0 && e->comp_size == e->size && e->data_offset <= npz->zip.len &&
        e->size <= npz->zip.len - e->data_offset) {
        /* Stored member: check its CRC and view it in place (no copy of big weights). */
        const uint8_t *src = npz->zip.buf + e->data_offset;
        uint32_t crc = rc_crc32(0, src, (size_t)e->size);
        if (crc != e->crc32)
            return rc_fail(err, RECALL_E_CHECKSUM, "%s: member '%s': CRC-32 mismatch (stored %08x, computed %08x)",
                           npz->zip.what, e->name, (unsigned)e->crc32, (unsigned)crc);
        return rc_npy_parse(src, (size_t)e->size, what, out, err);
    }
    uint8_t *bytes;
    size_t len;
    RC_TRY(rc_zip_read(&npz->zip, e, &bytes, &len, err));
    recall_status st = rc_npy_parse(bytes, len, what, out, err);
    if (st != RECALL_OK) {
        free(bytes);
        return st;
    }
    out->owned = bytes;
    return RECALL_OK;
}

recall_status rc_npz_get_f32(const rc_npz *npz, const char *key, float **out, int *ndim, int64_t *shape,
                             recall_err *err) {
    if (out) *out = NULL;
    rc_npy a;
    RC_TRY(rc_npz_get(npz, key, &a, err));
    recall_status st = rc_npy_to_f32(&a, key, out, err);
    if (st == RECALL_OK) {
        if (ndim) *ndim = a.ndim;
        if (shape)
            for (int i = 0; i < RC_NPY_MAX_DIMS; i++) shape[i] = i < a.ndim ? a.shape[i] : 0;
    }
    rc_npy_free(&a);
    return st;
}

recall_status rc_npz_get_i64(const rc_npz *npz, const char *key, int64_t *out, recall_err *err) {
    rc_npy a;
    RC_TRY(rc_npz_get(npz, key, &a, err));
    recall_status st = rc_npy_scalar_i64(&a, key, out, err);
    rc_npy_free(&a);
    return st;
}

/* ---- npz writing -------------------------------------------------------------------------- */

typedef struct {
    char *name;     /* "<key>.npy" */
    uint8_t *bytes; /* the encoded .npy */
    size_t len;
    uint32_t crc;
} npz_member;

struct rc_npz_writer {
    npz_member *members;
    size_t n, cap;
};

recall_status rc_npz_writer_new(rc_npz_writer **out, recall_err *err) {
    if (!out) return rc_fail(err, RECALL_E_ARG, "rc_npz_writer_new: NULL output");
    *out = calloc(1, sizeof **out);
    return *out ? RECALL_OK : rc_fail(err, RECALL_E_NOMEM, "npz writer: out of memory");
}

void rc_npz_writer_free(rc_npz_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->members[i].name);
        free(w->members[i].bytes);
    }
    free(w->members);
    free(w);
}

recall_status rc_npz_writer_add(rc_npz_writer *w, const char *key, rc_npy_dtype dtype, int ndim,
                                const int64_t *shape, const void *data, recall_err *err) {
    if (!w || !key) return rc_fail(err, RECALL_E_ARG, "npz writer: NULL argument");
    size_t klen = strlen(key);
    if (klen == 0 || klen > 1000) return rc_fail(err, RECALL_E_ARG, "npz writer: bad key length %zu", klen);
    for (size_t i = 0; i < w->n; i++)
        if (strncmp(w->members[i].name, key, klen) == 0 && strcmp(w->members[i].name + klen, ".npy") == 0)
            return rc_fail(err, RECALL_E_ARG, "npz writer: key '%s' added twice", key);
    if (w->n == 0xFFFF) return rc_fail(err, RECALL_E_LIMIT, "npz writer: too many members (zip64 not supported)");
    npz_member *grown = rc_grow(w->members, w->n, &w->cap, sizeof *grown, 8);
    if (!grown) return rc_fail(err, RECALL_E_NOMEM, "npz writer: out of memory");
    w->members = grown;
    npz_member m = {0};
    m.name = malloc(klen + 5);
    if (!m.name) return rc_fail(err, RECALL_E_NOMEM, "npz writer: out of memory");
    memcpy(m.name, key, klen);
    memcpy(m.name + klen, ".npy", 5);
    recall_status st = rc_npy_encode(dtype, ndim, shape, data, &m.bytes, &m.len, err);
    if (st != RECALL_OK) {
        free(m.name);
        if (err) rc_wrap(err, "npz writer: '%s': ", key);
        return st;
    }
    m.crc = rc_crc32(0, m.bytes, m.len);
    w->members[w->n++] = m;
    return RECALL_OK;
}

recall_status rc_npz_writer_bytes(const rc_npz_writer *w, uint8_t **out, size_t *out_len, recall_err *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!w || !out || !out_len) return rc_fail(err, RECALL_E_ARG, "npz writer: NULL argument");
    uint64_t local_total = 0, cd_total = 0;
    for (size_t i = 0; i < w->n; i++) {
        size_t nl = strlen(w->members[i].name);
        local_total += 30 + nl + (uint64_t)w->members[i].len;
        cd_total += 46 + nl;
    }
    uint64_t total = local_total + cd_total + 22;
    if (local_total >= 0xFFFFFFFFu || total > SIZE_MAX)
        return rc_fail(err, RECALL_E_LIMIT, "npz writer: archive of %llu bytes would need zip64",
                       (unsigned long long)total);
    uint8_t *buf = malloc((size_t)total);
    if (!buf) return rc_fail(err, RECALL_E_NOMEM, "npz writer: out of memory for %llu bytes", (unsigned long long)total);

    /* Fixed fields: version 2.0, no flags, stored, DOS date 1980-01-01 00:00 (reproducible). */
    size_t pos = 0;
    uint32_t *offsets = malloc((w->n ? w->n : 1) * sizeof *offsets);
    if (!offsets) {
        free(buf);
        return rc_fail(err, RECALL_E_NOMEM, "npz writer: out of memory");
    }
    for (size_t i = 0; i < w->n; i++) {
        const npz_member *m = &w->members[i];
        size_t nl = strlen(m->name);
        uint8_t *h = buf + pos;
        offsets[i] = (uint32_t)pos;
        store_le(h, 0x04034b50u, 4);
        store_le(h + 4, 20, 2);          /* version needed */
        store_le(h + 6, 0, 2);           /* flags */
        store_le(h + 8, 0, 2);           /* method: stored */
        store_le(h + 10, 0, 2);          /* time */
        store_le(h + 12, 0x21, 2);       /* date: 1980-01-01 */
        store_le(h + 14, m->crc, 4);
        store_le(h + 18, m->len, 4);     /* compressed size */
        store_le(h + 22, m->len, 4);     /* uncompressed size */
        store_le(h + 26, nl, 2);
        store_le(h + 28, 0, 2);          /* extra length */
        memcpy(h + 30, m->name, nl);
        memcpy(h + 30 + nl, m->bytes, m->len);
        pos += 30 + nl + m->len;
    }
    size_t cd_start = pos;
    for (size_t i = 0; i < w->n; i++) {
        const npz_member *m = &w->members[i];
        size_t nl = strlen(m->name);
        uint8_t *c = buf + pos;
        store_le(c, 0x02014b50u, 4);
        store_le(c + 4, 0x0314, 2);      /* made by: unix, 2.0 */
        store_le(c + 6, 20, 2);
        store_le(c + 8, 0, 2);
        store_le(c + 10, 0, 2);
        store_le(c + 12, 0, 2);
        store_le(c + 14, 0x21, 2);
        store_le(c + 16, m->crc, 4);
        store_le(c + 20, m->len, 4);
        store_le(c + 24, m->len, 4);
        store_le(c + 28, nl, 2);
        store_le(c + 30, 0, 2);          /* extra */
        store_le(c + 32, 0, 2);          /* comment */
        store_le(c + 34, 0, 2);          /* disk */
        store_le(c + 36, 0, 2);          /* internal attributes */
        store_le(c + 38, 0100644u << 16, 4); /* regular file, rw-r--r-- */
        store_le(c + 42, offsets[i], 4);
        memcpy(c + 46, m->name, nl);
        pos += 46 + nl;
    }
    free(offsets);
    uint8_t *e = buf + pos;
    store_le(e, 0x06054b50u, 4);
    store_le(e + 4, 0, 4);               /* this disk, disk with the directory */
    store_le(e + 8, w->n, 2);
    store_le(e + 10, w->n, 2);
    store_le(e + 12, pos - cd_start, 4);
    store_le(e + 16, cd_start, 4);
    store_le(e + 20, 0, 2);              /* comment */
    pos += 22;
    *out = buf;
    *out_len = pos;
    return RECALL_OK;
}

recall_status rc_npz_writer_write(const rc_npz_writer *w, const char *path, recall_err *err) {
    if (!w || !path) return rc_fail(err, RECALL_E_ARG, "npz writer: NULL argument");
    uint8_t *bytes;
    size_t len;
    RC_TRY(rc_npz_writer_bytes(w, &bytes, &len, err));
    rc_afile af;
    recall_status st = rc_afile_open(&af, path, err);
    if (!st && fwrite(bytes, 1, len, af.f) != len) st = rc_fail(err, RECALL_E_IO, "%s: write failed", af.tmp);
    if (!st) st = rc_afile_commit(&af, err);
    rc_afile_abort(&af);
    free(bytes);
    return st;
}
