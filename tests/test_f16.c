/* test_f16.c - the scalar conversions spmd_f16_to_f32, spmd_f32_to_f16,
   spmd_bf16_to_f32 and spmd_f32_to_bf16, and fp8's (spmd_f32_to_f8e4m3fn
   ...), against the plain references of testlib.h (ldexp for decoding,
   double arithmetic with explicit tie handling for rounding to nearest
   even, written from the formats' definitions); the kernels of these
   types and of complex64 and complex128 through spmd_reduce_local.

   Covered: every f16 and bf16 bit pattern decoded; every finite value
   encoded back exactly; every midpoint between consecutive values (ties to
   even) and the floats just above and below it; subnormals; overflow to
   infinity; NaN stays a quiet NaN (including NaNs whose payload lies only in
   the bits that are dropped); +-0; millions of random f32 bit patterns.

   The reduction kernels convert blocks of halves with their own (vector,
   or F16C) code: spmd_reduce_local is checked against the same references
   on every f16 and bf16 pattern (one input: decode and encode back) and
   on random pairs and triples (sum, max, mean: rounded once from f32),
   at lengths that end in every position of a vector block. make test
   also runs this file built with SPMD_NO_DISPATCH (the baseline kernels).

   fp8: every code decoded and encoded back, every midpoint between
   neighbours and the floats beside it, values named from the formats'
   tables (the largest finite, the ties past it, inf and NaN: ml_dtypes'
   rule), random f32 bit patterns; the kernels on every code and random
   pairs and triples of all five ops, and sums past the largest finite
   value. Complex: sum, prod and mean of 1 to 9 random inputs (NaN, inf,
   subnormal and largest parts among them) against complex arithmetic done
   here in the canonical order; max, min, argmax, argmin refused.

   Seed: env SPMD_TEST_SEED, else fixed; printed. */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;
static uint64_t rng_next(void) { return splitmix64(&rng_state); }

/* ---- plain references: ref_f16_to_f32, ref_bf16_to_f32, ref_f32_to_f16 and
   ref_f32_to_bf16 are in testlib.h ------------------------------------------- */
static int f16_isnan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff); }
static int f16_isquietnan(uint16_t h) { return f16_isnan(h) && (h & 0x0200); }
static int bf16_isnan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f); }
static int bf16_isquietnan(uint16_t h) { return bf16_isnan(h) && (h & 0x0040); }

/* ---- helpers that count mismatches and remember the first one --------- */
typedef struct {
    long bad;
    uint32_t first_in, first_got, first_exp;
} tally;

static void tally_add(tally *t, uint32_t in, uint32_t got, uint32_t exp) {
    if (t->bad++ == 0) { t->first_in = in; t->first_got = got; t->first_exp = exp; }
}

/* Check one f32 -> f16 conversion against the reference. */
static void chk16(tally *t, float f) {
    uint16_t got = spmd_f32_to_f16(f);
    if (isnan(f)) {
        if (!f16_isquietnan(got)) tally_add(t, f2u(f), got, 0x7e00);
        return;
    }
    uint16_t exp = ref_f32_to_f16(f);
    if (got != exp) tally_add(t, f2u(f), got, exp);
}
static void chkbf(tally *t, float f) {
    uint16_t got = spmd_f32_to_bf16(f);
    if (isnan(f)) {
        if (!bf16_isquietnan(got)) tally_add(t, f2u(f), got, 0x7fc0);
        return;
    }
    uint16_t exp = ref_f32_to_bf16(f);
    if (got != exp) tally_add(t, f2u(f), got, exp);
}

#define CHECK_TALLY(t, what)                                                          \
    T_CHECK((t).bad == 0, "%s: %ld mismatches; first: input 0x%08x got 0x%04x expected 0x%04x", \
            what, (t).bad, (unsigned)(t).first_in, (unsigned)(t).first_got,             \
            (unsigned)(t).first_exp)

/* Expect one exact conversion result. */
static void expect16(float f, uint16_t exp, const char *what) {
    uint16_t got = spmd_f32_to_f16(f);
    T_CHECK(got == exp, "f32_to_f16(%s = %.9g, bits 0x%08x) = 0x%04x, expected 0x%04x", what,
            (double)f, (unsigned)f2u(f), got, exp);
}
static void expectbf(float f, uint16_t exp, const char *what) {
    uint16_t got = spmd_f32_to_bf16(f);
    T_CHECK(got == exp, "f32_to_bf16(%s = %.9g, bits 0x%08x) = 0x%04x, expected 0x%04x", what,
            (double)f, (unsigned)f2u(f), got, exp);
}

