/* The entry point of build/fuzz/<target>: make passes -DFUZZ_TARGET=
   spmd_fuzz_<target> and links fuzz/all.c's object (every target and the
   library, compiled once). */
#include <stddef.h>
#include <stdint.h>

int FUZZ_TARGET(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return FUZZ_TARGET(data, size); }
