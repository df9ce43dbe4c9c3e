/* fixture.h - test fixtures shared by the model tests: worldA converted once into a blob that is
 * cached under build/ (re-made whenever the test binary is newer than the cached blob). */
#ifndef RECALL_TEST_FIXTURE_H
#define RECALL_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

/* The engine under test runs one thread unless a test asks for more (an --threads option,
 * exec.threads): the test binary sets RECALL_THREADS=1 at startup when it is not set. Criterion
 * already runs one test process per core, and the CLI's default of one thread per core put two
 * threads on each core, whose pool waits cost up to five times a test's CPU. The thread counts are
 * checked where a test names them (threads_det, q8_model, kv_pages, kv_cli, score_cli, recall_q8,
 * cli_opts/default_threads_are_the_cores without the variable). */

/* weights: "f32", "bf16" or "nf4". Returns the blob path (a string constant), or NULL on failure
 * (the reason is printed to stderr). Safe to call from parallel test processes: each converts to a
 * unique temporary name and renames it into place. */
const char *fixture_worldA_blob(const char *weights);
/* The same blob with the int8 lm_head screening copy (convert --lm-head-screen). */
const char *fixture_worldA_screen_blob(const char *weights);
/* The trained world (tests/golden/trained: the world of broad English, made by
 * tools/train_world/train.py --world broad): its blob at weights "f32" | "bf16" | "nf4", converted
 * by rc_convert like the real artifacts. */
#define FIXTURE_TRAINED "tests/golden/trained"
const char *fixture_trained_blob(const char *weights);
/* The wide world (tests/golden/wide: the trained world's decoder continued on facts, questions and
 * small talk worded as people type them, train.py --wording wide; what `make demo` and the page
 * run), the same way. */
#define FIXTURE_WIDE "tests/golden/wide"
const char *fixture_wide_blob(const char *weights);
/* The templated world (tests/golden/templated, train.py --world bench: the benchmark's own
 * keywords and templates, the first trained world; older loop features are pinned on it), the
 * same way. */
#define FIXTURE_TEMPLATED "tests/golden/templated"
const char *fixture_templated_blob(const char *weights);
/* World "worldA" or "trained" with its decoder stored as `weights` and its BERT encoder as
 * `bge_weights` ("f32" | "bf16" | "nf4": convert --weights W --bge-weights B), cached the same way. */
const char *fixture_bge_blob(const char *world, const char *weights, const char *bge_weights);
/* The device profile's blob of world "worldA" or "trained" (docs/PROFILES.md): convert --weights nf4
 * --bge-weights nf4 --lm-head-screen. */
const char *fixture_device_blob(const char *world);
/* fixture_worldA_blob(weights) opened with rc_blob_open (mapped); aborts the test on failure. */
struct rc_blob *fixture_open_worldA(const char *weights);

/* The convert options of worldA (tests/golden/worldA) into `out`, with the given weights. */
#include "convert.h"
rc_convert_opts fixture_worldA_convert_opts(const char *weights, const char *out);
/* Any blob opened with rc_blob_open (mapped); aborts the test on failure. */
struct rc_blob *fixture_open(const char *path);

/* What recall_open counts against max_memory for the blob file itself: nothing when it is mapped,
 * its size in a -DRECALL_NO_MMAP build (which reads it into memory). */
uint64_t fixture_blob_counted(const char *path);

/* The blob's Qwen2 tokenizer (rc_bpe_free it); aborts the test on failure. */
struct rc_bpe *fixture_blob_bpe(const struct rc_blob *b);

/* The decoder of a blob (rc_qwen2_open with max_ctx); aborts the test on failure. */
struct rc_qwen2 *fixture_qwen2(const struct rc_blob *b, int max_ctx);

/* A whole file, NUL-terminated (malloc'd; its length in *len when len is not NULL); aborts the
 * test on failure. */
char *fixture_read(const char *path, size_t *len);
/* Writes text to path; aborts the test on failure. */
void fixture_write(const char *path, const char *text);
/* A JSON file parsed (json_free it); aborts the test on failure. */
#include "json.h"
json_doc *fixture_json(const char *path);
/* Benchmark problem `seed` of tests/golden/recall_bench.json (rc_problem_free it). */
#include "problems.h"
rc_problem fixture_problem(uint32_t seed);

/* Reads a golden .npz array as float32 (malloc'd, numel in *n). Aborts the test on failure. */
float *fixture_npz_f32(const char *path, const char *key, size_t *n);
/* Same, as int32 (values must be integers). */
int *fixture_npz_i32(const char *path, const char *key, size_t *n);

