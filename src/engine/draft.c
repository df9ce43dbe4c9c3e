/* draft.c - prompt-lookup drafting and the adaptive draft length (draft.h). */
#include "draft.h"

#include <string.h>

int rc_draft_lookup(const int32_t *hist, int n, int k, int32_t *out) {
    if (k <= 0 || n < 2) return 0;
    const int lo = n > RC_DRAFT_SPAN ? n - RC_DRAFT_SPAN : 0;
    for (int g = n - 1 < RC_DRAFT_NGRAM ? n - 1 : RC_DRAFT_NGRAM; g >= 1; g--) {
        const int32_t *suf = hist + n - g;
        /* the most recent j with hist[j..j+g) == suffix, followed by at least one token */
        for (int j = n - g - 1; j >= lo; j--) {
            if (hist[j] != suf[0] || memcmp(hist + j, suf, (size_t)g * sizeof *hist)) continue;
            /* hist[n + i] is guessed as hist[j + g + i]; past the history's end that is itself
             * a guess (the repeat continues with period n - g - j) */
            for (int i = 0; i < k; i++) out[i] = j + g + i < n ? hist[j + g + i] : out[j + g + i - n];
            return k;
        }
    }
    return 0;
}

void rc_drafter_init(rc_drafter *d, int max) {
    d->max = max > RC_DRAFT_MAX ? RC_DRAFT_MAX : max < 0 ? 0 : max;
    d->len = d->max;
    d->miss = 0;
    d->wait = 0;
}

int rc_drafter_len(rc_drafter *d) {
    if (d->max <= 0) return 0;
    if (d->wait > 0) {
        d->wait--;
        return 0;
    }
    return d->len;
}

void rc_drafter_update(rc_drafter *d, int k, int accepted) {
    if (k <= 0) return;
    if (accepted >= k) {
        d->miss = 0;
        d->len = d->len * 2 > d->max ? d->max : d->len * 2;
    } else if (2 * accepted >= k) {
        d->miss = 0;
        d->len = accepted + 1 > d->max ? d->max : accepted + 1;
    } else { /* less than half accepted: the extra rows cost more than they saved */
        d->len = accepted + 1 < d->len / 2 ? accepted + 1 : d->len / 2 > 1 ? d->len / 2 : 1;
        d->wait = (1 << (d->miss < 6 ? d->miss + 1 : 6)) - 1;
        d->miss++;
    }
}
