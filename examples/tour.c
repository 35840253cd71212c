/* tour.c - a tour of spmdcoll: the reductions of jax.lax on 4 devices, a
   named (4,2) mesh, a barrier, an async psum and an error shown on purpose.

   Every device writes what it saw into arrays owned by main; main prints
   them after spmd_run returns, in device order, so threads never print.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/tour.c -o build/tour */
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NI 4 /* devices on axis "i" */
#define ND 8 /* devices of the (4,2) mesh */

static void must(spmd_status s, const char *what) {
    if (s != SPMD_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, spmd_status_name(s), spmd_status_string(s));
        exit(1);
    }
}

static spmd_mesh *make_mesh(int ndim, const int *shape, const char *const *names) {
    spmd_mesh_desc desc = {0};
    desc.ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        desc.shape[k] = shape[k];
        desc.axis_names[k] = names[k];
    }
    spmd_mesh *m;
    must(spmd_mesh_create(&desc, &m), "spmd_mesh_create");
    return m;
}

/* "[a b c d]" for n floats, padded to width w */
static void show(const float *v, int n, int w) {
    char buf[128];
    int len = snprintf(buf, sizeof buf, "[");
    for (int k = 0; k < n; k++)
        len += snprintf(buf + len, sizeof buf - len, "%s%g", k ? " " : "", (double)v[k]);
    snprintf(buf + len, sizeof buf - len, "]");
    printf("%-*s", w, buf);
}

static void show_i32(const int32_t *v, int n, int w) {
    float f[ND];
    for (int k = 0; k < n; k++) f[k] = (float)v[k];
    show(f, n, w);
}

/* ---- 1. one value per device: psum, pmean, pmax, pmin, pprod, pargmax, pargmin */

typedef struct {
    float x[NI], x1[NI], y[NI];                 /* inputs per device */
    float sum[NI], mean[NI], max[NI], min[NI], prod[NI], grouped[NI];
    int32_t argmax[NI], argmin[NI];
} scalars;

static const int pairs[] = {0, 1, 2, 3}; /* axis_index_groups [[0,1],[2,3]] */

static void reductions(spmd_dev *d, void *arg) {
    scalars *r = arg;
    int i = spmd_axis_index(d, "i");
    float x = (float)i;                               /* arange(4)     */
    float x1 = x + 1;                                 /* arange(4) + 1 */
    float y = (float[]){3, 1, 4, 1}[i];               /* has a tie     */
    spmd_opts groups = {.groups = pairs, .group_size = 2};
    r->x[i] = x, r->x1[i] = x1, r->y[i] = y;
    spmd_psum(d, &x, &r->sum[i], 1, SPMD_F32, "i", NULL);
    spmd_pmean(d, &x, &r->mean[i], 1, SPMD_F32, "i", NULL);
    spmd_pmax(d, &x, &r->max[i], 1, SPMD_F32, "i", NULL);
    spmd_pmin(d, &x, &r->min[i], 1, SPMD_F32, "i", NULL);
    spmd_pprod(d, &x1, &r->prod[i], 1, SPMD_F32, "i", NULL);
    spmd_pargmax(d, &y, &r->argmax[i], 1, SPMD_F32, "i", NULL);
    spmd_pargmin(d, &y, &r->argmin[i], 1, SPMD_F32, "i", NULL);
    spmd_psum(d, &x, &r->grouped[i], 1, SPMD_F32, "i", &groups);
}

static void row(const char *op, const float *in, const float *out) {
    printf("  %-34s", op);
    show(in, NI, 14);
    show(out, NI, 0);
    printf("\n");
}

