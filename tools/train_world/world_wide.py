"""world_wide.py - wide wording (train.py --wording wide): facts, questions and small talk worded as
people type them, beside the broad grammar (world_common.py; world_broad.py draws from both). The
grammar's facts all read "the/my {kw} is {val}." and its questions "what was the {kw}?"-like; a
person writes "my flight lands at 7:40", "Okafor is my new dentist", "the code for the side gate is
4471", and asks "when does my flight land?", "who's my dentist?". This file draws such facts (a *frame*: a keyword of a fitting kind, a
relation, a value), the questions each frame licenses (every wh-form, indirect and terse ones), and
small talk of many registers and lengths, questions about ordinary things among it (answered as
small talk, never looked up). Everything is drawn from the random.Random given: the same seed gives
the same text.

The reply still restates the fact before it writes the value (world.reply_parts), now in the fact's
own words: ": the flight lands at 7:40.</think> 7:40". The restatement starts with the keyword as
the question names it, and from there the fact's own tokens follow, so the decoder copies them by
induction as it did "the {kw} is". A fact whose value comes first ("Okafor is my dentist") is
restated "the dentist is Okafor": the one form that needs a lookup rather than a copy.

Held out as before (lexicon.held: keyword nouns of the frames too; HELD_NAMES; HELD_FACT_TEMPLATES and
HELD_QUESTION_TEMPLATES are never generated). Times of day are trained here (a question "what time
does the train leave?" has no other kind of answer); eval_bench.json's time values still never are.
"""
import lexicon
import world
import world_common as wb  # the broad grammar (world_broad.py re-exports it and imports this module)


class Key(str):
    """A keyword (the string the fact and its question share) with the fact's wording: `rel` the
    words between the keyword and the value ("lands at"; "is" for world_broad's facts), `kind` the
    value's kind, `verb` the relation's verb for questions ("land"), `before` True when the fact
    states the value first. A str, so dialogues, dict keys and formats treat it as the keyword."""

    def __new__(cls, kw, rel="is", kind=None, verb=None, before=False, fact=None):
        s = str.__new__(cls, kw)
        s.rel, s.kind, s.verb, s.before = rel, kind, verb, before
        s.fact = fact if fact is not None else str(kw)  # the keyword as the fact states it
        return s


def shorter(kw):
    """The keyword as a person may ask it back, shorter than told: "new dentist" -> "dentist",
    "sister's flight" -> "flight" (None when nothing can be left out). The restatement then starts
    with the shorter words, and the fact's own tokens after them follow ("the dentist is called")."""
    words = str(kw).split(" ")
    # only a word that says whose or which one ("new", "sister's", "gym"), and only of the specific
    # nouns of the time, date, name and place frames: "vault pin" -> "pin" would be ambiguous
    if len(words) < 2 or kw.kind not in ("time", "date", "name", "place") or not (
            words[0] == "new" or words[0].endswith("'s") or words[0] in wb.OWNERS):
        return None
    return Key(" ".join(words[1:]), kw.rel, kw.kind, kw.verb, kw.before, kw.fact)


# The restatement's words before the value ("the flight lands at", "the gate code:"; "the {kw} is" for
# a plain keyword or a fact whose value came first): world.restate_head, which reply_parts calls.
restate_head = world.restate_head


# ---- frames: a keyword of the value's kind, a relation, the questions it licenses ---------------
EVENTS = ["flight", "train", "bus", "ferry", "meeting", "dentist appointment", "doctor's appointment", "haircut",
          "dinner reservation", "yoga class", "piano lesson", "job interview", "check-in", "checkout", "pickup",
          "delivery", "call with the bank", "team meeting", "party", "wedding", "concert", "match", "recital",
          "vet appointment", "school play", "car service", "book club", "swim practice", "movie", "video call",
          "shift", "exam", "deadline", "launch", "rehearsal", "tour", "massage", "lunch", "brunch", "dance class",
          "boat trip", "bike repair", "eye exam", "flu shot", "parents' evening", "open house", "tennis lesson",
          "cooking class", "photo shoot", "inspection", "hearing", "viewing", "school run", "coffee date"]
