/* test_tokenize.c - BPE and WordPiece tokenizers against Hugging Face goldens.
 *
 * Fixtures (made by Hugging Face tokenizers): tests/golden/tokenizers/{deepseek-r1-distill-qwen,
 * bge-base-en-v1.5}.json (HF tokenizers 0.23.2 encodes/decodes of the real tokenizer files),
 * tests/golden/worldA/{qwen2,bge}/ tokenizer files, bge_tokens.json and the token streams of
 * loop_A_seed0_clean_fp32.json. Every tokenizer is exercised through build -> section bytes ->
 * load, so the serialisation is covered by every golden.
 */
#include "fixture.h"

#include <criterion/criterion.h>

#include "json.h"
#include "tokenize_bpe.h"
#include "tokenize_wordpiece.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define G "tests/golden/"

/* A tokenizer as a blob holds it: built from its files into a section, loaded from the section.
 * wp: WordPiece from vocab.txt (src), else BPE from tokenizer.json (src). */
static void load_tok(int wp, const char *src, const char *cfg, rc_bpe **bpe, rc_wp **wpt) {
    uint8_t *sec;
    size_t size;
    recall_err err = {0};
    recall_status st =
        wp ? rc_wp_build(src, cfg, &sec, &size, &err) : rc_bpe_build_from_json(src, cfg, &sec, &size, &err);
    cr_assert_eq(st, RECALL_OK, "%s", err.msg);
    st = wp ? rc_wp_load(sec, size, wpt, &err) : rc_bpe_load(sec, size, bpe, &err);
    cr_assert_eq(st, RECALL_OK, "%s", err.msg);
    free(sec);
}
static rc_bpe *load_bpe(const char *json, const char *cfg) {
    rc_bpe *t = NULL;
    load_tok(0, json, cfg, &t, NULL);
    return t;
}
static rc_wp *load_wp(const char *vocab, const char *cfg) {
    rc_wp *t = NULL;
    load_tok(1, vocab, cfg, NULL, &t);
    return t;
}

/* Compares ids[0..n) with a JSON int array; returns the first mismatch index or -1. */
static long ids_diff(const int32_t *ids, size_t n, const json_value *want) {
    for (size_t i = 0; i < n && i < want->len; i++)
        if (ids[i] != want->items[i].i) return (long)i;
    return n == want->len ? -1 : (long)(n < want->len ? n : want->len);
}

static int32_t *json_ids(const json_value *arr) {
    int32_t *ids = malloc((arr->len + 1) * sizeof *ids);
    cr_assert(ids);
    for (size_t i = 0; i < arr->len; i++) ids[i] = (int32_t)arr->items[i].i;
    return ids;
}

/* One of the two tokenizers (the other NULL): the golden checks run the same on both. */
typedef struct {
    const rc_bpe *bpe;
    const rc_wp *wp;
} tok;

static recall_status enc(tok t, const char *s, size_t l, int sp, int32_t **ids, size_t *n, recall_err *e) {
    return t.wp ? rc_wp_encode(t.wp, s, l, sp, ids, n, e) : rc_bpe_encode(t.bpe, s, l, sp, ids, n, e);
}
static recall_status dec(tok t, const int32_t *ids, size_t n, int sk, char **s, size_t *l, recall_err *e) {
    return t.wp ? rc_wp_decode(t.wp, ids, n, sk, s, l, e) : rc_bpe_decode(t.bpe, ids, n, sk, s, l, e);
}

