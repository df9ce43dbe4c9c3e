/* blob.c - open (mmap, validate, typed zero-copy views) and write recall weight blobs.
 * The byte layout is defined in blob.h. Loading validates structure, bounds, alignment and the
 * small tables' checksums; RC_OPEN_VERIFY (and rc_blob_verify) also hash every tensor byte. */
#include "blob.h"

#include "atomic_file.h"

#include "checksum.h"
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

struct rc_blob {
    char path[512];
    const uint8_t *base;
    size_t size;
    int mapped;   /* 1: munmap(base, map_len) on close; 0 with owned: free on close */
    int file_backed; /* 1: base is a read-only mapping of the file itself (not a copy) */
    size_t map_len;
    void *owned;
    const rc_blob_header *hdr;
    const rc_blob_sect *sects;
    const rc_blob_kv *kv;
    size_t n_kv;
    const rc_blob_tensor *raw;
    rc_tensor *tensors;
    size_t n_tensors;
    /* runtime config entries set by the caller (rc_blob_overlay_kv); the file is unchanged */
    rc_blob_kv overlay[RC_BLOB_OVERLAY_MAX];
    size_t n_overlay;
};

static int host_is_little(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

const char *rc_dtype_name(rc_dtype t) {
    switch (t) {
    case RC_DT_F32: return "f32";
    case RC_DT_BF16: return "bf16";
    case RC_DT_F16: return "f16";
    case RC_DT_NF4: return "nf4";
    case RC_DT_I32: return "i32";
    case RC_DT_I64: return "i64";
    case RC_DT_U8: return "u8";
    case RC_DT_NF4_DQ: return "nf4-dq";
    default: return "?";
    }
}

size_t rc_dtype_size(rc_dtype t) {
    switch (t) {
    case RC_DT_F32:
    case RC_DT_I32: return 4;
    case RC_DT_BF16:
    case RC_DT_F16: return 2;
    case RC_DT_I64: return 8;
    case RC_DT_U8: return 1;
    default: return 0;
    }
}

/* numel * element size (or the NF4 layout size), failing on overflow or a bad dtype. */
static int tensor_nbytes(rc_dtype dt, uint32_t ndim, const uint64_t *shape, uint64_t *numel,
                         uint64_t *nbytes) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        if (shape[d] != 0 && n > UINT64_MAX / shape[d]) return 0;
        n *= shape[d];
    }
    if (n > (UINT64_MAX >> 4)) return 0;
    *numel = n;
    if (dt == RC_DT_NF4) {
        if (n % RECALL_NF4_BLOCK) return 0;
        *nbytes = rc_nf4_nbytes(n);
        return 1;
    }
    size_t es = rc_dtype_size(dt);
    if (!es) return 0;
    *nbytes = n * es;
    return 1;
}

static int name_ok(const char *s, size_t cap) {
    size_t l = strnlen(s, cap);
    if (l == 0 || l == cap) return 0;
    for (size_t i = l; i < cap; i++)
        if (s[i]) return 0; /* padding must be zero so the table is canonical */
    return 1;
}

static int cmp_u64pair(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0;
}

/* The fixed header: magic, byte order, version, its own checksum, sizes and the section table's
 * bounds. Sets b->hdr and b->sects. */
static recall_status validate_header(rc_blob *b, recall_err *err) {
    const char *P = b->path;
    if (b->size < sizeof(rc_blob_header))
        return rc_fail(err, RECALL_E_FORMAT, "%s: truncated: %zu bytes, smaller than the %zu-byte header",
                       P, b->size, sizeof(rc_blob_header));
    const rc_blob_header *h = (const rc_blob_header *)b->base;
    b->hdr = h;
    if (memcmp(h->magic, RECALL_BLOB_MAGIC, 8) != 0)
        return rc_fail(err, RECALL_E_FORMAT, "%s: not a recall blob (bad magic at byte 0)", P);
    if (h->endian != RECALL_BLOB_ENDIAN || !host_is_little())
        return rc_fail(err, RECALL_E_VERSION,
                       "%s: byte-order mark 0x%08x does not match this host (blobs are little-endian; "
                       "big-endian hosts are not supported)", P, (unsigned)h->endian);
    if (h->version < 1 || h->version > RECALL_BLOB_VERSION)
        return rc_fail(err, RECALL_E_VERSION,
                       "%s: blob format version %u, this build reads versions 1 to %u%s", P,
                       (unsigned)h->version, RECALL_BLOB_VERSION,
                       h->version > RECALL_BLOB_VERSION ? " (blob is newer: upgrade recall)" : "");
    if (rc_xxh64(h, offsetof(rc_blob_header, header_checksum), 0) != h->header_checksum)
        return rc_fail(err, RECALL_E_CHECKSUM, "%s: header checksum mismatch (bytes 0..119 corrupted)", P);
    if (h->header_size != sizeof(rc_blob_header))
        return rc_fail(err, RECALL_E_FORMAT, "%s: header_size %u, expected %zu", P,
                       (unsigned)h->header_size, sizeof(rc_blob_header));
    if (h->file_size != b->size)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %s: header says %llu bytes, file has %zu", P,
                       h->file_size > b->size ? "truncated" : "trailing bytes",
                       (unsigned long long)h->file_size, b->size);
    if (h->n_sections > 64 || h->sect_off % RECALL_BLOB_ALIGN ||
        h->sect_off < sizeof(rc_blob_header) ||
        h->sect_off > b->size || (b->size - h->sect_off) / sizeof(rc_blob_sect) < h->n_sections)
        return rc_fail(err, RECALL_E_FORMAT, "%s: section table (offset %llu, %u entries) out of bounds",
                       P, (unsigned long long)h->sect_off, (unsigned)h->n_sections);
    b->sects = (const rc_blob_sect *)(b->base + h->sect_off);
    return RECALL_OK;
}

