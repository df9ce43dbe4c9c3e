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

Small talk here is of many registers: the wide world's, questions about the week, short replies
("ok thanks"), questions about everyday things that start like a fact's question ("What time should
I go to bed?") and lowercase chatter. Everything is drawn from the random.Random it is given.
"""
import world
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


def question_step(r, ph, kw, val):
    """world.question_step, or with VERB_Q a question in the fact's own verb or the plainest form."""
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
    st.append(world.fact_step(ph, *facts[0]))
    if r.random() < 0.25:
        st.append(world.fact_step(ph, *facts[1]))
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
    x = r.random()
    st = [_filler(r, lex) for _ in range(r.choice([0, 0, 0, 1, 1, 2]))]
    if x < 0.3:  # right after: the fact, then its question
        st.append(world.fact_step(ph, *facts[0]))
        if r.random() < 0.2:
            st.append(world.fact_step(ph, *facts[1]))
            st.append(question_step(r, ph, *facts[r.randrange(2)]))
        else:
            st.append(question_step(r, ph, *facts[0]))
        if r.random() < 0.3:
            st.append(_filler(r, lex))
    elif x < 0.5:  # small talk right after a fact, then maybe its question
        st.append(world.fact_step(ph, *facts[0]))
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
            st.append(world.fact_step(ph, *facts[i]))
            if r.random() < 0.3:
                st.append(_filler(r, lex))
        absent = facts[3][0]
        if SAME_VERB and isinstance(facts[0][0], ww.Key) and facts[0][0].verb and r.random() < SAME_VERB:
            absent = same_frame(r, lex, facts[0][0], [f[0] for f in facts[:n]]) or absent
        st.append(question_step(r, ph, absent, None))
        if r.random() < 0.4:
            st.append(question_step(r, ph, *facts[0]))
    elif x < 0.85:  # one line between: the fact at the window's edge
        st.append(world.fact_step(ph, *facts[0]))
        st.append(_filler(r, lex))
        st.append(question_step(r, ph, *facts[0]))
    else:  # two to three facts, small talk, questions on each in any order
        n = r.choice([2, 3])
        for i in range(n):
            st.append(world.fact_step(ph, *facts[i]))
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
                st.append(world.question_step(ph, *asked.pop(r.randrange(len(asked)))))
        st.append(world.fact_step(ph, *f))
        asked.append(f)
    st += body[j:]
    nq = r.randint(3, 6)
    for f in r.sample(asked, min(nq, len(asked))):
        if r.random() < 0.125:
            st.append(world.question_step(ph, unheld[0], None))
        st.append(world.question_step(ph, *f))
        if r.random() < 0.3:
            st.append(_filler(r, lex))
    return st
