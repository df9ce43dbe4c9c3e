/* cli_chat.c - `recall chat`: multi-turn chat through the recall loop on stdin/stdout.
 *
 * One user message per input line. Only token ids persist between turns:
 *   feed    = history + chat_segment(EOS if history is non-empty, user, no assistant text)
 *   history = feed + reply
 * The reply streams to stdout as tokens are chosen; with --session FILE the history is loaded at
 * start (a damaged file is refused and left as it is) and atomically rewritten after every turn. */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "rope.h"
#include "recall_loop.h"
#include "session.h"
#include "tokenize_bpe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_parse_mode_arm(const char *cmd, const char *mode, const char *arm, rc_recall_opts *o);

static void chat_usage(FILE *f) {
    fprintf(f,
            "usage: recall chat BLOB [--session FILE] [--mode faithful|clean] [--arm RC_bge|SP|FULL]\n"
            "                   [--threshold T] [--trace] [--fire-once] [--hysteresis N] [--floor F]\n"
            "                   [--max-turn-tokens N] [--threads N] [--simd scalar|avx2|avx512|neon]\n"
            "\n"
            "Multi-turn chat through the recall loop. Reads one user message per line from stdin (a\n"
            "prompt is shown only when stdin is a terminal; piped input works too) and streams each\n"
            "reply to stdout as it is generated. Blank lines are ignored; end of input ends the chat.\n"
            "  --session FILE       keep the conversation (token ids only) in FILE: loaded at start,\n"
            "                       rewritten atomically after every turn (FILE.tmp, fsync, rename).\n"
            "                       A damaged file is refused and left untouched.\n"
            "  --mode M             faithful (default, the reference loop) or clean\n"
            "  --arm A              RC_bge (default: recall on), SP (no recall) or FULL (no eviction)\n"
            "  --threshold T        gate threshold (default: the gate file's thresh)\n"
            "  --trace              print rebuilds, gate scores and fires on stderr as they happen\n"
            "  --fire-once          at most one injection per turn\n"
            "  --hysteresis N       inject only after N consecutive gate scores above the threshold\n"
            "  --floor F            inject only if the best bridge score is >= F (fires still logged)\n"
            "  --max-turn-tokens N  reply cap per turn (default: the blob's loop.turn_cap)\n"
            "  --threads N          worker threads (default: RECALL_THREADS, else 1); same bits for any N\n"
            "  --ctx N              FULL arm context (default: the trained positions; more is refused)\n"
            "  --rope-scaling yarn:FACTOR:ORIG  YaRN for a blob without a profile (floor(FACTOR x ORIG) positions)\n"
            "  --hugepages          copy the blob into huge-page memory (faster decode, slower start)\n"
            "  --simd P             kernel path (default: RECALL_SIMD, else the best this CPU runs)\n"
            "A message longer than the window slides through it (what scrolls out goes to the gist and\n"
            "the archive). On the FULL arm a context beyond the model's trained positions is refused\n"
            "with both numbers; the turn is skipped and the exit status is 1.\n");
}

typedef struct {
    const rc_bpe *bpe;
    int trace;
    int32_t *reply;
    int n_reply, cap_reply;
    size_t printed; /* bytes of the decoded reply already on stdout */
    int oom;
} chat_stream;

/* Prints the part of the decoded reply not yet printed. Unless `final`, a trailing U+FFFD is held
 * back: it may be a character whose remaining bytes are still to come. Decoding is otherwise
 * prefix-stable, so the printed bytes never change. */
static void flush_text(chat_stream *cs, int final) {
    char *text = NULL;
    size_t len = 0;
    recall_err err = {0};
    if (!cs->n_reply) return;
    if (rc_bpe_decode(cs->bpe, cs->reply, (size_t)cs->n_reply, 0, &text, &len, &err) != RECALL_OK) return;
    size_t upto = len;
    if (!final && upto >= 3 && !memcmp(text + upto - 3, "\xef\xbf\xbd", 3)) upto -= 3;
    if (upto > cs->printed) {
        fwrite(text + cs->printed, 1, upto - cs->printed, stdout);
        cs->printed = upto;
        fflush(stdout);
    }
    free(text);
}

