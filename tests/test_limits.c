/* test_limits.c - resource limits and error values of the public API (src/recall.h).
 *
 * Memory: recall_open_opts.max_memory bounds what an open / loop may need, estimated from the
 * sizes the blob declares; a blob whose declared sizes exceed it fails with RECALL_E_LIMIT naming
 * the numbers, before the allocation is attempted. Context: a conversation longer than the loop
 * can hold (FULL arm cache, max_feed) or a forward longer than max_pos fails the same way.
 * Context limits (REQ-CTX-001/007): every entry refuses a context beyond the trained positions
 * before any compute, naming both numbers, and the trained size itself opens: the FULL arm's
 * instance context (recall_loop_opts.max_ctx; no arbitrary cap below the trained size), a YaRN
 * runtime profile (recall_open_opts.rope_scaling: trained positions factor x original), and the
 * CLI's --ctx, whose forward prints the context and the KV bytes allocated for the positions used.
 * Allocator: a caller's allocator sees every API-level allocation (balanced after close), and one
 * that fails at any point makes the call fail with RECALL_E_NOMEM, never crash.
 */
#include "recall.h"

#include "blob.h"
#include "fixture.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

Test(api_limits, blob_read_into_memory_over_the_limit) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    long size = file_size(path);
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.flags = RECALL_OPEN_NO_MMAP;
    o.max_memory = (uint64_t)size - 1;
    recall_err err = {0};
    recall_model *m = (recall_model *)1;
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert_null(m);
    char want[64];
    snprintf(want, sizeof want, "needs about %ld bytes", size);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    snprintf(want, sizeof want, "limit of %ld bytes", size - 1);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_str_eq(recall_strerror(err.code), "limit exceeded");
}

/* worldA under a 1 MiB max_memory. A mapped blob counts only the tokenizer (1 MiB is room enough);
 * read into memory (-DRECALL_NO_MMAP builds) the file counts too. The loop's caches do not fit
 * either way. */
static recall_model *open_1mib(const char *path, recall_open_opts *o) {
    cr_assert(path);
    recall_open_opts_init(o);
    o->max_memory = (1 << 20) + fixture_blob_counted(path);
    recall_err err = {0};
    recall_model *m = NULL;
    cr_assert_eq(recall_open(path, o, &m, &err), RECALL_OK, "%s", err.msg);
    return m;
}

