/* moe.c - mixture-of-experts token dispatch with spmd_ragged_all_to_all.

   4 devices on axis "expert"; device e holds expert e and 8 tokens of its
   own. A top-1 router sends every token to one expert, so each device has a
   different number of tokens for each expert: a ragged exchange.

     1. route: sort the tokens by expert; send_sizes[e] and input_offsets[e]
        say which rows of the sorted tokens go to expert e;
     2. spmd_alltoall tells every expert how many rows come from each device
        (recv_sizes) and where the sender keeps them (for the way back);
     3. an expert stores what it receives in sender order, so the rows from
        device j start at recv_offsets[j] = recv_sizes[0] + .. + recv_sizes[j-1];
        a second spmd_alltoall hands each sender these offsets: they are its
        output_offsets (where its slice lands on the receiver, as in JAX);
     4. spmd_ragged_all_to_all dispatches the tokens;
     5. expert e applies itself: multiply by e + 1;
     6. a second ragged_all_to_all with the roles swapped brings every result
        back to the row its token came from; un-sorting restores token order.

   main checks that every token came back multiplied by its expert's factor
   and that both sides agree on how many tokens went where; exit 1 if not.

   Build: gcc -O2 -std=c11 -Wall -Wextra -pthread -I. examples/moe.c -o build/moe -lm */
#ifndef SPMD_TEST_LINKED_IMPL /* make test links one shared copy (tests/impl.c) */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EXPERTS 4                    /* devices, one expert each */
#define TOKENS 8                     /* tokens per device */
#define HIDDEN 2                     /* features per token */
#define CAPACITY (EXPERTS * TOKENS)  /* rows an expert might receive, at worst */

/* Token t of device d: a point at a scrambled angle, radius 1 + t/8. */
static void make_token(int d, int t, double x[HIDDEN]) {
    double n = d * TOKENS + t, angle = 2.5 * n * n / 7 + 0.3, radius = 1.0 + t / 8.0;
    x[0] = radius * cos(angle);
    x[1] = radius * sin(angle);
}

/* The router: one gate vector per expert, pointing at 0, 90, 180, 270
   degrees; a token goes to the expert whose gate scores it highest. */
static int route(const double x[HIDDEN]) {
    static const double gate[EXPERTS][HIDDEN] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
    int best = 0;
    for (int e = 1; e < EXPERTS; e++)
        if (gate[e][0] * x[0] + gate[e][1] * x[1] > gate[best][0] * x[0] + gate[best][1] * x[1]) best = e;
    return best;
}

/* What expert e does to a token. */
static double expert_apply(int e, double v) { return (e + 1) * v; }

typedef struct {
    int expert_of[EXPERTS][TOKENS];
    int64_t send_sizes[EXPERTS][EXPERTS], input_offsets[EXPERTS][EXPERTS];
    int64_t output_offsets[EXPERTS][EXPERTS], recv_sizes[EXPERTS][EXPERTS];
    double result[EXPERTS][TOKENS][HIDDEN];      /* tokens after the round trip */
    char error[EXPERTS][640];
} moe_result;

static int failed(moe_result *r, spmd_dev *d, spmd_status s, const char *what) {
    if (s == SPMD_OK) return 0;
    snprintf(r->error[spmd_device_id(d)], sizeof r->error[0], "%s: %s: %s", what, spmd_status_name(s),
             spmd_last_error(d));
    return 1;
}

