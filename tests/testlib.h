/* testlib.h - infrastructure shared by the spmdcoll test programs: a clock,
   seeded RNGs and the SPMD_TEST_* environment, dtype facts, plain reference
   half-precision conversions, the sweep meshes with their axis variants and
   groups, which devices this process hosts (several processes), a few
   helpers for failure messages, meshes under a chosen scheduler and the
   runner of the large-group (combining) tests.

   Include after "../spmdcoll.h" and "harness.h". Every test is its own
   program, so everything here is static; functions are `static inline` and
   data is marked unused, so that a test using only part of this file still
   builds with -Wall -Wextra -Werror.

   The reference code is deliberately plain (ldexp, frexp, double arithmetic
   with explicit tie handling) and never calls the library's kernels or
   conversions: a test comparing the library with it stays independent. */
#ifndef SPMD_TEST_TESTLIB_H
#define SPMD_TEST_TESTLIB_H
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TL_UNUSED __attribute__((unused))

#define MAXDEV 16 /* the largest sweep mesh */
#define MAXCL 8   /* requests of one async cluster */
#define ACC(s) (1u << (s)) /* a set of accepted statuses: bit s = status s */

/* ---- clock and environment --------------------------------------------------- */

/* Monotonic time in seconds. */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* SPMD_TEST_SEED (decimal, 0x.. or 0..) if set and not empty, else dflt. */
static inline uint64_t env_seed(uint64_t dflt) {
    const char *e = getenv("SPMD_TEST_SEED");
    return e && *e ? strtoull(e, NULL, 0) : dflt;
}

/* SPMD_TEST_QUICK set, not empty and not "0": smaller sizes (sanitizer builds). */
static inline int env_quick(void) {
    const char *e = getenv("SPMD_TEST_QUICK");
    return e && *e && strcmp(e, "0") != 0;
}

/* SPMD_TEST_QUICK=N[:K] with N >= 2: quick, and the sweeps run only one
   case (or async cluster) in N, those at positions K, K + N, ... (K = 0 if
   not given), the same in every process (the fabric matrix, where every
   collective crosses processes: its configurations take K = 0, 1, 2, ... in
   turn, so that every case crosses processes in one of them). 1 otherwise. */
static inline int env_thin(void) {
    const char *e = getenv("SPMD_TEST_QUICK");
    int n = e && *e ? atoi(e) : 0;
    return n >= 2 ? n : 1;
}
static inline int env_thin_offset(void) {
    const char *e = getenv("SPMD_TEST_QUICK"), *c = e ? strchr(e, ':') : NULL;
    return c ? atoi(c + 1) : 0;
}

/* Cases that only wait out a deadline (the same in every configuration of
   the fabric matrix): run them where the sweeps keep their first case
   (offset 0 of SPMD_TEST_QUICK=N:K), i.e. in one configuration in N there,
   and everywhere else. */
static inline int tl_slow_cases(void) { return env_thin_offset() % env_thin() == 0; }

/* Keeps one unit in `every` of the n cases of `elem` bytes at a, in order
   (those at env_thin_offset() modulo every), where a unit is the case and
   the unit_len(case) - 1 cases after it (an async cluster counts as one);
   returns the new count (env_thin). */
static inline int tl_thin_at(void *a, size_t elem, int n, int every, int keep, int (*unit_len)(const void *c)) {
    unsigned char *b = (unsigned char *)a;
    int w = 0, unit = 0;
    for (int k = 0; k < n; unit++) {
        int len = unit_len(b + (size_t)k * elem);
        if (unit % every == keep) {
            memmove(b + (size_t)w * elem, b + (size_t)k * elem, (size_t)len * elem);
            w += len;
        }
        k += len;
    }
    return w;
}

static inline int tl_thin(void *a, size_t elem, int n, int every, int (*unit_len)(const void *c)) {
    return tl_thin_at(a, elem, n, every, env_thin_offset() % every, unit_len);
}

/* The large cases of mesh number `mesh` (each takes 0.03-0.3 s across
   processes, most of a thinned run's time): in a thinned run one in
   min(N, 3), or one in 4 from N = 9 on (the fabric matrix's nine
   configurations: each case in two), the one kept turning with the mesh
   so that every kind and dtype runs in (nearly) every configuration; all
   of them otherwise. */
static inline int tl_unit1(const void *c) { (void)c; return 1; }
static inline int tl_thin_large(void *a, size_t elem, int n, int mesh) {
    int every = env_thin() < 3 ? env_thin() : env_thin() < 9 ? 3 : 4;
    return tl_thin_at(a, elem, n, every, (env_thin_offset() + mesh) % every, tl_unit1);
}

/* malloc that never returns NULL (n == 0 allowed); out of memory ends the test. */
static inline void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "test: out of memory (%zu bytes)\n", n); exit(2); }
    return p;
}

/* ---- random numbers ------------------------------------------------------------ */
typedef struct { uint64_t s; } rng_t;

