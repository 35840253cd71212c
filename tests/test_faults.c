/* test_faults.c - fault injection on the thread backend (SPMD_FAULTS,
   desc.faults), under both schedulers: kind=lose (the lost device's call and
   every later one fail with SPMD_ERR_PEER_LOST; every peer waiting for it
   gets SPMD_ERR_PEER_LOST naming the device and its call, well before the
   deadline), for a collective, an async collective and point to point;
   delay and skip (the peers' timeout naming the skipper, or under fibers
   their SPMD_ERR_DEADLOCK once it returned); kind=exit (a child process ends
   with status 3, stdio flushed); kind=corrupt (every member's result is the
   reference with that byte flipped, for psum, all_to_all in place, all_gather
   and send; in check mode SPMD_ERR_MISMATCH naming the device and call on
   every member; a plan listed out of order); a skipped call followed by
   the device's return (its peers' SPMD_ERR_DEADLOCK, the report and the
   flight recorder's record of the skip); the plan's grammar: every kind,
   odd device ids and numbers, missing and unknown fields, a second fault
   for one (device, seq), what is accepted, SPMD_FAULTS against desc.faults.
   Device threads record what they saw, the main thread checks it against
   what docs/faults.md says, written out here. */
#define _GNU_SOURCE 1 /* setenv */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NDEV 4
#define NCALL 3


static spmd_scheduler sched;
static const char *sched_name(void) { return sched == SPMD_SCHEDULER_FIBERS ? "fibers" : "threads"; }

static spmd_mesh *mesh_n(int n, int64_t timeout_ms, const char *faults, int check, spmd_status *st) {
    static const char *names[1] = {"i"};
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = n;
    desc.axis_names[0] = names[0];
    desc.timeout_ms = timeout_ms;
    desc.faults = faults;
    desc.check = check;
    desc.scheduler = sched;
    desc.log_level = SPMD_LOG_WARN;
    desc.log_fn = log_keep;
    *st = spmd_mesh_create(&desc, &m);
    return m;
}

/* What each device saw, per call: status, last error, a value. */
static struct {
    spmd_status s[NDEV][NCALL];
    char msg[NDEV][NCALL][512];
    double v[NDEV][NCALL];
} seen;
static int survivors_done; /* survivors that recorded the call the loss failed (see lost_holds) */

static void keep(spmd_dev *d, int call, spmd_status s, double v) {
    int id = spmd_device_id(d);
    if (id < 0 || id >= NDEV || call < 0 || call >= NCALL) return;
    seen.s[id][call] = s;
    seen.v[id][call] = v;
    snprintf(seen.msg[id][call], sizeof seen.msg[id][call], "%s", s == SPMD_OK ? "" : spmd_last_error(d));
}

static void clear_seen(void) {
    memset(&seen, 0, sizeof seen);
    for (int i = 0; i < NDEV; i++)
        for (int c = 0; c < NCALL; c++) seen.s[i][c] = (spmd_status)-1;
}

/* Run fn on a mesh of n devices with the plan; time it. */
static int plan_check; /* run_plan's desc.check */
static double run_plan(int n, const char *plan, spmd_fn fn, spmd_status *run_st, spmd_status *mesh_st) {
    spmd_status st;
    spmd_mesh *m = mesh_n(n, 30000, plan, plan_check, &st);
    double t0;
    survivors_done = 0;
    clear_seen();
    log_clear();
    T_CHECK(st == SPMD_OK && m, "[%s] mesh with plan '%s': %s", sched_name(), plan, spmd_status_name(st));
    if (!m) return 0;
    t0 = now_s();
    *run_st = spmd_run(m, fn, NULL);
    t0 = now_s() - t0;
    *mesh_st = spmd_mesh_status(m);
    spmd_mesh_destroy(m);
    return t0;
}

/* Under OS threads, the lost device stays in its function until the
   survivors have seen the loss (bounded: 20 s), so that they cannot learn it
   from its return: the fault plan's mark is what they must see. (A fiber
   cannot block without stalling its carrier: it returns at once.) */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static void survivor_done(void) {
    pthread_mutex_lock(&hold_lock);
    survivors_done++;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
}
static void lost_holds(int survivors) {
    struct timespec until;
    if (sched == SPMD_SCHEDULER_FIBERS) return;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&hold_lock);
    while (survivors_done < survivors)
        if (pthread_cond_timedwait(&hold_cond, &hold_lock, &until) != 0) break;
    pthread_mutex_unlock(&hold_lock);
}

/* ---- kind=lose ----------------------------------------------------------- */
/* device 2 is lost at its call #1 (the second psum) */
static void lose_coll(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    float x = (float)(id + 1), y;
    (void)arg;
    spmd_status s;
    y = -1;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    keep(d, 0, s, y);
    y = -1;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    keep(d, 1, s, y);
    if (id != 2) survivor_done();
    keep(d, 2, spmd_barrier(d, "i", NULL), 0);
    if (id == 2) lost_holds(NDEV - 1);
}

static void test_lose_coll(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    double took = run_plan(NDEV, "device=2,seq=1,kind=lose", lose_coll, &rs, &ms);
    const char *peer_says = "device 2 was lost (SPMD_FAULTS kind=lose at its call #1, psum(f32 x 1) over 'i')";
    T_CHECK(took < 10.0, "[%s] lose: ended within 10 s (deadline 30 s): %.1f s", sched_name(), took);
    T_CHECK(rs == SPMD_ERR_PEER_LOST && ms == SPMD_ERR_PEER_LOST, "[%s] lose: spmd_run %s, mesh %s", sched_name(),
            spmd_status_name(rs), spmd_status_name(ms));
    for (int i = 0; i < NDEV; i++) {
        T_CHECK(seen.s[i][0] == SPMD_OK && seen.v[i][0] == 10.0, "[%s] lose: device %d call #0 before the loss: %s %g",
                sched_name(), i, spmd_status_name(seen.s[i][0]), seen.v[i][0]);
        /* a peer that waited gets SPMD_ERR_PEER_LOST; one whose call began after
           another peer broke the mesh, SPMD_ERR_BROKEN: both name the loss */
        T_CHECK(seen.s[i][1] == SPMD_ERR_PEER_LOST || (i != 2 && seen.s[i][1] == SPMD_ERR_BROKEN),
                "[%s] lose: device %d call #1: %s (%s)", sched_name(), i, spmd_status_name(seen.s[i][1]),
                seen.msg[i][1]);
        /* the lost device's later calls fail fast; its peers', once the mesh broke, with SPMD_ERR_BROKEN */
        T_CHECK(seen.s[i][2] == (i == 2 ? SPMD_ERR_PEER_LOST : SPMD_ERR_BROKEN), "[%s] lose: device %d call #2: %s (%s)",
                sched_name(), i, spmd_status_name(seen.s[i][2]), seen.msg[i][2]);
        if (i == 2) {
            T_CHECK(strstr(seen.msg[2][1], "psum(f32 x 1) over 'i' (call #1 of this device): this device was lost by "
                                           "SPMD_FAULTS (kind=lose)") != NULL,
                    "[%s] lose: the lost device's message: %s", sched_name(), seen.msg[2][1]);
            T_CHECK(seen.v[2][1] == -1.0, "[%s] lose: the lost device's output untouched: %g", sched_name(), seen.v[2][1]);
            T_CHECK(strstr(seen.msg[2][2], "this device was lost by SPMD_FAULTS at its call #1 (psum(f32 x 1) over "
                                           "'i'): every later call fails") != NULL,
                    "[%s] lose: a later call of the lost device fails fast: %s", sched_name(), seen.msg[2][2]);
        } else {
            T_CHECK(strstr(seen.msg[i][1], peer_says) != NULL, "[%s] lose: device %d's call #1 names the loss: %s",
                    sched_name(), i, seen.msg[i][1]);
            T_CHECK(strstr(seen.msg[i][2], peer_says) != NULL, "[%s] lose: device %d's call #2 names the loss: %s",
                    sched_name(), i, seen.msg[i][2]);
        }
    }
}

