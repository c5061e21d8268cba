#!/usr/bin/env bash
# `--virtual-time` (issue 38, item 2): writes bench-results/virtual_time.md.
#
# 1. scenarios/poisson_duration.rhai at its defaults (20 minutes at 4 req/s) against the
#    twin tests/fixtures/virtual_time/twin.toml in virtual time: its wall time (the goal is
#    under 30 s on a 2-core machine).
# 2. The same scenario for 60 s, once in real time (a minute of wall time) and once in
#    virtual time, against the same twin: the request digests and the mean TTFT, TPOT and
#    E2EL side by side.
# 3. The defaults again in real time (20 minutes of wall time) beside the virtual run of 1:
#    over 4,800 requests the noise of the mean TTFT (a few requests of a minute crossing a
#    step boundary) falls to about ±0.2 %, so what is left is the bias.
#
# Sections of the old file below the line KEEP_MARK (hand-written accounts of what was
# tried) are kept after the new tables.
#
# Run from anywhere after `cargo build --release`; RUNNER=path overrides the binary.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
runner="${RUNNER:-$repo/target/release/runner}"
twin="$repo/tests/fixtures/virtual_time/twin.toml"
scenario="$repo/scenarios/poisson_duration.rhai"
out="$repo/bench-results/virtual_time.md"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
KEEP_MARK='<!-- kept by virtual_time.sh: hand-written sections below -->'
if [ -f "$out" ] && grep -qF "$KEEP_MARK" "$out"; then
    sed -n "/^$KEEP_MARK\$/,\$p" "$out" >"$work/kept.md"
else
    echo "$KEEP_MARK" >"$work/kept.md"
fi

# Wall seconds of one run, its outputs in $work/$1.
timed_run() {
    local name="$1"
    shift
    local start end
    start=$(date +%s.%N)
    "$runner" "$scenario" --sim-profile "$twin" --output "$work/$name" -q "$@" >"$work/$name.txt"
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}

# A figure of a run's result.json.
field() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); v=r
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$work/$1/result.json" "$2"
}

long_wall=$(timed_run long --virtual-time)
real_wall=$(timed_run real60 -p duration=60s)
virtual_wall=$(timed_run virtual60 -p duration=60s --virtual-time)
long_real_wall=$(timed_run long_real)

# A metric of two runs (real, virtual) side by side.
row() {
    local metric="$1" real="$2" virtual="$3"
    local r v
    r=$(field "$real" "$metric")
    v=$(field "$virtual" "$metric")
    python3 -c 'import sys; r, v = float(sys.argv[2]), float(sys.argv[3])
print(f"| {sys.argv[1]} | {r:.3f} | {v:.3f} | {100 * (v - r) / r:+.2f} % |")' "$metric" "$r" "$v"
}

# The largest |virtual − real| / real, in %, over both pairs, of the metrics named (mean
# TPOT and E2EL when none is).
agreement() {
    local metrics="${*:-mean_tpot_ms mean_e2el_ms}"
    python3 -c 'import json, sys
work, metrics = sys.argv[1], sys.argv[2].split()
worst = 0.0
for real, virtual in (("real60", "virtual60"), ("long_real", "long")):
    r = json.load(open(f"{work}/{real}/result.json"))
    v = json.load(open(f"{work}/{virtual}/result.json"))
    for m in metrics:
        worst = max(worst, abs(v[m] - r[m]) / r[m] * 100)
print(f"{worst:.2f}")' "$work" "$metrics"
}

# Runs real and virtual side by side: wall time, requests, digest, then the means.
side_by_side() {
    local real="$1" virtual="$2" real_s="$3" virtual_s="$4"
    echo "| | real time | virtual time |"
    echo "|---|---|---|"
    echo "| wall time | $(printf %.2f "$real_s") s | $(printf %.2f "$virtual_s") s |"
    echo "| requests completed | $(field "$real" completed) | $(field "$virtual" completed) |"
    echo "| request digest | \`$(field "$real" runner.request_digest)\` | \`$(field "$virtual" runner.request_digest)\` |"
    echo
    echo "| metric | real time | virtual time | virtual − real |"
    echo "|---|---|---|---|"
    for metric in mean_ttft_ms mean_tpot_ms mean_itl_ms mean_e2el_ms duration; do
        row "$metric" "$real" "$virtual"
    done
    echo
    echo "The real run's own account of its TTFT (its server-metrics block: the simulator's TTFT"
    echo "on its clock, and what the client and loopback added):"
    echo
    echo '```'
    grep -E "Client TTFT mean|Server TTFT mean" "$work/$real.txt" || echo "(no server metrics)"
    echo '```'
}

{
    echo "# \`--virtual-time\`: bench-results/virtual_time.sh"
    echo
    echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs ($(uname -m)), release build,"
    echo "commit $(git -C "$repo" rev-parse --short HEAD), against the twin"
    echo "tests/fixtures/virtual_time/twin.toml (written by \`runner calibrate\` from runs of the built-in"
    echo "simulator: prefill 30 µs/token, decode step 8 ms + 200 µs per sequence, 32 sequences)."
    echo
    echo "## poisson_duration.rhai at its defaults (20 minutes, 4 req/s) in virtual time"
    echo
    echo "| wall time | simulated phase | requests completed | failed | request digest |"
    echo "|---|---|---|---|---|"
    echo "| $(printf %.2f "$long_wall") s | $(printf %.1f "$(field long duration)") s | $(field long completed) | $(field long failed) | \`$(field long runner.request_digest)\` |"
    echo
    echo "## 60 s variant (\`-p duration=60s\`): real time against virtual time"
    echo
    side_by_side real60 virtual60 "$real_wall" "$virtual_wall"
    echo
    echo "## The defaults (20 minutes, 4 req/s): real time against virtual time"
    echo
    side_by_side long_real long "$long_real_wall" "$long_wall"
    echo
    echo "Reading: virtual time reproduces the simulator's own model; the real run adds what"
    echo "virtual time has none of: the client's and the loopback's time (the 'outside the"
    echo "engine' lines above), and the lateness of the real sends, which moves a few requests"
    echo "of a Poisson run across a step boundary either way. Steps chain on their deadlines,"
    echo "so the lateness does not add up along a stream: mean TPOT and E2EL agree to"
    echo "$(agreement) % in the two pairs above, mean TTFT to $(agreement mean_ttft_ms) %."
    echo "The hand-written sections below (dated, each with its build) account for the rest;"
    echo "their figures are history, not measured by this script."
    echo
    cat "$work/kept.md"
} >"$out"
cat "$out"
