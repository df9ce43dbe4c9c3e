/* nf4.h - NF4 (bitsandbytes-compatible 4-bit NormalFloat) codebook, quantiser, dequantiser.
 *
 * Definition (docs/NUMERICS.md, "NF4"): a weight is flattened row-major and cut into blocks of 64.
 * absmax[j] = max |x| over block j (fp32). n = x * (1.0f / absmax) in fp32; code = number of
 * midpoints m_i (i = 0..14) with m_i < n strictly, m_i = (float)(((double)c_i + (double)c_{i+1}) / 2).
 * A block whose absmax is 0 gets code 7 (value 0.0). Codes are packed two per byte, element 2j in
 * the HIGH nibble, 2j+1 in the low nibble. Dequantised value = RC_NF4_CODEBOOK[code] * absmax
 * (one fp32 multiply).
 */
#ifndef RECALL_NF4_H
#define RECALL_NF4_H

#include <stddef.h>
#include <stdint.h>

extern const float RC_NF4_CODEBOOK[16];

/* Quantises w[n] (n % 64 == 0): codes[n/2] packed bytes, absmax[n/64].
 * Returns 0, or -1 if n is not a multiple of 64. */
int rc_nf4_quantize(const float *w, size_t n, uint8_t *codes, float *absmax);

/* Code (0..15) of flat element e. */
static inline unsigned rc_nf4_code(const uint8_t *codes, size_t e) {
    uint8_t b = codes[e >> 1];
    return (e & 1) ? (b & 15u) : (unsigned)(b >> 4);
}

/* Exact fp32 value of flat element e. */
static inline float rc_nf4_value(const uint8_t *codes, const float *absmax, size_t e) {
    return RC_NF4_CODEBOOK[rc_nf4_code(codes, e)] * absmax[e >> 6];
}

/* out[i] = value of flat element (start + i), i in [0, n). */
void rc_nf4_dequant(const uint8_t *codes, const float *absmax, size_t start, size_t n, float *out);

#endif
