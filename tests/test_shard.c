/* test_shard.c - PartitionSpecs, device_put/assemble, sharding pictures,
   shard_map, resharding and its cost model.

   Every result is compared with a plain reference written here: loops over
   the global array with the block index arithmetic spelled out (mesh
   coordinates, row-major; a dimension's block index is its axes'
   coordinates linearised major first). The reshard sweep tries every pair
   of specs (sharded, replicated, partial, and both axis orders) over a (2,2)
   and a (2,3) mesh on 1-D to 3-D arrays, every dtype in turn: each device
   builds the from-blocks out of random global arrays (one per combination of
   the partial axes' coordinates, the summands), reshards, and compares with
   the global sum re-sharded by the reference. The tutorial's numbers are
   recomputed through shard_map and compared with its published values.

   Env: SPMD_TEST_SEED=n replaces the seed; SPMD_TEST_QUICK=1 runs a subset
   of the sweeps (sanitizer builds). */
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

#define RNG_SALT 0x3C6EF372FE94F82Bull
static uint64_t SEED;
static int QUICK;

/* ---- reference model ------------------------------------------------------------ */
typedef struct {
    int nd, sh[3];
    const char *nm[3];
} tmesh;

typedef struct {
    int rank;
    int n[SPMD_MAX_RANK], ax[SPMD_MAX_RANK][3];
    int np, pax[3];
} tspec;

static int tm_size(const tmesh *m) {
    int s = 1;
    for (int i = 0; i < m->nd; i++) s *= m->sh[i];
    return s;
}
static void tm_coords(const tmesh *m, int dev, int *c) {
    for (int i = m->nd - 1; i >= 0; i--) { c[i] = dev % m->sh[i]; dev /= m->sh[i]; }
}
static int64_t ts_parts(const tmesh *m, const tspec *s, int i) {
    int64_t p = 1;
    for (int k = 0; k < s->n[i]; k++) p *= m->sh[s->ax[i][k]];
    return p;
}
static int64_t ts_index(const tmesh *m, const tspec *s, int i, const int *c) {
    int64_t v = 0;
    for (int k = 0; k < s->n[i]; k++) v = v * m->sh[s->ax[i][k]] + c[s->ax[i][k]];
    return v;
}
static int ts_is_partial(const tspec *s, int a) {
    for (int k = 0; k < s->np; k++)
        if (s->pax[k] == a) return 1;
    return 0;
}
/* the spmd_spec, through spmd_spec_init */
static spmd_spec ts_make(const tmesh *m, const tspec *s) {
    char dims[SPMD_MAX_RANK][64], part[64];
    const char *dp[SPMD_MAX_RANK];
    spmd_spec out;
    for (int i = 0; i < s->rank; i++) {
        dims[i][0] = 0;
        for (int k = 0; k < s->n[i]; k++) {
            strcat(dims[i], k ? "," : "");
            strcat(dims[i], m->nm[s->ax[i][k]]);
        }
        dp[i] = s->n[i] ? dims[i] : NULL;
    }
    part[0] = 0;
    for (int k = 0; k < s->np; k++) {
        strcat(part, k ? "," : "");
        strcat(part, m->nm[s->pax[k]]);
    }
    spmd_status st = spmd_spec_init(&out, s->rank, dp, s->np ? part : NULL, NULL);
    if (st != SPMD_OK) T_CHECK(0, "spec_init: %s", stname(st));
    return out;
}
static void ts_text(const tmesh *m, const tspec *s, char *b, size_t cap) {
    spmd_spec sp = ts_make(m, s);
    spmd_spec_format(&sp, b, cap);
}

/* values: small integers, exact in every dtype (sums of a few stay exact) */
static void setv(spmd_dtype t, void *p, double v) {
    switch (t) {
    case SPMD_BOOL: *(uint8_t *)p = v != 0; break;
    case SPMD_I8: *(int8_t *)p = (int8_t)v; break;
    case SPMD_U8: *(uint8_t *)p = (uint8_t)v; break;
    case SPMD_I16: *(int16_t *)p = (int16_t)v; break;
    case SPMD_U16: *(uint16_t *)p = (uint16_t)v; break;
    case SPMD_I32: *(int32_t *)p = (int32_t)v; break;
    case SPMD_U32: *(uint32_t *)p = (uint32_t)v; break;
    case SPMD_I64: *(int64_t *)p = (int64_t)v; break;
    case SPMD_U64: *(uint64_t *)p = (uint64_t)v; break;
    case SPMD_F16: { uint16_t h = ref_f32_to_f16((float)v); memcpy(p, &h, 2); } break;
    case SPMD_BF16: { uint16_t h = ref_f32_to_bf16((float)v); memcpy(p, &h, 2); } break;
    case SPMD_F32: *(float *)p = (float)v; break;
    case SPMD_F64: *(double *)p = v; break;
    case SPMD_C64: { float z[2] = {(float)v, (float)(2 * v)}; memcpy(p, z, 8); } break; /* (v, 2v): linear, as sums need */
    case SPMD_C128: { double z[2] = {v, 2 * v}; memcpy(p, z, 16); } break;
    case SPMD_F8E4M3FN: case SPMD_F8E5M2: *(uint8_t *)p = tl_f32_to_fp8(t, (float)v); break;
    default: break;
    }
}

static size_t numel(const int64_t *sh, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= (size_t)sh[i];
    return n;
}

/* device dev's block of global g (shape gs) under s, by plain loops */
static void ref_block(const tmesh *m, const tspec *s, const unsigned char *g, const int64_t *gs, size_t es, int dev,
                      unsigned char *blk) {
    int c[3], r = s->rank;
    int64_t bs[SPMD_MAX_RANK], st[SPMD_MAX_RANK], e[SPMD_MAX_RANK];
    tm_coords(m, dev, c);
    for (int i = 0; i < r; i++) {
        bs[i] = gs[i] / ts_parts(m, s, i);
        st[i] = ts_index(m, s, i, c) * bs[i];
        e[i] = 0;
    }
    size_t n = numel(bs, r);
    for (size_t q = 0; q < n; q++) {
        int64_t gi = 0;
        for (int i = 0; i < r; i++) gi = gi * gs[i] + st[i] + e[i];
        memcpy(blk + q * es, g + (size_t)gi * es, es);
        for (int i = r - 1; i >= 0 && ++e[i] == bs[i]; i--) e[i] = 0;
    }
}

/* ---- spec parsing, printing, checking -------------------------------------------- */
static void test_specs(void) {
    static const char *rt[][2] = {
        {"P('row', None)", "P('row', None)"},
        {"P(('x','y'), None)", "P(('x', 'y'), None)"},
        {"P()", "P()"},
        {"  PartitionSpec( \"a\" ,b , ) ", "P('a', 'b')"},
        {"P(None, ('x',), ())", "P(None, 'x', None)"},
        {"P('x', partial='y')", "P('x', partial='y')"},
        {"P(None, unreduced={'y', 'z'})", "P(None, partial=('y', 'z'))"},
        {"P(partial=('y','z'))", "P(partial=('y', 'z'))"},
        {"P(a,b,c,d,e,f,g,h)", "P('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h')"},
    };
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        spmd_spec s, s2;
        spmd_msg w;
        char b[256];
        spmd_status st = spmd_spec_parse(rt[i][0], &s, &w);
        int n = spmd_spec_format(&s, b, sizeof b);
        T_CHECK(st == SPMD_OK && strcmp(b, rt[i][1]) == 0 && n == (int)strlen(b) && w.text[0] == 0,
                "parse %s: %s -> %s (%s)", rt[i][0], stname(st), b, w.text);
        st = spmd_spec_parse(b, &s2, NULL);
        T_CHECK(st == SPMD_OK && memcmp(&s, &s2, sizeof s) == 0, "round trip of %s", b);
        char small[6];
        n = spmd_spec_format(&s, small, sizeof small);
        size_t want = strlen(rt[i][1]) < sizeof small - 1 ? strlen(rt[i][1]) : sizeof small - 1;
        T_CHECK(n == (int)strlen(rt[i][1]) && strlen(small) == want, "format into 6 bytes: %d", n);
    }
    static const struct { const char *t; spmd_status s; const char *has; } bad[] = {
        {"P('x', 'x')", SPMD_ERR_DUP_AXIS, "'x' appears twice"},
        {"P(('x','y'), 'y')", SPMD_ERR_DUP_AXIS, "'y'"},
        {"P('x', partial='x')", SPMD_ERR_DUP_AXIS, "'x'"},
        {"P('x'", SPMD_ERR_INVALID, "expected"},
        {"Q('x')", SPMD_ERR_INVALID, "P("},
        {"P('x') y", SPMD_ERR_INVALID, "after ')'"},
        {"P('x)", SPMD_ERR_INVALID, "quote"},
        {"P('')", SPMD_ERR_INVALID, "0 characters"},
        {"P('abcdefghijabcdefghijabcdefghijab')", SPMD_ERR_INVALID, "32 characters"},
        {"P((None, 'x'))", SPMD_ERR_INVALID, "None inside"},
        {"P(a,b,c,d,e,f,g,h,i)", SPMD_ERR_INVALID, "more than 8"},
        {"P(partial='y', 'x')", SPMD_ERR_INVALID, "after the partial"},
        {"P(partial 'y')", SPMD_ERR_INVALID, "'='"},
        {"P(x y)", SPMD_ERR_INVALID, "offset 4"},
        {"P(,)", SPMD_ERR_INVALID, "expected an axis"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spmd_spec s;
        spmd_msg w;
        spmd_status st = spmd_spec_parse(bad[i].t, &s, &w);
        T_CHECK(st == bad[i].s && strstr(w.text, bad[i].has), "parse %s: %s (%s), want %s with \"%s\"", bad[i].t,
                stname(st), w.text, stname(bad[i].s), bad[i].has);
    }
    {
        spmd_spec s;
        spmd_msg w;
        T_CHECK(spmd_spec_parse(NULL, &s, &w) == SPMD_ERR_NULL, "parse NULL");
        T_CHECK(spmd_spec_parse("P()", NULL, NULL) == SPMD_ERR_NULL, "parse into NULL");
        const char *dims[3] = {"x, y", NULL, ""};
        spmd_status st = spmd_spec_init(&s, 3, dims, "z", &w);
        char b[128];
        spmd_spec_format(&s, b, sizeof b);
        T_CHECK(st == SPMD_OK && strcmp(b, "P(('x', 'y'), None, None, partial='z')") == 0, "spec_init: %s %s",
                stname(st), b);
        const char *d2[1] = {"x,,y"};
        T_CHECK(spmd_spec_init(&s, 1, d2, NULL, &w) == SPMD_ERR_INVALID, "spec_init empty name");
        const char *d3[2] = {"x", "y,x"};
        T_CHECK(spmd_spec_init(&s, 2, d3, NULL, &w) == SPMD_ERR_DUP_AXIS && strstr(w.text, "'x'"), "spec_init dup: %s",
                w.text);
        T_CHECK(spmd_spec_init(&s, 9, d3, NULL, &w) == SPMD_ERR_INVALID, "spec_init rank 9");
        T_CHECK(spmd_spec_init(&s, 1, NULL, NULL, &w) == SPMD_ERR_NULL, "spec_init dims NULL");
        T_CHECK(spmd_spec_init(&s, 0, NULL, NULL, NULL) == SPMD_OK && s.rank == 0, "spec_init P()");
        spmd_spec junk;
        memset(&junk, 0, sizeof junk);
        junk.rank = 1;
        junk.naxes[0] = 1; /* empty name */
        T_CHECK(spmd_spec_format(&junk, b, sizeof b) == -1 && b[0] == 0, "format of an invalid spec");
        T_CHECK(spmd_spec_format(NULL, b, sizeof b) == -1, "format NULL");
        strcpy(junk.axes[0][0], "a'b"); /* a quote: its text could not be read back */
        T_CHECK(spmd_spec_format(&junk, b, sizeof b) == -1, "format of a name with a quote");
        /* a failed parse or init leaves *out as it was */
        spmd_spec keep, before;
        spmd_spec_parse("P('x', partial='y')", &keep, NULL);
        before = keep;
        static const char *fails[] = {"P('x'", "P(\"a'b\")", "P('a b')", "P('x,y')", "P('*')",
                                      "P(partial=(), partial='x')", "P(partial={}, 'x')", "P('x', 'x')"};
        for (size_t i = 0; i < sizeof fails / sizeof fails[0]; i++) {
            spmd_status st2 = spmd_spec_parse(fails[i], &keep, &w);
            T_CHECK(st2 != SPMD_OK && w.text[0] && memcmp(&keep, &before, sizeof keep) == 0,
                    "failed parse of %s: %s (%s), out untouched", fails[i], stname(st2), w.text);
        }
        const char *d4[2] = {"x", "x"};
        T_CHECK(spmd_spec_init(&keep, 2, d4, NULL, NULL) == SPMD_ERR_DUP_AXIS && memcmp(&keep, &before, sizeof keep) == 0,
                "failed spec_init leaves out untouched");
        const char *d5[1] = {"a*b"};
        T_CHECK(spmd_spec_init(&keep, 1, d5, NULL, &w) == SPMD_ERR_INVALID && memcmp(&keep, &before, sizeof keep) == 0,
                "spec_init name with '*': %s", w.text);
        T_CHECK(spmd_spec_init(&keep, -1, NULL, NULL, &w) == SPMD_ERR_INVALID, "spec_init rank -1");
        T_CHECK(spmd_spec_init(NULL, 0, NULL, NULL, &w) == SPMD_ERR_NULL, "spec_init NULL out");
        /* needed length with no buffer, like snprintf */
        T_CHECK(spmd_spec_format(&before, NULL, 0) == (int)strlen("P('x', partial='y')"), "format length query");
    }
    /* against a mesh */
    spmd_mesh *m;
    const char *names[2] = {"row", "col"};
    int sh[2] = {4, 2};
    spmd_status ms = create_named_mesh(2, sh, names, 30000, SPMD_CHECK_DEFAULT, SPMD_LOG_OFF, &m);
    if (ms != SPMD_OK) {
        T_CHECK(0, "mesh_create: %s (%s)", stname(ms), tl_last_error());
        return;
    }
    static const struct { const char *t; int rank; int64_t g[3]; spmd_status s; const char *has; } chk[] = {
        {"P('row', 'col')", 2, {8, 16}, SPMD_OK, ""},
        {"P(('row', 'col'))", 1, {8}, SPMD_OK, ""},
        {"P('row')", 3, {4, 3, 5}, SPMD_OK, ""},
        {"P('rows')", 1, {8}, SPMD_ERR_AXIS, "unknown axis 'rows'"},
        {"P(None, partial='x')", 1, {8}, SPMD_ERR_AXIS, "unknown axis 'x'"},
        {"P('row', None, None)", 2, {8, 8}, SPMD_ERR_SHAPE, "3 entries but the array has rank 2"},
        {"P('row', 'col')", 2, {6, 16}, SPMD_ERR_SHAPE, "dimension 0 of size 6 is not divisible by 4 (axes row=4)"},
        {"P(None, ('row','col'))", 2, {6, 12}, SPMD_ERR_SHAPE, "not divisible by 8 (axes row=4*col=2)"},
        {"P('row')", 1, {-4}, SPMD_ERR_SHAPE, "negative"},
        {"P('row')", 9, {4}, SPMD_ERR_INVALID, "rank 9"},
    };
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++) {
        spmd_spec s;
        spmd_msg w;
        spmd_spec_parse(chk[i].t, &s, NULL);
        spmd_status st = spmd_spec_check(m, &s, chk[i].rank, chk[i].g, &w);
        T_CHECK(st == chk[i].s && strstr(w.text, chk[i].has), "check %s: %s (%s)", chk[i].t, stname(st), w.text);
        int64_t bs[3];
        st = spmd_block_shape(m, &s, chk[i].rank, chk[i].g, bs, &w);
        T_CHECK(st == chk[i].s, "block_shape %s: %s", chk[i].t, stname(st));
    }
    {
        spmd_spec s;
        spmd_msg w;
        int64_t g[2] = {8, 16}, bs[2], st0[2];
        spmd_spec_parse("P('row', 'col')", &s, NULL);
        T_CHECK(spmd_spec_check(NULL, &s, 2, g, &w) == SPMD_ERR_NULL, "check NULL mesh");
        T_CHECK(spmd_spec_check(m, NULL, 2, g, &w) == SPMD_ERR_NULL, "check NULL spec");
        T_CHECK(spmd_spec_check(m, &s, 2, NULL, &w) == SPMD_ERR_NULL, "check NULL shape");
        T_CHECK(spmd_block_shape(m, &s, 2, g, bs, NULL) == SPMD_OK && bs[0] == 2 && bs[1] == 8, "block (2,8)");
        T_CHECK(spmd_block_start(m, &s, 2, g, 5, st0, NULL) == SPMD_OK && st0[0] == 4 && st0[1] == 8,
                "device 5 starts at (4,8): %lld %lld", (long long)st0[0], (long long)st0[1]);
        T_CHECK(spmd_block_start(m, &s, 2, g, 8, st0, &w) == SPMD_ERR_INVALID, "block_start device 8");
        T_CHECK(spmd_block_shape(m, &s, 2, g, NULL, &w) == SPMD_ERR_NULL, "block_shape NULL out");
    }
    spmd_mesh_destroy(m);
}

