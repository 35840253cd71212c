/* Bootstrap of the libfabric backend: jobs of 2, 3 and 4 processes through
   tools/spmdrun (allgather of blobs of different lengths, barrier); the
   layout read from the Slurm/Open MPI/PMI variables; a wrong job key
   rejected; garbage, truncated and lying messages on the coordinator port
   neither crash nor stall it; a coordinator that never starts gives a
   timeout within the deadline; tools/spmdrun's arguments, exit status,
   deadline and signal handling. Internal API, so the implementation is
   included here. */
#define SPMDCOLL_IMPLEMENTATION
#ifndef SPMDCOLL_LIBFABRIC
#define SPMDCOLL_LIBFABRIC
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "proclib.h"
#include <arpa/inet.h>
#include <sys/stat.h>
#include <poll.h>

static void blob_of(int rank, int round, unsigned char *b, size_t *len) {
    size_t i;
    *len = (size_t)(rank * 37 + round * 11) % 300;
    for (i = 0; i < *len; i++) b[i] = (unsigned char)(rank * 7 + round * 3 + i);
}

/* The allgathers of a mesh creation, about as long as its blobs are (the
   host's name, the lane's host identity, its segment's name, one bit a
   process, the endpoint's name, the mesh's description), then a barrier;
   each result checked against blob_of. Process 0 prints "SENT <bytes it
   wrote> WANT <bytes>": one WELCOME to each process, one TREE to each
   process but the root, its HELLO to its parent, its own entry UP per
   exchange (the section comment's wire format, counted by hand here). */
static int child_bytes(spmd__boot *b) {
    static const size_t sizes[] = {12, 40, 30, 1, 44, 48, 0};
    unsigned char mine[512], want[512], *all = (unsigned char *)calloc((size_t)b->nprocs, 64);
    size_t *lens = (size_t *)calloc((size_t)b->nprocs, sizeof *lens), k, wl;
    uint64_t expect = 16u * (uint64_t)(b->nprocs - 1) + 28u * (uint64_t)(b->nprocs - 2) + 16 + 12 + b->keylen;
    int i, bad = 0;
    for (k = 0; k < sizeof sizes / sizeof sizes[0] && !bad; k++) {
        size_t len = sizes[k];
        for (i = 0; i < (int)len; i++) mine[i] = (unsigned char)(b->rank * 5 + (int)k + i);
        spmd_status st = spmd__boot_allgather(b, mine, len, all, len ? 64 : 0, len ? lens : NULL,
                                              spmd__now_ns() + 20000000000ull);
        if (st != SPMD_OK) { printf("allgather %zu: %s %s\n", k, spmd_status_name(st), b->err); bad = 1; }
        for (i = 0; i < b->nprocs && !bad && len; i++) {
            for (wl = 0; wl < len; wl++) want[wl] = (unsigned char)(i * 5 + (int)k + (int)wl);
            if (lens[i] != len || memcmp(all + (size_t)i * 64, want, len) != 0) {
                printf("allgather %zu: entry %d wrong\n", k, i);
                bad = 1;
            }
        }
        expect += 16 + 4 + 8 + len;
    }
    if (b->rank == 0) printf("SENT %llu WANT %llu\n", (unsigned long long)b->sent_bytes, (unsigned long long)expect);
    free(all);
    free(lens);
    spmd__boot_close(b);
    return bad;
}

static void *kill_soon(void *arg) {
    (void)arg;
    usleep(150000);
    raise(SIGKILL);
    return NULL;
}

/* One allgather, then a second in which process 2 (in a job of 7: the
   tree's node 1, parent of processes 4 and 5) is killed while it waits
   for its children, and process 6 (a leaf on the other side) comes late:
   every other process prints "LOST <status> <ms> <message>". */
static int child_killmid(spmd__boot *b) {
    unsigned char all[8 * 16];
    size_t lens[8];
    uint64_t t0;
    pthread_t t;
    spmd_status st = spmd__boot_allgather(b, "x", 1, all, 16, lens, spmd__now_ns() + 20000000000ull);
    if (st != SPMD_OK || b->nprocs != 7) { printf("first allgather: %s %s\n", spmd_status_name(st), b->err); return 1; }
    if (b->rank == 2 && pthread_create(&t, NULL, kill_soon, NULL) != 0) return 1;
    if (b->rank == 6) usleep(1000000);
    t0 = spmd__now_ns();
    st = spmd__boot_allgather(b, "y", 1, all, 16, lens, spmd__now_ns() + 20000000000ull);
    printf("LOST %s %.0f %s\n", spmd_status_name(st), (double)(spmd__now_ns() - t0) / 1e6, b->err);
    fflush(stdout);
    spmd__boot_close(b);
    return 0;
}

/* A process of a job: prints "BOOT <status> <message>" and exits 0 when
   everything it checked held. */
static int child(const char *mode) {
    spmd__boot_desc d;
    spmd__boot *b;
    char err[512];
    spmd_status st;
    memset(&d, 0, sizeof d);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    printf("BOOT %s %s\n", spmd_status_name(st), st == SPMD_OK ? "" : err);
    fflush(stdout);
    if (st != SPMD_OK) return strcmp(mode, "status") == 0 ? 0 : 1;
    if (strcmp(mode, "bytes") == 0) return child_bytes(b);
    if (strcmp(mode, "killmid") == 0) return child_killmid(b);
    if (strcmp(mode, "gather") == 0) {
        unsigned char mine[512], *all = (unsigned char *)calloc((size_t)b->nprocs, 512);
        size_t len, *lens = (size_t *)calloc((size_t)b->nprocs, sizeof *lens);
        int round, i, bad = 0;
        uint64_t dl = spmd__now_ns() + 20000000000ull;
        for (round = 0; round < 3 && !bad; round++) {
            blob_of(b->rank, round, mine, &len);
            st = spmd__boot_allgather(b, mine, len, all, 512, lens, dl);
            if (st != SPMD_OK) { printf("allgather: %s %s\n", spmd_status_name(st), b->err); bad = 1; break; }
            for (i = 0; i < b->nprocs; i++) {
                unsigned char want[512];
                size_t wl;
                blob_of(i, round, want, &wl);
                if (lens[i] != wl || memcmp(all + (size_t)i * 512, want, wl) != 0) {
                    printf("allgather round %d: entry %d wrong (%zu bytes, want %zu)\n", round, i, lens[i], wl);
                    bad = 1;
                }
            }
            st = spmd__boot_barrier(b, dl);
            if (st != SPMD_OK) { printf("barrier: %s %s\n", spmd_status_name(st), b->err); bad = 1; }
        }
        free(all);
        free(lens);
        spmd__boot_close(b);
        return bad;
    }
    st = spmd__boot_barrier(b, spmd__now_ns() + 20000000000ull);
    printf("BARRIER %s\n", spmd_status_name(st));
    spmd__boot_close(b);
    return 0;
}

