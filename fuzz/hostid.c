/* Fuzz target: the shared-memory lane's host identities (see the header's
   "shared-memory lane" section): each process's first blob of
   spmd__lane_open ("1" and its host's identity -- kernel boot, host name,
   /dev/shm, user -- or "0" when it wants no lane), from which
   spmd__lane_locals picks the processes of this host and spmd__lane_far
   those of other hosts (the identity alone). The first byte
   chooses the job's size (2..16 processes), the second this process's id,
   the third the allgather's capacity (from the length of our blob up);
   then our identity (a length byte, its bytes). Then each other process's
   blob: a byte choosing its form (ours; ours one byte longer or shorter;
   ours with one byte changed, as the next two bytes say; or its own bytes,
   a length byte and them), laid out as the allgather leaves them (process
   i's at i times the capacity, ours in our place) in a buffer of exactly
   that size, the bytes past each blob garbage. The processes picked must
   be those whose blob equals ours (a reference decoding here), in
   increasing order, ours among them at the place given; the far ones
   every other whose blob past its first byte differs from ours. Build and run:
   see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#if SPMD__HAS_LANE
    unsigned char mine[1 + 255], *blobs, far[16];
    size_t lens[16], n, cap, me = 99, nloc, i, k, l;
    int loc[16], nprocs, rank;
    if (size < 4) return 0;
    nprocs = 2 + data[0] % 15;
    rank = data[1] % nprocs;
    n = 1 + (size_t)data[3];
    cap = n + 1 + data[2] % 64; /* room for a blob one byte longer than ours */
    data += 4;
    size -= 4;
    if (n - 1 > size) n = 1 + size;
    mine[0] = '1';
    memcpy(mine + 1, data, n - 1);
    data += n - 1;
    size -= n - 1;
    blobs = (unsigned char *)malloc((size_t)nprocs * cap);
    assert(blobs);
    memset(blobs, 0xa5, (size_t)nprocs * cap); /* garbage past each blob */
    for (i = 0; i < (size_t)nprocs; i++) {
        unsigned char *b = blobs + i * cap;
        unsigned form = size ? data[0] % 5 : 0;
        if (i == (size_t)rank) { /* ours, as the bootstrap puts it */
            memcpy(b, mine, n);
            lens[i] = n;
            continue;
        }
        if (size) { data++; size--; }
        memcpy(b, mine, n);
        lens[i] = n;
        if (form == 1) {
            b[n] = size ? data[0] : 0;
            if (size) { data++; size--; }
            lens[i] = n + 1;
        } else if (form == 2) {
            lens[i] = n - 1;
        } else if (form == 3 && size >= 2) {
            b[data[0] % n] ^= data[1];
            data += 2;
            size -= 2;
        } else if (form == 4) {
            l = size ? data[0] % (cap + 1) : 0;
            if (size) { data++; size--; }
            if (l > size) l = size;
            memcpy(b, data, l);
            lens[i] = l;
            data += l;
            size -= l;
        }
    }
    nloc = spmd__lane_locals(blobs, cap, lens, nprocs, rank, mine, n, loc, &me);
    /* the reference: every process whose blob is ours, ours too */
    assert(nloc >= 1 && nloc <= (size_t)nprocs && me < nloc && loc[me] == rank);
    for (i = 0, k = 0; i < (size_t)nprocs; i++) {
        int same = lens[i] == n && memcmp(blobs + i * cap, mine, n) == 0;
        if (same) {
            assert(k < nloc && loc[k] == (int)i);
            k++;
        }
    }
    assert(k == nloc);
    spmd__lane_far(blobs, cap, lens, nprocs, rank, mine, n, far);
    for (i = 0; i < (size_t)nprocs; i++) {
        int near = i == (size_t)rank;
        if (n > 1 && lens[i] == n) /* the same identity: byte by byte past the first */
            for (near = 1, k = 1; k < n; k++) near &= blobs[i * cap + k] == mine[k];
        assert(far[i] == !near);
    }
    free(blobs);
#else
    (void)data;
    (void)size;
#endif
    return 0;
}