static void device_fn(spmd_dev *d, void *arg) {
    moe_result *r = arg;
    int me = spmd_axis_index(d, "expert");
    if (me < 0) {
        failed(r, d, (spmd_status)-me, "axis_index");
        return;
    }

    /* 1. route, then sort the tokens by expert (stable) */
    double tokens[TOKENS][HIDDEN], sorted[TOKENS][HIDDEN];
    int slot[TOKENS];                                    /* row of token t in sorted */
    int64_t send_sizes[EXPERTS] = {0}, input_offsets[EXPERTS];
    for (int t = 0; t < TOKENS; t++) {
        make_token(me, t, tokens[t]);
        r->expert_of[me][t] = route(tokens[t]);
        send_sizes[r->expert_of[me][t]]++;
    }
    int64_t fill[EXPERTS];
    for (int e = 0, at = 0; e < EXPERTS; at += (int)send_sizes[e], e++) input_offsets[e] = fill[e] = at;
    for (int t = 0; t < TOKENS; t++) {
        slot[t] = (int)fill[r->expert_of[me][t]]++;
        memcpy(sorted[slot[t]], tokens[t], sizeof tokens[t]);
    }

    /* 2. per expert: how many rows, and where they sit here */
    int64_t announce[EXPERTS][2], heard[EXPERTS][2];
    for (int e = 0; e < EXPERTS; e++) announce[e][0] = send_sizes[e], announce[e][1] = input_offsets[e];
    if (failed(r, d, spmd_alltoall(d, announce, heard, 2, SPMD_I64, "expert", NULL), "alltoall sizes"))
        return;
    int64_t recv_sizes[EXPERTS], home_offsets[EXPERTS], recv_offsets[EXPERTS], output_offsets[EXPERTS];
    int64_t received = 0;
    for (int j = 0; j < EXPERTS; j++) {
        recv_sizes[j] = heard[j][0];
        home_offsets[j] = heard[j][1];
        recv_offsets[j] = received;                      /* 3. rows from j start here */
        received += recv_sizes[j];
    }
    if (failed(r, d, spmd_alltoall(d, recv_offsets, output_offsets, 1, SPMD_I64, "expert", NULL),
               "alltoall offsets"))
        return;

    /* 4. dispatch */
    static double inbox[EXPERTS][CAPACITY][HIDDEN], outbox[EXPERTS][CAPACITY][HIDDEN];
    spmd_array send = spmd_array_2d(sorted, SPMD_F64, TOKENS, HIDDEN);
    spmd_array in = spmd_array_2d(inbox[me], SPMD_F64, CAPACITY, HIDDEN);
    if (failed(r, d,
               spmd_ragged_all_to_all(d, &send, &in, input_offsets, send_sizes, output_offsets, recv_sizes,
                                      EXPERTS, "expert", NULL),
               "ragged_all_to_all dispatch"))
        return;

    /* 5. the expert */
    for (int64_t row = 0; row < received; row++)
        for (int f = 0; f < HIDDEN; f++) outbox[me][row][f] = expert_apply(me, inbox[me][row][f]);

    /* 6. combine: back to where each token came from, then un-sort */
    double back[TOKENS][HIDDEN];
    spmd_array out = spmd_array_2d(outbox[me], SPMD_F64, CAPACITY, HIDDEN);
    spmd_array home = spmd_array_2d(back, SPMD_F64, TOKENS, HIDDEN);
    if (failed(r, d,
               spmd_ragged_all_to_all(d, &out, &home, recv_offsets, recv_sizes, home_offsets, send_sizes,
                                      EXPERTS, "expert", NULL),
               "ragged_all_to_all combine"))
        return;
    for (int t = 0; t < TOKENS; t++) memcpy(r->result[me][t], back[slot[t]], sizeof back[0]);

    memcpy(r->send_sizes[me], send_sizes, sizeof send_sizes);
    memcpy(r->input_offsets[me], input_offsets, sizeof input_offsets);
    memcpy(r->output_offsets[me], output_offsets, sizeof output_offsets);
    memcpy(r->recv_sizes[me], recv_sizes, sizeof recv_sizes);
}

static void print_i64(const char *name, const int64_t *v) {
    printf("  %s [", name);
    for (int k = 0; k < EXPERTS; k++) printf(k ? " %lld" : "%lld", (long long)v[k]);
    printf("]");
}

