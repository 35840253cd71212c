/* train.c - data-parallel training with spmdcoll.

   Linear regression y = X w + noise on a fixed synthetic dataset, trained by
   full-batch gradient descent twice:
     - on one device, over the whole dataset (no mesh);
     - on 8 devices of a mesh with axis "data", each holding 1/8 of the rows:
       every step a device computes the mean gradient over its own rows and
       averages it over "data" with spmd_pmean, then applies the same update.
   With equal shards, the mean of the 8 shard means is the full-batch mean,
   so the two loss curves must agree up to float rounding. The program prints
   them side by side and fails (exit 1) if they differ by more than 1e-9
   relative (a NaN fails too); it ends with "OK: ..." when they agree.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/train.c -o build/train */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICES 8
#define ROWS (DEVICES * 128)  /* rows of the dataset, split equally */
#define FEATURES 6            /* feature 0 is a constant 1 (the bias) */
#define STEPS 60
#define EVERY 5               /* print the loss every EVERY steps */
#define LR 0.5
#define TOLERANCE 1e-9

static double X[ROWS][FEATURES], Y[ROWS];
static const double w_true[FEATURES] = {0.5, -1.25, 2.0, 0.75, -0.5, 1.5};

/* ---- deterministic data (splitmix64) ---------------------------------- */

static uint64_t rng_state = 0x5eed5eed2024ULL;

static double uniform(void) { /* in [-1, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 4503599627370496.0 - 1.0; /* 2^52 */
}

static void make_dataset(void) {
    for (int r = 0; r < ROWS; r++) {
        double noise = 0;
        for (int k = 0; k < 6; k++) noise += uniform(); /* roughly normal, sd ~1.4 */
        X[r][0] = 1.0;
        for (int f = 1; f < FEATURES; f++) X[r][f] = uniform();
        Y[r] = 0.07 * noise;
        for (int f = 0; f < FEATURES; f++) Y[r] += X[r][f] * w_true[f];
    }
}

/* ---- the model -------------------------------------------------------- */

/* Over rows [lo, hi): out[0..FEATURES-1] = gradient of the loss, out[FEATURES]
   = the loss, 1/2 mean squared error. Both are means over the rows. */
static void loss_and_grad(const double *w, int lo, int hi, double out[FEATURES + 1]) {
    memset(out, 0, sizeof(double) * (FEATURES + 1));
    for (int r = lo; r < hi; r++) {
        double err = -Y[r];
        for (int f = 0; f < FEATURES; f++) err += X[r][f] * w[f];
        for (int f = 0; f < FEATURES; f++) out[f] += err * X[r][f];
        out[FEATURES] += 0.5 * err * err;
    }
    for (int f = 0; f <= FEATURES; f++) out[f] /= (hi - lo);
}

static void sgd(double *w, const double *grad) {
    for (int f = 0; f < FEATURES; f++) w[f] -= LR * grad[f];
}

/* ---- one device ------------------------------------------------------- */

static void train_single(double loss[STEPS], double w[FEATURES]) {
    double g[FEATURES + 1];
    memset(w, 0, sizeof(double) * FEATURES);
    for (int t = 0; t < STEPS; t++) {
        loss_and_grad(w, 0, ROWS, g);
        loss[t] = g[FEATURES];
        sgd(w, g);
    }
}

/* ---- eight devices ---------------------------------------------------- */

typedef struct {
    double loss[STEPS];             /* written by device 0 */
    double w[DEVICES][FEATURES];    /* final weights of every device */
} parallel_result;

static void train_device(spmd_dev *d, void *arg) {
    parallel_result *res = arg;
    int k = spmd_axis_index(d, "data");
    int lo = k * (ROWS / DEVICES), hi = lo + ROWS / DEVICES;
    double w[FEATURES] = {0}, g[FEATURES + 1];
    spmd_status s = SPMD_OK;
    for (int t = 0; t < STEPS && s == SPMD_OK; t++) {
        loss_and_grad(w, lo, hi, g);
        /* the gradient and the loss travel together: one pmean per step */
        s = spmd_pmean(d, g, g, FEATURES + 1, SPMD_F64, "data", NULL);
        if (k == 0) res->loss[t] = g[FEATURES];
        sgd(w, g);
    }
    memcpy(res->w[k], w, sizeof w);
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
    make_dataset();

    static double loss1[STEPS], w1[FEATURES];
    train_single(loss1, w1);

    spmd_mesh_desc desc = {0};
    desc.ndim = 1;
    desc.shape[0] = DEVICES;
    desc.axis_names[0] = "data";
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_string(s));
        return 1;
    }
    static parallel_result par;
    s = spmd_run(m, train_device, &par);
    spmd_mesh_destroy(m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_run: %s\n", spmd_status_string(s));
        return 1;
    }

    printf("linear regression, %d rows x %d features, full-batch gradient descent, lr %g\n",
           ROWS, FEATURES, LR);
    printf("1 device: all rows; %d devices on axis \"data\": %d rows each, gradients pmean'd\n\n",
           DEVICES, ROWS / DEVICES);
    printf("%6s  %-22s  %-22s  %s\n", "step", "loss, 1 device", "loss, 8 devices", "|difference|");
    double max_abs = 0, max_rel = 0;
    for (int t = 0; t < STEPS; t++) {
        double diff = absd(loss1[t] - par.loss[t]), rel = rel_diff(loss1[t], par.loss[t]);
        max_abs = max_nan(max_abs, diff);
        max_rel = max_nan(max_rel, rel);
        if (t % EVERY == 0 || t == STEPS - 1)
            printf("%6d  %-22.15e  %-22.15e  %.1e\n", t, loss1[t], par.loss[t], diff);
    }

    /* every device must hold exactly the same weights, close to the 1-device ones */
    int identical = 1;
    double max_w_rel = 0;
    for (int k = 0; k < DEVICES; k++)
        identical &= memcmp(par.w[k], par.w[0], sizeof par.w[0]) == 0;
    for (int f = 0; f < FEATURES; f++) {
        max_w_rel = max_nan(max_w_rel, rel_diff(w1[f], par.w[0][f]));
    }

    printf("\n%-24s", "weights, true:");
    for (int f = 0; f < FEATURES; f++) printf(" %9.5f", w_true[f]);
    printf("\n%-24s", "weights, 1 device:");
    for (int f = 0; f < FEATURES; f++) printf(" %9.5f", w1[f]);
    printf("\n%-24s", "weights, 8 devices:");
    for (int f = 0; f < FEATURES; f++) printf(" %9.5f", par.w[0][f]);
    printf("\n\nmax |difference| of the loss: %.3e (relative %.3e)\n", max_abs, max_rel);
    printf("max relative difference of the weights: %.3e\n", max_w_rel);
    printf("all %d devices hold bit-identical weights: %s\n", DEVICES, identical ? "yes" : "NO");

    int ok = max_rel <= TOLERANCE && max_w_rel <= TOLERANCE && identical;
    printf("%s: the %d-device run %s the 1-device run (tolerance %g relative)\n",
           ok ? "OK" : "FAIL", DEVICES, ok ? "matches" : "does not match", TOLERANCE);
    return ok ? 0 : 1;
}
