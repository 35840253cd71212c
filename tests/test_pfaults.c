/* test_pfaults.c - the fault plan (SPMD_FAULTS) on the libfabric backend:
   every process parses the same plan, device ids are global, each process
   applies the faults of its own devices. Jobs started here as copies of this
   program (--child MODE), over tcp and shm:

     lose    device 2 (3 processes of one device; over shm 2 processes of two
             devices, device 3) is lost at its call #1: its process ends with
             status 4, after logging it; every device of the other processes
             gets SPMD_ERR_PEER_LOST naming that process as lost and the psum
             (or SPMD_ERR_BROKEN naming them, for a call begun after a sibling
             broke the mesh) within 10 s, in call #1, or already in call #0
             when the process vanished before the transport delivered what it
             sent for it; else call #0 gave the right sum;
     loseposted, losedone  the same with the kill later in call #0
             (kind=lose:posted, lose:done): call #0 right or failing so,
             call #1 failing so;
     losestep1, losestep2  4 processes of two devices as 2 hosts of 2
             (SPMD_HOST): the psum's plan (recursive doubling over the
             processes) loses process 3 before its step 1 (inside the host)
             or step 2 (across hosts) (kind=lose:step:K on both its
             devices): checked as lose;
     loseaside  4 processes of one device, psums over the groups {0, 1}
             and {2, 3}, device 3 lost at its call #0: devices 0 and 1,
             which never wait on it, still fail a psum naming the loss
             (their mesh breaks once they know of it);
     exit    the same with kind=exit: status 3;
     delay   2 processes of two devices, device 3 delayed 300 ms at its call
             #0: every psum right, device 3's call took >= 300 ms;
     skip    2 processes of one device, device 1 skips its call #1 (deadline
             1500 ms): it returns SPMD_OK with its output untouched, device 0
             gets SPMD_ERR_TIMEOUT naming the psum and device 1 as not heard
             from, within 6 s (process 1 stays until process 0 is done: it
             waits for process 0's marker file);
     skipsites  the same in check mode with sites (SPMD_CHECK_SITES), the
             three psums at three places: device 1's third meets device 0's
             second: SPMD_ERR_MISMATCH on both, naming both call sites;
     corrupt 2 processes of two devices, device 3's call #1 with the first
             byte of its input flipped (not its buffer): every device's psum
             is the sum with that byte flipped, SPMD_OK (not detected);
             corruptck: the same in check mode (the data of a group that
             spans processes is not checked: the same outcome);
             corruptlocal: check mode, a (2, 2) mesh, the psums over "y"
             (each process's two devices): devices 2 and 3 get
             SPMD_ERR_MISMATCH (or BROKEN) naming device 3's contribution and
             its failed checksum; process 0's psums are right, or, once the
             break is announced to it, SPMD_ERR_MISMATCH (abandoned) or
             SPMD_ERR_BROKEN (begun after) naming it;
     bad     a plan naming device 4 of 4, or kind=explode: spmd_mesh_create
             fails with SPMD_ERR_INVALID in every process, its message naming
             the token, before any connection (at once).

   lose, delay and corrupt run once more with SPMD_SCHEDULER=fibers.

   Each child checks its own devices and prints one line per device, then
   checks spmd_run's status (the same in every process: SPMD_ERR_PEER_LOST
   for lose and exit, with the same reason, "process N lost (...)", SPMD_ERR_TIMEOUT for skip, SPMD_ERR_MISMATCH for
   corruptlocal, else SPMD_OK); the parent checks the exit codes, the
   times and the lines. */
#define _GNU_SOURCE 1 /* usleep, setenv, kill */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#ifndef SPMDCOLL_LIBFABRIC
#define SPMDCOLL_LIBFABRIC
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "proclib.h"
#include "testlib.h"
#include <dirent.h>
#include <sys/stat.h>

#define NV 4 /* floats per psum */

typedef struct child {
    const char *mode;
    const char *ax;           /* the axis of the psums: "i", or "y" (corruptlocal: groups {0,1} and {2,3}) */
    int proc, nprocs;
    spmd_status st[8][2];
    char msg[8][2][512];
    int32_t y[8][2][NV];
    double took[8][2];
} child;