/* device 1 is lost at its call #0, an async psum; the others wait on theirs */
static void lose_async(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    int32_t x = id, y = -1;
    spmd_req *r = NULL;
    spmd_status s;
    (void)arg;
    s = spmd_psum_start(d, &x, &y, 1, SPMD_I32, "i", NULL, &r);
    if (s == SPMD_OK) s = spmd_wait(r);
    keep(d, 0, s, y);
    if (id == 1) { /* a later start fails itself, with no request */
        r = (spmd_req *)&r;
        s = spmd_psum_start(d, &x, &y, 1, SPMD_I32, "i", NULL, &r);
        keep(d, 1, s, r == NULL);
    }
    if (id != 1) survivor_done();
    else lost_holds(2);
}

static void test_lose_async(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    double took = run_plan(3, "device=1,seq=0,kind=lose", lose_async, &rs, &ms);
    const char *peer_says = "device 1 was lost (SPMD_FAULTS kind=lose at its call #0, psum(i32 x 1) over 'i')";
    T_CHECK(took < 10.0, "[%s] lose async: ended within 10 s (deadline 30 s): %.1f s", sched_name(), took);
    T_CHECK(rs == SPMD_ERR_PEER_LOST, "[%s] lose async: spmd_run %s", sched_name(), spmd_status_name(rs));
    for (int i = 0; i < 3; i++) {
        T_CHECK(seen.s[i][0] == SPMD_ERR_PEER_LOST || (i != 1 && seen.s[i][0] == SPMD_ERR_BROKEN),
                "[%s] lose async: device %d: %s (%s)", sched_name(), i,
                spmd_status_name(seen.s[i][0]), seen.msg[i][0]);
        T_CHECK(strstr(seen.msg[i][0], i == 1 ? "this device was lost by SPMD_FAULTS (kind=lose)" : peer_says) != NULL,
                "[%s] lose async: device %d's message: %s", sched_name(), i, seen.msg[i][0]);
        if (i == 1)
            T_CHECK(seen.s[1][1] == SPMD_ERR_PEER_LOST && seen.v[1][1] == 1.0 &&
                        strstr(seen.msg[1][1], "this device was lost by SPMD_FAULTS at its call #0 (psum(i32 x 1) over "
                                               "'i'): every later call fails"),
                    "[%s] lose async: the lost device's next start: %s, request %s (%s)", sched_name(),
                    spmd_status_name(seen.s[1][1]), seen.v[1][1] == 1.0 ? "NULL" : "set", seen.msg[1][1]);
    }
}

/* point to point: device 0 is lost at its call #1 (a send to 1); device 1's
   recv from it and device 2's recv from 1 (which 1 never sends) */
static void lose_p2p(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    int32_t v = 100 + id, got = -1;
    spmd_status s;
    (void)arg;
    keep(d, 0, spmd_barrier(d, "i", NULL), 0);
    if (id == 0) s = spmd_send(d, &v, 1, SPMD_I32, 1, 5, "i", NULL);
    else s = spmd_recv(d, &got, 1, SPMD_I32, id - 1, 5, "i", NULL, NULL);
    keep(d, 1, s, got);
    if (id == 1 && s == SPMD_OK) keep(d, 2, spmd_send(d, &v, 1, SPMD_I32, 2, 5, "i", NULL), 0);
    if (id != 0) survivor_done();
    else lost_holds(2);
}

static void test_lose_p2p(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    double took = run_plan(3, "device=0,seq=1,kind=lose", lose_p2p, &rs, &ms);
    T_CHECK(took < 10.0, "[%s] lose p2p: ended within 10 s (deadline 30 s): %.1f s", sched_name(), took);
    T_CHECK(rs == SPMD_ERR_PEER_LOST, "[%s] lose p2p: spmd_run %s", sched_name(), spmd_status_name(rs));
    for (int i = 0; i < 3; i++)
        T_CHECK(seen.s[i][0] == SPMD_OK, "[%s] lose p2p: device %d's barrier before the loss: %s", sched_name(), i,
                spmd_status_name(seen.s[i][0]));
    T_CHECK(seen.s[0][1] == SPMD_ERR_PEER_LOST && strstr(seen.msg[0][1], "this device was lost by SPMD_FAULTS"),
            "[%s] lose p2p: device 0's send: %s (%s)", sched_name(), spmd_status_name(seen.s[0][1]), seen.msg[0][1]);
    T_CHECK(seen.s[1][1] == SPMD_ERR_PEER_LOST &&
                strstr(seen.msg[1][1], "recv of i32 x 1 from 0 (tag 5; -1 = any) over 'i' can never complete: "
                                       "device 0 was lost (SPMD_FAULTS kind=lose at its call #1, send(i32 x 1) over 'i')"),
            "[%s] lose p2p: device 1's recv from the lost device: %s (%s)", sched_name(),
            spmd_status_name(seen.s[1][1]), seen.msg[1][1]);
    T_CHECK((seen.s[2][1] == SPMD_ERR_PEER_LOST || seen.s[2][1] == SPMD_ERR_BROKEN) &&
                strstr(seen.msg[2][1], "device 1: recv of i32 x 1 from 0") &&
                strstr(seen.msg[2][1], "device 0 was lost (SPMD_FAULTS kind=lose at its call #1, send(i32 x 1)"),
            "[%s] lose p2p: device 2 (waiting for device 1) learns of the loss: %s (%s)", sched_name(),
            spmd_status_name(seen.s[2][1]), seen.msg[2][1]);
}

