/* pipeline.c - pipeline parallelism with spmd_ppermute.

   A 4-layer network, one layer per device on axis "stage". A batch is cut
   into micro-batches that flow through the stages GPipe-style: at step t,
   stage s works on micro-batch t - s, then every stage hands its activations
   to the next one with a single ppermute (pairs 0->1, 1->2, 2->3). Stage 0
   is no destination, so it receives zeros and loads a fresh micro-batch
   instead; stage 3 is no source, so its outputs stay where they are.

   What travels is a small record: a tag (micro-batch + 1, 0 for "nothing")
   followed by the activations, so the schedule printed below is read from
   the data that actually arrived, not computed on the side.

   main then runs the same network layer by layer on one thread and checks
   that every output matches; exit 1 on any difference (a NaN too), else it
   ends with "OK: ...".

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/pipeline.c -o build/pipeline -lm */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define STAGES 4
#define MICRO 6                          /* micro-batches */
#define BATCH 2                          /* rows per micro-batch */
#define WIDTH 4                          /* features in and out of every layer */
#define STEPS (MICRO + STAGES - 1)       /* fill, steady state, drain */
#define RECORD (1 + BATCH * WIDTH)       /* tag, then the activations */
#define TOLERANCE 1e-12

/* The model and the data, as a checkpoint on disk would hold them. */
static double weights[STAGES][WIDTH][WIDTH], biases[STAGES][WIDTH];
static double inputs[MICRO][BATCH][WIDTH];

static void make_model(void) {
    for (int s = 0; s < STAGES; s++)
        for (int r = 0; r < WIDTH; r++) {
            biases[s][r] = 0.1 * (r - s);
            for (int c = 0; c < WIDTH; c++)
                weights[s][r][c] = sin(1.0 + 7 * s + 3 * r + c) * 0.9;
        }
    for (int m = 0; m < MICRO; m++)
        for (int b = 0; b < BATCH; b++)
            for (int c = 0; c < WIDTH; c++) inputs[m][b][c] = cos(0.5 * m + 1.3 * b + 0.7 * c);
}

/* One layer on a micro-batch: y = tanh(W x + b), row by row. */
static void layer(const double w[WIDTH][WIDTH], const double *bias, const double *x, double *y) {
    for (int b = 0; b < BATCH; b++)
        for (int r = 0; r < WIDTH; r++) {
            double acc = bias[r];
            for (int c = 0; c < WIDTH; c++) acc += w[r][c] * x[b * WIDTH + c];
            y[b * WIDTH + r] = tanh(acc);
        }
}

/* ---- the pipeline ------------------------------------------------------ */

typedef struct {
    int holds[STEPS][STAGES];                  /* micro-batch worked on, -1: idle */
    double outputs[MICRO][BATCH * WIDTH];      /* written by the last stage */
    char error[STAGES][640];          /* what went wrong, per device */
} pipeline_result;

static const int next_stage[] = {0, 1, 1, 2, 2, 3};    /* (source, destination) pairs */

static void stage_fn(spmd_dev *d, void *arg) {
    pipeline_result *r = arg;
    int s = spmd_axis_index(d, "stage");
    if (s < 0) {
        snprintf(r->error[spmd_device_id(d)], sizeof r->error[0], "axis_index: %s", spmd_last_error(d));
        return;
    }
    double w[WIDTH][WIDTH], bias[WIDTH];                /* this device's layer, and only it */
    memcpy(w, weights[s], sizeof w);
    memcpy(bias, biases[s], sizeof bias);

    double in[RECORD] = {0}, out[RECORD];
    spmd_array out_view = spmd_array_1d(out, SPMD_F64, RECORD);
    spmd_array in_view = spmd_array_1d(in, SPMD_F64, RECORD);
    for (int t = 0; t < STEPS; t++) {
        if (s == 0 && t < MICRO) {                      /* stage 0 feeds the pipeline */
            in[0] = t + 1;
            memcpy(in + 1, inputs[t], sizeof inputs[t]);
        }
        int tag = (int)in[0];
        r->holds[t][s] = tag - 1;
        memset(out, 0, sizeof out);
        if (tag > 0) {
            out[0] = tag;
            layer((const double(*)[WIDTH])w, bias, in + 1, out + 1);
            if (s == STAGES - 1) memcpy(r->outputs[tag - 1], out + 1, sizeof r->outputs[0]);
        }
        if (t == STEPS - 1) break;                      /* nothing left to hand on */
        spmd_status st = spmd_ppermute(d, &out_view, &in_view, "stage", next_stage, STAGES - 1, NULL);
        if (st != SPMD_OK) {
            snprintf(r->error[s], sizeof r->error[0], "ppermute at step %d: %s: %s", t,
                     spmd_status_name(st), spmd_last_error(d));
            return;
        }
    }
}

