/* cli_opts.c - the option tables of every command, and the parser and help made from them
 * (cli_opts.h). The rows come first (the values' setters, then one row per option), then the
 * commands, each with the rows it takes; the text of a command's --help lives here too, so that
 * the option list and the text cannot drift apart. */
#include "cli_opts.h"

#include "cli.h"
#include "compare.h"
#include "draft.h"
#include "q8.h"
#include "qwen2.h"
#include "retriever.h"
#include "rope.h"
#include "session.h"
#include "simd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- setters: each parses one value into its field of cli_args ---------------------------- */

#define CLI_STR2(x) #x
#define CLI_STR(x) CLI_STR2(x)
#define FIELD(a, o, type) ((type *)((char *)(a) + (o)->field))

static int bad_value(const cli_opt *o, const char *val, const cli_args *a, const char *want) {
    return cli_usage_error(a->cmd, "%s %s: expected %s", o->name, val, want);
}

static int set_flag(const cli_opt *o, const char *val, cli_args *a) {
    (void)val;
    *FIELD(a, o, int) = 1;
    return 0;
}

static int set_str(const cli_opt *o, const char *val, cli_args *a) {
    *FIELD(a, o, const char *) = val;
    return 0;
}

/* A decimal integer in [lo, hi]. */
static int parse_long(const cli_opt *o, const char *val, const cli_args *a, long *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (!*val || *end || errno || v < (long)o->lo || v > (long)o->hi) {
        char want[96];
        snprintf(want, sizeof want, "an integer in %ld..%ld", (long)o->lo, (long)o->hi);
        return bad_value(o, val, a, want);
    }
    *out = v;
    return 0;
}

static int set_int(const cli_opt *o, const char *val, cli_args *a) {
    long v;
    if (parse_long(o, val, a, &v)) return 2;
    *FIELD(a, o, int) = (int)v;
    return 0;
}

static int set_long(const cli_opt *o, const char *val, cli_args *a) {
    return parse_long(o, val, a, FIELD(a, o, long));
}

/* A decimal integer >= 0 of 64 bits. */
static int parse_u64(const cli_opt *o, const char *val, const cli_args *a, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (!*val || *end || errno || val[0] == '-') return bad_value(o, val, a, "a non-negative integer");
    *out = v;
    return 0;
}

static int set_u64(const cli_opt *o, const char *val, cli_args *a) {
    return parse_u64(o, val, a, FIELD(a, o, unsigned long long));
}

/* A number (not NaN) in [lo, hi]. */
static int set_num(const cli_opt *o, const char *val, cli_args *a) {
    char *end;
    double v = strtod(val, &end);
    if (!*val || *end || isnan(v) || v < o->lo || v > o->hi) {
        char want[96];
        if (isinf(o->lo)) snprintf(want, sizeof want, "a number");
        else snprintf(want, sizeof want, "a number in %g..%g", o->lo, o->hi);
        return bad_value(o, val, a, want);
    }
    *FIELD(a, o, double) = v;
    return 0;
}

static int set_simd(const cli_opt *o, const char *val, cli_args *a) {
    if (rc_simd_parse(val) < 0 && strcmp(val, "auto")) return bad_value(o, val, a, "scalar, avx2, avx512, neon, wasm or auto");
    return set_str(o, val, a);
}

static int set_rope(const cli_opt *o, const char *val, cli_args *a) {
    rc_rope_profile p;
    recall_err e = {0};
    if (rc_rope_parse(val, &p, &e)) return cli_usage_error(a->cmd, "%s: %s", o->name, e.msg);
    return set_str(o, val, a);
}

static int set_screen(const cli_opt *o, const char *val, cli_args *a) {
    const int m = rc_lm_screen_parse(val);
    if (m < 0) return bad_value(o, val, a, RC_LM_SCREEN_NAMES);
    a->loop.lm_screen = m;
    return 0;
}

static int set_kv(const cli_opt *o, const char *val, cli_args *a) {
    const int kv = rc_kv_dtype_parse(val);
    if (kv < 0) return bad_value(o, val, a, RC_KV_DTYPE_NAMES);
    a->loop.kv = kv;
    return 0;
}

static int set_numerics(const cli_opt *o, const char *val, cli_args *a) {
    const int n = rc_numerics_parse(val);
    if (n < 0) return bad_value(o, val, a, RC_NUMERICS_NAMES);
    a->loop.exec.numerics = n;
    return 0;
}

/* --profile device: the device profile's run options (docs/PROFILES.md); the blob is checked at open
 * (cli_blob_open). Options given after it override it, and the outputs then name the result. */
static int set_profile(const cli_opt *o, const char *val, cli_args *a) {
    if (!strcmp(val, "device")) {
        a->loop.exec.numerics = RC_NUMERICS_Q8;
        a->loop.kv = RC_KV_DT_F16;
        a->loop.lm_screen = RC_LM_SCREEN_ON;
        a->pooler_cache_mb = 0; /* off: memory flat in the history (docs/MEMORY.md); the same bits */
    } else if (!strcmp(val, "exact")) {
        a->loop.exec.numerics = RC_NUMERICS_EXACT;
        a->loop.kv = RC_KV_DT_F32;
        a->loop.lm_screen = RC_LM_SCREEN_AUTO;
        a->pooler_cache_mb = -1; /* the default */
    } else {
        return bad_value(o, val, a, "exact or device");
    }
    a->profile = val;
    return 0;
}

/* --mode, --edge, --arm: the names are the engine's (rc_mode_parse, recall_loop.h), and so is the
 * message that refuses one. */
static int set_named(const cli_opt *o, const char *val, cli_args *a, int (*parse)(const char *, recall_err *),
                     int *field) {
    recall_err e = {0};
    const int v = parse(val, &e);
    if (v < 0) return cli_usage_error(a->cmd, "%s: %s", o->name, e.msg);
    *field = v;
    return 0;
}

static int set_mode(const cli_opt *o, const char *val, cli_args *a) {
    int v;
    if (set_named(o, val, a, rc_mode_parse, &v)) return 2;
    a->loop.mode = (rc_loop_mode)v;
    return 0;
}

static int set_edge(const cli_opt *o, const char *val, cli_args *a) {
    return set_named(o, val, a, rc_edge_parse, &a->loop.edge);
}
static int set_span(const cli_opt *o, const char *val, cli_args *a) {
    return set_named(o, val, a, rc_span_parse, &a->loop.span);
}
static int set_rerank(const cli_opt *o, const char *val, cli_args *a) {
    return set_named(o, val, a, rc_rerank_parse, &a->loop.rerank);
}

static int set_arm(const cli_opt *o, const char *val, cli_args *a) {
    int v;
    if (set_named(o, val, a, rc_arm_parse, &v)) return 2;
    a->loop.arm = (rc_arm)v;
    return 0;
}

static int set_kv_pages(const cli_opt *o, const char *val, cli_args *a) {
    recall_err e = {0};
    if (rc_kvp_parse(val, &a->kvp, &e)) return cli_usage_error(a->cmd, "%s: %s", o->name, e.msg);
    return 0;
}

static int set_kv_random(const cli_opt *o, const char *val, cli_args *a) {
    unsigned long long seed;
    if (parse_u64(o, val, a, &seed)) return 2;
    a->kvp.random = 1;
    a->kvp.seed = (uint64_t)seed;
    return 0;
}

/* ---- the rows ------------------------------------------------------------------------------- */

#define F(x) offsetof(cli_args, x)
#define NOLIM 0, 0

/* execution: the same bits for every choice */
static const cli_opt O_THREADS = {"--threads", NULL, "N",
                                  "worker threads (default: RECALL_THREADS, else the cores available);\n"
                                  "the same bits for any N",
                                  set_int, F(loop.exec.threads), 1, RC_MAX_THREADS};