int main(void) {
    spmd_mesh_desc desc = {0};
    desc.ndim = 1;
    desc.shape[0] = EXPERTS;
    desc.axis_names[0] = "expert";
    desc.timeout_ms = 10000;
    spmd_mesh *m;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_create: %s\n", spmd_status_string(s));
        return 1;
    }
    static moe_result r;
    s = spmd_run(m, device_fn, &r);
    spmd_status destroyed = spmd_mesh_destroy(m);
    if (s != SPMD_OK) {
        fprintf(stderr, "spmd_run: %s\n", spmd_status_name(s));
        for (int k = 0; k < EXPERTS; k++)
            if (r.error[k][0]) fprintf(stderr, "  device %d: %s\n", k, r.error[k]);
        return 1;
    }
    if (destroyed != SPMD_OK) {
        fprintf(stderr, "spmd_mesh_destroy: %s\n", spmd_status_name(destroyed));
        return 1;
    }

    printf("Mixture of experts: %d devices on axis \"expert\", %d tokens each, top-1 routing\n\n", EXPERTS,
           TOKENS);
    printf("tokens per (source device, expert), as the senders counted them:\n\n  source  ");
    for (int e = 0; e < EXPERTS; e++) printf(" expert %d", e);
    printf("   total\n");
    int64_t per_expert[EXPERTS] = {0};
    for (int j = 0; j < EXPERTS; j++) {
        printf("  %6d  ", j);
        for (int e = 0; e < EXPERTS; e++) printf("%9lld", (long long)r.send_sizes[j][e]);
        printf("%8d\n", TOKENS);
        for (int e = 0; e < EXPERTS; e++) per_expert[e] += r.send_sizes[j][e];
    }
    printf("  %6s  ", "total");
    for (int e = 0; e < EXPERTS; e++) printf("%9lld", (long long)per_expert[e]);
    printf("%8d\n\n", EXPERTS * TOKENS);

    printf("the arguments of the dispatch (the combine swaps send and recv sides):\n");
    for (int j = 0; j < EXPERTS; j++) {
        printf("  device %d, experts of tokens 0..%d: ", j, TOKENS - 1);
        for (int t = 0; t < TOKENS; t++) printf(t ? " %d" : "%d", r.expert_of[j][t]);
        printf("\n   ");
        print_i64("input_offsets", r.input_offsets[j]);
        print_i64("send_sizes", r.send_sizes[j]);
        print_i64("output_offsets", r.output_offsets[j]);
        print_i64("recv_sizes", r.recv_sizes[j]);
        printf("\n");
    }

    /* every token must come back as its expert's result; both sides must
       agree on the sizes; the device's router must agree with main's */
    int bad_tokens = 0, bad_sizes = 0;
    for (int j = 0; j < EXPERTS; j++)
        for (int e = 0; e < EXPERTS; e++) bad_sizes += r.recv_sizes[e][j] != r.send_sizes[j][e];
    for (int j = 0; j < EXPERTS; j++)
        for (int t = 0; t < TOKENS; t++) {
            double x[HIDDEN];
            make_token(j, t, x);
            int e = route(x);
            bad_tokens += e != r.expert_of[j][t];
            for (int f = 0; f < HIDDEN; f++) bad_tokens += r.result[j][t][f] != expert_apply(e, x[f]);
        }

    printf("\ndevice 0's tokens after the round trip (expert e multiplies by e+1):\n");
    for (int t = 0; t < TOKENS; t++) {
        double x[HIDDEN];
        make_token(0, t, x);
        printf("  token %d  (%8.4f, %8.4f)  -> expert %d ->  (%8.4f, %8.4f)\n", t, x[0], x[1],
               r.expert_of[0][t], r.result[0][t][0], r.result[0][t][1]);
    }
    int ok = bad_tokens == 0 && bad_sizes == 0;
    printf("\n%s: %d of %d tokens came back wrong, %d size entries disagree\n", ok ? "OK" : "FAIL",
           bad_tokens, EXPERTS * TOKENS, bad_sizes);
    return ok ? 0 : 1;
}
