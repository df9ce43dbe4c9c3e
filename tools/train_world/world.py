"""world.py - the world the trained model lives in: keywords and values of many kinds, facts and
questions in several phrasings, casual talk from broad English (lexicon.py: WordNet's example
sentences), multi-turn dialogues built like tests/golden/recall_bench.json, and long-context needle
prompts built like src/longctx.c. Everything is drawn from random.Random(seed): the same seed gives
the same text.

Held out (never in training, only in the evaluation files train.py writes): one dictionary word,
name and WordNet sentence in five (lexicon.held), the heads and owners of keywords that lexicon.held
marks, a whole list of names (HELD_NAMES), a whole kind of value (every time of day), the ISO date
form, and two phrasings of the fact and of the question.
"""
import random

import lexicon

FACT_USER = "Important to note: the {kw} is {val}."
FACT_ASSISTANT = "Got it, noted."
QUESTION_USER = "Quick \u2014 what was the {kw} I mentioned? Just the value."
# The reply to a question: a think preamble long enough that the loop's gate check lands after
# the question is readable and before the value is written (train.py: CHUNK, BLOCK), then the value.
THINK_HEAD = ("<think>The user asks for a value that was stated earlier in our chat. I look back for it and copy it "
              "exactly, character by character")
THINK = THINK_HEAD + ".</think>"
UNKNOWN = "I don't know."
# How the reply names the value (train.py --form):
#   plain    THINK " {val}"
#   reprise  THINK_HEAD ": the {kw} is</think> {val}"
#   recopy   THINK_HEAD ": the {kw} is {val}.</think> {val}"
# reprise and recopy restate the keyword right before the value, in the fact's own words, so the
# value is what follows "the {kw} is" in the fact: an n-gram copy (an induction head), not a
# lookup through the question 30 tokens back. recopy writes it inside the think exactly as the fact
# has it (" is {val}.") and then copies it once more after </think>, where `recall longctx` reads
# the answer.
FORM = "recopy"


def reply_parts(kw, val, form=None):
    """(think, tail) of the reply to a question on kw: the think part is the same for every
    question; the tail (restated keyword and value, weighted in the loss) starts where the value's
    lookup starts. val None: the fact was never stated / is not in view. Values are written as
    " " + value so that their BPE tokens are exactly those they have in the fact (" is {val}."):
    byte-level BPE merges a leading space into a word's first piece (" k" vs "k") and splits it
    from digits (" ", "4"). (`recall longctx` strips the space; `recall eval` matches a substring.)"""
    form = form or FORM
    if form == "plain":
        return THINK, (" " + val if val is not None else UNKNOWN)
    if form == "reprise":
        return THINK_HEAD, ": the %s is</think>" % kw + (" " + val if val is not None else UNKNOWN)
    if val is None:
        return THINK_HEAD, ": the %s is unknown.</think>%s" % (kw, UNKNOWN)
    return THINK_HEAD, ": the %s is %s.</think> %s" % (kw, val, val)


RECITE_USER = "Please list everything I asked you to note."
RECITE_HEAD = "Sure:"

# ---- phrasings -------------------------------------------------------------------------------
# Each fact is " is {val}." in every phrasing: the value is what follows the keyword and " is" in
# the fact, and the full stop ends it, whatever the words around them. The benchmark's own
# templates (FACT_USER, QUESTION_USER) are among the training phrasings; HELD_* are never trained
# (eval_phrasing.json asks in them).
FACT_TEMPLATES = [
    FACT_USER,
    "Please remember that the {kw} is {val}.",
    "Just so you know, my {kw} is {val}.",
    "Note this down: the {kw} is {val}.",
    "For later, the {kw} is {val}.",
    "Remember this for me: my {kw} is {val}.",
    "By the way, the {kw} is {val}.",
    "Could you keep this in mind? The {kw} is {val}.",
    "My {kw} is {val}.",
    "Heads up, the {kw} is {val}.",
    "Okay, so the {kw} is {val}.",
]
HELD_FACT_TEMPLATES = ["Don't let me forget: the {kw} is {val}.", "I should tell you that my {kw} is {val}."]
FACT_REPLIES = [FACT_ASSISTANT, FACT_ASSISTANT, "Okay, I will remember that.", "Noted.", "Sure, I have it.",
                "Got it."]
QUESTION_TEMPLATES = [
    QUESTION_USER,
    "What was the {kw} again?",
    "Do you remember the {kw}?",
    "Can you remind me of my {kw}?",
    "What is my {kw}?",
    "Remind me, what was the {kw}?",
    "Sorry, what did I say the {kw} was?",
    "Tell me the {kw}, please.",
    "What's the {kw}?",
]
HELD_QUESTION_TEMPLATES = ["I forgot the {kw}. What was it?", "Which {kw} did I give you earlier?"]