/* ---- delay and skip ------------------------------------------------------- */
/* 3 devices: device 1's call #0 is held 100 ms, device 2's call #1 skipped.
   Under OS threads device 2 then stays until the others have their verdict
   (their deadline, 500 ms, passes: SPMD_ERR_TIMEOUT naming device 2 as not
   arrived); a fiber returns at once (its peers: SPMD_ERR_DEADLOCK naming it
   as returned without calling it). */
static void delay_skip(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    float x = (float)(id + 1), y = -1;
    spmd_opts o;
    spmd_status s;
    double t0 = now_s();
    (void)arg;
    memset(&o, 0, sizeof o);
    o.timeout_ms = 500;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    keep(d, 0, s, id == 1 ? now_s() - t0 : y);
    y = -1;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", &o);
    keep(d, 1, s, y);
    if (id != 2) survivor_done();
    else lost_holds(2);
}

static void test_delay_skip(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    double took = run_plan(3, "device=1,seq=0,kind=delay:100;device=2,seq=1,kind=skip", delay_skip, &rs, &ms);
    int fib = sched == SPMD_SCHEDULER_FIBERS;
    T_CHECK(took < 10.0, "[%s] delay/skip: ended within 10 s: %.1f s", sched_name(), took);
    T_CHECK(rs == (fib ? SPMD_ERR_DEADLOCK : SPMD_ERR_TIMEOUT), "[%s] delay/skip: spmd_run %s", sched_name(),
            spmd_status_name(rs));
    for (int i = 0; i < 3; i++) {
        T_CHECK(seen.s[i][0] == SPMD_OK, "[%s] delay: device %d: %s", sched_name(), i, spmd_status_name(seen.s[i][0]));
        if (i == 1) T_CHECK(seen.v[1][0] >= 0.1, "[%s] delay: device 1 held %.3f s", sched_name(), seen.v[1][0]);
        else T_CHECK(seen.v[i][0] == 6.0, "[%s] delay: device %d's sum %g", sched_name(), i, seen.v[i][0]);
        if (i == 2) {
            T_CHECK(seen.s[2][1] == SPMD_OK && seen.v[2][1] == -1.0,
                    "[%s] skip: the skipped call returns SPMD_OK, its output untouched: %s %g", sched_name(),
                    spmd_status_name(seen.s[2][1]), seen.v[2][1]);
        } else if (fib) {
            T_CHECK((seen.s[i][1] == SPMD_ERR_DEADLOCK || seen.s[i][1] == SPMD_ERR_BROKEN) &&
                        strstr(seen.msg[i][1], "psum(f32 x 1, eager) over 'i' (operation #1 of this device, #1 of its "
                                               "group) can never complete: device 2 returned from its function without "
                                               "calling it"),
                    "[%s] skip: device %d: %s (%s)", sched_name(), i, spmd_status_name(seen.s[i][1]), seen.msg[i][1]);
        } else {
            /* timed out itself, or abandoned when the other one's timeout broke the mesh */
            T_CHECK((seen.s[i][1] == SPMD_ERR_TIMEOUT || seen.s[i][1] == SPMD_ERR_BROKEN) &&
                        strstr(seen.msg[i][1], "psum(f32 x 1, eager) over 'i' (operation #1 of this device, #1 of its "
                                               "group) timed out after 500 ms: devices that did not arrive: 2"),
                    "[%s] skip: device %d: %s (%s)", sched_name(), i, spmd_status_name(seen.s[i][1]), seen.msg[i][1]);
        }
    }
}

/* ---- skip, then return ----------------------------------------------------
   3 devices: device 1's call #0 is held 50 ms, device 2's call #1 skipped,
   after which device 2 returns from its function at once (under both
   schedulers: nothing holds it here). The delayed call still joins: every
   device's sum is 1 + 2 + 3 = 6, device 1's own included, and device 1
   spent at least 50 ms in it. The skipped call returns SPMD_OK, its output
   untouched; its peers find device 2 returned without calling theirs
   (SPMD_ERR_DEADLOCK, or SPMD_ERR_BROKEN once the other broke the mesh),
   long before the 30 s deadline. Then the mesh's report has device 2 at op
   #0 of the group, not arrived at #1 (a skip takes no place in the group's
   sequence), and device 2's own records show its call #1 as skipped. */
static void skip_returns(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    float x = (float)(id + 1), y = -1;
    spmd_status s;
    double t0 = now_s();
    (void)arg;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL); /* device 1: held 50 ms */
    keep(d, 0, s, y);
    if (id == 1) keep(d, 2, SPMD_OK, now_s() - t0);
    y = -1;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL); /* device 2: skipped; then it returns */
    keep(d, 1, s, y);
}

static void test_skip_returns(void) {
    spmd_status st, rs, ms;
    char rep[8192];
    double took;
    spmd_mesh *m = mesh_n(3, 30000, "device=2,seq=1,kind=skip;device=1,seq=0,kind=delay:50", 0, &st);
    T_CHECK(st == SPMD_OK && m, "[%s] skip, return: mesh %s", sched_name(), spmd_status_name(st));
    if (!m) return;
    clear_seen();
    took = now_s();
    rs = spmd_run(m, skip_returns, NULL);
    took = now_s() - took;
    ms = spmd_mesh_status(m);
    T_CHECK(took < 10.0, "[%s] skip, return: ended within 10 s (deadline 30 s): %.1f s", sched_name(), took);
    T_CHECK(rs == SPMD_ERR_DEADLOCK && ms == SPMD_ERR_DEADLOCK, "[%s] skip, return: spmd_run %s, mesh %s",
            sched_name(), spmd_status_name(rs), spmd_status_name(ms));
    for (int i = 0; i < 3; i++)
        T_CHECK(seen.s[i][0] == SPMD_OK && seen.v[i][0] == 6.0, "[%s] skip, return: device %d's call #0 (device 1's "
                "delayed) joined: %s %g", sched_name(), i, spmd_status_name(seen.s[i][0]), seen.v[i][0]);
    T_CHECK(seen.v[1][2] >= 0.05, "[%s] skip, return: device 1 held %.3f s", sched_name(), seen.v[1][2]);
    for (int i = 0; i < 3; i++) {
        if (i == 2)
            T_CHECK(seen.s[2][1] == SPMD_OK && seen.v[2][1] == -1.0,
                    "[%s] skip, return: the skipped call returns SPMD_OK, its output untouched: %s %g", sched_name(),
                    spmd_status_name(seen.s[2][1]), seen.v[2][1]);
        else
            T_CHECK((seen.s[i][1] == SPMD_ERR_DEADLOCK || seen.s[i][1] == SPMD_ERR_BROKEN) &&
                        strstr(seen.msg[i][1], "psum(f32 x 1, eager) over 'i' (operation #1 of this device, #1 of its "
                                               "group) can never complete: device 2 returned from its function without "
                                               "calling it"),
                    "[%s] skip, return: device %d: %s (%s)", sched_name(), i, spmd_status_name(seen.s[i][1]),
                    seen.msg[i][1]);
    }
    spmd_report(m, -1, rep, sizeof rep);
    T_CHECK(strstr(rep, "  device 2: reached op #0 (did not arrive)") != NULL,
            "[%s] skip, return: the report has device 2 not arrived:\n%s", sched_name(), rep);
    spmd_report(m, 2, rep, sizeof rep);
    T_CHECK(strstr(rep, "#1 psum(f32 x 1, eager) over 'i' (op #1 of group [0 1 2], index 2): skipped by the fault "
                        "plan (SPMD_FAULTS)") != NULL,
            "[%s] skip, return: device 2's record of call #1 says skipped:\n%s", sched_name(), rep);
    spmd_mesh_destroy(m);
}