/* ---- f16 ------------------------------------------------------------------ */
static void test_f16_decode(void) {
    tally normal = {0}, sub = {0}, special = {0}, nan = {0};
    for (uint32_t h = 0; h < 65536; h++) {
        float got = spmd_f16_to_f32((uint16_t)h);
        float exp = ref_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 31;
        if (f16_isnan((uint16_t)h)) {
            if (!isnan(got)) tally_add(&nan, h, f2u(got), f2u(exp));
        } else {
            tally *t = (e == 31 || (h & 0x7fff) == 0) ? &special : e == 0 ? &sub : &normal;
            if (f2u(got) != f2u(exp)) tally_add(t, h, f2u(got), f2u(exp));
        }
    }
    T_CHECK(normal.bad == 0, "f16_to_f32 normals: %ld wrong; first 0x%04x -> 0x%08x, expected 0x%08x",
            normal.bad, (unsigned)normal.first_in, (unsigned)normal.first_got, (unsigned)normal.first_exp);
    T_CHECK(sub.bad == 0, "f16_to_f32 subnormals: %ld wrong; first 0x%04x -> 0x%08x, expected 0x%08x",
            sub.bad, (unsigned)sub.first_in, (unsigned)sub.first_got, (unsigned)sub.first_exp);
    T_CHECK(special.bad == 0, "f16_to_f32 +-0/+-inf: %ld wrong; first 0x%04x -> 0x%08x, expected 0x%08x",
            special.bad, (unsigned)special.first_in, (unsigned)special.first_got, (unsigned)special.first_exp);
    T_CHECK(nan.bad == 0, "f16_to_f32 NaN inputs: %ld not NaN; first 0x%04x -> 0x%08x",
            nan.bad, (unsigned)nan.first_in, (unsigned)nan.first_got);
    /* a few literal values, independent of the reference above */
    T_CHECK(spmd_f16_to_f32(0x3c00) == 1.0f && spmd_f16_to_f32(0xc000) == -2.0f &&
                spmd_f16_to_f32(0x7bff) == 65504.0f && spmd_f16_to_f32(0x0001) == 0x1p-24f &&
                spmd_f16_to_f32(0x0400) == 0x1p-14f && spmd_f16_to_f32(0x3555) == 0x1.554p-2f,
            "f16_to_f32 literal values");
}