static int connect_to(int port) {
    struct sockaddr_in a;
    int fd, i;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (i = 0; i < 500; i++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
        close(fd);
        usleep(10000);
    }
    return -1;
}

/* Does the peer close fd (the coordinator rejecting or dropping it) within
   secs? Whatever it sends first (a REJECT) is read and dropped. */
static int closed_within(int fd, double secs) {
    double end = p_now() + secs;
    char buf[512];
    for (;;) {
        struct pollfd pf;
        double left = end - p_now();
        ssize_t r;
        if (left <= 0) return 0;
        pf.fd = fd; pf.events = POLLIN; pf.revents = 0;
        if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0) continue;
        r = read(fd, buf, sizeof buf);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    }
}

/* Send garbage on fd (if any), then wait for the coordinator to close it:
   the connection and the rejection are checked (within 10 s), the socket
   closed here. */
static void send_then_closed(int fd, const void *p, size_t n, const char *what, double t0) {
    T_CHECK(fd >= 0, "%s: could not connect to the coordinator", what);
    if (fd < 0) return;
    if (n) T_CHECK(write(fd, p, n) == (ssize_t)n, "%s: write", what);
    T_CHECK(closed_within(fd, 10.0), "%s: the coordinator did not close the connection (%.1f s into the test)",
            what, p_now() - t0);
    close(fd);
}

/* Half a message, then our side's end: the coordinator reads both. */
static void shutdown_after(int fd, const void *p, size_t n) {
    if (fd < 0) return;
    T_CHECK(write(fd, p, n) == (ssize_t)n, "half a payload: write");
    shutdown(fd, SHUT_WR);
}

static size_t hdr(unsigned char *p, uint32_t magic, uint32_t ver, uint32_t type, uint32_t rank, uint32_t len) {
    spmd__boot_put32(p, magic);
    spmd__boot_put32(p + 4, ver | type << 16);
    spmd__boot_put32(p + 8, rank);
    spmd__boot_put32(p + 12, len);
    return 16;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    const char *p = hay;
    while ((p = strstr(p, needle)) != NULL) { n++; p += strlen(needle); }
    return n;
}

/* A job of n (<= 64) processes of this program in `mode`, started here
   (tools/spmdrun, tried in test_jobs, costs ~70 ms a process on a small
   machine); each writes <tag>-<i>.out/.err. Exit codes in codes; returns
   how many exited 0. */
static int spawn_job(const char *tag, int n, const char *mode, int *codes) {
    char np[40], id[40], coord[64], name[48];
    const char *env[] = {np, id, coord, "SPMD_JOB_KEY=0123456789abcdef0123456789abcdef", "SPMD_BOOT_TIMEOUT_MS=20000",
                         NULL};
    pid_t pid[64];
    int i, ok = 0;
    snprintf(np, sizeof np, "SPMD_NUM_PROCESSES=%d", n);
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    for (i = 0; i < n; i++) {
        snprintf(id, sizeof id, "SPMD_PROCESS_ID=%d", i);
        snprintf(name, sizeof name, "%s-%d", tag, i);
        pid[i] = p_spawn(name, mode, env);
    }
    for (i = 0; i < n; i++) ok += (codes[i] = p_exit_code(p_wait(pid[i], 60))) == 0;
    return ok;
}

/* Jobs of 1, 2, 3, 5, 7, 8 and 13 processes (trees full, lopsided, a
   single edge): three allgathers of blobs of different lengths, each
   result checked against blob_of, and barriers; 3 processes also through
   tools/spmdrun. */
static void test_jobs(void) {
    static const int sizes[] = {1, 2, 3, 5, 7, 8, 13};
    int codes[64], rc;
    size_t k;
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char tag[32];
        int n = sizes[k], ok, i;
        snprintf(tag, sizeof tag, "boot-job%d", n);
        ok = spawn_job(tag, n, "gather", codes);
        T_CHECK(ok == n, "%d processes: %d exited 0 (see %s/%s-*.out)", n, ok, p_logdir, tag);
        for (i = 0; i < n && ok != n; i++) {
            char name[48];
            snprintf(name, sizeof name, "%s-%d", tag, i);
            if (codes[i] != 0) { p_show(name, "out"); break; }
        }
    }
    rc = p_spmdrun("boot-job3-spmdrun", 3, "", "gather", "");
    T_CHECK(rc == 0, "3 processes through spmdrun: exit %d (see %s/boot-job3-spmdrun.log)", rc, p_logdir);
    if (rc != 0) p_show("boot-job3-spmdrun", "log");
}

/* What the coordinator writes to its sockets in a job's bootstrap and the
   exchanges of a mesh creation (child_bytes): exactly the hand count, at
   most 64 KiB at any size (the bound at 64 processes); printed. */
static void test_bytes(void) {
    static const int sizes[] = {8, 16, 32, 64};
    char line[320] = "coordinator's bootstrap bytes for a mesh creation's exchanges:";
    int codes[64];
    size_t k, o = strlen(line);
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char tag[32], name[48];
        const char *at;
        unsigned long long sent = 0, expect = 0;
        int ok, n = sizes[k];
        double t0 = p_now();
        snprintf(tag, sizeof tag, "boot-bytes%d", n);
        snprintf(name, sizeof name, "%s-0", tag);
        ok = spawn_job(tag, n, "bytes", codes);
        t0 = p_now() - t0;
        at = strstr(p_read(name, "out"), "SENT ");
        T_CHECK(ok == n && at && sscanf(at, "SENT %llu WANT %llu", &sent, &expect) == 2,
                "%d processes: %d exited 0, no count (see %s/%s-*.out)", n, ok, p_logdir, tag);
        if (ok != n || !at) { p_show(name, "out"); continue; }
        T_CHECK(sent == expect && sent <= 65536, "%d processes: the coordinator wrote %llu bytes, the hand count is "
                "%llu (bound 65536)", n, sent, expect);
        o += (size_t)snprintf(line + o, sizeof line - o, "%s P=%d %llu B (%.1f s)", k ? "," : "", n, sent, t0);
    }
    printf("%s\n", line);
}

/* A process of the tree killed while it waits inside an allgather: every
   survivor fails with SPMD_ERR_PEER_LOST well within the deadline (20 s),
   the coordinator naming the process. */
