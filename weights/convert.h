/* convert.h - turn the original artifacts into one recall blob.
 *
 * Inputs: the Qwen2 HF folder (config.json, model.safetensors or a sharded index, tokenizer.json),
 * the bge sentence-transformers folder (config.json, model.safetensors, vocab.txt,
 * tokenizer_config.json, sentence_bert_config.json, 1_Pooling/config.json), the pooler
 * checkpoint (.pt / .safetensors / .npz), the gate .npz and the bridge head .npz.
 *
 * Tensor names in the blob: "qwen2.<HF name>", "bert.<HF name without a leading 'bert.'>",
 * "pooler.<state-dict key>", "gate.<npz key>", "bridge.<npz key>". See weights/FORMAT.md.
 */
#ifndef RECALL_CONVERT_H
#define RECALL_CONVERT_H

#include "status.h"

typedef struct {
    const char *qwen2_dir;
    const char *bge_dir;
    const char *pooler_path;
    const char *gate_path;
    const char *bridge_path;
    const char *weights;    /* decoder Linear weights: "f32", "bf16" or "nf4" (default "f32") */
    const char *bge_weights; /* BERT matrices and word embeddings: "f32", "bf16" or "nf4" (default "f32") */
    int pooler_heads;       /* 0: from the checkpoint's args.heads, else 8 */
    int tokenizers_only;    /* write only the two tokenizers (+ their config keys) */
    int lm_head_screen;     /* also write the int8 copy of lm_head for screening (src/engine/lm_screen.h) */
    const char *q8_exact;   /* NULL, or the attention q8 keeps exact (qwen2.h, RC_Q8_EXACT_KEY): its
                             * canonical SPEC is stored, checked against the decoder's layers */
    const char *nf4_keep;   /* NULL, or (with weights "nf4") the attention projections stored in bf16
                             * instead of NF4 (qwen2.h, RC_NF4_KEEP_KEY; the same SPEC grammar) */
    int set_gate_threshold; /* 1: store gate_threshold as the gate's thresh instead of the gate file's (a
                             * build calibrated with `recall calibrate`, e.g. an nf4 blob, ships its own) */
    double gate_threshold;
    const char *out_path;
    /* Progress lines ("[12/339] qwen2.model.layers.3.mlp.up_proj.weight nf4"), may be NULL. */
    void (*progress)(void *ctx, const char *line);
    void *progress_ctx;
} rc_convert_opts;

recall_status rc_convert(const rc_convert_opts *o, recall_err *err);

#endif