/* ---- kind=skip: a forgotten call ------------------------------------------
   Device 1 skips its call #1 (docs/faults.md, "skip: a forgotten call").
   In a loop of the same psum (x = 100 * call + 1 on every device), its call
   #2 pairs with its peers' #1: they return SPMD_OK with device 1's value of
   call #2 in place of call #1's -- what a forgotten collective gives, and
   nothing in the arguments can tell. When its next call is another one (a
   pmax where the peers' current call is a psum), the peers get
   SPMD_ERR_MISMATCH naming both. */
static void skip_loop(spmd_dev *d, void *arg) {
    int c;
    (void)arg;
    for (c = 0; c < 3; c++) {
        float x = (float)(100 * c + 1), y = -1;
        spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
        keep(d, c, s, y);
        if (s != SPMD_OK) return;
    }
}
static void skip_other(spmd_dev *d, void *arg) {
    float x = 1, y = -1;
    spmd_status s;
    (void)arg;
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL); /* call #0 */
    keep(d, 0, s, y);
    if (s == SPMD_OK) {
        s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL); /* call #1: skipped on device 1 */
        keep(d, 1, s, y);
    }
    if (s == SPMD_OK && spmd_device_id(d) == 1) {
        s = spmd_pmax(d, &x, &y, 1, SPMD_F32, "i", NULL); /* meets its peers' call #1 */
        keep(d, 2, s, y);
    }
}
static void test_skip_pairs(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    int i;
    (void)run_plan(3, "device=1,seq=1,kind=skip", skip_loop, &rs, &ms);
    for (i = 0; i < 3; i++) {
        if (i == 1) {
            T_CHECK(seen.s[1][1] == SPMD_OK && seen.v[1][1] == -1.0f && seen.s[1][2] == SPMD_OK,
                    "[%s] skip in a loop: device 1's call #1 skipped (output untouched), #2 ran: %s %g, %s",
                    sched_name(), spmd_status_name(seen.s[1][1]), seen.v[1][1], spmd_status_name(seen.s[1][2]));
            continue;
        }
        /* call #1: 101 + 101 from the others and device 1's 201 (its call #2) */
        T_CHECK(seen.s[i][0] == SPMD_OK && seen.v[i][0] == 3.0f && seen.s[i][1] == SPMD_OK && seen.v[i][1] == 403.0f,
                "[%s] skip in a loop: device %d's call #1 pairs with device 1's #2 and returns SPMD_OK with its data "
                "(403, not 303): %s %g", sched_name(), i, spmd_status_name(seen.s[i][1]), seen.v[i][1]);
    }
    (void)run_plan(3, "device=1,seq=1,kind=skip", skip_other, &rs, &ms);
    for (i = 0; i < 3; i++) {
        spmd_status s = seen.s[i][i == 1 ? 2 : 1];
        const char *msg = seen.msg[i][i == 1 ? 2 : 1];
        T_CHECK((s == SPMD_ERR_MISMATCH || s == SPMD_ERR_BROKEN) && strstr(msg, "psum") && strstr(msg, "pmax"),
                "[%s] skip, then another call: device %d: %s (%s)", sched_name(), i, spmd_status_name(s), msg);
    }
    T_CHECK(ms == SPMD_ERR_MISMATCH, "[%s] skip, then another call: the mesh %s", sched_name(), spmd_status_name(ms));
}

/* ---- SPMD_CHECK_SITES: a skip between two call sites is a mismatch --------
   Three psums at three places; device 1 skips the second, so its third
   meets its peers' second: the same signature, another call site. With
   sites from the caller's return address every device fails with
   SPMD_ERR_MISMATCH (or BROKEN once another broke the mesh) naming both
   sites; with SPMD_AT the sites are file:line. In a loop (one site) no
   check can tell: the peers get SPMD_OK with the next call's data. A
   program whose devices reach one collective from two places (root and
   others) is a mismatch there too, unless both name one site. */
