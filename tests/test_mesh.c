/* test_mesh.c - meshes and devices: creation and refusal, queries, per-device
   coordinates and axis indices, big and oversubscribed meshes, attaching
   from the program's own threads, independent meshes, allocator and log
   hooks, and the library's name tables.

   Sanitizer builds (SPMD_TEST_QUICK=1) create none of the three meshes of
   4,096 to 65,536 devices, and run 1-D meshes of 1, 2, 3, 7, 8
   and 16 devices, not every size to 16 (about 2 s plain, 20 s under
   ThreadSanitizer on 2 cores with all of them). */
#define _GNU_SOURCE 1 /* posix_memalign, strcasestr, pthread_getattr_np */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"

#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static int quick;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Device threads note what went wrong here; the main thread reports it as
   one check per case (how many devices failed, and the first failure). */
typedef struct { long bad; char first[400]; } dev_fail;

static void dev_fail_note(dev_fail *f, int device, const char *fmt, ...) {
    if (__atomic_fetch_add(&f->bad, 1, __ATOMIC_ACQ_REL) != 0) return;
    int n = snprintf(f->first, sizeof f->first, "device %d: ", device);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->first + n, sizeof f->first - (size_t)n, fmt, ap);
    va_end(ap);
}

/* ======================================================================
   hooks: a counting allocator and a log recorder
   ====================================================================== */

#define ALLOC_MAGIC ((size_t)0x5a11c0de5a11c0deULL)

typedef struct {
    long calls;      /* alloc calls, failed ones included */
    long allocs;     /* successful allocations */
    long frees;      /* frees of non-NULL pointers */
    long live;       /* allocs - frees */
    long bad_align;  /* align not a power of two or above 4096 */
    long bad_free;   /* a pointer we did not hand out, or freed twice */
    long null_frees;
    long fail_at;    /* fail the alloc call with this number (0-based); -1 never */
} counting;

static void *count_alloc(size_t size, size_t align, void *user) {
    counting *c = user;
    long k = __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    if (align == 0 || (align & (align - 1)) != 0 || align > 4096)
        __atomic_fetch_add(&c->bad_align, 1, __ATOMIC_RELAXED);
    if (k == __atomic_load_n(&c->fail_at, __ATOMIC_RELAXED)) return NULL;
    size_t pad = align > 16 ? align : 16; /* room for two header words */
    if (pad > 4096) pad = 4096;
    void *base;
    if (posix_memalign(&base, pad, size + pad) != 0) return NULL;
    char *p = (char *)base + pad;
    ((size_t *)p)[-1] = pad;
    ((size_t *)p)[-2] = ALLOC_MAGIC;
    __atomic_fetch_add(&c->allocs, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->live, 1, __ATOMIC_RELAXED);
    return p;
}

static void count_free(void *ptr, void *user) {
    counting *c = user;
    if (!ptr) {
        __atomic_fetch_add(&c->null_frees, 1, __ATOMIC_RELAXED);
        return;
    }
    size_t *h = ptr;
    if (h[-2] != ALLOC_MAGIC) {
        __atomic_fetch_add(&c->bad_free, 1, __ATOMIC_RELAXED);
        return;
    }
    h[-2] = 0;
    __atomic_fetch_add(&c->frees, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&c->live, 1, __ATOMIC_RELAXED);
    free((char *)ptr - h[-1]);
}

static void counting_init(counting *c) {
    memset(c, 0, sizeof *c);
    c->fail_at = -1;
}

static spmd_allocator counting_allocator(counting *c) {
    spmd_allocator a = {count_alloc, count_free, c};
    return a;
}

#define LOG_MAX 256
typedef struct {
    pthread_mutex_t mu;
    int n, dropped;
    struct { spmd_log_level level; int device; char msg[240]; } rec[LOG_MAX];
} log_rec;

static void log_hook(void *user, spmd_log_level level, int device, const char *msg) {
    log_rec *l = user;
    pthread_mutex_lock(&l->mu);
    if (l->n < LOG_MAX) {
        l->rec[l->n].level = level;
        l->rec[l->n].device = device;
        snprintf(l->rec[l->n].msg, sizeof l->rec[l->n].msg, "%s", msg ? msg : "(null)");
        l->n++;
    } else {
        l->dropped++;
    }
    pthread_mutex_unlock(&l->mu);
}

static void log_init(log_rec *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
}

/* a message containing needle (case-insensitive), or -1 */
static int log_find(log_rec *l, const char *needle, int from) {
    for (int k = from; k < l->n; k++)
        if (strcasestr(l->rec[k].msg, needle)) return k;
    return -1;
}

/* ======================================================================
   plain computations the library is checked against
   ====================================================================== */

/* row-major coordinates of device id */
static void coords_of(int id, int ndim, const int *shape, int *coords) {
    for (int k = ndim - 1; k >= 0; k--) {
        coords[k] = id % shape[k];
        id /= shape[k];
    }
}

/* parse "a,b" against names: fills dims, returns their number or -1 */
static int parse_axes(const char *axes, int ndim, char names[][32], int *dims) {
    int n = 0;
    if (!*axes) return 0;
    if (!strcmp(axes, "*")) {
        for (int k = 0; k < ndim; k++) dims[n++] = k;
        return n;
    }
    const char *p = axes;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        int found = -1;
        for (int k = 0; k < ndim; k++)
            if (strlen(names[k]) == len && !strncmp(names[k], p, len)) found = k;
        if (found < 0) return -1;
        dims[n++] = found;
        if (!e) return n;
        p = e + 1;
    }
}

static int expect_index(const int *coords, const int *shape, const int *dims, int n) {
    int idx = 0;
    for (int k = 0; k < n; k++) idx = idx * shape[dims[k]] + coords[dims[k]];
    return idx;
}

static int expect_size(const int *shape, const int *dims, int n) {
    int s = 1;
    for (int k = 0; k < n; k++) s *= shape[dims[k]];
    return s;
}

/* sum of the ids of the devices in id's group over the named dims */
static long expect_group_id_sum(int id, int ndim, const int *shape, const int *dims, int n,
                                int size) {
    int me[SPMD_MAX_AXES], c[SPMD_MAX_AXES], named[SPMD_MAX_AXES] = {0};
    long sum = 0;
    for (int k = 0; k < n; k++) named[dims[k]] = 1;
    coords_of(id, ndim, shape, me);
    for (int g = 0; g < size; g++) {
        coords_of(g, ndim, shape, c);
        int same = 1;
        for (int k = 0; k < ndim; k++)
            if (!named[k] && c[k] != me[k]) same = 0;
        if (same) sum += g;
    }
    return sum;
}

static spmd_mesh_desc base_desc(int ndim, const int *shape, const char *const *names) {
    spmd_mesh_desc d = {0};
    d.ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        d.shape[k] = shape[k];
        d.axis_names[k] = names[k];
    }
    d.timeout_ms = 30000; /* a bug shows as a timeout, not a hang */
    return d;
}

/* ======================================================================
   1. library tables
   ====================================================================== */

