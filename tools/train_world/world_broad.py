"""world_broad.py - the world of broad English (train.py --world broad): keywords and values of many
kinds, facts and questions in several phrasings, casual talk from WordNet's sentences (lexicon.py).
The dialogue shapes, the reply and the chat template are world.py's; this file only draws what
goes into them. Everything is drawn from random.Random(seed): the same seed gives the same text.

Held out (never in training, only in the evaluation files train.py writes): one dictionary word,
name and WordNet sentence in five (lexicon.held), the heads and owners of keywords that lexicon.held
marks, a whole list of names (HELD_NAMES), a whole kind of value (every time of day), the ISO date
form, and two phrasings of the fact and of the question.
"""
import random

import lexicon
import world
from world import FACT_ASSISTANT, FACT_USER, QUESTION_USER, Phrasing

# ---- phrasings -------------------------------------------------------------------------------
# Each fact is " is {val}." in every phrasing: the value is what follows the keyword and " is" in
# the fact, and the full stop ends it, whatever the words around them. The benchmark's own
# templates (FACT_USER, QUESTION_USER) are among the training phrasings; HELD_* are never trained
# (eval_phrasing.json asks in them).
# The training phrasings are a small grammar rather than a list: a lead-in, the fact or the
# question proper, a tail ("Quick — " + "what was the {kw}?" + " Just the value."), every
# combination of them. A list of ten was learned by heart (the first broad world answered 0 of 60
# questions in two phrasings it had not seen: it took them for small talk); thousands of
# combinations leave the model only what they share (a keyword that was stated, asked back).
# The benchmark's own templates (FACT_USER, QUESTION_USER) come first and stay the most frequent.
FACT_LEADS = ["", "Please remember that ", "Just so you know, ", "Note this down: ", "For later, ",
              "Remember this for me: ", "By the way, ", "Could you keep this in mind? ", "Heads up, ", "Okay, so ",
              "FYI, ", "Quick note: ", "Oh, and ", "Keep in mind that ", "I want you to remember that ",
              "Write this down: ", "Also, ", "So ", "Hey, ", "Listen, ", "For the record, ", "Save this for me: ",
              "You should know that ", "In case I forget, ", "Small thing: ", "Good to know: ", "Important: "]
FACT_OWNS = ["the", "my"]
FACT_TAILS = ["", "", "", " Thanks!", " Thank you.", " Okay?", " Got that?", " That's important.",
              " Please don't forget it."]
QUESTION_LEADS = ["", "", "", "Quick \u2014 ", "Sorry, ", "Hey, ", "Okay, ", "So, ", "One more thing: ", "Hmm, ",
                  "Wait, ", "By the way, ", "Oh, ", "Real quick, ", "Also, ", "Now, "]
QUESTION_CORES = ["what was the {kw}?", "what was the {kw} again?", "what is my {kw}?", "what's the {kw}?",
                  "what's my {kw} again?", "do you remember the {kw}?", "do you remember my {kw}?",
                  "can you remind me of my {kw}?", "remind me of the {kw}.", "remind me, what was the {kw}?",
                  "tell me the {kw}, please.", "what did I say the {kw} was?", "what did I tell you my {kw} was?",
                  "can you tell me the {kw}?", "I need the {kw}.", "I need my {kw} now.",
                  "could you give me the {kw}?", "what {kw} did I mention?", "what was the {kw} I mentioned?",
                  "do you know my {kw}?", "give me the {kw}.", "the {kw}, what was it?", "what was that {kw}?",
                  "do you still have my {kw}?", "what {kw} did I tell you?", "can I get the {kw}?",
                  "please repeat the {kw}.", "what's the {kw} I gave you?", "which {kw} was it?",
                  "recall the {kw} for me.", "what was the {kw} I told you about?", "look up my {kw}, please."]
QUESTION_TAILS = ["", "", "", " Just the value.", " Thanks.", " I need it now.", " Just the answer, please."]
# never trained: eval_phrasing.json asks in the first of each; typed.sh's facts use others
HELD_FACT_TEMPLATES = ["Don't let me forget: the {kw} is {val}.", "I should tell you that my {kw} is {val}.",
                       "Make a note that the {kw} is {val}.", "Before I forget, my {kw} is {val}."]
HELD_QUESTION_TEMPLATES = ["I forgot the {kw}. What was it?", "Which {kw} did I give you earlier?",
                           "Any idea what my {kw} is?", "What did I note as the {kw}?", "Could you find the {kw} for me?"]
