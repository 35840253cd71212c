/* test_mpi.c - conformance sweep of the MPI-style collectives (mpi4jax's
   list): allgather, alltoall, bcast, gather, scatter, reduce, scan, and
   their _start forms.

   For each mesh the main thread lays out a batch of cases (operation, axes
   and axis_index_groups, dtype, op, count, root, in place, NULL buffers on
   non-roots, algorithm hint, sync or async), fills every device's buffers
   from a seeded RNG (recv buffers with a sentinel), runs one spmd_run in
   which every device performs the whole batch in order, and then computes
   each device's expected recv with a plain reference (loops over the group
   members' send buffers in group order) and compares it bit for bit (floats:
   any NaN equals any NaN). Rooted operations: the root's recv holds the
   result and every other device's recv still holds the sentinel. One
   T_CHECK per case. Then refused calls (status, buffers untouched, mesh
   still usable), mpi4jax-style hand vectors and large counts.

   Env: SPMD_TEST_SEED=n replaces the seed (printed); SPMD_TEST_QUICK=1 cuts
   the 1<<18-element counts to about 1<<16 bytes (sanitizer builds);
   SPMD_TEST_QUICK=N (N >= 2) also keeps one sweep case (or async cluster)
   in N (the fabric matrix). Under several processes each process checks
   its own devices. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS (the unused-buffer test's PROT_NONE page) */
#endif
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define GUARD 64
#define FILL 0x6B /* the sentinel in every recv before a call */
#define RNG_SALT 0xBB67AE8584CAA73Bull /* this test's RNG streams */

/* ---- utilities ------------------------------------------------------------------- */
static const spmd_op OPS[] = {SPMD_OP_SUM, SPMD_OP_PROD, SPMD_OP_MAX, SPMD_OP_MIN,
                              SPMD_OP_MEAN, SPMD_OP_ARGMAX, SPMD_OP_ARGMIN};
#define NOP 7
static const char *opnm(spmd_op o) {
    static const char *n[] = {"none", "sum", "prod", "max", "min", "mean", "argmax", "argmin"};
    return (unsigned)o < 8 ? n[o] : "bad";
}
static int isarg(spmd_op o) { return o == SPMD_OP_ARGMAX || o == SPMD_OP_ARGMIN; }
static int issigned(spmd_dtype t) { return t == SPMD_I8 || t == SPMD_I16 || t == SPMD_I32 || t == SPMD_I64; }
/* element size of a reduction's result */
static size_t res_size(spmd_dtype t, spmd_op o) {
    if (isarg(o) || (t == SPMD_BOOL && o == SPMD_OP_SUM)) return 4;
    return dsize(t);
}
/* ---- the reference reductions ------------------------------------------------------
   n inputs ins[0..n-1] (group order), count elements, into out. */
static void ref_red_int(spmd_dtype dt, spmd_op op, int n, unsigned char *const *ins, size_t count, unsigned char *out) {
    size_t es = dsize(dt);
    int sg = issigned(dt);
    for (size_t e = 0; e < count; e++) {
        uint64_t u[MAXDEV];
        int64_t s[MAXDEV];
        for (int j = 0; j < n; j++) {
            u[j] = 0;
            memcpy(&u[j], ins[j] + e * es, es);
            if (sg && es < 8 && (u[j] >> (8 * es - 1)) & 1) u[j] |= ~0ull << (8 * es); /* sign extension */
            s[j] = (int64_t)u[j];
        }
        uint64_t acc = 0;
        int32_t idx = 0;
        switch (op) {
        case SPMD_OP_SUM: for (int j = 0; j < n; j++) acc += u[j]; break;
        case SPMD_OP_PROD: acc = 1; for (int j = 0; j < n; j++) acc *= u[j]; break;
        case SPMD_OP_MEAN:
            if (sg) {
                __int128 t = 0;
                for (int j = 0; j < n; j++) t += s[j];
                acc = (uint64_t)(int64_t)(t / n); /* C division truncates toward zero */
            } else {
                unsigned __int128 t = 0;
                for (int j = 0; j < n; j++) t += u[j];
                acc = (uint64_t)(t / (unsigned)n);
            }
            break;
        case SPMD_OP_MAX: case SPMD_OP_ARGMAX:
            for (int j = 1; j < n; j++)
                if (sg ? s[j] > s[idx] : u[j] > u[idx]) idx = j;
            acc = u[idx];
            break;
        default: /* min, argmin */
            for (int j = 1; j < n; j++)
                if (sg ? s[j] < s[idx] : u[j] < u[idx]) idx = j;
            acc = u[idx];
            break;
        }
        if (isarg(op)) memcpy(out + 4 * e, &idx, 4); /* first index with the extreme value */
        else memcpy(out + e * es, &acc, es);
    }
}

/* one float type: T storage, A accumulation, LD(p) loads as A, ST(a, p) stores */
#define DEF_RED_FLT(NAME, A, ES, LD, ST, TREE)                                                      \
    static void NAME(spmd_op op, int n, unsigned char *const *ins, size_t count, unsigned char *out) { \
        for (size_t e = 0; e < count; e++) {                                                        \
            A acc = LD(ins[0] + e * ES), xs[MAXDEV];                                                \
            for (int j = 0; j < n; j++) xs[j] = LD(ins[j] + e * ES);                                \
            for (int j = 1; j < n; j++) {                                                           \
                A x = xs[j];                                                                        \
                switch (op) {                                                                       \
                case SPMD_OP_SUM: case SPMD_OP_MEAN: case SPMD_OP_PROD: break; /* (below) */        \
                /* (a tie, -0 against +0: the later one, as the library's a > x ? a : x) */              \
                case SPMD_OP_MAX: case SPMD_OP_ARGMAX: if (x >= acc || isnan(x)) acc = isnan(acc) ? acc : x; break; \
                default: if (x <= acc || isnan(x)) acc = isnan(acc) ? acc : x; break;               \
                }                                                                                   \
            }                                                                                       \
            if (op == SPMD_OP_SUM || op == SPMD_OP_MEAN || op == SPMD_OP_PROD)                      \
                acc = TREE(xs, n, op == SPMD_OP_PROD); /* the canonical order (testlib.h) */         \
            if (op == SPMD_OP_MEAN) acc = acc / (A)n;                                               \
            if (isarg(op)) {                                                                        \
                int32_t idx = INT32_MAX;                                                            \
                for (int j = 0; j < n && !isnan(acc); j++)                                          \
                    if (LD(ins[j] + e * ES) == acc) { idx = j; break; }                             \
                memcpy(out + 4 * e, &idx, 4);                                                       \
            } else {                                                                                \
                ST(acc, out + e * ES);                                                              \
            }                                                                                       \
        }                                                                                           \
    }
static float ld_f32(const unsigned char *p) { float f; memcpy(&f, p, 4); return f; }
static double ld_f64(const unsigned char *p) { double f; memcpy(&f, p, 8); return f; }
static float ld_f16(const unsigned char *p) { uint16_t h; memcpy(&h, p, 2); return H2F[h]; }
static float ld_bf16(const unsigned char *p) { uint16_t h; memcpy(&h, p, 2); return B2F[h]; }
static void st_f32(float a, unsigned char *p) { memcpy(p, &a, 4); }
static void st_f64(double a, unsigned char *p) { memcpy(p, &a, 8); }
static void st_f16(float a, unsigned char *p) { uint16_t h = ref_f32_to_f16(a); memcpy(p, &h, 2); }
static void st_bf16(float a, unsigned char *p) { uint16_t h = ref_f32_to_bf16(a); memcpy(p, &h, 2); }
static float ld_e4(const unsigned char *p) { return E4F[p[0]]; }
static float ld_e5(const unsigned char *p) { return E5F[p[0]]; }
static void st_e4(float a, unsigned char *p) { p[0] = ref_f32_to_f8e4m3fn(a); }
static void st_e5(float a, unsigned char *p) { p[0] = ref_f32_to_f8e5m2(a); }
DEF_RED_FLT(red_f32, float, 4, ld_f32, st_f32, tl_tree_f32)
DEF_RED_FLT(red_f64, double, 8, ld_f64, st_f64, tl_tree_f64)
DEF_RED_FLT(red_f16, float, 2, ld_f16, st_f16, tl_tree_f32)
DEF_RED_FLT(red_bf16, float, 2, ld_bf16, st_bf16, tl_tree_f32)
DEF_RED_FLT(red_e4, float, 1, ld_e4, st_e4, tl_tree_f32)
DEF_RED_FLT(red_e5, float, 1, ld_e5, st_e5, tl_tree_f32)