static void section_reductions(spmd_mesh *m) {
    scalars r;
    must(spmd_run(m, reductions, &r), "reductions");
    printf("1. Reductions over 4 devices on axis \"i\", one value per device\n");
    printf("  %-34s%-14s%s\n", "operation", "input", "result (device 0..3)");
    row("psum(x)", r.x, r.sum);
    row("pmean(x)", r.x, r.mean);
    row("pmax(x)", r.x, r.max);
    row("pmin(x)", r.x, r.min);
    row("pprod(x + 1)", r.x1, r.prod);
    printf("  %-34s", "pargmax(y)");
    show(r.y, NI, 14);
    show_i32(r.argmax, NI, 0);
    printf("\n");
    printf("  %-34s", "pargmin(y)  (tie: smallest index)");
    show(r.y, NI, 14);
    show_i32(r.argmin, NI, 0);
    printf("\n");
    row("psum(x, groups [[0,1],[2,3]])", r.x, r.grouped);
}

/* ---- 2. arrays: device j holds row j of arange(16).reshape(4,4) */

typedef struct { float in[NI][4], sum[NI][4], grouped[NI][4]; } rows;

static void row_sums(spmd_dev *d, void *arg) {
    rows *r = arg;
    int j = spmd_axis_index(d, "i");
    spmd_opts groups = {.groups = pairs, .group_size = 2};
    for (int k = 0; k < 4; k++) r->in[j][k] = (float)(4 * j + k);
    spmd_psum(d, r->in[j], r->sum[j], 4, SPMD_F32, "i", NULL);
    spmd_psum(d, r->in[j], r->grouped[j], 4, SPMD_F32, "i", &groups);
}

static void section_rows(spmd_mesh *m) {
    rows r;
    must(spmd_run(m, row_sums, &r), "row sums");
    printf("\n2. psum of arange(16).reshape(4,4), device j holding row j\n");
    printf("  %-8s%-16s%-16s%s\n", "device", "input", "psum", "psum, groups [[0,1],[2,3]]");
    for (int j = 0; j < NI; j++) {
        printf("  %-8d", j);
        show(r.in[j], 4, 16);
        show(r.sum[j], 4, 16);
        show(r.grouped[j], 4, 0);
        printf("\n");
    }
}

/* ---- 3 and 4. a (4,2) mesh named ("row","col") */

static const char *const axes_list[] = {"row", "col", "row,col", "col,row"};

typedef struct {
    int coords[ND][2];
    int index[ND][4], size[ND][4];     /* per entry of axes_list */
    float x[ND], sum_row[ND], sum_col[ND], sum_all[ND];
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
    r->x[id] = (float)id;
    spmd_psum(d, &r->x[id], &r->sum_row[id], 1, SPMD_F32, "row", NULL);
    spmd_psum(d, &r->x[id], &r->sum_col[id], 1, SPMD_F32, "col", NULL);
    spmd_psum(d, &r->x[id], &r->sum_all[id], 1, SPMD_F32, "row,col", NULL);
}

static void section_mesh(spmd_mesh *m) {
    mesh_view r;
    must(spmd_run(m, mesh_queries, &r), "mesh queries");
    printf("\n3. A (4,2) mesh with axes (\"row\",\"col\"): axis_index/axis_size per device\n");
    printf("  %-8s%-8s", "device", "coords");
    for (int a = 0; a < 4; a++) printf(a < 3 ? "%-11s" : "%s\n", axes_list[a]);
    for (int id = 0; id < ND; id++) {
        printf("  %-8d(%d,%d)   ", id, r.coords[id][0], r.coords[id][1]);
        for (int a = 0; a < 4; a++) {
            char cell[16];
            snprintf(cell, sizeof cell, "%d/%d", r.index[id][a], r.size[id][a]);
            printf(a < 3 ? "%-11s" : "%s\n", cell);
        }
    }
    printf("\n4. psum of the device id over \"row\", over \"col\", over \"row,col\"\n");
    printf("  %-8s%-6s%-12s%-12s%s\n", "device", "x", "over row", "over col", "over row,col");
    for (int id = 0; id < ND; id++)
        printf("  %-8d%-6g%-12g%-12g%g\n", id, (double)r.x[id], (double)r.sum_row[id],
               (double)r.sum_col[id], (double)r.sum_all[id]);
}

/* ---- 5. barrier: nobody leaves before everybody arrived */

