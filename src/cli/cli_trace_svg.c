/* cli_trace_svg.c - `recall trace-svg`: a self-contained SVG picture of one loop trace (the schema of
 * the loop goldens / `recall replay`: turns[].{kind,user,feed_len,reply,gates[[c0,score,fired]],
 * fires[{c0,score,ncand,bridge,top,...}],rebuilds[[c0,has_sp,inj_len,window_len]]}, optional
 * top-level "threshold").
 *
 * One panel per generated turn, stacked vertically:
 *   chart: x = c0 (tokens of the turn's sequence), y = gate score; one circle per gate check
 *          (class "gate", filled red when it fired), the threshold as a dashed line, a vertical
 *          red line per fire (class "fire"), a shaded band wherever the rebuild carried injected
 *          blocks (class "inj"), a dotted line where the feed ends and generation starts
 *   strip: one row per fire, one box per candidate block in chronological order (class "cand";
 *          the chosen ones "cand chosen"), the last box being the pending buffer when present
 * Element classes are stable so tests can count them. */
#include "cli.h"
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W 1000.0
#define LEFT 70.0
#define RIGHT 20.0
#define CHART_H 170.0
#define ROW_H 20.0
#define TITLE_H 34.0

/* Python's json.dump writes Infinity / -Infinity / NaN; the strict reader does not take them. */
static char *sanitize(const char *in, size_t len, size_t *out_len) {
    char *o = malloc(len + len / 2 + 1);
    if (!o) return NULL;
    size_t n = 0;
    int in_str = 0;
    for (size_t i = 0; i < len;) {
        char c = in[i];
        if (in_str) {
            o[n++] = c;
            if (c == '\\' && i + 1 < len) o[n++] = in[++i];
            else if (c == '"') in_str = 0;
            i++;
            continue;
        }
        if (c == '"') in_str = 1;
        size_t skip = !strncmp(in + i, "-Infinity", 9) && len - i >= 9 ? 9
                    : !strncmp(in + i, "Infinity", 8) && len - i >= 8 ? 8
                    : !strncmp(in + i, "NaN", 3) && len - i >= 3 ? 3 : 0;
        if (skip) {
            memcpy(o + n, "null", 4);
            n += 4;
            i += skip;
        } else {
            o[n++] = c;
            i++;
        }
    }
    o[n] = 0;
    *out_len = n;
    return o;
}

/* Escaped text, cut after about `max` bytes at a character boundary. */
static void xml_text(FILE *f, const char *s, size_t max) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++, n++) {
        if (n >= max && (*p & 0xC0) != 0x80) {
            fputs("\xe2\x80\xa6", f);
            break;
        }
        if (*p == '&') fputs("&amp;", f);
        else if (*p == '<') fputs("&lt;", f);
        else if (*p == '>') fputs("&gt;", f);
        else if (*p == '"') fputs("&quot;", f);
        else if (*p < 0x20) fputc(' ', f);
        else fputc(*p, f);
    }
}

static int is_num(const json_value *v) { return v && v->type == JSON_NUM; }

static double num_at(const json_value *arr, size_t i) {
    return arr && arr->type == JSON_ARR && i < arr->len && is_num(&arr->items[i]) ? arr->items[i].num : NAN;
}

/* Validates the parts of a turn the picture uses; returns an error string or NULL. */
static const char *check_turn(const json_value *t) {
    if (!t || t->type != JSON_OBJ) return "a turn is not an object";
    const json_value *g = json_get_type(t, "gates", JSON_ARR), *fi = json_get_type(t, "fires", JSON_ARR);
    const json_value *rb = json_get_type(t, "rebuilds", JSON_ARR);
    if (!g || !fi || !rb) return "a turn lacks gates/fires/rebuilds arrays";
    for (size_t i = 0; i < g->len; i++)
        if (g->items[i].type != JSON_ARR || g->items[i].len < 3 || !is_num(&g->items[i].items[0]))
            return "a gate record is not [c0, score, fired]";
    for (size_t i = 0; i < rb->len; i++)
        if (rb->items[i].type != JSON_ARR || rb->items[i].len < 4 || !is_num(&rb->items[i].items[0]) ||
            !is_num(&rb->items[i].items[2]))
            return "a rebuild record is not [c0, has_sp, inj_len, window_len]";
    for (size_t i = 0; i < fi->len; i++) {
        const json_value *f = &fi->items[i];
        if (f->type != JSON_OBJ || !is_num(json_get(f, "c0")) || !is_num(json_get(f, "ncand")) ||
            !json_get_type(f, "top", JSON_ARR))
            return "a fire record lacks c0/ncand/top";
        double nc = json_get(f, "ncand")->num;
        if (!(nc >= 0 && nc <= 100000)) return "a fire's ncand is out of range";
    }
    return NULL;
}