static void test_killmid(void) {
    long failed = t__failed;
    int codes[64], i;
    spawn_job("boot-killmid", 7, "killmid", codes);
    T_CHECK(codes[2] == 128 + SIGKILL, "kill mid-allgather: process 2 exit %d, want %d", codes[2], 128 + SIGKILL);
    for (i = 0; i < 7; i++) {
        char name[48];
        const char *at;
        double ms = 1e9;
        if (i == 2) continue;
        snprintf(name, sizeof name, "boot-killmid-%d", i);
        at = strstr(p_read(name, "out"), "LOST SPMD_ERR_PEER_LOST ");
        if (at) ms = atof(at + strlen("LOST SPMD_ERR_PEER_LOST "));
        T_CHECK(codes[i] == 0 && at && ms < 5000, "kill mid-allgather: process %d: exit %d, %s (%.0f ms): %s", i,
                codes[i], at ? "lost" : "no loss reported", ms, p_read(name, "out"));
        if (i == 0)
            T_CHECK(at && strstr(at, "process 2"), "kill mid-allgather: the coordinator does not name process 2: %s",
                    p_read(name, "out"));
    }
    if (t__failed != failed)
        for (i = 0; i < 7; i++) {
            char name[48];
            snprintf(name, sizeof name, "boot-killmid-%d", i);
            p_show(name, "out");
            p_show(name, "err");
        }
}

static void test_layouts(void) {
    static const char *vars[] = {"SPMD_NUM_PROCESSES", "SPMD_PROCESS_ID", "SPMD_COORDINATOR", "SLURM_NTASKS",
                                 "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE",
                                 "PMI_RANK", "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "SLURM_STEP_ID", "SPMD_JOB_KEY"};
    spmd__boot_desc d;
    spmd__boot *b = NULL;
    char err[512];
    spmd_status st;
    size_t i;
    for (i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    memset(&d, 0, sizeof d);
    d.log_level = SPMD_LOG_OFF;
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_ERR_INVALID && strstr(err, "SPMD_NUM_PROCESSES"), "no layout: %s %s", spmd_status_name(st), err);
    setenv("SLURM_NTASKS", "1", 1);
    setenv("SLURM_PROCID", "0", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_OK && b && b->nprocs == 1 && strcmp(b->layout_from, "slurm") == 0, "slurm layout: %s %s",
            spmd_status_name(st), err);
    spmd__boot_close(b);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_PROCID", "4", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_ERR_INVALID, "slurm id 4 of 4: %s %s", spmd_status_name(st), err);
    setenv("SLURM_PROCID", "2", 1);
    setenv("SLURM_STEP_NODELIST", "node[07-09],x", 1);
    setenv("SLURM_JOB_ID", "12", 1);
    setenv("SLURM_STEP_ID", "3", 1);
    setenv("SPMD_BOOT_TIMEOUT_MS", "200", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err); /* nobody listens at node07: a timeout naming it */
    T_CHECK(st == SPMD_ERR_TIMEOUT && strstr(err, "node07:20195"), "slurm coordinator: %s %s", spmd_status_name(st), err);
    unsetenv("SLURM_NTASKS"); unsetenv("SLURM_PROCID"); unsetenv("SLURM_STEP_NODELIST");
    unsetenv("SLURM_JOB_ID"); unsetenv("SLURM_STEP_ID");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_ERR_INVALID && strstr(err, "SPMD_COORDINATOR") && strstr(err, "openmpi"),
            "open mpi without coordinator: %s %s", spmd_status_name(st), err);
    unsetenv("OMPI_COMM_WORLD_SIZE"); unsetenv("OMPI_COMM_WORLD_RANK");
    setenv("PMI_SIZE", "3", 1);
    setenv("PMI_RANK", "x", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_ERR_INVALID && strstr(err, "PMI_RANK"), "pmi garbage rank: %s %s", spmd_status_name(st), err);
    unsetenv("PMI_SIZE"); unsetenv("PMI_RANK");
    setenv("SPMD_NUM_PROCESSES", "2", 1);
    setenv("SPMD_PROCESS_ID", "1", 1);
    setenv("SPMD_COORDINATOR", "localhost:99999", 1);
    st = spmd__boot_open(&d, &b, err, sizeof err);
    T_CHECK(st == SPMD_ERR_INVALID && strstr(err, "host:port"), "bad port: %s %s", spmd_status_name(st), err);
    unsetenv("SPMD_NUM_PROCESSES"); unsetenv("SPMD_PROCESS_ID"); unsetenv("SPMD_COORDINATOR");
    unsetenv("SPMD_BOOT_TIMEOUT_MS");
}

static void test_wrong_key(void) {
    char coord[64];
    const char *e0[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=0", coord, "SPMD_JOB_KEY=right-key",
                        "SPMD_BOOT_TIMEOUT_MS=2500", NULL};
    const char *e1[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=1", coord, "SPMD_JOB_KEY=wrong-key",
                        "SPMD_BOOT_TIMEOUT_MS=2500", NULL};
    pid_t p0, p1;
    int s0, s1;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    p0 = p_spawn("boot-key0", "status", e0);
    p1 = p_spawn("boot-key1", "status", e1);
    s1 = p_wait(p1, 20);
    s0 = p_wait(p0, 20);
    T_CHECK(p_exit_code(s1) == 0 && strstr(p_read("boot-key1", "out"), "BOOT SPMD_ERR_INVALID") &&
                strstr(p_read("boot-key1", "out"), "job key mismatch"),
            "wrong key: process 1 says: %s", p_read("boot-key1", "out"));
    T_CHECK(p_exit_code(s0) == 0 && strstr(p_read("boot-key0", "out"), "BOOT SPMD_ERR_TIMEOUT") &&
                strstr(p_read("boot-key0", "err"), "job key mismatch"),
            "wrong key: coordinator says: %s", p_read("boot-key0", "out"));
}

