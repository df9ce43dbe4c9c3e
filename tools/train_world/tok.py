"""tok.py - the world's two tokenizers, trained here and written in Hugging Face's tokenizer.json
schema (the same as the DeepSeek-R1 and bge files the engine reads):

  Qwen2 byte-level BPE: NFC, the exact Qwen2 split pattern, ByteLevel bytes, merges by rank;
      added tokens (the DeepSeek-R1 special strings) split the text first.
  BERT WordPiece (bge): BertNormalizer (clean text, lowercase, strip accents), BertPreTokenizer
      (whitespace and punctuation), greedy longest-match WordPiece with '##' continuations.

Python's `re` has no \\p{L} / \\p{N}: the split pattern is written with the equivalent classes
for the text of this world (letters = [^\\W\\d_], numbers = \\d); train.py checks that the engine's
tokenizer gives the same ids on the whole corpus.
"""
import collections
import json
import re
import unicodedata

QWEN2_PATTERN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
_L = r"[^\W\d_]"
_NOT_LN_CRLF = r"(?:[^\w\r\n]|_)"
_NOT_S_LN = r"(?:[^\s\w]|_)"
SPLIT_RE = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|" + _NOT_LN_CRLF + "?" + _L + "+|" + r"\d|" + " ?" + _NOT_S_LN +
                      r"+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = [  # (text, special) in id order after the model vocab, as the DeepSeek-R1 tokenizer
    ("<\uff5cend\u2581of\u2581sentence\uff5c>", True),
    ("<\uff5cUser\uff5c>", False),
    ("<\uff5cAssistant\uff5c>", False),
    ("<\uff5cbegin\u2581of\u2581sentence\uff5c>", True),
    ("<|EOT|>", False),
    ("<think>", False),
    ("</think>", False),
]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def pretokenize(text):
    text = unicodedata.normalize("NFC", text)
    return ["".join(B2U[b] for b in m.group(0).encode("utf-8")) for m in SPLIT_RE.finditer(text)]


_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s, _ in SPECIALS) + ")")


def split_specials(text):
    """[(piece, is_added)]: added tokens matched in the raw text first."""
    out = []
    for i, p in enumerate(_SPECIAL_RE.split(text)):
        if p:
            out.append((p, i % 2 == 1))
    return out


class BPE:
    def __init__(self, vocab, merges):
        self.vocab = vocab  # str -> id (model vocab)
        self.merges = merges  # [(a, b)]
        self.rank = {m: i for i, m in enumerate(merges)}
        self.added = {s: len(vocab) + i for i, (s, _) in enumerate(SPECIALS)}
        self.id2tok = {i: t for t, i in vocab.items()}
        self.id2tok.update({i: s for s, i in self.added.items()})
        self.cache = {}

    def n_ids(self):
        return len(self.vocab) + len(SPECIALS)

    def _word(self, w):
        c = self.cache.get(w)
        if c is not None:
            return c
        sym = list(w)
        while len(sym) > 1:
            best, bi = None, -1
            for i in range(len(sym) - 1):
                r = self.rank.get((sym[i], sym[i + 1]))
                if r is not None and (best is None or r < best):
                    best, bi = r, i
            if best is None:
                break
            sym[bi:bi + 2] = [sym[bi] + sym[bi + 1]]
        ids = [self.vocab[s] for s in sym]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece, added in split_specials(text):
            if added:
                ids.append(self.added[piece])
            else:
                for w in pretokenize(piece):
                    ids.extend(self._word(w))
        return ids

    def decode(self, ids):
        out, buf = [], bytearray()
        for i in ids:
            t = self.id2tok[i]
            if i >= len(self.vocab):
                out.append(buf.decode("utf-8", "replace"))
                buf = bytearray()
                out.append(t)
            else:
                buf.extend(U2B[c] for c in t)
        out.append(buf.decode("utf-8", "replace"))
        return "".join(out)


