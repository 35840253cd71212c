/* test_reduce.c - conformance sweep of the reductions (psum, pmean, pmax,
   pmin, pprod, pargmax, pargmin and spmd_allreduce) against a plain
   reference computed on the main thread.

   How it works: for each mesh the main thread builds a list of cases (axes,
   axis_index_groups, dtype, op, length, in place or not, algorithm, API
   entry point), generates every device's input from a seeded RNG, runs one
   spmd_run() in which each device performs the whole batch of cases in
   order, and then computes the reference for every group (a loop over the
   group members' inputs in group order 0..G-1) and compares each device's
   output bit for bit (NaN equals NaN). One T_CHECK per case. The async
   cases call spmd_allreduce_start and each op's own _start form
   (spmd_pmean_start ... spmd_pargmin_start: build_named_starts).

   Env: SPMD_TEST_SEED overrides the seed (printed); SPMD_TEST_QUICK=1 caps
   the long length at 1<<16 and runs fewer repetitions (sanitizer builds);
   SPMD_TEST_QUICK=N (N >= 2) also keeps one sweep case in N (the fabric
   matrix). Under several processes each process checks its own devices.

   Then the combining path of large groups (one member reduces for all):
   psum, allreduce and barrier over groups of 5 to 64 under both schedulers
   against a reference computed here in device order, and a count mismatch
   every member reports; in one process only (tests/testlib.h,
   tl_groups_here). */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXCLUSTER 8
#define GUARD 32 /* bytes after every output buffer that must stay untouched */
#define GUARD_BYTE 0xA7
#define FILL_BYTE 0x5C

/* ---- RNG: splitmix64 over rng_t ------------------------------------------- */
static uint64_t rnext(rng_t *r) { return splitmix64(&r->s); }
static unsigned rbelow(rng_t *r, unsigned n) { return (unsigned)(rnext(r) % n); }

/* ---- dtype facts --------------------------------------------------------------- */
static const spmd_dtype ALL_DTYPES[] = {SPMD_BOOL, SPMD_I8,  SPMD_U8,  SPMD_I16,  SPMD_U16, SPMD_I32,
                                        SPMD_U32,  SPMD_I64, SPMD_U64, SPMD_F16,  SPMD_BF16, SPMD_F32,
                                        SPMD_F64,  SPMD_C64, SPMD_C128, SPMD_F8E4M3FN, SPMD_F8E5M2};
#define NDTYPES ((int)(sizeof ALL_DTYPES / sizeof ALL_DTYPES[0]))
static const spmd_op ALL_OPS[] = {SPMD_OP_SUM, SPMD_OP_PROD,   SPMD_OP_MAX,   SPMD_OP_MIN,
                                  SPMD_OP_MEAN, SPMD_OP_ARGMAX, SPMD_OP_ARGMIN};
#define NOPS ((int)(sizeof ALL_OPS / sizeof ALL_OPS[0]))

static size_t esize(spmd_dtype t) {
    switch (t) {
    case SPMD_BOOL: case SPMD_I8: case SPMD_U8: case SPMD_F8E4M3FN: case SPMD_F8E5M2: return 1;
    case SPMD_I16: case SPMD_U16: case SPMD_F16: case SPMD_BF16: return 2;
    case SPMD_I32: case SPMD_U32: case SPMD_F32: return 4;
    case SPMD_I64: case SPMD_U64: case SPMD_F64: case SPMD_C64: return 8;
    case SPMD_C128: return 16;
    default: return 0;
    }
}
static const char *dname(spmd_dtype t) {
    static const char *n[] = {"none", "bool", "i8",  "u8",  "i16", "u16",  "i32", "u32",      "i64",
                              "u64",  "f16",  "bf16", "f32", "f64", "c64", "c128", "f8e4m3fn", "f8e5m2"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "?";
}
static const char *oname(spmd_op o) {
    static const char *n[] = {"none", "sum", "prod", "max", "min", "mean", "argmax", "argmin"};
    return (unsigned)o < sizeof n / sizeof n[0] ? n[o] : "?";
}
static const char *aname(spmd_algo a) {
    return a == SPMD_ALGO_EAGER ? "eager" : a == SPMD_ALGO_SPLIT ? "split" : "default";
}
static int is_float(spmd_dtype t) {
    return t == SPMD_F16 || t == SPMD_BF16 || t == SPMD_F32 || t == SPMD_F64 || iscplx(t) || isfp8(t);
}
static int is_arg(spmd_op o) { return o == SPMD_OP_ARGMAX || o == SPMD_OP_ARGMIN; }
/* element size of the result */
static size_t out_esize(spmd_dtype t, spmd_op o) {
    if (is_arg(o)) return 4;
    if (t == SPMD_BOOL && o == SPMD_OP_SUM) return 4;
    return esize(t);
}
static int inplace_ok(spmd_dtype t, spmd_op o) { return out_esize(t, o) == esize(t); }

/* ---- the reference reductions -------------------------------------------------
   in[j] = input of group member j (group order), G members, n elements. */
typedef const unsigned char *const *inlist;

/* max/min with NaN propagation, combined in order (acc first) */
#define FMAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define FMIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* Integers. T element type, M unsigned type for wrapping arithmetic (at least
   32 bits so that 8/16-bit products cannot overflow int), W exact sum type. */
#define DEF_REF_INT(NAME, T, M, W)                                                    \
    static void NAME(spmd_op op, size_t n, inlist in, int G, unsigned char *outp) {   \
        T *out = (T *)outp;                                                           \
        int32_t *oi = (int32_t *)outp;                                                \
        for (size_t i = 0; i < n; i++) {                                              \
            switch (op) {                                                             \
            case SPMD_OP_SUM: {                                                       \
                M acc = 0;                                                            \
                for (int j = 0; j < G; j++) acc = (M)(acc + (M)((const T *)in[j])[i]); \
                out[i] = (T)acc;                                                      \
            } break;                                                                  \
            case SPMD_OP_PROD: {                                                      \
                M acc = 1;                                                            \
                for (int j = 0; j < G; j++) acc = (M)(acc * (M)((const T *)in[j])[i]); \
                out[i] = (T)acc;                                                      \
            } break;                                                                  \
            case SPMD_OP_MEAN: {                                                      \
                W s = 0;                                                              \
                for (int j = 0; j < G; j++) s += (W)((const T *)in[j])[i];            \
                out[i] = (T)(s / (W)G);                                               \
            } break;                                                                  \
            case SPMD_OP_MAX: case SPMD_OP_ARGMAX: {                                  \
                T m = ((const T *)in[0])[i];                                          \
                for (int j = 1; j < G; j++) {                                         \
                    T x = ((const T *)in[j])[i];                                      \
                    if (x > m) m = x;                                                 \
                }                                                                     \
                if (op == SPMD_OP_MAX) { out[i] = m; break; }                         \
                int32_t r = INT32_MAX;                                                \
                for (int j = 0; j < G; j++)                                           \
                    if (((const T *)in[j])[i] == m) { r = j; break; }                 \
                oi[i] = r;                                                            \
            } break;                                                                  \
            case SPMD_OP_MIN: case SPMD_OP_ARGMIN: {                                  \
                T m = ((const T *)in[0])[i];                                          \
                for (int j = 1; j < G; j++) {                                         \
                    T x = ((const T *)in[j])[i];                                      \
                    if (x < m) m = x;                                                 \
                }                                                                     \
                if (op == SPMD_OP_MIN) { out[i] = m; break; }                         \
                int32_t r = INT32_MAX;                                                \
                for (int j = 0; j < G; j++)                                           \
                    if (((const T *)in[j])[i] == m) { r = j; break; }                 \
                oi[i] = r;                                                            \
            } break;                                                                  \
            default: break;                                                           \
            }                                                                         \
        }                                                                             \
    }
DEF_REF_INT(ref_i8, int8_t, uint32_t, int64_t)
DEF_REF_INT(ref_u8, uint8_t, uint32_t, uint64_t)
DEF_REF_INT(ref_i16, int16_t, uint32_t, int64_t)
DEF_REF_INT(ref_u16, uint16_t, uint32_t, uint64_t)
DEF_REF_INT(ref_i32, int32_t, uint32_t, int64_t)
DEF_REF_INT(ref_u32, uint32_t, uint32_t, uint64_t)
DEF_REF_INT(ref_i64, int64_t, uint64_t, __int128)
DEF_REF_INT(ref_u64, uint64_t, uint64_t, unsigned __int128)

/* Floats. LOAD gives the element as the accumulation type A; STORE rounds;
   sums and products in the canonical order (TREE, testlib.h's tl_tree_*). */
#define MAXG 4096 /* the largest group reduced here */
#define DEF_REF_FLOAT(NAME, T, A, LOAD, STORE, TREE)                                  \
    static void NAME(spmd_op op, size_t n, inlist in, int G, unsigned char *outp) {   \
        T *out = (T *)outp;                                                           \
        int32_t *oi = (int32_t *)outp;                                                \
        for (size_t i = 0; i < n; i++) {                                              \
            A acc = LOAD(in[0], i), xs[MAXG];                                         \
            for (int j = 0; j < G && op != SPMD_OP_MAX && op != SPMD_OP_MIN; j++)     \
                xs[j] = LOAD(in[j], i);                                               \
            switch (op) {                                                             \
            case SPMD_OP_SUM:                                                         \
                out[i] = STORE(TREE(xs, G, 0));                                       \
                break;                                                                \
            case SPMD_OP_MEAN:                                                        \
                out[i] = STORE(TREE(xs, G, 0) / (A)G);                                \
                break;                                                                \
            case SPMD_OP_PROD:                                                        \
                out[i] = STORE(TREE(xs, G, 1));                                       \
                break;                                                                \
            case SPMD_OP_MAX: case SPMD_OP_ARGMAX:                                    \
                for (int j = 1; j < G; j++) { A x = LOAD(in[j], i); acc = FMAX(acc, x); } \
                if (op == SPMD_OP_MAX) { out[i] = STORE(acc); break; }                \
                oi[i] = INT32_MAX;                                                    \
                for (int j = 0; j < G; j++)                                           \
                    if (LOAD(in[j], i) == acc) { oi[i] = j; break; }                  \
                break;                                                                \
            case SPMD_OP_MIN: case SPMD_OP_ARGMIN:                                    \
                for (int j = 1; j < G; j++) { A x = LOAD(in[j], i); acc = FMIN(acc, x); } \
                if (op == SPMD_OP_MIN) { out[i] = STORE(acc); break; }                \
                oi[i] = INT32_MAX;                                                    \
                for (int j = 0; j < G; j++)                                           \
                    if (LOAD(in[j], i) == acc) { oi[i] = j; break; }                  \
                break;                                                                \
            default: break;                                                           \
            }                                                                         \
        }                                                                             \
    }