/* xorshift64*: the next 64 random bits. */
static inline uint64_t rn(rng_t *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
/* Uniform in [0, n) from rn (0 when n <= 1). */
static inline int rb(rng_t *r, int n) { return n <= 1 ? 0 : (int)(rn(r) % (uint64_t)n); }
/* An xorshift64* stream for (seed, stream); each test passes its own salt so
   that equal seeds still give different inputs in different tests. */
static inline rng_t rng_make(uint64_t seed, uint64_t salt, uint64_t stream) {
    rng_t r = {(seed ^ salt) * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull + 1};
    if (!r.s) r.s = 1;
    for (int i = 0; i < 4; i++) (void)rn(&r);
    return r;
}

/* splitmix64: advances *state and returns the next 64 random bits. */
static inline uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A 64-bit checksum of n bytes (FNV-style, 8 bytes a step): "did it change?". */
static inline uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 31;
    }
    for (; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* ---- dtypes ------------------------------------------------------------------------ */
static const spmd_dtype DTYPES[] TL_UNUSED = {SPMD_BOOL, SPMD_I8,  SPMD_U8,  SPMD_I16, SPMD_U16,      SPMD_I32,
                                             SPMD_U32,  SPMD_I64, SPMD_U64, SPMD_F16, SPMD_BF16,     SPMD_F32,
                                             SPMD_F64,  SPMD_C64, SPMD_C128, SPMD_F8E4M3FN, SPMD_F8E5M2};
#define NDT 17

/* Element size in bytes; 0 for an invalid dtype. */
static inline size_t dsize(spmd_dtype t) {
    static const size_t s[] = {0, 1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 8, 16, 1, 1};
    return (unsigned)t < 18 ? s[t] : 0;
}
/* Short name ("f32"); "bad" for an invalid dtype. */
static inline const char *dnm(spmd_dtype t) {
    static const char *n[] = {"none", "bool", "i8",  "u8",  "i16", "u16", "i32",  "u32",      "i64",
                              "u64",  "f16",  "bf16", "f32", "f64", "c64", "c128", "f8e4m3fn", "f8e5m2"};
    return (unsigned)t < 18 ? n[t] : "bad";
}
/* the real floating types (f16, bf16, f32, f64); complex numbers and fp8
   are apart: */
static inline int isflt(spmd_dtype t) { return t == SPMD_F16 || t == SPMD_BF16 || t == SPMD_F32 || t == SPMD_F64; }
static inline int iscplx(spmd_dtype t) { return t == SPMD_C64 || t == SPMD_C128; }
static inline int isfp8(spmd_dtype t) { return t == SPMD_F8E4M3FN || t == SPMD_F8E5M2; }
/* what the library reduces: not a mean of bools, no order on complex numbers */
static inline int tl_op_defined(spmd_dtype t, spmd_op o) {
    if (t == SPMD_BOOL) return o != SPMD_OP_MEAN;
    return !iscplx(t) || o == SPMD_OP_SUM || o == SPMD_OP_PROD || o == SPMD_OP_MEAN;
}
/* Status name; "(not called)" for the SPMD_STATUS_COUNT placeholder. */
static inline const char *stname(spmd_status s) {
    return (unsigned)s < SPMD_STATUS_COUNT ? spmd_status_name(s) : "(not called)";
}
/* Is the element at p (dtype t) a NaN? Integers never are. */
static inline int nan_bits(spmd_dtype t, const unsigned char *p) {
    if (t == SPMD_F16 || t == SPMD_BF16) {
        uint16_t h; memcpy(&h, p, 2);
        return t == SPMD_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    }
    if (t == SPMD_F32) { float f; memcpy(&f, p, 4); return isnan(f); }
    if (t == SPMD_F64) { double f; memcpy(&f, p, 8); return isnan(f); }
    if (t == SPMD_F8E4M3FN) return (p[0] & 0x7f) == 0x7f;
    if (t == SPMD_F8E5M2) return (p[0] & 0x7f) > 0x7c;
    return 0; /* (complex: a part at a time, as f32 or f64: tl_same_elem) */
}
/* Two elements of a result the same: the same bits, or both NaN (complex:
   each part so). */
static inline int tl_same_elem(spmd_dtype t, const unsigned char *a, const unsigned char *b) {
    if (iscplx(t)) {
        spmd_dtype p = t == SPMD_C64 ? SPMD_F32 : SPMD_F64;
        size_t h = dsize(p);
        return tl_same_elem(p, a, b) && tl_same_elem(p, a + h, b + h);
    }
    return memcmp(a, b, dsize(t)) == 0 || (nan_bits(t, a) && nan_bits(t, b));
}

/* ---- the canonical reduction order -------------------------------------------------
   What spmdcoll.h defines (its >>reduce kernels), written here plainly and
   recursively as the tests' own reference: with P the largest power of two
   <= G and r = G - P, a perfect binary tree over P leaves, leaf v being
   x[2v] OP x[2v+1] for v < r and x[v + r] otherwise; the left operand is
   always the lower one. f16/bf16 go through the f32 version (rounded once
   by the caller). Integers need none of this (their sums wrap, in any order). */
#define TL_TREE_AT(NAME, T)                                             \
    static inline T NAME(const T *x, int r, int lo, int n, int prod) {  \
        T a, b;                                                         \
        if (n == 1) {                                                   \
            if (lo >= r) return x[lo + r];                              \
            a = x[2 * lo];                                              \
            b = x[2 * lo + 1];                                          \
        } else {                                                        \
            a = NAME(x, r, lo, n / 2, prod);                            \
            b = NAME(x, r, lo + n / 2, n / 2, prod);                    \
        }                                                               \
        return prod ? a * b : a + b;                                    \
    }
TL_TREE_AT(tl_tree_f32_at, float)
TL_TREE_AT(tl_tree_f64_at, double)
static inline int tl_tree_leaves(int G) {
    int P = 1;
    while (P * 2 <= G) P *= 2;
    return P;
}
/* x[0] OP ... OP x[G-1] in the canonical order (prod: *, else +). */
static inline float tl_tree_f32(const float *x, int G, int prod) {
    int P = tl_tree_leaves(G);
    return tl_tree_f32_at(x, G - P, 0, P, prod);
}
static inline double tl_tree_f64(const double *x, int G, int prod) {
    int P = tl_tree_leaves(G);
    return tl_tree_f64_at(x, G - P, 0, P, prod);
}

/* ---- reference half precision (plain; not the library's converters) --------------- */
static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
static inline float ref_f16_to_f32(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp((double)(m + 1024), e - 25);
    return (float)(sign ? -v : v);
}

/* bfloat16 is the top half of a float. */
static inline float ref_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* Encode a >= 0 (finite, not NaN) rounded to nearest even into a format with
   `mbits` stored mantissa bits, minimum normal exponent emin, exponent bias
   `bias` and all-ones exponent field `emax_field` (infinity). Returns the
   bits without the sign. */
static inline uint32_t ref_round(double a, int mbits, int emin, int bias, int emax_field) {
    if (a == 0) return 0;
    int k;
    (void)frexp(a, &k);
    int E = k - 1;              /* 2^E <= a < 2^(E+1) */
    if (E < emin) E = emin;     /* subnormal range: fixed quantum */
    if (E + bias >= emax_field) return (uint32_t)emax_field << mbits;
    double quantum = ldexp(1.0, E - mbits);
    double q = a / quantum;     /* exact: scaling by a power of two */
    double r = floor(q);
    double frac = q - r;        /* exact */
    if (frac > 0.5 || (frac == 0.5 && ((int64_t)r & 1))) r += 1;
    double one = ldexp(1.0, mbits);
    uint32_t bits;
    if (r < one) bits = (uint32_t)r; /* subnormal (or zero) */
    else bits = ((uint32_t)(E + bias) << mbits) + (uint32_t)(r - one); /* carry moves the exponent */
    if (bits >= ((uint32_t)emax_field << mbits)) bits = (uint32_t)emax_field << mbits;
    return bits;
}

/* f32 -> f16 / bf16, to nearest even. NaN gives the canonical quiet NaN
   with f's sign (callers that care about NaN payloads test NaN apart). */
static inline uint16_t ref_f32_to_f16(float f) {
    uint16_t s = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return s | 0x7e00;
    if (isinf(f)) return s | 0x7c00;
    return (uint16_t)(s | ref_round(fabs((double)f), 10, -14, 15, 31));
}
static inline uint16_t ref_f32_to_bf16(float f) {
    uint16_t s = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return s | 0x7fc0;
    if (isinf(f)) return s | 0x7f80;
    return (uint16_t)(s | ref_round(fabs((double)f), 7, -126, 127, 255));
}

/* fp8, from the formats' definitions (ml_dtypes; the OCP 8-bit formats):
   float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits, no
   infinity, S.1111.111 the only NaN (largest finite 448 = S.1111.110);
   float8_e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like
   (exponent 31: inf or NaN, largest finite 57344). Encoding rounds to
   nearest even; what is beyond the largest finite value afterwards is
   inf (e5m2) or NaN (e4m3fn), as ml_dtypes' cast from float does; NaN
   gives the quiet NaN with the sign (e4m3fn 0x7f, e5m2 0x7e). */
static inline float ref_f8e4m3fn_to_f32(uint8_t b) {
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v;
    if (e == 15 && m == 7) v = NAN;
    else if (e == 0) v = ldexp((double)m, -9);
    else v = ldexp((double)(m + 8), e - 10);
    return (float)(sign ? -v : v);
}
static inline float ref_f8e5m2_to_f32(uint8_t b) {
    int sign = b >> 7, e = (b >> 2) & 31, m = b & 3;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -16);
    else v = ldexp((double)(m + 4), e - 17);
    return (float)(sign ? -v : v);
}
static inline uint8_t ref_f32_to_f8e4m3fn(float f) {
    uint8_t s = signbit(f) ? 0x80 : 0;
    if (isnan(f) || isinf(f)) return s | 0x7f;
    uint32_t bits = ref_round(fabs((double)f), 3, -6, 7, 16); /* (16: past the last exponent) */
    return (uint8_t)(s | (bits >= 0x7f ? 0x7f : bits));
}
static inline uint8_t ref_f32_to_f8e5m2(float f) {
    uint8_t s = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return s | 0x7e;
    if (isinf(f)) return s | 0x7c;
    return (uint8_t)(s | ref_round(fabs((double)f), 2, -14, 15, 31));
}

