/* Fuzz target: the join side of the bootstrap's handshake (see the
   header's ">>bootstrap" section): what a process that is not the
   coordinator reads after its HELLO, decoded by spmd__boot_answer. The
   first byte chooses the job (2..5 processes) and this process's id
   (1..n-1); the rest is the stream from the coordinator, in a buffer of
   exactly its size, read as spmd__boot_join reads it: answers are decoded
   until one ends the handshake or the bytes run out. A WELCOME is taken
   from the coordinator (process 0) only, and consumes exactly its 16
   bytes, leaving the rest; a refusal or an invalid answer
   sets a status that is an error and a message in printable ASCII (a
   REJECT's reason comes from the coordinator and is shown to users).
   Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

#include "exact_alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    spmd__boot *b;
    spmd__boot_conn *c;
    spmd_status st = SPMD_OK;
    size_t before;
    uint32_t from;
    int rc;
    const char *t;
    if (size < 1) return 0;
    b = fuzz_boot();
    b->nprocs = 2 + data[0] % 4;
    b->rank = 1 + data[0] / 4 % (b->nprocs - 1);
    b->timeout_ms = 1000;
    data++;
    size--;
    c = &b->coord;
    c->fd = -1;
    c->rank = 0;
    c->buf = (unsigned char *)spmd__alloc(&b->alloc, size ? size : 1);
    if (size) memcpy(c->buf, data, size);
    c->len = size;
    c->cap = size ? size : 1;
    c->eof = 1;
    snprintf(c->peer, sizeof c->peer, "fuzz");
    do {
        before = c->len;
        from = c->len >= 12 ? spmd__boot_get32(c->buf + 8) : 0;
        rc = spmd__boot_answer(b, c, &st);
        if (rc == 1) assert(before - c->len == SPMD__BOOT_HDR && st == SPMD_OK && from == 0);
        if (rc == 0) assert(c->len == before);
    } while (rc == 1);
    if (rc < 0) {
        assert(st != SPMD_OK && st < SPMD_STATUS_COUNT && b->err[0]);
        for (t = b->err; *t; t++) assert(*t >= 32 && *t <= 126);
    }
    spmd__boot_close(b);
    return 0;
}