static void test_f16_encode(void) {
    tally exact = {0}, ties = {0}, above = {0}, below = {0};
    for (uint32_t h = 0; h < 65536; h++) {
        if (f16_isnan((uint16_t)h)) continue;
        float f = ref_f16_to_f32((uint16_t)h);
        uint16_t got = spmd_f32_to_f16(f);
        if (got != h) tally_add(&exact, f2u(f), got, h);
    }
    CHECK_TALLY(exact, "f32_to_f16 of every f16 value (round trip)");

    /* midpoints between consecutive f16 values of the same sign; the last one
       (between 65504 and the would-be 65536) must round to inf */
    for (int neg = 0; neg < 2; neg++) {
        for (uint32_t h = 0; h < 0x7c00; h++) {
            double lo = ref_f16_to_f32((uint16_t)h);
            double hi = (h + 1 == 0x7c00) ? 65536.0 : ref_f16_to_f32((uint16_t)(h + 1));
            float mid = (float)((lo + hi) / 2); /* exact: needs 12 significant bits */
            if (neg) mid = -mid;
            uint16_t s = neg ? 0x8000 : 0;
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            uint16_t g = spmd_f32_to_f16(mid);
            if (g != (s | even)) tally_add(&ties, f2u(mid), g, s | even);
            float up = nextafterf(mid, neg ? -INFINITY : INFINITY);
            g = spmd_f32_to_f16(up);
            if (g != (s | (h + 1))) tally_add(&above, f2u(up), g, s | (h + 1));
            float dn = nextafterf(mid, 0.0f);
            g = spmd_f32_to_f16(dn);
            if (g != (s | h)) tally_add(&below, f2u(dn), g, s | h);
        }
    }
    CHECK_TALLY(ties, "f32_to_f16 of midpoints (ties to even)");
    CHECK_TALLY(above, "f32_to_f16 just above midpoints (round away)");
    CHECK_TALLY(below, "f32_to_f16 just below midpoints (round toward)");

    /* literal cases */
    expect16(0.0f, 0x0000, "+0");
    expect16(-0.0f, 0x8000, "-0");
    expect16(1.0f, 0x3c00, "1");
    expect16(-2.0f, 0xc000, "-2");
    expect16(65504.0f, 0x7bff, "max");
    expect16(65520.0f, 0x7c00, "65520 (tie above max)");
    expect16(-65520.0f, 0xfc00, "-65520");
    expect16(65519.99f, 0x7bff, "65519.99");
    expect16(65536.0f, 0x7c00, "65536");
    expect16(1e10f, 0x7c00, "1e10");
    expect16(FLT_MAX, 0x7c00, "FLT_MAX");
    expect16(-FLT_MAX, 0xfc00, "-FLT_MAX");
    expect16(INFINITY, 0x7c00, "inf");
    expect16(-INFINITY, 0xfc00, "-inf");
    expect16(0x1p-24f, 0x0001, "smallest subnormal");
    expect16(0x1p-25f, 0x0000, "half the smallest subnormal (tie to 0)");
    expect16(-0x1p-25f, 0x8000, "-half the smallest subnormal");
    expect16(nextafterf(0x1p-25f, 1.0f), 0x0001, "just above half the smallest subnormal");
    expect16(0x1.8p-24f, 0x0002, "1.5 x smallest subnormal (tie to even 2)");
    expect16(0x1.4p-24f, 0x0001, "1.25 x smallest subnormal");
    expect16(0x1p-30f, 0x0000, "2^-30");
    expect16(FLT_TRUE_MIN, 0x0000, "FLT_TRUE_MIN");
    expect16(-FLT_TRUE_MIN, 0x8000, "-FLT_TRUE_MIN");
    expect16(FLT_MIN, 0x0000, "FLT_MIN");
    expect16(0x1.ffcp-15f, 0x0400, "largest subnormal + half ulp (tie up to min normal)");
    expect16(0x1.ff8p-15f, 0x03ff, "largest subnormal");
    expect16(0x1p-14f, 0x0400, "min normal");
    expect16(1.0f + 0x1p-11f, 0x3c00, "1 + half ulp (tie to even 1)");
    expect16(1.0f + 0x3p-11f, 0x3c02, "1 + 1.5 ulp (tie to even)");
    expect16(0.1f, 0x2e66, "0.1");
    expect16(1.0f / 3.0f, 0x3555, "1/3");

    /* NaN: every f32 NaN must give a quiet f16 NaN, including payloads held
       only in the 13 low bits that the conversion drops */
    tally nan = {0};
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7f801fffu,
                                    0x7f802000u, 0x7fa00000u, 0x7fbfffffu, 0x7fffffffu, 0xffffffffu,
                                    0x7f800100u, 0x7fc00001u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) chk16(&nan, u2f(nans[i]));
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rng_next();
        u |= 0x7f800000u;
        if ((u & 0x007fffffu) == 0) u |= 1;
        chk16(&nan, u2f(u));
    }
    CHECK_TALLY(nan, "f32_to_f16 of NaN (must be a quiet f16 NaN)");

    /* random bit patterns: uniform over all floats, and concentrated on the
       exponents where f16 rounding happens (normal, subnormal, overflow) */
    tally rnd = {0}, rnd_range = {0};
    for (int i = 0; i < 2000000; i++) chk16(&rnd, u2f((uint32_t)rng_next()));
    for (int i = 0; i < 2000000; i++) {
        uint64_t r = rng_next();
        uint32_t e = 127 - 27 + (uint32_t)(r % 46); /* 2^-27 .. 2^18 */
        uint32_t u = ((uint32_t)(r >> 8) & 0x807fffffu) | (e << 23);
        chk16(&rnd_range, u2f(u));
    }
    CHECK_TALLY(rnd, "f32_to_f16 of random f32 bit patterns");
    CHECK_TALLY(rnd_range, "f32_to_f16 of random f32 in the f16 exponent range");
}

/* ---- bf16 ----------------------------------------------------------------- */
static void test_bf16_decode(void) {
    tally t = {0}, nan = {0};
    for (uint32_t h = 0; h < 65536; h++) {
        float got = spmd_bf16_to_f32((uint16_t)h);
        uint32_t exp = h << 16;
        if (bf16_isnan((uint16_t)h)) {
            /* exact, or at most quieted */
            if (!(isnan(got) && (f2u(got) == exp || f2u(got) == (exp | 0x00400000u))))
                tally_add(&nan, h, f2u(got), exp);
        } else if (f2u(got) != exp) {
            tally_add(&t, h, f2u(got), exp);
        }
    }
    T_CHECK(t.bad == 0, "bf16_to_f32 of every non-NaN bf16: %ld wrong; first 0x%04x -> 0x%08x, expected 0x%08x",
            t.bad, (unsigned)t.first_in, (unsigned)t.first_got, (unsigned)t.first_exp);
    T_CHECK(nan.bad == 0, "bf16_to_f32 of NaN: %ld wrong; first 0x%04x -> 0x%08x, expected 0x%08x",
            nan.bad, (unsigned)nan.first_in, (unsigned)nan.first_got, (unsigned)nan.first_exp);
}