Test(api_limits, loop_over_the_limit_names_the_numbers) {
    const char *path = fixture_worldA_blob("f32");
    recall_open_opts o;
    recall_model *m = open_1mib(path, &o);
    recall_err err = {0};
    recall_loop *l = (recall_loop *)1;
    cr_assert_eq(recall_loop_open(m, NULL, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert_null(l);
    char want[96];
    snprintf(want, sizeof want, "over the memory limit of %llu bytes", (unsigned long long)o.max_memory);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    /* The same model with the limit lifted opens the loop: the refusal was the limit alone. */
    recall_close(m);
    o.max_memory = 0;
    recall_err e2 = {0};
    cr_assert_eq(recall_open(path, &o, &m, &e2), RECALL_OK, "%s", e2.msg);
    cr_assert_eq(recall_loop_open(m, NULL, &l, &e2), RECALL_OK, "%s", e2.msg);
    recall_loop_close(l);
    recall_close(m);
}

/* The pooler's K/V cache (recall_loop_opts.pooler_cache_mb) is counted in the reservation but
 * never refuses a loop: under max_memory it gets what the limit leaves (here 3 MiB of the
 * default 256), and that room is then taken (a second loop no longer fits). */
Test(api_limits, pooler_cache_gets_what_the_limit_leaves) {
    const char *path = fixture_worldA_blob("f32");
    recall_open_opts o;
    recall_model *m = open_1mib(path, &o);
    recall_err err = {0};
    recall_loop *l = NULL;
    cr_assert_eq(recall_loop_open(m, NULL, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    unsigned long long need = 0, used = 0;
    const char *at = strstr(err.msg, "needs about ");
    cr_assert(at && sscanf(at, "needs about %llu bytes (%llu already in use)", &need, &used) == 2, "%s", err.msg);
    recall_close(m);
    o.max_memory = used + need + (3u << 20) + 1000;
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(recall_loop_open(m, NULL, &l, &err), RECALL_OK, "the default cache must shrink to fit: %s", err.msg);
    recall_loop *l2 = NULL;
    cr_assert_eq(recall_loop_open(m, NULL, &l2, &err), RECALL_E_LIMIT, "%s", err.msg);
    recall_loop_close(l);
    /* an explicit budget is clamped the same way; without a limit the default is reserved */
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    cr_expect_eq(lo.pooler_cache_mb, 0, "0 = the default budget");
    lo.pooler_cache_mb = 1 << 20;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    recall_loop_close(l);
    recall_close(m);
}

/* A blob that declares a huge decoder (1024 layers, 1024 KV heads of 4096 dims, 16384 positions:
 * ~2^47 bytes of KV cache) but holds only config + tokenizer: the FULL arm refuses it by the limit
 * before allocating anything. */
Test(api_limits, declared_sizes_over_the_limit) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_err err = {0};
    rc_blob *src = NULL;
    cr_assert_eq(rc_blob_open(path, 0, &src, &err), RECALL_OK, "%s", err.msg);
    rc_blob_writer *w = NULL;
    cr_assert_eq(rc_writer_new(&w, &err), RECALL_OK);
    for (size_t i = 0; i < rc_blob_n_kv(src); i++) {
        const rc_blob_kv *kv = rc_blob_kv_at(src, i);
        int64_t big = -1;
        if (!strcmp(kv->key, "qwen2.layers") || !strcmp(kv->key, "qwen2.kv_heads")) big = 1024;
        if (!strcmp(kv->key, "qwen2.head_dim")) big = 4096;
        if (!strcmp(kv->key, "qwen2.max_pos")) big = 16384;
        recall_status s;
        if (big >= 0) s = rc_writer_kv_i64(w, kv->key, &big, 1, &err);
        else if (kv->type == RC_KV_I64) s = rc_writer_kv_i64(w, kv->key, kv->v.i, (int)kv->count, &err);
        else if (kv->type == RC_KV_F64) s = rc_writer_kv_f64(w, kv->key, kv->v.f[0], &err);
        else {
            char str[8 * RC_KV_MAX_VALUES + 1];
            memcpy(str, kv->v.s, kv->count);
            str[kv->count] = 0;
            s = rc_writer_kv_str(w, kv->key, str, &err);
        }
        cr_assert_eq(s, RECALL_OK, "%s: %s", kv->key, err.msg);
    }
    size_t size;
    const void *sec = rc_blob_section(src, RC_SECT_TOK_BPE, &size);
    cr_assert(sec);
    void *copy = malloc(size);
    cr_assert(copy);
    memcpy(copy, sec, size);
    cr_assert_eq(rc_writer_section(w, RC_SECT_TOK_BPE, copy, size, &err), RECALL_OK, "%s", err.msg);
    const char *out = "build/limits_huge_decl.blob";
    cr_assert_eq(rc_writer_write(w, out, NULL, NULL, &err), RECALL_OK, "%s", err.msg);
    rc_writer_free(w);
    rc_blob_close(src);

    recall_open_opts o;
    recall_open_opts_init(&o);
    o.max_memory = (uint64_t)1 << 32;
    recall_model *m = NULL;
    cr_assert_eq(recall_open(out, &o, &m, &err), RECALL_OK, "%s", err.msg);
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.arm = RECALL_ARM_FULL;
    recall_loop *l = NULL;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    /* KV alone: 2 * 1024 layers * 16384 positions * 1024 heads * 4096 dims * 4 bytes = 2^48 */
    unsigned long long kv = 2ull * 1024 * 16384 * 1024 * 4096 * 4;
    unsigned long long named = 0;
    const char *p = strstr(err.msg, "needs about ");
    cr_assert(p, "%s", err.msg);
    named = strtoull(p + strlen("needs about "), NULL, 10);
    cr_assert_geq(named, kv, "%s", err.msg);
    cr_assert(strstr(err.msg, "limit of 4294967296 bytes"), "%s", err.msg);
    recall_close(m);
    remove(out);
}

/* ---- context limits -------------------------------------------------------------------------- */

static recall_model *open_worldA(void) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_err err = {0};
    recall_model *m = NULL;
    cr_assert_eq(recall_open(path, NULL, &m, &err), RECALL_OK, "%s", err.msg);
    return m;
}

Test(api_limits, full_arm_conversation_past_the_context) {
    recall_model *m = open_worldA();
    recall_model_info info;
    recall_model_get_info(m, &info);
    cr_assert_eq(info.max_pos, 4096);
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.arm = RECALL_ARM_FULL;
    recall_loop *l = NULL;
    recall_err err = {0};
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    size_t n = 4096 - 110 - 1; /* BOS + n + turn_cap (110) + 1 = 4097 > 4096 */
    int32_t *feed = calloc(n, sizeof *feed);
    cr_assert(feed);
    recall_reply r;
    cr_assert_eq(recall_turn(l, feed, n, NULL, NULL, &r, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "needs 4097 positions (BOS + 3985 history + 110 reply + 1), the context holds 4096"),
              "%s", err.msg);
    cr_assert_null(r.ids);
    free(feed);
    recall_loop_close(l);
    recall_close(m);
}

Test(api_limits, max_feed_and_forward_length) {
    recall_model *m = open_worldA();
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.max_feed = 100;
    recall_loop *l = NULL;
    recall_err err = {0};
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    int32_t feed[101] = {0};
    recall_reply r;
    cr_assert_eq(recall_turn(l, feed, 101, NULL, NULL, &r, &err), RECALL_E_LIMIT);
    cr_assert_str_eq(err.msg, "recall_turn: the conversation has 101 tokens, the limit is 100");
    recall_loop_close(l);

    recall_err e2 = {0};
    float logits[1088];
    int32_t *ids = calloc(4097, sizeof *ids);
    cr_assert(ids);
    cr_assert_eq(recall_forward(m, ids, 4097, logits, 1088, &e2), RECALL_E_LIMIT);
    cr_assert_str_eq(e2.msg, "recall_forward: 4097 ids exceed the model's 4096 trained positions");
    free(ids);
    recall_close(m);
}

/* ---- bad arguments are values ---------------------------------------------------------------- */

Test(api_limits, bad_arguments) {
    recall_model *m = open_worldA();
    recall_err err = {0};
    float logits[1088];
    int32_t ids[3] = {5, 1088, 7};
    cr_assert_eq(recall_forward(m, ids, 3, logits, 1088, &err), RECALL_E_ARG);
    cr_assert_str_eq(err.msg, "recall_forward: token 1088 at position 1 is outside the vocab (1088)");
    recall_err e2 = {0};
    cr_assert_eq(recall_forward(m, ids, 1, logits, 1087, &e2), RECALL_E_ARG);
    cr_assert(strstr(e2.msg, "1087 floats"), "%s", e2.msg);
    recall_err e3 = {0};
    cr_assert_eq(recall_forward(m, ids, 0, logits, 1088, &e3), RECALL_E_ARG);
    recall_err e4 = {0};
    recall_loop *l = NULL;
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.k = 9;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &e4), RECALL_E_ARG);
    cr_assert_null(l);
    cr_assert_eq(recall_loop_open(m, NULL, &l, &e4), RECALL_OK, "%s", e4.msg);
    recall_reply r;
    recall_err e5 = {0};
    cr_assert_eq(recall_turn(l, ids, 0, NULL, NULL, &r, &e5), RECALL_E_ARG);
    cr_assert(strstr(e5.msg, "empty feed"), "%s", e5.msg);
    recall_err e6 = {0};
    int32_t neg = -3;
    cr_assert_eq(recall_turn(l, &neg, 1, NULL, NULL, &r, &e6), RECALL_E_ARG);
    cr_assert_str_eq(e6.msg, "recall_turn: token -3 at position 0 is outside the vocab (1088)");
    recall_loop_close(l);
    /* Empty text tokenizes to nothing; empty ids detokenize to "". */
    int32_t *out = NULL;
    size_t n = 99;
    recall_err e7 = {0};
    cr_assert_eq(recall_tokenize(m, "", 0, 0, &out, &n, &e7), RECALL_OK, "%s", e7.msg);
    cr_assert_eq(n, 0);
    recall_free(m, out);
    char *text = NULL;
    size_t len = 99;
    cr_assert_eq(recall_detokenize(m, NULL, 0, 0, &text, &len, &e7), RECALL_OK, "%s", e7.msg);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(text, "");
    recall_free(m, text);
    recall_close(m);
    recall_err e8 = {0};
    recall_model *none = (recall_model *)1;
    cr_assert_eq(recall_open("tests/golden/no-such.blob", NULL, &none, &e8), RECALL_E_IO);
    cr_assert_null(none);
    cr_assert(strstr(e8.msg, "no-such.blob"), "%s", e8.msg);
}