/* testlib.h's log keeper, each line also on stderr (the job's log) */
static void log_echo(void *user, spmd_log_level level, int device, const char *msg) {
    log_keep(user, level, device, msg);
    fprintf(stderr, "log: %s\n", msg);
}

/* until XF_DIR/done.0 exists (at most 30 s): a condition, not a sleep */
static void wait_marker(void) {
    const char *dir = getenv("XF_DIR");
    char path[400];
    double end = p_now() + 30;
    snprintf(path, sizeof path, "%s/done.0", dir ? dir : ".");
    while (access(path, F_OK) != 0 && p_now() < end) usleep(5000);
}

static void put_marker(void) {
    const char *dir = getenv("XF_DIR");
    char path[400];
    FILE *f;
    snprintf(path, sizeof path, "%s/done.0", dir ? dir : ".");
    if ((f = fopen(path, "w")) != NULL) fclose(f);
}

static void dev_main(spmd_dev *d, void *arg) {
    child *c = (child *)arg;
    int id = spmd_device_id(d), k, j;
    int32_t x[NV];
    for (j = 0; j < NV; j++) x[j] = id * 10 + j;
    for (k = 0; k < 2; k++) {
        spmd_opts o;
        double t0 = p_now();
        memset(&o, 0, sizeof o);
        o.timeout_ms = strcmp(c->mode, "skip") == 0 ? 1500 : 30000;
        for (j = 0; j < NV; j++) c->y[id][k][j] = -1;
        c->st[id][k] = spmd_psum(d, x, c->y[id][k], NV, SPMD_I32, c->ax, &o);
        for (j = 0; j < NV; j++)
            if (x[j] != id * 10 + j) c->st[id][k] = SPMD_ERR_STATE; /* the input must stay as it was */
        c->took[id][k] = p_now() - t0;
        snprintf(c->msg[id][k], sizeof c->msg[id][k], "%s",
                 c->st[id][k] == SPMD_OK ? "" : c->st[id][k] == SPMD_ERR_STATE ? "input changed" : spmd_last_error(d));
        if (c->st[id][k] != SPMD_OK) break;
    }
    /* process 0's call has ended: process 1 may end its function (spmd_run then waits for process 0's run to
       end: the agreement at its end), not before, or process 0 would find it lost, not late */
    if (strcmp(c->mode, "skip") == 0 && c->proc == 0) put_marker();
    if (strcmp(c->mode, "skip") == 0 && c->proc == 1) wait_marker();
}

/* skipsites: three psums at three places, in a row; device 1 skips the
   second (the fault plan), so its third meets device 0's second: slot 1
   holds that call on both. */
static void dev_sites(spmd_dev *d, void *arg) {
    child *c = (child *)arg;
    int id = spmd_device_id(d), j, k;
    int32_t x[NV], y[3][NV];
    spmd_status st[3];
    for (j = 0; j < NV; j++) x[j] = id * 10 + j, y[0][j] = y[1][j] = y[2][j] = -1;
    st[0] = spmd_psum(d, x, y[0], NV, SPMD_I32, c->ax, NULL);
    st[1] = st[0] ? st[0] : spmd_psum(d, x, y[1], NV, SPMD_I32, c->ax, NULL);
    st[2] = st[1] ? st[1] : spmd_psum(d, x, y[2], NV, SPMD_I32, c->ax, NULL);
    for (k = 0; k < 2; k++) { /* slot 1: device 0's second call, device 1's third */
        int from = k == 1 && id == 1 ? 2 : k;
        c->st[id][k] = st[from];
        memcpy(c->y[id][k], y[from], sizeof y[from]);
        snprintf(c->msg[id][k], sizeof c->msg[id][k], "%s", st[from] ? spmd_last_error(d) : "");
    }
    if (id == 1 && (st[1] != SPMD_OK || y[1][0] != -1)) c->st[1][0] = SPMD_ERR_STATE; /* the skipped call */
}

/* loseaside: 4 processes of one device, groups {0, 1} and {2, 3}; device 3
   is lost at its call #0. Each survivor repeats its psum over its group
   until one fails (at most 20 s): 0 and 1 never wait on the lost process,
   yet their mesh breaks once they know of the loss, so a call fails naming
   it. Slot 0: the last psum that succeeded (or -1), slot 1: the failure. */
