/* criterion.h (cross-test stand-in) - the part of Criterion's API that the suites run under qemu
 * use (Test, cr_assert*, cr_expect*, cr_skip_test, cr_log_info), for targets without a Criterion
 * build: `make cross-test-aarch64` compiles tests/test_kv_pages.c and tests/test_lm_head_screen.c
 * unchanged against this header (-isystem tests/cross) and tests/cross/criterion_shim.c, whose
 * runner forks one process per test as Criterion does. Message arguments are evaluated only when
 * the check fails. Not a general replacement: what the suites do not use is not here. */
#ifndef RECALL_CRITERION_SHIM_H
#define RECALL_CRITERION_SHIM_H

#include <stdio.h>
#include <string.h>

typedef void (*shim_test_fn)(void);
void shim_register(const char *suite, const char *name, shim_test_fn fn);
/* fatal: end the test; fmt "" = no message (the failed expression is printed either way) */
void shim_fail(int fatal, const char *file, int line, const char *expr, const char *fmt, ...);
void shim_skip(const char *fmt, ...);
void shim_log(const char *fmt, ...);

/* Test(suite, name[, .option = value ...]): the options (timeouts) are ignored */
#define Test(...) SHIM_TEST_(__VA_ARGS__, 0)
#define SHIM_TEST_(suite, name, ...)                                                                                   \
    static void shim_##suite##__##name(void);                                                                          \
    __attribute__((constructor)) static void shim_reg_##suite##__##name(void) {                                        \
        shim_register(#suite, #name, shim_##suite##__##name);                                                          \
    }                                                                                                                  \
    static void shim_##suite##__##name(void)

#define SHIM_CHECK_(fatal, cond, expr, ...)                                                                            \
    do {                                                                                                               \
        if (!(cond)) shim_fail(fatal, __FILE__, __LINE__, expr, __VA_ARGS__);                                          \
    } while (0)
#define SHIM_ONE_(fatal, cond, ...) SHIM_CHECK_(fatal, cond, #cond, __VA_ARGS__)
#define SHIM_CMP_(fatal, op, a, b, ...) SHIM_CHECK_(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)

#define cr_assert(...) SHIM_ONE_(1, __VA_ARGS__, "")
#define cr_expect(...) SHIM_ONE_(0, __VA_ARGS__, "")
#define cr_assert_eq(...) SHIM_CMP_(1, ==, __VA_ARGS__, "")
#define cr_assert_neq(...) SHIM_CMP_(1, !=, __VA_ARGS__, "")
#define cr_assert_lt(...) SHIM_CMP_(1, <, __VA_ARGS__, "")
#define cr_assert_leq(...) SHIM_CMP_(1, <=, __VA_ARGS__, "")
#define cr_assert_gt(...) SHIM_CMP_(1, >, __VA_ARGS__, "")
#define cr_assert_geq(...) SHIM_CMP_(1, >=, __VA_ARGS__, "")
#define cr_expect_lt(...) SHIM_CMP_(0, <, __VA_ARGS__, "")
#define cr_assert_null(...) SHIM_NULL_(__VA_ARGS__, "")
#define SHIM_NULL_(p, ...) SHIM_CHECK_(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_str_eq(...) SHIM_STR_(==, __VA_ARGS__, "")
#define cr_assert_str_neq(...) SHIM_STR_(!=, __VA_ARGS__, "")
#define SHIM_STR_(op, a, b, ...) SHIM_CHECK_(1, strcmp((a), (b)) op 0, "strcmp(" #a ", " #b ") " #op " 0", __VA_ARGS__)
#define cr_assert_arr_eq(...) SHIM_ARR_(__VA_ARGS__, "")
#define SHIM_ARR_(a, b, n, ...)                                                                                        \
    SHIM_CHECK_(1, !memcmp((a), (b), (n)), "memcmp(" #a ", " #b ", " #n ") == 0", __VA_ARGS__)
#define cr_assert_fail(...) shim_fail(1, __FILE__, __LINE__, "cr_assert_fail", __VA_ARGS__, "")
#define cr_skip_test(...) shim_skip(__VA_ARGS__, "")
#define cr_log_info(...) shim_log(__VA_ARGS__, "")

#endif
