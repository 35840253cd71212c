#!/usr/bin/env bash
# compare_mpi.sh - spmdcoll's collectives against Open MPI's, side by side.
#
# Runs build/bench (spmdcoll, N device threads) and, when mpicc and mpirun are
# installed, build/mpi_bench with N ranks over shared memory (ob1 + vader,
# oversubscribed when N exceeds the CPUs), both measuring the same collective
# (-c, default psum; -c all: each in turn) in f32 with the same sizes, size
# column, warm-up, iteration rule and median over repetitions
# (bench/bench_common.h). Prints one table per collective: per size, ours
# time, Open MPI time, ours/OMPI, the memcpy floor measured by bench in the
# same run, ours/floor and OMPI/floor (Open MPI's own floor run, same bytes),
# and busbw of both. Without Open MPI it says so, prints ours alone and
# exits 0. Binaries are rebuilt when older than their sources.
#
# usage: bench/compare_mpi.sh [-c COLL|all] [-d N] [-b SIZE] [-e SIZE] [-r REPS]
set -euo pipefail

coll=psum devices=2 min=8 max=256M reps=5
usage() { echo "usage: $0 [-c COLL|all] [-d N] [-b SIZE] [-e SIZE] [-r REPS]" >&2; exit 2; }
while getopts "c:d:b:e:r:h" opt; do
    case $opt in
        c) coll=$OPTARG ;;
        d) devices=$OPTARG ;;
        b) min=$OPTARG ;;
        e) max=$OPTARG ;;
        r) reps=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$root/build
mkdir -p "$build"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A binary is stale when missing or older than its source, bench_common.h or the header.
stale() { [ ! -x "$1" ] || [ "$2" -nt "$1" ] || [ "$here/bench_common.h" -nt "$1" ] || [ "$root/spmdcoll.h" -nt "$1" ]; }

if stale "$build/bench" "$here/bench.c"; then
    rm -f "$build/bench"
    make -s -C "$root" build/bench
fi

args=(-c "$coll" -b "$min" -e "$max" -r "$reps")
"$build/bench" -d "$devices" "${args[@]}" --csv > "$tmp/ours.csv"

have_mpi=1
command -v mpicc > /dev/null 2>&1 || have_mpi=0
command -v mpirun > /dev/null 2>&1 || have_mpi=0

if [ $have_mpi = 1 ]; then
    if stale "$build/mpi_bench" "$here/mpi_bench.c"; then
        mpicc -O3 -std=c11 "$here/mpi_bench.c" -o "$build/mpi_bench" -lm
    fi
    mpirun=(mpirun --oversubscribe --allow-run-as-root -np "$devices" --mca btl self,vader)
    "${mpirun[@]}" "$build/mpi_bench" "${args[@]}" --csv > "$tmp/mpi.csv"
    echo "# Open MPI: ${mpirun[*]} $build/mpi_bench ${args[*]}"
    grep '^# ranks\|^# Open MPI\|^# load\|^# during' "$tmp/mpi.csv"
else
    echo "# Open MPI not found (no mpicc/mpirun): showing spmdcoll alone"
    : > "$tmp/mpi.csv"
fi
echo "# ours: $build/bench -d $devices ${args[*]}"
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