/* Where one turn's chart lies and what it spans: x = c0 in [0, xmax], y = score in [smin, smax]. */
typedef struct {
    double cx0, cw, cy0, ch, xmax, smin, smax;
} svg_frame;

static double fx(const svg_frame *fr, double c) { return fr->cx0 + c / fr->xmax * fr->cw; }
static double fy(const svg_frame *fr, double s) { return fr->cy0 + fr->ch - (s - fr->smin) / (fr->smax - fr->smin) * fr->ch; }

/* x: the whole sequence the turn ran over; y: every gate score and the threshold, padded. */
static svg_frame turn_frame(const json_value *t, double y0, double thr, double feed_len, double n_reply) {
    const json_value *gates = json_get(t, "gates"), *rbs = json_get(t, "rebuilds");
    svg_frame fr = {LEFT, W - LEFT - RIGHT, y0 + TITLE_H, CHART_H, feed_len + n_reply, INFINITY, -INFINITY};
    for (size_t i = 0; i < rbs->len; i++) fr.xmax = fmax(fr.xmax, num_at(&rbs->items[i], 0) + 1);
    if (!(fr.xmax > 0)) fr.xmax = 1;
    for (size_t i = 0; i < gates->len; i++) {
        double s = num_at(&gates->items[i], 1);
        if (isfinite(s)) fr.smin = fmin(fr.smin, s), fr.smax = fmax(fr.smax, s);
    }
    if (isfinite(thr)) fr.smin = fmin(fr.smin, thr), fr.smax = fmax(fr.smax, thr);
    if (!isfinite(fr.smin)) fr.smin = -1, fr.smax = 1;
    double pad = (fr.smax - fr.smin) * 0.1 + 0.5;
    fr.smin -= pad, fr.smax += pad;
    return fr;
}

/* Injected-context bands, axes, grid, rebuild ticks, where the reply starts, the threshold. */
static void svg_chart_frame(FILE *f, const svg_frame *fr, const json_value *rbs, double feed_len, double thr) {
    const double cx0 = fr->cx0, cw = fr->cw, cy0 = fr->cy0, ch = fr->ch, smin = fr->smin, smax = fr->smax;
    /* injected context bands: from each rebuild with inj_len > 0 to the next rebuild */
    for (size_t i = 0; i < rbs->len; i++) {
        double c0 = num_at(&rbs->items[i], 0), inj = num_at(&rbs->items[i], 2);
        double c1 = i + 1 < rbs->len ? num_at(&rbs->items[i + 1], 0) : fr->xmax;
        if (inj > 0)
            fprintf(f, "<rect class=\"inj\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>c0 %.0f: "
                       "%.0f injected ids in context</title></rect>\n",
                    fx(fr, c0), cy0, fmax(fx(fr, c1) - fx(fr, c0), 1), ch, c0, inj);
    }
    /* axes, grid, rebuild ticks */
    fprintf(f, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", cx0, cy0 + ch, cx0 + cw,
            cy0 + ch);
    fprintf(f, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", cx0, cy0, cx0, cy0 + ch);
    for (int k = 0; k <= 4; k++) {
        double s = smin + (smax - smin) * k / 4;
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                cx0 + 1, fy(fr, s), cx0 + cw, fy(fr, s), cx0 - 4, fy(fr, s) + 4, s);
    }
    for (size_t i = 0; i < rbs->len; i++) {
        double c0 = num_at(&rbs->items[i], 0);
        fprintf(f, "<line class=\"axis rebuild\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", fx(fr, c0),
                cy0 + ch, fx(fr, c0), cy0 + ch + 4);
        if (i % 4 == 0 || i + 1 == rbs->len)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#555\">%.0f</text>\n", fx(fr, c0),
                    cy0 + ch + 15, c0);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">c0 (rebuild position)</text>\n",
            cx0 + cw, cy0 + ch + 27);
    fprintf(f, "<line class=\"feed-end\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
               "<text x=\"%.1f\" y=\"%.1f\" fill=\"#888\">reply \xe2\x86\x92</text>\n",
            fx(fr, feed_len), cy0, fx(fr, feed_len), cy0 + ch, fx(fr, feed_len) + 3, cy0 + 10);
    if (isfinite(thr))
        fprintf(f, "<line class=\"threshold\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>threshold "
                   "%.4g</title></line>\n", cx0, fy(fr, thr), cx0 + cw, fy(fr, thr), thr);
}