PEOPLE = ["dentist", "doctor", "landlord", "plumber", "lawyer", "accountant", "tutor", "piano teacher", "babysitter",
          "boss", "manager", "neighbor", "mechanic", "vet", "cat", "dog", "hamster", "parrot", "goldfish", "horse",
          "driver", "electrician", "hairdresser", "coach", "nurse", "realtor", "therapist", "roommate", "pen pal",
          "son's teacher", "daughter's friend", "contact at the bank", "new colleague", "physio", "surgeon",
          "optician", "gardener", "cleaner", "trainer", "nanny", "godson", "goddaughter", "rabbit", "tortoise",
          "turtle", "puppy", "kitten", "pony", "guide", "host", "agent", "editor", "advisor", "caterer"]
PLACES = ["hotel", "new office", "meeting point", "pharmacy", "restaurant", "clinic", "gym", "storage unit",
          "party", "conference", "apartment", "school", "warehouse", "bakery", "car", "bike", "new flat",
          "interview", "studio", "market", "garage", "wedding venue", "bus stop", "dentist", "library", "pickup spot"]
POSS = ["my", "my", "our", "the"]
NEW = ["", "", "", "new "]

# (relation, the verb a question asks with: "+v" active ("when does the flight land?"), "-v" a
# participle ("what time is the meeting booked for?"), None: the kind's own questions only)
TIME_RELS = [("is at", None), ("starts at", "+start"), ("begins at", "+begin"), ("lands at", "+land"),
             ("leaves at", "+leave"), ("arrives at", "+arrive"), ("departs at", "+depart"), ("opens at", "+open"),
             ("ends at", "+end"), ("is booked for", "-booked for"), ("is set for", "-set for"),
             ("was moved to", "-moved to"), ("got moved to", "-moved to"), ("is scheduled for", "-scheduled for"),
             ("is now at", None), ("is", None), (":", None)]
DATE_RELS = [("is on", None), ("falls on", "+fall on"), ("is due on", "-due"), ("was moved to", "-moved to"),
             ("is booked for", "-booked for"), ("is set for", "-set for"), ("is scheduled for", "-scheduled for"),
             ("is", None), (":", None)]
NAME_RELS = [("is", None), ("is called", "-called"), ("is named", "-named"), ("goes by", "+go by"),
             ("is Dr.", None), ("is Mr.", None), ("is Ms.", None), ("is Mrs.", None), ("'s name is", None),
             (":", None)]
PLACE_RELS = [("is at", None), ("is on", None), ("is in", None), ("leaves from", "+leave from"),
              ("is parked on", "-parked"), ("is near", None), ("is", None)]
THING_RELS = [("is", None), ("is", None), ("is", None), ("is now", None), ("is set to", "-set to"),
              ("was changed to", "-changed to"), ("will be", None), (":", None), ("reads", None)]
FOR_HEADS = ["code", "password", "pin", "number", "key code", "combination", "access code", "reference",
             "door code", "gate code", "login", "account number", "passcode", "booking number"]
FOR_OWNERS = ["side gate", "gym", "garage", "back door", "storage unit", "office wifi", "bike lock", "safe",
              "mailbox", "shed", "alarm", "parking lot", "guest network", "locker", "printer", "school portal",
              "ferry", "hotel room", "front door", "basement", "car park", "cabin", "boat", "studio"]


def _tr(xs):
    return [x for x in xs if not lexicon.held(x)]


def draw_place(r, lex):
    k = r.randrange(6)
    if k == 0:
        return r.choice(lex.names_tr) + " " + r.choice(["Street", "Road", "Avenue", "Lane", "Square", "Park", "Way"])
    if k == 1:
        return "Gate " + r.choice(wb.UPPER) + str(r.randint(1, 60))
    if k == 2:
        return "Platform " + str(r.randint(1, 24))
    if k == 3:
        return "Terminal " + str(r.randint(1, 5))
    if k == 4:
        return str(r.randint(1, 999)) + " " + r.choice(lex.names_tr) + " " + r.choice(["Street", "Road", "Avenue"])
    return r.choice(lex.names_tr)


