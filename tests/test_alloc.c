/* test_alloc.c - no allocation in the steady state of a small collective.
   Every allocation of the library goes through SPMD_MALLOC (or the desc's
   allocator, which the transport of several processes does not use), which
   tests/impl.c defines as a wrapper that counts them (spmd_test_allocs):
   make links its object, or this file includes it. A 1-D mesh "i" of 4 devices runs each
   small collective (8 bytes per device, f32) to warm up (20 rounds of 16
   calls in flight through its _start form: the pools bounded by the
   requests in flight reach their bound; then 20 blocking calls), then
   1,000 times, and the process's count of allocations over those 1,000
   calls must be 0; so must a psum_start of 256 KiB a device waited at
   once, which the progress workers take (threads: its tasks; across
   processes: its progress). Results are checked against plain references
   on the last call. One process: the thread backend; under tools/spmdrun with 2
   processes: 2 devices per process, over the shared-memory lane or
   libfabric (each process counts its own allocations; libfabric's own
   mallocs inside the provider are not seen by the hook). */
#ifdef SPMD_TEST_LINKED_IMPL
#include "../spmdcoll.h"
extern long spmd_test_allocs; /* allocations through SPMD_MALLOC in this process (tests/impl.c) */
#else
#include "impl.c" /* the implementation with its counting SPMD_MALLOC */
#endif
#include "harness.h"
#include <stdio.h>
#include <string.h>


#define G 4      /* devices */
#define N 2      /* elements per device: 8 bytes of f32 */
#define WARM 20  /* rounds of DEPTH calls in flight, then WARM blocking calls */
#define DEPTH 16 /* the default max_inflight */
#define CALLS 1000

