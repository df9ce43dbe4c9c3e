/* pickle.c - restricted pickle VM and torch .pt (zip) loader; see pickle.h.
 *
 * The VM mirrors CPython's _Unpickler over a byte buffer: a value stack split by marks (every
 * pop is checked against the innermost mark, as CPython's fresh per-mark stack would be), a
 * memo indexed by BINPUT/MEMOIZE numbers, and one opcode at a time with every length read
 * checked against the remaining input. Nothing is ever called: the few allowlisted globals are
 * interpreted natively by reduce_call(). All values live in one arena (a linked list of nodes)
 * owned by the rc_pickle, so shared and even cyclic references (memo gets) need no refcounts.
 */
#include "pickle.h"

#include "mem.h"
#include "zip.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Hostile-input bounds. Real checkpoints are far below them (pooler.pt: stack < 30, memo 611). */
#define MAX_STACK (1u << 20)
#define MAX_MARKS 4096u
#define MAX_MEMO (1u << 20)
#define MAX_VALUES (1u << 22)
#define MAX_ITEMS (1u << 24)      /* per list / tuple / dict */
#define MAX_LINE 256u             /* text-opcode argument lines (GLOBAL names, INT, ...) */
#define MAX_STORAGES (1u << 16)

/* ---- values -------------------------------------------------------------------------------- */

enum pv_global {
    G_ORDERED_DICT = 1,
    G_REBUILD_V2,
    G_REBUILD_V1,
    G_REBUILD_PARAM,
    G_REBUILD_PARAM_STATE,
    G_STORAGE,
    G_STRIDED,
    G_GET_LAYOUT,
    G_NAMESPACE,
    G_CODECS_ENCODE,
    G_NP_DTYPE,
    G_NP_SCALAR,
    G_NP_RECONSTRUCT,
    G_NP_NDARRAY,
    G_EMPTY_BYTES
};

struct rc_pv {
    rc_pv_kind kind;
    rc_pv *next_alloc; /* arena chain */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *s; size_t len; } str;           /* bytes inline after the node */
        struct { rc_pv **items; size_t n, cap; } seq;        /* tuple, list */
        struct {
            rc_pv **keys, **vals;
            size_t n, cap;
            uint32_t *index; /* open addressing: entry index + 1, 0 = empty */
            size_t index_cap;
            bool is_namespace;
        } dict;
        struct {
            rc_pt_dtype dtype;
            const uint8_t *data;
            uint64_t numel;
            const char *key; /* inline after the node */
        } storage;
        struct {
            rc_pt_dtype dtype;
            int ndim;
            int64_t shape[RC_PT_MAX_DIMS];
            uint64_t numel;
            const uint8_t *data;
        } tensor;
        struct { int id; int table_index; } global;
        struct { char kind, order; size_t itemsize; } npdtype;
        struct {                  /* ndarray, and numpy scalars kept opaque (ndim 0) */
            char kind, order;     /* copied from the dtype when the state is set */
            size_t itemsize;
            int ndim;
            int64_t shape[RC_PT_MAX_DIMS];
            uint64_t numel;
            bool fortran, built;
            const uint8_t *data;  /* points into a bytes value of the same arena */
            size_t nbytes;
            const rc_pv *items;   /* object arrays */
        } nd;
    } u;
};

struct rc_pickle {
    rc_pv *values;
    rc_pv *root;
    size_t n_values;
};

const char *rc_pt_dtype_name(rc_pt_dtype dt) {
    switch (dt) {
    case RC_PT_F32: return "float32";
    case RC_PT_F16: return "float16";
    case RC_PT_BF16: return "bfloat16";
    case RC_PT_F64: return "float64";
    case RC_PT_I64: return "int64";
    case RC_PT_I32: return "int32";
    case RC_PT_U8: return "uint8";
    }
    return "?";
}

size_t rc_pt_dtype_size(rc_pt_dtype dt) {
    switch (dt) {
    case RC_PT_F32: case RC_PT_I32: return 4;
    case RC_PT_F16: case RC_PT_BF16: return 2;
    case RC_PT_F64: case RC_PT_I64: return 8;
    case RC_PT_U8: return 1;
    }
    return 0;
}

static rc_dtype pt_blob_dtype(rc_pt_dtype dt) {
    switch (dt) {
    case RC_PT_F32: return RC_DT_F32;
    case RC_PT_F16: return RC_DT_F16;
    case RC_PT_BF16: return RC_DT_BF16;
    case RC_PT_I64: return RC_DT_I64;
    case RC_PT_I32: return RC_DT_I32;
    case RC_PT_U8: return RC_DT_U8;
    case RC_PT_F64: break;
    }
    return (rc_dtype)0;
}

const char *rc_pv_kind_name(rc_pv_kind k) {
    switch (k) {
    case RC_PV_NONE: return "None";
    case RC_PV_BOOL: return "bool";
    case RC_PV_INT: return "int";
    case RC_PV_FLOAT: return "float";
    case RC_PV_STR: return "str";
    case RC_PV_BYTES: return "bytes";
    case RC_PV_TUPLE: return "tuple";
    case RC_PV_LIST: return "list";
    case RC_PV_DICT: return "dict";
    case RC_PV_TENSOR: return "tensor";
    case RC_PV_STORAGE: return "storage";
    case RC_PV_GLOBAL: return "global";
    case RC_PV_NP_DTYPE: return "numpy.dtype";
    case RC_PV_NDARRAY: return "numpy.ndarray";
    case RC_PV_NP_SCALAR: return "numpy scalar";
    }
    return "?";
}

/* ---- the allowlist --------------------------------------------------------------------------- */

typedef struct {
    const char *module, *name;
    int id;
    rc_pt_dtype dtype; /* G_STORAGE only; 0 = known storage type we do not load */
} global_entry;

static const global_entry k_globals[] = {
    {"collections", "OrderedDict", G_ORDERED_DICT, (rc_pt_dtype)0},
    {"torch._utils", "_rebuild_tensor_v2", G_REBUILD_V2, (rc_pt_dtype)0},
    {"torch._utils", "_rebuild_tensor", G_REBUILD_V1, (rc_pt_dtype)0},
    {"torch._utils", "_rebuild_parameter", G_REBUILD_PARAM, (rc_pt_dtype)0},
    {"torch._utils", "_rebuild_parameter_with_state", G_REBUILD_PARAM_STATE, (rc_pt_dtype)0},
    {"torch", "FloatStorage", G_STORAGE, RC_PT_F32},
    {"torch", "HalfStorage", G_STORAGE, RC_PT_F16},
    {"torch", "BFloat16Storage", G_STORAGE, RC_PT_BF16},
    {"torch", "DoubleStorage", G_STORAGE, RC_PT_F64},
    {"torch", "LongStorage", G_STORAGE, RC_PT_I64},
    {"torch", "IntStorage", G_STORAGE, RC_PT_I32},
    {"torch", "ByteStorage", G_STORAGE, RC_PT_U8},
    {"torch", "BoolStorage", G_STORAGE, (rc_pt_dtype)0},
    {"torch", "CharStorage", G_STORAGE, (rc_pt_dtype)0},
    {"torch", "ShortStorage", G_STORAGE, (rc_pt_dtype)0},
    {"torch", "ComplexFloatStorage", G_STORAGE, (rc_pt_dtype)0},
    {"torch", "ComplexDoubleStorage", G_STORAGE, (rc_pt_dtype)0},
    {"torch", "strided", G_STRIDED, (rc_pt_dtype)0},
    {"torch.serialization", "_get_layout", G_GET_LAYOUT, (rc_pt_dtype)0},
    {"argparse", "Namespace", G_NAMESPACE, (rc_pt_dtype)0},
    {"_codecs", "encode", G_CODECS_ENCODE, (rc_pt_dtype)0},
    /* numpy values in training args / optimizer state: only these, interpreted as data */
    {"numpy", "dtype", G_NP_DTYPE, (rc_pt_dtype)0},
    {"numpy", "ndarray", G_NP_NDARRAY, (rc_pt_dtype)0}, /* only as _reconstruct's class */
    {"numpy.core.multiarray", "scalar", G_NP_SCALAR, (rc_pt_dtype)0},
    {"numpy._core.multiarray", "scalar", G_NP_SCALAR, (rc_pt_dtype)0}, /* numpy 2 */
    {"numpy.core.multiarray", "_reconstruct", G_NP_RECONSTRUCT, (rc_pt_dtype)0},
    {"numpy._core.multiarray", "_reconstruct", G_NP_RECONSTRUCT, (rc_pt_dtype)0},
    /* protocol 2 spells b'' (an empty array's data) as bytes(); only the no-argument call */
    {"__builtin__", "bytes", G_EMPTY_BYTES, (rc_pt_dtype)0},
    {"builtins", "bytes", G_EMPTY_BYTES, (rc_pt_dtype)0},
};
#define N_GLOBALS (sizeof k_globals / sizeof k_globals[0])

/* ---- VM state -------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t len, pos, op_pos;
    uint8_t op;
    const char *what;
    rc_pickle *out;
    rc_pv **stack;
    size_t sp, stack_cap;
    size_t *marks;
    size_t n_marks, marks_cap;
    rc_pv **memo;
    size_t memo_cap, memo_count;
    rc_pickle_storage_fn storage_fn;
    void *ctx;
    recall_err *err;
    bool stopped; /* STOP was run: the root is in out->root */
} vm;

/* Copies `s` (len n) into `dst` with non-printables escaped, so hostile names can't garble logs. */
static void printable(char *dst, size_t cap, const char *s, size_t n) {
    size_t o = 0, i = 0;
    for (; i < n && o + 8 < cap; i++) { /* room for one escape + "..." + NUL */
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') dst[o++] = (char)c;
        else o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", c);
    }
    if (i < n) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = 0;
}

