/* cli_compare.c - `recall compare A B [--json OUT] [--threshold T]`: prints the report of
 * src/harness/compare.c in a few lines, optionally writes it as JSON, and turns its verdict into the
 * exit code (0 agree, 1 real divergence, 2 bad input or usage, 3 near-ties only). */
#include "cli.h"
#include "compare.h"
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- text report ------------------------------------------------------------------------ */

static void shape_str(char *buf, size_t cap, const rc_cmp_array *c) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < c->ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)c->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void index_str(char *buf, size_t cap, const rc_cmp_array *c) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < c->ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)c->worst[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

static const char *tol_str(char *buf, size_t cap, rc_tol_kind k, double tol) {
    if (k == RC_TOL_EXACT) snprintf(buf, cap, "exact");
    else snprintf(buf, cap, "%.0e %s", tol, k == RC_TOL_ABS ? "abs" : "rel");
    return buf;
}

/* The KV storage of the two sides, when either ran with f16 (an absent "kv" is f32). */
static void print_kv(const rc_cmp_report *r) {
    const char *a = r->kv_a[0] ? r->kv_a : "f32 (not recorded)", *b = r->kv_b[0] ? r->kv_b : "f32 (not recorded)";
    if (r->kv_differ)
        printf("  kv differs: A %s, B %s: an f16 KV cache rounds K and V, so differences beyond the numerics table "
               "are expected\n", a, b);
    else if (!strcmp(r->kv_a, "f16") || !strcmp(r->kv_b, "f16"))
        printf("  kv: f16 on both sides\n");
}

static void print_npz(const rc_cmp_report *r, const char *pa, const char *pb) {
    printf("compare: %s dump %s (A) vs %s (B)\n", r->what, pa, pb);
    print_kv(r);
    for (size_t i = 0; i < r->n_arrays; i++) {
        const rc_cmp_array *c = &r->arrays[i];
        if (!c->in_a || !c->in_b) continue;
        char sh[96], ix[96], tol[32];
        shape_str(sh, sizeof sh, c);
        index_str(ix, sizeof ix, c);
        tol_str(tol, sizeof tol, c->tol_kind, c->tol);
        if (c->integer) {
            if (!c->n_diff) printf("  %-14s %-12s %-7s identical                                   %s\n", c->name, sh, c->dtype_a, c->pass ? "PASS" : "FAIL");
            else printf("  %-14s %-12s %-7s %llu differ, first at %s: A %.0f B %.0f (exact)  FAIL\n", c->name, sh, c->dtype_a,
                        (unsigned long long)c->n_diff, ix, c->worst_a, c->worst_b);
            continue;
        }
        if (!c->n_diff) {
            printf("  %-14s %-12s %-7s bitwise identical (tol %s)  PASS\n", c->name, sh, c->dtype_a, tol);
            continue;
        }
        printf("  %-14s %-12s %-7s max abs %.3g  max rel %.3g  worst %s: A %.9g B %.9g (%lld ulps)  tol %s  %s\n", c->name, sh,
               c->dtype_a, c->max_abs, c->max_rel, ix, c->worst_a, c->worst_b, (long long)c->worst_ulps, tol,
               c->pass ? "PASS" : "FAIL");
    }
    for (int side = 0; side < 2; side++) {
        int any = 0;
        for (size_t i = 0; i < r->n_arrays; i++) {
            const rc_cmp_array *c = &r->arrays[i];
            if ((side ? c->in_b && !c->in_a : c->in_a && !c->in_b)) printf("%s%s", any++ ? ", " : side ? "  only in B (not compared): " : "  only in A (not compared): ", c->name);
        }
        if (any) printf("\n");
    }
    if (!r->n_failed) printf("AGREE: %d arrays within the numerics table\n", r->n_compared);
    else {
        printf("FAIL: %d of %d arrays beyond tolerance:", r->n_failed, r->n_compared);
        for (size_t i = 0; i < r->n_arrays; i++)
            if (r->arrays[i].in_a && r->arrays[i].in_b && !r->arrays[i].pass) printf(" %s", r->arrays[i].name);
        printf("\n");
    }
}

static void ulps_str(char *buf, size_t cap, const rc_div_side *s) {
    if (s->ulps < 0) snprintf(buf, cap, "ulps unknown");
    else snprintf(buf, cap, "%s%lld ulp%s%s", s->margin_bound ? ">= " : s->ulps_estimated ? "~" : "", (long long)s->ulps,
                  s->ulps == 1 ? "" : "s", s->ulps_estimated ? " (estimated)" : "");
}

static void tok_str(char *buf, size_t cap, int32_t t) {
    if (t < 0) snprintf(buf, cap, "end of reply");
    else snprintf(buf, cap, "%d", t);
}

/* One line of deciding numbers for side A or B. */
static void print_side(const rc_cmp_divergence *d, const rc_div_side *s, char name) {
    char u[64], t0[32], t1[32];
    ulps_str(u, sizeof u, s);
    printf("  %c: ", name);
    if (!s->present) {
        printf("no such record");
    } else {
        switch (d->kind) {
        case RC_DIV_GATE:
        case RC_DIV_GATE_CHECKS:
        case RC_DIV_GATE_SCORE:
            printf("%s", s->fired ? "fired" : "did not fire");
            if (s->has_score) printf(", score %.9g", (double)s->score);
            if (s->has_score && d->has_threshold) printf(" vs threshold %.9g: %s", (double)d->threshold, u);
            break;
        case RC_DIV_FIRE:
        case RC_DIV_CANDIDATES:
        case RC_DIV_INJECTED:
        case RC_DIV_BRIDGE_SCORE:
            printf("%d candidates, chose [", s->ncand);
            for (int i = 0; i < s->ntop; i++) printf("%s%d", i ? "," : "", s->top[i]);
            printf("]");
            if (d->kind == RC_DIV_CANDIDATES && s->has_pair)
                printf(", bridge[%d] %.9g vs bridge[%d] %.9g: %s", d->cand[0], (double)s->vals[0], d->cand[1],
                       (double)s->vals[1], u);
            if (d->kind == RC_DIV_BRIDGE_SCORE) printf(", bridge[%d] %.9g", d->index, (double)s->vals[0]);
            if (d->kind == RC_DIV_INJECTED) {
                tok_str(t0, sizeof t0, s->token);
                printf(", %lld injected ids, rid[%d] = %s", (long long)s->n, d->index, t0);
            }
            break;
        case RC_DIV_REBUILD:
            printf("[c0 %lld, has_SP %lld, injected_len %lld, window_len %lld]", (long long)s->rb[0], (long long)s->rb[1],
                   (long long)s->rb[2], (long long)s->rb[3]);
            break;
        case RC_DIV_TOP5:
        case RC_DIV_TOP5_LOGIT:
            if (s->has_pair && d->kind == RC_DIV_TOP5)
                printf("logit(%d) %.9g, logit(%d) %.9g: %s", s->ids[0], (double)s->vals[0], s->ids[1], (double)s->vals[1], u);
            else if (s->has_pair) printf("logit(%d) %.9g", s->ids[0], (double)s->vals[0]);
            break;
        case RC_DIV_REPLY:
            tok_str(t0, sizeof t0, s->token);
            printf("token %s", t0);
            if (s->has_pair) {
                tok_str(t1, sizeof t1, s->ids[1]);
                printf("; top-2 logits %d: %.9g, %s: %.9g, margin %.9g: %s", s->ids[0], (double)s->vals[0], t1,
                       (double)s->vals[1], (double)s->margin, u);
            } else if (s->has_margin) {
                printf("; margin %s%.9g: %s", s->margin_bound ? ">= " : "", (double)s->margin, u);
            }
            break;
        case RC_DIV_HISTORY:
            tok_str(t0, sizeof t0, s->token);
            printf("%lld ids, final_history[%d] = %s", (long long)s->n, d->index, t0);
            break;
        default:
            printf("%lld", (long long)s->n);
            break;
        }
    }
    if (s->note[0]) printf(" [%s]", s->note);
    printf("\n");
}

static void print_headline(const rc_cmp_divergence *d) {
    printf("first divergence: ");
    if (d->kind == RC_DIV_TURNS) {
        printf("number of turns: A %lld, B %lld\n", (long long)d->a.n, (long long)d->b.n);
        return;
    }
    if (d->kind == RC_DIV_HISTORY) {
        printf("final_history at position %d (every turn alike)\n", d->index);
        return;
    }
    printf("turn %d, %s", d->turn + 1, rc_div_kind_name(d->kind));
    if (d->kind == RC_DIV_REPLY) {
        char ta[32], tb[32];
        tok_str(ta, sizeof ta, d->a.token);
        tok_str(tb, sizeof tb, d->b.token);
        printf(" %d (history position %d, chunk c0 %d): A %s, B %s\n", d->reply_index, d->position, d->c0, ta, tb);
        return;
    }
    if (d->c0 >= 0) printf(" at c0 %d", d->c0);
    if (d->kind == RC_DIV_FEED) printf(": A %lld, B %lld", (long long)d->a.n, (long long)d->b.n);
    if (d->kind == RC_DIV_TOP5) printf(", rank %d: A id %d, B id %d", d->rank, d->a.ids[0], d->b.ids[1]);
    if (d->kind == RC_DIV_CANDIDATES && d->cand[0] >= 0)
        printf(": candidate %d (only A's choice) vs %d (only B's)", d->cand[0], d->cand[1]);
    if (d->kind == RC_DIV_GATE_SCORE || d->kind == RC_DIV_BRIDGE_SCORE || d->kind == RC_DIV_TOP5_LOGIT)
        printf(": |A-B| %.3g%s > tolerance %.0e", d->delta, d->kind == RC_DIV_GATE_SCORE ? "" : " rel", d->tol);
    printf("\n");
}

static void print_score(const rc_cmp_report *r, const char *pa, const char *pb) {
    printf("compare: score files %s (A) vs %s (B)\n", pa, pb);
    printf("  %ld scored positions: mean |NLL A-B| %.6f, max %.6f (chunk %d pos %d), mean NLL A-B %+.6f\n",
           r->n_scored, r->nll_mean_abs, r->nll_max_abs, r->worst_chunk, r->worst_pos, r->nll_mean_signed);
    printf("  greedy tokens agree %ld/%ld (%.2f %%); perplexity A %.4f, B %.4f (A/B - 1 = %+.4f %%)\n", r->greedy_same,
           r->n_scored, r->n_scored ? 100.0 * (double)r->greedy_same / (double)r->n_scored : 0.0, r->ppl_a, r->ppl_b,
           100.0 * (r->ppl_a / r->ppl_b - 1.0));
    if (!r->verdict)
        printf("AGREE: every |dNLL| within %.0e, every greedy token the same\n", rc_cmp_tolerance("score.nll")->tol);
    else
        printf("DIFFER: beyond the score.nll tolerance %.0e or a greedy token differs\n",
               rc_cmp_tolerance("score.nll")->tol);
}

static void print_trace(const rc_cmp_report *r, const char *pa, const char *pb) {
    printf("compare: loop trace %s (A) vs %s (B)\n", pa, pb);
    print_kv(r);
    printf("  agreed before any divergence: %d turn%s, %ld reply tokens, %ld gate checks, %ld fire%s, %ld rebuilds, "
           "%ld top-5 records\n", r->n_turns, r->n_turns == 1 ? "" : "s", r->n_tokens, r->n_gates, r->n_fires,
           r->n_fires == 1 ? "" : "s", r->n_rebuilds, r->n_top5);
    printf("  max |gate A-B| %.3g (tol %.0e abs), bridge max rel %.3g (tol %.0e), top-5 logits max rel %.3g (tol %.0e)\n",
           r->max_gate_abs, rc_cmp_tolerance("trace.gate")->tol, r->max_bridge_rel, rc_cmp_tolerance("trace.bridge")->tol,
           r->max_top5_rel, rc_cmp_tolerance("trace.top5")->tol);
    if (r->not_compared[0]) printf("  not compared: %s\n", r->not_compared);
    if (!r->diverged) {
        printf("AGREE: identical ids, gate decisions, fires, injected ids and rebuilds; floats within tolerance\n");
        return;
    }
    const rc_cmp_divergence *d = &r->first;
    print_headline(d);
    if (d->kind != RC_DIV_TURNS && d->kind != RC_DIV_FEED) {
        print_side(d, &d->a, 'A');
        print_side(d, &d->b, 'B');
    }
    if (r->n_consequences)
        printf("  consequences: %ld later records differ (through turn %d); not counted as errors\n", r->n_consequences,
               r->last_turn_affected + 1);
    if (d->near_tie)
        printf("NEAR-TIE: the deciding values are within %d ulps on one side; rounding order alone can flip it\n",
               RC_CMP_NEAR_TIE_ULPS);
    else
        printf("DIVERGE: a real divergence (the deciding values are not within %d ulps on either side)\n",
               RC_CMP_NEAR_TIE_ULPS);
}

/* ---- JSON report ------------------------------------------------------------------------ */

/* , "key": x (rc_json_put_num) */
static void num_field(FILE *f, const char *key, double x) {
    fprintf(f, ", \"%s\": ", key);
    rc_json_put_num(f, x);
}

static void json_side(FILE *f, const rc_div_side *s) {
    fprintf(f, "{\"present\": %s, \"fired\": %s, \"score\": ", s->present ? "true" : "false", s->fired ? "true" : "false");
    rc_json_put_num(f, s->has_score ? s->score : NAN);
    fprintf(f, ", \"ncand\": %d, \"top\": [", s->ncand);
    for (int i = 0; i < s->ntop; i++) fprintf(f, "%s%d", i ? ", " : "", s->top[i]);
    fprintf(f, "], \"ids\": [%d, %d], \"values\": [", s->ids[0], s->ids[1]);
    rc_json_put_num(f, s->has_pair ? s->vals[0] : NAN);
    fputs(", ", f);
    rc_json_put_num(f, s->has_pair ? s->vals[1] : NAN);
    fprintf(f, "], \"token\": %d, \"margin\": ", s->token);
    rc_json_put_num(f, s->has_margin ? s->margin : NAN);
    fprintf(f, ", \"margin_is_bound\": %s, \"ulps\": %lld, \"ulps_estimated\": %s, \"rebuild\": [%lld, %lld, %lld, %lld], "
               "\"n\": %lld, \"note\": ",
            s->margin_bound ? "true" : "false", (long long)s->ulps, s->ulps_estimated ? "true" : "false", (long long)s->rb[0],
            (long long)s->rb[1], (long long)s->rb[2], (long long)s->rb[3], (long long)s->n);
    rc_json_put_str(f, s->note);
    fputc('}', f);
}

static void json_npz(FILE *f, const rc_cmp_report *r) {
    fputs(", \"arrays\": [", f);
    for (size_t i = 0; i < r->n_arrays; i++) {
        const rc_cmp_array *c = &r->arrays[i];
        fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
        rc_json_put_str(f, c->name);
        fprintf(f, ", \"in_a\": %s, \"in_b\": %s", c->in_a ? "true" : "false", c->in_b ? "true" : "false");
        if (c->in_a && c->in_b) {
            fprintf(f, ", \"dtype_a\": \"%s\", \"dtype_b\": \"%s\", \"shape\": [", c->dtype_a, c->dtype_b);
            for (int d = 0; d < c->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)c->shape[d]);
            fputs("], \"max_abs\": ", f);
            rc_json_put_num(f, c->max_abs);
            num_field(f, "max_rel", c->max_rel);
            num_field(f, "ref_max_abs", c->ref_max_abs);
            fprintf(f, ", \"n_diff\": %llu, \"worst\": [", (unsigned long long)c->n_diff);
            for (int d = 0; c->n_diff && d < c->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)c->worst[d]);
            fputs("], \"worst_a\": ", f);
            rc_json_put_num(f, c->worst_a);
            num_field(f, "worst_b", c->worst_b);
            fprintf(f, ", \"tolerance\": {\"kind\": \"%s\", \"value\": %g}, \"pass\": %s",
                    c->tol_kind == RC_TOL_EXACT ? "exact" : c->tol_kind == RC_TOL_ABS ? "abs" : "rel", c->tol,
                    c->pass ? "true" : "false");
        }
        fputc('}', f);
    }
    fputs("]", f);
}

