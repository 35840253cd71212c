/* The library's implementation, compiled once per build flavour (plain,
   ASan, TSan, libfabric) and linked into the conformance tests, which
   then include spmdcoll.h for its declarations only (make passes
   -DSPMD_TEST_LINKED_IMPL): the header's implementation is most of the
   suite's compile time. tests/compile keeps the one-file way
   (SPMDCOLL_IMPLEMENTATION in the program); the examples have it too, and
   make test links them with this object instead (build/ex). */
#define SPMDCOLL_IMPLEMENTATION
#include "../spmdcoll.h"