static void test_tables(void) {
    static const struct { spmd_status s; const char *name, *text; } want[] = {
#define X(name, text) {name, #name, text},
        SPMD_STATUS_LIST(X)
#undef X
    };
    int n = (int)(sizeof want / sizeof want[0]);
    T_CHECK(n == SPMD_STATUS_COUNT, "status list has %d entries, count %d", n, SPMD_STATUS_COUNT);
    T_CHECK(SPMD_OK == 0, "SPMD_OK is %d", SPMD_OK);
    int names_ok = 1, strings_ok = 1, distinct = 1;
    for (int i = 0; i < n; i++) {
        const char *name = spmd_status_name(want[i].s), *str = spmd_status_string(want[i].s);
        if (!name || strcmp(name, want[i].name)) names_ok = 0;
        if (!str || strcmp(str, want[i].text)) strings_ok = 0;
        for (int j = 0; j < i && name; j++) {
            const char *other = spmd_status_name(want[j].s);
            if (other && !strcmp(other, name)) distinct = 0;
        }
    }
    T_CHECK(names_ok, "spmd_status_name gives each status its enum name");
    T_CHECK(strings_ok, "spmd_status_string gives each status its text");
    T_CHECK(distinct, "status names are distinct");
    int bad[] = {-1, SPMD_STATUS_COUNT, 1000, INT_MIN};
    int out_ok = 1;
    for (int i = 0; i < 4; i++)
        if (!spmd_status_name((spmd_status)bad[i]) || !spmd_status_string((spmd_status)bad[i]))
            out_ok = 0;
    T_CHECK(out_ok, "out-of-range statuses still get non-NULL name and string");

    static const struct { spmd_dtype t; size_t size; const char *name; } dt[] = {
        {SPMD_BOOL, 1, "bool"}, {SPMD_I8, 1, "i8"},    {SPMD_U8, 1, "u8"},
        {SPMD_I16, 2, "i16"},   {SPMD_U16, 2, "u16"},  {SPMD_I32, 4, "i32"},
        {SPMD_U32, 4, "u32"},   {SPMD_I64, 8, "i64"},  {SPMD_U64, 8, "u64"},
        {SPMD_F16, 2, "f16"},   {SPMD_BF16, 2, "bf16"}, {SPMD_F32, 4, "f32"},
        {SPMD_F64, 8, "f64"},   {SPMD_C64, 8, "c64"},  {SPMD_C128, 16, "c128"},
        {SPMD_F8E4M3FN, 1, "f8e4m3fn"}, {SPMD_F8E5M2, 1, "f8e5m2"},
    };
    int ndt = (int)(sizeof dt / sizeof dt[0]);
    T_CHECK(ndt == SPMD_DTYPE_COUNT - 1, "every dtype listed");
    int sizes_ok = 1, dnames_ok = 1;
    for (int i = 0; i < ndt; i++) {
        if (spmd_dtype_size(dt[i].t) != dt[i].size) sizes_ok = 0;
        const char *nm = spmd_dtype_name(dt[i].t);
        if (!nm || strcmp(nm, dt[i].name)) {
            dnames_ok = 0;
            fprintf(stderr, "  dtype %d named \"%s\", expected \"%s\"\n", (int)dt[i].t,
                    nm ? nm : "(null)", dt[i].name);
        }
    }
    T_CHECK(sizes_ok, "spmd_dtype_size of every dtype");
    T_CHECK(dnames_ok, "spmd_dtype_name of every dtype");
    T_CHECK(spmd_dtype_size(SPMD_DTYPE_NONE) == 0 && spmd_dtype_size(SPMD_DTYPE_COUNT) == 0 &&
                spmd_dtype_size((spmd_dtype)-1) == 0 && spmd_dtype_size((spmd_dtype)77) == 0,
            "spmd_dtype_size is 0 for invalid dtypes");
    (void)spmd_dtype_name(SPMD_DTYPE_NONE); /* must not crash */
    (void)spmd_dtype_name((spmd_dtype)-5);
    (void)spmd_dtype_name(SPMD_DTYPE_COUNT);

    static const char *const ops[] = {"", "sum", "prod", "max", "min", "mean", "argmax", "argmin"};
    int ops_ok = 1;
    for (int op = SPMD_OP_SUM; op < SPMD_OP_COUNT; op++) {
        const char *nm = spmd_op_name((spmd_op)op);
        if (!nm || strcmp(nm, ops[op])) {
            ops_ok = 0;
            fprintf(stderr, "  op %d named \"%s\", expected \"%s\"\n", op, nm ? nm : "(null)",
                    ops[op]);
        }
    }
    T_CHECK(ops_ok, "spmd_op_name of every op");
    (void)spmd_op_name(SPMD_OP_NONE);
    (void)spmd_op_name(SPMD_OP_COUNT);
    (void)spmd_op_name((spmd_op)-1);

    T_CHECK(!strcmp(spmd_backend_name(SPMD_BACKEND_DEFAULT), "default") &&
                !strcmp(spmd_backend_name(SPMD_BACKEND_THREADS), "threads") &&
                !strcmp(spmd_backend_name(SPMD_BACKEND_LIBFABRIC), "libfabric") &&
                !strcmp(spmd_backend_name(SPMD_BACKEND_COUNT), "invalid") &&
                !strcmp(spmd_backend_name((spmd_backend)-1), "invalid"),
            "spmd_backend_name of every backend, and of invalid ones");
    T_CHECK(!strcmp(spmd_scheduler_name(SPMD_SCHEDULER_DEFAULT), "default") &&
                !strcmp(spmd_scheduler_name(SPMD_SCHEDULER_THREADS), "threads") &&
                !strcmp(spmd_scheduler_name(SPMD_SCHEDULER_FIBERS), "fibers") &&
                !strcmp(spmd_scheduler_name(SPMD_SCHEDULER_COUNT), "invalid") &&
                !strcmp(spmd_scheduler_name((spmd_scheduler)-1), "invalid"),
            "spmd_scheduler_name of every scheduler, and of invalid ones");

    const char *v = spmd_version();
    char parts[32];
    snprintf(parts, sizeof parts, "%d.%d.%d", SPMD_VERSION_MAJOR, SPMD_VERSION_MINOR,
             SPMD_VERSION_PATCH);
    T_CHECK(v && !strcmp(v, SPMD_VERSION_STRING) && !strcmp(v, parts),
            "spmd_version \"%s\", macros \"%s\" and \"%s\"", v ? v : "(null)",
            SPMD_VERSION_STRING, parts);
}

/* ======================================================================
   2. valid meshes: queries on the mesh and on every device
   ====================================================================== */

typedef struct {
    int ndim, shape[SPMD_MAX_AXES], size;
    char names[SPMD_MAX_AXES][32];
    dev_fail fail;
    spmd_mesh *m;
    int nstr;         /* axes strings every device asks about */
    char strs[SPMD_MAX_AXES * SPMD_MAX_AXES + 8][300];
} mesh_case;

/* axes strings worth asking: singles, ordered pairs, all in order,
   all reversed, "*" and "" */
static int axes_strings(const mesh_case *c, char out[][300], int max) {
    int n = 0;
    for (int a = 0; a < c->ndim && n < max; a++) snprintf(out[n++], 300, "%s", c->names[a]);
    for (int a = 0; a < c->ndim; a++)
        for (int b = 0; b < c->ndim && n < max; b++)
            if (a != b) snprintf(out[n++], 300, "%s,%s", c->names[a], c->names[b]);
    if (c->ndim > 2 && n + 2 <= max) {
        char fwd[300] = "", rev[300] = "";
        for (int a = 0; a < c->ndim; a++) {
            strcat(fwd, c->names[a]);
            strcat(rev, c->names[c->ndim - 1 - a]);
            if (a + 1 < c->ndim) strcat(fwd, ","), strcat(rev, ",");
        }
        snprintf(out[n++], 300, "%s", fwd);
        snprintf(out[n++], 300, "%s", rev);
    }
    if (n + 2 <= max) {
        snprintf(out[n++], 300, "*");
        snprintf(out[n++], 300, "%s", "");
    }
    return n;
}

static void case_device(spmd_dev *d, void *arg) {
    mesh_case *c = arg;
    char why[400] = "";
    int id = spmd_device_id(d), coords[SPMD_MAX_AXES], want[SPMD_MAX_AXES], dims[SPMD_MAX_AXES];
    if (id < 0 || id >= c->size) {
        dev_fail_note(&c->fail, id, "device id out of range");
        return;
    }
    if (spmd_device_mesh(d) != c->m) snprintf(why, sizeof why, "spmd_device_mesh wrong");
    const char *le = spmd_last_error(d);
    if (!le || *le) snprintf(why, sizeof why, "last error not empty at start: \"%.200s\"", le ? le : "(null)");
    memset(coords, 0xff, sizeof coords);
    int nd = spmd_device_coords(d, coords);
    coords_of(id, c->ndim, c->shape, want);
    if (nd != c->ndim || memcmp(coords, want, sizeof(int) * c->ndim))
        snprintf(why, sizeof why, "coords wrong (returned ndim %d)", nd);

    for (int s = 0; s < c->nstr; s++) {
        const char *axes = c->strs[s];
        int nd2 = parse_axes(axes, c->ndim, c->names, dims);
        int wi = expect_index(want, c->shape, dims, nd2), ws = expect_size(c->shape, dims, nd2);
        int gi = spmd_axis_index(d, axes), gs = spmd_axis_size(d, axes);
        if (gi != wi || gs != ws)
            snprintf(why, sizeof why, "axes \"%s\": index %d size %d, want %d %d", axes, gi, gs,
                     wi, ws);
    }
    /* psum over each of the same axes strings, a different input each time
       (so a result left over from an earlier call cannot pass) */
    for (int s = 0; s < c->nstr; s++) {
        const char *axes = c->strs[s];
        int nd2 = parse_axes(axes, c->ndim, c->names, dims);
        int64_t x = 7 * (int64_t)id + 100000 * (int64_t)(s + 1), y = -1;
        spmd_status st = spmd_psum(d, &x, &y, 1, SPMD_I64, axes, NULL);
        int64_t w = 7 * expect_group_id_sum(id, c->ndim, c->shape, dims, nd2, c->size) +
                    100000 * (int64_t)(s + 1) * expect_size(c->shape, dims, nd2);
        if (st != SPMD_OK || y != w)
            snprintf(why, sizeof why, "psum over \"%s\": %s, %lld, want %lld", axes,
                     spmd_status_name(st), (long long)y, (long long)w);
    }
    if (*why) dev_fail_note(&c->fail, id, "%s", why);
}