def draw_frame(r, lex):
    """(Key, value) of a wide fact: the value's kind picks the keyword's nouns and the relations."""
    k = r.randrange(10)
    if k < 2:
        kw = r.choice(["", "", "", r.choice(_tr(wb.OWNERS)) + " "]) + r.choice(_tr(EVENTS))
        rel, verb = r.choice(TIME_RELS)
        return Key(kw, rel, "time", verb), wb.draw_value(r, lex, "time")
    if k < 3:
        kw = r.choice(["", "", r.choice(_tr(wb.OWNERS)) + " "]) + r.choice(_tr(EVENTS) + ["birthday", "anniversary"])
        rel, verb = r.choice(DATE_RELS)
        return Key(kw, rel, "date", verb), wb.draw_value(r, lex, "date")
    if k < 5:
        kw = r.choice(NEW) + r.choice(_tr(PEOPLE))
        rel, verb = r.choice(NAME_RELS)
        if rel == "'s name is" and kw.endswith("'s"):
            rel = "is called"
        if rel == ":" and r.random() < 0.5:
            rel = ""  # "we named the puppy Pepper"
        before = r.random() < 0.3
        return Key(kw, "is" if before else rel, "name", verb, before), wb.draw_value(r, lex, "name")
    if k < 6:
        kw = r.choice(_tr(PLACES))
        rel, verb = r.choice(PLACE_RELS)
        return Key(kw, rel, "place", verb), draw_place(r, lex)
    kind = r.choice(["code", "number", "word", "phrase", "code", "number"])
    val = wb.draw_value(r, lex, kind)
    if r.random() < 0.3:
        return Key(r.choice(_tr(FOR_HEADS)) + " for the " + r.choice(_tr(FOR_OWNERS)), "is", kind), val
    rel, verb = r.choice(THING_RELS)
    before = r.random() < 0.15
    return Key(wb.draw_keyword(r, lex), rel, kind, verb, before), val


# ---- how a fact is told ----------------------------------------------------------------------------
CHATTY_LEADS = ["Anyway, ", "Oh, and ", "Also, ", "By the way, ", "Oh right, ", "Before I forget, ",
                "Random thing but ", "Quick thing: ", "So yeah, ", "Oh and one more thing, ", "Btw ", "ok so ",
                "Just remembered, ", "Side note: ", "Also FYI ", "Long story short, "]
AFTER_TIME = ["", "", "", " tomorrow", " on Friday", " tonight", " next week", " this Saturday", " on the 5th"]
AFTER_DATE = ["", "", "", " this year", " next year"]
FACT_TAILS = ["", "", "", "", ", don't let me forget", ", just so you know", ", remember that", ", thanks",
              ", can you keep that for me?", ", in case I ask later", ". Wish me luck!", ". Exciting!",
              ". Ugh.", ", fyi"]
BEFORE_FORMS = ["{val} is {own} {kw}", "{val} is the name of {own} {kw}", "{val} is who {own} {kw} is",
                "Dr. {val} is {own} {kw}", "{val} is {own} {kw}, by the way", "It's {val}, {own} {kw}"]
NAMED = ["we named", "we called", "we call", "we've named", "I named", "everyone calls", "the kids named"]
BEFORE_THING = ["{val} is the {kw}", "{val} is {own} {kw}", "{val}, that's the {kw}", "{val} is what the {kw} is"]


def fact_text(r, kw, val, casual):
    """A fact as a person types it: an optional chatty lead (sometimes a whole small-talk line
    first), the keyword, relation and value in that order (or the value first), an optional tail;
    now and then all lowercase at the start and without a final full stop."""
    # "the code for the side gate": always "the". (The draw for the other " for the " keywords is
    # kept, though unused: it is part of the random stream the committed wide world was made with.)
    own = r.choice(POSS) if not kw.startswith(("code for", "password for")) else "the"
    if " for the " in kw:
        own = "the"
    if kw.before:
        forms = BEFORE_FORMS if kw.kind == "name" else BEFORE_THING
        body = r.choice(forms).format(val=val, own=own, kw=kw)
    elif kw.rel == "":
        body = "%s %s %s %s" % (r.choice(NAMED), own if own != "my" else "the", kw, val)
    else:
        after = r.choice(AFTER_TIME) if kw.kind == "time" else r.choice(AFTER_DATE) if kw.kind == "date" else ""
        sep = "" if kw.rel[:1] in ":,'" else " "
        body = "%s %s%s%s %s%s" % (own, kw, sep, kw.rel, val, after)
    x = r.random()
    if x < 0.25:
        lead = r.choice(CHATTY_LEADS)
    elif x < 0.4:
        lead = casual[0] + " " + r.choice(CHATTY_LEADS)
    else:
        lead = r.choice(["", "", "", "Hey, ", "Hi! ", "Just so you know, ", "FYI ", "Note: ", "Heads up, "])
    s = lead + (body if lead and not lead.endswith((". ", "! ", "? ", ": ")) else body[0].upper() + body[1:])
    s += r.choice(FACT_TAILS)
    if r.random() < 0.2:  # typed fast: no capital, no full stop
        s = s[0].lower() + s[1:] if not s.startswith(val) else s
        return s.rstrip(".!?")
    return s if s[-1] in ".!?" else s + "."


