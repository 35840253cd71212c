/* killsoak.c - how survivors learn of a killed process (issue 33, item 5).

   Each run starts 4 processes of 2 devices (a (4, 2) mesh, axes "dp" and
   "tp", deadline 3 s) over one provider. Every device loops over psum,
   all_gather, bcast and ppermute from 8 B to 4 MiB until a call fails.
   The parent sends SIGKILL to one process (the victim cycles 0..3) after
   300-1500 ms and reads what every survivor device saw: the status of its
   failing call, how long after the kill it failed, and spmd_run's status.

   What is right: every survivor device ends with SPMD_ERR_PEER_LOST (or
   SPMD_ERR_BROKEN naming the loss) soon after the kill, never with
   SPMD_ERR_TIMEOUT, and every survivor's spmd_run returns
   SPMD_ERR_PEER_LOST. The summary counts what was not, and gives the
   latency (kill to failure) by victim: median, 90th percentile, maximum.

     make build/killsoak && build/killsoak [runs] [tcp|shm|both]   (default 20 both)

   A measurement, not a test: run it by hand (it takes ~3 s a run). */
#define SPMDCOLL_IMPLEMENTATION
#ifndef SPMDCOLL_LIBFABRIC
#define SPMDCOLL_LIBFABRIC
#endif
#include "../spmdcoll.h"
#include "../tests/proclib.h"
#include <signal.h>
#include <sys/stat.h>

#define NPROC 4
#define LDEV 2
#define MAXN ((size_t)1 << 20) /* floats: 4 MiB */

static void dev_loop(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d), it;
    float *a = (float *)calloc(MAXN, sizeof(float)), *b = (float *)calloc(MAXN * NPROC, sizeof(float));
    spmd_status s = SPMD_OK;
    double t0 = p_now();
    const char *op = "";
    (void)arg;
    for (it = 0; s == SPMD_OK && a && b; it++) {
        size_t n = (size_t)2 << (it % 20); /* 8 B .. 4 MiB */
        spmd_array x = spmd_array_1d(a, SPMD_F32, (int64_t)n), o = spmd_array_1d(b, SPMD_F32, (int64_t)n * NPROC);
        int perm[2 * NPROC], i;
        for (i = 0; i < NPROC; i++) perm[2 * i] = i, perm[2 * i + 1] = (i + 1) % NPROC;
        t0 = p_now();
        switch (it / 20 % 4) {
        case 0: op = "psum"; s = spmd_psum(d, a, b, n, SPMD_F32, "dp", NULL); break;
        case 1: op = "all_gather"; s = spmd_all_gather(d, &x, &o, "dp", 0, 1, NULL); break;
        case 2: op = "bcast"; s = spmd_bcast(d, a, b, n, SPMD_F32, it % NPROC, "dp", NULL); break;
        default: {
            spmd_array y = spmd_array_1d(b, SPMD_F32, (int64_t)n);
            op = "ppermute";
            s = spmd_ppermute(d, &x, &y, "dp", perm, NPROC, NULL);
        }
        }
    }
    printf("dev %d %s %.6f %.6f %s: %s\n", id, spmd_status_name(s), t0, p_now(), op,
           s == SPMD_OK ? "" : spmd_last_error(d));
    fflush(stdout);
    free(a);
    free(b);
}

