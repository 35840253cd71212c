/* bench.c - an nccl-tests-like benchmark of spmdcoll's collectives.

   MODES
     (default)   every size of one collective (-c), or of each in turn
                 (-c all), next to its memcpy floor;
     --overlap   whether a collective progresses while its caller computes
                 (--sleep: while every caller sleeps; --busy: while every
                 caller computes);
     --kernels   the reduction kernel alone (spmd_reduce_local) against
                 memcpy, in cache, then inside a collective.

   THE COLLECTIVES (-c; the table, the size column, busbw and the memcpy
   floor are defined in bench_common.h, shared with mpi_bench.c)
     psum (default)  spmd_allreduce, -o op       busbw 2(G-1)/G  floor S
     all_gather      spmd_all_gather, tiled      busbw (G-1)/G   floor S(G+1)/(2G)
     psum_scatter    spmd_psum_scatter, tiled    busbw (G-1)/G   floor S(G+1)/(2G)
     all_to_all      spmd_all_to_all, tiled      busbw (G-1)/G   floor S
     bcast           spmd_bcast, root 0          busbw 1         floor S(G+1)/(2G)
     reduce          spmd_reduce, root 0, -o op  busbw 1         floor S(G+1)/(2G)
     ppermute        spmd_ppermute, ring i->i+1  busbw 1         floor S
     barrier         spmd_barrier                time only
     S is the size column as nccl-tests defines it: all_gather the gathered
     output (each device sends S/G), psum_scatter the input (each receives
     S/G), the others each device's buffer. The floor is a memcpy of B bytes
     by every device thread at once, B = (bytes a device must read + bytes
     it must write) / 2 with the work shared evenly (bench_common.h says
     why each). The tiled operations run on 1-D arrays (split = concat = 0);
     their counts are rounded down to a multiple of G.

   WHAT IS MEASURED AND HOW
     One mesh of -d devices on a 1-D axis "i" (devices are threads of this
     process; under several processes see SEVERAL PROCESSES below). All
     devices run inside one spmd_run and loop over the sizes together. For
     each size S (-b .. -e, times -f):
       1. warm-up: -w ops, or (default) the calibration rounds of step 2;
       2. the iteration count: -n, or (default) device 0 times rounds of
          back-to-back ops until one round takes 20 ms, then picks the count
          that makes one repetition last 0.25 s / -r (at least one op);
          every decision of device 0 reaches the others by an spmd_bcast
          of one int64 over "i", between timed regions;
       3. the memcpy floor is prepared the same way (steps 1-2);
       4. -r repetitions, each: the memcpy timed, the receive buffers
          poisoned (untimed), the collective timed. Timing one: spmd_barrier,
          timer started on device 0, `iters` back-to-back ops, spmd_barrier,
          timer stopped; time per op = elapsed / iters. The row shows the
          medians. Interleaving makes both see the same machine: other work
          on it moves both (the last line of the output tells how much CPU
          time other processes took during the run);
       5. verification of the last repetition's result: every element on
          every device (each process checks its own devices; whether all
          passed is an spmd_allreduce min over "i"), compared bit for bit
          with a reference computed here
          from the same integer-valued inputs. Reductions: small integers,
          so every sum is exact. Moves: each element a wide integer
          (24 bits in f32) depending on its device and index, so a block
          from the wrong device or offset is caught. reduce also checks
          that non-roots' receive buffers were left untouched. A mismatch
          prints the first bad element and the program exits 1.
     Columns: coll, size (B), count (elements of S), dtype, op, iters, time
     (us), algbw = S / time, busbw = algbw * factor, floor (B), memcpy (us),
     time / memcpy. All out of place (send != recv).

   SEVERAL PROCESSES (build/bench-fabric under tools/spmdrun)
     build/bench-fabric is this program with the libfabric backend compiled
     in. Started by `tools/spmdrun -n N [--provider tcp|shm] -- build/bench-fabric
     -d D ...`, every process creates the same mesh of D devices in total
     (D >= N; e.g. -n 2 with -d 2 is one device per process), hosting one
     contiguous block of them (spmd_device_is_local); spmd_run starts
     threads for those only, and every collective between devices of
     different processes goes over the provider. The measurement is the
     one above, with these differences: device 0 (in process 0) keeps the
     time and its decisions reach the other processes by the bcast of step
     2; the timing barriers span all processes; each process's first
     device computes that process's copy of the expected reduction, and
     each process verifies its own devices' results; the memcpy floor is
     copied by every device of every process at once (each process its
     own buffers), timed like the collective between two mesh barriers;
     process 0 alone prints, and the CPU time of other work (last line)
     subtracts the CPU seconds of every process of the run (summed by an
     spmd_psum in a second, short spmd_run). --overlap and --kernels stay
     thread-only: under several processes they are refused (exit 2). Run
     without the launcher, build/bench-fabric is build/bench (threads).
     bench/compare_mpi.sh -t fabric-tcp|fabric-shm runs it next to Open MPI
     over the matching transport.

   OVERLAP MODE (--overlap)
     -d devices (default 2), one size (64 MiB, or -e), psum and all_gather
     (or -c). Device 0 starts the collective (spmd_*_start), computes for a
     fixed time T, then calls spmd_wait; the other devices start it and wait
     at once. The compute is arithmetic on a private 16 KiB buffer (in L1),
     its length calibrated to the collective's own time. Device k is pinned
     to CPU k mod CPUs (else the scheduler may stack device 0's compute and
     a peer on one CPU, and the numbers wander). Per repetition,
     all timed on device 0: the collective alone (start, wait at once), the
     compute alone, and start + compute + wait; medians. Reported: the
     three times, device 0's time inside spmd_wait after its compute, and
         overlap = (t_coll + t_comp - t_total) / min(t_coll, t_comp)
     (1: the collective was hidden behind the compute; 0: they ran one
     after the other). With no more devices than CPUs, the waiting peers
     run the collective's tasks while device 0 computes; with more devices
     than CPUs they compete with the compute for CPUs and cannot.
     --sleep: every device starts, sleeps 1.2x the collective's own time
     (work that leaves the CPUs free: a GPU kernel, I/O), then waits; the
     collective is hidden only if it progresses without any caller.
     --busy: every device starts, computes for about 1.2x the collective's
     own time, then waits: with as many devices as CPUs nothing can hide
     the collective, and t_total should be no more than t_coll + t_comp.

   KERNEL MODE (--kernels)
     1. spmd_reduce_local(out, {in0, in1}, 2, count, dtype, op) alone, on
        one thread, in cache: 16 KiB and 256 KiB per input (or -b), every
        dtype x op (or -t / -o), out of place, timed interleaved with a
        memcpy of the same output bytes (same rule as above, 0.06 s per
        case); GB/s = output bytes / time (bool sum writes int32 counts:
        4x its input); moved/memcpy compares bytes moved per second (the
        kernel reads two inputs and writes one output; memcpy reads and
        writes the output's bytes). Verified exactly. Target: f32 sum in
        cache within 1.5x of memcpy's bandwidth; the output says whether it
        is met (t/memcpy gives the plain time ratio too).
     2. The same kernel as it runs inside a collective: spmd_allreduce with
        the split algorithm (-a split unless -a says otherwise) on -d
        devices (default 2), f32 sum (or -t / -o) at 16 KiB and 4 MiB per
        device, against the psum floor (memcpy of S by every device).

   BUILD (from the repository root)
     make build/bench     (cc -O3 -g -std=c11 -pthread -I. bench/bench.c -lm)
     make build/bench-fabric   (the same with -DSPMDCOLL_LIBFABRIC ... -lfabric)
*/
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#include "bench_common.h"

#define AXIS "i"
#define KERNEL_BUDGET_S 0.06      /* per dtype x op in kernel mode */
#define OVERLAP_BYTES ((size_t)64 << 20)
#define COMPUTE_FLOATS 4096       /* the overlap compute's private buffer: 16 KiB */

/* ---- configuration ------------------------------------------------------ */

typedef struct config {
    int devices;
    spmd_dtype dtype;
    int dtype_set;
    spmd_op op;
    int op_set;
    size_t min_bytes, max_bytes;
    int min_set, max_set;
    long factor;
    long warmup;                  /* -1: auto */
    long iters;                   /* 0: auto */
    int reps;
    coll_id coll;                 /* COLL_ALL: each in turn */
    int coll_set;
    spmd_algo algo;
    int algo_set;
    int kernels, overlap, sleep, busy, csv, pin; /* (sleep, busy: every device works) */
    char cmdline[1024];
} config;

static void usage(FILE *f)
{
    fputs("usage: bench [options]\n"
          "  -c COLL    psum (default) all_gather psum_scatter all_to_all bcast reduce\n"
          "             ppermute barrier, or all (each in turn)\n"
          "  -d N       devices (default 2), mesh axis \"i\"\n"
          "  -t DTYPE   bool i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16 f32 f64 c64 c128 f8e4m3fn f8e5m2\n"
          "             (default f32)\n"
          "  -o OP      sum prod max min mean, for psum and reduce (default sum)\n"
          "  -b SIZE    min size S (default 8; K M G suffixes, powers of 1024)\n"
          "  -e SIZE    max size S (default 256M)\n"
          "  -f N       size multiplication factor (default 2)\n"
          "  -w N       warm-up ops per size (default: the calibration rounds; 5 with -n)\n"
          "  -n N       timed ops per repetition (default: auto, ~0.25 s per size)\n"
          "  -r N       repetitions, the median is reported (default 5)\n"
          "  -a ALGO    default, eager, split, bruck, rd or rab (spmd_opts.algo)\n"
          "  --overlap  compute while a collective is in flight (psum, all_gather; see bench.c)\n"
          "  --sleep    the same, every device sleeping instead (work that leaves the CPUs free)\n"
          "  --busy     the same, every device computing (work that keeps the CPUs busy)\n"
          "  --kernels  time the reduction kernel of every dtype x op (see bench.c)\n"
          "  --plan P [SIZE]  per-process counts of the plans across P processes (see bench.c)\n"
          "  --model    predicted psum times of each algorithm across processes, per link class\n"
          "  --pin      pin device k's thread to CPU k mod CPUs (as mpirun --bind-to core; thread backend)\n"
          "  --csv      comma-separated output\n",
          f);
}

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "bench: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(2);
}

static spmd_dtype parse_dtype(const char *s)
{
    for (int t = 1; t < SPMD_DTYPE_COUNT; t++)
        if (strcmp(s, spmd_dtype_name((spmd_dtype)t)) == 0) return (spmd_dtype)t;
    die("unknown dtype '%s'", s);
    return SPMD_DTYPE_NONE;
}

static spmd_op parse_op(const char *s)
{
    for (int o = SPMD_OP_SUM; o <= SPMD_OP_MEAN; o++)
        if (strcmp(s, spmd_op_name((spmd_op)o)) == 0) return (spmd_op)o;
    die("unknown op '%s' (sum prod max min mean)", s);
    return SPMD_OP_NONE;
}

static const char *const algo_names[SPMD_ALGO_COUNT] = {"default", "eager", "split", "bruck", "rd", "rab"};

static spmd_algo parse_algo(const char *s)
{
    for (int a = 0; a < SPMD_ALGO_COUNT; a++)
        if (strcmp(s, algo_names[a]) == 0) return (spmd_algo)a;
    die("unknown algo '%s' (default eager split bruck rd rab)", s);
    return SPMD_ALGO_DEFAULT;
}

