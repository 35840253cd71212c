/* test_vectors.c - the worked examples of the reference texts, reproduced
   and checked literally: each result is printed the way JAX prints it (as
   integers, or floats in their shortest round-trip form) and compared with
   the string from the documentation, not with anything computed here.

   Sources: the jax.lax.psum / pmean docstrings (4 devices on axis "i"),
   the shard_map tutorial (psum of arange(8.).reshape(4,2), the (4,2) mesh
   matmul), DESIGN.md (axis_index_groups {{0,2},{3,1}}). A few hand-computed
   vectors (pmax/pmin/pargmax/pargmin/pprod, axis_index) are marked so. */
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

#define MAXROW 16

/* ---- dtypes and plain conversions ------------------------------------------- */
static const spmd_dtype NUM[] = {SPMD_I8,  SPMD_U8,  SPMD_I16, SPMD_U16, SPMD_I32,  SPMD_U32,
                                 SPMD_I64, SPMD_U64, SPMD_F16, SPMD_BF16, SPMD_F32, SPMD_F64};
#define NNUM ((int)(sizeof NUM / sizeof NUM[0]))
static const spmd_dtype FLT[] = {SPMD_F16, SPMD_BF16, SPMD_F32, SPMD_F64};
static const spmd_dtype INT[] = {SPMD_I8, SPMD_U8, SPMD_I16, SPMD_U16, SPMD_I32, SPMD_U32, SPMD_I64, SPMD_U64};