static void check_golden(const char *path, tok tk) {
    json_doc *doc = fixture_json(path);
    const json_value *root = json_root(doc);
    const json_value *encs = json_get_type(root, "encode", JSON_ARR);
    const json_value *decs = json_get_type(root, "decode", JSON_ARR);
    cr_assert(encs && decs && encs->len > 40 && decs->len > 200);
    size_t bad = 0;
    for (size_t i = 0; i < encs->len; i++) {
        const json_value *e = &encs->items[i], *text = json_get(e, "text");
        for (int sp = 0; sp < 2; sp++) {
            const json_value *want = json_get(e, sp ? "ids_special" : "ids");
            int32_t *ids;
            size_t n;
            recall_err err = {0};
            cr_assert_eq(enc(tk, text->str, text->len, sp, &ids, &n, &err), RECALL_OK, "%s", err.msg);
            long d = ids_diff(ids, n, want);
            if (d >= 0) {
                cr_log_error("%s encode[%zu] special=%d differs at %ld (got %zu ids, want %zu)",
                             path, i, sp, d, n, want->len);
                bad++;
            }
            free(ids);
        }
    }
    for (size_t i = 0; i < decs->len; i++) {
        const json_value *e = &decs->items[i], *arr = json_get(e, "ids");
        int32_t *ids = json_ids(arr);
        for (int sk = 0; sk < 2; sk++) {
            const json_value *want = json_get(e, sk ? "text_skip_special" : "text");
            char *s;
            size_t l;
            recall_err err = {0};
            cr_assert_eq(dec(tk, ids, arr->len, sk, &s, &l, &err), RECALL_OK, "%s", err.msg);
            if (l != want->len || memcmp(s, want->str, l) != 0) {
                cr_log_error("%s decode[%zu] skip=%d: got \"%.80s\" want \"%.80s\"", path, i, sk,
                             s, want->str);
                bad++;
            }
            free(s);
        }
        free(ids);
    }
    json_free(doc);
    cr_assert_eq(bad, 0, "%zu golden mismatches in %s", bad, path);
}

/* ---- BPE -------------------------------------------------------------------------------- */

Test(tok_bpe, r1_goldens) {
    rc_bpe *t = load_bpe(G "tokenizers/deepseek-r1-distill-qwen/tokenizer.json",
                         G "tokenizers/deepseek-r1-distill-qwen/tokenizer_config.json");
    cr_assert_eq(rc_bpe_vocab_size(t), 151665);
    cr_assert_eq(rc_bpe_token_id(t, "<｜User｜>"), 151644);
    cr_assert_eq(rc_bpe_token_id(t, "<｜end▁of▁sentence｜>"), 151643);
    cr_assert_eq(rc_bpe_token_id(t, "no such token"), -1);
    cr_assert(rc_bpe_is_special(t, 151646) && !rc_bpe_is_special(t, 151644));
    check_golden(G "tokenizers/deepseek-r1-distill-qwen.json", (tok){t, NULL});
    rc_bpe_free(t);
}

/* ---- WordPiece -------------------------------------------------------------------------- */

Test(tok_wp, bge_goldens) {
    rc_wp *t = load_wp(G "tokenizers/bge-base-en-v1.5/vocab.txt",
                       G "tokenizers/bge-base-en-v1.5/tokenizer_config.json");
    cr_assert_eq(rc_wp_vocab_size(t), 30522);
    cr_assert_eq(rc_wp_cls_id(t), 101);
    cr_assert_eq(rc_wp_sep_id(t), 102);
    cr_assert_eq(rc_wp_token_id(t, "[UNK]"), 100);
    check_golden(G "tokenizers/bge-base-en-v1.5.json", (tok){NULL, t});
    rc_wp_free(t);
}

/* The reference loads worldA's bge/tokenizer.json, whose WordPiece vocab holds only the five
 * special tokens (transformers 5 ignored vocab.txt when the goldens were made): every word is
 * [UNK]. Building from tokenizer.json reproduces that; vocab.txt would not. */
Test(tok_wp, worldA_bge_tokens) {
    uint8_t *sec;
    size_t size;
    recall_err err0 = {0};
    rc_wp *t;
    cr_assert_eq(rc_wp_build_from_json(G "worldA/bge/tokenizer.json", G "worldA/bge/tokenizer_config.json",
                                       &sec, &size, &err0), RECALL_OK, "%s", err0.msg);
    cr_assert_eq(rc_wp_load(sec, size, &t, &err0), RECALL_OK, "%s", err0.msg);
    free(sec);
    cr_assert_eq(rc_wp_vocab_size(t), 5);
    cr_assert_eq(rc_wp_cls_id(t), 2);
    cr_assert_eq(rc_wp_sep_id(t), 3);
    json_doc *doc = fixture_json(G "worldA/bge_tokens.json");
    const json_value *texts = json_get_type(json_root(doc), "texts", JSON_ARR);
    const json_value *want = json_get_type(json_root(doc), "ids", JSON_ARR);
    cr_assert(texts && want && texts->len == 10 && want->len == 10);
    int saw_truncation = 0;
    for (size_t i = 0; i < texts->len; i++) {
        int32_t *ids;
        size_t n;
        recall_err err = {0};
        cr_assert_eq(rc_wp_encode(t, texts->items[i].str, texts->items[i].len, 1, &ids, &n, &err),
                     RECALL_OK, "%s", err.msg);
        cr_assert_eq(ids_diff(ids, n, &want->items[i]), -1, "text %zu differs", i);
        if (n == 512) {
            saw_truncation = 1;
            cr_assert_eq(ids[511], 3, "truncation must keep [SEP]");
        }
        free(ids);
    }
    cr_assert(saw_truncation, "the filler text must exercise truncation at 512");
    json_free(doc);
    rc_wp_free(t);
}

