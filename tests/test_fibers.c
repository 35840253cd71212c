/* test_fibers.c - devices as fibers (desc.scheduler = SPMD_SCHEDULER_FIBERS):
   meshes of 1,024 to 65,536 devices checked against plain sums, one carrier
   and two, seeded runs that replay exactly and differ between seeds,
   deadlocks reported at once with SPMD_ERR_DEADLOCK and a report naming
   every device, a returned device under both schedulers, bad desc fields,
   and a stack overflow that faults on the guard page, or past the first
   16,384 fibers is found in the page below (in child processes);
   wakes that must come at once under fibers (a ppermute's post, a returned
   peer of a recv), told by flags, not the clock. (The combining path of
   large groups, under both schedulers: test_reduce.c for psum and barrier,
   test_movement.c for all_gather, bcast, reduce and ppermute.) */
#define _GNU_SOURCE 1 /* sigaltstack, siginfo_t */
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A 1-D mesh of 4 devices "i" as fibers on one carrier (the rest zero). */
static void desc4_one_carrier(spmd_mesh_desc *desc) {
    memset(desc, 0, sizeof *desc);
    desc->ndim = 1;
    desc->shape[0] = 4;
    desc->axis_names[0] = "i";
    desc->scheduler = SPMD_SCHEDULER_FIBERS;
    desc->carriers = 1;
}

/* ---- large meshes against a plain reference -------------------------------- */

typedef struct big_arg {
    int iters, over_all;
    long bad;          /* devices with a wrong result */
    spmd_status st;    /* a failing status, if any */
} big_arg;

static void big_device(spmd_dev *d, void *p) {
    big_arg *a = (big_arg *)p;
    int id = spmd_device_id(d), n = spmd_mesh_size(spmd_device_mesh(d));
    int it, k, wrong = 0;
    int c[SPMD_MAX_AXES];
    spmd_device_coords(d, c);
    for (it = 0; it < a->iters; it++) {
        double x[8], y[8];
        int32_t g[8], row[8];
        spmd_status s;
        for (k = 0; k < 8; k++) x[k] = (double)(id * 8 + k + it);
        /* over "b": the 8 devices of one row, ids c[0]*8 .. c[0]*8+7 */
        s = spmd_psum(d, x, y, 8, SPMD_F64, "b", NULL);
        if (s != SPMD_OK) { a->st = s; break; }
        for (k = 0; k < 8; k++) {
            double want = 0;
            int j;
            for (j = 0; j < 8; j++) want += (double)((c[0] * 8 + j) * 8 + k + it);
            if (y[k] != want) wrong = 1;
        }
        if (a->over_all) { /* every device: sum over ids of (8 id + k + it) */
            s = spmd_psum(d, x, y, 8, SPMD_F64, "*", NULL);
            if (s != SPMD_OK) { a->st = s; break; }
            for (k = 0; k < 8; k++)
                if (y[k] != 8.0 * ((double)n * (n - 1) / 2) + (double)n * (k + it)) wrong = 1;
        }
        row[0] = id;
        s = spmd_allgather(d, row, g, 1, SPMD_I32, "b", NULL);
        if (s != SPMD_OK) { a->st = s; break; }
        for (k = 0; k < 8; k++)
            if (g[k] != c[0] * 8 + k) wrong = 1;
        s = spmd_barrier(d, "*", NULL);
        if (s != SPMD_OK) { a->st = s; break; }
    }
    if (wrong) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
}

static void test_big(void) {
    static const struct { int n, carriers, iters, over_all; } cs[] = {
        {256, 2, 2, 1}, {1024, 1, 3, 1}, {1024, 2, 3, 1}, {4096, 1, 2, 0}, {4096, 2, 1, 1},
        {16400, 2, 1, 1}, {65536, 0, 1, 1}}; /* (past the 16,384 guarded stacks; the largest: 1.9 GB, ~2 s) */
    int i, quick = env_quick(), most = 65536;
#if defined(__SANITIZE_THREAD__)
    most = 256; /* ThreadSanitizer: every fiber is a thread to it, and 1,024 of them take minutes */
#elif defined(__SANITIZE_ADDRESS__)
    most = 1024; /* AddressSanitizer: 4,096 fibers took 10 s of its 20 (the plain build runs them) */
#endif
    for (i = 0; i < (int)(sizeof cs / sizeof cs[0]); i++) {
        spmd_mesh *m;
        big_arg a;
        spmd_status run;
        double t0 = now_s();
        if (quick && cs[i].n >= 4096 && cs[i].over_all) continue; /* sanitizers: 4,096 once */
        if (cs[i].n > most) continue;
        m = tl_mesh_ab(cs[i].n / 8, 8, SPMD_SCHEDULER_FIBERS, cs[i].carriers, 0, 0, NULL, NULL);
        if (!m) continue;
        memset(&a, 0, sizeof a);
        a.iters = cs[i].iters;
        a.over_all = cs[i].over_all;
        run = spmd_run(m, big_device, &a);
        T_CHECK(run == SPMD_OK && a.st == SPMD_OK && a.bad == 0,
                "%d devices on %d carriers: run %s, a call %s, %ld devices with wrong results", cs[i].n,
                cs[i].carriers, stname(run), stname(a.st), a.bad);
        T_CHECK(spmd_mesh_scheduler(m) == SPMD_SCHEDULER_FIBERS, "scheduler");
        if (!quick) printf("  %d devices, %d carrier(s), %d rounds: %.2f s\n", cs[i].n, cs[i].carriers, a.iters,
                           now_s() - t0);
        T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
    }
}

/* ---- all_to_all of small chunks over a large group: a blocked transpose ----------

   Chunks of at most 16 bytes over 64 devices and more, split algorithm,
   are moved a tile of receivers at a time (spmd__chunks_tile): G of 64, 67
   and 1,100 (more than one tile of 256 4-byte chunks, the last partial),
   chunks of 1, 2, 3 (no fast copy), 4, 8, 16 and 17 bytes (the per-chunk
   path), in place and not. Device i's out block j must be device j's chunk
   i, every byte: the input bytes name the source, the chunk and the
   byte's place. */
