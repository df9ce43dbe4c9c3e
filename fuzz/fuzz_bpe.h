/* fuzz_bpe.h - the worldA BPE tokenizer for the fuzz targets that need one (built from the
 * committed tokenizer.json once per process; run the targets from the repository root). */
#ifndef RECALL_FUZZ_BPE_H
#define RECALL_FUZZ_BPE_H

#include "tokenize_bpe.h"

#include <stdlib.h>

static const rc_bpe *fuzz_worldA_bpe(void) {
    static rc_bpe *bpe; /* fuzz harness only: built once per process */
    if (!bpe) {
        uint8_t *sec;
        size_t size;
        recall_err err = {0};
        if (rc_bpe_build_from_json("tests/golden/worldA/qwen2/tokenizer.json", NULL, &sec, &size, &err) ||
            rc_bpe_load(sec, size, &bpe, &err))
            abort();
        free(sec);
    }
    return bpe;
}

#endif
