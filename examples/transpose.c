/* transpose.c - a distributed matrix transpose with spmd_all_to_all.

   An 8x8 matrix A is split by rows over 4 devices on axis "i": device i
   holds rows 2i and 2i+1, a (2,8) array. To end with rows 2i, 2i+1 of the
   transpose, device i needs columns 2i, 2i+1 of A, a piece of every
   device. One all_to_all moves them:

     all_to_all(x, split_axis=1, concat_axis=0, tiled): x is cut along the
     columns into 4 blocks of 2x2; block j goes to device j, which stacks
     the blocks it receives in sender order along the rows. Device i then
     holds out (8,2) with out[2j+a][b] = A[2j+a][2i+b]: columns 2i, 2i+1 of A.

   A local transpose of that (8,2) array (each received 2x2 block transposed
   and the blocks laid side by side) gives y (2,8) with
   y[b][2j+a] = A[2j+a][2i+b] = A^T[2i+b][2j+a]: rows 2i, 2i+1 of A^T.

   Entries are 10*row + column, so the transpose reads as swapped digits.
   main checks the result against a plain transpose; exit 1 if different.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/transpose.c -o build/transpose -lm */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <stdio.h>
#include <string.h>

#define N 8                  /* the matrix is N x N */
#define DEVICES 4
#define ROWS (N / DEVICES)   /* rows per device */

typedef struct {
    int32_t before[DEVICES][ROWS][N];     /* each device's rows of A */
    int32_t middle[DEVICES][N][ROWS];     /* after the all_to_all */
    int32_t after[DEVICES][ROWS][N];      /* after the local transpose */
    char error[DEVICES][640];
} transpose_result;

static void device_fn(spmd_dev *d, void *arg) {
    transpose_result *r = arg;
    int i = spmd_axis_index(d, "i");
    if (i < 0) {
        snprintf(r->error[spmd_device_id(d)], sizeof r->error[0], "axis_index: %s", spmd_last_error(d));
        return;
    }
    int32_t x[ROWS][N], out[N][ROWS], y[ROWS][N];
    for (int a = 0; a < ROWS; a++)
        for (int c = 0; c < N; c++) x[a][c] = 10 * (ROWS * i + a) + c;

    spmd_array xv = spmd_array_2d(x, SPMD_I32, ROWS, N);
    spmd_array outv = spmd_array_2d(out, SPMD_I32, N, ROWS);
    spmd_status s = spmd_all_to_all(d, &xv, &outv, "i", /*split_axis*/ 1, /*concat_axis*/ 0, /*tiled*/ 1,
                                    NULL);
    if (s != SPMD_OK) {
        snprintf(r->error[i], sizeof r->error[0], "all_to_all: %s: %s", spmd_status_name(s),
                 spmd_last_error(d));
        return;
    }
    for (int b = 0; b < ROWS; b++)
        for (int c = 0; c < N; c++) y[b][c] = out[c][b];

    memcpy(r->before[i], x, sizeof x);
    memcpy(r->middle[i], out, sizeof out);
    memcpy(r->after[i], y, sizeof y);
}

/* The matrix, ROWS rows per device, with the owning device on the left. */
static void print_by_rows(int32_t m[DEVICES][ROWS][N]) {
    for (int i = 0; i < DEVICES; i++)
        for (int a = 0; a < ROWS; a++) {
            printf(a ? "             " : "  device %d   ", i);
            for (int c = 0; c < N; c++) printf(" %02d", (int)m[i][a][c]);
            printf("\n");
        }
}

int main(void) {
    spmd_mesh_desc desc = {0};
    desc.ndim = 1;
    desc.shape[0] = DEVICES;
    desc.axis_names[0] = "i";
    desc.timeout_ms = 10000;
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_string(s));
        return 1;
    }
    static transpose_result r;
    s = spmd_run(m, device_fn, &r);
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

    printf("A, %dx%d, entry 10*row + column; device i holds rows %di..%di+%d:\n\n", N, N, ROWS, ROWS,
           ROWS - 1);
    print_by_rows(r.before);

    printf("\nafter all_to_all(split_axis=1, concat_axis=0, tiled): device i holds an (%d,%d) array,\n"
           "columns %di..%di+%d of A (devices side by side):\n\n  ", N, ROWS, ROWS, ROWS, ROWS - 1);
    for (int i = 0; i < DEVICES; i++) printf(" device %d%*s", i, 3 * ROWS - 6, "");
    printf("\n");
    for (int row = 0; row < N; row++) {
        printf("  ");
        for (int i = 0; i < DEVICES; i++) {
            for (int b = 0; b < ROWS; b++) printf(" %02d", (int)r.middle[i][row][b]);
            printf(i + 1 < DEVICES ? "  |" : "\n");
        }
    }

    printf("\nafter the local transpose: device i holds rows %di..%di+%d of A^T:\n\n", ROWS, ROWS, ROWS - 1);
    print_by_rows(r.after);

    int wrong = 0;
    for (int i = 0; i < DEVICES; i++)
        for (int a = 0; a < ROWS; a++)
            for (int c = 0; c < N; c++) {
                int row = ROWS * i + a;                  /* row of A^T */
                wrong += r.after[i][a][c] != 10 * c + row;   /* = A[c][row] */
            }
    printf("\n%s: %d of %d entries differ from the plain transpose\n", wrong ? "FAIL" : "OK", wrong, N * N);
    return wrong ? 1 : 0;
}