FACT_REPLIES = [FACT_ASSISTANT, FACT_ASSISTANT, "Okay, I will remember that.", "Noted.", "Sure, I have it.",
                "Got it.", "All right, I have noted it.", "Thanks, I will keep it in mind."]


def _join(lead, body):
    """lead + body, the body's first letter a capital where it starts the sentence."""
    if lead == "" or lead.endswith("? ") or lead.endswith(". "):
        body = body[0].upper() + body[1:]
    return lead + body


def _grammar(leads, bodies, tails, first, held):
    out, seen = [first], {first} | set(held)
    for lead in leads:
        for b in bodies:
            for t in tails:
                s = _join(lead, b) + t
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


FACT_TEMPLATES = _grammar(FACT_LEADS, [o + " {kw} is {val}." for o in FACT_OWNS], FACT_TAILS, FACT_USER,
                          HELD_FACT_TEMPLATES)
QUESTION_TEMPLATES = _grammar(QUESTION_LEADS, QUESTION_CORES, QUESTION_TAILS, QUESTION_USER, HELD_QUESTION_TEMPLATES)


def training_phrasing(r):
    return Phrasing(r, FACT_TEMPLATES, QUESTION_TEMPLATES, FACT_REPLIES)


# ---- keywords ----------------------------------------------------------------------------------
# A keyword is what a person calls a fact: a head ("password", "flight number") with up to two
# owners ("my sister's", "the gym"): "sister's flight number", "gym locker code". Heads and owners
# marked by lexicon.held never occur in training; the evaluation's keywords each hold one of them.
HEADS = ["name", "number", "code", "password", "pin", "address", "time", "date", "day", "color", "id", "key",
         "combination", "plate", "gate", "seat", "room", "table", "ticket", "order number", "account number",
         "phone number", "extension", "zip code", "tracking number", "booking reference", "nickname", "birthday",
         "favorite food", "favorite song", "street", "city", "hometown", "username", "wifi password", "platform",
         "bus number", "parking spot", "shoe size", "blood type", "license plate", "postcode", "badge number",
         "door code", "locker number", "flight number", "meeting time", "appointment", "confirmation code",
         "middle name", "last name", "maiden name", "pet's name", "favorite movie", "lucky number", "serial number",
         "member number", "invoice number", "alarm code", "safe combination", "table number", "room number"]
OWNERS = ["dentist's", "doctor's", "sister's", "brother's", "mom's", "dad's", "boss's", "neighbor's", "friend's",
          "landlord's", "cousin's", "teacher's", "dog's", "cat's", "wife's", "husband's", "son's", "daughter's",
          "aunt's", "uncle's", "grandma's", "partner's", "coach's", "plumber's", "lawyer's", "tutor's",
          "hotel", "gym", "office", "bank", "library", "garage", "train", "bus", "meeting", "dinner", "conference",
          "school", "car", "bike", "house", "apartment", "project", "team", "club", "server", "laptop", "phone",
          "locker", "storage", "warehouse", "museum", "clinic", "pharmacy", "bakery", "studio", "cabin", "ferry",
          "harbor", "station", "parking", "vault", "shop", "camp", "hospital", "airport", "concert", "wedding",
          "restaurant", "church", "garden", "pool", "theater", "printer", "router", "account", "invoice", "package"]


def _kw_parts(split):
    want = split == "eval"
    return ([h for h in HEADS if lexicon.held(h) == want] if want else [h for h in HEADS if not lexicon.held(h)],
            [o for o in OWNERS if lexicon.held(o) == want] if want else [o for o in OWNERS if not lexicon.held(o)])


def draw_keyword(r, lex, split="train"):
    """A keyword. Training: trained heads and owners, or a random trained dictionary word as an
    owner ("the lantern code": the model must copy any keyword, not recite a list). Evaluation: a
    held-out head or owner beside a trained one, or a held-out dictionary word."""
    h_tr, o_tr = _kw_parts("train")
    h_ev, o_ev = _kw_parts("eval")
    words = lex.words_tr if split == "train" else lex.words_ev
    k = r.random()
    if split == "train":
        if k < 0.15:
            return r.choice(h_tr)
        if k < 0.3:
            return r.choice(words) + " " + r.choice(h_tr)
        if k < 0.45:
            o1, o2 = r.sample([o for o in o_tr if o.endswith("'s")], 1)[0], r.choice([o for o in o_tr if not o.endswith("'s")])
            return o1 + " " + o2 + " " + r.choice(h_tr)
        return r.choice(o_tr) + " " + r.choice(h_tr)
    if k < 0.3:
        return r.choice(o_tr) + " " + r.choice(h_ev)
    if k < 0.6:
        return r.choice(o_ev) + " " + r.choice(h_tr + h_ev)
    if k < 0.8:
        return r.choice(words) + " " + r.choice(h_tr)
    return r.choice(h_ev)


