/* tokenize_wordpiece.c - BERT WordPiece exact to HF tokenizers (BertNormalizer,
 * BertPreTokenizer, WordPiece model, TemplateProcessing [CLS] $A [SEP], WordPiece decoder).
 *
 * Section (layout in weights/FORMAT_TOKENIZERS.md):
 *   header (48 bytes) | tok_off[n_ids+1] u32 | special_ids[n_special] u32 | pool bytes
 * Load builds a string hash (token -> id, last duplicate wins).
 */
#include "tokenize_wordpiece.h"

#include "bytes.h"
#include "json.h"
#include "mem.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WP_MAGIC "RCTOKWPC"
#define WP_VERSION 1u
#define WP_HDR 48u
#define WP_MAX_IDS (1u << 24)
#define WP_MAX_SPECIAL 8u

enum { F_LOWER = 1, F_STRIP = 2, F_CHINESE = 4, F_CLEAN = 8 };

struct rc_wp {
    uint32_t flags, n_ids, max_len, max_chars, n_special;
    int32_t unk, cls, sep;
    uint32_t *tok_off;
    char *pool; /* token i at tok_off[i] + i, NUL-terminated */
    uint8_t *present; /* 0: a later duplicate took this string (HF has no reverse entry) */
    int32_t *special;
    int32_t *ht;
    size_t ht_cap;
};

/* ---- build ------------------------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t len;
} line;

/* Rust str::trim_end: strips trailing White_Space chars. */
static size_t trim_end(const char *s, size_t n) {
    for (;;) {
        if (n == 0) return 0;
        size_t k = n - 1;
        while (k > 0 && ((uint8_t)s[k] & 0xC0) == 0x80 && n - k < 4) k--;
        size_t adv;
        int32_t cp = rc_utf8_next((const uint8_t *)s + k, n - k, &adv);
        if (cp < 0 || k + adv != n || !(rc_uc_flags((uint32_t)cp) & RC_UC_WS)) return n;
        n = k;
    }
}

static const char *cfg_token(const json_value *cfg, const char *key, const char *dflt) {
    const json_value *v = cfg ? json_get(cfg, key) : NULL;
    if (v && v->type == JSON_STR) return v->str;
    if (v && v->type == JSON_OBJ) {
        const json_value *c = json_get_type(v, "content", JSON_STR);
        if (c) return c->str;
    }
    return dflt;
}

static recall_status parse_config(const char *path, const json_value *cfg, uint32_t *flags,
                                  uint32_t *max_len, recall_err *err) {
    int lower = 1, chinese = 1, strip = -1;
    *max_len = 512;
    if (!cfg) goto done;
    if (cfg->type != JSON_OBJ) return rc_fail(err, RECALL_E_FORMAT, "%s: $: expected an object", path);
    const json_value *v;
    if ((v = json_get(cfg, "do_lower_case")) && v->type == JSON_BOOL) lower = v->num != 0;
    if ((v = json_get(cfg, "tokenize_chinese_chars")) && v->type == JSON_BOOL) chinese = v->num != 0;
    if ((v = json_get(cfg, "strip_accents")) && v->type == JSON_BOOL) strip = v->num != 0;
    else if (v && v->type != JSON_NULL)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: $.strip_accents: expected bool or null", path);
    if ((v = json_get(cfg, "do_basic_tokenize")) && !(v->type == JSON_BOOL && v->num != 0))
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: $.do_basic_tokenize: only true", path);
    if ((v = json_get(cfg, "never_split")) && v->type != JSON_NULL)
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: $.never_split: only null", path);
    if ((v = json_get(cfg, "tokenizer_class")) &&
        !(v->type == JSON_STR && (strcmp(v->str, "BertTokenizer") == 0 ||
                                  strcmp(v->str, "BertTokenizerFast") == 0)))
        return rc_fail(err, RECALL_E_UNSUPPORTED, "%s: $.tokenizer_class: only BertTokenizer", path);
    if ((v = json_get(cfg, "model_max_length"))) {
        if (v->type != JSON_NUM)
            return rc_fail(err, RECALL_E_FORMAT, "%s: $.model_max_length: expected a number", path);
        /* transformers writes 1e30 for "no limit" */
        *max_len = (v->is_int && v->i > 2 && v->i < (1 << 24)) ? (uint32_t)v->i : 0;
    }
done:
    if (strip < 0) strip = lower;
    *flags = F_CLEAN | (lower ? F_LOWER : 0) | (strip ? F_STRIP : 0) | (chinese ? F_CHINESE : 0);
    return RECALL_OK;
}

