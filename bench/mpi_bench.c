/* mpi_bench.c - the MPI counterpart of bench.c: the same collectives with
   MPI, measured exactly as bench.c measures spmdcoll, so the rows line up
   (same sizes, size column, busbw, memcpy floor, warm-up, iteration rule,
   repetitions, median, columns; bench_common.h holds what they share).

   THE COLLECTIVES (-c, f32, sum; G = ranks, S = the size column)
     psum          MPI_Allreduce
     all_gather    MPI_Allgather, S/G elements from each rank
     psum_scatter  MPI_Reduce_scatter_block, S/G elements to each rank
     all_to_all    MPI_Alltoall, S/G elements to each rank
     bcast         MPI_Bcast from rank 0 (the root sends from its send
                   buffer; MPI's broadcast has one buffer, so unlike
                   spmd_bcast the root does not copy into its recv)
     reduce        MPI_Reduce to rank 0
     ppermute      MPI_Sendrecv on the ring i -> i+1
     barrier       MPI_Barrier
     all           each in turn

   WHAT IS MEASURED AND HOW
     One process per rank (start it with mpirun -np N). For each size S
     (-b .. -e, times -f):
       1. warm-up: -w ops, or (default) the calibration rounds of step 2;
       2. the iteration count: -n, or (default) rank 0 times rounds of
          back-to-back ops until one round takes 20 ms and picks the count
          that makes one repetition last 0.25 s / -r (broadcast to all);
       3. the memcpy floor is prepared the same way (bench_common.h: B
          bytes per rank, every rank at once, send buffer to receive buffer);
       4. -r repetitions, each: the memcpy timed, the receive buffer
          poisoned (untimed), the collective timed. Timing one: MPI_Barrier,
          timer started on rank 0, `iters` back-to-back ops, MPI_Barrier,
          timer stopped; time per op = elapsed / iters; medians reported;
       5. verification of the last repetition's result on every rank that
          receives one (integer-valued f32 inputs: sums are exact whatever
          order MPI adds in; moved values are 24-bit integers that depend on
          the sender and the index).
     Columns as bench.c: coll, size, count, dtype, op, iters, time (us),
     algbw = S / time, busbw = algbw * factor, floor (B), memcpy (us),
     time / memcpy.

   BUILD AND RUN (from the repository root)
     mpicc -O3 -std=c11 bench/mpi_bench.c -o build/mpi_bench -lm
     mpirun --oversubscribe --allow-run-as-root -np 2 --mca btl self,vader build/mpi_bench -c all
*/
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_common.h"

typedef struct config {
    size_t min_bytes, max_bytes;
    long factor, warmup, iters;   /* warmup -1, iters 0: auto */
    int reps, csv;
    coll_id coll;                 /* COLL_ALL: each in turn */
    char cmdline[1024];
} config;

typedef struct job {
    coll_id coll;
    size_t count;                 /* elements of S */
    size_t bytes;                 /* S */
    size_t copy_bytes;            /* the memcpy floor, per rank */
} job;

typedef struct ctx {
    const config *cfg;
    int rank, nranks;
    float *send, *recv;
    size_t cap;                   /* bytes of each buffer */
    int filled_tags;              /* send holds: 0 sum values, 1 movement values, -1 nothing */
    float *sums;                  /* PATTERN expected sums */
    float *tags;                  /* scratch: PATTERN movement values of one rank */
    double rep_s[MAX_REPS], copy_s[MAX_REPS];
    bench_timer tm;               /* the timing rule's hooks (timer_init) */
} ctx;

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs("usage: mpirun -np N mpi_bench [-c COLL] [-b SIZE] [-e SIZE] [-f N] [-w N] [-n N] [-r N] [--csv]\n"
          "  COLL: psum (default) all_gather psum_scatter all_to_all bcast reduce ppermute barrier all\n"
          "        (or the MPI-style names allreduce allgather reduce_scatter alltoall ...)\n"
          "  sizes S with K M G suffixes (powers of 1024), as bench.c; f32, sum\n",
          f);
}

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "mpi_bench: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void parse_option(config *cfg, char opt, const char *v)
{
    switch (opt) {
    case 'b': cfg->min_bytes = parse_size(v); break;
    case 'e': cfg->max_bytes = parse_size(v); break;
    case 'f': cfg->factor = parse_long(v, 2, 1024); break;
    case 'w': cfg->warmup = parse_long(v, 0, MAX_ITERS); break;
    case 'n': cfg->iters = parse_long(v, 1, MAX_ITERS); break;
    case 'r': cfg->reps = (int)parse_long(v, 1, MAX_REPS); break;
    case 'c': cfg->coll = parse_coll(v); break;
    default: usage(stderr); die("%s", "bad option");
    }
}