static void dev_aside(spmd_dev *d, void *arg) {
    child *c = (child *)arg;
    static const int groups[4] = {0, 1, 2, 3};
    int id = spmd_device_id(d), j;
    int32_t x[NV], y[NV];
    spmd_opts o;
    double t0 = p_now();
    spmd_status s = SPMD_OK;
    memset(&o, 0, sizeof o);
    o.groups = groups;
    o.group_size = 2;
    for (j = 0; j < NV; j++) x[j] = id * 10 + j, c->y[id][0][j] = -1;
    c->st[id][0] = (spmd_status)-1;
    while (s == SPMD_OK && p_now() - t0 < 20.0) {
        if ((s = spmd_psum(d, x, y, NV, SPMD_I32, "i", &o)) == SPMD_OK) {
            c->st[id][0] = SPMD_OK;
            memcpy(c->y[id][0], y, sizeof y);
        }
    }
    c->st[id][1] = s;
    c->took[id][1] = p_now() - t0;
    snprintf(c->msg[id][1], sizeof c->msg[id][1], "%s", s == SPMD_OK ? "no call failed in 20 s" : spmd_last_error(d));
}

/* The psum's element j over devices lo..lo+n-1, written plainly; flip: the
   device whose first byte of input flipped (kind=corrupt), or -1. */
static int32_t sum_of(int lo, int n, int j, int flip) {
    int32_t s = 0, v;
    int i;
    for (i = lo; i < lo + n; i++) {
        unsigned char b[sizeof v];
        v = i * 10 + j;
        memcpy(b, &v, sizeof v);
        if (i == flip && j == 0) b[0] ^= 0xffu;
        memcpy(&v, b, sizeof v);
        s += v;
    }
    return s;
}

