/* tour.c - a tour of spmdcoll: every collective of jax.lax and the
   MPI-style operations of mpi4jax, each on a small example (JAX's own
   where its documentation has one), then a named (4,2) mesh, a barrier,
   async requests and an error shown on purpose.

   Every device writes what it saw into arrays owned by main; main prints
   them after spmd_run returns, in device order, so threads never print.
   A result that every device shares is printed once ("on every device").
   Each result with a known answer is checked; the tour exits 1 if any
   differs (marked MISMATCH) or if a library call fails.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/tour.c -o build/tour */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NI 4 /* devices on axis "i" */
#define ND 8 /* devices of the (4,2) mesh */

/* ---- running, checking, printing ---------------------------------------- */

static char failure[ND][640]; /* first failed call of each device, for main to print */
static int mismatches;        /* results that differ from the expected ones */

/* In a device: 1 if s is SPMD_OK, else note the failure and return 0. */
static int ok(spmd_dev *d, spmd_status s, const char *what) {
    int id = spmd_device_id(d);
    if (s == SPMD_OK) return 1;
    if (id >= 0 && id < ND && !failure[id][0])
        snprintf(failure[id], sizeof failure[id], "%s: %s: %s", what, spmd_status_name(s),
                 spmd_last_error(d));
    return 0;
}

/* In a device: its index along axes, or -1 (failure noted) on error. */
static int index_on(spmd_dev *d, const char *axes) {
    int i = spmd_axis_index(d, axes);
    return i >= 0 || ok(d, (spmd_status)-i, "axis_index") ? i : -1;
}

/* In a device function: run a call, return from the function if it failed. */
#define TRY(call, what)                        \
    do {                                       \
        if (!ok(d, (call), what)) return;      \
    } while (0)

static void run(spmd_mesh *m, spmd_fn fn, void *arg, const char *what) {
    spmd_status s = spmd_run(m, fn, arg);
    if (s == SPMD_OK) return;
    fprintf(stderr, "%s: spmd_run returned %s\n", what, spmd_status_name(s));
    for (int id = 0; id < ND; id++)
        if (failure[id][0]) fprintf(stderr, "  device %d: %s\n", id, failure[id]);
    exit(1);
}

static spmd_mesh *make_mesh(int ndim, const int *shape, const char *const *names) {
    spmd_mesh_desc desc = {0};
    desc.ndim = ndim;
    desc.timeout_ms = 10000; /* a failing tour ends in seconds */
    for (int k = 0; k < ndim; k++) {
        desc.shape[k] = shape[k];
        desc.axis_names[k] = names[k];
    }
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s (%s)\n", spmd_status_name(s), spmd_status_string(s));
        exit(1);
    }
    return m;
}

/* The shape of one device's value: a scalar, a vector, or a matrix. */
typedef struct { int rows, cols; } shape; /* rows 0: vector; cols 0 too: scalar */
#define SCALAR ((shape){0, 0})
#define VEC(n) ((shape){0, (n)})
#define MAT(r, c) ((shape){(r), (c)})

static int count_of(shape s) { return (s.rows ? s.rows : 1) * (s.cols ? s.cols : 1); }

/* "7", "[1 2 3]" or "[[1 2] [3 4]]" */
static void fmt(char *buf, size_t n, const float *v, shape s) {
    size_t len = 0;
#define PUT(...) (void)(len < n ? len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__) : 0)
    if (!s.cols) {
        PUT("%g", (double)v[0]);
        return;
    }
    int rows = s.rows ? s.rows : 1;
    PUT(s.rows ? "[" : "");
    for (int r = 0; r < rows; r++) {
        PUT(r ? " [" : "[");
        for (int c = 0; c < s.cols; c++) PUT(c ? " %g" : "%g", (double)v[r * s.cols + c]);
        PUT("]");
    }
    PUT(s.rows ? "]" : "");
#undef PUT
}

#define LABEL 40

/* One line: a label, then the value of each of ndev devices (v, one every
   stride floats), or the value once when all agree. want (nwant floats), if
   not NULL, is the expected value of every device in turn, or a single value
   that every device must have. */