static void test_garbage(void) {
    char coord[64];
    int port = p_free_port(), fd, hang = -1, i;
    const char *e0[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=0", coord, "SPMD_JOB_KEY=k",
                        "SPMD_BOOT_TIMEOUT_MS=15000", "SPMD_BOOT_CONN_TIMEOUT_MS=800", NULL};
    const char *e1[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=1", coord, "SPMD_JOB_KEY=k",
                        "SPMD_BOOT_TIMEOUT_MS=15000", NULL};
    unsigned char m[4096];
    size_t n;
    pid_t p0, p1;
    int s0, s1;
    double t0;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", port);
    t0 = p_now();
    p0 = p_spawn("boot-garbage0", "status", e0);
    /* 1: random bytes */
    fd = connect_to(port);
    for (i = 0; i < (int)sizeof m; i++) m[i] = (unsigned char)(rand() >> 7);
    send_then_closed(fd, m, sizeof m, "random bytes", t0);
    /* 2: a truncated header, left open (must be dropped after its deadline) */
    hang = connect_to(port);
    T_CHECK(hang >= 0, "truncated header: could not connect to the coordinator on port %d", port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 1, 8);
    if (hang >= 0) T_CHECK(write(hang, m, 10) == 10, "truncated header: write");
    /* 3: a valid header announcing 4 GiB */
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 1, 0xffffffffu);
    send_then_closed(fd, m, n, "4 GiB", t0);
    /* 4: a HELLO whose key length disagrees with its size */
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 1, 9);
    spmd__boot_put32(m + n, 2); spmd__boot_put32(m + n + 4, 100); m[n + 8] = 'k';
    send_then_closed(fd, m, n + 9, "key length", t0);
    /* 5: a collective message before any handshake, 6: an unknown version, 7: a process id out of range,
       8: half a payload then close */
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_GATHER, 1, 0);
    send_then_closed(fd, m, n, "gather first", t0);
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, 77, SPMD__BM_HELLO, 1, 0);
    send_then_closed(fd, m, n, "version 77", t0);
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 99, 9);
    send_then_closed(fd, m, n, "process 99", t0);
    fd = connect_to(port);
    n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 1, 9);
    shutdown_after(fd, m, n + 4);
    send_then_closed(fd, NULL, 0, "half a payload", t0);
    /* the truncated connection is dropped once its handshake deadline (800 ms) passes: wait for that, then
       let process 1 join (a condition, not a sleep) */
    T_CHECK(hang >= 0 && closed_within(hang, 10.0), "the coordinator did not drop the truncated connection within 10 s");
    p1 = p_spawn("boot-garbage1", "status", e1);
    s1 = p_wait(p1, 20);
    s0 = p_wait(p0, 20);
    if (hang >= 0) close(hang);
    T_CHECK(p_exit_code(s0) == 0 && strstr(p_read("boot-garbage0", "out"), "BOOT SPMD_OK") &&
                strstr(p_read("boot-garbage0", "out"), "BARRIER SPMD_OK"),
            "coordinator after garbage: exit %d: %s", p_exit_code(s0), p_read("boot-garbage0", "out"));
    T_CHECK(p_exit_code(s1) == 0 && strstr(p_read("boot-garbage1", "out"), "BARRIER SPMD_OK"),
            "process 1 after garbage: exit %d: %s", p_exit_code(s1), p_read("boot-garbage1", "out"));
    {
        const char *e = p_read("boot-garbage0", "err");
        int rejected = count(e, "rejected connection");
        T_CHECK(rejected >= 7, "coordinator logged %d rejections, want 7:\n%s", rejected, e);
        T_CHECK(strstr(e, "bad magic") && strstr(e, "too large") && strstr(e, "key length") &&
                    strstr(e, "before the handshake") && strstr(e, "protocol version") && strstr(e, "outside"),
                "rejection reasons:\n%s", e);
        T_CHECK(strstr(e, "no valid handshake within"), "the truncated connection was not dropped:\n%s", e);
    }
    T_CHECK(p_now() - t0 < 10, "garbage test took %.1f s", p_now() - t0);
}

/* A HELLO on m: process `rank`, the key, port 0. Its length. */
static size_t hello_msg(unsigned char *m, uint32_t rank, uint32_t nprocs, const char *key) {
    size_t n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, rank, 12 + (uint32_t)strlen(key));
    spmd__boot_put32(m + n, nprocs);
    spmd__boot_put32(m + n + 4, (uint32_t)strlen(key));
    memcpy(m + n + 8, key, strlen(key));
    spmd__boot_put32(m + n + 8 + strlen(key), 0);
    return n + 12 + strlen(key);
}

/* Garbage on a tree listener: process 1 of 3 (the root: processes 2 and
   0 are its children) listens for them while process 2 is not started;
   random bytes, a header announcing 4 GiB, a HELLO with another key, one
   from a process that is not its child, and one whose key length
   disagrees are each rejected and closed; then process 2 starts and the
   job bootstraps and passes a barrier. */
static void test_tree_garbage(void) {
    char coord[64];
    const char *env[3][8];
    static const char ids[3][20] = {"SPMD_PROCESS_ID=0", "SPMD_PROCESS_ID=1", "SPMD_PROCESS_ID=2"};
    unsigned char m[4096];
    char path[400];
    const char *at;
    pid_t pid[3];
    int i, port = 0, fd;
    double t0 = p_now();
    size_t n;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    for (i = 0; i < 3; i++) {
        env[i][0] = "SPMD_NUM_PROCESSES=3"; env[i][1] = ids[i]; env[i][2] = coord; env[i][3] = "SPMD_JOB_KEY=k";
        env[i][4] = "SPMD_BOOT_TIMEOUT_MS=15000"; env[i][5] = "SPMD_BOOT_CONN_TIMEOUT_MS=800";
        env[i][6] = i == 1 ? "SPMD_LOG_LEVEL=info" : NULL; env[i][7] = NULL;
    }
    snprintf(path, sizeof path, "%s/boot-tgarb1.err", p_logdir);
    unlink(path); /* (not an earlier run's: the child truncates it, after the fork) */
    pid[0] = p_spawn("boot-tgarb0", "status", env[0]);
    pid[1] = p_spawn("boot-tgarb1", "status", env[1]);
    while (p_now() - t0 < 10 && !port) {
        at = strstr(p_read("boot-tgarb1", "err"), "(children in the tree) on 127.0.0.1 port ");
        if (at) port = atoi(at + strlen("(children in the tree) on 127.0.0.1 port "));
        else usleep(20000);
    }
    T_CHECK(port > 0, "process 1 did not say where it listens for its children:\n%s", p_read("boot-tgarb1", "err"));
    if (port > 0) {
        fd = connect_to(port);
        for (i = 0; i < (int)sizeof m; i++) m[i] = (unsigned char)(rand() >> 7);
        send_then_closed(fd, m, sizeof m, "tree: random bytes", t0);
        fd = connect_to(port);
        n = hdr(m, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_HELLO, 2, 0xffffffffu);
        send_then_closed(fd, m, n, "tree: 4 GiB", t0);
        fd = connect_to(port); /* its REJECT comes from process 1, the reason inside */
        if (fd >= 0) {
            struct pollfd pf;
            unsigned char r[256];
            ssize_t got = 0;
            T_CHECK(write(fd, m, hello_msg(m, 2, 3, "other")) > 0, "tree: another key: write");
            pf.fd = fd; pf.events = POLLIN; pf.revents = 0;
            while ((got < 16 || got < 16 + (ssize_t)spmd__boot_get32(r + 12)) && poll(&pf, 1, 5000) == 1) {
                ssize_t k = read(fd, r + got, sizeof r - 1 - (size_t)got);
                if (k <= 0) break;
                got += k;
            }
            T_CHECK(got >= 16 && spmd__boot_get32(r + 4) >> 16 == SPMD__BM_REJECT && spmd__boot_get32(r + 8) == 1 &&
                        (r[got] = 0, strstr((char *)r + 16, "job key mismatch")),
                    "tree: another key: the answer (%zd bytes) is not process 1's REJECT naming the key", got);
        }
        send_then_closed(fd, NULL, 0, "tree: another key", t0);
        fd = connect_to(port);
        send_then_closed(fd, m, hello_msg(m, 1, 3, "k"), "tree: not a child", t0);
        fd = connect_to(port);
        n = hello_msg(m, 2, 3, "k");
        spmd__boot_put32(m + 20, 7);
        send_then_closed(fd, m, n, "tree: key length", t0);
    }
    pid[2] = p_spawn("boot-tgarb2", "status", env[2]);
    for (i = 0; i < 3; i++) {
        char tag[32];
        int rc = p_exit_code(p_wait(pid[i], 20));
        snprintf(tag, sizeof tag, "boot-tgarb%d", i);
        T_CHECK(rc == 0 && strstr(p_read(tag, "out"), "BOOT SPMD_OK") && strstr(p_read(tag, "out"), "BARRIER SPMD_OK"),
                "tree garbage: process %d: exit %d: %s", i, rc, p_read(tag, "out"));
    }
    {
        const char *e = p_read("boot-tgarb1", "err");
        int rejected = count(e, "rejected connection");
        T_CHECK(rejected == 5 && strstr(e, "bad magic") && strstr(e, "too large") && strstr(e, "job key mismatch") &&
                    strstr(e, "not a child of this process") && strstr(e, "key length"),
                "tree garbage: process 1 logged %d rejections, want 5 with their reasons:\n%s", rejected, e);
    }
    T_CHECK(p_now() - t0 < 10, "tree garbage test took %.1f s", p_now() - t0);
}