/* ---- caller-supplied allocator --------------------------------------------------------------- */

typedef struct {
    long allocs, frees, fail_at; /* fail_at: index of the allocation that fails (-1: none) */
    size_t biggest;
} counting;

static void *count_alloc(void *ctx, size_t n) {
    counting *c = ctx;
    if (c->fail_at >= 0 && c->allocs >= c->fail_at) return NULL;
    c->allocs++;
    if (n > c->biggest) c->biggest = n;
    return malloc(n);
}
static void count_free(void *ctx, void *p) {
    counting *c = ctx;
    c->frees++;
    free(p);
}

/* Opens (read into memory), tokenizes, chat-segments, forwards and detokenizes; returns the
 * status of the first failure. */
static recall_status exercise(const char *path, counting *c, recall_err *err) {
    recall_allocator al = {count_alloc, count_free, c};
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.flags = RECALL_OPEN_NO_MMAP;
    o.allocator = &al;
    recall_model *m = NULL;
    RC_TRY(recall_open(path, &o, &m, err));
    int32_t *ids = NULL, *seg = NULL;
    size_t n = 0, ns = 0;
    char *text = NULL;
    float logits[1088];
    recall_status s = recall_tokenize(m, "hello world", 11, 0, &ids, &n, err);
    if (!s) s = recall_chat_segment(m, 1, "hi", NULL, &seg, &ns, err);
    if (!s) s = recall_forward(m, seg, ns, logits, 1088, err);
    if (!s) s = recall_detokenize(m, seg, ns, 0, &text, NULL, err);
    recall_free(m, ids);
    recall_free(m, seg);
    recall_free(m, text);
    recall_close(m);
    return s;
}