static void json_trace(FILE *f, const rc_cmp_report *r) {
    fprintf(f, ", \"turns\": %d, \"reply_tokens\": %ld, \"gate_checks\": %ld, \"fires\": %ld, \"rebuilds\": %ld, \"top5\": %ld",
            r->n_turns, r->n_tokens, r->n_gates, r->n_fires, r->n_rebuilds, r->n_top5);
    num_field(f, "max_gate_abs", r->max_gate_abs);
    num_field(f, "max_bridge_rel", r->max_bridge_rel);
    num_field(f, "max_top5_rel", r->max_top5_rel);
    fputs(", \"not_compared\": ", f);
    rc_json_put_str(f, r->not_compared);
    fprintf(f, ", \"near_tie_ulps\": %d", RC_CMP_NEAR_TIE_ULPS);
    if (!r->diverged) {
        fputs(", \"divergence\": null", f);
        return;
    }
    const rc_cmp_divergence *d = &r->first;
    fprintf(f, ",\n \"divergence\": {\"kind\": \"%s\", \"turn\": %d, \"c0\": %d, \"reply_index\": %d, \"position\": %d, "
               "\"candidates\": [%d, %d], \"rank\": %d, \"index\": %d, \"near_tie\": %s, \"threshold\": ",
            rc_div_kind_name(d->kind), d->turn + 1, d->c0, d->reply_index, d->position, d->cand[0], d->cand[1], d->rank,
            d->index, d->near_tie ? "true" : "false");
    rc_json_put_num(f, d->has_threshold ? d->threshold : NAN);
    num_field(f, "delta", d->delta);
    num_field(f, "tolerance", d->tol);
    fputs(",\n  \"a\": ", f);
    json_side(f, &d->a);
    fputs(",\n  \"b\": ", f);
    json_side(f, &d->b);
    fprintf(f, "},\n \"consequences\": %ld, \"last_turn_affected\": %d", r->n_consequences, r->last_turn_affected + 1);
}

