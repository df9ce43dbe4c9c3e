"""world_plain.py - the plain stage's dialogues (train.py --wording plain, docs/WORLD.md "Plain
chats"): the wide world's facts, questions and small talk (world_wide.py) in the shapes a person
meets first, which the wide mix rarely draws:

- right after: a fact, then at once the question on it (the fact in view, often the chat's first
  two turns), now and then a small-talk line or another fact before it;
- small talk after a fact: a fact, then a question about the person's week or an everyday thing
  (answered as small talk, never with the fact), then maybe the question on the fact;
- not held: a question about a fact the chat never stated (of the same kind as one it did, or any
  other), answered "I don't know." (the reply says the fact is unknown: never an invented value);
- one line: a fact, one small-talk line, the question (the fact at the window's edge);
- long in view: ~1,000 tokens, a dozen facts among natural small talk, questions spread through it
  and at its end (FULL on a chat as long as people's).
- everyday frames (EVERYDAY; measured, off in the recipe): facts in shapes the wide frames lack
  (a count, a verb of place, the value first, a title, a quoted phrase), with their own questions.

Small talk here is of many registers: the wide world's, questions about the week, short replies
("ok thanks"), questions about everyday things that start like a fact's question ("What time should
I go to bed?") and lowercase chatter. Everything is drawn from the random.Random it is given.
"""
import lexicon
import world
import world_common as wb
import world_wide as ww

WEEK_Q = ["How is your week going so far?", "How was your weekend?", "How are you today?", "How's it going?",
          "How was your day?", "What are you up to this weekend?", "Did you have a good weekend?",
          "How have you been?", "What's new with you?", "How's your morning going?", "How are things?",
          "how's your day going?", "how was your week?", "Are you having a good day?", "How is everything?",
          "What did you do today?", "Anything fun planned for the weekend?", "how are you doing?",
          "How's your week been?", "How did your day go?"]
WEEK_A = ["Pretty good, thanks for asking. It has been a steady week. How about yours?",
          "Not bad at all, thanks. How is yours going?", "It has been a calm one so far. How about you?",
          "Good, thank you! Nothing special, but a good kind of quiet. And you?",
          "All fine here, thanks for asking. What about you?",
          "It has been a nice, easy day. I hope yours is going well too.",
          "Busy but good, thanks. Anything fun on your side?"]
EVERYDAY_Q = ["What time should I go to bed?", "When is the best time to plant tomatoes?", "Where should we go for dinner?",
              "Who should I invite to the party?", "What should I have for lunch?", "Is it going to rain today?",
              "Should I take an umbrella?", "Is it too late for coffee?", "What's a good name for a goldfish?",
              "When should I start packing?", "What time do people usually eat dinner?", "Which film should I watch?",
              "Where do you think I should go on holiday?", "What's a good gift for my mom?", "Is tea better than coffee?",
              "How long should I boil an egg?", "What should I wear to a wedding?", "When is it too early to call someone?",
              "what should I cook tonight?", "any good books to read?", "Who's the best person to ask about gardening?",
              "What's the best way to learn a language?", "Where can I find a good recipe for soup?",
              "What day is best for a picnic?", "How do I keep plants alive?"]
SHORT = ["ok", "ok thanks", "cool", "nice", "haha", "lol", "sure", "yep", "thanks!", "great", "hmm", "yeah", "oh nice",
         "good to know", "alright", "sounds good", "ha", "true", "fair enough", "no way", "thanks", "ok cool", "right",
         "lol yeah", "nice one", "oh ok", "awesome", "perfect", "got it", "k"]
SHORT_A = ["Glad to help.", "Sure thing.", "Anytime.", "Happy to chat.", "Ha, yes.", "Great!", "Of course.",
           "You're welcome.", "Sounds good to me.", "Anything else on your mind?"]
LOWER = ["just got home from work", "so tired today lol", "cant wait for the weekend", "my cat is being so weird today",
         "ugh mondays", "finally friday", "made soup for dinner", "its raining again", "watching a movie rn",
         "my back hurts from the gym", "had the best coffee this morning", "the bus was late again",
         "i need a nap", "long day at work", "went for a run earlier", "my phone is almost dead",
         "i think im getting a cold", "the kids are finally asleep", "burnt my toast this morning",
         "so much laundry to do", "just finished a good book", "traffic was awful today"]
