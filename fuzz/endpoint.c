/* Fuzz target: a process's endpoint entry, as spmd__fab_open reads every
   process's from the bootstrap's allgather (see the header's ">>libfabric
   backend" section), decoded by spmd__fab_entry: the largest segments it
   takes within a host and between hosts (4 bytes each), its address's
   length (4 bytes), the address (what
   fi_av_insert reads), the provider's name and its NUL. The first byte
   chooses this process's provider (which the entry's is compared with);
   the rest is the entry, in a buffer of exactly its size. An entry
   accepted must say what the format says (a reference decoding here):
   nonzero segments, an address inside the entry, and a provider's name
   that ends with the entry's last byte, has no other NUL and is printable
   ASCII (it is shown to users when it differs from ours); then the
   provider's names are compared and the message of a mismatch made, as
   spmd__fab_open does. Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const provs[] = {"tcp;ofi_rxm", "shm", "verbs;ofi_rxm", "udp;ofi_rxd", "sockets", "?"};
    const char *own, *prov = NULL, *c;
    const unsigned char *addr = NULL;
    unsigned char *p;
    uint32_t seg[2] = {0, 0}, nl;
    size_t len, i;
    char msg[512];
    int ok, ref;
    if (size < 1) return 0;
    own = provs[data[0] % (sizeof provs / sizeof *provs)];
    len = size - 1;
    p = (unsigned char *)malloc(len ? len : 1);
    assert(p);
    if (len) memcpy(p, data + 1, len);
    nl = len >= 12 ? spmd__boot_get32(p + 8) : 0;
    /* the reference: the format alone */
    ref = len >= 13 && spmd__boot_get32(p) != 0 && spmd__boot_get32(p + 4) != 0 && nl <= len - 13 && p[len - 1] == 0;
    for (i = 12 + (size_t)nl; ref && i < len - 1; i++) ref = p[i] >= 32 && p[i] <= 126;
    ok = spmd__fab_entry(p, len, seg, &addr, &prov);
    assert(ok == ref);
    if (ok) {
        assert(seg[0] == spmd__boot_get32(p) && seg[1] == spmd__boot_get32(p + 4));
        assert(addr == p + 12 && prov == (const char *)p + 12 + nl);
        assert(strlen(prov) == len - 13 - nl); /* its NUL is the entry's last byte, and its only one */
        for (c = prov; *c; c++) assert(*c >= 32 && *c <= 126);
        if (strcmp(prov, own) != 0) {
            snprintf(msg, sizeof msg, "fabric: process %d uses provider %s, this process %s (set SPMD_PROVIDER alike "
                     "everywhere)", 1, prov, own);
            for (c = msg; *c; c++) assert(*c >= 32 && *c <= 126);
        }
    }
    free(p);
    return 0;
}
