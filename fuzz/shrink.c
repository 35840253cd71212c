/* Fuzz target: the survivors' agreement of spmd_mesh_shrink across
   processes (see the header's ">>shrink" section): the payloads of the
   GATHER messages the coordinator reads from each survivor (its view of
   the processes lost) and of the GATHERED message a survivor reads back
   (the coordinator's decision), decoded by spmd__shrink_take. The first
   byte chooses the job's size (1..64 processes), the second the side
   (bit 0: the coordinator, else a survivor) and, at the coordinator, the
   connection read (process 1..P-1); then the agreement's round (4 bytes)
   and a byte that seeds what this process knew lost before. The rest is
   the messages on the connection, in order, each a type byte, a 2-byte
   length and its payload (the last one cut where the input ends), each in
   a buffer of exactly its size; they are read as spmd__shrink_agree reads
   them: earlier rounds skipped, until one is taken or is out of step. The
   result must be what the message format says (a reference decoding
   here), gone is written only by a message taken, and a decision the
   coordinator would make from the result reads back the same at a
   survivor. Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

/* What a message means, from the format alone: 1 taken, 0 skipped, -1 out of step. */
static int shrink_ref(unsigned type, const unsigned char *pl, size_t len, unsigned want, uint32_t round, int P) {
    uint32_t r = len >= 4 ? (uint32_t)pl[0] | (uint32_t)pl[1] << 8 | (uint32_t)pl[2] << 16 | (uint32_t)pl[3] << 24 : 0;
    if (type != want) return -1;
    if (r < round) return 0;
    return r == round && len == 4 + (size_t)P ? 1 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char gone[64], before[64], msg[4 + 64], back[64];
    int P, coord, conn, k, t = 0;
    unsigned want;
    uint32_t round;
    if (size < 7) return 0;
    P = 1 + data[0] % 64;
    coord = data[1] & 1;
    conn = P > 1 ? 1 + (data[1] >> 1) % (P - 1) : 0;
    want = coord ? SPMD__BM_GATHER : SPMD__BM_GATHERED;
    round = spmd__boot_get32(data + 2);
    for (k = 0; k < P; k++) gone[k] = (unsigned char)((data[6] >> (k % 8) & 1) && k != 0);
    data += 7;
    size -= 7;
    while (size >= 3) {
        unsigned type = data[0] % 12; /* with types that do not exist */
        size_t len = (size_t)data[1] | (size_t)data[2] << 8;
        unsigned char *pl;
        int ref;
        data += 3;
        size -= 3;
        if (len > size) len = size;
        pl = (unsigned char *)malloc(len ? len : 1);
        assert(pl);
        if (len) memcpy(pl, data, len);
        data += len;
        size -= len;
        memcpy(before, gone, (size_t)P);
        ref = shrink_ref(type, pl, len, want, round, P);
        t = spmd__shrink_take(type, pl, len, want, round, P, coord, gone);
        assert(t == ref);
        if (t == 1 && !coord) assert(memcmp(gone, pl + 4, (size_t)P) == 0);
        if (t == 1 && coord)
            for (k = 0; k < P; k++) assert(gone[k] == (before[k] | (pl[4 + k] != 0)));
        if (t != 1) assert(memcmp(gone, before, (size_t)P) == 0);
        free(pl);
        if (t != 0) break; /* one taken or out of step ends this connection's part */
    }
    if (coord) {
        /* out of step: that process is not in the new mesh; then the
           decision as the coordinator sends it, read by a survivor */
        if (t < 0) gone[conn] = 1;
        gone[0] = 0;
        spmd__boot_put32(msg, round);
        memcpy(msg + 4, gone, (size_t)P);
        memset(back, 0xa5, sizeof back);
        assert(spmd__shrink_take(SPMD__BM_GATHERED, msg, 4 + (size_t)P, SPMD__BM_GATHERED, round, P, 0, back) == 1);
        assert(memcmp(back, gone, (size_t)P) == 0);
        /* a GATHER of the same round and size is taken by the coordinator: the union only grows */
        memcpy(before, gone, (size_t)P);
        assert(spmd__shrink_take(SPMD__BM_GATHER, msg, 4 + (size_t)P, SPMD__BM_GATHER, round, P, 1, gone) == 1);
        for (k = 0; k < P; k++) assert(gone[k] == (before[k] | (msg[4 + k] != 0)) && (!before[k] || gone[k]));
    }
    return 0;
}
