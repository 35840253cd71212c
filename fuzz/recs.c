/* Fuzz target: a RECORDS payload (see the header's ">>bootstrap" section):
   another process's report lines about a broken mesh, which spmd_report
   shows (spmd__boot_recs_decode). The first byte chooses the job's size
   (1..8 processes); the rest is the payload. A payload accepted must give
   a NUL-terminated text of printable ASCII and newlines, of exactly its
   length, and a process id in range; the same payload is then taken in as
   the coordinator would (spmd__boot_heard_recs) and found by
   spmd__boot_recs_of. Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char text[SPMD__BOOT_RECS_MAX + 1];
    static spmd__boot b;
    static unsigned char lost[8];
    static spmd__boot_conn peers[8];
    uint32_t mesh_id = 0, proc = 0;
    int nprocs, i;
    spmd__boot_msg m;
    spmd__boot_conn c;
    if (size < 1) return 0;
    nprocs = 1 + data[0] % 8;
    data++;
    size--;
    if (spmd__boot_recs_decode(data, size, nprocs, &mesh_id, &proc, text, sizeof text) != 0) return 0;
    assert(proc < (uint32_t)nprocs);
    assert(strlen(text) == size - 8);
    for (i = 0; text[i]; i++) assert((text[i] >= 32 && text[i] <= 126) || text[i] == '\n');
    /* as process 0 hearing it from its sender (its peers closed: nothing is passed on) */
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    b.rank = 0;
    b.nprocs = nprocs;
    b.lost = lost;
    b.peers = peers;
    for (i = 0; i < 8; i++) peers[i].fd = -1;
    c.rank = (int)proc;
    c.fd = -1;
    m.type = SPMD__BM_RECORDS;
    m.rank = proc;
    m.len = (uint32_t)size;
    m.payload = data;
    m.total = SPMD__BOOT_HDR + size;
    if (spmd__boot_heard_recs(&b, &c, &m) == 0) {
        const spmd__boot_recs *e = spmd__boot_recs_of(&b, mesh_id, proc);
        assert(proc != 0 && e && strcmp(e->text, text) == 0);
    } else {
        assert(proc == 0); /* only a message from ourselves is refused here */
    }
    return 0;
}
