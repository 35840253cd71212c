/* test_shrink.c - spmd_mesh_shrink on the thread backend (docs/recovery.md),
   under both schedulers. A (dp, tp) mesh loses devices through the fault
   plan (desc.faults, kind=lose) in a run of psums; spmd_run returns
   SPMD_ERR_PEER_LOST; the mesh is shrunk along "dp" (or "tp"). Checked
   against references written out here from the list of devices the test
   lost (never from the library's answers): the new shape, spmd_mesh_lost,
   spmd_device_origin for every new device, and a psum over "dp,tp" and
   one over "dp" on the new mesh whose inputs are the devices' old ids.
   Cases: one loss (4x2); odd sizes (5x3); losses in two slices at once;
   two losses in one slice; two losses at different calls; a loss in the
   shrunk mesh and a second shrink (ids composed); along "tp"; nothing lost
   (same shape); every slice lost (SPMD_ERR_PEER_LOST, no mesh); bad
   arguments (unknown axis, two axes, NULL, a running mesh: SPMD_ERR_BUSY);
   SPMD_FAULTS in the environment applies to the first mesh only. */
#define _GNU_SOURCE 1 /* setenv */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <stdlib.h>
#include <string.h>

#define MAXD 64
#define NCALL 4

static spmd_scheduler sched;
static const char *sname(void) { return sched == SPMD_SCHEDULER_FIBERS ? "fibers" : "threads"; }

/* Errors and warnings into testlib's log_text (log_keep): what the checks
   look for, whatever SPMD_LOG_LEVEL adds. */
static void log_warn_keep(void *user, spmd_log_level level, int device, const char *msg) {
    if (level <= SPMD_LOG_WARN) log_keep(user, level, device, msg);
}

static spmd_mesh *mesh_2d(int dp, int tp, const char *faults) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = dp;
    desc.shape[1] = tp;
    desc.axis_names[0] = "dp";
    desc.axis_names[1] = "tp";
    desc.timeout_ms = 20000; /* a loss is seen at once; this only bounds a bug */
    desc.faults = faults;
    desc.scheduler = sched;
    desc.log_fn = log_warn_keep;
    s = spmd_mesh_create(&desc, &m);
    T_CHECK(s == SPMD_OK, "%s: mesh_create %dx%d: %s", sname(), dp, tp, spmd_status_name(s));
    return m;
}

/* NCALL psums over tr.axes (NULL: "dp,tp", the whole mesh), stopping at
   the first failure; each device keeps how many calls succeeded, the
   status of the one that failed (SPMD_OK: none) and its message. Over ""
   (each device a group of one) no device waits for another, so every
   planned loss happens, whatever the timing: a call begun on a mesh
   already broken by a peer that noticed a loss fails with SPMD_ERR_BROKEN
   before the fault plan is read, so a second loss planned at the same
   call as the first could otherwise not happen. */
static struct {
    const char *axes;
    int done[MAXD];
    spmd_status s[MAXD];
    char msg[MAXD][600];
} tr;
static void train_dev(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d), i;
    double x = 1, y;
    (void)arg;
    for (i = 0; i < NCALL; i++) {
        spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_F64, tr.axes ? tr.axes : "dp,tp", NULL);
        if (s != SPMD_OK) {
            tr.s[id] = s;
            snprintf(tr.msg[id], sizeof tr.msg[id], "%s", spmd_last_error(d));
            return;
        }
        tr.done[id]++;
    }
}
static spmd_status train(spmd_mesh *m, const char *axes) {
    memset(&tr, 0, sizeof tr);
    tr.axes = axes;
    return spmd_run(m, train_dev, NULL);
}

/* What every device of the last train() (n devices) must have seen when the
   fault plan lost device lost[k] at its call at[k]: a lost device did
   at[k] calls, and the next failed with SPMD_ERR_PEER_LOST saying it was
   lost. Over the whole mesh (axes NULL) every other device's call at the
   first loss fails too, naming a device lost at that call: with
   SPMD_ERR_PEER_LOST (it waited for it, or was abandoned when a peer that
   did broke the mesh) or SPMD_ERR_BROKEN (it began the call after the
   break); or the call before it was abandoned (SPMD_ERR_PEER_LOST, naming
   the loss): a device slow to finish that call is still in it when the
   break comes, and the break abandons every call not yet finished (seen
   once under TSan). Otherwise
   (no loss, or groups of one) it did all NCALL calls. */
