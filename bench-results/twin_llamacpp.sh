#!/usr/bin/env bash
# The twin of llama.cpp's server, its held-out error over repeats (issue 38's first
# acceptance line; tests/e2e/llamacpp/twin.rs asserts these figures with margin).
#
#   bench-results/twin_llamacpp.sh [REPEATS]      (from the repository root; default 5)
#
# Each repeat starts a fresh llama-server (tests/llamacpp/serve.py: 4 slots, 1 thread, no
# host prompt cache) on the test fixture's model, runs tests/fixtures/scenarios/calibration.rhai
# at concurrency 1,2,4,8,6 (12 requests each, prompts of 16 to 64 tokens, 48 output
# tokens; a seed per repeat), fits a twin from c1 and c6 (`runner calibrate`) and
# replays c2, c4 and c8 against it (`--holdout`). The fitted phases come first and last,
# so a machine that slows down or speeds up over the run weighs on both sides alike.
# OUTPUT and MAX_PROMPT override the output and longest prompt lengths (the test's are
# the defaults). Needs the release build and the venv and model the llama.cpp tests made
# under target/tmp/llamacpp. Writes twin_llamacpp.md.
set -euo pipefail
repeats=${1:-5}
root=$(pwd)
runner=$root/target/release/runner
python=$(ls -d "$root"/target/tmp/llamacpp/venv-*/bin/python | head -1)
model=$(ls -d "$root"/target/tmp/llamacpp/model-* | head -1)
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port=18500
for seed in $(seq 1 "$repeats"); do
    "$python" tests/llamacpp/serve.py "$model/model.gguf" "$port" --parallel 4 --threads 1 \
        --cache-ram 0 >"$work/server.out" 2>"$work/server.log" &
    server=$!
    for _ in $(seq 1 600); do grep -q listening "$work/server.out" && break; sleep 0.1; done
    "$runner" tests/fixtures/scenarios/calibration.rhai -p concurrency=1,2,4,8,6 -p requests=12 \
        -p output_tokens="${OUTPUT:-48}" -p min_prompt=16 -p max_prompt="${MAX_PROMPT:-64}" -p seed="$seed" \
        --target "http://127.0.0.1:$port" --tokenizer "$model/tokenizer.json" \
        --output "$work/run$seed" >/dev/null 2>&1
    kill "$server"; wait "$server" 2>/dev/null || true
    "$runner" calibrate "$work/run$seed" --holdout c2 --holdout c4 --holdout c8 \
        --out "$work/twin$seed.toml" >/dev/null
    port=$((port + 1))
done
uptime_before=$(cat /proc/loadavg)
python3 - "$work" "$repeats" "$uptime_before" "$(git rev-parse --short HEAD)" >bench-results/twin_llamacpp.md <<'PY'
import os, sys, tomllib, datetime, statistics
work, repeats, load, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
metrics = ["median_e2el_ms", "median_tpot_ms", "mean_tpot_ms", "mean_ttft_ms"]
rows, params = {}, []
for s in range(1, repeats + 1):
    t = tomllib.load(open(f"{work}/twin{s}.toml", "rb"))
    params.append(t["engine"])
    for h in t["holdout"]:
        if h["metric"] in metrics:
            signed = h["error_pct"] if h["error"] >= 0 else -h["error_pct"]
            rows.setdefault((h["phase"], h["metric"]), []).append(signed)
print("# The twin of llama.cpp: held-out error (`bench-results/twin_llamacpp.sh`)\n")
print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit}, "
      f"{repeats} repeats; load average after: {load} (2 cores, other builds beside it).\n")
print(f"Prompts of 16 to {os.environ.get('MAX_PROMPT', 64)} tokens, {os.environ.get('OUTPUT', 48)} output tokens. "
      "Fit: c1 and c6 (12 requests each); held out: c2, c4, c8 (c8 above the 4 slots). "
      "Error = |twin − real| / real, in %; the repeats column keeps the sign (+: the twin is slower).\n")
print("| phase | metric | mean | median | max | repeats |\n|---|---|---|---|---|---|")
for (phase, metric), v in sorted(rows.items()):
    a = [abs(x) for x in v]
    print(f"| {phase} | {metric} | {statistics.mean(a):.1f} | {statistics.median(a):.1f} | "
          f"{max(a):.1f} | {', '.join(f'{x:+.1f}' for x in v)} |")
print("\nThe mean over the three held-out phases, per repeat (the test asserts these too):\n")
print("| metric | " + " | ".join(f"repeat {s}" for s in range(1, repeats + 1)) + " | max |\n|---|" + "---|" * (repeats + 1))
for metric in metrics:
    per = [statistics.mean(abs(rows[(p, metric)][s]) for p in ("c2", "c4", "c8")) for s in range(repeats)]
    print(f"| {metric} | " + " | ".join(f"{x:.1f}" for x in per) + f" | {max(per):.1f} |")
print("\n| repeat | max_seqs | decode_step_ms | decode_us_per_seq | prefill_us_per_token |\n|---|---|---|---|---|")
for s, e in enumerate(params, 1):
    print(f"| {s} | {e['max_seqs']} | {e['decode_step_ms']:.3f} | {e['decode_us_per_seq']:.1f} | {e['prefill_us_per_token']:.1f} |")
PY
cat >>bench-results/twin_llamacpp.md <<'NOTES'
## What the twin's parameters mean for llama.cpp, and why the error is what it is

- `max_seqs` is llama-server's slot count (`--parallel 4`), found from c6: requests beyond
  the slots waited, and no step ran more than 4 sequences.
- `prefill_us_per_token`: llama.cpp computes a new prompt (up to its batch, 2048 tokens) in
  one step with a token of every decoding slot, so the twin's "prefill in the step" is
  its own; each such step is timed by the server's `timings.prompt_ms`, which c1 gives
  for every request. `decode_step_ms` + `decode_us_per_seq` × decoding: the decode step,
  close to linear in the slots decoding on a CPU; fitted with every cost at least 0.
- The server runs with 1 thread: with 2 on this busy 2-core machine a step lasts as long
  as the thread the machine ran last (steps of 2 to 800 ms at concurrency 1).
- The errors change sign from repeat to repeat: most of what remains is the load beside
  the runs changing between phases (the same 4-slot decode step measured 7.8 ms in one
  phase and 11.7 ms in the next), which 12 requests a phase do not average out. What is
  systematic: a 4-prompt prefill costs llama.cpp less per token than four single ones
  (a CPU matrix product is more efficient on more rows), which the twin's linear price
  cannot say; and llama.cpp takes requests that arrive together into one prefill, where
  the simulator starts a step with the first.
- Goal of issue 38 (median E2E and TPOT ≤ 10 %, mean TTFT ≤ 20 %), in the median repeat:
  met on c8 (0.5, 2.7 and 7.5 %); on c4 by median E2E only (3.8 %; TPOT 12.6, TTFT
  26.5 %); on c2 by mean TTFT only (16.9 %; E2E 20.1, TPOT 18.7 %). Not met in every
  repeat on this machine.
NOTES
cat bench-results/twin_llamacpp.md