static recall_status serialise(const char *what, const line *lines, size_t n_lines, size_t pool,
                               uint32_t flags, uint32_t max_len, uint32_t max_chars,
                               const int32_t ids5[3], const int32_t *special, uint32_t n_special,
                               uint8_t **section, size_t *size, recall_err *err) {
    size_t total = WP_HDR + 4 * (n_lines + 1) + 4 * n_special + pool;
    uint8_t *p = calloc(1, total);
    if (!p) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
    memcpy(p, WP_MAGIC, 8);
    rc_wr32(p + 8, WP_VERSION);
    rc_wr32(p + 12, flags);
    rc_wr32(p + 16, (uint32_t)n_lines);
    rc_wr32(p + 20, max_len);
    rc_wr32(p + 24, max_chars);
    rc_wr32(p + 28, (uint32_t)ids5[0]);
    rc_wr32(p + 32, (uint32_t)ids5[1]);
    rc_wr32(p + 36, (uint32_t)ids5[2]);
    rc_wr32(p + 40, n_special);
    rc_wr32(p + 44, (uint32_t)pool);
    size_t pool_off = WP_HDR + 4 * (n_lines + 1) + 4 * n_special;
    uint32_t off = 0;
    for (size_t i = 0; i < n_lines; i++) {
        rc_wr32(p + WP_HDR + 4 * i, off);
        if (lines[i].len) memcpy(p + pool_off + off, lines[i].s, lines[i].len);
        off += (uint32_t)lines[i].len;
    }
    rc_wr32(p + WP_HDR + 4 * n_lines, off);
    for (uint32_t j = 0; j < n_special; j++)
        rc_wr32(p + WP_HDR + 4 * (n_lines + 1) + 4 * j, (uint32_t)special[j]);
    *section = p;
    *size = total;
    return RECALL_OK;
}