static const char *dname(spmd_dtype t) {
    static const char *n[] = {"none", "bool", "i8",  "u8",  "i16", "u16", "i32",
                              "u32",  "i64",  "u64", "f16", "bf16", "f32", "f64"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}

/* f16/bf16 encode of small exact values (all inputs here are exact in both) */
static uint16_t to_f16(double v) {
    if (v == 0) return signbit(v) ? 0x8000 : 0;
    int s = v < 0, k;
    double a = fabs(v), m = frexp(a, &k); /* a = m 2^k, m in [0.5,1) */
    int e = k - 1 + 15;                   /* exponent field */
    uint32_t mant = (uint32_t)((m * 2 - 1) * 1024);
    return (uint16_t)((s << 15) | (e << 10) | mant);
}
static float from_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (float)(s ? -v : v);
}
static uint16_t to_bf16(double v) {
    float f = (float)v; /* exact for the values used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void put(spmd_dtype t, void *p, size_t i, double v) {
    switch (t) {
    case SPMD_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case SPMD_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case SPMD_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case SPMD_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case SPMD_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case SPMD_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case SPMD_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case SPMD_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case SPMD_F16: ((uint16_t *)p)[i] = to_f16(v); break;
    case SPMD_BF16: ((uint16_t *)p)[i] = to_bf16(v); break;
    case SPMD_F32: ((float *)p)[i] = (float)v; break;
    case SPMD_F64: ((double *)p)[i] = v; break;
    default: break;
    }
}

/* Shortest text that reads back as the same value, positional, as numpy
   prints floats (without numpy's padding and trailing dots). */
static void positional(char *b, size_t cap, double v, int p) {
    char e[64];
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    const char *x = strchr(e, 'e');
    int ex = x ? atoi(x + 1) : 0;
    int dec = p - 1 - ex;
    snprintf(b, cap, "%.*f", dec < 0 ? 0 : dec, v);
    if (strchr(b, '.')) { /* strip trailing zeros and a bare dot */
        size_t n = strlen(b);
        while (n > 0 && b[n - 1] == '0') b[--n] = 0;
        if (n > 0 && b[n - 1] == '.') b[--n] = 0;
    }
    if (strcmp(b, "-0") == 0 && !signbit(v)) snprintf(b, cap, "0");
}
static void fmt_f32(char *b, size_t cap, float v) {
    for (int p = 1; p <= 9; p++) {
        positional(b, cap, (double)v, p);
        if (strtof(b, NULL) == v) return;
    }
}
static void fmt_f64(char *b, size_t cap, double v) {
    for (int p = 1; p <= 17; p++) {
        positional(b, cap, v, p);
        if (strtod(b, NULL) == v) return;
    }
}
/* Halves: shortest text naming the same half (the values printed here are
   exact, so reading back needs no rounding). */
static void fmt_half(char *b, size_t cap, uint16_t h, int bf) {
    float v = bf ? from_bf16(h) : from_f16(h);
    for (int p = 1; p <= 9; p++) {
        positional(b, cap, (double)v, p);
        if (strtof(b, NULL) == v) return;
    }
}
static void fmt(char *b, size_t cap, spmd_dtype t, const void *p, size_t i) {
    switch (t) {
    case SPMD_I8: snprintf(b, cap, "%d", ((const int8_t *)p)[i]); break;
    case SPMD_U8: snprintf(b, cap, "%u", ((const uint8_t *)p)[i]); break;
    case SPMD_I16: snprintf(b, cap, "%d", ((const int16_t *)p)[i]); break;
    case SPMD_U16: snprintf(b, cap, "%u", ((const uint16_t *)p)[i]); break;
    case SPMD_I32: snprintf(b, cap, "%d", (int)((const int32_t *)p)[i]); break;
    case SPMD_U32: snprintf(b, cap, "%u", (unsigned)((const uint32_t *)p)[i]); break;
    case SPMD_I64: snprintf(b, cap, "%lld", (long long)((const int64_t *)p)[i]); break;
    case SPMD_U64: snprintf(b, cap, "%llu", (unsigned long long)((const uint64_t *)p)[i]); break;
    case SPMD_F16: fmt_half(b, cap, ((const uint16_t *)p)[i], 0); break;
    case SPMD_BF16: fmt_half(b, cap, ((const uint16_t *)p)[i], 1); break;
    case SPMD_F32: fmt_f32(b, cap, ((const float *)p)[i]); break;
    case SPMD_F64: fmt_f64(b, cap, ((const double *)p)[i]); break;
    default: snprintf(b, cap, "?"); break;
    }
}

/* ---- one vector: inputs per device, one call per device, printed result ---- */
enum {
    K_PSUM, K_PMEAN, K_PMAX, K_PMIN, K_PPROD, K_PARGMAX, K_PARGMIN, K_ALLREDUCE_SUM,
    K_DIV_PSUM,  /* x / psum(x), in the dtype */
    K_DIV_PMEAN, /* x / pmean(x) */
    K_AXIS_INDEX, K_AXIS_SIZE, K_BARRIER,
    K_PSUM_ASYNC
};

typedef struct {
    spmd_mesh *m;
    int ndev;
    spmd_dtype dt;
    int kind;
    size_t n;            /* elements per device */
    const char *axes;
    const int *groups;
    int gsize;
    _Alignas(16) unsigned char in[MAXDEV][MAXROW * 8];
    _Alignas(16) unsigned char out[MAXDEV][MAXROW * 8];
    spmd_status st[MAXDEV];
} vjob;

static void vdev(spmd_dev *d, void *arg) {
    vjob *j = (vjob *)arg;
    int me = spmd_device_id(d);
    spmd_opts o;
    memset(&o, 0, sizeof o);
    const spmd_opts *op = NULL;
    if (j->gsize) {
        o.groups = j->groups;
        o.group_size = j->gsize;
        op = &o;
    }
    void *in = j->in[me], *out = j->out[me];
    spmd_status s = SPMD_OK;
    switch (j->kind) {
    case K_PSUM: s = spmd_psum(d, in, out, j->n, j->dt, j->axes, op); break;
    case K_PMEAN: s = spmd_pmean(d, in, out, j->n, j->dt, j->axes, op); break;
    case K_PMAX: s = spmd_pmax(d, in, out, j->n, j->dt, j->axes, op); break;
    case K_PMIN: s = spmd_pmin(d, in, out, j->n, j->dt, j->axes, op); break;
    case K_PPROD: s = spmd_pprod(d, in, out, j->n, j->dt, j->axes, op); break;
    case K_PARGMAX: s = spmd_pargmax(d, in, (int32_t *)out, j->n, j->dt, j->axes, op); break;
    case K_PARGMIN: s = spmd_pargmin(d, in, (int32_t *)out, j->n, j->dt, j->axes, op); break;
    case K_ALLREDUCE_SUM: s = spmd_allreduce(d, in, out, j->n, j->dt, SPMD_OP_SUM, j->axes, op); break;
    case K_PSUM_ASYNC: {
        spmd_req *r = NULL;
        s = spmd_psum_start(d, in, out, j->n, j->dt, j->axes, op, &r);
        if (s == SPMD_OK) s = spmd_wait(r);
    } break;
    case K_DIV_PSUM: case K_DIV_PMEAN: {
        _Alignas(16) unsigned char tot[MAXROW * 8];
        s = j->kind == K_DIV_PSUM ? spmd_psum(d, in, tot, j->n, j->dt, j->axes, op)
                                  : spmd_pmean(d, in, tot, j->n, j->dt, j->axes, op);
        for (size_t i = 0; i < j->n; i++) {
            if (j->dt == SPMD_F32) ((float *)out)[i] = ((const float *)in)[i] / ((const float *)tot)[i];
            else ((double *)out)[i] = ((const double *)in)[i] / ((const double *)tot)[i];
        }
    } break;
    case K_AXIS_INDEX: ((int32_t *)out)[0] = spmd_axis_index(d, j->axes); break;
    case K_AXIS_SIZE: ((int32_t *)out)[0] = spmd_axis_size(d, j->axes); break;
    case K_BARRIER: s = spmd_barrier(d, j->axes, op); break;
    default: break;
    }
    j->st[me] = s;
}

static int out_is_i32(int kind) {
    return kind == K_PARGMAX || kind == K_PARGMIN || kind == K_AXIS_INDEX || kind == K_AXIS_SIZE;
}

/* Run the job and print "[a b c d]" (one element per device) or
   "[[..] [..]]" (rows), devices in id order, optionally only devices in
   [first, last), and of those only the ones this process hosts (every one
   on threads; compare with local_expect). Returns 1 when the run and every
   such device succeeded, 0 if not, -1 when this process hosts none of them
   (nothing to check). */
static int run_job(vjob *j, char *text, size_t cap, int first, int last) {
    spmd_status rs = spmd_run(j->m, vdev, j);
    size_t o = 0;
    text[0] = 0;
    spmd_dtype ot = out_is_i32(j->kind) ? SPMD_I32 : j->dt;
    int rows = j->n != 1, shown = 0;
    o += (size_t)snprintf(text + o, cap - o, "[");
    for (int d = first; d < last && o < cap; d++) {
        if (!tl_local(j->m, d)) continue;
        o += (size_t)snprintf(text + o, cap - o, "%s%s", shown++ ? " " : "", rows ? "[" : "");
        for (size_t i = 0; i < j->n && o < cap; i++) {
            char b[40];
            fmt(b, sizeof b, ot, j->out[d], i);
            o += (size_t)snprintf(text + o, cap - o, "%s%s", i ? " " : "", b);
        }
        if (rows && o < cap) o += (size_t)snprintf(text + o, cap - o, "]");
    }
    if (o < cap) snprintf(text + o, cap - o, "]");
    int ok = rs == SPMD_OK;
    for (int d = 0; d < j->ndev; d++) ok &= !tl_local(j->m, d) || j->st[d] == SPMD_OK;
    return tl_nlocal(j->m, first, last) ? ok : -1;
}

/* expect ("[a b c]" or "[[..] [..]]", entry k for device first + k) cut to
   the entries of the devices this process hosts, as run_job prints them;
   the same string on threads. Returns buf. */
static const char *local_expect(const spmd_mesh *m, const char *expect, int first, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    const char *p = expect + (*expect == '[');
    int k = 0, shown = 0;
    while (*p && *p != ']') {
        const char *e = p;
        if (*e == '[') { /* a row: up to its closing bracket */
            while (*e && *e != ']') e++;
            if (*e) e++;
        } else {
            while (*e && *e != ' ' && *e != ']') e++;
        }
        if (tl_local(m, first + k++) && o < cap)
            o += (size_t)snprintf(buf + o, cap - o, "%s%.*s", shown++ ? " " : "", (int)(e - p), p);
        p = e;
        while (*p == ' ') p++;
    }
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

static spmd_mesh *make_mesh(int ndim, const int *shape, const char *const *names) {
    spmd_mesh *m = NULL;
    spmd_status s = create_named_mesh(ndim, shape, names, 20000, SPMD_CHECK_DEFAULT, SPMD_LOG_DEFAULT, &m);
    T_CHECK(s == SPMD_OK && m, "spmd_mesh_create: %s", spmd_status_name(s));
    return s == SPMD_OK ? m : NULL;
}

static const char *kname(int k) {
    static const char *n[] = {"psum",   "pmean",   "pmax",        "pmin",       "pprod",
                              "pargmax", "pargmin", "allreduce(sum)", "x/psum(x)", "x/pmean(x)",
                              "axis_index", "axis_size", "psum_start+wait"};
    return n[k];
}

/* One vector on the 4-device mesh "i": device d holds vals[d*n .. d*n+n). */
static void vec4(spmd_mesh *m, spmd_dtype dt, int kind, const double *vals, size_t n, const int *groups,
                 int gsize, const char *expect, const char *what) {
    static vjob j;
    memset(&j, 0, sizeof j);
    j.m = m;
    j.ndev = 4;
    j.dt = dt;
    j.kind = kind;
    j.n = n;
    j.axes = "i";
    j.groups = groups;
    j.gsize = gsize;
    for (int d = 0; d < 4; d++)
        for (size_t i = 0; i < n; i++) put(dt, j.in[d], i, vals[(size_t)d * n + i]);
    char text[512], want[512];
    int ok = run_job(&j, text, sizeof text, 0, 4), d0 = tl_first_local(m, 0, 4);
    local_expect(m, expect, 0, want, sizeof want);
    if (ok >= 0)
        T_CHECK(ok && strcmp(text, want) == 0, "%s %s on %s: got %s (status %s on device %d), expected %s", what,
                kname(kind), dname(dt), text, spmd_status_name(j.st[d0]), d0, want);
}

static void test_docstring_vectors(void) {
    const int shape[1] = {4};
    const char *names[1] = {"i"};
    spmd_mesh *m = make_mesh(1, shape, names);
    if (!m) return;
    static const double ar4[4] = {0, 1, 2, 3};
    double ar16[16];
    for (int i = 0; i < 16; i++) ar16[i] = i;
    static const int g01_23[4] = {0, 1, 2, 3};
    static const int g02_31[4] = {0, 2, 3, 1};

    for (int t = 0; t < NNUM; t++) {
        spmd_dtype dt = NUM[t];
        /* psum docstring */
        vec4(m, dt, K_PSUM, ar4, 1, NULL, 0, "[6 6 6 6]", "psum(arange(4)):");
        vec4(m, dt, K_PSUM, ar4, 1, g01_23, 2, "[1 1 5 5]", "psum(arange(4), groups [[0,1],[2,3]]):");
        vec4(m, dt, K_PSUM, ar16, 4, NULL, 0, "[[24 28 32 36] [24 28 32 36] [24 28 32 36] [24 28 32 36]]",
             "psum(arange(16).reshape(4,4)):");
        vec4(m, dt, K_PSUM, ar16, 4, g01_23, 2, "[[4 6 8 10] [4 6 8 10] [20 22 24 26] [20 22 24 26]]",
             "psum(arange(16).reshape(4,4), groups [[0,1],[2,3]]):");
        /* DESIGN.md groups {{0,2},{3,1}} */
        vec4(m, dt, K_PSUM, ar4, 1, g02_31, 2, "[2 4 2 4]", "psum(arange(4), groups [[0,2],[3,1]]):");
        vec4(m, dt, K_PSUM, ar16, 4, g02_31, 2, "[[8 10 12 14] [16 18 20 22] [8 10 12 14] [16 18 20 22]]",
             "psum(arange(16).reshape(4,4), groups [[0,2],[3,1]]):");
        /* the same through spmd_allreduce and the async form */
        vec4(m, dt, K_ALLREDUCE_SUM, ar4, 1, NULL, 0, "[6 6 6 6]", "arange(4):");
        vec4(m, dt, K_PSUM_ASYNC, ar16, 4, g01_23, 2, "[[4 6 8 10] [4 6 8 10] [20 22 24 26] [20 22 24 26]]",
             "arange(16).reshape(4,4), groups [[0,1],[2,3]]:");
    }
    /* pmean docstring: floats give 1.5; integers give the exact mean
       truncated toward zero in the input dtype (documented deviation: JAX
       would return float32) */
    for (int t = 0; t < 4; t++) {
        vec4(m, FLT[t], K_PMEAN, ar4, 1, NULL, 0, "[1.5 1.5 1.5 1.5]", "pmean(arange(4)):");
        vec4(m, FLT[t], K_PMEAN, ar16, 4, NULL, 0, "[[6 7 8 9] [6 7 8 9] [6 7 8 9] [6 7 8 9]]",
             "pmean(arange(16).reshape(4,4)):");
        vec4(m, FLT[t], K_PMEAN, ar16, 4, g01_23, 2,
             "[[2 3 4 5] [2 3 4 5] [10 11 12 13] [10 11 12 13]]", "pmean(arange(16).reshape(4,4), groups [[0,1],[2,3]]):");
        vec4(m, FLT[t], K_PMEAN, ar4, 1, g02_31, 2, "[1 2 1 2]", "pmean(arange(4), groups [[0,2],[3,1]]):");
    }
    for (int t = 0; t < 8; t++) {
        vec4(m, INT[t], K_PMEAN, ar4, 1, NULL, 0, "[1 1 1 1]", "pmean(arange(4)) (integer, truncated):");
        vec4(m, INT[t], K_PMEAN, ar16, 4, NULL, 0, "[[6 7 8 9] [6 7 8 9] [6 7 8 9] [6 7 8 9]]",
             "pmean(arange(16).reshape(4,4)):");
    }
    /* x / psum(x) and x / pmean(x), as printed in the docstrings (f32), and
       in f64 */
    vec4(m, SPMD_F32, K_DIV_PSUM, ar4, 1, NULL, 0, "[0 0.16666667 0.33333334 0.5]", "arange(4):");
    vec4(m, SPMD_F32, K_DIV_PMEAN, ar4, 1, NULL, 0, "[0 0.6666667 1.3333334 2]", "arange(4):");
    vec4(m, SPMD_F64, K_DIV_PSUM, ar4, 1, NULL, 0, "[0 0.16666666666666666 0.3333333333333333 0.5]", "arange(4):");
    vec4(m, SPMD_F64, K_DIV_PMEAN, ar4, 1, NULL, 0, "[0 0.6666666666666666 1.3333333333333333 2]", "arange(4):");

    /* hand-computed: x = [3 1 4 1] (device j holds x_j) */
    static const double x3141[4] = {3, 1, 4, 1};
    static const double x1234[4] = {1, 2, 3, 4};
    static const double neg[4] = {-1, -5, 2, -5};
    for (int t = 0; t < NNUM; t++) {
        spmd_dtype dt = NUM[t];
        vec4(m, dt, K_PMAX, x3141, 1, NULL, 0, "[4 4 4 4]", "(hand) x=[3 1 4 1]:");
        vec4(m, dt, K_PMIN, x3141, 1, NULL, 0, "[1 1 1 1]", "(hand) x=[3 1 4 1]:");
        vec4(m, dt, K_PARGMAX, x3141, 1, NULL, 0, "[2 2 2 2]", "(hand) x=[3 1 4 1]:");
        vec4(m, dt, K_PARGMIN, x3141, 1, NULL, 0, "[1 1 1 1]", "(hand, ties to the smallest index) x=[3 1 4 1]:");
        vec4(m, dt, K_PPROD, x1234, 1, NULL, 0, "[24 24 24 24]", "(hand) x=[1 2 3 4]:");
        vec4(m, dt, K_PMAX, x3141, 1, g02_31, 2, "[4 1 4 1]", "(hand) x=[3 1 4 1], groups [[0,2],[3,1]]:");
        vec4(m, dt, K_PMIN, ar4, 1, g02_31, 2, "[0 1 0 1]", "(hand) arange(4), groups [[0,2],[3,1]]:");
        vec4(m, dt, K_PMAX, ar4, 1, g02_31, 2, "[2 3 2 3]", "(hand) arange(4), groups [[0,2],[3,1]]:");
        vec4(m, dt, K_PPROD, x1234, 1, g02_31, 2, "[3 8 3 8]", "(hand) x=[1 2 3 4], groups [[0,2],[3,1]]:");
        if (dt == SPMD_I8 || dt == SPMD_I16 || dt == SPMD_I32 || dt == SPMD_I64 || dt == SPMD_F16 ||
            dt == SPMD_BF16 || dt == SPMD_F32 || dt == SPMD_F64) {
            vec4(m, dt, K_PMIN, neg, 1, NULL, 0, "[-5 -5 -5 -5]", "(hand) x=[-1 -5 2 -5]:");
            vec4(m, dt, K_PARGMIN, neg, 1, NULL, 0, "[1 1 1 1]", "(hand) x=[-1 -5 2 -5]:");
            vec4(m, dt, K_PSUM, neg, 1, NULL, 0, "[-9 -9 -9 -9]", "(hand) x=[-1 -5 2 -5]:");
            vec4(m, dt, K_PPROD, neg, 1, NULL, 0, "[-50 -50 -50 -50]", "(hand) x=[-1 -5 2 -5]:");
        }
    }
    /* axis_index docstring: x * axis_index('i') on ones(4) -> [0. 1. 2. 3.] */
    {
        static vjob j;
        memset(&j, 0, sizeof j);
        j.m = m; j.ndev = 4; j.kind = K_AXIS_INDEX; j.n = 1; j.axes = "i";
        char text[128], want[128];
        int ok = run_job(&j, text, sizeof text, 0, 4);
        char prod[128] = "[";
        for (int d = 0, shown = 0; d < 4; d++) {
            char b[32];
            if (!tl_local(m, d)) continue;
            fmt_f32(b, sizeof b, 1.0f * (float)((int32_t *)j.out[d])[0]);
            strcat(prod, shown++ ? " " : "");
            strcat(prod, b);
        }
        strcat(prod, "]");
        local_expect(m, "[0 1 2 3]", 0, want, sizeof want);
        if (ok >= 0)
            T_CHECK(ok && strcmp(prod, want) == 0, "ones(4) * axis_index('i'): got %s, expected %s", prod, want);
    }
    spmd_mesh_destroy(m);
}

/* shard_map tutorial: psum of arange(8.).reshape(4,2) over 'device_axis'
   (each device a (1,2) block) gives [[12. 16.]] on every device. */
static void test_tutorial_psum(void) {
    const int shape[1] = {4};
    const char *names[1] = {"device_axis"};
    spmd_mesh *m = make_mesh(1, shape, names);
    if (!m) return;
    static vjob j;
    for (int t = 0; t < NNUM; t++) {
        memset(&j, 0, sizeof j);
        j.m = m; j.ndev = 4; j.dt = NUM[t]; j.kind = K_PSUM; j.n = 2; j.axes = "device_axis";
        for (int d = 0; d < 4; d++)
            for (int i = 0; i < 2; i++) put(j.dt, j.in[d], (size_t)i, 2 * d + i);
        char text[256], want[256];
        int ok = run_job(&j, text, sizeof text, 0, 4);
        local_expect(m, "[[12 16] [12 16] [12 16] [12 16]]", 0, want, sizeof want);
        if (ok >= 0)
            T_CHECK(ok && strcmp(text, want) == 0, "tutorial psum(arange(8.).reshape(4,2)) on %s: got %s, expected %s",
                    dname(j.dt), text, want);
    }
    spmd_mesh_destroy(m);
}

/* shard_map tutorial / DESIGN.md: arange(128).reshape(8,16) @
   arange(64).reshape(16,4) on a (4,2) mesh ("row","col"), A sharded
   P(row,col), B sharded P(col,None): each device multiplies its blocks, psum
   over "col" completes the rows. First rows: [4960 5080 5200 5320],
   [12640 13016 13392 13768]. */
static void test_tutorial_matmul(void) {
    const int shape[2] = {4, 2};
    const char *names[2] = {"row", "col"};
    spmd_mesh *m = make_mesh(2, shape, names);
    if (!m) return;
    static const spmd_dtype dts[] = {SPMD_I32, SPMD_U32, SPMD_I64, SPMD_U64, SPMD_F32, SPMD_F64};
    static vjob j;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        memset(&j, 0, sizeof j);
        j.m = m; j.ndev = 8; j.dt = dts[t]; j.kind = K_PSUM; j.n = 8; j.axes = "col";
        for (int d = 0; d < 8; d++) {
            int r = d / 2, c = d % 2; /* row-major device ids */
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 4; k++) {
                    double s = 0;
                    for (int q = 0; q < 8; q++) {
                        int ar = 2 * r + i, ac = 8 * c + q; /* A[ar][ac] = 16 ar + ac */
                        int bk = 8 * c + q;                 /* B[bk][k] = 4 bk + k */
                        s += (double)(16 * ar + ac) * (double)(4 * bk + k);
                    }
                    put(j.dt, j.in[d], (size_t)(4 * i + k), s);
                }
        }
        char text[512], want[512];
        int ok = run_job(&j, text, sizeof text, 0, 2);
        local_expect(m, "[[4960 5080 5200 5320 12640 13016 13392 13768] [4960 5080 5200 5320 12640 13016 13392 13768]]", 0,
                     want, sizeof want);
        if (ok >= 0)
            T_CHECK(ok && strcmp(text, want) == 0, "tutorial matmul, rows 0-1 (devices (0,0) and (0,1)) on %s: got %s",
                    dname(j.dt), text);
        /* the other rows against a plain product (not from the docs) */
        int bad = 0;
        for (int d = 0; d < 8; d++) {
            int r = d / 2;
            if (!tl_local(m, d)) continue;
            for (int i = 0; i < 2; i++)
                for (int k = 0; k < 4; k++) {
                    long long want = 0;
                    for (int q = 0; q < 16; q++) want += (long long)(16 * (2 * r + i) + q) * (4 * q + k);
                    char b[40], w[40];
                    fmt(b, sizeof b, j.dt, j.out[d], (size_t)(4 * i + k));
                    snprintf(w, sizeof w, "%lld", want);
                    bad += strcmp(b, w) != 0;
                }
        }
        T_CHECK(bad == 0, "tutorial matmul, all rows on %s: %d wrong elements", dname(j.dt), bad);
    }
    spmd_mesh_destroy(m);
}

