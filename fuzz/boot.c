/* Fuzz target: the bootstrap's wire (see the header's ">>bootstrap"
   section): what a process reads from another's socket. The first bytes
   choose the job (2..9 processes), this process's id and a path; the rest
   is the byte stream (split between the connections the path reads):
     0  a handshake as the coordinator judges it (process 0) or a parent in
        the tree (another process): spmd__boot_parse, spmd__boot_hello_ok
     1  an allgather over the tree (UP from the children, DOWN from the
        parent: spmd__boot_take), as any process; its connection to the
        coordinator stays open and quiet
     2  the coordinator's TREE message as a process that is not the
        coordinator awaits and decodes it (spmd__boot_tree_decode)
     3  the lost-process poll (out-of-band messages only), either side
   Connections are socketpairs whose other ends never write: the streams
   are all there is (each connection is marked at end of file, so nothing
   waits). Buffers are allocated to their exact size (the allocator below),
   so a read past a message is caught. Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

#include "exact_alloc.h"

#define BOOT_FUZZ_PROCS 9
static int other_end[BOOT_FUZZ_PROCS + 4];

/* A connection holding `n` bytes of the stream; its socket's other end stays open, never written. */
static void conn_with(spmd__boot *b, spmd__boot_conn *c, int rank, const uint8_t *p, size_t n, int slot) {
    int sv[2];
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->rank = rank;
    other_end[slot] = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
        spmd__boot_nonblock(sv[0]);
        c->fd = sv[0];
        other_end[slot] = sv[1];
    }
    c->buf = (unsigned char *)spmd__alloc(&b->alloc, n ? n : 1);
    if (n) memcpy(c->buf, p, n);
    c->len = n;
    c->cap = n ? n : 1;
    c->eof = 1;
    snprintf(c->peer, sizeof c->peer, "fuzz");
}

/* The next piece of the stream: as long as its first byte says (times 8), the last one takes the rest. */
static size_t piece(const uint8_t *data, size_t size, size_t *at, int last) {
    size_t n = *at < size ? data[*at] * (size_t)8 : 0;
    *at += *at < size;
    if (last || n > size - *at) n = size - *at;
    return n;
}

/* Path 1: this process's tree connections hold the stream; the allgather's result, if any, is sane. */
static void fuzz_allgather(spmd__boot *b, const uint8_t *data, size_t size) {
    static unsigned char all[BOOT_FUZZ_PROCS * 64];
    unsigned char mine[64];
    size_t at = 0, n, lens[BOOT_FUZZ_PROCS];
    spmd__boot_conn *conns[3] = {&b->down[0], &b->down[1], &b->up};
    int ranks[3], k, last = 2, i;
    spmd_status s;
    ranks[0] = spmd__boot_child(b, b->rank, 0);
    ranks[1] = spmd__boot_child(b, b->rank, 1);
    ranks[2] = spmd__boot_parent(b, b->rank);
    while (last > 0 && ranks[last] < 0) last--;
    for (k = 0; k < 3; k++) {
        if (ranks[k] < 0) continue;
        n = piece(data, size, &at, k == last);
        conn_with(b, conns[k], ranks[k], data + at, n, k);
        at += n;
    }
    for (i = 0; i < (int)sizeof mine; i++) mine[i] = (unsigned char)i;
    s = spmd__boot_allgather(b, mine, sizeof mine / 2, all, sizeof mine, lens, spmd__now_ns() + 1000000000u);
    assert(s != SPMD_OK || lens[b->rank] == sizeof mine / 2);
    if (s == SPMD_OK)
        for (i = 0; i < b->nprocs; i++) assert(lens[i] <= sizeof mine);
    for (k = 0; k < 3; k++)
        if (ranks[k] >= 0 && other_end[k] >= 0) close(other_end[k]);
}