static void test_no_coordinator(void) {
    char coord[64];
    const char *e1[] = {"SPMD_NUM_PROCESSES=3", "SPMD_PROCESS_ID=2", coord, "SPMD_JOB_KEY=k",
                        "SPMD_BOOT_TIMEOUT_MS=1500", NULL};
    double t0 = p_now(), dt;
    int s;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    s = p_wait(p_spawn("boot-nocoord", "status", e1), 20);
    dt = p_now() - t0;
    T_CHECK(p_exit_code(s) == 0 && strstr(p_read("boot-nocoord", "out"), "BOOT SPMD_ERR_TIMEOUT") &&
                strstr(p_read("boot-nocoord", "out"), "could not reach the coordinator"),
            "no coordinator: %s", p_read("boot-nocoord", "out"));
    T_CHECK(dt >= 1.4 && dt < 4.0, "no coordinator: gave up after %.2f s, deadline 1.5 s", dt);
}

/* tools/spmdrun itself: arguments passed on as given, the failed process's
   status (also when it dies at once), the deadline, SIGTERM and SIGINT
   stopping every process, and a grandchild that keeps the output pipe open
   not holding spmdrun. Each job runs with its own directory for pid files. */
static pid_t run_argv(const char *tag, const char *const *argv) {
    pid_t pid = p_fork_logged(tag);
    if (pid != 0) return pid;
    signal(SIGPIPE, SIG_DFL);
    execv(argv[0], (char *const *)argv);
    _exit(126);
}

/* pids written by the processes of a job into dir/pid.<id>; how many of want are there */
static int read_pids(const char *dir, int want, pid_t *pids) {
    int i, got = 0;
    for (i = 0; i < want; i++) {
        char path[400];
        FILE *f;
        long v = 0;
        snprintf(path, sizeof path, "%s/pid.%d", dir, i);
        pids[i] = 0;
        if ((f = fopen(path, "r")) == NULL) continue;
        if (fscanf(f, "%ld", &v) == 1 && v > 0) { pids[i] = (pid_t)v; got++; }
        fclose(f);
    }
    return got;
}

static void test_spmdrun_signal(const char *run, int sig) {
    char dir[300], script[1200], tag[32];
    const char *argv[] = {run, "-n", "3", "--timeout", "60", "--", "/bin/sh", "-c", script, NULL};
    pid_t pids[3], job;
    double t0;
    int i, got = 0, rc, alive = 0;
    snprintf(tag, sizeof tag, "spmdrun-sig%d", sig);
    snprintf(dir, sizeof dir, "%s/%s.d", p_logdir, tag);
    mkdir(dir, 0755);
    for (i = 0; i < 3; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/pid.%d", dir, i);
        unlink(path);
    }
    /* the process writes its pid, then becomes sleep (same pid) */
    snprintf(script, sizeof script, "echo $$ > '%s/pid.'$SPMD_PROCESS_ID.t && mv '%s/pid.'$SPMD_PROCESS_ID.t "
             "'%s/pid.'$SPMD_PROCESS_ID && exec sleep 30", dir, dir, dir);
    job = run_argv(tag, argv);
    t0 = p_now();
    while (p_now() - t0 < 10 && (got = read_pids(dir, 3, pids)) < 3) usleep(20000);
    T_CHECK(got == 3, "spmdrun signal %d: only %d of 3 processes started", sig, got);
    /* (a process may still be its shell, before the exec: stopped all the same) */
    kill(job, sig);
    rc = p_exit_code(p_wait(job, 10));
    T_CHECK(rc == 128 + sig, "spmdrun got signal %d: exit %d, want %d: %s", sig, rc, 128 + sig, p_read(tag, "err"));
    for (i = 0; i < got; i++)
        if (pids[i] > 0 && kill(pids[i], 0) == 0) { alive++; kill(pids[i], SIGKILL); }
    T_CHECK(alive == 0, "spmdrun got signal %d: %d of its processes still running", sig, alive);
}

/* A CPU list as the kernel prints it ("0-2,5") into a set; 0 if malformed. */
static int parse_cpus(const char *s, cpu_set_t *set) {
    CPU_ZERO(set);
    while (*s && *s != '\n') {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo, c;
        if (end == s || lo < 0 || lo >= CPU_SETSIZE) return 0;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            if (end == s + 1 || hi < lo || hi >= CPU_SETSIZE) return 0;
            s = end;
        }
        for (c = lo; c <= hi; c++) CPU_SET((int)c, set);
        if (*s == ',') s++;
    }
    return 1;
}

/* --bind cpu: with N <= CPUs process i runs on CPUs i*C/N .. (i+1)*C/N - 1
   of the C that spmdrun may use (read here with sched_getaffinity); with
   more processes than CPUs (C + 1 of them) none is pinned and a note says
   so. --bind auto and no --bind (the default): the same, without the note;
   --bind none: never pinned. A bad value is refused with 2. Skipped
   without taskset. */
