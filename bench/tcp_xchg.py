#!/usr/bin/env python3
# tcp_xchg.py - what plain TCP sockets deliver to an exchange: K connections
# between two hosts, each way at once, R rounds of B bytes each way per
# connection, the rounds in step on both sides (a round ends when every
# connection's bytes are in). bench/cluster.sh -T runs it between the
# namespaces of 2 hosts as the psum's exchange across them: K processes a
# host, 2 rounds (reduce-scatter, all-gather) of n/2K each.
#
#   tcp_xchg.py listen|connect ADDR PORT K BYTES ROUNDS REPS
#
# Prints, from the connect side: "tcp_xchg: MEDIAN_MS MIN_MS MAX_MS" over
# REPS timed repetitions (one untimed first).
import socket, statistics, sys, threading, time

role, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
K, size, rounds, reps = (int(a) for a in sys.argv[4:8])
conns = []
if role == "listen":
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(K)
    conns = [srv.accept()[0] for _ in range(K)]
else:
    for _ in range(K):
        c = socket.socket()
        for _ in range(400):  # (the listener may not be up yet)
            try:
                c.connect((addr, port))
                break
            except OSError:
                time.sleep(0.05)
        conns.append(c)
for c in conns:
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
payload = b"\0" * size


def take(c, n):
    while n:
        got = c.recv(min(1 << 20, n))
        if not got:
            sys.exit("tcp_xchg: the other side closed")
        n -= len(got)


def step():  # both sides here before the clock starts or stops
    conns[0].sendall(b"s")
    take(conns[0], 1)


times = []
for rep in range(reps + 1):
    step()
    t0 = time.perf_counter()
    for _ in range(rounds):
        th = [threading.Thread(target=c.sendall, args=(payload,)) for c in conns]
        th += [threading.Thread(target=take, args=(c, size)) for c in conns]
        for t in th:
            t.start()
        for t in th:
            t.join()
    step()
    if rep:
        times.append((time.perf_counter() - t0) * 1e3)
if role == "connect":
    print("tcp_xchg: %.1f %.1f %.1f" % (statistics.median(times), min(times), max(times)))
