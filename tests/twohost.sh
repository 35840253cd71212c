#!/bin/sh
# Two hosts: two network namespaces joined by a veth pair (10.77.0.1/24 and
# 10.77.0.2/24), one process of a 2-process job in each, the tcp provider
# between them. The processes are test_fabric's "xfer" children (tagged
# transfers of 0, 1, 7, inject-1..inject+1, 8 KiB-1..8 KiB+1 and 1 MiB+13
# bytes, random data verified, then a bootstrap barrier), started with
# SPMD_COORDINATOR at the first namespace's address and SPMD_SOCKET_IFNAME
# at each side's veth. Checks that both pass, that the address each logs at
# info level is its veth address, that the transport took the veth's domain,
# and that the data crossed the veth. Then, with one veth end down, that a
# process told to use it fails to open with SPMD_ERR_INVALID naming it.
# With a second argument (a conformance test built with the libfabric
# backend), that program then runs as a 2-process job across the two
# namespaces; both processes must pass (checks they skipped are counted as
# skipped, never as passed).
# Namespaces of one kernel share /dev/shm, the boot id and the host name,
# so the transport would take its shared-memory lane between the two
# "hosts" for small messages; every run here sets SPMD_SHM_LANE=0, so that
# all of it crosses the veth over tcp, as between real hosts.
#   sh tests/twohost.sh [path/to/test_fabric [path/to/mesh_test]]
# Needs root and `ip netns`; without them one check is reported skipped.
# Prints a closing line "N passed, N failed[, N skipped]"; exit 1 on failure.
# Everything it creates is removed on exit, also on failure or a signal.
exe=${1:-build/fabric/test_fabric}
mesh_exe=${2:-}
LOG=${LOG:-build/test-logs} # where the logs of the last run are left
mkdir -p "$LOG"
P=0 F=0 S=0
summary() {
    if [ $S -gt 0 ]; then echo "$P passed, $F failed, $S skipped"; else echo "$P passed, $F failed"; fi
    [ $F = 0 ]
}
skip() { echo "SKIP two hosts: $*" >&2; S=$((S + 1)); summary; exit $?; }
check() { # $1 = 0 when it held, $2 = what
    if [ "$1" = 0 ]; then P=$((P + 1)); else F=$((F + 1)); echo "FAIL two hosts: $2" >&2; fi
}

[ "$(id -u)" = 0 ] || skip "not root"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) not installed"
[ -x "$exe" ] || { F=$((F + 1)); echo "FAIL two hosts: $exe not built" >&2; summary; exit 1; }