/* f32 -> fp8 of dtype t (e4m3fn or e5m2), by the references above. */
static inline uint8_t tl_f32_to_fp8(spmd_dtype t, float f) {
    return t == SPMD_F8E5M2 ? ref_f32_to_f8e5m2(f) : ref_f32_to_f8e4m3fn(f);
}
/* An fp8 input code of dtype t from the random word x: any code (NaN, inf,
   subnormals and the largest values among them), or, for a product, a
   value in [0.5, 2) (exponent 2^-1 or 2^0), so that G factors stay finite. */
static inline uint8_t tl_fp8_code(spmd_dtype t, uint64_t x, int prod) {
    int e5 = t == SPMD_F8E5M2, mb = e5 ? 2 : 3, bias = e5 ? 15 : 7;
    if (!prod) return (uint8_t)x;
    return (uint8_t)((x >> 8 & 1) << 7 | (uint64_t)(bias - 1 + (int)(x >> 9 & 1)) << mb | (x >> 16 & ((1u << mb) - 1)));
}

/* Complex sums and products in the canonical order (the tree above), each
   of a product's four products rounded (volatile: never fused). */
#define TL_CTREE_AT(NAME, T)                                                          \
    static inline void NAME(const T *x, int r, int lo, int n, int prod, T *out) {   \
        T a[2], b[2];                                                                 \
        if (n == 1) {                                                                 \
            if (lo >= r) { out[0] = x[2 * (lo + r)]; out[1] = x[2 * (lo + r) + 1]; return; } \
            a[0] = x[4 * lo]; a[1] = x[4 * lo + 1];                                   \
            b[0] = x[4 * lo + 2]; b[1] = x[4 * lo + 3];                               \
        } else {                                                                      \
            NAME(x, r, lo, n / 2, prod, a);                                           \
            NAME(x, r, lo + n / 2, n / 2, prod, b);                                   \
        }                                                                             \
        if (prod) {                                                                   \
            volatile T rr = a[0] * b[0], ii = a[1] * b[1], ri = a[0] * b[1], ir = a[1] * b[0]; \
            out[0] = rr - ii;                                                         \
            out[1] = ri + ir;                                                         \
        } else {                                                                      \
            out[0] = a[0] + b[0];                                                     \
            out[1] = a[1] + b[1];                                                     \
        }                                                                             \
    }
TL_CTREE_AT(tl_ctree_c64_at, float)
TL_CTREE_AT(tl_ctree_c128_at, double)
/* x: G complex numbers (re, im pairs); out: their sum or product */
static inline void tl_ctree_c64(const float *x, int G, int prod, float *out) {
    int P = tl_tree_leaves(G);
    tl_ctree_c64_at(x, G - P, 0, P, prod, out);
}
static inline void tl_ctree_c128(const double *x, int G, int prod, double *out) {
    int P = tl_tree_leaves(G);
    tl_ctree_c128_at(x, G - P, 0, P, prod, out);
}

/* n complex elements (c128: complex128, else complex64) reduced over G
   inputs in[0..G-1] (G <= 4096): sum and prod in the canonical order with
   complex arithmetic, mean the sum's parts divided by G. */
static inline void tl_ref_complex(int c128, spmd_op op, size_t n, const unsigned char *const *in, int G,
                                  unsigned char *out) {
    size_t es = c128 ? 16 : 8;
    for (size_t i = 0; i < n; i++) {
        if (c128) {
            static double xs[2 * 4096];
            double o[2];
            for (int j = 0; j < G; j++) memcpy(xs + 2 * j, in[j] + i * es, es);
            tl_ctree_c128(xs, G, op == SPMD_OP_PROD, o);
            if (op == SPMD_OP_MEAN) o[0] /= (double)G, o[1] /= (double)G;
            memcpy(out + i * es, o, es);
        } else {
            static float xs[2 * 4096];
            float o[2];
            for (int j = 0; j < G; j++) memcpy(xs + 2 * j, in[j] + i * es, es);
            tl_ctree_c64(xs, G, op == SPMD_OP_PROD, o);
            if (op == SPMD_OP_MEAN) o[0] /= (float)G, o[1] /= (float)G;
            memcpy(out + i * es, o, es);
        }
    }
}

/* Every f16 / bf16 bit pattern decoded, and every fp8 one: filled by
   init_half_tables(). */
static float H2F[65536] TL_UNUSED, B2F[65536] TL_UNUSED, E4F[256] TL_UNUSED, E5F[256] TL_UNUSED;
static inline void init_half_tables(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        H2F[h] = ref_f16_to_f32((uint16_t)h);
        B2F[h] = ref_bf16_to_f32((uint16_t)h);
    }
    for (uint32_t b = 0; b < 256; b++) {
        E4F[b] = ref_f8e4m3fn_to_f32((uint8_t)b);
        E5F[b] = ref_f8e5m2_to_f32((uint8_t)b);
    }
}

/* ---- processes ----------------------------------------------------------------------
   Under several processes (tools/spmdrun, libfabric backend) every process
   runs the whole program: the same meshes, cases and collectives in the
   same order, with only its own devices in spmd_run. So a check of device
   results made on the main thread looks at this process's devices only
   (the outputs of the others stay as filled here), and a decision that
   changes which collectives are called (recreate a broken mesh, run cases
   again) must never rest on what one process alone saw. On threads there
   is one process hosting every device: these helpers change nothing. */

/* 1 when this process hosts device dev of m (every device on threads). */
static inline int tl_local(const spmd_mesh *m, int dev) { return spmd_device_is_local(m, dev) == 1; }

/* How many of the devices first..last-1 of m this process hosts. */
static inline int tl_nlocal(const spmd_mesh *m, int first, int last) {
    int n = 0;
    for (int d = first; d < last; d++) n += tl_local(m, d);
    return n;
}

/* The first of the devices first..last-1 this process hosts, else -1. */
static inline int tl_first_local(const spmd_mesh *m, int first, int last) {
    for (int d = first; d < last; d++)
        if (tl_local(m, d)) return d;
    return -1;
}

/* 1 when m runs in this one process: only then may the main thread act on
   what it alone saw (a broken mesh recreated, cases run again). */