LONG_U = ["I finally finished painting the kitchen last night, and it took much longer than I expected.",
          "The weather has been strange lately, warm one day and cold the next, so I never know what to wear.",
          "We are thinking about getting a dog, maybe a small one, but we are not sure we have the time.",
          "My brother is visiting next month and I still have to clean the spare room before he arrives.",
          "I tried a new recipe for lentil soup yesterday and it turned out much better than I hoped.",
          "Work has been busy this week, but I am managing and the weekend is not far away.",
          "I started reading a mystery novel before bed and now I keep staying up far too late.",
          "The neighbours planted a big garden this spring and it already looks lovely from our window.",
          "I went for a long walk by the river this morning and saw a heron standing in the water.",
          "My phone has been acting up all week, the screen freezes every time I open the camera.",
          "I have been trying to drink more water during the day, but I keep forgetting my bottle.",
          "We watched an old film on Saturday night and I had forgotten how funny it was.",
          "My friend just moved to a new city and says the hardest part is finding a good bakery.",
          "I signed up for a pottery class, and my first bowl came out a little lopsided.",
          "The kids spent the whole afternoon building a fort out of blankets in the living room."]
LONG_A = ["That sounds lovely. Little projects like that can take longer than planned, but they are worth it. How do you feel about it now?",
          "I know what you mean. Days like that are hard to plan for, so layers are usually a good idea. Do you have a favourite season?",
          "That is a big decision, and it is good that you are thinking it through. A small dog can still need a lot of time. What kind were you thinking of?",
          "That sounds nice! It is good to see family, even if it means a bit of tidying first. Do you have plans together?",
          "That sounds wonderful. A good soup is perfect for this time of year, and it is nice when a new recipe works. Would you make it again?",
          "Good to hear you are managing. Busy weeks do pass, and a quiet weekend can make up for a lot. Any plans for it?",
          "What a nice habit, even if it costs a little sleep. A good mystery makes it hard to stop reading. Is it any good so far?",
          "That sounds pleasant. A garden next door is nice to look at, and it changes every week. What are they growing?",
          "That sounds peaceful. A walk by the water is a good start to the day, and herons are wonderful to watch.",
          "That sounds annoying. Sometimes a restart or an update helps with things like that. Is it an old phone?"]


def small_talk(r, lex):
    """A (user, reply) pair of small talk of one of many registers."""
    x = r.random()
    if x < 0.3:
        return ww.wide_casual_pair(r, lex)
    if x < 0.45:
        return r.choice(WEEK_Q), r.choice(WEEK_A)
    if x < 0.6:
        return r.choice(EVERYDAY_Q), r.choice(ww.ADVICE) + " " + r.choice(SHORT_A[:5] + [""]).strip()
    if x < 0.72:
        return r.choice(SHORT), r.choice(SHORT_A)
    if x < 0.86:
        return r.choice(LOWER), r.choice(LONG_A).split(". ")[0] + "."
    return r.choice(LONG_U), r.choice(LONG_A)


def _filler(r, lex, kind="filler"):
    u, a = small_talk(r, lex)
    return (kind, u, a.strip(), None, None)


def _facts(W, r, n):
    """n facts with different keywords (and keywords none of which contains another)."""
    out = []
    for k, v in W.train_facts(r):
        if all(k.lower() not in o.lower() and o.lower() not in k.lower() for o, _ in out):
            out.append((k, v))
        if len(out) == n:
            break
    return out


# The question a person types right after telling a fact: the fact's own verb ("When does my train
# leave?" after "My train leaves at 8:05"), which the wide mix draws for under 2 % of its questions, or
# the plainest form of its kind. train.py sets VERB_Q (the share of plain chats' questions drawn so)
# from world step plain_from on; at 0 nothing here is drawn.
VERB_Q = 0.0
PLAIN_VQ = {"time": ["When does {own} {kw} {v}?", "What time does {own} {kw} {v}?", "when does {own} {kw} {v}?",
                     "When does {own} {kw} {v} again?", "what time does {own} {kw} {v} again?"],
            "date": ["When does {own} {kw} {v}?", "What day does {own} {kw} {v}?"],
            "place": ["Where does {own} {kw} {v}?", "where does {own} {kw} {v} again?"],
            "name": ["What does {own} {kw} {v}?"]}
