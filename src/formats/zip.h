/* zip.h - read-only zip archives held in memory (npz files, torch .pt checkpoints).
 *
 * Supports stored (method 0) and deflate (method 8) members, zip64 sizes/offsets, and checks
 * every member's CRC-32 on extraction. Every offset and size is bounds-checked against the
 * buffer; errors name the archive (`what`), the member and the byte offset.
 */
#ifndef RECALL_ZIP_H
#define RECALL_ZIP_H

#include "status.h"

typedef struct {
    char *name;          /* member name, NUL-terminated (malloc'd) */
    uint64_t data_offset; /* offset of the member's (compressed) data in the archive */
    uint64_t comp_size;
    uint64_t size;        /* uncompressed size */
    uint32_t crc32;
    uint16_t method;      /* 0 stored, 8 deflate */
} rc_zip_entry;

typedef struct {
    const uint8_t *buf;
    size_t len;
    rc_zip_entry *entries;
    size_t n;
    char what[256];       /* archive name for messages */
} rc_zip;

/* Parses the central directory. `buf` must outlive the rc_zip. */
recall_status rc_zip_open(rc_zip *z, const void *buf, size_t len, const char *what, recall_err *err);
void rc_zip_close(rc_zip *z);
const rc_zip_entry *rc_zip_find(const rc_zip *z, const char *name);
/* Extracts (inflating if needed) into a malloc'd buffer and checks the CRC-32. */
recall_status rc_zip_read(const rc_zip *z, const rc_zip_entry *e, uint8_t **out, size_t *out_len,
                          recall_err *err);

#endif
