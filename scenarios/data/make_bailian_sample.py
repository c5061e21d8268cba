"""Writes bailian_sample.jsonl: a synthetic request trace in the format of Alibaba's
Qwen-Bailian usage traces (github.com/alibaba-edu/qwen-bailian-usagetraces-anon, README
"Data Specification of the Traces"; the KVCache-in-the-wild paper, USENIX ATC '25): one
JSON object a line, {"chat_id", "parent_chat_id" (-1 for a root request), "timestamp"
(seconds from the trace's start), "input_length", "output_length", "type"
(text/search/image/file), "turn", "hash_ids" (one id per 16-token block; requests sharing
their first ids share that prefix)}, for the bundled bailian_sessions.rhai scenario.

What it holds, the features `runner trace analyze` reports:
- 36 root sessions of 1 to 6 turns; each later turn's hash_ids are the previous turn's, then
  blocks for the previous answer, then the new question (the context grows);
- two system prompts (24 and 40 blocks) that most sessions start with, so sessions share a
  prefix with each other;
- child chats: now and then a turn opens a sub-agent's chat (turn 1, parent_chat_id the
  opening chat of another session) that starts with its parent's context and runs 1 to 3
  turns of its own.
Deterministic (seed 42); run `python3 make_bailian_sample.py` to rebuild."""
import json
import random

BLOCK = 16
ROOTS = 36
rng = random.Random(42)
next_block = 0


def fresh(n):
    global next_block
    ids = list(range(next_block, next_block + n))
    next_block += n
    return ids


SYSTEMS = [fresh(24), fresh(40)]
chats = []  # dicts without chat_id, numbered once sorted by time


def request(t, parent, turn, ids, kind):
    chat = {"parent": parent, "timestamp": round(t, 3), "turn": turn, "hash_ids": ids,
            "input_length": BLOCK * len(ids) - rng.randint(0, BLOCK - 1),
            "output_length": rng.randint(16, 400), "type": kind}
    chats.append(chat)
    return chat


def conversation(t, parent, context, turns, children):
    """A chat of `turns` turns from time t; a turn may open a child chat."""
    prev = parent
    for turn in range(1, turns + 1):
        if turn > 1:
            answer = -(-prev["output_length"] // BLOCK)
            context = context + fresh(answer + rng.randint(1, 12))
            t += rng.uniform(2.0, 12.0)  # the user reads and types
        kind = rng.choices(["text", "search", "file", "image"], [8, 2, 1, 1])[0]
        prev = request(t, prev if turn > 1 else parent, turn, context, kind)
        if children and rng.random() < 0.15:
            # A sub-agent: its own chat on its parent's context, started a moment later.
            conversation(t + rng.uniform(0.5, 2.0), prev, context + fresh(rng.randint(2, 8)),
                         rng.randint(1, 3), False)


start = 0.0
for root in range(ROOTS):
    system = rng.choice(SYSTEMS) if rng.random() < 0.75 else []
    conversation(start, None, system + fresh(rng.randint(2, 20)), rng.randint(1, 6), True)
    start += rng.expovariate(1 / 1.5)  # sessions arrive at 0.67/s on average

chats.sort(key=lambda c: c["timestamp"])
for number, chat in enumerate(chats):
    chat["chat_id"] = number
with open("bailian_sample.jsonl", "w") as f:
    for chat in chats:
        parent = chat["parent"]["chat_id"] if chat["parent"] else -1
        f.write(json.dumps({"chat_id": chat["chat_id"], "parent_chat_id": parent,
                            "timestamp": chat["timestamp"], "input_length": chat["input_length"],
                            "output_length": chat["output_length"], "type": chat["type"],
                            "turn": chat["turn"], "hash_ids": chat["hash_ids"]}) + "\n")