/* ---- random specs ------------------------------------------------------------------- */
/* every axis: not used, partial (if allowed), or on a random dimension; order shuffled */
static tspec rand_spec(const tmesh *m, int rank, int allow_partial, rng_t *r) {
    tspec s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    int order[3] = {0, 1, 2};
    for (int k = m->nd - 1; k > 0; k--) {
        int j = rb(r, k + 1), t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    for (int q = 0; q < m->nd; q++) {
        int a = order[q], pick = rb(r, rank + 1 + allow_partial);
        if (pick < rank) s.ax[pick][s.n[pick]++] = a;
        else if (pick == rank + 1) s.pax[s.np++] = a;
    }
    if (rank > 0 && rb(r, 4) == 0) s.rank = rb(r, rank + 1); /* a shorter spec: the rest None */
    for (int i = s.rank; i < rank; i++) s.n[i] = 0;
    return s;
}
/* a global shape divisible under s, with numel <= cap */
static void rand_shape(const tmesh *m, const tspec *s, int rank, int64_t *g, size_t cap, rng_t *r) {
    for (;;) {
        size_t n = 1;
        for (int i = 0; i < rank; i++) {
            int64_t p = i < s->rank ? ts_parts(m, s, i) : 1;
            g[i] = p * (rank > 4 ? 1 + rb(r, 2) : rb(r, 8) == 0 ? 0 : 1 + rb(r, 3));
            n *= (size_t)g[i];
        }
        if (n <= cap) return;
    }
}

static const tmesh MESHES[] = {
    {1, {1}, {"i"}},           {1, {3}, {"i"}},           {1, {4}, {"i"}},
    {2, {2, 2}, {"x", "y"}},   {2, {2, 3}, {"x", "y"}},   {2, {4, 2}, {"row", "col"}},
    {3, {2, 1, 3}, {"a", "b", "c"}}, {3, {2, 2, 2}, {"a", "b", "c"}},
};
#define NMESHES ((int)(sizeof MESHES / sizeof MESHES[0]))

static spmd_mesh *make_mesh(const tmesh *t, spmd_check check) {
    spmd_mesh *m = NULL;
    spmd_status s = create_named_mesh(t->nd, t->sh, t->nm, 30000, check, SPMD_LOG_OFF, &m);
    T_CHECK(s == SPMD_OK, "mesh_create: %s (%s)", stname(s), tl_last_error());
    return s == SPMD_OK ? m : NULL;
}

/* ---- device_put, assemble, block shapes: random cases ---------------------------------- */
static void test_put_assemble(void) {
    rng_t r = rng_make(SEED, RNG_SALT, 1);
    int cases = QUICK ? 60 : 400, bad = 0;
    for (int c = 0; c < cases; c++) {
        const tmesh *tm = &MESHES[rb(&r, NMESHES)];
        int check = c % 2;
        spmd_mesh *m = make_mesh(tm, check ? SPMD_CHECK_ON : SPMD_CHECK_OFF);
        if (!m) return;
        int rank = rb(&r, 9), D = tm_size(tm);
        spmd_dtype dt = DTYPES[c % NDT];
        size_t es = dsize(dt);
        tspec ts = rand_spec(tm, rank, 1, &r);
        int64_t g[SPMD_MAX_RANK], bs[SPMD_MAX_RANK], st[SPMD_MAX_RANK];
        rand_shape(tm, &ts, rank, g, 4096, &r);
        spmd_spec sp = ts_make(tm, &ts);
        char stext[200];
        spmd_spec_format(&sp, stext, sizeof stext);
        size_t ng = numel(g, rank);
        unsigned char *G = (unsigned char *)xmalloc(ng * es), *G2 = (unsigned char *)xmalloc(ng * es + 1);
        /* partial specs sum: small integers; otherwise any bits */
        for (size_t q = 0; q < ng; q++) {
            if (ts.np) setv(dt, G + q * es, (double)rb(&r, 5));
            else for (size_t b = 0; b < es; b++) G[q * es + b] = (unsigned char)rn(&r);
        }
        spmd_status s = spmd_block_shape(m, &sp, rank, g, bs, NULL);
        int ok = s == SPMD_OK;
        for (int i = 0; i < rank && ok; i++) ok = bs[i] == g[i] / (i < ts.rank ? ts_parts(tm, &ts, i) : 1);
        size_t nb = numel(bs, rank);
        unsigned char **blk = (unsigned char **)xmalloc((size_t)D * sizeof *blk);
        unsigned char *ref = (unsigned char *)xmalloc(nb * es + 1);
        tspec full = ts;
        full.rank = rank;
        for (int d = 0; d < D && ok; d++) {
            blk[d] = (unsigned char *)xmalloc(nb * es + 1);
            spmd_array ga = spmd_array_nd(G, dt, rank, g), ba = spmd_array_nd(blk[d], dt, rank, bs);
            s = spmd_device_put(m, &sp, &ga, d, &ba, NULL);
            int cc[3];
            tm_coords(tm, d, cc);
            int zero = 0;
            for (int k = 0; k < ts.np; k++) zero |= cc[ts.pax[k]] != 0;
            ref_block(tm, &full, G, g, es, d, ref);
            if (zero) memset(ref, 0, nb * es);
            ok = s == SPMD_OK && memcmp(ref, blk[d], nb * es) == 0;
            spmd_block_start(m, &sp, rank, g, d, st, NULL);
            for (int i = 0; i < rank && ok; i++)
                ok = st[i] == ts_index(tm, &full, i, cc) * bs[i];
            if (!ok) { for (int e = d + 1; e < D; e++) blk[e] = NULL; for (int e = 0; e <= d; e++) free(blk[e]); }
        }
        if (ok) {
            spmd_array ga2 = spmd_array_nd(G2, dt, rank, g);
            memset(G2, 0xAB, ng * es);
            s = spmd_assemble(m, &sp, (const void *const *)blk, &ga2, NULL);
            ok = s == SPMD_OK && memcmp(G, G2, ng * es) == 0;
            /* tamper with one copy: found in check mode, ignored otherwise */
            int all = (1 << tm->nd) - 1, used = 0;
            for (int i = 0; i < ts.rank; i++)
                for (int k = 0; k < ts.n[i]; k++) used |= 1 << ts.ax[i][k];
            for (int k = 0; k < ts.np; k++) used |= 1 << ts.pax[k];
            int U = all & ~used, victim = -1;
            for (int d = 0; d < D && ok && U && nb; d++) {
                int cc[3];
                tm_coords(tm, d, cc);
                int nz = 0;
                for (int a = 0; a < tm->nd; a++) nz |= ((U >> a) & 1) && cc[a];
                if (nz && tm->sh[0] * 0 == 0 && rb(&r, 2)) { victim = d; break; }
            }
            if (ok && victim >= 0) {
                size_t at = (size_t)rb(&r, (int)nb) * es;
                blk[victim][at] ^= 0x5A;
                spmd_msg w;
                char want[32];
                snprintf(want, sizeof want, "device %d (", victim);
                memset(G2, 0xAB, ng * es);
                s = spmd_assemble(m, &sp, (const void *const *)blk, &ga2, &w);
                if (check) ok = s == SPMD_ERR_MISMATCH && strstr(w.text, want) && strstr(w.text, "claims replication");
                else ok = s == SPMD_OK && memcmp(G, G2, ng * es) == 0;
                if (!ok) fprintf(stderr, "tamper %d: %s %s\n", victim, stname(s), w.text);
            }
            for (int d = 0; d < D; d++) free(blk[d]);
        }
        if (!ok && bad++ < 5) T_CHECK(0, "put/assemble case %d: %s rank %d dtype %s: %s", c, stext, rank, dnm(dt), stname(s));
        free(blk);
        free(ref);
        free(G);
        free(G2);
        spmd_mesh_destroy(m);
    }
    T_CHECK(bad == 0, "%d of %d device_put/assemble cases failed", bad, cases);
    /* errors */
    spmd_mesh *m = make_mesh(&MESHES[5], SPMD_CHECK_OFF);
    if (!m) return;
    float G[64], B[16];
    spmd_spec sp;
    spmd_msg w;
    spmd_spec_parse("P('row', 'col')", &sp, NULL);
    spmd_array ga = spmd_array_2d(G, SPMD_F32, 8, 8), ba = spmd_array_2d(B, SPMD_F32, 2, 4);
    T_CHECK(spmd_device_put(m, &sp, &ga, 0, &ba, &w) == SPMD_OK, "device_put ok");
    spmd_array bb = spmd_array_2d(B, SPMD_F32, 4, 2);
    T_CHECK(spmd_device_put(m, &sp, &ga, 0, &bb, &w) == SPMD_ERR_SHAPE && strstr(w.text, "must be f32 (2,4)"),
            "device_put wrong block: %s", w.text);
    bb = spmd_array_2d(B, SPMD_I32, 2, 4);
    T_CHECK(spmd_device_put(m, &sp, &ga, 0, &bb, &w) == SPMD_ERR_SHAPE, "device_put wrong dtype");
    T_CHECK(spmd_device_put(m, &sp, &ga, -1, &ba, &w) == SPMD_ERR_INVALID, "device_put device -1");
    T_CHECK(spmd_device_put(m, &sp, NULL, 0, &ba, &w) == SPMD_ERR_NULL, "device_put NULL global");
    spmd_array gn = spmd_array_2d(NULL, SPMD_F32, 8, 8);
    T_CHECK(spmd_device_put(m, &sp, &gn, 0, &ba, &w) == SPMD_ERR_NULL, "device_put NULL data");
    spmd_array g7 = spmd_array_2d(G, SPMD_F32, 7, 8);
    T_CHECK(spmd_device_put(m, &sp, &g7, 0, &ba, &w) == SPMD_ERR_SHAPE && strstr(w.text, "not divisible"),
            "device_put 7 rows: %s", w.text);
    spmd_array gbad = spmd_array_2d(G, (spmd_dtype)99, 8, 8);
    T_CHECK(spmd_device_put(m, &sp, &gbad, 0, &ba, &w) == SPMD_ERR_INVALID, "device_put bad dtype");
    const void *blocks[8] = {B, B, B, B, B, B, B, NULL};
    T_CHECK(spmd_assemble(m, &sp, blocks, &ga, &w) == SPMD_ERR_NULL && strstr(w.text, "blocks[7]"), "assemble NULL block");
    T_CHECK(spmd_assemble(m, &sp, NULL, &ga, &w) == SPMD_ERR_NULL, "assemble NULL blocks");
    spmd_spec_parse("P('row', 'x')", &sp, NULL);
    T_CHECK(spmd_assemble(m, &sp, blocks, &ga, &w) == SPMD_ERR_AXIS, "assemble unknown axis");
    spmd_mesh_destroy(m);
}

/* ---- sharding pictures ------------------------------------------------------------------ */
static void test_pictures(void) {
    spmd_mesh *m = make_mesh(&MESHES[5], SPMD_CHECK_OFF);
    if (!m) return;
    static const struct { const char *spec; int rank; int64_t g[3]; const char *want; } pics[] = {
        {"P('row', None)", 2, {8, 4},
         "P('row', None) of (8,4) on mesh (row=4, col=2): blocks (2,4)\n"
         "+-------+\n|  0,1  |\n+-------+\n|  2,3  |\n+-------+\n|  4,5  |\n+-------+\n|  6,7  |\n+-------+\n"},
        {"P('col', 'row')", 2, {2, 4}, 
         "P('col', 'row') of (2,4) on mesh (row=4, col=2): blocks (1,1)\n"
         "+-----+-----+-----+-----+\n|  0  |  2  |  4  |  6  |\n+-----+-----+-----+-----+\n"
         "|  1  |  3  |  5  |  7  |\n+-----+-----+-----+-----+\n"},
        {"P(('col', 'row'))", 1, {8},
         "P(('col', 'row')) of (8,) on mesh (row=4, col=2): blocks (1,)\n"
         "+-----+-----+-----+-----+-----+-----+-----+-----+\n"
         "|  0  |  2  |  4  |  6  |  1  |  3  |  5  |  7  |\n"
         "+-----+-----+-----+-----+-----+-----+-----+-----+\n"},
        {"P()", 0, {0}, "P() of () on mesh (row=4, col=2): blocks ()\n+-------+\n|  0-7  |\n+-------+\n"},
        {"P(None, 'col', partial='row')", 3, {1, 4, 2},
         "P(None, 'col', partial='row') of (1,4,2) on mesh (row=4, col=2): blocks (1,2,2)\n"
         "[0:1, 0:2, 0:2] devices 0,2,4,6\n[0:1, 2:4, 0:2] devices 1,3,5,7\n"
         "partial sums over 'row': the devices of a block hold summands, not copies\n"},
    };
    for (size_t i = 0; i < sizeof pics / sizeof pics[0]; i++) {
        spmd_spec sp;
        char buf[2048];
        spmd_msg w;
        spmd_spec_parse(pics[i].spec, &sp, NULL);
        spmd_status s = spmd_sharding_text(m, &sp, pics[i].rank, pics[i].g, buf, sizeof buf, &w);
        T_CHECK(s == SPMD_OK && strcmp(buf, pics[i].want) == 0, "picture %s: %s\n%s\nwant\n%s", pics[i].spec,
                stname(s), buf, pics[i].want);
        size_t need = strlen(pics[i].want);
        s = spmd_sharding_text(m, &sp, pics[i].rank, pics[i].g, buf, need, &w);
        T_CHECK(s == SPMD_ERR_SIZE && strlen(buf) == need - 1 && strstr(w.text, "needs"), "picture cut: %s", stname(s));
    }
    spmd_spec sp;
    spmd_msg w;
    int64_t g[2] = {8, 6};
    char buf[64];
    spmd_spec_parse("P('row', 'col')", &sp, NULL);
    T_CHECK(spmd_sharding_text(m, &sp, 2, g, NULL, 10, &w) == SPMD_ERR_NULL, "picture NULL buf");
    g[1] = 5;
    T_CHECK(spmd_sharding_text(m, &sp, 2, g, buf, sizeof buf, &w) == SPMD_ERR_SHAPE, "picture non-dividing");
    spmd_mesh_destroy(m);
}

/* ---- shard_map: random cases ------------------------------------------------------------- */
typedef struct {
    const tmesh *tm;
    int nin, nout;
    tspec ts[SPMD_MAX_SHARD_ARGS];      /* input k's spec; output k copies input k % nin */
    int64_t g[SPMD_MAX_SHARD_ARGS][SPMD_MAX_RANK];
    const spmd_array *in;
    int fail;
    char msg[256];
} smcase;

static spmd_status sm_copy(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    smcase *c = (smcase *)user;
    int id = spmd_device_id(d);
    for (int k = 0; k < c->nin; k++) { /* the block is the reference's */
        tspec full = c->ts[k];
        full.rank = c->in[k].rank;
        size_t es = dsize(in[k].dtype), nb = numel(in[k].shape, in[k].rank);
        unsigned char *ref = (unsigned char *)xmalloc(nb * es + 1);
        int cc[3], zero = 0, ok = in[k].rank == c->in[k].rank && in[k].dtype == c->in[k].dtype;
        for (int i = 0; i < in[k].rank && ok; i++) ok = in[k].shape[i] * ts_parts(c->tm, &full, i) == c->in[k].shape[i];
        tm_coords(c->tm, id, cc);
        for (int q = 0; q < full.np; q++) zero |= cc[full.pax[q]] != 0;
        if (ok) {
            ref_block(c->tm, &full, (const unsigned char *)c->in[k].data, c->in[k].shape, es, id, ref);
            if (zero) memset(ref, 0, nb * es);
            ok = nb == 0 || memcmp(ref, in[k].data, nb * es) == 0;
        }
        free(ref);
        if (!ok && __atomic_exchange_n(&c->fail, 1, __ATOMIC_ACQ_REL) == 0)
            snprintf(c->msg, sizeof c->msg, "device %d: input %d block differs from the reference", id, k);
    }
    for (int k = 0; k < c->nout; k++) {
        const spmd_array *src = &in[k % c->nin];
        size_t n = numel(src->shape, src->rank) * dsize(src->dtype);
        if (n) memcpy(out[k].data, src->data, n);
    }
    return SPMD_OK;
}

/* Under several processes every process gives the whole global inputs and
   gets the whole global outputs (the devices' blocks and statuses are
   shared): the same checks hold in each. */
static void test_shard_map_random(void) {
    rng_t r = rng_make(SEED, RNG_SALT, 2);
    int cases = QUICK ? 25 : 150, bad = 0;
    for (int c = 0; c < cases; c++) {
        smcase sc;
        memset(&sc, 0, sizeof sc);
        sc.tm = &MESHES[rb(&r, NMESHES)];
        spmd_mesh *m = make_mesh(sc.tm, SPMD_CHECK_DEFAULT);
        if (!m) return;
        sc.nin = 1 + rb(&r, SPMD_MAX_SHARD_ARGS);
        sc.nout = 1 + rb(&r, SPMD_MAX_SHARD_ARGS);
        spmd_array in[SPMD_MAX_SHARD_ARGS], out[SPMD_MAX_SHARD_ARGS];
        spmd_spec isp[SPMD_MAX_SHARD_ARGS], osp[SPMD_MAX_SHARD_ARGS];
        void *bufs[2 * SPMD_MAX_SHARD_ARGS];
        for (int k = 0; k < sc.nin; k++) {
            int rank = rb(&r, 9);
            spmd_dtype dt = DTYPES[(c * 3 + k) % NDT];
            size_t es = dsize(dt);
            sc.ts[k] = rand_spec(sc.tm, rank, 1, &r);
            rand_shape(sc.tm, &sc.ts[k], rank, sc.g[k], 2048, &r);
            size_t n = numel(sc.g[k], rank);
            unsigned char *G = (unsigned char *)xmalloc(n * es);
            for (size_t q = 0; q < n; q++) setv(dt, G + q * es, (double)rb(&r, 6));
            in[k] = spmd_array_nd(G, dt, rank, sc.g[k]);
            isp[k] = ts_make(sc.tm, &sc.ts[k]);
            bufs[k] = G;
        }
        for (int k = 0; k < sc.nout; k++) {
            const spmd_array *src = &in[k % sc.nin];
            size_t n = numel(src->shape, src->rank) * dsize(src->dtype);
            bufs[SPMD_MAX_SHARD_ARGS + k] = xmalloc(n);
            memset(bufs[SPMD_MAX_SHARD_ARGS + k], 0x77, n);
            out[k] = spmd_array_nd(bufs[SPMD_MAX_SHARD_ARGS + k], src->dtype, src->rank, src->shape);
            osp[k] = isp[k % sc.nin];
        }
        sc.in = in;
        spmd_shard_map_desc ds;
        memset(&ds, 0, sizeof ds);
        ds.fn = sm_copy;
        ds.user = &sc;
        ds.nin = sc.nin; ds.in = in; ds.in_specs = isp;
        ds.nout = sc.nout; ds.out = out; ds.out_specs = osp;
        spmd_msg w;
        spmd_status s = spmd_shard_map(m, &ds, &w);
        int none = tl_nlocal(m, 0, tm_size(sc.tm)) == 0; /* a process without devices: refused, nothing written */
        int ok = none ? s == SPMD_ERR_STATE && strstr(w.text, "hosts none") : s == SPMD_OK && !sc.fail;
        for (int k = 0; k < sc.nout && ok; k++) {
            const spmd_array *src = &in[k % sc.nin];
            size_t nb = numel(src->shape, src->rank) * dsize(src->dtype);
            if (none)
                for (size_t q = 0; q < nb && ok; q++) ok = ((unsigned char *)out[k].data)[q] == 0x77;
            else
                ok = memcmp(out[k].data, src->data, nb) == 0;
        }
        if (!ok && bad++ < 5) {
            char t[200];
            spmd_spec_format(&isp[0], t, sizeof t);
            T_CHECK(0, "shard_map case %d (nin %d nout %d, in0 %s): %s %s %s", c, sc.nin, sc.nout, t, stname(s), w.text,
                    sc.msg);
        }
        for (int k = 0; k < sc.nin; k++) free(bufs[k]);
        for (int k = 0; k < sc.nout; k++) free(bufs[SPMD_MAX_SHARD_ARGS + k]);
        spmd_mesh_destroy(m);
    }
    T_CHECK(bad == 0, "%d of %d shard_map cases failed", bad, cases);
}

/* ---- the tutorial's examples through shard_map ----------------------------------------- */
static spmd_status tu_matmul(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    const float *a = (const float *)in[0].data, *b = (const float *)in[1].data;
    float *c = (float *)out[0].data;
    int64_t n = in[0].shape[0], k = in[0].shape[1], m = in[1].shape[1];
    int *shapes_ok = (int *)user;
    if (!(n == 2 && k == 8 && in[1].shape[0] == 8 && m == 4)) __atomic_store_n(shapes_ok, 0, __ATOMIC_RELAXED);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            float acc = 0;
            for (int64_t t = 0; t < k; t++) acc += a[i * k + t] * b[t * m + j];
            c[i * m + j] = acc;
        }
    return spmd_psum(d, c, c, (size_t)(n * m), SPMD_F32, "col", NULL);
}
static spmd_status tu_copy(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)d; (void)user;
    memcpy(out[0].data, in[0].data, numel(in[0].shape, in[0].rank) * sizeof(float));
    return SPMD_OK;
}
static spmd_status tu_const(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)d; (void)in;
    ((float *)out[0].data)[0] = *(const float *)user;
    return SPMD_OK;
}
static spmd_status tu_rowsum(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    const float *x = (const float *)in[0].data;
    (void)d; (void)user;
    for (int64_t i = 0; i < in[0].shape[0]; i++) {
        float s = 0;
        for (int64_t j = 0; j < in[0].shape[1]; j++) s += x[i * in[0].shape[1] + j];
        ((float *)out[0].data)[i] = s;
    }
    return SPMD_OK;
}
static spmd_status tu_psum(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    return spmd_psum(d, in[0].data, out[0].data, (size_t)in[0].shape[0], SPMD_F32, (const char *)user, NULL);
}
static spmd_status tu_ppermute(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    int perm[8] = {0, 1, 1, 2, 2, 3, 3, 0};
    (void)user;
    return spmd_ppermute(d, &in[0], &out[0], "shift_axis", perm, 4, NULL);
}
static spmd_status tu_a2a(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)user;
    return spmd_all_to_all(d, &in[0], &out[0], "device_group", 0, 0, 1, NULL);
}
static spmd_status tu_pss(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    /* x_block (1,4): psum_scatter over the 4 devices along dim 1, tiled -> (1,1) */
    spmd_array o = spmd_array_2d(out[0].data, SPMD_F32, 1, 1);
    (void)user;
    return spmd_psum_scatter(d, &in[0], &o, "scatter_axis", 1, 1, NULL);
}
static spmd_status tu_fail(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)in; (void)out; (void)user;
    return spmd_device_id(d) == 1 ? SPMD_ERR_INVALID : SPMD_OK;
}