/* create, query on the mesh, run on every device (if run), destroy */
static void check_mesh(int ndim, const int *shape, int run) {
    static mesh_case c; /* big; the tests run one at a time */
    memset(&c, 0, sizeof c);
    c.ndim = ndim;
    c.size = 1;
    static const char *const base[] = {"row", "col", "depth", "x", "y1", "dp_2", "Z", "t"};
    char mutable_names[SPMD_MAX_AXES][32];
    spmd_mesh_desc desc = base_desc(ndim, shape, base);
    for (int k = 0; k < ndim; k++) {
        c.shape[k] = shape[k];
        c.size *= shape[k];
        snprintf(c.names[k], 32, "%s", base[k]);
        snprintf(mutable_names[k], 32, "%s", base[k]);
        desc.axis_names[k] = mutable_names[k];
    }
    spmd_mesh *m = NULL;
    spmd_status s = spmd_mesh_create(&desc, &m);
    char label[80];
    int len = snprintf(label, sizeof label, "(");
    for (int k = 0; k < ndim; k++) len += snprintf(label + len, sizeof label - len, "%s%d", k ? "," : "", shape[k]);
    snprintf(label + len, sizeof label - len, ")");
    T_CHECK(s == SPMD_OK && m, "create %s: %s", label, spmd_status_name(s));
    if (s != SPMD_OK || !m) return;
    /* the mesh must have copied the names */
    for (int k = 0; k < ndim; k++) memset(mutable_names[k], 'Q', 31), mutable_names[k][31] = 0;

    int ok = spmd_mesh_size(m) == c.size && spmd_mesh_ndim(m) == ndim &&
             spmd_mesh_backend(m) == SPMD_BACKEND_THREADS && spmd_mesh_status(m) == SPMD_OK;
    const char *me = spmd_mesh_error(m);
    ok = ok && me && !*me;
    T_CHECK(ok, "%s: size %d ndim %d backend %d status %s", label, spmd_mesh_size(m),
            spmd_mesh_ndim(m), (int)spmd_mesh_backend(m), spmd_status_name(spmd_mesh_status(m)));
    int names_ok = 1, sizes_ok = 1;
    for (int k = 0; k < ndim; k++) {
        const char *nm = spmd_mesh_axis_name(m, k);
        if (!nm || strcmp(nm, c.names[k])) names_ok = 0;
        if (spmd_mesh_axis_size(m, c.names[k]) != shape[k]) sizes_ok = 0;
    }
    T_CHECK(names_ok, "%s: axis names (copied at create)", label);
    T_CHECK(!spmd_mesh_axis_name(m, -1) && !spmd_mesh_axis_name(m, ndim) &&
                !spmd_mesh_axis_name(m, SPMD_MAX_AXES),
            "%s: axis name out of range is NULL", label);
    T_CHECK(sizes_ok, "%s: spmd_mesh_axis_size of each axis", label);
    T_CHECK(spmd_mesh_axis_size(m, "*") == c.size && spmd_mesh_axis_size(m, "") == 1,
            "%s: axis_size \"*\" %d \"\" %d", label, spmd_mesh_axis_size(m, "*"),
            spmd_mesh_axis_size(m, ""));
    if (ndim >= 2) {
        char both[80], rev[80];
        snprintf(both, sizeof both, "%s,%s", c.names[0], c.names[1]);
        snprintf(rev, sizeof rev, "%s,%s", c.names[1], c.names[0]);
        T_CHECK(spmd_mesh_axis_size(m, both) == shape[0] * shape[1] &&
                    spmd_mesh_axis_size(m, rev) == shape[0] * shape[1],
                "%s: axis_size of two axes", label);
        T_CHECK(spmd_mesh_axis_size(m, "row,row") == -SPMD_ERR_DUP_AXIS,
                "%s: axis_size \"row,row\" = %d", label, spmd_mesh_axis_size(m, "row,row"));
    }
    T_CHECK(spmd_mesh_axis_size(m, "nope") == -SPMD_ERR_AXIS, "%s: axis_size unknown = %d", label,
            spmd_mesh_axis_size(m, "nope"));
    T_CHECK(spmd_mesh_axis_size(m, "ro") == -SPMD_ERR_AXIS &&
                spmd_mesh_axis_size(m, "rowx") == -SPMD_ERR_AXIS,
            "%s: axis_size of a prefix / extension of a name is unknown", label);
    T_CHECK(spmd_mesh_axis_size(m, NULL) < 0, "%s: axis_size NULL = %d", label,
            spmd_mesh_axis_size(m, NULL));

    if (run) {
        c.m = m;
        c.nstr = axes_strings(&c, c.strs, (int)(sizeof c.strs / sizeof c.strs[0]));
        s = spmd_run(m, case_device, &c);
        T_CHECK(s == SPMD_OK && c.fail.bad == 0, "%s: run %s, %ld devices wrong; first %s", label,
                spmd_status_name(s), c.fail.bad, c.fail.first);
    }
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "%s: destroy", label);
}

static void test_valid_meshes(void) {
    for (int n = 1; n <= 16; n++) /* (sanitizers: 1, 2, 3, 7, 8 and 16 of them) */
        if (!quick || n <= 3 || n == 7 || n == 8 || n == 16) check_mesh(1, (int[]){n}, 1);
    check_mesh(2, (int[]){4, 2}, 1);
    check_mesh(2, (int[]){2, 4}, 1);
    check_mesh(2, (int[]){3, 5}, 1);
    check_mesh(2, (int[]){1, 7}, 1);
    check_mesh(2, (int[]){7, 1}, 1);
    check_mesh(2, (int[]){16, 3}, 1);
    check_mesh(3, (int[]){3, 1, 5}, 1);
    check_mesh(3, (int[]){2, 3, 4}, 1);
    check_mesh(4, (int[]){2, 1, 3, 2}, 1);
    check_mesh(5, (int[]){1, 1, 1, 1, 1}, 1);
    check_mesh(5, (int[]){2, 1, 3, 1, 2}, 1);
    check_mesh(6, (int[]){1, 2, 1, 1, 3, 1}, 1);
    check_mesh(7, (int[]){2, 1, 2, 1, 2, 1, 3}, 1);
    check_mesh(8, (int[]){1, 2, 1, 3, 1, 2, 1, 2}, 1);
    check_mesh(8, (int[]){1, 1, 1, 1, 1, 1, 1, 1}, 1);
    /* created and queried, not run */
    check_mesh(8, (int[]){2, 2, 2, 2, 2, 2, 2, 2}, 0);
    if (!quick) { /* (sanitizers: none of the largest; each takes 2.5 s under ThreadSanitizer) */
        check_mesh(2, (int[]){64, 64}, 0);
        check_mesh(1, (int[]){16384}, 0);
        check_mesh(4, (int[]){16, 16, 16, 16}, 0); /* 65,536 */
    }

    /* names that are prefixes of each other, or differ only in case */
    spmd_mesh_desc p = base_desc(4, (int[]){2, 3, 5, 7}, (const char *[]){"a", "ab", "abc", "A"});
    spmd_mesh *pm = NULL;
    T_CHECK(spmd_mesh_create(&p, &pm) == SPMD_OK, "names a, ab, abc, A");
    if (pm) {
        T_CHECK(spmd_mesh_axis_size(pm, "a") == 2 && spmd_mesh_axis_size(pm, "ab") == 3 &&
                    spmd_mesh_axis_size(pm, "abc") == 5 && spmd_mesh_axis_size(pm, "A") == 7 &&
                    spmd_mesh_axis_size(pm, "abc,a") == 10 && spmd_mesh_axis_size(pm, "A,ab") == 21,
                "prefix and case names resolve exactly");
        T_CHECK(spmd_mesh_axis_size(pm, "abcd") == -SPMD_ERR_AXIS &&
                    spmd_mesh_axis_size(pm, "b") == -SPMD_ERR_AXIS,
                "near-miss names are unknown");
        spmd_mesh_destroy(pm);
    }

    /* the longest allowed name, 31 characters, is accepted */
    spmd_mesh_desc d = base_desc(1, (int[]){2}, (const char *[]){"abcdefghijklmnopqrstuvwxyz01234"});
    spmd_mesh *m = NULL;
    spmd_status s = spmd_mesh_create(&d, &m);
    T_CHECK(s == SPMD_OK && m, "31-character axis name accepted: %s", spmd_status_name(s));
    if (m) {
        T_CHECK(spmd_mesh_axis_size(m, "abcdefghijklmnopqrstuvwxyz01234") == 2, "long name found");
        spmd_mesh_destroy(m);
    }
}

/* valid but unusual desc fields: each mesh runs a few psums, one device late */
typedef struct { int late_ms, iters; dev_fail fail; } fields_arg;

static void fields_device(spmd_dev *d, void *arg) {
    fields_arg *a = arg;
    int id = spmd_device_id(d), n = spmd_axis_size(d, "i"), idx = spmd_axis_index(d, "i");
    if (id == 1 && a->late_ms) nanosleep(&(struct timespec){0, a->late_ms * 1000000L}, NULL);
    for (int it = 0; it < a->iters; it++) {
        int64_t x = (int64_t)idx * it, y = -1, want = (int64_t)it * n * (n - 1) / 2;
        spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_I64, "i", NULL);
        if (s != SPMD_OK || y != want) {
            dev_fail_note(&a->fail, id, "psum %d: %s, %lld, want %lld", it, spmd_status_name(s),
                          (long long)y, (long long)want);
            return;
        }
    }
}