class Phrasing:
    """How facts and questions are worded: the benchmark's templates (bench=True) or a random
    training phrasing per turn (the benchmark's own at a higher weight)."""

    def __init__(self, r=None, facts=None, questions=None, replies=None):
        self.r = r
        self.facts = facts or [FACT_USER]
        self.questions = questions or [QUESTION_USER]
        self.replies = replies or [FACT_ASSISTANT]

    def _pick(self, xs):
        if self.r is None or len(xs) == 1:
            return xs[0]
        return xs[0] if self.r.random() < 0.3 else self.r.choice(xs)

    def fact(self, kw, val):
        return self._pick(self.facts).format(kw=kw, val=val), self._pick(self.replies)

    def question(self, kw):
        return self._pick(self.questions).format(kw=kw)


BENCH = Phrasing()


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
    shape = r.randrange(8)
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
    return "".join(r.choice(UPPER) for _ in range(3)) + _digits(r, r.randint(1, 3))


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
SUBJ = ["my sister", "my neighbor", "my friend", "my boss", "my cousin", "my brother", "a coworker", "my roommate"]
ACT = ["went hiking", "baked bread", "painted the fence", "tried a new cafe", "watched an old movie",
       "cleaned the attic", "started a garden", "went to a concert", "read a long novel", "fixed the bike",
       "visited the coast", "learned to knit", "cooked a big dinner", "walked the dog", "played chess",
       "went for a swim", "planted some tomatoes", "bought a new lamp", "took a pottery class", "went fishing"]
WHEN = ["this morning", "yesterday", "last weekend", "on Sunday", "after work", "last night", "today",
        "earlier this week"]
FEEL = ["really relaxing", "a bit tiring", "so much fun", "pretty calm", "quite busy", "surprisingly nice",
        "a little chaotic", "very peaceful"]
TOPIC = ["the weather", "the traffic", "the news", "my plans", "the weekend", "the rain", "my garden",
         "the new cafe", "the concert", "my old bike"]
ADJ = ["lovely", "great", "fun", "nice", "wonderful", "cozy", "pleasant", "exciting", "interesting", "good"]
REPLY1 = ["That sounds {adj}!", "Oh, how {adj}.", "What a {adj} thing to share.", "I love hearing that, it sounds {adj}.",
          "Thanks for telling me.", "Interesting!", "I see.", "Fair enough."]
REPLY2 = ["Doing something simple like that can really lift the mood for the rest of the day.",
          "It is nice to take a break from the usual routine now and then.",
          "Little moments like that tend to stick with you for a long time.",
          "Sometimes the small plans turn out to be the best ones.",
          "It sounds like a good way to slow down and enjoy the moment.",
          "Those are the kind of days that make the busy weeks easier.",
          "There is always something new to learn about things like that.",
          "It is funny how the small details are the ones we remember."]
REPLY3 = ["Did you enjoy it?", "Would you do it again soon?", "How did it go in the end?",
          "Was it as good as you hoped?", "Are you planning to do more of that?", "What was the best part?",
          "What do you think about it?", "Tell me more if you like."]