/* The fires (vertical lines), the score polyline, then the gate points on top. */
static void svg_chart_scores(FILE *f, const svg_frame *fr, const json_value *gates, const json_value *fires) {
    for (size_t i = 0; i < fires->len; i++) {
        double c0 = json_get(&fires->items[i], "c0")->num;
        fprintf(f, "<line class=\"fire\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>fire at c0 %.0f"
                   "</title></line>\n", fx(fr, c0), fr->cy0, fx(fr, c0), fr->cy0 + fr->ch, c0);
    }
    if (gates->len > 1) {
        fputs("<polyline class=\"score-line\" points=\"", f);
        for (size_t i = 0; i < gates->len; i++) {
            double c0 = num_at(&gates->items[i], 0), s = num_at(&gates->items[i], 1);
            if (isfinite(s)) fprintf(f, "%.1f,%.1f ", fx(fr, c0), fy(fr, s));
        }
        fputs("\"/>\n", f);
    }
    for (size_t i = 0; i < gates->len; i++) {
        const json_value *g = &gates->items[i];
        double c0 = num_at(g, 0), s = num_at(g, 1);
        int fired = g->items[2].type == JSON_BOOL && g->items[2].num != 0;
        fprintf(f, "<circle class=\"gate%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"><title>c0 %.0f: score %.4f%s"
                   "</title></circle>\n", fired ? " fired" : "", fx(fr, c0), isfinite(s) ? fy(fr, s) : fr->cy0 + fr->ch,
                c0, s, fired ? " (fired)" : "");
    }
}

/* One strip per fire below the chart: its candidate blocks, the chosen ones marked. Returns the
 * y below the last strip. */
static double svg_strips(FILE *f, const svg_frame *fr, const json_value *fires) {
    const double cx0 = fr->cx0, cw = fr->cw;
    double ry = fr->cy0 + fr->ch + 34;
    for (size_t i = 0; i < fires->len; i++, ry += ROW_H) {
        const json_value *fire = &fires->items[i], *top = json_get(fire, "top"), *br = json_get(fire, "bridge");
        const json_value *injected = json_get(fire, "injected");
        int nc = (int)json_get(fire, "ncand")->num;
        double c0 = json_get(fire, "c0")->num;
        int held = injected && injected->type == JSON_BOOL && !injected->num;
        double bw = nc ? fmin(60, (cw - 10) / nc) : 0;
        for (int c = 0; c < nc; c++) {
            int chosen = 0;
            for (size_t k = 0; k < top->len; k++) chosen |= is_num(&top->items[k]) && top->items[k].num == c;
            double b = num_at(br, (size_t)c);
            fprintf(f, "<rect class=\"cand%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>"
                       "candidate %d%s: bridge %.4f</title></rect>\n",
                    chosen ? " chosen" : "", cx0 + c * bw, ry + 2, fmax(bw - 2, 1), ROW_H - 5, c,
                    chosen ? " (chosen)" : "", b);
            if (bw >= 14)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"9\">%d</text>\n",
                        cx0 + c * bw + (bw - 2) / 2, ry + 12, c);
        }
        const json_value *score = json_get(fire, "score");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#d62728\">fire at c0 %.0f: %d candidate blocks "
                   "(chosen in green%s), gate score %.3f</text>\n",
                cx0 + nc * bw + 6, ry + 13, c0, nc, held ? "; held back, nothing injected" : ", injected",
                is_num(score) ? score->num : NAN);
    }
    return ry;
}

/* Turn ti's panel at y0: title, chart, strips. Returns the next panel's y0. */
static double svg_turn(FILE *f, const json_value *t, size_t ti, double y0, double thr) {
    const json_value *gates = json_get(t, "gates"), *fires = json_get(t, "fires");
    const json_value *kind = json_get_type(t, "kind", JSON_STR), *user = json_get_type(t, "user", JSON_STR);
    const json_value *reply = json_get_type(t, "reply", JSON_ARR);
    double feed_len = is_num(json_get(t, "feed_len")) ? json_get(t, "feed_len")->num : 0;
    double n_reply = reply ? (double)reply->len : 0;
    const svg_frame fr = turn_frame(t, y0, thr, feed_len, n_reply);
    fprintf(f, "<g class=\"turn\" id=\"turn%zu\">\n", ti);
    fprintf(f, "<text class=\"turn-label\" x=\"%.1f\" y=\"%.1f\">turn %zu \xc2\xb7 %s \xc2\xb7 ", LEFT, y0 + 16, ti + 1,
            kind ? kind->str : "?");
    xml_text(f, user ? user->str : "", 90);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">feed %.0f tokens, reply %.0f tokens, "
               "%zu gate checks, %zu fires</text>\n", LEFT, y0 + 30, feed_len, n_reply, gates->len, fires->len);
    svg_chart_frame(f, &fr, json_get(t, "rebuilds"), feed_len, thr);
    svg_chart_scores(f, &fr, gates, fires);
    double ry = svg_strips(f, &fr, fires);
    fputs("</g>\n", f);
    return ry + 20;
}

