/* test_pickle.c - the restricted unpickler (src/formats/pickle.h) on real and hostile .pt files.
 *
 * Fixtures: tests/golden/worldA/pooler.pt (the reference's own torch.save output) checked bitwise
 * against tests/golden/pickle/pooler_expect.txt (per-tensor XXH64 of worldA/pooler.safetensors);
 * the .pt files in tests/golden/pickle/ made by tools/make_bad_pickles.py (tiny valid files and one refusal
 * per file) and by tools/make_numpy_pickles.py (Debian's torch: numpy values in args, optimizer and
 * RNG state beside the pooler weights, numpy 2 names, numpy-flavoured refusals).
 */
#include <criterion/criterion.h>

#include "blob.h"
#include "checksum.h"
#include "fixture.h"
#include "convert.h"
#include "pickle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rc_torch_file *load_ok(const char *path) {
    size_t len;
    uint8_t *buf = (uint8_t *)fixture_read(path, &len);
    recall_err err = {0};
    rc_torch_file *f = NULL;
    recall_status s = rc_torch_load(buf, len, path, &f, &err);
    free(buf); /* the loaded file must not depend on the input buffer */
    cr_assert_eq(s, RECALL_OK, "%s: %s", path, err.msg);
    cr_assert_not_null(f);
    return f;
}

static recall_err load_fail(const char *path, recall_status expect) {
    size_t len;
    uint8_t *buf = (uint8_t *)fixture_read(path, &len);
    recall_err err = {0};
    rc_torch_file *f = NULL;
    recall_status s = rc_torch_load(buf, len, path, &f, &err);
    free(buf);
    cr_assert_eq(s, expect, "%s: got %d (%s), expected %d", path, s, err.msg, expect);
    cr_assert_eq(err.code, expect);
    cr_assert_null(f);
    return err;
}

static uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* ---- the golden pooler checkpoint ------------------------------------------------------------- */

Test(pickle_pooler, structure_and_args) {
    rc_torch_file *f = load_ok("tests/golden/worldA/pooler.pt");
    const rc_pv *root = rc_torch_root(f);
    cr_assert_eq(rc_pv_kind_of(root), RC_PV_DICT);
    cr_assert_eq(rc_pv_len(root), 2);
    cr_assert_str_eq(rc_pv_as_str(rc_pv_dict_key_at(root, 0), NULL), "pooler");
    cr_assert_str_eq(rc_pv_as_str(rc_pv_dict_key_at(root, 1), NULL), "args");

    const rc_pv *sd = rc_pv_dict_get(root, "pooler");
    cr_assert_eq(rc_pv_len(sd), 64);
    recall_err err = {0};
    rc_torch_tensor t;
    /* state-dict order is module order: query, out_scale, then the blocks */
    cr_assert_eq(rc_torch_dict_tensor(sd, 0, &t, &err), RECALL_OK, "%s", err.msg);
    cr_assert_str_eq(t.name, "query");
    cr_assert_eq(t.dtype, RC_PT_F32);
    cr_assert_eq(t.blob_dtype, RC_DT_F32);
    cr_assert_eq(t.ndim, 2);
    cr_assert_eq(t.shape[0], 8);
    cr_assert_eq(t.shape[1], 64);
    cr_assert_eq(t.nbytes, 8 * 64 * 4);
    cr_assert_eq(rc_torch_dict_tensor(sd, 1, &t, &err), RECALL_OK);
    cr_assert_str_eq(t.name, "out_scale");
    cr_assert_eq(t.ndim, 0);
    cr_assert_eq(t.numel, 1);
    float *v = NULL;
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert(v[0] < 0.0f, "out_scale is stored negative, got %g", (double)v[0]);
    free(v);
    cr_assert_eq(rc_torch_find_tensor(sd, "blocks.0.cross.in_proj_weight", &t, &err), RECALL_OK);
    cr_assert_eq(t.ndim, 2);
    cr_assert_eq(t.shape[0], 192);
    cr_assert_eq(t.shape[1], 64);
    cr_assert_eq(rc_torch_find_tensor(sd, "blocks.3.lnq1.weight", &t, &err), RECALL_E_MISSING);
    cr_assert(strstr(err.msg, "blocks.3.lnq1.weight"), "%s", err.msg);

    int64_t x = 0;
    err = (recall_err){0};
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"args", "heads", NULL}, &x, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(x, 4);
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"args", "n_sp", NULL}, &x, &err), RECALL_OK);
    cr_assert_eq(x, 8);
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"args", "ffn", NULL}, &x, &err), RECALL_OK);
    cr_assert_eq(x, 96);
    cr_assert_eq(rc_pv_len(rc_pv_dict_get(root, "args")), 3);
    /* absent is distinct from malformed */
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"src_args", "heads", NULL}, &x, &err), RECALL_E_MISSING);
    cr_assert(strstr(err.msg, "src_args"), "%s", err.msg);
    err = (recall_err){0};
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"pooler", "query", NULL}, &x, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "tensor"), "%s", err.msg);
    rc_torch_free(f);
}

/* Every tensor's bytes against the safetensors copy of the same state dict. */
Test(pickle_pooler, bitwise_vs_safetensors) {
    rc_torch_file *f = load_ok("tests/golden/worldA/pooler.pt");
    const rc_pv *sd = rc_pv_dict_get(rc_torch_root(f), "pooler");
    FILE *ex = fopen("tests/golden/pickle/pooler_expect.txt", "r");
    cr_assert(ex);
    char line[512];
    size_t checked = 0;
    while (fgets(line, sizeof line, ex)) {
        if (line[0] == '#') continue;
        char name[128], dt[16];
        int nd, off = 0, used = 0;
        cr_assert_eq(sscanf(line, "%127s %15s %d%n", name, dt, &nd, &off), 3, "bad line %s", line);
        long long dims[RC_PT_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            cr_assert_eq(sscanf(line + off, "%lld%n", &dims[d], &used), 1);
            off += used;
        }
        unsigned long long nbytes, hash;
        cr_assert_eq(sscanf(line + off, "%llu %llx", &nbytes, &hash), 2);
        recall_err err = {0};
        rc_torch_tensor t;
        cr_assert_eq(rc_torch_find_tensor(sd, name, &t, &err), RECALL_OK, "%s: %s", name, err.msg);
        cr_assert_str_eq(dt, "F32");
        cr_assert_eq(t.dtype, RC_PT_F32, "%s", name);
        cr_assert_eq(t.ndim, nd, "%s", name);
        for (int d = 0; d < nd; d++) cr_assert_eq(t.shape[d], dims[d], "%s dim %d", name, d);
        cr_assert_eq(t.nbytes, nbytes, "%s", name);
        cr_assert_eq(rc_xxh64(t.data, t.nbytes, 0), hash, "%s: bytes differ", name);
        /* the f32 copy is the same bits */
        float *v = NULL;
        cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
        cr_assert_eq(rc_xxh64(v, t.nbytes, 0), hash, "%s: f32 copy differs", name);
        free(v);
        checked++;
    }
    fclose(ex);
    cr_assert_eq(checked, 64);
    rc_torch_free(f);
}