static spmd_status run_sm(spmd_mesh *m, spmd_shard_fn fn, void *user, int nin, spmd_array *in, const char **ins,
                          spmd_array *out, const char *outs, spmd_check rep, spmd_msg *w) {
    spmd_spec isp[2], osp[1];
    for (int k = 0; k < nin; k++) spmd_spec_parse(ins[k], &isp[k], NULL);
    spmd_spec_parse(outs, &osp[0], NULL);
    spmd_shard_map_desc ds;
    memset(&ds, 0, sizeof ds);
    ds.fn = fn; ds.user = user;
    ds.nin = nin; ds.in = in; ds.in_specs = isp;
    ds.nout = 1; ds.out = out; ds.out_specs = osp;
    ds.check_rep = rep;
    return spmd_shard_map(m, &ds, w);
}

/* A process hosting none of m's devices (more processes than devices):
   shard_map refuses, naming why, and writes nothing. 1 when so. */
static int sm_absent(spmd_mesh *m, int size) {
    if (tl_nlocal(m, 0, size)) return 0;
    float o = 7, v = 1;
    int64_t one = 1;
    spmd_spec sp;
    spmd_spec_parse("P()", &sp, NULL);
    spmd_array out = spmd_array_nd(&o, SPMD_F32, 1, &one);
    spmd_shard_map_desc ds;
    spmd_msg w;
    memset(&ds, 0, sizeof ds);
    ds.fn = tu_const; ds.user = &v;
    ds.nout = 1; ds.out = &out; ds.out_specs = &sp;
    spmd_status s = spmd_shard_map(m, &ds, &w);
    T_CHECK(s == SPMD_ERR_STATE && strstr(w.text, "hosts none") && o == 7, "shard_map in a process without devices: %s %s",
            stname(s), w.text);
    return 1;
}

