/* test_plans.c - the schedules of the algorithms across processes
   (spmdcoll.h's >>plans), checked without a network: every rank's plan of
   an operation is run by a plain simulator written here, with messages
   between each pair of ranks matched in order (a rank waits for a receive
   whose message has not been sent; no rank able to move is a deadlock).
   Every element of every rank's buffer holds a node of an expression
   tree (leaves: rank j's element e; inner nodes: (left, right), shared by
   a hash table, so equal trees are equal ids). At the end each rank's
   element e must be the canonical tree over the P leaves of element e,
   built here from its recursive definition (testlib.h's comment at
   tl_tree_f32), and each rank's messages, elements sent and peers must be
   within the algorithm's bounds:
     recursive doubling   at most ceil(log2 P) messages of n elements;
     Rabenseifner         at most 2 log2 P' + 1 messages to at most
                          log2 P' + 1 peers; a rank of the P' receives every
                          block but its own exactly once in the all-gather
                          (n - its block elements copied in) and sends
                          between n - its block and twice that (+ n for
                          the post-step).
   Sizes: every P from 1 to 64 with several n, and samples up to 16,384
   (4,097 with SPMD_TEST_QUICK, as under the sanitizers). */
#define SPMD_STATIC /* the implementation's functions stay in this file (make links tests/impl.c too) */
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <stdlib.h>
#include <string.h>

/* ---- expression trees, hash-consed ---- */
typedef struct {
    int32_t *l, *r; /* node id - nleaf: its children */
    int n, cap;
    int32_t *tab; /* open addressing: node index + 1, 0 empty */
    size_t tcap;
    int nleaf;
} forest;
static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t z = a * 0x9e3779b97f4a7c15u ^ (b + 0x632be59bd9b4e019u);
    z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9u;
    return z ^ (z >> 32);
}
static void forest_grow(forest *f) {
    size_t i, cap = f->tcap ? f->tcap * 2 : 1 << 16;
    int32_t *t = (int32_t *)xmalloc(cap * sizeof *t);
    memset(t, 0, cap * sizeof *t);
    for (i = 0; i < (size_t)f->n; i++) {
        size_t h = mix((uint64_t)f->l[i], (uint64_t)f->r[i]) & (cap - 1);
        while (t[h]) h = (h + 1) & (cap - 1);
        t[h] = (int32_t)i + 1;
    }
    free(f->tab);
    f->tab = t;
    f->tcap = cap;
}
/* The node (a, b): its id. */
static int32_t node(forest *f, int32_t a, int32_t b) {
    size_t h;
    if ((size_t)f->n * 2 >= f->tcap) forest_grow(f);
    h = mix((uint64_t)a, (uint64_t)b) & (f->tcap - 1);
    while (f->tab[h]) {
        int32_t i = f->tab[h] - 1;
        if (f->l[i] == a && f->r[i] == b) return f->nleaf + i;
        h = (h + 1) & (f->tcap - 1);
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 1 << 16;
        f->l = (int32_t *)realloc(f->l, (size_t)f->cap * sizeof *f->l);
        f->r = (int32_t *)realloc(f->r, (size_t)f->cap * sizeof *f->r);
        if (!f->l || !f->r) abort();
    }
    f->l[f->n] = a;
    f->r[f->n] = b;
    f->tab[h] = f->n + 1;
    return f->nleaf + f->n++;
}
/* The canonical tree over leaves j * n + e, j = 0..P-1 (its definition:
   P' the largest power of two <= P, r = P - P'; a perfect tree over P'
   leaves, leaf v being (x_2v, x_2v+1) for v < r, else x_v+r). */
static int32_t canon_at(forest *f, int n, int e, int r, int lo, int cnt) {
    if (cnt == 1)
        return lo < r ? node(f, (2 * lo) * n + e, (2 * lo + 1) * n + e) : (int32_t)((lo + r) * n + e);
    return node(f, canon_at(f, n, e, r, lo, cnt / 2), canon_at(f, n, e, r, lo + cnt / 2, cnt / 2));
}

/* ---- the simulator ---- */
typedef struct msg {
    struct msg *next;
    int from;
    int64_t len;
    int32_t data[];
} msg;
typedef struct {
    int msgs, peers;
    int64_t sent, copied; /* elements sent; received into place */
} counts;

/* Run the plans of algo for P ranks and n elements; 1 if every check
   held (failures are reported, once per (algo, P, n)). */