typedef struct { int es, count; spmd_dtype dt; int inplace; long bad; spmd_status st; } a2a_arg;
static unsigned char a2a_byte(int src, int chunk, int b) { return (unsigned char)(src * 31 + chunk * 7 + b * 3 + 1); }
static void a2a_device(spmd_dev *d, void *p) {
    a2a_arg *a = (a2a_arg *)p;
    int id = spmd_device_id(d), n = spmd_mesh_size(spmd_device_mesh(d)), j, b, run = a->es * a->count, wrong = 0;
    unsigned char *in = malloc((size_t)n * run), *out = a->inplace ? in : malloc((size_t)n * run);
    spmd_opts o = {NULL, 0, 0, SPMD_ALGO_SPLIT};
    spmd_status s;
    for (j = 0; j < n; j++)
        for (b = 0; b < run; b++) in[(size_t)j * run + b] = a2a_byte(id, j, b);
    if (!a->inplace) memset(out, 0xee, (size_t)n * run);
    s = spmd_alltoall(d, in, out, (size_t)a->count, a->dt, "*", &o);
    if (s != SPMD_OK) a->st = s;
    for (j = 0; j < n && s == SPMD_OK; j++)
        for (b = 0; b < run; b++) wrong |= out[(size_t)j * run + b] != a2a_byte(j, id, b);
    if (wrong) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
    if (out != in) free(out);
    free(in);
}

static void test_big_all_to_all(void) {
    static const struct { int es, count; spmd_dtype dt; } ch[] = {
        {1, 1, SPMD_U8}, {2, 1, SPMD_I16}, {1, 3, SPMD_U8}, {4, 1, SPMD_F32}, {8, 1, SPMD_F64}, {4, 4, SPMD_U32},
        {1, 17, SPMD_I8}};
    static const int Gs[] = {64, 67, 1100};
    int gi, c, inplace, nG = 3;
#if defined(__SANITIZE_THREAD__)
    nG = 2; /* ThreadSanitizer: 1,100 fibers take minutes (the other builds run them) */
#endif
    for (gi = 0; gi < nG; gi++) {
        spmd_mesh_desc desc;
        spmd_mesh *m;
        desc4_one_carrier(&desc);
        desc.shape[0] = Gs[gi];
        desc.carriers = 2;
        if (spmd_mesh_create(&desc, &m) != SPMD_OK) { T_CHECK(0, "mesh of %d", Gs[gi]); continue; }
        for (c = 0; c < (int)(sizeof ch / sizeof ch[0]); c++)
            for (inplace = 0; inplace < 2; inplace++) {
                a2a_arg a = {ch[c].es, ch[c].count, ch[c].dt, inplace, 0, SPMD_OK};
                spmd_status run = spmd_run(m, a2a_device, &a);
                T_CHECK(run == SPMD_OK && a.st == SPMD_OK && a.bad == 0,
                        "all_to_all over %d devices, chunks of %d x %d bytes%s: run %s, a call %s, %ld devices wrong",
                        Gs[gi], ch[c].count, ch[c].es, inplace ? " in place" : "", stname(run), stname(a.st), a.bad);
            }
        spmd_mesh_destroy(m);
    }
}

/* ---- a large group's ppermute: its pairs checked once a call -------------------

   PN devices over "*" (at least SPMD__PERM_SHARE_MIN, so one member's check
   serves the call's others when they pass the same array): each round
   (1) a shift by s through one array every device passes, which device 0
   rewrites between rounds (between two barriers), (2) the same shift
   through each device's own array, (3) four ppermute_start in flight at
   once through four shared arrays of different shifts, the last covering
   only the even sources (the others' outputs zeros), (4) a pshuffle
   through a shared permutation. Each output checked against the plain
   rule: device i receives source j's input when (j, i) is a pair, else
   zeros. */
#if defined(__SANITIZE_THREAD__)
#define PN 256
#else
#define PN 512
#endif
static int pp_shared[5][2 * PN];
typedef struct { long bad; spmd_status st; } pp_arg;
static void pp_fill(int *perm, int n, int s, int evens) { /* pairs (j, j + s), every j or the even ones */
    int j, k = 0;
    for (j = 0; j < n; j += evens ? 2 : 1, k++) {
        perm[2 * k] = j;
        perm[2 * k + 1] = (j + s) % n;
    }
}
static int pp_check(int id, int n, int s, int evens, int round, const float *y) { /* 1 when y is wrong */
    int src = (id - s % n + n) % n, k;
    for (k = 0; k < 4; k++) {
        float want = evens && src % 2 ? 0.0f : (float)(src * 16 + k + round);
        if (y[k] != want) return 1;
    }
    return 0;
}
static void pp_device(spmd_dev *d, void *p) {
    pp_arg *a = (pp_arg *)p;
    int id = spmd_device_id(d), n = spmd_mesh_size(spmd_device_mesh(d)), t, q, wrong = 0;
    static int own[PN][2 * PN];
    float x[4], y[4][4];
    spmd_array X = {x, SPMD_F32, 1, {4}}, Y[4];
    spmd_req *r[4];
    spmd_status s = SPMD_OK;
    for (q = 0; q < 4; q++) Y[q] = (spmd_array){y[q], SPMD_F32, 1, {4}};
    for (t = 0; t < 3 && s == SPMD_OK; t++) {
        int sh = 1 + 37 * t;
        for (q = 0; q < 4; q++) x[q] = (float)(id * 16 + q + t);
        s = spmd_barrier(d, "*", NULL);
        if (id == 0) {
            for (q = 0; q < 4; q++) pp_fill(pp_shared[q], n, sh + q, q == 3);
            for (q = 0; q < n; q++) pp_shared[4][q] = (q + n - sh) % n; /* pshuffle: output q from q - sh */
        }
        if (s == SPMD_OK) s = spmd_barrier(d, "*", NULL);
        if (s == SPMD_OK) s = spmd_ppermute(d, &X, &Y[0], "*", pp_shared[0], n, NULL);
        wrong |= s == SPMD_OK && pp_check(id, n, sh, 0, t, y[0]);
        pp_fill(own[id], n, sh, 0);
        if (s == SPMD_OK) s = spmd_ppermute(d, &X, &Y[1], "*", own[id], n, NULL);
        wrong |= s == SPMD_OK && pp_check(id, n, sh, 0, t, y[1]);
        for (q = 0; q < 4 && s == SPMD_OK; q++)
            s = spmd_ppermute_start(d, &X, &Y[q], "*", pp_shared[q], q == 3 ? n / 2 : n, NULL, &r[q]);
        for (q = 0; q < 4 && s == SPMD_OK; q++) {
            s = spmd_wait(r[q]);
            wrong |= s == SPMD_OK && pp_check(id, n, sh + q, q == 3, t, y[q]);
        }
        if (s == SPMD_OK) s = spmd_pshuffle(d, &X, &Y[0], "*", pp_shared[4], NULL);
        wrong |= s == SPMD_OK && pp_check(id, n, sh, 0, t, y[0]);
    }
    if (s != SPMD_OK) a->st = s;
    if (wrong) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
}
static void test_big_ppermute(void) {
    spmd_mesh *m = tl_mesh_ab(PN / 8, 8, SPMD_SCHEDULER_FIBERS, 2, 0, 0, NULL, NULL);
    pp_arg a = {0, SPMD_OK};
    spmd_status run;
    T_CHECK(m != NULL, "a mesh of %d devices", PN);
    if (!m) return;
    run = spmd_run(m, pp_device, &a);
    T_CHECK(run == SPMD_OK && a.st == SPMD_OK && a.bad == 0,
            "ppermute over %d devices: run %s, a call %s, %ld devices with a wrong result", PN, stname(run),
            stname(a.st), a.bad);
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
}