static int on_event(void *ctx, const rc_event *ev) {
    chat_stream *cs = ctx;
    switch (ev->kind) {
    case RC_EV_TOKEN:
        if (cs->n_reply == cs->cap_reply) {
            int nc = cs->cap_reply ? cs->cap_reply * 2 : 256;
            int32_t *nr = realloc(cs->reply, (size_t)nc * sizeof *nr);
            if (!nr) {
                cs->oom = 1;
                return 1; /* stop the turn: the reply could not be kept */
            }
            cs->reply = nr;
            cs->cap_reply = nc;
        }
        cs->reply[cs->n_reply++] = ev->token;
        flush_text(cs, 0);
        break;
    case RC_EV_REBUILD:
        if (cs->trace) {
            const rc_rebuild_rec *r = ev->rec;
            fprintf(stderr, "[trace] rebuild c0=%d sp=%d injected=%d window=%d\n", r->c0, r->has_sp, r->inj_len,
                    r->window_len);
        }
        break;
    case RC_EV_GATE:
        if (cs->trace) {
            const rc_gate_rec *g = ev->rec;
            fprintf(stderr, "[trace] gate c0=%d score=%.4f%s\n", g->c0, g->score, g->fired ? " FIRE" : "");
        }
        break;
    case RC_EV_FIRE:
        if (cs->trace) {
            const rc_fire_rec *f = ev->rec;
            fprintf(stderr, "[trace] fire c0=%d candidates=%d top=[", f->c0, f->ncand);
            for (int i = 0; i < f->ntop; i++)
                fprintf(stderr, "%s%d (%.3f)", i ? ", " : "", f->top[i], f->bridge[f->top[i]]);
            if (f->injected) fprintf(stderr, "] injected %d ids\n", f->nrid);
            else fprintf(stderr, "] held back (hysteresis/floor/empty)\n");
        }
        break;
    }
    return 0;
}

static int parse_int(const char *cmd, const char *flag, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "recall %s: %s %s: expected an integer in %ld..%ld\n", cmd, flag, v, lo, hi);
        return 2;
    }
    *out = (int)x;
    return 0;
}

static int parse_float(const char *cmd, const char *flag, const char *v, float *out) {
    char *end;
    *out = strtof(v, &end);
    if (!*v || *end || isnan(*out)) {
        fprintf(stderr, "recall %s: %s %s: expected a number\n", cmd, flag, v);
        return 2;
    }
    return 0;
}