static inline int tl_one_process(const spmd_mesh *m) { return spmd_mesh_process_count(m) <= 1; }

/* SPMD_NUM_PROCESSES (set by tools/spmdrun) as a number; 1 if unset. */
static inline int tl_env_processes(void) {
    const char *e = getenv("SPMD_NUM_PROCESSES");
    int n = e && *e ? atoi(e) : 1;
    return n > 1 ? n : 1;
}

/* Launched as one of several processes (SPMD_NUM_PROCESSES > 1): the mesh
   must really span them, else every process would run the whole mesh on
   threads and the run would pass N times over without testing anything.
   Checks the process count and id against the environment and that each
   process hosts one contiguous block (row-major ids), spmd_device_is_local
   agreeing. One check for the program's first mesh, and a failure for any
   later mesh that is wrong; nothing at all on a plain run. Also labels the
   harness's FAIL/SKIP lines with the process. */
static inline void tl_check_layout(const spmd_mesh *m) {
    static int checked;
    int want = tl_env_processes();
    if (want <= 1) return;
    const char *pe = getenv("SPMD_PROCESS_ID");
    int n = spmd_mesh_process_count(m), me = spmd_mesh_process_id(m), size = spmd_mesh_size(m);
    int ok = n == want && (!pe || !*pe || atoi(pe) == me) && me >= 0 && me < n, prev = 0;
    char why[160] = "";
    if (!ok)
        snprintf(why, sizeof why, "mesh spans %d processes, this is %d; the environment says %d processes, this is %s", n,
                 me, want, pe && *pe ? pe : "?");
    for (int d = 0; d < size && ok; d++) {
        int p = spmd_device_process(m, d);
        ok = p >= prev && p < n && tl_local(m, d) == (p == me);
        if (!ok) snprintf(why, sizeof why, "device %d: process %d after %d (of %d), local %d", d, p, prev, n, tl_local(m, d));
        prev = p;
    }
    if (ok && checked) return;
    checked = 1;
    if (n > 1) {
        char label[48];
        snprintf(label, sizeof label, "process %d of %d", me, n);
        t_label(label);
    }
    T_CHECK(ok, "device layout of a %d-device mesh under %d processes: %s", size, want, why);
}

/* ---- meshes ------------------------------------------------------------------------ */
typedef struct { int nd, sh[3]; } meshdef; /* rank and dim sizes */

/* Creates a mesh with the given dims and names; every other desc field zero
   but the deadline, the check mode and the log level. *m is set by the library.
   Under several processes this is collective (every process, same order)
   and the device layout is checked (tl_check_layout). */
/* The last error a mesh made by create_named_mesh without logging reported
   (kept, not printed), for the message of a test that failed to make one. */
static pthread_mutex_t tl_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char tl_log_last[600] TL_UNUSED;
static void tl_log_keep(void *user, spmd_log_level level, int device, const char *msg) TL_UNUSED;
static void tl_log_keep(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user;
    (void)level;
    pthread_mutex_lock(&tl_log_lock);
    snprintf(tl_log_last, sizeof tl_log_last, "device %d: %s", device, msg);
    pthread_mutex_unlock(&tl_log_lock);
}
/* Every log line, kept for a test's checks (any thread): desc.log_fn =
   log_keep; log_clear empties it. */
static pthread_mutex_t log_lock TL_UNUSED = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536] TL_UNUSED;
static size_t log_len TL_UNUSED;
static void log_keep(void *user, spmd_log_level level, int device, const char *msg) TL_UNUSED;
static void log_keep(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user;
    (void)level;
    (void)device;
    pthread_mutex_lock(&log_lock);
    int w = snprintf(log_text + log_len, sizeof log_text - log_len, "%s\n", msg);
    if (w > 0) log_len += (size_t)w;
    if (log_len >= sizeof log_text) log_len = sizeof log_text - 1;
    pthread_mutex_unlock(&log_lock);
}
static void log_clear(void) TL_UNUSED;
static void log_clear(void) {
    pthread_mutex_lock(&log_lock);
    log_len = 0;
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_lock);
}
static inline const char *tl_last_error(void) { /* from the main thread */
    static char copy[sizeof tl_log_last];
    pthread_mutex_lock(&tl_log_lock);
    memcpy(copy, tl_log_last, sizeof copy);
    pthread_mutex_unlock(&tl_log_lock);
    return copy;
}

static inline spmd_status create_named_mesh(int ndim, const int *shape, const char *const *names, int64_t timeout_ms,
                                            spmd_check check, spmd_log_level log, spmd_mesh **m) {
    spmd_mesh_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        desc.shape[i] = shape[i];
        desc.axis_names[i] = names[i];
    }
    desc.timeout_ms = timeout_ms;
    desc.check = check;
    desc.log_level = log;
    if (log == SPMD_LOG_OFF) { /* errors kept for tl_last_error */
        desc.log_level = SPMD_LOG_ERROR;
        desc.log_fn = tl_log_keep;
        pthread_mutex_lock(&tl_log_lock);
        tl_log_last[0] = '\0';
        pthread_mutex_unlock(&tl_log_lock);
    }
    spmd_status s = spmd_mesh_create(&desc, m);
    if (s == SPMD_OK && *m) tl_check_layout(*m);
    return s;
}

/* "(2,3)" */
static inline void mesh_str(const meshdef *md, char *b, size_t cap) {
    if (md->nd == 1) snprintf(b, cap, "(%d)", md->sh[0]);
    else if (md->nd == 2) snprintf(b, cap, "(%d,%d)", md->sh[0], md->sh[1]);
    else snprintf(b, cap, "(%d,%d,%d)", md->sh[0], md->sh[1], md->sh[2]);
}

/* The meshes of the movement and MPI-style sweeps. */
static const meshdef SWEEP_MESHES[] TL_UNUSED = {{1, {1}},  {1, {2}},    {1, {3}},    {1, {5}},       {1, {7}},
                                                 {1, {16}}, {2, {2, 3}}, {2, {3, 2}}, {3, {2, 2, 2}}, {2, {4, 2}}};
#define NSWEEP_MESHES ((int)(sizeof SWEEP_MESHES / sizeof SWEEP_MESHES[0]))

/* ---- axis variants and groups --------------------------------------------------------- */
/* One way of naming axes in a call: the axes string, the mesh dims it names
   (in the order named) and, optionally, axis_index_groups. */
typedef struct {
    char axes[24];
    int nn, dims[3];    /* mesh dims in the order named */
    int size;           /* product of the named sizes */
    int gsize;          /* 0: no groups, else entries per group */
    int groups[MAXDEV]; /* flattened partition of [0, size) */
} axv;
/* devices per group */
static inline int vG(const axv *v) { return v->gsize ? v->gsize : v->size; }
/* single axis, no groups: where argmax/argmin mean the same as for pargmax */
static inline int single_axis(const axv *v) { return v->nn == 1 && v->axes[0] != '*' && !v->gsize; }

/* A mesh, the names of its dims and its axis variants. */
typedef struct {
    meshdef md;
    const char *const *axn; /* names of the mesh dims */
    int ndev;
    spmd_mesh *m;
    axv var[64];
    int nvar;
} meshctx;

