#!/usr/bin/env bash
# plot.sh - SVG plots of the benchmarks (bench/svgplot.awk draws them; no
# gnuplot needed), 800x500, log-log.
#
#   bench/plot.sh [-t MODE] [-d N] [-e SIZE] [-k ROUNDS] [-o DIR]
#       measures psum, all_gather and all_to_all with bench/compare_mpi.sh
#       (spmdcoll, Open MPI when installed, the memcpy floor bench measures
#       in the same run; -t, -d, -e, -k are passed on; default threads, 2
#       devices, 8 B to 64M), keeps its tables as DIR/COLL.txt and writes
#       DIR/COLL-busbw.svg (bus bandwidth against size) and
#       DIR/COLL-latency.svg (time per call against size). The floor's
#       bandwidth is the bus bandwidth the collective would have if it took
#       the memcpy's time.
#   bench/plot.sh -r [-o DIR]
#       the same plots again from the tables in DIR, without measuring.
#   bench/plot.sh -s FILE [-o DIR]
#       DIR/scale-COLL.svg per collective in FILE: time per call against the
#       number of devices, one line per scheduler. FILE is CSV with the
#       columns scheduler,devices,coll,us_per_call (a header line with those
#       names and lines starting with # are skipped), e.g.
#           scheduler,devices,coll,us_per_call
#           threads,8,psum,4.1
#           fibers,8,psum,1.9
#   bench/plot.sh -S [-o DIR]
#       measures that first: build/bench --scale --max 16384 (mesh (N/8, 8),
#       N = 8 to 16,384, OS threads to 256; its table is kept as DIR/scale.txt), writes
#       it as DIR/scale.csv and plots it as -s does.
#
# DIR defaults to build/plots (make plots). Exits non-zero when a
# measurement fails or an input is malformed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(dirname "$here")/build/plots
replot=0 scale="" measure_scale=0 pass=() max=64M
usage() { sed -n '5,31p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts "t:d:e:k:o:rs:Sh" opt; do
    case $opt in
        t|d|k) pass+=("-$opt" "$OPTARG") ;;
        e) max=$OPTARG ;;
        o) out=$OPTARG ;;
        r) replot=1 ;;
        s) scale=$OPTARG ;;
        S) measure_scale=1 ;;
        *) usage ;;
    esac
done
[ $OPTIND -gt $# ] || usage
mkdir -p "$out"
colls="psum all_gather all_to_all"

plot() { # $1 = output, $2 = title, $3 = subtitle, $4 = x label, $5 = y label, $6 = x format; points on stdin
    awk -f "$here/svgplot.awk" -v title="$2" -v subtitle="$3" -v xlabel="$4" -v ylabel="$5" -v xfmt="$6" > "$1.tmp"
    mv "$1.tmp" "$1"
    echo "wrote $1"
}

if [ $measure_scale = 1 ]; then
    # bench --scale's rows: devices, scheduler, then µs per call of psum,
    # all_gather, ppermute, barrier, bcast, reduce and psum over "b" (its
    # header names them; -1: not run), then (not plotted) all_to_all and its
    # ratio to a memcpy, ms of mesh creation and its first psum and KiB per
    # device
    echo "measuring: build/bench --scale"
    load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)
    "$(dirname "$here")/build/bench" --scale --max 16384 > "$out/scale.txt.tmp"
    mv "$out/scale.txt.tmp" "$out/scale.txt"
    awk -v OFS=, -v subt="mesh (N/8, 8), every device calling; $(nproc) CPUs, $(date -u +%F), load $load at start" \
        'BEGIN { print "# subtitle: " subt; print "scheduler,devices,coll,us_per_call"; split("psum all_gather ppermute barrier bcast reduce psum_b", c, " ") }
        /^# / { print; next }
        $1 ~ /^[0-9]+$/ && NF >= 13 { for (i = 1; i <= 7; i++) if ($(i + 2) >= 0) print $2, $1, c[i], $(i + 2) }' \
        "$out/scale.txt" > "$out/scale.csv"
    scale=$out/scale.csv
fi
if [ -n "$scale" ]; then
    [ -r "$scale" ] || { echo "$0: cannot read $scale" >&2; exit 2; }
    awk -F, '/^#/ || /^scheduler,/ || /^[ \t]*$/ { next }
        NF != 4 || $2 !~ /^[0-9]+$/ || $4 !~ /^[0-9.eE+-]+$/ {
            printf "%s line %d: expected scheduler,devices,coll,us_per_call: %s\n", FILENAME, FNR, $0 > "/dev/stderr"; bad = 1
        }
        END { exit bad }' "$scale"
    # a line "# subtitle: TEXT" gives the plots' subtitle (-S writes one), else the file's name
    sub=$(sed -n 's/^# subtitle: //p' "$scale" | head -n 1)
    [ -n "$sub" ] || sub=$(basename "$scale")
    for c in $(awk -F, '!/^#/ && !/^scheduler,/ && NF == 4 { print $3 }' "$scale" | sort -u); do
        awk -F, -v c="$c" -v OFS='\t' '!/^#/ && $3 == c { print $1, $2, $4 }' "$scale" |
            plot "$out/scale-$c.svg" "time per $c against the number of devices" "$sub" \
                 "devices" "time per call (µs)" num
    done
    exit 0
fi

for c in $colls; do
    if [ $replot = 0 ]; then
        echo "measuring $c: bench/compare_mpi.sh -c $c -e $max ${pass[*]}"
        bash "$here/compare_mpi.sh" -c "$c" -e "$max" "${pass[@]}" > "$out/$c.txt.tmp"
        mv "$out/$c.txt.tmp" "$out/$c.txt"
    fi
    t=$out/$c.txt
    [ -r "$t" ] || { echo "$0: $t missing: measure first (bench/plot.sh without -r)" >&2; exit 2; }
    # the run, in one line: devices, backend, CPUs, date, Open MPI's version, noise
    sub=$(sed -n 's/^# devices: \([0-9]*\) (\([a-z]*\).*cpus: \([0-9]*\) online, date: \([0-9-]*\).*/f32, \1 devices (\2), \3 CPUs, \4/p' "$t" | head -n 1)
    mpi=$(sed -n 's/^# Open MPI \(v[0-9.]*\),.*/Open MPI \1/p' "$t" | head -n 1)
    grep -q NOISY "$t" && sub="$sub; machine busy (NOISY)"
    # rows: size ours(us) OMPI(us) ours/OMPI floor(us) ...; bus bandwidth from
    # the times (the table rounds it to 0.001 GB/s) with bench.c's factors:
    # psum 2(G-1)/G, all_gather and all_to_all (G-1)/G
    g=$(sed -n 's/^# devices: \([0-9]*\).*/\1/p' "$t" | head -n 1)
    rows() { # $1 = awk expression of a row's value from its time $2 (us) and size
        awk -v OFS='\t' -v mpi="$mpi" -v g="$g" -v c="$c" '
            function v(size, us) { return '"$1"' }
            /^ +[0-9]/ {
                print "spmdcoll", $1, v($1, $2); if (mpi != "" && $3 != "-") print mpi, $1, v($1, $3)
                print "memcpy floor", $1, v($1, $5)
            }' "$t"
    }
    rows us | plot "$out/$c-latency.svg" "$c: time per call" "$sub" "size (bytes, K = 1024)" "time per call (µs)" bytes
    rows 'us > 0 ? size / us / 1e3 * (g - 1) / g * (c == "psum" ? 2 : 1) : 0' |
        plot "$out/$c-busbw.svg" "$c: bus bandwidth" "$sub" "size (bytes, K = 1024)" "bus bandwidth (GB/s)" bytes
done
