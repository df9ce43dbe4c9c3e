/* cli_chat.c - `recall chat`: multi-turn chat through the recall loop on stdin/stdout.
 *
 * One user message per input line. Only token ids persist between turns:
 *   feed    = history + chat_segment(EOS if history is non-empty, user, no assistant text)
 *   history = feed + reply
 * The reply streams to stdout as tokens are chosen; with --session FILE the history is loaded at
 * start (a damaged file is refused and left as it is) and atomically rewritten after every turn;
 * one process at a time: FILE.lock carries an advisory lock for the whole chat (session.h).
 * Steps: chat_parse_args, chat_open_model, chat_open_session (lock + load), chat_loop (one turn per
 * line: chat_build_feed, chat_turn), chat_save, chat_close. */
#include "problems.h"
#include "blob.h"
#include "cli.h"
#include "rope.h"
#include "qwen2.h"
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

typedef struct {
    const rc_bpe *bpe;
    int trace;
    int edge; /* --edge inject: the trace's rebuild lines give the edge span too */
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
            fprintf(stderr, "[trace] rebuild c0=%d sp=%d injected=%d window=%d", r->c0, r->has_sp, r->inj_len,
                    r->window_len);
            if (cs->edge) fprintf(stderr, " edge=%d", r->edge_len);
            fputc('\n', stderr);
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
    default: /* RC_EV_SCORE: chat never asks for row scores */
        break;
    }
    return 0;
}

/* ---- the steps of `recall chat` ---- */

/* Everything a chat holds; released by chat_close. */
typedef struct {
    const cli_args *ca;
    rc_blob *b;
    rc_recall *r;
    rc_recall_opts o;
    uint32_t vocab;
    long max_pos;
    rc_session_lock_t lock; /* held from before the session is read until the chat ends */
    int32_t *history, *feed;
    size_t n_history, cap_feed;
    chat_stream cs;
} chat_state;

/* The blob and the loop options. Returns -1 on success, else the exit status (message printed). */
static int chat_open_model(chat_state *c) {
    const cli_args *ca = c->ca;
    recall_err err = {0};
    int64_t vocab64 = 0;
    int max_pos_i = 0; /* trained positions under the RoPE profile (rope.h) */
    if (cli_blob_open(ca, ca->pos[0], RC_OPEN_VERIFY, &c->b, &err) ||
        rc_blob_get_i64(c->b, "qwen2.vocab", &vocab64, &err) || rc_rope_blob_positions(c->b, &max_pos_i, &err))
        return cli_fail("chat", &err);
    cli_loop_opts(ca, c->b, &c->o);
    const int rc = cli_loop_threshold(ca, c->b, &c->o);
    if (rc) return rc;
    c->vocab = (uint32_t)vocab64;
    c->max_pos = ca->ctx ? (long)ca->ctx : (long)max_pos_i; /* the FULL arm's context */
    return -1;
}

/* Session open: take the one-writer lock, then load the history (a missing file is a new
 * session). Returns -1 on success, else the exit status (message printed): 3 when another process
 * holds the session, 1 when the file is refused (left untouched). */
static int chat_open_session(chat_state *c) {
    const char *path = c->ca->session;
    if (!path) return -1;
    recall_err err = {0};
    long holder = 0;
    if (rc_session_lock(path, &c->lock, &holder, &err)) {
        fprintf(stderr, "recall chat: %s\n", err.msg);
        return holder ? 3 : 1;
    }
    rc_session sess;
    recall_status s = rc_session_load(path, &sess, &err);
    if (s == RECALL_E_MISSING) return -1;
    if (s) {
        fprintf(stderr, "recall chat: refusing session %s (left untouched): %s\n", path, err.msg);
        return 1;
    }
    if (sess.vocab != c->vocab) {
        fprintf(stderr, "recall chat: session %s was written for a vocab of %u ids, %s has %u (left untouched)\n", path,
                sess.vocab, c->ca->pos[0], c->vocab);
        rc_session_free(&sess);
        return 1;
    }
    c->history = sess.ids;
    c->n_history = sess.n;
    return -1;
}

/* Saving: the whole history replaces the session file atomically. With --trace, a line after the
 * rename says the turn is on disk (the soak driver, bench/soak.c, waits for it). */
static int chat_save(chat_state *c) {
    const char *path = c->ca->session;
    if (!path) return 0;
    recall_err err = {0};
    if (rc_session_save(path, c->history, c->n_history, c->vocab, &err)) {
        fprintf(stderr, "recall chat: could not save the session (the previous file is intact): %s\n", err.msg);
        return 1;
    }
    if (c->ca->trace_live) fprintf(stderr, "[trace] session saved: %zu ids\n", c->n_history);
    return 0;
}

/* feed = history + seg, in a buffer with room for the reply cap. 0, or 1 (message printed). */
static int chat_build_feed(chat_state *c, const int32_t *seg, size_t n_seg) {
    size_t n_feed = c->n_history + n_seg;
    if (n_feed + (size_t)c->o.turn_cap > c->cap_feed) {
        size_t nc = (n_feed + (size_t)c->o.turn_cap) * 2;
        int32_t *nf = realloc(c->feed, nc * sizeof *nf);
        if (!nf) {
            fprintf(stderr, "recall chat: out of memory\n");
            return 1;
        }
        c->feed = nf;
        c->cap_feed = nc;
    }
    if (c->n_history) memcpy(c->feed, c->history, c->n_history * sizeof *c->feed);
    memcpy(c->feed + c->n_history, seg, n_seg * sizeof *c->feed);
    return 0;
}

