/* bench_common.h - what bench.c (spmdcoll) and mpi_bench.c (MPI) share, so
   that a row of one means what the same row of the other means:

     - the collectives: names, the size column, the busbw factor and the
       memcpy floor (see THE COLLECTIVES below);
     - the input values (integers, so every result is exact);
     - the timing rule: calibration of the iteration count, barrier-timed
       repetitions, median (bench_measure_pair and the functions it calls);
     - the report of other work on the machine during a run.

   Header only, every function static; the including file defines
   die(fmt, arg) (print and exit) and includes its system headers first.

   THE COLLECTIVES (S = the size column in bytes, G = group size)
     The size column follows nccl-tests: the buffer whose size names the
     operation. Counts are rounded down to a multiple of G where the buffer
     is cut into G blocks.

     -c name       spmdcoll             MPI                      S is              busbw/algbw
     psum          spmd_allreduce       MPI_Allreduce            each buffer       2(G-1)/G
     all_gather    spmd_all_gather      MPI_Allgather            the output        (G-1)/G
     psum_scatter  spmd_psum_scatter    MPI_Reduce_scatter_block the input         (G-1)/G
     all_to_all    spmd_all_to_all      MPI_Alltoall             each buffer       (G-1)/G
     bcast         spmd_bcast (root 0)  MPI_Bcast                the buffer        1
     reduce        spmd_reduce (root 0) MPI_Reduce               the buffer        1
     ppermute      spmd_ppermute        MPI_Sendrecv             each buffer       1
                   (ring i -> i+1)      (ring i -> i+1)
     (all_gather, psum_scatter, all_to_all are JAX-tiled on 1-D arrays:
     split = concat = 0.)

   THE MEMCPY FLOOR: the bytes the collective must move per device
     Out of place, every input byte must be read at least once and every
     output byte written once, by some device. With that work shared evenly
     by the G devices, a device reads R and writes W bytes; a memcpy of B
     bytes reads B and writes B, so the floor is a memcpy of

         B = (R + W) / 2 bytes, done by all G device threads at once,

     timed interleaved with the collective (same machine state). Per device:

     psum          R = S (G slices of S/G)   W = S (its slice to G outputs) B = S
     all_gather    R = S/G (its own block)   W = S (the whole output)     B = S(G+1)/(2G)
     psum_scatter  R = S (its whole input)   W = S/G (its chunk)          B = S(G+1)/(2G)
     all_to_all    R = S                     W = S                        B = S
     bcast         R = S/G (root's buffer    W = S (every recv, the       B = S(G+1)/(2G)
                   read once, shared)        root's too: out of place)
     reduce        R = S (all inputs once,   W = S/G (the root's result,  B = S(G+1)/(2G)
                   shared)                   shared)
     ppermute      R = S                     W = S                        B = S

     all_gather counts the device's own block: out of place, it must be
     copied into the output too (W = S, of which (G-1)/G is others' data).
     A time / memcpy of 1 means the collective moved its data as fast as a
     memcpy moves the same bytes; below 1 is possible (memcpy writes cost a
     read for ownership that reads do not), far above 1 is overhead.
*/
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#define BENCH_FN static __attribute__((unused))

#define MAX_REPS 101
#define MAX_ITERS 10000000L
#define CALIB_S 0.02              /* a calibration round this long is trusted */
#define COLL_BUDGET_S 0.25        /* timed collective ops per size, all repetitions */
#define COPY_BUDGET_S 0.08        /* timed memcpy per size, all repetitions */
#define PATTERN 65537             /* input period in elements: a prime, so no
                                     power-of-two shift of the data looks right */

static void die(const char *fmt, const char *arg);

/* ---- the collectives ------------------------------------------------------ */

typedef enum coll_id {
    COLL_PSUM, COLL_ALL_GATHER, COLL_PSUM_SCATTER, COLL_ALL_TO_ALL, COLL_BCAST, COLL_REDUCE,
    COLL_PPERMUTE, COLL_BARRIER,
    COLL_COUNT,
    COLL_ALL = COLL_COUNT         /* -c all */
} coll_id;