static int child_main(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = NPROC;
    desc.shape[1] = LDEV;
    desc.axis_names[0] = "dp";
    desc.axis_names[1] = "tp";
    desc.timeout_ms = 3000;
    desc.log_level = SPMD_LOG_ERROR;
    if ((s = spmd_mesh_create(&desc, &m)) != SPMD_OK) {
        printf("create %s\n", spmd_status_name(s));
        return 1;
    }
    printf("ready %.6f\n", p_now());
    fflush(stdout);
    s = spmd_run(m, dev_loop, NULL);
    printf("run %s %.6f\n", spmd_status_name(s), p_now());
    fflush(stdout);
    spmd_mesh_destroy(m);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct tally {
    double lat[NPROC][4096];
    int nlat[NPROC], timeouts, other, runs_bad, run_disagree, slow;
} tally;

static void one_run(const char *prov, int run, tally *t) {
    char coord[64], pv[48], id[NPROC][32], tag[NPROC][48];
    const char *env[NPROC][8];
    pid_t pid[NPROC];
    int i, victim = run % NPROC, delay_ms = 300 + (run * 577) % 1200, bad = 0;
    double t_kill;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    snprintf(pv, sizeof pv, "SPMD_PROVIDER=%s", prov);
    for (i = 0; i < NPROC; i++) {
        snprintf(id[i], sizeof id[i], "SPMD_PROCESS_ID=%d", i);
        snprintf(tag[i], sizeof tag[i], "killsoak-%s-p%d", prov, i);
        env[i][0] = "SPMD_NUM_PROCESSES=4";
        env[i][1] = id[i];
        env[i][2] = coord;
        env[i][3] = "SPMD_JOB_KEY=ks";
        env[i][4] = pv;
        env[i][5] = "SPMD_DEVICES_PER_PROCESS=2";
        env[i][6] = NULL;
        {
            char path[400];
            snprintf(path, sizeof path, "%s/%s.out", p_logdir, tag[i]);
            unlink(path); /* (not the last run's "ready") */
        }
        pid[i] = p_spawn(tag[i], "child", env[i]);
    }
    for (i = 0; i < NPROC; i++) { /* every process made the mesh */
        int w;
        for (w = 0; w < 1000 && !strstr(p_read(tag[i], "out"), "ready"); w++) usleep(10000);
    }
    usleep((useconds_t)delay_ms * 1000);
    t_kill = p_now();
    kill(pid[victim], SIGKILL);
    {
        char runst[NPROC][48];
        for (i = 0; i < NPROC; i++) {
            const char *out, *line;
            p_exit_code(p_wait(pid[i], 30));
            if (i == victim) continue;
            out = p_read(tag[i], "out");
            runst[i][0] = 0;
            for (line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                int dev;
                char st[48];
                double ts, te;
                if (sscanf(line, "dev %d %47s %lf %lf", &dev, st, &ts, &te) == 4) {
                    int lost = strstr(line, "lost") != NULL;
                    if (strcmp(st, "SPMD_ERR_TIMEOUT") == 0) t->timeouts++, bad = 1;
                    else if (!((strcmp(st, "SPMD_ERR_PEER_LOST") == 0 || strcmp(st, "SPMD_ERR_BROKEN") == 0) && lost))
                        t->other++, bad = 1;
                    if (t->nlat[victim] < 4096) t->lat[victim][t->nlat[victim]++] = te - t_kill;
                    if (te - t_kill > 0.5) t->slow++;
                    if (bad || te - t_kill > 0.5) {
                        const char *nl = strchr(line, '\n');
                        printf("  run %d (%s, victim %d, +%d ms): process %d %.*s (%.3f s after the kill)\n", run, prov,
                               victim, delay_ms, i, nl ? (int)(nl - line) : (int)strlen(line), line, te - t_kill);
                    }
                } else if (sscanf(line, "run %47s", runst[i]) == 1) {
                }
            }
        }
        for (i = 0; i < NPROC; i++) {
            if (i == victim) continue;
            if (strcmp(runst[i], "SPMD_ERR_PEER_LOST") != 0) {
                t->run_disagree++;
                printf("  run %d (%s, victim %d): process %d's spmd_run: %s\n", run, prov, victim, i,
                       runst[i][0] ? runst[i] : "(no line)");
                if (!runst[i][0]) printf("%s", p_read(tag[i], "out"));
            }
        }
    }
    t->runs_bad += bad;
}

static void summary(const char *prov, int runs, tally *t) {
    int v;
    printf("%s: %d runs: %d survivor devices timed out, %d other wrong outcomes, %d spmd_run not PEER_LOST, %d "
           "devices later than 0.5 s\n", prov, runs, t->timeouts, t->other, t->run_disagree, t->slow);
    for (v = 0; v < NPROC; v++) {
        int n = t->nlat[v];
        if (!n) continue;
        qsort(t->lat[v], (size_t)n, sizeof(double), cmp_d);
        printf("  victim %d: %d survivor devices: kill to failure median %.3f s, p90 %.3f s, max %.3f s\n", v, n,
               t->lat[v][n / 2], t->lat[v][n * 9 / 10], t->lat[v][n - 1]);
    }
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 20, r, k;
    const char *which = argc > 2 ? argv[2] : "both";
    const char *provs[2] = {"tcp", "shm"};
    p_self = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main();
    signal(SIGPIPE, SIG_IGN);
    (void)p_spmdrun, (void)p_show; /* (proclib's, unused here) */
    mkdir("build", 0755);
    mkdir(p_logdir, 0755);
    for (k = 0; k < 2; k++) {
        static tally t;
        if (strcmp(which, "both") != 0 && strcmp(which, provs[k]) != 0) continue;
        memset(&t, 0, sizeof t);
        for (r = 0; r < runs; r++) one_run(provs[k], r, &t);
        summary(provs[k], runs, &t);
    }
    return 0;
}