# ---- values ------------------------------------------------------------------------------------
# Kinds of value. "time" (every time of day) and the ISO date form are never trained: the
# evaluation reports them per kind to show the copy does not depend on having seen the kind.
KINDS = ["name", "word", "phrase", "number", "code", "date", "time"]
HELD_KINDS = ["time"]
# one list of names held out whole: none of them, nor any of their spellings, is trained
HELD_NAMES = ["Halvorsen", "Okonkwo", "Nakamura", "Fitzgerald", "Delacroix", "Kowalski", "Abernathy", "Lindqvist",
              "Moreau", "Castellano", "Ivanova", "Oyelaran", "Brennan", "Takahashi", "Vasquez", "Lachance",
              "Dubrovsky", "Whitcombe", "Ferreira", "Sorensen", "Mbeki", "Gallagher", "Ravensworth", "Petrakis",
              "Quintero", "Haverford", "Bellweather", "Strachan", "Yilmaz", "Achterberg", "Montgomery", "Esposito"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ"
LOWER = "abcdefghijkmnpqrstuvwxyz"


def _digits(r, n, lead=True):
    return (r.choice("123456789") if lead else r.choice("0123456789")) + "".join(r.choice("0123456789") for _ in range(n - 1))


def _code(r):
    shape = r.randrange(12)
    if shape == 0:   # flight-number-like: LH 2214
        return "".join(r.choice(UPPER) for _ in range(2)) + " " + _digits(r, r.randint(2, 4))
    if shape == 1:   # XK-4471
        return "".join(r.choice(UPPER) for _ in range(r.randint(1, 3))) + "-" + _digits(r, r.randint(2, 5), False)
    if shape == 2:   # a7F9q: mixed case and digits
        return "".join(r.choice(r.choice([UPPER, LOWER, "0123456789"])) for _ in range(r.randint(4, 7)))
    if shape == 3:   # 4821-B
        return _digits(r, r.randint(2, 4)) + "-" + r.choice(UPPER)
    if shape == 4:   # 12-34-56
        return "-".join(_digits(r, 2, False) for _ in range(r.randint(2, 3)))
    if shape == 5:   # R266
        return r.choice(UPPER) + _digits(r, r.randint(2, 4))
    if shape == 6:   # ab-12 cd
        return "".join(r.choice(LOWER) for _ in range(2)) + "-" + _digits(r, 2) + " " + "".join(r.choice(LOWER) for _ in range(2))
    if shape == 7:   # QXR42
        return "".join(r.choice(UPPER) for _ in range(3)) + _digits(r, r.randint(1, 3))
    # the punctuation a value may hold besides hyphens and spaces, so that the copy has been
    # through each of them (none of these reads as a time of day, the kind held out)
    if shape == 8:   # K9:447, 12:7:31
        return (r.choice(UPPER) + _digits(r, 1) if r.random() < 0.5 else _digits(r, 2)) + ":" + \
            ":".join(_digits(r, r.choice([1, 3]), False) for _ in range(r.randint(1, 2)))
    if shape == 9:   # v2.4.1, 3.14
        return r.choice(["v", ""]) + ".".join(_digits(r, r.randint(1, 2), False) for _ in range(r.randint(2, 3)))
    if shape == 10:  # #4471, A/7
        return r.choice(["#" + _digits(r, r.randint(2, 5)), r.choice(UPPER) + "/" + _digits(r, r.randint(1, 3))])
    return "".join(r.choice(LOWER) for _ in range(r.randint(2, 4))) + "_" + _digits(r, r.randint(2, 4))  # ab_12


def draw_value(r, lex, kind, split="train"):
    """A value of the given kind; split "eval" draws held-out words and names, and the held-out
    kinds and forms."""
    ev = split == "eval"
    if kind == "name":
        return r.choice(HELD_NAMES) if ev else r.choice(lex.names_tr)
    if kind == "word":
        return r.choice(lex.words_ev if ev else lex.words_tr)
    if kind == "phrase":
        ws = lex.words_ev if ev else lex.words_tr
        return r.choice(ws) + " " + r.choice(ws)
    if kind == "number":
        return _digits(r, r.randint(1, 8))
    if kind == "code":
        return _code(r)
    if kind == "date":
        k = r.randrange(4 if ev else 3)
        m, d = r.randrange(12), r.randint(1, 28)
        if k == 0:
            return "%s %d" % (MONTHS[m], d)
        if k == 1:
            return "%d %s" % (d, MONTHS[m])
        if k == 2:
            return "%02d/%02d/%d" % (m + 1, d, r.randint(1950, 2035))
        return "%d-%02d-%02d" % (r.randint(1950, 2035), m + 1, d)  # ISO: held out
    if kind == "time":
        h, mi = r.randint(0, 23), r.choice([0, 5, 10, 15, 20, 30, 40, 45, 50, 55])
        k = r.randrange(3)
        if k == 0:
            return "%d:%02d" % (h, mi)
        if k == 1:
            return "%d:%02d %s" % ((h % 12) or 12, mi, "am" if h < 12 else "pm")
        return "%d %s" % ((h % 12) or 12, "am" if h < 12 else "pm")
    raise ValueError(kind)


def value_kind(val):
    """The kind a value reads as (answers.py reports per kind): the inverse of draw_value."""
    import re
    if val in HELD_NAMES or re.fullmatch(r"[A-Z][a-z]+", val):
        return "name"
    if re.fullmatch(r"\d{1,2}(:\d\d)?( am| pm)?", val) and (":" in val or " " in val):
        return "time"
    if re.fullmatch(r"[a-z]+", val):
        return "word"
    if re.fullmatch(r"[a-z]+ [a-z]+", val):
        return "phrase"
    if re.fullmatch(r"\d{1,8}", val):
        return "number"
    if re.fullmatch(r"(\w+ \d{1,2}|\d{1,2} \w+|\d\d/\d\d/\d{4}|\d{4}-\d\d-\d\d)", val) and any(m in val for m in MONTHS) \
            or re.fullmatch(r"\d\d/\d\d/\d{4}|\d{4}-\d\d-\d\d", val):
        return "date"
    return "code"


def train_kind(r):
    return r.choice([k for k in KINDS if k not in HELD_KINDS])


# ---- casual talk ---------------------------------------------------------------------------
# the small talk of world.py, with more ways to answer and more to say
ADJ = world.ADJ + ["interesting", "good"]
REPLY1 = world.REPLY1 + ["Thanks for telling me.", "Interesting!", "I see.", "Fair enough."]
REPLY2 = world.REPLY2 + ["There is always something new to learn about things like that.",
                         "It is funny how the small details are the ones we remember."]
REPLY3 = world.REPLY3 + ["What do you think about it?", "Tell me more if you like."]
USER_T = world.USER_T + ["How was your day?", "Do you have any plans for {when2}?", "What do you think about {topic}?",
                         "I might try something new {when2}.", "Do you remember the last time it snowed like this?"]
WHEN2 = ["the weekend", "tonight", "tomorrow", "next week", "the holidays"]


def casual_reply(r):
    return " ".join([r.choice(REPLY1).format(adj=r.choice(ADJ)), r.choice(REPLY2), r.choice(REPLY3)])


def casual_pair(r, lex=None, split="train"):
    """A casual exchange: the user's line is a WordNet example sentence (2 in 3, when a lexicon is
    given) or one of the templated small-talk lines; the reply is small talk."""
    if lex is not None and r.random() < 0.67:
        u = r.choice(lex.sents_tr if split == "train" else lex.sents_ev)
    else:
        u = r.choice(USER_T).format(act=r.choice(world.ACT), when=r.choice(world.WHEN), subj=r.choice(world.SUBJ),
                                    topic=r.choice(world.TOPIC), feel=r.choice(world.FEEL), when2=r.choice(WHEN2))
        u = u[0].upper() + u[1:]
    return u, casual_reply(r)


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
        import world_wide
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
            import world_wide
            return [world_wide.wide_casual_pair(r, self.lex) if r.random() < self.wide else casual_pair(r, self.lex)
                    for _ in range(n)]
        return [casual_pair(r, self.lex) for _ in range(n)]

    def phrasing(self, r):
        if self.wide:
            import world_wide
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