static int child_main(const char *mode) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s, run;
    child c;
    int i, j, bad = 0, n = atoi(getenv("XF_DEVICES") ? getenv("XF_DEVICES") : "0"), victim = n - 1;
    double t0 = p_now();
    memset(&desc, 0, sizeof desc);
    memset(&c, 0, sizeof c);
    (void)0;
    desc.ndim = 1;
    desc.shape[0] = n;
    desc.axis_names[0] = "i";
    c.ax = "i";
    if (strcmp(mode, "corruptlocal") == 0) { /* a (2, 2) mesh: each process's devices form one "y" group */
        desc.ndim = 2;
        desc.shape[0] = 2;
        desc.shape[1] = n / 2;
        desc.axis_names[0] = "x";
        desc.axis_names[1] = "y";
        c.ax = "y";
    }
    desc.log_level = SPMD_LOG_ERROR;
    desc.log_fn = log_echo;
    desc.check = strncmp(mode, "corrupt", 7) == 0 && mode[7]   ? SPMD_CHECK_ON
                 : strcmp(mode, "skipsites") == 0 ? SPMD_CHECK_SITES
                                                  : SPMD_CHECK_DEFAULT;
    s = spmd_mesh_create(&desc, &m);
    if (strcmp(mode, "bad") == 0) {
        printf("mesh_create: %s after %.2f s: %s\n", spmd_status_name(s), p_now() - t0, log_text);
        if (m) spmd_mesh_destroy(m);
        return 0; /* the parent checks what it printed */
    }
    if (s != SPMD_OK) {
        /* a victim lost at its call #0 may die while a slower survivor still
           creates the mesh (the victim's creation ended first): then the
           creation fails naming it, as a call would (seen once in make test,
           loseaside: process 0 in the creation's last allgather) */
        const char *np = getenv("SPMD_NUM_PROCESSES");
        char lost[48];
        int early = strcmp(mode, "loseaside") == 0 || strcmp(mode, "loseposted") == 0 ||
                    strncmp(mode, "losestep", 8) == 0, allowed;
        snprintf(lost, sizeof lost, "process %d lost", (np ? atoi(np) : 1) - 1);
        allowed = early && s == SPMD_ERR_PEER_LOST && strstr(log_text, lost) && p_now() - t0 < 10.0;
        printf("mesh_create: %s: %s%s\n", spmd_status_name(s), log_text, allowed ? " (allowed: the victim died first)" : "");
        return allowed ? 0 : 1;
    }
    c.mode = mode;
    c.proc = spmd_mesh_process_id(m);
    c.nprocs = spmd_mesh_process_count(m);
    if (spmd_mesh_backend(m) != SPMD_BACKEND_LIBFABRIC || c.nprocs < 2) {
        printf("not a libfabric mesh of several processes (%d)\n", c.nprocs);
        return 1;
    }
    if (getenv("SPMD_SCHEDULER") && strcmp(getenv("SPMD_SCHEDULER"), "fibers") == 0 &&
        spmd_mesh_scheduler(m) != SPMD_SCHEDULER_FIBERS) {
        printf("SPMD_SCHEDULER=fibers but the mesh does not use fibers\n");
        return 1;
    }
    run = spmd_run(m, strcmp(mode, "skipsites") == 0 ? dev_sites : strcmp(mode, "loseaside") == 0 ? dev_aside : dev_main,
                   &c);
    for (i = 0; i < n; i++) {
        int ok = 1, local = strcmp(mode, "corruptlocal") == 0, gn = local ? 2 : n, lo = local ? i / 2 * 2 : 0;
        if (!spmd_device_is_local(m, i)) continue;
        printf("device %d: %s, %s after %.2f s: %s\n", i, spmd_status_name(c.st[i][0]), spmd_status_name(c.st[i][1]),
               c.took[i][1], c.msg[i][1]);
        if ((local && c.proc == 0) || strncmp(mode, "lose", 4) == 0 || strcmp(mode, "exit") == 0) { /* (below) */
        } else {
            for (j = 0; j < NV; j++) ok = ok && c.y[i][0][j] == sum_of(lo, gn, j, -1); /* call #0, before any fault */
            if (!ok) printf("device %d: call #0 gave %d, want %d\n", i, (int)c.y[i][0][0], (int)sum_of(lo, gn, 0, -1));
            ok = ok && c.st[i][0] == SPMD_OK;
        }
        if (strcmp(mode, "loseaside") == 0) { /* the last psum right (if any), then a failure naming the loss */
            if (c.st[i][0] == SPMD_OK)
                for (j = 0; j < NV; j++) ok = ok && c.y[i][0][j] == sum_of(i / 2 * 2, 2, j, -1);
            ok = ok && (c.st[i][1] == SPMD_ERR_PEER_LOST || c.st[i][1] == SPMD_ERR_BROKEN) &&
                 strstr(c.msg[i][1], "process 3 lost") != NULL;
        } else if (strncmp(mode, "lose", 4) == 0 || strcmp(mode, "exit") == 0) {
            /* call #1 fails naming the lost process; so may call #0: the process vanished with what it had
               sent for call #0 but the transport had not delivered yet */
            char lost[48];
            int k;
            snprintf(lost, sizeof lost, "process %d lost", c.nprocs - 1);
            for (k = 0; k < 2; k++) {
                if (k == 0 && c.st[i][0] == SPMD_OK) {
                    for (j = 0; j < NV; j++) ok = ok && c.y[i][0][j] == sum_of(lo, gn, j, -1);
                    continue;
                }
                ok = ok && (c.st[i][k] == SPMD_ERR_PEER_LOST || c.st[i][k] == SPMD_ERR_BROKEN) &&
                     strstr(c.msg[i][k], lost) && strstr(c.msg[i][k], "psum(i32 x 4") &&
                     strstr(c.msg[i][k], "over 'i'") && c.took[i][k] < 10.0;
                break;
            }
        } else if (strcmp(mode, "delay") == 0) {
            for (j = 0; j < NV; j++) ok = ok && c.y[i][1][j] == sum_of(lo, gn, j, -1);
            ok = ok && c.st[i][1] == SPMD_OK && (i != victim || c.took[i][0] >= 0.3);
            if (i == victim) printf("device %d: call #0 took %.3f s\n", i, c.took[i][0]);
        } else if (strcmp(mode, "corrupt") == 0 || strcmp(mode, "corruptck") == 0) {
            /* every member, the sibling in its process too: not detected (check mode does not check the
               data of a group that spans processes) */
            for (j = 0; j < NV; j++) ok = ok && c.y[i][1][j] == sum_of(lo, gn, j, victim);
            ok = ok && c.st[i][1] == SPMD_OK;
            printf("device %d: call #1 gave %d (want %d)\n", i, (int)c.y[i][1][0], (int)sum_of(lo, gn, 0, victim));
        } else if (local) { /* check mode, a group inside process 1: found there; process 0's group is clean */
            const char *want = "device 3's contribution to psum(i32 x 4, eager) over 'y' (operation #1) fails its "
                               "checksum (check mode)";
            if (c.proc == 1) {
                ok = ok && (c.st[i][1] == SPMD_ERR_MISMATCH || c.st[i][1] == SPMD_ERR_BROKEN) && strstr(c.msg[i][1], want);
            } else { /* each psum is right, or (begun after process 1's break was announced) names it */
                int k;
                for (k = 0; k < 2; k++) {
                    if (c.st[i][k] != SPMD_OK) {
                        /* abandoned with the break's status, or refused as the mesh is broken */
                        ok = ok && (c.st[i][k] == SPMD_ERR_MISMATCH || c.st[i][k] == SPMD_ERR_BROKEN) &&
                             strstr(c.msg[i][k], want);
                        break;
                    }
                    for (j = 0; j < NV; j++) ok = ok && c.y[i][k][j] == sum_of(lo, gn, j, -1);
                }
            }
            ok = ok && c.took[i][1] < 10.0;
        } else if (strcmp(mode, "skipsites") == 0) { /* both sides name both sites */
            char x[64] = "", y[64] = "";
            const char *a = strstr(c.msg[i][1], "call sites: device ");
            int got = a ? sscanf(a, "call sites: device %*d at %63[^,], device %*d at %63[^)]", x, y) : 0;
            for (j = 0; j < NV; j++) ok = ok && c.y[i][1][j] == -1;
            ok = ok && c.st[i][1] == SPMD_ERR_MISMATCH && strstr(c.msg[i][1], "psum(i32 x 4") && got == 2 &&
                 strstr(x, "test_pfaults+0x") && strstr(y, "test_pfaults+0x") && strcmp(x, y) != 0;
        } else if (strcmp(mode, "skip") == 0) {
            if (i == victim) {
                for (j = 0; j < NV; j++) ok = ok && c.y[i][1][j] == -1;
                ok = ok && c.st[i][1] == SPMD_OK;
            } else {
                char who[48];
                snprintf(who, sizeof who, "devices not heard from: %d (process 1)", victim);
                ok = ok && c.st[i][1] == SPMD_ERR_TIMEOUT && strstr(c.msg[i][1], "psum(i32 x 4") &&
                     strstr(c.msg[i][1], "timed out after 1500 ms") && strstr(c.msg[i][1], who) &&
                     c.took[i][1] < 6.0;
            }
        }
        if (!ok) printf("device %d: NOT as documented\n", i);
        bad += !ok;
    }
    if (strcmp(mode, "skip") == 0 && c.proc == 0) put_marker();
    { /* every process's spmd_run agrees on how the run ended (docs/recovery.md): the loss, in the same words
         (whatever each device saw), or the break */
        int lost = strncmp(mode, "lose", 4) == 0 || strcmp(mode, "exit") == 0;
        char why[96];
        spmd_status want = lost ? SPMD_ERR_PEER_LOST
                           : strcmp(mode, "skip") == 0                           ? SPMD_ERR_TIMEOUT
                           : strcmp(mode, "corruptlocal") == 0 ||
                                     strcmp(mode, "skipsites") == 0                  ? SPMD_ERR_MISMATCH
                                                                                 : SPMD_OK;
        printf("spmd_run: %s (want %s)%s\n", spmd_status_name(run), spmd_status_name(want),
               run == want ? "" : ": NOT as documented");
        snprintf(why, sizeof why, "process %d lost (it died or its host is unreachable)", c.nprocs - 1);
        printf("spmd_run's reason: %s%s\n", spmd_mesh_error(m),
               lost && strcmp(spmd_mesh_error(m), why) ? ": NOT as documented" : "");
        printf("spmd_run took %.2f s\n", p_now() - t0);
        bad += run != want || (lost && strcmp(spmd_mesh_error(m), why) != 0);
    }
    spmd_mesh_destroy(m);
    fflush(stdout);
    return bad != 0;
}