static int at_lines[NDEV][3], use_at; /* each device's own (no race) */
static void sites_three(spmd_dev *d, void *arg) {
    float x = 1, y = -1;
    spmd_status s;
    (void)arg;
    if (use_at) spmd_set_site(d, __FILE__, at_lines[spmd_device_id(d)][0] = __LINE__);
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    keep(d, 0, s, y);
    if (s != SPMD_OK) return;
    y = -1;
    if (use_at) spmd_set_site(d, __FILE__, at_lines[spmd_device_id(d)][1] = __LINE__);
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL); /* skipped on device 1 */
    keep(d, 1, s, y);
    if (s != SPMD_OK) return;
    y = -1;
    if (use_at) spmd_set_site(d, __FILE__, at_lines[spmd_device_id(d)][2] = __LINE__);
    s = spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    keep(d, 2, s, y);
}
/* the root's call and the others' at two places (functions kept apart) */
static __attribute__((noinline)) spmd_status bcast_root(spmd_dev *d, float *x, float *y) {
    *y = -1;
    return spmd_bcast(d, x, y, 1, SPMD_F32, 0, "i", NULL);
}
static __attribute__((noinline)) spmd_status bcast_other(spmd_dev *d, float *y) {
    float unused = 0;
    *y = -1;
    return spmd_bcast(d, &unused, y, 1, SPMD_F32, 0, "i", NULL);
}
static void sites_branch(spmd_dev *d, void *arg) {
    float x = (float)(spmd_device_id(d) + 7), y = -1;
    spmd_status s;
    if (arg) spmd_set_site(d, "the config bcast", 1);
    s = spmd_device_id(d) == 0 ? bcast_root(d, &x, &y) : bcast_other(d, &y);
    keep(d, 0, s, y);
}
/* msg names two distinct sites "<prog>+0x..." (not the same one twice). */
static int names_two_sites(const char *msg) {
    char x[64] = "", y[64] = "";
    const char *a = strstr(msg, "call sites: device ");
    if (!a || sscanf(a, "call sites: device %*d at %63[^,], device %*d at %63[^)]", x, y) != 2) return 0;
    return strstr(x, "+0x") && strstr(y, "+0x") && strcmp(x, y) != 0;
}
static void test_skip_sites(void) {
    spmd_status rs = SPMD_OK, ms = SPMD_OK;
    char want[2][96];
    int i, pass;
    plan_check = SPMD_CHECK_SITES;
    for (pass = 0; pass < 2; pass++) {
        use_at = pass;
        (void)run_plan(3, "device=1,seq=1,kind=skip", sites_three, &rs, &ms);
        snprintf(want[0], sizeof want[0], "test_faults.c:%d", at_lines[0][1]);
        snprintf(want[1], sizeof want[1], "test_faults.c:%d", at_lines[1][2]);
        for (i = 0; i < 3; i++) {
            int c = i == 1 ? 2 : 1;
            const char *msg = seen.msg[i][c];
            T_CHECK((seen.s[i][c] == SPMD_ERR_MISMATCH || seen.s[i][c] == SPMD_ERR_BROKEN) && seen.v[i][c] == -1.0f &&
                        (pass ? strstr(msg, want[0]) && strstr(msg, want[1]) : names_two_sites(msg)),
                    "[%s] sites (%s): a skip between two sites: device %d's call #%d: %s (%s)", sched_name(),
                    pass ? "SPMD_AT" : "return addresses", i, c, spmd_status_name(seen.s[i][c]), msg);
        }
        T_CHECK(rs == SPMD_ERR_MISMATCH && ms == SPMD_ERR_MISMATCH, "[%s] sites: the run %s, the mesh %s",
                sched_name(), spmd_status_name(rs), spmd_status_name(ms));
    }
    (void)run_plan(3, "device=1,seq=1,kind=skip", skip_loop, &rs, &ms);
    T_CHECK(seen.s[0][1] == SPMD_OK && seen.v[0][1] == 403.0f,
            "[%s] sites: a skip inside a loop (one site) is not caught: device 0's call #1 %s %g (403: device 1's "
            "call #2)", sched_name(), spmd_status_name(seen.s[0][1]), seen.v[0][1]);
    (void)run_plan(3, "", sites_branch, &rs, &ms);
    for (i = 0; i < 3; i++)
        T_CHECK((seen.s[i][0] == SPMD_ERR_MISMATCH || seen.s[i][0] == SPMD_ERR_BROKEN) && seen.v[i][0] == -1.0f,
                "[%s] sites: one bcast reached from two places: device %d %s (%s)", sched_name(), i,
                spmd_status_name(seen.s[i][0]), seen.msg[i][0]);
    for (pass = 0; pass < 2; pass++) { /* one site named on both paths; or check mode without sites */
        spmd_mesh *m = mesh_n(3, 30000, "", pass ? SPMD_CHECK_ON : SPMD_CHECK_SITES, &rs);
        clear_seen();
        rs = m ? spmd_run(m, sites_branch, pass ? NULL : (void *)1) : rs;
        if (m) spmd_mesh_destroy(m);
        for (i = 0; i < 3; i++)
            T_CHECK(seen.s[i][0] == SPMD_OK && seen.v[i][0] == 7.0f, "[%s] sites: the bcast from two places %s: "
                    "device %d %s %g", sched_name(), pass ? "in check mode without sites" : "named as one site", i,
                    spmd_status_name(seen.s[i][0]), seen.v[i][0]);
        T_CHECK(rs == SPMD_OK, "[%s] sites: its run %s", sched_name(), spmd_status_name(rs));
    }
    plan_check = 0;
}

/* ---- kind=exit: the whole process ends ----------------------------------- */
/* In a child process: device 1's call #1 exits the process with status 3,
   after stdio is flushed (this device's line for call #0 is in the file). */
static void exit_dev(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    float x = 1, y = 0;
    (void)arg;
    spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    printf("device %d: call #0 gave %g\n", id, (double)y);
    spmd_psum(d, &x, &y, 1, SPMD_F32, "i", NULL);
    printf("device %d: call #1 returned\n", id);
}

static char file_text[8192];
static const char *read_text(const char *path) {
    FILE *f = fopen(path, "r");
    size_t n = 0;
    file_text[0] = 0;
    if (f) {
        n = fread(file_text, 1, sizeof file_text - 1, f);
        fclose(f);
    }
    file_text[n] = 0;
    return file_text;
}

static void test_exit(void) {
    char out[128], err[128];
    double t0 = now_s();
    int st = 0, done = 0;
    pid_t pid;
    mkdir("build", 0755);
    mkdir("build/test-logs", 0755);
    snprintf(out, sizeof out, "build/test-logs/faults-exit-%s.out", sched_name());
    snprintf(err, sizeof err, "build/test-logs/faults-exit-%s.err", sched_name());
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        static const char *names[1] = {"i"};
        spmd_mesh_desc desc;
        spmd_mesh *m = NULL;
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(120);
        dup2(fo, 1);
        dup2(fe, 2);
        memset(&desc, 0, sizeof desc);
        desc.ndim = 1;
        desc.shape[0] = 3;
        desc.axis_names[0] = names[0];
        desc.timeout_ms = 30000;
        desc.scheduler = sched;
        desc.faults = "device=1,seq=1,kind=exit";
        if (spmd_mesh_create(&desc, &m) != SPMD_OK) _exit(121);
        spmd_run(m, exit_dev, NULL);
        printf("spmd_run returned\n");
        fflush(stdout);
        _exit(0);
    }
    T_CHECK(pid > 0, "fork");
    if (pid <= 0) return;
    while (now_s() - t0 < 20 && !done) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) done = 1;
        else { /* polling the child's end, not synchronising with it */
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
        }
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    T_CHECK(done && now_s() - t0 < 20, "[%s] exit: the child ended within 20 s (deadline 30 s)", sched_name());
    T_CHECK(done && WIFEXITED(st) && WEXITSTATUS(st) == 3, "[%s] exit: status %d (want exit status 3), signal %d",
            sched_name(), WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    read_text(out);
    T_CHECK(strstr(file_text, "device 1: call #0 gave 3\n") && !strstr(file_text, "call #1 returned") &&
                !strstr(file_text, "spmd_run returned"),
            "[%s] exit: stdout flushed up to the exit, nothing after it: %s", sched_name(), file_text);
    read_text(err);
    T_CHECK(strstr(file_text, "[spmd 1/3] error: SPMD_FAULTS: psum(f32 x 1) over 'i' (call #1 of this device): "
                              "kind=exit: the process exits with status 3") != NULL,
            "[%s] exit: the log says so: %s", sched_name(), file_text);
}

