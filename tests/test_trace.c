/* test_trace.c - saying why a run went wrong: the flight recorder's records
   of a known call sequence (through spmd_report), the report of a deliberate
   timeout, report truncation, the SPMD_TRACE timeline (parsed here) and its
   unwritable-path warning, the recorder turned off, the report logged on
   SPMD_REPORT_SIGNAL. (The fault plan, SPMD_FAULTS, with what the recorder
   and the report say of a skipped call: tests/test_faults.c.) */
#define _GNU_SOURCE 1 /* setenv */
#ifndef SPMD_TEST_LINKED_IMPL /* make links tests/impl.c's object instead */
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "testlib.h"
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static spmd_scheduler sched23; /* 0: the default (fibers when devices outnumber CPUs) */
/* A mesh (rows, 3) named ("x", "y"), its log kept (log_keep). */
static void desc_rows3(spmd_mesh_desc *desc, int rows) {
    static const char *names[2] = {"x", "y"};
    memset(desc, 0, sizeof *desc);
    desc->ndim = 2;
    desc->shape[0] = rows;
    desc->shape[1] = 3;
    desc->axis_names[0] = names[0];
    desc->axis_names[1] = names[1];
    desc->log_level = SPMD_LOG_WARN;
    desc->log_fn = log_keep;
}
static spmd_mesh *mesh23(int64_t timeout_ms, int trace_depth) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    desc_rows3(&desc, 2);
    desc.timeout_ms = timeout_ms;
    desc.trace_depth = trace_depth;
    desc.scheduler = sched23;
    T_CHECK(spmd_mesh_create(&desc, &m) == SPMD_OK, "mesh_create 2x3");
    return m;
}

/* ---- the known sequence ------------------------------------------------- */
#define NCALLS 7
static int site_line; /* the line of the SPMD_AT call */

static void known_calls(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d), i = id % 3;
    float f[2] = {1, 2}, fo[2];
    int32_t b[3] = {id, id, id}, b2[3];
    double x = id, xo;
    int32_t s = id, r = -1;
    (void)arg;
    T_CHECK(spmd_psum(d, f, fo, 2, SPMD_F32, "y", NULL) == SPMD_OK, "psum");
    T_CHECK(spmd_bcast(d, b, b2, 3, SPMD_I32, 1, "x", NULL) == SPMD_OK, "bcast");
    T_CHECK(spmd_pmax(d, &x, &xo, 1, SPMD_F64, "x,y", NULL) == SPMD_OK, "pmax");
    T_CHECK(spmd_barrier(d, "y", NULL) == SPMD_OK, "barrier");
    T_CHECK(spmd_sendrecv(d, &s, 1, (i + 1) % 3, 7, &r, 1, (i + 2) % 3, 7, SPMD_I32, "y", NULL, NULL) == SPMD_OK,
            "sendrecv");
    if (id == 0) site_line = __LINE__ + 1;
    T_CHECK(SPMD_AT(d, spmd_psum(d, f, fo, 1, SPMD_C64, "y", NULL)) == SPMD_OK, "psum of a complex64 at a site");
}

/* The records device id must show, written plainly: one line per call,
   each the text up to the state. */
static void expected_lines(int id, char lines[NCALLS][160]) {
    int row = id / 3, col = id % 3;
    char gy[64], gx[64];
    snprintf(gy, sizeof gy, "[%d %d %d], index %d", 3 * row, 3 * row + 1, 3 * row + 2, col);
    snprintf(gx, sizeof gx, "[%d %d], index %d", col, col + 3, row);
    snprintf(lines[0], 160, "#0 psum(f32 x 2, eager) over 'y' (op #0 of group %s): done", gy);
    snprintf(lines[1], 160, "#1 broadcast(i32 x 3, eager) root 1 over 'x' (op #0 of group %s): done", gx);
    snprintf(lines[2], 160, "#2 pmax(f64 x 1, eager) over 'x,y' (op #0 of group [0 1 2 3 4 5], index %d): done", id);
    snprintf(lines[3], 160, "#3 barrier over 'y' (op #1 of group %s): done", gy);
    snprintf(lines[4], 160, "#4 send(i32 x 1) to %d over 'y' (group %s): done", (col + 1) % 3, gy);
    snprintf(lines[5], 160, "#5 recv(i32 x 1) from %d over 'y' (group %s): done", (col + 2) % 3, gy);
    snprintf(lines[6], 160, "#6 psum(c64 x 1, eager) over 'y' (op #2 of group %s): done", gy);
}