/* ---- tiny valid files: every dtype, protocols 2 and 4 ----------------------------------------- */

static void check_tiny(const char *path) {
    rc_torch_file *f = load_ok(path);
    const rc_pv *root = rc_torch_root(f);
    const rc_pv *m = rc_pv_dict_get(root, "model");
    cr_assert_eq(rc_pv_len(m), 9);
    recall_err err = {0};
    rc_torch_tensor t;
    float *v = NULL;

    cr_assert_eq(rc_torch_find_tensor(m, "w32", &t, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(t.ndim, 2);
    cr_assert_eq(t.shape[0], 2);
    cr_assert_eq(t.shape[1], 3);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    for (int i = 0; i < 6; i++) cr_assert_eq(v[i], 1.5f * (float)i);
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "h16", &t, &err), RECALL_OK);
    cr_assert_eq(t.dtype, RC_PT_F16);
    cr_assert_eq(t.blob_dtype, RC_DT_F16);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -2.0f);
    cr_assert_eq(v[2], 65504.0f);
    cr_assert_eq(f32_bits(v[3]), f32_bits(ldexpf(1.0f, -24))); /* smallest f16 subnormal */
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "b16", &t, &err), RECALL_OK);
    cr_assert_eq(t.dtype, RC_PT_BF16);
    cr_assert_eq(t.nbytes, 8);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -3.5f);
    cr_assert_eq(v[2], 0.15625f);
    cr_assert_eq(v[3], 256.0f);
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "f64", &t, &err), RECALL_OK);
    cr_assert_eq(t.dtype, RC_PT_F64);
    cr_assert_eq((int)t.blob_dtype, 0);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(f32_bits(v[0]), f32_bits((float)0.1));
    cr_assert_eq(v[1], 2.5f);
    cr_assert_eq(v[2], -7.0f);
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "i64", &t, &err), RECALL_OK);
    cr_assert_eq(t.dtype, RC_PT_I64);
    int64_t iv[2];
    memcpy(iv, t.data, sizeof iv);
    cr_assert_eq(iv[0], -1);
    cr_assert_eq(iv[1], (int64_t)1 << 40);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_E_UNSUPPORTED);
    cr_assert_null(v);
    err = (recall_err){0};

    cr_assert_eq(rc_torch_find_tensor(m, "scalar", &t, &err), RECALL_OK);
    cr_assert_eq(t.ndim, 0);
    cr_assert_eq(t.numel, 1);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], -1.25f);
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "view", &t, &err), RECALL_OK); /* offset 2 into w32's storage */
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], 3.0f);
    cr_assert_eq(v[1], 4.5f);
    free(v);

    cr_assert_eq(rc_torch_find_tensor(m, "empty", &t, &err), RECALL_OK);
    cr_assert_eq(t.ndim, 2);
    cr_assert_eq(t.shape[0], 0);
    cr_assert_eq(t.shape[1], 4);
    cr_assert_eq(t.numel, 0);
    cr_assert_eq(t.nbytes, 0);

    cr_assert_eq(rc_torch_find_tensor(m, "param", &t, &err), RECALL_OK); /* nn.Parameter unwrapped */
    cr_assert_eq(t.shape[0], 1);
    cr_assert_eq(t.shape[1], 2);
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], 0.5f);
    cr_assert_eq(v[1], -0.5f);
    free(v);

    /* args is an argparse.Namespace: read like a dict */
    int64_t x;
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"args", "heads", NULL}, &x, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(x, 8);
    const rc_pv *args = rc_pv_dict_get(root, "args");
    cr_assert_str_eq(rc_pv_as_str(rc_pv_dict_get(args, "name"), NULL), "tiny");
    double d;
    cr_assert(rc_pv_as_float(rc_pv_dict_get(args, "lr"), &d));
    cr_assert_eq(d, 0.5);

    const rc_pv *meta = rc_pv_dict_get(root, "meta");
    cr_assert_eq(rc_pv_kind_of(meta), RC_PV_LIST);
    cr_assert_eq(rc_pv_len(meta), 7);
    cr_assert(rc_pv_as_int(rc_pv_item_at(meta, 0), &x));
    cr_assert_eq(x, 1);
    cr_assert(rc_pv_as_float(rc_pv_item_at(meta, 1), &d));
    cr_assert_eq(d, 2.5);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(meta, 2)), RC_PV_NONE);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(meta, 3)), RC_PV_BOOL);
    size_t bl = 0;
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(meta, 4)), RC_PV_BYTES);
    cr_assert_str_eq(rc_pv_as_str(rc_pv_item_at(meta, 4), &bl), "xy");
    cr_assert_eq(bl, 2);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(meta, 5)), RC_PV_TUPLE);
    cr_assert_eq(rc_pv_path_int(rc_pv_item_at(meta, 6), (const char *const[]){"k", NULL}, &x, &err), RECALL_OK);
    cr_assert_eq(x, -3);
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"big", NULL}, &x, &err), RECALL_OK);
    cr_assert_eq(x, (int64_t)1 << 40);
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"neg", NULL}, &x, &err), RECALL_OK);
    cr_assert_eq(x, -5);
    /* a mixed dict is not a state dict: the non-tensor entry is named */
    cr_assert_eq(rc_torch_dict_tensor(root, 1, &t, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "'args'"), "%s", err.msg);
    rc_torch_free(f);
}

Test(pickle_tiny, protocol2) { check_tiny("tests/golden/pickle/tiny_p2.pt"); }
Test(pickle_tiny, protocol4) { check_tiny("tests/golden/pickle/tiny_p4.pt"); }