static void test_bf16_encode(void) {
    tally exact = {0}, ties = {0}, above = {0}, below = {0};
    for (uint32_t h = 0; h < 65536; h++) {
        if (bf16_isnan((uint16_t)h)) continue;
        uint16_t got = spmd_f32_to_bf16(ref_bf16_to_f32((uint16_t)h));
        if (got != h) tally_add(&exact, h << 16, got, h);
    }
    CHECK_TALLY(exact, "f32_to_bf16 of every bf16 value (round trip)");

    for (int neg = 0; neg < 2; neg++) {
        for (uint32_t h = 0; h < 0x7f80; h++) {
            /* midpoint of h and h+1 is the f32 with bits (h << 16) | 0x8000,
               for the last one (0x7f7f) too: 0x7f7f8000 ties up to inf */
            uint32_t s = neg ? 0x8000u : 0;
            float mid = u2f((s << 16) | (h << 16) | 0x8000u);
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            uint16_t g = spmd_f32_to_bf16(mid);
            if (g != (s | even)) tally_add(&ties, f2u(mid), g, s | even);
            float up = u2f(f2u(mid) + 1);
            g = spmd_f32_to_bf16(up);
            if (g != (s | (h + 1))) tally_add(&above, f2u(up), g, s | (h + 1));
            float dn = u2f(f2u(mid) - 1);
            g = spmd_f32_to_bf16(dn);
            if (g != (s | h)) tally_add(&below, f2u(dn), g, s | h);
        }
    }
    CHECK_TALLY(ties, "f32_to_bf16 of midpoints (ties to even)");
    CHECK_TALLY(above, "f32_to_bf16 just above midpoints");
    CHECK_TALLY(below, "f32_to_bf16 just below midpoints");

    expectbf(0.0f, 0x0000, "+0");
    expectbf(-0.0f, 0x8000, "-0");
    expectbf(1.0f, 0x3f80, "1");
    expectbf(-3.0f, 0xc040, "-3");
    expectbf(0.1f, 0x3dcd, "0.1");
    expectbf(1.0f / 3.0f, 0x3eab, "1/3");
    expectbf(1.0f + 0x1p-8f, 0x3f80, "1 + half ulp (tie to even)");
    expectbf(1.0f + 0x3p-8f, 0x3f82, "1 + 1.5 ulp (tie to even)");
    expectbf(u2f(0x7f7f0000u), 0x7f7f, "max bf16");
    expectbf(u2f(0x7f7f8000u), 0x7f80, "tie above max (to inf)");
    expectbf(u2f(0x7f7f7fffu), 0x7f7f, "just below the tie above max");
    expectbf(FLT_MAX, 0x7f80, "FLT_MAX");
    expectbf(-FLT_MAX, 0xff80, "-FLT_MAX");
    expectbf(INFINITY, 0x7f80, "inf");
    expectbf(-INFINITY, 0xff80, "-inf");
    expectbf(FLT_TRUE_MIN, 0x0000, "FLT_TRUE_MIN");
    expectbf(u2f(0x00008000u), 0x0000, "half the smallest bf16 subnormal (tie to 0)");
    expectbf(u2f(0x00008001u), 0x0001, "just above half the smallest bf16 subnormal");
    expectbf(u2f(0x00018000u), 0x0002, "tie between subnormals 1 and 2");
    expectbf(u2f(0x007f8000u), 0x0080, "largest subnormal + half ulp (to min normal)");
    expectbf(FLT_MIN, 0x0080, "FLT_MIN");

    tally nan = {0};
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7f80ffffu,
                                    0x7f808000u, 0x7f807fffu, 0x7fa00000u, 0x7fbfffffu, 0x7fffffffu,
                                    0xffffffffu, 0x7fff8000u, 0xffff8000u, 0x7fc00001u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) chkbf(&nan, u2f(nans[i]));
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rng_next() | 0x7f800000u;
        if ((u & 0x007fffffu) == 0) u |= 1;
        chkbf(&nan, u2f(u));
    }
    CHECK_TALLY(nan, "f32_to_bf16 of NaN (must be a quiet bf16 NaN)");

    tally rnd = {0};
    for (int i = 0; i < 3000000; i++) chkbf(&rnd, u2f((uint32_t)rng_next()));
    CHECK_TALLY(rnd, "f32_to_bf16 of random f32 bit patterns");
}

/* The reference rounding itself must agree with a few values known from
   outside (so a wrong reference cannot hide a wrong library). */
/* ---- the kernels' conversions ------------------------------------------ */
typedef float (*dec_fn)(uint16_t);
typedef uint16_t (*enc_fn)(float);
static int half_isnan(int bf, uint16_t h) { return bf ? bf16_isnan(h) : f16_isnan(h); }
static int half_isquietnan(int bf, uint16_t h) { return bf ? bf16_isquietnan(h) : f16_isquietnan(h); }

/* The expected output of op over G inputs at element i, from the references. */
static uint16_t kernel_ref(int bf, spmd_op op, const uint16_t *const *in, int G, size_t i) {
    dec_fn dec = bf ? ref_bf16_to_f32 : ref_f16_to_f32;
    enc_fn enc = bf ? ref_f32_to_bf16 : ref_f32_to_f16;
    float acc = dec(in[0][i]);
    int j;
    for (j = 1; j < G; j++) {
        float x = dec(in[j][i]);
        if (op == SPMD_OP_MAX) acc = (acc > x || isnan(acc)) ? acc : x;
        else acc = acc + x;
    }
    if (op == SPMD_OP_MEAN) acc = acc / (float)G;
    return isnan(acc) ? 0xffff : enc(acc); /* 0xffff: any quiet NaN */
}

