/* cli_blob.c - `recall convert`, `recall info`, `recall verify`. */
#include "blob.h"
#include "rope.h"
#include "cli.h"
#include "convert.h"
#include "pool.h"
#include "qwen2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void convert_usage(FILE *f) {
    fprintf(f,
            "usage: recall convert --qwen2 DIR --bge DIR --pooler FILE --gate FILE --bridge FILE\n"
            "                      [--weights f32|bf16|nf4] [--pooler-heads N] [--lm-head-screen] -o OUT.blob\n"
            "       recall convert --tokenizers-only --qwen2 DIR --bge DIR -o OUT.blob\n"
            "\n"
            "Turns the original artifacts into one recall blob.\n"
            "  --qwen2 DIR       Hugging Face Qwen2 folder (config.json, model.safetensors or a sharded\n"
            "                    index, tokenizer.json)\n"
            "  --bge DIR         sentence-transformers bge folder (config.json, model.safetensors,\n"
            "                    vocab.txt, 1_Pooling/config.json; CLS pooling only)\n"
            "  --pooler FILE     AttnPoolSP checkpoint: torch .pt, .safetensors or .npz\n"
            "  --gate FILE       gate .npz (coef, intercept, mean, scale, thresh)\n"
            "  --bridge FILE     bridge head .npz (qdim, kdim, d, Wq.*, Wk.*)\n"
            "  --weights W       decoder Linear weights: f32 (default), bf16 or nf4\n"
            "  --pooler-heads N  pooler attention heads (default: the checkpoint's args.heads, else 8)\n"
            "  --lm-head-screen  also store an int8 copy of lm_head (one scale per 64 columns, 1 byte per\n"
            "                    weight) so greedy decoding reads it instead of lm_head and recomputes\n"
            "                    exactly only the rows that can win: the same tokens, fewer bytes per step\n"
            "  --tokenizers-only write only the two tokenizers (folders need no weights)\n"
            "  -o OUT            output path; written to OUT.tmp.PID then renamed\n"
            "Progress goes to stderr, one line per tensor.\n");
}

static void on_progress(void *ctx, const char *line) {
    (void)ctx;
    fprintf(stderr, "%s\n", line);
}

int cli_convert(int argc, char **argv) {
    rc_convert_opts o;
    memset(&o, 0, sizeof o);
    o.progress = on_progress;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            convert_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tokenizers-only")) {
            o.tokenizers_only = 1;
            continue;
        } else if (!strcmp(a, "--lm-head-screen")) {
            o.lm_head_screen = 1;
            continue;
        } else if (!strcmp(a, "--quiet")) {
            o.progress = NULL;
            continue;
        }
        if (!strcmp(a, "--qwen2")) slot = &o.qwen2_dir;
        else if (!strcmp(a, "--bge")) slot = &o.bge_dir;
        else if (!strcmp(a, "--pooler")) slot = &o.pooler_path;
        else if (!strcmp(a, "--gate")) slot = &o.gate_path;
        else if (!strcmp(a, "--bridge")) slot = &o.bridge_path;
        else if (!strcmp(a, "--weights")) slot = &o.weights;
        else if (!strcmp(a, "-o") || !strcmp(a, "--out")) slot = &o.out_path;
        else if (!strcmp(a, "--pooler-heads")) {
            if (i + 1 >= argc) break;
            char *end;
            long h = strtol(argv[++i], &end, 10);
            if (*end || h <= 0 || h > 4096) {
                fprintf(stderr, "recall convert: --pooler-heads %s: expected a positive integer\n", argv[i]);
                return 2;
            }
            o.pooler_heads = (int)h;
            continue;
        } else {
            fprintf(stderr, "recall convert: unknown argument '%s' (see --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "recall convert: %s needs a value\n", a);
            return 2;
        }
        *slot = argv[++i];
    }
    recall_err err = {0};
    if (rc_convert(&o, &err)) {
        fprintf(stderr, "recall convert: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s\n", o.out_path);
    return 0;
}

static int open_or_die(const char *cmd, const char *path, unsigned flags, rc_blob **b) {
    recall_err err = {0};
    if (rc_blob_open(path, flags, b, &err)) {
        fprintf(stderr, "recall %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}

int cli_info(int argc, char **argv) {
    const char *path = NULL;
    int show_tensors = 1;
    cli_exec_args x;
    memset(&x, 0, sizeof x);
    for (int i = 1; i < argc; i++) {
        const int xf = !strcmp(argv[i], "--numerics") ? cli_exec_flag("info", argc, argv, &i, &x) : 0;
        if (xf < 0) return 2;
        if (xf > 0) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: recall info BLOB [--no-tensors] [--numerics exact|q8]\n"
                   "Prints the blob's header, config and tensor table (name, dtype, shape, offset,\n"
                   "bytes, XXH64). Does not hash the data: use `recall verify` for that.\n"
                   "--numerics q8: also packs the decoder for the q8 profile and prints its bytes and\n"
                   "time (docs/PROFILES.md).\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-tensors")) {
            show_tensors = 0;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "recall info: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "recall info: missing BLOB (see --help)\n");
        return 2;
    }
    rc_blob *b;
    if (open_or_die("info", path, 0, &b)) return 1;
    const rc_blob_header *h = rc_blob_hdr(b);
    printf("blob %s\n  format version %u, %llu bytes, %u sections, body xxh64 %016llx\n", path, (unsigned)h->version,
           (unsigned long long)h->file_size, (unsigned)h->n_sections, (unsigned long long)h->body_checksum);
    {
        /* the execution context this machine would run the blob with (RECALL_SIMD / RECALL_THREADS) */
        rc_exec *ex = NULL;
        recall_err xerr = {0};
        if (cli_exec_open(&x, &ex, &xerr) == RECALL_OK) {
            printf("  simd: %s, threads: %d, numerics: %s\n", ex->k.name, ex->threads, rc_numerics_name(ex->numerics));
            rc_qwen2 *m = NULL;
            if (ex->numerics == RC_NUMERICS_Q8) { /* the profile's open cost: packing the decoder */
                char line[192];
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

int cli_verify(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: recall verify BLOB\n"
               "Re-checks the header, every section, every tensor checksum and the whole-body checksum.\n");
        return argc == 2 ? 0 : 2;
    }
    rc_blob *b;
    if (open_or_die("verify", argv[1], RC_OPEN_VERIFY, &b)) return 1;
    printf("%s: ok (%zu tensors, %llu bytes)\n", argv[1], rc_blob_n_tensors(b),
           (unsigned long long)rc_blob_hdr(b)->file_size);
    rc_blob_close(b);
    return 0;
}