static const char *algo_name(spmd_algo a) { return a >= 0 && a < SPMD_ALGO_COUNT ? algo_names[a] : "default"; }

/* The value of option argv[*i]: "-d 8" or "-d8". */
static const char *opt_value(int *i, int argc, char **argv)
{
    if (argv[*i][2] != '\0') return argv[*i] + 2;
    if (*i + 1 >= argc) die("option %s needs a value", argv[*i]);
    return argv[++*i];
}

static void parse_option(config *cfg, char opt, const char *v)
{
    switch (opt) {
    case 'd': cfg->devices = (int)parse_long(v, 1, SPMD_MAX_DEVICES); break;
    case 't': cfg->dtype = parse_dtype(v); cfg->dtype_set = 1; break;
    case 'o': cfg->op = parse_op(v); cfg->op_set = 1; break;
    case 'b': cfg->min_bytes = parse_size(v); cfg->min_set = 1; break;
    case 'e': cfg->max_bytes = parse_size(v); cfg->max_set = 1; break;
    case 'f': cfg->factor = parse_long(v, 2, 1024); break;
    case 'w': cfg->warmup = parse_long(v, 0, MAX_ITERS); break;
    case 'n': cfg->iters = parse_long(v, 1, MAX_ITERS); break;
    case 'r': cfg->reps = (int)parse_long(v, 1, MAX_REPS); break;
    case 'a': cfg->algo = parse_algo(v); cfg->algo_set = 1; break;
    case 'c': cfg->coll = parse_coll(v); cfg->coll_set = 1; break;
    default: usage(stderr); exit(2);
    }
}

static void check_args(config *cfg)
{
    if (cfg->min_bytes > cfg->max_bytes) die("%s", "-b is larger than -e");
    if (cfg->kernels && cfg->overlap) die("%s", "--kernels and --overlap are separate runs");
    if (cfg->kernels && cfg->coll_set) die("%s", "--kernels measures the reduction kernel; -c does not apply");
    if (cfg->overlap && cfg->coll == COLL_BARRIER) die("%s", "--overlap needs a collective that moves data");
    if (!cfg->kernels && cfg->dtype == SPMD_BOOL && cfg->op == SPMD_OP_MEAN)
        die("%s", "pmean is not defined for bool (the library refuses it)");
    if ((cfg->dtype == SPMD_C64 || cfg->dtype == SPMD_C128) && cfg->op != SPMD_OP_SUM && cfg->op != SPMD_OP_MEAN)
        die("%s", "complex: sum and mean here (max and min are refused; prod is checked by tests/test_reduce.c)");
    if (cfg->kernels && !cfg->algo_set) cfg->algo = SPMD_ALGO_SPLIT;
    if (cfg->overlap && !cfg->max_set) cfg->max_bytes = OVERLAP_BYTES;
}

static void parse_args(config *cfg, int argc, char **argv)
{
    *cfg = (config){.devices = 2, .dtype = SPMD_F32, .op = SPMD_OP_SUM, .min_bytes = 8,
                    .max_bytes = (size_t)256 << 20, .factor = 2, .warmup = -1, .reps = 5, .coll = COLL_PSUM};
    join_args(cfg->cmdline, sizeof cfg->cmdline, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--kernels") == 0) cfg->kernels = 1;
        else if (strcmp(a, "--overlap") == 0) cfg->overlap = 1;
        else if (strcmp(a, "--sleep") == 0) cfg->overlap = cfg->sleep = 1;
        else if (strcmp(a, "--busy") == 0) cfg->overlap = cfg->busy = 1;
        else if (strcmp(a, "--csv") == 0) cfg->csv = 1;
        else if (strcmp(a, "--pin") == 0) cfg->pin = 1;
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); exit(0); }
        else if (a[0] == '-' && a[1] != '\0' && strchr("cdtobefwnra", a[1]))
            parse_option(cfg, a[1], opt_value(&i, argc, argv));
        else { usage(stderr); exit(2); }
    }
    check_args(cfg);
}

/* ---- dtypes, inputs and the reference result ----------------------------- */

typedef enum { K_BOOL, K_SINT, K_UINT, K_FLOAT } kind;

static kind kind_of(spmd_dtype dt)
{
    switch (dt) {
    case SPMD_BOOL: return K_BOOL;
    case SPMD_I8: case SPMD_I16: case SPMD_I32: case SPMD_I64: return K_SINT;
    case SPMD_U8: case SPMD_U16: case SPMD_U32: case SPMD_U64: return K_UINT;
    default: return K_FLOAT;
    }
}

/* Bytes of one result element: psum of bools counts into int32. */
static size_t out_size(spmd_dtype dt, spmd_op op)
{
    return dt == SPMD_BOOL && op == SPMD_OP_SUM ? 4 : spmd_dtype_size(dt);
}

/* Input of device d at element r (mod PATTERN) of a reduction: small
   integers, so every float sum is exact and the reference is bit-exact.
   Products use factors +-1, +-2 for signed and float types (powers of two
   stay exact). */
static int64_t gen(spmd_dtype dt, spmd_op op, int d, size_t r)
{
    static const int64_t sfac[5] = {1, 2, -1, 1, -2}, ufac[5] = {1, 2, 3, 1, 5};
    uint32_t x = mix((uint32_t)r, (uint32_t)d);
    kind k = kind_of(dt);
    if (k == K_BOOL) return x & 1;
    if (op == SPMD_OP_PROD) return k == K_UINT ? ufac[x % 5] : sfac[x % 5];
    return k == K_UINT ? (int64_t)(x % 11) : small_value(d, r);
}

/* Input of device d at element r of a data movement: as wide as the dtype
   holds integers exactly. */
static int64_t gen_tag(spmd_dtype dt, int d, size_t r)
{
    int bits;
    switch (dt) {
    case SPMD_BOOL: bits = 1; break;
    case SPMD_F16: bits = 11; break;
    case SPMD_BF16: bits = 8; break;
    case SPMD_F32: case SPMD_C64: bits = 24; break;
    case SPMD_F8E4M3FN: bits = 4; break; /* (every integer to 16) */
    case SPMD_F8E5M2: bits = 3; break;   /* (to 8) */
    default: bits = spmd_dtype_size(dt) >= 4 ? 32 : (int)spmd_dtype_size(dt) * 8; break;
    }
    return tag_value(d, r, bits, dt != SPMD_BOOL && kind_of(dt) != K_UINT);
}

static void put_int(void *p, size_t size, uint64_t v)
{
    uint8_t a = (uint8_t)v;
    uint16_t b = (uint16_t)v;
    uint32_t c = (uint32_t)v;
    memcpy(p, size == 1 ? (void *)&a : size == 2 ? (void *)&b : size == 4 ? (void *)&c : (void *)&v, size);
}

/* (complex: v + 0i) */
static void put_float(void *p, spmd_dtype dt, double v)
{
    float f = (float)v, fz[2] = {f, 0.0f};
    double dz[2] = {v, 0.0};
    uint16_t h;
    uint8_t b;
    switch (dt) {
    case SPMD_F16: h = spmd_f32_to_f16(f); memcpy(p, &h, 2); break;
    case SPMD_BF16: h = spmd_f32_to_bf16(f); memcpy(p, &h, 2); break;
    case SPMD_F32: memcpy(p, &f, 4); break;
    case SPMD_C64: memcpy(p, fz, 8); break;
    case SPMD_C128: memcpy(p, dz, 16); break;
    case SPMD_F8E4M3FN: b = spmd_f32_to_f8e4m3fn(f); memcpy(p, &b, 1); break;
    case SPMD_F8E5M2: b = spmd_f32_to_f8e5m2(f); memcpy(p, &b, 1); break;
    default: memcpy(p, &v, 8); break;
    }
}

static void put_value(void *p, spmd_dtype dt, int64_t v)
{
    if (kind_of(dt) == K_FLOAT) put_float(p, dt, (double)v);
    else put_int(p, spmd_dtype_size(dt), (uint64_t)v);
}

/* v truncated to the dtype's width, then sign- or zero-extended. */
static uint64_t canon(spmd_dtype dt, int64_t v)
{
    int bits = (int)spmd_dtype_size(dt) * 8;
    if (bits == 64) return (uint64_t)v;
    uint64_t low = (uint64_t)v & ((UINT64_C(1) << bits) - 1);
    if (kind_of(dt) == K_SINT && (low >> (bits - 1))) low |= ~((UINT64_C(1) << bits) - 1);
    return low;
}

static void expect_bool(spmd_op op, int g, size_t r, void *out)
{
    int32_t n = 0;
    for (int d = 0; d < g; d++) n += gen(SPMD_BOOL, op, d, r) != 0;
    if (op == SPMD_OP_SUM) { memcpy(out, &n, 4); return; }
    uint8_t b = op == SPMD_OP_MAX ? n > 0 : n == g; /* max: any; min, prod: all */
    memcpy(out, &b, 1);
}

static void expect_float(spmd_dtype dt, spmd_op op, int g, size_t r, void *out)
{
    double acc = (double)gen(dt, op, 0, r);
    for (int d = 1; d < g; d++) {
        double v = (double)gen(dt, op, d, r);
        if (op == SPMD_OP_PROD) acc *= v;
        else if (op == SPMD_OP_MAX) acc = v > acc ? v : acc;
        else if (op == SPMD_OP_MIN) acc = v < acc ? v : acc;
        else acc += v;
    }
    if (op == SPMD_OP_MEAN) {
        float q = (float)acc / (float)g;       /* f32, f16, bf16: divided in f32 */
        acc = dt == SPMD_F64 || dt == SPMD_C128 ? acc / g : (double)q;
    }
    put_float(out, dt, acc);
}

static void expect_int(spmd_dtype dt, spmd_op op, int g, size_t r, void *out)
{
    int sgn = kind_of(dt) == K_SINT;
    uint64_t acc = canon(dt, gen(dt, op, 0, r));
    int64_t exact = (int64_t)acc;              /* inputs are small: no overflow */
    for (int d = 1; d < g; d++) {
        uint64_t v = canon(dt, gen(dt, op, d, r));
        int gt = sgn ? (int64_t)v > (int64_t)acc : v > acc;
        if (op == SPMD_OP_PROD) acc *= v;      /* wraps modulo 2^64, then 2^bits */
        else if (op == SPMD_OP_MAX) acc = gt ? v : acc;
        else if (op == SPMD_OP_MIN) acc = gt || v == acc ? acc : v;
        else acc += v;
        exact += (int64_t)v;
    }
    if (op == SPMD_OP_MEAN) acc = (uint64_t)(exact / g);  /* truncated toward zero */
    put_int(out, spmd_dtype_size(dt), acc);
}

/* The expected reduction of g devices' inputs at pattern index r. */
static void expected_elem(spmd_dtype dt, spmd_op op, int g, size_t r, void *out)
{
    switch (kind_of(dt)) {
    case K_BOOL: expect_bool(op, g, r, out); break;
    case K_FLOAT: expect_float(dt, op, g, r, out); break;
    default: expect_int(dt, op, g, r, out); break;
    }
}