static const cli_opt O_SIMD = {"--simd", NULL, "P",
                               "kernel path: scalar, avx2, avx512, neon, wasm (WebAssembly\n"
                               "builds) or auto (default: RECALL_SIMD, else the best this CPU\n"
                               "runs); the same bits",
                               set_simd, F(loop.exec.simd), NOLIM};
static const cli_opt O_HUGEPAGES = {"--hugepages", NULL, NULL,
                                    "copy the blob into memory advised for huge pages (faster decode,\n"
                                    "slower start)",
                                    set_flag, F(hugepages), NOLIM};
#define EXEC_OPTS &O_THREADS, &O_SIMD, &O_HUGEPAGES

/* the decoder */
static const cli_opt O_CTX_FWD = {"--ctx", NULL, "N",
                                  "the instance context: the positions the KV cache may grow to\n"
                                  "(default: the number of ids; above the trained positions the open\n"
                                  "fails naming both numbers)",
                                  set_int, F(ctx), 1, 1 << 24};
static const cli_opt O_CTX_FULL = {"--ctx", NULL, "N",
                                   "the instance context of the FULL arm (default: the trained\n"
                                   "positions; more is refused); only when a FULL arm runs",
                                   set_int, F(ctx), 1, 1 << 24};
static const cli_opt O_ROPE = {"--rope-scaling", NULL, "yarn:FACTOR:ORIG",
                               "a YaRN RoPE profile for a blob without one (trained positions:\n"
                               "floor(FACTOR x ORIG)); one contradicting the blob's fails naming both",
                               set_rope, F(rope_scaling), NOLIM};
static const cli_opt O_KV = {"--kv", NULL, "f32|f16",
                             "the KV cache's storage: f32 (default, exact) or f16 (half the bytes;\n"
                             "each K and V value rounded once as it is stored: an approximation,\n"
                             "named in every output; docs/KV.md)",
                             set_kv, F(loop.kv), NOLIM};
static const cli_opt O_NUMERICS = {"--numerics", NULL, "exact|q8",
                                   "the decoder's numerics profile: exact (default, the reference fp32\n"
                                   "order) or q8 (int8 layer matmuls, deterministic in its own right; its\n"
                                   "distance to exact in docs/PROFILES.md; named in every output)",
                                   set_numerics, F(loop.exec.numerics), NOLIM};
static const cli_opt O_PROFILE = {"--profile", NULL, "exact|device",
                                  "device = --numerics q8 --kv f16 --lm-head-screen on --pooler-cache 0, on a\n"
                                  "blob converted with --weights nf4 --bge-weights nf4 --lm-head-screen\n"
                                  "(refused otherwise); exact = --numerics exact --kv f32 (default). Later\n"
                                  "options override it; every output names the profile that ran\n"
                                  "(docs/PROFILES.md)",
                                  set_profile, F(profile), NOLIM};
static const cli_opt O_KV_PAGES = {"--kv-pages", NULL, "PAGE:BUDGET",
                                   "page-sparse decode attention (an approximation): each decode step\n"
                                   "attends to page 0, the last two pages and the best BUDGET/PAGE other\n"
                                   "pages of PAGE positions, ranked by a per-page bound of q.k",
                                   set_kv_pages, F(kvp), NOLIM};
static const cli_opt O_KV_RANDOM = {"--kv-pages-random", NULL, "SEED",
                                    "the control of --kv-pages: as many pages, drawn at random (seeded)",
                                    set_kv_random, F(kvp), NOLIM};

/* token ids and files */
static const cli_opt O_IDS = {"--ids", NULL, "'[...]'",
                              "the token ids: a JSON array, or decimal ids separated by whitespace", set_str,
                              F(ids), NOLIM};
static const cli_opt O_TOKENS_FILE = {"--tokens-file", NULL, "F", "the token ids from file F (the same two forms)",
                                      set_str, F(tokens_file), NOLIM};
static const cli_opt O_BENCH = {"--bench", NULL, "FILE", "the benchmark data (tests/golden/recall_bench.json)",
                                set_str, F(bench), NOLIM};

/* the recall loop */
static const cli_opt O_MODE = {"--mode", NULL, "M",
                               "faithful (default: the reference loop, seal forward included) or clean",
                               set_mode, F(loop.mode), NOLIM};
static const cli_opt O_EDGE = {"--edge", NULL, "E",
                               "off (default), inject or exchange (--mode clean only). inject: while\n"
                               "an injection is alive, each rebuild also injects the text around the\n"
                               "window's start (the last block evicted, the window's first) if the\n"
                               "bridge head scores it as high as the fire's weakest injected block.\n"
                               "exchange: the window starts where the exchange it would cut starts\n"
                               "(after the EOS that closed the one before, at most 2 x block earlier).\n"
                               "Either way a fact straddling the window's edge is whole; up to 2 x\n"
                               "block more positions",
                               set_edge, F(loop.edge), NOLIM};
static const cli_opt O_SPAN = {"--span", NULL, "S",
                               "block (default) or exchange (--mode clean only): each block a fire\n"
                               "injects is widened to the exchanges it cuts (a user's message and the\n"
                               "reply, closed by EOS; up to half a block each way), so that a fact\n"
                               "sealed across two blocks comes back whole; up to k x block more positions",
                               set_span, F(loop.span), NOLIM};
static const cli_opt O_RERANK = {"--rerank", NULL, "R",
                                 "off (default), words or single (--mode clean only). words: a fire\n"
                                 "takes the top k of the bridge head's scores added to a score by the\n"
                                 "words of the user's message being answered, each scaled to [0, 1] over\n"
                                 "the candidates. single: the same, but when one candidate holds those\n"
                                 "words better than every other and leads the sum, it is injected alone",
                                 set_rerank, F(loop.rerank), NOLIM};
static const cli_opt O_TOP_K = {"--top-k", NULL, "N",
                                "the blocks every fire injects, 1..8 (default: the blob's loop.k, the\n"
                                "reference's 2); --rerank single takes one only where the question's\n"
                                "words single it out",
                                set_int, F(top_k), 1, RC_MAX_K};
static const cli_opt O_ARM = {"--arm", NULL, "A", "RC_bge (default: recall), SP (no recall) or FULL (no eviction)",
                              set_arm, F(loop.arm), NOLIM};
static const cli_opt O_THRESHOLD = {"--threshold", NULL, "T", "gate threshold (default: the gate file's thresh)",
                                    set_num, F(threshold), -INFINITY, INFINITY};
static const cli_opt O_THRESHOLD_FILE = {"--threshold-file", NULL, "FILE",
                                         "the gate threshold `recall calibrate --write FILE` wrote; refused\n"
                                         "unless it was made on this blob with this --numerics and --kv",
                                         set_str, F(threshold_file), NOLIM};
static const cli_opt O_CALIBRATE = {"--calibrate", NULL, "BENCH",
                                    "set the gate threshold at startup as recall calibrate does: problems\n"
                                    "1000-1009 of BENCH through this model (its weights, --numerics, --kv),\n"
                                    "firing disabled, p10 of the gate scores at recall positions; said on\n"
                                    "stderr",
                                    set_str, F(calibrate), NOLIM};
static const cli_opt O_FIRE_ONCE = {"--fire-once", NULL, NULL, "at most one injection per turn", set_flag,
                                    F(loop.fire_once), NOLIM};
static const cli_opt O_HYSTERESIS = {"--hysteresis", NULL, "N",
                                     "inject only after N consecutive gate scores above the threshold", set_int,
                                     F(loop.hysteresis), 0, 1000000};
static const cli_opt O_FLOOR = {"--floor", NULL, "F",
                                "inject only if the best bridge score is >= F (fires still logged)", set_num,
                                F(floor), -INFINITY, INFINITY};