/* docs/LOOP.md, the chat template: the conversation is encoded per turn (add_special_tokens=False) and the
 * segments concatenated; generated turns append their reply ids. Reproduces every feed_len, the
 * final history and every reply_text (random-weight replies: partial UTF-8 included). */
Test(tok_bpe, worldA_loop_token_streams) {
    rc_bpe *t = load_bpe(G "worldA/qwen2/tokenizer.json", G "worldA/qwen2/tokenizer_config.json");
    cr_assert_eq(rc_bpe_vocab_size(t), 1031);
    cr_assert_eq(rc_bpe_token_id(t, "<｜Assistant｜>"), 1026);
    json_doc *doc = fixture_json(G "worldA/loop_A_seed0_clean_fp32.json");
    const json_value *root = json_root(doc);
    const json_value *steps = json_get_type(root, "steps", JSON_ARR);
    const json_value *turns = json_get_type(root, "turns", JSON_ARR);
    const json_value *final = json_get_type(root, "final_history", JSON_ARR);
    cr_assert(steps && turns && final);
    int32_t *hist = malloc(8 * final->len * sizeof *hist + 64);
    size_t nh = 0, turn = 0;
    char *seg = malloc(1 << 16);
    cr_assert(hist && seg);
    for (size_t i = 0; i < steps->len; i++) {
        const json_value *st = &steps->items[i];
        const char *kind = json_get(st, "kind")->str;
        int gen = strcmp(kind, "fact") != 0 && strcmp(kind, "filler") != 0;
        int len = snprintf(seg, 1 << 16, "%s<｜User｜>%s<｜Assistant｜>%s", nh ? "<｜end▁of▁sentence｜>" : "",
                           json_get(st, "u")->str, gen ? "" : json_get(st, "a")->str);
        cr_assert(len > 0 && len < (1 << 16));
        int32_t *ids;
        size_t n;
        recall_err err = {0};
        cr_assert_eq(rc_bpe_encode(t, seg, (size_t)len, 0, &ids, &n, &err), RECALL_OK, "%s", err.msg);
        cr_assert(nh + n <= final->len, "step %zu overflows the final history", i);
        memcpy(hist + nh, ids, n * sizeof *ids);
        nh += n;
        free(ids);
        if (!gen) continue;
        const json_value *tr = &turns->items[turn++];
        cr_assert_eq((int64_t)nh, json_get(tr, "feed_len")->i, "turn %zu feed_len", turn);
        const json_value *reply = json_get_type(tr, "reply", JSON_ARR);
        int32_t *rid = json_ids(reply);
        char *text;
        size_t tl;
        cr_assert_eq(rc_bpe_decode(t, rid, reply->len, 0, &text, &tl, &err), RECALL_OK, "%s", err.msg);
        const json_value *want = json_get(tr, "reply_text");
        cr_assert(tl == want->len && memcmp(text, want->str, tl) == 0, "turn %zu reply_text", turn);
        free(text);
        memcpy(hist + nh, rid, reply->len * sizeof *rid);
        nh += reply->len;
        free(rid);
    }
    cr_assert_eq(turn, turns->len);
    cr_assert_eq(nh, final->len);
    cr_assert_eq(ids_diff(hist, nh, final), -1, "final_history differs");
    free(hist);
    free(seg);
    json_free(doc);
    rc_bpe_free(t);
}

/* Invalid UTF-8 is replaced by U+FFFD per maximal invalid subsequence (documented in the
 * headers): the ids equal those of the repaired text, and decode repairs the same way. */