static void parse_args(config *cfg, int argc, char **argv)
{
    *cfg = (config){.min_bytes = 8, .max_bytes = (size_t)256 << 20, .factor = 2, .warmup = -1, .reps = 5,
                    .coll = COLL_PSUM};
    join_args(cfg->cmdline, sizeof cfg->cmdline, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--csv") == 0) cfg->csv = 1;
        else if (a[0] == '-' && a[1] != '\0' && a[1] != '-') {
            const char *v = a[2] ? a + 2 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) die("option %s needs a value", a);
            parse_option(cfg, a[1], v);
        } else {
            usage(stderr);
            die("bad argument '%s'", a);
        }
    }
    if (cfg->min_bytes > cfg->max_bytes) die("%s", "-b is larger than -e");
}

/* ---- data ---------------------------------------------------------------- */

static float tag(int rank, size_t r)
{
    return (float)tag_value(rank, r, 24, 1);
}

static int alloc_buffers(ctx *c, size_t cap)
{
    c->cap = cap;
    c->filled_tags = -1;
    if (posix_memalign((void **)&c->send, 4096, cap ? cap : 1)) c->send = NULL;
    if (posix_memalign((void **)&c->recv, 4096, cap ? cap : 1)) c->recv = NULL;
    c->sums = malloc(PATTERN * sizeof(float));
    c->tags = malloc(PATTERN * sizeof(float));
    if (!c->send || !c->recv || !c->sums || !c->tags) return 0;
    memset(c->send, 0, cap);       /* fault the pages in now, not while timing */
    memset(c->recv, 0, cap);
    for (size_t r = 0; r < PATTERN; r++) {
        float s = 0;
        for (int d = 0; d < c->nranks; d++) s += (float)small_value(d, r);
        c->sums[r] = s;
    }
    return 1;
}

/* The whole send buffer: sum values, or movement values (tags). */
static void fill_send(ctx *c, int tags)
{
    size_t n = c->cap / sizeof(float), have;
    if (c->filled_tags == tags) return;
    for (size_t i = 0; i < n && i < PATTERN; i++) c->send[i] = tags ? tag(c->rank, i) : (float)small_value(c->rank, i);
    for (have = n < PATTERN ? n : PATTERN; have < n;) {
        size_t k = have < n - have ? have : n - have;
        memcpy(c->send + have, c->send, k * sizeof(float));
        have += k;
    }
    c->filled_tags = tags;
}

static void report_wrong(const ctx *c, const job *j, size_t elem, float got, float want)
{
    fprintf(stderr, "mpi_bench: WRONG RESULT: %s count %zu rank %d element %zu: got %.9g, expected %.9g\n",
            COLLS[j->coll].name, j->count, c->rank, elem, (double)got, (double)want);
}

static int verify_sum(const ctx *c, const job *j)
{
    size_t n = recv_elems(j->coll, j->count, c->nranks);
    size_t start = j->coll == COLL_PSUM_SCATTER ? (size_t)c->rank * n : 0, bad;
    if (j->coll == COLL_REDUCE && c->rank != 0) return 1;   /* no result off the root */
    bad = first_mismatch((const unsigned char *)c->recv, (const unsigned char *)c->sums, 4, start, n);
    if (bad == SIZE_MAX) return 1;
    report_wrong(c, j, bad, c->recv[bad], c->sums[(start + bad) % PATTERN]);
    return 0;
}

/* Each block of the output against the sender's values it must be. */
static int verify_moved(ctx *c, const job *j)
{
    int nb = COLLS[j->coll].blocks ? c->nranks : 1;
    size_t m = j->count / (size_t)nb;
    if (j->coll == COLL_BCAST && c->rank == 0) return 1;    /* the root's recv is not written */
    for (int t = 0; t < nb; t++) {
        int src = block_source(j->coll, c->rank, t, c->nranks);
        size_t start = block_start(j->coll, c->rank, m), n = m < PATTERN ? m : PATTERN, bad;
        for (size_t k = 0; k < n; k++) c->tags[(start + k) % PATTERN] = tag(src, (start + k) % PATTERN);
        const float *got = c->recv + (size_t)t * m;
        bad = first_mismatch((const unsigned char *)got, (const unsigned char *)c->tags, 4, start, m);
        if (bad == SIZE_MAX) continue;
        report_wrong(c, j, (size_t)t * m + bad, got[bad], c->tags[(start + bad) % PATTERN]);
        return 0;
    }
    return 1;
}

