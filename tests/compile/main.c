/* Compile test: the header with its implementation, in C99, C11 and C++17,
   gcc and clang, -Wall -Wextra -Wpedantic -Werror, with and without
   SPMD_STATIC. other.c is a second translation unit of the same program.
   SPMD_TEST_STDIO_FIRST: a system header before the implementation, as most
   C files start (in the GNU dialects, where that must work).
   SPMD_TEST_IGNORED: a collective's status ignored, which SPMD_WARN_UNUSED
   must refuse (tests/run.sh checks the first error). */
#ifdef SPMD_TEST_STDIO_FIRST
#include <stdio.h>
#endif
#define SPMDCOLL_IMPLEMENTATION
#include "../../spmdcoll.h"
#include <stdio.h>
#include <string.h>

int other_unit(spmd_mesh *m);

static void step(spmd_dev *d, void *arg) {
    int32_t x = spmd_device_id(d) + 1, y = 0;
    int *sum = (int *)arg;
    if (spmd_psum(d, &x, &y, 1, SPMD_I32, "i", NULL) == SPMD_OK && spmd_device_id(d) == 0) *sum = y;
#ifdef SPMD_TEST_IGNORED
    spmd_psum(d, &x, &y, 1, SPMD_I32, "i", NULL); /* a status ignored: an error under SPMD_WARN_UNUSED */
#endif
}

int main(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m;
    int sum = 0;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = 3;
    desc.axis_names[0] = "i";
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) return 1;
    if (spmd_run(m, step, &sum) != SPMD_OK || sum != 6) return 2;
    if (other_unit(m) != 3) return 3;
    if (spmd_mesh_destroy(m) != SPMD_OK) return 4;
    printf("ok %s\n", spmd_version());
    return 0;
}