static recall_status vm_fail(vm *m, recall_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static recall_status vm_fail(vm *m, recall_status code, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return rc_fail(m->err, code, "%s: %s (opcode 0x%02x at byte %zu)", m->what, what,
                   (unsigned)m->op, m->op_pos);
}

static rc_pv *new_value(vm *m, rc_pv_kind kind, size_t extra) {
    if (m->out->n_values >= MAX_VALUES) {
        vm_fail(m, RECALL_E_LIMIT, "more than %u values", MAX_VALUES);
        return NULL;
    }
    rc_pv *v = calloc(1, sizeof *v + extra);
    if (!v) {
        vm_fail(m, RECALL_E_NOMEM, "out of memory");
        return NULL;
    }
    v->kind = kind;
    v->next_alloc = m->out->values;
    m->out->values = v;
    m->out->n_values++;
    return v;
}

static rc_pv *new_str(vm *m, rc_pv_kind kind, const uint8_t *s, size_t n) {
    if (n > SIZE_MAX - sizeof(rc_pv) - 1) {
        vm_fail(m, RECALL_E_LIMIT, "string too long");
        return NULL;
    }
    rc_pv *v = new_value(m, kind, n + 1);
    if (!v) return NULL;
    char *dst = (char *)(v + 1);
    if (n) memcpy(dst, s, n);
    dst[n] = 0;
    v->u.str.s = dst;
    v->u.str.len = n;
    return v;
}

static rc_pv *new_int(vm *m, int64_t x) {
    rc_pv *v = new_value(m, RC_PV_INT, 0);
    if (v) v->u.i = x;
    return v;
}

static recall_status push(vm *m, rc_pv *v) {
    if (!v) return m->err && m->err->code ? m->err->code : RECALL_E_NOMEM;
    if (m->sp == m->stack_cap) {
        if (m->stack_cap >= MAX_STACK) return vm_fail(m, RECALL_E_LIMIT, "stack deeper than %u", MAX_STACK);
        rc_pv **ns = rc_grow(m->stack, m->sp, &m->stack_cap, sizeof *ns, 64);
        if (!ns) return vm_fail(m, RECALL_E_NOMEM, "out of memory (stack)");
        m->stack = ns;
    }
    m->stack[m->sp++] = v;
    return RECALL_OK;
}

static size_t stack_base(const vm *m) { return m->n_marks ? m->marks[m->n_marks - 1] : 0; }

static recall_status pop(vm *m, rc_pv **v) {
    if (m->sp <= stack_base(m)) return vm_fail(m, RECALL_E_FORMAT, "stack underflow");
    *v = m->stack[--m->sp];
    return RECALL_OK;
}

static recall_status top(vm *m, rc_pv **v) {
    if (m->sp <= stack_base(m)) return vm_fail(m, RECALL_E_FORMAT, "stack empty");
    *v = m->stack[m->sp - 1];
    return RECALL_OK;
}

/* Removes the innermost mark; the items above it are stack[*first, sp). */
static recall_status pop_mark(vm *m, size_t *first) {
    if (!m->n_marks) return vm_fail(m, RECALL_E_FORMAT, "no MARK on the stack");
    *first = m->marks[--m->n_marks];
    return RECALL_OK;
}

/* ---- containers ------------------------------------------------------------------------------ */

static recall_status seq_reserve(vm *m, rc_pv *s, size_t more) {
    if (more > MAX_ITEMS || s->u.seq.n > MAX_ITEMS - more)
        return vm_fail(m, RECALL_E_LIMIT, "%s longer than %u items", rc_pv_kind_name(s->kind), MAX_ITEMS);
    size_t need = s->u.seq.n + more;
    if (need <= s->u.seq.cap) return RECALL_OK;
    size_t nc = s->u.seq.cap ? s->u.seq.cap : 4;
    while (nc < need) nc *= 2;
    rc_pv **ni = realloc(s->u.seq.items, nc * sizeof *ni);
    if (!ni) return vm_fail(m, RECALL_E_NOMEM, "out of memory (%s)", rc_pv_kind_name(s->kind));
    s->u.seq.items = ni;
    s->u.seq.cap = nc;
    return RECALL_OK;
}

static recall_status seq_from(vm *m, rc_pv_kind kind, rc_pv **items, size_t n, rc_pv **out) {
    rc_pv *s = new_value(m, kind, 0);
    if (!s) return m->err ? m->err->code : RECALL_E_NOMEM;
    if (n) {
        RC_TRY(seq_reserve(m, s, n));
        memcpy(s->u.seq.items, items, n * sizeof *items);
        s->u.seq.n = n;
    }
    *out = s;
    return RECALL_OK;
}

/* Dict keys are compared as Python would for the hashable kinds real checkpoints use. */
static bool key_hashable(const rc_pv *k) {
    return k->kind == RC_PV_STR || k->kind == RC_PV_BYTES || k->kind == RC_PV_INT ||
           k->kind == RC_PV_BOOL || k->kind == RC_PV_NONE;
}

static uint64_t key_hash(const rc_pv *k) {
    uint64_t h = 1469598103934665603ull;
    if (k->kind == RC_PV_STR || k->kind == RC_PV_BYTES) {
        h ^= (uint64_t)k->kind;
        for (size_t i = 0; i < k->u.str.len; i++) h = (h ^ (uint8_t)k->u.str.s[i]) * 1099511628211ull;
        return h;
    }
    uint64_t x = k->kind == RC_PV_NONE ? 0x9e3779b97f4a7c15ull
                 : k->kind == RC_PV_BOOL ? (uint64_t)k->u.b  /* True == 1, as in Python */
                                         : (uint64_t)k->u.i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static bool key_eq(const rc_pv *a, const rc_pv *b) {
    bool a_num = a->kind == RC_PV_INT || a->kind == RC_PV_BOOL;
    bool b_num = b->kind == RC_PV_INT || b->kind == RC_PV_BOOL;
    if (a_num || b_num) {
        if (!(a_num && b_num)) return false;
        int64_t x = a->kind == RC_PV_BOOL ? a->u.b : a->u.i;
        int64_t y = b->kind == RC_PV_BOOL ? b->u.b : b->u.i;
        return x == y;
    }
    if (a->kind != b->kind) return false;
    if (a->kind == RC_PV_NONE) return true;
    return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
}

/* Returns the entry index of key, or SIZE_MAX. */
static size_t dict_lookup(const rc_pv *d, const rc_pv *key) {
    if (!d->u.dict.index_cap) return SIZE_MAX;
    size_t mask = d->u.dict.index_cap - 1;
    for (size_t s = (size_t)key_hash(key) & mask;; s = (s + 1) & mask) {
        uint32_t e = d->u.dict.index[s];
        if (!e) return SIZE_MAX;
        if (key_eq(d->u.dict.keys[e - 1], key)) return e - 1;
    }
}

static void index_insert(rc_pv *d, size_t entry) {
    size_t mask = d->u.dict.index_cap - 1;
    size_t s = (size_t)key_hash(d->u.dict.keys[entry]) & mask;
    while (d->u.dict.index[s]) s = (s + 1) & mask;
    d->u.dict.index[s] = (uint32_t)(entry + 1);
}

static recall_status dict_set(vm *m, rc_pv *d, rc_pv *key, rc_pv *val) {
    if (!key_hashable(key))
        return vm_fail(m, RECALL_E_UNSUPPORTED, "dict key of type %s", rc_pv_kind_name(key->kind));
    size_t at = dict_lookup(d, key);
    if (at != SIZE_MAX) { /* Python keeps the first key object and position, replaces the value */
        d->u.dict.vals[at] = val;
        return RECALL_OK;
    }
    size_t n = d->u.dict.n;
    if (n >= MAX_ITEMS) return vm_fail(m, RECALL_E_LIMIT, "dict longer than %u entries", MAX_ITEMS);
    if (n == d->u.dict.cap) {
        size_t nc = n ? n * 2 : 8;
        rc_pv **nk = realloc(d->u.dict.keys, nc * sizeof *nk);
        if (!nk) return vm_fail(m, RECALL_E_NOMEM, "out of memory (dict)");
        d->u.dict.keys = nk;
        rc_pv **nv = realloc(d->u.dict.vals, nc * sizeof *nv);
        if (!nv) return vm_fail(m, RECALL_E_NOMEM, "out of memory (dict)");
        d->u.dict.vals = nv;
        d->u.dict.cap = nc;
    }
    d->u.dict.keys[n] = key;
    d->u.dict.vals[n] = val;
    d->u.dict.n = n + 1;
    if (2 * (n + 1) > d->u.dict.index_cap) { /* keep the load factor at most 1/2 */
        size_t ic = d->u.dict.index_cap ? d->u.dict.index_cap * 2 : 16;
        while (ic < 2 * (n + 1)) ic *= 2;
        uint32_t *ni = calloc(ic, sizeof *ni);
        if (!ni) return vm_fail(m, RECALL_E_NOMEM, "out of memory (dict index)");
        free(d->u.dict.index);
        d->u.dict.index = ni;
        d->u.dict.index_cap = ic;
        for (size_t i = 0; i <= n; i++) index_insert(d, i);
    } else {
        index_insert(d, n);
    }
    return RECALL_OK;
}

static rc_pv *new_dict(vm *m) { return new_value(m, RC_PV_DICT, 0); }

/* ---- reading the opcode stream --------------------------------------------------------------- */

static recall_status need(vm *m, size_t n) {
    if (n > m->len - m->pos)
        return vm_fail(m, RECALL_E_FORMAT, "truncated: %zu argument bytes needed, %zu left", n,
                       m->len - m->pos);
    return RECALL_OK;
}

static uint64_t rd_le(const uint8_t *p, size_t n) {
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

static recall_status read_uint(vm *m, size_t n, uint64_t *x) {
    RC_TRY(need(m, n));
    *x = rd_le(m->p + m->pos, n);
    m->pos += n;
    return RECALL_OK;
}

/* A text argument up to '\n' (excluded); *line points into the input, not NUL-terminated. */
static recall_status read_line(vm *m, const char **line, size_t *n) {
    size_t avail = m->len - m->pos;
    size_t lim = avail < MAX_LINE ? avail : MAX_LINE;
    const uint8_t *nl = memchr(m->p + m->pos, '\n', lim);
    if (!nl) return vm_fail(m, RECALL_E_FORMAT, "text argument without newline within %u bytes", MAX_LINE);
    *line = (const char *)(m->p + m->pos);
    *n = (size_t)(nl - (m->p + m->pos));
    m->pos += *n + 1;
    return RECALL_OK;
}

static bool parse_dec(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == n) return false;
    uint64_t acc = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (acc > (UINT64_MAX - d) / 10) return false;
        acc = acc * 10 + d;
    }
    if (neg) {
        if (acc > (uint64_t)INT64_MAX + 1) return false;
        *out = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    } else {
        if (acc > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)acc;
    }
    return true;
}

/* ---- memo ------------------------------------------------------------------------------------ */

static recall_status memo_put(vm *m, uint64_t idx) {
    rc_pv *v;
    RC_TRY(top(m, &v));
    if (idx >= MAX_MEMO) return vm_fail(m, RECALL_E_LIMIT, "memo index %llu >= %u", (unsigned long long)idx, MAX_MEMO);
    if (idx >= m->memo_cap) {
        size_t nc = m->memo_cap ? m->memo_cap : 64;
        while (nc <= idx) nc *= 2;
        if (nc > MAX_MEMO) nc = MAX_MEMO;
        rc_pv **nm = realloc(m->memo, nc * sizeof *nm);
        if (!nm) return vm_fail(m, RECALL_E_NOMEM, "out of memory (memo)");
        memset(nm + m->memo_cap, 0, (nc - m->memo_cap) * sizeof *nm);
        m->memo = nm;
        m->memo_cap = nc;
    }
    if (!m->memo[idx]) m->memo_count++;
    m->memo[idx] = v;
    return RECALL_OK;
}

static recall_status memo_get(vm *m, uint64_t idx) {
    if (idx >= m->memo_cap || !m->memo[idx])
        return vm_fail(m, RECALL_E_FORMAT, "memo entry %llu was never stored", (unsigned long long)idx);
    return push(m, m->memo[idx]);
}

/* ---- globals and the natively interpreted callables ------------------------------------------ */

static recall_status do_global(vm *m, const char *mod, size_t mod_n, const char *name, size_t name_n) {
    for (size_t i = 0; i < N_GLOBALS; i++) {
        const global_entry *g = &k_globals[i];
        if (strlen(g->module) == mod_n && memcmp(g->module, mod, mod_n) == 0 &&
            strlen(g->name) == name_n && memcmp(g->name, name, name_n) == 0) {
            if (g->id == G_STORAGE && !g->dtype)
                return vm_fail(m, RECALL_E_UNSUPPORTED, "storage type %s.%s is not supported", g->module, g->name);
            rc_pv *v = new_value(m, RC_PV_GLOBAL, 0);
            if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
            v->u.global.id = g->id;
            v->u.global.table_index = (int)i;
            return push(m, v);
        }
    }
    char pm[96], pn[96];
    printable(pm, sizeof pm, mod, mod_n);
    printable(pn, sizeof pn, name, name_n);
    return vm_fail(m, RECALL_E_SECURITY,
                   "GLOBAL '%s.%s' is not allowlisted (refused: unpickling it could run code)", pm, pn);
}

static const char *global_name(const rc_pv *g, char *buf, size_t cap) {
    const global_entry *e = &k_globals[g->u.global.table_index];
    snprintf(buf, cap, "%s.%s", e->module, e->name);
    return buf;
}

static bool is_int(const rc_pv *v) { return v->kind == RC_PV_INT || v->kind == RC_PV_BOOL; }
static int64_t int_of(const rc_pv *v) { return v->kind == RC_PV_BOOL ? v->u.b : v->u.i; }

/* _rebuild_tensor(_v2)(storage, storage_offset, size, stride, ...): a contiguous view. */
static recall_status rebuild_tensor(vm *m, rc_pv **a, rc_pv **out) {
    rc_pv *st = a[0], *off = a[1], *size = a[2], *stride = a[3];
    if (st->kind != RC_PV_STORAGE)
        return vm_fail(m, RECALL_E_FORMAT, "_rebuild_tensor: argument 0 is a %s, not a storage", rc_pv_kind_name(st->kind));
    if (!is_int(off) || int_of(off) < 0)
        return vm_fail(m, RECALL_E_FORMAT, "_rebuild_tensor: storage offset is not a non-negative int");
    if (size->kind != RC_PV_TUPLE || stride->kind != RC_PV_TUPLE)
        return vm_fail(m, RECALL_E_FORMAT, "_rebuild_tensor: size/stride are not tuples");
    size_t nd = size->u.seq.n;
    if (nd > RC_PT_MAX_DIMS)
        return vm_fail(m, RECALL_E_UNSUPPORTED, "tensor with %zu dimensions (max %d)", nd, RC_PT_MAX_DIMS);
    if (stride->u.seq.n != nd)
        return vm_fail(m, RECALL_E_FORMAT, "tensor size has %zu dims but stride %zu", nd, stride->u.seq.n);
    rc_pv *t = new_value(m, RC_PV_TENSOR, 0);
    if (!t) return m->err ? m->err->code : RECALL_E_NOMEM;
    uint64_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
        rc_pv *s = size->u.seq.items[d], *k = stride->u.seq.items[d];
        if (!is_int(s) || int_of(s) < 0 || !is_int(k))
            return vm_fail(m, RECALL_E_FORMAT, "tensor size/stride entry %zu is not a valid int", d);
        uint64_t sz = (uint64_t)int_of(s);
        if (sz && numel > UINT64_MAX / sz)
            return vm_fail(m, RECALL_E_FORMAT, "tensor element count overflows");
        numel *= sz;
        t->u.tensor.shape[d] = (int64_t)sz;
    }
    if (numel) { /* torch writes arbitrary strides for size-1 dims; only the others matter */
        uint64_t expect = 1;
        for (size_t d = nd; d-- > 0;) {
            uint64_t sz = (uint64_t)t->u.tensor.shape[d];
            int64_t k = int_of(stride->u.seq.items[d]);
            if (sz != 1 && (k < 0 || (uint64_t)k != expect))
                return vm_fail(m, RECALL_E_UNSUPPORTED,
                               "non-contiguous tensor (dim %zu: size %llu, stride %lld, row-major needs %llu); "
                               "save a .contiguous() copy", d, (unsigned long long)sz, (long long)k,
                               (unsigned long long)expect);
            expect *= sz;
        }
    }
    uint64_t o = (uint64_t)int_of(off);
    if (o > st->u.storage.numel || numel > st->u.storage.numel - o)
        return vm_fail(m, RECALL_E_FORMAT,
                       "tensor view [%llu, %llu+%llu) is out of range of storage '%s' (%llu elements)",
                       (unsigned long long)o, (unsigned long long)o, (unsigned long long)numel,
                       st->u.storage.key, (unsigned long long)st->u.storage.numel);
    t->u.tensor.dtype = st->u.storage.dtype;
    t->u.tensor.ndim = (int)nd;
    t->u.tensor.numel = numel;
    t->u.tensor.data = st->u.storage.data + o * rc_pt_dtype_size(st->u.storage.dtype);
    *out = t;
    return RECALL_OK;
}

