"""lexicon.py - the broad English the world is trained on, read from two Debian packages:

  wamerican     /usr/share/dict/american-english: 100k English words (lowercase words and capitalised
                names and places); licence: public domain / free (the SCOWL word lists, see the
                package's copyright file).
  wordnet-base  /usr/share/wordnet/data.*: the example sentences of WordNet 3.0 glosses ("he sat still
                as a statue"), about 29k after filtering; licence: the WordNet 3.0 licence (free use,
                copy and distribution with the copyright notice; Princeton University).

Everything is read in a fixed order and split by a stable hash (zlib.crc32), so the same packages
give the same lists on every machine. `held(s)` decides what the evaluation alone may use: one word,
name or sentence in five never occurs in training (train.py World).
"""
import os
import re
import zlib

DICT = "/usr/share/dict/american-english"
WORDNET = "/usr/share/wordnet"


def held(s, k=5):
    """True for the 1 in k strings held out of training (stable across machines and runs)."""
    return zlib.crc32(s.encode("utf-8")) % k == 0


def _need(path, pkg):
    if not os.path.exists(path):
        raise SystemExit("train_world: %s is missing: apt-get install -y %s (tools/need.sh does)" % (path, pkg))


def dictionary():
    """(lowercase words of 3-10 letters, capitalised names of 3-10 letters), sorted."""
    _need(DICT, "wamerican")
    words, names = set(), set()
    with open(DICT, encoding="utf-8", errors="replace") as f:
        for w in f:
            w = w.strip()
            if re.fullmatch(r"[a-z]{3,10}", w):
                words.add(w)
            elif re.fullmatch(r"[A-Z][a-z]{2,9}", w):
                names.add(w)
    return sorted(words), sorted(names)


def sentences():
    """WordNet's example sentences that read as something a person says in a chat: 5-16 words,
    ASCII, no brackets or markup, starting with a letter; capitalised and ended with a full stop
    (or their own ? / !). Sorted, deduplicated."""
    _need(os.path.join(WORDNET, "data.noun"), "wordnet-base")
    out = set()
    for part in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(WORDNET, "data." + part), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                for s in re.findall(r'"([^"]+)"', line.split("|", 1)[1]):
                    s = s.strip()
                    if not (5 <= len(s.split()) <= 16) or not s[0].isalpha():
                        continue
                    if any(not (32 <= ord(c) < 127) for c in s) or re.search(r"[;()\[\]{}<>|_*=/\\$%&#@~`^+]", s):
                        continue
                    if "--" in s or "'" in s[:1] or "magic number" in s.lower():
                        continue
                    s = s[0].upper() + s[1:]
                    if s[-1] not in ".?!":
                        s += "."
                    out.add(s)
    return sorted(out)