static void ref_red_bool(spmd_op op, int n, unsigned char *const *ins, size_t count, unsigned char *out) {
    for (size_t e = 0; e < count; e++) {
        int cnt = 0;
        for (int j = 0; j < n; j++) cnt += ins[j][e] != 0;
        int any = cnt > 0, all = cnt == n;
        if (op == SPMD_OP_SUM) { int32_t c = cnt; memcpy(out + 4 * e, &c, 4); }
        else if (op == SPMD_OP_MAX) out[e] = (unsigned char)any;
        else if (op == SPMD_OP_MIN || op == SPMD_OP_PROD) out[e] = (unsigned char)all;
        else { /* argmax: first true if any; argmin: first false if not all */
            int want = op == SPMD_OP_ARGMAX ? any : all;
            int32_t idx = INT32_MAX;
            for (int j = 0; j < n; j++)
                if ((ins[j][e] != 0) == want) { idx = j; break; }
            memcpy(out + 4 * e, &idx, 4);
        }
    }
}

static void ref_reduce(spmd_dtype dt, spmd_op op, int n, unsigned char *const *ins, size_t count, unsigned char *out) {
    switch (dt) {
    case SPMD_BOOL: ref_red_bool(op, n, ins, count, out); break;
    case SPMD_F32: red_f32(op, n, ins, count, out); break;
    case SPMD_F64: red_f64(op, n, ins, count, out); break;
    case SPMD_F16: red_f16(op, n, ins, count, out); break;
    case SPMD_BF16: red_bf16(op, n, ins, count, out); break;
    case SPMD_F8E4M3FN: red_e4(op, n, ins, count, out); break;
    case SPMD_F8E5M2: red_e5(op, n, ins, count, out); break;
    case SPMD_C64: case SPMD_C128:
        tl_ref_complex(dt == SPMD_C128, op, count, (const unsigned char *const *)ins, n, out);
        break;
    default: ref_red_int(dt, op, n, ins, count, out); break;
    }
}

/* ---- meshes, axes, groups ------------------------------------------------------------ */
static const char *AXN[3] = {"a", "b", "c"};
static void build_vars(meshctx *mc, rng_t *r) {
    int nd = mc->md.nd;
    mc->nvar = 0;
    int d0[3] = {0, 1, 2};
    add_axv(mc, d0, 0, 0);
    add_axv(mc, d0, nd, 1);
    for (int a = 0; a < nd; a++) add_axv(mc, &d0[a], 1, 0);
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++)
            if (a != b) { int e[2] = {a, b}; add_axv(mc, e, 2, 0); }
    if (nd == 3) { int e[3] = {2, 0, 1}; add_axv(mc, e, 3, 0); }
    int nb = mc->nvar;
    for (int b = 0; b < nb; b++) {
        int S = mc->var[b].size;
        if (S == 1) continue;
        int divs[16], n = 0;
        for (int g = 2; g < S; g++)
            if (S % g == 0) divs[n++] = g;
        if (n) add_groups(mc, b, divs[rb(r, n)], r);
        else add_groups(mc, b, S, r); /* prime size: one group, reordered */
    }
}

/* ---- cases ------------------------------------------------------------------------------ */
enum { K_ALLGATHER, K_ALLTOALL, K_BCAST, K_GATHER, K_SCATTER, K_REDUCE, K_SCAN, K_N };
static const char *KN[K_N] = {"allgather", "alltoall", "bcast", "gather", "scatter", "reduce", "scan"};
static int rooted(int k) { return k == K_BCAST || k == K_GATHER || k == K_SCATTER || k == K_REDUCE; }
static int reduces(int k) { return k == K_REDUCE || k == K_SCAN; }

typedef struct {
    tl_run run;    /* how it is called, what each device returned (testlib.h) */
    int kind, var;
    spmd_dtype dt;
    spmd_op op;
    size_t count;
    int root;
    int inplace;   /* recv == send */
    int nullnr;    /* non-roots pass NULL for the buffer they do not use */
    long shift;    /* error: recv = send + shift bytes */
    int sendnull, recvnull;
    spmd_algo algo;
    int null_opts;
    const char *note;
    int special, narrow, boolwide;
    size_t sb, rbb;                  /* bytes of send and recv (every device allocates both) */
    unsigned char *in[MAXDEV];       /* reference copy of send */
    unsigned char *blk[MAXDEV];      /* the block holding send and recv (adjacent or shared) */
    unsigned char *sp[MAXDEV], *rp[MAXDEV];
    unsigned char *snap[MAXDEV];     /* the block before the call */
    size_t blkb;
} mcase;

static int G_of(const meshctx *mc, const mcase *c) { return vG(&mc->var[c->var]); }
static size_t send_elems(int kind, size_t n, int G) {
    return kind == K_ALLTOALL || kind == K_SCATTER ? (size_t)G * n : n;
}
static size_t recv_bytes(int kind, size_t n, int G, spmd_dtype dt, spmd_op op) {
    switch (kind) {
    case K_ALLGATHER: case K_ALLTOALL: case K_GATHER: return (size_t)G * n * dsize(dt);
    case K_REDUCE: case K_SCAN: return n * res_size(dt, op);
    default: return n * dsize(dt);
    }
}

/* A case in words, for failure messages (also tl_sweep.describe). */
static void describe(const meshctx *mc, const void *p, char *b, size_t cap) {
    const mcase *c = (const mcase *)p;
    char ms[24], vs[120];
    mesh_str(&mc->md, ms, sizeof ms);
    var_str(&mc->var[c->var], vs, sizeof vs);
    char extra[64] = "";
    if (reduces(c->kind)) snprintf(extra, sizeof extra, " op=%s", opnm(c->op));
    char rt[24] = "";
    if (rooted(c->kind)) snprintf(rt, sizeof rt, " root=%d", c->root);
    snprintf(b, cap, "%s%s mesh %s %s G=%d %s count=%zu%s%s%s%s algo=%s%s%s", KN[c->kind],
             c->run.async ? "_start" : "", ms, vs, G_of(mc, c), dnm(c->dt), c->count, extra, rt,
             c->inplace ? " in-place" : "", c->nullnr ? " NULL-on-non-roots" : "",
             c->algo == SPMD_ALGO_EAGER ? "eager" : c->algo == SPMD_ALGO_SPLIT ? "split" : "default",
             c->special ? " (NaN/inf)" : "", c->note ? c->note : "");
}

/* ---- inputs ---------------------------------------------------------------------------- */
static void gen_send(const mcase *c, unsigned char *p, size_t nelem, rng_t *r) {
    size_t es = dsize(c->dt), nb = nelem * es;
    if (!es) { for (size_t i = 0; i < 64 && i < nb; i++) p[i] = (unsigned char)rn(r); return; }
    if (c->dt == SPMD_BOOL) {
        for (size_t i = 0; i < nelem; i++) {
            uint64_t v = rn(r);
            int t = (v & 3) != 0 ? (int)((v >> 2) & 1) : (v & 4) != 0; /* mostly balanced */
            if (c->narrow) t = (v & 15) != 0; /* mostly true: "all" is reached */
            p[i] = (unsigned char)(t ? (c->boolwide && (v & 32) ? 1 + (v >> 8) % 255 : 1) : 0);
        }
        return;
    }
    if (iscplx(c->dt)) { /* the parts as f32 or f64 values */
        mcase parts = *c;
        parts.dt = c->dt == SPMD_C64 ? SPMD_F32 : SPMD_F64;
        gen_send(&parts, p, 2 * nelem, r);
        return;
    }
    if (isfp8(c->dt)) { /* any code; pprod: values in [0.5, 2); narrow: small values */
        static const float small_set[6] = {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f};
        for (size_t i = 0; i < nelem; i++) {
            uint64_t v = rn(r);
            p[i] = c->narrow ? tl_f32_to_fp8(c->dt, small_set[v % 6]) : tl_fp8_code(c->dt, v, c->op == SPMD_OP_PROD);
        }
        return;
    }
    if (!isflt(c->dt)) {
        if (c->narrow || c->op == SPMD_OP_MEAN) { /* small values: ties for max/argmax */
            for (size_t i = 0; i < nelem; i++) {
                uint64_t v = rn(r);
                int64_t x = c->narrow ? (int64_t)(v % 5) - 2 : (int64_t)(v % 2001) - 1000;
                if (c->op == SPMD_OP_MEAN && (v >> 40) % 4 == 0) x = (int64_t)(v >> 3); /* wide values too */
                memcpy(p + i * es, &x, es);
            }
        } else {
            size_t i = 0;
            for (; i + 8 <= nb; i += 8) { uint64_t v = rn(r); memcpy(p + i, &v, 8); }
            if (i < nb) { uint64_t v = rn(r); memcpy(p + i, &v, nb - i); }
        }
        return;
    }
    int mb = c->dt == SPMD_F16 ? 10 : c->dt == SPMD_BF16 ? 7 : c->dt == SPMD_F32 ? 23 : 52;
    int bias = c->dt == SPMD_F16 ? 15 : c->dt == SPMD_F64 ? 1023 : 127;
    int emax = c->dt == SPMD_F16 ? 31 : c->dt == SPMD_F64 ? 2047 : 255;
    static const float narrow_set[6] = {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f};
    for (size_t i = 0; i < nelem; i++) {
        uint64_t v = rn(r), w = rn(r), bits;
        if (c->narrow) {
            float f = narrow_set[v % 6];
            if (c->op == SPMD_OP_PROD) f = fabsf(f);
            double dd = f;
            switch (c->dt) {
            case SPMD_F16: bits = ref_f32_to_f16(f); break;
            case SPMD_BF16: bits = ref_f32_to_bf16(f); break;
            case SPMD_F32: { uint32_t u; memcpy(&u, &f, 4); bits = u; } break;
            default: memcpy(&bits, &dd, 8); break;
            }
        } else {
            /* prod: exponents near 0 so G factors stay finite; else a window */
            uint64_t e = c->op == SPMD_OP_PROD ? (uint64_t)(bias - 1 + (int)(v % 2)) : (uint64_t)(bias - 6 + (int)(v % 12));
            bits = ((v >> 8) & 1) << (es * 8 - 1) | e << mb | (w & ((1ull << mb) - 1));
            if (c->special && (v >> 16) % 12 == 0) {
                uint64_t top = (uint64_t)emax << mb;
                switch ((v >> 24) % 3) {
                case 0: bits = top | (1ull << (mb - 1)); break;     /* NaN */
                case 1: bits = top; break;                           /* +inf */
                default: bits = top | (1ull << (es * 8 - 1)); break; /* -inf */
                }
            }
        }
        memcpy(p + i * es, &bits, es);
    }
}

