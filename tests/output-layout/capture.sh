#!/bin/bash
# capture.sh RUNNER OUTDIR: fixed-seed runs writing every output (single phase, multi-phase,
# sharded + merged, compare), to hold two builds side by side with compare_outputs.py.
set -u
R=$1; O=$2; rm -rf $O; mkdir -p $O
C=$(cd "$(dirname "$0")" && pwd)
common="--percentiles 50,90,99 --goodput ttft:500 --request-id-prefix cmp- --sim-profile fixed --sim-ttft-ms 5 --sim-itl-ms 1"
$R run $C/throughput.rhai -p requests=200 --seed 1 $common --threshold 'p99_ttft_ms<10000' --output $O/single --save-result $O/single-save.json > $O/single.stdout 2> $O/single.stderr; echo "single rc=$?" > $O/rc.txt
$R run $C/multi.rhai $common --threshold 'p95_e2el_ms<10000' --output $O/multi > $O/multi.stdout 2> $O/multi.stderr; echo "multi rc=$?" >> $O/rc.txt
for sc in shard shard1; do
  for i in 0 1 2; do
    $R run $C/$sc.rhai $common --shard $i/3 --output $O/$sc-s$i > $O/$sc-s$i.stdout 2> $O/$sc-s$i.stderr; echo "$sc-s$i rc=$?" >> $O/rc.txt
  done
  $R merge $O/$sc-s0 $O/$sc-s1 $O/$sc-s2 --threshold 'error_rate<0.5' --output $O/$sc-merged > $O/$sc-merged.stdout 2> $O/$sc-merged.stderr; echo "$sc-merged rc=$?" >> $O/rc.txt
done
$R compare $O/single/result.json $O/single-save.json > $O/compare.stdout 2> $O/compare.stderr; echo "compare rc=$?" >> $O/rc.txt
$R compare --markdown $O/multi/result.json $O/multi/result.json > $O/compare-md.stdout 2> $O/compare-md.stderr; echo "compare-md rc=$?" >> $O/rc.txt
