/* shard_mlp.c - one tensor-parallel MLP layer, y = relu(x W1) W2, on a 2-D
   mesh (dp=2, tp=4): the batch is split over 'dp', the hidden layer over
   'tp' (Megatron style).

     x  (8, 16)  P('dp', None)     each device: its 4 rows, all features
     W1 (16, 32) P(None, 'tp')     column-parallel: 8 hidden units per device
     h = relu(x W1)  (4, 8)        no communication
     W2 (32, 16) P('tp', None)     row-parallel: the matching 8 rows
     y_part = h W2   (4, 16)       a partial sum over 'tp'
     y = psum(y_part, 'tp')        out P('dp', None)

   The second output shows the same partial sum resharded instead to
   P('dp', 'tp') (sequence-parallel layout): spmd_reshard picks psum_scatter,
   half the bytes of the psum. Both are compared with a serial reference;
   the program ends with "OK: ..." when both match it. */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 8, D = 16, H = 32 };

static spmd_status mlp_block(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    const float *x = (const float *)in[0].data, *w1 = (const float *)in[1].data, *w2 = (const float *)in[2].data;
    int64_t b = in[0].shape[0], dd = in[0].shape[1], h = in[1].shape[1], i, j, k;
    float hid[B * H], part[B * D];
    spmd_spec from, to;
    spmd_array pa, ya;
    spmd_reshard_plan plan;
    spmd_status s;
    for (i = 0; i < b; i++)
        for (j = 0; j < h; j++) {
            float acc = 0;
            for (k = 0; k < dd; k++) acc += x[i * dd + k] * w1[k * h + j];
            hid[i * h + j] = acc > 0 ? acc : 0; /* relu: elementwise, fine on a column block */
        }
    for (i = 0; i < b; i++)
        for (j = 0; j < dd; j++) {
            float acc = 0;
            for (k = 0; k < h; k++) acc += hid[i * h + k] * w2[k * dd + j];
            part[i * dd + j] = acc;
        }
    /* row-parallel: sum the partial products over 'tp' */
    s = spmd_psum(d, part, out[0].data, (size_t)(b * dd), SPMD_F32, "tp", NULL);
    if (s != SPMD_OK) return s;
    /* or: reshard the partial sum straight to a sharded layout */
    spmd_spec_parse("P('dp', None, partial='tp')", &from, NULL);
    spmd_spec_parse("P('dp', 'tp')", &to, NULL);
    pa = spmd_array_2d(part, SPMD_F32, b, dd);
    ya = out[1];
    s = spmd_reshard(d, &pa, &from, &to, &ya, &plan);
    if (s == SPMD_OK && spmd_device_id(d) == 0) {
        char text[1024];
        spmd_reshard_plan_text(&plan, text, sizeof text);
        printf("device 0, blocks: x (%lld,%lld), W1 (%lld,%lld), hidden (%lld,%lld)\nreshard of the partial sum:\n%s",
               (long long)b, (long long)dd, (long long)in[1].shape[0], (long long)h, (long long)b, (long long)h, text);
    }
    (void)user;
    return s;
}

/* the larger of m and x; a NaN, once seen, stays (and fails "<= 1e-4") */
static double max_nan(double m, double x) { return m != m || x <= m ? m : x; }

int main(void) {
    static float x[B * D], w1[D * H], w2[H * D], y[B * D], y2[B * D], ref[B * D];
    spmd_mesh_desc desc;
    spmd_mesh *m;
    spmd_array in[3], out[2];
    spmd_spec in_specs[3], out_specs[2];
    spmd_shard_map_desc sm;
    spmd_msg why;
    double err = 0, err2 = 0;
    int i, j, k, ok;
    for (i = 0; i < B * D; i++) x[i] = (float)((i * 7) % 11 - 5) / 8;
    for (i = 0; i < D * H; i++) w1[i] = (float)((i * 5) % 13 - 6) / 16;
    for (i = 0; i < H * D; i++) w2[i] = (float)((i * 3) % 7 - 3) / 8;
    for (i = 0; i < B; i++)
        for (j = 0; j < D; j++) {
            double acc = 0;
            for (k = 0; k < H; k++) {
                double hk = 0;
                int t;
                for (t = 0; t < D; t++) hk += (double)x[i * D + t] * w1[t * H + k];
                acc += (hk > 0 ? hk : 0) * w2[k * D + j];
            }
            ref[i * D + j] = (float)acc;
        }
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = 2; desc.shape[1] = 4;
    desc.axis_names[0] = "dp"; desc.axis_names[1] = "tp";
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) return 1;
    in[0] = spmd_array_2d(x, SPMD_F32, B, D);
    in[1] = spmd_array_2d(w1, SPMD_F32, D, H);
    in[2] = spmd_array_2d(w2, SPMD_F32, H, D);
    out[0] = spmd_array_2d(y, SPMD_F32, B, D);
    out[1] = spmd_array_2d(y2, SPMD_F32, B, D);
    spmd_spec_parse("P('dp', None)", &in_specs[0], NULL);
    spmd_spec_parse("P(None, 'tp')", &in_specs[1], NULL);
    spmd_spec_parse("P('tp', None)", &in_specs[2], NULL);
    spmd_spec_parse("P('dp', None)", &out_specs[0], NULL);
    spmd_spec_parse("P('dp', 'tp')", &out_specs[1], NULL);
    memset(&sm, 0, sizeof sm);
    sm.fn = mlp_block;
    sm.nin = 3; sm.in = in; sm.in_specs = in_specs;
    sm.nout = 2; sm.out = out; sm.out_specs = out_specs;
    if (spmd_shard_map(m, &sm, &why) != SPMD_OK) {
        fprintf(stderr, "shard_map: %s\n", why.text);
        return 1;
    }
    for (i = 0; i < B * D; i++) {
        err = max_nan(err, fabs(y[i] - ref[i]));
        err2 = max_nan(err2, fabs(y2[i] - ref[i]));
    }
    printf("\ny[0, :4] = %.4f %.4f %.4f %.4f (serial %.4f %.4f %.4f %.4f)\n", y[0], y[1], y[2], y[3], ref[0], ref[1],
           ref[2], ref[3]);
    printf("max |y - serial| = %.2g via psum, %.2g via reshard (psum_scatter)\n", err, err2);
    spmd_mesh_destroy(m);
    ok = err <= 1e-4 && err2 <= 1e-4;
    printf("%s: the sharded MLP %s the serial one (tolerance 1e-4)\n", ok ? "OK" : "FAIL",
           ok ? "matches" : "does not match");
    return !ok;
}