/* A process that ended without closing its endpoint (lose, exit) leaves the
   shm provider's region /dev/shm/<pid>:...: remove those of our ended
   children, or they pile up and a later process given the same pid cannot
   open its endpoint (EBUSY). */
static void shm_cleanup(const pid_t *pid, int n) {
    DIR *dir = opendir("/dev/shm");
    struct dirent *e;
    char pre[32], path[300];
    int i;
    if (!dir) return;
    while ((e = readdir(dir)) != NULL)
        for (i = 0; i < n; i++) {
            snprintf(pre, sizeof pre, "%d:", (int)pid[i]);
            if (strncmp(e->d_name, pre, strlen(pre)) == 0) {
                snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
                unlink(path);
            }
        }
    closedir(dir);
}

/* Start the n processes of a job here (spmdrun would stop the survivors
   when one ends); each gets env "XF_DEVICES=<devices>" and SPMD_FAULTS. */
static const char *job_sched = ""; /* "fibers": the jobs' devices run as fibers (SPMD_SCHEDULER) */
static void run_job(const char *mode, const char *provider, int n, int devices, const char *plan, int victim_rc) {
    char coord[64], np[32], id[4][32], tag[4][64], dv[32], pv[48], fl[160], dir[300], xd[320], sc[48], host[4][32];
    const char *env[4][12];
    double t0 = p_now();
    pid_t pid[4];
    int i, rc[4];
    snprintf(np, sizeof np, "SPMD_NUM_PROCESSES=%d", n);
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    snprintf(dv, sizeof dv, "XF_DEVICES=%d", devices);
    snprintf(pv, sizeof pv, "SPMD_PROVIDER=%s", provider);
    snprintf(fl, sizeof fl, "SPMD_FAULTS=%s", plan);
    snprintf(sc, sizeof sc, "SPMD_SCHEDULER=%s", *job_sched ? job_sched : "threads");
    snprintf(dir, sizeof dir, "%s/pfaults-%s-%s%s.d", p_logdir, mode, provider, job_sched);
    mkdir(dir, 0755);
    snprintf(xd, sizeof xd, "%s/done.0", dir);
    unlink(xd);
    snprintf(xd, sizeof xd, "XF_DIR=%s", dir);
    for (i = 0; i < n; i++) {
        snprintf(id[i], sizeof id[i], "SPMD_PROCESS_ID=%d", i);
        snprintf(tag[i], sizeof tag[i], "pfaults-%s-%s%s-p%d", mode, provider, job_sched, i);
        env[i][0] = np;
        env[i][1] = id[i];
        env[i][2] = coord;
        env[i][3] = "SPMD_JOB_KEY=pf";
        env[i][4] = pv;
        env[i][5] = dv;
        env[i][6] = fl;
        env[i][7] = xd;
        env[i][8] = "SPMD_BOOT_TIMEOUT_MS=30000";
        env[i][9] = sc;
        snprintf(host[i], sizeof host[i], "SPMD_HOST=pf-h%d", i / 2); /* losestep: 2 hosts of 2 processes */
        env[i][10] = strncmp(mode, "losestep", 8) == 0 ? host[i] : NULL;
        env[i][11] = NULL;
        pid[i] = p_spawn(tag[i], mode, env[i]);
    }
    for (i = n - 1; i >= 0; i--) rc[i] = p_exit_code(p_wait(pid[i], 60));
    if (strcmp(provider, "shm") == 0) shm_cleanup(pid, n);
    for (i = 0; i < n; i++) {
        int want = i == n - 1 && victim_rc >= 0 ? victim_rc : 0;
        T_CHECK(rc[i] == want, "%s (%s%s): process %d ended with %d (want %d) after %.1f s: %s", mode, provider, job_sched,
                i, rc[i], want, p_now() - t0, p_read(tag[i], "out"));
        if (rc[i] != want) p_show(tag[i], "err");
    }
    if (victim_rc > 0) { /* the ended process said why, in its log */
        char want[160];
        if (strcmp(mode, "loseposted") == 0 || strcmp(mode, "losedone") == 0) /* kind=lose:posted, lose:done */
            snprintf(want, sizeof want, "over 'i' (operation #0 of this device): kind=lose:%s: the process exits with "
                     "status %d", mode + 4, victim_rc);
        else if (strncmp(mode, "losestep", 8) == 0) /* kind=lose:step:K */
            snprintf(want, sizeof want, "over 'i' (operation #0 of this device): kind=lose:step:%s: the process exits "
                     "with status %d", mode + 8, victim_rc);
        else if (strcmp(mode, "loseaside") == 0)
            snprintf(want, sizeof want, "over 'i' (call #0 of this device): kind=lose: the process exits with status %d",
                     victim_rc);
        else
            snprintf(want, sizeof want, "SPMD_FAULTS: psum(i32 x 4) over 'i' (call #1 of this device): kind=%s: the "
                     "process exits with status %d", mode, victim_rc);
        T_CHECK(strstr(p_read(tag[n - 1], "err"), want) != NULL, "%s (%s): the log of process %d says '%s': %s", mode,
                provider, n - 1, want, p_read(tag[n - 1], "err"));
    }
    if (strcmp(mode, "bad") == 0)
        for (i = 0; i < n; i++) {
            const char *out = p_read(tag[i], "out"), *at = strstr(out, " after ");
            char want[120];
            snprintf(want, sizeof want, "SPMD_FAULTS: bad token '%s'", strstr(plan, "explode") ? "kind=explode" : "device=4");
            T_CHECK(strstr(out, "mesh_create: SPMD_ERR_INVALID after ") && strstr(out, want) && at && atof(at + 7) < 5.0,
                    "bad (%s): process %d: %s", plan, i, out);
        }
}