static void test_records(void) {
    spmd_mesh *m = mesh23(20000, 0);
    char rep[16384];
    if (!m) return;
    T_CHECK(spmd_run(m, known_calls, NULL) == SPMD_OK, "run");
    for (int id = 0; id < 6; id++) {
        char want[NCALLS][160];
        size_t n = spmd_report(m, id, rep, sizeof rep);
        const char *at;
        int k;
        T_CHECK(n < sizeof rep, "report of device %d fits (%zu)", id, n);
        expected_lines(id, want);
        at = strstr(rep, "last calls:\n");
        T_CHECK(at != NULL, "device %d: a list of last calls in\n%s", id, rep);
        if (!at) continue;
        at += strlen("last calls:\n");
        for (k = 0; k < NCALLS && at; k++) {
            const char *nl = strchr(at, '\n');
            T_CHECK(strncmp(at, "  ", 2) == 0 && strncmp(at + 2, want[k], strlen(want[k])) == 0,
                    "device %d call %d: want '%s' in\n%.*s", id, k, want[k], nl ? (int)(nl - at) : 80, at);
            if (k == NCALLS - 1 && id == 0) {
                char site[64];
                snprintf(site, sizeof site, "test_trace.c:%d\n", site_line);
                T_CHECK(nl && strstr(at, site) == nl - strlen(site) + 1, "the call site %s in %.*s", site,
                        nl ? (int)(nl - at) : 80, at);
            }
            at = nl ? nl + 1 : NULL;
        }
        T_CHECK(at && *at == '\0', "device %d: nothing after the %d calls: '%s'", id, NCALLS, at ? at : "");
        T_CHECK(strstr(rep, "returned from its function (detached) after 7 calls") != NULL,
                "device %d returned: %s", id, rep);
    }
    /* truncation: the needed length, a NUL-terminated prefix */
    {
        size_t full = spmd_report(m, -1, rep, sizeof rep), n0 = spmd_report(m, -1, NULL, 0);
        char small[17];
        size_t ns = spmd_report(m, -1, small, sizeof small);
        T_CHECK(full > 100 && full < sizeof rep && strlen(rep) == full, "whole report: %zu, strlen %zu", full,
                strlen(rep));
        T_CHECK(n0 == full && ns == full, "needed length %zu / %zu, want %zu", n0, ns, full);
        T_CHECK(strlen(small) == 16 && strncmp(small, rep, 16) == 0, "cut to '%s'", small);
        T_CHECK(spmd_report(m, 6, NULL, 0) > 0 && spmd_report(NULL, -1, small, sizeof small) == 0 && small[0] == 0,
                "bad arguments");
    }
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
}

/* ---- records of a ring that wrapped, in both layouts ------------------- */
/* From 256 devices in a process their records of one call sit side by
   side (spmd__rec_at), below each device's ring is a run of its own: on
   meshes (R, 3) of 6 and 300 devices, 4 records a device, 6 psums over
   'y' of 1..6 floats; every device's report must list exactly the last
   four, numbered, with their sizes and groups. */
