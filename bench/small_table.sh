#!/usr/bin/env bash
# small_table.sh - every collective at 8 B and 4 KiB between 2 devices:
# threads, 2 processes over the shared-memory lane, and Open MPI (2 ranks
# over vader), as one markdown table (the README's and docs/performance.md's).
#
# Runs bench/compare_mpi.sh -t threads, then -t fabric-shm, each with -c
# all -d 2 -b 8 -e 4096 -f 512 and its rounds alternating ours and Open
# MPI's (-k), and that pair -n times (this machine's speed drifts by 2x
# over minutes: one pair can land in a slow phase). A cell is the median
# over the pairs of our time per call in us and, in brackets, its ratio to
# the median of Open MPI's times in the same runs (lower is better); the
# Open MPI column gives that median for the threads runs, then for the
# lane runs. The barrier moves no data: its line has the 8 B columns only.
# With -o FILE the runs' full output is kept there.
#
# usage: bench/small_table.sh [-n PAIRS] [-r REPS] [-k ROUNDS] [-o FILE]
set -euo pipefail
reps=5 rounds=3 pairs=3 keep=""
while getopts "n:r:k:o:h" opt; do
    case $opt in
        n) pairs=$OPTARG ;; r) reps=$OPTARG ;; k) rounds=$OPTARG ;; o) keep=$OPTARG ;;
        *) echo "usage: $0 [-n PAIRS] [-r REPS] [-k ROUNDS] [-o FILE]" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
command -v mpirun > /dev/null || { echo "$0: needs Open MPI (apt-get install openmpi-bin libopenmpi-dev libpmix-dev)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date -u '+%Y-%m-%d %H:%M UTC')
for i in $(seq "$pairs"); do
    for t in threads fabric-shm; do
        bash "$here/compare_mpi.sh" -t $t -c all -d 2 -b 8 -e 4096 -f 512 -r "$reps" -k "$rounds" > "$tmp/$t.$i.out"
    done
done
[ -n "$keep" ] && cat "$tmp"/*.out > "$keep"
echo "# bench/small_table.sh -n $pairs -r $reps -k $rounds, from $start, $(nproc) CPUs"
# one line per (run, collective, size): run op size ours ompi; the table
# takes per cell the medians over the pairs
for t in threads fabric-shm; do
    for i in $(seq "$pairs"); do
        awk -v run=$t '/^# ours: /{op=$3; sub(":", "", op)} /^ +[0-9]/{print run, op, $1, $2, $3}' "$tmp/$t.$i.out"
    done
done | awk '
    function med(s,   a, k, i, j, v) {
        k = split(s, a, " ")
        for (i = 2; i <= k; i++) { v = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    { key = $1 " " $2 " " $3; ours[key] = ours[key] " " $4; ompi[key] = ompi[key] " " $5; have[key] = 1 }
    function c(run, op, s,   k) { k = run " " op " " s
        return (k in have) ? sprintf("%.2f (%.2fx)", med(ours[k]), med(ours[k]) / med(ompi[k])) : "-" }
    function o(op, s,   a, b) { a = "threads " op " " s; b = "fabric-shm " op " " s
        return (a in have) ? sprintf("%.2f, %.2f", med(ompi[a]), med(ompi[b])) : "-" }
    END {
        print "| operation | 8 B threads | 8 B lane | 8 B Open MPI | 4 KiB threads | 4 KiB lane | 4 KiB Open MPI |"
        print "|---|---|---|---|---|---|---|"
        n = split("psum all_gather psum_scatter all_to_all bcast reduce ppermute barrier", ops, " ")
        for (i = 1; i <= n; i++) {
            op = ops[i]; s = op == "barrier" ? 0 : 8
            printf "| %s | %s | %s | %s | %s | %s | %s |\n", op, c("threads", op, s), c("fabric-shm", op, s), o(op, s),
                   c("threads", op, 4096), c("fabric-shm", op, 4096), o(op, 4096)
        }
    }'