/* _codecs.encode(str, 'latin1'): how protocols < 3 pickle `bytes`. Each code point < 256 is one
 * byte; the str arrives as UTF-8, so decode 1- and 2-byte sequences only. */
static recall_status latin1_bytes(vm *m, rc_pv **a, size_t n, rc_pv **out) {
    if (n != 2 || a[0]->kind != RC_PV_STR || a[1]->kind != RC_PV_STR ||
        (strcmp(a[1]->u.str.s, "latin1") != 0 && strcmp(a[1]->u.str.s, "latin-1") != 0))
        return vm_fail(m, RECALL_E_UNSUPPORTED, "_codecs.encode other than (str, 'latin1')");
    const uint8_t *s = (const uint8_t *)a[0]->u.str.s;
    size_t len = a[0]->u.str.len, o = 0;
    rc_pv *v = new_str(m, RC_PV_BYTES, s, len); /* decoded in place: never longer */
    if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
    uint8_t *d = (uint8_t *)(v + 1);
    for (size_t i = 0; i < len; i++) {
        if (s[i] < 0x80) {
            d[o++] = s[i];
        } else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < len && (s[i + 1] & 0xc0) == 0x80) {
            d[o++] = (uint8_t)(((s[i] & 0x1fu) << 6) | (s[i + 1] & 0x3fu));
            i++;
        } else {
            return vm_fail(m, RECALL_E_FORMAT, "_codecs.encode: text is not latin-1 encodable UTF-8");
        }
    }
    d[o] = 0;
    v->u.str.len = o;
    *out = v;
    return RECALL_OK;
}

/* ---- numpy values (inert data: dtypes, scalars, arrays) ---------------------------------------- */

static float f16_to_f32(uint16_t h);

/* *out = v, or the error new_value recorded when v is NULL. */
static recall_status value_result(vm *m, rc_pv *v, rc_pv **out) {
    if (!v) return m->err && m->err->code ? m->err->code : RECALL_E_NOMEM;
    *out = v;
    return RECALL_OK;
}

/* numpy.dtype(typestr, align, copy): typestr is what dtype.__reduce__ writes, a kind letter and
 * a size ('f8', 'i4', 'b1', 'U20', 'O8', 'M8'). The byte order arrives later with BUILD. */
static recall_status np_dtype_new(vm *m, rc_pv **a, size_t n, rc_pv **out) {
    if (n != 3 || a[0]->kind != RC_PV_STR || !is_int(a[1]) || !is_int(a[2]))
        return vm_fail(m, RECALL_E_FORMAT, "numpy.dtype called with bad arguments (expected (str, bool, bool))");
    const char *ts = a[0]->u.str.s;
    size_t tl = a[0]->u.str.len;
    int64_t size = 0;
    char shown[40];
    printable(shown, sizeof shown, ts, tl);
    if (tl < 1 || ts[0] == 0 || !strchr("biufcmMOSUV", ts[0]) || (tl > 1 && !parse_dec(ts + 1, tl - 1, &size)) ||
        size < 0 || size > (1 << 20))
        return vm_fail(m, RECALL_E_UNSUPPORTED, "numpy.dtype('%s')", shown);
    char k = ts[0];
    bool ok = k == 'b'   ? size == 1
              : k == 'i' || k == 'u' ? size == 1 || size == 2 || size == 4 || size == 8
              : k == 'f' ? size == 2 || size == 4 || size == 8 || size == 12 || size == 16
              : k == 'c' ? size == 8 || size == 16 || size == 24 || size == 32
              : k == 'm' || k == 'M' || k == 'O' ? size == 8
                                                  : true; /* S, U, V: any size */
    if (!ok) return vm_fail(m, RECALL_E_UNSUPPORTED, "numpy.dtype('%s')", shown);
    rc_pv *d = new_value(m, RC_PV_NP_DTYPE, 0);
    if (!d) return m->err ? m->err->code : RECALL_E_NOMEM;
    d->u.npdtype.kind = k;
    d->u.npdtype.itemsize = k == 'O' ? 0 : (size_t)size; /* object elements are pickled values */
    d->u.npdtype.order = size <= 1 || strchr("bOSV", k) ? '|' : '<';
    *out = d;
    return RECALL_OK;
}

/* dtype.__setstate__((version, byteorder, subarray, names, fields, elsize, alignment, flags
 * [, metadata])): only plain (non-structured) dtypes. */
static recall_status np_dtype_setstate(vm *m, rc_pv *d, const rc_pv *st) {
    if (st->kind != RC_PV_TUPLE || (st->u.seq.n != 8 && st->u.seq.n != 9))
        return vm_fail(m, RECALL_E_FORMAT, "numpy.dtype state is not an 8- or 9-tuple");
    rc_pv **a = st->u.seq.items;
    if (!is_int(a[0]) || a[1]->kind != RC_PV_STR || a[1]->u.str.len != 1 || !a[1]->u.str.s[0] ||
        !strchr("<>|=", a[1]->u.str.s[0]) || !is_int(a[5]))
        return vm_fail(m, RECALL_E_FORMAT, "numpy.dtype state has a bad version, byte order or size");
    if (a[2]->kind != RC_PV_NONE || a[3]->kind != RC_PV_NONE || a[4]->kind != RC_PV_NONE)
        return vm_fail(m, RECALL_E_UNSUPPORTED, "structured or sub-array numpy.dtype");
    char o = a[1]->u.str.s[0];
    d->u.npdtype.order = o == '=' ? '<' : o; /* numpy writes '<' or '>'; '=' only by hand: little */
    int64_t elsize = int_of(a[5]);
    if (strchr("SUV", d->u.npdtype.kind) && elsize > 0) { /* flexible types carry their size here */
        if (elsize > (1 << 20)) return vm_fail(m, RECALL_E_UNSUPPORTED, "numpy.dtype of %lld bytes", (long long)elsize);
        d->u.npdtype.itemsize = (size_t)elsize;
    }
    return RECALL_OK;
}