/* ---- refusals --------------------------------------------------------------------------------- */

Test(pickle_bad, os_system_protocol2) {
    recall_err e = load_fail("tests/golden/pickle/os_system_p2.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "os.system"), "%s", e.msg);
    cr_assert(strstr(e.msg, "at byte 2"), "%s", e.msg); /* right after PROTO */
    cr_assert(strstr(e.msg, "archive/data.pkl"), "%s", e.msg);
}

Test(pickle_bad, os_system_protocol4_stack_global) {
    recall_err e = load_fail("tests/golden/pickle/os_system_p4.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "os.system"), "%s", e.msg);
    cr_assert(strstr(e.msg, "at byte 25"), "%s", e.msg); /* the STACK_GLOBAL opcode */
}

Test(pickle_bad, builtins_eval_reduce) {
    recall_err e = load_fail("tests/golden/pickle/builtins_eval.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "builtins.eval"), "%s", e.msg);
}

Test(pickle_bad, eval_hidden_after_tensors) {
    recall_err e = load_fail("tests/golden/pickle/hidden_eval.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "__builtin__.eval"), "%s", e.msg); /* protocol 2 spelling */
    cr_assert(strstr(e.msg, "not allowlisted"), "%s", e.msg);
}

Test(pickle_bad, storage_offset_out_of_range) {
    recall_err e = load_fail("tests/golden/pickle/bad_offset.pt", RECALL_E_FORMAT);
    cr_assert(strstr(e.msg, "out of range of storage '0' (6 elements)"), "%s", e.msg);
}

Test(pickle_bad, noncontiguous) {
    recall_err e = load_fail("tests/golden/pickle/noncontig.pt", RECALL_E_UNSUPPORTED);
    cr_assert(strstr(e.msg, "non-contiguous"), "%s", e.msg);
}

Test(pickle_bad, truncated_pickle) {
    recall_err e = load_fail("tests/golden/pickle/truncated.pt", RECALL_E_FORMAT);
    cr_assert(strstr(e.msg, "truncated"), "%s", e.msg);
}

Test(pickle_bad, missing_storage_member) {
    recall_err e = load_fail("tests/golden/pickle/missing_storage.pt", RECALL_E_MISSING);
    cr_assert(strstr(e.msg, "archive/data/3"), "%s", e.msg);
}

Test(pickle_bad, storage_shorter_than_claimed) {
    recall_err e = load_fail("tests/golden/pickle/short_storage.pt", RECALL_E_FORMAT);
    cr_assert(strstr(e.msg, "claims 6 float32 elements but holds 8 bytes"), "%s", e.msg);
}

Test(pickle_bad, big_endian) {
    recall_err e = load_fail("tests/golden/pickle/big_endian.pt", RECALL_E_VERSION);
    cr_assert(strstr(e.msg, "big-endian"), "%s", e.msg);
    cr_assert(strstr(e.msg, "archive/byteorder"), "%s", e.msg);
}

/* ---- the raw VM on hand-written opcode streams ------------------------------------------------- */

static recall_status run_raw(const char *bytes, size_t len, recall_err *err, rc_pickle **out) {
    return rc_pickle_load((const uint8_t *)bytes, len, "raw", NULL, NULL, out, err);
}

#define RAW(s) s, sizeof(s) - 1

Test(pickle_vm, refusals) {
    static const struct {
        const char *p;
        size_t n;
        recall_status code;
        const char *msg;
    } cases[] = {
        {RAW("\x80\x02" "cposix\nsystem\n."), RECALL_E_SECURITY, "posix.system"},
        {RAW("\x80\x02" "csubprocess\nPopen\n."), RECALL_E_SECURITY, "subprocess.Popen"},
        {RAW("\x80\x02" "ctorch\nload\n."), RECALL_E_SECURITY, "torch.load"},
        {RAW("\x80\x02" "cos\x01\nsystem\n."), RECALL_E_SECURITY, "os\\x01.system"},
        {RAW("(cos\nsystem\nS'id'\ni."), RECALL_E_SECURITY, "os.system"},
        {RAW("\x80\x02" "ctorch\nFloatStorage\n)R."), RECALL_E_SECURITY, "may not be called"},
        {RAW("\x80\x02" "ccollections\nOrderedDict\n)\x81."), RECALL_E_SECURITY, "NEWOBJ"},
        {RAW("\x80\x02" "X\x01\x00\x00\x00" "a)R."), RECALL_E_SECURITY, "REDUCE on a str"},
        {RAW("(X\x01\x00\x00\x00" "ao."), RECALL_E_SECURITY, "INST/OBJ"},
        {RAW("\x80\x02\x82\x01."), RECALL_E_SECURITY, "EXT"},
        {RAW("\x80\x02" "ctorch\nBoolStorage\n."), RECALL_E_UNSUPPORTED, "BoolStorage"},
        {RAW("\x80\x06N."), RECALL_E_UNSUPPORTED, "protocol 6"},
        {RAW("\x80\x02N"), RECALL_E_FORMAT, "before STOP"},
        {RAW("\x80\x02X\xff\x00\x00\x00" "ab."), RECALL_E_FORMAT, "truncated"},
        {RAW("\x80\x02" "a."), RECALL_E_FORMAT, "underflow"},
        {RAW("\x80\x02(."), RECALL_E_FORMAT, "underflow"}, /* STOP may not pop across a MARK */
        {RAW("\x80\x02h\x05."), RECALL_E_FORMAT, "memo entry 5"},
        {RAW("\x80\x02Nr\x00\x00\x00\x40."), RECALL_E_LIMIT, "memo index"},
        {RAW("\x80\x02}]]s."), RECALL_E_UNSUPPORTED, "dict key of type list"},
        {RAW("\x80\x02(((((."), RECALL_E_FORMAT, "underflow"},
        {RAW("\x80\x02\xff."), RECALL_E_FORMAT, "unknown opcode"},
        {RAW("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09."), RECALL_E_UNSUPPORTED, "wider than int64"},
        {RAW("\x80\x02(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00" "0X\x03\x00\x00\x00" "cpuK\x01tQ."),
         RECALL_E_UNSUPPORTED, "no storage source"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        recall_err err = {0};
        rc_pickle *p = (rc_pickle *)1;
        recall_status s = run_raw(cases[i].p, cases[i].n, &err, &p);
        cr_assert_eq(s, cases[i].code, "case %zu: got %d: %s", i, s, err.msg);
        cr_assert_null(p, "case %zu", i);
        cr_assert(strstr(err.msg, cases[i].msg), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
    }
}

Test(pickle_vm, mark_nesting_is_bounded) {
    size_t n = 5000;
    char *b = malloc(n + 3);
    cr_assert(b);
    b[0] = '\x80';
    b[1] = 2;
    memset(b + 2, '(', n);
    b[n + 2] = '.';
    recall_err err = {0};
    rc_pickle *p = NULL;
    cr_assert_eq(run_raw(b, n + 3, &err, &p), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "MARKs nested deeper"), "%s", err.msg);
    free(b);
}

Test(pickle_vm, values_and_sharing) {
    /* protocol 0/1 text opcodes, memo sharing (a list that contains itself), SETITEM replacing a
     * key, bool keys equal to int keys, POP/DUP/POP_MARK, sets and frozensets */
    static const char b[] =
        "\x80\x02}q\x00("                       /* d = {}, MARK */
        "X\x01\x00\x00\x00" "a" "I42\n"           /* 'a': 42 (text INT) */
        "X\x01\x00\x00\x00" "b" "I01\n"           /* 'b': True (text INT 01) */
        "X\x01\x00\x00\x00" "c" "L-7L\n"          /* 'c': -7 (text LONG) */
        "X\x01\x00\x00\x00" "f" "F0.25\n"         /* 'f': 0.25 */
        "X\x01\x00\x00\x00g" "G\x3f\xf8\x00\x00\x00\x00\x00\x00" /* 'g': 1.5 BINFLOAT */
        "X\x01\x00\x00\x00l" "]q\x01h\x01" "a"    /* 'l': l = []; l.append(l) */
        "K\x01" "X\x03\x00\x00\x00one"         /* 1: 'one' */
        "\x88" "X\x03\x00\x00\x00two"          /* True: 'two' (replaces key 1) */
        "X\x01\x00\x00\x00n" "J\xfe\xff\xff\xff" /* 'n': -2 */
        "X\x01\x00\x00\x00m" "M\x34\x12"       /* 'm': 0x1234 */
        "X\x01\x00\x00\x00s" "\x8f(K\x01K\x02\x90" /* 's': {1, 2} */
        "X\x01\x00\x00\x00z" "(K\x01\x91"      /* 'z': frozenset({1}) */
        "X\x01\x00\x00\x00q" "N20"             /* 'q': None (DUP then POP) */
        "(K\x09K\x09" "1"                      /* pushed and discarded by POP_MARK */
        "u.";
    recall_err err = {0};
    rc_pickle *p = NULL;
    cr_assert_eq(run_raw(b, sizeof b - 1, &err, &p), RECALL_OK, "%s", err.msg);
    const rc_pv *d = rc_pickle_root(p);
    cr_assert_eq(rc_pv_len(d), 12);
    int64_t x;
    double f;
    cr_assert(rc_pv_as_int(rc_pv_dict_get(d, "a"), &x));
    cr_assert_eq(x, 42);
    cr_assert_eq(rc_pv_kind_of(rc_pv_dict_get(d, "b")), RC_PV_BOOL);
    cr_assert(rc_pv_as_int(rc_pv_dict_get(d, "c"), &x));
    cr_assert_eq(x, -7);
    cr_assert(rc_pv_as_float(rc_pv_dict_get(d, "f"), &f));
    cr_assert_eq(f, 0.25);
    cr_assert(rc_pv_as_float(rc_pv_dict_get(d, "g"), &f));
    cr_assert_eq(f, 1.5);
    const rc_pv *l = rc_pv_dict_get(d, "l");
    cr_assert_eq(rc_pv_len(l), 1);
    cr_assert_eq(rc_pv_item_at(l, 0), l);
    /* key 1 was set first, True replaced its value but kept its position */
    cr_assert(rc_pv_as_int(rc_pv_dict_key_at(d, 6), &x));
    cr_assert_eq(rc_pv_kind_of(rc_pv_dict_key_at(d, 6)), RC_PV_INT);
    cr_assert_str_eq(rc_pv_as_str(rc_pv_dict_value_at(d, 6), NULL), "two");
    cr_assert(rc_pv_as_int(rc_pv_dict_get(d, "n"), &x));
    cr_assert_eq(x, -2);
    cr_assert(rc_pv_as_int(rc_pv_dict_get(d, "m"), &x));
    cr_assert_eq(x, 0x1234);
    cr_assert_eq(rc_pv_len(rc_pv_dict_get(d, "s")), 2);
    cr_assert_eq(rc_pv_len(rc_pv_dict_get(d, "z")), 1);
    cr_assert_eq(rc_pv_kind_of(rc_pv_dict_get(d, "q")), RC_PV_NONE);
    cr_assert_null(rc_pv_dict_get(d, "absent"));
    rc_pickle_free(p);
}

Test(pickle_vm, many_dict_keys) {
    /* 3000 distinct int keys through SETITEMS exercise the hash index growth */
    size_t n = 3000, cap = 16 + n * 6;
    char *b = malloc(cap);
    cr_assert(b);
    size_t o = 0;
    memcpy(b, "\x80\x02}(", 4);
    o = 4;
    for (size_t i = 0; i < n; i++) {
        b[o++] = 'M';
        b[o++] = (char)(i & 0xff);
        b[o++] = (char)(i >> 8);
        b[o++] = 'K';
        b[o++] = (char)(i & 0x7f);
    }
    memcpy(b + o, "u.", 2);
    o += 2;
    recall_err err = {0};
    rc_pickle *p = NULL;
    cr_assert_eq(run_raw(b, o, &err, &p), RECALL_OK, "%s", err.msg);
    const rc_pv *d = rc_pickle_root(p);
    cr_assert_eq(rc_pv_len(d), n);
    for (size_t i = 0; i < n; i += 97) {
        int64_t k, v;
        cr_assert(rc_pv_as_int(rc_pv_dict_key_at(d, i), &k));
        cr_assert(rc_pv_as_int(rc_pv_dict_value_at(d, i), &v));
        cr_assert_eq(k, (int64_t)i);
        cr_assert_eq(v, (int64_t)(i & 0x7f));
    }
    rc_pickle_free(p);
    free(b);
}

Test(pickle_vm, not_a_zip) {
    static const uint8_t legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc};
    recall_err err = {0};
    rc_torch_file *f = NULL;
    cr_assert_eq(rc_torch_load(legacy, sizeof legacy, "old.pt", &f, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "legacy"), "%s", err.msg);
    err = (recall_err){0};
    cr_assert_neq(rc_torch_load("garbage!", 8, "g.pt", &f, &err), RECALL_OK);
    cr_assert_null(f);
}

/* ---- numpy values and training state beside the weights ---------------------------------------
 * Fixtures from tools/make_numpy_pickles.py (Debian's torch 1.13 + numpy 1.24; numpy 2 names by
 * renaming data.pkl's GLOBAL lines). numpy_args() there and check_np_args() here list the same
 * values. */

static const rc_pv *arg(const rc_pv *args, const char *key) {
    const rc_pv *v = rc_pv_dict_get(args, key);
    cr_assert_not_null(v, "args.%s absent", key);
    return v;
}

static rc_np_array nd(const rc_pv *args, const char *key, rc_pv_kind kind) {
    const rc_pv *v = arg(args, key);
    cr_assert_eq(rc_pv_kind_of(v), kind, "args.%s is a %s", key, rc_pv_kind_name(rc_pv_kind_of(v)));
    rc_np_array a;
    memset(&a, 0x5a, sizeof a); /* poison: every field must be written */
    cr_assert(rc_pv_as_ndarray(v, &a), "args.%s", key);
    return a;
}

static void check_np_args(const rc_pv *args) {
    cr_assert_eq(rc_pv_kind_of(args), RC_PV_DICT);
    cr_assert_eq(rc_pv_len(args), 16);
    int64_t x;
    double f;
    /* scalars read as the native value: np.int64(4) is the int 4, np.bool_ a bool */
    cr_assert_eq(rc_pv_kind_of(arg(args, "heads")), RC_PV_INT);
    cr_assert(rc_pv_as_int(arg(args, "heads"), &x));
    cr_assert_eq(x, 4);
    cr_assert(rc_pv_as_int(arg(args, "n_sp"), &x)); /* np.int32 */
    cr_assert_eq(x, 8);
    cr_assert(rc_pv_as_int(arg(args, "ffn"), &x)); /* a Python int beside them */
    cr_assert_eq(x, 96);
    cr_assert(rc_pv_as_int(arg(args, "neg"), &x)); /* np.int8: sign-extended */
    cr_assert_eq(x, -3);
    cr_assert_eq(rc_pv_kind_of(arg(args, "flag")), RC_PV_BOOL);
    cr_assert(rc_pv_as_int(arg(args, "flag"), &x));
    cr_assert_eq(x, 1);
    cr_assert_eq(rc_pv_kind_of(arg(args, "lr")), RC_PV_FLOAT);
    cr_assert(rc_pv_as_float(arg(args, "lr"), &f));
    cr_assert_eq(f, 3e-4); /* bitwise: the f8 bytes */
    cr_assert(rc_pv_as_float(arg(args, "wd"), &f));
    cr_assert_eq(f, (double)0.01f); /* np.float32(0.01) widened exactly */
    cr_assert(rc_pv_as_float(arg(args, "warm"), &f)); /* np.float16 */
    cr_assert_eq(f, 1.5);

    /* np.uint64(2**64-1) has no int64 value: kept as an opaque 0-d scalar */
    rc_np_array a = nd(args, "big", RC_PV_NP_SCALAR);
    cr_assert_eq(a.kind, 'u');
    cr_assert_eq(a.itemsize, 8);
    cr_assert_eq(a.ndim, 0);
    cr_assert_eq(a.numel, 1);
    cr_assert_eq(a.nbytes, 8);
    cr_assert_eq(memcmp(a.data, "\xff\xff\xff\xff\xff\xff\xff\xff", 8), 0);
    cr_assert_null(a.items);
    a = nd(args, "name", RC_PV_NP_SCALAR); /* np.str_: UTF-32 */
    cr_assert_eq(a.kind, 'U');
    cr_assert_eq(a.itemsize, 24);
    cr_assert_eq(memcmp(a.data, "w\0\0\0o\0\0\0r\0\0\0l\0\0\0d\0\0\0A\0\0\0", 24), 0);

    a = nd(args, "betas", RC_PV_NDARRAY);
    cr_assert_eq(a.kind, 'f');
    cr_assert_eq(a.byteorder, '<');
    cr_assert_eq(a.itemsize, 8);
    cr_assert_eq(a.ndim, 1);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.numel, 2);
    cr_assert_eq(a.nbytes, 16);
    cr_assert_not(a.fortran);
    cr_assert_null(a.items);
    double b[2];
    memcpy(b, a.data, 16);
    cr_assert_eq(b[0], 0.9);
    cr_assert_eq(b[1], 0.999);

    a = nd(args, "mask", RC_PV_NDARRAY); /* '>i4' [[1,2,3],[4,5,6]]: bytes as stored */
    cr_assert_eq(a.kind, 'i');
    cr_assert_eq(a.byteorder, '>');
    cr_assert_eq(a.itemsize, 4);
    cr_assert_eq(a.ndim, 2);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[1], 3);
    cr_assert_eq(a.nbytes, 24);
    cr_assert_eq(memcmp(a.data, "\0\0\0\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0\5\0\0\0\6", 24), 0);

    a = nd(args, "fmask", RC_PV_NDARRAY); /* Fortran-ordered int16 arange(6).reshape(2, 3) */
    cr_assert(a.fortran);
    cr_assert_eq(a.itemsize, 2);
    cr_assert_eq(a.shape[0], 2);
    cr_assert_eq(a.shape[1], 3);
    int16_t h[6];
    memcpy(h, a.data, sizeof h);
    static const int16_t col_major[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) cr_assert_eq(h[i], col_major[i], "fmask[%d]", i);

    a = nd(args, "objs", RC_PV_NDARRAY); /* dtype=object: the elements are pickled values */
    cr_assert_eq(a.kind, 'O');
    cr_assert_eq(a.numel, 3);
    cr_assert_null(a.data);
    cr_assert_eq(rc_pv_len(a.items), 3);
    cr_assert_str_eq(rc_pv_as_str(rc_pv_item_at(a.items, 0), NULL), "a");
    cr_assert(rc_pv_as_int(rc_pv_item_at(a.items, 1), &x));
    cr_assert_eq(x, 1);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(a.items, 2)), RC_PV_NONE);

    a = nd(args, "empty", RC_PV_NDARRAY); /* protocol 2 spells its b'' as bytes() */
    cr_assert_eq(a.kind, 'f');
    cr_assert_eq(a.itemsize, 4);
    cr_assert_eq(a.ndim, 2);
    cr_assert_eq(a.shape[0], 0);
    cr_assert_eq(a.shape[1], 3);
    cr_assert_eq(a.numel, 0);
    cr_assert_eq(a.nbytes, 0);

    a = nd(args, "zero_d", RC_PV_NDARRAY);
    cr_assert_eq(a.ndim, 0);
    cr_assert_eq(a.numel, 1);
    memcpy(b, a.data, 8);
    cr_assert_eq(b[0], 2.5);
}