static void run_fields(const char *what, spmd_mesh_desc *d, int late_ms) {
    spmd_mesh *m = NULL;
    spmd_status s = spmd_mesh_create(d, &m);
    T_CHECK(s == SPMD_OK && m, "%s: create %s", what, spmd_status_name(s));
    if (!m) return;
    fields_arg a = {late_ms, 40, {0, ""}};
    s = spmd_run(m, fields_device, &a);
    T_CHECK(s == SPMD_OK && a.fail.bad == 0, "%s: run %s, %ld devices wrong; first %s", what,
            spmd_status_name(s), a.fail.bad, a.fail.first);
    spmd_mesh_destroy(m);
}

static void test_desc_fields(void) {
    static const int64_t timeouts[] = {1 << 30, (int64_t)1 << 62, INT64_MAX};
    for (int k = 0; k < 3; k++) {
        /* a huge deadline means "wait for ever", not "time out at once" */
        char what[64];
        snprintf(what, sizeof what, "timeout_ms %lld, one device 20 ms late", (long long)timeouts[k]);
        spmd_mesh_desc d = base_desc(1, (int[]){3}, (const char *[]){"i"});
        d.timeout_ms = timeouts[k];
        d.log_level = SPMD_LOG_OFF;
        run_fields(what, &d, 20);
    }
    static const int inflight[] = {1, 2, 1024};
    for (int k = 0; k < 3; k++) {
        char what[64];
        snprintf(what, sizeof what, "max_inflight %d", inflight[k]);
        spmd_mesh_desc d = base_desc(1, (int[]){5}, (const char *[]){"i"});
        d.max_inflight = inflight[k];
        run_fields(what, &d, 0);
    }
    for (int lvl = SPMD_LOG_DEFAULT; lvl < SPMD_LOG_LEVEL_COUNT; lvl++) {
        static log_rec l;
        log_init(&l);
        char what[64];
        snprintf(what, sizeof what, "log_level %d", lvl);
        spmd_mesh_desc d = base_desc(1, (int[]){2}, (const char *[]){"i"});
        d.log_level = (spmd_log_level)lvl;
        d.log_fn = log_hook, d.log_user = &l;
        run_fields(what, &d, 0);
        pthread_mutex_destroy(&l.mu);
    }
    for (int chk = SPMD_CHECK_DEFAULT; chk < SPMD_CHECK_COUNT; chk++) {
        char what[64];
        snprintf(what, sizeof what, "check %d", chk);
        spmd_mesh_desc d = base_desc(2, (int[]){2, 3}, (const char *[]){"j", "i"});
        d.check = (spmd_check)chk;
        run_fields(what, &d, 0);
    }
    spmd_mesh_desc d = base_desc(1, (int[]){2}, (const char *[]){"i"});
    d.backend = SPMD_BACKEND_THREADS;
    spmd_mesh *m = NULL;
    T_CHECK(spmd_mesh_create(&d, &m) == SPMD_OK && spmd_mesh_backend(m) == SPMD_BACKEND_THREADS,
            "backend THREADS asked for explicitly");
    if (m) spmd_mesh_destroy(m);
}

/* ======================================================================
   3. refused descs: each with its own status, nothing leaked
   ====================================================================== */

static int refusal_cases, refusal_size_status[2];

static void refuse(const char *what, spmd_mesh_desc *d, const spmd_status *allowed, int nallowed,
                   log_rec *log_out) {
    counting c;
    counting_init(&c);
    log_rec local;
    log_rec *l = log_out ? log_out : &local;
    log_init(l);
    d->allocator = counting_allocator(&c);
    d->log_fn = log_hook;
    d->log_user = l;
    spmd_mesh *m = NULL;
    spmd_status s = spmd_mesh_create(d, &m);
    int ok = 0;
    for (int k = 0; k < nallowed; k++) ok |= s == allowed[k];
    T_CHECK(ok, "%s: got %s, want %s%s", what, spmd_status_name(s), spmd_status_name(allowed[0]),
            nallowed > 1 ? " or another listed" : "");
    T_CHECK(m == NULL, "%s: *out stays NULL", what);
    if (s == SPMD_OK && m) spmd_mesh_destroy(m);
    T_CHECK(c.live == 0 && c.bad_free == 0, "%s: %ld blocks leaked, %ld bad frees", what, c.live,
            c.bad_free);
    refusal_cases++;
    if (!log_out) pthread_mutex_destroy(&l->mu);
}

#define REFUSE(what, d, ...)                                                          \
    do {                                                                              \
        static const spmd_status allowed_[] = {__VA_ARGS__};                          \
        refuse(what, &(d), allowed_, (int)(sizeof allowed_ / sizeof allowed_[0]), NULL); \
    } while (0)

static spmd_mesh_desc good2(void) {
    return base_desc(2, (int[]){4, 2}, (const char *[]){"row", "col"});
}