/* ---- the same network on one thread ------------------------------------ */

static void sequential(double outputs[MICRO][BATCH * WIDTH]) {
    for (int m = 0; m < MICRO; m++) {
        double x[BATCH * WIDTH], y[BATCH * WIDTH];
        memcpy(x, inputs[m], sizeof x);
        for (int s = 0; s < STAGES; s++) {
            layer((const double(*)[WIDTH])weights[s], biases[s], x, y);
            memcpy(x, y, sizeof x);
        }
        memcpy(outputs[m], x, sizeof x);
    }
}

/* the larger of m and x; a NaN, once seen, stays (and fails "<= TOLERANCE") */
static double max_nan(double m, double x) { return m != m || x <= m ? m : x; }

int main(void) {
    make_model();

    spmd_mesh_desc desc = {0};
    desc.ndim = 1;
    desc.shape[0] = STAGES;
    desc.axis_names[0] = "stage";
    desc.timeout_ms = 10000;                            /* a failure ends in seconds, not a minute */
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_string(s));
        return 1;
    }
    static pipeline_result r;
    s = spmd_run(m, stage_fn, &r);
    spmd_status destroyed = spmd_mesh_destroy(m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_run: %s\n", spmd_status_name(s));
        for (int k = 0; k < STAGES; k++)
            if (r.error[k][0]) fprintf(stderr, "  stage %d: %s\n", k, r.error[k]);
        return 1;
    }
    if (destroyed != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_destroy: %s\n", spmd_status_name(destroyed));
        return 1;
    }

    printf("GPipe schedule: %d stages on axis \"stage\", %d micro-batches of %dx%d, ppermute i -> i+1\n\n",
           STAGES, MICRO, BATCH, WIDTH);
    printf("  step");
    for (int k = 0; k < STAGES; k++) printf("  stage %d", k);
    printf("\n");
    int schedule_ok = 1, busy = 0;
    for (int t = 0; t < STEPS; t++) {
        printf("  %4d", t);
        for (int k = 0; k < STAGES; k++) {
            int mb = r.holds[t][k], want = t - k >= 0 && t - k < MICRO ? t - k : -1;
            schedule_ok &= mb == want;
            busy += mb >= 0;
            char cell[16] = "-";
            if (mb >= 0) snprintf(cell, sizeof cell, "mb%d", mb);
            printf("%9s", cell);
        }
        printf("\n");
    }
    printf("  busy %d of %d stage-steps; the bubble is %d/%d of the time (S-1)/(M+S-1)\n\n", busy,
           STEPS * STAGES, STAGES - 1, STEPS);

    static double expect[MICRO][BATCH * WIDTH];
    sequential(expect);
    double max_diff = 0;
    printf("  micro-batch  first row out of stage %d (pipeline)      same, one thread\n", STAGES - 1);
    for (int mb = 0; mb < MICRO; mb++) {
        for (int k = 0; k < BATCH * WIDTH; k++) {
            max_diff = max_nan(max_diff, fabs(r.outputs[mb][k] - expect[mb][k]));
        }
        printf("  %11d  ", mb);
        for (int c = 0; c < WIDTH; c++) printf("%9.5f", r.outputs[mb][c]);
        printf("   ");
        for (int c = 0; c < WIDTH; c++) printf("%9.5f", expect[mb][c]);
        printf("\n");
    }
    int ok = schedule_ok && max_diff <= TOLERANCE;
    printf("\n  schedule as expected: %s; max |pipeline - sequential| over all outputs: %.1e\n",
           schedule_ok ? "yes" : "NO", max_diff);
    printf("%s: the pipelined network %s the sequential one\n", ok ? "OK" : "FAIL",
           ok ? "matches" : "does not match");
    return ok ? 0 : 1;
}
