/* Fuzz target: the headers that come over libfabric from other processes
   (see the header's ">>libfabric meshes" section): an exchange member's
   header, short or long form (spmd__x_parse, then its signature put into
   words as a mismatch message does, spmd__sig_text; a plan's message also
   the refusal its spare word says, spmd__x_pseen), and a send/recv
   message header (spmd__xp_hdr_ok). The first 24 bytes say what this
   process expects (member, group hash, sequence, inline limit); the rest
   is the header as received, in a buffer of exactly its size. What is
   accepted must be self-consistent: inline data inside what arrived, of
   the length the header says, within the limit. Build and run: see
   fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t ghash, gseq;
    uint32_t k, inl;
    unsigned char *h;
    size_t n;
    spmd__xview v;
    const char *why;
    char text[96];
    if (size < 24) return 0;
    memcpy(&ghash, data, 8);
    memcpy(&gseq, data + 8, 8);
    memcpy(&k, data + 16, 4);
    memcpy(&inl, data + 20, 4);
    k %= 65536;
    inl %= SPMD__X_INLINE + 1;
    n = size - 24;
    h = (unsigned char *)malloc(n ? n : 1);
    if (n) memcpy(h, data + 24, n);
    if (spmd__x_parse(h, n, (int)k, ghash, gseq, inl, &v, &why)) {
        size_t hdr = v.is_short ? SPMD__X_SHDR : SPMD__X_HDR;
        assert(n >= hdr && v.data == h + hdr);
        if (v.has_inline) assert(v.data_len <= inl && v.data_len == n - hdr);
        if (v.axes) assert(strlen(v.axes) < 32 && v.site && strlen(v.site) < 24);
        if (v.is_short) {
            int by, G = (int)(k % 4096) + 1;
            spmd_status st;
            if (spmd__x_pseen(h, G, &by, &st) && by) assert(by <= G && st > SPMD_OK && st < SPMD_STATUS_COUNT);
        }
    } else {
        assert(why && *why);
    }
    spmd__sig_text(&v.sig, text, sizeof text);
    assert(strlen(text) < sizeof text);
    free(h);
    /* the same bytes as a send/recv header */
    h = (unsigned char *)malloc(n >= SPMD__P_HDR ? n : SPMD__P_HDR);
    memset(h, 0, n >= SPMD__P_HDR ? n : SPMD__P_HDR);
    if (n) memcpy(h, data + 24, n);
    if (spmd__xp_hdr_ok((const spmd__phdr *)(void *)h, n, (int)(k & 0xfff), (int)(k >> 12), ghash, gseq)) {
        const spmd__phdr *p = (const spmd__phdr *)(void *)h;
        assert(p->dtype < SPMD_DTYPE_COUNT);
        if (p->has_inline) /* what the receive copies: count elements, all of them inside what came */
            assert(p->count <= (n - SPMD__P_HDR) / spmd__dtype_sizes[p->dtype] &&
                   p->count * spmd__dtype_sizes[p->dtype] == n - SPMD__P_HDR);
    }
    free(h);
    return 0;
}