PLAIN_Q = {"time": ["When is {own} {kw}?", "What time is {own} {kw}?", "when is {own} {kw}?"],
           "date": ["When is {own} {kw}?", "What day is {own} {kw}?"],
           "place": ["Where is {own} {kw}?", "where's {own} {kw}?"],
           "name": ["Who is {own} {kw}?", "What is {own} {kw} called?", "What's {own} {kw}'s name?"],
           None: ["What is {own} {kw}?", "What's {own} {kw}?", "what is {own} {kw} again?"]}


def fact_step(r, ph, kw, val):
    """world.fact_step, or an everyday frame's own fact."""
    return everyday_fact(r, ph, kw, val) if isinstance(kw, Said) else world.fact_step(ph, kw, val)


def ask(r, ph, kw, val):
    """world.question_step, or an everyday frame's own question (no VERB_Q: a long chat's questions)."""
    return everyday_question(r, kw, val) if isinstance(kw, Said) else world.question_step(ph, kw, val)


def question_step(r, ph, kw, val):
    """world.question_step, an everyday frame's own question, or with VERB_Q a question in the fact's
    own verb or the plainest form."""
    if isinstance(kw, Said):
        return everyday_question(r, kw, val)
    if VERB_Q and isinstance(kw, ww.Key) and not kw.before and r.random() < VERB_Q:
        kind = kw.kind if kw.kind in PLAIN_Q else None
        verb = kw.verb if kw.verb and kw.verb[0] == "+" and kind in PLAIN_VQ else None
        pool = [q.replace("{v}", verb[1:]) for q in PLAIN_VQ[kind]] if verb and r.random() < 0.7 else PLAIN_Q[kind]
        own = "the" if " for the " in kw else r.choice(["my", "my", "the", "our"])
        return ("q", r.choice(pool).format(own=own, kw=kw), world.answer_text(kw, val), kw, val)
    return world.question_step(ph, kw, val)


# The share of never-stated questions that ask the told fact's frame (kind and verb) about another noun:
# the question then differs from the told fact's own question by its noun alone, so only whether the
# chat told that noun decides between copying and "I don't know." train.py sets it (DEC same_verb).
SAME_VERB = 0.0


def same_frame(r, lex, kw, told):
    """A keyword of kw's kind and verb that none of `told` contains, or None."""
    for _ in range(60):
        k, _v = ww.draw_frame(r, lex)
        if k.kind == kw.kind and k.verb == kw.verb and not k.before and \
                all(k.lower() not in o.lower() and o.lower() not in k.lower() for o in told):
            return k
    return None


def small_talk_q(r, lex):
    """with VERB_Q: the small talk right after a fact is mostly a question (about the week or an
    everyday thing), which must not be taken for the fact's question"""
    if VERB_Q and r.random() < 0.7:
        return ("filler", r.choice(WEEK_Q), r.choice(WEEK_A), None, None) if r.random() < 0.5 else \
            ("filler", r.choice(EVERYDAY_Q), r.choice(ww.ADVICE), None, None)
    return _filler(r, lex)


# The share of plain chats that are a fact (or two) and at once a small-talk question about the
# person's week or day (WEEK_Q), then maybe the fact's question: train.py sets it (DEC week_after).
# The decide stage needs it: once the question right after a fact is looked up, "How is your week
# going so far?" right after a fact is looked up too unless the mix holds enough of it.
WEEK_AFTER = 0.0


def week_steps(r, ph, lex, facts):
    st = [_filler(r, lex) for _ in range(r.choice([0, 0, 1]))]
    st.append(fact_step(r, ph, *facts[0]))
    if r.random() < 0.25:
        st.append(fact_step(r, ph, *facts[1]))
    st.append(("filler", r.choice(WEEK_Q), r.choice(WEEK_A), None, None) if r.random() < 0.7 else
              ("filler", r.choice(EVERYDAY_Q), r.choice(ww.ADVICE), None, None))
    if r.random() < 0.5:
        st.append(question_step(r, ph, *facts[0]))
    return st