/* Two runs of the recall loop bitwise equal, record for record (the schema of the loop goldens):
 * every turn's reply ids, gate records (c0, score bits, fired), fires (c0, score bits, candidates,
 * each candidate's bridge score bits, top, injected ids, injected), rebuilds (c0, gist, injection,
 * window and edge lengths; not `reused`, which is a schedule's own statistic), rebuild top-5 (ids and
 * logit bits), low-margin entries and the minimum margin; for runs, the final history too. `tag`
 * and the turn index name the comparison in a failure. */
void fixture_expect_same_turn(const rc_turn *a, const rc_turn *b, const char *tag, int t);
/* The four worldA loop goldens (faithful and clean mode, at fp32 and nf4) as four tests of suite,
 * named pfx##faithful_fp32 and so on, each calling fn(golden path, weights, mode). */
#define FIXTURE_LOOP_GOLDENS(suite, pfx, fn)                                                              \
    Test(suite, pfx##faithful_fp32, .timeout = 900) {                                                     \
        fn("tests/golden/worldA/loop_A_seed0_faithful_fp32.json", "f32", RC_MODE_FAITHFUL);               \
    }                                                                                                     \
    Test(suite, pfx##clean_fp32, .timeout = 900) {                                                        \
        fn("tests/golden/worldA/loop_A_seed0_clean_fp32.json", "f32", RC_MODE_CLEAN);                     \
    }                                                                                                     \
    Test(suite, pfx##faithful_nf4, .timeout = 900) {                                                      \
        fn("tests/golden/worldA/loop_A_seed0_faithful_nf4.json", "nf4", RC_MODE_FAITHFUL);                \
    }                                                                                                     \
    Test(suite, pfx##clean_nf4, .timeout = 900) {                                                         \
        fn("tests/golden/worldA/loop_A_seed0_clean_nf4.json", "nf4", RC_MODE_CLEAN);                      \
    }
void fixture_expect_same_run(const rc_problem_run *a, const rc_problem_run *b, const char *tag);

/* Runs the shell command printf(fmt, ...), asserts its exit status and, unless needle is NULL,
 * that its stdout holds needle; returns that stdout (malloc'd). */
char *fixture_cmd(int status, const char *needle, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Runs a shell command once for all the tests of a build: the first caller runs it while it holds
 * an exclusive lock on build/NAME.lock (a test process that wants it meanwhile waits instead of
 * running it too) and records its exit status and stdout in build/NAME.out; every later call, in
 * any test process, returns the recorded ones while that file is newer than ./recall and the test
 * binary. For commands whose outputs (say a trace under build/) are the same bits every time and
 * are read by several tests. Returns the exit status and, when out is not NULL, the stdout
 * (malloc'd). */
int fixture_sh_once(const char *name, const char *cmd, char **out);
/* `./recall replay` of benchmark problem 0 (tests/golden/recall_bench.json) on worldA's blob of
 * `weights` ("f32" | "nf4") in `mode` ("faithful" | "clean"), run once per build for every test that
 * reads it (fixture_sh_once; exit status 0 asserted): returns the trace's path,
 * build/replay_worldA_WEIGHTS_MODE.json, which no test may change, and, when out is not NULL, the
 * command's stdout and stderr (malloc'd). */
const char *fixture_worldA_replay(const char *weights, const char *mode, char **out);

/* Asserts got[0..n) and want[0..n) are the same bits; a failure names `what`, the first differing
 * float and both bit patterns. */
void fixture_expect_same_bits(const float *got, const float *want, size_t n, const char *what);

/* Runs a shell command; returns its exit status (-1 if it did not exit) and, when out is not
 * NULL, its stdout (malloc'd, NUL-terminated). Aborts the test if the command cannot start. */
int fixture_sh(const char *cmd, char **out);

/* Whether a SIMD path's checks run here: 1 when the path is available (rc_simd_available), 0 when
 * this CPU cannot run its instruction set (the test may skip it). A CPU that runs the set while the
 * path is not available (not compiled in, or dispatch broken) fails the test: a path test must
 * not pass on the paths that happen to be left. The CPU is read independently of simd.c's
 * dispatch: the flags of /proc/cpuinfo on x86-64 (cpuid through the compiler if it is missing);
 * NEON is architectural on aarch64. `p` is an rc_simd_path. */
int fixture_path_runs(int p);

#endif