static void test_refusals(void) {
    spmd_mesh *m = (spmd_mesh *)NULL;
    spmd_mesh_desc d = good2();
    T_CHECK(spmd_mesh_create(NULL, &m) == SPMD_ERR_NULL && m == NULL, "NULL desc");
    T_CHECK(spmd_mesh_create(&d, NULL) == SPMD_ERR_NULL, "NULL out");

    d = good2(), d.ndim = 0;                 REFUSE("ndim 0", d, SPMD_ERR_INVALID);
    d = good2(), d.ndim = -1;                REFUSE("ndim -1", d, SPMD_ERR_INVALID);
    d = good2(), d.ndim = SPMD_MAX_AXES + 1; REFUSE("ndim 9", d, SPMD_ERR_INVALID);
    d = good2(), d.ndim = INT_MAX;           REFUSE("ndim INT_MAX", d, SPMD_ERR_INVALID);
    d = good2(), d.shape[1] = 0;             REFUSE("shape 0", d, SPMD_ERR_SIZE);
    d = good2(), d.shape[0] = -3;            REFUSE("shape -3", d, SPMD_ERR_SIZE);
    d = good2(), d.shape[0] = INT_MIN;       REFUSE("shape INT_MIN", d, SPMD_ERR_SIZE);

    /* too many devices: the header documents the limit (product <= SPMD_MAX_DEVICES,
       2^24 - 2), not which of SIZE and OVERFLOW says so; either is accepted and recorded */
    static const struct { const char *what; int ndim, shape[8]; } big[] = {
        {"2^24 - 1 devices", 1, {16777215}},
        {"(4096,4096) = 2^24 devices", 2, {4096, 4096}},
        {"2^25 over 8 axes", 8, {2, 2, 2, 2, 2, 2, 2, 262144}},
        {"(16777214 / 2 + 1) * 2 over 8 axes", 8, {8388608, 1, 1, 1, 1, 1, 1, 2}},
        {"(16777214,2)", 2, {16777214, 2}},
        {"INT_MAX devices", 1, {INT_MAX}},
        {"(65536,32768): product 2^31", 2, {65536, 32768}},
        {"(641,6700417): product 2^32+1, wraps to 1 in 32 bits", 2, {641, 6700417}},
        {"(65536^4): product 2^64, wraps to 0", 4, {65536, 65536, 65536, 65536}},
        {"(5,1718039348,2147418113): 2^64+4, wraps to 4", 3, {5, 1718039348, 2147418113}},
        {"INT_MAX on 8 axes", 8, {INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX}},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        d = good2();
        d.ndim = big[i].ndim;
        static const char *const nm[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
        for (int k = 0; k < d.ndim; k++) d.shape[k] = big[i].shape[k], d.axis_names[k] = nm[k];
        REFUSE(big[i].what, d, SPMD_ERR_SIZE, SPMD_ERR_OVERFLOW);
        counting c;
        counting_init(&c);
        d.allocator = counting_allocator(&c);
        d.log_fn = NULL, d.log_user = NULL, d.log_level = SPMD_LOG_OFF; /* refuse() hooked its own */
        m = NULL;
        spmd_status s = spmd_mesh_create(&d, &m);
        if (s == SPMD_ERR_SIZE) refusal_size_status[0]++;
        if (s == SPMD_ERR_OVERFLOW) refusal_size_status[1]++;
        if (m) spmd_mesh_destroy(m);
    }
    printf("  too many devices refused with SPMD_ERR_SIZE %d times, SPMD_ERR_OVERFLOW %d times\n",
           refusal_size_status[0], refusal_size_status[1]);

    /* axis names: NULL within ndim may fairly be called INVALID or NULL */
    d = good2(), d.axis_names[1] = NULL;  REFUSE("missing axis name", d, SPMD_ERR_INVALID, SPMD_ERR_NULL);
    d = good2(), d.axis_names[0] = "";    REFUSE("empty axis name", d, SPMD_ERR_INVALID);
    d = good2(), d.axis_names[1] = "row"; REFUSE("duplicate axis name", d, SPMD_ERR_DUP_AXIS);
    d = base_desc(3, (int[]){2, 2, 2}, (const char *[]){"a", "b", "a"});
    REFUSE("duplicate axis name, not adjacent", d, SPMD_ERR_DUP_AXIS);
    d = good2(), d.axis_names[0] = "abcdefghijklmnopqrstuvwxyz012345";
    REFUSE("32-character axis name", d, SPMD_ERR_INVALID);
    static char huge[5000];
    memset(huge, 'a', sizeof huge - 1);
    d = good2(), d.axis_names[0] = huge;  REFUSE("4999-character axis name", d, SPMD_ERR_INVALID);
    static const char *const badchars[] = {"a,b", "*", "row*", "a b", " row", "row ", ",", "\t"};
    for (size_t i = 0; i < sizeof badchars / sizeof badchars[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "axis name \"%s\"", badchars[i]);
        d = good2(), d.axis_names[0] = badchars[i];
        static const spmd_status inv[] = {SPMD_ERR_INVALID};
        refuse(what, &d, inv, 1, NULL);
    }

    /* enums out of range; allocator half set */
    d = good2(), d.backend = SPMD_BACKEND_COUNT;         REFUSE("backend COUNT", d, SPMD_ERR_INVALID);
    d = good2(), d.backend = (spmd_backend)-1;           REFUSE("backend -1", d, SPMD_ERR_INVALID);
    d = good2(), d.check = SPMD_CHECK_COUNT;             REFUSE("check COUNT", d, SPMD_ERR_INVALID);
    d = good2(), d.check = (spmd_check)99;               REFUSE("check 99", d, SPMD_ERR_INVALID);
    d = good2(), d.log_level = SPMD_LOG_LEVEL_COUNT;     REFUSE("log level COUNT", d, SPMD_ERR_INVALID);
    d = good2(), d.log_level = (spmd_log_level)-2;       REFUSE("log level -2", d, SPMD_ERR_INVALID);
    d = good2(), d.timeout_ms = -5;                      REFUSE("timeout -5 ms", d, SPMD_ERR_INVALID);
    d = good2(), d.max_inflight = -1;                    REFUSE("max_inflight -1", d, SPMD_ERR_INVALID);
    {
        /* half an allocator: the hooks are both-or-neither */
        spmd_mesh_desc h = good2();
        h.log_level = SPMD_LOG_OFF;
        h.allocator.alloc = count_alloc;
        m = NULL;
        T_CHECK(spmd_mesh_create(&h, &m) == SPMD_ERR_INVALID && !m, "allocator without free");
        if (m) spmd_mesh_destroy(m);
        h = good2();
        h.log_level = SPMD_LOG_OFF;
        h.allocator.free = count_free;
        m = NULL;
        T_CHECK(spmd_mesh_create(&h, &m) == SPMD_ERR_INVALID && !m, "allocator without alloc");
        if (m) spmd_mesh_destroy(m);
    }

    /* libfabric is not compiled in: UNSUPPORTED, and the log hook hears why */
    {
        static log_rec l;
        d = good2(), d.backend = SPMD_BACKEND_LIBFABRIC;
        static const spmd_status uns[] = {SPMD_ERR_UNSUPPORTED};
        refuse("backend libfabric", &d, uns, 1, &l);
        int k = log_find(&l, "libfabric", 0);
        T_CHECK(k >= 0, "libfabric refusal logged through the hook (%d messages%s%s)", l.n,
                l.n ? ", first: " : "", l.n ? l.rec[0].msg : "");
        if (k >= 0)
            T_CHECK(l.rec[k].device == -1 && l.rec[k].level >= SPMD_LOG_ERROR &&
                        l.rec[k].level <= SPMD_LOG_WARN,
                    "libfabric message: device %d (want -1, the mesh), level %d", l.rec[k].device,
                    (int)l.rec[k].level);
        pthread_mutex_destroy(&l.mu);
    }

    /* the mesh is not half-made after a refusal: a good desc still works */
    d = good2();
    m = NULL;
    T_CHECK(spmd_mesh_create(&d, &m) == SPMD_OK && m, "good desc after refusals");
    if (m) spmd_mesh_destroy(m);
}

/* ======================================================================
   4. bad axes on a device
   ====================================================================== */



static void bad_axes_device(spmd_dev *d, void *arg) {
    dev_fail *f = arg;
    int id = spmd_device_id(d);
    static const struct { const char *axes, *mention; int want; } cases[] = {
        {"rows", "rows", -SPMD_ERR_AXIS},
        {"row,nope", "nope", -SPMD_ERR_AXIS},
        {"ROW", "ROW", -SPMD_ERR_AXIS},
        {"row,row", "row", -SPMD_ERR_DUP_AXIS},
        {"col,row,col", "col", -SPMD_ERR_DUP_AXIS},
    };
    char why[300] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int q = 0; q < 2; q++) {
            int got = q ? spmd_axis_size(d, cases[i].axes) : spmd_axis_index(d, cases[i].axes);
            const char *le = spmd_last_error(d);
            if (got != cases[i].want)
                snprintf(why, sizeof why, "%s(\"%s\") = %d, want %d", q ? "axis_size" : "axis_index",
                         cases[i].axes, got, cases[i].want);
            else if (!le || !strstr(le, cases[i].mention))
                snprintf(why, sizeof why, "last error after \"%s\" does not name it: \"%.200s\"",
                         cases[i].axes, le ? le : "(null)");
        }
        /* a collective with the same bad axes is refused the same way */
        float x = 1, y = 0;
        spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_F32, cases[i].axes, NULL);
        if ((int)s != -cases[i].want)
            snprintf(why, sizeof why, "psum over \"%s\": %s", cases[i].axes, spmd_status_name(s));
    }
    if (spmd_axis_index(d, NULL) >= 0 || spmd_axis_size(d, NULL) >= 0)
        snprintf(why, sizeof why, "NULL axes accepted");
    /* empty names between commas, "*" mixed with names: refused somehow */
    static const char *const malformed[] = {"row,", ",col", "row,,col", "*,row", "row,*"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        if (spmd_axis_index(d, malformed[i]) >= 0 || spmd_axis_size(d, malformed[i]) >= 0)
            snprintf(why, sizeof why, "malformed axes \"%s\" accepted", malformed[i]);
    /* the queries leave the mesh usable; the collectives with axes that name
       no group broke it (the device could not tell its peers), naming the refusal */
    int64_t x = id, y = 0;
    spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_I64, "row,col", NULL);
    if (s != SPMD_ERR_BROKEN || spmd_axis_index(d, "col,row") != (id % 2) * 4 + id / 2)
        snprintf(why, sizeof why, "after the errors: psum %s, want SPMD_ERR_BROKEN", spmd_status_name(s));
    if (*why) dev_fail_note(f, id, "%s", why);
}

static void test_bad_axes(void) {
    spmd_mesh_desc d = good2();
    spmd_mesh *m = NULL;
    if (spmd_mesh_create(&d, &m) != SPMD_OK) {
        T_CHECK(0, "create (4,2)");
        return;
    }
    dev_fail r = {0, ""};
    spmd_status s = spmd_run(m, bad_axes_device, &r);
    /* the run reports the first failing call; the deliberate ones qualify */
    T_CHECK(r.bad == 0, "bad axes: %ld devices wrong; first %s", r.bad, r.first);
    T_CHECK(s == SPMD_ERR_AXIS || s == SPMD_ERR_DUP_AXIS || s == SPMD_ERR_NULL || s == SPMD_OK,
            "run with deliberate bad axes returned %s", spmd_status_name(s));
    T_CHECK(spmd_mesh_status(m) == SPMD_ERR_AXIS && strstr(spmd_mesh_error(m), "refused a call without a group"),
            "a collective over axes that name no group breaks the mesh, naming the refusal: %s: %s",
            spmd_status_name(spmd_mesh_status(m)), spmd_mesh_error(m));
    T_CHECK(spmd_run(NULL, bad_axes_device, &r) == SPMD_ERR_NULL, "spmd_run NULL mesh");
    T_CHECK(spmd_run(m, NULL, &r) == SPMD_ERR_NULL, "spmd_run NULL fn");
    spmd_mesh_destroy(m);
}

/* ======================================================================
   5. big meshes: 256 devices; 64 devices x many psums on 2 cores
   ====================================================================== */

typedef struct { int iters; dev_fail fail; } loop_arg;

