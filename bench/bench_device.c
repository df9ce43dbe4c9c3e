/* bench_device.c - the memory of one whole recall turn at real shape, through the public API
 * (src/recall.h), as an application on a device would run it: where every MB goes.
 *
 * usage: bench_device BLOB [--profile exact|device] [--history N] [--decode D] [--threads T]
 *                          [--text FILE] [--pooler-cache MB] [--limits] [--stages] [--open-only]
 *
 * The turn: a conversation of at least N tokens (default 4096) built from the lines of FILE
 * (default the pinned longctx haystack) as user / assistant exchanges in the chat template, then
 * a question; the loop (faithful mode, RC_bge arm, the blob's geometry: window 512, blocks of 128)
 * evicts all but the window into the gist and the block archive, rebuilds, and decodes D tokens
 * (default 128) with its gate threshold at -1e30, so that every gate check fires: each fire
 * BERT-encodes the pending buffer and the sealed blocks it has not encoded yet (the fast
 * schedule's archive keys), scores them and injects two. --profile exact: --numerics exact,
 * f32 KV, the pooler's cache at the library's default; device: q8 numerics, f16 KV, no pooler
 * cache (the CLI's --profile device; the blob's lm_head screen, if any, is used in both:
 * screening reads lm_head's int8 copy and recomputes only the rows that can win).
 * --pooler-cache MB overrides the profile's cache: recall_loop_opts.pooler_cache_mb (0 = the
 * library's default, 256 MiB; < 0 = none).
 *
 * Printed, one process per profile (peaks are the process's): the blob's bytes by part; after
 * the turn, the peak resident set (VmHWM) and the resident set by kind (file-backed: the blob
 * pages the turn touched, by part, read from /proc/self/pagemap over the blob's mapping;
 * anonymous: the q8 packed decoder, the KV caches, the pooler's cache and scratch, the rest);
 * what recall_loop_open declares for max_memory (the estimate the limit is checked against);
 * the turn's wall time, rebuilds, fires and tokens, the wall time spent in fires (from each gate event
 * that fired to its fire event: the BERT encodes, the bridge scoring, the top-k), and a digest of the
 * turn (FNV-1a over every event's values and the reply: the same bits give the same digest on every
 * host and SIMD path; tools/cross_device.sh compares it under qemu-aarch64). The conversation's ids
 * are the same for both profiles (they depend only on the tokenizer).
 *
 * --stages: a line per stage (after recall_open, the conversation's tokenization, recall_loop_open,
 * then at the turn's events: rebuilds 1-3 and every 16th, fires 1-2, tokens 1 and 64, the end): the
 * resident set, its peak since the previous line (VmHWM, reset by /proc/self/clear_refs), anonymous
 * and file-backed, and the blob's pages resident by part. The peak printed at the end is the largest
 * of them. --open-only: the stages up to recall_loop_open, then exit.
 *
 * --limits: no turn; what recall_loop_open declares for max_memory, then the loop opened under a
 * limit one byte short of it (refused: the message is printed) and under the limit itself (opens,
 * packing the decoder under q8), with the peak RSS of that open.
 */
#include "bench_util.h"
#include "blob.h"
#include "bytes.h"
#include "recall.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, const recall_err *err) {
    fprintf(stderr, "bench_device: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    exit(1);
}

/* the blob's parts, by tensor-name prefix (first match wins) */
static const char *const PART_PREFIX[] = {"qwen2.model.layers.", "qwen2.model.embed_tokens.", "qwen2.lm_head.screen.",
                                          "qwen2.lm_head.", "qwen2.", "bert.", "pooler.", "gate.", "bridge.", ""};
static const char *const PART_NAME[] = {"decoder layers", "token embeddings", "lm_head int8 screen", "lm_head",
                                        "decoder norms", "bge (BERT)", "pooler", "gate", "bridge", "other"};
#define N_PARTS ((int)(sizeof PART_NAME / sizeof PART_NAME[0]))

typedef struct {
    uint64_t off, n;
    int part;
} range;

static int part_of(const char *name) {
    for (int p = 0; p < N_PARTS; p++)
        if (!strncmp(name, PART_PREFIX[p], strlen(PART_PREFIX[p]))) return p;
    return N_PARTS - 1;
}