static spmd_mesh *mesh1(const char *name, int n) {
    tmesh t = {1, {n}, {name}};
    return make_mesh(&t, SPMD_CHECK_DEFAULT);
}

/* shard_map's refusals of its arguments, made before any device runs (on
   the (4,2) mesh "row", "col") */
static void tutorial_bad_args(spmd_mesh *m) {
    static float X[120], Y[240];
    spmd_array xin = spmd_array_2d(X, SPMD_F32, 12, 10), yout = spmd_array_2d(Y, SPMD_F32, 12, 20);
    const char *rs[1] = {"P('row', None)"};
    spmd_shard_map_desc ds;
    spmd_msg w;
    spmd_status s;
    memset(&ds, 0, sizeof ds);
    T_CHECK(spmd_shard_map(NULL, &ds, &w) == SPMD_ERR_NULL, "shard_map NULL mesh");
    T_CHECK(spmd_shard_map(m, NULL, &w) == SPMD_ERR_NULL, "shard_map NULL desc");
    T_CHECK(spmd_shard_map(m, &ds, &w) == SPMD_ERR_NULL && strstr(w.text, "fn"), "shard_map NULL fn");
    ds.fn = tu_copy;
    ds.nin = 9;
    T_CHECK(spmd_shard_map(m, &ds, &w) == SPMD_ERR_INVALID, "shard_map nin 9");
    ds.nin = 1;
    T_CHECK(spmd_shard_map(m, &ds, &w) == SPMD_ERR_NULL && strstr(w.text, "in"), "shard_map NULL in");
    const char *sp[1] = {"P('row', 'nope')"};
    s = run_sm(m, tu_copy, NULL, 1, &xin, sp, &yout, "P('row', 'col')", SPMD_CHECK_DEFAULT, &w);
    T_CHECK(s == SPMD_ERR_AXIS && strstr(w.text, "in_specs[0]") && strstr(w.text, "'nope'"), "shard_map bad axis: %s",
            w.text);
    const char *sp2[1] = {"P('col', 'row')"};
    s = run_sm(m, tu_copy, NULL, 1, &xin, sp2, &yout, "P('row', 'col')", SPMD_CHECK_DEFAULT, &w);
    T_CHECK(s == SPMD_ERR_SHAPE && strstr(w.text, "dimension 1 of size 10 is not divisible by 4"),
            "shard_map non-dividing: %s", w.text);
    s = run_sm(m, tu_copy, NULL, 1, &xin, rs, &yout, "P('row', 'col')", (spmd_check)7, &w);
    T_CHECK(s == SPMD_ERR_INVALID, "shard_map check_rep 7");
}

static void test_tutorial(void) {
    tmesh wz = {2, {4, 2}, {"row", "col"}};
    spmd_mesh *m = make_mesh(&wz, SPMD_CHECK_DEFAULT);
    if (!m) return;
    spmd_msg w;
    /* matmul_basic */
    static float A[128], B[64], C[32], ref[32];
    for (int i = 0; i < 128; i++) A[i] = (float)i;
    for (int i = 0; i < 64; i++) B[i] = (float)i;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            double s = 0;
            for (int t = 0; t < 16; t++) s += (double)A[i * 16 + t] * B[t * 4 + j];
            ref[i * 4 + j] = (float)s;
        }
    spmd_array in[2] = {spmd_array_2d(A, SPMD_F32, 8, 16), spmd_array_2d(B, SPMD_F32, 16, 4)};
    spmd_array out = spmd_array_2d(C, SPMD_F32, 8, 4);
    const char *ms[2] = {"P('row', 'col')", "P('col', None)"};
    int shapes_ok = 1;
    spmd_status s = run_sm(m, tu_matmul, &shapes_ok, 2, in, ms, &out, "P('row', None)", SPMD_CHECK_DEFAULT, &w);
    static const float published[8] = {4960, 5080, 5200, 5320, 12640, 13016, 13392, 13768};
    T_CHECK(s == SPMD_OK && shapes_ok && memcmp(C, published, sizeof published) == 0 && memcmp(C, ref, sizeof C) == 0,
            "matmul_basic: %s %s; first rows %g %g %g %g / %g %g %g %g", stname(s), w.text, C[0], C[1], C[2], C[3], C[4],
            C[5], C[6], C[7]);
    /* in_specs replication: (12,10) under P('row', None), out P('row','col') -> (12,20) */
    static float X[120], Y[240];
    for (int i = 0; i < 120; i++) X[i] = (float)i;
    spmd_array xin = spmd_array_2d(X, SPMD_F32, 12, 10), yout = spmd_array_2d(Y, SPMD_F32, 12, 20);
    const char *rs[1] = {"P('row', None)"};
    s = run_sm(m, tu_copy, NULL, 1, &xin, rs, &yout, "P('row', 'col')", SPMD_CHECK_DEFAULT, &w);
    int ok = s == SPMD_OK;
    for (int i = 0; i < 12 && ok; i++)
        for (int j = 0; j < 20 && ok; j++) ok = Y[i * 20 + j] == X[i * 10 + j % 10];
    T_CHECK(ok, "in_specs replication (12,20): %s %s", stname(s), w.text);
    /* out_specs un-tiling: (4,2), (4,1), (1,1) */
    const char *us[3] = {"P('row', 'col')", "P('row', None)", "P(None, None)"};
    int64_t ush[3][2] = {{4, 2}, {4, 1}, {1, 1}};
    for (int t = 0; t < 3; t++) {
        float U[8], v = (float)(t + 1);
        spmd_array uo = spmd_array_2d(U, SPMD_F32, ush[t][0], ush[t][1]);
        s = run_sm(m, tu_const, &v, 0, NULL, NULL, &uo, us[t], SPMD_CHECK_DEFAULT, &w);
        ok = s == SPMD_OK;
        for (int i = 0; i < ush[t][0] * ush[t][1]; i++) ok &= U[i] == v;
        T_CHECK(ok, "un-tiling %s: %s %s", us[t], stname(s), w.text);
    }
    /* process_with_in_specs on a 1-D mesh of 4: (8,5) -> (2,5) blocks -> row sums (8,) */
    spmd_mesh *m4 = mesh1("data_parallel_dim", 4), *m2 = mesh1("batch_dim", 2);
    spmd_mesh *mb = mesh1("data_parallel_axis", 2);
    if (!m4 || !m2 || !mb) return;
    if (!sm_absent(mb, 2)) {
        static float big[32], sums[8];
        for (int i = 0; i < 32; i++) big[i] = (float)i;
        spmd_array bi = spmd_array_2d(big, SPMD_F32, 8, 4), so = spmd_array_1d(sums, SPMD_F32, 8);
        const char *sp[1] = {"P('data_parallel_axis')"};
        s = run_sm(mb, tu_rowsum, NULL, 1, &bi, sp, &so, "P('data_parallel_axis')", SPMD_CHECK_DEFAULT, &w);
        static const float want[8] = {6, 22, 38, 54, 70, 86, 102, 118};
        T_CHECK(s == SPMD_OK && memcmp(sums, want, sizeof want) == 0, "process_block_shmap: %s %g %g", stname(s), sums[0],
                sums[7]);
    }
    /* check_vma: psum over batch_dim, out P() -> [3 5 7]; returning x_block -> refused */
    if (!sm_absent(m2, 2)) {
        float v[6] = {0, 1, 2, 3, 4, 5}, r3[3];
        spmd_array vi = spmd_array_1d(v, SPMD_F32, 6), ro = spmd_array_1d(r3, SPMD_F32, 3);
        const char *sp[1] = {"P('batch_dim')"};
        s = run_sm(m2, tu_psum, (void *)"batch_dim", 1, &vi, sp, &ro, "P()", SPMD_CHECK_DEFAULT, &w);
        T_CHECK(s == SPMD_OK && r3[0] == 3 && r3[1] == 5 && r3[2] == 7, "psum out P(): %s %g %g %g", stname(s), r3[0],
                r3[1], r3[2]);
        s = run_sm(m2, tu_copy, NULL, 1, &vi, sp, &ro, "P()", SPMD_CHECK_DEFAULT, &w);
        T_CHECK(s == SPMD_ERR_MISMATCH && strstr(w.text, "'batch_dim'") && strstr(w.text, "device 1 (batch_dim=1)") &&
                    strstr(w.text, "device 0 (batch_dim=0)"),
                "incorrect_out_specs_example: %s %s", stname(s), w.text);
        s = run_sm(m2, tu_copy, NULL, 1, &vi, sp, &ro, "P()", SPMD_CHECK_OFF, &w);
        T_CHECK(s == SPMD_OK && r3[0] == 0 && r3[1] == 1 && r3[2] == 2, "check_rep off takes device 0's copy: %s",
                stname(s));
        /* pvary: P() in, P('batch_dim') out -> [0 1 2 0 1 2] */
        float u[3] = {0, 1, 2}, r6[6];
        spmd_array ui = spmd_array_1d(u, SPMD_F32, 3), r6o = spmd_array_1d(r6, SPMD_F32, 6);
        const char *sp0[1] = {"P()"};
        s = run_sm(m2, tu_copy, NULL, 1, &ui, sp0, &r6o, "P('batch_dim')", SPMD_CHECK_DEFAULT, &w);
        static const float want6[6] = {0, 1, 2, 0, 1, 2};
        T_CHECK(s == SPMD_OK && memcmp(r6, want6, sizeof want6) == 0, "pvary example: %s", stname(s));
        /* a function's failure comes back with its device */
        s = run_sm(m2, tu_fail, NULL, 1, &ui, sp0, &r6o, "P('batch_dim')", SPMD_CHECK_DEFAULT, &w);
        T_CHECK(s == SPMD_ERR_INVALID && strstr(w.text, "device 1"), "failing function: %s %s", stname(s), w.text);
    }
    /* ppermute, all_to_all, psum_scatter on 4 devices */
    {
        spmd_mesh *mp = mesh1("shift_axis", 4), *ma = mesh1("device_group", 4), *mq = mesh1("scatter_axis", 4);
        if (!mp || !ma || !mq) return;
        float v4[4] = {0, 1, 2, 3}, r4[4], v16[16], r16[16];
        for (int i = 0; i < 16; i++) v16[i] = (float)i;
        spmd_array vi = spmd_array_1d(v4, SPMD_F32, 4), ro = spmd_array_1d(r4, SPMD_F32, 4);
        const char *sp[1] = {"P('shift_axis')"};
        if (!sm_absent(mp, 4)) {
            s = run_sm(mp, tu_ppermute, NULL, 1, &vi, sp, &ro, "P('shift_axis')", SPMD_CHECK_DEFAULT, &w);
            T_CHECK(s == SPMD_OK && r4[0] == 3 && r4[1] == 0 && r4[2] == 1 && r4[3] == 2, "ppermute [3 0 1 2]: %s",
                    stname(s));
        }
        spmd_array ai = spmd_array_1d(v16, SPMD_F32, 16), ao = spmd_array_1d(r16, SPMD_F32, 16);
        const char *spa[1] = {"P('device_group')"};
        static const float wa[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
        if (!sm_absent(ma, 4)) {
            s = run_sm(ma, tu_a2a, NULL, 1, &ai, spa, &ao, "P('device_group')", SPMD_CHECK_DEFAULT, &w);
            T_CHECK(s == SPMD_OK && memcmp(r16, wa, sizeof wa) == 0, "all_to_all example: %s", stname(s));
        }
        spmd_array qi = spmd_array_2d(v16, SPMD_F32, 4, 4), qo = spmd_array_1d(r4, SPMD_F32, 4);
        const char *spq[1] = {"P('scatter_axis')"};
        if (!sm_absent(mq, 4)) {
            s = run_sm(mq, tu_pss, NULL, 1, &qi, spq, &qo, "P('scatter_axis')", SPMD_CHECK_DEFAULT, &w);
            T_CHECK(s == SPMD_OK && r4[0] == 24 && r4[1] == 28 && r4[2] == 32 && r4[3] == 36,
                    "psum_scatter [24 28 32 36]: %s %s", stname(s), w.text);
        }
        spmd_mesh_destroy(mp);
        spmd_mesh_destroy(ma);
        spmd_mesh_destroy(mq);
    }
    /* errors of shard_map itself; the mesh still usable after them */
    tutorial_bad_args(m);
    s = run_sm(m, tu_copy, NULL, 1, &xin, rs, &yout, "P('row', 'col')", SPMD_CHECK_DEFAULT, &w);
    T_CHECK(s == SPMD_OK && spmd_mesh_status(m) == SPMD_OK, "mesh usable after the errors: %s", stname(s));
    spmd_mesh_destroy(m4);
    spmd_mesh_destroy(m2);
    spmd_mesh_destroy(mb);
    spmd_mesh_destroy(m);
}

