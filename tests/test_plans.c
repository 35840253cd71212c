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

/* One simulation: every rank's plan, buffer and place in it. */
typedef struct {
    int algo, P, n, ok;
    const char *an;
    spmd__plan_x *pl;
    int32_t **buf;
    msg **inbox; /* each rank's, in the order sent */
    int *pc, *sent;
    forest f;
    counts *out;
} sim;

/* Rank j's steps as far as its messages let it go; 1 if it moved. */
static int sim_rank(sim *m, int j) {
    int moved = 0;
    while (m->ok && m->pc[j] < m->pl[j].nsteps) {
        const spmd__pstep *s = &m->pl[j].step[m->pc[j]];
        if (s->peer < 0 || s->peer >= m->P || s->peer == j || s->soff < 0 || s->roff < 0 ||
            s->soff + s->slen > m->n || s->roff + s->rlen > m->n) {
            T_CHECK(0, "%s P %d n %d: rank %d step %d: peer %d or range outside", m->an, m->P, m->n, j, m->pc[j], s->peer);
            m->ok = 0;
            break;
        }
        if (!m->sent[j] && s->slen > 0) { /* the send: the range as it is before the step */
            msg *mm = (msg *)xmalloc(sizeof *mm + (size_t)s->slen * sizeof(int32_t)), **at = &m->inbox[s->peer];
            mm->next = NULL;
            mm->from = j;
            mm->len = s->slen;
            memcpy(mm->data, m->buf[j] + s->soff, (size_t)s->slen * sizeof(int32_t));
            while (*at) at = &(*at)->next;
            *at = mm;
        }
        m->sent[j] = 1;
        if (s->rlen > 0) {
            msg **at = &m->inbox[j], *mm;
            while (*at && (*at)->from != s->peer) at = &(*at)->next; /* the peer's first */
            if (!(mm = *at)) break;                                     /* not sent yet: wait */
            if (mm->len != s->rlen) {
                T_CHECK(0, "%s P %d n %d: rank %d step %d receives %lld elements, rank %d sent %lld", m->an, m->P, m->n,
                        j, m->pc[j], (long long)s->rlen, s->peer, (long long)mm->len);
                m->ok = 0;
                break;
            }
            *at = mm->next;
            if (s->how == SPMD__PLAN_COPY) m->out[j].copied += s->rlen;
            for (int64_t e = 0; e < s->rlen; e++) {
                int32_t *d = &m->buf[j][s->roff + e], x = mm->data[e];
                *d = s->how == SPMD__PLAN_COPY ? x : s->how == SPMD__PLAN_LEFT ? node(&m->f, x, *d) : node(&m->f, *d, x);
            }
            free(mm);
        }
        m->pc[j]++;
        m->sent[j] = 0;
        moved = 1;
    }
    return moved;
}

/* After the run: nobody waits, nothing is left unreceived, and every
   element of every rank is the canonical tree. */
static void sim_results(sim *m) {
    int j, stuck = 0, Pp = 1;
    for (j = 0; j < m->P; j++) stuck += m->pc[j] < m->pl[j].nsteps;
    if (m->ok && stuck) {
        T_CHECK(0, "%s P %d n %d: deadlock: %d ranks wait for messages never sent", m->an, m->P, m->n, stuck);
        m->ok = 0;
    }
    for (j = 0; m->ok && j < m->P; j++)
        if (m->inbox[j]) {
            T_CHECK(0, "%s P %d n %d: rank %d's message to rank %d is never received", m->an, m->P, m->n,
                    m->inbox[j]->from, j);
            m->ok = 0;
        }
    while (Pp * 2 <= m->P) Pp *= 2;
    for (int e = 0; m->ok && e < m->n; e++) {
        int32_t want = canon_at(&m->f, m->n, e, m->P - Pp, 0, Pp);
        for (j = 0; j < m->P && m->ok; j++)
            if (m->buf[j][e] != want) {
                T_CHECK(0, "%s P %d n %d: rank %d element %d is not the canonical tree", m->an, m->P, m->n, j, e);
                m->ok = 0;
            }
    }
}

/* Each rank's messages, elements sent and peers, from its plan. */
static void sim_counts(sim *m) {
    unsigned char *seen = (unsigned char *)xmalloc((size_t)m->P);
    for (int j = 0; j < m->P; j++) {
        memset(seen, 0, (size_t)m->P);
        m->out[j].msgs = m->out[j].peers = 0;
        m->out[j].sent = 0;
        for (int k = 0; k < m->pl[j].nsteps; k++) {
            const spmd__pstep *s = &m->pl[j].step[k];
            if (s->slen <= 0) continue;
            m->out[j].msgs++;
            m->out[j].sent += s->slen;
            if (!seen[s->peer]) seen[s->peer] = 1, m->out[j].peers++;
        }
    }
    free(seen);
}

/* Run the plans of algo for P ranks and n elements; 1 if every check
   held (failures are reported, once per (algo, P, n)). */
static int simulate(int algo, int P, int n, counts *out) {
    sim m;
    int j, moved = 1;
    memset(&m, 0, sizeof m);
    m.algo = algo, m.P = P, m.n = n, m.ok = 1, m.out = out;
    m.an = algo == SPMD__PLAN_RD ? "recursive doubling" : "Rabenseifner";
    m.pl = (spmd__plan_x *)xmalloc((size_t)P * sizeof *m.pl);
    m.buf = (int32_t **)xmalloc((size_t)P * sizeof *m.buf);
    m.inbox = (msg **)xmalloc((size_t)P * sizeof *m.inbox);
    m.pc = (int *)xmalloc((size_t)P * sizeof *m.pc);
    m.sent = (int *)xmalloc((size_t)P * sizeof *m.sent);
    m.f.nleaf = P * n;
    for (j = 0; j < P; j++) {
        m.buf[j] = (int32_t *)xmalloc((size_t)(n ? n : 1) * sizeof(int32_t));
        for (int e = 0; e < n; e++) m.buf[j][e] = j * n + e;
        m.inbox[j] = NULL;
        m.pc[j] = m.sent[j] = 0;
        out[j].copied = 0;
        if (spmd__plan_allreduce(algo, P, j, n, &m.pl[j]) != 0) {
            T_CHECK(0, "%s P %d n %d: no plan for rank %d", m.an, P, n, j);
            m.ok = 0;
        }
    }
    while (m.ok && moved) /* each pass: every rank moves as far as it can */
        for (j = 0, moved = 0; j < P && m.ok; j++) moved |= sim_rank(&m, j);
    sim_results(&m);
    sim_counts(&m);
    for (j = 0; j < P; j++) {
        while (m.inbox[j]) {
            msg *mm = m.inbox[j];
            m.inbox[j] = mm->next;
            free(mm);
        }
        free(m.buf[j]);
    }
    free(m.buf), free(m.pl), free(m.inbox), free(m.pc), free(m.sent);
    free(m.f.l), free(m.f.r), free(m.f.tab);
    return m.ok;
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