recall_status rc_wp_build(const char *vocab_txt_path, const char *tokenizer_config_path,
                          uint8_t **section, size_t *size, recall_err *err) {
    if (!vocab_txt_path || !section || !size)
        return rc_fail(err, RECALL_E_ARG, "rc_wp_build: NULL argument");
    *section = NULL;
    *size = 0;
    char *cfg_text = NULL, *text = NULL;
    size_t cfg_len = 0, len = 0;
    json_doc *doc = NULL;
    const json_value *cfg = NULL;
    line *lines = NULL;
    recall_status s;
    if (tokenizer_config_path) {
        RC_TRY(rc_read_file(tokenizer_config_path, &cfg_text, &cfg_len, err));
        s = json_parse(cfg_text, cfg_len, tokenizer_config_path, &doc, err);
        free(cfg_text);
        if (s) return s;
        cfg = json_root(doc);
    }
    uint32_t flags = 0, max_len = 0;
    s = parse_config(tokenizer_config_path, cfg, &flags, &max_len, err);
    if (s) goto out;
    s = rc_read_file(vocab_txt_path, &text, &len, err);
    if (s) goto out;
    /* lines: like Rust BufRead::lines (no entry after a final newline) */
    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
    if (len && text[len - 1] != '\n') n_lines++;
    if (n_lines == 0 || n_lines > WP_MAX_IDS) {
        s = rc_fail(err, RECALL_E_FORMAT, "%s: %s", vocab_txt_path, n_lines ? "too many lines" : "empty vocabulary");
        goto out;
    }
    lines = malloc(n_lines * sizeof *lines);
    if (!lines) { s = rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", vocab_txt_path); goto out; }
    size_t pool = 0, start = 0, k = 0;
    for (size_t i = 0; i <= len && k < n_lines; i++) {
        if (i == len || text[i] == '\n') {
            size_t l = i - start;
            if (l && text[start + l - 1] == '\r') l--;
            const char *ls = text + start;
            size_t ladv;
            for (size_t j = 0; j < l; j += ladv)
                if (rc_utf8_next((const uint8_t *)ls + j, l - j, &ladv) < 0) {
                    s = rc_fail(err, RECALL_E_FORMAT, "%s: line %zu: invalid UTF-8", vocab_txt_path, k + 1);
                    goto out;
                }
            l = trim_end(ls, l);
            lines[k++] = (line){ls, l};
            pool += l;
            start = i + 1;
        }
    }
    if (pool > UINT32_MAX) { s = rc_fail(err, RECALL_E_LIMIT, "%s: too large", vocab_txt_path); goto out; }
    /* special tokens: those of the config present in the vocab (last duplicate wins) */
    const char *names[5] = {cfg_token(cfg, "unk_token", "[UNK]"), cfg_token(cfg, "cls_token", "[CLS]"),
                            cfg_token(cfg, "sep_token", "[SEP]"), cfg_token(cfg, "pad_token", "[PAD]"),
                            cfg_token(cfg, "mask_token", "[MASK]")};
    int32_t ids5[5];
    for (int j = 0; j < 5; j++) {
        ids5[j] = -1;
        for (size_t i = 0; i < n_lines; i++)
            if (lines[i].len == strlen(names[j]) && memcmp(lines[i].s, names[j], lines[i].len) == 0)
                ids5[j] = (int32_t)i;
    }
    if (ids5[0] < 0) {
        s = rc_fail(err, RECALL_E_MISSING, "%s: unk token \"%s\" not in the vocabulary", vocab_txt_path, names[0]);
        goto out;
    }
    int32_t special[5];
    uint32_t n_special = 0;
    for (int j = 0; j < 5; j++) {
        int dup = ids5[j] < 0;
        for (uint32_t q = 0; q < n_special && !dup; q++) dup = special[q] == ids5[j];
        if (!dup) special[n_special++] = ids5[j];
    }
    s = serialise(vocab_txt_path, lines, n_lines, pool, flags, max_len, 100, ids5, special,
                  n_special, section, size, err);
out:
    free(lines);
    free(text);
    json_free(doc);
    return s;
}


#define WP_UNSUP(path, why) rc_fail(err, RECALL_E_UNSUPPORTED, "%s: %s: %s", what, path, why)

/* Checks tokenizer.json against what rc_wp_encode reproduces and fills the section fields. */
static recall_status wp_from_json(const char *what, const json_value *root, line **lines_out,
                                  size_t *n_out, size_t *pool_out, uint32_t *flags,
                                  uint32_t *max_chars, int32_t ids5[3], int32_t special[WP_MAX_SPECIAL],
                                  uint32_t *n_special, recall_err *err) {
    const json_value *norm = json_get(root, "normalizer"), *v;
    if (!norm || norm->type != JSON_OBJ) return rc_fail(err, RECALL_E_MISSING, "%s: $.normalizer: missing", what);
    if (!json_is_str(json_get(norm, "type"), "BertNormalizer")) return WP_UNSUP("$.normalizer.type", "unsupported type");
    int lower = json_is_true(json_get(norm, "lowercase"));
    *flags = (json_is_true(json_get(norm, "clean_text")) ? F_CLEAN : 0) | (lower ? F_LOWER : 0) |
             (json_is_true(json_get(norm, "handle_chinese_chars")) ? F_CHINESE : 0);
    v = json_get(norm, "strip_accents");
    if (json_is_true(v) || ((!v || v->type == JSON_NULL) && lower)) *flags |= F_STRIP;
    const json_value *pt = json_get(root, "pre_tokenizer");
    if (!pt || pt->type != JSON_OBJ) return rc_fail(err, RECALL_E_MISSING, "%s: $.pre_tokenizer: missing", what);
    if (!json_is_str(json_get(pt, "type"), "BertPreTokenizer")) return WP_UNSUP("$.pre_tokenizer.type", "unsupported type");
    const json_value *dec = json_get(root, "decoder");
    if (!dec || dec->type != JSON_OBJ) return rc_fail(err, RECALL_E_MISSING, "%s: $.decoder: missing", what);
    if (!json_is_str(json_get(dec, "type"), "WordPiece")) return WP_UNSUP("$.decoder.type", "unsupported type");
    if (!json_is_str(json_get(dec, "prefix"), "##")) return WP_UNSUP("$.decoder.prefix", "only ##");
    if (!json_is_true(json_get(dec, "cleanup"))) return WP_UNSUP("$.decoder.cleanup", "only true");
    const json_value *model = json_get(root, "model");
    if (!model || model->type != JSON_OBJ) return rc_fail(err, RECALL_E_MISSING, "%s: $.model: missing", what);
    if (!json_is_str(json_get(model, "type"), "WordPiece")) return WP_UNSUP("$.model.type", "unsupported type");
    if (!json_is_str(json_get(model, "continuing_subword_prefix"), "##"))
        return WP_UNSUP("$.model.continuing_subword_prefix", "only ##");
    v = json_get(model, "max_input_chars_per_word");
    if (!v || v->type != JSON_NUM || !v->is_int || v->i < 1 || v->i > (1 << 24))
        return WP_UNSUP("$.model.max_input_chars_per_word", "expected a positive integer");
    *max_chars = (uint32_t)v->i;
    const json_value *vocab = json_get_type(model, "vocab", JSON_OBJ);
    if (!vocab || vocab->len == 0 || vocab->len > WP_MAX_IDS)
        return rc_fail(err, RECALL_E_MISSING, "%s: $.model.vocab: missing or empty", what);
    line *lines = calloc(vocab->len, sizeof *lines);
    if (!lines) return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", what);
    size_t pool = 0;
    for (size_t i = 0; i < vocab->len; i++) {
        const json_value *id = &vocab->items[i];
        if (id->type != JSON_NUM || !id->is_int || id->i < 0 || (uint64_t)id->i >= vocab->len ||
            lines[id->i].s) {
            free(lines);
            return WP_UNSUP("$.model.vocab", "ids must be 0..n-1, each once");
        }
        lines[id->i] = (line){vocab->keys[i], vocab->key_lens[i]};
        pool += vocab->key_lens[i];
    }
    *lines_out = lines;
    *n_out = vocab->len;
    *pool_out = pool;
#define FAIL(code, ...) do { rc_fail(err, code, __VA_ARGS__); goto bad; } while (0)
    const json_value *unk = json_get_type(model, "unk_token", JSON_STR);
    ids5[0] = ids5[1] = ids5[2] = -1;
    for (size_t i = 0; unk && i < vocab->len; i++)
        if (lines[i].len == unk->len && memcmp(lines[i].s, unk->str, unk->len) == 0) ids5[0] = (int32_t)i;
    if (ids5[0] < 0) FAIL(RECALL_E_MISSING, "%s: $.model.unk_token: missing or not in the vocab", what);
    *n_special = 0;
    const json_value *added = json_get(root, "added_tokens");
    for (size_t i = 0; added && added->type == JSON_ARR && i < added->len; i++) {
        const json_value *a = &added->items[i], *id = json_get(a, "id"), *c = json_get(a, "content");
        static const char *const flags0[] = {"normalized", "lstrip", "rstrip", "single_word"};
        for (size_t k = 0; k < 4; k++)
            if (json_get(a, flags0[k]) && !json_is_false(json_get(a, flags0[k])))
                FAIL(RECALL_E_UNSUPPORTED, "%s: $.added_tokens[%zu].%s: only false", what, i, flags0[k]);
        if (!json_is_true(json_get(a, "special")))
            FAIL(RECALL_E_UNSUPPORTED, "%s: $.added_tokens[%zu].special: only special added tokens", what, i);
        if (!id || id->type != JSON_NUM || !id->is_int || id->i < 0 || (uint64_t)id->i >= vocab->len ||
            !c || c->type != JSON_STR || lines[id->i].len != c->len || memcmp(lines[id->i].s, c->str, c->len))
            FAIL(RECALL_E_UNSUPPORTED, "%s: $.added_tokens[%zu]: must be a vocab entry", what, i);
        if (*n_special >= WP_MAX_SPECIAL) FAIL(RECALL_E_UNSUPPORTED, "%s: $.added_tokens: too many", what);
        special[(*n_special)++] = (int32_t)id->i;
    }
    const json_value *pp = json_get(root, "post_processor");
    if (!pp || pp->type != JSON_OBJ) FAIL(RECALL_E_MISSING, "%s: $.post_processor: missing", what);
    if (!json_is_str(json_get(pp, "type"), "TemplateProcessing"))
        FAIL(RECALL_E_UNSUPPORTED, "%s: $.post_processor.type: unsupported type", what);
    const json_value *single = json_get_type(pp, "single", JSON_ARR);
    const json_value *map = json_get_type(pp, "special_tokens", JSON_OBJ);
    if (!single || single->len != 3 || !map || !json_get(&single->items[1], "Sequence"))
        FAIL(RECALL_E_UNSUPPORTED, "%s: $.post_processor.single: only [CLS] $A [SEP]", what);
    for (int k = 0; k < 2; k++) {
        const json_value *st = json_get_type(&single->items[k ? 2 : 0], "SpecialToken", JSON_OBJ);
        const json_value *name = st ? json_get_type(st, "id", JSON_STR) : NULL;
        const json_value *ent = name ? json_get_type(map, name->str, JSON_OBJ) : NULL;
        const json_value *ids = ent ? json_get_type(ent, "ids", JSON_ARR) : NULL;
        if (!ids || ids->len != 1 || ids->items[0].type != JSON_NUM || !ids->items[0].is_int ||
            ids->items[0].i < 0 || (uint64_t)ids->items[0].i >= vocab->len)
            FAIL(RECALL_E_UNSUPPORTED, "%s: $.post_processor.single[%d]: expected one special token", what, k ? 2 : 0);
        ids5[1 + k] = (int32_t)ids->items[0].i;
    }
    if (json_get(root, "truncation") && json_get(root, "truncation")->type != JSON_NULL)
        FAIL(RECALL_E_UNSUPPORTED, "%s: $.truncation: only null (the limit is model_max_length)", what);
    return RECALL_OK;
bad:
#undef FAIL
    free(lines);
    *lines_out = NULL;
    return err ? err->code : RECALL_E_FORMAT;
}

recall_status rc_wp_build_from_json(const char *tokenizer_json_path, const char *tokenizer_config_path,
                                    uint8_t **section, size_t *size, recall_err *err) {
    if (!tokenizer_json_path || !section || !size)
        return rc_fail(err, RECALL_E_ARG, "rc_wp_build_from_json: NULL argument");
    *section = NULL;
    *size = 0;
    const char *what = tokenizer_json_path;
    char *text = NULL;
    size_t len = 0;
    json_doc *cdoc = NULL, *doc = NULL;
    uint32_t cflags = 0, max_len = 512, flags = 0, max_chars = 100, n_special = 0;
    recall_status s = RECALL_OK;
    if (tokenizer_config_path) { /* model_max_length only */
        RC_TRY(rc_read_file(tokenizer_config_path, &text, &len, err));
        s = json_parse(text, len, tokenizer_config_path, &cdoc, err);
        free(text);
        if (!s) s = parse_config(tokenizer_config_path, json_root(cdoc), &cflags, &max_len, err);
        json_free(cdoc);
        if (s) return s;
    }
    RC_TRY(rc_read_file(tokenizer_json_path, &text, &len, err));
    s = json_parse(text, len, tokenizer_json_path, &doc, err);
    free(text);
    if (s) return s;
    line *lines = NULL;
    size_t n = 0, pool = 0;
    int32_t ids5[3], special[WP_MAX_SPECIAL];
    const json_value *root = json_root(doc);
    if (!root || root->type != JSON_OBJ) s = WP_UNSUP("$", "expected an object");
    else s = wp_from_json(what, root, &lines, &n, &pool, &flags, &max_chars, ids5, special, &n_special, err);
    if (!s && pool > UINT32_MAX) s = rc_fail(err, RECALL_E_LIMIT, "%s: vocabulary too large", what);
    if (!s) s = serialise(what, lines, n, pool, flags, max_len, max_chars, ids5, special, n_special,
                          section, size, err);
    free(lines);
    json_free(doc);
    return s;
}

/* ---- load ------------------------------------------------------------------------------- */

void rc_wp_free(rc_wp *t) {
    if (!t) return;
    RC_FREE(t->tok_off, t->pool, t->present, t->special, t->ht, t);
}

static const char *tok_at(const rc_wp *t, uint32_t id, size_t *len) {
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->pool + t->tok_off[id] + id;
}

static int32_t lookup(const rc_wp *t, const char *s, size_t len) {
    size_t m = t->ht_cap - 1, i = (size_t)rc_hash_bytes(s, len) & m;
    for (;;) {
        int32_t id = t->ht[i];
        if (id < 0) return -1;
        size_t l;
        const char *q = tok_at(t, (uint32_t)id, &l);
        if (l == len && memcmp(q, s, len) == 0) return id;
        i = (i + 1) & m;
    }
}

static recall_status wp_fail(rc_wp *t, recall_err *err, recall_status code, const char *msg) {
    rc_wp_free(t);
    return rc_fail(err, code, "tokenizer section (WordPiece): %s", msg);
}

recall_status rc_wp_load(const void *section, size_t size, rc_wp **out, recall_err *err) {
    const uint8_t *p = section;
    if (!out) return rc_fail(err, RECALL_E_ARG, "rc_wp_load: NULL out");
    *out = NULL;
    RC_TRY(rc_section_head(p, size, WP_HDR, WP_MAGIC, WP_VERSION, "tokenizer section (WordPiece)", err));
    rc_wp *t = calloc(1, sizeof *t);
    if (!t) return rc_fail(err, RECALL_E_NOMEM, "tokenizer section (WordPiece): out of memory");
    t->flags = rc_rd32(p + 12);
    t->n_ids = rc_rd32(p + 16);
    t->max_len = rc_rd32(p + 20);
    t->max_chars = rc_rd32(p + 24);
    t->unk = (int32_t)rc_rd32(p + 28);
    t->cls = (int32_t)rc_rd32(p + 32);
    t->sep = (int32_t)rc_rd32(p + 36);
    t->n_special = rc_rd32(p + 40);
    uint32_t pool = rc_rd32(p + 44);
    uint32_t n = t->n_ids;
    if (n == 0 || n > WP_MAX_IDS || t->n_special > WP_MAX_SPECIAL || t->flags > 15 ||
        t->unk < 0 || (uint32_t)t->unk >= n || t->cls < -1 || t->cls >= (int32_t)n ||
        t->sep < -1 || t->sep >= (int32_t)n || t->max_len == 1 || t->max_len == 2)
        return wp_fail(t, err, RECALL_E_FORMAT, "header fields out of range");
    uint64_t pool_off = WP_HDR + 4ull * (n + 1) + 4ull * t->n_special;
    if (pool_off + pool != size) return wp_fail(t, err, RECALL_E_FORMAT, "size does not match header");
    t->tok_off = malloc(4ull * (n + 1));
    t->pool = malloc((size_t)pool + n + 1);
    t->present = malloc(n);
    t->special = malloc(4ull * (t->n_special + 1));
    t->ht_cap = 16;
    while (t->ht_cap < 2ull * n + 2) t->ht_cap *= 2;
    t->ht = malloc(t->ht_cap * sizeof *t->ht);
    if (!t->tok_off || !t->pool || !t->present || !t->special || !t->ht)
        return wp_fail(t, err, RECALL_E_NOMEM, "out of memory");
    uint32_t prev = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t o = rc_rd32(p + WP_HDR + 4ull * i);
        if (o < prev || o > pool || (i == 0 && o != 0) || (i == n && o != pool))
            return wp_fail(t, err, RECALL_E_FORMAT, "token offsets out of order");
        t->tok_off[i] = o;
        prev = o;
    }
    memset(t->ht, 0xff, t->ht_cap * sizeof *t->ht);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = t->tok_off[i + 1] - t->tok_off[i];
        char *dst = t->pool + t->tok_off[i] + i;
        memcpy(dst, p + pool_off + t->tok_off[i], l);
        dst[l] = 0;
        t->present[i] = 1;
        size_t m = t->ht_cap - 1, h = (size_t)rc_hash_bytes(dst, l) & m;
        for (;;) { /* a later duplicate replaces the earlier id */
            int32_t id = t->ht[h];
            if (id < 0) { t->ht[h] = (int32_t)i; break; }
            size_t ol;
            const char *q = tok_at(t, (uint32_t)id, &ol);
            if (ol == l && memcmp(q, dst, l) == 0) {
                t->present[id] = 0;
                t->ht[h] = (int32_t)i;
                break;
            }
            h = (h + 1) & m;
        }
    }
    for (uint32_t j = 0; j < t->n_special; j++) {
        uint32_t id = rc_rd32(p + WP_HDR + 4ull * (n + 1) + 4ull * j);
        if (id >= n || t->tok_off[id + 1] == t->tok_off[id])
            return wp_fail(t, err, RECALL_E_FORMAT, "bad special-token id");
        t->special[j] = (int32_t)id;
    }
    if (!t->present[t->unk] || (t->cls >= 0 && !t->present[t->cls]) || (t->sep >= 0 && !t->present[t->sep]))
        return wp_fail(t, err, RECALL_E_FORMAT, "special token shadowed by a duplicate");
    *out = t;
    return RECALL_OK;
}

