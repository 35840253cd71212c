/* Second translation unit: includes the header without the implementation
   (or, under SPMD_STATIC, with its own private copy). */
#ifdef SPMD_STATIC
#define SPMDCOLL_IMPLEMENTATION
#endif
#include "../../spmdcoll.h"

int other_unit(spmd_mesh *m) {
#ifdef SPMD_STATIC
    (void)m;
    return (int)spmd_dtype_size(SPMD_F16) + 1; /* a mesh from another copy must not be touched */
#else
    return spmd_mesh_size(m);
#endif
}
