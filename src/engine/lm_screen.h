/* lm_screen.h - lm_head screening for greedy steps: the exact argmax, top-2 margin and top-k of
 * logits = lm_head [V,H] . h [H] without reading all of lm_head in its own dtype.
 *
 * A greedy step needs only a few of the V logits: the argmax (first maximum), the margin top1 -
 * top2, and after a rebuild torch.topk(logits, 5). The blob may hold an int8 copy of lm_head
 * (weights/FORMAT.md, `convert --lm-head-screen`):
 *   qwen2.lm_head.screen.q      u8 [V,H]    int8 codes q (two's complement), H % 64 == 0
 *   qwen2.lm_head.screen.scale  f32 [V,H/64] s: one scale per row and 64 columns, max|w| / 127
 *   qwen2.lm_head.screen.norm   f32 [V,2]   per row, rounded up: ||w - s q||_2 and ||s q||_2
 *                                           (w = the exact fp32 values of lm_head as stored)
 * Nothing in them is trusted (rc_lmscreen_open / _new check all of it before the first pick, or
 * refuse naming the tensor and row): codes in [-127, 127], scales finite and >= 0, and both norms
 * of every row re-derived from lm_head, the codes and the scales (a stored norm below the true one
 * would shrink the bound and could drop the true argmax from the candidates).
 * Per token, h is quantised per 64 columns (t_g = max|h_g| / 127, p = round(h / t)), and each row
 * gets the approximation (the kernel table's screen_i8, reference rc_screen_i8_ref in ops.h):
 *   isum_g = sum_{i in g} q_i p_i (exact int32);  c_g = s_g * t_g;
 *   acc[g % 16] = fmaf((float)isum_g, c_g, acc[g % 16]);  A = rc_tree16(acc).
 * Rigorous bound. With a = s q, dw = w - a, dx = h - t p, E = sum w_i h_i (real):
 *   E - sum a_i (t p)_i = sum dw_i h_i + sum a_i dx_i, so by Cauchy-Schwarz
 *   |E - A_real| <= ||dw|| ||h|| + ||a|| ||dx||.
 * The exact logit X = the canonical fp32 dot (ops.h) of w and h has |X - E| <= g_e sum|w_i h_i|
 * <= g_e (||a|| + ||dw||) ||h||, g_e = gamma(ceil(H/16) + 4) (the depth of the 16-lane chain + tree);
 * the computed A has |A - A_real| <= g_a ||a|| (||h|| + ||dx||), g_a = gamma(ceil(G/16) + 5).
 * So |X - A| <= B = ||dw|| a1 + ||a|| b1 + eta with a1 = ||h|| (1 + g_e), b1 = ||dx|| + g_e ||h|| +
 * g_a (||h|| + ||dx||), eta an absolute floor for underflow; every quantity is rounded up (norms
 * in double, outward rounding of lo = A - B and hi = A + B to float).
 * Candidate rule (K = max(2, k)): L = the K-th largest lo; every row with hi >= L is computed
 * exactly (the canonical bf16/f32 dot, the kernel table's matmul of that row). Proof that this is
 * the full computation: the K rows with the largest lo have X >= lo >= L, so the K-th largest X is
 * >= L; a row with hi < L has X <= hi < L, strictly below K rows, so it is in no top-K, cannot tie
 * with the K-th value, and cannot be the first maximum. Hence the candidates hold every row whose
 * value is among the K largest (all of their ties included), the argmax with the lowest index
 * among equal maxima (candidates are scanned in index order), and the top-2 values (the margin).
 * torch.topk's choice among EQUAL values depends on every element it streams (topk.h), so the
 * top-k ids are taken from the candidates only when the k+1 largest candidate values are strictly
 * decreasing (then the answer is unique); otherwise, and whenever h or a bound is not finite, too
 * many rows are candidates, or the vocabulary is tiny, all V logits are computed and the reference
 * selection runs on them (`full` = 1). Either way the result is bitwise that of the full logits.
 */
#ifndef RECALL_LM_SCREEN_H
#define RECALL_LM_SCREEN_H