Test(api_limits, allocator_sees_and_balances_api_allocations) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    counting c = {0, 0, -1, 0};
    recall_err err = {0};
    cr_assert_eq(exercise(path, &c, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(c.allocs, c.frees, "%ld allocations, %ld frees", c.allocs, c.frees);
    /* model, blob buffer, ids, segment, text */
    cr_assert_geq(c.allocs, 5);
    cr_assert_eq((long)c.biggest, file_size(path), "the blob buffer came from the allocator");
}

Test(api_limits, allocator_failure_at_every_point_is_nomem) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    counting all = {0, 0, -1, 0};
    recall_err err = {0};
    cr_assert_eq(exercise(path, &all, &err), RECALL_OK, "%s", err.msg);
    for (long k = 0; k < all.allocs; k++) {
        counting c = {0, 0, k, 0};
        recall_err e = {0};
        cr_assert_eq(exercise(path, &c, &e), RECALL_E_NOMEM, "failing allocation %ld: %s", k, e.msg);
        cr_assert_eq(c.allocs, c.frees, "failing allocation %ld: %ld allocations, %ld frees", k, c.allocs, c.frees);
    }
}

/* ---- instance context and YaRN through the API and the CLI ------------------------------------ */

Test(api_limits, full_arm_instance_context) {
    recall_model *m = open_worldA();
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.arm = RECALL_ARM_FULL;
    recall_loop *l = NULL;
    recall_err err = {0};
    lo.max_ctx = 4097;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "4097 positions was requested but the model was trained on 4096"), "%s", err.msg);
    lo.max_ctx = 4096; /* the trained size itself opens */
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    recall_loop_close(l);
    lo.max_ctx = 512;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    size_t n = 512 - 110 - 1; /* BOS + n + turn_cap (110) + 1 = 513 > 512 */
    int32_t *feed = calloc(n, sizeof *feed);
    cr_assert(feed);
    recall_reply r;
    cr_assert_eq(recall_turn(l, feed, n, NULL, NULL, &r, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "needs 513 positions (BOS + 401 history + 110 reply + 1), the context holds 512"), "%s",
              err.msg);
    free(feed);
    recall_loop_close(l);
    recall_close(m);
}