static const cli_opt O_TURN_CAP = {"--max-turn-tokens", NULL, "N",
                                   "reply cap per turn (default: the blob's loop.turn_cap; at most the\n"
                                   "session limit of 2^28 ids)",
                                   set_int, F(turn_cap), 0, RC_SESSION_MAX_IDS};
static const cli_opt O_DRAFT = {"--draft", NULL, "N",
                                "exact speculative decoding: verify up to N tokens guessed by prompt\n"
                                "lookup per forward (0 = off, default; at most 32); the same bits",
                                set_int, F(loop.draft), 0, RC_DRAFT_MAX};
static const cli_opt O_REFERENCE = {"--reference-schedule", NULL, NULL,
                                    "the plain reference schedule (one forward per token, every turn\n"
                                    "replayed from BOS); the default fast schedule gives the same bits",
                                    set_flag, F(loop.reference_schedule), NOLIM};
static const cli_opt O_SCREEN = {"--lm-head-screen", NULL, "M",
                                 RC_LM_SCREEN_NAMES " (default: RECALL_LM_SCREEN, else on when the blob\n"
                                 "has convert --lm-head-screen's int8 lm_head): greedy picks read it and\n"
                                 "recompute exactly only the rows that can win; the same tokens",
                                 set_screen, F(loop.lm_screen), NOLIM};
static const cli_opt O_POOLER_CACHE = {"--pooler-cache", NULL, "MB",
                                      "keep the pooler's K/V rows of the oldest evicted tokens between\n"
                                      "rebuilds, up to MB MiB (36 KiB per token at the 1.5B shape; default 256,\n"
                                      "0 = off); the same bits at any size",
                                      set_int, F(pooler_cache_mb), 0, 1 << 30};
#define LOOP_OPTS                                                                                                    \
    &O_MODE, &O_EDGE, &O_SPAN, &O_RERANK, &O_TOP_K, &O_ARM, &O_THRESHOLD, &O_THRESHOLD_FILE, &O_CALIBRATE, &O_FIRE_ONCE, &O_HYSTERESIS, &O_FLOOR, &O_DRAFT, &O_SCREEN, &O_POOLER_CACHE, &O_KV,   \
        &O_NUMERICS, &O_PROFILE

/* ---- convert, info, verify --------------------------------------------------------------------- */

static const cli_opt O_QWEN2 = {"--qwen2", NULL, "DIR",
                                "Hugging Face Qwen2 folder (config.json, model.safetensors or a sharded\n"
                                "index, tokenizer.json)",
                                set_str, F(qwen2), NOLIM};
static const cli_opt O_BGE_DIR = {"--bge", NULL, "DIR",
                                  "sentence-transformers bge folder (config.json, model.safetensors,\n"
                                  "vocab.txt, 1_Pooling/config.json; CLS pooling only)",
                                  set_str, F(bge), NOLIM};
static const cli_opt O_POOLER = {"--pooler", NULL, "FILE", "AttnPoolSP checkpoint: torch .pt, .safetensors or .npz",
                                 set_str, F(pooler), NOLIM};
static const cli_opt O_GATE = {"--gate", NULL, "FILE", "gate .npz (coef, intercept, mean, scale, thresh)", set_str,
                               F(gate), NOLIM};
static const cli_opt O_BRIDGE = {"--bridge", NULL, "FILE", "bridge head .npz (qdim, kdim, d, Wq.*, Wk.*)", set_str,
                                 F(bridge), NOLIM};
static const cli_opt O_WEIGHTS = {"--weights", NULL, "W", "decoder Linear weights: f32 (default), bf16 or nf4",
                                  set_str, F(weights), NOLIM};
static const cli_opt O_BGE_WEIGHTS = {"--bge-weights", NULL, "W",
                                      "BERT encoder matrices and word embeddings: f32 (default), bf16 or nf4\n"
                                      "(position and token-type embeddings, norms and biases stay f32)",
                                      set_str, F(bge_weights), NOLIM};
static const cli_opt O_POOLER_HEADS = {"--pooler-heads", NULL, "N",
                                       "pooler attention heads (default: the checkpoint's args.heads, else 8)",
                                       set_int, F(pooler_heads), 1, 4096};
static const cli_opt O_STORE_SCREEN = {"--lm-head-screen", NULL, NULL,
                                       "also store an int8 copy of lm_head (one scale per 64 columns, 1 byte\n"
                                       "per weight) so that greedy decoding reads it instead of lm_head and\n"
                                       "recomputes exactly only the rows that can win: the same tokens",
                                       set_flag, F(store_screen), NOLIM};
static const cli_opt O_Q8_EXACT = {"--q8-exact", NULL, "SPEC",
                                   "attention the q8 profile keeps exact on this model: LAYER:LETTERS or\n"
                                   "FIRST-LAST:LETTERS, comma-separated, LETTERS from q, k, v, o (e.g.\n"
                                   "0-1:qkvo); stored in the blob, read by --numerics q8 only",
                                   set_str, F(q8_exact), NOLIM};
static const cli_opt O_NF4_KEEP = {"--nf4-keep", NULL, "SPEC",
                                   "with --weights nf4: attention projections stored in bf16 instead of\n"
                                   "NF4, as --q8-exact names them (e.g. 0-3:v: every layer's v_proj on a\n"
                                   "four-layer model); stored in the blob, each tensor read as stored",
                                   set_str, F(nf4_keep), NOLIM};
static const cli_opt O_STORE_THRESHOLD = {"--threshold", NULL, "T",
                                         "the gate threshold stored in the blob instead of the gate file's thresh\n"
                                         "(what `recall calibrate` suggests for this build, e.g. an nf4 blob)",
                                         set_num, F(threshold), -INFINITY, INFINITY};
static const cli_opt O_TOKENIZERS_ONLY = {"--tokenizers-only", NULL, NULL,
                                          "write only the two tokenizers (the folders need no weights)", set_flag,
                                          F(tokenizers_only), NOLIM};
static const cli_opt O_OUT = {"-o", "--out", "OUT", "output path; written to OUT.tmp.PID, then renamed", set_str,
                              F(out), NOLIM};
static const cli_opt O_QUIET = {"--quiet", NULL, NULL, "no progress lines", set_flag, F(quiet), NOLIM};
static const cli_opt *const CONVERT_OPTS[] = {&O_QWEN2, &O_BGE_DIR, &O_POOLER, &O_GATE, &O_BRIDGE,
                                              &O_WEIGHTS, &O_BGE_WEIGHTS, &O_POOLER_HEADS, &O_STORE_SCREEN, &O_Q8_EXACT, &O_NF4_KEEP,
                                              &O_STORE_THRESHOLD,
                                              &O_TOKENIZERS_ONLY, &O_OUT, &O_QUIET, NULL};

static const cli_opt O_NO_TENSORS = {"--no-tensors", NULL, NULL, "leave out the tensor table", set_flag,
                                     F(no_tensors), NOLIM};
static const cli_opt *const INFO_OPTS[] = {&O_NO_TENSORS, &O_KV, &O_NUMERICS, NULL};
static const cli_opt *const NO_OPTS[] = {NULL};

/* ---- tokenize, detokenize ------------------------------------------------------------------- */

static const cli_opt O_USE_BGE = {"--bge", NULL, NULL, "the WordPiece (BERT/bge) tokenizer instead of the Qwen2 BPE",
                                  set_flag, F(use_bge), NOLIM};
static const cli_opt O_SPECIAL = {"--special", NULL, NULL,
                                  "add the special tokens (BOS for Qwen2; [CLS] ... [SEP] and the\n"
                                  "512-token limit for bge)",
                                  set_flag, F(special), NOLIM};