/* ---- the device side ------------------------------------------------------------------ */
static spmd_status call_op(spmd_dev *d, mcase *c, const axv *v, int dev, int gi, spmd_req **req, int64_t tmo) {
    spmd_opts o;
    memset(&o, 0, sizeof o);
    o.algo = c->algo;
    o.timeout_ms = tmo;
    if (v->gsize) { o.groups = v->groups; o.group_size = v->gsize; }
    const spmd_opts *po = (c->null_opts && !v->gsize && c->algo == SPMD_ALGO_DEFAULT && !tmo) ? NULL : &o;
    const void *s = c->sendnull ? NULL : c->sp[dev];
    void *r = c->recvnull ? NULL : c->rp[dev];
    int nonroot = rooted(c->kind) && gi != c->root;
    if (c->nullnr && nonroot) {
        if (c->kind == K_GATHER || c->kind == K_REDUCE) r = NULL;
        else s = NULL; /* bcast, scatter: send read on the root only */
    }
    const char *ax = v->axes;
    size_t n = c->count;
    if (!req) {
        switch (c->kind) {
        case K_ALLGATHER: return spmd_allgather(d, s, r, n, c->dt, ax, po);
        case K_ALLTOALL: return spmd_alltoall(d, s, r, n, c->dt, ax, po);
        case K_BCAST: return spmd_bcast(d, s, r, n, c->dt, c->root, ax, po);
        case K_GATHER: return spmd_gather(d, s, r, n, c->dt, c->root, ax, po);
        case K_SCATTER: return spmd_scatter(d, s, r, n, c->dt, c->root, ax, po);
        case K_REDUCE: return spmd_reduce(d, s, r, n, c->dt, c->op, c->root, ax, po);
        default: return spmd_scan(d, s, r, n, c->dt, c->op, ax, po);
        }
    }
    spmd_req **R = c->run.reqnull ? NULL : req;
    switch (c->kind) {
    case K_ALLGATHER: return spmd_allgather_start(d, s, r, n, c->dt, ax, po, R);
    case K_ALLTOALL: return spmd_alltoall_start(d, s, r, n, c->dt, ax, po, R);
    case K_BCAST: return spmd_bcast_start(d, s, r, n, c->dt, c->root, ax, po, R);
    case K_GATHER: return spmd_gather_start(d, s, r, n, c->dt, c->root, ax, po, R);
    case K_SCATTER: return spmd_scatter_start(d, s, r, n, c->dt, c->root, ax, po, R);
    case K_REDUCE: return spmd_reduce_start(d, s, r, n, c->dt, c->op, c->root, ax, po, R);
    default: return spmd_scan_start(d, s, r, n, c->dt, c->op, ax, po, R);
    }
}

/* ---- preparing, running, checking ------------------------------------------------------ */
static long g_checked;
static unsigned char *g_exp;
static size_t g_expcap;

/* Layout of a device's block: [send][recv][guard] (send and recv apart), or
   one region for both (in place: recv = send; error cases: shifted). */
static void prepare(mcase *c, const meshctx *mc, rng_t *r) {
    int G = G_of(mc, c);
    size_t es = dsize(c->dt) ? dsize(c->dt) : 1;
    size_t sn = send_elems(c->kind, c->count, G);
    c->sb = c->count > ((size_t)1 << 40) ? 64 : sn * es;
    c->rbb = c->count > ((size_t)1 << 40) ? 64 : recv_bytes(c->kind, c->count, G, dsize(c->dt) ? c->dt : SPMD_U8, c->op ? c->op : SPMD_OP_SUM);
    c->run.errflag = 0;
    c->run.errmsg[0] = 0;
    for (int d = 0; d < MAXDEV; d++) { c->run.st[d] = SPMD_STATUS_COUNT; c->run.reqset[d] = 0; }
    for (int d = 0; d < mc->ndev; d++) {
        c->in[d] = (unsigned char *)xmalloc(c->sb);
        gen_send(c, c->in[d], c->sb / es, r);
        size_t lo = c->shift < 0 ? (size_t)-c->shift : 0;
        if (c->inplace || c->shift) {
            size_t span = c->sb > c->rbb ? c->sb : c->rbb;
            c->blkb = lo + span + (size_t)(c->shift > 0 ? c->shift : 0) + GUARD;
            c->blk[d] = (unsigned char *)xmalloc(c->blkb);
            memset(c->blk[d], FILL, c->blkb);
            c->sp[d] = c->blk[d] + lo;
            c->rp[d] = c->sp[d] + c->shift;
            memcpy(c->sp[d], c->in[d], c->sb);
        } else {
            size_t roff = (c->sb + 63) / 64 * 64; /* recv aligned (int32 results after a bool send) */
            c->blkb = roff + c->rbb + GUARD;
            c->blk[d] = (unsigned char *)xmalloc(c->blkb);
            memset(c->blk[d], FILL, c->blkb);
            c->sp[d] = c->blk[d];
            c->rp[d] = c->blk[d] + roff;
            memcpy(c->sp[d], c->in[d], c->sb);
        }
        c->snap[d] = NULL;
        if (c->run.accept) {
            c->snap[d] = (unsigned char *)xmalloc(c->blkb);
            memcpy(c->snap[d], c->blk[d], c->blkb);
        }
    }
}

/* Frees a case's buffers (tl_sweep.release). */
static void release(void *p, int ndev) {
    mcase *c = (mcase *)p;
    for (int d = 0; d < ndev; d++) {
        free(c->in[d]);
        free(c->blk[d]);
        free(c->snap[d]);
        c->in[d] = c->blk[d] = c->snap[d] = NULL;
    }
}

static void fmt_val(char *b, size_t cap, spmd_dtype dt, size_t es, const unsigned char *p) {
    if (es == 4 && (dt == SPMD_BOOL || dsize(dt) != 4)) { int32_t v; memcpy(&v, p, 4); snprintf(b, cap, "%d", (int)v); return; }
    switch (dt) {
    case SPMD_F16: { uint16_t h; memcpy(&h, p, 2); snprintf(b, cap, "%.8g (0x%04x)", (double)H2F[h], h); } return;
    case SPMD_BF16: { uint16_t h; memcpy(&h, p, 2); snprintf(b, cap, "%.8g (0x%04x)", (double)B2F[h], h); } return;
    case SPMD_F32: { float f; uint32_t u; memcpy(&f, p, 4); memcpy(&u, p, 4); snprintf(b, cap, "%.9g (0x%08x)", (double)f, u); } return;
    case SPMD_F64: { double f; memcpy(&f, p, 8); snprintf(b, cap, "%.17g", f); } return;
    case SPMD_C64: { float f[2]; memcpy(f, p, 8); snprintf(b, cap, "%.9g%+.9gi", (double)f[0], (double)f[1]); } return;
    case SPMD_C128: { double f[2]; memcpy(f, p, 16); snprintf(b, cap, "%.17g%+.17gi", f[0], f[1]); } return;
    case SPMD_F8E4M3FN: snprintf(b, cap, "%.8g (0x%02x)", (double)E4F[p[0]], p[0]); return;
    case SPMD_F8E5M2: snprintf(b, cap, "%.8g (0x%02x)", (double)E5F[p[0]], p[0]); return;
    default: {
        uint64_t u = 0;
        memcpy(&u, p, es);
        if (issigned(dt) && es < 8 && (u >> (8 * es - 1)) & 1) u |= ~0ull << (8 * es);
        if (issigned(dt)) snprintf(b, cap, "%lld", (long long)(int64_t)u);
        else snprintf(b, cap, "%llu", (unsigned long long)u);
    }
    }
}

