/* abi_v1.c - a program built against the previous public header (tests/abi_v1/recall.h, API
 * version 1: option structs without struct_size) run against the current library: the ABI promise
 * of docs/API.md. `make test` links it with librecall.a, `make abi-check` also with librecall.so.
 *
 *   abi_v1 BLOB GOLDEN.json      (BLOB: worldA f32; GOLDEN: loop_A_seed0_faithful_fp32.json)
 * Each version-1 struct ends where an inaccessible page begins, so that a library reading or
 * writing one byte past it crashes the program. Checks, each reaching a different field at its
 * version-1 offset: recall_open_opts_init writes no byte past the struct; max_memory (an open
 * over a tiny limit fails with RECALL_E_LIMIT); rope_scaling (max_pos doubles under yarn:2);
 * flags (RECALL_OPEN_VERIFY opens); recall_loop_opts_init gives the golden's loop constants and
 * writes no byte past the struct; the first golden turn with threads 2 and draft 4 gives the
 * golden reply (both change speed only); turn_cap 5 gives its first 5 ids; the FULL arm with
 * max_ctx 100 is refused naming 100. The reply struct (frozen since version 1) ends at a guard page
 * too. Prints "N passed, M failed"; exit 0 only if nothing failed.
 *
 * Built only with -DRC_ABI_V1_MAIN; the tests/ glob of the suite compiles it to nothing. */
#ifdef RC_ABI_V1_MAIN
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, sysconf: a user program built with -std=c11 */
#include "check.h"
#include "recall.h" /* -Itests/abi_v1 first: the version-1 header */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if RECALL_API_VERSION != 1
#error "abi_v1.c must be compiled against tests/abi_v1/recall.h (-Itests/abi_v1 before -Isrc)"
#endif

/* n bytes that end where a PROT_NONE page begins, filled with 0xa5. */
static void *at_guard(size_t n) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || mprotect(p + pg, pg, PROT_NONE) != 0) {
        perror("mmap");
        exit(2);
    }
    memset(p, 0xa5, pg);
    return p + pg - n;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) buf[n] = 0;
    else free(buf), buf = NULL;
    fclose(f);
    return buf;
}

/* The integers of the array after the first `key` at or after `from`. */
static long ints_after(const char *from, const char *key, int32_t **out) {
    const char *p = strstr(from, key);
    if (!p || !(p = strchr(p, '['))) return -1;
    long n = 0;
    *out = malloc(sizeof **out * 65536);
    for (p++; *out && *p && *p != ']' && n < 65536;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) p++;
        else (*out)[n++] = (int32_t)x, p = end;
    }
    return n;
}

