/* test_score.c - `recall score` and --tokens-file through the real CLI (./recall, built by
 * `make test`), on the worldA f32 blob:
 *   - the 37 ids of qwen2_fp32.npz: every per-position NLL within 1e-4 of the NLL implied by the
 *     golden logits (computed here in double: -(logit[target] - logsumexp)), every greedy token
 *     equal to the argmax of the golden logits;
 *   - llama-perplexity protocol on 100 synthetic ids, --chunk 16: 6 chunks (the 4-id tail unscored),
 *     positions [8, 15) of each; the final PPL, its +/- and every running per-chunk PPL equal the
 *     values computed from independent library prefills of each chunk; --bos replaces each chunk's
 *     first id by tok.bos; prefill progress reaches every row on stderr; the ids hash is XXH64;
 *   - --tokens-file (JSON array or whitespace-separated) gives the same output as --ids, for score
 *     and forward;
 *   - a malformed tokens file is refused naming the file and the byte offset; input shorter than
 *     one chunk and a context beyond qwen2.max_pos are refused naming both numbers;
 *   - --json replaces its file by a rename (a new inode, no temporary file left), not in place. */
#include "blob.h"
#include "checksum.h"
#include "fixture.h"
#include "json.h"
#include "qwen2.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WA "tests/golden/worldA/"

static double jnum(const json_value *o, const char *key) {
    const json_value *v = json_get_type(o, key, JSON_NUM);
    cr_assert(v, "JSON key %s", key);
    return v->num;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* NLL in double from fp32 logits (the definition in cli_score.c), and the argmax (lowest id). */
static double nll_of(const float *lg, int V, int target, int *greedy) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (lg[i] > lg[best]) best = i;
    double mx = lg[best], s = 0;
    for (int i = 0; i < V; i++) s += exp((double)lg[i] - mx);
    *greedy = best;
    return -((double)lg[target] - (mx + log(s)));
}

static char *ids_json(const int32_t *ids, int n) {
    char *s = malloc((size_t)n * 12 + 4);
    cr_assert(s);
    size_t p = 0;
    s[p++] = '[';
    for (int i = 0; i < n; i++) p += (size_t)sprintf(s + p, "%s%d", i ? "," : "", ids[i]);
    s[p++] = ']';
    s[p] = 0;
    return s;
}

/* --numerics q8: named on stdout and in the JSON; the same NLLs on the scalar path at 1 thread and
 * the best path at 2 threads (bitwise, as printed with 17 digits); not the exact NLLs. */