#define LD_F32(p, i) (((const float *)(p))[i])
#define LD_F64(p, i) (((const double *)(p))[i])
#define LD_F16(p, i) (H2F[((const uint16_t *)(p))[i]])
#define LD_BF16(p, i) (B2F[((const uint16_t *)(p))[i]])
#define LD_E4(p, i) (E4F[((const uint8_t *)(p))[i]])
#define LD_E5(p, i) (E5F[((const uint8_t *)(p))[i]])
#define ST_SAME(x) (x)
DEF_REF_FLOAT(ref_f32, float, float, LD_F32, ST_SAME, tl_tree_f32)
DEF_REF_FLOAT(ref_f64, double, double, LD_F64, ST_SAME, tl_tree_f64)
DEF_REF_FLOAT(ref_f16, uint16_t, float, LD_F16, ref_f32_to_f16, tl_tree_f32)
DEF_REF_FLOAT(ref_bf16, uint16_t, float, LD_BF16, ref_f32_to_bf16, tl_tree_f32)
DEF_REF_FLOAT(ref_e4, uint8_t, float, LD_E4, ref_f32_to_f8e4m3fn, tl_tree_f32)
DEF_REF_FLOAT(ref_e5, uint8_t, float, LD_E5, ref_f32_to_f8e5m2, tl_tree_f32)

/* bool: psum counts nonzero inputs (int32); max = any, min = all, prod = all;
   argmax/argmin compare truth values. */
static void ref_bool(spmd_op op, size_t n, inlist in, int G, unsigned char *outp) {
    for (size_t i = 0; i < n; i++) {
        int cnt = 0;
        for (int j = 0; j < G; j++) cnt += in[j][i] != 0;
        int any = cnt > 0, all = cnt == G;
        switch (op) {
        case SPMD_OP_SUM: { int32_t c = cnt; memcpy(outp + 4 * i, &c, 4); } break;
        case SPMD_OP_MAX: outp[i] = (unsigned char)any; break;
        case SPMD_OP_MIN: case SPMD_OP_PROD: outp[i] = (unsigned char)all; break;
        case SPMD_OP_ARGMAX: case SPMD_OP_ARGMIN: {
            int m = op == SPMD_OP_ARGMAX ? any : all;
            int32_t r = INT32_MAX;
            for (int j = 0; j < G; j++)
                if ((in[j][i] != 0) == m) { r = j; break; }
            memcpy(outp + 4 * i, &r, 4);
        } break;
        default: break;
        }
    }
}

static void ref_reduce(spmd_dtype t, spmd_op op, size_t n, inlist in, int G, unsigned char *out) {
    switch (t) {
    case SPMD_BOOL: ref_bool(op, n, in, G, out); break;
    case SPMD_I8: ref_i8(op, n, in, G, out); break;
    case SPMD_U8: ref_u8(op, n, in, G, out); break;
    case SPMD_I16: ref_i16(op, n, in, G, out); break;
    case SPMD_U16: ref_u16(op, n, in, G, out); break;
    case SPMD_I32: ref_i32(op, n, in, G, out); break;
    case SPMD_U32: ref_u32(op, n, in, G, out); break;
    case SPMD_I64: ref_i64(op, n, in, G, out); break;
    case SPMD_U64: ref_u64(op, n, in, G, out); break;
    case SPMD_F16: ref_f16(op, n, in, G, out); break;
    case SPMD_BF16: ref_bf16(op, n, in, G, out); break;
    case SPMD_F32: ref_f32(op, n, in, G, out); break;
    case SPMD_F64: ref_f64(op, n, in, G, out); break;
    case SPMD_C64: case SPMD_C128: tl_ref_complex(t == SPMD_C128, op, n, in, G, out); break;
    case SPMD_F8E4M3FN: ref_e4(op, n, in, G, out); break;
    case SPMD_F8E5M2: ref_e5(op, n, in, G, out); break;
    default: break;
    }
}

/* Element i of a result equal to the reference? (bits, NaN == NaN) */
static int elem_equal(spmd_dtype t, spmd_op op, const unsigned char *a, const unsigned char *b, size_t i) {
    size_t es = out_esize(t, op);
    if (memcmp(a + i * es, b + i * es, es) == 0) return 1;
    if (is_arg(op) || !is_float(t)) return 0;
    if (iscplx(t)) { /* each part: the same bits or both NaN */
        spmd_dtype pt = t == SPMD_C64 ? SPMD_F32 : SPMD_F64;
        return elem_equal(pt, op, a, b, 2 * i) && elem_equal(pt, op, a, b, 2 * i + 1);
    }
    if (isfp8(t)) {
        const float *tab = t == SPMD_F8E4M3FN ? E4F : E5F;
        return isnan(tab[a[i]]) && isnan(tab[b[i]]);
    }
    if (t == SPMD_F16 || t == SPMD_BF16) {
        uint16_t x, y;
        memcpy(&x, a + 2 * i, 2);
        memcpy(&y, b + 2 * i, 2);
        float fx = t == SPMD_F16 ? H2F[x] : B2F[x], fy = t == SPMD_F16 ? H2F[y] : B2F[y];
        return isnan(fx) && isnan(fy);
    }
    if (t == SPMD_F32) {
        float x, y;
        memcpy(&x, a + 4 * i, 4);
        memcpy(&y, b + 4 * i, 4);
        return isnan(x) && isnan(y);
    }
    double x, y;
    memcpy(&x, a + 8 * i, 8);
    memcpy(&y, b + 8 * i, 8);
    return isnan(x) && isnan(y);
}
static void fmt_elem(char *buf, size_t cap, spmd_dtype t, spmd_op op, const unsigned char *p, size_t i) {
    size_t es = out_esize(t, op);
    const unsigned char *q = p + i * es;
    if (es == 4 && (is_arg(op) || t == SPMD_BOOL)) {
        int32_t v; memcpy(&v, q, 4); snprintf(buf, cap, "%d", (int)v); return;
    }
    switch (t) {
    case SPMD_BOOL: snprintf(buf, cap, "%u", q[0]); break;
    case SPMD_I8: snprintf(buf, cap, "%d", (int)(int8_t)q[0]); break;
    case SPMD_U8: snprintf(buf, cap, "%u", q[0]); break;
    case SPMD_I16: { int16_t v; memcpy(&v, q, 2); snprintf(buf, cap, "%d", v); } break;
    case SPMD_U16: { uint16_t v; memcpy(&v, q, 2); snprintf(buf, cap, "%u", v); } break;
    case SPMD_I32: { int32_t v; memcpy(&v, q, 4); snprintf(buf, cap, "%d", (int)v); } break;
    case SPMD_U32: { uint32_t v; memcpy(&v, q, 4); snprintf(buf, cap, "%u", (unsigned)v); } break;
    case SPMD_I64: { int64_t v; memcpy(&v, q, 8); snprintf(buf, cap, "%lld", (long long)v); } break;
    case SPMD_U64: { uint64_t v; memcpy(&v, q, 8); snprintf(buf, cap, "%llu", (unsigned long long)v); } break;
    case SPMD_F16: { uint16_t v; memcpy(&v, q, 2); snprintf(buf, cap, "%.9g (0x%04x)", (double)H2F[v], v); } break;
    case SPMD_BF16: { uint16_t v; memcpy(&v, q, 2); snprintf(buf, cap, "%.9g (0x%04x)", (double)B2F[v], v); } break;
    case SPMD_F32: { float v; memcpy(&v, q, 4); snprintf(buf, cap, "%.9g (0x%08x)", (double)v, (unsigned)f2u(v)); } break;
    case SPMD_F64: { double v; uint64_t u; memcpy(&v, q, 8); memcpy(&u, q, 8);
                     snprintf(buf, cap, "%.17g (0x%016llx)", v, (unsigned long long)u); } break;
    case SPMD_C64: { float v[2]; memcpy(v, q, 8); snprintf(buf, cap, "%.9g%+.9gi", (double)v[0], (double)v[1]); } break;
    case SPMD_C128: { double v[2]; memcpy(v, q, 16); snprintf(buf, cap, "%.17g%+.17gi", v[0], v[1]); } break;
    case SPMD_F8E4M3FN: snprintf(buf, cap, "%.9g (0x%02x)", (double)E4F[q[0]], q[0]); break;
    case SPMD_F8E5M2: snprintf(buf, cap, "%.9g (0x%02x)", (double)E5F[q[0]], q[0]); break;
    default: snprintf(buf, cap, "?"); break;
    }
}

/* ---- meshes, axes, groups ------------------------------------------------------ */
static const char *AXNAME[3] = {"dp", "tp", "pp"};

static void groups_str(const axv *v, char *buf, size_t cap) {
    if (!v->gsize) { snprintf(buf, cap, "none"); return; }
    size_t o = 0;
    buf[0] = 0;
    for (int k = 0; k < v->size && o + 8 < cap; k++) {
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", k == 0 ? "[" : (k % v->gsize == 0) ? "|" : " ",
                              v->groups[k]);
    }
    if (o + 2 < cap) snprintf(buf + o, cap - o, "]");
}
/* a copy of variant `base` with a random partition into groups of gsize */
static void add_group_var(meshctx *mc, int base, int gsize, rng_t *r, int shuffle) {
    if (mc->nvar >= (int)(sizeof mc->var / sizeof mc->var[0])) return;
    axv *v = &mc->var[mc->nvar++];
    *v = mc->var[base];
    v->gsize = gsize;
    for (int k = 0; k < v->size; k++) v->groups[k] = k;
    if (shuffle)
        for (int k = v->size - 1; k > 0; k--) {
            int j = (int)rbelow(r, (unsigned)k + 1);
            int t = v->groups[k]; v->groups[k] = v->groups[j]; v->groups[j] = t;
        }
}