/* Each section: in bounds, its checksum, a kind seen once. Locates the config and tensor tables. */
static recall_status validate_sections(rc_blob *b, recall_err *err) {
    const char *P = b->path;
    for (uint32_t s = 0; s < b->hdr->n_sections; s++) {
        const rc_blob_sect *sc = &b->sects[s];
        if (sc->offset % RECALL_BLOB_ALIGN || sc->offset > b->size || sc->size > b->size - sc->offset)
            return rc_fail(err, RECALL_E_FORMAT, "%s: section %u (kind %u) at offset %llu size %llu out of bounds",
                           P, (unsigned)s, (unsigned)sc->kind, (unsigned long long)sc->offset,
                           (unsigned long long)sc->size);
        if (rc_xxh64(b->base + sc->offset, sc->size, 0) != sc->checksum)
            return rc_fail(err, RECALL_E_CHECKSUM, "%s: section %u (kind %u) at offset %llu: checksum mismatch",
                           P, (unsigned)s, (unsigned)sc->kind, (unsigned long long)sc->offset);
        for (uint32_t t = 0; t < s; t++)
            if (b->sects[t].kind == sc->kind)
                return rc_fail(err, RECALL_E_FORMAT, "%s: duplicate section kind %u", P, (unsigned)sc->kind);
        if (sc->kind == RC_SECT_CONFIG) {
            if (sc->size != (uint64_t)sc->count * sizeof(rc_blob_kv))
                return rc_fail(err, RECALL_E_FORMAT, "%s: config section size %llu != %u entries", P,
                               (unsigned long long)sc->size, (unsigned)sc->count);
            b->kv = (const rc_blob_kv *)(b->base + sc->offset);
            b->n_kv = sc->count;
        } else if (sc->kind == RC_SECT_TENSORS) {
            if (sc->size != (uint64_t)sc->count * sizeof(rc_blob_tensor))
                return rc_fail(err, RECALL_E_FORMAT, "%s: tensor table size %llu != %u entries", P,
                               (unsigned long long)sc->size, (unsigned)sc->count);
            b->raw = (const rc_blob_tensor *)(b->base + sc->offset);
            b->n_tensors = sc->count;
        }
    }
    return RECALL_OK;
}

/* Config entries: canonical keys, a valid type / count, no key twice. */
static recall_status validate_config(const rc_blob *b, recall_err *err) {
    const char *P = b->path;
    for (size_t i = 0; i < b->n_kv; i++) {
        const rc_blob_kv *kv = &b->kv[i];
        if (!name_ok(kv->key, RC_KV_KEY_LEN))
            return rc_fail(err, RECALL_E_FORMAT, "%s: config entry %zu has a malformed key", P, i);
        int ok = (kv->type == RC_KV_I64 || kv->type == RC_KV_F64)
                     ? (kv->count >= 1 && kv->count <= RC_KV_MAX_VALUES)
                     : kv->type == RC_KV_STR ? kv->count < sizeof kv->v.s && kv->v.s[kv->count] == 0 : 0;
        if (!ok)
            return rc_fail(err, RECALL_E_FORMAT, "%s: config key '%s': bad type %u / count %u", P, kv->key,
                           (unsigned)kv->type, (unsigned)kv->count);
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->kv[j].key, kv->key) == 0)
                return rc_fail(err, RECALL_E_FORMAT, "%s: duplicate config key '%s'", P, kv->key);
    }
    return RECALL_OK;
}

/* Tensor entry i: name, dtype / shape, data in bounds and aligned, a name seen once; fills the
 * view b->tensors[i] and, with RC_OPEN_VERIFY, checks the data's checksum. */
