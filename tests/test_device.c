/* test_device.c - the device profile (docs/PROFILES.md): `--profile device` is --numerics q8
 * --kv f16 --lm-head-screen on, on a blob converted with --weights nf4 --bge-weights nf4
 * --lm-head-screen.
 *
 *   named_in_outputs     a replay trace and an eval record name the profile that ran: "device" for
 *                        the whole set, "exact" for exact numerics and f32 KV, "custom" when a later
 *                        option changes one of the set (--profile device --kv f32); the replay's
 *                        banner names it too
 *   refuses_other_blobs  --profile device on a blob without the nf4 encoder or the screen is an
 *                        argument error naming what the blob holds and the convert options it needs
 *   same_bits_as_flags   --profile device runs bitwise what the three flags run (the traces are
 *                        the same bytes)
 */
#include "fixture.h"
#include "json.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH "tests/golden/recall_bench.json"

static char *trace_path(const char *tag) {
    static char p[4][96];
    static int i;
    char *s = p[i++ & 3];
    snprintf(s, 96, "build/device_%s.%ld.json", tag, (long)getpid());
    return s;
}

static const char *str_of(const json_doc *d, const char *key) {
    const json_value *v = json_get_type(json_root(d), key, JSON_STR);
    return v ? v->str : "(absent)";
}

/* replay problem 0 of worldA's bench with `opts`; the trace's "profile" */
static void expect_replay_profile(const char *blob, const char *opts, const char *want) {
    char *tr = trace_path("replay");
    char *out = fixture_cmd(0, NULL, "./recall replay %s --bench " BENCH " --problem 0 %s --trace %s 2>&1", blob, opts, tr);
    char banner[64];
    snprintf(banner, sizeof banner, "profile %s", want);
    cr_expect(strstr(out, banner) != NULL, "%s: banner without '%s': %.300s", opts, banner, out);
    free(out);
    json_doc *d = fixture_json(tr);
    cr_expect_str_eq(str_of(d, "profile"), want, "%s", opts);
    json_free(d);
    unlink(tr);
}

Test(device, named_in_outputs, .timeout = 300) {
    const char *dev = fixture_device_blob("worldA");
    cr_assert(dev);
    expect_replay_profile(dev, "--profile device", "device");
    expect_replay_profile(dev, "", "exact");
    expect_replay_profile(dev, "--profile device --kv f32", "custom");
    char *ev = trace_path("eval");
    free(fixture_cmd(0, NULL, "./recall eval %s --bench " BENCH " --problems 0 --arms SP --profile device --json %s "
                     ">/dev/null 2>&1", dev, ev));
    json_doc *d = fixture_json(ev);
    cr_expect_str_eq(str_of(d, "profile"), "device");
    cr_expect_str_eq(str_of(d, "weights"), "nf4");
    cr_expect_str_eq(str_of(d, "bge_weights"), "nf4");
    json_free(d);
    unlink(ev);
}

Test(device, refuses_other_blobs) {
    const char *nf4 = fixture_worldA_blob("nf4");
    cr_assert(nf4);
    char *tr = trace_path("refused");
    char *out = fixture_cmd(1, NULL, "./recall replay %s --bench " BENCH " --problem 0 --profile device --trace %s 2>&1",
                            nf4, tr);
    cr_expect(strstr(out, "--profile device needs a blob converted with --weights nf4 --bge-weights nf4 "
                          "--lm-head-screen (this one: decoder nf4, BERT f32, no lm_head screen)") != NULL, "%s", out);
    cr_expect_neq(access(tr, F_OK), 0, "no trace written");
    free(out);
    out = fixture_cmd(2, NULL, "./recall replay %s --bench " BENCH " --problem 0 --profile phone --trace %s 2>&1", nf4, tr);
    cr_expect(strstr(out, "exact or device") != NULL, "%s", out);
    free(out);
}

Test(device, same_bits_as_flags, .timeout = 300) {
    const char *dev = fixture_device_blob("worldA");
    cr_assert(dev);
    char *a = trace_path("profile"), *b = trace_path("flags");
    free(fixture_cmd(0, NULL, "./recall replay %s --bench " BENCH " --problem 1 --profile device --trace %s 2>/dev/null",
                     dev, a));
    free(fixture_cmd(0, NULL, "./recall replay %s --bench " BENCH " --problem 1 --numerics q8 --kv f16 "
                     "--lm-head-screen on --trace %s 2>/dev/null", dev, b));
    size_t na = 0, nb = 0;
    char *ta = fixture_read(a, &na), *tb = fixture_read(b, &nb);
    cr_expect(na == nb && memcmp(ta, tb, na) == 0, "--profile device and its three flags wrote different traces");
    cr_expect(strstr(ta, "\"profile\": \"device\"") != NULL);
    free(ta);
    free(tb);
    unlink(a);
    unlink(b);
}