static void check_devices(const char *what, int n, const int *lost, const int *at, int nlost, const char *axes) {
    int id, k, first = NCALL;
    for (k = 0; k < nlost; k++)
        if (at[k] < first) first = at[k];
    for (id = 0; id < n; id++) {
        int ok, mine = -1;
        for (k = 0; k < nlost; k++)
            if (lost[k] == id) mine = k;
        if (mine >= 0) {
            ok = tr.done[id] == at[mine] && tr.s[id] == SPMD_ERR_PEER_LOST &&
                 strstr(tr.msg[id], "this device was lost by SPMD_FAULTS (kind=lose)") != NULL;
        } else if (axes == NULL && nlost > 0) {
            char want[96];
            ok = 0;
            for (k = 0; k < nlost && !ok; k++) {
                snprintf(want, sizeof want, "device %d was lost (SPMD_FAULTS kind=lose at its call #%d,", lost[k],
                         at[k]);
                ok = at[k] == first && strstr(tr.msg[id], want) != NULL;
            }
            ok = ok && (tr.done[id] == first ? tr.s[id] == SPMD_ERR_PEER_LOST || tr.s[id] == SPMD_ERR_BROKEN
                                             : tr.done[id] == first - 1 && tr.s[id] == SPMD_ERR_PEER_LOST &&
                                                   strstr(tr.msg[id], "abandoned") != NULL);
        } else {
            ok = tr.done[id] == NCALL && tr.s[id] == SPMD_OK;
        }
        T_CHECK(ok, "%s (%s): device %d did %d calls, then %s: %s", what, sname(), id, tr.done[id],
                spmd_status_name(tr.s[id]), tr.msg[id]);
    }
}

/* On a shrunk mesh: psum of the old ids over "dp,tp" and over "dp". */
typedef struct sums {
    double all[MAXD], dp[MAXD];
    spmd_status s[MAXD];
} sums;
static void sums_dev(spmd_dev *d, void *arg) {
    sums *r = (sums *)arg;
    int id = spmd_device_id(d);
    double x = (double)spmd_device_origin(spmd_device_mesh(d), id);
    r->s[id] = spmd_psum(d, &x, &r->all[id], 1, SPMD_F64, "dp,tp", NULL);
    if (r->s[id] == SPMD_OK) r->s[id] = spmd_psum(d, &x, &r->dp[id], 1, SPMD_F64, "dp", NULL);
}

/* The plain reference: which dp (axis 0) or tp (axis 1) slices of a dp x tp
   mesh hold one of the lost devices, and the survivors' old ids in order. */
static int expect_origins(int dp, int tp, int axis, const int *lost, int nlost, int *orig, int *nslices) {
    int drop[MAXD] = {0}, i, j, n = 0, kept = 0;
    for (i = 0; i < nlost; i++) drop[axis == 0 ? lost[i] / tp : lost[i] % tp] = 1;
    for (i = 0; i < (axis == 0 ? dp : tp); i++) kept += !drop[i];
    for (i = 0; i < dp; i++)
        for (j = 0; j < tp; j++)
            if (!drop[axis == 0 ? i : j]) orig[n++] = i * tp + j;
    *nslices = kept;
    return n;
}

/* Check a shrunk mesh nm of old mesh (dp x tp) that lost `lost`, along axis. */
static void check_shrunk(const char *what, spmd_mesh *nm, int dp, int tp, int axis, const int *lost, int nlost) {
    int orig[MAXD], kept, n = expect_origins(dp, tp, axis, lost, nlost, orig, &kept), i, j, ok = 1;
    int ndp = axis == 0 ? kept : dp, ntp = axis == 0 ? tp : kept;
    sums r;
    spmd_status s;
    T_CHECK(nm != NULL, "%s (%s): no mesh", what, sname());
    if (!nm) return;
    T_CHECK(spmd_mesh_size(nm) == n && spmd_mesh_axis_size(nm, "dp") == ndp && spmd_mesh_axis_size(nm, "tp") == ntp,
            "%s (%s): shrunk mesh %d devices, dp %d, tp %d (want %d, %d, %d)", what, sname(), spmd_mesh_size(nm),
            spmd_mesh_axis_size(nm, "dp"), spmd_mesh_axis_size(nm, "tp"), n, ndp, ntp);
    T_CHECK(spmd_mesh_scheduler(nm) == sched, "%s (%s): the scheduler is not kept", what, sname());
    for (i = 0; i < n && i < spmd_mesh_size(nm); i++) ok = ok && spmd_device_origin(nm, i) == orig[i];
    T_CHECK(ok, "%s (%s): spmd_device_origin differs from the survivors in order", what, sname());
    T_CHECK(spmd_device_origin(nm, n) == -(int)SPMD_ERR_INVALID && spmd_device_origin(nm, -1) == -(int)SPMD_ERR_INVALID,
            "%s (%s): origin out of range", what, sname());
    memset(&r, 0, sizeof r);
    s = spmd_run(nm, sums_dev, &r);
    T_CHECK(s == SPMD_OK, "%s (%s): run on the shrunk mesh: %s", what, sname(), spmd_status_name(s));
    for (i = 0; i < n && i < spmd_mesh_size(nm); i++) {
        double all = 0, col = 0;
        for (j = 0; j < n; j++) {
            all += orig[j];
            if (j % ntp == i % ntp) col += orig[j];
        }
        T_CHECK(r.s[i] == SPMD_OK && r.all[i] == all && r.dp[i] == col,
                "%s (%s): device %d of the shrunk mesh: %s, psums of the old ids %g %g, want %g %g", what, sname(), i,
                spmd_status_name(r.s[i]), r.all[i], r.dp[i], all, col);
    }
}

