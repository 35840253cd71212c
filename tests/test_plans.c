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
                          the post-step);
     bcast, reduce trees  a bcast's rank receives once and sends at most
                          ceil(log2 P) messages; a reduce's sends once;
     bcast, reduce split  no root sends (bcast) or receives (reduce) more
                          than 2n (a reduce's root that is a pre-step's
                          right half: 3n), no rank sends more than 3n nor
                          more than 2 ceil(log2 P) + 2 messages (+ 2 P'
                          elements for uneven blocks);
     psum_scatter         each rank ends with the canonical tree of its own
                          block (c elements of n = P c); a rank sends
                          exactly n - c elements (a pre-step's left half:
                          its n) in log2 P' messages (+ 1 for a pre-step's
                          pair) to at most log2 P' + 1 peers;
     all_gather           every rank ends with every rank's block where
                          spmd__plan_rs_pos puts it, having received
                          exactly n - c elements (a pre-step's left half:
                          n, from its partner at the end) in at most
                          ceil(log2 P) + 1 messages; what is sent is
                          received;
     scatter, gather      every rank ends with the root's block for it (on
                          the root: every member's); the root sends
                          (receives) (P - 1) c elements in at most
                          ceil(log2 P) messages, every other rank receives
                          (sends) one.
   Sizes: every P from 1 to 64 with several n, and samples up to 16,384
   (with SPMD_TEST_QUICK, as under the sanitizers: P 1..33, 48 and 63, and
   samples to 257; psum_scatter's to
   1,025 and scatter's and gather's to 4,097: their trees or vectors grow
   as P^2). */
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
    int msgs, peers, rmsgs; /* messages sent, peers sent to, messages received */
    int64_t sent, copied, got; /* elements sent; received into place; received in all */
} counts;

/* The operations planned: allreduce (recursive doubling, Rabenseifner),
   bcast and reduce (binomial trees). */
enum { OP_ALLREDUCE, OP_BCAST, OP_REDUCE, OP_RSCATTER, OP_SCATTER, OP_GATHER, OP_ALLGATHER };
static const char *op_name(int op, int algo) {
    if (op == OP_RSCATTER) return "psum_scatter (halving)";
    if (op == OP_ALLGATHER) return "all_gather (doubling)";
    if (op == OP_SCATTER || op == OP_GATHER) return op == OP_SCATTER ? "scatter (tree)" : "gather (tree)";
    if (op == OP_BCAST && algo == SPMD__PLAN_CHAIN) return "bcast (chain)";
    if (op != OP_ALLREDUCE) return op == OP_BCAST ? (algo == SPMD__PLAN_SPLIT ? "bcast (split)" : "bcast (tree)")
                                                  : (algo == SPMD__PLAN_SPLIT ? "reduce (split)" : "reduce (tree)");
    return algo == SPMD__PLAN_RD ? "recursive doubling" : "Rabenseifner";
}
static int plan_of(int op, int algo, int P, int rank, int root, int n, spmd__plan_x *x) {
    if (op == OP_RSCATTER) return spmd__plan_rscatter(P, rank, n / P, x);
    if (op == OP_ALLGATHER) return spmd__plan_allgather(P, rank, n / P, x);
    if (op == OP_SCATTER || op == OP_GATHER) return spmd__plan_scatter(op == OP_GATHER, P, rank, root, n / P, x);
    if (op == OP_BCAST && algo == SPMD__PLAN_CHAIN) return spmd__plan_bcast_chain(P, rank, root, n, x);
    if (op == OP_BCAST)
        return algo == SPMD__PLAN_SPLIT ? spmd__plan_bcast_split(P, rank, root, n, x) : spmd__plan_bcast(P, rank, root, n, x);
    if (op == OP_REDUCE)
        return algo == SPMD__PLAN_SPLIT ? spmd__plan_reduce_split(P, rank, root, n, x)
                                        : spmd__plan_reduce(P, rank, root, n, x);
    return spmd__plan_allreduce(algo, P, rank, n, x);
}