#define WRAP_CALLS 6
static void wrap_calls(spmd_dev *d, void *arg) {
    float f[WRAP_CALLS] = {0}, fo[WRAP_CALLS];
    int k;
    (void)arg;
    for (k = 0; k < WRAP_CALLS; k++)
        T_CHECK(spmd_psum(d, f, fo, (size_t)k + 1, SPMD_F32, "y", NULL) == SPMD_OK, "psum %d", k);
}
static void test_records_wrap(void) {
    static const int rows[2] = {2, 100};
    static char rep[16384];
    for (int ri = 0; ri < 2; ri++) {
        spmd_mesh_desc desc;
        spmd_mesh *m = NULL;
        int bad = 0, n = rows[ri] * 3;
        desc_rows3(&desc, rows[ri]);
        desc.trace_depth = 4;
        if (spmd_mesh_create(&desc, &m) != SPMD_OK) { T_CHECK(0, "mesh_create %dx3", rows[ri]); continue; }
        T_CHECK(spmd_run(m, wrap_calls, NULL) == SPMD_OK, "run %dx3", rows[ri]);
        for (int id = 0; id < n && bad < 3; id++) {
            const char *at;
            spmd_report(m, id, rep, sizeof rep);
            at = strstr(rep, "last calls:\n");
            if (!at) { T_CHECK(0, "%d devices, device %d: no list of last calls in\n%s", n, id, rep); bad++; continue; }
            at += strlen("last calls:\n");
            for (int k = WRAP_CALLS - 4; k < WRAP_CALLS && at; k++) {
                char want[160];
                const char *nl = strchr(at, '\n');
                int row = id / 3, ok;
                snprintf(want, sizeof want, "  #%d psum(f32 x %d, eager) over 'y' (op #%d of group [%d %d %d], index %d): done",
                         k, k + 1, k, 3 * row, 3 * row + 1, 3 * row + 2, id % 3);
                ok = strncmp(at, want, strlen(want)) == 0;
                bad += !ok;
                if (!ok) T_CHECK(0, "%d devices, device %d call %d: want '%s' in\n%.*s", n, id, k, want, nl ? (int)(nl - at) : 80, at);
                at = nl ? nl + 1 : NULL;
            }
            if (!at || *at != '\0') { T_CHECK(0, "%d devices, device %d: more than 4 calls: '%s'", n, id, at ? at : ""); bad++; }
        }
        T_CHECK(bad == 0, "%d devices, 4 records each: every device's report lists its last 4 calls", n);
        T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
    }
}

/* The recorder's memory is two blocks a mesh (the records, their call
   sites), whatever the number of devices: counted through the mesh's
   allocator, a mesh of 6 or 300 devices makes exactly 2 more allocations
   at creation with the recorder on than off, of 64 records of 64 + 8
   bytes a device in all (they were 2 a device). */
typedef struct { long n; size_t bytes; } count_alloc;
static void *counted_alloc(size_t size, size_t align, void *user) {
    count_alloc *c = (count_alloc *)user;
    void *p = NULL;
    c->n++;
    c->bytes += size;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0) return NULL;
    return p;
}
static void counted_free(void *p, void *user) { (void)user; free(p); }
static void test_records_blocks(void) {
    static const int rows[2] = {2, 100};
    for (int ri = 0; ri < 2; ri++) {
        count_alloc c[2] = {{0, 0}, {0, 0}};
        for (int on = 0; on < 2; on++) {
            spmd_mesh_desc desc;
            spmd_mesh *m = NULL;
            desc_rows3(&desc, rows[ri]);
            desc.trace_depth = on ? 0 : -1;
            desc.allocator.alloc = counted_alloc;
            desc.allocator.free = counted_free;
            desc.allocator.user = &c[on];
            T_CHECK(spmd_mesh_create(&desc, &m) == SPMD_OK, "mesh_create %dx3", rows[ri]);
            if (m) spmd_mesh_destroy(m);
        }
        T_CHECK(c[1].n - c[0].n == 2 && c[1].bytes - c[0].bytes == (size_t)rows[ri] * 3 * 64 * (64 + 8),
                "%d devices: the recorder's allocations %ld (want 2), bytes %zu (want %d)", rows[ri] * 3,
                c[1].n - c[0].n, c[1].bytes - c[0].bytes, rows[ri] * 3 * 64 * 72);
    }
}

