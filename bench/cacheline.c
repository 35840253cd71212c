/* cacheline.c - the floor under a small collective between two processes:
   two processes, pinned to two CPUs, exchange one cache line each way
   through shared memory, N times (each writes its counter into its line,
   then waits for the other's to reach the same count: the shape of a psum
   of two processes). Prints the time per exchange, for each of R runs.

   On a VM this moves with where the host places the two vCPUs: on the
   machine this project is developed on it ranged 0.16-1.7 us per exchange
   from run to run on the same day, which is why the 8 B latencies in the
   README are quoted with Open MPI's from the same minutes, never alone.

   usage: build/cacheline [-n EXCHANGES] [-r RUNS] [-c CPU0,CPU1] */
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

int main(int argc, char **argv) {
    long n = 1000000;
    int runs = 5, cpu[2] = {0, 1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) n = atol(argv[++i]);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && sscanf(argv[++i], "%d,%d", &cpu[0], &cpu[1]) == 2) {}
        else {
            fprintf(stderr, "usage: %s [-n EXCHANGES] [-r RUNS] [-c CPU0,CPU1]\n", argv[0]);
            return 2;
        }
    }
    if (n < 1 || runs < 1 || cpu[0] == cpu[1]) {
        fprintf(stderr, "cacheline: need n >= 1, runs >= 1 and two different CPUs (both spin)\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || cpu[0] < 0 || cpu[1] < 0 || cpu[0] >= CPU_SETSIZE ||
        cpu[1] >= CPU_SETSIZE || !CPU_ISSET(cpu[0], &allowed) || !CPU_ISSET(cpu[1], &allowed)) {
        fprintf(stderr, "cacheline: CPUs %d and %d are not both allowed here (-c picks two)\n", cpu[0], cpu[1]);
        return 2;
    }
        /* lines 0 and 32 of a shared page: never one line, nor neighbours */
    line *box = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
    if (!me) printf("# cacheline: %ld exchanges of one cache line per run, CPUs %d and %d\n", n, cpu[0], cpu[1]);
    exchange(out, in, 0, 1000); /* warm-up, both sides */
    for (int r = 0; r < runs; r++) {
        uint64_t base = 1000 + (uint64_t)r * (uint64_t)n;
        double t0 = now_s();
        exchange(out, in, base, n);
        double t = now_s() - t0;
        if (!me) printf("run %d: %.1f ns per exchange\n", r + 1, t / (double)n * 1e9);
    }
    if (me) _exit(0);
    int st = 0;
    waitpid(child, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
