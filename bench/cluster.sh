#!/usr/bin/env bash
# cluster.sh - spmdcoll against Open MPI on an emulated cluster: H "hosts"
# on this machine, each a network namespace with its own host name, joined
# by a bridge, each host's egress shaped to a rate (tc tbf), K processes a
# host and L devices a process.
#
#   bench/cluster.sh [-H HOSTS] [-K PROCS] [-L DEVICES] [-R RATE] [-c "COLL ..."]
#                    [-s "SIZE ..."] [-r REPS] [-k ROUNDS] [-T]
#
#   -H 2, -K 2, -L 1 (defaults); -R 1gbit (tc's rate syntax: 100mbit, 10gbit;
#   "none": not shaped); -c "psum all_gather bcast"; -s "8 16M" (bench's
#   size S: a device's buffer; all_gather's output); -r 3 repetitions a
#   run (bench's median); -k 3 rounds, alternating ours and Open MPI, the
#   median over the rounds; -T (2 hosts): also what plain TCP sockets take
#   for the psum's exchange across the hosts (bench/tcp_xchg.py: K
#   connections each way at once, 2 rounds of n/2K, for the largest size).
#
# Host i is namespace spmdc-<pid>-i with address 10.78.<pid mod 250>.(i+1)/24
# on a veth (cth0 inside) whose other end is on the bridge; tbf shapes
# cth0's egress (what the host sends), as a host's link would. Ours:
# build/bench-fabric as H x K processes, each started in its host's
# namespace under `unshare --uts` with the host's name (so the processes of
# a host share the shared-memory lane and hosts meet over libfabric's tcp
# provider on cth0), SPMD_COORDINATOR at host 0; the mesh has H K L devices.
# Open MPI: build/mpi_bench as H K L ranks, one per device, mpirun's MPMD
# contexts each entering a host's namespace (ip netns exec); btl self,tcp on
# 10.78.x.0/24: between hosts over the shaped veths, inside a host over the
# namespace's own loopback route (Open MPI sees one node, so its shared
# memory transport would cross the "hosts": it is left out).
#
# Prints per collective and size: ours and Open MPI (ms, medians of the
# rounds), ours/OMPI, and the wire floor: the bytes that must leave the
# busiest host at the rate (psum 2 (H-1)/H n, all_gather (H-1)/H n, bcast
# n out of the root's host), with each side's time over it. Needs root, ip,
# tc and unshare; Open MPI (mpicc, mpirun) for its column. Everything made
# is removed on exit.
set -euo pipefail
H=2 K=2 L=1 rate=1gbit colls="psum all_gather bcast" sizes="8 16M" reps=3 rounds=3 tcp=0
usage() { sed -n '7,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts "H:K:L:R:c:s:r:k:Th" opt; do
    case $opt in
        H) H=$OPTARG ;; K) K=$OPTARG ;; L) L=$OPTARG ;; R) rate=$OPTARG ;; c) colls=$OPTARG ;;
        s) sizes=$OPTARG ;; r) reps=$OPTARG ;; k) rounds=$OPTARG ;; T) tcp=1 ;;
        *) usage ;;
    esac
done
for v in "$H" "$K" "$L" "$rounds"; do case $v in ''|*[!0-9]*|0) usage ;; esac; done
[ "$H" -ge 2 ] && [ "$H" -le 64 ] || { echo "$0: -H takes 2..64 hosts" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 2; }
for c in ip tc unshare; do command -v $c >/dev/null || { echo "$0: $c not installed" >&2; exit 2; }; done

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$root/build
P=$((H * K)) D=$((H * K * L))
make -s -C "$root" build/bench-fabric
have_mpi=1
command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 || have_mpi=0
if [ $have_mpi = 1 ] && { [ ! -x "$build/mpi_bench" ] || [ "$here/mpi_bench.c" -nt "$build/mpi_bench" ]; }; then
    mpicc -O3 -std=c11 "$here/mpi_bench.c" -o "$build/mpi_bench" -lm
fi

