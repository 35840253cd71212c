/* cacheline.c - the floor under a small collective between two processes:
   two processes, pinned to two CPUs, exchange one cache line each way
   through shared memory, N times (each writes its counter into its line,
   then waits for the other's to reach the same count: the shape of a psum
   of two processes). Prints the time per exchange, for each of R runs.

   On a VM this moves with where the host places the two vCPUs: on the
   machine this project is developed on it ranged 0.16-1.7 us per exchange
   from run to run on the same day, which is why the 8 B latencies in the
   README are quoted with Open MPI's from the same minutes, never alone.

   With -s LINES, one way instead: the floor under a stream of small
   messages (a bcast's root and its receiver): one process writes records
   of LINES cache lines each into a ring of 64 KiB (the first word of a
   record is its stamp, written last), the other waits for each stamp,
   copies the record out and publishes how far it read; the writer reads
   that only when the ring looks full. Prints the time per record. A small
   message of the shared-memory lane is 2 lines (its record's 24 bytes,
   the exchange's 48-byte header, 8 bytes of data: 80 bytes); Open MPI's
   fast box carries 8 bytes in one.

   usage: build/cacheline [-n EXCHANGES] [-r RUNS] [-c CPU0,CPU1] [-s LINES] */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct line {
    volatile uint64_t count;
    char pad[64 - sizeof(uint64_t)];
} line;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Both sides spin: on one CPU each exchange would wait for the scheduler. */
static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) {
        fprintf(stderr, "cacheline: cannot run on CPU %d (-c picks two allowed CPUs)\n", cpu);
        _exit(1);
    }
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* One side's n exchanges; out is ours, in the other's (separate lines). */
static void exchange(line *out, line *in, uint64_t base, long n) {
    for (long i = 1; i <= n; i++) {
        uint64_t want = base + (uint64_t)i;
        __atomic_store_n(&out->count, want, __ATOMIC_RELEASE);
        while (__atomic_load_n(&in->count, __ATOMIC_ACQUIRE) < want) relax();
    }
}

/* The stream: the ring's records, and the reader's count in its own line. */
#define RING_LINES 1024
typedef struct stream {
    line rec[RING_LINES];
    line tail;
} stream;

/* Record k's place: RING_LINES / lines slots of `lines` lines each. */
static uint64_t slot_of(uint64_t k, int lines) { return k % (RING_LINES / (uint64_t)lines) * (uint64_t)lines; }

static void stream_write(stream *s, int lines, uint64_t base, long n) {
    uint64_t seen = base, slots = RING_LINES / (uint64_t)lines; /* the reader read every record before this run's */
    for (long i = 1; i <= n; i++) {
        uint64_t k = base + (uint64_t)i, at = slot_of(k, lines);
        while (k - seen >= slots) { /* full, as last seen */
            seen = __atomic_load_n(&s->tail.count, __ATOMIC_ACQUIRE);
            if (k - seen >= slots) relax();
        }
        for (int j = 1; j < lines; j++) s->rec[at + (uint64_t)j].count = k; /* the body */
        s->rec[at].pad[0] = (char)k;
        __atomic_store_n(&s->rec[at].count, k, __ATOMIC_RELEASE);
    }
}

static uint64_t stream_read(stream *s, int lines, uint64_t base, long n) {
    uint64_t sum = 0;
    line copy[RING_LINES];
    for (long i = 1; i <= n; i++) {
        uint64_t k = base + (uint64_t)i, at = slot_of(k, lines);
        while (__atomic_load_n(&s->rec[at].count, __ATOMIC_ACQUIRE) != k) relax();
        memcpy(copy, (const void *)&s->rec[at], (size_t)lines * sizeof(line));
        sum += copy[lines - 1].count;
        __atomic_store_n(&s->tail.count, k, __ATOMIC_RELEASE);
    }
    return sum;
}

int main(int argc, char **argv) {
    long n = 1000000;
    int runs = 5, cpu[2] = {0, 1}, lines = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n = atol(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && sscanf(argv[++i], "%d,%d", &cpu[0], &cpu[1]) == 2) {}
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) lines = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [-n EXCHANGES] [-r RUNS] [-c CPU0,CPU1] [-s LINES]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || runs < 1 || cpu[0] == cpu[1] || lines < 0 || lines > 16) {
        fprintf(stderr, "cacheline: need n >= 1, runs >= 1, two different CPUs (both spin) and 0..16 lines\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu[0] < 0 || cpu[1] < 0 || cpu[0] >= CPU_SETSIZE ||
        cpu[1] >= CPU_SETSIZE || !CPU_ISSET(cpu[0], &allowed) || !CPU_ISSET(cpu[1], &allowed)) {
        fprintf(stderr, "cacheline: CPUs %d and %d are not both allowed here (-c picks two)\n", cpu[0], cpu[1]);
        return 2;
    }
    /* lines 0 and 32 of a shared page: never one line, nor neighbours; the stream's ring after it */
    line *box = mmap(NULL, 4096 + sizeof(stream), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (box == MAP_FAILED) {
        perror("cacheline: mmap");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("cacheline: fork");
        return 1;
    }
    int me = child == 0;
    if (me) prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left spinning if the parent dies */
    pin(cpu[me]);
    line *out = &box[me ? 32 : 0], *in = &box[me ? 0 : 32];
    stream *ring = (stream *)(void *)&box[4096 / sizeof(line)];
    if (!me && lines)
        printf("# cacheline: %ld records of %d cache line%s one way per run, CPUs %d and %d\n", n, lines,
               lines > 1 ? "s" : "", cpu[0], cpu[1]);
    else if (!me)
        printf("# cacheline: %ld exchanges of one cache line per run, CPUs %d and %d\n", n, cpu[0], cpu[1]);
    exchange(out, in, 0, 1000); /* warm-up, both sides */
    for (int r = 0; r < runs; r++) {
        uint64_t base = 1000 + (uint64_t)r * ((uint64_t)n + 2); /* (the exchanges count n + 2 per run) */
        double t0, t;
        exchange(out, in, base, 1); /* both start together */
        t0 = now_s();
        if (!lines) exchange(out, in, base + 1, n);
        else if (me) stream_read(ring, lines, base, n);
        else stream_write(ring, lines, base, n);
        exchange(out, in, base + 1 + (uint64_t)n, 1); /* the writer's time includes the reader's last */
        t = now_s() - t0;
        if (!me) printf("run %d: %.1f ns per %s\n", r + 1, t / (double)n * 1e9, lines ? "record" : "exchange");
    }
    if (me) _exit(0);
    int st = 0;
    waitpid(child, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