/* ---- kind=corrupt: one byte of a contribution flips ---------------------- */
/* The value device k contributes at element j of call c, and that value with
   its first byte (in memory) flipped, as the plan does to the contribution
   of (device, call) = (1, 0), (2, 1), (2, 2), (3, 3) and (0, 4) below. */
#define BIG 70000 /* int32 elements: past the eager slot (the split path) */
static int32_t cval(int k, int c, int64_t j) { return (int32_t)(k * 1000 + c * 100 + (j % 97)); }
static int32_t flip0(int32_t v) {
    unsigned char b[sizeof v];
    memcpy(b, &v, sizeof v);
    b[0] ^= 0xffu;
    memcpy(&v, b, sizeof v);
    return v;
}
static int corrupted(int k, int c) {
    return (k == 1 && c == 0) || (k == 2 && (c == 1 || c == 2)) || (k == 3 && c == 3) || (k == 0 && c == 4);
}
static int32_t seen_as(int k, int c, int64_t j) { return j == 0 && corrupted(k, c) ? flip0(cval(k, c, j)) : cval(k, c, j); }

static int corrupt_bad[NDEV][6]; /* per device and call: elements wrong (-1: the status) */
static int corrupt_own[NDEV][6]; /* the device's own input changed by the call */

static void corrupt_dev(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d), c;
    int64_t j, n;
    int32_t *x = (int32_t *)malloc(BIG * sizeof(int32_t)), *y = (int32_t *)malloc(BIG * NDEV * sizeof(int32_t));
    (void)arg;
    if (!x || !y) { free(x); free(y); return; }
    for (c = 0; c < 6; c++) {
        spmd_status s = SPMD_OK;
        int bad = 0, own = 0;
        n = c == 1 || c == 2 ? BIG : 5;
        for (j = 0; j < n; j++) x[j] = cval(id, c, j);
        if (c == 0 || c == 5) { /* psum; call #5: nothing planned, all right again */
            s = spmd_psum(d, x, y, (size_t)n, SPMD_I32, "i", NULL);
            for (j = 0; j < n; j++) {
                int32_t want = 0;
                for (int k = 0; k < NDEV; k++) want += seen_as(k, c, j);
                bad += y[j] != want;
            }
        } else if (c == 1) { /* psum, split path */
            s = spmd_psum(d, x, y, (size_t)n, SPMD_I32, "i", NULL);
            for (j = 0; j < n; j++) {
                int32_t want = 0;
                for (int k = 0; k < NDEV; k++) want += seen_as(k, c, j);
                bad += y[j] != want;
            }
        } else if (c == 2) { /* all_to_all in place, split path: the corrupted copy is what is read */
            spmd_array a = spmd_array_1d(x, SPMD_I32, n);
            int64_t C = n / NDEV;
            s = spmd_all_to_all(d, &a, &a, "i", 0, 0, 1, NULL);
            for (int k = 0; k < NDEV; k++)
                for (j = 0; j < C; j++) bad += x[k * C + j] != seen_as(k, c, id * C + j);
        } else if (c == 3) { /* all_gather of 5 elements: device 3's block */
            spmd_array a = spmd_array_1d(x, SPMD_I32, n), o = spmd_array_1d(y, SPMD_I32, n * NDEV);
            s = spmd_all_gather(d, &a, &o, "i", 0, 1, NULL);
            for (int k = 0; k < NDEV; k++)
                for (j = 0; j < n; j++) bad += y[k * n + j] != seen_as(k, c, j);
        } else if (c == 4) { /* send 0 -> 1, 1 -> 2, ...: device 0's message */
            int to = (id + 1) % NDEV, from = (id + NDEV - 1) % NDEV;
            s = spmd_sendrecv(d, x, n, to, 3, y, n, from, 3, SPMD_I32, "i", NULL, NULL);
            for (j = 0; j < n; j++) bad += y[j] != seen_as(from, c, j);
        }
        if (c != 2)
            for (j = 0; j < n; j++) own += x[j] != cval(id, c, j);
        corrupt_bad[id][c] = s == SPMD_OK ? bad : -1;
        corrupt_own[id][c] = own;
    }
    free(x);
    free(y);
}

static void test_corrupt(void) {
    spmd_status st;
    spmd_mesh *m = mesh_n(NDEV, 30000,
                          "device=1,seq=0,kind=corrupt;device=2,seq=1,kind=corrupt;device=2,seq=2,kind=corrupt;"
                          "device=3,seq=3,kind=corrupt;device=0,seq=4,kind=corrupt",
                          0, &st);
    T_CHECK(st == SPMD_OK && m, "[%s] corrupt: mesh %s", sched_name(), spmd_status_name(st));
    if (!m) return;
    memset(corrupt_bad, 0x7f, sizeof corrupt_bad);
    st = spmd_run(m, corrupt_dev, NULL);
    T_CHECK(st == SPMD_OK, "[%s] corrupt: not detected without check mode: spmd_run %s", sched_name(),
            spmd_status_name(st));
    for (int i = 0; i < NDEV; i++)
        for (int c = 0; c < 6; c++) {
            T_CHECK(corrupt_bad[i][c] == 0, "[%s] corrupt: device %d call #%d: %d elements differ from the result "
                    "with the flipped byte (-1: failed)", sched_name(), i, c, corrupt_bad[i][c]);
            T_CHECK(corrupt_own[i][c] == 0, "[%s] corrupt: device %d call #%d: its own send buffer changed",
                    sched_name(), i, c);
        }
    spmd_mesh_destroy(m);
}

/* Check mode: the corrupted contribution fails its checksum on every member.
   arg: the element count (5: eager; BIG: split); the plan corrupts device
   1's call #1 (call #0 is a clean psum, in place for the split path: no
   false alarm while outputs overwrite inputs). */