/* The PATTERN expected elements of a reduction of g inputs. */
static void expected_pattern(unsigned char *dst, spmd_dtype dt, spmd_op op, int g)
{
    size_t os = out_size(dt, op);
    for (size_t r = 0; r < PATTERN; r++) expected_elem(dt, op, g, r, dst + r * os);
}

/* "12 (0x0000000c)": one element of a result buffer, for error messages. */
static void describe(spmd_dtype dt, spmd_op op, const void *p, char *buf, size_t n)
{
    size_t sz = out_size(dt, op) > 8 ? 8 : out_size(dt, op); /* (complex128: its real part) */
    uint64_t raw = 0;
    memcpy(&raw, p, sz);
    double v;
    if (dt == SPMD_BOOL && op == SPMD_OP_SUM) v = (double)(int32_t)raw;
    else if (dt == SPMD_F16) v = spmd_f16_to_f32((uint16_t)raw);
    else if (dt == SPMD_BF16) v = spmd_bf16_to_f32((uint16_t)raw);
    else if (dt == SPMD_F8E4M3FN) v = spmd_f8e4m3fn_to_f32((uint8_t)raw);
    else if (dt == SPMD_F8E5M2) v = spmd_f8e5m2_to_f32((uint8_t)raw);
    else if (dt == SPMD_F32 || dt == SPMD_C64) { float f; memcpy(&f, p, 4); v = f; }
    else if (dt == SPMD_F64 || dt == SPMD_C128) memcpy(&v, p, 8);
    else v = kind_of(dt) == K_SINT ? (double)(int64_t)canon(dt, (int64_t)raw) : (double)raw;
    snprintf(buf, n, "%.17g (0x%0*llx)", v, (int)(2 * sz), (unsigned long long)raw);
}

/* ---- shared state, jobs and device context -------------------------------- */

typedef struct shared {
    const config *cfg;
    int *perm;                    /* the ring i -> i+1, as (source, destination) pairs */
    int first_local;              /* this process's first device: it computes expect */
    int failed;                   /* set by this process's devices when any device failed */
    double rep_s[MAX_REPS];       /* device 0's repetition times */
    double copy_s[MAX_REPS];      /* device 0's memcpy repetition times */
    double ovl_s[3][MAX_REPS];    /* overlap mode: coll, compute, total */
    double wait_s[MAX_REPS];      /* overlap mode: device 0 inside spmd_wait */
    unsigned char *expect;        /* PATTERN expected elements (same on every device) */
    spmd_dtype expect_dt;         /* what expect holds */
    spmd_op expect_op;
} shared;

typedef struct job {
    coll_id coll;
    spmd_dtype dt;
    spmd_op op;                   /* SPMD_OP_NONE for data movements */
    size_t count;                 /* elements of S */
    size_t bytes;                 /* S = count * dtype size */
    size_t copy_bytes;            /* the memcpy floor, per device */
} job;

typedef struct devctx {
    spmd_dev *dev;
    int id, ndev;
    shared *sh;
    spmd_opts opts, plain; /* -a ALGO's, and the default's for the collectives without it */
    unsigned char *send, *recv;
    size_t cap_bytes;             /* send capacity; recv holds 4x for bool sums */
    spmd_dtype filled_dt;         /* what the send buffer holds */
    spmd_op filled_op;            /* SPMD_OP_NONE: the movement values */
    spmd_array x, out;            /* views for the JAX-style operations */
    unsigned char *tagpat;        /* scratch: PATTERN movement values of one device */
    int tagpat_src;               /* whose full pattern tagpat holds, or -1 */
    spmd_dtype tagpat_dt;
    bench_timer tm;               /* the timing rule's hooks (timer_init) */
} devctx;

static job make_job(coll_id coll, spmd_dtype dt, spmd_op op, size_t bytes, int g)
{
    size_t es = spmd_dtype_size(dt), count = coll_count(coll, bytes, es, g);
    if (!COLLS[coll].reduces) op = SPMD_OP_NONE;
    else if (coll == COLL_PSUM_SCATTER) op = SPMD_OP_SUM;
    return (job){coll, dt, op, count, count * es, floor_bytes(coll, count * es, g)};
}

/* A failed library call cannot be recovered from in a benchmark. */
static void check(devctx *c, spmd_status s, const char *what)
{
    if (s == SPMD_OK) return;
    fprintf(stderr, "bench: device %d: %s failed: %s: %s\n", c->id, what, spmd_status_name(s),
            spmd_last_error(c->dev));
    fflush(NULL);
    _exit(2);
}

static void sync_all(devctx *c)
{
    check(c, spmd_barrier(c->dev, AXIS, NULL), "spmd_barrier");
}

/* Collective AND of ok over the devices (a failed device stops everyone,
   in every process): a min over the axis. */
static int all_ok(devctx *c, int ok)
{
    int32_t mine = ok != 0, all = 0;
    check(c, spmd_allreduce(c->dev, &mine, &all, 1, SPMD_I32, SPMD_OP_MIN, AXIS, NULL), "spmd_allreduce (all_ok)");
    if (!all) __atomic_store_n(&c->sh->failed, 1, __ATOMIC_RELAXED);
    return all != 0;
}

/* Device 0's decision v (others pass anything), on every device: a bcast
   over the axis, since the devices may live in other processes. Never
   called inside a timed region. */
static long share_from_0(devctx *c, long v)
{
    int64_t mine = v, got = 0;
    check(c, spmd_bcast(c->dev, &mine, &got, 1, SPMD_I64, 0, AXIS, NULL), "spmd_bcast (share_from_0)");
    return (long)got;
}

/* ---- buffers ------------------------------------------------------------- */

static int alloc_buffers(devctx *c, size_t cap, int bool_sums)
{
    size_t rcap = bool_sums ? 4 * cap : cap;
    c->cap_bytes = cap;
    if (posix_memalign((void **)&c->send, 4096, cap ? cap : 1)) c->send = NULL;
    if (posix_memalign((void **)&c->recv, 4096, rcap ? rcap : 1)) c->recv = NULL;
    c->tagpat = malloc(PATTERN * 16);
    c->tagpat_src = -1;
    if (!c->send || !c->recv || !c->tagpat) {
        fprintf(stderr, "bench: device %d: cannot allocate %zu bytes\n", c->id, cap + rcap);
        return 0;
    }
    memset(c->send, 0, cap);      /* fault the pages in now, not while timing */
    memset(c->recv, 0, rcap);
    return 1;
}

static void free_buffers(devctx *c)
{
    free(c->send);
    free(c->recv);
    free(c->tagpat);
}

/* Fills the whole send buffer with this device's inputs for job j:
   reduction values for (dt, op), or the movement values. */
static void fill_send(devctx *c, const job *j)
{
    size_t es = spmd_dtype_size(j->dt), n = c->cap_bytes / es, have;
    if (c->filled_dt == j->dt && c->filled_op == j->op) return;
    for (size_t i = 0; i < n && i < PATTERN; i++)
        put_value(c->send + i * es, j->dt, j->op ? gen(j->dt, j->op, c->id, i) : gen_tag(j->dt, c->id, i));
    for (have = (n < PATTERN ? n : PATTERN) * es; have < n * es;) {
        size_t k = have < n * es - have ? have : n * es - have;
        memcpy(c->send + have, c->send, k);
        have += k;
    }
    c->filled_dt = j->dt;
    c->filled_op = j->op;
}

/* The array views of the JAX-style operations (1-D, tiled). */
static void set_views(devctx *c, const job *j)
{
    int64_t n = (int64_t)j->count, g = c->ndev;
    c->x = spmd_array_1d(c->send, j->dt, j->coll == COLL_ALL_GATHER ? n / g : n);
    c->out = spmd_array_1d(c->recv, j->dt, j->coll == COLL_PSUM_SCATTER ? n / g : n);
}

/* Inputs, views and (this process's first device) the expected reduction;
   everyone waits. */
static void prepare(devctx *c, const job *j)
{
    shared *sh = c->sh;
    if (j->coll == COLL_BARRIER) return;
    if (c->id == sh->first_local && j->op && (sh->expect_dt != j->dt || sh->expect_op != j->op)) {
        expected_pattern(sh->expect, j->dt, j->op, c->ndev);
        sh->expect_dt = j->dt;
        sh->expect_op = j->op;
    }
    fill_send(c, j);
    set_views(c, j);
    sync_all(c);
}

static size_t recv_bytes(const devctx *c, const job *j)
{
    return recv_elems(j->coll, j->count, c->ndev) * out_size(j->dt, j->op);
}

/* Poison this device's receive buffer: no valid result looks like this. */
static void poison(devctx *c, const job *j)
{
    if (j->coll != COLL_BARRIER) memset(c->recv, 0xA5, recv_bytes(c, j));
}

/* ---- verification ----------------------------------------------------------- */

static void report_wrong(devctx *c, const job *j, size_t elem, const void *got, const void *want)
{
    char g[64], w[64];
    describe(j->dt, j->op, got, g, sizeof g);
    describe(j->dt, j->op, want, w, sizeof w);
    fprintf(stderr, "bench: WRONG RESULT: %s %s %s count %zu device %d element %zu: got %s, expected %s\n",
            COLLS[j->coll].name, spmd_dtype_name(j->dt), j->op ? spmd_op_name(j->op) : "-", j->count, c->id,
            elem, g, w);
}

/* reduce: a non-root's receive buffer must still hold the poison. */
static int verify_untouched(devctx *c, const job *j)
{
    size_t n = recv_bytes(c, j);
    for (size_t b = 0; b < n; b++) {
        if (c->recv[b] == 0xA5) continue;
        fprintf(stderr, "bench: WRONG RESULT: reduce wrote byte %zu of non-root device %d's buffer\n", b, c->id);
        return 0;
    }
    return 1;
}

static int verify_reduction(devctx *c, const job *j)
{
    size_t os = out_size(j->dt, j->op), n = recv_elems(j->coll, j->count, c->ndev);
    size_t start = j->coll == COLL_PSUM_SCATTER ? (size_t)c->id * n : 0, bad;
    if (j->coll == COLL_REDUCE && c->id != 0) return verify_untouched(c, j);
    bad = first_mismatch(c->recv, c->sh->expect, os, start, n);
    if (bad == SIZE_MAX) return 1;
    report_wrong(c, j, bad, c->recv + bad * os, c->sh->expect + (start + bad) % PATTERN * os);
    return 0;
}

/* The movement values of device src at pattern indices start .. start+m
   (mod PATTERN), in their places in c->tagpat; the full pattern is kept. */
static const unsigned char *tag_pattern(devctx *c, spmd_dtype dt, int src, size_t start, size_t m)
{
    size_t es = spmd_dtype_size(dt), n = m < PATTERN ? m : PATTERN;
    if (c->tagpat_src == src && c->tagpat_dt == dt) return c->tagpat;
    for (size_t t = 0; t < n; t++) {
        size_t r = (start + t) % PATTERN;
        put_value(c->tagpat + r * es, dt, gen_tag(dt, src, r));
    }
    c->tagpat_src = n == PATTERN ? src : -1;
    c->tagpat_dt = dt;
    return c->tagpat;
}