static void print_row(const char *label, const float *v, int stride, int ndev, shape s, const float *want,
                      int nwant) {
    char cell[256];
    int n = count_of(s), same = 1, bad = 0, want_all = nwant == n;
    for (int k = 1; k < ndev; k++) same &= memcmp(v + k * stride, v, sizeof(float) * n) == 0;
    if (want && nwant != n && nwant != n * ndev) {
        printf("  %s: the tour expects %d values, not %d\n", label, n * ndev, nwant);
        mismatches++;
        return;
    }
    for (int k = 0; want && k < ndev; k++)
        for (int e = 0; e < n; e++) bad |= v[k * stride + e] != want[(want_all ? 0 : k * n) + e];
    printf("  %-*s", LABEL, label);
    if (same && ndev > 1) {
        fmt(cell, sizeof cell, v, s);
        printf("on every device %s", cell);
    } else
        for (int k = 0; k < ndev; k++) {
            fmt(cell, sizeof cell, v + k * stride, s);
            printf(k ? "  %s" : "%s", cell);
        }
    if (bad) {
        mismatches++;
        printf("   <- MISMATCH, expected");
        for (int k = 0; k < (want_all ? 1 : ndev); k++) {
            fmt(cell, sizeof cell, want + k * n, s);
            printf(" %s", cell);
        }
    }
    printf("\n");
}

/* arr is float[devices][values]: SHOW prints it; EXPECT prints and checks
   it against the values listed: one value per device, or a single value
   for every device. */
#define PER_DEVICE(arr) &(arr)[0][0], (int)(sizeof(arr)[0] / sizeof(float)), \
                        (int)(sizeof(arr) / sizeof(arr)[0])
#define WANT(...) (const float[]){__VA_ARGS__}, (int)(sizeof((const float[]){__VA_ARGS__}) / sizeof(float))
#define SHOW(label, arr, s) print_row(label, PER_DEVICE(arr), s, NULL, 0)
#define EXPECT(label, arr, s, ...) print_row(label, PER_DEVICE(arr), s, WANT(__VA_ARGS__))

/* Shorthands for views of small float buffers. */
static spmd_array vec(float *p, int64_t n) { return spmd_array_1d(p, SPMD_F32, n); }
static spmd_array mat(float *p, int64_t r, int64_t c) { return spmd_array_2d(p, SPMD_F32, r, c); }
static spmd_array scalar(float *p) { return spmd_array_nd(p, SPMD_F32, 0, NULL); }

/* ---- 1. reductions, one value per device --------------------------------- */

typedef struct {
    float x[NI][1], x1[NI][1], y[NI][1];
    float sum[NI][1], mean[NI][1], max[NI][1], min[NI][1], prod[NI][1], grouped[NI][1], allmax[NI][1];
    float argmax[NI][1], argmin[NI][1];
} scalars;

static const int pairs[] = {0, 1, 2, 3}; /* axis_index_groups [[0,1],[2,3]] */

static void reductions(spmd_dev *d, void *arg) {
    scalars *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    float x = (float)i, x1 = x + 1, y = (float[]){3, 1, 4, 1}[i];   /* y has a tie */
    int32_t am, an;
    spmd_opts groups = {.groups = pairs, .group_size = 2};
    r->x[i][0] = x, r->x1[i][0] = x1, r->y[i][0] = y;
    TRY(spmd_psum(d, &x, r->sum[i], 1, SPMD_F32, "i", NULL), "psum");
    TRY(spmd_pmean(d, &x, r->mean[i], 1, SPMD_F32, "i", NULL), "pmean");
    TRY(spmd_pmax(d, &x, r->max[i], 1, SPMD_F32, "i", NULL), "pmax");
    TRY(spmd_pmin(d, &x, r->min[i], 1, SPMD_F32, "i", NULL), "pmin");
    TRY(spmd_pprod(d, &x1, r->prod[i], 1, SPMD_F32, "i", NULL), "pprod");
    TRY(spmd_pargmax(d, &y, &am, 1, SPMD_F32, "i", NULL), "pargmax");
    TRY(spmd_pargmin(d, &y, &an, 1, SPMD_F32, "i", NULL), "pargmin");
    TRY(spmd_psum(d, &x, r->grouped[i], 1, SPMD_F32, "i", &groups), "psum groups");
    TRY(spmd_allreduce(d, &y, r->allmax[i], 1, SPMD_F32, SPMD_OP_MAX, "i", NULL), "allreduce");
    r->argmax[i][0] = (float)am, r->argmin[i][0] = (float)an;
}

static void section_reductions(spmd_mesh *m) {
    static scalars r;
    run(m, reductions, &r, "reductions");
    printf("1. Reductions over 4 devices on axis \"i\", one value per device (device 0..3)\n");
    SHOW("x = arange(4)", r.x, SCALAR);
    EXPECT("psum(x)", r.sum, SCALAR, 6);
    EXPECT("pmean(x)", r.mean, SCALAR, 1.5f);
    EXPECT("pmax(x)", r.max, SCALAR, 3);
    EXPECT("pmin(x)", r.min, SCALAR, 0);
    EXPECT("psum(x, groups [[0,1],[2,3]])", r.grouped, SCALAR, 1, 1, 5, 5);
    SHOW("x + 1", r.x1, SCALAR);
    EXPECT("pprod(x + 1)", r.prod, SCALAR, 24);
    SHOW("y", r.y, SCALAR);
    EXPECT("pargmax(y)", r.argmax, SCALAR, 2);
    EXPECT("pargmin(y)  (tie: smallest index)", r.argmin, SCALAR, 1);
    EXPECT("allreduce(y, SPMD_OP_MAX)", r.allmax, SCALAR, 4);
}