static int verify(ctx *c, const job *j)
{
    if (j->coll == COLL_BARRIER) return 1;
    return COLLS[j->coll].reduces ? verify_sum(c, j) : verify_moved(c, j);
}

/* ---- the operations ----------------------------------------------------------- */

static void run_coll(ctx *c, const job *j)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int g = c->nranks, n = (int)j->count, b = n / g, next = (c->rank + 1) % g, prev = (c->rank + g - 1) % g;
    switch (j->coll) {
    case COLL_PSUM: MPI_Allreduce(c->send, c->recv, n, MPI_FLOAT, MPI_SUM, w); break;
    case COLL_ALL_GATHER: MPI_Allgather(c->send, b, MPI_FLOAT, c->recv, b, MPI_FLOAT, w); break;
    case COLL_PSUM_SCATTER: MPI_Reduce_scatter_block(c->send, c->recv, b, MPI_FLOAT, MPI_SUM, w); break;
    case COLL_ALL_TO_ALL: MPI_Alltoall(c->send, b, MPI_FLOAT, c->recv, b, MPI_FLOAT, w); break;
    case COLL_BCAST: MPI_Bcast(c->rank == 0 ? c->send : c->recv, n, MPI_FLOAT, 0, w); break;
    case COLL_REDUCE: MPI_Reduce(c->send, c->recv, n, MPI_FLOAT, MPI_SUM, 0, w); break;
    case COLL_PPERMUTE:
        MPI_Sendrecv(c->send, n, MPI_FLOAT, next, 0, c->recv, n, MPI_FLOAT, prev, 0, w, MPI_STATUS_IGNORE);
        break;
    default: MPI_Barrier(w); break;
    }
}

/* ---- timing: a rank's part in bench_common.h's rule ------------------------------- */

static void tm_coll(void *p, const void *j) { run_coll(p, j); }
static void tm_sync(void *p) { (void)p; MPI_Barrier(MPI_COMM_WORLD); }