/* One simulation: every rank's plan, buffer and place in it. */
typedef struct {
    int op, algo, P, n, root, ok;
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
            m->out[j].got += s->rlen;
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
   element is what the operation says: on every rank the canonical tree
   (allreduce), the root's leaf (bcast); on the root the canonical tree
   (reduce). */
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
    for (j = 0; m->ok && m->op == OP_RSCATTER && j < m->P; j++)
        for (int c = m->n / m->P, k = 0; k < c && m->ok; k++)
            if (m->buf[j][spmd__plan_rs_pos(m->P, j, c) + k] != canon_at(&m->f, m->n, j * c + k, m->P - Pp, 0, Pp)) {
                T_CHECK(0, "%s P %d n %d: rank %d's element %d is not the canonical tree", m->an, m->P, m->n, j, k);
                m->ok = 0;
            }
    for (j = 0; m->ok && m->op == OP_ALLGATHER && j < m->P; j++) /* rank u's block, at u's place */
        for (int c = m->n / m->P, u = 0; u < m->P && m->ok; u++)
            for (int k = 0; k < c && m->ok; k++)
                if (m->buf[j][spmd__plan_rs_pos(m->P, u, c) + k] != u * m->n + k) {
                    T_CHECK(0, "%s P %d n %d: rank %d's element %d of block %d is not rank %d's", m->an, m->P, m->n,
                            j, k, u, u);
                    m->ok = 0;
                }
    for (j = 0; m->ok && (m->op == OP_SCATTER || m->op == OP_GATHER) && j < m->P; j++)
        for (int c = m->n / m->P, k = 0; k < c && m->ok; k++) { /* scatter: j's block; gather: on the root, every one */
            int v = (j - m->root + m->P) % m->P;
            if (m->op == OP_SCATTER && m->buf[j][v * c + k] != m->root * m->n + j * c + k) {
                T_CHECK(0, "%s P %d n %d root %d: rank %d's element %d is not the root's", m->an, m->P, m->n,
                        m->root, j, k);
                m->ok = 0;
            }
            for (int u = 0; m->op == OP_GATHER && j == m->root && u < m->P && m->ok; u++)
                if (m->buf[j][u * c + k] != ((u + m->root) % m->P) * m->n + k) {
                    T_CHECK(0, "%s P %d n %d root %d: block %d element %d on the root is not its member's", m->an,
                            m->P, m->n, m->root, u, k);
                    m->ok = 0;
                }
        }
    for (int e = 0; m->ok && m->op < OP_RSCATTER && e < m->n; e++) {
        int32_t want = m->op == OP_BCAST ? m->root * m->n + e : canon_at(&m->f, m->n, e, m->P - Pp, 0, Pp);
        for (j = 0; j < m->P && m->ok; j++)
            if (m->buf[j][e] != want && (m->op != OP_REDUCE || j == m->root)) {
                T_CHECK(0, "%s P %d n %d root %d: rank %d element %d is not %s", m->an, m->P, m->n, m->root, j, e,
                        m->op == OP_BCAST ? "the root's" : "the canonical tree");
                m->ok = 0;
            }
    }
}

/* Each rank's messages, elements sent and peers, from its plan. */
static void sim_counts(sim *m) {
    unsigned char *seen = (unsigned char *)xmalloc((size_t)m->P);
    for (int j = 0; j < m->P; j++) {
        memset(seen, 0, (size_t)m->P);
        m->out[j].msgs = m->out[j].peers = m->out[j].rmsgs = 0;
        m->out[j].sent = 0;
        for (int k = 0; k < m->pl[j].nsteps; k++) {
            const spmd__pstep *s = &m->pl[j].step[k];
            m->out[j].rmsgs += s->rlen > 0;
            if (s->slen <= 0) continue;
            m->out[j].msgs++;
            m->out[j].sent += s->slen;
            if (!seen[s->peer]) seen[s->peer] = 1, m->out[j].peers++;
        }
    }
    free(seen);
}