/* ---- encode ----------------------------------------------------------------------------- */

typedef struct {
    rc_u32vec cps, norm, tmp;
    rc_bytebuf word, cand;
    int32_t *ids;
    size_t n_ids, ids_cap;
} wp_scratch;

static recall_status push_id(wp_scratch *s, int32_t id) {
    if (s->n_ids == s->ids_cap) {
        size_t cap = s->ids_cap ? s->ids_cap * 2 : 64;
        int32_t *q = realloc(s->ids, cap * sizeof *q);
        if (!q) return RECALL_E_NOMEM;
        s->ids = q;
        s->ids_cap = cap;
    }
    s->ids[s->n_ids++] = id;
    return RECALL_OK;
}

static int is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int is_punct(uint32_t c) {
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
        return 1;
    return (rc_uc_flags(c) & RC_UC_P) != 0;
}

/* BertNormalizer over cps -> s->norm */
static recall_status normalize(const rc_wp *t, wp_scratch *s) {
    rc_u32vec *a = &s->tmp, *b = &s->norm;
    a->n = 0;
    for (size_t i = 0; i < s->cps.n; i++) {
        uint32_t c = s->cps.v[i];
        if (t->flags & F_CLEAN) {
            int ws = c == '\t' || c == '\n' || c == '\r' || (rc_uc_flags(c) & RC_UC_WS);
            if (c == 0 || c == 0xFFFD || (!ws && (rc_uc_flags(c) & RC_UC_C))) continue;
            if (ws) c = ' ';
        }
        if ((t->flags & F_CHINESE) && is_chinese(c)) {
            RC_TRY(rc_u32_push(a, ' '));
            RC_TRY(rc_u32_push(a, c));
            RC_TRY(rc_u32_push(a, ' '));
        } else {
            RC_TRY(rc_u32_push(a, c));
        }
    }
    b->n = 0;
    if (t->flags & F_STRIP) {
        RC_TRY(rc_uc_nfd(a->v, a->n, b));
        size_t w = 0;
        for (size_t i = 0; i < b->n; i++)
            if (!(rc_uc_flags(b->v[i]) & RC_UC_MN)) b->v[w++] = b->v[i];
        b->n = w;
    } else {
        for (size_t i = 0; i < a->n; i++) RC_TRY(rc_u32_push(b, a->v[i]));
    }
    if (t->flags & F_LOWER) {
        a->n = 0;
        for (size_t i = 0; i < b->n; i++) {
            uint32_t lo[2];
            size_t k = rc_uc_lower(b->v[i], lo);
            for (size_t j = 0; j < k; j++) RC_TRY(rc_u32_push(a, lo[j]));
        }
        rc_u32vec swap = *a;
        *a = *b;
        *b = swap;
    }
    return RECALL_OK;
}