static void build_vars(meshctx *mc, rng_t *r) {
    int nd = mc->md.nd;
    mc->nvar = 0;
    int none[1] = {0};
    add_axv(mc, none, 0, 0); /* "" : group of one */
    int all[3] = {0, 1, 2};
    add_axv(mc, all, nd, 1); /* "*" */
    /* every non-empty subset, in mesh order and in other orders */
    for (int mask = 1; mask < (1 << nd); mask++) {
        int d[3], k = 0;
        for (int i = 0; i < nd; i++)
            if (mask & (1 << i)) d[k++] = i;
        if (k == 1) add_axv(mc, d, 1, 0);
        else if (k == 2) {
            add_axv(mc, d, 2, 0);
            int e[2] = {d[1], d[0]};
            add_axv(mc, e, 2, 0);
        } else {
            static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
            for (int p = 0; p < 6; p++) {
                int e[3] = {d[perms[p][0]], d[perms[p][1]], d[perms[p][2]]};
                add_axv(mc, e, 3, 0);
            }
        }
    }
    /* axis_index_groups: for each variant with an axis size > 1, a few
       partitions with group sizes dividing it (random permutations, and the
       plain order once); also a trivial partition on "" */
    int nbase = mc->nvar;
    for (int b = 0; b < nbase; b++) {
        int S = mc->var[b].size;
        if (S == 1) {
            if (b == 0) add_group_var(mc, b, 1, r, 0);
            continue;
        }
        int divs[16], ndiv = 0;
        for (int g = 1; g <= S; g++)
            if (S % g == 0) divs[ndiv++] = g;
        /* two partitions per variant: one with a proper divisor, one random */
        int g1 = divs[ndiv > 2 ? 1 + (int)rbelow(r, (unsigned)ndiv - 2) : (int)rbelow(r, (unsigned)ndiv)];
        add_group_var(mc, b, g1, r, 1);
        int g2 = divs[rbelow(r, (unsigned)ndiv)];
        add_group_var(mc, b, g2, r, (int)rbelow(r, 2));
    }
}

/* ---- cases ------------------------------------------------------------------------ */
enum { API_ALLREDUCE, API_NAMED, API_ASYNC };
#define EXPECT_ANY_ERROR SPMD_STATUS_COUNT /* refusal with any status */
enum { WAIT_WAIT, WAIT_DONE, WAIT_TEST, WAIT_ALL }; /* async completion styles */

typedef struct tcase {
    int var;
    spmd_dtype dt;
    spmd_op op;
    size_t n;
    int inplace;
    spmd_algo algo;
    int api;
    int null_opts;  /* pass opts = NULL (only when nothing to set) */
    int cluster;    /* async: number of requests started together, on the first case; 0 otherwise */
    int waitstyle;
    int order[MAXDEV][MAXCLUSTER]; /* async: per-device completion order */
    int special;    /* floats: NaN, +-inf, +-0 sprinkled in */
    int narrow;     /* values from a small set (ties) */
    int named;      /* async: the op's own _start form (spmd_pmean_start ...), not spmd_allreduce_start */
    int away;       /* async, on the first case: the devices go away after the starts (tl_away) */
    int bool_p;     /* bool: probability of true, in 1/256 */
    int bool_wide;  /* bool: use nonzero bytes other than 1 */
    spmd_status expect;
    unsigned char *in[MAXDEV], *out[MAXDEV];
    uint64_t inhash[MAXDEV];
    spmd_status st[MAXDEV];
    int errflag;
    char errmsg[200];
} tcase;

typedef struct {
    meshctx *mc;
    tcase *cases;
    int ncases;
} batch;

/* ---- input generation ---------------------------------------------------------- */
static void gen_input(tcase *c, unsigned char *buf, rng_t *r) {
    size_t n = c->n;
    switch (c->dt) {
    case SPMD_C64: case SPMD_C128: { /* the parts as f32 or f64 values */
        tcase parts = *c;
        parts.dt = c->dt == SPMD_C64 ? SPMD_F32 : SPMD_F64;
        parts.n = 2 * n;
        gen_input(&parts, buf, r);
    } break;
    case SPMD_F8E4M3FN: case SPMD_F8E5M2: {
        /* any code (NaN, inf, subnormals and the largest values among
           them); pprod: values in [0.5, 2); narrow: a few small values */
        static const float small_set[] = {-2, -1, -0.5f, 0, 0.5f, 1, 2};
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rnext(r);
            buf[i] = c->narrow ? tl_f32_to_fp8(c->dt, small_set[(x >> 12) % 7])
                               : tl_fp8_code(c->dt, x, c->op == SPMD_OP_PROD);
        }
    } break;
    case SPMD_BOOL:
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rnext(r);
            int t = (int)(x & 255) < c->bool_p;
            unsigned char b = 0;
            if (t) b = c->bool_wide && ((x >> 8) & 1) ? (unsigned char)(2 + (x >> 16) % 254) : 1;
            buf[i] = b;
        }
        break;
    case SPMD_I8: case SPMD_U8: case SPMD_I16: case SPMD_U16:
    case SPMD_I32: case SPMD_U32: case SPMD_I64: case SPMD_U64: {
        size_t es = esize(c->dt), nb = n * es;
        if (c->narrow) {
            for (size_t i = 0; i < n; i++) {
                /* small values around zero (signed) / near zero and near max (unsigned) */
                int64_t v = (int64_t)rbelow(r, 5) - 2;
                uint64_t u = (uint64_t)v;
                memcpy(buf + i * es, &u, es); /* little endian: low bytes */
            }
        } else {
            size_t i = 0;
            for (; i + 8 <= nb; i += 8) { uint64_t x = rnext(r); memcpy(buf + i, &x, 8); }
            if (i < nb) { uint64_t x = rnext(r); memcpy(buf + i, &x, nb - i); }
        }
    } break;
    case SPMD_F16: case SPMD_BF16: case SPMD_F32: case SPMD_F64: {
        /* bit patterns: random sign and mantissa, exponent in a moderate
           window (pprod: values in [0.5, 2)); now and then any finite
           exponent; specials when asked */
        int mb, bias, emaxf, tb = (int)esize(c->dt) * 8;
        uint64_t signbit = 1ull << (tb - 1);
        switch (c->dt) {
        case SPMD_F16: mb = 10; bias = 15; emaxf = 31; break;
        case SPMD_BF16: mb = 7; bias = 127; emaxf = 255; break;
        case SPMD_F32: mb = 23; bias = 127; emaxf = 255; break;
        default: mb = 52; bias = 1023; emaxf = 2047; break;
        }
        static const double small_set[] = {-2, -1, -0.5, 0, 0.5, 1, 2};
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rnext(r), y = rnext(r);
            uint64_t sign = x & 1, mant = (y & ((1ull << mb) - 1)), e;
            unsigned sel = (unsigned)((x >> 1) & 255);
            int special = -1;
            if (c->special && sel < 24) special = (int)(sel % 6);
            if (c->op == SPMD_OP_PROD) e = (uint64_t)(bias - 1 + (int)((x >> 9) & 1));
            else e = (uint64_t)(bias - 5 + (int)((x >> 9) % 12));
            if (!c->narrow && special < 0 && sel >= 250 && c->op != SPMD_OP_PROD)
                e = (x >> 20) % (uint64_t)emaxf; /* any finite exponent, subnormals included */
            uint64_t bits = (sign ? signbit : 0) | (e << mb) | mant;
            if (c->narrow) {
                double v = small_set[(x >> 12) % 7];
                if (c->op == SPMD_OP_PROD) v = v == 0 ? 1 : fabs(v);
                float f = (float)v;
                switch (c->dt) {
                case SPMD_F16: bits = ref_f32_to_f16(f); break;
                case SPMD_BF16: bits = ref_f32_to_bf16(f); break;
                case SPMD_F32: bits = f2u(f); break;
                default: memcpy(&bits, &v, 8); break;
                }
            }
            if (special >= 0) {
                /* 0 quiet NaN, 1 +inf, 2 -inf, 3 -0, 4 +0, 5 negative signaling NaN */
                uint64_t expall = (uint64_t)emaxf << mb;
                switch (special) {
                case 0: bits = expall | (1ull << (mb - 1)); break;
                case 1: bits = expall; break;
                case 2: bits = signbit | expall; break;
                case 3: bits = signbit; break;
                case 4: bits = 0; break;
                default: bits = signbit | expall | 1; break;
                }
            }
            size_t es = esize(c->dt);
            memcpy(buf + i * es, &bits, es);
        }
    } break;
    default: break;
    }
}

/* ---- the device side ------------------------------------------------------------ */
static void note_error(tcase *c, spmd_dev *d, int me, spmd_status s, const char *where) {
    if (__atomic_exchange_n(&c->errflag, 1, __ATOMIC_ACQ_REL) == 0)
        snprintf(c->errmsg, sizeof c->errmsg, "dev %d %.40s: %.24s (%.120s)", me, where, spmd_status_name(s),
                 spmd_last_error(d));
}

static void fill_opts(const tcase *c, const axv *v, spmd_opts *o, const spmd_opts **op) {
    memset(o, 0, sizeof *o);
    o->algo = c->algo;
    if (v->gsize) {
        o->groups = v->groups;
        o->group_size = v->gsize;
    }
    *op = (c->null_opts && !v->gsize && c->algo == SPMD_ALGO_DEFAULT) ? NULL : o;
}