/* Little-endian copy of one element (numpy '>' data is byte-swapped here). */
static void np_element_le(const rc_pv *d, const uint8_t *src, uint8_t *dst) {
    size_t n = d->u.npdtype.itemsize;
    for (size_t i = 0; i < n; i++) dst[i] = d->u.npdtype.order == '>' ? src[n - 1 - i] : src[i];
}

/* numpy.core.multiarray.scalar(dtype, raw bytes): a numpy scalar (np.float64(3e-4), np.int64(4),
 * np.bool_(True)) read as the native value Python's float()/int()/bool() would give; kinds with
 * no native equivalent stay opaque (RC_PV_NP_SCALAR, a 0-d array of the raw bytes). */
static recall_status np_scalar(vm *m, rc_pv **a, size_t n, rc_pv **out) {
    if (n != 2 || a[0]->kind != RC_PV_NP_DTYPE)
        return vm_fail(m, RECALL_E_FORMAT, "numpy scalar(): arguments are not (numpy.dtype, data)");
    const rc_pv *d = a[0];
    if (d->u.npdtype.kind == 'O') { /* an object scalar is the pickled object itself */
        *out = a[1];
        return RECALL_OK;
    }
    size_t sz = d->u.npdtype.itemsize;
    if (a[1]->kind != RC_PV_BYTES || a[1]->u.str.len != sz)
        return vm_fail(m, RECALL_E_FORMAT, "numpy scalar of dtype '%c%zu' needs %zu data bytes, got a %s of %zu",
                       d->u.npdtype.kind, sz, sz, rc_pv_kind_name(a[1]->kind),
                       a[1]->kind == RC_PV_BYTES ? a[1]->u.str.len : 0);
    const uint8_t *raw = (const uint8_t *)a[1]->u.str.s;
    uint8_t le[16] = {0};
    char k = d->u.npdtype.kind;
    uint64_t x = 0;
    if (sz <= 8 && strchr("biuf", k)) {
        np_element_le(d, raw, le);
        x = rd_le(le, sz);
    }
    rc_pv *v;
    if (sz <= 8 && k == 'b') {
        v = new_value(m, RC_PV_BOOL, 0);
        if (v) v->u.b = x != 0;
        return value_result(m, v, out);
    }
    if (sz <= 8 && k == 'i') {
        if (sz < 8 && (x >> (8 * sz - 1)) & 1) x |= ~0ull << (8 * sz); /* sign-extend */
        return value_result(m, new_int(m, (int64_t)x), out);
    }
    if (sz <= 8 && k == 'u' && x <= (uint64_t)INT64_MAX) return value_result(m, new_int(m, (int64_t)x), out);
    if (sz <= 8 && k == 'f') {
        double f;
        if (sz == 8) {
            memcpy(&f, &x, 8);
        } else if (sz == 4) {
            uint32_t b = (uint32_t)x;
            float g;
            memcpy(&g, &b, 4);
            f = g;
        } else {
            f = f16_to_f32((uint16_t)x);
        }
        v = new_value(m, RC_PV_FLOAT, 0);
        if (v) v->u.f = f; /* exact: every f2 / f4 value is a double */
        return value_result(m, v, out);
    }
    v = new_value(m, RC_PV_NP_SCALAR, 0); /* c, f12/f16, S, U, V, M, m, u8 above 2^63-1 */
    if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
    v->u.nd.kind = k;
    v->u.nd.order = d->u.npdtype.order;
    v->u.nd.itemsize = sz;
    v->u.nd.numel = 1;
    v->u.nd.built = true;
    v->u.nd.data = raw;
    v->u.nd.nbytes = sz;
    *out = v;
    return RECALL_OK;
}

/* numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b'): an empty int8 array whose real
 * contents come with BUILD. Any other class could be a subclass with code in __setstate__. */
static recall_status np_reconstruct(vm *m, rc_pv *fn, rc_pv **a, size_t n, rc_pv **out) {
    char gn[96], cn[96];
    if (n != 3) return vm_fail(m, RECALL_E_FORMAT, "%s called with %zu arguments (3 expected)", global_name(fn, gn, sizeof gn), n);
    if (a[0]->kind != RC_PV_GLOBAL || a[0]->u.global.id != G_NP_NDARRAY)
        return vm_fail(m, RECALL_E_SECURITY, "%s of %s refused (only numpy.ndarray is rebuilt)",
                       global_name(fn, gn, sizeof gn),
                       a[0]->kind == RC_PV_GLOBAL ? global_name(a[0], cn, sizeof cn) : rc_pv_kind_name(a[0]->kind));
    if (a[1]->kind != RC_PV_TUPLE || (a[2]->kind != RC_PV_BYTES && a[2]->kind != RC_PV_STR))
        return vm_fail(m, RECALL_E_FORMAT, "%s arguments are not (numpy.ndarray, tuple, bytes)", global_name(fn, gn, sizeof gn));
    rc_pv *v = new_value(m, RC_PV_NDARRAY, 0);
    if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
    v->u.nd.kind = 'i';
    v->u.nd.order = '|';
    v->u.nd.itemsize = 1;
    v->u.nd.ndim = 1; /* shape (0,): numel 0 */
    *out = v;
    return RECALL_OK;
}

/* ndarray.__setstate__(([version,] shape, dtype, is_fortran, data)): data is the raw bytes of
 * numel elements, or for object arrays the list of numel pickled values. */
static recall_status np_array_setstate(vm *m, rc_pv *arr, const rc_pv *st) {
    if (st->kind != RC_PV_TUPLE || (st->u.seq.n != 5 && st->u.seq.n != 4))
        return vm_fail(m, RECALL_E_FORMAT, "numpy.ndarray state is not a 4- or 5-tuple");
    rc_pv **a = st->u.seq.items + (st->u.seq.n == 5);
    if (st->u.seq.n == 5 && (!is_int(st->u.seq.items[0]) || int_of(st->u.seq.items[0]) != 1))
        return vm_fail(m, RECALL_E_UNSUPPORTED, "numpy.ndarray state version other than 1");
    if (arr->u.nd.built) return vm_fail(m, RECALL_E_FORMAT, "numpy.ndarray state set twice");
    const rc_pv *shape = a[0], *d = a[1], *fortran = a[2], *data = a[3];
    if (shape->kind != RC_PV_TUPLE || d->kind != RC_PV_NP_DTYPE || !is_int(fortran))
        return vm_fail(m, RECALL_E_FORMAT, "numpy.ndarray state is not (shape tuple, numpy.dtype, bool, data)");
    if (shape->u.seq.n > RC_PT_MAX_DIMS)
        return vm_fail(m, RECALL_E_UNSUPPORTED, "numpy array with %zu dimensions (max %d)", shape->u.seq.n, RC_PT_MAX_DIMS);
    uint64_t numel = 1;
    for (size_t i = 0; i < shape->u.seq.n; i++) {
        const rc_pv *s = shape->u.seq.items[i];
        if (!is_int(s) || int_of(s) < 0) return vm_fail(m, RECALL_E_FORMAT, "numpy array shape entry %zu is not a valid int", i);
        uint64_t sz = (uint64_t)int_of(s);
        if (sz && numel > UINT64_MAX / sz) return vm_fail(m, RECALL_E_FORMAT, "numpy array element count overflows");
        numel *= sz;
        arr->u.nd.shape[i] = (int64_t)sz;
    }
    size_t isz = d->u.npdtype.itemsize;
    if (d->u.npdtype.kind == 'O') {
        if (data->kind != RC_PV_LIST || data->u.seq.n != numel)
            return vm_fail(m, RECALL_E_FORMAT, "object numpy array of %llu elements without a list of as many values",
                           (unsigned long long)numel);
        arr->u.nd.items = data;
    } else {
        if (data->kind != RC_PV_BYTES || (isz && numel > SIZE_MAX / isz) || data->u.str.len != numel * isz)
            return vm_fail(m, RECALL_E_FORMAT, "numpy array of %llu '%c%zu' elements: data is a %s of %zu bytes",
                           (unsigned long long)numel, d->u.npdtype.kind, isz, rc_pv_kind_name(data->kind),
                           data->kind == RC_PV_BYTES ? data->u.str.len : 0);
        arr->u.nd.data = (const uint8_t *)data->u.str.s;
        arr->u.nd.nbytes = data->u.str.len;
    }
    arr->u.nd.kind = d->u.npdtype.kind;
    arr->u.nd.order = d->u.npdtype.order;
    arr->u.nd.itemsize = isz;
    arr->u.nd.ndim = (int)shape->u.seq.n;
    arr->u.nd.numel = numel;
    arr->u.nd.fortran = int_of(fortran) != 0;
    arr->u.nd.built = true;
    return RECALL_OK;
}