typedef struct coll_info {
    const char *name;             /* -c name */
    const char *alias;            /* the MPI-style name, also accepted by -c */
    const char *ours, *mpi;       /* the calls measured */
    const char *size_is;          /* what the size column is */
    const char *busbw_is;         /* busbw / algbw */
    const char *floor_is;         /* memcpy floor bytes per device */
    int blocks;                   /* the buffer is cut into G blocks */
    int reduces;                  /* combines values (else moves them) */
} coll_info;

static const coll_info COLLS[COLL_COUNT] = {
    {"psum", "allreduce", "spmd_allreduce", "MPI_Allreduce", "each device's buffer", "2(G-1)/G", "S", 0, 1},
    {"all_gather", "allgather", "spmd_all_gather (tiled, 1-D)", "MPI_Allgather", "the gathered output",
     "(G-1)/G", "S(G+1)/(2G)", 1, 0},
    {"psum_scatter", "reduce_scatter", "spmd_psum_scatter (tiled, 1-D)", "MPI_Reduce_scatter_block",
     "the input (reduced buffer)", "(G-1)/G", "S(G+1)/(2G)", 1, 1},
    {"all_to_all", "alltoall", "spmd_all_to_all (tiled, 1-D, split=concat=0)", "MPI_Alltoall",
     "each device's buffer", "(G-1)/G", "S", 1, 0},
    {"bcast", "broadcast", "spmd_bcast (root 0)", "MPI_Bcast (root 0)", "the buffer", "1", "S(G+1)/(2G)", 0, 0},
    {"reduce", "reduce", "spmd_reduce (root 0)", "MPI_Reduce (root 0)", "the buffer", "1", "S(G+1)/(2G)", 0, 1},
    {"ppermute", "sendrecv", "spmd_ppermute (ring i->i+1)", "MPI_Sendrecv (ring i->i+1)", "each device's buffer",
     "1", "S", 0, 0},
    {"barrier", "barrier", "spmd_barrier", "MPI_Barrier", "-", "-", "-", 0, 0},
};

/* "psum", "allreduce", ... -> its id; "all" -> COLL_ALL. */
BENCH_FN coll_id parse_coll(const char *s)
{
    if (strcmp(s, "all") == 0) return COLL_ALL;
    for (int c = 0; c < COLL_COUNT; c++)
        if (strcmp(s, COLLS[c].name) == 0 || strcmp(s, COLLS[c].alias) == 0) return (coll_id)c;
    die("unknown collective '%s' (psum all_gather psum_scatter all_to_all bcast reduce ppermute barrier all)", s);
    return COLL_PSUM;
}

BENCH_FN double busbw_factor(coll_id c, int g)
{
    switch (c) {
    case COLL_PSUM: return 2.0 * (g - 1) / g;
    case COLL_ALL_GATHER: case COLL_PSUM_SCATTER: case COLL_ALL_TO_ALL: return (double)(g - 1) / g;
    case COLL_BARRIER: return 0;
    default: return 1;
    }
}

/* The memcpy floor: bytes each device thread copies (see the table above). */
BENCH_FN size_t floor_bytes(coll_id c, size_t s, int g)
{
    switch (c) {
    case COLL_ALL_GATHER: case COLL_PSUM_SCATTER: case COLL_BCAST: case COLL_REDUCE:
        return s / (size_t)g * (size_t)(g + 1) / 2;
    case COLL_BARRIER: return 0;
    default: return s;
    }
}

/* Elements of the size column's buffer for a requested size in bytes. */
BENCH_FN size_t coll_count(coll_id c, size_t bytes, size_t elem, int g)
{
    size_t n = bytes / elem;
    return COLLS[c].blocks ? n / (size_t)g * (size_t)g : n;
}

/* Elements of each device's input and output for a count. */
BENCH_FN size_t send_elems(coll_id c, size_t count, int g)
{
    return c == COLL_ALL_GATHER ? count / (size_t)g : count;
}

