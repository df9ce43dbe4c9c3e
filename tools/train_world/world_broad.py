"""world_broad.py - the world of broad English (train.py --world broad): keywords and values of many
kinds, facts and questions in several phrasings, casual talk from WordNet's sentences (lexicon.py).
The dialogue shapes, the reply and the chat template are world.py's; the keywords, values,
phrasings and casual talk are world_common.py's (importable from here too, as before); this file
draws dialogues from them (BroadWorld), a share of them in world_wide.py's wording when `wide` is
set, and holds the demo's dialogue. Everything is drawn from random.Random(seed): the same seed
gives the same text. Imports go one way: world -> world_common -> world_wide -> world_broad.

Held out (never in training, only in the evaluation files train.py writes): one dictionary word,
name and WordNet sentence in five (lexicon.held), the heads and owners of keywords that lexicon.held
marks, a whole list of names (HELD_NAMES), a whole kind of value (every time of day), the ISO date
form, and two phrasings of the fact and of the question.
"""
import random

import lexicon
import world
import world_wide
from world import FACT_ASSISTANT, FACT_USER, QUESTION_USER, Phrasing  # noqa: F401
from world_common import (  # noqa: F401  (the broad grammar, importable from here as before)
    FACT_LEADS, FACT_OWNS, FACT_TAILS, QUESTION_LEADS, QUESTION_CORES, QUESTION_TAILS, HELD_FACT_TEMPLATES,
    HELD_QUESTION_TEMPLATES, FACT_REPLIES, _join, _grammar, FACT_TEMPLATES, QUESTION_TEMPLATES,
    training_phrasing, HEADS, OWNERS, _kw_parts, draw_keyword, KINDS, HELD_KINDS, HELD_NAMES, MONTHS, UPPER,
    LOWER, _digits, _code, draw_value, value_kind, train_kind, ADJ, REPLY1, REPLY2, REPLY3, USER_T, WHEN2,
    casual_reply, casual_pair,
)


# ---- the world: training draws and the evaluation files ---------------------------------
class BroadWorld:
    """Facts, casual pairs and the evaluation benches. Training draws keywords, values and casual
    lines from the training side of the lexicon (lexicon.py, world.py); the evaluation facts use
    held-out keywords, held-out words and names, and the held-out kinds of value, and never a value
    that training draws."""

    EVAL_KINDS = ["name"] * 4 + ["word"] * 4 + ["phrase"] * 3 + ["number"] * 5 + ["code"] * 6 + ["date"] * 4 + \
                 ["time"] * 6

    def __init__(self, seed):
        self.lex = Lex()
        r = random.Random(seed * 7919 + 1)
        self.eval_facts, vals, kws = [], set(), set()
        for kind in self.EVAL_KINDS:
            kw = draw_keyword(r, self.lex, "eval")
            while kw in kws:
                kw = draw_keyword(r, self.lex, "eval")
            v = draw_value(r, self.lex, kind, "eval")
            while v in vals:
                v = draw_value(r, self.lex, kind, "eval")
            kws.add(kw)
            vals.add(v)
            self.eval_facts.append([kw, v])
        self.eval_values = vals
        self.eval_casual = world.distinct_casual(lambda: casual_pair(r, self.lex, "eval"))
        self.rng = random.Random(seed * 104729 + 2)

    def train_value(self, r):
        while True:
            v = draw_value(r, self.lex, train_kind(r))
            if v not in self.eval_values:
                return v

    # train.py --wording wide sets this (after the tokenizers are built from the grammar's text, so
    # the BPE stays the committed world's): the share of facts drawn as world_wide frames, the rest
    # keep world_broad's keywords (worded either way: world_wide.WidePhrasing); small talk is
    # world_wide's for that share too
    wide = 0.0

    def train_facts(self, r, n=12):
        if self.wide:
            return self._wide_facts(r, n)
        kws = set()
        while len(kws) < n:
            kws.add(draw_keyword(r, self.lex))
        return [(k, self.train_value(r)) for k in sorted(kws)]

    def _wide_facts(self, r, n):
        out = {}
        while len(out) < n:
            if r.random() < self.wide:
                k, v = world_wide.draw_frame(r, self.lex)
                if v in self.eval_values:
                    continue
            else:
                v = self.train_value(r)
                k = world_wide.Key(draw_keyword(r, self.lex))
            if k not in out:
                out[k] = v
        return sorted(out.items())

    def train_casual(self, r, n=16):
        if self.wide:
            return [world_wide.wide_casual_pair(r, self.lex) if r.random() < self.wide else casual_pair(r, self.lex)
                    for _ in range(n)]
        return [casual_pair(r, self.lex) for _ in range(n)]

    def phrasing(self, r):
        if self.wide:
            return world_wide.WidePhrasing(r, self.lex)
        return training_phrasing(r)

    def language(self):
        """Texts of the language at large for the tokenizers: WordNet's training sentences, and every
        word of the dictionary once (a real tokenizer has seen every word; the decoder has not)."""
        lang = [" ".join(self.lex.sents_tr[i:i + 200]) for i in range(0, len(self.lex.sents_tr), 200)]
        return lang + [" " + " ".join(self.lex.all_words[i:i + 500]) for i in range(0, len(self.lex.all_words), 500)]

    def bench_json(self, phrasing=False):
        """The held-out benchmark (eval_bench.json: the benchmark's own templates) or the same facts
        asked in the held-out phrasings (eval_phrasing.json)."""
        fu, qu = world.FACT_USER, world.QUESTION_USER
        desc = ("Held-out multi-fact recall benchmark of the trained world (tools/train_world): keywords with "
                "held-out words, held-out names and words as values, kinds of value never trained (times of day, "
                "ISO dates), casual lines from held-out WordNet sentences; problems are built as in "
                "recall_bench.json (random.Random(i)).")
        if phrasing:
            fu, qu = HELD_FACT_TEMPLATES[0], HELD_QUESTION_TEMPLATES[0]
            desc += " Facts and questions are worded in phrasings never trained."
        return {"description": desc, "fact_user": fu, "fact_assistant": world.FACT_ASSISTANT, "question_user": qu,
                "facts": self.eval_facts, "casual": self.eval_casual,
                "kinds": [value_kind(v) for _, v in self.eval_facts]}