static recall_status reduce_call(vm *m, rc_pv *fn, rc_pv *args, rc_pv **out) {
    char gn[96];
    if (fn->kind != RC_PV_GLOBAL)
        return vm_fail(m, RECALL_E_SECURITY, "REDUCE on a %s (only allowlisted globals may be called)", rc_pv_kind_name(fn->kind));
    if (args->kind != RC_PV_TUPLE)
        return vm_fail(m, RECALL_E_FORMAT, "REDUCE arguments are a %s, not a tuple", rc_pv_kind_name(args->kind));
    size_t n = args->u.seq.n;
    rc_pv **a = args->u.seq.items;
    switch (fn->u.global.id) {
    case G_ORDERED_DICT: {
        rc_pv *d = new_dict(m);
        if (!d) return m->err ? m->err->code : RECALL_E_NOMEM;
        if (n == 1 && (a[0]->kind == RC_PV_LIST || a[0]->kind == RC_PV_TUPLE)) {
            for (size_t i = 0; i < a[0]->u.seq.n; i++) { /* OrderedDict([(k, v), ...]) */
                rc_pv *kv = a[0]->u.seq.items[i];
                if ((kv->kind != RC_PV_TUPLE && kv->kind != RC_PV_LIST) || kv->u.seq.n != 2)
                    return vm_fail(m, RECALL_E_FORMAT, "OrderedDict item %zu is not a (key, value) pair", i);
                RC_TRY(dict_set(m, d, kv->u.seq.items[0], kv->u.seq.items[1]));
            }
        } else if (n != 0) {
            return vm_fail(m, RECALL_E_FORMAT, "OrderedDict called with %zu arguments", n);
        }
        *out = d;
        return RECALL_OK;
    }
    case G_REBUILD_V2:
        if (n != 6 && n != 7)
            return vm_fail(m, RECALL_E_FORMAT, "_rebuild_tensor_v2 called with %zu arguments (6 or 7 expected)", n);
        return rebuild_tensor(m, a, out);
    case G_REBUILD_V1:
        if (n != 4) return vm_fail(m, RECALL_E_FORMAT, "_rebuild_tensor called with %zu arguments (4 expected)", n);
        return rebuild_tensor(m, a, out);
    case G_REBUILD_PARAM:
    case G_REBUILD_PARAM_STATE:
        if (n != (fn->u.global.id == G_REBUILD_PARAM ? 3u : 4u) || a[0]->kind != RC_PV_TENSOR)
            return vm_fail(m, RECALL_E_FORMAT, "%s called with bad arguments", global_name(fn, gn, sizeof gn));
        *out = a[0]; /* a Parameter is its data for inference */
        return RECALL_OK;
    case G_CODECS_ENCODE:
        return latin1_bytes(m, a, n, out);
    case G_EMPTY_BYTES:
        if (n != 0) return vm_fail(m, RECALL_E_UNSUPPORTED, "%s called with arguments (only bytes() is read)", global_name(fn, gn, sizeof gn));
        return value_result(m, new_str(m, RC_PV_BYTES, (const uint8_t *)"", 0), out);
    case G_NP_DTYPE:
        return np_dtype_new(m, a, n, out);
    case G_NP_SCALAR:
        return np_scalar(m, a, n, out);
    case G_NP_RECONSTRUCT:
        return np_reconstruct(m, fn, a, n, out);
    case G_GET_LAYOUT: {
        if (n != 1 || a[0]->kind != RC_PV_STR || strcmp(a[0]->u.str.s, "torch.strided") != 0)
            return vm_fail(m, RECALL_E_UNSUPPORTED, "_get_layout of anything but torch.strided");
        rc_pv *v = new_value(m, RC_PV_GLOBAL, 0);
        if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
        v->u.global.id = G_STRIDED;
        for (size_t i = 0; i < N_GLOBALS; i++)
            if (k_globals[i].id == G_STRIDED) v->u.global.table_index = (int)i;
        *out = v;
        return RECALL_OK;
    }
    default:
        return vm_fail(m, RECALL_E_SECURITY, "%s may not be called (REDUCE)", global_name(fn, gn, sizeof gn));
    }
}

/* BINPERSID ('storage', storage_type, key, location, numel) */
static recall_status persistent_load(vm *m, rc_pv *pid, rc_pv **out) {
    if (pid->kind != RC_PV_TUPLE || pid->u.seq.n != 5)
        return vm_fail(m, RECALL_E_FORMAT, "persistent id is not a 5-tuple");
    rc_pv **a = pid->u.seq.items;
    if (a[0]->kind != RC_PV_STR || strcmp(a[0]->u.str.s, "storage") != 0)
        return vm_fail(m, RECALL_E_UNSUPPORTED, "persistent id of a kind other than 'storage'");
    if (a[1]->kind != RC_PV_GLOBAL || a[1]->u.global.id != G_STORAGE)
        return vm_fail(m, RECALL_E_FORMAT, "persistent id storage type is not a torch.*Storage");
    if (a[2]->kind != RC_PV_STR || a[2]->u.str.len == 0 || a[2]->u.str.len > 64 ||
        strlen(a[2]->u.str.s) != a[2]->u.str.len)
        return vm_fail(m, RECALL_E_FORMAT, "persistent id storage key is not a short str");
    if (a[3]->kind != RC_PV_STR) return vm_fail(m, RECALL_E_FORMAT, "persistent id location is not a str");
    if (!is_int(a[4]) || int_of(a[4]) < 0)
        return vm_fail(m, RECALL_E_FORMAT, "persistent id numel is not a non-negative int");
    rc_pt_dtype dt = k_globals[a[1]->u.global.table_index].dtype;
    uint64_t numel = (uint64_t)int_of(a[4]);
    if (!m->storage_fn)
        return vm_fail(m, RECALL_E_UNSUPPORTED, "storage '%s' referenced but no storage source given", a[2]->u.str.s);
    const uint8_t *data = NULL;
    size_t len = 0;
    recall_status s = m->storage_fn(m->ctx, a[2]->u.str.s, dt, numel, &data, &len, m->err);
    if (s != RECALL_OK) {
        if (m->err && m->err->code == RECALL_OK) vm_fail(m, s, "storage '%s' could not be loaded", a[2]->u.str.s);
        return s;
    }
    size_t es = rc_pt_dtype_size(dt);
    if (numel > len / es)
        return vm_fail(m, RECALL_E_FORMAT, "storage '%s' claims %llu %s elements but holds %zu bytes",
                       a[2]->u.str.s, (unsigned long long)numel, rc_pt_dtype_name(dt), len);
    rc_pv *v = new_value(m, RC_PV_STORAGE, a[2]->u.str.len + 1);
    if (!v) return m->err ? m->err->code : RECALL_E_NOMEM;
    char *key = (char *)(v + 1);
    memcpy(key, a[2]->u.str.s, a[2]->u.str.len + 1);
    v->u.storage.dtype = dt;
    v->u.storage.data = data;
    v->u.storage.numel = numel;
    v->u.storage.key = key;
    *out = v;
    return RECALL_OK;
}

/* ---- the opcode loop ------------------------------------------------------------------------- */

static recall_status op_string(vm *m, rc_pv_kind kind, size_t len_bytes, bool signed32) {
    uint64_t n;
    RC_TRY(read_uint(m, len_bytes, &n));
    if (signed32 && (n & 0x80000000u)) return vm_fail(m, RECALL_E_FORMAT, "negative string length");
    if (n > (uint64_t)(m->len - m->pos))
        return vm_fail(m, RECALL_E_FORMAT, "truncated: string of %llu bytes, %zu left", (unsigned long long)n,
                       m->len - m->pos);
    const uint8_t *s = m->p + m->pos;
    m->pos += (size_t)n;
    return push(m, new_str(m, kind, s, (size_t)n));
}

static recall_status op_long(vm *m, size_t n) {
    RC_TRY(need(m, n));
    if (n > 8) return vm_fail(m, RECALL_E_UNSUPPORTED, "integer of %zu bytes (wider than int64)", n);
    uint64_t x = rd_le(m->p + m->pos, n);
    if (n && n < 8 && (m->p[m->pos + n - 1] & 0x80)) x |= ~0ull << (8 * n); /* sign-extend */
    m->pos += n;
    return push(m, new_int(m, (int64_t)x));
}

/* BUILD: obj.__setstate__(state), for the few objects whose state is data. */
static recall_status op_build(vm *m, rc_pv *obj, rc_pv *state) {
    if (obj->kind == RC_PV_NP_DTYPE) return np_dtype_setstate(m, obj, state);
    if (obj->kind == RC_PV_NDARRAY) return np_array_setstate(m, obj, state);
    if (obj->kind != RC_PV_DICT) return vm_fail(m, RECALL_E_UNSUPPORTED, "BUILD on a %s", rc_pv_kind_name(obj->kind));
    if (obj->u.dict.is_namespace) { /* Namespace state is its attribute dict */
        if (state->kind != RC_PV_DICT) return vm_fail(m, RECALL_E_FORMAT, "Namespace state is not a dict");
        for (size_t i = 0; i < state->u.dict.n; i++) RC_TRY(dict_set(m, obj, state->u.dict.keys[i], state->u.dict.vals[i]));
    } else if (state->kind != RC_PV_DICT && state->kind != RC_PV_NONE && state->kind != RC_PV_TUPLE) {
        return vm_fail(m, RECALL_E_FORMAT, "dict state is a %s", rc_pv_kind_name(state->kind));
    } /* else: OrderedDict instance attributes (state_dict._metadata) are dropped */
    return RECALL_OK;
}

/* ---- the VM: one handler per opcode group (the groups of pickletools' opcode list) ----------- */

/* PROTO, FRAME (framing is only a read-ahead hint), STOP. */
static recall_status op_control(vm *m) {
    uint64_t x;
    rc_pv *a;
    switch (m->op) {
    case 0x80: /* PROTO */
        RC_TRY(read_uint(m, 1, &x));
        if (x > 5) return vm_fail(m, RECALL_E_UNSUPPORTED, "pickle protocol %llu", (unsigned long long)x);
        return RECALL_OK;
    case 0x95: /* FRAME */
        RC_TRY(read_uint(m, 8, &x));
        if (x > m->len - m->pos)
            return vm_fail(m, RECALL_E_FORMAT, "truncated: frame of %llu bytes", (unsigned long long)x);
        return RECALL_OK;
    default: /* '.' STOP */
        RC_TRY(pop(m, &a));
        m->out->root = a;
        m->stopped = true;
        return RECALL_OK;
    }
}

/* MARK, POP, POP_MARK, DUP. */
static recall_status op_stack(vm *m) {
    size_t first = 0;
    rc_pv *a;
    switch (m->op) {
    case '(': /* MARK */
        if (m->n_marks == m->marks_cap) {
            if (m->marks_cap >= MAX_MARKS) return vm_fail(m, RECALL_E_LIMIT, "MARKs nested deeper than %u", MAX_MARKS);
            size_t *nm = rc_grow(m->marks, m->n_marks, &m->marks_cap, sizeof *nm, 16);
            if (!nm) return vm_fail(m, RECALL_E_NOMEM, "out of memory (marks)");
            m->marks = nm;
        }
        m->marks[m->n_marks++] = m->sp;
        return RECALL_OK;
    case '0': /* POP (a MARK if the current frame is empty, as CPython) */
        if (m->sp > stack_base(m)) m->sp--;
        else RC_TRY(pop_mark(m, &first));
        return RECALL_OK;
    case '1': /* POP_MARK */
        RC_TRY(pop_mark(m, &first));
        m->sp = first;
        return RECALL_OK;
    default: /* '2' DUP */
        RC_TRY(top(m, &a));
        return push(m, a);
    }
}

static recall_status push_bool(vm *m, bool b) {
    rc_pv *a = new_value(m, RC_PV_BOOL, 0);
    if (a) a->u.b = b;
    return push(m, a);
}
static recall_status push_float(vm *m, double d) {
    rc_pv *a = new_value(m, RC_PV_FLOAT, 0);
    if (a) a->u.f = d;
    return push(m, a);
}

/* INT and LONG in text ("01" / "00" after INT are True / False; LONG may end in L). */
static recall_status op_int_text(vm *m) {
    const char *line;
    size_t ln;
    int64_t v;
    RC_TRY(read_line(m, &line, &ln));
    if (m->op == 'L' && ln && line[ln - 1] == 'L') ln--;
    if (m->op == 'I' && ln == 2 && line[0] == '0' && (line[1] == '0' || line[1] == '1'))
        return push_bool(m, line[1] == '1');
    if (!parse_dec(line, ln, &v)) return vm_fail(m, RECALL_E_FORMAT, "bad or out-of-range integer text");
    return push(m, new_int(m, v));
}

