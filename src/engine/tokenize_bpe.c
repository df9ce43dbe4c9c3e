/* tokenize_bpe.c - byte-level BPE (Qwen2 / DeepSeek-R1) exact to HF tokenizers.
 *
 * Build: tokenizer.json -> section bytes (layout in weights/FORMAT_TOKENIZERS.md):
 *   header (40 bytes) | tok_off[n_ids+1] u32 | tok_kind[n_ids] u8, pad to 4 |
 *   merges[n_merges] (left,right,merged) u32 | added_ids[n_added] u32 |
 *   prefix_ids[n_prefix] u32 | suffix_ids[n_suffix] u32 | pool[pool_size] bytes
 * Load: section -> string hash (token -> id), merge hash ((left,right) -> rank,merged),
 *   per-id ByteLevel-decoded bytes, byte -> initial symbol id.
 * Encode: added-token split, NFC, Qwen2 pre-tokenizer scanner, BPE merge heap (HF Word::merge_all).
 */
#include "tokenize_bpe.h"

#include "bytes.h"
#include "json.h"
#include "mem.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BPE_MAGIC "RCTOKBPE"
#define BPE_VERSION 1u
#define BPE_HDR 40u
#define BPE_MAX_IDS (1u << 24)
#define BPE_MAX_MERGES (1u << 24)
#define BPE_MAX_AFFIX 16u

enum { KIND_ABSENT = 0, KIND_MODEL = 1, KIND_ADDED = 2, KIND_SPECIAL = 3 };

static const char QWEN2_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} merge_slot;

struct rc_bpe {
    uint32_t n_ids, n_merges, n_added, n_prefix, n_suffix, flags;
    uint32_t *tok_off; /* n_ids + 1 */
    uint8_t *tok_kind;
    char *pool;        /* token strings, each NUL-terminated copy at tok_off[i] + i */
    uint32_t *dec_off; /* ByteLevel-decoded bytes of each id, n_ids + 1 */
    uint8_t *dec_pool;
    int32_t *str_ht;   /* open addressing over token strings, -1 empty */
    size_t str_cap;
    merge_slot *merge_ht;
    size_t merge_cap;
    int32_t *added;    /* added ids sorted by first byte */
    uint32_t added_first[257]; /* added[added_first[b] .. added_first[b+1]) start with b */
    int32_t *prefix, *suffix;
    int32_t byte_id[256];
    uint16_t byte_cp[256];
    uint8_t ascii_flags[128]; /* rc_uc_flags of U+0000..U+007F, the pre-tokenizer's hot case */
};

/* ---- little helpers --------------------------------------------------------------------- */

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. */
static void byte_level_table(uint16_t byte_cp[256]) {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; b++) {
        int self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        byte_cp[b] = (uint16_t)(self ? b : next++);
    }
}
/* Inverse of byte_level_table: byte for cp, or -1. */
static int cp_to_byte(const uint16_t byte_cp[256], uint32_t cp) {
    if (cp < 256) return byte_cp[cp] == cp ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    for (int b = 0; b < 256; b++)
        if (byte_cp[b] == cp) return b;
    return -1;
}


/* Appends s with each maximal invalid UTF-8 subsequence replaced by U+FFFD. */
static recall_status bb_put_lossy(rc_bytebuf *b, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n) { /* longest valid stretch */
            size_t adv;
            if (rc_utf8_next(s + run, n - run, &adv) < 0) break;
            run += adv;
        }
        RC_TRY(rc_bb_put(b, s + i, run - i));
        if (run == n) break;
        size_t adv;
        (void)rc_utf8_next(s + run, n - run, &adv);
        RC_TRY(rc_bb_put(b, "\xEF\xBF\xBD", 3));
        i = run + adv;
    }
    return RECALL_OK;
}

static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t adv;
        if (rc_utf8_next(s + i, n - i, &adv) < 0) return 0;
        i += adv;
    }
    return 1;
}

/* ---- build: tokenizer.json -> section ----------------------------------------------------- */

typedef struct {
    const char *what;
    recall_err *err;
} bctx;

static recall_status unsup(bctx *c, const char *path, const char *why) {
    return rc_fail(c->err, RECALL_E_UNSUPPORTED, "%s: %s: %s", c->what, path, why);
}
static recall_status missing(bctx *c, const char *path) {
    return rc_fail(c->err, RECALL_E_MISSING, "%s: %s: missing", c->what, path);
}

static int is_null(const json_value *v) { return !v || v->type == JSON_NULL; }
static int is_null_or_empty(const json_value *v) { return is_null(v) || json_is_str(v, ""); }

static recall_status check_type(bctx *c, const json_value *obj, const char *path,
                                const char *want) {
    char p[256];
    snprintf(p, sizeof p, "%s.type", path);
    const json_value *t = json_get(obj, "type");
    if (!t) return missing(c, p);
    if (!json_is_str(t, want)) return unsup(c, p, "unsupported type");
    return RECALL_OK;
}

typedef struct {
    const char *s;
    size_t len;
    uint8_t kind;
} build_tok;

typedef struct {
    build_tok *toks; /* by id */
    uint32_t n_ids;
    uint32_t (*merges)[3];
    uint32_t n_merges;
    int32_t added[4096];
    uint32_t n_added;
    int32_t prefix[BPE_MAX_AFFIX], suffix[BPE_MAX_AFFIX];
    uint32_t n_prefix, n_suffix;
    uint32_t flags;
} build_state;

/* Looks a token string up by linear-probe over a temporary hash (build only). */
typedef struct {
    int32_t *slot;
    size_t cap;
} tmp_ht;

static int32_t tmp_find(const tmp_ht *h, const build_tok *toks, const char *s, size_t len) {
    size_t m = h->cap - 1, i = (size_t)rc_hash_bytes(s, len) & m;
    for (;;) {
        int32_t id = h->slot[i];
        if (id < 0) return -1;
        if (toks[id].len == len && memcmp(toks[id].s, s, len) == 0) return id;
        i = (i + 1) & m;
    }
}
static void tmp_insert(tmp_ht *h, const build_tok *toks, int32_t id) {
    size_t m = h->cap - 1, i = (size_t)rc_hash_bytes(toks[id].s, toks[id].len) & m;
    while (h->slot[i] >= 0) i = (i + 1) & m;
    h->slot[i] = id;
}

static recall_status parse_pretok(bctx *c, const json_value *root) {
    const json_value *pt = json_get(root, "pre_tokenizer");
    if (is_null(pt)) return missing(c, "$.pre_tokenizer");
    RC_TRY(check_type(c, pt, "$.pre_tokenizer", "Sequence"));
    const json_value *list = json_get_type(pt, "pretokenizers", JSON_ARR);
    if (!list) return missing(c, "$.pre_tokenizer.pretokenizers");
    if (list->len != 2)
        return unsup(c, "$.pre_tokenizer.pretokenizers", "expected [Split, ByteLevel]");
    const json_value *sp = &list->items[0], *bl = &list->items[1];
    RC_TRY(check_type(c, sp, "$.pre_tokenizer.pretokenizers[0]", "Split"));
    const json_value *pat = json_get(sp, "pattern");
    if (!pat) return missing(c, "$.pre_tokenizer.pretokenizers[0].pattern");
    const json_value *re = json_get(pat, "Regex");
    if (!re) return unsup(c, "$.pre_tokenizer.pretokenizers[0].pattern", "only Regex patterns");
    if (!json_is_str(re, QWEN2_PATTERN))
        return unsup(c, "$.pre_tokenizer.pretokenizers[0].pattern.Regex", "unsupported pattern");
    if (!json_is_str(json_get(sp, "behavior"), "Isolated"))
        return unsup(c, "$.pre_tokenizer.pretokenizers[0].behavior", "only Isolated");
    if (!json_is_false(json_get(sp, "invert")))
        return unsup(c, "$.pre_tokenizer.pretokenizers[0].invert", "only false");
    RC_TRY(check_type(c, bl, "$.pre_tokenizer.pretokenizers[1]", "ByteLevel"));
    if (!json_is_false(json_get(bl, "add_prefix_space")))
        return unsup(c, "$.pre_tokenizer.pretokenizers[1].add_prefix_space", "only false");
    if (!json_is_false(json_get(bl, "use_regex")))
        return unsup(c, "$.pre_tokenizer.pretokenizers[1].use_regex", "only false");
    return RECALL_OK;
}