/* A (4,2) mesh ("i","j"): axis_index and axis_size over several axes
   strings; psum of the device id over each axis (hand-computed). */
static void test_mesh_4x2(void) {
    const int shape[2] = {4, 2};
    const char *names[2] = {"i", "j"};
    spmd_mesh *m = make_mesh(2, shape, names);
    if (!m) return;
    static const struct { const char *axes; const char *index; const char *size; } ax[] = {
        {"i,j", "[0 1 2 3 4 5 6 7]", "[8 8 8 8 8 8 8 8]"},
        {"*", "[0 1 2 3 4 5 6 7]", "[8 8 8 8 8 8 8 8]"},
        {"j,i", "[0 4 1 5 2 6 3 7]", "[8 8 8 8 8 8 8 8]"},
        {"i", "[0 0 1 1 2 2 3 3]", "[4 4 4 4 4 4 4 4]"},
        {"j", "[0 1 0 1 0 1 0 1]", "[2 2 2 2 2 2 2 2]"},
        {"", "[0 0 0 0 0 0 0 0]", "[1 1 1 1 1 1 1 1]"},
    };
    static vjob j;
    for (size_t a = 0; a < sizeof ax / sizeof ax[0]; a++) {
        for (int k = 0; k < 2; k++) {
            memset(&j, 0, sizeof j);
            j.m = m; j.ndev = 8; j.kind = k ? K_AXIS_SIZE : K_AXIS_INDEX; j.n = 1; j.axes = ax[a].axes;
            char text[128], want[128];
            int ran = run_job(&j, text, sizeof text, 0, 8);
            local_expect(m, k ? ax[a].size : ax[a].index, 0, want, sizeof want);
            if (ran >= 0)
                T_CHECK(strcmp(text, want) == 0, "%s(\"%s\") on a (4,2) mesh: got %s, expected %s", kname(j.kind),
                        ax[a].axes, text, want);
        }
    }
    T_CHECK(spmd_mesh_axis_size(m, "i,j") == 8 && spmd_mesh_axis_size(m, "i") == 4 &&
                spmd_mesh_axis_size(m, "j") == 2 && spmd_mesh_axis_size(m, "j,i") == 8 &&
                spmd_mesh_axis_size(m, "*") == 8,
            "spmd_mesh_axis_size on a (4,2) mesh");
    T_CHECK(spmd_mesh_axis_size(m, "k") < 0 && spmd_mesh_axis_size(m, "i,i") < 0,
            "spmd_mesh_axis_size of an unknown or repeated axis is negative");
    T_CHECK(spmd_mesh_size(m) == 8 && spmd_mesh_ndim(m) == 2 && strcmp(spmd_mesh_axis_name(m, 1), "j") == 0 &&
                spmd_mesh_axis_name(m, 2) == NULL,
            "spmd_mesh_size / ndim / axis_name");
    /* psum of the device id (2i + j) over each axis */
    static const struct { const char *axes; const char *want; } ps[] = {
        {"i", "[12 16 12 16 12 16 12 16]"},
        {"j", "[1 1 5 5 9 9 13 13]"},
        {"i,j", "[28 28 28 28 28 28 28 28]"},
        {"j,i", "[28 28 28 28 28 28 28 28]"},
        {"", "[0 1 2 3 4 5 6 7]"},
    };
    for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
        for (int t = 0; t < NNUM; t++) {
            memset(&j, 0, sizeof j);
            j.m = m; j.ndev = 8; j.dt = NUM[t]; j.kind = K_PSUM; j.n = 1; j.axes = ps[a].axes;
            for (int d = 0; d < 8; d++) put(j.dt, j.in[d], 0, d);
            char text[128], want[128];
            int ok = run_job(&j, text, sizeof text, 0, 8);
            local_expect(m, ps[a].want, 0, want, sizeof want);
            if (ok >= 0)
                T_CHECK(ok && strcmp(text, want) == 0, "(hand) psum(device id, \"%s\") on a (4,2) mesh, %s: got %s, expected %s",
                        ps[a].axes, dname(j.dt), text, want);
        }
    /* pargmax over "j" and over "i" of x = 7 - id (hand: the smaller id wins) */
    for (int t = 0; t < NNUM; t++) {
        memset(&j, 0, sizeof j);
        j.m = m; j.ndev = 8; j.dt = NUM[t]; j.kind = K_PARGMAX; j.n = 1; j.axes = "i";
        for (int d = 0; d < 8; d++) put(j.dt, j.in[d], 0, 7 - d);
        char text[128], want[128];
        int ok = run_job(&j, text, sizeof text, 0, 8);
        if (ok >= 0)
            T_CHECK(ok && strcmp(text, local_expect(m, "[0 0 0 0 0 0 0 0]", 0, want, sizeof want)) == 0,
                    "(hand) pargmax(7 - id, \"i\") on %s: got %s", dname(j.dt), text);
        j.kind = K_PARGMIN;
        ok = run_job(&j, text, sizeof text, 0, 8);
        if (ok >= 0)
            T_CHECK(ok && strcmp(text, local_expect(m, "[3 3 3 3 3 3 3 3]", 0, want, sizeof want)) == 0,
                    "(hand) pargmin(7 - id, \"i\") on %s: got %s", dname(j.dt), text);
        j.axes = "j";
        ok = run_job(&j, text, sizeof text, 0, 8);
        if (ok >= 0)
            T_CHECK(ok && strcmp(text, local_expect(m, "[1 1 1 1 1 1 1 1]", 0, want, sizeof want)) == 0,
                    "(hand) pargmin(7 - id, \"j\") on %s: got %s", dname(j.dt), text);
    }
    spmd_mesh_destroy(m);
}