USER_T = ["I {act} {when}.", "{subj} {act} {when}.", "I have been thinking about {topic} a lot.",
          "{when}, {subj} and I {act}.", "Honestly, {topic} has been on my mind.", "I {act} {when} and it was {feel}.",
          "How was your day?", "Do you have any plans for {when2}?", "What do you think about {topic}?",
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
        u = r.choice(USER_T).format(act=r.choice(ACT), when=r.choice(WHEN), subj=r.choice(SUBJ),
                                    topic=r.choice(TOPIC), feel=r.choice(FEEL), when2=r.choice(WHEN2))
        u = u[0].upper() + u[1:]
    return u, casual_reply(r)


# ---- dialogues -----------------------------------------------------------------------------
def answer_text(kw, val):
    return "".join(reply_parts(kw, val))


def fact_step(ph, kw, val):
    u, a = ph.fact(kw, val)
    return ("fact", u, a, kw, val)


def question_step(ph, kw, val):
    return ("q", ph.question(kw), answer_text(kw, val), kw, val)


def bench_steps(r, facts, casual, ph=BENCH):
    """One problem in the benchmark's shape (src/problems.c): 3 facts, 9 fillers, 2 probes, 3
    questions. facts / casual: lists of pairs. Returns [(kind, user, assistant, kw, val)];
    assistant text is filled in for every turn (the gold reply)."""
    fi = r.sample(range(len(facts)), 3)
    fills = r.sample(range(len(casual)), 11)
    order = r.sample(range(3), 3)
    st = [fact_step(ph, facts[i][0], facts[i][1]) for i in fi]
    st += [("filler", casual[j][0], casual[j][1], None, None) for j in fills[:9]]
    st += [("probe", casual[j][0], casual[j][1], None, None) for j in fills[9:11]]
    for o in order:
        kw, val = facts[fi[o]]
        st.append(question_step(ph, kw, val))
    return st


def free_steps(r, facts, casual, ph=BENCH):
    """A training dialogue of a freer shape: 2-4 facts stated at random points among 4-12 casual
    turns, 2-4 questions (some on facts still in view, one in ten on a fact never stated:
    answered 'I don't know')."""
    nf = r.randint(2, 4)
    fi = r.sample(range(len(facts)), nf + 1)
    nc = r.randint(4, 12)
    body = [("filler",) + tuple(casual[r.randrange(len(casual))]) + (None, None) for _ in range(nc)]
    for i in fi[:nf]:
        pos = r.randrange(len(body) + 1) if r.random() < 0.5 else r.randrange(min(3, len(body)) + 1)
        body.insert(pos, fact_step(ph, facts[i][0], facts[i][1]))
    st = body
    for _ in range(r.randint(2, 4)):
        if r.random() < 0.1:
            st.append(question_step(ph, facts[fi[nf]][0], None))
        else:
            kw, val = facts[fi[r.randrange(nf)]]
            st.append(question_step(ph, kw, val))
        if r.random() < 0.4:
            u, a = casual[r.randrange(len(casual))]
            st.append(("filler", u, a, None, None))
    return st


def drill_steps(r, facts, casual, ph=BENCH):
    """A short, dense copy drill: 3-6 facts, then a question on each (shuffled), a casual turn
    now and then."""
    nf = r.randint(3, 6)
    fi = r.sample(range(len(facts)), nf)
    st = [fact_step(ph, facts[i][0], facts[i][1]) for i in fi]
    for i in r.sample(fi, nf):
        if r.random() < 0.25:
            u, a = casual[r.randrange(len(casual))]
            st.append(("filler", u, a, None, None))
        kw, val = facts[i]
        st.append(question_step(ph, kw, val))
    return st


def recite_steps(r, facts, casual, ph=BENCH):
    """A dense copy drill: 3-8 facts, then the user asks for all of them and the assistant lists
    them in a shuffled order as " the {kw} is {val}." (the fact's own words: every value follows
    its keyword exactly as in the fact). The reply is ("recite", ..., kw=None, val=[(kw, val)])."""
    nf = r.randint(3, min(8, len(facts)))
    fi = r.sample(range(len(facts)), nf)
    st = [fact_step(ph, facts[i][0], facts[i][1]) for i in fi]
    if r.random() < 0.5:
        u, a = casual[r.randrange(len(casual))]
        st.insert(r.randrange(len(st) + 1), ("filler", u, a, None, None))
    items = [tuple(facts[i]) for i in r.sample(fi, nf)]
    st.append(("recite", RECITE_USER, RECITE_HEAD + "".join(" the %s is %s." % kv for kv in items), None, items))
    return st


EOS_S = "<\uff5cend\u2581of\u2581sentence\uff5c>"
USER_S = "<\uff5cUser\uff5c>"
ASSIST_S = "<\uff5cAssistant\uff5c>"
BOS_S = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"


def segments(steps):
    """The chat template of the loop (RECALL_SPEC-style, src/problems.c rc_chat_segment): one
    segment per turn, [EOS if not first] <User> u <Assistant> a. Returns [(kind, text_user_part,
    text_reply, kw, val)] where the reply is what the assistant writes."""
    out = []
    for i, (kind, u, a, kw, val) in enumerate(steps):
        head = (EOS_S if i else "") + USER_S + u + ASSIST_S
        out.append((kind, head, a, kw, val))
    return out


# ---- long-context needle prompts (src/longctx.c's format) ---------------------------------
INTRO = ("Below is a long text with a piece of information hidden in it. Read it, find the "
         "information and remember it: you will be asked about it at the end.\n")
NEEDLE_Q = "What is the special magic number mentioned in the text above? Answer with the number only."
NEEDLE_KW = "special magic number"
LCTX_KEYS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "glacier", "harbor", "indigo", "juniper",
             "kestrel", "lantern", "meadow", "nectar", "orchid", "pebble"]


def needle_user(r, hay_tokens_text, n_tok, multikey=False):
    """INTRO + n_tok haystack pieces (a list of token texts) with the needle at a random depth,
    + "\\n" + question. Returns (user text, value, kw)."""
    off = r.randrange(max(1, len(hay_tokens_text) - n_tok))
    piece = hay_tokens_text[off:off + n_tok]
    val = str(r.randint(100000, 999999))
    if multikey:
        keys = r.sample(LCTX_KEYS, 4)
        ins = [(r.random(), "\nThe special magic number for %s is %s.\n" % (k, val if i == 0 else str(r.randint(100000, 999999))))
               for i, k in enumerate(keys)]
        q = "What is the special magic number for %s mentioned in the text above? Answer with the number only." % keys[0]
        kw = "special magic number for " + keys[0]
    else:
        ins = [(r.random(), "\nThe special magic number is %s.\n" % val)]
        q, kw = NEEDLE_Q, NEEDLE_KW
    ins.sort()
    text, prev = INTRO, 0
    for d, s in ins:
        cut = max(prev, int(round(d * len(piece))))
        text += "".join(piece[prev:cut]) + s
        prev = cut
    text += "".join(piece[prev:]) + "\n" + q
    return text, val, kw


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
    "facts": [["dentist's name", "Halvorsen"], ["flight number", "LH 2214"], ["meeting time", "14:30"]],
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
    ],
}