Test(score_cli, q8_is_named_deterministic_and_not_exact) {
    const char *blob = fixture_worldA_blob("nf4");
    cr_assert(blob);
    char cmd[512], *out;
    const char *runs[3][2] = {{"--numerics q8 --simd scalar --threads 1", "build/score_q8_a.json"},
                              {"--numerics q8 --threads 2", "build/score_q8_b.json"},
                              {"--threads 2", "build/score_q8_x.json"}};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "./recall score %s --ids '[5,9,17,33,65,129,257,513,1000,3,7,11,13,19,23,29,31,37,41,43]' "
                 "--per-position %s --json %s 2>/dev/null", blob, runs[i][0], runs[i][1]);
        cr_assert_eq(fixture_sh(cmd, &out), 0, "%s", cmd);
        cr_expect(strstr(out, i < 2 ? "numerics q8 (layer matrices int8" : "numerics exact"), "%s", out);
        free(out);
    }
    json_doc *a = fixture_json(runs[0][1]), *b = fixture_json(runs[1][1]), *x = fixture_json(runs[2][1]);
    cr_expect_str_eq(json_get_type(json_root(a), "numerics", JSON_STR)->str, "q8");
    cr_expect_str_eq(json_get_type(json_root(x), "numerics", JSON_STR)->str, "exact");
    const json_value *pa = json_get(json_root(a), "positions"), *pb = json_get(json_root(b), "positions"),
                     *px = json_get(json_root(x), "positions");
    cr_assert(pa && pb && px && pa->len == 19 && pb->len == 19 && px->len == 19);
    int differ = 0;
    for (size_t i = 0; i < pa->len; i++) {
        cr_expect_eq(jnum(&pa->items[i], "nll"), jnum(&pb->items[i], "nll"), "position %zu", i);
        cr_expect_eq(jnum(&pa->items[i], "greedy"), jnum(&pb->items[i], "greedy"), "position %zu", i);
        differ += jnum(&pa->items[i], "nll") != jnum(&px->items[i], "nll");
        cr_expect_lt(fabs(jnum(&pa->items[i], "nll") - jnum(&px->items[i], "nll")), 0.5, "position %zu", i);
    }
    cr_expect_gt(differ, 15, "q8 NLLs should differ from exact (%d of 19 do)", differ);
    /* recall compare measures the distance of the two score files and names both profiles */
    snprintf(cmd, sizeof cmd, "./recall compare %s %s", runs[0][1], runs[2][1]);
    cr_expect_eq(fixture_sh(cmd, &out), 1, "%s", cmd);
    cr_expect(strstr(out, "9 scored positions: mean |NLL A-B|") && strstr(out, "greedy tokens agree") &&
                  strstr(out, "NUMERICS: A ran the q8 profile, B exact"),
              "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "./recall compare %s %s", runs[0][1], runs[1][1]);
    cr_expect_eq(fixture_sh(cmd, &out), 0, "%s", cmd);
    cr_expect(strstr(out, "greedy tokens agree 9/9") && strstr(out, "AGREE") && !strstr(out, "NUMERICS"), "%s", out);
    free(out);
    json_free(a);
    json_free(b);
    json_free(x);
}

Test(score_cli, worldA_nll_and_greedy_match_golden_logits) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    size_t n_ids, n_lg;
    int *ids_i = fixture_npz_i32(WA "qwen2_fp32.npz", "ids", &n_ids);
    float *gl = fixture_npz_f32(WA "qwen2_fp32.npz", "logits", &n_lg);
    cr_assert_eq(n_ids, 37u);
    const int T = 37, V = (int)(n_lg / n_ids);
    cr_assert_eq((size_t)T * V, n_lg);
    int32_t ids[37];
    for (int i = 0; i < T; i++) ids[i] = ids_i[i];
    char *ij = ids_json(ids, T);
    char json_path[] = "/tmp/recall_score_XXXXXX";
    int fd = mkstemp(json_path);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "./recall score %s --ids '%s' --per-position --json %s 2>/dev/null", blob, ij,
             json_path);
    char *out = NULL;
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s\n%s", cmd, out);
    json_doc *d = fixture_json(json_path);
    const json_value *r = json_root(d);
    cr_assert_eq((int)jnum(r, "n_ctx"), T, "default chunk = the whole input");
    cr_assert_eq((int)jnum(r, "n_chunks"), 1);
    cr_assert_eq((int)jnum(r, "scored"), T - T / 2 - 1);
    const json_value *pos = json_get_type(r, "positions", JSON_ARR);
    cr_assert(pos);
    cr_assert_eq(pos->len, (size_t)T - 1, "every position with a target is traced");
    double worst = 0, sum_scored = 0;
    for (int j = 0; j < T - 1; j++) {
        const json_value *p = &pos->items[j];
        cr_assert_eq((int)jnum(p, "pos"), j);
        cr_assert_eq((int)jnum(p, "target"), ids[j + 1]);
        int g;
        const double want = nll_of(gl + (size_t)j * V, V, ids[j + 1], &g);
        const double nll = jnum(p, "nll");
        if (fabs(nll - want) > worst) worst = fabs(nll - want);
        cr_assert(fabs(nll - want) <= 1e-4, "position %d: nll %.9f, golden logits imply %.9f", j, nll, want);
        cr_assert_eq((int)jnum(p, "greedy"), g, "position %d: greedy", j);
        if (j >= T / 2) sum_scored += nll;
    }
    /* the perplexity is exp of the mean over the scored half, [T/2, T-1) */
    const double ppl = jnum(r, "ppl");
    cr_assert(fabs(ppl - exp(sum_scored / (T - T / 2 - 1))) <= 1e-9 * ppl);
    /* the printed hash is XXH64 of the int32 ids (little-endian) */
    uint8_t le[37 * 4];
    for (int i = 0; i < T; i++)
        for (int k = 0; k < 4; k++) le[i * 4 + k] = (uint8_t)((uint32_t)ids[i] >> (8 * k));
    char want_hash[64];
    snprintf(want_hash, sizeof want_hash, "tokens 37 xxh64 %016llx\n", (unsigned long long)rc_xxh64(le, sizeof le, 0));
    cr_assert(strstr(out, want_hash), "stdout: %s", out);
    cr_assert(strstr(out, "Final estimate: PPL = "), "%s", out);
    cr_assert(strstr(out, "kv_bytes "), "%s", out);
    json_free(d);
    remove(json_path);
    free(out);
    free(ij);
    free(ids_i);
    free(gl);
}

