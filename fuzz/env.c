/* Fuzz target: the environment variables the library reads. The input is
   split at newlines into the values of the variables below, in order (a
   missing line: unset). Then the bootstrap's configuration
   (spmd__boot_config: layout, coordinator host:port, Slurm node list and
   ids, job key, deadlines, interface) and a thread mesh's creation (log
   level, deadlines, check, spin, algorithm, the fault plan SPMD_FAULTS,
   scheduler, carriers, seed, trace depth) read them. Either may refuse
   with a status and a message (the mesh: only for a bad fault plan,
   logged at error level); a configuration it accepts is consistent
   (process id below the count, a port 1..65535, a key within its limit).
   Build and run: see fuzz/README. */
#define SPMDCOLL_IMPLEMENTATION
#define SPMDCOLL_LIBFABRIC
#include "../spmdcoll.h"
#include <assert.h>

static const char *const vars[] = {
    "SPMD_NUM_PROCESSES", "SPMD_PROCESS_ID", "SLURM_NTASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "SPMD_COORDINATOR", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
    "SPMD_COORDINATOR_PORT", "SLURM_JOB_ID", "SLURM_STEP_ID", "SPMD_JOB_KEY", "SPMD_BOOT_TIMEOUT_MS",
    "SPMD_TIMEOUT_MS", "SPMD_BOOT_CONN_TIMEOUT_MS", "SPMD_SOCKET_IFNAME", "SPMD_LOG_LEVEL", "SPMD_CHECK",
    "SPMD_SPIN_US", "SPMD_YIELD_US", "SPMD_ALGO", "SPMD_QUICK_EXCHANGE", "SPMD_FAULTS", "SPMD_SCHEDULER",
    "SPMD_CARRIERS", "SPMD_SCHED_SEED", "SPMD_TRACE_DEPTH"};
#define NVARS (sizeof vars / sizeof vars[0])

static int errors; /* messages logged at error level by the mesh */
static void quiet(void *user, spmd_log_level level, int device, const char *msg) {
    (void)user, (void)device;
    if (level == SPMD_LOG_ERROR && msg && *msg) errors++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = (char *)malloc(size + 1), *p, *nl;
    size_t i;
    spmd__boot *b;
    spmd__boot_desc d;
    spmd_mesh_desc md;
    spmd_mesh *m = NULL;
    spmd_status s;
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (i = 0, p = text; i < NVARS; i++) {
        if (!p) { unsetenv(vars[i]); continue; }
        nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        setenv(vars[i], p, 1);
        p = nl ? nl + 1 : NULL;
    }
    b = (spmd__boot *)calloc(1, sizeof *b);
    b->log_level = SPMD_LOG_OFF;
    b->listen_fd = -1;
    b->coord.fd = -1;
    memset(&d, 0, sizeof d);
    s = spmd__boot_config(b, &d);
    if (s == SPMD_OK) {
        assert(b->nprocs >= 1 && b->nprocs <= SPMD__BOOT_MAX_PROCS && b->rank >= 0 && b->rank < b->nprocs);
        assert(b->keylen <= SPMD__BOOT_KEY_MAX && strlen(b->key) == b->keylen);
        assert(b->timeout_ms > 0 && b->conn_timeout_ms > 0);
        if (b->nprocs > 1) {
            long port = strtol(b->coord_port, NULL, 10);
            assert(b->coord_host[0] && port >= 1 && port <= 65535);
        }
    } else {
        assert(b->err[0] != '\0');
    }
    free(b);
    memset(&md, 0, sizeof md);
    md.ndim = 1;
    md.shape[0] = 2;
    md.axis_names[0] = "i";
    md.backend = SPMD_BACKEND_THREADS;
    md.log_fn = quiet;
    errors = 0;
    s = spmd_mesh_create(&md, &m);
    if (s == SPMD_OK) spmd_mesh_destroy(m);
    else
        assert(s == SPMD_ERR_INVALID && getenv("SPMD_FAULTS") && !m &&
               (errors > 0 || (getenv("SPMD_LOG_LEVEL") && strcmp(getenv("SPMD_LOG_LEVEL"), "off") == 0)));
    free(text);
    return 0;
}
