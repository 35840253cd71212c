/* fsdp.c - fully sharded data parallelism (FSDP) with spmdcoll.

   A linear layer y = W x + b (W 4x6, b 4: 28 parameters) is fitted to a
   synthetic dataset by full-batch gradient descent, in float64, twice:
     - on one device, with all parameters and all rows;
     - on 4 devices on axis "fsdp". The parameters, flattened (W row-major,
       then b), are cut into 4 shards of 7: device k stores only shard k. The
       rows are cut into 4 equal data shards too. Every step, a device
         1. all_gathers (tiled) the shards into the full 28 parameters,
         2. computes the gradient over its own rows (and its part of the loss),
         3. psum_scatters (tiled) the gradients: it receives the gradient of
            its own shard, summed over all devices' rows,
         4. updates its shard, and drops the full copy.
   The local gradients are divided by the total row count, so the sum over
   devices is the full-batch mean: both runs do the same arithmetic up to the
   order of the additions. The program prints both loss curves and fails
   (exit 1) if they differ by more than 1e-9 relative (a NaN fails too); it
   ends with "OK: ..." when they agree.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/fsdp.c -o build/fsdp -lm */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define DEVICES 4
#define IN 6
#define OUT 4
#define PARAMS (OUT * IN + OUT)        /* W, then b */
#define SHARD (PARAMS / DEVICES)       /* parameters per device */
#define ROWS (DEVICES * 64)            /* rows of the dataset */
#define LOCAL_ROWS (ROWS / DEVICES)
#define STEPS 40
#define EVERY 4
#define LR 0.8
#define TOLERANCE 1e-9

_Static_assert(PARAMS % DEVICES == 0, "the parameters must split into equal shards");

static double X[ROWS][IN], Y[ROWS][OUT];

/* ---- data: y = W_true x + b_true + noise, from a fixed xorshift64* stream */

static uint64_t stream = 0x9d2c5680f00dULL;

static double uniform(void) { /* in [-1, 1) */
    stream ^= stream >> 12;
    stream ^= stream << 25;
    stream ^= stream >> 27;
    uint64_t v = stream * 0x2545f4914f6cdd1dULL;
    return (double)(v >> 11) * (2.0 / 9007199254740992.0) - 1.0;   /* 2^53 */
}

static void make_dataset(double truth[PARAMS]) {
    for (int p = 0; p < PARAMS; p++) truth[p] = 2 * uniform();
    for (int r = 0; r < ROWS; r++) {
        for (int c = 0; c < IN; c++) X[r][c] = uniform();
        for (int o = 0; o < OUT; o++) {
            double y = truth[OUT * IN + o] + 0.05 * (uniform() + uniform());
            for (int c = 0; c < IN; c++) y += truth[o * IN + c] * X[r][c];
            Y[r][o] = y;
        }
    }
}

/* ---- the model ------------------------------------------------------------
   loss = 1/(2 ROWS) * sum over rows of |W x + b - y|^2. Over rows [lo, hi),
   grad gets this range's share of the gradient and the function returns its
   share of the loss: summing the shares over a partition of the rows gives
   the full-batch values. */
static double loss_and_grad(const double p[PARAMS], int lo, int hi, double grad[PARAMS]) {
    double loss = 0;
    memset(grad, 0, sizeof(double) * PARAMS);
    for (int r = lo; r < hi; r++)
        for (int o = 0; o < OUT; o++) {
            double err = p[OUT * IN + o] - Y[r][o];
            for (int c = 0; c < IN; c++) err += p[o * IN + c] * X[r][c];
            for (int c = 0; c < IN; c++) grad[o * IN + c] += err * X[r][c];
            grad[OUT * IN + o] += err;
            loss += 0.5 * err * err;
        }
    for (int q = 0; q < PARAMS; q++) grad[q] /= ROWS;
    return loss / ROWS;
}

/* ---- one device ---------------------------------------------------------- */

static void train_single(double loss[STEPS], double p[PARAMS]) {
    double grad[PARAMS];
    memset(p, 0, sizeof(double) * PARAMS);
    for (int t = 0; t < STEPS; t++) {
        loss[t] = loss_and_grad(p, 0, ROWS, grad);
        for (int q = 0; q < PARAMS; q++) p[q] -= LR * grad[q];
    }
}

/* ---- four devices, parameters sharded -------------------------------------- */

typedef struct {
    double loss[DEVICES][STEPS];           /* every device's view of the loss */
    double shard[DEVICES][SHARD];          /* final shards */
    char error[DEVICES][640];
} fsdp_result;

static int failed(fsdp_result *r, int k, spmd_dev *d, spmd_status s, const char *what, int step) {
    if (s == SPMD_OK) return 0;
    snprintf(r->error[k], sizeof r->error[0], "%s at step %d: %s: %s", what, step, spmd_status_name(s),
             spmd_last_error(d));
    return 1;
}