/* expected recv of device at group index me; returns 0 when recv must be untouched */
static int expected(const mcase *c, unsigned char *const *ins, int G, int me, unsigned char *exp) {
    size_t es = dsize(c->dt), blk = c->count * es;
    switch (c->kind) {
    case K_ALLGATHER:
        for (int j = 0; j < G; j++) memcpy(exp + (size_t)j * blk, ins[j], blk);
        return 1;
    case K_GATHER:
        if (me != c->root) return 0;
        for (int j = 0; j < G; j++) memcpy(exp + (size_t)j * blk, ins[j], blk);
        return 1;
    case K_ALLTOALL:
        for (int j = 0; j < G; j++) memcpy(exp + (size_t)j * blk, ins[j] + (size_t)me * blk, blk);
        return 1;
    case K_BCAST: memcpy(exp, ins[c->root], blk); return 1;
    case K_SCATTER: memcpy(exp, ins[c->root] + (size_t)me * blk, blk); return 1;
    case K_REDUCE:
        if (me != c->root) return 0;
        ref_reduce(c->dt, c->op, G, ins, c->count, exp);
        return 1;
    default: ref_reduce(c->dt, c->op, me + 1, ins, c->count, exp); return 1;
    }
}

/* One check per case over this process's devices (all of them on threads);
   a process hosting none of the mesh's devices checks and counts nothing. */
static void verify(const meshctx *mc, mcase *c) {
    char desc[600], why[700] = "";
    if (!tl_nlocal(mc->m, 0, mc->ndev)) return;
    describe(mc, c, desc, sizeof desc);
    const axv *v = &mc->var[c->var];
    int ok = 1;
    g_checked++;
    if (c->run.accept) {
        for (int d = 0; d < mc->ndev && ok; d++) {
            if (!tl_local(mc->m, d)) continue;
            if (c->run.st[d] >= SPMD_STATUS_COUNT || !(c->run.accept & ACC(c->run.st[d]))) {
                char want[200];
                accept_str(c->run.accept, want, sizeof want);
                snprintf(why, sizeof why, "dev %d returned %s, want %s (%s)", d, stname(c->run.st[d]), want,
                         c->run.errmsg);
                ok = 0;
            } else if (memcmp(c->snap[d], c->blk[d], c->blkb) != 0) {
                size_t k = 0;
                while (c->snap[d][k] == c->blk[d][k]) k++;
                snprintf(why, sizeof why, "dev %d: refused with %s but changed byte %zu of its buffers", d,
                         stname(c->run.st[d]), k);
                ok = 0;
            } else if (c->run.async && c->run.reqset[d]) {
                snprintf(why, sizeof why, "dev %d: refused _start left *req non-NULL", d);
                ok = 0;
            }
        }
        T_CHECK(ok, "refused call: %s: %s", desc, why);
        return;
    }
    size_t es = dsize(c->dt);
    size_t oes = reduces(c->kind) ? res_size(c->dt, c->op) : es;
    spmd_dtype cmp_dt = reduces(c->kind) && oes != es ? SPMD_I32 : c->dt;
    if (g_expcap < c->rbb + 1) { free(g_exp); g_expcap = c->rbb + 1; g_exp = (unsigned char *)xmalloc(g_expcap); }
    for (int d = 0; d < mc->ndev && ok; d++) {
        int mem[MAXDEV], me;
        if (!tl_local(mc->m, d)) continue;
        int G = group_of(&mc->md, v, d, mem, &me);
        if (c->run.st[d] != SPMD_OK) {
            snprintf(why, sizeof why, "dev %d returned %s; first error: %s", d, stname(c->run.st[d]),
                     c->run.errflag ? c->run.errmsg : "-");
            ok = 0;
            break;
        }
        unsigned char *ins[MAXDEV];
        for (int j = 0; j < G; j++) ins[j] = c->in[mem[j]];
        int has = expected(c, ins, G, me, g_exp);
        const unsigned char *got = c->rp[d];
        if (!has) {
            /* non-root: recv untouched (in place: still this device's send) */
            const unsigned char *want = c->inplace ? c->in[d] : NULL;
            size_t n = c->inplace ? c->sb : c->rbb;
            size_t at = 0;
            while (at < n && got[at] == (want ? want[at] : FILL)) at++;
            if (at < n) {
                snprintf(why, sizeof why, "dev %d (group index %d, root %d): non-root recv%s changed at byte %zu (0x%02x, was 0x%02x)",
                         d, me, c->root, c->nullnr ? " (passed as NULL)" : "", at, got[at], want ? want[at] : FILL);
                ok = 0;
            }
        } else {
            size_t ne = c->rbb / oes;
            if (memcmp(got, g_exp, c->rbb) != 0) {
                size_t bad = ne;
                for (size_t e = 0; e < ne; e++) {
                    if (memcmp(got + e * oes, g_exp + e * oes, oes) == 0) continue;
                    if (cmp_dt == c->dt && tl_same_elem(c->dt, got + e * oes, g_exp + e * oes)) continue;
                    bad = e;
                    break;
                }
                if (bad < ne) {
                    char gs[64], ws[64], ins_s[200] = "";
                    fmt_val(gs, sizeof gs, c->dt, oes, got + bad * oes);
                    fmt_val(ws, sizeof ws, c->dt, oes, g_exp + bad * oes);
                    if (reduces(c->kind)) { /* the inputs of that element */
                        size_t o = 0;
                        int n_in = c->kind == K_SCAN ? me + 1 : G;
                        for (int j = 0; j < n_in && o + 40 < sizeof ins_s; j++) {
                            char t[64];
                            fmt_val(t, sizeof t, c->dt, es, ins[j] + bad * es);
                            o += (size_t)snprintf(ins_s + o, sizeof ins_s - o, "%s%s", j ? ", " : "; inputs ", t);
                        }
                    }
                    snprintf(why, sizeof why, "dev %d (group index %d of %d): recv[%zu] of %zu = %s, want %s%s", d, me, G, bad,
                             ne, gs, ws, ins_s);
                    ok = 0;
                }
            }
        }
        /* the guard after recv, and send untouched (unless in place) */
        if (ok && !c->inplace) {
            const unsigned char *p = c->rp[d] + c->rbb, *end = c->blk[d] + c->blkb;
            for (; p < end; p++)
                if (*p != FILL) {
                    snprintf(why, sizeof why, "dev %d: wrote %zu bytes past the end of recv", d, (size_t)(p - (c->rp[d] + c->rbb)) + 1);
                    ok = 0;
                    break;
                }
            if (ok && memcmp(c->sp[d], c->in[d], c->sb) != 0) {
                snprintf(why, sizeof why, "dev %d: send buffer changed", d);
                ok = 0;
            }
        }
        if (ok && c->inplace && has) { /* bytes after the result in the shared region */
            const unsigned char *p = c->rp[d] + c->rbb, *end = c->blk[d] + c->blkb - GUARD;
            size_t off = c->rbb;
            for (; p < end && ok; p++, off++)
                if (*p != (off < c->sb ? c->in[d][off] : FILL)) {
                    snprintf(why, sizeof why, "dev %d: in place: byte %zu after the result changed", d, off);
                    ok = 0;
                }
        }
    }
    T_CHECK(ok, "%s: %s", desc, why);
}

/* ---- the batch runner's view of these cases (testlib.h tl_sweep) ------------------------ */
/* Device me's call of case p, with its index in its group (the _start form when req is not NULL). */
static spmd_status sw_call(spmd_dev *d, void *p, const meshctx *mc, int me, spmd_req **req, int64_t tmo) {
    mcase *c = (mcase *)p;
    const axv *v = &mc->var[c->var];
    int mem[MAXDEV], gi;
    group_of(&mc->md, v, me, mem, &gi);
    return call_op(d, c, v, me, gi, req, tmo);
}