/* ---- a deliberate timeout ----------------------------------------------- */
static int back_from_psum; /* devices 3 and 4 back from their failed psum */

static void skipper(spmd_dev *d, void *arg) {
    int id = spmd_device_id(d);
    float f = 1, o;
    spmd_status s;
    (void)arg;
    T_CHECK(spmd_psum(d, &f, &o, 1, SPMD_F32, "y", NULL) == SPMD_OK, "first psum");
    if (id == 5) { /* forgets the second psum; runs its own code until the others gave up */
        while (__atomic_load_n(&back_from_psum, __ATOMIC_ACQUIRE) < 2) sched_yield();
        return;
    }
    s = SPMD_AT(d, spmd_psum(d, &f, &o, 1, SPMD_F32, "y", NULL));
    if (id >= 3) {
        T_CHECK(s == SPMD_ERR_TIMEOUT || s == SPMD_ERR_BROKEN, "device %d: psum %s", id, spmd_status_name(s));
        __atomic_fetch_add(&back_from_psum, 1, __ATOMIC_RELEASE);
    }
}

static void test_timeout_report(void) {
    spmd_mesh *m;
    char rep[16384], logged[65536];
    size_t n;
    log_clear();
    sched23 = SPMD_SCHEDULER_THREADS; /* device 5 spins in its own code: it needs its own thread */
    m = mesh23(300, 0);
    sched23 = SPMD_SCHEDULER_DEFAULT;
    if (!m) return;
    if (spmd_mesh_scheduler(m) != SPMD_SCHEDULER_THREADS) { /* SPMD_SCHEDULER=fibers wins over the desc */
        T_SKIPN(13, "the timeout report: device 5 spins in its own code, which needs its own thread");
        spmd_mesh_destroy(m);
        return;
    }
    spmd_run(m, skipper, NULL);
    T_CHECK(spmd_mesh_status(m) == SPMD_ERR_TIMEOUT, "mesh broken by a timeout: %s",
            spmd_status_name(spmd_mesh_status(m)));
    T_CHECK(strstr(spmd_mesh_error(m), "(spmd_report says what each device is doing)") != NULL,
            "the one-line error points at the report: %s", spmd_mesh_error(m));
    T_CHECK(strchr(spmd_mesh_error(m), '\n') == NULL, "one line");
    n = spmd_report(m, -1, rep, sizeof rep);
    T_CHECK(n > 0 && n < sizeof rep, "report length %zu", n);
    T_CHECK(strstr(rep, "group [3 4 5] in trouble at its op #1:\n") != NULL, "the group in trouble:\n%s", rep);
    T_CHECK(strstr(rep, "  device 5: reached op #0 (did not arrive): #0 psum") != NULL, "device 5 absent:\n%s", rep);
    T_CHECK(strstr(rep, "  1 of 3 members did not arrive\n") != NULL, "one absent:\n%s", rep);
    T_CHECK(strstr(rep, "  device 3: reached op #1: #1 psum(f32 x 1, eager) over 'y'") != NULL &&
                strstr(rep, "failed: SPMD_ERR_TIMEOUT, at tests/test_trace.c:") != NULL,
            "device 3 reached and failed (its status shown with a call site):\n%s", rep);
    T_CHECK(strstr(rep, "  device 5: returned from its function (detached) after 1 calls") != NULL,
            "device 5 returned:\n%s", rep);
    T_CHECK(strstr(rep, "group [0 1 2] in trouble") == NULL, "the healthy group is not in trouble:\n%s", rep);
    /* the report logged when the mesh broke: device 5 was running its own code */
    pthread_mutex_lock(&log_lock);
    memcpy(logged, log_text, log_len + 1);
    pthread_mutex_unlock(&log_lock);
    T_CHECK(strstr(logged, "spmd report: mesh of 6 devices (x=2, y=3), broken: SPMD_ERR_TIMEOUT") != NULL,
            "a report logged at the break:\n%s", logged);
    T_CHECK(strstr(logged, "  device 5: running its own code for ") != NULL, "device 5 running its own code:\n%s",
            logged);
    T_CHECK(strstr(logged, ": blocked in #1 psum(f32 x 1, eager) over 'y'") != NULL, "a device blocked:\n%s", logged);
    spmd_mesh_destroy(m);
}

