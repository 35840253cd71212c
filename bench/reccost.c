/* reccost.c - what the flight recorder costs on a small psum.

   Two meshes of -d devices (axis "i") live side by side in one process (or,
   as build/reccost-fabric under tools/spmdrun, in every process of the
   job): one with the recorder at its default depth, one with it off
   (desc.trace_depth = -1). Rounds alternate between them (on, off, then
   off, on, ...), so the load of other programs on the machine falls on
   both alike; a round is one spmd_run in which every device does -w
   warm-up psums, a barrier, -n timed psums of -s bytes (f32), a barrier;
   device 0 times from the first barrier to the second. Printed: the
   median time per op of each mesh over -k rounds, and the median of the
   paired ratios on/off - 1 (the cost), and the 10th percentile of each
   (on a loaded machine other programs only add time: the fastest rounds
   show the cost itself). SPMD_TRACE_DEPTH and SPMD_TRACE must
   be unset (they would set both meshes' depth). Then the floor of a
   recorder that keeps one timed record per call, measured here in a loop
   of 20 M: a read of CLOCK_MONOTONIC_COARSE plus a 64-byte record written
   as the recorder writes one (generation 0, seven words, the generation
   with release), and the record alone; in percent of the median "off"
   time (one call per device per operation).

   usage: build/reccost [-d DEVICES] [-s BYTES] [-n ITERS] [-w WARM] [-k ROUNDS]
          tools/spmdrun -n 2 --provider shm --bind cpu -- build/reccost-fabric -d 2 */
#define SPMDCOLL_IMPLEMENTATION
#include "spmdcoll.h" /* first: it sets the feature macros it needs */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int iters, warm;
    size_t count;
    double sec; /* device 0's timed region */
    int failed;
} round_arg;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void device_main(spmd_dev *d, void *p) {
    round_arg *a = (round_arg *)p;
    float in[64], out[64];
    double t0 = 0;
    int i;
    for (i = 0; i < 64; i++) in[i] = (float)(i + spmd_device_id(d));
    for (i = 0; i < a->warm; i++)
        if (spmd_psum(d, in, out, a->count, SPMD_F32, "i", NULL) != SPMD_OK) a->failed = 1;
    if (spmd_barrier(d, "i", NULL) != SPMD_OK) a->failed = 1;
    if (spmd_device_id(d) == 0) t0 = now_s();
    for (i = 0; i < a->iters; i++)
        if (spmd_psum(d, in, out, a->count, SPMD_F32, "i", NULL) != SPMD_OK) a->failed = 1;
    if (spmd_barrier(d, "i", NULL) != SPMD_OK) a->failed = 1;
    if (spmd_device_id(d) == 0) a->sec = now_s() - t0;
}

/* ns per timed record written as the recorder does (clock: with a coarse clock read) */
static double record_floor(int clock) {
    static uint64_t ring[64][8];
    const uint64_t n = 20000000;
    uint64_t i;
    double t0 = now_s();
    for (i = 0; i < n; i++) {
        uint64_t *e = ring[i & 63], t = i;
        int k;
        if (clock) {
            struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
            clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
            clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
            t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
        __atomic_store_n(&e[0], (uint64_t)0, __ATOMIC_RELAXED);
        for (k = 1; k < 8; k++) __atomic_store_n(&e[k], t + (uint64_t)k, __ATOMIC_RELAXED);
        __atomic_store_n(&e[0], i + 1, __ATOMIC_RELEASE);
    }
    return (now_s() - t0) / (double)n * 1e9;
}

static int cmp_d(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    int devices = 2, iters = 20000, warm = 2000, rounds = 21, c, k, w;
    size_t bytes = 8;
    spmd_mesh *mesh[2];
    double *t[2], *ratio;
    while ((c = getopt(argc, argv, "d:s:n:w:k:")) != -1) {
        switch (c) {
        case 'd': devices = atoi(optarg); break;
        case 's': bytes = (size_t)atol(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warm = atoi(optarg); break;
        case 'k': rounds = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-d DEVICES] [-s BYTES<=256] [-n ITERS] [-w WARM] [-k ROUNDS]\n", argv[0]);
            return 2;
        }
    }
    if (getenv("SPMD_TRACE_DEPTH") || getenv("SPMD_TRACE")) {
        fprintf(stderr, "reccost: unset SPMD_TRACE_DEPTH and SPMD_TRACE (they set both meshes' recorder)\n");
        return 2;
    }
    if (devices < 1 || bytes < 4 || bytes > 256 || iters < 1 || warm < 0 || rounds < 1) {
        fprintf(stderr, "reccost: bad arguments\n");
        return 2;
    }
    for (w = 0; w < 2; w++) {
        spmd_mesh_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.ndim = 1;
        desc.shape[0] = devices;
        desc.axis_names[0] = "i";
        desc.trace_depth = w ? -1 : 0; /* 0: recorder on, the default depth; -1: off */
        if (spmd_mesh_create(&desc, &mesh[w]) != SPMD_OK) {
            fprintf(stderr, "reccost: spmd_mesh_create failed\n");
            return 1;
        }
    }
    t[0] = (double *)calloc((size_t)rounds, sizeof(double));
    t[1] = (double *)calloc((size_t)rounds, sizeof(double));
    ratio = (double *)calloc((size_t)rounds, sizeof(double));
    if (!t[0] || !t[1] || !ratio) return 1;
    for (k = 0; k < rounds; k++) {
        int j;
        for (j = 0; j < 2; j++) {
            int which = (k + j) % 2; /* on first in even rounds, off first in odd ones */
            round_arg a;
            memset(&a, 0, sizeof a);
            a.iters = iters;
            a.warm = warm;
            a.count = bytes / 4;
            if (spmd_run(mesh[which], device_main, &a) != SPMD_OK || a.failed) {
                fprintf(stderr, "reccost: a round failed\n");
                return 1;
            }
            t[which][k] = a.sec / iters * 1e6;
        }
        ratio[k] = t[0][k] / t[1][k] - 1;
    }
    if (spmd_device_is_local(mesh[0], 0) == 1) {
        double on = median(t[0], rounds), off = median(t[1], rounds), cost = median(ratio, rounds);
        /* sorted by median(): the fastest tenth is the least disturbed by other programs */
        double on10 = t[0][rounds / 10], off10 = t[1][rounds / 10];
        printf("psum %zu B, %d devices, %d rounds of %d ops: median on %.3f us, off %.3f us, paired cost %+.1f%%; "
               "10th percentile on %.3f us, off %.3f us, cost %+.1f%%\n", bytes, devices, rounds, iters, on, off,
               cost * 100, on10, off10, (on10 / off10 - 1) * 100);
        {
            double fc = record_floor(1), fr = record_floor(0);
            printf("floor: a record with a coarse clock read %.2f ns (%.1f%% of off), the record alone %.2f ns "
                   "(%.1f%%)\n", fc, fc / (off * 1e3) * 100, fr, fr / (off * 1e3) * 100);
        }
    }
    for (w = 0; w < 2; w++) spmd_mesh_destroy(mesh[w]);
    free(t[0]);
    free(t[1]);
    free(ratio);
    return 0;
}