/* ---- shard_map writes all outputs or none; a busy mesh is refused ----------------------------- */
static spmd_status sm_two(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)in;
    (void)user;
    ((float *)out[0].data)[0] = 1; /* the same everywhere */
    ((float *)out[1].data)[0] = (float)spmd_device_id(d); /* varies, against a P() out_spec */
    return SPMD_OK;
}
static spmd_status sm_count(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    (void)d;
    (void)in;
    (void)out;
    __atomic_fetch_add((int *)user, 1, __ATOMIC_RELAXED);
    return SPMD_OK;
}
static spmd_status sm_fail03(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user) {
    int id = spmd_device_id(d);
    (void)in;
    (void)out;
    (void)user;
    return id == 0 ? SPMD_ERR_INVALID : id == 3 ? SPMD_ERR_SIZE : SPMD_OK;
}
typedef struct { spmd_mesh *m; spmd_status st; char msg[512]; } sm_busy;
static void sm_busy_dev(spmd_dev *d, void *arg) {
    sm_busy *b = (sm_busy *)arg;
    if (spmd_device_id(d) != 0) return;
    int n = 0;
    spmd_shard_map_desc ds;
    spmd_msg w;
    memset(&ds, 0, sizeof ds);
    ds.fn = sm_count;
    ds.user = &n;
    b->st = spmd_shard_map(b->m, &ds, &w);
    snprintf(b->msg, sizeof b->msg, "%s", w.text);
}

static void test_shard_map_outputs(void) {
    spmd_mesh *m = mesh1("x", 2);
    if (!m) return;
    if (sm_absent(m, 2)) goto busy;
    float A = 7, B = 7;
    int64_t one = 1;
    spmd_spec sp[2];
    spmd_spec_parse("P()", &sp[0], NULL);
    sp[1] = sp[0];
    spmd_array outs[2] = {spmd_array_nd(&A, SPMD_F32, 1, &one), spmd_array_nd(&B, SPMD_F32, 1, &one)};
    spmd_shard_map_desc ds;
    spmd_msg w;
    memset(&ds, 0, sizeof ds);
    ds.fn = sm_two;
    ds.nout = 2;
    ds.out = outs;
    ds.out_specs = sp;
    spmd_status s = spmd_shard_map(m, &ds, &w);
    T_CHECK(s == SPMD_ERR_MISMATCH && strstr(w.text, "out_specs[1]") && A == 7 && B == 7,
            "a failed check of out[1] leaves out[0] unwritten: %s A=%g (%s)", stname(s), (double)A, w.text);
    ds.check_rep = SPMD_CHECK_OFF;
    s = spmd_shard_map(m, &ds, &w);
    T_CHECK(s == SPMD_OK && A == 1 && B == 0, "unchecked: device 0's copies: %s %g %g", stname(s), (double)A, (double)B);
    /* no outputs: the function runs for its effects */
    int n = 0;
    memset(&ds, 0, sizeof ds);
    ds.fn = sm_count;
    ds.user = &n;
    s = spmd_shard_map(m, &ds, &w);
    T_CHECK(s == SPMD_OK && n == tl_nlocal(m, 0, 2), "nout 0: %s, ran %d times (once per device of this process)",
            stname(s), n);
busy:; /* from inside a run: busy, nothing run, a message (device 0 tries) */
    sm_busy b;
    memset(&b, 0, sizeof b);
    b.m = m;
    spmd_run(m, sm_busy_dev, &b);
    if (tl_local(m, 0))
        T_CHECK(b.st == SPMD_ERR_BUSY && strstr(b.msg, "busy"), "shard_map on a running mesh: %s (%s)", stname(b.st),
                b.msg);
    T_CHECK(spmd_mesh_status(m) == SPMD_OK, "mesh fine after");
    spmd_mesh_destroy(m);
    /* two functions fail: the status and the message are the first
       device's, in every process (all of them make this mesh) */
    {
        spmd_mesh *m4 = mesh1("x", 4);
        if (m4 && !sm_absent(m4, 4)) {
            spmd_shard_map_desc d4;
            spmd_msg w4;
            memset(&d4, 0, sizeof d4);
            d4.fn = sm_fail03;
            spmd_status s4 = spmd_shard_map(m4, &d4, &w4);
            T_CHECK(s4 == SPMD_ERR_INVALID && strstr(w4.text, "device 0") && strstr(w4.text, "SPMD_ERR_INVALID") &&
                        !strstr(w4.text, "device 3"),
                    "devices 0 and 3 fail: %s (%s)", stname(s4), w4.text);
        }
        spmd_mesh_destroy(m4);
    }
}

/* ---- reshard: every pair of specs ------------------------------------------------------- */
/* All specs of rank r over the mesh's axes: each axis unused, partial, or on
   a dimension; axes sharing a dimension in every order. */
static int enum_specs(const tmesh *m, int rank, int allow_partial, tspec *out, int cap) {
    int n = 0, nd = m->nd, choices = rank + 1 + allow_partial, total = 1;
    for (int a = 0; a < nd; a++) total *= choices;
    for (int code = 0; code < total; code++) {
        int place[3], t = code;
        for (int a = 0; a < nd; a++) { place[a] = t % choices; t /= choices; }
        /* the orders: permutations of the axes, kept when they give a new spec */
        int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        int np = nd == 1 ? 1 : nd == 2 ? 2 : 6, first = n;
        for (int q = 0; q < np; q++) {
            tspec s;
            memset(&s, 0, sizeof s);
            s.rank = rank;
            for (int j = 0; j < nd; j++) {
                int a = nd == 2 ? (q ? 1 - j : j) : perms[q][j];
                if (nd == 1) a = 0;
                if (place[a] < rank) s.ax[place[a]][s.n[place[a]]++] = a;
                else if (place[a] == rank + 1) s.pax[s.np++] = a;
            }
            int dup = 0;
            for (int e = first; e < n && !dup; e++) dup = memcmp(&out[e], &s, sizeof s) == 0;
            if (!dup && n < cap) out[n++] = s;
        }
    }
    return n;
}

typedef struct {
    const tmesh *tm;
    int rank;
    int64_t g[3];
    tspec *specs;
    int nspecs;
    int *pairs; /* from, to */
    int npairs;
    unsigned char *fail;
    char msg[1024];
    int msgset;
    int plan_bad;
} rsweep;

