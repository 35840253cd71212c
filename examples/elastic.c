/* elastic.c - elastic data parallelism: lose a device, shrink, go on.

   Linear regression (y = X w + noise, full-batch gradient descent) on a
   mesh of 4 x 2 devices, axes "dp" (data parallel: each replica holds 1/dp
   of the rows) and "tp" (tensor parallel: each device of a replica holds
   half of the weights and the matching columns of X). One step, per device:
     - partial predictions of its rows from its half of the weights, summed
       over "tp" (spmd_psum): the full predictions;
     - the gradient of its half of the weights over its rows, averaged over
       "dp" (spmd_pmean) with the loss;
     - a barrier over the whole mesh: the step's commit point. A loss
       anywhere fails it everywhere, so either every survivor passed it or
       none did; only then is the update applied and checkpointed (each
       device keeps its half of the weights and the step).
   The fault plan loses device 5 (dp 2, tp 1) at its call #40, in step 13
   (desc.faults "device=5,seq=40,kind=lose"; 3 calls a step). spmd_run
   returns SPMD_ERR_PEER_LOST; spmd_mesh_shrink along "dp" drops replica 2,
   the one that lost a member: a 3 x 2 mesh whose devices resume from the
   checkpoint of the device they were (spmd_device_origin), the rows split
   3 ways, and train to the end.
   Checked: (1) a fresh 3 x 2 mesh (spmd_mesh_create) run from the same
   checkpoint gives bit-identical weights and losses; (2) the whole run
   matches a 1-device run over all rows within 1e-9 relative (the mean of
   equal shards' means is the full mean, up to rounding). Exit 1 otherwise.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/elastic.c -o build/elastic */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DP 4
#define TP 2
#define ROWS 768              /* divisible by 4 and by 3: equal shards before and after */
#define FEATURES 8            /* feature 0 is a constant 1 (the bias) */
#define HALF (FEATURES / TP)  /* weights per device */
#define STEPS 40
#define LR 0.5
#define TOLERANCE 1e-9
#define FAULTS "device=5,seq=40,kind=lose"

static double X[ROWS][FEATURES], Y[ROWS];
static const double w_true[FEATURES] = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 1.0};

static uint64_t rng_state = 0xe1a5710ULL;
static double uniform(void) { /* splitmix64, in [-1, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0;
}
static void make_dataset(void) {
    for (int r = 0; r < ROWS; r++) {
        double noise = 0;
        for (int k = 0; k < 6; k++) noise += uniform();
        X[r][0] = 1.0;
        for (int f = 1; f < FEATURES; f++) X[r][f] = uniform();
        Y[r] = 0.07 * noise;
        for (int f = 0; f < FEATURES; f++) Y[r] += X[r][f] * w_true[f];
    }
}

/* ---- the elastic run --------------------------------------------------- */

typedef struct {
    int t0;                         /* the step this run starts at */
    const int *first;               /* device of this mesh -> its id in the first (4 x 2) mesh */
    double start[DP * TP][HALF];    /* weights to start from, by first-mesh id */
    double ckpt[DP * TP][HALF];     /* committed weights, by first-mesh id */
    int committed[DP * TP];         /* steps committed, by first-mesh id */
    double loss[STEPS];             /* the loss of each step (written by the replica-0, tp-0 device) */
} run_state;

static void train_device(spmd_dev *d, void *arg) {
    run_state *st = arg;
    int me = st->first[spmd_device_id(d)];
    int dp = spmd_axis_size(d, "dp"), k = spmd_axis_index(d, "dp"), j = spmd_axis_index(d, "tp");
    int lo = k * (ROWS / dp), n = ROWS / dp;
    double w[HALF], g[HALF + 1], *pred = malloc(sizeof(double) * (size_t)n);
    spmd_status s = pred ? SPMD_OK : SPMD_ERR_NOMEM;
    memcpy(w, st->start[me], sizeof w);
    for (int t = st->t0; t < STEPS && s == SPMD_OK; t++) {
        for (int r = 0; r < n; r++) { /* my half of each row's prediction */
            pred[r] = 0;
            for (int f = 0; f < HALF; f++) pred[r] += X[lo + r][j * HALF + f] * w[f];
        }
        s = spmd_psum(d, pred, pred, (size_t)n, SPMD_F64, "tp", NULL);
        if (s != SPMD_OK) break;
        memset(g, 0, sizeof g);
        for (int r = 0; r < n; r++) {
            double err = pred[r] - Y[lo + r];
            for (int f = 0; f < HALF; f++) g[f] += err * X[lo + r][j * HALF + f];
            g[HALF] += 0.5 * err * err;
        }
        for (int f = 0; f <= HALF; f++) g[f] /= n;
        s = spmd_pmean(d, g, g, HALF + 1, SPMD_F64, "dp", NULL);
        if (s == SPMD_OK) s = spmd_barrier(d, "dp,tp", NULL); /* commit point */
        if (s != SPMD_OK) break;
        for (int f = 0; f < HALF; f++) w[f] -= LR * g[f];
        memcpy(st->ckpt[me], w, sizeof w);
        st->committed[me] = t + 1;
        if (k == 0 && j == 0) st->loss[t] = g[HALF];
    }
    free(pred); /* a failed step is not committed: spmd_run returns why */
}

static spmd_mesh *make_mesh(int dp, const char *faults) {
    spmd_mesh_desc desc = {0};
    spmd_mesh *m = NULL;
    desc.ndim = 2;
    desc.shape[0] = dp;
    desc.shape[1] = TP;
    desc.axis_names[0] = "dp";
    desc.axis_names[1] = "tp";
    desc.faults = faults;
    desc.log_level = SPMD_LOG_OFF; /* the loss is reported below */
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_name(s));
    return m;
}