static recall_status validate_tensor(rc_blob *b, size_t i, unsigned flags, recall_err *err) {
    const char *P = b->path;
    const rc_blob_tensor *r = &b->raw[i];
    rc_tensor *t = &b->tensors[i];
    uint64_t numel = 0, nbytes = 0;
    if (!name_ok(r->name, RC_TENSOR_NAME_LEN))
        return rc_fail(err, RECALL_E_FORMAT, "%s: tensor entry %zu has a malformed name", P, i);
    if (r->ndim > RC_MAX_DIMS || !tensor_nbytes((rc_dtype)r->dtype, r->ndim, r->shape, &numel, &nbytes))
        return rc_fail(err, RECALL_E_FORMAT, "%s: tensor '%s': bad dtype %u / ndim %u / shape", P, r->name,
                       (unsigned)r->dtype, (unsigned)r->ndim);
    if (r->dtype == RC_DT_NF4 && r->block != RECALL_NF4_BLOCK)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: tensor '%s': nf4 block %u (only %u supported)", P,
                       r->name, (unsigned)r->block, RECALL_NF4_BLOCK);
    if (nbytes != r->nbytes || r->offset % RECALL_BLOB_ALIGN || r->offset > b->size ||
        r->nbytes > b->size - r->offset)
        return rc_fail(err, RECALL_E_FORMAT,
                       "%s: tensor '%s': data at offset %llu size %llu (expected %llu) out of bounds or misaligned",
                       P, r->name, (unsigned long long)r->offset, (unsigned long long)r->nbytes,
                       (unsigned long long)nbytes);
    if (RC_NAME_INDEX(b->raw, i, rc_blob_tensor, name, r->name) < i)
        return rc_fail(err, RECALL_E_FORMAT, "%s: duplicate tensor name '%s'", P, r->name);
    t->name = r->name;
    t->dtype = (rc_dtype)r->dtype;
    t->ndim = (int)r->ndim;
    for (uint32_t d = 0; d < RC_MAX_DIMS; d++) t->shape[d] = d < r->ndim ? (int64_t)r->shape[d] : 0;
    t->numel = (int64_t)numel;
    t->data = b->base + r->offset;
    t->absmax = r->dtype == RC_DT_NF4 ? (const float *)(b->base + r->offset + rc_nf4_absmax_offset(numel)) : NULL;
    t->nbytes = (size_t)r->nbytes;
    t->checksum = r->checksum;
    t->offset = r->offset;
    if ((flags & RC_OPEN_VERIFY) && rc_xxh64(t->data, t->nbytes, 0) != r->checksum)
        return rc_fail(err, RECALL_E_CHECKSUM, "%s: tensor '%s' at offset %llu: checksum mismatch", P, r->name,
                       (unsigned long long)r->offset);
    return RECALL_OK;
}

/* Header, section table, sections and tensor data ([begin, end) pairs) may not overlap. */
static recall_status check_overlaps(const char *P, uint64_t (*reg)[2], size_t nreg, recall_err *err) {
    qsort(reg, nreg, sizeof *reg, cmp_u64pair);
    for (size_t i = 1; i < nreg; i++)
        if (reg[i][0] < reg[i - 1][1])
            return rc_fail(err, RECALL_E_FORMAT, "%s: overlapping regions at byte offset %llu", P,
                           (unsigned long long)reg[i][0]);
    return RECALL_OK;
}

static recall_status validate(rc_blob *b, unsigned flags, recall_err *err) {
    const char *P = b->path;
    RC_TRY(validate_header(b, err));
    RC_TRY(validate_sections(b, err));
    RC_TRY(validate_config(b, err));
    const rc_blob_header *h = b->hdr;

    size_t nreg_cap = 2 + h->n_sections + b->n_tensors;
    uint64_t(*reg)[2] = malloc(nreg_cap * sizeof *reg);
    b->tensors = calloc(b->n_tensors ? b->n_tensors : 1, sizeof *b->tensors);
    if (!reg || !b->tensors) {
        free(reg);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %zu tensor views", P, b->n_tensors);
    }
    size_t nreg = 0;
    reg[nreg][0] = 0, reg[nreg++][1] = sizeof(rc_blob_header);
    reg[nreg][0] = h->sect_off, reg[nreg++][1] = h->sect_off + (uint64_t)h->n_sections * sizeof(rc_blob_sect);
    for (uint32_t s = 0; s < h->n_sections; s++)
        if (b->sects[s].size) reg[nreg][0] = b->sects[s].offset, reg[nreg++][1] = b->sects[s].offset + b->sects[s].size;

    recall_status st = RECALL_OK;
    for (size_t i = 0; i < b->n_tensors && !st; i++) {
        st = validate_tensor(b, i, flags, err);
        const rc_blob_tensor *r = &b->raw[i];
        if (!st && r->nbytes) reg[nreg][0] = r->offset, reg[nreg++][1] = r->offset + r->nbytes;
    }
    if (!st) st = check_overlaps(P, reg, nreg, err);
    free(reg);
    if (!st && (flags & RC_OPEN_VERIFY) &&
        rc_xxh64(b->base + h->header_size, b->size - h->header_size, 0) != h->body_checksum)
        st = rc_fail(err, RECALL_E_CHECKSUM, "%s: body checksum mismatch (a byte after offset 128 changed)", P);
    return st;
}

