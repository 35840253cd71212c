/* Fuzz target: the bootstrap's wire (see the header's ">>bootstrap"
   section): what a process reads from another's socket. The first bytes
   choose the job (2..5 processes), this process's id and a path; the rest
   is the byte stream (for the coordinator: split between its peers):
     0  a handshake as the coordinator judges it (spmd__boot_parse, spmd__boot_hello_ok)
     1  an allgather as a process that is not the coordinator (GATHERED, LOST, BROKEN, BYE)
     2  an allgather as the coordinator (GATHER from every peer, and the rest)
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

static int other_end[SPMD__BOOT_MAX_PROCS > 8 ? 8 : SPMD__BOOT_MAX_PROCS];

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    spmd__boot *b;
    int i, path;
    size_t at, lens[8];
    static unsigned char all[8 * 64];
    unsigned char mine[64];
    if (size < 3) return 0;
    b = fuzz_boot();
    b->coord.fd = -1;
    b->nprocs = 2 + data[0] % 4;
    b->rank = data[1] % b->nprocs;
    b->timeout_ms = 1000;
    b->keylen = 3;
    memcpy(b->key, "key", 4);
    path = data[2] % 4;
    data += 3;
    size -= 3;
    b->lost = (unsigned char *)spmd__alloc(&b->alloc, (size_t)b->nprocs);
    if (path == 0 || path == 2 || (path == 3 && b->rank == 0)) b->rank = 0;
    if (b->rank == 0) {
        b->peers = (spmd__boot_conn *)spmd__alloc(&b->alloc, (size_t)b->nprocs * sizeof *b->peers);
        for (i = 0; i < b->nprocs; i++) { b->peers[i].fd = -1; b->peers[i].rank = i; other_end[i] = -1; }
    }
    for (i = 0; i < (int)(sizeof mine); i++) mine[i] = (unsigned char)i;
    if (path == 0) {
        spmd__boot_conn c;
        spmd__boot_msg m;
        char why[160];
        conn_with(b, &c, -1, data, size, 0);
        c.eof = 0;
        c.rank = -1;
        if (size > 1 && data[0] & 1) b->peers[1 + data[0] / 2 % (b->nprocs - 1)].fd = 0; /* one joined already */
        for (at = 0; spmd__boot_parse(b, &c, at, &m, why, sizeof why) == 1; at += m.total)
            if (m.type == SPMD__BM_HELLO && !spmd__boot_hello_ok(b, &m, why, sizeof why)) assert(why[0]);
        for (i = 0; i < b->nprocs; i++) b->peers[i].fd = -1;
        spmd__boot_conn_close(b, &c);
        close(other_end[0]);
    } else if (b->rank != 0) {
        conn_with(b, &b->coord, 0, data, size, 0);
        if (path == 1) {
            spmd_status s = spmd__boot_allgather(b, mine, sizeof mine / 2, all, sizeof mine, lens,
                                                 spmd__now_ns() + 1000000000u);
            assert(s != SPMD_OK || lens[b->rank] == sizeof mine / 2);
            if (s == SPMD_OK)
                for (i = 0; i < b->nprocs; i++) assert(lens[i] <= sizeof mine);
        } else {
            b->coord.eof = 0;
            spmd__boot_poll(b);
        }
        close(other_end[0]);
    } else {
        /* the stream cut among the peers: each takes the length its first byte says */
        for (i = 1, at = 0; i < b->nprocs; i++) {
            size_t n = at < size ? data[at] * (size_t)8 : 0;
            at += at < size;
            if (i == b->nprocs - 1 || n > size - at) n = size - at;
            conn_with(b, &b->peers[i], i, data + at, n, i);
            at += n;
        }
        if (path == 2) {
            spmd_status s = spmd__boot_allgather(b, mine, sizeof mine / 2, all, sizeof mine, lens,
                                                 spmd__now_ns() + 1000000000u);
            if (s == SPMD_OK)
                for (i = 0; i < b->nprocs; i++) assert(lens[i] <= sizeof mine);
        } else {
            for (i = 1; i < b->nprocs; i++) b->peers[i].eof = 0;
            spmd__boot_poll(b);
        }
        for (i = 1; i < b->nprocs; i++)
            if (other_end[i] >= 0) close(other_end[i]);
    }
    for (i = 0; i < (int)(b->nbroken < SPMD__BOOT_BROKEN_KEEP ? b->nbroken : SPMD__BOOT_BROKEN_KEEP); i++) {
        const char *t = b->broken[i].text;
        for (; *t; t++) assert(*t >= 32 && *t <= 126);
    }
    spmd__boot_close(b);
    return 0;
}