/* Path 2: a TREE message on the coordinator's connection, awaited and decoded as spmd__boot_tree does. */
static void fuzz_tree(spmd__boot *b, const uint8_t *data, size_t size) {
    spmd__boot_msg m;
    char host[INET6_ADDRSTRLEN], port[8];
    const char *t;
    conn_with(b, &b->coord, 0, data, size, 0);
    if (spmd__boot_await(b, &b->coord, SPMD__BM_TREE, &m, spmd__now_ns() + 1000000000u, "bootstrap") == SPMD_OK &&
        spmd__boot_tree_decode(b, m.payload, m.len, host, sizeof host, port, sizeof port) == 0) {
        assert(m.len == 12 || m.len == 24);
        assert(atoi(port) >= 1 && atoi(port) <= 65535);
        for (t = host; *t; t++) assert((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'f') || *t == '.' || *t == ':');
    }
    close(other_end[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    spmd__boot *b;
    int i, path;
    size_t at;
    struct pollfd pfds[BOOT_FUZZ_PROCS + 1];
    if (size < 3) return 0;
    b = fuzz_boot();
    b->coord.fd = b->up.fd = b->down[0].fd = b->down[1].fd = -1;
    b->nprocs = 2 + data[0] % (BOOT_FUZZ_PROCS - 1);
    b->rank = data[1] % b->nprocs;
    b->timeout_ms = 1000;
    b->keylen = 3;
    memcpy(b->key, "key", 4);
    b->pfds = pfds;
    path = data[2] % 4;
    data += 3;
    size -= 3;
    b->lost = (unsigned char *)spmd__alloc(&b->alloc, (size_t)b->nprocs);
    if (path == 2 && b->rank == 0) b->rank = 1;
    if (b->rank == 0) {
        b->peers = (spmd__boot_conn *)spmd__alloc(&b->alloc, (size_t)b->nprocs * sizeof *b->peers);
        for (i = 0; i < b->nprocs; i++) { b->peers[i].fd = -1; b->peers[i].rank = i; other_end[i] = -1; }
    } else if (path == 1) { /* the coordinator's connection: open, quiet */
        conn_with(b, &b->coord, 0, NULL, 0, 3);
        b->coord.eof = 0;
    }
    if (path == 0) {
        spmd__boot_conn c;
        spmd__boot_msg m;
        char why[160];
        conn_with(b, &c, -1, data, size, 0);
        c.eof = 0;
        c.rank = -1;
        if (size > 1 && data[0] & 1 && spmd__boot_slot(b, (uint32_t)(data[0] / 2 % b->nprocs)))
            spmd__boot_slot(b, (uint32_t)(data[0] / 2 % b->nprocs))->fd = 0; /* one joined already */
        for (at = 0; spmd__boot_parse(b, &c, at, &m, why, sizeof why) == 1; at += m.total)
            if (m.type == SPMD__BM_HELLO && !spmd__boot_hello_ok(b, &m, why, sizeof why)) assert(why[0]);
        for (i = 0; b->peers && i < b->nprocs; i++) b->peers[i].fd = -1;
        b->down[0].fd = b->down[1].fd = -1;
        spmd__boot_conn_close(b, &c);
        close(other_end[0]);
    } else if (path == 1) {
        fuzz_allgather(b, data, size);
        if (b->rank != 0) close(other_end[3]);
    } else if (path == 2) {
        fuzz_tree(b, data, size);
    } else if (b->rank != 0) {
        conn_with(b, &b->coord, 0, data, size, 0);
        b->coord.eof = 0;
        spmd__boot_poll(b);
        close(other_end[0]);
    } else {
        /* the stream cut among the peers: each takes the length its first byte says */
        for (i = 1, at = 0; i < b->nprocs; i++) {
            size_t n = piece(data, size, &at, i == b->nprocs - 1);
            conn_with(b, &b->peers[i], i, data + at, n, i);
            b->peers[i].eof = 0;
            at += n;
        }
        spmd__boot_poll(b);
        for (i = 1; i < b->nprocs; i++)
            if (other_end[i] >= 0) close(other_end[i]);
    }
    for (i = 0; i < (int)(b->nbroken < SPMD__BOOT_BROKEN_KEEP ? b->nbroken : SPMD__BOOT_BROKEN_KEEP); i++) {
        const char *t = b->broken[i].text;
        for (; *t; t++) assert(*t >= 32 && *t <= 126);
    }
    b->pfds = NULL;
    spmd__boot_close(b);
    return 0;
}
