#!/usr/bin/env bash
# A twin of the built-in simulator with a known profile, fitted on a busy machine: how far
# `runner calibrate` reads each parameter from the profile (issue 38's second acceptance
# line, tests/e2e/calibrate.rs; that test allows 5 %).
#
#   bench-results/twin_under_load.sh [RUNS] [BUSY]      (from the repository root)
#
# Starts BUSY `yes` loops (default 4: twice the cores of a 2-core machine, heavier than
# the test suite's load), then RUNS times (default 6) runs the test's three load points
# (scenarios/calibration.rhai, closed loops of 2, 16 and 4, REQUESTS
# requests each, default 64 as in the test, 16 tokens out) against the profile below and
# fits a twin from c2 and c16, c4 held out. Prints one markdown row per run: each fitted
# parameter and its error against the profile, the steps the fit left out, the held-out
# phase's mean TTFT, real and twin; then the rms and worst error over the runs. Needs the
# release build.
set -euo pipefail
runs=${1:-6}
busy=${2:-4}
requests=${REQUESTS:-64}
root=$(pwd)
runner=$root/target/release/runner
work=$(mktemp -d)
loops=()
trap 'kill "${loops[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 "$busy"); do
    yes >/dev/null &
    loops+=("$!")
done
profile=(--sim-prefill-us-per-token 30 --sim-decode-step-ms 8 --sim-decode-us-per-seq 1000 --sim-max-seqs 8)
echo "| run | prefill_us_per_token (30) | decode_step_ms (8) | decode_us_per_seq (1000) | steps left out | held-out c4 mean TTFT: real, twin |"
echo "|---|---|---|---|---|---|"
for i in $(seq 1 "$runs"); do
    "$runner" scenarios/calibration.rhai -p concurrency=2,16,4 -p requests="$requests" \
        -p output_tokens=16 "${profile[@]}" --output "$work/run$i" >/dev/null 2>&1
    "$runner" calibrate "$work/run$i" --holdout c4 --out "$work/twin$i.toml" >/dev/null 2>&1
    python3 - "$work/twin$i.toml" "$i" "$work/errors" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
engine = text.split("[sources]")[0]
truth = {"prefill_us_per_token": 30.0, "decode_step_ms": 8.0, "decode_us_per_seq": 1000.0}
cells, errors = [], []
for key, want in truth.items():
    got = float(re.search(rf"^{key} = ([0-9.eE+-]+)", engine, re.M).group(1))
    errors.append((got / want - 1) * 100)
    cells.append(f"{got:.2f} ({errors[-1]:+.1f} %)")
left_out = re.search(r"\((\d+) stretched steps left out\)", text).group(1)
ttft = re.search(r'metric = "mean_ttft_ms"\nobserved = ([0-9.]+)\npredicted = ([0-9.]+)', text)
real, twin = float(ttft.group(1)), float(ttft.group(2))
ttft_cell = f"{real:.1f}, {twin:.1f} ms ({abs(twin - real) / real * 100:.1f} %)"
print(f"| {sys.argv[2]} | " + " | ".join(cells) + f" | {left_out} | {ttft_cell} |")
with open(sys.argv[3], "a") as out:
    out.write(" ".join(f"{e:.4f}" for e in errors) + "\n")
EOF
done
python3 - "$work/errors" <<'EOF'
import math, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
cells = []
for k in range(3):
    errs = [r[k] for r in rows]
    rms = math.sqrt(sum(e * e for e in errs) / len(errs))
    cells.append(f"rms {rms:.2f} %, worst {max(abs(e) for e in errs):.2f} %")
print("| over the runs | " + " | ".join(cells) + " | | |")
EOF