int cli_chat(int argc, char **argv) {
    const char *blob_path = NULL, *session_path = NULL, *mode = NULL, *arm = NULL, *thr = NULL, *floor_s = NULL;
    const char *hyst_s = NULL, *cap_s = NULL;
    int trace = 0, fire_once = 0;
    cli_exec_args xa = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            chat_usage(stdout);
            return 0;
        }
        {
            int xf = cli_exec_flag("chat", argc, argv, &i, &xa);
            if (xf < 0) return 2;
            if (xf > 0) continue;
        }
        if (!strcmp(a, "--trace")) {
            trace = 1;
            continue;
        }
        if (!strcmp(a, "--fire-once")) {
            fire_once = 1;
            continue;
        }
        const char **slot = !strcmp(a, "--session") ? &session_path : !strcmp(a, "--mode") ? &mode
                          : !strcmp(a, "--arm") ? &arm : !strcmp(a, "--threshold") ? &thr
                          : !strcmp(a, "--floor") ? &floor_s : !strcmp(a, "--hysteresis") ? &hyst_s
                          : !strcmp(a, "--max-turn-tokens") ? &cap_s : NULL;
        if (slot) {
            if (i + 1 >= argc) {
                fprintf(stderr, "recall chat: %s needs a value\n", a);
                return 2;
            }
            *slot = argv[++i];
        } else if (a[0] == '-' || blob_path) {
            fprintf(stderr, "recall chat: unexpected argument '%s' (see --help)\n", a);
            return 2;
        } else {
            blob_path = a;
        }
    }
    if (!blob_path) {
        fprintf(stderr, "recall chat: needs BLOB (see --help)\n");
        return 2;
    }
    recall_err err = {0};
    rc_blob *b = NULL;
    rc_recall *r = NULL;
    rc_session sess = {0};
    int32_t *history = NULL, *feed = NULL;
    size_t n_history = 0, cap_feed = 0;
    char *line = NULL;
    size_t line_cap = 0;
    chat_stream cs;
    memset(&cs, 0, sizeof cs);
    int rc = 1, turn_failed = 0;
    int64_t vocab64 = 0;
    int max_pos_i = 0; /* trained positions under the RoPE profile (rope.h) */
    if (cli_blob_open(&xa, blob_path, RC_OPEN_VERIFY, &b, &err) || rc_blob_get_i64(b, "qwen2.vocab", &vocab64, &err) ||
        rc_rope_blob_positions(b, &max_pos_i, &err))
        goto fail;
    rc_recall_opts o;
    rc_recall_defaults(b, &o);
    if (cli_parse_mode_arm("chat", mode, arm, &o) || (thr && parse_float("chat", "--threshold", thr, &o.threshold)) ||
        (floor_s && parse_float("chat", "--floor", floor_s, &o.floor)) ||
        (hyst_s && parse_int("chat", "--hysteresis", hyst_s, 0, 1000000, &o.hysteresis)) ||
        (cap_s && parse_int("chat", "--max-turn-tokens", cap_s, 0, 1000000, &o.turn_cap))) {
        rc = 2;
        goto out;
    }
    o.fire_once = fire_once;
    o.threads = xa.threads;
    o.simd = xa.simd;
    o.max_ctx = xa.ctx;
    o.use_floor = floor_s != NULL;
    const uint32_t vocab = (uint32_t)vocab64;
    const long max_pos = xa.ctx ? (long)xa.ctx : (long)max_pos_i; /* the FULL arm's context */

    if (session_path) {
        recall_status s = rc_session_load(session_path, &sess, &err);
        if (s == RECALL_E_MISSING) {
            err = (recall_err){0};
        } else if (s) {
            fprintf(stderr, "recall chat: refusing session %s (left untouched): %s\n", session_path, err.msg);
            goto out;
        } else if (sess.vocab != vocab) {
            fprintf(stderr, "recall chat: session %s was written for a vocab of %u ids, %s has %u (left untouched)\n",
                    session_path, sess.vocab, blob_path, vocab);
            goto out;
        } else {
            history = sess.ids;
            n_history = sess.n;
            sess.ids = NULL;
        }
    }
    if (rc_recall_open(b, &o, &r, &err)) goto fail;
    cs.bpe = rc_recall_bpe(r);
    cs.trace = trace;
    if (trace)
        fprintf(stderr, "[trace] simd %s, %d thread%s\n", rc_recall_simd_name(r), rc_recall_threads(r),
                rc_recall_threads(r) == 1 ? "" : "s");
    const int tty = isatty(STDIN_FILENO);
    if (tty)
        fprintf(stderr, "recall chat: %s, %s session (%zu tokens); end with Ctrl-D\n", blob_path,
                n_history ? "resumed" : "new", n_history);

    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t got = getline(&line, &line_cap, stdin);
        if (got < 0) break;
        size_t len = (size_t)got;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        if (strlen(line) != len) {
            fprintf(stderr, "recall chat: the message contains a NUL byte; skipped\n");
            turn_failed = 1;
            continue;
        }
        int32_t *seg = NULL;
        size_t n_seg = 0;
        if (rc_chat_segment(cs.bpe, rc_recall_eos(r), n_history > 0, line, NULL, &seg, &n_seg, &err)) {
            fprintf(stderr, "recall chat: %s; message skipped\n", err.msg);
            err = (recall_err){0};
            turn_failed = 1;
            continue;
        }
        size_t n_feed = n_history + n_seg;
        /* never clamp. On the recall arms a message longer than the window is no limit: it is
         * forced through chunk by chunk and the window slides over it (recall_loop.h). The FULL
         * arm keeps everything, so its whole context must fit the trained positions. */
        if (o.arm == RC_ARM_FULL && (double)n_feed + o.turn_cap + 2 > (double)max_pos) {
            fprintf(stderr,
                    "recall chat: the context needs %.0f positions (BOS + %zu history + %zu message + %d reply cap + "
                    "1) but the model was trained on %ld; message skipped\n",
                    (double)n_feed + o.turn_cap + 2, n_history, n_seg, o.turn_cap, max_pos);
            free(seg);
            turn_failed = 1;
            continue;
        }
        if (n_feed + (size_t)o.turn_cap > RC_SESSION_MAX_IDS || n_feed + (size_t)o.turn_cap > INT_MAX / 2) {
            fprintf(stderr, "recall chat: the conversation would reach %zu tokens, above the limit %u\n",
                    n_feed + (size_t)o.turn_cap, RC_SESSION_MAX_IDS);
            free(seg);
            break;
        }
        if (n_feed + (size_t)o.turn_cap > cap_feed) {
            size_t nc = (n_feed + (size_t)o.turn_cap) * 2;
            int32_t *nf = realloc(feed, nc * sizeof *nf);
            if (!nf) {
                free(seg);
                fprintf(stderr, "recall chat: out of memory\n");
                goto out;
            }
            feed = nf;
            cap_feed = nc;
        }
        if (n_history) memcpy(feed, history, n_history * sizeof *feed);
        memcpy(feed + n_history, seg, n_seg * sizeof *feed);
        free(seg);

        cs.n_reply = 0;
        cs.printed = 0;
        rc_turn t;
        if (rc_recall_reply(r, feed, (int)n_feed, on_event, &cs, &t, &err)) {
            fputc('\n', stdout);
            goto fail;
        }
        if (cs.oom) {
            rc_turn_free(&t);
            fprintf(stderr, "recall chat: out of memory\n");
            goto out;
        }
        flush_text(&cs, 1); /* every reply token was streamed; print a held-back tail */
        fputc('\n', stdout);
        fflush(stdout);
        /* history = feed + reply */
        int32_t *nh = realloc(history, (n_feed + (size_t)t.n_reply + 1) * sizeof *nh);
        if (!nh) {
            rc_turn_free(&t);
            fprintf(stderr, "recall chat: out of memory\n");
            goto out;
        }
        history = nh;
        memcpy(history, feed, n_feed * sizeof *history);
        if (t.n_reply) memcpy(history + n_feed, t.reply, (size_t)t.n_reply * sizeof *history);
        n_history = n_feed + (size_t)t.n_reply;
        if (trace) {
            int inj = 0;
            for (int i = 0; i < t.n_fires; i++) inj += t.fires[i].injected;
            fprintf(stderr, "[trace] turn done: feed %zu, reply %d, %d gate checks, %d fires (%d injected)\n", n_feed,
                    t.n_reply, t.n_gates, t.n_fires, inj);
        }
        rc_turn_free(&t);
        if (session_path && rc_session_save(session_path, history, n_history, vocab, &err)) {
            fprintf(stderr, "recall chat: could not save the session (the previous file is intact): %s\n", err.msg);
            goto out;
        }
    }
    if (tty) fputc('\n', stdout);
    rc = turn_failed ? 1 : 0;
    goto out;
fail:
    fprintf(stderr, "recall chat: %s\n", err.msg);
out:
    free(line);
    free(feed);
    free(history);
    free(cs.reply);
    rc_session_free(&sess);
    rc_recall_close(r);
    rc_blob_close(b);
    return rc;
}
