/* inflate.h - raw DEFLATE decoder (RFC 1951), as used by zip method 8.
 *
 * Decodes stored, fixed-Huffman and dynamic-Huffman blocks from `in` into the caller's
 * buffer `out[0, out_cap)`. The output is bounded: a stream that would write more than out_cap
 * bytes stops with RECALL_E_LIMIT. Malformed streams (bad block type, stored LEN/NLEN mismatch,
 * over-subscribed or incomplete codes, distance before the start of the output, truncated
 * input) fail with RECALL_E_FORMAT and the byte offset into `in` where decoding stopped.
 * No zlib/gzip wrapper, no preset dictionary.
 */
#ifndef RECALL_INFLATE_H
#define RECALL_INFLATE_H

#include "status.h"

/* On success *out_len is the number of bytes produced and *in_used (may be NULL) the number of
 * input bytes consumed up to the end of the final block (rounded up to a whole byte). */
recall_status rc_inflate(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_cap,
                         size_t *out_len, size_t *in_used, recall_err *err);

#endif
