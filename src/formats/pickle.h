/* pickle.h - a restricted unpickler for torch.save checkpoints (.pt, zip format, torch >= 1.6).
 *
 * A .pt file is a zip of stored members under one prefix directory:
 *   <prefix>/data.pkl     the object tree, pickled (torch.save writes protocol 2)
 *   <prefix>/data/<key>   raw little-endian bytes of each storage, referenced from data.pkl by
 *                         BINPERSID ('storage', torch.FloatStorage, '<key>', 'cpu', numel)
 *   <prefix>/byteorder    "little" (absent in old files, which are little-endian)
 *   <prefix>/version, .format_version, .storage_alignment, .data/serialization_id  (ignored)
 *
 * data.pkl is run on a small pickle VM that never executes anything: values are native C
 * (none, bool, int, float, str, bytes, tuple, list, dict, tensor, storage, and numpy dtypes,
 * arrays and scalars as raw data), and GLOBAL /
 * STACK_GLOBAL may only name an allowlist of torch/collections callables that the VM
 * interprets itself:
 *   collections.OrderedDict            -> dict (insertion order kept)
 *   torch._utils._rebuild_tensor_v2    -> tensor view of a storage (contiguous row-major only)
 *   torch._utils._rebuild_tensor       -> same, v1 argument list
 *   torch._utils._rebuild_parameter(_with_state) -> the tensor itself (nn.Parameter unwrapped)
 *   torch.{Float,Half,BFloat16,Double,Long,Int,Byte}Storage  (storage types of persistent ids)
 *   torch.strided, torch.serialization._get_layout            (opaque layout markers)
 *   argparse.Namespace via NEWOBJ + BUILD -> dict (a pickled `args` namespace is plain data)
 *   _codecs.encode(str, 'latin1')      -> bytes (protocol 2's spelling of a bytes object)
 *   numpy.dtype(typestr, align, copy) + BUILD state -> an inert dtype value (kind, size, order)
 *   numpy.core.multiarray.scalar(dtype, bytes) -> bool / int / float for b1, i1..i8, u1..u8 (<= 2^63-1),
 *                                        f2, f4, f8 (exact; np.int64(4) reads as the int 4); any
 *                                        other dtype -> RC_PV_NP_SCALAR (raw bytes, opaque)
 *   numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') + BUILD (1, shape, dtype,
 *                                        is_fortran, raw bytes | object list) -> RC_PV_NDARRAY
 *   (the same two under numpy 2's numpy._core.multiarray; numpy.ndarray only as _reconstruct's class)
 *   __builtin__.bytes() / builtins.bytes() with no argument -> b'' (protocol 2's empty bytes)
 * Anything else (os.system, builtins.eval, ...) is refused with RECALL_E_SECURITY, naming the
 * global and its byte offset in data.pkl; so is _reconstruct of any class but numpy.ndarray, and
 * structured (record) dtypes are refused as unsupported. INST/OBJ/EXT*, out-of-band buffers and protocol-0
 * quoted strings are refused as well. Stack, memo, mark nesting, value count and container
 * sizes are bounded (hostile input).
 *
 * Lifetimes: every value belongs to its rc_pickle / rc_torch_file and dies with it. Tensors of
 * an rc_torch_file point into storages extracted by the loader (the input buffer may be freed
 * after rc_torch_load returns).
 */
#ifndef RECALL_PICKLE_H
#define RECALL_PICKLE_H

#include "blob.h"
#include "status.h"

#include <stdbool.h>

#define RC_PT_MAX_DIMS 8

/* Element types of torch storages. F64/I32/U8 have no fp use here but are loaded as data. */
typedef enum {
    RC_PT_F32 = 1,
    RC_PT_F16 = 2,
    RC_PT_BF16 = 3,
    RC_PT_F64 = 4,
    RC_PT_I64 = 5,
    RC_PT_I32 = 6,
    RC_PT_U8 = 7
} rc_pt_dtype;

const char *rc_pt_dtype_name(rc_pt_dtype dt); /* "float32", ... */
size_t rc_pt_dtype_size(rc_pt_dtype dt);      /* bytes per element, 0 if unknown */

typedef enum {
    RC_PV_NONE = 1,
    RC_PV_BOOL,
    RC_PV_INT,
    RC_PV_FLOAT,
    RC_PV_STR,     /* unicode (BINUNICODE ...) or py2 str (BINSTRING) */
    RC_PV_BYTES,
    RC_PV_TUPLE,
    RC_PV_LIST,    /* also sets / frozensets (order of insertion) */
    RC_PV_DICT,    /* dict, OrderedDict, argparse.Namespace; keys str/int/bool/None */
    RC_PV_TENSOR,
    RC_PV_STORAGE,
    RC_PV_GLOBAL,  /* an allowlisted callable / marker (only left in a tree if unused) */
    RC_PV_NP_DTYPE,  /* numpy.dtype */
    RC_PV_NDARRAY,   /* numpy.ndarray: read it with rc_pv_as_ndarray */
    RC_PV_NP_SCALAR  /* numpy scalar with no native equivalent (complex, str_, datetime64, ...) */
} rc_pv_kind;

typedef struct rc_pv rc_pv; /* one pickled value (opaque) */