/* "axes 'x,y' groups {0,2}{3,1}" */
static inline void var_str(const axv *v, char *b, size_t cap) {
    size_t o = (size_t)snprintf(b, cap, "axes '%s'", v->axes);
    if (v->gsize && o < cap) {
        o += (size_t)snprintf(b + o, cap - o, " groups ");
        for (int k = 0; k < v->size && o + 6 < cap; k++)
            o += (size_t)snprintf(b + o, cap - o, "%s%d", k == 0 ? "{" : k % v->gsize ? "," : "}{", v->groups[k]);
        if (o + 2 < cap) snprintf(b + o, cap - o, "}");
    }
}

/* The devices of dev's group under v, in group order, into mem; *me = dev's
   index in it. Returns G. Plain coordinate arithmetic on the row-major mesh. */
static inline int group_of(const meshdef *md, const axv *v, int dev, int *mem, int *me) {
    int c[3] = {0, 0, 0}, t = dev;
    for (int d = md->nd - 1; d >= 0; d--) { c[d] = t % md->sh[d]; t /= md->sh[d]; }
    int idx = 0; /* dev's index along the named axes */
    for (int k = 0; k < v->nn; k++) idx = idx * md->sh[v->dims[k]] + c[v->dims[k]];
    int G = vG(v), base = 0, pos = idx;
    if (v->gsize) {
        for (int k = 0; k < v->size; k++)
            if (v->groups[k] == idx) pos = k;
        base = pos / v->gsize * v->gsize;
        pos -= base;
    }
    *me = pos;
    for (int j = 0; j < G; j++) {
        int lin = v->gsize ? v->groups[base + j] : j;
        int cc[3] = {c[0], c[1], c[2]};
        for (int k = v->nn - 1; k >= 0; k--) {
            cc[v->dims[k]] = lin % md->sh[v->dims[k]];
            lin /= md->sh[v->dims[k]];
        }
        int id = 0;
        for (int d = 0; d < md->nd; d++) id = id * md->sh[d] + cc[d];
        mem[j] = id;
    }
    return G;
}

/* A growing array of cases: a (n of cap used, elem bytes each) with room
   for one more (doubling from first), zeroed and counted; returns the array
   (moved or not); exits when out of memory. TL_PUSH(L, first): the new
   element of a list {a, n, cap}. */
static inline void *tl_grow(void *a, int *n, int *cap, size_t elem, int first) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : first;
        a = realloc(a, (size_t)*cap * elem);
        if (!a) { fprintf(stderr, "out of memory\n"); exit(2); }
    }
    memset((unsigned char *)a + (size_t)(*n)++ * elem, 0, elem);
    return a;
}
#define TL_PUSH(L, first) \
    ((L)->a = tl_grow((L)->a, &(L)->n, &(L)->cap, sizeof *(L)->a, (first)), &(L)->a[(L)->n - 1])

/* Does every group of variant v lie inside one process? A refused call
   whose group spans processes breaks the mesh (docs/semantics.md), so the
   sweeps' refused calls keep to such variants; test_xfault covers the
   break. The same answer in every process. */
static inline int tl_var_in_process(const meshctx *mc, int v) {
    int mem[MAXDEV], me;
    for (int d = 0; d < mc->ndev; d++) {
        int G = group_of(&mc->md, &mc->var[v], d, mem, &me);
        for (int k = 0; k < G; k++)
            if (spmd_device_process(mc->m, mem[k]) != spmd_device_process(mc->m, d)) return 0;
    }
    return 1;
}

/* Appends the variant naming dims[0..nn-1] ("*" when star); returns its
   index, or -1 when mc->var is full. */
static inline int add_axv(meshctx *mc, const int *dims, int nn, int star) {
    if (mc->nvar >= (int)(sizeof mc->var / sizeof mc->var[0])) return -1;
    axv *v = &mc->var[mc->nvar];
    memset(v, 0, sizeof *v);
    v->nn = nn;
    v->size = 1;
    size_t o = 0;
    for (int k = 0; k < nn; k++) {
        v->dims[k] = dims[k];
        v->size *= mc->md.sh[dims[k]];
        if (!star) o += (size_t)snprintf(v->axes + o, sizeof v->axes - o, "%s%s", k ? "," : "", mc->axn[dims[k]]);
    }
    if (star) strcpy(v->axes, "*");
    return mc->nvar++;
}

/* Appends a copy of variant `base` split into groups of gsize by a random
   permutation (xorshift stream r). */
static inline void add_groups(meshctx *mc, int base, int gsize, rng_t *r) {
    axv *v = &mc->var[mc->nvar++];
    *v = mc->var[base];
    v->gsize = gsize;
    for (int k = 0; k < v->size; k++) v->groups[k] = k;
    for (int k = v->size - 1; k > 0; k--) {
        int j = rb(r, k + 1), t = v->groups[k];
        v->groups[k] = v->groups[j];
        v->groups[j] = t;
    }
}

/* Creates mc->m from mc->md and mc->axn (30 s deadline: a hang becomes a
   failure) and sets mc->ndev; one check. Returns 1 when created. */
static inline int create_mesh(meshctx *mc) {
    mc->ndev = 1;
    for (int d = 0; d < mc->md.nd; d++) mc->ndev *= mc->md.sh[d];
    spmd_status s = create_named_mesh(mc->md.nd, mc->md.sh, mc->axn, 30000, SPMD_CHECK_DEFAULT, SPMD_LOG_DEFAULT, &mc->m);
    char ms[24];
    mesh_str(&mc->md, ms, sizeof ms);
    T_CHECK(s == SPMD_OK && mc->m, "mesh_create %s: %s", ms, stname(s));
    return s == SPMD_OK && mc->m;
}

/* Destroys mc->m and creates it again (after a case broke it). */
static inline int recreate_mesh(meshctx *mc) {
    spmd_mesh_destroy(mc->m);
    mc->m = NULL;
    return create_mesh(mc);
}

/* ---- async clusters and failure messages --------------------------------------------- */

/* Per device, a random order 0..m-1 in which to finish a cluster's requests. */
static inline void shuffle_orders(unsigned char (*order)[MAXCL], int m, rng_t *r) {
    for (int d = 0; d < MAXDEV; d++) {
        for (int j = 0; j < m; j++) order[d][j] = (unsigned char)j;
        for (int j = m - 1; j > 0; j--) {
            int s = rb(r, j + 1);
            unsigned char t = order[d][j];
            order[d][j] = order[d][s];
            order[d][s] = t;
        }
    }
}

/* Keeps the first failure of a case (from any device thread) in msg. */
static inline void note_first(int *flag, char *msg, size_t cap, spmd_dev *d, int me, spmd_status s, const char *where) {
    if (__atomic_exchange_n(flag, 1, __ATOMIC_ACQ_REL) == 0)
        snprintf(msg, cap, "dev %d %s: %s (%.150s)", me, where, stname(s), spmd_last_error(d));
}