/* One chunk from an empty cache, scored like llama-perplexity; accumulates into nll/nll2/count. */
static void chunk_ref(rc_qwen2 *m, const int32_t *tok, int n_ctx, int bos, double *nll, double *nll2, long *count) {
    recall_err err = {0};
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t *in = malloc((size_t)n_ctx * sizeof *in);
    float *lg = malloc((size_t)n_ctx * V * sizeof(float));
    cr_assert(in && lg);
    memcpy(in, tok, (size_t)n_ctx * sizeof *in);
    if (bos >= 0) in[0] = bos;
    cr_assert_eq(rc_qwen2_crop(m, 0, &err), RECALL_OK);
    rc_qwen2_fwd f = {.ids = in, .n = n_ctx, .logits_all = lg};
    cr_assert_eq(rc_qwen2_forward(m, &f, &err), RECALL_OK, "%s", err.msg);
    for (int j = n_ctx / 2; j < n_ctx - 1; j++) {
        int g;
        double v = nll_of(lg + (size_t)j * V, V, tok[j + 1], &g);
        *nll += v;
        *nll2 += v * v;
        (*count)++;
    }
    free(in);
    free(lg);
}

static void check_chunked(int use_bos) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_qwen2 *m = NULL;
    cr_assert_eq(rc_blob_open(blob, 0, &b, &err), RECALL_OK, "%s", err.msg);
    int64_t bos = -1;
    cr_assert_eq(rc_blob_get_i64(b, "tok.bos", &bos, &err), RECALL_OK);
    const int N = 100, C = 16;
    cr_assert_eq(rc_qwen2_open(b, C, &m, &err), RECALL_OK, "%s", err.msg);
    const int V = rc_qwen2_cfg(m)->vocab;
    int32_t ids[100];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        ids[i] = (int32_t)((s >> 10) % (uint32_t)V);
    }
    double nll = 0, nll2 = 0, running[6];
    long count = 0;
    for (int c = 0; c < N / C; c++) {
        chunk_ref(m, ids + c * C, C, use_bos ? (int)bos : -1, &nll, &nll2, &count);
        running[c] = exp(nll / count);
    }
    cr_assert_eq(count, 6 * (C - C / 2 - 1));
    const double mean = nll / count, ppl = exp(mean);
    const double err_want = ppl * sqrt((nll2 / count - mean * mean) / (count - 1));

    /* the ids go through a whitespace-separated tokens file */
    char tok_path[] = "/tmp/recall_tok_XXXXXX", json_path[] = "/tmp/recall_sc_XXXXXX",
         err_path[] = "/tmp/recall_err_XXXXXX";
    int fds[3] = {mkstemp(tok_path), mkstemp(json_path), mkstemp(err_path)};
    for (int i = 0; i < 3; i++) {
        cr_assert(fds[i] >= 0);
        close(fds[i]);
    }
    FILE *f = fopen(tok_path, "w");
    cr_assert(f);
    for (int i = 0; i < N; i++) fprintf(f, "%d%s", ids[i], i % 10 == 9 ? "\n" : " ");
    cr_assert_eq(fclose(f), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s --chunk %d%s --json %s 2>%s", blob, tok_path, C,
             use_bos ? " --bos" : "", json_path, err_path);
    char *out = NULL;
    cr_assert_eq(fixture_sh(cmd, &out), 0, "%s\n%s", cmd, out);
    json_doc *d = fixture_json(json_path);
    const json_value *r = json_root(d);
    cr_assert_eq((int)jnum(r, "n_chunks"), 6);
    cr_assert_eq((long)jnum(r, "scored"), count);
    cr_assert(fabs(jnum(r, "ppl") - ppl) <= 1e-12 * ppl, "ppl %.17g, independent prefills %.17g", jnum(r, "ppl"), ppl);
    cr_assert(fabs(jnum(r, "ppl_err") - err_want) <= 1e-9 * err_want, "+/- %.17g vs %.17g", jnum(r, "ppl_err"),
              err_want);
    const json_value *cp = json_get_type(r, "chunk_ppl", JSON_ARR);
    cr_assert(cp && cp->len == 6);
    char line[256] = "", *p = line;
    for (int c = 0; c < 6; c++) {
        cr_assert(fabs(cp->items[c].num - running[c]) <= 1e-12 * running[c], "chunk %d", c + 1);
        p += sprintf(p, "[%d]%.4f,", c + 1, running[c]);
    }
    cr_assert(strstr(out, line), "llama-perplexity style line %s missing in:\n%s", line, out);
    char fin[128];
    snprintf(fin, sizeof fin, "Final estimate: PPL = %.4f +/- %.5f\n", ppl, err_want);
    cr_assert(strstr(out, fin), "%s missing in:\n%s", fin, out);
    cr_assert(strstr(out, use_bos ? "bos replaced" : "bos off"), "%s", out);
    /* the KV cache is reserved once for one chunk */
    char kv[128];
    snprintf(kv, sizeof kv, "kv_bytes %zu (%d positions allocated", rc_qwen2_kv_bytes_for(m, C), C);
    cr_assert(strstr(out, kv), "%s missing in:\n%s", kv, out);
    /* progress reaches every evaluated row */
    char *errs = NULL;
    size_t el;
    cr_assert_eq(rc_read_file(err_path, &errs, &el, &err), RECALL_OK);
    cr_assert(strstr(errs, "prefill 96/96 rows"), "stderr: %s", errs);
    free(errs);
    json_free(d);
    free(out);
    remove(tok_path);
    remove(json_path);
    remove(err_path);
    rc_qwen2_close(m);
    rc_blob_close(b);
}

