#!/usr/bin/env bash
# hybrid.sh - a small collective on P processes of N/P devices each (libfabric,
# shared-memory lane) against N device threads of one process, alternating
# the two within one run; per side the median time per call over the rounds.
#
# usage: bench/hybrid.sh [-c COLL] [-d N] [-p P] [-b SIZE] [-k ROUNDS]
#   defaults: psum, 8 devices, 2 processes, 8 bytes, 5 rounds
# The processes are pinned as spmdrun does by default (--bind auto: each its
# share of the CPUs when they fit); the threads are not (bench without --pin).
# Prints each round's times, the medians and the load average (this machine
# is shared: quote the load with the figures).
set -euo pipefail
coll=psum devices=8 procs=2 size=8 rounds=5
while getopts "c:d:p:b:k:h" opt; do
    case $opt in
        c) coll=$OPTARG ;; d) devices=$OPTARG ;; p) procs=$OPTARG ;; b) size=$OPTARG ;; k) rounds=$OPTARG ;;
        *) echo "usage: $0 [-c COLL] [-d N] [-p P] [-b SIZE] [-k ROUNDS]" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
make -s -C "$root" build/bench build/bench-fabric
time_of() { grep "^$coll," | cut -d, -f7 | head -1; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
th="" hy=""
echo "# $coll of $size B: $devices threads vs $procs processes x $((devices / procs)) devices (shm lane); $(uptime)"
for ((r = 1; r <= rounds; r++)); do
    t=$("$root/build/bench" -d "$devices" -c "$coll" -b "$size" -e "$size" -r 5 --csv | time_of)
    h=$(SPMD_SHM_LANE=1 "$root/tools/spmdrun" -n "$procs" --provider shm --timeout 600 -q -- \
        "$root/build/bench-fabric" -d "$devices" -c "$coll" -b "$size" -e "$size" -r 5 --csv | time_of)
    echo "round $r: threads $t us, processes $h us"
    th="$th $t" hy="$hy $h"
done
echo "median: threads $(echo "$th" | median) us, processes $(echo "$hy" | median) us; $(uptime)"