/* "SPMD_ERR_SHAPE|SPMD_ERR_INVALID": the statuses in an ACC() set. */
static inline void accept_str(uint32_t accept, char *b, size_t cap) {
    size_t o = 0;
    b[0] = 0;
    for (int s = 0; s < SPMD_STATUS_COUNT && o + 30 < cap; s++)
        if (accept & ACC(s)) o += (size_t)snprintf(b + o, cap - o, "%s%s", o ? "|" : "", spmd_status_name((spmd_status)s));
}

/* ---- the batch runner ------------------------------------------------------------------
   test_movement and test_mpi lay out a list of cases for each mesh and run
   it here: every device performs the cases in order inside one spmd_run
   (async clusters started together, then finished in each device's own
   order), then the main thread checks each case. A tl_sweep says what
   differs between the tests: the case type, the call, the buffers, the
   checks. (test_movement's ragged_all_to_all cases use the device side,
   tl_batch_dev, alone.) */

/* How the first case of an async cluster says to finish its requests. */
enum { TL_W_WAIT, TL_W_DONE, TL_W_TEST, TL_W_ALL };

/* The part of a case the runner reads and writes: how it is called and
   what each device's call returned. A test's case type has it as its
   first member, named run. */
typedef struct {
    uint32_t accept;                    /* 0: must succeed; else bit s set = status s accepted (ACC) */
    int async;                          /* the _start form */
    int cluster;                        /* an async cluster's first case: how many cases it has */
    int wstyle;                         /* an async cluster's first case: TL_W_* */
    int reqnull;                        /* _start given req = NULL */
    int late;                           /* 1 + the device that calls ~30 ms after the others, 0: none */
    int away;                           /* an async cluster's first case: its devices go away after the
                                           starts (tl_away) */
    unsigned char order[MAXDEV][MAXCL]; /* per device, the order in which it finishes the cluster's requests */
    spmd_status st[MAXDEV];             /* what each device's call returned */
    int reqset[MAXDEV];                 /* _start refused: was *req left non-NULL? */
    int errflag;                        /* errmsg holds the case's first failure */
    char errmsg[240];
} tl_run;

/* A test's cases for the runner: elem bytes each, a tl_run first
   (tl_batch_dev alone reads only elem and call). */
typedef struct {
    size_t elem;
    /* One call of case c by device me, the _start form when req is not NULL;
       tmo: the deadline in ms (0: the mesh's). */
    spmd_status (*call)(spmd_dev *d, void *c, const meshctx *mc, int me, spmd_req **req, int64_t tmo);
    int (*unit)(const void *c);                       /* cases from c on that form one unit (a cluster) */
    size_t (*need)(const meshctx *mc, const void *c); /* bytes c's buffers take on all devices */
    /* Buffers and inputs of c, and the check of c after its run; refused:
       a case of tl_run_errors. */
    void (*prepare)(void *c, const meshctx *mc, rng_t *r, int refused);
    void (*check)(const meshctx *mc, void *c, int refused);
    void (*release)(void *c, int ndev);
    void (*describe)(const meshctx *mc, const void *c, char *b, size_t cap); /* for failure messages */
} tl_sweep;

/* What every device runs: n cases from cs (sync_after: refused calls, a
   short deadline and a barrier over "*" after each case). */
typedef struct {
    const tl_sweep *sw;
    const meshctx *mc;
    unsigned char *cs;
    int n;
    int sync_after;
} tl_batch;

/* Case k of cases a (elem bytes each), and its tl_run (its first member:
   the same address). */
static inline void *tl_case(void *a, size_t elem, int k) { return (unsigned char *)a + (size_t)k * elem; }
static inline tl_run *tl_run_at(void *a, size_t elem, int k) { return (tl_run *)tl_case(a, elem, k); }

/* Keeps the first failure of case c (from any device thread) in c->errmsg. */
static inline void tl_note(tl_run *c, spmd_dev *d, int me, spmd_status s, const char *where) {
    note_first(&c->errflag, c->errmsg, sizeof c->errmsg, d, me, s, where);
}

/* Device me's call of case c ended with s: kept, and noted as a failure
   unless c is a refused call. */
static inline void tl_finish(tl_run *c, spmd_dev *d, int me, spmd_status s, const char *where) {
    c->st[me] = s;
    if (s != SPMD_OK && !c->accept) tl_note(c, d, me, s, where);
}

/* Starts the m cases of the cluster at case k: rq[q] their requests (NULL
   where there is nothing to finish). */
static inline void tl_cluster_start(const tl_batch *b, spmd_dev *d, int me, int k, int m, int64_t tmo, spmd_req **rq) {
    for (int q = 0; q < m; q++) {
        tl_run *cq = tl_run_at(b->cs, b->sw->elem, k + q);
        rq[q] = (spmd_req *)(uintptr_t)1; /* must be overwritten */
        spmd_status s = b->sw->call(d, cq, b->mc, me, &rq[q], cq->accept ? tmo : 0);
        cq->st[me] = s;
        if (s != SPMD_OK) {
            cq->reqset[me] = !cq->reqnull && rq[q] != NULL;
            rq[q] = NULL;
            if (!cq->accept) tl_note(cq, d, me, s, "start");
        } else if (!rq[q] || rq[q] == (spmd_req *)(uintptr_t)1) {
            rq[q] = NULL;
            cq->st[me] = SPMD_ERR_STATE;
            tl_note(cq, d, me, SPMD_ERR_STATE, "start returned OK without a request");
        }
        if (cq->reqnull) rq[q] = NULL;
    }
}

/* Away from the library: a device of an async cluster sleeps after its
   starts (reading only spmd_mesh_counters) until the mesh's progress
   workers ran a task since base, or secs passed (the sweeps: 20 ms, for a
   call too small to hand over; no workers under fibers: it returns at
   once), so that the workers run large calls while nobody else can; 1 if
   they did. tl_away_moved counts those times: a sweep that went away on
   threads checks it is not 0. */
#define TL_HANDOFF_BYTES 262144 /* a call's members' inputs from which the workers take it (the manual's ASYNC) */
static long tl_away_moved TL_UNUSED, tl_away_tries TL_UNUSED;
static inline uint64_t tl_worker_tasks(spmd_mesh *m) {
    spmd_counters c;
    return spmd_mesh_counters(m, &c) == SPMD_OK ? c.worker_tasks : 0;
}
static inline int tl_away(spmd_mesh *m, uint64_t base, double secs) {
    double until = now_s() + secs;
    if (spmd_mesh_scheduler(m) == SPMD_SCHEDULER_FIBERS) return 0;
    __atomic_fetch_add(&tl_away_tries, 1, __ATOMIC_RELAXED);
    while (now_s() < until) {
        struct timespec ts = {0, 100000};
        if (tl_worker_tasks(m) > base) {
            __atomic_fetch_add(&tl_away_moved, 1, __ATOMIC_RELAXED);
            return 1;
        }
        nanosleep(&ts, NULL);
    }
    return 0;
}
/* The sweep's check of the above (one process: across processes a device
   may only have been in groups that span them, which no worker runs). */
static inline void tl_away_check(const char *test) {
    if (tl_away_tries && tl_env_processes() == 1)
        T_CHECK(tl_away_moved > 0, "%s: devices went away %ld times after large _start calls on OS threads, and no "
                "progress worker ran a task meanwhile", test, tl_away_tries);
}

