/* test_session.c - the chat session file (src/formats/session.h): exact bytes, round trip, every truncation,
 * every single-bit flip and garbage refused (the file left as it was), and atomic replacement under
 * SIGKILL at random points of a save. */
#include "checksum.h"
#include "fixture.h"
#include "session.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *tmpdir(void) {
    char *d = strdup("/tmp/recall_session_XXXXXX");
    cr_assert(d && mkdtemp(d));
    return d;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

Test(session, exact_bytes) {
    int32_t ids[3] = {1, 2, 1027};
    uint8_t *b;
    size_t n;
    recall_err err = {0};
    cr_assert_eq(rc_session_encode(ids, 3, 1088, &b, &n, &err), RECALL_OK);
    cr_assert_eq(n, 32 + 12);
    static const uint8_t head[24] = {'R', 'C', 'S', 'E', 'S', 'S', '1', '\n', 1, 0, 0, 0, 0x40, 0x04, 0, 0,
                                     3,   0,   0,   0,   0,   0,   0,   0};
    cr_assert_eq(memcmp(b, head, 24), 0);
    static const uint8_t body[12] = {1, 0, 0, 0, 2, 0, 0, 0, 0x03, 0x04, 0, 0};
    cr_assert_eq(memcmp(b + 32, body, 12), 0);
    uint8_t cat[36];
    memcpy(cat, b, 24);
    memcpy(cat + 24, body, 12);
    uint64_t want = rc_xxh64(cat, 36, 0), got = 0;
    for (int i = 0; i < 8; i++) got |= (uint64_t)b[24 + i] << (8 * i);
    cr_assert_eq(got, want);
    free(b);
    /* ids outside the vocab are not written */
    int32_t bad[1] = {1088};
    cr_assert_eq(rc_session_encode(bad, 1, 1088, &b, &n, &err), RECALL_E_ARG);
    int32_t neg[1] = {-1};
    cr_assert_eq(rc_session_encode(neg, 1, 0, &b, &n, &err), RECALL_E_ARG);
}

Test(session, round_trip_and_missing) {
    char *d = tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/s.sess", d);
    recall_err err = {0};
    rc_session s;
    cr_assert_eq(rc_session_load(path, &s, &err), RECALL_E_MISSING);
    for (size_t n = 0; n < 300; n += 37) {
        int32_t *ids = malloc((n + 1) * sizeof *ids);
        for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919u) % 1088u);
        cr_assert_eq(rc_session_save(path, ids, n, 1088, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(rc_session_load(path, &s, &err), RECALL_OK, "%s", err.msg);
        cr_assert_eq(s.n, n);
        cr_assert_eq(s.vocab, 1088u);
        cr_assert(s.ids);
        for (size_t i = 0; i < n; i++) cr_assert_eq(s.ids[i], ids[i]);
        rc_session_free(&s);
        free(ids);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0); /* the file exists */
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        cr_assert_neq(access(tmp, F_OK), 0, "the temporary file is renamed away");
    }
    unlink(path);
    rmdir(d);
    free(d);
}