# ---- how it is asked ------------------------------------------------------------------------------
Q_ANY = ["what's the {kw} again?", "what was the {kw} again?", "which {kw} was it?", "{kw}?", "the {kw}?",
         "I can't remember the {kw}, can you remind me?", "do you still have the {kw}?",
         "what did I tell you about the {kw}?", "remind me about the {kw}?", "what about the {kw}, what was it?",
         "the {kw} - what did I say?", "sorry, the {kw} again?", "I need the {kw}, what was it again?",
         "hey what was my {kw}", "ok what's the {kw}", "can you tell me the {kw} again?",
         "did I mention the {kw}? what was it?", "I've totally forgotten the {kw}. Help?"]
Q_KIND = {
    "time": ["when is the {kw}?", "what time is the {kw}?", "what time is my {kw}?", "when's the {kw} again?",
             "at what time is the {kw}?", "what time did I say the {kw} was?", "remind me when the {kw} is.",
             "I can't remember when the {kw} is, can you remind me?", "when was the {kw} again?",
             "what time's the {kw}?"],
    "date": ["when is the {kw}?", "what day is the {kw}?", "what date is the {kw}?", "what date is the {kw} on?",
             "which day was the {kw} again?", "when's my {kw}?", "remind me of the date of the {kw}.",
             "when did I say the {kw} was?"],
    "name": ["who is my {kw}?", "who's the {kw}?", "what's my {kw} called?", "what was the name of my {kw}?",
             "what did I say my {kw} is called?", "who was my {kw} again?", "remind me who my {kw} is.",
             "what's the {kw}'s name?", "what is my {kw}'s name again?", "name of my {kw}?"],
    "place": ["where is the {kw}?", "where's my {kw}?", "where did I say the {kw} is?", "where's the {kw} again?",
              "what was the address of the {kw}?", "remind me where the {kw} is."],
}
Q_VERB = {"time": ["when does the {kw} {v}?", "what time does the {kw} {v}?", "what time does my {kw} {v} again?",
                   "when does my {kw} {v}?"],
          "place": ["where does the {kw} {v}?", "where does my {kw} {v} again?"],
          "date": ["when does the {kw} {v}?"],
          "name": ["what does my {kw} {v}?"],
          None: ["what does the {kw} {v}?"]}
Q_PASSIVE = {"time": ["what time is the {kw} {v}?", "when is my {kw} {v}?"],
             "date": ["what day is the {kw} {v}?", "when is the {kw} {v}?"],
             "name": ["what is my {kw} {v}?", "what's the {kw} {v} again?"],
             "place": ["where is the {kw} {v}?"],
             None: ["what is the {kw} {v}?", "what did I say the {kw} is {v}?"]}
Q_LEADS = ["", "", "", "", "Hey, ", "Sorry, ", "Quick question: ", "Oh, ", "Wait, ", "Anyway, ", "Ok so ",
           "Hmm, ", "Real quick, ", "Also, ", "One more thing: ", "Oh before I forget, "]


def question_text(r, kw, casual):
    kind = getattr(kw, "kind", None)
    verb = getattr(kw, "verb", None)
    pool = list(Q_ANY)
    if kind in Q_KIND:
        pool += Q_KIND[kind] * 2
    if verb and verb[0] == "+":
        pool += [q.replace("{v}", verb[1:]) for q in Q_VERB.get(kind, Q_VERB[None])] * 3
    if verb and verb[0] == "-":
        pool += [q.replace("{v}", verb[1:]) for q in Q_PASSIVE.get(kind, Q_PASSIVE[None])] * 3
    q = r.choice(pool).format(kw=kw)
    x = r.random()
    if x < 0.15:
        lead = casual[0] + " " + r.choice(["Anyway, ", "Oh, ", "By the way, ", "Also, "])
    else:
        lead = r.choice(Q_LEADS)
    s = lead + (q if lead and not lead.endswith((". ", "! ", "? ", ": ")) else q[0].upper() + q[1:])
    if r.random() < 0.15:
        s = s[0].lower() + s[1:]
        s = s.rstrip("?.")
    return s


