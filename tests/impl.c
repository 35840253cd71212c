/* The library's implementation, compiled once per build flavour (plain,
   ASan, TSan, libfabric) and linked into the conformance tests, which
   then include spmdcoll.h for its declarations only (make passes
   -DSPMD_TEST_LINKED_IMPL): the header's implementation is most of the
   suite's compile time. tests/compile keeps the one-file way
   (SPMDCOLL_IMPLEMENTATION in the program); the examples have it too, and
   make test links them with this object instead (build/ex).
   Every allocation of the library goes through SPMD_MALLOC: here a
   wrapper that counts them (spmd_test_allocs), which test_alloc reads. */
long spmd_test_allocs;
void *spmd_test_malloc(__SIZE_TYPE__ n);
#define SPMD_MALLOC(n) spmd_test_malloc(n)
#define SPMD_FREE(p) free(p)
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"

void *spmd_test_malloc(size_t n) {
    __atomic_fetch_add(&spmd_test_allocs, 1, __ATOMIC_RELAXED);
    return malloc(n);
}
