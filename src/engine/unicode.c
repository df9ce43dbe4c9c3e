/* unicode.c - UTF-8 (lossy, Rust-compatible), Unicode classes, NFC/NFD and lowercase over
 * the generated tables in unicode_tables.c (see tools/gen_unicode_tables.py for layouts). */
#include "unicode.h"

#include <stdlib.h>
#include <string.h>


/* Hangul syllable arithmetic (Unicode ch. 3.12). */
enum { H_S0 = 0xAC00, H_L0 = 0x1100, H_V0 = 0x1161, H_T0 = 0x11A7, H_LN = 19, H_VN = 21,
       H_TN = 28, H_NN = H_VN * H_TN, H_SN = H_LN * H_NN };

/* runs[]: (start << 8 | value), ascending start; value of the last run with start <= cp. */
static unsigned run_lookup(const uint32_t *runs, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((runs[mid] >> 8) <= cp) lo = mid; else hi = mid;
    }
    return runs[lo] & 0xFFu;
}

unsigned rc_uc_flags(uint32_t cp) {
    if (cp < 0x80) {
        /* hot path: ASCII */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return RC_UC_L;
        if (cp >= '0' && cp <= '9') return RC_UC_N;
    }
    if (cp > 0x10FFFF) return RC_UC_C;
    return run_lookup(rc_uc_class_runs, rc_uc_class_runs_n, cp);
}

unsigned rc_uc_ccc(uint32_t cp) {
    if (cp < 0x300 || cp > 0x10FFFF) return 0;
    return run_lookup(rc_uc_ccc_runs, rc_uc_ccc_runs_n, cp);
}

int32_t rc_utf8_next(const uint8_t *s, size_t n, size_t *adv) {
    uint8_t b0 = s[0];
    *adv = 1;
    if (b0 < 0x80) return b0;
    size_t need;
    uint32_t cp;
    uint8_t lo = 0x80, hi = 0xBF; /* valid range of the second byte */
    if (b0 >= 0xC2 && b0 <= 0xDF) { need = 1; cp = b0 & 0x1Fu; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2; cp = b0 & 0x0Fu;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3; cp = b0 & 0x07u;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else return -1;
    for (size_t k = 1; k <= need; k++) {
        if (k >= n) return -1;
        uint8_t b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -1;
        cp = (cp << 6) | (b & 0x3Fu);
        *adv = k + 1;
    }
    return (int32_t)cp;
}

size_t rc_utf8_put(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6)); out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12)); out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18)); out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

recall_status rc_u32_push(rc_u32vec *a, uint32_t cp) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof(uint32_t)) return RECALL_E_NOMEM;
        uint32_t *v = realloc(a->v, cap * sizeof(uint32_t));
        if (!v) return RECALL_E_NOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = cp;
    return RECALL_OK;
}

