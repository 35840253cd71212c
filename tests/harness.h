/* harness.h - the test harness of spmdcoll: a few macros, nothing else.

   T_CHECK(cond, fmt, ...)  one check: counted as passed or failed; a failure
                            prints file:line, the condition and the message.
                            Safe from any thread (device threads included).
   T_SKIP(fmt, ...)         count one skipped check and say why.
   T_SKIPN(n, fmt, ...)     count n skipped checks at once (one line).
   t_label(text)            prefix every later FAIL/SKIP line with "[text] "
                            (testlib sets "process p of n" under several
                            processes); "" or NULL removes it.
   t_summary()              prints the closing line "N passed, N failed[, N skipped]"
                            and returns the process exit code (1 if anything failed).

   Count cases, not elements: compare a whole array, then T_CHECK once. */
#ifndef SPMD_TEST_HARNESS_H
#define SPMD_TEST_HARNESS_H
#include <stdio.h>
#include <stdarg.h>

static long t__passed, t__failed, t__skipped;
static int t__printed;
static char t__label[64]; /* "[process 1 of 2] " or "" */

static inline void t_label(const char *text) {
    if (text && *text) snprintf(t__label, sizeof t__label, "[%s] ", text);
    else t__label[0] = 0;
}

static void t__fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    long shown = __atomic_fetch_add(&t__printed, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&t__failed, 1, __ATOMIC_RELAXED);
    if (shown < 40) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "FAIL %s%s:%d: %s: %s\n", t__label, file, line, cond, msg);
    } else if (shown == 40) {
        fprintf(stderr, "(further failures not shown)\n");
    }
}

#define T_CHECK(cond, ...)                                                  \
    do {                                                                    \
        if (cond) __atomic_fetch_add(&t__passed, 1, __ATOMIC_RELAXED);      \
        else t__fail(__FILE__, __LINE__, #cond, __VA_ARGS__);               \
    } while (0)

#define T_SKIP(...) T_SKIPN(1, __VA_ARGS__)

#define T_SKIPN(n, ...)                                                     \
    do {                                                                    \
        long t__n = (n);                                                    \
        __atomic_fetch_add(&t__skipped, t__n, __ATOMIC_RELAXED);            \
        fprintf(stderr, "SKIP %s%s:%d: ", t__label, __FILE__, __LINE__);    \
        if (t__n != 1) fprintf(stderr, "%ld checks: ", t__n);               \
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