/* A case's unit for tl_thin and the batches: an async cluster counts as one. */
static int case_unit(const void *p) {
    const mcase *c = (const mcase *)p;
    return c->run.async && c->run.cluster > 0 ? c->run.cluster : 1;
}

/* Bytes of a case's buffers on all devices, at most (the batches' memory budget). */
static size_t sw_need(const meshctx *mc, const void *p) {
    const mcase *c = (const mcase *)p;
    return (size_t)mc->ndev * (2 * (size_t)G_of(mc, c) * c->count * 8 * 2 + 4 * GUARD);
}

/* Sweep cases and refused calls alike: the same buffers, the same check. */
static void sw_prepare(void *p, const meshctx *mc, rng_t *r, int refused) {
    (void)refused;
    prepare((mcase *)p, mc, r);
}
static void sw_check(const meshctx *mc, void *p, int refused) {
    (void)refused;
    verify(mc, (mcase *)p);
}
static const tl_sweep SWEEP = {.elem = sizeof(mcase), .call = sw_call, .unit = case_unit, .need = sw_need,
                               .prepare = sw_prepare, .check = sw_check, .release = release,
                               .describe = describe};

/* ---- building cases ---------------------------------------------------------------------- */
typedef struct {
    mcase *a;
    int n, cap;
} caselist;
static mcase *new_case(caselist *L) { return TL_PUSH(L, 512); }
static int g_quick;

static int pick_var(const meshctx *mc, rng_t *r, int single) {
    for (int t = 0; t < 1000; t++) {
        int v = rb(r, mc->nvar);
        if (!single || single_axis(&mc->var[v])) return v;
    }
    return 2; /* the first single axis */
}

static mcase *mk(caselist *L, const meshctx *mc, rng_t *r, int kind, int var, spmd_dtype dt, spmd_op op, size_t count) {
    static const spmd_algo al[] = {SPMD_ALGO_DEFAULT, SPMD_ALGO_DEFAULT, SPMD_ALGO_EAGER, SPMD_ALGO_SPLIT};
    mcase *c = new_case(L);
    c->kind = kind;
    if (reduces(kind) && isarg(op)) var = var >= 0 && single_axis(&mc->var[var]) ? var : pick_var(mc, r, 1);
    c->var = var >= 0 ? var : pick_var(mc, r, 0);
    c->dt = dt;
    c->op = reduces(kind) ? op : SPMD_OP_NONE;
    c->count = count;
    c->algo = al[rb(r, 4)];
    c->null_opts = rb(r, 2);
    int G = G_of(mc, c);
    if (rooted(kind)) c->root = rb(r, G);
    /* in place where send and recv have the same size */
    if (kind == K_BCAST || kind == K_ALLTOALL || (reduces(kind) && res_size(dt, op) == dsize(dt))) c->inplace = rb(r, 3) == 0;
    if ((kind == K_GATHER || kind == K_REDUCE || kind == K_BCAST || kind == K_SCATTER) && !c->inplace) c->nullnr = rb(r, 3) == 0;
    if ((isflt(dt) || iscplx(dt)) && reduces(kind)) {
        int maxlike = op == SPMD_OP_MAX || op == SPMD_OP_MIN || isarg(op);
        c->special = rb(r, maxlike ? 4 : 8) == 0;
        c->narrow = !c->special && maxlike && rb(r, 3) == 0;
    } else if (reduces(kind)) {
        c->narrow = (op == SPMD_OP_MAX || op == SPMD_OP_MIN || isarg(op) || dt == SPMD_BOOL) && rb(r, 3) == 0;
    }
    c->boolwide = rb(r, 2);
    if (reduces(kind) && !tl_op_defined(dt, op)) { /* bool pmean, complex pmax ... */
        if (tl_var_in_process(mc, c->var)) c->run.accept = ACC(SPMD_ERR_DTYPE);
        else if (dt == SPMD_BOOL) c->dt = SPMD_U8; /* (refused across processes, it would break the mesh) */
        else c->op = SPMD_OP_PROD;
    }
    return c;
}

static void build_sweep(caselist *L, const meshctx *mc, rng_t *r) {
    static const size_t counts[] = {0, 1, 7, 1000};
    int rot = rb(r, 64);
    /* allgather, alltoall: every dtype and count */
    for (int kind = K_ALLGATHER; kind <= K_ALLTOALL; kind++)
        for (int di = 0; di < NDT; di++)
            for (int ci = 0; ci < 4; ci++) mk(L, mc, r, kind, -1, DTYPES[di], SPMD_OP_NONE, counts[ci]);
    /* rooted: every axes variant, every root */
    for (int kind = K_BCAST; kind <= K_REDUCE; kind++)
        for (int v = 0; v < mc->nvar; v++)
            for (int root = 0; root < vG(&mc->var[v]); root++) {
                spmd_dtype dt = DTYPES[rot % NDT];
                spmd_op op = OPS[(rot / 3) % NOP];
                size_t cnt = counts[1 + rot % 3];
                rot++;
                if (kind == K_REDUCE && isarg(op) && !single_axis(&mc->var[v])) op = SPMD_OP_SUM;
                if (kind == K_REDUCE && dt == SPMD_BOOL && op == SPMD_OP_MEAN) op = SPMD_OP_MAX;
                mcase *c = mk(L, mc, r, kind, v, dt, op, cnt);
                c->root = root;
            }
    /* rooted: every dtype and count, random axes and root */
    for (int kind = K_BCAST; kind <= K_SCATTER; kind++)
        for (int di = 0; di < NDT; di++)
            for (int ci = 0; ci < 4; ci++) mk(L, mc, r, kind, -1, DTYPES[di], SPMD_OP_NONE, counts[ci]);
    /* reduce and scan: every op x dtype, counts 1, 7, 1000 (0 now and then) */
    for (int kind = K_REDUCE; kind <= K_SCAN; kind++)
        for (int oi = 0; oi < NOP; oi++)
            for (int di = 0; di < NDT; di++)
                for (int ci = 1; ci < 4; ci++) {
                    size_t cnt = rb(r, 12) == 0 ? 0 : counts[ci];
                    mk(L, mc, r, kind, -1, DTYPES[di], OPS[oi], cnt);
                }
    /* scan on every axes variant */
    for (int v = 0; v < mc->nvar; v++) {
        spmd_op op = OPS[rot % NOP];
        spmd_dtype dt = DTYPES[(rot / 2) % NDT];
        rot++;
        if (isarg(op) && !single_axis(&mc->var[v])) op = SPMD_OP_MIN;
        if (dt == SPMD_BOOL && op == SPMD_OP_MEAN) op = SPMD_OP_SUM;
        mk(L, mc, r, K_SCAN, v, dt, op, 1 + (size_t)rb(r, 40));
    }
}

static void build_async(caselist *L, const meshctx *mc, rng_t *r, int nclusters) {
    static const size_t acounts[] = {1, 7, 1000, 3001};
    for (int q = 0; q < nclusters; q++) {
        int m = 2 + rb(r, 5);
        int first = L->n;
        for (int j = 0; j < m; j++) {
            int kind = rb(r, K_N);
            spmd_dtype dt = DTYPES[rb(r, NDT)];
            spmd_op op = OPS[rb(r, NOP)];
            if (dt == SPMD_BOOL && op == SPMD_OP_MEAN) op = SPMD_OP_PROD;
            mcase *c = mk(L, mc, r, kind, -1, dt, op, acounts[rb(r, 4)]);
            c->run.async = 1;
        }
        mcase *c0 = &L->a[first];
        c0->run.cluster = m;
        c0->run.wstyle = rb(r, 4);
        shuffle_orders(c0->run.order, m, r);
    }
}

/* counts of 1<<18 elements (quick: about 1<<16 bytes), the element size
   kept so that G * count * size stays within 8 MiB per buffer */
static void build_large(caselist *L, const meshctx *mc, rng_t *r) {
    static const spmd_algo al[] = {SPMD_ALGO_DEFAULT, SPMD_ALGO_SPLIT, SPMD_ALGO_EAGER};
    int rot = 0;
    for (int kind = 0; kind < K_N; kind++)
        for (int t = 0; t < (reduces(kind) ? 3 : 2); t++) {
            int v = t == 0 ? 1 : pick_var(mc, r, 0);
            int G = vG(&mc->var[v]);
            static const spmd_dtype big[] = {SPMD_F64, SPMD_I64, SPMD_F32, SPMD_I32, SPMD_BF16, SPMD_U16, SPMD_F16, SPMD_U8};
            spmd_dtype dt;
            int guard = 0;
            do dt = big[rb(r, 8)];
            while (++guard < 50 && (size_t)G * dsize(dt) * ((size_t)1 << 18) > ((size_t)8 << 20));
            spmd_op op = OPS[rot % NOP];
            if (isarg(op)) v = pick_var(mc, r, 1);
            /* (groups of 16: half the elements; on 2 CPUs under load their 16 cases took 20 s) */
            size_t cnt = g_quick ? ((size_t)1 << 16) / dsize(dt) + 3 : ((size_t)1 << (G >= 16 ? 17 : 18));
            mcase *c = mk(L, mc, r, kind, v, dt, op, cnt);
            c->algo = al[rot % 3];
            if (rot % 3 == 1) /* its _start, the devices away meanwhile: the progress workers' (tl_away) */
                c->run.async = c->run.cluster = c->run.away = 1, c->run.wstyle = rb(r, 4);
            rot++;
        }
}