static int simulate(int algo, int P, int n, counts *out) {
    spmd__plan_x *pl = (spmd__plan_x *)xmalloc((size_t)P * sizeof *pl);
    int32_t **buf = (int32_t **)xmalloc((size_t)P * sizeof *buf);
    msg **inbox = (msg **)xmalloc((size_t)P * sizeof *inbox); /* each rank's, in the order sent */
    int *pc = (int *)xmalloc((size_t)P * sizeof *pc), *sent = (int *)xmalloc((size_t)P * sizeof *sent);
    unsigned char *seen = (unsigned char *)xmalloc((size_t)P);
    forest f;
    int ok = 1, done = 0, j, moved = 1;
    const char *an = algo == SPMD__PLAN_RD ? "recursive doubling" : "Rabenseifner";
    memset(&f, 0, sizeof f);
    f.nleaf = P * n;
    memset(inbox, 0, (size_t)P * sizeof *inbox);
    for (j = 0; j < P; j++) {
        out[j].copied = 0;
        buf[j] = (int32_t *)xmalloc((size_t)(n ? n : 1) * sizeof(int32_t));
        for (int e = 0; e < n; e++) buf[j][e] = j * n + e;
        pc[j] = sent[j] = 0;
        if (spmd__plan_allreduce(algo, P, j, n, &pl[j]) != 0) {
            T_CHECK(0, "%s P %d n %d: no plan for rank %d", an, P, n, j);
            ok = 0;
        }
    }
    while (ok && done < P && moved) { /* each pass: every rank moves as far as it can */
        moved = 0;
        for (j = 0; j < P && ok; j++) {
            while (pc[j] < pl[j].nsteps) {
                const spmd__pstep *s = &pl[j].step[pc[j]];
                if (s->peer < 0 || s->peer >= P || s->peer == j || s->soff < 0 || s->roff < 0 ||
                    s->soff + s->slen > n || s->roff + s->rlen > n) {
                    T_CHECK(0, "%s P %d n %d: rank %d step %d: peer %d or range outside", an, P, n, j, pc[j], s->peer);
                    ok = 0;
                    break;
                }
                if (!sent[j] && s->slen > 0) { /* the send: the range as it is before the step */
                    msg *mm = (msg *)xmalloc(sizeof *mm + (size_t)s->slen * sizeof(int32_t)), **at = &inbox[s->peer];
                    mm->next = NULL;
                    mm->from = j;
                    mm->len = s->slen;
                    memcpy(mm->data, buf[j] + s->soff, (size_t)s->slen * sizeof(int32_t));
                    while (*at) at = &(*at)->next;
                    *at = mm;
                }
                sent[j] = 1;
                if (s->rlen > 0) {
                    msg **at = &inbox[j], *mm;
                    while (*at && (*at)->from != s->peer) at = &(*at)->next; /* the peer's first */
                    if (!(mm = *at)) break; /* not sent yet: wait */
                    if (mm->len != s->rlen) {
                        T_CHECK(0, "%s P %d n %d: rank %d step %d receives %lld elements, rank %d sent %lld", an, P, n,
                                j, pc[j], (long long)s->rlen, s->peer, (long long)mm->len);
                        ok = 0;
                        break;
                    }
                    *at = mm->next;
                    if (s->how == SPMD__PLAN_COPY) out[j].copied += s->rlen;
                    for (int64_t e = 0; e < s->rlen; e++) {
                        int32_t *d = &buf[j][s->roff + e], x = mm->data[e];
                        *d = s->how == SPMD__PLAN_COPY ? x : s->how == SPMD__PLAN_LEFT ? node(&f, x, *d) : node(&f, *d, x);
                    }
                    free(mm);
                }
                pc[j]++;
                sent[j] = 0;
                moved = 1;
                if (pc[j] == pl[j].nsteps) done++;
            }
        }
    }
    if (ok) {
        int stuck = 0;
        for (j = 0; j < P; j++) stuck += pc[j] < pl[j].nsteps;
        if (stuck) {
            T_CHECK(0, "%s P %d n %d: deadlock: %d ranks wait for messages never sent", an, P, n, stuck);
            ok = 0;
        }
        for (j = 0; ok && j < P; j++)
            if (inbox[j]) {
                T_CHECK(0, "%s P %d n %d: rank %d's message to rank %d is never received", an, P, n, inbox[j]->from, j);
                ok = 0;
            }
    }
    for (int e = 0; ok && e < n; e++) { /* the canonical tree everywhere */
        int Pp = 1;
        while (Pp * 2 <= P) Pp *= 2;
        int32_t want = canon_at(&f, n, e, P - Pp, 0, Pp);
        for (j = 0; j < P && ok; j++)
            if (buf[j][e] != want) {
                T_CHECK(0, "%s P %d n %d: rank %d element %d is not the canonical tree", an, P, n, j, e);
                ok = 0;
            }
    }
    for (j = 0; j < P; j++) { /* the counts */
        int np = 0;
        memset(seen, 0, (size_t)P);
        out[j].msgs = 0;
        out[j].sent = 0;
        for (int k = 0; k < pl[j].nsteps; k++) {
            const spmd__pstep *s = &pl[j].step[k];
            if (s->slen <= 0) continue;
            out[j].msgs++;
            out[j].sent += s->slen;
            if (!seen[s->peer]) seen[s->peer] = 1, np++;
        }
        out[j].peers = np;
    }
    for (j = 0; j < P; j++)
        while (inbox[j]) {
            msg *mm = inbox[j];
            inbox[j] = mm->next;
            free(mm);
        }
    for (j = 0; j < P; j++) free(buf[j]);
    free(buf), free(pl), free(inbox), free(pc), free(sent), free(seen);
    free(f.l), free(f.r), free(f.tab);
    return ok;
}

