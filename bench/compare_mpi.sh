#!/usr/bin/env bash
# compare_mpi.sh - spmdcoll's collectives against Open MPI's, side by side.
#
# Runs spmdcoll's bench and, when mpicc and mpirun are installed,
# build/mpi_bench with N ranks, both measuring the same collective (-c,
# default psum; -c all: each in turn) in f32 with the same sizes, size
# column, warm-up, iteration rule and median over repetitions
# (bench/bench_common.h), one after the other. -t picks how:
#
#   -t threads     (default) build/bench, N device threads in one process;
#                  Open MPI over shared memory (ob1 + vader)
#   -t fabric-tcp  build/bench-fabric under tools/spmdrun, P processes
#                  (default N: one device each) over libfabric's tcp
#                  provider without the shared-memory lane
#                  (SPMD_SHM_LANE=0: tcp carries every message); Open MPI
#                  over its tcp BTL on the loopback (ob1, btl tcp,self,
#                  btl_tcp_if_include lo), no shared memory either
#   -t fabric-shm  the same over libfabric's shm provider, with the lane
#                  (small messages through our own rings); Open MPI over
#                  vader (ob1, btl vader,self)
#   -t fabric-net  as fabric-tcp over libfabric's net provider (1.17's
#                  preview of the tcp provider of libfabric 1.18 and later)
#
# Both sides pin their processes alike when Open MPI's N ranks fit the
# CPUs: mpirun with --bind-to core, spmdrun with --bind cpu (each process
# its share of the CPUs), bench (-t threads) with --pin (device k's thread
# on CPU k); otherwise neither pins (--bind-to none). Unpinned,
# two processes on two CPUs take 2x longer for a small operation in some
# runs (the scheduler moves them about).
#
# Open MPI always runs N ranks (oversubscribed when N exceeds the CPUs);
# with -p P < N our P processes host N/P devices each and Open MPI's N
# ranks all talk over the transport. Prints one table per collective: per
# size, ours time, Open MPI time, ours/OMPI, the memcpy floor measured by
# bench in the same run, ours/floor and OMPI/floor (Open MPI's own floor
# run, same bytes), and busbw of both. Without Open MPI it says so, prints
# ours alone and exits 0. Binaries are rebuilt when older than their
# sources. If either side fails, its command and output are shown and the
# script exits non-zero.
#
# -k ROUNDS (default 1) runs both sides ROUNDS times, alternating (ours,
# Open MPI, ours, ...), and reports per size the median over the rounds of
# each side's time, busbw and floor: this machine's memory bandwidth drifts
# by 2x over minutes, which one run of each side, minutes apart, mistakes
# for a difference between them.
#
# usage: bench/compare_mpi.sh [-t threads|fabric-tcp|fabric-shm|fabric-net] [-c COLL|all] [-d N] [-p P]
#                             [-b SIZE] [-e SIZE] [-f FACTOR] [-r REPS] [-k ROUNDS]
set -euo pipefail

coll=psum devices=2 procs="" min=8 max=256M factor=2 reps=5 mode=threads rounds=1
usage() {
    echo "usage: $0 [-t threads|fabric-tcp|fabric-shm|fabric-net] [-c COLL|all] [-d N] [-p P] [-b SIZE] [-e SIZE] [-f FACTOR] [-r REPS] [-k ROUNDS]" >&2
    exit 2
}
while getopts "t:c:d:p:b:e:f:r:k:h" opt; do
    case $opt in
        t) mode=$OPTARG ;;
        c) coll=$OPTARG ;;
        d) devices=$OPTARG ;;
        p) procs=$OPTARG ;;
        b) min=$OPTARG ;;
        e) max=$OPTARG ;;
        f) factor=$OPTARG ;;
        r) reps=$OPTARG ;;
        k) rounds=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
