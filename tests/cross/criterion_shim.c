/* criterion_shim.c - the runner behind tests/cross/criterion/criterion.h: the registered tests
 * (in name order), each in a child process; usage: SUITES [PATTERN | !PATTERN ...] runs the tests
 * whose "suite/name" matches one of the fnmatch patterns (all when there is none) and none of the
 * !patterns. Prints [PASS] / [FAIL] / [SKIP] / [CRASH] per test, the tests left out, and
 * Criterion's synthesis line; exits 1 if any test failed or crashed, or none ran. */
#include "criterion/criterion.h"

#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHIM_MAX_TESTS 256

typedef struct {
    const char *suite, *name;
    shim_test_fn fn;
} shim_test;

/* the registry and the current test's state: one runner per process, filled before main */
static shim_test tests[SHIM_MAX_TESTS];
static int n_tests, failed_soft;
static jmp_buf test_end;

void shim_register(const char *suite, const char *name, shim_test_fn fn) {
    if (n_tests == SHIM_MAX_TESTS) {
        fprintf(stderr, "criterion shim: more than %d tests\n", SHIM_MAX_TESTS);
        exit(2);
    }
    tests[n_tests++] = (shim_test){suite, name, fn};
}

static void vmsg(const char *fmt, va_list ap) {
    if (fmt && *fmt) {
        fputs("[----]   ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
    }
}

void shim_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
    printf("[----] %s:%d: %s failed: %s\n", file, line, fatal ? "Assertion" : "Expectation", expr);
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (fatal) longjmp(test_end, 1);
    failed_soft = 1;
}

void shim_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    fflush(stdout);
    longjmp(test_end, 2);
}

void shim_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static int by_name(const void *a, const void *b) {
    const shim_test *x = a, *y = b;
    int c = strcmp(x->suite, y->suite);
    return c ? c : strcmp(x->name, y->name);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    qsort(tests, (size_t)n_tests, sizeof tests[0], by_name);
    int ran = 0, pass = 0, fail = 0, crash = 0, skip = 0;
    for (int i = 0; i < n_tests; i++) {
        char full[256];
        snprintf(full, sizeof full, "%s/%s", tests[i].suite, tests[i].name);
        int any_plain = 0, want = 0, left_out = 0;
        for (int a = 1; a < argc; a++) {
            if (argv[a][0] == '!') left_out |= !fnmatch(argv[a] + 1, full, 0);
            else any_plain = 1, want |= !fnmatch(argv[a], full, 0);
        }
        if (!any_plain) want = 1;
        if (!want || left_out) {
            if (left_out) printf("[LEFT OUT] %s::%s\n", tests[i].suite, tests[i].name);
            continue;
        }
        fflush(stdout);
        const double t0 = now_s();
        const pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            const int how = setjmp(test_end);
            if (!how) tests[i].fn();
            fflush(stdout);
            _exit(how == 1 || failed_soft ? 1 : how == 2 ? 3 : 0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        const double dt = now_s() - t0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
            printf("[SKIP] %s::%s\n", tests[i].suite, tests[i].name);
            skip++;
            continue;
        }
        ran++;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            printf("[PASS] %s::%s: (%.2fs)\n", tests[i].suite, tests[i].name, dt);
            pass++;
        } else if (WIFEXITED(st)) {
            printf("[FAIL] %s::%s: (%.2fs)\n", tests[i].suite, tests[i].name, dt);
            fail++;
        } else {
            printf("[CRASH] %s::%s: signal %d (%.2fs)\n", tests[i].suite, tests[i].name, WTERMSIG(st), dt);
            crash++;
        }
    }
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d | Skipped: %d\n", ran, pass, fail,
           crash, skip);
    return fail || crash || !ran ? 1 : 0;
}