static recall_status open_common(rc_blob *b, unsigned flags, rc_blob **out, recall_err *err) {
    recall_status st = validate(b, flags, err);
    if (st) {
        rc_blob_close(b);
        return st;
    }
    *out = b;
    return RECALL_OK;
}

recall_status rc_blob_open_mem(const void *buf, size_t len, const char *what, unsigned flags,
                               rc_blob **out, recall_err *err) {
    *out = NULL;
    rc_blob *b = calloc(1, sizeof *b);
    if (!b) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
    snprintf(b->path, sizeof b->path, "%s", what ? what : "<memory>");
    b->base = buf;
    b->size = len;
    return open_common(b, flags, out, err);
}

/* Reads up to n bytes from fd into buf; returns how many arrived (< n: error or end of file). */
static size_t read_all(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

void *rc_huge_map(size_t n, size_t *len) {
#ifndef RECALL_NO_MMAP
    const size_t huge = (size_t)2 << 20;
    *len = (n + huge - 1) / huge * huge;
    void *m = *len ? mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (m == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(m, *len, MADV_HUGEPAGE); /* advisory: without THP the memory still works */
#endif
    return m;
#else
    (void)n;
    *len = 0;
    return NULL;
#endif
}

void rc_huge_unmap(void *p, size_t len) {
#ifndef RECALL_NO_MMAP
    if (p) munmap(p, len);
#else
    (void)p;
    (void)len;
#endif
}

recall_status rc_open_regular(const char *path, int *fd, size_t *size, recall_err *err) {
    *fd = open(path, O_RDONLY);
    if (*fd < 0) return rc_fail(err, RECALL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(*fd);
        *fd = -1;
        return rc_fail(err, RECALL_E_IO, "%s: not a regular file", path);
    }
    *size = (size_t)sb.st_size;
    return RECALL_OK;
}

recall_status rc_blob_open(const char *path, unsigned flags, rc_blob **out, recall_err *err) {
    *out = NULL;
    int fd;
    size_t size;
    RC_TRY(rc_open_regular(path, &fd, &size, err));
    rc_blob *b = calloc(1, sizeof *b);
    if (!b) {
        close(fd);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", path);
    }
    snprintf(b->path, sizeof b->path, "%s", path);
    b->size = size;
#ifndef RECALL_NO_MMAP
    if ((flags & RC_OPEN_HUGEPAGES) && b->size > 0) {
        size_t len;
        void *m = rc_huge_map(b->size, &len);
        if (!m) {
            close(fd);
            free(b);
            return rc_fail(err, RECALL_E_NOMEM, "%s: cannot allocate %zu bytes for a huge-page copy", path, len);
        }
        const size_t got = read_all(fd, m, b->size);
        if (got != b->size || mprotect(m, len, PROT_READ) != 0) {
            const size_t want = b->size;
            munmap(m, len);
            close(fd);
            free(b);
            return rc_fail(err, RECALL_E_IO, "%s: short read at byte %zu of %zu", path, got, want);
        }
        b->base = m;
        b->mapped = 1;
        b->map_len = len;
    } else if (!(flags & RC_OPEN_NO_MMAP) && b->size > 0) {
        void *m = mmap(NULL, b->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            b->base = m;
            b->mapped = 1;
            b->file_backed = 1;
            b->map_len = b->size;
        }
    }
#endif
    if (!b->mapped) {
        /* 64-byte aligned like the file's sections, so views keep the alignment a mapping has */
        const size_t alloc = (b->size + RECALL_BLOB_ALIGN - 1) / RECALL_BLOB_ALIGN * RECALL_BLOB_ALIGN;
        b->owned = aligned_alloc(RECALL_BLOB_ALIGN, alloc ? alloc : RECALL_BLOB_ALIGN);
        if (!b->owned) {
            close(fd);
            free(b);
            return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory reading %zu bytes", path, size);
        }
        const size_t got = read_all(fd, b->owned, b->size);
        if (got != b->size) {
            const size_t want = b->size;
            close(fd);
            free(b->owned);
            free(b);
            return rc_fail(err, RECALL_E_IO, "%s: short read at byte %zu of %zu", path, got, want);
        }
        b->base = b->owned;
    }
    close(fd);
    return open_common(b, flags, out, err);
}

void rc_blob_close(rc_blob *b) {
    if (!b) return;
#ifndef RECALL_NO_MMAP
    if (b->mapped) munmap((void *)b->base, b->map_len);
#endif
    free(b->owned);
    free(b->tensors);
    free(b);
}

recall_status rc_blob_verify(const rc_blob *b, recall_err *err) {
    rc_blob tmp = *b;
    tmp.tensors = NULL;
    tmp.mapped = 0;
    tmp.owned = NULL;
    recall_status st = validate(&tmp, RC_OPEN_VERIFY, err);
    free(tmp.tensors);
    return st;
}

const char *rc_blob_path(const rc_blob *b) { return b->path; }
const rc_blob_header *rc_blob_hdr(const rc_blob *b) { return b->hdr; }
size_t rc_blob_n_tensors(const rc_blob *b) { return b->n_tensors; }
const rc_tensor *rc_blob_tensor_at(const rc_blob *b, size_t i) { return i < b->n_tensors ? &b->tensors[i] : NULL; }
size_t rc_blob_n_kv(const rc_blob *b) { return b->n_kv; }
const rc_blob_kv *rc_blob_kv_at(const rc_blob *b, size_t i) { return i < b->n_kv ? &b->kv[i] : NULL; }

const rc_tensor *rc_blob_find(const rc_blob *b, const char *name) {
    size_t i = RC_NAME_INDEX(b->tensors, b->n_tensors, rc_tensor, name, name);
    return i < b->n_tensors ? &b->tensors[i] : NULL;
}

const rc_blob_kv *rc_blob_kv_find(const rc_blob *b, const char *key) {
    for (size_t i = 0; i < b->n_overlay; i++)
        if (strcmp(b->overlay[i].key, key) == 0) return &b->overlay[i];
    return rc_blob_kv_find_file(b, key);
}

const rc_blob_kv *rc_blob_kv_find_file(const rc_blob *b, const char *key) {
    for (size_t i = 0; i < b->n_kv; i++)
        if (strcmp(b->kv[i].key, key) == 0) return &b->kv[i];
    return NULL;
}

void rc_blob_release(const rc_blob *b, const void *p, size_t n) {
#ifndef RECALL_NO_MMAP
    if (!b->file_backed || !p || !n) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)b->base, hi = lo + b->size;
    uintptr_t a = ((uintptr_t)p + pg - 1) / pg * pg, e = ((uintptr_t)p + n) / pg * pg;
    if (a < lo || e > hi || e <= a) return;
    (void)madvise((void *)a, e - a, MADV_DONTNEED); /* clean file pages: read again if touched */
#else
    (void)b, (void)p, (void)n;
#endif
}

const char *rc_blob_weights(const rc_blob *b, const char *part) {
    char key[RC_KV_KEY_LEN];
    snprintf(key, sizeof key, "%s.weights", part);
    const rc_blob_kv *kv = rc_blob_kv_find(b, key);
    if (kv && kv->type == RC_KV_STR) return kv->v.s;
    return strcmp(part, "bert") == 0 ? "f32" : "?";
}

void rc_blob_release_prefix(const rc_blob *b, const char *prefix) {
    if (!b->file_backed) return;
    const size_t pl = strlen(prefix);
    for (size_t i = 0; i < b->n_tensors; i++)
        if (strncmp(b->tensors[i].name, prefix, pl) == 0) rc_blob_release(b, b->tensors[i].data, b->tensors[i].nbytes);
}

size_t rc_blob_prefix_bytes(const rc_blob *b, const char *prefix, size_t *n_tensors) {
    size_t bytes = 0, n = 0, pl = strlen(prefix);
    for (size_t i = 0; i < b->n_tensors; i++)
        if (strncmp(b->tensors[i].name, prefix, pl) == 0) bytes += b->tensors[i].nbytes, n++;
    if (n_tensors) *n_tensors = n;
    return bytes;
}

recall_status rc_blob_overlay_kv(rc_blob *b, const rc_blob_kv *kv, recall_err *err) {
    if (kv->key[RC_KV_KEY_LEN - 1] != '\0' || (kv->type != RC_KV_I64 && kv->type != RC_KV_F64 && kv->type != RC_KV_STR))
        return rc_fail(err, RECALL_E_ARG, "%s: malformed runtime config entry", b->path);
    for (size_t i = 0; i < b->n_overlay; i++)
        if (strcmp(b->overlay[i].key, kv->key) == 0) {
            b->overlay[i] = *kv;
            return RECALL_OK;
        }
    if (b->n_overlay == RC_BLOB_OVERLAY_MAX)
        return rc_fail(err, RECALL_E_LIMIT, "%s: more than %d runtime config entries (%s)", b->path,
                       RC_BLOB_OVERLAY_MAX, kv->key);
    b->overlay[b->n_overlay++] = *kv;
    return RECALL_OK;
}

const void *rc_blob_section(const rc_blob *b, uint32_t kind, size_t *size) {
    for (uint32_t s = 0; s < b->hdr->n_sections; s++)
        if (b->sects[s].kind == kind) {
            if (size) *size = (size_t)b->sects[s].size;
            return b->base + b->sects[s].offset;
        }
    if (size) *size = 0;
    return NULL;
}

recall_status rc_blob_get_i64(const rc_blob *b, const char *key, int64_t *out, recall_err *err) {
    const rc_blob_kv *kv = rc_blob_kv_find(b, key);
    if (!kv) return rc_fail(err, RECALL_E_MISSING, "%s: config key '%s' missing", b->path, key);
    if (kv->type != RC_KV_I64) return rc_fail(err, RECALL_E_FORMAT, "%s: config key '%s' is not an integer", b->path, key);
    *out = kv->v.i[0];
    return RECALL_OK;
}

recall_status rc_blob_get_int(const rc_blob *b, const char *key, int lo, int hi, int *out, recall_err *err) {
    int64_t v = 0;
    RC_TRY(rc_blob_get_i64(b, key, &v, err));
    if (v < lo || v > hi)
        return rc_fail(err, RECALL_E_FORMAT, "%s: config %s = %lld out of range [%d, %d]", b->path, key, (long long)v,
                       lo, hi);
    *out = (int)v;
    return RECALL_OK;
}

recall_status rc_blob_get_f64(const rc_blob *b, const char *key, double *out, recall_err *err) {
    const rc_blob_kv *kv = rc_blob_kv_find(b, key);
    if (!kv) return rc_fail(err, RECALL_E_MISSING, "%s: config key '%s' missing", b->path, key);
    if (kv->type == RC_KV_F64) *out = kv->v.f[0];
    else if (kv->type == RC_KV_I64) *out = (double)kv->v.i[0];
    else return rc_fail(err, RECALL_E_FORMAT, "%s: config key '%s' is not a number", b->path, key);
    return RECALL_OK;
}

recall_status rc_blob_expect(const rc_blob *b, const char *name, unsigned dtype_mask, int ndim,
                             const int64_t *shape, const rc_tensor **out, recall_err *err) {
    const rc_tensor *t = rc_blob_find(b, name);
    *out = NULL;
    if (!t) return rc_fail(err, RECALL_E_MISSING, "%s: tensor '%s' missing", b->path, name);
    if (!(dtype_mask & (1u << t->dtype)))
        return rc_fail(err, RECALL_E_SHAPE, "%s: tensor '%s' has dtype %s, not accepted here", b->path, name,
                       rc_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        if (shape[d] >= 0 && shape[d] != t->shape[d]) ok = 0;
    if (!ok) {
        char want[96] = "", got[96] = "";
        size_t wl = 0, gl = 0;
        for (int d = 0; d < ndim && wl < sizeof want - 24; d++)
            wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld", d ? "," : "", (long long)shape[d]);
        for (int d = 0; d < t->ndim && gl < sizeof got - 24; d++)
            gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        return rc_fail(err, RECALL_E_SHAPE, "%s: tensor '%s' has shape [%s], config expects [%s]", b->path, name,
                       got, want);
    }
    *out = t;
    return RECALL_OK;
}

/* ---- writer ------------------------------------------------------------------------------- */

typedef struct {
    rc_blob_tensor meta;
    void *data;
} w_tensor;

typedef struct {
    uint32_t kind;
    void *data;
    size_t size;
} w_section;

struct rc_blob_writer {
    rc_blob_kv *kv;
    size_t n_kv, cap_kv;
    w_tensor *t;
    size_t n_t, cap_t;
    w_section sect[8];
    size_t n_sect;
};

recall_status rc_writer_new(rc_blob_writer **out, recall_err *err) {
    *out = calloc(1, sizeof **out);
    return *out ? RECALL_OK : rc_fail(err, RECALL_E_NOMEM, "out of memory");
}

void rc_writer_free(rc_blob_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].data);
    for (size_t i = 0; i < w->n_sect; i++) free(w->sect[i].data);
    free(w->t);
    free(w->kv);
    free(w);
}

