#!/bin/bash
# The README's two commands from a fresh clone with an empty CARGO_HOME, timed: "after"
# (a commit whose command 2 is `cargo test --release --workspace`), then "before"
# (35f9ea5, whose command 2 was `cargo test --workspace`; only its build is timed).
# Usage: measure.sh AFTER_COMMIT [WORK_DIR]; figures in WORK_DIR/log.txt, the load
# average every 30 s in WORK_DIR/load.txt. Run it on a machine doing nothing else.
set -u
after=${1:?usage: measure.sh AFTER_COMMIT [WORK_DIR]}
work=${2:-/tmp/first-result}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$work"
log=$work/log.txt
( while true; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$work/load.txt"; sleep 30; done ) &
loadpid=$!
one() { # name commit command-2...
  name=$1; commit=$2; shift 2
  d=$work/$name; rm -rf "$d"; git clone -q "$repo" "$d/repo"; cd "$d/repo" || exit 1
  git checkout -q "$commit"
  export CARGO_HOME=$d/cargo-home; mkdir -p "$CARGO_HOME"; unset CARGO_TARGET_DIR
  s=$(date +%s); echo "$name $(date +%T) command 1 at $(git log --oneline -1)" >> "$log"
  cargo run --release -- scenarios/throughput.rhai > "$d/cmd1.out" 2> "$d/cmd1.err"; rc=$?
  echo "$name command 1 rc=$rc $(( $(date +%s) - s )) s" >> "$log"
  s=$(date +%s)
  "$@" > "$d/cmd2.out" 2> "$d/cmd2.err"; rc=$?
  echo "$name command 2 ($*) rc=$rc $(( $(date +%s) - s )) s" >> "$log"
}
one after "$after" cargo test --release --workspace --no-fail-fast
one before 35f9ea5 cargo test --workspace --no-run
kill $loadpid