/* Each block of the output against the sender's input it must be. */
static int verify_movement(devctx *c, const job *j)
{
    int nb = COLLS[j->coll].blocks ? c->ndev : 1;
    size_t es = spmd_dtype_size(j->dt), m = j->count / (size_t)nb;
    for (int t = 0; t < nb; t++) {
        int src = block_source(j->coll, c->id, t, c->ndev);
        size_t start = block_start(j->coll, c->id, m), bad;
        const unsigned char *got = c->recv + (size_t)t * m * es, *pat = tag_pattern(c, j->dt, src, start, m);
        bad = first_mismatch(got, pat, es, start, m);
        if (bad == SIZE_MAX) continue;
        report_wrong(c, j, (size_t)t * m + bad, got + bad * es, pat + (start + bad) % PATTERN * es);
        return 0;
    }
    return 1;
}

static int verify_mine(devctx *c, const job *j)
{
    if (j->coll == COLL_BARRIER) return 1;
    return COLLS[j->coll].reduces ? verify_reduction(c, j) : verify_movement(c, j);
}

/* ---- the operations ------------------------------------------------------------ */

/* -a applies to the collectives that have that algorithm (spmd_opts.algo
   naming another kind's is an error); the others run the default. */
static const spmd_opts *coll_opts(const devctx *c, const job *j)
{
    spmd_algo a = c->opts.algo;
    int plan = j->coll == COLL_PSUM || j->coll == COLL_PSUM_SCATTER || j->coll == COLL_BCAST || j->coll == COLL_REDUCE;
    int fits = a == SPMD_ALGO_RD || a == SPMD_ALGO_RAB ? plan : a != SPMD_ALGO_BRUCK || j->coll != COLL_PPERMUTE;
    return fits ? &c->opts : &c->plain;
}

static spmd_status run_coll(devctx *c, const job *j)
{
    const spmd_opts *o = coll_opts(c, j);
    switch (j->coll) {
    case COLL_PSUM: return spmd_allreduce(c->dev, c->send, c->recv, j->count, j->dt, j->op, AXIS, o);
    case COLL_ALL_GATHER: return spmd_all_gather(c->dev, &c->x, &c->out, AXIS, 0, 1, o);
    case COLL_PSUM_SCATTER: return spmd_psum_scatter(c->dev, &c->x, &c->out, AXIS, 0, 1, o);
    case COLL_ALL_TO_ALL: return spmd_all_to_all(c->dev, &c->x, &c->out, AXIS, 0, 0, 1, o);
    case COLL_BCAST: return spmd_bcast(c->dev, c->send, c->recv, j->count, j->dt, 0, AXIS, o);
    case COLL_REDUCE: return spmd_reduce(c->dev, c->send, c->recv, j->count, j->dt, j->op, 0, AXIS, o);
    case COLL_PPERMUTE: return spmd_ppermute(c->dev, &c->x, &c->out, AXIS, c->sh->perm, c->ndev, o);
    default: return spmd_barrier(c->dev, AXIS, o);
    }
}

static spmd_status start_coll(devctx *c, const job *j, spmd_req **r)
{
    const spmd_opts *o = coll_opts(c, j);
    switch (j->coll) {
    case COLL_PSUM: return spmd_allreduce_start(c->dev, c->send, c->recv, j->count, j->dt, j->op, AXIS, o, r);
    case COLL_ALL_GATHER: return spmd_all_gather_start(c->dev, &c->x, &c->out, AXIS, 0, 1, o, r);
    case COLL_PSUM_SCATTER: return spmd_psum_scatter_start(c->dev, &c->x, &c->out, AXIS, 0, 1, o, r);
    case COLL_ALL_TO_ALL: return spmd_all_to_all_start(c->dev, &c->x, &c->out, AXIS, 0, 0, 1, o, r);
    case COLL_BCAST: return spmd_bcast_start(c->dev, c->send, c->recv, j->count, j->dt, 0, AXIS, o, r);
    case COLL_REDUCE: return spmd_reduce_start(c->dev, c->send, c->recv, j->count, j->dt, j->op, 0, AXIS, o, r);
    case COLL_PPERMUTE: return spmd_ppermute_start(c->dev, &c->x, &c->out, AXIS, c->sh->perm, c->ndev, o, r);
    default: return spmd_barrier_start(c->dev, AXIS, o, r);
    }
}

/* ---- timing: a device's part in bench_common.h's rule ----------------------------- */

static void tm_coll(void *p, const void *j)
{
    devctx *c = p;
    check(c, run_coll(c, j), COLLS[((const job *)j)->coll].ours);
}

static void tm_sync(void *p) { sync_all(p); }
static long tm_share(void *p, long v) { return share_from_0(p, v); }
static void tm_poison(void *p, const void *j) { poison(p, j); }

/* Device c's hooks for the timing rule, once its buffers exist. */
static void timer_init(devctx *c)
{
    const config *cfg = c->sh->cfg;
    c->tm = (bench_timer){.c = c, .leader = c->id == 0, .warmup = cfg->warmup, .iters = cfg->iters,
                          .reps = cfg->reps, .send = c->send, .recv = c->recv, .rep_s = c->sh->rep_s,
                          .copy_s = c->sh->copy_s, .coll = tm_coll, .sync = tm_sync, .share = tm_share,
                          .poison = tm_poison};
}

/* ---- output -------------------------------------------------------------- */

static const char *mode_name(const config *cfg)
{
    if (cfg->kernels) return "kernel mode";
    if (cfg->overlap) return "overlap mode";
    return cfg->coll == COLL_ALL ? "every collective" : COLLS[cfg->coll].name;
}

/* "threads", or "libfabric: 2 processes of 1 device each" (the devices of
   one process are its threads). */
