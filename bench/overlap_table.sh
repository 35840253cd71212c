#!/usr/bin/env bash
# overlap_table.sh - how much of a collective an async caller hides (issue
# 41): per backend and size, build/bench's --sleep and --busy modes, as one
# markdown table (docs/performance.md's).
#
# --sleep: every device starts the psum, sleeps 1.2x the psum's own time
# (work that leaves the CPUs free: a GPU kernel, I/O), then waits; the
# target is t_total <= 1.1x max(t_coll, t_sleep). --busy: every device
# computes instead (every CPU busy); the target is t_total <= 1.05x
# t_coll + t_comp, the cost of doing them one after the other. Backends:
# threads (2 device threads), and 2 processes of one device over tcp (no
# lane) and over shm (tools/spmdrun, build/bench-fabric). Each cell: the
# medians over -n runs (each run itself the median of 5 repetitions).
# -w: SPMD_PROGRESS_WORKERS for every run (0: the library without its
# progress workers, for a before/after in one go).
#
# usage: bench/overlap_table.sh [-n RUNS] [-s "1M 16M 64M"] [-c psum] [-w WORKERS]
set -euo pipefail
runs=3 sizes="1M 16M 64M" coll=psum workers=""
while getopts "n:s:c:w:h" opt; do
    case $opt in
        n) runs=$OPTARG ;; s) sizes=$OPTARG ;; c) coll=$OPTARG ;; w) workers=$OPTARG ;;
        *) echo "usage: $0 [-n RUNS] [-s SIZES] [-c COLL] [-w WORKERS]" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
[ -x "$root/build/bench" ] && [ -x "$root/build/bench-fabric" ] || { echo "$0: make build/bench build/bench-fabric first" >&2; exit 2; }
[ -n "$workers" ] && export SPMD_PROGRESS_WORKERS=$workers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # $1 backend, $2 mode, $3 size: "t_coll t_comp t_total" in ms
    local args="-d 2 --$2 -c $coll -b $3 -e $3 -r 5"
    case $1 in
    threads) "$root/build/bench" $args ;;
    tcp) SPMD_SHM_LANE=0 "$root/tools/spmdrun" -n 2 --provider tcp -- "$root/build/bench-fabric" $args ;;
    shm) "$root/tools/spmdrun" -n 2 --provider shm -- "$root/build/bench-fabric" $args ;;
    esac 2>&1 | sed 's/^\[0\] //' | awk -v c="$coll" '$1 == c { print $3, $4, $5 }'
}
echo "# bench/overlap_table.sh -n $runs -s \"$sizes\" -c $coll${workers:+ -w $workers}, from $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs"
echo
echo "| backend | size | sleep: t_coll, t_sleep, t_total (ms) | t_total / max | busy: t_coll, t_comp, t_total (ms) | t_total / sum |"
echo "|---|---|---|---|---|---|"
for b in threads tcp shm; do
    for s in $sizes; do
        for m in sleep busy; do
            : > "$tmp/$m"
            for i in $(seq "$runs"); do one $b $m $s >> "$tmp/$m"; done
        done
        # the medians of each column, and the ratio of the medians
        med() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "nan" }'; }
        line=""
        for m in sleep busy; do
            c=$(awk '{print $1}' "$tmp/$m" | med) w=$(awk '{print $2}' "$tmp/$m" | med) t=$(awk '{print $3}' "$tmp/$m" | med)
            r=$(awk -v c="$c" -v w="$w" -v t="$t" -v m=$m 'BEGIN { d = m == "sleep" ? (c > w ? c : w) : c + w; printf "%.2f", (d > 0 ? t / d : 0) }')
            line="$line | $(printf '%.2f, %.2f, %.2f' "$c" "$w" "$t") | $r"
        done
        echo "| $b | $s$line |"
    done
done
