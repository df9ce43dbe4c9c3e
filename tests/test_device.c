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
 *   releases_mapped_pages a device-profile turn on the blob mapped from its file leaves none of the
 *                        pages it read and released resident (pagemap, 64 KiB inside each
 *                        tensor: the kernel's fault-around maps neighbours' pages): the decoder's layer
 *                        matrices (packed), lm_head (read per pick), the pooler's matrices, the
 *                        encoder; and it runs the same bits as the blob read into memory, where
 *                        nothing is released (reply, gate scores, fires, injected ids)
 */
#include "blob.h"
#include "fixture.h"
#include "json.h"
#include "lcg.h"
#include "q8.h"
#include "qwen2.h"
#include "recall_loop.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdint.h>
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

/* One device-profile turn (q8, f16 KV, the screen) of worldA over a feed of random ids long enough
 * to evict, seal and fire at every gate check. */
static void device_turn(rc_blob *b, const int32_t *feed, int n, rc_turn *t) {
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    o.exec.numerics = RC_NUMERICS_Q8;
    o.kv = RC_KV_DT_F16;
    o.lm_screen = RC_LM_SCREEN_ON;
    o.threshold = -1e9f;
    o.turn_cap = 24;
    rc_recall *r;
    recall_err err = {0};
    cr_assert_eq(rc_recall_open(b, &o, &r, &err), RECALL_OK, "%s", err.msg);
    memset(t, 0, sizeof *t);
    cr_assert_eq(rc_recall_reply(r, feed, n, NULL, NULL, t, &err), RECALL_OK, "%s", err.msg);
    rc_recall_close(r);
}

/* Pages of [p, p + n) present in this process's page table, and how many were looked at: those
 * more than 64 KiB inside the range. A read fault maps the file's cached pages of its 64 KiB
 * around it too (the kernel's fault-around), so a read of the next tensor may map pages near a
 * tensor's ends that nothing read. */
static size_t interior_present(int pm, const void *p, size_t n, size_t *looked) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), margin = 65536;
    if (n <= 2 * margin) return 0;
    const uintptr_t a = ((uintptr_t)p + margin + pg - 1) / pg, e = ((uintptr_t)p + n - margin) / pg;
    size_t got = 0;
    for (uintptr_t i = a; i < e; i++) {
        uint64_t v = 0;
        cr_assert_eq(pread(pm, &v, 8, (off_t)(i * 8)), 8);
        got += (v >> 63) & 1u;
        (*looked)++;
    }
    return got;
}

Test(device, releases_mapped_pages, .timeout = 300) {
    const char *dev = fixture_device_blob("worldA");
    cr_assert(dev);
    rc_blob *mapped = NULL, *held = NULL;
    recall_err err = {0};
    cr_assert_eq(rc_blob_open(dev, 0, &mapped, &err), RECALL_OK, "%s", err.msg);
    cr_assert_eq(rc_blob_open(dev, RC_OPEN_NO_MMAP, &held, &err), RECALL_OK, "%s", err.msg);
    int64_t V = 0;
    cr_assert_eq(rc_blob_get_i64(mapped, "qwen2.vocab", &V, &err), RECALL_OK);
    enum { N = 900 };
    int32_t feed[N];
    lcg g = {40};
    for (int i = 0; i < N; i++) feed[i] = (int32_t)(3 + next_u32(&g) % (uint32_t)(V - 3));
    rc_turn a, b;
    device_turn(mapped, feed, N, &a);
    device_turn(held, feed, N, &b);
    cr_assert_gt(a.n_fires, 0, "the turn must fire (BERT encodes)");
    cr_expect_eq(a.n_reply, b.n_reply);
    cr_expect(a.n_reply == b.n_reply && !memcmp(a.reply, b.reply, (size_t)a.n_reply * sizeof *a.reply),
              "the reply differs between the mapped blob (pages released) and the blob in memory");
    cr_assert_eq(a.n_gates, b.n_gates);
    for (int i = 0; i < a.n_gates; i++) cr_expect(!memcmp(&a.gates[i], &b.gates[i], sizeof a.gates[i]), "gate %d", i);
    cr_assert_eq(a.n_fires, b.n_fires);
    for (int i = 0; i < a.n_fires; i++) {
        cr_expect_eq(a.fires[i].nrid, b.fires[i].nrid);
        cr_expect(!memcmp(a.fires[i].rid, b.fires[i].rid, (size_t)a.fires[i].nrid * sizeof *a.fires[i].rid));
    }
    /* what the turn read and released is not resident: decoder layer matrices, lm_head, the
     * pooler's matrices, the encoder's tensors */
#ifdef RECALL_NO_MMAP
    cr_skip_test("built without mmap: the blob is read into memory, nothing is released");
#endif
    int pm = open("/proc/self/pagemap", O_RDONLY);
    if (pm < 0) cr_skip_test("no /proc/self/pagemap");
    static const char *const part[] = {"qwen2.model.layers.", "qwen2.lm_head.weight", "pooler.", "bert."};
    size_t looked = 0;
    for (int k = 0; k < 4; k++) {
        size_t present = 0, seen = 0;
        for (size_t i = 0; i < rc_blob_n_tensors(mapped); i++) {
            const rc_tensor *t = rc_blob_tensor_at(mapped, i);
            if (strncmp(t->name, part[k], strlen(part[k])) || t->ndim != 2) continue; /* vectors: copied or */
            const size_t got = interior_present(pm, t->data, t->nbytes, &seen);     /* read by every forward */
            if (got) cr_log_warn("%s: %zu pages resident", t->name, got);
            present += got;
        }
        cr_expect_eq(present, 0, "%s: %zu of %zu pages still resident after the turn", part[k], present, seen);
        looked += seen;
    }
    cr_expect_gt(looked, 0, "no tensor large enough to look at"); /* worldA: lm_head's pages */
    close(pm);
    rc_turn_free(&a);
    rc_turn_free(&b);
    rc_blob_close(mapped);
    rc_blob_close(held);
}