static void describe_placement(spmd_mesh *m, char *buf, size_t n)
{
    int np = spmd_mesh_process_count(m), lo = SPMD_MAX_DEVICES, hi = 0;
    if (spmd_mesh_backend(m) != SPMD_BACKEND_LIBFABRIC) {
        snprintf(buf, n, "threads");
        return;
    }
    for (int p = 0; p < np; p++) {
        int k = 0;
        for (int d = 0; d < spmd_mesh_size(m); d++) k += spmd_device_process(m, d) == p;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    if (lo == hi) snprintf(buf, n, "libfabric: %d process%s of %d device%s each", np, np > 1 ? "es" : "", lo,
                           lo > 1 ? "s" : "");
    else snprintf(buf, n, "libfabric: %d processes of %d to %d devices each", np, lo, hi);
}

static void print_header(const config *cfg, spmd_mesh *m)
{
    char date[64], where[128];
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    describe_placement(m, where, sizeof where);
    printf("# spmdcoll %s bench: %s\n", spmd_version(), cfg->cmdline);
    printf("# devices: %d (%s, 1-D mesh axis \"%s\"), cpus: %ld online, date: %s\n", cfg->devices, where, AXIS,
           sysconf(_SC_NPROCESSORS_ONLN), date);
    printf("# %s, algo %s, reps %d (median), iters %s, warm-up %s\n", mode_name(cfg), algo_name(cfg->algo),
           cfg->reps, cfg->iters ? "fixed (-n)" : "auto",
           cfg->warmup >= 0 ? "fixed (-w)" : cfg->iters ? "5 ops" : "calibration rounds");
    print_loadavg();
    const char *env[] = {"SPMD_ALGO", "SPMD_SPIN_US", "SPMD_YIELD_US", "SPMD_CHECK", "SPMD_PROVIDER",
                         "SPMD_FABRIC_STRICT", "SPMD_SHM_LANE"};
    for (size_t i = 0; i < sizeof env / sizeof *env; i++)
        if (getenv(env[i])) printf("# env %s=%s\n", env[i], getenv(env[i]));
    if (cfg->csv && !cfg->kernels && !cfg->overlap)
        puts("coll,size,count,dtype,op,iters,time_us,algbw_gbs,busbw_gbs,floor_bytes,memcpy_us,ratio_memcpy,check");
    fflush(stdout);
}

/* The opening lines of one collective's table. */
static void print_columns(const config *cfg, coll_id coll)
{
    print_coll_legend(coll, 0);
    if (!cfg->csv)
        printf("# %-12s %11s %11s %5s %4s %9s %11s %11s %11s %11s %11s %9s %5s\n", "coll", "size(B)", "count",
               "dtype", "op", "iters", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "floor(B)", "memcpy(us)",
               "t/memcpy", "check");
    fflush(stdout);
}

static void print_row(const config *cfg, const job *j, const result *res)
{
    const char *dt = spmd_dtype_name(j->dt), *op = j->op ? spmd_op_name(j->op) : "-";
    double t = res->t, alg = (double)j->bytes / t / 1e9, bus = alg * busbw_factor(j->coll, cfg->devices);
    if (cfg->csv)
        printf("%s,%zu,%zu,%s,%s,%ld,%.4f,%.4f,%.4f,%zu,%.4f,%.3f,ok\n", COLLS[j->coll].name, j->bytes, j->count,
               dt, op, res->iters, t * 1e6, alg, bus, j->copy_bytes, res->tcopy * 1e6, t / res->tcopy);
    else
        printf("  %-12s %11zu %11zu %5s %4s %9ld %11.3f %11.3f %11.3f %11zu %11.3f %9.2f %5s\n",
               COLLS[j->coll].name, j->bytes, j->count, dt, op, res->iters, t * 1e6, alg, bus, j->copy_bytes,
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

/* ---- default mode: sizes ------------------------------------------------------ */

/* One size: time the collective and its memcpy floor, verify, print. */
static int bench_size(devctx *c, coll_id coll, size_t bytes)
{
    const config *cfg = c->sh->cfg;
    job j = make_job(coll, cfg->dtype, cfg->op, bytes, c->ndev);
    if (j.count == 0) return 1;
    prepare(c, &j);
    result res = bench_measure_pair(&c->tm, &j, j.copy_bytes, COLL_BUDGET_S, COPY_BUDGET_S);
    if (!all_ok(c, verify_mine(c, &j))) return 0;
    if (c->id == 0) print_row(cfg, &j, &res);
    return 1;
}

static int run_barrier(devctx *c)
{
    job j = {COLL_BARRIER, SPMD_DTYPE_NONE, SPMD_OP_NONE, 0, 0, 0};
    result res = bench_measure_one(&c->tm, &j, COLL_BUDGET_S);
    if (c->id == 0) print_barrier_row(c->sh->cfg, &res);
    return 1;
}

/* Every size of one collective; 0 if a result was wrong. */
static int run_sizes(devctx *c, coll_id coll)
{
    const config *cfg = c->sh->cfg;
    if (c->id == 0) print_columns(cfg, coll);
    if (coll == COLL_BARRIER) return run_barrier(c);
    if (coll == COLL_PSUM_SCATTER && cfg->dtype == SPMD_BOOL) {
        if (c->id == 0) printf("# psum_scatter: skipped for bool (its psum counts into int32)\n");
        return 1;
    }
    for (size_t b = cfg->min_bytes; b <= cfg->max_bytes; b *= (size_t)cfg->factor) {
        if (!bench_size(c, coll, b)) return 0;
        if (b == 0) break;
    }
    return 1;
}

static void run_collectives(devctx *c)
{
    coll_id want = c->sh->cfg->coll;
    for (int k = 0; k < COLL_COUNT; k++)
        if ((want == COLL_ALL || want == (coll_id)k) && !run_sizes(c, (coll_id)k)) return;
}

/* ---- overlap mode ----------------------------------------------------------------- */

static volatile float compute_sink;

/* The caller's work: passes of arithmetic over a private, L1-resident buffer. */
static void compute(long passes)
{
    float buf[COMPUTE_FLOATS];
    for (int k = 0; k < COMPUTE_FLOATS; k++) buf[k] = (float)k;
    for (long p = 0; p < passes; p++) {
        for (int k = 0; k < COMPUTE_FLOATS; k++) buf[k] = buf[k] * 0.9999f + 1.0f;
        __asm__ __volatile__("" : : "r"(buf) : "memory");
    }
    compute_sink = buf[passes % COMPUTE_FLOATS];
}

static double time_compute(long passes)
{
    double t0 = now_s();
    compute(passes);
    return now_s() - t0;
}

/* Passes that take about `target` seconds (a rough guess, then one refinement). */
static long compute_passes(double target)
{
    long n = 16;
    double t;
    while ((t = time_compute(n)) < 0.005 && n < (1L << 40)) n *= 4;
    n = (long)((double)n * target / t) + 1;
    t = time_compute(n);
    return (long)((double)n * target / t) + 1;
}

/* --sleep: the work is a sleep of `passes` ns on every device */
static double time_work(const config *cfg, long passes)
{
    double t0 = now_s();
    if (cfg->sleep) {
        struct timespec ts = {passes / 1000000000L, passes % 1000000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    } else {
        compute(passes);
    }
    return now_s() - t0;
}

/* Device 0: the collective started, `passes` of compute, then wait; the
   others: start and wait (--sleep: every device sleeps `passes` ns
   between). Device 0's seconds, total and inside spmd_wait. */
static double overlapped(devctx *c, const job *j, long passes, double *in_wait)
{
    spmd_req *req;
    sync_all(c);
    double t0 = now_s();
    check(c, start_coll(c, j, &req), COLLS[j->coll].ours);
    if (passes && (c->id == 0 || c->sh->cfg->sleep || c->sh->cfg->busy)) time_work(c->sh->cfg, passes);
    double tw = now_s();
    check(c, spmd_wait(req), "spmd_wait");
    double t1 = now_s();
    *in_wait = t1 - tw;
    return t1 - t0;
}

/* The largest of every device's v (--sleep: every device works, and the
   run takes as long as its slowest). */
static double max_over(devctx *c, double v)
{
    double m = v;
    check(c, spmd_pmax(c->dev, &v, &m, 1, SPMD_F64, AXIS, NULL), "spmd_pmax (max_over)");
    return m;
}

/* One repetition: the collective alone, the compute alone, both (--sleep:
   the slowest device's times). */
static void overlap_rep(devctx *c, const job *j, long passes, int k)
{
    shared *sh = c->sh;
    int all = sh->cfg->sleep || sh->cfg->busy; /* every device works, at once */
    double w, t_coll = overlapped(c, j, 0, &w), t_comp = 0;
    if (all) t_coll = max_over(c, t_coll);
    sync_all(c);
    if (all) t_comp = max_over(c, time_work(c->sh->cfg, passes));
    else if (c->id == 0) t_comp = time_work(c->sh->cfg, passes);
    poison(c, j);
    double t_total = overlapped(c, j, passes, &w);
    if (all) t_total = max_over(c, t_total);
    if (c->id != 0) return;
    sh->ovl_s[0][k] = t_coll;
    sh->ovl_s[1][k] = t_comp;
    sh->ovl_s[2][k] = t_total;
    sh->wait_s[k] = w;
}

static void print_overlap_columns(const config *cfg)
{
    if (cfg->busy)
        printf("# overlap (--busy): every device starts the collective, computes about 1.2x the collective's own"
               " time, then waits; t_coll, t_comp (every device computing at once) and t_total: the slowest device's;"
               " device k runs on CPU k mod %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    else if (cfg->sleep)
        printf("# overlap (--sleep): every device starts the collective, sleeps 1.2x the collective's own time (work"
               " that leaves the CPUs free: a GPU, I/O), then waits; t_coll, t_comp (the sleep) and t_total: the"
               " slowest device's; wait: device 0's; device k runs on CPU k mod %ld\n",
               sysconf(_SC_NPROCESSORS_ONLN));
    else
        printf("# overlap: device 0 starts the collective, computes for about the collective's own time, then waits;"
               " devices 1..%d start it and wait at once; device k runs on CPU k mod %ld\n", cfg->devices - 1,
               sysconf(_SC_NPROCESSORS_ONLN));
    if (cfg->csv) puts("coll,size,devices,t_coll_ms,t_comp_ms,t_total_ms,wait_ms,overlap,check");
    else
        printf("# %-12s %11s %11s %11s %12s %9s %8s %5s\n", "coll", "size(B)", "t_coll(ms)", "t_comp(ms)",
               "t_total(ms)", "wait(ms)", "overlap", "check");
    fflush(stdout);
}

static void print_overlap_result(const config *cfg, const job *j, const double t[4])
{
    double lo = t[0] < t[1] ? t[0] : t[1], ov = lo > 0 ? (t[0] + t[1] - t[2]) / lo : 0;
    if (cfg->csv)
        printf("%s,%zu,%d,%.3f,%.3f,%.3f,%.3f,%.2f,ok\n", COLLS[j->coll].name, j->bytes, cfg->devices, t[0] * 1e3,
               t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, ov);
    else
        printf("  %-12s %11zu %11.3f %11.3f %12.3f %9.3f %8.2f %5s\n", COLLS[j->coll].name, j->bytes, t[0] * 1e3,
               t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, ov, "ok");
    fflush(stdout);
}

static int overlap_case(devctx *c, coll_id coll)
{
    const config *cfg = c->sh->cfg;
    shared *sh = c->sh;
    job j = make_job(coll, cfg->dtype, cfg->op, cfg->max_bytes, c->ndev);
    double w, t[4];
    if (j.count == 0) return 1;
    prepare(c, &j);
    bench_ops(&c->tm, &j, 0, 2);                         /* warm-up */
    for (int k = 0; k < 5; k++) sh->rep_s[k] = overlapped(c, &j, 0, &w);
    long passes = share_from_0(c, c->id != 0 ? 0
                                  : cfg->sleep ? (long)(1.2e9 * median(sh->rep_s, 5)) + 1 /* ns: 1.2x the collective */
                                               : compute_passes((cfg->busy ? 1.2 : 1.0) * median(sh->rep_s, 5)));
    for (int k = 0; k < cfg->reps; k++) overlap_rep(c, &j, passes, k);
    if (!all_ok(c, verify_mine(c, &j))) return 0;
    if (c->id != 0) return 1;
    for (int m = 0; m < 3; m++) t[m] = median(sh->ovl_s[m], cfg->reps);
    t[3] = median(sh->wait_s, cfg->reps);
    print_overlap_result(cfg, &j, t);
    return 1;
}

static void print_overlap_notes(const config *cfg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# overlap = (t_coll + t_comp - t_total) / min(t_coll, t_comp): 1 = the collective was hidden behind"
           " device 0's compute, 0 = they ran one after the other\n");
    if (cfg->busy) {
        printf("# --busy: every device computes between start and wait; with as many devices as CPUs nothing can"
               " hide the collective (issue 41's target: t_total <= 1.05x (t_coll + t_comp))\n");
        fflush(stdout);
        return;
    }
    if (cfg->sleep) {
        printf("# --sleep: every device is away from the library while it sleeps; overlap 1 means the collective"
               " ran meanwhile without any caller's help (issue 41's target: t_total <= 1.1x max(t_coll, t_comp))\n");
        fflush(stdout);
        return;
    }
    if (cfg->devices <= cpus)
        printf("# %d devices on %ld CPUs: while device 0 computes, the peer%s waiting in spmd_wait run%s the"
               " collective's tasks (device 0's share too) on the other CPU%s, so it progresses without device 0;"
               " wait = what was left for device 0 after its compute\n",
               cfg->devices, cpus, cfg->devices > 2 ? "s" : "", cfg->devices > 2 ? "" : "s",
               cpus > 2 ? "s" : "");
    else
        printf("# %d devices on %ld CPUs: the waiting peers share the CPUs with device 0's compute, so the"
               " collective cannot progress beside it: a low value is expected\n", cfg->devices, cpus);
    fflush(stdout);
}

/* Overlap mode (and --pin) pins device k to CPU k mod CPUs: compute and
   the peers' tasks then run where the scheduler cannot stack them, so the
   numbers repeat. Returns 0 if the system refused. */
static int pin_to_cpu(int id)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(id % (cpus > 0 ? cpus : 1)), &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static void run_overlap(devctx *c)
{
    const config *cfg = c->sh->cfg;
    int pinned = all_ok(c, pin_to_cpu(c->id));
    if (c->id == 0 && !pinned) printf("# overlap: could not pin the devices to CPUs; numbers will vary more\n");
    if (c->id == 0) print_overlap_columns(cfg);
    for (int k = 0; k < COLL_BARRIER; k++) {
        coll_id coll = (coll_id)k;
        int want = cfg->coll == COLL_ALL || (cfg->coll_set ? cfg->coll == coll
                                                              : coll == COLL_PSUM || coll == COLL_ALL_GATHER);
        if (coll == COLL_PSUM_SCATTER && cfg->dtype == SPMD_BOOL) want = 0;
        if (want && !overlap_case(c, coll)) return;
    }
    if (c->id == 0) print_overlap_notes(cfg);
}

/* ---- kernel mode 1: spmd_reduce_local alone ---------------------------------------- */

typedef struct lcase {
    spmd_dtype dt;
    spmd_op op;
    size_t count, in_bytes, out_bytes;
    unsigned char *in[2], *out;   /* in[0] holds at least out_bytes (the memcpy source) */
} lcase;

/* n kernel calls (copy = 0) or n memcpys of the output bytes: seconds. */
static double local_batch(const lcase *k, int copy, long n)
{
    const void *ins[2] = {k->in[0], k->in[1]};
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        if (copy) memcpy(k->out, k->in[0], k->out_bytes);
        else spmd_reduce_local(k->out, ins, 2, k->count, k->dt, k->op);
        __asm__ __volatile__("" ::: "memory");
    }
    return now_s() - t0;
}

static long local_calibrate(const lcase *k, int copy, double rep_budget)
{
    long n = 1;
    for (int round = 1;; round++) {
        long v = next_round(n, local_batch(k, copy, n), round, rep_budget);
        if (v < 0) return -v;
        n = v;
    }
}

/* Fills both inputs and the expected result; runs the kernel once. */
static int local_setup(lcase *k, unsigned char *expect)
{
    size_t es = spmd_dtype_size(k->dt);
    const void *ins[2] = {k->in[0], k->in[1]};
    for (int d = 0; d < 2; d++)
        for (size_t i = 0; i < k->count; i++)
            put_value(k->in[d] + i * es, k->dt, gen(k->dt, k->op, d, i % PATTERN));
    expected_pattern(expect, k->dt, k->op, 2);
    spmd_status s = spmd_reduce_local(k->out, ins, 2, k->count, k->dt, k->op);
    if (s == SPMD_OK) return 1;
    fprintf(stderr, "bench: spmd_reduce_local(%s, %s): %s\n", spmd_dtype_name(k->dt), spmd_op_name(k->op),
            spmd_status_name(s));
    return 0;
}

static int local_verify(const lcase *k, const unsigned char *expect)
{
    size_t os = out_size(k->dt, k->op), bad = first_mismatch(k->out, expect, os, 0, k->count);
    char g[64], w[64];
    if (bad == SIZE_MAX) return 1;
    describe(k->dt, k->op, k->out + bad * os, g, sizeof g);
    describe(k->dt, k->op, expect + bad % PATTERN * os, w, sizeof w);
    fprintf(stderr, "bench: WRONG RESULT: spmd_reduce_local %s %s count %zu element %zu: got %s, expected %s\n",
            spmd_dtype_name(k->dt), spmd_op_name(k->op), k->count, bad, g, w);
    return 0;
}

/* Kernel and memcpy, repetitions interleaved (the output poisoned before
   each kernel batch); median seconds per call of each. */
static void local_measure(const config *cfg, const lcase *k, double *t, double *tcopy, long *iters)
{
    double ks[MAX_REPS], cs[MAX_REPS];
    long cn = local_calibrate(k, 1, KERNEL_BUDGET_S / 2 / cfg->reps);
    long kn = local_calibrate(k, 0, KERNEL_BUDGET_S / cfg->reps);
    for (int r = 0; r < cfg->reps; r++) {
        cs[r] = local_batch(k, 1, cn) / (double)cn;
        memset(k->out, 0xA5, k->out_bytes);
        ks[r] = local_batch(k, 0, kn) / (double)kn;
    }
    *t = median(ks, cfg->reps);
    *tcopy = median(cs, cfg->reps);
    *iters = kn;
}

static void print_local_columns(const config *cfg)
{
    printf("# reduction kernel alone: spmd_reduce_local(out, {in0, in1}, 2, count, dtype, op), one thread, out of"
           " place, in cache; GB/s = output bytes / time; memcpy = the same output bytes;\n"
           "# moved/memcpy = memcpy's bytes moved per second (read + written: 2 x out) over the kernel's\n"
           "# (2 inputs read + out written), the bandwidth view of the anchors' floors\n");
    if (cfg->csv) puts("dtype,op,in_bytes,out_bytes,iters,time_us,gbs,memcpy_gbs,ratio_memcpy,moved_ratio,check");
    else
        printf("# %5s %5s %10s %10s %9s %10s %9s %11s %9s %13s %5s\n", "dtype", "op", "in(B)", "out(B)", "iters",
               "time(us)", "GB/s", "memcpy GB/s", "t/memcpy", "moved/memcpy", "check");
    fflush(stdout);
}

/* memcpy's bytes moved per second (2 x out) over the kernel's (2 x in + out). */
static double moved_ratio(const lcase *k, double t, double tcopy)
{
    return (2.0 * (double)k->out_bytes / tcopy) / ((2.0 * (double)k->in_bytes + (double)k->out_bytes) / t);
}

static void print_local_row(const config *cfg, const lcase *k, double t, double tcopy, long iters)
{
    double gbs = (double)k->out_bytes / t / 1e9, cgbs = (double)k->out_bytes / tcopy / 1e9;
    double moved = moved_ratio(k, t, tcopy);
    const char *dt = spmd_dtype_name(k->dt), *op = spmd_op_name(k->op);
    if (cfg->csv)
        printf("%s,%s,%zu,%zu,%ld,%.4f,%.3f,%.3f,%.3f,%.3f,ok\n", dt, op, k->in_bytes, k->out_bytes, iters, t * 1e6,
               gbs, cgbs, t / tcopy, moved);
    else
        printf("  %5s %5s %10zu %10zu %9ld %10.3f %9.2f %11.2f %9.2f %13.2f %5s\n", dt, op, k->in_bytes,
               k->out_bytes, iters, t * 1e6, gbs, cgbs, t / tcopy, moved, "ok");
    fflush(stdout);
}

/* One dtype x op at `bytes` per input: its moved/memcpy ratio, or -1 if wrong. */
static double local_case(const config *cfg, lcase *k, unsigned char *expect)
{
    double t, tcopy;
    long iters;
    if (!local_setup(k, expect) || !local_verify(k, expect)) return -1;
    local_measure(cfg, k, &t, &tcopy, &iters);
    if (!local_verify(k, expect)) return -1;
    print_local_row(cfg, k, t, tcopy, iters);
    return moved_ratio(k, t, tcopy);
}

static int selected(const config *cfg, int dt, int op)
{
    if ((cfg->dtype_set && dt != (int)cfg->dtype) || (cfg->op_set && op != (int)cfg->op)) return 0;
    if (dt == SPMD_C64 || dt == SPMD_C128) return op == SPMD_OP_SUM || op == SPMD_OP_MEAN; /* (as check_args) */
    return !(dt == SPMD_BOOL && op == SPMD_OP_MEAN);   /* refused by design */
}

static void print_target(const size_t *sizes, const double *ratio, int n)
{
    printf("# target: f32 sum in cache within 1.5x of memcpy's bandwidth (moved/memcpy <= 1.50; the time ratio,"
           " which\n#   charges the kernel for reading two inputs, is in the t/memcpy column):\n");
    for (int s = 0; s < n; s++) {
        if (ratio[s] > 0)
            printf("#   %zu B per input: %.2fx -> %s\n", sizes[s], ratio[s], ratio[s] <= 1.5 ? "MET" : "NOT MET");
        else
            printf("#   %zu B per input: f32 sum not run (see -t, -o)\n", sizes[s]);
    }
    fflush(stdout);
}

/* The buffers of a case of up to cap bytes per input: in[0] and out hold
   4x (bool sum writes int32 counts; in[0] is the memcpy source). */
static void lcase_alloc(lcase *k, size_t cap)
{
    void *p[3];
    if (posix_memalign(&p[0], 4096, 4 * cap + 64) || posix_memalign(&p[1], 4096, cap + 64) ||
        posix_memalign(&p[2], 4096, 4 * cap + 64))
        die("%s", "out of memory");
    k->in[0] = p[0];
    k->in[1] = p[1];
    k->out = p[2];
    memset(k->in[0], 0, 4 * cap);
}

static void lcase_set(lcase *k, spmd_dtype dt, spmd_op op, size_t bytes)
{
    k->dt = dt;
    k->op = op;
    k->count = bytes / spmd_dtype_size(dt);
    k->in_bytes = k->count * spmd_dtype_size(dt);
    k->out_bytes = k->count * out_size(dt, op);
}

/* Every selected dtype x op at each size; 0 if a result was wrong. */
static int run_local_kernels(const config *cfg)
{
    size_t sizes[2] = {16 << 10, 256 << 10};
    int ns = cfg->min_set ? 1 : 2, ok = 1;
    double ratio[2] = {0, 0};
    unsigned char *expect = malloc(PATTERN * 16);
    lcase k;
    if (!expect) die("%s", "out of memory");
    if (cfg->min_set) sizes[0] = cfg->min_bytes;
    lcase_alloc(&k, ns == 2 ? sizes[1] : sizes[0]);
    print_local_columns(cfg);
    for (int s = 0; s < ns && ok; s++)
        for (int dt = SPMD_BOOL; dt < SPMD_DTYPE_COUNT && ok; dt++)
            for (int op = SPMD_OP_SUM; op <= SPMD_OP_MEAN && ok; op++) {
                if (!selected(cfg, dt, op)) continue;
                lcase_set(&k, (spmd_dtype)dt, (spmd_op)op, sizes[s]);
                double r = local_case(cfg, &k, expect);
                ok = r > 0;
                if (dt == SPMD_F32 && op == SPMD_OP_SUM) ratio[s] = r;
            }
    if (ok) print_target(sizes, ratio, ns);
    free(expect);
    free(k.in[0]);
    free(k.in[1]);
    free(k.out);
    return ok;
}

/* ---- kernel mode 2: the kernel inside a collective ---------------------------------- */

static void kernel_sizes(const config *cfg, size_t sizes[2], int *n)
{
    *n = 0;
    if (cfg->min_set) sizes[(*n)++] = cfg->min_bytes;
    else { sizes[(*n)++] = 16 << 10; sizes[(*n)++] = 4 << 20; }
}

/* One dtype x op at one size; returns 0 if the result was wrong. */
static int coll_kernel_case(devctx *c, spmd_dtype dt, spmd_op op, size_t bytes)
{
    job j = make_job(COLL_PSUM, dt, op, bytes, c->ndev);
    if (j.count == 0) return 1;
    prepare(c, &j);
    result res = bench_measure_pair(&c->tm, &j, j.copy_bytes, KERNEL_BUDGET_S, KERNEL_BUDGET_S / 2);
    if (!all_ok(c, verify_mine(c, &j))) return 0;
    if (c->id == 0) print_row(c->sh->cfg, &j, &res);
    return 1;
}

static void run_coll_kernels(devctx *c)
{
    const config *cfg = c->sh->cfg;
    size_t sizes[2];
    int ns;
    kernel_sizes(cfg, sizes, &ns);
    if (c->id == 0) {
        printf("# the kernel inside a collective: spmd_allreduce, algo %s, on %d devices; floor = memcpy of S by"
               " every device\n", algo_name(cfg->algo), cfg->devices);
        print_columns(cfg, COLL_PSUM);
    }
    for (int s = 0; s < ns; s++)
        for (int dt = SPMD_BOOL; dt < SPMD_DTYPE_COUNT; dt++)
            for (int op = SPMD_OP_SUM; op <= SPMD_OP_MEAN; op++) {
                int want = cfg->dtype_set || cfg->op_set ? selected(cfg, dt, op)
                                                         : dt == SPMD_F32 && op == SPMD_OP_SUM;
                if (want && !coll_kernel_case(c, (spmd_dtype)dt, (spmd_op)op, sizes[s])) return;
            }
}

/* ---- running ------------------------------------------------------------------------- */

static size_t capacity(const config *cfg)
{
    size_t sizes[2];
    int n;
    if (!cfg->kernels) return cfg->coll == COLL_BARRIER ? 0 : cfg->max_bytes;
    kernel_sizes(cfg, sizes, &n);
    return n == 2 && sizes[1] > sizes[0] ? sizes[1] : sizes[0];
}

static int needs_bool_sums(const config *cfg)
{
    if (cfg->kernels) return !cfg->dtype_set || cfg->dtype == SPMD_BOOL;
    return cfg->dtype == SPMD_BOOL;
}

static void device_main(spmd_dev *dev, void *arg)
{
    shared *sh = arg;
    const config *cfg = sh->cfg;
    devctx c = {.dev = dev, .id = spmd_device_id(dev), .ndev = cfg->devices, .sh = sh};
    c.opts.algo = cfg->algo;
    if (cfg->pin && !cfg->overlap && !all_ok(&c, pin_to_cpu(c.id)) && c.id == 0)
        printf("# --pin: could not pin the devices to CPUs\n");
    if (all_ok(&c, alloc_buffers(&c, capacity(cfg), needs_bool_sums(cfg)))) {
        timer_init(&c);
        if (cfg->kernels) run_coll_kernels(&c);
        else if (cfg->overlap) run_overlap(&c);
        else run_collectives(&c);
    }
    free_buffers(&c);
}

/* The mesh of -d devices: threads of this process, or (bench-fabric under
   tools/spmdrun) spread over the processes, a contiguous block each. */
static spmd_mesh *make_mesh(const config *cfg)
{
    spmd_mesh_desc desc = {0};
    spmd_mesh *m;
    desc.ndim = 1;
    desc.shape[0] = cfg->devices;
    desc.axis_names[0] = AXIS;
    spmd_status s = spmd_mesh_create(&desc, &m);
    if (s != SPMD_OK) die("spmd_mesh_create: %s", spmd_status_string(s));
    return m;
}

/* This process's first device, or -1 if it hosts none. */
static int first_local_device(spmd_mesh *m)
{
    for (int d = 0; d < spmd_mesh_size(m); d++)
        if (spmd_device_is_local(m, d) == 1) return d;
    return -1;
}

/* Under several processes: what bench cannot do there (0: refused, said by
   process 0). */
static int processes_fit(const config *cfg, spmd_mesh *m, int first_local)
{
    int np = spmd_mesh_process_count(m), quiet = spmd_mesh_process_id(m) != 0;
    if (np <= 1) return 1;
    if (cfg->kernels && !quiet)
        fprintf(stderr, "bench: --kernels runs on threads of one process only (this run has %d processes)\n", np);
    if (cfg->devices < np && !quiet)
        fprintf(stderr, "bench: -d %d is fewer devices than the %d processes (each must host one)\n", cfg->devices,
                np);
    return !cfg->kernels && cfg->devices >= np && first_local >= 0;
}

/* The CPU seconds of every process of the run, summed (each process's
   first device contributes its own), for the report of other work. */
typedef struct cpu_total {
    int first_local;
    double self_s, all_s;
} cpu_total;

static void sum_cpu_main(spmd_dev *dev, void *arg)
{
    cpu_total *t = arg;
    int mine = spmd_device_id(dev) == t->first_local;
    double in = mine ? t->self_s : 0, out = 0;
    if (spmd_psum(dev, &in, &out, 1, SPMD_F64, AXIS, NULL) == SPMD_OK && mine) t->all_s = out;
}

static double cpu_of_all_processes(spmd_mesh *m, int first_local, double self_s)
{
    cpu_total t = {first_local, self_s, -1};
    if (spmd_mesh_process_count(m) <= 1) return self_s;
    if (spmd_run(m, sum_cpu_main, &t) != SPMD_OK || t.all_s < 0) return self_s;
    return t.all_s;
}

/* The ring i -> i+1 as (source, destination) pairs. */
static int *ring_perm(int g)
{
    int *p = malloc(2 * (size_t)g * sizeof *p);
    if (!p) die("%s", "out of memory");
    for (int i = 0; i < g; i++) {
        p[2 * i] = i;
        p[2 * i + 1] = (i + 1) % g;
    }
    return p;
}

/* ---- devices-scaling mode (--scale) -------------------------------------------
   Time per call against the number of devices, on a 2-axis mesh (N/8, 8)
   named ("a", "b"), under both schedulers of the thread backend: psum of 8
   floats over "*", all_gather of 1 float over "*" (up to 16,384 devices:
   its outputs are 4 N^2 bytes), ppermute of 8 floats around the ring of
   every device, barrier over "*", bcast of 8 floats from device 0 and
   their reduce (sum) to it over "*", psum of 8 floats over "b" (N/8
   groups of 8), all_to_all of 1 float per peer over "*" (up to 16,384
   devices) and its time over one memcpy of the N^2 floats it moves
   ("a2a/memcpy"). Every device makes the same calls, two first to warm
   up; device 0 times them (wall clock, between two barriers).
   "create+first" is the mesh's creation and its first spmd_run, one psum
   of 8 floats over "*" (ms: the groups' first use included; every
   device's result checked). "KiB/dev": the process's resident memory
   during the psum over "*" (device 0 reads it after the timed calls) less
   before the mesh was made (the heap trimmed), over N: the mesh, its
   groups and the fibers' stacks. -1: not run.
     build/bench --scale [--max N] [--threads-max N] [--carriers K]
   N: 8, 16, ... up to --max (default 4096); OS threads only up to
   --threads-max (default 256: 1,024 threads take seconds per call). */
typedef struct scale_arg {
    int op, calls, *perm;
    double per_call;
    long rss; /* pages resident (op 0, device 0, after the timed calls) */
    spmd_status st;
} scale_arg;

static long resident_pages(void)
{
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &size, &res) != 2) res = 0;
    if (f) fclose(f);
    return res;
}

static spmd_status scale_call(spmd_dev *d, const scale_arg *a, float *x, float *y, float *g)
{
    int n = spmd_mesh_size(spmd_device_mesh(d));
    spmd_array X = {x, SPMD_F32, 1, {8}}, Y = {y, SPMD_F32, 1, {8}};
    switch (a->op) {
    case 0: return spmd_psum(d, x, y, 8, SPMD_F32, "*", NULL);
    case 1: return spmd_allgather(d, x, g, 1, SPMD_F32, "*", NULL);
    case 2: return spmd_ppermute(d, &X, &Y, "*", a->perm, n, NULL);
    case 4: return spmd_bcast(d, x, y, 8, SPMD_F32, 0, "*", NULL);
    case 5: return spmd_reduce(d, x, y, 8, SPMD_F32, SPMD_OP_SUM, 0, "*", NULL);
    case 6: return spmd_psum(d, x, y, 8, SPMD_F32, "b", NULL);
    case 7: return spmd_alltoall(d, g, g + n, 1, SPMD_F32, "*", NULL);
    default: return spmd_barrier(d, "*", NULL);
    }
}

static void scale_device(spmd_dev *d, void *p)
{
    scale_arg *a = (scale_arg *)p;
    int n = spmd_mesh_size(spmd_device_mesh(d)), i;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
    float *g = a->op == 1 || a->op == 7 ? malloc(2 * (size_t)(unsigned)n * sizeof(float)) : NULL;
    double t0 = 0;
    for (i = 0; g && i < n; i++) g[i] = (float)i;
    spmd_status s = spmd_barrier(d, "*", NULL);
    for (i = 0; i < 2 && s == SPMD_OK; i++) /* warm-up: the stacks' first pages, the op's groups (their
                                                first use is create+first's) */
        s = scale_call(d, a, x, y, g);
    if (s == SPMD_OK) s = spmd_barrier(d, "*", NULL);
    if (spmd_device_id(d) == 0) t0 = now_s();
    for (i = 0; i < a->calls && s == SPMD_OK; i++) s = scale_call(d, a, x, y, g);
    if (s == SPMD_OK) s = spmd_barrier(d, "*", NULL);
    if (spmd_device_id(d) == 0) a->per_call = (now_s() - t0) / a->calls;
    if (spmd_device_id(d) == 0 && a->op == 0) a->rss = resident_pages();
    if (s != SPMD_OK) a->st = s;
    free(g);
}

/* The time of one memcpy of `bytes` (us; the fastest of three, the pages
   touched before): what an all_to_all moving them costs at best. */
static double memcpy_us(size_t bytes)
{
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    double best = -1;
    int k;
    if (!a || !b) die("%s", "--scale: out of memory for the memcpy floor");
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (k = 0; k < 3; k++) {
        double t0 = now_s(), t;
        a[k] = (unsigned char)k;
        memcpy(b, a, bytes);
        t = (now_s() - t0) * 1e6;
        if (best < 0 || t < best) best = t;
    }
    if (b[0] == 3) puts(""); /* (the copy is used) */
    free(a);
    free(b);
    return best;
}

static void scale_first(spmd_dev *d, void *p)
{
    int n = spmd_mesh_size(spmd_device_mesh(d)), id = spmd_device_id(d), k;
    float x[8], y[8];
    for (k = 0; k < 8; k++) x[k] = (float)((id + k) % 3); /* exact sums below 2^24 */
    if (spmd_psum(d, x, y, 8, SPMD_F32, "*", NULL) != SPMD_OK) *(int *)p = 1;
    for (k = 0; k < 8; k++) { /* ids i with (i + k) % 3 == 1 count 1, == 2 count 2 */
        long want = 0, i;
        for (i = 0; i < 3; i++) want += (i + k) % 3 * ((n - i + 2) / 3);
        if (y[k] != (float)want) *(int *)p = 1;
    }
}

static int scale_main(int argc, char **argv)
{
    static const char *const ops[8] = {"psum 8xf32", "all_gather 1xf32", "ppermute 8xf32", "barrier", "bcast 8xf32",
                                       "reduce 8xf32", "psum over b", "all_to_all 1xf32"};
    int max = 4096, tmax = 256, carriers = 0, i, n, op, sch;
    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) max = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads-max") == 0 && i + 1 < argc) tmax = atoi(argv[++i]);
        else if (strcmp(argv[i], "--carriers") == 0 && i + 1 < argc) carriers = atoi(argv[++i]);
        else die("--scale: unknown option %s", argv[i]);
    }
    if (max > SPMD_MAX_DEVICES || tmax < 0 || carriers < 0) die("%s", "--scale: --max at most SPMD_MAX_DEVICES, --threads-max and --carriers >= 0");
    printf("# time per call (us), mesh (N/8, 8), every device calling; fibers on %d carrier(s) (0: one per CPU)\n",
           carriers);
    printf("%-8s %-8s %14s %14s %14s %14s %14s %14s %14s %16s %10s %14s %9s\n", "devices", "sched", ops[0], ops[1], ops[2],
           ops[3], ops[4], ops[5], ops[6], ops[7], "a2a/memcpy", "create+first", "KiB/dev");
    for (n = 8; n <= max; n *= 2) {
        for (sch = SPMD_SCHEDULER_THREADS; sch <= SPMD_SCHEDULER_FIBERS; sch++) {
            spmd_mesh_desc desc;
            spmd_mesh *m;
            double t[8], t0, kib = 0, mc = -1;
            long base;
            int *perm, bad = 0;
#ifdef __GLIBC__
            malloc_trim(0); /* (the last mesh's freed blocks would count as this one's "before") */
#endif
            base = resident_pages();
            if (sch == SPMD_SCHEDULER_THREADS && n > tmax) continue;
            memset(&desc, 0, sizeof desc);
            desc.ndim = 2;
            desc.shape[0] = n / 8;
            desc.shape[1] = 8;
            desc.axis_names[0] = "a";
            desc.axis_names[1] = "b";
            desc.scheduler = (spmd_scheduler)sch;
            desc.carriers = carriers;
            t0 = now_s();
            if (spmd_mesh_create(&desc, &m) != SPMD_OK) die("%s", "--scale: mesh_create failed");
            if (spmd_run(m, scale_first, &bad) != SPMD_OK || bad) die("%s", "--scale: the first psum failed");
            t0 = now_s() - t0;
            perm = malloc(2 * (size_t)n * sizeof(int));
            for (i = 0; i < n; i++) {
                perm[2 * i] = i;
                perm[2 * i + 1] = (i + 1) % n;
            }
            for (op = 0; op < 8; op++) {
                scale_arg a = {op, 0, perm, 0, 0, SPMD_OK};
                t[op] = -1;
                if ((op == 1 || op == 7) && n > 16384) continue; /* (16 GiB of outputs at 65,536) */
                /* enough calls for ~0.3 s at the cost of the curve */
                a.calls = n <= 64 ? 2000 : n <= 256 ? 200 : n <= 1024 ? 50 : 20;
                if (sch == SPMD_SCHEDULER_THREADS && n >= 128) a.calls = 20;
                if (op == 7 && n >= 8192) a.calls = 5; /* (0.1-0.6 s a call) */
                if (spmd_run(m, scale_device, &a) != SPMD_OK || a.st != SPMD_OK)
                    die("--scale: %s failed", ops[op]);
                t[op] = a.per_call * 1e6;
                if (op == 0) kib = (double)(a.rss - base) * (double)sysconf(_SC_PAGESIZE) / 1024.0 / n;
            }
            if (t[7] > 0) mc = t[7] / memcpy_us((size_t)n * (size_t)n * sizeof(float));
            printf("%-8d %-8s %14.1f %14.1f %14.1f %14.1f %14.1f %14.1f %14.1f %16.1f %10.2f %14.1f %9.1f\n", n,
                   sch == SPMD_SCHEDULER_THREADS ? "threads" : "fibers", t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7],
                   mc, t0 * 1e3, kib);
            fflush(stdout);
            free(perm);
            spmd_mesh_destroy(m);
        }
    }
    return 0;
}