/* Finishes the m requests rq of the cluster at case k with spmd_test, in
   device me's order, until all are done (60 s at most). */
static inline void tl_cluster_test(const tl_batch *b, spmd_dev *d, int me, int k, int m, spmd_req **rq) {
    const tl_run *c = tl_run_at(b->cs, b->sw->elem, k);
    double until = now_s() + 60;
    for (;;) {
        int left = 0;
        for (int w = 0; w < m; w++) {
            int q = c->order[me][w];
            if (!rq[q]) continue;
            int done = 0;
            spmd_status s = spmd_test(rq[q], &done);
            if (done) {
                rq[q] = NULL;
                tl_finish(tl_run_at(b->cs, b->sw->elem, k + q), d, me, s, "test");
            } else {
                left++;
                if (s != SPMD_OK) tl_finish(tl_run_at(b->cs, b->sw->elem, k + q), d, me, s, "test (not done)");
            }
        }
        if (!left) return;
        if (now_s() > until) {
            for (int q = 0; q < m; q++)
                if (rq[q])
                    tl_finish(tl_run_at(b->cs, b->sw->elem, k + q), d, me, SPMD_ERR_TIMEOUT,
                              "spmd_test: not done after 60 s");
            return; /* the requests are leaked: the test has failed anyway */
        }
        sched_yield();
    }
}

/* Finishes the m requests rq of the cluster at case k as its first case
   says: spmd_wait_all, spmd_test, or spmd_done / spmd_wait in device me's
   order. */
static inline void tl_cluster_finish(const tl_batch *b, spmd_dev *d, int me, int k, int m, spmd_req **rq) {
    const tl_run *c = tl_run_at(b->cs, b->sw->elem, k);
    if (c->wstyle == TL_W_ALL) {
        spmd_status s = spmd_wait_all(rq, m);
        if (s != SPMD_OK)
            for (int q = 0; q < m; q++) tl_finish(tl_run_at(b->cs, b->sw->elem, k + q), d, me, s, "wait_all");
    } else if (c->wstyle == TL_W_TEST) {
        tl_cluster_test(b, d, me, k, m, rq);
    } else {
        for (int w = 0; w < m; w++) {
            int q = c->order[me][w];
            if (!rq[q]) continue;
            spmd_status s = c->wstyle == TL_W_DONE ? spmd_done(rq[q]) : spmd_wait(rq[q]);
            tl_finish(tl_run_at(b->cs, b->sw->elem, k + q), d, me, s, c->wstyle == TL_W_DONE ? "done" : "wait");
        }
    }
}

/* spmd_run's function (arg: a tl_batch): the device performs every case in
   order, a cluster of _start calls at once. */
static inline void tl_batch_dev(spmd_dev *d, void *arg) {
    const tl_batch *b = (const tl_batch *)arg;
    int me = spmd_device_id(d);
    /* refused calls never wait; a device that wrongly goes ahead gives up soon */
    int64_t tmo = b->sync_after ? 300 : 0;
    spmd_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.timeout_ms = 10000;
    for (int k = 0; k < b->n;) {
        tl_run *c = tl_run_at(b->cs, b->sw->elem, k);
        if (b->sync_after && k > 0) {
            spmd_status s = spmd_barrier(d, "*", &bo);
            if (s != SPMD_OK) tl_note(tl_run_at(b->cs, b->sw->elem, k - 1), d, me, s, "barrier after the case");
        }
        if (c->late == me + 1) {
            struct timespec ts = {0, 30000000};
            nanosleep(&ts, NULL);
        }
        if (!c->async) {
            tl_finish(c, d, me, b->sw->call(d, c, b->mc, me, NULL, c->accept ? tmo : 0), "call");
            k++;
            continue;
        }
        int m = c->cluster > 0 ? c->cluster : 1;
        spmd_req *rq[MAXCL];
        uint64_t base = c->away ? tl_worker_tasks(b->mc->m) : 0;
        tl_cluster_start(b, d, me, k, m, tmo, rq);
        if (c->away) tl_away(b->mc->m, base, 0.02);
        tl_cluster_finish(b, d, me, k, m, rq);
        k += m;
    }
}

/* After a run: a broken mesh is a failure, and (in one process) recreated
   for the cases left. Returns 0 when it could not be. */
static inline int tl_mesh_after_run(meshctx *mc) {
    if (spmd_mesh_status(mc->m) == SPMD_OK) return 1;
    /* not under several processes, where the others may not see it broken
       (creation is collective) */
    char ms[24];
    int again = tl_one_process(mc->m);
    mesh_str(&mc->md, ms, sizeof ms);
    T_CHECK(0, "mesh %s broken: %s (%s)", ms, spmd_mesh_error(mc->m),
            again ? "recreated for the remaining cases" : "kept: several processes");
    return !again || recreate_mesh(mc);
}

/* Runs the n cases at cs on mc, in slices whose buffers take at most
   budget bytes (at least one unit; a unit is never cut), one spmd_run a
   slice; then checks each case. */
static inline void tl_run_batch(meshctx *mc, const tl_sweep *sw, void *cs, int n, rng_t *r, size_t budget) {
    for (int k = 0; k < n;) {
        size_t used = 0;
        int end = k;
        while (end < n) {
            int m = sw->unit(tl_case(cs, sw->elem, end));
            size_t need = 0;
            for (int q = end; q < end + m; q++) need += sw->need(mc, tl_case(cs, sw->elem, q));
            if (end > k && used + need > budget) break;
            used += need;
            end += m;
        }
        for (int q = k; q < end; q++) sw->prepare(tl_case(cs, sw->elem, q), mc, r, 0);
        tl_batch b = {sw, mc, (unsigned char *)tl_case(cs, sw->elem, k), end - k, 0};
        (void)spmd_run(mc->m, tl_batch_dev, &b);
        for (int q = k; q < end; q++) {
            sw->check(mc, tl_case(cs, sw->elem, q), 0);
            sw->release(tl_case(cs, sw->elem, q), mc->ndev);
        }
        k = end;
        if (!tl_mesh_after_run(mc)) return;
    }
}

/* Did every device of this process end case c as it should (refused as
   accepted, or succeeded)? */
static inline int tl_as_expected(const meshctx *mc, const tl_run *c) {
    for (int d = 0; d < mc->ndev; d++) {
        if (!tl_local(mc->m, d)) continue;
        if (c->accept ? (c->st[d] >= SPMD_STATUS_COUNT || !(c->accept & ACC(c->st[d]))) : c->st[d] != SPMD_OK) return 0;
    }
    return 1;
}

/* Refused calls, n cases at cs, each followed by a barrier. A case that
   breaks the mesh is reported, the mesh recreated and the cases after it
   run again (in one process only: under several the others may not see
   it broken, and creation is collective; there the mesh is kept and every
   case checked as it ran). */