/* None, the booleans, the integers and the floats. */
static recall_status op_scalar(vm *m) {
    uint64_t x;
    switch (m->op) {
    case 'N': return push(m, new_value(m, RC_PV_NONE, 0));
    case 0x88: return push_bool(m, true);  /* NEWTRUE */
    case 0x89: return push_bool(m, false); /* NEWFALSE */
    case 'J': /* BININT */
        RC_TRY(read_uint(m, 4, &x));
        return push(m, new_int(m, (int64_t)(int32_t)(uint32_t)x));
    case 'K': RC_TRY(read_uint(m, 1, &x)); return push(m, new_int(m, (int64_t)x)); /* BININT1 */
    case 'M': RC_TRY(read_uint(m, 2, &x)); return push(m, new_int(m, (int64_t)x)); /* BININT2 */
    case 0x8a: /* LONG1 */
        RC_TRY(read_uint(m, 1, &x));
        return op_long(m, (size_t)x);
    case 0x8b: /* LONG4 */
        RC_TRY(read_uint(m, 4, &x));
        if (x & 0x80000000u) return vm_fail(m, RECALL_E_FORMAT, "negative LONG4 length");
        return op_long(m, (size_t)x);
    case 'I':
    case 'L': return op_int_text(m);
    case 'F': { /* FLOAT (text) */
        const char *line;
        size_t ln;
        char buf[MAX_LINE + 1], *end;
        RC_TRY(read_line(m, &line, &ln));
        memcpy(buf, line, ln);
        buf[ln] = 0;
        double d = strtod(buf, &end);
        if (ln == 0 || *end) return vm_fail(m, RECALL_E_FORMAT, "bad float text");
        return push_float(m, d);
    }
    default: { /* 'G' BINFLOAT: big-endian IEEE double */
        RC_TRY(need(m, 8));
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | m->p[m->pos + (size_t)i];
        m->pos += 8;
        double d;
        memcpy(&d, &bits, sizeof d);
        return push_float(m, d);
    }
    }
}

/* The length-prefixed strings and bytes (the protocol-0 quoted ones are refused below). */
static recall_status op_bytes(vm *m) {
    switch (m->op) {
    case 'X': return op_string(m, RC_PV_STR, 4, false);    /* BINUNICODE */
    case 0x8c: return op_string(m, RC_PV_STR, 1, false);   /* SHORT_BINUNICODE */
    case 0x8d: return op_string(m, RC_PV_STR, 8, false);   /* BINUNICODE8 */
    case 'T': return op_string(m, RC_PV_STR, 4, true);     /* BINSTRING */
    case 'U': return op_string(m, RC_PV_STR, 1, false);    /* SHORT_BINSTRING */
    case 'B': return op_string(m, RC_PV_BYTES, 4, false);  /* BINBYTES */
    case 'C': return op_string(m, RC_PV_BYTES, 1, false);  /* SHORT_BINBYTES */
    default: return op_string(m, RC_PV_BYTES, 8, false);   /* BINBYTES8, BYTEARRAY8 */
    }
}

/* The empty containers, and tuples, lists, frozensets and dicts built from the stack. */
static recall_status op_container(vm *m) {
    size_t first = 0;
    rc_pv *a;
    switch (m->op) {
    case ']': return push(m, new_value(m, RC_PV_LIST, 0));  /* EMPTY_LIST */
    case ')': return push(m, new_value(m, RC_PV_TUPLE, 0)); /* EMPTY_TUPLE */
    case '}': return push(m, new_dict(m));                  /* EMPTY_DICT */
    case 0x8f: return push(m, new_value(m, RC_PV_LIST, 0)); /* EMPTY_SET */
    case 't':    /* TUPLE */
    case 'l':    /* LIST */
    case 0x91: { /* FROZENSET */
        RC_TRY(pop_mark(m, &first));
        RC_TRY(seq_from(m, m->op == 't' ? RC_PV_TUPLE : RC_PV_LIST, m->sp > first ? m->stack + first : NULL,
                         m->sp - first, &a));
        m->sp = first;
        return push(m, a);
    }
    case 'd': /* DICT from mark: k1 v1 k2 v2 ... */
        RC_TRY(pop_mark(m, &first));
        if ((m->sp - first) % 2) return vm_fail(m, RECALL_E_FORMAT, "odd number of items for DICT");
        a = new_dict(m);
        if (!a) return m->err ? m->err->code : RECALL_E_NOMEM;
        for (size_t i = first; i < m->sp; i += 2) RC_TRY(dict_set(m, a, m->stack[i], m->stack[i + 1]));
        m->sp = first;
        return push(m, a);
    default: { /* TUPLE1..3 */
        size_t n = (size_t)(m->op - 0x84);
        if (m->sp - stack_base(m) < n) return vm_fail(m, RECALL_E_FORMAT, "stack underflow");
        RC_TRY(seq_from(m, RC_PV_TUPLE, m->stack + m->sp - n, n, &a));
        m->sp -= n;
        return push(m, a);
    }
    }
}

/* SETITEM, SETITEMS, APPEND, APPENDS, ADDITEMS (sets are kept as lists): filling a container. */
static recall_status op_fill(vm *m) {
    size_t first = 0;
    rc_pv *b, *c;
    switch (m->op) {
    case 's': /* SETITEM */
        RC_TRY(pop(m, &b));
        rc_pv *a;
        RC_TRY(pop(m, &a));
        RC_TRY(top(m, &c));
        if (c->kind != RC_PV_DICT) return vm_fail(m, RECALL_E_FORMAT, "SETITEM on a %s", rc_pv_kind_name(c->kind));
        return dict_set(m, c, a, b);
    case 'u': /* SETITEMS */
        RC_TRY(pop_mark(m, &first));
        if (first <= stack_base(m)) return vm_fail(m, RECALL_E_FORMAT, "SETITEMS without a target");
        c = m->stack[first - 1];
        if (c->kind != RC_PV_DICT) return vm_fail(m, RECALL_E_FORMAT, "SETITEMS on a %s", rc_pv_kind_name(c->kind));
        if ((m->sp - first) % 2) return vm_fail(m, RECALL_E_FORMAT, "odd number of items for SETITEMS");
        for (size_t i = first; i < m->sp; i += 2) RC_TRY(dict_set(m, c, m->stack[i], m->stack[i + 1]));
        m->sp = first;
        return RECALL_OK;
    case 'a': /* APPEND */
        RC_TRY(pop(m, &b));
        RC_TRY(top(m, &c));
        if (c->kind != RC_PV_LIST) return vm_fail(m, RECALL_E_FORMAT, "APPEND on a %s", rc_pv_kind_name(c->kind));
        RC_TRY(seq_reserve(m, c, 1));
        c->u.seq.items[c->u.seq.n++] = b;
        return RECALL_OK;
    default: { /* 'e' APPENDS, 0x90 ADDITEMS */
        RC_TRY(pop_mark(m, &first));
        if (first <= stack_base(m)) return vm_fail(m, RECALL_E_FORMAT, "APPENDS without a target");
        c = m->stack[first - 1];
        if (c->kind != RC_PV_LIST) return vm_fail(m, RECALL_E_FORMAT, "APPENDS on a %s", rc_pv_kind_name(c->kind));
        size_t n = m->sp - first;
        RC_TRY(seq_reserve(m, c, n));
        if (n) memcpy(c->u.seq.items + c->u.seq.n, m->stack + first, n * sizeof *m->stack);
        c->u.seq.n += n;
        m->sp = first;
        return RECALL_OK;
    }
    }
}

/* GET / PUT and their binary forms, MEMOIZE. */
static recall_status op_memo(vm *m) {
    uint64_t x;
    switch (m->op) {
    case 'g':   /* GET (text) */
    case 'p': { /* PUT (text) */
        const char *line;
        size_t ln;
        int64_t v;
        RC_TRY(read_line(m, &line, &ln));
        if (!parse_dec(line, ln, &v) || v < 0)
            return vm_fail(m, RECALL_E_FORMAT, m->op == 'g' ? "bad GET index" : "bad PUT index");
        return m->op == 'g' ? memo_get(m, (uint64_t)v) : memo_put(m, (uint64_t)v);
    }
    case 'h': RC_TRY(read_uint(m, 1, &x)); return memo_get(m, x); /* BINGET */
    case 'j': RC_TRY(read_uint(m, 4, &x)); return memo_get(m, x); /* LONG_BINGET */
    case 'q': RC_TRY(read_uint(m, 1, &x)); return memo_put(m, x); /* BINPUT */
    case 'r': RC_TRY(read_uint(m, 4, &x)); return memo_put(m, x); /* LONG_BINPUT */
    default: return memo_put(m, m->memo_count);                   /* MEMOIZE */
    }
}

/* NEWOBJ / NEWOBJ_EX: only argparse.Namespace(), built as a dict that BUILD fills. */
static recall_status op_newobj(vm *m) {
    rc_pv *kw = NULL, *a, *b, *c;
    char gn[96];
    if (m->op == 0x92) RC_TRY(pop(m, &kw));
    RC_TRY(pop(m, &b));
    RC_TRY(pop(m, &a));
    if (a->kind != RC_PV_GLOBAL) return vm_fail(m, RECALL_E_SECURITY, "NEWOBJ on a %s", rc_pv_kind_name(a->kind));
    if (a->u.global.id != G_NAMESPACE)
        return vm_fail(m, RECALL_E_SECURITY, "NEWOBJ on %s refused", global_name(a, gn, sizeof gn));
    if (b->kind != RC_PV_TUPLE || b->u.seq.n || (kw && (kw->kind != RC_PV_DICT || kw->u.dict.n)))
        return vm_fail(m, RECALL_E_FORMAT, "argparse.Namespace constructed with arguments");
    c = new_dict(m);
    if (!c) return m->err ? m->err->code : RECALL_E_NOMEM;
    c->u.dict.is_namespace = true;
    return push(m, c);
}

/* GLOBAL, STACK_GLOBAL (allowlisted names only), REDUCE, BUILD, BINPERSID: objects as data. */
static recall_status op_object(vm *m) {
    rc_pv *a, *b, *c;
    switch (m->op) {
    case 'c': { /* GLOBAL "module\nname\n" */
        const char *line, *line2;
        size_t ln, ln2;
        RC_TRY(read_line(m, &line, &ln));
        RC_TRY(read_line(m, &line2, &ln2));
        return do_global(m, line, ln, line2, ln2);
    }
    case 0x93: /* STACK_GLOBAL: module, name from the stack */
        RC_TRY(pop(m, &b));
        RC_TRY(pop(m, &a));
        if (a->kind != RC_PV_STR || b->kind != RC_PV_STR)
            return vm_fail(m, RECALL_E_FORMAT, "STACK_GLOBAL operands are not strs");
        return do_global(m, a->u.str.s, a->u.str.len, b->u.str.s, b->u.str.len);
    case 'R': /* REDUCE */
        RC_TRY(pop(m, &b));
        RC_TRY(pop(m, &a));
        RC_TRY(reduce_call(m, a, b, &c));
        return push(m, c);
    case 'b': /* BUILD: setstate on the object below */
        RC_TRY(pop(m, &b));
        RC_TRY(top(m, &a));
        return op_build(m, a, b);
    default: /* 'Q' BINPERSID */
        RC_TRY(pop(m, &a));
        RC_TRY(persistent_load(m, a, &c));
        return push(m, c);
    }
}