static recall_status kv_slot(rc_blob_writer *w, const char *key, rc_blob_kv **slot, recall_err *err) {
    if (strlen(key) >= RC_KV_KEY_LEN) return rc_fail(err, RECALL_E_ARG, "config key '%s' too long", key);
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            memset(&w->kv[i], 0, sizeof w->kv[i]);
            strcpy(w->kv[i].key, key);
            *slot = &w->kv[i];
            return RECALL_OK;
        }
    if (w->n_kv == w->cap_kv) {
        size_t nc = w->cap_kv ? 2 * w->cap_kv : 32;
        rc_blob_kv *nk = realloc(w->kv, nc * sizeof *nk);
        if (!nk) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
        w->kv = nk;
        w->cap_kv = nc;
    }
    *slot = &w->kv[w->n_kv++];
    memset(*slot, 0, sizeof **slot);
    strcpy((*slot)->key, key);
    return RECALL_OK;
}

recall_status rc_writer_kv_i64(rc_blob_writer *w, const char *key, const int64_t *v, int n, recall_err *err) {
    if (n < 1 || n > RC_KV_MAX_VALUES) return rc_fail(err, RECALL_E_ARG, "config key '%s': %d values", key, n);
    rc_blob_kv *s;
    RC_TRY(kv_slot(w, key, &s, err));
    s->type = RC_KV_I64;
    s->count = (uint32_t)n;
    for (int i = 0; i < n; i++) s->v.i[i] = v[i];
    return RECALL_OK;
}