/* bool: JAX converts to integers before psum; here the result is int32
   counts. arange(4) as bool = [F T T T]. */
static void test_bool(void) {
    const int shape[1] = {4};
    const char *names[1] = {"i"};
    spmd_mesh *m = make_mesh(1, shape, names);
    if (!m) return;
    int d0 = tl_first_local(m, 0, 4); /* -1: this process hosts none, nothing to check */
    static vjob j;
    memset(&j, 0, sizeof j);
    j.m = m; j.ndev = 4; j.dt = SPMD_BOOL; j.kind = K_PSUM; j.n = 1; j.axes = "i";
    for (int d = 0; d < 4; d++) j.in[d][0] = (unsigned char)(d != 0);
    (void)spmd_run(m, vdev, &j);
    int ok = 1;
    for (int d = 0; d < 4; d++) {
        int32_t v;
        if (!tl_local(m, d)) continue; /* this process's devices */
        memcpy(&v, j.out[d], 4);
        ok &= v == 3 && j.st[d] == SPMD_OK;
    }
    if (d0 >= 0)
        T_CHECK(ok, "psum of bool arange(4) != 0 gives int32 [3 3 3 3]");
    j.kind = K_PMAX;
    memset(j.out, 0, sizeof j.out);
    (void)spmd_run(m, vdev, &j);
    ok = 1;
    for (int d = 0; d < 4; d++) ok &= !tl_local(m, d) || (j.out[d][0] == 1 && j.st[d] == SPMD_OK);
    if (d0 >= 0)
        T_CHECK(ok, "pmax of bool [F T T T] is [T T T T]");
    j.kind = K_PMIN;
    (void)spmd_run(m, vdev, &j);
    ok = 1;
    for (int d = 0; d < 4; d++) ok &= !tl_local(m, d) || (j.out[d][0] == 0 && j.st[d] == SPMD_OK);
    if (d0 >= 0)
        T_CHECK(ok, "pmin of bool [F T T T] is [F F F F]");
    /* every device's pmin done before any refuses the pmean: across processes
       a refusal breaks the mesh, and a process still receiving its last pmin
       data (another spmd_run, not synchronised with this one) would be told
       to abandon it */
    j.kind = K_BARRIER;
    (void)spmd_run(m, vdev, &j);
    j.kind = K_PMEAN;
    (void)spmd_run(m, vdev, &j);
    ok = 1;
    for (int d = 0; d < 4; d++) ok &= !tl_local(m, d) || j.st[d] == SPMD_ERR_DTYPE;
    if (d0 >= 0)
        T_CHECK(ok, "pmean of bool is refused with SPMD_ERR_DTYPE (got %s on device %d)", spmd_status_name(j.st[d0]), d0);
    spmd_mesh_destroy(m);
}

int main(void) {
    printf("test_vectors: reference examples\n");
    fflush(stdout);
    test_docstring_vectors();
    test_tutorial_psum();
    test_tutorial_matmul();
    test_mesh_4x2();
    test_bool();
    return t_summary();
}
