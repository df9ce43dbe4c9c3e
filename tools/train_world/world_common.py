"""world_common.py - the broad grammar's parts that world_broad.py and world_wide.py share: keywords and
values of many kinds, the fact and question phrasings, and casual talk (WordNet's sentences, lexicon.py).
world_broad.py's BroadWorld draws its dialogues from them, and world_wide.py's wide wording builds on
them; both import this module and world.py, never each other's way back (world -> world_common ->
world_wide -> world_broad). Every name here is also importable from world_broad, where it was first.
Everything is drawn from the random.Random given: the same seed gives the same text.

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
