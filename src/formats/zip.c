/* zip.c - read-only zip archives in memory (npz files, torch .pt checkpoints).
 *
 * Layout read (APPNOTE.TXT):
 *   [local header 30 B + name + extra][member data] ...      one per member
 *   central directory: 46 B + name + extra + comment           one per member
 *   [zip64 end record 56 B][zip64 locator 20 B]                only when present
 *   end of central directory (EOCD) 22 B + comment (<= 65535 B)
 * Sizes and offsets come from the central directory (so the data-descriptor flag, bit 3, needs
 * nothing special: the local header's sizes are ignored); 0xFFFFFFFF values are replaced from
 * the zip64 extra field (id 0x0001). Each member's local header is checked (signature, same
 * name) and its data range must lie inside the buffer; a claimed uncompressed size that no
 * deflate stream could reach from its compressed size is refused before anything is allocated.
 */
#include "zip.h"

#include "checksum.h"
#include "inflate.h"
#include "names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u
#define EOCD_LEN 22u
#define CENTRAL_LEN 46u
#define LOCAL_LEN 30u
#define LOCATOR64_LEN 20u
#define EOCD64_LEN 56u
/* Deflate cannot expand a bit to more than ~1032 output bytes (258-byte match with a 1-bit
 * length code and a 1-bit distance code), so larger claims are malformed. */
#define DEFLATE_MAX_RATIO 1032u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* True when [off, off+n) lies inside [0, len). */
static int in_range(uint64_t off, uint64_t n, uint64_t len) { return off <= len && n <= len - off; }

/* Finds the EOCD: the last signature in the trailing 64 KiB whose comment fits the buffer. */
static recall_status find_eocd(const rc_zip *z, size_t *eocd, recall_err *err) {
    if (z->len < EOCD_LEN)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %zu bytes is too small for a zip archive", z->what, z->len);
    size_t lo = z->len - EOCD_LEN > 65535u ? z->len - EOCD_LEN - 65535u : 0;
    for (size_t i = z->len - EOCD_LEN + 1; i-- > lo;) {
        const uint8_t *p = z->buf + i;
        if (rd32(p) == SIG_EOCD && rd16(p + 20) <= z->len - i - EOCD_LEN) {
            *eocd = i;
            return RECALL_OK;
        }
    }
    return rc_fail(err, RECALL_E_FORMAT,
                   "%s: no end-of-central-directory record (not a zip archive, or truncated)", z->what);
}

typedef struct {
    uint64_t n_entries, cd_size, cd_offset;
} cd_info;

static recall_status read_eocd(const rc_zip *z, size_t eocd, cd_info *cd, recall_err *err) {
    const uint8_t *p = z->buf + eocd;
    if (rd16(p + 4) != 0 || rd16(p + 6) != 0 || rd16(p + 8) != rd16(p + 10))
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: multi-disk zip archives are not supported", z->what);
    cd->n_entries = rd16(p + 10);
    cd->cd_size = rd32(p + 12);
    cd->cd_offset = rd32(p + 16);
    size_t end_of_cd = eocd;

    /* A zip64 locator just before the EOCD points at the zip64 end record, whose values win
     * (torch writes one even for small archives). */
    if (eocd >= LOCATOR64_LEN && rd32(z->buf + eocd - LOCATOR64_LEN) == SIG_LOCATOR64) {
        const uint8_t *loc = z->buf + eocd - LOCATOR64_LEN;
        uint64_t rec = rd64(loc + 8);
        if (rd32(loc + 4) != 0 || rd32(loc + 16) > 1)
            return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: multi-disk zip64 archives are not supported",
                           z->what);
        if (!in_range(rec, EOCD64_LEN, eocd - LOCATOR64_LEN) || rd32(z->buf + rec) != SIG_EOCD64)
            return rc_fail(err, RECALL_E_FORMAT, "%s: zip64 end record missing at byte %llu", z->what,
                           (unsigned long long)rec);
        const uint8_t *r = z->buf + rec;
        if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
            return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: multi-disk zip64 archives are not supported",
                           z->what);
        cd->n_entries = rd64(r + 32);
        cd->cd_size = rd64(r + 40);
        cd->cd_offset = rd64(r + 48);
        end_of_cd = (size_t)rec;
    }
    if (!in_range(cd->cd_offset, cd->cd_size, end_of_cd))
        return rc_fail(err, RECALL_E_FORMAT,
                       "%s: central directory [%llu, +%llu) runs past byte %zu (truncated archive?)", z->what,
                       (unsigned long long)cd->cd_offset, (unsigned long long)cd->cd_size, end_of_cd);
    if (cd->n_entries > cd->cd_size / CENTRAL_LEN)
        return rc_fail(err, RECALL_E_FORMAT, "%s: %llu entries cannot fit in a %llu-byte central directory",
                       z->what, (unsigned long long)cd->n_entries, (unsigned long long)cd->cd_size);
    return RECALL_OK;
}