class Lex:
    """The lexicon split into its training and held-out sides (lexicon.held)."""

    def __init__(self):
        words, names = lexicon.dictionary()
        sents = lexicon.sentences()
        self.words_tr = [w for w in words if not lexicon.held(w)]
        self.words_ev = [w for w in words if lexicon.held(w)]
        self.names_tr = [n for n in names if not lexicon.held(n) and n not in HELD_NAMES]
        self.sents_tr = [s for s in sents if not lexicon.held(s)]
        self.sents_ev = [s for s in sents if lexicon.held(s)]
        self.all_words = words + names


# ---- the demo dialogue (`make demo`) ------------------------------------------------------
# A chat as a person would write it, in the benchmark's file format (one problem: its three facts
# are asked in random.Random(0)'s order). Its words are the world's held-out ones where they can be
# (the dentist's name, the flight number, a time of day), its casual lines written for it.
DEMO_BENCH = {
    "description": "make demo's dialogue: three facts a person tells an assistant, eleven lines of small talk, "
                   "then the three questions (the format of recall_bench.json, problem 0).",
    "fact_user": "Just so you know, my {kw} is {val}.",
    "fact_assistant": "Got it, noted.",
    "question_user": "What was my {kw} again?",
    # problem 0 states facts 6, 11 and 0 (random.Random(0).sample(range(12), 3)); the others are
    # there because the file format holds 12 to 32 facts
    "facts": [["meeting time", "14:30"], ["wifi password", "blue-otter-42"], ["sister's birthday", "March 14"],
              ["parking spot", "B17"], ["cat's name", "Biscuit"], ["gate code", "4471"], ["dentist's name", "Halvorsen"],
              ["locker combination", "12-34-56"], ["hotel room number", "418"], ["booking reference", "QX-5521"],
              ["favorite color", "teal"], ["flight number", "LH 2214"]],
    "casual": [
        ["How is your week going so far?", "Pretty good, thanks for asking. It has been a steady week. How about yours?"],
        ["I finally finished painting the kitchen last night.", "That sounds great! A fresh coat of paint can make a room "
         "feel new. What color did you pick?"],
        ["The weather has been strange lately, warm one day and cold the next.", "I know what you mean. It is hard to "
         "know what to wear on days like that."],
        ["We are thinking about getting a dog, maybe a small one.", "Oh, how lovely. A dog can be wonderful company. "
         "Have you looked at any yet?"],
        ["My brother is visiting next month.", "That sounds nice! It is good to see family. Do you have plans together?"],
        ["I tried a new recipe for lentil soup and it turned out great.", "That sounds wonderful. Soup is perfect for "
         "this time of year. Would you make it again?"],
        ["Work has been busy, but I am managing.", "Good to hear you are managing. Busy weeks pass, and the weekend "
         "is not far."],
        ["I started reading a mystery novel before bed.", "What a nice habit. A good mystery makes it hard to stop "
         "reading. Is it any good so far?"],
        ["The neighbors planted a big garden this spring.", "That sounds pleasant. A garden next door is nice to look "
         "at. What are they growing?"],
        ["I went for a long walk by the river this morning.", "That sounds peaceful. A walk by the water is a good start "
         "to the day."],
        ["My phone has been acting up all week.", "That sounds annoying. Sometimes a restart helps. Is it an old "
         "phone?"],
        ["I have been trying to drink more water lately.", "That is a good habit. It is easy to forget during a busy "
         "day. Do you keep a bottle with you?"],
    ],
}