static spmd_status call_sync(spmd_dev *d, tcase *c, const axv *v, int me) {
    const void *send = c->inplace ? (const void *)c->out[me] : (const void *)c->in[me];
    void *recv = c->out[me];
    spmd_opts o;
    const spmd_opts *op;
    fill_opts(c, v, &o, &op);
    if (c->api == API_ALLREDUCE) return spmd_allreduce(d, send, recv, c->n, c->dt, c->op, v->axes, op);
    switch (c->op) {
    case SPMD_OP_SUM: return spmd_psum(d, send, recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_MEAN: return spmd_pmean(d, send, recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_MAX: return spmd_pmax(d, send, recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_MIN: return spmd_pmin(d, send, recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_PROD: return spmd_pprod(d, send, recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_ARGMAX: return spmd_pargmax(d, send, (int32_t *)recv, c->n, c->dt, v->axes, op);
    case SPMD_OP_ARGMIN: return spmd_pargmin(d, send, (int32_t *)recv, c->n, c->dt, v->axes, op);
    default: return SPMD_ERR_INVALID;
    }
}

static spmd_status call_start(spmd_dev *d, tcase *c, const axv *v, int me, spmd_req **req) {
    const void *send = c->inplace ? (const void *)c->out[me] : (const void *)c->in[me];
    void *recv = c->out[me];
    spmd_opts o;
    const spmd_opts *op;
    fill_opts(c, v, &o, &op);
    if (c->named) {
        switch (c->op) {
        case SPMD_OP_SUM: return spmd_psum_start(d, send, recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_MEAN: return spmd_pmean_start(d, send, recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_MAX: return spmd_pmax_start(d, send, recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_MIN: return spmd_pmin_start(d, send, recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_PROD: return spmd_pprod_start(d, send, recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_ARGMAX: return spmd_pargmax_start(d, send, (int32_t *)recv, c->n, c->dt, v->axes, op, req);
        case SPMD_OP_ARGMIN: return spmd_pargmin_start(d, send, (int32_t *)recv, c->n, c->dt, v->axes, op, req);
        default: return SPMD_ERR_INVALID;
        }
    }
    if (c->op == SPMD_OP_SUM && c->null_opts)
        return spmd_psum_start(d, send, recv, c->n, c->dt, v->axes, op, req);
    return spmd_allreduce_start(d, send, recv, c->n, c->dt, c->op, v->axes, op, req);
}

static void dev_main(spmd_dev *d, void *arg) {
    batch *b = (batch *)arg;
    int me = spmd_device_id(d);
    for (int k = 0; k < b->ncases;) {
        tcase *c = &b->cases[k];
        if (c->api == API_ASYNC && c->cluster > 0) {
            int m = c->cluster;
            spmd_req *req[MAXCLUSTER] = {0};
            uint64_t base = c->away ? tl_worker_tasks(b->mc->m) : 0;
            for (int q = 0; q < m; q++) {
                tcase *cq = &b->cases[k + q];
                spmd_status s = call_start(d, cq, &b->mc->var[cq->var], me, &req[q]);
                cq->st[me] = s;
                if (s != SPMD_OK) note_error(cq, d, me, s, "start");
                else if (!req[q]) { cq->st[me] = SPMD_ERR_STATE; note_error(cq, d, me, SPMD_ERR_STATE, "start gave no request"); }
            }
            if (c->away) tl_away(b->mc->m, base, 0.02);
            if (c->waitstyle == WAIT_ALL) {
                spmd_status s = spmd_wait_all(req, m);
                /* the first failure is returned; attribute it to every case */
                if (s != SPMD_OK)
                    for (int q = 0; q < m; q++) {
                        if (b->cases[k + q].st[me] == SPMD_OK) b->cases[k + q].st[me] = s;
                        note_error(&b->cases[k + q], d, me, s, "wait_all");
                    }
            } else if (c->waitstyle == WAIT_TEST) {
                int left = 0;
                for (int q = 0; q < m; q++) left += req[q] != NULL;
                double deadline = now_s() + 60;
                while (left > 0) {
                    for (int w = 0; w < m; w++) {
                        int q = c->order[me][w];
                        if (!req[q]) continue;
                        int done = 0;
                        spmd_status s = spmd_test(req[q], &done);
                        if (done) {
                            req[q] = NULL;
                            left--;
                            b->cases[k + q].st[me] = s;
                            if (s != SPMD_OK) note_error(&b->cases[k + q], d, me, s, "test");
                        } else if (s != SPMD_OK) {
                            b->cases[k + q].st[me] = s;
                            note_error(&b->cases[k + q], d, me, s, "test (not done)");
                        }
                    }
                    if (left > 0) sched_yield();
                    if (left > 0 && now_s() > deadline) {
                        for (int q = 0; q < m; q++)
                            if (req[q]) {
                                b->cases[k + q].st[me] = SPMD_ERR_TIMEOUT;
                                note_error(&b->cases[k + q], d, me, SPMD_ERR_TIMEOUT, "spmd_test never finished (60 s)");
                            }
                        break;
                    }
                }
            } else {
                for (int w = 0; w < m; w++) {
                    int q = c->order[me][w];
                    if (!req[q]) continue;
                    spmd_status s = c->waitstyle == WAIT_DONE ? spmd_done(req[q]) : spmd_wait(req[q]);
                    b->cases[k + q].st[me] = s;
                    if (s != SPMD_OK) note_error(&b->cases[k + q], d, me, s, "wait");
                }
            }
            k += m;
        } else {
            spmd_status s = call_sync(d, c, &b->mc->var[c->var], me);
            c->st[me] = s;
            if (s != c->expect) note_error(c, d, me, s, "call");
            k++;
        }
    }
}

/* ---- main side: buffers, run, verify ----------------------------------------------- */
static size_t case_bytes(const tcase *c, int ndev) {
    return (size_t)ndev * (c->n * esize(c->dt) + c->n * out_esize(c->dt, c->op) + 2 * GUARD);
}

/* recv is followed by GUARD bytes; in place, recv is as large as the larger
   of send and recv (only refused calls have them differ) */
static size_t guard_offset(const tcase *c) {
    size_t ib = c->n * esize(c->dt), ob = c->n * out_esize(c->dt, c->op);
    return c->inplace && ib > ob ? ib : ob;
}

static int prepare_case(tcase *c, int ndev, rng_t *r) {
    size_t ib = c->n * esize(c->dt), ob = c->n * out_esize(c->dt, c->op);
    size_t go = guard_offset(c);
    for (int d = 0; d < ndev; d++) {
        c->in[d] = (unsigned char *)malloc(ib + GUARD);
        c->out[d] = (unsigned char *)malloc(go + GUARD);
        if (!c->in[d] || !c->out[d]) return 0;
        gen_input(c, c->in[d], r);
        memset(c->in[d] + ib, GUARD_BYTE, GUARD);
        if (c->inplace) memcpy(c->out[d], c->in[d], ib);
        else memset(c->out[d], FILL_BYTE, ob);
        memset(c->out[d] + go, GUARD_BYTE, GUARD);
        c->inhash[d] = hash_bytes(c->in[d], ib);
        c->st[d] = (spmd_status)-1;
    }
    c->errflag = 0;
    c->errmsg[0] = 0;
    return 1;
}
static void free_case(tcase *c, int ndev) {
    for (int d = 0; d < ndev; d++) {
        free(c->in[d]);
        free(c->out[d]);
        c->in[d] = c->out[d] = NULL;
    }
}

static const char *api_name(const tcase *c) {
    if (c->api == API_ALLREDUCE) return "spmd_allreduce";
    if (c->api == API_ASYNC) {
        static const char *w[] = {"start+wait", "start+done", "start+test", "start+wait_all"};
        return w[c->waitstyle];
    }
    switch (c->op) {
    case SPMD_OP_SUM: return "spmd_psum";
    case SPMD_OP_MEAN: return "spmd_pmean";
    case SPMD_OP_MAX: return "spmd_pmax";
    case SPMD_OP_MIN: return "spmd_pmin";
    case SPMD_OP_PROD: return "spmd_pprod";
    case SPMD_OP_ARGMAX: return "spmd_pargmax";
    default: return "spmd_pargmin";
    }
}

static void describe(const meshctx *mc, const tcase *c, char *buf, size_t cap) {
    char ms[32], gs[96];
    mesh_str(&mc->md, ms, sizeof ms);
    const axv *v = &mc->var[c->var];
    groups_str(v, gs, sizeof gs);
    char api[64];
    if (c->api == API_ASYNC && c->named)
        snprintf(api, sizeof api, "spmd_p%s_start+%s", oname(c->op), api_name(c) + 6);
    else
        snprintf(api, sizeof api, "%s", api_name(c));
    snprintf(buf, cap, "mesh %s axes \"%s\" groups %s dtype %s op %s n %zu inplace %d algo %s api %s%s%s",
             ms, v->axes, gs, dname(c->dt), oname(c->op), c->n, c->inplace, aname(c->algo), api,
             c->special ? " special" : "", c->narrow ? " narrow" : "");
}

static long g_cases_checked;
static unsigned char *g_ref;     /* scratch for one group's reference */
static size_t g_ref_cap;

/* One check per case over this process's devices (all of them on threads;
   the outputs of other processes' devices are not here). A process hosting
   none of the mesh's devices has nothing to check and counts nothing. */
static void verify_case(const meshctx *mc, tcase *c) {
    int ndev = mc->ndev;
    const axv *v = &mc->var[c->var];
    char desc[400], why[600];
    if (!tl_nlocal(mc->m, 0, ndev)) return;
    describe(mc, c, desc, sizeof desc);
    why[0] = 0;
    int ok = 1;
    size_t ib = c->n * esize(c->dt), ob = c->n * out_esize(c->dt, c->op), go = guard_offset(c);

    /* statuses */
    for (int d = 0; d < ndev && ok; d++)
        if (tl_local(mc->m, d) && c->st[d] != c->expect) {
            ok = 0;
            snprintf(why, sizeof why, "dev %d returned %s, expected %s; %s", d,
                     (unsigned)c->st[d] < SPMD_STATUS_COUNT ? spmd_status_name(c->st[d]) : "(no call)",
                     spmd_status_name(c->expect), c->errmsg);
        }
    /* guards and untouched inputs */
    for (int d = 0; d < ndev && ok; d++) {
        if (!tl_local(mc->m, d)) continue;
        for (int g = 0; g < GUARD; g++)
            if (c->out[d][go + g] != GUARD_BYTE) {
                ok = 0;
                snprintf(why, sizeof why, "dev %d wrote past the end of recv (byte %zu)", d, go + (size_t)g);
                break;
            }
        if (ok && !c->inplace && hash_bytes(c->in[d], ib) != c->inhash[d]) {
            ok = 0;
            snprintf(why, sizeof why, "dev %d: the send buffer was modified", d);
        }
    }
    if (ok && c->expect != SPMD_OK) {
        /* refused: recv must be untouched */
        for (int d = 0; d < ndev && ok; d++) {
            int bad = 0;
            if (!tl_local(mc->m, d)) continue;
            if (c->inplace) bad = hash_bytes(c->out[d], ib) != c->inhash[d];
            else for (size_t i = 0; i < ob; i++) if (c->out[d][i] != FILL_BYTE) { bad = 1; break; }
            if (bad) { ok = 0; snprintf(why, sizeof why, "dev %d: refused call wrote into recv", d); }
        }
    }
    if (ok && c->expect == SPMD_OK) {
        if (g_ref_cap < ob + 1) {
            free(g_ref);
            g_ref_cap = ob + 1;
            g_ref = (unsigned char *)malloc(g_ref_cap);
        }
        char done[MAXDEV] = {0};
        for (int d = 0; d < ndev && ok; d++) {
            if (done[d]) continue;
            int mem[MAXDEV];
            int me, G = group_of(&mc->md, v, d, mem, &me), nloc = 0;
            const unsigned char *ins[MAXDEV];
            for (int j = 0; j < G; j++) {
                ins[j] = c->in[mem[j]]; /* every process has every input */
                done[mem[j]] = 1;
                nloc += tl_local(mc->m, mem[j]);
            }
            if (!nloc) continue; /* the group lives in other processes */
            ref_reduce(c->dt, c->op, c->n, ins, G, g_ref);
            for (int j = 0; j < G && ok; j++) {
                int e = mem[j];
                if (!tl_local(mc->m, e)) continue;
                if (memcmp(c->out[e], g_ref, ob) == 0) continue;
                for (size_t i = 0; i < c->n; i++)
                    if (!elem_equal(c->dt, c->op, c->out[e], g_ref, i)) {
                        char gb[64], eb[64];
                        fmt_elem(gb, sizeof gb, c->dt, c->op, c->out[e], i);
                        fmt_elem(eb, sizeof eb, c->dt, c->op, g_ref, i);
                        char gm[80];
                        size_t o = 0;
                        for (int q = 0; q < G && o + 6 < sizeof gm; q++)
                            o += (size_t)snprintf(gm + o, sizeof gm - o, "%s%d", q ? "," : "", mem[q]);
                        ok = 0;
                        snprintf(why, sizeof why, "dev %d (group devices [%s]) first bad index %zu: got %s, expected %s",
                                 e, gm, i, gb, eb);
                        break;
                    }
            }
        }
    }
    T_CHECK(ok, "%s: %s", desc, why);
    g_cases_checked++;
}

/* Run a list of cases on mesh mc, in batches bounded by memory and count.
   Async clusters stay together. */
static void run_cases(meshctx *mc, tcase *cases, int ncases, rng_t *r, size_t mem_budget, int max_batch) {
    int k = 0;
    while (k < ncases) {
        int end = k;
        size_t bytes = 0;
        while (end < ncases && end - k < max_batch) {
            int len = cases[end].api == API_ASYNC && cases[end].cluster > 0 ? cases[end].cluster : 1;
            size_t add = 0;
            for (int q = 0; q < len; q++) add += case_bytes(&cases[end + q], mc->ndev);
            if (end > k && bytes + add > mem_budget) break;
            bytes += add;
            end += len;
        }
        int ok = 1;
        for (int q = k; q < end; q++) ok &= prepare_case(&cases[q], mc->ndev, r);
        if (!ok) {
            T_CHECK(0, "out of memory preparing cases %d..%d", k, end);
            for (int q = k; q < end; q++) free_case(&cases[q], mc->ndev);
            k = end;
            continue;
        }
        batch b = {mc, cases + k, end - k};
        int expect_fail = 0;
        for (int q = k; q < end; q++) expect_fail |= cases[q].expect != SPMD_OK;
        spmd_status s = spmd_run(mc->m, dev_main, &b);
        if (!expect_fail) {
            char ms[32];
            mesh_str(&mc->md, ms, sizeof ms);
            T_CHECK(s == SPMD_OK, "spmd_run on mesh %s returned %s", ms, spmd_status_name(s));
        }
        for (int q = k; q < end; q++) {
            verify_case(mc, &cases[q]);
            free_case(&cases[q], mc->ndev);
        }
        k = end;
        if (spmd_mesh_status(mc->m) != SPMD_OK) {
            /* a broken mesh fails everything after it: start a new one so
               the remaining cases still say something. Not under several
               processes: the others may not see it broken, and creating a
               mesh is collective */
            char ms[32];
            mesh_str(&mc->md, ms, sizeof ms);
            if (!tl_one_process(mc->m)) {
                printf("  mesh %s broke (%s); kept (several processes): the remaining cases on it fail\n", ms,
                       spmd_mesh_error(mc->m));
                fflush(stdout);
                continue;
            }
            printf("  mesh %s broke (%s); recreating it for the remaining cases\n", ms, spmd_mesh_error(mc->m));
            fflush(stdout);
            spmd_mesh_destroy(mc->m);
            mc->m = NULL;
            if (!create_mesh(mc)) return;
        }
    }
}

/* ---- building the sweep ------------------------------------------------------------- */
static int g_quick;

/* A case's unit for tl_thin: an async cluster counts as one. */
static int case_unit(const void *p) {
    const tcase *c = (const tcase *)p;
    return c->api == API_ASYNC && c->cluster > 0 ? c->cluster : 1;
}
/* The long cases' element count: 2^18 (2^16 quick), enough for many
   tasks a device (the thread backend's slices are 16 KiB and up) */
static size_t g_long_n;

static int pick_var(const meshctx *mc, rng_t *r, int need_single) {
    for (;;) {
        int v = (int)rbelow(r, (unsigned)mc->nvar);
        if (!need_single || single_axis(&mc->var[v])) return v;
    }
}

static void randomize_data_flags(tcase *c, rng_t *r) {
    c->special = 0;
    c->narrow = 0;
    if (is_float(c->dt)) {
        if (c->op == SPMD_OP_MAX || c->op == SPMD_OP_MIN || is_arg(c->op)) c->special = rbelow(r, 4) == 0;
        else if (c->op == SPMD_OP_SUM) c->special = rbelow(r, 16) == 0;
    }
    if (c->op == SPMD_OP_MAX || c->op == SPMD_OP_MIN || is_arg(c->op)) c->narrow = !c->special && rbelow(r, 3) == 0;
    static const int ps[] = {128, 230, 250, 255};
    c->bool_p = ps[rbelow(r, 4)];
    c->bool_wide = rbelow(r, 3) == 0;
}

static tcase *new_case(tcase **arr, int *n, int *cap) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *arr = (tcase *)realloc(*arr, (size_t)*cap * sizeof **arr);
        if (!*arr) { fprintf(stderr, "out of memory\n"); exit(2); }
    }
    tcase *c = &(*arr)[(*n)++];
    memset(c, 0, sizeof *c);
    return c;
}

static void init_case(tcase *c, const meshctx *mc, rng_t *r, spmd_dtype dt, spmd_op op, size_t n, int inplace,
                      spmd_algo algo) {
    c->dt = dt;
    c->op = op;
    c->n = n;
    c->inplace = inplace && inplace_ok(dt, op);
    c->algo = algo;
    c->api = rbelow(r, 2) ? API_NAMED : API_ALLREDUCE;
    c->null_opts = rbelow(r, 2);
    c->var = pick_var(mc, r, is_arg(op));
    c->expect = SPMD_OK;
    randomize_data_flags(c, r);
}

/* The main sweep of one mesh: dtypes x ops x lengths x in-place x algorithms
   (all of it, or a rotating subset), axes and groups picked at random from the
   mesh's variants; plus mid-size lengths and async clusters. */
static void build_sweep(meshctx *mc, rng_t *r, tcase **arr, int *n, int *cap, int full) {
    static const size_t lens[] = {0, 1, 7, 1000};
    static const spmd_algo algos[] = {SPMD_ALGO_DEFAULT, SPMD_ALGO_EAGER, SPMD_ALGO_SPLIT};
    int rot = 0;
    for (int di = 0; di < NDTYPES; di++)
        for (int oi = 0; oi < NOPS; oi++) {
            spmd_dtype dt = ALL_DTYPES[di];
            spmd_op op = ALL_OPS[oi];
            if (!tl_op_defined(dt, op)) continue; /* refused: see the error cases */
            for (int li = 0; li < 4; li++)
                for (int ip = 0; ip < 2; ip++)
                    for (int ai = 0; ai < 3; ai++) {
                        if (ip && !inplace_ok(dt, op)) continue;
                        /* the subset: every length, both in-place flags and every
                           algorithm for every dtype x op, but not all combinations */
                        if (!full && (rot++ % 3) != 0) continue;
                        tcase *c = new_case(arr, n, cap);
                        init_case(c, mc, r, dt, op, lens[li], ip, algos[ai]);
                    }
        }
    /* mid-size lengths, odd so slices have remainders */
    static const size_t mids[] = {4099, 65537, 100003};
    int nmid = full ? 24 : 10;
    for (int q = 0; q < nmid; q++) {
        spmd_dtype dt = ALL_DTYPES[rbelow(r, NDTYPES)];
        spmd_op op = ALL_OPS[rbelow(r, NOPS)];
        if (!tl_op_defined(dt, op)) op = SPMD_OP_SUM;
        size_t len = mids[rbelow(r, g_quick ? 2 : 3)];
        tcase *c = new_case(arr, n, cap);
        init_case(c, mc, r, dt, op, len, (int)rbelow(r, 2), algos[q % 3]);
    }
    /* async clusters: several requests in flight on different (and sometimes
       the same) axes, finished in a per-device random order */
    int nclusters = full ? 4 : 2;
    for (int q = 0; q < nclusters; q++) {
        int m = 2 + (int)rbelow(r, 5); /* 2..6 in flight */
        int first = *n;
        for (int j = 0; j < m; j++) {
            spmd_dtype dt = ALL_DTYPES[rbelow(r, NDTYPES)];
            spmd_op op = ALL_OPS[rbelow(r, NOPS)];
            if (!tl_op_defined(dt, op)) op = dt == SPMD_BOOL ? SPMD_OP_MAX : SPMD_OP_PROD;
            static const size_t alens[] = {1, 7, 1000, 30011};
            tcase *c = new_case(arr, n, cap);
            init_case(c, mc, r, dt, op, alens[rbelow(r, 4)], (int)rbelow(r, 2), algos[rbelow(r, 3)]);
            c->api = API_ASYNC;
            if (j == 0 && rbelow(r, 3) == 0) c->op = SPMD_OP_SUM, c->null_opts = 1; /* spmd_psum_start */
            if (is_arg(c->op) && !single_axis(&mc->var[c->var])) c->var = pick_var(mc, r, 1);
            c->inplace = c->inplace && inplace_ok(c->dt, c->op);
        }
        tcase *c0 = &(*arr)[first];
        c0->cluster = m;
        c0->waitstyle = (int)((first / 7 + q) % 4);
        for (int j = 0; j < m; j++) (*arr)[first + j].waitstyle = c0->waitstyle;
        for (int d = 0; d < MAXDEV; d++) {
            for (int j = 0; j < m; j++) c0->order[d][j] = j;
            for (int j = m - 1; j > 0; j--) {
                int s = (int)rbelow(r, (unsigned)j + 1);
                int t = c0->order[d][j]; c0->order[d][j] = c0->order[d][s]; c0->order[d][s] = t;
            }
        }
    }
}

/* A variant whose groups lie inside one process (0, groups of one, if none
   is drawn): across processes a refused call breaks the mesh. */
static int pick_in_process(meshctx *mc, rng_t *r, int need_single) {
    for (int t = 0; t < 200; t++) {
        int v = pick_var(mc, r, need_single);
        if (tl_var_in_process(mc, v)) return v;
    }
    return need_single ? -1 : 0;
}

/* The ops' own _start forms (spmd_psum_start, spmd_pmean_start,
   spmd_pmax_start, spmd_pmin_start, spmd_pprod_start, spmd_pargmax_start,
   spmd_pargmin_start): every op with every dtype it takes (not pmean of
   bool: refused), in clusters of 2..6 requests in flight that every device
   finishes in its own order, never the order they were started (spmd_wait,
   spmd_done or spmd_test), mostly on variants of odd group size > 1 where
   the mesh has them (pargmax/pargmin: one axis, no groups). Checked against
   the same reference as the blocking forms. part >= 0 (quick mode): only
   the pairs numbered part modulo 3, each mesh another third, and no length
   beyond 4099. */
static void build_named_starts(meshctx *mc, rng_t *r, tcase **arr, int *n, int *cap, int part) {
    static const size_t lens[] = {1, 7, 1000, 30011}, qlens[] = {1, 7, 1000, 4099};
    static const spmd_algo algos[] = {SPMD_ALGO_DEFAULT, SPMD_ALGO_EAGER, SPMD_ALGO_SPLIT};
    int odd[64], nodd = 0, odd1[64], nodd1 = 0, pairs[NOPS * NDTYPES], np = 0, rot = 0;
    for (int v = 0; v < mc->nvar; v++) {
        int G = vG(&mc->var[v]);
        if (G < 3 || G % 2 == 0) continue;
        odd[nodd++] = v;
        if (single_axis(&mc->var[v])) odd1[nodd1++] = v;
    }
    for (int oi = 0; oi < NOPS; oi++)
        for (int di = 0; di < NDTYPES; di++) {
            if (!tl_op_defined(ALL_DTYPES[di], ALL_OPS[oi])) continue;
            if (part < 0 || rot++ % 3 == part) pairs[np++] = oi * NDTYPES + di;
        }
    for (int k = np - 1; k > 0; k--) { /* clusters mix ops and dtypes */
        int j = (int)rbelow(r, (unsigned)k + 1), t = pairs[k];
        pairs[k] = pairs[j];
        pairs[j] = t;
    }
    for (int k = 0; k < np;) {
        int m = 2 + (int)rbelow(r, 5), first = *n;
        if (m > np - k) m = np - k;
        if (np - k - m == 1) m++; /* no cluster of one at the end */
        for (int j = 0; j < m; j++) {
            spmd_op op = ALL_OPS[pairs[k + j] / NDTYPES];
            tcase *c = new_case(arr, n, cap);
            init_case(c, mc, r, ALL_DTYPES[pairs[k + j] % NDTYPES], op, (part < 0 ? lens : qlens)[rbelow(r, 4)],
                      (int)rbelow(r, 2), algos[rbelow(r, 3)]);
            if (is_arg(op) ? nodd1 > 0 : nodd > 0 && rbelow(r, 4) != 0)
                c->var = is_arg(op) ? odd1[rbelow(r, (unsigned)nodd1)] : odd[rbelow(r, (unsigned)nodd)];
            c->api = API_ASYNC;
            c->named = 1;
        }
        tcase *c0 = &(*arr)[first];
        c0->cluster = m;
        c0->waitstyle = (int)rbelow(r, 3); /* WAIT_WAIT, WAIT_DONE, WAIT_TEST: in c0->order */
        for (int j = 0; j < m; j++) /* its devices go away after the starts (tl_away) if a call is handed over */
            c0->away |= (*arr)[first + j].n * esize((*arr)[first + j].dt) * (size_t)vG(&mc->var[(*arr)[first + j].var]) >=
                        TL_HANDOFF_BYTES;
        for (int j = 0; j < m; j++) (*arr)[first + j].waitstyle = c0->waitstyle;
        for (int d = 0; d < MAXDEV; d++) {
            int same = 1;
            for (int j = 0; j < m; j++) c0->order[d][j] = j;
            for (int j = m - 1; j > 0; j--) {
                int s = (int)rbelow(r, (unsigned)j + 1), t = c0->order[d][j];
                c0->order[d][j] = c0->order[d][s];
                c0->order[d][s] = t;
            }
            for (int j = 0; j < m; j++) same &= c0->order[d][j] == j;
            if (same) /* never the order started */
                for (int j = 0; j < m; j++) c0->order[d][j] = m - 1 - j;
        }
        k += m;
    }
}

/* Calls that must be refused, on every device alike; afterwards the mesh
   must still work. */
static void build_errors(meshctx *mc, rng_t *r, tcase **arr, int *n, int *cap) {
    for (int q = 0; q < 8; q++) { /* bool pmean, complex pmax ... pargmin: SPMD_ERR_DTYPE */
        static const spmd_op cops[4] = {SPMD_OP_MAX, SPMD_OP_MIN, SPMD_OP_ARGMAX, SPMD_OP_ARGMIN};
        tcase *c = new_case(arr, n, cap);
        if (q < 4) init_case(c, mc, r, SPMD_BOOL, SPMD_OP_MEAN, q < 2 ? 7 : 1000, q & 1, (spmd_algo)(q % 3));
        else init_case(c, mc, r, q & 1 ? SPMD_C128 : SPMD_C64, cops[q - 4], 5, 0, (spmd_algo)(q % 3));
        c->inplace = q < 4 && (q & 1);
        c->api = q % 4 < 2 ? API_NAMED : API_ALLREDUCE;
        c->var = pick_in_process(mc, r, is_arg(c->op));
        if (c->var < 0) c->var = 0;
        c->expect = SPMD_ERR_DTYPE;
    }
    /* pargmax/pargmin with two axes or with axis_index_groups: refused */
    for (int v = 0; v < mc->nvar; v++) {
        const axv *av = &mc->var[v];
        if (!(av->nn == 2 || (av->nn == 1 && av->gsize)) || !tl_var_in_process(mc, v)) continue;
        tcase *c = new_case(arr, n, cap);
        init_case(c, mc, r, SPMD_F32, rbelow(r, 2) ? SPMD_OP_ARGMAX : SPMD_OP_ARGMIN, 7, 0, SPMD_ALGO_DEFAULT);
        c->var = v;
        c->expect = EXPECT_ANY_ERROR;
    }
    /* in place where the element sizes differ: refused as an overlap */
    static const struct { spmd_dtype dt; spmd_op op; } bad_ip[] = {
        {SPMD_BOOL, SPMD_OP_SUM}, {SPMD_F64, SPMD_OP_ARGMAX}, {SPMD_I16, SPMD_OP_ARGMIN}, {SPMD_U8, SPMD_OP_ARGMAX}};
    for (int q = 0; q < 4; q++) {
        int v = pick_in_process(mc, r, bad_ip[q].op == SPMD_OP_ARGMAX || bad_ip[q].op == SPMD_OP_ARGMIN);
        if (v < 0) continue; /* no single axis inside a process */
        tcase *c = new_case(arr, n, cap);
        init_case(c, mc, r, bad_ip[q].dt, bad_ip[q].op, 7, 0, SPMD_ALGO_DEFAULT);
        c->inplace = 1;
        c->var = v;
        c->expect = SPMD_ERR_OVERLAP;
    }
    /* a valid call afterwards: the mesh must still be usable */
    tcase *c = new_case(arr, n, cap);
    init_case(c, mc, r, SPMD_F32, SPMD_OP_SUM, 1000, 0, SPMD_ALGO_DEFAULT);
    c->var = 1; /* "*" */
}

static void run_errors(meshctx *mc, tcase *cases, int ncases, rng_t *r) {
    for (int q = 0; q < ncases; q++)
        if (!prepare_case(&cases[q], mc->ndev, r)) { T_CHECK(0, "out of memory"); return; }
    /* the device side records statuses; a refusal of pargmax may use any
       error status, so relax the expectation per device before verifying */
    batch b = {mc, cases, ncases};
    (void)spmd_run(mc->m, dev_main, &b);
    for (int q = 0; q < ncases; q++) {
        tcase *c = &cases[q];
        if (c->expect == EXPECT_ANY_ERROR) {
            /* this process's devices: refused, all with the same status */
            int first = tl_first_local(mc->m, 0, mc->ndev);
            if (first < 0) { free_case(c, mc->ndev); continue; }
            int refused = 1, same = 1;
            for (int d = first; d < mc->ndev; d++) {
                if (!tl_local(mc->m, d)) continue;
                refused &= c->st[d] != SPMD_OK && (unsigned)c->st[d] < SPMD_STATUS_COUNT;
                same &= c->st[d] == c->st[first];
            }
            char desc[400];
            describe(mc, c, desc, sizeof desc);
            T_CHECK(refused && same, "%s: must be refused on every device (one axis only, no groups); dev %d got %s",
                    desc, first, (unsigned)c->st[first] < SPMD_STATUS_COUNT ? spmd_status_name(c->st[first]) : "(no call)");
            g_cases_checked++;
        } else {
            verify_case(mc, c);
        }
        free_case(c, mc->ndev);
    }
    char ms[32];
    mesh_str(&mc->md, ms, sizeof ms);
    T_CHECK(spmd_mesh_status(mc->m) == SPMD_OK, "mesh %s broken after refused calls: %s", ms,
            spmd_mesh_error(mc->m));
}

/* A long case as an async cluster of one, its devices away after the start
   (tl_away): the progress workers run it. */
static void away_case(tcase *c, rng_t *r) {
    c->api = API_ASYNC;
    c->cluster = 1;
    c->away = 1;
    c->waitstyle = (int)rbelow(r, 4);
    if (is_arg(c->op)) c->named = 1; /* (their own _start forms; allreduce_start takes the others) */
}

/* The long cases: all dtypes x {psum, pmax} on two meshes, all ops for f32
   and bf16 on a third; len elements (the 8 and 15 devices of (4,2) and
   (3,1,5): half of g_long_n; on 2 CPUs under load they took 10 and 9 s). */
static void build_long(meshctx *mc, rng_t *r, tcase **arr, int *n, int *cap, int kind, size_t len) {
    static const spmd_algo algos[] = {SPMD_ALGO_DEFAULT, SPMD_ALGO_EAGER, SPMD_ALGO_SPLIT};
    int rot = 0;
    if (kind == 0) {
        for (int di = 0; di < NDTYPES; di++)
            for (int o = 0; o < 2; o++) {
                tcase *c = new_case(arr, n, cap);
                init_case(c, mc, r, ALL_DTYPES[di], o ? (iscplx(ALL_DTYPES[di]) ? SPMD_OP_PROD : SPMD_OP_MAX) : SPMD_OP_SUM,
                          len, rot & 1, algos[rot % 3]);
                if (rot % 4 == 1) away_case(c, r);
                rot++;
            }
    } else {
        static const spmd_dtype dts[] = {SPMD_F32, SPMD_BF16};
        for (int di = 0; di < 2; di++)
            for (int oi = 0; oi < NOPS; oi++) {
                tcase *c = new_case(arr, n, cap);
                init_case(c, mc, r, dts[di], ALL_OPS[oi], len, rot & 1, algos[rot % 3]);
                if (rot % 4 == 1) away_case(c, r);
                rot++;
            }
    }
}

static const meshdef MESHES[] = {
    {1, {1}},       {1, {2}},       {1, {3}},       {1, {5}},       {1, {7}},
    {1, {8}},       {1, {16}},      {2, {2, 3}},    {2, {3, 3}},    {2, {4, 2}},
    {3, {2, 2, 2}}, {3, {3, 1, 5}}, {3, {2, 2, 4}}, {3, {1, 1, 1}},
};
#define NMESHES ((int)(sizeof MESHES / sizeof MESHES[0]))

static int open_mesh(meshctx *mc, const meshdef *md, rng_t *r) {
    memset(mc, 0, sizeof *mc);
    mc->md = *md;
    mc->axn = AXNAME;
    if (!create_mesh(mc)) return 0;
    build_vars(mc, r);
    return 1;
}
static void close_mesh(meshctx *mc) {
    spmd_status s = spmd_mesh_destroy(mc->m);
    char ms[32];
    mesh_str(&mc->md, ms, sizeof ms);
    T_CHECK(s == SPMD_OK, "spmd_mesh_destroy %s: %s", ms, spmd_status_name(s));
    mc->m = NULL;
}

/* The reference must itself agree with a few hand-computed results. */
static void reference_sanity(void) {
    float a[3] = {1.5f, NAN, -2.0f}, b[3] = {2.5f, 1.0f, -2.0f};
    const unsigned char *ins[2] = {(const unsigned char *)a, (const unsigned char *)b};
    float o[3];
    int32_t oi[3];
    ref_reduce(SPMD_F32, SPMD_OP_MEAN, 3, ins, 2, (unsigned char *)o);
    int ok = o[0] == 2.0f && isnan(o[1]) && o[2] == -2.0f;
    ref_reduce(SPMD_F32, SPMD_OP_MAX, 3, ins, 2, (unsigned char *)o);
    ok &= o[0] == 2.5f && isnan(o[1]) && o[2] == -2.0f;
    ref_reduce(SPMD_F32, SPMD_OP_ARGMAX, 3, ins, 2, (unsigned char *)oi);
    ok &= oi[0] == 1 && oi[1] == INT32_MAX && oi[2] == 0;
    int8_t x[2] = {-7, 100}, y[2] = {2, 100};
    const unsigned char *ii[2] = {(const unsigned char *)x, (const unsigned char *)y};
    int8_t r8[2];
    ref_reduce(SPMD_I8, SPMD_OP_MEAN, 2, ii, 2, (unsigned char *)r8);
    ok &= r8[0] == -2 && r8[1] == 100; /* -5/2 truncates to -2; 200/2 exact */
    ref_reduce(SPMD_I8, SPMD_OP_SUM, 2, ii, 2, (unsigned char *)r8);
    ok &= r8[0] == -5 && r8[1] == -56; /* 200 wraps */
    uint16_t h1[1] = {0x3c01}, h2[1] = {0x3c01}, h3[1] = {0x3c01};
    const unsigned char *hi[3] = {(const unsigned char *)h1, (const unsigned char *)h2, (const unsigned char *)h3};
    uint16_t hr[1];
    ref_reduce(SPMD_F16, SPMD_OP_SUM, 1, hi, 3, (unsigned char *)hr);
    ok &= hr[0] == 0x4202; /* 3 + 1.5 * 2^-9: a tie between 0x4201 and 0x4202, to even */
    /* the canonical order, where a left fold gives 1: G = 4 is (x0+x1)+(x2+x3)
       = 1e8 + -1e8; G = 5 is ((x0+x1)+x2)+(x3+x4) = 1e8 + -1e8 (1e8 + 1 is 1e8 in f32) */
    float t4[4] = {1e8f, 1.0f, -1e8f, 1.0f}, t5[5] = {1.0f, 1e8f, 1.0f, -1e8f, 1.0f}, t3[3] = {1e8f, -1e8f, 1.0f};
    ok &= tl_tree_f32(t4, 4, 0) == 0.0f && tl_tree_f32(t5, 5, 0) == 0.0f && tl_tree_f32(t3, 3, 0) == 1.0f;
    T_CHECK(ok, "reference sanity (hand-computed results)");
}

/* ---- the canonical order at every size --------------------------------------
   spmd_reduce_local (the collectives' kernel driver) against testlib.h's
   recursive tl_tree_* for G = 1..70 and 4,096 inputs, every float dtype,
   sum, prod and mean, counts across the driver's tiles; random data. */
static void tree_inputs(rng_t *r, spmd_dtype dt, int prod, void *buf, size_t n) {
    if (iscplx(dt)) { /* the parts */
        tree_inputs(r, dt == SPMD_C64 ? SPMD_F32 : SPMD_F64, prod, buf, 2 * n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double v = prod ? 0.5 + (double)rbelow(r, 1u << 20) / (1u << 20) /* [0.5, 1.5): products stay finite */
                        : ((double)rbelow(r, 1u << 30) - (1u << 29)) * ldexp(1.0, (int)rbelow(r, 40) - 40);
        switch (dt) {
        case SPMD_F32: ((float *)buf)[i] = (float)v; break;
        case SPMD_F64: ((double *)buf)[i] = v; break;
        case SPMD_F16: ((uint16_t *)buf)[i] = ref_f32_to_f16((float)v); break;
        case SPMD_F8E4M3FN: ((uint8_t *)buf)[i] = ref_f32_to_f8e4m3fn((float)(v * 0x1p-20)); break; /* (sums past 448) */
        case SPMD_F8E5M2: ((uint8_t *)buf)[i] = ref_f32_to_f8e5m2((float)(v * 0x1p-8)); break;
        default: ((uint16_t *)buf)[i] = ref_f32_to_bf16((float)v); break;
        }
    }
}
static void test_tree_order(void) {
    static const spmd_dtype dts[8] = {SPMD_F32, SPMD_F64, SPMD_F16, SPMD_BF16,
                                      SPMD_C64, SPMD_C128, SPMD_F8E4M3FN, SPMD_F8E5M2};
    static const spmd_op ops[3] = {SPMD_OP_SUM, SPMD_OP_PROD, SPMD_OP_MEAN};
    static const size_t counts[4] = {1, 7, 300, 1029};
    rng_t r = {0x7e5e0d5u};
    int bad = 0, checked = 0, G;
    for (G = 1; G <= 4096; G = G < 70 ? G + 1 : G == 70 ? 4096 : 4097) {
        for (int di = 0; di < 8; di++)
            for (int oi = 0; oi < 3; oi++) {
                spmd_dtype dt = dts[di];
                size_t n = counts[(size_t)(G + di + oi) % 4], es = esize(dt);
                if (G == 4096 && n > 300) n = 300;
                unsigned char *in = (unsigned char *)xmalloc((size_t)G * n * es), *out = (unsigned char *)xmalloc(n * es),
                              *exp = (unsigned char *)xmalloc(n * es);
                const unsigned char **ins = (const unsigned char **)xmalloc((size_t)G * sizeof *ins);
                for (int j = 0; j < G; j++) ins[j] = in + (size_t)j * n * es;
                tree_inputs(&r, dt, ops[oi] == SPMD_OP_PROD, in, (size_t)G * n);
                ref_reduce(dt, ops[oi], n, ins, G, exp);
                spmd_status st = spmd_reduce_local(out, (const void *const *)ins, G, n, dt, ops[oi]);
                size_t same = 0; /* (bits, or NaN where the reference has NaN: a complex product of 4,096 overflows) */
                while (st == SPMD_OK && same < n && elem_equal(dt, ops[oi], out, exp, same)) same++;
                checked++;
                if (same < n) {
                    if (bad++ < 3)
                        T_CHECK(0, "spmd_reduce_local %s %s G %d n %zu: %s, not the canonical order's result", dname(dt),
                                oname(ops[oi]), G, n, spmd_status_name(st));
                }
                free(in), free(out), free(exp), free(ins);
            }
    }
    T_CHECK(bad == 0, "the canonical order: %d of %d reductions (G = 1..70 and 4096) differ", bad, checked);
}

/* ---- the tree is more accurate than a left fold ------------------------------
   4,096 inputs of random sign and magnitude, 256 elements: the canonical
   tree (spmd_reduce_local) and a left fold (here) against an f64 sum of
   the same values, in f32 and in bf16 (accumulated in f32 both ways,
   rounded once). f32: the tree's mean error must be the smaller. bf16:
   the final rounding to 8 bits dominates both, so the tree's must be no
   larger, and its results correctly rounded (the f64 sum's bf16) at least
   as often. */
static void test_tree_accuracy(void) {
    enum { G = 4096, N = 256 };
    rng_t r = {0xacc0u};
    for (int b = 0; b < 2; b++) {
        spmd_dtype dt = b ? SPMD_BF16 : SPMD_F32;
        size_t es = esize(dt);
        unsigned char *in = (unsigned char *)xmalloc((size_t)G * N * es), *out = (unsigned char *)xmalloc(N * es);
        const unsigned char **ins = (const unsigned char **)xmalloc(G * sizeof *ins);
        double etree = 0, efold = 0;
        int rtree = 0, rfold = 0; /* results equal to the exact sum rounded once */
        for (int j = 0; j < G; j++) ins[j] = in + (size_t)j * N * es;
        for (size_t i = 0; i < (size_t)G * N; i++) { /* positive: sums grow, and so does a fold's error */
            float v = (float)(1.0 + (double)rbelow(&r, 1u << 24) / (1u << 24));
            if (b) ((uint16_t *)in)[i] = ref_f32_to_bf16(v);
            else ((float *)in)[i] = v;
        }
        spmd_status st = spmd_reduce_local(out, (const void *const *)ins, G, N, dt, SPMD_OP_SUM);
        for (int i = 0; i < N; i++) {
            double exact = 0;
            float fold = 0;
            for (int j = 0; j < G; j++) {
                float x = b ? B2F[((const uint16_t *)ins[j])[i]] : ((const float *)ins[j])[i];
                exact += x;
                fold += x;
            }
            double t = b ? B2F[((uint16_t *)out)[i]] : ((float *)out)[i];
            double f = b ? B2F[ref_f32_to_bf16(fold)] : fold;
            double rounded = b ? B2F[ref_f32_to_bf16((float)exact)] : (float)exact;
            etree += fabs(t - exact) / exact;
            efold += fabs(f - exact) / exact;
            rtree += t == rounded;
            rfold += f == rounded;
        }
        printf("  %s sum of %d inputs, mean relative error: tree %.3g, left fold %.3g (%.1fx); correctly rounded: "
               "tree %d, left fold %d of %d\n", dname(dt), G, etree / N, efold / N, etree > 0 ? efold / etree : 0.0,
               rtree, rfold, N);
        T_CHECK(st == SPMD_OK && (b ? etree <= efold && rtree >= rfold : etree < efold),
                "%s: the tree's error %.3g (%d correctly rounded) is not below the left fold's %.3g (%d)", dname(dt),
                etree / N, rtree, efold / N, rfold);
        free(in), free(out), free(ins);
    }
}

/* ---- combining groups against a plain reference ----------------------------
   The thread engine's combining path (SPMD__COMBINE_MIN = 8 members and
   up: one member reduces for all): psum over groups of 8, 9, 16, 17, 33
   and 64 (and 5 and 7, below it) under both schedulers (tests/testlib.h tl_run_groups),
   several dtypes and ops on random inputs against a reference computed here
   in device order, blocking with a barrier after each, async calls waited
   in reverse, and a count mismatch that every member reports. */

typedef struct comb_case { spmd_dtype dt; spmd_op op; int count; } comb_case;
static const comb_case comb_cases[] = {
    {SPMD_F32, SPMD_OP_SUM, 7},  {SPMD_F64, SPMD_OP_SUM, 33}, {SPMD_I32, SPMD_OP_SUM, 200}, {SPMD_U8, SPMD_OP_MAX, 17},
    {SPMD_I16, SPMD_OP_MIN, 9},  {SPMD_F32, SPMD_OP_MEAN, 5}, {SPMD_BF16, SPMD_OP_SUM, 40}, {SPMD_F16, SPMD_OP_MAX, 3},
    {SPMD_BOOL, SPMD_OP_SUM, 11}, {SPMD_F32, SPMD_OP_SUM, 1}};
#define COMB_NC ((int)(sizeof comb_cases / sizeof comb_cases[0]))

/* Device id's element i of case c, as a double: small random values (sums
   stay exact in integers; floats in the library's canonical order). */
static double comb_in(int c, int id, int i) {
    uint64_t b = tl_case_bits(c, id, i);
    switch (comb_cases[c].dt) {
    case SPMD_BOOL: return (double)(b & 1);
    case SPMD_U8: return (double)(b & 0xff);
    case SPMD_I16: return (double)(int16_t)(b & 0xffff);
    case SPMD_I32: return (double)(int32_t)(b & 0xfffff) - 0x80000;
    case SPMD_F16: return (double)ref_f16_to_f32((uint16_t)(0x3c00 + (b & 0x3ff)) ^ (uint16_t)((b >> 10 & 1) << 15));
    case SPMD_BF16: return (double)ref_bf16_to_f32((uint16_t)(0x3f80 + (b & 0x7f)));
    default: return (double)((int64_t)(b % 2001) - 1000) / 8.0;
    }
}
static void comb_store(spmd_dtype dt, void *buf, int i, double v) {
    switch (dt) {
    case SPMD_BOOL: case SPMD_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case SPMD_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case SPMD_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case SPMD_F16: ((uint16_t *)buf)[i] = ref_f32_to_f16((float)v); break;
    case SPMD_BF16: ((uint16_t *)buf)[i] = ref_f32_to_bf16((float)v); break;
    case SPMD_F64: ((double *)buf)[i] = v; break;
    default: ((float *)buf)[i] = (float)v; break;
    }
}
/* The expected output element: reduce over the group's members, floats in
   the canonical order (tl_tree_f32/f64). */
static int comb_expect_ok(int c, const int *members, int G, const void *out, int i) {
    const comb_case *k = &comb_cases[c];
    double acc = comb_in(c, members[0], i), xs[MAXG];
    float facc = (float)acc, fs[MAXG];
    int j;
    for (j = 0; j < G; j++) {
        double x = comb_in(c, members[j], i);
        xs[j] = x;
        fs[j] = (float)x;
        if (j == 0) continue;
        if (k->op == SPMD_OP_MAX) acc = x > acc ? x : acc;
        else if (k->op == SPMD_OP_MIN) acc = x < acc ? x : acc;
        else acc += x;
        if (k->op == SPMD_OP_MAX) facc = x > facc ? (float)x : facc;
    }
    if (k->op == SPMD_OP_SUM || k->op == SPMD_OP_MEAN) {
        if (k->dt == SPMD_F64) acc = tl_tree_f64(xs, G, 0);
        facc = tl_tree_f32(fs, G, 0); /* f32 arithmetic */
    }
    switch (k->dt) {
    case SPMD_BOOL: return ((const int32_t *)out)[i] == (int32_t)acc;
    case SPMD_U8: return ((const uint8_t *)out)[i] == (uint8_t)acc;
    case SPMD_I16: return ((const int16_t *)out)[i] == (int16_t)acc;
    case SPMD_I32: return ((const int32_t *)out)[i] == (int32_t)acc;
    case SPMD_F16: return ((const uint16_t *)out)[i] == ref_f32_to_f16(facc);
    case SPMD_BF16: return ((const uint16_t *)out)[i] == ref_f32_to_bf16(facc);
    case SPMD_F64: return ((const double *)out)[i] == acc; /* eighths: exact */
    default: return ((const float *)out)[i] == (k->op == SPMD_OP_MEAN ? facc / (float)G : facc);
    }
}

static void comb_device(spmd_dev *d, void *p) {
    tl_groups_arg *a = (tl_groups_arg *)p;
    int id = spmd_device_id(d), G = spmd_axis_size(d, "b"), me = spmd_axis_index(d, "b"), c, i, j;
    int members[64], wrong = 0;
    unsigned char in[COMB_NC][1600], out[COMB_NC][1600];
    spmd_req *rq[COMB_NC];
    spmd_status s;
    for (j = 0; j < G; j++) members[j] = id - me + j; /* "b" is the minor axis */
    for (c = 0; c < COMB_NC; c++)
        for (i = 0; i < comb_cases[c].count; i++) comb_store(comb_cases[c].dt, in[c], i, comb_in(c, id, i));
    if (a->mismatch) { /* the last member of every group asks for one element more */
        s = spmd_psum(d, in[0], out[0], comb_cases[0].count + (me == G - 1), SPMD_F32, "b", NULL);
        if (s == SPMD_ERR_MISMATCH || s == SPMD_ERR_BROKEN) __atomic_fetch_add(&a->nmis, 1, __ATOMIC_RELAXED);
        else a->st = s == SPMD_OK ? SPMD_ERR_INVALID : s;
        return;
    }
    for (c = 0; c < COMB_NC; c++) { /* blocking; the same calls on every device, right or wrong */
        s = spmd_allreduce(d, in[c], out[c], (size_t)comb_cases[c].count, comb_cases[c].dt, comb_cases[c].op, "b", NULL);
        if (s != SPMD_OK) { a->st = s; return; }
        for (i = 0; i < comb_cases[c].count; i++)
            if (!comb_expect_ok(c, members, G, out[c], i)) wrong = 1;
        if ((s = spmd_barrier(d, "b", NULL)) != SPMD_OK) { a->st = s; return; }
    }
    memset(out, 0, sizeof out);
    for (c = 0; c < COMB_NC; c++) /* all in flight, waited in reverse */
        if ((s = spmd_allreduce_start(d, in[c], out[c], (size_t)comb_cases[c].count, comb_cases[c].dt,
                                      comb_cases[c].op, "b", NULL, &rq[c])) != SPMD_OK) { a->st = s; return; }
    for (c = COMB_NC - 1; c >= 0; c--) {
        if ((s = spmd_wait(rq[c])) != SPMD_OK) { a->st = s; return; }
        for (i = 0; i < comb_cases[c].count; i++)
            if (!comb_expect_ok(c, members, G, out[c], i)) wrong = 1;
    }
    if (wrong) __atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED);
}

static void test_combining(void) { tl_run_groups("psum (combining)", comb_device); }

int main(void) {
    double t0 = now_s();
    uint64_t seed = env_seed(20261122);
    g_quick = env_quick();
    g_long_n = g_quick ? ((size_t)1 << 16) : ((size_t)1 << 18);
    printf("test_reduce: seed %llu%s\n", (unsigned long long)seed,
           env_thin() > 1 ? " (quick, thinned)" : g_quick ? " (quick)" : "");
    fflush(stdout);
    init_half_tables();
    reference_sanity();
    test_tree_order();
    test_tree_accuracy();

    size_t budget = (size_t)256 << 20;
    for (int mi = 0; mi < NMESHES; mi++) {
        meshctx mc;
        rng_t r = {seed * 1000003u + (uint64_t)mi};
        if (!open_mesh(&mc, &MESHES[mi], &r)) continue;
        double t1 = now_s();
        tcase *cases = NULL;
        int n = 0, cap = 0;
        /* quick mode: the full cross product on every third mesh, the
           rotating subset elsewhere */
        int full = !g_quick || (mi % 3 == 0);
        build_sweep(&mc, &r, &cases, &n, &cap, full);
        n = tl_thin(cases, sizeof *cases, n, env_thin(), case_unit);
        run_cases(&mc, cases, n, &r, budget, 600);
        int nsweep = n;
        /* the named _start forms: a stream of their own (the sweep's cases stay as they were) */
        rng_t r2 = {seed * 1000003u + (uint64_t)mi + 0x5157A27u};
        double t2 = now_s();
        n = 0;
        build_named_starts(&mc, &r2, &cases, &n, &cap, g_quick ? mi % 3 : -1);
        n = tl_thin(cases, sizeof *cases, n, env_thin(), case_unit);
        run_cases(&mc, cases, n, &r2, budget, 600);
        int nstart = n;
        double t3 = now_s();
        n = 0;
        build_errors(&mc, &r, &cases, &n, &cap);
        run_errors(&mc, cases, n, &r);
        /* long cases on three meshes */
        int nlong = 0;
        if (mc.md.nd == 2 && mc.md.sh[0] == 4) { n = 0; build_long(&mc, &r, &cases, &n, &cap, 0, g_long_n / 2); nlong = n; }
        else if (mc.md.nd == 1 && mc.md.sh[0] == 3) { n = 0; build_long(&mc, &r, &cases, &n, &cap, 0, g_long_n); nlong = n; }
        else if (mc.md.nd == 3 && mc.md.sh[2] == 5) { n = 0; build_long(&mc, &r, &cases, &n, &cap, 1, g_long_n / 2); nlong = n; }
        if (nlong) nlong = tl_thin_large(cases, sizeof *cases, nlong, mi);
        if (nlong) run_cases(&mc, cases, nlong, &r, budget, 64);
        free(cases);
        char ms[32];
        mesh_str(&mc.md, ms, sizeof ms);
        printf("  mesh %-9s %5d sweep cases, %2d named _start (%.2f s), %2d long cases, %d axis variants, %.2f s\n", ms,
               nsweep, nstart, t3 - t2, nlong, mc.nvar, now_s() - t1);
        fflush(stdout);
        close_mesh(&mc);
    }
    if (tl_groups_here()) {
        double t4 = now_s();
        test_combining();
        printf("  combining groups of 5 to 64: %.2f s\n", now_s() - t4);
        fflush(stdout);
    }
    free(g_ref);
    printf("test_reduce: %ld cases checked in %.2f s\n", g_cases_checked, now_s() - t0);
    fflush(stdout);
    tl_away_check("test_reduce");
    return t_summary();
}