static inline void tl_run_errors(meshctx *mc, const tl_sweep *sw, void *cs, int n, rng_t *r) {
    char ms[24];
    mesh_str(&mc->md, ms, sizeof ms);
    for (int k = 0; k < n;) {
        for (int q = k; q < n; q++) sw->prepare(tl_case(cs, sw->elem, q), mc, r, 1);
        tl_batch b = {sw, mc, (unsigned char *)tl_case(cs, sw->elem, k), n - k, 1};
        (void)spmd_run(mc->m, tl_batch_dev, &b);
        int broken = spmd_mesh_status(mc->m) != SPMD_OK, end = n, again = broken && tl_one_process(mc->m);
        if (broken) {
            end = -1;
            for (int q = k; q < n && end < 0; q++)
                if (!tl_as_expected(mc, tl_run_at(cs, sw->elem, q))) end = q + 1;
            char desc[600];
            sw->describe(mc, tl_case(cs, sw->elem, end > 0 ? end - 1 : k), desc, sizeof desc);
            T_CHECK(0, "mesh %s broken by a refused call (%s); the culprit: %s%s", ms, spmd_mesh_error(mc->m), desc,
                    again ? "" : " (kept: several processes)");
            if (end < 0 || !again) end = n;
        }
        for (int q = k; q < n; q++) {
            if (q < end) sw->check(mc, tl_case(cs, sw->elem, q), 1);
            sw->release(tl_case(cs, sw->elem, q), mc->ndev);
        }
        k = end;
        if (again && !recreate_mesh(mc)) return;
    }
    T_CHECK(spmd_mesh_status(mc->m) == SPMD_OK, "mesh %s broken after refused calls: %s", ms, spmd_mesh_error(mc->m));
}

/* ---- meshes under a chosen scheduler; large groups ---------------------------------
   test_fibers.c's meshes, and the large-group tests of the thread engine's
   combining path (SPMD__COMBINE_MIN = 16 members and up: one member
   reduces, or gathers, for all): psum and barrier in test_reduce.c,
   all_gather and the one-way kinds in test_movement.c. */

/* A 2-D mesh (a, b), axes "a" and "b", under scheduler sch (0: the default)
   on `carriers` carriers (0: the default), with sched_seed seed and deadline
   timeout_ms (0: the default); log NULL: nothing logged, else errors go to
   log(user). One check: it was made. */
static inline spmd_mesh *tl_mesh_ab(int a, int b, spmd_scheduler sch, int carriers, uint64_t seed, int64_t timeout_ms,
                                    spmd_log_fn log, void *user) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = a;
    desc.shape[1] = b;
    desc.axis_names[0] = "a";
    desc.axis_names[1] = "b";
    desc.scheduler = sch;
    desc.carriers = carriers;
    desc.sched_seed = seed;
    desc.timeout_ms = timeout_ms;
    desc.log_fn = log;
    desc.log_user = user;
    desc.log_level = log ? SPMD_LOG_ERROR : SPMD_LOG_OFF;
    s = spmd_mesh_create(&desc, &m);
    T_CHECK(s == SPMD_OK, "mesh (%d, %d): %s", a, b, stname(s));
    return m;
}

/* A failure seen by any device (several may store one at once). */
static inline void tl_st_set(spmd_status *p, spmd_status s) { __atomic_store_n(p, s, __ATOMIC_RELAXED); }

/* 64 random bits for device id's element i of case c (the large-group
   tests' inputs: what a device sends and what the reference reads). */
static inline uint64_t tl_case_bits(int c, int id, int i) {
    uint64_t st = ((uint64_t)c << 40) ^ ((uint64_t)id << 20) ^ (uint64_t)i ^ 0x9e3779b97f4a7c15ull;
    return splitmix64(&st);
}

/* What the devices of a tl_run_groups run saw: mismatch asks for the
   mismatch (every member must report it, counted in nmis); bad counts the
   devices with a wrong result; st keeps a failing status. */
typedef struct tl_groups_arg { int mismatch; long bad; spmd_status st; int nmis; } tl_groups_arg;

/* Whether the large-group tests run here: in one process only (the thread
   engine's path: across processes the groups would span them, and the
   mismatch check counts every member of every group in this process); in
   the sweeps' thinned runs (SPMD_TEST_QUICK=N:K, N >= 2) only where K = 0:
   the ASan and TSan runs (K = 0), and two of the four settings of
   tests/run.sh's scheduler matrix instead of all four (its SPMD_SCHEDULER
   overrides the cases' own desc.scheduler there). */
static inline int tl_groups_here(void) { return tl_env_processes() == 1 && env_thin_offset() % env_thin() == 0; }

/* Every member of groups of 5 to 64, under both schedulers, makes fn's calls
   (tl_groups_arg: right, or a mismatch every member must report). Under
   ThreadSanitizer groups of 5 to 33 (each fiber is a thread to it: the two
   meshes of 64 were two thirds of its test_movement). */
static inline void tl_run_groups(const char *what, spmd_fn fn) {
    static const struct { int rows, G; spmd_scheduler sch; int carriers; } cs[] = {
        {1, 16, SPMD_SCHEDULER_THREADS, 0}, {2, 17, SPMD_SCHEDULER_THREADS, 0}, {1, 33, SPMD_SCHEDULER_FIBERS, 1},
        {3, 17, SPMD_SCHEDULER_FIBERS, 2},  {1, 64, SPMD_SCHEDULER_FIBERS, 1},  {1, 64, SPMD_SCHEDULER_FIBERS, 2},
        {2, 8, SPMD_SCHEDULER_THREADS, 0},  {3, 9, SPMD_SCHEDULER_FIBERS, 2},   {1, 7, SPMD_SCHEDULER_FIBERS, 1},
        {1, 5, SPMD_SCHEDULER_FIBERS, 1}};
    int i, mis, most = 64;
#if defined(__SANITIZE_THREAD__)
    most = 33;
#endif
    for (i = 0; i < (int)(sizeof cs / sizeof cs[0]); i++)
        for (mis = 0; mis < 2 && cs[i].G <= most; mis++) {
            spmd_mesh *m = tl_mesh_ab(cs[i].rows, cs[i].G, cs[i].sch, cs[i].carriers, 5, mis ? 20000 : 0, NULL, NULL);
            tl_groups_arg a;
            spmd_status run;
            double t0 = now_s();
            if (!m) continue;
            memset(&a, 0, sizeof a);
            a.mismatch = mis;
            run = spmd_run(m, fn, &a);
            if (!mis)
                T_CHECK(run == SPMD_OK && a.st == SPMD_OK && a.bad == 0,
                        "%s over (%d, %d) %s, %d carriers: run %s, a call %s, %ld devices with wrong results", what,
                        cs[i].rows, cs[i].G, cs[i].sch == SPMD_SCHEDULER_FIBERS ? "fibers" : "threads", cs[i].carriers,
                        stname(run), stname(a.st), a.bad);
            else /* every member of every group reports it, long before the 20 s deadline */
                T_CHECK(run == SPMD_ERR_MISMATCH && a.nmis == cs[i].rows * cs[i].G && a.st == SPMD_OK &&
                            now_s() - t0 < 10.0,
                        "%s mismatch (%d, %d): run %s, %d of %d members reported it, other status %s, %.1f s", what,
                        cs[i].rows, cs[i].G, stname(run), a.nmis, cs[i].rows * cs[i].G, stname(a.st), now_s() - t0);
            spmd_mesh_destroy(m);
        }
}
#endif
