/* test_async.c - progress workers (>>progress workers): a large call whose
   _start makes it runnable is run by the mesh's workers while every caller
   is away from the library, and stays exact and bounded through what can
   happen meanwhile. Thread backend, one process; the checks:
   - away: G = 2, 3, 5, 7 devices start a psum of f64 (512 KiB a member:
     above the handoff size) and an all_gather of bytes, then stay out of
     the library (sleeping, reading only spmd_mesh_counters) until the
     workers ran a task (10 s at most: a failure), then wait: SPMD_OK and
     the plain sum (integer-valued doubles, exact in any order) and the
     concatenation;
   - SPMD_PROGRESS_WORKERS=0: no worker task in the counters, the same
     results; =5 on a machine of fewer CPUs: the same, with more workers
     than CPUs; the counters' reset;
   - start then wait at once, 40 times with random sizes around the handoff
     size: the callers' waits and the workers claim the same tasks;
   - a deadline at that moment: a mesh of 100 ms deadlines, every device
     away for 300 ms after the start, then SPMD_OK and right data (a
     deadline bounds the wait for peers, who all came); device 0's blocking
     call meanwhile that device 1 never joins times out (SPMD_ERR_TIMEOUT
     within its deadline and the margin) and the handed call still ends
     SPMD_OK with the right sum on both;
   - a loss at that moment: device 2 of 3 is lost at its next call (the
     fault plan) while the workers run the psum all three started; the
     others' waits return SPMD_OK with the sum including device 2's input,
     their next call SPMD_ERR_PEER_LOST naming device 2 (or, after the
     other's, SPMD_ERR_BROKEN naming it);
   - a mismatch at that moment: after the handed psum's first worker task
     the devices make a call that disagrees (counts 5 and 6):
     SPMD_ERR_MISMATCH, then the handed psum's wait SPMD_OK, right sum;
   - a mesh destroyed with its workers idle, made and destroyed again 20
     times (the pool's start and join).
   Every sweep of _start calls elsewhere (test_reduce, test_movement,
   test_mpi) also runs large clusters whose devices go away (tl_away), so
   every operation and dtype goes through the workers against its plain
   reference. */
#define _GNU_SOURCE 1 /* setenv */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BIGN 65539 /* f64 elements a member: 512 KiB, the handoff's size and more */

static spmd_mesh *mesh_1d(int n, int64_t timeout_ms, const char *faults) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = n;
    desc.axis_names[0] = "i";
    desc.timeout_ms = timeout_ms;
    desc.faults = faults;
    desc.scheduler = SPMD_SCHEDULER_THREADS;
    desc.log_fn = log_keep;
    desc.log_level = SPMD_LOG_ERROR;
    spmd_status s = spmd_mesh_create(&desc, &m);
    T_CHECK(s == SPMD_OK && m, "mesh of %d: %s", n, stname(s));
    return s == SPMD_OK ? m : NULL;
}

static void nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Device id's input element i: an integer, so every order sums it exactly. */
static double x_of(int id, size_t i, uint64_t salt) { return (double)((i * 7919u + (size_t)id * 104729u + salt) % 2001) - 1000; }

typedef struct {
    spmd_mesh *m;
    int G;
    size_t n;              /* f64 elements a member */
    uint64_t salt;
    int mode;              /* MODE_* */
    int moved[16];         /* the workers ran a task while the device was away */
    spmd_status st[16][3]; /* per device: the handed call, the call meanwhile, the next call */
    int bad[16];           /* a wrong element of the result (1 + its index), 0: right */
    int gbad[16];
    double waited_ms[16];  /* MODE_DEADLINE: device 0's call meanwhile */
    char msg[16][600];
} job;
enum { MODE_AWAY, MODE_NOW, MODE_DEADLINE, MODE_LOSS, MODE_MISMATCH };

static int sum_bad(const job *j, const double *y) {
    for (size_t i = 0; i < j->n; i++) {
        double want = 0;
        for (int k = 0; k < j->G; k++) want += x_of(k, i, j->salt);
        if (y[i] != want) return (int)i + 1;
    }
    return 0;
}

