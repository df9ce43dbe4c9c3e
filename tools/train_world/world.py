"""world.py - the synthetic world the trained model lives in: keywords, values, casual talk,
multi-turn dialogues built like tests/golden/recall_bench.json, and long-context needle prompts
built like src/longctx.c. Everything is drawn from random.Random(seed): the same seed gives the
same text.

Held out: the evaluation facts (tests/golden/trained/eval_bench.json) use keyword pairs
(modifier, head) and values that never occur in training. Every modifier and head word also
occurs in training (in other pairs), and values are made of single digits and letters, so every
token the evaluation needs was trained; only the combinations are new.
"""
import random

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
        return THINK_HEAD, ": %s</think>" % restate_head(kw) + (" " + val if val is not None else UNKNOWN)
    if val is None:
        return THINK_HEAD, ": the %s is unknown.</think>%s" % (kw, UNKNOWN)
    return THINK_HEAD, ": %s %s.</think> %s" % (restate_head(kw), val, val)


def restate_head(kw):
    """The words the reply restates before the value, in the fact's own words: "the {kw} is" for a
    plain keyword or a fact whose value came first; for a keyword told in world_wide's wording
    (world_wide.Key) its relation: "the flight lands at", "the gate code:". (world_wide.restate_head
    is this function.)"""
    rel = getattr(kw, "rel", "is")
    if getattr(kw, "before", False):
        rel = "is"
    if rel == "":
        return "the %s" % kw
    return "the %s%s%s" % (kw, "" if rel[:1] in ":,'" else " ", rel)


RECITE_USER = "Please list everything I asked you to note."
RECITE_HEAD = "Sure:"


MODS = ["vault", "flight", "locker", "hotel", "server", "badge", "table", "invoice", "meeting", "project",
        "parking", "garage", "harbor", "train", "cabin", "gym", "office", "storage", "museum", "library",
        "ferry", "studio", "garden", "clinic", "bank", "lab", "gallery", "warehouse", "dock", "tower",
        "station", "workshop"]
HEADS = ["code", "number", "id", "pin", "name", "room", "pass", "key", "tag", "slot", "label", "ticket"]


def kw_split():
    """(train pairs, eval pairs): pair (m, h) is held out when (3m + h) % 4 == 0."""
    tr, ev = [], []
    for m in range(len(MODS)):
        for h in range(len(HEADS)):
            (ev if (3 * m + h) % 4 == 0 else tr).append(MODS[m] + " " + HEADS[h])
    return tr, ev


UPPER = "ABCDEFGHJKLMNPQRSTUVWXYZ"
SYL = ["ka", "lo", "mi", "ve", "ru", "to", "na", "shi", "bel", "dor", "fin", "gar", "mel", "tor", "zan", "pim"]


def draw_value(r):
    """A value of 2-5 BPE tokens: 3-4 digits, a capital and 2-3 digits, two syllables and 2
    digits, or two capitalised syllables."""
    k = r.randrange(4)
    if k == 0:
        return "".join(r.choice("0123456789") for _ in range(r.randint(3, 4)))
    if k == 1:
        return r.choice(UPPER) + "".join(r.choice("0123456789") for _ in range(r.randint(2, 3)))
    w = "".join(r.sample(SYL, 2))
    if k == 2:
        return w + "".join(r.choice("0123456789") for _ in range(2))
    return w[0].upper() + w[1:]


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
ADJ = ["lovely", "great", "fun", "nice", "wonderful", "cozy", "pleasant", "exciting"]
REPLY1 = ["That sounds {adj}!", "Oh, how {adj}.", "What a {adj} way to spend the time.", "I love hearing that, it sounds {adj}."]
REPLY2 = ["Doing something simple like that can really lift the mood for the rest of the day.",
          "It is nice to take a break from the usual routine now and then.",
          "Little moments like that tend to stick with you for a long time.",
          "Sometimes the small plans turn out to be the best ones.",
          "It sounds like a good way to slow down and enjoy the moment.",
          "Those are the kind of days that make the busy weeks easier."]
REPLY3 = ["Did you enjoy it?", "Would you do it again soon?", "How did it go in the end?",
          "Was it as good as you hoped?", "Are you planning to do more of that?", "What was the best part?"]
USER_T = ["I {act} {when}.", "{subj} {act} {when}.", "I have been thinking about {topic} a lot.",
          "{when}, {subj} and I {act}.", "Honestly, {topic} has been on my mind.", "I {act} {when} and it was {feel}."]


def casual_pair(r):
    u = r.choice(USER_T).format(act=r.choice(ACT), when=r.choice(WHEN), subj=r.choice(SUBJ),
                                topic=r.choice(TOPIC), feel=r.choice(FEEL))
    u = u[0].upper() + u[1:]
    a = " ".join([r.choice(REPLY1).format(adj=r.choice(ADJ)), r.choice(REPLY2), r.choice(REPLY3)])
    return u, a


# ---- dialogues -----------------------------------------------------------------------------
# ---- phrasings ----------------------------------------------------------------------------
class Phrasing:
    """How facts and questions are worded: the benchmark's templates (BENCH, no random draw) or,
    given a generator and lists of templates, one drawn per turn (the first, the benchmark's own,
    at a higher weight: world_broad.training_phrasing)."""

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


def distinct_casual(draw, n=32):
    """n casual pairs from draw() whose user lines all differ (the evaluation's casual turns)."""
    out, seen = [], set()
    while len(out) < n:
        p = draw()
        if p[0] not in seen:
            seen.add(p[0])
            out.append(list(p))
    return out


# ---- dialogues -----------------------------------------------------------------------------
def answer_text(kw, val):
    return "".join(reply_parts(kw, val))


def fact_step(ph, kw, val):
    u, a = ph.fact(kw, val)
    return ("fact", u, a, kw, val)


def question_step(ph, kw, val):
    q = ph.question(kw)
    if isinstance(q, tuple):  # the question names the keyword its own way (world_wide.shorter)
        q, kw = q
    return ("q", q, answer_text(kw, val), kw, val)


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
    st.append(("recite", RECITE_USER, RECITE_HEAD + "".join(" %s %s." % (restate_head(k), v) for k, v in items), None,
               items))
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