static const cli_opt O_TEXT_FILE = {"--file", NULL, "F", "the text (default: stdin)", set_str, F(file), NOLIM};
static const cli_opt O_SKIP_SPECIAL = {"--skip-special", NULL, NULL, "drop special tokens", set_flag,
                                       F(skip_special), NOLIM};
static const cli_opt *const TOKENIZE_OPTS[] = {&O_USE_BGE, &O_SPECIAL, &O_TEXT_FILE, NULL};
static const cli_opt *const DETOKENIZE_OPTS[] = {&O_USE_BGE, &O_SKIP_SPECIAL, NULL};

/* ---- forward, score, embed, pool, heads --------------------------------------------------- */

static const cli_opt O_DUMP_FWD = {"--dump", NULL, "OUT.npz",
                                   "write ids [T] (int32), logits [T,V], hidden_last [layers+1,H] (HF\n"
                                   "hidden_states at the last position) and q_layers [n_gate,T,heads*head_dim]\n"
                                   "(q_proj outputs after bias, before RoPE, at the gate layers); without it\n"
                                   "the argmax of the last logits is printed",
                                   set_str, F(dump), NOLIM};
static const cli_opt O_DECODE_FROM = {"--decode-from", NULL, "N",
                                      "ids 0..N-1 in one prefill, then each later id in its own call (the\n"
                                      "decode path; the logits are bitwise those of one prefill unless\n"
                                      "--kv-pages is given)",
                                      set_long, F(decode_from), 0, 1 << 24};
static const cli_opt *const FORWARD_OPTS[] = {&O_IDS, &O_TOKENS_FILE, &O_DUMP_FWD, &O_CTX_FWD, &O_ROPE,
                                              &O_DECODE_FROM, &O_KV_PAGES, &O_KV_RANDOM, &O_KV, &O_NUMERICS, EXEC_OPTS, NULL};

static const cli_opt O_CHUNK = {"--chunk", NULL, "N",
                                "chunk length (3 .. the trained positions; default: all ids, at most\n"
                                "the trained positions); input shorter than N is refused",
                                set_int, F(chunk), 3, 1 << 24};
static const cli_opt O_BOS = {"--bos", NULL, NULL,
                              "replace each chunk's first id by tok.bos (llama-perplexity with add_bos;\n"
                              "default: on iff the blob says tok.add_bos = 1)",
                              set_flag, F(bos), NOLIM};
static const cli_opt O_PER_POSITION = {"--per-position", NULL, NULL,
                                       "print (and write to --json) every position: chunk, pos, target, nll,\n"
                                       "greedy",
                                       set_flag, F(per_position), NOLIM};
static const cli_opt O_JSON_SCORE = {"--json", NULL, "OUT", "the results as JSON (OUT.tmp.PID, then renamed)", set_str,
                                     F(json), NOLIM};
static const cli_opt O_SCORING_ROWS = {"--scoring-rows", NULL, "R",
                                       "rows per forward call from position N/2 on (the scored ones; default\n"
                                       "64); the unscored first half is always prefilled in calls of 64 rows.\n"
                                       "R = 1 scores every position through the decode path (bitwise the same\n"
                                       "NLLs as prefill when attention is dense) and reports the decode tok/s",
                                       set_int, F(scoring_rows), 1, 64};
static const cli_opt *const SCORE_OPTS[] = {&O_IDS,      &O_TOKENS_FILE,  &O_CHUNK,    &O_BOS,
                                            &O_JSON_SCORE, &O_PER_POSITION, &O_SCORING_ROWS, &O_KV_PAGES,
                                            &O_KV_RANDOM, &O_KV,          &O_NUMERICS, &O_ROPE,     EXEC_OPTS, NULL};
static const cli_moved SCORE_MOVED[] = {
    {"--ctx", "the chunk length is --chunk N (--ctx is the instance context, which score sizes to the chunk)"},
    {NULL, NULL}};

static const cli_opt O_EMBED_FILE = {"--file", NULL, "TEXT", "the text to embed", set_str, F(file), NOLIM};
static const cli_opt O_DUMP_EMBED = {"--dump", NULL, "OUT.npz",
                                     "write ids [n] (int32) and emb [H]; without it the ids and the first\n"
                                     "values are printed",
                                     set_str, F(dump), NOLIM};
static const cli_opt *const EMBED_OPTS[] = {&O_EMBED_FILE, &O_DUMP_EMBED, EXEC_OPTS, NULL};

static const cli_opt O_DUMP_POOL = {"--dump", NULL, "OUT.npz",
                                    "write sp [n_sp,H]; without it the row norms are printed", set_str, F(dump),
                                    NOLIM};
static const cli_opt *const POOL_OPTS[] = {&O_IDS, &O_TOKENS_FILE, &O_DUMP_POOL, EXEC_OPTS, NULL};

static const cli_opt O_Q = {"--q", NULL, "F.npy",
                            "the raw gate feature (q_proj outputs of the gate layers, concatenated,\n"
                            "gate.dim values)",
                            set_str, F(q), NOLIM};
static const cli_opt O_EMB = {"--emb", NULL, "E.npy", "a bge embedding (bridge.kdim values): also print the bridge score",
                              set_str, F(emb), NOLIM};
static const cli_opt *const HEADS_OPTS[] = {&O_Q, &O_EMB, &O_HUGEPAGES, NULL};

/* ---- replay, chat --------------------------------------------------------------------------- */

static const cli_opt O_PROBLEM = {"--problem", NULL, "N", "the benchmark problem (its seed)", set_long, F(problem), 0,
                                  0x7fffffffL};
static const cli_opt O_TRACE_OUT = {"--trace", NULL, "OUT",
                                    "the trace JSON (the loop goldens' schema), written to OUT.tmp.PID, then\n"
                                    "renamed",
                                    set_str, F(trace_out), NOLIM};
static const cli_opt *const REPLAY_OPTS[] = {&O_BENCH,     &O_PROBLEM, &O_TRACE_OUT, LOOP_OPTS, &O_REFERENCE,
                                             &O_CTX_FULL, &O_ROPE,    EXEC_OPTS,    NULL};

static const cli_opt O_SESSION = {"--session", NULL, "FILE",
                                  "keep the conversation (token ids only) in FILE: loaded at start,\n"
                                  "rewritten atomically after every turn (FILE.tmp, fsync, rename). A\n"
                                  "damaged file is refused and left untouched. One chat per FILE:\n"
                                  "FILE.lock holds an advisory lock and the owner's pid while the chat\n"
                                  "runs (removed at exit; one left by a killed chat does not block); a\n"
                                  "second chat on FILE is refused at start (exit 3)",
                                  set_str, F(session), NOLIM};
static const cli_opt O_TRACE_LIVE = {"--trace", NULL, NULL,
                                     "print rebuilds, gate scores and fires on stderr as they happen", set_flag,
                                     F(trace_live), NOLIM};
static const cli_opt *const CHAT_OPTS[] = {&O_SESSION, &O_TRACE_LIVE, LOOP_OPTS, &O_TURN_CAP,
                                           &O_CTX_FULL, &O_ROPE,      EXEC_OPTS, NULL};

/* ---- eval, calibrate, longctx --------------------------------------------------------------- */

static const cli_opt O_PROBLEMS = {"--problems", NULL, "LIST", "seeds: 0-7 (default), 3, or 0,2,5-6", set_str,
                                   F(problems), NOLIM};
static const cli_opt O_EVAL_ARMS = {"--arms", NULL, "LIST",
                                    "comma-separated arm labels BASE[@THRESH][:rFLOOR] (default SP,RC_bge)\n"
                                    "BASE: SP (no recall), RC_bge (recall), FULL (no eviction)\n"
                                    "@THRESH: gate threshold (default: the gate file's thresh)\n"
                                    ":rFLOOR: relevance floor on the best bridge score (e.g. RC_bge@-3.5:r-21.3)",
                                    set_str, F(arms), NOLIM};