case $rounds in ''|*[!0-9]*|0) echo "$0: -k takes a positive number of rounds" >&2; exit 2 ;; esac
case $mode in
    threads) [ -z "$procs" ] || { echo "$0: -p is for the fabric modes" >&2; exit 2; } ;;
    fabric-tcp|fabric-shm|fabric-net) procs=${procs:-$devices} ;;
    *) echo "$0: unknown -t $mode (threads, fabric-tcp, fabric-shm, fabric-net)" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$root/build
mkdir -p "$build"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A binary is stale when missing or older than its source, bench_common.h or the header.
stale() { [ ! -x "$1" ] || [ "$2" -nt "$1" ] || [ "$here/bench_common.h" -nt "$1" ] || [ "$root/spmdcoll.h" -nt "$1" ]; }

# One side's run: the command after the label, stdout to $tmp/LABEL.csv,
# stderr to $tmp/LABEL.err (shown afterwards); on failure shows the command
# and both outputs and exits with its status.
run_side() { # $1 = label (ours, mpi), then the command
    local label=$1 rc=0
    shift
    "$@" > "$tmp/$label.csv" 2> "$tmp/$label.err" || rc=$?
    if [ $rc != 0 ]; then
        echo "# FAILED ($label, exit $rc): $*" >&2
        cat "$tmp/$label.csv" "$tmp/$label.err" >&2
        exit $rc
    fi
    cat "$tmp/$label.err" >&2
}

args=(-c "$coll" -b "$min" -e "$max" -f "$factor" -r "$reps")
# pinning, alike on both sides (see above)
bind_ours=none bind_mpi=none
if [ "$devices" -le "$(nproc)" ]; then bind_ours=cpu bind_mpi=core; fi
if [ "$mode" = threads ]; then
    bench=$build/bench
    if stale "$bench" "$here/bench.c"; then
        rm -f "$bench"
        make -s -C "$root" build/bench
    fi
    ours=("$bench" -d "$devices" "${args[@]}" --csv)
    [ "$bind_ours" = cpu ] && ours+=(--pin) # device k's thread on CPU k, as mpirun --bind-to core
    btl=(--mca btl "self,vader")