static int64_t ck_count;
static void corrupt_check_dev(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    int64_t j, n = ck_count;
    int32_t *x = (int32_t *)malloc((size_t)n * sizeof(int32_t)), *y = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    spmd_status s;
    int bad = 0;
    (void)arg;
    if (!x || !y) { free(x); free(y); return; }
    for (j = 0; j < n; j++) x[j] = cval(id, 0, j);
    s = spmd_psum(d, x, x, (size_t)n, SPMD_I32, "i", NULL);
    for (j = 0; j < n; j++) {
        int32_t want = 0;
        for (int k = 0; k < NDEV; k++) want += cval(k, 0, j);
        bad += x[j] != want;
    }
    keep(d, 0, s == SPMD_OK && bad ? SPMD_ERR_STATE : s, bad);
    for (j = 0; j < n; j++) x[j] = cval(id, 1, j);
    s = spmd_psum(d, x, y, (size_t)n, SPMD_I32, "i", NULL);
    keep(d, 1, s, 0);
    free(x);
    free(y);
}

static void test_corrupt_check(int64_t n) {
    spmd_status st, rs;
    spmd_mesh *m = mesh_n(NDEV, 30000, "device=1,seq=1,kind=corrupt", SPMD_CHECK_ON, &st);
    char want[160];
    T_CHECK(st == SPMD_OK && m, "[%s] corrupt, check mode: mesh %s", sched_name(), spmd_status_name(st));
    if (!m) return;
    clear_seen();
    ck_count = n;
    rs = spmd_run(m, corrupt_check_dev, NULL);
    T_CHECK(rs == SPMD_ERR_MISMATCH, "[%s] corrupt, check mode, %lld elements: spmd_run %s", sched_name(),
            (long long)n, spmd_status_name(rs));
    snprintf(want, sizeof want, "device 1's contribution to psum(i32 x %lld, %s) over 'i' (operation #1) fails its "
             "checksum (check mode)", (long long)n, n == BIG ? "split" : "eager");
    for (int i = 0; i < NDEV; i++) {
        T_CHECK(seen.s[i][0] == SPMD_OK, "[%s] corrupt, check mode, %lld elements: device %d's clean psum in place: %s "
                "(%s)", sched_name(), (long long)n, i, spmd_status_name(seen.s[i][0]), seen.msg[i][0]);
        T_CHECK((seen.s[i][1] == SPMD_ERR_MISMATCH || seen.s[i][1] == SPMD_ERR_BROKEN) && strstr(seen.msg[i][1], want),
                "[%s] corrupt, check mode, %lld elements: device %d: %s (%s)", sched_name(), (long long)n, i,
                spmd_status_name(seen.s[i][1]), seen.msg[i][1]);
    }
    spmd_mesh_destroy(m);
}

/* ---- a plan in any order ---------------------------------------------------
   The faults listed out of order, the fields of each in any order, two for
   one device with the later call first: device 2's calls #0 and #2 and
   device 0's call #1 are corrupted, nothing else. Three psums of 5 int32 on
   NDEV devices: every member's result is the sum of cval over the devices
   with the first element of exactly those three contributions flipped
   (order_hit, written out from the plan). */
static const char order_plan[] = "seq=2,kind=corrupt,device=2;kind=corrupt,device=0,seq=1;device=2,seq=0,kind=corrupt";
static int order_hit(int k, int c) { return (k == 2 && (c == 0 || c == 2)) || (k == 0 && c == 1); }
static int order_bad[NDEV][3]; /* per device and call: elements wrong (-1: the status) */

static void order_dev(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    (void)arg;
    for (int c = 0; c < 3; c++) {
        int32_t x[5], y[5];
        int bad = 0;
        spmd_status s;
        for (int j = 0; j < 5; j++) x[j] = cval(id, c, j);
        s = spmd_psum(d, x, y, 5, SPMD_I32, "i", NULL);
        for (int j = 0; j < 5; j++) {
            int32_t want = 0;
            for (int k = 0; k < NDEV; k++) want += j == 0 && order_hit(k, c) ? flip0(cval(k, c, j)) : cval(k, c, j);
            bad += y[j] != want;
        }
        order_bad[id][c] = s == SPMD_OK ? bad : -1;
    }
}

static void test_plan_order(void) {
    spmd_status st;
    spmd_mesh *m = mesh_n(NDEV, 30000, order_plan, 0, &st);
    T_CHECK(st == SPMD_OK && m, "[%s] plan in any order: mesh %s", sched_name(), spmd_status_name(st));
    if (!m) return;
    memset(order_bad, 0x7f, sizeof order_bad);
    st = spmd_run(m, order_dev, NULL);
    T_CHECK(st == SPMD_OK, "[%s] plan in any order: spmd_run %s", sched_name(), spmd_status_name(st));
    for (int i = 0; i < NDEV; i++)
        for (int c = 0; c < 3; c++)
            T_CHECK(order_bad[i][c] == 0, "[%s] plan in any order: device %d call #%d: %d elements differ from the "
                    "sum with device 2's #0 and #2 and device 0's #1 flipped (-1: failed)", sched_name(), i, c,
                    order_bad[i][c]);
    spmd_mesh_destroy(m);
}

/* ---- the plan's grammar ------------------------------------------------------
   Plans given to a mesh of NDEV (4) devices, each with what spmd_mesh_create
   must do, written out from the grammar (docs/faults.md, "The plan"):
   accept it (says NULL: a mesh, nothing logged about the plan), or fail
   with SPMD_ERR_INVALID, no mesh, and an error line that says `says`. */