/* ---- refused calls ------------------------------------------------------------------------- */
static mcase *err(caselist *L, const meshctx *mc, rng_t *r, int kind, int var, uint32_t accept, const char *note) {
    mcase *c = mk(L, mc, r, kind, var, DTYPES[1 + rb(r, NDT - 1)], SPMD_OP_SUM, 5);
    c->run.accept = accept;
    c->note = note;
    c->inplace = 0;
    c->nullnr = 0;
    c->run.async = rb(r, 3) == 0;
    return c;
}
static void build_errors(caselist *L, const meshctx *mc, rng_t *r) {
    int vany = 0, v2 = -1;
    for (int t = 0; t < 200; t++) {
        int v = rb(r, mc->nvar);
        if (!tl_var_in_process(mc, v)) continue;
        if (vany == 0) vany = v;
        if (vG(&mc->var[v]) >= 2 && v2 < 0) v2 = v;
    }
    mcase *c;
    const uint32_t INV = ACC(SPMD_ERR_INVALID) | ACC(SPMD_ERR_DTYPE);
    for (int kind = K_BCAST; kind <= K_REDUCE; kind++) {
        c = err(L, mc, r, kind, vany, ACC(SPMD_ERR_ROOT), " [root = G]");
        c->root = G_of(mc, c);
        c = err(L, mc, r, kind, vany, ACC(SPMD_ERR_ROOT), " [root = -1]");
        c->root = -1;
    }
    /* NULL buffers that every device needs */
    static const int send_needed[] = {K_ALLGATHER, K_ALLTOALL, K_GATHER, K_REDUCE, K_SCAN};
    for (int q = 0; q < 5; q++) {
        c = err(L, mc, r, send_needed[q], vany, ACC(SPMD_ERR_NULL), " [send NULL on every device]");
        c->sendnull = 1;
    }
    static const int recv_needed[] = {K_ALLGATHER, K_ALLTOALL, K_BCAST, K_SCATTER, K_SCAN};
    for (int q = 0; q < 5; q++) {
        c = err(L, mc, r, recv_needed[q], vany, ACC(SPMD_ERR_NULL), " [recv NULL on every device]");
        c->recvnull = 1;
    }
    /* with groups of one every device is a root: recv NULL refused everywhere */
    c = err(L, mc, r, K_GATHER, 0, ACC(SPMD_ERR_NULL), " [root's recv NULL]");
    c->recvnull = 1;
    c = err(L, mc, r, K_REDUCE, 0, ACC(SPMD_ERR_NULL), " [root's recv NULL]");
    c->recvnull = 1;
    c = err(L, mc, r, K_BCAST, 0, ACC(SPMD_ERR_NULL), " [root's send NULL]");
    c->sendnull = 1;
    c = err(L, mc, r, K_SCATTER, 0, ACC(SPMD_ERR_NULL), " [root's send NULL]");
    c->sendnull = 1;
    /* dtypes and ops */
    for (int kind = 0; kind < K_N; kind++) {
        c = err(L, mc, r, kind, vany, INV, " [dtype 0]");
        c->dt = SPMD_DTYPE_NONE;
        c = err(L, mc, r, kind, vany, INV, " [dtype 99]");
        c->dt = (spmd_dtype)99;
    }
    for (int kind = K_REDUCE; kind <= K_SCAN; kind++) {
        c = err(L, mc, r, kind, vany, ACC(SPMD_ERR_INVALID), " [op 0]");
        c->op = SPMD_OP_NONE;
        c = err(L, mc, r, kind, vany, ACC(SPMD_ERR_INVALID), " [op 99]");
        c->op = (spmd_op)99;
        c = err(L, mc, r, kind, vany, ACC(SPMD_ERR_DTYPE), " [bool mean]");
        c->dt = SPMD_BOOL;
        c->op = SPMD_OP_MEAN;
    }
    c = err(L, mc, r, K_ALLGATHER, vany, ACC(SPMD_ERR_OVERFLOW) | ACC(SPMD_ERR_SIZE) | ACC(SPMD_ERR_INVALID), " [count 2^62]");
    c->count = (size_t)1 << 62;
    /* (axes or groups that name no group break the mesh: test_errors's test_bad_group) */
    c = err(L, mc, r, K_SCAN, vany, ACC(SPMD_ERR_NULL), " [_start with req NULL]");
    c->run.async = 1;
    c->run.reqnull = 1;
    if (v2 >= 0) {
        /* partial overlaps where every device reads send and writes recv
           (not bcast: off the root send is not read, so not checked;
           run_rooted_unused covers that) */
        static const int ovk[] = {K_ALLGATHER, K_ALLTOALL, K_SCAN};
        for (int q = 0; q < 3; q++) {
            c = err(L, mc, r, ovk[q], v2, ACC(SPMD_ERR_OVERLAP), " [recv = send + 1 element]");
            c->shift = (long)dsize(c->dt);
        }
        c = err(L, mc, r, K_ALLTOALL, v2, ACC(SPMD_ERR_OVERLAP), " [recv = send - 3 bytes]");
        c->shift = -3;
        c = err(L, mc, r, K_ALLGATHER, v2, ACC(SPMD_ERR_OVERLAP), " [recv == send, sizes differ]");
        c->inplace = 1;
    }
    /* correct calls afterwards: the mesh must still work */
    mk(L, mc, r, K_REDUCE, 1, SPMD_F32, SPMD_OP_SUM, 100)->inplace = 0;
    mk(L, mc, r, K_ALLTOALL, vany, SPMD_I16, SPMD_OP_NONE, 9);
    mk(L, mc, r, K_SCAN, -1, SPMD_U8, SPMD_OP_MAX, 17);
}

/* ---- hand vectors (4 devices on axis "i", mpi4jax-style) -------------------------------------- */
typedef struct {
    float ag[4][8], a2a[4][4], bc[4][2], ga[4][8], sc[4][1], rd[4][2], scn[4][2], scm[4][1];
    int32_t rarg[4][2];
    spmd_status st[4];
} vecres;

static void vec_dev(spmd_dev *d, void *arg) {
    vecres *R = (vecres *)arg;
    int i = spmd_device_id(d);
    spmd_status s = SPMD_OK, t;
#define STEP(call) do { t = (call); if (t != SPMD_OK && s == SPMD_OK) s = t; } while (0)
    float x[2] = {(float)i, (float)(10 * i)};
    STEP(spmd_allgather(d, x, R->ag[i], 2, SPMD_F32, "i", NULL));
    float y[4] = {(float)(4 * i), (float)(4 * i + 1), (float)(4 * i + 2), (float)(4 * i + 3)};
    STEP(spmd_alltoall(d, y, R->a2a[i], 1, SPMD_F32, "i", NULL));
    STEP(spmd_bcast(d, x, R->bc[i], 2, SPMD_F32, 3, "i", NULL));
    STEP(spmd_gather(d, x, i == 1 ? R->ga[i] : NULL, 2, SPMD_F32, 1, "i", NULL));
    STEP(spmd_scatter(d, i == 2 ? y : NULL, R->sc[i], 1, SPMD_F32, 2, "i", NULL));
    STEP(spmd_reduce(d, x, R->rd[i], 2, SPMD_F32, SPMD_OP_SUM, 0, "i", NULL));
    STEP(spmd_scan(d, x, R->scn[i], 2, SPMD_F32, SPMD_OP_SUM, "i", NULL));
    float z[1] = {(float)((i * 7) % 4)}; /* 0 3 2 1 */
    STEP(spmd_scan(d, z, R->scm[i], 1, SPMD_F32, SPMD_OP_MAX, "i", NULL));
    float w[2] = {(float)((i * 3) % 4), 5.0f}; /* 0 3 2 1; all equal */
    STEP(spmd_reduce(d, w, R->rarg[i], 2, SPMD_F32, SPMD_OP_ARGMAX, 2, "i", NULL));
#undef STEP
    R->st[i] = s;
}

