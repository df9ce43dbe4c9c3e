/* blob.h - the recall weight blob: single source of truth for its byte format.
 *
 * weights/FORMAT.md describes the same layout in prose; if the two ever disagree, this header
 * wins. All integers are little-endian; a big-endian host refuses the blob (endian word).
 *
 *   offset 0          rc_blob_header (128 bytes)
 *   header.sect_off   rc_blob_section[n_sections] (32 bytes each)
 *   section CONFIG    rc_blob_kv[n]       typed key/values: every hyper-parameter
 *   section TENSORS   rc_blob_tensor[n]   name, dtype, shape, offset, size, checksum
 *   section TOK_BPE / TOK_WORDPIECE       tokenizer bodies (see weights/FORMAT.md)
 *   tensor data       each tensor at a 64-byte aligned absolute offset
 *
 * Every section and every tensor starts on a RECALL_BLOB_ALIGN boundary; padding bytes are 0.
 * Checksums are XXH64 (seed 0): per section, per tensor, over the header's first 120 bytes, and
 * over the whole body [header_size, file_size).
 */
#ifndef RECALL_BLOB_H
#define RECALL_BLOB_H

#include "status.h"

#include <assert.h>

#define RECALL_BLOB_MAGIC "RECALLB\x1a" /* 8 bytes; \x1a stops `type`-style dumps */
/* Format versions. The writer stamps the LOWEST version whose readers interpret the blob
 * correctly: 1 = the base format; 2 = the blob carries a RoPE scaling profile (qwen2.rope.* keys),
 * which a version-1 reader would silently ignore (plain RoPE, wrong outputs past the original
 * window), so such readers must refuse it. A blob without a profile stays version 1, byte for
 * byte. This build reads versions 1 .. RECALL_BLOB_VERSION. */
#define RECALL_BLOB_VERSION 2u
#define RECALL_BLOB_VERSION_ROPE 2u /* the version a blob with qwen2.rope.* keys gets */
#define RECALL_BLOB_ENDIAN 0x01020304u  /* reads as 0x04030201 on a foreign-endian host */
#define RECALL_BLOB_ALIGN 64u
#define RECALL_NF4_BLOCK 64u            /* weights per NF4 absmax block */

enum rc_section_kind {
    RC_SECT_CONFIG = 1,
    RC_SECT_TENSORS = 2,
    RC_SECT_TOK_BPE = 3,       /* Qwen2 byte-level BPE, see weights/FORMAT.md */
    RC_SECT_TOK_WORDPIECE = 4, /* BERT WordPiece */
};

typedef enum {
    RC_DT_F32 = 1,
    RC_DT_BF16 = 2,
    RC_DT_F16 = 3,
    RC_DT_NF4 = 4,   /* packed codes then fp32 absmax, see below */
    RC_DT_I32 = 5,
    RC_DT_I64 = 6,
    RC_DT_U8 = 7,
    RC_DT_NF4_DQ = 8 /* reserved: NF4 with double-quantised absmax (not written yet) */
} rc_dtype;

enum rc_kv_type { RC_KV_I64 = 1, RC_KV_F64 = 2, RC_KV_STR = 3 };

typedef struct {
    char magic[8];           /* RECALL_BLOB_MAGIC */
    uint32_t version;        /* 1 .. RECALL_BLOB_VERSION (see above) */
    uint32_t endian;         /* RECALL_BLOB_ENDIAN */
    uint64_t file_size;      /* total bytes; a truncated file is detected before anything else */
    uint32_t header_size;    /* sizeof(rc_blob_header) */
    uint32_t n_sections;
    uint64_t sect_off;       /* offset of the section table */
    uint64_t body_checksum;  /* XXH64 of bytes [header_size, file_size) */
    uint8_t reserved[72];    /* zero */
    uint64_t header_checksum; /* XXH64 of bytes [0, 120) */
} rc_blob_header;
static_assert(sizeof(rc_blob_header) == 128, "rc_blob_header must be 128 bytes");

typedef struct {
    uint32_t kind;           /* rc_section_kind */
    uint32_t count;          /* entries (CONFIG, TENSORS) or 0 */
    uint64_t offset;         /* absolute, 64-byte aligned */
    uint64_t size;           /* bytes */
    uint64_t checksum;       /* XXH64 of the section bytes */
} rc_blob_sect;
static_assert(sizeof(rc_blob_sect) == 32, "rc_blob_sect must be 32 bytes");

#define RC_KV_KEY_LEN 48
#define RC_KV_MAX_VALUES 9
typedef struct {
    char key[RC_KV_KEY_LEN]; /* NUL-padded, e.g. "qwen2.rope_theta" */
    uint32_t type;           /* rc_kv_type */
    uint32_t count;          /* number of values (1..9); string length for RC_KV_STR */
    union {
        int64_t i[RC_KV_MAX_VALUES];
        double f[RC_KV_MAX_VALUES];
        char s[8 * RC_KV_MAX_VALUES]; /* NUL-padded */
    } v;
} rc_blob_kv;
static_assert(sizeof(rc_blob_kv) == 128, "rc_blob_kv must be 128 bytes");

