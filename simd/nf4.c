/* nf4.c - NF4 quantiser/dequantiser, exactly docs/NUMERICS.md, "NF4" (see nf4.h). The quantiser is the
 * converter's; the goldens' nf4_layer0_q_proj.npz pins its bytes. */
#include "nf4.h"

const float RC_NF4_CODEBOOK[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

static float nf4_mid(int i) {
    /* The codebook entries are exact floats, so (double) widening gives the spec's values. */
    return (float)(((double)RC_NF4_CODEBOOK[i] + (double)RC_NF4_CODEBOOK[i + 1]) / 2.0);
}

int rc_nf4_quantize(const float *w, size_t n, uint8_t *codes, float *absmax) {
    if (n % 64 != 0) return -1;
    float mids[15];
    for (int i = 0; i < 15; i++) mids[i] = nf4_mid(i);
    for (size_t blk = 0; blk < n / 64; blk++) {
        const float *x = w + blk * 64;
        float am = 0.0f;
        for (int i = 0; i < 64; i++) {
            float a = x[i] < 0 ? -x[i] : x[i];
            if (a > am || a != a) am = a; /* NaN propagates like numpy's max */
        }
        absmax[blk] = am;
        float inv = am > 0.0f ? 1.0f / am : 0.0f; /* zero block: every n is 0 -> code 7 */
        for (int i = 0; i < 64; i += 2) {
            unsigned c[2];
            for (int k = 0; k < 2; k++) {
                float nv = x[i + k] * inv;
                unsigned cnt = 0;
                for (int m = 0; m < 15; m++) cnt += nv > mids[m];
                c[k] = cnt;
            }
            codes[(blk * 64 + (size_t)i) >> 1] = (uint8_t)((c[0] << 4) | c[1]);
        }
    }
    return 0;
}

void rc_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = rc_nf4_value(codes, absmax, start + i);
}