/* ---- wakes that must come at once (fibers, 2 carriers) ------------------------ */

/* Each waits on flags the devices set, never on the clock: a wake that does
   not come leaves a device parked until the others give up (10 s). The
   device that must be parked is seen parked before it is to be woken (a
   device that has not parked yet needs no wake, and the test would pass
   without the path it is for). A fiber is seen parked by another fiber
   that runs while a third computes on the only other carrier and finds it
   inside its blocking call: it is on no carrier, so parked there. `parked`
   says it was seen; the check fails without it. */
typedef struct wake_arg {
    int posted0, done1, done0;          /* flags, atomic */
    int started0, in1, seen;            /* device 0 computes; device 1 is in its call; the parked one seen */
    int carriers, parked;
    long loops;                         /* the loopers' rounds */
    spmd_status st0, st;
    long bad;
} wake_arg;

static int flag_get(int *f) { return __atomic_load_n(f, __ATOMIC_ACQUIRE); }
static void flag_set(int *f) { __atomic_store_n(f, 1, __ATOMIC_RELEASE); }
static int spin_until(int *f, double s) { /* 1 if the flag came */
    double t0 = now_s();
    while (!flag_get(f))
        if (now_s() - t0 > s) return 0;
    return 1;
}

/* A ring pshuffle over 32 devices on 2 carriers: device 1 waits (parked)
   for device 0's input; device 0 starts its call, which cannot end (its
   source, 31, comes later), and computes until device 1 is done. Only
   device 0's post can wake device 1 then. Device 0 computes from the start,
   holding one carrier; device 31 polls a receive of its own with spmd_test
   (which lets the other fibers run) until it finds device 1 inside its
   pshuffle while device 0 computes: device 1 then has no carrier (31 has
   the other one), so it is parked, with nothing to wake it but device 0's
   post (in a group this large a ppermute's finish and post wake only its
   reader, and the others' barrier posts wake nobody). Then device 0 posts;
   device 31 posts after it. Device 30's message to 31 comes once all is
   over. */
static void post_wake_device(spmd_dev *d, void *p) {
    wake_arg *a = (wake_arg *)p;
    int id = spmd_device_id(d), G = spmd_axis_size(d, "b"), perm[64], k, done = 0;
    float x = (float)id, y = -1;
    int32_t token = 7;
    spmd_array X = {&x, SPMD_F32, 0, {0}}, Y = {&y, SPMD_F32, 0, {0}};
    spmd_req *rr = NULL;
    spmd_status s;
    for (k = 0; k < G; k++) perm[k] = (k + G - 1) % G; /* out on k comes from k - 1 */
    if (id == 0) {
        spmd_req *r;
        flag_set(&a->started0);
        spin_until(&a->seen, 10.0); /* device 1 parked (or 31 gave up: a->parked says) */
        s = spmd_pshuffle_start(d, &X, &Y, "b", perm, NULL, &r);
        flag_set(&a->posted0);
        if (s == SPMD_OK && !spin_until(&a->done1, 10.0)) a->st0 = SPMD_ERR_TIMEOUT; /* device 1 never woke */
        if (s == SPMD_OK) s = spmd_wait(r);
    } else if (id == G - 1) {
        double t0 = now_s();
        s = spmd_recv_start(d, &token, 1, SPMD_I32, G - 2, 5, "b", NULL, NULL, &rr);
        while (s == SPMD_OK && !done && now_s() - t0 < 10 &&
               !(flag_get(&a->started0) && flag_get(&a->in1) && !flag_get(&a->done1)))
            s = spmd_test(rr, &done);
        if (s == SPMD_OK && !done && flag_get(&a->started0) && flag_get(&a->in1) && !flag_get(&a->done1)) a->parked = 1;
        flag_set(&a->seen);
        while (s == SPMD_OK && !done && now_s() - t0 < 20 && !flag_get(&a->posted0)) s = spmd_test(rr, &done);
        if (s == SPMD_OK) s = spmd_pshuffle(d, &X, &Y, "b", perm, NULL); /* device 0's source: after its post */
    } else {
        if (id == 1) flag_set(&a->in1);
        s = spmd_pshuffle(d, &X, &Y, "b", perm, NULL);
        if (id == 1) flag_set(&a->done1);
    }
    if (s != SPMD_OK) tl_st_set(&a->st, s);
    if (y != (float)((id + G - 1) % G)) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
    if ((s = spmd_barrier(d, "b", NULL)) != SPMD_OK) tl_st_set(&a->st, s);
    if (id == G - 2 && (s = spmd_send(d, &token, 1, SPMD_I32, G - 1, 5, "b", NULL)) != SPMD_OK) tl_st_set(&a->st, s);
    if (rr && !done && (s = spmd_wait(rr)) != SPMD_OK) tl_st_set(&a->st, s);
}