#define RC_TENSOR_NAME_LEN 104
#define RC_MAX_DIMS 4
typedef struct {
    char name[RC_TENSOR_NAME_LEN]; /* NUL-padded, e.g. "qwen2.model.layers.0.self_attn.q_proj.weight" */
    uint32_t dtype;          /* rc_dtype */
    uint32_t ndim;           /* 0..4 (0 = scalar) */
    uint32_t block;          /* NF4: weights per absmax block (64); else 0 */
    uint32_t flags;          /* 0 */
    uint64_t shape[RC_MAX_DIMS]; /* unused dims are 0; row-major, last dim fastest */
    uint64_t offset;         /* absolute, 64-byte aligned */
    uint64_t nbytes;
    uint64_t checksum;       /* XXH64 of the nbytes data bytes */
    uint8_t reserved[16];
} rc_blob_tensor;
static_assert(sizeof(rc_blob_tensor) == 192, "rc_blob_tensor must be 192 bytes");

/* NF4 tensor data, numel = product(shape), numel % 64 == 0:
 *   bytes [0, numel/2)             codes, two per byte: element 2j in the HIGH nibble,
 *                                  element 2j+1 in the low nibble (bitsandbytes order)
 *   zero padding to the next 64-byte boundary
 *   float absmax[numel/64]         block j covers elements [64j, 64j+64) of the row-major
 *                                  flattening; value = RC_NF4_CODEBOOK[code] * absmax[j]
 */
