/* test_p2p.c - point to point: send/recv/sendrecv (tags, wildcards, order,
   sizes, dtype checks, async, timeouts) and psend/precv (against a plain
   ppermute reference, eager and split, and their misuse). */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int quick;

/* A mesh with axes "a", "b", "c" and logging off; one check that it was created. */
static spmd_mesh *mesh_nd(int ndim, const int *shape, int64_t timeout_ms) {
    static const char *const names[3] = {"a", "b", "c"};
    spmd_mesh *m = NULL;
    T_CHECK(create_named_mesh(ndim, shape, names, timeout_ms, SPMD_CHECK_DEFAULT, SPMD_LOG_OFF, &m) == SPMD_OK,
            "mesh_create");
    return m;
}

/* The value element k of a message from group index s to group index t
   with tag g carries: recomputed by the receiver. */
static int32_t val(int s, int t, int g, size_t k) { return (int32_t)(s * 1000003 + t * 10007 + g * 101 + (int)k); }

/* ---- a ring and an all-pairs exchange with sendrecv, on every axis set -- */

typedef struct ring_arg {
    const char *axes;
    size_t n;
    int bad;
    char first[1024];
} ring_arg;

static void note(ring_arg *a, spmd_dev *d, const char *what) {
    if (__atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED) == 0)
        snprintf(a->first, sizeof a->first, "device %d: %s (%s)", spmd_device_id(d), what, spmd_last_error(d));
}

static void ring_device(spmd_dev *d, void *p) {
    ring_arg *a = (ring_arg *)p;
    int G = spmd_axis_size(d, a->axes), i = spmd_axis_index(d, a->axes), step;
    int32_t *x = (int32_t *)malloc((a->n + 1) * sizeof(int32_t));
    int32_t *y = (int32_t *)malloc((a->n + 1) * sizeof(int32_t));
    size_t k;
    for (step = 1; step < G || step == 1; step++) {
        int to = (i + step) % G, from = (i - step % G + G) % G;
        spmd_recv_info info;
        spmd_status s;
        for (k = 0; k < a->n; k++) x[k] = val(i, to, step, k);
        memset(&info, 0xff, sizeof info);
        s = spmd_sendrecv(d, x, a->n, to, step, y, a->n, from, step, SPMD_I32, a->axes, NULL, &info);
        if (s != SPMD_OK) { note(a, d, "sendrecv failed"); break; }
        if (info.source != from || info.tag != step || info.count != a->n) note(a, d, "wrong recv_info");
        for (k = 0; k < a->n; k++)
            if (y[k] != val(from, i, step, k)) { note(a, d, "wrong data"); break; }
        if (G == 1) break;
    }
    free(x);
    free(y);
}

