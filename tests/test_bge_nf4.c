/* test_bge_nf4.c - the BERT encoder stored at 4 bits (`convert --bge-weights nf4`).
 *
 *   section_bytes        which bert.* tensors are NF4 (the six matrices of every layer and the word
 *                        embeddings) and which stay f32 (position and token-type embeddings, norms,
 *                        biases), every tensor's exact byte count, the BGE section's total for
 *                        worldA, the codes and absmax equal to rc_nf4_quantize of the source (the
 *                        decoder's quantiser), and the "bert.weights" key
 *   bf16_bytes           the same for --bge-weights bf16
 *   paths_and_threads    the nf4 encoder's embeddings are the same bits on every SIMD path this CPU
 *                        runs and at 1, 2 and 3 threads (the 10 golden texts)
 *   golden               the embeddings of the 10 texts of bge_tokens.json equal, bit for bit,
 *                        tests/golden/worldA/bge_nf4.npz (written by tools/make_bge_nf4_golden.sh
 *                        with this engine: no other implementation computes an NF4 BERT). It pins
 *                        the quantiser's codes, the converter's choice of NF4 tensors and the
 *                        encoder's order over NF4 weights: a change to any of them changes bits.
 *                        The golden's cosine to the Hugging Face f32 embedding (bge.npz) is at least
 *                        0.975 for every text (measured 0.9796 - 0.9852 on worldA's random weights)
 *   refused              an unknown --bge-weights value is an argument error, no file written
 *   named_in_outputs     `recall info` names the BGE storage and its bytes; a replay trace and an
 *                        eval record carry "weights" and "bge_weights"
 */
#include "bert.h"
#include "blob.h"
#include "convert.h"
#include "fixture.h"
#include "json.h"
#include "nf4.h"
#include "pool.h"
#include "safetensors.h"
#include "simd.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WA "tests/golden/worldA/"
#define N_TEXTS 10

static int is_matrix(const char *name) {
    static const char *const mats[] = {".query.weight", ".key.weight", ".value.weight", "attention.output.dense.weight",
                                       "intermediate.dense.weight", "output.dense.weight", "word_embeddings.weight"};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        size_t n = strlen(name), m = strlen(mats[i]);
        if (n >= m && !strcmp(name + n - m, mats[i])) return 1;
    }
    return 0;
}

/* Every bert.* tensor's dtype and bytes under storage `lin` for the matrices; the total. */
static size_t check_bert_tensors(const rc_blob *b, rc_dtype lin) {
    size_t total = 0, n = 0;
    for (size_t i = 0; i < rc_blob_n_tensors(b); i++) {
        const rc_tensor *t = rc_blob_tensor_at(b, i);
        if (strncmp(t->name, "bert.", 5)) continue;
        n++;
        const size_t numel = (size_t)t->numel;
        const rc_dtype want = is_matrix(t->name) ? lin : RC_DT_F32;
        cr_expect_eq(t->dtype, want, "%s: %s, expected %s", t->name, rc_dtype_name(t->dtype), rc_dtype_name(want));
        const size_t bytes = want == RC_DT_NF4 ? numel / 2 + numel / 64 * 4 : numel * rc_dtype_size(want);
        cr_expect_eq(t->nbytes, bytes, "%s: %zu bytes, expected %zu", t->name, t->nbytes, bytes);
        total += t->nbytes;
    }
    cr_expect_eq(n, 5 + 16 * 2, "worldA's bge: 5 embedding tensors + 16 per layer x 2");
    size_t nt = 0;
    cr_expect_eq(rc_blob_prefix_bytes(b, "bert.", &nt), total);
    cr_expect_eq(nt, n);
    return total;
}