recall_status rc_writer_kv_f64(rc_blob_writer *w, const char *key, double v, recall_err *err) {
    rc_blob_kv *s;
    RC_TRY(kv_slot(w, key, &s, err));
    s->type = RC_KV_F64;
    s->count = 1;
    s->v.f[0] = v;
    return RECALL_OK;
}

recall_status rc_writer_kv_str(rc_blob_writer *w, const char *key, const char *str, recall_err *err) {
    size_t l = strlen(str);
    if (l >= sizeof(((rc_blob_kv *)0)->v.s)) return rc_fail(err, RECALL_E_ARG, "config key '%s': string too long", key);
    rc_blob_kv *s;
    RC_TRY(kv_slot(w, key, &s, err));
    s->type = RC_KV_STR;
    s->count = (uint32_t)l;
    memcpy(s->v.s, str, l);
    return RECALL_OK;
}

recall_status rc_writer_tensor(rc_blob_writer *w, const char *name, rc_dtype dtype, int ndim,
                               const int64_t *shape, void *data, size_t nbytes, recall_err *err) {
    if (strlen(name) >= RC_TENSOR_NAME_LEN || !*name) {
        free(data);
        return rc_fail(err, RECALL_E_ARG, "tensor name '%s' empty or too long (max %d)", name, RC_TENSOR_NAME_LEN - 1);
    }
    if (RC_NAME_INDEX(w->t, w->n_t, w_tensor, meta.name, name) < w->n_t) {
        free(data);
        return rc_fail(err, RECALL_E_ARG, "duplicate tensor '%s'", name);
    }
    rc_blob_tensor m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, name);
    m.dtype = (uint32_t)dtype;
    m.ndim = (uint32_t)ndim;
    m.block = dtype == RC_DT_NF4 ? RECALL_NF4_BLOCK : 0;
    if (ndim < 0 || ndim > RC_MAX_DIMS) {
        free(data);
        return rc_fail(err, RECALL_E_ARG, "tensor '%s': ndim %d", name, ndim);
    }
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            free(data);
            return rc_fail(err, RECALL_E_ARG, "tensor '%s': negative dim", name);
        }
        m.shape[d] = (uint64_t)shape[d];
    }
    uint64_t numel, want;
    if (!tensor_nbytes(dtype, m.ndim, m.shape, &numel, &want) || want != nbytes) {
        free(data);
        return rc_fail(err, RECALL_E_ARG, "tensor '%s': %zu bytes do not match dtype %s and shape", name, nbytes,
                       rc_dtype_name(dtype));
    }
    if (w->n_t == w->cap_t) {
        size_t nc = w->cap_t ? 2 * w->cap_t : 64;
        w_tensor *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) {
            free(data);
            return rc_fail(err, RECALL_E_NOMEM, "out of memory");
        }
        w->t = nt;
        w->cap_t = nc;
    }
    m.nbytes = nbytes;
    m.checksum = rc_xxh64(data, nbytes, 0);
    w->t[w->n_t].meta = m;
    w->t[w->n_t].data = data;
    w->n_t++;
    return RECALL_OK;
}