int main(int argc, char **argv) {
    p_self = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    (void)p_spmdrun; /* (proclib's; these jobs are started here) */
    mkdir("build", 0755);
    mkdir(p_logdir, 0755);
    run_job("lose", "tcp", 3, 3, "device=2,seq=1,kind=lose", 4);
    run_job("lose", "shm", 2, 4, "device=3,seq=1,kind=lose", 4);
    /* the kill at each phase of a call: before it posts (lose, above), once it posted what it sends, once it
       completed there; the survivors' call #0 is right or fails naming the loss, their call #1 fails so */
    run_job("loseposted", "tcp", 3, 3, "device=2,seq=0,kind=lose:posted", 4);
    run_job("loseposted", "shm", 2, 4, "device=3,seq=0,kind=lose:posted", 4);
    run_job("losedone", "tcp", 3, 3, "device=2,seq=0,kind=lose:done", 4);
    run_job("losedone", "shm", 2, 4, "device=3,seq=0,kind=lose:done", 4);
    run_job("loseaside", "tcp", 4, 4, "device=3,seq=0,kind=lose", 4);
    /* 2 hosts of 2 processes of 2 devices (SPMD_HOST): the psum runs recursive doubling over the processes, step 1
       inside the host (the lane), step 2 across hosts (tcp); the last process dies before each */
    run_job("losestep1", "tcp", 4, 8, "device=6,seq=0,kind=lose:step:1;device=7,seq=0,kind=lose:step:1", 4);
    run_job("losestep2", "tcp", 4, 8, "device=6,seq=0,kind=lose:step:2;device=7,seq=0,kind=lose:step:2", 4);
    run_job("exit", "tcp", 3, 3, "device=2,seq=1,kind=exit", 3);
    run_job("exit", "shm", 2, 4, "device=3,seq=1,kind=exit", 3);
    run_job("delay", "tcp", 2, 4, "device=3,seq=0,kind=delay:300", -1);
    run_job("delay", "shm", 2, 4, "device=3,seq=0,kind=delay:300", -1);
    run_job("skip", "tcp", 2, 2, "device=1,seq=1,kind=skip", -1);
    run_job("skip", "shm", 2, 2, "device=1,seq=1,kind=skip", -1);
    run_job("skipsites", "tcp", 2, 2, "device=1,seq=1,kind=skip", -1);
    run_job("skipsites", "shm", 2, 2, "device=1,seq=1,kind=skip", -1);
    run_job("corrupt", "tcp", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    run_job("corrupt", "shm", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    run_job("corruptck", "tcp", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    run_job("corruptlocal", "tcp", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    run_job("corruptlocal", "shm", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    job_sched = "fibers"; /* the devices as fibers: the same outcomes */
    run_job("lose", "shm", 2, 4, "device=3,seq=1,kind=lose", 4);
    run_job("delay", "tcp", 2, 4, "device=3,seq=0,kind=delay:300", -1);
    run_job("corrupt", "shm", 2, 4, "device=3,seq=1,kind=corrupt", -1);
    job_sched = "";
    run_job("bad", "tcp", 2, 4, "device=4,seq=1,kind=lose", -1);
    run_job("bad", "tcp", 2, 4, "device=1,seq=1,kind=explode", -1);
    return t_summary();
}