/* The first of the 4 devices this process hosts with good[i] == 0, else -1. */
static int vec_bad(const spmd_mesh *m, const int *good) {
    for (int i = 0; i < 4; i++)
        if (tl_local(m, i) && !good[i]) return i;
    return -1;
}

static void run_vectors(void) {
    static const int four = 4;
    static const char *const names[1] = {"i"};
    spmd_mesh *m = NULL;
    if (create_named_mesh(1, &four, names, 30000, SPMD_CHECK_DEFAULT, SPMD_LOG_DEFAULT, &m) != SPMD_OK) {
        T_CHECK(0, "vectors: mesh (4)");
        return;
    }
    vecres R;
    memset(&R, 0, sizeof R);
    for (int i = 0; i < 4; i++) { R.ga[i][0] = -1; R.rd[i][0] = -1; R.rarg[i][0] = -1; }
    (void)spmd_run(m, vec_dev, &R);
    /* each check over this process's devices: b is the first wrong one */
    int g[4], b;
    if (!tl_nlocal(m, 0, 4)) goto done;
    for (int i = 0; i < 4; i++) g[i] = R.st[i] == SPMD_OK;
    b = vec_bad(m, g);
    T_CHECK(b < 0, "vectors: device %d: %s", b, stname(R.st[b]));
    for (int i = 0; i < 4; i++) {
        g[i] = 1;
        for (int j = 0; j < 4; j++) g[i] &= R.ag[i][2 * j] == (float)j && R.ag[i][2 * j + 1] == (float)(10 * j);
    }
    b = vec_bad(m, g);
    T_CHECK(b < 0, "allgather of [i, 10i]: device %d got [%g %g %g %g ...]", b, (double)R.ag[b][0], (double)R.ag[b][1],
            (double)R.ag[b][2], (double)R.ag[b][3]);
    for (int i = 0; i < 4; i++) {
        g[i] = 1;
        for (int j = 0; j < 4; j++) g[i] &= R.a2a[i][j] == (float)(4 * j + i);
    }
    b = vec_bad(m, g);
    T_CHECK(b < 0, "alltoall of rows [4i..4i+3]: device %d got [%g %g %g %g], want [%d %d %d %d]", b, (double)R.a2a[b][0],
            (double)R.a2a[b][1], (double)R.a2a[b][2], (double)R.a2a[b][3], b, 4 + b, 8 + b, 12 + b);
    for (int i = 0; i < 4; i++) g[i] = R.bc[i][0] == 3 && R.bc[i][1] == 30;
    b = vec_bad(m, g);
    T_CHECK(b < 0, "bcast from root 3: device %d got [%g %g], want [3 30]", b, (double)R.bc[b][0], (double)R.bc[b][1]);
    for (int i = 0; i < 4; i++) {
        g[i] = R.ga[i][0] == -1; /* non-roots: recv NULL, the buffer untouched */
        if (i == 1) {
            g[i] = 1;
            for (int j = 0; j < 4; j++) g[i] &= R.ga[1][2 * j] == (float)j && R.ga[1][2 * j + 1] == (float)(10 * j);
        }
    }
    b = vec_bad(m, g);
    T_CHECK(b < 0, "gather to root 1 (recv NULL elsewhere): device %d has [%g %g %g %g ...]", b, (double)R.ga[b][0],
            (double)R.ga[b][1], (double)R.ga[b][2], (double)R.ga[b][3]);
    for (int i = 0; i < 4; i++) g[i] = R.sc[i][0] == (float)(8 + i);
    b = vec_bad(m, g);
    T_CHECK(b < 0, "scatter from root 2 of [8 9 10 11]: device %d got %g, want %d", b, (double)R.sc[b][0], 8 + b);
    for (int i = 0; i < 4; i++) g[i] = i == 0 ? R.rd[0][0] == 6 && R.rd[0][1] == 60 : R.rd[i][0] == -1;
    b = vec_bad(m, g);
    T_CHECK(b < 0, "reduce sum to root 0: device %d has [%g %g]; want [6 60] on the root, non-roots untouched", b,
            (double)R.rd[b][0], (double)R.rd[b][1]);
    for (int i = 0; i < 4; i++) g[i] = R.scn[i][0] == (float)(i * (i + 1) / 2) && R.scn[i][1] == (float)(10 * i * (i + 1) / 2);
    b = vec_bad(m, g);
    T_CHECK(b < 0, "scan sum of [i, 10i]: device %d got [%g %g], want [%d %d]", b, (double)R.scn[b][0],
            (double)R.scn[b][1], b * (b + 1) / 2, 10 * b * (b + 1) / 2);
    static const float scm[4] = {0, 3, 3, 3};
    for (int i = 0; i < 4; i++) g[i] = R.scm[i][0] == scm[i];
    b = vec_bad(m, g);
    T_CHECK(b < 0, "scan max of [0 3 2 1]: device %d got %g, want %g (of [0 3 3 3])", b, (double)R.scm[b][0],
            (double)scm[b]);
    for (int i = 0; i < 4; i++) g[i] = i == 2 ? R.rarg[2][0] == 1 && R.rarg[2][1] == 0 : i == 0 ? R.rarg[0][0] == -1 : 1;
    b = vec_bad(m, g);
    T_CHECK(b < 0, "reduce argmax to root 2 of [0 3 2 1] and [5 5 5 5]: device %d has [%d %d]; want [1 0] on the root, "
            "device 0 untouched", b, R.rarg[b][0], R.rarg[b][1]);
done:
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "vectors: mesh destroy");
}

/* ---- buffers a device does not use (MPI's rule) -------------------------------------------- */
/* A buffer that is not significant on a device (recv off the root for
   gather and reduce, send off the root for bcast and scatter) is neither
   checked nor touched there. 4 devices on "i", every root, count 4 floats.
   Pass 1: off the root that buffer overlaps the one that is used over the
   root's extent, inside one array per device (gather: recv 8 floats before
   send, so the 16 floats a root's recv has cover send; reduce: recv 2
   before send; bcast: send 2 before recv; scatter: send 8 before recv, its
   16 floats covering recv). Pass 2: it points at a page that may not be
   read or written (a touch would crash the test). Every device must return
   SPMD_OK, the root's result match a plain reference, a non-root's recv
   (bcast, scatter) hold its share, and everything else in the array keep
   its contents. */
#define RU_N 32
enum { RU_GATHER, RU_REDUCE, RU_BCAST, RU_SCATTER, RU_KINDS };
static const char *const RU_NAMES[RU_KINDS] = {"gather", "reduce", "bcast", "scatter"};
typedef struct ructx {
    void *noaccess;                        /* pass 2's buffer: a PROT_NONE page */
    int pass;
    spmd_status st[RU_KINDS][4][4];        /* [kind][root][device] */
    char bad[RU_KINDS][4][4][120];         /* what a device found wrong, "" if nothing */
} ructx;

static float ru_val(int dev, int k) { return (float)(1000 * (dev + 1) + k); } /* device dev's A[k] */

static void ru_dev(spmd_dev *d, void *arg) {
    ructx *R = (ructx *)arg;
    int me = spmd_device_id(d);
    for (int root = 0; root < 4; root++)
        for (int kind = 0; kind < RU_KINDS; kind++) {
            float A[RU_N], out[16], want[RU_N], rootsrc[16];
            const float *send = NULL;
            float *recv = NULL;
            int k, j, root_recv = 0; /* the root's result lands in out (else in A) */
            for (k = 0; k < RU_N; k++) A[k] = want[k] = ru_val(me, k);
            for (k = 0; k < 16; k++) { out[k] = -1.0f; rootsrc[k] = (float)(100 * root + k); }
            char *why = R->bad[kind][root][me];
            why[0] = '\0';
            spmd_status s = SPMD_ERR_STATE;
            switch (kind) {
            case RU_GATHER: /* send A[8..12); off the root recv = A (16 floats nominal) */
                send = A + 8;
                recv = me == root ? out : R->pass ? (float *)R->noaccess : A;
                root_recv = me == root;
                s = spmd_gather(d, send, recv, 4, SPMD_F32, root, "i", NULL);
                break;
            case RU_REDUCE: /* send A[8..12); off the root recv = A + 6 */
                send = A + 8;
                recv = me == root ? out : R->pass ? (float *)R->noaccess : A + 6;
                root_recv = me == root;
                s = spmd_reduce(d, send, recv, 4, SPMD_F32, SPMD_OP_SUM, root, "i", NULL);
                break;
            case RU_BCAST: /* recv A[8..12); off the root send = A + 6 */
                send = me == root ? rootsrc : R->pass ? (const float *)R->noaccess : A + 6;
                recv = A + 8;
                s = spmd_bcast(d, send, recv, 4, SPMD_F32, root, "i", NULL);
                for (k = 0; k < 4; k++) want[8 + k] = (float)(100 * root + k);
                break;
            case RU_SCATTER: /* recv A[8..12); off the root send = A (16 floats nominal) */
                send = me == root ? rootsrc : R->pass ? (const float *)R->noaccess : A;
                recv = A + 8;
                s = spmd_scatter(d, send, recv, 4, SPMD_F32, root, "i", NULL);
                for (k = 0; k < 4; k++) want[8 + k] = (float)(100 * root + 4 * me + k);
                break;
            }
            R->st[kind][root][me] = s;
            if (s != SPMD_OK) {
                snprintf(why, 120, "%s: %s", spmd_status_name(s), spmd_last_error(d));
                continue;
            }
            for (k = 0; k < RU_N; k++)
                if (A[k] != want[k]) {
                    snprintf(why, 120, "A[%d] = %g, want %g", k, (double)A[k], (double)want[k]);
                    break;
                }
            if (why[0] || !root_recv) continue;
            if (kind == RU_GATHER) {
                for (j = 0; j < 4 && !why[0]; j++)
                    for (k = 0; k < 4; k++)
                        if (out[4 * j + k] != ru_val(j, 8 + k)) {
                            snprintf(why, 120, "root's recv[%d] = %g, want %g", 4 * j + k, (double)out[4 * j + k],
                                     (double)ru_val(j, 8 + k));
                            break;
                        }
            } else {
                for (k = 0; k < 4; k++) {
                    float w = 0;
                    for (j = 0; j < 4; j++) w += ru_val(j, 8 + k);
                    if (out[k] != w) {
                        snprintf(why, 120, "root's recv[%d] = %g, want %g", k, (double)out[k], (double)w);
                        break;
                    }
                }
            }
        }
}