static const cli_opt O_JSON_EVAL = {"--json", NULL, "OUT",
                                    "per-problem, per-turn details (reply text, fires, scores); OUT.tmp.PID,\n"
                                    "then renamed",
                                    set_str, F(json), NOLIM};
static const cli_opt O_SHARD = {"--shard", NULL, "K/N",
                                "run shard K of N (K = 1..N): the jobs j with j % N == K-1, where job\n"
                                "j = arm index * number of problems + problem index (the order of one\n"
                                "run); needs --json, which then also records what --merge checks",
                                set_str, F(shard), NOLIM};
static const cli_opt *const EVAL_OPTS[] = {&O_BENCH,  &O_PROBLEMS, &O_EVAL_ARMS, &O_MODE, &O_EDGE, &O_SPAN, &O_RERANK, &O_TOP_K, &O_THRESHOLD_FILE,
                                           &O_CALIBRATE, &O_FIRE_ONCE, &O_HYSTERESIS, &O_JSON_EVAL,
                                           &O_SHARD,  &O_DRAFT,    &O_SCREEN,    &O_POOLER_CACHE, &O_KV, &O_NUMERICS, &O_PROFILE, &O_CTX_FULL, &O_ROPE,
                                           EXEC_OPTS, NULL};
static const cli_moved EVAL_MOVED[] = {
    {"--merge", "--merge must come first: recall eval --merge SHARD.json... [--json OUT]"}, {NULL, NULL}};

static const cli_opt O_JSON_MERGE = {"--json", NULL, "OUT",
                                     "the merged document, as one unsharded run writes it (OUT.tmp.PID, then\n"
                                     "renamed)",
                                     set_str, F(json), NOLIM};
static const cli_opt *const MERGE_OPTS[] = {&O_JSON_MERGE, NULL};

static const cli_opt O_PERCENTILE = {"--percentile", NULL, "P", "percentile of the recall-position scores (default 10)",
                                     set_num, F(percentile), 0, 100};
static const cli_opt O_SVG = {"--svg", NULL, "OUT.svg",
                              "draw the threshold sweep: casual fires per probe turn against the\n"
                              "question turns with a gate check above it after the question starts\n"
                              "(OUT.tmp.PID, then renamed)",
                              set_str, F(svg), NOLIM};
static const cli_opt O_WRITE = {"--write", NULL, "FILE",
                                "write the threshold file: the suggested threshold with the blob's\n"
                                "checksum, weights, numerics, kv, mode and how it was computed (JSON;\n"
                                "chat, replay and eval read it with --threshold-file)",
                                set_str, F(write), NOLIM};
static const cli_opt *const CALIBRATE_OPTS[] = {&O_BENCH,         &O_PROBLEMS, &O_PERCENTILE, &O_SVG, &O_WRITE, &O_MODE, &O_SCREEN,
                                                &O_POOLER_CACHE, &O_KV,       &O_NUMERICS,   &O_PROFILE, &O_ROPE, EXEC_OPTS, NULL};

static const cli_opt O_TASK = {"--task", NULL, "LIST",
                               "needle, multikey, vartrack (comma-separated, each once), or farfact\n"
                               "alone",
                               set_str, F(task), NOLIM};
static const cli_opt O_LEN = {"--len", NULL, "LIST",
                              "prompt lengths in tokens; a prompt holds exactly N tokens where the\n"
                              "tokenizer allows, never more. farfact: the distances, in tokens, from\n"
                              "the fact's value to its question",
                              set_str, F(len), NOLIM};
static const cli_opt O_CASES = {"--cases", NULL, "N", "farfact: cases per distance (default 10), case i of distance D\n"
                                "drawn from (--seed, D, i)",
                                set_int, F(cases), 1, 100000};
static const cli_opt O_FACT_SHARE = {"--fact-share", NULL, "F",
                                     "farfact: the probability that a filler exchange is a fact, not casual\n"
                                     "talk (default 0.25, the benchmark problems' mix; 0: no other facts)",
                                     set_num, F(fact_share), 0, 1};
static const cli_opt O_BENCH_FF = {"--bench", NULL, "FILE",
                                   "farfact: the benchmark file whose templates, facts and casual pairs\n"
                                   "make the chats (e.g. tests/golden/trained/eval_bench.json)",
                                   set_str, F(bench), NOLIM};
static const cli_opt O_DEPTH = {"--depth", NULL, "LIST",
                                "where the asked insert sits: the fraction of the prompt's haystack\n"
                                "tokens before it, 0..1 (default 0.5)",
                                set_str, F(depth), NOLIM};
static const cli_opt O_SEED = {"--seed", NULL, "S", "seeds every choice (default 0); the same seed gives the same cases",
                               set_u64, F(seed), NOLIM};
static const cli_opt O_LCTX_ARMS = {"--arms", NULL, "LIST",
                                    "FULL (whole prompt in the cache), SP, RC_bge (recall loop: the window\n"
                                    "slides over the prompt), each once; default FULL,SP,RC_bge",
                                    set_str, F(arms), NOLIM};
static const cli_opt O_MAX_NEW = {"--max-new", NULL, "N",
                                  "reply cap in tokens (default 32; farfact: the blob's loop.turn_cap);\n"
                                  "greedy, EOS ends the reply",
                                  set_int, F(max_new), 1, 1000000};
static const cli_opt O_JSON_LCTX = {"--json", NULL, "OUT",
                                    "per case: task, len, prompt_tokens, prompt_xxh64 (XXH64 of the ids as\n"
                                    "little-endian int32), depth, depth_actual, expected, per arm {answer,\n"
                                    "exact, n_reply, gates, fires, reply, seconds}; a summary per arm",
                                    set_str, F(json), NOLIM};
static const cli_opt O_HAYSTACK = {"--haystack", NULL, "F",
                                   "ASCII text to hide the answers in (default\n"
                                   "tests/golden/longctx/haystack.txt, this repository's docs and sources\n"
                                   "pinned at one commit)",
                                   set_str, F(haystack), NOLIM};
static const cli_opt O_PROMPTS = {"--prompts", NULL, "DIR",
                                  "write each case's prompt for other engines: DIR/case-K.ids (JSON array\n"
                                  "of the token ids, no BOS; `score --tokens-file` reads it) and\n"
                                  "DIR/case-K.txt (the same prompt as text, chat template included)",
                                  set_str, F(prompts), NOLIM};
static const cli_opt O_NO_RUN = {"--no-run", NULL, NULL, "build and check the cases (and write --json) without running any arm",
                                 set_flag, F(no_run), NOLIM};
static const cli_opt *const LONGCTX_OPTS[] = {&O_TASK,   &O_LEN,   &O_DEPTH,   &O_SEED,      &O_LCTX_ARMS, &O_CASES, &O_FACT_SHARE, &O_BENCH_FF,
                                              &O_MAX_NEW, &O_JSON_LCTX, &O_HAYSTACK, &O_PROMPTS, &O_NO_RUN,
                                              &O_MODE,  &O_EDGE, &O_SPAN, &O_RERANK, &O_TOP_K, &O_THRESHOLD, &O_FIRE_ONCE, &O_HYSTERESIS, &O_FLOOR,
                                              &O_SCREEN, &O_POOLER_CACHE, &O_KV, &O_NUMERICS, &O_PROFILE, &O_CTX_FULL, &O_ROPE,    EXEC_OPTS, NULL};

/* ---- trace-svg, compare --------------------------------------------------------------------- */

static const cli_opt O_SVG_OUT = {"-o", "--out", "OUT.svg", "the picture, written to OUT.svg.tmp.PID, then renamed",
                                  set_str, F(out), NOLIM};