static long tm_share(void *p, long v)
{
    (void)p;
    MPI_Bcast(&v, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return v;
}

static void tm_poison(void *p, const void *jp)
{
    ctx *c = p;
    const job *j = jp;
    memset(c->recv, 0xA5, recv_elems(j->coll, j->count, c->nranks) * sizeof(float));
}

/* Rank c's hooks for the timing rule, once its buffers exist. */
static void timer_init(ctx *c)
{
    const config *cfg = c->cfg;
    c->tm = (bench_timer){.c = c, .leader = c->rank == 0, .warmup = cfg->warmup, .iters = cfg->iters,
                          .reps = cfg->reps, .send = c->send, .recv = c->recv, .rep_s = c->rep_s,
                          .copy_s = c->copy_s, .coll = tm_coll, .sync = tm_sync, .share = tm_share,
                          .poison = tm_poison};
}

/* ---- output -------------------------------------------------------------- */

static void print_header(const config *cfg, int nranks)
{
    char date[64], lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    printf("# mpi_bench: %s\n", cfg->cmdline);
    printf("# ranks: %d (processes), cpus: %ld online, date: %s\n", nranks, sysconf(_SC_NPROCESSORS_ONLN), date);
    printf("# %s, %s, f32, reps %d (median), iters %s, warm-up %s\n", lib,
           cfg->coll == COLL_ALL ? "every collective" : COLLS[cfg->coll].mpi, cfg->reps,
           cfg->iters ? "fixed (-n)" : "auto",
           cfg->warmup >= 0 ? "fixed (-w)" : cfg->iters ? "5 ops" : "calibration rounds");
    print_loadavg();
    if (cfg->csv)
        puts("coll,size,count,dtype,op,iters,time_us,algbw_gbs,busbw_gbs,floor_bytes,memcpy_us,ratio_memcpy,check");
    fflush(stdout);
}

static void print_columns(const config *cfg, coll_id coll)
{
    print_coll_legend(coll, 1);
    if (!cfg->csv)
        printf("# %-12s %11s %11s %5s %4s %9s %11s %11s %11s %11s %11s %9s %5s\n", "coll", "size(B)", "count",
               "dtype", "op", "iters", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "floor(B)", "memcpy(us)",
               "t/memcpy", "check");
    fflush(stdout);
}

static void print_row(const config *cfg, int nranks, const job *j, const result *res)
{
    const char *op = COLLS[j->coll].reduces ? "sum" : "-";
    double t = res->t, alg = (double)j->bytes / t / 1e9, bus = alg * busbw_factor(j->coll, nranks);
    if (cfg->csv)
        printf("%s,%zu,%zu,f32,%s,%ld,%.4f,%.4f,%.4f,%zu,%.4f,%.3f,ok\n", COLLS[j->coll].name, j->bytes, j->count,
               op, res->iters, t * 1e6, alg, bus, j->copy_bytes, res->tcopy * 1e6, t / res->tcopy);
    else
        printf("  %-12s %11zu %11zu %5s %4s %9ld %11.3f %11.3f %11.3f %11zu %11.3f %9.2f %5s\n",
               COLLS[j->coll].name, j->bytes, j->count, "f32", op, res->iters, t * 1e6, alg, bus, j->copy_bytes,
               res->tcopy * 1e6, t / res->tcopy, "ok");
    fflush(stdout);
}

static void print_barrier_row(const config *cfg, const result *res)
{
    if (cfg->csv) printf("barrier,0,0,-,-,%ld,%.4f,,,,,,ok\n", res->iters, res->t * 1e6);
    else
        printf("  %-12s %11d %11d %5s %4s %9ld %11.3f %11s %11s %11s %11s %9s %5s\n", "barrier", 0, 0, "-", "-",
               res->iters, res->t * 1e6, "-", "-", "-", "-", "-", "ok");
    fflush(stdout);
}

/* ---- main ---------------------------------------------------------------- */

/* One size: time with the memcpy floor, verify (all ranks agree), print. */
static int bench_size(ctx *c, coll_id coll, size_t bytes)
{
    size_t count = coll_count(coll, bytes, sizeof(float), c->nranks);
    job j = {coll, count, count * sizeof(float), floor_bytes(coll, count * sizeof(float), c->nranks)};
    int ok, all;
    if (count == 0) return 1;
    if (count > INT_MAX) die("%s", "size too large for an MPI count");
    fill_send(c, !COLLS[coll].reduces);
    result res = bench_measure_pair(&c->tm, &j, j.copy_bytes, COLL_BUDGET_S, COPY_BUDGET_S);
    ok = verify(c, &j);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) return 0;
    if (c->rank == 0) print_row(c->cfg, c->nranks, &j, &res);
    return 1;
}

/* Every size of one collective; 0 if a result was wrong. */
static int run_sizes(ctx *c, coll_id coll)
{
    const config *cfg = c->cfg;
    if (c->rank == 0) print_columns(cfg, coll);
    if (coll == COLL_BARRIER) {
        job j = {COLL_BARRIER, 0, 0, 0};
        result res = bench_measure_one(&c->tm, &j, COLL_BUDGET_S);
        if (c->rank == 0) print_barrier_row(cfg, &res);
        return 1;
    }
    for (size_t b = cfg->min_bytes; b <= cfg->max_bytes; b *= (size_t)cfg->factor) {
        if (!bench_size(c, coll, b)) return 0;
        if (b == 0) break;
    }
    return 1;
}

int main(int argc, char **argv)
{
    config cfg;
    ctx c = {.cfg = &cfg};
    int rc = 0, ok, all;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    parse_args(&cfg, argc, argv);
    ok = alloc_buffers(&c, cfg.coll == COLL_BARRIER ? 0 : cfg.max_bytes);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) die("%s", "cannot allocate the buffers");
    timer_init(&c);
    if (c.rank == 0) print_header(&cfg, c.nranks);
    cpu_sample before = cpu_sample_now();
    for (int k = 0; k < COLL_COUNT && !rc; k++)
        if ((cfg.coll == COLL_ALL || cfg.coll == (coll_id)k) && !run_sizes(&c, (coll_id)k)) rc = 1;
    cpu_sample after = cpu_sample_now();
    double mine = after.self_s - before.self_s, ours = 0;
    MPI_Reduce(&mine, &ours, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (c.rank == 0) print_cpu_use(&before, &after, ours);
    if (rc && c.rank == 0) fprintf(stderr, "mpi_bench: FAILED (see above)\n");
    free(c.send);
    free(c.recv);
    free(c.sums);
    free(c.tags);
    MPI_Finalize();
    return rc;
}