static int ceil_log2(int P) {
    int k = 0;
    while ((1 << k) < P) k++;
    return k;
}

/* The bounds of one (algo, P, n); 1 if they hold. */
static int bounds_ok(int algo, int P, int n, const counts *c) {
    int Pp = 1, lg = 0, r, j, bad = -1;
    while (Pp * 2 <= P) Pp *= 2, lg++;
    r = P - Pp;
    for (j = 0; j < P && bad < 0; j++) {
        int pair = j < 2 * r, left = pair && j % 2 == 0, v = pair ? j / 2 : j - r;
        if (left) { /* its input, once, and the result back */
            if (c[j].msgs != (n > 0) || c[j].sent != n || c[j].copied != n) bad = j;
        } else if (algo == SPMD__PLAN_RD) {
            int want = n > 0 ? lg + pair : 0;
            if (c[j].msgs != want || c[j].msgs > ceil_log2(P) || c[j].sent != (int64_t)want * n || c[j].copied) bad = j;
        } else {
            int b = 0; /* its block: halving at distances 1, 2, 4... leaves v with block bitreverse(v) */
            for (int k = 0; k < lg; k++) b |= (v >> k & 1) << (lg - 1 - k);
            int64_t own = (int64_t)n * (b + 1) / Pp - (int64_t)n * b / Pp;
            /* every other block reaches it once; the post-step sends n more */
            if (c[j].msgs > 2 * lg + pair || c[j].peers > lg + pair || c[j].copied != n - own ||
                c[j].sent < (n - own) + (pair ? n : 0) || c[j].sent > 2 * (n - own) + (pair ? n : 0) + Pp)
                bad = j;
        }
    }
    if (bad >= 0)
        T_CHECK(0, "%s P %d n %d: rank %d sends %d messages to %d peers, %lld elements, and copies %lld in: outside "
                "the bounds", algo == SPMD__PLAN_RD ? "recursive doubling" : "Rabenseifner", P, n, bad, c[bad].msgs,
                c[bad].peers, (long long)c[bad].sent, (long long)c[bad].copied);
    return bad < 0;
}

static void check(int algo, int P, int n, int *runs, int *good) {
    counts *c = (counts *)xmalloc((size_t)P * sizeof *c);
    (*runs)++;
    if (simulate(algo, P, n, c) && bounds_ok(algo, P, n, c)) (*good)++;
    free(c);
}

int main(void) {
    static const int big[] = {65, 96, 100, 127, 128, 129, 255, 1000, 1023, 1024, 1025, 3000, 4095, 4097, 16383, 16384};
    int runs = 0, good = 0, P, a, i;
    double t0 = now_s();
    counts c1;
    T_CHECK(spmd__plan_allreduce(SPMD__PLAN_RD, 0, 0, 1, &(spmd__plan_x){0}) == -1 &&
                spmd__plan_allreduce(SPMD__PLAN_RD, 4, 4, 1, &(spmd__plan_x){0}) == -1 &&
                spmd__plan_allreduce(7, 4, 0, 1, &(spmd__plan_x){0}) == -1,
            "plans: P, rank or algorithm outside refused");
    T_CHECK(simulate(SPMD__PLAN_RD, 1, 3, &c1) && c1.msgs == 0, "plans: one rank sends nothing");
    for (a = SPMD__PLAN_RD; a <= SPMD__PLAN_RAB; a++)
        for (P = 1; P <= 64; P++) {
            int ns[6] = {0, 1, 3, P - 1, P + 2, 3 * P + 5};
            for (i = 0; i < 6; i++)
                if (ns[i] >= 0 && (i == 0 || ns[i] != ns[i - 1])) check(a, P, ns[i], &runs, &good);
        }
    for (a = SPMD__PLAN_RD; a <= SPMD__PLAN_RAB; a++) /* (quick, as under the sanitizers: up to 4,097) */
        for (i = 0; i < (int)(sizeof big / sizeof big[0]) && (!env_quick() || big[i] <= 4097); i++)
            check(a, big[i], big[i] > 4096 ? 3 : 7, &runs, &good);
    T_CHECK(good == runs, "plans: %d of %d (algorithm, P, n) runs hold every check", good, runs);
    printf("test_plans: %d runs, P 1..64 and samples to %d, in %.2f s\n", runs, env_quick() ? 4097 : 16384, now_s() - t0);
    return t_summary();
}