static void test_spmdrun_bind(const char *run) {
    cpu_set_t mine, got;
    int allowed[CPU_SETSIZE], C = 0, c, n, i, q, rc, counts[6], nc = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        T_CHECK(0, "sched_getaffinity: %s", strerror(errno));
        return;
    }
    if (system("command -v taskset > /dev/null 2>&1") != 0) {
        T_SKIP("spmdrun --bind cpu: no taskset here (util-linux)");
        return;
    }
    for (c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine)) allowed[C++] = c;
    for (n = 1; n <= C && n <= 4; n++) counts[nc++] = n; /* then one more process than CPUs */
    if (C < 64) counts[nc++] = C + 1;
    for (q = 0; q < 4 * nc; q++) {
        static const char *const modes[4] = {"cpu", "auto", "none", NULL}; /* NULL: no --bind */
        const char *mode = modes[q / nc], *shown = mode ? mode : "(default)";
        char ns[16], tag[40];
        const char *argv[] = {run, "-n", ns, "--bind", mode, "--timeout", "20", "--", "/bin/sh", "-c",
                              "sed -n 's/^Cpus_allowed_list:[[:space:]]*/cpus /p' /proc/self/status", NULL};
        const char *dflt[] = {run, "-n", ns, "--timeout", "20", "--", "/bin/sh", "-c",
                              "sed -n 's/^Cpus_allowed_list:[[:space:]]*/cpus /p' /proc/self/status", NULL};
        char out[4096], err[4096]; /* (p_read's buffer is shared) */
        int pins;
        n = counts[q % nc];
        pins = n <= C && (!mode || strcmp(mode, "none") != 0);
        snprintf(ns, sizeof ns, "%d", n);
        snprintf(tag, sizeof tag, "spmdrun-bind-%s%d", mode ? mode : "default", n);
        rc = p_exit_code(p_wait(run_argv(tag, mode ? argv : dflt), 30));
        snprintf(out, sizeof out, "%s", p_read(tag, "out"));
        snprintf(err, sizeof err, "%s", p_read(tag, "err"));
        T_CHECK(rc == 0, "spmdrun --bind %s -n %d: exit %d: %s", shown, n, rc, err);
        for (i = 0; i < n; i++) {
            char key[32];
            const char *at;
            cpu_set_t want;
            snprintf(key, sizeof key, "[%d] cpus ", i);
            at = strstr(out, key);
            T_CHECK(at && parse_cpus(at + strlen(key), &got), "spmdrun --bind %s -n %d: no CPU list of process "
                    "%d in:\n%s", shown, n, i, out);
            if (!at) continue;
            if (!pins) {
                want = mine;
            } else {
                CPU_ZERO(&want);
                for (c = i * C / n; c < (i + 1) * C / n; c++) CPU_SET(allowed[c], &want);
            }
            T_CHECK(CPU_EQUAL(&got, &want), "spmdrun --bind %s -n %d: process %d runs on %s, want %d CPUs from "
                    "index %d of the allowed ones", shown, n, i, at + strlen(key), pins ? C / n : C,
                    pins ? i * C / n : 0);
        }
        T_CHECK((n > C && mode && strcmp(mode, "cpu") == 0) == (strstr(err, "not pinned") != NULL),
                "spmdrun --bind %s -n %d on %d CPUs: note %s", shown, n, C,
                strstr(err, "not pinned") ? "given" : "missing");
    }
    {
        const char *argv[] = {run, "-n", "1", "--bind", "socket", "--", "/bin/true", NULL};
        rc = p_exit_code(p_wait(run_argv("spmdrun-bindbad", argv), 20));
        T_CHECK(rc == 2 && strstr(p_read("spmdrun-bindbad", "err"), "--bind takes auto, cpu or none"),
                "spmdrun --bind socket: exit %d (want 2): %s", rc, p_read("spmdrun-bindbad", "err"));
    }
}

static void test_spmdrun(void) {
    const char *run = getenv("SPMDRUN") ? getenv("SPMDRUN") : "tools/spmdrun";
    char dir[300], script[1200];
    double t0, dt;
    int rc;
    {   /* arguments with spaces, quotes, glob characters and an empty one */
        const char *argv[] = {run, "-n", "2", "--", "/bin/sh", "-c", "printf '<%s>' \"$@\"; echo", "x", "a  b", "",
                              "c*", "d'e \"q\" $HOME", NULL};
        const char *want = "<a  b><><c*><d'e \"q\" $HOME>";
        char w0[128], w1[128];
        rc = p_exit_code(p_wait(run_argv("spmdrun-args", argv), 20));
        snprintf(w0, sizeof w0, "[0] %s\n", want);
        snprintf(w1, sizeof w1, "[1] %s\n", want);
        T_CHECK(rc == 0 && strstr(p_read("spmdrun-args", "out"), w0) && strstr(p_read("spmdrun-args", "out"), w1),
                "spmdrun arguments: exit %d, output:\n%s", rc, p_read("spmdrun-args", "out"));
    }
    {   /* process 1 fails with 7 while the others sleep: 7, at once */
        const char *argv[] = {run, "-n", "3", "--", "/bin/sh", "-c",
                              "[ $SPMD_PROCESS_ID = 1 ] && exit 7; exec sleep 30", NULL};
        t0 = p_now();
        rc = p_exit_code(p_wait(run_argv("spmdrun-exit", argv), 20));
        dt = p_now() - t0;
        T_CHECK(rc == 7 && dt < 5, "spmdrun, process 1 exits 7: exit %d after %.1f s", rc, dt);
    }
    {   /* process 0 dies of SIGKILL before spmdrun has started the others: 137, at once */
        const char *argv[] = {run, "-n", "4", "--timeout", "20", "--", "/bin/sh", "-c",
                              "[ $SPMD_PROCESS_ID = 0 ] && kill -9 $$; exec sleep 30", NULL};
        int i, bad = 0;
        for (i = 0; i < 5; i++) {
            t0 = p_now();
            rc = p_exit_code(p_wait(run_argv("spmdrun-killed", argv), 30));
            dt = p_now() - t0;
            if (rc != 128 + SIGKILL || dt > 5) {
                bad = 1;
                break;
            }
        }
        T_CHECK(!bad, "spmdrun, process 0 killed at once: exit %d after %.1f s (want %d at once)", rc, dt,
                128 + SIGKILL);
    }
    {   /* the deadline */
        const char *argv[] = {run, "-n", "2", "--timeout", "1", "--", "/bin/sleep", "30", NULL};
        t0 = p_now();
        rc = p_exit_code(p_wait(run_argv("spmdrun-deadline", argv), 20));
        dt = p_now() - t0;
        T_CHECK(rc == 124 && dt >= 0.95 && dt < 5, "spmdrun deadline 1 s: exit %d after %.1f s", rc, dt);
    }
    {   /* a grandchild that leaves the process group with the output pipe open */
        const char *argv[] = {run, "-n", "1", "--timeout", "20", "--", "/bin/sh", "-c", script, NULL};
        pid_t straggler[1];
        snprintf(dir, sizeof dir, "%s/spmdrun-straggler.d", p_logdir);
        mkdir(dir, 0755);
        snprintf(script, sizeof script, "setsid sleep 30 & echo $! > '%s/pid.0'; echo started; exit 0", dir);
        t0 = p_now();
        rc = p_exit_code(p_wait(run_argv("spmdrun-straggler", argv), 30));
        dt = p_now() - t0;
        T_CHECK(rc == 0 && dt < 5 && strstr(p_read("spmdrun-straggler", "out"), "[0] started"),
                "spmdrun with a grandchild holding its output: exit %d after %.1f s", rc, dt);
        if (read_pids(dir, 1, straggler) == 1) kill(straggler[0], SIGKILL);
    }
    test_spmdrun_signal(run, SIGTERM);
    test_spmdrun_signal(run, SIGINT);
    test_spmdrun_bind(run);
}

