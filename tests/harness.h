/* harness.h - the test harness of spmdcoll: a few macros, nothing else.

   T_CHECK(cond, fmt, ...)  one check: counted as passed or failed; a failure
                            prints file:line, the condition and the message.
                            Safe from any thread (device threads included).
   T_SKIP(fmt, ...)         count one skipped check and say why.
   t_summary()              prints the closing line "N passed, N failed[, N skipped]"
                            and returns the process exit code (1 if anything failed).

   Count cases, not elements: compare a whole array, then T_CHECK once. */
#ifndef SPMD_TEST_HARNESS_H
#define SPMD_TEST_HARNESS_H
#include <stdio.h>
#include <stdarg.h>

static long t__passed, t__failed, t__skipped;
static int t__printed;

static void t__fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    long shown = __atomic_fetch_add(&t__printed, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t__failed, 1, __ATOMIC_RELAXED);
    if (shown < 40) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "FAIL %s:%d: %s: %s\n", file, line, cond, msg);
    } else if (shown == 40) {
        fprintf(stderr, "(further failures not shown)\n");
    }
}

#define T_CHECK(cond, ...)                                                  \
    do {                                                                    \
        if (cond) __atomic_fetch_add(&t__passed, 1, __ATOMIC_RELAXED);      \
        else t__fail(__FILE__, __LINE__, #cond, __VA_ARGS__);               \
    } while (0)

#define T_SKIP(...)                                                         \
    do {                                                                    \
        __atomic_fetch_add(&t__skipped, 1, __ATOMIC_RELAXED);               \
        fprintf(stderr, "SKIP %s:%d: ", __FILE__, __LINE__);                \
        fprintf(stderr, __VA_ARGS__);                                       \
        fputc('\n', stderr);                                                \
    } while (0)

static int t_summary(void) {
    long p = __atomic_load_n(&t__passed, __ATOMIC_RELAXED);
    long f = __atomic_load_n(&t__failed, __ATOMIC_RELAXED);
    long s = __atomic_load_n(&t__skipped, __ATOMIC_RELAXED);
    fflush(stderr);
    if (s) printf("%ld passed, %ld failed, %ld skipped\n", p, f, s);
    else printf("%ld passed, %ld failed\n", p, f);
    fflush(stdout);
    return f != 0 || (p == 0 && s == 0);
}
#endif
