#!/usr/bin/env bash
# insns.sh - instructions per call of a small collective, by callgrind.
#
# Runs the bench twice under valgrind --tool=callgrind, collecting only in
# the device threads (--toggle-collect=device_main: not the bench's CPU
# sampler), with -n 5000 and -n 25000 timed calls, and prints the
# difference divided by 20,000 (so warm-up and setup cancel), per device.
# A waiting member's spinning is counted too: repeat a run to see the
# spread (about +-300 over the lane here). Between threads, where
# callgrind runs one thread at a time and the others spin meanwhile, that
# is most of the count: the line also says what is left without the
# waits (the inclusive cost of spmd__block and spmd__watch taken out,
# with whatever progress they ran: a little under the call's own path). With -f FILE the second run's
# callgrind output is kept there (callgrind_annotate --inclusive=no FILE
# splits it by function).
#
#   -t threads     (default) build/bench -d N in one process; the count is
#                  the sum over the devices divided by N
#   -t fabric-shm  build/bench-fabric, 2 processes of one device over the
#                  shared-memory lane (tools/spmdrun --bind cpu), only
#                  process -P (default 0) under valgrind
#   -t ompi        Open MPI's, to compare: build/mpi_bench as 2 ranks over
#                  vader (mpirun --bind-to core, btl self,vader), only rank
#                  -P under valgrind, counting inside the timed call only
#                  (--toggle-collect=tm_coll: MPI_Bcast and the like)
#
# usage: bench/insns.sh [-t threads|fabric-shm|ompi] [-c COLL] [-d N] [-b SIZE] [-P PROC] [-f FILE]
set -euo pipefail
mode=threads coll=psum devices=2 size=8 proc=0 keep=""
while getopts "t:c:d:b:P:f:h" opt; do
    case $opt in
        t) mode=$OPTARG ;; c) coll=$OPTARG ;; d) devices=$OPTARG ;; b) size=$OPTARG ;; P) proc=$OPTARG ;;
        f) keep=$OPTARG ;;
        *) echo "usage: $0 [-t threads|fabric-shm|ompi] [-c COLL] [-d N] [-b SIZE] [-P PROC] [-f FILE]" >&2; exit 2 ;;
    esac
done
command -v valgrind > /dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vg=(valgrind --tool=callgrind --toggle-collect=device_main)
total() { grep '^totals:' "$1" | awk '{ print $2 }'; }
# the inclusive cost of the waits (threads: spmd__block and spmd__watch)
waits() {
    callgrind_annotate --inclusive=yes "$1" 2> /dev/null |
        awk '/:spmd__(block|watch) \[/ { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}
counts=() waited=()
for n in 5000 25000; do
    out=$tmp/cg.$n
    case $mode in
        threads)
            make -s -C "$root" build/bench
            "${vg[@]}" --callgrind-out-file="$out" "$root/build/bench" -d "$devices" -c "$coll" -b "$size" -e "$size" \
                -r 1 -n $n --csv > /dev/null 2>&1
            per=$devices ;;
        fabric-shm)
            make -s -C "$root" build/bench-fabric
            printf '#!/bin/sh\nif [ "$SPMD_PROCESS_ID" = %s ]; then exec %s --callgrind-out-file=%s "$@" 2>/dev/null; fi\nexec "$@"\n' \
                "$proc" "${vg[*]}" "$out" > "$tmp/wrap"
            chmod +x "$tmp/wrap"
            SPMD_SHM_LANE=1 SPMD_TIMEOUT_MS=600000 "$root/tools/spmdrun" -n 2 --provider shm --bind cpu --timeout 600 -q -- \
                "$tmp/wrap" "$root/build/bench-fabric" -d 2 -c "$coll" -b "$size" -e "$size" -r 1 -n $n --csv > /dev/null 2>&1
            per=1 ;;
        ompi)
            command -v mpirun > /dev/null || { echo "$0: -t ompi needs Open MPI (mpirun, mpicc)" >&2; exit 2; }
            make -s -C "$root" build/mpi_bench
            args=("$root/build/mpi_bench" -c "$coll" -b "$size" -e "$size" -r 1 -n $n --csv)
            vgo=(valgrind --tool=callgrind --toggle-collect=tm_coll --callgrind-out-file="$out")
            if [ "$proc" = 0 ]; then ctx=(-np 1 "${vgo[@]}" "${args[@]}" : -np 1 "${args[@]}")
            else ctx=(-np 1 "${args[@]}" : -np 1 "${vgo[@]}" "${args[@]}"); fi
            mpirun --oversubscribe --allow-run-as-root --bind-to core --mca btl self,vader "${ctx[@]}" > /dev/null 2>&1
            per=1 ;;
        *) echo "$0: unknown -t $mode" >&2; exit 2 ;;
    esac
    [ -s "$out" ] || { echo "$0: no callgrind output (the run failed)" >&2; exit 1; }
    counts+=("$(total "$out")")
    waited+=("$(waits "$out")")
done
[ -z "$keep" ] || cp "$tmp/cg.25000" "$keep"
more=""
[ "$mode" != threads ] || more=" ($(( (counts[1] - counts[0] - waited[1] + waited[0]) / 20000 / per )) outside the waits)"
echo "$coll $size B, $mode$([ "$mode" = threads ] && echo ", $devices devices" || echo ", process $proc"):" \
     "$(( (counts[1] - counts[0]) / 20000 / per )) instructions per call$more"