/* Device 0 receives from device 1, which returns without sending, while
   devices 2 and 3 keep the carriers busy with psums until device 0 is told.
   Device 1 returns once device 0 is seen parked in its recv: device 3 finds
   device 0 past its flag (so inside the recv) while device 0 can have no
   carrier -- on one carrier device 3 has it; on two, device 1 computes on
   the other meanwhile -- and nothing but device 1's return wakes it. Device
   3 tells device 1 by a flag (two carriers), or by a message over "a",
   which device 1 waits for parked (one). */
static void return_wake_device(spmd_dev *d, void *p) {
    wake_arg *a = (wake_arg *)p;
    int id = spmd_device_id(d);
    if (id == 0) {
        float x[4];
        flag_set(&a->posted0);
        a->st0 = spmd_recv(d, x, 4, SPMD_F32, 1, 0, "b", NULL, NULL);
        flag_set(&a->done0);
    } else if (id == 1) {
        int32_t t = 0;
        if (a->carriers == 1) { /* device 3 is index 1 over "a" */
            spmd_status s = spmd_recv(d, &t, 1, SPMD_I32, 1, 3, "a", NULL, NULL);
            if (s != SPMD_OK) tl_st_set(&a->st, s);
            a->parked = s == SPMD_OK && t == 3;
        } else {
            flag_set(&a->in1);
            a->parked = spin_until(&a->seen, 10.0);
        }
    } else {
        long n;
        int32_t three = 3;
        spmd_req *told = NULL;
        spmd_status s;
        for (n = 0; n < 5000000; n++) { /* both stop at the same round: they add up what they saw */
            int32_t seen = flag_get(&a->done0), any = 0;
            if (id == 3 && !flag_get(&a->seen) && flag_get(&a->posted0) && (a->carriers == 1 || flag_get(&a->in1))) {
                flag_set(&a->seen); /* device 0 is parked in its recv */
                if (a->carriers == 1 && (s = spmd_send_start(d, &three, 1, SPMD_I32, 0, 3, "a", NULL, &told)) != SPMD_OK) {
                    tl_st_set(&a->st, s);
                    break;
                }
            }
            s = spmd_psum(d, &seen, &any, 1, SPMD_I32, "b", NULL);
            if (s != SPMD_OK) { tl_st_set(&a->st, s); break; }
            if (any) break;
        }
        if (told && (s = spmd_wait(told)) != SPMD_OK) tl_st_set(&a->st, s);
        if (id == 2) a->loops = n;
    }
}

static void test_wakes(void) {
    int carriers;
    for (carriers = 1; carriers <= 2; carriers++) {
        spmd_mesh *m = tl_mesh_ab(2, 2, SPMD_SCHEDULER_FIBERS, carriers, 0, 0, NULL, NULL);
        wake_arg a;
        spmd_status run;
        if (!m) continue;
        memset(&a, 0, sizeof a);
        a.carriers = carriers;
        run = spmd_run(m, return_wake_device, &a);
        /* the others fail with it (the break) or stop when told, long before 5,000,000 rounds */
        T_CHECK((a.st0 == SPMD_ERR_DEADLOCK || a.st0 == SPMD_ERR_BROKEN) && a.loops < 5000000 && run == a.st0 && a.parked,
                "recv from a device that returned, %d carrier(s), others busy: recv %s (want DEADLOCK or BROKEN), "
                "others %s after %ld rounds, run %s; the receiver %s parked when its peer returned", carriers,
                stname(a.st0), stname(a.st), a.loops, stname(run), a.parked ? "was" : "was NOT seen");
        spmd_mesh_destroy(m);
    }
    {
        spmd_mesh *m = tl_mesh_ab(1, 32, SPMD_SCHEDULER_FIBERS, 2, 0, 0, NULL, NULL);
        wake_arg a;
        spmd_status run;
        if (m) {
            memset(&a, 0, sizeof a);
            run = spmd_run(m, post_wake_device, &a);
            T_CHECK(run == SPMD_OK && a.st == SPMD_OK && a.st0 == SPMD_OK && a.bad == 0 && a.parked,
                    "pshuffle over 32: device 1 %s while device 0 computed; run %s, a call %s, %ld wrong; device 1 %s "
                    "parked when device 0 posted", a.st0 == SPMD_OK ? "finished" : "was not woken", stname(run),
                    stname(a.st), a.bad, a.parked ? "was" : "was NOT seen");
            spmd_mesh_destroy(m);
        }
    }
}

/* ---- seeded interleavings ----------------------------------------------------- */

#define TRACE_MAX 20000
typedef struct trace_arg {
    int len;
    int16_t who[TRACE_MAX]; /* the device of each spmd_test poll, in order */
    spmd_status st;
    long bad;
} trace_arg;

/* Each device starts a psum and polls it with spmd_test, logging every poll;
   then a second round. The log is the interleaving: which device polled when. */
static void trace_device(spmd_dev *d, void *p) {
    trace_arg *a = (trace_arg *)p;
    int id = spmd_device_id(d), n = spmd_mesh_size(spmd_device_mesh(d)), round;
    for (round = 0; round < 2; round++) {
        int32_t x = id + round, y = -1, done = 0;
        spmd_req *r;
        spmd_status s = spmd_psum_start(d, &x, &y, 1, SPMD_I32, "*", NULL, &r);
        while (s == SPMD_OK && !done) {
            int at = __atomic_fetch_add(&a->len, 1, __ATOMIC_RELAXED);
            if (at < TRACE_MAX) a->who[at] = (int16_t)id;
            s = spmd_test(r, &done);
        }
        if (s != SPMD_OK) a->st = s;
        if (y != n * (n - 1) / 2 + n * round) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
    }
}