static long int_after(const char *from, const char *key) {
    const char *p = strstr(from, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static recall_status turn(recall_model *m, const recall_loop_opts *lo, const int32_t *feed, long n_feed,
                          recall_reply *r, recall_err *err) {
    recall_loop *loop = NULL;
    recall_status s = recall_loop_open(m, lo, &loop, err);
    if (!s) s = recall_turn(loop, feed, (size_t)n_feed, NULL, NULL, r, err);
    if (!s) {
        recall_reply cp = *r; /* the ids outlive the loop: copy before recall_reply_free */
        r->ids = malloc((cp.n_ids + 1) * sizeof *r->ids);
        if (r->ids) memcpy(r->ids, cp.ids, cp.n_ids * sizeof *r->ids);
        recall_reply_free(loop, &cp);
    }
    recall_loop_close(loop);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BLOB GOLDEN.json\n", argv[0]);
        return 2;
    }
    char *golden = slurp(argv[2]);
    const char *turns = golden ? strstr(golden, "\"turns\"") : NULL;
    int32_t *want = NULL, *history = NULL;
    const long feed_len = turns ? int_after(turns, "\"feed_len\": ") : -1;
    const long n_want = turns ? ints_after(turns, "\"reply\":", &want) : -1;
    const long n_history = golden ? ints_after(golden, "\"final_history\":", &history) : -1;
    if (feed_len <= 0 || n_want <= 5 || n_history < feed_len) {
        fprintf(stderr, "%s: no turns[0].feed_len / reply / final_history\n", argv[2]);
        return 2;
    }
    recall_err err = {0};
    recall_model *m = NULL;
    recall_model_info info;

    /* open: max_memory, rope_scaling, flags, each at its version-1 offset */
    recall_open_opts *oo = at_guard(sizeof *oo);
    recall_open_opts_init(oo);
    const unsigned char *ob = (const unsigned char *)oo;
    int zero = 1;
    for (size_t i = 0; i < sizeof *oo; i++) zero &= ob[i] == 0;
    CHECK(zero, "recall_open_opts_init left nonzero bytes in the version-1 struct");
    oo->max_memory = 1000;
    recall_status s = recall_open(argv[1], oo, &m, &err);
    CHECK(s == RECALL_E_LIMIT && strstr(err.msg, "1000"), "max_memory 1000: %s (%s)", recall_strerror(s), err.msg);
    recall_close(m);
    m = NULL;
    memset(&err, 0, sizeof err);
    oo->max_memory = 0;
    oo->rope_scaling = "yarn:2:4096";
    s = recall_open(argv[1], oo, &m, &err);
    CHECK(s == RECALL_OK, "rope_scaling yarn:2:4096: %s", err.msg);
    if (!s) {
        recall_model_get_info(m, &info);
        CHECK(info.max_pos == 8192, "yarn:2:4096 gives %d positions, want 8192", info.max_pos);
    }
    recall_close(m);
    m = NULL;
    oo->rope_scaling = NULL;
    oo->flags = RECALL_OPEN_VERIFY;
    s = recall_open(argv[1], oo, &m, &err);
    CHECK(s == RECALL_OK, "recall_open: %s", err.msg);
    if (s) goto done;
    recall_model_get_info(m, &info);
    CHECK(info.max_pos == 4096, "max_pos %d, want worldA's 4096", info.max_pos);

    /* the loop: defaults at their version-1 offsets, then the fields a turn reads */
    recall_loop_opts *lo = at_guard(sizeof *lo);
    recall_loop_opts_init(m, lo);
    CHECK(lo->window == int_after(golden, "\"RW\": ") && lo->chunk == int_after(golden, "\"C\": ") &&
              lo->block == int_after(golden, "\"BLOCK\": ") && lo->k == int_after(golden, "\"RECALL_K\": ") &&
              lo->turn_cap == int_after(golden, "\"TURN_CAP\": ") && lo->mode == RECALL_MODE_FAITHFUL &&
              lo->arm == RECALL_ARM_RC_BGE && lo->draft == 0 && lo->max_ctx == 0 && lo->simd == NULL,
          "loop defaults: window %d chunk %d block %d k %d cap %d mode %d arm %d draft %d", lo->window, lo->chunk,
          lo->block, lo->k, lo->turn_cap, (int)lo->mode, (int)lo->arm, lo->draft);
    lo->threads = 2;
    lo->draft = 4;
    recall_reply *rp = at_guard(sizeof *rp); /* frozen: the library writes exactly its bytes */
    s = turn(m, lo, history, feed_len, rp, &err);
    CHECK(s == RECALL_OK, "golden turn: %s", err.msg);
    if (!s) {
        CHECK(rp->n_ids == (size_t)n_want && rp->ids && !memcmp(rp->ids, want, (size_t)n_want * sizeof *want),
              "golden turn: %zu ids, the golden has %ld (or they differ)", rp->n_ids, n_want);
        free(rp->ids);
    }
    lo->turn_cap = 5;
    s = turn(m, lo, history, feed_len, rp, &err);
    CHECK(s == RECALL_OK && rp->n_ids == 5 && rp->ids && !memcmp(rp->ids, want, 5 * sizeof *want),
          "turn_cap 5: %s, %zu ids", err.msg, s ? (size_t)0 : rp->n_ids);
    if (!s) free(rp->ids);
    lo->arm = RECALL_ARM_FULL;
    lo->max_ctx = 100;
    recall_err e2 = {0};
    s = turn(m, lo, history, feed_len, rp, &e2);
    CHECK(s == RECALL_E_LIMIT && strstr(e2.msg, "holds 100"), "FULL arm, max_ctx 100: %s (%s)", recall_strerror(s),
          e2.msg);
    if (!s) free(rp->ids);
    recall_close(m);
done:
    free(want);
    free(history);
    free(golden);
    printf("abi v1: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#else
/* Compiled into the Criterion binary by the tests/ glob: nothing to contribute there. */
typedef int rc_abi_v1_is_a_standalone_program;
#endif
