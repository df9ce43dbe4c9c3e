"""Every bad input raises RecallError with the library's message; none crashes the interpreter."""
import os

import numpy as np
import pytest


def raises(recall, status, words, fn, *a, **kw):
    with pytest.raises(recall.RecallError) as e:
        fn(*a, **kw)
    assert e.value.status == status, "%s: %s" % (e.value.status, e.value)
    for w in words:
        assert w in str(e.value), "%r not in %r" % (w, str(e.value))
    return e.value


def test_bad_blobs(recall, worldA, tmp_path):
    blob, _, _ = worldA
    data = open(blob, "rb").read()
    cut = tmp_path / "cut.blob"
    cut.write_bytes(data[:len(data) // 2])
    e = raises(recall, "FORMAT", [str(cut)], recall.open, str(cut))
    assert "size" in str(e) or "bytes" in str(e) or "truncated" in str(e)
    raises(recall, "FORMAT", ["<memory>"], recall.open, data[:len(data) // 2])
    raises(recall, "FORMAT", [], recall.open, b"\0" * 4096)
    raises(recall, "IO", [str(tmp_path / "absent.blob")], recall.open, str(tmp_path / "absent.blob"))
    flipped = bytearray(data)
    flipped[len(data) - 100] ^= 0xFF  # inside the last tensor: found by verify
    e = raises(recall, "CHECKSUM", [], recall.open, bytes(flipped), verify=True)
    m = recall.open(data)  # the bytes themselves: the same model
    ids = m.tokenize("Hello there\n")
    assert m.forward(ids).logits.tobytes() == worldA[2].forward(ids).logits.tobytes()
    m.close()
    raises(recall, "ARG", ["kv"], recall.open, blob, kv="f8")
    raises(recall, "ARG", ["rope"], recall.open, blob, rope_scaling="yarn:x")


def test_bad_ids_and_sizes(recall, worldA):
    _, _, m = worldA
    V = m.vocab
    raises(recall, "ARG", ["token %d at position 1" % V, "vocab (%d)" % V], m.forward, [1, V])
    raises(recall, "ARG", ["token -1"], m.forward, [-1])
    raises(recall, "ARG", ["int32"], m.forward, [2 ** 40])
    raises(recall, "ARG", ["integers"], m.forward, [1.5])
    raises(recall, "ARG", ["no input ids"], m.logits, [])
    raises(recall, "ARG", ["at least 1"], m.forward, [])
    raises(recall, "LIMIT", [str(m.max_pos + 1), str(m.max_pos)], m.forward, [1] * (m.max_pos + 1))
    raises(recall, "ARG", ["at least 2"], m.score, [5])
    raises(recall, "ARG", ["capture"], m.forward, [1, 2], capture=["attention"])
    raises(recall, "ARG", ["encoder's vocab"], m.embed, [10 ** 6])
    raises(recall, "ARG", ["0 ids"], m.embed, [])
    raises(recall, "LIMIT", [str(m.dims["bert_max_ids"])], m.embed, [1] * (m.dims["bert_max_ids"] + 1))
    raises(recall, "ARG", ["outside the vocab"], m.pool, [V])
    raises(recall, "SHAPE", ["gate.dim is %d" % m.dims["gate_dim"]], m.gate, np.zeros(5, np.float32))
    raises(recall, "SHAPE", ["bridge.kdim"], m.bridge, np.zeros(m.dims["gate_dim"]), np.zeros(3))
    assert m.detokenize([V, 10 ** 6]) == ""  # dropped, as Hugging Face does


def test_bad_loops(recall, worldA):
    _, _, m = worldA
    raises(recall, "ARG", ["mode 'fast'"], m.loop, mode="fast")
    raises(recall, "ARG", ["arm"], m.loop, arm="RC")
    e = raises(recall, "ARG", ["faithful"], m.loop, mode="faithful", edge="inject")  # the library's own rule
    raises(recall, "ARG", ["draft"], m.loop, draft=1000)
    raises(recall, "ARG", ["simd"], m.loop, simd="sse9")
    with m.loop() as lp:
        raises(recall, "ARG", ["empty feed"], lambda: lp.turn([]).wait())
        raises(recall, "ARG", ["outside the vocab"], lambda: list(lp.turn([m.vocab])))
    raises(recall, "ARG", ["loop is closed"], lp.turn, [1])


def test_closed_model(recall, worldA):
    blob, _, _ = worldA
    m = recall.open(blob)
    lp = m.loop()
    m.close()
    m.close()  # twice is fine
    for call in (lambda: m.forward([1]), lambda: m.tokenize("x"), lambda: m.score([1, 2]), lambda: m.embed("x"),
                 lambda: m.loop(), lambda: lp.turn([1])):
        raises(recall, "ARG", ["closed"], call)


def test_cancel_leaves_the_loop_usable(recall, worldA):
    _, _, m = worldA
    feed = m.chat_segment("What is my locker code?")
    with m.loop() as lp:
        want = lp.reply(feed).reply.ids
        t = lp.turn(feed)
        for ev in t:
            if ev.kind == "token":
                break  # leaves the turn: cancelled
        assert t.reply is None and t.cancelled
        assert lp.reply(feed).reply.ids == want