Test(score_cli, chunked_perplexity_equals_independent_prefills) { check_chunked(0); }
Test(score_cli, chunked_perplexity_with_bos_replacement) { check_chunked(1); }

Test(score_cli, tokens_file_equals_inline_ids) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    const char *ids = "[5, 17, 300, 2, 1000, 44, 44, 9, 12, 81]";
    char jp[] = "/tmp/recall_tj_XXXXXX", wp[] = "/tmp/recall_tw_XXXXXX";
    int a = mkstemp(jp), b = mkstemp(wp);
    cr_assert(a >= 0 && b >= 0);
    close(a);
    close(b);
    write_file(jp, "  [5,17,300,2,1000,44,44,9,12,81]\n");
    write_file(wp, "5 17\t300\n2 1000 44\r\n44 9 12 81");
    const char *cmds[2] = {"score", "forward"};
    for (int c = 0; c < 2; c++) {
        char cmd[1024];
        char *o1, *o2, *o3;
        snprintf(cmd, sizeof cmd, "./recall %s %s --ids '%s' 2>/dev/null", cmds[c], blob, ids);
        cr_assert_eq(fixture_sh(cmd, &o1), 0, "%s", cmd);
        snprintf(cmd, sizeof cmd, "./recall %s %s --tokens-file %s 2>/dev/null", cmds[c], blob, jp);
        cr_assert_eq(fixture_sh(cmd, &o2), 0, "%s", cmd);
        snprintf(cmd, sizeof cmd, "./recall %s %s --tokens-file %s --threads 2 2>/dev/null", cmds[c], blob, wp);
        cr_assert_eq(fixture_sh(cmd, &o3), 0, "%s", cmd);
        cr_assert_str_eq(o1, o2);
        cr_assert_str_eq(o1, o3);
        cr_assert(strlen(o1) > 10);
        free(o1);
        free(o2);
        free(o3);
    }
    remove(jp);
    remove(wp);
}

