#!/usr/bin/env bash
# compile_times.sh - how long a user's file that defines SPMDCOLL_IMPLEMENTATION
# takes to compile: -O0 and -O2, with and without the libfabric backend
# (SPMDCOLL_LIBFABRIC; skipped when its headers are missing), for each
# compiler given (default: $CC or cc). Wall and CPU seconds, median of
# REPS (default 3) compiles; the CPU time is the steadier figure on a busy
# machine. Run from the repository root: bash bench/compile_times.sh [cc ...]
# (make compile-times). The goal: at most 1.5 s at -O0 and 3 s at -O2.
set -eu
TIMEFORMAT='%R %U %S'
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#define SPMDCOLL_IMPLEMENTATION\n#include "spmdcoll.h"\nint main(void) { return 0; }\n' >"$tmp/impl.c"
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-8s %-4s %-9s %8s %8s\n' compiler opt backend "wall s" "cpu s"
for cc in "${@:-${CC:-cc}}"; do
    for fab in threads libfabric; do
        defs=""
        if [ $fab = libfabric ]; then
            printf '#include <rdma/fabric.h>\n' | $cc -E -x c - >/dev/null 2>&1 || { printf '%-8s %-4s %-9s %s\n' "$cc" - $fab "skipped: no libfabric headers"; continue; }
            defs=-DSPMDCOLL_LIBFABRIC
        fi
        for opt in -O0 -O2; do
            : >"$tmp/w"; : >"$tmp/c"
            i=0
            while [ $i -lt "$REPS" ]; do
                { time $cc $opt $defs -std=c11 -pthread -I. -c "$tmp/impl.c" -o "$tmp/impl.o"; } 2>"$tmp/t"
                awk '{ print $1 >> "'"$tmp/w"'"; print $2 + $3 >> "'"$tmp/c"'" }' "$tmp/t"
                i=$((i + 1))
            done
            printf '%-8s %-4s %-9s %8s %8s\n' "$cc" $opt $fab "$(median <"$tmp/w")" "$(median <"$tmp/c")"
        done
    done
done