/* Greedy longest-match WordPiece of one pre-tokenized word (cps). */
static recall_status wordpiece(const rc_wp *t, wp_scratch *s, const uint32_t *w, size_t nw) {
    if (nw > t->max_chars) return push_id(s, t->unk);
    s->word.n = 0;
    for (size_t i = 0; i < nw; i++) {
        uint8_t u[4];
        RC_TRY(rc_bb_put(&s->word, u, rc_utf8_put(w[i], u)));
    }
    const uint8_t *b = s->word.p;
    size_t len = s->word.n, start = 0, first_new = s->n_ids;
    while (start < len) {
        size_t end = len;
        int32_t found = -1;
        while (start < end) {
            s->cand.n = 0;
            if (start > 0) RC_TRY(rc_bb_put(&s->cand, "##", 2));
            RC_TRY(rc_bb_put(&s->cand, b + start, end - start));
            found = lookup(t, (const char *)s->cand.p, s->cand.n);
            if (found >= 0) break;
            do end--; while (end > start && (b[end] & 0xC0) == 0x80); /* previous char boundary */
        }
        if (found < 0) {
            s->n_ids = first_new;
            return push_id(s, t->unk);
        }
        RC_TRY(push_id(s, found));
        start = end;
    }
    return RECALL_OK;
}