static void test_rings(void) {
    static const int shapes[][3] = {{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {5, 0, 0}, {8, 0, 0}, {2, 3, 0}, {3, 2, 2}};
    static const int ndims[] = {1, 1, 1, 1, 1, 2, 3};
    static const char *const axes_for[3][4] = {{"a", "*", "", NULL}, {"a", "b", "b,a", "*"}, {"a", "c,b", "*", "b"}};
    static const size_t sizes[] = {0, 1, 7, 1000, 1 << 17};
    int mi, ai, si;
    for (mi = 0; mi < 7; mi++) {
        spmd_mesh *m = mesh_nd(ndims[mi], shapes[mi], 5000);
        for (ai = 0; ai < 4 && axes_for[ndims[mi] - 1][ai]; ai++)
            for (si = 0; si < 5; si++) {
                ring_arg a;
                spmd_status run;
                if (quick && sizes[si] > (1 << 14)) continue;
                memset(&a, 0, sizeof a);
                a.axes = axes_for[ndims[mi] - 1][ai];
                a.n = sizes[si];
                run = spmd_run(m, ring_device, &a);
                /* the devices check what they receive: a process hosting
                   none of them has nothing to count */
                if (tl_nlocal(m, 0, spmd_mesh_size(m)))
                    T_CHECK(run == SPMD_OK && a.bad == 0, "sendrecv rings, mesh %d, axes '%s', n %zu: %s, %d bad, %s", mi,
                            a.axes, a.n, spmd_status_name(run), a.bad, a.first);
            }
        spmd_mesh_destroy(m);
    }
}

/* ---- wildcards, tags, order, sizes --------------------------------------- */

typedef struct match_arg {
    int bad;
    char first[1024];
    unsigned seed;
} match_arg;

static void mnote(match_arg *a, spmd_dev *d, const char *what) {
    if (__atomic_fetch_add(&a->bad, 1, __ATOMIC_RELAXED) == 0)
        snprintf(a->first, sizeof a->first, "device %d: %s (%s)", spmd_device_id(d), what, spmd_last_error(d));
}

/* Devices 1..G-1 each send M messages to device 0 with tags 0..M-1 (two of
   them with equal tags to check order); device 0 takes them first by
   (source, tag), then the rest with wildcards, and checks that messages from
   one source with one tag arrive in the order sent. */
static void match_device(spmd_dev *d, void *p) {
    enum { M = 6 };
    match_arg *a = (match_arg *)p;
    int G = spmd_axis_size(d, "*"), i = spmd_axis_index(d, "*"), k, j;
    int32_t buf[M][16];
    if (i != 0) {
        spmd_req *r[M];
        for (k = 0; k < M; k++) {
            int tag = k < 2 ? 0 : k; /* messages 0 and 1 share tag 0 */
            for (j = 0; j < 16; j++) buf[k][j] = val(i, 0, k, (size_t)j);
            if (spmd_send_start(d, buf[k], (size_t)(k + 1), SPMD_I32, 0, tag, "*", NULL, &r[k]) != SPMD_OK)
                mnote(a, d, "send_start");
        }
        for (k = M - 1; k >= 0; k--)
            if (spmd_wait(r[k]) != SPMD_OK) mnote(a, d, "send wait");
    } else {
        int got[64][M];
        int src;
        int32_t y[16];
        spmd_recv_info info;
        memset(got, 0, sizeof got);
        /* specific source and tag first: tag 3 from every source, in reverse */
        for (src = G - 1; src >= 1; src--) {
            if (spmd_recv(d, y, 16, SPMD_I32, src, 3, "*", NULL, &info) != SPMD_OK) { mnote(a, d, "recv src/tag"); continue; }
            if (info.source != src || info.tag != 3 || info.count != 4 || y[0] != val(src, 0, 3, 0)) mnote(a, d, "src/tag match");
            got[src][3] = 1;
        }
        /* tag 0 from each source: first message 0 (1 element), then message 1 (2) */
        for (src = 1; src < G; src++) {
            for (k = 0; k < 2; k++) {
                if (spmd_recv(d, y, 16, SPMD_I32, src, 0, "*", NULL, &info) != SPMD_OK) { mnote(a, d, "recv tag 0"); continue; }
                if (info.count != (size_t)(k + 1) || y[0] != val(src, 0, k, 0)) mnote(a, d, "messages overtook each other");
                got[src][k] = 1;
            }
        }
        /* the rest with wildcards */
        for (k = 0; k < (G - 1) * (M - 3); k++) {
            if (spmd_recv(d, y, 16, SPMD_I32, SPMD_ANY_SOURCE, SPMD_ANY_TAG, "*", NULL, &info) != SPMD_OK) {
                mnote(a, d, "recv any");
                continue;
            }
            if (info.source < 1 || info.source >= G || info.tag < 2 || info.tag >= M || got[info.source][info.tag] ||
                info.count != (size_t)(info.tag + 1) || y[info.count - 1] != val(info.source, 0, info.tag, info.count - 1))
                mnote(a, d, "wildcard match");
            else
                got[info.source][info.tag] = 1;
        }
        for (src = 1; src < G; src++)
            for (k = 0; k < M; k++)
                if (!got[src][k]) mnote(a, d, "a message was not received");
    }
}

static void test_matching(void) {
    int sizes[] = {2, 3, 5, 8};
    int mi;
    for (mi = 0; mi < 4; mi++) {
        spmd_mesh *m = mesh_nd(1, &sizes[mi], 5000);
        match_arg a;
        spmd_status run;
        memset(&a, 0, sizeof a);
        run = spmd_run(m, match_device, &a);
        if (tl_nlocal(m, 0, sizes[mi]))
            T_CHECK(run == SPMD_OK && a.bad == 0, "tags, wildcards and order on %d devices: %s, %d bad, %s", sizes[mi],
                    spmd_status_name(run), a.bad, a.first);
        spmd_mesh_destroy(m);
    }
}

/* ---- errors -------------------------------------------------------------- */

typedef struct err_arg {
    int kind;
    spmd_status st[4];
    int untouched[4];
} err_arg;

static void err_device(spmd_dev *d, void *p) {
    err_arg *a = (err_arg *)p;
    int i = spmd_device_id(d);
    int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    int64_t z[8];
    spmd_status s = SPMD_OK;
    int k;
    for (k = 0; k < 8; k++) y[k] = -5;
    switch (a->kind) {
    case 0: s = spmd_send(d, x, 4, SPMD_I32, 4, 0, "i", NULL); break;                /* dest outside */
    case 1: s = spmd_recv(d, y, 4, SPMD_I32, -2, 0, "i", NULL, NULL); break;         /* source outside */
    case 2: s = spmd_send(d, x, 4, SPMD_I32, 1, -1, "i", NULL); break;               /* negative tag */
    case 3: s = spmd_send(d, NULL, 4, SPMD_I32, 1, 0, "i", NULL); break;             /* NULL */
    case 4: s = spmd_recv(d, y, 4, SPMD_DTYPE_NONE, 0, 0, "i", NULL, NULL); break;  /* dtype */
    case 5: s = spmd_send(d, x, 4, SPMD_I32, 1, 0, "nope", NULL); break;             /* axis */
    case 6: /* dtype mismatch between 0 -> 1 */
        if (i == 0) s = spmd_send(d, x, 4, SPMD_I32, 1, 0, "i", NULL);
        else if (i == 1) s = spmd_recv(d, z, 4, SPMD_I64, 0, 0, "i", NULL, NULL);
        break;
    case 7: /* message longer than the recv */
        if (i == 0) s = spmd_send(d, x, 8, SPMD_I32, 1, 0, "i", NULL);
        else if (i == 1) s = spmd_recv(d, y, 4, SPMD_I32, 0, 0, "i", NULL, NULL);
        break;
    case 8: /* recv with nobody sending */
        if (i == 1) s = spmd_recv(d, y, 4, SPMD_I32, 0, 0, "i", NULL, NULL);
        break;
    case 9: /* send with nobody receiving */
        if (i == 0) s = spmd_send(d, x, 4, SPMD_I32, 1, 0, "i", NULL);
        break;
    }
    a->st[i] = s;
    a->untouched[i] = 1;
    for (k = 0; k < 8; k++)
        if (y[k] != -5) a->untouched[i] = 0;
}

static void test_errors(void) {
    spmd_status want[10] = {SPMD_ERR_ROOT, SPMD_ERR_ROOT, SPMD_ERR_INVALID, SPMD_ERR_NULL, SPMD_ERR_INVALID,
                                         SPMD_ERR_AXIS, SPMD_ERR_MISMATCH, SPMD_ERR_MISMATCH, SPMD_ERR_TIMEOUT,
                                         SPMD_ERR_TIMEOUT};
    static const char *const what[10] = {"dest outside the group", "source outside the group", "negative tag",
                                         "NULL buffer", "invalid dtype", "unknown axis", "dtype mismatch",
                                         "message longer than the recv", "recv without a send (peer returned)",
                                         "send without a recv (peer returned)"};
    int k, n = 4;
    for (k = 0; k < 10; k++) {
        spmd_mesh *m;
        if (k >= 8 && !tl_slow_cases()) continue; /* (waits out a deadline: see tl_slow_cases) */
        m = mesh_nd(1, &n, 300);
        const char *names[1] = {"i"};
        err_arg a;
        int dev, local = k < 6;
        memset(&a, 0, sizeof a);
        /* mesh_nd names axes a, b, c: rebuild with "i" */
        spmd_mesh_destroy(m);
        create_named_mesh(1, &n, names, 300, SPMD_CHECK_DEFAULT, SPMD_LOG_OFF, &m);
        a.kind = k;
        spmd_run(m, err_device, &a);
        /* the peer returns without calling: on one process that is known at
           once (SPMD_ERR_DEADLOCK); a message between processes waits out
           its deadline */
        want[8] = tl_one_process(m) ? SPMD_ERR_DEADLOCK : SPMD_ERR_TIMEOUT;
        want[9] = tl_local(m, 0) && tl_local(m, 1) ? SPMD_ERR_DEADLOCK : SPMD_ERR_TIMEOUT;
        if (local) { /* this process's devices */
            int all = 1, untouched = 1, first = tl_first_local(m, 0, 4);
            for (dev = 0; dev < 4; dev++) {
                if (!tl_local(m, dev)) continue;
                all &= a.st[dev] == want[k];
                untouched &= a.untouched[dev];
            }
            if (first >= 0)
                T_CHECK(all && untouched, "%s: got %s on device %d, want %s; buffers untouched %d", what[k],
                        spmd_status_name(a.st[first]), first, spmd_status_name(want[k]), untouched);
            T_CHECK(spmd_mesh_status(m) == SPMD_OK, "%s must not break the mesh", what[k]);
        } else { /* devices 0 and 1 take part; each checked where it lives */
            int who = k == 8 ? 1 : 0, l0 = tl_local(m, who), l1 = k < 8 && tl_local(m, 1 - who);
            /* across processes a send is done once the transport sent it: the
               sender of a mismatched message may return SPMD_OK (the receiver
               reports the mismatch), as MPI's standard-mode send may, and a
               small send nobody receives returns SPMD_OK (on threads: a timeout) */
            int eager = (k == 6 || k == 7 || k == 9) && tl_local(m, 0) != tl_local(m, 1);
            int ok0 = k == 9 && eager ? a.st[0] == SPMD_OK
                                      : a.st[who] == want[k] || (eager && who == 0 && a.st[0] == SPMD_OK);
            if (l0 || l1)
                T_CHECK((!l0 || ok0) && (!l1 || a.st[1 - who] == want[k]), "%s: got %s and %s, want %s",
                        what[k], spmd_status_name(a.st[0]), spmd_status_name(a.st[1]), spmd_status_name(want[k]));
            if (tl_local(m, 1)) T_CHECK(k != 7 || a.untouched[1], "a refused message must not be written");
        }
        spmd_mesh_destroy(m);
    }
}

/* ---- psend / precv ----------------------------------------------------- */

typedef struct pp_arg {
    int G;
    size_t n;
    int npairs;
    int perm[32];
    spmd_algo algo;
    int32_t *x[16], *y[16];
    spmd_status st[16];
} pp_arg;

static void pp_device(spmd_dev *d, void *p) {
    pp_arg *a = (pp_arg *)p;
    int i = spmd_device_id(d);
    spmd_array X = spmd_array_1d(a->x[i], SPMD_I32, (int64_t)a->n), Y = spmd_array_1d(a->y[i], SPMD_I32, (int64_t)a->n);
    spmd_opts o;
    spmd_req *t;
    int32_t scalar = i, junk = 0;
    spmd_array S = spmd_array_nd(&scalar, SPMD_I32, 0, NULL), J = spmd_array_1d(&junk, SPMD_I32, 1);
    spmd_status s;
    memset(&o, 0, sizeof o);
    o.algo = a->algo;
    s = spmd_psend(d, &X, "i", a->perm, a->npairs, &o, &t);
    /* an unrelated collective in between: the psend stays in flight */
    if (s == SPMD_OK) s = spmd_all_gather(d, &S, &J, "", 0, 0, NULL);
    if (s == SPMD_OK) s = spmd_precv(d, t, &Y, "i", a->perm, a->npairs, &o);
    a->st[i] = s;
}

static void test_psend_precv(unsigned seed) {
    static const char *const names[1] = {"i"};
    int G, trial;
    for (G = 1; G <= 8; G++)
        for (trial = 0; trial < 4; trial++) {
            pp_arg a;
            spmd_mesh *m;
            int i, k, order[16], ok = 1, stat = 1;
            memset(&a, 0, sizeof a);
            a.G = G;
            a.n = trial == 3 ? (quick ? 5000 : 100000) : (size_t)(trial * 7 + 1);
            a.algo = trial == 1 ? SPMD_ALGO_SPLIT : SPMD_ALGO_DEFAULT;
            for (i = 0; i < G; i++) order[i] = i;
            for (i = G - 1; i > 0; i--) {
                int j = (int)((seed = seed * 1103515245u + 12345u) >> 16) % (i + 1), t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
            /* pairs i -> order[i], leaving some destinations out */
            for (i = 0; i < G; i++)
                if (G == 1 || ((seed = seed * 1103515245u + 12345u) >> 16) % 4 != 0) {
                    a.perm[2 * a.npairs] = i;
                    a.perm[2 * a.npairs + 1] = order[i];
                    a.npairs++;
                }
            for (i = 0; i < G; i++) {
                a.x[i] = (int32_t *)malloc((a.n + 1) * sizeof(int32_t));
                a.y[i] = (int32_t *)malloc((a.n + 1) * sizeof(int32_t));
                for (k = 0; k < (int)a.n; k++) {
                    a.x[i][k] = val(i, 0, trial, (size_t)k);
                    a.y[i][k] = -9;
                }
            }
            create_named_mesh(1, &G, names, 5000, SPMD_CHECK_DEFAULT, SPMD_LOG_OFF, &m);
            spmd_run(m, pp_device, &a);
            for (i = 0; i < G; i++) {
                int src = -1;
                if (!tl_local(m, i)) continue; /* its y is in another process */
                for (k = 0; k < a.npairs; k++)
                    if (a.perm[2 * k + 1] == i) src = a.perm[2 * k];
                stat &= a.st[i] == SPMD_OK;
                for (k = 0; k < (int)a.n; k++)
                    if (a.y[i][k] != (src < 0 ? 0 : val(src, 0, trial, (size_t)k))) { ok = 0; break; }
            }
            if (tl_nlocal(m, 0, G))
                T_CHECK(stat && ok, "psend/precv, G %d, n %zu, %d pairs, algo %d: statuses ok %d, data ok %d", G, a.n,
                        a.npairs, (int)a.algo, stat, ok);
            for (i = 0; i < G; i++) { free(a.x[i]); free(a.y[i]); }
            spmd_mesh_destroy(m);
        }
}

typedef struct ppbad_arg {
    int kind;
    spmd_status st[4];
} ppbad_arg;

static void ppbad_device(spmd_dev *d, void *p) {
    ppbad_arg *a = (ppbad_arg *)p;
    int i = spmd_device_id(d);
    int32_t x[6] = {0}, y[6] = {0};
    int perm[8] = {0, 1, 1, 2, 2, 3, 3, 0}, other[8] = {0, 2, 2, 0, 1, 3, 3, 1};
    spmd_array X = spmd_array_1d(x, SPMD_I32, 4), Y = spmd_array_1d(y, SPMD_I32, 4), Y5 = spmd_array_1d(y, SPMD_I32, 5);
    spmd_req *t = NULL;
    spmd_opts split;
    spmd_status s;
    memset(&split, 0, sizeof split);
    split.algo = SPMD_ALGO_SPLIT;
    s = spmd_psend(d, &X, "i", perm, 4, a->kind == 4 ? &split : NULL, &t);
    switch (a->kind) {
    case 0: a->st[i] = spmd_wait(t); s = spmd_precv(d, t, &Y, "i", perm, 4, NULL); break;     /* wait on a token */
    case 1: a->st[i] = spmd_precv(d, t, &Y5, "i", perm, 4, NULL); s = spmd_precv(d, t, &Y, "i", perm, 4, NULL); break;
    case 2: a->st[i] = spmd_precv(d, t, &Y, "i", other, 4, NULL); s = spmd_precv(d, t, &Y, "i", perm, 4, NULL); break;
    case 3: a->st[i] = spmd_precv(d, NULL, &Y, "i", perm, 4, NULL); s = spmd_precv(d, t, &Y, "i", perm, 4, NULL); break;
    case 4: /* split: tasks wait for every receive buffer; device 3 comes
               after the deadline, so the others time out and it finds the
               mesh broken */
        if (i == 3) {
            struct timespec ts;
            ts.tv_sec = 0;
            ts.tv_nsec = 700000000;
            nanosleep(&ts, NULL);
        }
        a->st[i] = spmd_precv(d, t, &Y, "i", perm, 4, &split);
        break;
    }
    if (a->kind < 4 && s != SPMD_OK) a->st[i] = SPMD_ERR_SYSTEM; /* the real precv afterwards must work */
}

static void test_psend_misuse(void) {
    static const spmd_status want[5] = {SPMD_ERR_STATE, SPMD_ERR_SHAPE, SPMD_ERR_INVALID, SPMD_ERR_NULL, SPMD_ERR_TIMEOUT};
    static const char *const what[5] = {"spmd_wait on a psend token", "precv with another shape",
                                        "precv with another perm", "precv without a token",
                                        "a device that never calls precv"};
    static const char *const names[1] = {"i"};
    int k, four = 4;
    for (k = 0; k < 5; k++) {
        spmd_mesh *m;
        ppbad_arg a;
        int dev, ok = 1;
        if (k == 4 && !tl_slow_cases()) continue; /* (sleeps past a deadline: see tl_slow_cases) */
        memset(&a, 0, sizeof a);
        a.kind = k;
        create_named_mesh(1, &four, names, k == 4 ? 300 : 5000, SPMD_CHECK_DEFAULT, SPMD_LOG_OFF, &m);
        spmd_run(m, ppbad_device, &a);
        for (dev = 0; dev < 4; dev++) { /* this process's devices */
            if (!tl_local(m, dev)) continue;
            if (k == 4 && !tl_one_process(m))
                /* across processes a precv returns once its own output is
                   here; it does not wait for the other devices' precv */
                ok &= a.st[dev] == SPMD_OK;
            else if (k == 4 && spmd_mesh_scheduler(m) == SPMD_SCHEDULER_FIBERS)
                /* under fibers the late device's sleep holds its carrier: with
                   one carrier the peers get no chance to see their deadline
                   pass before it arrives */
                ok &= a.st[dev] == SPMD_OK || a.st[dev] == SPMD_ERR_TIMEOUT || a.st[dev] == SPMD_ERR_BROKEN;
            else if (k < 4 || dev < 3) ok &= a.st[dev] == want[k];
            else ok &= a.st[3] == SPMD_ERR_TIMEOUT || a.st[3] == SPMD_ERR_BROKEN;
        }
        int first = tl_first_local(m, 0, 4);
        if (first >= 0)
            T_CHECK(ok, "%s: device %d got %s, want %s", what[k], first, spmd_status_name(a.st[first]),
                    spmd_status_name(want[k]));
        spmd_mesh_destroy(m);
    }
}

int main(void) {
    const char *sd = getenv("SPMD_TEST_SEED");
    unsigned seed = sd ? (unsigned)strtoul(sd, NULL, 10) : 20261122u;
    quick = env_quick(); /* SPMD_TEST_QUICK=1, or N for the fabric matrix */
    printf("test_p2p: seed %u%s\n", seed, quick ? " (quick)" : "");
    test_rings();
    test_matching();
    test_errors();
    test_psend_precv(seed);
    test_psend_misuse();
    return t_summary();
}
