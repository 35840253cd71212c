/* fiberfloor.c - the floor under a psum of many fibers: what one carrier
   pays per fiber to switch to it and back with nothing else to do. N
   fibers, stacks 256 KiB apart (the library's default), run round robin
   on one thread; each turn a fiber goes down 7 frames of 128 bytes (the
   depth of a blocking call's wait, ~900 bytes), writes a line of a
   per-device array and a line 2 KiB apart in another (a device's record
   and struct), and switches back. Printed: time per turn, without and
   with the next two fibers' stack tops and lines prefetched (what the
   scheduler's warming does, spmd__fiber_warm).

   On the development VM at 16,384 fibers a turn costs 360-550 ns cold
   and 66-260 ns prefetched (its memory's speed moved 4x within the hour:
   compare with a run of the library's at the same minute); a psum there
   costs each device 1-1.5 us of a carrier, so the switch is not what
   bounds it.

     build/fiberfloor [N [ROUNDS]]   (default 16384 fibers, 50 rounds; x86-64) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__x86_64__)
typedef struct { void *sp; } floor_ctx;
void floor_switch(floor_ctx *from, floor_ctx *to);
__asm__(".text\n.globl floor_switch\nfloor_switch:\n"
        " push %rbp\n push %rbx\n push %r12\n push %r13\n push %r14\n push %r15\n"
        " mov %rsp,(%rdi)\n mov (%rsi),%rsp\n"
        " pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbx\n pop %rbp\n ret\n");

#define FRAMES 7
#define FRAME 128
#define STACK ((size_t)256 << 10)
static floor_ctx home, *ctx;
static int current;
static unsigned char *recs, *devs;

static __attribute__((noinline)) void floor_down(int k, int id) {
    volatile char pad[FRAME - 32];
    pad[0] = (char)k;
    if (k) {
        floor_down(k - 1, id);
        return;
    }
    recs[(size_t)id * 64] += 1;
    devs[(size_t)id * 2048] += 1;
    floor_switch(&ctx[id], &home);
    (void)pad[0];
}
static void floor_entry(void) {
    int id = current;
    for (;;) floor_down(FRAMES, id);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double rounds_ns(int n, int rounds, int ahead) {
    double t0 = 0;
    int r, i, j;
    for (r = 0; r < rounds + 2; r++) { /* (two rounds to warm up: every stack's page faulted in) */
        if (r == 2) t0 = now_s();
        for (i = 0; i < n; i++) {
            if (ahead && i + 2 < n) {
                const char *p = (const char *)ctx[i + 2].sp;
                for (j = 0; j < 1024; j += 64) __builtin_prefetch(p + j, 1);
                __builtin_prefetch(recs + (size_t)(i + 2) * 64, 1);
                __builtin_prefetch(devs + (size_t)(i + 2) * 2048, 1);
            }
            current = i;
            floor_switch(&home, &ctx[i]);
        }
    }
    return (now_s() - t0) / rounds / n * 1e9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 16384, rounds = argc > 2 ? atoi(argv[2]) : 50, i;
    unsigned char *st;
    if (n < 1 || rounds < 1) {
        fprintf(stderr, "usage: fiberfloor [N [ROUNDS]]\n");
        return 2;
    }
    ctx = calloc((size_t)n, sizeof *ctx);
    recs = calloc((size_t)n, 64);
    devs = calloc((size_t)n, 2048);
    st = mmap(NULL, STACK * (size_t)n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!ctx || !recs || !devs || st == MAP_FAILED) {
        fprintf(stderr, "fiberfloor: out of memory\n");
        return 1;
    }
    for (i = 0; i < n; i++) { /* a frame floor_switch pops into floor_entry */
        uint64_t *sp = (uint64_t *)(void *)(st + STACK * (size_t)(i + 1)) - 8;
        sp[6] = (uint64_t)(uintptr_t)floor_entry;
        ctx[i].sp = sp;
    }
    printf("%d fibers, one thread: %.1f ns a turn cold, ", n, rounds_ns(n, rounds, 0));
    printf("%.1f ns with the next two prefetched\n", rounds_ns(n, rounds, 1));
    return 0;
}
#else
int main(void) {
    puts("fiberfloor: x86-64 only");
    return 0;
}
#endif
