/* screen_avx512.c - the lm_head screening kernel (the screen: src/engine/lm_screen.h; the scalar references
 * rc_screen_i8_ref and rc_screen_norms_ref: simd/ops.c) for AVX-512 F/BW/VL (x86-64; compiled with
 * -mavx512f -mavx512bw -mavx512vl -mfma, empty of code elsewhere). The same bits as rc_screen_i8_ref: the
 * int32 group sums are exact whatever the order (q and p widened to int16, vpmaddwd into int32 pairs of at
 * most 2 * 128 * 128, then an unpack / shuffle tree turns 16 groups' vectors into one vector of their
 * sums) for every byte of q and p, -128 included (the earlier sign-transfer form wrapped a q of -128
 * against a negative p), and the fp32 part is the canonical lane rule: group g is lane g % 16 of one zmm
 * accumulator; masked-off tail lanes keep their value. The norms kernel (screen_norms) keeps its 8 double
 * lanes in one zmm. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)


#include <immintrin.h>


/* lane j = the sum of the 16 int32 of v[j] */
static inline __attribute__((always_inline)) __m512i hsum16(const __m512i *v) {
    __m512i w[8], z[4];
    for (int k = 0; k < 8; k++) /* per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3) */
        w[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                                _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
    for (int k = 0; k < 4; k++) /* per 128-bit lane: the partial sums of v[4k .. 4k+3] */
        z[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(w[2 * k], w[2 * k + 1]),
                                _mm512_unpackhi_epi64(w[2 * k], w[2 * k + 1]));
    const __m512i u01 = _mm512_add_epi32(_mm512_shuffle_i32x4(z[0], z[1], 0x88), _mm512_shuffle_i32x4(z[0], z[1], 0xDD));
    const __m512i u23 = _mm512_add_epi32(_mm512_shuffle_i32x4(z[2], z[3], 0x88), _mm512_shuffle_i32x4(z[2], z[3], 0xDD));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(u01, u23, 0x88), _mm512_shuffle_i32x4(u01, u23, 0xDD));
}

/* one group: 16 int32 partial sums of q * p over 64 columns: both widened to int16, vpmaddwd */
static inline __attribute__((always_inline)) __m512i dot64(const int8_t *q, const int8_t *p) {
    const __m512i q0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)q));
    const __m512i q1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(q + 32)));
    const __m512i p0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
    const __m512i p1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p + 32)));
    return _mm512_add_epi32(_mm512_madd_epi16(q0, p0), _mm512_madd_epi16(q1, p1));
}

/* the rows ahead whose codes are prefetched (the int8 copy streams from DRAM, as lm_head does) */
#define SCR_PF_ROWS 4

static void avx512_screen_i8(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                             int64_t r1, float *A) {
    const size_t G = H / RC_SCREEN_GROUP;
    const size_t pf = SCR_PF_ROWS * H;
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *qr = Q + (size_t)r * H;
        const float *sr = S + (size_t)r * G;
        __m512 acc = _mm512_setzero_ps();
        size_t g0 = 0;
        for (; g0 + 16 <= G; g0 += 16) {
            __m512i v[16];
            _Pragma("GCC unroll 16") for (size_t j = 0; j < 16; j++) {
                const size_t c = (g0 + j) * RC_SCREEN_GROUP;
                _mm_prefetch((const char *)(qr + c + pf), _MM_HINT_T0);
                v[j] = dot64(qr + c, p + c);
            }
            const __m512 c = _mm512_mul_ps(_mm512_loadu_ps(sr + g0), _mm512_loadu_ps(t + g0));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hsum16(v)), c, acc);
        }
        if (g0 < G) { /* the last G % 16 groups: zero vectors pad, masked lanes keep acc */
            const size_t nb = G - g0;
            __m512i v[16];
            for (size_t j = 0; j < 16; j++) {
                const size_t c = (g0 + j) * RC_SCREEN_GROUP;
                if (j < nb) _mm_prefetch((const char *)(qr + c + pf), _MM_HINT_T0);
                v[j] = j < nb ? dot64(qr + c, p + c) : _mm512_setzero_si512();
            }
            const __mmask16 m = (__mmask16)((1u << nb) - 1u);
            const __m512 c = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, sr + g0), _mm512_maskz_loadu_ps(m, t + g0));
            acc = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(hsum16(v)), c, acc, m);
        }
        float lanes[16];
        _mm512_storeu_ps(lanes, acc);
        A[r - r0] = rc_tree16(lanes);
    }
}

/* rc_screen_norms_ref: the 8 double lanes are one zmm (lane = column % 8) */
static void avx512_screen_norms(const float *w, const int8_t *q, const float *s, size_t H, double *ss) {
    __m512d dd = _mm512_setzero_pd(), aa = _mm512_setzero_pd();
    for (size_t c = 0; c < H; c += RC_SCREEN_GROUP) {
        const __m512d sv = _mm512_set1_pd((double)s[c / RC_SCREEN_GROUP]);
        for (size_t i = c; i < c + RC_SCREEN_GROUP; i += 8) {
            const __m512d qd = _mm512_cvtepi32_pd(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i))));
            const __m512d a = _mm512_mul_pd(sv, qd), d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(w + i)), a);
            dd = _mm512_add_pd(dd, _mm512_mul_pd(d, d));
            aa = _mm512_add_pd(aa, _mm512_mul_pd(a, a));
        }
    }
    double l[16];
    _mm512_storeu_pd(l, dd);
    _mm512_storeu_pd(l + 8, aa);
    rc_screen_norms_tree(l, ss);
}

RC_INSTALL_SCREEN(rc_screen_avx512, avx512)

#else

RC_KERNELS_ABSENT(rc_screen_avx512)

#endif