enum {
    OP_PSUM, OP_PMAX, OP_ALL_GATHER, OP_PSUM_SCATTER, OP_ALL_TO_ALL, OP_BCAST, OP_REDUCE, OP_GATHER, OP_SCATTER,
    OP_SCAN, OP_PPERMUTE, OP_BARRIER, OP_SENDRECV, OP_ASYNC, OP_BIG, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {"psum", "pmax", "all_gather", "psum_scatter", "all_to_all",
                                               "bcast", "reduce", "gather", "scatter", "scan", "ppermute",
                                               "barrier", "send/recv", "psum_start+wait", "psum_start 256K"};
#define BIGN 65536 /* OP_BIG: f32 a device, 256 KiB: large enough that the progress workers take its call */
static float bigx[G][BIGN], bigy[G][BIGN], bigw[G][DEPTH][BIGN]; /* (bigw: the warm-up's, in flight) */
static float big_in(int d, int k) { return (float)((7 * d + k) % 100); }

typedef struct {
    int op;
    long allocs[G];     /* per device: allocations in its window of CALLS calls */
    int bad[G];         /* per device: a failed call or a wrong result */
    char why[G][600];
} arg_t;

/* device d's input element k */
static float in(int d, int k) { return (float)(10 * d + k + 1); }

/* One call of op; with rq, its _start form (rq[1]: send/recv's second
   request, else NULL), for the caller to wait. */
static spmd_status one_call(spmd_dev *d, int op, float *x, float *y, spmd_req **rq) {
    int i = spmd_device_id(d);
    spmd_status s = SPMD_OK;
    spmd_array ax, ay;
    int perm[2 * G], k;
    spmd_req *r, *r2;
    if (rq) rq[1] = NULL;
    switch (op) {
    case OP_PSUM:
        return rq ? spmd_psum_start(d, x, y, N, SPMD_F32, "i", NULL, rq) : spmd_psum(d, x, y, N, SPMD_F32, "i", NULL);
    case OP_PMAX:
        return rq ? spmd_pmax_start(d, x, y, N, SPMD_F32, "i", NULL, rq) : spmd_pmax(d, x, y, N, SPMD_F32, "i", NULL);
    case OP_ALL_GATHER:
        ax = spmd_array_1d(x, SPMD_F32, N);
        ay = spmd_array_1d(y, SPMD_F32, (int64_t)G * N);
        return rq ? spmd_all_gather_start(d, &ax, &ay, "i", 0, 1, NULL, rq) : spmd_all_gather(d, &ax, &ay, "i", 0, 1, NULL);
    case OP_PSUM_SCATTER: /* G*N in, N out */
        ax = spmd_array_1d(x, SPMD_F32, (int64_t)G * N);
        ay = spmd_array_1d(y, SPMD_F32, N);
        return rq ? spmd_psum_scatter_start(d, &ax, &ay, "i", 0, 1, NULL, rq)
                  : spmd_psum_scatter(d, &ax, &ay, "i", 0, 1, NULL);
    case OP_ALL_TO_ALL:
        ax = spmd_array_1d(x, SPMD_F32, (int64_t)G * N);
        ay = spmd_array_1d(y, SPMD_F32, (int64_t)G * N);
        return rq ? spmd_all_to_all_start(d, &ax, &ay, "i", 0, 0, 1, NULL, rq)
                  : spmd_all_to_all(d, &ax, &ay, "i", 0, 0, 1, NULL);
    case OP_BCAST:
        return rq ? spmd_bcast_start(d, x, y, N, SPMD_F32, 1, "i", NULL, rq) : spmd_bcast(d, x, y, N, SPMD_F32, 1, "i", NULL);
    case OP_REDUCE:
        return rq ? spmd_reduce_start(d, x, y, N, SPMD_F32, SPMD_OP_SUM, 2, "i", NULL, rq)
                  : spmd_reduce(d, x, y, N, SPMD_F32, SPMD_OP_SUM, 2, "i", NULL);
    case OP_GATHER:
        return rq ? spmd_gather_start(d, x, y, N, SPMD_F32, 0, "i", NULL, rq) : spmd_gather(d, x, y, N, SPMD_F32, 0, "i", NULL);
    case OP_SCATTER:
        return rq ? spmd_scatter_start(d, x, y, N, SPMD_F32, 3, "i", NULL, rq)
                  : spmd_scatter(d, x, y, N, SPMD_F32, 3, "i", NULL);
    case OP_SCAN:
        return rq ? spmd_scan_start(d, x, y, N, SPMD_F32, SPMD_OP_SUM, "i", NULL, rq)
                  : spmd_scan(d, x, y, N, SPMD_F32, SPMD_OP_SUM, "i", NULL);
    case OP_PPERMUTE:
        for (k = 0; k < G; k++) { perm[2 * k] = k; perm[2 * k + 1] = (k + 1) % G; }
        ax = spmd_array_1d(x, SPMD_F32, N);
        ay = spmd_array_1d(y, SPMD_F32, N);
        return rq ? spmd_ppermute_start(d, &ax, &ay, "i", perm, G, NULL, rq) : spmd_ppermute(d, &ax, &ay, "i", perm, G, NULL);
    case OP_BARRIER: return rq ? spmd_barrier_start(d, "i", NULL, rq) : spmd_barrier(d, "i", NULL);
    case OP_SENDRECV: /* a ring: even devices send first, odd ones receive first */
        if (rq) {
            if (i % 2 == 0) s = spmd_send_start(d, x, N, SPMD_F32, (i + 1) % G, 7, "i", NULL, &rq[0]);
            if (s == SPMD_OK) s = spmd_recv_start(d, y, N, SPMD_F32, (i + G - 1) % G, 7, "i", NULL, NULL, &rq[1]);
            if (s == SPMD_OK && i % 2 == 1) s = spmd_send_start(d, x, N, SPMD_F32, (i + 1) % G, 7, "i", NULL, &rq[0]);
            return s;
        }
        if (i % 2 == 0) s = spmd_send(d, x, N, SPMD_F32, (i + 1) % G, 7, "i", NULL);
        if (s == SPMD_OK) s = spmd_recv(d, y, N, SPMD_F32, (i + G - 1) % G, 7, "i", NULL, NULL);
        if (s == SPMD_OK && i % 2 == 1) s = spmd_send(d, x, N, SPMD_F32, (i + 1) % G, 7, "i", NULL);
        return s;
    case OP_BIG: /* handed to the progress workers (threads) or progressed by one (across processes) */
        s = spmd_psum_start(d, bigx[i], bigy[i], BIGN, SPMD_F32, "i", NULL, &r);
        return s == SPMD_OK ? spmd_wait(r) : s;
    case OP_ASYNC: /* two in flight, waited in the other order */
        s = spmd_psum_start(d, x, y, N, SPMD_F32, "i", NULL, &r);
        if (s != SPMD_OK) return s;
        s = spmd_psum_start(d, x, y + N, N, SPMD_F32, "i", NULL, &r2);
        if (s != SPMD_OK) { spmd_wait(r); return s; }
        s = spmd_wait(r2);
        return spmd_wait(r) == SPMD_OK ? s : SPMD_ERR_SYSTEM;
    }
    return SPMD_ERR_INVALID;
}

/* The result on device i of the last call, from a plain reference. */
static int check(int op, int i, const float *y, char *why, size_t n) {
    float want[G * N];
    int k, j, cnt = N;
    memset(want, 0, sizeof want);
    switch (op) {
    case OP_PSUM:
        for (k = 0; k < N; k++) for (j = 0; j < G; j++) want[k] += in(j, k);
        break;
    case OP_BIG:
        for (k = 0; k < BIGN; k++) {
            float w = 0;
            for (j = 0; j < G; j++) w += big_in(j, k);
            if (bigy[i][k] != w) {
                snprintf(why, n, "element %d is %g, want %g", k, (double)bigy[i][k], (double)w);
                return 0;
            }
        }
        return 1;
    case OP_ASYNC: /* the same sum, twice */
        for (k = 0; k < N; k++) for (j = 0; j < G; j++) want[k] += in(j, k);
        for (k = 0; k < N; k++) want[N + k] = want[k];
        cnt = 2 * N;
        break;
    case OP_PMAX: for (k = 0; k < N; k++) want[k] = in(G - 1, k); break;
    case OP_ALL_GATHER: case OP_GATHER:
        if (op == OP_GATHER && i != 0) return 1; /* not significant off the root */
        for (j = 0; j < G; j++) for (k = 0; k < N; k++) want[j * N + k] = in(j, k);
        cnt = G * N;
        break;
    case OP_PSUM_SCATTER: /* input element e of device j is in(j, e) */
        for (k = 0; k < N; k++) for (j = 0; j < G; j++) want[k] += (float)(10 * j + i * N + k + 1);
        break;
    case OP_ALL_TO_ALL: /* block j of the result: block i of device j's input */
        for (j = 0; j < G; j++) for (k = 0; k < N; k++) want[j * N + k] = (float)(10 * j + i * N + k + 1);
        cnt = G * N;
        break;
    case OP_BCAST: for (k = 0; k < N; k++) want[k] = in(1, k); break;
    case OP_REDUCE:
        if (i != 2) return 1;
        for (k = 0; k < N; k++) for (j = 0; j < G; j++) want[k] += in(j, k);
        break;
    case OP_SCATTER: /* block i of the root's G*N input */
        for (k = 0; k < N; k++) want[k] = (float)(10 * 3 + i * N + k + 1);
        break;
    case OP_SCAN: for (k = 0; k < N; k++) for (j = 0; j <= i; j++) want[k] += in(j, k); break;
    case OP_PPERMUTE: case OP_SENDRECV: for (k = 0; k < N; k++) want[k] = in((i + G - 1) % G, k); break;
    case OP_BARRIER: return 1;
    }
    for (k = 0; k < cnt; k++)
        if (y[k] != want[k]) {
            snprintf(why, n, "element %d is %g, want %g", k, (double)y[k], (double)want[k]);
            return 0;
        }
    return 1;
}

static void device(spmd_dev *d, void *p) {
    arg_t *a = (arg_t *)p;
    int i = spmd_device_id(d), c, k, j;
    float x[G * N], y[G * N], yd[DEPTH][G * N];
    spmd_req *rq[DEPTH][2];
    long before;
    spmd_status s = SPMD_OK;
    /* inputs of G*N elements: element e is 10 i + e + 1 (the first N: in(i, k)) */
    for (k = 0; k < G * N; k++) x[k] = (float)(10 * i + k + 1);
    for (k = 0; k < BIGN; k++) bigx[i][k] = big_in(i, k);
    /* warm-up: the pools that grow with the calls in flight (exchanges,
       unexpected messages) reach their bound, DEPTH calls in flight */
    for (c = 0; c < WARM && s == SPMD_OK; c++) {
        int started = 0;
        if (a->op == OP_ASYNC) {
            s = one_call(d, a->op, x, y, NULL);
            continue;
        }
        if (a->op == OP_BIG) /* DEPTH in flight too: every exchange record's plan laid out */
            for (k = 0; k < DEPTH && s == SPMD_OK; k++, started++) {
                s = spmd_psum_start(d, bigx[i], bigw[i][k], BIGN, SPMD_F32, "i", NULL, &rq[k][0]);
                rq[k][1] = NULL;
            }
        for (k = 0; a->op != OP_BIG && k < DEPTH && s == SPMD_OK; k++, started++) s = one_call(d, a->op, x, yd[k], rq[k]);
        for (k = 0; k < started; k++)
            for (j = 0; j < 2; j++)
                if (rq[k][j] && spmd_wait(rq[k][j]) != SPMD_OK) s = SPMD_ERR_SYSTEM;
    }
    for (c = 0; c < WARM && s == SPMD_OK; c++) s = one_call(d, a->op, x, y, NULL);
    /* and DEPTH barriers in flight: every exchange record laid out once for
       the barriers around the count too (across processes one the op's
       calls never took to a barrier would be, once: a device that leaves
       the count first may enter its barrier during the other's count) */
    for (c = 0, k = 0; k < DEPTH && s == SPMD_OK; k++, c++) s = one_call(d, OP_BARRIER, x, y, rq[k]);
    for (k = 0; k < c; k++)
        if (rq[k][0] && spmd_wait(rq[k][0]) != SPMD_OK) s = SPMD_ERR_SYSTEM;
    if (s == SPMD_OK) s = spmd_barrier(d, "i", NULL);
    before = __atomic_load_n(&spmd_test_allocs, __ATOMIC_RELAXED);
    for (c = 0; c < CALLS && s == SPMD_OK; c++) {
        if (c == CALLS - 1) memset(y, 0xff, sizeof y), memset(bigy[i], 0xff, sizeof bigy[i]);
        s = one_call(d, a->op, x, y, NULL);
    }
    a->allocs[i] = __atomic_load_n(&spmd_test_allocs, __ATOMIC_RELAXED) - before;
    if (s == SPMD_OK) s = spmd_barrier(d, "i", NULL);
    if (s != SPMD_OK) {
        a->bad[i] = 1;
        snprintf(a->why[i], sizeof a->why[i], "%s: %s", spmd_status_name(s), spmd_last_error(d));
    } else if (!check(a->op, i, y, a->why[i], sizeof a->why[i])) {
        a->bad[i] = 1;
    }
}

int main(void) {
    spmd_mesh_desc md;
    spmd_mesh *m = NULL;
    int op, i;
    memset(&md, 0, sizeof md);
    md.ndim = 1;
    md.shape[0] = G;
    md.axis_names[0] = "i";
    md.timeout_ms = 30000;
    T_CHECK(spmd_mesh_create(&md, &m) == SPMD_OK, "mesh_create");
    if (!m) return t_summary();
    for (op = 0; op < OP_COUNT; op++) {
        arg_t a;
        long most = 0;
        int bad = 0, who = -1;
        memset(&a, 0, sizeof a);
        a.op = op;
        for (i = 0; i < G; i++) a.allocs[i] = -1; /* -1: not a device of this process */
        T_CHECK(spmd_run(m, device, &a) == SPMD_OK, "%s: spmd_run", op_names[op]);
        for (i = 0; i < G; i++) {
            if (a.allocs[i] > most) most = a.allocs[i];
            if (a.bad[i] && who < 0) who = i;
            bad |= a.bad[i];
        }
        T_CHECK(!bad, "%s: device %d: %s", op_names[op], who, who >= 0 ? a.why[who] : "");
        T_CHECK(most == 0, "%s: %ld allocations over %d calls after warm-up (want 0)", op_names[op], most, CALLS);
        printf("%-16s %ld allocations in %d calls\n", op_names[op], most, CALLS);
    }
    spmd_mesh_destroy(m);
    return t_summary();
}