class WidePhrasing(world.Phrasing):
    """Facts and questions of Key keywords in the wide wording; plain keywords in world_broad's
    grammar (the benchmark's templates among it), a share `grammar` of the time."""

    def __init__(self, r, lex, grammar=0.35):
        world.Phrasing.__init__(self, r, wb.FACT_TEMPLATES, wb.QUESTION_TEMPLATES, wb.FACT_REPLIES)
        self.lex, self.grammar = lex, grammar

    def _casual(self):
        return wide_casual_pair(self.r, self.lex)

    def fact(self, kw, val):
        if isinstance(kw, Key) and (kw.rel != "is" or kw.before or self.r.random() >= self.grammar):
            if TYPED and self.r.random() < TYPED:  # the typed stage's extra forms (None: none fits)
                t = typed_fact_text(self.r, kw, val, self._casual())
                if t is not None:
                    return t, self._pick(self.replies)
            return fact_text(self.r, kw, val, self._casual()), self._pick(self.replies)
        return world.Phrasing.fact(self, kw, val)

    def question(self, kw):
        """The question's text, or (text, the keyword as the question names it) when shorter."""
        if isinstance(kw, Key) and (kw.rel != "is" or kw.before or self.r.random() >= self.grammar):
            if TYPED and self.r.random() < TYPED:  # named another way; restated in the fact's words
                q = typed_question(self.r, kw, self._casual())
                if q is not None:
                    return q  # (text, the fact's Key with .asked)
            short = shorter(kw) if self.r.random() < 0.35 else None
            if short is not None:
                return question_text(self.r, short, self._casual()), short
            return question_text(self.r, kw, self._casual())
        return world.Phrasing.question(self, kw)


# ---- small talk --------------------------------------------------------------------------------
GER = ["running", "baking bread", "gardening", "learning guitar", "swimming", "knitting", "cooking", "hiking",
       "painting", "reading more", "meditating", "cycling", "journaling", "playing chess", "yoga", "climbing",
       "learning Spanish", "drawing", "camping", "birdwatching", "pottery", "photography", "sleeping better",
       "saving money", "waking up early", "eating healthier", "studying", "public speaking", "moving house"]
THINGS = ["coffee", "tea", "rainy days", "winter", "jazz", "horror movies", "board games", "spicy food", "podcasts",
          "road trips", "sushi", "early mornings", "museums", "crosswords", "the beach", "snow", "musicals"]
GENRES = ["mystery", "science fiction", "history", "fantasy", "cooking", "travel", "poetry"]
FOODS = ["pizza", "pancakes", "curry", "tacos", "soup", "burger", "ramen", "salad", "pie", "dumplings"]
PEOPLE_CASUAL = ["mom", "dad", "sister", "brother", "best friend", "cousin", "aunt", "grandma", "roommate", "boss"]
SMALL_Q = ["Any tips for {ger}?", "Do you have any tips for {ger}?", "What do you think about {thing}?",
           "Have you ever tried {ger}?", "How do I get better at {ger}?", "Is it weird that I love {thing}?",
           "What's a good way to relax after work?", "Should I take up {ger}?", "Do you like {thing}?",
           "Can you recommend a good {genre} book?", "Why is {ger} so hard?", "How long does it take to get good at {ger}?",
           "What should I cook tonight?", "Is it going to rain this weekend, do you think?", "Do you know any good jokes?",
           "what do you think, is {ger} worth it?", "How are you today?", "How's it going?", "What's new with you?",
           "Do you ever get tired?", "What would you do on a rainy Sunday?", "Is {food} healthy?",
           "what's the best way to start {ger}?", "Do you prefer {thing} or {thing2}?", "How was your weekend?",
           "Which is better, {food} or {food2}?", "Where should I go for a short trip?", "When is the best time to start {ger}?",
           "Who do you think makes the best {food}?", "What's your favorite season?"]
