/* Every fuzz target and the library, one translation unit: make compiles
   the header's implementation with the fuzzer's instrumentation once, not
   once per target (~20 s each with ASan and UBSan). Each target's entry
   point is renamed here (spmd_fuzz_<target>); fuzz/one.c makes it the
   entry point of build/fuzz/<target>. Each fuzz/<target>.c still builds
   alone too (fuzz/README). */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"

#define LLVMFuzzerTestOneInput spmd_fuzz_boot
#include "boot.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_xhdr
#include "xhdr.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_lane
#include "lane.c"
#undef LLVMFuzzerTestOneInput
#undef CAP
#undef BULK
#undef NOPS
#define LLVMFuzzerTestOneInput spmd_fuzz_spec
#include "spec.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_env
#include "env.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_join
#include "join.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_seg
#include "seg.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_recs
#include "recs.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_shrink
#include "shrink.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_agree
#include "agree.c"
#undef LLVMFuzzerTestOneInput
#undef AGREE_CAP
#define LLVMFuzzerTestOneInput spmd_fuzz_endpoint
#include "endpoint.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput spmd_fuzz_hostid
#include "hostid.c"
#undef LLVMFuzzerTestOneInput