recall_status rc_writer_section(rc_blob_writer *w, uint32_t kind, void *data, size_t size, recall_err *err) {
    if (kind == RC_SECT_CONFIG || kind == RC_SECT_TENSORS || w->n_sect >= 6) {
        free(data);
        return rc_fail(err, RECALL_E_ARG, "section kind %u not allowed here", (unsigned)kind);
    }
    for (size_t i = 0; i < w->n_sect; i++)
        if (w->sect[i].kind == kind) {
            free(data);
            return rc_fail(err, RECALL_E_ARG, "duplicate section kind %u", (unsigned)kind);
        }
    w->sect[w->n_sect].kind = kind;
    w->sect[w->n_sect].data = data;
    w->sect[w->n_sect].size = size;
    w->n_sect++;
    return RECALL_OK;
}

static uint64_t align_up(uint64_t x) { return (x + RECALL_BLOB_ALIGN - 1) / RECALL_BLOB_ALIGN * RECALL_BLOB_ALIGN; }

typedef struct {
    FILE *f;
    uint64_t pos;
    rc_xxh64_state h;
    int ok;
} wstream;

static void ws_write(wstream *s, const void *p, size_t n) {
    if (!s->ok || !n) return;
    if (fwrite(p, 1, n, s->f) != n) s->ok = 0;
    rc_xxh64_update(&s->h, p, n);
    s->pos += n;
}

static void ws_pad_to(wstream *s, uint64_t off) {
    static const unsigned char zeros[RECALL_BLOB_ALIGN] = {0};
    while (s->ok && s->pos < off) {
        uint64_t n = off - s->pos;
        ws_write(s, zeros, n > sizeof zeros ? sizeof zeros : (size_t)n);
    }
}