static void rs_dev(spmd_dev *d, void *arg) {
    rsweep *w = (rsweep *)arg;
    const tmesh *tm = w->tm;
    int id = spmd_device_id(d), rank = w->rank, cc[3];
    tm_coords(tm, id, cc);
    size_t ng = numel(w->g, rank);
    for (int c = 0; c < w->npairs; c++) {
        const tspec *f = &w->specs[w->pairs[2 * c]], *t = &w->specs[w->pairs[2 * c + 1]];
        spmd_dtype dt = DTYPES[c % NDT];
        size_t es = dsize(dt);
        /* the summands: one random global per combination of f's partial coordinates */
        int P = 1;
        for (int k = 0; k < f->np; k++) P *= tm->sh[f->pax[k]];
        double *Gv = (double *)xmalloc((size_t)P * ng * sizeof(double));
        rng_t r = rng_make(SEED, RNG_SALT ^ (uint64_t)(w->tm->sh[1] * 977 + rank), (uint64_t)c);
        /* (fp8: 0 or 1, so that sums in steps stay exact: e5m2 has every
           integer to 8 only; each step of a reshard rounds, as for f16) */
        for (size_t q = 0; q < (size_t)P * ng; q++)
            Gv[q] = dt == SPMD_BOOL || isfp8(dt) ? (double)(rb(&r, 3) == 0) : (double)rb(&r, 5);
        /* my from-block: the summand of my partial coordinates */
        int myc = 0;
        for (int k = 0; k < f->np; k++) myc = myc * tm->sh[f->pax[k]] + cc[f->pax[k]];
        unsigned char *G = (unsigned char *)xmalloc(ng * es + 1);
        for (size_t q = 0; q < ng; q++) setv(dt, G + q * es, Gv[(size_t)myc * ng + q]);
        int64_t fb[3], tb[3];
        for (int i = 0; i < rank; i++) {
            fb[i] = w->g[i] / ts_parts(tm, f, i);
            tb[i] = w->g[i] / ts_parts(tm, t, i);
        }
        size_t nf = numel(fb, rank), nt = numel(tb, rank), cap = (nf > nt ? nf : nt) * es + 1;
        unsigned char *blk = (unsigned char *)xmalloc(cap), *out = (unsigned char *)xmalloc(cap);
        ref_block(tm, f, G, w->g, es, id, blk);
        /* expected: sum over the summands that t does not keep partial, my kept coordinates fixed */
        unsigned char *Ge = (unsigned char *)xmalloc(ng * es + 1), *want = (unsigned char *)xmalloc(cap);
        int zero = 0;
        for (int k = 0; k < t->np; k++)
            if (!ts_is_partial(f, t->pax[k])) zero |= cc[t->pax[k]] != 0;
        for (size_t q = 0; q < ng; q++) {
            double s = 0;
            for (int v = 0; v < P; v++) {
                int tt = v, agree = 1;
                for (int k = f->np - 1; k >= 0; k--) {
                    int a = f->pax[k], coord = tt % tm->sh[a];
                    tt /= tm->sh[a];
                    if (ts_is_partial(t, a) && coord != cc[a]) agree = 0;
                }
                if (agree) s += Gv[(size_t)v * ng + q];
            }
            setv(dt, Ge + q * es, zero ? 0 : s);
        }
        ref_block(tm, t, Ge, w->g, es, id, want);
        spmd_spec fs = ts_make(tm, f), tsp = ts_make(tm, t);
        spmd_array x = spmd_array_nd(blk, dt, rank, fb);
        int inplace = nf == nt && c % 3 == 0;
        spmd_array y = spmd_array_nd(inplace ? blk : out, dt, rank, tb);
        spmd_reshard_plan plan;
        spmd_status s = spmd_reshard(d, &x, &fs, &tsp, &y, &plan);
        int ok = s == SPMD_OK && (nt == 0 || memcmp(y.data, want, nt * es) == 0);
        if (!ok) {
            __atomic_store_n(&w->fail[c], 1, __ATOMIC_RELAXED);
            if (__atomic_exchange_n(&w->msgset, 1, __ATOMIC_ACQ_REL) == 0) {
                char a[120], b[120], pt[1024];
                ts_text(tm, f, a, sizeof a);
                ts_text(tm, t, b, sizeof b);
                spmd_reshard_plan_text(&plan, pt, sizeof pt);
                snprintf(w->msg, sizeof w->msg, "dev %d pair %d %s -> %s %s: %s (%.100s)\n%.150s", id, c, a, b, dnm(dt),
                         stname(s), spmd_last_error(d), pt);
            }
        }
        if (id == 0 && s == SPMD_OK) {
            /* the plan is the cheapest the simple cases allow */
            int nothing = memcmp(f, t, sizeof *f) == 0;
            if (nothing && plan.nsteps != 0) __atomic_store_n(&w->plan_bad, c + 1, __ATOMIC_RELAXED);
            if (!f->np && !t->np) {
                int fsub = 1; /* t shards by prefixes of f's axes: gathers only; f by t's: slices only */
                int tsub = 1;
                for (int i = 0; i < rank; i++) {
                    fsub &= t->n[i] <= f->n[i] && memcmp(t->ax[i], f->ax[i], (size_t)t->n[i] * sizeof(int)) == 0;
                    tsub &= f->n[i] <= t->n[i] && memcmp(t->ax[i], f->ax[i], (size_t)f->n[i] * sizeof(int)) == 0;
                }
                for (int k = 0; k < plan.nsteps; k++) {
                    if (fsub && plan.steps[k].kind != SPMD_COLL_ALL_GATHER) __atomic_store_n(&w->plan_bad, c + 1, __ATOMIC_RELAXED);
                    if (tsub && (plan.steps[k].kind != SPMD_COLL_SLICE || plan.total.bytes != 0))
                        __atomic_store_n(&w->plan_bad, c + 1, __ATOMIC_RELAXED);
                }
            }
        }
        free(Gv);
        free(G);
        free(blk);
        free(out);
        free(Ge);
        free(want);
    }
}

static void test_reshard_sweep(void) {
    static const tmesh rm[3] = {{2, {2, 2}, {"x", "y"}}, {2, {2, 3}, {"x", "y"}}, {3, {2, 1, 3}, {"a", "b", "c"}}};
    rng_t r = rng_make(SEED, RNG_SALT, 3);
    for (int mi = 0; mi < 3; mi++) {
        const tmesh *tm = &rm[mi];
        spmd_mesh *m = make_mesh(tm, SPMD_CHECK_DEFAULT);
        if (!m) return;
        for (int rank = 1; rank <= 3; rank++) {
            if (mi == 2 && rank != 2) continue; /* the 3-axis mesh: a random sample, rank 2 */
            rsweep w;
            memset(&w, 0, sizeof w);
            w.tm = tm;
            w.rank = rank;
            int lcm = tm->sh[0] * tm->sh[1] * (tm->nd > 2 ? tm->sh[2] : 1);
            for (int i = 0; i < rank; i++) w.g[i] = lcm * (1 + rb(&r, 2));
            w.specs = (tspec *)xmalloc(4096 * sizeof(tspec));
            w.nspecs = enum_specs(tm, rank, 1, w.specs, 4096);
            int all = w.nspecs * w.nspecs;
            w.pairs = (int *)xmalloc((size_t)all * 2 * sizeof(int));
            int step = QUICK ? 3 : 1;
            if (mi == 2) step = QUICK ? 24 : 4;
            for (int p = rb(&r, step); p < all; p += step) {
                w.pairs[2 * w.npairs] = p / w.nspecs;
                w.pairs[2 * w.npairs + 1] = p % w.nspecs;
                w.npairs++;
            }
            w.fail = (unsigned char *)calloc((size_t)w.npairs, 1);
            spmd_status s = spmd_run(m, rs_dev, &w);
            int bad = 0;
            for (int c = 0; c < w.npairs; c++) bad += w.fail[c];
            printf("reshard sweep: mesh %d, rank %d: %d specs, %d pairs\n", mi, rank, w.nspecs, w.npairs);
            char ms[24];
            snprintf(ms, sizeof ms, tm->nd == 2 ? "(%d,%d)" : "(%d,%d,%d)", tm->sh[0], tm->sh[1], tm->sh[2]);
            /* each device checks its own blocks; device 0 the plans */
            if (tl_nlocal(m, 0, tm_size(tm)))
                T_CHECK(s == SPMD_OK && bad == 0, "reshard on %s rank %d: %s, %d of %d pairs failed; first: %s", ms, rank,
                        stname(s), bad, w.npairs, w.msg);
            if (tl_local(m, 0))
                T_CHECK(w.plan_bad == 0, "reshard on %s rank %d: pair %d took a costlier plan than gather/slice", ms,
                        rank, w.plan_bad - 1);
            T_CHECK(w.npairs >= all / step, "pairs covered: %d of %d (every %d)", w.npairs, all, step);
            if (s != SPMD_OK && tl_one_process(m)) { /* a broken mesh: start again (one process only) */
                spmd_mesh_destroy(m);
                if (!(m = make_mesh(tm, SPMD_CHECK_DEFAULT))) return;
            }
            free(w.specs);
            free(w.pairs);
            free(w.fail);
        }
        spmd_mesh_destroy(m);
    }
}

/* ---- plans and the cost model ------------------------------------------------------------ */
static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1); }

static void test_plans_and_costs(void) {
    spmd_cost c;
    spmd_cost_model ring = {1e-6, 1e-9, SPMD_COST_RING}, tree = {1e-6, 1e-9, SPMD_COST_TREE};
    /* ring: all_gather (G-1)/G*B in G-1 steps; psum twice that */
    T_CHECK(spmd_collective_cost(SPMD_COLL_ALL_GATHER, 4, 1000, &ring, &c) == SPMD_OK && close_to(c.bytes, 750) &&
                c.steps == 3 && close_to(c.time_s, 3e-6 + 750e-9) && c.algo == SPMD_COST_RING,
            "ring all_gather: %g %d %g", c.bytes, c.steps, c.time_s);
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, 1000, &ring, &c) == SPMD_OK && close_to(c.bytes, 1500) && c.steps == 6,
            "ring psum: %g %d", c.bytes, c.steps);
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM_SCATTER, 5, 1000, &ring, &c) == SPMD_OK && close_to(c.bytes, 800) &&
                c.steps == 4, "ring psum_scatter G=5: %g %d", c.bytes, c.steps);
    T_CHECK(spmd_collective_cost(SPMD_COLL_ALL_TO_ALL, 8, 1000, &ring, &c) == SPMD_OK && close_to(c.bytes, 875) &&
                c.steps == 7, "ring all_to_all: %g %d", c.bytes, c.steps);
    /* tree: ceil(log2 G) steps; psum log2 G * B; Bruck all_to_all log2 G * B / 2 */
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 8, 1000, &tree, &c) == SPMD_OK && close_to(c.bytes, 3000) && c.steps == 3,
            "tree psum: %g %d", c.bytes, c.steps);
    T_CHECK(spmd_collective_cost(SPMD_COLL_ALL_GATHER, 5, 1000, &tree, &c) == SPMD_OK && close_to(c.bytes, 800) &&
                c.steps == 3, "tree all_gather G=5: %g %d", c.bytes, c.steps);
    T_CHECK(spmd_collective_cost(SPMD_COLL_ALL_TO_ALL, 8, 1000, &tree, &c) == SPMD_OK && close_to(c.bytes, 1500) &&
                c.steps == 3, "Bruck all_to_all: %g %d", c.bytes, c.steps);
    /* auto: latency-bound small messages take the tree, big ones the ring */
    spmd_cost_model au = {1e-5, 1e-9, SPMD_COST_AUTO};
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 16, 64, &au, &c) == SPMD_OK && c.algo == SPMD_COST_TREE, "auto small");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 16, 1e9, &au, &c) == SPMD_OK && c.algo == SPMD_COST_RING, "auto big");
    T_CHECK(spmd_collective_cost(SPMD_COLL_SLICE, 16, 1e9, NULL, &c) == SPMD_OK && c.bytes == 0 && c.steps == 0, "slice free");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 1, 1e9, NULL, &c) == SPMD_OK && c.bytes == 0, "G=1 free");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, 1e6, NULL, &c) == SPMD_OK && close_to(c.time_s, 6 * 5e-6 + 1.5e6 * 1e-10),
            "default model: %g", c.time_s);
    T_CHECK(spmd_collective_cost(SPMD_COLL_NONE, 4, 1, NULL, &c) == SPMD_ERR_INVALID, "kind none");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 0, 1, NULL, &c) == SPMD_ERR_INVALID, "G 0");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, -1, NULL, &c) == SPMD_ERR_INVALID, "bytes -1");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, NAN, NULL, &c) == SPMD_ERR_INVALID, "bytes NaN");
    spmd_cost_model badm = {-1, 0, SPMD_COST_AUTO};
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, 1, &badm, &c) == SPMD_ERR_INVALID, "negative alpha");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, 4, 1, NULL, NULL) == SPMD_ERR_NULL, "NULL out");

    /* plans for the textbook transitions on a (2,3) mesh, f32 (12, 6) */
    tmesh t23 = {2, {2, 3}, {"x", "y"}};
    spmd_mesh *m = make_mesh(&t23, SPMD_CHECK_DEFAULT);
    if (!m) return;
    static const struct { const char *f, *t; int n; spmd_coll k[3]; const char *ax; double bytes; } pl[] = {
        {"P('x', None)", "P(None, None)", 1, {SPMD_COLL_ALL_GATHER}, "x", 144},           /* (12,6)*4 B, (2-1)/2 */
        {"P(None, None)", "P('x', 'y')", 2, {SPMD_COLL_SLICE, SPMD_COLL_SLICE}, "x", 0},
        {"P('x', None)", "P(None, 'x')", 1, {SPMD_COLL_ALL_TO_ALL}, "x", 72},            /* block (6,6)*4 B, 1/2 */
        {"P(None, None, partial='y')", "P()", 1, {SPMD_COLL_PSUM}, "y", 384},             /* 2*(2/3)*288 */
        {"P(None, None, partial='y')", "P(None, 'y')", 1, {SPMD_COLL_PSUM_SCATTER}, "y", 192},
        {"P(('x', 'y'))", "P(('y', 'x'))", 2, {SPMD_COLL_ALL_GATHER, SPMD_COLL_SLICE}, "x,y", 0},
        {"P('x', 'y')", "P('y', 'x')", 3, {SPMD_COLL_ALL_GATHER, SPMD_COLL_ALL_TO_ALL, SPMD_COLL_SLICE}, "y", 0},
        {"P('x')", "P('x', partial='y')", 1, {SPMD_COLL_ZERO}, "y", 0},
        {"P(None, 'y', partial='x')", "P('x', 'y')", 1, {SPMD_COLL_PSUM_SCATTER}, "x", 0},
    };
    int64_t g[2] = {12, 6};
    for (size_t i = 0; i < sizeof pl / sizeof pl[0]; i++) {
        spmd_spec f, t;
        spmd_reshard_plan p;
        spmd_msg w;
        char text[2048];
        spmd_spec_parse(pl[i].f, &f, NULL);
        spmd_spec_parse(pl[i].t, &t, NULL);
        spmd_status s = spmd_reshard_plan_make(m, &f, &t, SPMD_F32, 2, g, &ring, &p, &w);
        int ok = s == SPMD_OK && p.nsteps == pl[i].n && strcmp(p.steps[0].axes, pl[i].ax) == 0;
        for (int k = 0; k < pl[i].n && ok; k++) ok = p.steps[k].kind == pl[i].k[k];
        if (ok && pl[i].bytes) ok = close_to(p.total.bytes, pl[i].bytes);
        int n = spmd_reshard_plan_text(&p, text, sizeof text);
        T_CHECK(ok && n == (int)strlen(text) && strstr(text, pl[i].f), "plan %s -> %s: %s %s\n%s", pl[i].f, pl[i].t,
                stname(s), w.text, text);
    }
    {
        spmd_spec f, t;
        spmd_reshard_plan p;
        spmd_msg w;
        spmd_spec_parse("P('x')", &f, NULL);
        spmd_spec_parse("P('z')", &t, NULL);
        T_CHECK(spmd_reshard_plan_make(m, &f, &t, SPMD_F32, 2, g, NULL, &p, &w) == SPMD_ERR_AXIS &&
                    strstr(w.text, "to: unknown axis 'z'"), "plan unknown axis: %s", w.text);
        spmd_spec_parse("P(None, 'x')", &t, NULL);
        int64_t g3[2] = {12, 5};
        T_CHECK(spmd_reshard_plan_make(m, &f, &t, SPMD_F32, 2, g3, NULL, &p, &w) == SPMD_ERR_SHAPE, "plan non-dividing");
        T_CHECK(spmd_reshard_plan_make(m, &f, &t, (spmd_dtype)0, 2, g, NULL, &p, &w) == SPMD_ERR_INVALID, "plan dtype 0");
        T_CHECK(spmd_reshard_plan_make(m, &f, &t, SPMD_F32, 2, g, &badm, &p, &w) == SPMD_ERR_INVALID, "plan bad model");
        T_CHECK(spmd_reshard_plan_make(m, &f, NULL, SPMD_F32, 2, g, NULL, &p, &w) == SPMD_ERR_NULL, "plan NULL to");
        T_CHECK(spmd_reshard_plan_text(NULL, NULL, 0) == -1, "plan text NULL");
    }
    spmd_mesh_destroy(m);
}