static void test_kernels(int bf) {
    const char *name = bf ? "bf16" : "f16";
    spmd_dtype dt = bf ? SPMD_BF16 : SPMD_F16;
    size_t n = 65536, i;
    uint16_t *x[3], *out = (uint16_t *)malloc(n * 2);
    tally t = {0, 0, 0, 0};
    const void *ins[3];
    int j, r;
    for (j = 0; j < 3; j++) x[j] = (uint16_t *)malloc(n * 2), ins[j] = x[j];
    /* every pattern, one input: decoded and encoded back unchanged */
    for (i = 0; i < n; i++) x[0][i] = (uint16_t)i;
    T_CHECK(spmd_reduce_local(out, ins, 1, n, dt, SPMD_OP_SUM) == SPMD_OK, "%s: reduce_local", name);
    for (i = 0; i < n; i++) {
        int ok = half_isnan(bf, (uint16_t)i) ? half_isquietnan(bf, out[i]) : out[i] == (uint16_t)i;
        if (!ok) tally_add(&t, (uint32_t)i, out[i], (uint32_t)i);
    }
    T_CHECK(t.bad == 0, "%s kernel round trip of every pattern: %ld wrong; first 0x%04x -> 0x%04x", name, t.bad,
            t.first_in, t.first_got);
    /* random pairs and triples, lengths ending anywhere in a block */
    for (r = 0; r < 200; r++) {
        static const spmd_op ops[3] = {SPMD_OP_SUM, SPMD_OP_MAX, SPMD_OP_MEAN};
        spmd_op op = ops[r % 3];
        int G = 2 + (r / 3) % 2;
        size_t len = r < 150 ? (size_t)(r % 50) + 1 : 4096 + (size_t)(r % 37);
        for (j = 0; j < G; j++)
            for (i = 0; i < len; i++) x[j][i] = (uint16_t)rng_next();
        memset(&t, 0, sizeof t);
        T_CHECK(spmd_reduce_local(out, ins, G, len, dt, op) == SPMD_OK, "%s: reduce_local", name);
        for (i = 0; i < len; i++) {
            uint16_t exp = kernel_ref(bf, op, (const uint16_t *const *)x, G, i);
            int ok = exp == 0xffff ? half_isquietnan(bf, out[i]) : out[i] == exp;
            if (!ok) tally_add(&t, ((uint32_t)x[0][i] << 16) | x[1][i], out[i], exp);
        }
        T_CHECK(t.bad == 0, "%s kernel %s of %d inputs, length %zu: %ld wrong; first inputs 0x%08x -> 0x%04x, expected 0x%04x",
                name, spmd_op_name(op), G, len, t.bad, t.first_in, t.first_got, t.first_exp);
    }
    for (j = 0; j < 3; j++) free(x[j]);
    free(out);
}

/* ---- fp8 (float8_e4m3fn, float8_e5m2) ------------------------------------ */
typedef struct {
    const char *name;
    spmd_dtype dt;
    float (*dec)(uint8_t);       /* the library's */
    uint8_t (*enc)(float);
    float (*rdec)(uint8_t);      /* the reference's (testlib.h) */
    uint8_t (*renc)(float);
} f8fmt;
static const f8fmt F8[2] = {
    {"f8e4m3fn", SPMD_F8E4M3FN, spmd_f8e4m3fn_to_f32, spmd_f32_to_f8e4m3fn, ref_f8e4m3fn_to_f32, ref_f32_to_f8e4m3fn},
    {"f8e5m2", SPMD_F8E5M2, spmd_f8e5m2_to_f32, spmd_f32_to_f8e5m2, ref_f8e5m2_to_f32, ref_f32_to_f8e5m2}};

/* a NaN the library gives must be quiet and keep its sign */
static int same_f32(float got, float exp) {
    if (isnan(exp)) return isnan(got) && (f2u(got) & 0x00400000u) && signbit(got) == signbit(exp);
    return f2u(got) == f2u(exp);
}

static void chk8(const f8fmt *f, tally *t, float x) {
    uint8_t got = f->enc(x), exp = f->renc(x);
    if (got != exp) tally_add(t, f2u(x), got, exp);
}

/* Every code decoded and encoded back; every midpoint between neighbours
   and the floats beside it; the edges named; random f32 bit patterns. */