static recall_status encode_span(const rc_wp *t, wp_scratch *s, const uint8_t *b, size_t len) {
    if (len == 0) return RECALL_OK;
    s->cps.n = 0;
    RC_TRY(rc_utf8_decode_lossy(b, len, &s->cps));
    RC_TRY(normalize(t, s));
    const uint32_t *c = s->norm.v;
    size_t n = s->norm.n, i = 0;
    while (i < n) {
        if (rc_uc_flags(c[i]) & RC_UC_WS) { i++; continue; }
        if (is_punct(c[i])) { RC_TRY(wordpiece(t, s, c + i, 1)); i++; continue; }
        size_t j = i;
        while (j < n && !(rc_uc_flags(c[j]) & RC_UC_WS) && !is_punct(c[j])) j++;
        RC_TRY(wordpiece(t, s, c + i, j - i));
        i = j;
    }
    return RECALL_OK;
}

static int32_t special_at(const rc_wp *t, const uint8_t *b, size_t i, size_t len, size_t *ml) {
    int32_t best = -1;
    *ml = 0;
    for (uint32_t j = 0; j < t->n_special; j++) {
        size_t l;
        const char *s = tok_at(t, (uint32_t)t->special[j], &l);
        if (l > *ml && l <= len - i && memcmp(s, b + i, l) == 0) { best = t->special[j]; *ml = l; }
    }
    return best;
}

