#!/usr/bin/python3
"""decide_probe.py - a decoder's look-up-or-not decision on short chats, in torch, whole chat in view:

    /usr/bin/python3 tools/train_world/lab/decide_probe.py WORLD_DIR [CKPT] [--chats FILE.json]

WORLD_DIR gives the tokenizer and config (and the weights unless CKPT, a train.py checkpoint, is
given: a run's decoder mid-training). Each chat is a list of user lines; every reply is the
decoder's own greedy one (up to 64 ids), as `recall chat` makes it while the chat fits the window.
Prints each chat's last reply and whether its first id is "<think>" (look it up) and, with
"expect" in the chat file, a score. The default chats are a tuning set (the headline cases of the
plain-chat work), never a blind one.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import nets  # noqa: E402
import tok  # noqa: E402
import world  # noqa: E402
from check_engine import read_safetensors  # noqa: E402

# (user lines, expected: a value, "IDK" or "TALK")
DEFAULT = [
    (["My train leaves at 8:05 tomorrow morning.", "When does my train leave?"], "8:05"),
    (["My train leaves at 8:05.", "When does my train leave?"], "8:05"),
    (["The meeting starts at 9:40.", "When does the meeting start?"], "9:40"),
    (["My ferry departs at 17:20.", "What time does my ferry depart?"], "17:20"),
    (["My piano lesson is at 4:15 on Friday.", "When is my piano lesson?"], "4:15"),
    (["My new dentist is called Halvorsen.", "Who is my dentist?"], "Halvorsen"),
    (["The wifi password is maple7.", "What's the wifi password?"], "maple7"),
    (["Just so you know, my meeting time is 14:30.", "How is your week going so far?"], "TALK"),
    (["My dentist appointment is at 9:15.", "How is your week going so far?"], "TALK"),
    (["My flight lands at 7:40.", "What should I cook tonight?"], "TALK"),
    (["My locker number is 118.", "How was your weekend?"], "TALK"),
    (["The plumber is coming at 10:30.", "how are you doing?"], "TALK"),
    (["My cousin's name is Dagny.", "What are you up to this weekend?"], "TALK"),
    (["The parking spot is B12.", "Did you sleep well?"], "TALK"),
    (["The gate code is 4471.", "ok thanks"], "TALK"),
    (["My train leaves at 8:05.", "When does my bus leave?"], "IDK"),
    (["My sister's name is Ingrid.", "What is my locker number?"], "IDK"),
    (["The hotel is on Birch Street.", "I went for a walk by the river today.", "Where is the hotel?"], "Birch Street"),
]


def load(world_dir, ckpt):
    cfg = json.load(open(os.path.join(world_dir, "qwen2", "config.json")))
    qc = dict(hidden=cfg["hidden_size"], layers=cfg["num_hidden_layers"], heads=cfg["num_attention_heads"],
              kv_heads=cfg["num_key_value_heads"], head_dim=cfg["hidden_size"] // cfg["num_attention_heads"],
              ffn=cfg["intermediate_size"], vocab=cfg["vocab_size"], theta=cfg.get("rope_theta", 10000.0),
              eps=cfg.get("rms_norm_eps", 1e-6), max_pos=cfg["max_position_embeddings"])
    model = nets.Qwen2(qc)
    if ckpt:
        model.load_state_dict(torch.load(ckpt)["model"])
    else:
        sd = read_safetensors(os.path.join(world_dir, "qwen2", "model.safetensors"))
        model.load_state_dict({k[len("model."):] if k.startswith("model.") else k: v for k, v in sd.items()})
    model.eval()
    tj = json.load(open(os.path.join(world_dir, "qwen2", "tokenizer.json"), encoding="utf-8"))
    bpe = tok.BPE(tj["model"]["vocab"], [tuple(m) for m in tj["model"]["merges"]])
    sp = {a["content"]: a["id"] for a in tj["added_tokens"]}
    return model, bpe, sp


@torch.no_grad()
def chat(model, bpe, sp, lines):
    ids = [sp[world.BOS_S]]
    eos = sp[world.EOS_S]
    reply = []
    for i, u in enumerate(lines):
        ids += bpe.encode((world.EOS_S if i else "") + world.USER_S + u + world.ASSIST_S)
        reply = []
        for _ in range(64):
            x = model.embed_tokens(torch.tensor([ids]))
            nxt = int(model(x)[0][0, -1].argmax())
            if nxt == eos:
                break
            ids.append(nxt)
            reply.append(nxt)
    return reply


def main():
    args = sys.argv[1:]
    chats = DEFAULT
    if "--chats" in args:
        i = args.index("--chats")
        chats = [(c["lines"], c.get("expect")) for c in json.load(open(args[i + 1]))]
        del args[i:i + 2]
    model, bpe, sp = load(args[0], args[1] if len(args) > 1 else None)
    think = sp["<think>"]
    ok = 0
    for lines, want in chats:
        rep = chat(model, bpe, sp, lines)
        text = bpe.decode(rep)
        ans = text.split("</think>")[-1].strip().rstrip(".").strip()
        looked = bool(rep) and rep[0] == think
        good = (want == "TALK" and not looked) or (want == "IDK" and ans.startswith("I don't know")) or ans == want
        ok += good
        print("%s %-5s %-60s -> %s" % ("ok " if good else "BAD", "look" if looked else "talk", " | ".join(lines)[-60:],
                                      ans[:70]))
    print("%d/%d" % (ok, len(chats)))


if __name__ == "__main__":
    main()