static const cli_opt O_SVG_THRESHOLD = {"--threshold", NULL, "T",
                                        "the threshold line to draw (default: the trace's \"threshold\"; none if\n"
                                        "absent)",
                                        set_num, F(threshold), -INFINITY, INFINITY};
static const cli_opt *const SVG_OPTS[] = {&O_SVG_OUT, &O_SVG_THRESHOLD, NULL};

static const cli_opt O_JSON_CMP = {"--json", NULL, "OUT", "also write the report as JSON (OUT.tmp.PID, then renamed)",
                                   set_str, F(json), NOLIM};
static const cli_opt O_CMP_THRESHOLD = {"--threshold", NULL, "T", "gate threshold when neither trace records one",
                                        set_num, F(threshold), -INFINITY, INFINITY};
static const cli_opt *const COMPARE_OPTS[] = {&O_JSON_CMP, &O_CMP_THRESHOLD, NULL};

const cli_opt *const cli_all_opts[] = {
    &O_THREADS, &O_SIMD, &O_HUGEPAGES, &O_CTX_FWD, &O_CTX_FULL, &O_ROPE, &O_KV_PAGES, &O_KV_RANDOM, &O_KV, &O_NUMERICS, &O_PROFILE, &O_IDS,
    &O_TOKENS_FILE, &O_BENCH, &O_MODE, &O_EDGE, &O_SPAN, &O_RERANK, &O_TOP_K, &O_ARM, &O_THRESHOLD, &O_THRESHOLD_FILE, &O_CALIBRATE, &O_FIRE_ONCE, &O_HYSTERESIS, &O_FLOOR, &O_TURN_CAP,
    &O_DRAFT, &O_REFERENCE, &O_SCREEN, &O_POOLER_CACHE, &O_QWEN2, &O_BGE_DIR, &O_POOLER, &O_GATE, &O_BRIDGE, &O_WEIGHTS, &O_BGE_WEIGHTS,
    &O_POOLER_HEADS, &O_STORE_SCREEN, &O_Q8_EXACT, &O_NF4_KEEP, &O_TOKENIZERS_ONLY, &O_OUT, &O_QUIET, &O_NO_TENSORS, &O_USE_BGE, &O_SPECIAL,
    &O_TEXT_FILE, &O_SKIP_SPECIAL, &O_DUMP_FWD, &O_DECODE_FROM, &O_CHUNK, &O_BOS, &O_PER_POSITION, &O_JSON_SCORE,
    &O_SCORING_ROWS, &O_EMBED_FILE, &O_DUMP_EMBED, &O_DUMP_POOL, &O_Q, &O_EMB, &O_PROBLEM, &O_TRACE_OUT,
    &O_SESSION, &O_TRACE_LIVE, &O_PROBLEMS, &O_EVAL_ARMS, &O_JSON_EVAL, &O_SHARD, &O_JSON_MERGE, &O_PERCENTILE, &O_SVG, &O_WRITE,
    &O_TASK, &O_LEN, &O_CASES, &O_FACT_SHARE, &O_BENCH_FF, &O_DEPTH, &O_SEED, &O_LCTX_ARMS, &O_MAX_NEW, &O_JSON_LCTX, &O_HAYSTACK, &O_PROMPTS,
    &O_NO_RUN, &O_SVG_OUT, &O_SVG_THRESHOLD, &O_JSON_CMP, &O_CMP_THRESHOLD, NULL};

/* ---- the commands --------------------------------------------------------------------------- */