id=$$
NA=spmd2h-a-$id NB=spmd2h-b-$id      # namespaces
VA=spv0-$id VB=spv1-$id              # veth ends (at most 15 characters)
AA=10.77.0.1 AB=10.77.0.2
pa="" pb=""
cleanup() {
    [ -n "$pa" ] && kill -9 "$pa" 2>/dev/null
    [ -n "$pb" ] && kill -9 "$pb" 2>/dev/null
    ip netns pids "$NA" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns pids "$NB" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$NA" 2>/dev/null # deleting a namespace deletes its veth end and the peer with it
    ip netns del "$NB" 2>/dev/null
    ip link del "$VA" 2>/dev/null  # in case it was made but not yet moved
    cp "$W"/* "$LOG"/ 2>/dev/null
    rm -rf "$W"
}
W=$(mktemp -d "${TMPDIR:-/tmp}/twohost.XXXXXX") || exit 1 # this run's logs: parallel runs do not mix them
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

ip netns add "$NA" 2>"$W/twohost-setup.err" || skip "ip netns add failed: $(head -n 1 "$W/twohost-setup.err")"
if ! { ip netns add "$NB" &&
       ip link add "$VA" type veth peer name "$VB" &&
       ip link set "$VA" netns "$NA" && ip link set "$VB" netns "$NB" &&
       ip -n "$NA" addr add "$AA/24" dev "$VA" && ip -n "$NB" addr add "$AB/24" dev "$VB" &&
       ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
       ip -n "$NA" link set "$VA" up && ip -n "$NB" link set "$VB" up; } 2>>"$W/twohost-setup.err"; then
    skip "could not set up the namespaces and veth pair: $(tail -n 1 "$W/twohost-setup.err")"
fi
# The tcp provider lists only interfaces that are running: wait for carrier on both ends.
up=0
for _ in $(seq 1 100); do
    if ip -n "$NA" link show "$VA" | grep -q 'state UP' && ip -n "$NB" link show "$VB" | grep -q 'state UP'; then
        up=1; break
    fi
    sleep 0.05
done
check $((1 - up)) "the veth pair did not come up within 5 s"
tx_before=$(ip netns exec "$NA" cat /sys/class/net/"$VA"/statistics/tx_bytes 2>/dev/null || echo 0)

key=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
port=29500 # fresh namespaces: every port is free
run() { # $1 = namespace, $2 = process id, $3 = interface, $4 = log name
    timeout -s KILL 90 ip netns exec "$1" env SPMD_NUM_PROCESSES=2 SPMD_PROCESS_ID="$2" \
        SPMD_COORDINATOR="$AA:$port" SPMD_JOB_KEY="$key" SPMD_SOCKET_IFNAME="$3" \
        SPMD_PROVIDER=tcp FI_PROVIDER=tcp SPMD_SHM_LANE=0 SPMD_LOG_LEVEL=info SPMD_BOOT_TIMEOUT_MS=20000 \
        "$exe" --child xfer >"$W/$4.out" 2>"$W/$4.err"
}
run "$NA" 0 "$VA" twohost-p0 & pa=$!
run "$NB" 1 "$VB" twohost-p1 & pb=$!
wait $pa; ra=$?; pa=""
wait $pb; rb=$?; pb=""

show() { sed 's/^/      /' "$W/$1.out" "$W/$1.err" >&2; }
check $ra "process 0 (namespace $NA) exited with $ra"
check $rb "process 1 (namespace $NB) exited with $rb"
grep -q '^ok: .* with 2 processes on tcp' "$W/twohost-p0.out"; check $? "process 0 did not report its transfers ok"
grep -q '^ok: .* with 2 processes on tcp' "$W/twohost-p1.out"; check $? "process 1 did not report its transfers ok"
grep -q "info: bootstrap: coordinator listening on $AA port $port (interface $VA)" "$W/twohost-p0.err"
check $? "process 0 did not log $AA on $VA as its address"
grep -q "info: bootstrap: joined coordinator $AA:$port from $AB (interface $VB)" "$W/twohost-p1.err"
check $? "process 1 did not log $AB on $VB as its address"
grep -q "info: fabric: provider tcp.* domain $VA," "$W/twohost-p0.err"; check $? "process 0's transport is not on $VA"
grep -q "info: fabric: provider tcp.* domain $VB," "$W/twohost-p1.err"; check $? "process 1's transport is not on $VB"
tx_after=$(ip netns exec "$NA" cat /sys/class/net/"$VA"/statistics/tx_bytes 2>/dev/null || echo 0)
# 2 groups x 2 sequence numbers of 1 MiB+13 and the smaller sizes, each way
[ $((tx_after - tx_before)) -gt 4194304 ]; check $? "only $((tx_after - tx_before)) bytes left through $VA"
if [ $F -gt 0 ]; then show twohost-p0; show twohost-p1; fi

# A mesh across the two hosts: a conformance test (sweep of reductions, or
# whatever program is given as the second argument) as 2 processes of 2
# the meshes it makes split into one block of devices per host.
if [ -n "$mesh_exe" ] && [ -x "$mesh_exe" ]; then
    key=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    port=29501
    runm() { # $1 = namespace, $2 = process id, $3 = interface, $4 = log name
        timeout -s KILL 300 ip netns exec "$1" env SPMD_NUM_PROCESSES=2 SPMD_PROCESS_ID="$2" \
            SPMD_COORDINATOR="$AA:$port" SPMD_JOB_KEY="$key" SPMD_SOCKET_IFNAME="$3" \
            SPMD_PROVIDER=tcp FI_PROVIDER=tcp SPMD_SHM_LANE=0 SPMD_BOOT_TIMEOUT_MS=20000 SPMD_TEST_QUICK=1 \
            "$mesh_exe" >"$W/$4.out" 2>"$W/$4.err"
    }
    tx_before=$(ip netns exec "$NA" cat /sys/class/net/"$VA"/statistics/tx_bytes 2>/dev/null || echo 0)
    runm "$NA" 0 "$VA" twohost-mesh-p0 & pa=$!
    runm "$NB" 1 "$VB" twohost-mesh-p1 & pb=$!
    wait $pa; ra=$?; pa=""
    wait $pb; rb=$?; pb=""
    tx_after=$(ip netns exec "$NA" cat /sys/class/net/"$VA"/statistics/tx_bytes 2>/dev/null || echo 0)
    # Each process's closing line: a failure, no such line, or no check at
    # all fails; its skipped checks count as skipped here too (run.sh lists
    # them, and with CI=true fails the run), and a process that only skipped
    # counts no pass.
    for i in 0 1; do
        line=$(tail -n 1 "$W/twohost-mesh-p$i.out")
        echo "  two hosts, $(basename "$mesh_exe") process $i: $line" >&2
        r=$ra; [ $i = 1 ] && r=$rb
        set -- $(printf '%s\n' "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed\(, \([0-9]*\) skipped\)*$/\1 \2 \4/p')
        if [ $# -lt 2 ] || [ "$2" != 0 ]; then
            check 1 "mesh test process $i: failures, or no closing line (exit $r): $line"
            continue
        fi
        if [ "${3:-0}" -gt 0 ]; then
            S=$((S + $3))
            why=$(grep -h SKIP "$W/twohost-mesh-p$i.err" | head -n 3 | tr '\n' ';')
            echo "SKIP two hosts: mesh test process $i skipped $3 checks: ${why:-see $LOG/twohost-mesh-p$i.err}" >&2
        fi
        if [ "$1" -gt 0 ]; then [ "$r" = 0 ]; check $? "mesh test process $i exited with $r"
        elif [ "${3:-0}" = 0 ] || [ "$r" != 0 ]; then check 1 "mesh test process $i: nothing checked (exit $r): $line"
        fi
    done
    [ $((tx_after - tx_before)) -gt 65536 ]; check $? "the mesh test sent only $((tx_after - tx_before)) bytes through $VA"
    if [ $F -gt 0 ]; then show twohost-mesh-p0; show twohost-mesh-p1; fi
elif [ -n "$mesh_exe" ]; then
    check 1 "$mesh_exe not built"
fi

# Two hosts of two processes: in each namespace two processes, each under
# `unshare --uts` with its namespace's host name, so that the processes of
# a "host" share the shared-memory lane (same boot, /dev/shm and name) and
# the hosts meet over tcp on the veth, as on a cluster: test_fabric's
# "hosts" mode checks what each host sends over the network for a 16 MiB
# psum (the hierarchical bound 2 (H-1)/H n, and the psum's result) and the
# bcast root's host (at most 2 n).
key=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
port=29502
hpids=""
for i in 0 1 2 3; do
    n=$NA v=$VA h=spmd2h-host-a
    [ $i -ge 2 ] && n=$NB v=$VB h=spmd2h-host-b
    timeout -s KILL 120 ip netns exec "$n" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" \
        env SPMD_NUM_PROCESSES=4 SPMD_PROCESS_ID=$i SPMD_COORDINATOR="$AA:$port" SPMD_JOB_KEY="$key" \
        SPMD_SOCKET_IFNAME="$v" SPMD_PROVIDER=tcp FI_PROVIDER=tcp SPMD_BOOT_TIMEOUT_MS=20000 HOSTS=2 HOSTS_BY_NAME=1 \
        "$exe" --child hosts >"$W/twohost-hosts-p$i.out" 2>"$W/twohost-hosts-p$i.err" &
    hpids="$hpids $!"
done
i=0
for p in $hpids; do
    wait "$p"; r=$?
    grep -q '^ok: hosts: psum 16 MiB: host 1 of 2' "$W/twohost-hosts-p$i.out" && ! grep -q FAILED "$W/twohost-hosts-p$i.out"
    ok=$?
    [ $r = 0 ] && [ $ok = 0 ]; check $? "hosts: process $i exited with $r: $(grep -m 1 FAILED "$W/twohost-hosts-p$i.out")"
    i=$((i + 1))
done
sed 's/^/  two hosts of two processes: /' "$W/twohost-hosts-p0.out" >&2

# SPMD_SOCKET_IFNAME naming an interface that is down: the tcp provider offers
# no domain on it, and opening must say so (not fall back to lo, whose
# address the other host cannot reach).
ip -n "$NB" link set "$VB" down
timeout -s KILL 30 ip netns exec "$NB" env SPMD_NUM_PROCESSES=1 SPMD_PROCESS_ID=0 SPMD_COORDINATOR="$AB:$port" \
    SPMD_SOCKET_IFNAME="$VB" SPMD_PROVIDER=tcp FI_PROVIDER=tcp SPMD_SHM_LANE=0 SPMD_BOOT_TIMEOUT_MS=5000 \
    "$exe" --child xfer >"$W/twohost-down.out" 2>"$W/twohost-down.err"
rd=$?
[ $rd = 1 ] && grep -q "open: SPMD_ERR_INVALID fabric: provider tcp.* no domain on interface $VB" "$W/twohost-down.out"
check $? "interface down: exit $rd, want 1 and SPMD_ERR_INVALID naming $VB: $(head -n 1 "$W/twohost-down.out")"
summary