static void train_device(spmd_dev *d, void *arg) {
    fsdp_result *r = arg;
    int k = spmd_axis_index(d, "fsdp");
    if (k < 0) {
        failed(r, spmd_device_id(d), d, (spmd_status)-k, "axis_index", 0);
        return;
    }
    double shard[SHARD] = {0}, grad_shard[SHARD];   /* all this device keeps between steps */
    double full[PARAMS], grad[PARAMS];              /* only during a step */
    spmd_array shard_v = spmd_array_1d(shard, SPMD_F64, SHARD);
    spmd_array full_v = spmd_array_1d(full, SPMD_F64, PARAMS);
    spmd_array grad_v = spmd_array_1d(grad, SPMD_F64, PARAMS);
    spmd_array grad_shard_v = spmd_array_1d(grad_shard, SPMD_F64, SHARD);
    int lo = k * LOCAL_ROWS, hi = lo + LOCAL_ROWS;

    for (int t = 0; t < STEPS; t++) {
        if (failed(r, k, d, spmd_all_gather(d, &shard_v, &full_v, "fsdp", 0, /*tiled*/ 1, NULL),
                   "all_gather", t))
            return;
        double loss = loss_and_grad(full, lo, hi, grad);
        if (failed(r, k, d, spmd_psum_scatter(d, &grad_v, &grad_shard_v, "fsdp", 0, /*tiled*/ 1, NULL),
                   "psum_scatter", t))
            return;
        if (failed(r, k, d, spmd_psum(d, &loss, &r->loss[k][t], 1, SPMD_F64, "fsdp", NULL), "psum", t))
            return;
        for (int q = 0; q < SHARD; q++) shard[q] -= LR * grad_shard[q];
    }
    memcpy(r->shard[k], shard, sizeof shard);
}

/* ---- comparison and report ---------------------------------------------- */

/* NaN when a or b is NaN */
static double rel_diff(double a, double b) { return a == b ? 0.0 : fabs(a - b) / fmax(fabs(a), fabs(b)); }

/* the larger of m and x; a NaN, once seen, stays (and fails "<= TOLERANCE") */
static double max_nan(double m, double x) { return m != m || x <= m ? m : x; }

static void param_name(int q, char *buf, size_t n) {
    if (q < OUT * IN) snprintf(buf, n, "W%d%d", q / IN, q % IN);
    else snprintf(buf, n, "b%d", q - OUT * IN);
}

int main(void) {
    static double truth[PARAMS], loss1[STEPS], p1[PARAMS];
    make_dataset(truth);
    train_single(loss1, p1);

    spmd_mesh_desc desc = {0};
    desc.ndim = 1;
    desc.shape[0] = DEVICES;
    desc.axis_names[0] = "fsdp";
    desc.timeout_ms = 10000;
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_string(s));
        return 1;
    }
    static fsdp_result r;
    s = spmd_run(m, train_device, &r);
    spmd_status destroyed = spmd_mesh_destroy(m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_run: %s\n", spmd_status_name(s));
        for (int k = 0; k < DEVICES; k++)
            if (r.error[k][0]) fprintf(stderr, "  device %d: %s\n", k, r.error[k]);
        return 1;
    }
    if (destroyed != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_destroy: %s\n", spmd_status_name(destroyed));
        return 1;
    }

    printf("FSDP: y = W x + b, W %dx%d and b %d = %d parameters in %d shards of %d on axis \"fsdp\";\n",
           OUT, IN, OUT, PARAMS, DEVICES, SHARD);
    printf("%d rows in %d data shards of %d; full-batch gradient descent, lr %g, float64\n\n", ROWS, DEVICES,
           LOCAL_ROWS, LR);
    for (int k = 0; k < DEVICES; k++) {
        printf("  device %d stores", k);
        for (int q = k * SHARD; q < (k + 1) * SHARD; q++) {
            char name[24];
            param_name(q, name, sizeof name);
            printf(" %s", name);
        }
        printf("  and rows %d..%d\n", k * LOCAL_ROWS, (k + 1) * LOCAL_ROWS - 1);
    }

    printf("\n%6s  %-22s  %-22s  %s\n", "step", "loss, 1 device", "loss, 4 devices FSDP", "relative diff");
    double max_rel = 0;
    int same_everywhere = 1;
    for (int t = 0; t < STEPS; t++) {
        double rel = rel_diff(loss1[t], r.loss[0][t]);
        max_rel = max_nan(max_rel, rel);
        for (int k = 1; k < DEVICES; k++) same_everywhere &= r.loss[k][t] == r.loss[0][t];
        if (t % EVERY == 0 || t == STEPS - 1)
            printf("%6d  %-22.15e  %-22.15e  %.1e\n", t, loss1[t], r.loss[0][t], rel);
    }

    double max_p_rel = 0;
    printf("\nparameters after %d steps, shard by shard, and the values the data was made from:\n", STEPS);
    for (int k = 0; k < DEVICES; k++) {
        printf("  device %d  learned", k);
        for (int j = 0; j < SHARD; j++) {
            max_p_rel = max_nan(max_p_rel, rel_diff(p1[k * SHARD + j], r.shard[k][j]));
            printf(" %7.3f", r.shard[k][j]);
        }
        printf("\n            true   ");
        for (int j = 0; j < SHARD; j++) printf(" %7.3f", truth[k * SHARD + j]);
        printf("\n");
    }
    printf("\nmax relative difference, 4 devices vs 1: loss %.2e, parameters %.2e\n", max_rel, max_p_rel);
    printf("every device saw the same loss: %s\n", same_everywhere ? "yes" : "NO");
    int ok = max_rel <= TOLERANCE && max_p_rel <= TOLERANCE && same_everywhere;
    printf("%s: FSDP training %s single-device training (tolerance %g relative)\n", ok ? "OK" : "FAIL",
           ok ? "matches" : "does not match", TOLERANCE);
    return ok ? 0 : 1;
}