static trace_arg traces[4];

static void run_trace(trace_arg *t, uint64_t seed) {
    spmd_mesh *m = tl_mesh_ab(4, 8, SPMD_SCHEDULER_FIBERS, 1, seed, 0, NULL, NULL);
    spmd_status run;
    memset(t, 0, sizeof *t);
    if (!m) return;
    run = spmd_run(m, trace_device, t);
    T_CHECK(run == SPMD_OK && t->st == SPMD_OK && t->bad == 0 && t->len <= TRACE_MAX,
            "seed %llu: run %s, a call %s, %ld wrong sums, %d polls", (unsigned long long)seed, stname(run),
            stname(t->st), t->bad, t->len);
    spmd_mesh_destroy(m);
}

static int same_trace(const trace_arg *a, const trace_arg *b) {
    return a->len == b->len && memcmp(a->who, b->who, (size_t)a->len * sizeof a->who[0]) == 0;
}

static void test_seeds(void) {
    run_trace(&traces[0], 12345);
    run_trace(&traces[1], 12345);
    run_trace(&traces[2], 777);
    run_trace(&traces[3], 0); /* FIFO */
    T_CHECK(traces[0].len > 32, "seed 12345: only %d polls", traces[0].len);
    T_CHECK(same_trace(&traces[0], &traces[1]), "seed 12345 twice: the poll orders differ (%d and %d polls)",
            traces[0].len, traces[1].len);
    T_CHECK(!same_trace(&traces[0], &traces[2]), "seeds 12345 and 777 gave the same poll order");
    T_CHECK(!same_trace(&traces[0], &traces[3]), "seed 12345 and FIFO gave the same poll order");
    {   /* FIFO with one carrier: devices run in id order, so the first polls are 0, 1, 2, ... */
        int k, fifo = traces[3].len >= 32;
        for (k = 0; fifo && k < 32; k++) fifo = traces[3].who[k] == k;
        T_CHECK(fifo, "FIFO: the first 32 polls are not devices 0..31 in order");
    }
}

/* ---- deadlocks ------------------------------------------------------------------ */

typedef struct dl_arg {
    int kind;
    spmd_status st[64];
    char msg[64][400];
    char report[8192]; /* the log lines */
    int rlen;
} dl_arg;

static void dl_log(void *user, spmd_log_level level, int device, const char *msg) {
    dl_arg *a = (dl_arg *)user;
    size_t len = strlen(msg);
    (void)level;
    (void)device;
    if (a->rlen + len + 2 < sizeof a->report) {
        memcpy(a->report + a->rlen, msg, len);
        a->rlen += (int)len;
        a->report[a->rlen++] = '\n';
        a->report[a->rlen] = 0;
    }
}

/* kind 0: device 0 skips the psum and waits in a recv nobody sends;
   kind 1: mismatched axes without check mode: device 1 over "a", the others
           over "b" (on a (2, 4) mesh), then a barrier over every device;
   kind 2: device 5 returns without calling. */
static void dl_device(spmd_dev *d, void *p) {
    dl_arg *a = (dl_arg *)p;
    int id = spmd_device_id(d);
    float x[4] = {1, 2, 3, 4}, y[4];
    spmd_status s = SPMD_OK;
    if (a->kind == 0) {
        s = id == 0 ? spmd_recv(d, y, 4, SPMD_F32, 1, 7, "*", NULL, NULL) : spmd_psum(d, x, y, 4, SPMD_F32, "*", NULL);
    } else if (a->kind == 1) {
        s = spmd_psum(d, x, y, 4, SPMD_F32, id == 1 ? "a" : "b", NULL);
        if (s == SPMD_OK) s = spmd_barrier(d, "*", NULL);
    } else {
        if (id == 5) return;
        s = spmd_psum(d, x, y, 4, SPMD_F32, "*", NULL);
    }
    a->st[id] = s;
    snprintf(a->msg[id], sizeof a->msg[id], "%.390s", spmd_last_error(d));
}

