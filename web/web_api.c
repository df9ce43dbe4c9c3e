/* web_api.c - what the browser calls in recall.wasm (built by web/web.mk only): the public API of
 * recall.h behind a few flat functions whose arguments are numbers and wasm addresses, so that
 * the JS glue (web/recall.js) needs no struct layouts beyond two small out arrays, plus the CLI's
 * main (web_cli) so that the page can run `recall replay` itself and produce a trace byte for byte
 * like the native build's.
 *
 * Errors stay values: every handle carries its recall_err, and web_*_error returns its message
 * (NULL when the last call on it succeeded); nothing here prints. The only state is in the handles
 * the caller holds. */
#include "recall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEB_EXPORT(name) __attribute__((export_name(name)))

/* The page's event sink (web/recall.js): called on the turn's thread for every loop event, in
 * order; its return value cancels the turn when nonzero (as recall_event_fn). ids: a wasm address
 * valid during the call only. */
__attribute__((import_module("recall"), import_name("event"))) extern int web_js_event(
    int kind, int token, int c0, float score, int fired, int injected, int n_candidates, const int32_t *ids,
    int n_ids, int has_sp, int inj_len, int window_len, int reused);

typedef struct {
    recall_model *m;
    void *blob; /* recall_open_mem borrows it: freed after the model */
    recall_err err;
    int failed;
} web_model;

typedef struct {
    web_model *wm;
    recall_loop *l;
    recall_loop_opts o;
    recall_reply reply; /* the last turn's */
    int has_reply;
    recall_err err;
    int failed;
} web_loop;

WEB_EXPORT("web_alloc") void *web_alloc(size_t n) { return malloc(n ? n : 1); }
WEB_EXPORT("web_free") void web_free(void *p) { free(p); }

/* Opens a blob the caller has copied into memory from web_alloc (ownership moves here, also on
 * failure). Checksums are verified: a blob picked in the page may be damaged, and a checksum error
 * names the tensor. Returns NULL only when the handle itself cannot be allocated. */
WEB_EXPORT("web_open") web_model *web_open(void *blob, size_t len) {
    web_model *wm = calloc(1, sizeof *wm);
    if (!wm) {
        free(blob);
        return NULL;
    }
    wm->blob = blob;
    recall_open_opts oo;
    recall_open_opts_init(&oo);
    oo.flags = RECALL_OPEN_VERIFY;
    if (recall_open_mem(blob, len, &oo, &wm->m, &wm->err)) wm->failed = 1;
    return wm;
}

WEB_EXPORT("web_model_error") const char *web_model_error(const web_model *wm) {
    return wm && wm->failed ? wm->err.msg : NULL;
}

WEB_EXPORT("web_close") void web_close(web_model *wm) {
    if (!wm) return;
    recall_close(wm->m);
    free(wm->blob);
    free(wm);
}

/* info[0..6) = vocab, max_pos, hidden, layers, bos, eos. */
WEB_EXPORT("web_model_info") void web_model_info(const web_model *wm, int *info) {
    recall_model_info mi;
    recall_model_get_info(wm->m, &mi);
    info[0] = mi.vocab, info[1] = mi.max_pos, info[2] = mi.hidden, info[3] = mi.layers;
    info[4] = mi.bos_id, info[5] = mi.eos_id;
}

/* The chat template's segment for one user message; *n gets its length. Free with web_ids_free. */
WEB_EXPORT("web_segment") int32_t *web_segment(web_model *wm, int with_eos, const char *user, int *n) {
    int32_t *ids = NULL;
    size_t len = 0;
    wm->failed = 0;
    memset(&wm->err, 0, sizeof wm->err); /* recall_err keeps its first error: start clean */
    if (recall_chat_segment(wm->m, with_eos, user, NULL, &ids, &len, &wm->err)) {
        wm->failed = 1;
        return NULL;
    }
    *n = (int)len;
    return ids;
}

WEB_EXPORT("web_ids_free") void web_ids_free(web_model *wm, void *p) { recall_free(wm->m, p); }

/* Text of ids (special tokens kept unless skip_special); free with web_ids_free. */
WEB_EXPORT("web_detokenize") char *web_detokenize(web_model *wm, const int32_t *ids, int n, int skip_special) {
    char *text = NULL;
    wm->failed = 0;
    memset(&wm->err, 0, sizeof wm->err);
    if (recall_detokenize(wm->m, ids, (size_t)n, skip_special, &text, NULL, &wm->err)) {
        wm->failed = 1;
        return NULL;
    }
    return text;
}