static void big_device(spmd_dev *d, void *arg) {
    loop_arg *a = arg;
    int id = spmd_device_id(d), r = id / 16, c = id % 16;
    int64_t x = id, all = -1, rows = -1, cols = -1;
    spmd_status s1 = spmd_psum(d, &x, &all, 1, SPMD_I64, "row,col", NULL);
    spmd_status s2 = spmd_barrier(d, "*", NULL);
    spmd_status s3 = spmd_psum(d, &x, &rows, 1, SPMD_I64, "row", NULL);  /* same col */
    spmd_status s4 = spmd_psum(d, &x, &cols, 1, SPMD_I64, "col", NULL);  /* same row */
    if (s1 || s2 || s3 || s4 || all != 255 * 256 / 2 || rows != 16 * c + 16 * 120 ||
        cols != 256 * r + 120)
        dev_fail_note(&a->fail, id, "%s %s %s %s, %lld %lld %lld", spmd_status_name(s1),
                      spmd_status_name(s2), spmd_status_name(s3), spmd_status_name(s4),
                      (long long)all, (long long)rows, (long long)cols);
}

static void test_256(void) {
    spmd_mesh_desc d = base_desc(2, (int[]){16, 16}, (const char *[]){"row", "col"});
    d.thread_stack_size = 256 * 1024;
    spmd_mesh *m = NULL;
    spmd_status s = spmd_mesh_create(&d, &m);
    T_CHECK(s == SPMD_OK && m && spmd_mesh_size(m) == 256, "create 256 devices: %s",
            spmd_status_name(s));
    if (!m) return;
    double t0 = now_s();
    static loop_arg a;
    s = spmd_run(m, big_device, &a);
    T_CHECK(s == SPMD_OK && a.fail.bad == 0, "256 devices: psum + barrier: %s, %ld wrong; first %s",
            spmd_status_name(s), a.fail.bad, a.fail.first);
    printf("  256 devices: spmd_run with 3 psums and a barrier took %.3f s\n", now_s() - t0);
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy 256");
}

static void loop_device(spmd_dev *d, void *arg) {
    loop_arg *a = arg;
    int id = spmd_device_id(d), n = spmd_axis_size(d, "i");
    for (int it = 0; it < a->iters; it++) {
        int64_t x = id + it, y = -1, want = (int64_t)n * (n - 1) / 2 + (int64_t)n * it;
        spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_I64, "i", NULL);
        if (s != SPMD_OK || y != want) {
            dev_fail_note(&a->fail, id, "psum %d: %s, %lld, want %lld", it, spmd_status_name(s),
                          (long long)y, (long long)want);
            break;
        }
    }
}

static void test_64_loop(void) {
    spmd_mesh_desc d = base_desc(1, (int[]){64}, (const char *[]){"i"});
    spmd_mesh *m = NULL;
    if (spmd_mesh_create(&d, &m) != SPMD_OK) {
        T_CHECK(0, "create 64");
        return;
    }
    static loop_arg a;
    a.iters = quick ? 50 : 200; /* (sanitizers: 19 ms a psum under ThreadSanitizer) */
    double t0 = now_s();
    spmd_status s = spmd_run(m, loop_device, &a);
    double t = now_s() - t0;
    T_CHECK(s == SPMD_OK && a.fail.bad == 0, "64 devices x %d psums: %s, %ld devices wrong; first %s",
            a.iters, spmd_status_name(s), a.fail.bad, a.fail.first);
    printf("  64 devices x %d back-to-back psums: %.3f s (%.1f us per psum)\n", a.iters, t,
           t * 1e6 / a.iters);
    spmd_mesh_destroy(m);
}

/* ======================================================================
   6. spmd_attach from the program's own threads
   ====================================================================== */

typedef struct {
    spmd_mesh *m;
    int k;
    spmd_status attach, psum, detach;
    int id;
    float sum;
} attach_arg;

static void *attach_thread(void *p) {
    attach_arg *a = p;
    spmd_dev *d = NULL;
    a->attach = spmd_attach(a->m, a->k, &d);
    if (a->attach != SPMD_OK) return NULL;
    a->id = spmd_device_id(d);
    float x = (float)(a->k + 1);
    a->psum = spmd_psum(d, &x, &a->sum, 1, SPMD_F32, "i", NULL);
    a->detach = spmd_detach(d);
    return NULL;
}

typedef struct { spmd_mesh *m; int device; spmd_status got; } try_attach_arg;

static void *try_attach_thread(void *p) {
    try_attach_arg *a = p;
    spmd_dev *d = NULL;
    a->got = spmd_attach(a->m, a->device, &d);
    if (a->got == SPMD_OK) spmd_detach(d);
    return NULL;
}

static void noop_device(spmd_dev *d, void *arg) { (void)d, (void)arg; }

/* device 0 stays inside spmd_run until the main thread releases it */
typedef struct { spmd_mesh *m; int entered, release; spmd_status run; } hold_arg;

