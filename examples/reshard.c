/* reshard.c - a walkthrough of resharding on a (2,3) mesh named (x, y).

   For each transition the example prints the plan spmd_reshard chooses
   (steps, bytes each device sends, latency steps, an alpha-beta time) and
   the sharding pictures before and after, then runs it: shard_map places a
   12x6 array by the `from` spec, every device calls spmd_reshard, and the
   blocks are assembled by the `to` spec, which must give the array back. */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include <stdio.h>
#include <string.h>

typedef struct {
    spmd_spec from, to;
    spmd_reshard_plan plan; /* device 0's */
} step_arg;

static spmd_status do_reshard(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    step_arg *a = (step_arg *)user;
    spmd_reshard_plan p;
    spmd_status s = spmd_reshard(d, &in[0], &a->from, &a->to, &out[0], &p);
    if (s == SPMD_OK && spmd_device_id(d) == 0) a->plan = p;
    return s;
}

int main(void) {
    static const char *walk[][2] = {
        {"P('x', None)", "P(None, None)"},                 /* sharded -> replicated: all_gather */
        {"P(None, None)", "P('x', 'y')"},                  /* replicated -> sharded: local slices */
        {"P('x', None)", "P(None, 'x')"},                  /* an axis moves: all_to_all */
        {"P(None, None, partial='y')", "P()"},             /* partial sums -> replicated: psum */
        {"P('x', None, partial='y')", "P('x', 'y')"},      /* partial sums -> sharded: psum_scatter */
        {"P('x', 'y')", "P('y', 'x')"},                    /* both axes swap: composed */
        {"P(('x', 'y'), None)", "P(None, ('x', 'y'))"},    /* two axes move together: one all_to_all */
        {"P(('x', 'y'), None)", "P(None, ('y', 'x'))"},    /* ... in another order: one each */
    };
    spmd_mesh_desc desc;
    spmd_mesh *m;
    float G[72], R[72];
    int64_t g[2] = {12, 6};
    spmd_cost_model model;
    int i, ok = 1;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = 2; desc.shape[1] = 3;
    desc.axis_names[0] = "x"; desc.axis_names[1] = "y";
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) return 1;
    for (i = 0; i < 72; i++) G[i] = (float)i;
    memset(&model, 0, sizeof model);
    model.alpha_s = 2e-6;            /* 2 us per message */
    model.beta_s_per_byte = 1.0 / 25e9; /* 25 GB/s */
    printf("mesh (x=2, y=3), global f32 (12,6); cost model alpha 2 us, 25 GB/s\n\n");
    for (i = 0; i < (int)(sizeof walk / sizeof walk[0]); i++) {
        step_arg a;
        spmd_msg why;
        spmd_shard_map_desc sm;
        spmd_array in = spmd_array_2d(G, SPMD_F32, 12, 6), out = spmd_array_2d(R, SPMD_F32, 12, 6);
        spmd_reshard_plan plan;
        char text[4096];
        spmd_status s;
        spmd_spec_parse(walk[i][0], &a.from, NULL);
        spmd_spec_parse(walk[i][1], &a.to, NULL);
        printf("=== %d. %s -> %s ===\n", i + 1, walk[i][0], walk[i][1]);
        if (spmd_reshard_plan_make(m, &a.from, &a.to, SPMD_F32, 2, g, &model, &plan, &why) != SPMD_OK) {
            printf("no plan: %s\n", why.text);
            ok = 0;
            continue;
        }
        spmd_reshard_plan_text(&plan, text, sizeof text);
        printf("%s", text);
        spmd_sharding_text(m, &a.from, 2, g, text, sizeof text, NULL);
        printf("before:\n%s", text);
        spmd_sharding_text(m, &a.to, 2, g, text, sizeof text, NULL);
        printf("after:\n%s", text);
        memset(&sm, 0, sizeof sm);
        sm.fn = do_reshard;
        sm.user = &a;
        sm.nin = 1; sm.in = &in; sm.in_specs = &a.from;
        sm.nout = 1; sm.out = &out; sm.out_specs = &a.to;
        memset(R, 0, sizeof R);
        s = spmd_shard_map(m, &sm, &why);
        if (s != SPMD_OK || memcmp(R, G, sizeof G) != 0 || a.plan.nsteps != plan.nsteps) {
            printf("ran: %s %s -- WRONG\n\n", spmd_status_name(s), why.text);
            ok = 0;
        } else {
            printf("ran on the 6 devices: the array assembled by the new spec is the original\n\n");
        }
    }
    spmd_mesh_destroy(m);
    printf("%s\n", ok ? "OK: every transition checked" : "FAIL: some transitions failed");
    return !ok;
}