/* ---- the timeline ------------------------------------------------------- */
/* A small JSON parser: validates the text and keeps, for each object at
   depth 2 (an element of traceEvents), its name, ph, tid, pid and args.seq. */
typedef struct ev { char name[64], ph[64]; int tid, pid; long seq; } ev;
static ev evs[256];
static int nev;
typedef struct jp { const char *s; int ok; } jp;
static void ws(jp *p) { while (*p->s == ' ' || *p->s == '\n' || *p->s == '\t' || *p->s == '\r') p->s++; }
static int jstr(jp *p, char *out, size_t len) {
    size_t n = 0;
    if (*p->s != '"') return p->ok = 0;
    for (p->s++; *p->s && *p->s != '"'; p->s++) {
        char c = *p->s;
        if ((unsigned char)c < 32) return p->ok = 0;
        if (c == '\\') {
            p->s++;
            if (*p->s == 'u') { for (int k = 0; k < 4; k++) if (!p->s[1 + k]) return p->ok = 0; p->s += 4; c = '?'; }
            else if (!strchr("\"\\/bfnrt", *p->s) || !*p->s) return p->ok = 0;
            else c = *p->s;
        }
        if (out && n + 1 < len) out[n++] = c;
    }
    if (*p->s != '"') return p->ok = 0;
    p->s++;
    if (out) out[n] = '\0';
    return 1;
}
static double jnum(jp *p) {
    char *end;
    double v = strtod(p->s, &end);
    if (end == p->s) p->ok = 0;
    p->s = end;
    return v;
}
static void jval(jp *p, int depth, ev *cur, const char *key, int in_args);
static void jobj(jp *p, int depth, int in_args, ev *cur) {
    char key[64];
    ev *mine = cur;
    if (depth == 2) { if (nev >= 256) { p->ok = 0; return; } mine = &evs[nev++]; memset(mine, 0, sizeof *mine); mine->seq = -1; }
    p->s++;
    ws(p);
    if (*p->s == '}') { p->s++; return; }
    while (p->ok) {
        ws(p);
        if (!jstr(p, key, sizeof key)) return;
        ws(p);
        if (*p->s != ':') { p->ok = 0; return; }
        p->s++;
        ws(p);
        jval(p, depth, mine, key, in_args || (depth == 2 && strcmp(key, "args") == 0));
        ws(p);
        if (*p->s == ',') { p->s++; continue; }
        if (*p->s == '}') { p->s++; return; }
        p->ok = 0;
    }
}
static void jval(jp *p, int depth, ev *cur, const char *key, int in_args) {
    if (*p->s == '{') { jobj(p, depth + 1, in_args, cur); return; }
    if (*p->s == '[') {
        p->s++;
        ws(p);
        if (*p->s == ']') { p->s++; return; }
        while (p->ok) {
            ws(p);
            jval(p, depth + 1, cur, NULL, in_args);
            ws(p);
            if (*p->s == ',') { p->s++; continue; }
            if (*p->s == ']') { p->s++; return; }
            p->ok = 0;
        }
        return;
    }
    if (*p->s == '"') {
        char v[64];
        jstr(p, v, sizeof v);
        if (cur && key && !in_args && strcmp(key, "name") == 0) snprintf(cur->name, sizeof cur->name, "%s", v);
        if (cur && key && !in_args && strcmp(key, "ph") == 0) snprintf(cur->ph, sizeof cur->ph, "%s", v);
        return;
    }
    if (strncmp(p->s, "true", 4) == 0 || strncmp(p->s, "null", 4) == 0) { p->s += 4; return; }
    if (strncmp(p->s, "false", 5) == 0) { p->s += 5; return; }
    {
        double v = jnum(p);
        if (cur && key && !in_args && strcmp(key, "tid") == 0) cur->tid = (int)v;
        if (cur && key && !in_args && strcmp(key, "pid") == 0) cur->pid = (int)v;
        if (cur && key && in_args && strcmp(key, "seq") == 0) cur->seq = (long)v;
    }
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (char *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_timeline(void) {
    static const char *ops[NCALLS] = {"psum", "broadcast", "pmax", "barrier", "send", "recv", "psum"};
    char pattern[128], path[128];
    spmd_mesh *m;
    char *text;
    int seen[6] = {0}, bad = 0;
    snprintf(pattern, sizeof pattern, "/tmp/spmd_test_trace_%d_%%p.json", (int)getpid());
    snprintf(path, sizeof path, "/tmp/spmd_test_trace_%d_0.json", (int)getpid());
    setenv("SPMD_TRACE", pattern, 1);
    m = mesh23(20000, 2); /* a ring of 2: most records leave it before the end */
    unsetenv("SPMD_TRACE");
    if (!m) return;
    T_CHECK(spmd_run(m, known_calls, NULL) == SPMD_OK, "run");
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
    text = slurp(path);
    T_CHECK(text != NULL, "the trace %s was written", path);
    if (!text) return;
    {
        jp p = {text, 1};
        nev = 0;
        ws(&p);
        if (*p.s == '{') jobj(&p, 0, 0, NULL); else p.ok = 0;
        ws(&p);
        T_CHECK(p.ok && *p.s == '\0', "valid JSON (stopped at offset %ld)", (long)(p.s - text));
    }
    for (int k = 0; k < nev; k++) {
        ev *e = &evs[k];
        if (strcmp(e->ph, "M") == 0) continue;
        if (strcmp(e->ph, "X") != 0 || e->tid < 0 || e->tid >= 6 || e->pid != 0) { bad++; continue; }
        /* each device's events in call order, with the op's name */
        if (e->seq != seen[e->tid] || seen[e->tid] >= NCALLS || strcmp(e->name, ops[seen[e->tid]]) != 0) {
            if (bad++ < 3) fprintf(stderr, "event %d: %s tid %d seq %ld (want seq %d)\n", k, e->name, e->tid, e->seq,
                                   seen[e->tid]);
        }
        seen[e->tid]++;
    }
    T_CHECK(bad == 0, "%d events out of place", bad);
    for (int id = 0; id < 6; id++) T_CHECK(seen[id] == NCALLS, "device %d: %d events, want %d", id, seen[id], NCALLS);
    T_CHECK(strstr(text, "\"args\":{\"seq\":0,\"group_op\":0,\"bytes\":8,\"dtype\":\"f32\",\"count\":2,"
                         "\"algorithm\":\"eager\",\"axes\":\"y\",\"status\":\"SPMD_OK\"}") != NULL,
            "the first psum's args");
    free(text);
    remove(path);

    /* an unwritable path: a warning, the run goes on */
    log_clear();
    setenv("SPMD_TRACE", "/nonexistent-spmd-dir/trace.json", 1);
    m = mesh23(20000, 0);
    unsetenv("SPMD_TRACE");
    if (!m) return;
    pthread_mutex_lock(&log_lock);
    T_CHECK(strstr(log_text, "SPMD_TRACE=/nonexistent-spmd-dir/trace.json cannot be written") != NULL,
            "the warning: %s", log_text);
    pthread_mutex_unlock(&log_lock);
    T_CHECK(spmd_run(m, known_calls, NULL) == SPMD_OK, "the run goes on");
    T_CHECK(spmd_mesh_destroy(m) == SPMD_OK, "destroy");
}

/* ---- off ---------------------------------------------------------------- */
static void test_off(void) {
    char rep[4096];
    spmd_mesh *m = mesh23(20000, -1);
    if (!m) return;
    T_CHECK(spmd_run(m, known_calls, NULL) == SPMD_OK, "run");
    spmd_report(m, -1, rep, sizeof rep);
    T_CHECK(strstr(rep, "flight recorder off") != NULL && strstr(rep, "#0 psum") == NULL, "off by desc: %s", rep);
    spmd_mesh_destroy(m);
    setenv("SPMD_TRACE_DEPTH", "0", 1);
    m = mesh23(20000, 16);
    unsetenv("SPMD_TRACE_DEPTH");
    if (!m) return;
    T_CHECK(spmd_run(m, known_calls, NULL) == SPMD_OK, "run");
    spmd_report(m, -1, rep, sizeof rep);
    T_CHECK(strstr(rep, "flight recorder off") != NULL, "off by env: %s", rep);
    spmd_mesh_destroy(m);
}

/* ---- the report on a signal (SPMD_REPORT_SIGNAL) ------------------------- */
static pthread_cond_t log_cond = PTHREAD_COND_INITIALIZER;
static void log_tell(void *user, spmd_log_level level, int device, const char *msg) {
    log_keep(user, level, device, msg);
    pthread_mutex_lock(&log_lock);
    pthread_cond_broadcast(&log_cond);
    pthread_mutex_unlock(&log_lock);
}
/* Wait (at most 10 s) until the log holds want; 1 if it does. */
static int log_wait_for(const char *want) {
    struct timespec dl;
    int found;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30; /* (a bound, not a wait: under TSan with both lanes busy a report once took more than 10 s) */
    pthread_mutex_lock(&log_lock);
    while (!(found = strstr(log_text, want) != NULL))
        if (pthread_cond_timedwait(&log_cond, &log_lock, &dl) != 0) { found = strstr(log_text, want) != NULL; break; }
    pthread_mutex_unlock(&log_lock);
    return found;
}

static int sig_release; /* device 5 may make its call */
static void sig_dev(spmd_dev *d, void *arg) {
    float f = 1, o = 0;
    (void)arg;
    T_CHECK(spmd_psum(d, &f, &o, 1, SPMD_F32, "x,y", NULL) == SPMD_OK && o == 6, "first psum: %g", (double)o);
    if (spmd_device_id(d) == 5) /* runs its own code until the report was written */
        while (!__atomic_load_n(&sig_release, __ATOMIC_ACQUIRE)) sched_yield();
    T_CHECK(SPMD_AT(d, spmd_psum(d, &f, &o, 1, SPMD_F32, "x,y", NULL)) == SPMD_OK && o == 6, "second psum: %g",
            (double)o);
}
static void *sig_run(void *m) { return (void *)(intptr_t)spmd_run((spmd_mesh *)m, sig_dev, NULL); }

static spmd_mesh *sig_mesh(spmd_scheduler sch) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = 2;
    desc.shape[1] = 3;
    desc.axis_names[0] = "x";
    desc.axis_names[1] = "y";
    desc.timeout_ms = 60000; /* the run must not break while device 5 waits for the report */
    desc.scheduler = sch;
    desc.log_level = SPMD_LOG_WARN;
    desc.log_fn = log_tell;
    T_CHECK(spmd_mesh_create(&desc, &m) == SPMD_OK, "mesh_create 2x3");
    return m;
}

static void test_signal_report(void) {
    spmd_mesh *m;
    pthread_t th;
    void *ret;
    struct sigaction sa;
    char rep[16384];
    int i, blocked = 0;
    /* a value that names no signal: a warning, no handler */
    log_clear();
    setenv("SPMD_REPORT_SIGNAL", "USR3", 1);
    m = sig_mesh(SPMD_SCHEDULER_DEFAULT);
    if (m) spmd_mesh_destroy(m);
    T_CHECK(strstr(log_text, "ignoring SPMD_REPORT_SIGNAL=USR3 (expected USR1, USR2 or a signal number)") != NULL,
            "bad value warned:\n%s", log_text);
    T_CHECK(sigaction(SIGUSR1, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL, "no handler for a bad value");
    /* USR1: device 5 runs its own code while the others wait for it in their second psum */
    log_clear();
    setenv("SPMD_REPORT_SIGNAL", "USR1", 1);
    m = sig_mesh(SPMD_SCHEDULER_THREADS); /* device 5 spins in its own code: it needs its own thread */
    unsetenv("SPMD_REPORT_SIGNAL");
    if (!m) return;
    T_CHECK(sigaction(SIGUSR1, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL, "SIGUSR1 has the library's handler");
    if (spmd_mesh_scheduler(m) != SPMD_SCHEDULER_THREADS || sa.sa_handler == SIG_DFL) { /* SIGUSR1 would end us */
        if (sa.sa_handler != SIG_DFL)
            T_SKIPN(4, "the signal report: device 5 spins in its own code, which needs its own thread");
        spmd_mesh_destroy(m);
        return;
    }
    T_CHECK(pthread_create(&th, NULL, sig_run, m) == 0, "run thread");
    /* wait (bounded) until devices 0-4 are blocked in their second psum and device 5 is back in its own
       code (on a busy machine it may not have left its first psum yet when the others are blocked) */
    rep[0] = '\0';
    for (i = 0; i < 2000000 && (blocked < 5 || !strstr(rep, "  device 5: running its own code for ")); i++) {
        const char *p = rep;
        spmd_report(m, -1, rep, sizeof rep);
        for (blocked = 0; (p = strstr(p, ": blocked in #1 psum")) != NULL; p++) blocked++;
        if (blocked < 5 || !strstr(rep, "  device 5: running its own code for ")) sched_yield();
    }
    T_CHECK(blocked == 5 && strstr(rep, "  device 5: running its own code for "),
            "devices 0-4 blocked in their second psum (%d), device 5 in its own code:\n%s", blocked, rep);
    T_CHECK(raise(SIGUSR1) == 0, "raise SIGUSR1");
    T_CHECK(log_wait_for("  device 5: running its own code for "), "the report logged on the signal:\n%s", log_text);
    __atomic_store_n(&sig_release, 1, __ATOMIC_RELEASE);
    T_CHECK(pthread_join(th, &ret) == 0 && (spmd_status)(intptr_t)ret == SPMD_OK, "the run ends well");
    snprintf(rep, sizeof rep, "report asked for by signal %d (SPMD_REPORT_SIGNAL):\n"
             "spmd report: mesh of 6 devices (x=2, y=3), not broken\n", SIGUSR1);
    pthread_mutex_lock(&log_lock);
    T_CHECK(strstr(log_text, rep) != NULL, "the heading:\n%s", log_text);
    T_CHECK(strstr(log_text, "  device 0: blocked in #1 psum(f32 x 1, eager) over 'x,y' (op #1 of group [0 1 2 3 4 5], "
                             "index 0): waiting for ") != NULL &&
                strstr(log_text, ", at tests/test_trace.c:") != NULL,
            "device 0 blocked, with its call site:\n%s", log_text);
    pthread_mutex_unlock(&log_lock);
    spmd_mesh_destroy(m);
}

int main(void) {
    unsetenv("SPMD_TRACE");
    unsetenv("SPMD_TRACE_DEPTH");
    unsetenv("SPMD_FAULTS");
    test_records();
    test_records_wrap();
    test_records_blocks();
    test_timeout_report();
    test_timeline();
    test_off();
    test_signal_report();
    return t_summary();
}