else
    provider=${mode#fabric-}
    bench=$build/bench-fabric
    if ! printf '#include <rdma/fabric.h>\n' | ${CC:-cc} -E -x c - > /dev/null 2>&1; then
        echo "$0: -t $mode needs libfabric (make deps, or apt-get install libfabric-dev libfabric-bin)" >&2
        exit 2
    fi
    if stale "$bench" "$here/bench.c"; then
        rm -f "$bench"
        make -s -C "$root" build/bench-fabric
    fi
    lane=1
    [ "$provider" != shm ] && lane=0
    ours=(env "SPMD_SHM_LANE=$lane" "$root/tools/spmdrun" -n "$procs" --provider "$provider" --bind "$bind_ours" --timeout 3600 -q --
          "$bench" -d "$devices" "${args[@]}" --csv)
    if [ "$provider" != shm ]; then
        btl=(--mca pml ob1 --mca btl "tcp,self" --mca btl_tcp_if_include lo)
    else
        btl=(--mca pml ob1 --mca btl "vader,self")
    fi
fi
have_mpi=1
command -v mpicc > /dev/null 2>&1 || have_mpi=0
command -v mpirun > /dev/null 2>&1 || have_mpi=0
if [ $have_mpi = 1 ]; then
    if stale "$build/mpi_bench" "$here/mpi_bench.c"; then
        mpicc -O3 -std=c11 "$here/mpi_bench.c" -o "$build/mpi_bench" -lm
    fi
    mpirun=(mpirun --oversubscribe --allow-run-as-root -np "$devices" --bind-to "$bind_mpi" "${btl[@]}")
fi

# Per (collective, size): the median over the rounds' CSV files (bench/median.awk).
median_csv() { awk -F, -v OFS=, -f "$here/median.awk" "$@"; }

ofiles=() mfiles=()
for ((round = 1; round <= rounds; round++)); do
    run_side "ours$round" "${ours[@]}"
    ofiles+=("$tmp/ours$round.csv")
    if [ $have_mpi = 1 ]; then
        run_side "mpi$round" "${mpirun[@]}" "$build/mpi_bench" "${args[@]}" --csv
        mfiles+=("$tmp/mpi$round.csv")
    fi
done
median_csv "${ofiles[@]}" > "$tmp/ours.csv"
if [ $have_mpi = 1 ]; then
    median_csv "${mfiles[@]}" > "$tmp/mpi.csv"
    echo "# Open MPI: ${mpirun[*]} $build/mpi_bench ${args[*]}"
    grep '^# ranks\|^# Open MPI\|^# load\|^# during' "$tmp/mpi.csv"
else
    echo "# Open MPI not found (no mpicc/mpirun): showing spmdcoll alone"
    : > "$tmp/mpi.csv"
fi
[ "$rounds" = 1 ] || echo "# $rounds rounds, alternating ours and Open MPI; per size the median over the rounds"
echo "# ours ($mode): ${ours[*]}"
grep '^# spmdcoll\|^# devices\|^# load\|^# env\|^# during' "$tmp/ours.csv"

# CSV columns of both: coll,size,count,dtype,op,iters,time_us,algbw,busbw,floor_bytes,memcpy_us,ratio,check
awk -F, -v ours="$tmp/ours.csv" -v mpi="$tmp/mpi.csv" -v have_mpi=$have_mpi '
    function num(v, fmt, w) { return v == "" ? sprintf("%" w "s", "-") : sprintf(fmt, v) }
    function ratio(a, b, w) { return (a == "" || b == "" || b <= 0) ? sprintf("%" w "s", "-") : sprintf("%" w ".2f", a / b) }
    /^# [a-z_]+: / {
        name = $0; sub(/^# /, "", name); sub(/:.*/, "", name)
        if (name ~ /^(psum|all_gather|psum_scatter|all_to_all|bcast|reduce|ppermute|barrier)$/) {
            text = $0; sub(/^# /, "", text)
            if (FILENAME == ours) legend[name] = text; else mlegend[name] = text
        }
        next
    }
    /^#/ || /^coll,/ { next }
    FILENAME == mpi { k = $1 SUBSEP $2; mt[k] = $7; mbus[k] = $9; mcopy[k] = $11; next }
    {
        if (!($1 in seen)) { seen[$1] = 1; order[++nc] = $1 }
        rows[$1, ++nr[$1]] = $2
        k = $1 SUBSEP $2; ot[k] = $7; obus[k] = $9; ocopy[k] = $11
    }
    END {
        for (i = 1; i <= nc; i++) {
            c = order[i]
            printf "\n# ours: %s\n", legend[c]
            if (have_mpi) printf "# Open MPI: %s\n", (c in mlegend) ? mlegend[c] : "(no rows)"
            printf "# %11s %11s %11s %9s %11s %10s %10s %11s %11s\n", "size(B)", "ours(us)", "OMPI(us)",
                   "ours/OMPI", "floor(us)", "ours/floor", "OMPI/floor", "busbw ours", "busbw OMPI"
            for (r = 1; r <= nr[c]; r++) {
                k = c SUBSEP rows[c, r]
                m = (k in mt) ? mt[k] : ""
                printf "  %11s %11.3f %s %s %s %s %s %s %s\n", rows[c, r], ot[k], num(m, "%11.3f", 11),
                       ratio(ot[k], m, 9), num(ocopy[k], "%11.3f", 11), ratio(ot[k], ocopy[k], 10),
                       ratio(m, (k in mcopy) ? mcopy[k] : "", 10), num(obus[k], "%11.3f", 11),
                       num((k in mbus) ? mbus[k] : "", "%11.3f", 11)
            }
        }
        printf "\n# busbw in GB/s; floor = the memcpy floor measured by bench in the same run (ours/floor);"
        printf " OMPI/floor uses mpi_bench'"'"'s own floor run of the same bytes\n"
    }' "$tmp/mpi.csv" "$tmp/ours.csv"