static void run_rooted_unused(void) {
    static const int four = 4;
    static const char *const names[1] = {"i"};
    static ructx R;
    spmd_mesh *m = NULL;
    if (create_named_mesh(1, &four, names, 30000, SPMD_CHECK_DEFAULT, SPMD_LOG_DEFAULT, &m) != SPMD_OK) {
        T_CHECK(0, "unused buffers: mesh (4)");
        return;
    }
    R.noaccess = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    T_CHECK(R.noaccess != MAP_FAILED, "unused buffers: mmap of a PROT_NONE page");
    for (R.pass = 0; R.pass < (R.noaccess != MAP_FAILED ? 2 : 1); R.pass++) {
        spmd_status rs = spmd_run(m, ru_dev, &R);
        for (int kind = 0; kind < RU_KINDS; kind++)
            for (int root = 0; root < 4; root++) {
                int b = -1;
                for (int i = 0; i < 4 && b < 0; i++)
                    if (tl_local(m, i) && R.bad[kind][root][i][0]) b = i;
                T_CHECK(b < 0, "%s to root %d, the buffer unused off the root %s: device %d: %s", RU_NAMES[kind], root,
                        R.pass ? "unreadable" : "overlapping the used one", b, b < 0 ? "" : R.bad[kind][root][b]);
            }
        T_CHECK(rs == SPMD_OK, "unused buffers (pass %d): spmd_run: %s", R.pass, stname(rs));
        if (rs != SPMD_OK) break;
    }
    if (R.noaccess != MAP_FAILED) munmap(R.noaccess, 4096);
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "unused buffers: mesh destroy");
}

/* ---- the reference checks itself ----------------------------------------------------------- */
static void reference_sanity(void) {
    int ok = 1;
    ok &= ref_f32_to_f16(1.0f) == 0x3c00 && ref_f32_to_f16(65520.0f) == 0x7c00 && ref_f32_to_f16(65519.0f) == 0x7bff && ref_f32_to_f16(ldexpf(1, -25)) == 0;
    ok &= ref_f32_to_f16(ldexpf(3, -25)) == 2 && ref_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80 && ref_f32_to_bf16(1.0f + ldexpf(3, -8)) == 0x3f82;
    for (uint32_t h = 0; h < 0x7c00; h++) ok &= ref_f32_to_f16(H2F[h]) == h && ref_f32_to_bf16(B2F[h]) == h;
    int8_t a[3] = {-7, 100, -128}, b[3] = {2, 100, -1};
    unsigned char *ins[2] = {(unsigned char *)a, (unsigned char *)b};
    int8_t o[3];
    int32_t oi[3];
    ref_reduce(SPMD_I8, SPMD_OP_MEAN, 2, ins, 3, (unsigned char *)o);
    ok &= o[0] == -2 && o[1] == 100 && o[2] == -64;
    ref_reduce(SPMD_I8, SPMD_OP_SUM, 2, ins, 3, (unsigned char *)o);
    ok &= o[0] == -5 && o[1] == -56 && o[2] == 127;
    ref_reduce(SPMD_I8, SPMD_OP_ARGMIN, 2, ins, 3, (unsigned char *)oi);
    ok &= oi[0] == 0 && oi[1] == 0 && oi[2] == 0;
    float f[2] = {1.0f, NAN}, g[2] = {NAN, 2.0f};
    unsigned char *fi[2] = {(unsigned char *)f, (unsigned char *)g};
    float fo[2];
    ref_reduce(SPMD_F32, SPMD_OP_MAX, 2, fi, 2, (unsigned char *)fo);
    ok &= isnan(fo[0]) && isnan(fo[1]);
    ref_reduce(SPMD_F32, SPMD_OP_ARGMAX, 2, fi, 2, (unsigned char *)oi);
    ok &= oi[0] == INT32_MAX && oi[1] == INT32_MAX;
    uint16_t h3[1] = {0x3c01};
    unsigned char *hi[3] = {(unsigned char *)h3, (unsigned char *)h3, (unsigned char *)h3};
    uint16_t ho[1];
    ref_reduce(SPMD_F16, SPMD_OP_SUM, 3, hi, 1, (unsigned char *)ho);
    ok &= ho[0] == 0x4202; /* 3 + 3 * 2^-10 is a tie between 0x4201 and 0x4202: even */
    T_CHECK(ok, "reference sanity (hand-computed values)");
}

/* ---- driving -------------------------------------------------------------------------------- */
int main(void) {
    double t0 = now_s();
    uint64_t seed = env_seed(4242);
    g_quick = env_quick();
    printf("test_mpi: seed %llu%s\n", (unsigned long long)seed,
           env_thin() > 1 ? " (quick, thinned)" : g_quick ? " (quick)" : "");
    fflush(stdout);
    init_half_tables();
    reference_sanity();
    run_vectors();
    run_rooted_unused();
    for (int mi = 0; mi < NSWEEP_MESHES; mi++) {
        rng_t r = rng_make(seed, RNG_SALT, (uint64_t)mi + 1);
        meshctx mc;
        memset(&mc, 0, sizeof mc);
        mc.md = SWEEP_MESHES[mi];
        mc.axn = AXN;
        if (!create_mesh(&mc)) continue;
        build_vars(&mc, &r);
        double t1 = now_s();
        caselist L = {0, 0, 0};
        build_sweep(&L, &mc, &r);
        build_async(&L, &mc, &r, 12);
        L.n = tl_thin(L.a, sizeof *L.a, L.n, env_thin(), case_unit);
        int nsweep = L.n;
        tl_run_batch(&mc, &SWEEP, L.a, L.n, &r, (size_t)192 << 20);
        double t2 = now_s();
        L.n = 0;
        build_errors(&L, &mc, &r);
        int nerr = L.n;
        tl_run_errors(&mc, &SWEEP, L.a, L.n, &r);
        double t3 = now_s();
        int nlarge = 0;
        if (mi == 2 || mi == 4 || mi == 5 || mi == 7 || mi == 9) {
            L.n = 0;
            build_large(&L, &mc, &r);
            nlarge = L.n = tl_thin_large(L.a, sizeof *L.a, L.n, mi);
            tl_run_batch(&mc, &SWEEP, L.a, L.n, &r, (size_t)160 << 20);
        }
        free(L.a);
        char ms[24];
        mesh_str(&mc.md, ms, sizeof ms);
        printf("  mesh %-8s %4d sweep (%.2f s), %3d refused (%.2f s), %2d large (%.2f s), %d axis variants\n", ms, nsweep,
               t2 - t1, nerr, t3 - t2, nlarge, now_s() - t3, mc.nvar);
        fflush(stdout);
        spmd_status s = spmd_mesh_destroy(mc.m);
        T_CHECK(s == SPMD_OK, "mesh_destroy %s: %s", ms, stname(s));
    }
    free(g_exp);
    printf("test_mpi: %ld cases checked in %.2f s\n", g_checked, now_s() - t0);
    fflush(stdout);
    tl_away_check("test_mpi");
    return t_summary();
}