/* ---- one device, all rows: the reference ------------------------------- */

static void train_single(double loss[STEPS], double w[FEATURES]) {
    memset(w, 0, sizeof(double) * FEATURES);
    for (int t = 0; t < STEPS; t++) {
        double g[FEATURES + 1] = {0};
        for (int r = 0; r < ROWS; r++) {
            double err = -Y[r];
            for (int f = 0; f < FEATURES; f++) err += X[r][f] * w[f];
            for (int f = 0; f < FEATURES; f++) g[f] += err * X[r][f];
            g[FEATURES] += 0.5 * err * err;
        }
        for (int f = 0; f <= FEATURES; f++) g[f] /= ROWS;
        loss[t] = g[FEATURES];
        for (int f = 0; f < FEATURES; f++) w[f] -= LR * g[f];
    }
}

static double absd(double x) { return x < 0 ? -x : x; }
/* NaN when a or b is NaN */
static double rel_diff(double a, double b) {
    double scale = absd(a) > absd(b) ? absd(a) : absd(b);
    return a == b ? 0.0 : absd(a - b) / scale;
}
/* the larger of m and x; a NaN, once seen, stays (and fails "<= TOLERANCE") */
static double max_nan(double m, double x) { return m != m || x <= m ? m : x; }

int main(void) {
    static run_state a, b, c; /* before the loss; after, on the shrunk mesh; the fresh mesh's */
    static int ident[DP * TP], origin[DP * TP];
    static double loss1[STEPS], w1[FEATURES];
    make_dataset();
    train_single(loss1, w1);
    for (int i = 0; i < DP * TP; i++) ident[i] = i;

    printf("linear regression, %d rows x %d features; mesh dp %d x tp %d; fault plan \"%s\"\n", ROWS, FEATURES, DP,
           TP, FAULTS);
    spmd_mesh *m = make_mesh(DP, FAULTS);
    if (!m) return 1;
    a.first = ident;
    spmd_status s = spmd_run(m, train_device, &a);
    int lost[DP * TP], nlost = spmd_mesh_lost(m, lost, DP * TP);
    printf("spmd_run on %d x %d: %s; lost devices: %d%s", DP, TP, spmd_status_name(s), nlost, nlost ? " (" : "");
    for (int i = 0; i < nlost; i++) printf("%s%d", i ? ", " : "", lost[i]);
    printf("%s\n", nlost ? ")" : "");
    if (s != SPMD_ERR_PEER_LOST || nlost != 1) {
        fprintf(stderr, "FAIL: expected the fault plan to lose one device\n");
        spmd_mesh_destroy(m);
        return 1;
    }

    /* every survivor committed the same steps (the barrier is all or none) */
    int T = -1, same = 1;
    for (int i = 0; i < DP * TP; i++) {
        if (i == lost[0]) continue;
        if (T < 0) T = a.committed[i];
        same &= a.committed[i] == T;
    }
    printf("steps committed by every survivor: %d (all the same: %s)\n", T, same ? "yes" : "NO");

    spmd_mesh *nm = NULL;
    s = spmd_mesh_shrink(m, "dp", NULL, &nm);
    if (s != SPMD_OK) {
        fprintf(stderr, "FAIL: spmd_mesh_shrink: %s\n", spmd_status_name(s));
        spmd_mesh_destroy(m);
        return 1;
    }
    int ndp = spmd_mesh_axis_size(nm, "dp"), nsize = spmd_mesh_size(nm);
    printf("shrunk along \"dp\": %d x %d, devices from the first mesh:", ndp, TP);
    for (int i = 0; i < nsize; i++) {
        origin[i] = spmd_device_origin(nm, i);
        printf(" %d", origin[i]);
    }
    printf("\n");

    /* resume on the shrunk mesh, and on a fresh mesh of that shape, from the checkpoint */
    b.t0 = c.t0 = T;
    b.first = c.first = origin;
    memcpy(b.start, a.ckpt, sizeof a.ckpt);
    memcpy(c.start, a.ckpt, sizeof a.ckpt);
    spmd_status sb = spmd_run(nm, train_device, &b);
    spmd_mesh *fm = make_mesh(ndp, NULL);
    spmd_status sc = fm ? spmd_run(fm, train_device, &c) : SPMD_ERR_NOMEM;
    printf("resumed at step %d: shrunk mesh %s, fresh %d x %d mesh %s\n", T, spmd_status_name(sb), ndp, TP,
           spmd_status_name(sc));

    /* the losses of the whole run: steps before T from the first mesh */
    printf("\n%6s  %-22s  %-22s\n", "step", "loss, 1 device", "loss, elastic");
    double max_rel = 0;
    for (int t = 0; t < STEPS; t++) {
        double l = t < T ? a.loss[t] : b.loss[t];
        max_rel = max_nan(max_rel, rel_diff(loss1[t], l));
        if (t % 5 == 0 || t == T || t == STEPS - 1)
            printf("%6d  %-22.15e  %-22.15e%s\n", t, loss1[t], l, t == T ? "  <- first step on 3 x 2" : "");
    }
    int bitwise = sb == SPMD_OK && sc == SPMD_OK && memcmp(b.ckpt, c.ckpt, sizeof b.ckpt) == 0 &&
                  memcmp(b.loss + T, c.loss + T, sizeof(double) * (size_t)(STEPS - T)) == 0;
    int done = 1;
    double max_w = 0;
    for (int i = 0; i < nsize; i++) {
        done &= b.committed[origin[i]] == STEPS;
        for (int f = 0; f < HALF; f++) max_w = max_nan(max_w, rel_diff(w1[(i % TP) * HALF + f], b.ckpt[origin[i]][f]));
    }
    printf("\nshrunk-mesh run bit-identical to a fresh %d x %d mesh from the same checkpoint: %s\n", ndp, TP,
           bitwise ? "yes" : "NO");
    printf("every device finished all %d steps: %s\n", STEPS, done ? "yes" : "NO");
    printf("max relative difference to 1 device: loss %.3e, weights %.3e (tolerance %g)\n", max_rel, max_w,
           TOLERANCE);
    int ok = same && bitwise && done && max_rel <= TOLERANCE && max_w <= TOLERANCE;
    printf("%s\n", ok ? "OK: training survived the loss" : "FAIL");
    if (fm) spmd_mesh_destroy(fm);
    spmd_mesh_destroy(nm);
    spmd_mesh_destroy(m);
    return ok ? 0 : 1;
}