Test(score_cli, rejects_bad_input_naming_the_numbers) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char tp[] = "/tmp/recall_bad_XXXXXX";
    int fd = mkstemp(tp);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[1024], want[256];
    char *out;
    /* whitespace list with a stray letter at byte 5 */
    write_file(tp, "12 7 x9 4");
    snprintf(cmd, sizeof cmd, "./recall score %s --tokens-file %s 2>&1", blob, tp);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    snprintf(want, sizeof want, "%s: byte 5:", tp);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    /* JSON with a non-id element: byte offset of the element */
    write_file(tp, "[1, 2, -3]");
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    snprintf(want, sizeof want, "%s: byte 7: element 2 is not a token id", tp);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    /* broken JSON: the parser names the file and the offset */
    write_file(tp, "[1, 2,");
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    snprintf(want, sizeof want, "%s: JSON error at byte", tp);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    /* forward and pool read the same files */
    snprintf(cmd, sizeof cmd, "./recall forward %s --tokens-file %s 2>&1", blob, tp);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_assert(strstr(out, want), "%s", out);
    free(out);
    /* shorter than one chunk: both numbers */
    free(fixture_cmd(1, "5 tokens is shorter than one chunk of 8",
                     "./recall score %s --ids '[1,2,3,4,5]' --chunk 8 2>&1", blob));
    /* beyond the trained window: both numbers */
    snprintf(cmd, sizeof cmd, "./recall score %s --ids '[1,2,3,4,5]' --chunk 5000 2>&1", blob);
    cr_assert_eq(fixture_sh(cmd, &out), 1);
    cr_assert(strstr(out, "5000") && strstr(out, "trained on 4096"), "%s", out);
    free(out);
    /* bad --threads / --simd values are usage errors */
    free(fixture_cmd(2, NULL, "./recall score %s --ids '[1,2,3]' --threads 0 2>&1", blob));
    free(fixture_cmd(2, NULL, "./recall score %s --ids '[1,2,3]' --simd sse9 2>&1", blob));
    remove(tp);
}

/* --json goes through PATH.tmp.PID and a rename: an existing file is replaced by a new inode (a
 * reader holding the old one sees it whole), and nothing else is left in the directory. */
Test(score_cli, json_written_by_rename) {
    const char *blob = fixture_worldA_blob("f32");
    cr_assert(blob);
    char d[] = "/tmp/recall_scj_XXXXXX", path[128];
    cr_assert(mkdtemp(d));
    snprintf(path, sizeof path, "%s/s.json", d);
    fixture_write(path, "old\n");
    struct stat before, after;
    cr_assert_eq(stat(path, &before), 0);
    free(fixture_cmd(0, NULL, "./recall score %s --ids '[17, 52, 11, 279, 974, 12]' --json %s 2>&1", blob, path));
    cr_assert_eq(stat(path, &after), 0);
    cr_expect_neq(before.st_ino, after.st_ino, "%s was rewritten in place", path);
    json_doc *doc = fixture_json(path);
    cr_expect_eq(json_get(json_root(doc), "n_tokens")->i, 6);
    json_free(doc);
    cr_assert_eq(unlink(path), 0);
    cr_expect_eq(rmdir(d), 0, "%s: a temporary file was left", d);
}