/* ---- plans (--plan P [SIZE]) ------------------------------------------------
   The per-process counts of the algorithms across processes (spmdcoll.h's
   >>plans) for P processes, one device each, and SIZE bytes of f32
   (default 16M): messages, peers and bytes sent, least and most over the
   processes, for a psum (two algorithms), a bcast and a reduce (each
   as a binomial tree and split: scatter or reduce-scatter first), and a
   psum_scatter (recursive halving), a scatter and a gather (binomial
   trees) of SIZE in all. No mesh, no network: the plans are pure
   functions. */
static int plan_main(int argc, char **argv)
{
    static const struct { int algo; const char *name; } algos[] = {{SPMD__PLAN_RD, "rd (recursive doubling)"},
                                                                   {SPMD__PLAN_RAB, "rab (Rabenseifner)"},
                                                                   {-1, "bcast tree (root 0)"},
                                                                   {-2, "reduce tree (root 0)"},
                                                                   {-3, "bcast split (root 0)"},
                                                                   {-4, "reduce split (root 0)"},
                                                                   {-5, "psum_scatter (halving)"},
                                                                   {-6, "scatter tree (root 0)"},
                                                                   {-7, "gather tree (root 0)"}};
    int P = argc > 2 ? (int)parse_long(argv[2], 1, 1 << 24) : 0;
    size_t bytes = argc > 3 ? parse_size(argv[3]) : (size_t)16 << 20;
    int64_t n = (int64_t)(bytes / 4);
    spmd__plan_x *x = (spmd__plan_x *)malloc(sizeof *x);
    unsigned char *seen = (unsigned char *)calloc(P > 0 ? (size_t)P : 1, 1);
    if (P < 1 || !x || !seen) die("%s", "usage: bench --plan P [SIZE] (P >= 1)");
    printf("# plans for %zu bytes (f32, n = %lld elements) over %d processes, one device each\n", bytes,
           (long long)n, P);
    printf("%-26s %9s %9s %9s %14s %14s %9s\n", "algorithm", "msgs min", "msgs max", "peers max", "bytes min",
           "bytes max", "max / n");
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
        int mmin = INT32_MAX, mmax = 0, pmax = 0;
        int64_t bmin = INT64_MAX, bmax = 0;
        for (int r = 0; r < P; r++) {
            int msgs = 0, peers = 0;
            int64_t sent = 0;
            int rc = algos[a].algo == -1   ? spmd__plan_bcast(P, r, 0, n, x)
                     : algos[a].algo == -2 ? spmd__plan_reduce(P, r, 0, n, x)
                     : algos[a].algo == -3 ? spmd__plan_bcast_split(P, r, 0, n, x)
                     : algos[a].algo == -4 ? spmd__plan_reduce_split(P, r, 0, n, x)
                     : algos[a].algo == -5 ? spmd__plan_rscatter(P, r, n / P, x)
                     : algos[a].algo <= -6 ? spmd__plan_scatter(algos[a].algo == -7, P, r, 0, n / P, x)
                                           : spmd__plan_allreduce(algos[a].algo, P, r, n, x);
            if (rc != 0) die("%s", "no plan");
            for (int k = 0; k < x->nsteps; k++) {
                if (x->step[k].slen <= 0) continue;
                msgs++;
                sent += x->step[k].slen * 4;
                if (!seen[x->step[k].peer]) seen[x->step[k].peer] = 1, peers++;
            }
            for (int k = 0; k < x->nsteps; k++) seen[x->step[k].peer] = 0;
            if (msgs < mmin) mmin = msgs;
            if (msgs > mmax) mmax = msgs;
            if (peers > pmax) pmax = peers;
            if (sent < bmin) bmin = sent;
            if (sent > bmax) bmax = sent;
        }
        printf("%-26s %9d %9d %9d %14lld %14lld %9.3f\n", algos[a].name, mmin, mmax, pmax, (long long)bmin,
               (long long)bmax, bytes ? (double)bmax / (double)bytes : 0.0);
    }
    free(x);
    free(seen);
    return 0;
}