/* ---- mesh-level bad input: refused with a message, nothing written ------------------------- */
static void test_mesh_level_errors(void) {
    spmd_mesh *m = mesh1("x", 2);
    if (!m) return;
    spmd_spec sp;
    spmd_msg w;
    spmd_spec_parse("P('x')", &sp, NULL);
    int64_t g[2] = {4, 2}, out[2] = {-7, -7}, neg[2] = {4, -2};
    char buf[64] = "untouched";
    T_CHECK(spmd_block_shape(m, &sp, -1, g, out, &w) == SPMD_ERR_INVALID && out[0] == -7 && w.text[0], "rank -1");
    T_CHECK(spmd_block_shape(m, &sp, 2, neg, out, &w) == SPMD_ERR_SHAPE && out[0] == -7 && strstr(w.text, "negative"),
            "negative dim: %s", w.text);
    T_CHECK(spmd_block_start(m, &sp, 2, g, -1, out, &w) == SPMD_ERR_INVALID && out[0] == -7, "device -1");
    T_CHECK(spmd_sharding_text(m, NULL, 2, g, buf, sizeof buf, &w) == SPMD_ERR_NULL && strcmp(buf, "untouched") == 0,
            "picture NULL spec");
    T_CHECK(spmd_sharding_text(NULL, &sp, 2, g, buf, sizeof buf, &w) == SPMD_ERR_NULL, "picture NULL mesh");
    T_CHECK(spmd_sharding_text(m, &sp, 9, g, buf, sizeof buf, &w) == SPMD_ERR_INVALID, "picture rank 9");
    spmd_spec bad = sp;
    bad.naxes[0] = 9;
    T_CHECK(spmd_spec_check(m, &bad, 2, g, &w) == SPMD_ERR_INVALID && strstr(w.text, "9 axes"), "spec with 9 axes: %s",
            w.text);
    float gd[8] = {0}, bd[4] = {1, 2, 3, 4};
    spmd_array ga = spmd_array_nd(gd, SPMD_F32, 2, g), b3 = spmd_array_3d(bd, SPMD_F32, 2, 2, 1);
    T_CHECK(spmd_device_put(m, &sp, &ga, 0, &b3, &w) == SPMD_ERR_SHAPE && bd[0] == 1, "device_put block of rank 3");
    spmd_array gneg = spmd_array_nd(gd, SPMD_F32, 2, neg);
    const void *blocks[2] = {bd, bd};
    T_CHECK(spmd_assemble(m, &sp, blocks, &gneg, &w) == SPMD_ERR_SHAPE && gd[0] == 0, "assemble negative dim");
    T_CHECK(spmd_assemble(m, NULL, blocks, &ga, &w) == SPMD_ERR_NULL && gd[0] == 0, "assemble NULL spec");
    T_CHECK(spmd_assemble(NULL, &sp, blocks, &ga, &w) == SPMD_ERR_NULL && gd[0] == 0, "assemble NULL mesh");
    spmd_cost c;
    memset(&c, 0x5a, sizeof c);
    spmd_cost before = c;
    T_CHECK(spmd_collective_cost(SPMD_COLL_COUNT, 4, 1, NULL, &c) == SPMD_ERR_INVALID &&
                memcmp(&c, &before, sizeof c) == 0, "cost of an unknown kind leaves out unchanged");
    T_CHECK(spmd_collective_cost(SPMD_COLL_PSUM, SPMD_MAX_DEVICES + 1, 1, NULL, &c) == SPMD_ERR_INVALID, "G too large");
    spmd_mesh_destroy(m);
}

/* ---- parse(format(s)) == s for every spec the sweep uses, trailing Nones included ------------ */
static void test_spec_round_trip(void) {
    static const tmesh tm = {3, {2, 1, 3}, {"a", "b", "c"}};
    tspec *specs = (tspec *)xmalloc(4096 * sizeof(tspec));
    int bad = 0, total = 0;
    char first[160] = "";
    for (int rank = 0; rank <= 3; rank++) {
        int n = enum_specs(&tm, rank, 1, specs, 4096);
        for (int i = 0; i < n; i++, total++) {
            spmd_spec s = ts_make(&tm, &specs[i]), back;
            char b[256];
            int len = spmd_spec_format(&s, b, sizeof b);
            spmd_status st = spmd_spec_parse(b, &back, NULL);
            if (len != (int)strlen(b) || st != SPMD_OK || memcmp(&s, &back, sizeof s) != 0) {
                if (!bad++) snprintf(first, sizeof first, "%.150s", b);
            }
        }
    }
    free(specs);
    T_CHECK(bad == 0 && total > 100, "round trip: %d of %d specs differ, first %s", bad, total, first);
}

/* ---- the textbook transitions take exactly the textbook plan -------------------------------- */
typedef struct { spmd_coll k; const char *ax; int dim, dim2; } tstep;

static void test_textbook_plans(void) {
    static const tmesh meshes[2] = {{2, {2, 2}, {"x", "y"}}, {2, {2, 3}, {"x", "y"}}};
    static const struct { const char *f, *t; int rank, n; tstep st[2]; } tb[] = {
        /* sharded -> replicated: one all_gather (axes sharing a dimension: one gather over both) */
        {"P('x')", "P()", 1, 1, {{SPMD_COLL_ALL_GATHER, "x", 0, -1}}},
        {"P(None, 'y')", "P(None, None)", 2, 1, {{SPMD_COLL_ALL_GATHER, "y", 1, -1}}},
        {"P(('x', 'y'))", "P()", 1, 1, {{SPMD_COLL_ALL_GATHER, "x,y", 0, -1}}},
        {"P(None, ('y', 'x'), None)", "P()", 3, 1, {{SPMD_COLL_ALL_GATHER, "y,x", 1, -1}}},
        {"P('x', ('y'))", "P('x')", 2, 1, {{SPMD_COLL_ALL_GATHER, "y", 1, -1}}},
        /* replicated -> sharded: a local slice, nothing sent */
        {"P()", "P('x')", 1, 1, {{SPMD_COLL_SLICE, "x", 0, -1}}},
        {"P()", "P(None, ('y', 'x'))", 2, 1, {{SPMD_COLL_SLICE, "y,x", 1, -1}}},
        {"P('x')", "P('x', None, 'y')", 3, 1, {{SPMD_COLL_SLICE, "y", 2, -1}}},
        /* an axis (or a run of axes) moved between dimensions: one all_to_all */
        {"P('x', None)", "P(None, 'x')", 2, 1, {{SPMD_COLL_ALL_TO_ALL, "x", 1, 0}}},
        {"P(None, None, 'y')", "P('y')", 3, 1, {{SPMD_COLL_ALL_TO_ALL, "y", 0, 2}}},
        {"P(('x', 'y'), None)", "P(None, ('x', 'y'))", 2, 1, {{SPMD_COLL_ALL_TO_ALL, "x,y", 1, 0}}},
        {"P(None, ('y', 'x'))", "P(('y', 'x'))", 2, 1, {{SPMD_COLL_ALL_TO_ALL, "y,x", 0, 1}}},
        {"P('x', 'y')", "P(('x', 'y'))", 2, 1, {{SPMD_COLL_ALL_TO_ALL, "y", 0, 1}}},
        /* partial -> sharded: one psum_scatter */
        {"P(partial='x')", "P('x')", 1, 1, {{SPMD_COLL_PSUM_SCATTER, "x", 0, -1}}},
        {"P(None, partial=('x', 'y'))", "P(None, ('y', 'x'))", 2, 1, {{SPMD_COLL_PSUM_SCATTER, "y,x", 1, -1}}},
        {"P('y', partial='x')", "P(('y', 'x'))", 1, 1, {{SPMD_COLL_PSUM_SCATTER, "x", 0, -1}}},
        /* partial -> replicated: one psum */
        {"P(partial='y')", "P()", 2, 1, {{SPMD_COLL_PSUM, "y", -1, -1}}},
        {"P(partial=('x', 'y'))", "P()", 0, 1, {{SPMD_COLL_PSUM, "x,y", -1, -1}}},
        {"P('x', partial='y')", "P('x')", 3, 1, {{SPMD_COLL_PSUM, "y", -1, -1}}},
        /* replicated -> partial: local */
        {"P()", "P(partial='x')", 1, 1, {{SPMD_COLL_ZERO, "x", -1, -1}}},
        /* nothing: trailing None and P() / P(None) are the same sharding */
        {"P('x')", "P('x', None, None)", 3, 0, {{SPMD_COLL_NONE, "", 0, 0}}},
        {"P(None)", "P()", 1, 0, {{SPMD_COLL_NONE, "", 0, 0}}},
        /* two steps: the partial sum reduced before the gather, on the smaller block */
        {"P('x', partial='y')", "P()", 1, 2, {{SPMD_COLL_PSUM, "y", -1, -1}, {SPMD_COLL_ALL_GATHER, "x", 0, -1}}},
        {"P(partial='x')", "P('y')", 1, 2, {{SPMD_COLL_SLICE, "y", 0, -1}, {SPMD_COLL_PSUM, "x", -1, -1}}},
    };
    for (int mi = 0; mi < 2; mi++) {
        spmd_mesh *m = make_mesh(&meshes[mi], SPMD_CHECK_DEFAULT);
        if (!m) return;
        for (size_t i = 0; i < sizeof tb / sizeof tb[0]; i++) {
            spmd_spec f, t;
            spmd_reshard_plan p;
            spmd_msg w;
            char text[2048];
            int64_t g[3] = {12, 12, 12};
            T_CHECK(spmd_spec_parse(tb[i].f, &f, NULL) == SPMD_OK && spmd_spec_parse(tb[i].t, &t, NULL) == SPMD_OK,
                    "parse %s / %s", tb[i].f, tb[i].t);
            spmd_status s = spmd_reshard_plan_make(m, &f, &t, SPMD_F32, tb[i].rank, g, NULL, &p, &w);
            int ok = s == SPMD_OK && p.nsteps == tb[i].n, local = 1;
            for (int k = 0; k < tb[i].n && ok; k++) {
                const spmd_reshard_step *st = &p.steps[k];
                ok = st->kind == tb[i].st[k].k && strcmp(st->axes, tb[i].st[k].ax) == 0 && st->dim == tb[i].st[k].dim &&
                     (st->kind != SPMD_COLL_ALL_TO_ALL || st->dim2 == tb[i].st[k].dim2);
                int is_local = st->kind == SPMD_COLL_SLICE || st->kind == SPMD_COLL_ZERO;
                local &= is_local;
                if (is_local) ok &= st->cost.bytes == 0 && st->cost.steps == 0;
                else ok &= st->cost.bytes > 0 && st->cost.steps > 0;
            }
            if (ok && local) ok = p.total.bytes == 0 && p.total.steps == 0;
            spmd_reshard_plan_text(&p, text, sizeof text);
            T_CHECK(ok, "mesh %d: plan %s -> %s (rank %d) is not the textbook one: %s %s\n%s", mi, tb[i].f, tb[i].t,
                    tb[i].rank, stname(s), w.text, text);
        }
        spmd_mesh_destroy(m);
    }
}