/* Opcodes that are never run: the ones that could execute code or name arbitrary globals, the
 * forms torch never writes, and bytes that are no opcode. */
static recall_status op_refused(vm *m) {
    switch (m->op) {
    case 'S':
    case 'V': return vm_fail(m, RECALL_E_UNSUPPORTED, "protocol-0 quoted string opcode");
    case 'P': return vm_fail(m, RECALL_E_UNSUPPORTED, "text PERSID opcode");
    case 'i': case 'o': /* INST, OBJ: arbitrary class instantiation */
        return vm_fail(m, RECALL_E_SECURITY, "INST/OBJ opcode refused (instantiates arbitrary classes)");
    case 0x82: case 0x83: case 0x84: /* EXT1/2/4: copyreg extension registry */
        return vm_fail(m, RECALL_E_SECURITY, "EXT opcode refused (names a global through the copyreg registry)");
    case 0x97: case 0x98: /* NEXT_BUFFER, READONLY_BUFFER */
        return vm_fail(m, RECALL_E_UNSUPPORTED, "out-of-band buffer opcode");
    default: return vm_fail(m, RECALL_E_FORMAT, "unknown opcode");
    }
}

/* The dispatch table: every opcode this VM runs and its group, in one place to read against
 * pickletools' list; every other byte is refused. */
typedef recall_status (*op_fn)(vm *m);
static const op_fn k_ops[256] = {
    [0x80] = op_control, [0x95] = op_control, ['.'] = op_control,
    ['('] = op_stack, ['0'] = op_stack, ['1'] = op_stack, ['2'] = op_stack,
    ['N'] = op_scalar, [0x88] = op_scalar, [0x89] = op_scalar, ['J'] = op_scalar, ['K'] = op_scalar,
    ['M'] = op_scalar, [0x8a] = op_scalar, [0x8b] = op_scalar, ['I'] = op_scalar, ['L'] = op_scalar,
    ['F'] = op_scalar, ['G'] = op_scalar,
    ['X'] = op_bytes, [0x8c] = op_bytes, [0x8d] = op_bytes, ['T'] = op_bytes, ['U'] = op_bytes,
    ['B'] = op_bytes, ['C'] = op_bytes, [0x8e] = op_bytes, [0x96] = op_bytes,
    [']'] = op_container, [')'] = op_container, ['}'] = op_container, [0x8f] = op_container,
    ['t'] = op_container, ['l'] = op_container, [0x91] = op_container, ['d'] = op_container,
    [0x85] = op_container, [0x86] = op_container, [0x87] = op_container,
    ['s'] = op_fill, ['u'] = op_fill, ['a'] = op_fill, ['e'] = op_fill, [0x90] = op_fill,
    ['g'] = op_memo, ['h'] = op_memo, ['j'] = op_memo, ['p'] = op_memo, ['q'] = op_memo,
    ['r'] = op_memo, [0x94] = op_memo,
    ['c'] = op_object, [0x93] = op_object, ['R'] = op_object, ['b'] = op_object, ['Q'] = op_object,
    [0x81] = op_newobj, [0x92] = op_newobj,
};

static recall_status run(vm *m) {
    while (!m->stopped) {
        if (m->pos >= m->len) {
            m->op = 0;
            m->op_pos = m->pos;
            return vm_fail(m, RECALL_E_FORMAT, "truncated: end of data before STOP");
        }
        m->op_pos = m->pos;
        m->op = m->p[m->pos++];
        RC_TRY((k_ops[m->op] ? k_ops[m->op] : op_refused)(m));
    }
    return RECALL_OK;
}

recall_status rc_pickle_load(const uint8_t *pkl, size_t len, const char *what,
                             rc_pickle_storage_fn storage_fn, void *ctx, rc_pickle **out,
                             recall_err *err) {
    if (!out || (!pkl && len)) return rc_fail(err, RECALL_E_ARG, "rc_pickle_load: NULL argument");
    *out = NULL;
    rc_pickle *p = calloc(1, sizeof *p);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what ? what : "pickle");
    recall_err local = {0};
    vm m = {0};
    m.p = pkl;
    m.len = len;
    m.what = what ? what : "pickle";
    m.out = p;
    m.storage_fn = storage_fn;
    m.ctx = ctx;
    m.err = err ? err : &local;
    recall_status s = run(&m);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    if (s != RECALL_OK) {
        rc_pickle_free(p);
        return s;
    }
    *out = p;
    return RECALL_OK;
}

const rc_pv *rc_pickle_root(const rc_pickle *p) { return p ? p->root : NULL; }

void rc_pickle_free(rc_pickle *p) {
    if (!p) return;
    for (rc_pv *v = p->values, *next; v; v = next) {
        next = v->next_alloc;
        if (v->kind == RC_PV_TUPLE || v->kind == RC_PV_LIST) free(v->u.seq.items);
        if (v->kind == RC_PV_DICT) {
            free(v->u.dict.keys);
            free(v->u.dict.vals);
            free(v->u.dict.index);
        }
        free(v);
    }
    free(p);
}

/* ---- navigation ------------------------------------------------------------------------------ */

rc_pv_kind rc_pv_kind_of(const rc_pv *v) { return v ? v->kind : (rc_pv_kind)0; }

/* The index of the str key in dict's items, or SIZE_MAX. */
static size_t dict_index(const rc_pv *dict, const char *key) {
    rc_pv k;
    memset(&k, 0, sizeof k);
    k.kind = RC_PV_STR;
    k.u.str.s = key;
    k.u.str.len = strlen(key);
    return dict_lookup(dict, &k);
}

const rc_pv *rc_pv_dict_get(const rc_pv *dict, const char *key) {
    if (!dict || dict->kind != RC_PV_DICT || !key) return NULL;
    size_t at = dict_index(dict, key);
    return at == SIZE_MAX ? NULL : dict->u.dict.vals[at];
}

size_t rc_pv_len(const rc_pv *v) {
    if (!v) return 0;
    if (v->kind == RC_PV_DICT) return v->u.dict.n;
    if (v->kind == RC_PV_TUPLE || v->kind == RC_PV_LIST) return v->u.seq.n;
    return 0;
}

const rc_pv *rc_pv_dict_key_at(const rc_pv *d, size_t i) {
    return d && d->kind == RC_PV_DICT && i < d->u.dict.n ? d->u.dict.keys[i] : NULL;
}

const rc_pv *rc_pv_dict_value_at(const rc_pv *d, size_t i) {
    return d && d->kind == RC_PV_DICT && i < d->u.dict.n ? d->u.dict.vals[i] : NULL;
}

const rc_pv *rc_pv_item_at(const rc_pv *s, size_t i) {
    return s && (s->kind == RC_PV_TUPLE || s->kind == RC_PV_LIST) && i < s->u.seq.n ? s->u.seq.items[i] : NULL;
}

bool rc_pv_as_int(const rc_pv *v, int64_t *out) {
    if (!v || !is_int(v)) return false;
    *out = int_of(v);
    return true;
}

bool rc_pv_as_ndarray(const rc_pv *v, rc_np_array *out) {
    if (!v || !out || (v->kind != RC_PV_NDARRAY && v->kind != RC_PV_NP_SCALAR)) return false;
    memset(out, 0, sizeof *out);
    out->kind = v->u.nd.kind;
    out->byteorder = v->u.nd.order;
    out->itemsize = v->u.nd.itemsize;
    out->ndim = v->u.nd.ndim;
    for (int d = 0; d < out->ndim; d++) out->shape[d] = v->u.nd.shape[d];
    out->numel = v->u.nd.numel;
    out->fortran = v->u.nd.fortran;
    out->data = v->u.nd.data;
    out->nbytes = v->u.nd.nbytes;
    out->items = v->u.nd.items;
    return true;
}

bool rc_pv_as_float(const rc_pv *v, double *out) {
    if (!v) return false;
    if (v->kind == RC_PV_FLOAT) *out = v->u.f;
    else if (is_int(v)) *out = (double)int_of(v);
    else return false;
    return true;
}

const char *rc_pv_as_str(const rc_pv *v, size_t *len) {
    if (!v || (v->kind != RC_PV_STR && v->kind != RC_PV_BYTES)) return NULL;
    if (len) *len = v->u.str.len;
    return v->u.str.s;
}

recall_status rc_pv_path_int(const rc_pv *root, const char *const *path, int64_t *out, recall_err *err) {
    if (!path || !path[0] || !out) return rc_fail(err, RECALL_E_ARG, "rc_pv_path_int: empty path");
    char shown[256] = "";
    size_t o = 0;
    for (size_t i = 0; path[i] && o < sizeof shown - 1; i++)
        o += (size_t)snprintf(shown + o, sizeof shown - o, "%s%s", i ? "." : "", path[i]);
    if (o >= sizeof shown) o = sizeof shown - 1;
    const rc_pv *v = root;
    for (size_t i = 0; path[i]; i++) {
        if (!v || v->kind != RC_PV_DICT)
            return rc_fail(err, RECALL_E_FORMAT, "'%s': the parent of '%s' is a %s, not a dict", shown,
                           path[i], v ? rc_pv_kind_name(v->kind) : "nothing");
        const rc_pv *next = rc_pv_dict_get(v, path[i]);
        if (!next) return rc_fail(err, RECALL_E_MISSING, "'%s': key '%s' absent", shown, path[i]);
        v = next;
    }
    if (!rc_pv_as_int(v, out))
        return rc_fail(err, RECALL_E_FORMAT, "'%s' is a %s, not an int", shown, rc_pv_kind_name(v->kind));
    return RECALL_OK;
}

static recall_status tensor_view(const rc_pv *v, const char *name, rc_torch_tensor *t, recall_err *err) {
    if (!v || v->kind != RC_PV_TENSOR)
        return rc_fail(err, RECALL_E_FORMAT, "'%s' is a %s, not a tensor", name,
                       v ? rc_pv_kind_name(v->kind) : "nothing");
    memset(t, 0, sizeof *t);
    t->name = name;
    t->dtype = v->u.tensor.dtype;
    t->blob_dtype = pt_blob_dtype(v->u.tensor.dtype);
    t->ndim = v->u.tensor.ndim;
    for (int d = 0; d < t->ndim; d++) t->shape[d] = v->u.tensor.shape[d];
    t->numel = v->u.tensor.numel;
    t->nbytes = (size_t)(t->numel * rc_pt_dtype_size(t->dtype)); /* <= storage bytes: checked */
    t->data = v->u.tensor.data;
    return RECALL_OK;
}

recall_status rc_torch_tensor_of(const rc_pv *v, rc_torch_tensor *t, recall_err *err) {
    if (!t) return rc_fail(err, RECALL_E_ARG, "rc_torch_tensor_of: NULL output");
    return tensor_view(v, "", t, err);
}