/* A loop on arm 0 = RC_bge, 1 = SP, 2 = FULL with the blob's defaults in the chat setting
 * docs/WORLD.md recommends (`recall chat --mode clean --span exchange --edge exchange --rerank
 * single`: clean mode, whole exchanges injected, the window never starting inside an exchange, the
 * question's words in the choice, one block when they single it out), one thread, the best kernel path of this build (simd NULL) or
 * the one named. */
WEB_EXPORT("web_loop_open") web_loop *web_loop_open(web_model *wm, int arm, const char *simd) {
    web_loop *wl = calloc(1, sizeof *wl);
    if (!wl) return NULL;
    wl->wm = wm;
    recall_loop_opts_init(wm->m, &wl->o);
    wl->o.arm = (recall_arm)arm;
    wl->o.mode = RECALL_MODE_CLEAN;
    wl->o.span = RECALL_SPAN_EXCHANGE;
    wl->o.edge = RECALL_EDGE_EXCHANGE;
    wl->o.rerank = RECALL_RERANK_SINGLE;
    wl->o.threads = 1;
    wl->o.simd = simd && *simd ? simd : NULL;
    if (recall_loop_open(wm->m, &wl->o, &wl->l, &wl->err)) wl->failed = 1;
    return wl;
}

WEB_EXPORT("web_loop_error") const char *web_loop_error(const web_loop *wl) {
    return wl && wl->failed ? wl->err.msg : NULL;
}

/* geo[0..6) = window, block, chunk, k, turn_cap, buf_min; *threshold = the gate's threshold. */
WEB_EXPORT("web_loop_info") void web_loop_info(const web_loop *wl, int *geo, float *threshold) {
    geo[0] = wl->o.window, geo[1] = wl->o.block, geo[2] = wl->o.chunk, geo[3] = wl->o.k;
    geo[4] = wl->o.turn_cap, geo[5] = wl->o.buf_min;
    *threshold = wl->o.threshold;
}

WEB_EXPORT("web_loop_close") void web_loop_close(web_loop *wl) {
    if (!wl) return;
    if (wl->has_reply) recall_reply_free(wl->l, &wl->reply);
    recall_loop_close(wl->l);
    free(wl);
}

static int forward_event(void *ctx, const recall_event *e) {
    (void)ctx;
    return web_js_event((int)e->kind, e->token, e->c0, e->score, e->fired, e->injected, e->n_candidates, e->ids,
                        e->n_ids, e->has_sp, e->inj_len, e->window_len, e->reused);
}

/* One assistant turn on the whole conversation so far (recall_turn); the events go to the page
 * as they happen. Returns the status (0 = OK); the reply is then web_reply's. */
WEB_EXPORT("web_turn") int web_turn(web_loop *wl, const int32_t *feed, int n) {
    if (wl->has_reply) recall_reply_free(wl->l, &wl->reply);
    wl->has_reply = 0;
    wl->failed = 0;
    memset(&wl->err, 0, sizeof wl->err);
    recall_status s = recall_turn(wl->l, feed, (size_t)n, forward_event, NULL, &wl->reply, &wl->err);
    if (s) wl->failed = 1;
    else wl->has_reply = 1;
    return (int)s;
}

/* The last turn's reply ids (EOS not included); *n gets their count. Valid until the next turn. */
WEB_EXPORT("web_reply") const int32_t *web_reply(const web_loop *wl, int *n) {
    *n = wl->has_reply ? (int)wl->reply.n_ids : 0;
    return wl->has_reply ? wl->reply.ids : NULL;
}

/* The command line (web/cli_main.c renames the CLI's main): `recall replay ...` in the page. */
int rc_cli_main(int argc, char **argv);

WEB_EXPORT("web_cli") int web_cli(int argc, char **argv) {
    int rc = rc_cli_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    return rc;
}

/* Which multiply-add the wasm kernel path runs in this module and why (simd/kernels_wasm.c):
 * "fused multiply-add (...)" where relaxed-simd's madd was proven fused at load, else "exact
 * emulation (...)" with the reason. The proof runs on the first call (or the first wasm path). */
const char *rc_wasm_madd_info(void); /* simd/kernels.h */
WEB_EXPORT("web_kernels") const char *web_kernels(void) { return rc_wasm_madd_info(); }