#include "blob.h"
#include "ops.h"
#include "pool.h"
#include "status.h"

#include <stdint.h>

#define RC_LM_SCREEN_GROUP RC_SCREEN_GROUP /* ops.h: the kernel's column group */
#define RC_LM_SCREEN_MAXK 5
#define RC_LM_SCREEN_Q "qwen2.lm_head.screen.q"
#define RC_LM_SCREEN_SCALE "qwen2.lm_head.screen.scale"
#define RC_LM_SCREEN_NORM "qwen2.lm_head.screen.norm"

/* What a greedy step reads from the logits of one row. */
typedef struct {
    int32_t argmax;                     /* first maximum (lowest id among equal maxima) */
    float margin;                       /* logit[argmax] - the largest other logit; INFINITY if V == 1 */
    int k;                              /* top-k filled (0: none) */
    int32_t ids[RC_LM_SCREEN_MAXK];     /* torch.topk(logits, k): ids, descending, torch's ties */
    float logits[RC_LM_SCREEN_MAXK];    /* their exact logits */
    int n_exact;                        /* rows whose exact logit was computed (V when full) */
    int full;                           /* 1: all V logits were computed */
} rc_lm_pick;

/* The reference: the pick from all V logits (greedy: first maximum; top-k: rc_topk). k <= 5. */
void rc_lm_pick_full(const float *logits, int V, int k, rc_lm_pick *out);

/* Builds the screen tensors of a [V,H] matrix (H % 64 == 0, all values finite): q [V*H] int8,
 * scale [V*H/64], norm [V*2]. Returns RECALL_E_UNSUPPORTED (naming the reason) otherwise. */
recall_status rc_lmscreen_build(const rc_mat *w, int8_t *q, float *scale, float *norm, recall_err *err);

typedef struct rc_lmscreen rc_lmscreen;

/* Opens the screen of blob b on ex (borrowed). *out is NULL (and RECALL_OK) when the blob has no
 * screen tensors; malformed ones are an error naming the tensor (and the row): shapes, dtypes, a
 * code of -128, a scale or norm that is negative or not finite, a stored norm that is not the one
 * lm_head, the codes and the scales give (rounded up, within 1e-6), a non-finite lm_head row. The
 * norms are re-derived on ex's threads: one read of lm_head and of the codes. */
recall_status rc_lmscreen_open(const rc_blob *b, const rc_exec *ex, rc_lmscreen **out, recall_err *err);
/* The same from views (borrowed; they must outlive the screen): lm_head w [V,H] and its screen
 * tensors as rc_lmscreen_build makes them, checked as rc_lmscreen_open checks them. For tests and
 * tools. */
recall_status rc_lmscreen_new(const rc_mat *w, const int8_t *q, const float *scale, const float *norm,
                              const rc_exec *ex, rc_lmscreen **out, recall_err *err);
void rc_lmscreen_close(rc_lmscreen *s);

/* The pick of the logits lm_head . h (h [H]: the final-normed hidden row), k <= 5: bitwise
 * rc_lm_pick_full of the full logits. Not reentrant (scratch in s). */
recall_status rc_lmscreen_pick(rc_lmscreen *s, const float *h, int k, rc_lm_pick *out, recall_err *err);

/* The exact logit of row r (the canonical dot of lm_head row r with h): what the full lm_head gives. */
float rc_lmscreen_exact(const rc_lmscreen *s, const float *h, int64_t r);

/* Bytes of lm_head data one pick read: int8 codes + scales + norms + exact rows (or the whole
 * lm_head when full). For the benchmark's bytes-per-token figure. */
double rc_lmscreen_bytes(const rc_lmscreen *s, const rc_lm_pick *p);
/* Bytes the full lm_head matvec reads (V x H in its dtype). */
double rc_lmscreen_full_bytes(const rc_lmscreen *s);

/* The bound of one row for h (test hook): |exact - A| <= *bound, with A the screen's approximation. */
recall_status rc_lmscreen_row_bound(rc_lmscreen *s, const float *h, int64_t r, float *approx, double *bound,
                                    recall_err *err);

#endif