Test(bge_nf4, section_bytes) {
    rc_blob *b = fixture_open(fixture_bge_blob("worldA", "f32", "nf4"));
    const size_t total = check_bert_tensors(b, RC_DT_NF4);
    /* word embeddings 1000 x 64 nf4: 32,000 codes + 4,000 absmax; positions 512 x 64 f32 131,072;
     * token types 512; embedding LN 512; per layer: four 64 x 64 nf4 (2,304 each), two 64 x 128 nf4
     * (4,608 each), biases and LNs 2,816: 21,248 */
    cr_expect_eq(total, (size_t)210592, "BGE section %zu bytes", total);
    cr_expect_str_eq(rc_blob_weights(b, "bert"), "nf4");
    cr_expect_str_eq(rc_blob_weights(b, "qwen2"), "f32");
    /* the f32 blob: 4x the matrices' bytes, and named */
    rc_blob *f = fixture_open_worldA("f32");
    cr_expect_eq(rc_blob_prefix_bytes(f, "bert.", NULL), (size_t)655872);
    cr_expect_str_eq(rc_blob_weights(f, "bert"), "f32");
    /* the codes are the decoder's quantiser's, on the source weights */
    rc_st *st = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_st_open(WA "bge", &st, &err), RECALL_OK, "%s", err.msg);
    static const char *const names[] = {"embeddings.word_embeddings.weight", "encoder.layer.1.intermediate.dense.weight",
                                        "encoder.layer.0.attention.self.key.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char src[160], dst[160];
        snprintf(src, sizeof src, "bert.%s", names[i]);
        const rc_st_tensor *s = rc_st_find(st, src);
        if (!s) s = rc_st_find(st, names[i]);
        cr_assert(s, "%s not in the source", names[i]);
        float *w = NULL;
        cr_assert_eq(rc_st_to_f32(s, &w, &err), RECALL_OK, "%s", err.msg);
        const size_t n = (size_t)s->numel;
        uint8_t *codes = malloc(n / 2);
        float *absmax = malloc(n / 64 * sizeof *absmax);
        cr_assert(codes && absmax);
        cr_assert_eq(rc_nf4_quantize(w, n, codes, absmax), 0);
        snprintf(dst, sizeof dst, "bert.%s", names[i]);
        const rc_tensor *t = rc_blob_find(b, dst);
        cr_assert(t && t->dtype == RC_DT_NF4, "%s", dst);
        cr_expect(memcmp(t->data, codes, n / 2) == 0, "%s: codes differ from rc_nf4_quantize", dst);
        cr_expect(memcmp(t->absmax, absmax, n / 64 * sizeof *absmax) == 0, "%s: absmax differs", dst);
        free(codes);
        free(absmax);
        free(w);
    }
    rc_st_close(st);
    rc_blob_close(f);
    rc_blob_close(b);
}

Test(bge_nf4, bf16_bytes) {
    rc_blob *b = fixture_open(fixture_bge_blob("worldA", "f32", "bf16"));
    const size_t total = check_bert_tensors(b, RC_DT_BF16);
    cr_expect_eq(total, (size_t)396800, "BGE section %zu bytes", total);
    cr_expect_str_eq(rc_blob_weights(b, "bert"), "bf16");
    rc_blob_close(b);
}

/* The 10 golden texts' ids (bge_tokens.json), embedded by m into emb[10 * H]. */
static void embed_texts(rc_bert *m, float *emb) {
    json_doc *doc = fixture_json(WA "bge_tokens.json");
    const json_value *ids = json_get_type(json_root(doc), "ids", JSON_ARR);
    cr_assert(ids && ids->len == N_TEXTS);
    const int H = rc_bert_cfg(m)->hidden;
    int32_t buf[512];
    recall_err err = {0};
    for (size_t i = 0; i < N_TEXTS; i++) {
        const json_value *a = &ids->items[i];
        cr_assert(a->len >= 1 && a->len <= 512);
        for (size_t t = 0; t < a->len; t++) buf[t] = (int32_t)a->items[t].i;
        for (int h = 0; h < H; h++) emb[i * (size_t)H + (size_t)h] = NAN;
        cr_assert_eq(rc_bert_embed(m, buf, (int)a->len, emb + i * (size_t)H, &err), RECALL_OK, "%s", err.msg);
    }
    json_free(doc);
}

static rc_exec *exec_for(int path, int threads) {
    rc_exec_opts o = {.threads = threads, .simd = rc_simd_name((rc_simd_path)path)};
    rc_exec *e = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_exec_open(&o, &e, &err), RECALL_OK, "%s", err.msg);
    return e;
}

/* emb[10 * 64] of the nf4-BGE worldA blob on one path and thread count */
static void embed_on(const rc_blob *b, int path, int threads, float *emb) {
    rc_exec *e = exec_for(path, threads);
    rc_bert *m = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_bert_open_ex(b, e, &m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_bert_cfg(m)->hidden, 64);
    embed_texts(m, emb);
    rc_bert_close(m);
    rc_exec_close(e);
}