BENCH_FN size_t recv_elems(coll_id c, size_t count, int g)
{
    return c == COLL_PSUM_SCATTER ? count / (size_t)g : count;
}

/* Whose block t (0..G-1) of device i's output comes from, and where in the
   sender's input (in elements) it starts; m = the block length. Only for the
   operations that move data. */
BENCH_FN int block_source(coll_id c, int i, int t, int g)
{
    switch (c) {
    case COLL_BCAST: return 0;
    case COLL_PPERMUTE: return (i + g - 1) % g;
    default: return t;            /* all_gather, all_to_all: block t is from device t */
    }
}

BENCH_FN size_t block_start(coll_id c, int i, size_t m)
{
    return c == COLL_ALL_TO_ALL ? (size_t)i * m : 0;
}

/* ---- input values ---------------------------------------------------------- */

BENCH_FN uint32_t mix(uint32_t r, uint32_t d)
{
    uint32_t x = r * 2654435761u ^ (d + 1) * 2246822519u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    x *= 3266489917u;
    return x ^ (x >> 16);
}

/* Value of device d at element r for the reductions: an integer in -5..5,
   so sums over up to 4096 devices are exact in f32 (and in f16 for a few). */
BENCH_FN int64_t small_value(int d, size_t r)
{
    return (int64_t)(mix((uint32_t)r, (uint32_t)d) % 11) - 5;
}

/* Value of device d at element r for the operations that move data: bits
   wide (a misplaced element is caught with probability 1 - 2^-bits), signed
   when sgn, so that it is exact in the dtype (f32: 24 bits). */
BENCH_FN int64_t tag_value(int d, size_t r, int bits, int sgn)
{
    uint64_t v = mix((uint32_t)r ^ 0x5bd1e995u, (uint32_t)d + 7919u);
    v = (v ^ ((uint64_t)mix((uint32_t)d, (uint32_t)r) << 32)) & ((UINT64_C(1) << bits) - 1);
    return sgn ? (int64_t)v - ((int64_t)1 << (bits - 1)) : (int64_t)v;
}

/* First index t < len where got[t] differs from pat[(start + t) % PATTERN],
   elements of es bytes; SIZE_MAX if none. */
BENCH_FN size_t first_mismatch(const unsigned char *got, const unsigned char *pat, size_t es, size_t start,
                               size_t len)
{
    for (size_t t = 0; t < len;) {
        size_t r = (start + t) % PATTERN, run = PATTERN - r;
        if (run > len - t) run = len - t;
        if (memcmp(got + t * es, pat + r * es, run * es) != 0)
            for (size_t k = 0;; k++)
                if (memcmp(got + (t + k) * es, pat + (r + k) * es, es) != 0) return t + k;
        t += run;
    }
    return SIZE_MAX;
}

/* ---- options --------------------------------------------------------------- */

BENCH_FN size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end), mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    }
    if (end == s || *end != '\0' || v < 0 || v * mult > 64.0 * 1024 * 1024 * 1024) die("bad size '%s'", s);
    return (size_t)(v * mult);
}

BENCH_FN long parse_long(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) die("bad number '%s'", s);
    return v;
}

BENCH_FN void join_args(char *buf, size_t cap, int argc, char **argv)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < argc && n + 2 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? " " : "", argv[i]);
}

/* ---- timing ------------------------------------------------------------------ */

BENCH_FN double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

BENCH_FN int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (v is sorted in place). */
BENCH_FN double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The iteration rule: after a calibration round of n ops that took t s,
   the next round's count, or minus the iteration count once a round lasted
   CALIB_S (a first long round is run again: it may have been cold); the
   count makes one repetition last rep_budget s (at least one op). */
