/* screen_avx2.c - the lm_head screening kernel (the screen: src/engine/lm_screen.h; the scalar references
 * rc_screen_i8_ref and rc_screen_norms_ref: simd/ops.c) for AVX2 (x86-64; compiled with -mavx2 -mfma, empty
 * of code elsewhere). The same bits as rc_screen_i8_ref: the int32 group sums are exact whatever the order
 * (q and p widened to int16, vpmaddwd into int32 pairs of at most 2 * 128 * 128, then a vphaddd tree over
 * 8 groups; p, the same for every row, widened once per call) for every byte of q and p, -128 included (the earlier vpsignb form wrapped a q of -128 against
 * a negative p), and the fp32 part is the canonical lane rule: groups g0..g0+7 are lanes g % 16 of two ymm
 * accumulators (lanes 0-7, 8-15); padded tail lanes add +0 * +0, which leaves an accumulator that is never
 * -0 unchanged. The norms kernel (screen_norms) keeps its 8 double lanes in two ymm. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)


#include <immintrin.h>

/* the 8 group sums of v[0..7] (8 int32 each), lane j = sum of v[j] */
static inline __attribute__((always_inline)) __m256i hsum8(const __m256i *v) {
    const __m256i k0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i k1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(k0, k1, 0x20), _mm256_permute2x128_si256(k0, k1, 0x31));
}

static float tree_v(__m256 a0, __m256 a1) {
    float acc[16];
    _mm256_storeu_ps(acc, a0);
    _mm256_storeu_ps(acc + 8, a1);
    return rc_tree16(acc);
}

/* 16 columns: q and p widened to int16, 8 int32 pair sums */
static inline __attribute__((always_inline)) __m256i dot16(const int8_t *q, const int8_t *p) {
    return _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q)),
                             _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)));
}

/* the same with p already widened to int16 (p16): one widening per 16 columns instead of two */
static inline __attribute__((always_inline)) __m256i dot16w(const int8_t *q, const int16_t *p16) {
    return _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q)),
                             _mm256_loadu_si256((const __m256i *)p16));
}

/* one group: 8 int32 partial sums of q * p over 64 columns (p16: p widened, or NULL) */
static inline __attribute__((always_inline)) __m256i dot64(const int8_t *q, const int8_t *p, const int16_t *p16) {
    if (p16)
        return _mm256_add_epi32(_mm256_add_epi32(dot16w(q, p16), dot16w(q + 16, p16 + 16)),
                                _mm256_add_epi32(dot16w(q + 32, p16 + 32), dot16w(q + 48, p16 + 48)));
    return _mm256_add_epi32(_mm256_add_epi32(dot16(q, p), dot16(q + 16, p + 16)),
                            _mm256_add_epi32(dot16(q + 32, p + 32), dot16(q + 48, p + 48)));
}

/* widths up to this widen p once per call (on the stack) */
#define SCR_P16_MAX 4096

/* the rows ahead whose codes are prefetched (the int8 copy streams from DRAM, as lm_head does) */
#define SCR_PF_ROWS 4

static void avx2_screen_i8(const int8_t *Q, const float *S, size_t H, const int8_t *p, const float *t, int64_t r0,
                           int64_t r1, float *A) {
    const size_t G = H / RC_SCREEN_GROUP;
    const size_t pf = SCR_PF_ROWS * H;
    int16_t p16buf[SCR_P16_MAX];
    const int16_t *p16 = NULL;
    if (H <= SCR_P16_MAX) { /* p is the same for every row: widen it once */
        for (size_t c = 0; c < H; c += 16)
            _mm256_storeu_si256((__m256i *)(p16buf + c), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + c))));
        p16 = p16buf;
    }
    for (int64_t r = r0; r < r1; r++) {
        const int8_t *qr = Q + (size_t)r * H;
        const float *sr = S + (size_t)r * G;
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (size_t g0 = 0; g0 < G; g0 += 8) {
            const size_t nb = G - g0 < 8 ? G - g0 : 8;
            __m256i v[8];
            __m256 sc, tc;
            if (nb == 8) {
                _Pragma("GCC unroll 8") for (size_t j = 0; j < 8; j++) {
                    const size_t c = (g0 + j) * RC_SCREEN_GROUP;
                    _mm_prefetch((const char *)(qr + c + pf), _MM_HINT_T0);
                    v[j] = dot64(qr + c, p + c, p16 ? p16 + c : NULL);
                }
                sc = _mm256_loadu_ps(sr + g0);
                tc = _mm256_loadu_ps(t + g0);
            } else { /* zero vectors pad; their lanes add +0 * +0 */
                float sb[8] = {0}, tb[8] = {0};
                for (size_t j = 0; j < 8; j++) {
                    const size_t c = (g0 + j) * RC_SCREEN_GROUP;
                    v[j] = j < nb ? dot64(qr + c, p + c, p16 ? p16 + c : NULL) : _mm256_setzero_si256();
                    if (j < nb) {
                        sb[j] = sr[g0 + j];
                        tb[j] = t[g0 + j];
                    }
                }
                sc = _mm256_loadu_ps(sb);
                tc = _mm256_loadu_ps(tb);
            }
            const size_t a = (g0 / 8) & 1;
            acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum8(v)), _mm256_mul_ps(sc, tc), acc[a]);
        }
        A[r - r0] = tree_v(acc[0], acc[1]);
    }
}

/* rc_screen_norms_ref: the 8 double lanes are two ymm (columns % 8 in 0-3, 4-7) */
static void avx2_screen_norms(const float *w, const int8_t *q, const float *s, size_t H, double *ss) {
    __m256d dd[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, aa[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    for (size_t c = 0; c < H; c += RC_SCREEN_GROUP) {
        const __m256d sv = _mm256_set1_pd((double)s[c / RC_SCREEN_GROUP]);
        for (size_t i = c; i < c + RC_SCREEN_GROUP; i += 8) {
            const __m256i q32 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + i)));
            for (int h = 0; h < 2; h++) {
                const __m128i qh = h ? _mm256_extracti128_si256(q32, 1) : _mm256_castsi256_si128(q32);
                const __m256d a = _mm256_mul_pd(sv, _mm256_cvtepi32_pd(qh));
                const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(w + i + 4 * h)), a);
                dd[h] = _mm256_add_pd(dd[h], _mm256_mul_pd(d, d));
                aa[h] = _mm256_add_pd(aa[h], _mm256_mul_pd(a, a));
            }
        }
    }
    double l[16];
    _mm256_storeu_pd(l, dd[0]);
    _mm256_storeu_pd(l + 4, dd[1]);
    _mm256_storeu_pd(l + 8, aa[0]);
    _mm256_storeu_pd(l + 12, aa[1]);
    rc_screen_norms_tree(l, ss);
}

RC_INSTALL_SCREEN(rc_screen_avx2, avx2)

#else

RC_KERNELS_ABSENT(rc_screen_avx2)

#endif