/* ---- 2. one row of arange(16).reshape(4,4) per device ---------------------- */

typedef struct {
    float x[NI][4], sum[NI][4], grouped[NI][4];
    float scattered[NI][1], scattered_tiled[NI][1], scattered_groups[NI][2];
    float a2a[NI][4], swapped[NI][4];
} rows;

static const int cross[] = {0, 2, 3, 1}; /* axis_index_groups [[0,2],[3,1]] */

static void row_ops(spmd_dev *d, void *arg) {
    rows *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    spmd_opts pairs_opt = {.groups = pairs, .group_size = 2}, cross_opt = {.groups = cross, .group_size = 2};
    for (int k = 0; k < 4; k++) r->x[i][k] = (float)(4 * i + k);
    spmd_array x = vec(r->x[i], 4);
    spmd_array s0 = scalar(r->scattered[i]), s1 = vec(r->scattered_tiled[i], 1);
    spmd_array s2 = vec(r->scattered_groups[i], 2), a = vec(r->a2a[i], 4), w = vec(r->swapped[i], 4);
    TRY(spmd_psum(d, r->x[i], r->sum[i], 4, SPMD_F32, "i", NULL), "psum");
    TRY(spmd_psum(d, r->x[i], r->grouped[i], 4, SPMD_F32, "i", &pairs_opt), "psum groups");
    TRY(spmd_psum_scatter(d, &x, &s0, "i", 0, 0, NULL), "psum_scatter");
    TRY(spmd_psum_scatter(d, &x, &s1, "i", 0, 1, NULL), "psum_scatter tiled");
    TRY(spmd_psum_scatter(d, &x, &s2, "i", 0, 1, &cross_opt), "psum_scatter groups");
    TRY(spmd_all_to_all(d, &x, &a, "i", 0, 0, 1, NULL), "all_to_all");
    TRY(spmd_pswapaxes(d, &x, &w, "i", 0, NULL), "pswapaxes");
}

