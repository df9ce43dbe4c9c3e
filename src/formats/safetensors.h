/* safetensors.h - read Hugging Face .safetensors files (and sharded model.safetensors.index.json).
 *
 * File = u64 little-endian header length N | N bytes of JSON header | data. The header maps
 * tensor names to {dtype, shape, data_offsets:[begin,end]} (offsets relative to the data start);
 * "__metadata__" is skipped. Every range is checked: inside the file, matching dtype*shape,
 * and not overlapping another tensor. Errors name the file, the tensor and the byte offset.
 */
#ifndef RECALL_SAFETENSORS_H
#define RECALL_SAFETENSORS_H

#include "blob.h"

typedef struct {
    char *name;
    rc_dtype dtype;          /* F32, BF16, F16, I32, I64, U8 (others are refused) */
    int ndim;
    int64_t shape[RC_MAX_DIMS];
    int64_t numel;
    const uint8_t *data;     /* points into the mapped file */
    size_t nbytes;
    const char *file;        /* path of the shard holding it */
} rc_st_tensor;

typedef struct rc_st rc_st;

/* Opens one .safetensors file, or a directory holding model.safetensors or
 * model.safetensors.index.json (all shards). */
recall_status rc_st_open(const char *path, rc_st **out, recall_err *err);
/* Parses a safetensors image already in memory (used by the fuzzer); buf must outlive it. */
recall_status rc_st_open_mem(const uint8_t *buf, size_t len, const char *what, rc_st **out, recall_err *err);
void rc_st_close(rc_st *st);
size_t rc_st_count(const rc_st *st);
const rc_st_tensor *rc_st_at(const rc_st *st, size_t i);
const rc_st_tensor *rc_st_find(const rc_st *st, const char *name);
/* malloc'd fp32 copy of an F32/BF16/F16 tensor (exact upcast). */
recall_status rc_st_to_f32(const rc_st_tensor *t, float **out, recall_err *err);

#endif