def train_bpe(texts, n_merges):
    """Byte-level BPE merges learned on texts (special strings removed); ties broken by the pair
    itself so the result does not depend on dict order."""
    counts = collections.Counter()
    for t in texts:
        for piece, added in split_specials(t):
            if not added:
                counts.update(pretokenize(piece))
    words = [list(w) for w in counts]
    freq = [counts[w] for w in counts]
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += freq[wi]
            where[(a, b)].add(wi)
    alphabet = sorted(B2U.values())
    vocab = {c: i for i, c in enumerate(alphabet)}
    merges = []
    for _ in range(n_merges):
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), c = best
        if c < 2:
            break
        merges.append((a, b))
        vocab[a + b] = len(vocab)
        for wi in sorted(where.pop((a, b), ())):
            w = words[wi]
            f = freq[wi]
            for x, y in zip(w, w[1:]):
                pairs[(x, y)] -= f
                if pairs[(x, y)] <= 0:
                    del pairs[(x, y)]
                where[(x, y)].discard(wi)
            i, nw = 0, []
            while i < len(w):
                if i < len(w) - 1 and w[i] == a and w[i + 1] == b:
                    nw.append(a + b)
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            words[wi] = nw
            for x, y in zip(nw, nw[1:]):
                pairs[(x, y)] += f
                where[(x, y)].add(wi)
        pairs.pop((a, b), None)
    return BPE(vocab, merges)


def bpe_tokenizer_json(bpe):
    added = [{"id": len(bpe.vocab) + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": sp} for i, (s, sp) in enumerate(SPECIALS)]
    bos = SPECIALS[3][0]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}],
                           "special_tokens": {bos: {"id": bos, "ids": [len(bpe.vocab) + 3], "tokens": [bos]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": bpe.vocab, "merges": [[a, b] for a, b in bpe.merges]},
    }


BPE_TOKENIZER_CONFIG = {
    "add_bos_token": True, "add_eos_token": False, "bos_token": SPECIALS[3][0], "eos_token": SPECIALS[0][0],
    "pad_token": SPECIALS[0][0], "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": 16384,
    "tokenizer_class": "LlamaTokenizerFast",
}


# ---- WordPiece --------------------------------------------------------------------------------
def _is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_ws(ch):
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def bert_words(text):
    """BertNormalizer (clean_text, lowercase, strip accents) + BertPreTokenizer."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        out.append(" " if _is_ws(ch) else ch)
    t = "".join(out).lower()
    t = "".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn")
    words = []
    for w in t.split():
        cur = ""
        for ch in w:
            if _is_punct(ch):
                if cur:
                    words.append(cur)
                    cur = ""
                words.append(ch)
            else:
                cur += ch
        if cur:
            words.append(cur)
    return words


class WordPiece:
    SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

    def __init__(self, tokens):
        self.tokens = tokens
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.cache = {}

    def _word(self, w):
        c = self.cache.get(w)
        if c is not None:
            return c
        if len(w) > 100:
            ids = [1]
        else:
            ids, start = [], 0
            while start < len(w):
                end, cur = len(w), None
                while start < end:
                    s = w[start:end] if start == 0 else "##" + w[start:end]
                    if s in self.vocab:
                        cur = self.vocab[s]
                        break
                    end -= 1
                if cur is None:
                    ids = [1]
                    break
                ids.append(cur)
                start = end
        self.cache[w] = ids
        return ids

    def encode(self, text, max_len=512):
        ids = [2]
        for w in bert_words(text):
            ids.extend(self._word(w))
        ids = ids[:max_len - 1]
        return ids + [3]


def train_wordpiece(texts, size, pieces=0.0):
    """Special tokens, every character (alone and as '##' continuation), then whole words by
    frequency; with pieces > 0 that share of the rest goes first to word pieces (prefixes of 2-6
    letters, '##' endings of 2-5), so that a word not in the vocabulary splits into a few pieces."""
    counts = collections.Counter()
    for t in texts:
        counts.update(bert_words(t))
    chars = sorted({c for w in counts for c in w})
    toks = list(WordPiece.SPECIAL) + chars + ["##" + c for c in chars]
    seen = set(toks)
    cand = collections.Counter()
    for w, c in counts.items():
        for k in range(2, min(6, len(w) - 1) + 1):
            cand[w[:k]] += c
        for k in range(2, min(5, len(w) - 1) + 1):
            cand["##" + w[-k:]] += c
    n_pieces = int((size - len(toks)) * pieces)
    for p, _ in sorted(cand.items(), key=lambda kv: (-kv[1], kv[0]))[:n_pieces]:
        if p not in seen:
            toks.append(p)
            seen.add(p)
    for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(toks) >= size:
            break
        if w not in seen and len(w) > 1:
            toks.append(w)
            seen.add(w)
    return WordPiece(toks)


def wp_tokenizer_json(wp):
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, s in enumerate(WordPiece.SPECIAL)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": wp.vocab},
    }


WP_TOKENIZER_CONFIG = {
    "backend": "tokenizers", "cls_token": "[CLS]", "do_lower_case": True, "mask_token": "[MASK]",
    "model_max_length": 512, "pad_token": "[PAD]", "sep_token": "[SEP]", "strip_accents": None,
    "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]",
}


def dump_json(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")