/* Lose `lost` (at calls `at`) in a dp x tp mesh during psums over axes
   (NULL: the whole mesh), shrink along axis, check. */
static void lose_and_shrink(const char *what, int dp, int tp, int axis, const int *lost, const int *at, int nlost,
                            const char *axes) {
    char plan[512];
    int i, got[MAXD], ng;
    size_t n = 0;
    spmd_mesh *m, *nm = NULL;
    spmd_status s;
    plan[0] = 0;
    for (i = 0; i < nlost; i++)
        n += (size_t)snprintf(plan + n, sizeof plan - n, "%sdevice=%d,seq=%d,kind=lose", i ? ";" : "", lost[i], at[i]);
    if (!(m = mesh_2d(dp, tp, plan))) return;
    s = train(m, axes);
    T_CHECK(s == SPMD_ERR_PEER_LOST, "%s (%s): spmd_run %s, want SPMD_ERR_PEER_LOST", what, sname(),
            spmd_status_name(s));
    check_devices(what, dp * tp, lost, at, nlost, axes);
    ng = spmd_mesh_lost(m, got, MAXD);
    {
        int ok = ng == nlost, want[MAXD], k;
        memcpy(want, lost, (size_t)nlost * sizeof *want);
        for (i = 0; i < nlost; i++) /* sorted: lost ids are reported in increasing order */
            for (k = i + 1; k < nlost; k++)
                if (want[k] < want[i]) { int t = want[i]; want[i] = want[k]; want[k] = t; }
        for (i = 0; ok && i < nlost; i++) ok = got[i] == want[i];
        T_CHECK(ok, "%s (%s): spmd_mesh_lost gave %d devices", what, sname(), ng);
    }
    s = spmd_mesh_shrink(m, axis == 0 ? "dp" : "tp", NULL, &nm);
    T_CHECK(s == SPMD_OK, "%s (%s): shrink: %s", what, sname(), spmd_status_name(s));
    if (s == SPMD_OK) check_shrunk(what, nm, dp, tp, axis, lost, nlost);
    if (nm) spmd_mesh_destroy(nm);
    spmd_mesh_destroy(m);
}

static void shrink_in_run(spmd_dev *d, void *arg) {
    spmd_mesh *nm = (spmd_mesh *)1;
    if (spmd_device_id(d) == 0) *(spmd_status *)arg = spmd_mesh_shrink(spmd_device_mesh(d), "dp", NULL, &nm);
    if (spmd_device_id(d) == 0 && nm != NULL) *(spmd_status *)arg = SPMD_ERR_STATE; /* (a mesh made: wrong) */
}

