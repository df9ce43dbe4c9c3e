"""Long calls release the GIL; two threads on two models give the bits of a serial run."""
import threading
import time

import numpy as np


def counting_during(fn):
    """How far a Python thread counts while fn runs on this one, and how far it counts alone in
    the same time (both in increments)."""
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.05)
    c0, t0 = count[0], time.perf_counter()
    fn()
    c1, t1 = count[0], time.perf_counter()
    time.sleep(t1 - t0)  # the same time with this thread asleep: the counter's own pace
    c2 = count[0]
    stop.set()
    th.join()
    return c1 - c0, c2 - c1, t1 - t0


def test_forward_releases_the_gil(worldA):
    _, _, m = worldA
    ids = [int(x) for x in np.random.RandomState(1).randint(0, m.vocab, 1024)]
    during, alone, secs = counting_during(lambda: m.forward(ids, capture=["q_proj"]))
    assert secs > 0.05, "the call must be long enough to measure (%.3f s)" % secs
    # with the GIL held the counter would stop for the whole call (it gets at most one switch
    # interval, 5 ms); released, it runs at a good part of its own pace
    assert during > 0.25 * alone, (during, alone, secs)


def work(m):
    ids = m.chat_segment("My locker code is 4512.", "Noted.") + m.chat_segment("What is my locker code?", with_eos=True)
    out = m.forward(ids, capture=["logits", "hidden", "q_proj"])
    with m.loop(threads=1) as lp:
        t = lp.reply(ids)
    return (out.logits.tobytes(), out.hidden.tobytes(), out.q_proj.tobytes(), m.score(ids).nll.tobytes(),
            m.embed("locker code").tobytes(), t.reply.ids, t.trace_json)


def test_two_threads_two_models_same_bits(recall, world):
    name, blob, _, _ = world
    serial = work(recall.open(blob))
    models = [recall.open(blob), recall.open(open(blob, "rb").read())]
    results = [None, None]

    def run(i):
        results[i] = work(models[i])

    ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert results[0] == serial and results[1] == serial
    for m in models:
        m.close()


def test_one_model_two_threads_take_turns(recall, worldA):
    """Two threads on one model: its lock makes them take turns (the C handles are not locked)."""
    _, _, m = worldA
    ids = [int(x) for x in np.random.RandomState(2).randint(0, m.vocab, 300)]
    want = m.forward(ids).logits.tobytes()
    got = []
    ths = [threading.Thread(target=lambda: got.append(m.forward(ids).logits.tobytes())) for _ in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert got == [want] * 4