def plain_steps(r, W):
    """One short plain chat: [(kind, user, reply, kw, val)] as world.bench_steps gives."""
    ph = W.phrasing(r)
    lex = W.lex
    facts = _facts(W, r, 4)
    if WEEK_AFTER and r.random() < WEEK_AFTER:
        return week_steps(r, ph, lex, facts)
    if VERB_Q and r.random() < 0.4:  # a fact told with its own verb ("my train leaves at 8:05"), asked so
        for _ in range(50):
            k, v = ww.draw_frame(r, lex)
            if k.verb and k.verb[0] == "+" and not k.before and all(k not in o and o not in k for o, _ in facts[1:]):
                facts[0] = (k, v)
                break
    if EVERYDAY:
        facts = everyday_facts(r, W, facts, EVERYDAY)
    x = r.random()
    st = [_filler(r, lex) for _ in range(r.choice([0, 0, 0, 1, 1, 2]))]
    if x < 0.3:  # right after: the fact, then its question
        st.append(fact_step(r, ph, *facts[0]))
        if r.random() < 0.2:
            st.append(fact_step(r, ph, *facts[1]))
            st.append(question_step(r, ph, *facts[r.randrange(2)]))
        else:
            st.append(question_step(r, ph, *facts[0]))
        if r.random() < 0.3:
            st.append(_filler(r, lex))
    elif x < 0.5:  # small talk right after a fact, then maybe its question
        st.append(fact_step(r, ph, *facts[0]))
        if VERB_Q:
            st.append(small_talk_q(r, lex))
            if r.random() < 0.3:
                st.append(_filler(r, lex))
        else:
            for _ in range(r.choice([1, 1, 2])):
                st.append(_filler(r, lex))
        if r.random() < 0.6:
            st.append(question_step(r, ph, *facts[0]))
    elif x < 0.7:  # not held: a question on a keyword the chat never stated
        n = r.choice([1, 1, 2])
        for i in range(n):
            st.append(fact_step(r, ph, *facts[i]))
            if r.random() < 0.3:
                st.append(_filler(r, lex))
        absent = facts[3][0]
        if SAME_VERB and isinstance(facts[0][0], ww.Key) and facts[0][0].verb and r.random() < SAME_VERB:
            absent = same_frame(r, lex, facts[0][0], [f[0] for f in facts[:n]]) or absent
        st.append(question_step(r, ph, absent, None))
        if r.random() < 0.4:
            st.append(question_step(r, ph, *facts[0]))
    elif x < 0.85:  # one line between: the fact at the window's edge
        st.append(fact_step(r, ph, *facts[0]))
        st.append(_filler(r, lex))
        st.append(question_step(r, ph, *facts[0]))
    else:  # two to three facts, small talk, questions on each in any order
        n = r.choice([2, 3])
        for i in range(n):
            st.append(fact_step(r, ph, *facts[i]))
            if r.random() < 0.5:
                st.append(_filler(r, lex))
        for i in r.sample(range(n), n):
            st.append(question_step(r, ph, *facts[i]))
            if r.random() < 0.3:
                st.append(_filler(r, lex))
    return st


def long_steps(r, W, n_facts=12, n_talk=(8, 15)):
    """A long chat in view: n_facts facts among natural small talk (longer lines among them), and
    questions on a third to a half of them (one in eight on a fact never stated), some in the middle
    of the chat and the rest at its end. About 700-1,400 tokens."""
    ph = W.phrasing(r)
    lex = W.lex
    facts = _facts(W, r, n_facts + 1)
    if EVERYDAY:
        facts = everyday_facts(r, W, facts, EVERYDAY / 2)
    told, unheld = facts[:-1], facts[-1]
    body = []
    for _ in range(r.randint(*n_talk)):
        if r.random() < 0.35:
            body.append(("filler", r.choice(LONG_U), r.choice(LONG_A), None, None))
        else:
            body.append(_filler(r, lex))
    pos = sorted(r.randrange(len(body) + 1) for _ in told)
    st, j = [], 0
    asked = []
    for i, f in enumerate(told):
        while j < pos[i]:
            st.append(body[j])
            j += 1
            if asked and r.random() < 0.15:  # a question in the middle of the chat
                st.append(ask(r, ph, *asked.pop(r.randrange(len(asked)))))
        st.append(fact_step(r, ph, *f))
        asked.append(f)
    st += body[j:]
    nq = r.randint(3, 6)
    for f in r.sample(asked, min(nq, len(asked))):
        if r.random() < 0.125:
            st.append(ask(r, ph, unheld[0], None))
        st.append(ask(r, ph, *f))
        if r.random() < 0.3:
            st.append(_filler(r, lex))
    return st