BENCH_FN long next_round(long n, double t, int round, double rep_budget)
{
    if ((t >= CALIB_S && round >= 2) || n >= MAX_ITERS) {
        double it = rep_budget / (t / (double)n);
        return -(it < 1 ? 1 : it > MAX_ITERS ? MAX_ITERS : (long)(it + 0.5));
    }
    if (t >= CALIB_S) return n;
    double grow = t > 0 ? 1.5 * CALIB_S / t : 100;
    long next = (long)((double)n * (grow > 100 ? 100 : grow));
    return next <= n ? n + 1 : next > MAX_ITERS ? MAX_ITERS : next;
}

/* ---- the timing rule, run ---------------------------------------------------
   Warm-up, the iteration count, barrier-timed repetitions and their
   medians, the same in both programs. A bench_timer brings in what differs:
   one op of a collective, a barrier over every device (rank), and device
   0's decision reaching the others. A job is the program's own; NULL
   stands for the memcpy floor. */

typedef struct bench_timer {
    void *c;                                /* the program's context: a device's, a rank's */
    int leader;                             /* device 0 (rank 0): decides the counts, keeps the times */
    long warmup, iters;                     /* -w (-1: the calibration rounds), -n (0: calibrated) */
    int reps;                               /* -r */
    const void *send;                       /* the memcpy floor copies from send to recv */
    void *recv;
    double *rep_s, *copy_s;                 /* MAX_REPS repetition times each, written by the leader */
    void (*coll)(void *c, const void *j);   /* one op of the collective job j */
    void (*sync)(void *c);                  /* a barrier over every device */
    long (*share)(void *c, long v);         /* the leader's v, on every device */
    void (*poison)(void *c, const void *j); /* j's receive buffer poisoned (untimed) */
} bench_timer;

typedef struct result {
    double t, tcopy;                        /* median seconds per op (the leader only) */
    long iters, citers;                     /* ops per repetition: the collective, the memcpy */
} result;

/* n back-to-back ops: collective j, or (j NULL) memcpys of copy bytes. */
BENCH_FN void bench_ops(const bench_timer *t, const void *j, size_t copy, long n)
{
    for (long k = 0; k < n; k++) {
        if (j) {
            t->coll(t->c, j);
        } else {
            memcpy(t->recv, t->send, copy);
            __asm__ __volatile__("" ::: "memory");   /* keep every copy */
        }
    }
}

/* barrier, n ops, barrier: the elapsed seconds (the leader's are used). */
BENCH_FN double bench_timed(const bench_timer *t, const void *j, size_t copy, long n)
{
    t->sync(t->c);
    double t0 = now_s();
    bench_ops(t, j, copy, n);
    t->sync(t->c);
    return now_s() - t0;
}

/* Rounds of next_round until the leader settles; its count, on every device. */
BENCH_FN long bench_calibrate(const bench_timer *t, const void *j, size_t copy, double rep_budget)
{
    long n = 1;
    for (int round = 1;; round++) {
        double s = bench_timed(t, j, copy, n);
        long v = t->share(t->c, t->leader ? next_round(n, s, round, rep_budget) : 0);
        if (v < 0) return -v;
        n = v;
    }
}

/* Warm-up, then the iteration count (-n, or calibrated so that all the
   repetitions take budget s); the same on every device. */
BENCH_FN long bench_iteration_count(const bench_timer *t, const void *j, size_t copy, double budget)
{
    bench_ops(t, j, copy, t->warmup >= 0 ? t->warmup : t->iters > 0 ? 5 : 0);
    return t->iters > 0 ? t->iters : bench_calibrate(t, j, copy, budget / t->reps);
}

/* Times collective j alone (the barrier: no floor). */
BENCH_FN result bench_measure_one(const bench_timer *t, const void *j, double budget)
{
    result res = {0, 0, bench_iteration_count(t, j, 0, budget), 0};
    for (int k = 0; k < t->reps; k++) {
        double s = bench_timed(t, j, 0, res.iters);
        if (t->leader) t->rep_s[k] = s / (double)res.iters;
    }
    if (t->leader) res.t = median(t->rep_s, t->reps);
    return res;
}

/* Times collective j and its memcpy floor of copy bytes, repetitions
   interleaved (recv poisoned before each collective's); recv is left
   holding the result of the last timed op. */