recall_status rc_torch_dict_tensor(const rc_pv *dict, size_t i, rc_torch_tensor *t, recall_err *err) {
    if (!t) return rc_fail(err, RECALL_E_ARG, "rc_torch_dict_tensor: NULL output");
    if (!dict || dict->kind != RC_PV_DICT) return rc_fail(err, RECALL_E_FORMAT, "state dict is not a dict");
    if (i >= dict->u.dict.n) return rc_fail(err, RECALL_E_ARG, "entry %zu of a %zu-entry dict", i, dict->u.dict.n);
    const rc_pv *k = dict->u.dict.keys[i];
    if (k->kind != RC_PV_STR || strlen(k->u.str.s) != k->u.str.len)
        return rc_fail(err, RECALL_E_FORMAT, "state dict key %zu is a %s, not a plain str", i, rc_pv_kind_name(k->kind));
    return tensor_view(dict->u.dict.vals[i], k->u.str.s, t, err);
}

recall_status rc_torch_find_tensor(const rc_pv *dict, const char *name, rc_torch_tensor *t, recall_err *err) {
    if (!t || !name) return rc_fail(err, RECALL_E_ARG, "rc_torch_find_tensor: NULL argument");
    if (!dict || dict->kind != RC_PV_DICT) return rc_fail(err, RECALL_E_FORMAT, "state dict is not a dict");
    size_t at = dict_index(dict, name);
    if (at == SIZE_MAX) return rc_fail(err, RECALL_E_MISSING, "tensor '%s' absent", name);
    return tensor_view(dict->u.dict.vals[at], dict->u.dict.keys[at]->u.str.s, t, err);
}

/* IEEE binary16 -> binary32, exact for every input (subnormals normalised, NaN payload kept). */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (!man) {
        bits = sign;
    } else {
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

recall_status rc_torch_tensor_f32(const rc_torch_tensor *t, float **out, recall_err *err) {
    if (!t || !out) return rc_fail(err, RECALL_E_ARG, "rc_torch_tensor_f32: NULL argument");
    *out = NULL;
    if (t->dtype != RC_PT_F32 && t->dtype != RC_PT_F16 && t->dtype != RC_PT_BF16 && t->dtype != RC_PT_F64)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "tensor '%s' is %s, not a float type", t->name ? t->name : "",
                       rc_pt_dtype_name(t->dtype));
    if (t->numel > SIZE_MAX / sizeof(float)) return rc_fail(err, RECALL_E_LIMIT, "tensor too large");
    size_t n = (size_t)t->numel;
    float *f = malloc(n ? n * sizeof *f : sizeof *f);
    if (!f) return rc_fail(err, RECALL_E_NOMEM, "out of memory converting '%s'", t->name ? t->name : "");
    const uint8_t *p = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case RC_PT_F32: {
            uint32_t b = (uint32_t)rd_le(p + 4 * i, 4);
            memcpy(&f[i], &b, 4);
            break;
        }
        case RC_PT_BF16: {
            uint32_t b = (uint32_t)rd_le(p + 2 * i, 2) << 16;
            memcpy(&f[i], &b, 4);
            break;
        }
        case RC_PT_F16: f[i] = f16_to_f32((uint16_t)rd_le(p + 2 * i, 2)); break;
        default: {
            uint64_t b = rd_le(p + 8 * i, 8);
            double d;
            memcpy(&d, &b, 8);
            f[i] = (float)d;
            break;
        }
        }
    }
    *out = f;
    return RECALL_OK;
}

/* ---- torch .pt (zip) ------------------------------------------------------------------------- */

typedef struct {
    char *key;
    uint8_t *data;
    size_t len;
} pt_storage;

struct rc_torch_file {
    rc_pickle *pkl;
    pt_storage *st;
    size_t n_st, cap_st;
};

typedef struct {
    const rc_zip *z;
    rc_torch_file *f;
    const char *prefix;
    size_t prefix_len;
    const char *what;
} pt_ctx;

/* Storage keys are small decimal strings in practice; anything path-like is refused. */
static bool key_ok(const char *k) {
    for (; *k; k++)
        if (!((*k >= '0' && *k <= '9') || (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || *k == '_'))
            return false;
    return true;
}

static recall_status pt_storage_fn(void *vctx, const char *key, rc_pt_dtype dtype, uint64_t numel,
                                   const uint8_t **data, size_t *len, recall_err *err) {
    pt_ctx *ctx = vctx;
    rc_torch_file *f = ctx->f;
    (void)dtype;
    (void)numel;
    if (!key_ok(key)) {
        char pk[96];
        printable(pk, sizeof pk, key, strlen(key));
        return rc_fail(err, RECALL_E_FORMAT, "%s: storage key '%s' is not alphanumeric", ctx->what, pk);
    }
    for (size_t i = 0; i < f->n_st; i++) /* tensors sharing a storage extract it once */
        if (strcmp(f->st[i].key, key) == 0) {
            *data = f->st[i].data;
            *len = f->st[i].len;
            return RECALL_OK;
        }
    if (f->n_st >= MAX_STORAGES) return rc_fail(err, RECALL_E_LIMIT, "%s: more than %u storages", ctx->what, MAX_STORAGES);
    char member[192];
    snprintf(member, sizeof member, "%.*s/data/%s", (int)ctx->prefix_len, ctx->prefix, key);
    const rc_zip_entry *e = rc_zip_find(ctx->z, member);
    if (!e)
        return rc_fail(err, RECALL_E_MISSING, "%s: storage member '%s' (tensor storage key '%s') not found",
                       ctx->what, member, key);
    if (f->n_st == f->cap_st) {
        size_t nc = f->cap_st ? f->cap_st * 2 : 16;
        pt_storage *ns = realloc(f->st, nc * sizeof *ns);
        if (!ns) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", ctx->what);
        f->st = ns;
        f->cap_st = nc;
    }
    pt_storage *s = &f->st[f->n_st];
    memset(s, 0, sizeof *s);
    s->key = malloc(strlen(key) + 1);
    if (!s->key) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", ctx->what);
    strcpy(s->key, key);
    recall_status st = rc_zip_read(ctx->z, e, &s->data, &s->len, err);
    if (st != RECALL_OK) {
        free(s->key);
        return st;
    }
    f->n_st++;
    *data = s->data;
    *len = s->len;
    return RECALL_OK;
}

void rc_torch_free(rc_torch_file *f) {
    if (!f) return;
    rc_pickle_free(f->pkl);
    for (size_t i = 0; i < f->n_st; i++) {
        free(f->st[i].key);
        free(f->st[i].data);
    }
    free(f->st);
    free(f);
}

const rc_pv *rc_torch_root(const rc_torch_file *f) { return f ? rc_pickle_root(f->pkl) : NULL; }

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* byteorder holds "little" (or "big" from a big-endian writer); absent means little. */
static recall_status check_byteorder(const rc_zip *z, const char *prefix, size_t plen, const char *what,
                                     recall_err *err) {
    char member[192];
    snprintf(member, sizeof member, "%.*s/byteorder", (int)plen, prefix);
    const rc_zip_entry *e = rc_zip_find(z, member);
    if (!e) return RECALL_OK;
    if (e->size > 16) return rc_fail(err, RECALL_E_FORMAT, "%s: '%s' is %llu bytes", what, member, (unsigned long long)e->size);
    uint8_t *b = NULL;
    size_t n = 0;
    RC_TRY(rc_zip_read(z, e, &b, &n, err));
    recall_status s = RECALL_OK;
    if (n == 3 && memcmp(b, "big", 3) == 0)
        s = rc_fail(err, RECALL_E_VERSION, "%s: '%s' says big-endian storages; only little-endian is supported",
                    what, member);
    else if (!(n == 6 && memcmp(b, "little", 6) == 0))
        s = rc_fail(err, RECALL_E_FORMAT, "%s: '%s' is neither 'little' nor 'big'", what, member);
    free(b);
    return s;
}

recall_status rc_torch_load(const void *buf, size_t len, const char *what, rc_torch_file **out,
                            recall_err *err) {
    if (!out || (!buf && len)) return rc_fail(err, RECALL_E_ARG, "rc_torch_load: NULL argument");
    *out = NULL;
    if (!what) what = ".pt";
    const uint16_t probe = 1;
    uint8_t first_byte;
    memcpy(&first_byte, &probe, 1);
    if (first_byte != 1) /* storages are raw little-endian bytes handed out as-is */
        return rc_fail(err, RECALL_E_VERSION, "%s: torch checkpoints need a little-endian host", what);
    const uint8_t *b = buf;
    if (len >= 2 && b[0] == 0x80 && b[1] <= 5)
        return rc_fail(err, RECALL_E_UNSUPPORTED,
                       "%s: legacy (pre-1.6, non-zip) torch.save format; re-save it with torch >= 1.6", what);
    rc_zip z;
    RC_TRY(rc_zip_open(&z, buf, len, what, err));
    recall_status s = RECALL_OK;
    rc_torch_file *f = NULL;
    uint8_t *pkl = NULL;
    size_t pkl_len = 0;
    const rc_zip_entry *pe = NULL;
    for (size_t i = 0; i < z.n; i++) { /* "<prefix>/data.pkl" with a one-level prefix */
        const char *name = z.entries[i].name, *slash = strchr(name, '/');
        if (!slash || slash == name || strcmp(slash + 1, "data.pkl") != 0 || !ends_with(name, "/data.pkl")) continue;
        if (pe) {
            s = rc_fail(err, RECALL_E_FORMAT, "%s: two pickles ('%s' and '%s')", what, pe->name, name);
            goto done;
        }
        pe = &z.entries[i];
    }
    if (!pe) {
        s = rc_fail(err, RECALL_E_FORMAT, "%s: no '<prefix>/data.pkl' member: not a torch.save zip", what);
        goto done;
    }
    size_t plen = (size_t)(strchr(pe->name, '/') - pe->name);
    if (plen > 100) {
        s = rc_fail(err, RECALL_E_FORMAT, "%s: archive prefix longer than 100 bytes", what);
        goto done;
    }
    s = check_byteorder(&z, pe->name, plen, what, err);
    if (s != RECALL_OK) goto done;
    s = rc_zip_read(&z, pe, &pkl, &pkl_len, err);
    if (s != RECALL_OK) goto done;
    f = calloc(1, sizeof *f);
    if (!f) {
        s = rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
        goto done;
    }
    char pkl_what[384];
    snprintf(pkl_what, sizeof pkl_what, "%s:%s", what, pe->name);
    pt_ctx ctx = {&z, f, pe->name, plen, what};
    s = rc_pickle_load(pkl, pkl_len, pkl_what, pt_storage_fn, &ctx, &f->pkl, err);
done:
    free(pkl);
    rc_zip_close(&z);
    if (s != RECALL_OK) {
        rc_torch_free(f);
        return s;
    }
    *out = f;
    return RECALL_OK;
}