typedef struct { atomic_int arrived; int seen[ND]; } barrier_view;

static void barrier_demo(spmd_dev *d, void *arg) {
    barrier_view *r = arg;
    int id = spmd_device_id(d);
    atomic_fetch_add(&r->arrived, 1);
    spmd_barrier(d, "row,col", NULL);
    r->seen[id] = atomic_load(&r->arrived);     /* always 8 */
}

static void section_barrier(spmd_mesh *m) {
    barrier_view r = {0};
    must(spmd_run(m, barrier_demo, &r), "barrier");
    printf("\n5. Barrier over \"row,col\": arrivals counted by each device after it\n  ");
    for (int id = 0; id < ND; id++) printf("%d ", r.seen[id]);
    printf("  (every device saw all %d)\n", ND);
}

/* ---- 6. async: start a psum, compute while it runs, wait */

#define LEN 4096

typedef struct { double local[ND]; float sum[ND]; } async_view;

static void async_demo(spmd_dev *d, void *arg) {
    async_view *r = arg;
    int id = spmd_device_id(d);
    static float buf[ND][LEN];                 /* owned by the library while in flight */
    for (int k = 0; k < LEN; k++) buf[id][k] = 1.0f;
    spmd_req *req;
    if (spmd_psum_start(d, buf[id], buf[id], LEN, SPMD_F32, "row,col", NULL, &req) != SPMD_OK)
        return;
    double local = 0;                          /* unrelated work, overlapped */
    for (int k = 1; k <= 100000; k++) local += (double)(id + 1) / ((double)k * k);
    r->local[id] = local;
    if (spmd_wait(req) == SPMD_OK) r->sum[id] = buf[id][LEN - 1];
}

static void section_async(spmd_mesh *m) {
    async_view r = {0};
    must(spmd_run(m, async_demo, &r), "async");
    printf("\n6. Async: psum_start of %d ones over \"row,col\", local work, spmd_wait\n", LEN);
    printf("  %-8s%-26s%s\n", "device", "local: (id+1)*sum 1/k^2", "psum, last element");
    for (int id = 0; id < ND; id++)
        printf("  %-8d%-26.6f%g\n", id, r.local[id], (double)r.sum[id]);
}

/* ---- 7. an error on purpose: an axis the mesh does not have */

typedef struct { spmd_status status[ND]; char message[256]; } error_view;

static void error_demo(spmd_dev *d, void *arg) {
    error_view *r = arg;
    int id = spmd_device_id(d);
    float x = 1, y;
    r->status[id] = spmd_psum(d, &x, &y, 1, SPMD_F32, "rows", NULL);   /* typo: "rows" */
    if (id == 0) snprintf(r->message, sizeof r->message, "%.200s", spmd_last_error(d));
}

static void section_error(spmd_mesh *m) {
    error_view r;
    spmd_status run = spmd_run(m, error_demo, &r);
    printf("\n7. An error on purpose: psum over \"rows\" on a mesh with \"row\" and \"col\"\n");
    printf("  device 0 got %s (%s)\n", spmd_status_name(r.status[0]),
           spmd_status_string(r.status[0]));
    printf("  spmd_last_error: %s\n", r.message);
    printf("  spmd_run returned %s; ", spmd_status_name(run));
    barrier_view again = {0};
    printf("the mesh is still usable: a barrier afterwards returns %s\n",
           spmd_status_name(spmd_run(m, barrier_demo, &again)));
}

int main(void) {
    spmd_mesh *line = make_mesh(1, (int[]){NI}, (const char *[]){"i"});
    spmd_mesh *grid = make_mesh(2, (int[]){4, 2}, (const char *[]){"row", "col"});
    printf("spmdcoll %s tour\n\n", spmd_version());
    section_reductions(line);
    section_rows(line);
    section_mesh(grid);
    section_barrier(grid);
    section_async(grid);
    section_error(grid);
    must(spmd_mesh_destroy(line), "destroy");
    must(spmd_mesh_destroy(grid), "destroy");
    return 0;
}
