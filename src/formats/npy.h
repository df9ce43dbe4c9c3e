/* npy.h - NumPy .npy arrays and .npz archives: parse, convert, write.
 *
 * .npy layout (numpy.lib.format):
 *   "\x93NUMPY" major minor | header_len (u16 LE for v1.0, u32 LE for v2.0/v3.0)
 *   | header: Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 *     padded with spaces, ending in '\n' | data: prod(shape) * itemsize bytes, C order
 * Only little-endian ('<') or byte-order-free ('|') numeric descrs are accepted; anything else
 * (big-endian, complex, strings, objects, structured) is RECALL_E_UNSUPPORTED naming the dtype.
 * fortran_order=True is refused. The data size must match the shape exactly.
 *
 * .npz = zip (stored or deflate) of "<key>.npy" members, read through src/formats/zip.h.
 * The writer produces stored members with numpy's own v1.0 headers (data 64-byte aligned
 * within the member), readable by numpy.load.
 */
#ifndef RECALL_NPY_H
#define RECALL_NPY_H

#include "blob.h"
#include "status.h"
#include "zip.h"

typedef enum {
    RC_NPY_BOOL = 1, /* '|b1' */
    RC_NPY_I8,       /* '|i1' */
    RC_NPY_U8,       /* '|u1' */
    RC_NPY_I16,      /* '<i2' */
    RC_NPY_U16,      /* '<u2' */
    RC_NPY_I32,      /* '<i4' */
    RC_NPY_U32,      /* '<u4' */
    RC_NPY_I64,      /* '<i8' */
    RC_NPY_U64,      /* '<u8' */
    RC_NPY_F16,      /* '<f2' */
    RC_NPY_F32,      /* '<f4' */
    RC_NPY_F64       /* '<f8' */
} rc_npy_dtype;

#define RC_NPY_MAX_DIMS 8

/* One parsed array. `data` points into the buffer given to rc_npy_parse (zero-copy) or into
 * `owned` (rc_npz_get); elements are little-endian and may be unaligned. */
typedef struct {
    rc_npy_dtype dtype;
    char descr[8];            /* as written in the header, e.g. "<f4" */
    size_t itemsize;
    int ndim;                 /* 0 = scalar */
    int64_t shape[RC_NPY_MAX_DIMS];
    uint64_t numel;           /* product of shape (1 for a scalar) */
    const void *data;
    size_t nbytes;            /* numel * itemsize */
    size_t data_offset;       /* where the data starts in the .npy bytes */
    int major, minor;         /* format version */
    void *owned;              /* freed by rc_npy_free; NULL for zero-copy views */
} rc_npy;

/* Parses a whole .npy file held in memory. `what` names it in messages. */
recall_status rc_npy_parse(const void *buf, size_t len, const char *what, rc_npy *out, recall_err *err);
void rc_npy_free(rc_npy *a);

const char *rc_npy_dtype_name(rc_npy_dtype t); /* "float32", ... */
size_t rc_npy_dtype_size(rc_npy_dtype t);      /* 0 for an invalid value */
/* The blob dtype with the same element encoding, or 0 (e.g. float64 has none). */
rc_dtype rc_npy_to_rc_dtype(rc_npy_dtype t);

/* Converts any numeric array to a malloc'd float32 array of numel elements (at least one
 * element is allocated). float64/int64 values round to nearest, as numpy's astype does. */
recall_status rc_npy_to_f32(const rc_npy *a, const char *what, float **out, recall_err *err);
/* Value of a single-element integer (or bool) array, e.g. a 0-d int64. */
recall_status rc_npy_scalar_i64(const rc_npy *a, const char *what, int64_t *out, recall_err *err);

/* Encodes one .npy (v1.0 header exactly as numpy 1.24 writes it) into a malloc'd buffer.
 * `data` holds prod(shape) host-order elements. */
recall_status rc_npy_encode(rc_npy_dtype dtype, int ndim, const int64_t *shape, const void *data,
                            uint8_t **out, size_t *out_len, recall_err *err);

/* ---- npz reading ------------------------------------------------------------------------ */

typedef struct rc_npz rc_npz;

/* Reads the whole file into memory. */
recall_status rc_npz_open(const char *path, rc_npz **out, recall_err *err);
/* `buf` must outlive the npz (not copied). */
recall_status rc_npz_open_mem(const void *buf, size_t len, const char *what, rc_npz **out, recall_err *err);
void rc_npz_close(rc_npz *npz);
const rc_zip *rc_npz_zip(const rc_npz *npz);
size_t rc_npz_count(const rc_npz *npz);
/* Key of member i: its name without the ".npy" suffix, written into key[cap]; NULL if i is out
 * of range or the name does not fit. */
const char *rc_npz_key(const rc_npz *npz, size_t i, char *key, size_t cap);
int rc_npz_has(const rc_npz *npz, const char *key);

/* Extracts "<key>.npy" (or a member named exactly `key`), checking its CRC, and parses it.
 * Stored members are viewed in place (valid until rc_npz_close), deflated ones are inflated
 * into out->owned. Absent key: RECALL_E_MISSING. Always release with rc_npy_free. */
recall_status rc_npz_get(const rc_npz *npz, const char *key, rc_npy *out, recall_err *err);
/* rc_npz_get + rc_npy_to_f32. ndim/shape (RC_NPY_MAX_DIMS entries) may be NULL. */
recall_status rc_npz_get_f32(const rc_npz *npz, const char *key, float **out, int *ndim, int64_t *shape,
                             recall_err *err);
/* rc_npz_get + rc_npy_scalar_i64. */
recall_status rc_npz_get_i64(const rc_npz *npz, const char *key, int64_t *out, recall_err *err);

/* ---- npz writing ------------------------------------------------------------------------ */

typedef struct rc_npz_writer rc_npz_writer;

recall_status rc_npz_writer_new(rc_npz_writer **out, recall_err *err);
void rc_npz_writer_free(rc_npz_writer *w);
/* Adds member "<key>.npy"; `data` (prod(shape) host-order elements) is copied. Members are
 * written in the order added; a repeated key is RECALL_E_ARG. */
recall_status rc_npz_writer_add(rc_npz_writer *w, const char *key, rc_npy_dtype dtype, int ndim,
                                const int64_t *shape, const void *data, recall_err *err);
/* The complete archive as a malloc'd buffer. */
recall_status rc_npz_writer_bytes(const rc_npz_writer *w, uint8_t **out, size_t *out_len, recall_err *err);
/* Writes PATH.tmp.PID, fsyncs, renames it to PATH (atomic_file.h); on failure neither file is left
 * behind. */
recall_status rc_npz_writer_write(const rc_npz_writer *w, const char *path, recall_err *err);

#endif