const cli_command cli_commands[] = {
    {"convert", "--qwen2 DIR --bge DIR --pooler FILE --gate FILE --bridge FILE -o OUT [options]\n"
                "       recall convert --tokenizers-only --qwen2 DIR --bge DIR -o OUT",
     "safetensors/npz/.pt artifacts -> one recall blob",
     "Turns the original artifacts into one recall blob. Progress goes to stderr, one line per\n"
     "tensor.",
     NULL, NULL, 0, 0, NULL, CONVERT_OPTS, NULL, cli_convert},
    {"info", "BLOB [--no-tensors]", "print a blob's config and tensor table",
     "Prints the blob's header, config and tensor table (name, dtype, shape, offset, bytes, XXH64),\n"
     "the RoPE profile, and the SIMD path and thread count this machine would run it with. Does not\n"
     "hash the data: `recall verify` does.",
     NULL, "BLOB", 1, 1, NULL, INFO_OPTS, NULL, cli_info},
    {"verify", "BLOB", "re-check every checksum of a blob",
     "Re-checks the header, every section, every tensor checksum and the whole-body checksum.", NULL, "BLOB", 1, 1,
     NULL, NO_OPTS, NULL, cli_verify},
    {"tokenize", "BLOB [options]", "text -> JSON array of token ids (Qwen2 BPE or --bge WordPiece)",
     "Encodes text (from --file, else stdin) and prints a JSON array of token ids. Invalid UTF-8 is\n"
     "replaced by U+FFFD.",
     NULL, "BLOB", 1, 1, NULL, TOKENIZE_OPTS, NULL, cli_tokenize},
    {"detokenize", "BLOB [options]", "JSON array of ids -> text",
     "Reads a JSON array of token ids on stdin and prints the decoded text.", NULL, "BLOB", 1, 1, NULL,
     DETOKENIZE_OPTS, NULL, cli_detokenize},
    {"forward", "BLOB (--ids '[...]' | --tokens-file F) [options]",
     "one Qwen2 prefill of given ids; dump logits/hidden/q to .npz",
     "One Qwen2 prefill of the ids from an empty cache. Prints the context and the KV cache bytes\n"
     "the prefill allocated.",
     NULL, "BLOB", 1, 1, NULL, FORWARD_OPTS, NULL, cli_forward},
    {"score", "BLOB (--tokens-file F | --ids '[...]') [options]",
     "teacher-forced NLL, greedy tokens and llama-perplexity PPL of given ids",
     "Teacher-forced scoring: per-position negative log-likelihood (natural log, double from the fp32\n"
     "logits) and greedy token, and perplexity with llama-perplexity's protocol: the ids are cut into\n"
     "chunks of N (--chunk), each chunk is evaluated from an empty cache and positions [N/2, N-1) are\n"
     "scored; prints the running PPL per chunk ('[1]x,[2]y,...'), 'Final estimate: PPL = P +/- E',\n"
     "the XXH64 of the int32 ids and the KV bytes. Prefill progress goes to stderr.",
     NULL, "BLOB", 1, 1, NULL, SCORE_OPTS, SCORE_MOVED, cli_score},
    {"embed", "BLOB --file TEXT [options]", "BERT (bge) embedding of a text; dump to .npz",
     "WordPiece-encodes the file's text ([CLS] ... [SEP], truncated to the model maximum) and runs\n"
     "the bge encoder: CLS pooling + L2 normalisation.",
     NULL, "BLOB", 1, 1, "--file", EMBED_OPTS, NULL, cli_embed},
    {"pool", "BLOB (--ids '[...]' | --tokens-file F) [options]", "AttnPoolSP soft tokens of given ids; dump to .npz",
     "Runs the SP pooler on the Qwen2 embeddings of the ids (an empty list skips cross-attention).", NULL, "BLOB",
     1, 1, NULL, POOL_OPTS, NULL, cli_pool},
    {"heads", "BLOB --q F.npy [options]", "gate score and bridge score of given feature vectors",
     "Prints 'gate S fire 0|1' (fire iff S > thresh) and, with --emb, 'bridge B' = Wq(F) . Wk(E).", NULL,
     "BLOB", 1, 1, "--q", HEADS_OPTS, NULL, cli_heads},
    {"replay", "BLOB --bench FILE --problem N --trace OUT.json [options]",
     "run one benchmark problem through the recall loop, write a trace",
     "Runs benchmark problem N (built with CPython's random.Random(N), as the reference does)\n"
     "through the recall loop and writes a trace in the schema of the loop goldens. Progress goes\n"
     "to stderr: the SIMD path and thread count, then one line per generated turn.",
     NULL, "BLOB", 1, 1, "--bench --problem --trace", REPLAY_OPTS, NULL, cli_replay},
    {"chat", "BLOB [options]", "interactive multi-turn chat with recall (--session FILE keeps it)",
     "Multi-turn chat through the recall loop. Reads one user message per line from stdin (a\n"
     "prompt is shown only when stdin is a terminal; piped input works too) and streams each\n"
     "reply to stdout as it is generated. Blank lines are ignored; end of input ends the chat.\n"
     "A message longer than the window slides through it (what scrolls out goes to the gist and\n"
     "the archive). On the FULL arm a context beyond the instance context is refused with both\n"
     "numbers, and so is a conversation past the session limit; the message is skipped, the chat\n"
     "goes on with the next line, and the exit status is 1.",
     "Exit status: 0 all turns done; 1 a message skipped, a turn failed or the session file\n"
     "refused; 2 usage error; 3 FILE is in use by another process (the line names its pid).\n"
     "With --trace, '[trace] session saved: N ids' follows each completed save, and with --draft\n"
     "'[trace] draft: V verify forwards, D drafted, A accepted' each turn that verified drafts.",
     "BLOB", 1, 1, NULL, CHAT_OPTS, NULL, cli_chat},
    {"eval", "BLOB --bench FILE [options]", "the reference recall benchmark over problems x arms: table + JSON",
     "The reference multi-fact recall benchmark (docs/LOOP.md, \"The benchmark\"): every arm replays each problem\n"
     "(built with CPython's random.Random(seed)) from scratch; 3 questions and 2 casual probes per\n"
     "problem are generated and scored. A job that fails is recorded in --json's \"failed\" with its\n"
     "error; the others still run and are written (exit 1).",
     "Scoring: recall = value (commas/spaces removed, lower-cased) found in the reply;\n"
     "retrieved = value (commas removed, lower-cased) found in an injected block's text;\n"
     "casual false-fire = probe turns with any fire (the reference counts fires anywhere in the\n"
     "turn, teacher-forced history included); fires = all fires of generated turns (injected).\n"
     "Shards: `recall eval --merge` (first argument) combines the --json files of all shards of one\n"
     "run. Progress goes to stderr, one line per problem; the table to stdout.",
     "BLOB", 1, 1, "--bench", EVAL_OPTS, EVAL_MOVED, cli_eval},
    {"eval --merge", "SHARD.json... [--json OUT]", "combine the shard files of one eval run",
     "Combines the --json files of all shards of one `recall eval --shard K/N` run (any order) into\n"
     "that run's table and --json (only the per-problem \"seconds\" timings differ). Refused (exit 2,\n"
     "one line naming the file and what differs): shards of different runs (BLOB, --bench, --problems,\n"
     "--arms, --mode, and every option that changes bits: --ctx, --rope-scaling, --lm-head-screen,\n"
     "--draft), a job present twice, and a job missing (named with the error its shard recorded when\n"
     "it failed). The run's options are in the files: a merge takes no others.",
     NULL, "the shard files", 1, CLI_MAX_POS, NULL, MERGE_OPTS, NULL, cli_eval_merge},
    {"calibrate", "BLOB --bench FILE [options]",
     "suggest a gate threshold from needle dialogues (p10 at recall positions)",
     "Suggests a gate threshold for this build (weights, quantisation, numerics), as the reference\n"
     "handoff prescribes (needle dialogues through the deployed model, threshold at about the 10th\n"
     "percentile of gate scores at known recall positions), by the rule the gate's own threshold\n"
     "was trained with, so that the two compare (docs/LOOP.md, \"Calibration\").\n"
     "  needle dialogues: the benchmark problems (--problems), run through the RC_bge loop with\n"
     "    firing disabled (threshold +inf): nothing is injected, every token is scored on its q\n"
     "  recall positions: the tokens of a question turn from its keyword's end to the reply's\n"
     "    restatement of the fact, while the fact's turn is out of the window\n"
     "  question-turn / probe-turn checks: the gate checks (at rebuilds) of question and probe\n"
     "    turns after their user message starts; 'whole turn' adds every check of a probe turn\n"
     "    (the benchmark's false-fire counts those too)",
     "Prints the score distributions, the suggested threshold and what it would do on these\n"
     "dialogues (fires are strict: score > threshold). Progress on stderr. --write FILE keeps the\n"
     "threshold for chat, replay and eval (--threshold-file FILE), which refuse it for another\n"
     "blob, --numerics or --kv; their --calibrate BENCH computes it at startup instead.",
     "BLOB", 1, 1, "--bench", CALIBRATE_OPTS, NULL, cli_calibrate},
    {"trace-svg", "TRACE.json -o OUT.svg [--threshold T]",
     "draw a replay trace (gate scores, fires, injected blocks) as SVG",
     "Draws one loop trace (written by `recall replay`, or a loop golden) as a self-contained SVG:\n"
     "per generated turn, the gate score of every rebuild against the threshold (dashed), fires\n"
     "(red), the stretches where injected blocks were in context (shaded), where the reply starts\n"
     "(dotted), and per fire a strip of the candidate blocks with the chosen ones highlighted. Hover\n"
     "an element for its numbers.",
     NULL, "TRACE.json", 1, 1, "-o", SVG_OPTS, NULL, cli_trace_svg},
    {"longctx", "BLOB --task LIST --len LIST [options]",
     "exact-answer long-context tasks (needle, multikey, vartrack, farfact) on each arm",
     "Exact-answer long-context cases (one per task x length x depth), each answered greedily on\n"
     "every arm. A case hides its answer (6 digits) in a pinned haystack at a depth and is put\n"
     "through the chat template as one user message:\n"
     "  needle    \"The special magic number is V.\"; asked: the special magic number\n"
     "  multikey  the same sentence for 4 keys (3 distractors at seeded depths); asked: one key's\n"
     "  vartrack  VAR A = V. then VAR B = VAR A. ... VAR D = VAR C. (hops at seeded depths after D);\n"
     "            asked: the value of VAR D\n"
     "farfact (alone, with --bench; --cases per distance) is far-back recall in a chat: a fact of\n"
     "the bench stated --len tokens before the question about it, other facts and casual exchanges\n"
     "of the bench between, the whole chat forced through the loop as `eval` forces a problem's\n"
     "history; each record says whether the gate fired at the question, whether the fact's block\n"
     "was injected, and the reply (docs/LONG_CONTEXT.md, \"Far-back recall\").",
     "Exact match: the reply text after its last \"</think>\" (if any), from its first non-blank\n"
     "character to the next newline, trailing whitespace trimmed, equals the expected digits (farfact:\n"
     "the fact's value). A case the FULL arm cannot hold (BOS + prompt + max-new + 1 positions above\n"
     "the context) is refused before anything runs; farfact runs FULL on the cases it holds and\n"
     "records the others as not run.",
     "BLOB", 1, 1, "--task --len", LONGCTX_OPTS, NULL, cli_longctx},
    {"compare", "A B [--json OUT] [--threshold T]",
     "engine output vs reference (.npz dumps or loop traces): where and why they differ",
     "Compares an engine output A with a reference output B of the same kind, judged by the\n"
     "numerics table of the documentation.\n"
     "  .npz dumps (recall forward / pool / embed --dump, or the same arrays from Python): per\n"
     "      array both hold: shape, max abs error, max error relative to B's max abs, the worst\n"
     "      index, the tolerance, PASS/FAIL; integer arrays must be identical; arrays only one\n"
     "      file holds are named and not compared.\n"
     "  loop traces (the golden schema; recall replay --trace): the turns are walked in order and\n"
     "      the first divergence is reported (turn, c0, kind) with the numbers that decide it. It\n"
     "      is a near-tie when the deciding values (gate score vs threshold, the competing\n"
     "      candidates' bridge scores, the top-2 logits) are\n"
     "      at most " CLI_STR(RC_CMP_NEAR_TIE_ULPS) " ulps apart on one side, so that rounding order alone can flip it;\n"
     "      otherwise a real divergence. Everything after it is its consequence and is not counted\n"
     "      as a new error.",
     "Turns are numbered from 1. Exit codes:\n"
     "  0  everything agrees within tolerance\n"
     "  1  a real divergence, or an array beyond its tolerance\n"
     "  2  bad input or usage: different kinds, shapes or problems, an unreadable or truncated file\n"
     "  3  the only divergence is a near-tie",
     "two files, A (engine) and B (reference)", 2, 2, NULL, COMPARE_OPTS, NULL, cli_compare},
};
const int cli_n_commands = (int)(sizeof cli_commands / sizeof cli_commands[0]);