/* An announcement of a broken mesh as a process reads it (no sockets:
   the checks are spmd__boot_heard_broken's): kept when well formed, its
   text made printable; refused otherwise; the coordinator takes one only
   from the process it names; the last SPMD__BOOT_BROKEN_KEEP are kept. */
static int announce(spmd__boot *b, spmd__boot_conn *c, uint32_t mesh, uint32_t st, uint32_t proc, const char *text,
                    size_t len) {
    unsigned char p[12 + SPMD__BOOT_BROKEN_MAX];
    spmd__boot_msg m;
    size_t n = strlen(text);
    spmd__boot_put32(p, mesh);
    spmd__boot_put32(p + 4, st);
    spmd__boot_put32(p + 8, proc);
    memcpy(p + 12, text, n);
    memset(&m, 0, sizeof m);
    m.type = SPMD__BM_BROKEN;
    m.payload = p;
    m.len = (uint32_t)len;
    return spmd__boot_heard_broken(b, c, &m);
}

/* A bootstrap of nprocs as process `rank`, and its connection to process
   `peer` with no socket behind it: what the message handlers read. */
static void fake_conn(spmd__boot *b, spmd__boot_conn *c, int rank, int nprocs, int peer) {
    memset(b, 0, sizeof *b);
    memset(c, 0, sizeof *c);
    b->rank = rank;
    b->nprocs = nprocs;
    c->fd = -1;
    c->rank = peer;
}

static void test_broken_announcements(void) {
    spmd__boot b;
    spmd__boot_conn c, peers[3];
    spmd__boot_msg m;
    unsigned char lost[3] = {0, 0, 0}, buf[SPMD__BOOT_HDR];
    char why[160];
    const char *t = "device 4: timed out\x01";
    int i, bad;
    fake_conn(&b, &c, 1, 3, 0);
    b.lost = lost;
    T_CHECK(announce(&b, &c, 5, SPMD_ERR_TIMEOUT, 2, t, 12 + strlen(t)) == 0 && b.nbroken == 1 &&
                b.broken[0].mesh_id == 5 && b.broken[0].status == SPMD_ERR_TIMEOUT && b.broken[0].proc == 2 &&
                strcmp(b.broken[0].text, "device 4: timed out?") == 0,
            "a well-formed announcement: kept as mesh %u status %u process %u '%s'", (unsigned)b.broken[0].mesh_id,
            (unsigned)b.broken[0].status, (unsigned)b.broken[0].proc, b.broken[0].text);
    bad = (announce(&b, &c, 5, SPMD_OK, 2, t, 30) == -1) + (announce(&b, &c, 5, SPMD_STATUS_COUNT, 2, t, 30) == -1) +
          (announce(&b, &c, 5, SPMD_ERR_TIMEOUT, 3, t, 30) == -1) + (announce(&b, &c, 5, SPMD_ERR_TIMEOUT, 1, t, 30) == -1) +
          (announce(&b, &c, 5, SPMD_ERR_TIMEOUT, 2, t, 11) == -1);
    T_CHECK(bad == 5 && b.nbroken == 1, "status OK, status out of range, process out of range, itself, short: "
            "%d of 5 refused, %u kept", bad, (unsigned)b.nbroken);
    T_CHECK(announce(&b, &c, 5, SPMD_ERR_MISMATCH, 0, "again", 17) == 0 && b.nbroken == 1,
            "a second announcement about mesh 5 (from another process) is accepted but not kept: %u kept",
            (unsigned)b.nbroken);
    for (i = 0; i < SPMD__BOOT_BROKEN_KEEP + 1; i++) announce(&b, &c, 100 + (uint32_t)i, SPMD_ERR_MISMATCH, 0, "x", 13);
    T_CHECK(b.nbroken == SPMD__BOOT_BROKEN_KEEP + 2 &&
                b.broken[(SPMD__BOOT_BROKEN_KEEP + 1) % SPMD__BOOT_BROKEN_KEEP].mesh_id == 100 + SPMD__BOOT_BROKEN_KEEP,
            "the last %d are kept: %u counted", SPMD__BOOT_BROKEN_KEEP, (unsigned)b.nbroken);
    /* the coordinator: from process 1's connection, only process 1's (none passed on: no sockets) */
    b.rank = 0;
    b.nbroken = 0;
    for (i = 0; i < 3; i++) { peers[i].fd = -1; peers[i].rank = i; }
    b.peers = peers;
    c.rank = 1;
    T_CHECK(announce(&b, &c, 7, SPMD_ERR_TIMEOUT, 2, "y", 13) == -1 &&
                announce(&b, &c, 7, SPMD_ERR_TIMEOUT, 1, "y", 13) == 0 && b.nbroken == 1,
            "coordinator: another process's announcement on process 1's connection refused, its own kept");
    /* on the wire, a reason longer than SPMD__BOOT_BROKEN_MAX is refused by the parser */
    c.buf = buf;
    c.len = hdr(buf, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_BROKEN, 1, 12 + SPMD__BOOT_BROKEN_MAX + 1);
    T_CHECK(spmd__boot_parse(&b, &c, 0, &m, why, sizeof why) == -1 && strstr(why, "too large"),
            "an announcement too long: %s", why);
}

/* Process 0 of 2 (the coordinator, and a leaf of the tree: its parent is
   process 1, the root) whose connection to the parent is sv[0] (the test
   plays the parent on sv[1]); its star connection to process 1 is
   peers[1], none until the test sets one. 0, or -1 if no socket pair. */
static int leaf_of_two(spmd__boot *b, spmd__boot_conn peers[2], struct pollfd pfds[3], int sv[2]) {
    int i;
    memset(b, 0, sizeof *b);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        T_CHECK(0, "socketpair: %s", strerror(errno));
        return -1;
    }
    b->rank = 0;
    b->nprocs = 2;
    b->lost = (unsigned char *)calloc(2, 1);
    b->pfds = pfds;
    b->peers = peers;
    for (i = 0; i < 2; i++) { memset(&peers[i], 0, sizeof peers[i]); peers[i].fd = -1; peers[i].rank = i; }
    b->coord.fd = b->down[0].fd = b->down[1].fd = -1;
    spmd__boot_nonblock(sv[0]); /* as the library's own connections are */
    b->up.fd = sv[0];
    b->up.rank = 1;
    b->log_level = SPMD_LOG_OFF;
    return 0;
}