static void hold_device(spmd_dev *d, void *arg) {
    hold_arg *h = arg;
    if (spmd_device_id(d) != 0) return;
    __atomic_store_n(&h->entered, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&h->release, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static void *hold_thread(void *p) {
    hold_arg *h = p;
    h->run = spmd_run(h->m, hold_device, h);
    return NULL;
}

/* Another thread attaching a device while spmd_run starts: modelled without
   timing luck by attaching from inside the allocator hook, which spmd_run
   calls after its own checks and before its threads attach. spmd_run may
   refuse, but must not report success with fn skipped on a device. */
typedef struct { counting c; spmd_mesh *m; int armed; spmd_dev *stolen; spmd_status got; } steal_ctx;

static void *steal_alloc(size_t size, size_t align, void *user) {
    steal_ctx *sc = user;
    if (sc->armed) {
        sc->armed = 0;
        sc->got = spmd_attach(sc->m, 0, &sc->stolen);
    }
    return count_alloc(size, align, &sc->c);
}

static void steal_free(void *ptr, void *user) { count_free(ptr, &((steal_ctx *)user)->c); }

static void count_device(spmd_dev *d, void *arg) {
    (void)d;
    __atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

static void test_attach_racing_run(void) {
    static steal_ctx sc;
    counting_init(&sc.c);
    spmd_mesh_desc desc = base_desc(1, (int[]){4}, (const char *[]){"i"});
    desc.log_level = SPMD_LOG_OFF;
    desc.allocator.alloc = steal_alloc, desc.allocator.free = steal_free, desc.allocator.user = &sc;
    if (spmd_mesh_create(&desc, &sc.m) != SPMD_OK) {
        T_CHECK(0, "create 4");
        return;
    }
    int ran = 0;
    sc.armed = 1;
    sc.stolen = NULL;
    spmd_status s = spmd_run(sc.m, count_device, &ran);
    if (sc.stolen) spmd_detach(sc.stolen);
    T_CHECK(s != SPMD_OK || ran == 4,
            "device 0 attached elsewhere as spmd_run starts (attach %s): run %s with fn on %d of 4 "
            "devices", spmd_status_name(sc.got), spmd_status_name(s), ran);
    T_CHECK(spmd_mesh_destroy(sc.m) == SPMD_OK && sc.c.live == 0, "destroy, nothing leaked");
}

static void test_busy_during_run(void) {
    spmd_mesh_desc desc = base_desc(1, (int[]){3}, (const char *[]){"i"});
    desc.log_level = SPMD_LOG_OFF;
    hold_arg h = {NULL, 0, 0, SPMD_OK};
    if (spmd_mesh_create(&desc, &h.m) != SPMD_OK) {
        T_CHECK(0, "create 3");
        return;
    }
    pthread_t th;
    pthread_create(&th, NULL, hold_thread, &h);
    while (!__atomic_load_n(&h.entered, __ATOMIC_ACQUIRE)) nanosleep(&(struct timespec){0, 1000000}, NULL);
    spmd_dev *d = NULL;
    spmd_status sa = spmd_attach(h.m, 0, &d);
    spmd_status sd = spmd_mesh_destroy(h.m);
    spmd_status sr = spmd_run(h.m, noop_device, NULL);
    __atomic_store_n(&h.release, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    if (sa == SPMD_OK) spmd_detach(d);
    T_CHECK(sa == SPMD_ERR_BUSY, "attach a device that spmd_run holds: %s", spmd_status_name(sa));
    T_CHECK(sd == SPMD_ERR_BUSY, "destroy during spmd_run: %s", spmd_status_name(sd));
    T_CHECK(sr == SPMD_ERR_BUSY, "second spmd_run during spmd_run: %s", spmd_status_name(sr));
    T_CHECK(h.run == SPMD_OK, "the held run finishes: %s", spmd_status_name(h.run));
    T_CHECK(spmd_mesh_destroy(h.m) == SPMD_OK, "destroy after the run");
}

static void test_attach(void) {
    static log_rec l;
    log_init(&l);
    spmd_mesh_desc desc = base_desc(1, (int[]){4}, (const char *[]){"i"});
    desc.log_fn = log_hook, desc.log_user = &l;
    spmd_mesh *m = NULL;
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) {
        T_CHECK(0, "create 4");
        return;
    }
    for (int round = 0; round < 3; round++) { /* attach, detach, attach again */
        attach_arg a[4];
        pthread_t th[4];
        for (int k = 0; k < 4; k++) {
            memset(&a[k], 0, sizeof a[k]);
            a[k].m = m, a[k].k = k, a[k].id = -1;
            pthread_create(&th[k], NULL, attach_thread, &a[k]);
        }
        int ok = 1;
        for (int k = 0; k < 4; k++) {
            pthread_join(th[k], NULL);
            if (a[k].attach || a[k].psum || a[k].detach || a[k].id != k || a[k].sum != 10.0f) {
                ok = 0;
                fprintf(stderr, "  thread %d: attach %s psum %s detach %s id %d sum %g\n", k,
                        spmd_status_name(a[k].attach), spmd_status_name(a[k].psum),
                        spmd_status_name(a[k].detach), a[k].id, (double)a[k].sum);
            }
        }
        T_CHECK(ok, "round %d: 4 pthreads attach, psum, detach", round);
    }

    spmd_dev *d0 = NULL, *dx = NULL;
    T_CHECK(spmd_attach(m, 0, &d0) == SPMD_OK && d0 && spmd_device_id(d0) == 0, "attach 0");
    T_CHECK(spmd_attach(m, 0, &dx) == SPMD_ERR_BUSY, "same thread attaches device 0 again");
    try_attach_arg t = {m, 0, SPMD_OK};
    pthread_t th;
    pthread_create(&th, NULL, try_attach_thread, &t);
    pthread_join(th, NULL);
    T_CHECK(t.got == SPMD_ERR_BUSY, "another thread attaches device 0: %s", spmd_status_name(t.got));
    T_CHECK(spmd_attach(m, 4, &dx) == SPMD_ERR_INVALID, "attach device 4 of 4");
    T_CHECK(spmd_attach(m, -1, &dx) == SPMD_ERR_INVALID, "attach device -1");
    T_CHECK(spmd_attach(m, INT_MAX, &dx) == SPMD_ERR_INVALID, "attach device INT_MAX");
    T_CHECK(spmd_attach(m, 1, NULL) == SPMD_ERR_NULL, "attach NULL out");
    T_CHECK(spmd_attach(NULL, 1, &dx) == SPMD_ERR_NULL, "attach NULL mesh");
    T_CHECK(spmd_detach(NULL) == SPMD_ERR_NULL, "detach NULL");
    spmd_status s = spmd_run(m, noop_device, NULL);
    T_CHECK(s == SPMD_ERR_BUSY, "spmd_run while device 0 is attached: %s", spmd_status_name(s));
    T_CHECK(spmd_mesh_destroy(m) == SPMD_ERR_BUSY, "destroy while attached");
    T_CHECK(log_find(&l, "attached", 0) >= 0, "the refused destroy is logged (%d messages)", l.n);
    T_CHECK(spmd_mesh_size(m) == 4, "mesh intact after refused destroy");
    /* device 1 is free: another thread may take it while 0 is held */
    try_attach_arg t1 = {m, 1, SPMD_OK};
    pthread_create(&th, NULL, try_attach_thread, &t1);
    pthread_join(th, NULL);
    T_CHECK(t1.got == SPMD_OK, "another device attaches while 0 is held: %s",
            spmd_status_name(t1.got));
    T_CHECK(spmd_detach(d0) == SPMD_OK, "detach 0");
    T_CHECK(spmd_attach(m, 0, &d0) == SPMD_OK, "re-attach 0 after detach");
    T_CHECK(spmd_detach(d0) == SPMD_OK, "detach 0 again");
    T_CHECK(spmd_run(m, noop_device, NULL) == SPMD_OK, "spmd_run after every detach");
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy after detach");
    pthread_mutex_destroy(&l.mu);
    spmd_status sn = spmd_mesh_destroy(NULL);
    T_CHECK(sn == SPMD_OK || sn == SPMD_ERR_NULL, "destroy NULL: %s", spmd_status_name(sn));
}

/* ======================================================================
   7. independent meshes used at the same time
   ====================================================================== */

typedef struct { spmd_mesh *m; int iters; long wrong; spmd_status run; int64_t offset; } pair_arg;

static void pair_device(spmd_dev *d, void *arg) {
    pair_arg *a = arg;
    int n = spmd_axis_size(d, "i"), idx = spmd_axis_index(d, "i");
    int64_t want_base = (int64_t)n * (n - 1) / 2;
    long wrong = 0;
    for (int it = 0; it < a->iters; it++) {
        int64_t x = idx + a->offset + it, y = 0;
        if (spmd_psum(d, &x, &y, 1, SPMD_I64, "i", NULL) != SPMD_OK) {
            wrong++;
            break;
        }
        if (y != want_base + n * (a->offset + it)) wrong++;
    }
    if (wrong) __atomic_fetch_add(&a->wrong, wrong, __ATOMIC_RELAXED);
}

static void *run_thread(void *p) {
    pair_arg *a = p;
    a->run = spmd_run(a->m, pair_device, a);
    return NULL;
}

typedef struct { long failures; } churn_arg;

static void *churn_thread(void *p) {
    churn_arg *a = p;
    for (int k = 0; k < 40; k++) {
        spmd_mesh_desc d = base_desc(2, (int[]){1 + k % 5, 2}, (const char *[]){"i", "j"});
        spmd_mesh *m = NULL;
        if (spmd_mesh_create(&d, &m) != SPMD_OK || spmd_mesh_size(m) != 2 * (1 + k % 5) ||
            spmd_mesh_destroy(m) != SPMD_OK)
            a->failures++;
    }
    return NULL;
}

static void test_two_meshes(void) {
    /* both meshes have an axis called "i"; the names must not leak across */
    spmd_mesh_desc da = base_desc(1, (int[]){4}, (const char *[]){"i"});
    spmd_mesh_desc db = base_desc(2, (int[]){3, 2}, (const char *[]){"j", "i"});
    pair_arg a = {NULL, 400, 0, SPMD_OK, 0};
    pair_arg b = {NULL, 400, 0, SPMD_OK, 1000000};
    if (spmd_mesh_create(&da, &a.m) != SPMD_OK || spmd_mesh_create(&db, &b.m) != SPMD_OK) {
        T_CHECK(0, "create two meshes");
        return;
    }
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_thread, &a);
    pthread_create(&tb, NULL, run_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    T_CHECK(a.run == SPMD_OK && a.wrong == 0, "mesh A concurrently: %s, %ld wrong",
            spmd_status_name(a.run), a.wrong);
    T_CHECK(b.run == SPMD_OK && b.wrong == 0, "mesh B concurrently: %s, %ld wrong",
            spmd_status_name(b.run), b.wrong);
    spmd_mesh_destroy(a.m);
    spmd_mesh_destroy(b.m);

    /* meshes created and destroyed from several threads at once */
    churn_arg c[4] = {{0}};
    pthread_t th[4];
    for (int k = 0; k < 4; k++) pthread_create(&th[k], NULL, churn_thread, &c[k]);
    long fails = 0;
    for (int k = 0; k < 4; k++) pthread_join(th[k], NULL), fails += c[k].failures;
    T_CHECK(fails == 0, "4 threads creating and destroying meshes: %ld failures", fails);
}

/* ======================================================================
   8. allocator hooks
   ====================================================================== */

static void alloc_device(spmd_dev *d, void *arg) {
    long *bad = arg;
    float v[1000];
    for (int k = 0; k < 1000; k++) v[k] = (float)spmd_device_id(d);
    spmd_req *r = NULL;
    spmd_status s1 = spmd_psum(d, v, v, 1000, SPMD_F32, "row,col", NULL);
    spmd_status s2 = spmd_psum_start(d, v, v, 1000, SPMD_F32, "col", NULL, &r);
    spmd_status s3 = s2 == SPMD_OK ? spmd_wait(r) : s2;
    spmd_status s4 = spmd_barrier(d, "row", NULL);
    if (s1 || s2 || s3 || s4 || v[999] != 28.0f * 2) __atomic_fetch_add(bad, 1, __ATOMIC_RELAXED);
}

static void test_allocator(void) {
    counting c;
    counting_init(&c);
    spmd_mesh_desc d = good2();
    d.allocator = counting_allocator(&c);
    spmd_mesh *m = NULL;
    T_CHECK(spmd_mesh_create(&d, &m) == SPMD_OK, "create with allocator");
    if (!m) return;
    long at_create = c.allocs;
    long bad = 0;
    T_CHECK(spmd_run(m, alloc_device, &bad) == SPMD_OK && bad == 0, "run with allocator");
    spmd_dev *dev;
    if (spmd_attach(m, 3, &dev) == SPMD_OK) spmd_detach(dev);
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
    T_CHECK(at_create > 0, "the mesh allocates through the hook (%ld at create)", at_create);
    T_CHECK(c.live == 0 && c.allocs == c.frees, "all freed after destroy: %ld allocs, %ld frees",
            c.allocs, c.frees);
    T_CHECK(c.bad_align == 0 && c.bad_free == 0, "alignments valid (%ld bad), frees ours (%ld bad)",
            c.bad_align, c.bad_free);
    printf("  allocator: %ld allocations at create, %ld in all, %ld NULL frees\n", at_create,
           c.allocs, c.null_frees);

    /* fail each allocation of create in turn: NOMEM, nothing leaked */
    long nomem = 0, leaks = 0, other = 0;
    for (long k = 0; k < at_create; k++) {
        counting f;
        counting_init(&f);
        f.fail_at = k;
        d.allocator = counting_allocator(&f);
        m = NULL;
        spmd_status s = spmd_mesh_create(&d, &m);
        if (s == SPMD_OK) {
            other++; /* create did not notice a failed allocation */
            spmd_mesh_destroy(m);
        } else if (s == SPMD_ERR_NOMEM) {
            nomem++;
            if (m) other++;
        } else {
            other++;
        }
        if (f.live != 0 || f.bad_free) leaks++;
    }
    T_CHECK(nomem == at_create && other == 0 && leaks == 0,
            "failing allocation k of %ld: %ld NOMEM, %ld wrong outcomes, %ld leaks", at_create,
            nomem, other, leaks);
}

/* ======================================================================
   9. log hook
   ====================================================================== */

static void log_device(spmd_dev *d, void *arg) {
    (void)arg;
    if (spmd_device_id(d) == 2) /* (a query: a collective over it would break the mesh, logged by all) */
        (void)spmd_axis_index(d, "bogus_axis");
    spmd_barrier(d, "i", NULL);
}

static void test_log(void) {
    static log_rec l;
    log_init(&l);
    spmd_mesh_desc d = base_desc(1, (int[]){4}, (const char *[]){"i"});
    d.log_fn = log_hook;
    d.log_user = &l;
    d.log_level = SPMD_LOG_DEBUG;
    spmd_mesh *m = NULL;
    if (spmd_mesh_create(&d, &m) != SPMD_OK) {
        T_CHECK(0, "create with log hook");
        return;
    }
    spmd_run(m, log_device, NULL);
    spmd_mesh_destroy(m);
    int in_range = 1, about = 0, about_right = 1;
    for (int k = 0; k < l.n; k++) {
        if (l.rec[k].device < -1 || l.rec[k].device >= 4 || l.rec[k].level < SPMD_LOG_ERROR ||
            l.rec[k].level > SPMD_LOG_DEBUG)
            in_range = 0;
        if (strstr(l.rec[k].msg, "bogus_axis")) {
            about++;
            if (l.rec[k].device != 2) about_right = 0;
        }
    }
    T_CHECK(in_range, "log records have devices in -1..3 and valid levels");
    T_CHECK(about > 0 && about_right,
            "the error of device 2 is logged with device 2 (%d messages about it, %d in all)",
            about, l.n);

    /* log level OFF: the hook hears nothing, errors included */
    pthread_mutex_destroy(&l.mu);
    log_init(&l);
    d.log_level = SPMD_LOG_OFF;
    m = NULL;
    if (spmd_mesh_create(&d, &m) == SPMD_OK) {
        spmd_run(m, log_device, NULL);
        spmd_mesh_destroy(m);
    }
    T_CHECK(l.n == 0, "log level off: %d messages (first: %s)", l.n, l.n ? l.rec[0].msg : "");
    pthread_mutex_destroy(&l.mu);
}

/* with no hook, messages go to stderr prefixed "[spmd <device>/<devices>]" */
static void test_log_stderr(void) {
    spmd_mesh_desc d = base_desc(1, (int[]){4}, (const char *[]){"i"});
    d.log_level = SPMD_LOG_DEBUG;
    spmd_mesh *m = NULL;
    FILE *tmp = tmpfile();
    if (!tmp) {
        T_SKIP("no tmpfile");
        return;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    spmd_status s = spmd_mesh_create(&d, &m);
    if (s == SPMD_OK) spmd_run(m, log_device, NULL), spmd_mesh_destroy(m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    T_CHECK(s == SPMD_OK, "create: %s", spmd_status_name(s));
    char line[1024];
    int found = 0, wrong = 0;
    rewind(tmp);
    while (fgets(line, sizeof line, tmp))
        if (strstr(line, "bogus_axis")) {
            if (!strncmp(line, "[spmd 2/4]", 10)) found++;
            else wrong++, fprintf(stderr, "  stderr line: %s", line);
        }
    fclose(tmp);
    T_CHECK(found > 0 && wrong == 0, "stderr log of device 2's error: %d lines \"[spmd 2/4] ...\", %d "
            "other", found, wrong);
}

/* ======================================================================
   10. stack size and repeated runs on one mesh
   ====================================================================== */

static void reuse_device(spmd_dev *d, void *arg) {
    dev_fail *f = arg;
    volatile char big[200 * 1024]; /* needs a stack bigger than 128 KiB */
    for (size_t k = 0; k < sizeof big; k += 4096) big[k] = (char)spmd_device_id(d);
    int32_t x = big[0], y = 0;
    size_t stack = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstacksize(&attr, &stack);
        pthread_attr_destroy(&attr);
    }
    spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_I32, "i", NULL);
    if (s != SPMD_OK || y != 0 + 1 + 2 || stack < (1u << 20) || stack > (3u << 19))
        dev_fail_note(f, spmd_device_id(d), "psum %s %d, stack %zu bytes (asked for 1 MiB)",
                      spmd_status_name(s), (int)y, stack);
}

static void test_reuse(void) {
    spmd_mesh_desc d = base_desc(1, (int[]){3}, (const char *[]){"i"});
    d.thread_stack_size = 1 << 20;
    spmd_mesh *m = NULL;
    if (spmd_mesh_create(&d, &m) != SPMD_OK) {
        T_CHECK(0, "create with stack size");
        return;
    }
    dev_fail f = {0, ""};
    int fails = 0;
    for (int r = 0; r < 20; r++) fails += spmd_run(m, reuse_device, &f) != SPMD_OK;
    T_CHECK(fails == 0 && f.bad == 0, "20 runs on one mesh with a 1 MiB stack: %d failed runs, "
            "%ld wrong; first %s", fails, f.bad, f.first);
    spmd_mesh_destroy(m);
}

/* spmd_mesh_counters on the threads backend: nothing leaves the process,
   so every count is zero after calls; NULL arguments are refused; the
   kinds are named (spmd_count_kind_name), invalid ones "invalid". The
   counts across processes: test_fabric's mode "counters". */
static void test_counters(void) {
    spmd_mesh_desc d = base_desc(1, (int[]){3}, (const char *[]){"i"});
    spmd_mesh *m = NULL;
    spmd_counters c;
    dev_fail f = {0, ""};
    int zero = 1;
    if (spmd_mesh_create(&d, &m) != SPMD_OK) {
        T_CHECK(0, "counters: create");
        return;
    }
    memset(&c, 0xff, sizeof c);
    T_CHECK(spmd_run(m, reuse_device, &f) == SPMD_OK && spmd_mesh_counters(m, &c) == SPMD_OK,
            "counters: a run, then spmd_mesh_counters");
    zero = c.total.messages == 0 && c.total.bytes == 0 && c.total.peers == 0;
    for (int l = 0; l < SPMD_LINK_COUNT; l++) zero &= !c.link[l].messages && !c.link[l].bytes && !c.link[l].peers;
    for (int k = 0; k < SPMD_COUNT_KINDS; k++) zero &= !c.kind[k].messages && !c.kind[k].bytes && !c.kind[k].peers;
    T_CHECK(zero, "counters: all zero on the threads backend");
    T_CHECK(spmd_mesh_counters(NULL, &c) == SPMD_ERR_NULL && spmd_mesh_counters(m, NULL) == SPMD_ERR_NULL &&
                spmd_mesh_counters_reset(NULL) == SPMD_ERR_NULL && spmd_mesh_counters_reset(m) == SPMD_OK,
            "counters: NULL refused, reset");
    T_CHECK(!strcmp(spmd_count_kind_name(1), "allreduce") && !strcmp(spmd_count_kind_name(6), "all_gather") &&
                !strcmp(spmd_count_kind_name(13), "send") && !strcmp(spmd_count_kind_name(-1), "invalid") &&
                !strcmp(spmd_count_kind_name(SPMD_COUNT_KINDS), "invalid"),
            "spmd_count_kind_name of kinds, and of invalid ones");
    spmd_mesh_destroy(m);
}

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif
int main(void) {
    const char *q = getenv("SPMD_TEST_QUICK");
    quick = q && *q && strcmp(q, "0");
    double t0 = now_s();
    test_tables();
    test_valid_meshes();
    test_desc_fields();
    test_refusals();
    test_bad_axes();
    test_attach();
    test_busy_during_run();
    test_attach_racing_run();
    test_two_meshes();
    test_allocator();
    test_log();
    test_log_stderr();
    test_reuse();
    test_counters();
    if (!UNDER_TSAN) { /* (threads at scale: plain and ASan; under TSan 7.5 s of its 30) */
        test_64_loop();
        test_256();
    }
    printf("  test_mesh took %.2f s%s\n", now_s() - t0, quick ? " (quick)" : "");
    return t_summary();
}