/* The first mapping of `path` in /proc/self/maps: its start address and file offset. */
static int find_mapping(const char *path, uintptr_t *start, uintptr_t *end, uint64_t *file_off) {
    char real[PATH_MAX], line[PATH_MAX + 256];
    if (!realpath(path, real)) return -1;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    int found = -1;
    while (found && fgets(line, sizeof line, f)) {
        unsigned long a, b, off;
        char perms[8], dev[16], file[PATH_MAX];
        unsigned long inode;
        file[0] = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %4095s", &a, &b, perms, &off, dev, &inode, file) >= 6 &&
            !strcmp(file, real)) {
            *start = a, *end = b, *file_off = off;
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* Bytes of [a, a + n) present in this process's page table (/proc/self/pagemap bit 63). */
static uint64_t present_bytes(int pm, uintptr_t a, uint64_t n) {
    const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t first = a / pg, last = (a + n + pg - 1) / pg, got = 0;
    uint64_t buf[4096];
    for (uint64_t p = first; p < last;) {
        const uint64_t k = last - p < 4096 ? last - p : 4096;
        if (pread(pm, buf, k * 8, (off_t)(p * 8)) != (ssize_t)(k * 8)) return 0;
        for (uint64_t i = 0; i < k; i++) got += (buf[i] >> 63) & 1u;
        p += k;
    }
    return got * pg;
}

/* The blob's parts and its mapping in this process, for the pages resident by part. */
typedef struct {
    const char *path;
    const range *rg;
    size_t nt;
} blob_parts;

/* The blob's pages resident now, by part (touched[N_PARTS]); returns the total, 0 if the blob is
 * not mapped from its file. */
static uint64_t resident_by_part(const blob_parts *bp, uint64_t *touched) {
    uint64_t all = 0;
    memset(touched, 0, N_PARTS * sizeof *touched);
    uintptr_t start = 0, end = 0;
    uint64_t foff = 0;
    int pm = open("/proc/self/pagemap", O_RDONLY);
    if (pm >= 0 && find_mapping(bp->path, &start, &end, &foff) == 0 && foff == 0 && end > start)
        for (size_t i = 0; i < bp->nt; i++) {
            const uint64_t got = present_bytes(pm, start + (uintptr_t)bp->rg[i].off, bp->rg[i].n);
            touched[bp->rg[i].part] += got;
            all += got;
        }
    if (pm >= 0) close(pm);
    return all;
}

/* --stages: one line per stage: the resident set now, its peak since the previous stage line
 * (VmHWM, reset after each line), anonymous and file-backed, and the blob's pages resident by
 * part (parts over 0.5 MB). */
static const blob_parts *g_stages;
static double g_peak; /* the largest VmHWM seen at a stage line (each line resets it) */
static void stage(const char *what) {
    if (!g_stages) return;
    uint64_t t[N_PARTS];
    const uint64_t all = resident_by_part(g_stages, t);
    const double hwm = bench_status_mib("VmHWM:");
    if (hwm > g_peak) g_peak = hwm;
    printf("stage %-26s RSS %7.1f MiB (peak since the last %7.1f) anon %7.1f file %7.1f | blob %7.1f MiB:", what,
           bench_status_mib("VmRSS:"), hwm, bench_status_mib("RssAnon:"),
           bench_status_mib("RssFile:"), all / 1048576.0);
    for (int p = 0; p < N_PARTS; p++)
        if (t[p] > 500000) printf(" %s %.1f", PART_NAME[p], t[p] / 1048576.0);
    printf("\n");
    fflush(stdout);
    bench_reset_peak();
}

typedef struct {
    int tokens, rebuilds, fires, injected;
    uint64_t digest; /* FNV-1a over every event's values and the reply: the same bits on every host */
    double t_gate, fire_s; /* wall time from each gate event that fired to its fire event: BERT + scoring */
} counts;

/* What an event says, not how fast: the pooler cache's reuse count is left out. */
static void mix_event(uint64_t *h, const recall_event *ev) {
    const int32_t v[] = {(int32_t)ev->kind, ev->token, ev->c0, ev->fired, ev->injected, ev->n_candidates, ev->n_ids,
                         ev->has_sp, ev->inj_len, ev->window_len};
    *h = rc_fnv1a_more(*h, v, sizeof v);
    *h = rc_fnv1a_more(*h, &ev->score, sizeof ev->score);
    if (ev->ids && ev->n_ids > 0) *h = rc_fnv1a_more(*h, ev->ids, (size_t)ev->n_ids * sizeof *ev->ids);
}

static int on_event(void *ctx, const recall_event *ev) {
    counts *c = ctx;
    mix_event(&c->digest, ev);
    if (ev->kind == RECALL_EV_GATE && ev->fired) c->t_gate = bench_now_s();
    if (ev->kind == RECALL_EV_FIRE) c->fire_s += bench_now_s() - c->t_gate;
    char what[64];
    if (ev->kind == RECALL_EV_TOKEN && (c->tokens == 0 || c->tokens == 63)) {
        snprintf(what, sizeof what, "token %d", c->tokens + 1);
        stage(what);
    }
    if (ev->kind == RECALL_EV_REBUILD && (c->rebuilds < 3 || c->rebuilds % 16 == 0)) {
        snprintf(what, sizeof what, "rebuild %d", c->rebuilds + 1);
        stage(what);
    }
    if (ev->kind == RECALL_EV_FIRE && c->fires < 2) {
        snprintf(what, sizeof what, "fire %d", c->fires + 1);
        stage(what);
    }
    if (ev->kind == RECALL_EV_TOKEN) c->tokens++;
    if (ev->kind == RECALL_EV_REBUILD) c->rebuilds++;
    if (ev->kind == RECALL_EV_FIRE) c->fires++, c->injected += ev->injected;
    return 0;
}

/* The conversation: exchanges of consecutive lines of text until n tokens, then a question. */
static int32_t *conversation(recall_model *m, const char *text_path, int n, size_t *len) {
    FILE *f = fopen(text_path, "r");
    if (!f) die(text_path, NULL);
    int32_t *all = NULL;
    size_t cap = 0, have = 0;
    char a[512], b[512];
    recall_err err = {0};
    while ((int)have < n) {
        if (!fgets(a, sizeof a, f) || !fgets(b, sizeof b, f)) {
            rewind(f);
            continue;
        }
        a[strcspn(a, "\n")] = 0, b[strcspn(b, "\n")] = 0;
        if (!a[0] || !b[0]) continue;
        int32_t *ids = NULL;
        size_t k = 0;
        if (recall_chat_segment(m, 1, a, b, &ids, &k, &err)) die("chat segment", &err);
        if (have + k > cap) {
            cap = 2 * (have + k);
            all = realloc(all, cap * sizeof *all);
            if (!all) die("out of memory", NULL);
        }
        memcpy(all + have, ids, k * sizeof *ids);
        have += k;
        recall_free(m, ids);
    }
    fclose(f);
    int32_t *q = NULL;
    size_t k = 0;
    if (recall_chat_segment(m, 0, "What did I tell you about the blob format?", NULL, &q, &k, &err))
        die("chat segment", &err);
    all = realloc(all, (have + k) * sizeof *all);
    if (!all) die("out of memory", NULL);
    memcpy(all + have, q, k * sizeof *q);
    recall_free(m, q);
    *len = have + k;
    return all;
}

static void loop_opts(recall_model *m, recall_loop_opts *lo, int device, int decode, int threads, int cache_mb) {
    recall_loop_opts_init(m, lo);
    lo->threshold = -1e30f;
    lo->turn_cap = decode;
    lo->threads = threads;
    lo->kv = device ? RECALL_KV_F16 : RECALL_KV_F32;
    lo->numerics = device ? RECALL_NUMERICS_Q8 : RECALL_NUMERICS_EXACT;
    lo->pooler_cache_mb = cache_mb;
}

/* What recall_loop_open declares for max_memory: a model limited to 64 MiB (room for the
 * tokenizer's tables, not for a loop) refuses the loop and names the bytes it needs. */
static unsigned long long declared(const char *path, int device, int decode, int threads, int cache_mb) {
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.max_memory = 64u << 20;
    recall_model *m = NULL;
    recall_err err = {0};
    if (recall_open(path, &o, &m, &err)) die("open", &err);
    recall_loop_opts lo;
    loop_opts(m, &lo, device, decode, threads, cache_mb);
    recall_loop *l = NULL;
    unsigned long long need = 0, used = 0;
    if (recall_loop_open(m, &lo, &l, &err) == RECALL_E_LIMIT) {
        const char *at = strstr(err.msg, "needs about ");
        if (at) sscanf(at, "needs about %llu bytes (%llu already in use)", &need, &used);
    }
    recall_loop_close(l);
    recall_close(m);
    return need + used;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_device BLOB [--profile exact|device] [--history N] [--decode D] [--threads T] "
                        "[--text FILE] [--pooler-cache MB] [--limits] [--stages] [--open-only]\n");
        return 2;
    }
    const char *path = argv[1], *text = "tests/golden/longctx/haystack.txt", *profile = "exact";
    int history = 4096, decode = 128, threads = 2, cache_mb = INT_MIN, limits = 0, stages = 0, open_only = 0;
    for (int i = 2; i < argc; i += 2) {
        if (!strcmp(argv[i], "--limits") || !strcmp(argv[i], "--stages") || !strcmp(argv[i], "--open-only")) {
            limits |= !strcmp(argv[i], "--limits");
            stages |= !strcmp(argv[i], "--stages") || !strcmp(argv[i], "--open-only");
            open_only |= !strcmp(argv[i], "--open-only");
            i--;
            continue;
        }
        if (i + 1 >= argc) die(argv[i], NULL);
        if (!strcmp(argv[i], "--profile")) profile = argv[i + 1];
        else if (!strcmp(argv[i], "--history")) history = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--text")) text = argv[i + 1];
        else if (!strcmp(argv[i], "--pooler-cache")) cache_mb = atoi(argv[i + 1]);
        else die(argv[i], NULL);
    }
    const int device = !strcmp(profile, "device");
    if (!device && strcmp(profile, "exact")) die("--profile: exact or device", NULL);
    if (cache_mb == INT_MIN) cache_mb = device ? -1 : 0; /* the profile's pooler cache */

    /* the blob's tensor table: bytes by part (the mapping is closed again before the turn) */
    recall_err err = {0};
    rc_blob *b = NULL;
    if (rc_blob_open(path, 0, &b, &err)) die("open", &err);
    const uint64_t file_size = rc_blob_hdr(b)->file_size;
    const size_t nt = rc_blob_n_tensors(b);
    range *rg = calloc(nt, sizeof *rg);
    uint64_t part_bytes[N_PARTS] = {0};
    for (size_t i = 0; i < nt; i++) {
        const rc_tensor *t = rc_blob_tensor_at(b, i);
        rg[i] = (range){t->offset, t->nbytes, part_of(t->name)};
        part_bytes[rg[i].part] += t->nbytes;
    }
    char weights[64];
    snprintf(weights, sizeof weights, "decoder %s, bge %s", rc_blob_weights(b, "qwen2"), rc_blob_weights(b, "bert"));
    rc_blob_close(b);

    const unsigned long long need = declared(path, device, decode, threads, cache_mb);
    recall_open_opts o;
    recall_open_opts_init(&o);
    o.kv = device ? RECALL_KV_F16 : RECALL_KV_F32;
    o.numerics = device ? RECALL_NUMERICS_Q8 : RECALL_NUMERICS_EXACT;
    recall_model *m = NULL;
    if (limits) {
        printf("bench_device --limits: %s (%s), profile %s: recall_loop_open declares %llu bytes (%.1f MiB)\n", path,
               weights, profile, need, need / 1048576.0);
        for (int k = 0; k < 2; k++) {
            o.max_memory = need - (k ? 0 : 1);
            recall_err e = {0};
            if (recall_open(path, &o, &m, &e)) die("open", &e);
            recall_loop_opts lo;
            loop_opts(m, &lo, device, decode, threads, cache_mb);
            recall_loop *l = NULL;
            const recall_status st = recall_loop_open(m, &lo, &l, &e);
            printf("  max_memory %llu: %s%s\n", (unsigned long long)o.max_memory, st ? "refused: " : "opened",
                   st ? e.msg : "");
            recall_loop_close(l);
            recall_close(m);
            m = NULL;
        }
        printf("  peak RSS %.1f MiB\n", bench_status_mib("VmHWM:"));
        free(rg);
        return 0;
    }
    const blob_parts bp = {path, rg, nt};
    if (stages) g_stages = &bp, bench_reset_peak();
    stage("start");
    if (recall_open(path, &o, &m, &err)) die("open", &err);
    stage("recall_open");
    size_t n_feed = 0;
    int32_t *feed = conversation(m, text, history, &n_feed);
    stage("conversation tokenized");
    recall_loop_opts lo;
    loop_opts(m, &lo, device, decode, threads, cache_mb);
    recall_loop *l = NULL;
    if (recall_loop_open(m, &lo, &l, &err)) die("loop open", &err);
    const double rss_open = bench_status_mib("VmRSS:");
    stage("recall_loop_open");
    if (open_only) {
        recall_loop_close(l);
        recall_close(m);
        free(feed);
        free(rg);
        return 0;
    }
    counts c = {.digest = RC_FNV1A_OFFSET};
    recall_reply rep;
    const double t0 = bench_now_s(), c0 = bench_cpu_s();
    if (recall_turn(l, feed, n_feed, on_event, &c, &rep, &err)) die("turn", &err);
    const double wall = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
    stage("end of the turn");
    c.digest = rc_fnv1a_more(c.digest, rep.ids, rep.n_ids * sizeof *rep.ids);
    c.digest = rc_fnv1a_more(c.digest, &rep.min_margin, sizeof rep.min_margin);

    const double hwm = bench_status_mib("VmHWM:"), peak = hwm > g_peak ? hwm : g_peak, rss = bench_status_mib("VmRSS:");
    const double anon = bench_status_mib("RssAnon:"), file = bench_status_mib("RssFile:");
    uint64_t touched[N_PARTS];
    const uint64_t touched_all = resident_by_part(&bp, touched);

    printf("bench_device: %s (%s), profile %s (numerics %s, kv %s), %d threads\n", path, weights, profile,
           device ? "q8" : "exact", device ? "f16" : "f32", threads);
    printf("turn: %zu-token conversation, %d tokens decoded, %d rebuilds, %d fires (%d injected); %.1f s wall, "
           "%.1f s CPU; in fires (BERT encodes, scoring) %.2f s wall\n", n_feed, c.tokens, c.rebuilds, c.fires,
           c.injected, wall, cpu, c.fire_s);
    printf("blob: %llu bytes (%.1f MB)\n", (unsigned long long)file_size, file_size / 1e6);
    printf("  %-22s %12s %12s\n", "part", "in the blob", "touched");
    for (int p = 0; p < N_PARTS; p++)
        if (part_bytes[p])
            printf("  %-22s %9.1f MB %9.1f MB\n", PART_NAME[p], part_bytes[p] / 1e6, touched[p] / 1e6);
    printf("  %-22s %9.1f MB %9.1f MB\n", "all tensors", 0.0 + (double)(file_size) / 1e6, touched_all / 1e6);
    printf("memory: peak RSS %.1f MiB (%.1f MB); after the turn RSS %.1f MiB = file-backed %.1f MiB (the blob's "
           "touched pages %.1f MiB) + anonymous %.1f MiB; RSS after the loop opened %.1f MiB\n",
           peak, peak * 1.048576, rss, file, touched_all / 1048576.0, anon, rss_open);
    printf("declared for max_memory (recall_loop_open's estimate: KV caches, q8 pack, scratch, BERT, tokenizer): "
           "%.1f MiB\n", need / 1048576.0);
    printf("result: profile=%s feed=%zu decoded=%d rebuilds=%d fires=%d wall_s=%.1f cpu_s=%.1f peak_rss_mib=%.1f "
           "rss_mib=%.1f file_mib=%.1f anon_mib=%.1f touched_mib=%.1f declared_mib=%.1f blob_mb=%.1f "
           "fire_s=%.2f digest=%016llx\n",
           profile, n_feed, c.tokens, c.rebuilds, c.fires, wall, cpu, peak, rss, file, anon, touched_all / 1048576.0,
           need / 1048576.0, file_size / 1e6, c.fire_s, (unsigned long long)c.digest);
    recall_reply_free(l, &rep);
    recall_loop_close(l);
    recall_close(m);
    free(feed);
    free(rg);
    return 0;
}