Test(tok_bpe, invalid_utf8_is_replaced) {
    rc_bpe *t = load_bpe(G "worldA/qwen2/tokenizer.json", NULL);
    static const char bad[] = "a\xff" "b\xe2\x82" "c\xf0\x9f\x98" "\xed\xa0\x80" "d\xc0\xaf";
    static const char fixed[] = "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd"
                                "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "d\xef\xbf\xbd\xef\xbf\xbd";
    int32_t *a, *b;
    size_t na, nb;
    recall_err err = {0};
    cr_assert_eq(rc_bpe_encode(t, bad, sizeof bad - 1, 0, &a, &na, &err), RECALL_OK);
    cr_assert_eq(rc_bpe_encode(t, fixed, sizeof fixed - 1, 0, &b, &nb, &err), RECALL_OK);
    cr_assert(na == nb && na > 0 && memcmp(a, b, na * sizeof *a) == 0);
    /* byte tokens of a split emoji decode to one U+FFFD per maximal subpart */
    char *s;
    size_t l;
    int32_t ids[3];
    /* byte-level chars: 0xF0 -> U+00F0, 0x9F -> U+0141 (the 33rd non-printable byte) */
    ids[0] = rc_bpe_token_id(t, "\xc3\xb0");
    ids[1] = rc_bpe_token_id(t, "\xc5\x81");
    ids[2] = rc_bpe_token_id(t, "x");
    cr_assert(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
    cr_assert_eq(rc_bpe_decode(t, ids, 3, 0, &s, &l, &err), RECALL_OK);
    cr_assert_str_eq(s, "\xef\xbf\xbdx");
    free(s);
    free(a);
    free(b);
    rc_bpe_free(t);
}

Test(tok_unicode, lossy_decoder_maximal_subparts) {
    /* Unicode 15 §3.9 table 3-8 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 */
    static const uint8_t in[] = {0x61, 0xF1, 0x80, 0x80, 0xE1, 0x80, 0xC2, 0x62, 0x80, 0x63,
                                 0x80, 0xBF, 0x64};
    static const uint32_t want[] = {'a', 0xFFFD, 0xFFFD, 0xFFFD, 'b', 0xFFFD, 'c', 0xFFFD, 0xFFFD, 'd'};
    rc_u32vec v = {0};
    cr_assert_eq(rc_utf8_decode_lossy(in, sizeof in, &v), RECALL_OK);
    cr_assert_eq(v.n, sizeof want / sizeof want[0]);
    cr_assert(memcmp(v.v, want, sizeof want) == 0);
    rc_u32_free(&v);
    /* NFC composes e + U+0301, Hangul L V T; NFD splits them back */
    static const uint32_t dec[] = {'e', 0x301, 0x1112, 0x1161, 0x11AB, 0x301, 0x323};
    cr_assert_eq(rc_uc_nfc(dec, 7, &v), RECALL_OK);
    cr_assert_eq(v.n, 4); /* marks after the syllable reorder by ccc (323: 220 < 301: 230) */
    cr_assert(v.v[0] == 0xE9 && v.v[1] == 0xD55C && v.v[2] == 0x323 && v.v[3] == 0x301);
    rc_u32_free(&v);
    uint32_t lo[2];
    cr_assert_eq(rc_uc_lower(0x130, lo), 2);
    cr_assert(lo[0] == 'i' && lo[1] == 0x307);
    cr_assert_eq(rc_uc_lower(0x1E9E, lo), 1);
    cr_assert_eq(lo[0], 0xDF);
    cr_assert(rc_uc_flags(0x3000) & RC_UC_WS);
    cr_assert(rc_uc_flags(0x200B) & RC_UC_C);
}

/* ---- build-time rejection and hostile sections ---------------------------------------- */

static const char *write_tmp(const char *name, const char *text) {
    static char path[256]; /* test-only */
    snprintf(path, sizeof path, "build/tok_test_%s", name);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_build_error(const char *json, const char *needle) {
    uint8_t *sec = NULL;
    size_t size = 0;
    recall_err err = {0};
    const char *p = write_tmp("tok.json", json);
    cr_assert_neq(rc_bpe_build_from_json(p, NULL, &sec, &size, &err), RECALL_OK);
    cr_assert(strstr(err.msg, needle), "message \"%s\" lacks \"%s\"", err.msg, needle);
    cr_assert_null(sec);
}

#define QRE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define PRE(re) "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" re "\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}"
#define TOKJSON(norm, pre, model) "{\"normalizer\":" norm ",\"pre_tokenizer\":" pre ",\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},\"added_tokens\":[],\"model\":" model "}"
#define MODEL "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"

Test(tok_bpe, rejects_unknown_components) {

    mkdir("build", 0777);
    expect_build_error(TOKJSON("{\"type\":\"Lowercase\"}", PRE(QRE), MODEL), "$.normalizer.type: unsupported");
    expect_build_error(TOKJSON("null", PRE(QRE), MODEL), "$.normalizer: missing");
    expect_build_error(TOKJSON("{\"type\":\"NFC\"}", PRE("\\\\s+"), MODEL),
                       "$.pre_tokenizer.pretokenizers[0].pattern.Regex: unsupported pattern");
    expect_build_error(TOKJSON("{\"type\":\"NFC\"}", PRE(QRE), "{\"type\":\"Unigram\"}"), "$.model.type: unsupported");
    expect_build_error(TOKJSON("{\"type\":\"NFC\"}", PRE(QRE),
                               "{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}"),
                       "$.model.merges[0]: token not in vocab");
    /* and the minimal valid file builds, merges [a,b] pairs too */
    uint8_t *sec;
    size_t size;
    recall_err err = {0};
    const char *p = write_tmp("ok.json", TOKJSON("{\"type\":\"NFC\"}", PRE(QRE),
        "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}"));
    cr_assert_eq(rc_bpe_build_from_json(p, NULL, &sec, &size, &err), RECALL_OK, "%s", err.msg);
    rc_bpe *t;
    cr_assert_eq(rc_bpe_load(sec, size, &t, &err), RECALL_OK, "%s", err.msg);
    int32_t *ids;
    size_t n;
    cr_assert_eq(rc_bpe_encode(t, "abz", 3, 1, &ids, &n, &err), RECALL_OK);
    cr_assert(n == 1 && ids[0] == 2, "z has no byte token and is dropped; ab merges");
    free(ids);
    rc_bpe_free(t);
    /* every truncation and every single-byte corruption of the section is refused or loads */
    for (size_t cut = 0; cut < size; cut++) {
        cr_assert_neq(rc_bpe_load(sec, cut, &t, &err), RECALL_OK);
    }
    for (size_t i = 0; i < size; i++) {
        uint8_t *c = malloc(size);
        memcpy(c, sec, size);
        c[i] ^= 0xA5;
        if (rc_bpe_load(c, size, &t, &err) == RECALL_OK) {
            cr_assert_eq(rc_bpe_encode(t, "ab ab", 5, 1, &ids, &n, &err), RECALL_OK);
            free(ids);
            rc_bpe_free(t);
        }
        free(c);
    }
    free(sec);
}

Test(tok_wp, hostile_sections_and_config) {
    uint8_t *sec;
    size_t size;
    recall_err err = {0};
    rc_wp *t;
    cr_assert_eq(rc_wp_build(G "worldA/bge/vocab.txt", G "worldA/bge/tokenizer_config.json", &sec, &size, &err),
                 RECALL_OK, "%s", err.msg);
    for (size_t cut = 0; cut < size; cut += 7) cr_assert_neq(rc_wp_load(sec, cut, &t, &err), RECALL_OK);
    for (size_t i = 0; i < 200 && i < size; i++) {
        uint8_t *c = malloc(size);
        memcpy(c, sec, size);
        c[i] ^= 0x5A;
        if (rc_wp_load(c, size, &t, &err) == RECALL_OK) {
            int32_t *ids;
            size_t n;
            cr_assert_eq(rc_wp_encode(t, "Hello [SEP] wörld!", 19, 1, &ids, &n, &err), RECALL_OK);
            free(ids);
            rc_wp_free(t);
        }
        free(c);
    }
    free(sec);
    mkdir("build", 0777);
    const char *p = write_tmp("cfg.json", "{\"tokenizer_class\":\"XLMRobertaTokenizer\"}");
    err = (recall_err){0};
    cr_assert_eq(rc_wp_build(G "worldA/bge/vocab.txt", p, &sec, &size, &err), RECALL_E_UNSUPPORTED);
    cr_assert(strstr(err.msg, "$.tokenizer_class"));
}