# ---- everyday frames: facts a person tells about their own life in shapes the wide frames lack ----
# "I have 62 houseplants" (a count, asked "How many houseplants do I have?"), "my aunt lives at 14 Elm
# Lane" (a person or a group and a verb of place), "June 28 is the day my lease runs out" and "7pm is
# when the party starts" (the value first, asked with the verb), "my locker is number 318", "Mrs. Reid
# is my son's tutor" (a title the answer leaves out), "the code word for our party is X", "my club's
# motto is 'x y z'" (a quoted phrase, answered without its quotes), dates like "the 23rd of October" and
# "Friday the 9th", times like "7pm". Each frame draws its own fact and its own questions; the reply
# restates the fact in the frame's relation ("the aunt lives at 14 Elm Lane.</think> 14 Elm Lane").
# train.py sets EVERYDAY (DEC everyday): the share of plain chats' facts drawn here (a long chat's: half
# of it). At 0 nothing here is drawn, so the random stream of every other recipe is unchanged.
EVERYDAY = 0.0


class Said(ww.Key):
    """A Key whose fact and questions the frame wrote (`facts`: fact bodies with {val}; `asks`:
    questions, each holding the keyword as written)."""

    def __new__(cls, kw, rel, kind, facts, asks):
        s = ww.Key.__new__(cls, kw, rel, kind)
        s.facts, s.asks = facts, asks
        return s


COUNT_NOUNS = ["houseplants", "chickens", "guests", "cousins", "books", "jars of jam", "boxes", "chairs", "tickets",
               "cupcakes", "photos", "emails", "pages", "laps", "bottles of wine", "seedlings", "students", "sheep",
               "bikes", "mugs", "candles", "pairs of shoes", "paintings", "records", "postcards", "plates",
               "apple trees", "jigsaw puzzles", "scarves", "hens", "tents", "cakes", "letters", "cookies", "shirts",
               "lamps", "stamps", "rose bushes", "sandwiches", "invitations", "balloons", "pies", "blankets"]
COUNT_DONE = ["sold", "made", "bought", "baked", "collected", "counted", "ordered", "packed", "painted", "planted",
              "written", "knitted", "read", "sent", "wrapped"]
COUNT_WHEN = ["", "", " so far", " this year", " since January", " this month", " since the spring", " this week"]
COUNT_FOR = ["party", "fete", "wedding", "school fair", "barbecue", "bake sale", "picnic", "open day", "reunion"]
ROOMS = ["garden", "greenhouse", "shed", "attic", "kitchen", "spare room", "garage", "loft"]
KIN = ["aunt", "uncle", "grandma", "grandad", "grandparents", "sister", "brother", "cousin", "best friend", "mum",
       "dad", "godmother", "old roommate", "niece", "nephew", "in-laws", "stepdad", "great aunt"]
GROUPS = ["book club", "choir", "running club", "knitting group", "chess club", "band", "study group",
          "writing group", "quiz team", "walking group", "five-a-side team", "drama group", "art class"]
VENUE_NOUNS = ["Kettle", "Anchor", "Lantern", "Fox", "Crown", "Oak", "Swan", "Teapot", "Compass", "Barrel", "Harbour",
               "Feather", "Bell", "Wheel", "Acorn", "Otter", "Lighthouse", "Spoon"]
VENUE_ADJ = ["Crooked", "Golden", "Blue", "Old", "Red", "Silver", "Little", "Green", "Copper", "Rusty", "Jolly",
             "Sleepy", "Wandering", "Hidden", "Brass", "Velvet", "Twisted", "Lucky"]
EXPIRES = [("lease", "runs out", "run out"), ("passport", "expires", "expire"), ("insurance", "renews", "renew"),
           ("warranty", "ends", "end"), ("holiday", "starts", "start"), ("course", "begins", "begin"),
           ("contract", "ends", "end"), ("free trial", "ends", "end"), ("membership", "renews", "renew"),
           ("visa", "expires", "expire"), ("subscription", "renews", "renew"), ("term", "starts", "start"),
           ("notice period", "ends", "end"), ("car tax", "runs out", "run out"), ("maternity leave", "ends", "end")]
