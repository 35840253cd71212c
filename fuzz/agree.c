/* Fuzz target: the agreement at the end of spmd_run across processes (see
   spmd__fab_agree in the header's ">>libfabric meshes" section): what
   each process contributed to the bootstrap's allgather (the status that
   broke its mesh, 4 bytes, 0 for none, and the reason's text), decoded by
   spmd__fab_agree_pick. The first byte chooses the job's size (1..16
   processes); the next two the size of the text's buffer (0:
   spmd__fab_agree's own, else 1..600). The rest is each
   process's entry in turn, a 2-byte length (at most the allgather's
   capacity, 4 + SPMD__BOOT_BROKEN_MAX) and its bytes (cut where the input
   ends), laid out as the allgather leaves them (process p's at p times
   the capacity) in a buffer of exactly that size, the bytes past each
   entry's length garbage. The pick must be what the format says (a
   reference decoding here, from the entries' lengths and bytes only: the
   lowest process with a nonzero status, its reason named after it unless
   it names its origin already), and the text a NUL-terminated line of
   printable ASCII within its buffer, then cut into the mesh's broken_msg
   as spmd__fab_agree does. Build and
   run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

#define AGREE_CAP (4 + SPMD__BOOT_BROKEN_MAX)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t lens[16], n, i, l;
    unsigned char *all;
    char *why, expect[700], broken_msg[512];
    int P, p, q, ref = -1;
    uint32_t got = 0xdeadbeefu, st;
    if (size < 3) return 0;
    P = 1 + data[0] % 16;
    n = (size_t)data[1] | (size_t)data[2] << 8;
    n = n == 0 ? SPMD__BOOT_BROKEN_MAX + 64 : 1 + n % 600;
    data += 3;
    size -= 3;
    all = (unsigned char *)malloc((size_t)P * AGREE_CAP);
    why = (char *)malloc(n);
    assert(all && why);
    memset(all, 0xa5, (size_t)P * AGREE_CAP); /* garbage past each entry */
    for (q = 0; q < P; q++) {
        l = size >= 2 ? ((size_t)data[0] | (size_t)data[1] << 8) % (AGREE_CAP + 1) : 0;
        if (size >= 2) { data += 2; size -= 2; }
        if (l > size) l = size;
        memcpy(all + (size_t)q * AGREE_CAP, data, l);
        lens[q] = l;
        data += l;
        size -= l;
    }
    /* the reference: the lowest process whose status is nonzero */
    for (p = 0; p < P; p++)
        if (lens[p] >= 4 && spmd__boot_get32(all + (size_t)p * AGREE_CAP) != 0) break;
    st = p < P ? spmd__boot_get32(all + (size_t)p * AGREE_CAP) : 0;
    if (p < P && st < SPMD_STATUS_COUNT) {
        const unsigned char *t = all + (size_t)p * AGREE_CAP + 4;
        size_t at = 0;
        ref = p;
        if (lens[p] < 12 || memcmp(t, "process ", 8) != 0) at = (size_t)snprintf(expect, sizeof expect, "process %d: ", p);
        for (i = 4; i < lens[p]; i++) {
            unsigned char c = all[(size_t)p * AGREE_CAP + i];
            expect[at++] = c >= 32 && c <= 126 ? (char)c : '?';
        }
        expect[at] = '\0';
        if (at >= n) expect[n - 1] = '\0'; /* cut to the buffer */
    }
    memset(why, 0x5a, n);
    q = spmd__fab_agree_pick(all, AGREE_CAP, lens, P, &got, why, n);
    assert(q == ref);
    if (q < 0) {
        assert(got == 0xdeadbeefu);
    } else {
        assert(got == st && got != 0 && got < SPMD_STATUS_COUNT);
        assert(memchr(why, '\0', n) != NULL);
        assert(strcmp(why, expect) == 0);
        for (i = 0; why[i]; i++) assert(why[i] >= 32 && why[i] <= 126);
        /* into the mesh, as spmd__fab_agree does */
        l = strlen(why) < sizeof broken_msg ? strlen(why) : sizeof broken_msg - 1;
        memcpy(broken_msg, why, l);
        broken_msg[l] = '\0';
        assert(strncmp(broken_msg, "process ", 8) == 0 || n <= 8); /* names its origin */
    }
    free(why);
    free(all);
    return 0;
}