static void test_fp8_codec(const f8fmt *f) {
    tally dec = {0}, back = {0}, mid = {0}, rnd = {0};
    for (int b = 0; b < 256; b++) {
        float got = f->dec((uint8_t)b), exp = f->rdec((uint8_t)b);
        if (!same_f32(got, exp)) tally_add(&dec, (uint32_t)b, f2u(got), f2u(exp));
        if (!isnan(exp) && f->enc(exp) != b) tally_add(&back, (uint32_t)b, f->enc(exp), (uint32_t)b);
    }
    CHECK_TALLY(dec, f->name);
    CHECK_TALLY(back, f->name);
    for (int s = 0; s < 2; s++)
        for (int b = 0; b < 0x7f; b++) { /* neighbours b, b + 1 of one sign, both finite */
            float lo = f->rdec((uint8_t)(b | s << 7)), hi = f->rdec((uint8_t)((b + 1) | s << 7));
            if (isnan(hi) || isinf(hi)) continue;
            float m = (float)(((double)lo + (double)hi) / 2); /* exact: 4 bits of mantissa */
            chk8(f, &mid, m);
            chk8(f, &mid, nextafterf(m, INFINITY));
            chk8(f, &mid, nextafterf(m, -INFINITY));
        }
    CHECK_TALLY(mid, f->name);
    for (int i = 0; i < 2000000; i++) chk8(f, &rnd, u2f((uint32_t)rng_next()));
    CHECK_TALLY(rnd, f->name);
}

/* Values known from outside (the formats' tables), for the references and
   the library alike: so a wrong reference cannot hide a wrong library. */