SHOPS = ["pharmacy", "post office", "bakery", "library", "pool", "corner shop", "bank", "museum", "garden centre",
         "launderette", "butcher", "chippy", "farm shop", "tip", "sports centre", "café"]
SHOP_WHEN = ["", "", " on Saturdays", " on Sundays", " today", " on weekdays", " on thursday", " tonight"]
NUMBERED = ["gym locker", "seat", "hotel room", "table", "locker", "parking space", "house", "ward", "bus", "stall",
            "pitch", "desk", "cabin", "allotment", "plot", "pew", "row"]
WORD_HEADS = ["magic word", "code word", "safe word", "secret word", "password", "theme", "dress code", "hashtag",
              "nickname", "team name", "rhyme", "chant"]
QUOTE_HEADS = ["motto", "slogan", "status", "caption", "tagline", "catchphrase", "toast", "sign", "bio",
               "out-of-office message", "banner", "chorus"]
QUOTE_OWNERS = ["running club", "bakery", "shop", "team", "band", "family", "school", "book club", "podcast",
                "charity", "street party", "choir", "allotment group"]
TITLES = ["Mrs.", "Mr.", "Ms.", "Dr.", "Miss"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ord(d):
    return "%d%s" % (d, "th" if 10 <= d % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th"))


def _date(r, lex):
    """(value, the words before it in the fact): "23rd of October" after "the", "Friday the 9th", "12 May" ..."""
    d, m = r.randint(1, 28), r.choice(wb.MONTHS)
    k = r.randrange(4)
    if k == 0:
        return "%s of %s" % (_ord(d), m), "the "
    if k == 1:
        return "%s the %s" % (r.choice(WEEKDAYS), _ord(d)), ""
    if k == 2:
        return "%s %s" % (m, _ord(d) if r.random() < 0.3 else d), ""
    return wb.draw_value(r, lex, "date"), ""


def _time(r, lex):
    h, mi = r.randint(1, 12), r.choice([0, 0, 15, 30, 45])
    k = r.randrange(3)
    if k == 0:
        return "%d%s" % (h, r.choice(["pm", "am", "pm"])) if mi == 0 else "%d:%02d%s" % (h, mi, r.choice(["pm", "am"]))
    if k == 1:
        return "%d:%02d" % (r.randint(6, 22), r.choice([5, 10, 15, 20, 30, 40, 45, 50]))
    return wb.draw_value(r, lex, "time")


def _place(r, lex):
    """(value, the words before it): a street address, a venue ("Crooked Kettle" after "the") or a name."""
    k = r.randrange(4)
    if k == 0:
        return "%d %s %s" % (r.randint(1, 200), r.choice(lex.names_tr), r.choice(["Lane", "Road", "Street", "Close",
                                                                                  "Avenue", "Terrace"])), ""
    if k == 1:
        return "%s %s" % (r.choice(VENUE_ADJ), r.choice(VENUE_NOUNS)), "the "
    if k == 2:
        return r.choice(lex.names_tr) + r.choice(["", "", "ton", "ford", "field", " Green", " Hill"]), ""
    return ww.draw_place(r, lex), ""


def _phrase(r, lex):
    ws = r.sample(lex.words_tr, r.randint(2, 4))
    if r.random() < 0.3:
        ws.insert(r.randrange(1, len(ws)), r.choice(["before", "and", "not", "over", "then", "for"]))
    s = " ".join(ws)
    if r.random() < 0.25:
        s = s.replace(" ", ", ", 1)
    return s[0].upper() + s[1:] if r.random() < 0.4 else s


def everyday_frame(r, lex):
    """(Said, value) of one everyday frame; the frame is drawn first, then its nouns and value."""
    tr = ww._tr
    own = r.choice(["my", "my", "our"])
    Own = own[0].upper() + own[1:]
    k = r.randrange(9)
    if k == 0:  # a count
        kw, val = r.choice(tr(COUNT_NOUNS)), str(r.choice([r.randint(2, 30), r.randint(2, 400)]))
        x = r.randrange(4)
        if x == 0:
            return Said(kw, ":", "number", ["I have {val} %s" % kw, "I've got {val} %s" % kw, "We have {val} %s now" % kw,
                                            "i have {val} %s in the %s" % (kw, r.choice(ROOMS))],
                        ["How many %s do I have?" % kw, "how many %s have I got?" % kw,
                         "How many %s do we have?" % kw]), val
        if x == 1:
            v = r.choice(COUNT_DONE)
            return Said(kw, ":", "number", ["I've %s {val} %s%s" % (v, kw, r.choice(COUNT_WHEN))],
                        ["How many %s have I %s?" % (kw, v), "how many %s did I say I'd %s?" % (kw, v)]), val
        if x == 2:
            ev = r.choice(COUNT_FOR)
            return Said(kw, ":", "number", ["We need {val} %s for the %s" % (kw, ev), "we need {val} %s for the %s" % (kw, ev)],
                        ["How many %s do we need for the %s?" % (kw, ev), "How many %s do we need?" % kw]), val
        room = r.choice(ROOMS)
        return Said(kw, ":", "number", ["There are {val} %s in the %s" % (kw, room)],
                    ["How many %s are in the %s?" % (kw, room), "How many %s are there in the %s?" % (kw, room)]), val
    if k == 1:  # a person or a group and a verb of place
        val, pre = _place(r, lex)
        if r.random() < 0.6:
            kw = r.choice(tr(KIN))
            pl = kw in ("grandparents", "in-laws")
            rel, q = r.choice([("lives at" if pre or val[0].isdigit() else "lives in", "Where does %s %s live?"),
                               ("works at", "Where does %s %s work?"), ("grew up in", "Where did %s %s grow up?"),
                               ("is staying at", "Where is %s %s staying?")])
            if pl:
                rel = rel.replace("lives", "live").replace("is staying", "are staying")
                q = q.replace("does", "do").replace("Where is", "Where are")
        else:
            kw = r.choice(tr(GROUPS))
            rel, q = r.choice([("meets at", "Where does %s %s meet?"), ("rehearses at", "Where does %s %s rehearse?"),
                               ("meets in", "Where does %s %s meet?")])
        tail = r.choice(["", "", "", " on Wednesdays", " every Tuesday", " now", " these days", " on Sundays"])
        return Said(kw, rel + " " + pre.strip() if pre else rel, "place", ["%s %s %s %s{val}%s" % (Own, kw, rel, pre, tail)],
                    [q % (own, kw), (q % (own, kw)).lower()]), val
    if k == 2:  # a date, the value often first
        kw, v3, v = r.choice([e for e in EXPIRES if not lexicon.held(e[0])])
        val, pre = _date(r, lex)
        rel = v3 + " on" + (" " + pre.strip() if pre else "")
        return Said(kw, rel, "date", ["{val} is the day %s %s %s" % (own, kw, v3), "%s %s %s on %s{val}" % (Own, kw, v3, pre)],
                    ["When does %s %s %s?" % (own, kw, v), "What day does %s %s %s?" % (own, kw, v)]), val
    if k == 3:  # a time, the value often first
        kw = r.choice(tr(ww.EVENTS))
        v3, v = r.choice([("starts", "start"), ("begins", "begin"), ("kicks off", "kick off"), ("finishes", "finish")])
        val = _time(r, lex)
        return Said(kw, v3 + " at", "time", ["{val} is when %s %s %s" % (own, kw, v3), "%s %s %s at {val}" % (Own, kw, v3)],
                    ["When does %s %s %s?" % (own, kw, v), "What time does %s %s %s?" % (own, kw, v)]), val
    if k == 4:  # a shop's hours
        kw, when = r.choice(tr(SHOPS)), r.choice(SHOP_WHEN)
        v3, v = r.choice([("closes", "close"), ("opens", "open")])
        val = _time(r, lex)
        return Said(kw, v3 + " at", "time", ["The %s %s at {val}%s" % (kw, v3, when), "the %s %s at {val}%s" % (kw, v3, when)],
                    ["What time does the %s %s%s?" % (kw, v, when), "When does the %s %s?" % (kw, v)]), val
    if k == 5:  # a number of a thing
        kw, val = r.choice(tr(NUMBERED)), str(r.randint(1, 400))
        return Said(kw, "is number", "number", ["%s %s is number {val}" % (Own, kw), "{val} is the number of %s %s" % (own, kw)],
                    ["What number is %s %s?" % (own, kw), "What's the number of %s %s?" % (own, kw)]), val
    if k == 6:  # a person with a title, the name often first
        kw = r.choice([r.choice(tr(KIN)) + "'s ", "", "new "]) + r.choice(tr(ww.PEOPLE))
        t, val = r.choice(TITLES), r.choice(lex.names_tr)
        return Said(kw, "is " + t, "name", ["%s {val} is %s %s" % (t, own, kw), "%s %s is %s {val}" % (Own, kw, t)],
                    ["Who is %s %s?" % (own, kw), "What's the name of %s %s?" % (own, kw), "who's %s %s?" % (own, kw)]), val
    if k == 7:  # a word for something, the value often first
        head = r.choice(tr(WORD_HEADS))
        kw = head + r.choice([" for %s %s" % (own, r.choice(tr(ww.EVENTS + COUNT_FOR))), ""])
        val = wb.draw_value(r, lex, "word")
        val = val[0].upper() + val[1:] if r.random() < 0.5 else val
        tail = r.choice(["", " we agreed on", " the kids picked", " we chose"]) if " for " not in kw else ""
        return Said(kw, "is", "word", ["The %s%s is {val}" % (kw, tail), "{val} is the %s%s" % (kw, tail),
                                       "%s %s is {val}" % (Own, kw)],
                    ["What's the %s%s?" % (kw, tail), "What is %s %s?" % (own, kw)]), val
    # a quoted phrase, answered without the quotes
    head, grp = r.choice(tr(QUOTE_HEADS)), r.choice(tr(QUOTE_OWNERS))
    val = _phrase(r, lex)
    if r.random() < 0.5:
        kw = "%s's %s" % (grp, head)
        return Said(kw, "is", "phrase", ["%s %s is '{val}'" % (Own, kw), "'{val}' is %s %s" % (own, kw)],
                    ["What's %s %s?" % (own, kw), "What is %s %s again?" % (own, kw)]), val
    return Said(head, "says", "phrase", ["%s %s says '{val}'" % (Own, head), "%s %s reads '{val}'" % (Own, head)],
                ["What does %s %s say?" % (own, head), "what does %s %s say again?" % (own, head)]), val


def everyday_facts(r, W, facts, share):
    """facts with each replaced by an everyday frame at the given share (keywords kept apart, values
    none of the held-out benchmark's)."""
    out = list(facts)
    for i in range(len(out)):
        if r.random() >= share:
            continue
        others = [o for j, (o, _) in enumerate(out) if j != i]
        for _ in range(20):
            k, v = everyday_frame(r, W.lex)
            if v not in getattr(W, "eval_values", ()) and \
                    all(k.lower() not in o.lower() and o.lower() not in k.lower() for o in others):
                out[i] = (k, v)
                break
    return out


def everyday_fact(r, ph, kw, val):
    """The fact step of an everyday frame: one of its bodies, an optional lead and tail, now and then
    typed fast (lowercase start, no full stop)."""
    body = r.choice(kw.facts).replace("{val}", val)
    lead = r.choice(["", "", "", "", "Hey, ", "Just so you know, ", "FYI ", "Oh, and ", "By the way, ", "Note: "])
    keep = body.startswith((val, "'", "I ", "I'")) or body.split()[0] in TITLES  # a value or "I" keeps its case
    s = lead + (body if not lead or keep else body[0].lower() + body[1:])
    s += r.choice(["", "", "", ", thanks", ", don't let me forget", ", just so you know", ". Exciting!"])
    if r.random() < 0.2:
        return ("fact", s.rstrip(".!?"), ph._pick(ph.replies), kw, val)
    return ("fact", s if s[-1] in ".!?" else s + ".", ph._pick(ph.replies), kw, val)


def everyday_question(r, kw, val):
    lead = r.choice(["", "", "", "Hey, ", "Sorry, ", "Quick question: ", "Ok so ", "Wait, "])
    q = r.choice(kw.asks)
    q = lead + (q[0].lower() + q[1:] if lead else q)
    return ("q", q, world.answer_text(kw, val), kw, val)