/* Replaces saturated 32-bit fields from the zip64 extra field, in the order APPNOTE fixes. */
static recall_status apply_zip64(const rc_zip *z, const uint8_t *extra, size_t extra_len, const char *name,
                                 uint64_t *usize, uint64_t *csize, uint64_t *offset, recall_err *err) {
    int need_u = *usize == 0xFFFFFFFFu, need_c = *csize == 0xFFFFFFFFu, need_o = *offset == 0xFFFFFFFFu;
    if (!need_u && !need_c && !need_o) return RECALL_OK;
    size_t i = 0;
    while (extra_len - i >= 4) {
        unsigned id = rd16(extra + i), n = rd16(extra + i + 2);
        if (n > extra_len - i - 4) break;
        if (id == 0x0001) {
            const uint8_t *f = extra + i + 4;
            size_t want = 8u * (size_t)(need_u + need_c + need_o);
            if (n < want)
                return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': zip64 extra field too short (%u < %zu)",
                               z->what, name, n, want);
            if (need_u) *usize = rd64(f), f += 8;
            if (need_c) *csize = rd64(f), f += 8;
            if (need_o) *offset = rd64(f);
            return RECALL_OK;
        }
        i += 4u + n;
    }
    return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': sizes are 0xFFFFFFFF but there is no zip64 extra field",
                   z->what, name);
}

static recall_status read_entry(rc_zip *z, size_t *pos, size_t cd_end, rc_zip_entry *e, recall_err *err) {
    size_t p0 = *pos;
    if (cd_end - p0 < CENTRAL_LEN || rd32(z->buf + p0) != SIG_CENTRAL)
        return rc_fail(err, RECALL_E_FORMAT, "%s: bad central directory entry at byte %zu", z->what, p0);
    const uint8_t *c = z->buf + p0;
    uint16_t flags = rd16(c + 8), method = rd16(c + 10);
    uint32_t crc = rd32(c + 16);
    uint64_t csize = rd32(c + 20), usize = rd32(c + 24), local = rd32(c + 42);
    size_t name_len = rd16(c + 28), extra_len = rd16(c + 30), comment_len = rd16(c + 32);
    if (cd_end - p0 - CENTRAL_LEN < name_len + extra_len + comment_len)
        return rc_fail(err, RECALL_E_FORMAT, "%s: central directory entry at byte %zu runs past its end",
                       z->what, p0);
    const uint8_t *name_bytes = c + CENTRAL_LEN;
    if (memchr(name_bytes, 0, name_len))
        return rc_fail(err, RECALL_E_FORMAT, "%s: member name at byte %zu contains a NUL byte", z->what,
                       p0 + CENTRAL_LEN);
    e->name = malloc(name_len + 1);
    if (!e->name) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for a member name", z->what);
    memcpy(e->name, name_bytes, name_len);
    e->name[name_len] = 0;
    *pos = p0 + CENTRAL_LEN + name_len + extra_len + comment_len;

    RC_TRY(apply_zip64(z, name_bytes + name_len, extra_len, e->name, &usize, &csize, &local, err));
    if (flags & 1u)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: member '%s' is encrypted", z->what, e->name);
    if (method != 0 && method != 8)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: member '%s': compression method %u is not supported",
                       z->what, e->name, method);

    if (!in_range(local, LOCAL_LEN, z->len) || rd32(z->buf + local) != SIG_LOCAL)
        return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': no local header at byte %llu", z->what, e->name,
                       (unsigned long long)local);
    const uint8_t *l = z->buf + local;
    uint64_t data = local + LOCAL_LEN + rd16(l + 26) + (uint64_t)rd16(l + 28);
    if (rd16(l + 26) != name_len || !in_range(local + LOCAL_LEN, name_len, z->len) ||
        memcmp(l + LOCAL_LEN, name_bytes, name_len) != 0)
        return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': local header at byte %llu names another member",
                       z->what, e->name, (unsigned long long)local);
    if (!in_range(data, csize, z->len))
        return rc_fail(err, RECALL_E_FORMAT,
                       "%s: member '%s': data [%llu, +%llu) runs past the end of the archive (%zu bytes)",
                       z->what, e->name, (unsigned long long)data, (unsigned long long)csize, z->len);
    if (method == 0 && usize != csize)
        return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': stored member with size %llu != compressed %llu",
                       z->what, e->name, (unsigned long long)usize, (unsigned long long)csize);
    if (method == 8 && usize / DEFLATE_MAX_RATIO > csize)
        return rc_fail(err, RECALL_E_FORMAT,
                       "%s: member '%s': %llu bytes cannot inflate from %llu compressed bytes", z->what, e->name,
                       (unsigned long long)usize, (unsigned long long)csize);
    if (usize > SIZE_MAX - 1)
        return rc_fail(err, RECALL_E_LIMIT, "%s: member '%s' is too large for this host", z->what, e->name);
    e->data_offset = data;
    e->comp_size = csize;
    e->size = usize;
    e->crc32 = crc;
    e->method = method;
    return RECALL_OK;
}