/* Run the plans of op (by algo) for P ranks, n elements and a root; 1 if
   every check held (failures are reported, once per run). */
static int simulate(int op, int algo, int P, int n, int root, counts *out) {
    sim m;
    int j, moved = 1;
    memset(&m, 0, sizeof m);
    m.op = op, m.algo = algo, m.P = P, m.n = n, m.root = root, m.ok = 1, m.out = out;
    m.an = op_name(op, algo);
    m.pl = (spmd__plan_x *)xmalloc((size_t)P * sizeof *m.pl);
    m.buf = (int32_t **)xmalloc((size_t)P * sizeof *m.buf);
    m.inbox = (msg **)xmalloc((size_t)P * sizeof *m.inbox);
    m.pc = (int *)xmalloc((size_t)P * sizeof *m.pc);
    m.sent = (int *)xmalloc((size_t)P * sizeof *m.sent);
    m.f.nleaf = P * n;
    for (j = 0; j < P; j++) {
        m.buf[j] = (int32_t *)xmalloc((size_t)(n ? n : 1) * sizeof(int32_t));
        for (int e = 0; e < n; e++) m.buf[j][e] = j * n + e;
        if (op == OP_SCATTER || op == OP_GATHER) /* relative block v at v c: the root's inputs (scatter), its own */
            for (int v = 0, c = n / P; v < P; v++)
                for (int k = 0; k < c; k++)
                    m.buf[j][v * c + k] = op == OP_GATHER ? (v == (j - root + P) % P ? j * n + k : -1)
                                          : j == root ? root * n + (v + root) % P * c + k : -1;
        if (op == OP_RSCATTER) /* member i's block where the plan keeps it (test_plans checks it ends right) */
            for (int i = 0, c = n / P; i < P; i++)
                for (int k = 0; k < c; k++) m.buf[j][spmd__plan_rs_pos(P, i, c) + k] = j * n + i * c + k;
        if (op == OP_ALLGATHER) /* only its own block, at its place */
            for (int e = 0, c = n / P, at = spmd__plan_rs_pos(P, j, c); e < n; e++)
                m.buf[j][e] = e >= at && e < at + c ? j * n + e - at : -1;
        m.inbox[j] = NULL;
        m.pc[j] = m.sent[j] = 0;
        out[j].copied = out[j].got = 0;
        if (plan_of(op, algo, P, j, root, n, &m.pl[j]) != 0) {
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

/* The trees' bounds: a bcast's rank receives the data once (the root
   never) and sends at most ceil(log2 P) messages, P - 1 in all; a
   reduce's rank sends once (n elements), the root not unless it is the
   one left with the result, and the root receives at most ceil(log2 P) + 2
   messages. */
static int tree_bounds_ok(int op, int P, int n, int root, const counts *c) {
    int j, bad = -1, total = 0;
    for (j = 0; j < P && bad < 0; j++) {
        total += c[j].msgs;
        if (op == OP_BCAST && (c[j].copied != (j == root ? 0 : n) || c[j].msgs > ceil_log2(P) ||
                               c[j].sent != (int64_t)c[j].msgs * n))
            bad = j;
        if (op == OP_REDUCE && (c[j].msgs > 1 || c[j].sent != (int64_t)c[j].msgs * n ||
                                (j != root && n > 0 && c[j].msgs != 1)))
            bad = j;
    }
    if (bad < 0 && op == OP_BCAST && n > 0 && total != P - 1) bad = root;
    if (bad >= 0)
        T_CHECK(0, "%s P %d n %d root %d: rank %d sends %d messages, %lld elements, copies %lld in: outside the bounds",
                op_name(op, 0), P, n, root, bad, c[bad].msgs, (long long)c[bad].sent, (long long)c[bad].copied);
    return bad < 0;
}

/* The split bcast and reduce: no root moves more than 2n (a reduce's root
   that is a pre-step's right half receives its partner's n more), no rank
   sends more than 3n nor more than 2 ceil(log2 P) + 2 messages (elements:
   + 2 P' for blocks of uneven size, n not a multiple of P'). */
static int split_bounds_ok(int op, int P, int n, int root, const counts *c) {
    int Pp = 1, r, j, bad = -1;
    while (Pp * 2 <= P) Pp *= 2;
    r = P - Pp;
    for (j = 0; j < P && bad < 0; j++)
        if (c[j].msgs > 2 * ceil_log2(P) + 2 || c[j].sent > 3 * (int64_t)n + 2 * Pp) bad = j;
    if (bad < 0 && op == OP_BCAST && (c[root].sent > 2 * (int64_t)n + 2 * Pp || c[root].got)) bad = root;
    if (bad < 0 && op == OP_REDUCE && c[root].got > 2 * (int64_t)n + 2 * Pp + (root < 2 * r && root % 2 ? n : 0))
        bad = root;
    if (bad >= 0)
        T_CHECK(0, "%s P %d n %d root %d: rank %d sends %d messages, %lld elements, receives %lld: outside the bounds",
                op_name(op, SPMD__PLAN_SPLIT), P, n, root, bad, c[bad].msgs, (long long)c[bad].sent,
                (long long)c[bad].got);
    return bad < 0;
}

/* A bcast's chain: every rank but the root receives n once, in
   min(16, n) messages from the rank before it (the root nothing), and
   every rank but the last relative to the root sends n once, in as many
   messages, to the rank after it only (peers 1). */
static int chain_bounds_ok(int P, int n, int root, const counts *c) {
    int j, bad = -1, C = n < 16 ? n : 16;
    for (j = 0; j < P && bad < 0; j++) {
        int v = (j - root + P) % P, last = v == P - 1;
        if (c[j].copied != (v ? n : 0) || c[j].got != c[j].copied || c[j].rmsgs != (v ? C : 0) ||
            c[j].sent != (last ? 0 : n) || c[j].msgs != (last ? 0 : C) || c[j].peers != (last || !n ? 0 : 1))
            bad = j;
    }
    if (bad >= 0)
        T_CHECK(0, "%s P %d n %d root %d: rank %d sends %d messages to %d peers, %lld elements, receives %d, %lld: "
                "outside the bounds", op_name(OP_BCAST, SPMD__PLAN_CHAIN), P, n, root, bad, c[bad].msgs, c[bad].peers,
                (long long)c[bad].sent, c[bad].rmsgs, (long long)c[bad].got);
    return bad < 0;
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

/* psum_scatter's: exactly n - c elements out of a rank (a pre-step's left
   half: its n) in log2 P' messages (+ 1 in a pre-step's pair) to at most
   log2 P' + 1 peers; what is sent is received. */
static int rs_bounds_ok(int P, int n, const counts *c) {
    int Pp = 1, lg = 0, r, j, bad = -1, cb = n / P;
    int64_t sent = 0, got = 0;
    while (Pp * 2 <= P) Pp *= 2, lg++;
    r = P - Pp;
    for (j = 0; j < P && bad < 0; j++) {
        int pair = j < 2 * r, left = pair && j % 2 == 0;
        sent += c[j].sent, got += c[j].got;
        if (left ? c[j].msgs != (n > 0) || c[j].sent != n || c[j].got != cb
                 : (n > 0 && c[j].msgs != lg + pair) || c[j].peers > lg + 1 || c[j].sent != n - cb)
            bad = j;
    }
    if (bad >= 0)
        T_CHECK(0, "psum_scatter P %d n %d: rank %d sends %d messages to %d peers, %lld elements, receives %lld: "
                "outside the bounds", P, n, bad, c[bad].msgs, c[bad].peers, (long long)c[bad].sent,
                (long long)c[bad].got);
    else if (sent != got)
        T_CHECK(0, "psum_scatter P %d n %d: %lld elements sent, %lld received", P, n, (long long)sent, (long long)got);
    return bad < 0 && sent == got;
}

/* all_gather's: n - c elements into a rank (a pre-step's left half: n)
   in at most ceil(log2 P) + 1 messages; what is sent is received. */
static int ag_bounds_ok(int P, int n, const counts *c) {
    int Pp = 1, r, j, bad = -1, cb = n / P;
    int64_t sent = 0, got = 0;
    while (Pp * 2 <= P) Pp *= 2;
    r = P - Pp;
    for (j = 0; j < P && bad < 0; j++) {
        int left = j < 2 * r && j % 2 == 0;
        sent += c[j].sent, got += c[j].got;
        if (c[j].got != (left ? n : n - cb) || c[j].copied != c[j].got || c[j].msgs > ceil_log2(P) + 1 ||
            c[j].rmsgs > ceil_log2(P) + 1)
            bad = j;
    }
    if (bad >= 0)
        T_CHECK(0, "all_gather P %d n %d: rank %d sends %d messages, %lld elements, receives %d, %lld: outside the "
                "bounds", P, n, bad, c[bad].msgs, (long long)c[bad].sent, c[bad].rmsgs, (long long)c[bad].got);
    else if (sent != got)
        T_CHECK(0, "all_gather P %d n %d: %lld elements sent, %lld received", P, n, (long long)sent, (long long)got);
    return bad < 0 && sent == got;
}

/* The scatter and gather trees: the root sends (scatter) or receives
   (gather) (P - 1) c elements in at most ceil(log2 P) messages; every other
   rank receives (scatter) or sends (gather) one message of at least its
   own block. */
static int sg_bounds_ok(int op, int P, int n, int root, const counts *c) {
    int j, bad = -1, cb = n / P, sc = op == OP_SCATTER;
    for (j = 0; j < P && bad < 0; j++) {
        int out = sc ? c[j].msgs : c[j].rmsgs, in = sc ? c[j].rmsgs : c[j].msgs;
        int64_t outn = sc ? c[j].sent : c[j].got, inn = sc ? c[j].got : c[j].sent;
        if (j == root ? outn != (int64_t)(P - 1) * cb || inn || in || out > ceil_log2(P)
                      : out > ceil_log2(P) || (n > 0 && (in != 1 || inn < cb)))
            bad = j;
    }
    if (bad >= 0)
        T_CHECK(0, "%s P %d n %d root %d: rank %d sends %d messages, %lld elements, receives %d, %lld: outside the "
                "bounds", op_name(op, 0), P, n, root, bad, c[bad].msgs, (long long)c[bad].sent, c[bad].rmsgs,
                (long long)c[bad].got);
    return bad < 0;
}

static void check(int op, int algo, int P, int n, int root, int *runs, int *good) {
    counts *c = (counts *)xmalloc((size_t)P * sizeof *c);
    (*runs)++;
    if (simulate(op, algo, P, n, root, c) &&
        (op == OP_RSCATTER         ? rs_bounds_ok(P, n, c)
         : op == OP_ALLGATHER      ? ag_bounds_ok(P, n, c)
         : op == OP_SCATTER || op == OP_GATHER ? sg_bounds_ok(op, P, n, root, c)
         : op == OP_ALLREDUCE      ? bounds_ok(algo, P, n, c)
         : algo == SPMD__PLAN_CHAIN ? chain_bounds_ok(P, n, root, c)
         : algo == SPMD__PLAN_SPLIT ? split_bounds_ok(op, P, n, root, c)
                                    : tree_bounds_ok(op, P, n, root, c)))
        (*good)++;
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
    T_CHECK(simulate(OP_ALLREDUCE, SPMD__PLAN_RD, 1, 3, 0, &c1) && c1.msgs == 0, "plans: one rank sends nothing");
    T_CHECK(spmd__plan_bcast(4, 0, 4, 1, &(spmd__plan_x){0}) == -1 && spmd__plan_reduce(4, 0, -1, 1, &(spmd__plan_x){0}) == -1,
            "plans: a root outside refused");
    for (P = 1; P <= 64; P++) {
        if (env_quick() && P > 33 && P != 48 && P != 63) continue; /* (quick: 1..33, 48, 63 and the samples) */
        int ns[6] = {0, 1, 3, P - 1, P + 2, 3 * P + 5}, roots[3] = {0, P - 1, P / 2};
        for (i = 0; i < 6; i++) {
            if (ns[i] < 0 || (i > 0 && ns[i] == ns[i - 1])) continue;
            for (a = SPMD__PLAN_RD; a <= SPMD__PLAN_RAB; a++) check(OP_ALLREDUCE, a, P, ns[i], 0, &runs, &good);
            for (int k = 0; k < 3; k++)
                for (a = SPMD__PLAN_TREE; a <= SPMD__PLAN_CHAIN; a++) {
                    check(OP_BCAST, a, P, ns[i], roots[k], &runs, &good);
                    if (a != SPMD__PLAN_CHAIN) check(OP_REDUCE, a, P, ns[i], roots[k], &runs, &good);
                }
        }
        for (i = 0; i < 4; i++) {
            check(OP_RSCATTER, 0, P, P * (i == 3 ? 5 : i), 0, &runs, &good);
            check(OP_ALLGATHER, 0, P, P * (i == 3 ? 5 : i), 0, &runs, &good);
        }
        for (i = 0; i < 3; i++)
            for (int k = 0; k < 3; k++) {
                check(OP_SCATTER, 0, P, P * (i == 2 ? 3 : i), roots[k], &runs, &good);
                check(OP_GATHER, 0, P, P * (i == 2 ? 3 : i), roots[k], &runs, &good);
            }
    }
    for (i = 0; i < (int)(sizeof big / sizeof big[0]) && (!env_quick() || big[i] <= 257); i++) {
        int n = big[i] > 4096 ? 3 : 7; /* (quick, as under the sanitizers: up to 1,025) */
        for (a = SPMD__PLAN_RD; a <= SPMD__PLAN_RAB; a++) check(OP_ALLREDUCE, a, big[i], n, 0, &runs, &good);
        for (a = SPMD__PLAN_TREE; a <= SPMD__PLAN_CHAIN; a++) {
            check(OP_BCAST, a, big[i], n, big[i] / 3, &runs, &good);
            if (a != SPMD__PLAN_CHAIN) check(OP_REDUCE, a, big[i], n, big[i] - 2, &runs, &good);
        }
        if (big[i] <= 1025) { /* (n = P c: its trees and messages grow as P^2) */
            check(OP_RSCATTER, 0, big[i], 2 * big[i], 0, &runs, &good);
            check(OP_ALLGATHER, 0, big[i], 2 * big[i], 0, &runs, &good);
        }
        if (big[i] <= 4097) { /* (every rank's vector holds all P blocks: P^2) */
            check(OP_SCATTER, 0, big[i], big[i], big[i] / 3, &runs, &good);
            check(OP_GATHER, 0, big[i], big[i], big[i] - 2, &runs, &good);
        }
    }
    T_CHECK(good == runs, "plans: %d of %d (algorithm, P, n) runs hold every check", good, runs);
    printf("test_plans: %d runs (allreduce, bcast, reduce, psum_scatter, all_gather, scatter, gather), P %s and samples to "
           "%d, in %.2f s\n", runs, env_quick() ? "1..33, 48, 63" : "1..64", env_quick() ? 257 : 16384, now_s() - t0);
    return t_summary();
}