static recall_status parse_affix_ids(bctx *c, const json_value *pp, const json_value *item,
                                     const char *path, build_state *st, int after) {
    const json_value *sp = json_get_type(item, "SpecialToken", JSON_OBJ);
    const json_value *name = sp ? json_get_type(sp, "id", JSON_STR) : NULL;
    if (!name) return unsup(c, path, "expected SpecialToken or Sequence A");
    const json_value *map = json_get_type(pp, "special_tokens", JSON_OBJ);
    const json_value *ent = map ? json_get_type(map, name->str, JSON_OBJ) : NULL;
    const json_value *ids = ent ? json_get_type(ent, "ids", JSON_ARR) : NULL;
    if (!ids) return missing(c, "$.post_processor.special_tokens");
    for (size_t k = 0; k < ids->len; k++) {
        const json_value *v = &ids->items[k];
        if (v->type != JSON_NUM || !v->is_int || v->i < 0 || v->i >= (int64_t)st->n_ids)
            return rc_fail(c->err, RECALL_E_FORMAT, "%s: $.post_processor.special_tokens: bad id",
                           c->what);
        uint32_t *n = after ? &st->n_suffix : &st->n_prefix;
        if (*n >= BPE_MAX_AFFIX) return unsup(c, path, "too many special tokens");
        (after ? st->suffix : st->prefix)[(*n)++] = (int32_t)v->i;
    }
    return RECALL_OK;
}

static recall_status parse_post(bctx *c, const json_value *root, build_state *st) {
    const json_value *pp = json_get(root, "post_processor");
    if (is_null(pp)) return RECALL_OK; /* no specials added */
    const json_value *t = json_get(pp, "type");
    if (json_is_str(t, "ByteLevel")) return RECALL_OK; /* only touches offsets */
    RC_TRY(check_type(c, pp, "$.post_processor", "TemplateProcessing"));
    const json_value *single = json_get_type(pp, "single", JSON_ARR);
    if (!single) return missing(c, "$.post_processor.single");
    int seen_a = 0;
    for (size_t i = 0; i < single->len; i++) {
        char path[64];
        snprintf(path, sizeof path, "$.post_processor.single[%zu]", i);
        const json_value *item = &single->items[i];
        const json_value *seq = json_get_type(item, "Sequence", JSON_OBJ);
        if (seq) {
            if (seen_a || !json_is_str(json_get(seq, "id"), "A"))
                return unsup(c, path, "expected one Sequence A");
            seen_a = 1;
            continue;
        }
        RC_TRY(parse_affix_ids(c, pp, item, path, st, seen_a));
    }
    if (!seen_a) return missing(c, "$.post_processor.single: Sequence A");
    return RECALL_OK;
}

static recall_status parse_added(bctx *c, const json_value *root, build_state *st,
                                 const json_value **added_out) {
    const json_value *added = json_get(root, "added_tokens");
    *added_out = NULL;
    if (is_null(added)) return RECALL_OK;
    if (added->type != JSON_ARR) return unsup(c, "$.added_tokens", "expected an array");
    if (added->len > sizeof st->added / sizeof st->added[0])
        return unsup(c, "$.added_tokens", "too many added tokens");
    for (size_t i = 0; i < added->len; i++) {
        const json_value *a = &added->items[i];
        char p[96];
        const json_value *id = json_get(a, "id"), *content = json_get(a, "content");
        snprintf(p, sizeof p, "$.added_tokens[%zu]", i);
        if (!id || id->type != JSON_NUM || !id->is_int || id->i < 0 || id->i >= BPE_MAX_IDS)
            return unsup(c, p, "bad or missing id");
        if (!content || content->type != JSON_STR || content->len == 0)
            return unsup(c, p, "bad or missing content");
        static const char *const flags0[] = {"normalized", "lstrip", "rstrip", "single_word"};
        for (size_t k = 0; k < 4; k++) {
            const json_value *f = json_get(a, flags0[k]);
            if (f && !json_is_false(f)) {
                snprintf(p, sizeof p, "$.added_tokens[%zu].%s", i, flags0[k]);
                return unsup(c, p, "only false");
            }
        }
        if ((uint32_t)id->i + 1 > st->n_ids) st->n_ids = (uint32_t)id->i + 1;
    }
    *added_out = added;
    return RECALL_OK;
}

/* The pipeline around the model may only be the one the encoder implements: NFC, the
 * pre-tokenizer parse_pretok accepts, a ByteLevel decoder, no truncation or padding. */
static recall_status check_pipeline(bctx *c, const json_value *root) {
    const json_value *norm = json_get(root, "normalizer");
    if (is_null(norm)) return missing(c, "$.normalizer");
    RC_TRY(check_type(c, norm, "$.normalizer", "NFC"));
    RC_TRY(parse_pretok(c, root));
    const json_value *dec = json_get(root, "decoder");
    if (is_null(dec)) return missing(c, "$.decoder");
    RC_TRY(check_type(c, dec, "$.decoder", "ByteLevel"));
    if (!is_null(json_get(root, "truncation"))) return unsup(c, "$.truncation", "only null");
    if (!is_null(json_get(root, "padding"))) return unsup(c, "$.padding", "only null");
    return RECALL_OK;
}

/* $.model: a plain byte-level BPE (no dropout, unk, prefixes, byte fallback); its vocab object
 * and merges array, with every vocab id in range (sets st->n_ids). */
static recall_status parse_model(bctx *c, const json_value *root, build_state *st, const json_value **vocab_out,
                                 const json_value **merges_out) {
    const json_value *model = json_get(root, "model");
    if (is_null(model)) return missing(c, "$.model");
    RC_TRY(check_type(c, model, "$.model", "BPE"));
    if (!is_null(json_get(model, "dropout"))) return unsup(c, "$.model.dropout", "only null");
    if (!is_null(json_get(model, "unk_token"))) return unsup(c, "$.model.unk_token", "only null");
    if (!is_null_or_empty(json_get(model, "continuing_subword_prefix")))
        return unsup(c, "$.model.continuing_subword_prefix", "only empty");
    if (!is_null_or_empty(json_get(model, "end_of_word_suffix")))
        return unsup(c, "$.model.end_of_word_suffix", "only empty");
    const json_value *bf = json_get(model, "byte_fallback");
    if (bf && !json_is_false(bf)) return unsup(c, "$.model.byte_fallback", "only false");
    const json_value *im = json_get(model, "ignore_merges");
    if (im && im->type == JSON_BOOL && im->num != 0) st->flags |= 1u;
    const json_value *vocab = json_get(model, "vocab");
    if (!vocab) return missing(c, "$.model.vocab");
    if (vocab->type != JSON_OBJ) return unsup(c, "$.model.vocab", "expected an object");
    const json_value *merges = json_get(model, "merges");
    if (!merges) return missing(c, "$.model.merges");
    if (merges->type != JSON_ARR) return unsup(c, "$.model.merges", "expected an array");
    if (merges->len > BPE_MAX_MERGES) return unsup(c, "$.model.merges", "too many merges");

    for (size_t i = 0; i < vocab->len; i++) {
        const json_value *v = &vocab->items[i];
        if (v->type != JSON_NUM || !v->is_int || v->i < 0 || v->i >= BPE_MAX_IDS)
            return rc_fail(c->err, RECALL_E_FORMAT, "%s: $.model.vocab[\"%.40s\"]: bad id",
                           c->what, vocab->keys[i]);
        if ((uint32_t)v->i + 1 > st->n_ids) st->n_ids = (uint32_t)v->i + 1;
    }
    *vocab_out = vocab;
    *merges_out = merges;
    return RECALL_OK;
}