static int write_json(const rc_cmp_report *r, const char *pa, const char *pb, const char *out) {
    rc_afile af;
    FILE *f = cli_create("compare", &af, out);
    if (!f) return 2;
    fputs("{\"a\": ", f);
    rc_json_put_str(f, pa);
    fputs(", \"b\": ", f);
    rc_json_put_str(f, pb);
    fprintf(f, ", \"kind\": \"%s\", \"verdict\": \"%s\", \"exit\": %d", r->what,
            r->verdict == 0 ? "agree" : r->verdict == 3 ? "near-tie" : "diverge", r->verdict);
    fputs(", \"numerics_a\": ", f);
    rc_json_put_str(f, r->numerics_a);
    fputs(", \"numerics_b\": ", f);
    rc_json_put_str(f, r->numerics_b);
    if (r->kind == 1) json_npz(f, r);
    else if (r->kind == 3) {
        fprintf(f, ", \"scored\": %ld, \"greedy_same\": %ld, \"nll_mean_abs\": ", r->n_scored, r->greedy_same);
        rc_json_put_num(f, r->nll_mean_abs);
        fputs(", \"nll_max_abs\": ", f);
        rc_json_put_num(f, r->nll_max_abs);
        fputs(", \"nll_mean_signed\": ", f);
        rc_json_put_num(f, r->nll_mean_signed);
        fputs(", \"ppl_a\": ", f);
        rc_json_put_num(f, r->ppl_a);
        fputs(", \"ppl_b\": ", f);
        rc_json_put_num(f, r->ppl_b);
    } else json_trace(f, r);
    fputs("}\n", f);
    return cli_commit("compare", &af, 0) ? 2 : 0;
}

int cli_compare(const cli_args *a) {
    const char *paths[2] = {a->pos[0], a->pos[1]}, *json = a->json;
    rc_cmp_opts o = {0, 0.0f};
    if (!isnan(a->threshold)) {
        o.has_threshold = 1;
        o.threshold = (float)a->threshold;
    }
    rc_cmp_report r;
    recall_err err = {0};
    if (rc_compare_files(paths[0], paths[1], &o, &r, &err)) {
        fprintf(stderr, "recall compare: %s\n", err.msg[0] ? err.msg : recall_strerror(err.code));
        return 2;
    }
    if (r.kind == 1) print_npz(&r, paths[0], paths[1]);
    else if (r.kind == 3) print_score(&r, paths[0], paths[1]);
    else print_trace(&r, paths[0], paths[1]);
    if (strcmp(r.numerics_a, r.numerics_b))
        printf("NUMERICS: A ran the %s profile, B %s: their distance is the profile's (docs/PROFILES.md), not an error "
               "of either side\n", r.numerics_a, r.numerics_b);
    int rc = r.verdict;
    if (json && write_json(&r, paths[0], paths[1], json)) rc = 2;
    rc_cmp_report_free(&r);
    return rc;
}