static inline uint64_t rc_nf4_absmax_offset(uint64_t numel) {
    return (numel / 2 + RECALL_BLOB_ALIGN - 1) / RECALL_BLOB_ALIGN * RECALL_BLOB_ALIGN;
}
static inline uint64_t rc_nf4_nbytes(uint64_t numel) {
    return rc_nf4_absmax_offset(numel) + numel / RECALL_NF4_BLOCK * 4;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* A typed, zero-copy view of one tensor in an open blob. */
typedef struct {
    const char *name;
    rc_dtype dtype;
    int ndim;
    int64_t shape[RC_MAX_DIMS];
    int64_t numel;
    const void *data;        /* f32/bf16/f16/i32/i64/u8 elements; NF4: the codes */
    const float *absmax;     /* NF4 only */
    size_t nbytes;
    uint64_t checksum;
    uint64_t offset;
} rc_tensor;

typedef struct rc_blob rc_blob;

enum {
    RC_OPEN_VERIFY = 1u << 0, /* also check the body checksum and every tensor checksum */
    RC_OPEN_NO_MMAP = 1u << 1, /* read the file into memory instead of mapping it */
    /* read the file into anonymous memory advised for transparent huge pages: decode streams
     * ~1.2 GB of weights per token at real shape, and 2 MB pages save the TLB misses of 4 KB
     * file pages (costs the read at open and the blob's size in private memory) */
    RC_OPEN_HUGEPAGES = 1u << 2
};

recall_status rc_blob_open(const char *path, unsigned flags, rc_blob **out, recall_err *err);
/* Anonymous read-write memory of n bytes rounded up to 2 MiB (*len), advised for transparent huge
 * pages (one fault per 2 MiB instead of per 4 KiB where the kernel grants them). NULL when mmap
 * fails or with -DRECALL_NO_MMAP. rc_huge_unmap(p, len) releases it (NULL is fine). */
void *rc_huge_map(size_t n, size_t *len);
void rc_huge_unmap(void *p, size_t len);
/* Opens path for reading when it is a regular file (a directory or a device is refused with the
 * path in the message): *fd and its size. The readers that map or read whole files start here. */
recall_status rc_open_regular(const char *path, int *fd, size_t *size, recall_err *err);
/* Opens a blob already in memory; `buf` must outlive the blob (not copied). */
recall_status rc_blob_open_mem(const void *buf, size_t len, const char *what, unsigned flags,
                               rc_blob **out, recall_err *err);
void rc_blob_close(rc_blob *b);

/* Re-checks the header, every section, every tensor and the body checksum. */
recall_status rc_blob_verify(const rc_blob *b, recall_err *err);

const char *rc_blob_path(const rc_blob *b);
const rc_blob_header *rc_blob_hdr(const rc_blob *b);
size_t rc_blob_n_tensors(const rc_blob *b);
const rc_tensor *rc_blob_tensor_at(const rc_blob *b, size_t i);
const rc_tensor *rc_blob_find(const rc_blob *b, const char *name); /* NULL if absent */
size_t rc_blob_n_kv(const rc_blob *b);
const rc_blob_kv *rc_blob_kv_at(const rc_blob *b, size_t i);
/* A config key: a runtime entry set with rc_blob_overlay_kv if there is one, else the file's. */
const rc_blob_kv *rc_blob_kv_find(const rc_blob *b, const char *key);
/* The file's own entry only (NULL if absent). */
const rc_blob_kv *rc_blob_kv_find_file(const rc_blob *b, const char *key);
/* Runtime config entries (e.g. a --rope-scaling profile, rope.h): kv_find returns them in place
 * of the file's; the file, its checksums and rc_blob_kv_at are unchanged. Copied; an entry with
 * the same key is replaced; at most RC_BLOB_OVERLAY_MAX. */
#define RC_BLOB_OVERLAY_MAX 16
recall_status rc_blob_overlay_kv(rc_blob *b, const rc_blob_kv *kv, recall_err *err);
/* Section body, or NULL if the blob has none of that kind. */
const void *rc_blob_section(const rc_blob *b, uint32_t kind, size_t *size);

/* The storage of the decoder's (part "qwen2") or the BERT encoder's (part "bert") weight
 * matrices as the converter wrote them: the string key "<part>.weights" ("f32", "bf16", "nf4").
 * A blob without the key: "?" for the decoder, "f32" for the encoder (the converter writes
 * "bert.weights" only for bf16 and nf4, so an f32 encoder's blob keeps its earlier bytes). */
const char *rc_blob_weights(const rc_blob *b, const char *part);
/* Drops this process's pages of [p, p + n) (the whole pages inside it) when the blob is a mapping of
 * its file: they are clean, so a later read faults them in again from the file, and the results are
 * the same. Nothing happens for a blob held in memory (read, or copied for huge pages): its pages
 * are the only copy. For data a context has copied elsewhere (the q8 profile's packed decoder). */
void rc_blob_release(const rc_blob *b, const void *p, size_t n);
/* rc_blob_release of every tensor whose name starts with prefix ("qwen2.model.embed_tokens.",
 * "bert.", ...): the recall loop drops the pages a phase of it read once that phase is over. */
void rc_blob_release_prefix(const rc_blob *b, const char *prefix);
/* Rows read at random from a file-mapped table (token embeddings, the lm_head rows a screened pick
 * recomputes) are released every RC_BLOB_RELEASE_ROWS rows, not once per phase: a kernel that maps
 * whole page-cache folios (up to 2 MiB) around a touched page would otherwise keep about a folio
 * per row mapped until the phase ends (docs/MEMORY.md, "Folios"). */
#define RC_BLOB_RELEASE_ROWS 16
/* Bytes of the tensors whose names start with prefix (e.g. "bert."), and their count (may be NULL). */
size_t rc_blob_prefix_bytes(const rc_blob *b, const char *prefix, size_t *n_tensors);

/* Typed config getters: RECALL_E_MISSING / RECALL_E_FORMAT with the key named. */
recall_status rc_blob_get_i64(const rc_blob *b, const char *key, int64_t *out, recall_err *err);
recall_status rc_blob_get_f64(const rc_blob *b, const char *key, double *out, recall_err *err);
/* An integer key that must lie in [lo, hi] (RECALL_E_FORMAT naming the key and range if not). */
recall_status rc_blob_get_int(const rc_blob *b, const char *key, int lo, int hi, int *out, recall_err *err);
/* Tensor lookup with dtype-set and shape check (shape entries < 0 are wildcards).
 * dtype_mask: bit (1 << dtype) for each accepted dtype. */
recall_status rc_blob_expect(const rc_blob *b, const char *name, unsigned dtype_mask, int ndim,
                             const int64_t *shape, const rc_tensor **out, recall_err *err);

const char *rc_dtype_name(rc_dtype t);
/* Bytes per element for fixed-width dtypes; 0 for NF4. */
size_t rc_dtype_size(rc_dtype t);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct rc_blob_writer rc_blob_writer;

recall_status rc_writer_new(rc_blob_writer **out, recall_err *err);
void rc_writer_free(rc_blob_writer *w);
recall_status rc_writer_kv_i64(rc_blob_writer *w, const char *key, const int64_t *v, int n,
                               recall_err *err);
recall_status rc_writer_kv_f64(rc_blob_writer *w, const char *key, double v, recall_err *err);
recall_status rc_writer_kv_str(rc_blob_writer *w, const char *key, const char *s, recall_err *err);
/* Adds a tensor; takes ownership of `data` (malloc'd, freed by the writer). Tensors are written
 * in the order added. */
recall_status rc_writer_tensor(rc_blob_writer *w, const char *name, rc_dtype dtype, int ndim,
                               const int64_t *shape, void *data, size_t nbytes, recall_err *err);
/* Adds a section body (TOK_*); takes ownership of `data`. */
recall_status rc_writer_section(rc_blob_writer *w, uint32_t kind, void *data, size_t size,
                                recall_err *err);
/* Writes PATH.tmp.PID, fsyncs, renames to PATH (atomic_file.h). On failure no file is left at PATH
 * or PATH.tmp.PID.
 * progress (may be NULL) is called once per tensor written. */
recall_status rc_writer_write(rc_blob_writer *w, const char *path,
                              void (*progress)(void *ctx, size_t i, size_t n, const char *name),
                              void *ctx, recall_err *err);

#endif
