/* shard_matmul.c - the shard_map tutorial's first chapters in C.

   matmul_basic: A (8x16) sharded P('row','col'), B (16x4) sharded
   P('col', None) on a (4,2) mesh; every device multiplies its blocks and
   psums over 'col'; out_specs P('row', None) stacks the rows back. Then
   in_specs replication (a 12x10 input under P('row', None) comes back as
   12x20 under P('row','col')), out_specs un-tiling ((4,2), (4,1), (1,1)),
   and the replication check rejecting an output that varies along an axis
   its out_spec says is replicated. */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include <stdio.h>
#include <string.h>

static spmd_spec P(const char *text) {
    spmd_spec s;
    spmd_msg why;
    if (spmd_spec_parse(text, &s, &why) != SPMD_OK) fprintf(stderr, "%s\n", why.text);
    return s;
}

static void print_shape(const char *label, const spmd_array *a) {
    int i;
    printf("%s(", label);
    for (i = 0; i < a->rank; i++) printf("%s%lld", i ? ", " : "", (long long)a->shape[i]);
    printf("%s)", a->rank == 1 ? "," : "");
}

/* matmul_basic_sharded: local dot product, then psum over the contracting axis. */
static spmd_status matmul_block(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    const float *a = (const float *)in[0].data, *b = (const float *)in[1].data;
    float *c = (float *)out[0].data;
    int64_t n = in[0].shape[0], k = in[0].shape[1], m = in[1].shape[1], i, j, t;
    (void)user;
    if (spmd_device_id(d) == 0) {
        print_shape("Each wizard received A_frag: ", &in[0]);
        print_shape(", B_frag: ", &in[1]);
        printf("\n");
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < m; j++) {
            float acc = 0;
            for (t = 0; t < k; t++) acc += a[i * k + t] * b[t * m + j];
            c[i * m + j] = acc;
        }
    return spmd_psum(d, c, c, (size_t)(n * m), SPMD_F32, "col", NULL);
}

static spmd_status identity(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    size_t n = 1;
    int i;
    (void)d; (void)user;
    for (i = 0; i < in[0].rank; i++) n *= (size_t)in[0].shape[i];
    memcpy(out[0].data, in[0].data, n * sizeof(float));
    return SPMD_OK;
}

static spmd_status constant(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)d; (void)in;
    ((float *)out[0].data)[0] = *(const float *)user;
    return SPMD_OK;
}

static void print_matrix(const float *x, int64_t rows, int64_t cols) {
    int64_t i, j;
    printf("[");
    for (i = 0; i < rows; i++) {
        printf("%s[", i ? "\n " : "");
        for (j = 0; j < cols; j++) printf("%s%g.", j ? " " : "", x[i * cols + j]);
        printf("]");
    }
    printf("]\n");
}