static void deadlock_case(int kind, spmd_scheduler sch, int carriers, uint64_t seed) {
    static const char *const what[3] = {"a device skips the psum", "axes without check mode",
                                        "a device returns early"};
    dl_arg *a = (dl_arg *)calloc(1, sizeof *a);
    spmd_mesh *m;
    spmd_status run;
    double t0, took;
    int i, ok = 1, recorder = !getenv("SPMD_TRACE_DEPTH") || strcmp(getenv("SPMD_TRACE_DEPTH"), "0") != 0;
    char label[128];
    snprintf(label, sizeof label, "%s (%s, %d carriers, seed %llu%s)", what[kind],
             sch == SPMD_SCHEDULER_FIBERS ? "fibers" : "threads", carriers, (unsigned long long)seed,
             recorder ? "" : ", recorder off");
    a->kind = kind;
    /* a 60 s deadline: anything reported sooner was not the deadline */
    m = tl_mesh_ab(2, 4, sch, carriers, seed, 60000, dl_log, a);
    if (!m) { free(a); return; }
    t0 = now_s();
    run = spmd_run(m, dl_device, a);
    took = now_s() - t0;
    T_CHECK(took < 10.0, "%s: took %.1f s: not at once", label, took);
    T_CHECK(run == SPMD_ERR_DEADLOCK, "%s: spmd_run returned %s", label, stname(run));
    T_CHECK(spmd_mesh_status(m) == SPMD_ERR_DEADLOCK, "%s: mesh status %s", label, stname(spmd_mesh_status(m)));
    for (i = 0; i < 8; i++) {
        const char *mm = a->msg[i];
        int good;
        if (kind == 2 && i == 5) continue;
        /* a device that calls after the mesh broke gets SPMD_ERR_BROKEN, with the cause */
        good = a->st[i] == SPMD_ERR_DEADLOCK ||
               (kind == 2 && a->st[i] == SPMD_ERR_BROKEN && strstr(mm, "device 5 returned"));
        if (kind == 0 && i == 0) good = good && strstr(mm, "recv") != NULL;
        else if (kind == 1 && i == 1) good = good && strstr(mm, "over 'a'") != NULL;
        else if (kind == 1) good = good && (strstr(mm, "over 'b'") || strstr(mm, "over '*'"));
        else good = good && strstr(mm, "psum") && strstr(mm, "over '*'");
        if (kind == 2) good = good && strstr(spmd_mesh_error(m), "device 5") &&
                              strstr(spmd_mesh_error(m), "returned");
        if (!good) {
            T_CHECK(good, "%s: device %d: %s '%s'", label, i, stname(a->st[i]), mm);
            ok = 0;
        }
    }
    T_CHECK(ok, "%s: every device's status and message", label);
    if (sch == SPMD_SCHEDULER_FIBERS && kind != 2 && recorder) {
        /* the report (spmd_report's text): what every device is blocked in */
        int named = 1;
        char want[160];
        for (i = 0; i < 8 && named; i++) {
            if (kind == 0 && i == 0)
                snprintf(want, sizeof want, "  device 0: blocked in #0 recv(f32 x 4) from 1 over '*'");
            else if (kind == 0)
                snprintf(want, sizeof want, "  device %d: blocked in #0 psum(f32 x 4, eager) over '*'", i);
            else if (i == 1)
                snprintf(want, sizeof want, "  device 1: blocked in #0 psum(f32 x 4, eager) over 'a'");
            else /* the other 'b' row finished its psum and waits in the barrier */
                snprintf(want, sizeof want, "  device %d: blocked in #%d %s", i, i < 4 ? 0 : 1,
                         i < 4 ? "psum(f32 x 4, eager) over 'b'" : "barrier over '*'");
            named = strstr(a->report, want) != NULL;
        }
        T_CHECK(named, "%s: the report does not have '%s':\n%s", label, want, a->report);
        T_CHECK(strstr(a->report, "deadlock report:") == NULL, "%s: one report format:\n%s", label, a->report);
    } else if (sch == SPMD_SCHEDULER_FIBERS && kind != 2) {
        /* the recorder off: one line per device or run of devices in one state, from their requests */
        int named = 1;
        if (kind == 0)
            named = strstr(a->report, "device 0: blocked in recv") && strstr(a->report, "devices 1..7: blocked in psum");
        else
            named = strstr(a->report, "device 1: blocked in psum") && strstr(a->report, "over 'a'") &&
                    strstr(a->report, "blocked in barrier");
        T_CHECK(named, "%s: the report does not name every device:\n%s", label, a->report);
    }
    spmd_mesh_destroy(m);
    free(a);
}

/* A deadlock among DL_N devices (1,024; 256 under ThreadSanitizer, to
   which every fiber is a thread: 1,024 take 12 s there): the report stays
   short. Devices 0 and DL_N / 2 each wait to receive from the other, the
   rest in a psum over the mesh. The report must name both receivers on
   lines of their own, the others as runs ("devices 1..511", "devices
   513..1023"), and the psum's group with its arrived members as ranges,
   in a few hundred bytes, not 1,024 lines. */
#if defined(__SANITIZE_THREAD__)
#define DL_N 256
#else
#define DL_N 1024
#endif
static void dl_big_device(spmd_dev *d, void *arg) {
    float x[4] = {1, 2, 3, 4};
    int id = spmd_device_id(d);
    (void)arg;
    if (id == 0 || id == DL_N / 2) spmd_recv(d, x, 4, SPMD_F32, id == 0 ? DL_N / 2 : 0, 7, "*", NULL, NULL);
    else spmd_psum(d, x, x, 4, SPMD_F32, "*", NULL);
}

static void test_big_deadlock_report(void) {
    dl_arg *a = (dl_arg *)calloc(1, sizeof *a);
    spmd_mesh *m = a ? tl_mesh_ab(DL_N / 32, 32, SPMD_SCHEDULER_FIBERS, 1, 0, 60000, dl_log, a) : NULL;
    const char *rep, *at;
    char want[6][160];
    int h = DL_N / 2, i;
    spmd_status run;
    if (!m) { free(a); return; }
    run = spmd_run(m, dl_big_device, NULL);
    T_CHECK(run == SPMD_ERR_DEADLOCK, "%d devices: spmd_run returned %s", DL_N, stname(run));
    /* the report the break logged, while every device was blocked */
    rep = a->report;
    at = strstr(rep, "spmd report:");
    T_CHECK(at != NULL && strlen(at) < 2048, "%d devices: the report takes %zu bytes:\n%s", DL_N, at ? strlen(at) : 0,
            rep);
    snprintf(want[0], sizeof want[0], "\n  device 0: blocked in #0 recv(f32 x 4) from %d over '*'", h);
    snprintf(want[1], sizeof want[1], "\n  device %d: blocked in #0 recv(f32 x 4) from 0 over '*'", h);
    snprintf(want[2], sizeof want[2], "\n  devices 1..%d: blocked in #0 psum(f32 x 4, eager) over '*' (op #0 of group "
             "[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 ...]): waiting\n", h - 1);
    snprintf(want[3], sizeof want[3], "\n  devices %d..%d: blocked in #0 psum(f32 x 4, eager) over '*'", h + 1, DL_N - 1);
    snprintf(want[4], sizeof want[4], "\n  arrived: devices 1..%d, %d..%d\n", h - 1, h + 1, DL_N - 1);
    snprintf(want[5], sizeof want[5], "\n  2 of %d members did not arrive\n", DL_N);
    for (i = 0; i < 6; i++) T_CHECK(strstr(rep, want[i]) != NULL, "the report has no line \"%s\":\n%s", want[i] + 3, rep);
    snprintf(want[0], sizeof want[0], "\n  device %d: no call on this group", h);
    T_CHECK(strstr(rep, "\n  device 0: no call on this group") != NULL && strstr(rep, want[0]) != NULL,
            "the receivers did not arrive at the psum:\n%s", rep);
    spmd_mesh_destroy(m);
    free(a);
}