recall_status rc_zip_open(rc_zip *z, const void *buf, size_t len, const char *what, recall_err *err) {
    if (!z) return rc_fail(err, RECALL_E_ARG, "rc_zip_open: NULL archive");
    memset(z, 0, sizeof *z);
    snprintf(z->what, sizeof z->what, "%s", what ? what : "zip");
    if (!buf && len) return rc_fail(err, RECALL_E_ARG, "%s: NULL buffer", z->what);
    z->buf = buf;
    z->len = len;

    size_t eocd = 0;
    cd_info cd = {0, 0, 0};
    RC_TRY(find_eocd(z, &eocd, err));
    RC_TRY(read_eocd(z, eocd, &cd, err));
    if (cd.n_entries) {
        z->entries = calloc((size_t)cd.n_entries, sizeof *z->entries);
        if (!z->entries) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory for %llu entries", z->what,
                                        (unsigned long long)cd.n_entries);
    }
    size_t pos = (size_t)cd.cd_offset, cd_end = (size_t)(cd.cd_offset + cd.cd_size);
    for (uint64_t i = 0; i < cd.n_entries; i++) {
        recall_status st = read_entry(z, &pos, cd_end, &z->entries[i], err);
        z->n = (size_t)i + 1; /* so that close frees the name read so far */
        if (st != RECALL_OK) {
            rc_zip_close(z);
            return st;
        }
    }
    return RECALL_OK;
}

void rc_zip_close(rc_zip *z) {
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) free(z->entries[i].name);
    free(z->entries);
    z->entries = NULL;
    z->n = 0;
}

const rc_zip_entry *rc_zip_find(const rc_zip *z, const char *name) {
    if (!z || !name) return NULL;
    size_t i = RC_NAME_INDEX(z->entries, z->n, rc_zip_entry, name, name);
    return i < z->n ? &z->entries[i] : NULL;
}

recall_status rc_zip_read(const rc_zip *z, const rc_zip_entry *e, uint8_t **out, size_t *out_len,
                          recall_err *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!z || !e || !out || !out_len) return rc_fail(err, RECALL_E_ARG, "rc_zip_read: NULL argument");
    if (!in_range(e->data_offset, e->comp_size, z->len) || e->size > SIZE_MAX - 1)
        return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': data outside the archive", z->what, e->name);
    size_t size = (size_t)e->size;
    const uint8_t *src = z->buf + e->data_offset;
    uint8_t *dst = malloc(size ? size : 1);
    if (!dst)
        return rc_fail(err, RECALL_E_NOMEM, "%s: member '%s': out of memory for %zu bytes", z->what, e->name, size);
    if (e->method == 0) {
        if (e->comp_size != e->size) {
            free(dst);
            return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': stored sizes differ", z->what, e->name);
        }
        if (size) memcpy(dst, src, size);
    } else if (e->method == 8) {
        size_t got = 0;
        recall_status st = rc_inflate(src, (size_t)e->comp_size, dst, size, &got, NULL, err);
        if (st != RECALL_OK) {
            free(dst);
            if (err) rc_wrap(err, "%s: member '%s' (data at byte %llu): ", z->what, e->name,
                             (unsigned long long)e->data_offset);
            return st;
        }
        if (got != size) {
            free(dst);
            return rc_fail(err, RECALL_E_FORMAT, "%s: member '%s': inflated to %zu bytes, expected %zu", z->what,
                           e->name, got, size);
        }
    } else {
        free(dst);
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: member '%s': compression method %u is not supported",
                       z->what, e->name, e->method);
    }
    uint32_t crc = rc_crc32(0, dst, size);
    if (crc != e->crc32) {
        free(dst);
        return rc_fail(err, RECALL_E_CHECKSUM, "%s: member '%s': CRC-32 mismatch (stored %08x, computed %08x)",
                       z->what, e->name, (unsigned)e->crc32, (unsigned)crc);
    }
    *out = dst;
    *out_len = size;
    return RECALL_OK;
}