SMALL_S = ["Ugh, what a day.", "Work was long today.", "I'm so tired.", "lol yeah", "The traffic was terrible this morning.",
           "I just got back from {ger}.", "My {person} is visiting this weekend.", "We watched a movie last night, it was okay.",
           "haha that's funny", "ok cool", "Thanks!", "Nothing much, just relaxing.", "I'm thinking about {ger} this weekend.",
           "It's been raining all day here.", "Just had the best {food}.", "I started {ger} last month and I love it.",
           "My {person} called, we talked for an hour.", "Not much going on today.", "The kids are finally asleep.",
           "I burned the {food} again, oops.", "Finally Friday!", "Mondays, am I right?", "I need a vacation.",
           "My back hurts from sitting all day.", "I spent the whole morning cleaning.", "thanks, that helps",
           "Good morning!", "We got a new couch and it's so comfy.", "I've been binge-watching a cooking show.",
           "My {person} and I went out for {food} last night. It was really good, we should go again.",
           "It's so hot today. I can't wait for autumn.", "ok", "sounds good", "That makes sense.",
           "I'm trying to read more this year, but it's hard to find the time."]
ADVICE = ["A little at a time usually works best.", "Start small and keep it regular.",
          "It depends on what you enjoy most.", "Many people find a simple routine helps.",
          "Try it for a week and see how it feels.", "That is a good question.", "I would say go for it.",
          "It is different for everyone, so trust your own pace.", "Rest helps more than people think.",
          "Something warm and simple is hard to beat."]


def _fill(r, s):
    return s.format(ger=r.choice(GER), thing=r.choice(THINGS), thing2=r.choice(THINGS), genre=r.choice(GENRES),
                    food=r.choice(FOODS), food2=r.choice(FOODS), person=r.choice(PEOPLE_CASUAL))


def wide_casual_pair(r, lex):
    """Small talk: a WordNet sentence, world_broad's small talk, a statement or a question of many
    registers; the reply one to four sentences (a question gets advice first)."""
    x = r.random()
    if x < 0.35:
        u, _ = wb.casual_pair(r, lex)
    elif x < 0.6:
        u = _fill(r, r.choice(SMALL_Q))
    elif x < 0.9:
        u = _fill(r, r.choice(SMALL_S))
    else:
        u = _fill(r, r.choice(SMALL_S)) + " " + _fill(r, r.choice(SMALL_S + SMALL_Q))
    n = r.choice([1, 2, 2, 3, 3, 4])
    parts = [r.choice(ADVICE)] if u.rstrip().endswith("?") else [r.choice(wb.REPLY1).format(adj=r.choice(wb.ADJ))]
    pool = [r.choice(wb.REPLY2), r.choice([a for a in ADVICE if a != parts[0]]), r.choice(wb.REPLY3)]
    parts += pool[:n - 1] if n > 1 else []
    return u, " ".join(parts)


# ---- typed wording (train.py --wording typed): the question names the fact its own way -----------
# The wide world answers a question that keeps the fact's keyword ("when does the flight land?"
# after "my flight lands at 7:40"), but a person asks with another noun ("the plane"), another verb
# ("when does it get in?"), or tells the fact with a clause between keyword and value ("the plumber
# who's coming on Thursday goes by Pettigrew") or the value first in a new form ("Write down 4471,
# that's the gate code"). This stage draws those too; the reply still restates the fact in the
# FACT's words ("the flight lands at 7:40"), so the decoder learns to find the fact by what the
# question means (the noun's synonym, the wh-word's kind) and then copies as before. Every draw
# below happens only when TYPED > 0, so the wide stage's random stream (and bytes) stay as they were.
TYPED = 0.0  # share of wide questions that name the fact with another noun or verb (train.py sets it)