static void job_dev(spmd_dev *d, void *arg) {
    job *j = (job *)arg;
    int id = spmd_device_id(d), G = j->G;
    size_t n = j->n;
    double *x = xmalloc(n * sizeof(double)), *y = xmalloc(n * sizeof(double));
    unsigned char *gx = xmalloc(n), *gy = xmalloc(n * (size_t)G);
    spmd_req *rq = NULL, *gq = NULL;
    for (size_t i = 0; i < n; i++) {
        x[i] = x_of(id, i, j->salt);
        gx[i] = (unsigned char)(i * 31 + (size_t)id * 17 + j->salt);
    }
    uint64_t base = tl_worker_tasks(j->m);
    j->st[id][0] = spmd_psum_start(d, x, y, n, SPMD_F64, "i", NULL, &rq);
    if (j->mode == MODE_AWAY) {
        spmd_array A = {gx, SPMD_U8, 1, {(int64_t)n}}, B = {gy, SPMD_U8, 1, {(int64_t)(n * (size_t)G)}};
        spmd_status s = spmd_all_gather_start(d, &A, &B, "i", 0, 1, NULL, &gq);
        if (s != SPMD_OK) j->st[id][1] = s;
    }
    if (j->mode != MODE_NOW) j->moved[id] = tl_away(j->m, base, j->mode == MODE_DEADLINE ? 0.3 : 10); /* (testlib.h) */
    if (j->mode == MODE_DEADLINE && j->moved[id]) nap_us(300000 - 1000); /* (past the 100 ms deadline in any case) */
    if (j->mode == MODE_DEADLINE && id == 0) { /* a call device 1 never joins: it times out */
        double t0 = now_s();
        j->st[id][1] = spmd_barrier(d, "i", NULL);
        j->waited_ms[id] = (now_s() - t0) * 1e3;
    }
    if (j->mode == MODE_LOSS && id == 2) j->st[id][1] = spmd_barrier(d, "i", NULL); /* lost here */
    if (j->mode == MODE_MISMATCH) { /* (buffers of its own: the handed call's are the library's until its wait) */
        double a[6] = {0}, b[6];
        j->st[id][1] = spmd_psum(d, a, b, id == 0 ? 5 : 6, SPMD_F64, "i", NULL);
    }
    if (rq) j->st[id][0] = spmd_wait(rq);
    if (gq) {
        spmd_status s = spmd_wait(gq);
        if (s != SPMD_OK) j->st[id][1] = s;
    }
    if (j->st[id][0] == SPMD_OK) j->bad[id] = sum_bad(j, y);
    for (size_t i = 0; gq && i < n * (size_t)G; i++)
        if (gy[i] != (unsigned char)(i % n * 31 + i / n * 17 + j->salt)) {
            j->gbad[id] = (int)i + 1;
            break;
        }
    if (j->mode == MODE_LOSS && id != 2) j->st[id][2] = spmd_barrier(d, "i", NULL);
    if (j->mode == MODE_DEADLINE && id == 1) nap_us(600000); /* (returned, it would make device 0's wait a deadlock) */
    snprintf(j->msg[id], sizeof j->msg[id], "%s", spmd_last_error(d));
    free(x), free(y), free(gx), free(gy);
}

/* A job of G devices, n f64 a member, on a new mesh (timeout_ms, faults); 0 if the mesh failed. */
static int job_make(job *j, int G, size_t n, uint64_t salt, int mode, int64_t timeout_ms, const char *faults) {
    memset(j, 0, sizeof *j);
    j->G = G, j->n = n, j->salt = salt, j->mode = mode;
    return (j->m = mesh_1d(G, timeout_ms, faults)) != NULL;
}

static void run_job(job *j) {
    spmd_status s = spmd_run(j->m, job_dev, j);
    if (j->mode == MODE_AWAY || j->mode == MODE_NOW)
        T_CHECK(s == SPMD_OK, "G=%d mode %d: spmd_run %s: %s", j->G, j->mode, stname(s), spmd_mesh_error(j->m));
}

