/* Fuzz target: the shared-memory lane's segment header (see the header's
   "shared-memory lane" section): what a process reads from another
   process's mapping when it attaches (spmd__lane_seg_ok), and the
   segment's name as that process published it (spmd__lane_name_ok). The
   first 4 bytes choose the expected shape (1..4 rings of 64..512 bytes,
   bulk rings of 0 or 256 bytes, which ring is ours); the next byte is the
   name's length, then the name; the rest is the segment's bytes (zeros
   after the input), in a buffer of exactly the segment's size. A segment
   accepted says what was expected in every field; an accepted name is one
   we would make, with no '/' or "..", and its copy is NUL-terminated.
   Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

#define KEY 0x0123456789abcdefull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t nrings, cap, bulk, ri, seg, nl, n;
    int owner, me, nprocs = 8;
    unsigned char *p;
    char name[64];
    if (size < 5) return 0;
    nrings = 1 + data[0] % 4;
    cap = (size_t)64 << (data[1] % 4);
    bulk = data[2] & 1 ? 256 : 0;
    ri = data[2] >> 1 & 7; /* sometimes past the last ring: refused */
    owner = data[3] % 4;
    me = 4 + data[3] / 4 % 4;
    nl = data[4];
    data += 5;
    size -= 5;
    if (nl > size) nl = size;
    if (spmd__lane_name_ok(data, nl, name, sizeof name)) {
        assert(strlen(name) == nl && nl < sizeof name && memcmp(name, data, nl) == 0);
        assert(!strchr(name, '/') && !strstr(name, "..") && strncmp(name, SPMD__LANE_PREFIX, 10) == 0);
    }
    data += nl;
    size -= nl;
    seg = spmd__lane_seg_size(nrings, cap, bulk);
    p = (unsigned char *)calloc(1, seg);
    n = size < seg ? size : seg;
    memcpy(p, data, n);
    if (spmd__lane_seg_ok(p, owner, nprocs, me, KEY, nrings, cap, bulk, ri)) {
        const spmd__lane_seg *s = (const spmd__lane_seg *)(void *)p;
        const spmd__lane_ring *r = spmd__lane_ring_at(p, ri, cap);
        assert(ri < nrings && s->magic == SPMD__LANE_MAGIC && s->owner == (uint32_t)owner);
        assert(s->nrings == nrings && s->cap == cap && s->bulk == bulk && s->size == seg && s->key == KEY);
        assert((s->nonce & 1) && r->producer == (uint32_t)me && r->tail == 0);
        assert(!bulk || spmd__lane_bulk_at(p, nrings, cap, ri, bulk)->tail == 0);
    }
    free(p);
    return 0;
}