BENCH_FN result bench_measure_pair(const bench_timer *t, const void *j, size_t copy, double budget,
                                   double copy_budget)
{
    result res = {0, 0, 0, bench_iteration_count(t, NULL, copy, copy_budget)};
    res.iters = bench_iteration_count(t, j, 0, budget);
    for (int k = 0; k < t->reps; k++) {
        double tc = bench_timed(t, NULL, copy, res.citers);
        t->poison(t->c, j);
        double tj = bench_timed(t, j, 0, res.iters);
        if (t->leader) {
            t->copy_s[k] = tc / (double)res.citers;
            t->rep_s[k] = tj / (double)res.iters;
        }
    }
    if (t->leader) {
        res.t = median(t->rep_s, t->reps);
        res.tcopy = median(t->copy_s, t->reps);
    }
    return res;
}

/* ---- other work on the machine ----------------------------------------------
   Other processes make every number noisy (on 2 CPUs, one busy CPU puts both
   device threads on the other): the output says how much CPU time other
   processes used during the run, from /proc/stat minus our own rusage. */

typedef struct cpu_sample {
    unsigned long long busy, total;   /* jiffies of all CPUs */
    unsigned long long nice;          /* of busy: processes at a lower priority */
    double self_s;                    /* CPU seconds of this process */
    int ok;
} cpu_sample;

BENCH_FN cpu_sample cpu_sample_now(void)
{
    cpu_sample c = {0, 0, 0, 0, 0};
    unsigned long long v[8] = {0};
    struct rusage ru;
    FILE *f = fopen("/proc/stat", "r");
    int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7])
              : 0;
    if (f) fclose(f);
    getrusage(RUSAGE_SELF, &ru);
    c.self_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    c.total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    c.busy = c.total - v[3] - v[4];             /* minus idle and iowait */
    c.nice = v[1];
    c.ok = n >= 5;
    return c;
}

/* self_s: CPU seconds of everything we ran between a and b. Returns the
   share of all CPU time other processes took (-1 if unknown). Work at a
   lower priority (nice > 0, e.g. a background build) is told apart: it
   yields the CPU to us, but still takes cache and memory bandwidth. */
BENCH_FN double print_cpu_use(const cpu_sample *a, const cpu_sample *b, double self_s)
{
    double hz = (double)sysconf(_SC_CLK_TCK), total, busy, other, niced, rest;
    if (!a->ok || !b->ok || b->total <= a->total) return -1;
    total = (double)(b->total - a->total) / hz;
    busy = (double)(b->busy - a->busy) / hz;
    niced = (double)(b->nice - a->nice) / hz;
    other = busy > self_s ? busy - self_s : 0;
    niced = niced < other ? niced : other;
    rest = other - niced;
    printf("# during the run: CPUs %.0f%% busy; other processes used %.0f%% of all CPU time (%.0f%% at nice > 0)%s\n",
           100 * busy / total, 100 * other / total, 100 * niced / total,
           rest / total > 0.05 ? " (NOISY: compare with care)"
           : niced / total > 0.05 ? " (niced background work: it yields the CPUs, but shares memory bandwidth)"
                                   : "");
    fflush(stdout);
    return other / total;
}

BENCH_FN void print_loadavg(void)
{
    char buf[128] = "";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fgets(buf, sizeof buf, f)) printf("# load average at start: %s", buf);
    if (f) fclose(f);
}

/* The comment line that opens a collective's section of the output. */
BENCH_FN void print_coll_legend(coll_id c, int mpi)
{
    const coll_info *ci = &COLLS[c];
    if (c == COLL_BARRIER) {
        printf("# %s: %s, time per call\n", ci->name, mpi ? ci->mpi : ci->ours);
        return;
    }
    printf("# %s: %s; size S = %s; busbw = algbw * %s; floor = memcpy of %s B per device\n", ci->name,
           mpi ? ci->mpi : ci->ours, ci->size_is, ci->busbw_is, ci->floor_is);
}

#endif /* BENCH_COMMON_H */
