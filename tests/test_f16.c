/* test_f16.c - the scalar conversions spmd_f16_to_f32, spmd_f32_to_f16,
   spmd_bf16_to_f32 and spmd_f32_to_bf16 against the plain references of
   testlib.h (ldexp for decoding, double arithmetic with explicit tie
   handling for rounding to nearest even).

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
    return t_summary();
}