/* st->toks[id] for every model vocab entry and added token (ids unique; an added token may
 * only reuse a vocab id with the same string); st->added lists the added ids. */
static recall_status fill_tokens(bctx *c, build_state *st, const json_value *vocab, const json_value *added) {
    st->toks = calloc(st->n_ids ? st->n_ids : 1, sizeof *st->toks);
    if (!st->toks) return rc_fail(c->err, RECALL_E_NOMEM, "%s: out of memory", c->what);
    for (size_t i = 0; i < vocab->len; i++) {
        uint32_t id = (uint32_t)vocab->items[i].i;
        if (st->toks[id].kind)
            return rc_fail(c->err, RECALL_E_FORMAT, "%s: $.model.vocab: id %u used twice",
                           c->what, id);
        if (vocab->key_lens[i] == 0)
            return unsup(c, "$.model.vocab", "empty token string");
        st->toks[id] = (build_tok){vocab->keys[i], vocab->key_lens[i], KIND_MODEL};
    }
    for (size_t i = 0; added && i < added->len; i++) {
        const json_value *a = &added->items[i];
        uint32_t id = (uint32_t)json_get(a, "id")->i;
        const json_value *content = json_get(a, "content"), *sp = json_get(a, "special");
        build_tok *t = &st->toks[id];
        if (t->kind == KIND_MODEL && (t->len != content->len || memcmp(t->s, content->str, t->len)))
            return unsup(c, "$.added_tokens", "added token id collides with another vocab entry");
        if (t->kind >= KIND_ADDED)
            return rc_fail(c->err, RECALL_E_FORMAT, "%s: $.added_tokens[%zu]: id %u used twice",
                           c->what, i, id);
        *t = (build_tok){content->str, content->len,
                         (uint8_t)(sp && sp->type == JSON_BOOL && sp->num ? KIND_SPECIAL : KIND_ADDED)};
        st->added[st->n_added++] = (int32_t)id;
    }
    return RECALL_OK;
}

/* st->merges: each "a b" string or [a, b] pair as (id a, id b, id of a+b); all three strings
 * must be model vocab entries. */
static recall_status parse_merges(bctx *c, build_state *st, const json_value *merges) {
    tmp_ht h = {NULL, 1};
    while (h.cap < 2 * (size_t)st->n_ids + 2) h.cap *= 2;
    h.slot = malloc(h.cap * sizeof *h.slot);
    st->merges = malloc((merges->len ? merges->len : 1) * sizeof *st->merges);
    char *joined = malloc(1024);
    recall_status s = RECALL_OK;
    if (!h.slot || !st->merges || !joined) {
        s = rc_fail(c->err, RECALL_E_NOMEM, "%s: out of memory", c->what);
        goto done;
    }
    memset(h.slot, 0xff, h.cap * sizeof *h.slot);
    for (uint32_t id = 0; id < st->n_ids; id++)
        if (st->toks[id].kind == KIND_MODEL) tmp_insert(&h, st->toks, (int32_t)id);
    for (size_t i = 0; i < merges->len; i++) {
        const json_value *m = &merges->items[i];
        const char *a, *b;
        size_t al, bl;
        if (m->type == JSON_STR) {
            const char *sp = memchr(m->str, ' ', m->len);
            if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->str))) goto bad_merge;
            a = m->str; al = (size_t)(sp - m->str);
            b = sp + 1; bl = m->len - al - 1;
        } else if (m->type == JSON_ARR && m->len == 2 && m->items[0].type == JSON_STR &&
                   m->items[1].type == JSON_STR) {
            a = m->items[0].str; al = m->items[0].len;
            b = m->items[1].str; bl = m->items[1].len;
        } else {
            goto bad_merge;
        }
        if (al + bl > 1000) goto bad_merge;
        memcpy(joined, a, al);
        memcpy(joined + al, b, bl);
        int32_t ia = tmp_find(&h, st->toks, a, al), ib = tmp_find(&h, st->toks, b, bl);
        int32_t im2 = tmp_find(&h, st->toks, joined, al + bl);
        if (ia < 0 || ib < 0 || im2 < 0) {
            s = rc_fail(c->err, RECALL_E_FORMAT, "%s: $.model.merges[%zu]: token not in vocab",
                        c->what, i);
            goto done;
        }
        st->merges[i][0] = (uint32_t)ia;
        st->merges[i][1] = (uint32_t)ib;
        st->merges[i][2] = (uint32_t)im2;
        continue;
    bad_merge:
        s = rc_fail(c->err, RECALL_E_FORMAT, "%s: $.model.merges[%zu]: malformed merge", c->what, i);
        goto done;
    }
    st->n_merges = (uint32_t)merges->len;
done:
    free(h.slot);
    free(joined);
    return s;
}

static recall_status build_tables(bctx *c, const json_value *root, build_state *st) {
    const json_value *vocab = NULL, *merges = NULL, *added = NULL;
    RC_TRY(check_pipeline(c, root));
    RC_TRY(parse_model(c, root, st, &vocab, &merges));
    RC_TRY(parse_added(c, root, st, &added));
    RC_TRY(fill_tokens(c, st, vocab, added));
    RC_TRY(parse_merges(c, st, merges));
    return parse_post(c, root, st);
}