ALT_NOUNS = {
    # events
    "flight": ["plane", "flight home"], "train": ["train ride", "rail trip"], "bus": ["coach"], "ferry": ["boat"],
    "meeting": ["call", "sync"], "team meeting": ["team call", "meeting with the team"],
    "dentist appointment": ["dentist", "dental appointment", "appointment at the dentist"],
    "doctor's appointment": ["doctor", "appointment with the doctor", "GP appointment"],
    "haircut": ["hair appointment", "trim"], "dinner reservation": ["dinner", "table", "dinner booking"],
    "yoga class": ["yoga", "yoga session"], "piano lesson": ["piano", "piano class"], "job interview": ["interview"],
    "delivery": ["parcel", "package"], "pickup": ["collection"], "party": ["do", "get-together"],
    "wedding": ["ceremony", "big day"], "concert": ["gig", "show"], "match": ["game"], "recital": ["performance"],
    "vet appointment": ["vet", "appointment at the vet"], "school play": ["play"], "car service": ["service", "MOT"],
    "book club": ["reading group"], "swim practice": ["swimming", "swim session"], "movie": ["film", "cinema"],
    "video call": ["call", "zoom"], "shift": ["work shift"], "exam": ["test"], "deadline": ["due date"],
    "rehearsal": ["practice"], "massage": ["spa appointment"], "lunch": ["lunch date"], "dance class": ["dance lesson"],
    "eye exam": ["eye test", "optician appointment"], "flu shot": ["jab", "vaccine"], "tennis lesson": ["tennis"],
    "cooking class": ["cooking lesson"], "viewing": ["house viewing"], "coffee date": ["coffee"],
    "birthday": ["bday"], "anniversary": ["anniversary dinner"], "check-in": ["checking in"], "checkout": ["checking out"],
    # people and pets
    "doctor": ["GP", "doc", "physician"], "dentist": ["dental surgeon", "dentist's name"], "lawyer": ["solicitor", "attorney"],
    "landlord": ["property manager", "owner of the flat"], "vet": ["animal doctor"], "cat": ["kitty", "cat's name"],
    "dog": ["pup", "dog's name"], "puppy": ["pup", "dog"], "kitten": ["kitty", "cat"], "hairdresser": ["stylist", "barber"],
    "therapist": ["counsellor"], "realtor": ["estate agent", "agent"], "roommate": ["flatmate", "housemate"],
    "physio": ["physiotherapist", "physical therapist"], "boss": ["manager", "line manager"], "manager": ["boss"],
    "neighbor": ["neighbour", "guy next door"], "babysitter": ["sitter"], "nanny": ["babysitter", "childminder"],
    "mechanic": ["car guy", "garage guy"], "tutor": ["teacher"], "coach": ["trainer"], "trainer": ["coach", "PT"],
    "accountant": ["tax guy", "bookkeeper"], "cleaner": ["cleaning lady"], "optician": ["eye doctor"],
    "plumber": ["guy fixing the sink", "pipe guy"], "electrician": ["sparky"], "surgeon": ["doctor doing the operation"],
    "piano teacher": ["piano tutor", "music teacher"], "gardener": ["garden guy"], "hamster": ["pet"], "parrot": ["bird"],
    "goldfish": ["fish"], "pony": ["horse"], "horse": ["pony"], "rabbit": ["bunny"], "tortoise": ["pet"],
    "new colleague": ["new coworker", "new guy at work"], "guide": ["tour guide"], "host": ["host's name"],
    # places
    "hotel": ["accommodation", "place we're staying"], "new office": ["office", "workplace"], "new flat": ["apartment", "new place"],
    "apartment": ["flat", "place"], "restaurant": ["place for dinner"], "gym": ["fitness centre"],
    "pharmacy": ["chemist", "drugstore"], "clinic": ["practice", "surgery"], "meeting point": ["spot we meet"],
    "bus stop": ["stop"], "pickup spot": ["pickup point"], "wedding venue": ["venue"], "conference": ["event"],
    "storage unit": ["storage"], "car": ["ride"], "school": ["kids' school"], "bakery": ["bread shop"],
    "garage": ["car place"], "library": ["books place"], "market": ["farmers market"], "studio": ["workshop"],
    # the "... for the ..." keywords: heads and owners
    "code": ["pin", "number"], "password": ["passcode", "pw"], "pin": ["code", "PIN number"], "key code": ["code"],
    "combination": ["combo", "code"], "access code": ["entry code", "code"], "door code": ["code for the door"],
    "gate code": ["code for the gate"], "passcode": ["password", "code"], "booking number": ["booking ref", "reservation number"],
    "side gate": ["gate"], "office wifi": ["work wifi", "wifi at work"], "bike lock": ["lock"], "front door": ["door"],
    "car park": ["parking"], "parking lot": ["car park"], "hotel room": ["room"], "guest network": ["guest wifi"],
    "mailbox": ["post box", "letterbox"], "back door": ["rear door"], "school portal": ["school website"],
}
ALT_VERBS = {"land": ["get in", "arrive", "touch down"], "leave": ["go", "head off", "set off"],
             "depart": ["leave", "go"], "start": ["begin", "kick off"], "begin": ["start"],
             "arrive": ["get in", "get here", "turn up"], "open": ["start", "open up"], "end": ["finish", "wrap up"],
             "fall on": ["land on", "happen"], "go by": ["go by"], "leave from": ["go from", "depart from"]}