/* ---- the parser ----------------------------------------------------------------------------- */

static int spelled(const cli_opt *o, const char *s) { return !strcmp(o->name, s) || (o->alias && !strcmp(o->alias, s)); }

const cli_opt *cli_takes(const cli_command *c, const char *name) {
    for (int i = 0; c->opts[i]; i++)
        if (spelled(c->opts[i], name)) return c->opts[i];
    return NULL;
}

const cli_command *cli_find(int argc, char **argv, int *skip) {
    if (argc < 2) return NULL;
    const int merge = argc > 2 && !strcmp(argv[1], "eval") && !strcmp(argv[2], "--merge");
    *skip = merge ? 2 : 1;
    for (int i = 0; i < cli_n_commands; i++)
        if (merge ? !strcmp(cli_commands[i].name, "eval --merge") : !strcmp(cli_commands[i].name, argv[1]))
            return &cli_commands[i];
    return NULL;
}

/* An option c does not take: renamed, another command's, or nobody's. */
static int refuse_option(const cli_command *c, const char *s) {
    for (int i = 0; c->moved && c->moved[i].name; i++)
        if (!strcmp(c->moved[i].name, s)) return cli_usage_error(c->name, "%s is not an option of %s: %s", s, c->name, c->moved[i].instead);
    for (int i = 0; cli_all_opts[i]; i++)
        if (spelled(cli_all_opts[i], s))
            return cli_usage_error(c->name, "%s is not an option of %s (recall %s --help lists them)", s, c->name,
                                   c->name);
    return cli_usage_error(c->name, "unknown option '%s' (recall %s --help lists the options)", s, c->name);
}

int cli_parse(const cli_command *c, int argc, char **argv, cli_args *a) {
    cli_args_init(a, c->name);
    const char *given[128];
    int n_given = 0;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            cli_help(c, stdout);
            return 0;
        }
        if (s[0] != '-' || !s[1]) {
            if (a->n_pos == c->max_pos)
                return cli_usage_error(c->name, "unexpected argument '%s': %s takes %s (see --help)", s, c->name,
                                       c->pos_name ? c->pos_name : "no positional arguments");
            a->pos[a->n_pos++] = s;
            continue;
        }
        const cli_opt *o = cli_takes(c, s);
        if (!o) return refuse_option(c, s);
        const char *val = NULL;
        if (o->arg) {
            if (i + 1 >= argc) return cli_usage_error(c->name, "%s needs a value (%s)", s, o->arg);
            val = argv[++i];
        }
        int rc = o->set(o, val, a);
        if (rc) return rc;
        if (n_given < (int)(sizeof given / sizeof given[0])) given[n_given++] = o->name;
    }
    if (a->n_pos < c->min_pos) return cli_usage_error(c->name, "needs %s (see --help)", c->pos_name);
    if ((!isnan(a->threshold) && (a->threshold_file || a->calibrate)) || (a->threshold_file && a->calibrate))
        return cli_usage_error(c->name, "--threshold, --threshold-file and --calibrate each set the gate threshold: "
                               "give one");
    recall_err e = {0};
    if (rc_recall_mode_check(&a->loop, &e)) return cli_usage_error(c->name, "%s", e.msg); /* across options */
    for (const char *r = c->required; r && *r;) {
        size_t l = strcspn(r, " ");
        int found = 0;
        for (int g = 0; g < n_given && !found; g++) found = strlen(given[g]) == l && !strncmp(given[g], r, l);
        if (!found) return cli_usage_error(c->name, "%.*s is required (see --help)", (int)l, r);
        r += l;
        while (*r == ' ') r++;
    }
    return -1;
}

/* ---- help and docs ---------------------------------------------------------------------------- */

static void opt_label(const cli_opt *o, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s%s%s", o->name, o->alias ? ", " : "", o->alias ? o->alias : "", o->arg ? " " : "",
             o->arg ? o->arg : "");
}

#define HELP_COL 26

void cli_help(const cli_command *c, FILE *f) {
    fprintf(f, "usage: recall %s %s\n\n%s\n", c->name, c->synopsis, c->about);
    fputs("\noptions:\n", f);
    for (int i = 0; c->opts[i]; i++) {
        char label[96];
        opt_label(c->opts[i], label, sizeof label);
        fprintf(f, "  %-*s", HELP_COL - 2, label);
        if (strlen(label) > HELP_COL - 3) fprintf(f, "\n%*s", HELP_COL, "");
        for (const char *h = c->opts[i]->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "%*s", HELP_COL, "");
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-*s%s\n", HELP_COL - 2, "-h, --help", "print this help");
    if (c->notes) fprintf(f, "\n%s\n", c->notes);
}

void cli_list(FILE *f) {
    fprintf(f, "usage: recall COMMAND [ARGS]   (recall COMMAND --help for details)\n\ncommands:\n");
    for (int i = 0; i < cli_n_commands; i++) fprintf(f, "  %-13s %s\n", cli_commands[i].name, cli_commands[i].summary);
}

/* Text for a table cell: newlines become spaces, '|' is escaped. */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\n') fputc(' ', f);
        else if (*s == '|') fputs("\\|", f);
        else fputc(*s, f);
    }
}

void cli_markdown(FILE *f) {
    for (int i = 0; i < cli_n_commands; i++) {
        const cli_command *c = &cli_commands[i];
        fprintf(f, "### recall %s\n\n%s.\n\n```\nrecall %s %s\n```\n\n%s\n\n", c->name, c->summary, c->name,
                c->synopsis, c->about);
        if (c->opts[0]) {
            fputs("| option | value | meaning |\n|---|---|---|\n", f);
            for (int k = 0; c->opts[k]; k++) {
                const cli_opt *o = c->opts[k];
                fprintf(f, "| `%s`%s%s%s | %s%s%s | ", o->name, o->alias ? ", `" : "", o->alias ? o->alias : "",
                        o->alias ? "`" : "", o->arg ? "`" : "", o->arg ? o->arg : "", o->arg ? "`" : "");
                md_cell(f, o->help);
                fputs(" |\n", f);
            }
            fputc('\n', f);
        }
        for (int k = 0; c->moved && c->moved[k].name; k++)
            fprintf(f, "`%s` is refused: %s.\n\n", c->moved[k].name, c->moved[k].instead);
        if (c->notes) fprintf(f, "%s\n\n", c->notes);
    }
}

void cli_table(FILE *f) {
    for (int i = 0; i < cli_n_commands; i++)
        for (int k = 0; cli_commands[i].opts[k]; k++) {
            const cli_opt *o = cli_commands[i].opts[k];
            fprintf(f, "%s\t%s\t%s\t%s\n", cli_commands[i].name, o->name, o->alias ? o->alias : "-", o->arg ? o->arg : "-");
        }
}