int main(void) {
    static float A[8 * 16], B[16 * 4], C[8 * 4], ref[8 * 4], X[12 * 10], Y[12 * 20], U[8];
    spmd_mesh_desc desc;
    spmd_mesh *mesh, *m1;
    spmd_shard_map_desc sm;
    spmd_array in[2], out[1];
    spmd_spec in_specs[2], out_specs[1];
    spmd_msg why;
    char pic[2048];
    int i, j, t, ok = 1;
    float val;

    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = 4; desc.shape[1] = 2;
    desc.axis_names[0] = "row"; desc.axis_names[1] = "col";
    if (spmd_mesh_create(&desc, &mesh) != SPMD_OK) return 1;
    printf("Our wizarding mesh: (row: 4, col: 2), %d devices\n\n", spmd_mesh_size(mesh));

    /* ---- matmul_basic ---- */
    for (i = 0; i < 8 * 16; i++) A[i] = (float)i;
    for (i = 0; i < 16 * 4; i++) B[i] = (float)i;
    in[0] = spmd_array_2d(A, SPMD_F32, 8, 16);
    in[1] = spmd_array_2d(B, SPMD_F32, 16, 4);
    out[0] = spmd_array_2d(C, SPMD_F32, 8, 4);
    in_specs[0] = P("P('row', 'col')");
    in_specs[1] = P("P('col', None)");
    out_specs[0] = P("P('row', None)");
    memset(&sm, 0, sizeof sm);
    sm.fn = matmul_block;
    sm.nin = 2; sm.in = in; sm.in_specs = in_specs;
    sm.nout = 1; sm.out = out; sm.out_specs = out_specs;
    printf("Casting matmul_basic_sharded:\n");
    if (spmd_shard_map(mesh, &sm, &why) != SPMD_OK) { fprintf(stderr, "%s\n", why.text); return 1; }
    print_shape("\nShape of original scroll_A: ", &in[0]);
    print_shape("\nShape of original scroll_B: ", &in[1]);
    print_shape("\nShape of the sharded result scroll_C: ", &out[0]);
    printf("\nA peek at the resulting scroll_C_sharded (first 2 rows):\n");
    print_matrix(C, 2, 4);
    for (i = 0; i < 8; i++)
        for (j = 0; j < 4; j++) {
            double acc = 0;
            for (t = 0; t < 16; t++) acc += (double)A[i * 16 + t] * B[t * 4 + j];
            ref[i * 4 + j] = (float)acc;
        }
    printf("A peek at the single wizard's scroll_C (first 2 rows):\n");
    print_matrix(ref, 2, 4);
    ok &= memcmp(C, ref, sizeof C) == 0;
    printf("\n%s\n\n", ok ? "Spell Succeeded! Our sharded spell matches the single wizard's calculation."
                          : "Spell Miscast! The sharded result differs.");
    printf("Sharding of the resulting scroll C:\n");
    spmd_sharding_text(mesh, &out_specs[0], 2, out[0].shape, pic, sizeof pic, NULL);
    printf("%s\nscroll A under its in_spec:\n", pic);
    spmd_sharding_text(mesh, &in_specs[0], 2, in[0].shape, pic, sizeof pic, NULL);
    printf("%s\nscroll B under its in_spec:\n", pic);
    spmd_sharding_text(mesh, &in_specs[1], 2, in[1].shape, pic, sizeof pic, NULL);
    printf("%s\n", pic);

    /* ---- in_specs: replication along 'col' ---- */
    for (i = 0; i < 12 * 10; i++) X[i] = (float)i;
    in[0] = spmd_array_2d(X, SPMD_F32, 12, 10);
    out[0] = spmd_array_2d(Y, SPMD_F32, 12, 20);  /* C has no tracing: we state the output's shape */
    in_specs[0] = P("P('row', None)");
    out_specs[0] = P("P('row', 'col')");
    sm.fn = identity;
    sm.nin = 1;
    print_shape("Original input_array_in_specs shape: ", &in[0]);
    if (spmd_shard_map(mesh, &sm, &why) != SPMD_OK) { fprintf(stderr, "%s\n", why.text); return 1; }
    print_shape("\nOutput shape from process_with_in_specs: ", &out[0]);
    for (i = 0; i < 12; i++)
        for (j = 0; j < 20; j++) ok &= Y[i * 20 + j] == X[i * 10 + j % 10];
    printf("\n(every row holds its 10 values twice: the two 'col' devices got the same block)\n\n");

    /* ---- out_specs: tiling and un-tiling ---- */
    {
        const char *specs[3] = {"P('row', 'col')", "P('row', None)", "P(None, None)"};
        int64_t shapes[3][2] = {{4, 2}, {4, 1}, {1, 1}};
        for (t = 0; t < 3; t++) {
            val = (float)(t + 1);
            out[0] = spmd_array_2d(U, SPMD_F32, shapes[t][0], shapes[t][1]);
            out_specs[0] = P(specs[t]);
            sm.fn = constant;
            sm.user = &val;
            sm.nin = 0;
            if (spmd_shard_map(mesh, &sm, &why) != SPMD_OK) { fprintf(stderr, "%s\n", why.text); return 1; }
            printf("Result with out_specs=%s:\n", specs[t]);
            print_matrix(U, shapes[t][0], shapes[t][1]);
            print_shape("Shape: ", &out[0]);
            printf("\n\n");
            for (i = 0; i < shapes[t][0] * shapes[t][1]; i++) ok &= U[i] == val;
        }
    }

    /* ---- the replication check ---- */
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = 2;
    desc.axis_names[0] = "batch_dim";
    if (spmd_mesh_create(&desc, &m1) != SPMD_OK) return 1;
    {
        float v[6] = {0, 1, 2, 3, 4, 5}, r[3];
        spmd_status s;
        in[0] = spmd_array_1d(v, SPMD_F32, 6);
        out[0] = spmd_array_1d(r, SPMD_F32, 3);
        in_specs[0] = P("P('batch_dim')");
        out_specs[0] = P("P()");
        sm.fn = identity;
        sm.user = NULL;
        sm.nin = 1;
        printf("Attempting to run incorrect_out_specs_example (expect an error):\n");
        s = spmd_shard_map(m1, &sm, &why);
        printf("%s: %s\n", spmd_status_name(s), why.text);
        ok &= s == SPMD_ERR_MISMATCH;
    }
    spmd_mesh_destroy(m1);
    spmd_mesh_destroy(mesh);
    printf("\n%s\n", ok ? "OK: all results as the tutorial prints them" : "FAIL: results differ from the tutorial's");
    return !ok;
}