Test(api_limits, yarn_runtime_profile_extends_the_trained_positions) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.rope_scaling = "yarn:4:4096";
    recall_model *m = NULL;
    recall_err err = {0};
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_OK, "%s", err.msg);
    recall_model_info info;
    recall_model_get_info(m, &info);
    cr_assert_eq(info.max_pos, 16384, "4 x 4096");
    recall_loop_opts lo;
    recall_loop_opts_init(m, &lo);
    lo.arm = RECALL_ARM_FULL;
    lo.max_ctx = 16385;
    recall_loop *l = NULL;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "16385") && strstr(err.msg, "16384"), "%s", err.msg);
    lo.max_ctx = 16384;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    recall_loop_close(l);
    recall_close(m);

    o.rope_scaling = "yarn:4";
    recall_err e2 = {0};
    cr_assert_eq(recall_open(path, &o, &m, &e2), RECALL_E_ARG);
    cr_assert_null(m);
    cr_assert(strstr(e2.msg, "yarn:4"), "%s", e2.msg);
}

Test(api_limits, cli_ctx_refuses_past_the_trained_size_and_prints_kv_bytes) {
    const char *path = fixture_worldA_blob("f32");
    cr_assert(path);
    char cmd[8192], *out = NULL;
    free(fixture_cmd(1, "a context of 4097 positions was requested but the model was trained on 4096",
                     "./recall forward %s --ids '[1,2,3]' --ctx 4097 2>&1", path));
    free(fixture_cmd(1, "3 positions requested, the context holds 2 (--ctx)",
                     "./recall forward %s --ids '[1,2,3]' --ctx 2 2>&1", path));
    free(fixture_cmd(2, NULL, "./recall forward %s --ids '[1,2,3]' --ctx 0 2>&1", path));
    /* the trained size itself opens; KV follows the positions in use (6,144 bytes per position on
     * worldA: one 256-position unit for 3 ids, 512 for 300) */
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '[1,2,3]' --ctx 4096 2>&1", path);
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", out);
    cr_assert(strstr(out, "context 4096 of 4096 trained positions, rope default"), "%s", out);
    cr_assert(strstr(out, "kv_bytes 1572864 (256 positions allocated for 3 in use)"), "%s", out);
    free(out);
    char ids[4096];
    size_t k = 0;
    for (int i = 0; i < 300; i++) k += (size_t)snprintf(ids + k, sizeof ids - k, "%s%d", i ? "," : "[", i % 1000);
    snprintf(ids + k, sizeof ids - k, "]");
    free(fixture_cmd(0, "kv_bytes 3145728 (512 positions allocated for 300 in use)",
                     "./recall forward %s --ids '%s' --ctx 4096 2>&1", path, ids));
    /* YaRN on the command line: 4 x 4096 = 16384 positions, one more is refused */
    snprintf(cmd, sizeof cmd, "./recall forward %s --ids '[1,2,3]' --rope-scaling yarn:4:4096 --ctx 16385 2>&1", path);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_assert(strstr(out, "16385 positions was requested but the model was trained on 16384 (rope yarn:4:4096"), "%s",
              out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall score %s --ids '[1,2,3,4,5]' --chunk 4097 2>&1", path);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_assert(strstr(out, "4097") && strstr(out, "trained on 4096"), "%s", out);
    free(out);
}

/* One turn of `l` on a short chat; the reply's ids (malloc'd) and their count. */
static int32_t *device_turn(recall_model *m, recall_loop *l, size_t *n) {
    recall_err err = {0};
    int32_t *feed = NULL;
    size_t nf = 0;
    cr_assert_eq(recall_chat_segment(m, 0, "My locker code is 4711. What is my locker code?", NULL, &feed, &nf, &err),
                 RECALL_OK, "%s", err.msg);
    recall_reply r;
    cr_assert_eq(recall_turn(l, feed, nf, NULL, NULL, &r, &err), RECALL_OK, "%s", err.msg);
    int32_t *ids = malloc((r.n_ids ? r.n_ids : 1) * sizeof *ids);
    cr_assert(ids);
    memcpy(ids, r.ids, r.n_ids * sizeof *ids);
    *n = r.n_ids;
    recall_reply_free(l, &r);
    recall_free(m, feed);
    return ids;
}

static recall_model *device_model(const char *path, uint64_t max_memory) {
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.max_memory = max_memory;
    o.kv = RECALL_KV_F16;
    o.numerics = RECALL_NUMERICS_Q8;
    recall_err err = {0};
    recall_model *m = NULL;
    cr_assert_eq(recall_open(path, &o, &m, &err), RECALL_OK, "%s", err.msg);
    return m;
}

static void device_loop_opts(recall_model *m, recall_loop_opts *lo, recall_arm arm) {
    recall_loop_opts_init(m, lo);
    lo->arm = arm;
    lo->kv = RECALL_KV_F16;
    lo->numerics = RECALL_NUMERICS_Q8;
    lo->pooler_cache_mb = -1;
}

/* The device profile (docs/PROFILES.md: nf4 decoder and encoder, the int8 lm_head screen, q8,
 * f16 KV) under max_memory. Its loop declares the packed q8 decoder, both KV caches at f16 and the
 * BERT encoder's scratch; a limit one byte short of that refuses the open with RECALL_E_LIMIT
 * naming the numbers, and nothing of the loop is left behind: the model's budget is unchanged (on
 * the same model a loop that needs less, the SP arm, opens and runs), and with the limit met
 * exactly the loop runs a turn bitwise equal to an unlimited model's. */
Test(api_limits, device_profile_refuses_cleanly, .timeout = 300) {
    const char *path = fixture_device_blob("worldA");
    cr_assert(path);
    uint64_t base = 1 << 20;
#ifdef RECALL_NO_MMAP
    base += (uint64_t)file_size(path);
#endif
    recall_err err = {0};
    recall_model *m = device_model(path, base);
    recall_loop_opts lo;
    device_loop_opts(m, &lo, RECALL_ARM_RC_BGE);
    recall_loop *l = (recall_loop *)1;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert_null(l);
    unsigned long long need = 0, used = 0;
    const char *at = strstr(err.msg, "needs about ");
    cr_assert(at && sscanf(at, "needs about %llu bytes (%llu already in use)", &need, &used) == 2, "%s", err.msg);
    recall_close(m);

    /* one byte short: refused, the numbers named, nothing reserved */
    const uint64_t limit = used + need - 1;
    m = device_model(path, limit);
    device_loop_opts(m, &lo, RECALL_ARM_RC_BGE);
    l = (recall_loop *)1;
    memset(&err, 0, sizeof err); /* a recall_err keeps its first error */
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_E_LIMIT, "%s", err.msg);
    cr_assert_null(l);
    char want[128];
    snprintf(want, sizeof want, "needs about %llu bytes (%llu already in use), over the memory limit of %llu bytes",
             need, used, (unsigned long long)limit);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    recall_loop_opts so;
    device_loop_opts(m, &so, RECALL_ARM_SP);
    recall_loop *sp = NULL;
    memset(&err, 0, sizeof err);
    cr_assert_eq(recall_loop_open(m, &so, &sp, &err), RECALL_OK, "the refusal must leave the budget as it was: %s",
                 err.msg);
    size_t n_sp = 0;
    free(device_turn(m, sp, &n_sp));
    cr_expect_gt(n_sp, 0);
    recall_loop_close(sp);
    recall_close(m);

    /* the limit met exactly: the loop opens and its turn is the unlimited turn, bit for bit */
    m = device_model(path, used + need);
    device_loop_opts(m, &lo, RECALL_ARM_RC_BGE);
    l = NULL;
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    size_t n1 = 0, n2 = 0;
    int32_t *r1 = device_turn(m, l, &n1);
    recall_loop_close(l);
    recall_close(m);
    m = device_model(path, 0);
    device_loop_opts(m, &lo, RECALL_ARM_RC_BGE);
    cr_assert_eq(recall_loop_open(m, &lo, &l, &err), RECALL_OK, "%s", err.msg);
    int32_t *r2 = device_turn(m, l, &n2);
    cr_assert_eq(n1, n2);
    cr_expect(memcmp(r1, r2, n1 * sizeof *r1) == 0, "the reply under the limit differs from the unlimited one");
    free(r1);
    free(r2);
    recall_loop_close(l);
    recall_close(m);
}
