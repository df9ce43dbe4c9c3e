"""The bindings give the command line's bits: forward --dump, score --per-position, embed, pool,
heads and a whole replayed problem (every turn's trace record byte for byte, the events of each
turn), on worldA and on the trained world."""
import json
import os

import numpy as np
import pytest

from conftest import FULL, ROOT, cli

TEXT = "My locker code is 4512. What is my locker code?"


def ids_of(m):
    return m.chat_segment(TEXT, "It is 4512.") + m.chat_segment("Say it again.", with_eos=True)


def exact(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("profile", [[], ["--kv", "f16"], ["--numerics", "q8"]], ids=["exact", "kv-f16", "q8"])
def test_forward_equals_dump(world, recall, tmp_path, profile):
    name, blob, _, m = world
    ids = ids_of(m)
    kw = {}
    if profile:
        kw = {profile[0][2:]: profile[1]}
        m = recall.open(blob, **kw)
    out = m.forward(ids, capture=["logits", "hidden", "q_proj", "logits_last"])
    dump = tmp_path / "f.npz"
    cli("forward", blob, "--ids", json.dumps(ids), "--dump", dump, *profile)
    z = np.load(dump)
    assert z["ids"].tolist() == ids
    assert exact(out.logits, z["logits"])
    assert exact(out.hidden_last, z["hidden_last"])
    assert exact(out.q_layers, z["q_layers"])
    assert exact(out.logits_last, z["logits"][-1])
    assert exact(m.logits(ids), z["logits"][-1])  # recall_forward, the version-0 call
    if profile:
        m.close()


def test_score_equals_per_position(world, tmp_path):
    name, blob, _, m = world
    ids = ids_of(m)
    s = m.score(ids)
    js = tmp_path / "s.json"
    cli("score", blob, "--ids", json.dumps(ids), "--per-position", "--json", js)
    pos = json.load(open(js))["positions"]
    assert [p["pos"] for p in pos] == list(range(len(ids) - 1))
    assert s.nll.tolist() == [p["nll"] for p in pos]  # %.17g: the doubles themselves
    assert s.greedy.tolist() == [p["greedy"] for p in pos]
    assert [p["target"] for p in pos] == ids[1:]


def test_embed_and_pool_equal_dumps(world, tmp_path):
    name, blob, _, m = world
    text = tmp_path / "t.txt"
    text.write_text(TEXT, encoding="utf-8")
    cli("embed", blob, "--file", text, "--dump", tmp_path / "e.npz")
    z = np.load(tmp_path / "e.npz")
    assert m.bert_tokenize(TEXT) == z["ids"].tolist()
    assert exact(m.embed(TEXT), z["emb"])
    assert exact(m.embed(z["ids"]), z["emb"])
    ids = ids_of(m)
    cli("pool", blob, "--ids", json.dumps(ids), "--dump", tmp_path / "p.npz")
    assert exact(m.pool(ids), np.load(tmp_path / "p.npz")["sp"])


def test_heads_equal_cli(world, tmp_path):
    name, blob, _, m = world
    q = m.gate_feature(m.forward(ids_of(m), capture=["q_proj"]).q_proj)
    e = m.embed(TEXT)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "e.npy", e)
    out = cli("heads", blob, "--q", tmp_path / "q.npy", "--emb", tmp_path / "e.npy").stdout.split()
    score, fires = m.gate(q)
    assert np.float32(out[1]) == np.float32(score) and int(out[3]) == int(fires)  # %.9g: the float itself
    assert np.float32(out[5]) == np.float32(m.bridge(q, e))


def turn_lines(path):
    with open(path, "rb") as f:
        lines = [ln.rstrip(b",") for ln in f.read().split(b"\n") if ln.startswith(b'{"kind"')]
    return [ln[:-1] if ln.endswith(b"}]") else ln for ln in lines]  # the last one closes "turns"


def tail(records, n):
    return records[len(records) - n:] if n else []


def check_events(turn_rec, events, whole=False):
    """A turn's streamed events are its trace record, in order: every token; the gates, fires and
    rebuilds this turn computed, i.e. the record's last ones (all of them when whole: the loop
    carried nothing into the turn)."""
    assert [e.token for e in events if e.kind == "token"] == turn_rec["reply"]
    gates = [[e.c0, float("%.9g" % e.score), bool(e.fired)] for e in events if e.kind == "gate"]
    fires = [[e.c0, e.n_candidates, e.ids, bool(e.injected)] for e in events if e.kind == "fire"]
    rebuilds = [[e.c0, e.has_sp, e.inj_len, e.window_len, e.reused] for e in events if e.kind == "rebuild"]
    assert rebuilds, "a turn rebuilds at least once"
    if whole:
        assert len(gates) == len(turn_rec["gates"]) and len(rebuilds) == len(turn_rec["rebuilds"])
    assert gates == tail(turn_rec["gates"], len(gates))
    assert fires == tail([[f["c0"], f["ncand"], f["rid"], f["injected"]] for f in turn_rec["fires"]], len(fires))
    assert rebuilds == tail([r + [u] for r, u in zip(turn_rec["rebuilds"], turn_rec["rebuild_reused"])], len(rebuilds))


