/* pagefault.c - the floor under a large mesh's first run: the time the
   kernel takes to give a process fresh memory. Maps MIB MiB of anonymous
   memory, writes one byte per page (each write a page fault: a zeroed
   page and its mapping), and prints the time, R times.

   A mesh's first spmd_run under fibers touches every device's memory for
   the first time (its stack's top pages, its flight recorder, its share
   of the groups): `build/bench --scale` "KiB/dev" says how much, ~20 KiB
   a device, so 4,096 devices fault in ~80 MiB. On the VM this project is
   developed on a fresh page costs ~2.9 us (80 MiB: 58 ms), which bounds
   create+first from below.

     build/pagefault [MIB [R]]   (default 80 MiB, 3 runs) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 80, bytes = mib << 20, i;
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096u;
    int runs = argc > 2 ? atoi(argv[2]) : 3, r;
    for (r = 0; r < runs; r++) {
        volatile char *p = (volatile char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        double t0, t;
        if (p == (volatile char *)MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        t0 = now_s();
        for (i = 0; i < bytes; i += page) p[i] = 1;
        t = now_s() - t0;
        printf("%zu MiB of fresh pages: %.1f ms (%.2f us a page)\n", mib, t * 1e3, t * 1e6 / (double)(bytes / page));
        munmap((void *)p, bytes);
    }
    return 0;
}