/* Every way of damaging a small valid file is refused, and loading never touches the file. */
Test(session, damaged_files_refused_untouched) {
    char *d = tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/s.sess", d);
    int32_t ids[6] = {5, 6, 1000, 0, 1087, 42};
    uint8_t *good;
    size_t n;
    recall_err err = {0};
    cr_assert_eq(rc_session_encode(ids, 6, 1088, &good, &n, &err), RECALL_OK);
    rc_session s;
    uint8_t *bad = malloc(n + 1);
    /* truncated: every proper prefix */
    for (size_t l = 0; l < n; l++) {
        write_bytes(path, good, l);
        err = (recall_err){0};
        cr_assert_neq(rc_session_load(path, &s, &err), RECALL_OK, "prefix of %zu bytes accepted", l);
        cr_assert(strstr(err.msg, path), "%s", err.msg);
        size_t m;
        uint8_t *after = (uint8_t *)fixture_read(path, &m);
        cr_assert(m == l && !memcmp(after, good, l), "file changed");
        free(after);
    }
    /* trailing byte */
    memcpy(bad, good, n);
    bad[n] = 0;
    cr_assert_eq(rc_session_parse(bad, n + 1, "x", &s, &err), RECALL_E_FORMAT);
    /* every single-bit flip: magic, version, vocab, count, checksum and ids are all covered */
    for (size_t i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, good, n);
            bad[i] ^= (uint8_t)(1u << bit);
            cr_assert_neq(rc_session_parse(bad, n, "x", &s, &err), RECALL_OK, "flip byte %zu bit %d accepted", i, bit);
        }
    /* the checksum-flipped file on disk: refused with a checksum error, bytes unchanged */
    memcpy(bad, good, n);
    bad[30] ^= 0x10;
    write_bytes(path, bad, n);
    err = (recall_err){0};
    cr_assert_eq(rc_session_load(path, &s, &err), RECALL_E_CHECKSUM);
    cr_assert(strstr(err.msg, "checksum"), "%s", err.msg);
    size_t m;
    uint8_t *after = (uint8_t *)fixture_read(path, &m);
    cr_assert(m == n && !memcmp(after, bad, n));
    free(after);
    /* garbage of the right size */
    srand(7);
    for (size_t i = 0; i < n; i++) bad[i] = (uint8_t)rand();
    cr_assert_eq(rc_session_parse(bad, n, "x", &s, &err), RECALL_E_FORMAT);
    /* a future version */
    memcpy(bad, good, n);
    bad[8] = 2;
    cr_assert_eq(rc_session_parse(bad, n, "x", &s, &err), RECALL_E_VERSION);
    /* a huge count cannot make it allocate or read out of bounds */
    memcpy(bad, good, n);
    memset(bad + 16, 0xff, 8);
    cr_assert_eq(rc_session_parse(bad, n, "x", &s, &err), RECALL_E_FORMAT);
    /* an id beyond the declared vocab, with a correct checksum */
    memcpy(bad, good, n);
    bad[12] = 100, bad[13] = 0; /* vocab 100 < 1000 */
    uint8_t cat[24 + 24];
    memcpy(cat, bad, 24);
    memcpy(cat + 24, bad + 32, 24);
    uint64_t sum = rc_xxh64(cat, sizeof cat, 0);
    for (int i = 0; i < 8; i++) bad[24 + i] = (uint8_t)(sum >> (8 * i));
    err = (recall_err){0};
    cr_assert_eq(rc_session_parse(bad, n, "x", &s, &err), RECALL_E_FORMAT);
    cr_assert(strstr(err.msg, "1000"), "%s", err.msg);
    /* and the good bytes still parse */
    cr_assert_eq(rc_session_parse(good, n, "x", &s, &err), RECALL_OK);
    cr_assert_eq(s.n, 6u);
    cr_assert_eq(s.ids[2], 1000);
    rc_session_free(&s);
    free(bad);
    free(good);
    unlink(path);
    rmdir(d);
    free(d);
}

/* A child saves two different sessions over the same path in a loop and is SIGKILLed at a random
 * moment; the path must always hold one of the two, complete. Repeated until several kills have
 * landed in the middle of a save (PATH.tmp left behind: killed while writing, syncing or before
 * the rename). */
Test(session, atomic_under_sigkill, .timeout = 120) {
    char *d = tmpdir();
    char path[256], tmp[300];
    snprintf(path, sizeof path, "%s/s.sess", d);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const size_t nA = 1u << 20, nB = (1u << 20) + 7;
    int32_t *A = malloc(nA * sizeof *A), *B = malloc(nB * sizeof *B);
    cr_assert(A && B);
    for (size_t i = 0; i < nA; i++) A[i] = (int32_t)(i % 1000);
    for (size_t i = 0; i < nB; i++) B[i] = (int32_t)((i * 31) % 1000);
    recall_err err = {0};
    cr_assert_eq(rc_session_save(path, A, nA, 1000, &err), RECALL_OK, "%s", err.msg);
    srand((unsigned)time(NULL));
    int mid_write = 0, iters = 0;
    for (; iters < 150 && mid_write < 3; iters++) {
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            for (unsigned k = 0;; k++) {
                recall_err e = {0};
                if (k & 1 ? rc_session_save(path, A, nA, 1000, &e) : rc_session_save(path, B, nB, 1000, &e)) _exit(3);
            }
        }
        usleep((useconds_t)(rand() % 30000));
        kill(pid, SIGKILL);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st), "the writer failed on its own (status %d)", st);
        struct stat ts;
        if (stat(tmp, &ts) == 0) mid_write++; /* killed between open and rename of PATH.tmp */
        rc_session s;
        err = (recall_err){0};
        cr_assert_eq(rc_session_load(path, &s, &err), RECALL_OK, "after kill %d: %s", iters, err.msg);
        const int32_t *want = s.n == nA ? A : B;
        cr_assert(s.n == nA || s.n == nB, "after kill %d: %zu ids", iters, s.n);
        cr_assert_eq(memcmp(s.ids, want, s.n * sizeof *want), 0, "after kill %d: content differs", iters);
        rc_session_free(&s);
    }
    cr_log_info("session atomic: %d kills, %d landed mid-save", iters, mid_write);
    cr_expect_geq(mid_write, 1, "no kill landed in the middle of a save in %d tries", iters);
    unlink(tmp);
    unlink(path);
    rmdir(d);
    free(A);
    free(B);
    free(d);
}