/* ---- reshard errors: every device refused alike, the mesh stays usable --------------------- */
typedef struct {
    spmd_status st[8];
    char msg[8][200];
    int after[8];
} rerr;

static void reshard_errors_dev(spmd_dev *d, void *arg) {
    rerr *e = (rerr *)arg;
    int id = spmd_device_id(d);
    float blk[12] = {0}, out[24];
    spmd_spec f, t, bad, dup;
    spmd_spec_parse("P('x', None)", &f, NULL);
    spmd_spec_parse("P(None, None)", &t, NULL);
    spmd_spec_parse("P('q', None)", &bad, NULL);
    spmd_spec_parse("P('x', None)", &dup, NULL);
    strcpy(dup.axes[0][0], "y");
    dup.naxes[1] = 1;
    strcpy(dup.axes[1][0], "y");
    spmd_array x = spmd_array_2d(blk, SPMD_F32, 2, 6), y = spmd_array_2d(out, SPMD_F32, 4, 6);
    spmd_array ywrong = spmd_array_2d(out, SPMD_F32, 2, 6), yi = spmd_array_2d(out, SPMD_I32, 4, 6);
    spmd_status s[7];
    s[0] = spmd_reshard(d, &x, &f, &t, &ywrong, NULL);
    if (id == 0) snprintf(e->msg[0], sizeof e->msg[0], "%.190s", spmd_last_error(d));
    s[1] = spmd_reshard(d, &x, &bad, &t, &y, NULL);
    if (id == 0) snprintf(e->msg[1], sizeof e->msg[1], "%.190s", spmd_last_error(d));
    s[2] = spmd_reshard(d, &x, &f, &dup, &y, NULL);
    s[3] = spmd_reshard(d, &x, &f, NULL, &y, NULL);
    s[4] = spmd_reshard(d, NULL, &f, &t, &y, NULL);
    s[5] = spmd_reshard(d, &x, &f, &t, &yi, NULL);
    spmd_array xn = spmd_array_2d(NULL, SPMD_F32, 2, 6);
    s[6] = spmd_reshard(d, &xn, &f, &t, &y, NULL);
    static const spmd_status want[7] = {SPMD_ERR_SHAPE, SPMD_ERR_AXIS, SPMD_ERR_DUP_AXIS, SPMD_ERR_NULL, SPMD_ERR_NULL,
                                        SPMD_ERR_SHAPE, SPMD_ERR_NULL};
    e->st[id] = SPMD_OK;
    for (int k = 0; k < 7; k++)
        if (s[k] != want[k] && e->st[id] == SPMD_OK) e->st[id] = s[k] ? s[k] : SPMD_ERR_STATE;
    /* still usable: a real reshard and a psum */
    for (int i = 0; i < 12; i++) blk[i] = (float)(id * 100 + i);
    spmd_status r = spmd_reshard(d, &x, &f, &t, &y, NULL);
    int ok = r == SPMD_OK;
    for (int i = 0; i < 24 && ok; i++) ok = out[i] == (float)((i / 12) * 2 * 100 + (id % 2) * 100 + i % 12) ||
                                             out[i] == (float)((i / 12) * 200 + (id & 1) * 100 + i % 12);
    int32_t one = 1, sum = 0;
    ok &= spmd_psum(d, &one, &sum, 1, SPMD_I32, "*", NULL) == SPMD_OK && sum == 4;
    e->after[id] = ok;
}

/* rank 0, size-0 dimensions, a huge intermediate block, bad arrays */
static void reshard_edges_dev(spmd_dev *d, void *arg) {
    rerr *e = (rerr *)arg;
    int id = spmd_device_id(d), c[2] = {id / 2, id % 2}, k = 0;
    spmd_spec px, pxy, none, sx, sy_col, py_part;
    spmd_spec_parse("P(partial='x')", &px, NULL);
    spmd_spec_parse("P(partial=('x', 'y'))", &pxy, NULL);
    spmd_spec_parse("P()", &none, NULL);
    spmd_spec_parse("P('x')", &sx, NULL);
    spmd_spec_parse("P(None, 'x')", &sy_col, NULL);
    spmd_spec_parse("P(None, None, partial='y')", &py_part, NULL);
    e->st[id] = SPMD_OK;
#define EDGE(cond) do { k++; if (!(cond) && e->st[id] == SPMD_OK) { e->st[id] = SPMD_ERR_STATE; e->after[id] = k; } } while (0)
    /* rank 0: a partial sum reduced, then made partial again */
    float v = (float)(id + 1), r = -1;
    spmd_array x0 = spmd_array_nd(&v, SPMD_F32, 0, NULL), y0 = spmd_array_nd(&r, SPMD_F32, 0, NULL);
    EDGE(spmd_reshard(d, &x0, &px, &none, &y0, NULL) == SPMD_OK && r == (float)(2 * (c[1] + 1) + 2));
    EDGE(spmd_reshard(d, &x0, &none, &pxy, &y0, NULL) == SPMD_OK && r == (id == 0 ? v : 0.0f));
    /* size-0 dimensions move nothing but succeed */
    float dummy[4];
    int64_t s04[2] = {0, 4}, s02[2] = {0, 2}, s40[2] = {4, 0}, s20[2] = {2, 0};
    spmd_array a = spmd_array_nd(dummy, SPMD_F32, 2, s04), b = spmd_array_nd(dummy, SPMD_F32, 2, s02);
    EDGE(spmd_reshard(d, &a, &sx, &sy_col, &b, NULL) == SPMD_OK);
    a = spmd_array_nd(NULL, SPMD_BF16, 2, s40);
    b = spmd_array_nd(NULL, SPMD_BF16, 2, s20);
    spmd_spec sy;
    spmd_spec_parse("P('y')", &sy, NULL);
    EDGE(spmd_reshard(d, &a, &py_part, &sy, &b, NULL) == SPMD_OK);
    /* an intermediate block too large for memory: refused by every device alike */
    int64_t big[2] = {(int64_t)1 << 38, (int64_t)1 << 20}; /* 2^61 bytes of f64; gathered, 2^62 */
    spmd_spec fxy, fyx;
    spmd_spec_parse("P('x', 'y')", &fxy, NULL);
    spmd_spec_parse("P('y', 'x')", &fyx, NULL);
    a = spmd_array_nd(dummy, SPMD_F64, 2, big);
    EDGE(spmd_reshard(d, &a, &fxy, &fyx, &a, NULL) == SPMD_ERR_OVERFLOW);
    /* bad arrays */
    int64_t neg[2] = {2, -1};
    a = spmd_array_nd(dummy, SPMD_F32, 2, neg);
    EDGE(spmd_reshard(d, &a, &sx, &none, &a, NULL) == SPMD_ERR_SHAPE);
    a = spmd_array_nd(dummy, SPMD_F32, 2, s02);
    a.rank = 9;
    EDGE(spmd_reshard(d, &a, &sx, &none, &a, NULL) == SPMD_ERR_INVALID);
    a.rank = 2;
    a.dtype = SPMD_DTYPE_COUNT;
    EDGE(spmd_reshard(d, &a, &sx, &none, &a, NULL) == SPMD_ERR_INVALID);
    spmd_spec long3;
    spmd_spec_parse("P('x', None, None)", &long3, NULL);
    a = spmd_array_nd(dummy, SPMD_F32, 2, s02);
    EDGE(spmd_reshard(d, &a, &long3, &none, &a, NULL) == SPMD_ERR_SHAPE);
    EDGE(spmd_reshard(d, &a, &none, &long3, &a, NULL) == SPMD_ERR_SHAPE);
#undef EDGE
}

static void test_reshard_edges(void) {
    tmesh t22 = {2, {2, 2}, {"x", "y"}};
    spmd_mesh *m = make_mesh(&t22, SPMD_CHECK_DEFAULT);
    if (!m) return;
    rerr e;
    memset(&e, 0, sizeof e);
    spmd_status s = spmd_run(m, reshard_edges_dev, &e);
    for (int d = 0; d < 4; d++)
        if (tl_local(m, d))
            T_CHECK(e.st[d] == SPMD_OK, "device %d: reshard edge case %d failed (run: %s)", d, e.after[d], stname(s));
    T_CHECK(spmd_mesh_status(m) == SPMD_OK, "mesh not broken by the edge cases");
    spmd_mesh_destroy(m);
}

static void test_reshard_errors(void) {
    tmesh t22 = {2, {2, 2}, {"x", "y"}};
    spmd_mesh *m = make_mesh(&t22, SPMD_CHECK_DEFAULT);
    if (!m) return;
    rerr e;
    memset(&e, 0, sizeof e);
    spmd_run(m, reshard_errors_dev, &e);
    for (int d = 0; d < 4; d++) {
        if (!tl_local(m, d)) continue;
        T_CHECK(e.st[d] == SPMD_OK, "device %d: an error path gave %s", d, stname(e.st[d]));
        T_CHECK(e.after[d], "device %d: mesh not usable after the errors", d);
    }
    if (tl_local(m, 0)) { /* device 0 keeps the messages */
        T_CHECK(strstr(e.msg[0], "out is f32 (2,6) but the block of P(None, None) is f32 (4,6)") != NULL, "message: %s",
                e.msg[0]);
        T_CHECK(strstr(e.msg[1], "unknown axis 'q'") != NULL, "message: %s", e.msg[1]);
    }
    T_CHECK(spmd_mesh_status(m) == SPMD_OK, "mesh not broken");
    spmd_mesh_destroy(m);
    spmd_array x;
    memset(&x, 0, sizeof x);
    T_CHECK(spmd_reshard(NULL, &x, NULL, NULL, &x, NULL) == SPMD_ERR_NULL, "reshard NULL device");
}

int main(void) {
    SEED = env_seed(0x5AD5EED);
    QUICK = env_quick();
    printf("test_shard: seed 0x%llx%s\n", (unsigned long long)SEED, QUICK ? " (quick)" : "");
    double t0 = now_s();
    test_specs();
    test_put_assemble();
    test_pictures();
    test_shard_map_random();
    test_tutorial();
    test_shard_map_outputs();
    test_plans_and_costs();
    test_spec_round_trip();
    test_mesh_level_errors();
    test_textbook_plans();
    test_reshard_errors();
    test_reshard_edges();
    test_reshard_sweep();
    printf("(%.1f s)\n", now_s() - t0);
    return t_summary();
}