static recall_status serialise(bctx *c, const build_state *st, uint8_t **section, size_t *size) {
    uint64_t pool = 0;
    for (uint32_t i = 0; i < st->n_ids; i++) pool += st->toks[i].len;
    if (pool > UINT32_MAX) return unsup(c, "$.model.vocab", "token strings too large");
    uint64_t kind_end = BPE_HDR + 4ull * (st->n_ids + 1) + st->n_ids;
    uint64_t merges_off = (kind_end + 3) & ~3ull;
    uint64_t added_off = merges_off + 12ull * st->n_merges;
    uint64_t prefix_off = added_off + 4ull * st->n_added;
    uint64_t suffix_off = prefix_off + 4ull * st->n_prefix;
    uint64_t pool_off = suffix_off + 4ull * st->n_suffix;
    uint64_t total = pool_off + pool;
    uint8_t *p = calloc(1, (size_t)total);
    if (!p) return rc_fail(c->err, RECALL_E_NOMEM, "%s: out of memory", c->what);
    memcpy(p, BPE_MAGIC, 8);
    rc_wr32(p + 8, BPE_VERSION);
    rc_wr32(p + 12, st->flags);
    rc_wr32(p + 16, st->n_ids);
    rc_wr32(p + 20, st->n_merges);
    rc_wr32(p + 24, st->n_added);
    rc_wr32(p + 28, st->n_prefix);
    rc_wr32(p + 32, st->n_suffix);
    rc_wr32(p + 36, (uint32_t)pool);
    uint32_t off = 0;
    for (uint32_t i = 0; i < st->n_ids; i++) {
        rc_wr32(p + BPE_HDR + 4ull * i, off);
        p[BPE_HDR + 4ull * (st->n_ids + 1) + i] = st->toks[i].kind;
        if (st->toks[i].len) memcpy(p + pool_off + off, st->toks[i].s, st->toks[i].len);
        off += (uint32_t)st->toks[i].len;
    }
    rc_wr32(p + BPE_HDR + 4ull * st->n_ids, off);
    for (uint32_t i = 0; i < st->n_merges; i++)
        for (int k = 0; k < 3; k++) rc_wr32(p + merges_off + 12ull * i + 4u * (unsigned)k, st->merges[i][k]);
    for (uint32_t i = 0; i < st->n_added; i++) rc_wr32(p + added_off + 4ull * i, (uint32_t)st->added[i]);
    for (uint32_t i = 0; i < st->n_prefix; i++) rc_wr32(p + prefix_off + 4ull * i, (uint32_t)st->prefix[i]);
    for (uint32_t i = 0; i < st->n_suffix; i++) rc_wr32(p + suffix_off + 4ull * i, (uint32_t)st->suffix[i]);
    *section = p;
    *size = (size_t)total;
    return RECALL_OK;
}

recall_status rc_bpe_build_from_json(const char *tokenizer_json_path,
                                     const char *tokenizer_config_path, uint8_t **section,
                                     size_t *size, recall_err *err) {
    if (!tokenizer_json_path || !section || !size)
        return rc_fail(err, RECALL_E_ARG, "rc_bpe_build_from_json: NULL argument");
    *section = NULL;
    *size = 0;
    char *text = NULL;
    size_t len = 0;
    json_doc *doc = NULL;
    recall_status s;
    if (tokenizer_config_path) { /* only has to be valid JSON: the template decides specials */
        RC_TRY(rc_read_file(tokenizer_config_path, &text, &len, err));
        s = json_parse(text, len, tokenizer_config_path, &doc, err);
        free(text);
        json_free(doc);
        if (s) return s;
        doc = NULL;
    }
    RC_TRY(rc_read_file(tokenizer_json_path, &text, &len, err));
    s = json_parse(text, len, tokenizer_json_path, &doc, err);
    free(text);
    if (s) return s;
    bctx c = {tokenizer_json_path, err};
    build_state *st = calloc(1, sizeof *st);
    if (!st) {
        json_free(doc);
        return rc_fail(err, RECALL_E_NOMEM, "%s: out of memory", tokenizer_json_path);
    }
    const json_value *root = json_root(doc);
    if (!root || root->type != JSON_OBJ)
        s = unsup(&c, "$", "expected an object");
    else
        s = build_tables(&c, root, st);
    if (!s) s = serialise(&c, st, section, size);
    free(st->toks);
    free(st->merges);
    free(st);
    json_free(doc);
    return s;
}

/* ---- load ------------------------------------------------------------------------------- */

void rc_bpe_free(rc_bpe *t) {
    if (!t) return;
    RC_FREE(t->tok_off, t->tok_kind, t->pool, t->dec_off, t->dec_pool, t->str_ht, t->merge_ht, t->added,
            t->prefix, t->suffix, t);
}

static const char *tok_at(const rc_bpe *t, uint32_t id, size_t *len) {
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->pool + t->tok_off[id] + id; /* each string is followed by its NUL */
}

static int32_t str_lookup(const rc_bpe *t, const char *s, size_t len) {
    size_t m = t->str_cap - 1, i = (size_t)rc_hash_bytes(s, len) & m;
    for (;;) {
        int32_t id = t->str_ht[i];
        if (id < 0) return -1;
        size_t l;
        const char *q = tok_at(t, (uint32_t)id, &l);
        if (l == len && memcmp(q, s, len) == 0) return id;
        i = (i + 1) & m;
    }
}

static void str_insert(rc_bpe *t, uint32_t id) {
    size_t len;
    const char *s = tok_at(t, id, &len);
    if (str_lookup(t, s, len) >= 0) return; /* first inserted wins (added before model) */
    size_t m = t->str_cap - 1, i = (size_t)rc_hash_bytes(s, len) & m;
    while (t->str_ht[i] >= 0) i = (i + 1) & m;
    t->str_ht[i] = (int32_t)id;
}