recall_status rc_writer_write(rc_blob_writer *w, const char *path,
                              void (*progress)(void *ctx, size_t i, size_t n, const char *name), void *ctx,
                              recall_err *err) {
    /* Layout: header | section table | CONFIG | TENSORS | other sections | tensor data. */
    size_t n_sect = 2 + w->n_sect;
    rc_blob_sect sect[8];
    memset(sect, 0, sizeof sect);
    uint64_t off = align_up(sizeof(rc_blob_header) + n_sect * sizeof(rc_blob_sect));
    sect[0].kind = RC_SECT_CONFIG;
    sect[0].count = (uint32_t)w->n_kv;
    sect[0].offset = off;
    sect[0].size = w->n_kv * sizeof(rc_blob_kv);
    sect[0].checksum = rc_xxh64(w->kv, sect[0].size, 0);
    off = align_up(off + sect[0].size);
    /* Tensor table entries need their data offsets first. */
    uint64_t table_off = off, table_size = w->n_t * sizeof(rc_blob_tensor);
    off = align_up(off + table_size);
    for (size_t i = 0; i < w->n_sect; i++) {
        rc_blob_sect *s = &sect[2 + i];
        s->kind = w->sect[i].kind;
        s->offset = off;
        s->size = w->sect[i].size;
        s->checksum = rc_xxh64(w->sect[i].data, w->sect[i].size, 0);
        off = align_up(off + s->size);
    }
    rc_blob_tensor *table = calloc(w->n_t ? w->n_t : 1, sizeof *table);
    if (!table) return rc_fail(err, RECALL_E_NOMEM, "out of memory");
    for (size_t i = 0; i < w->n_t; i++) {
        table[i] = w->t[i].meta;
        table[i].offset = off;
        off = align_up(off + table[i].nbytes);
    }
    uint64_t file_size = off;
    sect[1].kind = RC_SECT_TENSORS;
    sect[1].count = (uint32_t)w->n_t;
    sect[1].offset = table_off;
    sect[1].size = table_size;
    sect[1].checksum = rc_xxh64(table, table_size, 0);

    rc_blob_header hdr;
    memset(&hdr, 0, sizeof hdr);
    memcpy(hdr.magic, RECALL_BLOB_MAGIC, 8);
    hdr.version = 1;
    for (size_t i = 0; i < w->n_kv; i++) /* a RoPE profile must not be ignored by a v1 reader */
        if (!strncmp(w->kv[i].key, "qwen2.rope.", 11)) hdr.version = RECALL_BLOB_VERSION_ROPE;
    hdr.endian = RECALL_BLOB_ENDIAN;
    hdr.file_size = file_size;
    hdr.header_size = sizeof hdr;
    hdr.n_sections = (uint32_t)n_sect;
    hdr.sect_off = sizeof hdr;

    rc_afile af;
    recall_status st = rc_afile_open(&af, path, err);
    if (st) {
        free(table);
        return st;
    }
    wstream s;
    memset(&s, 0, sizeof s);
    s.f = af.f;
    s.ok = 1;
    setvbuf(s.f, NULL, _IOFBF, 1 << 22); /* large sequential writes */
    if (fwrite(&hdr, 1, sizeof hdr, s.f) != sizeof hdr) s.ok = 0;
    s.pos = sizeof hdr;
    rc_xxh64_init(&s.h, 0);
    ws_write(&s, sect, n_sect * sizeof(rc_blob_sect));
    ws_pad_to(&s, sect[0].offset);
    ws_write(&s, w->kv, (size_t)sect[0].size);
    ws_pad_to(&s, table_off);
    ws_write(&s, table, (size_t)table_size);
    for (size_t i = 0; i < w->n_sect; i++) {
        ws_pad_to(&s, sect[2 + i].offset);
        ws_write(&s, w->sect[i].data, w->sect[i].size);
    }
    for (size_t i = 0; i < w->n_t && s.ok; i++) {
        ws_pad_to(&s, table[i].offset);
        ws_write(&s, w->t[i].data, (size_t)table[i].nbytes);
        if (progress) progress(ctx, i, w->n_t, table[i].name);
    }
    ws_pad_to(&s, file_size);
    free(table);
    hdr.body_checksum = rc_xxh64_digest(&s.h);
    hdr.header_checksum = rc_xxh64(&hdr, offsetof(rc_blob_header, header_checksum), 0);
    if (s.ok && (fseek(s.f, 0, SEEK_SET) != 0 || fwrite(&hdr, 1, sizeof hdr, s.f) != sizeof hdr)) s.ok = 0;
    if (!s.ok) {
        st = rc_fail(err, RECALL_E_IO, "%s: write failed: %s", af.tmp, strerror(errno));
        rc_afile_abort(&af);
        return st;
    }
    return rc_afile_commit(&af, err);
}
