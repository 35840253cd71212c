/* Fuzz target: the shared-memory lane's records (see the header's
   "shared-memory lane" section): what a peer process wrote into our ring
   and our bulk ring. One lane to process 1 with a 4 KiB ring and a 4 KiB
   bulk ring (nonce 0: a record's stamp is its position); the input says
   which operations are posted first (receives of several lengths and
   tags, some of up to n bytes, and large sends, whose announcements the
   peer may answer), the bulk ring's head word, then the ring's bytes and
   the bulk ring's. The lane then progresses a few times: records are
   delivered, kept as unexpected, answered, or the lane breaks; every op
   still open is then failed, and everything freed; a receive that ended
   well got no more bytes than it posted (all of them unless it was "up
   to"). Some posts are lazy (spmd__fab_post_lazy, as the quick exchange
   posts): their receives take their message from the ring's head
   (spmd__fab_take) between the progress calls. Build and run: see
   fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

#define CAP 4096u
#define BULK 4096u
#define NOPS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t lens[8] = {0, 1, 40, 1024, 300, 5000, 9000, 64};
    spmd__fab *f;
    spmd__lane *l;
    spmd__fab_op *ops;
    unsigned char *bufs[NOPS];
    spmd__lane_ring *in, *out;
    spmd__lane_bulk *bin, *bout;
    size_t n, i, at = 0, nops;
    uint64_t head;
    int k;
    if (size < 9) return 0;
    nops = data[at++] % (NOPS + 1);
    if (size < at + 2 * nops + 8) return 0;
    f = (spmd__fab *)calloc(1, sizeof *f);
    f->boot = (spmd__boot *)calloc(1, sizeof *f->boot);
    f->boot->log_level = SPMD_LOG_OFF;
    f->boot->nprocs = 2;
    f->boot->timeout_ms = 1000;
    f->boot->lost = (unsigned char *)calloc(2, 1);
    f->nprocs = 2;
    f->seg = f->xseg = (size_t)1 << 20;
    f->lock = 0;
    f->lane_cap = CAP;
    f->bulk_cap = BULK;
    f->lane_max = 1024;
    f->lanes = (spmd__lane *)spmd__alloc(&f->alloc, sizeof *f->lanes);
    f->lane_of = (int *)spmd__alloc(&f->alloc, 2 * sizeof *f->lane_of);
    f->lane_of[0] = -1;
    f->lane_of[1] = 0;
    f->nlanes = 1;
    f->lpost.b = (spmd__lane_bucket *)spmd__alloc(&f->alloc, 4 * sizeof *f->lpost.b);
    f->lunex.b = (spmd__lane_bucket *)spmd__alloc(&f->alloc, 4 * sizeof *f->lunex.b);
    f->lpost.mask = f->lunex.mask = 3; /* small, so that the tables grow */
    l = &f->lanes[0];
    l->peer = 1;
    in = (spmd__lane_ring *)calloc(1, sizeof *in + CAP);
    out = (spmd__lane_ring *)calloc(1, sizeof *out + CAP);
    bin = (spmd__lane_bulk *)calloc(1, sizeof *bin + BULK);
    bout = (spmd__lane_bulk *)calloc(1, sizeof *bout + BULK);
    l->in = in; l->in_data = (unsigned char *)(in + 1);
    l->out = out; l->out_data = (unsigned char *)(out + 1);
    l->bin = bin; l->bin_data = (unsigned char *)(bin + 1);
    l->bout = bout; l->bout_data = (unsigned char *)(bout + 1);
    l->out_nonce = 0x9e3779b97f4a7c15ull;
    ops = (spmd__fab_op *)calloc(NOPS, sizeof *ops);
    for (i = 0; i < nops; i++) {
        unsigned what = data[at], tag = data[at + 1] % 4;
        size_t len = lens[what % 8];
        int send = what & 0x80, upto = (what & 0x40) && len <= f->lane_max, lazy = what & 0x20;
        at += 2;
        bufs[i] = (unsigned char *)malloc(len ? len : 1);
        memset(bufs[i], 0xa5, len);
        if (lazy) {
            spmd__fab_post_lazy(f, &ops[i], send ? SPMD__FOP_SEND : SPMD__FOP_RECV, 1, SPMD__FAB_TAG(1, 1, tag), bufs[i],
                                len);
        } else if (send) {
            spmd__fab_post_send(f, &ops[i], 1, SPMD__FAB_TAG(1, 1, tag), bufs[i], len, spmd__now_ns() + 1000000000u);
        } else if (upto) {
            spmd__fab_post_recv_upto(f, &ops[i], 1, SPMD__FAB_TAG(1, 1, tag), bufs[i], len,
                                     spmd__now_ns() + 1000000000u);
        } else {
            spmd__fab_post_recv(f, &ops[i], 1, SPMD__FAB_TAG(1, 1, tag), bufs[i], len, spmd__now_ns() + 1000000000u);
        }
    }
    memcpy(&head, data + at, 8);
    at += 8;
    n = size - at < CAP ? size - at : CAP;
    memcpy(l->in_data, data + at, n);
    at += n;
    n = size - at < BULK ? size - at : BULK;
    memcpy(l->bin_data, data + at, n);
    bin->head = head;
    for (k = 0; k < 3; k++) {
        for (i = 0; i < nops; i++)
            if (ops[i].kind == SPMD__FOP_RECV) spmd__fab_take(f, &ops[i]);
        spmd__slock(&f->lock);
        spmd__lane_progress(f);
        spmd__sunlock(&f->lock);
    }
    spmd__slock(&f->lock);
    while (f->head) spmd__fab_op_fail(f, f->head, SPMD_ERR_STATE, "fuzz: closing");
    for (i = 0; i < nops; i++) /* lazy receives still waiting are listed nowhere */
        if (ops[i].state == SPMD__FOP_ACTIVE) spmd__fab_op_fail(f, &ops[i], SPMD_ERR_STATE, "fuzz: closing");
    spmd__sunlock(&f->lock);
    for (i = 0; i < nops; i++) {
        if (ops[i].kind == SPMD__FOP_RECV && ops[i].state == SPMD__FOP_DONE && ops[i].status == SPMD_OK)
            assert(ops[i].received <= ops[i].len && (ops[i].upto || ops[i].received == ops[i].len));
        free(bufs[i]);
    }
    spmd__lane_close(f);
    free(ops);
    free(in); free(out); free(bin); free(bout);
    free(f->boot->lost);
    free(f->boot);
    free(f);
    return 0;
}