/* A tensor as seen by callers: a contiguous row-major view into an extracted storage. */
typedef struct {
    const char *name;      /* dict key it was found under (NUL-terminated), or "" */
    rc_pt_dtype dtype;
    rc_dtype blob_dtype;   /* same type in blob terms; 0 for F64 (no blob equivalent) */
    int ndim;              /* 0 for a scalar */
    int64_t shape[RC_PT_MAX_DIMS];
    uint64_t numel;        /* product of shape (1 for a scalar) */
    size_t nbytes;         /* numel * element size */
    const void *data;      /* little-endian elements; may be unaligned: memcpy, don't cast */
} rc_torch_tensor;

/* ---- raw pickle VM (data.pkl without the zip; also the fuzzing entry point) ---------------- */

/* Resolves BINPERSID ('storage', type, key, location, numel): return the storage's bytes in
 * *data and *len (they must outlive the rc_pickle). The VM checks numel * elsize <= len. */
typedef recall_status (*rc_pickle_storage_fn)(void *ctx, const char *key, rc_pt_dtype dtype,
                                              uint64_t numel, const uint8_t **data, size_t *len,
                                              recall_err *err);

typedef struct rc_pickle rc_pickle;

/* Runs the VM over `pkl`. `what` names it in messages ("pooler.pt:pooler/data.pkl"). A NULL
 * `storage_fn` refuses every persistent id (RECALL_E_UNSUPPORTED). */
recall_status rc_pickle_load(const uint8_t *pkl, size_t len, const char *what,
                             rc_pickle_storage_fn storage_fn, void *ctx, rc_pickle **out,
                             recall_err *err);
const rc_pv *rc_pickle_root(const rc_pickle *p);
void rc_pickle_free(rc_pickle *p);

/* ---- torch .pt files ------------------------------------------------------------------------- */

typedef struct rc_torch_file rc_torch_file;

/* Opens the zip, checks byteorder, runs data.pkl, extracts (and CRC-checks) every storage a
 * tensor refers to. Errors name `what` and the member / data.pkl byte offset. */
recall_status rc_torch_load(const void *buf, size_t len, const char *what, rc_torch_file **out,
                            recall_err *err);
void rc_torch_free(rc_torch_file *f);
const rc_pv *rc_torch_root(const rc_torch_file *f); /* what torch.load would return */

/* ---- navigating values ----------------------------------------------------------------------- */

rc_pv_kind rc_pv_kind_of(const rc_pv *v);
const char *rc_pv_kind_name(rc_pv_kind k);
/* dict[key] for a str key; NULL if `dict` is not a dict or the key is absent. */
const rc_pv *rc_pv_dict_get(const rc_pv *dict, const char *key);
size_t rc_pv_len(const rc_pv *v); /* entries of a dict / items of a tuple or list, else 0 */
/* i-th entry of a dict in insertion order (NULL if out of range / not a dict). */
const rc_pv *rc_pv_dict_key_at(const rc_pv *dict, size_t i);
const rc_pv *rc_pv_dict_value_at(const rc_pv *dict, size_t i);
const rc_pv *rc_pv_item_at(const rc_pv *seq, size_t i); /* tuple / list item */
bool rc_pv_as_int(const rc_pv *v, int64_t *out);       /* int or bool */
bool rc_pv_as_float(const rc_pv *v, double *out);      /* float or int */
const char *rc_pv_as_str(const rc_pv *v, size_t *len); /* str or bytes; NUL-terminated */

/* A numpy array (or an opaque numpy scalar, as a 0-d array) as data. */
typedef struct {
    char kind;             /* numpy dtype kind: 'b' bool, 'i', 'u', 'f', 'c', 'U', 'S', 'V', 'O', 'M', 'm' */
    char byteorder;        /* '<', '>' or '|' (not applicable) */
    size_t itemsize;       /* bytes per element (0 for 'O') */
    int ndim;
    int64_t shape[RC_PT_MAX_DIMS];
    uint64_t numel;
    bool fortran;          /* data is column-major */
    const void *data;      /* numel * itemsize raw bytes in `byteorder`; NULL for object arrays */
    size_t nbytes;
    const rc_pv *items;    /* object arrays ('O'): a list of numel values, else NULL */
} rc_np_array;
/* false unless v is an RC_PV_NDARRAY or RC_PV_NP_SCALAR. */
bool rc_pv_as_ndarray(const rc_pv *v, rc_np_array *out);

/* Follows a NULL-terminated key path of nested dicts, e.g. {"args", "heads", NULL}, and reads
 * an int there. RECALL_E_MISSING if a key is absent (check err->code to tell absent from
 * malformed); RECALL_E_FORMAT if something on the way is not a dict or the value not an int. */
recall_status rc_pv_path_int(const rc_pv *root, const char *const *path, int64_t *out,
                             recall_err *err);

/* The i-th entry of a state dict as a tensor: RECALL_E_FORMAT if the key is not a str or the
 * value not a tensor (the message names the key). */
recall_status rc_torch_dict_tensor(const rc_pv *dict, size_t i, rc_torch_tensor *t,
                                   recall_err *err);
/* dict[name] as a tensor; RECALL_E_MISSING if absent. */
recall_status rc_torch_find_tensor(const rc_pv *dict, const char *name, rc_torch_tensor *t,
                                   recall_err *err);
/* A tensor value (not found via a dict) as an rc_torch_tensor with name "". */
recall_status rc_torch_tensor_of(const rc_pv *v, rc_torch_tensor *t, recall_err *err);

/* malloc'd float32 copy of a F32 / F16 / BF16 tensor (exact) or F64 (rounded to nearest);
 * other dtypes RECALL_E_UNSUPPORTED. numel 0 returns a valid 1-float allocation. */
recall_status rc_torch_tensor_f32(const rc_torch_tensor *t, float **out, recall_err *err);

#endif