static void test_away(void) {
    static const int Gs[] = {2, 3, 5, 7};
    for (int gi = 0; gi < 4; gi++) {
        job j;
        if (!job_make(&j, Gs[gi], BIGN + (size_t)gi, (uint64_t)gi, MODE_AWAY, 0, NULL)) continue;
        run_job(&j);
        for (int id = 0; id < j.G; id++) {
            T_CHECK(j.moved[id], "G=%d dev %d: no worker task in 10 s while every caller was away", j.G, id);
            T_CHECK(j.st[id][0] == SPMD_OK && j.st[id][1] == SPMD_OK, "G=%d dev %d: psum %s, all_gather %s: %s", j.G,
                    id, stname(j.st[id][0]), stname(j.st[id][1]), j.msg[id]);
            T_CHECK(!j.bad[id], "G=%d dev %d: psum element %d wrong", j.G, id, j.bad[id] - 1);
            T_CHECK(!j.gbad[id], "G=%d dev %d: all_gather byte %d wrong", j.G, id, j.gbad[id] - 1);
        }
        T_CHECK(tl_worker_tasks(j.m) > 0, "G=%d: worker_tasks 0", j.G);
        spmd_mesh_destroy(j.m);
    }
}

/* SPMD_PROGRESS_WORKERS: 0 (none: the counter stays 0), 5 (more than this machine's CPUs maybe). */
static void test_env(void) {
    static const char *vals[] = {"0", "5"};
    for (int v = 0; v < 2; v++) {
        job j;
        setenv("SPMD_PROGRESS_WORKERS", vals[v], 1); /* (read when the mesh is made) */
        int made = job_make(&j, 3, BIGN, 9, v ? MODE_AWAY : MODE_NOW, 0, NULL);
        unsetenv("SPMD_PROGRESS_WORKERS");
        if (!made) continue;
        for (int rep = 0; rep < 3; rep++) run_job(&j);
        for (int id = 0; id < j.G; id++)
            T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id] && !j.gbad[id], "workers %s dev %d: %s, element %d: %s",
                    vals[v], id, stname(j.st[id][0]), j.bad[id] - 1, j.msg[id]);
        if (v == 0) T_CHECK(tl_worker_tasks(j.m) == 0, "SPMD_PROGRESS_WORKERS=0: %llu worker tasks",
                            (unsigned long long)tl_worker_tasks(j.m));
        else T_CHECK(tl_worker_tasks(j.m) > 0, "SPMD_PROGRESS_WORKERS=5: no worker task");
        T_CHECK(spmd_mesh_counters_reset(j.m) == SPMD_OK && tl_worker_tasks(j.m) == 0, "counters_reset kept %llu",
                (unsigned long long)tl_worker_tasks(j.m));
        spmd_mesh_destroy(j.m);
    }
}

/* Start, then wait at once: members and workers claim the same tasks. */
static void test_now(void) {
    rng_t r = rng_make(env_seed(41), 41, 0);
    spmd_mesh *ms[6] = {0};
    for (int k = 0; k < 40; k++) {
        job j;
        memset(&j, 0, sizeof j);
        j.G = 2 + rb(&r, 4);
        j.n = (size_t)(262144 / 8 / j.G) / 2 + (size_t)rb(&r, 262144 / 8);
        j.salt = rn(&r) % 1000;
        j.mode = MODE_NOW;
        if (!ms[j.G] && !(ms[j.G] = mesh_1d(j.G, 0, NULL))) continue;
        j.m = ms[j.G];
        run_job(&j);
        for (int id = 0; id < j.G; id++)
            T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id], "now G=%d n=%zu dev %d: %s, element %d: %s", j.G, j.n, id,
                    stname(j.st[id][0]), j.bad[id] - 1, j.msg[id]);
    }
    for (int g = 0; g < 6; g++)
        if (ms[g]) spmd_mesh_destroy(ms[g]);
}