static void section_rows(spmd_mesh *m) {
    static rows r;
    run(m, row_ops, &r, "row operations");
    printf("\n2. x = arange(16).reshape(4,4), device j holding row j\n");
    SHOW("x", r.x, VEC(4));
    EXPECT("psum(x)", r.sum, VEC(4), 24, 28, 32, 36);
    EXPECT("psum(x, groups [[0,1],[2,3]])", r.grouped, VEC(4), 4, 6, 8, 10, 4, 6, 8, 10, 20, 22, 24, 26, 20,
           22, 24, 26);
    EXPECT("psum_scatter(x)", r.scattered, SCALAR, 24, 28, 32, 36);
    EXPECT("psum_scatter(x, tiled)", r.scattered_tiled, VEC(1), 24, 28, 32, 36);
    EXPECT("psum_scatter(x, tiled, [[0,2],[3,1]])", r.scattered_groups, VEC(2), 8, 10, 20, 22, 12, 14, 16,
           18);
    EXPECT("all_to_all(x, 0, 0, tiled)", r.a2a, VEC(4), 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    EXPECT("pswapaxes(x, 0)", r.swapped, VEC(4), 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* ---- 3. all_gather ------------------------------------------------------- */

typedef struct {
    float x[NI][1], tiled[NI][4], stacked[NI][4], invariant[NI][4];
    float x2[NI][2], stacked1[NI][8];
} gathers;

static void gather_ops(spmd_dev *d, void *arg) {
    gathers *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    r->x[i][0] = (float)i;
    r->x2[i][0] = (float)i, r->x2[i][1] = (float)(10 + i);
    spmd_array x = vec(r->x[i], 1), x2 = vec(r->x2[i], 2);
    spmd_array t = vec(r->tiled[i], 4), s = mat(r->stacked[i], 4, 1), v = vec(r->invariant[i], 4);
    spmd_array s1 = mat(r->stacked1[i], 2, 4);
    TRY(spmd_all_gather(d, &x, &t, "i", 0, 1, NULL), "all_gather tiled");
    TRY(spmd_all_gather(d, &x, &s, "i", 0, 0, NULL), "all_gather");
    TRY(spmd_all_gather_invariant(d, &x, &v, "i", 0, 1, NULL), "all_gather_invariant");
    TRY(spmd_all_gather(d, &x2, &s1, "i", 1, 0, NULL), "all_gather axis 1");
}

static void section_gather(spmd_mesh *m) {
    static gathers r;
    run(m, gather_ops, &r, "all_gather");
    printf("\n3. all_gather: x = arange(4), one element per device\n");
    SHOW("x", r.x, VEC(1));
    EXPECT("all_gather(x, tiled)", r.tiled, VEC(4), 0, 1, 2, 3);
    EXPECT("all_gather(x)  (a new axis 0)", r.stacked, MAT(4, 1), 0, 1, 2, 3);
    EXPECT("all_gather_invariant(x, tiled)", r.invariant, VEC(4), 0, 1, 2, 3);
    SHOW("x2 = [j, 10+j]", r.x2, VEC(2));
    EXPECT("all_gather(x2, axis=1)", r.stacked1, MAT(2, 4), 0, 1, 2, 3, 10, 11, 12, 13);
}

/* ---- 4. moving whole arrays: ppermute, pshuffle, pbroadcast -------------- */

typedef struct { float x[NI][1], rotated[NI][1], shifted[NI][1], shuffled[NI][1], broadcast[NI][1]; } moves;

static const int rotate[] = {0, 1, 1, 2, 2, 3, 3, 0}; /* (i, i+1 mod 4) */
static const int shift[] = {0, 1, 1, 2, 2, 3};        /* nobody sends to 0 */
static const int shuffle[] = {2, 3, 0, 1};            /* out_i = x_perm[i] */

static void move_ops(spmd_dev *d, void *arg) {
    moves *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    r->x[i][0] = (float)i;
    spmd_array x = vec(r->x[i], 1);
    spmd_array a = vec(r->rotated[i], 1), b = vec(r->shifted[i], 1), c = vec(r->shuffled[i], 1);
    spmd_array e = vec(r->broadcast[i], 1);
    TRY(spmd_ppermute(d, &x, &a, "i", rotate, 4, NULL), "ppermute");
    TRY(spmd_ppermute(d, &x, &b, "i", shift, 3, NULL), "ppermute shift");
    TRY(spmd_pshuffle(d, &x, &c, "i", shuffle, NULL), "pshuffle");
    TRY(spmd_pbroadcast(d, &x, &e, "i", 2, NULL), "pbroadcast");
}

static void section_moves(spmd_mesh *m) {
    static moves r;
    run(m, move_ops, &r, "ppermute, pshuffle, pbroadcast");
    printf("\n4. ppermute, pshuffle, pbroadcast: x = arange(4)\n");
    SHOW("x", r.x, VEC(1));
    EXPECT("ppermute(x, [(0,1),(1,2),(2,3),(3,0)])", r.rotated, VEC(1), 3, 0, 1, 2);
    EXPECT("ppermute(x, [(0,1),(1,2),(2,3)])", r.shifted, VEC(1), 0, 0, 1, 2);
    EXPECT("pshuffle(x, [2,3,0,1])", r.shuffled, VEC(1), 2, 3, 0, 1);
    EXPECT("pbroadcast(x, source=2)", r.broadcast, VEC(1), 2);
    printf("  (device 0 is no destination of the second ppermute: it gets zeros)\n");
}

/* ---- 5. ragged_all_to_all: the example of JAX's docstring, 2 devices ----- */

typedef struct {
    float operand[2][3], output[2][4], input_offsets[2][2], send_sizes[2][2];
    float output_offsets[2][2], recv_sizes[2][2], result[2][4];
} ragged;

static void ragged_op(spmd_dev *d, void *arg) {
    ragged *r = arg;
    static const int32_t operand[2][3] = {{1, 2, 2}, {3, 4, 0}};
    static const int64_t in_off[2][2] = {{0, 1}, {0, 1}}, send[2][2] = {{1, 2}, {1, 1}};
    static const int64_t out_off[2][2] = {{0, 0}, {1, 2}}, recv[2][2] = {{1, 1}, {2, 1}};
    int i = index_on(d, "i");
    if (i < 0) return;
    int32_t x[3], out[4] = {0, 0, 0, 0};
    memcpy(x, operand[i], sizeof x);
    for (int k = 0; k < 4; k++) r->output[i][k] = (float)out[k];
    for (int k = 0; k < 3; k++) r->operand[i][k] = (float)x[k];
    for (int k = 0; k < 2; k++) {
        r->input_offsets[i][k] = (float)in_off[i][k], r->send_sizes[i][k] = (float)send[i][k];
        r->output_offsets[i][k] = (float)out_off[i][k], r->recv_sizes[i][k] = (float)recv[i][k];
    }
    spmd_array xv = spmd_array_1d(x, SPMD_I32, 3), ov = spmd_array_1d(out, SPMD_I32, 4);
    TRY(spmd_ragged_all_to_all(d, &xv, &ov, in_off[i], send[i], out_off[i], recv[i], 2, "i", NULL),
        "ragged_all_to_all");
    for (int k = 0; k < 4; k++) r->result[i][k] = (float)out[k];
}

static void section_ragged(spmd_mesh *m) {
    static ragged r;
    run(m, ragged_op, &r, "ragged_all_to_all");
    printf("\n5. ragged_all_to_all, JAX's example on 2 devices (axis index 0, 1)\n");
    SHOW("operand", r.operand, VEC(3));
    SHOW("output (before)", r.output, VEC(4));
    SHOW("input_offsets", r.input_offsets, VEC(2));
    SHOW("send_sizes", r.send_sizes, VEC(2));
    SHOW("output_offsets (on the receiver)", r.output_offsets, VEC(2));
    SHOW("recv_sizes", r.recv_sizes, VEC(2));
    EXPECT("result", r.result, VEC(4), 1, 3, 0, 0, 2, 2, 4, 0);
}

/* ---- 6. MPI-style operations (mpi4jax's names) --------------------------- */

typedef struct {
    float x[NI][1], blocks[NI][4], allgathered[NI][4], exchanged[NI][4], bcast[NI][1];
    float gathered[NI][4], scattered[NI][1], reduced[NI][1];
    float x1[NI][1], scan[NI][1], y[NI][1], scan_max[NI][1];
} mpi_view;

static void mpi_ops(spmd_dev *d, void *arg) {
    mpi_view *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    float x = (float)i, x1 = x + 1, y = (float[]){3, 1, 4, 1}[i];
    float root_data[4] = {100, 101, 102, 103};                  /* read on the root only */
    r->x[i][0] = x, r->x1[i][0] = x1, r->y[i][0] = y;
    for (int k = 0; k < 4; k++) r->blocks[i][k] = (float)(10 * i + k);
    for (int k = 0; k < 4; k++) r->gathered[i][k] = -1;     /* -1: not written */
    r->reduced[i][0] = -1;
    r->bcast[i][0] = 10 * x1;                                  /* bcast in place */
    TRY(spmd_allgather(d, &x, r->allgathered[i], 1, SPMD_F32, "i", NULL), "allgather");
    TRY(spmd_alltoall(d, r->blocks[i], r->exchanged[i], 1, SPMD_F32, "i", NULL), "alltoall");
    TRY(spmd_bcast(d, r->bcast[i], r->bcast[i], 1, SPMD_F32, 1, "i", NULL), "bcast");
    TRY(spmd_gather(d, &x, r->gathered[i], 1, SPMD_F32, 0, "i", NULL), "gather");
    TRY(spmd_scatter(d, root_data, r->scattered[i], 1, SPMD_F32, 0, "i", NULL), "scatter");
    TRY(spmd_reduce(d, &x, r->reduced[i], 1, SPMD_F32, SPMD_OP_SUM, 3, "i", NULL), "reduce");
    TRY(spmd_scan(d, &x1, r->scan[i], 1, SPMD_F32, SPMD_OP_SUM, "i", NULL), "scan");
    TRY(spmd_scan(d, &y, r->scan_max[i], 1, SPMD_F32, SPMD_OP_MAX, "i", NULL), "scan max");
}

static void section_mpi(spmd_mesh *m) {
    static mpi_view r;
    run(m, mpi_ops, &r, "MPI-style operations");
    printf("\n6. MPI-style operations on axis \"i\" (roots are group indices; -1: recv left untouched)\n");
    SHOW("x", r.x, SCALAR);
    EXPECT("allgather(x)", r.allgathered, VEC(4), 0, 1, 2, 3);
    SHOW("blocks = 10*j + arange(4)", r.blocks, VEC(4));
    EXPECT("alltoall(blocks)", r.exchanged, VEC(4), 0, 10, 20, 30, 1, 11, 21, 31, 2, 12, 22, 32, 3, 13, 23,
           33);
    EXPECT("bcast(10*(x+1), root=1)", r.bcast, SCALAR, 20);
    EXPECT("gather(x, root=0)", r.gathered, VEC(4), 0, 1, 2, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
           -1);
    EXPECT("scatter([100 101 102 103], root=0)", r.scattered, SCALAR, 100, 101, 102, 103);
    EXPECT("reduce(x, SUM, root=3)", r.reduced, SCALAR, -1, -1, -1, 6);
    SHOW("x + 1", r.x1, SCALAR);
    EXPECT("scan(x + 1, SUM)  (inclusive)", r.scan, SCALAR, 1, 3, 6, 10);
    SHOW("y", r.y, SCALAR);
    EXPECT("scan(y, MAX)", r.scan_max, SCALAR, 3, 3, 4, 4);
}

/* ---- 6b. point to point: psend/precv, send/recv, sendrecv ---------------- */

typedef struct {
    float x[NI][1], halves[NI][1], ring[NI][1], from[NI][1], got[NI][1], tag[NI][1];
} p2p_view;

static void p2p_ops(spmd_dev *d, void *arg) {
    p2p_view *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    float x = (float)i, v = 100.0f + (float)i;
    spmd_array xa = vec(&x, 1), ha = vec(r->halves[i], 1);
    spmd_req *token;
    spmd_recv_info info;
    r->x[i][0] = x;
    /* psend/precv: the two halves of ppermute(x, i -> i+1 mod 4) */
    TRY(spmd_psend(d, &xa, "i", rotate, 4, NULL, &token), "psend");
    TRY(spmd_precv(d, token, &ha, "i", rotate, 4, NULL), "precv");
    /* sendrecv around the ring, then everyone sends to device 0, which takes
       the messages in whatever order they come, by source and tag */
    TRY(spmd_sendrecv(d, &x, 1, (i + 1) % NI, 7, r->ring[i], 1, (i + NI - 1) % NI, 7, SPMD_F32, "i", NULL, NULL),
        "sendrecv");
    r->from[i][0] = r->got[i][0] = r->tag[i][0] = -1;
    if (i != 0) {
        TRY(spmd_send(d, &v, 1, SPMD_F32, 0, 40 + i, "i", NULL), "send");
    } else {
        float sum = 0, got;
        for (int k = 1; k < NI; k++) {
            TRY(spmd_recv(d, &got, 1, SPMD_F32, SPMD_ANY_SOURCE, SPMD_ANY_TAG, "i", NULL, &info), "recv");
            sum += got;
        }
        r->got[0][0] = sum;
    }
    if (i == 2) TRY(spmd_send(d, &v, 1, SPMD_F32, 1, 9, "i", NULL), "send 2 -> 1");
    if (i == 1) {
        float got;
        TRY(spmd_recv(d, &got, 1, SPMD_F32, 2, 9, "i", NULL, &info), "recv 1 <- 2");
        r->from[1][0] = (float)info.source, r->tag[1][0] = (float)info.tag, r->got[1][0] = got;
    }
}

static void section_p2p(spmd_mesh *m) {
    static p2p_view r;
    run(m, p2p_ops, &r, "point to point");
    printf("\n6b. Point to point on axis \"i\" (-1: nothing received)\n");
    SHOW("x", r.x, SCALAR);
    EXPECT("psend + precv (i -> i+1 mod 4)", r.halves, VEC(1), 3, 0, 1, 2);
    EXPECT("sendrecv(x, to i+1, from i-1)", r.ring, SCALAR, 3, 0, 1, 2);
    EXPECT("recv: on 0 sum of 3 (any source); on 1 (2, tag 9)", r.got, SCALAR, 306, 102, -1, -1);
    EXPECT("recv(source=2, tag=9) on 1: source", r.from, SCALAR, -1, 2, -1, -1);
    EXPECT("recv(source=2, tag=9) on 1: tag", r.tag, SCALAR, -1, 9, -1, -1);
}

/* ---- 7 and 8. a (4,2) mesh named ("row","col") ----------------------------- */

static const char *const axes_list[] = {"row", "col", "row,col", "col,row"};

typedef struct {
    int coords[ND][2];
    int index[ND][4], size[ND][4]; /* per entry of axes_list */
    float x[ND][1], sum_row[ND][1], sum_col[ND][1], sum_all[ND][1];
} mesh_view;

static void mesh_queries(spmd_dev *d, void *arg) {
    mesh_view *r = arg;
    int id = spmd_device_id(d);
    if (id < 0 || id >= ND) return;
    spmd_device_coords(d, r->coords[id]);
    for (int a = 0; a < 4; a++) {
        r->index[id][a] = spmd_axis_index(d, axes_list[a]);
        r->size[id][a] = spmd_axis_size(d, axes_list[a]);
    }
    r->x[id][0] = (float)id;
    TRY(spmd_psum(d, r->x[id], r->sum_row[id], 1, SPMD_F32, "row", NULL), "psum row");
    TRY(spmd_psum(d, r->x[id], r->sum_col[id], 1, SPMD_F32, "col", NULL), "psum col");
    TRY(spmd_psum(d, r->x[id], r->sum_all[id], 1, SPMD_F32, "row,col", NULL), "psum row,col");
}

static void section_mesh(spmd_mesh *m) {
    static mesh_view r;
    run(m, mesh_queries, &r, "mesh queries");
    printf("\n7. A (4,2) mesh with axes (\"row\",\"col\"): axis_index/axis_size per device\n");
    printf("  %-8s%-8s", "device", "coords");
    for (int a = 0; a < 4; a++) printf(a < 3 ? "%-11s" : "%s\n", axes_list[a]);
    for (int id = 0; id < ND; id++) {
        int row = id / 2, col = id % 2;                     /* ids are row-major */
        int want_index[4] = {row, col, 2 * row + col, 4 * col + row}, want_size[4] = {4, 2, 8, 8};
        int bad = r.coords[id][0] != row || r.coords[id][1] != col;
        printf("  %-8d(%d,%d)   ", id, r.coords[id][0], r.coords[id][1]);
        for (int a = 0; a < 4; a++) {
            char cell[24];
            snprintf(cell, sizeof cell, "%d/%d", r.index[id][a], r.size[id][a]);
            printf(a < 3 ? "%-11s" : "%s", cell);
            bad |= r.index[id][a] != want_index[a] || r.size[id][a] != want_size[a];
        }
        if (bad) mismatches++, printf("   <- MISMATCH");
        printf("\n");
    }
    printf("\n8. psum of the device id over \"row\", over \"col\", over \"row,col\" (device 0..7)\n");
    SHOW("x = device id", r.x, SCALAR);
    EXPECT("psum(x, \"row\")", r.sum_row, SCALAR, 12, 16, 12, 16, 12, 16, 12, 16);
    EXPECT("psum(x, \"col\")", r.sum_col, SCALAR, 1, 1, 5, 5, 9, 9, 13, 13);
    EXPECT("psum(x, \"row,col\")", r.sum_all, SCALAR, 28);
}

/* ---- 9. barrier: nobody leaves before everybody arrived ------------------ */

typedef struct { atomic_int arrived; float seen[ND][1]; } barrier_view;

static void barrier_demo(spmd_dev *d, void *arg) {
    barrier_view *r = arg;
    int id = spmd_device_id(d);
    atomic_fetch_add(&r->arrived, 1);
    TRY(spmd_barrier(d, "row,col", NULL), "barrier");
    r->seen[id][0] = (float)atomic_load(&r->arrived);
}

static void section_barrier(spmd_mesh *m) {
    static barrier_view r;
    run(m, barrier_demo, &r, "barrier");
    printf("\n9. Barrier over \"row,col\": arrivals counted by each device after it\n");
    EXPECT("arrivals seen", r.seen, SCALAR, 8);
}

/* ---- 10. async: start, compute while it runs, wait ----------------------- */

#define LEN 4096

typedef struct { double local[ND]; float sum[ND][1]; } async_view;

static void async_demo(spmd_dev *d, void *arg) {
    async_view *r = arg;
    int id = spmd_device_id(d);
    static float buf[ND][LEN]; /* owned by the library while in flight */
    for (int k = 0; k < LEN; k++) buf[id][k] = 1.0f;
    spmd_req *req;
    TRY(spmd_psum_start(d, buf[id], buf[id], LEN, SPMD_F32, "row,col", NULL, &req), "psum_start");
    double local = 0; /* unrelated work, overlapped */
    for (int k = 1; k <= 100000; k++) local += (double)(id + 1) / ((double)k * k);
    r->local[id] = local;
    TRY(spmd_wait(req), "wait");
    r->sum[id][0] = buf[id][LEN - 1];
}

typedef struct { float x[NI][1], rotated[NI][1], gathered[NI][4], prefix[NI][1]; } async_many_view;

/* Three requests in flight at once: poll the first, wait for the others together. */
static void async_many(spmd_dev *d, void *arg) {
    async_many_view *r = arg;
    int i = index_on(d, "i");
    if (i < 0) return;
    r->x[i][0] = (float)i;
    spmd_array x = vec(r->x[i], 1), out = vec(r->rotated[i], 1);
    spmd_req *req[3] = {NULL, NULL, NULL};
    TRY(spmd_ppermute_start(d, &x, &out, "i", rotate, 4, NULL, &req[0]), "ppermute_start");
    TRY(spmd_allgather_start(d, r->x[i], r->gathered[i], 1, SPMD_F32, "i", NULL, &req[1]), "allgather_start");
    TRY(spmd_scan_start(d, r->x[i], r->prefix[i], 1, SPMD_F32, SPMD_OP_SUM, "i", NULL, &req[2]),
        "scan_start");
    int done = 0;
    while (!done) TRY(spmd_test(req[0], &done), "test");
    req[0] = NULL; /* finished and freed by spmd_test */
    TRY(spmd_wait_all(req, 3), "wait_all");
}

static void section_async(spmd_mesh *grid, spmd_mesh *line4) {
    static async_view r;
    static async_many_view q;
    run(grid, async_demo, &r, "async");
    printf("\n10. Async: psum_start of %d ones over \"row,col\", local work, spmd_wait\n", LEN);
    printf("  %-8s%-26s%s\n", "device", "local: (id+1)*sum 1/k^2", "psum, last element");
    for (int id = 0; id < ND; id++) {
        printf("  %-8d%-26.6f%g\n", id, r.local[id], (double)r.sum[id][0]);
        if (r.sum[id][0] != ND) mismatches++, printf("  <- MISMATCH, expected %d\n", ND);
    }
    run(line4, async_many, &q, "async, three requests");
    printf("  three requests in flight on axis \"i\": spmd_test polls the first, spmd_wait_all the rest\n");
    SHOW("x", q.x, VEC(1));
    EXPECT("ppermute_start(x, i -> i+1 mod 4)", q.rotated, VEC(1), 3, 0, 1, 2);
    EXPECT("allgather_start(x)", q.gathered, VEC(4), 0, 1, 2, 3);
    EXPECT("scan_start(x, SUM)", q.prefix, VEC(1), 0, 1, 3, 6);
}

/* ---- 11. an error on purpose: one device passes no recv buffer ------------ */

typedef struct { spmd_status status[ND]; char message[2][640]; } error_view;

static void error_demo(spmd_dev *d, void *arg) {
    error_view *r = arg;
    int id = spmd_device_id(d);
    float x = 1, y;
    r->status[id] = spmd_psum(d, &x, id == 0 ? NULL : &y, 1, SPMD_F32, "row", NULL); /* device 0: no recv */
    if (id < 2) snprintf(r->message[id], sizeof r->message[id], "%s", spmd_last_error(d));
}

static void section_error(spmd_mesh *m) {
    static error_view r;
    spmd_status run_status = spmd_run(m, error_demo, &r);
    printf("\n11. An error on purpose: device 0 calls psum over \"row\" with recv = NULL\n");
    printf("  device 0 got %s: %s\n", spmd_status_name(r.status[0]), r.message[0]);
    printf("  its group's other members fail the same call (it keeps its place), e.g. device 2 got %s\n",
           spmd_status_name(r.status[2]));
    printf("  device 1, in another group, got %s: %s\n", spmd_status_name(r.status[1]),
           r.status[1] ? r.message[1] : "its psum is done");
    printf("  spmd_run returned %s; ", spmd_status_name(run_status));
    static barrier_view again;
    spmd_status after = spmd_run(m, barrier_demo, &again);
    printf("the mesh is still usable: a barrier afterwards returns %s\n", spmd_status_name(after));
    if (r.status[0] != SPMD_ERR_NULL || r.status[2] != SPMD_ERR_REFUSED || r.status[1] != SPMD_OK ||
        run_status == SPMD_OK || after != SPMD_OK) {
        mismatches++;
        printf("  <- MISMATCH, expected SPMD_ERR_NULL, SPMD_ERR_REFUSED, SPMD_OK, then SPMD_OK\n");
    }
}

int main(void) {
    spmd_mesh *line4 = make_mesh(1, (int[]){NI}, (const char *[]){"i"});
    spmd_mesh *pair = make_mesh(1, (int[]){2}, (const char *[]){"i"});
    spmd_mesh *grid = make_mesh(2, (int[]){4, 2}, (const char *[]){"row", "col"});
    printf("spmdcoll %s tour\n\n", spmd_version());
    section_reductions(line4);
    section_rows(line4);
    section_gather(line4);
    section_moves(line4);
    section_ragged(pair);
    section_mpi(line4);
    section_p2p(line4);
    section_mesh(grid);
    section_barrier(grid);
    section_async(grid, line4);
    section_error(grid);
    spmd_mesh *meshes[] = {line4, pair, grid};
    for (int k = 0; k < 3; k++)
        if (spmd_mesh_destroy(meshes[k]) != SPMD_OK) {
            fprintf(stderr, "spmd_mesh_destroy failed\n");
            return 1;
        }
    if (mismatches) {
        printf("\nFAIL: %d result%s differ%s from the expected values\n", mismatches,
               mismatches > 1 ? "s" : "", mismatches > 1 ? "" : "s");
        return 1;
    }
    printf("\nOK: every result above matches its expected value\n");
    return 0;
}