recall_status rc_wp_encode(const rc_wp *t, const char *text, size_t len, int add_special,
                           int32_t **ids, size_t *n, recall_err *err) {
    if (!t || !ids || !n || (!text && len)) return rc_fail(err, RECALL_E_ARG, "rc_wp_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    wp_scratch s;
    memset(&s, 0, sizeof s);
    const uint8_t *b = (const uint8_t *)text;
    recall_status st = RECALL_OK;
    size_t span = 0, i = 0;
    while (i < len && !st) {
        size_t ml;
        int32_t id = special_at(t, b, i, len, &ml);
        if (id < 0) { i++; continue; }
        st = encode_span(t, &s, b + span, i - span);
        if (!st) st = push_id(&s, id);
        i += ml;
        span = i;
    }
    if (!st) st = encode_span(t, &s, b + span, len - span);
    int wrap = add_special && t->cls >= 0 && t->sep >= 0;
    if (!st && t->max_len) {
        size_t keep = t->max_len - (wrap ? 2u : 0u);
        if (s.n_ids > keep) s.n_ids = keep;
    }
    if (!st && wrap) {
        st = push_id(&s, 0); /* room for one more */
        if (!st) st = push_id(&s, t->sep);
        if (!st) {
            memmove(s.ids + 1, s.ids, (s.n_ids - 2) * sizeof *s.ids);
            s.ids[0] = t->cls;
        }
    }
    if (!st && !s.ids) { st = push_id(&s, 0); s.n_ids = 0; }
    rc_u32_free(&s.cps);
    rc_u32_free(&s.norm);
    rc_u32_free(&s.tmp);
    free(s.word.p);
    free(s.cand.p);
    if (st) {
        free(s.ids);
        return rc_fail(err, st, "rc_wp_encode: out of memory");
    }
    *ids = s.ids;
    *n = s.n_ids;
    return RECALL_OK;
}

/* ---- decode ----------------------------------------------------------------------------- */

/* HF decoders::wordpiece::cleanup, applied to one token (with its leading space). */
static recall_status put_cleaned(rc_bytebuf *out, const uint8_t *s, size_t n) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not",
                                       " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't",
                                     "'s", "'ve", "'re"};
    rc_bytebuf a = {NULL, 0, 0}, b = {NULL, 0, 0};
    recall_status st = rc_bb_put(&a, s, n);
    for (size_t r = 0; r < sizeof from / sizeof from[0] && !st; r++) {
        size_t fl = strlen(from[r]), tl = strlen(to[r]), i = 0;
        b.n = 0;
        while (i < a.n && !st) {
            if (i + fl <= a.n && memcmp(a.p + i, from[r], fl) == 0) {
                st = rc_bb_put(&b, to[r], tl);
                i += fl;
            } else {
                st = rc_bb_put(&b, a.p + i, 1);
                i++;
            }
        }
        rc_bytebuf sw = a;
        a = b;
        b = sw;
    }
    if (!st) st = rc_bb_put(out, a.p, a.n);
    free(a.p);
    free(b.p);
    return st;
}