void rc_u32_free(rc_u32vec *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

recall_status rc_utf8_decode_lossy(const uint8_t *s, size_t n, rc_u32vec *cps) {
    size_t i = 0;
    while (i < n) {
        size_t adv;
        int32_t cp = rc_utf8_next(s + i, n - i, &adv);
        RC_TRY(rc_u32_push(cps, cp < 0 ? RC_UC_REPLACEMENT : (uint32_t)cp));
        i += adv;
    }
    return RECALL_OK;
}

/* Full canonical decomposition of one non-Hangul cp, or NULL (decomposes to itself). */
static const uint32_t *decomp_lookup(uint32_t cp, size_t *len) {
    size_t lo = 0, hi = rc_uc_decomp_idx_n / 2;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t c = rc_uc_decomp_idx[2 * mid];
        if (c == cp) {
            uint32_t ol = rc_uc_decomp_idx[2 * mid + 1];
            *len = ol & 0xFFu;
            return rc_uc_decomp_data + (ol >> 8);
        }
        if (c < cp) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

recall_status rc_uc_nfd(const uint32_t *in, size_t n, rc_u32vec *out) {
    size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = in[i];
        if (cp < 0xC0) { RC_TRY(rc_u32_push(out, cp)); continue; }
        if (cp >= H_S0 && cp < H_S0 + H_SN) {
            uint32_t s = cp - H_S0;
            RC_TRY(rc_u32_push(out, H_L0 + s / H_NN));
            RC_TRY(rc_u32_push(out, H_V0 + (s % H_NN) / H_TN));
            if (s % H_TN) RC_TRY(rc_u32_push(out, H_T0 + s % H_TN));
            continue;
        }
        size_t dl;
        const uint32_t *d = decomp_lookup(cp, &dl);
        if (!d) { RC_TRY(rc_u32_push(out, cp)); continue; }
        for (size_t k = 0; k < dl; k++) RC_TRY(rc_u32_push(out, d[k]));
    }
    /* canonical ordering: stable sort of each run of non-starters by ccc */
    uint32_t *v = out->v;
    for (size_t i = start + 1; i < out->n; i++) {
        unsigned c = rc_uc_ccc(v[i]);
        if (c == 0) continue;
        size_t j = i;
        uint32_t x = v[i];
        while (j > start) {
            unsigned cj = rc_uc_ccc(v[j - 1]);
            if (cj == 0 || cj <= c) break;
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    return RECALL_OK;
}

/* Primary composite of (a, b), or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= H_L0 && a < H_L0 + H_LN && b >= H_V0 && b < H_V0 + H_VN)
        return H_S0 + ((a - H_L0) * H_VN + (b - H_V0)) * H_TN;
    if (a >= H_S0 && a < H_S0 + H_SN && (a - H_S0) % H_TN == 0 && b > H_T0 && b < H_T0 + H_TN)
        return a + (b - H_T0);
    size_t lo = 0, hi = rc_uc_comp_n / 3;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const uint32_t *e = rc_uc_comp + 3 * mid;
        if (e[0] == a && e[1] == b) return e[2];
        if (e[0] < a || (e[0] == a && e[1] < b)) lo = mid + 1; else hi = mid;
    }
    return 0;
}

recall_status rc_uc_nfc(const uint32_t *in, size_t n, rc_u32vec *out) {
    int simple = 1; /* below U+0300 nothing decomposes differently or composes */
    for (size_t i = 0; i < n && simple; i++) simple = in[i] < 0x300;
    if (simple) {
        for (size_t i = 0; i < n; i++) RC_TRY(rc_u32_push(out, in[i]));
        return RECALL_OK;
    }
    size_t start = out->n;
    RC_TRY(rc_uc_nfd(in, n, out));
    uint32_t *v = out->v;
    size_t end = out->n, w = start;
    if (end == start) return RECALL_OK;
    size_t starter = start;
    unsigned last = rc_uc_ccc(v[start]);
    if (last != 0) last = 256; /* a leading non-starter composes with nothing */
    w = start + 1;
    for (size_t r = start + 1; r < end; r++) {
        uint32_t ch = v[r];
        unsigned c = rc_uc_ccc(ch);
        uint32_t comp = (last < c || last == 0) ? compose_pair(v[starter], ch) : 0;
        if (comp && (last < c || last == 0) && rc_uc_ccc(v[starter]) == 0) {
            v[starter] = comp;
            continue;
        }
        if (c == 0) starter = w;
        last = c;
        v[w++] = ch;
    }
    out->n = w;
    return RECALL_OK;
}

size_t rc_uc_lower(uint32_t cp, uint32_t out[2]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    if (cp == 0x130) { out[0] = 'i'; out[1] = 0x307; return 2; }
    size_t lo = 0, hi = rc_uc_lower_map_n / 2;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t c = rc_uc_lower_map[2 * mid];
        if (c == cp) { out[0] = rc_uc_lower_map[2 * mid + 1]; return 1; }
        if (c < cp) lo = mid + 1; else hi = mid;
    }
    out[0] = cp;
    return 1;
}