static const merge_slot *merge_lookup(const rc_bpe *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t m = t->merge_cap - 1, i = (size_t)hash_u64(key) & m;
    for (;;) {
        const merge_slot *e = &t->merge_ht[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
        i = (i + 1) & m;
    }
}

static recall_status sect_fail(recall_err *err, recall_status code, const char *msg) {
    return rc_fail(err, code, "tokenizer section (BPE): %s", msg);
}

static recall_status load_fail(rc_bpe *t, recall_err *err, recall_status code, const char *msg) {
    rc_bpe_free(t);
    return sect_fail(err, code, msg);
}

/* Byte offsets of the section's arrays (see serialise), from the header counts. */
typedef struct {
    uint64_t kind, merges, added, prefix, suffix, pool;
    uint32_t pool_len;
} bpe_layout;

static recall_status bpe_alloc(rc_bpe *t, uint32_t pool, recall_err *err) {
    uint32_t n = t->n_ids;
    t->tok_off = malloc(4ull * (n + 1));
    t->tok_kind = malloc(n + 1ull);
    t->pool = malloc((size_t)pool + n + 1);
    t->dec_off = malloc(4ull * (n + 1));
    t->dec_pool = malloc((size_t)pool + 1);
    t->added = malloc(4ull * (t->n_added + 1));
    t->prefix = malloc(4ull * (t->n_prefix + 1));
    t->suffix = malloc(4ull * (t->n_suffix + 1));
    t->str_cap = 16;
    while (t->str_cap < 2ull * n + 2) t->str_cap *= 2;
    t->str_ht = malloc(t->str_cap * sizeof *t->str_ht);
    t->merge_cap = 16;
    while (t->merge_cap < 2ull * t->n_merges + 2) t->merge_cap *= 2;
    t->merge_ht = malloc(t->merge_cap * sizeof *t->merge_ht);
    if (!t->tok_off || !t->tok_kind || !t->pool || !t->dec_off || !t->dec_pool || !t->added ||
        !t->prefix || !t->suffix || !t->str_ht || !t->merge_ht)
        return sect_fail(err, RECALL_E_NOMEM, "out of memory");
    return RECALL_OK;
}

/* Token offsets (ascending, 0 .. pool), kinds, and a NUL-terminated copy of each string. */
static recall_status load_tokens(rc_bpe *t, const uint8_t *p, const bpe_layout *L, recall_err *err) {
    uint32_t n = t->n_ids, prev = 0, n_added_kind = 0;
    for (uint32_t i = 0; i <= n; i++) {
        uint32_t o = rc_rd32(p + BPE_HDR + 4ull * i);
        if (o < prev || o > L->pool_len || (i == 0 && o != 0) || (i == n && o != L->pool_len))
            return sect_fail(err, RECALL_E_FORMAT, "token offsets out of order");
        t->tok_off[i] = o;
        prev = o;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t k = p[L->kind + i];
        if (k > KIND_SPECIAL) return sect_fail(err, RECALL_E_FORMAT, "bad token kind");
        if ((k != KIND_ABSENT) != (t->tok_off[i + 1] > t->tok_off[i]))
            return sect_fail(err, RECALL_E_FORMAT, "present tokens must be non-empty");
        t->tok_kind[i] = k;
        n_added_kind += k >= KIND_ADDED;
        uint32_t l = t->tok_off[i + 1] - t->tok_off[i];
        memcpy(t->pool + t->tok_off[i] + i, p + L->pool + t->tok_off[i], l);
        t->pool[t->tok_off[i] + i + l] = 0;
    }
    if (n_added_kind != t->n_added) return sect_fail(err, RECALL_E_FORMAT, "added-token count mismatch");
    return RECALL_OK;
}

/* Decoded bytes of each id: the ByteLevel decoder, falling back to the raw token text when any
 * char is outside the byte alphabet (tokenizers decoders/byte_level.rs). */
static void build_decoded(rc_bpe *t) {
    uint32_t dpos = 0;
    for (uint32_t i = 0; i < t->n_ids; i++) {
        t->dec_off[i] = dpos;
        size_t len;
        const uint8_t *s = (const uint8_t *)tok_at(t, i, &len);
        uint32_t start = dpos;
        int ok = 1;
        size_t j = 0;
        while (j < len) {
            size_t adv;
            int32_t cp = rc_utf8_next(s + j, len - j, &adv);
            int b = cp < 0 ? -1 : cp_to_byte(t->byte_cp, (uint32_t)cp);
            if (b < 0) { ok = 0; break; }
            t->dec_pool[dpos++] = (uint8_t)b;
            j += adv;
        }
        if (!ok) {
            dpos = start;
            memcpy(t->dec_pool + dpos, s, len);
            dpos += (uint32_t)len;
        }
    }
    t->dec_off[t->n_ids] = dpos;
}

/* Merge ranks keyed by the (a, b) id pair; a and b model tokens, the result present. */
static recall_status load_merges(rc_bpe *t, const uint8_t *p, const bpe_layout *L, recall_err *err) {
    uint32_t n = t->n_ids;
    for (uint32_t i = 0; i < t->merge_cap; i++) t->merge_ht[i].key = UINT64_MAX;
    for (uint32_t r = 0; r < t->n_merges; r++) {
        const uint8_t *m = p + L->merges + 12ull * r;
        uint32_t a = rc_rd32(m), b = rc_rd32(m + 4), c = rc_rd32(m + 8);
        if (a >= n || b >= n || c >= n || t->tok_kind[a] != KIND_MODEL ||
            t->tok_kind[b] != KIND_MODEL || t->tok_kind[c] == KIND_ABSENT)
            return sect_fail(err, RECALL_E_FORMAT, "merge refers to a missing token");
        uint64_t key = (uint64_t)a << 32 | b;
        size_t mask = t->merge_cap - 1, i = (size_t)hash_u64(key) & mask;
        while (t->merge_ht[i].key != UINT64_MAX && t->merge_ht[i].key != key) i = (i + 1) & mask;
        t->merge_ht[i] = (merge_slot){key, r, (int32_t)c}; /* a later duplicate wins, as in HF */
    }
    return RECALL_OK;
}

/* Added tokens (unique, of an added kind) bucketed by first byte for the leftmost-longest scan. */
static recall_status load_added(rc_bpe *t, const uint8_t *p, const bpe_layout *L, recall_err *err) {
    uint32_t cnt[257] = {0};
    for (uint32_t i = 0; i < t->n_added; i++) {
        uint32_t id = rc_rd32(p + L->added + 4ull * i);
        if (id >= t->n_ids || t->tok_kind[id] < KIND_ADDED)
            return sect_fail(err, RECALL_E_FORMAT, "bad added-token id");
        for (uint32_t k = 0; k < i; k++)
            if ((uint32_t)t->added[k] == id) return sect_fail(err, RECALL_E_FORMAT, "duplicate added token");
        t->added[i] = (int32_t)id;
        cnt[(uint8_t)t->pool[t->tok_off[id] + id] + 1]++;
    }
    for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
    memcpy(t->added_first, cnt, sizeof cnt);
    int32_t *sorted = malloc(4ull * (t->n_added + 1));
    if (!sorted) return sect_fail(err, RECALL_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < t->n_added; i++) {
        int32_t id = t->added[i];
        sorted[cnt[(uint8_t)t->pool[t->tok_off[id] + (uint32_t)id]]++] = id;
    }
    free(t->added);
    t->added = sorted;
    return RECALL_OK;
}

/* Post-processor prefix / suffix ids (present tokens). */
static recall_status load_affixes(rc_bpe *t, const uint8_t *p, const bpe_layout *L, recall_err *err) {
    for (uint32_t i = 0; i < t->n_prefix + t->n_suffix; i++) {
        uint32_t id = rc_rd32(p + L->prefix + 4ull * i);
        if (id >= t->n_ids || t->tok_kind[id] == KIND_ABSENT)
            return sect_fail(err, RECALL_E_FORMAT, "bad post-processor id");
        if (i < t->n_prefix) t->prefix[i] = (int32_t)id; else t->suffix[i - t->n_prefix] = (int32_t)id;
    }
    return RECALL_OK;
}

recall_status rc_bpe_load(const void *section, size_t size, rc_bpe **out, recall_err *err) {
    const uint8_t *p = section;
    if (!out) return rc_fail(err, RECALL_E_ARG, "rc_bpe_load: NULL out");
    *out = NULL;
    RC_TRY(rc_section_head(p, size, BPE_HDR, BPE_MAGIC, BPE_VERSION, "tokenizer section (BPE)", err));
    rc_bpe *t = calloc(1, sizeof *t);
    if (!t) return rc_fail(err, RECALL_E_NOMEM, "tokenizer section (BPE): out of memory");
    t->flags = rc_rd32(p + 12);
    t->n_ids = rc_rd32(p + 16);
    t->n_merges = rc_rd32(p + 20);
    t->n_added = rc_rd32(p + 24);
    t->n_prefix = rc_rd32(p + 28);
    t->n_suffix = rc_rd32(p + 32);
    bpe_layout L;
    L.pool_len = rc_rd32(p + 36);
    if (t->n_ids > BPE_MAX_IDS || t->n_merges > BPE_MAX_MERGES || t->n_added > t->n_ids ||
        t->n_prefix > BPE_MAX_AFFIX || t->n_suffix > BPE_MAX_AFFIX || t->flags > 1)
        return load_fail(t, err, RECALL_E_FORMAT, "header counts out of range");
    L.kind = BPE_HDR + 4ull * (t->n_ids + 1);
    L.merges = (L.kind + t->n_ids + 3) & ~3ull;
    L.added = L.merges + 12ull * t->n_merges;
    L.prefix = L.added + 4ull * t->n_added;
    L.suffix = L.prefix + 4ull * t->n_prefix;
    L.pool = L.suffix + 4ull * t->n_suffix;
    if (L.pool + L.pool_len != size) return load_fail(t, err, RECALL_E_FORMAT, "size does not match header");
    recall_status s = bpe_alloc(t, L.pool_len, err);
    if (!s) s = load_tokens(t, p, &L, err);
    if (!s) {
        byte_level_table(t->byte_cp);
        build_decoded(t);
        memset(t->str_ht, 0xff, t->str_cap * sizeof *t->str_ht);
        for (uint32_t i = 0; i < t->n_ids; i++) /* added tokens first: they win a string clash */
            if (t->tok_kind[i] >= KIND_ADDED) str_insert(t, i);
        for (uint32_t i = 0; i < t->n_ids; i++)
            if (t->tok_kind[i] == KIND_MODEL) str_insert(t, i);
        s = load_merges(t, p, &L, err);
    }
    if (!s) s = load_added(t, p, &L, err);
    if (!s) s = load_affixes(t, p, &L, err);
    if (s) {
        rc_bpe_free(t);
        return s;
    }
    for (uint32_t c = 0; c < 128; c++) t->ascii_flags[c] = (uint8_t)rc_uc_flags(c);
    for (int b = 0; b < 256; b++) { /* the model token of each single byte, for the merge start */
        uint8_t u[4];
        size_t l = rc_utf8_put(t->byte_cp[b], u);
        int32_t id = str_lookup(t, (const char *)u, l);
        t->byte_id[b] = (id >= 0 && t->tok_kind[id] == KIND_MODEL) ? id : -1;
    }
    *out = t;
    return RECALL_OK;
}

/* ---- encode ----------------------------------------------------------------------------- */

typedef struct {
    int32_t c;
    int32_t prev, next;
    int32_t len; /* 0 = merged away */
} symbol;

typedef struct {
    uint32_t rank, pos;
    int32_t merged;
} heap_ent;

/* Word cache: pre-tokenized piece bytes -> its BPE ids, per encode call (the tokenizer itself
 * stays immutable and shareable between threads). English text repeats a few thousand words, so
 * most pieces skip the merge loop. Bounded: pieces over WC_MAX_KEY bytes are not cached, and when
 * WC_MAX_ENTRIES are held the cache is emptied and refills with what follows. */
#define WC_MAX_KEY 64u
#define WC_MAX_ENTRIES (1u << 15)

typedef struct {
    uint64_t hash;
    uint32_t key_off, key_len; /* key_len 0 = empty slot (pieces are never empty) */
    uint32_t ids_off, n_ids;
} wc_slot;

typedef struct {
    wc_slot *slot;
    size_t cap, used; /* cap a power of two, used <= cap / 2 */
    rc_bytebuf keys;
    int32_t *ids;
    size_t n_ids, ids_cap;
} word_cache;

typedef struct {
    rc_u32vec cps, nfc;
    uint8_t *flags;
    size_t flags_cap;
    rc_bytebuf piece, bl;
    symbol *sym;
    heap_ent *heap;
    size_t sym_cap;
    int32_t *ids;
    size_t n_ids, ids_cap;
    word_cache wc;
} enc_scratch;

static void scratch_free(enc_scratch *s) {
    rc_u32_free(&s->cps);
    rc_u32_free(&s->nfc);
    free(s->flags);
    free(s->piece.p);
    free(s->bl.p);
    free(s->sym);
    free(s->heap);
    free(s->ids);
    free(s->wc.slot);
    free(s->wc.keys.p);
    free(s->wc.ids);
}

/* Room for `more` ids in a growable id array. */
static recall_status ids_reserve(int32_t **ids, size_t *cap, size_t n, size_t more) {
    if (more <= *cap - n) return RECALL_OK;
    size_t c = *cap ? *cap : 64;
    while (c - n < more) {
        if (c > SIZE_MAX / 2 / sizeof **ids) return RECALL_E_NOMEM;
        c *= 2;
    }
    int32_t *q = realloc(*ids, c * sizeof *q);
    if (!q) return RECALL_E_NOMEM;
    *ids = q;
    *cap = c;
    return RECALL_OK;
}

static recall_status push_id(enc_scratch *s, int32_t id) {
    if (s->n_ids == s->ids_cap) RC_TRY(ids_reserve(&s->ids, &s->ids_cap, s->n_ids, 1));
    s->ids[s->n_ids++] = id;
    return RECALL_OK;
}

/* The slot holding key, or the empty slot where it would go. */
static wc_slot *wc_find(const word_cache *w, const uint8_t *key, size_t len, uint64_t h) {
    size_t m = w->cap - 1, i = (size_t)h & m;
    for (;;) {
        wc_slot *e = &w->slot[i];
        if (e->key_len == 0) return e;
        if (e->hash == h && e->key_len == len && memcmp(w->keys.p + e->key_off, key, len) == 0)
            return e;
        i = (i + 1) & m;
    }
}

/* Appends the cached ids of key to s->ids; 1 on a hit, 0 on a miss. */
static int wc_get(enc_scratch *s, const uint8_t *key, size_t len, uint64_t h, recall_status *st) {
    const word_cache *w = &s->wc;
    if (!w->cap || len > WC_MAX_KEY) return 0;
    const wc_slot *e = wc_find(w, key, len, h);
    if (e->key_len == 0) return 0;
    *st = ids_reserve(&s->ids, &s->ids_cap, s->n_ids, e->n_ids);
    if (*st) return 1;
    memcpy(s->ids + s->n_ids, w->ids + e->ids_off, e->n_ids * sizeof *s->ids);
    s->n_ids += e->n_ids;
    return 1;
}

static recall_status wc_grow(word_cache *w, size_t cap) {
    wc_slot *old = w->slot;
    size_t old_cap = w->cap;
    w->slot = calloc(cap, sizeof *w->slot);
    if (!w->slot) {
        w->slot = old;
        return RECALL_E_NOMEM;
    }
    w->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key_len == 0) continue;
        size_t m = cap - 1, j = (size_t)old[i].hash & m;
        while (w->slot[j].key_len) j = (j + 1) & m;
        w->slot[j] = old[i];
    }
    free(old);
    return RECALL_OK;
}