CLAUSES = {"name": [" who's coming on Thursday", " I found online", " from down the road", " my sister recommended",
                    " (the one I told you about)", " at the new practice", " that we adopted", " I started seeing"],
           "time": [" we booked", " I told you about", " for my sister", " next week", " everyone's going to",
                    " I keep forgetting"],
           "date": [" we planned", " I keep forgetting", " for the whole family", " we picked"],
           "place": [" we picked", " I found", " for Saturday", " everyone's meeting at"],
           None: [", the one I mentioned,", " they gave me", " I set up", " we agreed on"]}
TYPED_BEFORE = ["Write down {val}, that's the {kw}", "{val} - that's {own} {kw}", "Remember {val}: {own} {kw}",
                "{val} is what we got for the {kw}", "so {val} is {own} {kw} now", "Can you note {val} as {own} {kw}"]
PICKED = ["We finally picked {own} {kw}: {val}", "Just found out {own} {kw}: {val}", "Got {own} {kw} sorted: {val}",
          "Good news, {own} {kw} is sorted: {val}", "They confirmed {own} {kw}: {val}", "Update on {own} {kw}: {val}"]


def alt_noun(r, kw):
    """The keyword worded otherwise ("plane" for "flight", "my doctor" for "GP" told as "doctor" ...):
    the longest table entry the keyword ends with (or either side of " for the ") swapped for one of its
    alternatives; None when the table has nothing for it."""
    s = str(kw)
    if " for the " in s:
        head, owner = s.split(" for the ", 1)
        alts = [(a, owner) for a in ALT_NOUNS.get(head, [])] + [(head, a) for a in ALT_NOUNS.get(owner, [])]
        alts = [x for x in alts if not lexicon.held(x[0]) and not lexicon.held(x[1])]
        if not alts:
            return None
        h, o = r.choice(alts)
        return "%s for the %s" % (h, o)
    ends = [k for k in ALT_NOUNS if s == k or s.endswith(" " + k)]
    if not ends:
        return None
    k = max(ends, key=len)
    alts = _tr(ALT_NOUNS[k])
    return s[:len(s) - len(k)] + r.choice(alts) if alts else None


def typed_question(r, kw, casual):
    """A question on kw that names it another way: another noun (alt_noun), or the relation's verb
    swapped (ALT_VERBS); None when neither applies. The reply still restates kw as the fact told it."""
    alt = alt_noun(r, kw)
    verb = getattr(kw, "verb", None)
    if verb and verb[0] == "+" and verb[1:] in ALT_VERBS and (alt is None or r.random() < 0.4):
        verb = "+" + r.choice(ALT_VERBS[verb[1:]])
        alt = alt or str(kw)
    if alt is None:
        return None
    q = question_text(r, Key(alt, kw.rel, kw.kind, verb, kw.before, kw.fact), casual)
    told = Key(kw, kw.rel, kw.kind, kw.verb, kw.before, kw.fact)
    told.asked = alt  # the words the question names it by (train.py's kw_end)
    return q, told


def typed_fact_text(r, kw, val, casual):
    """A fact in the typed stage's extra forms: a clause between the keyword and its relation, the
    value first in new forms, or the keyword "picked"/"sorted" with its value after a colon; None to
    word it as the wide stage does."""
    own = "the" if " for the " in kw else r.choice(POSS)
    x = r.random()
    if x < 0.4 and kw.rel not in ("", ":") and not kw.before:
        clause = r.choice(CLAUSES.get(kw.kind, CLAUSES[None]))
        sep = "" if kw.rel[:1] in ":,'" else " "
        body = "%s %s%s%s%s %s" % (own, kw, clause, sep, kw.rel, val)
    elif x < 0.7 and kw.before:
        body = r.choice(TYPED_BEFORE).format(val=val, own=own, kw=kw)
    elif x < 0.85 and kw.rel == ":":  # the restatement "the {kw}:" is then in the fact's words
        body = r.choice(PICKED).format(val=val, own=own, kw=kw)
    else:
        return None
    s = body if body.startswith(val) else body[0].upper() + body[1:]  # a value keeps its case
    s += r.choice(FACT_TAILS)
    if r.random() < 0.2:
        return s.rstrip(".!?")
    return s if s[-1] in ".!?" else s + "."