id=$$ net=10.78.$(($$ % 250))
br=spmdc-br$((id % 100000))
ns() { echo "spmdc-$id-$1"; }
tmp=$(mktemp -d)
cleanup() {
    for ((i = 0; i < H; i++)); do
        ip netns pids "$(ns $i)" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$(ns $i)" 2>/dev/null || true
    done
    ip link del "$br" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip link add "$br" type bridge && ip link set "$br" up
ip addr add "$net.254/24" dev "$br" # (Open MPI's PMIx server listens there: a namespace has its own loopback)
for ((i = 0; i < H; i++)); do
    n=$(ns $i) v=spc$((id % 100000))h$i
    ip netns add "$n"
    ip link add "$v" type veth peer name cth0 netns "$n"
    ip link set "$v" master "$br" up
    ip -n "$n" addr add "$net.$((i + 1))/24" dev cth0
    ip -n "$n" link set lo up
    ip -n "$n" link set cth0 up
    [ "$rate" = none ] || tc -n "$n" qdisc add dev cth0 root tbf rate "$rate" burst 512kb latency 200ms
done
for _ in $(seq 1 100); do # carrier on every end (the tcp provider lists running interfaces only)
    up=0
    for ((i = 0; i < H; i++)); do ip -n "$(ns $i)" link show cth0 | grep -q 'state UP' && up=$((up + 1)); done
    [ $up = $H ] && break
    sleep 0.05
done

args=(-r "$reps" --csv)
# One run of ours: every process in its host; process 0 prints the CSV.
ours() { # $1 = collective, $2 = output file, $3 = size
    local key port pids=() i k p rc=0
    key=$(od -An -tx8 -N8 /dev/urandom | tr -d ' ') port=$((20000 + RANDOM % 20000))
    for ((i = 0; i < H; i++)); do
        for ((k = 0; k < K; k++)); do
            p=$((i * K + k))
            ip netns exec "$(ns $i)" unshare --uts sh -c 'hostname "$0" && exec "$@"' "emul-h$i" \
                env SPMD_NUM_PROCESSES=$P SPMD_PROCESS_ID=$p SPMD_COORDINATOR="$net.1:$port" SPMD_JOB_KEY="$key" \
                SPMD_SOCKET_IFNAME=cth0 SPMD_PROVIDER=tcp SPMD_DEVICES_PER_PROCESS=$L \
                timeout 900 "$build/bench-fabric" -d $D -c "$1" -b "$3" -e "$3" "${args[@]}" >"$tmp/p$p.out" 2>"$tmp/p$p.err" &
            pids+=($!)
        done
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    if [ $rc != 0 ]; then echo "# FAILED: ours ($1), exit $rc" >&2; tail -n 5 "$tmp"/p*.err >&2; exit 1; fi
    cp "$tmp/p0.out" "$2"
}
mpi() { # $1 = collective, $2 = output file, $3 = size
    local app=() i
    for ((i = 0; i < H; i++)); do
        [ $i = 0 ] || app+=(:)
        app+=(-np $((K * L)) ip netns exec "$(ns $i)" "$build/mpi_bench" -c "$1" -b "$3" -e "$3" "${args[@]}")
    done
    if ! PMIX_MCA_ptl_tcp_if_include="$br" PMIX_MCA_ptl_tcp_remote_connections=1 timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,tcp \
            --mca btl_tcp_if_include "$net.0/24" "${app[@]}" >"$2" 2>"$tmp/mpi.err"; then
        echo "# FAILED: Open MPI ($1)" >&2; cat "$2" "$tmp/mpi.err" | head -n 30 >&2; exit 1
    fi
}
bits=$(echo "$rate" | awk '/^none$/ { print 0; exit } { v = $0 + 0; u = tolower($0); sub(/^[0-9.]+/, "", u)
    m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "bit" || u == "" ? 1 : -1
    if (m < 0) { print "bad"; exit } print v * m }')
[ "$bits" != bad ] || { echo "$0: -R $rate: give kbit, mbit or gbit" >&2; exit 2; }

echo "# emulated cluster: $H hosts x $K processes x $L devices ($D devices), each host's egress at $rate (tbf), bridge"
echo "# ours: build/bench-fabric -d $D -c COLL -b S -e S ${args[*]} (tcp between hosts, the lane inside one)"
[ $have_mpi = 1 ] && echo "# Open MPI: $D ranks, mpirun MPMD over ip netns exec, btl self,tcp, build/mpi_bench (the same)" ||
    echo "# Open MPI not found: ours alone"
echo "# $rounds rounds alternating; medians of the rounds; floor: bytes out of the busiest host at $rate"
printf '%-11s %10s %10s %10s %9s %9s %10s %10s\n' coll size ours_ms ompi_ms ours/ompi floor_ms ours/floor ompi/floor
for c in $colls; do
    of=() mf=()
    for ((r = 1; r <= rounds; r++)); do
        for s in $sizes; do
            ours "$c" "$tmp/o$c$r-$s.csv" "$s"; of+=("$tmp/o$c$r-$s.csv")
            if [ $have_mpi = 1 ]; then mpi "$c" "$tmp/m$c$r-$s.csv" "$s"; mf+=("$tmp/m$c$r-$s.csv"); fi
        done
    done
    awk -F, -v OFS=, -f "$here/median.awk" "${of[@]}" >"$tmp/o.csv"
    : >"$tmp/m.csv"
    [ $have_mpi = 1 ] && awk -F, -v OFS=, -f "$here/median.awk" "${mf[@]}" >"$tmp/m.csv"
    awk -F, -v H=$H -v bits="$bits" -v m="$tmp/m.csv" '
        BEGIN { while ((getline l < m) > 0) { split(l, f, ","); if (f[1] !~ /^#/ && f[1] != "coll") t[f[1] SUBSEP f[2]] = f[7] } }
        /^#/ || $1 == "coll" { next }
        {
            n = $2; k = $1 SUBSEP $2; mpi = (k in t) ? t[k] / 1000 : 0; ours = $7 / 1000
            w = $1 == "psum" ? 2 * (H - 1) / H * n : $1 == "all_gather" ? (H - 1) / H * n : $1 == "bcast" ? n : 0
            fl = bits > 0 && w > 0 ? w * 8 / bits * 1000 : 0
            printf "%-11s %10d %10.3f %10s %9s %9s %10s %10s\n", $1, n, ours, mpi ? sprintf("%.3f", mpi) : "-",
                mpi ? sprintf("%.2f", ours / mpi) : "-", fl ? sprintf("%.1f", fl) : "-",
                fl ? sprintf("%.2f", ours / fl) : "-", fl && mpi ? sprintf("%.2f", mpi / fl) : "-"
        }' "$tmp/o.csv"
done
if [ $tcp = 1 ]; then # plain TCP, the psum's exchange across the 2 hosts, for the largest size
    n=0
    for s in $sizes; do
        b=$(echo "$s" | awk '{ v = $0 + 0; u = toupper(substr($0, length($0))); print int(v * (u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 1)) }')
        [ "$b" -gt $n ] && n=$b
    done
    if [ $H != 2 ] || ! command -v python3 >/dev/null; then
        echo "# -T: 2 hosts and python3 only"
    else
        port=$((20000 + RANDOM % 20000))
        ip netns exec "$(ns 0)" python3 "$here/tcp_xchg.py" listen "$net.1" $port $K $((n / 2 / K)) 2 9 &
        line=$(ip netns exec "$(ns 1)" timeout 300 python3 "$here/tcp_xchg.py" connect "$net.1" $port $K $((n / 2 / K)) 2 9)
        wait
        echo "$line" | awk -v K=$K -v n=$n '{ printf "# plain TCP, the psum exchange across the hosts (%d connections each way, 2 rounds of %d B): %s ms (median of 9; min %s, max %s)\n", K, n / 2 / K, $2, $3, $4 }'
    fi
fi