Test(bge_nf4, paths_and_threads, .timeout = 120) {
    rc_blob *b = fixture_open(fixture_bge_blob("worldA", "f32", "nf4"));
    float ref[N_TEXTS * 64], got[N_TEXTS * 64];
    embed_on(b, RC_SIMD_SCALAR, 1, ref);
    int runs = 0;
    for (int p = 0; p < RC_SIMD_COUNT; p++) {
        if (!fixture_path_runs(p)) continue;
        for (int t = 1; t <= 3; t++) {
            embed_on(b, p, t, got);
            char what[80];
            snprintf(what, sizeof what, "nf4 bge %s x%d", rc_simd_name((rc_simd_path)p), t);
            fixture_expect_same_bits(got, ref, N_TEXTS * 64, what);
            runs++;
        }
    }
    cr_expect_geq(runs, 3);
    rc_blob_close(b);
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb);
}

Test(bge_nf4, golden) {
    rc_blob *b = fixture_open(fixture_bge_blob("worldA", "f32", "nf4"));
    float got[N_TEXTS * 64];
    embed_on(b, RC_SIMD_SCALAR, 1, got);
    size_t n = 0;
    float *want = fixture_npz_f32(WA "bge_nf4.npz", "emb", &n);
    cr_assert_eq(n, (size_t)N_TEXTS * 64);
    fixture_expect_same_bits(got, want, n, "nf4 bge vs tests/golden/worldA/bge_nf4.npz");
    float *hf = fixture_npz_f32(WA "bge.npz", "emb", &n);
    cr_assert_eq(n, (size_t)N_TEXTS * 64);
    for (int i = 0; i < N_TEXTS; i++) {
        const double c = cosine(want + i * 64, hf + i * 64, 64);
        cr_expect_geq(c, 0.975, "text %d: cosine to the f32 embedding %.6f", i, c);
    }
    free(hf);
    free(want);
    rc_blob_close(b);
}

Test(bge_nf4, refused) {
    char out[64];
    snprintf(out, sizeof out, "build/bge_refused.%ld.blob", (long)getpid());
    rc_convert_opts o = fixture_worldA_convert_opts("f32", out);
    o.bge_weights = "q4";
    recall_err err = {0};
    cr_expect_eq(rc_convert(&o, &err), RECALL_E_ARG);
    cr_expect(strstr(err.msg, "--bge-weights q4") != NULL, "%s", err.msg);
    cr_expect_neq(access(out, F_OK), 0, "no blob written");
    char *txt = fixture_cmd(1, NULL, "./recall convert --qwen2 %sqwen2 --bge %sbge --pooler %spooler.pt --gate "
                            "%sgate.npz --bridge %sbge_head.npz --bge-weights int4 --quiet -o %s 2>&1",
                            WA, WA, WA, WA, WA, out);
    cr_expect(strstr(txt, "--bge-weights int4: expected f32, bf16 or nf4") != NULL, "%s", txt);
    cr_expect_neq(access(out, F_OK), 0, "no blob written");
    free(txt);
}

Test(bge_nf4, named_in_outputs, .timeout = 300) {
    const char *blob = fixture_bge_blob("worldA", "nf4", "nf4");
    cr_assert(blob);
    char *txt = fixture_cmd(0, "bge (BERT)       nf4", "./recall info %s --no-tensors", blob);
    free(txt);
    char trace[96], ev[96];
    snprintf(trace, sizeof trace, "build/bge_nf4_trace.%ld.json", (long)getpid());
    snprintf(ev, sizeof ev, "build/bge_nf4_eval.%ld.json", (long)getpid());
    txt = fixture_cmd(0, NULL, "./recall replay %s --bench tests/golden/recall_bench.json --problem 0 --trace %s "
                      "2>/dev/null", blob, trace);
    free(txt);
    json_doc *d = fixture_json(trace);
    const json_value *w = json_get_type(json_root(d), "weights", JSON_STR);
    const json_value *bw = json_get_type(json_root(d), "bge_weights", JSON_STR);
    cr_expect(w && !strcmp(w->str, "nf4"), "trace weights");
    cr_expect(bw && !strcmp(bw->str, "nf4"), "trace bge_weights");
    json_free(d);
    txt = fixture_cmd(0, NULL, "./recall eval %s --bench tests/golden/recall_bench.json --problems 0 --arms SP "
                      "--json %s >/dev/null 2>&1", blob, ev);
    free(txt);
    d = fixture_json(ev);
    w = json_get_type(json_root(d), "weights", JSON_STR);
    bw = json_get_type(json_root(d), "bge_weights", JSON_STR);
    cr_expect(w && !strcmp(w->str, "nf4"), "eval weights");
    cr_expect(bw && !strcmp(bw->str, "nf4"), "eval bge_weights");
    json_free(d);
    unlink(trace);
    unlink(ev);
}
