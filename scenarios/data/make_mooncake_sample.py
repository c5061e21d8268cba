"""Writes mooncake_sample.jsonl: a synthetic request trace in the Mooncake trace format (one
JSON object a line: {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids":
[...]}) for the bundled trace_replay.rhai scenario. Each hash id names one 512-token block
of the prompt; requests of one "session" share their first blocks (a system prompt and the
conversation so far), as in the real traces, so a prefix cache has something to reuse.
Deterministic; run `python3 make_mooncake_sample.py` to rebuild."""
import json
import random

BLOCK = 512
LINES = 200
rng = random.Random(42)
next_id = 0


def fresh(n):
    global next_id
    ids = list(range(next_id, next_id + n))
    next_id += n
    return ids


system = fresh(2)          # a system prompt every request starts with
sessions = []              # hash ids of each open session's context so far
t = 0.0
with open("mooncake_sample.jsonl", "w") as f:
    for line in range(LINES):
        if line > 0:
            t += rng.expovariate(1 / 150.0)      # Poisson arrivals, 150 ms mean gap
        if sessions and rng.random() < 0.6:
            context = rng.choice(sessions)       # a later turn: the session's blocks, then new ones
        else:
            context = list(system)
            sessions.append(context)
        added = fresh(rng.randint(1, 3))
        context.extend(added)
        if len(context) > 12:                    # keep prompts short: a session ends
            sessions.remove(context)
        blocks = list(context)
        input_length = (len(blocks) - 1) * BLOCK + rng.randint(1, BLOCK)
        output_length = rng.randint(8, 300)
        f.write(json.dumps({"timestamp": int(t), "input_length": input_length,
                            "output_length": output_length, "hash_ids": blocks}) + "\n")