def replay_both(recall, m, blob, bench, tmp_path, problem=0, flags=(), **opts):
    """The problem replayed by the bindings and by ./recall replay: the two trace files."""
    seen = []
    doc = recall.replay(m, bench, problem, on_turn=lambda i, t: seen.append(t), **opts)
    py = tmp_path / ("py-%d.json" % problem)
    recall.write_trace(doc, py)
    ref = tmp_path / ("cli-%d.json" % problem)
    cli("replay", blob, "--bench", bench, "--problem", problem, "--trace", ref, *flags)
    assert turn_lines(py) == turn_lines(ref) and len(turn_lines(ref)) == len(seen) > 0
    full = recall.read_trace(ref)
    assert doc["final_history"] == full["final_history"] and doc["steps"] == full["steps"]
    for t, rec in zip(seen, full["turns"]):
        check_events(rec, t.events)
        assert t.reply.ids == rec["reply"] and t.trace["reply_text"] == rec["reply_text"]
        assert t.reply.text == m.detokenize(rec["reply"])
    out = cli("compare", py, ref)
    assert "AGREE" in out.stdout
    return py, ref


def test_replay_equals_cli(world, recall, tmp_path):
    name, blob, bench, m = world
    py, _ = replay_both(recall, m, blob, bench, tmp_path)
    if name == "worldA":  # and the Hugging Face run of the same problem
        assert "AGREE" in cli("compare", py, os.path.join(ROOT, "tests/golden/worldA/loop_A_seed0_faithful_fp32.json")).stdout


def test_turn_after_reset_streams_its_whole_record(world, recall, tmp_path):
    """The last turn of problem 0 alone on a fresh loop: every record streamed, the same record as
    in the whole replay (the carried state changes speed, not results)."""
    name, blob, bench, m = world
    ref = tmp_path / "cli.json"
    cli("replay", blob, "--bench", bench, "--problem", 0, "--trace", ref)
    doc = recall.read_trace(ref)
    last = doc["turns"][-1]
    feed = doc["final_history"][:last["feed_len"]]
    with m.loop() as lp:
        lp.turn(m.chat_segment("warm-up")).wait()
        lp.reset()
        t = lp.turn(feed)
        events = list(t)
    check_events(last, events, whole=True)
    speed = ("rows_computed", "rows_reused", "rebuild_reused", "bert_encodes")  # what carried state saves
    assert {k: v for k, v in t.trace.items() if k not in speed} == \
        {k: v for k, v in last.items() if k not in speed + ("kind", "user", "feed_len")}


def test_trained_chat_setting_equals_cli(recall, tmp_path):
    """The options the page and the demo use, on the world they are for."""
    from conftest import WORLDS
    blob, bench = WORLDS["trained"]
    with recall.open(blob) as m:
        replay_both(recall, m, blob, bench, tmp_path, 1, ("--mode", "clean", "--span", "exchange", "--edge", "exchange",
                                                          "--rerank", "single", "--top-k", "1", "--threads", "2"),
                    mode="clean", span="exchange", edge="exchange", rerank="single", top_k=1, threads=2)


@pytest.mark.full
@pytest.mark.parametrize("problem", [1, 2])
@pytest.mark.parametrize("cfg", [
    ((), {}),
    (("--mode", "clean"), {"mode": "clean"}),
    (("--arm", "SP"), {"arm": "SP"}),
    (("--mode", "clean", "--edge", "inject", "--kv", "f16"), {"mode": "clean", "edge": "inject", "kv": "f16"}),
    (("--numerics", "q8", "--threshold", "-1"), {"numerics": "q8", "threshold": -1}),
], ids=["faithful", "clean", "SP", "clean-edge-inject-f16", "q8-threshold"])
def test_replay_configs_equal_cli(world, recall, tmp_path, problem, cfg):
    name, blob, bench, m = world
    replay_both(recall, m, blob, bench, tmp_path, problem, cfg[0], **cfg[1])


@pytest.mark.full
def test_long_forward_equals_dump(worldA, tmp_path):
    blob, _, m = worldA
    ids = [int(x) for x in np.random.RandomState(7).randint(0, m.vocab, 1500)]
    out = m.forward(ids, capture=["logits", "hidden", "q_proj"])
    cli("forward", blob, "--ids", json.dumps(ids), "--dump", tmp_path / "f.npz")
    z = np.load(tmp_path / "f.npz")
    assert exact(out.logits, z["logits"]) and exact(out.hidden, z["hidden_last"]) and exact(out.q_proj, z["q_layers"])