/* Every allgather message carries the exchange's number: a process whose
   parent in the tree answers another exchange (it failed one and went on)
   gets SPMD_ERR_MISMATCH saying so, not the other exchange's data. */
static void test_boot_rounds(void) {
    spmd__boot b;
    spmd__boot_conn peers[2];
    struct pollfd pfds[3];
    int sv[2], i;
    unsigned char msg[64], got[4096];
    size_t lens[2], n;
    unsigned char all[2 * 8];
    spmd_status st;
    if (leaf_of_two(&b, peers, pfds, sv) != 0) return;
    b.round = 4; /* this process began 4 exchanges; the parent answers its 7th */
    n = hdr(msg, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_DOWN, 1, 4 + 2 * 8);
    spmd__boot_put32(msg + n, 7);
    for (i = 0; i < 2; i++) {
        spmd__boot_put32(msg + n + 4 + 8 * i, (uint32_t)i);
        spmd__boot_put32(msg + n + 8 + 8 * i, 0);
    }
    T_CHECK(write(sv[1], msg, n + 20) == (ssize_t)(n + 20), "writing the answer");
    st = spmd__boot_allgather(&b, "ab", 2, all, 8, lens, spmd__now_ns() + 5000000000ull);
    T_CHECK(st == SPMD_ERR_MISMATCH && strstr(b.err, "#7") && strstr(b.err, "#5") && strstr(b.err, "out of step"),
            "an answer to another exchange: %s %s", spmd_status_name(st), b.err);
    n = (size_t)read(sv[1], got, sizeof got); /* what it sent: UP, exchange #5, its entry: process 0, 2 bytes */
    T_CHECK(n == 16 + 4 + 8 + 2 && spmd__boot_get32(got + 4) >> 16 == SPMD__BM_UP && spmd__boot_get32(got + 12) == 14 &&
                spmd__boot_get32(got + 16) == 5 && spmd__boot_get32(got + 20) == 0 && spmd__boot_get32(got + 24) == 2 &&
                memcmp(got + 28, "ab", 2) == 0,
            "its message: %zu bytes, exchange #%u", n, n >= 20 ? (unsigned)spmd__boot_get32(got + 16) : 0u);
    T_CHECK(b.sent_bytes == 30, "sent_bytes counts the 30 bytes sent: %llu", (unsigned long long)b.sent_bytes);
    spmd__free(&b.alloc, b.up.buf);
    free(b.lost);
    close(sv[0]);
    close(sv[1]);
}

/* The root of the tree returns from an allgather once it sent the table
   down, and may die at once: its answer, already here whole, is taken even
   though the loss is heard in the same wait (the star's end closed); the
   loss is recorded and the next exchange reports it. (Seen on CI: the
   process whose parent died right after answering failed its barrier.) */
static void test_answer_then_loss(void) {
    spmd__boot b;
    spmd__boot_conn peers[2];
    spmd__boot_msg m;
    struct pollfd pfds[3];
    int sv[2], star[2];
    unsigned char msg[32];
    size_t n;
    spmd_status st;
    if (leaf_of_two(&b, peers, pfds, sv) != 0) return;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, star) != 0) {
        T_CHECK(0, "socketpair: %s", strerror(errno));
        return;
    }
    spmd__boot_nonblock(star[0]);
    peers[1].fd = star[0];
    n = hdr(msg, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_DOWN, 1, 4);
    spmd__boot_put32(msg + n, 1);
    T_CHECK(write(sv[1], msg, n + 4) == (ssize_t)(n + 4), "writing the answer");
    close(star[1]); /* process 1 died after answering */
    st = spmd__boot_await(&b, &b.up, SPMD__BM_DOWN, &m, spmd__now_ns() + 5000000000ull, "allgather");
    T_CHECK(st == SPMD_OK && m.type == SPMD__BM_DOWN && m.len == 4 && spmd__boot_get32(m.payload) == 1,
            "the answer that came before the loss: %s %s", spmd_status_name(st), b.err);
    T_CHECK(b.lost[1] == 1 && b.nlost == 1, "the loss is recorded: lost[1] %d, %d lost", b.lost[1], b.nlost);
    st = spmd__boot_barrier(&b, spmd__now_ns() + 5000000000ull);
    T_CHECK(st == SPMD_ERR_PEER_LOST && strstr(b.err, "process 1 lost"), "the next exchange: %s %s",
            spmd_status_name(st), b.err);
    spmd__free(&b.alloc, b.up.buf);
    free(b.lost);
    close(sv[0]);
    close(sv[1]);
}

/* The answer to a handshake with a parent in the tree (process 3 here):
   its REJECT carries its own process id and the reason reaches the child
   (SPMD_ERR_INVALID); a WELCOME that claims another process is refused. */
static void test_tree_answer(void) {
    spmd__boot b;
    spmd__boot_conn c;
    unsigned char buf[64];
    spmd_status st = SPMD_OK;
    size_t n;
    int rc;
    fake_conn(&b, &c, 7, 8, 3);
    b.log_level = SPMD_LOG_OFF;
    c.buf = buf;
    n = hdr(buf, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_REJECT, 3, 8);
    memcpy(buf + n, "go away\n", 8);
    c.len = c.cap = n + 8;
    rc = spmd__boot_answer(&b, &c, &st);
    T_CHECK(rc == -1 && st == SPMD_ERR_INVALID && strstr(b.err, "parent in the tree") && strstr(b.err, "go away?"),
            "a REJECT from the parent: %d %s %s", rc, spmd_status_name(st), b.err);
    c.len = c.cap = hdr(buf, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_WELCOME, 2, 0);
    rc = spmd__boot_answer(&b, &c, &st);
    T_CHECK(rc == -1 && st == SPMD_ERR_SYSTEM && strstr(b.err, "as process 2"), "a WELCOME from process 2 on the "
            "connection to 3: %d %s %s", rc, spmd_status_name(st), b.err);
    c.len = c.cap = hdr(buf, SPMD__BOOT_MAGIC, SPMD__BOOT_VERSION, SPMD__BM_WELCOME, 3, 0);
    T_CHECK(spmd__boot_answer(&b, &c, &st) == 1 && c.len == 0, "a WELCOME from process 3: taken");
}

int main(int argc, char **argv) {
    p_self = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    test_broken_announcements();
    test_boot_rounds();
    test_answer_then_loss();
    test_tree_answer();
    test_layouts();
    test_jobs();
    test_bytes();
    test_killmid();
    test_wrong_key();
    test_garbage();
    test_tree_garbage();
    test_no_coordinator();
    test_spmdrun();
    return t_summary();
}