static void test_deadline(void) {
    job j;
    if (!job_make(&j, 2, BIGN, 3, MODE_DEADLINE, 100, NULL)) return;
    run_job(&j);
    for (int id = 0; id < 2; id++)
        T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id], "deadline: dev %d's handed psum %s, element %d: %s", id,
                stname(j.st[id][0]), j.bad[id] - 1, j.msg[id]);
    T_CHECK(j.st[0][1] == SPMD_ERR_TIMEOUT, "deadline: the barrier device 1 never joins: %s", stname(j.st[0][1]));
    T_CHECK(j.waited_ms[0] >= 90 && j.waited_ms[0] < 100 + 1000, "deadline: the barrier took %.1f ms (deadline 100)",
            j.waited_ms[0]);
    spmd_mesh_destroy(j.m);
}

static void test_loss(void) {
    job j;
    if (!job_make(&j, 3, BIGN, 5, MODE_LOSS, 0, "device=2,seq=1,kind=lose")) return;
    run_job(&j);
    for (int id = 0; id < 2; id++) {
        T_CHECK(j.moved[id], "loss: dev %d: no worker task while away", id);
        T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id], "loss: dev %d's handed psum %s, element %d: %s", id,
                stname(j.st[id][0]), j.bad[id] - 1, j.msg[id]);
        T_CHECK((j.st[id][2] == SPMD_ERR_PEER_LOST || j.st[id][2] == SPMD_ERR_BROKEN) && strstr(j.msg[id], "device 2 was lost"),
                "loss: dev %d's next call %s, want SPMD_ERR_PEER_LOST (or BROKEN by the other's) naming device 2: %s",
                id, stname(j.st[id][2]), j.msg[id]);
    }
    T_CHECK(j.st[2][1] == SPMD_ERR_PEER_LOST, "loss: the lost device's call %s", stname(j.st[2][1]));
    T_CHECK((j.st[2][0] == SPMD_OK && !j.bad[2]) || j.st[2][0] == SPMD_ERR_PEER_LOST,
            "loss: the lost device's handed psum %s, element %d", stname(j.st[2][0]), j.bad[2] - 1);
    spmd_mesh_destroy(j.m);
}

static void test_mismatch(void) {
    job j;
    if (!job_make(&j, 3, BIGN, 7, MODE_MISMATCH, 0, NULL)) return;
    run_job(&j);
    for (int id = 0; id < 3; id++) {
        T_CHECK(j.moved[id], "mismatch: dev %d: no worker task while away", id);
        T_CHECK(j.st[id][1] == SPMD_ERR_MISMATCH, "mismatch: dev %d's call %s: %s", id, stname(j.st[id][1]), j.msg[id]);
        T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id], "mismatch: dev %d's handed psum %s, element %d", id,
                stname(j.st[id][0]), j.bad[id] - 1);
    }
    spmd_mesh_destroy(j.m);
}

static void test_pool_lifetime(void) {
    for (int k = 0; k < 20; k++) {
        job j;
        if (!job_make(&j, 2, BIGN, (uint64_t)k, k % 2 ? MODE_NOW : MODE_AWAY, 0, NULL)) return;
        run_job(&j);
        for (int id = 0; id < 2; id++)
            T_CHECK(j.st[id][0] == SPMD_OK && !j.bad[id], "lifetime %d dev %d: %s, element %d", k, id,
                    stname(j.st[id][0]), j.bad[id] - 1);
        T_CHECK(spmd_mesh_destroy(j.m) == SPMD_OK, "lifetime %d: destroy", k);
    }
}

int main(void) {
    unsetenv("SPMD_PROGRESS_WORKERS");
    unsetenv("SPMD_FAULTS");
    unsetenv("SPMD_TIMEOUT_MS");
    unsetenv("SPMD_SCHEDULER");
    if (tl_env_processes() > 1) {
        T_SKIP("one process only: the workers serve groups within a process (the sweeps cover them under spmdrun)");
        return t_summary();
    }
    test_away();
    test_env();
    test_now();
    test_deadline();
    test_loss();
    test_mismatch();
    test_pool_lifetime();
    return t_summary();
}
