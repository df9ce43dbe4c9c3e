/* cli_blob.c - `recall convert`, `recall info`, `recall verify`. */
#include "blob.h"
#include "rope.h"
#include "cli.h"
#include "qwen2.h"
#include "convert.h"
#include "pool.h"
#include "qwen2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void on_progress(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

int cli_convert(const cli_args *a) {
    const rc_convert_opts o = {.qwen2_dir = a->qwen2, .bge_dir = a->bge, .pooler_path = a->pooler,
                               .gate_path = a->gate, .bridge_path = a->bridge, .weights = a->weights,
                               .bge_weights = a->bge_weights, .pooler_heads = a->pooler_heads,
                               .tokenizers_only = a->tokenizers_only, .lm_head_screen = a->store_screen,
                               .q8_exact = a->q8_exact, .nf4_keep = a->nf4_keep, .out_path = a->out,
                               .set_gate_threshold = !isnan(a->threshold), .gate_threshold = a->threshold,
                               .progress = a->quiet ? NULL : on_progress};
    recall_err err = {0};
    if (rc_convert(&o, &err)) return cli_fail("convert", &err);
    fprintf(stderr, "wrote %s\n", o.out_path);
    return 0;
}

static int open_or_die(const char *cmd, const char *path, unsigned flags, rc_blob **b) {
    recall_err err = {0};
    return rc_blob_open(path, flags, b, &err) ? cli_fail(cmd, &err) : 0;
}

int cli_info(const cli_args *a) {
    const char *path = a->pos[0];
    const int show_tensors = !a->no_tensors;
    const rc_kv_dtype kv = (rc_kv_dtype)a->loop.kv; /* what the 'kv:' line describes */
    rc_blob *b;
    if (open_or_die("info", path, 0, &b)) return 1;
    const rc_blob_header *h = rc_blob_hdr(b);
    printf("blob %s\n  format version %u, %llu bytes, %u sections, body xxh64 %016llx\n", path, (unsigned)h->version,
           (unsigned long long)h->file_size, (unsigned)h->n_sections, (unsigned long long)h->body_checksum);
    {
        /* the execution context the CLI would run the blob with here (RECALL_SIMD, RECALL_THREADS, cores) */
        rc_exec *ex = NULL;
        recall_err xerr = {0};
        if (cli_exec_open(a, &ex, &xerr) == RECALL_OK) {
            printf("  simd: %s, threads: %d\n", ex->k.name, ex->threads);
            int64_t L = 0, NKV = 0, D = 0; /* the KV bytes per position of the decoder, if any */
            if (!rc_blob_get_i64(b, "qwen2.layers", &L, &xerr) && !rc_blob_get_i64(b, "qwen2.kv_heads", &NKV, &xerr) &&
                !rc_blob_get_i64(b, "qwen2.head_dim", &D, &xerr))
                printf("  kv: %s, %lld bytes per position (f32 %lld, f16 %lld)\n", rc_kv_dtype_name(kv),
                       (long long)(2 * L * NKV * D * (kv == RC_KV_DT_F16 ? 2 : 4)), (long long)(8 * L * NKV * D),
                       (long long)(4 * L * NKV * D));
            rc_qwen2 *m = NULL;
            if (ex->opts.numerics == RC_NUMERICS_Q8) { /* the profile's open cost: packing the decoder */
                char line[320];
                if (rc_qwen2_open_ex(b, 1, ex, &m, &xerr) == RECALL_OK) cli_numerics_describe(m, line, sizeof line);
                else snprintf(line, sizeof line, "q8 unavailable (%.150s)", xerr.msg);
                printf("  numerics %s\n", line);
                rc_qwen2_close(m);
            }
            rc_exec_close(ex);
        } else {
            printf("  simd: unavailable (%s)\n", xerr.msg);
        }
    }
    printf("config (%zu keys):\n", rc_blob_n_kv(b));
    for (size_t i = 0; i < rc_blob_n_kv(b); i++) {
        const rc_blob_kv *kv = rc_blob_kv_at(b, i);
        printf("  %-24s ", kv->key);
        if (kv->type == RC_KV_STR) printf("\"%s\"", kv->v.s);
        for (uint32_t j = 0; kv->type != RC_KV_STR && j < kv->count; j++) {
            if (kv->type == RC_KV_I64) printf("%s%lld", j ? "," : "", (long long)kv->v.i[j]);
            else printf("%s%.9g", j ? "," : "", kv->v.f[j]);
        }
        printf("\n");
    }
    {
        /* the decoder's RoPE profile and the positions it was trained for (rope.h) */
        int64_t max_pos = 0;
        rc_rope_profile rp;
        recall_err rerr = {0};
        char line[256];
        if (rc_blob_kv_find(b, "qwen2.max_pos") && !rc_blob_get_i64(b, "qwen2.max_pos", &max_pos, &rerr)) {
            if (rc_rope_read(b, &rp, &rerr) == RECALL_OK) {
                rc_rope_describe(&rp, max_pos, line, sizeof line);
                printf("rope: %s\n", line);
            } else {
                printf("rope: unreadable (%s)\n", rerr.msg);
            }
        }
    }
    static const char *kinds[] = {"?", "config", "tensors", "tokenizer-bpe", "tokenizer-wordpiece"};
    printf("sections:\n");
    for (uint32_t k = 1; k <= 4; k++) {
        size_t size;
        if (rc_blob_section(b, k, &size)) printf("  %-20s %zu bytes\n", kinds[k], size);
    }
    size_t total = 0;
    for (size_t i = 0; i < rc_blob_n_tensors(b); i++) total += rc_blob_tensor_at(b, i)->nbytes;
    {
        /* the weights' storage and bytes per model part (the blob's footprint, part by part) */
        static const char *const parts[][3] = {{"qwen2.", "decoder", "qwen2"}, {"bert.", "bge (BERT)", "bert"},
                                               {"pooler.", "pooler", NULL}, {"gate.", "gate", NULL},
                                               {"bridge.", "bridge", NULL}};
        printf("weights:\n");
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            size_t n = 0, bytes = rc_blob_prefix_bytes(b, parts[i][0], &n);
            if (!n) continue;
            printf("  %-16s %-5s %4zu tensors %12zu bytes (%.1f MB)\n", parts[i][1], parts[i][2] ?
                   rc_blob_weights(b, parts[i][2]) : "f32", n, bytes, bytes / 1e6);
        }
    }
    printf("tensors (%zu, %zu bytes):\n", rc_blob_n_tensors(b), total);
    for (size_t i = 0; show_tensors && i < rc_blob_n_tensors(b); i++) {
        const rc_tensor *t = rc_blob_tensor_at(b, i);
        char shape[96] = "";
        size_t l = 0;
        for (int d = 0; d < t->ndim; d++)
            l += (size_t)snprintf(shape + l, sizeof shape - l, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        printf("  %-56s %-5s [%s] @%llu %zu B xxh64 %016llx\n", t->name, rc_dtype_name(t->dtype), shape,
               (unsigned long long)t->offset, t->nbytes, (unsigned long long)t->checksum);
    }
    rc_blob_close(b);
    return 0;
}

int cli_verify(const cli_args *a) {
    rc_blob *b;
    if (open_or_die("verify", a->pos[0], RC_OPEN_VERIFY, &b)) return 1;
    printf("%s: ok (%zu tensors, %llu bytes)\n", a->pos[0], rc_blob_n_tensors(b),
           (unsigned long long)rc_blob_hdr(b)->file_size);
    rc_blob_close(b);
    return 0;
}
