/* tests/cmake.sh's consumer: a 2-device mesh, one psum checked against 1 + 2.
   Built against spmdcoll::spmdcoll it runs on threads; against
   spmdcoll::spmdcoll_fabric (SPMDCOLL_LIBFABRIC defined) on libfabric, one
   device per process under tools/spmdrun -n 2. */
#define SPMDCOLL_IMPLEMENTATION
#include <spmdcoll.h>
#include <stdio.h>

static void step(spmd_dev *d, void *arg) {
    int32_t x = spmd_device_id(d) + 1, y = 0;
    spmd_status s = spmd_psum(d, &x, &y, 1, SPMD_I32, "i", NULL);
    ((int *)arg)[spmd_device_id(d)] = s == SPMD_OK && y == 1 + 2;
}

int main(void) {
    spmd_mesh_desc desc = {0};
    spmd_mesh *m;
    int good[2] = {0, 0};
    desc.ndim = 1;
    desc.shape[0] = 2;
    desc.axis_names[0] = "i";
#ifdef SPMDCOLL_LIBFABRIC
    desc.backend = SPMD_BACKEND_LIBFABRIC;
#endif
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) return 1;
    spmd_status s = spmd_run(m, step, good);
    for (int i = 0; i < 2; i++) /* a device of another process: checked there */
        if (!spmd_device_is_local(m, i)) good[i] = 1;
    const char *backend = spmd_mesh_backend(m) == SPMD_BACKEND_LIBFABRIC ? "libfabric" : "threads";
    if (spmd_mesh_destroy(m) != SPMD_OK || s != SPMD_OK || !good[0] || !good[1]) return 2;
    printf("psum ok on %s, spmdcoll %s\n", backend, spmd_version());
    return 0;
}