static void cases(void) {
    static const int l1[] = {3}, a1[] = {1};
    static const int l2[] = {7}, a2[] = {2};
    static const int l3[] = {1, 13}, a3[] = {1, 1};
    static const int l4[] = {6, 8}, a4[] = {1, 1};
    static const int l5[] = {5, 0}, a5[] = {1, 3};
    static const int l6[] = {4}, a6[] = {0};
    static const int l7[] = {2, 8}, a7[] = {0, 0};
    spmd_mesh *m, *nm, *nm2;
    spmd_status s;
    lose_and_shrink("one loss, 4x2", 4, 2, 0, l1, a1, 1, NULL);
    lose_and_shrink("odd sizes, 5x3", 5, 3, 0, l2, a2, 1, NULL);
    log_clear();
    lose_and_shrink("two slices at once, 5x3", 5, 3, 0, l3, a3, 2, "");
    T_CHECK(strstr(log_text, "mesh_shrink along 'dp': lost devices 1, 13; slices 0, 4 of 5 dropped; the new mesh has "
                             "9 devices") != NULL,
            "the shrink's log line (%s): %.600s", sname(), log_text);
    lose_and_shrink("two losses in one slice, 4x3", 4, 3, 0, l4, a4, 2, "");
    lose_and_shrink("two losses at different calls, 3x2", 3, 2, 0, l5, a5, 2, "");
    lose_and_shrink("two losses in one tp slice, 3x3", 3, 3, 1, l7, a7, 2, "");
    lose_and_shrink("along tp, 3x3", 3, 3, 1, l6, a6, 1, NULL);

    /* a loss in the shrunk mesh, and a second shrink: 4x2 loses 2 (slice 1):
       3x2 of old ids 0 1 4 5 6 7; its device 3 (old 5, slice 1 of the new
       mesh) is lost: 2x2 of new ids 0 1 4 5, i.e. first-mesh ids 0 1 6 7 */
    if ((m = mesh_2d(4, 2, "device=2,seq=1,kind=lose"))) {
        static const int lost2[] = {2}, at1[] = {1}, lost3[] = {3}, at2[] = {2};
        spmd_shrink_desc sd;
        memset(&sd, 0, sizeof sd);
        sd.faults = "device=3,seq=2,kind=lose";
        s = train(m, NULL);
        T_CHECK(s == SPMD_ERR_PEER_LOST, "second loss (%s): first run %s", sname(), spmd_status_name(s));
        check_devices("second loss, first run", 8, lost2, at1, 1, NULL);
        nm = NULL;
        s = spmd_mesh_shrink(m, "dp", &sd, &nm);
        T_CHECK(s == SPMD_OK && nm && spmd_mesh_size(nm) == 6, "second loss (%s): first shrink %s", sname(),
                spmd_status_name(s));
        if (nm) {
            static const int first[] = {0, 1, 6, 7}, second[] = {0, 1, 4, 5};
            int i, ok = 1;
            s = train(nm, NULL);
            T_CHECK(s == SPMD_ERR_PEER_LOST && spmd_mesh_lost(nm, NULL, 0) == 1, "second loss (%s): second run %s",
                    sname(), spmd_status_name(s));
            check_devices("second loss, second run", 6, lost3, at2, 1, NULL);
            nm2 = NULL;
            s = spmd_mesh_shrink(nm, "dp", NULL, &nm2);
            T_CHECK(s == SPMD_OK && nm2 && spmd_mesh_size(nm2) == 4 && spmd_mesh_axis_size(nm2, "dp") == 2,
                    "second loss (%s): second shrink %s", sname(), spmd_status_name(s));
            for (i = 0; nm2 && i < 4; i++)
                ok = ok && spmd_device_origin(nm2, i) == second[i] &&
                     spmd_device_origin(nm, spmd_device_origin(nm2, i)) == first[i];
            T_CHECK(nm2 && ok, "second loss (%s): origins through both shrinks", sname());
            if (nm2) {
                s = train(nm2, NULL);
                T_CHECK(s == SPMD_OK, "second loss (%s): run on the twice-shrunk mesh: %s", sname(),
                        spmd_status_name(s));
                check_devices("second loss, twice-shrunk run", 4, NULL, NULL, 0, NULL);
                spmd_mesh_destroy(nm2);
            }
            spmd_mesh_destroy(nm);
        }
        spmd_mesh_destroy(m);
    }

    /* nothing lost: a fresh mesh of the same shape, ids unchanged */
    if ((m = mesh_2d(3, 2, NULL))) {
        static const int none[1] = {0};
        s = train(m, NULL);
        nm = NULL;
        T_CHECK(s == SPMD_OK && spmd_mesh_lost(m, NULL, 0) == 0, "nothing lost (%s): run %s", sname(),
                spmd_status_name(s));
        check_devices("nothing lost", 6, NULL, NULL, 0, NULL);
        s = spmd_mesh_shrink(m, "dp", NULL, &nm);
        T_CHECK(s == SPMD_OK, "nothing lost (%s): shrink %s", sname(), spmd_status_name(s));
        if (nm) check_shrunk("nothing lost", nm, 3, 2, 0, none, 0);
        if (nm) spmd_mesh_destroy(nm);
        spmd_mesh_destroy(m);
    }

    /* every dp slice lost a device: a clear error, no mesh */
    if ((m = mesh_2d(2, 2, "device=0,seq=1,kind=lose;device=3,seq=1,kind=lose"))) {
        static const int l03[] = {0, 3}, at11[] = {1, 1};
        log_clear();
        s = train(m, "");
        T_CHECK(s == SPMD_ERR_PEER_LOST && spmd_mesh_lost(m, NULL, 0) == 2, "whole axis (%s): run %s", sname(),
                spmd_status_name(s));
        check_devices("whole axis", 4, l03, at11, 2, "");
        nm = (spmd_mesh *)1;
        s = spmd_mesh_shrink(m, "dp", NULL, &nm);
        T_CHECK(s == SPMD_ERR_PEER_LOST && nm == NULL, "whole axis (%s): %s", sname(), spmd_status_name(s));
        T_CHECK(strstr(log_text, "every one of the 2 slices along 'dp' lost a device (lost: 0, 3)") != NULL,
                "whole axis (%s): message: %.400s", sname(), log_text);
        /* along tp the two losses are in both tp slices too; shrinking the
           same mesh again is allowed (nothing changed): the same answer */
        nm = (spmd_mesh *)1;
        s = spmd_mesh_shrink(m, "tp", NULL, &nm);
        T_CHECK(s == SPMD_ERR_PEER_LOST && nm == NULL, "whole axis tp (%s): %s", sname(), spmd_status_name(s));
        spmd_mesh_destroy(m);
    }

    /* bad arguments: nothing made, nothing changed */
    if ((m = mesh_2d(2, 2, NULL))) {
        nm = (spmd_mesh *)1;
        log_clear();
        s = spmd_mesh_shrink(m, "pp", NULL, &nm);
        T_CHECK(s == SPMD_ERR_AXIS && nm == NULL && strstr(log_text, "'pp' is not one axis of the mesh (its axes: dp, tp)"),
                "unknown axis (%s): %s, %.300s", sname(), spmd_status_name(s), log_text);
        s = spmd_mesh_shrink(m, "dp,tp", NULL, &nm);
        T_CHECK(s == SPMD_ERR_AXIS && nm == NULL, "two axes (%s): %s", sname(), spmd_status_name(s));
        T_CHECK(spmd_mesh_shrink(m, NULL, NULL, &nm) == SPMD_ERR_NULL && spmd_mesh_shrink(NULL, "dp", NULL, &nm) ==
                SPMD_ERR_NULL && spmd_mesh_shrink(m, "dp", NULL, NULL) == SPMD_ERR_NULL, "NULL arguments (%s)", sname());
        T_CHECK(spmd_mesh_lost(NULL, NULL, 0) == -(int)SPMD_ERR_NULL && spmd_mesh_lost(m, NULL, 3) ==
                -(int)SPMD_ERR_INVALID && spmd_device_origin(m, 2) == 2, "lost/origin arguments (%s)", sname());
        s = SPMD_OK;
        T_CHECK(spmd_run(m, shrink_in_run, &s) == SPMD_OK && s == SPMD_ERR_BUSY,
                "shrink while running (%s): %s, want SPMD_ERR_BUSY", sname(), spmd_status_name(s));
        spmd_mesh_destroy(m);
    }

    /* SPMD_FAULTS (written for the first mesh's ids) is not applied to the
       shrunk mesh: there, device 0 is a survivor */
    setenv("SPMD_FAULTS", "device=0,seq=1,kind=lose", 1);
    if ((m = mesh_2d(2, 2, NULL))) {
        static const int l0[] = {0}, at1e[] = {1};
        s = train(m, NULL);
        T_CHECK(s == SPMD_ERR_PEER_LOST, "SPMD_FAULTS (%s): first run %s", sname(), spmd_status_name(s));
        check_devices("SPMD_FAULTS, first run", 4, l0, at1e, 1, NULL);
        nm = NULL;
        s = spmd_mesh_shrink(m, "dp", NULL, &nm);
        T_CHECK(s == SPMD_OK && nm && spmd_mesh_size(nm) == 2 && spmd_device_origin(nm, 0) == 2,
                "SPMD_FAULTS (%s): shrink %s", sname(), spmd_status_name(s));
        if (nm) {
            s = train(nm, NULL);
            T_CHECK(s == SPMD_OK, "SPMD_FAULTS (%s): the shrunk mesh lost a device again: %s", sname(),
                    spmd_status_name(s));
            check_devices("SPMD_FAULTS, shrunk run", 2, NULL, NULL, 0, NULL);
            spmd_mesh_destroy(nm);
        }
        spmd_mesh_destroy(m);
    }
    unsetenv("SPMD_FAULTS");
}

int main(void) {
    sched = SPMD_SCHEDULER_THREADS;
    cases();
    sched = SPMD_SCHEDULER_FIBERS;
    cases();
    return t_summary();
}