static void test_fp8_named(void) {
    static const struct { int e5; float x; uint8_t exp; const char *what; } v[] = {
        {0, 448.0f, 0x7e, "e4m3fn largest finite"}, {0, 464.0f, 0x7e, "e4m3fn 464: tie, to even 448"},
        {0, 464.00003f, 0x7f, "e4m3fn above 464: NaN"}, {0, 480.0f, 0x7f, "e4m3fn 480: NaN"},
        {0, -1e6f, 0xff, "e4m3fn -1e6: -NaN"}, {0, INFINITY, 0x7f, "e4m3fn inf: NaN"},
        {0, -INFINITY, 0xff, "e4m3fn -inf: -NaN"}, {0, NAN, 0x7f, "e4m3fn NaN"},
        {0, 0x1p-9f, 0x01, "e4m3fn smallest subnormal"}, {0, 0x1p-10f, 0x00, "e4m3fn half of it: tie to 0"},
        {0, 0x1.8p-9f, 0x02, "e4m3fn 1.5 steps: tie to 2"}, {0, 0.1f, 0x1d, "e4m3fn 0.1 (0.1015625)"},
        {0, -1.0f, 0xb8, "e4m3fn -1"}, {0, 0x1p-6f, 0x08, "e4m3fn smallest normal"},
        {1, 57344.0f, 0x7b, "e5m2 largest finite"}, {1, 61439.996f, 0x7b, "e5m2 below the tie above it"},
        {1, 61440.0f, 0x7c, "e5m2 61440: tie, to inf"}, {1, INFINITY, 0x7c, "e5m2 inf"},
        {1, -INFINITY, 0xfc, "e5m2 -inf"}, {1, NAN, 0x7e, "e5m2 NaN"}, {1, 0x1p-16f, 0x01, "e5m2 smallest subnormal"},
        {1, 0.1f, 0x2e, "e5m2 0.1 (0.09375)"}, {1, -1.0f, 0xbc, "e5m2 -1"}, {1, 0x1p-14f, 0x04, "e5m2 smallest normal"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const f8fmt *f = &F8[v[i].e5];
        T_CHECK(f->renc(v[i].x) == v[i].exp && f->enc(v[i].x) == v[i].exp, "%s: reference 0x%02x, library 0x%02x, "
                "expected 0x%02x", v[i].what, f->renc(v[i].x), f->enc(v[i].x), v[i].exp);
    }
    T_CHECK(ref_f8e4m3fn_to_f32(0x7e) == 448.0f && ref_f8e5m2_to_f32(0x7b) == 57344.0f &&
                ref_f8e4m3fn_to_f32(0x01) == 0x1p-9f && ref_f8e5m2_to_f32(0x83) == -0x3p-16f &&
                isnan(ref_f8e4m3fn_to_f32(0xff)) && isinf(ref_f8e5m2_to_f32(0x7c)) && isnan(ref_f8e5m2_to_f32(0x7d)),
            "reference fp8 decoding sanity");
}

/* The kernels (through f32, rounded once): every code through a group of
   one; random pairs and triples, sum, prod, max, min, mean; sums beyond the
   largest finite value. */
static uint8_t f8_kernel_ref(const f8fmt *f, spmd_op op, const uint8_t *const *in, int G, size_t i) {
    float acc = f->rdec(in[0][i]);
    for (int j = 1; j < G; j++) {
        float x = f->rdec(in[j][i]);
        if (op == SPMD_OP_MAX) acc = (acc > x || isnan(acc)) ? acc : x;
        else if (op == SPMD_OP_MIN) acc = (acc < x || isnan(acc)) ? acc : x;
        else if (op == SPMD_OP_PROD) acc = acc * x;
        else acc = acc + x;
    }
    if (op == SPMD_OP_MEAN) acc = acc / (float)G;
    return f->renc(acc);
}
static void test_fp8_kernels(const f8fmt *f) {
    size_t n = 4096 + 37, i;
    uint8_t *x[3], out[4096 + 37];
    const void *ins[3];
    tally t = {0};
    for (int j = 0; j < 3; j++) x[j] = (uint8_t *)malloc(n), ins[j] = x[j];
    for (i = 0; i < 256; i++) x[0][i] = (uint8_t)i;
    T_CHECK(spmd_reduce_local(out, ins, 1, 256, f->dt, SPMD_OP_SUM) == SPMD_OK, "%s: reduce_local", f->name);
    for (i = 0; i < 256; i++)
        if (out[i] != f->renc(f->rdec((uint8_t)i))) tally_add(&t, (uint32_t)i, out[i], f->renc(f->rdec((uint8_t)i)));
    CHECK_TALLY(t, f->name);
    for (int r = 0; r < 250; r++) {
        static const spmd_op ops[5] = {SPMD_OP_SUM, SPMD_OP_PROD, SPMD_OP_MAX, SPMD_OP_MIN, SPMD_OP_MEAN};
        spmd_op op = ops[r % 5];
        int G = 2 + (r / 5) % 2;
        size_t len = r < 200 ? (size_t)(r % 50) + 1 : n - (size_t)(r % 37);
        for (int j = 0; j < G; j++)
            for (i = 0; i < len; i++) x[j][i] = (uint8_t)rng_next();
        memset(&t, 0, sizeof t);
        T_CHECK(spmd_reduce_local(out, ins, G, len, f->dt, op) == SPMD_OK, "%s: reduce_local", f->name);
        for (i = 0; i < len; i++) {
            uint8_t exp = f8_kernel_ref(f, op, (const uint8_t *const *)x, G, i);
            /* NaN: any NaN (which operand's sign a NaN result keeps is the
               compiler's choice: it may swap a product's operands) */
            if (out[i] != exp && !(isnan(f->rdec(out[i])) && isnan(f->rdec(exp)))) tally_add(&t, (uint32_t)x[0][i] << 16 | (uint32_t)x[1][i] << 8 | x[G - 1][i], out[i], exp);
        }
        T_CHECK(t.bad == 0, "%s kernel %s of %d inputs, length %zu: %ld wrong; first inputs 0x%06x -> 0x%02x, "
                "expected 0x%02x", f->name, spmd_op_name(op), G, len, t.bad, t.first_in, t.first_got, t.first_exp);
    }
    /* beyond the largest finite value: e4m3fn 448 + 448 is NaN, 448 + 16 =
       464 is 448 (the tie); e5m2 57344 + 57344 is inf */
    x[0][0] = f->enc(f == &F8[0] ? 448.0f : 57344.0f), x[1][0] = x[0][0];
    x[0][1] = f->enc(f == &F8[0] ? -448.0f : -57344.0f), x[1][1] = x[0][1];
    x[0][2] = f->enc(f == &F8[0] ? 448.0f : 57344.0f), x[1][2] = f->enc(f == &F8[0] ? 16.0f : 4096.0f);
    T_CHECK(spmd_reduce_local(out, ins, 2, 3, f->dt, SPMD_OP_SUM) == SPMD_OK &&
                out[0] == (f == &F8[0] ? 0x7f : 0x7c) && out[1] == (f == &F8[0] ? 0xff : 0xfc) &&
                out[2] == (f == &F8[0] ? 0x7e : 0x7c),
            "%s: sums past the largest finite value: 0x%02x 0x%02x 0x%02x", f->name, out[0], out[1], out[2]);
    for (int j = 0; j < 3; j++) free(x[j]);
}

/* ---- complex64 and complex128 ------------------------------------------- */
/* random parts: moderate exponents (prod: near 1), now and then NaN, inf,
   a subnormal or the largest finite value */
static double cpart(int c128, int prod) {
    uint64_t x = rng_next();
    unsigned sel = (unsigned)(x & 255);
    double v = ldexp((double)((x >> 8) & 0xffffff) / 0x1p24 + (prod ? 0.5 : 0.0), prod ? 0 : (int)((x >> 40) % 12) - 6);
    if (x >> 63) v = -v;
    if (sel == 0) return NAN;
    if (sel == 1) return x >> 62 & 1 ? -INFINITY : INFINITY;
    if (sel == 2) return c128 ? 0x1p-1070 : (double)0x1p-140f;
    if (sel == 3) return c128 ? 1.7976931348623157e308 : (double)FLT_MAX;
    return v;
}
static void test_complex_kernels(int c128) {
    const char *name = c128 ? "c128" : "c64";
    spmd_dtype dt = c128 ? SPMD_C128 : SPMD_C64;
    size_t es = c128 ? 16 : 8;
    enum { MAXG = 9, MAXN = 300 };
    unsigned char *x[MAXG], *out = (unsigned char *)malloc(MAXN * 16);
    const void *ins[MAXG];
    for (int j = 0; j < MAXG; j++) x[j] = (unsigned char *)malloc(MAXN * 16), ins[j] = x[j];
    for (int r = 0; r < 120; r++) {
        static const spmd_op ops[3] = {SPMD_OP_SUM, SPMD_OP_PROD, SPMD_OP_MEAN};
        spmd_op op = ops[r % 3];
        int G = 1 + (r / 3) % MAXG;
        size_t len = 1 + (size_t)(rng_next() % MAXN), bad = 0, first = 0;
        for (int j = 0; j < G; j++)
            for (size_t i = 0; i < 2 * len; i++) {
                double v = cpart(c128, op == SPMD_OP_PROD);
                if (c128) memcpy(x[j] + 8 * i, &v, 8);
                else { float f = (float)v; memcpy(x[j] + 4 * i, &f, 4); }
            }
        T_CHECK(spmd_reduce_local(out, ins, G, len, dt, op) == SPMD_OK, "%s: reduce_local %s", name, spmd_op_name(op));
        for (size_t i = 0; i < len; i++) {
            unsigned char exp[16];
            if (c128) {
                double xs[2 * MAXG], o[2];
                for (int j = 0; j < G; j++) memcpy(xs + 2 * j, x[j] + i * es, 16);
                tl_ctree_c128(xs, G, op == SPMD_OP_PROD, o);
                if (op == SPMD_OP_MEAN) o[0] /= G, o[1] /= G;
                memcpy(exp, o, 16);
            } else {
                float xs[2 * MAXG], o[2];
                for (int j = 0; j < G; j++) memcpy(xs + 2 * j, x[j] + i * es, 8);
                tl_ctree_c64(xs, G, op == SPMD_OP_PROD, o);
                if (op == SPMD_OP_MEAN) o[0] /= (float)G, o[1] /= (float)G;
                memcpy(exp, o, 8);
            }
            int ok = 1;
            for (int p = 0; p < 2; p++) { /* each part: the same bits, or both NaN */
                double a, b;
                if (c128) memcpy(&a, out + i * es + 8 * p, 8), memcpy(&b, exp + 8 * p, 8);
                else { float fa, fb; memcpy(&fa, out + i * es + 4 * p, 4), memcpy(&fb, exp + 4 * p, 4); a = fa, b = fb; }
                if (!(isnan(a) && isnan(b)) && memcmp(out + i * es + (es / 2) * p, exp + (es / 2) * p, es / 2) != 0) ok = 0;
            }
            if (!ok && bad++ == 0) first = i;
        }
        T_CHECK(bad == 0, "%s kernel %s of %d inputs, length %zu: %zu wrong, first at %zu", name, spmd_op_name(op), G,
                len, bad, first);
    }
    /* no order: max, min, argmax, argmin refused */
    for (int op = SPMD_OP_MAX; op <= SPMD_OP_ARGMIN; op++) {
        if (op == SPMD_OP_MEAN) continue;
        T_CHECK(spmd_reduce_local(out, ins, 2, 4, dt, (spmd_op)op) == SPMD_ERR_DTYPE, "%s %s refused", name,
                spmd_op_name((spmd_op)op));
    }
    for (int j = 0; j < MAXG; j++) free(x[j]);
    free(out);
}

static void test_reference_sanity(void) {
    T_CHECK(ref_f32_to_f16(65520.0f) == 0x7c00 && ref_f32_to_f16(65519.99f) == 0x7bff &&
                ref_f32_to_f16(0.1f) == 0x2e66 && ref_f32_to_f16(0x1p-25f) == 0 &&
                ref_f32_to_f16(0x1.8p-24f) == 2 && ref_f32_to_f16(-1.0f) == 0xbc00,
            "reference f16 rounding sanity");
    T_CHECK(ref_f32_to_bf16(0.1f) == 0x3dcd && ref_f32_to_bf16(u2f(0x7f7f8000u)) == 0x7f80 &&
                ref_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80 && ref_f32_to_bf16(u2f(0x00018000u)) == 2,
            "reference bf16 rounding sanity");
    T_CHECK(ref_f16_to_f32(0x3555) == 0x1.554p-2f && ref_f16_to_f32(0x8001) == -0x1p-24f,
            "reference f16 decoding sanity");
}

int main(void) {
    uint64_t seed = env_seed(0x5eed16f16ull);
    rng_state = seed;
    printf("test_f16: seed %llu\n", (unsigned long long)seed);
    fflush(stdout);

    test_reference_sanity();
    test_f16_decode();
    test_f16_encode();
    test_bf16_decode();
    test_bf16_encode();
    test_kernels(0);
    test_kernels(1);
    test_fp8_named();
    for (int f = 0; f < 2; f++) {
        test_fp8_codec(&F8[f]);
        test_fp8_kernels(&F8[f]);
    }
    test_complex_kernels(0);
    test_complex_kernels(1);
    return t_summary();
}