/* Remembers key -> ids[0..n). */
static recall_status wc_put(word_cache *w, const uint8_t *key, size_t len, uint64_t h,
                            const int32_t *ids, size_t n) {
    if (len > WC_MAX_KEY || len == 0) return RECALL_OK;
    if (w->used >= WC_MAX_ENTRIES) { /* full: start over rather than grow without bound */
        memset(w->slot, 0, w->cap * sizeof *w->slot);
        w->used = 0;
        w->keys.n = 0;
        w->n_ids = 0;
    }
    if (2 * (w->used + 1) > w->cap) RC_TRY(wc_grow(w, w->cap ? 2 * w->cap : 256));
    wc_slot *e = wc_find(w, key, len, h);
    RC_TRY(ids_reserve(&w->ids, &w->ids_cap, w->n_ids, n));
    size_t key_off = w->keys.n;
    RC_TRY(rc_bb_put(&w->keys, key, len));
    if (n) memcpy(w->ids + w->n_ids, ids, n * sizeof *ids); /* a hostile section can map a word to no id */
    *e = (wc_slot){h, (uint32_t)key_off, (uint32_t)len, (uint32_t)w->n_ids, (uint32_t)n};
    w->n_ids += n;
    w->used++;
    return RECALL_OK;
}

static int heap_less(const heap_ent *a, const heap_ent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}
static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(&e, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}
static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const heap_ent *best = &last;
        if (l < *n && heap_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && heap_less(&h[r], best)) { m = r; best = &h[r]; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

/* BPE of one pre-tokenized piece (raw bytes), HF Word::merge_all. */
static recall_status bpe_piece(const rc_bpe *t, enc_scratch *s, const uint8_t *b, size_t m) {
    if (t->flags & 1u) { /* ignore_merges: a whole-word vocab hit wins */
        s->bl.n = 0;
        for (size_t i = 0; i < m; i++) {
            uint8_t u[4];
            RC_TRY(rc_bb_put(&s->bl, u, rc_utf8_put(t->byte_cp[b[i]], u)));
        }
        int32_t id = str_lookup(t, (const char *)s->bl.p, s->bl.n);
        if (id >= 0 && t->tok_kind[id] == KIND_MODEL) return push_id(s, id);
    }
    if (m > s->sym_cap) {
        size_t cap = m < 64 ? 64 : m;
        symbol *q = realloc(s->sym, cap * sizeof *q);
        if (!q) return RECALL_E_NOMEM;
        s->sym = q;
        heap_ent *h = realloc(s->heap, 3 * cap * sizeof *h);
        if (!h) return RECALL_E_NOMEM;
        s->heap = h;
        s->sym_cap = cap;
    }
    symbol *sym = s->sym;
    size_t ns = 0;
    for (size_t i = 0; i < m; i++) {
        int32_t id = t->byte_id[b[i]];
        if (id < 0) continue; /* no unk token: HF drops chars missing from the vocab */
        sym[ns] = (symbol){id, (int32_t)ns - 1, (int32_t)ns + 1, 1};
        ns++;
    }
    if (ns == 0) return RECALL_OK;
    sym[ns - 1].next = -1;
    size_t hn = 0;
    heap_ent *heap = s->heap;
    for (size_t i = 0; i + 1 < ns; i++) {
        const merge_slot *e = merge_lookup(t, sym[i].c, sym[i + 1].c);
        if (e) heap_push(heap, &hn, (heap_ent){e->rank, (uint32_t)i, e->merged});
    }
    /* initial pairs <= m-1, each merge pushes <= 2: the heap never exceeds 3m entries */
    while (hn) {
        heap_ent top = heap_pop(heap, &hn);
        size_t pos = top.pos;
        if (sym[pos].len == 0 || sym[pos].next < 0) continue;
        size_t rpos = (size_t)sym[pos].next;
        const merge_slot *e = merge_lookup(t, sym[pos].c, sym[rpos].c);
        if (!e || e->merged != top.merged) continue; /* stale entry */
        sym[pos].c = top.merged;
        sym[pos].len += sym[rpos].len;
        sym[pos].next = sym[rpos].next;
        sym[rpos].len = 0;
        if (sym[pos].next >= 0) sym[sym[pos].next].prev = (int32_t)pos;
        if (sym[pos].prev >= 0) {
            const merge_slot *pe = merge_lookup(t, sym[sym[pos].prev].c, sym[pos].c);
            if (pe) heap_push(heap, &hn, (heap_ent){pe->rank, (uint32_t)sym[pos].prev, pe->merged});
        }
        if (sym[pos].next >= 0) {
            const merge_slot *ne = merge_lookup(t, sym[pos].c, sym[sym[pos].next].c);
            if (ne) heap_push(heap, &hn, (heap_ent){ne->rank, (uint32_t)pos, ne->merged});
        }
    }
    for (size_t i = 0; i < ns; i++)
        if (sym[i].len) RC_TRY(push_id(s, sym[i].c));
    return RECALL_OK;
}

/* ---- the Qwen2 pre-tokenizer ------------------------------------------------------------
 * Regex (leftmost-first alternation, greedy, backtracking), matched at position i:
 *   1 (?i:'s|'t|'re|'ve|'m|'ll|'d)      case-insensitive contractions (ſ folds to s)
 *   2 [^\r\n\p{L}\p{N}]?\p{L}+         optional non-letter/digit/newline lead, then letters
 *   3 \p{N}                            one number char
 *   4 " ?[^\s\p{L}\p{N}]+[\r\n]*"      optional space, symbols, trailing newlines
 *   5 \s*[\r\n]+                       whitespace through the LAST newline of the run
 *   6 \s+(?!\S)                        whitespace run minus its last char (unless at end)
 *   7 \s+                              whitespace run
 * Returns the end of the match, or i when nothing matches (cannot happen: every char is
 * L, N, whitespace or covered by 4; kept for safety, the caller then isolates the char). */
static int ci_eq(uint32_t c, char lower) {
    return c == (uint32_t)lower || c == (uint32_t)lower - 32u || (lower == 's' && c == 0x17F);
}

static size_t qwen2_match(const uint32_t *c, const uint8_t *f, size_t i, size_t n) {
    if (c[i] == '\'' && i + 1 < n) {
        uint32_t x = c[i + 1];
        if (ci_eq(x, 's') || ci_eq(x, 't') || ci_eq(x, 'm') || ci_eq(x, 'd')) return i + 2;
        if (i + 2 < n) {
            uint32_t y = c[i + 2];
            if ((ci_eq(x, 'r') && ci_eq(y, 'e')) || (ci_eq(x, 'v') && ci_eq(y, 'e')) ||
                (ci_eq(x, 'l') && ci_eq(y, 'l')))
                return i + 3;
        }
    }
    size_t j;
    if (f[i] & RC_UC_L) {
        for (j = i + 1; j < n && (f[j] & RC_UC_L); j++) {}
        return j;
    }
    if (c[i] != '\r' && c[i] != '\n' && !(f[i] & RC_UC_N) && i + 1 < n && (f[i + 1] & RC_UC_L)) {
        for (j = i + 2; j < n && (f[j] & RC_UC_L); j++) {}
        return j;
    }
    if (f[i] & RC_UC_N) return i + 1;
#define SYM(k) (!(f[k] & (RC_UC_WS | RC_UC_L | RC_UC_N)))
    j = n;
    if (c[i] == ' ' && i + 1 < n && SYM(i + 1)) j = i + 1;
    else if (SYM(i)) j = i;
    if (j < n) {
        while (j < n && SYM(j)) j++;
        while (j < n && (c[j] == '\r' || c[j] == '\n')) j++;
        return j;
    }
#undef SYM
    if (f[i] & RC_UC_WS) {
        size_t end, last_nl = n;
        for (end = i; end < n && (f[end] & RC_UC_WS); end++)
            if (c[end] == '\r' || c[end] == '\n') last_nl = end;
        if (last_nl < n) return last_nl + 1;
        if (end == n || end - 1 == i) return end; /* alternatives 6 (at end) and 7 */
        return end - 1;
    }
    return i;
}

/* NFC of the span b[0..len) (valid UTF-8) into s->nfc. NFC of ASCII is the identity, and no
 * canonical reordering or composition crosses an ASCII character (ccc 0; never the second of a
 * composition pair), so the ASCII bytes are copied and only each non-ASCII stretch, together
 * with the ASCII character before it (a possible starter: "e" + U+0301 -> U+00E9), goes through
 * rc_uc_nfc. */
static recall_status nfc_span(enc_scratch *s, const uint8_t *b, size_t len) {
    s->nfc.n = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && b[j] < 0x80) j++;
        if (j - i > s->nfc.cap - s->nfc.n) { /* room for the ASCII run */
            size_t cap = s->nfc.cap ? s->nfc.cap : 64;
            while (cap - s->nfc.n < j - i) {
                if (cap > SIZE_MAX / 2 / sizeof *s->nfc.v) return RECALL_E_NOMEM;
                cap *= 2;
            }
            uint32_t *v = realloc(s->nfc.v, cap * sizeof *v);
            if (!v) return RECALL_E_NOMEM;
            s->nfc.v = v;
            s->nfc.cap = cap;
        }
        for (size_t k = i; k < j; k++) s->nfc.v[s->nfc.n++] = b[k];
        if (j == len) break;
        size_t start = j, end = j;
        if (start > 0 && b[start - 1] < 0x80) { /* re-normalise the preceding starter with it */
            start--;
            s->nfc.n--;
        }
        while (end < len && b[end] >= 0x80) end++;
        s->cps.n = 0;
        RC_TRY(rc_utf8_decode_lossy(b + start, end - start, &s->cps));
        RC_TRY(rc_uc_nfc(s->cps.v, s->cps.n, &s->nfc));
        i = end;
    }
    return RECALL_OK;
}