static const struct { const char *spec, *says; } plans[] = {
    /* a kind that is not one; only delay takes an argument */
    {"device=1,seq=2,kind=lost", "desc.faults: bad token 'kind=lost'"},
    {"device=1,seq=2,kind=LOSE", "desc.faults: bad token 'kind=LOSE'"},
    {"device=1,seq=2,kind=lose:5", "desc.faults: bad token 'kind=lose:5'"},
    {"device=0,seq=0,kind=exit:3", "desc.faults: bad token 'kind=exit:3'"},
    {"device=0,seq=0,kind=corrupt:1", "desc.faults: bad token 'kind=corrupt:1'"},
    /* across processes only: the thread backend refuses them */
    {"device=0,seq=0,kind=lose:posted", "desc.faults: bad token 'kind=lose:posted'"},
    {"device=3,seq=1,kind=lose:done", "desc.faults: bad token 'kind=lose:done'"},
    {"device=3,seq=1,kind=lose:step:1", "desc.faults: bad token 'kind=lose:step:1'"},
    /* delay:MS, MS a whole number of ms in 0..3600000 */
    {"device=0,seq=1,kind=delay:", "desc.faults: bad token 'kind=delay:'"},
    {"device=0,seq=1,kind=delay:5ms", "desc.faults: bad token 'kind=delay:5ms'"},
    {"device=0,seq=1,kind=delay:-5", "desc.faults: bad token 'kind=delay:-5'"},
    {"device=0,seq=1,kind=delay:3600001", "desc.faults: bad token 'kind=delay:3600001'"},
    /* device: 0..3, a plain decimal number */
    {"device=4,seq=2,kind=lose", "desc.faults: bad token 'device=4'"},
    {"device=-1,seq=0,kind=skip", "desc.faults: bad token 'device=-1'"},
    {"device=+1,seq=0,kind=skip", "desc.faults: bad token 'device=+1'"},
    {"device=1.0,seq=0,kind=skip", "desc.faults: bad token 'device=1.0'"},
    {"device=,seq=0,kind=skip", "desc.faults: bad token 'device='"},
    {"device=0,seq=0,kind=skip;device=9,seq=0,kind=skip", "desc.faults: bad token 'device=9'"}, /* not the first */
    /* seq: a non-negative integer */
    {"device=1,seq=-1,kind=lose", "desc.faults: bad token 'seq=-1'"},
    {"device=0,seq=x,kind=skip", "desc.faults: bad token 'seq=x'"},
    /* fields: device, seq and kind, each as key=value */
    {"device=0,seq=1,colour=red,kind=skip", "desc.faults: bad token 'colour=red'"},
    {"device=0,seq=0,kind=skip,kind", "desc.faults: bad token 'kind'"},
    {"device=0,seq=1", "desc.faults: 'device=0,seq=1' needs device=, seq= and kind="},
    {"seq=1,kind=skip", "desc.faults: 'seq=1,kind=skip' needs device=, seq= and kind="},
    /* at most one fault per (device, seq): the second one is named, wherever it is */
    {"device=1,seq=4,kind=skip;device=1,seq=4,kind=delay:3",
     "desc.faults: 'device=1,seq=4,kind=delay:3': a second fault for device 1, seq 4"},
    {"device=2,seq=7,kind=corrupt;device=2,seq=7,kind=corrupt",
     "desc.faults: 'device=2,seq=7,kind=corrupt': a second fault for device 2, seq 7"},
    {"device=3,seq=9,kind=skip;device=0,seq=1,kind=exit;seq=9,device=3,kind=lose",
     "desc.faults: 'seq=9,device=3,kind=lose': a second fault for device 3, seq 9"},
    /* accepted: every kind of the thread backend (delay:0 the shortest), the
       fields in another order (delay:3600000 the longest), one device at two
       calls and one call number on two devices, a leading zero */
    {"device=0,seq=0,kind=skip;device=1,seq=0,kind=lose;device=2,seq=0,kind=exit;device=3,seq=0,kind=corrupt;"
     "device=0,seq=1,kind=delay:0", NULL},
    {"seq=3,kind=delay:3600000,device=3", NULL},
    {"device=1,seq=4,kind=skip;device=1,seq=5,kind=skip;device=2,seq=4,kind=skip", NULL},
    {"device=03,seq=10,kind=lose", NULL},
};

static void test_parse(void) {
    spmd_status st;
    spmd_mesh *m;
    for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
        log_clear();
        m = mesh_n(NDEV, 1000, plans[k].spec, 0, &st);
        if (plans[k].says)
            T_CHECK(st == SPMD_ERR_INVALID && m == NULL, "'%s': %s (want SPMD_ERR_INVALID, no mesh)", plans[k].spec,
                    spmd_status_name(st));
        else
            T_CHECK(st == SPMD_OK && m != NULL, "'%s': %s (want a mesh)", plans[k].spec, spmd_status_name(st));
        if (m) spmd_mesh_destroy(m);
        pthread_mutex_lock(&log_lock);
        if (plans[k].says)
            T_CHECK(strstr(log_text, plans[k].says) != NULL, "'%s': the log says \"%s\": %s", plans[k].spec,
                    plans[k].says, log_text);
        else
            T_CHECK(strstr(log_text, "faults") == NULL, "'%s': nothing logged about the plan: %s", plans[k].spec,
                    log_text);
        pthread_mutex_unlock(&log_lock);
    }
    /* SPMD_FAULTS wins over desc.faults: a bad one fails the mesh (the whole
       line as docs/faults.md quotes it); a good one is taken without reading
       the desc; set but empty, it is not there */
    setenv("SPMD_FAULTS", "device=0,seq=0,kind=explode", 1);
    log_clear();
    m = mesh_n(NDEV, 1000, "device=0,seq=0,kind=skip", 0, &st);
    T_CHECK(st == SPMD_ERR_INVALID && !m &&
                strstr(log_text, "SPMD_FAULTS: bad token 'kind=explode' (want device=0..3, seq=N, kind=skip, lose, "
                                 "exit, corrupt or delay:MS; across processes also lose:posted, lose:done or lose:step:K)"),
            "env: a bad SPMD_FAULTS wins over a good desc.faults: %s, %s", spmd_status_name(st), log_text);
    if (m) spmd_mesh_destroy(m);
    setenv("SPMD_FAULTS", "device=0,seq=0,kind=skip", 1);
    log_clear();
    m = mesh_n(NDEV, 1000, "device=0,seq=0,kind=explode", 0, &st);
    T_CHECK(st == SPMD_OK && m && !strstr(log_text, "faults"),
            "env: a good SPMD_FAULTS wins over a bad desc.faults: %s, %s", spmd_status_name(st), log_text);
    if (m) spmd_mesh_destroy(m);
    setenv("SPMD_FAULTS", "", 1);
    log_clear();
    m = mesh_n(NDEV, 1000, "device=0,seq=0,kind=explode", 0, &st);
    T_CHECK(st == SPMD_ERR_INVALID && !m && strstr(log_text, "desc.faults: bad token 'kind=explode'"),
            "env: SPMD_FAULTS empty, desc.faults is read: %s, %s", spmd_status_name(st), log_text);
    if (m) spmd_mesh_destroy(m);
    unsetenv("SPMD_FAULTS");
}

int main(void) {
    unsetenv("SPMD_FAULTS");
    unsetenv("SPMD_TRACE");
    test_parse();
    for (int k = 0; k < 2; k++) {
        sched = k ? SPMD_SCHEDULER_FIBERS : SPMD_SCHEDULER_THREADS;
        test_lose_coll();
        test_lose_async();
        test_lose_p2p();
        test_delay_skip();
        test_skip_returns();
        test_skip_pairs();
        test_skip_sites();
        test_exit();
        test_corrupt();
        test_corrupt_check(5);
        test_corrupt_check(BIG);
        test_plan_order();
    }
    return t_summary();
}