/* ---- the cost model (--model) ---------------------------------------------
   Predicted time of a psum of n bytes (f32) over P processes, one device
   each, by each algorithm across processes, from alpha (a step's latency),
   o (a message's own cost, sender and receiver), beta (a byte on the link)
   and gamma (a byte combined): the direct exchange sends P - 1 messages of
   n in one step and combines (P - 1) n; the split one two steps of P - 1
   messages of n / P; Bruck ceil(log2 P) steps, step k 2^k inputs (at most
   P - 2^k); recursive doubling and Rabenseifner their plans' steps, the
   slowest rank's sum. Link classes, measured here with 2 processes (bench
   -d 2 -c psum, 8 B and 16 MiB; o and gamma estimated: see
   docs/performance.md): the shared-memory lane and tcp over loopback. */
typedef struct { const char *name; double alpha_us, o_us, beta_ns, gamma_ns; } link_model;
static const link_model LINKS[] = {{"lane", 0.5, 0.25, 0.14, 0.05}, {"tcp", 19.0, 5.0, 0.48, 0.05}};

static double model_plan(const link_model *l, int algo, int P, int64_t n, spmd__plan_x *x)
{
    double worst = 0;
    for (int r = 0; r < P; r++) {
        double t = 0;
        if (spmd__plan_allreduce(algo, P, r, n, x) != 0) die("%s", "no plan");
        for (int k = 0; k < x->nsteps; k++) {
            const spmd__pstep *s = &x->step[k];
            t += l->alpha_us + (s->slen ? l->o_us : 0) + 1e-3 * (double)(s->slen * 4) * l->beta_ns +
                 (s->how != SPMD__PLAN_COPY ? 1e-3 * (double)(s->rlen * 4) * l->gamma_ns : 0);
        }
        if (t > worst) worst = t;
    }
    return worst;
}

