/* fixture.h - test fixtures shared by the model tests: worldA converted once into a blob that is
 * cached under build/ (re-made whenever the test binary is newer than the cached blob). */
#ifndef RECALL_TEST_FIXTURE_H
#define RECALL_TEST_FIXTURE_H

#include <stddef.h>

/* weights: "f32", "bf16" or "nf4". Returns the blob path (a string constant), or NULL on failure
 * (the reason is printed to stderr). Safe to call from parallel test processes: each converts to a
 * unique temporary name and renames it into place. */
const char *fixture_worldA_blob(const char *weights);
/* The same blob with the int8 lm_head screening copy (convert --lm-head-screen). */
const char *fixture_worldA_screen_blob(const char *weights);
/* The trained world (tests/golden/trained, made by tools/train_world/train.py): its blob at
 * weights "f32" | "bf16" | "nf4", converted by rc_convert like the real artifacts. */
#define FIXTURE_TRAINED "tests/golden/trained"
const char *fixture_trained_blob(const char *weights);
/* fixture_worldA_blob(weights) opened with rc_blob_open (mapped); aborts the test on failure. */
struct rc_blob *fixture_open_worldA(const char *weights);

/* Reads a golden .npz array as float32 (malloc'd, numel in *n). Aborts the test on failure. */
float *fixture_npz_f32(const char *path, const char *key, size_t *n);
/* Same, as int32 (values must be integers). */
int *fixture_npz_i32(const char *path, const char *key, size_t *n);

/* Runs a shell command; returns its exit status (-1 if it did not exit) and, when out is not
 * NULL, its stdout (malloc'd, NUL-terminated). Aborts the test if the command cannot start. */
int fixture_sh(const char *cmd, char **out);
/* Reads and parses a JSON file (the test fails on any error); release with json_free. */
struct json_doc;
struct json_doc *fixture_read_json(const char *path);

#endif