/* One turn on the built feed: stream the reply, history = feed + reply, save. 0, or 1 (message
 * printed). */
static int chat_turn(chat_state *c, size_t n_feed) {
    chat_stream *cs = &c->cs;
    recall_err err = {0};
    cs->n_reply = 0;
    cs->printed = 0;
    rc_turn t;
    if (rc_recall_reply(c->r, c->feed, (int)n_feed, on_event, cs, &t, &err)) {
        fputc('\n', stdout);
        fprintf(stderr, "recall chat: %s\n", err.msg);
        return 1;
    }
    if (cs->oom) {
        rc_turn_free(&t);
        fprintf(stderr, "recall chat: out of memory\n");
        return 1;
    }
    flush_text(cs, 1); /* every reply token was streamed; print a held-back tail */
    fputc('\n', stdout);
    fflush(stdout);
    /* history = feed + reply */
    int32_t *nh = realloc(c->history, (n_feed + (size_t)t.n_reply + 1) * sizeof *nh);
    if (!nh) {
        rc_turn_free(&t);
        fprintf(stderr, "recall chat: out of memory\n");
        return 1;
    }
    c->history = nh;
    memcpy(c->history, c->feed, n_feed * sizeof *c->history);
    if (t.n_reply) memcpy(c->history + n_feed, t.reply, (size_t)t.n_reply * sizeof *c->history);
    c->n_history = n_feed + (size_t)t.n_reply;
    if (c->ca->trace_live) {
        int inj = 0;
        for (int i = 0; i < t.n_fires; i++) inj += t.fires[i].injected;
        fprintf(stderr, "[trace] turn done: feed %zu, reply %d, %d gate checks, %d fires (%d injected)\n", n_feed,
                t.n_reply, t.n_gates, t.n_fires, inj);
        if (t.verifies)
            fprintf(stderr, "[trace] draft: %d verify forwards, %ld drafted, %ld accepted\n", t.verifies, t.drafted,
                    t.accepted);
    }
    rc_turn_free(&t);
    return chat_save(c);
}

/* The turn loop: one message per input line until end of input. Returns the exit status: 0, or 1
 * when a message was skipped or a turn failed. */
static int chat_loop(chat_state *c, int tty) {
    const rc_recall_opts o = c->o;
    const long max_pos = c->max_pos;
    rc_recall *r = c->r;
    chat_stream cs = c->cs; /* only cs.bpe is read here; the turns stream into c->cs */
    size_t n_history = c->n_history;
    recall_err err = {0};
    char *line = NULL;
    size_t line_cap = 0;
    int rc = 1, turn_failed = 0;

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
            fprintf(stderr, "recall chat: the conversation would reach %zu tokens (%zu history + %zu message + %d reply "
                    "cap), above the session limit of %u; message skipped\n", n_feed + (size_t)o.turn_cap, n_history,
                    n_seg, o.turn_cap, (unsigned)RC_SESSION_MAX_IDS);
            free(seg);
            turn_failed = 1;
            continue;
        }
        if (chat_build_feed(c, seg, n_seg)) {
            free(seg);
            goto out;
        }
        free(seg);
        if (chat_turn(c, n_feed)) goto out;
        n_history = c->n_history;
    }
    if (tty) fputc('\n', stdout);
    rc = turn_failed ? 1 : 0;
out:
    free(line);
    return rc;
}

static void chat_close(chat_state *c) {
    free(c->feed);
    free(c->history);
    free(c->cs.reply);
    rc_session_unlock(&c->lock); /* also removes FILE.lock */
    rc_recall_close(c->r);
    rc_blob_close(c->b);
}

int cli_chat(const cli_args *a) {
    if (cli_ctx_needs_full(a, a->loop.arm == RC_ARM_FULL)) return 2;
    chat_state c;
    memset(&c, 0, sizeof c);
    c.ca = a;
    c.lock.fd = -1;
    int rc;
    if ((rc = chat_open_model(&c)) >= 0 || (rc = chat_open_session(&c)) >= 0) goto out;
    recall_err err = {0};
    if (rc_recall_open(c.b, &c.o, &c.r, &err)) {
        rc = cli_fail("chat", &err);
        goto out;
    }
    c.cs.bpe = rc_recall_bpe(c.r);
    c.cs.trace = a->trace_live;
    c.cs.edge = a->loop.edge == RC_EDGE_INJECT; /* rebuild lines give the edge span (edge exchange has none) */
    const int threads = rc_recall_threads(c.r);
    char top_k[24] = "";
    if (a->top_k) snprintf(top_k, sizeof top_k, ", top-k %d", a->top_k);
    if (a->trace_live)
        fprintf(stderr, "[trace] simd %s, %d thread%s, kv %s%s%s%s%s%s%s\n", rc_recall_simd_name(c.r), threads,
                threads == 1 ? "" : "s", rc_kv_dtype_name((rc_kv_dtype)a->loop.kv), a->loop.edge ? ", edge " : "",
                a->loop.edge ? rc_edge_name(a->loop.edge) : "", a->loop.span ? ", span exchange" : "",
                a->loop.rerank ? ", rerank " : "", a->loop.rerank ? rc_rerank_name(a->loop.rerank) : "", top_k);
    const int tty = isatty(STDIN_FILENO);
    if (tty)
        fprintf(stderr, "recall chat: %s, %s session (%zu tokens), simd %s, %d thread%s; end with Ctrl-D\n", a->pos[0],
                c.n_history ? "resumed" : "new", c.n_history, rc_recall_simd_name(c.r), threads, threads == 1 ? "" : "s");
    rc = chat_loop(&c, tty);
out:
    chat_close(&c);
    return rc;
}