static void check_np_args_file(const char *path, const char *state_key) {
    rc_torch_file *f = load_ok(path);
    const rc_pv *root = rc_torch_root(f);
    check_np_args(rc_pv_dict_get(root, "args"));
    int64_t x = 0;
    recall_err err = {0};
    cr_assert_eq(rc_pv_path_int(root, (const char *const[]){"args", "heads", NULL}, &x, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(x, 4);
    cr_assert_eq(rc_pv_kind_of(rc_pv_dict_get(root, state_key)), RC_PV_DICT);
    rc_torch_free(f);
}

Test(pickle_numpy, args_protocol2) { check_np_args_file("tests/golden/pickle/pooler_np_args.pt", "pooler"); }
Test(pickle_numpy, args_protocol4) { check_np_args_file("tests/golden/pickle/np_args_p4.pt", "model"); }
Test(pickle_numpy, args_numpy2_names) { check_np_args_file("tests/golden/pickle/np2_args.pt", "model"); }

Test(pickle_numpy, optimizer_and_rng_state) {
    rc_torch_file *f = load_ok("tests/golden/pickle/pooler_optim.pt");
    const rc_pv *root = rc_torch_root(f);
    static const char *const keys[] = {"epoch", "pooler", "optimizer", "rng", "torch_rng", "args"};
    cr_assert_eq(rc_pv_len(root), 6);
    for (size_t i = 0; i < 6; i++) cr_assert_str_eq(rc_pv_as_str(rc_pv_dict_key_at(root, i), NULL), keys[i]);
    int64_t x;
    double d;
    cr_assert(rc_pv_as_int(rc_pv_dict_get(root, "epoch"), &x)); /* np.int64(3) */
    cr_assert_eq(x, 3);
    cr_assert_eq(rc_pv_len(rc_pv_dict_get(root, "pooler")), 64);

    /* Adam: state {0: {step, exp_avg, exp_avg_sq}, 1: ...}, param_groups [{lr, betas, ...}] */
    const rc_pv *opt = rc_pv_dict_get(root, "optimizer");
    const rc_pv *state = rc_pv_dict_get(opt, "state");
    cr_assert_eq(rc_pv_len(state), 2);
    cr_assert(rc_pv_as_int(rc_pv_dict_key_at(state, 1), &x));
    cr_assert_eq(x, 1);
    const rc_pv *s0 = rc_pv_dict_value_at(state, 0);
    recall_err err = {0};
    rc_torch_tensor t;
    cr_assert_eq(rc_torch_find_tensor(s0, "exp_avg", &t, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(t.ndim, 2);
    cr_assert_eq(t.shape[0], 8);
    cr_assert_eq(t.shape[1], 64);
    cr_assert_eq(rc_torch_find_tensor(s0, "step", &t, &err), RECALL_OK, "%s", err.msg);
    float *v = NULL;
    cr_assert_eq(rc_torch_tensor_f32(&t, &v, &err), RECALL_OK);
    cr_assert_eq(v[0], 2.0f); /* two steps taken */
    free(v);
    const rc_pv *g = rc_pv_item_at(rc_pv_dict_get(opt, "param_groups"), 0);
    cr_assert(rc_pv_as_float(rc_pv_dict_get(g, "lr"), &d)); /* np.float64(1.5e-4) */
    cr_assert_eq(d, 1.5e-4);
    cr_assert_eq(rc_pv_kind_of(rc_pv_dict_get(g, "betas")), RC_PV_TUPLE);
    cr_assert_eq(rc_pv_len(rc_pv_dict_get(g, "params")), 2);

    /* np.random.get_state(): ('MT19937', uint32[624], pos, has_gauss, cached_gaussian) */
    const rc_pv *rng = rc_pv_dict_get(root, "rng");
    cr_assert_eq(rc_pv_len(rng), 5);
    cr_assert_str_eq(rc_pv_as_str(rc_pv_item_at(rng, 0), NULL), "MT19937");
    rc_np_array a;
    cr_assert(rc_pv_as_ndarray(rc_pv_item_at(rng, 1), &a));
    cr_assert_eq(a.kind, 'u');
    cr_assert_eq(a.itemsize, 4);
    cr_assert_eq(a.shape[0], 624);
    cr_assert_eq(a.nbytes, 624 * 4);
    uint32_t key0[3];
    memcpy(key0, a.data, sizeof key0);
    cr_assert_eq(key0[0], 7u); /* np.random.seed(7) */
    cr_assert_eq(key0[1], 4097098180u);
    cr_assert_eq(key0[2], 3572822661u);
    cr_assert(rc_pv_as_int(rc_pv_item_at(rng, 2), &x));
    cr_assert_eq(x, 624);
    cr_assert_eq(rc_torch_tensor_of(rc_pv_dict_get(root, "torch_rng"), &t, &err), RECALL_OK);
    cr_assert_eq(t.dtype, RC_PT_U8);
    cr_assert_eq(t.numel, 5056);
    cr_assert(rc_pv_as_int(rc_pv_dict_get(rc_pv_dict_get(root, "args"), "heads"), &x));
    cr_assert_eq(x, 4);
    rc_torch_free(f);
}

/* The whole blob (the pooler section, pooler.heads from args, and all else) equals the plain
 * worldA conversion: what rides beside the weights changes nothing. */
static void convert_worldA(const char *pooler, int heads, const char *out, recall_status expect, recall_err *err) {
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.qwen2_dir = "tests/golden/worldA/qwen2";
    o.bge_dir = "tests/golden/worldA/bge";
    o.pooler_path = pooler;
    o.gate_path = "tests/golden/worldA/gate.npz";
    o.bridge_path = "tests/golden/worldA/bge_head.npz";
    o.weights = "f32";
    o.pooler_heads = heads;
    o.out_path = out;
    *err = (recall_err){0};
    recall_status s = rc_convert(&o, err);
    cr_assert_eq(s, expect, "%s: got %d (%s)", pooler, s, err->msg);
}

Test(pickle_numpy, converts_to_the_same_blob) {
    char ref[128], got[128];
    snprintf(ref, sizeof ref, "build/tpk_%d_ref.blob", (int)getpid());
    snprintf(got, sizeof got, "build/tpk_%d_got.blob", (int)getpid());
    recall_err err;
    convert_worldA("tests/golden/worldA/pooler.pt", 0, ref, RECALL_OK, &err);
    size_t nr, ng;
    uint8_t *r = (uint8_t *)fixture_read(ref, &nr);
    static const char *const variants[] = {"tests/golden/pickle/pooler_np_args.pt", "tests/golden/pickle/pooler_optim.pt"};
    for (size_t i = 0; i < 2; i++) {
        convert_worldA(variants[i], 0, got, RECALL_OK, &err);
        uint8_t *g = (uint8_t *)fixture_read(got, &ng);
        cr_assert_eq(ng, nr, "%s: %zu bytes vs %zu", variants[i], ng, nr);
        cr_assert_eq(memcmp(g, r, nr), 0, "%s: blob bytes differ", variants[i]);
        free(g);
        rc_blob *b;
        cr_assert_eq(rc_blob_open(got, RC_OPEN_VERIFY, &b, &err), RECALL_OK, "%s", err.msg);
        int64_t h = 0;
        cr_assert_eq(rc_blob_get_i64(b, "pooler.heads", &h, &err), RECALL_OK);
        cr_assert_eq(h, 4, "%s: heads from args (np.int64), not the default 8", variants[i]);
        rc_blob_close(b);
    }
    free(r);
    remove(ref);
    remove(got);
}

/* args.heads present but not an int: refused (not silently the default 8), unless given. */
Test(pickle_numpy, float_heads_refused_unless_given) {
    char out[128];
    snprintf(out, sizeof out, "build/tpk_%d_heads.blob", (int)getpid());
    recall_err err;
    convert_worldA("tests/golden/pickle/np_heads_float.pt", 0, out, RECALL_E_FORMAT, &err);
    cr_assert(strstr(err.msg, "'args.heads' is a float, not an int"), "%s", err.msg);
    cr_assert(strstr(err.msg, "np_heads_float.pt"), "%s", err.msg);
    /* with the count given it gets past the heads and stops at the stub's missing tensors */
    convert_worldA("tests/golden/pickle/np_heads_float.pt", 4, out, RECALL_E_MISSING, &err);
    cr_assert(strstr(err.msg, "blocks.0.lnq1.bias"), "%s", err.msg);
    FILE *fo = fopen(out, "rb");
    cr_assert_null(fo, "no output left behind");
}

Test(pickle_bad, numpy_load) {
    recall_err e = load_fail("tests/golden/pickle/np_load.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "GLOBAL 'numpy.load' is not allowlisted (refused: unpickling it could run code)"), "%s", e.msg);
}

Test(pickle_bad, numpy_testing_runstring) {
    recall_err e = load_fail("tests/golden/pickle/np_runstring.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "GLOBAL 'numpy.testing._private.utils.runstring' is not allowlisted"), "%s", e.msg);
}

Test(pickle_bad, numpy_reconstruct_of_other_class) {
    recall_err e = load_fail("tests/golden/pickle/np_reconstruct_cls.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "numpy.core.multiarray._reconstruct of collections.OrderedDict refused"), "%s", e.msg);
}

Test(pickle_bad, numpy_object_array_hiding_eval) {
    recall_err e = load_fail("tests/golden/pickle/np_object_eval.pt", RECALL_E_SECURITY);
    cr_assert(strstr(e.msg, "GLOBAL '__builtin__.eval' is not allowlisted"), "%s", e.msg);
}

/* Hand-written numpy opcode streams: what the allowlisted numpy names may and may not do. */
#define NP_DTYPE(ts) "cnumpy\ndtype\nX\x02\x00\x00\x00" ts "\x89\x88\x87R"
#define NP_STATE(order) "(K\x03X\x01\x00\x00\x00" order "NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
#define NP_SCALAR "cnumpy.core.multiarray\nscalar\n"
#define NP_RECON "cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" "C\x01" "b\x87R"

Test(pickle_vm, numpy_refusals) {
    static const struct {
        const char *p;
        size_t n;
        recall_status code;
        const char *msg;
    } cases[] = {
        {RAW("\x80\x02" "cnumpy\nndarray\n)R."), RECALL_E_SECURITY, "numpy.ndarray may not be called"},
        {RAW("\x80\x02" "cnumpy\nndarray\n)\x81."), RECALL_E_SECURITY, "NEWOBJ on numpy.ndarray refused"},
        {RAW("\x80\x02" "cnumpy\nload\n."), RECALL_E_SECURITY, "GLOBAL 'numpy.load' is not allowlisted"},
        {RAW("\x80\x02" "cnumpy.lib.npyio\nload\n."), RECALL_E_SECURITY, "numpy.lib.npyio.load"},
        {RAW("\x80\x02" "cnumpy.ma.core\n_mareconstruct\n."), RECALL_E_SECURITY, "numpy.ma.core._mareconstruct"},
        {RAW("\x80\x02" "cnumpy.core.numeric\n_frombuffer\n."), RECALL_E_SECURITY, "numpy.core.numeric._frombuffer"},
        {RAW("\x80\x02" "cnumpy._core.multiarray\n_reconstruct\nccollections\nOrderedDict\nK\x00\x85" "C\x01" "b\x87R."),
         RECALL_E_SECURITY, "numpy._core.multiarray._reconstruct of collections.OrderedDict refused"},
        {RAW("\x80\x02" "cnumpy.core.multiarray\n_reconstruct\nX\x01\x00\x00\x00" "aK\x00\x85" "C\x01" "b\x87R."),
         RECALL_E_SECURITY, "_reconstruct of str refused"},
        {RAW("\x80\x02" NP_SCALAR "X\x01\x00\x00\x00" "aC\x01" "b\x86R."), RECALL_E_FORMAT, "not (numpy.dtype, data)"},
        {RAW("\x80\x02" NP_SCALAR NP_DTYPE("f8") NP_STATE("<") "C\x04" "abcd\x86R."), RECALL_E_FORMAT,
         "needs 8 data bytes, got a bytes of 4"},
        {RAW("\x80\x02" NP_DTYPE("x9") "."), RECALL_E_UNSUPPORTED, "numpy.dtype('x9')"},
        {RAW("\x80\x02" NP_DTYPE("i3") "."), RECALL_E_UNSUPPORTED, "numpy.dtype('i3')"},
        {RAW("\x80\x02" NP_DTYPE("f8") "(K\x03X\x01\x00\x00\x00|N(X\x01\x00\x00\x00" "at}J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb."),
         RECALL_E_UNSUPPORTED, "structured"},
        {RAW("\x80\x02" NP_DTYPE("f8") "(K\x03X\x01\x00\x00\x00" "!NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb."),
         RECALL_E_FORMAT, "bad version, byte order or size"},
        {RAW("\x80\x02" NP_RECON "(K\x01K\x03\x85" NP_DTYPE("f8") NP_STATE("<") "\x89" "C\x10" "0123456789abcdeftb."),
         RECALL_E_FORMAT, "numpy array of 3 'f8' elements: data is a bytes of 16 bytes"},
        {RAW("\x80\x02" NP_RECON "(K\x01K\x02\x85" NP_DTYPE("O8") NP_STATE("|") "\x89]K\x01" "atb."),
         RECALL_E_FORMAT, "object numpy array of 2 elements"},
        {RAW("\x80\x02" NP_RECON "(K\x01)" NP_DTYPE("f8") NP_STATE("<") "\x89" "C\x08" "01234567tb"
                               "(K\x01)" NP_DTYPE("i8") NP_STATE("<") "\x89" "C\x08" "01234567tb."),
         RECALL_E_FORMAT, "numpy.ndarray state set twice"}, /* a second BUILD may not retype it */
        {RAW("\x80\x02" NP_RECON "(K\x02)" NP_DTYPE("f8") NP_STATE("<") "\x89" "C\x08" "01234567tb."),
         RECALL_E_UNSUPPORTED, "state version other than 1"},
        {RAW("\x80\x02" "c__builtin__\nbytes\nK\x05\x85R."), RECALL_E_UNSUPPORTED, "only bytes() is read"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        recall_err err = {0};
        rc_pickle *p = (rc_pickle *)1;
        recall_status s = run_raw(cases[i].p, cases[i].n, &err, &p);
        cr_assert_eq(s, cases[i].code, "case %zu: got %d: %s", i, s, err.msg);
        cr_assert_null(p, "case %zu", i);
        cr_assert(strstr(err.msg, cases[i].msg), "case %zu: '%s' lacks '%s'", i, err.msg, cases[i].msg);
    }
}

Test(pickle_vm, numpy_values) {
    /* [np.float32(-2.5) big-endian, np.uint8(200), a '>f8' 0-d array 1.0 set twice is refused above;
     * here: a 1-d '<u2' array [1, 258], np.bool_(False), np.complex64 kept opaque] */
    static const char b[] = "\x80\x02(" NP_SCALAR NP_DTYPE("f4") NP_STATE(">") "C\x04\xc0\x20\x00\x00\x86R"
                            NP_SCALAR NP_DTYPE("u1") NP_STATE("|") "C\x01\xc8\x86R"
                            NP_RECON "(K\x01K\x02\x85" NP_DTYPE("u2") NP_STATE("<") "\x89" "C\x04\x01\x00\x02\x01tb"
                            NP_SCALAR NP_DTYPE("b1") NP_STATE("|") "C\x01\x00\x86R"
                            NP_SCALAR NP_DTYPE("c8") NP_STATE("<") "C\x08\x00\x00\x80\x3f\x00\x00\x00\x40\x86R"
                            "l.";
    recall_err err = {0};
    rc_pickle *p = NULL;
    cr_assert_eq(run_raw(b, sizeof b - 1, &err, &p), RECALL_OK, "%s", err.msg);
    const rc_pv *l = rc_pickle_root(p);
    cr_assert_eq(rc_pv_len(l), 5);
    double f;
    int64_t x;
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(l, 0)), RC_PV_FLOAT);
    cr_assert(rc_pv_as_float(rc_pv_item_at(l, 0), &f));
    cr_assert_eq(f, -2.5); /* '>f4' bytes c0 20 00 00 */
    cr_assert(rc_pv_as_int(rc_pv_item_at(l, 1), &x));
    cr_assert_eq(x, 200); /* u1: not sign-extended */
    rc_np_array a;
    cr_assert(rc_pv_as_ndarray(rc_pv_item_at(l, 2), &a));
    cr_assert_eq(a.kind, 'u');
    cr_assert_eq(a.itemsize, 2);
    cr_assert_eq(a.numel, 2);
    uint16_t u[2];
    memcpy(u, a.data, 4);
    cr_assert_eq(u[0], 1);
    cr_assert_eq(u[1], 258);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(l, 3)), RC_PV_BOOL);
    cr_assert(rc_pv_as_int(rc_pv_item_at(l, 3), &x));
    cr_assert_eq(x, 0);
    cr_assert_eq(rc_pv_kind_of(rc_pv_item_at(l, 4)), RC_PV_NP_SCALAR);
    cr_assert(rc_pv_as_ndarray(rc_pv_item_at(l, 4), &a));
    cr_assert_eq(a.kind, 'c');
    cr_assert_eq(a.itemsize, 8);
    float c[2];
    memcpy(c, a.data, 8);
    cr_assert_eq(c[0], 1.0f);
    cr_assert_eq(c[1], 2.0f);
    cr_assert_not(rc_pv_as_ndarray(rc_pv_item_at(l, 3), &a)); /* a bool is not an array */
    rc_pickle_free(p);
}