static void test_deadlocks(void) {
    static const uint64_t seeds[3] = {0, 1, 99};
    int kind, s;
    for (kind = 0; kind < 3; kind++)
        for (s = 0; s < 3; s++) deadlock_case(kind, SPMD_SCHEDULER_FIBERS, 1, seeds[s]);
    for (kind = 0; kind < 3; kind++) deadlock_case(kind, SPMD_SCHEDULER_FIBERS, 2, 0);
    deadlock_case(2, SPMD_SCHEDULER_THREADS, 0, 0); /* threads: the returned device only */
    setenv("SPMD_TRACE_DEPTH", "0", 1); /* without the recorder: the per-device lines from the requests */
    for (kind = 0; kind < 2; kind++) deadlock_case(kind, SPMD_SCHEDULER_FIBERS, 1, 0);
    unsetenv("SPMD_TRACE_DEPTH");
}

/* ---- bad input ------------------------------------------------------------------- */

static char bad_msg[600];
static void bad_log(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user;
    (void)level;
    (void)device;
    snprintf(bad_msg, sizeof bad_msg, "%s", msg);
}

static void test_bad_desc(void) {
    static const struct { int carriers; size_t stack; int sched; const char *field; } cs[] = {
        {-1, 0, SPMD_SCHEDULER_FIBERS, "carriers"},
        {1025, 0, SPMD_SCHEDULER_FIBERS, "carriers"},
        {1, 4096, SPMD_SCHEDULER_FIBERS, "thread_stack_size"},
        {1, (size_t)2 << 30, SPMD_SCHEDULER_FIBERS, "thread_stack_size"},
        {1, 0, 7, "scheduler"}};
    int i;
    for (i = 0; i < 5; i++) {
        spmd_mesh_desc desc;
        spmd_mesh *m = NULL;
        spmd_status s;
        memset(&desc, 0, sizeof desc);
        desc.ndim = 1;
        desc.shape[0] = 4;
        desc.axis_names[0] = "i";
        desc.scheduler = (spmd_scheduler)cs[i].sched;
        desc.carriers = cs[i].carriers;
        desc.thread_stack_size = cs[i].stack;
        desc.log_fn = bad_log;
        bad_msg[0] = 0;
        s = spmd_mesh_create(&desc, &m);
        T_CHECK(s == SPMD_ERR_INVALID && !m && strstr(bad_msg, cs[i].field), "%s: %s, message '%s'", cs[i].field,
                stname(s), bad_msg);
    }
}

/* ---- a stack too small faults on its guard page ---------------------------------- */

static int deep(int n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    pad[1023] = (char)n;
    return n ? deep(n - 1) + pad[0] + pad[1023] : 0;
}

/* The child's view of the fault: where it hit, against a local of the
   overflowing device near the top of its 16 KiB stack. */
static volatile uintptr_t deep_top;
static char deep_alt[65536];

static void deep_segv(int sig, siginfo_t *si, void *uc) {
    uintptr_t a = (uintptr_t)si->si_addr, top = deep_top;
    (void)sig;
    (void)uc;
    /* the guard page: just below the 16 KiB stack (a few KiB of slack for
       the frames above the local and the page rounding) */
    _exit(a < top && top - a >= 12288 && top - a <= 20480 ? 42 : 43);
}

/* Overflow this device's stack by n frames of ~1 KiB, deep_segv
   watching (deep_alt[0] 0: the plain build, the handler on a stack of
   its own on this carrier thread). */
static void deep_here(int n) {
    volatile char here = 0;
    deep_top = (uintptr_t)&here;
    if (deep_alt[0] == 0) {
        stack_t ss;
        ss.ss_sp = deep_alt + 16;
        ss.ss_size = sizeof deep_alt - 16;
        ss.ss_flags = 0;
        sigaltstack(&ss, NULL);
    }
    printf("%d\n", deep(n) + here);
}

static void deep_watch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = deep_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
}

static void deep_device(spmd_dev *d, void *p) {
    (void)p;
    if (spmd_device_id(d) == 1) deep_here(40); /* ~40 KiB on a 16 KiB stack */
}

/* Whether this kernel has guard regions (madvise MADV_GUARD_INSTALL, 102,
   Linux 6.13), asked of a page of our own. */
static int kernel_guard_regions(void) {
    void *pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int ok = pg != MAP_FAILED && madvise(pg, 4096, 102) == 0;
    if (pg != MAP_FAILED) munmap(pg, 4096);
    return ok;
}

/* Make this process's kernel an older one, as far as guard regions go:
   madvise(..., MADV_GUARD_INSTALL) fails with EINVAL (a seccomp filter;
   little-endian: the low word of the advice). */
static int refuse_guard_regions(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 102, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog;
    prog.len = (unsigned short)(sizeof f / sizeof f[0]);
    prog.filter = f;
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* fork, with nothing buffered that the child would print again */
static pid_t fork_flushed(void) {
    fflush(stdout);
    fflush(stderr);
    return fork();
}

static void test_overflow(void) {
    pid_t pid;
    int status = 0, sanitized = 0;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    sanitized = 1; /* the sanitizer's own SIGSEGV handler reports the overflow */
#endif
    pid = fork_flushed();
    if (pid == 0) {
        spmd_mesh_desc desc;
        spmd_mesh *m;
        deep_alt[0] = (char)sanitized; /* sanitizers: their own handler and stack */
        if (!sanitized) deep_watch();
        desc4_one_carrier(&desc);
        desc.thread_stack_size = 16384;
        if (spmd_mesh_create(&desc, &m) != SPMD_OK) _exit(3);
        spmd_run(m, deep_device, NULL);
        _exit(0); /* survived: the overflow went unnoticed */
    }
    T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    if (!sanitized)
        T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42,
                "a 16 KiB fiber stack overflowed by ~24 KiB: want a fault on the page below it (exit 42), got "
                "status 0x%x (43: a fault elsewhere, 0: none)", status);
    else /* the sanitizer's report, then an abnormal end */
        T_CHECK((WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL) ||
                    (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 3),
                "a 16 KiB fiber stack overflowed: child status 0x%x (want a sanitizer's stack-overflow report)",
                status);
}