/* UTF-8 of the code points c[0..n) into s->piece. */
static recall_status piece_bytes(enc_scratch *s, const uint32_t *c, size_t n) {
    s->piece.n = 0;
    if (n > (SIZE_MAX - 1) / 4) return RECALL_E_NOMEM;
    if (4 * n + 1 > s->piece.cap) {
        size_t cap = 4 * n + 1 < 256 ? 256 : 4 * n + 1;
        uint8_t *q = realloc(s->piece.p, cap);
        if (!q) return RECALL_E_NOMEM;
        s->piece.p = q;
        s->piece.cap = cap;
    }
    uint8_t *p = s->piece.p;
    size_t w = 0;
    for (size_t k = 0; k < n; k++) {
        if (c[k] < 0x80) p[w++] = (uint8_t)c[k];
        else w += rc_utf8_put(c[k], p + w);
    }
    s->piece.n = w;
    return RECALL_OK;
}

static recall_status encode_span(const rc_bpe *t, enc_scratch *s, const uint8_t *b, size_t len) {
    if (len == 0) return RECALL_OK;
    RC_TRY(nfc_span(s, b, len));
    const uint32_t *c = s->nfc.v;
    size_t n = s->nfc.n;
    if (n > s->flags_cap) {
        uint8_t *q = realloc(s->flags, n);
        if (!q) return RECALL_E_NOMEM;
        s->flags = q;
        s->flags_cap = n;
    }
    for (size_t i = 0; i < n; i++)
        s->flags[i] = c[i] < 128 ? t->ascii_flags[c[i]] : (uint8_t)rc_uc_flags(c[i]);
    size_t i = 0;
    while (i < n) {
        size_t e = qwen2_match(c, s->flags, i, n);
        if (e == i) e = i + 1;
        RC_TRY(piece_bytes(s, c + i, e - i));
        const uint8_t *p = s->piece.p;
        size_t m = s->piece.n, before = s->n_ids;
        uint64_t h = m <= WC_MAX_KEY ? rc_hash_bytes(p, m) : 0;
        recall_status st = RECALL_OK;
        if (!wc_get(s, p, m, h, &st)) {
            RC_TRY(bpe_piece(t, s, p, m));
            st = wc_put(&s->wc, p, m, h, s->n_ids > before ? s->ids + before : NULL, s->n_ids - before);
        }
        RC_TRY(st);
        i = e;
    }
    return RECALL_OK;
}