/* The document head: size, styles, the title line (file, mode, arm, threshold). */
static void svg_head(FILE *f, const json_value *root, const char *in_path, double thr, double total_h) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", W, total_h, W, total_h);
    fputs("<style>.gate{fill:#fff;stroke:#1f5fbf;stroke-width:1.5}.gate.fired{fill:#d62728;stroke:#d62728}"
          ".fire{stroke:#d62728;stroke-width:1.5}.threshold{stroke:#555;stroke-dasharray:6 4}"
          ".inj{fill:#2ca02c;fill-opacity:0.12}.feed-end{stroke:#888;stroke-dasharray:2 3}"
          ".axis{stroke:#333}.grid{stroke:#ddd}.cand{fill:#eee;stroke:#999}.cand.chosen{fill:#2ca02c;stroke:#1b6e1b}"
          ".score-line{fill:none;stroke:#1f5fbf;stroke-opacity:0.5}.turn-label{font-size:13px;font-weight:bold}"
          "</style>\n", f);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n", f);
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", LEFT);
    xml_text(f, in_path, 120);
    const json_value *mode = json_get_type(root, "mode", JSON_STR), *arm = json_get_type(root, "arm", JSON_STR);
    if (mode) fprintf(f, " \xc2\xb7 mode %s", mode->str);
    if (arm) fprintf(f, " \xc2\xb7 arm %s", arm->str);
    fputs(" \xc2\xb7 threshold ", f);
    if (isfinite(thr)) fprintf(f, "%.4g", thr);
    else fputs("unknown", f);
    fputs("</text>\n", f);
}

/* Reads, sanitises and parses the trace and checks every turn; NULL (message printed) on failure. */
static json_doc *load_trace(const char *in_path) {
    recall_err err = {0};
    char *raw = NULL, *text = NULL;
    size_t len, tl;
    json_doc *doc = NULL;
    if (rc_read_file(in_path, &raw, &len, &err)) {
        fprintf(stderr, "recall trace-svg: %s\n", err.msg);
        return NULL;
    }
    text = sanitize(raw, len, &tl);
    free(raw);
    if (!text) {
        fprintf(stderr, "recall trace-svg: out of memory\n");
        return NULL;
    }
    recall_status st = json_parse(text, tl, in_path, &doc, &err); /* the document keeps its own copy */
    free(text);
    if (st) {
        fprintf(stderr, "recall trace-svg: %s\n", err.msg);
        return NULL;
    }
    const json_value *turns = json_get_type(json_root(doc), "turns", JSON_ARR);
    const char *why = turns ? NULL : "no \"turns\" array (not a loop trace)";
    size_t bad = 0;
    for (size_t i = 0; !why && i < turns->len; i++)
        if ((why = check_turn(&turns->items[i]))) bad = i;
    if (!why) return doc;
    if (turns) fprintf(stderr, "recall trace-svg: %s: turn %zu: %s\n", in_path, bad, why);
    else fprintf(stderr, "recall trace-svg: %s: %s\n", in_path, why);
    json_free(doc);
    return NULL;
}

int cli_trace_svg(const cli_args *a) {
    const char *in_path = a->pos[0], *out_path = a->out;
    double thr = a->threshold; /* NaN: the trace's */
    if (isinf(thr)) return cli_usage_error("trace-svg", "--threshold %g: expected a finite number", thr);
    json_doc *doc = load_trace(in_path);
    if (!doc) return 1;
    const json_value *root = json_root(doc), *turns = json_get(root, "turns");
    if (isnan(thr) && is_num(json_get(root, "threshold"))) thr = json_get(root, "threshold")->num;
    /* panel heights */
    double total_h = 50;
    for (size_t i = 0; i < turns->len; i++)
        total_h += TITLE_H + CHART_H + 30 + ROW_H * (double)json_get(&turns->items[i], "fires")->len + 20;
    rc_afile af;
    FILE *f = cli_create("trace-svg", &af, out_path);
    int rc = 1;
    if (f) {
        svg_head(f, root, in_path, thr, total_h);
        double y0 = 50;
        for (size_t ti = 0; ti < turns->len; ti++) y0 = svg_turn(f, &turns->items[ti], ti, y0, thr);
        fputs("</svg>\n", f);
        rc = cli_commit("trace-svg", &af, 0);
    }
    json_free(doc);
    return rc;
}