/* Device 16,391 of 16,392 overflows its 16 KiB stack by about 2 KiB.
   Where the kernel has guard regions, every fiber's stack has a guard:
   it dies on the page below. On an older kernel (made so with a seccomp
   filter) only the first 16,384 fibers have one (guard pages split the
   mapping; a process has ~65,530 mappings): an overflow into the plain
   page below is found when the fiber ends, the process aborted with the
   device named. */
static char *gap_msg; /* shared with the child */
static void gap_log(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user;
    if (level == SPMD_LOG_ERROR && device == 16391) snprintf(gap_msg, 4096, "%s", msg);
}

static void gap_device(spmd_dev *d, void *p) {
    (void)p;
    if (spmd_device_id(d) == 16391) deep_here(17); /* 18 frames of ~1 KiB */
}

static void test_overflow_gap(int old_kernel) {
    pid_t pid;
    int status = 0, regions = !old_kernel && kernel_guard_regions();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return; /* sanitizers grow the frames past the page below (the plain build runs it) */
#endif
    gap_msg = (char *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (gap_msg == (char *)MAP_FAILED) { T_CHECK(0, "mmap"); return; }
    gap_msg[0] = 0;
    pid = fork_flushed();
    if (pid == 0) {
        spmd_mesh_desc desc;
        spmd_mesh *m;
        if (old_kernel && !refuse_guard_regions()) _exit(4);
        deep_alt[0] = 0;
        deep_watch();
        desc4_one_carrier(&desc);
        desc.shape[0] = 16392;
        desc.thread_stack_size = 16384;
        desc.log_fn = gap_log;
        desc.log_level = SPMD_LOG_ERROR;
        if (spmd_mesh_create(&desc, &m) != SPMD_OK) _exit(3);
        spmd_run(m, gap_device, &status);
        _exit(0); /* survived: the overflow went unnoticed */
    }
    T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    if (regions) {
        T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42, "guard regions: fiber 16,391 overflowed its stack: "
                "want a fault on the page below it (exit 42), got status 0x%x (43: a fault elsewhere)", status);
    } else {
        T_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "%s: a fiber past the guards overflowed its "
                "stack into the page below: want SIGABRT, got status 0x%x (exit 4: no seccomp filter)",
                old_kernel ? "guard regions refused" : "a kernel without guard regions", status);
        T_CHECK(strstr(gap_msg, "device 16391 overflowed its fiber stack of 16384 bytes") &&
                    strstr(gap_msg, "thread_stack_size"), "the report names the device and the remedy: '%s'", gap_msg);
    }
    munmap(gap_msg, 4096);
}

/* A mesh keeps its fibers' stacks from one run to the next (mapping them
   and their guard pages again cost 30 ms a run at 4,096 devices): between
   runs they stay mapped, each device runs on the same stack, 64 KiB of its
   own (and a page) apart from the next device's; the mesh's destroy
   unmaps them. */
static uintptr_t kept_at[2][64];
static int mapped(uintptr_t a) { /* 1 if a is in a mapping of this process */
    char line[512];
    unsigned long lo, hi;
    int in = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && !in && fgets(line, sizeof line, f))
        in = sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi;
    if (f) fclose(f);
    return in;
}

static void kept_device(spmd_dev *d, void *p) {
    volatile char here = 0;
    kept_at[*(int *)p][spmd_device_id(d)] = (uintptr_t)&here;
}

static void test_stacks_kept(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m;
    int run, i, same = 0, apart = 0;
    desc4_one_carrier(&desc);
    desc.shape[0] = 64;
    desc.carriers = 2;
    desc.thread_stack_size = 65536;
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) { T_CHECK(0, "mesh"); return; }
    for (run = 0; run < 2; run++) {
        T_CHECK(spmd_run(m, kept_device, &run) == SPMD_OK, "run %d", run);
        T_CHECK(mapped(kept_at[run][0]) && mapped(kept_at[run][63]), "after run %d the stacks are still mapped", run);
    }
    for (i = 0; i < 64; i++) {
        same += kept_at[0][i] == kept_at[1][i];
        apart += i == 0 || kept_at[0][i] - kept_at[0][i - 1] == 65536 + (uintptr_t)sysconf(_SC_PAGESIZE);
    }
    T_CHECK(same == 64, "%d of 64 devices ran on the same stack in the second run", same);
    T_CHECK(apart == 64, "%d of 64 devices' stacks one stack and a page after the previous one's", apart);
    spmd_mesh_destroy(m);
    T_CHECK(!mapped(kept_at[0][0]) && !mapped(kept_at[0][63]), "the mesh's destroy unmapped the stacks");
}

/* ---- a device that holds its carrier is named ------------------------------------ */

static char wd_msg[600];
static void wd_log(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user;
    if (level == SPMD_LOG_WARN && device == 1) snprintf(wd_msg, sizeof wd_msg, "%s", msg);
}

static void wd_device(spmd_dev *d, void *p) {
    (void)p;
    if (spmd_device_id(d) == 1) { /* blocked outside the library: the fault under test */
        struct timespec ts = {3, 200000000}; /* two watchdog ticks of 1 s, with room for a loaded machine */
        nanosleep(&ts, NULL);
    }
}

static void test_watchdog(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m;
    desc4_one_carrier(&desc);
    desc.timeout_ms = 10000; /* the warning comes after a tenth of it: 1 s */
    desc.log_fn = wd_log;
    desc.log_level = SPMD_LOG_WARN;
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) { T_CHECK(0, "mesh"); return; }
    wd_msg[0] = 0;
    T_CHECK(spmd_run(m, wd_device, NULL) == SPMD_OK, "run");
    T_CHECK(strstr(wd_msg, "device 1 has held carrier 0"), "no warning naming device 1: '%s'", wd_msg);
    spmd_mesh_destroy(m);
}

int main(void) {
    test_bad_desc();
    test_big();
    test_big_ppermute();
    test_big_all_to_all();
    test_wakes();
    test_seeds();
    test_deadlocks();
    test_big_deadlock_report();
    test_overflow();
    test_overflow_gap(0);
    test_overflow_gap(1);
    test_stacks_kept();
    test_watchdog();
    return t_summary();
}