recall_status rc_wp_decode(const rc_wp *t, const int32_t *ids, size_t n, int skip_special,
                           char **text, size_t *len, recall_err *err) {
    if (!t || !text || !len || (!ids && n)) return rc_fail(err, RECALL_E_ARG, "rc_wp_decode: NULL argument");
    *text = NULL;
    *len = 0;
    rc_bytebuf out = {NULL, 0, 0}, tok = {NULL, 0, 0};
    recall_status st = rc_bb_put(&out, "", 0);
    size_t k = 0; /* index among the tokens that survive filtering */
    for (size_t i = 0; i < n && !st; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= t->n_ids || !t->present[id]) continue;
        if (skip_special && rc_wp_is_special(t, id)) continue;
        size_t l;
        const char *s = tok_at(t, (uint32_t)id, &l);
        tok.n = 0;
        if (k > 0) {
            if (l >= 2 && s[0] == '#' && s[1] == '#') st = rc_bb_put(&tok, s + 2, l - 2);
            else {
                st = rc_bb_put(&tok, " ", 1);
                if (!st) st = rc_bb_put(&tok, s, l);
            }
        } else {
            st = rc_bb_put(&tok, s, l);
        }
        if (!st) st = put_cleaned(&out, tok.p, tok.n);
        k++;
    }
    free(tok.p);
    return rc_bb_take_text(&out, st, "rc_wp_decode", text, len, err);
}

/* ---- accessors -------------------------------------------------------------------------- */

int32_t rc_wp_token_id(const rc_wp *t, const char *token_string) {
    if (!t || !token_string) return -1;
    return lookup(t, token_string, strlen(token_string));
}

const char *rc_wp_token_str(const rc_wp *t, int32_t id, size_t *len) {
    if (!t || id < 0 || (uint32_t)id >= t->n_ids || !t->present[id]) return NULL;
    size_t l;
    return tok_at(t, (uint32_t)id, len ? len : &l);
}

int rc_wp_is_special(const rc_wp *t, int32_t id) {
    if (!t) return 0;
    for (uint32_t j = 0; j < t->n_special; j++)
        if (t->special[j] == id) return 1;
    return 0;
}

size_t rc_wp_vocab_size(const rc_wp *t) { return t ? t->n_ids : 0; }
size_t rc_wp_max_len(const rc_wp *t) { return t ? t->max_len : 0; }
int32_t rc_wp_cls_id(const rc_wp *t) { return t ? t->cls : -1; }
int32_t rc_wp_sep_id(const rc_wp *t) { return t ? t->sep : -1; }