/* Longest added token starting at text[i], or -1. */
static int32_t added_at(const rc_bpe *t, const uint8_t *text, size_t i, size_t len, size_t *mlen) {
    uint8_t b = text[i];
    int32_t best = -1;
    size_t best_len = 0;
    for (uint32_t k = t->added_first[b]; k < t->added_first[b + 1]; k++) {
        int32_t id = t->added[k];
        size_t l;
        const char *s = tok_at(t, (uint32_t)id, &l);
        if (l > best_len && l <= len - i && memcmp(s, text + i, l) == 0) {
            best = id;
            best_len = l;
        }
    }
    *mlen = best_len;
    return best;
}

recall_status rc_bpe_encode(const rc_bpe *t, const char *text, size_t len, int add_special,
                            int32_t **ids, size_t *n, recall_err *err) {
    if (!t || !ids || !n || (!text && len))
        return rc_fail(err, RECALL_E_ARG, "rc_bpe_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    enc_scratch s;
    memset(&s, 0, sizeof s);
    rc_bytebuf clean = {NULL, 0, 0};
    const uint8_t *b = (const uint8_t *)text;
    recall_status st = RECALL_OK;
    if (len && !utf8_valid(b, len)) { /* documented: invalid UTF-8 becomes U+FFFD */
        st = bb_put_lossy(&clean, b, len);
        if (st) goto out;
        b = clean.p;
        len = clean.n;
    }
    if (add_special)
        for (uint32_t k = 0; k < t->n_prefix && !st; k++) st = push_id(&s, t->prefix[k]);
    size_t span = 0, i = 0;
    while (i < len && !st) {
        size_t ml = 0;
        int32_t id = t->added_first[b[i]] < t->added_first[b[i] + 1] ? added_at(t, b, i, len, &ml) : -1;
        if (id < 0) { i++; continue; }
        st = encode_span(t, &s, b + span, i - span);
        if (!st) st = push_id(&s, id);
        i += ml;
        span = i;
    }
    if (!st) st = encode_span(t, &s, b + span, len - span);
    if (add_special)
        for (uint32_t k = 0; k < t->n_suffix && !st; k++) st = push_id(&s, t->suffix[k]);
    if (!st && !s.ids) st = push_id(&s, 0), s.n_ids = 0; /* never return NULL on success */
out:
    free(clean.p);
    if (st) {
        scratch_free(&s);
        return rc_fail(err, st, "rc_bpe_encode: out of memory");
    }
    *ids = s.ids;
    *n = s.n_ids;
    s.ids = NULL;
    scratch_free(&s);
    return RECALL_OK;
}

/* ---- decode ----------------------------------------------------------------------------- */

recall_status rc_bpe_decode(const rc_bpe *t, const int32_t *ids, size_t n, int skip_special,
                            char **text, size_t *len, recall_err *err) {
    if (!t || !text || !len || (!ids && n))
        return rc_fail(err, RECALL_E_ARG, "rc_bpe_decode: NULL argument");
    *text = NULL;
    *len = 0;
    rc_bytebuf raw = {NULL, 0, 0}, out = {NULL, 0, 0};
    recall_status st = rc_bb_put(&raw, "", 0);
    for (size_t i = 0; i < n && !st; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= t->n_ids) continue; /* HF: unknown ids are dropped */
        uint8_t k = t->tok_kind[id];
        if (k == KIND_ABSENT || (skip_special && k == KIND_SPECIAL)) continue;
        st = rc_bb_put(&raw, t->dec_pool + t->dec_off[id], t->dec_off[id + 1] - t->dec_off[id]);
    }
    if (!st) st = rc_bb_put(&out, "", 0);
    if (!st) st = bb_put_lossy(&out, raw.p, raw.n);
    free(raw.p);
    return rc_bb_take_text(&out, st, "rc_bpe_decode", text, len, err);
}

/* ---- accessors -------------------------------------------------------------------------- */

int32_t rc_bpe_token_id(const rc_bpe *t, const char *token_string) {
    if (!t || !token_string) return -1;
    return str_lookup(t, token_string, strlen(token_string));
}

const char *rc_bpe_token_str(const rc_bpe *t, int32_t id, size_t *len) {
    if (!t || id < 0 || (uint32_t)id >= t->n_ids || t->tok_kind[id] == KIND_ABSENT) return NULL;
    size_t l;
    return tok_at(t, (uint32_t)id, len ? len : &l);
}

int rc_bpe_is_special(const rc_bpe *t, int32_t id) {
    return t && id >= 0 && (uint32_t)id < t->n_ids && t->tok_kind[id] == KIND_SPECIAL;
}

int rc_bpe_is_added(const rc_bpe *t, int32_t id) {
    return t && id >= 0 && (uint32_t)id < t->n_ids && t->tok_kind[id] >= KIND_ADDED;
}

size_t rc_bpe_vocab_size(const rc_bpe *t) { return t ? t->n_ids : 0; }