static double model_time(const link_model *l, int a, int P, int64_t n, spmd__plan_x *x)
{
    double b = 4e-3 * (double)n, p1 = P - 1; /* (1e-3: ns to us) */
    int lg = 0;
    while ((1 << lg) < P) lg++;
    if (P == 1) return 0;
    switch (a) {
    case 0: return l->alpha_us + p1 * l->o_us + p1 * b * (l->beta_ns + l->gamma_ns);
    case 1: return 2 * l->alpha_us + 2 * p1 * l->o_us + 2 * p1 / P * b * l->beta_ns + p1 / P * b * l->gamma_ns;
    case 2: {
        double t = p1 * b * l->gamma_ns;
        for (int k = 0; k < lg; k++) {
            int recs = (1 << k) < P - (1 << k) ? 1 << k : P - (1 << k);
            t += l->alpha_us + l->o_us + b * recs * l->beta_ns;
        }
        return t;
    }
    default: return model_plan(l, a == 3 ? SPMD__PLAN_RD : SPMD__PLAN_RAB, P, n, x);
    }
}

static int model_main(void)
{
    static const char *names[] = {"direct", "split", "bruck", "rd", "rab"};
    static const int Ps[] = {2, 16, 256, 4096, 16384};
    static const size_t sizes[] = {8, 4096, (size_t)1 << 20, (size_t)64 << 20, (size_t)1 << 30};
    spmd__plan_x *x = (spmd__plan_x *)malloc(sizeof *x);
    if (!x) die("%s", "out of memory");
    for (size_t l = 0; l < sizeof LINKS / sizeof LINKS[0]; l++) {
        printf("# %s: alpha %.2f us, o %.2f us, beta %.2f ns/B, gamma %.2f ns/B; psum, us per call (* the least)\n",
               LINKS[l].name, LINKS[l].alpha_us, LINKS[l].o_us, LINKS[l].beta_ns, LINKS[l].gamma_ns);
        printf("%-6s %-8s %14s %14s %14s %14s %14s\n", "P", "bytes", names[0], names[1], names[2], names[3], names[4]);
        for (size_t i = 0; i < sizeof Ps / sizeof Ps[0]; i++)
            for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
                double t[5], best = 0;
                char cell[5][24];
                for (int a = 0; a < 5; a++) {
                    t[a] = model_time(&LINKS[l], a, Ps[i], (int64_t)(sizes[j] / 4 ? sizes[j] / 4 : 1), x);
                    if (a == 0 || t[a] < best) best = t[a];
                }
                for (int a = 0; a < 5; a++) snprintf(cell[a], sizeof cell[a], "%.4g%s", t[a], t[a] == best ? "*" : "");
                printf("%-6d %-8zu %14s %14s %14s %14s %14s\n", Ps[i], sizes[j], cell[0], cell[1], cell[2], cell[3],
                       cell[4]);
            }
    }
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    config cfg;
    if (argc > 1 && strcmp(argv[1], "--scale") == 0) return scale_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--plan") == 0) return plan_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--model") == 0) return model_main();
    parse_args(&cfg, argc, argv);
    spmd_mesh *m = make_mesh(&cfg);
    int first_local = first_local_device(m), lead = spmd_mesh_process_id(m) == 0;
    if (!processes_fit(&cfg, m, first_local)) {
        spmd_mesh_destroy(m);
        return 2;
    }
    shared sh = {.cfg = &cfg, .expect = malloc(PATTERN * 16), .perm = ring_perm(cfg.devices),
                 .first_local = first_local};
    if (!sh.expect) die("%s", "out of memory");
    if (lead) print_header(&cfg, m);
    cpu_sample before = cpu_sample_now();
    if (cfg.kernels && !run_local_kernels(&cfg)) sh.failed = 1;
    spmd_status s = sh.failed ? SPMD_OK : spmd_run(m, device_main, &sh);
    cpu_sample after = cpu_sample_now();
    double self_s = after.self_s - before.self_s;
    if (s == SPMD_OK) self_s = cpu_of_all_processes(m, first_local, self_s);
    if (lead) print_cpu_use(&before, &after, self_s);
    if (s != SPMD_OK) fprintf(stderr, "bench: spmd_run: %s\n", spmd_status_string(s));
    spmd_mesh_destroy(m);
    free(sh.expect);
    free(sh.perm);
    if (sh.failed) fprintf(stderr, "bench: FAILED (see above)\n");
    return s != SPMD_OK || sh.failed;
}
