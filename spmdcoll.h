/* spmdcoll.h - v0.2.0 - JAX-style SPMD collectives for C and C++

   A device mesh with named axes, one function run per device, and the
   collectives of jax.lax (psum, pmean, all_gather, psum_scatter, all_to_all,
   ppermute, ...) with JAX's semantics (the few deviations: docs/semantics.md,
   "Where spmdcoll differs from JAX"), plus the MPI-style operations of
   mpi4jax (bcast, gather, scatter, reduce, scan, send/recv, ...), each also
   asynchronous, on threads of one process or across processes and hosts
   through libfabric (tcp, shm, verbs, EFA, ...). Single header, stb style,
   no dependencies beyond pthreads (and libfabric for that backend).

   This comment is the manual, most useful first: USAGE, QUICK START,
   CONCEPTS, FUNCTIONS BY TASK, ERRORS (statuses and what to do), then the
   details: SEMANTICS, ASYNC, DEADLINES (check mode, reports, logging,
   memory), FIBERS, SEVERAL PROCESSES, ENVIRONMENT, CONFIGURATION MACROS. Every declaration below has
   its own comment; README.md and docs/ have the longer explanations.

   USAGE
     Define SPMDCOLL_IMPLEMENTATION in exactly one .c or .cpp file before
     including this header; include it without the define everywhere else.
     The stb habit: a file of its own for it (impl.c: the define and the
     include, nothing else), so editing the program never recompiles it.
     In that one file, include spmdcoll.h before any system header (or build
     with -D_GNU_SOURCE or -std=gnu11): the implementation needs POSIX.
     Link with -pthread; with SPMDCOLL_LIBFABRIC also -lfabric. C99, C11 and
     C++17, gcc and clang.

   QUICK START
     #define SPMDCOLL_IMPLEMENTATION
     #include "spmdcoll.h"
     #include <stdio.h>
     static void step(spmd_dev *d, void *arg) {
         float g[4] = {1, 2, 3, (float)spmd_device_id(d)};
         spmd_status s = spmd_pmean(d, g, g, 4, SPMD_F32, "row,col", NULL); // in place
         if (s == SPMD_OK) printf("device %d: %g\n", spmd_device_id(d), g[3]); // 3.5
         else fprintf(stderr, "%s\n", spmd_last_error(d));
         (void)arg;
     }
     int main(void) {
         spmd_mesh_desc desc = {0};            // zero fields: defaults (C++: desc{})
         desc.ndim = 2; desc.shape[0] = 4; desc.shape[1] = 2;
         desc.axis_names[0] = "row"; desc.axis_names[1] = "col";
         spmd_mesh *m;
         if (spmd_mesh_create(&desc, &m) != SPMD_OK) return 1;
         spmd_status s = spmd_run(m, step, NULL);       // 8 devices, joined
         spmd_mesh_destroy(m);
         return s != SPMD_OK;
     }

   CONCEPTS
     mesh    an n-dimensional grid of devices (1 to 8 axes, up to
             SPMD_MAX_DEVICES: memory comes first, about 16 KiB a device as
             fibers) with named axes, e.g. shape (4,2) named ("row","col").
             Device ids are row-major over the coordinates. Meshes are
             independent: several may live in one process (no process-wide
             mutable state).
     device  one participant (spmd_dev *). Every device runs the same
             function and makes the same sequence of collective calls; a
             device handle is used by one thread at a time.
     axes    a collective names the axes it spans: "col", or "row,col"
             (spaces around names are ignored).
             Its group is the devices that agree on every axis not named;
             a device's index in it (axis_index) is its coordinates on the
             named axes, linearised in the order named ("row,col" and
             "col,row" differ in order). "" names no axis (group of one);
             "*" names every axis of the mesh in mesh order.
     groups  axis_index_groups (spmd_opts.groups, flattened, group_size
             entries each): a partition of the named axes' index range into
             equal groups; the collective runs inside each group, in the
             order listed.
     opts    spmd_opts, NULL for defaults: groups, a per-call timeout_ms, an
             algorithm hint (spmd_algo).
     arrays  the shape-dependent operations take spmd_array views (data,
             dtype, rank 0..8, shape; row-major, contiguous).
     dtypes  SPMD_BOOL, SPMD_I8, SPMD_U8, SPMD_I16, SPMD_U16, SPMD_I32,
             SPMD_U32, SPMD_I64, SPMD_U64, SPMD_F16, SPMD_BF16 (both stored
             as uint16_t), SPMD_F32, SPMD_F64, SPMD_C64, SPMD_C128
             (complex: real then imaginary, as C99's float/double complex
             and numpy), SPMD_F8E4M3FN, SPMD_F8E5M2 (ml_dtypes' fp8, a byte).
             Reductions: integers wrap; f16, bf16 and fp8 combine in f32
             and round once, to nearest even; complex sum and prod are
             complex arithmetic in the element type (a product's parts are
             ar*xr - ai*xi and ar*xi + ai*xr, each product rounded: no fused
             multiply-add), pmean divides both parts, and pmax, pmin,
             pargmax, pargmin refuse complex (SPMD_ERR_DTYPE: no order, as
             in MPI). fp8 beyond its largest finite value follows ml_dtypes'
             cast from f32 (float8.h, ConvertImpl without saturation):
             round to nearest even, then a value above the largest finite
             one (448 for e4m3fn, 57344 for e5m2) is e5m2's inf, or NaN
             for e4m3fn, which has no inf. So e4m3fn |x| > 464 is NaN (464
             rounds to 448), e5m2 |x| >= 61440 is inf; NaN stays NaN with
             its sign (e4m3fn 0x7f, e5m2 0x7e).
     specs   a PartitionSpec (spmd_spec, text P('row', None)): per array
             dimension the mesh axes sharding it, major first; unnamed axes
             replicate, `partial` axes hold summands. spmd_shard_map runs a
             function on every device's blocks; spmd_reshard moves a block
             between two specs by a greedy plan of collectives.

   FUNCTIONS BY TASK (operations return an spmd_status and block unless
   said; queries return their value)
     Make and run a mesh
       spmd_mesh_create(&desc, &m), spmd_mesh_destroy(m)
       spmd_run(m, fn, arg)        fn(dev, arg) on every (local) device; joins
       spmd_attach(m, k, &dev), spmd_detach(dev)   your own thread as device k
     Where am I
       spmd_device_id, spmd_device_coords, spmd_device_mesh,
       spmd_axis_index(dev, axes), spmd_axis_size(dev, axes),
       spmd_mesh_size, spmd_mesh_ndim, spmd_mesh_axis_name,
       spmd_mesh_axis_size(m, axes), spmd_mesh_backend, spmd_mesh_scheduler,
       spmd_mesh_process_count, spmd_mesh_process_id, spmd_device_process,
       spmd_device_is_local (libfabric: which process hosts which device),
       spmd_mesh_counters, spmd_mesh_counters_reset, spmd_count_kind_name
       (what this process sent: messages, bytes, peers per link and kind)
     Reduce (send, recv, count, dtype, axes, opts; recv == send is in place)
       spmd_psum, spmd_pmean, spmd_pmax, spmd_pmin, spmd_pprod,
       spmd_pargmax, spmd_pargmin (int32 results), spmd_allreduce (any
       spmd_op), spmd_barrier
     Move data, JAX-style (on spmd_array views: spmd_array_1d, spmd_array_2d,
     spmd_array_3d, spmd_array_nd build them)
       spmd_all_gather, spmd_all_gather_invariant, spmd_psum_scatter,
       spmd_all_to_all, spmd_pswapaxes, spmd_ppermute, spmd_pshuffle,
       spmd_pbroadcast, spmd_psend + spmd_precv, spmd_ragged_all_to_all
     MPI-style (buffers and per-device counts; root is a group index)
       spmd_allgather, spmd_alltoall, spmd_bcast, spmd_gather, spmd_scatter,
       spmd_reduce, spmd_scan
     Point to point
       spmd_send, spmd_recv (SPMD_ANY_SOURCE, SPMD_ANY_TAG, spmd_recv_info),
       spmd_sendrecv
     Asynchronous (same arguments plus spmd_req **req; see ASYNC)
       spmd_psum_start, spmd_pmean_start, spmd_pmax_start, spmd_pmin_start,
       spmd_pprod_start, spmd_pargmax_start, spmd_pargmin_start,
       spmd_allreduce_start, spmd_barrier_start, spmd_all_gather_start,
       spmd_all_gather_invariant_start, spmd_psum_scatter_start,
       spmd_all_to_all_start, spmd_pswapaxes_start, spmd_ppermute_start,
       spmd_pshuffle_start, spmd_pbroadcast_start,
       spmd_ragged_all_to_all_start, spmd_allgather_start,
       spmd_alltoall_start, spmd_bcast_start, spmd_gather_start,
       spmd_scatter_start, spmd_reduce_start, spmd_scan_start,
       spmd_send_start, spmd_recv_start;
       finish with spmd_wait (alias spmd_done), spmd_test (poll),
       spmd_wait_all
     Shard (outside devices unless said; optional spmd_msg *why)
       spmd_spec_parse, spmd_spec_init, spmd_spec_format, spmd_spec_check,
       spmd_block_shape, spmd_block_start, spmd_device_put, spmd_assemble,
       spmd_sharding_text, spmd_shard_map (runs the mesh), spmd_reshard (on
       every device), spmd_reshard_plan_make, spmd_reshard_plan_text,
       spmd_collective_cost
     Recover after a loss (docs/recovery.md)
       spmd_mesh_shrink(m, axis, desc, &out) (after spmd_run returned: a new
       mesh of the survivors, every slice along `axis` holding a lost device
       dropped; across processes every survivor calls it and they agree),
       spmd_mesh_lost(m, devices, cap) (which devices were lost),
       spmd_device_origin(new_mesh, device) (its id in the old mesh)
     When something fails
       spmd_status_string(s) ("timed out waiting for peers"),
       spmd_status_name(s) ("SPMD_ERR_TIMEOUT"), spmd_last_error(dev) (what,
       where, who), spmd_mesh_status(m), spmd_mesh_error(m) (why the mesh
       broke), spmd_report(m, device or -1, buf, len) (what every device is
       doing), spmd_set_site(dev, file, line) or SPMD_AT(dev, call) (the
       call site in the report)
     Utilities (no mesh needed, thread-safe)
       spmd_version ("0.2.0"; SPMD_VERSION_MAJOR/_MINOR/_PATCH/_STRING),
       spmd_dtype_size, spmd_dtype_name, spmd_op_name, spmd_backend_name,
       spmd_scheduler_name, spmd_reduce_local
       (the collectives' kernel on local buffers), spmd_f32_to_f16,
       spmd_f16_to_f32, spmd_f32_to_bf16, spmd_bf16_to_f32,
       spmd_f32_to_f8e4m3fn, spmd_f8e4m3fn_to_f32, spmd_f32_to_f8e5m2,
       spmd_f8e5m2_to_f32

   ERRORS: THE STATUSES AND WHAT TO DO
     Every call returns an spmd_status (0 = SPMD_OK). Bad input is refused
     before anything moves: fix the argument that spmd_last_error names. A
     collective refused on one device still takes its place in its group's
     sequence: the peers that read that device's part fail the same call
     with SPMD_ERR_REFUSED (naming it and its reason), the others finish it
     (their result is right), and every device's next call pairs with the
     next call. The mesh stays usable, except (the mesh breaks, its reason
     naming the refusal) when the device cannot name its group (axes or
     axis_index_groups wrong: it cannot tell its peers), or when the group
     spans processes and the refusal is not of its buffers (NULL,
     overlapping: those run on stand-ins; docs/semantics.md has the table).
       SPMD_ERR_INVALID     invalid argument (desc field, option, fault plan
                            token, offset)
       SPMD_ERR_NULL        NULL where a value is required
       SPMD_ERR_AXIS        unknown axis name: use a mesh axis, "" or "*"
       SPMD_ERR_DUP_AXIS    an axis named twice
       SPMD_ERR_GROUPS      axis_index_groups not equal groups covering
                            every index once
       SPMD_ERR_DTYPE       op not defined for the dtype (pmean, psum_scatter
                            of bool; pmax, pmin, pargmax, pargmin of
                            complex): convert first
       SPMD_ERR_SIZE        invalid size (mesh shape, counts)
       SPMD_ERR_OVERFLOW    a size overflows
       SPMD_ERR_OVERLAP     buffers overlap other than exactly in place
       SPMD_ERR_SHAPE       out's shape or dtype is not what JAX would give
                            (the message names both)
       SPMD_ERR_PERM        invalid permutation (duplicate source/destination)
       SPMD_ERR_ROOT        root, source or destination outside the group
       SPMD_ERR_REFUSED     a peer refused its own arguments to this call:
                            the call is void on every member, the mesh
                            usable; its message names the device and why
     These break the mesh (every later call: SPMD_ERR_BROKEN; spmd_run
     returns): destroy it and make a new one (or see docs/recovery.md).
       SPMD_ERR_TIMEOUT     a peer did not arrive in time; the message names it
       SPMD_ERR_MISMATCH    devices of a group called different collectives,
                            dtypes, counts (check mode: axes); both named
       SPMD_ERR_DEADLOCK    the devices waited for can never arrive (one
                            returned from its function; under fibers: all
                            blocked); the message names them
       SPMD_ERR_PEER_LOST   a process exited, was killed or is unreachable,
                            or a device was lost (kind=lose): shrink the mesh
       SPMD_ERR_BROKEN      the mesh broke earlier: spmd_mesh_error says why
       SPMD_ERR_STATE       a request left unfinished when its device
                            returned (also: spmd_wait on a psend token, a
                            process without devices in shard_map: the call
                            order is wrong, nothing broke)
     Others: SPMD_ERR_NOMEM (out of memory), SPMD_ERR_UNSUPPORTED (not on
     this backend/provider, e.g. check mode where the provider's inject size
     is too small), SPMD_ERR_BUSY (the mesh runs, or devices are attached:
     destroy/run after they detach; a device attached twice),
     SPMD_ERR_SYSTEM (a system call failed; see the message).
     spmd_run returns, if the mesh broke, the status that broke it (the same
     in every process); else the failure of a device's last call that the
     device did not follow with another call; else SPMD_OK.

   SEMANTICS OF THE REDUCTIONS (result on every device of the group)
     psum   elementwise sum.   Integers wrap modulo 2^bits, as in XLA.
            bool: JAX converts bools to integers before summing; here the
            result is written as int32 counts (recv holds count int32_t).
     pmean  psum / G. Floats: sum in order then divide. Integers: the exact
            mean truncated toward zero, in the input dtype (JAX would return
            float32; convert first if that is what you want). bool: refused
            with SPMD_ERR_DTYPE.
     pmax, pmin   elementwise; floats propagate NaN; bool: any / all;
            complex: refused (no order).
     pprod  elementwise product; integers wrap; bool: all; complex:
            (ac - bd) + (ad + bc)i, each product rounded (DTYPES).
     pargmax, pargmin   int32 index j in the group of the device holding
            the max/min (ties: smallest j), one axis only, as JAX's
            definition: if the max is NaN, no device equals it and the
            result is INT32_MAX.
     Floats are combined in one canonical order, a function of G alone:
     with P the largest power of two <= G and r = G - P, the first 2r
     inputs in pairs (x0+x1, x2+x3, ...), then those r pairs and the other
     inputs, in group order, as the leaves of a perfect binary tree (G = 4:
     (x0+x1)+(x2+x3)). f16 and bf16 are reduced in f32 and rounded to
     nearest even once at the end. Every device of a group gets
     bit-identical results, on every backend and process layout. send == recv (in place) is allowed
     wherever the element sizes match; other overlaps of buffers a device
     uses are refused (a buffer it does not use, as a non-root's recv of
     gather, is not checked).

   THE OTHER OPERATIONS (group size G, this device's index i)
     JAX-style, on spmd_array views (row-major; out must have the shape JAX
     gives, else SPMD_ERR_SHAPE; dimension arguments may be negative):
       all_gather, all_gather_invariant   stack (untiled) or concatenate
                                          (tiled) every x_j along `axis`
       psum_scatter     chunk i of the psum along scatter_dimension
       all_to_all       chunk j of x to device j, received chunks placed
                        in sender order along concat_axis; pswapaxes
       ppermute         (src, dst) pairs; non-destinations get zeros;
                        pshuffle: out_i = x_perm[i]; psend/precv: the two
                        halves of a ppermute
       pbroadcast       x_source everywhere
       ragged_all_to_all   JAX's offsets/sizes exchange (see its comment)
     MPI-style, on buffers and counts, root/source/dest as group indices:
       allgather, alltoall, bcast, gather, scatter, reduce, scan (inclusive),
       send, recv (SPMD_ANY_SOURCE, SPMD_ANY_TAG), sendrecv. Messages from
       one sender to one receiver arrive in order; a blocking send returns
       when the receiver has the data, so never block-send to yourself.
     psum_scatter of bool is refused (SPMD_ERR_DTYPE: JAX's result would be
     int32); an out whose dtype differs from x is SPMD_ERR_SHAPE; reduce and
     scan take every op of spmd_allreduce, argmax/argmin over any axes.
     Rooted results are written on the root only; a buffer not significant
     on a device (recv off the root of gather/reduce, send off the root of
     bcast/scatter) is never read, written or checked there. In place is
     allowed where input and output have the same size (all_to_all tiled
     with split == concat, pswapaxes, ppermute, pshuffle, pbroadcast, bcast,
     scan, and the reductions).

   ASYNC
     Every collective has a _start form returning a request; spmd_wait()
     (or spmd_done) finishes it, spmd_test() polls it, spmd_wait_all() waits
     for several. From start to finish the library owns both buffers.
     Several requests may be in flight per device, on any axes, finished in
     any order; the same order of starts on every device is the only rule.
     Peers progress a request without its owner: inputs are published at
     start and large work is cut into tasks any member of the group runs.
     At most desc.max_inflight (default 16) requests per group are posted
     at once, the rest as earlier ones finish. A request never finished is
     reported: returning from a device function with one breaks the mesh
     (SPMD_ERR_STATE) and spmd_mesh_destroy says so.

   DEADLINES, CHECK MODE, REPORTS, LOGGING, MEMORY
     Every wait has a deadline: desc.timeout_ms (default 60 s), overridden
     by SPMD_TIMEOUT_MS, overridden per call by spmd_opts.timeout_ms; it is
     counted from the first wait (or test) that finds the request
     unfinished. A device that never arrives turns into SPMD_ERR_TIMEOUT on
     its peers, naming it. Devices of a group that call different
     operations, dtypes, counts or algorithms get SPMD_ERR_MISMATCH naming
     both sides (always checked); check mode (desc.check = SPMD_CHECK_ON or
     SPMD_CHECK=1) also compares the axes and finds a peer that called the
     same collective over other axes by reading that peer's log of recent
     calls; SPMD_CHECK_SITES (SPMD_CHECK=2) also compares call sites, so a
     forgotten or extra call between two places in the program is
     SPMD_ERR_MISMATCH naming both ("call sites: device 0 at prog+0x1a2b,
     device 1 at prog+0x1b40": addr2line -e prog 0x1a2b; or file:line from
     spmd_set_site/SPMD_AT). Devices that reach one collective from two
     places (a root's branch) name one site on both (spmd_set_site(d,
     "config bcast", 0)); a call skipped inside a loop meets the next
     iteration's at the same site: nothing can tell (docs/faults.md). A timeout, a mismatch, a deadlock, a lost process or a request
     left in flight breaks the mesh: calls in progress return that status,
     later calls SPMD_ERR_BROKEN until it is destroyed. A wait that can never
     end is SPMD_ERR_DEADLOCK at once (a device waited for returned from its
     function; under fibers, every device blocked: see FIBERS).
     When the mesh breaks, a report is logged at error level (and
     spmd_report gives it at any time, snprintf-style: the length needed):
     which member of the group in trouble reached which operation, and what
     each device is doing (blocked in which call, running its own code for
     how long, returned, failed), from the flight recorder: every device's
     last desc.trace_depth calls (default 64; SPMD_TRACE_DEPTH; 0 there or
     a negative field: off; spmd_set_site/SPMD_AT add the caller's
     file:line). Its cost: a coarse clock read and a cache line of stores
     per call (about 10 ns on a 2-device 8 B psum). SPMD_TRACE=path writes
     every call as a Chrome-trace timeline at mesh destroy.
     Faults on purpose (tests): desc.faults or SPMD_FAULTS, e.g.
     "device=3,seq=17,kind=delay:50;device=1,seq=5,kind=skip" (see
     ENVIRONMENT and docs/faults.md).
     Logging goes to desc.log_fn(user, level, device or -1, msg) at
     desc.log_level (SPMD_LOG_LEVEL), or to stderr prefixed "[spmd 3/8]".
     desc.allocator (alloc/free/user, both or neither) replaces the
     allocator for everything the mesh owns; SPMD_MALLOC/SPMD_FREE replace
     it for the whole library.

   FIBERS (the default when a process has more devices than CPUs available:
   the mesh's on the thread backend, its own on libfabric; desc.scheduler =
   SPMD_SCHEDULER_FIBERS/_THREADS or env SPMD_SCHEDULER=fibers/threads choose)
     spmd_run runs the devices as fibers on desc.carriers OS threads
     (SPMD_CARRIERS; default one per CPU), each on its own stack of
     desc.thread_stack_size bytes (default 256 KiB, 16 KiB..1 GiB) with a
     page below it: a guard (an overflow dies of SIGSEGV there; a sanitizer
     reports a stack overflow), for every device where the kernel has guard
     regions (Linux 6.13), else for the first 16,384 (the kernel allows a
     process about 65,530 memory maps, two per guard page) and beyond them a
     zero page checked at each switch and when the device returns: an
     overflow found there is logged and the process aborted. Memory per
     device: docs/fibers.md. A wait hands the carrier to another ready
     device (each carrier has a queue of its own from 128 devices each). With
     one carrier and a seed (desc.sched_seed, SPMD_SCHED_SEED) the order in which
     ready devices run is drawn from a generator with that seed: the same
     program and seed give the same interleaving, the same results bit for
     bit and the same log; loop a test over seeds, print the seed of a
     failure, replay it with SPMD_CARRIERS=1 SPMD_SCHED_SEED=that.
     When no device can run and none is running, the run is deadlocked: every
     blocked call fails at once with SPMD_ERR_DEADLOCK, the mesh breaks, its
     spmd_last_error names the call, its axes, its sequence numbers and the
     devices it waits for, and the log (error level) holds the report of
     every device: what it is blocked in, or that it returned.
     Unsupported under fibers: a device function that blocks outside the
     library (its own mutex, condition variable, sleep) stalls its carrier
     and every device waiting for a turn on it; after 10 s a warning names
     the device. spmd_attach always means an OS thread of the caller.
     Both schedulers: a device whose function returned while peers wait for
     it (in a collective, a send or a recv) makes those calls fail at once
     with SPMD_ERR_DEADLOCK, naming the device that returned.

   SEVERAL PROCESSES (libfabric; docs/processes.md)
     Start the same program as N processes (tools/spmdrun -n N -- prog, srun,
     mpirun); every process creates the same meshes in the same order (mesh
     creation compares them, with check mode and SPMD_ALGO) and hosts one
     contiguous block of device ids (dealt in rows of the minor-most axis,
     so that it stays inside a process, unless there are fewer rows than
     processes: the log says so at info level; desc.devices_per_process
     fixes the block size). spmd_run and spmd_attach take only this
     process's devices (spmd_device_is_local), so after spmd_run a process
     holds only their results: check or print those (or do it inside the
     device function). A group inside
     one process runs on threads; a group spanning processes exchanges
     signatures and inputs by tagged messages and reduces in the same
     canonical order with the same kernels, so results are bit-identical
     to the thread backend. Inputs up to 4 KiB travel with the signature; larger ones
     follow in a second message, only to the processes that read them. Small
     operations on 8 processes and more, and unrooted ones with two or more
     devices per process, take the Bruck exchange (ceil(log2 P) messages per
     process), a large psum reduce-scatter + all-gather. A reduction, bcast
     reduce, psum_scatter, scatter or gather over one device per process
     runs a plan of O(log P) steps in the same canonical order (recursive
     doubling when small; across hosts when large Rabenseifner, scatter +
     all-gather (a bcast over 3 to 8 processes: a pipeline through them in
     16 pieces, so each host's link carries it once), reduce-scatter +
     gather; psum_scatter by recursive halving
     across hosts or from 8 processes on when small; small scatters and
     gathers on binomial trees there, small bcasts and reduces across hosts
     from 8 processes on; an all_gather across hosts over a power of two
     of processes, large or with several devices a process, recursive
     doubling from the farthest process in: (H-1)/H of it leaves each host;
     a large one elsewhere across hosts Bruck). Several devices a process,
     an equal power-of-two block of the group in each: a reduction's
     members combine first and one partial a process crosses; a large
     all_to_all sends its blocks in pairwise order, at most 8 in flight at
     once (spmd_counters.inflight); in
     a large all_gather or all_to_all a device alone in its process in the
     group copies its own chunk while the others' data comes. Processes of
     one host pass messages through shared-memory rings (SPMD_SHM_LANE).
     Pin the processes for benchmarks (tools/spmdrun --bind cpu, like mpirun
     --bind-to core).
     A dead process turns into SPMD_ERR_PEER_LOST naming it; a silent one
     into SPMD_ERR_TIMEOUT naming the devices not heard from. A mesh that
     breaks in one process is announced to the others, whose calls on it
     then end with the same status, naming that process; a call that
     starts after the announcement came fails with SPMD_ERR_BROKEN, as on
     threads (within ~2 ms of its arrival a call may miss it). send completes
     once the transport has sent the message (the receiver need not have
     come). spmd_shard_map shares the devices' output blocks, so every
     process gets the whole outputs. A SIGKILLed process can leave files in
     /dev/shm; tools/spmdrun removes those provably its job's.

   ENVIRONMENT (a variable overrides the matching desc field; for
   SPMD_DEVICES_PER_PROCESS and SPMD_BACKEND a field that is set wins)
     SPMD_TIMEOUT_MS   deadline of every wait, ms (default 60000)
     SPMD_CHECK        1: check mode on, 2: and call sites (see DEADLINES), 0: off
     SPMD_LOG_LEVEL    off, error, warn (default), info, debug
     SPMD_SPIN_US      how long a wait spins (yielding briefly every 20 us)
                       before it yields for good (default 1000; 0 when the
                       machine runs more devices than it has CPUs, other
                       processes' counted); a fiber on libfabric polls
                       that long between the others' turns before it parks
     SPMD_YIELD_US     how long it then yields before sleeping (default 200)
     SPMD_SCHEDULER    threads or fibers: who runs spmd_run's devices (see FIBERS;
                       default: fibers when a process's devices outnumber its CPUs)
     SPMD_CARRIERS     fibers: carrier threads (default: the CPUs available)
     SPMD_SCHED_SEED   fibers: seed of the order in which ready devices run
     SPMD_ALGO         eager, split, bruck, rd or rab: force an algorithm (bench);
                       across processes eager = direct exchange, split =
                       reduce-scatter + all-gather, bruck = every input to every
                       process in ceil(log2 processes) steps (default for small
                       operations from 8 processes on, or unrooted with 2+
                       devices per process where no plan runs); a reduction
                       (or bcast, reduce, psum_scatter: recursive halving
                       under either, all_gather: recursive doubling under
                       either, scatter, gather: binomial trees under either)
                       over one device per process (the reductions, bcast
                       and all_gather also over an equal power-of-two block
                       of devices in each) runs a plan instead: rd =
                       recursive doubling (default for small reductions from
                       8 processes on; bcast, reduce: a binomial tree, their
                       default there across hosts), rab =
                       Rabenseifner (default for large ones from 4 on, when
                       the group crosses the network; bcast: scatter then
                       all-gather, reduce: reduce-scatter then gather); on
                       threads an input larger than eager's slot runs split,
                       and messages say so; each applies to the calls whose
                       kind has it (spmd_opts.algo naming another kind's
                       algorithm is SPMD_ERR_INVALID)
     SPMD_TRACE_DEPTH  calls each device's flight recorder keeps (default 64,
                       desc.trace_depth; 0 here or a negative desc field: off)
     SPMD_REPORT_SIGNAL  USR1, USR2 or a signal number: on that signal every
                       mesh of the process logs its report (spmd_report) at
                       error level (the handler only writes to a pipe)
     SPMD_TRACE        path: at mesh destroy, write every call of this
                       process's devices as Chrome-trace JSON (Perfetto,
                       chrome://tracing; pid = process index, tid = device,
                       args: bytes, algorithm, axes, seq; times then from
                       CLOCK_MONOTONIC, not the recorder's coarse clock);
                       %p in the path becomes the process index, so each
                       process writes its own file (merge by concatenating
                       the traceEvents arrays); an unwritable path: a
                       warning at mesh creation, the run goes on
     SPMD_FAULTS       fault plan for tests (desc.faults; both backends, each
                       process applying its own devices' faults), e.g.
                       "device=3,seq=17,kind=delay:50;device=1,seq=5,
                       kind=skip": device 3's call #17 (the call numbers of
                       spmd_report, refused calls included) is held 50 ms,
                       device 1's call #5 returns SPMD_OK without joining,
                       as a forgotten call: its next call over the group
                       pairs with its peers' current one (docs/faults.md:
                       a mismatch, or out-of-step data); kind=lose: the device is lost
                       (threads: its calls and its peers' fail with
                       SPMD_ERR_PEER_LOST; libfabric: its process ends with
                       status 4; lose:posted, lose:done and lose:step:K end
                       it later in the call, lose:step:K before step K of
                       its plan across processes); kind=exit: the process ends with status 3;
                       a bad token: SPMD_ERR_INVALID from mesh creation,
                       naming it
     libfabric backend (see SEVERAL PROCESSES):
     SPMD_BACKEND      threads or libfabric: overrides the default choice
                       (libfabric when compiled in and started as one of
                       several processes)
     SPMD_NUM_PROCESSES, SPMD_PROCESS_ID   the job's layout (else Slurm's,
                       Open MPI's or PMI's variables)
     SPMD_COORDINATOR  host:port ([v6addr]:port) where process 0 listens
                       (under Slurm: the first host of the step)
     SPMD_COORDINATOR_PORT   under Slurm without SPMD_COORDINATOR: its port
                       (default derived from the job and step ids)
     SPMD_JOB_KEY      shared secret of the job (tools/spmdrun makes one;
                       under Slurm slurm:<job>.<step>)
     SPMD_BOOT_TIMEOUT_MS   deadline of the whole bootstrap (default: the
                       deadline of the first libfabric mesh made)
     SPMD_BOOT_CONN_TIMEOUT_MS   a connection to the coordinator must finish
                       its handshake within this (default 5000)
     SPMD_PROVIDER     libfabric provider: tcp, shm, net, ... (else
                       FI_PROVIDER; default: shm when every process is on
                       one host, else the first)
     SPMD_SOCKET_IFNAME   interface for the bootstrap and the tcp provider
     SPMD_DEVICES_PER_PROCESS   devices each process hosts (desc field wins)
     SPMD_HOST         the host a process counts as, for the lane and the
                       choice of shm (default: its host name): containers
                       of one machine sharing /dev/shm set one value
     SPMD_PROGRESS_THREAD   1: a thread drives the transport while callers
                       compute between start and wait
     SPMD_FABRIC_STRICT     1: run any provider through the paths verbs and
                       EFA demand (every buffer registered, fi_context2,
                       8 KiB messages)
     SPMD_FABRIC_CTS   1/0: large messages wait for the receiver's
                       clear-to-send (default on for shm and net)
     SPMD_FABRIC_SEGMENT   bytes: large messages go as segments of this
                       size, 8 in flight (default 1 MiB within a host, shm
                       whole; to another host 256 KiB, 2 in flight)
     SPMD_SHM_LANE     0: no shared-memory lane; default (1): messages
                       between processes of one host go through rings in
                       shared memory, not libfabric (at most 8 KiB inline,
                       larger ones streamed through bulk rings once their
                       receive is posted); small: only those of at most
                       8 KiB (also the case with SPMD_FABRIC_STRICT=1)
     SPMD_QUICK_EXCHANGE   0: meshes made from then on send small blocking
                       collectives between processes through the general
                       exchange even where the quick one fits
                       (for comparisons; the default is 1)

   CONFIGURATION MACROS (define before the include)
     SPMDCOLL_IMPLEMENTATION   compile the implementation into this file
     SPMD_STATIC               make every function static (private copy per file)
     SPMD_API                  override the linkage of the public functions
     SPMD_WARN_UNUSED          gcc/clang warn where the status of a call is
                               ignored (warn_unused_result on every function
                               returning spmd_status but spmd_mesh_destroy).
                               Opt-in: gcc's warning is not silenced by a
                               (void) cast; read the status or test it
     SPMDCOLL_LIBFABRIC        compile the libfabric backend in (link
                               -lfabric); the thread backend stays too
     SPMD_MALLOC(sz)/SPMD_FREE(p)   replace malloc/free (define both or none)
     SPMD_ASSERT(x)            replace assert() for internal invariants
     SPMD_NO_DISPATCH          x86-64: no AVX2/F16C copies of the hot reduction
                               kernels (the baseline ones run everywhere; the
                               default at -O0)
     SPMD_FIBER_UCONTEXT       fibers switch with swapcontext instead of the
                               hand-written switch (x86-64 and arm64 ELF)
     Limits: SPMD_MAX_AXES 8, SPMD_MAX_DEVICES 16777214 (memory comes
     first: docs/fibers.md), SPMD_MAX_AXIS_NAME 31,
     SPMD_MAX_RANK 8, SPMD_MAX_SHARD_ARGS 8, SPMD_MAX_RESHARD_STEPS 40.

   LINK FLAGS
     -pthread (threads backend); -lfabric when SPMDCOLL_LIBFABRIC is set.

   License: MIT, see the end of the file.
*/
#ifndef SPMDCOLL_H_INCLUDED
#define SPMDCOLL_H_INCLUDED

#if defined(SPMDCOLL_IMPLEMENTATION) && !defined(_GNU_SOURCE) && !defined(__cplusplus)
#define _GNU_SOURCE 1 /* POSIX and futex declarations for the implementation */
#endif
#include <stddef.h>
#include <stdint.h>

#define SPMD_VERSION_MAJOR 0
#define SPMD_VERSION_MINOR 2
#define SPMD_VERSION_PATCH 0
#define SPMD_VERSION_STRING "0.2.0"

#ifndef SPMD_API
#ifdef SPMD_STATIC
#if defined(__GNUC__)
#define SPMD_API static __attribute__((unused))
#else
#define SPMD_API static
#endif
#else
#define SPMD_API extern
#endif
#endif

/* SPMD_MUST: a status the caller should read (SPMD_WARN_UNUSED: warned if not). */
#if defined(SPMD_WARN_UNUSED) && (defined(__GNUC__) || defined(__clang__))
#define SPMD_MUST __attribute__((warn_unused_result))
#else
#define SPMD_MUST
#endif

#define SPMD_MAX_AXES 8          /* axes of a mesh */
#define SPMD_MAX_DEVICES 16777214 /* devices of a mesh (2^24 - 2: group counters pack a member count in 24 bits) */
#define SPMD_MAX_AXIS_NAME 31    /* characters of an axis name */
#define SPMD_MAX_RANK 8          /* dimensions of an array view */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statuses: one list, expanded into the enum and the string tables ---- */
#define SPMD_STATUS_LIST(X)                                                          \
    X(SPMD_OK, "success")                                                            \
    X(SPMD_ERR_INVALID, "invalid argument")                                          \
    X(SPMD_ERR_NULL, "NULL pointer where a value is required")                       \
    X(SPMD_ERR_AXIS, "unknown axis name")                                            \
    X(SPMD_ERR_DUP_AXIS, "axis named twice")                                         \
    X(SPMD_ERR_GROUPS, "invalid axis_index_groups")                                  \
    X(SPMD_ERR_DTYPE, "operation not defined for this dtype")                        \
    X(SPMD_ERR_SIZE, "invalid size")                                                 \
    X(SPMD_ERR_OVERFLOW, "size overflow")                                            \
    X(SPMD_ERR_OVERLAP, "send and recv buffers overlap")                             \
    X(SPMD_ERR_SHAPE, "array shape does not fit the operation")                      \
    X(SPMD_ERR_PERM, "invalid permutation")                                          \
    X(SPMD_ERR_ROOT, "root, source or destination outside the group")                \
    X(SPMD_ERR_TIMEOUT, "timed out waiting for peers")                               \
    X(SPMD_ERR_MISMATCH, "devices of a group called different collectives")          \
    X(SPMD_ERR_BROKEN, "mesh broken by an earlier failure")                          \
    X(SPMD_ERR_NOMEM, "out of memory")                                               \
    X(SPMD_ERR_UNSUPPORTED, "not supported")                                         \
    X(SPMD_ERR_BUSY, "busy")                                                         \
    X(SPMD_ERR_STATE, "call not valid in this state")                                \
    X(SPMD_ERR_SYSTEM, "system call failed")                                         \
    X(SPMD_ERR_PEER_LOST, "a peer process was lost (exited, killed or unreachable)")      \
    X(SPMD_ERR_DEADLOCK, "deadlock: the devices waited for can never arrive")            \
    X(SPMD_ERR_REFUSED, "a peer refused its arguments: the call is void on every member")

typedef enum spmd_status {
#define SPMD__STATUS_ENUM(name, text) name,
    SPMD_STATUS_LIST(SPMD__STATUS_ENUM)
#undef SPMD__STATUS_ENUM
    SPMD_STATUS_COUNT
} spmd_status;

/* Element types. 0 is not a type, so a zeroed field is caught. */
typedef enum spmd_dtype {
    SPMD_DTYPE_NONE = 0,
    SPMD_BOOL,   /* one byte, 0 is false, anything else true */
    SPMD_I8, SPMD_U8, SPMD_I16, SPMD_U16, SPMD_I32, SPMD_U32, SPMD_I64, SPMD_U64,
    SPMD_F16,    /* IEEE binary16 stored as uint16_t */
    SPMD_BF16,   /* bfloat16 stored as uint16_t */
    SPMD_F32, SPMD_F64,
    SPMD_C64,      /* complex64: two f32, real then imaginary (C99 float complex, numpy) */
    SPMD_C128,     /* complex128: two f64, real then imaginary */
    SPMD_F8E4M3FN, /* ml_dtypes float8_e4m3fn: one byte, bias 7, no inf, NaN 0x7f/0xff */
    SPMD_F8E5M2,   /* ml_dtypes float8_e5m2: one byte, bias 15, IEEE-like (inf, NaN) */
    SPMD_DTYPE_COUNT
} spmd_dtype;

/* Reduction operators (spmd_allreduce; psum etc. are shorthands). */
typedef enum spmd_op {
    SPMD_OP_NONE = 0,
    SPMD_OP_SUM, SPMD_OP_PROD, SPMD_OP_MAX, SPMD_OP_MIN, SPMD_OP_MEAN,
    SPMD_OP_ARGMAX, SPMD_OP_ARGMIN,
    SPMD_OP_COUNT
} spmd_op;

typedef enum spmd_backend {
    SPMD_BACKEND_DEFAULT = 0,  /* libfabric when compiled in and launched so, else threads */
    SPMD_BACKEND_THREADS,
    SPMD_BACKEND_LIBFABRIC,
    SPMD_BACKEND_COUNT
} spmd_backend;

typedef enum spmd_log_level {
    SPMD_LOG_DEFAULT = 0,      /* SPMD_LOG_LEVEL from the environment, else warn */
    SPMD_LOG_OFF, SPMD_LOG_ERROR, SPMD_LOG_WARN, SPMD_LOG_INFO, SPMD_LOG_DEBUG,
    SPMD_LOG_LEVEL_COUNT
} spmd_log_level;

typedef enum spmd_check {
    SPMD_CHECK_DEFAULT = 0,    /* SPMD_CHECK from the environment, else off */
    SPMD_CHECK_OFF, SPMD_CHECK_ON,
    SPMD_CHECK_SITES,          /* ON, and every member's call site must be the same (>>check mode) */
    SPMD_CHECK_COUNT
} spmd_check;

/* Algorithm for a call (spmd_opts.algo, or env SPMD_ALGO for every call).
   One that is not among the call's kind's (rd or rab for an all_gather,
   bruck for a ppermute) is SPMD_ERR_INVALID in spmd_opts; SPMD_ALGO
   applies where it fits. Where the layout does not allow it (rd over two
   devices of a process, any of these on threads) the default runs. */
typedef enum spmd_algo {
    SPMD_ALGO_DEFAULT = 0,
    SPMD_ALGO_EAGER,   /* inputs copied into shared slots, every device reduces (small) */
    SPMD_ALGO_SPLIT,   /* zero-copy: slices reduced from peers' buffers, written to all */
    SPMD_ALGO_BRUCK,   /* across processes: every input reaches every process in
                          log2(processes) steps (small operations, many processes);
                          on threads the same as the default */
    SPMD_ALGO_RD,      /* across processes, a reduction, bcast or reduce over one
                          device per process: recursive doubling, ceil(log2 P)
                          messages of the whole vector (small), a bcast's or
                          reduce's binomial tree (an all_gather: recursive
                          doubling under rd and rab); elsewhere the default */
    SPMD_ALGO_RAB,     /* ... reduce-scatter by recursive halving, then all-gather
                          by recursive doubling (Rabenseifner: large); a bcast
                          scatters then all-gathers, a reduce reduce-scatters
                          then gathers (about 2n through the root) */
    SPMD_ALGO_COUNT
} spmd_algo;

/* Who runs the devices of spmd_run in a process (desc.scheduler, env
   SPMD_SCHEDULER=threads|fibers). */
typedef enum spmd_scheduler {
    SPMD_SCHEDULER_DEFAULT = 0, /* env SPMD_SCHEDULER, else fibers when the process's devices
                                   outnumber the CPUs available to it, else threads */
    SPMD_SCHEDULER_THREADS,     /* one OS thread per device */
    SPMD_SCHEDULER_FIBERS,      /* devices as fibers on a few carrier threads */
    SPMD_SCHEDULER_COUNT
} spmd_scheduler;

typedef struct spmd_mesh spmd_mesh;  /* a mesh of devices */
typedef struct spmd_dev spmd_dev;    /* one device; used by one thread at a time */
typedef struct spmd_req spmd_req;    /* an asynchronous collective in flight */

/* Logging hook: device is -1 for messages about the mesh as a whole. */
typedef void (*spmd_log_fn)(void *user, spmd_log_level level, int device, const char *msg);

/* Allocator hooks: both or neither. alloc returns memory aligned to align
   (a power of two, at most 4096) or NULL. */
typedef struct spmd_allocator {
    void *(*alloc)(size_t size, size_t align, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} spmd_allocator;

/* Mesh description. Zero fields mean defaults. */
typedef struct spmd_mesh_desc {
    int ndim;                               /* 1..SPMD_MAX_AXES */
    int shape[SPMD_MAX_AXES];               /* each >= 1 (else SPMD_ERR_SIZE); product <= SPMD_MAX_DEVICES
                                               (else SPMD_ERR_SIZE) */
    const char *axis_names[SPMD_MAX_AXES];  /* distinct, 1..31 chars, no ',' '*' or spaces */
    spmd_backend backend;
    int64_t timeout_ms;                     /* default 60000; env SPMD_TIMEOUT_MS wins; libfabric: the
                                               first mesh's also bounds the bootstrap */
    spmd_check check;
    spmd_log_level log_level;
    spmd_log_fn log_fn;                     /* NULL: stderr */
    void *log_user;
    spmd_allocator allocator;               /* zero: SPMD_MALLOC/SPMD_FREE */
    int max_inflight;                       /* requests in flight per device and group; 0: 16, at most 1024;
                                               rounded up to a power of two */
    size_t thread_stack_size;               /* stack of each device of spmd_run (thread or fiber); 0: the
                                               system default for threads, 256 KiB for fibers; else
                                               16 KiB..1 GiB (else SPMD_ERR_INVALID) */
    int devices_per_process;                /* libfabric: devices each process hosts; 0: env
                                               SPMD_DEVICES_PER_PROCESS, else the mesh cut into one
                                               contiguous block per process, in rows of the minor-most
                                               axis when there are as many rows as processes */
    int trace_depth;                        /* flight recorder: calls kept per device; 0: 64, negative:
                                               off; env SPMD_TRACE_DEPTH wins (0 there: off) */
    const char *faults;                     /* fault plan for tests, both backends: "device=3,seq=17,kind=lose;
                                               device=1,seq=5,kind=delay:50"; kinds delay:MS, skip, lose,
                                               exit, corrupt (libfabric: also lose:posted, lose:done,
                                               lose:step:K); env
                                               SPMD_FAULTS wins (docs/faults.md) */
    spmd_scheduler scheduler;               /* threads or fibers (see the FIBERS notes at the top) */
    int carriers;                           /* fibers: carrier threads; 0: the CPUs available; at most
                                               1024 (else SPMD_ERR_INVALID); env SPMD_CARRIERS wins */
    uint64_t sched_seed;                    /* fibers: 0: ready devices run in FIFO order; else the next
                                               one is drawn by a generator seeded with it (one carrier:
                                               a reproducible run); env SPMD_SCHED_SEED wins */
} spmd_mesh_desc;

/* Per-call options; NULL means all defaults. */
typedef struct spmd_opts {
    const int *groups;    /* axis_index_groups, flattened: axis_size entries */
    int group_size;       /* entries per group; must divide the axis size */
    int64_t timeout_ms;   /* 0: the mesh default */
    spmd_algo algo;       /* 0: chosen by size */
} spmd_opts;

typedef void (*spmd_fn)(spmd_dev *dev, void *arg);

/* A row-major contiguous array, for the collectives whose result depends on
   the shape. rank 0 is a scalar (one element). */
typedef struct spmd_array {
    void *data;
    spmd_dtype dtype;
    int rank;                       /* 0..SPMD_MAX_RANK */
    int64_t shape[SPMD_MAX_RANK];   /* each >= 0 */
} spmd_array;

/* ---- library ---------------------------------------------------------- */
SPMD_API const char *spmd_version(void);                    /* "0.2.0" */
SPMD_API const char *spmd_status_string(spmd_status s);     /* "timed out waiting for peers" */
SPMD_API const char *spmd_status_name(spmd_status s);       /* "SPMD_ERR_TIMEOUT" */
SPMD_API size_t spmd_dtype_size(spmd_dtype t);              /* 0 for an invalid dtype */
SPMD_API const char *spmd_dtype_name(spmd_dtype t);         /* "f32" */
SPMD_API const char *spmd_op_name(spmd_op op);              /* "sum" */
SPMD_API const char *spmd_backend_name(spmd_backend b);     /* "default", "threads", "libfabric" */
SPMD_API const char *spmd_scheduler_name(spmd_scheduler s); /* "default", "threads", "fibers" */
/* Scalar conversions used by the kernels (round to nearest even, NaN kept;
   fp8 beyond its largest finite value: the DTYPES rule in the manual). */
SPMD_API uint16_t spmd_f32_to_f16(float f);
SPMD_API float spmd_f16_to_f32(uint16_t h);
SPMD_API uint16_t spmd_f32_to_bf16(float f);
SPMD_API float spmd_bf16_to_f32(uint16_t h);
SPMD_API uint8_t spmd_f32_to_f8e4m3fn(float f);
SPMD_API float spmd_f8e4m3fn_to_f32(uint8_t b);
SPMD_API uint8_t spmd_f32_to_f8e5m2(float f);
SPMD_API float spmd_f8e5m2_to_f32(uint8_t b);

/* The reduction kernel the collectives use, on local buffers: out[i] = op
   over ins[0..n_in-1][i], in the canonical order (a tree over n_in inputs,
   above), with the dtype rules of spmd_allreduce (G = n_in for pmean). out may be one of the inputs.
   Thread-safe; no mesh needed. For benchmarks and for local reductions. */
SPMD_API SPMD_MUST spmd_status spmd_reduce_local(void *out, const void *const *ins, int n_in, size_t count,
                                       spmd_dtype dt, spmd_op op);

/* ---- mesh ------------------------------------------------------------- */
/* Create a mesh. Thread-safe; meshes are independent of each other. */
SPMD_API SPMD_MUST spmd_status spmd_mesh_create(const spmd_mesh_desc *desc, spmd_mesh **out);
/* Destroy a mesh. Fails with SPMD_ERR_BUSY (and frees nothing) while devices
   are attached; reports requests never waited. */
SPMD_API spmd_status spmd_mesh_destroy(spmd_mesh *m);
SPMD_API int spmd_mesh_size(const spmd_mesh *m);            /* devices */
SPMD_API int spmd_mesh_ndim(const spmd_mesh *m);
SPMD_API const char *spmd_mesh_axis_name(const spmd_mesh *m, int dim);  /* NULL if out of range */
/* Product of the sizes of the named axes ("row" or "row,col"); a negative
   spmd_status on error. */
SPMD_API int spmd_mesh_axis_size(const spmd_mesh *m, const char *axes);
SPMD_API spmd_backend spmd_mesh_backend(const spmd_mesh *m);
/* Who runs spmd_run's devices: SPMD_SCHEDULER_THREADS or _FIBERS. */
SPMD_API spmd_scheduler spmd_mesh_scheduler(const spmd_mesh *m);
/* SPMD_OK, or the status that broke the mesh (timeout, mismatch). */
SPMD_API SPMD_MUST spmd_status spmd_mesh_status(const spmd_mesh *m);
SPMD_API const char *spmd_mesh_error(const spmd_mesh *m);  /* why it broke, or "" */
/* What went wrong, in text: the groups in trouble (which member reached
   which operation, which did not arrive) and what every device is doing
   now (blocked in which call, running its own code for how long, returned
   from its function, failed); when nothing is wrong, each device's last
   calls. device -1: all of this process's devices; else that one (all of
   its recorded calls). Written into buf (NUL-terminated, cut when len is
   short; buf may be NULL with len 0); returns the length of the whole text,
   as snprintf does. From the flight recorder: desc.trace_depth calls per
   device (default 64), env SPMD_TRACE_DEPTH (0: off). Any thread, any time
   while the mesh exists; logged at error level when the mesh breaks, and
   on the signal env SPMD_REPORT_SIGNAL names (USR1, USR2 or a number; the
   log function is then called from a thread of the library). Times have
   the coarse clock's resolution (a few ms) unless SPMD_TRACE is set. On
   libfabric, a device of another process shows the line its process sent
   when the mesh broke (over the bootstrap connection), or "not heard
   from"; those lines are logged again when spmd_run ends (or at
   spmd_mesh_destroy), once they came or a twentieth of the mesh's deadline
   after the break passed (50 ms to 1 s; no call waits for them). */
SPMD_API size_t spmd_report(spmd_mesh *m, int device, char *buf, size_t len);
/* The flight recorder notes file:line as the call site of the device's next
   call (file must outlive the mesh: __FILE__ does). SPMD_AT(d, call) does it
   for one call: SPMD_AT(d, spmd_psum(d, x, x, n, SPMD_F32, "i", NULL)). Only
   the device's own thread. Under SPMD_CHECK_SITES the members' sites must
   agree: this one, else the caller's return address. */
SPMD_API void spmd_set_site(spmd_dev *d, const char *file, int line);
#define SPMD_AT(d, call) (spmd_set_site((d), __FILE__, __LINE__), (call))
/* Processes (libfabric backend): how many take part, which one this is, and
   which hosts a device (devices are numbered row-major and each process
   hosts one contiguous block). On threads: 1, 0 and 0. spmd_device_is_local
   is 1 when this process hosts the device: only those run in spmd_run and
   can be attached. -SPMD_ERR_NULL / -SPMD_ERR_INVALID on bad arguments. */
SPMD_API int spmd_mesh_process_count(const spmd_mesh *m);
SPMD_API int spmd_mesh_process_id(const spmd_mesh *m);
SPMD_API int spmd_device_process(const spmd_mesh *m, int device);
SPMD_API int spmd_device_is_local(const spmd_mesh *m, int device);

/* What this process sent over the mesh's transport since the mesh was made
   or spmd_mesh_counters_reset: messages, bytes and the distinct processes
   sent to, in all, per link class (the shared-memory lane to a process on
   this host, or the libfabric provider) and per operation kind
   (spmd_count_kind_name: "allreduce", "all_gather", "send"...). Every
   message counts (headers, data, clear-to-send); the bootstrap's control
   traffic does not. inflight: for all_to_all and ragged_all_to_all (per
   kind, and their largest in total), the most data messages one device's
   call had in flight at once: their large inputs go to the peers in
   pairwise order, at most 8 at a time. Exact, so tests can assert them.
   All zero on the threads backend, where nothing leaves the process. */
typedef enum spmd_link { SPMD_LINK_LANE = 0, SPMD_LINK_NETWORK, SPMD_LINK_COUNT } spmd_link;
#define SPMD_COUNT_KINDS 16
typedef struct spmd_count {
    uint64_t messages, bytes;
    int peers;    /* distinct processes */
    int inflight; /* all_to_all, ragged_all_to_all: the most data sends of one call in flight at once */
} spmd_count;
typedef struct spmd_counters {
    spmd_count total;
    spmd_count link[SPMD_LINK_COUNT];
    spmd_count kind[SPMD_COUNT_KINDS];
} spmd_counters;
SPMD_API SPMD_MUST spmd_status spmd_mesh_counters(const spmd_mesh *m, spmd_counters *out);
SPMD_API SPMD_MUST spmd_status spmd_mesh_counters_reset(spmd_mesh *m);
SPMD_API const char *spmd_count_kind_name(int kind); /* "invalid" outside 0..SPMD_COUNT_KINDS-1 */

/* ---- running devices -------------------------------------------------- */
/* Run fn(dev, arg) on one new thread per device of this process (every
   device on threads; spmd_device_is_local on libfabric), or one fiber per
   device on a few carrier threads (desc.scheduler, see FIBERS), and join
   them. Returns what the caller needs to know: if the mesh broke (a
   timeout, a mismatch, a deadlock, a lost process, a request left in
   flight), the status that broke it -- the same in every process, whether
   this one's call failed first or was told; else the earliest failure a
   device did not handle, i.e. the failure of a device's last call (an
   error followed by another call of the same device, e.g. bad input the
   device checked for on purpose, is handled); else SPMD_OK. SPMD_ERR_BUSY (nothing run) while
   another run is in progress or any device is attached. Across processes
   (libfabric) it ends with an agreement: it returns once every process's
   run ended (bounded by the bootstrap's deadline plus the mesh's), and if
   any process's mesh broke, every process returns the break of the
   lowest-numbered such process, with the same reason in spmd_mesh_error
   everywhere, even one whose own calls all succeeded (a call can
   complete from messages its peers sent just before they gave up on it:
   docs/recovery.md); after a lost process every survivor returns
   SPMD_ERR_PEER_LOST naming the lowest-numbered process it knows lost. */
SPMD_API SPMD_MUST spmd_status spmd_run(spmd_mesh *m, spmd_fn fn, void *arg);
/* For programs with their own threads: the calling thread becomes device k
   until spmd_detach (always an OS thread: the fiber scheduler is spmd_run's).
   Each device is attached by at most one thread at a time
   (SPMD_ERR_BUSY otherwise). The first attach of a device on a thread makes
   its scratch (3 pointers per mesh device; SPMD_ERR_NOMEM without it).
   spmd_detach may be called from another thread once the device's thread is
   done with it. */
SPMD_API SPMD_MUST spmd_status spmd_attach(spmd_mesh *m, int device, spmd_dev **out);
SPMD_API SPMD_MUST spmd_status spmd_detach(spmd_dev *d);

/* ---- recovery: shrink after a loss (docs/recovery.md) ------------------ */
/* Options of spmd_mesh_shrink; zero fields mean defaults. */
typedef struct spmd_shrink_desc {
    const char *faults;   /* the new mesh's fault plan (tests), as desc.faults; NULL: none (SPMD_FAULTS,
                             written for the first mesh's device ids, never applies to a shrunk mesh) */
} spmd_shrink_desc;
/* After spmd_run returned (SPMD_ERR_PEER_LOST, or any status), make a new
   mesh of the survivors: along `axis` (one axis name), every slice (index
   of that axis) that holds a lost device is dropped, the other axes keep
   their size; the devices left keep their order and are renumbered
   row-major, spmd_device_origin says which old device each one is. The new
   mesh has the old one's settings (backend, timeout, check, log, allocator,
   scheduler, ...) and a fresh state; the old one is left as it is, destroy
   it as usual. Nothing lost: a mesh of the same shape. desc may be NULL.
   SPMD_ERR_PEER_LOST when every slice along the axis lost a device (shrink
   along another axis, or start again) or the coordinator (process 0) is
   gone, SPMD_ERR_AXIS for a name that is not one axis of the mesh,
   SPMD_ERR_BUSY while the mesh runs or has devices attached; the reason is
   logged at error level. *out is NULL on error.
   Lost devices: those the fault plan lost (kind=lose), and on libfabric
   every device of a process that is gone. Across processes every survivor
   calls it (collective): the survivors agree through the coordinator on
   the processes gone, counting one that leaves or does not come within
   the deadline during the agreement, so every survivor gets the same mesh;
   each device stays in its process. */
SPMD_API SPMD_MUST spmd_status spmd_mesh_shrink(spmd_mesh *m, const char *axis, const spmd_shrink_desc *desc,
                                      spmd_mesh **out);
/* The devices this mesh lost, in increasing order: up to cap ids written to
   devices (may be NULL with cap 0); returns how many were lost (a negative
   spmd_status on bad arguments). */
SPMD_API int spmd_mesh_lost(const spmd_mesh *m, int *devices, int cap);
/* For a mesh made by spmd_mesh_shrink: the id the device had in the mesh it
   was made from; for any other mesh: device. -SPMD_ERR_INVALID when out of
   range. */
SPMD_API int spmd_device_origin(const spmd_mesh *m, int device);

/* ---- device queries (any thread holding the device) ------------------- */
SPMD_API int spmd_device_id(const spmd_dev *d);
SPMD_API spmd_mesh *spmd_device_mesh(const spmd_dev *d);
/* Writes the device's mesh coordinates; returns ndim. */
SPMD_API int spmd_device_coords(const spmd_dev *d, int coords[SPMD_MAX_AXES]);
/* Index of this device along the named axes (linearised in the order named)
   and their total size; a negative spmd_status on error (last error set). */
SPMD_API int spmd_axis_index(spmd_dev *d, const char *axes);
SPMD_API int spmd_axis_size(spmd_dev *d, const char *axes);
/* The last error message of this device ("" if none). */
SPMD_API const char *spmd_last_error(const spmd_dev *d);

/* ---- reductions ------------------------------------------------------- */
/* recv[i] = op over the group of send[i]; count elements of dtype dt.
   send == recv is in place. Blocking: returns when recv holds the result. */
SPMD_API SPMD_MUST spmd_status spmd_allreduce(spmd_dev *d, const void *send, void *recv, size_t count,
                                    spmd_dtype dt, spmd_op op, const char *axes,
                                    const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_psum(spmd_dev *d, const void *send, void *recv, size_t count,
                               spmd_dtype dt, const char *axes, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_pmean(spmd_dev *d, const void *send, void *recv, size_t count,
                                spmd_dtype dt, const char *axes, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_pmax(spmd_dev *d, const void *send, void *recv, size_t count,
                               spmd_dtype dt, const char *axes, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_pmin(spmd_dev *d, const void *send, void *recv, size_t count,
                               spmd_dtype dt, const char *axes, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_pprod(spmd_dev *d, const void *send, void *recv, size_t count,
                                spmd_dtype dt, const char *axes, const spmd_opts *opts);
/* recv[i] = index in the group of the device with the max (min) send[i].
   One axis only; no axis_index_groups (as in JAX). */
SPMD_API SPMD_MUST spmd_status spmd_pargmax(spmd_dev *d, const void *send, int32_t *recv, size_t count,
                                  spmd_dtype dt, const char *axis, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_pargmin(spmd_dev *d, const void *send, int32_t *recv, size_t count,
                                  spmd_dtype dt, const char *axis, const spmd_opts *opts);
/* Every device of the group arrives before any leaves. */
SPMD_API SPMD_MUST spmd_status spmd_barrier(spmd_dev *d, const char *axes, const spmd_opts *opts);

/* ---- array views -------------------------------------------------------- */
SPMD_API spmd_array spmd_array_1d(void *data, spmd_dtype dt, int64_t n0);
SPMD_API spmd_array spmd_array_2d(void *data, spmd_dtype dt, int64_t n0, int64_t n1);
SPMD_API spmd_array spmd_array_3d(void *data, spmd_dtype dt, int64_t n0, int64_t n1, int64_t n2);
SPMD_API spmd_array spmd_array_nd(void *data, spmd_dtype dt, int rank, const int64_t *shape);

/* ---- data movement, with JAX's semantics --------------------------------
   x is this device's input, out its output; out's shape must be the one JAX
   would produce (else SPMD_ERR_SHAPE, naming both). Dimension arguments may
   be negative, counted from the end. G is the group size, i this device's
   index in the group. */

/* untiled: out = x with a new dimension of size G at `axis` (block j = x_j);
   tiled: out = x with dimension `axis` multiplied by G (blocks concatenated). */
SPMD_API SPMD_MUST spmd_status spmd_all_gather(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                     const char *axes, int axis, int tiled, const spmd_opts *opts);
/* Same data as all_gather; JAX's variant whose result is typed invariant
   (replicated) over the axes. Here the two are the same operation. */
SPMD_API SPMD_MUST spmd_status spmd_all_gather_invariant(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                               const char *axes, int axis, int tiled,
                                               const spmd_opts *opts);
/* The psum, split along scatter_dimension into G chunks, chunk i kept:
   untiled needs x.shape[dim] == G and drops the dimension; tiled needs it
   divisible by G and divides it. */
SPMD_API SPMD_MUST spmd_status spmd_psum_scatter(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                       const char *axes, int scatter_dimension, int tiled,
                                       const spmd_opts *opts);
/* x split along split_axis into G chunks, chunk j sent to device j; the
   chunks received are placed in sender order along concat_axis. untiled:
   x.shape[split_axis] == G and out shape = insert(delete(shape, split_axis),
   concat_axis, G); tiled: split_axis divided by G, concat_axis multiplied. */
SPMD_API SPMD_MUST spmd_status spmd_all_to_all(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                     const char *axes, int split_axis, int concat_axis, int tiled,
                                     const spmd_opts *opts);
/* all_to_all(x, axis, axis), untiled: x.shape[axis] must be G. */
SPMD_API SPMD_MUST spmd_status spmd_pswapaxes(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                    const char *axes, int axis, const spmd_opts *opts);
/* perm: npairs (source, destination) pairs of group indices, flattened
   {s0, d0, s1, d1, ...}; sources unique, destinations unique. Device d gets
   x of its source; a device that is no destination gets zeros. */
SPMD_API SPMD_MUST spmd_status spmd_ppermute(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                   const char *axes, const int *perm, int npairs,
                                   const spmd_opts *opts);
/* perm: G entries, a permutation; out on device i comes from device perm[i]. */
SPMD_API SPMD_MUST spmd_status spmd_pshuffle(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                   const char *axes, const int *perm, const spmd_opts *opts);
/* x of device `source` on every device (x is not read, nor checked, on
   the others). */
SPMD_API SPMD_MUST spmd_status spmd_pbroadcast(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                     const char *axes, int source, const spmd_opts *opts);
/* The two halves of a ppermute (JAX's psend/precv): psend publishes x and
   returns at once with a token; precv, called by every device with the same
   axes and perm, receives into out (x's shape; zeros where no pair names this
   device as destination) and finishes the token. Between the two, x belongs
   to the library. The token must be finished by spmd_precv (spmd_wait on it
   returns SPMD_ERR_STATE). */
SPMD_API SPMD_MUST spmd_status spmd_psend(spmd_dev *d, const spmd_array *x, const char *axes, const int *perm,
                                int npairs, const spmd_opts *opts, spmd_req **token);
SPMD_API SPMD_MUST spmd_status spmd_precv(spmd_dev *d, spmd_req *token, const spmd_array *out, const char *axes,
                                const int *perm, int npairs, const spmd_opts *opts);
/* Ragged all_to_all, as JAX: operand (N, ...) and output (M, ...) share the
   trailing dimensions; the four arrays have k entries, k divisible by G, S =
   k / G slices per peer. Slice t of this device for peer j is rows
   input_offsets[j*S+t] .. + send_sizes[j*S+t] of operand, written on device
   j at row output_offsets[j*S+t] of its output; recv_sizes[j*S+t] is the
   size of slice t received from j. Rows of output not written keep their
   values (output is updated in place). Offsets and sizes are checked before
   anything moves (SPMD_ERR_INVALID); a recv_sizes entry that disagrees with
   its sender's send_sizes is SPMD_ERR_MISMATCH. */
SPMD_API SPMD_MUST spmd_status spmd_ragged_all_to_all(spmd_dev *d, const spmd_array *operand, const spmd_array *output,
                                            const int64_t *input_offsets, const int64_t *send_sizes,
                                            const int64_t *output_offsets, const int64_t *recv_sizes,
                                            int64_t k, const char *axes, const spmd_opts *opts);

/* ---- MPI-style operations (mpi4jax's list), within the group of `axes`
   ("*" for the whole mesh). count is per device; root is a group index.
   Rooted results appear only on the root. A buffer not significant on a
   device (recv off the root for gather and reduce, send off the root for
   bcast and scatter) is never read, written or checked there, as in MPI:
   it may be NULL or overlap the other. */
/* recv (G*count) = every device's send, in group order. */
SPMD_API SPMD_MUST spmd_status spmd_allgather(spmd_dev *d, const void *send, void *recv, size_t count,
                                    spmd_dtype dt, const char *axes, const spmd_opts *opts);
/* send and recv hold G*count: block j of send goes to device j, block j of
   recv comes from device j. */
SPMD_API SPMD_MUST spmd_status spmd_alltoall(spmd_dev *d, const void *send, void *recv, size_t count,
                                   spmd_dtype dt, const char *axes, const spmd_opts *opts);
/* recv = send of the root (read on the root only); in place allowed. */
SPMD_API SPMD_MUST spmd_status spmd_bcast(spmd_dev *d, const void *send, void *recv, size_t count,
                                spmd_dtype dt, int root, const char *axes, const spmd_opts *opts);
/* root's recv (G*count) = every device's send, in group order. */
SPMD_API SPMD_MUST spmd_status spmd_gather(spmd_dev *d, const void *send, void *recv, size_t count,
                                 spmd_dtype dt, int root, const char *axes, const spmd_opts *opts);
/* recv = block i of the root's send (G*count, read on the root only). */
SPMD_API SPMD_MUST spmd_status spmd_scatter(spmd_dev *d, const void *send, void *recv, size_t count,
                                  spmd_dtype dt, int root, const char *axes, const spmd_opts *opts);
/* root's recv = op over the group of send (as spmd_allreduce). */
SPMD_API SPMD_MUST spmd_status spmd_reduce(spmd_dev *d, const void *send, void *recv, size_t count,
                                 spmd_dtype dt, spmd_op op, int root, const char *axes,
                                 const spmd_opts *opts);
/* Inclusive prefix: recv on device i = op over devices 0..i of send. */
SPMD_API SPMD_MUST spmd_status spmd_scan(spmd_dev *d, const void *send, void *recv, size_t count,
                               spmd_dtype dt, spmd_op op, const char *axes, const spmd_opts *opts);

/* ---- point to point (MPI-style) -----------------------------------------
   Within the group of `axes`; dest and source are group indices. A send is
   matched by the first posted recv whose source (or SPMD_ANY_SOURCE) and tag
   (or SPMD_ANY_TAG) fit; messages from one source to one destination arrive
   in the order sent. The data is copied straight from the sender's buffer:
   a blocking send returns when its receiver has taken the data (so a device
   must not block-send to itself: use sendrecv or send_start). The received
   message must have the recv's dtype and at most its count (else
   SPMD_ERR_MISMATCH on both sides); info (may be NULL) tells who sent what. */
#define SPMD_ANY_SOURCE (-1)
#define SPMD_ANY_TAG (-1)
typedef struct spmd_recv_info {
    int source;      /* group index of the sender */
    int tag;
    size_t count;    /* elements received */
} spmd_recv_info;
SPMD_API SPMD_MUST spmd_status spmd_send(spmd_dev *d, const void *buf, size_t count, spmd_dtype dt, int dest, int tag,
                               const char *axes, const spmd_opts *opts);
SPMD_API SPMD_MUST spmd_status spmd_recv(spmd_dev *d, void *buf, size_t count, spmd_dtype dt, int source, int tag,
                               const char *axes, const spmd_opts *opts, spmd_recv_info *info);
/* Send to dest and receive from source at once (no deadlock with peers doing
   the same). */
SPMD_API SPMD_MUST spmd_status spmd_sendrecv(spmd_dev *d, const void *sendbuf, size_t sendcount, int dest, int sendtag,
                                   void *recvbuf, size_t recvcount, int source, int recvtag, spmd_dtype dt,
                                   const char *axes, const spmd_opts *opts, spmd_recv_info *info);

/* ---- asynchronous forms ----------------------------------------------- */
/* Start the operation and return at once with *req set (NULL on error).
   The buffers belong to the library until spmd_wait/spmd_test finish it. */
SPMD_API SPMD_MUST spmd_status spmd_allreduce_start(spmd_dev *d, const void *send, void *recv,
                                          size_t count, spmd_dtype dt, spmd_op op,
                                          const char *axes, const spmd_opts *opts,
                                          spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_psum_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                     spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                     spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_barrier_start(spmd_dev *d, const char *axes, const spmd_opts *opts,
                                        spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pmean_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                      spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                      spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pmax_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                     spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                     spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pmin_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                     spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                     spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pprod_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                      spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                      spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pargmax_start(spmd_dev *d, const void *send, int32_t *recv, size_t count,
                                        spmd_dtype dt, const char *axis, const spmd_opts *opts,
                                        spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pargmin_start(spmd_dev *d, const void *send, int32_t *recv, size_t count,
                                        spmd_dtype dt, const char *axis, const spmd_opts *opts,
                                        spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_all_gather_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                           const char *axes, int axis, int tiled,
                                           const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_all_gather_invariant_start(spmd_dev *d, const spmd_array *x,
                                                     const spmd_array *out, const char *axes, int axis,
                                                     int tiled, const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_psum_scatter_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                             const char *axes, int scatter_dimension, int tiled,
                                             const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_all_to_all_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                           const char *axes, int split_axis, int concat_axis,
                                           int tiled, const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pswapaxes_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                          const char *axes, int axis, const spmd_opts *opts,
                                          spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_ppermute_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                         const char *axes, const int *perm, int npairs,
                                         const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pshuffle_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                         const char *axes, const int *perm, const spmd_opts *opts,
                                         spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_pbroadcast_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                           const char *axes, int source, const spmd_opts *opts,
                                           spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_ragged_all_to_all_start(spmd_dev *d, const spmd_array *operand,
                                                  const spmd_array *output, const int64_t *input_offsets,
                                                  const int64_t *send_sizes, const int64_t *output_offsets,
                                                  const int64_t *recv_sizes, int64_t k, const char *axes,
                                                  const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_allgather_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                          spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                          spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_alltoall_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                         spmd_dtype dt, const char *axes, const spmd_opts *opts,
                                         spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_bcast_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                      spmd_dtype dt, int root, const char *axes,
                                      const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_gather_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                       spmd_dtype dt, int root, const char *axes,
                                       const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_scatter_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                        spmd_dtype dt, int root, const char *axes,
                                        const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_reduce_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                       spmd_dtype dt, spmd_op op, int root, const char *axes,
                                       const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_scan_start(spmd_dev *d, const void *send, void *recv, size_t count,
                                     spmd_dtype dt, spmd_op op, const char *axes,
                                     const spmd_opts *opts, spmd_req **req);
SPMD_API SPMD_MUST spmd_status spmd_send_start(spmd_dev *d, const void *buf, size_t count, spmd_dtype dt, int dest,
                                     int tag, const char *axes, const spmd_opts *opts, spmd_req **req);
/* info, if not NULL, is filled when the request finishes. */
SPMD_API SPMD_MUST spmd_status spmd_recv_start(spmd_dev *d, void *buf, size_t count, spmd_dtype dt, int source,
                                     int tag, const char *axes, const spmd_opts *opts,
                                     spmd_recv_info *info, spmd_req **req);
/* Block until the request finishes; returns its status and frees it.
   spmd_wait(NULL) returns SPMD_ERR_NULL and, having no device, writes no
   message: a _start that failed left *req NULL, and spmd_last_error of its
   device still says why that _start failed. */
SPMD_API SPMD_MUST spmd_status spmd_wait(spmd_req *req);
/* Same as spmd_wait (JAX's name for the second half of an async pair). */
SPMD_API SPMD_MUST spmd_status spmd_done(spmd_req *req);
/* Poll: *done = 1 and the request is freed when it has finished (the
   return value is then its status); *done = 0 and SPMD_OK otherwise. */
SPMD_API SPMD_MUST spmd_status spmd_test(spmd_req *req, int *done);
/* Wait for n requests (NULL entries skipped); returns the first failure. */
SPMD_API SPMD_MUST spmd_status spmd_wait_all(spmd_req **reqs, int n);

/* ---- sharding ---- */
/* A PartitionSpec (spmd_spec) says, per array dimension, which mesh axes
   shard it, major to minor; mesh axes it does not name hold copies
   (replication), except `partial` axes, where the devices hold summands
   whose sum is the array (Nabla's partial sums, JAX's "unreduced"). The
   functions below that run outside devices take the mesh and report why
   they failed in an optional spmd_msg (NULL: not reported); they are
   thread-safe and never communicate. Text form as JAX prints it:
   P('row', None), P(('x', 'y'), None), P(), P('x', partial='y'). */
typedef struct spmd_spec {
    int rank;                                  /* dimensions described, 0..SPMD_MAX_RANK; an array
                                                  may have more (the rest are not sharded) */
    int naxes[SPMD_MAX_RANK];                  /* mesh axes sharding dimension i (0: None) */
    char axes[SPMD_MAX_RANK][SPMD_MAX_AXES][SPMD_MAX_AXIS_NAME + 1]; /* their names, major first */
    int npartial;                              /* axes holding partial sums */
    char partial[SPMD_MAX_AXES][SPMD_MAX_AXIS_NAME + 1];
} spmd_spec;

/* Why a mesh-level sharding call failed ("" after success). */
typedef struct spmd_msg {
    char text[512];
} spmd_msg;

/* Parse "P('row', None)", "P(('x','y'), None)", "P()" (also PartitionSpec(...),
   double quotes, bare names, partial=/unreduced= with a name or a tuple).
   SPMD_ERR_INVALID for syntax or a name with ',' '*' blanks or quotes,
   SPMD_ERR_DUP_AXIS for an axis named twice; *out is unchanged on failure.
   spmd_spec_format's text parses back to an equal spec. */
SPMD_API SPMD_MUST spmd_status spmd_spec_parse(const char *text, spmd_spec *out, spmd_msg *why);
/* Build a spec: dims[i] is "x", "x,y" (major first), or NULL / "" for None;
   partial is NULL, "" or "y,z". dims may be NULL when rank is 0. Errors as
   spmd_spec_parse; *out is unchanged on failure. */
SPMD_API SPMD_MUST spmd_status spmd_spec_init(spmd_spec *out, int rank, const char *const *dims, const char *partial,
                                    spmd_msg *why);
/* Write the text form into buf (always terminated when len > 0); returns the
   length it needs (like snprintf), or -1 for a NULL or invalid spec. */
SPMD_API int spmd_spec_format(const spmd_spec *s, char *buf, size_t len);
/* Check a spec against a mesh and a global shape (rank dims): SPMD_ERR_AXIS
   unknown axis, SPMD_ERR_DUP_AXIS repeated axis, SPMD_ERR_SHAPE spec longer
   than the array or a dimension the axes' sizes do not divide. */
SPMD_API SPMD_MUST spmd_status spmd_spec_check(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *global_shape,
                                     spmd_msg *why);
/* The shape of every device's block: global_shape[i] / product of the sizes
   of the axes sharding dim i. */
SPMD_API SPMD_MUST spmd_status spmd_block_shape(const spmd_mesh *m, const spmd_spec *s, int rank,
                                      const int64_t *global_shape, int64_t *block_shape, spmd_msg *why);
/* Where device's block starts in the global array (rank entries). */
SPMD_API SPMD_MUST spmd_status spmd_block_start(const spmd_mesh *m, const spmd_spec *s, int rank,
                                      const int64_t *global_shape, int device, int64_t *start, spmd_msg *why);
/* jax.device_put for one device: copy its block out of the row-major global
   array into block (dtype equal, shape = spmd_block_shape). With partial
   axes, the device at coordinate 0 on all of them gets the data, the others
   zeros (the sum is the array). */
SPMD_API SPMD_MUST spmd_status spmd_device_put(const spmd_mesh *m, const spmd_spec *s, const spmd_array *global, int device,
                                     const spmd_array *block, spmd_msg *why);
/* Assemble global from every device's block (blocks[d] for device d, each
   of the block shape and global's dtype): blocks are concatenated along the
   named axes; for the axes not named one copy is taken (the device at
   coordinate 0), and in check mode (the mesh's check flag) every copy is
   compared bitwise with it: SPMD_ERR_MISMATCH names the devices that
   differ. Partial axes are summed (bool: logical or). */
SPMD_API SPMD_MUST spmd_status spmd_assemble(const spmd_mesh *m, const spmd_spec *s, const void *const *blocks,
                                   const spmd_array *global, spmd_msg *why);
/* A text picture of the sharding, like jax.debug.visualize_array_sharding:
   rank 1 and 2 draw the grid of blocks with the devices holding each; rank
   0 one cell; rank 3 and more list the blocks as index ranges, one a line.
   Returns SPMD_ERR_SIZE (with the text cut) when len is too small. */
SPMD_API SPMD_MUST spmd_status spmd_sharding_text(const spmd_mesh *m, const spmd_spec *s, int rank,
                                        const int64_t *global_shape, char *buf, size_t len, spmd_msg *why);

/* ---- shard_map ----
   The per-device function: in[k] / out[k] are this device's blocks (out
   zeroed, of the out spec's block shape). Return SPMD_OK, or a status that
   shard_map returns. Called on every device's thread. */
typedef spmd_status (*spmd_shard_fn)(spmd_dev *d, const spmd_array *in, spmd_array *out, void *user);
#define SPMD_MAX_SHARD_ARGS 8
typedef struct spmd_shard_map_desc {
    spmd_shard_fn fn;
    void *user;
    int nin;                        /* 0..SPMD_MAX_SHARD_ARGS */
    const spmd_array *in;           /* global inputs */
    const spmd_spec *in_specs;
    int nout;                       /* 0..SPMD_MAX_SHARD_ARGS */
    const spmd_array *out;          /* global outputs: dtype, rank and shape given, data written */
    const spmd_spec *out_specs;
    spmd_check check_rep;           /* DEFAULT or ON: outputs must really be replicated over the
                                       axes out_specs leave unnamed (JAX's check); OFF: one copy
                                       taken, unchecked */
} spmd_shard_map_desc;
/* jax.shard_map: shard the inputs by in_specs, run fn on every device
   (spmd_run), assemble the outputs by out_specs. SPMD_ERR_MISMATCH when an
   output varies along an axis its out_spec claims replicated (why names the
   devices); the first failing status of a device otherwise. The global
   outputs are written only when every device and every check succeeded.
   Runs the mesh as spmd_run does: SPMD_ERR_BUSY while it already runs.
   Across processes every process calls it with the whole global inputs;
   fn runs on its own devices, whose output blocks and statuses are then
   shared (one all_gather over the mesh's axes), so every process writes
   the same global outputs and returns the same status (SPMD_ERR_STATE in
   a process hosting none of the mesh's devices). */
SPMD_API SPMD_MUST spmd_status spmd_shard_map(spmd_mesh *m, const spmd_shard_map_desc *desc, spmd_msg *why);

/* ---- resharding and its cost ---- */
typedef enum spmd_coll {
    SPMD_COLL_NONE = 0,
    SPMD_COLL_SLICE,         /* replicated -> sharded: keep this device's chunk (local) */
    SPMD_COLL_ZERO,          /* replicated -> partial: zeros off coordinate 0 (local) */
    SPMD_COLL_ALL_GATHER,    /* sharded -> replicated */
    SPMD_COLL_ALL_TO_ALL,    /* an axis moves from one dimension to another */
    SPMD_COLL_PSUM,          /* partial -> replicated */
    SPMD_COLL_PSUM_SCATTER,  /* partial -> sharded */
    SPMD_COLL_COUNT
} spmd_coll;
typedef enum spmd_cost_algo {
    SPMD_COST_AUTO = 0,      /* the faster of the two under the model */
    SPMD_COST_RING,          /* ring / pairwise exchange: G-1 steps (psum 2(G-1)) */
    SPMD_COST_TREE,          /* recursive doubling / halving, Bruck: ceil(log2 G) steps */
    SPMD_COST_ALGO_COUNT
} spmd_cost_algo;
/* alpha-beta model: time = steps * alpha + bytes * beta. Zero fields mean
   the defaults (alpha 5 us, beta 0.1 ns/byte = 10 GB/s, AUTO). */
typedef struct spmd_cost_model {
    double alpha_s;
    double beta_s_per_byte;
    spmd_cost_algo algo;
} spmd_cost_model;
typedef struct spmd_cost {
    double bytes;            /* sent per device */
    int steps;               /* latency steps (messages in sequence) */
    double time_s;           /* alpha-beta estimate */
    spmd_cost_algo algo;     /* RING or TREE (the one chosen); AUTO for local steps */
} spmd_cost;
/* Cost of one collective over G devices; bytes is the per-device buffer it
   is about: all_gather's output, psum's and psum_scatter's input,
   all_to_all's input. Ring: all_gather/psum_scatter/all_to_all (G-1)/G*B in
   G-1 steps, psum 2(G-1)/G*B in 2(G-1); tree: the same bytes in
   ceil(log2 G) steps, except psum log2 G*B and all_to_all (Bruck)
   log2 G*B/2. Local steps cost nothing. SPMD_ERR_INVALID (out unchanged)
   for an unknown kind, G outside 1..SPMD_MAX_DEVICES, bytes negative or
   NaN, or a bad model. Thread-safe. */
SPMD_API SPMD_MUST spmd_status spmd_collective_cost(spmd_coll kind, int G, double bytes, const spmd_cost_model *model,
                                          spmd_cost *out);
#define SPMD_MAX_RESHARD_STEPS 40
typedef struct spmd_reshard_step {
    spmd_coll kind;
    char axes[SPMD_MAX_AXES * (SPMD_MAX_AXIS_NAME + 1)]; /* mesh axes it spans, "x,y" */
    int G;                       /* devices in its group */
    int dim;                     /* SLICE, ALL_GATHER, PSUM_SCATTER: the array dimension;
                                    ALL_TO_ALL: split_axis (the dimension gaining the axis) */
    int dim2;                    /* ALL_TO_ALL: concat_axis (the dimension losing it); else -1 */
    int64_t in_shape[SPMD_MAX_RANK], out_shape[SPMD_MAX_RANK]; /* block shapes */
    spmd_cost cost;
} spmd_reshard_step;
typedef struct spmd_reshard_plan {
    int rank;
    spmd_dtype dtype;
    int64_t global_shape[SPMD_MAX_RANK];
    spmd_spec from, to;
    int nsteps;
    spmd_reshard_step steps[SPMD_MAX_RESHARD_STEPS];
    spmd_cost total;             /* sums; algo AUTO */
} spmd_reshard_plan;
/* The plan reshard follows from one sharding of a global array to another:
   local slicing first, then partial sums (psum_scatter where the target
   shards by those axes, psum otherwise), axes at the minor end of one
   dimension that the target wants next, in that order, on another move by
   one all_to_all, the rest is all_gathered; replicated -> partial is local.
   model may be NULL (the defaults). Thread-safe; no communication. */
SPMD_API SPMD_MUST spmd_status spmd_reshard_plan_make(const spmd_mesh *m, const spmd_spec *from, const spmd_spec *to,
                                            spmd_dtype dt, int rank, const int64_t *global_shape,
                                            const spmd_cost_model *model, spmd_reshard_plan *plan,
                                            spmd_msg *why);
/* The plan as text, one step a line; returns the length needed (snprintf),
   -1 for a NULL or malformed plan. Thread-safe. */
SPMD_API int spmd_reshard_plan_text(const spmd_reshard_plan *p, char *buf, size_t len);
/* Move this device's block from sharding `from` to sharding `to` of the
   same global array (its shape follows from block and from); out must have
   the block shape of `to`. Every device calls it with the same specs and
   shapes (collective), from the device's thread. plan, if not NULL,
   receives the plan followed (with the default cost model). Partial sums
   of bool are reduced by logical or. out may be block (in place) or
   overlap it. Bad arguments are refused before anything moves, alike on
   every device (message in spmd_last_error); out is then unchanged. */
SPMD_API SPMD_MUST spmd_status spmd_reshard(spmd_dev *d, const spmd_array *block, const spmd_spec *from, const spmd_spec *to,
                                  const spmd_array *out, spmd_reshard_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* SPMDCOLL_H_INCLUDED */

/* ======================================================================== */
/*                             IMPLEMENTATION                               */
/* ======================================================================== */
#if defined(SPMDCOLL_IMPLEMENTATION) && !defined(SPMDCOLL_IMPLEMENTATION_DONE)
#define SPMDCOLL_IMPLEMENTATION_DONE

// >>configuration
/* What the implementation needs from the platform and the build: system
   headers, SPMD_MALLOC/SPMD_FREE/SPMD_ASSERT, the compile-time switches
   (SPMD__HAS_FUTEX, _X86, _ARM64, _INT128, _LIBFABRIC, _LANE), the
   SPMD__SETUP marks (set-up code compiled at -O1, to keep -O2 builds fast)
   and the limits (SPMD__*_MAX, slot and log sizes). Nothing here runs. */
#if !defined(__GNUC__)
#error "spmdcoll.h: the implementation needs GCC or Clang (it uses the __atomic builtins)"
#endif
#if defined(__GLIBC__) && !defined(__USE_MISC)
/* a system header came first in strict ISO C (-std=c99/c11): the POSIX and
   BSD declarations the implementation needs (clock_gettime, sigaction's
   SA_RESTART, MAP_ANONYMOUS, syscall) are off, and nothing can turn them
   on now */
#error "spmdcoll.h: the implementation needs POSIX; a system header included before it in strict ISO C (-std=c99/c11) left POSIX off: include spmdcoll.h (with SPMDCOLL_IMPLEMENTATION) before any system header, or compile with -D_GNU_SOURCE or -std=gnu11"
#endif
#if defined(SPMD_MALLOC) != defined(SPMD_FREE)
#error "spmdcoll.h: define both SPMD_MALLOC and SPMD_FREE, or neither"
#endif
#ifndef SPMD_MALLOC
#include <stdlib.h>
#define SPMD_MALLOC(sz) malloc(sz)
#define SPMD_FREE(p) free(p)
#define SPMD__CALLOC(sz) calloc(1, sz) /* zeroed by the C library: fresh pages stay untouched */
#endif
#ifndef SPMD_ASSERT
#include <assert.h>
#define SPMD_ASSERT(x) assert(x)
#endif

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#if defined(__linux__) && defined(__USE_GNU) /* (not when a system header came first without _GNU_SOURCE) */
#define SPMD__HAS_PHDR 1
#include <link.h> /* dl_iterate_phdr: a call site's module (>>check mode) */
#else
#define SPMD__HAS_PHDR 0
#endif
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Setup code at -O1. Under GCC at -O2 or -O3, most of this file's compile
   time went to optimising code that runs once per mesh, once per failure or
   per report: the bootstrap, sharding plans, shrink, the fault plan, logging,
   and the big setup and teardown functions of the other sections. GCC
   compiles those at -O1 (the sections between SPMD__SETUP_BEGIN and
   SPMD__SETUP_END, the functions marked SPMD__SETUP); everything on a
   call's path keeps the user's level (at -O1 it measured 10-15% slower on
   8-byte calls). make compile-times: 4.2 -> 3.4-3.6 s at -O2 with
   libfabric, no change in run time measured (docs/internals.md). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__)
#define SPMD__SETUP_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"O1\")")
#define SPMD__SETUP_END _Pragma("GCC pop_options")
#define SPMD__SETUP __attribute__((optimize("O1")))
#else
#define SPMD__SETUP_BEGIN
#define SPMD__SETUP_END
#define SPMD__SETUP
#endif

#if defined(__linux__)
#define SPMD__HAS_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#else
#define SPMD__HAS_FUTEX 0
#endif
#if defined(__x86_64__) || defined(__i386__)
#define SPMD__HAS_X86 1
#else
#define SPMD__HAS_X86 0
#endif
#if defined(__aarch64__)
#define SPMD__HAS_ARM64 1
#else
#define SPMD__HAS_ARM64 0
#endif
#if defined(__SIZEOF_INT128__)
#define SPMD__HAS_INT128 1
__extension__ typedef __int128 spmd__i128;
__extension__ typedef unsigned __int128 spmd__u128;
#else
#define SPMD__HAS_INT128 0
#endif
#if defined(SPMDCOLL_LIBFABRIC)
#define SPMD__HAS_LIBFABRIC 1
#else
#define SPMD__HAS_LIBFABRIC 0
#endif
/* the shared-memory lane of the libfabric transport maps segments of /dev/shm */
#if SPMD__HAS_LIBFABRIC && defined(__linux__)
#define SPMD__HAS_LANE 1
#else
#define SPMD__HAS_LANE 0
#endif
#if defined(__GNUC__) && !defined(__clang__)
#define SPMD__GCC 1
#else
#define SPMD__GCC 0
#endif
/* x86-64: the hot reduction kernels are also built for AVX2 and F16C and
   chosen at run time; not at -O0, where their copies would only cost
   compile time (a build that debugs is not one that measures). */
#if defined(__x86_64__) && !defined(SPMD_NO_DISPATCH) && defined(__OPTIMIZE__) && \
    (SPMD__GCC || (defined(__clang__) && __clang_major__ >= 9))
#define SPMD__HAS_X86_DISPATCH 1
#include <cpuid.h>
#else
#define SPMD__HAS_X86_DISPATCH 0
#endif

#define SPMD__UNUSED __attribute__((unused))
#define SPMD__LINE 64                   /* cache line */
#define SPMD__TILE 256                  /* elements per reduction kernel tile */
#define SPMD__DEFAULT_TIMEOUT_MS 60000
#define SPMD__DEFAULT_INFLIGHT 16
#define SPMD__MAX_INFLIGHT 1024
#define SPMD__EAGER_MAX 4096            /* inline bytes per device and slot, at most */
#define SPMD__COMBINE_MIN 8             /* group size from which psum, barrier and small all_gathers combine
                                           (and split calls count arrivals): 16 before, 8 made a psum over
                                           an 8-device axis of 16,384 fibers 1.4x faster, no slower at 8 */
#define SPMD__GATHER_COMBINE 64         /* bytes per member up to which an all_gather combines */
#define SPMD__EAGER_BUDGET 65536        /* inline bytes per slot for the whole group */
#define SPMD__EAGER_LOCAL ((size_t)2 << 20) /* ... and for all the process's devices (spmd__group_get) */
#define SPMD__CLOG 64                   /* check-mode log entries per device */
#define SPMD__MAX_TASKS (1u << 20)
#define SPMD__CHUNK_TASK 4096           /* bytes: an all_to_all chunk from which each chunk is a task of its own */

/* A status the implementation does not need (SPMD_WARN_UNUSED: a (void)
   cast would not silence gcc). */
static void spmd__ignore(spmd_status s) { (void)s; }

// >>atomics and time
/* The memory-order vocabulary every other section uses (SPMD__LD_ACQ,
   SPMD__ST_REL, SPMD__CAS, SPMD__FENCE ...; the seq-cst forms where a store
   must be seen before a later load, e.g. a sleeper's flag), the clocks
   (spmd__now_ns; the coarse clock is the recorder's), the futex wait and
   wake that sleepers use, and a spin lock (spmd__slock) for short sections
   no thread sleeps in. Calls nothing of the library. */
#define SPMD__LD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define SPMD__LD_SC(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define SPMD__ST_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* A full fence. ThreadSanitizer does not model fences (gcc refuses them
   there), so under it a seq_cst read-modify-write of a device-private word
   stands in: also a full barrier on x86-64 and arm64. */
#if defined(__SANITIZE_THREAD__)
#define SPMD__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPMD__TSAN 1
#endif
#endif
#ifdef SPMD__TSAN
#define SPMD__FENCE(word) ((void)__atomic_fetch_add((word), 0u, __ATOMIC_SEQ_CST))
#else
#define SPMD__FENCE(word) __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
#define SPMD__PREFETCH_W(p) __builtin_prefetch((p), 1)
#define SPMD__NOINLINE __attribute__((noinline)) /* a public collective (its return address is its call
                                                    site), a frame of its own */
#define SPMD__ST_SC(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define SPMD__FADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define SPMD__FOR(p, v) __atomic_fetch_or((p), (v), __ATOMIC_SEQ_CST)
#define SPMD__FAND(p, v) __atomic_fetch_and((p), (v), __ATOMIC_SEQ_CST)
#define SPMD__CAS(p, expp, v) \
    __atomic_compare_exchange_n((p), (expp), (v), 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)

static uint64_t spmd__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spmd__pause(void) {
#if SPMD__HAS_X86
    __builtin_ia32_pause();
#elif SPMD__HAS_ARM64
    __asm__ __volatile__("yield");
#endif
}

static void spmd__futex_wait(uint32_t *addr, uint32_t val, uint64_t ns) {
#if SPMD__HAS_FUTEX
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
#else
    struct timespec ts;
    (void)addr; (void)val;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)(ns < 50000 ? ns : 50000);
    nanosleep(&ts, NULL);
#endif
}

static void spmd__futex_wake(uint32_t *addr) {
#if SPMD__HAS_FUTEX
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* A lock for short holds (the fiber scheduler's, the transport's): taken
   free with one compare-and-swap, given back with a store. A pthread mutex
   costs ~70 instructions more per pair in its checks, and the transport's
   is taken for every lane send and lazy receive: 8 B calls over the lane
   run 6-11% faster without them (docs/performance.md). A waiter spins,
   then yields; past ~1,000 yields (a holder in a provider call, or
   draining a cancel for up to 100 ms) it sleeps 20 us between looks,
   since nothing wakes it. */
static void spmd__slock(uint32_t *l) {
    unsigned n = 0;
    for (;;) {
        uint32_t z = 0;
        if (SPMD__LD_ACQ(l) == 0 && SPMD__CAS(l, &z, 1u)) return;
        if (++n < 64) {
            spmd__pause();
        } else if (n < 1024) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}
static void spmd__sunlock(uint32_t *l) { SPMD__ST_REL(l, 0u); }

// >>memory
/* Every block the mesh owns goes through its allocator (desc.allocator,
   else SPMD_MALLOC/SPMD_FREE): 64-byte aligned and zeroed, so that a new
   struct's zero fields are its defaults and no two hot words share a line
   by accident. Without either, calloc zeroes it: a large block's pages
   are then touched only when used (a mesh's flight recorder, a group's
   slots). Tests count these calls (test_alloc). */
static void *spmd__alloc(const spmd_allocator *a, size_t size) {
    void *p;
    if (size == 0) size = 1;
    if (a && a->alloc) {
        p = a->alloc(size, SPMD__LINE, a->user);
        if (!p) return NULL;
    } else {
        unsigned char *raw;
        if (size > SIZE_MAX - 2 * SPMD__LINE) return NULL;
#ifdef SPMD__CALLOC
        raw = (unsigned char *)SPMD__CALLOC(size + 2 * SPMD__LINE);
#else
        raw = (unsigned char *)SPMD_MALLOC(size + 2 * SPMD__LINE);
#endif
        if (!raw) return NULL;
        p = raw + SPMD__LINE + (SPMD__LINE - ((uintptr_t)raw % SPMD__LINE)) % SPMD__LINE;
        memcpy((unsigned char *)p - sizeof(void *), &raw, sizeof raw);
#ifdef SPMD__CALLOC
        return p;
#endif
    }
    memset(p, 0, size);
    return p;
}

static void spmd__free(const spmd_allocator *a, void *p) {
    if (!p) return;
    if (a && a->free) {
        a->free(p, a->user);
    } else {
        void *raw;
        memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
        SPMD_FREE(raw);
    }
}

/* Copy text into dst[cap], cut to fit: snprintf's "%s" without its frame
   (a fiber's first call with an axes text would touch a second stack page). */
static void spmd__text_copy(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

// >>types
/* The internal types, in the order a call meets them: the kinds of
   operation and their names, a call's signature (spmd__sig: what members
   compare), a member's entry in a slot, a group (spmd__group: its members,
   its ring of slots, its shared words) and a device's reference to it
   (spmd__gref), the check-mode log, the request (spmd_req: one call in
   flight), the device, the backend table (spmd__backend_vt) and the mesh.
   Types of one backend's own (the exchange's, the fibers') live in its
   section. */
enum {
    SPMD__KIND_NONE = 0, SPMD__KIND_ALLREDUCE, SPMD__KIND_BARRIER, SPMD__KIND_REDUCE, SPMD__KIND_SCAN,
    SPMD__KIND_PSUM_SCATTER, SPMD__KIND_ALLGATHER, SPMD__KIND_GATHER, SPMD__KIND_BCAST, SPMD__KIND_SCATTER,
    SPMD__KIND_PPERMUTE, SPMD__KIND_ALLTOALL, SPMD__KIND_RAGGED, SPMD__KIND_SEND, SPMD__KIND_RECV,
    SPMD__KIND_REFUSED, /* a call its device refused: it keeps its place (spmd__refuse) */
    SPMD__KIND_COUNT
};
/* The kinds with a root (a group index): bcast, scatter, reduce, gather. */
static int spmd__rooted(int kind) {
    return kind == SPMD__KIND_REDUCE || kind == SPMD__KIND_GATHER || kind == SPMD__KIND_BCAST ||
           kind == SPMD__KIND_SCATTER;
}
enum { SPMD__M_POSTED = 1, SPMD__M_CLAIMED, SPMD__M_COPIED, SPMD__M_FAILED };
typedef char spmd__kinds_counted[SPMD__KIND_COUNT <= SPMD_COUNT_KINDS ? 1 : -1]; /* (spmd_counters.kind) */
static const char *spmd__kind_names[SPMD__KIND_COUNT] = {
    "none", "allreduce", "barrier", "reduce", "scan", "psum_scatter", "all_gather", "gather",
    "broadcast", "scatter", "ppermute", "all_to_all", "ragged_all_to_all", "send", "recv", "refused"};
enum { SPMD__ALG_LOCAL = 0, SPMD__ALG_EAGER, SPMD__ALG_SPLIT, SPMD__ALG_BRUCK, SPMD__ALG_RD, SPMD__ALG_RAB };
/* the algorithms that run a plan (>>plans) across processes */
static SPMD__UNUSED int spmd__alg_plans(int algo) { return algo == SPMD__ALG_RD || algo == SPMD__ALG_RAB; }
enum { SPMD__R_POST = 0, SPMD__R_ARRIVE, SPMD__R_RUN, SPMD__R_DRAIN, SPMD__R_DONE };
enum { SPMD__S_ARRIVING = 0, SPMD__S_RUNNING = 1, SPMD__S_ABORTED = 2, SPMD__S_MISMATCH = 3, SPMD__S_CHECKING = 4 };
#define SPMD__S_SHIFT 3 /* state word: seq << 3 | phase */
#define SPMD__S_MASK 7u
#define SPMD__REQ_MAGIC 0x73706d64u

/* A reduction kernel: how spmd__reduce loads, combines and writes out
   blocks of elements of one dtype for one op (>>reduce kernels). */
typedef void (*spmd__kload)(void *d, const void *x, size_t m);
typedef void (*spmd__kcomb)(void *d, const void *a, const void *x, size_t m);
typedef void (*spmd__kfin)(void *out, const void *acc, size_t m, int G);
typedef void (*spmd__kargeq)(int32_t *idx, const void *best, const void *x, int j, size_t m);
typedef struct spmd__kern {
    uint8_t in_size, acc_size, out_size; /* bytes an element */
    spmd__kload load;   /* inputs -> accumulator type; NULL: the same type */
    spmd__kcomb comb;   /* d = a OP x; NULL: the op is not defined */
    spmd__kfin fin;     /* accumulator -> output; NULL: a copy */
    spmd__kargeq argeq; /* argmax/argmin: idx = j where x == best (comb is max/min) */
} spmd__kern;
typedef const spmd__kern *spmd__kernel;
typedef const spmd__kern (*spmd__ktable)[SPMD_OP_COUNT]; /* [dtype][op] */

/* An n-d block inside a row-major array: extents, and the byte strides of
   the source and destination arrays it is copied between. The innermost
   contiguous run is folded into `run` bytes. */
typedef struct spmd__blk {
    int n;
    int64_t ext[SPMD_MAX_RANK];
    int64_t ss[SPMD_MAX_RANK], ds[SPMD_MAX_RANK];
    size_t run;
} spmd__blk;

/* What a device says it is calling; peers compare it before touching data. */
typedef struct spmd__sig {
    uint8_t kind, dtype, op, algo; /* (in this order: a flight record's what, spmd__rec_what) */
    uint32_t axes_hash;
    uint64_t count;
    uint64_t aux;
} spmd__sig;

/* A member's posting in a slot: this header, then inline data (eager) or
   the send/recv pointers (split). */
typedef struct spmd__entry {
    uint64_t seq; /* group sequence number + 1, once posted */
    spmd__sig sig;
} spmd__entry;
#define SPMD__ENTRY_HDR 32

/* Per member of a group: how many of the group's operations it has
   finished (a prefix), so a slot is reused only when everyone is done, and
   how many members wait for it to finish one to reuse theirs (its finish
   wakes them). */
typedef struct spmd__member {
    uint64_t left;
    uint32_t waiters;
    char pad[SPMD__LINE - 12];
} spmd__member;

/* Shared words of one operation of the split algorithm, tagged with the
   group sequence number so that a slot can be reused without resetting. */
typedef struct spmd__shared {
    uint64_t state; /* seq << SPMD__S_SHIFT | SPMD__S_* */
    char p0[SPMD__LINE - 8];
    uint64_t claim; /* seq << 24 | next task */
    char p1[SPMD__LINE - 8];
    uint64_t done;  /* seq << 24 | tasks finished; combining: combiner + 1 */
    char p2[SPMD__LINE - 8];
    uint64_t arrived; /* combining: seq << 24 | members posted */
    char p3[SPMD__LINE - 8];
} spmd__shared;

/* A member's own counters for a group (only that member touches them), kept
   with the group so that every spelling of the same device list -- "i" and
   "*" on a 1-D mesh, or the identity axis_index_groups -- counts together. */
typedef struct spmd__mine {
    uint64_t next;         /* next sequence number on this group */
    uint64_t left;         /* operations finished, as a prefix */
    uint64_t minleft;      /* cached minimum of the members' left */
    uint8_t *fin;          /* D flags: finished out of order (here in own[], or in the group's fin
                              when D is larger: one line a call touches, not two) */
    uint8_t own[SPMD__LINE - 32];
} spmd__mine;

/* A communicator: an ordered list of devices, shared by its members. */
typedef struct spmd__group {
    uint64_t *sleepers; /* (G + 63) / 64 words: a bit per member asleep on this group (spmd__sleep) */
    uint64_t minleft;  /* the last scan's minimum of the members' left (spmd__slot_behind) */
    uint64_t scan;     /* need << 24 | k: members 0..k-1 have left >= need (spmd__group_behind) */
    struct spmd__group *next;
    uint64_t hash;
    int G, D;
    int *members;
    size_t stride, eager;
    spmd__member *mem;     /* G */
    spmd__mine *mine;      /* G */
    uint8_t *fin;          /* G lines of D flags, if D > sizeof mine->own (else NULL) */
    spmd__shared *shared;  /* D */
    unsigned char *slots;  /* D * G * stride */
    unsigned char *board;  /* D * G * gboard: combined all_gathers' outputs (G >= SPMD__COMBINE_MIN, one process) */
    struct spmd__permc *permc; /* 2 D: a large ppermute's pairs checked once a call (spmd__perm_entries) */
    size_t gboard;         /* bytes per member there: an all_gather of at most this much input combines */
    /* libfabric: where the members live */
    int span;              /* in more than one process: the exchange path */
    int nloc;              /* members in this process */
    int *lidx;             /* G: index among this process's members, or -1 */
    int *locs;             /* nloc: this process's members (after lidx, in its block) */
    int nrp;               /* other processes with members, */
    int *rprocs;           /* in member order */
    int *procs;            /* nrp + 1: every process with members, in member
                              order (the positions of a Bruck exchange), */
    int *pos_of;           /* the mesh's processes: their position there, or -1, */
    int ppos;              /* this process's */
    int pblk;              /* members a process where each holds one block of them, the same power of two
                              for all, block j at position j: the plans run over the processes (>>plans,
                              spmd__x_plan_algo); else 0 */
    uint32_t gid;          /* the group field of message tags (spmd__group_gid) */
    uint64_t xhash;        /* member list and mesh, checked in every header */
#if SPMD__HAS_LIBFABRIC
    struct {               /* the libfabric exchange's own (>>libfabric meshes) */
        struct spmd__xrec *xlive, *xfree; /* exchanges in flight, and spare ones */
        int xnlive;        /* exchanges listed in xlive (at most the mesh's max_inflight) */
        struct spmd__xchan *xchan; /* send/recv between processes */
        struct spmd__xq *xq; /* the quick exchange's receives, sends and headers (spmd__xq_post) */
    } lf;
#endif
} spmd__group;

/* A device's view of a group it uses: the key it was asked by and its index. */
typedef struct spmd__gref {
    spmd__group *g;        /* (the fields a call reads first: one line the scheduler warms) */
    spmd__mine *my;        /* &g->mine[me] */
    int me;
    int naxes;
    int axes[SPMD_MAX_AXES];
    int gsize;             /* 0: no axis_index_groups */
    int *groups;           /* copy of the partition, A entries */
    int A;                 /* size of the named axes */
    uint32_t axes_hash;
    char text[64];         /* the axes as written, for messages */
} spmd__gref;

/* Check-mode log of a device's collectives, read by peers (all atomic). */
typedef struct spmd__clog {
    uint64_t stamp;        /* global index + 1 */
    uint64_t w[3];         /* the signature */
    uint64_t text[8];      /* axes text, 64 bytes */
    uint64_t ck[2];        /* the checksum of its input as the caller gave it, and its length (spmd__data_agree) */
    uint64_t site[2];      /* SPMD_CHECK_SITES: its call site (spmd__site_text) */
} spmd__clog;

#define SPMD__NEED_ALL (-2) /* spmd_req.need: every member (spmd__eager_needs) */
struct spmd_req {
    uint32_t magic;
    int user;              /* handed to the caller (async) */
    int state;
    spmd_status status;
    spmd_dev *dev;
    spmd__gref *gr;
    spmd_req *next, *prev; /* the device's requests in flight, in start order */
    uint64_t gseq, global;
    uint64_t deadline;     /* 0: not yet set */
    int64_t timeout_ms;
    spmd__sig sig;
    const void *send;
    void *recv;
    size_t count, in_size, out_size;
    spmd__kernel kern;
    size_t in_bytes;       /* this member's input */
    size_t outer, inner;   /* layout in elements: rows and row length (gather, scatter) */
    int root;              /* root or source, a group index */
    int *src_of;           /* ppermute: each member's source or -1, then (G more) its destination or -1, */
    int pairs, dst;        /* the pairs, and the member reading this one's input (-1: none; -2: not kept) */
    void *temp;            /* copy of an input that the output overwrites */
    void *fault_copy;      /* kind=corrupt: the input with one byte flipped, what send points to (>>faults) */
    uint64_t fault_ck;     /* kind=corrupt, check mode: the checksum of the input before (spmd__clog_write) */
    int fault_die;         /* kind=lose:posted (1), :done (2), :step:K (2 + K) across processes: where the
                              process ends */
    uint64_t site[2];      /* SPMD_CHECK_SITES: its call site, spmd_set_site's file and line or 0 and the caller's
                              return address (spmd__site_take) */
    int64_t src_step, dst_step; /* all_to_all: bytes between chunks, between blocks */
    uint32_t units, pieces;/* split: tasks = units x pieces */
    const int64_t *meta;   /* ragged: this member's input_offsets, send_sizes, output_offsets (3k) */
    const int64_t *recv_sizes;
    int64_t k, rows_out;   /* ragged: entries per array, output rows */
    size_t row_bytes;      /* ragged: bytes per leading-axis row */
    size_t meta_bytes;     /* ragged: 3k int64 posted ahead of the operand (eager) */
    int two_phase;         /* psend/precv: recv published by precv */
    int recv_ready;        /* psend/precv: precv has given the recv buffer */
    int nseen2;            /* psend/precv: members seen with their recv published */
    uint64_t shape_hash;   /* psend/precv: x's shape, for precv to compare */
    int p2p;               /* send/recv: no group sequence number */
    int peer, tag;         /* send: dest; recv: source or SPMD_ANY_SOURCE; the tag */
    uint32_t mstate;       /* send: SPMD__M_*, set by the receiver */
    spmd_req *mnext;       /* send: next message in the destination's mailbox */
    spmd_recv_info *info;  /* recv: filled at the end */
    int nseen;             /* members seen arrived, in order */
    int comb;              /* combining (spmd__combines): 1 member, 2 the combiner */
    int counted;           /* split, counted arrival (spmd__split_counts): 1 member, 2 the one that
                              completed the count (it checks the signatures) */
    int slotwait;          /* waiting for a slot: 1 + the member behind it watches (counted in its waiters) */
    int slotmore;          /* it waited for a slot: polls since it is free (spmd__slot_more) */
    int need;              /* eager: whose entries it reads (spmd__eager_needs), set at the post */
    int asleep;            /* registered asleep on its group (its bit in sleepers) */
    int eager_asked;       /* SPMD_ALGO_EAGER asked for, the input larger than its slot: split (messages say so) */
    int x;                 /* the group spans processes: the backend's exchange path (m->vt->x_start) */
    const int64_t *const *xmeta; /* ragged across processes: every member's offsets and sizes */
    void *xscratch;        /* across processes: a copy of the input, or where a mismatched message's data goes */
    size_t task_elems;
    uint32_t ntasks;
    spmd_status refusing;  /* across processes: a refused call run on stand-in buffers (spmd__stand_in) */
#if SPMD__HAS_LIBFABRIC
    struct {               /* the libfabric exchange's own (>>libfabric meshes) */
        int xq;            /* on the quick exchange (spmd__xq_progress), not x_post's */
        uint32_t xpolls;   /* polls (every 16th: the quick exchange progresses the transport, the general one scans) */
        int xq_going;      /* a quick exchange's send not done at once (a full ring, the provider's) */
        struct spmd__xrec *xr; /* the exchange it takes part in */
        const void *xdata; /* the input as sent (a send waiting for clear-to-send) */
        int xsent;         /* send: its data is posted */
        int xwait;         /* data sends wait for room in its window (spmd__x_sends) */
        int xearly;        /* all_gather/all_to_all: its own chunk into its output early, SPMD__XE_* (spmd__x_early) */
        size_t xeoff;      /* how much of it is there */
        int xrefused;      /* quick exchange: member + 1 whose header said it refused */
        spmd_status xrefused_st; /* ... and its status */
    } lf;
#endif
    uint64_t rec;          /* its flight-recorder record: the device's call number + 1, 0: none */
    uint32_t a2a_rows;     /* all_to_all, split: receivers a unit covers when more than 1 (spmd__split_plan) */
    spmd__blk blk;         /* all_to_all: one chunk; last, and not cleared for a new request
                              (the all_to_all setup writes it before use) */
    int *src_buf;          /* ppermute: src_of's block (2 ints per member), kept with the request
                              when it is reused, so that a steady state of ppermutes allocates nothing */
    size_t src_cap;        /* its ints */
    void *xp_blk;          /* libfabric send/recv: r->temp's block (its ops, header, inline data),
                              kept with the request when it is reused, as src_buf is */
};

/* A device's last blocking all_gather, psum_scatter, all_to_all or
   ppermute (pshuffle; groups of at most SPMD__PLAN_G) of arrays that
   spmd__coll_start checked: what names the call, and what spmd__setup
   computed from it. spmd__quick repeats such a call without the checks
   when everything that names it is the same. */
#define SPMD__PLAN_G 16
typedef struct spmd__plan {
    spmd__gref *gr;        /* NULL: none yet */
    int kind, dim1, dim2, tiled, xrank, orank;
    spmd_dtype dt;
    int64_t xshape[SPMD_MAX_RANK], oshape[SPMD_MAX_RANK];
    size_t count, in_bytes, out_bytes, out_size, outer, inner;
    int64_t src_step, dst_step;
    uint64_t aux, shape_hash;
    spmd__blk blk;
    int npairs, nperm;     /* ppermute: the pairs (npairs -1: a pshuffle's permutation), their ints */
    int perm[2 * SPMD__PLAN_G], src_of[2 * SPMD__PLAN_G]; /* (src_of: sources, then destinations) */
} spmd__plan;

#if SPMD__HAS_LIBFABRIC
/* What spmd__x_algo read of a call, and what it chose (spmd__fab_x_start). */
typedef struct spmd__xpick {
    const spmd__gref *gr;
    size_t count, in_bytes;
    int root, want, kind, op, dtype;
    uint8_t algo;
} spmd__xpick;
#endif

struct spmd_dev {
    uint32_t bell;         /* futex word, bumped by peers to wake us */
    uint32_t sleeping;
    char pad0[SPMD__LINE - 8];
    uint32_t fence_word;   /* see SPMD__FENCE */
    spmd_mesh *mesh;
    int id;
    int coords[SPMD_MAX_AXES];
    uint32_t attached;
    spmd__gref **grefs;
    int ngrefs, cap_grefs;
    spmd__group **memberof; /* the groups it is a member of (spmd__run_returned wakes them) */
    int nmemberof, cap_memberof;
    spmd_req *free_reqs;
    spmd_req *head, *tail; /* requests in flight */
    int inflight;
    uint64_t global;       /* collectives started (check mode) */
    spmd__clog *clog;
    const void **ptrs;     /* 3 * mesh size scratch pointers: ptrs_own on an OS thread, under fibers
                              the carrier's (a device's computation never spans a switch) */
    const void **ptrs_own; /* made when an OS thread attaches it (not per device under fibers: 4,096
                              devices' would take 400 MB) */
    spmd__gref *last_gr;   /* the group of the last call without axis_index_groups, */
    char last_axes[64];    /* named by this text: a repeated call skips the parsing */
    struct spmd__rec *ring;/* flight recorder (>>recorder): its first record, NULL: off (spmd__rec_at) */
    uint64_t ncalls;       /* calls recorded so far */
    int check_sites;       /* SPMD_CHECK_SITES (a copy of the mesh's, read on every call) */
    const char *site_file; /* spmd_set_site: the next call's call site (read on every call) */
    struct spmd__fault *faults; /* SPMD_FAULTS: this device's, by call number (>>faults) */
    int nfaults, fault_at;
    uint64_t lost;         /* kind=lose: its call number + 1 (peers read it), 0: not lost */
    struct spmd__fiber *fib; /* its fiber during a run under fibers, else NULL */
    uint32_t returned;     /* its function returned in this spmd_run */
    spmd_status unhandled; /* the failure of the device's last call, until it makes another (spmd_run) */
    uint64_t unhandled_at; /* its place in the mesh's nfail */
    /* (the fields above are what a call touches: the scheduler warms them
       for the next fiber, spmd__fiber_warm; the quick request follows) */
    pthread_mutex_t mbox;  /* sends addressed to this device, in order */
    spmd_req *mhead, *mtail;
    spmd_req quick;        /* the request of a blocking call on the quick path */
    spmd__plan plan;       /* the last array call it may repeat */
#if SPMD__HAS_LIBFABRIC
    struct {
        uint64_t xq_calls; /* calls that took the quick exchange (tests read it) */
        spmd__xpick pick;  /* the last choice of spmd__x_algo, with the call it was made for */
    } lf;
#endif
    uint64_t *sites;       /* the ring's records' call sites' files (a record's line says if it has
                              one; spmd__site_at) */
    uintptr_t site_ra;     /* SPMD_CHECK_SITES: the return address of the public call (SPMD__CALLER) */
    uintptr_t site_lo, site_hi, site_base; /* its module's code (a cache, spmd__site_take) */
    const char *site_mod;  /* and that module's name */
    char lost_what[176];   /* the call `lost` names, "psum(f32 x 1) over 'i'", written before lost */
    int site_line;
    struct spmd__recx *tlog;/* SPMD_TRACE: records pushed out of the ring */
    size_t tlog_n, tlog_cap;
    char what[160];        /* libfabric: the text of spmd__x_what */
    char err[512];
};

/* A backend: every hook the core calls. The core never names a backend;
   it calls these, and skips a hook that is NULL (0): a backend of one
   process (threads) has only the first four. The libfabric backend's
   table is at the end of its block (spmd__fabric_vt); the one place that
   picks a table is spmd__mesh_backend. */
typedef struct spmd__backend_vt {
    const char *name;
    spmd_status (*init)(spmd_mesh *m);
    void (*fini)(spmd_mesh *m);
    void (*progress)(spmd_req *r);  /* advance without blocking */
    /* across processes */
    int polled;                     /* nothing rings a sleeping device when a message comes: it polls
                                       (a sleep is at most 100 us; fibers are never judged stuck) */
    void (*x_start)(spmd_req *r, spmd_algo algo, int blocking); /* a call whose group spans processes
                                       (r->x): its algorithm; small and blocking, the quick exchange */
    size_t (*x_inline)(const spmd_mesh *m, const struct spmd__group *g); /* the largest input a
                                       spanning quick call takes */
    int (*x_gone)(spmd_req *r);     /* a member here returned without joining r: 1 if r ended of it */
    int (*x_missing)(spmd_req *r);  /* check mode: a member here logged another call: 1 if r ended */
    int (*x_give_up)(spmd_req *r, spmd_status s, int expired, const char *why); /* deadline, break */
    void (*news)(spmd_mesh *m);     /* at every call: a break another process announced */
    void (*heard)(spmd_mesh *m);    /* at every poll: the same, and processes lost */
    uint64_t (*moved)(const spmd_mesh *m); /* bumped when the transport moves data */
    char *(*recs_text)(spmd_mesh *m); /* before a break: this process's devices' report lines */
    void (*broke)(spmd_mesh *m, spmd_status s, int dev, int first, char *recs); /* after it: tell the
                                       other processes (recs is freed here) */
    int (*recs_line)(spmd_mesh *m, int dev, char *out, size_t cap); /* another process's device's line */
    void (*report_settle)(spmd_mesh *m, uint64_t until); /* its other lines, waited for and logged */
    void (*run_end)(spmd_mesh *m);  /* spmd_run's end: every process agrees on the mesh's break */
    spmd_status (*lost_agree)(spmd_mesh *m, unsigned char *gone, char *why, size_t wlen); /* shrink */
    int (*lost_devices)(const spmd_mesh *m, int *devices, int cap); /* spmd_mesh_lost */
    void (*counters)(spmd_mesh *m, spmd_counters *out, int reset); /* spmd_mesh_counters: out, or reset */
} spmd__backend_vt;

struct spmd_mesh {
    int ndim, size;
    int shape[SPMD_MAX_AXES];
    int stride[SPMD_MAX_AXES];
    char names[SPMD_MAX_AXES][SPMD_MAX_AXIS_NAME + 1];
    spmd_backend backend;
    const spmd__backend_vt *vt;
    int64_t timeout_ms;
    int check;
    spmd_log_level log_level;
    spmd_log_fn log_fn;
    void *log_user;
    spmd_allocator alloc;
    int D;
    int ncpu;
    int host_crowded;      /* this machine runs more devices than it has CPUs, other processes' counted */
    int mesh_crowded;      /* some machine of the mesh's does (every process alike): spmd__fabric_crowd */
    uint64_t spin_ns, spin_os_ns, yield_ns;
    spmd_algo forced_algo;
    size_t stack_size;
    spmd_scheduler sched;  /* threads or fibers */
    int carriers;          /* fibers: carrier threads (0: the CPUs available) */
    uint64_t seed;         /* fibers: 0, or the seed of the ready-order generator */
    uint32_t nreturned;    /* devices whose function returned in this spmd_run */
    spmd__ktable ktab;     /* the reduction kernels for this CPU, chosen at creation */
    spmd_dev **devs;
    uint32_t nattached;
    uint32_t running;
    pthread_mutex_t lock;
    spmd__group **gtab;    /* hash buckets */
    struct spmd__gkey **gkeys; /* groups by axes and first member (as many buckets) */
    int wake_all;          /* a device's list of its groups ran out of memory: spmd__run_returned wakes all */
    size_t gbuckets;
    uint32_t broken;
    spmd_status broken_status;
    char broken_msg[512];
    uint64_t nfail;        /* failures recorded (spmd__fail): their order in time */
    int nprocs, proc;      /* processes taking part, and this one (threads: 1, 0) */
    int *proc_of;          /* device -> its process (NULL on threads: all 0) */
    int first_local, nlocal; /* this process's devices: a contiguous block */
    unsigned char *stacks; /* fibers: the stacks of the last run, kept for the next (spmd__stacks_map) */
    size_t stacks_len, stacks_each;
    int stacks_n;
    int stacks_guarded;    /* how many of them (the first) have a guard below (spmd__stacks_guard) */
    uint32_t mesh_id;      /* meshes this process made before (across processes: equal on every process) */
#if SPMD__HAS_LIBFABRIC
    struct {               /* the libfabric backend's own */
        struct spmd__fab *fab; /* the process's transport (shared by its meshes) */
        uint32_t heard;    /* the announcements of broken meshes looked at */
        int lost_heard;    /* the processes known lost when m last looked (spmd__fab_lost_heard) */
        int no_xq;         /* SPMD_QUICK_EXCHANGE=0: never the quick exchange */
    } lf;
#endif
    uint64_t report_until; /* libfabric: the break's report waits for the other processes' lines until then, and
                              is logged by spmd__report_settle (0: none due) */
    pthread_mutex_t xlock; /* libfabric: guards the exchanges of every group */
    int want_dpp;          /* libfabric: desc.devices_per_process */
    uint32_t rmask;        /* flight recorder: ring entries - 1 (a power of two) */
    uint32_t rstride;      /* and records between one device's two: 1, or the local devices when
                              their records of a call are side by side (spmd__rec_at) */
    struct spmd__rec *rings; /* the local devices' rings, one block (d->ring points in it) */
    uint64_t *rsites;      /* their call sites, likewise (d->sites) */
    struct spmd__fault *faults; /* the fault plan (>>faults), nfaults entries */
    int nfaults;
    int tracing;           /* SPMD_TRACE set: precise times, every record kept for the timeline */
    char trace_path[256];
    int shrunk;            /* made by spmd_mesh_shrink (>>shrink): SPMD_FAULTS does not apply */
    const int *shrink_procs; /* >>shrink, libfabric, during creation only: device -> its process */
    int *origin;           /* >>shrink: new device id -> its id in the mesh it was made from */
};

// >>logging and errors
/* How failures reach the user: spmd__log (the mesh's log function, or
   stderr with "[spmd 3/8]"), spmd__fail (a device's status and message,
   what spmd_last_error returns) and spmd__break (the mesh is broken: the
   status and reason are kept, the report logged, every device woken;
   across processes the others are told and this process's report lines
   sent, theirs logged when spmd_run ends). Every section may call these. */
SPMD__SETUP_BEGIN
static const char *spmd__level_names[] = {"default", "off", "error", "warn", "info", "debug"};

static void spmd__vlog(spmd_log_fn fn, void *user, spmd_log_level max, spmd_log_level lvl,
                       int dev, int ndev, const char *fmt, va_list ap) {
    char msg[768];
    if (max == SPMD_LOG_OFF || lvl > max) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (fn) {
        fn(user, lvl, dev, msg);
    } else if (dev >= 0) {
        fprintf(stderr, "[spmd %d/%d] %s: %s\n", dev, ndev, spmd__level_names[lvl], msg);
    } else {
        fprintf(stderr, "[spmd] %s: %s\n", spmd__level_names[lvl], msg);
    }
}

static void spmd__log(spmd_mesh *m, spmd_log_level lvl, int dev, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    spmd__vlog(m->log_fn, m->log_user, m->log_level, lvl, dev, m->size, fmt, ap);
    va_end(ap);
}

/* Record an error on a device: message, log at debug, and the failure of
   its call until it makes another (spmd__check_dev clears it; spmd_run
   returns the earliest one left). */
static spmd_status spmd__fail(spmd_dev *d, spmd_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
    if (d->unhandled == SPMD_OK) {
        d->unhandled = s;
        d->unhandled_at = SPMD__FADD(&d->mesh->nfail, 1u);
    }
    spmd__log(d->mesh, SPMD_LOG_DEBUG, d->id, "%s: %s", spmd_status_name(s), d->err);
    return s;
}

static void spmd__fiber_ring(spmd_dev **ds, int n, int cleared);

/* Ring a device's bell: a sleeping thread wakes, a parked fiber becomes ready. */
static void spmd__wake_dev(spmd_dev *d) {
    SPMD__FADD(&d->bell, 1u);
    if (d->fib) spmd__fiber_ring(&d, 1, 0);
    else spmd__futex_wake(&d->bell);
}

static void spmd__report_log(spmd_mesh *m);

/* The first timeout or mismatch breaks the mesh; everyone is woken. dev
   -1: another process broke it (msg says which); else, across processes,
   the others are told. */
static void spmd__break(spmd_mesh *m, spmd_status s, int dev, const char *msg) {
    int i, first = 0;
    /* the report across processes: our devices' lines as they are before
       the break lets our other devices fail and return */
    char *recs = m->vt->recs_text && m->nprocs > 1 && !SPMD__LD_ACQ(&m->broken) ? m->vt->recs_text(m) : NULL;
    pthread_mutex_lock(&m->lock);
    if (!SPMD__LD_ACQ(&m->broken)) {
        m->broken_status = s;
        if (dev >= 0) snprintf(m->broken_msg, sizeof m->broken_msg, "device %d: %s", dev, msg);
        else snprintf(m->broken_msg, sizeof m->broken_msg, "%s", msg);
        SPMD__ST_SC(&m->broken, 1u);
        first = 1;
    }
    pthread_mutex_unlock(&m->lock);
    if (first) spmd__log(m, SPMD_LOG_ERROR, dev, "mesh broken: %s: %s", spmd_status_name(s), msg);
    if (m->vt->broke) m->vt->broke(m, s, dev, first, recs); /* the other processes told */
    if (first) spmd__report_log(m); /* (before the others wake: they show as they were) */
    for (i = 0; i < m->size; i++) spmd__wake_dev(m->devs[i]);
}

SPMD__SETUP_END

// >>half precision
/* float16, bfloat16 and the two fp8 formats to and from float32, exact and
   branch-free (round to nearest even, NaN kept quiet); the reduce kernels
   and the public spmd_f32_to_f16 ... use them. */
static inline uint32_t spmd__f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float spmd__u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* binary16 -> binary32: scale the shifted bits by 2^112 (exact for normals
   and subnormals), then force the exponent for inf/NaN. Branch-free. */
static inline float spmd__h2f(uint16_t h) {
    uint32_t em = (uint32_t)h & 0x7fffu;
    uint32_t mag = spmd__f2u(spmd__u2f(em << 13) * spmd__u2f(0x77800000u));
    mag |= em >= 0x7c00u ? 0x7f800000u : 0u;
    return spmd__u2f(mag | ((uint32_t)(h & 0x8000u) << 16));
}

/* binary32 -> binary16, round to nearest even. Normals: add half an ulp
   (plus one when the kept lsb is odd) and rebias; subnormals: let the FPU
   round by adding 0.5f, whose ulp is 2^-24; overflow gives inf, NaN stays
   a quiet NaN. Computed for all three cases and selected: branch-free. */
static inline uint16_t spmd__f2h(float f) {
    uint32_t x = spmd__f2u(f);
    uint32_t a = x & 0x7fffffffu;
    uint32_t nrm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = spmd__f2u(spmd__u2f(a) + 0.5f) - 0x3f000000u;
    uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint32_t r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : nrm);
    return (uint16_t)(r | ((x >> 16) & 0x8000u));
}

static inline float spmd__b2f(uint16_t h) { return spmd__u2f((uint32_t)h << 16); }

/* fp8 (the manual's DTYPES: ml_dtypes' float8_e4m3fn and float8_e5m2):
   fp8 -> f32 is a table of the 256 codes' values (>>reduce kernels,
   spmd__e4tab); f32 -> fp8, round to nearest even: normals add half an ulp (plus one
   when the kept lsb is odd) and rebias; subnormals let the FPU round by
   adding a constant whose ulp is the format's smallest step (2^14 for
   e4m3fn's 2^-9, 2^7 for e5m2's 2^-16); beyond the largest finite value
   (the manual) NaN or inf. Computed for every case and selected. */
static inline uint8_t spmd__f2e4(float f) {
    uint32_t x = spmd__f2u(f), a = x & 0x7fffffffu;
    uint32_t nrm = (a - 0x3c000000u + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
    uint32_t sub = spmd__f2u(spmd__u2f(a) + 16384.0f) - 0x46800000u;
    uint32_t r = a > 0x43e80000u ? 0x7fu : (a < 0x3c800000u ? sub : nrm);
    return (uint8_t)(r | ((x >> 24) & 0x80u));
}
static inline uint8_t spmd__f2e5(float f) {
    uint32_t x = spmd__f2u(f), a = x & 0x7fffffffu;
    uint32_t nrm = (a - 0x38000000u + 0xfffffu + ((a >> 21) & 1u)) >> 21;
    uint32_t sub = spmd__f2u(spmd__u2f(a) + 128.0f) - 0x43000000u;
    uint32_t big = a > 0x7f800000u ? 0x7eu : 0x7cu;
    uint32_t r = a >= 0x47700000u ? big : (a < 0x38800000u ? sub : nrm);
    return (uint8_t)(r | ((x >> 24) & 0x80u));
}

/* binary32 -> bfloat16, round to nearest even; NaN stays a quiet NaN */
static inline uint16_t spmd__f2b(float f) {
    uint32_t x = spmd__f2u(f);
    uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? ((x >> 16) | 0x40u) : r);
}

// >>reduce kernels
/* A kernel reduces G inputs elementwise into out, in the canonical order
   (below, at spmd__reduce_tiles).
   It is an entry of a table (spmd__kern: sizes and four loops), run by one
   driver, spmd__reduce:
     load   inputs -> accumulator type (f16 and bf16 to f32, integers to a
            wider type for a mean or argmax; NULL: the same type);
     comb   d = a OP x on accumulator blocks; d may be a or x (in place);
     fin    accumulator -> output (rounding to f16, dividing by G for a
            mean; NULL: a copy);
     argeq  argmax/argmin's second pass (comb is then max or min).
   The driver walks tiles of SPMD__TILE elements through an accumulator on
   the stack; with no load and no fin the first and last steps read the
   inputs and write out directly (G = 2: one pass). out may be one of the
   inputs: each element of out is written after every input's element at
   that index was read.
   The hot loops (comb, and the f16/bf16 conversions) are written with
   explicit vectors (GCC's vector extension, which clang shares), so they
   are fast at any -O level without the auto-vectoriser: 4 vectors at a
   time when optimised (SPMD__FAST), 1 at -O0, a last partial block
   through zero-padded vectors. On x86-64 they
   are also built for AVX2 (and F16C for f16) and a mesh picks that table
   at creation. The cold loops (widening loads, integer means, argeq) are
   plain loops the compiler vectorises at the user's level, or not.
   Semantics: integer sum and prod wrap (the same bits signed or unsigned);
   a mean sums exactly in a wider integer and divides toward zero; float
   max/min propagate NaN; f16 and bf16 combine in f32 and round to nearest
   even once. */
#define SPMD__R __restrict
#define SPMD__VT(T, B) T __attribute__((vector_size(B)))
typedef SPMD__VT(uint8_t, 16) spmd__vu8;
typedef SPMD__VT(int8_t, 16) spmd__vi8;
typedef SPMD__VT(uint16_t, 16) spmd__vu16;
typedef SPMD__VT(int16_t, 16) spmd__vi16;
typedef SPMD__VT(uint32_t, 16) spmd__vu32;
typedef SPMD__VT(int32_t, 16) spmd__vi32;
typedef SPMD__VT(uint64_t, 16) spmd__vu64;
typedef SPMD__VT(int64_t, 16) spmd__vi64;
typedef SPMD__VT(float, 16) spmd__vf32;
typedef SPMD__VT(double, 16) spmd__vf64;
/* 8 lanes of 32 bits (two SSE or NEON registers, one AVX2 register): the
   f32 side of 8 halves (spmd__vu16) */
typedef SPMD__VT(uint32_t, 32) spmd__vu32x8;
typedef SPMD__VT(int32_t, 32) spmd__vi32x8;
typedef SPMD__VT(float, 32) spmd__vf32x8;
typedef SPMD__VT(double, 32) spmd__vf64x4;
typedef SPMD__VT(int64_t, 32) spmd__vi64x4;

/* c ? a : b, lane by lane; c is a comparison's all-ones mask of type MT */
#define SPMD__SEL(c, a, b, VT, MT) ((VT)(((MT)(a) & (MT)(c)) | ((MT)(b) & ~(MT)(c))))
#define SPMD__V_ADD(a, b, VT, MT) ((a) + (b)) /* unsigned lanes wrap */
#define SPMD__V_MUL(a, b, VT, MT) ((a) * (b))
#define SPMD__V_AND(a, b, VT, MT) ((a) & (b))
#define SPMD__V_OR(a, b, VT, MT) ((a) | (b))
#define SPMD__V_MAXI(a, b, VT, MT) SPMD__SEL((a) > (b), a, b, VT, MT)
#define SPMD__V_MINI(a, b, VT, MT) SPMD__SEL((a) < (b), a, b, VT, MT)
#define SPMD__V_MAXF(a, b, VT, MT) SPMD__SEL(((a) > (b)) | ((a) != (a)), a, b, VT, MT) /* NaN wins */
#define SPMD__V_MINF(a, b, VT, MT) SPMD__SEL(((a) < (b)) | ((a) != (a)), a, b, VT, MT)
#define SPMD__S_ADD(a, b) ((a) + (b))
#define SPMD__S_MUL(a, b) ((a) * 1u * (b)) /* unsigned (or float), whatever the promotion */
#define SPMD__S_AND(a, b) ((a) & (b))
#define SPMD__S_OR(a, b) ((a) | (b))
#define SPMD__S_MAXI(a, b) ((a) > (b) ? (a) : (b))
#define SPMD__S_MINI(a, b) ((a) < (b) ? (a) : (b))
#define SPMD__S_MAXF(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define SPMD__S_MINF(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* d = a OP x over m elements of type T, on vectors of type VT (SPMD__V_OP)
   four at a time, then one at a time, then the last elements as scalars
   (SPMD__S_OP: a small message is a few instructions) */
#define SPMD__COMB1(OP, VT, MT, OFF)                                                      \
    {                                                                                    \
        VT va, vx;                                                                       \
        memcpy(&va, a + i + (OFF), sizeof va);                                           \
        memcpy(&vx, x + i + (OFF), sizeof vx);                                           \
        va = SPMD__V_##OP(va, vx, VT, MT);                                               \
        memcpy(d + i + (OFF), &va, sizeof va);                                           \
    }
/* Code only for an optimised build (the vector and whole-block fast paths
   of the loops here): at -O0 every vector goes through memory anyway, and
   their copies of a loop's body only cost compile time (most of the
   kernels' code); the general loop after them, a scalar one, does it all. */
#ifdef __OPTIMIZE__
#define SPMD__FAST(...) __VA_ARGS__
#else
#define SPMD__FAST(...)
#endif
#define SPMD__COMB(ATTR, NAME, T, VT, MT, OP)                                             \
    ATTR static void NAME(void *d_, const void *a_, const void *x_, size_t m) {          \
        unsigned char *d = (unsigned char *)d_;                                          \
        const unsigned char *a = (const unsigned char *)a_, *x = (const unsigned char *)x_; \
        size_t i = 0, n = m * sizeof(T);                                                 \
        SPMD__FAST(for (; i + 4 * sizeof(VT) <= n; i += 4 * sizeof(VT)) {                \
            SPMD__COMB1(OP, VT, MT, 0)                                                   \
            SPMD__COMB1(OP, VT, MT, sizeof(VT))                                          \
            SPMD__COMB1(OP, VT, MT, 2 * sizeof(VT))                                      \
            SPMD__COMB1(OP, VT, MT, 3 * sizeof(VT))                                      \
        })                                                                               \
        SPMD__FAST(for (; i + sizeof(VT) <= n; i += sizeof(VT)) SPMD__COMB1(OP, VT, MT, 0)) \
        for (; i < n; i += sizeof(T)) { /* the rest one at a time (at -O0 all) */        \
            T sa, sx;                                                                    \
            memcpy(&sa, a + i, sizeof sa);                                               \
            memcpy(&sx, x + i, sizeof sx);                                               \
            sa = (T)SPMD__S_##OP(sa, sx);                                                \
            memcpy(d + i, &sa, sizeof sa);                                               \
        }                                                                                \
    }

/* The f16 and bf16 conversions, 8 lanes at a time: the scalar functions
   above, lane by lane. A load reads halves (h) and writes f32 bits (o); a
   fin reads f32 bits (w), divides them by G first for a mean (PRE), and
   writes halves (h). */
#define SPMD__P112 ((float)(1ull << 56) * (float)(1ull << 56)) /* 2^112 */
#define SPMD__K_B2F o = __builtin_convertvector(h, spmd__vu32x8) << 16;
#define SPMD__K_H2F                                                                       \
    w = __builtin_convertvector(h, spmd__vu32x8);                                        \
    o = (spmd__vu32x8)((spmd__vf32x8)((w & 0x7fffu) << 13) * SPMD__P112) |                 \
        SPMD__SEL((w & 0x7fffu) >= 0x7c00u, (w & 0u) | 0x7f800000u, w & 0u, spmd__vu32x8, spmd__vi32x8) | \
        ((w & 0x8000u) << 16);
#define SPMD__K_F2B                                                                       \
    o = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;                                          \
    o = SPMD__SEL((w & 0x7fffffffu) > 0x7f800000u, (w >> 16) | 0x40u, o, spmd__vu32x8, spmd__vi32x8); \
    h = __builtin_convertvector(o, spmd__vu16);
#define SPMD__K_F2H                                                                       \
    w &= 0x7fffffffu; /* the sign bit is in s */                                         \
    o = SPMD__SEL(w >= 0x47800000u,                                                      \
                  SPMD__SEL(w > 0x7f800000u, (w & 0u) | 0x7e00u, (w & 0u) | 0x7c00u, spmd__vu32x8, spmd__vi32x8), \
                  SPMD__SEL(w < 0x38800000u,                                             \
                            (spmd__vu32x8)((spmd__vf32x8)w + 0.5f) - 0x3f000000u,        \
                            (w + 0xc8000fffu + ((w >> 13) & 1u)) >> 13, spmd__vu32x8, spmd__vi32x8), \
                  spmd__vu32x8, spmd__vi32x8);                                           \
    h = __builtin_convertvector(o | s, spmd__vu16);
#define SPMD__K_SIGN s = (w >> 16) & 0x8000u;
#define SPMD__K_DIV w = (spmd__vu32x8)((spmd__vf32x8)w / (float)G);
#define SPMD__K_NONE
#define SPMD__HLOAD(ATTR, NAME, BODY)                                                     \
    ATTR static void NAME(void *d_, const void *x_, size_t m) {                          \
        unsigned char *d = (unsigned char *)d_;                                          \
        const unsigned char *x = (const unsigned char *)x_;                              \
        spmd__vu16 h;                                                                     \
        spmd__vu32x8 w, o;                                                               \
        size_t i = 0;                                                                    \
        (void)w;                                                                         \
        SPMD__FAST(for (; i + 8 <= m; i += 8) {                                          \
            memcpy(&h, x + 2 * i, sizeof h);                                             \
            BODY memcpy(d + 4 * i, &o, sizeof o);                                        \
        })                                                                               \
        for (; i < m; i += 8) { /* (a last partial block; at -O0 every block) */         \
            size_t k = m - i < 8 ? m - i : 8;                                            \
            memset(&h, 0, sizeof h);                                                     \
            memcpy(&h, x + 2 * i, 2 * k);                                                \
            BODY memcpy(d + 4 * i, &o, 4 * k);                                           \
        }                                                                                \
    }
#define SPMD__HFIN(ATTR, NAME, PRE, BODY)                                                 \
    ATTR static void NAME(void *d_, const void *a_, size_t m, int G) {                   \
        unsigned char *d = (unsigned char *)d_;                                          \
        const unsigned char *a = (const unsigned char *)a_;                              \
        spmd__vu16 h;                                                                     \
        spmd__vu32x8 w, o, s;                                                            \
        size_t i = 0;                                                                    \
        (void)G;                                                                         \
        (void)o;                                                                         \
        (void)s;                                                                         \
        SPMD__FAST(for (; i + 8 <= m; i += 8) {                                          \
            memcpy(&w, a + 4 * i, sizeof w);                                             \
            PRE SPMD__K_SIGN BODY memcpy(d + 2 * i, &h, sizeof h);                       \
        })                                                                               \
        for (; i < m; i += 8) { /* (a last partial block; at -O0 every block) */         \
            size_t k = m - i < 8 ? m - i : 8;                                            \
            memset(&w, 0, sizeof w);                                                     \
            memcpy(&w, a + 4 * i, 4 * k);                                                \
            PRE SPMD__K_SIGN BODY memcpy(d + 2 * i, &h, 2 * k);                          \
        }                                                                                \
    }

#ifndef __OPTIMIZE__
/* At -O0 the half kernels go an element at a time through the scalar
   conversions above (what the 8-lane bodies compute lane by lane): the
   lanes' code, unoptimised, was a tenth of the implementation's and its
   compile time. The nodispatch suite runs these. */
#undef SPMD__HLOAD
#undef SPMD__HFIN
#define SPMD__SCALAR_SPMD__K_B2F spmd__b2f
#define SPMD__SCALAR_SPMD__K_H2F spmd__h2f
#define SPMD__SCALAR_SPMD__K_F2B spmd__f2b
#define SPMD__SCALAR_SPMD__K_F2H spmd__f2h
#define SPMD__SCALAR_SPMD__K_NONE(f, G) (void)(G)
#define SPMD__SCALAR_SPMD__K_DIV(f, G) (f) = (f) / (float)(G)
#define SPMD__HLOAD(ATTR, NAME, BODY)                                                     \
    ATTR static void NAME(void *d_, const void *x_, size_t m) {                          \
        size_t i;                                                                        \
        for (i = 0; i < m; i++) {                                                        \
            uint16_t h;                                                                  \
            float f;                                                                     \
            memcpy(&h, (const unsigned char *)x_ + 2 * i, 2);                            \
            f = SPMD__SCALAR_##BODY(h);                                                  \
            memcpy((unsigned char *)d_ + 4 * i, &f, 4);                                  \
        }                                                                                \
    }
#define SPMD__HFIN(ATTR, NAME, PRE, BODY)                                                 \
    ATTR static void NAME(void *d_, const void *a_, size_t m, int G) {                   \
        size_t i;                                                                        \
        for (i = 0; i < m; i++) {                                                        \
            uint16_t h;                                                                  \
            float f;                                                                     \
            memcpy(&f, (const unsigned char *)a_ + 4 * i, 4);                            \
            SPMD__SCALAR_##PRE(f, G);                                                    \
            h = SPMD__SCALAR_##BODY(f);                                                  \
            memcpy((unsigned char *)d_ + 2 * i, &h, 2);                                  \
        }                                                                                \
    }
#endif

/* Cold loops: widening loads, the integer means' fins, argmax's pass. */
#define SPMD__LOAD(NAME, T, A, CVT)                                                       \
    static void NAME(void *d_, const void *x_, size_t m) {                               \
        A *SPMD__R d = (A *)d_;                                                          \
        const T *SPMD__R x = (const T *)x_;                                              \
        size_t i;                                                                        \
        for (i = 0; i < m; i++) d[i] = (A)CVT(x[i]);                                     \
    }
#define SPMD__FIN(NAME, A, T, F)                                                          \
    static void NAME(void *o_, const void *a_, size_t m, int G) {                        \
        T *SPMD__R o = (T *)o_;                                                          \
        const A *SPMD__R a = (const A *)a_;                                              \
        size_t i;                                                                        \
        (void)G;                                                                         \
        for (i = 0; i < m; i++) o[i] = (T)F(a[i]);                                       \
    }
#define SPMD__ARGEQ(NAME, T)                                                              \
    static void NAME(int32_t *SPMD__R idx, const void *b_, const void *x_, int j, size_t m) { \
        const T *SPMD__R b = (const T *)b_, *SPMD__R x = (const T *)x_;                  \
        size_t i;                                                                        \
        for (i = 0; i < m; i++) idx[i] = x[i] == b[i] ? j : idx[i];                      \
    }
#define SPMD__ID(x) (x)
#define SPMD__NZ(x) ((x) != 0)
#define SPMD__MEAN_I(a) ((a) / G)
#define SPMD__MEAN_U(a) ((a) / (unsigned)G)

/* Every kernel built for the baseline ISA (SUF _base) and, on x86-64, the
   hot ones again for AVX2 (SUF _avx2; F16C for the f16 conversions). */
#define SPMD__HOT_KERNELS(ATTR, SUF)                                                      \
    SPMD__COMB(ATTR, spmd__add_f32##SUF, float, SPMD__VF32##SUF, SPMD__VI32##SUF, ADD)    \
    SPMD__COMB(ATTR, spmd__mul_f32##SUF, float, SPMD__VF32##SUF, SPMD__VI32##SUF, MUL)    \
    SPMD__COMB(ATTR, spmd__max_f32##SUF, float, SPMD__VF32##SUF, SPMD__VI32##SUF, MAXF)   \
    SPMD__COMB(ATTR, spmd__min_f32##SUF, float, SPMD__VF32##SUF, SPMD__VI32##SUF, MINF)   \
    SPMD__COMB(ATTR, spmd__add_f64##SUF, double, SPMD__VF64##SUF, SPMD__VI64##SUF, ADD)   \
    SPMD__COMB(ATTR, spmd__add_u32##SUF, uint32_t, SPMD__VU32##SUF, SPMD__VI32##SUF, ADD) \
    SPMD__HLOAD(ATTR, spmd__ld_bf16##SUF, SPMD__K_B2F)                                   \
    SPMD__HFIN(ATTR, spmd__fin_bf16##SUF, SPMD__K_NONE, SPMD__K_F2B)                     \
    SPMD__HFIN(ATTR, spmd__mean_bf16##SUF, SPMD__K_DIV, SPMD__K_F2B)                     \
    SPMD__PAIRS(ATTR, spmd__add_c64##SUF, spmd__add_f32##SUF)                            \
    SPMD__PAIRS(ATTR, spmd__add_c128##SUF, spmd__add_f64##SUF)
/* A complex sum is the sum of its parts: 2m floats */
#define SPMD__PAIRS(ATTR, NAME, PARTS)                                                    \
    ATTR static void NAME(void *d, const void *a, const void *x, size_t m) { PARTS(d, a, x, 2 * m); }
#define SPMD__VF32_base spmd__vf32
#define SPMD__VI32_base spmd__vi32
#define SPMD__VF64_base spmd__vf64
#define SPMD__VI64_base spmd__vi64
#define SPMD__VU32_base spmd__vu32
SPMD__HOT_KERNELS(, _base)
SPMD__HLOAD(, spmd__ld_f16_base, SPMD__K_H2F)
SPMD__HFIN(, spmd__fin_f16_base, SPMD__K_NONE, SPMD__K_F2H)
SPMD__HFIN(, spmd__mean_f16_base, SPMD__K_DIV, SPMD__K_F2H)
#if SPMD__HAS_X86_DISPATCH
#define SPMD__AVX2 __attribute__((target("avx2,f16c")))
#define SPMD__VF32_avx2 spmd__vf32x8
#define SPMD__VI32_avx2 spmd__vi32x8
#define SPMD__VF64_avx2 spmd__vf64x4
#define SPMD__VI64_avx2 spmd__vi64x4
#define SPMD__VU32_avx2 spmd__vu32x8
SPMD__HOT_KERNELS(SPMD__AVX2, _avx2)
/* F16C: 8 conversions in one instruction, rounding to nearest even (0) */
#define SPMD__K_H2F_F16C o = (spmd__vu32x8)__builtin_ia32_vcvtph2ps256((spmd__vi16)h);
#define SPMD__K_F2H_F16C h = (spmd__vu16)__builtin_ia32_vcvtps2ph256((spmd__vf32x8)w, 0);
SPMD__HLOAD(SPMD__AVX2, spmd__ld_f16_avx2, SPMD__K_H2F_F16C)
SPMD__HFIN(SPMD__AVX2, spmd__fin_f16_avx2, SPMD__K_NONE, SPMD__K_F2H_F16C)
SPMD__HFIN(SPMD__AVX2, spmd__mean_f16_avx2, SPMD__K_DIV, SPMD__K_F2H_F16C)
#endif

/* The rest, baseline only. */
#define SPMD__INT_COMBS(S, T, VT, MT)                                                     \
    SPMD__COMB(, spmd__max_##S, T, VT, MT, MAXI)                                        \
    SPMD__COMB(, spmd__min_##S, T, VT, MT, MINI)
#define SPMD__UINT_COMBS(S, T, VT, MT)                                                    \
    SPMD__INT_COMBS(S, T, VT, MT)                                                       \
    SPMD__COMB(, spmd__add_##S, T, VT, MT, ADD)                                         \
    SPMD__COMB(, spmd__mul_##S, T, VT, MT, MUL)
SPMD__UINT_COMBS(u8, uint8_t, spmd__vu8, spmd__vi8)
SPMD__UINT_COMBS(u16, uint16_t, spmd__vu16, spmd__vi16)
SPMD__INT_COMBS(u32, uint32_t, spmd__vu32, spmd__vi32)
SPMD__COMB(, spmd__mul_u32, uint32_t, spmd__vu32, spmd__vi32, MUL)
SPMD__UINT_COMBS(u64, uint64_t, spmd__vu64, spmd__vi64)
SPMD__INT_COMBS(i8, int8_t, spmd__vi8, spmd__vi8)
SPMD__INT_COMBS(i16, int16_t, spmd__vi16, spmd__vi16)
SPMD__INT_COMBS(i32, int32_t, spmd__vi32, spmd__vi32)
SPMD__INT_COMBS(i64, int64_t, spmd__vi64, spmd__vi64)
SPMD__COMB(, spmd__and_u8, uint8_t, spmd__vu8, spmd__vi8, AND)
SPMD__COMB(, spmd__or_u8, uint8_t, spmd__vu8, spmd__vi8, OR)
SPMD__COMB(, spmd__mul_f64, double, spmd__vf64, spmd__vi64, MUL)
SPMD__COMB(, spmd__max_f64, double, spmd__vf64, spmd__vi64, MAXF)
SPMD__COMB(, spmd__min_f64, double, spmd__vf64, spmd__vi64, MINF)
SPMD__ARGEQ(spmd__eq_u8, uint8_t) /* bool */
SPMD__ARGEQ(spmd__eq_u64, uint64_t)
SPMD__ARGEQ(spmd__eq_i64, int64_t)
SPMD__ARGEQ(spmd__eq_f32, float)
SPMD__ARGEQ(spmd__eq_f64, double)
SPMD__LOAD(spmd__ld_bool_u8, uint8_t, uint8_t, SPMD__NZ)
SPMD__LOAD(spmd__ld_bool_u32, uint8_t, uint32_t, SPMD__NZ)
SPMD__LOAD(spmd__ld_i8, int8_t, int64_t, SPMD__ID)
SPMD__LOAD(spmd__ld_u8, uint8_t, uint64_t, SPMD__ID)
SPMD__LOAD(spmd__ld_i16, int16_t, int64_t, SPMD__ID)
SPMD__LOAD(spmd__ld_u16, uint16_t, uint64_t, SPMD__ID)
SPMD__LOAD(spmd__ld_i32, int32_t, int64_t, SPMD__ID)
SPMD__LOAD(spmd__ld_u32, uint32_t, uint64_t, SPMD__ID)
SPMD__FIN(spmd__mean_i8, int64_t, int8_t, SPMD__MEAN_I)
SPMD__FIN(spmd__mean_u8, uint64_t, uint8_t, SPMD__MEAN_U)
SPMD__FIN(spmd__mean_i16, int64_t, int16_t, SPMD__MEAN_I)
SPMD__FIN(spmd__mean_u16, uint64_t, uint16_t, SPMD__MEAN_U)
SPMD__FIN(spmd__mean_i32, int64_t, int32_t, SPMD__MEAN_I)
SPMD__FIN(spmd__mean_u32, uint64_t, uint32_t, SPMD__MEAN_U)
#define SPMD__MEAN_F(a) ((a) / (float)G)
#define SPMD__MEAN_D(a) ((a) / (double)G)
SPMD__FIN(spmd__mean_f32, float, float, SPMD__MEAN_F)
SPMD__FIN(spmd__mean_f64, double, double, SPMD__MEAN_D)
/* fp8: loads to f32 through a table of the 256 codes' values (constants
   the compiler folds: SPMD__E4V, SPMD__E5V are the formats' definitions;
   the public spmd_f8e4m3fn_to_f32 reads it too),
   a lookup an element; fins 4 lanes at a time, the scalar conversions of
   >>half precision lane by lane, then a byte from each lane (vector code that narrowed or widened bytes, the baseline vectors do a
   lane at a time through memory: slower than either). */
#define SPMD__P2(k) ((float)(1u << ((k) < -16 ? 0 : (k) + 16)) / 65536.0f) /* 2^k, -16 <= k <= 15 */
#define SPMD__E4M(b) ((b) & 0x78 ? (float)(((b) & 7) + 8) * SPMD__P2((((b) >> 3) & 15) - 10) : (float)((b) & 7) / 512.0f)
#define SPMD__E4V(b) (((b) & 0x7f) == 0x7f ? ((b) & 0x80 ? -__builtin_nanf("") : __builtin_nanf("")) : (b) & 0x80 ? -SPMD__E4M(b) : SPMD__E4M(b))
#define SPMD__E5M(b)                                                                      \
    (((b) & 0x7c) == 0x7c ? ((b) & 3 ? __builtin_nanf("") : __builtin_inff())                                   \
     : (b) & 0x7c          ? (float)(((b) & 3) + 4) * SPMD__P2((((b) >> 2) & 31) - 17)    \
                           : (float)((b) & 3) / 65536.0f)
#define SPMD__E5V(b) ((b) & 0x80 ? -SPMD__E5M(b) : SPMD__E5M(b))
#define SPMD__C16(M, b) M(b), M(b + 1), M(b + 2), M(b + 3), M(b + 4), M(b + 5), M(b + 6), M(b + 7), M(b + 8), \
        M(b + 9), M(b + 10), M(b + 11), M(b + 12), M(b + 13), M(b + 14), M(b + 15)
#define SPMD__C256(M) SPMD__C16(M, 0), SPMD__C16(M, 16), SPMD__C16(M, 32), SPMD__C16(M, 48), SPMD__C16(M, 64), \
        SPMD__C16(M, 80), SPMD__C16(M, 96), SPMD__C16(M, 112), SPMD__C16(M, 128), SPMD__C16(M, 144),      \
        SPMD__C16(M, 160), SPMD__C16(M, 176), SPMD__C16(M, 192), SPMD__C16(M, 208), SPMD__C16(M, 224),     \
        SPMD__C16(M, 240)
static const float spmd__e4tab[256] = {SPMD__C256(SPMD__E4V)};
static const float spmd__e5tab[256] = {SPMD__C256(SPMD__E5V)};
#define SPMD__E4T(b) spmd__e4tab[b]
#define SPMD__E5T(b) spmd__e5tab[b]
SPMD__LOAD(spmd__ld_e4m3, uint8_t, float, SPMD__E4T)
SPMD__LOAD(spmd__ld_e5m2, uint8_t, float, SPMD__E5T)
#define SPMD__K4_F2E4                                                                     \
    o = SPMD__SEL(a > 0x43e80000u, (a & 0u) | 0x7fu,                                     \
                  SPMD__SEL(a < 0x3c800000u, (spmd__vu32)((spmd__vf32)a + 16384.0f) - 0x46800000u, \
                            (a - 0x3c000000u + 0x7ffffu + ((a >> 20) & 1u)) >> 20, spmd__vu32, spmd__vi32), \
                  spmd__vu32, spmd__vi32);
#define SPMD__K4_F2E5                                                                     \
    o = SPMD__SEL(a >= 0x47700000u,                                                      \
                  SPMD__SEL(a > 0x7f800000u, (a & 0u) | 0x7eu, (a & 0u) | 0x7cu, spmd__vu32, spmd__vi32), \
                  SPMD__SEL(a < 0x38800000u, (spmd__vu32)((spmd__vf32)a + 128.0f) - 0x43000000u, \
                            (a - 0x38000000u + 0xfffffu + ((a >> 21) & 1u)) >> 21, spmd__vu32, spmd__vi32), \
                  spmd__vu32, spmd__vi32);
#define SPMD__F8FIN(NAME, MEAN, BODY, ONE)                                                \
    static void NAME(void *d_, const void *a_, size_t m, int G) {                        \
        unsigned char *d = (unsigned char *)d_;                                          \
        const unsigned char *s = (const unsigned char *)a_;                              \
        size_t i = 0;                                                                    \
        SPMD__FAST(for (; i + 4 <= m; i += 4) {                                          \
            spmd__vu32 w, a, o;                                                          \
            memcpy(&w, s + 4 * i, sizeof w);                                             \
            if (MEAN) w = (spmd__vu32)((spmd__vf32)w / (float)G);                        \
            a = w & 0x7fffffffu;                                                         \
            BODY o |= (w >> 24) & 0x80u;                                                 \
            d[i] = (unsigned char)o[0], d[i + 1] = (unsigned char)o[1];                  \
            d[i + 2] = (unsigned char)o[2], d[i + 3] = (unsigned char)o[3];              \
        })                                                                               \
        for (; i < m; i++) { /* the rest one at a time (at -O0 all) */                   \
            float f;                                                                     \
            memcpy(&f, s + 4 * i, 4);                                                    \
            d[i] = ONE(MEAN ? f / (float)G : f);                                         \
        }                                                                                \
    }
SPMD__F8FIN(spmd__fin_e4m3, 0, SPMD__K4_F2E4, spmd__f2e4)
SPMD__F8FIN(spmd__fin_e5m2, 0, SPMD__K4_F2E5, spmd__f2e5)
SPMD__F8FIN(spmd__mean_e4m3, 1, SPMD__K4_F2E4, spmd__f2e4)
SPMD__F8FIN(spmd__mean_e5m2, 1, SPMD__K4_F2E5, spmd__f2e5)
/* Complex: a mean divides both parts; a product is complex arithmetic in
   the element type, each of its four products rounded before the sum or
   difference (SPMD__KEEP hides a product from the compiler, which could
   otherwise fuse it into a multiply-add where the target has one: a
   result that would then depend on the build). */
#if defined(__x86_64__)
#define SPMD__KEEP(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__)
#define SPMD__KEEP(v) __asm__("" : "+w"(v))
#else
#define SPMD__KEEP(v) (void)(v)
#endif
#define SPMD__CMUL(NAME, T, VEC)                                                          \
    static void NAME(void *d_, const void *a_, const void *x_, size_t m) {               \
        size_t i = 0;                                                                    \
        VEC                                                                              \
        for (; i < m; i++) { /* (the rest, or all) */                                    \
            T a[2], x[2], rr, ii, ri, ir;                                                \
            memcpy(a, (const unsigned char *)a_ + i * sizeof a, sizeof a);               \
            memcpy(x, (const unsigned char *)x_ + i * sizeof x, sizeof x);               \
            rr = a[0] * x[0];                                                            \
            ii = a[1] * x[1];                                                            \
            ri = a[0] * x[1];                                                            \
            ir = a[1] * x[0];                                                            \
            SPMD__KEEP(rr);                                                              \
            SPMD__KEEP(ii);                                                              \
            SPMD__KEEP(ri);                                                              \
            SPMD__KEEP(ir);                                                              \
            a[0] = rr - ii;                                                              \
            a[1] = ri + ir;                                                              \
            memcpy((unsigned char *)d_ + i * sizeof a, a, sizeof a);                     \
        }                                                                                \
    }
/* complex64, two at a time in 16-byte vectors, each complex number a
   64-bit lane: its parts duplicated or swapped by shifts, then the same
   four products (kept apart: SPMD__KEEP), the one to subtract negated by
   its sign bit (x - y is x + -y, bit for bit) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SPMD__CMUL_C64_VEC                                                                \
    SPMD__FAST(for (; i + 2 <= m; i += 2) {                                              \
        spmd__vu64 a, x;                                                                 \
        spmd__vf32 p, q;                                                                 \
        memcpy(&a, (const unsigned char *)a_ + 8 * i, sizeof a);                         \
        memcpy(&x, (const unsigned char *)x_ + 8 * i, sizeof x);                         \
        p = (spmd__vf32)((a & 0xffffffffu) | a << 32) * (spmd__vf32)x;        /* ar xr, ar xi */ \
        q = (spmd__vf32)((a >> 32) | (a & ~0xffffffffull)) * (spmd__vf32)(x >> 32 | x << 32); /* ai xi, ai xr */ \
        SPMD__KEEP(p);                                                                   \
        SPMD__KEEP(q);                                                                   \
        p = p + (spmd__vf32)((spmd__vu64)q ^ 0x80000000u);                               \
        memcpy((unsigned char *)d_ + 8 * i, &p, sizeof p);                               \
    })
#else
#define SPMD__CMUL_C64_VEC
#endif
SPMD__CMUL(spmd__mul_c64, float, SPMD__CMUL_C64_VEC)
SPMD__CMUL(spmd__mul_c128, double, )
static void spmd__mean_c64(void *o, const void *a, size_t m, int G) { spmd__mean_f32(o, a, 2 * m, G); }
static void spmd__mean_c128(void *o, const void *a, size_t m, int G) { spmd__mean_f64(o, a, 2 * m, G); }
#if SPMD__HAS_INT128
SPMD__LOAD(spmd__ld_i64, int64_t, spmd__i128, SPMD__ID)
SPMD__LOAD(spmd__ld_u64, uint64_t, spmd__u128, SPMD__ID)
SPMD__FIN(spmd__mean_i64, spmd__i128, int64_t, SPMD__MEAN_I)
SPMD__FIN(spmd__mean_u64, spmd__u128, uint64_t, SPMD__MEAN_U)
static void spmd__add_u128(void *d, const void *a, const void *x, size_t m) {
    size_t i;
    for (i = 0; i < m; i++) ((spmd__u128 *)d)[i] = ((const spmd__u128 *)a)[i] + ((const spmd__u128 *)x)[i];
}
#endif

/* complex (W bytes an element): sum, prod and mean; no order, so no
   max, min, argmax, argmin */
#define SPMD__KCPLX(W, S, SUF)                                                            \
    {SPMD__KNONE,                                                                        \
     {W, W, W, NULL, spmd__add_##S##SUF, NULL, NULL},                                    \
     {W, W, W, NULL, spmd__mul_##S, NULL, NULL},                                         \
     SPMD__KNONE,                                                                        \
     SPMD__KNONE,                                                                        \
     {W, W, W, NULL, spmd__add_##S##SUF, spmd__mean_##S, NULL},                          \
     SPMD__KNONE,                                                                        \
     SPMD__KNONE}

/* The tables: one entry per dtype and op, comb NULL where the op is not
   defined. Columns: input, accumulator and output bytes an element; load,
   comb, fin, argeq. Rows follow spmd_dtype, entries spmd_op. */
#define SPMD__KNONE {0, 0, 0, NULL, NULL, NULL, NULL}
#define SPMD__KINT(S, U, W, X64, ADD)                                                     \
    {SPMD__KNONE,                                                                        \
     {W, W, W, NULL, ADD, NULL, NULL},                                                   \
     {W, W, W, NULL, spmd__mul_##U, NULL, NULL},                                         \
     {W, W, W, NULL, spmd__max_##S, NULL, NULL},                                         \
     {W, W, W, NULL, spmd__min_##S, NULL, NULL},                                         \
     {W, 8, W, spmd__ld_##S, spmd__add_u64, spmd__mean_##S, NULL},                       \
     {W, 8, 4, spmd__ld_##S, spmd__max_##X64, NULL, spmd__eq_##X64},                     \
     {W, 8, 4, spmd__ld_##S, spmd__min_##X64, NULL, spmd__eq_##X64}}
#if SPMD__HAS_INT128
#define SPMD__KMEAN64(S) {8, 16, 8, spmd__ld_##S, spmd__add_u128, spmd__mean_##S, NULL}
#else
#define SPMD__KMEAN64(S) SPMD__KNONE /* no 128-bit integers for an exact sum */
#endif
#define SPMD__KINT64(S)                                                                   \
    {SPMD__KNONE,                                                                        \
     {8, 8, 8, NULL, spmd__add_u64, NULL, NULL},                                         \
     {8, 8, 8, NULL, spmd__mul_u64, NULL, NULL},                                         \
     {8, 8, 8, NULL, spmd__max_##S, NULL, NULL},                                         \
     {8, 8, 8, NULL, spmd__min_##S, NULL, NULL},                                         \
     SPMD__KMEAN64(S),                                                                   \
     {8, 8, 4, NULL, spmd__max_##S, NULL, spmd__eq_##S},                                 \
     {8, 8, 4, NULL, spmd__min_##S, NULL, spmd__eq_##S}}
/* f16, bf16 (W = 2: through f32) and f32 (W = 4, LOAD and FIN NULL) */
#define SPMD__KF32(W, LOAD, FIN, MEAN, SUF)                                               \
    {SPMD__KNONE,                                                                        \
     {W, 4, W, LOAD, spmd__add_f32##SUF, FIN, NULL},                                     \
     {W, 4, W, LOAD, spmd__mul_f32##SUF, FIN, NULL},                                     \
     {W, 4, W, LOAD, spmd__max_f32##SUF, FIN, NULL},                                     \
     {W, 4, W, LOAD, spmd__min_f32##SUF, FIN, NULL},                                     \
     {W, 4, W, LOAD, spmd__add_f32##SUF, MEAN, NULL},                                    \
     {W, 4, 4, LOAD, spmd__max_f32##SUF, NULL, spmd__eq_f32},                            \
     {W, 4, 4, LOAD, spmd__min_f32##SUF, NULL, spmd__eq_f32}}
#define SPMD__KTABLE(SUF)                                                                 \
    {{SPMD__KNONE, SPMD__KNONE, SPMD__KNONE, SPMD__KNONE, SPMD__KNONE, SPMD__KNONE, SPMD__KNONE, SPMD__KNONE}, \
     {SPMD__KNONE,                                                                       \
      {1, 4, 4, spmd__ld_bool_u32, spmd__add_u32##SUF, NULL, NULL}, /* sum: int32 counts */ \
      {1, 1, 1, spmd__ld_bool_u8, spmd__and_u8, NULL, NULL},        /* prod: all */      \
      {1, 1, 1, spmd__ld_bool_u8, spmd__or_u8, NULL, NULL},         /* max: any */       \
      {1, 1, 1, spmd__ld_bool_u8, spmd__and_u8, NULL, NULL},        /* min: all */       \
      SPMD__KNONE,                                                                       \
      {1, 1, 4, spmd__ld_bool_u8, spmd__max_u8, NULL, spmd__eq_u8},                      \
      {1, 1, 4, spmd__ld_bool_u8, spmd__min_u8, NULL, spmd__eq_u8}},                     \
     SPMD__KINT(i8, u8, 1, i64, spmd__add_u8), SPMD__KINT(u8, u8, 1, u64, spmd__add_u8), \
     SPMD__KINT(i16, u16, 2, i64, spmd__add_u16), SPMD__KINT(u16, u16, 2, u64, spmd__add_u16), \
     SPMD__KINT(i32, u32, 4, i64, spmd__add_u32##SUF), SPMD__KINT(u32, u32, 4, u64, spmd__add_u32##SUF), \
     SPMD__KINT64(i64), SPMD__KINT64(u64),                                               \
     SPMD__KF32(2, spmd__ld_f16##SUF, spmd__fin_f16##SUF, spmd__mean_f16##SUF, SUF),     \
     SPMD__KF32(2, spmd__ld_bf16##SUF, spmd__fin_bf16##SUF, spmd__mean_bf16##SUF, SUF),  \
     SPMD__KF32(4, NULL, NULL, spmd__mean_f32, SUF),                                     \
     {SPMD__KNONE,                                                                       \
      {8, 8, 8, NULL, spmd__add_f64##SUF, NULL, NULL},                                   \
      {8, 8, 8, NULL, spmd__mul_f64, NULL, NULL},                                        \
      {8, 8, 8, NULL, spmd__max_f64, NULL, NULL},                                        \
      {8, 8, 8, NULL, spmd__min_f64, NULL, NULL},                                        \
      {8, 8, 8, NULL, spmd__add_f64##SUF, spmd__mean_f64, NULL},                         \
      {8, 8, 4, NULL, spmd__max_f64, NULL, spmd__eq_f64},                                \
      {8, 8, 4, NULL, spmd__min_f64, NULL, spmd__eq_f64}},                              \
     SPMD__KCPLX(8, c64, SUF), SPMD__KCPLX(16, c128, SUF),                               \
     SPMD__KF32(1, spmd__ld_e4m3, spmd__fin_e4m3, spmd__mean_e4m3, SUF),                 \
     SPMD__KF32(1, spmd__ld_e5m2, spmd__fin_e5m2, spmd__mean_e5m2, SUF)}

static const spmd__kern spmd__kernels[SPMD_DTYPE_COUNT][SPMD_OP_COUNT] = SPMD__KTABLE(_base);
#if SPMD__HAS_X86_DISPATCH
static const spmd__kern spmd__kernels_avx2[SPMD_DTYPE_COUNT][SPMD_OP_COUNT] = SPMD__KTABLE(_avx2);
#endif

/* The AVX2 table where the CPU has AVX2 and F16C. GCC answers from the CPU
   model libgcc reads once at start-up; clang 14 knows no "f16c" there, so
   it asks CPUID, which traps to the hypervisor in a VM (tens of
   microseconds): meshes therefore choose their table once, at creation. */
static spmd__ktable spmd__kernel_table(void) {
#if SPMD__HAS_X86_DISPATCH && SPMD__GCC
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return spmd__kernels_avx2;
#elif SPMD__HAS_X86_DISPATCH
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0)
        return spmd__kernels_avx2;
#endif
    return spmd__kernels;
}

/* The kernel for a dtype and op in a table, NULL where it is not defined. */
static spmd__kernel spmd__kernel_in(spmd__ktable t, spmd_dtype dt, spmd_op op) {
    return t[dt][op].comb ? &t[dt][op] : NULL;
}

/* Input j's block at element base, as accumulator values: converted into
   buf, or the input itself. */
static const void *spmd__kblock(spmd__kernel k, const void *const *in, int j, size_t base, size_t m, void *buf) {
    const unsigned char *x = (const unsigned char *)in[j] + base * k->in_size;
    if (!k->load) return x;
    k->load(buf, x, m);
    return buf;
}

/* argmax/argmin, with JAX's definition: best = the NaN-propagating max
   (min); the result is the smallest j with x_j == best, or INT32_MAX if
   there is none. */
static void spmd__argreduce(spmd__kernel k, int32_t *out, const void *const *in, int G, size_t n) {
    uint64_t best[SPMD__TILE], tmp[SPMD__TILE]; /* 8 bytes an element at most */
    int32_t idx[SPMD__TILE];
    size_t base, m, i;
    int j;
    for (base = 0; base < n; base += m) {
        const void *run;
        m = n - base < SPMD__TILE ? n - base : SPMD__TILE;
        run = spmd__kblock(k, in, 0, base, m, best);
        for (j = 1; j < G; j++, run = best) k->comb(best, run, spmd__kblock(k, in, j, base, m, tmp), m);
        for (i = 0; i < m; i++) idx[i] = INT32_MAX;
        for (j = G - 1; j >= 0; j--) k->argeq(idx, run, spmd__kblock(k, in, j, base, m, tmp), j, m);
        memcpy(out + base, idx, m * sizeof(int32_t));
    }
}

/* The canonical reduction order, a function of the number of inputs G
   alone, which every backend and algorithm reproduces (so results are
   bit-identical in every layout): let P be the largest power of two <= G
   and r = G - P. The first 2r inputs are combined in pairs, (x0 OP x1),
   (x2 OP x3), ...; those r pairs and the remaining inputs x_2r..x_G-1, in
   order, are P leaves, combined as a perfect binary tree (neighbours first,
   the left operand always the lower one). G = 4: (x0+x1)+(x2+x3); G = 5:
   ((x0+x1)+x2)+(x3+x4); G = 3: (x0+x1)+x2. This is the order of recursive
   halving and doubling across processes with the usual pre-step for sizes
   that are not powers of two, and a pairwise sum is more accurate than a
   left fold (docs/semantics.md). f16 and bf16 are combined in f32 and
   rounded once, at the end. spmd__reduce_tiles walks the tree leaf by leaf
   with a stack of partials, one tile each. */
#define SPMD__TREE_BYTES 8192 /* the stack of partials and the load buffer, on the C stack */
#define SPMD__TREE_SMALL 512  /* ... for a reduction that fits in this (a small psum: its frame
                                 stays near its caller's, in the lines a fiber's stack already has) */
/* The tree's P leaves (the largest power of two <= G) and its height log2 P;
   the plans across processes (>>plans) use the same two. */
static int spmd__tree_leaves(int G) {
    int P = 1;
    while (P <= G / 2) P *= 2;
    return P;
}
static int spmd__log2(int P) {
    int k = 0;
    while ((1 << k) < P) k++;
    return k;
}
/* Tile elements for G inputs: the stack's log2 P + 1 entries and one load
   buffer, of the accumulator's type, in `bytes` (SPMD__TILE at most, a
   power of two). */
static size_t spmd__tree_tile(spmd__kernel k, int G, size_t bytes) {
    size_t depth = (size_t)spmd__log2(spmd__tree_leaves(G)) + 1, m;
    m = bytes / ((depth + 1) * k->acc_size);
    while (m & (m - 1)) m &= m - 1; /* a power of two: tiles aligned as their chunks are */
    return m < SPMD__TILE ? m : SPMD__TILE;
}
/* spmd__reduce through the tiles: per tile, the P leaves in order onto a
   stack of partials (slot i of the stack in buf + i m), and after leaf v
   as many combines as v + 1 has trailing zero bits, which is the perfect
   tree; the last combine writes the output (or, with a fin, slot 0). */
static void spmd__reduce_in(spmd__kernel k, void *out, const void *const *in, int G, size_t n, unsigned char *buf,
                            size_t m) {
    const void *at[24]; /* (24 > log2 P + 1 for any G < 2^23) */
    size_t base, sb;
    int P = spmd__tree_leaves(G), r = G - P, v, c, top, left;
    for (base = 0; base < n; base += m) {
        unsigned char *o = (unsigned char *)out + base * k->out_size;
        void *last;
        if (n - base < m) m = n - base; /* (the last tile: the slots shrink with it) */
        sb = m * k->acc_size;
        last = k->fin ? (void *)buf : (void *)o;
        for (v = 0, top = 0, left = G - 1; v < P; v++) {
            int j = v < r ? 2 * v : v + r; /* leaf v: x_j, or x_j OP x_j+1 (the pre-step's pair) */
            at[top] = spmd__kblock(k, in, j, base, m, buf + (size_t)top * sb);
            if (v < r) {
                void *d = --left ? (void *)(buf + (size_t)top * sb) : last;
                k->comb(d, at[top], spmd__kblock(k, in, j + 1, base, m, buf + (size_t)(top + 1) * sb), m);
                at[top] = d;
            }
            top++;
            for (c = v + 1; !(c & 1); c >>= 1, top--) { /* two subtrees of equal height */
                void *d = --left ? (void *)(buf + (size_t)(top - 2) * sb) : last;
                k->comb(d, at[top - 2], at[top - 1], m);
                at[top - 2] = d;
            }
        }
        if (k->fin) k->fin(o, at[0], m, G);
        else if (at[0] != o) memmove(o, at[0], m * k->out_size);
    }
}

/* The tree's buffer on the C stack: a small one when the whole reduction
   fits (one tile), else SPMD__TREE_BYTES (each in a frame of its own). */
static SPMD__NOINLINE void spmd__reduce_small(spmd__kernel k, void *out, const void *const *in, int G, size_t n) {
    uint64_t area[SPMD__TREE_SMALL / 8];
    spmd__reduce_in(k, out, in, G, n, (unsigned char *)area, spmd__tree_tile(k, G, sizeof area));
}
static SPMD__NOINLINE void spmd__reduce_large(spmd__kernel k, void *out, const void *const *in, int G, size_t n) {
    uint64_t area[SPMD__TREE_BYTES / 8];
    spmd__reduce_in(k, out, in, G, n, (unsigned char *)area, spmd__tree_tile(k, G, sizeof area));
}
static void spmd__reduce_tiles(spmd__kernel k, void *out, const void *const *in, int G, size_t n) {
    if (k->argeq) spmd__argreduce(k, (int32_t *)out, in, G, n);
    else if (spmd__tree_tile(k, G, SPMD__TREE_SMALL) >= n) spmd__reduce_small(k, out, in, G, n);
    else spmd__reduce_large(k, out, in, G, n);
}

/* out = in[0] OP in[1] OP ... OP in[G-1] in the canonical order above, n
   elements, with kernel k: two inputs of the accumulator's type in one
   pass, with no accumulator (the small psum's case, inlined), the rest
   through tiles. */
static inline void spmd__reduce(spmd__kernel k, void *out, const void *const *in, int G, size_t n) {
    if (G == 2 && !k->load && !k->fin && !k->argeq) k->comb(out, in[0], in[1], n);
    else spmd__reduce_tiles(k, out, in, G, n);
}

static const size_t spmd__dtype_sizes[SPMD_DTYPE_COUNT] = {0, 1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 8, 16, 1, 1};
static const char *spmd__dtype_names[SPMD_DTYPE_COUNT] = {
    "none", "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64",
    "c64",  "c128", "f8e4m3fn", "f8e5m2"};
static const char *spmd__op_names[SPMD_OP_COUNT] = {"none", "sum",  "prod",   "max",
                                                    "min",  "mean", "argmax", "argmin"};
static const char *spmd__op_jax[SPMD_OP_COUNT] = {"allreduce", "psum", "pprod", "pmax",
                                                  "pmin", "pmean", "pargmax", "pargmin"};

static size_t spmd__out_size(spmd_dtype dt, spmd_op op) {
    if (op == SPMD_OP_ARGMAX || op == SPMD_OP_ARGMIN) return 4;
    if (dt == SPMD_BOOL && op == SPMD_OP_SUM) return 4;
    return spmd__dtype_sizes[dt];
}

// >>axes and groups
/* From a call's axes (and axis_index_groups) to its group: spmd__parse_axes
   checks the names, spmd__gref_get finds or makes the device's reference
   to the group (members in order, its slots, a hash that names it across
   processes), cached by the axes' text so a repeated call does no parsing.
   spmd__entry_at is where a member's posting for an operation lives. Calls
   memory and logging only. */
/* FNV-1a over v[i] - base (base 0: the values themselves). */
static uint64_t spmd__hash_rel(const int *v, int n, int base, uint64_t h) {
    int i;
    for (i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)(v[i] - base);
        h *= 1099511628211u;
    }
    return h;
}
static uint64_t spmd__hash_ints(const int *v, int n, uint64_t h) { return spmd__hash_rel(v, n, 0, h); }

/* Parse "row,col" (spaces allowed around names), "" (no axis) or "*" (all
   axes) into axis indices. On error returns the status and writes why. */
static spmd_status spmd__parse_axes(const spmd_mesh *m, const char *axes, int *idx, int *n,
                                    char *why, size_t whylen) {
    const char *p = axes;
    int k = 0, i;
    if (!axes) {
        snprintf(why, whylen, "axes is NULL (use \"*\" for every axis, \"\" for none)");
        return SPMD_ERR_NULL;
    }
    while (*p == ' ') p++;
    if (p[0] == '*' && p[1 + strspn(p + 1, " ")] == '\0') {
        for (i = 0; i < m->ndim; i++) idx[i] = i;
        *n = m->ndim;
        return SPMD_OK;
    }
    if (*p == '\0') { *n = 0; return SPMD_OK; }
    for (;;) {
        const char *s = p, *e;
        size_t len;
        int last;
        while (*s == ' ') s++;
        e = s + strcspn(s, ",");
        last = *e == '\0';
        p = last ? e : e + 1;
        while (e > s && e[-1] == ' ') e--;
        len = (size_t)(e - s);
        for (i = 0; i < m->ndim; i++)
            if (strlen(m->names[i]) == len && memcmp(m->names[i], s, len) == 0) break;
        if (len == 0 || i == m->ndim) {
            if (len == 0)
                snprintf(why, whylen, "empty axis name in \"%s\"", axes);
            else {
                int w = snprintf(why, whylen, "unknown axis '%.*s' in \"%s\"; the mesh's axes:",
                                 (int)(len > 40 ? 40 : len), s, axes);
                for (i = 0; i < m->ndim && w >= 0 && (size_t)w < whylen; i++)
                    w += snprintf(why + w, whylen - (size_t)w, "%s '%s'", i ? "," : "", m->names[i]);
            }
            return SPMD_ERR_AXIS;
        }
        {
            int j;
            for (j = 0; j < k; j++)
                if (idx[j] == i) {
                    snprintf(why, whylen, "axis '%s' named twice in \"%s\"", m->names[i], axes);
                    return SPMD_ERR_DUP_AXIS;
                }
        }
        idx[k++] = i;
        if (last) break;
    }
    *n = k;
    return SPMD_OK;
}

static int spmd__axes_size(const spmd_mesh *m, const int *idx, int n) {
    int i, a = 1;
    for (i = 0; i < n; i++) a *= m->shape[idx[i]];
    return a;
}

/* This device's index along the named axes, the first named being major. */
static int spmd__axes_index(const spmd_dev *d, const int *idx, int n) {
    int i, v = 0;
    for (i = 0; i < n; i++) v = v * d->mesh->shape[idx[i]] + d->coords[idx[i]];
    return v;
}

/* The device whose coordinates equal ours except on the named axes, where
   they spell index v. */
static int spmd__axes_member(const spmd_dev *d, const int *idx, int n, int v) {
    const spmd_mesh *m = d->mesh;
    int c[SPMD_MAX_AXES], i, id = 0;
    memcpy(c, d->coords, sizeof c);
    for (i = n - 1; i >= 0; i--) {
        c[idx[i]] = v % m->shape[idx[i]];
        v /= m->shape[idx[i]];
    }
    for (i = 0; i < m->ndim; i++) id += c[i] * m->stride[i];
    return id;
}

/* The group over axes (no axis_index_groups) that d is in, found by the
   axes and its first member (the one at index 0 along them, d's
   coordinates elsewhere), which say its members: only the first device
   to ask builds the member list (spmd__group_get, O(A)); the others find
   it here in O(naxes), so a mesh's first use of an axes costs O(N), not
   O(N A). NULL without memory. */
static spmd__group *spmd__group_get(spmd_mesh *m, const int *members, int G);
typedef struct spmd__gkey {
    int naxes, axes[SPMD_MAX_AXES], first;
    spmd__group *g;
    struct spmd__gkey *next;
} spmd__gkey;
static spmd__group *spmd__gkey_find(spmd_mesh *m, size_t b, const int *axes, int naxes, int first) {
    spmd__gkey *k;
    for (k = m->gkeys[b]; k; k = k->next)
        if (k->first == first && k->naxes == naxes && memcmp(k->axes, axes, (size_t)naxes * sizeof(int)) == 0)
            return k->g;
    return NULL;
}
static spmd__group *spmd__group_of_axes(spmd_dev *d, const int *axes, int naxes, int A) {
    spmd_mesh *m = d->mesh;
    int first = spmd__axes_member(d, axes, naxes, 0), i, *members;
    size_t b = (size_t)((spmd__hash_ints(axes, naxes, 1469598103934665603u) ^ (uint64_t)first * 0x9e3779b97f4a7c15u) %
                        m->gbuckets);
    spmd__group *g;
    spmd__gkey *k;
    pthread_mutex_lock(&m->lock);
    g = spmd__gkey_find(m, b, axes, naxes, first);
    pthread_mutex_unlock(&m->lock);
    if (g) return g;
    members = (int *)spmd__alloc(&m->alloc, (size_t)A * sizeof(int));
    k = (spmd__gkey *)spmd__alloc(&m->alloc, sizeof *k);
    if (!members || !k) {
        spmd__free(&m->alloc, members);
        spmd__free(&m->alloc, k);
        return NULL;
    }
    for (i = 0; i < A; i++) members[i] = spmd__axes_member(d, axes, naxes, i);
    g = spmd__group_get(m, members, A);
    spmd__free(&m->alloc, members);
    if (!g) {
        spmd__free(&m->alloc, k);
        return NULL;
    }
    pthread_mutex_lock(&m->lock);
    if (spmd__gkey_find(m, b, axes, naxes, first)) { /* (another member came meanwhile: the same group) */
        spmd__free(&m->alloc, k);
    } else {
        k->naxes = naxes;
        memcpy(k->axes, axes, (size_t)naxes * sizeof(int));
        k->first = first;
        k->g = g;
        k->next = m->gkeys[b];
        m->gkeys[b] = k;
    }
    pthread_mutex_unlock(&m->lock);
    return g;
}

/* Validate axis_index_groups: group_size divides A, every index once
   (seen: a bit per index, on the stack up to 4,096 indices, else from a). */
static spmd_status spmd__check_groups(const spmd_allocator *a, const spmd_opts *o, int A, char *why, size_t whylen) {
    unsigned char small[512], *seen = small;
    spmd_status s = SPMD_OK;
    int i;
    if (!o || (!o->groups && o->group_size == 0)) return SPMD_OK;
    if (!o->groups) {
        snprintf(why, whylen, "group_size %d given without groups", o->group_size);
        return SPMD_ERR_GROUPS;
    }
    if (o->group_size <= 0 || A % o->group_size != 0) {
        snprintf(why, whylen, "group_size %d does not divide the axis size %d", o->group_size, A);
        return SPMD_ERR_GROUPS;
    }
    if ((size_t)A > 8 * sizeof small && !(seen = (unsigned char *)spmd__alloc(a, ((size_t)A + 7) / 8))) {
        snprintf(why, whylen, "out of memory checking groups of an axis of %d", A);
        return SPMD_ERR_NOMEM;
    }
    memset(seen, 0, ((size_t)A + 7) / 8);
    for (i = 0; i < A && s == SPMD_OK; i++) {
        int v = o->groups[i];
        if (v < 0 || v >= A) {
            snprintf(why, whylen, "groups[%d] = %d is outside 0..%d", i, v, A - 1);
            s = SPMD_ERR_GROUPS;
        } else if (seen[v >> 3] >> (v & 7) & 1) {
            snprintf(why, whylen, "axis index %d appears twice in groups (must cover every index once)", v);
            s = SPMD_ERR_GROUPS;
        }
        if (s == SPMD_OK) seen[v >> 3] |= (unsigned char)(1u << (v & 7));
    }
    if (seen != small) spmd__free(a, seen);
    return s;
}

static void spmd__group_free(spmd_mesh *m, spmd__group *g) {
    spmd__free(&m->alloc, g->members);
    spmd__free(&m->alloc, g->mem);
    spmd__free(&m->alloc, g->mine);
    spmd__free(&m->alloc, g->fin);
    spmd__free(&m->alloc, g->shared);
    spmd__free(&m->alloc, g->slots);
    spmd__free(&m->alloc, g->sleepers);
    spmd__free(&m->alloc, g->board);
    spmd__free(&m->alloc, g->permc);
    spmd__free(&m->alloc, g->lidx);
    spmd__free(&m->alloc, g->rprocs);
    spmd__free(&m->alloc, g->procs);
    spmd__free(&m->alloc, g->pos_of);
    spmd__free(&m->alloc, g);
}

/* The group field of message tags: 16 bits, so two groups may share it
   (every header then tells them apart: a mismatch is reported, never
   mixed). Groups that run in lockstep are the likeliest to meet: the
   groups of one set of axes (every device's psum over 'x' at once) are one
   member pattern moved across the mesh. The field is therefore a hash of
   the pattern (the members' offsets from the first) plus the first
   member, which keeps such siblings apart on any mesh of up to 65536
   devices; groups of different patterns share it by chance (1 in 65536). */
static uint32_t spmd__group_gid(const int *members, int G, uint32_t mesh_id) {
    uint64_t h = spmd__hash_rel(members + 1, G - 1, members[0],
                                1469598103934665603u ^ ((uint64_t)mesh_id + 1) * 0x9e3779b97f4a7c15u);
    h = (h ^ (uint64_t)G) * 0xff51afd7ed558ccdu;
    return (uint32_t)((h >> 40 ^ h >> 16 ^ h) + (uint64_t)(uint32_t)members[0]) & 0xffffu;
}

/* libfabric: which members live here and which processes hold the others. */
static spmd_status spmd__group_place(spmd_mesh *m, spmd__group *g, uint64_t h) {
    int k, np = 0;
    g->lidx = (int *)spmd__alloc(&m->alloc, 2 * (size_t)g->G * sizeof(int)); /* and locs */
    g->rprocs = (int *)spmd__alloc(&m->alloc, (size_t)g->G * sizeof(int));
    g->procs = (int *)spmd__alloc(&m->alloc, (size_t)g->G * sizeof(int));
    g->pos_of = (int *)spmd__alloc(&m->alloc, (size_t)m->nprocs * sizeof(int));
    if (!g->lidx || !g->rprocs || !g->procs || !g->pos_of) return SPMD_ERR_NOMEM;
    g->locs = g->lidx + g->G;
    for (k = 0; k < m->nprocs; k++) g->pos_of[k] = -1;
    for (k = 0; k < g->G; k++) {
        int p = m->proc_of[g->members[k]];
        if (g->pos_of[p] < 0) {
            g->pos_of[p] = np;
            g->procs[np++] = p;
        }
        if (p == m->proc) g->locs[g->nloc] = k;
        g->lidx[k] = p == m->proc ? g->nloc++ : -1;
    }
    for (k = 0; k < np; k++) /* the others, in the same order */
        if (g->procs[k] != m->proc) g->rprocs[g->nrp++] = g->procs[k];
    g->ppos = g->pos_of[m->proc];
    g->span = g->nrp > 0;
    g->pblk = g->G % np == 0 && !(g->G / np & (g->G / np - 1)) ? g->G / np : 0;
    for (k = 0; k < g->G && g->pblk; k++)
        if (g->pos_of[m->proc_of[g->members[k]]] != k / g->pblk) g->pblk = 0;
    g->xhash = (h ^ ((uint64_t)m->mesh_id + 1) * 0x9e3779b97f4a7c15u) * 0xff51afd7ed558ccdu;
    g->gid = spmd__group_gid(g->members, g->G, m->mesh_id);
    return SPMD_OK;
}

/* The mesh-wide communicator for an ordered member list, made on first use. */
/* Note g among d's groups (m->lock held); 0 without memory. */
static int spmd__member_of(spmd_mesh *m, spmd_dev *d, spmd__group *g) {
    if (!d) return 1;
    if (d->nmemberof == d->cap_memberof) {
        int cap = d->cap_memberof ? 2 * d->cap_memberof : 4;
        spmd__group **n = (spmd__group **)spmd__alloc(&m->alloc, (size_t)cap * sizeof *n);
        if (!n) return 0;
        if (d->nmemberof) memcpy(n, d->memberof, (size_t)d->nmemberof * sizeof *n);
        spmd__free(&m->alloc, d->memberof);
        d->memberof = n;
        d->cap_memberof = cap;
    }
    d->memberof[d->nmemberof++] = g;
    return 1;
}

static spmd__group *spmd__group_get(spmd_mesh *m, const int *members, int G) {
    uint64_t h = spmd__hash_ints(members, G, 1469598103934665603u);
    size_t b = (size_t)(h % m->gbuckets);
    spmd__group *g;
    pthread_mutex_lock(&m->lock);
    for (g = m->gtab[b]; g; g = g->next)
        if (g->hash == h && g->G == G && memcmp(g->members, members, (size_t)G * sizeof(int)) == 0)
            break;
    if (!g) { /* inline bytes per member: within the group's budget and the process's (a slot's entries
                 touch a page each when they are 4 KiB apart: 16,384 devices in groups of 8 held 1 GiB) */
        size_t eager = SPMD__EAGER_BUDGET / (size_t)G, stride, fstride;
        int own;
        if (m->nlocal > 0 && eager > SPMD__EAGER_LOCAL / (size_t)m->nlocal) eager = SPMD__EAGER_LOCAL / (size_t)m->nlocal;
        if (eager > SPMD__EAGER_MAX) eager = SPMD__EAGER_MAX;
        if (eager < SPMD__LINE) eager = SPMD__LINE;
        stride = (SPMD__ENTRY_HDR + eager + SPMD__LINE - 1) / SPMD__LINE * SPMD__LINE;
        g = (spmd__group *)spmd__alloc(&m->alloc, sizeof *g);
        if (g) {
            g->hash = h;
            g->G = G;
            g->D = m->D;
            g->stride = stride;
            g->eager = stride - SPMD__ENTRY_HDR;
            g->members = (int *)spmd__alloc(&m->alloc, (size_t)G * sizeof(int));
            g->mem = (spmd__member *)spmd__alloc(&m->alloc, (size_t)G * sizeof(spmd__member));
            g->mine = (spmd__mine *)spmd__alloc(&m->alloc, (size_t)G * sizeof(spmd__mine));
            /* each member's flags in its counters' line when they fit, else on a line of their own
               (written every operation) */
            own = (size_t)m->D <= sizeof g->mine->own;
            fstride = ((size_t)m->D + SPMD__LINE - 1) / SPMD__LINE * SPMD__LINE;
            if (!own) g->fin = (uint8_t *)spmd__alloc(&m->alloc, (size_t)G * fstride);
            g->shared = (spmd__shared *)spmd__alloc(&m->alloc, (size_t)m->D * sizeof(spmd__shared));
            g->slots = (unsigned char *)spmd__alloc(&m->alloc, (size_t)m->D * (size_t)G * stride);
            g->sleepers = (uint64_t *)spmd__alloc(&m->alloc, ((size_t)G + 63) / 64 * sizeof(uint64_t));
            if (!g->members || !g->mem || !g->mine || (!own && !g->fin) || !g->shared || !g->slots ||
                !g->sleepers) {
                spmd__group_free(m, g);
                g = NULL;
            } else {
                int k, placed;
                memcpy(g->members, members, (size_t)G * sizeof(int));
                for (k = 0; k < G; k++) g->mine[k].fin = own ? g->mine[k].own : g->fin + (size_t)k * fstride;
                placed = !m->proc_of || spmd__group_place(m, g, h) == SPMD_OK;
                if (placed && G >= SPMD__COMBINE_MIN && !g->span) { /* (spmd__combines) */
                    g->gboard = g->eager < SPMD__GATHER_COMBINE ? g->eager : SPMD__GATHER_COMBINE;
                    g->board = (unsigned char *)spmd__alloc(&m->alloc, (size_t)m->D * (size_t)G * g->gboard);
                }
                if (!placed || (g->gboard && !g->board)) {
                    spmd__group_free(m, g);
                    g = NULL;
                } else {
                    g->next = m->gtab[b];
                    m->gtab[b] = g;
                    for (k = 0; k < G && !m->wake_all; k++) m->wake_all = !spmd__member_of(m, m->devs[members[k]], g);
                }
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
    return g;
}

/* The ring position of a group's operation (D is a power of two). */
#define SPMD__SLOT(g, gseq) ((gseq) & (uint64_t)((g)->D - 1))

static spmd__entry *spmd__entry_at(const spmd__group *g, uint64_t gseq, int k) {
    return (spmd__entry *)(void *)(g->slots + ((size_t)SPMD__SLOT(g, gseq) * (size_t)g->G +
                                               (size_t)k) * g->stride);
}

/* Find or make this device's reference to the group the axes and groups
   name. The arguments have been validated. */
static spmd_status spmd__gref_get(spmd_dev *d, const int *axes, int naxes, const spmd_opts *o,
                                  const char *text, spmd__gref **out) {
    spmd_mesh *m = d->mesh;
    int gsize = (o && o->groups) ? o->group_size : 0;
    int A = spmd__axes_size(m, axes, naxes);
    int i, G, my, *members;
    spmd__gref *gr;
    for (i = 0; i < d->ngrefs; i++) {
        gr = d->grefs[i];
        if (gr->naxes == naxes && gr->gsize == gsize &&
            memcmp(gr->axes, axes, (size_t)naxes * sizeof(int)) == 0 &&
            (gsize == 0 || memcmp(gr->groups, o->groups, (size_t)A * sizeof(int)) == 0)) {
            *out = gr;
            return SPMD_OK;
        }
    }
    if (d->ngrefs == d->cap_grefs) {
        int cap = d->cap_grefs ? 2 * d->cap_grefs : 16;
        spmd__gref **n = (spmd__gref **)spmd__alloc(&m->alloc, (size_t)cap * sizeof *n);
        if (!n) return spmd__fail(d, SPMD_ERR_NOMEM, "out of memory for a group reference");
        if (d->ngrefs) memcpy(n, d->grefs, (size_t)d->ngrefs * sizeof *n);
        spmd__free(&m->alloc, d->grefs);
        d->grefs = n;
        d->cap_grefs = cap;
    }
    gr = (spmd__gref *)spmd__alloc(&m->alloc, sizeof *gr);
    members = gsize ? (int *)spmd__alloc(&m->alloc, (size_t)gsize * sizeof(int)) : NULL;
    if (gr && gsize) gr->groups = (int *)spmd__alloc(&m->alloc, (size_t)A * sizeof(int));
    if (!gr || (gsize && (!members || !gr->groups))) {
        if (gr) spmd__free(&m->alloc, gr->groups);
        spmd__free(&m->alloc, gr);
        spmd__free(&m->alloc, members);
        return spmd__fail(d, SPMD_ERR_NOMEM, "out of memory for a group reference");
    }
    gr->naxes = naxes;
    memcpy(gr->axes, axes, (size_t)naxes * sizeof(int));
    gr->gsize = gsize;
    gr->A = A;
    if (gsize) memcpy(gr->groups, o->groups, (size_t)A * sizeof(int));
    {
        uint64_t h = spmd__hash_ints(axes, naxes, 1469598103934665603u);
        if (gsize) h = spmd__hash_ints(gr->groups, A, h ^ (uint64_t)gsize);
        gr->axes_hash = (uint32_t)(h ^ (h >> 32));
    }
    spmd__text_copy(gr->text, sizeof gr->text, text);
    my = spmd__axes_index(d, axes, naxes);
    G = gsize ? gsize : A;
    if (gsize) {
        int at = 0;
        for (i = 0; i < A; i++)
            if (o->groups[i] == my) at = i;
        for (i = 0; i < G; i++)
            members[i] = spmd__axes_member(d, axes, naxes, o->groups[at / gsize * gsize + i]);
        gr->me = at % gsize;
        gr->g = spmd__group_get(m, members, G);
    } else { /* every member in O(1) but the first to come */
        gr->me = my;
        gr->g = spmd__group_of_axes(d, axes, naxes, A);
    }
    spmd__free(&m->alloc, members);
    if (!gr->g) {
        spmd__free(&m->alloc, gr->groups);
        spmd__free(&m->alloc, gr);
        return spmd__fail(d, SPMD_ERR_NOMEM, "out of memory for a group of %d devices", G);
    }
    gr->my = &gr->g->mine[gr->me];
    d->grefs[d->ngrefs++] = gr;
    *out = gr;
    return SPMD_OK;
}

// >>check mode
/* Check mode (desc.check, SPMD_CHECK) makes every member of a call log what
   it posted (spmd__clog: signature, axes, a checksum of its input) so that a
   peer can name what differs. SPMD_CHECK_SITES (SPMD_CHECK=2) adds the call
   site to what must agree: spmd_set_site's file and line when given, else
   the return address of the public function (SPMD__CALLER notes it),
   relative to its module, so that processes running one program agree. The
   site's hash is folded into the signature's axes hash
   (spmd__site_take), so every path that compares signatures compares sites;
   the messages name both sites (spmd__site_text). */
#if defined(__GNUC__)
#define SPMD__CALLER(d)                                                                                               \
    do {                                                                                                              \
        if ((d) && (d)->check_sites && !(d)->site_ra) (d)->site_ra = (uintptr_t)__builtin_return_address(0);         \
    } while (0)
#else
#define SPMD__CALLER(d) ((void)0)
#endif

typedef struct spmd__modfind {
    uintptr_t addr, lo, hi, base;
    const char *name;
} spmd__modfind;

#if SPMD__HAS_PHDR
static int spmd__modfind_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    spmd__modfind *f = (spmd__modfind *)arg;
    int i;
    (void)size;
    for (i = 0; i < info->dlpi_phnum; i++) {
        uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)info->dlpi_phdr[i].p_vaddr;
        if (info->dlpi_phdr[i].p_type != PT_LOAD || f->addr < lo || f->addr >= lo + info->dlpi_phdr[i].p_memsz)
            continue;
        f->lo = lo;
        f->hi = lo + info->dlpi_phdr[i].p_memsz;
        f->base = (uintptr_t)info->dlpi_addr;
        f->name = info->dlpi_name;
        return 1;
    }
    return 0;
}
#endif

static const char *spmd__base_name(const char *path);

/* The module (executable or shared library) that holds code address a:
   its loaded segment [lo, hi), its base, its name ("" for the program).
   Without dl_iterate_phdr: the whole address space, based at this
   library's own code (right when the caller is in the same module, as
   when the header is compiled into the program). */
static void spmd__modfind_of(spmd__modfind *f, uintptr_t a) {
    memset(f, 0, sizeof *f);
    f->addr = a;
    f->name = "";
#if SPMD__HAS_PHDR
    if (dl_iterate_phdr(spmd__modfind_cb, f)) return;
#endif
    f->lo = 0;
    f->hi = UINTPTR_MAX;
    f->base = (uintptr_t)&spmd__base_name;
}

static const char *spmd__base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static const char *spmd__prog_name(void) {
#if defined(__GLIBC__) && defined(__USE_GNU)
    return program_invocation_short_name;
#else
    return "the program";
#endif
}

/* Take the device's call site for r (SPMD_CHECK_SITES): what is kept
   (r->site) and, for a collective, its hash folded into the signature. */
static void spmd__site_take(spmd_req *r) {
    spmd_dev *d = r->dev;
    uint64_t h = 0xcbf29ce484222325u;
    const char *name = "", *c;
    if (d->site_file) {
        r->site[0] = (uint64_t)(uintptr_t)d->site_file;
        r->site[1] = (uint64_t)(uint32_t)d->site_line;
        name = d->site_file;
    } else {
        uintptr_t a = d->site_ra;
        if (a && (a < d->site_lo || a >= d->site_hi)) {
            spmd__modfind f;
            spmd__modfind_of(&f, a);
            d->site_lo = f.lo, d->site_hi = f.hi, d->site_base = f.base, d->site_mod = f.name;
        }
        r->site[0] = 0;
        r->site[1] = a ? (uint64_t)(a - 1 - d->site_base) : 0; /* (in the call instruction: its line) */
        if (a && d->site_mod) name = spmd__base_name(d->site_mod);
    }
    d->site_ra = 0;
    if (r->p2p) return;
    for (c = name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3u;
    h = (h ^ r->site[1]) * 0x100000001b3u;
    r->sig.axes_hash ^= (uint32_t)(h ^ h >> 32);
}

/* A call site as text: "train.c:42" (spmd_set_site), "prog+0x1a2b" (a
   call in module prog: addr2line -e prog 0x1a2b names its line)
   or "an unknown site". at_mod: the module that holds the device's code
   (this process's: any device's site_mod will do once it has one). */
static void spmd__site_text(const uint64_t site[2], const char *at_mod, char *buf, size_t len) {
    if (site[0])
        snprintf(buf, len, "%s:%d", spmd__base_name((const char *)(uintptr_t)site[0]), (int)(uint32_t)site[1]);
    else if (site[1])
        snprintf(buf, len, "%s+0x%llx", at_mod && *at_mod ? spmd__base_name(at_mod) : spmd__prog_name(),
                 (unsigned long long)site[1]);
    else
        snprintf(buf, len, "an unknown site");
}

/* "; call sites: device 1 at a.c:10, device 0 at a.c:20" for a mismatch
   message in SPMD_CHECK_SITES, or "" (other: device k's site, as text;
   buf: SPMD__SITES_LEN). */
#define SPMD__SITES_LEN 256
static const char *spmd__site_clause(const spmd_req *r, int k, const char *other, char *buf, size_t len) {
    char mine[64];
    if (!r->dev->check_sites) return "";
    spmd__site_text(r->site, r->dev->site_mod, mine, sizeof mine);
    snprintf(buf, len, "; call sites: device %d at %s, device %d at %s", r->dev->id, mine, k, other);
    return buf;
}

static void spmd__sig_words(const spmd__sig *s, uint64_t w[3]) { memcpy(w, s, sizeof *s); }

/* Check mode's checksum of a contribution (64-bit FNV-1a). */
static uint64_t spmd__data_ck(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3u;
    return h;
}

static void spmd__clog_write(spmd_dev *d, const spmd_req *r) {
    spmd__clog *c = &d->clog[r->global % SPMD__CLOG];
    uint64_t w[3], t[8], len = (uint64_t)(r->in_bytes - r->meta_bytes);
    uint64_t ck = r->fault_copy ? r->fault_ck : spmd__data_ck(r->send, (size_t)len);
    int i;
    SPMD_ASSERT(d->clog); /* (check mode's, spmd__mesh_devices) */
    spmd__sig_words(&r->sig, w);
    memset(t, 0, sizeof t);
    memcpy(t, r->gr->text, strlen(r->gr->text) < sizeof t - 1 ? strlen(r->gr->text) : sizeof t - 1);
    SPMD__ST_SC(&c->stamp, (uint64_t)0);
    for (i = 0; i < 3; i++) SPMD__ST_SC(&c->w[i], w[i]);
    for (i = 0; i < 8; i++) SPMD__ST_SC(&c->text[i], t[i]);
    SPMD__ST_SC(&c->ck[0], ck);
    SPMD__ST_SC(&c->ck[1], len);
    SPMD__ST_SC(&c->site[0], r->site[0]);
    SPMD__ST_SC(&c->site[1], r->site[1]);
    SPMD__ST_SC(&c->stamp, r->global + 1);
}

/* Device p's declared checksum and length for global index gi; 1 if there
   (never out of check mode: no log). */
static int spmd__clog_ck(spmd_dev *p, uint64_t gi, uint64_t ck[2]) {
    spmd__clog *c = p->clog ? &p->clog[gi % SPMD__CLOG] : NULL;
    uint64_t a, b;
    if (!c) return 0;
    a = SPMD__LD_SC(&c->stamp);
    ck[0] = SPMD__LD_SC(&c->ck[0]);
    ck[1] = SPMD__LD_SC(&c->ck[1]);
    b = SPMD__LD_SC(&c->stamp);
    return a == gi + 1 && b == a;
}

/* Read device p's log entry for global index gi; 1 if it is there intact.
   site: its call site as text (spmd__site_text; the reader's module). */
static int spmd__clog_read(spmd_dev *me, spmd_dev *p, uint64_t gi, spmd__sig *sig, char text[64], char site[64]) {
    spmd__clog *c = p->clog ? &p->clog[gi % SPMD__CLOG] : NULL;
    uint64_t w[3], t[8], at[2], a, b;
    int i;
    if (!c) return 0;
    a = SPMD__LD_SC(&c->stamp);
    for (i = 0; i < 3; i++) w[i] = SPMD__LD_SC(&c->w[i]);
    for (i = 0; i < 8; i++) t[i] = SPMD__LD_SC(&c->text[i]);
    for (i = 0; i < 2; i++) at[i] = SPMD__LD_SC(&c->site[i]);
    b = SPMD__LD_SC(&c->stamp);
    if (a != gi + 1 || b != a) return 0;
    memcpy(sig, w, sizeof *sig);
    memcpy(text, t, 64);
    text[63] = '\0';
    spmd__site_text(at, me->site_mod, site, 64);
    return 1;
}

static void spmd__sig_text(const spmd__sig *s, char *buf, size_t len);

/* r's signature for messages, saying why it is split where eager was
   asked for: "psum(f32 x 300000, split: eager asked for, 1200000 bytes
   exceed its 4096-byte slot)". */
static void spmd__req_what(const spmd_req *r, char *buf, size_t len) {
    size_t n;
    spmd__sig_text(&r->sig, buf, len);
    n = strlen(buf);
    if (r->eager_asked && n > 1 && n < len && buf[n - 1] == ')')
        snprintf(buf + n - 1, len - n + 1, ": eager asked for, %zu bytes exceed its %zu-byte slot)", r->in_bytes,
                 r->gr->g->eager);
}

static void spmd__sig_text(const spmd__sig *s, char *buf, size_t len) {
    const char *name = s->kind == SPMD__KIND_ALLREDUCE ? (s->op < SPMD_OP_COUNT ? spmd__op_jax[s->op] : "?")
                       : s->kind < SPMD__KIND_COUNT    ? spmd__kind_names[s->kind]
                                                       : "?";
    if (s->kind == SPMD__KIND_BARRIER)
        snprintf(buf, len, "barrier");
    else if (s->kind == SPMD__KIND_REFUSED)
        snprintf(buf, len, "%s (refused)", s->op < SPMD__KIND_COUNT ? spmd__kind_names[s->op] : "?");
    else
        snprintf(buf, len, "%s(%s x %llu%s)", name,
                 s->dtype < SPMD_DTYPE_COUNT ? spmd__dtype_names[s->dtype] : "?",
                 (unsigned long long)s->count,
                 s->algo == SPMD__ALG_EAGER   ? ", eager"
                 : s->algo == SPMD__ALG_SPLIT ? ", split"
                 : s->algo == SPMD__ALG_BRUCK ? ", bruck"
                 : s->algo == SPMD__ALG_RD    ? ", rd"
                 : s->algo == SPMD__ALG_RAB   ? ", rab"
                                              : "");
}

static int spmd__sig_differs(const spmd__sig *a, const spmd__sig *b, int check) {
    return a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->algo != b->algo ||
           a->count != b->count || a->aux != b->aux || (check && a->axes_hash != b->axes_hash);
}

// >>faults
/* Faults on purpose, for users' tests (docs/faults.md): a plan of (device,
   call number, kind) from desc.faults or env SPMD_FAULTS (which wins),
   parsed once at mesh creation into m->faults, sorted by device and call
   number; each device walks its own slice (d->faults, d->nfaults, d->fault_at)
   where a call starts (spmd__rec_begin), with the call numbers the flight
   recorder shows (#n in spmd_report). On libfabric every process parses the
   same plan (device ids are global) and applies it to its own devices.
   Kinds: delay:MS holds the call for MS ms before it joins (a fiber yields
   meanwhile); skip returns SPMD_OK without joining (the buffers are
   untouched), like a forgotten collective: its peers time out, or see
   SPMD_ERR_DEADLOCK once it returned or (fibers) when every device is
   blocked; lose, threads: the device disappears at that call: the call and
   every later one of it fail with SPMD_ERR_PEER_LOST ("this device was lost
   by SPMD_FAULTS"), d->lost marks it for its peers, and a peer waiting for
   it fails with SPMD_ERR_PEER_LOST naming it and that call
   (spmd__gone_check) and breaks the mesh; lose, libfabric: its process
   ends (_exit, status 4) and the peers find it lost as any dead process;
   exit: the process ends (_exit, status 3), on either backend; corrupt:
   the call's input as handed over (r->send) becomes a copy with its first
   byte flipped (r->fault_copy, freed with the request), so every member
   that reads that contribution, by memory or by message, gets it flipped;
   the user's buffer is untouched. Check mode (spmd__data_agree, thread
   backend) checks contributions against the checksum of the caller's
   buffer, so it finds the flip: r->fault_ck keeps that checksum. */
SPMD__SETUP_BEGIN
enum { SPMD__FAULT_DELAY = 1, SPMD__FAULT_SKIP, SPMD__FAULT_CORRUPT, SPMD__FAULT_LOSE, SPMD__FAULT_EXIT };
/* kind=exit ends the process with this status; kind=lose on libfabric (the
   process disappears, peers see SPMD_ERR_PEER_LOST) with the next one */
#define SPMD__FAULT_EXIT_STATUS 3
#define SPMD__FAULT_LOST_STATUS 4
static void spmd__fiber_yield(spmd_dev *d);
typedef struct spmd__fault {
    int device, kind;
    uint64_t seq;
    int64_t ms;
} spmd__fault;

/* One integer after "key=" in [lo, hi]; 0 if it is not one. */
static int spmd__fault_int(const char *v, size_t n, int64_t lo, int64_t hi, int64_t *out) {
    char tmp[32], *end;
    long long x;
    if (n == 0 || n >= sizeof tmp) return 0;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    if (tmp[0] == '-' || tmp[0] == '+' || tmp[0] == ' ') return 0;
    errno = 0;
    x = strtoll(tmp, &end, 10);
    if (errno || *end || x < lo || x > hi) return 0;
    *out = (int64_t)x;
    return 1;
}

/* Parse the plan; SPMD_ERR_INVALID naming the token that is wrong. */
static spmd_status spmd__faults_parse(spmd_mesh *m, const spmd_mesh_desc *desc) {
    const char *spec = m->shrunk ? NULL : getenv("SPMD_FAULTS"), *p, *from = "SPMD_FAULTS";
    int n = 0, i, j;
    if (!spec || !*spec) { spec = desc->faults; from = "desc.faults"; }
    if (!spec || !*spec) return SPMD_OK;
    for (p = spec; *p; p++) n += *p == ';';
    m->faults = (spmd__fault *)spmd__alloc(&m->alloc, (size_t)(n + 1) * sizeof *m->faults);
    if (!m->faults) return SPMD_ERR_NOMEM;
    for (p = spec; *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        spmd__fault f;
        int have = 0; /* bits: device, seq, kind */
        const char *q = p, *stop = p + len;
        f.device = -1; f.kind = 0; f.seq = 0; f.ms = 0;
        while (q < stop) {
            const char *comma = (const char *)memchr(q, ',', (size_t)(stop - q)), *tend = comma ? comma : stop;
            const char *eq = (const char *)memchr(q, '=', (size_t)(tend - q));
            size_t tl = (size_t)(tend - q);
            int64_t v;
            if (eq && (size_t)(eq - q) == 6 && strncmp(q, "device", 6) == 0 &&
                spmd__fault_int(eq + 1, (size_t)(tend - eq - 1), 0, m->size - 1, &v)) {
                f.device = (int)v;
                have |= 1;
            } else if (eq && (size_t)(eq - q) == 3 && strncmp(q, "seq", 3) == 0 &&
                       spmd__fault_int(eq + 1, (size_t)(tend - eq - 1), 0, INT64_MAX, &v)) {
                f.seq = (uint64_t)v;
                have |= 2;
            } else if (eq && (size_t)(eq - q) == 4 && strncmp(q, "kind", 4) == 0 && tend - eq - 1 == 4 &&
                       (strncmp(eq + 1, "skip", 4) == 0 || strncmp(eq + 1, "lose", 4) == 0 ||
                        strncmp(eq + 1, "exit", 4) == 0)) {
                f.kind = eq[1] == 's' ? SPMD__FAULT_SKIP : eq[1] == 'l' ? SPMD__FAULT_LOSE : SPMD__FAULT_EXIT;
                have |= 4;
            } else if (eq && (size_t)(eq - q) == 4 && strncmp(q, "kind", 4) == 0 &&
                       ((tend - eq - 1 == 11 && strncmp(eq + 1, "lose:posted", 11) == 0) ||
                        (tend - eq - 1 == 9 && strncmp(eq + 1, "lose:done", 9) == 0) ||
                        (tend - eq - 1 > 10 && strncmp(eq + 1, "lose:step:", 10) == 0 &&
                         spmd__fault_int(eq + 11, (size_t)(tend - eq - 11), 1, 64, &v))) && /* (SPMD__PLAN_STEPS) */
                       m->backend != SPMD_BACKEND_THREADS) {
                f.kind = SPMD__FAULT_LOSE;
                f.ms = eq[6] == 'p' ? 1 : eq[6] == 'd' ? 2 : 2 + v; /* the phase: spmd__fault_die */
                have |= 4;
            } else if (eq && (size_t)(eq - q) == 4 && strncmp(q, "kind", 4) == 0 && tend - eq - 1 == 7 &&
                       strncmp(eq + 1, "corrupt", 7) == 0) {
                f.kind = SPMD__FAULT_CORRUPT;
                have |= 4;
            } else if (eq && (size_t)(eq - q) == 4 && strncmp(q, "kind", 4) == 0 && tend - eq - 1 > 6 &&
                       strncmp(eq + 1, "delay:", 6) == 0 &&
                       spmd__fault_int(eq + 7, (size_t)(tend - eq - 7), 0, 3600000, &v)) {
                f.kind = SPMD__FAULT_DELAY;
                f.ms = v;
                have |= 4;
            } else {
                spmd__log(m, SPMD_LOG_ERROR, -1,
                          "%s: bad token '%.*s' (want device=0..%d, seq=N, kind=skip, lose, exit, corrupt or delay:MS; "
                          "across processes also lose:posted, lose:done or lose:step:K)", from, (int)tl, q, m->size - 1);
                return SPMD_ERR_INVALID;
            }
            q = comma ? comma + 1 : stop;
        }
        if (len && have != 7) {
            spmd__log(m, SPMD_LOG_ERROR, -1, "%s: '%.*s' needs device=, seq= and kind=", from, (int)len, p);
            return SPMD_ERR_INVALID;
        }
        if (len) {
            for (j = m->nfaults; j > 0 && (m->faults[j - 1].device > f.device ||
                                           (m->faults[j - 1].device == f.device && m->faults[j - 1].seq > f.seq));
                 j--)
                m->faults[j] = m->faults[j - 1];
            if (j > 0 && m->faults[j - 1].device == f.device && m->faults[j - 1].seq == f.seq) {
                spmd__log(m, SPMD_LOG_ERROR, -1, "%s: '%.*s': a second fault for device %d, seq %llu", from, (int)len,
                          p, f.device, (unsigned long long)f.seq);
                return SPMD_ERR_INVALID;
            }
            m->faults[j] = f;
            m->nfaults++;
        }
        p = end ? end + 1 : p + len;
    }
    for (i = 0; i < m->nfaults; i++) {
        spmd_dev *d = m->devs[m->faults[i].device];
        if (!d->faults) d->faults = &m->faults[i];
        d->nfaults++;
    }
    return SPMD_OK;
}

/* A call of a device the fault plan lost (d->lost) fails at once, here
   (spmd__check_dev, then spmd__fault_at for the calls that skip that). */
static spmd_status spmd__fault_lost(spmd_dev *d) {
    return spmd__fail(d, SPMD_ERR_PEER_LOST, "this device was lost by SPMD_FAULTS at its call #%llu (%s): every "
                      "later call fails", (unsigned long long)(d->lost - 1), d->lost_what);
}

/* Where call n of r's device starts: the fault planned for it, if any.
   0: go on; 1: skip it; 2: the device is lost (kind=lose, now or at an
   earlier call): the call fails with SPMD_ERR_PEER_LOST, d->err says so.
   Losing it marks it for its peers (d->lost, read by spmd__gone_check) and
   wakes those asleep, as a device whose function returned does. */
static int spmd__fault_at(spmd_req *r, uint64_t n) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    const spmd__fault *f;
    char what[96];
    int i;
    if (d->lost || (d->fault_at < d->nfaults && d->faults[d->fault_at].seq == n &&
                    d->faults[d->fault_at].kind >= SPMD__FAULT_LOSE)) {
        spmd__sig sg = r->sig;
        if (d->lost) {
            spmd__fault_lost(d);
            return 2;
        }
        sg.algo = SPMD__ALG_LOCAL; /* not chosen yet on every path: the call as the user made it */
        if (r->p2p) sg.count = r->count;
        spmd__sig_text(&sg, what, sizeof what);
        f = &d->faults[d->fault_at++];
        if (f->kind == SPMD__FAULT_LOSE && f->ms) { /* later in the call: spmd__fault_die */
            r->fault_die = (int)f->ms;
            return 0;
        }
        if (f->kind == SPMD__FAULT_EXIT || m->backend != SPMD_BACKEND_THREADS) {
            /* the process ends at once: no goodbye to the job, no atexit
               handlers (other devices' threads still run); stdio flushed */
            int st = f->kind == SPMD__FAULT_EXIT ? SPMD__FAULT_EXIT_STATUS : SPMD__FAULT_LOST_STATUS;
            spmd__log(m, SPMD_LOG_ERROR, d->id, "SPMD_FAULTS: %s over '%s' (call #%llu of this device): kind=%s: the "
                      "process exits with status %d", what, r->gr->text, (unsigned long long)n,
                      f->kind == SPMD__FAULT_EXIT ? "exit" : "lose", st);
            fflush(NULL);
            _exit(st);
        }
        snprintf(d->lost_what, sizeof d->lost_what, "%s over '%s'", what, r->gr->text);
        spmd__fail(d, SPMD_ERR_PEER_LOST, "%s (call #%llu of this device): this device was lost by SPMD_FAULTS "
                   "(kind=lose)", d->lost_what, (unsigned long long)n);
        spmd__log(m, SPMD_LOG_INFO, d->id, "SPMD_FAULTS: call #%llu: device lost", (unsigned long long)n);
        SPMD__ST_SC(&d->lost, n + 1);
        SPMD__FADD(&m->nreturned, 1u); /* the waiting peers look at who is gone */
        for (i = 0; i < m->size; i++)
            if (SPMD__LD_SC(&m->devs[i]->sleeping)) spmd__wake_dev(m->devs[i]);
        return 2;
    }
    if (d->fault_at >= d->nfaults || d->faults[d->fault_at].seq != n) return 0;
    f = &d->faults[d->fault_at++];
    if (f->kind == SPMD__FAULT_CORRUPT) {
        /* what the device hands over (its send buffer, past ragged's
           offsets): a copy with its first byte flipped (XOR 0xff); the
           user's buffer is not touched */
        size_t len = r->p2p ? (r->sig.kind == SPMD__KIND_SEND ? r->count * r->in_size : 0)
                            : r->in_bytes - r->meta_bytes;
        unsigned char *c = len && r->send ? (unsigned char *)spmd__alloc(&m->alloc, len) : NULL;
        if (c) {
            if (m->check) r->fault_ck = spmd__data_ck(r->send, len); /* as the caller gave it */
            memcpy(c, r->send, len);
            c[0] ^= 0xffu;
            r->fault_copy = c;
            r->send = c;
        }
        spmd__log(m, SPMD_LOG_INFO, d->id, "SPMD_FAULTS: call #%llu: %s", (unsigned long long)n,
                  c ? "its first byte of input flipped" : len ? "out of memory, not corrupted" : "no input to corrupt");
        return 0;
    }
    spmd__log(d->mesh, SPMD_LOG_INFO, d->id, "SPMD_FAULTS: call #%llu %s", (unsigned long long)n,
              f->kind == SPMD__FAULT_SKIP ? "skipped" : "delayed");
    if (f->kind == SPMD__FAULT_DELAY && d->fib) { /* a fiber lets the others run meanwhile */
        uint64_t until = spmd__now_ns() + (uint64_t)f->ms * 1000000u;
        while (spmd__now_ns() < until) spmd__fiber_yield(d);
        return 0;
    }
    if (f->kind == SPMD__FAULT_DELAY) {
        struct timespec ts;
        ts.tv_sec = (time_t)(f->ms / 1000);
        ts.tv_nsec = (long)(f->ms % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        return 0;
    }
    return 1;
}

/* kind=lose:posted, :done or :step:K across processes: the process ends
   at that point of r (posted: it waits for the first time, everything it
   sends is posted; done: it completed here; step:K: its plan comes to
   step K, before its send (spmd__x_psteps); a call that completes before
   it waits, or whose plan has fewer steps or is run by a sibling member,
   ends at done), as kind=lose does at a call's start. */
static void spmd__fault_die(spmd_req *r, int phase) {
    char what[160], at[64];
    if (r->fault_die != phase && !(phase == 2 && r->fault_die)) return;
    spmd__req_what(r, what, sizeof what);
    snprintf(at, sizeof at, r->fault_die > 2 ? "step:%d%s" : r->fault_die == 1 ? "posted" : "done", r->fault_die - 2,
             phase == 2 && r->fault_die > 2 ? " (at its completion: no such step here)" : "");
    spmd__log(r->dev->mesh, SPMD_LOG_ERROR, r->dev->id, "SPMD_FAULTS: %s over '%s' (operation #%llu of this device): "
              "kind=lose:%s: the process exits with status %d", what, r->gr->text, (unsigned long long)r->global, at,
              SPMD__FAULT_LOST_STATUS);
    fflush(NULL);
    _exit(SPMD__FAULT_LOST_STATUS);
}

SPMD__SETUP_END

// >>recorder
/* The flight recorder: each device owns a ring of records of its last calls
   (mesh->rmask + 1 of them; desc.trace_depth, env SPMD_TRACE_DEPTH; off when
   the ring is NULL). Data flow: spmd__rec_begin fills a record where a call
   has been checked and is about to post (spmd__coll_start, spmd__quick,
   spmd__p2p_start) and links it to the request (r->rec); spmd__block marks it
   waiting; spmd__finish marks it done or failed with its status (a
   blocking call's record is written once, later: see SPMD__REC_LATE). Only the
   device writes its ring, with relaxed stores (plain moves on x86-64 and
   arm64) and the record's generation word (call number + 1, 0 while being
   rewritten) stored last with release order; readers (spmd_report, the break
   log, the timeline) take a record only if its generation reads the same
   before and after, so a torn read is skipped, never shown. Times come from
   CLOCK_MONOTONIC_COARSE (~3 ns, a few ms of resolution), read when a call
   starts and, if it had to wait, when it ends (a call that did not wait
   ends within the same tick), unless SPMD_TRACE asks for a timeline: then
   CLOCK_MONOTONIC at both ends, and records that leave the ring
   are kept in the device's tlog until the mesh is destroyed, where the whole
   history is written as Chrome-trace JSON (spmd__trace_write). */
static int64_t spmd__env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt, int *set);
typedef struct spmd__rec { /* one cache line; the call site's file is in d->sites */
    uint64_t gen;    /* call number + 1; 0: being written */
    uint64_t gseq;   /* the operation's number on its group */
    uint64_t t0, t1; /* start and end (ns); t1 = t0 until a wait or the end says more */
    uint64_t count;  /* elements per device */
    uint64_t what;   /* kind | dtype << 8 | op << 16 | algo << 24 | (aux + 1) << 32: aux the root
                        (rooted kinds), the pairs (ppermute), the peer (send, recv), else -1 */
    uint64_t state;  /* SPMD__REC_* | status << 8 | call site's line << 32 (0: none) */
    uint64_t gref;   /* the spmd__gref (axes text, group, index), as uintptr_t */
} spmd__rec;
/* A reader's copy: the same words and the call site's file (from d->sites). */
typedef struct spmd__recx {
    uint64_t gen, gseq, t0, t1, count, what, state, gref;
    uint64_t file;
} spmd__recx;
enum { SPMD__REC_STARTED = 1, SPMD__REC_WAITING, SPMD__REC_DONE, SPMD__REC_FAILED, SPMD__REC_SKIPPED };
#define SPMD__REC_DEFAULT_DEPTH 64
#define SPMD__RST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define SPMD__RLD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* Device d's record of call n (0-based) and its call site's word. From
   SPMD__REC_SIDE devices in the process, the devices' records of one call
   are side by side, so a call on every device writes one run of lines, a
   page per 64 devices: rings made at creation are touched only as calls
   fill them. Below, each device's ring is a run of its own (two devices'
   records on neighbouring lines, written by two carriers, slowed a bcast
   of 8 fibers by ~0.3 us: a core loads lines in pairs). */
#define SPMD__REC_SIDE 256
static inline spmd__rec *spmd__rec_at(const spmd_dev *d, uint64_t n) {
    return d->ring + (size_t)(n & d->mesh->rmask) * d->mesh->rstride;
}
static inline uint64_t *spmd__site_at(const spmd_dev *d, uint64_t n) {
    return d->sites + (size_t)(n & d->mesh->rmask) * d->mesh->rstride;
}

static inline uint64_t spmd__rec_coarse(void) {
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#else
    return spmd__now_ns();
#endif
}

static uint64_t spmd__rec_now(const spmd_mesh *m) {
    return m->tracing ? spmd__now_ns() : spmd__rec_coarse();
}

/* SPMD_TRACE: keep a record that is about to leave the ring (device only). */
static void spmd__trace_keep(spmd_dev *d, const spmd__rec *e) {
    spmd__recx *x;
    spmd_mesh *m = d->mesh;
    if (d->tlog_n == d->tlog_cap) {
        size_t cap = d->tlog_cap ? 2 * d->tlog_cap : 1024;
        spmd__recx *t = (spmd__recx *)spmd__alloc(&m->alloc, cap * sizeof *t);
        if (!t) return; /* out of memory: the timeline misses it */
        if (d->tlog_n) memcpy(t, d->tlog, d->tlog_n * sizeof *t);
        spmd__free(&m->alloc, d->tlog);
        d->tlog = t;
        d->tlog_cap = cap;
    }
    x = &d->tlog[d->tlog_n++];
    memcpy(x, e, sizeof *e);
    x->file = e->state >> 32 ? *spmd__site_at(d, e->gen - 1) : 0;
}

/* r->rec: the call number + 1, and these flags. A blocking call's record
   is written once (SPMD__REC_LATE until then): on threads while it waits
   for its peers' first line (spmd__rec_posted, from spmd__watch: off the
   critical path; its end then only stores the state), once its wait is
   long (spmd__rec_wait: the clock read after 64 polls, a fiber back from
   a park), or else when it ends: the 8 B psum on the quick path then costs
   one clock read and one record write, with no second visit to the record.
   Such a call is absent from the ring while it runs without waiting long (a
   report sees the device running, its last call the one before). */
#define SPMD__REC_LATE ((uint64_t)1 << 63)
#define SPMD__REC_SITE ((uint64_t)1 << 62) /* it has a call site (line in d->site_line) */
#define SPMD__REC_POSTED ((uint64_t)1 << 61) /* written as started by spmd__rec_posted, not changed since */
#define SPMD__REC_NUM(v) ((v) & ~(SPMD__REC_LATE | SPMD__REC_SITE | SPMD__REC_POSTED))

/* A record's aux + 1 (see spmd__rec.what): rooted kinds, ppermute, send and recv. */
static uint32_t spmd__rec_aux(const spmd_req *r) {
    int64_t aux = -1;
    switch (r->sig.kind) {
    case SPMD__KIND_REDUCE: case SPMD__KIND_GATHER: case SPMD__KIND_BCAST: case SPMD__KIND_SCATTER: aux = r->root; break;
    case SPMD__KIND_SEND: case SPMD__KIND_RECV: aux = r->peer; break;
    case SPMD__KIND_PPERMUTE: aux = r->src_of ? r->pairs : 0; break;
    default: break;
    }
    return (uint32_t)(aux + 1);
}

/* The low 32 bits of a record's what: kind | dtype << 8 | op << 16 | algo << 24. */
static inline uint32_t spmd__rec_what(const spmd__sig *s) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t w;
    memcpy(&w, s, 4); /* the four bytes in that order: one load */
    return w;
#else
    return (uint32_t)s->kind | (uint32_t)s->dtype << 8 | (uint32_t)s->op << 16 | (uint32_t)s->algo << 24;
#endif
}

/* Write device d's record of call n (0-based) whole: generation
   SPMD__REC_BUSY, the words, then the generation with release order. */
#define SPMD__REC_BUSY UINT64_MAX
static inline void spmd__rec_put(spmd_dev *d, const spmd_req *r, uint64_t n, uint64_t state, uint64_t t0, uint64_t t1) {
    /* the group's number: the call takes gr->my->next when it posts (spmd__rec_begin sets it earlier) */
    spmd__rec *e = spmd__rec_at(d, n);
    uint64_t aux = r->sig.kind > SPMD__KIND_BARRIER ? spmd__rec_aux(r) : 0; /* (psum, barrier: none) */
    SPMD__RST(&e->gen, SPMD__REC_BUSY);
    SPMD__RST(&e->gseq, r->p2p ? 0 : r->gseq);
    SPMD__RST(&e->t0, t0);
    SPMD__RST(&e->t1, t1);
    SPMD__RST(&e->count, (uint64_t)r->count);
    SPMD__RST(&e->what, (uint64_t)spmd__rec_what(&r->sig) | aux << 32);
    SPMD__RST(&e->state, state);
    SPMD__RST(&e->gref, (uint64_t)(uintptr_t)r->gr);
    SPMD__ST_REL(&e->gen, n + 1);
}

/* A call starts (checked, about to post): the fault plan, then its record
   (now for a call with a handle, a skipped one and under SPMD_TRACE; later
   for a blocking call). 1: the fault plan skips it (recorded as skipped);
   2: the device is lost (kind=lose): the call fails with
   SPMD_ERR_PEER_LOST, d->err says why. spmd__rec_begin below is the
   common case, inline: a blocking call, no fault plan, no call site, no
   timeline (the record is only numbered), or the recorder off. */
static int spmd__rec_begin_full(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    uint64_t n = d->ncalls, line = 0, site = 0;
    int skip = d->nfaults ? spmd__fault_at(r, n) : 0;
    r->rec = 0;
    if (d->check_sites) spmd__site_take(r);
    if (!d->ring) {
        d->site_file = NULL;
        SPMD__ST_REL(&d->ncalls, n + 1);
        return skip;
    }
    if (m->tracing && n > m->rmask) spmd__trace_keep(d, spmd__rec_at(d, n));
    if (d->site_file) {
        SPMD__RST(spmd__site_at(d, n), (uint64_t)(uintptr_t)d->site_file);
        line = (uint64_t)(uint32_t)d->site_line;
        site = SPMD__REC_SITE;
        d->site_file = NULL;
    }
    if (!r->p2p) r->gseq = r->gr->my->next;
    if (!r->user && !skip && !m->tracing) {
        r->rec = (n + 1) | SPMD__REC_LATE | site;
    } else {
        uint64_t t0 = spmd__rec_now(m);
        spmd__rec_put(d, r, n, (uint64_t)(skip == 1 ? SPMD__REC_SKIPPED : SPMD__REC_STARTED) | line << 32, t0, t0);
        r->rec = skip == 1 ? 0 : n + 1;
    }
    SPMD__ST_REL(&d->ncalls, n + 1);
    return skip;
}

static inline int spmd__rec_begin(spmd_req *r) {
    spmd_dev *d = r->dev;
    uint64_t n = d->ncalls;
    if (d->nfaults || d->site_file || d->check_sites || (d->ring && (r->user || d->mesh->tracing)))
        return spmd__rec_begin_full(r);
    r->rec = d->ring ? (n + 1) | SPMD__REC_LATE : 0; /* (its gseq is set by then: spmd__rec_put) */
    SPMD__ST_REL(&d->ncalls, n + 1);
    return 0;
}

/* The record of r, if it is written and still in the ring (device only). */
static spmd__rec *spmd__rec_of(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__rec *e;
    if (!r->rec || (r->rec & SPMD__REC_LATE)) return NULL;
    e = spmd__rec_at(d, SPMD__REC_NUM(r->rec) - 1);
    return e->gen == SPMD__REC_NUM(r->rec) ? e : NULL;
}

/* The algorithm is chosen after the record is begun (spmd__coll_start). */
static void spmd__rec_algo_set(spmd__rec *e, const spmd_req *r) {
    uint64_t w = SPMD__RLD(&e->what);
    if ((w >> 24 & 255u) != r->sig.algo) SPMD__RST(&e->what, (w & ~((uint64_t)255 << 24)) | (uint64_t)r->sig.algo << 24);
}

/* A blocking call's state, written when it is first needed. */
static uint64_t spmd__rec_late_state(const spmd_req *r, unsigned st) {
    return (uint64_t)st | (r->rec & SPMD__REC_SITE ? (uint64_t)(uint32_t)r->dev->site_line << 32 : 0);
}

/* A blocking call posted and its peers are not all here yet: write its
   record now, while the lines move (off the critical path, which the end
   of a call is on), as started; if it then ends without a long wait, its
   end only marks it done (t1 = t0: within the coarse clock's tick). */
static void spmd__rec_posted(spmd_req *r) {
    uint64_t t = spmd__rec_coarse(); /* (never under SPMD_TRACE: that is not a late record) */
    spmd__rec_put(r->dev, r, SPMD__REC_NUM(r->rec) - 1, spmd__rec_late_state(r, SPMD__REC_STARTED), t, t);
    r->rec = SPMD__REC_NUM(r->rec) | SPMD__REC_POSTED;
}

/* r waits (since about `now`, 0: read the clock). */
static void spmd__rec_wait(spmd_req *r, uint64_t now) {
    spmd__rec *e;
    uint64_t st;
    if (r->rec & SPMD__REC_LATE) { /* a blocking call blocks: its record, waiting since now */
        uint64_t t0 = now ? now : spmd__rec_now(r->dev->mesh);
        spmd__rec_put(r->dev, r, SPMD__REC_NUM(r->rec) - 1, spmd__rec_late_state(r, SPMD__REC_WAITING), t0, t0);
        r->rec = SPMD__REC_NUM(r->rec);
        return;
    }
    r->rec = SPMD__REC_NUM(r->rec); /* (no longer as spmd__rec_posted left it) */
    e = spmd__rec_of(r);
    if (!e || ((st = SPMD__RLD(&e->state)) & 255u) != SPMD__REC_STARTED) return;
    spmd__rec_algo_set(e, r);
    SPMD__ST_REL(&e->state, (st & ~(uint64_t)255) | SPMD__REC_WAITING);
}

/* A written record's last state: done or failed with s (its line kept). */
static inline void spmd__rec_close(spmd__rec *e, spmd_status s) {
    uint64_t st = SPMD__RLD(&e->state);
    SPMD__ST_REL(&e->state, (st & ~(uint64_t)0xffffffffu) | (s == SPMD_OK ? SPMD__REC_DONE : SPMD__REC_FAILED) |
                                (uint64_t)s << 8);
}

static void spmd__rec_end_full(spmd_req *r, spmd_status s) {
    spmd__rec *e = spmd__rec_of(r);
    if (!e) return;
    spmd__rec_algo_set(e, r);
    if ((SPMD__RLD(&e->state) & 255u) == SPMD__REC_WAITING || r->dev->mesh->tracing) {
        uint64_t t = spmd__rec_now(r->dev->mesh), t0 = SPMD__RLD(&e->t0); /* (the coarse clock may lag the wait's start) */
        SPMD__RST(&e->t1, t > t0 ? t : t0);
    }
    spmd__rec_close(e, s);
}

/* r ends with status s. Inline: a blocking call that did not wait writes
   its record here, whole (never under SPMD_TRACE: the coarse clock). */
static inline void spmd__rec_end(spmd_req *r, spmd_status s) {
    if (r->rec & SPMD__REC_LATE) { /* (never under SPMD_TRACE) */
        uint64_t t = spmd__rec_coarse();
        spmd__rec_put(r->dev, r, SPMD__REC_NUM(r->rec) - 1,
                      spmd__rec_late_state(r, s == SPMD_OK ? SPMD__REC_DONE : SPMD__REC_FAILED) | (uint64_t)s << 8, t, t);
        r->rec = SPMD__REC_NUM(r->rec);
    } else if (r->rec & SPMD__REC_POSTED) { /* written while it waited a moment: only its state changes */
        spmd__rec_close(spmd__rec_at(r->dev, SPMD__REC_NUM(r->rec) - 1), s);
        r->rec = SPMD__REC_NUM(r->rec);
    } else if (r->rec) {
        spmd__rec_end_full(r, s);
    }
}

/* A reader's copy of device d's call n (0-based); 0 if it left the ring or
   is not written. A record being rewritten (SPMD__REC_BUSY: its call moved
   on, spmd__rec_put) is read again once it is whole, a few times (a
   report that read it as missing would say the call never came). */
static int spmd__rec_read(const spmd_dev *d, uint64_t n, spmd__recx *out) {
    const spmd__rec *e;
    uint64_t g;
    int tries;
    if (!d->ring) return 0;
    e = spmd__rec_at(d, n);
    for (tries = 0; tries < 64; tries++) {
        g = SPMD__LD_ACQ(&e->gen);
        if (g == SPMD__REC_BUSY) {
            sched_yield();
            continue;
        }
        if (g != n + 1) return 0;
        out->gseq = SPMD__RLD(&e->gseq);
        out->t0 = SPMD__RLD(&e->t0);
        out->count = SPMD__RLD(&e->count);
        out->what = SPMD__RLD(&e->what);
        out->gref = SPMD__RLD(&e->gref);
        out->state = SPMD__LD_ACQ(&e->state);
        out->file = out->state >> 32 ? SPMD__RLD(spmd__site_at(d, n)) : 0;
        out->t1 = SPMD__RLD(&e->t1);
        out->gen = g;
        if (SPMD__LD_ACQ(&e->gen) == g) return 1;
    }
    return 0;
}

/* The name users know: psum for an allreduce with sum, else the kind. */
static const char *spmd__rec_op(uint64_t what) {
    unsigned kind = (unsigned)(what & 255u), op = (unsigned)(what >> 16 & 255u);
    if (kind == SPMD__KIND_ALLREDUCE) return op < SPMD_OP_COUNT ? spmd__op_jax[op] : "?";
    return kind < SPMD__KIND_COUNT ? spmd__kind_names[kind] : "?";
}
static const char *spmd__rec_algo(uint64_t what) {
    unsigned a = (unsigned)(what >> 24 & 255u), kind = (unsigned)(what & 255u);
    if (kind == SPMD__KIND_SEND || kind == SPMD__KIND_RECV) return "p2p";
    static const char *const names[] = {"local", "eager", "split", "bruck", "rd", "rab"};
    return a < sizeof names / sizeof names[0] ? names[a] : "?";
}
static const char *spmd__rec_dtype(uint64_t what) {
    unsigned t = (unsigned)(what >> 8 & 255u);
    return t > SPMD_DTYPE_NONE && t < SPMD_DTYPE_COUNT ? spmd__dtype_names[t] : "-";
}

/* A text being built: everything past len is counted, not written. */
typedef struct spmd__text {
    char *buf;
    size_t len, at;
    int brief; /* what devices doing the same thing share: no index in the group, no times */
} spmd__text;
static void spmd__tx(spmd__text *t, const char *fmt, ...) {
    va_list ap;
    int w;
    char one;
    va_start(ap, fmt);
    w = vsnprintf(t->at < t->len ? t->buf + t->at : &one, t->at < t->len ? t->len - t->at : 0, fmt, ap);
    va_end(ap);
    if (w > 0) t->at += (size_t)w;
}

static double spmd__ms(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1e6 : 0.0; }

/* One record: "#7 psum(f32 x 2, eager) over 'y' (op #4 of group [0 1 2], index 1): done" */
SPMD__SETUP static void spmd__rec_text(spmd__text *t, const spmd__recx *e, uint64_t now) {
    const spmd__gref *gr = (const spmd__gref *)(uintptr_t)e->gref;
    unsigned st = (unsigned)(e->state & 255u), kind = (unsigned)(e->what & 255u);
    int aux = (int)(uint32_t)(e->what >> 32) - 1, k;
    spmd__tx(t, "#%llu %s", (unsigned long long)(e->gen - 1), spmd__rec_op(e->what));
    if (kind == SPMD__KIND_SEND || kind == SPMD__KIND_RECV)
        spmd__tx(t, "(%s x %llu)", spmd__rec_dtype(e->what), (unsigned long long)e->count);
    else if (kind != SPMD__KIND_BARRIER)
        spmd__tx(t, "(%s x %llu, %s)", spmd__rec_dtype(e->what), (unsigned long long)e->count, spmd__rec_algo(e->what));
    if (aux >= 0)
        spmd__tx(t, " %s %d", kind == SPMD__KIND_PPERMUTE ? "pairs" : kind == SPMD__KIND_SEND ? "to" :
                 kind == SPMD__KIND_RECV ? "from" : "root", aux);
    spmd__tx(t, " over '%s' (", gr->text);
    if (kind != SPMD__KIND_SEND && kind != SPMD__KIND_RECV) spmd__tx(t, "op #%llu of ", (unsigned long long)e->gseq);
    spmd__tx(t, "group [");
    for (k = 0; k < gr->g->G && k < 16; k++) spmd__tx(t, "%s%d", k ? " " : "", gr->g->members[k]);
    if (t->brief) spmd__tx(t, "%s]): ", gr->g->G > 16 ? " ..." : "");
    else spmd__tx(t, "%s], index %d): ", gr->g->G > 16 ? " ..." : "", gr->me);
    if (t->brief && (st == SPMD__REC_STARTED || st == SPMD__REC_WAITING || st == SPMD__REC_DONE))
        spmd__tx(t, st == SPMD__REC_DONE ? "done" : st == SPMD__REC_WAITING ? "waiting" : "started");
    else if (st == SPMD__REC_STARTED) spmd__tx(t, "started %.3f ms ago", spmd__ms(e->t0, now));
    else if (st == SPMD__REC_WAITING) spmd__tx(t, "waiting for %.3f ms", spmd__ms(e->t0, now));
    else if (st == SPMD__REC_DONE && e->t1 == e->t0) spmd__tx(t, "done");
    else if (st == SPMD__REC_DONE) spmd__tx(t, "done in %.3f ms", spmd__ms(e->t0, e->t1));
    else if (st == SPMD__REC_SKIPPED) spmd__tx(t, "skipped by the fault plan (SPMD_FAULTS)");
    else spmd__tx(t, "failed: %s", spmd_status_name((spmd_status)(e->state >> 8 & 0xffffffu)));
    if (e->file) spmd__tx(t, ", at %s:%llu", (const char *)(uintptr_t)e->file, (unsigned long long)(e->state >> 32));
}

/* A device of another process: its line from that process's RECORDS (the
   report across processes, spmd__fab_recs_exchange), else "not heard from". */
static void spmd__rep_remote(spmd__text *t, spmd_mesh *m, int dev) {
    char line[SPMD__LINE * 12];
    if (m->vt->recs_line && m->vt->recs_line(m, dev, line, sizeof line)) {
        spmd__tx(t, "(process %d) %s\n", m->proc_of[dev], line);
        return;
    }
    spmd__tx(t, "in process %d, not heard from (processes send their devices' state when the mesh breaks)\n",
             m->proc_of[dev]);
}

/* What device d is doing now, one line. */
SPMD__SETUP static void spmd__rep_now(spmd__text *t, const spmd_dev *d, uint64_t now) {
    uint64_t n = SPMD__LD_ACQ(&d->ncalls), i, lo;
    spmd__recx e, last;
    int have_last = 0;
    memset(&last, 0, sizeof last);
    if (!t->brief) spmd__tx(t, "  device %d: ", d->id);
    if (d->mesh->proc_of && d->mesh->proc_of[d->id] != d->mesh->proc) {
        if (t->brief) { spmd__tx(t, "device %d of another process\n", d->id); return; } /* never in a run */
        spmd__rep_remote(t, d->mesh, d->id);
        return;
    }
    if (!d->ring) { spmd__tx(t, "%s (flight recorder off)\n", SPMD__LD_ACQ(&d->attached) ? "attached" : "not attached"); return; }
    lo = n > (uint64_t)d->mesh->rmask + 1 ? n - d->mesh->rmask - 1 : 0;
    for (i = n; i-- > lo;) {
        if (!spmd__rec_read(d, i, &e)) continue;
        if (!have_last) { last = e; have_last = 1; }
        if ((e.state & 255u) == SPMD__REC_WAITING) {
            spmd__tx(t, "blocked in ");
            spmd__rec_text(t, &e, now);
            spmd__tx(t, "\n");
            return;
        }
    }
    if (!SPMD__LD_ACQ(&d->attached)) {
        if (!n) { spmd__tx(t, "not attached, no calls\n"); return; }
        spmd__tx(t, t->brief ? "returned from its function (detached)" : "returned from its function (detached) after %llu calls",
                 (unsigned long long)n);
    } else if (!n) {
        spmd__tx(t, "running its own code, no calls yet\n");
        return;
    } else if (!spmd__rec_read(d, n - 1, &e)) { /* a blocking call records itself once it waited a moment */
        spmd__tx(t, t->brief ? "in a call not yet recorded" : "in its call #%llu, not yet recorded (a blocking call "
                 "is recorded once it has waited a moment)", (unsigned long long)(n - 1));
    } else if (have_last && (last.state & 255u) >= SPMD__REC_DONE) {
        if (t->brief) spmd__tx(t, "running its own code");
        else spmd__tx(t, "running its own code for %.3f ms", spmd__ms(last.t1, now));
    } else {
        spmd__tx(t, "running its own code with calls in flight");
    }
    if (have_last) {
        spmd__tx(t, "; last call ");
        spmd__rec_text(t, &last, now);
    }
    spmd__tx(t, "\n");
}

/* "devices now" of many devices: a run of devices doing the same thing
   (their brief lines equal) takes one line, "  devices 1..4095: blocked in
   #0 psum(...) over '*' (...): waiting"; a device alone keeps its line. */
static void spmd__rep_key(spmd_mesh *m, int i, uint64_t now, char *buf, size_t len) {
    spmd__text k;
    k.buf = buf;
    k.len = len;
    k.at = 0;
    k.brief = 1;
    buf[0] = '\0';
    spmd__rep_now(&k, m->devs[i], now);
}
static void spmd__rep_runs(spmd__text *t, spmd_mesh *m, int lo, int hi, uint64_t now) {
    char cur[512], next[512];
    int i = lo, j;
    while (i < hi) {
        spmd__rep_key(m, i, now, cur, sizeof cur);
        for (j = i + 1; j < hi; j++) {
            spmd__rep_key(m, j, now, next, sizeof next);
            if (strcmp(cur, next) != 0) break;
        }
        if (j - i == 1) spmd__rep_now(t, m->devs[i], now);
        else spmd__tx(t, "  devices %d..%d: %s", i, j - 1, cur);
        i = j;
    }
}

/* Device ids a..b as ranges, "0..2, 4, 6..9", into r (cut with " ..."). */
static void spmd__rep_range(spmd__text *r, int *start, int *prev, int id) {
    if (*start >= 0 && id == *prev + 1) { *prev = id; return; }
    if (*start >= 0) spmd__tx(r, *start == *prev ? "%s%d" : "%s%d..%d", r->at ? ", " : "", *start, *prev);
    *start = *prev = id;
}

/* The groups in trouble among devices lo..hi-1: those a device is blocked
   in or failed in (its last call), at most 8, each with the highest
   operation number seen there (want). Their count. */
SPMD__SETUP static int spmd__rep_trouble(spmd_mesh *m, int lo, int hi, const spmd__group **trouble, uint64_t *want) {
    int ntrouble = 0, i, j;
    for (i = lo; i < hi; i++) {
        spmd_dev *d = m->devs[i];
        uint64_t n = SPMD__LD_ACQ(&d->ncalls), k, klo = n > (uint64_t)m->rmask + 1 ? n - m->rmask - 1 : 0;
        spmd__recx e;
        for (k = n; k-- > klo;) {
            unsigned st;
            const spmd__gref *gr;
            if (!spmd__rec_read(d, k, &e)) continue;
            st = (unsigned)(e.state & 255u);
            gr = (const spmd__gref *)(uintptr_t)e.gref;
            if (st == SPMD__REC_WAITING || (st == SPMD__REC_FAILED && k == n - 1)) {
                for (j = 0; j < ntrouble && trouble[j] != gr->g; j++) {}
                if (j == ntrouble && ntrouble < 8) { trouble[ntrouble] = gr->g; want[ntrouble++] = e.gseq; }
                else if (j < ntrouble && e.gseq > want[j]) want[j] = e.gseq;
            }
            if (st == SPMD__REC_DONE || st == SPMD__REC_FAILED) break; /* older ones are history */
        }
    }
    return ntrouble;
}

/* A record of a collective call on group g (not skipped). */
SPMD__SETUP static int spmd__rec_on(const spmd__recx *e, const spmd__group *g) {
    unsigned kind = (unsigned)(e->what & 255u);
    return ((const spmd__gref *)(uintptr_t)e->gref)->g == g && (e->state & 255u) != SPMD__REC_SKIPPED &&
           kind != SPMD__KIND_SEND && kind != SPMD__KIND_RECV;
}

/* One group in trouble at its operation want: each member's place in it
   (another process's from its report lines), or for a large group the
   arrived members as ranges and at most 16 absent ones. */
SPMD__SETUP static void spmd__rep_group(spmd__text *t, spmd_mesh *m, const spmd__group *g, uint64_t want, uint64_t now) {
    int k, absent = 0, many = g->G > 16, start = -1, prev = -1; /* many: arrived members as ranges */
    char arrived[256];
    spmd__text r;
    r.buf = arrived;
    r.len = sizeof arrived;
    r.at = 0;
    r.brief = 0;
    arrived[0] = '\0';
    spmd__tx(t, "group [");
    for (k = 0; k < g->G && k < 16; k++) spmd__tx(t, "%s%d", k ? " " : "", g->members[k]);
    spmd__tx(t, "%s] in trouble at its op #%llu:\n", g->G > 16 ? " ..." : "", (unsigned long long)want);
    for (k = 0; k < g->G; k++) {
        spmd_dev *p = m->devs[g->members[k]];
        uint64_t n = SPMD__LD_ACQ(&p->ncalls), c, clo = n > (uint64_t)m->rmask + 1 ? n - m->rmask - 1 : 0;
        spmd__recx e;
        int found = 0, seen = 0; /* seen: its last call's record was read */
        if (m->proc_of && m->proc_of[p->id] != m->proc) {
            spmd__tx(t, "  device %d: ", p->id);
            spmd__rep_remote(t, m, p->id);
            continue;
        }
        for (c = n; c-- > clo && !found;) {
            if (!spmd__rec_read(p, c, &e)) continue;
            seen |= c == n - 1;
            found = spmd__rec_on(&e, g);
        }
        /* its last record, not yet written or being rewritten at the first
           look (the device woke at the break and ended its call), may be
           whole now: read once more, it would otherwise be said not to
           have come */
        if (!found && n && !seen && spmd__rec_read(p, n - 1, &e)) {
            seen = 1;
            found = spmd__rec_on(&e, g);
        }
        if (many && found && e.gseq >= want) {
            spmd__rep_range(&r, &start, &prev, p->id);
            continue;
        }
        if (many && absent >= 16) {
            absent++;
            continue;
        }
        if (!found && n && SPMD__LD_ACQ(&p->attached) && !seen) {
            absent++; /* (not known to have arrived) */
            spmd__tx(t, "  device %d: in its call #%llu, not yet recorded (it may be this one: a blocking call is "
                     "recorded once it has waited a moment)\n", p->id, (unsigned long long)(n - 1));
        } else if (!found) {
            absent++;
            spmd__tx(t, "  device %d: no call on this group in its last %u calls: did not arrive\n", p->id,
                     m->rmask + 1);
        } else {
            int in = e.gseq >= want;
            absent += !in;
            spmd__tx(t, "  device %d: reached op #%llu%s: ", p->id, (unsigned long long)e.gseq,
                     in ? "" : " (did not arrive)");
            spmd__rec_text(t, &e, now);
            spmd__tx(t, "\n");
        }
    }
    if (many && start >= 0) {
        spmd__rep_range(&r, &start, &prev, -2); /* flush */
        spmd__tx(t, "  arrived: devices %.*s%s\n", (int)(r.at < r.len ? r.at : r.len - 5), arrived,
                 r.at < r.len ? "" : " ...");
    }
    if (many && absent > 16) spmd__tx(t, "  (the other %d members that did not arrive are not listed)\n", absent - 16);
    spmd__tx(t, "  %d of %d members did not arrive\n", absent, g->G);
}

SPMD__SETUP static size_t spmd__report(spmd_mesh *m, int device, char *buf, size_t len) {
    spmd__text t;
    const spmd__group *trouble[8];
    uint64_t want[8], now = spmd__rec_now(m);
    int ntrouble = 0, i, j, lo = m->first_local, hi = m->first_local + m->nlocal;
    t.buf = buf;
    t.len = len;
    t.at = 0;
    t.brief = 0;
    if (len) buf[0] = '\0';
    if (device >= 0) { lo = device; hi = device + 1; }
    spmd__tx(&t, "spmd report: mesh of %d devices", m->size);
    for (i = 0; i < m->ndim; i++) spmd__tx(&t, "%s%s=%d", i ? ", " : " (", m->names[i], m->shape[i]);
    if (SPMD__LD_ACQ(&m->broken))
        spmd__tx(&t, "), broken: %s: %s\n", spmd_status_name(m->broken_status), m->broken_msg);
    else
        spmd__tx(&t, "), not broken\n");
    if (m->nlocal <= 0 || m->first_local >= m->size || !m->devs[m->first_local]->ring) {
        spmd__tx(&t, "flight recorder off (SPMD_TRACE_DEPTH=0 or trace_depth < 0)\n");
        return t.at;
    }
    ntrouble = spmd__rep_trouble(m, lo, hi, trouble, want);
    for (j = 0; j < ntrouble; j++) spmd__rep_group(&t, m, trouble[j], want[j], now);
    spmd__tx(&t, "devices now:\n");
    if (hi - lo > 16) spmd__rep_runs(&t, m, lo, hi, now);
    else
        for (i = lo; i < hi; i++) spmd__rep_now(&t, m->devs[i], now);
    if (!ntrouble) {
        /* nothing wrong: every device's last calls (all of the ring for one device) */
        for (i = lo; i < hi; i++) {
            spmd_dev *d = m->devs[i];
            uint64_t n = SPMD__LD_ACQ(&d->ncalls), keep = device >= 0 ? (uint64_t)m->rmask + 1 : 8, k;
            spmd__recx e;
            spmd__tx(&t, "device %d, last calls:\n", d->id);
            for (k = n > keep ? n - keep : 0; k < n; k++) {
                if (!spmd__rec_read(d, k, &e)) continue;
                spmd__tx(&t, "  ");
                spmd__rec_text(&t, &e, now);
                spmd__tx(&t, "\n");
            }
        }
    }
    return t.at;
}

/* The mesh just broke: log the report at error level, a line at a time. */
static void spmd__report_log(spmd_mesh *m) {
    size_t need, len = 8192;
    char *buf, *p, *nl;
    if (m->log_level == SPMD_LOG_OFF || m->log_level < SPMD_LOG_ERROR) return;
    buf = (char *)spmd__alloc(&m->alloc, len);
    if (!buf) return;
    need = spmd__report(m, -1, buf, len);
    for (p = buf; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) { spmd__log(m, SPMD_LOG_ERROR, -1, "%s", p); break; }
        *nl = '\0';
        spmd__log(m, SPMD_LOG_ERROR, -1, "%s", p);
    }
    if (need >= len) spmd__log(m, SPMD_LOG_ERROR, -1, "(report cut at %zu of %zu bytes; spmd_report has it all)", len, need);
    spmd__free(&m->alloc, buf);
}

/* A break's report across processes (libfabric): the other processes'
   lines are waited for (until m->report_until) and logged here, when
   spmd_run ends or by spmd_mesh_destroy, so that the call that broke the
   mesh and its siblings return at once. */
static void spmd__report_settle(spmd_mesh *m) {
    uint64_t until = SPMD__LD_ACQ(&m->report_until);
    if (!until || !SPMD__CAS(&m->report_until, &until, (uint64_t)0)) return;
    if (m->vt->report_settle) m->vt->report_settle(m, until);
}

/* JSON string contents: quotes, backslashes and control characters escaped. */
static void spmd__json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 32) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

SPMD__SETUP static void spmd__trace_event(FILE *f, const spmd_mesh *m, const spmd_dev *d, const spmd__recx *e, int *first) {
    const spmd__gref *gr = (const spmd__gref *)(uintptr_t)e->gref;
    unsigned dt = (unsigned)(e->what >> 8 & 255u), st = (unsigned)(e->state & 255u);
    uint64_t end = e->t1 ? e->t1 : e->t0;
    size_t bytes = dt > SPMD_DTYPE_NONE && dt < SPMD_DTYPE_COUNT ? (size_t)e->count * spmd__dtype_sizes[dt] : 0;
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"seq\":%llu,"
            "\"group_op\":%llu,\"bytes\":%zu,\"dtype\":\"%s\",\"count\":%llu,\"algorithm\":\"%s\",\"axes\":\"",
            *first ? "" : ",", spmd__rec_op(e->what), m->proc, d->id, (double)e->t0 / 1e3,
            (double)(end - e->t0) / 1e3, (unsigned long long)(e->gen - 1), (unsigned long long)e->gseq, bytes,
            spmd__rec_dtype(e->what), (unsigned long long)e->count, spmd__rec_algo(e->what));
    spmd__json_str(f, gr->text);
    fprintf(f, "\",\"status\":\"%s\"}}",
            st == SPMD__REC_DONE ? "SPMD_OK" : st == SPMD__REC_SKIPPED ? "skipped" : st == SPMD__REC_FAILED ? spmd_status_name((spmd_status)(e->state >> 8 & 0xffffffu))
                                                                       : "unfinished");
    *first = 0;
}

/* The trace path with %p replaced by the process's index in the job. */
static void spmd__trace_name(const spmd_mesh *m, char *out, size_t len) {
    const char *s = m->trace_path;
    size_t at = 0;
    for (; *s && at + 1 < len; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            int w = snprintf(out + at, len - at, "%d", m->proc);
            if (w > 0) at += (size_t)w;
            if (at >= len) at = len - 1;
            s++;
        } else {
            out[at++] = *s;
        }
    }
    out[at] = '\0';
}

/* SPMD_TRACE: every local device's calls, one Chrome-trace file (no device runs). */
SPMD__SETUP static void spmd__trace_write(spmd_mesh *m) {
    char path[300];
    FILE *f;
    int i, first = 1;
    if (!m->tracing) return;
    spmd__trace_name(m, path, sizeof path);
    f = fopen(path, "w");
    if (!f) {
        spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_TRACE: cannot write %s: %s (no timeline)", path, strerror(errno));
        return;
    }
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (i = m->first_local; i < m->first_local + m->nlocal; i++) {
        spmd_dev *d = m->devs[i];
        uint64_t n = d->ncalls, k;
        size_t j;
        spmd__recx e;
        fprintf(f, "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"device %d\"}}",
                first ? "" : ",", m->proc, d->id, d->id);
        first = 0;
        for (j = 0; j < d->tlog_n; j++) spmd__trace_event(f, m, d, &d->tlog[j], &first);
        for (k = n > (uint64_t)m->rmask + 1 ? n - m->rmask - 1 : 0; k < n; k++)
            if (spmd__rec_read(d, k, &e)) spmd__trace_event(f, m, d, &e, &first);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_TRACE: writing %s failed: %s", path, strerror(errno));
}

/* SPMD_REPORT_SIGNAL=USR1 (USR2, or a signal number): on that signal every
   mesh of the process logs its report at error level. The handler only
   writes a byte to a pipe (async-signal-safe); a thread of ours, started by
   the first mesh that asks, reads the pipe and logs the reports of the
   meshes registered here (at creation; removed first thing in
   spmd_mesh_destroy, under the lock the reports are written under). The
   first mesh's signal is the process's; a signal that already has a
   handler is left alone (a warning says so). These tables are one of the
   two process-wide states, on purpose: a signal handler has no argument,
   so what it reports on must be found from a static (spmd__world, the
   libfabric transport, is the other). */
#include <fcntl.h>
#include <signal.h>
static pthread_mutex_t spmd__sig_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd_mesh **spmd__sig_meshes;
static int spmd__sig_n, spmd__sig_cap, spmd__sig_num; /* spmd__sig_num: the signal taken, 0: none yet */
static int spmd__sig_pipe[2] = {-1, -1};

static void spmd__sig_handler(int sig) {
    int e = errno;
    char c = (char)sig;
    ssize_t w = write(spmd__sig_pipe[1], &c, 1); /* full pipe (a burst of signals): one report is enough */
    (void)w;
    errno = e;
}

static void *spmd__sig_main(void *arg) {
    char buf[64];
    (void)arg;
    for (;;) {
        ssize_t n = read(spmd__sig_pipe[0], buf, sizeof buf);
        int i;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return NULL;
        pthread_mutex_lock(&spmd__sig_lock);
        for (i = 0; i < spmd__sig_n; i++) {
            spmd__log(spmd__sig_meshes[i], SPMD_LOG_ERROR, -1, "report asked for by signal %d (SPMD_REPORT_SIGNAL):",
                      spmd__sig_num);
            spmd__report_log(spmd__sig_meshes[i]);
        }
        pthread_mutex_unlock(&spmd__sig_lock);
    }
}

/* The signal SPMD_REPORT_SIGNAL names, 0 if unset, -1 if not a signal we take. */
static int spmd__sig_parse(const char *v) {
    char *end;
    long x;
    if (!v || !*v) return 0;
    if (!strncmp(v, "SIG", 3)) v += 3;
    if (!strcmp(v, "USR1")) return SIGUSR1;
    if (!strcmp(v, "USR2")) return SIGUSR2;
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || *end || x <= 0 || x >= 65 || x == SIGKILL || x == SIGSTOP || x == SIGSEGV || x == SIGBUS ||
        x == SIGFPE || x == SIGILL)
        return -1;
    return (int)x;
}

/* At mesh creation: take the signal (once per process) and register m. */
SPMD__SETUP static void spmd__sig_setup(spmd_mesh *m) {
    const char *v = getenv("SPMD_REPORT_SIGNAL");
    int sig = spmd__sig_parse(v);
    if (!sig) return;
    if (sig < 0) {
        spmd__log(m, SPMD_LOG_WARN, -1, "ignoring SPMD_REPORT_SIGNAL=%s (expected USR1, USR2 or a signal number)", v);
        return;
    }
    pthread_mutex_lock(&spmd__sig_lock);
    if (!spmd__sig_num) {
        struct sigaction sa, old;
        pthread_t th;
        int ok = sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO);
        if (!ok) {
            spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_REPORT_SIGNAL=%s: signal %d already has a handler; no report on it", v, sig);
            spmd__sig_num = -1;
        } else if (pipe(spmd__sig_pipe) != 0 || fcntl(spmd__sig_pipe[1], F_SETFL, O_NONBLOCK) != 0 ||
                   fcntl(spmd__sig_pipe[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(spmd__sig_pipe[1], F_SETFD, FD_CLOEXEC) != 0 ||
                   pthread_create(&th, NULL, spmd__sig_main, NULL) != 0) {
            spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_REPORT_SIGNAL=%s: cannot start the report thread: %s", v, strerror(errno));
            spmd__sig_num = -1;
        } else {
            pthread_detach(th);
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = spmd__sig_handler;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_RESTART;
            sigaction(sig, &sa, NULL);
            spmd__sig_num = sig;
            spmd__log(m, SPMD_LOG_INFO, -1, "SPMD_REPORT_SIGNAL: signal %d logs the report of every mesh", sig);
        }
    } else if (spmd__sig_num > 0 && sig != spmd__sig_num) {
        spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_REPORT_SIGNAL=%s: the process already reports on signal %d (its first mesh's)",
                  v, spmd__sig_num);
    }
    if (spmd__sig_num > 0) {
        if (spmd__sig_n == spmd__sig_cap) {
            int cap = spmd__sig_cap ? 2 * spmd__sig_cap : 8;
            spmd_mesh **t = (spmd_mesh **)realloc(spmd__sig_meshes, (size_t)cap * sizeof *t);
            if (t) { spmd__sig_meshes = t; spmd__sig_cap = cap; }
        }
        if (spmd__sig_n < spmd__sig_cap) spmd__sig_meshes[spmd__sig_n++] = m;
    }
    pthread_mutex_unlock(&spmd__sig_lock);
}

/* spmd_mesh_destroy: m leaves the list (after a report being written now). */
static void spmd__sig_forget(spmd_mesh *m) {
    int i;
    pthread_mutex_lock(&spmd__sig_lock);
    for (i = 0; i < spmd__sig_n; i++)
        if (spmd__sig_meshes[i] == m) spmd__sig_meshes[i--] = spmd__sig_meshes[--spmd__sig_n];
    pthread_mutex_unlock(&spmd__sig_lock);
}

/* At mesh creation: the ring's size and the trace path. */
static spmd_status spmd__rec_setup(spmd_mesh *m, const spmd_mesh_desc *desc) {
    int64_t depth = desc->trace_depth < 0 ? 0 : desc->trace_depth ? desc->trace_depth : SPMD__REC_DEFAULT_DEPTH;
    const char *tp = getenv("SPMD_TRACE");
    uint64_t n = 1;
    int i;
    depth = spmd__env_int("SPMD_TRACE_DEPTH", 0, 1 << 20, depth, NULL);
    if (tp && *tp) {
        FILE *f;
        snprintf(m->trace_path, sizeof m->trace_path, "%s", tp);
        m->tracing = 1;
        {
            char path[300];
            spmd__trace_name(m, path, sizeof path);
            f = fopen(path, "a");
        }
        if (!f) {
            spmd__log(m, SPMD_LOG_WARN, -1, "SPMD_TRACE=%s cannot be written: %s (the run goes on without a timeline)",
                      tp, strerror(errno));
            m->tracing = 0;
        } else {
            fclose(f);
        }
        if (m->tracing && !depth) depth = SPMD__REC_DEFAULT_DEPTH; /* the timeline needs the records */
    }
    if (!depth) { spmd__sig_setup(m); return SPMD_OK; }
    while (n < (uint64_t)depth) n *= 2;
    m->rmask = (uint32_t)(n - 1);
    m->rstride = m->nlocal >= SPMD__REC_SIDE ? (uint32_t)m->nlocal : 1u;
    m->rings = (spmd__rec *)spmd__alloc(&m->alloc, (size_t)n * (size_t)m->nlocal * sizeof(spmd__rec));
    m->rsites = (uint64_t *)spmd__alloc(&m->alloc, (size_t)n * (size_t)m->nlocal * sizeof(uint64_t));
    if (!m->rings || !m->rsites) return SPMD_ERR_NOMEM;
    for (i = 0; i < m->nlocal; i++) { /* (side by side: device i's first record is the i-th) */
        size_t first = m->rstride > 1 ? (size_t)i : (size_t)i * n;
        m->devs[m->first_local + i]->ring = m->rings + first;
        m->devs[m->first_local + i]->sites = m->rsites + first;
    }
    spmd__sig_setup(m);
    return SPMD_OK;
}

// >>requests
/* Where every collective starts (the public functions call in here):
   spmd__coll_start checks the arguments before the mesh's state
   (spmd__coll_args; a refused call keeps its place: spmd__refuse), finds
   the group, fills the request (spmd__setup: sizes, kernel, signature),
   chooses the algorithm (eager, split; across processes the exchange),
   begins its flight record and posts it; spmd__quick is the same for a
   repeated small blocking call, skipping what the last call proved. A
   blocking call then waits (>>waiting); a _start returns the request,
   spmd_wait/spmd_test finish it. Calls the sections above, the backend
   through m->vt, and these further on: */
static void spmd__finish(spmd_req *r, spmd_status s);   /* >>thread backend */
static void spmd__slot_watch(spmd_req *r, int k);
static size_t spmd__unit_len(const spmd_req *r);
static void spmd__eager(spmd_req *r, int local);
static spmd_status spmd__block(spmd_req *r);            /* >>waiting */
static void spmd__watch(spmd_req *r);
#define SPMD__AUX_ROOT0 0x9e3779b97f4a7c15u /* a signature's aux word for root 0 (times root + 1) */
/* Requests in flight are linked in start order (progress walks the list). */
static void spmd__req_link(spmd_dev *d, spmd_req *r) {
    r->magic = SPMD__REQ_MAGIC;
    r->dev = d;
    r->next = NULL;
    r->prev = d->tail;
    if (d->tail) d->tail->next = r; else d->head = r;
    d->tail = r;
    d->inflight++;
}
static void spmd__req_unlink(spmd_req *r) {
    spmd_dev *d = r->dev;
    if (r->slotwait) spmd__slot_watch(r, -1); /* abandoned while waiting for a slot */
    if (r->prev) r->prev->next = r->next; else d->head = r->next;
    if (r->next) r->next->prev = r->prev; else d->tail = r->prev;
    d->inflight--;
    r->magic = 0;
}

/* A request for a new call: everything before blk zeroed. Both entry
   paths start here (spmd__req_new, spmd__quick), so a field added to
   spmd_req starts at 0 in either. */
static void spmd__req_clear(spmd_req *r) {
#if defined(__GNUC__)
    /* 64 bytes at a time in plain vector stores: gcc expands a memset of
       more than 64 bytes into rep stos, whose start-up costs as much as the
       rest of a small blocking call's set-up (the quick path clears once
       per call); the empty asm keeps it from seeing the memset again */
    typedef uint64_t spmd__vz __attribute__((vector_size(16), aligned(8), may_alias));
    spmd__vz *q = (spmd__vz *)(void *)r, z = {0, 0};
    size_t i, n = offsetof(spmd_req, blk) / 16;
    for (i = 0; i + 4 <= n; i += 4) {
        q[i] = z;
        q[i + 1] = z;
        q[i + 2] = z;
        q[i + 3] = z;
        __asm__ __volatile__("" ::: "memory");
    }
    memset((unsigned char *)r + i * 16, 0, offsetof(spmd_req, blk) - i * 16); /* (under 64 bytes) */
#else
    memset(r, 0, offsetof(spmd_req, blk));
#endif
}

static spmd_req *spmd__req_new(spmd_dev *d) {
    spmd_req *r = d->free_reqs;
    if (r) {
        d->free_reqs = r->next;
        spmd__req_clear(r);
    } else {
        r = (spmd_req *)spmd__alloc(&d->mesh->alloc, sizeof *r);
        if (!r) return NULL;
    }
    spmd__req_link(d, r);
    return r;
}

/* A finished request's buffers freed and the request out of the list. */
static inline void spmd__req_drop(spmd_req *r) {
    spmd_dev *d = r->dev;
    if (r->temp && r->temp != r->xp_blk) spmd__free(&d->mesh->alloc, r->temp);
    if (r->xscratch) spmd__free(&d->mesh->alloc, r->xscratch);
    if (r->fault_copy) spmd__free(&d->mesh->alloc, r->fault_copy);
    r->fault_copy = NULL;
    r->xscratch = NULL;
    r->temp = NULL;
    r->src_of = NULL;
    spmd__req_unlink(r);
}
/* ... and back in the device's pool. */
static void spmd__req_release(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__req_drop(r);
    r->next = d->free_reqs;
    d->free_reqs = r;
}

static spmd_status spmd__check_dev(spmd_dev *d) {
    if (!d) return SPMD_ERR_NULL;
    if (d->lost) return spmd__fault_lost(d); /* >>faults: kind=lose */
    if (d->mesh->vt->news) d->mesh->vt->news(d->mesh); /* a break another process announced */
    if (SPMD__LD_ACQ(&d->mesh->broken))
        return spmd__fail(d, SPMD_ERR_BROKEN, "mesh is broken: %s", d->mesh->broken_msg);
    return SPMD_OK;
}

/* A collective call as the public functions describe it. */
typedef struct spmd__call {
    int kind;
    const char *name;
    const void *send;
    void *recv;
    size_t count;              /* elements per device (the size parameter) */
    spmd_dtype dt;
    spmd_op op;
    int root;                  /* rooted kinds: a group index */
    int one_axis;              /* pargmax/pargmin: one axis, no groups */
    const int *perm;           /* ppermute pairs, or the pshuffle permutation */
    int npairs;                /* -1: perm is a pshuffle permutation */
    const spmd_array *x, *out; /* array forms */
    int dim1, dim2, tiled;
    const int64_t *ragged[4];  /* input_offsets, send_sizes, output_offsets, recv_sizes */
    int64_t k;
    int two_phase;             /* psend: the recv side comes later, from precv */
} spmd__call;

/* The rules of a call's dtype, op and options, one set for both entry
   paths: 0 when they hold, else the rule broken (spmd__rule_fail says it;
   spmd__quick leaves such a call to the general path, which does). *kern:
   a reduction's kernel. */
enum { SPMD__RULE_DTYPE = 1, SPMD__RULE_COUNT, SPMD__RULE_OP, SPMD__RULE_KERNEL, SPMD__RULE_ALGO, SPMD__RULE_TIMEOUT,
       SPMD__RULE_ALGO_KIND };
static int spmd__reduces(int kind) {
    return kind == SPMD__KIND_ALLREDUCE || kind == SPMD__KIND_REDUCE || kind == SPMD__KIND_SCAN ||
           kind == SPMD__KIND_PSUM_SCATTER;
}
/* Whether an algorithm asked for in spmd_opts is one of the call's: rd
   and rab are plans of a reduction (not argmax, argmin), bcast, reduce,
   psum_scatter, all_gather, scatter or gather, bruck carries every kind but ppermute and
   ragged_all_to_all; eager and split take any (a kind without a split
   form runs its own). SPMD_ALGO, which forces every call, applies where it
   fits and leaves the rest to the default. */
static int spmd__algo_fits(int kind, spmd_op op, spmd_algo a) {
    if (a == SPMD_ALGO_RD || a == SPMD_ALGO_RAB)
        return kind == SPMD__KIND_BCAST || kind == SPMD__KIND_PSUM_SCATTER || kind == SPMD__KIND_SCATTER ||
               kind == SPMD__KIND_GATHER || kind == SPMD__KIND_ALLGATHER ||
               ((kind == SPMD__KIND_ALLREDUCE || kind == SPMD__KIND_REDUCE) && op != SPMD_OP_ARGMAX &&
                op != SPMD_OP_ARGMIN);
    return a != SPMD_ALGO_BRUCK || (kind != SPMD__KIND_PPERMUTE && kind != SPMD__KIND_RAGGED);
}
static int spmd__rules(const spmd_mesh *m, int kind, spmd_dtype dt, spmd_op op, size_t count, const spmd_opts *o,
                       spmd__kernel *kern) {
    *kern = NULL;
    if (kind != SPMD__KIND_BARRIER) {
        if ((int)dt <= SPMD_DTYPE_NONE || (int)dt >= SPMD_DTYPE_COUNT) return SPMD__RULE_DTYPE;
        if (count > (size_t)INT64_MAX / 16) return SPMD__RULE_COUNT;
    }
    if (spmd__reduces(kind)) {
        if ((int)op <= SPMD_OP_NONE || (int)op >= SPMD_OP_COUNT) return SPMD__RULE_OP;
        if (!(*kern = spmd__kernel_in(m->ktab, dt, op)) || (kind == SPMD__KIND_PSUM_SCATTER && dt == SPMD_BOOL))
            return SPMD__RULE_KERNEL;
        if (kind == SPMD__KIND_PSUM_SCATTER) *kern = spmd__kernel_in(m->ktab, dt, SPMD_OP_SUM);
    }
    if (o && ((int)o->algo < 0 || (int)o->algo >= SPMD_ALGO_COUNT)) return SPMD__RULE_ALGO;
    if (o && o->timeout_ms < 0) return SPMD__RULE_TIMEOUT;
    if (o && !spmd__algo_fits(kind, op, o->algo)) return SPMD__RULE_ALGO_KIND;
    return 0;
}
static spmd_status spmd__rule_fail(spmd_dev *d, const spmd__call *c, int rule, const spmd_opts *o) {
    const char *name = c->name;
    switch (rule) {
    case SPMD__RULE_DTYPE: return spmd__fail(d, SPMD_ERR_INVALID, "%s: invalid dtype %d", name, (int)c->dt);
    case SPMD__RULE_COUNT:
        return spmd__fail(d, SPMD_ERR_OVERFLOW, "%s: count %zu overflows the byte size", name, c->count);
    case SPMD__RULE_OP: return spmd__fail(d, SPMD_ERR_INVALID, "%s: invalid op %d", name, (int)c->op);
    case SPMD__RULE_KERNEL:
        return spmd__fail(d, SPMD_ERR_DTYPE, "%s is not defined for %s%s", name, spmd__dtype_names[c->dt],
                          c->dt == SPMD_BOOL ? " (JAX's mean of bools is float32, its psum_scatter int32: "
                                               "convert first)"
                          : c->dt == SPMD_C64 || c->dt == SPMD_C128
                              ? " (complex numbers have no order, as in MPI: reduce their magnitudes or parts)"
                              : "");
    case SPMD__RULE_ALGO: return spmd__fail(d, SPMD_ERR_INVALID, "%s: invalid algo %d", name, (int)o->algo);
    case SPMD__RULE_ALGO_KIND:
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: algo %s is not one of its algorithms (rd and rab: a reduction "
                          "but argmax/argmin, bcast, reduce, psum_scatter, scatter or gather; bruck: all but "
                          "ppermute and ragged_all_to_all); SPMD_ALGO_DEFAULT chooses", name,
                          o->algo == SPMD_ALGO_BRUCK ? "bruck" : o->algo == SPMD_ALGO_RD ? "rd" : "rab");
    default: return spmd__fail(d, SPMD_ERR_INVALID, "%s: negative timeout %lld", name, (long long)o->timeout_ms);
    }
}

/* What both entry paths set once a call passed the rules: its group,
   sizes, kernel, signature (but aux) and deadline. */
static void spmd__req_call(spmd_req *r, spmd__gref *gr, int kind, spmd_dtype dt, spmd_op op, size_t count,
                           spmd__kernel kern, const spmd_opts *o) {
    r->gr = gr;
    r->count = count;
    r->in_size = kind == SPMD__KIND_BARRIER ? 1 : spmd__dtype_sizes[dt];
    r->out_size = spmd__reduces(kind) ? spmd__out_size(dt, op) : r->in_size;
    r->kern = kern;
    r->timeout_ms = o && o->timeout_ms ? o->timeout_ms : r->dev->mesh->timeout_ms;
    r->sig.kind = (uint8_t)kind;
    r->sig.op = (uint8_t)op;
    r->sig.dtype = (uint8_t)dt;
    r->sig.axes_hash = gr->axes_hash;
    r->sig.count = count;
}

/* The flight record begins (>>recorder); a call the fault plan skips or
   loses is done here, nothing joined: 1 then. Both entry paths. */
static int spmd__req_begin(spmd_req *r) {
    int k;
    r->gseq = r->gr->my->next; /* (a call with a group takes it at the post; a local one's record shows it) */
    if ((k = spmd__rec_begin(r)) == 0) return 0;
    r->sig.algo = SPMD__ALG_LOCAL;
    spmd__finish(r, k == 1 ? SPMD_OK : SPMD_ERR_PEER_LOST);
    return 1;
}
/* The post: the group's next operation, the device's next collective. */
static void spmd__req_post(spmd_req *r) {
    spmd_dev *d = r->dev;
    r->gseq = r->gr->my->next++;
    r->global = d->global++;
    r->state = SPMD__R_POST;
    if (r->x && d->mesh->check) spmd__clog_write(d, r); /* (the thread engine's post writes its own) */
    d->mesh->vt->progress(r);
}

static void spmd__shape_text(const int64_t *sh, int rank, char *buf, size_t len) {
    size_t at = 0;
    int i;
    at += (size_t)snprintf(buf, len, "(");
    for (i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)sh[i]);
    if (at < len) snprintf(buf + at, len - at, rank == 1 ? ",)" : ")");
}

/* Row-major strides in bytes. */
static void spmd__strides(const int64_t *sh, int rank, int64_t es, int64_t *st) {
    int i;
    int64_t acc = es;
    for (i = rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= sh[i];
    }
}

/* An array view's rank, dtype and shape (its elements in *numel); its data
   too unless data_later (a collective checks it with its buffers, after its
   sizes are known: spmd__coll_args). */
static spmd_status spmd__check_view(spmd_dev *d, const char *name, const char *which, const spmd_array *a,
                                    size_t *numel, int data_later) {
    int i;
    size_t n = 1;
    if (!a) return spmd__fail(d, SPMD_ERR_NULL, "%s: %s is NULL", name, which);
    if (a->rank < 0 || a->rank > SPMD_MAX_RANK)
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: %s has rank %d (0..%d)", name, which, a->rank, SPMD_MAX_RANK);
    if ((int)a->dtype <= SPMD_DTYPE_NONE || (int)a->dtype >= SPMD_DTYPE_COUNT)
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: %s has invalid dtype %d", name, which, (int)a->dtype);
    for (i = 0; i < a->rank; i++) {
        if (a->shape[i] < 0)
            return spmd__fail(d, SPMD_ERR_SHAPE, "%s: %s.shape[%d] = %lld is negative", name, which, i,
                              (long long)a->shape[i]);
        if ((n | (size_t)a->shape[i]) >= ((size_t)1 << 29) && a->shape[i] && /* small: no division */
            n > (size_t)INT64_MAX / 16 / (size_t)a->shape[i])
            return spmd__fail(d, SPMD_ERR_OVERFLOW, "%s: %s has too many elements", name, which);
        n *= (size_t)a->shape[i];
    }
    if (n && !a->data && !data_later) return spmd__fail(d, SPMD_ERR_NULL, "%s: %s.data is NULL", name, which);
    *numel = n;
    return SPMD_OK;
}
static spmd_status spmd__check_array(spmd_dev *d, const char *name, const char *which, const spmd_array *a,
                                     size_t *numel) {
    return spmd__check_view(d, name, which, a, numel, 0);
}

/* Canonicalise a dimension index against rank (negative: from the end). */
static int spmd__canon(int dim, int rank, int *out) {
    if (dim < -rank || dim >= rank) return 0;
    *out = dim < 0 ? dim + rank : dim;
    return 1;
}

static uint64_t spmd__hash_shape(uint64_t h, const int64_t *sh, int rank) {
    int i;
    for (i = 0; i < rank; i++) {
        h ^= (uint64_t)sh[i];
        h *= 1099511628211u;
    }
    return h ^ (uint64_t)rank;
}

/* Fold a block's dimensions: drop extents of 1, merge neighbours that are
   contiguous in both arrays, and take the innermost contiguous run out. */
static void spmd__blk_fold(spmd__blk *b, int64_t es) {
    int i, n = 0;
    for (i = 0; i < b->n; i++) {
        if (b->ext[i] == 1) continue;
        if (n > 0 && b->ss[n - 1] == b->ext[i] * b->ss[i] && b->ds[n - 1] == b->ext[i] * b->ds[i]) {
            b->ext[n - 1] *= b->ext[i];
            b->ss[n - 1] = b->ss[i];
            b->ds[n - 1] = b->ds[i];
            continue;
        }
        b->ext[n] = b->ext[i];
        b->ss[n] = b->ss[i];
        b->ds[n] = b->ds[i];
        n++;
    }
    b->n = n;
    b->run = (size_t)es;
    if (n > 0 && b->ss[n - 1] == es && b->ds[n - 1] == es) {
        b->run = (size_t)(b->ext[n - 1] * es);
        b->n = n - 1;
    }
}

/* The shape rules of the array forms: compute the output shape JAX would
   give, compare, and lay the operation out for the work functions. */
static spmd_status spmd__setup_array(spmd_dev *d, spmd__call *c, int G, spmd_req *r, uint64_t *aux) {
    const spmd_array *x = c->x, *o = c->out;
    int64_t want[SPMD_MAX_RANK + 1];
    int wr = x->rank, i, a = 0, b = 0;
    int64_t es = (int64_t)spmd__dtype_sizes[x->dtype];
    char w[160], got[160];
    uint64_t h = spmd__hash_shape(1469598103934665603u, x->shape, x->rank);
    memcpy(want, x->shape, sizeof x->shape);
    switch (c->kind) {
    case SPMD__KIND_ALLGATHER:
        if (!spmd__canon(c->dim1, c->tiled ? x->rank : x->rank + 1, &a) || (c->tiled && x->rank == 0))
            return spmd__fail(d, SPMD_ERR_INVALID, "%s: axis %d is outside an array of rank %d%s", c->name, c->dim1,
                              x->rank, c->tiled ? " (tiled)" : " (+1, untiled)");
        if (c->tiled) {
            want[a] *= G;
        } else {
            for (i = x->rank; i > a; i--) want[i] = want[i - 1];
            want[a] = G;
            wr = x->rank + 1;
        }
        r->outer = 1;
        for (i = 0; i < a; i++) r->outer *= (size_t)x->shape[i];
        r->inner = 1;
        for (i = a; i < x->rank; i++) r->inner *= (size_t)x->shape[i];
        break;
    case SPMD__KIND_PSUM_SCATTER:
        if (!spmd__canon(c->dim1, x->rank, &a))
            return spmd__fail(d, SPMD_ERR_INVALID, "%s: scatter_dimension %d is outside an array of rank %d", c->name,
                              c->dim1, x->rank);
        if (c->tiled ? x->shape[a] % G != 0 : x->shape[a] != G)
            return spmd__fail(d, SPMD_ERR_SHAPE, "%s: x.shape[%d] = %lld must %s the group size %d", c->name, a,
                              (long long)x->shape[a], c->tiled ? "be divisible by" : "equal", G);
        if (c->tiled) {
            want[a] /= G;
        } else {
            for (i = a; i < x->rank - 1; i++) want[i] = want[i + 1];
            wr = x->rank - 1;
        }
        r->outer = 1;
        for (i = 0; i < a; i++) r->outer *= (size_t)x->shape[i];
        r->inner = (size_t)(x->shape[a] / G);
        for (i = a + 1; i < x->rank; i++) r->inner *= (size_t)x->shape[i];
        break;
    case SPMD__KIND_ALLTOALL: {
        int64_t xs[SPMD_MAX_RANK], os[SPMD_MAX_RANK], sh[SPMD_MAX_RANK];
        int n = 0;
        if (x->rank == 0 || !spmd__canon(c->dim1, x->rank, &a) || !spmd__canon(c->dim2, x->rank, &b))
            return spmd__fail(d, SPMD_ERR_INVALID, "%s: split_axis %d / concat_axis %d outside an array of rank %d",
                              c->name, c->dim1, c->dim2, x->rank);
        if (c->tiled ? x->shape[a] % G != 0 : x->shape[a] != G)
            return spmd__fail(d, SPMD_ERR_SHAPE, "%s: x.shape[%d] = %lld must %s the group size %d", c->name, a,
                              (long long)x->shape[a], c->tiled ? "be divisible by" : "equal", G);
        if (c->tiled) {
            want[a] /= G;
            want[b] *= G;
        } else {
            for (i = a; i < x->rank - 1; i++) want[i] = want[i + 1];
            for (i = x->rank - 1; i > b; i--) want[i] = want[i - 1];
            want[b] = G;
        }
        spmd__strides(x->shape, x->rank, es, xs);
        spmd__strides(want, wr, es, os);
        /* the chunk: x's dims (split one divided, or dropped when untiled),
           and the same dims in the output (concat one divided, or dropped) */
        for (i = 0; i < x->rank; i++) {
            if (!c->tiled && i == a) continue;
            sh[n] = i == a ? x->shape[a] / G : x->shape[i];
            r->blk.ss[n] = xs[i];
            n++;
        }
        r->blk.n = n;
        for (i = 0, n = 0; i < wr; i++) {
            if (!c->tiled && i == b) continue;
            r->blk.ds[n++] = os[i];
        }
        memcpy(r->blk.ext, sh, sizeof sh);
        r->src_step = c->tiled ? x->shape[a] / G * xs[a] : xs[a];
        r->dst_step = c->tiled ? want[b] / G * os[b] : os[b];
        spmd__blk_fold(&r->blk, es);
        break;
    }
    default: /* ppermute, pshuffle, pbroadcast: same shape */
        break;
    }
    h = spmd__hash_shape(h ^ (uint64_t)(a * 31 + b * 7 + c->tiled), want, wr);
    *aux ^= h;
    if (o->dtype != x->dtype)
        return spmd__fail(d, SPMD_ERR_SHAPE, "%s: out has dtype %s but x has %s", c->name,
                          spmd__dtype_names[o->dtype], spmd__dtype_names[x->dtype]);
    if (o->rank != wr || memcmp(o->shape, want, (size_t)wr * sizeof(int64_t)) != 0) {
        spmd__shape_text(o->shape, o->rank, got, sizeof got);
        spmd__shape_text(want, wr, w, sizeof w);
        return spmd__fail(d, SPMD_ERR_SHAPE, "%s over a group of %d: out has shape %s but must be %s", c->name, G,
                          got, w);
    }
    return SPMD_OK;
}

/* ragged_all_to_all: the offsets and sizes checked against the operand
   and output, and kept with the request (r->meta: they travel with the
   input); its sizes. */
static spmd_status spmd__setup_ragged(spmd_dev *d, const spmd__call *c, int G, spmd_req *r, size_t *max_in,
                                      size_t *out_bytes, uint64_t *aux) {
    size_t es = r->in_size;
    const spmd_array *op = c->x, *ou = c->out;
    int64_t kk = c->k, i, N, M, *m;
    size_t row = es;
    int j;
    if (op->rank < 1 || ou->rank != op->rank || ou->dtype != op->dtype)
        return spmd__fail(d, SPMD_ERR_SHAPE, "%s: operand and output need the same dtype and rank >= 1", c->name);
    for (j = 1; j < op->rank; j++) {
        if (op->shape[j] != ou->shape[j])
            return spmd__fail(d, SPMD_ERR_SHAPE, "%s: operand and output differ in dimension %d (%lld vs %lld)",
                              c->name, j, (long long)op->shape[j], (long long)ou->shape[j]);
        row *= (size_t)op->shape[j];
    }
    if (kk < 1 || kk % G != 0 || kk > (int64_t)(SIZE_MAX / 64))
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: k = %lld must be a positive multiple of the group size %d",
                          c->name, (long long)kk, G);
    for (j = 0; j < 4; j++)
        if (!c->ragged[j]) return spmd__fail(d, SPMD_ERR_NULL, "%s: offset or size array %d is NULL", c->name, j);
    N = op->shape[0];
    M = ou->shape[0];
    for (i = 0; i < kk; i++) {
        int64_t io = c->ragged[0][i], ss = c->ragged[1][i], oo = c->ragged[2][i], rs = c->ragged[3][i];
        if (io < 0 || ss < 0 || io > N || ss > N - io)
            return spmd__fail(d, SPMD_ERR_INVALID,
                              "%s: input_offsets[%lld] = %lld, send_sizes = %lld reach outside the %lld rows of operand",
                              c->name, (long long)i, (long long)io, (long long)ss, (long long)N);
        if (oo < 0 || oo > M || ss > M - oo)
            return spmd__fail(d, SPMD_ERR_INVALID,
                              "%s: output_offsets[%lld] = %lld with %lld rows reaches outside the %lld rows of output",
                              c->name, (long long)i, (long long)oo, (long long)ss, (long long)M);
        if (rs < 0 || rs > M)
            return spmd__fail(d, SPMD_ERR_INVALID, "%s: recv_sizes[%lld] = %lld is outside 0..%lld", c->name,
                              (long long)i, (long long)rs, (long long)M);
    }
    m = (int64_t *)spmd__alloc(&d->mesh->alloc, 4 * (size_t)kk * sizeof(int64_t));
    if (!m) return spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory", c->name);
    for (j = 0; j < 4; j++) memcpy(m + (size_t)j * (size_t)kk, c->ragged[j], (size_t)kk * sizeof(int64_t));
    r->temp = m; /* owned by the request */
    r->meta = m;
    r->recv_sizes = m + 3 * kk;
    r->k = kk;
    r->rows_out = M;
    r->row_bytes = row;
    r->meta_bytes = 4 * (size_t)kk * sizeof(int64_t);
    r->in_bytes = *max_in = r->meta_bytes + (size_t)N * row;
    *out_bytes = (size_t)M * row;
    *aux ^= spmd__hash_shape(spmd__hash_shape((uint64_t)kk, op->shape, op->rank), ou->shape, ou->rank);
    return SPMD_OK;
}

/* A large group's ppermute checks its pairs once a call, not once a
   member (G^2 steps a call otherwise: 22.9 ms at 4,096 devices). The first
   member to check them leaves the result in the call's entry; a member of the same call that passes the same pairs (the same array,
   count and hash so far) takes it. An entry is rewritten only once every
   member finished the call it holds (spmd__group_behind), so it never
   changes under a reader. There are 2 D entries: a member sets a call up before it waits
   for its slot, so the call D back may still run, 2 D back hardly ever.
   One process only, and not in check mode (which compares each member's
   own pairs). */
#define SPMD__PERM_SHARE_MIN 128
typedef struct spmd__permc {
    uint32_t lock;       /* spmd__slock */
    uint64_t call;       /* the group's operation it holds, + 1; 0: none */
    const int *perm;     /* the pairs as passed, */
    int npairs;          /* and their count (-1: a pshuffle's G) */
    uint64_t aux_in, aux_out; /* the hash before and after them */
    int *src_of, *dst_of; /* G each */
} spmd__permc;

/* r's group's entries (made on first use), or NULL where not shared. */
static spmd__permc *spmd__perm_entries(spmd_dev *d, spmd__group *g) {
    spmd_mesh *m = d->mesh;
    spmd__permc *e;
    size_t i, G = (size_t)g->G;
    if (g->G < SPMD__PERM_SHARE_MIN || g->span || m->check) return NULL;
    if ((e = SPMD__LD_ACQ(&g->permc)) != NULL) return e;
    pthread_mutex_lock(&m->lock);
    if ((e = g->permc) == NULL &&
        (e = (spmd__permc *)spmd__alloc(&m->alloc, 2 * (size_t)g->D * (sizeof *e + 2 * G * sizeof(int)))) != NULL) {
        int *ints = (int *)(void *)(e + 2 * g->D);
        for (i = 0; i < 2 * (size_t)g->D; i++) {
            e[i].src_of = ints + 2 * G * i;
            e[i].dst_of = e[i].src_of + G;
        }
        SPMD__ST_REL(&g->permc, e);
    }
    pthread_mutex_unlock(&m->lock);
    return e;
}

/* Take the call's checked pairs from e when they are these (the same
   array and count, and its first, middle and last pairs agree: an array
   rewritten between the members' calls is caught at those): 1 then. */
static int spmd__perm_take(spmd__permc *e, uint64_t call, const spmd__call *c, int me, spmd_req *r, uint64_t *aux) {
    int hit, k, np;
    spmd__slock(&e->lock);
    hit = e->call == call && e->perm == c->perm && e->npairs == c->npairs && e->aux_in == *aux;
    np = e->npairs < 0 ? r->gr->g->G : e->npairs;
    for (k = 0; hit && k < 3 && np > 0; k++) {
        int i = k == 0 ? 0 : k == 1 ? np / 2 : np - 1;
        int src = c->npairs < 0 ? c->perm[i] : c->perm[2 * i], dst = c->npairs < 0 ? i : c->perm[2 * i + 1];
        hit = dst >= 0 && dst < r->gr->g->G && e->src_of[dst] == src;
    }
    if (hit) {
        r->src_of = e->src_of; /* (unchanged until every member finished this call) */
        r->dst = e->dst_of[me];
        r->pairs = np;
        *aux = e->aux_out;
    }
    spmd__sunlock(&e->lock);
    return hit;
}

static int spmd__group_behind(spmd__group *g, uint64_t need, uint64_t *lo);
/* Leave the pairs r checked in e for the call's other members, unless a
   member may still read what e holds. */
static void spmd__perm_keep(spmd__permc *e, spmd__group *g, uint64_t call, const spmd__call *c, const spmd_req *r,
                            uint64_t aux_in, uint64_t aux_out) {
    uint64_t lo;
    spmd__slock(&e->lock);
    if (e->call != call && spmd__group_behind(g, e->call, &lo) < 0) {
        memcpy(e->src_of, r->src_of, (size_t)g->G * 2 * sizeof(int)); /* src_of and then dst_seen */
        e->perm = c->perm;
        e->npairs = c->npairs;
        e->aux_in = aux_in;
        e->aux_out = aux_out;
        e->call = call;
    }
    spmd__sunlock(&e->lock);
}

/* ppermute, pshuffle: the pairs checked (each source and destination at
   most once) into r->src_of, each member's source, and r->dst. */
static spmd_status spmd__setup_perm(spmd_dev *d, const spmd__call *c, int G, int me, spmd_req *r, uint64_t *aux) {
    int i, np = c->npairs < 0 ? G : c->npairs;
    int *dst_seen;
    spmd__permc *e = spmd__perm_entries(d, r->gr->g);
    uint64_t call = r->gr->my->next + 1, aux_in = *aux;
    if (e) e += (call - 1) & (2 * (uint64_t)r->gr->g->D - 1);
    if (e && spmd__perm_take(e, call, c, me, r, aux)) return SPMD_OK;
    if (np < 0 || np > G || (np && !c->perm))
        return spmd__fail(d, c->perm || !np ? SPMD_ERR_PERM : SPMD_ERR_NULL,
                          "%s: %d pairs for a group of %d", c->name, np, G);
    if (r->src_cap < 2 * (size_t)G) { /* grows once per request of the device's pool */
        spmd__free(&d->mesh->alloc, r->src_buf);
        r->src_cap = 0;
        r->src_buf = (int *)spmd__alloc(&d->mesh->alloc, 2 * (size_t)G * sizeof(int));
        if (!r->src_buf) return spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory", c->name);
        r->src_cap = 2 * (size_t)G;
    }
    r->src_of = r->src_buf;
    dst_seen = r->src_of + G;
    for (i = 0; i < G; i++) r->src_of[i] = dst_seen[i] = -1;
    for (i = 0; i < np; i++) {
        int src = c->npairs < 0 ? c->perm[i] : c->perm[2 * i];
        int dst = c->npairs < 0 ? i : c->perm[2 * i + 1];
        if (src < 0 || src >= G || dst < 0 || dst >= G)
            return spmd__fail(d, SPMD_ERR_PERM, "%s: pair (%d, %d) is outside the group of %d", c->name, src, dst, G);
        if (r->src_of[dst] >= 0)
            return spmd__fail(d, SPMD_ERR_PERM, "%s: destination %d appears twice", c->name, dst);
        if (dst_seen[src] >= 0)
            return spmd__fail(d, SPMD_ERR_PERM, "%s: source %d appears twice%s", c->name, src,
                              c->npairs < 0 ? " (pshuffle needs a permutation)" : "");
        r->src_of[dst] = src;
        dst_seen[src] = dst;
        *aux = (*aux ^ (uint64_t)(src * 4099 + dst)) * 1099511628211u;
    }
    r->pairs = np;
    r->dst = dst_seen[me];
    if (e) spmd__perm_keep(e, r->gr->g, call, c, r, aux_in, *aux);
    return SPMD_OK;
}

/* Rooted kinds read or write on the root only: bcast's input, reduce's
   output (as MPI: a buffer that is not significant here has size 0). */
static void spmd__rooted_bytes(int kind, int me, int root, size_t *in_bytes, size_t *out_bytes) {
    if (kind == SPMD__KIND_BCAST && me != root) *in_bytes = 0;
    if (kind == SPMD__KIND_REDUCE && me != root) *out_bytes = 0;
}

/* Per kind: sizes, roots, permutations; everything a peer must agree on
   goes into aux. */
static spmd_status spmd__setup(spmd_dev *d, spmd__call *c, int G, int me, spmd_req *r, size_t *max_in,
                               size_t *out_bytes, uint64_t *aux) {
    size_t es = r->in_size, n = c->count;
    int rooted = spmd__rooted(c->kind);
    spmd_status s;
    *aux = (uint64_t)(c->root + 1) * SPMD__AUX_ROOT0;
    if (rooted && (c->root < 0 || c->root >= G))
        return spmd__fail(d, SPMD_ERR_ROOT, "%s: %s %d is outside the group of %d", c->name,
                          c->x ? "source" : "root", c->root, G);
    r->root = c->root;
    if (c->x && c->kind != SPMD__KIND_RAGGED && (s = spmd__setup_array(d, c, G, r, aux)) != SPMD_OK) return s;
    if (c->x) r->shape_hash = spmd__hash_shape((uint64_t)c->x->dtype, c->x->shape, c->x->rank);
    if (c->two_phase) *aux ^= 0x5053454e44ull; /* a psend meets only a psend */
    if (n * es > SIZE_MAX / 16 / SPMD_MAX_DEVICES && (size_t)G > SIZE_MAX / 16 / (n * es)) /* no div when small */
        return spmd__fail(d, SPMD_ERR_OVERFLOW, "%s: %zu elements times %d devices overflow", c->name, n, G);
    r->in_bytes = n * es;
    *max_in = n * es;
    *out_bytes = n * r->out_size;
    switch (c->kind) {
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_BCAST: spmd__rooted_bytes(c->kind, me, c->root, &r->in_bytes, out_bytes); break;
    case SPMD__KIND_PSUM_SCATTER: *out_bytes = r->outer * r->inner * es; break;
    case SPMD__KIND_ALLGATHER:
        if (!c->x) { r->outer = 1; r->inner = n; }
        *out_bytes = (size_t)G * n * es;
        break;
    case SPMD__KIND_GATHER:
        r->outer = 1;
        r->inner = n;
        *out_bytes = me == c->root ? (size_t)G * n * es : 0;
        break;
    case SPMD__KIND_SCATTER:
        r->in_bytes = me == c->root ? (size_t)G * n * es : 0;
        *max_in = (size_t)G * n * es;
        break;
    case SPMD__KIND_ALLTOALL:
        if (!c->x) { /* MPI alltoall: send and recv hold G blocks of count */
            r->blk.n = 0;
            r->blk.run = n * es;
            r->src_step = r->dst_step = (int64_t)(n * es);
            r->in_bytes = *max_in = *out_bytes = (size_t)G * n * es;
            *aux ^= (uint64_t)n;
        }
        break;
    case SPMD__KIND_RAGGED: s = spmd__setup_ragged(d, c, G, r, max_in, out_bytes, aux); break;
    case SPMD__KIND_PPERMUTE: s = spmd__setup_perm(d, c, G, me, r, aux); break;
    default: s = SPMD_OK; break;
    }
    if (s != SPMD_OK) return s;
    if (r->in_bytes > (size_t)INT64_MAX / 4 || *out_bytes > (size_t)INT64_MAX / 4)
        return spmd__fail(d, SPMD_ERR_OVERFLOW, "%s: the buffers are too large", c->name);
    return SPMD_OK;
}

/* Kinds that read other members' inputs after writing their own outputs
   would overwrite: in place, their input is copied first (split only; the
   eager path copies every input into the slot anyway). */
static int spmd__needs_copy(int kind) {
    return kind == SPMD__KIND_ALLTOALL || kind == SPMD__KIND_PPERMUTE || kind == SPMD__KIND_SCAN;
}
static int spmd__in_place_ok(int kind) {
    return kind != SPMD__KIND_PSUM_SCATTER && kind != SPMD__KIND_ALLGATHER && kind != SPMD__KIND_GATHER &&
           kind != SPMD__KIND_SCATTER && kind != SPMD__KIND_RAGGED;
}
/* Do the in bytes read from send and the out bytes written to recv
   overlap in a way the call cannot take? Anything but the same buffer of
   the same size, for a kind that may run in place, is refused. */
static int spmd__overlap_refused(int kind, const void *send, size_t in, const void *recv, size_t out) {
    const char *a = (const char *)send, *b = (const char *)recv;
    return a && b && in && out && a < b + out && b < a + in && !(a == b && in == out && spmd__in_place_ok(kind));
}

/* Keep a checked array call as the device's plan (spmd__plan). */
static void spmd__plan_keep(spmd_dev *d, const spmd__call *c, const spmd_req *r, size_t out_bytes) {
    spmd__plan *p = &d->plan;
    p->gr = r->gr;
    p->kind = c->kind;
    p->dim1 = c->dim1;
    p->dim2 = c->dim2;
    p->tiled = c->tiled;
    p->dt = c->x->dtype;
    p->xrank = c->x->rank;
    p->orank = c->out->rank;
    memcpy(p->xshape, c->x->shape, sizeof p->xshape);
    memcpy(p->oshape, c->out->shape, sizeof p->oshape);
    p->count = c->count;
    p->in_bytes = r->in_bytes;
    p->out_bytes = out_bytes;
    p->out_size = r->out_size;
    p->outer = r->outer;
    p->inner = r->inner;
    p->src_step = r->src_step;
    p->dst_step = r->dst_step;
    p->aux = r->sig.aux;
    p->shape_hash = r->shape_hash;
    p->blk = r->blk;
    if (c->kind == SPMD__KIND_PPERMUTE) {
        int G = r->gr->g->G;
        p->npairs = c->npairs;
        p->nperm = c->npairs < 0 ? G : 2 * c->npairs;
        if (p->nperm) memcpy(p->perm, c->perm, (size_t)p->nperm * sizeof(int));
        memcpy(p->src_of, r->src_of, 2 * (size_t)G * sizeof(int));
    }
}

/* The group a call names (the same axes text as the device's last call
   names the same group). A device that cannot name its group cannot tell
   its peers that it refuses the call, and its next call would pair with
   their current one: the mesh breaks, naming the refusal. */
static spmd_status spmd__coll_group(spmd_dev *d, const char *name, const char *axes, const spmd_opts *o,
                                    spmd__gref **out) {
    int ax[SPMD_MAX_AXES], nax = 0, plain = !o || (!o->groups && !o->group_size);
    char why[200];
    spmd_status s;
    if (plain && axes && d->last_gr && strcmp(axes, d->last_axes) == 0) {
        *out = d->last_gr;
        return SPMD_OK;
    }
    if ((s = spmd__parse_axes(d->mesh, axes, ax, &nax, why, sizeof why)) != SPMD_OK) {
        spmd__fail(d, s, "%s: %s", name, why);
    } else if ((s = spmd__check_groups(&d->mesh->alloc, o, spmd__axes_size(d->mesh, ax, nax), why, sizeof why)) != SPMD_OK) {
        spmd__fail(d, s, "%s over '%s': %s", name, axes, why);
    } else if ((s = spmd__gref_get(d, ax, nax, o, axes, out)) == SPMD_OK) {
        if (plain && strlen(axes) < sizeof d->last_axes) {
            d->last_gr = *out;
            strcpy(d->last_axes, axes);
        }
        return SPMD_OK;
    }
    {
        char msg[sizeof d->err + 128];
        snprintf(msg, sizeof msg, "device %d refused a call without a group it could name, so its peers could "
                 "not be told (its next call would pair with theirs): %s", d->id, d->err);
        spmd__break(d->mesh, s, d->id, msg);
    }
    return s;
}

/* A call refused for its buffers (NULL, overlapping) in a group across
   processes runs all the same, on zeroed stand-in buffers of its sizes:
   every exchange (direct, quick, split, Bruck) then moves what it always
   moves, its headers say the refusal (spmd__x_sig_out), and its peers fail
   the call (spmd__x_outcome) where they would have read its part. 1 if r
   stands in now (c's buffers are the stand-ins), 0 if it cannot. */
static int spmd__stand_in(spmd__call *c, spmd_req *r, size_t out_bytes, spmd_status s) {
    size_t in = r->in_bytes - r->meta_bytes;
    unsigned char *b;
    if (!r->gr->g->span || c->two_phase || in > SIZE_MAX - out_bytes - 1) return 0;
    b = (unsigned char *)spmd__alloc(&r->dev->mesh->alloc, in + out_bytes + 1);
    if (!b) return 0;
    memset(b, 0, in + out_bytes + 1);
    r->temp = b; /* (freed with the request) */
    c->send = b;
    c->recv = b + in;
    r->refusing = s;
    return 1;
}

/* A call's arguments, checked against its group, and its request made
   (*rp): nothing is posted yet. On failure nothing is left behind. */
static spmd_status spmd__coll_args(spmd_dev *d, spmd__call *c, spmd__gref *gr, const spmd_opts *o, spmd_req **out,
                                   spmd_req **rp, size_t *max_in, size_t *out_bytes) {
    spmd_mesh *m = d->mesh;
    spmd_status s;
    size_t numel = 0;
    uint64_t aux = 0;
    spmd_req *r;
    spmd__kernel kern;
    const char *name = c->name;
    int plain = !o || (!o->groups && !o->group_size), rule;
    if (c->x || c->out) {
        size_t on = 0;
        if ((s = spmd__check_view(d, name, "x", c->x, &numel, 1)) != SPMD_OK) return s;
        if ((s = spmd__check_view(d, name, "out", c->out, &on, 1)) != SPMD_OK) return s;
        c->send = c->x->data;
        c->recv = c->out->data;
        c->count = numel;
        c->dt = c->x->dtype;
    }
    if ((rule = spmd__rules(m, c->kind, c->dt, c->op, c->count, o, &kern)) != 0) return spmd__rule_fail(d, c, rule, o);
    if (c->one_axis && (gr->naxes != 1 || !plain))
        return spmd__fail(d, gr->naxes != 1 ? SPMD_ERR_INVALID : SPMD_ERR_GROUPS,
                          "%s takes exactly one axis and no axis_index_groups, as in JAX (got \"%s\"%s)", name,
                          gr->text, gr->naxes == 1 ? " with groups" : "");
    r = spmd__req_new(d);
    if (!r) return spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory for a request", name);
    spmd__req_call(r, gr, c->kind, c->dt, c->op, c->count, kern, o);
    if ((s = spmd__setup(d, c, gr->g->G, gr->me, r, max_in, out_bytes, &aux)) != SPMD_OK) {
        spmd__req_release(r);
        return s;
    }
    if ((r->in_bytes > r->meta_bytes && !c->send) || (*out_bytes && !c->recv))
        s = spmd__fail(d, SPMD_ERR_NULL, "%s: %s is NULL", name,
                       c->x ? (!c->send ? "x.data" : "out.data") : !c->send ? "send buffer" : "recv buffer");
    /* only what this device reads and writes: a buffer that is not
       significant here (bcast's and scatter's send off the root, gather's
       and reduce's recv) is neither checked nor touched, as in MPI (its
       size is 0 here) */
    else if (spmd__overlap_refused(c->kind, c->send, r->in_bytes - r->meta_bytes, c->recv, *out_bytes))
        s = spmd__fail(d, SPMD_ERR_OVERLAP, "%s: send and recv overlap without being the same buffer%s", name,
                       c->send == c->recv ? " (the result has another size, so it cannot be in place)" : "");
    if (s != SPMD_OK && !spmd__stand_in(c, r, *out_bytes, s)) {
        spmd__req_release(r);
        return s;
    }
    r->send = c->send;
    r->recv = c->two_phase ? NULL : c->recv;
    r->two_phase = c->two_phase;
    r->user = out != NULL && !r->refusing;
    r->sig.aux = aux;
    *rp = r;
    return SPMD_OK;
}

/* The thread engine's split layout of r: units, tasks, and the copy of an
   in-place input that other members read after it is overwritten. */
static spmd_status spmd__split_plan(spmd_req *r, const spmd__call *c, size_t max_in) {
    int G = r->gr->g->G;
    size_t len, tb, te;
    switch (c->kind) {
    case SPMD__KIND_ALLREDUCE: case SPMD__KIND_REDUCE: case SPMD__KIND_BCAST: r->units = 1; break;
    case SPMD__KIND_ALLTOALL: /* a task per chunk when chunks are large; a tile of receivers when
                                 they are a few bytes (a line of each source read once for all of them:
                                 spmd__chunks_tile); else per receiver (a task costs a look at every
                                 member's pointers: O(G)) */
        r->units = (uint64_t)G * (uint64_t)G <= SPMD__MAX_TASKS && max_in / (size_t)G >= SPMD__CHUNK_TASK
                       ? (uint32_t)(G * G) : (uint32_t)G;
        if (r->units == (uint32_t)G && G >= 64 && !r->gr->g->span && r->blk.n == 0 && r->blk.run <= 16) {
            r->a2a_rows = (uint32_t)(1024 / r->blk.run); /* (a quarter page of each source) */
            r->units = ((uint32_t)G + r->a2a_rows - 1) / r->a2a_rows;
        }
        break;
    default: r->units = (uint32_t)G; break;
    }
    len = spmd__unit_len(r);
    tb = max_in / (4u * (size_t)G);
    if (tb < 16384) tb = 16384;
    if (tb > ((size_t)4 << 20)) tb = (size_t)4 << 20;
    te = (tb / r->in_size + 63) / 64 * 64;
    if (c->kind == SPMD__KIND_ALLTOALL || c->kind == SPMD__KIND_RAGGED) te = 1;
    while (len && (len + te - 1) / te * r->units > SPMD__MAX_TASKS) te *= 2;
    r->task_elems = te;
    r->pieces = len ? (uint32_t)((len + te - 1) / te) : 1;
    r->ntasks = r->units * r->pieces;
    if (spmd__needs_copy(c->kind) && r->send == c->recv && r->in_bytes && !c->two_phase) {
        r->temp = spmd__alloc(&r->dev->mesh->alloc, r->in_bytes);
        if (!r->temp) return spmd__fail(r->dev, SPMD_ERR_NOMEM, "%s: out of memory for an in-place copy", c->name);
        memcpy(r->temp, c->send, r->in_bytes);
        r->send = r->temp;
    }
    return SPMD_OK;
}

/* A call refused after its group is known keeps its place in the group's
   sequence, so that its peers fail it too (SPMD_ERR_REFUSED, naming this
   device and its reason: spmd__refused) and every member's next call
   pairs with the next one. The refusal is a request of its own kind,
   posted like any other once its slot is free, carrying the status and
   the reason's text, and finished at once (>>thread backend:
   spmd__refusal_post). Across processes a refusal breaks the mesh, naming
   it. Returns s, the device's own status (or why the refusal could not be
   posted). */
static spmd_status spmd__refuse(spmd_dev *d, const spmd__call *c, spmd__gref *gr, const spmd_opts *o,
                                spmd_status s) {
    spmd_mesh *m = d->mesh;
    spmd_req *r;
    spmd_status ps;
    if (gr->g->G == 1) return s; /* nobody to tell */
    if (gr->g->span || !(r = spmd__req_new(d))) {
        char msg[sizeof d->err + 256];
        snprintf(msg, sizeof msg, "device %d refused %s over '%.64s' (operation #%llu of its group)%s: %s", d->id,
                 c->name, gr->text, (unsigned long long)gr->my->next,
                 gr->g->span ? "" : ", and had no memory to tell its peers", d->err);
        spmd__break(m, s, d->id, msg);
        return s;
    }
    r->gr = gr;
    r->sig.kind = SPMD__KIND_REFUSED;
    r->sig.op = (uint8_t)c->kind;
    r->sig.algo = SPMD__ALG_EAGER;
    r->sig.axes_hash = gr->axes_hash;
    r->sig.count = (uint64_t)s;
    r->in_size = r->out_size = 1;
    r->send = d->err; /* its text, as much as the entry holds */
    r->in_bytes = strlen(d->err) + 1 < gr->g->eager ? strlen(d->err) + 1 : gr->g->eager;
    r->timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : m->timeout_ms;
    r->gseq = gr->my->next;
    if (spmd__rec_begin(r) != 0) { /* skipped or lost by the fault plan: nothing joined */
        r->sig.algo = SPMD__ALG_LOCAL;
        spmd__finish(r, s);
    } else {
        r->gseq = gr->my->next++;
        r->global = d->global++;
        r->state = SPMD__R_POST;
        m->vt->progress(r);
        if (r->state != SPMD__R_DONE) spmd__watch(r);
    }
    ps = r->state == SPMD__R_DONE ? r->status : spmd__block(r);
    spmd__req_release(r);
    return ps == s ? s : ps; /* (a deadline or a break while it waited for its slot) */
}

/* A refusal found before the call is described (a NULL request pointer
   or array, a negative pair count): refused in its group all the same. */
static spmd_status spmd__refuse_early(spmd_dev *d, int kind, const char *name, const char *axes, const spmd_opts *o,
                                      spmd_status s, const char *what) {
    spmd__call c;
    spmd__gref *gr;
    spmd_status t;
    if (!d) return SPMD_ERR_NULL;
    d->unhandled = SPMD_OK;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.name = name;
    if ((t = spmd__coll_group(d, name, axes, o, &gr)) != SPMD_OK) return t;
    spmd__fail(d, s, "%s: %s", name, what);
    return d->lost || SPMD__LD_ACQ(&d->mesh->broken) ? s : spmd__refuse(d, &c, gr, o, s);
}
static spmd_status spmd__refuse_start(spmd_dev *d, int kind, const char *name, const char *axes, const spmd_opts *o) {
    return spmd__refuse_early(d, kind, name, axes, o, SPMD_ERR_NULL, "req is NULL");
}

/* Everything about a call is checked before a sequence number is taken or
   a byte moves: its group first, then its arguments; a call refused once
   its group is known still takes its place (spmd__refuse). Then the
   request is posted. */
static spmd_status spmd__coll_start(spmd_dev *d, spmd__call *c, const char *axes, const spmd_opts *o,
                                    spmd_req **out) {
    spmd_mesh *m;
    spmd_status s;
    int G;
    size_t max_in = 0, out_bytes = 0;
    spmd__gref *gr = NULL;
    spmd_req *r = NULL;
    spmd_algo algo;
    if (out) *out = NULL;
    if (!d) return SPMD_ERR_NULL;
    d->unhandled = SPMD_OK; /* (as spmd__check_dev: an axes error is reported before the mesh's state) */
    if ((s = spmd__coll_group(d, c->name, axes, o, &gr)) != SPMD_OK) return s;
    m = d->mesh;
    /* the arguments before the mesh's state, so that every device making
       the same bad call gets the same status */
    if ((s = spmd__coll_args(d, c, gr, o, out, &r, &max_in, &out_bytes)) != SPMD_OK)
        return d->lost || SPMD__LD_ACQ(&m->broken) ? s : spmd__refuse(d, c, gr, o, s);
    if ((s = spmd__check_dev(d)) != SPMD_OK) { /* named: "psum(f32 x 4) over 'i': mesh is broken: ..." */
        char what[160], why[sizeof d->err];
        spmd__req_what(r, what, sizeof what);
        memcpy(why, d->err, sizeof why);
        snprintf(d->err, sizeof d->err, "%s over '%.64s': %.250s", what, gr->text, why);
        spmd__req_release(r);
        return s;
    }
    G = gr->g->G;
    if (!out && c->x && gr == d->last_gr && (!o || (!o->groups && !o->group_size)) && !c->two_phase && !r->refusing &&
        (c->kind == SPMD__KIND_ALLGATHER || c->kind == SPMD__KIND_PSUM_SCATTER || c->kind == SPMD__KIND_ALLTOALL ||
         (c->kind == SPMD__KIND_PPERMUTE && G <= SPMD__PLAN_G)))
        spmd__plan_keep(d, c, r, out_bytes);
    algo = o && o->algo ? o->algo : m->forced_algo;
    if (G > 1 && !gr->g->span) {
        /* eager when the largest input fits the slot, unless split is asked for */
        int fits = max_in <= gr->g->eager;
        r->sig.algo = !fits || (algo == SPMD_ALGO_SPLIT && max_in) ? SPMD__ALG_SPLIT : SPMD__ALG_EAGER;
        r->eager_asked = algo == SPMD_ALGO_EAGER && !fits;
        if (r->sig.algo == SPMD__ALG_SPLIT && (s = spmd__split_plan(r, c, max_in)) != SPMD_OK) {
            spmd__req_release(r);
            return spmd__refuse(d, c, gr, o, s);
        }
    }
    if (spmd__req_begin(r)) {
        /* skipped or lost by the fault plan: done */
    } else if (G == 1 && c->two_phase) {
        r->sig.algo = SPMD__ALG_LOCAL; /* precv does the local copy */
        r->state = SPMD__R_POST;
    } else if (G == 1) {
        r->sig.algo = SPMD__ALG_LOCAL;
        spmd__eager(r, 1);
        spmd__finish(r, SPMD_OK); /* done at once (returns before the group's counters) */
    } else {
        if (gr->g->span) { /* members in other processes: the exchange path (libfabric) */
            r->x = 1;
            m->vt->x_start(r, algo, !out || r->refusing);
        }
        spmd__req_post(r);
    }
    if (out && !r->refusing) {
        *out = r;
        return SPMD_OK;
    }
    if (r->state != SPMD__R_DONE) spmd__watch(r); /* (a stand-in: blocking, whatever the form) */
    s = r->state == SPMD__R_DONE ? r->status : spmd__block(r);
    spmd__req_release(r);
    return s;
}

/* The common case made cheap: a blocking psum (allreduce), barrier, bcast
   or reduce -- or an array call (arr) that repeats the device's plan
   (spmd__plan) -- without axis_index_groups, over the same axes text as the
   device's previous call, with a group of two or more, small enough for the
   eager path (across processes: for the header's inline bytes; 8 processes
   and more may then take the Bruck exchange, as they would from
   spmd__coll_start), check mode off. It is the general path with work
   skipped, not rules copied: the same rules (spmd__rules), the same request
   set-up (spmd__req_clear, spmd__req_call), the same begin, path choice and
   post (spmd__req_begin, m->vt->x_start, spmd__req_post), on the device's
   own quick request, blocking the same way. Anything else, errors
   included, returns -1 and goes the general way (which reports them). */

/* A buffer call (psum, barrier, bcast, reduce): its rules and sizes, as
   spmd__setup has them for these kinds. 0: not for the quick path. */
static int spmd__quick_flat(spmd_req *r, spmd__gref *gr, int kind, const void *send, void *recv, size_t count,
                            spmd_dtype dt, spmd_op op, int root, const spmd_opts *o, size_t most) {
    const unsigned char *a = (const unsigned char *)send, *b = (const unsigned char *)recv;
    spmd__kernel kern;
    size_t in_bytes, out_bytes;
    if (spmd__rules(r->dev->mesh, kind, dt, op, count, o, &kern) || count > most ||
        (spmd__reduces(kind) && (op == SPMD_OP_ARGMAX || op == SPMD_OP_ARGMIN)) ||
        (spmd__rooted(kind) && (root < 0 || root >= gr->g->G)))
        return 0;
    spmd__req_call(r, gr, kind, dt, op, count, kern, o);
    in_bytes = kind == SPMD__KIND_BARRIER ? 0 : count * r->in_size;
    out_bytes = kind == SPMD__KIND_BARRIER ? 0 : count * r->out_size;
    if (in_bytes > most) return 0;
    spmd__rooted_bytes(kind, gr->me, root, &in_bytes, &out_bytes);
    if ((in_bytes && !a) || (out_bytes && !b) || spmd__overlap_refused(kind, a, in_bytes, b, out_bytes)) return 0;
    r->send = send;
    r->recv = recv;
    r->in_bytes = in_bytes;
    r->root = root;
    r->sig.aux = (uint64_t)(root + 1) * SPMD__AUX_ROOT0;
    return 1;
}

/* An array call that repeats the device's plan (what spmd__setup computed
   for it the last time). 0: not the same call, or not for the quick path. */
static int spmd__quick_plan(spmd_req *r, spmd__gref *gr, int kind, spmd_op op, const spmd__call *arr,
                            const spmd_opts *o, size_t most) {
    const spmd__plan *p = &r->dev->plan;
    const spmd_array *x = arr->x, *out = arr->out;
    const unsigned char *a = (const unsigned char *)x->data, *b = (const unsigned char *)out->data;
    spmd__kernel kern;
    if (p->gr != gr || p->kind != kind || x->dtype != p->dt || out->dtype != p->dt || x->rank != p->xrank ||
        out->rank != p->orank || arr->dim1 != p->dim1 || arr->dim2 != p->dim2 || arr->tiled != p->tiled ||
        memcmp(x->shape, p->xshape, (size_t)p->xrank * sizeof(int64_t)) != 0 ||
        memcmp(out->shape, p->oshape, (size_t)p->orank * sizeof(int64_t)) != 0 || p->in_bytes > most)
        return 0;
    if (kind == SPMD__KIND_PPERMUTE &&
        (arr->npairs != p->npairs ||
         (p->nperm && (!arr->perm || memcmp(arr->perm, p->perm, (size_t)p->nperm * sizeof(int)) != 0))))
        return 0;
    if ((p->in_bytes && !a) || (p->out_bytes && !b) || spmd__overlap_refused(kind, a, p->in_bytes, b, p->out_bytes) ||
        spmd__rules(r->dev->mesh, kind, p->dt, op, p->count, o, &kern))
        return 0;
    spmd__req_call(r, gr, kind, p->dt, op, p->count, kern, o);
    r->send = x->data;
    r->recv = out->data;
    r->in_bytes = p->in_bytes;
    r->root = 0;
    r->sig.aux = p->aux;
    r->shape_hash = p->shape_hash;
    r->outer = p->outer;
    r->inner = p->inner;
    if (kind == SPMD__KIND_ALLTOALL) {
        r->src_step = p->src_step;
        r->dst_step = p->dst_step;
        r->blk = p->blk;
    }
    if (kind == SPMD__KIND_PPERMUTE) { /* (read only while the call runs) */
        r->src_of = r->dev->plan.src_of;
        r->pairs = p->npairs < 0 ? gr->g->G : p->npairs;
        r->dst = SPMD__NEED_ALL; /* (a group of at most SPMD__PLAN_G: not kept) */
    }
    return 1;
}

static int spmd__quick(spmd_dev *d, int kind, const void *send, void *recv, size_t count, spmd_dtype dt,
                       spmd_op op, int root, const char *axes, const spmd_opts *o, const spmd__call *arr) {
    spmd__gref *gr;
    spmd_mesh *m;
    spmd_req *r;
    spmd_algo algo;
    spmd_status s;
    size_t most;
    if (!d || !axes || !(gr = d->last_gr) || strcmp(axes, d->last_axes) != 0) return -1;
    m = d->mesh;
    if (m->check || gr->g->G < 2 || SPMD__LD_ACQ(&m->broken) || (o && (o->groups || o->group_size))) return -1;
    algo = o && o->algo ? o->algo : m->forced_algo;
    if (algo == SPMD_ALGO_SPLIT && kind != SPMD__KIND_BARRIER) return -1;
    most = gr->g->span ? m->vt->x_inline(m, gr->g) : gr->g->eager;
    r = &d->quick; /* (never in flight here: the device's calls on it are blocking) */
    spmd__req_clear(r);
    r->dev = d;
    if (!(arr ? spmd__quick_plan(r, gr, kind, op, arr, o, most)
              : spmd__quick_flat(r, gr, kind, send, recv, count, dt, op, root, o, most)))
        return -1;
    d->unhandled = SPMD_OK; /* another call (as spmd__check_dev) */
    spmd__req_link(d, r);
    r->sig.algo = SPMD__ALG_EAGER;
    if (gr->g->span) { /* the exchange path: the same choice as spmd__coll_start's */
        r->x = 1;
        m->vt->x_start(r, algo, 1);
    }
    if (!spmd__req_begin(r)) {
        spmd__req_post(r);
        if (!r->x && !d->fib) spmd__watch(r); /* (threads only) */
    }
    s = r->state == SPMD__R_DONE ? r->status : spmd__block(r);
    /* own the line of the next post before it is written (off the critical path) */
    if (!r->x) SPMD__PREFETCH_W(spmd__entry_at(gr->g, gr->my->next, gr->me));
    spmd__req_drop(r);
    return (int)s;
}

/* The call described whole, for spmd__coll_start: a frame of its own, so
   that the quick path's callers keep a small one (a parked fiber's frames
   are what the scheduler warms: spmd_allreduce's was 288 bytes). */
static SPMD__NOINLINE spmd_status spmd__reduce_call(spmd_dev *d, int kind, const void *send, void *recv,
                                                   size_t count, spmd_dtype dt, spmd_op op, const char *axes,
                                                   const spmd_opts *o, int one_axis, spmd_req **out) {
    spmd__call c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.name = kind == SPMD__KIND_BARRIER ? "barrier" : (unsigned)op < SPMD_OP_COUNT ? spmd__op_jax[op] : "allreduce";
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.dt = dt;
    c.op = op;
    c.one_axis = one_axis;
    return spmd__coll_start(d, &c, axes, o, out);
}

static spmd_status spmd__reduce_start(spmd_dev *d, int kind, const void *send, void *recv, size_t count,
                                      spmd_dtype dt, spmd_op op, const char *axes, const spmd_opts *o,
                                      int one_axis, spmd_req **out) {
    if (!out && !one_axis) {
        int q = spmd__quick(d, kind, send, recv, count, dt, op, 0, axes, o, NULL);
        if (q >= 0) return (spmd_status)q;
    }
    return spmd__reduce_call(d, kind, send, recv, count, dt, op, axes, o, one_axis, out);
}

static spmd_status spmd__req_check(spmd_req *r) {
    if (!r) return SPMD_ERR_NULL;
    if (r->magic != SPMD__REQ_MAGIC || !r->user) return SPMD_ERR_STATE;
    if (r->two_phase && !r->recv_ready)
        return spmd__fail(r->dev, SPMD_ERR_STATE, "a psend token is finished by spmd_precv, not waited");
    return SPMD_OK;
}

// >>thread backend
/* Each group has a ring of D slots; operation s of the group lives in slot
   s % D, where every member posts an entry: a signature and either its input
   (eager) or its buffer pointers (split). A member may post operation s only
   when every member has finished operation s - D. Eager: every member
   reduces the inline copies itself, so nothing else needs waiting for.
   Split: the element range is cut into tasks that any member claims (so a
   member busy computing does not stall the others); a task reduces its range
   from all members' send buffers and writes the result into every member's
   recv buffer; the operation is done when every task is.
   The engine's progress function (spmd__thread_progress) and its table
   (spmd__thread_vt, the backend of one process) close the section.
   Requests (above) post here through m->vt->progress; it calls the
   kernels, groups, check mode and the mailboxes of >>point to point. */

/* Whose entry an eager member reads: every member (-2), nobody (-1), or one
   member. A bcast or scatter reads the root's; the root, and the members of
   a reduce or gather other than the root, read nobody's, and a ppermute
   reads its source's. Such a member finishes without waiting for the rest,
   as MPI lets a bcast root return at once; the slot ring still keeps it
   from overrunning the slowest member by more than D operations. Check
   mode waits for everyone, so that every member sees a mismatch. */
static int spmd__eager_needs(const spmd_req *r) {
    int me = r->gr->me;
    if (r->sig.algo != SPMD__ALG_EAGER || r->two_phase || r->dev->mesh->check) return SPMD__NEED_ALL;
    switch (r->sig.kind) {
    case SPMD__KIND_BCAST:
    case SPMD__KIND_SCATTER: return me == r->root ? -1 : r->root;
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_GATHER: return me == r->root ? SPMD__NEED_ALL : -1;
    case SPMD__KIND_PPERMUTE: return r->src_of[me];
    default: return SPMD__NEED_ALL;
    }
}

/* Whom an eager member's finish lets on, besides the members waiting for a
   slot: the one member that reads its entry, nobody (-1), or anyone
   (SPMD__NEED_ALL), as its need (spmd__eager_needs, set before the post)
   seen from the other side. In a group of more than SPMD__PLAN_G members
   (smaller ones may run a quick ppermute, which keeps no dst) a finish then
   wakes one device instead of scanning all G (a ppermute of 4,096 devices
   was O(G^2)). */
static int spmd__readers(const spmd_req *r) {
    int me = r->gr->me;
    if (r->gr->g->G <= SPMD__PLAN_G || r->need == SPMD__NEED_ALL) return SPMD__NEED_ALL;
    switch (r->sig.kind) {
    case SPMD__KIND_BCAST:
    case SPMD__KIND_SCATTER: return me == r->root ? SPMD__NEED_ALL : -1;
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_GATHER: return me == r->root ? -1 : r->root;
    case SPMD__KIND_PPERMUTE: return r->dst;
    default: return SPMD__NEED_ALL;
    }
}

/* Wake the members asleep on g (their bits: a word per 64 members, not a
   line per member; across processes only this one's members sleep here),
   the fibers of a word under one taking of their home queue's lock. */
static void spmd__wake_group(spmd_mesh *m, spmd__group *g, int self) {
    int w, nw = (g->G + 63) / 64;
    for (w = 0; w < nw; w++) {
        uint64_t bits = SPMD__LD_SC(&g->sleepers[w]), b, rung = 0;
        spmd_dev *ring[64];
        int n = 0;
        /* (a large group's sleepers are not in cache: their lines load together) */
        for (b = bits; b; b &= b - 1) SPMD__PREFETCH_W(m->devs[g->members[w * 64 + __builtin_ctzll(b)]]);
        while (bits) {
            int k = w * 64 + __builtin_ctzll(bits);
            spmd_dev *p = m->devs[g->members[k]];
            bits &= bits - 1;
            if (k == self || !SPMD__LD_SC(&p->sleeping)) continue;
            if (!p->fib) {
                spmd__wake_dev(p);
                continue;
            }
            SPMD__FADD(&p->bell, 1u); /* (as spmd__wake_dev) */
            ring[n++] = p;
            rung |= (uint64_t)1 << (k & 63);
        }
        if (!n) continue;
        /* their bits here go in one stroke; the ring leaves the rest of each
           device alone (its requests, on another carrier's cache) */
        SPMD__FAND(&g->sleepers[w], ~rung);
        spmd__fiber_ring(ring, n, 1);
    }
}

/* Wake member k of r's group if it sleeps (after the caller's fence). */
static void spmd__wake_member(const spmd_req *r, int k) {
    spmd_dev *p = r->dev->mesh->devs[r->gr->g->members[k]];
    if (SPMD__LD_SC(&p->sleeping)) spmd__wake_dev(p);
}

static void spmd__finish(spmd_req *r, spmd_status s) {
    spmd__gref *gr = r->gr;
    spmd__mine *my = gr->my;
    int k;
    if (r->fault_die) spmd__fault_die(r, 2); /* >>faults: kind=lose:done */
    spmd__rec_end(r, s);
    r->status = s;
    r->state = SPMD__R_DONE;
    if (r->sig.algo == SPMD__ALG_LOCAL || r->p2p) return;
    my->fin[SPMD__SLOT(gr->g, r->gseq)] = 1;
    while (my->left < my->next && my->fin[SPMD__SLOT(gr->g, my->left)]) {
        my->fin[SPMD__SLOT(gr->g, my->left)] = 0;
        my->left++;
    }
    SPMD__ST_REL(&gr->g->mem[gr->me].left, my->left);
    if (gr->g->span) return; /* across processes the exchange wakes whom it lets on (spmd__x_progress) */
    SPMD__FENCE(&r->dev->fence_word); /* the post and the stores above before the sleepers are read */
    if (SPMD__LD_SC(&gr->g->mem[gr->me].waiters)) { /* members waiting for a slot, this one behind */
        spmd__wake_group(r->dev->mesh, gr->g, gr->me);
        return;
    }
    if (r->comb == 1) return; /* its peers wait for the combiner, not for it */
    if (!r->comb && (k = spmd__readers(r)) != SPMD__NEED_ALL) {
        if (k >= 0) spmd__wake_member(r, k);
        return;
    }
    spmd__wake_group(r->dev->mesh, gr->g, gr->me);
}

/* Re-tag a shared word for operation gseq (low bits cleared) unless a peer did. */
static void spmd__retag(uint64_t *w, uint64_t gseq, int shift) {
    uint64_t cur = SPMD__LD_ACQ(w);
    while ((cur >> shift) != gseq) {
        if (SPMD__CAS(w, &cur, gseq << shift)) break;
    }
}

/* The first member of g still below need operations finished, or -1 when
   none is (*lo then a lower bound of every member's count). Another
   member's last scan may do (g->minleft: left only grows, so any scan's
   minimum is a lower bound); else the scan starts where one for this need
   or a later one stopped (g->scan: the members before are done), so that
   members waiting one after another scan a large group once in all, not
   once each. */
static int spmd__group_behind(spmd__group *g, uint64_t need, uint64_t *lo) {
    uint64_t sc;
    int k;
    if ((*lo = SPMD__LD_ACQ(&g->minleft)) >= need) return -1;
    sc = SPMD__LD_ACQ(&g->scan);
    k = sc >> 24 >= need ? (int)(sc & 0xffffff) : 0;
    *lo = k ? sc >> 24 : UINT64_MAX; /* (a bound for those before) */
    for (; k < g->G; k++) {
        uint64_t v = SPMD__LD_ACQ(&g->mem[k].left);
        if (v < need) {
            uint64_t to = need << 24 | (uint64_t)k;
            while ((sc >> 24 < need || (sc >> 24 == need && (sc & 0xffffff) < (uint64_t)k)) &&
                   !SPMD__CAS(&g->scan, &sc, to)) {
            }
            return k;
        }
        if (v < *lo) *lo = v;
    }
    if (*lo > SPMD__LD_ACQ(&g->minleft)) SPMD__ST_REL(&g->minleft, *lo); /* a race may store a lower one: still a bound */
    return -1;
}

/* r's slot is free once every member finished the group's operation D
   back: -1, or a member still behind. */
static int spmd__slot_behind(spmd_req *r) {
    spmd__mine *my = r->gr->my;
    uint64_t need, lo;
    int k;
    if (r->gseq < (uint64_t)r->gr->g->D) return -1;
    need = r->gseq - (uint64_t)r->gr->g->D + 1;
    if (my->minleft >= need) return -1;
    if ((k = spmd__group_behind(r->gr->g, need, &lo)) < 0) my->minleft = lo;
    return k;
}

/* A device that found the slot ring full waits, once its slot is free, a
   few polls more for the slowest member to be half a ring further: then
   its next D/2 calls post without a look at the others, instead of
   waiting a round trip for each slot (a bcast root running ahead of its
   readers: 8 B between 2 threads 0.22 -> 0.18 us). Bounded (the free slot
   is taken after 64 polls), so that a member that needs this device's next
   calls to go on is never waited for; only in a blocking call (a _start's
   request posts when its slot is free: its caller may be away long), not
   for a fiber (nothing would wake it) or on a crowded machine. 1: poll
   again. */
static int spmd__crowded(const spmd_mesh *m); /* >>waiting */
static int spmd__slot_more(spmd_req *r) {
    uint64_t lo, need = r->gseq - (uint64_t)r->gr->g->D / 2; /* (gseq >= D: it waited) */
    if (r->slotmore >= 64 || r->user || r->dev->fib || spmd__crowded(r->dev->mesh) || r->gr->my->minleft >= need ||
        spmd__group_behind(r->gr->g, need, &lo) < 0)
        return 0;
    r->slotmore++;
    return 1;
}

/* Watch member k (-1: none) for r's slot: counted in its waiters, so that
   its next finish wakes r (a full barrier before r looks again: see
   spmd__finish). */
static void spmd__slot_watch(spmd_req *r, int k) {
    spmd__member *mem = r->gr->g->mem;
    if (r->slotwait) SPMD__FADD(&mem[r->slotwait - 1].waiters, (uint32_t)-1);
    if (k >= 0) SPMD__FADD(&mem[k].waiters, 1u);
    r->slotwait = k + 1;
}

/* psend/precv: the recv pointer and its own sequence word, after the send,
   recv and meta pointers in the entry's data. */
#define SPMD__RSEQ_AT (3 * sizeof(void *))
static void spmd__publish_recv(spmd_req *r) {
    unsigned char *data = (unsigned char *)spmd__entry_at(r->gr->g, r->gseq, r->gr->me) + SPMD__ENTRY_HDR;
    memcpy(data + sizeof(void *), &r->recv, sizeof r->recv);
    SPMD__ST_SC((uint64_t *)(void *)(data + SPMD__RSEQ_AT), r->gseq + 1);
    spmd__wake_group(r->dev->mesh, r->gr->g, r->gr->me);
}

static int spmd__all_published(spmd_req *r) {
    spmd__group *g = r->gr->g;
    while (r->nseen2 < g->G) {
        unsigned char *data = (unsigned char *)spmd__entry_at(g, r->gseq, r->nseen2) + SPMD__ENTRY_HDR;
        if (SPMD__LD_ACQ((uint64_t *)(void *)(data + SPMD__RSEQ_AT)) != r->gseq + 1) return 0;
        r->nseen2++;
    }
    return 1;
}

static void spmd__post(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd__entry *e = spmd__entry_at(g, r->gseq, r->gr->me);
    unsigned char *data = (unsigned char *)e + SPMD__ENTRY_HDR;
    if (r->dev->mesh->check) spmd__clog_write(r->dev, r);
    e->sig = r->sig;
    if (r->sig.algo == SPMD__ALG_EAGER) {
        if (r->meta_bytes) memcpy(data, r->meta, r->meta_bytes); /* ragged: offsets and sizes first */
        if (r->in_bytes > r->meta_bytes) memcpy(data + r->meta_bytes, r->send, r->in_bytes - r->meta_bytes);
    } else {
        spmd__shared *sh = &g->shared[SPMD__SLOT(g, r->gseq)];
        memcpy(data, &r->send, sizeof r->send);
        memcpy(data + sizeof(void *), &r->recv, sizeof r->recv);
        memcpy(data + 2 * sizeof(void *), &r->meta, sizeof r->meta);
        spmd__retag(&sh->state, r->gseq, SPMD__S_SHIFT);
        spmd__retag(&sh->claim, r->gseq, 24);
        spmd__retag(&sh->done, r->gseq, 24);
    }
    if (r->sig.algo == SPMD__ALG_EAGER && !r->two_phase) {
        /* No wake-up here: a sleeper waits for the whole group, so the last
           member to post is the one that matters, and it finds everyone
           arrived and finishes at once; spmd__finish wakes the sleepers.
           Without a fence here, the post costs no round trip. But a
           ppermute's reader, which its finish alone wakes in a large group
           (spmd__readers), may sleep already while this member waits for
           its own source: woken now. */
        int k;
        SPMD__ST_REL(&e->seq, r->gseq + 1);
        if (r->sig.kind == SPMD__KIND_PPERMUTE && (k = spmd__readers(r)) >= 0) {
            SPMD__FENCE(&r->dev->fence_word);
            spmd__wake_member(r, k);
        }
        return;
    }
    SPMD__ST_SC(&e->seq, r->gseq + 1);
    if (!r->counted) spmd__wake_group(r->dev->mesh, g, r->gr->me); /* (counted: the checker's verdict wakes) */
    if (r->two_phase && r->recv_ready && r->sig.algo == SPMD__ALG_SPLIT) spmd__publish_recv(r);
}

static int spmd__all_arrived(spmd_req *r) {
    spmd__group *g = r->gr->g;
    while (r->nseen < g->G) {
        if (SPMD__LD_ACQ(&spmd__entry_at(g, r->gseq, r->nseen)->seq) != r->gseq + 1) return 0;
        r->nseen++;
    }
    return 1;
}

static void spmd__mismatch(spmd_req *r, int k, const spmd__sig *other, const char *other_axes,
                           const char *other_site) {
    spmd_dev *d = r->dev;
    char a[96], b[96], sites[SPMD__SITES_LEN];
    spmd__sig_text(&r->sig, a, sizeof a);
    spmd__sig_text(other, b, sizeof b);
    spmd__fail(d, SPMD_ERR_MISMATCH,
               "device %d called %s over '%s' but device %d called %s over '%s' "
               "(operation #%llu of this device%s)",
               d->id, a, r->gr->text, k, b, other_axes, (unsigned long long)r->global,
               spmd__site_clause(r, k, other_site, sites, sizeof sites));
    spmd__break(d->mesh, SPMD_ERR_MISMATCH, d->id, d->err);
    spmd__finish(r, SPMD_ERR_MISMATCH);
}

/* Check mode: every member's contribution as the group reads it (eager:
   the copy in its entry; split: the buffer its entry points to) against the
   checksum it logged at its post from the buffer its caller gave
   (spmd__clog_write), so that a contribution changed on the way (kind=
   corrupt, or memory overwritten) is SPMD_ERR_MISMATCH, not a wrong result.
   Every member reads the same entries and logs: one verdict. A member whose
   log of this call is gone (not the same call index) is not checked. 1:
   they all match; 0: r failed (and the mesh broke). */
static int spmd__data_agree(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd_mesh *m = r->dev->mesh;
    int k;
    for (k = 0; k < g->G; k++) {
        const unsigned char *data = (const unsigned char *)spmd__entry_at(g, r->gseq, k) + SPMD__ENTRY_HDR;
        uint64_t ck[2], got;
        char a[96];
        if (!spmd__clog_ck(m->devs[g->members[k]], r->global, ck)) continue;
        if (r->sig.algo == SPMD__ALG_EAGER) {
            got = spmd__data_ck(data + r->meta_bytes, (size_t)ck[1]);
        } else {
            const void *p;
            memcpy(&p, data, sizeof p);
            got = spmd__data_ck(p, (size_t)ck[1]);
        }
        if (got == ck[0]) continue;
        spmd__sig_text(&r->sig, a, sizeof a);
        spmd__fail(r->dev, SPMD_ERR_MISMATCH,
                   "device %d's contribution to %s over '%s' (operation #%llu) fails its checksum (check mode): "
                   "its %llu bytes changed after it was handed over",
                   g->members[k], a, r->gr->text, (unsigned long long)r->global, (unsigned long long)ck[1]);
        spmd__break(m, SPMD_ERR_MISMATCH, r->dev->id, r->dev->err);
        spmd__finish(r, SPMD_ERR_MISMATCH);
        return 0;
    }
    return 1;
}

/* A member's offsets and sizes (ragged): inline (eager) or by pointer. */
static const int64_t *spmd__ragged_meta(const spmd_req *r, int k) {
    const unsigned char *data = (const unsigned char *)spmd__entry_at(r->gr->g, r->gseq, k) + SPMD__ENTRY_HDR;
    const int64_t *m;
    if (r->xmeta) return r->xmeta[k];
    if (r->sig.algo == SPMD__ALG_EAGER) return (const int64_t *)(const void *)data;
    memcpy(&m, data + 2 * sizeof(void *), sizeof m);
    return m;
}

/* Ragged: every receiver's recv_sizes must equal what its senders send.
   Checked by every member over the whole group, so all reach one verdict
   before anything is copied: 1 and why if they differ. */
static int spmd__ragged_bad(const spmd_req *r, char *why, size_t len) {
    const spmd__group *g = r->gr->g;
    int G = g->G, snd, rcv;
    int64_t S = r->k / G, t;
    for (rcv = 0; rcv < G; rcv++) {
        const int64_t *mr = spmd__ragged_meta(r, rcv);
        for (snd = 0; snd < G; snd++) {
            const int64_t *ms = spmd__ragged_meta(r, snd);
            for (t = 0; t < S; t++) {
                int64_t sent = ms[r->k + rcv * S + t], want = mr[3 * r->k + snd * S + t];
                if (sent == want) continue;
                snprintf(why, len,
                         "ragged_all_to_all over '%s': device %d sends %lld rows as slice %lld to device %d, whose "
                         "recv_sizes[%lld] says %lld", r->gr->text, g->members[snd], (long long)sent, (long long)t,
                         g->members[rcv], (long long)(snd * S + t), (long long)want);
                return 1;
            }
        }
    }
    return 0;
}
static int spmd__ragged_agree(spmd_req *r) {
    spmd_dev *d = r->dev;
    char why[256];
    if (!spmd__ragged_bad(r, why, sizeof why)) return 1;
    spmd__fail(d, SPMD_ERR_MISMATCH, "%s", why);
    spmd__break(d->mesh, SPMD_ERR_MISMATCH, d->id, d->err);
    spmd__finish(r, SPMD_ERR_MISMATCH);
    return 0;
}

/* A combining slot whose operation failed (a refusal): its done word's
   member part, where a combiner's index + 1 goes otherwise. */
#define SPMD__COMB_FAILED 0xffffffu

/* Member k refused this operation (spmd__refuse): it fails here too,
   naming k and its reason (the text in its entry); the mesh stays usable. */
static void spmd__refused(spmd_req *r, int k) {
    spmd__group *g = r->gr->g;
    const spmd__entry *e = spmd__entry_at(g, r->gseq, k);
    const char *why = (const char *)e + SPMD__ENTRY_HDR;
    spmd_status s = e->sig.count < SPMD_STATUS_COUNT ? (spmd_status)e->sig.count : SPMD_ERR_INVALID;
    char a[96];
    spmd__sig_text(&r->sig, a, sizeof a);
    spmd__fail(r->dev, SPMD_ERR_REFUSED,
               "%s over '%s' (operation #%llu of its group) is void: device %d refused it with %s (%.*s)", a,
               r->gr->text, (unsigned long long)r->gseq, g->members[k], spmd_status_name(s), (int)g->eager, why);
    if (r->comb == 2)
        SPMD__ST_SC(&g->shared[SPMD__SLOT(g, r->gseq)].done, (r->gseq << 24) | (uint64_t)SPMD__COMB_FAILED);
    spmd__finish(r, SPMD_ERR_REFUSED);
}

/* A refusal's post: its entry (the refused status in its signature, the
   reason's text inline), its count in a combining slot's arrivals (a
   refusal completing them marks the slot failed, so the members waiting
   for a combiner look), then done with the device's own status; every
   member reading its entry fails the call (spmd__refused). */
static void spmd__refusal_post(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd__shared *sh = &g->shared[SPMD__SLOT(g, r->gseq)];
    spmd__retag(&sh->arrived, r->gseq, 24);
    spmd__retag(&sh->done, r->gseq, 24);
    r->need = -1;
    spmd__post(r);
    if ((SPMD__FADD(&sh->arrived, (uint64_t)1) & 0xffffffu) + 1 == (uint64_t)g->G) {
        uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
        SPMD__ST_SC(&sh->done, (r->gseq << 24) | (uint64_t)SPMD__COMB_FAILED);
        SPMD__CAS(&sh->state, &st, (r->gseq << SPMD__S_SHIFT) | SPMD__S_MISMATCH); /* (counted split members) */
        r->comb = 2; /* (its finish wakes the group) */
    }
    spmd__finish(r, (spmd_status)r->sig.count);
}

/* Every member posted: compare signatures (all members see the same set,
   so they all reach the same verdict). */
static int spmd__sigs_agree(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd_mesh *m = r->dev->mesh;
    int k;
    for (k = 0; k < g->G; k++) {
        const spmd__sig *s = &spmd__entry_at(g, r->gseq, k)->sig;
        if (k != r->gr->me && s->kind == SPMD__KIND_REFUSED) {
            if (r->sig.algo == SPMD__ALG_SPLIT) {
                uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
                SPMD__CAS(&g->shared[SPMD__SLOT(g, r->gseq)].state, &st,
                          (r->gseq << SPMD__S_SHIFT) | SPMD__S_MISMATCH);
            }
            spmd__refused(r, k);
            return 0;
        }
        if (k != r->gr->me && spmd__sig_differs(s, &r->sig, m->check)) {
            char text[64], site[64] = "an unknown site";
            spmd__sig other;
            if (!m->check || !spmd__clog_read(r->dev, m->devs[g->members[k]], r->global, &other, text, site))
                snprintf(text, sizeof text, "%s", s->axes_hash == r->sig.axes_hash ? r->gr->text : "?");
            if (r->sig.algo == SPMD__ALG_SPLIT) {
                uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
                SPMD__CAS(&g->shared[SPMD__SLOT(g, r->gseq)].state, &st,
                          (r->gseq << SPMD__S_SHIFT) | SPMD__S_MISMATCH);
            }
            spmd__mismatch(r, g->members[k], s, text, site);
            return 0;
        }
    }
    /* split: one member checks under SPMD__S_CHECKING, see the progress */
    if (m->check && r->sig.algo == SPMD__ALG_EAGER && !spmd__data_agree(r)) return 0;
    if (r->sig.kind == SPMD__KIND_RAGGED && r->sig.algo == SPMD__ALG_EAGER) return spmd__ragged_agree(r);
    return 1;
}

/* Combining (thread backend, large groups): a small psum, all_gather or a
   barrier of G >= SPMD__COMBINE_MIN members would cost every member O(G)
   (checking every entry, reducing or copying every input): O(G^2) in all,
   which dominates a simulated mesh of thousands of devices. Instead each
   member posts its entry and counts itself in the slot's `arrived` word;
   the member whose count completes the group (the combiner) checks every
   signature, computes its output, copies it where the others read it (a
   psum's into its own entry, an all_gather's G inputs into the slot's part
   of the group's board, which the slot ring keeps until every member is
   done with it) and publishes its index in `done`; the others copy the
   result from there. The same arithmetic in the same order as every member
   doing it, O(G) in all. Decided from the call alone, so every member of a
   group agrees (one that disagrees is a mismatch, which the combiner or its
   own check reports). */
/* A group where arrivals are counted (combining, or a split call's counted
   arrival): large, in one process, outside check mode and psend/precv. */
static int spmd__counting_group(const spmd_req *r) {
    const spmd__group *g = r->gr->g;
    return g->G >= SPMD__COMBINE_MIN && !g->span && !r->dev->mesh->check && !r->two_phase;
}

static int spmd__combines(const spmd_req *r) {
    const spmd__group *g = r->gr->g;
    return spmd__counting_group(r) && r->sig.algo == SPMD__ALG_EAGER &&
           (r->sig.kind == SPMD__KIND_BARRIER ||
            (r->sig.kind == SPMD__KIND_ALLREDUCE && r->count * r->out_size <= g->eager) ||
            (r->sig.kind == SPMD__KIND_ALLGATHER && r->in_bytes <= g->gboard));
}

/* Counted arrival (thread backend, split, large groups): each member
   checking every member's entry and signature costs O(G), O(G^2) in all
   (an all_to_all of one float over 4,096 devices spent a third of its time
   there), and every post woke the sleepers to look again. Instead each
   member counts itself in the slot's `arrived` word, as combining does;
   the member whose count completes the group checks the signatures and
   moves the slot on (to RUNNING and wakes the group, or, on a mismatch or
   a refusal, to MISMATCH: then each member looks for itself, to fail with
   its own reason). Not for check mode, psend/precv or ragged calls, which
   check more under SPMD__S_CHECKING. */
static int spmd__split_counts(const spmd_req *r) {
    return spmd__counting_group(r) && r->sig.algo == SPMD__ALG_SPLIT && r->sig.kind != SPMD__KIND_RAGGED;
}

/* Split: every member posted and the signatures agree, as far as r can
   tell (the caller then moves the slot to RUNNING, if nobody did). */
static int spmd__split_agree(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd__shared *sh = &g->shared[SPMD__SLOT(g, r->gseq)];
    uint64_t st;
    if (r->counted == 2) {
        r->counted = 1;   /* (checked once) */
        r->nseen = g->G;  /* every entry is there: the count says so */
        if (!spmd__sigs_agree(r)) return 0; /* (the slot moved to MISMATCH) */
        st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
        SPMD__CAS(&sh->state, &st, (r->gseq << SPMD__S_SHIFT) | SPMD__S_RUNNING);
        spmd__wake_group(r->dev->mesh, g, r->gr->me);
        return 1;
    }
    if (r->counted && r->nseen < g->G) {
        st = SPMD__LD_ACQ(&sh->state);
        if ((st >> SPMD__S_SHIFT) != r->gseq || (st & SPMD__S_MASK) == SPMD__S_ARRIVING) return 0;
        if ((st & SPMD__S_MASK) != SPMD__S_MISMATCH) return 1;
    }
    return spmd__all_arrived(r) && spmd__sigs_agree(r);
}

/* Where the combiner of r's operation leaves the output the others copy, and its bytes. */
static unsigned char *spmd__combined(const spmd_req *r, int combiner, size_t *bytes) {
    const spmd__group *g = r->gr->g;
    if (r->sig.kind == SPMD__KIND_ALLGATHER) {
        *bytes = (size_t)g->G * r->in_bytes;
        return g->board + (size_t)SPMD__SLOT(g, r->gseq) * (size_t)g->G * g->gboard;
    }
    *bytes = r->count * r->out_size;
    return (unsigned char *)spmd__entry_at(g, r->gseq, combiner) + SPMD__ENTRY_HDR;
}

static void spmd__eager(spmd_req *r, int local);

/* 1 once r is finished: the combiner's work, or the copy of its result. */
static int spmd__combine(spmd_req *r) {
    spmd__group *g = r->gr->g;
    spmd__shared *sh = &g->shared[SPMD__SLOT(g, r->gseq)];
    size_t out_bytes;
    unsigned char *at;
    uint64_t dn;
    if (r->comb == 2) {
        r->nseen = g->G; /* every entry is there: the count says so */
        if (!spmd__sigs_agree(r)) return 1;
        spmd__eager(r, 0);
        at = spmd__combined(r, r->gr->me, &out_bytes);
        if (out_bytes) memcpy(at, r->recv, out_bytes); /* (a psum's: into our entry, nobody else reads our input) */
        SPMD__ST_SC(&sh->done, (r->gseq << 24) | (uint64_t)(r->gr->me + 1));
        spmd__finish(r, SPMD_OK); /* wakes the members waiting for it */
        return 1;
    }
    dn = SPMD__LD_ACQ(&sh->done);
    if ((dn >> 24) != r->gseq || !(dn & 0xffffffu)) return 0;
    if ((dn & 0xffffffu) == SPMD__COMB_FAILED) { /* a member refused: every entry is there, find it */
        r->nseen = g->G;
        if (spmd__sigs_agree(r)) {
            spmd__fail(r->dev, SPMD_ERR_REFUSED, "operation #%llu over '%s' failed in its combiner",
                       (unsigned long long)r->gseq, r->gr->text);
            spmd__finish(r, SPMD_ERR_REFUSED);
        }
        return 1;
    }
    at = spmd__combined(r, (int)(dn & 0xffffffu) - 1, &out_bytes);
    if (out_bytes) memcpy(r->recv, at, out_bytes);
    spmd__finish(r, SPMD_OK);
    return 1;
}

/* The entries this member reads have arrived and agree with it. */
static int spmd__needed_arrived(spmd_req *r) {
    int k = r->need;
    if (k == SPMD__NEED_ALL) return spmd__all_arrived(r) && spmd__sigs_agree(r);
    if (k >= 0) {
        const spmd__entry *e = spmd__entry_at(r->gr->g, r->gseq, k);
        if (SPMD__LD_ACQ(&e->seq) != r->gseq + 1) return 0;
        if (e->sig.kind == SPMD__KIND_REFUSED) {
            spmd__refused(r, k);
            return 0;
        }
        if (spmd__sig_differs(&e->sig, &r->sig, 0)) {
            spmd__mismatch(r, r->gr->g->members[k], &e->sig, e->sig.axes_hash == r->sig.axes_hash ? r->gr->text : "?",
                           "an unknown site");
            return 0;
        }
    }
    return 1;
}

/* Copy an n-d block (odometer over the outer dimensions, memcpy per run). */
static void spmd__blk_copy(const spmd__blk *b, unsigned char *dst, const unsigned char *src) {
    int64_t idx[SPMD_MAX_RANK];
    int i;
    for (i = 0; i < b->n; i++) {
        if (b->ext[i] == 0) return;
        idx[i] = 0;
    }
    for (;;) {
        int64_t so = 0, dof = 0;
        for (i = 0; i < b->n; i++) {
            so += idx[i] * b->ss[i];
            dof += idx[i] * b->ds[i];
        }
        memcpy(dst + dof, src + so, b->run);
        for (i = b->n - 1; i >= 0 && ++idx[i] == b->ext[i]; i--) idx[i] = 0;
        if (i < 0) break;
    }
}

/* all_to_all's whole chunks of run bytes from sources s0..s1-1 at offset
   off of their inputs, each to block s of dst. Up to 16 bytes a chunk is
   a memcpy of a constant size, a move: 16.7 M calls to memcpy for 4 bytes
   each took 54% of a call at 4,096 devices. */
static void spmd__chunks_in(unsigned char *dst, int64_t step, const unsigned char *const *ins, uint32_t s0,
                            uint32_t s1, int64_t off, size_t run) {
    uint32_t s;
    switch (run) {
#define SPMD__CHUNKS_IN(n) \
    case n: for (s = s0; s < s1; s++) memcpy(dst + (int64_t)s * step, ins[s] + off, n); break;
    SPMD__CHUNKS_IN(1) SPMD__CHUNKS_IN(2) SPMD__CHUNKS_IN(4) SPMD__CHUNKS_IN(8) SPMD__CHUNKS_IN(16)
#undef SPMD__CHUNKS_IN
    default: for (s = s0; s < s1; s++) memcpy(dst + (int64_t)s * step, ins[s] + off, run); break;
    }
}

/* all_to_all's tile of receivers r0 .. r0 + a2a_rows, chunks of run bytes
   (at most 16; a2a_rows x run: a quarter page of each source): a
   cache-blocked transpose. The sources go a line's worth of chunks at a
   time (so each receiver's line of output is written whole), and for each
   receiver one chunk from each of those sources, which reads every
   source's run in order, as a prefetcher expects. One receiver at a time
   reading a chunk of every source missed the cache once a chunk (16.7 M
   times at 4,096 devices of 4 bytes: 200 ms, 20x a memcpy of the bytes).
   A page of each source a tile made 4 tasks at 4,096 devices, for 2
   carriers: a quarter page makes 16, the carriers' shares even and each
   tile's receivers' lines 256 pages, not 1,024 (39-44 -> 30-35 ms). */
static void spmd__chunks_tile(const spmd_req *r, int G, uint32_t r0, const void *const *ins, void *const *outs) {
    uint32_t r1 = r0 + r->a2a_rows < (uint32_t)G ? r0 + r->a2a_rows : (uint32_t)G, sb, s0, s1, k;
    size_t run = r->blk.run;
    sb = (uint32_t)(SPMD__LINE / run);
    for (s0 = 0; s0 < (uint32_t)G; s0 = s1) {
        s1 = s0 + sb < (uint32_t)G ? s0 + sb : (uint32_t)G;
        for (k = r0; k < r1; k++)
            spmd__chunks_in((unsigned char *)outs[k], r->dst_step, (const unsigned char *const *)ins, s0, s1,
                            (int64_t)k * r->src_step, run);
    }
}

/* The work of one unit over elements [lo, hi) of its range. ins/outs are
   every member's input and output; `only` >= 0 restricts the writes to that
   member's output (the eager path computes just its own). Units: the
   receiver for scan, psum_scatter, scatter, ppermute; the source for the
   gathers; a (receiver, source) pair for all_to_all; one for the rest. */
/* Elements of es bytes in 16 KiB (an L1-sized piece), without a division
   for the sizes there are. */
static size_t spmd__l1_chunk(size_t es) {
    switch (es) {
    case 1: return 16384;
    case 2: return 8192;
    case 4: return 4096;
    case 8: return 2048;
    default: return 16384 / es;
    }
}

/* Row o and column c of element e in rows of n (one row: no division). */
#define SPMD__ROWCOL(e, n, outer, o, c) \
    do { if ((outer) == 1) { (o) = 0; (c) = (e); } else { (o) = (e) / (n); (c) = (e) % (n); } } while (0)

static void spmd__work(const spmd_req *r, int G, uint32_t u, size_t lo, size_t hi, const void **ins,
                       void **outs, int only, const void **cur) {
    size_t es = r->in_size, oes = r->out_size, chunk = spmd__l1_chunk(oes), off;
    int k;
    switch (r->sig.kind) {
    case SPMD__KIND_ALLREDUCE:
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_SCAN: {
        /* reduce a range from every input (scan: inputs 0..u) in L1-sized
           chunks; the first output written is copied to the others while hot */
        int n_in = r->sig.kind == SPMD__KIND_SCAN ? (int)u + 1 : G;
        int first = only >= 0 ? only : r->sig.kind == SPMD__KIND_ALLREDUCE ? 0 : r->sig.kind == SPMD__KIND_REDUCE ? r->root : (int)u;
        for (off = lo; off < hi; off += chunk) {
            size_t n = hi - off < chunk ? hi - off : chunk;
            unsigned char *o0 = (unsigned char *)outs[first] + off * oes;
            for (k = 0; k < n_in; k++) cur[k] = (const unsigned char *)ins[k] + off * es;
            spmd__reduce(r->kern, o0, cur, n_in, n);
            if (r->sig.kind == SPMD__KIND_ALLREDUCE && only < 0)
                for (k = 1; k < G; k++) memcpy((unsigned char *)outs[k] + off * oes, o0, n * oes);
        }
        break;
    }
    case SPMD__KIND_PSUM_SCATTER: {
        /* out_u[o, c] = sum_j x_j[o, u, c]; [lo, hi) indexes out_u */
        size_t e = lo;
        while (e < hi) {
            size_t o, c;
            SPMD__ROWCOL(e, r->inner, r->outer, o, c);
            size_t n = r->inner - c < hi - e ? r->inner - c : hi - e;
            if (n > chunk) n = chunk;
            for (k = 0; k < G; k++) cur[k] = (const unsigned char *)ins[k] + ((o * (size_t)G + u) * r->inner + c) * es;
            spmd__reduce(r->kern, (unsigned char *)outs[u] + e * oes, cur, G, n);
            e += n;
        }
        break;
    }
    case SPMD__KIND_ALLGATHER:
    case SPMD__KIND_GATHER: {
        /* out_k[o, u, c] = x_u[o, c]; [lo, hi) indexes x_u */
        size_t e = lo;
        while (e < hi) {
            size_t o, c;
            SPMD__ROWCOL(e, r->inner, r->outer, o, c);
            size_t n = r->inner - c < hi - e ? r->inner - c : hi - e;
            const unsigned char *src = (const unsigned char *)ins[u] + e * es;
            size_t at = ((o * (size_t)G + u) * r->inner + c) * es;
            if (only >= 0) {
                if ((unsigned char *)outs[only] + at != src) memcpy((unsigned char *)outs[only] + at, src, n * es);
            }
            else if (r->sig.kind == SPMD__KIND_GATHER) memcpy((unsigned char *)outs[r->root] + at, src, n * es);
            else for (k = 0; k < G; k++) memcpy((unsigned char *)outs[k] + at, src, n * es);
            e += n;
        }
        break;
    }
    case SPMD__KIND_BCAST: {
        const unsigned char *src = (const unsigned char *)ins[r->root] + lo * es;
        for (k = only >= 0 ? only : 0; k < (only >= 0 ? only + 1 : G); k++)
            if ((const unsigned char *)outs[k] + lo * es != src) memcpy((unsigned char *)outs[k] + lo * es, src, (hi - lo) * es);
        break;
    }
    case SPMD__KIND_SCATTER:
        memcpy((unsigned char *)outs[u] + lo * es, (const unsigned char *)ins[r->root] + ((size_t)u * r->count + lo) * es,
               (hi - lo) * es);
        break;
    case SPMD__KIND_PPERMUTE:
        if (r->src_of[u] < 0) memset((unsigned char *)outs[u] + lo * es, 0, (hi - lo) * es);
        else if ((unsigned char *)outs[u] + lo * es != (const unsigned char *)ins[r->src_of[u]] + lo * es)
            memcpy((unsigned char *)outs[u] + lo * es, (const unsigned char *)ins[r->src_of[u]] + lo * es, (hi - lo) * es);
        break;
    case SPMD__KIND_RAGGED: {
        /* receiver u: slice t from each source s is rows io..io+size of s's
           operand, written at row oo of out_u; cur[s] holds s's offsets and
           sizes (input_offsets, send_sizes, output_offsets, recv_sizes) */
        int64_t S = r->k / G, t;
        for (k = 0; k < G; k++) {
            const int64_t *m = (const int64_t *)cur[k];
            for (t = 0; t < S; t++) {
                int64_t i = (int64_t)u * S + t, n = m[r->k + i];
                if (n > 0)
                    memcpy((unsigned char *)outs[u] + (size_t)m[2 * r->k + i] * r->row_bytes,
                           (const unsigned char *)ins[k] + (size_t)m[i] * r->row_bytes, (size_t)n * r->row_bytes);
            }
        }
        (void)lo; (void)hi;
        break;
    }
    case SPMD__KIND_ALLTOALL: {
        /* unit = receiver * G + source (or just the receiver, for every
           source, when G*G tasks would be too many): chunk `receiver` of
           x_source goes to block `source` of out_receiver */
        uint32_t rcv = r->units == (uint32_t)G * (uint32_t)G ? u / (uint32_t)G : u;
        uint32_t s0 = r->units == (uint32_t)G * (uint32_t)G ? u % (uint32_t)G : 0;
        uint32_t s1 = r->units == (uint32_t)G * (uint32_t)G ? s0 + 1 : (uint32_t)G, src;
        if (r->blk.n == 0) /* whole chunks */
            spmd__chunks_in((unsigned char *)outs[rcv], r->dst_step, (const unsigned char *const *)ins, s0, s1,
                            (int64_t)rcv * r->src_step, r->blk.run);
        else
            for (src = s0; src < s1; src++)
                spmd__blk_copy(&r->blk, (unsigned char *)outs[rcv] + (int64_t)src * r->dst_step,
                               (const unsigned char *)ins[src] + (int64_t)rcv * r->src_step);
        (void)lo; (void)hi;
        break;
    }
    }
}

/* Length of a unit's range, in elements. */
static size_t spmd__unit_len(const spmd_req *r) {
    switch (r->sig.kind) {
    case SPMD__KIND_PSUM_SCATTER: return r->outer * r->inner;
    case SPMD__KIND_ALLGATHER:
    case SPMD__KIND_GATHER: return r->outer * r->inner;
    case SPMD__KIND_ALLTOALL:
    case SPMD__KIND_RAGGED: return 1;
    default: return r->count;
    }
}

static void spmd__run_task(spmd_req *r, uint32_t t) {
    const spmd__group *g = r->gr->g;
    int G = g->G, k;
    const void **ins = r->dev->ptrs, **cur = ins + 2 * G;
    void **outs = (void **)(ins + G);
    uint32_t u = t / r->pieces, p = t % r->pieces;
    size_t len = spmd__unit_len(r), lo = (size_t)p * r->task_elems;
    size_t hi = lo + r->task_elems < len ? lo + r->task_elems : len;
    for (k = 0; k < G; k++) {
        const unsigned char *data = (const unsigned char *)spmd__entry_at(g, r->gseq, k) + SPMD__ENTRY_HDR;
        memcpy(&ins[k], data, sizeof(void *));
        memcpy(&outs[k], data + sizeof(void *), sizeof(void *));
        if (r->sig.kind == SPMD__KIND_RAGGED) memcpy(&cur[k], data + 2 * sizeof(void *), sizeof(void *));
    }
    if (r->a2a_rows > 1) spmd__chunks_tile(r, G, u * r->a2a_rows, ins, outs); /* (all_to_all: a tile) */
    else spmd__work(r, G, u, lo, hi, ins, outs, -1, cur);
}

static void spmd__compute_own(const spmd_req *r, int G, int me, const void **ins, void **outs, const void **cur,
                              int done);

/* Eager: compute this member's output from everyone's inline input. */
static void spmd__eager(spmd_req *r, int local) {
    const spmd__group *g = r->gr->g;
    int G = g->G, k, me = r->gr->me;
    const void **ins = r->dev->ptrs, **cur = ins + 2 * G;
    void **outs = (void **)(ins + G);
    if (local) {
        ins[0] = r->send; /* a group of one reads its own buffer */
        cur[0] = r->meta;
    } else if (r->sig.kind == SPMD__KIND_ALLREDUCE && r->count * r->out_size <= 16384) {
        /* small psum and friends: one kernel call over the inline inputs */
        const unsigned char *e = (const unsigned char *)spmd__entry_at(g, r->gseq, 0) + SPMD__ENTRY_HDR;
        for (k = 0; k < G; k++) ins[k] = e + (size_t)k * g->stride;
        spmd__reduce(r->kern, r->recv, ins, G, r->count);
        return;
    } else if (r->need != SPMD__NEED_ALL && r->sig.kind != SPMD__KIND_RAGGED) {
        k = r->need >= 0 ? r->need : me; /* one entry: a ppermute's source, a bcast's root; or its own */
        ins[k] = (const unsigned char *)spmd__entry_at(g, r->gseq, k) + SPMD__ENTRY_HDR;
    } else {
        for (k = 0; k < G; k++) {
            ins[k] = (const unsigned char *)spmd__entry_at(g, r->gseq, k) + SPMD__ENTRY_HDR;
            if (r->sig.kind == SPMD__KIND_RAGGED) {
                cur[k] = ins[k]; /* offsets and sizes, then the operand */
                ins[k] = (const unsigned char *)ins[k] + r->meta_bytes;
            }
        }
    }
    outs[me] = r->recv;
    spmd__compute_own(r, G, me, ins, outs, cur, -1);
}

/* Member me's output from every member's input (ins, and cur: ragged
   offsets), the same arithmetic in the same order on every backend.
   done >= 0: all_gather's chunk of that member is in the output already
   (spmd__x_early), -1: none. */
static void spmd__compute_own(const spmd_req *r, int G, int me, const void **ins, void **outs, const void **cur,
                              int done) {
    size_t len = spmd__unit_len(r);
    int k;
    switch (r->sig.kind) {
    case SPMD__KIND_BARRIER: break;
    case SPMD__KIND_REDUCE:
        if (me == r->root) spmd__work(r, G, 0, 0, len, ins, outs, me, cur);
        break;
    case SPMD__KIND_GATHER:
        if (me != r->root) break;
        /* fallthrough */
    case SPMD__KIND_ALLGATHER:
        if (r->outer == 1) { /* the inputs one after the other (spmd__work's case with one row, in one copy each) */
            size_t n = len * r->in_size;
            for (k = 0; k < G; k++)
                if (k != done && (unsigned char *)outs[me] + (size_t)k * n != ins[k])
                    memcpy((unsigned char *)outs[me] + (size_t)k * n, ins[k], n);
            break;
        }
        for (k = 0; k < G; k++)
            if (k != done) spmd__work(r, G, (uint32_t)k, 0, len, ins, outs, me, cur);
        break;
    case SPMD__KIND_ALLTOALL:
        if (r->units == (uint32_t)G * (uint32_t)G)
            for (k = 0; k < G; k++) spmd__work(r, G, (uint32_t)(me * G + k), 0, len, ins, outs, me, cur);
        else
            spmd__work(r, G, (uint32_t)me, 0, len, ins, outs, me, cur);
        break;
    case SPMD__KIND_BCAST: /* one copy (spmd__work's case for one output) */
        if (outs[me] != ins[r->root]) memcpy(outs[me], ins[r->root], len * r->in_size);
        break;
    case SPMD__KIND_ALLREDUCE:
        spmd__work(r, G, 0, 0, len, ins, outs, me, cur);
        break;
    default: /* receiver-oriented: scan, psum_scatter, scatter, ppermute */
        spmd__work(r, G, (uint32_t)me, 0, len, ins, outs, me, cur);
        break;
    }
}

static void spmd__p2p_progress(spmd_req *r); /* >>point to point */

static void spmd__thread_progress(spmd_req *r) {
    spmd__group *g;
    spmd__shared *sh;
    if (r->state == SPMD__R_DONE) return;
    if (r->p2p) {
        spmd__p2p_progress(r);
        return;
    }
    g = r->gr->g;
    sh = &g->shared[SPMD__SLOT(g, r->gseq)];
    if (r->state == SPMD__R_POST) {
        int k;
        /* the slot is still in use: watch a member behind and look again,
           until it is free or the member watched is still behind */
        while ((k = spmd__slot_behind(r)) >= 0) {
            if (r->slotwait == k + 1) return;
            spmd__slot_watch(r, k);
        }
        if (r->slotwait) {
            spmd__slot_watch(r, -1);
            r->slotmore = 1;
        }
        if (r->slotmore && spmd__slot_more(r)) return;
        if (r->sig.kind == SPMD__KIND_REFUSED) {
            spmd__refusal_post(r);
            return;
        }
        r->comb = spmd__combines(r);
        r->counted = !r->comb && spmd__split_counts(r);
        if (r->comb || r->counted) spmd__retag(&sh->arrived, r->gseq, 24);
        if (r->comb) spmd__retag(&sh->done, r->gseq, 24);
        r->need = spmd__eager_needs(r); /* (before the post: spmd__readers reads it) */
        spmd__post(r);
        r->state = SPMD__R_ARRIVE;
        if ((r->comb || r->counted) && (SPMD__FADD(&sh->arrived, (uint64_t)1) & 0xffffffu) + 1 == (uint64_t)g->G) {
            if (r->comb) r->comb = 2;
            else r->counted = 2;
        }
    }
    if (r->state == SPMD__R_ARRIVE && r->comb) {
        spmd__combine(r);
        return;
    }
    if (r->state == SPMD__R_ARRIVE) {
        if (r->sig.algo == SPMD__ALG_EAGER ? !spmd__needed_arrived(r) : !spmd__split_agree(r)) return;
        if (r->two_phase && !r->recv_ready) return; /* psend: precv has not come yet */
        if (r->sig.algo == SPMD__ALG_EAGER) {
            spmd__eager(r, 0);
            spmd__finish(r, SPMD_OK);
            return;
        } else {
            uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
            if (r->sig.kind == SPMD__KIND_RAGGED || (r->dev->mesh->check && !r->two_phase)) {
                /* the peers' offsets live in their requests: one member reads
                   them while nobody can finish, then publishes the verdict
                   (check mode: the contributions' checksums too, before any
                   output, which may be an input, is written) */
                if (SPMD__CAS(&sh->state, &st, (r->gseq << SPMD__S_SHIFT) | SPMD__S_CHECKING)) {
                    int ok = (r->sig.kind != SPMD__KIND_RAGGED || spmd__ragged_agree(r)) &&
                             (!r->dev->mesh->check || spmd__data_agree(r));
                    SPMD__ST_SC(&sh->state, (r->gseq << SPMD__S_SHIFT) | (ok ? SPMD__S_RUNNING : SPMD__S_MISMATCH));
                    spmd__wake_group(r->dev->mesh, g, r->gr->me);
                    if (!ok) return;
                }
            } else if (!r->two_phase || spmd__all_published(r)) {
                SPMD__CAS(&sh->state, &st, (r->gseq << SPMD__S_SHIFT) | SPMD__S_RUNNING);
            }
            st = SPMD__LD_ACQ(&sh->state);
            if ((st & SPMD__S_MASK) == SPMD__S_MISMATCH) {
                spmd__fail(r->dev, SPMD_ERR_MISMATCH, "%s over '%s': %s", spmd__kind_names[r->sig.kind], r->gr->text,
                           SPMD__LD_ACQ(&r->dev->mesh->broken) ? r->dev->mesh->broken_msg : "peers disagree");
                spmd__finish(r, SPMD_ERR_MISMATCH);
                return;
            }
            if ((st & SPMD__S_MASK) != SPMD__S_RUNNING) return; /* checking, or aborted: the wait loop reports it */
            r->state = SPMD__R_RUN;
        }
    }
    if (r->state == SPMD__R_RUN) {
        for (;;) {
            uint64_t c = SPMD__FADD(&sh->claim, (uint64_t)1);
            uint32_t t = (uint32_t)(c & 0xffffffu);
            SPMD_ASSERT((c >> 24) == r->gseq);
            if (t >= r->ntasks) break;
            spmd__run_task(r, t);
            if ((SPMD__FADD(&sh->done, (uint64_t)1) & 0xffffffu) + 1 == r->ntasks)
                spmd__wake_group(r->dev->mesh, g, r->gr->me);
        }
        r->state = SPMD__R_DRAIN;
    }
    if (r->state == SPMD__R_DRAIN) {
        if ((SPMD__LD_ACQ(&sh->done) & 0xffffffu) == r->ntasks) spmd__finish(r, SPMD_OK);
    }
}

static spmd_status spmd__thread_init(spmd_mesh *m) { (void)m; return SPMD_OK; }
static void spmd__thread_fini(spmd_mesh *m) { (void)m; }

static const spmd__backend_vt spmd__thread_vt = {"threads", spmd__thread_init, spmd__thread_fini,
                                                 spmd__thread_progress, 0, NULL, NULL, NULL, NULL, NULL, NULL,
                                                 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

// >>point to point
/* A send is a request linked into its destination's mailbox; the receiver
   unlinks the first match under the mailbox lock, marks it claimed, copies
   from the sender's buffer and marks it copied. A sender that gives up can
   only take back a message nobody claimed. */
static spmd_dev *spmd__p2p_dest(const spmd_req *r) { return r->dev->mesh->devs[r->gr->g->members[r->peer]]; }

static void spmd__mbox_unlink(spmd_dev *box, spmd_req *m) {
    spmd_req *p = NULL, *q;
    for (q = box->mhead; q && q != m; p = q, q = q->mnext) {}
    if (!q) return;
    if (p) p->mnext = m->mnext; else box->mhead = m->mnext;
    if (box->mtail == m) box->mtail = p;
    m->mnext = NULL;
}

static void spmd__p2p_progress(spmd_req *r) {
    spmd_dev *d = r->dev;
    if (r->sig.kind == SPMD__KIND_SEND) {
        if (r->state == SPMD__R_POST) {
            spmd_dev *dst = spmd__p2p_dest(r);
            SPMD__ST_SC(&r->mstate, (uint32_t)SPMD__M_POSTED);
            pthread_mutex_lock(&dst->mbox);
            r->mnext = NULL;
            if (dst->mtail) dst->mtail->mnext = r; else dst->mhead = r;
            dst->mtail = r;
            pthread_mutex_unlock(&dst->mbox);
            if (SPMD__LD_SC(&dst->sleeping)) spmd__wake_dev(dst);
            r->state = SPMD__R_DRAIN;
        }
        if (r->state == SPMD__R_DRAIN) {
            uint32_t ms = SPMD__LD_ACQ(&r->mstate);
            if (ms == SPMD__M_COPIED) {
                spmd__finish(r, SPMD_OK);
            } else if (ms == SPMD__M_FAILED) {
                spmd__fail(d, SPMD_ERR_MISMATCH, "send of %s x %zu to %d (tag %d) over '%s': the receiver expected "
                           "another dtype or fewer elements", spmd__dtype_names[r->sig.dtype], r->count, r->peer,
                           r->tag, r->gr->text);
                spmd__finish(r, SPMD_ERR_MISMATCH);
            }
        }
        return;
    }
    {
        spmd_req *m;
        spmd_dev *sender;
        pthread_mutex_lock(&d->mbox);
        for (m = d->mhead; m; m = m->mnext)
            if (m->gr->g == r->gr->g && (r->peer < 0 || m->gr->me == r->peer) && (r->tag < 0 || m->tag == r->tag))
                break;
        if (m) {
            spmd__mbox_unlink(d, m);
            SPMD__ST_SC(&m->mstate, (uint32_t)SPMD__M_CLAIMED);
        }
        pthread_mutex_unlock(&d->mbox);
        if (!m) return;
        sender = m->dev; /* m belongs to the sender again once marked copied */
        if (m->sig.dtype != r->sig.dtype || m->count > r->count) {
            spmd__fail(d, SPMD_ERR_MISMATCH, "recv of %s x %zu over '%s' matched a send of %s x %zu from %d (tag %d)",
                       spmd__dtype_names[r->sig.dtype], r->count, r->gr->text, spmd__dtype_names[m->sig.dtype],
                       m->count, m->gr->me, m->tag);
            SPMD__ST_SC(&m->mstate, (uint32_t)SPMD__M_FAILED);
            if (SPMD__LD_SC(&sender->sleeping)) spmd__wake_dev(sender);
            spmd__finish(r, SPMD_ERR_MISMATCH);
            return;
        }
        if (m->count) memcpy(r->recv, m->send, m->count * r->in_size);
        if (r->info) {
            r->info->source = m->gr->me;
            r->info->tag = m->tag;
            r->info->count = m->count;
        }
        SPMD__ST_SC(&m->mstate, (uint32_t)SPMD__M_COPIED);
        if (SPMD__LD_SC(&sender->sleeping)) spmd__wake_dev(sender);
        spmd__finish(r, SPMD_OK);
    }
}

/* Give up on a send or recv (deadline, broken mesh). 0 if a receiver has
   claimed the message and is copying: that finishes soon. */
static int spmd__p2p_abandon(spmd_req *r, spmd_status s, const char *why) {
    spmd_dev *d = r->dev;
    if (r->sig.kind == SPMD__KIND_SEND && r->state == SPMD__R_DRAIN) {
        spmd_dev *dst = spmd__p2p_dest(r);
        int taken = 0;
        pthread_mutex_lock(&dst->mbox);
        if (SPMD__LD_ACQ(&r->mstate) == SPMD__M_POSTED) {
            spmd__mbox_unlink(dst, r);
            taken = 1;
        }
        pthread_mutex_unlock(&dst->mbox);
        if (!taken) return 0;
    }
    if (r->sig.kind == SPMD__KIND_SEND)
        spmd__fail(d, s, "send of %s x %zu to %d (tag %d) over '%s' %s", spmd__dtype_names[r->sig.dtype], r->count,
                   r->peer, r->tag, r->gr->text, why);
    else
        spmd__fail(d, s, "recv of %s x %zu from %d (tag %d; -1 = any) over '%s' %s", spmd__dtype_names[r->sig.dtype],
                   r->count, r->peer, r->tag, r->gr->text, why);
    if (s == SPMD_ERR_TIMEOUT) spmd__break(d->mesh, s, d->id, d->err);
    spmd__finish(r, s);
    return 1;
}

// >>waiting
/* How a call that has started waits for its end: spmd__block spins,
   yields, then sleeps on the device's futex word (a fiber parks), and
   every round polls (spmd__poll): the backend's progress, the mesh's
   break, a peer's loss or break announced by another process, the
   deadline (spmd__expire: SPMD_ERR_TIMEOUT naming who did not come), a
   member that returned (SPMD_ERR_DEADLOCK) and, in check mode, a member
   that called something else (spmd__check_missing). Requests (above) call
   it; it calls the backend through m->vt, and these of the fibers (below): */
static void spmd__fiber_park(spmd_dev *d, spmd_req *r, uint32_t bell, uint64_t now, uint64_t ns);
static void spmd__fiber_moved(spmd_dev *d);
static void spmd__progress_all(spmd_dev *d) {
    spmd_req *q;
    for (q = d->head; q; q = q->next)
        if (q->state != SPMD__R_DONE) d->mesh->vt->progress(q);
}

static void spmd__missing_list(spmd_req *r, char *buf, size_t len) {
    spmd__group *g = r->gr->g;
    size_t at = 0;
    int k, shown = 0, missing = 0;
    buf[0] = '\0';
    for (k = 0; k < g->G; k++) {
        int absent = r->state == SPMD__R_POST
                         ? SPMD__LD_ACQ(&g->mem[k].left) + (uint64_t)g->D <= r->gseq
                         : SPMD__LD_ACQ(&spmd__entry_at(g, r->gseq, k)->seq) != r->gseq + 1;
        if (!absent) continue;
        missing++;
        if (shown < 16 && at < len) {
            int w = snprintf(buf + at, len - at, "%s%d", shown ? ", " : "", g->members[k]);
            if (w > 0) at += (size_t)w;
            shown++;
        }
    }
    if (missing > shown && at < len) snprintf(buf + at, len - at, " and %d more", missing - shown);
}

/* 1 if a collective may still be failed: not once the split work started
   (it is finite and touches the peers' buffers, so it must be finished);
   a split operation still arriving is marked aborted for its peers. */
static int spmd__may_abandon(spmd_req *r) {
    if (r->sig.algo == SPMD__ALG_SPLIT && r->state == SPMD__R_ARRIVE) {
        spmd__group *g = r->gr->g;
        uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
        if (!SPMD__CAS(&g->shared[SPMD__SLOT(g, r->gseq)].state, &st,
                       (r->gseq << SPMD__S_SHIFT) | SPMD__S_ABORTED) &&
            ((st & SPMD__S_MASK) == SPMD__S_RUNNING || (st & SPMD__S_MASK) == SPMD__S_CHECKING))
            return 0;
    }
    return r->state != SPMD__R_RUN && r->state != SPMD__R_DRAIN;
}

/* What a waiting request waits for, for reports: the call, its axes, its
   sequence numbers and who has not arrived. */
static void spmd__wait_text(spmd_req *r, char *buf, size_t len) {
    char what[96], who[160];
    if (r->p2p) {
        if (snprintf(buf, len, "blocked in %s of %s x %zu %s %d (tag %d) over '%s'",
                 r->sig.kind == SPMD__KIND_SEND ? "send" : "recv", spmd__dtype_names[r->sig.dtype], r->count,
                 r->sig.kind == SPMD__KIND_SEND ? "to" : "from", r->peer, r->tag, r->gr->text) >= (int)len)
            buf[len - 1] = '\0';
        return;
    }
    spmd__sig_text(&r->sig, what, sizeof what);
    spmd__missing_list(r, who, sizeof who);
    if (snprintf(buf, len, "blocked in %s over '%s' (operation #%llu of the device, #%llu of its group of %d)%s%s", what,
             r->gr->text, (unsigned long long)r->global, (unsigned long long)r->gseq, r->gr->g->G,
             r->state == SPMD__R_POST ? ", still busy with an earlier operation on this group: " :
             r->state == SPMD__R_ARRIVE ? ", waiting for devices " : "",
             r->state <= SPMD__R_ARRIVE ? who : "") >= (int)len)
        buf[len - 1] = '\0'; /* cut short: still a report */
}

static int spmd__check_missing(spmd_req *r);

/* 1 if device p will not arrive any more: its function returned, or the
   fault plan lost it (read before what it posted, see below). */
static int spmd__gone(spmd_dev *p) { return SPMD__LD_ACQ(&p->returned) || SPMD__LD_ACQ(&p->lost); }

/* Devices whose function returned (spmd_run) will never arrive: a request
   waiting for one of them fails now, naming it (SPMD_ERR_DEADLOCK), and
   breaks the mesh. So do devices lost by the fault plan (kind=lose, d->lost),
   with SPMD_ERR_PEER_LOST naming the call they were lost at. 1 if r is now
   done. */
static int spmd__gone_check(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    char why[320], what[96];
    int k, gone = -1;
    uint64_t lost;
    spmd_status s;
    if (r->state == SPMD__R_DONE) return 0;
    if (r->x) return m->vt->x_gone(r);
    if (r->p2p) {
        for (k = 0; k < g->G && gone < 0; k++) {
            spmd_dev *p = m->devs[g->members[k]];
            if (k == r->gr->me || (r->peer >= 0 && k != r->peer) || !spmd__gone(p)) continue;
            gone = p->id;
            if (r->peer < 0) /* any source: only once every other member returned */
                for (k = 0; k < g->G; k++)
                    if (k != r->gr->me && !spmd__gone(m->devs[g->members[k]])) return 0;
        }
        if (gone < 0) return 0;
        lost = SPMD__LD_ACQ(&m->devs[gone]->lost);
        if (lost)
            snprintf(why, sizeof why, "can never complete: device %d was lost (SPMD_FAULTS kind=lose at its call #%llu, "
                     "%s)", gone, (unsigned long long)(lost - 1), m->devs[gone]->lost_what);
        else
            snprintf(why, sizeof why, "can never complete: device %d returned from its function", gone);
        s = lost ? SPMD_ERR_PEER_LOST : SPMD_ERR_DEADLOCK;
        if (!spmd__p2p_abandon(r, s, why)) return 0;
        spmd__break(m, s, d->id, d->err);
        return 1;
    }
    if (r->state != SPMD__R_POST && r->state != SPMD__R_ARRIVE) return 0;
    /* check mode: a member that logged another call here is a mismatch,
       which says more than that it returned */
    if (m->check && spmd__check_missing(r)) return 1;
    for (k = 0; k < g->G && gone < 0; k++) {
        spmd_dev *p = m->devs[g->members[k]];
        int absent;
        /* returned first: everything it posted before returning is then
           visible (read the other way round, a post that came between the
           two reads made a member that had called it look absent) */
        if (!spmd__gone(p)) continue;
        absent = r->state == SPMD__R_POST ? SPMD__LD_ACQ(&g->mem[k].left) + (uint64_t)g->D <= r->gseq
                                          : SPMD__LD_ACQ(&spmd__entry_at(g, r->gseq, k)->seq) != r->gseq + 1;
        if (absent) gone = p->id;
    }
    if (gone < 0 || !spmd__may_abandon(r)) return 0;
    spmd__sig_text(&r->sig, what, sizeof what);
    if ((lost = SPMD__LD_ACQ(&m->devs[gone]->lost)) != 0) {
        spmd__fail(d, SPMD_ERR_PEER_LOST,
                   "%s over '%s' (operation #%llu of this device, #%llu of its group) can never complete: device %d "
                   "was lost (SPMD_FAULTS kind=lose at its call #%llu, %s)",
                   what, r->gr->text, (unsigned long long)r->global, (unsigned long long)r->gseq, gone,
                   (unsigned long long)(lost - 1), m->devs[gone]->lost_what);
        spmd__break(m, SPMD_ERR_PEER_LOST, d->id, d->err);
        spmd__finish(r, SPMD_ERR_PEER_LOST);
        return 1;
    }
    spmd__fail(d, SPMD_ERR_DEADLOCK,
               "%s over '%s' (operation #%llu of this device, #%llu of its group) can never complete: device %d "
               "returned from its function without %s",
               what, r->gr->text, (unsigned long long)r->global, (unsigned long long)r->gseq, gone,
               r->state == SPMD__R_POST ? "finishing an earlier operation of this group" : "calling it");
    spmd__break(m, SPMD_ERR_DEADLOCK, d->id, d->err);
    spmd__finish(r, SPMD_ERR_DEADLOCK);
    return 1;
}

/* The deadline passed. Unless the split work already started (it is finite
   and touches the peers' buffers, so it must be finished), fail the request
   and break the mesh. Returns 1 if r is now done. */
static int spmd__expire(spmd_req *r) {
    spmd_dev *d = r->dev;
    char who[160], what[192];
    if (r->x) {
        snprintf(who, sizeof who, "timed out after %lld ms", (long long)r->timeout_ms);
        return d->mesh->vt->x_give_up(r, SPMD_ERR_TIMEOUT, 1, who);
    }
    if (r->p2p) {
        char why[96];
        snprintf(why, sizeof why, "timed out after %lld ms: %s", (long long)r->timeout_ms,
                 r->sig.kind == SPMD__KIND_SEND ? "nobody received it" : "no matching send arrived");
        return spmd__p2p_abandon(r, SPMD_ERR_TIMEOUT, why);
    }
    if (!spmd__may_abandon(r)) return 0;
    spmd__missing_list(r, who, sizeof who);
    spmd__req_what(r, what, sizeof what);
    spmd__fail(d, SPMD_ERR_TIMEOUT,
               "%s over '%s' (operation #%llu of this device, #%llu of its group) timed out after "
               "%lld ms: %s %s (spmd_report says what each device is doing)",
               what, r->gr->text, (unsigned long long)r->global, (unsigned long long)r->gseq,
               (long long)r->timeout_ms,
               r->state == SPMD__R_POST ? "still busy with an earlier operation on this group:"
                                        : "devices that did not arrive:",
               who);
    spmd__break(d->mesh, SPMD_ERR_TIMEOUT, d->id, d->err);
    spmd__finish(r, SPMD_ERR_TIMEOUT);
    return 1;
}

/* The mesh broke while r was unfinished. Returns 1 if r is now done. */
static int spmd__on_broken(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd_status s;
    if (r->x) {
        char why[600];
        snprintf(why, sizeof why, "abandoned: mesh broken by %s", m->broken_msg);
        return m->vt->x_give_up(r, m->broken_status, 0, why);
    }
    if (r->p2p) {
        char why[600];
        snprintf(why, sizeof why, "abandoned: mesh broken by %s", m->broken_msg);
        return spmd__p2p_abandon(r, m->broken_status, why);
    }
    if (r->state == SPMD__R_RUN || r->state == SPMD__R_DRAIN) return 0;
    if (m->broken_status == SPMD_ERR_DEADLOCK && !r->p2p) {
        char what[400];
        spmd__wait_text(r, what, sizeof what); /* before an abort changes the state */
        if (!spmd__may_abandon(r)) return 0;
        spmd__fail(r->dev, SPMD_ERR_DEADLOCK, "%s; mesh broken by %s", what, m->broken_msg);
        spmd__finish(r, SPMD_ERR_DEADLOCK);
        return 1;
    }
    if (!spmd__may_abandon(r)) return 0;
    s = m->broken_status;
    spmd__fail(r->dev, s, "operation #%llu over '%s' abandoned: mesh broken by %s",
               (unsigned long long)r->global, r->gr->text, m->broken_msg);
    spmd__finish(r, s);
    return 1;
}

/* Check mode: a missing member that logged a different collective at the
   same position will never come; report the mismatch now. */
static int spmd__check_missing(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    int k;
    if (r->x) return m->vt->x_missing(r);
    if (r->state != SPMD__R_ARRIVE || r->p2p || r->x) return 0;
    for (k = r->nseen; k < g->G; k++) {
        spmd__sig other;
        char text[64], site[64];
        spmd_dev *p = m->devs[g->members[k]];
        if (SPMD__LD_ACQ(&spmd__entry_at(g, r->gseq, k)->seq) == r->gseq + 1) continue;
        if (spmd__clog_read(r->dev, p, r->global, &other, text, site) &&
            (spmd__sig_differs(&other, &r->sig, 1) || strcmp(text, r->gr->text) != 0)) {
            if (r->sig.algo == SPMD__ALG_SPLIT) {
                uint64_t st = (r->gseq << SPMD__S_SHIFT) | SPMD__S_ARRIVING;
                if (!SPMD__CAS(&g->shared[SPMD__SLOT(g, r->gseq)].state, &st,
                               (r->gseq << SPMD__S_SHIFT) | SPMD__S_MISMATCH))
                    return 0;
            }
            spmd__mismatch(r, p->id, &other, text, site);
            return 1;
        }
    }
    return 0;
}

/* The device no longer sleeps: out of the sleeper counts of its groups.
   (Also called by whoever makes a parked fiber ready: it will poll again.)
   A fiber rung by a group's wake finds `sleeping` cleared, after its bit
   there (spmd__fiber_ring): with one request, that was its only group,
   and the bitmap's line (the waker's now) is left alone. */
static void spmd__sleep_end(spmd_dev *d) {
    spmd_req *q = d->head;
    if (q && !q->next && !SPMD__LD_ACQ(&d->sleeping)) {
        q->asleep = 0;
        return;
    }
    SPMD__ST_SC(&d->sleeping, 0u);
    for (; q; q = q->next)
        if (q->asleep) {
            uint64_t *w = &q->gr->g->sleepers[q->gr->me >> 6], bit = (uint64_t)1 << (q->gr->me & 63);
            q->asleep = 0;
            if (SPMD__LD_ACQ(w) & bit) SPMD__FAND(w, ~bit); /* (a group's wake may have taken it: spmd__wake_group) */
        }
}

/* Sleep until rung (at most ns from now), unless r is done, the mesh broke
   or a device returned since the caller saw `gone` of them
   (spmd__run_returned: its count, then the sleepers' bits; here the bits,
   then the count). */
static void spmd__sleep(spmd_dev *d, spmd_req *r, uint64_t now, uint64_t ns, uint32_t gone) {
    spmd_req *q;
    uint32_t bell;
    /* register in the group of every unfinished request (send and recv: the
       group of their axes): a post, a finished task or a member leaving any
       of them may be what lets r go on */
    for (q = d->head; q; q = q->next) {
        q->asleep = q->state != SPMD__R_DONE && (q->sig.algo != SPMD__ALG_LOCAL || q->p2p);
        if (q->asleep) SPMD__FOR(&q->gr->g->sleepers[q->gr->me >> 6], (uint64_t)1 << (q->gr->me & 63));
    }
    SPMD__ST_SC(&d->sleeping, 1u);
    SPMD__FENCE(&d->fence_word); /* registered before the posts are read (see spmd__finish) */
    bell = SPMD__LD_SC(&d->bell);
    spmd__progress_all(d);
    if (r->state != SPMD__R_DONE && !SPMD__LD_SC(&d->mesh->broken) && SPMD__LD_SC(&d->mesh->nreturned) == gone) {
        if (d->fib) spmd__fiber_park(d, r, bell, now, ns);
        else spmd__futex_wait(&d->bell, bell, ns);
    }
    spmd__sleep_end(d);
}

/* r's deadline, from the first look at the clock in its wait. */
static void spmd__deadline_set(spmd_req *r, uint64_t now) {
    if (!r->deadline) {
        uint64_t ms = (uint64_t)r->timeout_ms, room = (UINT64_MAX - now) / 1000000u;
        r->deadline = ms < room ? now + ms * 1000000u : UINT64_MAX; /* saturate */
    }
}

/* One poll: progress, then the deadline and a broken mesh. 1 if r is done. */
static int spmd__poll(spmd_req *r, uint64_t now) {
    spmd_mesh *m = r->dev->mesh;
    spmd__progress_all(r->dev);
    if (r->state == SPMD__R_DONE) return 1;
    if (m->vt->heard) m->vt->heard(m); /* other processes' breaks and losses */
    if (SPMD__LD_ACQ(&m->broken) && spmd__on_broken(r)) return 1;
    if (now) {
        spmd__deadline_set(r, now);
        if (m->check && spmd__check_missing(r)) return 1;
        if (now >= r->deadline && spmd__expire(r)) return 1;
    }
    return 0;
}

/* A device returned: 1 if r ended of it. One that broke the mesh before
   it returned (a failure it did not handle) is told by the break, which
   says why: it may have come after the caller's poll looked at the mesh. */
static int spmd__gone_or_broken(spmd_req *r) {
    if (SPMD__LD_ACQ(&r->dev->mesh->broken) && spmd__on_broken(r)) return 1;
    return spmd__gone_check(r);
}

/* How long a sleeper on a polled backend (nothing rings it when a message
   comes) sleeps between looks, the wait so far `waited`: 100 us, then a
   64th of the wait up to 1 ms, so that a message that comes late in a
   long wait is seen at most ~1.6% later, and a process waiting out a
   straggler polls 1,000 times a second, not 10,000. */
static uint64_t spmd__poll_gap(uint64_t waited) {
    uint64_t g = waited / 64;
    return g < 100000u ? 100000u : g > 1000000u ? 1000000u : g;
}

/* More devices want this machine's CPUs than it has: this process's, or
   with other processes' there (8 processes of one device on 2 CPUs: the
   backend's host_crowded), where a spinning waiter only delays the peer it
   waits for. */
static int spmd__crowded(const spmd_mesh *m) {
    return SPMD__LD_ACQ(&m->nattached) > (uint32_t)m->ncpu || m->host_crowded;
}

/* Spin briefly, then yield, then sleep on the device's futex word. When
   crowded (above) a spinning thread only delays the peers it waits for
   (they need its CPU), so it yields at once. */
static spmd_status spmd__block(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    uint32_t gone = 0; /* devices returned, as last checked */
    int crowded = spmd__crowded(m);
    uint64_t t0 = 0, spin = crowded ? m->spin_os_ns : m->spin_ns;
    unsigned iter = crowded && spin == 0 ? 63u : 0u;
    uint64_t last_yield = 0;
    uint64_t moved = 0;
    int spinning = 1;
    int parked = 0, woke = 0;
    /* a fiber's first look is its sleep's, which polls once it is listed
       as a sleeper (a poll before it would only repeat the post's) */
    int look = !d->fib || m->vt->polled;
    if (r->fault_die) spmd__fault_die(r, 1); /* >>faults: kind=lose:posted */
    if (!(r->rec & SPMD__REC_LATE)) spmd__rec_wait(r, 0);
    for (;;) {
        uint64_t now = 0, waited;
        /* the clock costs as much as a short operation: spinning reads it
           every 64 polls, the slower phases every time, a fiber every time
           but the first look after it was woken (usually its last) */
        if ((++iter & 63u) == 0 || !spinning || (d->fib && !woke)) now = spmd__now_ns();
        if (!look) {
            spmd__deadline_set(r, now);
            look = 1;
        } else if (spmd__poll(r, now)) {
            break;
        }
        if (d->fib && woke) { /* looked without the clock: again with it (its deadline first) */
            woke = 0;
            continue;
        }
        /* a blocking call's record, once the wait is more than a moment:
           when the clock is first read (64 polls), for a fiber once it comes
           back from a park (the deadlock verdict's recheck round is one);
           a shorter wait ends in one record, written whole at the end */
        if ((r->rec & SPMD__REC_LATE) && now && (parked || !d->fib)) spmd__rec_wait(r, now);
        if (SPMD__LD_ACQ(&m->nreturned) != gone) {
            gone = SPMD__LD_ACQ(&m->nreturned);
            if (spmd__gone_or_broken(r)) break;
        }
        if (d->fib) { /* a fiber: no spinning, its carrier runs the others meanwhile */
            uint64_t left = r->deadline > now ? r->deadline - now : 0;
            uint64_t cap = m->vt->polled ? spmd__poll_gap(t0 ? now - t0 : 0) : UINT64_MAX;
            /* on libfabric nothing rings a fiber when a message comes: for
               the spin time it polls again once the others had their turn */
            if (!t0) t0 = now;
            if (m->vt->polled && now - t0 < m->spin_ns) {
                spmd__fiber_yield(d);
                continue;
            }
            spmd__sleep(d, r, now, left < cap - 1000 ? left + 1000 : cap, gone);
            parked = woke = 1;
            continue;
        }
        if (!now) { spmd__pause(); continue; }
        /* the transport moved something since the last look (a large
           message under way): spin on, a sleeper would stall the pipe */
        if (m->vt->moved && m->vt->moved(m) != moved) {
            moved = m->vt->moved(m);
            t0 = now;
            last_yield = 0;
        }
        if (!t0) t0 = now;
        waited = now - t0;
        spinning = waited < spin;
        if (spinning) {
            /* a short yield every 20 us: nearly free when no other thread
               wants this CPU, and it lets a peer that shares it run */
            if (waited - last_yield > 20000u) {
                sched_yield();
                last_yield = waited;
            } else {
                spmd__pause();
            }
        } else if (waited < spin + m->yield_ns) {
            sched_yield();
        } else {
            uint64_t left = r->deadline > now ? r->deadline - now : 0;
            uint64_t cap = m->vt->polled ? spmd__poll_gap(waited) : 50000000u;
            /* on libfabric nothing wakes a sleeper when a message comes: poll */
            spmd__sleep(d, r, now, left < cap ? left + 1000 : cap, gone);
        }
    }
    if (d->fib) spmd__fiber_moved(d);
    return r->status;
}

/* A blocking eager call that has posted: the peers are likely a moment
   away, so watch the next missing entry alone for a while (a few us)
   before the general wait loop. Not when devices outnumber CPUs. */
static void spmd__watch(spmd_req *r) {
    const spmd__group *g = r->gr->g;
    spmd_mesh *m = r->dev->mesh;
    int spins = 0;
    if (r->x || r->dev->fib || r->state != SPMD__R_ARRIVE || r->sig.algo != SPMD__ALG_EAGER || r->need != SPMD__NEED_ALL ||
        spmd__crowded(m))
        return;
    while (r->nseen < g->G && spins < 1024) {
        if (SPMD__LD_ACQ(&spmd__entry_at(g, r->gseq, r->nseen)->seq) == r->gseq + 1) {
            r->nseen++;
        } else {
            if (r->rec & SPMD__REC_LATE) spmd__rec_posted(r); /* a moment with nothing else to do */
            spmd__pause();
            spins++;
        }
    }
    m->vt->progress(r);
}

// >>fibers
/* The fiber scheduler (desc.scheduler, SPMD_SCHEDULER=fibers): a process's devices.
   It owns the fibers' stacks (one mapping a run, a page below each:
   spmd__stacks_map), the context switch (hand-written for x86-64 and arm64
   ELF; ucontext elsewhere or with -DSPMD_FIBER_UCONTEXT), the ready
   queues, and the carrier threads that run the fibers.
   Data flow: spmd_run makes one fiber per device and K carriers, each with
   a queue of its own, home to a block of the devices (spmd__runq: their
   states under its lock, so that carriers running their own devices never
   wait for each other). A carrier takes a ready fiber from its queue (FIFO,
   or drawn by a generator seeded with desc.sched_seed: with one carrier
   the whole run is then reproducible), or from another queue when its own
   is empty and every 32nd turn, and switches to it, warming the next one
   (spmd__fiber_warm).
   A device's wait (spmd__block) ends in spmd__sleep, which parks the fiber
   (spmd__fiber_park) instead of sleeping on its futex word, and its carrier
   takes the next one; whoever rings the device's bell (spmd__wake_dev) makes
   a parked fiber ready again (spmd__fiber_ring; a group's wake rings up to 64
   under one taking of the lock). A park may carry a time
   limit (its deadline; libfabric: the poll interval): a carrier with nothing
   ready sleeps until the earliest one or a ring.
   When nothing is ready, no carrier runs a fiber and every unfinished fiber
   is parked, the thread backend can never go on. After one more round in
   which every parked fiber polls again and nothing moves, that is a deadlock
   (spmd__fiber_stuck): the mesh breaks with SPMD_ERR_DEADLOCK, the report
   (spmd_report's text; with the recorder off, per device the call it waits
   in, or that it returned) goes to the log at error level, and every parked
   fiber wakes to fail its call. With libfabric
   the transport completes things by itself, so there is no such verdict.
   The thread that called spmd_run watches the carriers: one that runs the
   same device for 10 s (a tenth of the deadline if less, at least 1 s)
   without a library wait gets a warning naming it (a
   device blocked outside spmdcoll, e.g. on its own mutex, stalls its carrier:
   unsupported under fibers). */
#if (SPMD__HAS_X86 && defined(__x86_64__) || SPMD__HAS_ARM64) && defined(__ELF__) && !defined(SPMD_FIBER_UCONTEXT)
#define SPMD__CTX_ASM 1
#else
#define SPMD__CTX_ASM 0
#include <ucontext.h>
#endif
#include <signal.h>
#include <sys/mman.h>
#if defined(__SANITIZE_ADDRESS__)
#define SPMD__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPMD__ASAN 1
#endif
#endif
#ifdef SPMD__ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif
#ifdef SPMD__TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define SPMD__VALGRIND 1
#endif
#endif

#define SPMD__FIBER_STACK ((size_t)256 << 10)
#define SPMD__STACK_MIN ((size_t)16 << 10)
#define SPMD__STACK_MAX ((size_t)1 << 30)
#define SPMD__MAX_CARRIERS 1024

#if SPMD__CTX_ASM
/* spmd__ctx_switch(from, to): push the callee-saved registers (x86-64: and
   the SSE/x87 control words) on the current stack, store the stack pointer
   in *from, load `to` and pop the same frame from there. A new fiber's frame
   returns into spmd__fiber_entry with the first argument register still
   holding `from`: the address of the carrier's context, its first member. */
typedef struct spmd__ctx { void *sp; } spmd__ctx;
void spmd__ctx_switch(spmd__ctx *from, void *to) __asm__("spmd__ctx_switch_local");
#if SPMD__HAS_X86
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        "spmd__ctx_switch_local:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".popsection\n");
#define SPMD__CTX_FRAME 64 /* control words, six registers, return address */
#else
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        "spmd__ctx_switch_local:\n"
        "    sub sp, sp, #160\n"
        "    stp x19, x20, [sp, #0]\n"
        "    stp x21, x22, [sp, #16]\n"
        "    stp x23, x24, [sp, #32]\n"
        "    stp x25, x26, [sp, #48]\n"
        "    stp x27, x28, [sp, #64]\n"
        "    stp x29, x30, [sp, #80]\n"
        "    stp d8, d9, [sp, #96]\n"
        "    stp d10, d11, [sp, #112]\n"
        "    stp d12, d13, [sp, #128]\n"
        "    stp d14, d15, [sp, #144]\n"
        "    mov x9, sp\n"
        "    str x9, [x0]\n"
        "    mov sp, x1\n"
        "    ldp x19, x20, [sp, #0]\n"
        "    ldp x21, x22, [sp, #16]\n"
        "    ldp x23, x24, [sp, #32]\n"
        "    ldp x25, x26, [sp, #48]\n"
        "    ldp x27, x28, [sp, #64]\n"
        "    ldp x29, x30, [sp, #80]\n"
        "    ldp d8, d9, [sp, #96]\n"
        "    ldp d10, d11, [sp, #112]\n"
        "    ldp d12, d13, [sp, #128]\n"
        "    ldp d14, d15, [sp, #144]\n"
        "    add sp, sp, #160\n"
        "    ret\n"
        ".popsection\n");
#define SPMD__CTX_FRAME 160 /* x19..x30, d8..d15 */
#endif
#else
typedef struct spmd__ctx { ucontext_t uc; } spmd__ctx;
#endif

enum { SPMD__F_READY = 1, SPMD__F_RUNNING, SPMD__F_PARKED, SPMD__F_DONE };

typedef struct spmd__fiber {
    spmd__ctx ctx;
    spmd_dev *dev;
    struct spmd__sched *s;
    struct spmd__runq *q;      /* its home queue: its state is under that queue's lock */
    struct spmd__carrier *car; /* the carrier running it (set at each switch in) */
    unsigned char *lo;         /* the stack: lo .. lo + len, in the run's mapping (spmd__stacks_map) */
    const uint64_t *gap;       /* the page below it when that is no guard page, else NULL */
    size_t len;
    int state;                 /* SPMD__F_*; under its home queue's lock */
    int started;
    uint64_t wake_at;          /* parked with a time limit: ready then (0: none) */
    spmd_req *waiting;         /* parked in a wait for this request (the deadlock report) */
    void *fake;                /* ASan's fake stack while switched out */
    void *tsan;                /* TSan's fiber */
    unsigned vg;               /* valgrind's stack id */
} spmd__fiber;

typedef struct spmd__carrier {
    spmd__ctx ctx;             /* first: a new fiber's entry receives its address */
    struct spmd__sched *s;
    spmd__fiber *cur;          /* the fiber it runs, or NULL (atomic: the watchdog reads it) */
    uint64_t switches;         /* fibers switched to (the watchdog) */
    uint64_t seen;             /* the watchdog's last look at switches, */
    int quiet, warned;         /* seconds without a switch, and warned for it */
    pthread_t th;
    const void *lo;            /* ASan: its own stack */
    size_t len;
    void *fake, *tsan;
    const void **ptrs;         /* the scratch pointers of the device it runs (spmd_dev.ptrs) */
    struct spmd__runq *own;    /* its queue */
    unsigned turn;             /* fibers it took */
    int running;               /* it runs a fiber (set and cleared under that fiber's queue lock) */
} spmd__carrier;

/* A carrier's ready queue and the fibers whose home it is (a block of the
   devices: fiber i of n is at home in queue i * K / n): their states, time
   limits and moves are under its lock, so that a carrier that parks, rings
   and runs its own devices never waits for another. Below
   SPMD__QUEUE_SPLIT devices per carrier they share one queue: then
   every device fits in cache anyway, and a ready device runs on whichever
   carrier is free first (a ring of 8 devices split over two queues waited
   for the other carrier: ppermute 1.0 -> 2.4 us). */
#define SPMD__QUEUE_SPLIT 128
typedef struct spmd__runq {
    uint32_t lock;
    int cap;                   /* its fibers, */
    int rhead, rcount;         /* the ready ring (of cap; rcount atomic: peeked without the lock) */
    spmd__fiber *fibs;         /* from here */
    spmd__fiber **ready;
    uint64_t next_wake;        /* earliest wake_at of a parked fiber here (UINT64_MAX: none) */
    uint64_t rng;              /* 0: FIFO; else the generator's state */
    uint64_t moves;            /* rings and ended waits of its fibers (atomic: an ended wait counts without
                                  the lock) */
    char pad[SPMD__LINE - 56]; /* (a line of its own) */
} spmd__runq;

typedef struct spmd__sched {
    spmd_mesh *m;
    spmd_fn fn;
    void *arg;
    uint32_t lock;             /* spin lock of an idle carrier's look at every queue (the fields below
                                  it; taken before any queue's) */
    uint32_t gen;              /* futex word of idle carriers: bumped when one is needed */
    uint32_t finished;         /* futex word of the watchdog: 1 when every fiber is done */
    int n, K;
    spmd__fiber *fibs;
    size_t page;
    spmd__carrier *cars;
    spmd__runq *q;             /* nq queues: K, or 1 for a small mesh (SPMD__QUEUE_SPLIT) */
    int nq;
    spmd__fiber **ready;       /* n: the queues' rings */
    int nlive, nidle;          /* (atomic) */
    uint64_t mark;             /* the queues' moves when a recheck round began */
    int recheck;               /* a recheck round is under way */
    int judging;               /* a carrier is writing the deadlock report */
} spmd__sched;


/* xorshift64*: the seeded draw of the next ready fiber */
static uint64_t spmd__rand(uint64_t *st) {
    uint64_t x = *st;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *st = x;
    return x * 0x2545f4914f6cdd1du;
}

/* f ready in its home queue (that queue's lock held); an idle carrier is woken. */
static void spmd__ready_push(spmd__fiber *f) {
    spmd__runq *q = f->q;
    spmd__sched *s = f->s;
    f->state = SPMD__F_READY;
    q->ready[(q->rhead + q->rcount) % q->cap] = f;
    SPMD__ST_REL(&q->rcount, q->rcount + 1);
    if (SPMD__LD_SC(&s->nidle)) {
        SPMD__FADD(&s->gen, 1u);
        spmd__futex_wake(&s->gen);
    }
}

static spmd__fiber *spmd__ready_take(spmd__runq *q) {
    spmd__fiber *f;
    if (!q->rcount) return NULL;
    if (q->rng && q->rcount > 1) { /* swap a drawn one to the head */
        int k = (q->rhead + (int)(spmd__rand(&q->rng) % (uint64_t)q->rcount)) % q->cap;
        f = q->ready[k];
        q->ready[k] = q->ready[q->rhead];
        q->ready[q->rhead] = f;
    }
    f = q->ready[q->rhead];
    q->rhead = (q->rhead + 1) % q->cap;
    SPMD__ST_REL(&q->rcount, q->rcount - 1);
    return f;
}

/* Start loading what the fibers that run next will touch, while the
   current one runs: a pipeline over the next four in the queue, each
   stage loading what the stage before brought into cache points to. The
   fourth: its fiber; the third: the request it waits for; the second:
   the top of its stack (the frames of its wait), its device's per-call
   fields and its group reference; the next: its group's first line, its
   own counters there and the flight record its call ends in. With
   thousands of devices none of it is in cache any more when its turn
   comes, and each miss would otherwise stall its carrier in turn (a
   switch to one of 16,384 fibers: 200-340 ns, 30 ns with its stack
   warmed; 512 groups of 8: the group's line alone was 7% of the time).
   Lock held. */
#define SPMD__WARM_STACK 1024 /* bytes above a parked fiber's stack pointer: its frames, measured ~900 */
#define SPMD__WARM_MIN 256    /* fibers from which warming pays: fewer stay in a core's caches (a few KiB
                                 a device), and the prefetches only cost (8 devices: ~0.3 us a psum) */
static const spmd__fiber *spmd__warm_at(const spmd__runq *q, int i) {
    return i < q->rcount ? q->ready[(q->rhead + i) % q->cap] : NULL;
}
static void spmd__fiber_warm(const spmd__runq *q) {
    const spmd__fiber *f;
    const spmd_req *r;
    const char *p;
    size_t i;
    if ((f = spmd__warm_at(q, 0)) != NULL && (r = f->waiting) != NULL) {
        if (r->rec && f->dev->ring) SPMD__PREFETCH_W(spmd__rec_at(f->dev, SPMD__REC_NUM(r->rec) - 1));
        if (r->gr) {
            SPMD__PREFETCH_W(r->gr->g);
            SPMD__PREFETCH_W(r->gr->my);
        }
    }
    if ((f = spmd__warm_at(q, 1)) != NULL) {
#if SPMD__CTX_ASM
        for (p = (const char *)f->ctx.sp, i = 0; i < SPMD__WARM_STACK; i += SPMD__LINE) SPMD__PREFETCH_W(p + i);
#endif
        for (p = (const char *)f->dev, i = 0; i < offsetof(spmd_dev, mbox); i += SPMD__LINE) SPMD__PREFETCH_W(p + i);
        if ((r = f->waiting) != NULL && r->gr) SPMD__PREFETCH_W(r->gr);
    }
    if ((f = spmd__warm_at(q, 2)) != NULL && (r = f->waiting) != NULL)
        for (p = (const char *)r, i = 0; i < offsetof(spmd_req, blk); i += SPMD__LINE) SPMD__PREFETCH_W(p + i);
    if ((f = spmd__warm_at(q, 3)) != NULL) SPMD__PREFETCH_W(f);
}

/* Switch between a carrier's loop and a fiber, with the fiber's home queue
   lock held: whoever resumes releases it. */
static void spmd__to_fiber(spmd__carrier *c, spmd__fiber *f) {
#ifdef SPMD__ASAN
    __sanitizer_start_switch_fiber(&c->fake, f->lo, f->len);
#endif
#ifdef SPMD__TSAN
    __tsan_switch_to_fiber(f->tsan, 0);
#endif
#if SPMD__CTX_ASM
    spmd__ctx_switch(&c->ctx, f->ctx.sp);
#else
    swapcontext(&c->ctx.uc, &f->ctx.uc);
#endif
#ifdef SPMD__ASAN
    __sanitizer_finish_switch_fiber(c->fake, NULL, NULL);
#endif
}

/* The fibers' stacks: one mapping, each stack above a page of its own:
   [gap][stack 0][gap][stack 1]..., kept by the mesh for its next run and
   unmapped with it. A gap is a guard (no access: an overflow dies of
   SIGSEGV there, where a sanitizer names it): a guard region where the
   kernel has them (Linux 6.13: a marker in the page table, ~1.5 us a
   page), every gap; else a page made PROT_NONE, which splits the mapping
   twice (~5 us; 4,096 of them took 22 ms) while a process has about
   65,530 mappings (the kernel's vm.max_map_count), so only the first
   SPMD__FIBER_GUARDS. The gaps of the others stay plain zero pages: a
   fiber checks the top of its own at every switch and all of it when it
   ends (spmd__gap_check; it is the kernel's one zero page until written,
   so the reads stay in cache), and an overflow found there is reported
   and the process aborted. One that jumped past the gap (a large local
   array left unwritten) corrupts the stack below unseen: such programs
   need room (thread_stack_size). */
#define SPMD__FIBER_GUARDS 16384
#define SPMD__GAP_WORDS 8
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* (Linux 6.13; older C libraries lack the name) */
#endif

/* Guard the gaps of n stacks `stride` apart from base (see above): how
   many, the first, are guards, or -1 if a guard page failed. */
static int spmd__stacks_guard(unsigned char *base, int n, size_t stride, size_t page) {
    int i, regions = 1;
    for (i = 0; i < n; i++) {
        unsigned char *gap = base + (size_t)i * stride;
        if (regions && madvise(gap, page, MADV_GUARD_INSTALL) == 0) continue;
        regions = 0; /* (EINVAL: an older kernel) */
        if (i >= SPMD__FIBER_GUARDS) break;
        if (mprotect(gap, page, PROT_NONE) != 0) return -1;
    }
    return i;
}

static void spmd__stacks_unmap(spmd_mesh *m) {
    if (m->stacks) munmap(m->stacks, m->stacks_len);
    m->stacks = NULL;
}

static int spmd__stacks_map(spmd__sched *s, size_t stack) {
    spmd_mesh *m = s->m;
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096u, stride;
    int i;
    stack = (stack + page - 1) / page * page;
    stride = stack + page;
    s->page = page;
    if (m->stacks && (m->stacks_n != s->n || m->stacks_each != stack)) spmd__stacks_unmap(m);
    if (!m->stacks) {
        m->stacks_len = stride * (size_t)s->n;
        m->stacks = (unsigned char *)mmap(NULL, m->stacks_len, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m->stacks == (unsigned char *)MAP_FAILED) {
            m->stacks = NULL;
            return 0;
        }
        m->stacks_n = s->n;
        m->stacks_each = stack;
        if ((m->stacks_guarded = spmd__stacks_guard(m->stacks, s->n, stride, page)) < 0) {
            spmd__stacks_unmap(m);
            return 0;
        }
    }
    for (i = 0; i < s->n; i++) {
        spmd__fiber *f = &s->fibs[i];
        unsigned char *gap = m->stacks + (size_t)i * stride;
        f->lo = gap + page;
        f->len = stack;
        f->gap = i < m->stacks_guarded ? NULL : (const uint64_t *)(const void *)gap;
    }
    return 1;
}

static void spmd__gap_check(const spmd__fiber *f) {
    size_t n = f->s->page / 8, i = f->state == SPMD__F_DONE ? 0 : n - SPMD__GAP_WORDS;
    uint64_t x = 0;
    if (!f->gap) return;
    for (; i < n; i++) x |= f->gap[i];
    if (!x) return;
    spmd__log(f->s->m, SPMD_LOG_ERROR, f->dev->id, "device %d overflowed its fiber stack of %zu bytes (written below "
              "it): give the mesh a larger thread_stack_size; aborting (memory is corrupt)", f->dev->id, f->len);
    abort();
}

static void spmd__to_carrier(spmd__fiber *f) {
    spmd__carrier *c = f->car;
    spmd__gap_check(f);
#ifdef SPMD__ASAN
    __sanitizer_start_switch_fiber(f->state == SPMD__F_DONE ? NULL : &f->fake, c->lo, c->len);
#endif
#ifdef SPMD__TSAN
    __tsan_switch_to_fiber(c->tsan, 0);
#endif
#if SPMD__CTX_ASM
    spmd__ctx_switch(&f->ctx, c->ctx.sp);
#else
    swapcontext(&f->ctx.uc, &c->ctx.uc);
#endif
#ifdef SPMD__ASAN
    __sanitizer_finish_switch_fiber(f->fake, &f->car->lo, &f->car->len);
#endif
}

static void spmd__run_returned(spmd_dev *d);

/* A fiber's first frame: run the device, then end on the carrier for good. */
static void spmd__fiber_entry(spmd__carrier *c) {
    spmd__fiber *f = c->cur;
    spmd__sched *s = f->s;
    spmd_dev *d = f->dev;
#ifdef SPMD__ASAN
    __sanitizer_finish_switch_fiber(NULL, &c->lo, &c->len);
#endif
    spmd__sunlock(&f->q->lock);
    s->fn(d, s->arg);
    spmd__run_returned(d);
    spmd__ignore(spmd_detach(d));
    spmd__slock(&f->q->lock);
    f->state = SPMD__F_DONE;
    SPMD__FADD(&s->nlive, -1);
    SPMD__FADD(&f->q->moves, (uint64_t)1);
    spmd__to_carrier(f);
    SPMD_ASSERT(!"a finished fiber was resumed");
}

#if !SPMD__CTX_ASM
static void spmd__fiber_entry_uc(unsigned hi, unsigned lo) {
    spmd__fiber_entry((spmd__carrier *)(uintptr_t)(((uint64_t)hi << 32) | lo));
}
#endif

/* Lay out the first frame on the fiber's stack (asm: the entry as the
   return address; ucontext: made when it first runs, on the carrier it
   runs on). */
static void spmd__fiber_make(spmd__sched *s, spmd__fiber *f) {
    f->s = s;
#ifdef SPMD__VALGRIND
    f->vg = VALGRIND_STACK_REGISTER(f->lo, f->lo + f->len);
#endif
#ifdef SPMD__TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
#if SPMD__CTX_ASM
    {
        unsigned char *top = f->lo + f->len;
        void (*entry)(spmd__carrier *) = spmd__fiber_entry;
#if SPMD__HAS_X86
        uint64_t *fr = (uint64_t *)(void *)(top - 72); /* the ret leaves rsp = top - 8, as after a call */
        memset(fr, 0, 72);
        fr[0] = 0x1f80u | ((uint64_t)0x037fu << 32); /* MXCSR and x87 control word: the defaults */
        memcpy(&fr[7], &entry, sizeof entry);
#else
        uint64_t *fr = (uint64_t *)(void *)(top - SPMD__CTX_FRAME); /* sp = top after the frame */
        memset(fr, 0, SPMD__CTX_FRAME);
        memcpy(&fr[11], &entry, sizeof entry);       /* x30 */
#endif
        f->ctx.sp = (void *)fr;
    }
#endif
}

static void spmd__fiber_unmake(spmd__fiber *f) {
#ifdef SPMD__VALGRIND
    if (f->s) VALGRIND_STACK_DEREGISTER(f->vg);
#endif
#ifdef SPMD__TSAN
    if (f->tsan) __tsan_destroy_fiber(f->tsan);
#endif
}

/* The devices' bells rang (see spmd__wake_dev, spmd__wake_group): their
   parked fibers are ready, under one taking of each home queue's lock for
   a run of devices at home there (a group's members mostly are). `cleared`:
   the caller took their bits out of the group it wakes (the fiber clears
   any other when it runs), else the ring does (spmd__sleep_end). */
static void spmd__fiber_ring(spmd_dev **ds, int n, int cleared) {
    spmd__runq *q = NULL;
    int i, run = 0; /* (rings in q so far: its moves grow once a taking of its lock) */
    for (i = 0; i < n && i < 4; i++) SPMD__PREFETCH_W(ds[i]->fib);
    for (i = 0; i < n; i++) {
        spmd__fiber *f = ds[i]->fib;
        if (i + 4 < n) SPMD__PREFETCH_W(ds[i + 4]->fib);
        if (f->q != q) {
            if (q) {
                SPMD__FADD(&q->moves, (uint64_t)run);
                spmd__sunlock(&q->lock);
            }
            q = f->q;
            run = 0;
            spmd__slock(&q->lock);
        }
        run++;
        if (f->state == SPMD__F_PARKED) {
            /* it polls again when it runs: out of the sleepers now, so that
               the finishers meanwhile neither ring it nor look at it (left
               to the fiber, a bit stayed set until its turn, and every wake
               of its groups looked at it: ppermute at 16,384 devices went
               from 9 to 286 ms) */
            if (cleared) SPMD__ST_SC(&ds[i]->sleeping, 0u);
            else spmd__sleep_end(ds[i]);
            spmd__ready_push(f);
        }
    }
    if (q) {
        SPMD__FADD(&q->moves, (uint64_t)run);
        spmd__sunlock(&q->lock);
    }
}

/* Park the device's fiber until its bell moves from `bell` (or for at most
   ns from now, 0: no limit), waiting for r; the carrier runs others meanwhile. */
static void spmd__fiber_park(spmd_dev *d, spmd_req *r, uint32_t bell, uint64_t now, uint64_t ns) {
    spmd__fiber *f = d->fib;
    spmd__runq *q = f->q;
    spmd__slock(&q->lock);
    if (SPMD__LD_SC(&d->bell) != bell) { /* rung since */
        spmd__sunlock(&q->lock);
        return;
    }
    f->state = SPMD__F_PARKED;
    f->waiting = r;
    f->wake_at = 0;
    if (ns && ns < UINT64_MAX / 2) f->wake_at = now + ns;
    if (f->wake_at && f->wake_at < q->next_wake) q->next_wake = f->wake_at;
    spmd__to_carrier(f);
    f->waiting = NULL;
    spmd__sunlock(&q->lock);
}

static void spmd__wake_expired(spmd__runq *q, uint64_t now);

/* Let the other ready fibers run first (spmd_test polling). */
static void spmd__fiber_yield(spmd_dev *d) {
    spmd__fiber *f = d->fib;
    spmd__runq *q = f->q;
    uint64_t now = spmd__now_ns();
    spmd__slock(&q->lock);
    /* a poll loop keeps the queue from emptying, where the carrier would
       wake the parked fibers whose time limit passed: wake them here (on
       libfabric the transport completes what they wait for without a bell) */
    if (q->next_wake <= now) spmd__wake_expired(q, now);
    spmd__ready_push(f);
    spmd__to_carrier(f);
    spmd__sunlock(&q->lock);
}

/* A wait ended: a move that a recheck round looks for. Without the lock:
   no round is judged while a fiber runs (its carrier's running), and the
   lock orders what a fiber did before it parks or ends. */
static void spmd__fiber_moved(spmd_dev *d) {
    SPMD__FADD(&d->fib->q->moves, (uint64_t)1);
}

/* Every queue's lock, taken in order (the scheduler's lock held), or let go. */
static void spmd__queues_lock(spmd__sched *s, int take) {
    int i;
    for (i = 0; i < s->nq; i++) {
        if (take) spmd__slock(&s->q[i].lock);
        else spmd__sunlock(&s->q[i].lock);
    }
}

static uint64_t spmd__sched_moves(spmd__sched *s) {
    uint64_t n = 0;
    int i;
    for (i = 0; i < s->nq; i++) n += SPMD__LD_ACQ(&s->q[i].moves);
    return n;
}

/* Nothing ready, nothing running, every live fiber parked (the scheduler's
   lock and every queue's held). The first time: a recheck round (every
   parked fiber polls once more). Then, if nothing moved: a deadlock.
   Returns with the scheduler's lock held, the queues' let go. */
static void spmd__fiber_stuck(spmd__sched *s) {
    spmd_mesh *m = s->m;
    char sum[400], line[400], prev[400];
    size_t at = 0;
    int i, nb = 0, nr = 0, run0 = -1;
    if (!s->recheck || spmd__sched_moves(s) != s->mark) {
        s->recheck = 1;
        s->mark = spmd__sched_moves(s);
        for (i = 0; i < s->n; i++)
            if (s->fibs[i].state == SPMD__F_PARKED) spmd__ready_push(&s->fibs[i]);
        spmd__queues_lock(s, 0);
        return;
    }
    s->recheck = 0;
    s->judging = 1; /* the lock is let go below: no other carrier judges meanwhile */
    /* the report: per device, compressing runs of devices in the same state */
    for (i = 0; i < s->n; i++) {
        if (s->fibs[i].state == SPMD__F_PARKED) nb++;
        else if (s->fibs[i].dev->returned) nr++;
    }
    at = (size_t)snprintf(sum, sizeof sum,
                          "deadlock: every device is blocked or has returned (%d blocked, %d returned%s", nb, nr,
                          nr ? ":" : "");
    for (i = 0; i < s->n && nr && at < sizeof sum; i++)
        if (s->fibs[i].state != SPMD__F_PARKED && s->fibs[i].dev->returned) {
            int w = snprintf(sum + at, sizeof sum - at, " %d", s->fibs[i].dev->id);
            if (w > 0) at += (size_t)w;
        }
    if (at < sizeof sum) snprintf(sum + at, sizeof sum - at, "); the report per device is in the log");
    spmd__queues_lock(s, 0);
    spmd__sunlock(&s->lock);
    spmd__log(m, SPMD_LOG_ERROR, -1, "%s", sum);
    /* the break logs the report (spmd_report's text, as for every cause);
       without the flight recorder it has nothing per device: then one line
       per device or run of devices in one state, from their requests */
    prev[0] = '\0';
    for (i = s->fibs[0].dev->ring ? s->n + 1 : 0; i <= s->n; i++) {
        spmd__fiber *f = i < s->n ? &s->fibs[i] : NULL;
        if (!f) line[0] = '\0';
        else if (f->state == SPMD__F_PARKED && f->waiting) spmd__wait_text(f->waiting, line, sizeof line);
        else snprintf(line, sizeof line, "%s", f->dev->returned ? "returned from its function" : "(no wait)");
        if (i && (!f || strcmp(line, prev) != 0)) {
            int a = s->fibs[run0].dev->id, b = s->fibs[i - 1].dev->id;
            if (a == b) spmd__log(m, SPMD_LOG_ERROR, -1, "deadlock report: device %d: %s", a, prev);
            else spmd__log(m, SPMD_LOG_ERROR, -1, "deadlock report: devices %d..%d: %s", a, b, prev);
        }
        if (!i || !f || strcmp(line, prev) != 0) {
            run0 = i;
            memcpy(prev, line, sizeof prev);
        }
    }
    spmd__break(m, SPMD_ERR_DEADLOCK, -1, sum); /* rings every parked fiber */
    spmd__slock(&s->lock);
    s->judging = 0;
}

/* Make ready the parked fibers of q whose time limit passed (its lock held). */
static void spmd__wake_expired(spmd__runq *q, uint64_t now) {
    uint64_t next = UINT64_MAX;
    int i;
    for (i = 0; i < q->cap; i++) {
        spmd__fiber *f = &q->fibs[i];
        if (f->state != SPMD__F_PARKED || !f->wake_at) continue;
        if (f->wake_at <= now) spmd__ready_push(f);
        else if (f->wake_at < next) next = f->wake_at;
    }
    q->next_wake = next;
}

/* Nothing ready in any queue (no lock held): wake timed parks that are
   due, judge a deadlock, or sleep until a ring or the next time limit.
   Counted idle before it looks: a push after the look wakes it. */
static void spmd__carrier_idle(spmd__sched *s) {
    uint64_t now = spmd__now_ns(), next = UINT64_MAX, ns;
    uint32_t gen;
    int i, ready = 0, running = 0;
    spmd__slock(&s->lock);
    SPMD__FADD(&s->nidle, 1);
    gen = SPMD__LD_ACQ(&s->gen);
    spmd__queues_lock(s, 1);
    for (i = 0; i < s->nq; i++) {
        spmd__runq *q = &s->q[i];
        if (q->next_wake <= now) spmd__wake_expired(q, now);
        if (q->next_wake < next) next = q->next_wake;
        ready += q->rcount;
    }
    for (i = 0; i < s->K; i++) running += s->cars[i].running;
    if (!ready && !running && SPMD__LD_ACQ(&s->nlive) && !s->judging && !s->m->vt->polled &&
        !SPMD__LD_ACQ(&s->m->broken)) {
        spmd__fiber_stuck(s); /* (lets the queues go) */
        ready = 1;            /* (the recheck round's, or the break's rings) */
    } else {
        spmd__queues_lock(s, 0);
    }
    spmd__sunlock(&s->lock);
    ns = next == UINT64_MAX ? 100000000u : next - now;
    if (!ready && SPMD__LD_ACQ(&s->nlive)) spmd__futex_wait(&s->gen, gen, ns < 100000000u ? ns : 100000000u);
    SPMD__FADD(&s->nidle, -1);
}

/* Nothing ready: watch the queues for a moment (SPMD__IDLE_SPIN_NS)
   before the idle path, whose sleep and wake cost a few microseconds
   each: a fiber made ready by a carrier running its peer is usually a
   moment away. 1 if one is ready now. */
#define SPMD__IDLE_SPIN_NS 20000
static int spmd__carrier_spin(spmd__sched *s) {
    uint64_t t0 = spmd__now_ns();
    unsigned n = 0;
    int i;
    if (s->K < 2) return 0; /* (one carrier: nobody else can make one ready) */
    for (;;) {
        for (i = 0; i < s->nq; i++)
            if (SPMD__LD_ACQ(&s->q[i].rcount)) return 1;
        if (!SPMD__LD_ACQ(&s->nlive)) return 1;
        spmd__pause();
        if ((++n & 63u) == 0 && spmd__now_ns() - t0 > SPMD__IDLE_SPIN_NS) return 0;
    }
}

/* One ready fiber of another queue than c's own (the first with one
   after its own), with its lock held, or NULL with none held. */
static spmd__fiber *spmd__carrier_steal(spmd__sched *s, spmd__carrier *c) {
    int i, k0 = (int)(c->own - s->q);
    spmd__fiber *f;
    for (i = 1; i < s->nq; i++) {
        spmd__runq *q = &s->q[(k0 + i) % s->nq];
        if (!SPMD__LD_ACQ(&q->rcount)) continue;
        spmd__slock(&q->lock);
        if ((f = spmd__ready_take(q)) != NULL) return f;
        spmd__sunlock(&q->lock);
    }
    return NULL;
}

/* The next fiber for carrier c, which holds `held` (or NULL): its own
   queue's first, else another queue's. Every SPMD__STEAL_EVERY turns it
   looks at the others first: a carrier held by one long computation
   would otherwise leave its queue to wait while this one runs its own
   busy pollers. Returns with that fiber's home queue lock held, or NULL
   with none held. */
#define SPMD__STEAL_EVERY 32
static spmd__fiber *spmd__carrier_next(spmd__sched *s, spmd__carrier *c, spmd__runq *held) {
    spmd__fiber *f;
    if (s->nq > 1 && ++c->turn % SPMD__STEAL_EVERY == 0) {
        if (held) spmd__sunlock(&held->lock);
        if ((f = spmd__carrier_steal(s, c)) != NULL) return f;
        held = NULL;
    }
    if (held != c->own) {
        if (held) spmd__sunlock(&held->lock);
        spmd__slock(&c->own->lock);
    }
    if ((f = spmd__ready_take(c->own)) != NULL) return f;
    spmd__sunlock(&c->own->lock);
    return spmd__carrier_steal(s, c);
}

static void *spmd__carrier_main(void *p) {
    spmd__carrier *c = (spmd__carrier *)p;
    spmd__sched *s = c->s;
    spmd__runq *held = NULL;
#ifdef SPMD__TSAN
    c->tsan = __tsan_get_current_fiber();
#endif
    for (;;) {
        spmd__fiber *f = spmd__carrier_next(s, c, held);
        held = f ? f->q : NULL;
        if (!f) {
            if (!SPMD__LD_ACQ(&s->nlive)) break;
            if (!spmd__carrier_spin(s)) spmd__carrier_idle(s);
            continue;
        }
        f->state = SPMD__F_RUNNING;
        f->car = c;
        SPMD__ST_REL(&c->cur, f);
        SPMD__ST_REL(&c->switches, c->switches + 1);
        c->running = 1;
#if !SPMD__CTX_ASM
        if (!f->started) {
            uintptr_t a = (uintptr_t)c;
            getcontext(&f->ctx.uc);
            f->ctx.uc.uc_stack.ss_sp = f->lo;
            f->ctx.uc.uc_stack.ss_size = f->len;
            f->ctx.uc.uc_link = NULL;
            makecontext(&f->ctx.uc, (void (*)(void))spmd__fiber_entry_uc, 2, (unsigned)((uint64_t)a >> 32),
                        (unsigned)(a & 0xffffffffu));
        }
#endif
        f->started = 1;
        f->dev->ptrs = c->ptrs;
        if (s->n >= SPMD__WARM_MIN) spmd__fiber_warm(held);
        spmd__to_fiber(c, f); /* (back with f's home queue lock held) */
        c->running = 0;
        SPMD__ST_REL(&c->cur, (spmd__fiber *)NULL);
    }
    /* the last fiber ended: the other carriers and the watchdog go */
    SPMD__FADD(&s->gen, 1u);
    spmd__futex_wake(&s->gen);
    SPMD__ST_SC(&s->finished, 1u);
    spmd__futex_wake(&s->finished);
    return NULL;
}

/* The thread that called spmd_run watches the `started` carriers until
   every fiber is done: a carrier that runs one device for 10 s (a tenth of
   the deadline if that is less, at least 1 s) without a switch gets a
   warning naming it. */
static void spmd__carriers_watch(spmd__sched *s, int started) {
    spmd_mesh *m = s->m;
    int64_t limit = m->timeout_ms / 10000 < 10 ? m->timeout_ms / 10000 : 10;
    int i;
    if (limit < 1) limit = 1;
    while (!SPMD__LD_ACQ(&s->finished)) {
        spmd__futex_wait(&s->finished, 0u, 1000000000u);
        for (i = 0; i < started; i++) {
            spmd__carrier *c = &s->cars[i];
            spmd__fiber *f = SPMD__LD_ACQ(&c->cur);
            uint64_t sw = SPMD__LD_ACQ(&c->switches);
            c->quiet = f && sw == c->seen ? c->quiet + 1 : 0;
            if (c->quiet == 0) c->warned = 0;
            c->seen = sw;
            if (c->quiet >= limit && !c->warned) {
                c->warned = 1;
                spmd__log(m, SPMD_LOG_WARN, f->dev->id,
                          "device %d has held carrier %d for %d s without waiting in spmdcoll: blocked outside the "
                          "library (its own mutex, a sleep)? Under fibers that stalls every device of the carrier",
                          f->dev->id, i, c->quiet);
            }
        }
    }
}

/* spmd_run under fibers (every device attached): run them and return when all are done. */
static spmd_status spmd__fibers_run(spmd_mesh *m, spmd_fn fn, void *arg) {
    spmd__sched s;
    int i, K, started = 0, lo = m->first_local;
    spmd_status st = SPMD_OK;
    memset(&s, 0, sizeof s);
    s.m = m;
    s.fn = fn;
    s.arg = arg;
    s.n = m->nlocal;
    K = m->carriers ? m->carriers : m->ncpu;
    s.K = K = K < s.n ? K : s.n;
    if (s.n == 0) return SPMD_OK;
    s.fibs = (spmd__fiber *)spmd__alloc(&m->alloc, (size_t)s.n * sizeof *s.fibs);
    s.ready = (spmd__fiber **)spmd__alloc(&m->alloc, (size_t)s.n * sizeof *s.ready);
    s.cars = (spmd__carrier *)spmd__alloc(&m->alloc, (size_t)K * sizeof *s.cars);
    s.q = (spmd__runq *)spmd__alloc(&m->alloc, (size_t)K * sizeof *s.q);
    if (!s.fibs || !s.ready || !s.cars || !s.q) st = SPMD_ERR_NOMEM;
    if (s.fibs) memset(s.fibs, 0, (size_t)s.n * sizeof *s.fibs);
    if (st == SPMD_OK && !spmd__stacks_map(&s, m->stack_size ? m->stack_size : SPMD__FIBER_STACK)) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "spmd_run: no memory for the stacks of %d fibers (%zu bytes each): %s", s.n,
                  m->stack_size ? m->stack_size : SPMD__FIBER_STACK, strerror(errno));
        st = SPMD_ERR_NOMEM;
    }
    for (i = 0; st == SPMD_OK && i < s.n; i++) {
        s.fibs[i].dev = m->devs[lo + i];
        spmd__fiber_make(&s, &s.fibs[i]);
        s.fibs[i].dev->fib = &s.fibs[i];
    }
    if (st == SPMD_OK) {
        s.nq = s.n >= SPMD__QUEUE_SPLIT * K ? K : 1;
        for (i = 0; i < s.nq; i++) { /* queue i: fibers i * n / nq up to (i + 1) * n / nq, all ready */
            spmd__runq *q = &s.q[i];
            int a = (int)((int64_t)i * s.n / s.nq), b = (int)((int64_t)(i + 1) * s.n / s.nq), j;
            memset(q, 0, sizeof *q);
            q->fibs = &s.fibs[a];
            q->ready = &s.ready[a];
            q->cap = q->rcount = b - a;
            q->next_wake = UINT64_MAX;
            q->rng = m->seed ? m->seed * 0x9e3779b97f4a7c15u + 1u + 2u * (uint64_t)i : 0u;
            if (m->seed && !q->rng) q->rng = 1; /* never 0 when seeded */
            for (j = a; j < b; j++) {
                s.fibs[j].q = q;
                s.fibs[j].state = SPMD__F_READY;
                s.ready[j] = &s.fibs[j];
            }
        }
        s.nlive = s.n;
        for (i = 0; i < K; i++) {
            memset(&s.cars[i], 0, sizeof s.cars[i]);
            s.cars[i].s = &s;
            s.cars[i].own = &s.q[i % s.nq];
            s.cars[i].ptrs = (const void **)spmd__alloc(&m->alloc, 3 * (size_t)m->size * sizeof(void *));
            if (!s.cars[i].ptrs) st = SPMD_ERR_NOMEM;
        }
        for (i = 0; i < K && st == SPMD_OK; i++) {
            pthread_attr_t attr;
            int e;
            pthread_attr_init(&attr);
            if (m->stack_size) pthread_attr_setstacksize(&attr, m->stack_size);
            e = pthread_create(&s.cars[i].th, &attr, spmd__carrier_main, &s.cars[i]);
            pthread_attr_destroy(&attr);
            if (e != 0) break;
            started++;
        }
        if (st != SPMD_OK) {
            spmd__log(m, SPMD_LOG_ERROR, -1, "spmd_run: no memory for the carriers' scratch pointers");
        } else if (!started) {
            spmd__log(m, SPMD_LOG_ERROR, -1, "spmd_run: could not start a carrier thread");
            st = SPMD_ERR_SYSTEM;
        } else {
            spmd__carriers_watch(&s, started);
            for (i = 0; i < started; i++) pthread_join(s.cars[i].th, NULL);
        }
    }
    for (i = 0; s.fibs && i < s.n; i++) {
        if (s.fibs[i].dev) {
            s.fibs[i].dev->fib = NULL;
            s.fibs[i].dev->ptrs = s.fibs[i].dev->ptrs_own; /* (the carriers' go) */
        }
        spmd__fiber_unmake(&s.fibs[i]);
    }
    for (i = 0; s.cars && i < K; i++) spmd__free(&m->alloc, (void *)s.cars[i].ptrs);
    for (i = 0; i < m->nlocal; i++) /* the devices of fibers never run */
        if (SPMD__LD_ACQ(&m->devs[lo + i]->attached)) spmd__ignore(spmd_detach(m->devs[lo + i]));
    spmd__free(&m->alloc, s.fibs);
    spmd__free(&m->alloc, s.ready);
    spmd__free(&m->alloc, s.cars);
    spmd__free(&m->alloc, s.q);
    return st;
}

// >>sharding
/* PartitionSpecs, shard_map and resharding, written on the public API
   (spmd_run, spmd_all_gather, spmd_all_to_all, spmd_psum, spmd_psum_scatter,
   spmd_axis_index, spmd_reduce_local) plus the block copier. A spec is kept
   by axis names (as JAX's P is independent of a mesh) and resolved against a
   mesh into axis indices whenever it is used. */
SPMD__SETUP_BEGIN

/* A spec resolved against a mesh, for an array of `rank` dimensions. */
typedef struct spmd__rspec {
    int rank;
    int n[SPMD_MAX_RANK];                  /* axes per dimension */
    int ax[SPMD_MAX_RANK][SPMD_MAX_AXES];  /* mesh axis indices, major first */
    int np;
    int pax[SPMD_MAX_AXES];                /* partial axes, as listed */
    unsigned used, partial;                /* masks of mesh axes */
} spmd__rspec;

/* Text being built into a caller's buffer: `at` counts what it needs. */
typedef struct spmd__out {
    char *buf;
    size_t len, at;
} spmd__out;

static void spmd__put(spmd__out *o, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(o->at < o->len ? o->buf + o->at : NULL, o->at < o->len ? o->len - o->at : 0, fmt, ap);
    va_end(ap);
    if (n > 0) o->at += (size_t)n;
}

/* Report a mesh-level failure: into why (if given) and the debug log. */
static spmd_status spmd__mfail(const spmd_mesh *m, spmd_msg *why, spmd_status s, const char *fmt, ...) {
    char text[sizeof(((spmd_msg *)0)->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (why) memcpy(why->text, text, sizeof text);
    if (m) spmd__log((spmd_mesh *)m, SPMD_LOG_DEBUG, -1, "%s: %s", spmd_status_name(s), text);
    return s;
}

static void spmd__msg_ok(spmd_msg *why) {
    if (why) why->text[0] = '\0';
}

/* A name stored in a spec field: terminated inside the field, 1..31 chars,
   none of the characters a mesh axis name may not hold (',' '*' blanks)
   nor a quote (the text form could not be read back). */
static int spmd__name_ok(const char *n) {
    size_t k = 0;
    while (k <= SPMD_MAX_AXIS_NAME && n[k]) k++;
    return k >= 1 && k <= SPMD_MAX_AXIS_NAME && n[strcspn(n, ", *\t\n\r'\"")] == '\0';
}

/* Structural validity of a spec (no mesh): counts, names, no axis twice. */
static spmd_status spmd__spec_valid(const spmd_spec *s, char *why, size_t wl) {
    const char *seen[SPMD_MAX_AXES * (SPMD_MAX_RANK + 1)];
    int ns = 0, i, k, j;
    if (s->rank < 0 || s->rank > SPMD_MAX_RANK) {
        snprintf(why, wl, "spec has %d dimensions (0..%d)", s->rank, SPMD_MAX_RANK);
        return SPMD_ERR_INVALID;
    }
    if (s->npartial < 0 || s->npartial > SPMD_MAX_AXES) {
        snprintf(why, wl, "spec has %d partial axes (0..%d)", s->npartial, SPMD_MAX_AXES);
        return SPMD_ERR_INVALID;
    }
    for (i = 0; i <= s->rank; i++) {
        int n = i < s->rank ? s->naxes[i] : s->npartial;
        if (n < 0 || n > SPMD_MAX_AXES) {
            snprintf(why, wl, "spec dimension %d has %d axes (0..%d)", i, n, SPMD_MAX_AXES);
            return SPMD_ERR_INVALID;
        }
        for (k = 0; k < n; k++) {
            const char *nm = i < s->rank ? s->axes[i][k] : s->partial[k];
            if (!spmd__name_ok(nm)) {
                snprintf(why, wl, "spec %s %d: axis name %d is empty, longer than %d characters or holds one "
                         "of , * blanks quotes", i < s->rank ? "dimension" : "partial list", i < s->rank ? i : 0, k,
                         SPMD_MAX_AXIS_NAME);
                return SPMD_ERR_INVALID;
            }
            for (j = 0; j < ns; j++)
                if (strcmp(seen[j], nm) == 0) {
                    snprintf(why, wl, "axis '%s' appears twice in the spec (a mesh axis shards at most one "
                             "dimension, once)", nm);
                    return SPMD_ERR_DUP_AXIS;
                }
            if (ns == (int)(sizeof seen / sizeof seen[0])) {
                snprintf(why, wl, "spec names more axes than a mesh can have");
                return SPMD_ERR_INVALID;
            }
            seen[ns++] = nm;
        }
    }
    return SPMD_OK;
}

static void spmd__spec_text(const spmd_spec *s, spmd__out *o) {
    int i, k;
    spmd__put(o, "P(");
    for (i = 0; i < s->rank; i++) {
        spmd__put(o, "%s", i ? ", " : "");
        if (s->naxes[i] == 0) spmd__put(o, "None");
        else if (s->naxes[i] == 1) spmd__put(o, "'%s'", s->axes[i][0]);
        else {
            spmd__put(o, "(");
            for (k = 0; k < s->naxes[i]; k++) spmd__put(o, "%s'%s'", k ? ", " : "", s->axes[i][k]);
            spmd__put(o, ")");
        }
    }
    if (s->npartial) {
        spmd__put(o, "%spartial=", s->rank ? ", " : "");
        if (s->npartial == 1) spmd__put(o, "'%s'", s->partial[0]);
        else {
            spmd__put(o, "(");
            for (k = 0; k < s->npartial; k++) spmd__put(o, "%s'%s'", k ? ", " : "", s->partial[k]);
            spmd__put(o, ")");
        }
    }
    spmd__put(o, ")");
}

/* The spec's text for messages (cut to fit). */
static const char *spmd__spec_str(const spmd_spec *s, char *buf, size_t len) {
    spmd__out o;
    o.buf = buf;
    o.len = len;
    o.at = 0;
    buf[0] = '\0';
    spmd__spec_text(s, &o);
    return buf;
}

int spmd_spec_format(const spmd_spec *s, char *buf, size_t len) {
    char why[160];
    spmd__out o;
    if (!s || spmd__spec_valid(s, why, sizeof why) != SPMD_OK) {
        if (buf && len) buf[0] = '\0';
        return -1;
    }
    o.buf = buf;
    o.len = buf ? len : 0;
    o.at = 0;
    if (buf && len) buf[0] = '\0';
    spmd__spec_text(s, &o);
    return (int)o.at;
}

/* ---- parsing P(...) ---- */
static const char *spmd__skip(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}
static int spmd__ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
/* A word that is exactly `w` at p (not the start of a longer identifier). */
static int spmd__word(const char *p, const char *w) {
    size_t n = strlen(w);
    return strncmp(p, w, n) == 0 && !spmd__ident_char(p[n]);
}

/* One axis name, quoted ('x' or "x") or bare (x); *pp advanced past it. */
static spmd_status spmd__parse_name(const char **pp, char *out, const char *text, char *why, size_t wl) {
    const char *p = *pp, *s, *e;
    size_t n;
    if (*p == '\'' || *p == '"') {
        char q = *p++;
        s = p;
        while (*p && *p != q) p++;
        if (!*p) {
            snprintf(why, wl, "unterminated quote in \"%s\"", text);
            return SPMD_ERR_INVALID;
        }
        e = p++;
    } else {
        s = p;
        while (spmd__ident_char(*p)) p++;
        e = p;
        if (e == s) {
            snprintf(why, wl, "expected an axis name, None or a tuple at offset %d of \"%s\"", (int)(s - text),
                     text);
            return SPMD_ERR_INVALID;
        }
        if (spmd__word(s, "None")) {
            snprintf(why, wl, "None inside a tuple in \"%s\"", text);
            return SPMD_ERR_INVALID;
        }
    }
    n = (size_t)(e - s);
    if (n == 0 || n > SPMD_MAX_AXIS_NAME) {
        snprintf(why, wl, "axis name of %d characters in \"%s\" (1..%d)", (int)n, text, SPMD_MAX_AXIS_NAME);
        return SPMD_ERR_INVALID;
    }
    if (strcspn(s, ", *\t\n\r'\"") < n) {
        snprintf(why, wl, "axis name '%.*s' in \"%s\" holds one of , * blanks quotes", (int)n, s, text);
        return SPMD_ERR_INVALID;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    *pp = p;
    return SPMD_OK;
}

/* A name or a tuple of names into names[*n]. */
static spmd_status spmd__parse_axes_item(const char **pp, char (*names)[SPMD_MAX_AXIS_NAME + 1], int *n,
                                         const char *text, char *why, size_t wl) {
    const char *p = *pp;
    spmd_status s;
    *n = 0;
    if (*p != '(') {
        s = spmd__parse_name(&p, names[0], text, why, wl);
        if (s != SPMD_OK) return s;
        *n = 1;
        *pp = p;
        return SPMD_OK;
    }
    p = spmd__skip(p + 1);
    while (*p != ')') {
        if (*n == SPMD_MAX_AXES) {
            snprintf(why, wl, "more than %d axes in one tuple of \"%s\"", SPMD_MAX_AXES, text);
            return SPMD_ERR_INVALID;
        }
        s = spmd__parse_name(&p, names[*n], text, why, wl);
        if (s != SPMD_OK) return s;
        (*n)++;
        p = spmd__skip(p);
        if (*p == ',') p = spmd__skip(p + 1);
        else if (*p != ')') {
            snprintf(why, wl, "expected ',' or ')' at offset %d of \"%s\"", (int)(p - text), text);
            return SPMD_ERR_INVALID;
        }
    }
    *pp = p + 1;
    return SPMD_OK;
}

static spmd_status spmd__parse_spec(const char *text, spmd_spec *o, char *why, size_t wl) {
    const char *p = spmd__skip(text);
    spmd_status s;
    int got_partial = 0;
    memset(o, 0, sizeof *o);
    if (spmd__word(p, "PartitionSpec")) p += 13;
    else if (spmd__word(p, "P")) p += 1;
    p = spmd__skip(p);
    if (*p != '(') {
        snprintf(why, wl, "expected P( at the start of \"%s\"", text);
        return SPMD_ERR_INVALID;
    }
    p = spmd__skip(p + 1);
    while (*p != ')') {
        if (spmd__word(p, "partial") || spmd__word(p, "unreduced")) {
            const char *q = spmd__skip(p + (p[0] == 'p' ? 7 : 9));
            if (*q != '=') {
                snprintf(why, wl, "expected '=' after %s in \"%s\"", p[0] == 'p' ? "partial" : "unreduced", text);
                return SPMD_ERR_INVALID;
            }
            if (got_partial++) {
                snprintf(why, wl, "partial axes given twice in \"%s\"", text);
                return SPMD_ERR_INVALID;
            }
            p = spmd__skip(q + 1);
            if (*p == '{') { /* JAX prints unreduced={'y'} */
                const char *e = strchr(p, '}');
                char tup[600];
                const char *tp = tup;
                size_t n = e ? (size_t)(e - p) : 0;
                if (!e || n + 2 > sizeof tup) {
                    snprintf(why, wl, "unterminated '{' in \"%s\"", text);
                    return SPMD_ERR_INVALID;
                }
                tup[0] = '(';
                memcpy(tup + 1, p + 1, n - 1);
                tup[n] = ')';
                tup[n + 1] = '\0';
                s = spmd__parse_axes_item(&tp, o->partial, &o->npartial, text, why, wl);
                p = e + 1;
            } else {
                s = spmd__parse_axes_item(&p, o->partial, &o->npartial, text, why, wl);
            }
            if (s != SPMD_OK) return s;
        } else {
            if (got_partial) {
                snprintf(why, wl, "a dimension after the partial axes in \"%s\"", text);
                return SPMD_ERR_INVALID;
            }
            if (o->rank == SPMD_MAX_RANK) {
                snprintf(why, wl, "more than %d dimensions in \"%s\"", SPMD_MAX_RANK, text);
                return SPMD_ERR_INVALID;
            }
            if (spmd__word(p, "None")) {
                o->naxes[o->rank] = 0;
                p += 4;
            } else {
                s = spmd__parse_axes_item(&p, o->axes[o->rank], &o->naxes[o->rank], text, why, wl);
                if (s != SPMD_OK) return s;
            }
            o->rank++;
        }
        p = spmd__skip(p);
        if (*p == ',') p = spmd__skip(p + 1);
        else if (*p != ')') {
            snprintf(why, wl, "expected ',' or ')' at offset %d of \"%s\"", (int)(p - text), text);
            return SPMD_ERR_INVALID;
        }
    }
    p = spmd__skip(p + 1);
    if (*p) {
        snprintf(why, wl, "unexpected text after ')' at offset %d of \"%s\"", (int)(p - text), text);
        return SPMD_ERR_INVALID;
    }
    return spmd__spec_valid(o, why, wl);
}

spmd_status spmd_spec_parse(const char *text, spmd_spec *out, spmd_msg *why) {
    char w[sizeof(((spmd_msg *)0)->text)];
    spmd_spec sp;
    spmd_status s;
    if (!text || !out) return spmd__mfail(NULL, why, SPMD_ERR_NULL, "spec_parse: %s is NULL", text ? "out" : "text");
    s = spmd__parse_spec(text, &sp, w, sizeof w);
    if (s != SPMD_OK) return spmd__mfail(NULL, why, s, "spec_parse: %s", w);
    *out = sp;
    spmd__msg_ok(why);
    return SPMD_OK;
}

spmd_status spmd_spec_init(spmd_spec *out, int rank, const char *const *dims, const char *partial, spmd_msg *why) {
    char w[sizeof(((spmd_msg *)0)->text)];
    spmd_spec sp;
    int i;
    spmd_status s;
    if (!out) return spmd__mfail(NULL, why, SPMD_ERR_NULL, "spec_init: out is NULL");
    if (rank < 0 || rank > SPMD_MAX_RANK)
        return spmd__mfail(NULL, why, SPMD_ERR_INVALID, "spec_init: rank %d is outside 0..%d", rank, SPMD_MAX_RANK);
    if (rank > 0 && !dims) return spmd__mfail(NULL, why, SPMD_ERR_NULL, "spec_init: dims is NULL");
    memset(&sp, 0, sizeof sp);
    sp.rank = rank;
    for (i = 0; i <= rank; i++) {
        const char *t = i < rank ? dims[i] : partial, *all = t;
        int *n = i < rank ? &sp.naxes[i] : &sp.npartial;
        char (*names)[SPMD_MAX_AXIS_NAME + 1] = i < rank ? sp.axes[i] : sp.partial;
        while (t && *t) {
            const char *e = t + strcspn(t, ","), *a = t, *b = e;
            size_t len;
            while (*a == ' ') a++;
            while (b > a && b[-1] == ' ') b--;
            len = (size_t)(b - a);
            if (len == 0 || len > SPMD_MAX_AXIS_NAME)
                return spmd__mfail(NULL, why, SPMD_ERR_INVALID,
                                   "spec_init: %s \"%s\": axis names must be 1..%d characters",
                                   i < rank ? "dimension" : "partial", all, SPMD_MAX_AXIS_NAME);
            if (*n == SPMD_MAX_AXES)
                return spmd__mfail(NULL, why, SPMD_ERR_INVALID, "spec_init: more than %d axes in \"%s\"",
                                   SPMD_MAX_AXES, all);
            memcpy(names[*n], a, len);
            names[*n][len] = '\0';
            (*n)++;
            t = *e ? e + 1 : e;
        }
    }
    s = spmd__spec_valid(&sp, w, sizeof w);
    if (s != SPMD_OK) return spmd__mfail(NULL, why, s, "spec_init: %s", w);
    *out = sp;
    spmd__msg_ok(why);
    return SPMD_OK;
}

/* ---- specs against a mesh ---- */
static int spmd__mesh_axis(const spmd_mesh *m, const char *name) {
    int i;
    for (i = 0; i < m->ndim; i++)
        if (strcmp(m->names[i], name) == 0) return i;
    return -1;
}

static void spmd__mesh_text(const spmd_mesh *m, char *buf, size_t len) {
    spmd__out o;
    int i;
    o.buf = buf;
    o.len = len;
    o.at = 0;
    buf[0] = '\0';
    spmd__put(&o, "(");
    for (i = 0; i < m->ndim; i++) spmd__put(&o, "%s%s=%d", i ? ", " : "", m->names[i], m->shape[i]);
    spmd__put(&o, ")");
}

/* Resolve s for an array of `rank` dims on mesh m. */
static spmd_status spmd__resolve(const spmd_mesh *m, const spmd_spec *s, int rank, spmd__rspec *r, char *why,
                                 size_t wl) {
    char st[400], mt[300];
    int i, k;
    spmd_status e = spmd__spec_valid(s, why, wl);
    if (e != SPMD_OK) return e;
    if (rank < 0 || rank > SPMD_MAX_RANK) {
        snprintf(why, wl, "array rank %d is outside 0..%d", rank, SPMD_MAX_RANK);
        return SPMD_ERR_INVALID;
    }
    if (s->rank > rank) {
        snprintf(why, wl, "%s has %d entries but the array has rank %d", spmd__spec_str(s, st, sizeof st), s->rank,
                 rank);
        return SPMD_ERR_SHAPE;
    }
    memset(r, 0, sizeof *r);
    r->rank = rank;
    for (i = 0; i <= s->rank; i++) {
        int n = i < s->rank ? s->naxes[i] : s->npartial;
        for (k = 0; k < n; k++) {
            const char *nm = i < s->rank ? s->axes[i][k] : s->partial[k];
            int a = spmd__mesh_axis(m, nm);
            if (a < 0) {
                spmd__mesh_text(m, mt, sizeof mt);
                snprintf(why, wl, "unknown axis '%s' in %s (mesh %s)", nm, spmd__spec_str(s, st, sizeof st), mt);
                return SPMD_ERR_AXIS;
            }
            if (i < s->rank) {
                r->ax[i][k] = a;
                r->used |= 1u << a;
            } else {
                r->pax[k] = a;
                r->partial |= 1u << a;
            }
        }
        if (i < s->rank) r->n[i] = n;
        else r->np = n;
    }
    return SPMD_OK;
}

/* How many blocks dimension i is cut into. */
static int64_t spmd__parts(const spmd_mesh *m, const spmd__rspec *r, int i) {
    return spmd__axes_size(m, r->ax[i], r->n[i]);
}

/* Block index along dim i of the device with mesh coordinates c. */
static int64_t spmd__dim_index(const spmd_mesh *m, const spmd__rspec *r, int i, const int *c) {
    int64_t v = 0;
    int k;
    for (k = 0; k < r->n[i]; k++) v = v * m->shape[r->ax[i][k]] + c[r->ax[i][k]];
    return v;
}

static void spmd__coords(const spmd_mesh *m, int dev, int *c) {
    int j;
    for (j = 0; j < m->ndim; j++) {
        c[j] = dev / m->stride[j];
        dev %= m->stride[j];
    }
}

static int spmd__dev_at(const spmd_mesh *m, const int *c) {
    int j, id = 0;
    for (j = 0; j < m->ndim; j++) id += c[j] * m->stride[j];
    return id;
}

/* The global shape against the spec: non-negative, divisible. */
static spmd_status spmd__divides(const spmd_mesh *m, const spmd_spec *s, const spmd__rspec *r, const int64_t *g,
                                 char *why, size_t wl) {
    char st[400];
    int i, k;
    for (i = 0; i < r->rank; i++) {
        int64_t p = spmd__parts(m, r, i);
        if (g[i] < 0) {
            snprintf(why, wl, "global_shape[%d] = %lld is negative", i, (long long)g[i]);
            return SPMD_ERR_SHAPE;
        }
        if (g[i] % p != 0) {
            spmd__out o;
            char ax[200];
            o.buf = ax;
            o.len = sizeof ax;
            o.at = 0;
            ax[0] = '\0';
            for (k = 0; k < r->n[i]; k++)
                spmd__put(&o, "%s%s=%d", k ? "*" : "", m->names[r->ax[i][k]], m->shape[r->ax[i][k]]);
            snprintf(why, wl, "dimension %d of size %lld is not divisible by %lld (axes %s) in %s", i,
                     (long long)g[i], (long long)p, ax, spmd__spec_str(s, st, sizeof st));
            return SPMD_ERR_SHAPE;
        }
    }
    return SPMD_OK;
}

/* The common prelude of the mesh-level functions. */
static spmd_status spmd__prep(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *g, spmd__rspec *r,
                              const char *fn, spmd_msg *why) {
    char w[400];
    spmd_status e;
    if (!m || !s || (rank > 0 && !g))
        return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: %s is NULL", fn, !m ? "mesh" : !s ? "spec" : "global_shape");
    e = spmd__resolve(m, s, rank, r, w, sizeof w);
    if (e == SPMD_OK) e = spmd__divides(m, s, r, g, w, sizeof w);
    if (e != SPMD_OK) return spmd__mfail(m, why, e, "%s: %s", fn, w);
    return SPMD_OK;
}

spmd_status spmd_spec_check(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *global_shape,
                            spmd_msg *why) {
    spmd__rspec r;
    spmd_status e = spmd__prep(m, s, rank, global_shape, &r, "spec_check", why);
    if (e == SPMD_OK) spmd__msg_ok(why);
    return e;
}

spmd_status spmd_block_shape(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *global_shape,
                             int64_t *block_shape, spmd_msg *why) {
    spmd__rspec r;
    int i;
    spmd_status e = spmd__prep(m, s, rank, global_shape, &r, "block_shape", why);
    if (e != SPMD_OK) return e;
    if (rank > 0 && !block_shape) return spmd__mfail(m, why, SPMD_ERR_NULL, "block_shape: block_shape is NULL");
    for (i = 0; i < rank; i++) block_shape[i] = global_shape[i] / spmd__parts(m, &r, i);
    spmd__msg_ok(why);
    return SPMD_OK;
}

spmd_status spmd_block_start(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *global_shape,
                             int device, int64_t *start, spmd_msg *why) {
    spmd__rspec r;
    int i, c[SPMD_MAX_AXES];
    spmd_status e = spmd__prep(m, s, rank, global_shape, &r, "block_start", why);
    if (e != SPMD_OK) return e;
    if (rank > 0 && !start) return spmd__mfail(m, why, SPMD_ERR_NULL, "block_start: start is NULL");
    if (device < 0 || device >= m->size)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "block_start: device %d is outside 0..%d", device, m->size - 1);
    spmd__coords(m, device, c);
    for (i = 0; i < rank; i++)
        start[i] = spmd__dim_index(m, &r, i, c) * (global_shape[i] / spmd__parts(m, &r, i));
    spmd__msg_ok(why);
    return SPMD_OK;
}

/* An array argument of a mesh-level call: rank, dtype, shape, data. */
static spmd_status spmd__arr_ok(const spmd_mesh *m, const spmd_array *a, const char *fn, const char *which,
                                size_t *numel, spmd_msg *why) {
    size_t n = 1;
    int i;
    if (!a) return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: %s is NULL", fn, which);
    if (a->rank < 0 || a->rank > SPMD_MAX_RANK)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "%s: %s has rank %d (0..%d)", fn, which, a->rank, SPMD_MAX_RANK);
    if ((int)a->dtype <= SPMD_DTYPE_NONE || (int)a->dtype >= SPMD_DTYPE_COUNT)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "%s: %s has invalid dtype %d", fn, which, (int)a->dtype);
    for (i = 0; i < a->rank; i++) {
        if (a->shape[i] < 0)
            return spmd__mfail(m, why, SPMD_ERR_SHAPE, "%s: %s.shape[%d] = %lld is negative", fn, which, i,
                               (long long)a->shape[i]);
        if (a->shape[i] && n > (size_t)INT64_MAX / 16 / (size_t)a->shape[i])
            return spmd__mfail(m, why, SPMD_ERR_OVERFLOW, "%s: %s has too many elements", fn, which);
        n *= (size_t)a->shape[i];
    }
    if (n && !a->data) return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: %s.data is NULL", fn, which);
    *numel = n;
    return SPMD_OK;
}

/* Copy the box of extent ext between two row-major arrays, starting at
   sstart in src (shape ssh) and dstart in dst (shape dsh). */
static void spmd__copy_box(unsigned char *dst, const int64_t *dsh, const int64_t *dstart, const unsigned char *src,
                           const int64_t *ssh, const int64_t *sstart, const int64_t *ext, int rank, size_t es) {
    spmd__blk b;
    int64_t so = 0, dof = 0;
    int i;
    for (i = 0; i < rank; i++)
        if (ext[i] == 0) return;
    memset(&b, 0, sizeof b);
    b.n = rank;
    spmd__strides(ssh, rank, (int64_t)es, b.ss);
    spmd__strides(dsh, rank, (int64_t)es, b.ds);
    for (i = 0; i < rank; i++) {
        b.ext[i] = ext[i];
        so += sstart[i] * b.ss[i];
        dof += dstart[i] * b.ds[i];
    }
    spmd__blk_fold(&b, (int64_t)es);
    spmd__blk_copy(&b, dst + dof, src + so);
}

static int spmd__any_coord(const spmd_mesh *m, unsigned mask, const int *c) {
    int j;
    for (j = 0; j < m->ndim; j++)
        if ((mask >> j & 1u) && c[j] != 0) return 1;
    return 0;
}

/* Fill one device's block from the global array (validated). */
static void spmd__put_block(const spmd_mesh *m, const spmd__rspec *r, const spmd_array *g, int dev, void *block) {
    int64_t bs[SPMD_MAX_RANK], st[SPMD_MAX_RANK], zero[SPMD_MAX_RANK];
    int c[SPMD_MAX_AXES], i;
    size_t es = spmd__dtype_sizes[g->dtype], n = 1;
    spmd__coords(m, dev, c);
    for (i = 0; i < g->rank; i++) {
        bs[i] = g->shape[i] / spmd__parts(m, r, i);
        st[i] = spmd__dim_index(m, r, i, c) * bs[i];
        zero[i] = 0;
        n *= (size_t)bs[i];
    }
    if (n == 0) return;
    if (spmd__any_coord(m, r->partial, c)) memset(block, 0, n * es);
    else spmd__copy_box((unsigned char *)block, bs, zero, (const unsigned char *)g->data, g->shape, st, bs, g->rank, es);
}

spmd_status spmd_device_put(const spmd_mesh *m, const spmd_spec *s, const spmd_array *global, int device,
                            const spmd_array *block, spmd_msg *why) {
    spmd__rspec r;
    size_t ng, nb;
    int64_t bs[SPMD_MAX_RANK];
    int i;
    spmd_status e;
    if (!m) return spmd__mfail(m, why, SPMD_ERR_NULL, "device_put: mesh is NULL");
    if ((e = spmd__arr_ok(m, global, "device_put", "global", &ng, why)) != SPMD_OK) return e;
    if ((e = spmd__arr_ok(m, block, "device_put", "block", &nb, why)) != SPMD_OK) return e;
    if ((e = spmd__prep(m, s, global->rank, global->shape, &r, "device_put", why)) != SPMD_OK) return e;
    if (device < 0 || device >= m->size)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "device_put: device %d is outside 0..%d", device, m->size - 1);
    for (i = 0; i < global->rank; i++) bs[i] = global->shape[i] / spmd__parts(m, &r, i);
    if (block->dtype != global->dtype || block->rank != global->rank ||
        memcmp(block->shape, bs, (size_t)global->rank * sizeof(int64_t)) != 0) {
        char want[160], got[160];
        spmd__shape_text(bs, global->rank, want, sizeof want);
        spmd__shape_text(block->shape, block->rank, got, sizeof got);
        return spmd__mfail(m, why, SPMD_ERR_SHAPE, "device_put: block is %s %s but must be %s %s",
                           spmd_dtype_name(block->dtype), got, spmd_dtype_name(global->dtype), want);
    }
    spmd__put_block(m, &r, global, device, block->data);
    spmd__msg_ok(why);
    return SPMD_OK;
}

/* "(row=0, col=1)" */
static void spmd__coords_text(const spmd_mesh *m, int dev, char *buf, size_t len) {
    spmd__out o;
    int c[SPMD_MAX_AXES], j;
    o.buf = buf;
    o.len = len;
    o.at = 0;
    buf[0] = '\0';
    spmd__coords(m, dev, c);
    spmd__put(&o, "(");
    for (j = 0; j < m->ndim; j++) spmd__put(&o, "%s%s=%d", j ? ", " : "", m->names[j], c[j]);
    spmd__put(&o, ")");
}

/* The axes in mask as "'x', 'y'". */
static void spmd__mask_text(const spmd_mesh *m, unsigned mask, char *buf, size_t len) {
    spmd__out o;
    int j, k = 0;
    o.buf = buf;
    o.len = len;
    o.at = 0;
    buf[0] = '\0';
    for (j = 0; j < m->ndim; j++)
        if (mask >> j & 1u) spmd__put(&o, "%s'%s'", k++ ? ", " : "", m->names[j]);
}

/* Assemble (see spmd_assemble); check: compare the copies first; write: then
   write global (0: validate and check only). */
/* shard_map's replication check: along the axes U that hold copies,
   every device's block (bb bytes, shape bs) against the one at coordinate
   0 there; a difference is SPMD_ERR_MISMATCH naming up to 4 devices and
   where their blocks first differ. */
static spmd_status spmd__asm_copies(const spmd_mesh *m, const spmd_spec *s, const void *const *blocks,
                                    const spmd_array *g, const int64_t *bs, size_t bb, unsigned U, const char *fn,
                                    spmd_msg *why) {
    size_t es = spmd__dtype_sizes[g->dtype];
    int i, d, bad = 0, c[SPMD_MAX_AXES];
    char badtext[400];
    spmd__out bo;
    /* the copies: every device against the one at coordinate 0 on U */
    bo.buf = badtext;
    bo.len = sizeof badtext;
    bo.at = 0;
    badtext[0] = '\0';
    for (d = 0; d < m->size; d++) {
        int rc[SPMD_MAX_AXES], rep;
        spmd__coords(m, d, c);
        memcpy(rc, c, sizeof rc);
        for (i = 0; i < m->ndim; i++)
            if (U >> i & 1u) rc[i] = 0;
        rep = spmd__dev_at(m, rc);
        if (rep != d && memcmp(blocks[d], blocks[rep], bb) != 0) {
            if (bad < 4) {
                const unsigned char *a = (const unsigned char *)blocks[d], *b = (const unsigned char *)blocks[rep];
                size_t off = 0, el;
                int64_t ix[SPMD_MAX_RANK];
                char ct[120], rt[120], it[160];
                while (a[off] == b[off]) off++;
                el = off / es;
                for (i = g->rank - 1; i >= 0; i--) {
                    ix[i] = bs[i] ? (int64_t)(el % (size_t)bs[i]) : 0;
                    el = bs[i] ? el / (size_t)bs[i] : 0;
                }
                spmd__coords_text(m, d, ct, sizeof ct);
                spmd__coords_text(m, rep, rt, sizeof rt);
                spmd__shape_text(ix, g->rank, it, sizeof it);
                spmd__put(&bo, "%sdevice %d %s differs from device %d %s at block index %s", bad ? "; " : "", d, ct,
                          rep, rt, it);
            }
            bad++;
        }
    }
    if (bad) {
        char ut[200], st_text[400];
        spmd__mask_text(m, U, ut, sizeof ut);
        return spmd__mfail(m, why, SPMD_ERR_MISMATCH,
                           "%s: %s claims replication over %s but the blocks vary along it: %s%s (%d device%s)",
                           fn, spmd__spec_str(s, st_text, sizeof st_text), ut, badtext, bad > 4 ? "; ..." : "", bad,
                           bad == 1 ? " differs" : "s differ");
    }
    return SPMD_OK;
}

static spmd_status spmd__assemble(const spmd_mesh *m, const spmd_spec *s, const void *const *blocks,
                                  const spmd_array *g, int check, int write, const char *fn, spmd_msg *why) {
    spmd__rspec r;
    size_t ng, es, nb = 1, bb;
    int64_t bs[SPMD_MAX_RANK], st[SPMD_MAX_RANK], zero[SPMD_MAX_RANK];
    unsigned all = 0, U;
    int i, d, c[SPMD_MAX_AXES];
    spmd_status e;
    unsigned char *tmp = NULL;
    const void **ins = NULL;
    if (!m) return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: mesh is NULL", fn);
    if ((e = spmd__arr_ok(m, g, fn, "global", &ng, why)) != SPMD_OK) return e;
    if ((e = spmd__prep(m, s, g->rank, g->shape, &r, fn, why)) != SPMD_OK) return e;
    if (!blocks) return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: blocks is NULL", fn);
    es = spmd__dtype_sizes[g->dtype];
    for (i = 0; i < g->rank; i++) {
        bs[i] = g->shape[i] / spmd__parts(m, &r, i);
        zero[i] = 0;
        nb *= (size_t)bs[i];
    }
    bb = nb * es;
    if (ng == 0) {
        spmd__msg_ok(why);
        return SPMD_OK;
    }
    for (d = 0; d < m->size; d++)
        if (!blocks[d]) return spmd__mfail(m, why, SPMD_ERR_NULL, "%s: blocks[%d] is NULL", fn, d);
    for (i = 0; i < m->ndim; i++) all |= 1u << i;
    U = all & ~r.used & ~r.partial; /* the axes that hold copies */
    if (check && U && (e = spmd__asm_copies(m, s, blocks, g, bs, bb, U, fn, why)) != SPMD_OK) return e;
    if (!write) {
        spmd__msg_ok(why);
        return SPMD_OK;
    }
    if (r.np) {
        tmp = (unsigned char *)spmd__alloc(&m->alloc, bb);
        ins = (const void **)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *ins);
        if (!tmp || !ins) {
            spmd__free(&m->alloc, tmp);
            spmd__free(&m->alloc, (void *)ins);
            return spmd__mfail(m, why, SPMD_ERR_NOMEM, "%s: out of memory for a block of %zu bytes", fn, bb);
        }
    }
    /* place the block of every device at coordinate 0 on U and on the partial axes */
    for (d = 0; d < m->size; d++) {
        const void *src = blocks[d];
        spmd__coords(m, d, c);
        if (spmd__any_coord(m, U | r.partial, c)) continue;
        for (i = 0; i < g->rank; i++) st[i] = spmd__dim_index(m, &r, i, c) * bs[i];
        if (r.np && nb) {
            int P = spmd__axes_size(m, r.pax, r.np), k, v;
            for (v = 0; v < P; v++) { /* the summands, the partial axes linearised as listed */
                int pc[SPMD_MAX_AXES], t = v;
                memcpy(pc, c, sizeof pc);
                for (k = r.np - 1; k >= 0; k--) {
                    pc[r.pax[k]] = t % m->shape[r.pax[k]];
                    t /= m->shape[r.pax[k]];
                }
                ins[v] = blocks[spmd__dev_at(m, pc)];
            }
            spmd__ignore(spmd_reduce_local(tmp, ins, P, nb, g->dtype, g->dtype == SPMD_BOOL ? SPMD_OP_MAX : SPMD_OP_SUM));
            src = tmp;
        }
        spmd__copy_box((unsigned char *)g->data, g->shape, st, (const unsigned char *)src, bs, zero, bs, g->rank, es);
    }
    spmd__free(&m->alloc, tmp);
    spmd__free(&m->alloc, (void *)ins);
    spmd__msg_ok(why);
    return SPMD_OK;
}

spmd_status spmd_assemble(const spmd_mesh *m, const spmd_spec *s, const void *const *blocks, const spmd_array *global,
                          spmd_msg *why) {
    return spmd__assemble(m, s, blocks, global, m ? m->check : 0, 1, "assemble", why);
}

/* "0-3,6": a sorted device list with runs compressed. */
static void spmd__devlist(const int *v, int n, char *buf, size_t len) {
    spmd__out o;
    int i = 0;
    o.buf = buf;
    o.len = len;
    o.at = 0;
    buf[0] = '\0';
    while (i < n) {
        int j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
        if (j >= i + 2) spmd__put(&o, "%s%d-%d", i ? "," : "", v[i], v[j]);
        else if (j == i + 1) spmd__put(&o, "%s%d,%d", i ? "," : "", v[i], v[j]);
        else spmd__put(&o, "%s%d", i ? "," : "", v[i]);
        i = j + 1;
    }
}

/* The devices holding block (a, b) of a rank-0..2 picture, as a device list
   in buf; devs is scratch for m->size ids. */
static void spmd__cell_devs(const spmd_mesh *m, const spmd__rspec *r, int rank, int64_t a, int64_t b, int *devs,
                            char *buf, size_t len) {
    int d, nd = 0, c[SPMD_MAX_AXES];
    for (d = 0; d < m->size; d++) {
        spmd__coords(m, d, c);
        if ((rank < 2 || spmd__dim_index(m, r, 0, c) == a) && (rank < 1 || spmd__dim_index(m, r, rank - 1, c) == b))
            devs[nd++] = d;
    }
    spmd__devlist(devs, nd, buf, len);
}

spmd_status spmd_sharding_text(const spmd_mesh *m, const spmd_spec *s, int rank, const int64_t *global_shape,
                               char *buf, size_t len, spmd_msg *why) {
    spmd__rspec r;
    spmd__out o;
    int64_t bs[SPMD_MAX_RANK] = {0}, nblk[2] = {1, 1};
    int i, d, *devs, nd, c[SPMD_MAX_AXES];
    char t1[400], t2[200];
    size_t w = 5;
    spmd_status e = spmd__prep(m, s, rank, global_shape, &r, "sharding_text", why);
    if (e != SPMD_OK) return e;
    if (!buf && len) return spmd__mfail(m, why, SPMD_ERR_NULL, "sharding_text: buf is NULL");
    devs = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof(int));
    if (!devs) return spmd__mfail(m, why, SPMD_ERR_NOMEM, "sharding_text: out of memory");
    o.buf = buf;
    o.len = len;
    o.at = 0;
    if (len) buf[0] = '\0';
    for (i = 0; i < rank; i++) bs[i] = global_shape[i] / spmd__parts(m, &r, i);
    spmd__mesh_text(m, t2, sizeof t2);
    spmd__put(&o, "%s", spmd__spec_str(s, t1, sizeof t1));
    spmd__shape_text(global_shape, rank, t1, sizeof t1);
    spmd__put(&o, " of %s", t1);
    spmd__shape_text(bs, rank, t1, sizeof t1);
    spmd__put(&o, " on mesh %s: blocks %s\n", t2, t1);
    if (rank <= 2) {
        int64_t a, b;
        for (i = 0; i < rank; i++) nblk[rank == 1 ? 1 : i] = spmd__parts(m, &r, i);
        /* width: the longest device list */
        for (a = 0; a < nblk[0]; a++)
            for (b = 0; b < nblk[1]; b++) {
                spmd__cell_devs(m, &r, rank, a, b, devs, t1, sizeof t1);
                if (strlen(t1) + 4 > w) w = strlen(t1) + 4;
            }
        for (a = 0; a < nblk[0]; a++) {
            for (b = 0; b < nblk[1]; b++) {
                size_t k;
                spmd__put(&o, "+");
                for (k = 0; k < w; k++) spmd__put(&o, "-");
            }
            spmd__put(&o, "+\n");
            for (b = 0; b < nblk[1]; b++) {
                size_t l, left;
                spmd__cell_devs(m, &r, rank, a, b, devs, t1, sizeof t1);
                l = strlen(t1);
                left = (w - l) / 2;
                spmd__put(&o, "|%*s%s%*s", (int)left, "", t1, (int)(w - l - left), "");
            }
            spmd__put(&o, "|\n");
        }
        for (b = 0; b < nblk[1]; b++) {
            size_t k;
            spmd__put(&o, "+");
            for (k = 0; k < w; k++) spmd__put(&o, "-");
        }
        spmd__put(&o, "+\n");
    } else {
        /* rank > 2: no grid; one line per block, in block order */
        int64_t nb = 1, q;
        for (i = 0; i < rank; i++) nb *= spmd__parts(m, &r, i);
        for (q = 0; q < nb; q++) {
            int64_t bi[SPMD_MAX_RANK], t = q;
            for (i = rank - 1; i >= 0; i--) {
                int64_t p = spmd__parts(m, &r, i);
                bi[i] = t % p;
                t /= p;
            }
            spmd__put(&o, "[");
            for (i = 0; i < rank; i++)
                spmd__put(&o, "%s%lld:%lld", i ? ", " : "", (long long)(bi[i] * bs[i]),
                          (long long)((bi[i] + 1) * bs[i]));
            nd = 0;
            for (d = 0; d < m->size; d++) {
                int ok = 1;
                spmd__coords(m, d, c);
                for (i = 0; i < rank && ok; i++) ok = spmd__dim_index(m, &r, i, c) == bi[i];
                if (ok) devs[nd++] = d;
            }
            spmd__devlist(devs, nd, t1, sizeof t1);
            spmd__put(&o, "] devices %s\n", t1);
        }
    }
    if (r.np) {
        spmd__mask_text(m, r.partial, t1, sizeof t1);
        spmd__put(&o, "partial sums over %s: the devices of a block hold summands, not copies\n", t1);
    }
    spmd__free(&m->alloc, devs);
    if (o.at >= len) return spmd__mfail(m, why, SPMD_ERR_SIZE, "sharding_text: needs %zu bytes, buf has %zu",
                                        o.at + 1, len);
    spmd__msg_ok(why);
    return SPMD_OK;
}

/* ---- shard_map ----
   On threads every device's output blocks are in this process once the run
   is over. Across processes each device then shares a record (its
   function's status, then its output blocks, each 16-byte aligned) by an
   all_gather over every axis of the mesh, so that every process assembles
   the same global outputs: when the processes host equally many devices (L
   each), in L groups of one device per process (local device j gathers the
   records of the j-th device of every process: one copy of everything per
   process), else in one group of all (each local device gathers all).
   The exchange waits for the slowest process as any collective does. */
typedef struct spmd__sm_ctx {
    const spmd_shard_map_desc *desc;
    unsigned char *inb[SPMD_MAX_SHARD_ARGS];  /* this process's devices' input blocks */
    unsigned char *outb[SPMD_MAX_SHARD_ARGS]; /* on threads: every device's output blocks */
    size_t inbb[SPMD_MAX_SHARD_ARGS], outbb[SPMD_MAX_SHARD_ARGS]; /* bytes of one device's block */
    int64_t ish[SPMD_MAX_SHARD_ARGS][SPMD_MAX_RANK], osh[SPMD_MAX_SHARD_ARGS][SPMD_MAX_RANK];
    spmd_status *st; /* per device; SPMD_STATUS_COUNT until its function ran */
    /* across processes (rec > 0): outb[k] is NULL, the outputs are written in the records */
    size_t rec, off[SPMD_MAX_SHARD_ARGS]; /* bytes of a record; output k's offset in it */
    unsigned char *send, *gat;            /* local devices' records; what each gathered */
    int ngroups, gsize, *groups;
} spmd__sm_ctx;

/* Device d's record after the exchange: local device d % ngroups holds it
   at position d / ngroups (the groups list process p's j-th device p-th). */
static const unsigned char *spmd__sm_rec(const spmd__sm_ctx *c, int d) {
    return c->gat + ((size_t)(d % c->ngroups) * (size_t)c->gsize + (size_t)(d / c->ngroups)) * c->rec;
}

/* Output k's block of device d, wherever it is. */
static const void *spmd__sm_out(const spmd__sm_ctx *c, int k, int d) {
    if (c->rec) return spmd__sm_rec(c, d) + c->off[k];
    return c->outbb[k] ? c->outb[k] + (size_t)d * c->outbb[k] : (const void *)c;
}

static void spmd__sm_dev(spmd_dev *d, void *arg) {
    spmd__sm_ctx *c = (spmd__sm_ctx *)arg;
    const spmd_shard_map_desc *ds = c->desc;
    spmd_array in[SPMD_MAX_SHARD_ARGS], out[SPMD_MAX_SHARD_ARGS];
    int k, id = d->id;
    size_t li = (size_t)(id - d->mesh->first_local);
    unsigned char *mine = c->rec ? c->send + li * c->rec : NULL;
    spmd_status s;
    for (k = 0; k < ds->nin; k++)
        in[k] = spmd_array_nd(c->inbb[k] ? c->inb[k] + li * c->inbb[k] : NULL, ds->in[k].dtype, ds->in[k].rank,
                              c->ish[k]);
    for (k = 0; k < ds->nout; k++)
        out[k] = spmd_array_nd(!c->outbb[k] ? NULL : c->rec ? mine + c->off[k] : c->outb[k] + (size_t)id * c->outbb[k],
                               ds->out[k].dtype, ds->out[k].rank, c->osh[k]);
    s = ds->fn(d, in, out, ds->user);
    c->st[id] = s;
    if (s != SPMD_OK && !d->err[0]) snprintf(d->err, sizeof d->err, "the function returned %s", spmd_status_name(s));
    if (c->rec) {
        uint32_t v = (uint32_t)s;
        spmd_array x = spmd_array_1d(mine, SPMD_U8, (int64_t)c->rec);
        spmd_array y = spmd_array_1d(c->gat + li * (size_t)c->gsize * c->rec, SPMD_U8, (int64_t)c->rec * c->gsize);
        spmd_opts o;
        memset(&o, 0, sizeof o);
        o.groups = c->groups;
        o.group_size = c->groups ? c->gsize : 0;
        memcpy(mine, &v, sizeof v);
        spmd__ignore(spmd_all_gather(d, &x, &y, "*", 0, 1, &o)); /* a failure is spmd_run's status */
    }
}

/* Across processes: the records and their exchange's groups. */
static spmd_status spmd__sm_share_prep(spmd_mesh *m, spmd__sm_ctx *c) {
    const spmd_shard_map_desc *ds = c->desc;
    int k, j, p, P = m->nprocs, L = m->size % P == 0 ? m->size / P : 0;
    size_t at = 16;
    for (k = 0; k < ds->nout; k++) {
        c->off[k] = at;
        if (at > SIZE_MAX / 4 || c->outbb[k] > SIZE_MAX / 4 - at) return SPMD_ERR_OVERFLOW;
        at += (c->outbb[k] + 15) / 16 * 16;
    }
    c->rec = at;
    c->ngroups = L > 1 ? L : 1;
    c->gsize = m->size / c->ngroups;
    if ((size_t)m->nlocal * (size_t)c->gsize > SIZE_MAX / 4 / at) return SPMD_ERR_OVERFLOW;
    c->send = (unsigned char *)spmd__alloc(&m->alloc, (size_t)m->nlocal * at);
    c->gat = (unsigned char *)spmd__alloc(&m->alloc, (size_t)m->nlocal * (size_t)c->gsize * at);
    if (c->ngroups > 1 && (c->groups = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *c->groups)))
        for (j = 0; j < L; j++)
            for (p = 0; p < P; p++) c->groups[j * P + p] = p * L + j;
    return c->send && c->gat && (c->ngroups == 1 || c->groups) ? SPMD_OK : SPMD_ERR_NOMEM;
}

/* shard_map's desc, and each argument's array and spec: the block shape
   of every argument (c->ish, c->osh) and its bytes (c->inbb, c->outbb). */
static spmd_status spmd__sm_check(spmd_mesh *m, const spmd_shard_map_desc *ds, spmd__sm_ctx *c, spmd__rspec *rin,
                                  spmd__rspec *rout, spmd_msg *why) {
    spmd_status e;
    size_t n;
    int k, i;
    char label[40];
    if (!m || !ds) return spmd__mfail(m, why, SPMD_ERR_NULL, "shard_map: %s is NULL", m ? "desc" : "mesh");
    if (!ds->fn) return spmd__mfail(m, why, SPMD_ERR_NULL, "shard_map: desc.fn is NULL");
    if (ds->nin < 0 || ds->nin > SPMD_MAX_SHARD_ARGS || ds->nout < 0 || ds->nout > SPMD_MAX_SHARD_ARGS)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "shard_map: nin %d / nout %d outside 0..%d", ds->nin, ds->nout,
                           SPMD_MAX_SHARD_ARGS);
    if ((ds->nin && (!ds->in || !ds->in_specs)) || (ds->nout && (!ds->out || !ds->out_specs)))
        return spmd__mfail(m, why, SPMD_ERR_NULL, "shard_map: %s is NULL",
                           ds->nin && !ds->in ? "in" : ds->nin && !ds->in_specs ? "in_specs"
                                                   : !ds->out                   ? "out"
                                                                                : "out_specs");
    if ((unsigned)ds->check_rep >= SPMD_CHECK_COUNT)
        return spmd__mfail(m, why, SPMD_ERR_INVALID, "shard_map: invalid check_rep %d", (int)ds->check_rep);
    for (k = 0; k < ds->nin + ds->nout; k++) {
        int isin = k < ds->nin, j = isin ? k : k - ds->nin;
        const spmd_array *a = isin ? &ds->in[j] : &ds->out[j];
        const spmd_spec *sp = isin ? &ds->in_specs[j] : &ds->out_specs[j];
        spmd__rspec *r = isin ? &rin[j] : &rout[j];
        int64_t *bs = isin ? c->ish[j] : c->osh[j];
        size_t nb = 1, es;
        snprintf(label, sizeof label, "shard_map: %s[%d]", isin ? "in" : "out", j);
        if ((e = spmd__arr_ok(m, a, label, isin ? "the array" : "the array", &n, why)) != SPMD_OK) return e;
        snprintf(label, sizeof label, "shard_map: %s_specs[%d]", isin ? "in" : "out", j);
        if ((e = spmd__prep(m, sp, a->rank, a->shape, r, label, why)) != SPMD_OK) return e;
        es = spmd__dtype_sizes[a->dtype];
        for (i = 0; i < a->rank; i++) {
            bs[i] = a->shape[i] / spmd__parts(m, r, i);
            nb *= (size_t)bs[i];
        }
        if (nb && (size_t)m->size > SIZE_MAX / 2 / es / nb)
            return spmd__mfail(m, why, SPMD_ERR_OVERFLOW, "%s: blocks too large", label);
        (isin ? c->inbb : c->outbb)[j] = nb * es;
    }
    return SPMD_OK;
}

/* What shard_map's run returned (rs) and each device's status (c->st,
   the other processes' from their records): SPMD_OK, or the status
   returned and a message naming the device it came from. */
static spmd_status spmd__sm_result(spmd_mesh *m, spmd__sm_ctx *c, spmd_status rs, spmd_msg *why) {
    spmd_status e;
    int d, i = -1;
    for (d = 0; c->rec && rs == SPMD_OK && d < m->size; d++) { /* the other processes' statuses (every exchange came) */
        uint32_t v;
        if (spmd_device_is_local(m, d) == 1) continue;
        memcpy(&v, spmd__sm_rec(c, d), sizeof v);
        c->st[d] = v < SPMD_STATUS_COUNT ? (spmd_status)v : SPMD_ERR_STATE;
    }
    e = rs;
    for (d = 0; d < m->size && e == SPMD_OK; d++)
        if (c->st[d] != SPMD_OK) {
            e = c->st[d] == SPMD_STATUS_COUNT ? SPMD_ERR_STATE : c->st[d];
            i = d; /* the message names the device whose status is returned */
        }
    if (e != SPMD_OK) {
        if (e == rs) /* a library call failed on a device of ours: the first that says why */
            for (i = 0; i < m->size && !(spmd_device_is_local(m, i) == 1 && m->devs[i]->err[0]); i++) {}
        if (i < m->size && spmd_device_is_local(m, i) == 1 && m->devs[i]->err[0])
            spmd__mfail(m, why, e, "shard_map: device %d: %s", i, m->devs[i]->err);
        else if (i < m->size && c->st[i] != SPMD_OK && c->st[i] != SPMD_STATUS_COUNT)
            spmd__mfail(m, why, e, "shard_map: device %d (process %d): the function returned %s", i,
                        spmd_device_process(m, i), spmd_status_name(c->st[i]));
        else spmd__mfail(m, why, e, "shard_map: spmd_run failed: %s", spmd_status_string(e));
    }
    return e;
}

spmd_status spmd_shard_map(spmd_mesh *m, const spmd_shard_map_desc *ds, spmd_msg *why) {
    spmd__sm_ctx c;
    spmd__rspec rin[SPMD_MAX_SHARD_ARGS], rout[SPMD_MAX_SHARD_ARGS];
    const void **blocks = NULL;
    spmd_status e = SPMD_OK, rs;
    int k, i, d, ran = 0;
    char label[40];
    memset(&c, 0, sizeof c);
    c.desc = ds;
    if ((e = spmd__sm_check(m, ds, &c, rin, rout, why)) != SPMD_OK) return e;
    if (m->nlocal == 0) /* (more processes than devices) */
        return spmd__mfail(m, why, SPMD_ERR_STATE, "shard_map: process %d hosts none of the mesh's %d devices: it "
                           "can neither run them nor receive their outputs", m->proc, m->size);
    c.st = (spmd_status *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *c.st);
    blocks = (const void **)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *blocks);
    e = c.st && blocks ? SPMD_OK : SPMD_ERR_NOMEM;
    if (e == SPMD_OK && m->nprocs > 1) e = spmd__sm_share_prep(m, &c);
    for (k = 0; e == SPMD_OK && k < ds->nin; k++) /* the local devices' input blocks */
        if (c.inbb[k] && !(c.inb[k] = (unsigned char *)spmd__alloc(&m->alloc, c.inbb[k] * (size_t)m->nlocal)))
            e = SPMD_ERR_NOMEM;
    for (k = 0; e == SPMD_OK && !c.rec && k < ds->nout; k++)
        if (c.outbb[k] && !(c.outb[k] = (unsigned char *)spmd__alloc(&m->alloc, c.outbb[k] * (size_t)m->size)))
            e = SPMD_ERR_NOMEM;
    if (e != SPMD_OK) {
        spmd__mfail(m, why, e, e == SPMD_ERR_NOMEM ? "shard_map: out of memory for the blocks"
                                                  : "shard_map: the outputs' blocks are too large to share");
        goto done;
    }
    for (k = 0; k < ds->nin; k++)
        for (d = 0; c.inbb[k] && d < m->nlocal; d++)
            spmd__put_block(m, &rin[k], &ds->in[k], m->first_local + d, c.inb[k] + (size_t)d * c.inbb[k]);
    for (d = 0; d < m->size; d++) c.st[d] = SPMD_STATUS_COUNT;
    rs = spmd_run(m, spmd__sm_dev, &c);
    for (d = 0; d < m->size; d++) ran |= c.st[d] != SPMD_STATUS_COUNT;
    if (!ran) { /* nothing ran (busy mesh, no memory): the devices are not ours to read */
        e = rs != SPMD_OK ? rs : SPMD_ERR_STATE;
        spmd__mfail(m, why, e, "shard_map: spmd_run: %s", spmd_status_string(e));
        goto done;
    }
    if ((e = spmd__sm_result(m, &c, rs, why)) != SPMD_OK) goto done;
    /* every output's replication check before any output is written */
    for (i = 0; i < 2 && e == SPMD_OK; i++)
        for (k = 0; k < ds->nout && e == SPMD_OK; k++) {
            for (d = 0; d < m->size; d++) blocks[d] = spmd__sm_out(&c, k, d);
            snprintf(label, sizeof label, "shard_map: out_specs[%d]", k);
            e = spmd__assemble(m, &ds->out_specs[k], blocks, &ds->out[k], !i && ds->check_rep != SPMD_CHECK_OFF, i,
                               label, why);
        }
done:
    for (k = 0; k < SPMD_MAX_SHARD_ARGS; k++) {
        spmd__free(&m->alloc, c.inb[k]);
        spmd__free(&m->alloc, c.outb[k]);
    }
    spmd__free(&m->alloc, c.st);
    spmd__free(&m->alloc, (void *)blocks);
    spmd__free(&m->alloc, c.send);
    spmd__free(&m->alloc, c.gat);
    spmd__free(&m->alloc, c.groups);
    if (e == SPMD_OK) spmd__msg_ok(why);
    return e;
}

/* ---- cost model ---- */
static const char *spmd__coll_names[SPMD_COLL_COUNT] = {"none", "slice", "zero", "all_gather", "all_to_all",
                                                         "psum", "psum_scatter"};

static int spmd__ceil_log2(int G) {
    int s = 0;
    while ((1 << s) < G) s++;
    return s;
}

static void spmd__cost_of(spmd_coll kind, int G, double B, spmd_cost_algo algo, const spmd_cost_model *cm,
                          spmd_cost *c) {
    double f = (double)(G - 1) / (double)G;
    int L = spmd__ceil_log2(G);
    memset(c, 0, sizeof *c);
    c->algo = algo;
    if (kind == SPMD_COLL_SLICE || kind == SPMD_COLL_ZERO || G <= 1) {
        c->algo = SPMD_COST_AUTO;
        return;
    }
    if (algo == SPMD_COST_RING) {
        c->bytes = (kind == SPMD_COLL_PSUM ? 2.0 : 1.0) * f * B;
        c->steps = (kind == SPMD_COLL_PSUM ? 2 : 1) * (G - 1);
    } else {
        c->steps = L;
        c->bytes = kind == SPMD_COLL_PSUM ? (double)L * B : kind == SPMD_COLL_ALL_TO_ALL ? (double)L * B / 2 : f * B;
    }
    c->time_s = (double)c->steps * cm->alpha_s + c->bytes * cm->beta_s_per_byte;
}

static void spmd__model_defaults(const spmd_cost_model *in, spmd_cost_model *out) {
    memset(out, 0, sizeof *out);
    if (in) *out = *in;
    if (out->alpha_s == 0) out->alpha_s = 5e-6;
    if (out->beta_s_per_byte == 0) out->beta_s_per_byte = 1e-10;
}

static void spmd__cost_pick(spmd_coll kind, int G, double B, const spmd_cost_model *cm, spmd_cost *out) {
    spmd_cost ring, tree;
    if (cm->algo != SPMD_COST_AUTO) {
        spmd__cost_of(kind, G, B, cm->algo, cm, out);
        return;
    }
    spmd__cost_of(kind, G, B, SPMD_COST_RING, cm, &ring);
    spmd__cost_of(kind, G, B, SPMD_COST_TREE, cm, &tree);
    *out = tree.time_s < ring.time_s ? tree : ring;
}

spmd_status spmd_collective_cost(spmd_coll kind, int G, double bytes, const spmd_cost_model *model, spmd_cost *out) {
    spmd_cost_model cm;
    if (!out) return SPMD_ERR_NULL;
    if ((int)kind <= SPMD_COLL_NONE || (int)kind >= SPMD_COLL_COUNT || G < 1 || G > SPMD_MAX_DEVICES ||
        !(bytes >= 0) || bytes > 1e30)
        return SPMD_ERR_INVALID;
    if (model && ((unsigned)model->algo >= SPMD_COST_ALGO_COUNT || !(model->alpha_s >= 0) ||
                  !(model->beta_s_per_byte >= 0)))
        return SPMD_ERR_INVALID;
    spmd__model_defaults(model, &cm);
    spmd__cost_pick(kind, G, bytes, &cm, out);
    return SPMD_OK;
}

/* ---- reshard plans ---- */
/* The layout a plan walks through: axes per dimension, partial axes, the
   block shape. */
typedef struct spmd__lay {
    int n[SPMD_MAX_RANK];
    int ax[SPMD_MAX_RANK][SPMD_MAX_AXES];
    unsigned partial;
    int64_t shape[SPMD_MAX_RANK];
} spmd__lay;

static unsigned spmd__lay_used(const spmd__lay *L, int rank) {
    unsigned u = 0;
    int i, k;
    for (i = 0; i < rank; i++)
        for (k = 0; k < L->n[i]; k++) u |= 1u << L->ax[i][k];
    return u;
}

/* Dimension i's axes are a prefix of the target's. */
static int spmd__lay_prefix(const spmd__lay *L, const spmd__rspec *t, int i) {
    return L->n[i] <= t->n[i] && memcmp(L->ax[i], t->ax[i], (size_t)L->n[i] * sizeof(int)) == 0;
}

/* How many leading axes of dimension i are already where the target wants. */
static int spmd__lay_common(const spmd__lay *L, const spmd__rspec *t, int i) {
    int k = 0;
    while (k < L->n[i] && k < t->n[i] && L->ax[i][k] == t->ax[i][k]) k++;
    return k;
}

typedef struct spmd__planner {
    const spmd_mesh *m;
    spmd_reshard_plan *p;
    spmd_cost_model cm;
    size_t es;
    int rank;
    int axes[SPMD_MAX_RESHARD_STEPS][SPMD_MAX_AXES]; /* each step's axes, as indices */
    int nax[SPMD_MAX_RESHARD_STEPS];
} spmd__planner;

static double spmd__shape_bytes(const int64_t *sh, int rank, size_t es) {
    double b = (double)es;
    int i;
    for (i = 0; i < rank; i++) b *= (double)sh[i];
    return b;
}

/* Finish a step: axes text, group size, cost. */
static void spmd__step_finish(spmd__planner *pl, int k) {
    spmd_reshard_step *s = &pl->p->steps[k];
    spmd__out o;
    int j;
    double B;
    o.buf = s->axes;
    o.len = sizeof s->axes;
    o.at = 0;
    s->axes[0] = '\0';
    for (j = 0; j < pl->nax[k]; j++) spmd__put(&o, "%s%s", j ? "," : "", pl->m->names[pl->axes[k][j]]);
    s->G = spmd__axes_size(pl->m, pl->axes[k], pl->nax[k]);
    B = spmd__shape_bytes(s->kind == SPMD_COLL_ALL_GATHER ? s->out_shape : s->in_shape, pl->rank, pl->es);
    spmd__cost_pick(s->kind, s->G, B, &pl->cm, &s->cost);
}

/* Append a step (or merge it into the previous one: two gathers, or two
   slices, of the same dimension are one). Updates the layout's shape. */
static spmd_status spmd__step_add(spmd__planner *pl, spmd__lay *L, spmd_coll kind, const int *ax, int nax, int dim,
                                  int dim2) {
    spmd_reshard_plan *p = pl->p;
    spmd_reshard_step *s;
    int64_t G = spmd__axes_size(pl->m, ax, nax);
    if (p->nsteps > 0) {
        int k = p->nsteps - 1;
        s = &p->steps[k];
        if (s->kind == kind && s->dim == dim && (kind == SPMD_COLL_ALL_GATHER || kind == SPMD_COLL_SLICE) &&
            pl->nax[k] + nax <= SPMD_MAX_AXES) {
            if (kind == SPMD_COLL_ALL_GATHER) { /* gathered minor first: the new axes are major */
                memmove(pl->axes[k] + nax, pl->axes[k], (size_t)pl->nax[k] * sizeof(int));
                memcpy(pl->axes[k], ax, (size_t)nax * sizeof(int));
                L->shape[dim] *= G;
            } else {
                memcpy(pl->axes[k] + pl->nax[k], ax, (size_t)nax * sizeof(int));
                L->shape[dim] /= G;
            }
            pl->nax[k] += nax;
            memcpy(s->out_shape, L->shape, sizeof s->out_shape);
            spmd__step_finish(pl, k);
            return SPMD_OK;
        }
    }
    if (p->nsteps == SPMD_MAX_RESHARD_STEPS) return SPMD_ERR_STATE;
    s = &p->steps[p->nsteps];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->dim = dim;
    s->dim2 = dim2;
    memcpy(s->in_shape, L->shape, sizeof s->in_shape);
    switch (kind) {
    case SPMD_COLL_SLICE: case SPMD_COLL_PSUM_SCATTER: L->shape[dim] /= G; break;
    case SPMD_COLL_ALL_GATHER: L->shape[dim] *= G; break;
    case SPMD_COLL_ALL_TO_ALL: L->shape[dim] /= G; L->shape[dim2] *= G; break;
    default: break;
    }
    memcpy(s->out_shape, L->shape, sizeof s->out_shape);
    memcpy(pl->axes[p->nsteps], ax, (size_t)nax * sizeof(int));
    pl->nax[p->nsteps] = nax;
    spmd__step_finish(pl, p->nsteps);
    p->nsteps++;
    return SPMD_OK;
}

/* Build the plan from f to t (resolved, same rank, shape divisible by both). */
/* Step 2 of a plan: the partial sums over the axes R are reduced, by a
   psum_scatter into the dimension that wants most of them next, and a
   psum of the rest. */
static spmd_status spmd__plan_partial(spmd__planner *pl, spmd__lay *L, const spmd__rspec *f, const spmd__rspec *t,
                                      spmd_dtype dt, unsigned R) {
    const spmd_mesh *m = pl->m;
    int rank = pl->rank, j, k;
    spmd_status s = SPMD_OK;
    int best = -1, bestS[SPMD_MAX_AXES], bestn = 0;
    int64_t bestp = 1;
    for (j = 0; j < rank && dt != SPMD_BOOL; j++) {
        int S[SPMD_MAX_AXES], ns = 0;
        int64_t prod = 1;
        if (!spmd__lay_prefix(L, t, j)) continue;
        for (k = L->n[j]; k < t->n[j] && (R >> t->ax[j][k] & 1u); k++) {
            S[ns++] = t->ax[j][k];
            prod *= m->shape[t->ax[j][k]];
        }
        if (ns && prod > bestp) {
            best = j;
            bestp = prod;
            bestn = ns;
            memcpy(bestS, S, sizeof S);
        }
    }
    if (best >= 0) {
        s = spmd__step_add(pl, L, SPMD_COLL_PSUM_SCATTER, bestS, bestn, best, -1);
        memcpy(L->ax[best] + L->n[best], bestS, (size_t)bestn * sizeof(int));
        L->n[best] += bestn;
        for (k = 0; k < bestn; k++) R &= ~(1u << bestS[k]);
    }
    if (R && s == SPMD_OK) {
        int A[SPMD_MAX_AXES], na = 0;
        for (k = 0; k < f->np; k++)
            if (R >> f->pax[k] & 1u) A[na++] = f->pax[k];
        s = spmd__step_add(pl, L, SPMD_COLL_PSUM, A, na, -1, -1);
    }
    L->partial &= ~(f->partial & ~t->partial);
    return s;
}

/* Step 3 of a plan: the axes at the minor end of dimension i that
   dimension j wants next, in the same order: one all_to_all over all of
   them (the longest such run). *did: 1 if one was planned. */
static spmd_status spmd__plan_swap(spmd__planner *pl, spmd__lay *L, const spmd__rspec *t, int *did) {
    int rank = pl->rank, i, j;
    spmd_status s;
    for (i = 0; i < rank; i++) {
        int c = spmd__lay_common(L, t, i), len = 0, S[SPMD_MAX_AXES];
        if (L->n[i] <= c) continue;
        for (j = 0; j < rank; j++) {
            if (j == i || !spmd__lay_prefix(L, t, j)) continue;
            for (len = L->n[i] - c; len >= 1; len--)
                if (L->n[j] + len <= t->n[j] &&
                    memcmp(L->ax[i] + L->n[i] - len, t->ax[j] + L->n[j], (size_t)len * sizeof(int)) == 0)
                    break;
            if (len) break;
        }
        if (!len) continue;
        memcpy(S, L->ax[i] + L->n[i] - len, (size_t)len * sizeof(int));
        s = spmd__step_add(pl, L, SPMD_COLL_ALL_TO_ALL, S, len, j, i);
        L->n[i] -= len;
        memcpy(L->ax[j] + L->n[j], S, (size_t)len * sizeof(int));
        L->n[j] += len;
        *did = 1;
        return s;
    }
    return SPMD_OK;
}

static spmd_status spmd__plan_build(const spmd_mesh *m, const spmd__rspec *f, const spmd__rspec *t, spmd_dtype dt,
                                   const int64_t *g, const spmd_cost_model *model, spmd_reshard_plan *p) {
    spmd__planner pl;
    spmd__lay L;
    unsigned R = f->partial & ~t->partial, Z = t->partial & ~f->partial;
    int rank = f->rank, i, j, k, iter;
    spmd_status s = SPMD_OK;
    memset(&pl, 0, sizeof pl);
    pl.m = m;
    pl.p = p;
    pl.es = spmd__dtype_sizes[dt];
    pl.rank = rank;
    spmd__model_defaults(model, &pl.cm);
    memset(&L, 0, sizeof L);
    for (i = 0; i < rank; i++) {
        L.n[i] = f->n[i];
        memcpy(L.ax[i], f->ax[i], sizeof L.ax[i]);
        L.shape[i] = g[i] / spmd__parts(m, f, i);
    }
    L.partial = f->partial;
    for (iter = 0; iter < 4 * SPMD_MAX_RESHARD_STEPS && s == SPMD_OK; iter++) {
        unsigned busy = spmd__lay_used(&L, rank) | L.partial;
        int did = 0;
        /* 1. replicated -> sharded: slice locally, before anything moves */
        for (j = 0; j < rank && s == SPMD_OK; j++) {
            int S[SPMD_MAX_AXES], ns = 0;
            if (!spmd__lay_prefix(&L, t, j)) continue;
            for (k = L.n[j]; k < t->n[j] && !(busy >> t->ax[j][k] & 1u); k++) S[ns++] = t->ax[j][k];
            if (!ns) continue;
            s = spmd__step_add(&pl, &L, SPMD_COLL_SLICE, S, ns, j, -1);
            memcpy(L.ax[j] + L.n[j], S, (size_t)ns * sizeof(int));
            L.n[j] += ns;
            did = 1;
        }
        if (did) continue;
        /* 2. partial sums: psum_scatter into a dimension that wants the axes next, psum the rest */
        if (R) {
            s = spmd__plan_partial(&pl, &L, f, t, dt, R);
            R = 0;
            continue;
        }
        /* 3. an all_to_all moves axes from the minor end of one dimension to another */
        if (s == SPMD_OK) s = spmd__plan_swap(&pl, &L, t, &did);
        if (did) continue;
        /* 4. the minor-most misplaced axis is gathered */
        for (i = rank - 1; i >= 0 && !did && s == SPMD_OK; i--) {
            int a;
            if (L.n[i] <= spmd__lay_common(&L, t, i)) continue;
            a = L.ax[i][L.n[i] - 1];
            s = spmd__step_add(&pl, &L, SPMD_COLL_ALL_GATHER, &a, 1, i, -1);
            L.n[i]--;
            did = 1;
        }
        if (!did) break;
    }
    if (s == SPMD_OK && Z) { /* replicated -> partial: local */
        int A[SPMD_MAX_AXES], na = 0;
        for (k = 0; k < t->np; k++)
            if (Z >> t->pax[k] & 1u) A[na++] = t->pax[k];
        s = spmd__step_add(&pl, &L, SPMD_COLL_ZERO, A, na, -1, -1);
    }
    for (i = 0; i < rank && s == SPMD_OK; i++)
        if (L.n[i] != t->n[i] || memcmp(L.ax[i], t->ax[i], (size_t)t->n[i] * sizeof(int)) != 0) s = SPMD_ERR_STATE;
    p->total.algo = SPMD_COST_AUTO;
    for (k = 0; k < p->nsteps; k++) {
        p->total.bytes += p->steps[k].cost.bytes;
        p->total.steps += p->steps[k].cost.steps;
        p->total.time_s += p->steps[k].cost.time_s;
    }
    return s;
}

static spmd_status spmd__plan_make(const spmd_mesh *m, const spmd_spec *from, const spmd_spec *to, spmd_dtype dt,
                                   int rank, const int64_t *g, const spmd_cost_model *model, spmd_reshard_plan *p,
                                   char *why, size_t wl) {
    spmd__rspec f, t;
    spmd_status s;
    char w[400];
    int i;
    if ((int)dt <= SPMD_DTYPE_NONE || (int)dt >= SPMD_DTYPE_COUNT) {
        snprintf(why, wl, "invalid dtype %d", (int)dt);
        return SPMD_ERR_INVALID;
    }
    if (model && ((unsigned)model->algo >= SPMD_COST_ALGO_COUNT || !(model->alpha_s >= 0) ||
                  !(model->beta_s_per_byte >= 0))) {
        snprintf(why, wl, "invalid cost model");
        return SPMD_ERR_INVALID;
    }
    if ((s = spmd__resolve(m, from, rank, &f, w, sizeof w)) == SPMD_OK) s = spmd__divides(m, from, &f, g, w, sizeof w);
    if (s != SPMD_OK) {
        snprintf(why, wl, "from: %s", w);
        return s;
    }
    if ((s = spmd__resolve(m, to, rank, &t, w, sizeof w)) == SPMD_OK) s = spmd__divides(m, to, &t, g, w, sizeof w);
    if (s != SPMD_OK) {
        snprintf(why, wl, "to: %s", w);
        return s;
    }
    memset(p, 0, sizeof *p);
    p->rank = rank;
    p->dtype = dt;
    for (i = 0; i < rank; i++) p->global_shape[i] = g[i];
    p->from = *from;
    p->to = *to;
    s = spmd__plan_build(m, &f, &t, dt, g, model, p);
    if (s != SPMD_OK) snprintf(why, wl, "no plan found within %d steps (internal error)", SPMD_MAX_RESHARD_STEPS);
    return s;
}

spmd_status spmd_reshard_plan_make(const spmd_mesh *m, const spmd_spec *from, const spmd_spec *to, spmd_dtype dt,
                                   int rank, const int64_t *global_shape, const spmd_cost_model *model,
                                   spmd_reshard_plan *plan, spmd_msg *why) {
    char w[sizeof(((spmd_msg *)0)->text)];
    spmd_status s;
    if (!m || !from || !to || !plan || (rank > 0 && !global_shape))
        return spmd__mfail(m, why, SPMD_ERR_NULL, "reshard_plan: %s is NULL",
                           !m ? "mesh" : !from ? "from" : !to ? "to" : !plan ? "plan" : "global_shape");
    s = spmd__plan_make(m, from, to, dt, rank, global_shape, model, plan, w, sizeof w);
    if (s != SPMD_OK) return spmd__mfail(m, why, s, "reshard_plan: %s", w);
    spmd__msg_ok(why);
    return SPMD_OK;
}

int spmd_reshard_plan_text(const spmd_reshard_plan *p, char *buf, size_t len) {
    spmd__out o;
    char t[400];
    int k;
    if (!p || p->nsteps < 0 || p->nsteps > SPMD_MAX_RESHARD_STEPS || p->rank < 0 || p->rank > SPMD_MAX_RANK) {
        if (buf && len) buf[0] = '\0';
        return -1;
    }
    o.buf = buf;
    o.len = buf ? len : 0;
    o.at = 0;
    if (buf && len) buf[0] = '\0';
    spmd__put(&o, "%s -> ", spmd__spec_str(&p->from, t, sizeof t));
    spmd__put(&o, "%s", spmd__spec_str(&p->to, t, sizeof t));
    spmd__shape_text(p->global_shape, p->rank, t, sizeof t);
    spmd__put(&o, " of %s %s: ", spmd_dtype_name(p->dtype), t);
    if (p->nsteps == 0) spmd__put(&o, "nothing to do (same sharding)\n");
    else
        spmd__put(&o, "%d step%s, %.0f bytes sent per device, %d latency step%s, ~%.3g us\n", p->nsteps,
                  p->nsteps == 1 ? "" : "s", p->total.bytes, p->total.steps, p->total.steps == 1 ? "" : "s",
                  p->total.time_s * 1e6);
    for (k = 0; k < p->nsteps; k++) {
        const spmd_reshard_step *s = &p->steps[k];
        char a[160], b[160];
        spmd__shape_text(s->in_shape, p->rank, a, sizeof a);
        spmd__shape_text(s->out_shape, p->rank, b, sizeof b);
        spmd__put(&o, "  %d. %s over '%s'", k + 1, (unsigned)s->kind < SPMD_COLL_COUNT ? spmd__coll_names[s->kind] : "?",
                  s->axes);
        if (s->kind == SPMD_COLL_ALL_TO_ALL) spmd__put(&o, " (split_axis %d, concat_axis %d)", s->dim, s->dim2);
        else if (s->dim >= 0) spmd__put(&o, " along dim %d", s->dim);
        spmd__put(&o, ": block %s -> %s", a, b);
        if (s->kind == SPMD_COLL_SLICE || s->kind == SPMD_COLL_ZERO) spmd__put(&o, ", local\n");
        else
            spmd__put(&o, ", %.0f bytes, %d step%s (%s), ~%.3g us\n", s->cost.bytes, s->cost.steps,
                      s->cost.steps == 1 ? "" : "s", s->cost.algo == SPMD_COST_TREE ? "tree" : "ring",
                      s->cost.time_s * 1e6);
    }
    return (int)o.at;
}

/* Keep chunk idx of parts along dim of a row-major block. */
static void spmd__slice_local(unsigned char *dst, const unsigned char *src, const int64_t *sh, int rank, int dim,
                              int64_t parts, int64_t idx, size_t es) {
    size_t outer = 1, inner = es, chunk, o;
    int i;
    for (i = 0; i < dim; i++) outer *= (size_t)sh[i];
    for (i = dim + 1; i < rank; i++) inner *= (size_t)sh[i];
    chunk = (size_t)(sh[dim] / parts) * inner;
    if (chunk == 0) return;
    for (o = 0; o < outer; o++) memcpy(dst + o * chunk, src + o * (size_t)sh[dim] * inner + (size_t)idx * chunk, chunk);
}

static int spmd__ranges_overlap(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

spmd_status spmd_reshard(spmd_dev *d, const spmd_array *block, const spmd_spec *from, const spmd_spec *to,
                         const spmd_array *out, spmd_reshard_plan *plan) {
    spmd_reshard_plan local, *p = plan ? plan : &local;
    spmd__rspec f;
    int64_t g[SPMD_MAX_RANK];
    size_t nx, no, es, maxb, outb;
    unsigned char *tmp[2] = {NULL, NULL};
    const unsigned char *cur;
    char w[400];
    int i, k, overlap;
    spmd_status s;
    if (d) d->unhandled = SPMD_OK; /* another call: the device went on after its last failure */
    if ((s = spmd__check_dev(d)) != SPMD_OK) return s;
    if ((s = spmd__check_array(d, "reshard", "block", block, &nx)) != SPMD_OK) return s;
    if ((s = spmd__check_array(d, "reshard", "out", out, &no)) != SPMD_OK) return s;
    if (!from || !to) return spmd__fail(d, SPMD_ERR_NULL, "reshard: %s is NULL", from ? "to" : "from");
    if ((s = spmd__resolve(d->mesh, from, block->rank, &f, w, sizeof w)) != SPMD_OK)
        return spmd__fail(d, s, "reshard: from: %s", w);
    for (i = 0; i < block->rank; i++) {
        int64_t q = spmd__parts(d->mesh, &f, i);
        if (block->shape[i] > INT64_MAX / q) return spmd__fail(d, SPMD_ERR_OVERFLOW, "reshard: global shape overflows");
        g[i] = block->shape[i] * q;
    }
    s = spmd__plan_make(d->mesh, from, to, block->dtype, block->rank, g, NULL, p, w, sizeof w);
    if (s != SPMD_OK) return spmd__fail(d, s, "reshard: %s", w);
    {
        const int64_t *want = p->nsteps ? p->steps[p->nsteps - 1].out_shape : block->shape;
        if (out->dtype != block->dtype || out->rank != block->rank ||
            memcmp(out->shape, want, (size_t)block->rank * sizeof(int64_t)) != 0) {
            char a[160], b[160];
            spmd__shape_text(out->shape, out->rank, a, sizeof a);
            spmd__shape_text(want, block->rank, b, sizeof b);
            return spmd__fail(d, SPMD_ERR_SHAPE, "reshard: out is %s %s but the block of %s is %s %s",
                              spmd_dtype_name(out->dtype), a, spmd__spec_str(to, w, sizeof w),
                              spmd_dtype_name(block->dtype), b);
        }
    }
    es = spmd__dtype_sizes[block->dtype];
    outb = no * es;
    if (p->nsteps == 0) {
        if (outb && out->data != block->data) memmove(out->data, block->data, outb);
        return SPMD_OK;
    }
    maxb = nx * es;
    for (k = 0; k < p->nsteps; k++) {
        double b = spmd__shape_bytes(p->steps[k].out_shape, block->rank, es);
        if (b >= (double)(INT64_MAX / 2))
            return spmd__fail(d, SPMD_ERR_OVERFLOW, "reshard: step %d needs a block of %.3g bytes", k + 1, b);
        if (b > (double)maxb) maxb = (size_t)b;
    }
    overlap = spmd__ranges_overlap(out->data, outb, block->data, nx * es);
    tmp[0] = (unsigned char *)spmd__alloc(&d->mesh->alloc, maxb);
    if (p->nsteps > 1 || overlap) tmp[1] = (unsigned char *)spmd__alloc(&d->mesh->alloc, maxb);
    if (!tmp[0] || ((p->nsteps > 1 || overlap) && !tmp[1])) {
        spmd__free(&d->mesh->alloc, tmp[0]);
        spmd__free(&d->mesh->alloc, tmp[1]);
        return spmd__fail(d, SPMD_ERR_NOMEM, "reshard: out of memory for %zu bytes", maxb);
    }
    cur = (const unsigned char *)block->data;
    for (k = 0; k < p->nsteps && s == SPMD_OK; k++) {
        const spmd_reshard_step *st = &p->steps[k];
        unsigned char *dst = (k == p->nsteps - 1 && !overlap) ? (unsigned char *)out->data : tmp[k & 1];
        spmd_array x = spmd_array_nd((void *)cur, block->dtype, block->rank, st->in_shape);
        spmd_array y = spmd_array_nd(dst, block->dtype, block->rank, st->out_shape);
        size_t n = 1;
        int idx;
        for (i = 0; i < block->rank; i++) n *= (size_t)st->in_shape[i];
        switch (st->kind) {
        case SPMD_COLL_SLICE:
            idx = spmd_axis_index(d, st->axes);
            if (idx < 0) s = (spmd_status)-idx;
            else spmd__slice_local(dst, cur, st->in_shape, block->rank, st->dim, st->G, idx, es);
            break;
        case SPMD_COLL_ZERO:
            idx = spmd_axis_index(d, st->axes);
            if (idx < 0) s = (spmd_status)-idx;
            else if (n && idx) memset(dst, 0, n * es);
            else if (n) memcpy(dst, cur, n * es);
            break;
        case SPMD_COLL_ALL_GATHER: s = spmd_all_gather(d, &x, &y, st->axes, st->dim, 1, NULL); break;
        case SPMD_COLL_ALL_TO_ALL: s = spmd_all_to_all(d, &x, &y, st->axes, st->dim, st->dim2, 1, NULL); break;
        case SPMD_COLL_PSUM:
            s = block->dtype == SPMD_BOOL ? spmd_pmax(d, cur, dst, n, block->dtype, st->axes, NULL)
                                          : spmd_psum(d, cur, dst, n, block->dtype, st->axes, NULL);
            break;
        case SPMD_COLL_PSUM_SCATTER: s = spmd_psum_scatter(d, &x, &y, st->axes, st->dim, 1, NULL); break;
        default: s = SPMD_ERR_STATE; break;
        }
        if (s != SPMD_OK) {
            char e[sizeof d->err];
            memcpy(e, d->err, sizeof e);
            spmd__fail(d, s, "reshard step %d (%s over '%s'): %s", k + 1, spmd__coll_names[st->kind], st->axes, e);
        }
        cur = dst;
    }
    if (s == SPMD_OK && overlap && outb) memmove(out->data, cur, outb);
    spmd__free(&d->mesh->alloc, tmp[0]);
    spmd__free(&d->mesh->alloc, tmp[1]);
    return s;
}

SPMD__SETUP_END

// >>shrink
/* Recovery after a loss: elastic meshes. This section owns spmd_mesh_shrink,
   spmd_mesh_lost, spmd_device_origin and the survivors' agreement across
   processes. Data flow: spmd__shrink_lost reads which devices the old mesh
   lost: a device's d->lost (set by the fault plan's kind=lose: its call
   number + 1), and across processes every device of a process the
   bootstrap knows is gone (b->lost); spmd_mesh_shrink marks every slice of
   the named axis that holds one, lists the survivors in order (origin: new
   id -> old id; dropping whole slices of one axis keeps row-major order),
   rebuilds a mesh desc from the old mesh's settings with that axis
   shortened, and creates the new mesh through the same path as
   spmd_mesh_create (m->shrunk: SPMD_FAULTS, written for the first mesh's
   ids, is not applied; spmd_shrink_desc.faults is). The old mesh is not
   touched; the two share nothing but the process's transport.
   Agreement, threads: every device is in this process and spmd_mesh_shrink
   runs only when none runs (SPMD_ERR_BUSY otherwise), so the set read is
   final: every survivor gets the same mesh. Across processes (the
   backend's lost_agree hook, spmd__shrink_agree): each survivor sends the processes it knows lost to
   the coordinator (process 0) through the bootstrap; the coordinator waits
   for every process not known lost, counting as lost any whose connection
   closes or that does not come within the deadline (a loss during the
   agreement), and sends its one decision, the union, to every survivor.
   One decider, so survivors that get an answer get the same one; the new
   mesh keeps each device in its process (m->shrink_procs, no bootstrap
   exchange at creation: processes that are gone cannot take part) and the
   processes that are gone host none. The coordinator is the one process
   that cannot be lost: without it there is no agreement (PEER_LOST). */
SPMD__SETUP_BEGIN
static spmd_status spmd__mesh_create(const spmd_mesh_desc *desc, spmd_mesh **out, int shrunk, const int *procs);

/* The devices m lost, in increasing order: the first cap of them into lost;
   returns how many. gone (may be NULL): processes lost (libfabric). */
static int spmd__shrink_lost(const spmd_mesh *m, const unsigned char *gone, int *lost, int cap) {
    int i, n = 0;
    for (i = 0; i < m->size; i++)
        if (SPMD__LD_ACQ(&m->devs[i]->lost) || (gone && m->proc_of && gone[m->proc_of[i]])) {
            if (n < cap) lost[n] = i;
            n++;
        }
    return n;
}

/* "3, 5, 6" (the first few of n ids) into buf. */
static void spmd__shrink_list(char *buf, size_t len, const int *ids, int n) {
    size_t at = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < n && at + 16 < len; i++) {
        int w = snprintf(buf + at, len - at, "%s%d", i ? ", " : "", ids[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    if (i < n) snprintf(buf + at, len - at, ", ... (%d in all)", n);
}

spmd_status spmd_mesh_shrink(spmd_mesh *m, const char *axis, const spmd_shrink_desc *sd, spmd_mesh **out) {
    spmd_mesh_desc desc;
    spmd_mesh *nm = NULL;
    int *lost = NULL, *drop = NULL, *origin = NULL, *procs = NULL, a, i, j, nlost, keep, ndrop = 0, n = 0;
    unsigned char *gone = NULL;
    char ids[200], slices[200];
    spmd_status s = SPMD_OK;
    if (out) *out = NULL;
    if (!m || !axis || !out) return SPMD_ERR_NULL;
    for (a = 0; a < m->ndim && strcmp(m->names[a], axis) != 0; a++) {}
    if (a == m->ndim) {
        char names[SPMD_MAX_AXES * (SPMD_MAX_AXIS_NAME + 2) + 1];
        size_t at = 0;
        for (i = 0; i < m->ndim; i++) at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", m->names[i]);
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: '%s' is not one axis of the mesh (its axes: %s)", axis, names);
        return SPMD_ERR_AXIS;
    }
    if (SPMD__LD_ACQ(&m->running) || SPMD__LD_ACQ(&m->nattached)) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: the mesh is running or has devices attached (call it after "
                                         "spmd_run returned, or every device detached)");
        return SPMD_ERR_BUSY;
    }
    lost = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *lost);
    origin = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *origin);
    procs = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof *procs);
    drop = (int *)spmd__alloc(&m->alloc, (size_t)m->shape[a] * sizeof *drop);
    gone = (unsigned char *)spmd__alloc(&m->alloc, (size_t)m->nprocs);
    if (!lost || !origin || !procs || !drop || !gone) { s = SPMD_ERR_NOMEM; goto done; }
    if (m->vt->lost_agree && m->nprocs > 1) { /* the survivors agree on the processes lost */
        char why[300];
        if ((s = m->vt->lost_agree(m, gone, why, sizeof why)) != SPMD_OK) {
            spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: the agreement on the processes lost failed: %s", why);
            goto done;
        }
    }
    nlost = spmd__shrink_lost(m, m->nprocs > 1 ? gone : NULL, lost, m->size);
    for (i = 0; i < m->shape[a]; i++) drop[i] = 0;
    for (i = 0; i < nlost; i++) drop[m->devs[lost[i]]->coords[a]] = 1;
    for (i = 0; i < m->size; i++)
        if (!drop[m->devs[i]->coords[a]]) {
            procs[n] = m->proc_of ? m->proc_of[i] : 0;
            origin[n++] = i;
        }
    for (i = 0, j = 0; i < m->shape[a]; i++)
        if (drop[i]) drop[j++] = i; /* the dropped slices, increasing */
    ndrop = j;
    keep = m->shape[a] - ndrop;
    spmd__shrink_list(ids, sizeof ids, lost, nlost);
    spmd__shrink_list(slices, sizeof slices, drop, ndrop);
    if (keep == 0) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: every one of the %d slices along '%s' lost a device (lost: %s); "
                  "nothing is left to run on: shrink along another axis, or start a new mesh", m->shape[a], axis, ids);
        s = SPMD_ERR_PEER_LOST;
        goto done;
    }
    memset(&desc, 0, sizeof desc);
    desc.ndim = m->ndim;
    for (i = 0; i < m->ndim; i++) {
        desc.shape[i] = i == a ? keep : m->shape[i];
        desc.axis_names[i] = m->names[i];
    }
    desc.backend = m->backend;
    desc.timeout_ms = m->timeout_ms;
    desc.check = m->check == 2 ? SPMD_CHECK_SITES : m->check ? SPMD_CHECK_ON : SPMD_CHECK_OFF;
    desc.log_level = m->log_level;
    desc.log_fn = m->log_fn;
    desc.log_user = m->log_user;
    desc.allocator = m->alloc;
    desc.max_inflight = m->D;
    desc.thread_stack_size = m->stack_size;
    desc.devices_per_process = m->want_dpp;
    desc.trace_depth = m->rmask || m->devs[m->first_local]->ring ? (int)m->rmask + 1 : -1;
    desc.faults = sd ? sd->faults : NULL;
    desc.scheduler = m->sched;
    desc.carriers = m->carriers;
    desc.sched_seed = m->seed;
    if ((s = spmd__mesh_create(&desc, &nm, 1, m->nprocs > 1 ? procs : NULL)) != SPMD_OK) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: creating the shrunk mesh failed: %s", spmd_status_name(s));
        goto done;
    }
    SPMD_ASSERT(n == nm->size);
    nm->origin = origin;
    origin = NULL;
    spmd__log(m, nlost ? SPMD_LOG_WARN : SPMD_LOG_INFO, -1,
              "mesh_shrink along '%s': lost device%s %s; slice%s %s of %d dropped; the new mesh has %d devices",
              axis, nlost == 1 ? "" : "s", nlost ? ids : "(none)", ndrop == 1 ? "" : "s", ndrop ? slices : "(none)",
              m->shape[a], nm->size);
    *out = nm;
done:
    spmd__free(&m->alloc, lost);
    spmd__free(&m->alloc, origin);
    spmd__free(&m->alloc, procs);
    spmd__free(&m->alloc, drop);
    spmd__free(&m->alloc, gone);
    return s;
}

int spmd_mesh_lost(const spmd_mesh *m, int *devices, int cap) {
    int n;
    if (!m) return -(int)SPMD_ERR_NULL;
    if (cap < 0 || (cap > 0 && !devices)) return -(int)SPMD_ERR_INVALID;
    if (m->vt->lost_devices && m->nprocs > 1) /* and the devices of the processes this one knows are gone */
        return m->vt->lost_devices(m, devices, cap);
    n = spmd__shrink_lost(m, NULL, devices, cap);
    return n;
}

int spmd_device_origin(const spmd_mesh *m, int device) {
    if (!m) return -(int)SPMD_ERR_NULL;
    if (device < 0 || device >= m->size) return -(int)SPMD_ERR_INVALID;
    return m->origin ? m->origin[device] : device;
}

SPMD__SETUP_END

// >>public
/* The API: thin wrappers over the sections above (argument order as in
   JAX and mpi4jax), the mesh's life (create, run, destroy) and the
   utilities that need no mesh. A public collective notes its caller's
   return address first (SPMD__CALLER, for SPMD_CHECK_SITES). */
const char *spmd_version(void) { return SPMD_VERSION_STRING; }

static const char *spmd__status_strings[] = {
#define SPMD__STATUS_STRING(name, text) text,
    SPMD_STATUS_LIST(SPMD__STATUS_STRING)
#undef SPMD__STATUS_STRING
};
static const char *spmd__status_names[] = {
#define SPMD__STATUS_NAME(name, text) #name,
    SPMD_STATUS_LIST(SPMD__STATUS_NAME)
#undef SPMD__STATUS_NAME
};

const char *spmd_status_string(spmd_status s) {
    return (unsigned)s < SPMD_STATUS_COUNT ? spmd__status_strings[s] : "unknown status";
}
const char *spmd_status_name(spmd_status s) {
    return (unsigned)s < SPMD_STATUS_COUNT ? spmd__status_names[s] : "SPMD_ERR_UNKNOWN";
}
size_t spmd_dtype_size(spmd_dtype t) { return (unsigned)t < SPMD_DTYPE_COUNT ? spmd__dtype_sizes[t] : 0; }
const char *spmd_dtype_name(spmd_dtype t) {
    return (unsigned)t < SPMD_DTYPE_COUNT ? spmd__dtype_names[t] : "invalid";
}
const char *spmd_op_name(spmd_op op) { return (unsigned)op < SPMD_OP_COUNT ? spmd__op_names[op] : "invalid"; }
const char *spmd_backend_name(spmd_backend b) {
    static const char *const names[SPMD_BACKEND_COUNT] = {"default", "threads", "libfabric"};
    return (unsigned)b < SPMD_BACKEND_COUNT ? names[b] : "invalid";
}
const char *spmd_scheduler_name(spmd_scheduler s) {
    static const char *const names[SPMD_SCHEDULER_COUNT] = {"default", "threads", "fibers"};
    return (unsigned)s < SPMD_SCHEDULER_COUNT ? names[s] : "invalid";
}
spmd_status spmd_reduce_local(void *out, const void *const *ins, int n_in, size_t count, spmd_dtype dt,
                              spmd_op op) {
    spmd__kernel k;
    int i;
    if ((int)dt <= SPMD_DTYPE_NONE || (int)dt >= SPMD_DTYPE_COUNT || (int)op <= SPMD_OP_NONE ||
        (int)op >= SPMD_OP_COUNT || n_in < 1)
        return SPMD_ERR_INVALID;
    if (!(k = spmd__kernel_in(spmd__kernel_table(), dt, op))) return SPMD_ERR_DTYPE;
    if (count && (!out || !ins)) return SPMD_ERR_NULL;
    for (i = 0; count && i < n_in; i++)
        if (!ins[i]) return SPMD_ERR_NULL;
    if (count) spmd__reduce(k, out, ins, n_in, count);
    return SPMD_OK;
}
uint16_t spmd_f32_to_f16(float f) { return spmd__f2h(f); }
float spmd_f16_to_f32(uint16_t h) { return spmd__h2f(h); }
uint16_t spmd_f32_to_bf16(float f) { return spmd__f2b(f); }
float spmd_bf16_to_f32(uint16_t h) { return spmd__b2f(h); }
uint8_t spmd_f32_to_f8e4m3fn(float f) { return spmd__f2e4(f); }
float spmd_f8e4m3fn_to_f32(uint8_t b) { return spmd__e4tab[b]; }
uint8_t spmd_f32_to_f8e5m2(float f) { return spmd__f2e5(f); }
float spmd_f8e5m2_to_f32(uint8_t b) { return spmd__e5tab[b]; }

static int64_t spmd__env_int(const char *name, int64_t lo, int64_t hi, int64_t dflt, int *set) {
    const char *v = getenv(name);
    char *end;
    long long x;
    if (set) *set = 0;
    if (!v || !*v) return dflt;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        fprintf(stderr, "[spmd] warn: ignoring %s=%s (expected an integer in %lld..%lld)\n", name, v,
                (long long)lo, (long long)hi);
        return dflt;
    }
    if (set) *set = 1;
    return (int64_t)x;
}

static int spmd__ncpu(void) {
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) == 0 && CPU_COUNT(&cs) > 0) return CPU_COUNT(&cs);
#endif
    {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
}

/* Report a bad desc through the desc's own logger, before a mesh exists. */
static spmd_status spmd__desc_fail(const spmd_mesh_desc *desc, spmd_status s, const char *fmt, ...) {
    va_list ap;
    spmd_log_level lvl = desc->log_level;
    if ((unsigned)lvl >= SPMD_LOG_LEVEL_COUNT) lvl = SPMD_LOG_WARN;
    if (lvl == SPMD_LOG_DEFAULT) lvl = SPMD_LOG_WARN;
    va_start(ap, fmt);
    spmd__vlog(desc->log_fn, desc->log_user, lvl, SPMD_LOG_ERROR, -1, 0, fmt, ap);
    va_end(ap);
    return s;
}

static spmd_log_level spmd__env_level(spmd_log_level dflt) {
    const char *v = getenv("SPMD_LOG_LEVEL");
    int i;
    if (!v || !*v) return dflt;
    for (i = SPMD_LOG_OFF; i < SPMD_LOG_LEVEL_COUNT; i++)
        if (strcmp(v, spmd__level_names[i]) == 0) return (spmd_log_level)i;
    fprintf(stderr, "[spmd] warn: ignoring SPMD_LOG_LEVEL=%s (off, error, warn, info, debug)\n", v);
    return dflt;
}

SPMD__SETUP static void spmd__mesh_free(spmd_mesh *m) {
    spmd_allocator a = m->alloc;
    size_t b;
    int i;
    if (m->devs) {
        for (i = 0; i < m->size; i++) {
            spmd_dev *d = m->devs[i];
            spmd_req *r, *n;
            int k;
            if (!d) continue;
            for (k = 0; k < d->ngrefs; k++) {
                spmd__free(&a, d->grefs[k]->groups);
                spmd__free(&a, d->grefs[k]);
            }
            spmd__free(&a, d->grefs);
            spmd__free(&a, d->memberof);
            for (r = d->free_reqs; r; r = n) {
                n = r->next;
                spmd__free(&a, r->src_buf);
                spmd__free(&a, r->xp_blk);
                spmd__free(&a, r);
            }
            for (r = d->head; r; r = n) { n = r->next; spmd__free(&a, r->src_buf); spmd__free(&a, r); }
            spmd__free(&a, d->clog);
            spmd__free(&a, d->tlog);
            spmd__free(&a, (void *)d->ptrs_own);
            pthread_mutex_destroy(&d->mbox);
            spmd__free(&a, d);
        }
        spmd__free(&a, m->devs);
    }
    spmd__free(&a, m->rings);
    spmd__free(&a, m->rsites);
    spmd__stacks_unmap(m);
    if (m->gtab) {
        for (b = 0; b < m->gbuckets; b++) {
            spmd__group *g = m->gtab[b], *n;
            for (; g; g = n) { n = g->next; spmd__group_free(m, g); }
        }
        spmd__free(&a, m->gtab);
    }
    if (m->gkeys) {
        for (b = 0; b < m->gbuckets; b++) {
            struct spmd__gkey *k = m->gkeys[b], *n;
            for (; k; k = n) { n = k->next; spmd__free(&a, k); }
        }
        spmd__free(&a, m->gkeys);
    }
    spmd__free(&a, m->proc_of);
    spmd__free(&a, m->faults);
    spmd__free(&a, m->origin);
    pthread_mutex_destroy(&m->xlock);
    pthread_mutex_destroy(&m->lock);
    spmd__free(&a, m);
}

/* spmd__mesh_create's phases. The desc's fields, before anything is made:
   SPMD_OK and the device count, or the failure (logged through the desc). */
SPMD__SETUP static spmd_status spmd__desc_check(const spmd_mesh_desc *desc, int *size_out) {
    int i, j, size = 1;
    if (desc->ndim < 1 || desc->ndim > SPMD_MAX_AXES)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: ndim %d is outside 1..%d", desc->ndim,
                               SPMD_MAX_AXES);
    for (i = 0; i < desc->ndim; i++) {
        const char *n = desc->axis_names[i];
        if (desc->shape[i] < 1)
            return spmd__desc_fail(desc, SPMD_ERR_SIZE, "mesh: shape[%d] = %d (must be at least 1)", i,
                                   desc->shape[i]);
        if (size > SPMD_MAX_DEVICES / desc->shape[i])
            return spmd__desc_fail(desc, SPMD_ERR_SIZE, "mesh: more than %d devices", SPMD_MAX_DEVICES);
        size *= desc->shape[i];
        if (!n || !*n || strlen(n) > SPMD_MAX_AXIS_NAME || strpbrk(n, ", *\t\n"))
            return spmd__desc_fail(desc, SPMD_ERR_INVALID,
                                   "mesh: axis_names[%d] must be 1..%d characters without ',', '*' or "
                                   "spaces",
                                   i, SPMD_MAX_AXIS_NAME);
        for (j = 0; j < i; j++)
            if (strcmp(desc->axis_names[j], n) == 0)
                return spmd__desc_fail(desc, SPMD_ERR_DUP_AXIS, "mesh: axis name '%s' used twice", n);
    }
    if ((unsigned)desc->backend >= SPMD_BACKEND_COUNT)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: invalid backend %d", (int)desc->backend);
    if (desc->devices_per_process < 0 || desc->devices_per_process > SPMD_MAX_DEVICES)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: devices_per_process %d is outside 0..%d",
                               desc->devices_per_process, SPMD_MAX_DEVICES);
    if ((unsigned)desc->check >= SPMD_CHECK_COUNT)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: invalid check %d", (int)desc->check);
    if ((unsigned)desc->log_level >= SPMD_LOG_LEVEL_COUNT)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: invalid log_level %d", (int)desc->log_level);
    if (desc->timeout_ms < 0)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: negative timeout_ms %lld",
                               (long long)desc->timeout_ms);
    if (desc->max_inflight < 0 || desc->max_inflight > SPMD__MAX_INFLIGHT)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: max_inflight %d is outside 0..%d",
                               desc->max_inflight, SPMD__MAX_INFLIGHT);
    if ((unsigned)desc->scheduler >= SPMD_SCHEDULER_COUNT)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: invalid scheduler %d", (int)desc->scheduler);
    if (desc->carriers < 0 || desc->carriers > SPMD__MAX_CARRIERS)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: carriers %d is outside 0..%d (0: the CPUs available)",
                               desc->carriers, SPMD__MAX_CARRIERS);
    if (desc->thread_stack_size && (desc->thread_stack_size < SPMD__STACK_MIN || desc->thread_stack_size > SPMD__STACK_MAX))
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: thread_stack_size %zu is outside %zu..%zu (0: the default)",
                               desc->thread_stack_size, SPMD__STACK_MIN, SPMD__STACK_MAX);
    if (!desc->allocator.alloc != !desc->allocator.free)
        return spmd__desc_fail(desc, SPMD_ERR_INVALID, "mesh: set both allocator.alloc and allocator.free");
    if (desc->backend == SPMD_BACKEND_LIBFABRIC && !SPMD__HAS_LIBFABRIC)
        return spmd__desc_fail(desc, SPMD_ERR_UNSUPPORTED,
                               "mesh: the libfabric backend is not compiled in (define SPMDCOLL_LIBFABRIC "
                               "before including spmdcoll.h and link -lfabric)");
    *size_out = size;
    return SPMD_OK;
}

#if SPMD__HAS_LIBFABRIC
static int spmd__launched_many(void);                   /* >>libfabric meshes */
static const spmd__backend_vt *spmd__fabric_table(void); /* >>libfabric meshes */
#endif
/* The one place that names the backends: the table a mesh runs on (want:
   desc.backend; libfabric when asked for or, by default, when the process
   was launched as one of several), and which backend that is. */
static const spmd__backend_vt *spmd__mesh_backend(spmd_backend want, spmd_backend *got) {
#if SPMD__HAS_LIBFABRIC
    if (want == SPMD_BACKEND_LIBFABRIC || (want == SPMD_BACKEND_DEFAULT && spmd__launched_many())) {
        *got = SPMD_BACKEND_LIBFABRIC;
        return spmd__fabric_table();
    }
#endif
    (void)want;
    *got = SPMD_BACKEND_THREADS;
    return &spmd__thread_vt;
}

/* The settings the desc and the environment give (the environment wins
   where both name one), the backend and its table. */
SPMD__SETUP static void spmd__mesh_settings(spmd_mesh *m, const spmd_mesh_desc *desc) {
    int set;
    m->log_fn = desc->log_fn;
    m->log_user = desc->log_user;
    m->log_level = spmd__env_level(desc->log_level ? desc->log_level : SPMD_LOG_WARN);
    m->timeout_ms = spmd__env_int("SPMD_TIMEOUT_MS", 1, INT64_MAX / 1000000,
                                  desc->timeout_ms ? desc->timeout_ms : SPMD__DEFAULT_TIMEOUT_MS, NULL);
    m->check = (int)spmd__env_int("SPMD_CHECK", 0, 2, desc->check == SPMD_CHECK_SITES ? 2 : desc->check == SPMD_CHECK_ON,
                                  NULL);
    m->ncpu = spmd__ncpu();
    m->spin_ns = (uint64_t)spmd__env_int("SPMD_SPIN_US", 0, 10000000, 1000, &set) * 1000u;
    m->spin_os_ns = set ? m->spin_ns : 0u;
    m->yield_ns = (uint64_t)spmd__env_int("SPMD_YIELD_US", 0, 10000000, 200, NULL) * 1000u;
    m->D = 1; /* a power of two, so that a ring position is a mask */
    while (m->D < (desc->max_inflight ? desc->max_inflight : SPMD__DEFAULT_INFLIGHT)) m->D *= 2;
    m->ktab = spmd__kernel_table();
    m->stack_size = desc->thread_stack_size;
    m->carriers = (int)spmd__env_int("SPMD_CARRIERS", 1, SPMD__MAX_CARRIERS, desc->carriers, NULL);
    m->seed = (uint64_t)spmd__env_int("SPMD_SCHED_SEED", 0, INT64_MAX, (int64_t)(desc->sched_seed & INT64_MAX), NULL);
    if (desc->sched_seed && !getenv("SPMD_SCHED_SEED")) m->seed = desc->sched_seed;
    {
        const char *a = getenv("SPMD_ALGO");
        if (a && strcmp(a, "eager") == 0) m->forced_algo = SPMD_ALGO_EAGER;
        else if (a && strcmp(a, "split") == 0) m->forced_algo = SPMD_ALGO_SPLIT;
        else if (a && strcmp(a, "bruck") == 0) m->forced_algo = SPMD_ALGO_BRUCK;
        else if (a && strcmp(a, "rd") == 0) m->forced_algo = SPMD_ALGO_RD;
        else if (a && strcmp(a, "rab") == 0) m->forced_algo = SPMD_ALGO_RAB;
        else if (a && *a && strcmp(a, "default") != 0)
            spmd__log(m, SPMD_LOG_WARN, -1, "ignoring SPMD_ALGO=%s (eager, split, bruck, rd, rab, default)", a);
    }
    m->vt = spmd__mesh_backend(desc->backend, &m->backend);
}

/* The devices, their coordinates and check logs (m->devs is allocated). */
SPMD__SETUP static spmd_status spmd__mesh_devices(spmd_mesh *m, int size) {
    int i, j;
    for (i = 0; i < size; i++) {
        spmd_dev *d = (spmd_dev *)spmd__alloc(&m->alloc, sizeof *d);
        int rem = i;
        if (!d) return SPMD_ERR_NOMEM;
        m->devs[i] = d;
        d->mesh = m;
        d->id = i;
        for (j = 0; j < m->ndim; j++) {
            d->coords[j] = rem / m->stride[j];
            rem %= m->stride[j];
        }
        pthread_mutex_init(&d->mbox, NULL);
        if (m->check && !(d->clog = (spmd__clog *)spmd__alloc(&m->alloc, SPMD__CLOG * sizeof *d->clog)))
            return SPMD_ERR_NOMEM; /* (8 KiB: check mode's log) */
        d->check_sites = m->check == 2;
    }
    return SPMD_OK;
}

SPMD__SETUP static spmd_status spmd__mesh_create(const spmd_mesh_desc *desc, spmd_mesh **out, int shrunk, const int *procs) {
    spmd_mesh *m;
    int i, j, size = 1;
    spmd_status s;
    if (out) *out = NULL;
    if (!desc || !out) return SPMD_ERR_NULL;
    if ((s = spmd__desc_check(desc, &size)) != SPMD_OK) return s;
    m = (spmd_mesh *)spmd__alloc(&desc->allocator, sizeof *m);
    if (!m) return SPMD_ERR_NOMEM;
    m->alloc = desc->allocator;
    m->shrunk = shrunk;
    m->shrink_procs = procs;
    pthread_mutex_init(&m->lock, NULL);
    m->nprocs = 1;
    m->nlocal = size;
    m->want_dpp = desc->devices_per_process;
    pthread_mutex_init(&m->xlock, NULL);
    m->ndim = desc->ndim;
    m->size = size;
    for (i = m->ndim - 1, j = 1; i >= 0; i--) {
        m->shape[i] = desc->shape[i];
        m->stride[i] = j;
        j *= desc->shape[i];
        snprintf(m->names[i], sizeof m->names[i], "%s", desc->axis_names[i]);
    }
    spmd__mesh_settings(m, desc);
    m->gbuckets = 1024;
    m->gtab = (spmd__group **)spmd__alloc(&m->alloc, m->gbuckets * sizeof *m->gtab);
    m->gkeys = (struct spmd__gkey **)spmd__alloc(&m->alloc, m->gbuckets * sizeof *m->gkeys);
    m->devs = (spmd_dev **)spmd__alloc(&m->alloc, (size_t)size * sizeof *m->devs);
    if (!m->gtab || !m->gkeys || !m->devs) { spmd__mesh_free(m); return SPMD_ERR_NOMEM; }
    if ((s = spmd__mesh_devices(m, size)) != SPMD_OK) { spmd__mesh_free(m); return s; }
    if ((s = spmd__faults_parse(m, desc)) != SPMD_OK) { spmd__mesh_free(m); return s; }
    if ((s = m->vt->init(m)) != SPMD_OK) { spmd__mesh_free(m); return s; }
    m->shrink_procs = NULL;
    /* the default: fibers when the process's devices outnumber its CPUs
       (faster at every size measured, docs/fibers.md; known once the
       backend placed the devices) */
    m->sched = desc->scheduler ? desc->scheduler : m->nlocal > m->ncpu ? SPMD_SCHEDULER_FIBERS : SPMD_SCHEDULER_THREADS;
    {
        const char *a = getenv("SPMD_SCHEDULER");
        if (a && strcmp(a, "threads") == 0) m->sched = SPMD_SCHEDULER_THREADS;
        else if (a && strcmp(a, "fibers") == 0) m->sched = SPMD_SCHEDULER_FIBERS;
        else if (a && *a) spmd__log(m, SPMD_LOG_WARN, -1, "ignoring SPMD_SCHEDULER=%s (threads, fibers)", a);
    }
    if ((s = spmd__rec_setup(m, desc)) != SPMD_OK) { m->vt->fini(m); spmd__mesh_free(m); return s; }
    spmd__log(m, SPMD_LOG_INFO, -1, "mesh of %d devices on the %s backend (%d cpus, timeout %lld ms%s)", size,
              m->vt->name, m->ncpu, (long long)m->timeout_ms, m->check ? ", check mode" : "");
    *out = m;
    return SPMD_OK;
}
spmd_status spmd_mesh_create(const spmd_mesh_desc *desc, spmd_mesh **out) {
    return spmd__mesh_create(desc, out, 0, NULL);
}

spmd_status spmd_mesh_destroy(spmd_mesh *m) {
    int i, leaked = 0;
    if (!m) return SPMD_ERR_NULL;
    if (SPMD__LD_ACQ(&m->nattached) || SPMD__LD_ACQ(&m->running)) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_destroy: %u devices still attached",
                  (unsigned)SPMD__LD_ACQ(&m->nattached));
        return SPMD_ERR_BUSY;
    }
    spmd__sig_forget(m); /* SPMD_REPORT_SIGNAL: no report of it from now on */
    spmd__report_settle(m);
    for (i = 0; i < m->size; i++) leaked += m->devs[i]->inflight;
    if (leaked) spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_destroy: %d requests were never waited", leaked);
    spmd__trace_write(m);
    m->vt->fini(m);
    spmd__mesh_free(m);
    return leaked ? SPMD_ERR_STATE : SPMD_OK;
}

int spmd_mesh_size(const spmd_mesh *m) { return m ? m->size : -(int)SPMD_ERR_NULL; }
int spmd_mesh_ndim(const spmd_mesh *m) { return m ? m->ndim : -(int)SPMD_ERR_NULL; }
const char *spmd_mesh_axis_name(const spmd_mesh *m, int dim) {
    return m && dim >= 0 && dim < m->ndim ? m->names[dim] : NULL;
}
int spmd_mesh_axis_size(const spmd_mesh *m, const char *axes) {
    int ax[SPMD_MAX_AXES], n;
    char why[160];
    spmd_status s;
    if (!m) return -(int)SPMD_ERR_NULL;
    s = spmd__parse_axes(m, axes, ax, &n, why, sizeof why);
    return s == SPMD_OK ? spmd__axes_size(m, ax, n) : -(int)s;
}
spmd_backend spmd_mesh_backend(const spmd_mesh *m) { return m ? m->backend : SPMD_BACKEND_DEFAULT; }
spmd_scheduler spmd_mesh_scheduler(const spmd_mesh *m) { return m ? m->sched : SPMD_SCHEDULER_DEFAULT; }
spmd_status spmd_mesh_status(const spmd_mesh *m) {
    if (!m) return SPMD_ERR_NULL;
    return SPMD__LD_ACQ(&m->broken) ? m->broken_status : SPMD_OK;
}
const char *spmd_mesh_error(const spmd_mesh *m) {
    return m && SPMD__LD_ACQ(&m->broken) ? m->broken_msg : "";
}

size_t spmd_report(spmd_mesh *m, int device, char *buf, size_t len) {
    if (!buf) len = 0;
    if (len) buf[0] = '\0';
    if (!m) return 0;
    if (device < -1 || device >= m->size) {
        int w = snprintf(buf, len, "spmd_report: device %d is outside -1..%d", device, m->size - 1);
        return w > 0 ? (size_t)w : 0;
    }
    return spmd__report(m, device, buf, len);
}
void spmd_set_site(spmd_dev *d, const char *file, int line) {
    if (!d) return;
    d->site_file = file;
    d->site_line = line;
}

int spmd_mesh_process_count(const spmd_mesh *m) { return m ? m->nprocs : -(int)SPMD_ERR_NULL; }
spmd_status spmd_mesh_counters(const spmd_mesh *m, spmd_counters *out) {
    if (!m || !out) return SPMD_ERR_NULL;
    memset(out, 0, sizeof *out);
    if (m->vt->counters) m->vt->counters((spmd_mesh *)(uintptr_t)m, out, 0);
    return SPMD_OK;
}
spmd_status spmd_mesh_counters_reset(spmd_mesh *m) {
    if (!m) return SPMD_ERR_NULL;
    if (m->vt->counters) m->vt->counters(m, NULL, 1);
    return SPMD_OK;
}
const char *spmd_count_kind_name(int kind) {
    return kind >= 0 && kind < SPMD__KIND_COUNT ? spmd__kind_names[kind] : "invalid";
}
int spmd_mesh_process_id(const spmd_mesh *m) { return m ? m->proc : -(int)SPMD_ERR_NULL; }
int spmd_device_process(const spmd_mesh *m, int device) {
    if (!m) return -(int)SPMD_ERR_NULL;
    if (device < 0 || device >= m->size) return -(int)SPMD_ERR_INVALID;
    return m->proc_of ? m->proc_of[device] : 0;
}
int spmd_device_is_local(const spmd_mesh *m, int device) {
    int p = spmd_device_process(m, device);
    return p < 0 ? p : p == m->proc;
}

/* Attach device; with `thread` set it runs on this OS thread (its own
   scratch pointers, made now), else spmd_run's fibers give it theirs. */
static spmd_status spmd__attach(spmd_mesh *m, int device, spmd_dev **out, int thread) {
    uint32_t expect = 0;
    spmd_dev *d;
    if (out) *out = NULL;
    if (!m || !out) return SPMD_ERR_NULL;
    if (device < 0 || device >= m->size) {
        spmd__log(m, SPMD_LOG_DEBUG, -1, "attach: device %d outside 0..%d", device, m->size - 1);
        return SPMD_ERR_INVALID;
    }
    if (m->proc_of && m->proc_of[device] != m->proc) {
        spmd__log(m, SPMD_LOG_DEBUG, -1, "attach: device %d lives in process %d, this is process %d", device,
                  m->proc_of[device], m->proc);
        return SPMD_ERR_INVALID;
    }
    d = m->devs[device];
    if (!SPMD__CAS(&d->attached, &expect, 1u)) {
        spmd__log(m, SPMD_LOG_DEBUG, -1, "attach: device %d is already attached", device);
        return SPMD_ERR_BUSY;
    }
    if (thread && !d->ptrs_own &&
        !(d->ptrs_own = (const void **)spmd__alloc(&m->alloc, 3 * (size_t)m->size * sizeof(void *)))) {
        SPMD__ST_SC(&d->attached, 0u);
        spmd__log(m, SPMD_LOG_ERROR, -1, "attach: no memory for device %d's %d scratch pointers", device, 3 * m->size);
        return SPMD_ERR_NOMEM;
    }
    if (thread) d->ptrs = d->ptrs_own;
    SPMD__FADD(&m->nattached, 1u);
    d->err[0] = '\0';
    *out = d;
    return SPMD_OK;
}

spmd_status spmd_attach(spmd_mesh *m, int device, spmd_dev **out) { return spmd__attach(m, device, out, 1); }

spmd_status spmd_detach(spmd_dev *d) {
    spmd_status s = SPMD_OK;
    if (!d) return SPMD_ERR_NULL;
    if (!SPMD__LD_ACQ(&d->attached)) return SPMD_ERR_STATE;
    if (d->inflight) {
        char what[160] = "?";
        if (d->head) spmd__req_what(d->head, what, sizeof what);
        s = spmd__fail(d, SPMD_ERR_STATE, "detached with %d request%s never waited, the first %s over '%s' "
                       "(operation #%llu of this device): spmd_wait (or spmd_test until done) every request, also "
                       "after a failure or a break (it returns at once then)", d->inflight,
                       d->inflight == 1 ? "" : "s", what, d->head && d->head->gr ? d->head->gr->text : "?",
                       d->head ? (unsigned long long)d->head->global : 0ull);
        spmd__log(d->mesh, SPMD_LOG_ERROR, d->id, "%s", d->err);
        spmd__break(d->mesh, SPMD_ERR_STATE, d->id, d->err);
    }
    SPMD__ST_SC(&d->attached, 0u);
    SPMD__FADD(&d->mesh->nattached, (uint32_t)-1);
    return s;
}

/* A device's function returned: peers that wait for it can stop waiting
   (spmd__gone_check); wake those asleep. A sleeper is asleep on the group
   of every call it waits in: their bits, not every device's flag (that
   was O(devices) per return, O(devices^2) per spmd_run), and only the
   groups d is a member of can wait for d (d->memberof; every group when
   a list ran out of memory, m->wake_all). */
static void spmd__run_returned(spmd_dev *d) {
    spmd_mesh *m = d->mesh;
    spmd__group *g;
    size_t b;
    int k;
    SPMD__ST_SC(&d->returned, 1u);
    SPMD__FADD(&m->nreturned, 1u);
    pthread_mutex_lock(&m->lock);
    for (b = 0; m->wake_all && b < m->gbuckets; b++)
        for (g = m->gtab[b]; g; g = g->next) spmd__wake_group(m, g, -1);
    for (k = 0; !m->wake_all && k < d->nmemberof; k++) spmd__wake_group(m, d->memberof[k], -1);
    pthread_mutex_unlock(&m->lock);
}

typedef struct spmd__run_ctx {
    spmd_mesh *m;
    spmd_fn fn;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int gate; /* 0: wait, 1: go, -1: abandon */
} spmd__run_ctx;

typedef struct spmd__run_arg {
    spmd__run_ctx *ctx;
    int device;
} spmd__run_arg;

static void *spmd__run_thread(void *p) {
    spmd__run_arg *a = (spmd__run_arg *)p;
    spmd__run_ctx *c = a->ctx;
    spmd_dev *d;
    int gate;
    pthread_mutex_lock(&c->lock);
    while (c->gate == 0) pthread_cond_wait(&c->cond, &c->lock);
    gate = c->gate;
    pthread_mutex_unlock(&c->lock);
    d = c->m->devs[a->device]; /* attached for us by spmd_run */
    if (gate > 0) {
        c->fn(d, c->arg);
        spmd__run_returned(d);
    }
    spmd__ignore(spmd_detach(d));
    return NULL;
}

/* What spmd_run returns (its devices joined): the status that broke the
   mesh, else the earliest failure a device did not go on from (its last
   call failed), else SPMD_OK. */
static spmd_status spmd__run_result(spmd_mesh *m) {
    spmd_status s = SPMD_OK;
    uint64_t at = UINT64_MAX;
    int i;
    if (m->vt->run_end && m->nprocs > 1) m->vt->run_end(m); /* every process: the same break, if any */
    if (SPMD__LD_ACQ(&m->broken)) return m->broken_status;
    for (i = m->first_local; i < m->first_local + m->nlocal; i++) {
        spmd_dev *d = m->devs[i];
        if (d->unhandled != SPMD_OK && d->unhandled_at < at) {
            s = d->unhandled;
            at = d->unhandled_at;
        }
    }
    return s;
}

SPMD__SETUP spmd_status spmd_run(spmd_mesh *m, spmd_fn fn, void *arg) {
    spmd__run_ctx c;
    spmd__run_arg *args;
    pthread_t *th;
    pthread_attr_t attr;
    uint32_t expect = 0;
    int i, started = 0, lo, n;
    spmd_status s;
    if (!m || !fn) return SPMD_ERR_NULL;
    if (!SPMD__CAS(&m->running, &expect, 1u)) return SPMD_ERR_BUSY;
    lo = m->first_local; /* this process's devices (all of them on threads) */
    n = m->nlocal;
    args = (spmd__run_arg *)spmd__alloc(&m->alloc, (size_t)(n ? n : 1) * sizeof *args);
    th = (pthread_t *)spmd__alloc(&m->alloc, (size_t)(n ? n : 1) * sizeof *th);
    if (!args || !th) {
        spmd__free(&m->alloc, args);
        spmd__free(&m->alloc, th);
        SPMD__ST_SC(&m->running, 0u);
        return SPMD_ERR_NOMEM;
    }
    /* claim every device before any thread starts, so that no other thread
       can take one in between */
    for (i = 0; i < n; i++) {
        spmd_dev *dummy;
        if ((s = spmd__attach(m, lo + i, &dummy, m->sched != SPMD_SCHEDULER_FIBERS)) != SPMD_OK) {
            while (i-- > 0) spmd__ignore(spmd_detach(m->devs[lo + i]));
            spmd__free(&m->alloc, args);
            spmd__free(&m->alloc, th);
            SPMD__ST_SC(&m->running, 0u);
            if (s == SPMD_ERR_BUSY) spmd__log(m, SPMD_LOG_DEBUG, -1, "spmd_run: a device is attached by another thread");
            return s; /* (BUSY, or NOMEM: attach said why) */
        }
    }
    for (i = 0; i < n; i++) m->devs[lo + i]->unhandled = SPMD_OK;
    SPMD__ST_SC(&m->nreturned, 0u);
    for (i = 0; i < m->size; i++) SPMD__ST_SC(&m->devs[i]->returned, 0u);
    if (m->sched == SPMD_SCHEDULER_FIBERS) {
        spmd__free(&m->alloc, args);
        spmd__free(&m->alloc, th);
        s = spmd__fibers_run(m, fn, arg);
        if (s == SPMD_OK) s = spmd__run_result(m);
        spmd__report_settle(m);
        SPMD__ST_SC(&m->running, 0u);
        return s;
    }
    c.m = m;
    c.fn = fn;
    c.arg = arg;
    c.gate = 0;
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    pthread_attr_init(&attr);
    if (m->stack_size) pthread_attr_setstacksize(&attr, m->stack_size);
    for (i = 0; i < n; i++) {
        args[i].ctx = &c;
        args[i].device = lo + i;
        if (pthread_create(&th[i], &attr, spmd__run_thread, &args[i]) != 0) break;
        started++;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&c.lock);
    c.gate = started == n ? 1 : -1;
    pthread_cond_broadcast(&c.cond);
    pthread_mutex_unlock(&c.lock);
    for (i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (i = started; i < n; i++) spmd__ignore(spmd_detach(m->devs[lo + i]));
    pthread_mutex_destroy(&c.lock);
    pthread_cond_destroy(&c.cond);
    spmd__free(&m->alloc, args);
    spmd__free(&m->alloc, th);
    if (started < n) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "spmd_run: could only start %d of %d threads", started, n);
        s = SPMD_ERR_SYSTEM;
    } else {
        s = spmd__run_result(m);
    }
    spmd__report_settle(m);
    SPMD__ST_SC(&m->running, 0u);
    return s;
}

int spmd_device_id(const spmd_dev *d) { return d ? d->id : -(int)SPMD_ERR_NULL; }
spmd_mesh *spmd_device_mesh(const spmd_dev *d) { return d ? d->mesh : NULL; }
int spmd_device_coords(const spmd_dev *d, int coords[SPMD_MAX_AXES]) {
    if (!d || !coords) return -(int)SPMD_ERR_NULL;
    memcpy(coords, d->coords, (size_t)d->mesh->ndim * sizeof(int));
    return d->mesh->ndim;
}
const char *spmd_last_error(const spmd_dev *d) { return d ? d->err : ""; }

static int spmd__axis_query(spmd_dev *d, const char *axes, int want_index) {
    int ax[SPMD_MAX_AXES], n;
    char why[160];
    spmd_status s;
    if (!d) return -(int)SPMD_ERR_NULL;
    s = spmd__parse_axes(d->mesh, axes, ax, &n, why, sizeof why);
    if (s != SPMD_OK) return -(int)spmd__fail(d, s, "%s: %s", want_index ? "axis_index" : "axis_size", why);
    return want_index ? spmd__axes_index(d, ax, n) : spmd__axes_size(d->mesh, ax, n);
}
int spmd_axis_index(spmd_dev *d, const char *axes) { return spmd__axis_query(d, axes, 1); }
int spmd_axis_size(spmd_dev *d, const char *axes) { return spmd__axis_query(d, axes, 0); }

SPMD__NOINLINE spmd_status spmd_allreduce(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                           spmd_op op, const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    int one = op == SPMD_OP_ARGMAX || op == SPMD_OP_ARGMIN;
    return spmd__reduce_start(d, SPMD__KIND_ALLREDUCE, send, recv, count, dt, op, axes, opts, one, NULL);
}
SPMD__NOINLINE spmd_status spmd_psum(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                      const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_SUM, axes, opts);
}
SPMD__NOINLINE spmd_status spmd_pmean(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                       const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_MEAN, axes, opts);
}
SPMD__NOINLINE spmd_status spmd_pmax(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                      const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_MAX, axes, opts);
}
SPMD__NOINLINE spmd_status spmd_pmin(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                      const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_MIN, axes, opts);
}
SPMD__NOINLINE spmd_status spmd_pprod(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                       const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_PROD, axes, opts);
}
SPMD__NOINLINE spmd_status spmd_pargmax(spmd_dev *d, const void *send, int32_t *recv, size_t count, spmd_dtype dt,
                         const char *axis, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_ARGMAX, axis, opts);
}
SPMD__NOINLINE spmd_status spmd_pargmin(spmd_dev *d, const void *send, int32_t *recv, size_t count, spmd_dtype dt,
                         const char *axis, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd_allreduce(d, send, recv, count, dt, SPMD_OP_ARGMIN, axis, opts);
}
SPMD__NOINLINE spmd_status spmd_barrier(spmd_dev *d, const char *axes, const spmd_opts *opts) {
    SPMD__CALLER(d);
    return spmd__reduce_start(d, SPMD__KIND_BARRIER, NULL, NULL, 0, SPMD_DTYPE_NONE, SPMD_OP_NONE, axes,
                              opts, 0, NULL);
}

SPMD__NOINLINE spmd_status spmd_allreduce_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                                 spmd_op op, const char *axes, const spmd_opts *opts, spmd_req **req) {
    SPMD__CALLER(d);
    int one = op == SPMD_OP_ARGMAX || op == SPMD_OP_ARGMIN;
    if (!req) {
        char name[40];
        snprintf(name, sizeof name, "%s_start", (unsigned)op < SPMD_OP_COUNT ? spmd__op_jax[op] : "allreduce");
        return spmd__refuse_start(d, SPMD__KIND_ALLREDUCE, name, axes, opts);
    }
    return spmd__reduce_start(d, SPMD__KIND_ALLREDUCE, send, recv, count, dt, op, axes, opts, one, req);
}
SPMD__NOINLINE spmd_status spmd_psum_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                            const char *axes, const spmd_opts *opts, spmd_req **req) {
    SPMD__CALLER(d);
    return spmd_allreduce_start(d, send, recv, count, dt, SPMD_OP_SUM, axes, opts, req);
}
SPMD__NOINLINE spmd_status spmd_barrier_start(spmd_dev *d, const char *axes, const spmd_opts *opts, spmd_req **req) {
    SPMD__CALLER(d);
    if (!req) return spmd__refuse_start(d, SPMD__KIND_BARRIER, "barrier_start", axes, opts);
    return spmd__reduce_start(d, SPMD__KIND_BARRIER, NULL, NULL, 0, SPMD_DTYPE_NONE, SPMD_OP_NONE, axes,
                              opts, 0, req);
}

spmd_array spmd_array_nd(void *data, spmd_dtype dt, int rank, const int64_t *shape) {
    spmd_array a;
    int i;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = dt;
    a.rank = rank;
    for (i = 0; i < rank && i < SPMD_MAX_RANK && shape; i++) a.shape[i] = shape[i];
    return a;
}
spmd_array spmd_array_1d(void *data, spmd_dtype dt, int64_t n0) { return spmd_array_nd(data, dt, 1, &n0); }
spmd_array spmd_array_2d(void *data, spmd_dtype dt, int64_t n0, int64_t n1) {
    int64_t sh[2];
    sh[0] = n0;
    sh[1] = n1;
    return spmd_array_nd(data, dt, 2, sh);
}
spmd_array spmd_array_3d(void *data, spmd_dtype dt, int64_t n0, int64_t n1, int64_t n2) {
    int64_t sh[3];
    sh[0] = n0;
    sh[1] = n1;
    sh[2] = n2;
    return spmd_array_nd(data, dt, 3, sh);
}

/* The array forms share one shape: kind, name, x, out and three integers. */
static spmd_status spmd__array_op(spmd_dev *d, int kind, const char *name, const spmd_array *x,
                                  const spmd_array *out, const char *axes, int dim1, int dim2, int tiled,
                                  const int *perm, int npairs, int root, const spmd_opts *o, spmd_req **req) {
    spmd__call c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.name = name;
    c.x = x;
    c.out = out;
    c.dim1 = dim1;
    c.dim2 = dim2;
    c.tiled = tiled != 0;
    c.perm = perm;
    c.npairs = npairs;
    c.root = root;
    c.op = SPMD_OP_SUM;
    if (!d) return SPMD_ERR_NULL;
    if (!req && d->plan.gr && x && out) {
        int q = spmd__quick(d, kind, NULL, NULL, 0, SPMD_DTYPE_NONE, SPMD_OP_SUM, 0, axes, o, &c);
        if (q >= 0) return (spmd_status)q;
    }
    return spmd__coll_start(d, &c, axes, o, req);
}

/* The buffer forms: kind, name, buffers, count, dtype, op, root. */
static spmd_status spmd__buffer_op(spmd_dev *d, int kind, const char *name, const void *send, void *recv,
                                   size_t count, spmd_dtype dt, spmd_op op, int root, const char *axes,
                                   const spmd_opts *o, spmd_req **req) {
    spmd__call c;
    if (!req && (kind == SPMD__KIND_BCAST || kind == SPMD__KIND_REDUCE)) {
        int q = spmd__quick(d, kind, send, recv, count, dt, op, root, axes, o, NULL);
        if (q >= 0) return (spmd_status)q;
    }
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.name = name;
    c.send = send;
    c.recv = recv;
    c.count = count;
    c.dt = dt;
    c.op = op;
    c.root = root;
    return spmd__coll_start(d, &c, axes, o, req);
}

/* A _start form's request pointer: NULL is a refusal like any other
   (spmd__refuse_start), which keeps the call's place in its group. */
#define SPMD__START_REQ(d, req, kind, name, axes, o)                          \
    do {                                                                      \
        if (!(req)) return spmd__refuse_start((d), (kind), (name), (axes), (o)); \
        *(req) = NULL;                                                        \
    } while (0)

SPMD__NOINLINE spmd_status spmd_all_gather(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes, int axis,
                            int tiled, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_ALLGATHER, "all_gather", x, out, axes, axis, 0, tiled, NULL, 0, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_all_gather_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                  int axis, int tiled, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLGATHER, "all_gather_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_ALLGATHER, "all_gather", x, out, axes, axis, 0, tiled, NULL, 0, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_all_gather_invariant(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                      int axis, int tiled, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_ALLGATHER, "all_gather_invariant", x, out, axes, axis, 0, tiled, NULL, 0,
                          0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_all_gather_invariant_start(spmd_dev *d, const spmd_array *x, const spmd_array *out,
                                            const char *axes, int axis, int tiled, const spmd_opts *o,
                                            spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLGATHER, "all_gather_invariant_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_ALLGATHER, "all_gather_invariant", x, out, axes, axis, 0, tiled, NULL, 0,
                          0, o, req);
}
SPMD__NOINLINE spmd_status spmd_psum_scatter(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                              int scatter_dimension, int tiled, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_PSUM_SCATTER, "psum_scatter", x, out, axes, scatter_dimension, 0, tiled,
                          NULL, 0, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_psum_scatter_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                    int scatter_dimension, int tiled, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_PSUM_SCATTER, "psum_scatter_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_PSUM_SCATTER, "psum_scatter", x, out, axes, scatter_dimension, 0, tiled,
                          NULL, 0, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_all_to_all(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                            int split_axis, int concat_axis, int tiled, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_ALLTOALL, "all_to_all", x, out, axes, split_axis, concat_axis, tiled, NULL,
                          0, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_all_to_all_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                  int split_axis, int concat_axis, int tiled, const spmd_opts *o,
                                  spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLTOALL, "all_to_all_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_ALLTOALL, "all_to_all", x, out, axes, split_axis, concat_axis, tiled, NULL,
                          0, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_pswapaxes(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes, int axis,
                           const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_ALLTOALL, "pswapaxes", x, out, axes, axis, axis, 0, NULL, 0, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_pswapaxes_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                 int axis, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLTOALL, "pswapaxes_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_ALLTOALL, "pswapaxes", x, out, axes, axis, axis, 0, NULL, 0, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_ppermute(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                          const int *perm, int npairs, const spmd_opts *o) {
    SPMD__CALLER(d);
    if (npairs < 0) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "ppermute", axes, o, SPMD_ERR_PERM, "npairs is negative");
    return spmd__array_op(d, SPMD__KIND_PPERMUTE, "ppermute", x, out, axes, 0, 0, 0, perm, npairs, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_ppermute_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                const int *perm, int npairs, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_PPERMUTE, "ppermute_start", axes, o);
    if (npairs < 0) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "ppermute", axes, o, SPMD_ERR_PERM, "npairs is negative");
    return spmd__array_op(d, SPMD__KIND_PPERMUTE, "ppermute", x, out, axes, 0, 0, 0, perm, npairs, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_pshuffle(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                          const int *perm, const spmd_opts *o) {
    SPMD__CALLER(d);
    if (!perm) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "pshuffle", axes, o, SPMD_ERR_NULL, "perm is NULL");
    return spmd__array_op(d, SPMD__KIND_PPERMUTE, "pshuffle", x, out, axes, 0, 0, 0, perm, -1, 0, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_pshuffle_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                const int *perm, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_PPERMUTE, "pshuffle_start", axes, o);
    if (!perm) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "pshuffle", axes, o, SPMD_ERR_NULL, "perm is NULL");
    return spmd__array_op(d, SPMD__KIND_PPERMUTE, "pshuffle", x, out, axes, 0, 0, 0, perm, -1, 0, o, req);
}
SPMD__NOINLINE spmd_status spmd_pbroadcast(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes, int source,
                            const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__array_op(d, SPMD__KIND_BCAST, "pbroadcast", x, out, axes, 0, 0, 0, NULL, 0, source, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_pbroadcast_start(spmd_dev *d, const spmd_array *x, const spmd_array *out, const char *axes,
                                  int source, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_BCAST, "pbroadcast_start", axes, o);
    return spmd__array_op(d, SPMD__KIND_BCAST, "pbroadcast", x, out, axes, 0, 0, 0, NULL, 0, source, o, req);
}

SPMD__NOINLINE spmd_status spmd_allgather(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, const char *axes,
                           const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_ALLGATHER, "allgather", send, recv, count, dt, SPMD_OP_NONE, 0, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_allgather_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                                 const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLGATHER, "allgather_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_ALLGATHER, "allgather", send, recv, count, dt, SPMD_OP_NONE, 0, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_alltoall(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, const char *axes,
                          const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_ALLTOALL, "alltoall", send, recv, count, dt, SPMD_OP_NONE, 0, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_alltoall_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt,
                                const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_ALLTOALL, "alltoall_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_ALLTOALL, "alltoall", send, recv, count, dt, SPMD_OP_NONE, 0, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_bcast(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                       const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_BCAST, "bcast", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_bcast_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                             const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_BCAST, "bcast_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_BCAST, "bcast", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_gather(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                        const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_GATHER, "gather", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_gather_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                              const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_GATHER, "gather_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_GATHER, "gather", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_scatter(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                         const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_SCATTER, "scatter", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_scatter_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, int root,
                               const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_SCATTER, "scatter_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_SCATTER, "scatter", send, recv, count, dt, SPMD_OP_NONE, root, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_reduce(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, spmd_op op, int root,
                        const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_REDUCE, "reduce", send, recv, count, dt, op, root, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_reduce_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, spmd_op op,
                              int root, const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_REDUCE, "reduce_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_REDUCE, "reduce", send, recv, count, dt, op, root, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_scan(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, spmd_op op,
                      const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__buffer_op(d, SPMD__KIND_SCAN, "scan", send, recv, count, dt, op, 0, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_scan_start(spmd_dev *d, const void *send, void *recv, size_t count, spmd_dtype dt, spmd_op op,
                            const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_SCAN, "scan_start", axes, o);
    return spmd__buffer_op(d, SPMD__KIND_SCAN, "scan", send, recv, count, dt, op, 0, axes, o, req);
}

spmd_status spmd_psend(spmd_dev *d, const spmd_array *x, const char *axes, const int *perm, int npairs,
                       const spmd_opts *o, spmd_req **token) {
    spmd__call c;
    SPMD__START_REQ(d, token, SPMD__KIND_PPERMUTE, "psend", axes, o);
    if (!x) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "psend", axes, o, SPMD_ERR_NULL, "x is NULL");
    if (npairs < 0) return spmd__refuse_early(d, SPMD__KIND_PPERMUTE, "psend", axes, o, SPMD_ERR_PERM, "npairs is negative");
    memset(&c, 0, sizeof c);
    c.kind = SPMD__KIND_PPERMUTE;
    c.name = "psend";
    c.x = x;
    c.out = x; /* the receiving array has x's shape; precv gives it */
    c.perm = perm;
    c.npairs = npairs;
    c.two_phase = 1;
    return spmd__coll_start(d, &c, axes, o, token);
}

spmd_status spmd_precv(spmd_dev *d, spmd_req *t, const spmd_array *out, const char *axes, const int *perm,
                       int npairs, const spmd_opts *o) {
    int ax[SPMD_MAX_AXES], nax = 0, i, G;
    size_t numel = 0;
    char why[200];
    spmd__gref *gr = NULL;
    spmd_status s;
    if (!d) return SPMD_ERR_NULL;
    if (!t || t->magic != SPMD__REQ_MAGIC || !t->user || !t->two_phase || t->recv_ready || t->dev != d)
        return spmd__fail(d, t ? SPMD_ERR_STATE : SPMD_ERR_NULL, "precv: token is not an unfinished psend of this device");
    if ((s = spmd__check_array(d, "precv", "out", out, &numel)) != SPMD_OK) return s;
    if (spmd__hash_shape((uint64_t)out->dtype, out->shape, out->rank) != t->shape_hash)
        return spmd__fail(d, SPMD_ERR_SHAPE, "precv: out must have the shape and dtype of the psend's x");
    if ((s = spmd__parse_axes(d->mesh, axes, ax, &nax, why, sizeof why)) != SPMD_OK)
        return spmd__fail(d, s, "precv: %s", why);
    if ((s = spmd__check_groups(&d->mesh->alloc, o, spmd__axes_size(d->mesh, ax, nax), why, sizeof why)) != SPMD_OK)
        return spmd__fail(d, s, "precv: %s", why);
    if ((s = spmd__gref_get(d, ax, nax, o, axes, &gr)) != SPMD_OK) return s;
    G = gr->g->G;
    {
        int pairs = 0;
        for (i = 0; i < G; i++) pairs += t->src_of[i] >= 0;
        if (gr != t->gr || npairs != pairs || (npairs && !perm))
            return spmd__fail(d, SPMD_ERR_INVALID, "precv: axes or perm differ from the psend's");
    }
    for (i = 0; i < npairs; i++) {
        int src = perm[2 * i], dst = perm[2 * i + 1];
        if (dst < 0 || dst >= G || t->src_of[dst] != src)
            return spmd__fail(d, SPMD_ERR_INVALID, "precv: perm differs from the psend's at pair %d", i);
    }
    if (numel) {
        const char *a = (const char *)t->send, *b = (const char *)out->data;
        if (a < b + t->in_bytes && b < a + t->in_bytes)
            return spmd__fail(d, SPMD_ERR_OVERLAP, "precv: out overlaps the psend's x");
    }
    t->recv = out->data;
    t->recv_ready = 1;
    if (t->sig.algo == SPMD__ALG_LOCAL) {
        if (t->src_of[0] == 0 && numel) memcpy(t->recv, t->send, t->in_bytes);
        else if (numel) memset(t->recv, 0, t->in_bytes);
        t->state = SPMD__R_DONE;
        t->status = SPMD_OK;
    } else if (t->state != SPMD__R_POST && t->sig.algo == SPMD__ALG_SPLIT) {
        spmd__publish_recv(t);
    }
    (void)o;
    return spmd_wait(t);
}

static spmd_status spmd__ragged(spmd_dev *d, const spmd_array *operand, const spmd_array *output,
                                const int64_t *io, const int64_t *ss, const int64_t *oo, const int64_t *rs, int64_t k,
                                const char *axes, const spmd_opts *o, spmd_req **req) {
    spmd__call c;
    if (!d) return SPMD_ERR_NULL;
    if (!operand || !output)
        return spmd__refuse_early(d, SPMD__KIND_RAGGED, "ragged_all_to_all", axes, o, SPMD_ERR_NULL,
                                  operand ? "output is NULL" : "operand is NULL");
    memset(&c, 0, sizeof c);
    c.kind = SPMD__KIND_RAGGED;
    c.name = "ragged_all_to_all";
    c.x = operand;
    c.out = output;
    c.ragged[0] = io;
    c.ragged[1] = ss;
    c.ragged[2] = oo;
    c.ragged[3] = rs;
    c.k = k;
    return spmd__coll_start(d, &c, axes, o, req);
}
SPMD__NOINLINE spmd_status spmd_ragged_all_to_all(spmd_dev *d, const spmd_array *operand, const spmd_array *output,
                                   const int64_t *input_offsets, const int64_t *send_sizes,
                                   const int64_t *output_offsets, const int64_t *recv_sizes, int64_t k,
                                   const char *axes, const spmd_opts *o) {
    SPMD__CALLER(d);
    return spmd__ragged(d, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, k, axes, o, NULL);
}
SPMD__NOINLINE spmd_status spmd_ragged_all_to_all_start(spmd_dev *d, const spmd_array *operand, const spmd_array *output,
                                         const int64_t *input_offsets, const int64_t *send_sizes,
                                         const int64_t *output_offsets, const int64_t *recv_sizes, int64_t k,
                                         const char *axes, const spmd_opts *o, spmd_req **req) {
    SPMD__CALLER(d);
    SPMD__START_REQ(d, req, SPMD__KIND_RAGGED, "ragged_all_to_all_start", axes, o);
    return spmd__ragged(d, operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, k, axes, o, req);
}

static spmd_status spmd__p2p_start(spmd_dev *d, int kind, const void *sbuf, void *rbuf, size_t count, spmd_dtype dt,
                                   int peer, int tag, const char *axes, const spmd_opts *o, spmd_recv_info *info,
                                   spmd_req **out) {
    const char *name = kind == SPMD__KIND_SEND ? "send" : "recv";
    int ax[SPMD_MAX_AXES], nax = 0, G, k;
    char why[200];
    spmd__gref *gr = NULL;
    spmd_req *r;
    spmd_status s;
    if (out) *out = NULL;
    if (d) d->unhandled = SPMD_OK; /* another call: the device went on after its last failure */
    if ((s = spmd__check_dev(d)) != SPMD_OK) return s;
    if ((int)dt <= SPMD_DTYPE_NONE || (int)dt >= SPMD_DTYPE_COUNT)
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: invalid dtype %d", name, (int)dt);
    if (count > (size_t)INT64_MAX / 16) return spmd__fail(d, SPMD_ERR_OVERFLOW, "%s: count %zu overflows", name, count);
    if (count && !(kind == SPMD__KIND_SEND ? sbuf : (const void *)rbuf))
        return spmd__fail(d, SPMD_ERR_NULL, "%s: buffer is NULL", name);
    if (tag < (kind == SPMD__KIND_SEND ? 0 : SPMD_ANY_TAG))
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: tag %d must be >= 0%s", name, tag,
                          kind == SPMD__KIND_SEND ? "" : " or SPMD_ANY_TAG");
    if ((s = spmd__parse_axes(d->mesh, axes, ax, &nax, why, sizeof why)) != SPMD_OK)
        return spmd__fail(d, s, "%s: %s", name, why);
    if ((s = spmd__check_groups(&d->mesh->alloc, o, spmd__axes_size(d->mesh, ax, nax), why, sizeof why)) != SPMD_OK)
        return spmd__fail(d, s, "%s: %s", name, why);
    if (o && (o->timeout_ms < 0 || (int)o->algo < 0 || (int)o->algo >= SPMD_ALGO_COUNT))
        return spmd__fail(d, SPMD_ERR_INVALID, "%s: invalid timeout or algo", name);
    if ((s = spmd__gref_get(d, ax, nax, o, axes, &gr)) != SPMD_OK) return s;
    G = gr->g->G;
    if (peer < (kind == SPMD__KIND_SEND ? 0 : SPMD_ANY_SOURCE) || peer >= G)
        return spmd__fail(d, SPMD_ERR_ROOT, "%s: %s %d is outside the group of %d", name,
                          kind == SPMD__KIND_SEND ? "dest" : "source", peer, G);
    r = spmd__req_new(d);
    if (!r) return spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory for a request", name);
    r->gr = gr;
    r->p2p = 1;
    r->sig.kind = (uint8_t)kind;
    r->sig.dtype = (uint8_t)dt;
    r->count = count;
    r->in_size = r->out_size = spmd__dtype_sizes[dt];
    r->send = sbuf;
    r->recv = rbuf;
    r->peer = peer;
    r->tag = tag;
    r->info = info;
    r->user = out != NULL;
    r->timeout_ms = o && o->timeout_ms ? o->timeout_ms : d->mesh->timeout_ms;
    r->state = kind == SPMD__KIND_SEND ? SPMD__R_POST : SPMD__R_ARRIVE;
    /* libfabric: a peer in another process (or any peer) goes by message */
    r->x = gr->g->span && (kind == SPMD__KIND_RECV || gr->g->lidx[peer] < 0);
    if ((k = spmd__rec_begin(r)) != 0) spmd__finish(r, k == 1 ? SPMD_OK : SPMD_ERR_PEER_LOST); /* fault plan */
    else d->mesh->vt->progress(r);
    if (out) {
        *out = r;
        return SPMD_OK;
    }
    s = spmd__block(r);
    spmd__req_release(r);
    return s;
}

spmd_status spmd_send(spmd_dev *d, const void *buf, size_t count, spmd_dtype dt, int dest, int tag, const char *axes,
                      const spmd_opts *o) {
    return spmd__p2p_start(d, SPMD__KIND_SEND, buf, NULL, count, dt, dest, tag, axes, o, NULL, NULL);
}
spmd_status spmd_send_start(spmd_dev *d, const void *buf, size_t count, spmd_dtype dt, int dest, int tag,
                            const char *axes, const spmd_opts *o, spmd_req **req) {
    if (!req) return d ? spmd__fail(d, SPMD_ERR_NULL, "send_start: req is NULL") : SPMD_ERR_NULL; /* (no group sequence) */
    return spmd__p2p_start(d, SPMD__KIND_SEND, buf, NULL, count, dt, dest, tag, axes, o, NULL, req);
}
spmd_status spmd_recv(spmd_dev *d, void *buf, size_t count, spmd_dtype dt, int source, int tag, const char *axes,
                      const spmd_opts *o, spmd_recv_info *info) {
    return spmd__p2p_start(d, SPMD__KIND_RECV, NULL, buf, count, dt, source, tag, axes, o, info, NULL);
}
spmd_status spmd_recv_start(spmd_dev *d, void *buf, size_t count, spmd_dtype dt, int source, int tag,
                            const char *axes, const spmd_opts *o, spmd_recv_info *info, spmd_req **req) {
    if (!req) return d ? spmd__fail(d, SPMD_ERR_NULL, "recv_start: req is NULL") : SPMD_ERR_NULL; /* (no group sequence) */
    return spmd__p2p_start(d, SPMD__KIND_RECV, NULL, buf, count, dt, source, tag, axes, o, info, req);
}
spmd_status spmd_sendrecv(spmd_dev *d, const void *sendbuf, size_t sendcount, int dest, int sendtag, void *recvbuf,
                          size_t recvcount, int source, int recvtag, spmd_dtype dt, const char *axes,
                          const spmd_opts *o, spmd_recv_info *info) {
    spmd_req *sr;
    spmd_status s = spmd_send_start(d, sendbuf, sendcount, dt, dest, sendtag, axes, o, &sr), w;
    if (s != SPMD_OK) return s;
    s = spmd_recv(d, recvbuf, recvcount, dt, source, recvtag, axes, o, info);
    w = spmd_wait(sr);
    return s != SPMD_OK ? s : w;
}

#define SPMD__REDUCE_START(NAME, OP, RECV_T)                                                                  \
    SPMD__NOINLINE spmd_status NAME(spmd_dev *d, const void *send, RECV_T *recv, size_t count, spmd_dtype dt, const char *axes, \
                     const spmd_opts *o, spmd_req **req) {                                                   \
        SPMD__CALLER(d);                                                                                     \
        return spmd_allreduce_start(d, send, recv, count, dt, OP, axes, o, req);                             \
    }
SPMD__REDUCE_START(spmd_pmean_start, SPMD_OP_MEAN, void)
SPMD__REDUCE_START(spmd_pmax_start, SPMD_OP_MAX, void)
SPMD__REDUCE_START(spmd_pmin_start, SPMD_OP_MIN, void)
SPMD__REDUCE_START(spmd_pprod_start, SPMD_OP_PROD, void)
SPMD__REDUCE_START(spmd_pargmax_start, SPMD_OP_ARGMAX, int32_t)
SPMD__REDUCE_START(spmd_pargmin_start, SPMD_OP_ARGMIN, int32_t)

spmd_status spmd_wait(spmd_req *r) {
    spmd_status s = spmd__req_check(r);
    if (s != SPMD_OK) return s;
    s = r->state == SPMD__R_DONE ? r->status : spmd__block(r);
    spmd__req_release(r);
    return s;
}
spmd_status spmd_done(spmd_req *r) { return spmd_wait(r); }

spmd_status spmd_test(spmd_req *r, int *done) {
    spmd_status s = spmd__req_check(r);
    if (done) *done = 0;
    if (s != SPMD_OK) return s;
    if (!done) return SPMD_ERR_NULL;
    if (r->state != SPMD__R_DONE && !spmd__poll(r, spmd__now_ns()) && SPMD__LD_ACQ(&r->dev->mesh->nreturned))
        spmd__gone_or_broken(r);
    if (r->state != SPMD__R_DONE) {
        if (r->dev->fib) spmd__fiber_yield(r->dev); /* a poll loop must let the others run */
        return SPMD_OK;
    }
    s = r->status;
    spmd__req_release(r);
    *done = 1;
    return s;
}

spmd_status spmd_wait_all(spmd_req **reqs, int n) {
    spmd_status first = SPMD_OK;
    int i;
    if (n < 0) return SPMD_ERR_INVALID;
    if (n && !reqs) return SPMD_ERR_NULL;
    for (i = 0; i < n; i++) {
        spmd_status s;
        if (!reqs[i]) continue;
        s = spmd_wait(reqs[i]);
        reqs[i] = NULL;
        if (s != SPMD_OK && first == SPMD_OK) first = s;
    }
    return first;
}

// >>plans
/* Schedules of the algorithms across processes, as data. A plan is what
   one rank (of P, one input each: a process, its members' inputs
   combined first, see spmd__x_prun) does for one operation, step by step:
   a pure function of the algorithm, P, the rank and the element count n,
   so every process computes every other's and tests check plans without a
   network (tests/test_plans.c). A step sends a range of the rank's buffer
   to a peer and/or receives a range from it; a received range is copied
   in or combined with what is there, the lower rank's data always the left
   operand. Reductions keep the canonical order (>>reduce kernels): P' the
   largest power of two <= P and r = P - P', ranks 2i and 2i+1 (i < r) first
   combine into one (the pre-step), then P' virtual ranks (2i+1 for i < r,
   else rank - r) run steps at distances 1, 2, 4, ..., which combine
   neighbouring subtrees, and the pair ranks get the result back at the end
   (the post-step).
     SPMD__PLAN_RD   recursive doubling: every step exchanges the whole
                     vector; ceil(log2 P) messages of n elements a rank
                     (small operations).
     SPMD__PLAN_RAB  Rabenseifner: reduce-scatter by recursive halving,
                     then all-gather by recursive doubling; about
                     2 log2 P messages and 2 (P'-1)/P' n elements a rank
                     (large operations).
     SPMD__PLAN_TREE bcast and reduce on binomial trees (small
                     operations): a bcast's rank receives once from its
                     parent and sends to at most ceil(log2 P) children;
                     a reduce combines the canonical tree towards virtual
                     rank 0 (each rank sends once), which hands the result
                     to the root.
     SPMD__PLAN_SPLIT bcast and reduce of large operations, so that no
                     root moves more than about 2n: a bcast scatters the
                     P' blocks down a binomial tree from the root (n out
                     of it), then all-gathers them by recursive doubling
                     (n again), and the r ranks beyond P' get the whole
                     vector from the last r of the P'; a reduce runs
                     Rabenseifner's reduce-scatter, then gathers the
                     blocks up the same tree to the root's virtual rank
                     (its partner's, when the root is a pre-step's left
                     half, which then hands it over).
     SPMD__PLAN_CHAIN bcast of large operations over 3 to
                     SPMD__PLAN_CHAIN_MAX ranks: a pipeline from the root
                     through the ranks in order, in SPMD__PLAN_CHUNKS
                     pieces, so that every rank sends n once and the
                     links carry data all the time; with the processes of
                     a host in a block the chain crosses each host's link
                     once (spmd__plan_chains says when).
   A psum_scatter halves as Rabenseifner's first half over a work vector
   laid out so that each rank ends with its own block (spmd__plan_rscatter);
   ceil(log2 P) + 1 messages and (P-1)/P n elements a rank at most. A
   scatter and a gather run binomial trees (spmd__plan_scatter).
   Calls only the tree's size (spmd__tree_leaves, spmd__log2, >>reduce
   kernels). The exchange across processes runs them (spmd__x_pplan). */
enum { SPMD__PLAN_RD = 1, SPMD__PLAN_RAB, SPMD__PLAN_TREE, SPMD__PLAN_SPLIT, SPMD__PLAN_CHAIN };
enum { SPMD__PLAN_COPY = 0, SPMD__PLAN_LEFT, SPMD__PLAN_RIGHT }; /* received: in place; recv OP mine; mine OP recv */
#define SPMD__PLAN_STEPS 64 /* 2 log2 P + 2 for any P < 2^31; a chain: 2 SPMD__PLAN_CHUNKS */
typedef struct spmd__pstep {
    int peer;           /* the other rank */
    int64_t soff, slen; /* elements sent (slen 0: none) */
    int64_t roff, rlen; /* elements received (rlen 0: none) */
    int how;            /* SPMD__PLAN_*: what a received element does */
} spmd__pstep;
typedef struct spmd__plan_x {
    int nsteps;
    spmd__pstep step[SPMD__PLAN_STEPS];
} spmd__plan_x;

/* Rank of virtual rank v (r pairs). */
static int spmd__plan_real(int v, int r) { return v < r ? 2 * v + 1 : v + r; }
static void spmd__plan_add(spmd__plan_x *x, int peer, int64_t soff, int64_t slen, int64_t roff, int64_t rlen, int how) {
    spmd__pstep *s = &x->step[x->nsteps++];
    s->peer = peer;
    s->soff = soff;
    s->slen = slen;
    s->roff = roff;
    s->rlen = rlen;
    s->how = how;
}
/* Block b of P' over n elements: [n b / P', n (b + 1) / P'). */
static int64_t spmd__plan_blk(int64_t n, int b, int Pp) { return n / Pp * b + n % Pp * b / Pp; /* (no overflow) */ }

/* The lowest `bits` bits of a, reversed. */
static int spmd__plan_rev(int a, int bits) {
    int k, b = 0;
    for (k = 0; k < bits; k++) b |= (a >> k & 1) << (bits - 1 - k);
    return b;
}
/* A psum_scatter's work vector: member q's block of c elements lies in
   block bitreverse(u) of the P' (u its virtual rank; a pair's block holds
   both of its members', the lower first), so that recursive halving
   leaves each virtual rank with its own members' blocks. Where block b
   of P' starts: c (b + the blocks before it that hold a pair), counted
   over b's aligned sub-ranges. */
static int64_t spmd__plan_rs_edge(int Pp, int r, int64_t c, int b) {
    int L = spmd__log2(Pp), m, base = 0;
    int64_t pairs = 0;
    if (b >= Pp) return c * (Pp + r);
    for (m = L - 1; m >= 0; m--) {
        if (!(b >> m & 1)) continue; /* blocks j = base + t, t < 2^m: bitreverse(j) = rev(t) 2^(L-m) + s */
        {
            int s = spmd__plan_rev(base >> m, L - m), q = L - m;
            pairs += r > s ? ((int64_t)(r - s) + ((int64_t)1 << q) - 1) >> q : 0;
        }
        base += 1 << m;
    }
    return c * ((int64_t)b + pairs);
}
/* Where member q's block starts in a psum_scatter's work vector. */
static SPMD__UNUSED int64_t spmd__plan_rs_pos(int P, int q, int64_t c) {
    int Pp = spmd__tree_leaves(P), r = P - Pp, u = q < 2 * r ? q / 2 : q - r;
    return spmd__plan_rs_edge(Pp, r, c, spmd__plan_rev(u, spmd__log2(Pp))) + (q < 2 * r && q % 2 ? c : 0);
}
/* Block b's start: equal blocks of n, or a psum_scatter's (c > 0). */
static int64_t spmd__plan_at(int64_t n, int b, int Pp, int r, int64_t c) {
    return c ? spmd__plan_rs_edge(Pp, r, c, b) : spmd__plan_blk(n, b, Pp);
}

/* Reduce-scatter by recursive halving over the P' virtual ranks (r pairs):
   at step k bit k of v picks the half it keeps, so that v ends with block
   bitreverse(v), [*lo, *hi) of P', combined in the canonical order (the
   blocks: equal, or a psum_scatter's for c > 0). */
static void spmd__plan_halve(spmd__plan_x *x, int v, int r, int Pp, int64_t n, int64_t c, int *lo, int *hi) {
    int k;
    *lo = 0;
    *hi = Pp;
    for (k = 0; (1 << k) < Pp; k++) {
        int pv = v ^ (1 << k), mid = *lo + (*hi - *lo) / 2, up = v >> k & 1;
        int klo = up ? mid : *lo, khi = up ? *hi : mid, slo = up ? *lo : mid, shi = up ? mid : *hi;
        int64_t s0 = spmd__plan_at(n, slo, Pp, r, c), k0 = spmd__plan_at(n, klo, Pp, r, c);
        spmd__plan_add(x, spmd__plan_real(pv, r), s0, spmd__plan_at(n, shi, Pp, r, c) - s0, k0,
                       spmd__plan_at(n, khi, Pp, r, c) - k0, pv < v ? SPMD__PLAN_LEFT : SPMD__PLAN_RIGHT);
        *lo = klo;
        *hi = khi;
    }
}

/* All-gather by recursive doubling over the P' virtual ranks (r pairs),
   v holding blocks [lo, hi) of P' (equal, or a psum_scatter's for c > 0),
   the halving's mirror: from the farthest partner in, each step swaps
   what the two hold, and the ranges stay contiguous. */
static void spmd__plan_double(spmd__plan_x *x, int v, int r, int Pp, int64_t n, int64_t c, int lo, int hi) {
    int k;
    for (k = spmd__log2(Pp) - 1; k >= 0; k--) {
        int pv = v ^ (1 << k), w = hi - lo, up = v >> k & 1, olo = up ? lo - w : hi;
        int64_t s0 = spmd__plan_at(n, lo, Pp, r, c), o0 = spmd__plan_at(n, olo, Pp, r, c);
        spmd__plan_add(x, spmd__plan_real(pv, r), s0, spmd__plan_at(n, hi, Pp, r, c) - s0, o0,
                       spmd__plan_at(n, olo + w, Pp, r, c) - o0, SPMD__PLAN_COPY);
        lo = up ? olo : lo;
        hi = up ? hi : olo + w;
    }
}

/* A psum_scatter of c elements a member (n = P c in all) by recursive
   halving over the work vector laid out as spmd__plan_rs_pos says: a
   pre-step pair's left half sends its input and gets its block back from
   its partner; the others end with their own blocks, combined in the
   canonical order. ceil(log2 P) + 1 messages a rank at most. */
static SPMD__UNUSED int spmd__plan_rscatter(int P, int rank, int64_t c, spmd__plan_x *x) {
    int Pp, r, v, lo, hi;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || c < 0) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    if (rank < 2 * r && rank % 2 == 0) {
        spmd__plan_add(x, rank + 1, 0, c * P, 0, 0, SPMD__PLAN_COPY);
        spmd__plan_add(x, rank + 1, 0, 0, spmd__plan_rs_pos(P, rank, c), c, SPMD__PLAN_COPY);
        return 0;
    }
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, 0, 0, c * P, SPMD__PLAN_LEFT);
    v = rank < 2 * r ? rank / 2 : rank - r;
    spmd__plan_halve(x, v, r, Pp, c * P, c, &lo, &hi);
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, spmd__plan_rs_pos(P, rank - 1, c), c, 0, 0, SPMD__PLAN_COPY);
    return 0;
}

/* An all_gather of P blocks of c elements (n = P c) over the work vector
   laid out as spmd__plan_rs_pos says, each rank's own block in place:
   spmd__plan_rscatter backwards. A pre-step pair's left half hands its
   block to its partner and gets the whole vector back at the end; the P'
   virtual ranks double what they hold (block bitreverse(v) of P') from the
   farthest partner in. ceil(log2 P) + 1 messages a rank at most, n - c
   elements in (a pre-step's left half: n). With the processes of a host
   in aligned blocks (a power of two), the steps across hosts come first
   and carry the small parts: (H - 1)/H n leaves each host, what leaves it
   when one process a host gathers and the hosts exchange. */
static SPMD__UNUSED int spmd__plan_allgather(int P, int rank, int64_t c, spmd__plan_x *x) {
    int Pp, r, v, b;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || c < 0) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    if (rank < 2 * r && rank % 2 == 0) {
        spmd__plan_add(x, rank + 1, spmd__plan_rs_pos(P, rank, c), c, 0, 0, SPMD__PLAN_COPY);
        spmd__plan_add(x, rank + 1, 0, 0, 0, c * P, SPMD__PLAN_COPY);
        return 0;
    }
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, 0, spmd__plan_rs_pos(P, rank - 1, c), c, SPMD__PLAN_COPY);
    v = rank < 2 * r ? rank / 2 : rank - r;
    b = spmd__plan_rev(v, spmd__log2(Pp));
    spmd__plan_double(x, v, r, Pp, c * P, c, b, b + 1);
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, c * P, 0, 0, SPMD__PLAN_COPY);
    return 0;
}

/* The plan of rank `rank` of P for an allreduce of n elements by algo
   (SPMD__PLAN_RD or SPMD__PLAN_RAB). 0, or -1 for arguments outside.
   (Unused in a build without libfabric.) */
static SPMD__UNUSED int spmd__plan_allreduce(int algo, int P, int rank, int64_t n, spmd__plan_x *x) {
    int Pp, r, v, k, logp;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || n < 0 || (algo != SPMD__PLAN_RD && algo != SPMD__PLAN_RAB)) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    logp = spmd__log2(Pp);
    if (rank < 2 * r && rank % 2 == 0) { /* the pre-step's left half: its input in, the result back */
        spmd__plan_add(x, rank + 1, 0, n, 0, 0, SPMD__PLAN_COPY);
        spmd__plan_add(x, rank + 1, 0, 0, 0, n, SPMD__PLAN_COPY);
        return 0;
    }
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, 0, 0, n, SPMD__PLAN_LEFT);
    v = rank < 2 * r ? rank / 2 : rank - r;
    if (algo == SPMD__PLAN_RD) {
        for (k = 0; k < logp; k++) {
            int pv = v ^ (1 << k);
            spmd__plan_add(x, spmd__plan_real(pv, r), 0, n, 0, n, pv < v ? SPMD__PLAN_LEFT : SPMD__PLAN_RIGHT);
        }
    } else {
        int lo, hi; /* the blocks this rank still reduces */
        spmd__plan_halve(x, v, r, Pp, n, 0, &lo, &hi);
        spmd__plan_double(x, v, r, Pp, n, 0, lo, hi);
    }
    if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, n, 0, 0, SPMD__PLAN_COPY); /* the post-step */
    return 0;
}

/* A bcast of n elements from root on a binomial tree over the ranks
   relative to the root: rank v (0: the root) receives from v less its
   lowest set bit, then sends to v + 2^k for each 2^k below that bit (the
   root: below P), largest first. */
static SPMD__UNUSED int spmd__plan_bcast(int P, int rank, int root, int64_t n, spmd__plan_x *x) {
    int v, low = 1, k;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || n < 0) return -1;
    v = (rank - root + P) % P;
    while (low < P && !(v & low)) low *= 2; /* (the root: the first power of two >= P) */
    if (v) spmd__plan_add(x, (v - low + root) % P, 0, 0, 0, n, SPMD__PLAN_COPY);
    for (k = low / 2; k >= 1; k /= 2)
        if (v + k < P) spmd__plan_add(x, (v + k + root) % P, 0, n, 0, 0, SPMD__PLAN_COPY);
    return 0;
}

/* The binomial tree over relative ranks 0..Q-1 (real rank: (v + root) % P)
   that moves block u of Q over N elements, [N u / Q, N (u + 1) / Q), down
   from relative rank 0 (or up to it: gather): v's subtree is blocks
   [v, v + low) (low: v's lowest set bit; relative rank 0's: the first
   power of two >= Q), which going down v receives from v - low and passes
   on as [v + d, v + 2d) to v + d for d = low/2, ..., 1, and going up
   collects from v + d for d = 1, 2, ... < low and sends to v - low. */
static void spmd__plan_tree(spmd__plan_x *x, int up, int v, int Q, int64_t N, int P, int root) {
    int low = 1, d;
#define SPMD__PE(u) spmd__plan_blk(N, (u) < Q ? (u) : Q, Q) /* where block u starts (Q: the end) */
    while (low < Q && !(v & low)) low *= 2;
    if (v && !up)
        spmd__plan_add(x, (v - low + root) % P, 0, 0, SPMD__PE(v), SPMD__PE(v + low) - SPMD__PE(v), SPMD__PLAN_COPY);
    for (d = up ? 1 : low / 2; up ? d < low : d >= 1; d = up ? 2 * d : d / 2) {
        int64_t lo = SPMD__PE(v + d), len = SPMD__PE(v + 2 * d) - lo;
        if (v + d < Q)
            spmd__plan_add(x, (v + d + root) % P, up ? 0 : lo, up ? 0 : len, up ? lo : 0, up ? len : 0,
                           SPMD__PLAN_COPY);
    }
    if (v && up)
        spmd__plan_add(x, (v - low + root) % P, SPMD__PE(v), SPMD__PE(v + low) - SPMD__PE(v), 0, 0, SPMD__PLAN_COPY);
#undef SPMD__PE
}

/* A scatter (gather) of P blocks of c elements from (to) root on the
   binomial tree over the ranks relative to the root, the work vector
   holding relative rank v's block at v c: the root sends (receives)
   ceil(log2 P) messages, (P - 1) c elements; every other rank receives
   (sends) once. */
static SPMD__UNUSED int spmd__plan_scatter(int gather, int P, int rank, int root, int64_t c, spmd__plan_x *x) {
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || c < 0) return -1;
    spmd__plan_tree(x, gather, (rank - root + P) % P, P, c * P, P, root);
    return 0;
}

/* A reduce of n elements to root in the canonical order: the pre-step's
   pairs, then at step k virtual rank v with bit k set sends its partial to
   v - 2^k, which combines it on the right; virtual rank 0 ends with the
   whole tree and sends it to the root (unless it is the root). */
static SPMD__UNUSED int spmd__plan_reduce(int P, int rank, int root, int64_t n, spmd__plan_x *x) {
    int Pp, r, v, k, top;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || n < 0) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    top = spmd__plan_real(0, r); /* (who ends with the result) */
    if (rank < 2 * r && rank % 2 == 0) {
        spmd__plan_add(x, rank + 1, 0, n, 0, 0, SPMD__PLAN_COPY);
    } else {
        if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, 0, 0, n, SPMD__PLAN_LEFT);
        v = rank < 2 * r ? rank / 2 : rank - r;
        for (k = 1; k < Pp; k *= 2) {
            if (v & k) {
                spmd__plan_add(x, spmd__plan_real(v - k, r), 0, n, 0, 0, SPMD__PLAN_COPY);
                break;
            }
            spmd__plan_add(x, spmd__plan_real(v + k, r), 0, 0, 0, n, SPMD__PLAN_RIGHT);
        }
        if (rank == top && root != top) spmd__plan_add(x, root, 0, n, 0, 0, SPMD__PLAN_COPY);
    }
    if (rank == root && root != top) spmd__plan_add(x, top, 0, 0, 0, n, SPMD__PLAN_COPY);
    return 0;
}

/* A bcast of n elements from root in about 2n a rank: over ranks v
   relative to the root, the first P' = 2^m take block rev(v) each (v's m
   bits reversed) from a binomial tree whose nearest ranks split first:
   at step k the ranks v < 2^k pass the upper half of the blocks they
   hold to v + 2^k; then all-gather by recursive doubling from the
   farthest partner in: at step j v and v ^ 2^(m-1-j) swap their 2^j
   blocks (rev(v) with its low j bits cleared on). Both keep the ranges
   contiguous, and the large transfers go between near ranks: with the
   processes of a host in aligned blocks the steps inside a host carry
   half the data and those across hosts the small parts (the root's host
   sends about 1.5 n over the network, not 2.25 n, 4 hosts of 2; for
   any root: where P is a power of two v is rank XOR root, so near ranks
   stay near). The r ranks v >= P' receive the whole vector from v - r,
   one of the last r of the P' (never the root). */
static SPMD__UNUSED int spmd__plan_bcast_split(int P, int rank, int root, int64_t n, spmd__plan_x *x) {
    int v, Pp, r, k, m, b, c;
#define SPMD__PR(u) (r ? ((u) + root) % P : (u) ^ root) /* the rank of relative rank u */
#define SPMD__PB(u) spmd__plan_blk(n, (u), Pp) /* where block u starts (Pp: the end) */
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || n < 0) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    m = spmd__log2(Pp);
    v = r ? (rank - root + P) % P : rank ^ root;
    if (v >= Pp) {
        spmd__plan_add(x, SPMD__PR(v - r), 0, 0, 0, n, SPMD__PLAN_COPY);
        return 0;
    }
    for (k = 0; k < m; k++) { /* before it, v < 2^k holds the 2^(m-k) blocks from rev_k(v) 2^(m-k) */
        c = 1 << (m - k - 1);
        if (v < (1 << k)) {
            b = spmd__plan_rev(v, k) * 2 * c + c;
            spmd__plan_add(x, SPMD__PR(v + (1 << k)), SPMD__PB(b), SPMD__PB(b + c) - SPMD__PB(b), 0, 0, SPMD__PLAN_COPY);
        } else if (v < (2 << k)) {
            b = spmd__plan_rev(v, k + 1) * c;
            spmd__plan_add(x, SPMD__PR(v - (1 << k)), 0, 0, SPMD__PB(b), SPMD__PB(b + c) - SPMD__PB(b), SPMD__PLAN_COPY);
        }
    }
    for (k = 0; k < m; k++) { /* v holds 2^k blocks from b; its partner the next (or previous) 2^k (the root: all) */
        int pv = v ^ (1 << (m - 1 - k)), pb;
        b = spmd__plan_rev(v, m) & ~((1 << k) - 1);
        pb = b ^ (1 << k);
        spmd__plan_add(x, SPMD__PR(pv), SPMD__PB(b), pv ? SPMD__PB(b + (1 << k)) - SPMD__PB(b) : 0, SPMD__PB(pb),
                       v ? SPMD__PB(pb + (1 << k)) - SPMD__PB(pb) : 0, SPMD__PLAN_COPY);
    }
    if (v >= Pp - r) spmd__plan_add(x, SPMD__PR(v + r), 0, n, 0, 0, SPMD__PLAN_COPY);
#undef SPMD__PB
#undef SPMD__PR
    return 0;
}

/* A bcast's chain: P <= SPMD__PLAN_CHAIN_MAX ranks, each of which passes
   the pieces on as they come, take (C + P - 2) / C of the time of one link
   carrying n (C = SPMD__PLAN_CHUNKS pieces: 1.125 n at P = 4, 1.375 n at
   P = 8), where the split form takes about 2 n over a flat network and two
   phases that wait for each other across hosts. Emulated hosts at
   1 Gbit/s, 16 MiB: 2 x 2 processes 151-153 ms against the split form's
   176 (Open MPI 152-156), 4 x 2 192 against 305 (docs/performance.md).
   Pieces of 64 KiB at least. */
#define SPMD__PLAN_CHUNKS 16
#define SPMD__PLAN_CHAIN_MAX 8
#define SPMD__PLAN_CHAIN_MIN ((size_t)SPMD__PLAN_CHUNKS << 16)
static SPMD__UNUSED int spmd__plan_chains(int P, size_t bytes) {
    return P >= 3 && P <= SPMD__PLAN_CHAIN_MAX && bytes >= SPMD__PLAN_CHAIN_MIN;
}

/* A bcast of n elements from root down the chain of ranks relative to it
   (v = 0 the root, v + 1 after v) in C = min(SPMD__PLAN_CHUNKS, n) pieces:
   a step receives piece i from v - 1 (not the root), the next passes it
   to v + 1 (not the last rank); 2C steps at most. */
static SPMD__UNUSED int spmd__plan_bcast_chain(int P, int rank, int root, int64_t n, spmd__plan_x *x) {
    int v, i, C = n < SPMD__PLAN_CHUNKS ? (int)n : SPMD__PLAN_CHUNKS;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || n < 0) return -1;
    v = (rank - root + P) % P;
    for (i = 0; i < C; i++) {
        int64_t at = spmd__plan_blk(n, i, C), len = spmd__plan_blk(n, i + 1, C) - at;
        if (v) spmd__plan_add(x, (rank + P - 1) % P, 0, 0, at, len, SPMD__PLAN_COPY);
        if (v < P - 1) spmd__plan_add(x, (rank + 1) % P, at, len, 0, 0, SPMD__PLAN_COPY);
    }
    return 0;
}

/* A reduce of n elements to root in the canonical order and about 2n into
   the root: the pre-step's pairs, Rabenseifner's reduce-scatter, then the
   blocks gathered to virtual rank w (the root's, or its partner's when the
   root is a pre-step's left half) in the all-gather's order: at step k
   (from log2 P' - 1 down) a rank whose v differs from w in bit k (and none
   above) sends what it holds to v ^ 2^k and is done; w's rank hands the
   result to the root if that is another. */
static SPMD__UNUSED int spmd__plan_reduce_split(int P, int rank, int root, int64_t n, spmd__plan_x *x) {
    int Pp, r, v, w, k, lo, hi, holder;
    x->nsteps = 0;
    if (P < 1 || rank < 0 || rank >= P || root < 0 || root >= P || n < 0) return -1;
    Pp = spmd__tree_leaves(P);
    r = P - Pp;
    w = root < 2 * r ? root / 2 : root - r;
    holder = spmd__plan_real(w, r);
    if (rank < 2 * r && rank % 2 == 0) {
        spmd__plan_add(x, rank + 1, 0, n, 0, 0, SPMD__PLAN_COPY);
    } else {
        if (rank < 2 * r) spmd__plan_add(x, rank - 1, 0, 0, 0, n, SPMD__PLAN_LEFT);
        v = rank < 2 * r ? rank / 2 : rank - r;
        spmd__plan_halve(x, v, r, Pp, n, 0, &lo, &hi);
        for (k = spmd__log2(Pp) - 1; k >= 0; k--) {
            int pv = v ^ (1 << k), wd = hi - lo, up = v >> k & 1;
            int olo = up ? lo - wd : hi, ohi = olo + wd;
            if ((v ^ w) >> (k + 1)) break; /* sent already */
            if ((v ^ w) >> k & 1) {
                spmd__plan_add(x, spmd__plan_real(pv, r), spmd__plan_blk(n, lo, Pp),
                               spmd__plan_blk(n, hi, Pp) - spmd__plan_blk(n, lo, Pp), 0, 0, SPMD__PLAN_COPY);
                break;
            }
            spmd__plan_add(x, spmd__plan_real(pv, r), 0, 0, spmd__plan_blk(n, olo, Pp),
                           spmd__plan_blk(n, ohi, Pp) - spmd__plan_blk(n, olo, Pp), SPMD__PLAN_COPY);
            lo = up ? olo : lo;
            hi = up ? hi : ohi;
        }
        if (rank == holder && root != holder) spmd__plan_add(x, root, 0, n, 0, 0, SPMD__PLAN_COPY);
    }
    if (rank == root && root != holder) spmd__plan_add(x, holder, 0, 0, 0, n, SPMD__PLAN_COPY);
    return 0;
}

// >>bootstrap
/* How the processes of a libfabric job find each other (internal; compiled
   only with SPMDCOLL_LIBFABRIC).

   Layout, first source that has both numbers wins:
     SPMD_NUM_PROCESSES / SPMD_PROCESS_ID      (spmdrun, jax.distributed names)
     SLURM_NTASKS / SLURM_PROCID               (srun)
     OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_RANK   (Open MPI's mpirun)
     PMI_SIZE / PMI_RANK                       (MPICH, Intel MPI, other PMI launchers)
   Coordinator (process 0's host:port, "[v6addr]:port" for IPv6):
     SPMD_COORDINATOR. Under a PMIx launcher without it (PMIX_NAMESPACE and
     PMIX_RANK set: Open MPI's mpirun, srun --mpi=pmix): process 0 listens
     on a free port and tells the others through PMIx (spmd__boot_pmix).
     Under Slurm without either: the first host of
     SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, which is where srun puts
     task 0 with the default block distribution) and port
     SPMD_COORDINATOR_PORT, else 20000 + (SLURM_JOB_ID * 16 + SLURM_STEP_ID)
     % 30000. A PMI launcher without PMIx publishes no address we could
     use: there SPMD_COORDINATOR is required.
   Job key: SPMD_JOB_KEY (spmdrun makes a random one); under PMIx without
     it "pmix:<namespace>", under Slurm "slurm:<job>.<step>"; else empty
     (logged at info).
   Deadlines: SPMD_BOOT_TIMEOUT_MS (else the deadline of the mesh whose
     creation starts the bootstrap: SPMD_TIMEOUT_MS, else its
     desc.timeout_ms, else 60 s) for the whole bootstrap;
     SPMD_BOOT_CONN_TIMEOUT_MS (default 5000) for a connection to the
     coordinator to complete its handshake.
   Interface: SPMD_SOCKET_IFNAME names the interface whose address process 0
     listens on and the others connect from (like NCCL_SOCKET_IFNAME), and
     the transport takes the fabric domain of that name where the provider
     has one (tcp names its domains by interface; when it names them so
     but offers none on that interface, which is down or without carrier,
     opening fails with SPMD_ERR_INVALID rather than publishing an
     address on another one); the address chosen is logged at info level
     either way.

   Wire (version SPMD__BOOT_VERSION): every message is a 16-byte header, little-endian
       u32 magic "SPMD" (0x444d5053), u16 version, u16 type, u32 rank, u32 length
   then `length` payload bytes. Types and payloads:
       HELLO    u32 nprocs, u32 keylen, key, u32 port: where the client
                listens for its children in the tree (0: it has none)
                                                   (client -> coordinator; child -> parent)
       WELCOME  -                                  (coordinator -> client; parent -> child)
       REJECT   reason text (at most 200 bytes)    (coordinator -> client; parent -> child)
       TREE     u32 parent, u32 port, the parent's address (4 bytes IPv4,
                16 IPv6): where the client's parent in the tree listens
                                                   (coordinator -> client)
       UP       u32 exchange number, then (u32 process, u32 len, blob of
                at most 4096 bytes) for the sender and every process
                below it in the tree, in increasing order   (child -> parent)
       DOWN     the same for every process: the allgather's result
                                                   (parent -> child)
       GATHER   u32 exchange number, one byte per process: the survivors'
                agreement (spmd__shrink_agree)     (client -> coordinator)
       GATHERED the same: its decision             (coordinator -> client)
       LOST     u32 rank of a process that died    (coordinator -> client)
       BYE      -                                  (either way: clean exit)
       BROKEN   u32 mesh id, u32 status, u32 process, reason (at most 500 bytes):
                a mesh broke in that process       (client -> coordinator -> the others)
       ABORT    u32 status, reason (at most 500 bytes): the coordinator's
                bootstrap failed (e.g. a process never joined), told to
                the processes that had joined      (coordinator -> client)
       RECORDS  u32 mesh id, u32 process, text (at most 3000 bytes of
                printable ASCII lines "  device K: ..."): what that
                process's devices were doing when the mesh broke there,
                for the others' reports      (client -> coordinator -> the others)
   The header is checked (magic, version, type, rank, length against the
   type's limit) before the payload is read, and the payload before use.
   A connection that has not sent a valid HELLO within its read deadline is
   closed; the coordinator serves all pending connections with poll(), so
   one silent or slow connection delays nobody.

   After the handshake the connections stay open as a star around process 0;
   they carry what is small or once per event (the handshake, LOST, BYE,
   BROKEN, RECORDS, ABORT, the survivors' agreement), and they are how a
   dead process is noticed: the coordinator sees the socket close without
   BYE and tells the others (LOST); the others see the coordinator's socket
   close.

   The allgather (and so the barrier) runs over a binary tree of TCP
   connections: node v = (rank + P - 1) % P, parent (v - 1) / 2, children
   2v + 1 and 2v + 2, so process 1 is the root and process 0, the
   coordinator, the last node: a leaf. A process with children listens
   (on the address its connection to the coordinator left from, at a port
   the system picks) and says where in its HELLO; once every process has
   joined, the coordinator tells each where its parent listens (TREE), and
   each connects to its parent: HELLO (checked as the coordinator checks
   it: the job, the key, a child of that process), WELCOME. An allgather
   sends UP the tree (a node waits for its children's, then sends its
   subtree's blobs) and the root sends the table DOWN, each node passing it
   on as it came: 2 log2(P) steps. A node waiting on its parent or children
   also reads the star (process 0: every process's connection), so a loss
   anywhere ends every wait (SPMD_ERR_PEER_LOST naming the process), and a
   tree connection that closes without BYE is a loss too. The coordinator
   writes a WELCOME and a TREE per process and, per exchange, only its own
   entry: O(1) bytes per process (the counts: docs/processes.md). */
SPMD__SETUP_BEGIN
#if SPMD__HAS_LIBFABRIC
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#if SPMD__HAS_LANE
#include <sys/mman.h>
#include <sys/stat.h>
#endif

#define SPMD__BOOT_MAGIC 0x444d5053u
#define SPMD__BOOT_VERSION 6u
#define SPMD__BOOT_HDR 16u
#define SPMD__BOOT_MAX_PROCS 4096
#define SPMD__BOOT_KEY_MAX 128u
#define SPMD__BOOT_BLOB_MAX 4096u
#define SPMD__BOOT_REASON_MAX 200u
#define SPMD__BOOT_BROKEN_MAX 500u /* bytes of the reason a mesh broke (a broken_msg, cut) */
#define SPMD__BOOT_RECS_MAX 3000u  /* bytes of a process's report lines (RECORDS) */
#define SPMD__BOOT_RECS_KEEP 16    /* RECORDS kept (the newest per mesh and process wins) */
#define SPMD__BOOT_MAX_PENDING 64

enum {
    SPMD__BM_HELLO = 1, SPMD__BM_WELCOME, SPMD__BM_REJECT, SPMD__BM_GATHER, SPMD__BM_GATHERED,
    SPMD__BM_LOST, SPMD__BM_BYE, SPMD__BM_BROKEN, SPMD__BM_ABORT, SPMD__BM_RECORDS, SPMD__BM_TREE, SPMD__BM_UP,
    SPMD__BM_DOWN, SPMD__BM_COUNT
};
#define SPMD__BOOT_BROKEN_KEEP 8 /* announcements of broken meshes kept until read */

/* What a program may set instead of the environment; zero fields: env. */
typedef struct spmd__boot_desc {
    int num_processes;        /* > 0: use this and process_id instead of the env */
    int process_id;
    const char *coordinator;  /* host:port of process 0 */
    const char *job_key;
    const char *ifname;       /* interface for the bootstrap sockets */
    int64_t timeout_ms;       /* whole bootstrap */
    spmd_log_fn log_fn;
    void *log_user;
    spmd_log_level log_level; /* 0: SPMD_LOG_LEVEL, else warn */
    const spmd_allocator *alloc;
} spmd__boot_desc;

typedef struct spmd__boot_conn {
    int fd;
    int rank;                 /* -1 until the handshake says */
    int bye, eof;
    unsigned char *buf;
    size_t len, cap;
    uint64_t deadline_ns;     /* read deadline of a pending handshake */
    unsigned port;            /* at process 0: where this process listens for its children in the tree (0: none) */
    char peer[64];
} spmd__boot_conn;

typedef struct spmd__boot_broken { /* an announcement of a broken mesh */
    uint32_t mesh_id, status, proc;
    char text[SPMD__BOOT_BROKEN_MAX + 1];
} spmd__boot_broken;

typedef struct spmd__boot_recs { /* a process's report lines about a mesh (RECORDS) */
    uint32_t mesh_id, proc;
    char text[SPMD__BOOT_RECS_MAX + 1];
} spmd__boot_recs;

typedef struct spmd__boot {
    int rank, nprocs;
    spmd_allocator alloc;
    spmd_log_fn log_fn;
    void *log_user;
    spmd_log_level log_level;
    int64_t timeout_ms, conn_timeout_ms;
    char coord_host[256], coord_port[8];
    char key[SPMD__BOOT_KEY_MAX + 1];
    size_t keylen;
    char ifname[IF_NAMESIZE + 1];   /* interface actually used ("" unknown) */
    char addr[INET6_ADDRSTRLEN];    /* this process's bootstrap address */
    const char *layout_from;        /* which env family gave the layout */
    int pmix;                       /* the coordinator's address goes through PMIx (spmd__boot_pmix) */
    int listen_fd;                  /* process 0's until everyone joined; another's until its children in the tree did */
    spmd__boot_conn coord;          /* rank > 0: the connection to process 0 */
    spmd__boot_conn *peers;         /* rank 0: one per process (index 0 unused) */
    spmd__boot_conn up, down[2];    /* the tree: to the parent, to the children (fd -1: none) */
    struct pollfd *pfds;            /* room for nprocs + 1 (spmd__boot_wait) */
    unsigned char *lost;            /* per process: 1 died, 2 left cleanly */
    int nlost;
    uint32_t round;                 /* allgathers begun: each message carries it */
    /* meshes other processes announced broken: the last BROKEN_KEEP of
       nbroken (written under the transport's lock, counted with release) */
    spmd__boot_broken broken[SPMD__BOOT_BROKEN_KEEP];
    uint32_t nbroken;
    /* RECORDS heard: the last RECS_KEEP of nrecs (under the transport's lock) */
    spmd__boot_recs recs[SPMD__BOOT_RECS_KEEP];
    uint32_t nrecs;
    uint64_t sent_bytes;            /* written to the bootstrap's sockets (spmd__boot_send), headers included */
    spmd_status aborted;            /* the coordinator's ABORT: its status (0: none) */
    char abort_why[SPMD__BOOT_BROKEN_MAX + 1];   /* and its reason */
    char err[512];
} spmd__boot;

static void spmd__boot_log(const spmd__boot *b, spmd_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void spmd__boot_log(const spmd__boot *b, spmd_log_level lvl, const char *fmt, ...) {
    char msg[640];
    va_list ap;
    if (b->log_level == SPMD_LOG_OFF || lvl > b->log_level) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (b->log_fn) {
        char full[700];
        snprintf(full, sizeof full, "process %d/%d: %s", b->rank, b->nprocs, msg);
        b->log_fn(b->log_user, lvl, -1, full);
    } else {
        fprintf(stderr, "[spmd p%d/%d] %s: %s\n", b->rank, b->nprocs, spmd__level_names[lvl], msg);
    }
}

static spmd_status spmd__boot_fail(spmd__boot *b, spmd_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static spmd_status spmd__boot_fail(spmd__boot *b, spmd_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    spmd__boot_log(b, SPMD_LOG_DEBUG, "%s: %s", spmd_status_name(s), b->err);
    return s;
}

/* 1 and *out set when the variable holds an integer in lo..hi, 0 when it is
   absent, -1 when it holds something else. */
static int spmd__boot_env_i64(const char *name, int64_t lo, int64_t hi, int64_t *out) {
    const char *v = getenv(name);
    char *end;
    long long x;
    if (!v || !*v) return 0;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return -1;
    *out = (int64_t)x;
    return 1;
}

static void spmd__boot_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16); p[3] = (unsigned char)(v >> 24);
}
static uint32_t spmd__boot_get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t spmd__boot_max_payload(const spmd__boot *b, unsigned type) {
    switch (type) {
    case SPMD__BM_HELLO: return 12 + SPMD__BOOT_KEY_MAX;
    case SPMD__BM_REJECT: return SPMD__BOOT_REASON_MAX;
    case SPMD__BM_GATHER: case SPMD__BM_GATHERED: return 4 + (size_t)b->nprocs;
    case SPMD__BM_TREE: return 8 + 16;
    case SPMD__BM_UP: case SPMD__BM_DOWN: return 4 + (size_t)b->nprocs * (8 + SPMD__BOOT_BLOB_MAX);
    case SPMD__BM_LOST: return 4;
    case SPMD__BM_BROKEN: return 12 + SPMD__BOOT_BROKEN_MAX;
    case SPMD__BM_ABORT: return 4 + SPMD__BOOT_BROKEN_MAX;
    case SPMD__BM_RECORDS: return 8 + SPMD__BOOT_RECS_MAX;
    default: return 0;
    }
}

static int spmd__boot_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static int spmd__boot_ms_left(uint64_t deadline_ns) {
    uint64_t now = spmd__now_ns();
    uint64_t ms;
    if (now >= deadline_ns) return 0;
    ms = (deadline_ns - now + 999999u) / 1000000u;
    return ms > 1000000u ? 1000000 : (int)ms;
}

static void spmd__boot_conn_close(spmd__boot *b, spmd__boot_conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    spmd__free(&b->alloc, c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

/* Read what the socket has without blocking. -1: closed or failed (eof set);
   0: fine (possibly nothing new). The buffer grows only as far as the
   largest message this connection may legally carry. */
static int spmd__boot_fill(spmd__boot *b, spmd__boot_conn *c) {
    size_t limit = SPMD__BOOT_HDR + (c->rank < 0 ? spmd__boot_max_payload(b, SPMD__BM_HELLO)
                                                 : spmd__boot_max_payload(b, SPMD__BM_DOWN));
    for (;;) {
        ssize_t n;
        if (c->len == c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 512;
            unsigned char *nb;
            if (ncap > limit + 4096) ncap = limit + 4096;
            if (ncap <= c->cap) return 0; /* full: the caller parses (and rejects) first */
            nb = (unsigned char *)spmd__alloc(&b->alloc, ncap);
            if (!nb) return 0;
            if (c->len) memcpy(nb, c->buf, c->len);
            spmd__free(&b->alloc, c->buf);
            c->buf = nb;
            c->cap = ncap;
        }
        n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n > 0) { c->len += (size_t)n; continue; }
        if (n == 0) { c->eof = 1; return -1; }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        c->eof = 1;
        return -1;
    }
}

typedef struct spmd__boot_msg {
    unsigned type;
    uint32_t rank, len;
    const unsigned char *payload;
    size_t total;   /* header + payload: what to consume */
} spmd__boot_msg;

/* Parse the message at offset `at` of the buffer. 1: complete and valid;
   0: incomplete; -1: invalid (reason in why). */
static int spmd__boot_parse(const spmd__boot *b, const spmd__boot_conn *c, size_t at, spmd__boot_msg *m,
                            char *why, size_t whylen) {
    const unsigned char *p = c->buf + at;
    size_t have = c->len - at;
    uint32_t magic, ver_type;
    if (have < SPMD__BOOT_HDR) {
        /* judge the magic as soon as its bytes are there */
        size_t i;
        for (i = 0; i < have && i < 4; i++)
            if (p[i] != (unsigned char)(SPMD__BOOT_MAGIC >> (8 * i))) {
                snprintf(why, whylen, "bad magic (not a spmdcoll bootstrap peer)");
                return -1;
            }
        return 0;
    }
    magic = spmd__boot_get32(p);
    ver_type = spmd__boot_get32(p + 4);
    m->type = ver_type >> 16;
    m->rank = spmd__boot_get32(p + 8);
    m->len = spmd__boot_get32(p + 12);
    if (magic != SPMD__BOOT_MAGIC) {
        snprintf(why, whylen, "bad magic 0x%08x (not a spmdcoll bootstrap peer)", (unsigned)magic);
        return -1;
    }
    if ((ver_type & 0xffffu) != SPMD__BOOT_VERSION) {
        snprintf(why, whylen, "protocol version %u, this process speaks %u", (unsigned)(ver_type & 0xffffu),
                 SPMD__BOOT_VERSION);
        return -1;
    }
    if (m->type == 0 || m->type >= SPMD__BM_COUNT) {
        snprintf(why, whylen, "unknown message type %u", m->type);
        return -1;
    }
    if (m->rank >= (uint32_t)b->nprocs) {
        snprintf(why, whylen, "process id %u outside 0..%d", (unsigned)m->rank, b->nprocs - 1);
        return -1;
    }
    if (m->len > spmd__boot_max_payload(b, m->type)) {
        snprintf(why, whylen, "length %u too large for message type %u (at most %zu)", (unsigned)m->len,
                 m->type, spmd__boot_max_payload(b, m->type));
        return -1;
    }
    if (have - SPMD__BOOT_HDR < m->len) return 0;
    m->payload = p + SPMD__BOOT_HDR;
    m->total = SPMD__BOOT_HDR + m->len;
    return 1;
}

static void spmd__boot_consume(spmd__boot_conn *c, size_t n) {
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

/* Write a whole message before the deadline (b->sent_bytes counts what
   went out, headers included). 0 ok, -1 failed. */
static int spmd__boot_send(spmd__boot *b, int fd, unsigned type, int rank, const void *payload, size_t len,
                           uint64_t deadline_ns) {
    unsigned char hdr[SPMD__BOOT_HDR];
    const unsigned char *parts[2];
    size_t lens[2], i, off;
    spmd__boot_put32(hdr, SPMD__BOOT_MAGIC);
    spmd__boot_put32(hdr + 4, SPMD__BOOT_VERSION | (uint32_t)type << 16);
    spmd__boot_put32(hdr + 8, (uint32_t)rank);
    spmd__boot_put32(hdr + 12, (uint32_t)len);
    parts[0] = hdr; lens[0] = sizeof hdr;
    parts[1] = (const unsigned char *)payload; lens[1] = len;
    for (i = 0; i < 2; i++) {
        for (off = 0; off < lens[i];) {
            ssize_t n = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (n > 0) {
                off += (size_t)n;
                SPMD__FADD(&b->sent_bytes, (uint64_t)n);
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                struct pollfd pf;
                int ms = spmd__boot_ms_left(deadline_ns);
                if (ms == 0) return -1;
                pf.fd = fd; pf.events = POLLOUT; pf.revents = 0;
                if (poll(&pf, 1, ms) < 0 && errno != EINTR) return -1;
                continue;
            }
            return -1;
        }
    }
    return 0;
}

/* Interface lookups: the address of a named interface, or the interface
   holding an address. */
static int spmd__boot_if_addr(const char *ifname, struct sockaddr_storage *ss, socklen_t *sl) {
    struct ifaddrs *ifs, *i;
    int found = 0;
    if (getifaddrs(&ifs) != 0) return 0;
    for (int pass = 0; pass < 2 && !found; pass++) /* IPv4 first */
        for (i = ifs; i && !found; i = i->ifa_next) {
            if (!i->ifa_addr || strcmp(i->ifa_name, ifname) != 0) continue;
            if (i->ifa_addr->sa_family != (pass == 0 ? AF_INET : AF_INET6)) continue;
            *sl = pass == 0 ? (socklen_t)sizeof(struct sockaddr_in) : (socklen_t)sizeof(struct sockaddr_in6);
            memcpy(ss, i->ifa_addr, *sl);
            found = 1;
        }
    freeifaddrs(ifs);
    return found;
}

static void spmd__boot_note_addr(spmd__boot *b, const struct sockaddr *sa) {
    struct ifaddrs *ifs, *i;
    const void *a = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                                             : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    size_t alen = sa->sa_family == AF_INET ? 4 : 16;
    inet_ntop(sa->sa_family, a, b->addr, sizeof b->addr);
    if (b->ifname[0] || getifaddrs(&ifs) != 0) return;
    for (i = ifs; i; i = i->ifa_next) {
        const void *ia;
        if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family) continue;
        ia = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)i->ifa_addr)->sin_addr
                                      : (const void *)&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (memcmp(ia, a, alen) == 0) {
            snprintf(b->ifname, sizeof b->ifname, "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
}

static void spmd__boot_peer_name(int fd, char *out, size_t n) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(out, n, "%s:%u", host, port);
}

/* "host:port" or "[v6]:port". */
static int spmd__boot_split_hostport(const char *s, char *host, size_t hn, char *port, size_t pn) {
    const char *colon;
    size_t hl;
    long p;
    char *end;
    if (!s || !*s) return 0;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb[1] != ':') return 0;
        hl = (size_t)(rb - s - 1);
        if (hl == 0 || hl >= hn) return 0;
        memcpy(host, s + 1, hl);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) return 0;
        hl = (size_t)(colon - s);
        if (hl == 0 || hl >= hn) return 0;
        memcpy(host, s, hl);
    }
    host[hl] = 0;
    errno = 0;
    p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 1 || p > 65535) return 0;
    snprintf(port, pn, "%ld", p);
    return 1;
}

/* First host of a Slurm node list: "n[01-04,7],m" -> "n01". */
static int spmd__boot_slurm_first_host(const char *list, char *out, size_t n) {
    size_t i = 0, o = 0;
    if (!list) return 0;
    while (list[i] && list[i] != ',' && list[i] != '[' && o + 1 < n) out[o++] = list[i++];
    if (list[i] == '[') {
        i++;
        while (list[i] >= '0' && list[i] <= '9' && o + 1 < n) out[o++] = list[i++];
    }
    out[o] = 0;
    return o > 0;
}

/* This process's host, as the transport groups processes (the lane, the
   choice of shm): SPMD_HOST when set (containers of one machine that
   share /dev/shm; or, apart, processes of one machine made to act as
   hosts), else the host name. */
static void spmd__host_name(char *out, size_t n) {
    const char *h = getenv("SPMD_HOST");
    memset(out, 0, n);
    if (h && *h) snprintf(out, n, "%s", h);
    else if (gethostname(out, n - 1) != 0) out[0] = '\0';
}

/* Where process 0 listens (see the section comment): SPMD_COORDINATOR, or
   under PMIx a free port it publishes, or Slurm's first host. */
static spmd_status spmd__boot_coordinator(spmd__boot *b, const char *coord, int slurm) {
    if (!coord) coord = getenv("SPMD_COORDINATOR");
    if (coord && *coord) {
        if (!spmd__boot_split_hostport(coord, b->coord_host, sizeof b->coord_host, b->coord_port,
                                       sizeof b->coord_port))
            return spmd__boot_fail(b, SPMD_ERR_INVALID,
                                   "bootstrap: coordinator '%s' is not host:port (or [v6addr]:port, port 1..65535)",
                                   coord);
    } else if (b->nprocs > 1 && getenv("PMIX_NAMESPACE") && getenv("PMIX_RANK")) {
        b->pmix = 1; /* process 0 listens on a free port and says where through PMIx (spmd__boot_pmix) */
        snprintf(b->coord_port, sizeof b->coord_port, "0");
    } else if (slurm && b->nprocs > 1) {
        int64_t job = 0, step = 0, port = 0;
        const char *nl = getenv("SLURM_STEP_NODELIST");
        if (!nl || !*nl) nl = getenv("SLURM_JOB_NODELIST");
        if (!spmd__boot_slurm_first_host(nl, b->coord_host, sizeof b->coord_host))
            return spmd__boot_fail(b, SPMD_ERR_INVALID,
                                   "bootstrap: under Slurm without SPMD_COORDINATOR, and no SLURM_STEP_NODELIST "
                                   "to find process 0's host in");
        if (spmd__boot_env_i64("SPMD_COORDINATOR_PORT", 1, 65535, &port) != 1) {
            spmd__boot_env_i64("SLURM_JOB_ID", 0, INT64_MAX / 32, &job);
            spmd__boot_env_i64("SLURM_STEP_ID", 0, 1 << 30, &step);
            port = 20000 + (job * 16 + step) % 30000;
        }
        snprintf(b->coord_port, sizeof b->coord_port, "%d", (int)port);
    } else if (b->nprocs > 1) {
        return spmd__boot_fail(b, SPMD_ERR_INVALID,
                               "bootstrap: set SPMD_COORDINATOR=host:port of process 0 (layout from %s, and "
                               "no PMIx server to ask)", b->layout_from);
    }
    return SPMD_OK;
}

/* Where the layout, coordinator and key come from; see the section comment. */
static spmd_status spmd__boot_config(spmd__boot *b, const spmd__boot_desc *d) {
    static const char *fam[4][3] = {{"SPMD_NUM_PROCESSES", "SPMD_PROCESS_ID", "spmd"},
                                    {"SLURM_NTASKS", "SLURM_PROCID", "slurm"},
                                    {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "openmpi"},
                                    {"PMI_SIZE", "PMI_RANK", "pmi"}};
    const char *coord = d->coordinator, *key = d->job_key, *ifn = d->ifname;
    int64_t v = 0, n = 0, r = 0;
    int f, rs, slurm = 0;
    char slurm_key[64];
    spmd_status st;
    if (d->num_processes > 0) {
        n = d->num_processes;
        r = d->process_id;
        b->layout_from = "desc";
        if (n > SPMD__BOOT_MAX_PROCS || r < 0 || r >= n)
            return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: process %lld of %lld is not a valid layout",
                                   (long long)r, (long long)n);
    } else {
        for (f = 0; f < 4; f++) {
            int ns = spmd__boot_env_i64(fam[f][0], 1, SPMD__BOOT_MAX_PROCS, &n);
            rs = spmd__boot_env_i64(fam[f][1], 0, SPMD__BOOT_MAX_PROCS - 1, &r);
            if (ns == 0 && rs == 0) continue;
            if (ns != 1 || rs != 1 || r >= n)
                return spmd__boot_fail(b, SPMD_ERR_INVALID,
                                       "bootstrap: %s=%s and %s=%s are not a valid layout (1..%d processes, "
                                       "id below the count)", fam[f][0], getenv(fam[f][0]) ? getenv(fam[f][0]) : "",
                                       fam[f][1], getenv(fam[f][1]) ? getenv(fam[f][1]) : "", SPMD__BOOT_MAX_PROCS);
            b->layout_from = fam[f][2];
            slurm = f == 1;
            break;
        }
        if (f == 4)
            return spmd__boot_fail(b, SPMD_ERR_INVALID,
                                   "bootstrap: no process layout: set SPMD_NUM_PROCESSES and SPMD_PROCESS_ID "
                                   "(tools/spmdrun does), or start under srun or mpirun");
    }
    b->nprocs = (int)n;
    b->rank = (int)r;
    if ((st = spmd__boot_coordinator(b, coord, slurm)) != SPMD_OK) return st;
    if (!key) key = getenv("SPMD_JOB_KEY");
    if (!key && b->pmix) { /* the launcher's name of the job */
        snprintf(slurm_key, sizeof slurm_key, "pmix:%.50s", getenv("PMIX_NAMESPACE"));
        key = slurm_key;
    }
    if (!key && slurm && getenv("SLURM_JOB_ID")) {
        const char *st = getenv("SLURM_STEP_ID");
        snprintf(slurm_key, sizeof slurm_key, "slurm:%.20s.%.20s", getenv("SLURM_JOB_ID"), st ? st : "0");
        key = slurm_key;
    }
    if (!key) {
        key = "";
        if (b->nprocs > 1) spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: no SPMD_JOB_KEY; using an empty key");
    }
    b->keylen = strlen(key);
    if (b->keylen > SPMD__BOOT_KEY_MAX)
        return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: job key of %zu bytes (at most %u)", b->keylen,
                               SPMD__BOOT_KEY_MAX);
    memcpy(b->key, key, b->keylen + 1);
    if (d->timeout_ms > 0) {
        b->timeout_ms = d->timeout_ms;
    } else if ((rs = spmd__boot_env_i64("SPMD_BOOT_TIMEOUT_MS", 1, INT64_MAX / 1000000, &v)) == 1 ||
               (rs == 0 && spmd__boot_env_i64("SPMD_TIMEOUT_MS", 1, INT64_MAX / 1000000, &v) == 1)) {
        b->timeout_ms = v;
    } else {
        b->timeout_ms = SPMD__DEFAULT_TIMEOUT_MS;
    }
    b->conn_timeout_ms = 5000;
    if (spmd__boot_env_i64("SPMD_BOOT_CONN_TIMEOUT_MS", 1, 3600000, &v) == 1) b->conn_timeout_ms = v;
    if (!ifn) ifn = getenv("SPMD_SOCKET_IFNAME");
    if (ifn && *ifn) {
        if (strlen(ifn) >= sizeof b->ifname)
            return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: interface name '%s' too long", ifn);
        snprintf(b->ifname, sizeof b->ifname, "%s", ifn);
    }
    return SPMD_OK;
}

/* The tree (see the section comment): process `rank`'s node, a node's
   process, the parent (-1: the root), the k-th child (-1: none), and
   whether process x is in the subtree of process top. */
static int spmd__boot_node(const spmd__boot *b, int rank) { return (rank + b->nprocs - 1) % b->nprocs; }
static int spmd__boot_proc(const spmd__boot *b, int v) { return (v + 1) % b->nprocs; }
static int spmd__boot_parent(const spmd__boot *b, int rank) {
    int v = spmd__boot_node(b, rank);
    return v == 0 ? -1 : spmd__boot_proc(b, (v - 1) / 2);
}
static int spmd__boot_child(const spmd__boot *b, int rank, int k) {
    int64_t v = 2 * (int64_t)spmd__boot_node(b, rank) + 1 + k;
    return v < b->nprocs ? spmd__boot_proc(b, (int)v) : -1;
}
static int spmd__boot_below(const spmd__boot *b, int top, int x) {
    int t = spmd__boot_node(b, top), v = spmd__boot_node(b, x);
    while (v > t) v = (v - 1) / 2;
    return v == t;
}

/* Where a HELLO from process `rank` admits it: at the coordinator its
   peers[rank]; at another process the connection to that child in the
   tree. NULL: nowhere here. */
static spmd__boot_conn *spmd__boot_slot(spmd__boot *b, uint32_t rank) {
    if (rank >= (uint32_t)b->nprocs) return NULL;
    if (b->rank == 0) return rank ? &b->peers[rank] : NULL;
    if ((int)rank == spmd__boot_child(b, b->rank, 0)) return &b->down[0];
    return (int)rank == spmd__boot_child(b, b->rank, 1) ? &b->down[1] : NULL;
}

/* A HELLO (m, parsed) as the coordinator (or a parent in the tree) judges
   it: 1 when its process may join, else 0 and why. */
static int spmd__boot_hello_ok(spmd__boot *b, const spmd__boot_msg *m, char *why, size_t whylen) {
    uint32_t np, port, kl = m->len >= 12 ? spmd__boot_get32(m->payload + 4) : 0;
    spmd__boot_conn *slot = spmd__boot_slot(b, m->rank);
    unsigned diff = 0;
    size_t k;
    if (m->len < 12 || kl != m->len - 12) { /* (the count is read only from a payload that holds it) */
        snprintf(why, whylen, "handshake of %u bytes with a key length of %u", (unsigned)m->len, (unsigned)kl);
        return 0;
    }
    np = spmd__boot_get32(m->payload);
    if (np != (uint32_t)b->nprocs) {
        snprintf(why, whylen, "process %u says the job has %u processes, not %d", (unsigned)m->rank, (unsigned)np,
                 b->nprocs);
        return 0;
    }
    for (k = 0; k < b->keylen && k < kl; k++) diff |= (unsigned)(b->key[k] ^ m->payload[8 + k]);
    if (kl != b->keylen || diff) {
        snprintf(why, whylen, "job key mismatch (process %u is from another job)", (unsigned)m->rank);
        return 0;
    }
    if (!slot || slot->fd >= 0) {
        snprintf(why, whylen, "process id %u %s", (unsigned)m->rank, slot ? "joined already" : b->rank == 0 ?
                 "is the coordinator's own" : "is not a child of this process in the tree");
        return 0;
    }
    port = spmd__boot_get32(m->payload + 8 + kl);
    if (b->rank == 0 && (port > 65535 || (port != 0) != (spmd__boot_child(b, (int)m->rank, 0) >= 0))) {
        snprintf(why, whylen, "process %u listens for its children in the tree at port %u", (unsigned)m->rank,
                 (unsigned)port);
        return 0;
    }
    return 1;
}

#define SPMD__BOOT_REFUSED 256 /* the last handshake refused, for the message of a timeout */

/* spmd__boot_serve's phases. The listening socket: on SPMD_SOCKET_IFNAME's
   address, else on every address, at the coordinator's port. */
static spmd_status spmd__boot_listen(spmd__boot *b) {
    struct addrinfo hints, *res = NULL, *ai;
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    int one = 1, rc;
    if (b->ifname[0]) {
        if (!spmd__boot_if_addr(b->ifname, &ss, &sl))
            return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: interface %s (SPMD_SOCKET_IFNAME) has no "
                                   "IPv4 or IPv6 address", b->ifname);
        if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)atoi(b->coord_port));
        else ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)atoi(b->coord_port));
        b->listen_fd = socket(ss.ss_family, SOCK_STREAM, 0);
        if (b->listen_fd >= 0) setsockopt(b->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (b->listen_fd < 0 || bind(b->listen_fd, (struct sockaddr *)&ss, sl) != 0) {
            int e = errno;
            return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: cannot listen on %s port %s: %s", b->ifname,
                                   b->coord_port, strerror(e));
        }
    } else {
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        if ((rc = getaddrinfo(NULL, b->coord_port, &hints, &res)) != 0)
            return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: port %s: %s", b->coord_port, gai_strerror(rc));
        for (ai = res; ai; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0) continue;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0) { b->listen_fd = fd; break; }
            close(fd);
        }
        freeaddrinfo(res);
        if (b->listen_fd < 0) {
            int e = errno;
            return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: cannot bind port %s: %s", b->coord_port,
                                   strerror(e));
        }
    }
    if (listen(b->listen_fd, 128) != 0 || spmd__boot_nonblock(b->listen_fd) != 0) {
        int e = errno;
        return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: listen on port %s: %s", b->coord_port, strerror(e));
    }
    sl = sizeof ss;
    if (getsockname(b->listen_fd, (struct sockaddr *)&ss, &sl) == 0) {
        spmd__boot_note_addr(b, (struct sockaddr *)&ss);
        snprintf(b->coord_port, sizeof b->coord_port, "%u", /* (port 0: the one the system gave) */
                 (unsigned)ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                         : ((struct sockaddr_in6 *)&ss)->sin6_port));
    }
    spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: coordinator listening on %s port %s (interface %s), %d processes, "
                   "layout from %s", b->addr, b->coord_port, b->ifname[0] ? b->ifname : "any", b->nprocs,
                   b->layout_from);
    return SPMD_OK;
}

/* ---- PMIx ----
   Under a PMIx launcher (Open MPI's mpirun, srun --mpi=pmix: PMIX_NAMESPACE
   and PMIX_RANK set) with no SPMD_COORDINATOR, process 0 listens on a free
   port and publishes where ("spmdcoll.coordinator" = host:port, the host
   SPMD_SOCKET_IFNAME's address, 127.0.0.1 when every process is on its
   node, else its host name), the others read it after a fence: PMIx_Put,
   Commit, Fence, Get, from libpmix.so.2 loaded at run time, so a build
   needs no PMIx and a launch without the library fails naming
   SPMD_COORDINATOR. The job key is the PMIx namespace (spmd__boot_config).
   The structures as PMIx 2 to 5 lay them out: pmix_proc_t, and
   pmix_value_t (a 16-bit type, then a union of 24 bytes). */
typedef struct { char nspace[256]; uint32_t rank; } spmd__pmix_proc;
typedef struct { uint16_t type; union { char *string; uint64_t words[3]; } data; } spmd__pmix_value;
#define SPMD__PMIX_STRING 3 /* PMIX_STRING */
#define SPMD__PMIX_GLOBAL 3 /* PMIX_GLOBAL */
typedef struct spmd__pmix_fns {
    int (*init)(spmd__pmix_proc *, void *, size_t);
    int (*put)(uint8_t, const char *, spmd__pmix_value *);
    int (*commit)(void);
    int (*fence)(const spmd__pmix_proc *, size_t, const void *, size_t);
    int (*get)(const spmd__pmix_proc *, const char *, const void *, size_t, spmd__pmix_value **);
    int (*fin)(const void *, size_t);
} spmd__pmix_fns;

static int spmd__pmix_load(spmd__pmix_fns *p) {
    static const char *names[6] = {"PMIx_Init", "PMIx_Put", "PMIx_Commit", "PMIx_Fence", "PMIx_Get", "PMIx_Finalize"};
    void *h = dlopen("libpmix.so.2", RTLD_NOW | RTLD_GLOBAL), *fn[6];
    int i;
    if (!h) h = dlopen("libpmix.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return 0;
    for (i = 0; i < 6; i++)
        if (!(fn[i] = dlsym(h, names[i]))) return 0;
    memcpy(&p->init, &fn[0], sizeof fn[0]); /* (object to function pointers: POSIX's dlsym rule) */
    memcpy(&p->put, &fn[1], sizeof fn[1]);
    memcpy(&p->commit, &fn[2], sizeof fn[2]);
    memcpy(&p->fence, &fn[3], sizeof fn[3]);
    memcpy(&p->get, &fn[4], sizeof fn[4]);
    memcpy(&p->fin, &fn[5], sizeof fn[5]);
    return 1; /* (left loaded: MPI in the same process may use it) */
}

/* Process 0 (listening) says where; the others learn it. */
static spmd_status spmd__boot_pmix(spmd__boot *b) {
    spmd__pmix_fns p;
    spmd__pmix_proc me, zero;
    spmd__pmix_value v, *got = NULL;
    char where[300], host[256];
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int rc = 0;
    spmd_status st;
    memset(&me, 0, sizeof me);
    if (!spmd__pmix_load(&p))
        return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: PMIX_NAMESPACE is set but libpmix.so.2 cannot "
                               "be loaded (%s): set SPMD_COORDINATOR=host:port of process 0", dlerror());
    if ((rc = p.init(&me, NULL, 0)) != 0)
        return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: PMIx_Init failed (%d): set SPMD_COORDINATOR", rc);
    if (b->rank == 0) {
        if ((st = spmd__boot_listen(b)) != SPMD_OK) { p.fin(NULL, 0); return st; }
        if (b->ifname[0] && strcmp(b->addr, "0.0.0.0") != 0 && strcmp(b->addr, "::") != 0)
            snprintf(host, sizeof host, "%s", b->addr);
        else if (ls && atoi(ls) == b->nprocs) snprintf(host, sizeof host, "127.0.0.1");
        else spmd__host_name(host, sizeof host);
        snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, b->coord_port);
        memset(&v, 0, sizeof v);
        v.type = SPMD__PMIX_STRING;
        v.data.string = where;
        rc = p.put(SPMD__PMIX_GLOBAL, "spmdcoll.coordinator", &v);
    }
    rc = rc ? rc : p.commit();
    rc = rc ? rc : p.fence(NULL, 0, NULL, 0);
    if (!rc && b->rank != 0) {
        zero = me;
        zero.rank = 0;
        rc = p.get(&zero, "spmdcoll.coordinator", NULL, 0, &got);
        if (!rc && (!got || got->type != SPMD__PMIX_STRING || !got->data.string ||
                    !spmd__boot_split_hostport(got->data.string, b->coord_host, sizeof b->coord_host,
                                               b->coord_port, sizeof b->coord_port)))
            rc = -1;
        if (got) { /* (PMIx's malloc) */
            free(got->data.string);
            free(got);
        }
    }
    p.fin(NULL, 0);
    if (rc)
        return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: PMIx could not share process 0's address (%d): "
                               "set SPMD_COORDINATOR=host:port", rc);
    if (b->rank == 0) spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: told PMIx (namespace %s) the coordinator is at %s",
                                     me.nspace, where);
    else spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: coordinator %s:%s from PMIx (namespace %s)", b->coord_host,
                        b->coord_port, me.nspace);
    return SPMD_OK;
}

/* The deadline passed: who is missing, and the last handshake refused. */
static spmd_status spmd__boot_missing(spmd__boot *b, int missing, const char *refused) {
    char miss[256] = "";
    size_t o = 0;
    int i, shown = 0;
    for (i = 0; i < b->nprocs && o + 16 < sizeof miss; i++)
        if (spmd__boot_slot(b, (uint32_t)i) && spmd__boot_slot(b, (uint32_t)i)->fd < 0) {
            o += (size_t)snprintf(miss + o, sizeof miss - o, "%s%d", shown++ ? "," : "", i);
        }
    if (b->rank != 0)
        return spmd__boot_fail(b, SPMD_ERR_TIMEOUT, "bootstrap: after %lld ms, %d of process %d's children in the "
                               "tree have not connected (missing: %s)%s%s", (long long)b->timeout_ms, missing, b->rank,
                               miss, refused[0] ? "; " : "", refused);
    return spmd__boot_fail(b, SPMD_ERR_TIMEOUT, "bootstrap: after %lld ms, %d of %d processes have not "
                           "joined (missing: %s)%s%s", (long long)b->timeout_ms, missing, b->nprocs,
                           miss, refused[0] ? "; " : "", refused);
}

/* Read the pending connections poll found readable: a valid HELLO joins
   (WELCOME, it becomes its slot: spmd__boot_slot); anything else is rejected. */
static void spmd__boot_admit(spmd__boot *b, spmd__boot_conn *pend, int *npend, const struct pollfd *pf,
                             char *refused, int *joined, int want, uint64_t deadline_ns) {
    int i;
    for (i = (*npend) - 1; i >= 0; i--) {
        spmd__boot_conn *c = &pend[i];
        spmd__boot_msg m;
        char why[160];
        int bad, eof, hello = 0; /* hello: a well-formed HELLO (m.rank is its claim) */
        if (!pf[i + 1].revents) continue;
        eof = spmd__boot_fill(b, c) < 0;
        bad = spmd__boot_parse(b, c, 0, &m, why, sizeof why);
        if (bad == 1 && m.type != SPMD__BM_HELLO) {
            snprintf(why, sizeof why, "message type %u before the handshake", m.type);
            bad = -1;
        } else if (bad == 1) {
            hello = 1;
            bad = spmd__boot_hello_ok(b, &m, why, sizeof why) ? 1 : -1;
        }
        if (bad == 0 && !eof && c->len < c->cap) continue;
        if (bad == 0) snprintf(why, sizeof why, "%s after %zu bytes", eof ? "closed" : "oversized", c->len);
        if (bad != 1) {
            spmd__boot_log(b, SPMD_LOG_WARN, "bootstrap: rejected connection from %s: %s", c->peer, why);
            if (hello && spmd__boot_slot(b, m.rank) && spmd__boot_slot(b, m.rank)->fd < 0)
                snprintf(refused, SPMD__BOOT_REFUSED, "a handshake as process %u was refused: %s", (unsigned)m.rank,
                         why);
            if (!eof) spmd__boot_send(b, c->fd, SPMD__BM_REJECT, b->rank, why, strlen(why), spmd__now_ns() + 100000000u);
            spmd__boot_conn_close(b, c);
            pend[i] = pend[--(*npend)];
            continue;
        }
        c->port = (unsigned)spmd__boot_get32(m.payload + m.len - 4);
        spmd__boot_consume(c, m.total);
        if (spmd__boot_send(b, c->fd, SPMD__BM_WELCOME, b->rank, NULL, 0, deadline_ns) != 0) {
            spmd__boot_log(b, SPMD_LOG_WARN, "bootstrap: process %u at %s vanished during its handshake",
                           (unsigned)m.rank, c->peer);
            spmd__boot_conn_close(b, c);
            pend[i] = pend[--(*npend)];
            continue;
        }
        c->rank = (int)m.rank;
        *spmd__boot_slot(b, m.rank) = *c;
        pend[i] = pend[--(*npend)];
        (*joined)++;
        spmd__boot_log(b, SPMD_LOG_DEBUG, "bootstrap: process %u joined from %s (%d of %d)", (unsigned)m.rank,
                       spmd__boot_slot(b, m.rank)->peer, *joined, want);
    }
}

/* Take new connections as pending handshakes (at most SPMD__BOOT_MAX_PENDING). */
static void spmd__boot_accept(spmd__boot *b, spmd__boot_conn *pend, int *npend) {
    int one = 1;
    for (;;) {
        int fd = accept(b->listen_fd, NULL, NULL);
        if (fd < 0) break;
        if ((*npend) == SPMD__BOOT_MAX_PENDING || spmd__boot_nonblock(fd) != 0) {
            spmd__boot_log(b, SPMD_LOG_WARN, "bootstrap: %d handshakes pending; refusing one more",
                           SPMD__BOOT_MAX_PENDING);
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        memset(&pend[*npend], 0, sizeof pend[*npend]);
        pend[*npend].fd = fd;
        pend[*npend].rank = -1;
        pend[*npend].deadline_ns = spmd__now_ns() + (uint64_t)b->conn_timeout_ms * 1000000u;
        spmd__boot_peer_name(fd, pend[*npend].peer, sizeof pend[*npend].peer);
        (*npend)++;
    }
}

static SPMD__UNUSED int spmd__boot_poll(spmd__boot *b);

/* Whether the job ended for this process: the coordinator's ABORT (its
   reason), or a process lost (named). SPMD_OK: neither. */
static spmd_status spmd__boot_gone(spmd__boot *b, const char *what) {
    int r;
    if (b->aborted)
        return spmd__boot_fail(b, b->aborted, "%s: the coordinator (process 0) ended the job: %s", what, b->abort_why);
    if (!b->nlost) return SPMD_OK;
    for (r = 0; r < b->nprocs && b->lost[r] != 1; r++) {}
    return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "%s: process %d lost", what, r);
}

/* Admit `want` processes on b->listen_fd: process 0 every other one (it
   listens first), another process its children in the tree (while it
   watches its connection to the coordinator: a loss or an ABORT ends the
   wait). */
static spmd_status spmd__boot_serve(spmd__boot *b, int want, uint64_t deadline_ns) {
    spmd__boot_conn pend[SPMD__BOOT_MAX_PENDING];
    struct pollfd *pf;
    char refused[SPMD__BOOT_REFUSED] = "";
    int npend = 0, joined = 0, i, rc, star = b->rank != 0;
    spmd_status st = b->listen_fd >= 0 ? SPMD_OK : spmd__boot_listen(b); /* (under PMIx: listening already) */
    if (st != SPMD_OK) return st;
    pf = (struct pollfd *)spmd__alloc(&b->alloc, (SPMD__BOOT_MAX_PENDING + 2) * sizeof *pf);
    if (!pf) return spmd__boot_fail(b, SPMD_ERR_NOMEM, "bootstrap: out of memory");
    while (joined < want) {
        uint64_t now = spmd__now_ns(), wake = deadline_ns;
        int ms;
        if (star && (st = spmd__boot_gone(b, "bootstrap")) != SPMD_OK) break;
        if (now >= deadline_ns) {
            st = spmd__boot_missing(b, want - joined, refused);
            break;
        }
        for (i = 0; i < npend; i++) {
            if (pend[i].deadline_ns <= now) {
                spmd__boot_log(b, SPMD_LOG_WARN, "bootstrap: dropped connection from %s: no valid handshake within "
                               "%lld ms", pend[i].peer, (long long)b->conn_timeout_ms);
                spmd__boot_conn_close(b, &pend[i]);
                pend[i--] = pend[--npend];
                continue;
            }
            if (pend[i].deadline_ns < wake) wake = pend[i].deadline_ns;
        }
        pf[0].fd = b->listen_fd; pf[0].events = POLLIN; pf[0].revents = 0;
        for (i = 0; i < npend; i++) { pf[i + 1].fd = pend[i].fd; pf[i + 1].events = POLLIN; pf[i + 1].revents = 0; }
        pf[npend + 1].fd = star ? b->coord.fd : -1; pf[npend + 1].events = POLLIN; pf[npend + 1].revents = 0;
        ms = spmd__boot_ms_left(wake);
        rc = poll(pf, (nfds_t)npend + 2, ms ? ms : 1);
        if (rc < 0 && errno != EINTR) {
            st = spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: poll: %s", strerror(errno));
            break;
        }
        if (star) spmd__boot_poll(b);
        if (rc <= 0) continue;
        spmd__boot_admit(b, pend, &npend, pf, refused, &joined, want, deadline_ns);
        if (pf[0].revents & POLLIN) spmd__boot_accept(b, pend, &npend);
    }
    for (i = 0; i < npend; i++) {
        if (st != SPMD_OK) /* a handshake still pending: why the job ends */
            spmd__boot_send(b, pend[i].fd, SPMD__BM_REJECT, b->rank, b->err,
                            strlen(b->err) < SPMD__BOOT_REASON_MAX ? strlen(b->err) : SPMD__BOOT_REASON_MAX,
                            spmd__now_ns() + 100000000u);
        spmd__boot_conn_close(b, &pend[i]);
    }
    spmd__free(&b->alloc, pf);
    close(b->listen_fd); /* everyone is here: nobody else may join */
    b->listen_fd = -1;
    return st;
}

/* The answer to this process's handshake (the coordinator's, or its
   parent's in the tree: c->rank says whose), at the head of c (what
   spmd__boot_welcome reads; a decoder of its own so that fuzz/join.c can
   call it without a coordinator). 1: WELCOME, consumed; 0: not all there
   yet; -1: a REJECT or an invalid answer, *st its status and b->err why (a
   REJECT's reason in printable ASCII only: it is shown to users). */
static int spmd__boot_answer(spmd__boot *b, spmd__boot_conn *c, spmd_status *st) {
    spmd__boot_msg m;
    char why[160], reason[SPMD__BOOT_REASON_MAX + 1];
    const char *who = c->rank == 0 ? "coordinator" : "parent in the tree";
    int rc = spmd__boot_parse(b, c, 0, &m, why, sizeof why);
    size_t k;
    if (rc == 0) return 0;
    if (rc < 0) {
        *st = spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: %s %s: %s", who, c->peer, why);
        return -1;
    }
    if (m.rank != (uint32_t)c->rank) {
        *st = spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: %s %s answered the handshake as process %u "
                              "(not process %d of this job)", who, c->peer, (unsigned)m.rank, c->rank);
        return -1;
    }
    if (m.type == SPMD__BM_REJECT) {
        memcpy(reason, m.payload, m.len);
        reason[m.len] = '\0';
        for (k = 0; k < m.len; k++)
            if ((unsigned char)reason[k] < 32 || (unsigned char)reason[k] > 126) reason[k] = '?';
        *st = spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: %s %s rejected process %d: %s", who, c->peer,
                              b->rank, reason);
        return -1;
    }
    if (m.type != SPMD__BM_WELCOME) {
        *st = spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: %s %s answered the handshake with message "
                              "type %u", who, c->peer, m.type);
        return -1;
    }
    spmd__boot_consume(c, m.total);
    return 1;
}

/* Connect c to host:port (whom: "the coordinator", "process 3 (the parent
   in the tree)"), from SPMD_SOCKET_IFNAME's address when set, retrying
   with back-off until the deadline. */
static spmd_status spmd__boot_dial(spmd__boot *b, spmd__boot_conn *c, const char *host, const char *port,
                                   const char *whom, uint64_t deadline_ns) {
    struct addrinfo hints, *res = NULL, *ai;
    struct sockaddr_storage local;
    socklen_t local_len = 0;
    uint64_t backoff_ms = 10;
    char last[400] = "no attempt";
    int attempts = 0, one = 1;
    if (b->ifname[0] && !spmd__boot_if_addr(b->ifname, &local, &local_len))
        return spmd__boot_fail(b, SPMD_ERR_INVALID, "bootstrap: interface %s (SPMD_SOCKET_IFNAME) has no address",
                               b->ifname);
    while (c->fd < 0) {
        int rc, ms;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = b->ifname[0] ? local.ss_family : AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        attempts++;
        rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0) {
            snprintf(last, sizeof last, "resolving %s: %s", host, gai_strerror(rc));
            res = NULL;
        }
        for (ai = res; ai && c->fd < 0; ai = ai->ai_next) {
            struct pollfd pf;
            int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), err = 0;
            socklen_t el = sizeof err;
            if (fd < 0) { snprintf(last, sizeof last, "socket: %s", strerror(errno)); continue; }
            if (b->ifname[0] && bind(fd, (struct sockaddr *)&local, local_len) != 0) {
                snprintf(last, sizeof last, "bind to %s: %s", b->ifname, strerror(errno));
                close(fd);
                continue;
            }
            spmd__boot_nonblock(fd);
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
                snprintf(last, sizeof last, "connect: %s", strerror(errno));
                close(fd);
                continue;
            }
            pf.fd = fd; pf.events = POLLOUT; pf.revents = 0;
            ms = spmd__boot_ms_left(deadline_ns);
            if (poll(&pf, 1, ms < 1000 ? ms : 1000) <= 0) {
                snprintf(last, sizeof last, "connect: no answer");
                close(fd);
                continue;
            }
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
                snprintf(last, sizeof last, "connect: %s", strerror(err ? err : errno));
                close(fd);
                continue;
            }
            c->fd = fd;
        }
        if (res) freeaddrinfo(res);
        if (c->fd >= 0) break;
        ms = spmd__boot_ms_left(deadline_ns);
        if (ms == 0)
            return spmd__boot_fail(b, SPMD_ERR_TIMEOUT, "bootstrap: process %d could not reach %s %s:%s within %lld "
                                   "ms (%d attempts; last: %s)", b->rank, whom, host, port, (long long)b->timeout_ms,
                                   attempts, last);
        {
            struct timespec ts;
            uint64_t w = backoff_ms < (uint64_t)ms ? backoff_ms : (uint64_t)ms;
            ts.tv_sec = (time_t)(w / 1000u);
            ts.tv_nsec = (long)(w % 1000u) * 1000000L;
            nanosleep(&ts, NULL);
            backoff_ms = backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2;
        }
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    spmd__boot_peer_name(c->fd, c->peer, sizeof c->peer);
    return SPMD_OK;
}

/* Send the handshake on c: the job, its key, and the port this process
   listens on for its children in the tree (0: none). */
static spmd_status spmd__boot_hello(spmd__boot *b, spmd__boot_conn *c, unsigned port, uint64_t deadline_ns) {
    unsigned char hello[12 + SPMD__BOOT_KEY_MAX];
    spmd__boot_put32(hello, (uint32_t)b->nprocs);
    spmd__boot_put32(hello + 4, (uint32_t)b->keylen);
    memcpy(hello + 8, b->key, b->keylen);
    spmd__boot_put32(hello + 8 + b->keylen, port);
    if (spmd__boot_send(b, c->fd, SPMD__BM_HELLO, b->rank, hello, 12 + b->keylen, deadline_ns) != 0)
        return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: sending the handshake to %s: %s", c->peer,
                               strerror(errno));
    return SPMD_OK;
}

static void spmd__boot_wait(spmd__boot *b, spmd__boot_conn *c, int ms);

/* Wait for the answer to the handshake on c (spmd__boot_answer); from a
   parent in the tree, watching the coordinator meanwhile. */
static spmd_status spmd__boot_welcome(spmd__boot *b, spmd__boot_conn *c, uint64_t deadline_ns) {
    const char *who = c == &b->coord ? "coordinator" : "parent in the tree";
    spmd_status st = SPMD_OK;
    for (;;) {
        int rc = spmd__boot_answer(b, c, &st), ms;
        if (rc < 0) return st;
        if (rc == 1) return SPMD_OK;
        if (c->eof)
            return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "bootstrap: %s %s closed the connection during "
                                   "the handshake", who, c->peer);
        if (c != &b->coord && (st = spmd__boot_gone(b, "bootstrap")) != SPMD_OK) return st;
        ms = spmd__boot_ms_left(deadline_ns);
        if (ms == 0)
            return spmd__boot_fail(b, SPMD_ERR_TIMEOUT, "bootstrap: %s %s did not answer the handshake "
                                   "within %lld ms", who, c->peer, (long long)b->timeout_ms);
        spmd__boot_wait(b, c, ms);
    }
}

/* A process with children in the tree listens for them on the address its
   connection to the coordinator left from, at a port the system picks;
   *port: that port (0: no children, no listening). */
static spmd_status spmd__boot_tree_listen(spmd__boot *b, unsigned *port) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int e;
    *port = 0;
    if (spmd__boot_child(b, b->rank, 0) < 0) return SPMD_OK;
    if (getsockname(b->coord.fd, (struct sockaddr *)&ss, &sl) == 0 && (ss.ss_family == AF_INET ||
                                                                       ss.ss_family == AF_INET6)) {
        if (ss.ss_family == AF_INET) ((struct sockaddr_in *)&ss)->sin_port = 0;
        else ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
        b->listen_fd = socket(ss.ss_family, SOCK_STREAM, 0);
        if (b->listen_fd >= 0 && bind(b->listen_fd, (struct sockaddr *)&ss, sl) == 0 && listen(b->listen_fd, 16) == 0 &&
            spmd__boot_nonblock(b->listen_fd) == 0 && getsockname(b->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
            *port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    if (*port == 0) {
        e = errno;
        return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: process %d cannot listen for its children in the "
                               "tree on %s: %s", b->rank, b->addr, strerror(e));
    }
    spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: listening for processes %d,%d (children in the tree) on %s port %u",
                   spmd__boot_child(b, b->rank, 0), spmd__boot_child(b, b->rank, 1), b->addr, *port);
    return SPMD_OK;
}

/* Processes 1..n-1: reach the coordinator, retrying with back-off. */
static spmd_status spmd__boot_join(spmd__boot *b, uint64_t deadline_ns) {
    spmd__boot_conn *c = &b->coord;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    unsigned port = 0;
    spmd_status st = spmd__boot_dial(b, c, b->coord_host, b->coord_port, "the coordinator", deadline_ns);
    if (st != SPMD_OK) return st;
    c->rank = 0;
    if (getsockname(c->fd, (struct sockaddr *)&ss, &sl) == 0) spmd__boot_note_addr(b, (struct sockaddr *)&ss);
    if ((st = spmd__boot_tree_listen(b, &port)) != SPMD_OK || (st = spmd__boot_hello(b, c, port, deadline_ns)) != SPMD_OK ||
        (st = spmd__boot_welcome(b, c, deadline_ns)) != SPMD_OK)
        return st;
    spmd__boot_log(b, SPMD_LOG_INFO, "bootstrap: joined coordinator %s from %s (interface %s), layout from %s",
                   c->peer, b->addr, b->ifname[0] ? b->ifname : "?", b->layout_from);
    return SPMD_OK;
}

/* What TREE says of process `proc` (u32 proc, u32 port, address: 4 or 16
   bytes), from process 0's connection to it; 0 when unknown. */
static size_t spmd__boot_where(spmd__boot *b, int proc, unsigned char *p) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    const unsigned char *a;
    spmd__boot_put32(p, (uint32_t)proc);
    spmd__boot_put32(p + 4, b->peers[proc].port);
    if (getpeername(b->peers[proc].fd, (struct sockaddr *)&ss, &sl) != 0) return 0;
    if (ss.ss_family == AF_INET) {
        memcpy(p + 8, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        return 12;
    }
    if (ss.ss_family != AF_INET6) return 0;
    a = ((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) { /* an IPv4 peer of a dual-stack socket */
        memcpy(p + 8, a + 12, 4);
        return 12;
    }
    memcpy(p + 8, a, 16);
    return 24;
}

/* A TREE payload (the coordinator's bytes: checked before use): u32 this
   process's parent in the tree, u32 port 1..65535, its address (4 bytes:
   IPv4, 16: IPv6), as host and port text for spmd__boot_dial. 0, else -1. */
static int spmd__boot_tree_decode(const spmd__boot *b, const unsigned char *p, size_t len, char *host, size_t hn,
                                  char *port, size_t pn) {
    uint32_t pt;
    if (!p || (len != 12 && len != 24) || hn < INET6_ADDRSTRLEN) return -1;
    pt = spmd__boot_get32(p + 4);
    if ((int64_t)spmd__boot_get32(p) != spmd__boot_parent(b, b->rank) || pt == 0 || pt > 65535) return -1;
    if (!inet_ntop(len == 12 ? AF_INET : AF_INET6, p + 8, host, (socklen_t)hn)) return -1;
    snprintf(port, pn, "%u", (unsigned)pt);
    return 0;
}

static spmd_status spmd__boot_await(spmd__boot *b, spmd__boot_conn *c, unsigned type, spmd__boot_msg *m,
                                    uint64_t deadline_ns, const char *what);

/* Wire the tree, once every process joined: process 0 tells each where
   its parent listens (TREE; it knows its own); each connects to its
   parent (HELLO, WELCOME) and admits its children. */
static spmd_status spmd__boot_tree(spmd__boot *b, uint64_t deadline_ns) {
    unsigned char p[24];
    char host[INET6_ADDRSTRLEN], port[8], whom[48];
    spmd__boot_msg m;
    spmd_status st = SPMD_OK;
    int i, par = spmd__boot_parent(b, b->rank), kids = 0, rc = 0;
    for (i = 0; i < 2; i++) kids += (b->down[i].rank = spmd__boot_child(b, b->rank, i)) >= 0;
    b->up.rank = par;
    for (i = 1; b->rank == 0 && i < b->nprocs; i++) {
        size_t n;
        if (spmd__boot_parent(b, i) < 0) continue; /* the root */
        n = spmd__boot_where(b, spmd__boot_parent(b, i), p);
        if (n == 0 || spmd__boot_send(b, b->peers[i].fd, SPMD__BM_TREE, 0, p, n, deadline_ns) != 0)
            return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "bootstrap: process %d or %d vanished before the tree "
                                   "was wired", i, spmd__boot_parent(b, i));
    }
    if (b->rank == 0) {
        rc = spmd__boot_tree_decode(b, p, spmd__boot_where(b, par, p), host, sizeof host, port, sizeof port);
    } else if (par >= 0) {
        if ((st = spmd__boot_await(b, &b->coord, SPMD__BM_TREE, &m, deadline_ns, "bootstrap")) != SPMD_OK) return st;
        rc = spmd__boot_tree_decode(b, m.payload, m.len, host, sizeof host, port, sizeof port);
        spmd__boot_consume(&b->coord, m.total);
    }
    if (rc < 0) return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "bootstrap: a malformed address of process %d (TREE)", par);
    if (par >= 0) {
        snprintf(whom, sizeof whom, "process %d (its parent in the tree)", par);
        if ((st = spmd__boot_dial(b, &b->up, host, port, whom, deadline_ns)) != SPMD_OK ||
            (st = spmd__boot_hello(b, &b->up, 0, deadline_ns)) != SPMD_OK)
            return st;
    }
    if (kids && (st = spmd__boot_serve(b, kids, deadline_ns)) != SPMD_OK) return st;
    if (par >= 0) st = spmd__boot_welcome(b, &b->up, deadline_ns);
    return st;
}

static void spmd__boot_close(spmd__boot *b);

/* Start the bootstrap; on failure *out is NULL and err holds the reason. */
static SPMD__UNUSED spmd_status spmd__boot_open(const spmd__boot_desc *d, spmd__boot **out, char *err,
                                                size_t errlen) {
    spmd_allocator none;
    const spmd_allocator *a = d && d->alloc ? d->alloc : &none;
    spmd__boot *b;
    spmd_status st;
    uint64_t deadline;
    int i;
    memset(&none, 0, sizeof none);
    if (out) *out = NULL;
    if (err && errlen) err[0] = 0;
    if (!d || !out) {
        if (err) snprintf(err, errlen, "bootstrap: NULL desc or result");
        return SPMD_ERR_NULL;
    }
    b = (spmd__boot *)spmd__alloc(a, sizeof *b);
    if (!b) {
        if (err) snprintf(err, errlen, "bootstrap: out of memory");
        return SPMD_ERR_NOMEM;
    }
    b->alloc = *a;
    b->log_fn = d->log_fn;
    b->log_user = d->log_user;
    b->log_level = (unsigned)d->log_level < SPMD_LOG_LEVEL_COUNT && d->log_level ? d->log_level : SPMD_LOG_WARN;
    {
        const char *lv = getenv("SPMD_LOG_LEVEL");
        for (i = SPMD_LOG_OFF; lv && i < SPMD_LOG_LEVEL_COUNT; i++)
            if (strcmp(lv, spmd__level_names[i]) == 0) b->log_level = (spmd_log_level)i;
    }
    b->listen_fd = -1;
    b->coord.fd = b->up.fd = b->down[0].fd = b->down[1].fd = -1;
    b->rank = -1;
    st = spmd__boot_config(b, d);
    if (st == SPMD_OK) {
        b->lost = (unsigned char *)spmd__alloc(&b->alloc, (size_t)b->nprocs);
        b->pfds = (struct pollfd *)spmd__alloc(&b->alloc, ((size_t)b->nprocs + 1) * sizeof *b->pfds);
        if (b->rank == 0) b->peers = (spmd__boot_conn *)spmd__alloc(&b->alloc, (size_t)b->nprocs * sizeof *b->peers);
        if (!b->lost || !b->pfds || (b->rank == 0 && !b->peers))
            st = spmd__boot_fail(b, SPMD_ERR_NOMEM, "bootstrap: out of memory");
        for (i = 0; b->peers && i < b->nprocs; i++) { b->peers[i].fd = -1; b->peers[i].rank = i; }
    }
    if (st == SPMD_OK && b->nprocs > 1) {
        deadline = spmd__now_ns() + (uint64_t)b->timeout_ms * 1000000u;
        if (b->pmix) st = spmd__boot_pmix(b);
        if (st == SPMD_OK) st = b->rank == 0 ? spmd__boot_serve(b, b->nprocs - 1, deadline) : spmd__boot_join(b, deadline);
        if (st == SPMD_OK) st = spmd__boot_tree(b, deadline);
    }
    if (st != SPMD_OK) {
        spmd__boot_log(b, SPMD_LOG_ERROR, "%s", b->err);
        if (err) snprintf(err, errlen, "%s", b->err);
        for (i = 1; b->peers && i < b->nprocs; i++) /* the processes that joined learn why, not just that we left */
            if (b->peers[i].fd >= 0) {
                unsigned char p[4 + SPMD__BOOT_BROKEN_MAX];
                size_t n = strlen(b->err) < SPMD__BOOT_BROKEN_MAX ? strlen(b->err) : SPMD__BOOT_BROKEN_MAX;
                spmd__boot_put32(p, (uint32_t)st);
                memcpy(p + 4, b->err, n);
                spmd__boot_send(b, b->peers[i].fd, SPMD__BM_ABORT, 0, p, 4 + n, spmd__now_ns() + 100000000u);
            }
        spmd__boot_close(b);
        return st;
    }
    *out = b;
    return SPMD_OK;
}

/* Mark a process gone; the coordinator tells everyone else it died. */
static void spmd__boot_mark(spmd__boot *b, int rank, int died) {
    int i;
    unsigned char p[4];
    if (rank < 0 || rank >= b->nprocs || b->lost[rank]) return;
    b->lost[rank] = (unsigned char)(died ? 1 : 2);
    if (!died) return;
    SPMD__ST_REL(&b->nlost, b->nlost + 1); /* read without the lock by spmd__fab_first_lost */
    spmd__boot_log(b, SPMD_LOG_ERROR, "process %d lost (its bootstrap connection closed without goodbye)", rank);
    if (b->rank != 0) return;
    spmd__boot_put32(p, (uint32_t)rank);
    for (i = 1; i < b->nprocs; i++)
        if (b->peers[i].fd >= 0 && !b->lost[i])
            spmd__boot_send(b, b->peers[i].fd, SPMD__BM_LOST, 0, p, 4, spmd__now_ns() + 100000000u);
}

/* Broken meshes: a process whose mesh breaks (a timeout, a mismatch, a
   failed transfer) announces it, so that the other processes' calls on
   that mesh end at once instead of at their own deadlines (some would
   wait for a message the breaking process will never send). Process 0
   sends the announcement to every other process, the others to process 0,
   which passes it on. Payload: the mesh's id (equal on every process),
   the status, the process it broke in, the reason's text. Sent and read
   under the transport's lock.

   spmd__boot_keep_broken keeps one (the last SPMD__BOOT_BROKEN_KEEP are
   kept); 0 when one about that mesh is kept already: it is then neither
   kept nor passed on again, so a mesh that breaks in every process is
   announced once or twice per process, not once per pair. */
static int spmd__boot_keep_broken(spmd__boot *b, uint32_t mesh_id, uint32_t status, uint32_t proc, const void *text,
                                  size_t n) {
    spmd__boot_broken *e;
    uint32_t k;
    size_t i;
    for (k = 0; k < b->nbroken && k < SPMD__BOOT_BROKEN_KEEP; k++)
        if (b->broken[k].mesh_id == mesh_id) return 0;
    e = &b->broken[b->nbroken % SPMD__BOOT_BROKEN_KEEP];
    e->mesh_id = mesh_id;
    e->status = status;
    e->proc = proc;
    memcpy(e->text, text, n);
    e->text[n] = '\0';
    for (i = 0; e->text[i]; i++) /* shown to users: printable ASCII only */
        if ((unsigned char)e->text[i] < 32 || (unsigned char)e->text[i] > 126) e->text[i] = '?';
    SPMD__ST_REL(&b->nbroken, b->nbroken + 1);
    return 1;
}

static void spmd__boot_announce(spmd__boot *b, uint32_t mesh_id, uint32_t status, const char *why) {
    unsigned char p[12 + SPMD__BOOT_BROKEN_MAX];
    size_t n = strlen(why);
    uint64_t deadline = spmd__now_ns() + 100000000u;
    int i;
    if (!b || b->nprocs < 2) return;
    if (n > SPMD__BOOT_BROKEN_MAX) n = SPMD__BOOT_BROKEN_MAX;
    if (!spmd__boot_keep_broken(b, mesh_id, status, (uint32_t)b->rank, why, n)) return; /* told already */
    spmd__boot_put32(p, mesh_id);
    spmd__boot_put32(p + 4, status);
    spmd__boot_put32(p + 8, (uint32_t)b->rank);
    memcpy(p + 12, why, n);
    if (b->rank == 0) {
        for (i = 1; i < b->nprocs; i++)
            if (b->peers[i].fd >= 0 && !b->lost[i])
                spmd__boot_send(b, b->peers[i].fd, SPMD__BM_BROKEN, 0, p, 12 + n, deadline);
    } else if (b->coord.fd >= 0 && !b->lost[0]) {
        spmd__boot_send(b, b->coord.fd, SPMD__BM_BROKEN, b->rank, p, 12 + n, deadline);
    }
}

/* An announcement came on c: keep it (process 0 passes it on). -1 if malformed. */
static int spmd__boot_heard_broken(spmd__boot *b, spmd__boot_conn *c, const spmd__boot_msg *m) {
    uint32_t status, proc;
    int i;
    if (m->len < 12) return -1;
    status = spmd__boot_get32(m->payload + 4);
    proc = spmd__boot_get32(m->payload + 8);
    if (status == SPMD_OK || status >= SPMD_STATUS_COUNT || proc >= (uint32_t)b->nprocs || (int)proc == b->rank ||
        (b->rank == 0 && (int)proc != c->rank))
        return -1;
    if (!spmd__boot_keep_broken(b, spmd__boot_get32(m->payload), status, proc, m->payload + 12, m->len - 12))
        return 0; /* that mesh's break is known already */
    for (i = 1; b->rank == 0 && i < b->nprocs; i++)
        if (i != c->rank && b->peers[i].fd >= 0 && !b->lost[i])
            spmd__boot_send(b, b->peers[i].fd, SPMD__BM_BROKEN, 0, m->payload, m->len, spmd__now_ns() + 100000000u);
    return 0;
}

/* A RECORDS payload (bytes from another process: checked before use):
   u32 mesh id, u32 process < nprocs, then at most SPMD__BOOT_RECS_MAX bytes
   of printable ASCII and newlines, copied NUL-terminated into text (cap >=
   SPMD__BOOT_RECS_MAX + 1). 0: valid; -1: malformed, nothing kept. */
static int spmd__boot_recs_decode(const unsigned char *p, size_t len, int nprocs, uint32_t *mesh_id, uint32_t *proc,
                                  char *text, size_t cap) {
    size_t k, n;
    if (!p || len < 8 || len - 8 > SPMD__BOOT_RECS_MAX || cap < len - 8 + 1) return -1;
    n = len - 8;
    if (spmd__boot_get32(p + 4) >= (uint32_t)nprocs || nprocs <= 0) return -1;
    for (k = 0; k < n; k++)
        if ((p[8 + k] < 32 || p[8 + k] > 126) && p[8 + k] != '\n') return -1;
    *mesh_id = spmd__boot_get32(p);
    *proc = spmd__boot_get32(p + 4);
    memcpy(text, p + 8, n);
    text[n] = '\0';
    return 0;
}

/* This process's report lines about a mesh, to the others (best effort). */
static void spmd__boot_send_recs(spmd__boot *b, uint32_t mesh_id, const char *text) {
    unsigned char p[8 + SPMD__BOOT_RECS_MAX];
    size_t n = strlen(text);
    uint64_t deadline = spmd__now_ns() + 100000000u;
    int i;
    if (!b || b->nprocs < 2) return;
    if (n > SPMD__BOOT_RECS_MAX) n = SPMD__BOOT_RECS_MAX;
    spmd__boot_put32(p, mesh_id);
    spmd__boot_put32(p + 4, (uint32_t)b->rank);
    memcpy(p + 8, text, n);
    if (b->rank == 0) {
        for (i = 1; i < b->nprocs; i++)
            if (b->peers[i].fd >= 0 && !b->lost[i]) spmd__boot_send(b, b->peers[i].fd, SPMD__BM_RECORDS, 0, p, 8 + n, deadline);
    } else if (b->coord.fd >= 0 && !b->lost[0]) {
        spmd__boot_send(b, b->coord.fd, SPMD__BM_RECORDS, b->rank, p, 8 + n, deadline);
    }
}

/* RECORDS came on c: keep them (process 0 passes them on). -1 if malformed. */
static int spmd__boot_heard_recs(spmd__boot *b, spmd__boot_conn *c, const spmd__boot_msg *m) {
    spmd__boot_recs *e = &b->recs[b->nrecs % SPMD__BOOT_RECS_KEEP];
    uint32_t mesh_id, proc;
    int i;
    if (spmd__boot_recs_decode(m->payload, m->len, b->nprocs, &mesh_id, &proc, e->text, sizeof e->text) < 0 ||
        (int)proc == b->rank || (b->rank == 0 && (int)proc != c->rank))
        return -1;
    e->mesh_id = mesh_id;
    e->proc = proc;
    SPMD__ST_REL(&b->nrecs, b->nrecs + 1);
    for (i = 1; b->rank == 0 && i < b->nprocs; i++)
        if (i != c->rank && b->peers[i].fd >= 0 && !b->lost[i])
            spmd__boot_send(b, b->peers[i].fd, SPMD__BM_RECORDS, 0, m->payload, m->len, spmd__now_ns() + 100000000u);
    return 0;
}

/* The newest RECORDS of process proc about mesh_id, or NULL. */
static const spmd__boot_recs *spmd__boot_recs_of(const spmd__boot *b, uint32_t mesh_id, uint32_t proc) {
    uint32_t n = b->nrecs, k = n > SPMD__BOOT_RECS_KEEP ? n - SPMD__BOOT_RECS_KEEP : 0;
    while (n-- > k) {
        const spmd__boot_recs *e = &b->recs[n % SPMD__BOOT_RECS_KEEP];
        if (e->mesh_id == mesh_id && e->proc == proc) return e;
    }
    return NULL;
}

/* Handle the out-of-band messages (LOST, BYE, BROKEN, ABORT, RECORDS) at the head of a connection;
   stops at the first other message, which belongs to a collective. On end of
   file, a BYE anywhere in what is left means a clean exit. -1: invalid. */
static int spmd__boot_oob(spmd__boot *b, spmd__boot_conn *c) {
    spmd__boot_msg m;
    char why[160];
    int rc;
    int tree = c == &b->up || c == &b->down[0] || c == &b->down[1]; /* (which carry BYE, UP and DOWN only) */
    while ((rc = spmd__boot_parse(b, c, 0, &m, why, sizeof why)) == 1) {
        if (tree && m.type != SPMD__BM_BYE) {
            break;
        } else if (m.type == SPMD__BM_LOST && m.len == 4) {
            uint32_t r = spmd__boot_get32(m.payload);
            if (r < (uint32_t)b->nprocs && (int)r != b->rank) spmd__boot_mark(b, (int)r, 1);
        } else if (m.type == SPMD__BM_BROKEN) {
            if (spmd__boot_heard_broken(b, c, &m) < 0) {
                spmd__boot_log(b, SPMD_LOG_ERROR, "bootstrap: invalid message from process %d: a malformed "
                               "announcement of a broken mesh", c->rank);
                return -1;
            }
        } else if (m.type == SPMD__BM_RECORDS) {
            if (spmd__boot_heard_recs(b, c, &m) < 0) {
                spmd__boot_log(b, SPMD_LOG_ERROR, "bootstrap: invalid message from process %d: malformed report "
                               "lines (RECORDS)", c->rank);
                return -1;
            }
        } else if (m.type == SPMD__BM_BYE) {
            c->bye = 1;
        } else if (m.type == SPMD__BM_ABORT && b->rank != 0 && m.len >= 4) { /* kept for the next collective */
            uint32_t s = spmd__boot_get32(m.payload);
            size_t k, n = m.len - 4;
            b->aborted = s != SPMD_OK && s < SPMD_STATUS_COUNT ? (spmd_status)s : SPMD_ERR_SYSTEM;
            memcpy(b->abort_why, m.payload + 4, n);
            b->abort_why[n] = '\0';
            for (k = 0; k < n; k++) /* shown to users: printable ASCII only */
                if ((unsigned char)b->abort_why[k] < 32 || (unsigned char)b->abort_why[k] > 126) b->abort_why[k] = '?';
        } else {
            break;
        }
        spmd__boot_consume(c, m.total);
    }
    if (rc < 0) {
        spmd__boot_log(b, SPMD_LOG_ERROR, "bootstrap: invalid message from process %d: %s", c->rank, why);
        return -1;
    }
    if (c->eof && !c->bye) {
        size_t at = 0;
        while (spmd__boot_parse(b, c, at, &m, why, sizeof why) == 1) {
            if (m.type == SPMD__BM_BYE) c->bye = 1;
            at += m.total;
        }
    }
    return 0;
}

/* Non-blocking check for processes that died; returns how many are known
   lost. Cheap enough to call every few milliseconds from a progress loop. */
static SPMD__UNUSED int spmd__boot_poll(spmd__boot *b) {
    int i;
    if (!b || b->nprocs == 1) return 0;
    if (b->rank == 0) {
        for (i = 1; i < b->nprocs; i++) {
            spmd__boot_conn *c = &b->peers[i];
            if (c->fd < 0 || b->lost[i]) continue;
            if (spmd__boot_fill(b, c) < 0 || c->eof) {
                spmd__boot_oob(b, c);
                spmd__boot_mark(b, i, !c->bye);
                close(c->fd);
                c->fd = -1;
                continue;
            }
            if (spmd__boot_oob(b, c) < 0) { spmd__boot_mark(b, i, 1); close(c->fd); c->fd = -1; }
        }
    } else if (b->coord.fd >= 0 && !b->lost[0]) {
        spmd__boot_conn *c = &b->coord;
        int eof = spmd__boot_fill(b, c) < 0;
        int bad = spmd__boot_oob(b, c) < 0;
        if (eof || bad) {
            spmd__boot_mark(b, 0, bad || !c->bye);
            close(c->fd);
            c->fd = -1;
        }
    }
    return b->nlost;
}

/* 1 if process `rank` died (0 if alive or left cleanly). */
static SPMD__UNUSED int spmd__boot_lost(const spmd__boot *b, int rank) {
    return b && rank >= 0 && rank < b->nprocs && b->lost[rank] == 1;
}

/* Sleep until c (if any) or the star (the connection to the coordinator;
   at process 0, every process's) has something to read, at most ms; then
   read it: c's bytes into c, the star's through spmd__boot_poll (the
   out-of-band messages, losses). */
static void spmd__boot_wait(spmd__boot *b, spmd__boot_conn *c, int ms) {
    nfds_t n = 0;
    int i;
    if (c && c->fd >= 0) { b->pfds[n].fd = c->fd; b->pfds[n++].events = POLLIN; }
    if (b->rank != 0 && c != &b->coord && b->coord.fd >= 0 && !b->lost[0]) {
        b->pfds[n].fd = b->coord.fd;
        b->pfds[n++].events = POLLIN;
    }
    for (i = 1; b->rank == 0 && i < b->nprocs; i++)
        if (b->peers[i].fd >= 0 && !b->lost[i]) { b->pfds[n].fd = b->peers[i].fd; b->pfds[n++].events = POLLIN; }
    for (i = 0; i < (int)n; i++) b->pfds[i].revents = 0;
    poll(b->pfds, n, ms);
    if (c && c->fd >= 0) spmd__boot_fill(b, c);
    if (c != &b->coord) spmd__boot_poll(b);
}

/* Wait for the next collective message on c (out-of-band messages handled
   on the way, the star watched: any process lost ends the wait). A message
   already read whole is taken even if a loss was heard meanwhile: its
   sender finished this exchange before it died (the tree's root returns
   from an allgather once it sent the table down, and may die at once). */
static spmd_status spmd__boot_await(spmd__boot *b, spmd__boot_conn *c, unsigned type, spmd__boot_msg *m,
                                    uint64_t deadline_ns, const char *what) {
    int grace = b->rank != 0;
    spmd_status st;
    for (;;) {
        char why[160];
        int rc, ms;
        if (spmd__boot_oob(b, c) < 0)
            return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "%s: invalid message from process %d", what, c->rank);
        rc = spmd__boot_parse(b, c, 0, m, why, sizeof why);
        if (rc < 0) return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "%s: process %d: %s", what, c->rank, why);
        if (rc != 1 && (st = spmd__boot_gone(b, what)) != SPMD_OK) return st;
        if (rc == 1) {
            if (m->type != type)
                return spmd__boot_fail(b, SPMD_ERR_MISMATCH, "%s: process %d sent message type %u, expected %u "
                                       "(processes out of step)", what, c->rank, m->type, type);
            if (m->rank != (uint32_t)c->rank)
                return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "%s: connection of process %d claims to be %u", what,
                                       c->rank, (unsigned)m->rank);
            return SPMD_OK;
        }
        if (c->eof || c->bye) {
            spmd__boot_mark(b, c->rank, !c->bye);
            return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "%s: process %d %s", what, c->rank,
                                   c->bye ? "left the job" : "lost (connection closed)");
        }
        ms = spmd__boot_ms_left(deadline_ns);
        if (ms == 0 && grace) { /* the coordinator's deadline passes about when ours does: hear its verdict */
            grace = 0;
            deadline_ns = spmd__now_ns() + 500000000u;
            continue;
        }
        if (ms == 0) return spmd__boot_fail(b, SPMD_ERR_TIMEOUT, "%s: process %d did not answer in time", what, c->rank);
        spmd__boot_wait(b, c, ms);
    }
}

/* UP and DOWN: the exchange's number, then (u32 process, u32 len, blob)
   for each process of top's subtree in increasing order (DOWN: top is the
   root, every process). spmd__boot_pack makes one (NULL: out of memory). */
static unsigned char *spmd__boot_pack(spmd__boot *b, int top, uint32_t round, const unsigned char *all, size_t cap,
                                      const size_t *lens, size_t *plen) {
    unsigned char *p;
    size_t n = 4, o = 4, l;
    int x;
    for (x = 0; x < b->nprocs; x++)
        if (spmd__boot_below(b, top, x)) n += 8 + (cap ? lens[x] : 0);
    if (!(p = (unsigned char *)spmd__alloc(&b->alloc, n))) return NULL;
    spmd__boot_put32(p, round);
    for (x = 0; x < b->nprocs; x++) {
        if (!spmd__boot_below(b, top, x)) continue;
        l = cap ? lens[x] : 0;
        spmd__boot_put32(p + o, (uint32_t)x);
        spmd__boot_put32(p + o + 4, (uint32_t)l);
        if (l) memcpy(p + o + 8, all + (size_t)x * cap, l);
        o += 8 + l;
    }
    *plen = n;
    return p;
}

/* An UP or DOWN payload from process `from` (bytes from another process:
   checked before use): exactly top's subtree as spmd__boot_pack lays it
   out, of this exchange, each blob at most cap bytes, this process's own
   (DOWN) as it sent it. The others' blobs are copied into all and lens.
   SPMD_OK, else the status and b->err. */
static spmd_status spmd__boot_take(spmd__boot *b, int from, int top, const unsigned char *p, size_t len,
                                   uint32_t round, unsigned char *all, size_t cap, size_t *lens) {
    size_t o = 4;
    uint32_t l;
    int x;
    if (len < 4 || spmd__boot_get32(p) != round)
        return spmd__boot_fail(b, SPMD_ERR_MISMATCH, "allgather: process %d is at its exchange #%u, this process "
                               "at #%u (out of step: a process failed or skipped a mesh creation)", from,
                               len < 4 ? 0u : (unsigned)spmd__boot_get32(p), (unsigned)round);
    for (x = 0; x < b->nprocs; x++) {
        if (!spmd__boot_below(b, top, x)) continue;
        if (len - o < 8 || spmd__boot_get32(p + o) != (uint32_t)x || (l = spmd__boot_get32(p + o + 4)) > cap ||
            len - o - 8 < l || (x == b->rank && cap && l != lens[x]))
            return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "allgather: malformed message from process %d (at the "
                                   "entry of process %d)", from, x);
        if (cap && x != b->rank) {
            memcpy(all + (size_t)x * cap, p + o + 8, l);
            lens[x] = l;
        }
        o += 8 + l;
    }
    if (o != len) return spmd__boot_fail(b, SPMD_ERR_SYSTEM, "allgather: %zu stray bytes from process %d", len - o, from);
    return SPMD_OK;
}

/* Every process contributes `len` bytes (len <= cap <= 4096); afterwards
   all[i * cap ...] holds process i's blob and lens[i] its length. With
   cap 0 this is a barrier. Collective: every process calls it in the same
   order. Over the tree: each process's subtree UP, the table DOWN (see the
   section comment). Each message carries the exchange's number (the
   allgathers this process began), so processes out of step fail with
   SPMD_ERR_MISMATCH instead of pairing different exchanges. */
static SPMD__UNUSED spmd_status spmd__boot_allgather(spmd__boot *b, const void *mine, size_t len, void *all,
                                                     size_t cap, size_t *lens, uint64_t deadline_ns) {
    unsigned char *out = (unsigned char *)all, *pay = NULL;
    const unsigned char *fwd; /* what goes down: ours (the root), else the parent's as it came */
    size_t plen = 0;
    spmd_status st = SPMD_OK;
    spmd__boot_msg m;
    uint32_t round;
    int k, par;
    if (!b) return SPMD_ERR_NULL;
    if (cap > SPMD__BOOT_BLOB_MAX || len > cap || (len && !mine) || (cap && (!all || !lens)))
        return spmd__boot_fail(b, SPMD_ERR_SIZE, "allgather: blob of %zu bytes, capacity %zu (at most %u)", len, cap,
                               SPMD__BOOT_BLOB_MAX);
    if (cap) {
        memcpy(out + (size_t)b->rank * cap, mine, len);
        lens[b->rank] = len;
    }
    if (b->nprocs == 1) return SPMD_OK;
    round = ++b->round;
    spmd__boot_poll(b); /* a loss or an ABORT that came meanwhile */
    if ((st = spmd__boot_gone(b, "allgather")) != SPMD_OK) return st;
    for (k = 0; k < 2 && spmd__boot_child(b, b->rank, k) >= 0; k++) { /* up: the children's subtrees */
        spmd__boot_conn *c = &b->down[k];
        if (c->fd < 0) return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "allgather: process %d is gone", c->rank);
        if ((st = spmd__boot_await(b, c, SPMD__BM_UP, &m, deadline_ns, "allgather")) != SPMD_OK) return st;
        st = spmd__boot_take(b, c->rank, c->rank, m.payload, m.len, round, out, cap, lens);
        spmd__boot_consume(c, m.total);
        if (st != SPMD_OK) return st;
    }
    if ((par = spmd__boot_parent(b, b->rank)) >= 0) { /* ours to the parent; the table back */
        if (!(pay = spmd__boot_pack(b, b->rank, round, out, cap, lens, &plen)))
            return spmd__boot_fail(b, SPMD_ERR_NOMEM, "allgather: out of memory");
        k = b->up.fd < 0 || spmd__boot_send(b, b->up.fd, SPMD__BM_UP, b->rank, pay, plen, deadline_ns) != 0;
        spmd__free(&b->alloc, pay);
        if (k) { /* its end, or a LOST on the way, says more */
            if ((st = spmd__boot_await(b, &b->up, SPMD__BM_DOWN, &m, spmd__now_ns(), "allgather")) != SPMD_OK)
                return st;
            return spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "allgather: sending to process %d failed", par);
        }
        if ((st = spmd__boot_await(b, &b->up, SPMD__BM_DOWN, &m, deadline_ns, "allgather")) != SPMD_OK) return st;
        st = spmd__boot_take(b, par, spmd__boot_proc(b, 0), m.payload, m.len, round, out, cap, lens);
        pay = NULL;
        fwd = m.payload;
        plen = m.len;
    } else if (!(fwd = pay = spmd__boot_pack(b, b->rank, round, out, cap, lens, &plen))) {
        return spmd__boot_fail(b, SPMD_ERR_NOMEM, "allgather: out of memory");
    }
    for (k = 0; k < 2 && spmd__boot_child(b, b->rank, k) >= 0 && st == SPMD_OK; k++) /* down: passed on as it came */
        if (spmd__boot_send(b, b->down[k].fd, SPMD__BM_DOWN, b->rank, fwd, plen, deadline_ns) != 0)
            st = spmd__boot_fail(b, SPMD_ERR_PEER_LOST, "allgather: sending the result to process %d failed",
                                 b->down[k].rank);
    if (par >= 0) spmd__boot_consume(&b->up, m.total);
    spmd__free(&b->alloc, pay);
    return st;
}

static SPMD__UNUSED spmd_status spmd__boot_barrier(spmd__boot *b, uint64_t deadline_ns) {
    return spmd__boot_allgather(b, NULL, 0, NULL, 0, NULL, deadline_ns);
}

/* Say goodbye (so nobody reports us lost) and free everything. */
static void spmd__boot_close(spmd__boot *b) {
    int i;
    spmd_allocator a;
    if (!b) return;
    if (b->coord.fd >= 0) spmd__boot_send(b, b->coord.fd, SPMD__BM_BYE, b->rank, NULL, 0, spmd__now_ns() + 100000000u);
    spmd__boot_conn_close(b, &b->coord);
    for (i = 0; i < 3; i++) { /* the tree's */
        spmd__boot_conn *c = i < 2 ? &b->down[i] : &b->up;
        if (c->fd >= 0) spmd__boot_send(b, c->fd, SPMD__BM_BYE, b->rank, NULL, 0, spmd__now_ns() + 100000000u);
        spmd__boot_conn_close(b, c);
    }
    for (i = 0; b->peers && i < b->nprocs; i++) {
        if (b->peers[i].fd >= 0)
            spmd__boot_send(b, b->peers[i].fd, SPMD__BM_BYE, 0, NULL, 0, spmd__now_ns() + 100000000u);
        spmd__boot_conn_close(b, &b->peers[i]);
    }
    if (b->listen_fd >= 0) close(b->listen_fd);
    a = b->alloc;
    spmd__free(&a, b->peers);
    spmd__free(&a, b->pfds);
    spmd__free(&a, b->lost);
    spmd__free(&a, b);
}
#endif /* SPMD__HAS_LIBFABRIC */

SPMD__SETUP_END

// >>libfabric backend
/* Transport of the libfabric backend (internal; compiled with
   SPMDCOLL_LIBFABRIC), under the meshes of "libfabric meshes" below. What
   the collective engine gets:

     spmd__fab_open(desc, &f, err, errlen)      bootstrap + fabric, domain, AV, CQ, endpoint
     spmd__fab_close(f)                         cancel what is in flight, free everything
     spmd__fab_post_send(f, op, peer, tag, buf, len, deadline_ns)
     spmd__fab_post_recv(f, op, peer, tag, buf, len, deadline_ns)
     spmd__fab_post_recv_upto(f, op, ...)       the same, of at most len bytes (op->received)
     spmd__fab_post_lazy(f, op, ...)            a receive of at most len bytes that its waiter takes
                                                (spmd__fab_take), a send into the lane's ring at once
     spmd__fab_progress(f)                      read the lane and the CQ, post what waits, notice lost peers
     spmd__fab_peek(f, op)                      spmd__fab_test without progressing
     spmd__fab_test(f, op)                      SPMD_ERR_BUSY while running, else the op's status
     spmd__fab_wait(f, op)                      progress until done, failed or past its deadline
     spmd__fab_cancel(f, op, status, why)       fail an op, hand its buffers back when the provider does
     spmd__fab_op_idle(op)                      1 when the provider holds nothing of the op
     spmd__fab_mr_forget(f, buf, len)           drop cached registrations before freeing memory
     spmd__fab_peer_lost(f, peer)               1 when that process died
   f->boot is the bootstrap (allgather, barrier) for the engine's own use.

   Ops: the caller owns the spmd__fab_op (zeroed or reused after it ended) and
   the buffer from post until spmd__fab_op_idle(op); a failed op whose
   segments the provider could not cancel stays idle-false until
   spmd__fab_close. Both sides of a message must post the same length: the
   message is cut into segments of f->seg bytes (the minimum over all
   processes of max_msg_size, at most 1 MiB but with shm, and 8 KiB in
   strict mode), each its own tagged message, at most SPMD__FAB_WINDOW in
   flight per op; to a process of another host, of f->xseg bytes (256 KiB)
   with at most f->xflight bytes of them in flight (512 KiB; a bcast's chain
   all 8: spmd__fab_segs). SPMD_FABRIC_SEGMENT sets one size for both, 8 in
   flight.
   Sends of at most
   f->inject bytes in one segment go out with fi_tinject and are done at once.
   Between two processes of one host, messages go through the shared-memory
   lane instead (see "shared-memory lane" below; SPMD_SHM_LANE=0 turns it
   off, =small and strict mode keep it to messages of at most f->lane_max,
   8 KiB): a small send is done once copied into the ring (or waits for
   room, in order), a large one once its last piece is in the bulk ring; a
   receive from such a peer is matched there, and one of up to n bytes
   takes n <= f->lane_max.

   Tag layout (64 bits), built with SPMD__FAB_TAG(group, seq, step):
       63..62  kind        2 bits   0 = collectives; 1 = send/recv (its own layout, see
                                    SPMD__FAB_P2P_TAG); 2 and 3: their clear-to-send
                                    messages (see SPMD__X_CTS)
       61..46  group id   16 bits   65536 groups (engine numbers its groups)
       45..30  sequence   16 bits   per group, wraps; needs < 65536 requests in flight
       29..16  step       14 bits   16384 steps (a ring over 4096 processes needs 8190)
       15..0   segment    16 bits   filled in here; so at most 65536 segments per message
   The source is matched by address (FI_DIRECTED_RECV), so it is not in the tag.

   Environment: SPMD_PROVIDER (else FI_PROVIDER, else libfabric's first
   choice, shm first when every process is on one host); SPMD_FABRIC_STRICT=1
   runs any provider through the paths verbs and EFA demand: every buffer
   registered, fi_context2 poisoned before posting and checked on completion,
   manual progress requested, 8 KiB segments; SPMD_SHM_LANE=0: no lane. */
#if SPMD__HAS_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define SPMD__FAB_WINDOW 8
#define SPMD__FAB_STRICT_SEG 8192
/* Segments of at most 1 MiB, whatever the provider allows: with up to
   SPMD__FAB_WINDOW of them in flight, the sender's and the receiver's
   copies of one large message overlap. Measured with tcp;ofi_rxm, 2
   processes, 64 MiB (GB/s of busbw, two runs each, unsegmented vs 1 MiB):
   bcast 2.7/1.1 vs 3.0/4.0, reduce 2.6/1.9 vs 3.1/3.2, psum 1.5/1.4 vs
   1.5/1.7, all_gather and all_to_all alike. Not for shm, which copies a
   message in one go (and whose later sends stall behind a segment that
   arrives before its receive: see SPMD__X_CTS). SPMD_FABRIC_SEGMENT sets
   it, within a host and between hosts alike. */
#define SPMD__FAB_SEG_MAX ((size_t)1 << 20)
/* Between hosts, segments of 256 KiB and at most 512 KiB of one message in
   flight. On a link busy both ways the receiver's requests for the data
   (rxm's rendezvous over tcp) queue behind the data going the other way,
   as long as the queue is: 1 MiB segments, 8 in flight, took a psum of 16
   MiB between 2 emulated hosts at 1 Gbit/s 213-246 ms, these 170-186 (the
   wire floor 134, Open MPI 240-257); at 10 Gbit/s they cost nothing on the
   psum and all_gather, 15% on a bcast between two processes. Within a
   host (the lane off) 1 MiB and 8 stay: smaller ones cost a bcast 30-100%
   there (docs/performance.md). */
#define SPMD__FAB_XSEG ((size_t)256 << 10)
#define SPMD__FAB_XFLIGHT ((size_t)512 << 10)
#define SPMD__FAB_NAME_MAX 1024
#define SPMD__FAB_SEG_MAGIC 0x5345474du
#define SPMD__FAB_TAG_SEG_BITS 16
#define SPMD__FAB_TAG_STEP_BITS 14
#define SPMD__FAB_TAG_SEQ_BITS 16
#define SPMD__FAB_TAG_GROUP_BITS 16
#define SPMD__FAB_TAG(group, seq, step)                                                              \
    ((((uint64_t)(group) & 0xffffu) << 46) | (((uint64_t)(seq) & 0xffffu) << 30) |                  \
     (((uint64_t)(step) & 0x3fffu) << 16))
#define SPMD__FAB_TAG_SEG_MASK 0xffffu
#define SPMD__FAB_TAG_KIND_MASK (3ull << 62)
#define SPMD__FAB_MAX_SEGS (1u << SPMD__FAB_TAG_SEG_BITS)

enum { SPMD__FOP_IDLE = 0, SPMD__FOP_ACTIVE, SPMD__FOP_DONE };
enum { SPMD__FOP_SEND = 1, SPMD__FOP_RECV };

typedef struct spmd__fab_desc {
    spmd__boot_desc boot;     /* layout, coordinator, key, deadline, logging, allocator */
    const char *provider;     /* NULL: SPMD_PROVIDER, FI_PROVIDER, else automatic */
    int strict;               /* 0: SPMD_FABRIC_STRICT; 1: on; -1: off */
    int lane;                 /* 0: SPMD_SHM_LANE (default on); 1: on; 2: small messages only; -1: off */
} spmd__fab_desc;

typedef struct spmd__fab_mr {
    uintptr_t base;
    size_t len;
    struct fid_mr *mr;
    void *desc;
    int refs;
    int owned;                /* one of our own buffers: kept when idle (see spmd__fab_mr_own) */
    int retired;              /* its memory was forgotten while ops used it: matched by no new
                                 lookup, closed when the last op ends */
    uint64_t used;            /* LRU clock */
} spmd__fab_mr;

struct spmd__fab_op;
/* One posted segment: what the provider gets as its context. The
   fi_context2 is first, so providers with FI_CONTEXT/FI_CONTEXT2 can use it
   as scratch space for as long as they own the operation. */
typedef struct spmd__fab_seg {
    struct fi_context2 ctx;
    struct spmd__fab_op *op;
    uint32_t magic;
    uint32_t index;
    int busy;
} spmd__fab_seg;

/* A message or receive waiting on the shared-memory lane, keyed by (peer,
   tag) in a hash of chains that keep arrival order. */
typedef struct spmd__lane_node {
    struct spmd__lane_node *next;
    uint64_t tag;
    int peer;
} spmd__lane_node;

typedef struct spmd__lane_bucket {
    spmd__lane_node *head, *tail;
} spmd__lane_bucket;

typedef struct spmd__lane_tab {
    spmd__lane_bucket *b;
    size_t mask, n;
} spmd__lane_tab;

typedef struct spmd__fab_op {
    spmd__fab_seg slot[SPMD__FAB_WINDOW];
    struct spmd__fab_op *prev, *next;
    spmd__lane_node lnode;    /* lane: in f->lpost (receive) or its lane's wait list (send) */
    int lane;                 /* 0: libfabric; 1: the lane; 2: the lane, queued on lnode; 3: a large
                                 send announced, waiting for its clear-to-send; 4: a large message
                                 moving through the bulk ring (xfer); 5: a lazy receive, posted
                                 nowhere (spmd__fab_take) */
    int state, kind, peer;
    uint64_t sid;             /* lane 3: the large send's number on its lane */
    struct spmd__lane_xfer *xfer; /* lane 4 */
    uint64_t tag;
    unsigned char *buf;
    size_t len, received;
    int upto;                 /* a receive that may carry fewer bytes */
    int lazy;                 /* posted lazy and not yet taken or posted (its owner's word, no lock) */
    int what;                 /* a send: the operation kind it is for (spmd__x_send; counters) */
    uint32_t nseg, posted, done, inflight;
    uint32_t win;             /* segments at most in flight */
    int wide;                 /* the caller's, for its next post only: the whole window to another
                                 host too (spmd__fab_segs) */
    size_t seg;               /* bytes of a segment (the last may be shorter) */
    spmd__fab_mr *mr;
    uint64_t deadline_ns;
    spmd_status status;
    char err[224];
} spmd__fab_op;

typedef struct spmd__fab {
    spmd__boot *boot;
    int rank, nprocs, strict;
    spmd_allocator alloc;
    uint32_t lock;           /* spmd__slock: every op, the lanes, the provider's calls */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    fi_addr_t *addrs;
    char prov[64];
    size_t seg, xseg, inject, max_msg; /* xseg: to processes of other hosts */
    size_t xflight;           /* bytes of one message at most in flight to another host */
    uint64_t mr_mode;
    int need_mr;
    spmd__fab_mr **mrs;
    int nmr, capmr;
    uint64_t mr_clock, mr_key;
    spmd__fab_op *head;
    uint64_t next_poll_ns;
    uint64_t next_walk_ns;    /* when the listed ops are walked next (deadlines) */
    uint32_t polls;           /* progress calls, for the checks every 32nd */
    int backlog;              /* an op waits for room to post more */
    int cts;                  /* large messages wait for the receiver's clear-to-send */
    int hi15;                 /* net: tag bit 63 travels as bit 15 (spmd__fab_post_more) */
    uint64_t nfab;            /* segments the provider holds */
    uint32_t fab_recent;      /* CQ reads still owed to the last fabric post (lane on) */
    uint64_t moved;           /* counts progress calls that moved something: waiters keep
                                 spinning while it changes (written under the lock, read without) */
    /* the shared-memory lane (see "shared-memory lane" below) */
    struct spmd__lane *lanes;
    int nlanes;
    int *lane_of;             /* per process: its index in lanes, -1: libfabric only */
    unsigned char *far;       /* per process: 1 on another host (spmd__lane_open; NULL: none is) */
    uint32_t *mach;           /* per process two words, its machine (spmd__machine_id) and that machine's
                                 CPUs, as the last spmd__mesh_compare heard (NULL before it) */
    uint64_t cmsgs[SPMD_LINK_COUNT][SPMD_COUNT_KINDS], cbytes[SPMD_LINK_COUNT][SPMD_COUNT_KINDS]; /* sent (the lock) */
    int cinfl[SPMD_COUNT_KINDS]; /* the most data sends of one call in flight at once (the lock; spmd__x_window) */
    uint64_t *cpeers;         /* row link * SPMD_COUNT_KINDS + kind, cwords words: bit p, sent to process p */
    int cwords;
    size_t lane_max, lane_cap;
    size_t bulk_cap;          /* bytes of a bulk ring; 0: larger messages go through libfabric */
    spmd__lane_tab lpost;     /* receives posted on the lane */
    spmd__lane_tab lunex;     /* lane messages that came before their receive */
    struct spmd__lane_msg *lspare; /* blocks for small ones, kept for the next (spmd__lane_msg_get) */
    int nlspare;
    void *lane_seg;           /* our segment: the rings other processes write to us */
    size_t lane_seg_size;
    char err[512];
} spmd__fab;

static spmd_status spmd__fab_fail(spmd__fab *f, spmd_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static spmd_status spmd__fab_fail(spmd__fab *f, spmd_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    spmd__boot_log(f->boot, SPMD_LOG_DEBUG, "%s: %s", spmd_status_name(s), f->err);
    return s;
}

/* ---- registration cache ----
   Entries are allocated one by one (ops point at them), looked up by
   containment, and the least recently used idle one is evicted once 256
   exist; at most 4096 (then SPMD_ERR_NOMEM: too many buffers in flight;
   not SPMD_ERR_BUSY, which the engine takes for "try again later").
   Only our own buffers stay registered while idle: those announced by
   spmd__fab_mr_own when allocated, which spmd__fab_mr_forget drops before
   they are freed. A caller's buffer is registered for as long as ops use
   it (shared by ops in flight together) and closed after: the caller may
   free it and get other pages at the same address, which a registration
   kept by address would then describe wrongly (on verbs and EFA, data to
   or from the old pages). Providers that need registration keep their
   own cache, invalidated by their memory monitors, under fi_mr_reg.
   Why sharing is sound: an entry covers the pages of the buffer it was
   made for, rounded out to whole pages, and every one of those pages
   holds part of that buffer. While that buffer lives (a caller's: while
   its ops run; ours: until forgotten) those pages stay mapped as they
   were, so another buffer inside them may use the entry. Hence an entry
   made for a caller's buffer is never taken over as ours (it would
   outlive the caller's buffer), and one whose buffer is forgotten while
   ops still use it is retired: no new lookup matches it, and the last op
   closes it. */
static spmd_status spmd__fab_mr_reg(spmd__fab *f, const void *buf, size_t len, int owned, spmd__fab_mr **out);
static spmd_status spmd__fab_mr_get(spmd__fab *f, const void *buf, size_t len, spmd__fab_mr **out) {
    return spmd__fab_mr_reg(f, buf, len, 0, out);
}

/* One of our buffers, just allocated: registered now and kept (unless
   evicted) until spmd__fab_mr_forget. A failure only costs speed: the
   buffer is then registered like a caller's, op by op. */
static SPMD__UNUSED void spmd__fab_mr_own(spmd__fab *f, const void *buf, size_t len) {
    spmd__fab_mr *e;
    if (!f->need_mr || !buf || !len) return;
    spmd__slock(&f->lock);
    if (spmd__fab_mr_reg(f, buf, len, 1, &e) == SPMD_OK && e) e->refs--;
    spmd__sunlock(&f->lock);
}

static spmd_status spmd__fab_mr_reg(spmd__fab *f, const void *buf, size_t len, int owned, spmd__fab_mr **out) {
    uintptr_t b = (uintptr_t)buf, lo, hi;
    int i, victim = -1;
    spmd__fab_mr *e;
    struct fid_mr *mr = NULL;
    int rc;
    *out = NULL;
    if (!f->need_mr || len == 0) return SPMD_OK;
    for (i = 0; i < f->nmr; i++) {
        e = f->mrs[i];
        if (e->mr && !e->retired && (e->owned || !owned) && e->base <= b && b - e->base <= e->len &&
            len <= e->len - (b - e->base)) {
            e->refs++;
            e->used = ++f->mr_clock;
            *out = e;
            return SPMD_OK;
        }
    }
    if (b > UINTPTR_MAX - len - 4095) return spmd__fab_fail(f, SPMD_ERR_OVERFLOW, "register: buffer wraps");
    lo = b & ~(uintptr_t)4095;
    hi = (b + len + 4095) & ~(uintptr_t)4095;
    for (i = 0; i < f->nmr; i++)
        if (!f->mrs[i]->mr) { victim = i; break; }
    if (victim < 0 && f->nmr >= 256) {
        for (i = 0; i < f->nmr; i++)
            if (f->mrs[i]->refs == 0 && (victim < 0 || f->mrs[i]->used < f->mrs[victim]->used)) victim = i;
        if (victim >= 0) { fi_close(&f->mrs[victim]->mr->fid); f->mrs[victim]->mr = NULL; }
    }
    if (victim < 0) {
        if (f->nmr >= 4096)
            return spmd__fab_fail(f, SPMD_ERR_NOMEM, "registration cache full: %d buffers in flight", f->nmr);
        if (f->nmr == f->capmr) {
            int ncap = f->capmr ? f->capmr * 2 : 64;
            spmd__fab_mr **n = (spmd__fab_mr **)spmd__alloc(&f->alloc, (size_t)ncap * sizeof *n);
            if (!n) return spmd__fab_fail(f, SPMD_ERR_NOMEM, "register: out of memory");
            if (f->nmr) memcpy(n, f->mrs, (size_t)f->nmr * sizeof *n);
            spmd__free(&f->alloc, f->mrs);
            f->mrs = n;
            f->capmr = ncap;
        }
        f->mrs[f->nmr] = (spmd__fab_mr *)spmd__alloc(&f->alloc, sizeof **f->mrs);
        if (!f->mrs[f->nmr]) return spmd__fab_fail(f, SPMD_ERR_NOMEM, "register: out of memory");
        victim = f->nmr++;
    }
    rc = fi_mr_reg(f->domain, (void *)lo, hi - lo, FI_SEND | FI_RECV, 0, ++f->mr_key, 0, &mr, NULL);
    if (rc == 0 && (f->mr_mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(mr, &f->ep->fid, 0);
        if (rc == 0) rc = fi_mr_enable(mr);
    }
    if (rc != 0) {
        if (mr) fi_close(&mr->fid);
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_mr_reg of %zu bytes at %p: %s", (size_t)(hi - lo), (void *)lo,
                              fi_strerror(-rc));
    }
    e = f->mrs[victim];
    e->base = lo;
    e->len = hi - lo;
    e->mr = mr;
    e->desc = fi_mr_desc(mr);
    e->refs = 1;
    e->owned = owned;
    e->retired = 0;
    e->used = ++f->mr_clock;
    *out = e;
    return SPMD_OK;
}

/* Forget registrations overlapping [buf, buf+len): call before memory is
   freed or unmapped. Entries still used by an op are retired (closed when
   it ends, matched by nobody meanwhile). */
static SPMD__UNUSED void spmd__fab_mr_forget(spmd__fab *f, const void *buf, size_t len) {
    uintptr_t b = (uintptr_t)buf;
    int i;
    spmd__slock(&f->lock);
    for (i = 0; i < f->nmr; i++) {
        spmd__fab_mr *e = f->mrs[i];
        if (!e->mr || e->base >= b + len || b >= e->base + e->len) continue;
        if (e->refs == 0) {
            fi_close(&e->mr->fid);
            e->mr = NULL;
        } else {
            e->owned = 0;
            e->retired = 1;
        }
    }
    spmd__sunlock(&f->lock);
}

/* ---- ops ---- */
static void spmd__fab_unlink(spmd__fab *f, spmd__fab_op *op) {
    if (op->prev) op->prev->next = op->next;
    else if (f->head == op) f->head = op->next;
    if (op->next) op->next->prev = op->prev;
    op->prev = op->next = NULL;
}

/* The op ended (all segments done, or failed with none held). DONE is
   stored last, with release: a thread that reads it with acquire (see
   spmd__fab_peek) may read the status and the data without the lock.
   A DONE op holds nothing at the provider (inflight is 0) until posted
   again. */
static void spmd__fab_settle(spmd__fab *f, spmd__fab_op *op) {
    if (op->state != SPMD__FOP_ACTIVE || op->inflight) return;
    if (op->status == SPMD_OK && op->done < op->nseg) return;
    if (op->mr) {
        if (--op->mr->refs == 0 && !op->mr->owned) { /* a caller's buffer: not kept (see the cache) */
            fi_close(&op->mr->mr->fid);
            op->mr->mr = NULL;
        }
        op->mr = NULL;
    }
    spmd__fab_unlink(f, op);
    SPMD__ST_REL(&op->state, SPMD__FOP_DONE);
}

static void spmd__lane_forget(spmd__fab *f, spmd__fab_op *op);
static void spmd__fab_op_fail(spmd__fab *f, spmd__fab_op *op, spmd_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
SPMD__SETUP static void spmd__fab_op_fail(spmd__fab *f, spmd__fab_op *op, spmd_status s, const char *fmt, ...) {
    int i;
    if (op->status == SPMD_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(op->err, sizeof op->err, fmt, ap);
        va_end(ap);
        SPMD__ST_REL(&op->status, s); /* (read without the lock by spmd__fab_peek) */
        spmd__boot_log(f->boot, SPMD_LOG_DEBUG, "%s: %s", spmd_status_name(s), op->err);
    }
    spmd__lane_forget(f, op);
    for (i = 0; i < SPMD__FAB_WINDOW; i++)
        if (op->slot[i].busy) fi_cancel(&f->ep->fid, &op->slot[i].ctx);
    spmd__fab_settle(f, op);
}

static const char *spmd__fab_kind(const spmd__fab_op *op) { return op->kind == SPMD__FOP_SEND ? "send to" : "receive from"; }

static void spmd__fab_describe(const spmd__fab_op *op, char *s, size_t n);
/* The op's peer process died (the bootstrap says so): fail it (lock held). */
static void spmd__fab_op_lost(spmd__fab *f, spmd__fab_op *op) {
    char what[160];
    spmd__fab_describe(op, what, sizeof what);
    spmd__fab_op_fail(f, op, SPMD_ERR_PEER_LOST, "%s: process %d lost (it died or its host is unreachable)", what,
                      op->peer);
}
/* A failed op's reason without the transport's description of the op
   (its peer, bytes, tag fields and segment, which op->err starts with and
   the debug log keeps): what messages for users quote. */
static SPMD__UNUSED const char *spmd__fab_reason(const spmd__fab_op *op) {
    char what[160];
    const char *e = op->err;
    size_t n;
    spmd__fab_describe(op, what, sizeof what);
    n = strlen(what);
    if (strncmp(e, what, n) != 0 || e[n] != ':' || e[n + 1] != ' ') return e;
    e += n + 2;
    if (strncmp(e, "posting ", 8) == 0) e += 8;
    if (strncmp(e, "segment ", 8) == 0) { /* "segment 3: why" */
        const char *c = e + 8;
        while (*c >= '0' && *c <= '9') c++;
        if (c[0] == ':' && c[1] == ' ') e = c + 2;
    }
    return e;
}

static void spmd__fab_describe(const spmd__fab_op *op, char *s, size_t n) {
    snprintf(s, n, "%s process %d of %zu bytes, tag group %u seq %u step %u", spmd__fab_kind(op), op->peer, op->len,
             (unsigned)(op->tag >> 46 & 0xffffu), (unsigned)(op->tag >> 30 & 0xffffu),
             (unsigned)(op->tag >> 16 & 0x3fffu));
}

/* Post as many segments as the window and the provider allow. */
/* Errors that mean the connection to the peer is gone: the peer died or
   became unreachable, often noticed here before the bootstrap hears of it. */
static int spmd__fab_conn_lost(int err) {
    switch (err) {
    case FI_ECONNRESET: case FI_ECONNREFUSED: case FI_ECONNABORTED: case FI_ENOTCONN: case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH: case FI_ENETUNREACH: case FI_ENETDOWN: case EPIPE: return 1;
    default: return 0;
    }
}

static void spmd__fab_post_more(spmd__fab *f, spmd__fab_op *op) {
    while (op->state == SPMD__FOP_ACTIVE && op->status == SPMD_OK && op->posted < op->nseg) {
        uint32_t i = op->posted;
        spmd__fab_seg *sg = &op->slot[i % SPMD__FAB_WINDOW];
        size_t off = (size_t)i * op->seg, n = op->len - off < op->seg ? op->len - off : op->seg;
        void *desc = op->mr ? op->mr->desc : NULL;
        uint64_t tag = op->tag | i;
        ssize_t rc;
        /* net (1.17) never matches a saved unexpected message whose tag has
           bit 63 set (clear-to-send, kinds 2 and 3): there (spmd__fab_xnet) it
           travels as bit 15, and messages have half the segments */
        if (f->hi15) tag = (tag & ~(1ull << 63)) | (tag >> 63 << 15);
        if (sg->busy || op->inflight >= op->win) break;
        if (f->strict) memset(&sg->ctx, 0xa5, sizeof sg->ctx);
        else memset(&sg->ctx, 0, sizeof sg->ctx);
        sg->op = op;
        sg->magic = SPMD__FAB_SEG_MAGIC;
        sg->index = i;
        if (op->kind == SPMD__FOP_SEND && op->nseg == 1 && n <= f->inject) {
            rc = fi_tinject(f->ep, op->buf, n, f->addrs[op->peer], tag);
            f->fab_recent = 64; /* the provider may need progress to send it */
            if (rc == 0) {
                op->posted++;
                op->done++;
                spmd__fab_settle(f, op);
                return;
            }
        } else if (op->kind == SPMD__FOP_SEND) {
            rc = fi_tsend(f->ep, op->buf + off, n, desc, f->addrs[op->peer], tag, &sg->ctx);
        } else {
            rc = fi_trecv(f->ep, op->buf + off, n, desc, f->addrs[op->peer], tag, 0, &sg->ctx);
        }
        if (rc == -FI_EAGAIN) { /* the provider is full: progress, then post again */
            f->backlog = 1;
            break;
        }
        if (rc != 0) {
            char what[160];
            spmd__fab_describe(op, what, sizeof what);
            if (spmd__fab_conn_lost((int)-rc) || spmd__boot_lost(f->boot, op->peer)) /* named as everywhere */
                spmd__fab_op_fail(f, op, SPMD_ERR_PEER_LOST, "%s: posting segment %u: process %d lost (%s)", what,
                                  (unsigned)i, op->peer, fi_strerror((int)-rc));
            else
                spmd__fab_op_fail(f, op, SPMD_ERR_SYSTEM, "%s: posting segment %u: %s", what, (unsigned)i,
                                  fi_strerror((int)-rc));
            return;
        }
        sg->busy = 1;
        op->posted++;
        op->inflight++;
        f->nfab++;
        f->fab_recent = 64;
    }
}

/* ---- shared-memory lane ----
   Small messages between two processes of one host skip libfabric, whose
   shm provider costs ~0.4 us one way. Each process creates one segment in
   /dev/shm (a random name, published over the bootstrap and unlinked as
   soon as every process of the host has mapped it, so a crash leaves
   nothing behind) holding one single-producer single-consumer ring per
   other process of its host: that process writes its messages for us
   there, and we read them in spmd__fab_progress (the f->lock makes the
   threads of a process one producer, and one consumer).

   Which messages: those of at most f->lane_max bytes (so one segment)
   between two processes that both mapped each other's segment. Both ends
   decide by the posted length alone, so a receive has one path and needs
   no cancelling of another; a receive of up to n bytes from such a peer
   therefore takes n <= f->lane_max (the exchange's and send/recv's headers
   are at most ~4.2 KiB). A full ring does not fall back to libfabric: the
   send waits, in order, in its lane's queue and goes into the ring as the
   reader makes room. Order matters because tags repeat: send/recv numbers
   a pair's messages with 5 bits (SPMD__FAB_P2P_TAG), so the 33rd header
   of a pair has the first one's tag, and one overtaking the other by
   another path would be matched to the wrong receive. Per (peer, tag) the
   lane keeps arrival order: the ring is FIFO, and the hash chains of posted
   receives and of unexpected messages keep the order they were added in.

   Ring: the consumer's word (tail: bytes ever read) on its own cache line,
   then `cap` bytes (a power of two) of records: u64 stamp, u64 tag, u32
   length, u32 magic, then the payload, padded to 64 bytes; a record never
   wraps (a skip record fills the end). The producer writes a record, then
   its stamp (its position XOR the segment's random nonce) with a release
   store; the consumer polls the stamp where the next record goes, so a
   message of up to 40 bytes costs one cache line, with no head word to
   fetch first, and frees what it read by a release store of tail, which
   the producer reads (acquire) only when the ring looks full. Stale bytes
   cannot pass for a record: a stamp names the lap, and the nonce is not
   known to the data. What a peer wrote is checked before use (magic,
   lengths); a bad record breaks that peer's lane (its ops fail) and
   nothing else. A dead peer blocks nothing: its ring just stops moving,
   and the ops waiting on it end through the lost-peer check and deadlines
   like any other.

   Larger messages (f->bulk_cap != 0, the default; SPMD_SHM_LANE=small and
   strict mode leave them to libfabric) take the bulk ring beside each
   ring: a byte stream of pieces of up to 64 KiB, each behind a 64-byte
   record (number, offset, length). The sender announces the message on
   the ring (RTS: its length and its number on the lane, in order with the
   small messages, so tags that repeat still match in order); the announce-
   ment is matched like a message, and once its receive is posted the
   receiver answers (CTS, or why not: another length) and appends it to
   its list of messages to come; the sender appends it to its list of
   messages to stream, and writes pieces while the bulk ring has room
   (done once the last is in: the buffer is free, as after fi_tinject).
   Both lists follow the order of the answers, so the pieces need no
   matching, only checking. Nothing enters the bulk ring before its
   receive is posted, so a message never waits behind another one whose
   receive comes later (a receiver may post them in any order), and each
   byte is copied twice (into the ring, out of it) by two CPUs at once:
   faster here than one copy through process_vm_readv, which libfabric's
   shm provider uses. A send that fails before its answer takes the
   announcement back (REVOKE: an unmatched one is dropped); after it, its
   remaining pieces become one ABORT record that fails the receive (one
   before any piece puts the receive back to waiting, as if the message
   had never been sent). A receive that fails drops the rest of its
   pieces. */
#define SPMD__LANE_MAX 8192u          /* bytes of a message, at most */
#define SPMD__LANE_MAGIC 0x454e414c444d5053ull /* "SPMDLANE" */
#define SPMD__LANE_VERSION 2u
#define SPMD__LANE_REC 0x4345524cu    /* a message */
#define SPMD__LANE_SKIP 0x50494b53u   /* the rest of the ring is unused */
#define SPMD__LANE_RTS 0x53545452u    /* a large message is ready: its length and number */
#define SPMD__LANE_CTS 0x53544343u    /* its receive is posted (status 0), or why it cannot be */
#define SPMD__LANE_REVOKE 0x4b564552u /* an announced message is given up before its answer */
#define SPMD__LANE_PIECE_REC 0x43454950u /* bulk: a piece of a large message */
#define SPMD__LANE_ABORT 0x54524241u  /* bulk: the rest of that message will not come */
#define SPMD__LANE_PAD 0x44444150u    /* bulk: the rest of the ring is unused */
#define SPMD__LANE_PIECE ((size_t)64 << 10) /* bytes of a piece, at most */
#define SPMD__LANE_RING_MAGIC 0x474e4952u
#define SPMD__LANE_PREFIX "spmd-lane-"

typedef struct spmd__lane_seg {       /* at the start of a segment */
    uint64_t magic;
    uint32_t version, owner;          /* the process that reads its rings */
    uint32_t nprocs, nrings;
    uint64_t cap, size;               /* ring bytes; the whole segment */
    uint64_t key;                     /* hash of the job key */
    uint64_t nonce;                   /* random: stamps of its records */
    uint64_t bulk;                    /* bytes of each bulk ring, 0: none */
} spmd__lane_seg;

typedef struct spmd__lane_ring {      /* then per ring this, then cap bytes */
    uint32_t producer, magic;
    unsigned char pad0[SPMD__LINE - 8];
    uint64_t tail;
    unsigned char pad1[SPMD__LINE - 8];
} spmd__lane_ring;

typedef struct spmd__lane_rec {
    uint64_t stamp, tag;
    uint32_t len, magic;
} spmd__lane_rec;

typedef struct spmd__lane_msg {       /* an unexpected message; its bytes follow (not an RTS's) */
    spmd__lane_node node;
    size_t len;
    uint64_t sid;                     /* an announced large message: its number, else 0 */
    int spare;                        /* a block of SPMD__LANE_SPARE bytes, kept when taken */
} spmd__lane_msg;

/* An unexpected message of at most this many bytes gets a block kept
   from one taken before (at most SPMD__LANE_NSPARE are kept, all made
   with the lane): a small operation whose peer is ahead meets one every
   time, and malloc and free cost as much as the rest of its receive. Made
   up front, so that how far ahead peers ran before (a warm-up) does not
   decide whether a later call allocates. */
#define SPMD__LANE_SPARE 256u
#define SPMD__LANE_NSPARE 64

typedef struct spmd__lane_ctl {       /* what RTS, CTS and REVOKE records carry */
    uint64_t len, sid;
    uint32_t status, pad;
} spmd__lane_ctl;

typedef struct spmd__lane_bulk {      /* per bulk ring (after the rings) this, then its bytes */
    uint64_t head;                    /* bytes ever written: the producer's */
    unsigned char pad0[SPMD__LINE - 8];
    uint64_t tail;                    /* bytes ever read: the consumer's */
    unsigned char pad1[SPMD__LINE - 8];
} spmd__lane_bulk;

typedef struct spmd__lane_piece {     /* a bulk record, one line; its bytes follow, padded to lines */
    uint64_t sid, off;
    uint32_t len, magic;
    int32_t status;                   /* ABORT: why the sender gave the message up */
    uint32_t pad;
} spmd__lane_piece;

typedef struct spmd__lane_xfer {      /* a large message between its answer and its last piece */
    struct spmd__lane_xfer *next;
    spmd__fab_op *op;                 /* NULL: its op failed (a send still owes an ABORT) */
    uint64_t sid;
    size_t len, done;
    spmd_status why;                  /* the failed op's status */
} spmd__lane_xfer;

typedef struct spmd__lane_pend {      /* a control record waiting for room in the ring */
    struct spmd__lane_pend *next;
    uint32_t magic;
    uint64_t tag;
    spmd__lane_ctl c;
} spmd__lane_pend;

typedef struct spmd__lane {
    int peer, broken;
    spmd__lane_ring *in, *out;        /* its ring in our segment; ours in its segment */
    unsigned char *in_data, *out_data;
    uint64_t in_tail, out_head;       /* next record to read; to write */
    uint64_t out_tail;                /* the reader's tail as last seen */
    uint64_t in_nonce, out_nonce;     /* the stamps' nonces of the two segments */
    void *map;                        /* its segment */
    size_t map_size;
    spmd__lane_node *wait, *wait_tail; /* sends waiting for room, in order */
    spmd__lane_pend *pend, *pend_tail; /* control records waiting for room */
    spmd__lane_bulk *bin, *bout;      /* bulk rings: its in our segment, ours in its */
    unsigned char *bin_data, *bout_data;
    uint64_t bin_tail, bout_head, bout_tail;
    uint64_t next_sid;                /* our last announced message's number */
    spmd__lane_xfer *tx, *tx_tail;    /* large sends answered, to stream in this order */
    spmd__lane_xfer *rx, *rx_tail;    /* large receives answered: their pieces come in this order */
} spmd__lane;

#define SPMD__LANE_OP(n) ((spmd__fab_op *)(void *)((char *)(n) - offsetof(spmd__fab_op, lnode)))

static size_t spmd__lane_hash(int peer, uint64_t tag) {
    uint64_t x = tag ^ (uint64_t)(uint32_t)peer * 0x9e3779b97f4a7c15ull;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x ^ x >> 29);
}

static void spmd__lane_tab_append(spmd__lane_bucket *b, spmd__lane_node *n) {
    n->next = NULL;
    if (b->tail) b->tail->next = n;
    else b->head = n;
    b->tail = n;
}

/* Add n behind every node already there; the table doubles once it holds
   twice as many nodes as buckets (if that allocation fails, the chains just
   grow longer). */
static void spmd__lane_tab_add(spmd__fab *f, spmd__lane_tab *t, spmd__lane_node *n) {
    if (t->n >= 2 * (t->mask + 1)) {
        size_t nb = 2 * (t->mask + 1), i;
        spmd__lane_bucket *b = (spmd__lane_bucket *)spmd__alloc(&f->alloc, nb * sizeof *b);
        if (b) {
            for (i = 0; i <= t->mask; i++) { /* chain by chain, in order: equal keys keep their order */
                spmd__lane_node *c = t->b[i].head, *nx;
                for (; c; c = nx) {
                    nx = c->next;
                    spmd__lane_tab_append(&b[spmd__lane_hash(c->peer, c->tag) & (nb - 1)], c);
                }
            }
            spmd__free(&f->alloc, t->b);
            t->b = b;
            t->mask = nb - 1;
        }
    }
    spmd__lane_tab_append(&t->b[spmd__lane_hash(n->peer, n->tag) & t->mask], n);
    t->n++;
}

/* Put n before every node: a receive that goes back to waiting is the
   first of its (peer, tag) again. */
static void spmd__lane_tab_push_front(spmd__lane_tab *t, spmd__lane_node *n) {
    spmd__lane_bucket *b = &t->b[spmd__lane_hash(n->peer, n->tag) & t->mask];
    n->next = b->head;
    b->head = n;
    if (!b->tail) b->tail = n;
    t->n++;
}

/* Remove and return the first node for (peer, tag), or exactly `which`
   when given; NULL when there is none. */
static spmd__lane_node *spmd__lane_tab_take(spmd__lane_tab *t, int peer, uint64_t tag, spmd__lane_node *which) {
    spmd__lane_bucket *b;
    spmd__lane_node *c, *prev = NULL;
    if (!t->b) return NULL;
    b = &t->b[spmd__lane_hash(peer, tag) & t->mask];
    for (c = b->head; c; prev = c, c = c->next) {
        if (which ? c != which : c->tag != tag || c->peer != peer) continue;
        if (prev) prev->next = c->next;
        else b->head = c->next;
        if (b->tail == c) b->tail = prev;
        c->next = NULL;
        t->n--;
        return c;
    }
    return NULL;
}

static int spmd__lane_push(spmd__fab *f, spmd__lane *l, uint32_t magic, uint64_t tag, const void *buf, size_t len);
static void spmd__lane_break(spmd__fab *f, spmd__lane *l, const char *why);

/* Send a control record (CTS, REVOKE), behind those waiting for room. */
static void spmd__lane_ctl_send(spmd__fab *f, spmd__lane *l, uint32_t magic, uint64_t tag, size_t len, uint64_t sid,
                                uint32_t status) {
    spmd__lane_pend *p;
    spmd__lane_ctl c;
    if (l->broken) return;
    memset(&c, 0, sizeof c);
    c.len = len;
    c.sid = sid;
    c.status = status;
    if (!l->pend && spmd__lane_push(f, l, magic, tag, &c, sizeof c)) return;
    p = (spmd__lane_pend *)spmd__alloc(&f->alloc, sizeof *p);
    if (!p) { /* the peer would wait for it forever */
        spmd__lane_break(f, l, "out of memory for a control record");
        return;
    }
    p->next = NULL;
    p->magic = magic;
    p->tag = tag;
    p->c = c;
    if (l->pend_tail) l->pend_tail->next = p;
    else l->pend = p;
    l->pend_tail = p;
}

/* Append a large message to a lane's list of messages to stream or to
   come; NULL when out of memory. */
static spmd__lane_xfer *spmd__lane_xfer_add(spmd__fab *f, spmd__lane_xfer **head, spmd__lane_xfer **tail,
                                            spmd__fab_op *op, uint64_t sid, size_t len) {
    spmd__lane_xfer *x = (spmd__lane_xfer *)spmd__alloc(&f->alloc, sizeof *x);
    if (!x) return NULL;
    memset(x, 0, sizeof *x);
    x->op = op;
    x->sid = sid;
    x->len = len;
    if (*tail) (*tail)->next = x;
    else *head = x;
    *tail = x;
    if (op) {
        op->lane = 4;
        op->xfer = x;
    }
    return x;
}

/* The first of a list is finished with: unlink and free it. */
static void spmd__lane_xfer_pop(spmd__fab *f, spmd__lane_xfer **head, spmd__lane_xfer **tail) {
    spmd__lane_xfer *x = *head;
    *head = x->next;
    if (!*head) *tail = NULL;
    spmd__free(&f->alloc, x);
}

/* A lane op moved all its bytes. */
static void spmd__lane_complete(spmd__fab *f, spmd__fab_op *op, size_t len) {
    op->lane = 1;
    op->xfer = NULL;
    op->received = op->kind == SPMD__FOP_RECV ? len : 0;
    op->posted = op->done = op->nseg;
    spmd__fab_settle(f, op);
}

/* Take a lane op that failed off wherever it waits: its table or wait
   list; an announced send takes its announcement back; a large message
   under way leaves its place in the lists to the ABORT it owes (a send)
   or to the pieces that still come and are dropped (a receive). */
static void spmd__lane_forget(spmd__fab *f, spmd__fab_op *op) {
    spmd__lane *l = f->lane_of && f->lane_of[op->peer] >= 0 ? &f->lanes[f->lane_of[op->peer]] : NULL;
    int was = op->lane;
    if (was < 2 || was == 5 || !l) return;
    op->lane = 1;
    if (was == 3) {
        spmd__lane_ctl_send(f, l, SPMD__LANE_REVOKE, op->tag, op->len, op->sid, 0);
    } else if (was == 4) {
        op->xfer->op = NULL;
        op->xfer->why = op->status;
        op->xfer = NULL;
    } else if (op->kind == SPMD__FOP_RECV) {
        spmd__lane_tab_take(&f->lpost, op->peer, op->tag, &op->lnode);
    } else {
        spmd__lane_node *c, *prev = NULL;
        for (c = l->wait; c && c != &op->lnode; prev = c, c = c->next) {}
        if (!c) return;
        if (prev) prev->next = c->next;
        else l->wait = c->next;
        if (l->wait_tail == c) l->wait_tail = prev;
    }
}

/* Copy a record into our ring in the peer's segment; 0 when it has no room. */
static int spmd__lane_push(spmd__fab *f, spmd__lane *l, uint32_t magic, uint64_t tag, const void *buf, size_t len) {
    uint64_t cap = f->lane_cap, h = l->out_head, at = h & (cap - 1);
    uint64_t need = (sizeof(spmd__lane_rec) + len + SPMD__LINE - 1) & ~(uint64_t)(SPMD__LINE - 1);
    uint64_t skip = cap - at < need ? cap - at : 0;
    spmd__lane_rec *r;
    if (h + skip + need - l->out_tail > cap) {
        l->out_tail = SPMD__LD_ACQ(&l->out->tail);
        if (h + skip + need - l->out_tail > cap) return 0;
    }
    if (skip) {
        r = (spmd__lane_rec *)(void *)(l->out_data + at);
        r->tag = 0;
        r->len = 0;
        r->magic = SPMD__LANE_SKIP;
        SPMD__ST_REL(&r->stamp, h ^ l->out_nonce);
        h += skip;
        at = 0;
    }
    r = (spmd__lane_rec *)(void *)(l->out_data + at);
    r->tag = tag;
    r->len = (uint32_t)len;
    r->magic = magic;
    if (len) memcpy(r + 1, buf, len);
    SPMD__ST_REL(&r->stamp, h ^ l->out_nonce);
    l->out_head = h + need;
    return 1;
}

/* Put a send on the ring: a small message whole (the op is done), a large
   one's announcement (lane 3: it waits for the answer). 0: no room. */
static int spmd__lane_send(spmd__fab *f, spmd__lane *l, spmd__fab_op *op) {
    spmd__lane_ctl c;
    if (op->len <= f->lane_max) {
        if (!spmd__lane_push(f, l, SPMD__LANE_REC, op->tag, op->buf, op->len)) return 0;
        op->lane = 1;
        op->posted = op->done = 1;
        return 1;
    }
    memset(&c, 0, sizeof c);
    c.len = op->len;
    c.sid = l->next_sid + 1;
    if (!spmd__lane_push(f, l, SPMD__LANE_RTS, op->tag, &c, sizeof c)) return 0;
    op->sid = ++l->next_sid;
    op->lane = 3;
    return 1;
}

/* A message for a receive posted on the lane: copy it, end the op. */
static void spmd__lane_deliver(spmd__fab *f, spmd__fab_op *op, const void *data, size_t len) {
    op->lane = 1;
    if (len > op->len || (len < op->len && !op->upto)) {
        char what[160];
        spmd__fab_describe(op, what, sizeof what);
        spmd__fab_op_fail(f, op, SPMD_ERR_SIZE, "%s: the message carried %zu bytes, expected %s%zu (both sides must "
                          "post the same length)", what, len, op->upto ? "at most " : "", op->len);
        return;
    }
    if (len) memcpy(op->buf, data, len);
    op->received = len;
    op->posted = op->done = 1;
    spmd__fab_settle(f, op);
}

/* An announced large message (len bytes, number sid) meets its receive:
   answer that it may come, or why not. */
static void spmd__lane_accept(spmd__fab *f, spmd__lane *l, spmd__fab_op *op, size_t len, uint64_t sid) {
    op->lane = 1;
    if (len != op->len) {
        char what[160];
        spmd__fab_describe(op, what, sizeof what);
        spmd__lane_ctl_send(f, l, SPMD__LANE_CTS, 0, op->len, sid, 1);
        spmd__fab_op_fail(f, op, SPMD_ERR_SIZE, "%s: the message carries %zu bytes, expected %s%zu (both sides must "
                          "post the same length)", what, len, op->upto ? "at most " : "", op->len);
        return;
    }
    if (!spmd__lane_xfer_add(f, &l->rx, &l->rx_tail, op, sid, len)) {
        spmd__lane_ctl_send(f, l, SPMD__LANE_CTS, 0, op->len, sid, 2);
        spmd__fab_op_fail(f, op, SPMD_ERR_NOMEM, "receive from process %d: out of memory", op->peer);
        return;
    }
    spmd__lane_ctl_send(f, l, SPMD__LANE_CTS, 0, len, sid, 0);
}

/* A block for an unexpected message of body bytes: a kept one when it is small. */
static spmd__lane_msg *spmd__lane_msg_get(spmd__fab *f, size_t body) {
    spmd__lane_msg *m = f->lspare;
    if (body > SPMD__LANE_SPARE) {
        m = (spmd__lane_msg *)spmd__alloc(&f->alloc, sizeof *m + body);
        if (m) m->spare = 0;
        return m;
    }
    if (m) {
        f->lspare = (spmd__lane_msg *)(void *)m->node.next;
        f->nlspare--;
        return m;
    }
    m = (spmd__lane_msg *)spmd__alloc(&f->alloc, sizeof *m + SPMD__LANE_SPARE);
    if (m) m->spare = 1;
    return m;
}

/* The block of a message taken: kept for the next small one, or freed. */
static void spmd__lane_msg_put(spmd__fab *f, spmd__lane_msg *m) {
    if (!m->spare || f->nlspare >= SPMD__LANE_NSPARE) {
        spmd__free(&f->alloc, m);
        return;
    }
    m->node.next = f->lspare ? &f->lspare->node : NULL;
    f->lspare = m;
    f->nlspare++;
}

/* A receive meets the first message (or announcement) of its peer and tag
   that came before it, if any: 1 when it took one. */
static int spmd__lane_take_unex(spmd__fab *f, spmd__lane *l, spmd__fab_op *op) {
    spmd__lane_node *n = spmd__lane_tab_take(&f->lunex, op->peer, op->tag, NULL);
    spmd__lane_msg *m = (spmd__lane_msg *)(void *)n;
    if (!n) return 0;
    if (m->sid) spmd__lane_accept(f, l, op, m->len, m->sid);
    else spmd__lane_deliver(f, op, m + 1, m->len);
    spmd__lane_msg_put(f, m);
    return 1;
}

/* The answer to our announcement sid: stream it, or fail the send. An
   answer to a send that failed meanwhile gets an ABORT (the receiver
   waits for pieces). */
static void spmd__lane_answered(spmd__fab *f, spmd__lane *l, const spmd__lane_ctl *c) {
    spmd__fab_op *op;
    for (op = f->head; op; op = op->next)
        if (op->lane == 3 && op->peer == l->peer && op->sid == c->sid) break;
    if (!op) {
        spmd__lane_xfer *x = c->status ? NULL : spmd__lane_xfer_add(f, &l->tx, &l->tx_tail, NULL, c->sid, 0);
        if (x) x->why = SPMD_ERR_STATE;
        else if (!c->status) spmd__lane_break(f, l, "out of memory for an abort");
        return;
    }
    op->lane = 1;
    if (c->status != 0) {
        char what[160];
        spmd__fab_describe(op, what, sizeof what);
        if (c->status == 1)
            spmd__fab_op_fail(f, op, SPMD_ERR_SIZE, "%s: the receiver posted %llu bytes (both sides must post the "
                              "same length)", what, (unsigned long long)c->len);
        else
            spmd__fab_op_fail(f, op, SPMD_ERR_NOMEM, "%s: the receiver ran out of memory", what);
        return;
    }
    if (!spmd__lane_xfer_add(f, &l->tx, &l->tx_tail, op, op->sid, op->len)) {
        spmd__fab_op_fail(f, op, SPMD_ERR_NOMEM, "send to process %d: out of memory", op->peer);
        spmd__lane_break(f, l, "out of memory for a large send"); /* the receiver waits for its pieces */
    }
}

/* REVOKE of announcement sid with this tag: drop it if still unmatched. */
static void spmd__lane_revoked(spmd__fab *f, spmd__lane *l, uint64_t tag, uint64_t sid) {
    spmd__lane_node *c;
    if (!f->lunex.b) return;
    for (c = f->lunex.b[spmd__lane_hash(l->peer, tag) & f->lunex.mask].head; c; c = c->next) {
        spmd__lane_msg *m = (spmd__lane_msg *)(void *)c;
        if (c->peer != l->peer || c->tag != tag || m->sid != sid) continue;
        spmd__lane_tab_take(&f->lunex, l->peer, tag, c);
        spmd__lane_msg_put(f, m);
        return;
    }
}

/* The peer's ring holds something we cannot read: fail what waits on it. */
static void spmd__lane_break(spmd__fab *f, spmd__lane *l, const char *why) {
    spmd__fab_op *op, *nx;
    if (l->broken) return;
    l->broken = 1;
    spmd__boot_log(f->boot, SPMD_LOG_ERROR, "shared-memory lane from process %d: %s; its messages are lost", l->peer,
                   why);
    for (op = f->head; op; op = nx) {
        nx = op->next;
        if (op->lane && op->peer == l->peer && op->status == SPMD_OK)
            spmd__fab_op_fail(f, op, SPMD_ERR_SYSTEM, "the shared-memory lane with process %d broke: %s", l->peer, why);
    }
}

/* Read what the peer wrote on the ring: each message goes to its posted
   receive, or waits for one; announcements likewise; answers and
   revocations are acted on. */
static void spmd__lane_drain(spmd__fab *f, spmd__lane *l) {
    uint64_t cap = f->lane_cap, t = l->in_tail, end = t + cap; /* at most one ring's worth per call */
    const char *bad = NULL;
    if (l->broken) return;
    while (t < end && !l->broken) {
        uint64_t at = t & (cap - 1), need, tag;
        spmd__lane_rec *r = (spmd__lane_rec *)(void *)(l->in_data + at);
        uint32_t len, magic;
        spmd__lane_node *n;
        spmd__lane_ctl c;
        if (SPMD__LD_ACQ(&r->stamp) != (t ^ l->in_nonce)) break; /* nothing (more) yet */
        tag = r->tag;
        len = r->len; /* read once: the bytes are the peer's */
        magic = r->magic;
        if (magic == SPMD__LANE_SKIP) {
            t += cap - at;
            continue;
        }
        need = (sizeof *r + (uint64_t)len + SPMD__LINE - 1) & ~(uint64_t)(SPMD__LINE - 1);
        if (len > f->lane_max || need > cap - at ||
            (magic != SPMD__LANE_REC && (len != sizeof c || !f->bulk_cap ||
                                         (magic != SPMD__LANE_RTS && magic != SPMD__LANE_CTS &&
                                          magic != SPMD__LANE_REVOKE)))) {
            bad = "a malformed record";
            break;
        }
        if (magic != SPMD__LANE_REC) {
            memcpy(&c, r + 1, sizeof c);
            if (magic == SPMD__LANE_RTS && (c.len <= f->lane_max || c.sid == 0)) {
                bad = "a malformed announcement";
                break;
            }
        }
        if (magic == SPMD__LANE_CTS) {
            spmd__lane_answered(f, l, &c);
        } else if (magic == SPMD__LANE_REVOKE) {
            spmd__lane_revoked(f, l, tag, c.sid);
        } else if ((n = spmd__lane_tab_take(&f->lpost, l->peer, tag, NULL)) != NULL) {
            if (magic == SPMD__LANE_RTS) spmd__lane_accept(f, l, SPMD__LANE_OP(n), (size_t)c.len, c.sid);
            else spmd__lane_deliver(f, SPMD__LANE_OP(n), r + 1, len);
        } else {
            size_t body = magic == SPMD__LANE_RTS ? 0 : len;
            spmd__lane_msg *m = spmd__lane_msg_get(f, body);
            if (!m) break; /* out of memory: leave it in the ring for now */
            m->node.peer = l->peer;
            m->node.tag = tag;
            m->len = magic == SPMD__LANE_RTS ? (size_t)c.len : len;
            m->sid = magic == SPMD__LANE_RTS ? c.sid : 0;
            if (body) memcpy(m + 1, r + 1, body);
            spmd__lane_tab_add(f, &f->lunex, &m->node);
        }
        t += need;
    }
    if (t != l->in_tail) {
        l->in_tail = t;
        SPMD__ST_REL(&l->in->tail, t);
        SPMD__ST_REL(&f->moved, f->moved + 1);
    }
    if (bad) spmd__lane_break(f, l, bad);
}

/* Write pieces of the answered large sends into the peer's bulk ring while
   it has room (an ABORT for one that failed). */
static void spmd__lane_stream(spmd__fab *f, spmd__lane *l) {
    uint64_t cap = f->bulk_cap, h0 = l->bout_head;
    if (l->tx && (l->bout_head - l->bout_tail) * 2 >= cap) l->bout_tail = SPMD__LD_ACQ(&l->bout->tail);
    while (l->tx && !l->broken) {
        spmd__lane_xfer *x = l->tx;
        uint64_t h = l->bout_head, at = h & (cap - 1), room = cap - (h - l->bout_tail), contig = cap - at;
        spmd__lane_piece *pc = (spmd__lane_piece *)(void *)(l->bout_data + at);
        size_t n = x->len - x->done;
        if (room < SPMD__LINE + (n < SPMD__LANE_PIECE ? n : SPMD__LANE_PIECE)) {
            l->bout_tail = SPMD__LD_ACQ(&l->bout->tail);
            room = cap - (h - l->bout_tail);
            if (room < 2 * SPMD__LINE) break;
        }
        memset(pc, 0, sizeof *pc);
        if (contig < 2 * SPMD__LINE) { /* a record and no byte fits before the end */
            pc->magic = SPMD__LANE_PAD;
            l->bout_head = h + contig;
            SPMD__ST_REL(&l->bout->head, l->bout_head);
            continue;
        }
        pc->sid = x->sid;
        pc->off = x->done;
        if (!x->op) {
            pc->magic = SPMD__LANE_ABORT;
            pc->status = (int32_t)x->why;
            l->bout_head = h + SPMD__LINE;
            SPMD__ST_REL(&l->bout->head, l->bout_head);
            spmd__lane_xfer_pop(f, &l->tx, &l->tx_tail);
            continue;
        }
        if (n > SPMD__LANE_PIECE) n = SPMD__LANE_PIECE;
        if (n > room - SPMD__LINE) n = (size_t)(room - SPMD__LINE);
        if (n > contig - SPMD__LINE) n = (size_t)(contig - SPMD__LINE);
        memcpy((unsigned char *)pc + SPMD__LINE, x->op->buf + x->done, n);
        pc->len = (uint32_t)n;
        pc->magic = SPMD__LANE_PIECE_REC;
        l->bout_head = h + SPMD__LINE + ((n + SPMD__LINE - 1) & ~(size_t)(SPMD__LINE - 1));
        SPMD__ST_REL(&l->bout->head, l->bout_head);
        x->done += n;
        if (x->done == x->len) {
            spmd__lane_complete(f, x->op, 0);
            spmd__lane_xfer_pop(f, &l->tx, &l->tx_tail);
        }
    }
    if (l->bout_head != h0) SPMD__ST_REL(&f->moved, f->moved + 1);
}

/* Read the pieces in our bulk ring into the receives they belong to. */
static void spmd__lane_bulk_drain(spmd__fab *f, spmd__lane *l) {
    uint64_t cap = f->bulk_cap, t = l->bin_tail, h, end = t + cap;
    const char *bad = NULL;
    if (l->broken) return;
    h = SPMD__LD_ACQ(&l->bin->head);
    while (t != h && t < end) {
        uint64_t at = t & (cap - 1), adv, off;
        const spmd__lane_piece *pc = (const spmd__lane_piece *)(const void *)(l->bin_data + at);
        spmd__lane_xfer *x = l->rx;
        uint32_t len = pc->len, magic = pc->magic; /* read once: the bytes are the peer's */
        int32_t why = pc->status;
        uint64_t sid = pc->sid;
        off = pc->off;
        if (magic == SPMD__LANE_PAD) {
            t += cap - at;
            continue;
        }
        adv = SPMD__LINE + (((uint64_t)len + SPMD__LINE - 1) & ~(uint64_t)(SPMD__LINE - 1));
        if (h - t > cap || adv > h - t || adv > cap - at || !x || sid != x->sid || off != x->done ||
            len > x->len - x->done || (magic != SPMD__LANE_PIECE_REC && magic != SPMD__LANE_ABORT) ||
            (magic == SPMD__LANE_PIECE_REC && len == 0)) {
            bad = "a malformed bulk record";
            break;
        }
        t += adv;
        if (magic == SPMD__LANE_ABORT && x->op && off == 0) {
            /* withdrawn before a byte came: as if never sent; the receive
               waits again, first of its tag, or takes one that came since */
            spmd__fab_op *op = x->op;
            spmd__lane_xfer_pop(f, &l->rx, &l->rx_tail);
            op->xfer = NULL;
            if (!spmd__lane_take_unex(f, l, op)) {
                op->lane = 2;
                spmd__lane_tab_push_front(&f->lpost, &op->lnode);
            }
            continue;
        }
        if (magic == SPMD__LANE_ABORT) {
            if (x->op) {
                char what[160];
                spmd_status s = why > (int32_t)SPMD_OK && why < (int32_t)SPMD_STATUS_COUNT ? (spmd_status)why
                                                                                             : SPMD_ERR_SYSTEM;
                spmd__fab_describe(x->op, what, sizeof what);
                x->op->xfer = NULL;
                x->op->lane = 1;
                spmd__fab_op_fail(f, x->op, s, "%s: process %d gave the message up after %zu bytes (%s)", what,
                                  l->peer, x->done, spmd_status_name(s));
            }
            spmd__lane_xfer_pop(f, &l->rx, &l->rx_tail);
            continue;
        }
        if (x->op) memcpy(x->op->buf + off, (const unsigned char *)pc + SPMD__LINE, len);
        x->done += len;
        if (x->done == x->len) {
            if (x->op) spmd__lane_complete(f, x->op, x->len);
            spmd__lane_xfer_pop(f, &l->rx, &l->rx_tail);
        }
    }
    if (t != l->bin_tail) {
        l->bin_tail = t;
        SPMD__ST_REL(&l->bin->tail, t);
        SPMD__ST_REL(&f->moved, f->moved + 1);
    }
    if (bad) spmd__lane_break(f, l, bad);
}

/* Every lane: records and sends that waited for room, what came in, then
   the bulk rings. Lock held. */
static void spmd__lane_progress(spmd__fab *f) {
    int i;
    for (i = 0; i < f->nlanes; i++) {
        spmd__lane *l = &f->lanes[i];
        if (l->broken) continue;
        while (l->pend) {
            spmd__lane_pend *p = l->pend;
            if (!spmd__lane_push(f, l, p->magic, p->tag, &p->c, sizeof p->c)) break;
            l->pend = p->next;
            if (!l->pend) l->pend_tail = NULL;
            spmd__free(&f->alloc, p);
        }
        while (l->wait) {
            spmd__fab_op *op = SPMD__LANE_OP(l->wait);
            if (!spmd__lane_send(f, l, op)) break;
            l->wait = l->wait->next;
            if (!l->wait) l->wait_tail = NULL;
            spmd__fab_settle(f, op); /* a small message is done; an announced one waits for its answer */
        }
        spmd__lane_drain(f, l);
        if (!f->bulk_cap) continue;
        spmd__lane_stream(f, l);
        spmd__lane_bulk_drain(f, l);
    }
}

/* Post an op on the lane (its peer has one; a receive of up to n bytes
   takes n <= f->lane_max). Lock held; the op is zeroed and filled in, not
   yet active. */
static spmd_status spmd__lane_post(spmd__fab *f, spmd__fab_op *op) {
    spmd__lane *l = &f->lanes[f->lane_of[op->peer]];
    if (l->broken)
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "%s process %d: the shared-memory lane with it broke",
                              spmd__fab_kind(op), op->peer);
    if (op->kind == SPMD__FOP_RECV && op->upto && op->len > f->lane_max)
        return spmd__fab_fail(f, SPMD_ERR_SIZE, "receive of up to %zu bytes from process %d: at most %zu on the "
                              "shared-memory lane (SPMD_SHM_LANE=0 lifts this)", op->len, op->peer, f->lane_max);
    op->lane = 1;
    SPMD__ST_REL(&op->state, SPMD__FOP_ACTIVE);
    op->lnode.peer = op->peer;
    op->lnode.tag = op->tag;
    if (op->kind == SPMD__FOP_SEND) {
        if (l->wait || !spmd__lane_send(f, l, op)) { /* the ring is full: behind the others, in order */
            op->lnode.next = NULL;
            if (l->wait_tail) l->wait_tail->next = &op->lnode;
            else l->wait = &op->lnode;
            l->wait_tail = &op->lnode;
            op->lane = 2;
        } else if (op->lane == 1) { /* done at once, like fi_tinject */
            SPMD__ST_REL(&op->state, SPMD__FOP_DONE);
            return SPMD_OK;
        }
    } else if (spmd__lane_take_unex(f, l, op)) {
        if (op->state != SPMD__FOP_ACTIVE) return SPMD_OK;
    } else {
        spmd__lane_tab_add(f, &f->lpost, &op->lnode);
        op->lane = 2;
    }
    op->next = f->head; /* listed: deadlines and lost peers */
    if (f->head) f->head->prev = op;
    f->head = op;
    return SPMD_OK;
}

#if SPMD__HAS_LANE
/* What makes two processes able to share a segment: the same kernel boot,
   host name, /dev/shm and user. */
static size_t spmd__lane_host_id(char *out, size_t n) {
    char boot[64] = "", host[256] = "";
    struct stat st;
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");
    size_t k;
    if (!fp) return 0;
    if (!fgets(boot, sizeof boot, fp)) boot[0] = '\0';
    fclose(fp);
    k = strcspn(boot, "\n");
    boot[k] = '\0';
    spmd__host_name(host, sizeof host);
    if (k == 0 || !host[0]) return 0;
    if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    snprintf(out, n, "%s %s %llu:%llu %u", boot, host, (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
             (unsigned)geteuid());
    return strlen(out);
}

static uint64_t spmd__lane_key(const spmd__boot *b) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < b->keylen; i++) h = (h ^ (unsigned char)b->key[i]) * 0x100000001b3ull;
    return h;
}

static size_t spmd__lane_seg_size(size_t nrings, size_t cap, size_t bulk) {
    return sizeof(spmd__lane_seg) + nrings * (sizeof(spmd__lane_ring) + cap) +
           (bulk ? nrings * (sizeof(spmd__lane_bulk) + bulk) : 0);
}

/* Ring i of a segment, and its bulk ring. */
static spmd__lane_ring *spmd__lane_ring_at(void *seg, size_t i, size_t cap) {
    return (spmd__lane_ring *)(void *)((unsigned char *)seg + sizeof(spmd__lane_seg) + i * (sizeof(spmd__lane_ring) + cap));
}

static spmd__lane_bulk *spmd__lane_bulk_at(void *seg, size_t nrings, size_t cap, size_t i, size_t bulk) {
    return (spmd__lane_bulk *)(void *)((unsigned char *)spmd__lane_ring_at(seg, nrings, cap) +
                                       i * (sizeof(spmd__lane_bulk) + bulk));
}

/* Is the segment at p (its size as nrings, cap and bulk say, mapped) what
   process `owner` of this job (nprocs processes, key's hash) made for
   rings of cap bytes, with ring ri written by process `me` and untouched
   so far? The header is another process's bytes: nothing else of it is
   trusted, and only its nonce is read after (odd when we made it). */
static int spmd__lane_seg_ok(const void *p, int owner, int nprocs, int me, uint64_t key, size_t nrings, size_t cap,
                             size_t bulk, size_t ri) {
    const spmd__lane_seg *s = (const spmd__lane_seg *)p;
    const spmd__lane_ring *r;
    if (ri >= nrings) return 0;
    r = spmd__lane_ring_at((void *)(uintptr_t)p, ri, cap);
    return s->magic == SPMD__LANE_MAGIC && s->version == SPMD__LANE_VERSION &&
           s->owner == (uint32_t)owner && s->nprocs == (uint32_t)nprocs && s->nrings == nrings && s->cap == cap &&
           s->size == spmd__lane_seg_size(nrings, cap, bulk) && s->bulk == bulk && s->key == key &&
           (s->nonce & 1u) && r->producer == (uint32_t)me && r->magic == SPMD__LANE_RING_MAGIC && r->tail == 0 &&
           (!bulk || spmd__lane_bulk_at((void *)(uintptr_t)p, nrings, cap, ri, bulk)->tail == 0);
}

/* A segment's name as another process published it: one we would make
   (SPMD__LANE_PREFIX, then digits, a-f and '-'), so that no path of the
   peer's choosing is opened; copied into out (n bytes) with its NUL. */
static int spmd__lane_name_ok(const unsigned char *nm, size_t nl, char *out, size_t n) {
    size_t k, pl = strlen(SPMD__LANE_PREFIX);
    if (nl <= pl || nl >= n || memcmp(nm, SPMD__LANE_PREFIX, pl) != 0) return 0;
    for (k = pl; k < nl; k++)
        if (!((nm[k] >= '0' && nm[k] <= '9') || (nm[k] >= 'a' && nm[k] <= 'f') || nm[k] == '-')) return 0;
    memcpy(out, nm, nl);
    out[nl] = '\0';
    return 1;
}

/* Map process `owner`'s segment `name` (already checked to be ours in
   form) and check that it is what that process of this job made for
   nrings rings of cap bytes, with ring `ri` ours. NULL if not. */
static void *spmd__lane_map(spmd__fab *f, const char *name, int owner, size_t nrings, size_t cap, size_t bulk,
                            size_t ri) {
    char path[96];
    size_t size = spmd__lane_seg_size(nrings, cap, bulk);
    struct stat st;
    void *p;
    int fd;
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
        (uint64_t)st.st_size != (uint64_t)size) {
        close(fd);
        return NULL;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    if (!spmd__lane_seg_ok(p, owner, f->nprocs, f->rank, spmd__lane_key(f->boot), nrings, cap, bulk, ri)) {
        munmap(p, size);
        return NULL;
    }
    return p;
}

/* The processes of this host, from spmd__lane_open's first allgather:
   process i's blob is blobs + i * cap, lens[i] bytes (another process's:
   "1" or "0", whether it wants the lane, then its host's identity, if it
   has one); ours is mine, n bytes ("1" and ours: the bootstrap put it in
   our own place as it is). A process is local when its blob is ours byte
   for byte (same identity, and it wants the lane too). Their ids, increasing, into loc (nprocs of room), our
   place among them into *me; returns how many. */
static size_t spmd__lane_locals(const unsigned char *blobs, size_t cap, const size_t *lens, int nprocs, int rank,
                                const unsigned char *mine, size_t n, int *loc, size_t *me) {
    size_t i, nloc = 0;
    for (i = 0; i < (size_t)nprocs; i++)
        if (lens[i] == n && memcmp(blobs + i * cap, mine, n) == 0) {
            if (i == (size_t)rank) *me = nloc;
            loc[nloc++] = (int)i;
        }
    return nloc;
}

/* From the same blobs, which processes are on another host (far[i] = 1):
   those whose identity differs from ours (mine, n bytes, the first being
   "1" or "0"), every other one when we have none (n = 1). */
static void spmd__lane_far(const unsigned char *blobs, size_t cap, const size_t *lens, int nprocs, int rank,
                           const unsigned char *mine, size_t n, unsigned char *far) {
    size_t i;
    for (i = 0; i < (size_t)nprocs; i++)
        far[i] = i != (size_t)rank && (n < 2 || lens[i] != n || memcmp(blobs + i * cap + 1, mine + 1, n - 1) != 0);
}

/* spmd__lane_open's step 2: make this process's segment, one ring (and
   bulk ring) per other local process, under a random name in /dev/shm
   (name, path; nonce: what its stamps carry). Without one (no space, no
   /dev/shm) it logs why and leaves name empty: libfabric only. */
SPMD__SETUP static void spmd__lane_seg_make(spmd__fab *f, size_t nloc, size_t me, const int *loc, size_t ring_cap,
                                            size_t bulk, char name[64], char path[96], uint64_t *nonce_out) {
    spmd__boot *b = f->boot;
    uint64_t nonce = 0;
    int fd = -1, eno = 0;
    size_t i, j;
    size_t size = spmd__lane_seg_size(nloc - 1, ring_cap, bulk);
    int tries;
    for (tries = 0; tries < 8 && fd < 0; tries++) {
        uint64_t r[2];
        int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        r[0] = spmd__now_ns() ^ ((uint64_t)getpid() << 32);
        r[1] = r[0] * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&r;
        if (rfd >= 0) {
            uint64_t x[2];
            if (read(rfd, x, sizeof x) == (ssize_t)sizeof x) { r[0] ^= x[0]; r[1] ^= x[1]; }
            close(rfd);
        }
        snprintf(name, 64, SPMD__LANE_PREFIX "%d-%016llx", (int)getpid(), (unsigned long long)r[0]);
        nonce = r[1] | 1u; /* not derived from the name, which anyone may list; odd: zeroed memory is no stamp */
        snprintf(path, 96, "/dev/shm/%s", name);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        eno = errno;
        if (fd < 0 && eno != EEXIST) break;
    }
    /* the space now (posix_fallocate), not a SIGBUS at the first write to a full /dev/shm */
    if (fd >= 0 && (eno = posix_fallocate(fd, 0, (off_t)size)) == 0) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        eno = errno;
        if (p != MAP_FAILED) {
            spmd__lane_seg *s = (spmd__lane_seg *)p;
            f->lane_seg = p;
            f->lane_seg_size = size;
            for (i = 0, j = 0; i < nloc; i++) {
                spmd__lane_ring *r;
                if (i == me) continue;
                r = spmd__lane_ring_at(p, j++, ring_cap);
                r->producer = (uint32_t)loc[i];
                r->magic = SPMD__LANE_RING_MAGIC;
            }
            s->version = SPMD__LANE_VERSION;
            s->owner = (uint32_t)f->rank;
            s->nprocs = (uint32_t)f->nprocs;
            s->nrings = (uint32_t)(nloc - 1);
            s->cap = ring_cap;
            s->size = size;
            s->bulk = bulk;
            s->key = spmd__lane_key(b);
            s->nonce = nonce;
            SPMD__ST_REL(&s->magic, SPMD__LANE_MAGIC);
        }
    }
    if (fd >= 0) close(fd);
    if (!f->lane_seg) {
        spmd__boot_log(b, SPMD_LOG_WARN, "fabric: no shared-memory lane (segment %s: %s)", path, strerror(eno));
        if (fd >= 0) unlink(path);
        path[0] = name[0] = '\0';
    }
    *nonce_out = nonce;
}

/* Step 3's end: a lane to each local process whose segment we mapped and
   that mapped ours (its bits in blobs, nb bytes each). */
SPMD__SETUP static void spmd__lane_wire(spmd__fab *f, size_t nloc, size_t me, const int *loc, void **maps,
                                        const unsigned char *blobs, const size_t *lens, size_t cap3, size_t nb,
                                        size_t ring_cap, size_t bulk, uint64_t nonce) {
    size_t i;
    for (i = 0; i < nloc; i++) {
        const unsigned char *theirs = blobs + (size_t)loc[i] * cap3;
        spmd__lane *l;
        size_t ri = i < me ? i : i - 1, ro = me < i ? me : me - 1;
        if (i == me || !maps[i]) continue;
        if (lens[loc[i]] != nb || !(theirs[me / 8] >> (me % 8) & 1u)) {
            munmap(maps[i], spmd__lane_seg_size(nloc - 1, ring_cap, bulk));
            maps[i] = NULL;
            continue;
        }
        l = &f->lanes[f->nlanes];
        l->peer = loc[i];
        l->map = maps[i];
        l->map_size = spmd__lane_seg_size(nloc - 1, ring_cap, bulk);
        maps[i] = NULL;
        l->in = spmd__lane_ring_at(f->lane_seg, ri, ring_cap);
        l->out = spmd__lane_ring_at(l->map, ro, ring_cap);
        l->in_data = (unsigned char *)(l->in + 1);
        l->out_data = (unsigned char *)(l->out + 1);
        if (bulk) {
            l->bin = spmd__lane_bulk_at(f->lane_seg, nloc - 1, ring_cap, ri, bulk);
            l->bout = spmd__lane_bulk_at(l->map, nloc - 1, ring_cap, ro, bulk);
            l->bin_data = (unsigned char *)(l->bin + 1);
            l->bout_data = (unsigned char *)(l->bout + 1);
        }
        l->in_nonce = nonce;
        l->out_nonce = ((const spmd__lane_seg *)l->map)->nonce;
        f->lane_of[loc[i]] = f->nlanes++;
    }
}

/* The lanes' tables and spare messages, once there is a lane. */
SPMD__SETUP static spmd_status spmd__lane_ready(spmd__fab *f, size_t ring_cap, size_t bulk) {
    spmd__boot *b = f->boot;
    f->lane_cap = ring_cap;
    f->bulk_cap = bulk;
    f->lane_max = f->seg < SPMD__LANE_MAX ? f->seg : SPMD__LANE_MAX;
    f->lpost.b = (spmd__lane_bucket *)spmd__alloc(&f->alloc, 256 * sizeof *f->lpost.b);
    f->lunex.b = (spmd__lane_bucket *)spmd__alloc(&f->alloc, 256 * sizeof *f->lunex.b);
    f->lpost.mask = f->lunex.mask = 255;
    if (!f->lpost.b || !f->lunex.b) return spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory");
    while (f->nlspare < SPMD__LANE_NSPARE) { /* (without memory for them, spmd__lane_msg_get makes them later) */
        spmd__lane_msg *m = (spmd__lane_msg *)spmd__alloc(&f->alloc, sizeof *m + SPMD__LANE_SPARE);
        if (!m) break;
        m->spare = 1;
        spmd__lane_msg_put(f, m);
    }
    if (bulk)
        spmd__boot_log(b, SPMD_LOG_INFO, "fabric: shared-memory lane to %d process%s of this host (rings of %zu "
                       "KiB for messages up to %zu bytes, bulk rings of %zu KiB for larger ones)", f->nlanes,
                       f->nlanes == 1 ? "" : "es", ring_cap / 1024, f->lane_max, bulk / 1024);
    else
        spmd__boot_log(b, SPMD_LOG_INFO, "fabric: shared-memory lane to %d process%s of this host (rings of %zu "
                       "KiB, messages up to %zu bytes; larger ones through libfabric)", f->nlanes,
                       f->nlanes == 1 ? "" : "es", ring_cap / 1024, f->lane_max);
    return SPMD_OK;
}

/* Set the lane up with the processes of this host (collective: every
   process calls it, with or without the lane, so the bootstrap stays in
   step). want: 0 none, 1 with bulk rings, 2 small messages only (a pair
   whose wishes differ has no lane: the segments' shapes differ). Three
   allgathers: who is where and wants it; the segment names; whose
   segments each mapped (after which they are unlinked). A process that
   cannot take part publishes nothing and uses libfabric only; only a
   failed allgather fails the open. */
SPMD__SETUP static spmd_status spmd__lane_open(spmd__fab *f, int want, uint64_t deadline) {
    spmd__boot *b = f->boot;
    size_t cap = SPMD__BOOT_BLOB_MAX, *lens = NULL, idlen = 0, nloc = 0, me = 0, i, nb, cap3, ring_cap = 65536;
    size_t bulk = 0;
    unsigned char *blobs = NULL, *ok = NULL, mine[SPMD__BOOT_BLOB_MAX];
    int *loc = NULL, any = 0;
    uint64_t nonce = 0;
    char name[64] = "", path[96] = "";
    void **maps = NULL;
    spmd_status st = SPMD_OK;
    if (f->nprocs < 2) return SPMD_OK;
    lens = (size_t *)spmd__alloc(&f->alloc, (size_t)f->nprocs * sizeof *lens);
    blobs = (unsigned char *)spmd__alloc(&f->alloc, (size_t)f->nprocs * cap);
    loc = (int *)spmd__alloc(&f->alloc, (size_t)f->nprocs * sizeof *loc);
    f->lane_of = (int *)spmd__alloc(&f->alloc, (size_t)f->nprocs * sizeof *f->lane_of);
    f->far = (unsigned char *)spmd__alloc(&f->alloc, (size_t)f->nprocs);
    if (!lens || !blobs || !loc || !f->lane_of || !f->far) {
        st = spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory");
        goto done;
    }
    /* 1: "1" (it wants the lane) or "0", and the host's identity */
    idlen = spmd__lane_host_id((char *)mine + 1, sizeof mine - 1);
    mine[0] = want && idlen ? '1' : '0';
    st = spmd__boot_allgather(b, mine, 1 + idlen, blobs, cap, lens, deadline);
    if (st != SPMD_OK) { st = spmd__fab_fail(f, st, "fabric: lane: %s", b->err); goto done; }
    spmd__lane_far(blobs, cap, lens, f->nprocs, f->rank, mine, 1 + idlen, f->far);
    if (want && idlen) nloc = spmd__lane_locals(blobs, cap, lens, f->nprocs, f->rank, mine, 1 + idlen, loc, &me);
    for (i = 0; i < (size_t)f->nprocs; i++) f->lane_of[i] = -1;
    /* rings of 64 KiB, less when the host has many processes (2 MiB per
       process at most), never less than 4 of the largest records */
    while (nloc > 1 && ring_cap > 4 * SPMD__LANE_MAX && (nloc - 1) * ring_cap > ((size_t)2 << 20)) ring_cap /= 2;
    /* bulk rings of 1 MiB, less when the host has many processes (16 MiB
       per process at most), never less than 4 pieces */
    if (want == 1) bulk = (size_t)1 << 20;
    while (nloc > 1 && bulk > 4 * (SPMD__LANE_PIECE + SPMD__LINE) && (nloc - 1) * bulk > ((size_t)16 << 20)) bulk /= 2;
    /* 2: our segment's name, or nothing */
    if (nloc > 1) spmd__lane_seg_make(f, nloc, me, loc, ring_cap, bulk, name, path, &nonce);
    st = spmd__boot_allgather(b, name, strlen(name), blobs, cap, lens, deadline);
    if (st != SPMD_OK) { st = spmd__fab_fail(f, st, "fabric: lane: %s", b->err); goto done; }
    for (i = 0; i < (size_t)f->nprocs; i++) any |= lens[i] != 0;
    if (!any) goto done; /* nobody made one: everybody knows, and stops here */
    /* 3: per process of the host, whether we mapped its segment (ours: made) */
    nb = (nloc + 7) / 8;
    cap3 = ((size_t)f->nprocs + 7) / 8;
    ok = (unsigned char *)spmd__alloc(&f->alloc, cap3);
    maps = (void **)spmd__alloc(&f->alloc, (nloc ? nloc : 1) * sizeof *maps);
    if (!ok || !maps) { st = spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory"); goto done; }
    if (f->lane_seg) ok[me / 8] |= (unsigned char)(1u << (me % 8));
    for (i = 0; f->lane_seg && i < nloc; i++) {
        char pname[64];
        if (i == me || !spmd__lane_name_ok(blobs + (size_t)loc[i] * cap, lens[loc[i]], pname, sizeof pname)) continue;
        maps[i] = spmd__lane_map(f, pname, loc[i], nloc - 1, ring_cap, bulk, me < i ? me : me - 1);
        if (maps[i]) ok[i / 8] |= (unsigned char)(1u << (i % 8));
    }
    st = spmd__boot_allgather(b, ok, nb, blobs, cap3, lens, deadline);
    if (path[0]) unlink(path); /* everyone who will map it has */
    path[0] = '\0';
    if (st != SPMD_OK) { st = spmd__fab_fail(f, st, "fabric: lane: %s", b->err); goto done; }
    /* a lane where both mapped the other's segment (both sides see the same bits) */
    f->lanes = (spmd__lane *)spmd__alloc(&f->alloc, (nloc ? nloc : 1) * sizeof *f->lanes);
    if (!f->lanes) { st = spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory"); goto done; }
    spmd__lane_wire(f, nloc, me, loc, maps, blobs, lens, cap3, nb, ring_cap, bulk, nonce);
    if (f->nlanes) st = spmd__lane_ready(f, ring_cap, bulk);
done:
    if (path[0]) unlink(path);
    for (i = 0; maps && i < nloc; i++)
        if (maps[i]) munmap(maps[i], spmd__lane_seg_size(nloc - 1, ring_cap, bulk));
    if (!f->nlanes && f->lane_seg) {
        munmap(f->lane_seg, f->lane_seg_size);
        f->lane_seg = NULL;
    }
    spmd__free(&f->alloc, maps);
    spmd__free(&f->alloc, ok);
    spmd__free(&f->alloc, loc);
    spmd__free(&f->alloc, blobs);
    spmd__free(&f->alloc, lens);
    return st;
}
#endif /* SPMD__HAS_LANE */

/* Unmap the lane and free what waits on it (the ops are settled by then). */
static void spmd__lane_close(spmd__fab *f) {
    size_t i;
    int k;
    for (k = 0; k < f->nlanes; k++) {
        spmd__lane *l = &f->lanes[k];
        while (l->tx) spmd__lane_xfer_pop(f, &l->tx, &l->tx_tail);
        while (l->rx) spmd__lane_xfer_pop(f, &l->rx, &l->rx_tail);
        while (l->pend) {
            spmd__lane_pend *p = l->pend;
            l->pend = p->next;
            spmd__free(&f->alloc, p);
        }
    }
    for (i = 0; f->lunex.b && i <= f->lunex.mask; i++) {
        spmd__lane_node *n = f->lunex.b[i].head, *nx;
        for (; n; n = nx) {
            nx = n->next;
            spmd__free(&f->alloc, n);
        }
    }
    while (f->lspare) {
        spmd__lane_msg *m = f->lspare;
        f->lspare = (spmd__lane_msg *)(void *)m->node.next;
        spmd__free(&f->alloc, m);
    }
#if SPMD__HAS_LANE
    for (k = 0; k < f->nlanes; k++) munmap(f->lanes[k].map, f->lanes[k].map_size);
    if (f->lane_seg) munmap(f->lane_seg, f->lane_seg_size);
#else
    (void)k;
#endif
    spmd__free(&f->alloc, f->lunex.b);
    spmd__free(&f->alloc, f->lpost.b);
    spmd__free(&f->alloc, f->lanes);
    spmd__free(&f->alloc, f->lane_of);
    spmd__free(&f->alloc, f->far);
    spmd__free(&f->alloc, f->mach);
    spmd__free(&f->alloc, f->cpeers);
}

/* The fields of an op that every post sets, a lazy one's too (spmd__fab_post_lazy). */
static void spmd__fab_op_set(spmd__fab_op *op, int kind, int peer, uint64_t tag, void *buf, size_t len, int upto) {
    op->prev = op->next = NULL;
    op->kind = kind;
    op->peer = peer;
    op->tag = tag;
    op->buf = (unsigned char *)buf;
    op->len = len;
    op->received = 0;
    op->upto = upto;
    op->wide = 0;
    op->nseg = 1;
    op->posted = op->done = 0;
    op->mr = NULL;
    op->status = SPMD_OK;
}

/* How a message of len bytes to or from peer is cut: the segments' size
   into *seg, how many of them at most in flight into *win; returns how
   many. Both ends compute the same cut; the window is each end's own.
   wide: SPMD__FAB_WINDOW to another host too, for a pipeline whose links
   carry data one way (a bcast's chain), where a piece must be in flight
   whole (16 MiB over 4 emulated hosts x 2 at 1 Gbit/s: 187 ms with 256
   KiB x 8 in flight, 342 with 128 KiB x 8 or 256 KiB x 2). */
static size_t spmd__fab_segs(const spmd__fab *f, int peer, size_t len, int wide, size_t *seg, uint32_t *win) {
    int far = f->far && f->far[peer];
    size_t s = far ? f->xseg : f->seg, w;
    size_t nseg = len <= s ? 1 : (len - 1) / s + 1; /* (no division for the common small message) */
    if (nseg > SPMD__FAB_MAX_SEGS >> f->hi15 && s < f->seg) { /* a very large one: the larger segments */
        s = f->seg;
        nseg = (len - 1) / s + 1;
    }
    w = far && !wide ? f->xflight / s : SPMD__FAB_WINDOW;
    *seg = s;
    *win = (uint32_t)(w < 1 ? 1 : w > SPMD__FAB_WINDOW ? SPMD__FAB_WINDOW : w);
    return nseg;
}

/* Check a post and fill the op in (not yet active). */
static spmd_status spmd__fab_op_init(spmd__fab *f, spmd__fab_op *op, int kind, int peer, uint64_t tag, void *buf,
                                     size_t len, uint64_t deadline_ns, int upto) {
    size_t nseg, seg;
    uint32_t win;
    if (!f || !op || (len && !buf)) return SPMD_ERR_NULL;
    if (op->state == SPMD__FOP_ACTIVE || (op->state == SPMD__FOP_DONE && op->inflight))
        return spmd__fab_fail(f, SPMD_ERR_STATE, "post: the op is still in flight");
    if (peer < 0 || peer >= f->nprocs)
        return spmd__fab_fail(f, SPMD_ERR_ROOT, "post: process %d outside 0..%d", peer, f->nprocs - 1);
    if (tag & SPMD__FAB_TAG_SEG_MASK)
        return spmd__fab_fail(f, SPMD_ERR_INVALID, "post: tag 0x%016llx uses the segment bits",
                              (unsigned long long)tag);
    nseg = spmd__fab_segs(f, peer, len, op->wide, &seg, &win);
    if (nseg > SPMD__FAB_MAX_SEGS >> f->hi15)
        return spmd__fab_fail(f, SPMD_ERR_SIZE, "post: %zu bytes need %zu segments of %zu (at most %u): split the "
                              "transfer", len, nseg, seg, SPMD__FAB_MAX_SEGS >> f->hi15);
    /* every field but the segment slots, which an idle op holds none of
       (busy moves with inflight, zero here; the rest is set per segment):
       clearing the whole op would write ~1 KiB per small message */
    spmd__fab_op_set(op, kind, peer, tag, buf, len, upto && nseg == 1);
    memset(&op->lnode, 0, sizeof op->lnode);
    op->lane = 0;
    op->state = SPMD__FOP_IDLE;
    op->sid = 0;
    op->xfer = NULL;
    op->inflight = 0;
    op->err[0] = '\0';
    op->nseg = (uint32_t)nseg;
    op->seg = seg;
    op->win = win;
    op->lazy = 0;
    op->deadline_ns = deadline_ns ? deadline_ns : spmd__now_ns() + (uint64_t)f->boot->timeout_ms * 1000000u;
    return SPMD_OK;
}

/* A send posted (lock held): the counters (spmd_mesh_counters). */
static void spmd__fab_count(spmd__fab *f, const spmd__fab_op *op, int link) {
    int k = op->what > 0 && op->what < SPMD_COUNT_KINDS ? op->what : 0;
    if (op->kind != SPMD__FOP_SEND) return;
    f->cmsgs[link][k]++;
    f->cbytes[link][k] += op->len;
    if (f->cpeers) /* (a transport made by hand, as the lane's fuzzer does, has none) */
        f->cpeers[(size_t)(link * SPMD_COUNT_KINDS + k) * (size_t)f->cwords + (size_t)op->peer / 64] |=
            1ull << op->peer % 64;
}

/* Post an initialised op (lock held). */
static spmd_status spmd__fab_post_locked(spmd__fab *f, spmd__fab_op *op) {
    spmd_status st;
    int peer = op->peer;
    if (spmd__boot_lost(f->boot, peer))
        return spmd__fab_fail(f, SPMD_ERR_PEER_LOST, "process %d lost (it died or its host is unreachable): no %s it",
                              peer, op->kind == SPMD__FOP_SEND ? "send to" : "receive from");
    if (f->nlanes && f->lane_of[peer] >= 0 &&
        (op->len <= f->lane_max || f->bulk_cap || (op->upto && op->kind == SPMD__FOP_RECV))) {
        if ((st = spmd__lane_post(f, op)) == SPMD_OK) spmd__fab_count(f, op, SPMD_LINK_LANE);
        return st;
    }
    st = spmd__fab_mr_get(f, op->buf, op->len, &op->mr);
    if (st != SPMD_OK) return st;
    spmd__fab_count(f, op, SPMD_LINK_NETWORK);
    SPMD__ST_REL(&op->state, SPMD__FOP_ACTIVE);
    op->next = f->head;
    if (f->head) f->head->prev = op;
    f->head = op;
    spmd__fab_post_more(f, op);
    return SPMD_OK;
}

static spmd_status spmd__fab_post(spmd__fab *f, spmd__fab_op *op, int kind, int peer, uint64_t tag, void *buf,
                                  size_t len, uint64_t deadline_ns, int upto) {
    spmd_status st = spmd__fab_op_init(f, op, kind, peer, tag, buf, len, deadline_ns, upto);
    if (st != SPMD_OK) return st;
    spmd__slock(&f->lock);
    st = spmd__fab_post_locked(f, op);
    spmd__sunlock(&f->lock);
    return st;
}

static SPMD__UNUSED spmd_status spmd__fab_post_send(spmd__fab *f, spmd__fab_op *op, int peer, uint64_t tag,
                                                    const void *buf, size_t len, uint64_t deadline_ns) {
    return spmd__fab_post(f, op, SPMD__FOP_SEND, peer, tag, (void *)(uintptr_t)buf, len, deadline_ns, 0);
}

static SPMD__UNUSED spmd_status spmd__fab_post_recv(spmd__fab *f, spmd__fab_op *op, int peer, uint64_t tag,
                                                    void *buf, size_t len, uint64_t deadline_ns) {
    return spmd__fab_post(f, op, SPMD__FOP_RECV, peer, tag, buf, len, deadline_ns, 0);
}

/* A receive of at most len bytes (one segment at most): op->received says
   how many came. */
static SPMD__UNUSED spmd_status spmd__fab_post_recv_upto(spmd__fab *f, spmd__fab_op *op, int peer, uint64_t tag,
                                                         void *buf, size_t len, uint64_t deadline_ns) {
    return spmd__fab_post(f, op, SPMD__FOP_RECV, peer, tag, buf, len, deadline_ns, 1);
}

static void spmd__fab_seg_done(spmd__fab *f, spmd__fab_seg *sg, size_t len, spmd_status s, const char *why) {
    spmd__fab_op *op = sg->op;
    char what[160];
    size_t off = (size_t)sg->index * op->seg;
    size_t want = op->len - off < op->seg ? op->len - off : op->seg;
    sg->busy = 0;
    op->inflight--;
    f->nfab--;
    if (s == SPMD_OK) {
        op->done++;
        if (op->kind == SPMD__FOP_RECV) {
            op->received += len;
            if (len != want && !(op->upto && len < want)) {
                spmd__fab_describe(op, what, sizeof what);
                spmd__fab_op_fail(f, op, SPMD_ERR_SIZE, "%s: segment %u carried %zu bytes, expected %zu (both sides "
                                  "must post the same length)", what, (unsigned)sg->index, len, want);
                return;
            }
        }
    } else if (op->status == SPMD_OK) {
        spmd__fab_describe(op, what, sizeof what);
        spmd__fab_op_fail(f, op, s, "%s: segment %u: %s", what, (unsigned)sg->index, why);
        return;
    }
    spmd__fab_post_more(f, op);
    spmd__fab_settle(f, op);
}

/* The context the provider handed back, checked before we trust it. */
static spmd__fab_seg *spmd__fab_ctx(spmd__fab *f, void *ctx) {
    spmd__fab_seg *sg = (spmd__fab_seg *)ctx;
    if (!sg || sg->magic != SPMD__FAB_SEG_MAGIC || !sg->busy || !sg->op) {
        spmd__boot_log(f->boot, SPMD_LOG_ERROR, "completion with an unknown context %p ignored", ctx);
        return NULL;
    }
    return sg;
}

/* Read the CQ, then look after lost peers and deadlines. Lock held. */
static spmd_status spmd__fab_progress_locked(spmd__fab *f) {
    struct fi_cq_tagged_entry ent[16];
    spmd_status st = SPMD_OK;
    spmd__fab_op *op, *nx;
    uint64_t now;
    uint32_t poll = ++f->polls;
    int round, i, backlog, got = 0;
    if (f->nlanes) {
        spmd__lane_progress(f);
        /* with nothing of ours at the provider, its CQ is read every 16th
           call only (it still moves what peers send us, which may wait on
           our progress): a read costs more than a lane message */
        if (!f->nfab && !f->fab_recent && !f->backlog && (poll & 15u) != 0) goto checks;
        if (f->fab_recent) f->fab_recent--;
    }
    for (round = 0; round < 64; round++) {
        ssize_t n = fi_cq_read(f->cq, ent, 16);
        if (n > 0) {
            got = 1;
            for (i = 0; i < (int)n; i++) {
                spmd__fab_seg *sg = spmd__fab_ctx(f, ent[i].op_context);
                if (sg) spmd__fab_seg_done(f, sg, ent[i].len, SPMD_OK, NULL);
            }
            continue;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry e;
            char pbuf[256];
            const char *ptxt;
            spmd__fab_seg *sg;
            memset(&e, 0, sizeof e);
            if (fi_cq_readerr(f->cq, &e, 0) < 1) break;
            got = 1;
            sg = spmd__fab_ctx(f, e.op_context);
            if (!sg) continue;
            if (e.err < 0) e.err = -e.err; /* shm (1.17) reports some errors negated, e.g. -FI_ETRUNC */
            if (e.err == FI_ECANCELED) {
                spmd__fab_seg_done(f, sg, 0, SPMD_ERR_STATE, "cancelled");
                continue;
            }
            ptxt = fi_cq_strerror(f->cq, e.prov_errno, e.err_data, pbuf, sizeof pbuf);
            snprintf(pbuf, sizeof pbuf, "%s", ptxt ? ptxt : "");
            {
                char why[400];
                spmd_status s = e.err == FI_ETRUNC ? SPMD_ERR_SIZE
                                : spmd__boot_lost(f->boot, sg->op->peer) || spmd__fab_conn_lost(e.err)
                                    ? SPMD_ERR_PEER_LOST
                                    : SPMD_ERR_SYSTEM;
                if (s == SPMD_ERR_PEER_LOST) /* named as the lost-peer check names it */
                    snprintf(why, sizeof why, "process %d lost (%s; provider: %s)", sg->op->peer, fi_strerror(e.err),
                             pbuf);
                else
                    snprintf(why, sizeof why, "%s%s (provider: %s)", fi_strerror(e.err),
                             e.err == FI_ETRUNC ? ": the sender posted more bytes" : "", pbuf);
                spmd__fab_seg_done(f, sg, 0, s, why);
            }
            continue;
        }
        if (n != -FI_EAGAIN) st = spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_cq_read: %s", fi_strerror((int)-n));
        break;
    }
    if (got) SPMD__ST_REL(&f->moved, f->moved + 1); /* after the ops it ended (spmd__x_progress rescans on it) */
    /* the clock, lost peers and deadlines every 32nd call (a clock read
       costs as much as the rest of a small operation), or when a post was
       refused for lack of room */
checks:
    if ((poll & 31u) != 0 && !f->backlog) return st;
    backlog = f->backlog;
    f->backlog = 0;
    now = spmd__now_ns();
    if (now >= f->next_poll_ns) { /* lost peers: a syscall or two, so every 2 ms at most */
        SPMD__ST_REL(&f->next_poll_ns, now + 2000000u); /* (spmd__fab_news reads it without the lock) */
        spmd__boot_poll(f->boot);
    }
    /* the listed ops (thousands with many devices per process): every
       100 us for deadlines, at once while a peer is lost or a post waits */
    if (!backlog && now < f->next_walk_ns && !(f->boot && SPMD__LD_ACQ(&f->boot->nlost))) return st;
    f->next_walk_ns = now + 100000u;
    for (op = f->head; op; op = nx) {
        nx = op->next;
        if (op->status == SPMD_OK && spmd__boot_lost(f->boot, op->peer)) {
            spmd__fab_op_lost(f, op);
        } else if (op->status == SPMD_OK && op->deadline_ns && now >= op->deadline_ns) {
            char what[160];
            spmd__fab_describe(op, what, sizeof what);
            spmd__fab_op_fail(f, op, SPMD_ERR_TIMEOUT, "%s: process %d did not complete it before the deadline "
                              "(%u of %u segments done)", what, op->peer, (unsigned)op->done, (unsigned)op->nseg);
        } else if (op->status == SPMD_OK && !op->lane) {
            spmd__fab_post_more(f, op);
        }
    }
    return st;
}

static SPMD__UNUSED spmd_status spmd__fab_progress(spmd__fab *f) {
    spmd_status st;
    if (!f) return SPMD_ERR_NULL;
    spmd__slock(&f->lock);
    st = spmd__fab_progress_locked(f);
    spmd__sunlock(&f->lock);
    return st;
}

static SPMD__UNUSED int spmd__fab_op_idle(const spmd__fab_op *op) {
    return op->state != SPMD__FOP_ACTIVE && op->inflight == 0;
}

/* spmd__fab_op_idle for all of n ops the transport may still be
   completing (another thread progresses them), without the lock: an op
   that is not ACTIVE holds nothing (see spmd__fab_settle), and its state
   is read with acquire. */
static SPMD__UNUSED int spmd__fab_ops_idle(spmd__fab *f, const spmd__fab_op *ops, size_t n) {
    size_t i;
    (void)f;
    for (i = 0; i < n && SPMD__LD_ACQ(&ops[i].state) != SPMD__FOP_ACTIVE; i++) {}
    return i == n;
}

/* The op's state without progressing the transport: SPMD_ERR_BUSY while
   it runs, else its status (SPMD_ERR_STATE if never posted). */
static SPMD__UNUSED spmd_status spmd__fab_peek(spmd__fab *f, spmd__fab_op *op) {
    spmd_status st;
    int state = SPMD__LD_ACQ(&op->state);
    if (state == SPMD__FOP_DONE) return op->status; /* final: no lock needed */
    if (state == SPMD__FOP_IDLE) return SPMD_ERR_STATE; /* never posted: only its owner posts it */
    /* running and not failed (a failure stores its status before the op
       ends): no lock either, this is what a waiter sees most */
    if (state == SPMD__FOP_ACTIVE && SPMD__LD_ACQ(&op->status) == SPMD_OK) return SPMD_ERR_BUSY;
    spmd__slock(&f->lock);
    st = op->state == SPMD__FOP_IDLE ? SPMD_ERR_STATE
         : op->status != SPMD_OK     ? op->status
         : op->state == SPMD__FOP_DONE ? SPMD_OK
                                       : SPMD_ERR_BUSY;
    spmd__sunlock(&f->lock);
    return st;
}

/* ---- lazy posts (the quick exchange) ----
   To a peer on the lane, a small message skips the matching: a send goes
   into the ring at once when no send waits before it (else it is posted
   as usual and waits in order), and a receive of at most len bytes is
   posted nowhere (op->lane 5: no table, not listed for deadlines and lost
   peers; its waiter watches those) until its waiter calls spmd__fab_take,
   which takes the message straight from the head of the ring when it is
   the next one there and nothing is unexpected, and otherwise posts the
   receive the usual way (it then matches what came before, in order).
   The same records and tags: the other end cannot tell. Elsewhere (no
   lane, a large message) both are ordinary posts. */
static spmd_status spmd__fab_post_lazy(spmd__fab *f, spmd__fab_op *op, int kind, int peer, uint64_t tag, void *buf,
                                       size_t len) {
    spmd_status st;
    /* the common case sets only the fields these two paths read (an op at
       rest, a small message to a peer on the lane); the rest goes the
       usual way, through spmd__fab_op_init's checks */
    if (peer >= 0 && peer < f->nprocs && f->nlanes && f->lane_of[peer] >= 0 && len <= f->lane_max && (buf || !len) &&
        !(tag & SPMD__FAB_TAG_SEG_MASK) && SPMD__LD_ACQ(&op->state) != SPMD__FOP_ACTIVE && !op->inflight) {
        spmd__lane *l = &f->lanes[f->lane_of[peer]];
        spmd__fab_op_set(op, kind, peer, tag, buf, len, kind == SPMD__FOP_RECV);
        if (kind == SPMD__FOP_RECV) {
            op->lane = 5;
            op->lazy = 1;
            SPMD__ST_REL(&op->state, SPMD__FOP_ACTIVE);
            return SPMD_OK;
        }
        op->lazy = 0;
        spmd__slock(&f->lock);
        if (!l->broken && !l->wait && !spmd__boot_lost(f->boot, peer) &&
            spmd__lane_push(f, l, SPMD__LANE_REC, tag, buf, len)) {
            op->lane = 1;
            op->posted = op->done = 1;
            spmd__fab_count(f, op, SPMD_LINK_LANE);
            SPMD__ST_REL(&op->state, SPMD__FOP_DONE); /* like fi_tinject */
            spmd__sunlock(&f->lock);
            return SPMD_OK;
        }
        spmd__sunlock(&f->lock); /* (the ring is full, or behind others: posted as usual) */
    }
    if ((st = spmd__fab_op_init(f, op, kind, peer, tag, buf, len, UINT64_MAX, kind == SPMD__FOP_RECV)) != SPMD_OK)
        return st;
    spmd__slock(&f->lock);
    st = spmd__fab_post_locked(f, op);
    spmd__sunlock(&f->lock);
    return st;
}

/* A lazy receive's waiter looks for its message: SPMD_OK once it came,
   SPMD_ERR_BUSY while not, or the op's failure. An op that is no longer
   lazy is peeked (the caller progresses the transport for those). */
static spmd_status spmd__fab_take(spmd__fab *f, spmd__fab_op *op) {
    spmd__lane *l;
    spmd__lane_rec *r;
    uint64_t t;
    if (SPMD__LD_ACQ(&op->state) != SPMD__FOP_ACTIVE || !op->lazy) return spmd__fab_peek(f, op);
    l = &f->lanes[f->lane_of[op->peer]];
    spmd__slock(&f->lock);
    if (op->state != SPMD__FOP_ACTIVE || op->lane != 5) { /* cancelled meanwhile */
        op->lazy = 0;
        spmd__sunlock(&f->lock);
        return spmd__fab_peek(f, op);
    }
    t = l->in_tail;
    r = (spmd__lane_rec *)(void *)(l->in_data + (t & (f->lane_cap - 1)));
    if (l->broken || f->lunex.n || SPMD__LD_ACQ(&r->stamp) == (t ^ l->in_nonce)) {
        uint32_t len = r->len; /* read once: the bytes are the peer's */
        uint64_t need = (sizeof *r + (uint64_t)len + SPMD__LINE - 1) & ~(uint64_t)(SPMD__LINE - 1);
        spmd_status st;
        if (!l->broken && !f->lunex.n && r->magic == SPMD__LANE_REC && r->tag == op->tag && len <= op->len &&
            need <= f->lane_cap - (t & (f->lane_cap - 1))) { /* the next record is ours, and sound: as
                                                                  spmd__lane_deliver, for an op listed nowhere */
            if (len) memcpy(op->buf, r + 1, len);
            op->lazy = 0;
            op->lane = 1;
            op->received = len;
            op->posted = op->done = 1;
            SPMD__ST_REL(&op->state, SPMD__FOP_DONE);
            l->in_tail = t + need;
            SPMD__ST_REL(&l->in->tail, l->in_tail);
            SPMD__ST_REL(&f->moved, f->moved + 1);
            spmd__sunlock(&f->lock);
            return SPMD_OK;
        }
        /* something else first, or the lane broke: posted the usual way (listed from now on) */
        SPMD__ST_REL(&op->state, SPMD__FOP_IDLE);
        if ((st = spmd__fab_op_init(f, op, op->kind, op->peer, op->tag, op->buf, op->len, UINT64_MAX, 1)) != SPMD_OK ||
            (st = spmd__fab_post_locked(f, op)) != SPMD_OK) {
            SPMD__ST_REL(&op->state, SPMD__FOP_ACTIVE); /* (failed: it ends now) */
            spmd__fab_op_fail(f, op, st, "%s", f->err);
        }
    } else if (spmd__boot_lost(f->boot, op->peer)) { /* nothing came: as the listed ops' check (progress) */
        spmd__fab_op_lost(f, op);
    }
    spmd__sunlock(&f->lock);
    return spmd__fab_peek(f, op);
}

/* SPMD_ERR_BUSY while the op runs; its status once it ended or failed. */
static SPMD__UNUSED spmd_status spmd__fab_test(spmd__fab *f, spmd__fab_op *op) {
    spmd_status st;
    if (!f || !op) return SPMD_ERR_NULL;
    if (SPMD__LD_ACQ(&op->state) == SPMD__FOP_DONE) return op->status; /* final: no lock needed */
    spmd__slock(&f->lock);
    if (op->state == SPMD__FOP_ACTIVE) spmd__fab_progress_locked(f);
    st = op->state == SPMD__FOP_IDLE ? SPMD_ERR_STATE
         : op->status != SPMD_OK     ? op->status
         : op->state == SPMD__FOP_DONE ? SPMD_OK
                                       : SPMD_ERR_BUSY;
    spmd__sunlock(&f->lock);
    return st;
}

/* Blocks until the op ends; returns within its deadline (plus a poll tick). */
static SPMD__UNUSED spmd_status spmd__fab_wait(spmd__fab *f, spmd__fab_op *op) {
    uint64_t start = spmd__now_ns();
    for (;;) {
        spmd_status st = spmd__fab_test(f, op);
        uint64_t waited;
        if (st != SPMD_ERR_BUSY) return st;
        waited = spmd__now_ns() - start;
        if (waited < 200000u) {
            spmd__pause();
        } else if (waited < 5000000u) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Fail an op on purpose. SPMD_OK when the provider has handed everything
   back within ~100 ms, else SPMD_ERR_BUSY (memory stays owned until close). */
static SPMD__UNUSED spmd_status spmd__fab_cancel(spmd__fab *f, spmd__fab_op *op, spmd_status s, const char *why) {
    uint64_t end;
    int held;
    if (!f || !op) return SPMD_ERR_NULL;
    end = spmd__now_ns() + 100000000u;
    spmd__slock(&f->lock);
    if (op->state == SPMD__FOP_ACTIVE)
        spmd__fab_op_fail(f, op, s == SPMD_OK ? SPMD_ERR_STATE : s, "cancelled: %s", why ? why : "by the caller");
    while (op->inflight && spmd__now_ns() < end) spmd__fab_progress_locked(f);
    held = op->inflight != 0;
    spmd__sunlock(&f->lock);
    return held ? SPMD_ERR_BUSY : SPMD_OK;
}

static SPMD__UNUSED int spmd__fab_peer_lost(spmd__fab *f, int peer) { return spmd__boot_lost(f->boot, peer); }

/* The first of n processes that died, or -1 (one atomic read while none did). */
static SPMD__UNUSED int spmd__fab_first_lost(spmd__fab *f, const int *procs, int n) {
    int i, who = -1;
    if (!f->boot || !SPMD__LD_ACQ(&f->boot->nlost)) return -1;
    spmd__slock(&f->lock);
    for (i = 0; i < n && who < 0; i++)
        if (spmd__boot_lost(f->boot, procs[i])) who = procs[i];
    spmd__sunlock(&f->lock);
    return who;
}

SPMD__SETUP static void spmd__fab_close(spmd__fab *f) {
    int i;
    spmd_allocator a;
    if (!f) return;
    if (f->ep) {
        spmd__fab_op *op, *nx;
        uint64_t end = spmd__now_ns() + 200000000u;
        spmd__slock(&f->lock);
        for (op = f->head; op; op = nx) {
            nx = op->next;
            if (op->status == SPMD_OK) spmd__fab_op_fail(f, op, SPMD_ERR_STATE, "transport closed");
        }
        while (f->head && spmd__now_ns() < end) spmd__fab_progress_locked(f);
        while (f->head) { /* the provider kept them: the endpoint's close reclaims them */
            op = f->head;
            op->inflight = 0;
            for (i = 0; i < SPMD__FAB_WINDOW; i++) op->slot[i].busy = 0;
            spmd__fab_settle(f, op);
        }
        spmd__sunlock(&f->lock);
        fi_close(&f->ep->fid);
    }
    for (i = 0; i < f->nmr; i++) {
        if (f->mrs[i]->mr) fi_close(&f->mrs[i]->mr->fid);
        spmd__free(&f->alloc, f->mrs[i]);
    }
    spmd__lane_close(f);
    if (f->av) fi_close(&f->av->fid);
    if (f->cq) fi_close(&f->cq->fid);
    if (f->domain) fi_close(&f->domain->fid);
    if (f->fabric) fi_close(&f->fabric->fid);
    if (f->info) fi_freeinfo(f->info);
    spmd__boot_close(f->boot);
    a = f->alloc;
    spmd__free(&a, f->mrs);
    spmd__free(&a, f->addrs);
    spmd__free(&a, f);
}

/* libfabric's native tcp RDM provider: "net" in 1.17, renamed "tcp" in 1.18
   (the older one is "tcp;ofi_rxm"). Its limits: see spmd__fab_getinfo. */
static int spmd__fab_xnet(const char *prov) { return strcmp(prov, "net") == 0 || strcmp(prov, "tcp") == 0; }

/* fi_getinfo for a tagged RDM endpoint with what we can honour. */
static int spmd__fab_getinfo(spmd__fab *f, const char *prov, struct fi_info **out) {
    struct fi_info *hints = fi_allocinfo();
    int rc;
    if (!hints) return -FI_ENOMEM;
    hints->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    if (f->strict) {
        hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
        hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    }
    if (prov && *prov) {
        size_t n = strlen(prov) + 1;
        hints->fabric_attr->prov_name = (char *)malloc(n); /* fi_freeinfo frees it with free() */
        if (hints->fabric_attr->prov_name) memcpy(hints->fabric_attr->prov_name, prov, n);
    }
    /* net (1.17) keeps at most FI_NET_MAX_SAVED (default 4) unexpected
       messages per peer, each of at most its inject size (128 bytes); any
       other stops it reading that connection until the message's receive is
       posted, so a message that overtook it waits too (a deadlock when the
       receiver waits for that one). Larger messages therefore wait for the
       clear-to-send there (spmd__fabric_init sets cts), and the limit is raised
       unless set (FI_TCP_ once the provider is named tcp): read when the
       provider starts, so it counts only if this process had not used
       libfabric yet. */
    if (!prov || !*prov || spmd__fab_xnet(prov)) {
        setenv("FI_NET_MAX_SAVED", "65536", 0);
        setenv("FI_TCP_MAX_SAVED", "65536", 0);
    }
    rc = fi_getinfo(FI_VERSION(1, 10), NULL, NULL, 0, hints, out);
    fi_freeinfo(hints);
    return rc;
}

/* A process's endpoint entry as spmd__fab_open publishes it (another
   process's bytes, len of them): its largest segment within a host and
   between hosts (4 bytes each, nonzero), its address's length nl (4
   bytes), the address (nl bytes, for fi_av_insert), then the provider's
   name, printable ASCII (a mismatch shows it to users), whose NUL is the
   entry's last byte. 1 with seg[0..1], *addr and *prov set when it is
   that; else 0. */
static int spmd__fab_entry(const unsigned char *p, size_t len, uint32_t seg[2], const unsigned char **addr,
                           const char **prov) {
    uint32_t nl;
    size_t k;
    if (len < 13 || (nl = spmd__boot_get32(p + 8)) > len - 13 || p[len - 1] != 0 ||
        (seg[0] = spmd__boot_get32(p)) == 0 || (seg[1] = spmd__boot_get32(p + 4)) == 0)
        return 0;
    for (k = 12 + (size_t)nl; k < len - 1; k++)
        if (p[k] < 32 || p[k] > 126) return 0;
    *addr = p + 12;
    *prov = (const char *)p + 12 + nl;
    return 1;
}

/* spmd__fab_open's phases. Each returns SPMD_OK or the failure, its
   message in f->err (spmd__fab_fail). Which provider: the one named, else
   shm when every process runs on this host, else the first that offers
   tagged RDM endpoints; on SPMD_SOCKET_IFNAME's interface where domains
   are named after interfaces. */
static spmd_status spmd__fab_pick(spmd__fab *f, const char *prov, unsigned char *blobs, size_t *lens,
                                  uint64_t deadline) {
    spmd__boot *b = f->boot;
    spmd_status st;
    int rc, i, auto_shm = 0;
    if (!prov && f->nprocs > 1) { /* all on one host? then try shm first */
        char host[256];
        spmd__host_name(host, sizeof host);
        st = spmd__boot_allgather(b, host, strlen(host), blobs, 256, lens, deadline);
        if (st != SPMD_OK) { return spmd__fab_fail(f, st, "fabric: %s", b->err); }
        auto_shm = 1;
        for (i = 0; i < f->nprocs; i++)
            auto_shm &= lens[i] == strlen(host) && memcmp(blobs + (size_t)i * 256, host, lens[i]) == 0;
    }
    rc = -FI_ENODATA;
    if (auto_shm) rc = spmd__fab_getinfo(f, "shm", &f->info);
    if (rc != 0) rc = spmd__fab_getinfo(f, prov, &f->info);
    if (rc != 0 || !f->info) {
        return spmd__fab_fail(f, SPMD_ERR_UNSUPPORTED, "fabric: no provider%s%s offers tagged RDM endpoints here: %s",
                              prov ? " named " : "", prov ? prov : "", fi_strerror(-rc));
    }
    if (b->ifname[0]) { /* SPMD_SOCKET_IFNAME: the domain of that interface, where the provider names domains so */
        struct fi_info *it, *pick = NULL;
        for (it = f->info; it && !pick; it = it->next)
            if (it->domain_attr && it->domain_attr->name && strcmp(it->domain_attr->name, b->ifname) == 0) pick = it;
        if (pick && pick != f->info && (pick = fi_dupinfo(pick)) != NULL) {
            fi_freeinfo(f->info);
            f->info = pick;
        }
        if (!pick) { /* domains named after interfaces, none after this one: it is down or has no carrier, and
                        the first domain (often lo) would publish an address the other hosts cannot reach */
            char seen[256] = "";
            int by_if = 0;
            for (it = f->info; it; it = it->next) {
                const char *dn = it->domain_attr ? it->domain_attr->name : NULL;
                if (!dn || !if_nametoindex(dn)) continue;
                by_if = 1;
                if (!strstr(seen, dn) && strlen(seen) + strlen(dn) + 3 < sizeof seen)
                    snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s", seen[0] ? ", " : "", dn);
            }
            if (by_if) {
                return spmd__fab_fail(f, SPMD_ERR_INVALID, "fabric: provider %s offers no domain on interface %s "
                                      "(SPMD_SOCKET_IFNAME; is it up, with carrier?), only on: %s",
                                      f->info->fabric_attr->prov_name ? f->info->fabric_attr->prov_name : "?",
                                      b->ifname, seen);
            }
        }
    }
    return SPMD_OK;
}

/* The provider's limits: this process's segment sizes (f->seg, f->xseg:
   spmd__fab_publish takes the job's), inject size, whether buffers are
   registered. */
static spmd_status spmd__fab_limits(spmd__fab *f) {
    size_t seg, want;
    snprintf(f->prov, sizeof f->prov, "%s", f->info->fabric_attr->prov_name ? f->info->fabric_attr->prov_name : "?");
    f->hi15 = spmd__fab_xnet(f->prov);
    f->mr_mode = (uint64_t)f->info->domain_attr->mr_mode;
    f->need_mr = f->strict || (f->mr_mode & FI_MR_LOCAL) != 0;
    f->max_msg = f->info->ep_attr->max_msg_size;
    f->inject = f->info->tx_attr->inject_size;
    seg = f->strict ? SPMD__FAB_STRICT_SEG : f->max_msg;
    if (seg > f->max_msg) seg = f->max_msg;
    if (seg > ((size_t)1 << 30)) seg = (size_t)1 << 30;
    if (seg > SPMD__FAB_SEG_MAX && strncmp(f->prov, "shm", 3) != 0) seg = SPMD__FAB_SEG_MAX;
    want = f->strict ? 0 : (size_t)spmd__env_int("SPMD_FABRIC_SEGMENT", 4096, (int64_t)1 << 30, 0, NULL);
    if (want) seg = want < f->max_msg ? want : f->max_msg; /* (the job takes the smallest: spmd__fab_names) */
    if (seg == 0) { return spmd__fab_fail(f, SPMD_ERR_UNSUPPORTED, "fabric: provider %s has max_msg_size 0", f->prov); }
    if (f->strict && f->inject > 64) f->inject = 64;
    f->seg = seg;
    f->xseg = want || seg < SPMD__FAB_XSEG ? seg : SPMD__FAB_XSEG; /* (never above seg) */
    f->xflight = want ? SPMD__FAB_WINDOW * seg : SPMD__FAB_XFLIGHT; /* (set: as within a host) */
    return SPMD_OK;
}

/* Fabric, domain, completion queue, address vector and the endpoint. */
static spmd_status spmd__fab_endpoint(spmd__fab *f) {
    int rc;
    if ((rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)) != 0) {
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_fabric (%s): %s", f->prov, fi_strerror(-rc));
    }
    if ((rc = fi_domain(f->fabric, f->info, &f->domain, NULL)) != 0) {
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_domain (%s): %s", f->prov, fi_strerror(-rc));
    }
    {
        struct fi_cq_attr cqa;
        struct fi_av_attr ava;
        memset(&cqa, 0, sizeof cqa);
        cqa.format = FI_CQ_FORMAT_TAGGED;
        cqa.wait_obj = FI_WAIT_NONE;
        cqa.size = 4096;
        memset(&ava, 0, sizeof ava);
        ava.type = f->info->domain_attr->av_type != FI_AV_UNSPEC ? f->info->domain_attr->av_type : FI_AV_TABLE;
        ava.count = (size_t)f->nprocs;
        if ((rc = fi_cq_open(f->domain, &cqa, &f->cq, NULL)) != 0) {
            return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_cq_open: %s", fi_strerror(-rc));
        }
        if ((rc = fi_av_open(f->domain, &ava, &f->av, NULL)) != 0) {
            return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_av_open: %s", fi_strerror(-rc));
        }
    }
    if ((rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)) == 0 && strncmp(f->prov, "shm", 3) == 0) {
        /* shm names its region in /dev/shm <pid>:<domain>:<endpoint> by
           default, so a process killed earlier that had our pid (pids are
           reused) left a file that makes this endpoint fail (EBUSY): a
           number of ours in the middle instead (the same form, which
           tools/spmdrun's cleanup after a kill knows) */
        char name[64];
        snprintf(name, sizeof name, "fi_shm://%ld:%u:0", (long)getpid(),
                 (unsigned)((spmd__now_ns() ^ (uint64_t)(uintptr_t)f) * 0x9e3779b97f4a7c15u >> 33));
        rc = fi_setname(&f->ep->fid, name, strlen(name) + 1);
    }
    if (rc != 0 || (rc = fi_ep_bind(f->ep, &f->av->fid, 0)) != 0 ||
        (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) != 0 || (rc = fi_enable(f->ep)) != 0) {
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "endpoint (%s): %s", f->prov, fi_strerror(-rc));
    }
    return SPMD_OK;
}

/* Publish this endpoint's entry (spmd__fab_entry) to every process and
   insert theirs: f->addrs, and f->seg and f->xseg, the smallest of all. */
static spmd_status spmd__fab_publish(spmd__fab *f, unsigned char *blobs, size_t *lens, uint64_t deadline) {
    spmd__boot *b = f->boot;
    unsigned char mine[SPMD__BOOT_BLOB_MAX];
    size_t namelen = SPMD__FAB_NAME_MAX, ml;
    spmd_status st;
    int rc, i;
    ml = strlen(f->prov) + 1;
    rc = fi_getname(&f->ep->fid, mine + 12, &namelen);
    if (rc != 0 || namelen > SPMD__BOOT_BLOB_MAX - 12 - ml) {
        return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_getname: %s (%zu bytes)", rc ? fi_strerror(-rc) : "too long",
                              namelen);
    }
    spmd__boot_put32(mine, (uint32_t)f->seg); /* (at most 1 GiB: spmd__fab_limits) */
    spmd__boot_put32(mine + 4, (uint32_t)f->xseg);
    spmd__boot_put32(mine + 8, (uint32_t)namelen);
    memcpy(mine + 12 + namelen, f->prov, ml);
    st = spmd__boot_allgather(b, mine, 12 + namelen + ml, blobs, SPMD__BOOT_BLOB_MAX, lens, deadline);
    if (st != SPMD_OK) { return spmd__fab_fail(f, st, "fabric: exchanging endpoint names: %s", b->err); }
    f->addrs = (fi_addr_t *)spmd__alloc(&f->alloc, (size_t)f->nprocs * sizeof *f->addrs);
    if (!f->addrs) { return spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory"); }
    for (i = 0; i < f->nprocs; i++) {
        const unsigned char *addr;
        const char *pn;
        uint32_t s[2];
        if (!spmd__fab_entry(blobs + (size_t)i * SPMD__BOOT_BLOB_MAX, lens[i], s, &addr, &pn)) {
            return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fabric: malformed endpoint entry of process %d", i);
        }
        if (strcmp(pn, f->prov) != 0) {
            return spmd__fab_fail(f, SPMD_ERR_MISMATCH, "fabric: process %d uses provider %s, this process %s (set "
                                  "SPMD_PROVIDER alike everywhere)", i, pn, f->prov);
        }
        if (s[0] < f->seg) f->seg = s[0];
        if (s[1] < f->xseg) f->xseg = s[1];
        rc = fi_av_insert(f->av, addr, 1, &f->addrs[i], 0, NULL);
        if (rc != 1) {
            return spmd__fab_fail(f, SPMD_ERR_SYSTEM, "fi_av_insert of process %d: %s", i,
                                  rc < 0 ? fi_strerror(-rc) : "not inserted");
        }
    }
    return SPMD_OK;
}

static SPMD__UNUSED spmd_status spmd__fab_open(const spmd__fab_desc *d, spmd__fab **out, char *err, size_t errlen) {
    spmd__fab *f;
    spmd_allocator none;
    spmd__boot *b = NULL;
    spmd_status st;
    const char *prov, *sv;
    unsigned char *blobs = NULL;
    size_t *lens = NULL;
    uint64_t deadline;
    memset(&none, 0, sizeof none);
    if (out) *out = NULL;
    if (!d || !out) {
        if (err && errlen) snprintf(err, errlen, "fabric: NULL desc or result");
        return SPMD_ERR_NULL;
    }
    st = spmd__boot_open(&d->boot, &b, err, errlen);
    if (st != SPMD_OK) return st;
    f = (spmd__fab *)spmd__alloc(d->boot.alloc ? d->boot.alloc : &none, sizeof *f);
    if (!f) {
        spmd__boot_close(b);
        if (err && errlen) snprintf(err, errlen, "fabric: out of memory");
        return SPMD_ERR_NOMEM;
    }
    f->alloc = b->alloc;
    f->boot = b;
    f->rank = b->rank;
    f->nprocs = b->nprocs;
    f->lock = 0;
    deadline = spmd__now_ns() + (uint64_t)b->timeout_ms * 1000000u;
    sv = getenv("SPMD_FABRIC_STRICT");
    f->strict = d->strict > 0 || (d->strict == 0 && sv && strcmp(sv, "1") == 0);
    prov = d->provider;
    if (!prov || !*prov) prov = getenv("SPMD_PROVIDER");
    if (!prov || !*prov) prov = getenv("FI_PROVIDER");
    if (prov && !*prov) prov = NULL;
    lens = (size_t *)spmd__alloc(&f->alloc, (size_t)f->nprocs * sizeof *lens);
    blobs = (unsigned char *)spmd__alloc(&f->alloc, (size_t)f->nprocs * SPMD__BOOT_BLOB_MAX);
    f->cwords = (f->nprocs + 63) / 64;
    f->cpeers = (uint64_t *)spmd__alloc(&f->alloc, (size_t)SPMD_LINK_COUNT * SPMD_COUNT_KINDS * (size_t)f->cwords * 8);
    if (!lens || !blobs || !f->cpeers) st = spmd__fab_fail(f, SPMD_ERR_NOMEM, "fabric: out of memory");
    if (st == SPMD_OK) st = spmd__fab_pick(f, prov, blobs, lens, deadline);
    if (st == SPMD_OK) st = spmd__fab_limits(f);
    if (st == SPMD_OK) st = spmd__fab_endpoint(f);
    if (st == SPMD_OK) st = spmd__fab_publish(f, blobs, lens, deadline);
#if SPMD__HAS_LANE
    if (st == SPMD_OK) {
        /* 0 none, 1 with bulk rings, 2 small messages only (strict mode:
           large messages take the provider's paths it is there to test) */
        int want;
        sv = getenv("SPMD_SHM_LANE");
        want = d->lane ? d->lane : !sv || !*sv ? 1 : strcmp(sv, "0") == 0 ? 0 : strcmp(sv, "small") == 0 ? 2 : 1;
        if (want == 1 && f->strict) want = 2;
        st = spmd__lane_open(f, want > 0 ? want : 0, deadline);
    }
#endif
    spmd__free(&f->alloc, blobs);
    spmd__free(&f->alloc, lens);
    if (st != SPMD_OK) {
        spmd__boot_log(b, SPMD_LOG_ERROR, "%s", f->err);
        if (err && errlen) snprintf(err, errlen, "%s", f->err);
        spmd__fab_close(f);
        return st;
    }
    spmd__boot_log(b, SPMD_LOG_INFO, "fabric: provider %s, fabric %s, domain %s, %d processes, segment %zu (%zu between "
                   "hosts), inject %zu, mr_mode 0x%llx%s%s%s", f->prov,
                   f->info->fabric_attr->name ? f->info->fabric_attr->name : "?",
                   f->info->domain_attr->name ? f->info->domain_attr->name : "?", f->nprocs, f->seg, f->xseg, f->inject,
                   (unsigned long long)f->mr_mode, f->need_mr ? ", registering buffers" : "",
                   f->info->domain_attr->data_progress == FI_PROGRESS_MANUAL ? ", manual progress" : "",
                   f->strict ? ", strict" : "");
    *out = f;
    return SPMD_OK;
}
#endif /* SPMD__HAS_LIBFABRIC */

// >>libfabric meshes
#if SPMD__HAS_LIBFABRIC
/* A mesh on the libfabric backend. Every process creates the same meshes
   in the same order (creation is collective: the shapes are compared over
   the bootstrap) and hosts one contiguous block of device ids, so the minor
   axes stay inside a process. A group whose members all live here runs on
   the thread engine (>>thread backend). A group that spans processes takes the exchange
   path: each operation has one exchange record (xrec) per process, shared
   by the process's members of the group. Every member sends a header (its
   signature, group index, the group's hash, the operation's number and the
   length of its input) to each other process of the group (a rooted
   call outside check mode only where it is read, see spmd__x_hdr_to);
   the input goes inline when it is at most SPMD__X_INLINE bytes, else as a second message
   straight from the caller's buffer, and only to processes that read it
   (spmd__x_wants). Headers are compared like the thread engine's
   signatures. Once every input is here, each local member's output is
   computed by spmd__compute_own over the inputs in the canonical order
   -- the thread engine's arithmetic, so the results are bit-identical -- by
   whichever local member gets there first.

   A large psum (see SPMD__X_SPLIT_MIN) is split instead (reduce-
   scatter, then all-gather): each process of the group owns one slice of
   the elements, every member sends each process only that process's
   slice, the process reduces its slice once (not once per local member),
   in the canonical order as above, into one local member's output (the leader's),
   and sends the result to every other process, whose slices land in the
   leader's output; the other local members copy it. Each process sends
   and receives 2 (P - 1) / P of the data instead of (P - 1) times it, and
   the arithmetic is the same, element by element. A ring would send as
   much, in P - 1 steps, but in an order that changes a float sum's
   rounding; the direct exchange keeps results bit-identical to threads.
   Small operations on many processes take the Bruck exchange instead
   (see spmd__x_bplan). Many reductions, and any reduction whose
   processes each hold an equal block of members (a power of two), run a
   plan over the processes (>>plans, spmd__x_plan_algo, spmd__x_prun): a
   process's members combine first, so one partial a process crosses. SPMD_ALGO / spmd_opts.algo: eager forces the
   direct exchange, split the split one (any psum larger than the inline
   size), bruck the Bruck one.

   Tags: group = spmd__group_gid, 16 bits (every header repeats 32 bits of
   the group's hash, 64 in check mode, so a collision is reported, never mixed),
   sequence = the operation's number on the group, step = 2k for member
   k's header and 2k + 1 for its data, 2G for a process's slice of a split
   psum, SPMD__X_BSTEP(s) for step s of a Bruck exchange.

   The core reaches this block only through the table at its end
   (spmd__fabric_vt: the exchange's start, give-up and checks, the news
   of other processes, the report and the agreements); it calls the core
   above freely. */
#define SPMD__X_MAGIC 0x58444d53u
/* Clear-to-send: with the shm provider of libfabric 1.17 a large message
   that arrives before its receive is posted holds the sender's response
   slot, and later sends to that process stall behind it (a deadlock when
   the receiver waits for one of them). There a large message goes only
   after the receiver said its receive is posted: a zero-byte message of
   kind 2 (3 for send/recv) with the data's tag. */
#define SPMD__X_CTS (2ull << 62)
#define SPMD__X_INLINE 4096u
/* the direct exchange moves (P - 1) x the input per process, the split one
   2 (P - 1) / P of it in one step more: split when (P - 1) x the input is
   at least this (measured for 2 processes here: the split psum is faster
   from 512 KiB on shm, from about 1 MiB on tcp) */
#define SPMD__X_SPLIT_MIN 524288u

/* A member's header, long form: check mode (the axes' text, for the
   message that names a mismatch, its first 31 characters, and the call
   site's first 23), inputs of 4 GiB
   and more, groups of 65536 members and more. 128 bytes: net's inject size
   (with clear-to-send a header must fit it, see spmd__x_inline). */
typedef struct spmd__xhdr {
    uint32_t magic, member;
    uint64_t ghash, gseq, global, data_len;
    spmd__sig sig;
    uint32_t has_inline, pad;
    char axes[32];
    char site[24]; /* SPMD_CHECK_SITES: its call site (spmd__site_text) */
} spmd__xhdr;
#define SPMD__X_HDR ((sizeof(spmd__xhdr) + 63) / 64 * 64)

/* Short form, otherwise: 48 bytes, so that a small input rides inline
   within a provider's inject size (tcp's is 64 bytes: a psum of 8 bytes
   is then one fi_tinject each way, 2 us less per operation than a 200-
   byte header sent with fi_tsend, measured here). It keeps the whole
   signature; of the group's hash and the sequence number the low 32 bits
   (the tag carries 16 of each already). */
#define SPMD__X_MAGIC_SHORT 0x53444d53u
typedef struct spmd__xshort {
    uint32_t magic;
    uint16_t member, has_inline;
    uint32_t ghash, gseq;
    uint32_t data_len, pad;
    spmd__sig sig;
} spmd__xshort;
#define SPMD__X_SHDR sizeof(spmd__xshort)
typedef char spmd__xshort_is_48[sizeof(spmd__xshort) == 48 ? 1 : -1];
typedef char spmd__xhdr_is_128[SPMD__X_HDR == 128 ? 1 : -1];

/* A received header of either form, checked and read out. */
typedef struct spmd__xview {
    uint64_t data_len;
    spmd__sig sig;
    const char *axes, *site;  /* NULL: the short form has none */
    uint64_t global;          /* the sender's operation number (long form) */
    int has_inline, is_short;
    const unsigned char *data; /* inline data */
} spmd__xview;

/* Read member k's header of `received` bytes at h: 0 when malformed, or
   not from this group's operation `gseq` (*why says which). */
static int spmd__x_parse(unsigned char *h, size_t received, int k, uint64_t ghash, uint64_t gseq, size_t inl,
                         spmd__xview *v, const char **why) {
    uint32_t magic;
    *why = "malformed";
    if (received < 4) return 0;
    memcpy(&magic, h, 4);
    memset(v, 0, sizeof *v);
    if (magic == SPMD__X_MAGIC_SHORT) {
        const spmd__xshort *s = (const spmd__xshort *)(const void *)h;
        if (received < SPMD__X_SHDR || s->member != (uint32_t)k) return 0;
        v->has_inline = s->has_inline != 0;
        v->data_len = s->data_len;
        v->sig = s->sig;
        v->is_short = 1;
        v->data = h + SPMD__X_SHDR;
        if (v->has_inline && (received != SPMD__X_SHDR + v->data_len || v->data_len > inl)) return 0;
        if (s->ghash != (uint32_t)ghash || s->gseq != (uint32_t)gseq) { *why = "another group's"; return 0; }
        return 1;
    }
    if (magic == SPMD__X_MAGIC) {
        spmd__xhdr *l = (spmd__xhdr *)(void *)h;
        if (received < SPMD__X_HDR || l->member != (uint32_t)k) return 0;
        v->has_inline = l->has_inline != 0;
        v->data_len = l->data_len;
        v->sig = l->sig;
        l->axes[sizeof l->axes - 1] = '\0';
        l->site[sizeof l->site - 1] = '\0';
        v->axes = l->axes;
        v->site = l->site;
        v->global = l->global;
        v->data = h + SPMD__X_HDR;
        if (v->has_inline && (received != SPMD__X_HDR + v->data_len || v->data_len > inl)) return 0;
        if (l->ghash != ghash || l->gseq != gseq) { *why = "another group's"; return 0; }
        return 1;
    }
    return 0;
}

/* a local member's part: not come, come, output being computed, done, or
   come without its output buffer (psend before its precv) */
enum { SPMD__XC_ABSENT = 0, SPMD__XC_JOINED, SPMD__XC_COMPUTING, SPMD__XC_DONE, SPMD__XC_NORECV };

/* A plan exchange's state (see spmd__x_pplan). */
typedef struct spmd__xplan {
    spmd__plan_x plan;
    size_t at[2 * SPMD__PLAN_STEPS]; /* in buf: step s's receive stage (2s), its send stage (2s + 1) */
    uint8_t nth[2 * SPMD__PLAN_STEPS]; /* ... which message between the two ranks that is, each way (its tag) */
    unsigned char *buf;              /* the work vector, then the stages */
    size_t cap;
    int done, sent;                  /* steps combined, sends posted */
    int loaded, busy;                /* several members a process: their inputs are in (1), the steps
                                        done (2); one of them runs the steps now */
    int nops;
    int wide;                        /* a bcast's chain: each piece in flight whole (spmd__fab_segs) */
    spmd__fab_op *op;                /* step s's receive (2s) and send (2s + 1) */
} spmd__xplan;

/* One allocation: this header, then its arrays (see spmd__x_get); the
   arrays from `in` to `dsent` are cleared for every operation, the stage
   buffers are kept. */
typedef struct spmd__xrec {
    struct spmd__xrec *next;
    size_t reset;             /* bytes from `in` on that a new operation clears */
    uint64_t gseq;
    int left;                 /* local members finished with it */
    int all_in;               /* every header and input came (spmd__x_scan): later members skip the scan */
    int taken;                /* local members whose output one of them computes or computed */
    int joins;                /* local members joined (their records are in) */
    int scan0;                /* members before it all came (spmd__x_scan starts there) */
    int seen_joins;           /* ... and the transport's moved count, as the last scan saw them */
    uint64_t seen_moved;      /*     (nothing new since one found inputs missing: no rescan) */
    size_t hb, inl;           /* bytes per header buffer, and of inline data */
    spmd__fab_op *rop;        /* 3G: per remote member its header and data receives, our clear-to-send */
    spmd__fab_op *sop;        /* 3 nloc nrp: per local member and remote process the header and data
                                 sends and the receive of the clear-to-send */
    spmd__fab_op *aop;        /* 4 nrp, split psum: per remote process the receive of its slice of
                                 the sum, our clear-to-send for it, the send of ours, its clear-to-send */
    int lead;                 /* split psum: the local member whose output gathers the slices */
    int red;                  /* split psum: this process's slice 0 not reduced, 1 being reduced, 2 done */
    int hold;                 /* data lands in the leader's output: it leaves after the others */
    int bsteps, bsent, brecv; /* Bruck: steps, sends posted, receives ended (aop: 2s receive, 2s + 1 send) */
    int bparsed;              /* Bruck: the remote records read (local ones are in once joins == nloc) */
    spmd__sig sig;            /* the signature of the member that made it (Bruck: the layout's) */
    struct spmd__xplan *xp;   /* a plan's (SPMD__ALG_RD, _RAB): made on first use, kept */
    unsigned char *bbuf;      /* Bruck: every process's block of records, this one's first */
    size_t bcap;
    size_t *bat;              /* G: Bruck: where member k's record starts in bbuf */
    size_t *boff;             /* 2P + 1: where block t (of process procs[(ppos + t) % P]) starts; cursors */
    spmd_status gone;         /* a local member failed: the others stop using the exchange */
    char gone_msg[320];       /* ... and why, as that member's error said (set once, before gone) */
    int refused;              /* member + 1 that refused the call (spmd__stand_in): every local member fails */
    spmd_status refused_st;   /* ... with that member's status */
    uint8_t *dsent;           /* nloc nrp: that data send is posted (or not needed) */
    uint8_t *asent;           /* nrp: split psum: our slice's send to that process is posted */
    unsigned char *hbuf;      /* G * hb: headers in (remote members) and out (local ones) */
    unsigned char **stage;    /* G: remote inputs too large to come inline */
    size_t *stage_cap;
    const void **in;          /* G: every member's input */
    const int64_t **meta;     /* G: ragged offsets and sizes */
    void **out;               /* G: local members' outputs */
    uint8_t *have;            /* G: 0 nothing, 1 header (data on its way), 2 ready */
    uint8_t *cst;             /* G: SPMD__XC_* of local members */
    uint8_t *copied;          /* G: a local member's input was copied into hbuf */
    size_t *pre;              /* G: bytes of a data receive posted before the header came (0: none) */
    unsigned char **pdst;     /* G: where that receive writes: the stage, or a local member's output */
} spmd__xrec;

/* The quick exchange's (see spmd__xq_post), one per group, made on first use. */
typedef struct spmd__xq {
    size_t hb;                /* bytes per header buffer, as the general exchange's */
    spmd__fab_op *rop;        /* G: member k's header (this member's unused) */
    spmd__fab_op *sop;        /* nrp: this member's header to each other process */
    unsigned char *hbuf;      /* G * hb: the headers, this member's at [me] */
    /* one-way calls (a bcast's root, a reduce's members off the root, as
       spmd__x_needs says): the acknowledgements they do not wait for (see
       spmd__x_hdr_to) land here after the call returned, in slot gseq mod
       max_inflight (D slots of G ops and G * hb bytes, made on the first
       such call); a call waits for the slot of the acknowledgement due
       (spmd__xq_slot): at most max_inflight operations ahead */
    spmd__fab_op *lop;
    unsigned char *lbuf;
    uint64_t due_seen;        /* the last acknowledgement found come: not peeked again (calls that
                                 share it check it before the slot is posted anew) */
} spmd__xq;

/* Transport ops of an exchange record: rop, sop and aop above. */
static size_t spmd__x_nops(const spmd__group *g) {
    return 3 * (size_t)g->G + 3 * (size_t)g->nloc * (size_t)g->nrp + 4 * (size_t)g->nrp;
}

/* r's collective in messages, with its signature as timeouts name it:
   "psum(f64 x 4, eager)" (in the device's scratch: one per message). */
static const char *spmd__x_what(const spmd_req *r) {
    spmd__req_what(r, r->dev->what, sizeof r->dev->what);
    return r->dev->what;
}

static void spmd__x_free(spmd_mesh *m, spmd__group *g, spmd__xrec *x) {
    int k;
    spmd__fab_mr_forget(m->lf.fab, x->hbuf, (size_t)g->G * x->hb);
    if (x->bbuf) {
        spmd__fab_mr_forget(m->lf.fab, x->bbuf, x->bcap);
        spmd__free(&m->alloc, x->bbuf);
    }
    if (x->xp) {
        if (x->xp->buf) spmd__fab_mr_forget(m->lf.fab, x->xp->buf, x->xp->cap);
        spmd__free(&m->alloc, x->xp->buf);
        spmd__free(&m->alloc, x->xp);
    }
    for (k = 0; k < g->G; k++)
        if (x->stage[k]) {
            spmd__fab_mr_forget(m->lf.fab, x->stage[k], x->stage_cap[k]);
            spmd__free(&m->alloc, x->stage[k]);
        }
    spmd__free(&m->alloc, x); /* its arrays live in the same block */
}

/* The bytes member k sends when it agrees with r (-1: only its header
   says, as for ragged_all_to_all). */
static int64_t spmd__x_expect(const spmd_req *r, int k) {
    switch (r->sig.kind) {
    case SPMD__KIND_RAGGED: return -1;
    case SPMD__KIND_BCAST: return k == r->root ? (int64_t)(r->count * r->in_size) : 0;
    case SPMD__KIND_SCATTER: return k == r->root ? (int64_t)((size_t)r->gr->g->G * r->count * r->in_size) : 0;
    default: return (int64_t)r->in_bytes;
    }
}

/* Split psum: the elements [*lo, *hi) that process p of the group
   reduces. The group's processes, in process order, take equal slices. */
static void spmd__x_slice(const spmd_req *r, int p, size_t *lo, size_t *hi) {
    const spmd__group *g = r->gr->g;
    size_t P = (size_t)g->nrp + 1, at = r->dev->mesh->proc < p;
    int i;
    for (i = 0; i < g->nrp; i++) at += g->rprocs[i] < p;
    *lo = r->count / P * at + (at < r->count % P ? at : r->count % P);
    *hi = *lo + r->count / P + (at < r->count % P);
}

/* The bytes of member k's input of `full` bytes that process p reads:
   [*off, *off + *len). A split psum sends p its slice, an all_to_all
   whose chunks are contiguous and a psum_scatter of one row only the
   chunks of p's members; everything else sends all of it. */
static void spmd__x_range(const spmd_req *r, int p, size_t full, size_t *off, size_t *len) {
    const spmd__group *g = r->gr->g;
    const int *po = r->dev->mesh->proc_of;
    size_t lo = SIZE_MAX, hi = 0, step, run;
    int j;
    *off = 0;
    *len = full;
    if (r->sig.algo == SPMD__ALG_SPLIT) {
        spmd__x_slice(r, p, &lo, &hi);
        *off = lo * r->in_size;
        *len = (hi - lo) * r->in_size;
        return;
    }
    if (full != r->in_bytes) return;
    if (r->sig.kind == SPMD__KIND_ALLTOALL && r->blk.n == 0) {
        step = (size_t)r->src_step;
        run = r->blk.run;
    } else if (r->sig.kind == SPMD__KIND_PSUM_SCATTER && r->outer == 1) {
        step = run = r->inner * r->in_size; /* member j's part of the sum: chunk j */
    } else {
        return;
    }
    for (j = 0; j < g->G; j++) {
        size_t a = (size_t)j * step;
        if (po[g->members[j]] != p) continue;
        if (a < lo) lo = a;
        if (a + run > hi) hi = a + run;
    }
    if (lo < hi && hi <= full) {
        *off = lo;
        *len = hi - lo;
    }
}

/* Where member k's data (e bytes in all) may land straight in the output
   of r's member, and its length there; NULL: through a stage. Its block of
   an all_gather, its chunk of a flat all_to_all (the only local member),
   the root's data of a bcast, the source's of a ppermute. */
static unsigned char *spmd__x_land(const spmd_req *r, int k, size_t e, size_t *len) {
    unsigned char *out = (unsigned char *)r->recv;
    if (!out) return NULL;
    *len = e;
    switch (r->sig.kind) {
    case SPMD__KIND_ALLGATHER: return r->outer == 1 && e == r->in_bytes ? out + (size_t)k * e : NULL;
    case SPMD__KIND_ALLTOALL:
        *len = r->blk.run;
        return r->blk.n == 0 && r->gr->g->nloc == 1 && e == r->in_bytes ? out + (size_t)k * (size_t)r->dst_step
                                                                           : NULL;
    case SPMD__KIND_BCAST: return k == r->root ? out : NULL;
    case SPMD__KIND_PPERMUTE: return r->src_of[r->gr->me] == k && e == r->in_bytes ? out : NULL;
    default: return NULL;
    }
}

/* Stage for member k's data, at least len bytes. */
static spmd_status spmd__x_stage(spmd_req *r, spmd__xrec *x, int k, size_t len) {
    spmd_mesh *m = r->dev->mesh;
    if (x->stage_cap[k] >= len) return SPMD_OK;
    if (x->stage[k]) {
        spmd__fab_mr_forget(m->lf.fab, x->stage[k], x->stage_cap[k]);
        spmd__free(&m->alloc, x->stage[k]);
    }
    x->stage_cap[k] = 0;
    x->stage[k] = (unsigned char *)spmd__alloc(&m->alloc, len);
    if (!x->stage[k])
        return spmd__fail(r->dev, SPMD_ERR_NOMEM, "%s: no memory for %zu bytes from device %d", spmd__x_what(r), len,
                          r->gr->g->members[k]);
    x->stage_cap[k] = len;
    spmd__fab_mr_own(m->lf.fab, x->stage[k], len);
    return SPMD_OK;
}

/* Does process p read member k's input? Headers go everywhere regardless. */
static int spmd__x_wants(const spmd_req *r, int k, int p) {
    const spmd__group *g = r->gr->g;
    const int *po = r->dev->mesh->proc_of;
    int j;
    switch (r->sig.kind) {
    case SPMD__KIND_BARRIER: return 0;
    case SPMD__KIND_BCAST:
    case SPMD__KIND_SCATTER: return k == r->root;
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_GATHER: return po[g->members[r->root]] == p;
    case SPMD__KIND_SCAN:
        for (j = k; j < g->G; j++)
            if (po[g->members[j]] == p) return 1;
        return 0;
    case SPMD__KIND_PPERMUTE: /* (k's destination, if any) */
        j = r->src_of[g->G + k];
        return j >= 0 && po[g->members[j]] == p;
    default: return 1;
    }
}

/* Every send of a call across processes: the transport's post, the
   message counted under the call's kind (spmd_mesh_counters). */
static spmd_status spmd__x_send(spmd_req *r, spmd__fab_op *op, int peer, uint64_t tag, const void *buf, size_t len,
                                uint64_t deadline_ns) {
    op->what = r->sig.kind;
    return spmd__fab_post_send(r->dev->mesh->lf.fab, op, peer, tag, buf, len, deadline_ns);
}

/* The receive for member k's data is posted: tell its process to send
   (providers that need it, see SPMD__X_CTS). */
static spmd_status spmd__x_clear(spmd_req *r, spmd__xrec *x, int k) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    if (!m->lf.fab->cts) return SPMD_OK;
    return spmd__x_send(r, &x->rop[3 * k + 2], m->proc_of[g->members[k]],
                               SPMD__FAB_TAG(g->gid, r->gseq, 2 * k + 1) | SPMD__X_CTS, NULL, 0, UINT64_MAX);
}

/* Bruck (SPMD__ALG_BRUCK): every process of the group holds a block, the
   records of its members in member order (a short header, then the input
   padded to 16 bytes, of the size the signature implies). In step s
   (d = 2^s < P) the process at position i of g->procs sends the first
   min(d, P - d) blocks it holds, its own first, to position i - d, and
   receives as many from position i + d, which land behind them: after
   ceil(log2 P) steps it holds all P blocks, in position order from its
   own. Each process sends ceil(log2 P) messages instead of a header to
   every other one; every output is then computed as on the direct
   exchange, from all inputs in the canonical order (bit-identical). Every receive
   is posted with the exchange (its size is known), the send of step s
   once the receives of the steps before it ended: aop[2s] and aop[2s + 1].
   Tags: step SPMD__X_BSTEP(s), from the top of the step field down. */
#define SPMD__X_BSTEP(s) (0x3fff - (s))

static size_t spmd__x_brec(const spmd_req *r, int k) {
    return SPMD__X_SHDR + ((size_t)spmd__x_expect(r, k) + 15) / 16 * 16;
}

/* Lay out r's blocks and records in x (boff, bat), make the buffer, post
   the receives. xlock held. */
static spmd_status spmd__x_bplan(spmd_req *r, spmd__xrec *x) {
    spmd_mesh *m = r->dev->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    int P = g->nrp + 1, k, t, s;
    size_t *cur = x->boff + P + 1, at = 0;
#define SPMD__X_BLOCK(k) cur[(g->pos_of[m->proc_of[g->members[k]]] - g->ppos + P) % P]
    for (t = 0; t < P; t++) cur[t] = 0;
    for (k = 0; k < g->G; k++) SPMD__X_BLOCK(k) += spmd__x_brec(r, k);
    for (t = 0; t < P; t++) {
        x->boff[t] = at;
        at += cur[t];
        cur[t] = x->boff[t];
    }
    x->boff[P] = at;
    for (k = 0; k < g->G; k++) {
        x->bat[k] = SPMD__X_BLOCK(k);
        SPMD__X_BLOCK(k) += spmd__x_brec(r, k);
    }
#undef SPMD__X_BLOCK
    if (x->bcap < at) {
        if (x->bbuf) {
            spmd__fab_mr_forget(f, x->bbuf, x->bcap);
            spmd__free(&m->alloc, x->bbuf);
        }
        x->bcap = 0;
        x->bbuf = (unsigned char *)spmd__alloc(&m->alloc, at);
        if (!x->bbuf)
            return spmd__fail(r->dev, SPMD_ERR_NOMEM, "%s: no memory for the exchange's %zu bytes", spmd__x_what(r),
                              at);
        x->bcap = at;
        spmd__fab_mr_own(f, x->bbuf, at);
    }
    for (s = 0; (1 << s) < P; s++) {
        int d = 1 << s, n = d < P - d ? d : P - d, from = g->procs[(g->ppos + d) % P];
        spmd_status st = spmd__fab_post_recv(f, &x->aop[2 * s], from, SPMD__FAB_TAG(g->gid, r->gseq, SPMD__X_BSTEP(s)),
                                             x->bbuf + x->boff[d], x->boff[d + n] - x->boff[d], UINT64_MAX);
        if (st != SPMD_OK)
            return spmd__fail(r->dev, st, "%s over '%s': receiving from process %d: %s", spmd__x_what(r),
                              r->gr->text, from, f->err);
        x->bsteps = s + 1;
    }
    return SPMD_OK;
}

/* The plan exchange (SPMD__ALG_RD, SPMD__ALG_RAB): an allreduce, bcast or
   reduce over a group with one member in each of its processes runs the
   steps of its plan (>>plans) over the transport. A message is a short
   header (the signature, and a refusal seen so far, which so reaches every
   rank along with the data that depends on it) and elements of the
   accumulator's type: f16 and bf16 travel as f32, rounded once at the end,
   as the canonical order says (a bcast's: the dtype's). The work vector,
   then per step a receive stage and a send stage, are one registered
   buffer, kept with the exchange. Every receive is posted with the
   exchange (spmd__x_pplan), the send of a step once the steps before it
   are combined (spmd__x_prun). Tags: the j-th message from one rank to
   another is SPMD__X_BSTEP(j), as Bruck's steps (the ranks' step numbers
   differ: a pre-step's pair has one more). Memory: the work vector and
   about 2n elements of stages for Rabenseifner, ceil(log2 P) n for
   recursive doubling (small operations only). */

static size_t spmd__x_line(size_t n) { return (n + 63) / 64 * 64; }

/* The kinds whose plans move data without combining it. */
static int spmd__x_moves(int kind) {
    return kind == SPMD__KIND_BCAST || kind == SPMD__KIND_SCATTER || kind == SPMD__KIND_GATHER ||
           kind == SPMD__KIND_ALLGATHER;
}
/* Bytes an element of r's plan messages: the accumulator's of a reduction
   (f16 and bf16 travel as f32), the dtype's of a bcast, all_gather, scatter
   or gather. */
static size_t spmd__x_pes(const spmd_req *r) {
    return spmd__x_moves(r->sig.kind) ? r->in_size : r->kern->acc_size;
}
/* Elements of r's work vector: an all_gather's, scatter's or gather's G
   blocks, else the input's. */
static size_t spmd__x_pn(const spmd_req *r) {
    int k = r->sig.kind, blocks = k == SPMD__KIND_SCATTER || k == SPMD__KIND_GATHER || k == SPMD__KIND_ALLGATHER;
    return blocks ? r->count * (size_t)r->gr->g->G : r->count;
}

/* r's plan (rank: its process's position in the group, whose members
   are its block, g->pblk; SPMD__ALG_RD: recursive doubling, or a
   bcast's or reduce's binomial tree; SPMD__ALG_RAB: Rabenseifner, or a
   bcast's or reduce's split form, a large bcast's chain over a few
   processes; a psum_scatter's: recursive halving, an all_gather's: its
   mirror). 1 for the chain (its links carry data one way), else 0. */
static int spmd__x_plan_of(const spmd_req *r, spmd__plan_x *x) {
    const spmd__group *g = r->gr->g;
    int P = g->nrp + 1, me = g->ppos, rd = r->sig.algo == SPMD__ALG_RD, root = r->root / g->pblk;
    int64_t n = (int64_t)r->count;
    if (r->sig.kind == SPMD__KIND_PSUM_SCATTER)
        (void)spmd__plan_rscatter(P, me, n / P, x);
    else if (r->sig.kind == SPMD__KIND_ALLGATHER)
        (void)spmd__plan_allgather(P, me, (int64_t)spmd__x_pn(r) / P, x);
    else if (r->sig.kind == SPMD__KIND_SCATTER || r->sig.kind == SPMD__KIND_GATHER)
        (void)spmd__plan_scatter(r->sig.kind == SPMD__KIND_GATHER, P, me, root, n, x);
    else if (r->sig.kind == SPMD__KIND_BCAST && !rd && spmd__plan_chains(P, r->count * r->in_size))
        return spmd__plan_bcast_chain(P, me, root, n, x) == 0;
    else if (r->sig.kind == SPMD__KIND_BCAST)
        (void)(rd ? spmd__plan_bcast(P, me, root, n, x) : spmd__plan_bcast_split(P, me, root, n, x));
    else if (r->sig.kind == SPMD__KIND_REDUCE)
        (void)(rd ? spmd__plan_reduce(P, me, root, n, x) : spmd__plan_reduce_split(P, me, root, n, x));
    else
        (void)spmd__plan_allreduce(rd ? SPMD__PLAN_RD : SPMD__PLAN_RAB, P, me, n, x);
    return 0;
}

/* n elements of r's input at src into the work vector at w: as the
   accumulator's type (a bcast's, scatter's or gather's: as they are). */
static void spmd__x_pconv(const spmd_req *r, unsigned char *w, const unsigned char *src, size_t n) {
    if (!spmd__x_moves(r->sig.kind) && r->kern->load) r->kern->load(w, src, n);
    else memcpy(w, src, n * r->in_size);
}
/* Elements [at, at + n) of this process's L inputs ins (its block of
   the group, in member order) into the work vector at w: as the
   accumulator's type, several combined in the canonical order (a subtree
   of the group's, see g->pblk); a bcast's root's as it is. */
static void spmd__x_pcomb(const spmd_req *r, unsigned char *w, const void *const *ins, int L, size_t at, size_t n) {
    const void **src = r->dev->ptrs; /* (3 x the mesh's devices) */
    spmd__kern acc;
    int j;
    if (L == 1 || spmd__x_moves(r->sig.kind)) {
        spmd__x_pconv(r, w, (const unsigned char *)ins[0] + at * r->in_size, n);
        return;
    }
    acc = *r->kern; /* (no fin: the partial stays in the accumulator's type) */
    acc.fin = NULL;
    acc.out_size = acc.acc_size;
    for (j = 0; j < L; j++) src[j] = (const unsigned char *)ins[j] + at * r->in_size;
    spmd__reduce(&acc, w, src, L, n);
}
/* Where member i's block of a psum_scatter's or all_gather's work vector
   starts (elements): its process's block where its plan keeps it
   (spmd__plan_rs_pos), the process's members' blocks in order in it. */
static size_t spmd__x_rs_at(const spmd_req *r, int i) {
    const spmd__group *g = r->gr->g;
    int P = g->G / g->pblk;
    size_t n = spmd__x_pn(r);
    return (size_t)spmd__plan_rs_pos(P, i / g->pblk, (int64_t)(n / (size_t)P)) +
           (size_t)(i % g->pblk) * (n / (size_t)g->G);
}

/* This process's L inputs ins (member order) into r's work vector (a
   bcast's and a scatter's: the root's only, L = 1 but for a bcast); a
   psum_scatter's member blocks where spmd__x_rs_at says, each block's
   rows of the scatter dimension together, an all_gather's inputs there
   too; a scatter's and gather's blocks
   in the order of the ranks relative to the root (spmd__plan_scatter). */
static void spmd__x_pload(const spmd_req *r, unsigned char *w, const void *const *ins, int L) {
    const unsigned char *in = (const unsigned char *)ins[0];
    const spmd__group *g = r->gr->g;
    size_t acc = spmd__x_pes(r), G = (size_t)g->G, i, o, me = (size_t)r->gr->me, root = (size_t)r->root;
    size_t blk = r->count * r->in_size;
    if (r->sig.kind == SPMD__KIND_BCAST && L > 1) {
        if (g->lidx[root] >= 0) memcpy(w, ins[g->lidx[root]], blk);
        return;
    }
    if ((r->sig.kind == SPMD__KIND_BCAST || r->sig.kind == SPMD__KIND_SCATTER) && me != root) return;
    if (r->sig.kind == SPMD__KIND_SCATTER) { /* relative block v is member v + root's */
        memcpy(w, in + root * blk, (G - root) * blk);
        memcpy(w + (G - root) * blk, in, root * blk);
        return;
    }
    if (r->sig.kind == SPMD__KIND_GATHER) {
        memcpy(w + (me + G - root) % G * blk, in, blk);
        return;
    }
    if (r->sig.kind == SPMD__KIND_ALLGATHER) {
        for (i = 0; i < (size_t)L; i++) memcpy(w + spmd__x_rs_at(r, g->locs[i]) * acc, ins[i], blk);
        return;
    }
    if (r->sig.kind != SPMD__KIND_PSUM_SCATTER) {
        spmd__x_pcomb(r, w, ins, L, 0, r->count);
        return;
    }
    for (i = 0; i < G; i++) {
        size_t at = spmd__x_rs_at(r, (int)i);
        for (o = 0; o < r->outer; o++)
            spmd__x_pcomb(r, w + (at + o * r->inner) * acc, ins, L, (o * G + i) * r->inner, r->inner);
    }
}

/* Make x's plan state (first use), lay r's plan out in its buffer and post
   the receives. xlock held. */
static spmd_status spmd__x_pplan(spmd_req *r, spmd__xrec *x) {
    spmd_mesh *m = r->dev->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xplan *p = x->xp;
    size_t acc = spmd__x_pes(r), at;
    int s;
    if (!p) { /* ops for the longest plan of the group's size: 2 log2 P' + 2 steps, a chain's 2 C */
        int nops = 2 * (2 * spmd__log2(spmd__tree_leaves(g->G)) + 2);
        size_t head = spmd__x_line(sizeof *p);
        if (g->nrp < SPMD__PLAN_CHAIN_MAX && nops < 4 * SPMD__PLAN_CHUNKS) nops = 4 * SPMD__PLAN_CHUNKS;
        p = (spmd__xplan *)spmd__alloc(&m->alloc, head + (size_t)nops * sizeof(spmd__fab_op));
        if (!p) return spmd__fail(r->dev, SPMD_ERR_NOMEM, "%s: out of memory for its plan", spmd__x_what(r));
        p->op = (spmd__fab_op *)(void *)((unsigned char *)p + head);
        p->nops = nops;
        x->xp = p;
    }
    p->wide = spmd__x_plan_of(r, &p->plan);
    SPMD_ASSERT(2 * p->plan.nsteps <= p->nops);
    at = spmd__x_line(spmd__x_pn(r) * acc);
    for (s = 0; s < p->plan.nsteps; s++) {
        int j, peer = p->plan.step[s].peer;
        p->nth[2 * s] = p->nth[2 * s + 1] = 0;
        for (j = 0; j < s; j++) {
            p->nth[2 * s] += p->plan.step[j].peer == peer && p->plan.step[j].rlen;
            p->nth[2 * s + 1] += p->plan.step[j].peer == peer && p->plan.step[j].slen;
        }
        p->at[2 * s] = at;
        at += spmd__x_line(SPMD__X_SHDR + (size_t)p->plan.step[s].rlen * acc);
        p->at[2 * s + 1] = at;
        at += spmd__x_line(SPMD__X_SHDR + (size_t)p->plan.step[s].slen * acc);
    }
    if (p->cap < at) {
        if (p->buf) {
            spmd__fab_mr_forget(f, p->buf, p->cap);
            spmd__free(&m->alloc, p->buf);
        }
        p->cap = 0;
        if (!(p->buf = (unsigned char *)spmd__alloc(&m->alloc, at)))
            return spmd__fail(r->dev, SPMD_ERR_NOMEM, "%s: no memory for the exchange's %zu bytes", spmd__x_what(r),
                              at);
        p->cap = at;
        spmd__fab_mr_own(f, p->buf, at);
    }
    p->done = p->sent = p->loaded = p->busy = 0;
    for (s = 0; s < p->plan.nsteps; s++) {
        const spmd__pstep *t = &p->plan.step[s];
        int from = g->procs[t->peer];
        spmd_status st;
        if (!t->rlen) continue;
        p->op[2 * s].wide = p->wide;
        st = spmd__fab_post_recv(f, &p->op[2 * s], from, SPMD__FAB_TAG(g->gid, r->gseq, SPMD__X_BSTEP(p->nth[2 * s])),
                                 p->buf + p->at[2 * s], SPMD__X_SHDR + (size_t)t->rlen * acc, UINT64_MAX);
        if (st != SPMD_OK)
            return spmd__fail(r->dev, st, "%s over '%s': receiving from process %d: %s", spmd__x_what(r),
                              r->gr->text, from, f->err);
    }
    return SPMD_OK;
}

/* The bytes of input a header carries inline (the same for every exchange
   of the transport and header form): headers are sent before their receive
   may be posted, so with clear-to-send they must fit the provider's inject
   size (a larger one would stall later sends, see SPMD__X_CTS). The header
   is the short form (spmd__x_post) unless check mode or a group of 65536
   members and more: net's inject size (128) leaves 64 bytes after the
   48-byte short header, none after the 128-byte long one. */
static size_t spmd__x_inline(const spmd_mesh *m, int G) {
    const spmd__fab *f = m->lf.fab;
    size_t lim = f->cts && f->inject < f->xseg ? f->inject : f->xseg; /* (xseg <= seg) */
    size_t hdr = m->check || G > 65535 ? SPMD__X_HDR : SPMD__X_SHDR;
    size_t inl = lim > hdr ? lim - hdr : 0;
    return (inl < SPMD__X_INLINE ? inl : SPMD__X_INLINE) & ~(size_t)63;
}

/* Rooted calls are one way outside check mode, as Open MPI's: member k's
   header goes to process p only where p reads it (a bcast's or scatter's
   root's header to every process, the others' headers to the root's
   process of a reduce or gather), and on every (max_inflight / 2)-th
   operation of the group, an acknowledgement: a one-way member whose call
   s finds the acknowledgements of operation spmd__x_ack_due(s) still to
   come waits, so it runs at most max_inflight operations ahead. Both ends
   decide from the call alone (a mismatched call may then wait for a header
   that does not come: the member that reads the mismatch breaks the mesh,
   which ends that wait). Every other exchange sends every header. */
static uint64_t spmd__x_ack_every(const spmd_mesh *m) { return m->D > 1 ? (uint64_t)m->D / 2 : 1; } /* a power of two */
static inline int spmd__x_hdr_to(const spmd_req *r, int k, int p) {
    const spmd_mesh *m = r->dev->mesh;
    uint64_t a;
    if (!spmd__rooted(r->sig.kind) && r->sig.kind != SPMD__KIND_PPERMUTE) return 1;
    a = spmd__x_ack_every(m);
    if (m->check || r->sig.algo == SPMD__ALG_BRUCK || (r->gseq & (a - 1)) == a - 1) return 1; /* (a mask: no division per call) */
    if (r->sig.kind == SPMD__KIND_PPERMUTE) return spmd__x_wants(r, k, p); /* the processes of k's destinations */
    if (r->sig.kind == SPMD__KIND_BCAST || r->sig.kind == SPMD__KIND_SCATTER) return k == r->root;
    return m->proc_of[r->gr->g->members[r->root]] == p;
}
/* The acknowledging operation call s must have heard from (the one in
   [s - D, s - D + a - 1]), or UINT64_MAX for none yet. */
static uint64_t spmd__x_ack_due(const spmd_mesh *m, uint64_t s) {
    uint64_t a = spmd__x_ack_every(m), u;
    if (s + a < (uint64_t)m->D + 1) return UINT64_MAX;
    u = s + a - 1 - (uint64_t)m->D;
    return u - ((u + 1) & (a - 1));
}

/* Exchanges left by all their local members whose last headers (which
   nobody needed: a rooted call's) came since are spare again. xlock held. */
static void spmd__x_reap(spmd__fab *f, spmd__group *g) {
    spmd__xrec **pp, *x;
    for (pp = &g->lf.xlive; (x = *pp) != NULL;) {
        if (x->left != g->nloc || !spmd__fab_ops_idle(f, x->rop, 3 * (size_t)g->G) ||
            !spmd__fab_ops_idle(f, x->aop, 4 * (size_t)g->nrp) || /* (a failed Bruck exchange's steps) */
            (x->xp && !spmd__fab_ops_idle(f, x->xp->op, (size_t)x->xp->nops))) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        x->next = g->lf.xfree;
        g->lf.xfree = x;
        g->lf.xnlive--;
    }
}

/* The exchange of operation gseq, made (and its header receives posted) by
   the first local member to come; SPMD_ERR_BUSY (nothing said) while the
   group has max_inflight exchanges listed. xlock held. */
/* A new exchange record for group g: one block holding the record, its
   ops, its header buffers (registered), and its per-member arrays; NULL
   without memory. */
static spmd__xrec *spmd__x_make(spmd_mesh *m, spmd__group *g) {
    spmd__fab *f = m->lf.fab;
    int G = g->G;
    spmd__xrec *x;
    size_t inl = spmd__x_inline(m, G);
    size_t nops = spmd__x_nops(g), hb, at, nb = (size_t)G + 2 * (size_t)g->nrp + 3;
    unsigned char *blk;
    hb = SPMD__X_HDR + inl;
    /* header, ops, hbuf (line-aligned sizes), pointers, sizes, flags */
    at = (sizeof *x + SPMD__LINE - 1) / SPMD__LINE * SPMD__LINE;
    blk = (unsigned char *)spmd__alloc(&m->alloc, at + nops * sizeof(spmd__fab_op) + (size_t)G * hb +
                                                      7 * (size_t)G * sizeof(void *) + nb * sizeof(size_t) +
                                                      3 * (size_t)G +
                                                      (size_t)(g->nloc * g->nrp) + (size_t)g->nrp + 1);
    if (!blk) return NULL;
    x = (spmd__xrec *)(void *)blk;
    x->inl = inl;
    x->hb = hb;
    x->rop = (spmd__fab_op *)(void *)(blk + at);
    x->sop = x->rop + 3 * (size_t)G;
    x->aop = x->sop + 3 * (size_t)(g->nloc * g->nrp);
    x->hbuf = (unsigned char *)(x->aop + 4 * (size_t)g->nrp);
    spmd__fab_mr_own(f, x->hbuf, (size_t)G * hb);
    x->stage = (unsigned char **)(void *)(x->hbuf + (size_t)G * hb); /* hb: a multiple of 64 */
    x->stage_cap = (size_t *)(void *)(x->stage + G);
    x->bat = x->stage_cap + G;
    x->boff = x->bat + G;
    x->in = (const void **)(void *)(x->bat + nb); /* from here on: cleared per operation */
    x->meta = (const int64_t **)(void *)(x->in + G);
    x->out = (void **)(x->meta + G);
    x->pdst = (unsigned char **)(void *)(x->out + G);
    x->pre = (size_t *)(void *)(x->pdst + G);
    x->have = (uint8_t *)(void *)(x->pre + G);
    x->cst = x->have + G;
    x->copied = x->cst + G;
    x->dsent = x->copied + G;
    x->asent = x->dsent + g->nloc * g->nrp;
    x->reset = (size_t)(x->asent + g->nrp - (uint8_t *)(void *)x->in);
    return x;
}

/* The receives an exchange posts at once: every header that comes, the
   large inputs of known size (so that the transfer runs before the header
   is read: by a progress thread, or while the caller computes between
   start and wait), and for a split sum the other processes' slices. */
static spmd_status spmd__x_recvs(spmd_req *r, spmd__xrec *x) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    int G = g->G, k;
    for (k = 0; k < G; k++) {
        spmd_status st;
        if (g->lidx[k] >= 0) continue;
        if (!spmd__x_hdr_to(r, k, m->proc)) { /* one way: no header comes */
            x->have[k] = 2;
            continue;
        }
        st = spmd__fab_post_recv_upto(f, &x->rop[3 * k], m->proc_of[g->members[k]],
                                      SPMD__FAB_TAG(g->gid, r->gseq, 2 * k), x->hbuf + (size_t)k * x->hb, x->hb,
                                      UINT64_MAX);
        if (st != SPMD_OK) return spmd__fail(d, st, "receiving device %d's header: %s", g->members[k], f->err);
    }
    /* large inputs of known size */
    for (k = 0; k < G; k++) {
        int64_t e = g->lidx[k] < 0 && spmd__x_wants(r, k, m->proc) ? spmd__x_expect(r, k) : -1;
        spmd_status st;
        unsigned char *dst;
        size_t len;
        if (e <= (int64_t)x->inl) continue;
        if (r->sig.algo == SPMD__ALG_SPLIT) { /* only our slice, at the start of the stage */
            size_t off;
            spmd__x_range(r, m->proc, (size_t)e, &off, &len);
            if ((st = spmd__x_stage(r, x, k, len)) != SPMD_OK) return st;
            dst = x->stage[k];
            st = spmd__fab_post_recv(f, &x->rop[3 * k + 1], m->proc_of[g->members[k]],
                                     SPMD__FAB_TAG(g->gid, r->gseq, 2 * k + 1), dst, len, UINT64_MAX);
        } else if ((dst = spmd__x_land(r, k, (size_t)e, &len)) != NULL) {
            /* straight into this member's output (the others copy from
               there; this member then waits for them) */
            x->hold = 1;
            st = spmd__fab_post_recv(f, &x->rop[3 * k + 1], m->proc_of[g->members[k]],
                                     SPMD__FAB_TAG(g->gid, r->gseq, 2 * k + 1), dst, len, UINT64_MAX);
        } else {
            size_t off, len;
            if ((st = spmd__x_stage(r, x, k, (size_t)e)) != SPMD_OK) return st;
            dst = x->stage[k];
            spmd__x_range(r, m->proc, (size_t)e, &off, &len);
            st = spmd__fab_post_recv(f, &x->rop[3 * k + 1], m->proc_of[g->members[k]],
                                     SPMD__FAB_TAG(g->gid, r->gseq, 2 * k + 1), dst + off, len, UINT64_MAX);
        }
        x->pdst[k] = dst;
        if (st == SPMD_OK) st = spmd__x_clear(r, x, k);
        if (st != SPMD_OK) return spmd__fail(d, st, "receiving device %d's input: %s", g->members[k], f->err);
        x->pre[k] = (size_t)e;
    }
    if (r->sig.algo == SPMD__ALG_SPLIT)
        /* the other processes' slices of the sum land in the leader's
           output; their clear-to-send go out, ours are awaited */
        for (k = 0; k < g->nrp; k++) {
            spmd__fab_op *op = &x->aop[4 * k];
            int p = g->rprocs[k];
            uint64_t tag = SPMD__FAB_TAG(g->gid, r->gseq, 2 * G);
            size_t lo, hi;
            spmd_status st;
            spmd__x_slice(r, p, &lo, &hi);
            st = spmd__fab_post_recv(f, op, p, tag, (unsigned char *)r->recv + lo * r->out_size,
                                     (hi - lo) * r->out_size, UINT64_MAX);
            if (st == SPMD_OK && f->cts) st = spmd__x_send(r, op + 1, p, tag | SPMD__X_CTS, NULL, 0, UINT64_MAX);
            if (st == SPMD_OK && f->cts) st = spmd__fab_post_recv(f, op + 3, p, tag | SPMD__X_CTS, NULL, 0, UINT64_MAX);
            if (st != SPMD_OK) return spmd__fail(d, st, "receiving process %d's part of the sum: %s", p, f->err);
        }
    return SPMD_OK;
}

/* The first local member to fail in exchange x says why (xlock held, or x
   not yet shared): the others quote it (spmd__x_gone). The mesh's break,
   which names the cause too, is recorded later: a sibling may look first. */
static void spmd__x_gone_set(spmd__xrec *x, spmd_status st, int dev, const char *why) {
    if (x->gone != SPMD_OK) return;
    snprintf(x->gone_msg, sizeof x->gone_msg, "device %d: %.290s", dev, why);
    x->gone = st;
}

static spmd_status spmd__x_get(spmd_req *r, spmd__xrec **out) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x;
    spmd_status st;
    for (x = g->lf.xlive; x; x = x->next)
        if (x->gseq == r->gseq) { *out = x; return SPMD_OK; }
    spmd__x_reap(f, g);
    if (g->lf.xnlive >= m->D) return SPMD_ERR_BUSY; /* max_inflight operations of the group in flight */
    {
        uint64_t due = spmd__x_ack_due(m, r->gseq);
        for (x = g->lf.xlive; x && due != UINT64_MAX; x = x->next)
            if (x->gseq <= due && x->left == g->nloc) /* left, its acknowledgement still to come */
                return SPMD_ERR_BUSY;
    }
    x = g->lf.xfree;
    if (x) {
        g->lf.xfree = x->next;
    } else if (!(x = spmd__x_make(m, g))) {
        return spmd__fail(d, SPMD_ERR_NOMEM, "out of memory for an exchange");
    }
    x->gseq = r->gseq;
    x->left = x->all_in = x->taken = x->joins = x->seen_joins = x->scan0 = 0;
    x->seen_moved = UINT64_MAX;
    x->lead = r->gr->me;
    x->red = 0;
    x->hold = r->sig.algo == SPMD__ALG_SPLIT;
    x->gone = SPMD_OK;
    x->refused = 0;
    x->refused_st = SPMD_OK;
    x->bsteps = x->bsent = x->brecv = x->bparsed = 0;
    x->sig = r->sig;
    memset((void *)x->in, 0, x->reset); /* inputs, outputs, receives, states: nothing yet */
    x->next = g->lf.xlive;
    g->lf.xlive = x;
    g->lf.xnlive++;
    if (r->sig.algo == SPMD__ALG_BRUCK || spmd__alg_plans(r->sig.algo)) {
        st = r->sig.algo == SPMD__ALG_BRUCK ? spmd__x_bplan(r, x) : spmd__x_pplan(r, x);
        if (st == SPMD_OK) *out = x;
        else spmd__x_gone_set(x, st, d->id, d->err); /* the other local members must not use it */
        return st;
    }
    if ((st = spmd__x_recvs(r, x)) != SPMD_OK) return st;
    *out = x;
    return SPMD_OK;
}

/* A device in a message: "device 3 (process 1)". */
static const char *spmd__x_who(const spmd_mesh *m, int dev, char *buf, size_t len) {
    snprintf(buf, len, "device %d (process %d)", dev, m->proc_of[dev]);
    return buf;
}

/* r's member's short header at h (SPMD__X_SHDR bytes), for len bytes of data. */
/* The signature r's header carries: a refused call's (spmd__stand_in) is
   its own with the refusal and its status in the aux word, which its peers
   read as that refusal (spmd__sig_refused), not as a mismatch. */
#define SPMD__AUX_REFUSED 0x5245465553454400ull /* "REFUSED", the status in the low byte */
static spmd__sig spmd__x_sig_out(const spmd_req *r) {
    spmd__sig s = r->sig;
    if (r->refusing) s.aux ^= SPMD__AUX_REFUSED | (uint64_t)r->refusing;
    return s;
}
/* A header's signature h against r's own: the status of the refusal it
   says (the same call, refused), or SPMD_OK. */
static spmd_status spmd__sig_refused(const spmd__sig *h, const spmd__sig *mine) {
    uint64_t x = h->aux ^ mine->aux;
    spmd__sig t = *h;
    t.aux = mine->aux;
    if ((x & ~(uint64_t)0xff) != SPMD__AUX_REFUSED || !(x & 0xff) || (x & 0xff) >= SPMD_STATUS_COUNT ||
        spmd__sig_differs(&t, mine, 1))
        return SPMD_OK;
    return (spmd_status)(x & 0xff);
}

static void spmd__x_short(void *h, const spmd_req *r, int inl, size_t len) {
    spmd__xshort *sh = (spmd__xshort *)h;
    memset(sh, 0, SPMD__X_SHDR);
    sh->magic = SPMD__X_MAGIC_SHORT;
    sh->member = (uint16_t)r->gr->me;
    sh->has_inline = (uint16_t)inl;
    sh->ghash = (uint32_t)r->gr->g->xhash;
    sh->gseq = (uint32_t)r->gseq;
    sh->data_len = (uint32_t)len;
    sh->sig = spmd__x_sig_out(r);
}

/* A member of this process failed in the exchange r takes part in (x->gone,
   seen under xlock): fail r with that status and that member's reason. */
static spmd_status spmd__x_gone(spmd_req *r, const spmd__xrec *x) {
    return spmd__fail(r->dev, x->gone, "%s over '%s': another device of this process failed in it: %s",
                      spmd__x_what(r), r->gr->text, x->gone_msg);
}

/* Take part: publish this member's input, post its sends. 0 on failure (r failed). */
/* Ragged: offsets and sizes then the operand, in one message; in place:
   the input must outlive the output being written (one carried inline is
   copied into its header). Both go from a copy (r->xscratch, kept for a
   retry). *data: the bytes to send. 0, or -1 without memory. */
static int spmd__x_copy_in(spmd_req *r, size_t len, const unsigned char **data) {
    spmd_mesh *m = r->dev->mesh;
    int ragged = r->sig.kind == SPMD__KIND_RAGGED;
    *data = (const unsigned char *)(r->xscratch ? r->xscratch : r->send);
    if (!len || r->xscratch || r->sig.algo == SPMD__ALG_BRUCK || spmd__alg_plans(r->sig.algo) ||
        !(ragged || (r->send && r->send == r->recv && len > spmd__x_inline(m, r->gr->g->G))))
        return 0;
    /* ragged: offsets and sizes then the operand, in one message; in
       place: the input must outlive the output being written (one
       carried inline is copied into its header) */
    r->xscratch = spmd__alloc(&m->alloc, len);
    if (!r->xscratch) return -1;
    spmd__fab_mr_own(m->lf.fab, r->xscratch, len);
    if (ragged) {
        memcpy(r->xscratch, r->meta, r->meta_bytes);
        if (len > r->meta_bytes)
            memcpy((unsigned char *)r->xscratch + r->meta_bytes, r->send, len - r->meta_bytes);
    } else {
        memcpy(r->xscratch, r->send, len);
    }
    *data = (const unsigned char *)r->xscratch;
    return 0;
}

/* r's header into hb: the short one (16 bytes) where it says enough, else
   the long one (check mode, large sizes, many members). Its size. */
static size_t spmd__x_header(spmd_req *r, unsigned char *hb, int inl, size_t len) {
    spmd_dev *d = r->dev;
    spmd__group *g = r->gr->g;
    spmd__xhdr *h;
    int me = r->gr->me;
    if (r->sig.algo == SPMD__ALG_BRUCK || (!d->mesh->check && len <= UINT32_MAX && g->G <= 65535)) {
        spmd__x_short(hb, r, inl, len);
        return SPMD__X_SHDR;
    }
    h = (spmd__xhdr *)(void *)hb;
    memset(h, 0, SPMD__X_HDR);
    h->magic = SPMD__X_MAGIC;
    h->member = (uint32_t)me;
    h->ghash = g->xhash;
    h->gseq = r->gseq;
    h->global = r->global;
    h->data_len = len;
    h->sig = spmd__x_sig_out(r);
    h->has_inline = (uint32_t)inl;
    memcpy(h->axes, r->gr->text, sizeof h->axes); /* the receiver ends it at its last byte */
    if (d->check_sites) spmd__site_text(r->site, d->site_mod, h->site, sizeof h->site);
    return SPMD__X_HDR;
}

/* How many of r's data sends may be in flight at once: all_to_all and
   ragged_all_to_all send each peer its own block, so a large one goes
   to its peers in pairwise order (the next process first) at most
   SPMD__X_WINDOW at a time, as MPI libraries throttle theirs (memory
   registered and receivers' buffers busy at once, not all P - 1); every
   other kind sends one input to all at once. 0: no limit. A window's
   use is counted (spmd_counters.inflight, the lock). */
#define SPMD__X_WINDOW 8
static int spmd__x_window(const spmd_req *r) {
    return r->sig.kind == SPMD__KIND_ALLTOALL || r->sig.kind == SPMD__KIND_RAGGED ? SPMD__X_WINDOW : 0;
}
static void spmd__x_inflight(spmd_req *r, int n) {
    spmd__fab *f = r->dev->mesh->lf.fab;
    spmd__slock(&f->lock);
    if (n > f->cinfl[r->sig.kind]) f->cinfl[r->sig.kind] = n;
    spmd__sunlock(&f->lock);
}

/* r's sends to every other process of its group: the header (with the
   input inline when it fits), then the input itself, at once or (with
   clear-to-send, or beyond r's window) later (spmd__x_sends). */
static spmd_status spmd__x_send_all(spmd_req *r, spmd__xrec *x, unsigned char *hb, size_t hsize, int inl, size_t len,
                                    const unsigned char *data) {
    spmd_dev *d = r->dev;
    spmd__fab *f = d->mesh->lf.fab;
    spmd__group *g = r->gr->g;
    int me = r->gr->me, li = g->lidx[me], j, win = spmd__x_window(r), busy = 0;
    spmd_status st;
    for (j = 0; j < g->nrp; j++) {
        /* in pairwise order: the next process after this one first, so that
           the processes' large messages do not all start with the same one */
        int i = (j + g->ppos) % g->nrp, p = g->rprocs[i];
        size_t at = (size_t)li * (size_t)g->nrp + (size_t)i;
        spmd__fab_op *op = &x->sop[3 * at];
        uint64_t dtag = SPMD__FAB_TAG(g->gid, r->gseq, 2 * me + 1);
        if (!spmd__x_hdr_to(r, me, p)) { /* one way: p reads neither header nor data */
            x->dsent[at] = 1;
            continue;
        }
        st = spmd__x_send(r, op, p, SPMD__FAB_TAG(g->gid, r->gseq, 2 * me), hb, hsize + (inl ? len : 0),
                                 UINT64_MAX);
        if (st == SPMD_OK && (inl || !len || !spmd__x_wants(r, me, p))) {
            x->dsent[at] = 1; /* nothing more for p */
        } else if (st == SPMD_OK && f->cts) {
            st = spmd__fab_post_recv(f, op + 2, p, dtag | SPMD__X_CTS, NULL, 0, UINT64_MAX);
        } else if (st == SPMD_OK && win && busy == win) {
            r->lf.xwait = 1; /* beyond the window: spmd__x_sends posts it */
        } else if (st == SPMD_OK) {
            size_t off, n;
            spmd__x_range(r, p, len, &off, &n);
            st = spmd__x_send(r, op + 1, p, dtag, data + off, n, UINT64_MAX);
            x->dsent[at] = 1;
            busy++;
        }
        if (st != SPMD_OK) return spmd__fail(d, st, "%s over '%s': sending to process %d: %s",
                                             spmd__x_what(r), r->gr->text, p, f->err);
    }
    if (win && busy) spmd__x_inflight(r, busy);
    return SPMD_OK;
}

static spmd_status spmd__x_post(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    int me = r->gr->me, li = g->lidx[me], ragged = r->sig.kind == SPMD__KIND_RAGGED, inl;
    int stepped = r->sig.algo == SPMD__ALG_BRUCK || spmd__alg_plans(r->sig.algo); /* (the sends go by steps) */
    size_t len = r->in_bytes, hsize;
    const unsigned char *data;
    unsigned char *hb;
    spmd__xrec *x = NULL;
    spmd_status st;
    if (spmd__x_copy_in(r, len, &data) != 0) return spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory for a copy of the input", spmd__x_what(r));
    pthread_mutex_lock(&m->xlock);
    st = spmd__x_get(r, &x);
    if (st != SPMD_OK) {
        pthread_mutex_unlock(&m->xlock);
        return st; /* the copy of the input stays for the next try */
    }
    if ((r->sig.algo == SPMD__ALG_BRUCK || x->sig.algo == SPMD__ALG_BRUCK ||
         (g->pblk > 1 && (spmd__alg_plans(r->sig.algo) || spmd__alg_plans(x->sig.algo)))) &&
        (x->gone != SPMD_OK || spmd__sig_differs(&r->sig, &x->sig, 0))) {
        /* the records (Bruck), or the plan that combines the process's
           inputs, were laid out for the first member's call: another call
           cannot take part (its record or input would not fit) */
        char a[96], b[96];
        spmd__sig_text(&r->sig, a, sizeof a);
        spmd__sig_text(&x->sig, b, sizeof b);
        pthread_mutex_unlock(&m->xlock);
        if (x->gone != SPMD_OK)
            return spmd__x_gone(r, x);
        return spmd__fail(d, SPMD_ERR_MISMATCH, "device %d called %s over '%s' but another device of this process "
                          "called %s (operation #%llu of this device)", d->id, a, r->gr->text, b,
                          (unsigned long long)r->global);
    }
    if (spmd__alg_plans(r->sig.algo)) { /* the input into the work vector (several members a process: all
                                           at once, spmd__x_plocal); the steps send (spmd__x_prun) */
        const void *in = data;
        if (g->pblk == 1) spmd__x_pload(r, x->xp->buf, &in, 1);
        hb = NULL;
        inl = 1;
        x->copied[me] = g->pblk == 1;
    } else if (r->sig.algo == SPMD__ALG_BRUCK) { /* the record in this process's block (see spmd__x_bplan) */
        SPMD_ASSERT((int64_t)len == spmd__x_expect(r, me));
        hb = x->bbuf + x->bat[me];
        inl = 1;
    } else {
        hb = x->hbuf + (size_t)me * x->hb;
        inl = len <= x->inl;
    }
    hsize = hb ? spmd__x_header(r, hb, inl, len) : 0;
    if (inl && hb) {
        if (len) memcpy(hb + hsize, data, len);
        data = hb + hsize;
        x->copied[me] = 1;
    }
    x->meta[me] = ragged ? (const int64_t *)(const void *)data : NULL;
    x->in[me] = ragged ? data + r->meta_bytes : data;
    x->out[me] = r->recv;
    x->cst[me] = r->two_phase && !r->recv_ready ? SPMD__XC_NORECV : SPMD__XC_JOINED;
    x->have[me] = 2;
    x->joins++;
    if (r->refusing) { /* its local peers read no header of it */
        x->refused = me + 1;
        x->refused_st = r->refusing;
    }
    r->lf.xr = x;
    if (ragged) r->xmeta = x->meta;
    if (stepped) { /* no sends of its own: the process's go in spmd__x_bscan (a plan's in spmd__x_prun) */
        memset(x->dsent + (size_t)li * (size_t)g->nrp, 1, (size_t)g->nrp);
    }
    pthread_mutex_unlock(&m->xlock);
    r->lf.xdata = data;
    if (stepped) return SPMD_OK;
    return spmd__x_send_all(r, x, hb, hsize, inl, len, data);
}

/* Data sends waiting for their clear-to-send or for room in r's window
   (spmd__x_window): post those that may go. SPMD_OK, or the failure
   (d->err says). */
static spmd_status spmd__x_sends(spmd_req *r) {
    spmd__fab *f = r->dev->mesh->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int i, j, me = r->gr->me, win = spmd__x_window(r), busy = 0, waiting = 0, posted = 0;
    size_t row = (size_t)g->lidx[me] * (size_t)g->nrp; /* this member's sends */
    spmd__fab_op *mine = &x->sop[3 * row];
    uint8_t *dsent = x->dsent + row;
    for (i = 0; win && i < g->nrp; i++) busy += spmd__fab_peek(f, &mine[3 * i + 1]) == SPMD_ERR_BUSY;
    for (j = 0; j < g->nrp; j++) {
        spmd__fab_op *op;
        spmd_status st = SPMD_OK;
        i = (j + g->ppos) % g->nrp; /* pairwise order, as spmd__x_post */
        op = &mine[3 * i];
        if (dsent[i]) continue;
        if (win && busy == win) { waiting = 1; break; }
        if (f->cts) st = spmd__fab_peek(f, op + 2);
        if (st == SPMD_ERR_BUSY) continue;
        if (st == SPMD_OK) {
            size_t off, n;
            spmd__x_range(r, g->rprocs[i], r->in_bytes, &off, &n);
            st = spmd__x_send(r, op + 1, g->rprocs[i], SPMD__FAB_TAG(g->gid, r->gseq, 2 * me + 1),
                              (const unsigned char *)r->lf.xdata + off, n, UINT64_MAX);
            busy++;
            posted = 1;
        }
        if (st != SPMD_OK)
            return spmd__fail(r->dev, st, "%s over '%s': sending to process %d: %s", spmd__x_what(r), r->gr->text,
                              g->rprocs[i], f->cts && (op + 2)->status ? (op + 2)->err : f->err);
        dsent[i] = 1;
    }
    if (win && posted) spmd__x_inflight(r, busy);
    r->lf.xwait = waiting;
    return SPMD_OK;
}


/* Does this process wait for member k's header? Rooted operations wait
   only for what their local members' outputs are made of (a bcast for the
   root's, a reduce on a process without the root for nothing), as on
   threads, and a ppermute for its local members' sources; check mode
   waits for all, to compare them. The other headers are read when they
   come, and the exchange is reused only after. */
static inline int spmd__x_needs(const spmd_req *r, int k) {
    const spmd__group *g = r->gr->g;
    const spmd_mesh *m = r->dev->mesh;
    if (m->check) return 1;
    switch (r->sig.kind) {
    case SPMD__KIND_BCAST:
    case SPMD__KIND_SCATTER: return k == r->root;
    case SPMD__KIND_REDUCE:
    case SPMD__KIND_GATHER: return m->proc_of[g->members[r->root]] == m->proc;
    case SPMD__KIND_PPERMUTE: return spmd__x_wants(r, k, m->proc);
    default: return 1;
    }
}

/* Member k's header did not parse (bad: why): the failure. */
static spmd_status spmd__x_bad(spmd_req *r, int k, const char *bad, size_t received) {
    char who[64];
    return spmd__fail(r->dev, *bad == 'm' ? SPMD_ERR_SYSTEM : SPMD_ERR_MISMATCH,
                      "%s over '%s': %s header (%zu bytes) from %s%s", spmd__x_what(r), r->gr->text, bad, received,
                      spmd__x_who(r->dev->mesh, r->gr->g->members[k], who, sizeof who),
                      *bad == 'm' ? "" : " (group ids collide, or the processes created different meshes)");
}

/* Member k's header h against r's signature: SPMD_OK, or the mismatch
   (d->err names both calls; spmd__x_mismatch writes it, apart, so that the
   common case fills no message buffers). */
static spmd_status spmd__x_mismatch(spmd_req *r, int k, const spmd__xview *h) {
    spmd_dev *d = r->dev;
    char a[96], b[96], that[SPMD__SITES_LEN + 32] = "", who[64], sites[SPMD__SITES_LEN];
    spmd__sig_text(&r->sig, a, sizeof a);
    spmd__sig_text(&h->sig, b, sizeof b);
    if (h->axes)
        snprintf(that, sizeof that, ", #%llu of that one%s", (unsigned long long)h->global,
                 spmd__site_clause(r, r->gr->g->members[k], h->site, sites, sizeof sites));
    return spmd__fail(d, SPMD_ERR_MISMATCH,
                      "device %d called %s over '%s' but %s called %s over '%s' (operation #%llu of this device%s)",
                      d->id, a, r->gr->text, spmd__x_who(d->mesh, r->gr->g->members[k], who, sizeof who), b,
                      h->axes ? h->axes : h->sig.axes_hash == r->sig.axes_hash ? r->gr->text
                                                                             : "? (SPMD_CHECK=1 names them)",
                      (unsigned long long)r->global, that);
}
/* A header that says its member refused the call is noted (its
   exchange's, or the quick request's) and read on: the exchange runs whole,
   and every local member then fails the call (spmd__x_outcome). */
static spmd_status spmd__x_vet(spmd_req *r, int k, const spmd__xview *h) {
    spmd_status s;
    if (!spmd__sig_differs(&h->sig, &r->sig, r->dev->mesh->check)) return SPMD_OK;
    if ((s = spmd__sig_refused(&h->sig, &r->sig)) == SPMD_OK) return spmd__x_mismatch(r, k, h);
    if (r->lf.xr) {
        r->lf.xr->refused = k + 1;
        r->lf.xr->refused_st = s;
    } else {
        r->lf.xrefused = k + 1;
        r->lf.xrefused_st = s;
    }
    return SPMD_OK;
}

/* How an exchange ends for r: a refused call's own status; SPMD_ERR_REFUSED
   when member by - 1 refused it; else SPMD_OK. */
static spmd_status spmd__x_outcome(spmd_req *r, int by, spmd_status st) {
    char who[64];
    if (r->refusing) return r->refusing; /* (its message is the refusal's) */
    if (!by) return SPMD_OK;
    return spmd__fail(r->dev, SPMD_ERR_REFUSED,
                      "%s over '%s' (operation #%llu of its group) is void: %s refused it with %s (its "
                      "spmd_last_error says why)", spmd__x_what(r), r->gr->text, (unsigned long long)r->gseq,
                      spmd__x_who(r->dev->mesh, r->gr->g->members[by - 1], who, sizeof who), spmd_status_name(st));
}

/* Read what arrived for the exchange. SPMD_OK once every input this
   process needs is here, SPMD_ERR_BUSY while some are missing, else the
   failure (d->err says). Not full: stops at the first input needed and
   not here (the next scan goes on from there). xlock held. */
static spmd_status spmd__x_scan(spmd_req *r, int full) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int k, ready = 1, all = 1, ragged = r->sig.kind == SPMD__KIND_RAGGED;
    char who[64];
#define WHO spmd__x_who(m, g->members[k], who, sizeof who)
    for (k = x->scan0; k < g->G; all &= x->have[k] == 2, k++) {
        spmd__fab_op *op = &x->rop[3 * k];
        spmd__xview h;
        const char *bad;
        spmd_status st;
        if (x->have[k] == 2) {
            if (all) x->scan0 = k + 1; /* (a prefix of members all here: not read again) */
            continue;
        }
        if (g->lidx[k] >= 0) { /* a local member yet to come */
            ready = 0;
            if (!full) break;
            continue;
        }
        if (x->have[k] == 1) {
            st = spmd__fab_peek(f, op + 1);
            if (st == SPMD_ERR_BUSY) { ready = 0; continue; }
            if (st != SPMD_OK)
                return spmd__fail(d, st, "%s over '%s': receiving the input of %s: %s", spmd__x_what(r), r->gr->text,
                                  WHO, spmd__fab_reason(op + 1));
            x->have[k] = 2;
            continue;
        }
        st = spmd__fab_peek(f, op);
        if (st == SPMD_ERR_BUSY) {
            ready &= !spmd__x_needs(r, k);
            if (!ready && !full) break;
            continue;
        }
        if (st != SPMD_OK)
            return spmd__fail(d, st, "%s over '%s': receiving from %s: %s", spmd__x_what(r), r->gr->text, WHO,
                              spmd__fab_reason(op));
        if (!spmd__x_parse(x->hbuf + (size_t)k * x->hb, op->received, k, g->xhash, r->gseq, x->inl, &h, &bad))
            return spmd__x_bad(r, k, bad, op->received);
        if ((st = spmd__x_vet(r, k, &h)) != SPMD_OK) return st;
        if (h.has_inline || !h.data_len || !spmd__x_wants(r, k, m->proc)) {
            const unsigned char *data = h.data;
            x->meta[k] = ragged ? (const int64_t *)(const void *)data : NULL;
            x->in[k] = ragged ? data + r->meta_bytes : data;
            x->have[k] = 2;
            continue;
        }
        if (ragged && h.data_len < r->meta_bytes)
            return spmd__fail(d, SPMD_ERR_SYSTEM, "%s: %s sent %llu bytes, less than the offsets",
                              spmd__x_what(r), WHO, (unsigned long long)h.data_len);
        if (x->pre[k]) { /* posted already, for the length the signature implies */
            if (h.data_len != x->pre[k])
                return spmd__fail(d, SPMD_ERR_MISMATCH, "%s over '%s': %s sends %llu bytes where this device "
                                  "expects %zu", spmd__x_what(r), r->gr->text, WHO,
                                  (unsigned long long)h.data_len, x->pre[k]);
        } else {
            size_t off, len;
            if ((st = spmd__x_stage(r, x, k, (size_t)h.data_len)) != SPMD_OK) return st;
            spmd__x_range(r, m->proc, (size_t)h.data_len, &off, &len);
            st = spmd__fab_post_recv(f, op + 1, m->proc_of[g->members[k]],
                                     SPMD__FAB_TAG(g->gid, r->gseq, 2 * k + 1), x->stage[k] + off, len, UINT64_MAX);
            if (st == SPMD_OK) st = spmd__x_clear(r, x, k);
            if (st != SPMD_OK)
                return spmd__fail(d, st, "%s over '%s': receiving the input of %s: %s", spmd__x_what(r),
                                  r->gr->text, WHO, f->err);
        }
        {
            unsigned char *buf = x->pre[k] ? x->pdst[k] : x->stage[k];
            x->meta[k] = ragged ? (const int64_t *)(const void *)buf : NULL;
            x->in[k] = ragged ? buf + r->meta_bytes : buf;
        }
        x->have[k] = 1;
        x->seen_moved = UINT64_MAX; /* (its data may be here already, or come at once: the next poll scans) */
        ready = 0;
    }
    x->all_in = all && k == g->G; /* (not when it stopped early) */
    if (ready && x->gone != SPMD_OK) /* a local member's input is the caller's again */
        return spmd__x_gone(r, x);
    return ready ? SPMD_OK : SPMD_ERR_BUSY;
}
#undef WHO

/* Step s (of n) of a Bruck exchange or a plan could not receive (op ended
   with st): the failure; a message of another size is a mismatch. */
static spmd_status spmd__x_step_failed(spmd_req *r, spmd_status st, int s, int n, const spmd__fab_op *op) {
    return spmd__fail(r->dev, st == SPMD_ERR_SIZE ? SPMD_ERR_MISMATCH : st, "%s over '%s': step %d of %d, from "
                      "process %d: %s%s", spmd__x_what(r), r->gr->text, s + 1, n, op->peer, spmd__fab_reason(op),
                      st == SPMD_ERR_SIZE ? " (the processes called different collectives or sizes; SPMD_CHECK=1 "
                      "names them)" : "");
}

/* The Bruck exchange's scan (see spmd__x_bplan): note the receives that
   ended, post the sends they allow, read the records once all are here.
   SPMD_OK once every input is here, SPMD_ERR_BUSY before, else the
   failure (d->err says). xlock held. */
static spmd_status spmd__x_bscan(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__fab *f = d->mesh->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int P = g->nrp + 1, k;
    spmd_status st;
    while (x->brecv < x->bsteps) {
        spmd__fab_op *op = &x->aop[2 * x->brecv];
        st = spmd__fab_peek(f, op);
        if (st == SPMD_ERR_BUSY) break;
        if (st != SPMD_OK) return spmd__x_step_failed(r, st, x->brecv, x->bsteps, op);
        x->brecv++;
    }
    while (x->bsent < x->bsteps && x->bsent <= x->brecv && x->joins == g->nloc) {
        int dd = 1 << x->bsent, n = dd < P - dd ? dd : P - dd, to = g->procs[(g->ppos - dd + P) % P];
        st = spmd__x_send(r, &x->aop[2 * x->bsent + 1], to,
                                 SPMD__FAB_TAG(g->gid, r->gseq, SPMD__X_BSTEP(x->bsent)), x->bbuf, x->boff[n],
                                 UINT64_MAX);
        if (st != SPMD_OK)
            return spmd__fail(d, st, "%s over '%s': sending step %d of %d to process %d: %s", spmd__x_what(r),
                              r->gr->text, x->bsent + 1, x->bsteps, to, f->err);
        x->bsent++;
    }
    if (x->brecv < x->bsteps) {
        /* a process of the group died: the steps that relay its block never
           come, even from processes that live (they wait for it too); it
           fails even when the dead one had sent its part: the group is
           broken either way */
        int lost = spmd__fab_first_lost(f, g->procs, P);
        if (lost >= 0)
            return spmd__fail(d, SPMD_ERR_PEER_LOST, "%s over '%s': process %d lost (it died or its host is "
                              "unreachable): its input cannot reach this process", spmd__x_what(r), r->gr->text, lost);
        return SPMD_ERR_BUSY;
    }
    if (x->joins < g->nloc) return SPMD_ERR_BUSY;
    for (k = 0; k < g->G && !x->bparsed; k++) {
        unsigned char *rec = x->bbuf + x->bat[k];
        size_t e = (size_t)spmd__x_expect(r, k);
        spmd__xview h;
        const char *bad;
        if (g->lidx[k] >= 0) continue;
        if (!spmd__x_parse(rec, SPMD__X_SHDR + e, k, g->xhash, r->gseq, e, &h, &bad)) {
            uint32_t magic;
            memcpy(&magic, rec, 4);
            if (magic == SPMD__X_MAGIC_SHORT) { /* say what differs, if the signature does */
                memset(&h, 0, sizeof h);
                memcpy(&h.sig, rec + offsetof(spmd__xshort, sig), sizeof h.sig);
                if ((st = spmd__x_vet(r, k, &h)) != SPMD_OK) return st;
            }
            return spmd__x_bad(r, k, bad, SPMD__X_SHDR + e);
        }
        if ((st = spmd__x_vet(r, k, &h)) != SPMD_OK) return st;
        x->in[k] = h.data;
        x->have[k] = 2;
    }
    x->bparsed = 1;
    if (x->gone != SPMD_OK) /* a local member's input is the caller's again */
        return spmd__x_gone(r, x);
    return SPMD_OK;
}

/* The refusal a plan message's short header h carries in its spare word
   (member + 1, its status << 24; 0: none seen upstream): 1 when well
   formed for a group of G (*by, *st: member + 1 and status, or 0), else 0. */
static int spmd__x_pseen(const unsigned char *h, int G, int *by, spmd_status *st) {
    uint32_t w;
    memcpy(&w, h + offsetof(spmd__xshort, pad), 4);
    *by = (int)(w & 0xffffffu);
    *st = (spmd_status)(w >> 24);
    return !w || (*by >= 1 && *by <= G && *st > SPMD_OK && (int)*st < SPMD_STATUS_COUNT);
}

/* A plan step's message came (its header at h): check it, note a refusal
   it carries, and copy or combine its elements into the work vector. */
static spmd_status spmd__x_pread(spmd_req *r, const spmd__pstep *t, unsigned char *h) {
    spmd__xrec *x = r->lf.xr;
    spmd__kernel k = r->kern;
    size_t es = spmd__x_pes(r), len = (size_t)t->rlen * es;
    unsigned char *w = x->xp->buf + (size_t)t->roff * es;
    spmd__xview v;
    const char *bad;
    int by, from = t->peer * r->gr->g->pblk; /* (its process's first member) */
    spmd_status st, by_st;
    if (!spmd__x_parse(h, SPMD__X_SHDR + len, from, r->gr->g->xhash, r->gseq, len, &v, &bad) || !v.is_short ||
        !v.has_inline)
        return spmd__x_bad(r, from, bad, SPMD__X_SHDR + len);
    if ((st = spmd__x_vet(r, from, &v)) != SPMD_OK) return st;
    if (!spmd__x_pseen(h, r->gr->g->G, &by, &by_st)) return spmd__x_bad(r, from, "malformed", SPMD__X_SHDR + len);
    if (by && !x->refused) {
        x->refused = by;
        x->refused_st = by_st;
    }
    if (t->how == SPMD__PLAN_COPY) memcpy(w, v.data, len);
    else if (t->how == SPMD__PLAN_LEFT) k->comb(w, v.data, w, (size_t)t->rlen); /* the lower ranks' on the left */
    else k->comb(w, w, v.data, (size_t)t->rlen);
    x->have[from] = 2;
    return SPMD_OK;
}

/* r's output from its work vector w once the plan is done (as
   spmd__x_pload laid it out); a reduce's and a gather's only on the root. */
static void spmd__x_pstore(const spmd_req *r, const unsigned char *w) {
    int kind = r->sig.kind, rs = kind == SPMD__KIND_PSUM_SCATTER;
    size_t G = (size_t)r->gr->g->G, me = (size_t)r->gr->me, root = (size_t)r->root, blk = r->count * r->in_size;
    size_t n = rs ? r->count / G : r->count;
    unsigned char *out = (unsigned char *)r->recv;
    if ((kind == SPMD__KIND_REDUCE || kind == SPMD__KIND_GATHER) && me != root) return; /* (not significant) */
    if (kind == SPMD__KIND_GATHER) { /* relative block v is member v + root's */
        memcpy(out + root * blk, w, (G - root) * blk);
        memcpy(out, w + (G - root) * blk, root * blk);
    } else if (kind == SPMD__KIND_SCATTER) {
        memcpy(out, w + (me + G - root) % G * blk, blk);
    } else if (kind == SPMD__KIND_ALLGATHER) { /* out[o, u, c] = x_u[o, c] */
        size_t u, o, row = r->inner * r->in_size;
        for (u = 0; u < G; u++) {
            const unsigned char *src = w + spmd__x_rs_at(r, (int)u) * r->in_size;
            for (o = 0; o < r->outer; o++) memcpy(out + (o * G + u) * row, src + o * row, row);
        }
    } else {
        size_t at = rs ? spmd__x_rs_at(r, (int)me) : 0;
        const unsigned char *res = w + at * spmd__x_pes(r);
        if (kind != SPMD__KIND_BCAST && r->kern->fin) r->kern->fin(r->recv, res, n, (int)G);
        else memcpy(out, res, n * r->out_size);
    }
}

/* Wake r's fellow local members of its exchange (across processes a
   finish wakes nobody: the exchange says whom a state it sets lets on). */
static void spmd__x_wake(spmd_req *r) {
    if (r->gr->g->nloc < 2) return;
    SPMD__FENCE(&r->dev->fence_word); /* the states set before the sleepers are read */
    spmd__wake_group(r->dev->mesh, r->gr->g, r->gr->me);
}

/* Run r's plan as far as the messages that came allow: each step's send
   (from the work vector as the steps before it left it), then its
   receive. SPMD_OK once every step is done, SPMD_ERR_BUSY, else the
   failure (d->err says). A message names its process's first member. */
static spmd_status spmd__x_psteps(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    spmd__xplan *p = x->xp;
    size_t acc = spmd__x_pes(r);
    uint16_t first = (uint16_t)(g->ppos * g->pblk);
    spmd_status st;
    while (p->done < p->plan.nsteps) {
        const spmd__pstep *t = &p->plan.step[p->done];
        int proc = g->procs[t->peer];
        uint64_t tag = SPMD__FAB_TAG(g->gid, r->gseq, SPMD__X_BSTEP(p->nth[2 * p->done + 1]));
        if (r->fault_die > 2 && p->sent == p->done) spmd__fault_die(r, 3 + p->done); /* >>faults: lose:step:K */
        if (p->sent == p->done && t->slen) {
            unsigned char *h = p->buf + p->at[2 * p->done + 1];
            size_t len = (size_t)t->slen * acc;
            uint32_t seen = x->refused ? (uint32_t)x->refused_st << 24 | (uint32_t)x->refused : 0;
            spmd__x_short(h, r, 1, len);
            memcpy(h + offsetof(spmd__xshort, member), &first, 2);
            memcpy(h + offsetof(spmd__xshort, sig), &r->sig, sizeof r->sig); /* (a refusal goes in `seen`:
                                                                                 whoever sends names its member) */
            memcpy(h + offsetof(spmd__xshort, pad), &seen, 4);
            memcpy(h + SPMD__X_SHDR, p->buf + (size_t)t->soff * acc, len);
            p->op[2 * p->done + 1].wide = p->wide;
            st = spmd__x_send(r, &p->op[2 * p->done + 1], proc, tag, h, SPMD__X_SHDR + len, UINT64_MAX);
            if (st != SPMD_OK)
                return spmd__fail(d, st, "%s over '%s': sending step %d of %d to process %d: %s", spmd__x_what(r),
                                  r->gr->text, p->done + 1, p->plan.nsteps, proc, f->err);
        }
        p->sent = p->done + 1;
        if (t->rlen) {
            spmd__fab_op *op = &p->op[2 * p->done];
            st = spmd__fab_peek(f, op);
            if (st == SPMD_ERR_BUSY) {
                if (spmd__fab_first_lost(f, &proc, 1) >= 0)
                    return spmd__fail(d, SPMD_ERR_PEER_LOST, "%s over '%s': step %d of %d: process %d lost (it died "
                                      "or its host is unreachable)", spmd__x_what(r), r->gr->text, p->done + 1,
                                      p->plan.nsteps, proc);
                return SPMD_ERR_BUSY;
            }
            if (st != SPMD_OK && g->pblk > 1) { /* cancelled by a fellow member that failed: its reason */
                int gone;
                pthread_mutex_lock(&m->xlock);
                gone = x->gone != SPMD_OK;
                if (gone) st = spmd__x_gone(r, x);
                pthread_mutex_unlock(&m->xlock);
                if (gone) return st;
            }
            if (st != SPMD_OK) return spmd__x_step_failed(r, st, p->done, p->plan.nsteps, op);
            if ((st = spmd__x_pread(r, t, p->buf + p->at[2 * p->done])) != SPMD_OK) return st;
        }
        SPMD__ST_REL(&p->done, p->done + 1); /* (a member that gives up reads it: spmd__x_give_up) */
    }
    return SPMD_OK;
}

/* r's plan, then its output from the work vector. Several members a
   process (g->pblk): once all joined, one of them combines their inputs
   into the work vector (spmd__x_pload; the others wait, and one that
   fails meanwhile waits for that too) and whoever comes runs the steps,
   one at a time; each writes its own output at the end. SPMD_OK once r's
   output is written, SPMD_ERR_BUSY, else the failure (d->err says). */
static spmd_status spmd__x_prun(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    spmd__xplan *p = x->xp;
    const void **ins = r->dev->ptrs + g->G; /* (spmd__x_pcomb takes the first G) */
    int me = r->gr->me, j, run = g->pblk == 1;
    spmd_status st = SPMD_OK;
    if (!run) {
        pthread_mutex_lock(&m->xlock);
        if (x->gone != SPMD_OK) st = spmd__x_gone(r, x);
        else if (p->loaded < 2 && (p->busy || x->joins < g->nloc)) st = SPMD_ERR_BUSY;
        else if (p->loaded < 2) run = p->busy = 1;
        if (run && !p->loaded) {
            x->cst[me] = SPMD__XC_COMPUTING; /* (reading the others' inputs) */
            for (j = 0; j < g->nloc; j++) ins[j] = x->in[g->locs[j]];
            pthread_mutex_unlock(&m->xlock);
            spmd__x_pload(r, p->buf, ins, g->nloc);
            pthread_mutex_lock(&m->xlock);
            x->cst[me] = SPMD__XC_JOINED;
            p->loaded = 1;
        }
        pthread_mutex_unlock(&m->xlock);
        if (st != SPMD_OK) return st;
    }
    if (run) st = spmd__x_psteps(r);
    if (run && g->pblk > 1) {
        pthread_mutex_lock(&m->xlock);
        p->busy = 0;
        if (st == SPMD_OK) p->loaded = 2; /* (the steps are done: the others may read the work vector) */
        pthread_mutex_unlock(&m->xlock);
    }
    if (st != SPMD_OK) return st;
    spmd__x_pstore(r, p->buf);
    pthread_mutex_lock(&m->xlock);
    x->cst[me] = SPMD__XC_DONE;
    pthread_mutex_unlock(&m->xlock);
    if (g->pblk > 1) spmd__x_wake(r); /* the others may sleep till the steps are done */
    return SPMD_OK;
}

/* Wait (briefly, outside the lock) until no local member computes from
   the exchange's inputs. xlock held on entry and exit. */
static void spmd__x_quiesce(spmd_mesh *m, spmd__xrec *x, int G) {
    int k, busy = 1;
    while (busy) {
        busy = 0;
        for (k = 0; k < G; k++) busy |= x->cst[k] == SPMD__XC_COMPUTING;
        if (busy) {
            pthread_mutex_unlock(&m->xlock);
            sched_yield();
            pthread_mutex_lock(&m->xlock);
        }
    }
}

/* r failed (d->err says why): hand back its buffers, leave the exchange,
   break the mesh, finish. */
SPMD__SETUP static void spmd__x_fail(spmd_req *r, spmd_status s) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int i, me = r->gr->me;
    if (r->lf.xq && g->lf.xq) { /* its receives and the sends still waiting for room in a ring */
        for (i = 0; i < g->G; i++)
            if (i != me) spmd__fab_cancel(m->lf.fab, &g->lf.xq->rop[i], s, "the operation failed");
        for (i = 0; i < g->nrp; i++) spmd__fab_cancel(m->lf.fab, &g->lf.xq->sop[i], s, "the operation failed");
        for (i = 0; g->lf.xq->lop && i < g->G; i++) /* its one-way slot */
            spmd__fab_cancel(m->lf.fab, &g->lf.xq->lop[((size_t)r->gseq & (size_t)(m->D - 1)) * (size_t)g->G + (size_t)i], s,
                             "the operation failed");
    }
    if (x) {
        size_t li = (size_t)g->lidx[me];
        for (i = 0; i < 3 * g->nrp; i++) {
            spmd__fab_cancel(m->lf.fab, &x->sop[3 * li * (size_t)g->nrp + (size_t)i], s, "the operation failed");
        } /* (cancel reads the op's state under the transport's lock: only active ones end) */
        if (me == x->lead) { /* data receives (some land in its output) and split sends are called off */
            for (i = 0; i < g->G; i++) spmd__fab_cancel(m->lf.fab, &x->rop[3 * i + 1], s, "the operation failed");
            for (i = 0; i < 4 * g->nrp && r->sig.algo != SPMD__ALG_BRUCK && !spmd__alg_plans(r->sig.algo); i++)
                spmd__fab_cancel(m->lf.fab, &x->aop[i], s, "the operation failed");
        } /* (the Bruck steps touch only the exchange's buffer: the other members end on their own) */
        for (i = 0; spmd__alg_plans(r->sig.algo) && x->xp && i < x->xp->nops; i++) /* (the one member: its steps) */
            spmd__fab_cancel(m->lf.fab, &x->xp->op[i], s, "the operation failed");
        pthread_mutex_lock(&m->xlock);
        x->cst[me] = SPMD__XC_DONE; /* nobody writes its output from now on */
        spmd__x_gone_set(x, s, d->id, d->err);
        spmd__x_quiesce(m, x, g->G); /* nor reads its input */
        x->left++;
        pthread_mutex_unlock(&m->xlock);
        r->lf.xr = NULL; /* the exchange stays listed; freed with the mesh */
    }
    spmd__break(m, s, d->id, d->err);
    spmd__finish(r, s);
}

/* Split psum, once the headers are read: when every input's slice for
   this process is here, one local member reduces it into the leader's
   output; the slice goes to every other process (after its clear-to-send,
   where needed) while theirs land in that output; then every other local
   member copies the whole output. SPMD_OK when this member's output is
   complete, SPMD_ERR_BUSY before, else the failure (d->err says). */
static spmd_status spmd__x_split(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int G = g->G, me = r->gr->me, i, k;
    size_t lo, hi;
    unsigned char *sum;
    spmd_status st = SPMD_OK;
    pthread_mutex_lock(&m->xlock);
    if (x->red == 0 && (st = spmd__x_scan(r, 1)) == SPMD_OK) {
        const void **ins = d->ptrs, **cur = ins + 2 * G;
        void **outs = (void **)(ins + G);
        x->red = 1;
        x->cst[me] = SPMD__XC_COMPUTING; /* a member that fails meanwhile waits for this */
        spmd__x_slice(r, m->proc, &lo, &hi);
        for (k = 0; k < G; k++) /* local inputs whole, remote ones only the slice */
            ins[k] = (const unsigned char *)x->in[k] + (g->lidx[k] >= 0 ? lo * r->in_size : 0);
        outs[x->lead] = (unsigned char *)x->out[x->lead] + lo * r->out_size;
        pthread_mutex_unlock(&m->xlock);
        spmd__work(r, G, 0, 0, hi - lo, ins, outs, x->lead, cur);
        pthread_mutex_lock(&m->xlock);
        x->cst[me] = SPMD__XC_JOINED;
        x->red = 2;
    }
    if (st == SPMD_OK && x->red != 2) st = SPMD_ERR_BUSY; /* another member reduces */
    sum = (unsigned char *)x->out[x->lead];
    spmd__x_slice(r, m->proc, &lo, &hi);
    for (k = 0; k < g->nrp && st == SPMD_OK; k++) {
        spmd__fab_op *op;
        i = (k + g->ppos) % g->nrp; /* pairwise order, as spmd__x_post */
        op = &x->aop[4 * i];
        if (x->asent[i]) continue;
        if (f->cts && (st = spmd__fab_peek(f, op + 3)) != SPMD_OK) {
            if (st == SPMD_ERR_BUSY) st = SPMD_OK;
            else spmd__fail(d, st, "%s over '%s': process %d: %s", spmd__x_what(r), r->gr->text, g->rprocs[i],
                            spmd__fab_reason(op + 3));
            continue;
        }
        st = spmd__x_send(r, op + 2, g->rprocs[i], SPMD__FAB_TAG(g->gid, r->gseq, 2 * G),
                                 sum + lo * r->out_size, (hi - lo) * r->out_size, UINT64_MAX);
        if (st != SPMD_OK)
            spmd__fail(d, st, "%s over '%s': sending to process %d: %s", spmd__x_what(r), r->gr->text,
                       g->rprocs[i], f->err);
        else
            x->asent[i] = 1;
    }
    for (i = 0; i < g->nrp && st == SPMD_OK; i++) {
        st = x->asent[i] ? spmd__fab_peek(f, &x->aop[4 * i]) : SPMD_ERR_BUSY;
        if (st != SPMD_OK && st != SPMD_ERR_BUSY)
            spmd__fail(d, st, "%s over '%s': receiving the sum from process %d: %s", spmd__x_what(r), r->gr->text,
                       g->rprocs[i], spmd__fab_reason(&x->aop[4 * i]));
    }
    if (st == SPMD_OK && x->gone != SPMD_OK)
        st = spmd__x_gone(r, x);
    if (st == SPMD_OK && me != x->lead) {
        x->cst[me] = SPMD__XC_COMPUTING;
        pthread_mutex_unlock(&m->xlock);
        memcpy(r->recv, sum, r->count * r->out_size);
        pthread_mutex_lock(&m->xlock);
    }
    if (st == SPMD_OK) x->cst[me] = SPMD__XC_DONE;
    pthread_mutex_unlock(&m->xlock);
    if (st == SPMD_OK) spmd__x_wake(r); /* the leader waits for every member's copy */
    return st;
}

/* Have the posted ones of n ops ended? SPMD_OK, SPMD_ERR_BUSY while some
   run, else the first failure (d->err says). */
static spmd_status spmd__x_ended(spmd_req *r, spmd__fab_op *ops, size_t n) {
    spmd_status all = SPMD_OK;
    size_t i;
    for (i = 0; i < n; i++) {
        spmd_status st;
        /* never posted (read without the transport's lock: whoever posts
           r's ops did so before r got here, see spmd__x_progress) */
        if (SPMD__LD_ACQ(&ops[i].state) == SPMD__FOP_IDLE) continue;
        st = spmd__fab_test(r->dev->mesh->lf.fab, &ops[i]);
        if (st == SPMD_ERR_STATE) continue;
        if (st == SPMD_ERR_BUSY) { all = st; continue; }
        if (st != SPMD_OK)
            return spmd__fail(r->dev, st, "%s over '%s': %s process %d: %s", spmd__x_what(r), r->gr->text,
                              ops[i].kind == SPMD__FOP_SEND ? "sending to" : "receiving from", ops[i].peer,
                              spmd__fab_reason(&ops[i]));
    }
    return all;
}

/* While a large all_gather or all_to_all waits for the other processes'
   data, copy this member's own chunk into its output: that copy then
   overlaps the transfer instead of following it. A piece per call (the
   caller progresses the transport in between: on tcp the bytes move only
   when this thread reads its socket), all that is left when all is set.
   Only when the member is its process's one member of the group (nobody
   else computes its output or reads it), with the direct exchange, for a
   chunk of at least SPMD__X_EARLY_MIN bytes; all_to_all when the others'
   chunks land in place (the own chunk is then one run; an in-place input
   was copied aside by spmd__x_post, being larger than a header carries).
   Chunks never overlap. r->lf.xeoff counts what is copied: input elements of
   all_gather, bytes of all_to_all. */
#define SPMD__X_EARLY_MIN ((size_t)64 << 10)
#define SPMD__X_EARLY_PIECE ((size_t)256 << 10)
typedef char spmd__x_early_above_inline[SPMD__X_EARLY_MIN > SPMD__X_INLINE ? 1 : -1];
enum { SPMD__XE_UNSEEN = 0, SPMD__XE_NO, SPMD__XE_COPIED, SPMD__XE_PART };
static void spmd__x_early(spmd_req *r, spmd__xrec *x, int all) {
    const spmd__group *g = r->gr->g;
    int me = r->gr->me, G = g->G;
    if (r->lf.xearly == SPMD__XE_UNSEEN) {
        size_t chunk = r->sig.kind == SPMD__KIND_ALLGATHER ? r->in_bytes : r->blk.run;
        r->lf.xearly = SPMD__XE_NO;
        if (g->nloc != 1 || r->sig.algo != SPMD__ALG_EAGER || chunk < SPMD__X_EARLY_MIN || !r->recv ||
            !(r->sig.kind == SPMD__KIND_ALLGATHER || (r->sig.kind == SPMD__KIND_ALLTOALL && x->hold)))
            return;
        r->lf.xearly = SPMD__XE_PART;
        r->lf.xeoff = 0;
    }
    while (r->lf.xearly == SPMD__XE_PART) {
        if (r->sig.kind == SPMD__KIND_ALLGATHER) {
            const void **ins = r->dev->ptrs, **cur = ins + 2 * G;
            void **outs = (void **)(ins + G);
            size_t len = spmd__unit_len(r), step = SPMD__X_EARLY_PIECE / r->in_size;
            size_t hi = len - r->lf.xeoff < step ? len : r->lf.xeoff + step;
            ins[me] = x->in[me];
            outs[me] = x->out[me];
            spmd__work(r, G, (uint32_t)me, r->lf.xeoff, hi, ins, outs, me, cur);
            r->lf.xeoff = hi;
            if (hi == len) r->lf.xearly = SPMD__XE_COPIED;
        } else {
            size_t run = r->blk.run, n = run - r->lf.xeoff < SPMD__X_EARLY_PIECE ? run - r->lf.xeoff : SPMD__X_EARLY_PIECE;
            memcpy((unsigned char *)r->recv + (size_t)me * (size_t)r->dst_step + r->lf.xeoff,
                   (const unsigned char *)x->in[me] + (size_t)me * (size_t)r->src_step + r->lf.xeoff, n);
            r->lf.xeoff += n;
            if (r->lf.xeoff == run) r->lf.xearly = SPMD__XE_COPIED;
        }
        if (!all) break;
    }
}

/* ---- the quick exchange ----
   A blocking collective (from spmd__quick or spmd__coll_start; not
   ragged_all_to_all, psend/precv or send/recv, not in check mode) whose
   inputs all fit the header's inline bytes and whose group has one member
   in this process. The general exchange keeps a record per operation for
   the local members to share, takes the exchange lock three times and the
   transport's once per post and poll, and computes through the general
   loop: 3,230 instructions for an 8-byte psum of two processes over the
   shared-memory lane (callgrind), most of its latency when cache lines
   move fast. Here the member posts its header sends, then its receives,
   from the group's own ops, lazily (spmd__fab_post_lazy: into the peer's
   ring at once; a receive takes its message from the head of our ring),
   with the same messages and tags, so each process may take either path;
   it waits on those receives alone (the transport's own progress every
   16th poll while only lazy ones wait) and computes its output from the
   inline inputs in member order as everywhere (a reduction with one
   kernel call, a bcast with one copy): 1,470 instructions. A rooted call whose output needs
   fewer headers (spmd__x_needs: a bcast's or scatter's root, a reduce's or
   gather's members off the root) is one way, as Open MPI's: headers go
   only where they are read, plus acknowledgements (spmd__x_hdr_to), which
   it receives after it returned into the group's slot for gseq mod
   max_inflight (spmd__xq.lop); a call waits for the acknowledgement due,
   so a member runs at most max_inflight operations ahead of the others
   (the general path's bound too). It is taken only when nothing else of
   the device or group is in flight (no other request, no exchange record listed once those
   waiting only for unneeded headers that came are reaped); once posted, a
   failure ends it as the general path's do (spmd__x_fail,
   spmd__x_give_up). */
/* spmd__x_inline for g's quick exchange: once its header buffers exist,
   their size says it (no arithmetic per call). */
static size_t spmd__xq_inline(const spmd_mesh *m, const spmd__group *g) {
    return g->lf.xq ? g->lf.xq->hb - SPMD__X_HDR : spmd__x_inline(m, g->G);
}

/* Does r's call (blocking, across processes) fit the quick exchange? It
   must be the device's only request. The group's ops and headers are made
   on its first call; without memory for them the call goes the general way. */
static int spmd__xq_ready(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    int64_t most = spmd__x_expect(r, r->root); /* the largest input: the root's, or everyone's */
    int k, oneway = 0;
    if (r->dev->head != r || r->next || m->lf.no_xq || m->check || g->nloc != 1 || r->sig.algo != SPMD__ALG_EAGER || r->two_phase ||
        r->sig.kind == SPMD__KIND_RAGGED || most < 0 || (uint64_t)most > spmd__xq_inline(m, g))
        return 0;
    if ((!g->lf.xq || !g->lf.xq->lop) && (spmd__rooted(r->sig.kind) || r->sig.kind == SPMD__KIND_PPERMUTE))
        /* (one way: rooted kinds and ppermute only; once their slots are there, no need to ask) */
        for (k = 0; k < g->G; k++) oneway |= k != r->gr->me && !spmd__x_needs(r, k);
    if (g->lf.xlive) { /* a general exchange still listed, e.g. such a rooted call's: spare once its headers came */
        spmd__fab_progress(f);
        pthread_mutex_lock(&m->xlock);
        spmd__x_reap(f, g);
        pthread_mutex_unlock(&m->xlock);
        if (g->lf.xlive) return 0;
    }
    if (!g->lf.xq) {
        size_t hb = SPMD__X_HDR + spmd__x_inline(m, g->G), at = (sizeof(spmd__xq) + SPMD__LINE - 1) / SPMD__LINE * SPMD__LINE;
        size_t nops = (size_t)g->G + (size_t)g->nrp;
        unsigned char *blk = (unsigned char *)spmd__alloc(&m->alloc, at + nops * sizeof(spmd__fab_op) + (size_t)g->G * hb);
        spmd__xq *q = (spmd__xq *)(void *)blk;
        if (!blk) return 0;
        q->hb = hb;
        q->due_seen = UINT64_MAX;
        q->rop = (spmd__fab_op *)(void *)(blk + at);
        q->sop = q->rop + g->G;
        q->hbuf = (unsigned char *)(q->sop + g->nrp);
        spmd__fab_mr_own(f, q->hbuf, (size_t)g->G * hb);
        g->lf.xq = q;
    }
    if (oneway && !g->lf.xq->lop) { /* the slots of the headers one-way calls do not wait for */
        size_t nl = (size_t)m->D * (size_t)g->G;
        unsigned char *blk = (unsigned char *)spmd__alloc(&m->alloc, nl * (sizeof(spmd__fab_op) + g->lf.xq->hb));
        if (!blk) return 0;
        g->lf.xq->lop = (spmd__fab_op *)(void *)blk;
        g->lf.xq->lbuf = blk + nl * sizeof(spmd__fab_op);
        spmd__fab_mr_own(f, g->lf.xq->lbuf, nl * g->lf.xq->hb);
    }
    r->dev->lf.xq_calls++;
    return 1;
}

/* Post r's header receives and sends. */
static spmd_status spmd__xq_post(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab *f = m->lf.fab;
    spmd__group *g = r->gr->g;
    spmd__xq *q = g->lf.xq;
    int G = g->G, me = r->gr->me, k;
    unsigned char *h;
    spmd_status st;
    h = q->hbuf + (size_t)me * q->hb;
    r->lf.xq_going = 0;
    spmd__x_short(h, r, 1, r->in_bytes);
    if (r->in_bytes) memcpy(h + SPMD__X_SHDR, r->send, r->in_bytes);
    /* the sends first: a peer may be waiting for them (the receives are
       lazy, posted nowhere, or take what came meanwhile in order) */
    for (k = 0; k < g->nrp; k++) {
        if (!spmd__x_hdr_to(r, me, g->rprocs[k])) continue;
        q->sop[k].what = r->sig.kind;
        st = spmd__fab_post_lazy(f, &q->sop[k], SPMD__FOP_SEND, g->rprocs[k], SPMD__FAB_TAG(g->gid, r->gseq, 2 * me),
                                 h, SPMD__X_SHDR + r->in_bytes);
        if (st != SPMD_OK) return spmd__fail(d, st, "%s over '%s': sending to process %d: %s", spmd__x_what(r),
                                             r->gr->text, g->rprocs[k], f->err);
        r->lf.xq_going |= spmd__fab_peek(f, &q->sop[k]) != SPMD_OK;
    }
    for (k = 0; k < G; k++) {
        size_t at = ((size_t)r->gseq & (size_t)(m->D - 1)) * (size_t)G + (size_t)k; /* its one-way slot */
        if (k == me || !spmd__x_hdr_to(r, k, m->proc)) continue;
        if (spmd__x_needs(r, k))
            st = spmd__fab_post_lazy(f, &q->rop[k], SPMD__FOP_RECV, m->proc_of[g->members[k]],
                                     SPMD__FAB_TAG(g->gid, r->gseq, 2 * k), q->hbuf + (size_t)k * q->hb, q->hb);
        else /* one way: received after this call returns (spmd__xq_slot waited for the slot) */
            st = spmd__fab_post_recv_upto(f, &q->lop[at], m->proc_of[g->members[k]],
                                          SPMD__FAB_TAG(g->gid, r->gseq, 2 * k), q->lbuf + at * q->hb, q->hb,
                                          UINT64_MAX);
        if (st != SPMD_OK) return spmd__fail(d, st, "receiving device %d's header: %s", g->members[k], f->err);
    }
    return SPMD_OK;
}

/* Every header here: check them (as spmd__x_scan does) and compute the output. */
static spmd_status spmd__xq_compute(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__group *g = r->gr->g;
    spmd__xq *q = g->lf.xq;
    const void **ins = d->ptrs;
    int k, me = r->gr->me;
    char who[64];
    for (k = 0; k < g->G; k++) {
        unsigned char *h = q->hbuf + (size_t)k * q->hb;
        spmd__xview v;
        const char *bad;
        spmd_status st;
        if (k == me) {
            ins[k] = h + SPMD__X_SHDR; /* the copy in the header: recv may be send */
            continue;
        }
        if (!spmd__x_needs(r, k)) { /* one way: not read (its header comes later) */
            ins[k] = NULL;
            continue;
        }
        if (!spmd__x_parse(h, q->rop[k].received, k, g->xhash, r->gseq, q->hb - SPMD__X_HDR, &v, &bad))
            return spmd__x_bad(r, k, bad, q->rop[k].received);
        if ((st = spmd__x_vet(r, k, &v)) != SPMD_OK) return st;
        /* (equal signatures, another length: the processes' inline sizes differ) */
        if (!v.has_inline || v.data_len != (uint64_t)spmd__x_expect(r, k))
            return spmd__fail(d, SPMD_ERR_MISMATCH, "%s over '%s': %s sends its %llu bytes %s where this device "
                              "expects %lld in its header (do the processes run with the same SPMD_FABRIC_STRICT, "
                              "SPMD_FABRIC_CTS, SPMD_SHM_LANE and provider?)", spmd__x_what(r), r->gr->text,
                              spmd__x_who(d->mesh, g->members[k], who, sizeof who), (unsigned long long)v.data_len,
                              v.has_inline ? "in its header" : "apart from its header",
                              (long long)spmd__x_expect(r, k));
        ins[k] = v.data;
    }
    /* (inline inputs are small: a reduction in one kernel call, not spmd__work's chunks) */
    if (r->sig.kind == SPMD__KIND_ALLREDUCE || (r->sig.kind == SPMD__KIND_REDUCE && me == r->root)) {
        if (r->count) spmd__reduce(r->kern, r->recv, ins, g->G, r->count);
    } else if (r->sig.kind != SPMD__KIND_BARRIER && r->sig.kind != SPMD__KIND_REDUCE) { /* (a reduce off the root: no output) */
        const void **cur = ins + 2 * g->G; /* (scratch: only ragged reads offsets there, never quick) */
        void **outs = (void **)(ins + g->G);
        outs[me] = r->recv;
        spmd__compute_own(r, g->G, me, ins, outs, cur, -1);
    }
    return SPMD_OK;
}

/* The acknowledgement due for r (spmd__x_ack_due) came: SPMD_OK,
   SPMD_ERR_BUSY while it is still to come, or the failure of one that
   did not (d->err names it). */
static spmd_status spmd__xq_slot(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__group *g = r->gr->g;
    uint64_t due = spmd__x_ack_due(d->mesh, r->gseq);
    spmd__fab_op *ops = g->lf.xq->lop + ((size_t)due & (size_t)(d->mesh->D - 1)) * (size_t)g->G;
    char who[64];
    int k;
    if (due == UINT64_MAX || due == g->lf.xq->due_seen) return SPMD_OK;
    for (k = 0; k < g->G; k++) {
        spmd_status st = spmd__fab_peek(d->mesh->lf.fab, &ops[k]);
        if (st == SPMD_OK || st == SPMD_ERR_STATE) continue; /* came, or never posted */
        if (st == SPMD_ERR_BUSY) return st;
        return spmd__fail(d, st, "%s over '%s': receiving %s's header of operation #%llu of the group (after a "
                          "one-way call): %s", spmd__x_what(r), r->gr->text,
                          spmd__x_who(d->mesh, g->members[k], who, sizeof who),
                          (unsigned long long)due, spmd__fab_reason(&ops[k]));
    }
    g->lf.xq->due_seen = due;
    return SPMD_OK;
}

static void spmd__xq_progress(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd__fab *f = d->mesh->lf.fab;
    spmd__group *g = r->gr->g;
    int k, me = r->gr->me;
    spmd_status st;
    char who[64];
    if (r->state == SPMD__R_DONE) return;
    if (r->state == SPMD__R_POST) {
        if (g->lf.xq->lop && (st = spmd__xq_slot(r)) != SPMD_OK) {
            if (st != SPMD_ERR_BUSY) spmd__x_fail(r, st);
            else spmd__fab_progress(f); /* max_inflight operations ahead: until the slot's headers come */
            return;
        }
        if ((st = spmd__xq_post(r)) != SPMD_OK) { spmd__x_fail(r, st); return; }
        r->state = SPMD__R_ARRIVE;
        r->lf.xpolls = 0;
    }
    if (r->state == SPMD__R_ARRIVE) {
        for (k = 0; k < g->G; k++) {
            spmd__fab_op *op = &g->lf.xq->rop[k];
            if (k == me || !spmd__x_needs(r, k) || (st = spmd__fab_take(f, op)) == SPMD_OK) continue;
            if (st == SPMD_ERR_BUSY) {
                /* lazy receives take their message themselves: the transport's
                   own progress (the libfabric provider, what other ops wait
                   for, lost peers) every 16th poll; every poll otherwise */
                if (!op->lazy || (++r->lf.xpolls & 15u) == 0) spmd__fab_progress(f);
                return;
            }
            spmd__x_fail(r, spmd__fail(d, st, "%s over '%s': receiving from %s: %s", spmd__x_what(r), r->gr->text,
                                       spmd__x_who(d->mesh, g->members[k], who, sizeof who), spmd__fab_reason(op)));
            return;
        }
        if ((st = spmd__xq_compute(r)) != SPMD_OK) { spmd__x_fail(r, st); return; }
        r->state = SPMD__R_DRAIN;
    }
    for (k = 0; r->lf.xq_going && k < g->nrp; k++) { /* done at once (the lane, an inject), unless a ring was full or the provider sends */
        spmd__fab_op *op = &g->lf.xq->sop[k];
        if (!spmd__x_hdr_to(r, me, g->rprocs[k]) || (st = spmd__fab_peek(f, op)) == SPMD_OK) continue;
        if (st == SPMD_ERR_BUSY) {
            spmd__fab_progress(f);
            return;
        }
        spmd__x_fail(r, spmd__fail(d, st, "%s over '%s': sending to process %d: %s", spmd__x_what(r), r->gr->text,
                                   g->rprocs[k], spmd__fab_reason(op)));
        return;
    }
    spmd__finish(r, spmd__x_outcome(r, r->lf.xrefused, r->lf.xrefused_st));
}

/* The arrive phase's look at the members' inputs (the scan, or not: see
   below), under m->xlock. SPMD_OK: every input this process's members
   need is here, the lock still held; else the lock is released, r failed
   (or, BUSY, its own chunk placed early) and the status returned. */
static spmd_status spmd__x_look(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int me = r->gr->me, look, inl;
    uint64_t moved;
    spmd_status st;
    pthread_mutex_lock(&m->xlock);
    if (x->cst[me] == SPMD__XC_NORECV && r->recv_ready) { /* precv came */
        x->out[me] = r->recv;
        x->cst[me] = SPMD__XC_JOINED;
    }
    /* a scan reads every member's state: skipped once all came; while
       nothing moved and nobody joined since one found some missing
       (their needs are the same for all local members: spmd__x_needs);
       and, when every input comes inline (a scan would only read
       headers early: no data receive to post), while local members
       are still to join, else it stops at the first input missing.
       Every 16th poll scans whole (a failure moves nothing). The
       Bruck exchange's scan, which reads the records once, always
       runs: gated, 8 processes of 8 devices on 2 CPUs took 2x longer
       (no forced scan found anything new: the cheaper polls spun
       more, taking CPU from the other processes) */
    moved = SPMD__LD_ACQ(&m->lf.fab->moved);
    look = (++r->lf.xpolls & 15u) == 0;
    inl = r->sig.algo == SPMD__ALG_EAGER && r->sig.kind != SPMD__KIND_RAGGED &&
          (uint64_t)spmd__x_expect(r, r->root) <= x->inl;
    if (x->all_in || x->cst[me] == SPMD__XC_DONE) /* (its output computed: every input it needs came) */
        st = x->gone != SPMD_OK ? spmd__x_gone(r, x) : SPMD_OK; /* (as the scan would say) */
    else if (!look && r->sig.algo != SPMD__ALG_BRUCK &&
             ((inl && x->joins < g->nloc) || (moved == x->seen_moved && x->joins == x->seen_joins)))
        st = SPMD_ERR_BUSY;
    else {
        x->seen_moved = moved; /* (a receive the scan posts may end at once: it clears this) */
        x->seen_joins = x->joins;
        st = r->sig.algo == SPMD__ALG_BRUCK ? spmd__x_bscan(r) : spmd__x_scan(r, look || !inl);
    }
    if (st != SPMD_OK) {
        pthread_mutex_unlock(&m->xlock);
        if (st != SPMD_ERR_BUSY) spmd__x_fail(r, st);
        else spmd__x_early(r, x, 0);
        return st;
    }
    /* every member's offsets and sizes are here: one verdict, by each
       member that computes (one whose output another computed relies on
       that one's: the remote inputs may be gone by now) */
    if (r->sig.kind == SPMD__KIND_RAGGED && x->cst[me] != SPMD__XC_DONE) {
        char why[256];
        if (spmd__ragged_bad(r, why, sizeof why)) {
            pthread_mutex_unlock(&m->xlock);
            spmd__x_fail(r, spmd__fail(d, SPMD_ERR_MISMATCH, "%s", why));
            return SPMD_ERR_MISMATCH;
        }
    }
    return SPMD_OK;
}

/* Every input is here (spmd__x_look; m->xlock held, released here):
   compute the outputs of the local members that came and that nobody
   computes yet. 1 if this member's output is done. */
static int spmd__x_compute(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    const void **ins = d->ptrs, **cur = ins + 2 * g->G;
    void **outs = (void **)(ins + g->G);
    int G = g->G, me = r->gr->me, list[64], j, k, n = 0, mine_done;
    /* every input is here: compute the outputs of the local members
       that came and that nobody computes yet (64 at a time; with many
       local members most find every one taken) */
    for (k = 0; k < G && n < 64 && x->taken < g->nloc; k++)
        if (x->cst[k] == SPMD__XC_JOINED) {
            x->cst[k] = SPMD__XC_COMPUTING;
            x->taken++;
            list[n++] = k;
        }
    for (k = 0; k < G && n; k++) { /* under the lock: headers nobody needs may still come in */
        ins[k] = x->in[k];
        cur[k] = x->meta[k];
    }
    pthread_mutex_unlock(&m->xlock);
    if (r->lf.xearly == SPMD__XE_PART) spmd__x_early(r, x, 1); /* what is left of the own chunk */
    for (j = 0; j < n; j++) {
        outs[list[j]] = x->out[list[j]];
        if (r->sig.kind == SPMD__KIND_ALLTOALL && x->hold) { /* chunks landed in place are skipped */
            unsigned char *o = (unsigned char *)outs[list[j]];
            for (k = 0; k < G; k++)
                if ((!x->pre[k] || x->pdst[k] != o + (size_t)k * (size_t)r->dst_step) &&
                    !(k == me && r->lf.xearly == SPMD__XE_COPIED))
                    spmd__blk_copy(&r->blk, o + (size_t)k * (size_t)r->dst_step,
                                   (const unsigned char *)ins[k] + (size_t)list[j] * (size_t)r->src_step);
        } else if (j && r->sig.kind == SPMD__KIND_ALLREDUCE) { /* every member's output is the same: reduced once */
            if (r->count && outs[list[j]] != outs[list[0]])
                memcpy(outs[list[j]], outs[list[0]], r->count * r->out_size);
        } else {
            spmd__compute_own(r, G, list[j], ins, outs, cur, r->lf.xearly == SPMD__XE_COPIED ? me : -1);
        }
    }
    pthread_mutex_lock(&m->xlock);
    for (j = 0; j < n; j++) x->cst[list[j]] = SPMD__XC_DONE;
    mine_done = x->cst[me] == SPMD__XC_DONE;
    pthread_mutex_unlock(&m->xlock);
    /* the members computed for may sleep (on libfabric nothing else
       wakes them), and so may those that wait for every output */
    if (n) spmd__x_wake(r);
    return mine_done;
}

/* The drain phase: this member's sends ended, and (when the others read
   its buffer) every local member done; the last one gives the exchange
   back. Then r finishes. */
static void spmd__x_drain(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int G = g->G, me = r->gr->me, k, last, by;
    spmd_status st, bst;
    size_t li = (size_t)g->lidx[me];
    int i;
    st = spmd__x_ended(r, &x->sop[3 * li * (size_t)g->nrp], 3 * (size_t)g->nrp);
    for (i = 0; i < g->nrp && st == SPMD_OK; i++)
        if (!x->dsent[li * (size_t)g->nrp + (size_t)i]) st = SPMD_ERR_BUSY;
    if (st == SPMD_OK && r->sig.algo == SPMD__ALG_SPLIT && me == x->lead) /* our slice's sends, our CTS */
        st = spmd__x_ended(r, x->aop, 4 * (size_t)g->nrp);
    if (st == SPMD_OK && r->sig.algo == SPMD__ALG_BRUCK) /* the process's sends read the exchange's buffer */
        st = spmd__x_ended(r, x->aop, 2 * (size_t)x->bsteps);
    if (st == SPMD_OK && spmd__alg_plans(r->sig.algo)) st = spmd__x_ended(r, x->xp->op, (size_t)x->xp->nops);
    if (st == SPMD_ERR_BUSY) return;
    if (st != SPMD_OK) { spmd__x_fail(r, st); return; }
    pthread_mutex_lock(&m->xlock);
    if (!x->copied[me] || (x->hold && me == x->lead))
        /* the others read this member's own buffer (or the leader's
           output): all of them must be done */
        for (k = 0; k < G; k++)
            if (g->lidx[k] >= 0 && x->cst[k] != SPMD__XC_DONE) {
                pthread_mutex_unlock(&m->xlock);
                return;
            }
    last = ++x->left == g->nloc;
    by = x->refused;
    bst = x->refused_st;
    if (last) { /* the last local member: the exchange is spare again, */
        SPMD_ASSERT(spmd__fab_ops_idle(m->lf.fab, x->aop, 4 * (size_t)g->nrp)); /* each waited for its own */
        SPMD_ASSERT(!x->xp || spmd__fab_ops_idle(m->lf.fab, x->xp->op, (size_t)x->xp->nops));
        if (spmd__fab_ops_idle(m->lf.fab, x->rop, 3 * (size_t)G)) { /* unless headers nobody needed are still to come (x_get frees it then) */
            spmd__xrec **pp = &g->lf.xlive;
            while (*pp != x) pp = &(*pp)->next;
            *pp = x->next;
            x->next = g->lf.xfree;
            g->lf.xfree = x;
            g->lf.xnlive--;
        }
    }
    pthread_mutex_unlock(&m->xlock);
    r->lf.xr = NULL;
    if (r->xscratch) spmd__fab_mr_forget(m->lf.fab, r->xscratch, r->in_bytes);
    spmd__finish(r, spmd__x_outcome(r, by, bst));
    if (last) spmd__x_wake(r); /* members may wait for a spare one */
}

static void spmd__x_progress(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd_status st;
    if (r->state == SPMD__R_DONE) return;
    if (r->state == SPMD__R_POST) {
        st = spmd__x_post(r);
        if (st == SPMD_ERR_BUSY) { spmd__fab_progress(m->lf.fab); return; } /* too many in flight: later */
        if (st != SPMD_OK) { spmd__x_fail(r, st); return; }
        r->state = SPMD__R_ARRIVE;
    }
    spmd__fab_progress(m->lf.fab);
    if ((m->lf.fab->cts || r->lf.xwait) && (st = spmd__x_sends(r)) != SPMD_OK) {
        spmd__x_fail(r, st);
        return;
    }
    if (r->state == SPMD__R_ARRIVE && spmd__alg_plans(r->sig.algo)) {
        st = spmd__x_prun(r);
        if (st == SPMD_ERR_BUSY) return;
        if (st != SPMD_OK) { spmd__x_fail(r, st); return; }
        r->state = SPMD__R_DRAIN;
    }
    if (r->state == SPMD__R_ARRIVE && r->sig.algo == SPMD__ALG_SPLIT) {
        st = spmd__x_split(r);
        if (st == SPMD_ERR_BUSY) return;
        if (st != SPMD_OK) { spmd__x_fail(r, st); return; }
        r->state = SPMD__R_DRAIN;
    }
    if (r->state == SPMD__R_ARRIVE) {
        if (spmd__x_look(r) != SPMD_OK || !spmd__x_compute(r)) return;
        r->state = SPMD__R_DRAIN;
    }
    if (r->state == SPMD__R_DRAIN) spmd__x_drain(r);
}

static int spmd__xp_abandon(spmd_req *r, spmd_status s, const char *why);
static int spmd__x_give_up(spmd_req *r, spmd_status s, int expired, const char *why);

/* A member of this process returned from its function (or was lost)
   without joining r's exchange: r can never complete, and ends now, as on
   threads (spmd__gone_check); the break tells the other processes. 1 if r
   ended of it. */
static int spmd__x_gone_check(spmd_req *r) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    char why[200];
    int k, gone = -1;
    uint64_t lost;
    if (!x || r->p2p || r->state != SPMD__R_ARRIVE) return 0;
    pthread_mutex_lock(&m->xlock);
    for (k = 0; k < g->G && gone < 0; k++) /* returned first, then its join read (it joins under this lock) */
        if (g->lidx[k] >= 0 && k != r->gr->me && spmd__gone(m->devs[g->members[k]]) && x->have[k] != 2)
            gone = g->members[k];
    pthread_mutex_unlock(&m->xlock);
    if (gone < 0) return 0;
    if ((lost = SPMD__LD_ACQ(&m->devs[gone]->lost)) != 0) {
        snprintf(why, sizeof why, "can never complete: device %d was lost (SPMD_FAULTS kind=lose at its call #%llu)",
                 gone, (unsigned long long)(lost - 1));
        return spmd__x_give_up(r, SPMD_ERR_PEER_LOST, 0, why);
    }
    snprintf(why, sizeof why, "can never complete: device %d returned from its function without calling it", gone);
    return spmd__x_give_up(r, SPMD_ERR_DEADLOCK, 0, why);
}

/* Check mode: a member of this process not yet in r's exchange that
   logged another call at r's index (spmd__clog_write: another operation,
   or the same over other axes, whose group may lie inside the process) is
   a mismatch, found now and not at the deadline (spmd__check_missing on
   threads; the break tells the other processes). 1 if r ended of it. */
static int spmd__x_check_missing(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    int k, have;
    if (!x || r->p2p || r->state != SPMD__R_ARRIVE) return 0;
    for (k = 0; k < g->G; k++) {
        spmd_dev *p = m->devs[g->members[k]];
        spmd__sig other;
        char text[64], site[64], sites[SPMD__SITES_LEN], a[96], b[96];
        if (g->lidx[k] < 0 || k == r->gr->me) continue;
        pthread_mutex_lock(&m->xlock);
        have = x->have[k];
        pthread_mutex_unlock(&m->xlock);
        if (have == 2 || !spmd__clog_read(d, p, r->global, &other, text, site) ||
            (!spmd__sig_differs(&other, &r->sig, 1) && strcmp(text, r->gr->text) == 0))
            continue;
        spmd__sig_text(&r->sig, a, sizeof a);
        spmd__sig_text(&other, b, sizeof b);
        spmd__fail(d, SPMD_ERR_MISMATCH,
                   "device %d called %s over '%s' but device %d called %s over '%s' (operation #%llu of this "
                   "device; check mode%s)", d->id, a, r->gr->text, p->id, b, text, (unsigned long long)r->global,
                   spmd__site_clause(r, p->id, site, sites, sizeof sites));
        spmd__x_fail(r, SPMD_ERR_MISMATCH);
        return 1;
    }
    return 0;
}

/* The deadline passed (expired: r's own), or the mesh broke: name who is missing. */
SPMD__SETUP static int spmd__x_give_up(spmd_req *r, spmd_status s, int expired, const char *why) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xrec *x = r->lf.xr;
    char who[200], what[192], step[96] = "";
    size_t at = 0;
    int k, shown = 0, missing = 0, bruck = r->sig.algo == SPMD__ALG_BRUCK, plan = spmd__alg_plans(r->sig.algo);
    if (r->p2p) return spmd__xp_abandon(r, s, why);
    who[0] = '\0';
    if ((x || (r->lf.xq && g->lf.xq)) && r->state == SPMD__R_ARRIVE && expired) { /* (a broken mesh's message names them) */
        pthread_mutex_lock(&m->xlock);
        if (x && bruck && x->brecv < x->bsteps) /* the remote inputs come in steps, each from one process */
            snprintf(step, sizeof step, ": process %d's part of step %d of %d not received",
                     x->aop[2 * x->brecv].peer, x->brecv + 1, x->bsteps);
        if (x && plan && (k = SPMD__LD_ACQ(&x->xp->done)) < x->xp->plan.nsteps) /* (its peer may wait for another) */
            snprintf(step, sizeof step, ": process %d's part of step %d of %d of its plan not received",
                     g->procs[x->xp->plan.step[k].peer], k + 1, x->xp->plan.nsteps);
        for (k = 0; k < g->G && !plan; k++) {
            int have = x ? x->have[k]
                       : k == r->gr->me || !spmd__x_needs(r, k) ||
                                 SPMD__LD_ACQ(&g->lf.xq->rop[k].state) == SPMD__FOP_DONE ? 2 : 0;
            if (bruck && g->lidx[k] < 0) { /* its process's block comes in step j, 2^j <= t < 2^(j + 1) */
                int P = g->nrp + 1, t = (g->pos_of[m->proc_of[g->members[k]]] - g->ppos + P) % P, j = 0;
                while ((2 << j) <= t) j++;
                if (j < x->brecv) continue;
            } else if (have == 2) {
                continue;
            }
            missing++;
            if (shown < 8 && at < sizeof who) {
                int w = snprintf(who + at, sizeof who - at, "%s%d (process %d%s)", shown ? ", " : "",
                                 g->members[k], m->proc_of[g->members[k]], have ? ", data" : "");
                if (w > 0) at += (size_t)w;
                shown++;
            }
        }
        pthread_mutex_unlock(&m->xlock);
        if (missing > shown && at < sizeof who) snprintf(who + at, sizeof who - at, " and %d more", missing - shown);
    }
    if (!x && r->lf.xq && g->lf.xq && g->lf.xq->lop && r->state == SPMD__R_POST && expired &&
        spmd__x_ack_due(m, r->gseq) != UINT64_MAX) { /* a one-way call's acknowledgement still to come */
        uint64_t due = spmd__x_ack_due(m, r->gseq);
        const spmd__fab_op *ops = g->lf.xq->lop + ((size_t)due & (size_t)(m->D - 1)) * (size_t)g->G;
        snprintf(step, sizeof step, ": %d operations ahead (max_inflight), waiting for headers of operation #%llu",
                 m->D, (unsigned long long)due);
        for (k = 0; k < g->G; k++) {
            int w;
            if (SPMD__LD_ACQ(&ops[k].state) != SPMD__FOP_ACTIVE || at >= sizeof who) continue;
            w = snprintf(who + at, sizeof who - at, "%s%d (process %d)", missing ? ", " : "", g->members[k],
                         m->proc_of[g->members[k]]);
            if (w > 0) at += (size_t)w;
            missing++;
        }
    }
    if ((x || (r->lf.xq && g->lf.xq)) && r->state == SPMD__R_DRAIN) { /* which sends are stuck, and how far they got */
        size_t li = (size_t)g->lidx[r->gr->me];
        int n = !x ? g->nrp : bruck ? x->bsteps : plan ? x->xp->plan.nsteps : 3 * g->nrp;
        for (k = 0; k < n && at < sizeof who; k++) {
            spmd__fab_op *op = !x     ? &g->lf.xq->sop[k]
                               : bruck ? &x->aop[2 * k + 1]
                               : plan  ? &x->xp->op[2 * k + 1]
                                       : &x->sop[3 * li * (size_t)g->nrp + (size_t)k];
            int w = 0;
            spmd__slock(&m->lf.fab->lock);
            if (op->state == SPMD__FOP_ACTIVE)
                w = snprintf(who + at, sizeof who - at, " to process %d (%zu bytes, %u of %u segments posted, %u done)",
                             op->peer, op->len, (unsigned)op->posted, (unsigned)op->nseg, (unsigned)op->done);
            spmd__sunlock(&m->lf.fab->lock);
            if (w > 0) at += (size_t)w;
        }
    }
    spmd__req_what(r, what, sizeof what);
    spmd__fail(d, s, "%s over '%s' (operation #%llu of this device, #%llu of its group) %s%s%s%s", what, r->gr->text,
               (unsigned long long)r->global, (unsigned long long)r->gseq, why, step,
               missing ? ": devices not heard from: " : r->state == SPMD__R_DRAIN ? ": sends not completed" : "",
               who);
    spmd__x_fail(r, s);
    return 1;
}

/* Point to point between processes. A message from member a to member b
   is a header (sender, receiver, the pair's sequence number, tag, dtype,
   count) with the data inline up to the exchange's inline size, else a
   second message with the data. Tags: kind 1, the group's id, a, b, 5 bits
   of the pair's sequence number and one bit for header/data. Each process
   keeps, per group, one posted header receive for the next message of
   every (remote a, local b) pair; headers that arrive are queued in
   arrival order (per pair: in sequence), and a recv takes the first that
   fits its source and tag, as on threads. A send is done when the
   transport has sent it (the receiver need not have come yet). */
#define SPMD__P_MAGIC 0x50444d53u
#define SPMD__FAB_P2P_TAG(group, a, b, seq, data)                                                               \
    ((1ull << 62) | (((uint64_t)(group) & 0xffffu) << 46) | (((uint64_t)(a) & 0xfffu) << 34) |                  \
     (((uint64_t)(b) & 0xfffu) << 22) | (((uint64_t)(seq) & 0x1fu) << 17) | ((uint64_t)(data) << 16))

typedef struct spmd__phdr {
    uint32_t magic, src, dst, dtype;
    uint64_t ghash, seq, count;
    int64_t tag;
    uint32_t has_inline, pad;
} spmd__phdr;
#define SPMD__P_HDR ((sizeof(spmd__phdr) + 63) / 64 * 64)

typedef struct spmd__xmsg {
    struct spmd__xmsg *next;
    spmd__phdr h;
    unsigned char *data;      /* its inline data, allocated right after it */
} spmd__xmsg;

typedef struct spmd__xchan {
    size_t hb;                /* bytes per header buffer */
    spmd__fab_op *hop;        /* G * nloc: [a * nloc + lidx[b]], remote a */
    unsigned char *hbuf;
    uint64_t *rseq;           /* next sequence number expected per (a, b) */
    uint64_t *sseq;           /* next to send per (local a, b): [lidx[a] * G + b] */
    spmd__xmsg *head, *tail;  /* arrived, not yet received */
    spmd__xmsg *spare;        /* blocks of received messages, kept for the next (at most SPMD__XP_SPARE) */
    int nspare;
} spmd__xchan;
#define SPMD__XP_SPARE 64

/* A received message's block back to its channel: kept, or freed beyond
   SPMD__XP_SPARE (takes xlock). */
static void spmd__xp_put(spmd_mesh *m, spmd__xchan *c, spmd__xmsg *x) {
    pthread_mutex_lock(&m->xlock);
    if (c->nspare < SPMD__XP_SPARE) {
        x->next = c->spare;
        c->spare = x;
        c->nspare++;
        x = NULL;
    }
    pthread_mutex_unlock(&m->xlock);
    spmd__free(&m->alloc, x);
}

/* A message header of n received bytes, from member a to member b, sequence
   seq of the pair in group ghash: 1 when well formed (inline data: exactly
   count elements came, a count whose bytes would wrap is refused). */
static int spmd__xp_hdr_ok(const spmd__phdr *h, size_t n, int a, int b, uint64_t ghash, uint64_t seq) {
    return n >= SPMD__P_HDR && h->magic == SPMD__P_MAGIC && h->src == (uint32_t)a && h->dst == (uint32_t)b &&
           h->ghash == ghash && h->seq == seq && h->dtype > SPMD_DTYPE_NONE && h->dtype < SPMD_DTYPE_COUNT &&
           (!h->has_inline || (h->count <= (n - SPMD__P_HDR) / spmd__dtype_sizes[h->dtype] &&
                               h->count * spmd__dtype_sizes[h->dtype] == n - SPMD__P_HDR));
}

/* The group's channel, its header receives posted on first use. xlock held. */
static spmd_status spmd__xp_chan(spmd_req *r, spmd__xchan **out) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    spmd__xchan *c = g->lf.xchan;
    int G = g->G, a, b;
    if (c) { *out = c; return SPMD_OK; }
    if (G > 4096) return spmd__fail(r->dev, SPMD_ERR_SIZE, "send/recv between processes: groups of at most 4096");
    c = (spmd__xchan *)spmd__alloc(&m->alloc, sizeof *c);
    if (!c) return spmd__fail(r->dev, SPMD_ERR_NOMEM, "out of memory for a message channel");
    {
        size_t lim = m->lf.fab->cts && m->lf.fab->inject < m->lf.fab->xseg ? m->lf.fab->inject : m->lf.fab->xseg; /* see spmd__x_get */
        c->hb = SPMD__P_HDR + (lim > SPMD__P_HDR + SPMD__X_INLINE ? SPMD__X_INLINE : lim - SPMD__P_HDR);
    }
    c->hop = (spmd__fab_op *)spmd__alloc(&m->alloc, (size_t)G * (size_t)g->nloc * sizeof *c->hop);
    c->hbuf = (unsigned char *)spmd__alloc(&m->alloc, (size_t)G * (size_t)g->nloc * c->hb);
    spmd__fab_mr_own(m->lf.fab, c->hbuf, (size_t)G * (size_t)g->nloc * c->hb);
    c->rseq = (uint64_t *)spmd__alloc(&m->alloc, (size_t)G * (size_t)g->nloc * sizeof *c->rseq);
    c->sseq = (uint64_t *)spmd__alloc(&m->alloc, (size_t)G * (size_t)g->nloc * sizeof *c->sseq);
    g->lf.xchan = c;
    if (!c->hop || !c->hbuf || !c->rseq || !c->sseq)
        return spmd__fail(r->dev, SPMD_ERR_NOMEM, "out of memory for a message channel");
    for (a = 0; a < G; a++)
        for (b = 0; b < G; b++) {
            size_t i = (size_t)a * (size_t)g->nloc + (size_t)g->lidx[b];
            spmd_status st;
            if (g->lidx[a] >= 0 || g->lidx[b] < 0) continue;
            st = spmd__fab_post_recv_upto(m->lf.fab, &c->hop[i], m->proc_of[g->members[a]],
                                          SPMD__FAB_P2P_TAG(g->gid, a, b, 0, 0), c->hbuf + i * c->hb, c->hb,
                                          UINT64_MAX);
            if (st != SPMD_OK) return spmd__fail(r->dev, st, "posting a message receive: %s", m->lf.fab->err);
        }
    *out = c;
    return SPMD_OK;
}

/* Queue the headers that arrived for local member b and post the next
   receives. xlock held. */
static spmd_status spmd__xp_poll(spmd_req *r, spmd__xchan *c, int b) {
    spmd_mesh *m = r->dev->mesh;
    spmd__group *g = r->gr->g;
    int a;
    for (a = 0; a < g->G; a++) {
        size_t i = (size_t)a * (size_t)g->nloc + (size_t)g->lidx[b];
        spmd__fab_op *op = &c->hop[i];
        spmd__phdr *h = (spmd__phdr *)(void *)(c->hbuf + i * c->hb);
        spmd__xmsg *x;
        spmd_status st;
        size_t n;
        if (g->lidx[a] >= 0) continue;
        st = spmd__fab_test(m->lf.fab, op);
        if (st == SPMD_ERR_BUSY) continue;
        if (st != SPMD_OK) return spmd__fail(r->dev, st, "messages from device %d (process %d): %s", g->members[a],
                                             m->proc_of[g->members[a]], spmd__fab_reason(op));
        n = op->received;
        if (!spmd__xp_hdr_ok(h, n, a, b, g->xhash, c->rseq[i]))
            return spmd__fail(r->dev, SPMD_ERR_SYSTEM, "a malformed message header (%zu bytes) from device %d "
                              "(process %d)", n, g->members[a], m->proc_of[g->members[a]]);
        x = c->spare; /* every block holds the largest inline data (c->hb - SPMD__P_HDR) */
        if (x) {
            c->spare = x->next;
            c->nspare--;
        } else {
            x = (spmd__xmsg *)spmd__alloc(&m->alloc, sizeof *x + c->hb - SPMD__P_HDR);
            if (!x) return spmd__fail(r->dev, SPMD_ERR_NOMEM, "out of memory for a message");
        }
        x->next = NULL;
        x->h = *h;
        x->data = (unsigned char *)(x + 1);
        if (h->has_inline) memcpy(x->data, (unsigned char *)h + SPMD__P_HDR, n - SPMD__P_HDR);
        if (c->tail) c->tail->next = x; else c->head = x;
        c->tail = x;
        c->rseq[i]++;
        st = spmd__fab_post_recv_upto(m->lf.fab, op, m->proc_of[g->members[a]],
                                      SPMD__FAB_P2P_TAG(g->gid, a, b, c->rseq[i], 0), (unsigned char *)h, c->hb,
                                      UINT64_MAX);
        if (st != SPMD_OK) return spmd__fail(r->dev, st, "posting a message receive: %s", m->lf.fab->err);
    }
    return SPMD_OK;
}

/* spmd__xp_progress's send: its header (and a small message's data) to
   the receiver's process; a large one's data follows at once, or on the
   receiver's clear-to-send. */
static void spmd__xp_send_post(spmd_req *r, spmd__fab_op *ops) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xchan *c = NULL;
    spmd_status st;
    int me = r->gr->me;
    unsigned char *hb = (unsigned char *)r->temp + 3 * sizeof(spmd__fab_op);
    spmd__phdr *h = (spmd__phdr *)(void *)hb;
    size_t len = r->count * r->in_size, inl;
    uint64_t seq;
    int p = m->proc_of[g->members[r->peer]];
    pthread_mutex_lock(&m->xlock);
    st = spmd__xp_chan(r, &c);
    seq = st == SPMD_OK ? c->sseq[(size_t)g->lidx[me] * (size_t)g->G + (size_t)r->peer]++ : 0;
    inl = c ? c->hb - SPMD__P_HDR : 0;
    pthread_mutex_unlock(&m->xlock);
    if (st != SPMD_OK) { spmd__finish(r, st); return; }
    memset(h, 0, SPMD__P_HDR);
    h->magic = SPMD__P_MAGIC;
    h->src = (uint32_t)me;
    h->dst = (uint32_t)r->peer;
    h->dtype = r->sig.dtype;
    h->ghash = g->xhash;
    h->seq = seq;
    h->count = r->count;
    h->tag = r->tag;
    h->has_inline = len <= inl;
    if (h->has_inline && len) memcpy(hb + SPMD__P_HDR, r->send, len);
    st = spmd__x_send(r, &ops[0], p, SPMD__FAB_P2P_TAG(g->gid, me, r->peer, seq, 0), hb,
                             SPMD__P_HDR + (h->has_inline ? len : 0), UINT64_MAX);
    r->lf.xsent = h->has_inline;
    if (st == SPMD_OK && !h->has_inline && m->lf.fab->cts) /* the data goes on the clear-to-send */
        st = spmd__fab_post_recv(m->lf.fab, &ops[2], p, SPMD__FAB_P2P_TAG(g->gid, me, r->peer, seq, 1) | SPMD__X_CTS,
                                 NULL, 0, UINT64_MAX);
    else if (st == SPMD_OK && !h->has_inline) {
        st = spmd__x_send(r, &ops[1], p, SPMD__FAB_P2P_TAG(g->gid, me, r->peer, seq, 1), r->send,
                                 len, UINT64_MAX);
        r->lf.xsent = 1;
    }
    if (st != SPMD_OK) {
        spmd__fail(d, st, "send to %d (tag %d) over '%s': %s", r->peer, r->tag, r->gr->text, m->lf.fab->err);
        spmd__finish(r, st);
        return;
    }
    r->state = SPMD__R_DRAIN;
}

/* spmd__xp_progress's recv: a sender in this process, else the first
   matching header from another; its inline data, or the receive of the
   rest posted (and the clear-to-send sent). */
static void spmd__xp_recv_match(spmd_req *r, spmd__fab_op *ops) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd__xchan *c = NULL;
    spmd_status st;
    int me = r->gr->me;
    spmd__xmsg *x, *prev = NULL;
    if (r->peer < 0 || g->lidx[r->peer] >= 0) { /* a sender in this process may match first */
        spmd__p2p_progress(r);
        if (r->state == SPMD__R_DONE) return;
    }
    if (r->peer >= 0 && g->lidx[r->peer] >= 0) return;
    pthread_mutex_lock(&m->xlock);
    st = spmd__xp_chan(r, &c);
    if (st == SPMD_OK) st = spmd__xp_poll(r, c, me);
    if (st != SPMD_OK) {
        pthread_mutex_unlock(&m->xlock);
        spmd__break(m, st, d->id, d->err);
        spmd__finish(r, st);
        return;
    }
    for (x = c->head; x; prev = x, x = x->next)
        if (x->h.dst == (uint32_t)me && (r->peer < 0 || x->h.src == (uint32_t)r->peer) &&
            (r->tag < 0 || x->h.tag == r->tag))
            break;
    if (x) {
        if (prev) prev->next = x->next; else c->head = x->next;
        if (c->tail == x) c->tail = prev;
    }
    pthread_mutex_unlock(&m->xlock);
    if (!x) return;
    if (x->h.dtype != r->sig.dtype || x->h.count > r->count) {
        spmd__fail(d, SPMD_ERR_MISMATCH, "recv of %s x %zu over '%s' matched a send of %s x %llu from %d (tag %lld)",
                   spmd__dtype_names[r->sig.dtype], r->count, r->gr->text, spmd__dtype_names[x->h.dtype],
                   (unsigned long long)x->h.count, (int)x->h.src, (long long)x->h.tag);
        r->status = SPMD_ERR_MISMATCH; /* the data, if any, is still taken (into a scratch buffer) */
    }
    if (r->info) {
        r->info->source = (int)x->h.src;
        r->info->tag = (int)x->h.tag;
        r->info->count = (size_t)x->h.count;
    }
    if (x->h.has_inline) {
        if (r->status == SPMD_OK && x->h.count) memcpy(r->recv, x->data, (size_t)x->h.count * r->in_size);
        st = r->status;
        spmd__xp_put(m, c, x);
        spmd__finish(r, st);
        return;
    } else {
        size_t len = (size_t)x->h.count * spmd__dtype_sizes[x->h.dtype];
        void *dst = r->recv;
        if (r->status != SPMD_OK) {
            r->xscratch = spmd__alloc(&m->alloc, len);
            dst = r->xscratch;
            spmd__fab_mr_own(m->lf.fab, dst, len);
        }
        st = dst ? spmd__fab_post_recv(m->lf.fab, &ops[1], m->proc_of[g->members[x->h.src]],
                                       SPMD__FAB_P2P_TAG(g->gid, x->h.src, me, x->h.seq, 1), dst, len, UINT64_MAX)
                 : SPMD_ERR_NOMEM;
        if (st == SPMD_OK && m->lf.fab->cts)
            st = spmd__x_send(r, &ops[0], m->proc_of[g->members[x->h.src]],
                                     SPMD__FAB_P2P_TAG(g->gid, x->h.src, me, x->h.seq, 1) | SPMD__X_CTS, NULL, 0,
                                     UINT64_MAX);
        spmd__xp_put(m, c, x);
        if (st != SPMD_OK) {
            spmd__fail(d, st, "recv over '%s': %s", r->gr->text, m->lf.fab->err);
            spmd__finish(r, st);
            return;
        }
        r->state = SPMD__R_DRAIN;
    }
}

/* spmd__xp_progress's end: the ops settle (a send waits for its
   clear-to-send first), then the request finishes. */
static void spmd__xp_drain(spmd_req *r, spmd__fab_op *ops) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__group *g = r->gr->g;
    spmd_status st;
    int me = r->gr->me;
    int i;
    if (r->sig.kind == SPMD__KIND_SEND && !r->lf.xsent) { /* waiting for the clear-to-send */
        const spmd__phdr *h = (const spmd__phdr *)(const void *)((unsigned char *)r->temp + 3 * sizeof(spmd__fab_op));
        st = spmd__fab_peek(m->lf.fab, &ops[2]);
        if (st == SPMD_ERR_BUSY) return;
        if (st == SPMD_OK)
            st = spmd__x_send(r, &ops[1], m->proc_of[g->members[r->peer]],
                                     SPMD__FAB_P2P_TAG(g->gid, me, r->peer, h->seq, 1), r->send,
                                     r->count * r->in_size, UINT64_MAX);
        if (st != SPMD_OK) {
            spmd__fail(d, st, "send to %d (tag %d) over '%s': %s", r->peer, r->tag, r->gr->text,
                       ops[2].status ? ops[2].err : m->lf.fab->err);
            spmd__break(m, st, d->id, d->err);
            spmd__finish(r, st);
            return;
        }
        r->lf.xsent = 1;
    }
    for (i = 0; i < 3; i++) {
        if (SPMD__LD_ACQ(&ops[i].state) == SPMD__FOP_IDLE) continue; /* others settle it (release) */
        st = spmd__fab_test(m->lf.fab, &ops[i]);
        if (st == SPMD_ERR_BUSY) return;
        if (st != SPMD_OK) {
            spmd__fail(d, st, "%s over '%s': %s process %d: %s", spmd__kind_names[r->sig.kind], r->gr->text,
                       ops[i].kind == SPMD__FOP_SEND ? "sending to" : "receiving from", ops[i].peer,
                       spmd__fab_reason(&ops[i]));
            spmd__break(m, st, d->id, d->err);
            spmd__finish(r, st);
            return;
        }
    }
    for (i = 0; i < 3; i++)
        if (SPMD__LD_ACQ(&ops[i].state) != SPMD__FOP_IDLE && ops[i].buf) spmd__fab_mr_forget(m->lf.fab, ops[i].buf, ops[i].len);
    spmd__free(&m->alloc, r->xscratch);
    r->xscratch = NULL;
    spmd__finish(r, r->status);
}

/* A send or recv whose group spans processes. r->temp holds its transport
   ops (three) and, for a send, the header and inline data: r->xp_blk, made
   once per request of the device's pool and kept when it is reused (not
   registered as ours: its ops register it as a caller's buffer where the
   provider needs that). */
static void spmd__xp_progress(spmd_req *r) {
    spmd_dev *d = r->dev;
    spmd_mesh *m = d->mesh;
    spmd__fab_op *ops;
    if (r->state == SPMD__R_DONE) return;
    if (!r->temp) {
        if (r->xp_blk) memset(r->xp_blk, 0, 3 * sizeof(spmd__fab_op)); /* idle ops */
        else r->xp_blk = spmd__alloc(&m->alloc, 3 * sizeof(spmd__fab_op) + SPMD__P_HDR + SPMD__X_INLINE);
        r->temp = r->xp_blk;
        if (!r->temp) {
            spmd__fail(d, SPMD_ERR_NOMEM, "%s: out of memory", spmd__kind_names[r->sig.kind]);
            spmd__finish(r, SPMD_ERR_NOMEM);
            return;
        }
    }
    ops = (spmd__fab_op *)r->temp;
    spmd__fab_progress(m->lf.fab);
    if (r->sig.kind == SPMD__KIND_SEND && r->state == SPMD__R_POST) spmd__xp_send_post(r, ops);
    else if (r->sig.kind != SPMD__KIND_SEND && r->state == SPMD__R_ARRIVE) spmd__xp_recv_match(r, ops);
    if (r->state == SPMD__R_DRAIN) spmd__xp_drain(r, ops);
}

/* Give up on a send or recv between processes: its ops are cancelled
   (their buffers handed back) before it finishes. */
static int spmd__xp_abandon(spmd_req *r, spmd_status s, const char *why) {
    spmd_mesh *m = r->dev->mesh;
    if (r->temp) {
        spmd__fab_op *ops = (spmd__fab_op *)r->temp;
        int i;
        for (i = 0; i < 3; i++)
            if (SPMD__LD_ACQ(&ops[i].state) == SPMD__FOP_ACTIVE) spmd__fab_cancel(m->lf.fab, &ops[i], s, why);
    }
    spmd__fail(r->dev, s, "%s of %s x %zu %s %d (tag %d; -1 = any) over '%s' %s", spmd__kind_names[r->sig.kind],
               spmd__dtype_names[r->sig.dtype], r->count, r->sig.kind == SPMD__KIND_SEND ? "to" : "from", r->peer,
               r->tag, r->gr->text, why);
    if (s == SPMD_ERR_TIMEOUT) spmd__break(m, s, r->dev->id, r->dev->err);
    r->xp_blk = NULL; /* the provider may still hold its ops: freed with the request (r->temp), not reused */
    spmd__free(&m->alloc, r->xscratch);
    r->xscratch = NULL;
    spmd__finish(r, s);
    return 1;
}

/* This process's mesh m broke: tell the others (see spmd__boot_announce). */
static void spmd__fab_announce(spmd_mesh *m) {
    spmd__slock(&m->lf.fab->lock);
    spmd__boot_announce(m->lf.fab->boot, m->mesh_id, (uint32_t)m->broken_status, m->broken_msg);
    spmd__sunlock(&m->lf.fab->lock);
}

/* The report across processes (spmd__break, once per mesh and process):
   this process's devices' lines ("devices now" of spmd_report, taken before
   the mesh is marked broken: spmd__fab_recs_text) go to the others as
   RECORDS (spmd__fab_recs_send); when spmd_run ends (or the mesh is
   destroyed), spmd__report_settle waits for every other live process's
   lines about m, reading the bootstrap connection every ms, until a
   twentieth of the mesh's deadline (at least 50 ms, at most 1 s) after the
   break, then logs them (spmd__fab_recs_log). The failing call does not
   wait. A process whose devices are all in their own code reads nothing
   and sends nothing: its devices are then shown as not heard from (lines
   that come later are in spmd_report's text). */
static char *spmd__fab_recs_text(spmd_mesh *m) {
    char *text = (char *)spmd__alloc(&m->alloc, SPMD__BOOT_RECS_MAX + 1);
    uint64_t now = spmd__rec_now(m);
    spmd__text t;
    int i;
    if (!text) return NULL;
    t.buf = text;
    t.len = SPMD__BOOT_RECS_MAX + 1;
    t.at = 0;
    t.brief = 0;
    text[0] = '\0';
    for (i = m->first_local; i < m->first_local + m->nlocal; i++) {
        size_t at = t.at;
        spmd__rep_now(&t, m->devs[i], now);
        if (t.at > SPMD__BOOT_RECS_MAX) { /* cut at the last whole line */
            text[at] = '\0';
            break;
        }
    }
    return text;
}

static void spmd__fab_recs_send(spmd_mesh *m, const char *text) {
    spmd__fab *f = m->lf.fab;
    uint64_t wait = (uint64_t)m->timeout_ms * 50000u; /* (a twentieth of the deadline, in ns) */
    spmd__slock(&f->lock);
    spmd__boot_send_recs(f->boot, m->mesh_id, text);
    spmd__sunlock(&f->lock);
    SPMD__ST_REL(&m->report_until,
                 spmd__now_ns() + (wait < 50000000u ? 50000000u : wait > 1000000000u ? 1000000000u : wait));
}

/* Wait until every other live process's lines about m came, or until.
   Through process 0 (they are passed on there): once it is lost, none can. */
static void spmd__fab_recs_wait(spmd_mesh *m, uint64_t until) {
    spmd__fab *f = m->lf.fab;
    int i;
    for (;;) {
        int p, missing = 0;
        struct timespec ms = {0, 1000000};
        spmd__slock(&f->lock);
        spmd__boot_poll(f->boot);
        for (i = 0; i < m->size && !missing; i++) { /* the processes of m's devices */
            p = m->proc_of ? m->proc_of[i] : 0;
            if (p != f->boot->rank && p < f->boot->nprocs && !f->boot->lost[p] &&
                !spmd__boot_recs_of(f->boot, m->mesh_id, (uint32_t)p))
                missing++;
        }
        if (f->boot->rank != 0 && f->boot->lost[0]) missing = 0;
        spmd__sunlock(&f->lock);
        if (!missing || spmd__now_ns() >= until) break;
        nanosleep(&ms, NULL);
    }
}

/* spmd_report: device dev's line from its process's RECORDS, after "  device
   dev: ", into out; 0 if none came. */
static int spmd__fab_recs_line(spmd_mesh *m, int dev, char *out, size_t cap) {
    const spmd__boot_recs *e;
    char key[32];
    const char *p;
    size_t n;
    int found = 0;
    if (!m->lf.fab || !m->proc_of || cap == 0) return 0;
    snprintf(key, sizeof key, "  device %d: ", dev);
    spmd__slock(&m->lf.fab->lock);
    e = spmd__boot_recs_of(m->lf.fab->boot, m->mesh_id, (uint32_t)m->proc_of[dev]);
    for (p = e ? e->text : NULL; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, strlen(key)) != 0) continue;
        p += strlen(key);
        n = strcspn(p, "\n");
        if (n >= cap) n = cap - 1;
        memcpy(out, p, n);
        out[n] = '\0';
        found = 1;
        break;
    }
    spmd__sunlock(&m->lf.fab->lock);
    return found;
}

/* The break's report was logged with the lines the other processes had
   sent by then; log their devices' lines again once they came
   (spmd__report_settle), one line per device, after a header line. */
static void spmd__fab_recs_log(spmd_mesh *m) {
    char line[SPMD__LINE * 12];
    int i, n = 0;
    if (m->log_level == SPMD_LOG_OFF || m->log_level < SPMD_LOG_ERROR || !m->proc_of) return;
    for (i = 0; i < m->size; i++) {
        if (m->proc_of[i] == m->proc || !spmd__fab_recs_line(m, i, line, sizeof line)) continue;
        if (!n++) spmd__log(m, SPMD_LOG_ERROR, -1, "spmd report, the other processes' devices (lines they sent):");
        spmd__log(m, SPMD_LOG_ERROR, -1, "  device %d: (process %d) %s", i, m->proc_of[i], line);
    }
}

/* Announcements came since m last looked: break m if one is about it. */
static void spmd__fab_heard(spmd_mesh *m) {
    spmd__boot *b = m->lf.fab->boot;
    char why[SPMD__BOOT_BROKEN_MAX + 64];
    spmd_status s = SPMD_OK;
    uint32_t k, n;
    spmd__slock(&m->lf.fab->lock);
    n = b->nbroken;
    k = n - m->lf.heard > SPMD__BOOT_BROKEN_KEEP ? n - SPMD__BOOT_BROKEN_KEEP : m->lf.heard; /* older ones are gone */
    for (; k != n && s == SPMD_OK; k++) {
        const spmd__boot_broken *e = &b->broken[k % SPMD__BOOT_BROKEN_KEEP];
        if (e->mesh_id != m->mesh_id || (int)e->proc == b->rank) continue; /* (our own: broken here already) */
        s = (spmd_status)e->status;
        snprintf(why, sizeof why, "process %u: %s", (unsigned)e->proc, e->text);
    }
    SPMD__ST_REL(&m->lf.heard, n);
    spmd__sunlock(&m->lf.fab->lock);
    if (s != SPMD_OK) spmd__break(m, s, -1, why);
}

/* A process that hosts some of m's devices is known lost (the bootstrap
   saw its connection close, or process 0 said so): m breaks with
   SPMD_ERR_PEER_LOST at once, so that every call on it ends now, not only
   those waiting on the lost process (a call waiting on a live process that
   broke on the loss itself would otherwise wait out its deadline). */
/* The lowest-numbered process of m that died (as this process heard), or
   -1; its reason in why. */
static int spmd__fab_lowest_lost(spmd_mesh *m, char *why, size_t n) {
    spmd__boot *b = m->lf.fab->boot;
    int i, p = -1;
    spmd__slock(&m->lf.fab->lock);
    for (i = 0; i < m->size && p < 0; i++) {
        int q = m->proc_of ? m->proc_of[i] : 0;
        if (q != b->rank && q < b->nprocs && b->lost[q] == 1) p = q;
    }
    spmd__sunlock(&m->lf.fab->lock);
    if (p >= 0) snprintf(why, n, "process %d lost (it died or its host is unreachable)", p);
    return p;
}
static void spmd__fab_lost_heard(spmd_mesh *m) {
    int n = SPMD__LD_ACQ(&m->lf.fab->boot->nlost);
    char why[128];
    int p = spmd__fab_lowest_lost(m, why, sizeof why);
    SPMD__ST_REL(&m->lf.lost_heard, n);
    if (p < 0 || SPMD__LD_ACQ(&m->broken)) return;
    spmd__break(m, SPMD_ERR_PEER_LOST, -1, why);
}

/* What other processes said since the bootstrap was last read: read it
   unless that was within ~2 ms (a coarse clock costs a memory read), then
   take in the announcements. Every call starts here (spmd__check_dev), so
   a call that starts after another process's announcement of m's break
   reached this process finds m broken, as a call on threads would, rather
   than completing from headers its peers sent before they failed (a
   process that comes late to an operation its peers gave up on). An
   announcement that arrives while a call waits is taken in by its poll
   (spmd__poll); one that arrives within those ~2 ms before a call that
   finds every header here already is not seen by that call. */
static void spmd__fab_news(spmd_mesh *m) {
    spmd__fab *f = m->lf.fab;
    struct timespec ts;
    uint64_t now;
    if (m->nprocs < 2) return;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* behind CLOCK_MONOTONIC by at most a tick */
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now >= SPMD__LD_ACQ(&f->next_poll_ns)) {
        spmd__slock(&f->lock);
        now = spmd__now_ns();
        if (now >= f->next_poll_ns) {
            SPMD__ST_REL(&f->next_poll_ns, now + 2000000u);
            spmd__boot_poll(f->boot);
        }
        spmd__sunlock(&f->lock);
    }
    if (SPMD__LD_ACQ(&f->boot->nbroken) != SPMD__LD_ACQ(&m->lf.heard)) spmd__fab_heard(m);
    if (SPMD__LD_ACQ(&f->boot->nlost) != SPMD__LD_ACQ(&m->lf.lost_heard)) spmd__fab_lost_heard(m);
}

/* What the end-of-run agreement heard (spmd__fab_agree): process p's
   entry, another process's bytes, is all + p * cap, lens[p] bytes (at most
   cap: the bootstrap checked): the status that broke its mesh (4 bytes, 0:
   none) and the reason's text. The break taken is the lowest-numbered
   process's whose status is nonzero (an entry shorter than 4 bytes counts
   as 0). Returns that process when its status is one this process knows
   (*got), with its reason in why (n > 0 bytes, cut to fit): as it is when
   it begins "process " (a break it heard of, naming its origin), else
   after "process p: "; printable ASCII, '?' for any other byte. Else -1
   (no process's mesh broke, or the status is unknown: nothing taken). */
static int spmd__fab_agree_pick(const unsigned char *all, size_t cap, const size_t *lens, int P, uint32_t *got,
                                char *why, size_t n) {
    const unsigned char *t;
    size_t i, l, at;
    int p, w = 0;
    for (p = 0; p < P && (lens[p] < 4 || spmd__boot_get32(all + (size_t)p * cap) == 0u); p++) {}
    if (p == P || spmd__boot_get32(all + (size_t)p * cap) >= SPMD_STATUS_COUNT) return -1;
    *got = spmd__boot_get32(all + (size_t)p * cap);
    t = all + (size_t)p * cap + 4;
    l = lens[p] - 4;
    if (!(l >= 8 && memcmp(t, "process ", 8) == 0)) w = snprintf(why, n, "process %d: ", p);
    at = w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
    for (i = 0; i < l && at + 1 < n; i++) /* shown to users: printable ASCII only */
        why[at++] = t[i] < 32 || t[i] > 126 ? '?' : (char)t[i];
    why[at] = '\0';
    return p;
}

/* The end of spmd_run across processes: every process agrees on how the
   run ended. Each contributes its mesh's state (0, or the status that
   broke it and why) to an allgather through the bootstrap, which returns
   once every process's run has ended (bounded by the bootstrap's deadline
   plus the mesh's: the others' calls end at their deadline) or fails when
   a process is lost; then each takes the break of the lowest-numbered
   process whose mesh broke, as the same text in every process. So every
   process's spmd_run returns the same status and
   spmd_mesh_error the same reason, even a process that completed its last
   call from messages its peers sent before they gave up on it (a call
   that ends within the window before the announcement arrives; see
   docs/recovery.md). A lost process fails the allgather: every survivor
   heard of the loss (the coordinator's LOST, or its socket), and each
   takes the loss of the lowest-numbered process it knows lost, in the
   same words (one loss: the same text everywhere, whatever each device
   saw). Only when every process hosts one of the mesh's
   devices (the same answer in every process): a process hosting none
   runs nothing (shard_map refuses at once), so it would not come. */
static void spmd__fab_agreed(spmd_mesh *m, spmd_status st, const char *why, uint32_t broken) {
    size_t l = strlen(why);
    pthread_mutex_lock(&m->lock);
    m->broken_status = st;
    if (l >= sizeof m->broken_msg) l = sizeof m->broken_msg - 1;
    memcpy(m->broken_msg, why, l);
    m->broken_msg[l] = '\0';
    SPMD__ST_SC(&m->broken, 1u);
    pthread_mutex_unlock(&m->lock);
    if (!broken)
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh broken (heard at the end of spmd_run): %s: %s", spmd_status_name(st), why);
}
SPMD__SETUP static void spmd__fab_agree(spmd_mesh *m) {
    spmd__fab *f = m->lf.fab;
    unsigned char mine[4 + SPMD__BOOT_BROKEN_MAX], *all;
    size_t *lens, n = 4, cap = sizeof mine, i;
    uint32_t broken = SPMD__LD_ACQ(&m->broken), got;
    /* a process whose devices all returned waits for the others, whose
       calls end at their deadline at the latest: the mesh's deadline and
       the bootstrap's, in all */
    int64_t ms = f->boot->timeout_ms + m->timeout_ms;
    int p, P = m->nprocs;
    spmd_status st;
    char why[SPMD__BOOT_BROKEN_MAX + 64];
    for (p = 0, i = 0; i < (size_t)m->size; i++) /* devices are in blocks by process: count the blocks */
        p += i == 0 || m->proc_of[i] != m->proc_of[i - 1];
    if (p < P) return;
    spmd__boot_put32(mine, broken ? (uint32_t)m->broken_status : 0u);
    if (broken) {
        size_t l = strlen(m->broken_msg);
        if (l > SPMD__BOOT_BROKEN_MAX) l = SPMD__BOOT_BROKEN_MAX;
        memcpy(mine + 4, m->broken_msg, l);
        n += l;
    }
    all = (unsigned char *)spmd__alloc(&m->alloc, (size_t)P * cap);
    lens = (size_t *)spmd__alloc(&m->alloc, (size_t)P * sizeof *lens);
    if (!all || !lens) {
        st = SPMD_ERR_NOMEM;
        snprintf(why, sizeof why, "the agreement at the end of spmd_run: out of memory");
    } else {
        spmd__slock(&f->lock);
        st = spmd__boot_allgather(f->boot, mine, n, all, cap, lens, spmd__now_ns() + (uint64_t)ms * 1000000u);
        if (st != SPMD_OK)
            snprintf(why, sizeof why, "the agreement at the end of spmd_run failed: %s", f->boot->err);
        spmd__sunlock(&f->lock);
    }
    if (st != SPMD_OK) { /* a lost process, most likely: what every survivor's mesh heard of */
        if (spmd__fab_lowest_lost(m, why, sizeof why) >= 0) spmd__fab_agreed(m, SPMD_ERR_PEER_LOST, why, broken);
        else if (!broken) spmd__break(m, st, -1, why);
    } else if (spmd__fab_agree_pick(all, cap, lens, P, &got, why, sizeof why) >= 0) {
        spmd__fab_agreed(m, (spmd_status)got, why, broken); /* the same text in every process, that one too */
    }
    spmd__free(&m->alloc, all);
    spmd__free(&m->alloc, lens);
}

static void spmd__fabric_progress(spmd_req *r) {
    if (!r->x) {
        /* a device waiting inside its process still drives the transport:
           a peer's large send may complete only when this process reads
           its queue (shm), and the local wait may hinge on that peer */
        spmd__fab_progress(r->dev->mesh->lf.fab);
        spmd__thread_progress(r);
    } else if (r->p2p) {
        spmd__xp_progress(r);
    } else if (r->lf.xq) {
        spmd__xq_progress(r);
    } else {
        spmd__x_progress(r);
    }
}

/* The process's transport: opened by the first libfabric mesh, shared by
   all, closed at exit after a bootstrap barrier (so that no process tears
   its endpoint down while a peer still reads from it). One of the two
   process-wide states, on purpose: a process joins its job once (the
   launcher gives it one rank and one control connection), whatever the
   number of its meshes; the signal report's tables (>>recorder) are the
   other. */
static pthread_mutex_t spmd__world_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd__fab *spmd__world;
static uint32_t spmd__world_meshes;
static pthread_t spmd__world_thread; /* SPMD_PROGRESS_THREAD=1: drives the transport every ~50 us */
static uint32_t spmd__world_thread_on, spmd__world_stop;

static void *spmd__world_progress(void *arg) {
    spmd__fab *f = (spmd__fab *)arg;
    while (!SPMD__LD_ACQ(&spmd__world_stop)) {
        struct timespec ts = {0, 50000};
        spmd__fab_progress(f);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void spmd__world_close(void) {
    pthread_mutex_lock(&spmd__world_lock);
    if (spmd__world_thread_on) {
        SPMD__ST_SC(&spmd__world_stop, 1u);
        pthread_join(spmd__world_thread, NULL);
        spmd__world_thread_on = 0;
    }
    if (spmd__world) {
        spmd__slock(&spmd__world->lock);
        (void)spmd__boot_barrier(spmd__world->boot, spmd__now_ns() + 10000000000u);
        spmd__sunlock(&spmd__world->lock);
        spmd__fab_close(spmd__world);
        spmd__world = NULL;
    }
    pthread_mutex_unlock(&spmd__world_lock);
}

static int spmd__launched_many(void) {
    static const char *const names[] = {"SPMD_NUM_PROCESSES", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    const char *b = getenv("SPMD_BACKEND");
    size_t i;
    if (b && strcmp(b, "threads") == 0) return 0;
    if (b && strcmp(b, "libfabric") == 0) return 1;
    for (i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v) > 1;
    }
    return 0;
}

/* The process's transport, opened by its first mesh (spmd__world; the
   caller holds spmd__world_lock): bootstrap, provider, lanes, and the
   progress thread when SPMD_PROGRESS_THREAD=1 asks for one. */
SPMD__SETUP static spmd_status spmd__world_open(spmd_mesh *m) {
    static int registered;
    spmd__fab_desc fd;
    int64_t bt = 0;
    char err[512];
    spmd_status st;
    memset(&fd, 0, sizeof fd);
    fd.boot.log_level = m->log_level;
    /* the bootstrap's deadline: SPMD_BOOT_TIMEOUT_MS, else the mesh's
       (desc.timeout_ms, SPMD_TIMEOUT_MS winning), not a fixed 60 s */
    if (spmd__boot_env_i64("SPMD_BOOT_TIMEOUT_MS", 1, INT64_MAX / 1000000, &bt) != 1)
        fd.boot.timeout_ms = m->timeout_ms;
    st = spmd__fab_open(&fd, &spmd__world, err, sizeof err);
    if (st != SPMD_OK) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh on libfabric: %s", err);
        return st;
    }
    {
        const char *c = getenv("SPMD_FABRIC_CTS");
        spmd__fab *w = spmd__world;
        /* shm and net (see spmd__fab_getinfo); not needed when the bulk
           rings carry every large message */
        w->cts = c && *c ? strcmp(c, "0") != 0
                         : (strncmp(w->prov, "shm", 3) == 0 || spmd__fab_xnet(w->prov)) &&
                               !(w->bulk_cap && w->nlanes == w->nprocs - 1);
    }
    if (!registered) atexit(spmd__world_close);
    registered = 1;
    {
        const char *pt = getenv("SPMD_PROGRESS_THREAD");
        if (pt && strcmp(pt, "1") == 0 &&
            pthread_create(&spmd__world_thread, NULL, spmd__world_progress, spmd__world) == 0)
            spmd__world_thread_on = 1;
    }
    return SPMD_OK;
}

/* The machine this process runs on: a hash of the kernel's boot id, which
   the processes of one machine share whatever their host names (an
   emulated cluster's "hosts" in network namespaces share its CPUs), or of
   the host name without one. */
SPMD__SETUP static uint32_t spmd__machine_id(void) {
    char id[256] = "";
    uint32_t h = 2166136261u;
    size_t i;
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!fp || !fgets(id, sizeof id, fp)) spmd__host_name(id, sizeof id);
    if (fp) fclose(fp);
    for (i = 0; id[i] && id[i] != '\n'; i++) h = (h ^ (unsigned char)id[i]) * 16777619u;
    return h;
}

/* A process's machine, that machine's CPUs as it said, and its devices. */
typedef struct spmd__onmach {
    uint32_t mach, cpus;
    int64_t n;
} spmd__onmach;
static int spmd__onmach_cmp(const void *a, const void *b) {
    uint32_t x = ((const spmd__onmach *)a)->mach, y = ((const spmd__onmach *)b)->mach;
    return x < y ? -1 : x > y;
}

/* Whether a machine of the mesh runs more of its devices than it has CPUs
   (mesh_crowded: every process reads the same tables, so all choose
   alike), and whether this process's does (host_crowded: its waits yield
   at once). From the machines and CPUs spmd__mesh_compare heard: the
   processes sorted by machine, each machine's run summed (O(devices + P
   log P): 16,384 processes are 16,384 machines' worth of scans otherwise). */
SPMD__SETUP static void spmd__fabric_crowd(spmd_mesh *m, const spmd__fab *f) {
    int P = m->nprocs, i, j;
    spmd__onmach *t;
    if (!f->mach || !(t = (spmd__onmach *)spmd__alloc(&m->alloc, (size_t)P * sizeof *t))) return;
    for (i = 0; i < P; i++) {
        t[i].mach = f->mach[2 * i];
        t[i].cpus = f->mach[2 * i + 1];
    }
    for (i = 0; i < m->size; i++) t[m->proc_of[i]].n++;
    qsort(t, (size_t)P, sizeof *t, spmd__onmach_cmp);
    for (i = 0; i < P; i = j) {
        int64_t n = 0;
        uint32_t cpus = t[i].cpus;
        for (j = i; j < P && t[j].mach == t[i].mach; j++) {
            n += t[j].n;
            if (t[j].cpus < cpus) cpus = t[j].cpus;
        }
        if (n <= (int64_t)cpus) continue;
        m->mesh_crowded = 1;
        if (t[i].mach == f->mach[2 * m->proc]) m->host_crowded = 1;
    }
    spmd__free(&m->alloc, t);
}

#define SPMD__CMP_SAME (4 + SPMD_MAX_AXES) /* words every process's mesh must agree on; then its machine and CPUs */
/* Every process must have made the same mesh at the same position: its
   number, shape, devices per process (L), check mode and forced
   algorithm, compared by the bootstrap's allgather, which also carries
   each process's machine and CPUs (spmd__fabric_crowd). all and lens:
   room for P answers (freed here). */
SPMD__SETUP static spmd_status spmd__mesh_compare(spmd_mesh *m, int L, uint32_t *all, size_t *lens) {
    spmd__fab *f = m->lf.fab;
    uint32_t mine[SPMD__CMP_SAME + 2];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int p, i, P = m->nprocs;
    spmd_status st;
    memset(mine, 0, sizeof mine);
    mine[SPMD__CMP_SAME] = spmd__machine_id();
    mine[SPMD__CMP_SAME + 1] = cpus > 0 ? (uint32_t)cpus : 1u;
    mine[0] = m->mesh_id;
    mine[1] = (uint32_t)m->ndim;
    mine[2] = (uint32_t)L;
    mine[3] = (uint32_t)m->check | (uint32_t)m->forced_algo << 2; /* they choose the algorithms */
    for (i = 0; i < m->ndim; i++) mine[4 + i] = (uint32_t)m->shape[i];
    spmd__slock(&f->lock);
    /* the bootstrap's deadline, not the mesh's: processes may reach this
       call far apart (one still waiting out a failed operation) */
    st = spmd__boot_allgather(f->boot, mine, sizeof mine, all, sizeof mine, lens, spmd__now_ns() +
                              (uint64_t)(f->boot->timeout_ms > m->timeout_ms ? f->boot->timeout_ms : m->timeout_ms) *
                                  1000000u);
    spmd__sunlock(&f->lock);
    if (st != SPMD_OK) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh on libfabric: comparing the mesh with the other processes: %s",
                  f->boot->err);
    } else {
        for (p = 0; p < P; p++)
            if (lens[p] != sizeof mine || memcmp(all + (size_t)p * (sizeof mine / 4), mine, SPMD__CMP_SAME * 4) != 0) {
                spmd__log(m, SPMD_LOG_ERROR, -1,
                          "mesh on libfabric: process %d made a different mesh as its mesh #%u (shapes, axis "
                          "count, devices per process, SPMD_CHECK or SPMD_ALGO differ)", p, m->mesh_id);
                st = SPMD_ERR_MISMATCH;
                break;
            }
    }
    if (st == SPMD_OK && (f->mach || (f->mach = (uint32_t *)spmd__alloc(&f->alloc, (size_t)P * 8)) != NULL)) {
        for (p = 0; p < P; p++) memcpy(&f->mach[2 * p], all + (size_t)p * (sizeof mine / 4) + SPMD__CMP_SAME, 8);
        spmd__fabric_crowd(m, f);
    }
    spmd__free(&m->alloc, all);
    spmd__free(&m->alloc, lens);
    /* with clear-to-send, headers go before their receive is posted and must
       fit the inject size (SPMD__X_CTS): check mode's long ones (128 bytes)
       fit net's, not the 64 bytes it offers with manual progress (strict) */
    if (st == SPMD_OK && m->check && f->cts && f->inject < SPMD__X_HDR) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh on libfabric: check mode sends headers of %zu bytes before their "
                  "receive is posted, more than provider %s can inject (%zu): not supported there (SPMD_CHECK=0, "
                  "or another provider)", (size_t)SPMD__X_HDR, f->prov, (size_t)f->inject);
        st = SPMD_ERR_UNSUPPORTED;
    }
    return st;
}

/* Which process hosts which devices: process p one contiguous block.
   With L devices per process, block p is [pL, (p+1)L). Else the mesh is
   dealt in rows of its minor-most axis (R rows of shape[ndim-1] devices;
   process p takes rows [Rp/P, R(p+1)/P)), so that the minor axis stays
   inside a process even when P does not divide the mesh (4x2 on 3
   processes: 2, 2 and 4 devices). With fewer rows than processes the
   devices are dealt one by one ([np/P, n(p+1)/P)) and some row spans two
   processes: the log says so (info), since that axis's calls then cross
   processes. A 1-D mesh is one row: it is always dealt device by device. */
SPMD__SETUP static void spmd__place(spmd_mesh *m, int L) {
    int P = m->nprocs, p, i, w = m->ndim > 1 ? m->shape[m->ndim - 1] : 1, R = m->size / w;
    if (L) {
        w = L;
        R = P;
    } else if (R < P) {
        w = 1;
        R = m->size;
    }
    for (p = 0; p < P; p++) { /* process p: devices [lo, hi) */
        int lo = w * (int)((int64_t)R * p / P), hi = w * (int)((int64_t)R * (p + 1) / P);
        for (i = lo; i < hi; i++) m->proc_of[i] = p;
        if (p == m->proc) {
            m->first_local = lo;
            m->nlocal = hi - lo;
        }
    }
    if (!L && m->ndim > 1 && w == 1 && m->shape[m->ndim - 1] > 1) /* (fewer rows than processes) */
        spmd__log(m, SPMD_LOG_INFO, -1, "mesh #%u: %d processes for %d rows of minor axis '%s': its rows span "
                  "processes (its calls cross them; devices_per_process or fewer processes keep it inside one)",
                  m->mesh_id, P, m->size / m->shape[m->ndim - 1], m->names[m->ndim - 1]);
}

SPMD__SETUP static spmd_status spmd__fabric_init(spmd_mesh *m) {
    spmd__fab *f;
    int P, i, L = m->want_dpp;
    uint32_t *all;
    size_t *lens;
    spmd_status st;
    pthread_mutex_lock(&spmd__world_lock);
    if (!spmd__world && (st = spmd__world_open(m)) != SPMD_OK) {
        pthread_mutex_unlock(&spmd__world_lock);
        return st;
    }
    f = spmd__world;
    m->mesh_id = spmd__world_meshes++;
    m->lf.heard = SPMD__LD_ACQ(&f->boot->nbroken); /* before the mesh exists elsewhere: none is about it */
    pthread_mutex_unlock(&spmd__world_lock);
    m->lf.fab = f;
    {
        const char *q = getenv("SPMD_QUICK_EXCHANGE");
        m->lf.no_xq = q && strcmp(q, "0") == 0;
    }
    m->nprocs = P = f->nprocs;
    m->proc = f->rank;
    if (!L) {
        int64_t v = 0;
        if (spmd__boot_env_i64("SPMD_DEVICES_PER_PROCESS", 1, SPMD_MAX_DEVICES, &v) == 1) L = (int)v;
    }
    if (L && (int64_t)L * P != m->size && !m->shrink_procs) {
        spmd__log(m, SPMD_LOG_ERROR, -1, "mesh of %d devices on %d processes with %d devices each (%d needed)",
                  m->size, P, L, L * P);
        return SPMD_ERR_SIZE;
    }
    m->proc_of = (int *)spmd__alloc(&m->alloc, (size_t)m->size * sizeof(int));
    all = (uint32_t *)spmd__alloc(&m->alloc, (size_t)P * (SPMD__CMP_SAME + 2) * sizeof *all);
    lens = (size_t *)spmd__alloc(&m->alloc, (size_t)P * sizeof *lens);
    if (!m->proc_of || !all || !lens) {
        spmd__free(&m->alloc, all);
        spmd__free(&m->alloc, lens);
        return SPMD_ERR_NOMEM;
    }
    if (!m->shrink_procs) spmd__place(m, L);
    if (m->shrink_procs) { /* >>shrink: the survivors keep their devices; the shape was agreed on */
        spmd__free(&m->alloc, all);
        spmd__free(&m->alloc, lens);
        memcpy(m->proc_of, m->shrink_procs, (size_t)m->size * sizeof(int));
        m->first_local = m->nlocal = 0;
        for (i = 0; i < m->size; i++)
            if (m->proc_of[i] == m->proc && m->nlocal++ == 0) m->first_local = i;
        spmd__fabric_crowd(m, f);
        return SPMD_OK;
    }
    if ((st = spmd__mesh_compare(m, L, all, lens)) == SPMD_OK)
        spmd__log(m, SPMD_LOG_INFO, -1, "mesh #%u: process %d of %d hosts devices %d..%d over %s", m->mesh_id, m->proc,
                  P, m->first_local, m->first_local + m->nlocal - 1, f->prov);
    return st;
}

/* Exchanges still listed (a failure left them) and the spare ones. */
SPMD__SETUP static void spmd__fabric_fini(spmd_mesh *m) {
    size_t b;
    if (!m->gtab || !m->lf.fab) return;
    for (b = 0; b < m->gbuckets; b++) {
        spmd__group *g;
        for (g = m->gtab[b]; g; g = g->next) {
            int pass;
            for (pass = 0; pass < 2; pass++) {
                spmd__xrec *x = pass ? g->lf.xfree : g->lf.xlive, *nx;
                for (; x; x = nx) {
                    size_t i, held = 0;
                    nx = x->next;
                    for (i = 0; i < spmd__x_nops(g) + (x->xp ? (size_t)x->xp->nops : 0); i++) {
                        /* rop, sop and aop are one array; then a plan's */
                        spmd__fab_op *op = i < spmd__x_nops(g) ? &x->rop[i] : &x->xp->op[i - spmd__x_nops(g)];
                        if (!spmd__fab_op_idle(op) &&
                            spmd__fab_cancel(m->lf.fab, op, SPMD_ERR_STATE, "mesh destroyed") != SPMD_OK)
                            held = 1;
                    }
                    if (held) spmd__log(m, SPMD_LOG_WARN, -1, "mesh_destroy: the provider keeps buffers of a failed "
                                        "operation; they stay allocated");
                    else spmd__x_free(m, g, x);
                }
                if (pass) g->lf.xfree = NULL; else g->lf.xlive = NULL;
                g->lf.xnlive = 0;
            }
            if (g->lf.xq) {
                int i, held = 0;
                for (i = 0; i < g->G + g->nrp; i++)
                    if (!spmd__fab_op_idle(&g->lf.xq->rop[i]) &&
                        spmd__fab_cancel(m->lf.fab, &g->lf.xq->rop[i], SPMD_ERR_STATE, "mesh destroyed") != SPMD_OK)
                        held = 1;
                for (i = 0; g->lf.xq->lop && i < m->D * g->G; i++)
                    if (!spmd__fab_op_idle(&g->lf.xq->lop[i]) &&
                        spmd__fab_cancel(m->lf.fab, &g->lf.xq->lop[i], SPMD_ERR_STATE, "mesh destroyed") != SPMD_OK)
                        held = 1;
                spmd__fab_mr_forget(m->lf.fab, g->lf.xq->hbuf, (size_t)g->G * g->lf.xq->hb);
                if (g->lf.xq->lop) spmd__fab_mr_forget(m->lf.fab, g->lf.xq->lbuf, (size_t)m->D * (size_t)g->G * g->lf.xq->hb);
                if (held) spmd__log(m, SPMD_LOG_WARN, -1, "mesh_destroy: the provider keeps buffers of a failed "
                                    "operation; they stay allocated");
                else {
                    spmd__free(&m->alloc, g->lf.xq->lop);
                    spmd__free(&m->alloc, g->lf.xq);
                }
                g->lf.xq = NULL;
            }
            if (g->lf.xchan) {
                spmd__xchan *c = g->lf.xchan;
                size_t i, n = (size_t)g->G * (size_t)g->nloc;
                int held = 0;
                while (c->head) {
                    spmd__xmsg *x = c->head;
                    c->head = x->next;
                    spmd__free(&m->alloc, x);
                }
                while (c->spare) {
                    spmd__xmsg *x = c->spare;
                    c->spare = x->next;
                    spmd__free(&m->alloc, x);
                }
                for (i = 0; c->hop && i < n; i++)
                    if (!spmd__fab_op_idle(&c->hop[i]) &&
                        spmd__fab_cancel(m->lf.fab, &c->hop[i], SPMD_ERR_STATE, "mesh destroyed") != SPMD_OK)
                        held = 1;
                if (c->hbuf) spmd__fab_mr_forget(m->lf.fab, c->hbuf, n * c->hb);
                if (!held) { /* else the provider may still write them: they stay allocated */
                    spmd__free(&m->alloc, c->hbuf);
                    spmd__free(&m->alloc, c->hop);
                }
                spmd__free(&m->alloc, c->rseq);
                spmd__free(&m->alloc, c->sseq);
                spmd__free(&m->alloc, c);
                g->lf.xchan = NULL;
            }
        }
    }
}

/* Bruck by default from this many processes in the group on, for
   operations whose records (every input with its header) come to at most
   SPMD__X_BRUCK_MAX bytes: there ceil(log2 P) messages in a row cost less
   than P - 1 at once, each with its per-message cost at both ends (the
   usual crossover of recursive doubling and direct exchange; this machine
   has two CPUs and cannot measure it). On fewer processes an unrooted
   operation takes it too when the group has on average two members or
   more per process: then each process sends one block per step, not one
   header per member (2 processes, 8 B psum: 4 devices each 3.5 -> 2.5 us,
   512 each 1.44 -> 0.77 ms); rooted ones stay direct there, one way. A
   block of more than SPMD__X_BRUCK_SMALL bytes (the lane's small message)
   goes announced, a round trip: there only with 16 members per process or
   more (2 processes of 2 devices, all_gather of 16 KiB: direct 4.8 us,
   Bruck 6.6). */
#define SPMD__X_BRUCK_PROCS 8
#define SPMD__X_BRUCK_SMALL 8192u
#define SPMD__X_BRUCK_MAX 262144u

/* The exchange path's algorithm for r: split for a psum whose input times
   the other processes is at least SPMD__X_SPLIT_MIN bytes (or when asked
   for, and larger than the inline size); Bruck for small operations on
   many processes (or when asked for), never in check mode (the direct
   exchange names every mismatch), for ppermute (one step already) or
   ragged_all_to_all (only its headers tell the sizes); else direct. (The
   inputs of a group of several members per process: see
   SPMD__X_BRUCK_PROCS.) Every
   process decides alike; the signature carries the choice, so processes
   forced differently report a mismatch (or time out, naming whom they
   wait for, when their messages never meet). */
/* Do the lanes' bulk rings carry every message of r's group? */
static int spmd__x_lanes(const spmd_req *r) {
    const spmd__group *g = r->gr->g;
    const spmd__fab *f = r->dev->mesh->lf.fab;
    int k, lanes = f->bulk_cap != 0;
    for (k = 0; lanes && k < g->nrp; k++) lanes = f->lane_of[g->rprocs[k]] >= 0;
    return lanes;
}

/* Which plan (see spmd__x_pplan) r runs, 0: none. Only where each process
   of the group holds one block of its members, the same power of two
   (g->pblk; scatter and gather: one member), not in check mode (the
   direct exchange names every mismatch), not for argmax and argmin (an
   index is no combine), not where large messages wait for a clear-to-send
   (shm and net without the lanes' bulk rings). rd or rab forced: that one
   (rab needs a block a rank; an all_gather's plan is the same under
   either). By default, P processes:
   - several members a process: a reduction always (whatever the link and
     P), recursive doubling or, where the split psum would run,
     Rabenseifner, a psum_scatter recursive halving: the members combine
     first (in the canonical order, their block being a subtree of the
     group's tree), so one partial a process crosses, not each member's
     input or slice (2 processes x 4 devices, 16 MiB: 1.0 n a process, was
     2.25 n); a block of another size keeps those exchanges (the order of
     a sum over its members could not be kept), docs/processes.md;
   - a small reduction from SPMD__X_BRUCK_PROCS on: recursive doubling
     (where Bruck would carry every input to every process: 8 processes,
     4 KiB, 0.3 ms against Bruck's 1.6-2.1 over the lane, 2.6 against 5.3
     over tcp); a small bcast or reduce there, across the network: its
     binomial tree (the root's ceil(log2 P) messages, not P - 1);
   - a large reduction, bcast or reduce (where the split psum would run)
     from SPMD__X_RAB_PROCS on, across the network: Rabenseifner, scatter +
     all-gather, reduce-scatter + gather (log2 P peers instead of P - 1,
     the same bytes, about 2n through a root; within a host the split one
     is 2.5x faster over the lane, 16 MiB on 4 and 8 processes, where the
     plan's copies to and from its stages cost more than the transfers);
   - a psum_scatter from SPMD__X_RAB_PROCS on across the network, and from
     SPMD__X_BRUCK_PROCS on where Bruck would take it: recursive halving;
   - an all_gather across the network over a power of two of processes,
     with several members a process (a step carries all their blocks) or
     large from SPMD__X_RAB_PROCS on: recursive doubling from the farthest
     process in, so that with the processes of a host in aligned blocks
     (H - 1)/H n leaves each host (spmd__plan_allgather), where the direct
     exchange and Bruck send K times that (K processes a host); within a
     host the direct one;
   - a small scatter or gather (G blocks within SPMD__X_BRUCK_MAX) from
     SPMD__X_BRUCK_PROCS on, or SPMD__X_RAB_PROCS across the network: its
     binomial tree. */
#define SPMD__X_RAB_PROCS 4
static uint8_t spmd__x_plan_algo(const spmd_req *r, spmd_algo want) {
    const spmd__group *g = r->gr->g;
    int P = g->nrp + 1, kind = r->sig.kind, mv = spmd__x_moves(kind), many = g->pblk > 1, net, large;
    size_t bytes = r->count * r->in_size; /* (a bcast's: the root's input) */
    if ((kind != SPMD__KIND_ALLREDUCE && kind != SPMD__KIND_REDUCE && kind != SPMD__KIND_PSUM_SCATTER && !mv) ||
        r->dev->mesh->check || (!mv && (!r->kern || !r->kern->comb || r->kern->argeq)) || !g->pblk ||
        (many && (kind == SPMD__KIND_SCATTER || kind == SPMD__KIND_GATHER)) || P < 2 || g->G > 65535 || r->count < 1 ||
        want == SPMD_ALGO_EAGER || want == SPMD_ALGO_SPLIT || want == SPMD_ALGO_BRUCK)
        return 0;
    net = !spmd__x_lanes(r); /* (a look at each process of the group: after the cheap tests) */
    if (r->dev->mesh->lf.fab->cts && net) return 0;
    if (kind == SPMD__KIND_SCATTER || kind == SPMD__KIND_GATHER)
        return want || (bytes * (size_t)P <= SPMD__X_BRUCK_MAX &&
                        (P >= SPMD__X_BRUCK_PROCS || (P >= SPMD__X_RAB_PROCS && net)))
                   ? SPMD__ALG_RD : 0;
    if (kind == SPMD__KIND_ALLGATHER) /* its process's blocks packed, the small steps across hosts */
        return want || (net && spmd__tree_leaves(P) == P &&
                        (many || (P >= SPMD__X_RAB_PROCS && bytes * (size_t)g->G > SPMD__X_BRUCK_MAX)))
                   ? SPMD__ALG_RD : 0;
    if (kind == SPMD__KIND_PSUM_SCATTER)
        return want || many || (P >= SPMD__X_RAB_PROCS && net) ||
                       (P >= SPMD__X_BRUCK_PROCS && bytes * (size_t)P <= SPMD__X_BRUCK_MAX)
                   ? SPMD__ALG_RAB : 0;
    if (want == SPMD_ALGO_RAB || want == SPMD_ALGO_RD)
        return want == SPMD_ALGO_RAB && r->count >= (size_t)P ? SPMD__ALG_RAB : SPMD__ALG_RD;
    large = r->count >= (size_t)P && bytes > SPMD__X_INLINE && bytes * (size_t)g->nrp >= SPMD__X_SPLIT_MIN;
    if (many && !mv) /* several members a process: they combine first, whatever the link */
        return large ? SPMD__ALG_RAB : SPMD__ALG_RD;
    if ((P >= SPMD__X_RAB_PROCS || (kind == SPMD__KIND_BCAST && spmd__plan_chains(P, bytes))) && large && net)
        return SPMD__ALG_RAB; /* (a bcast's chain from 3 processes on) */
    if (P < SPMD__X_BRUCK_PROCS) return 0;
    /* a machine with more devices than CPUs (mesh_crowded), a small call
       within a host: a psum direct, where every process needs the
       CPU once a call, not once a step, and a bcast's or reduce's tree (8
       processes of a device on 2 CPUs, 8 B over the lanes: psum 21.8 us
       direct against 40.6 by steps; reduce 4.9 by its tree, 7.2 direct);
       across the network the steps' fewer messages still win (4 emulated
       hosts of 2 processes: psum 0.31 ms by steps, 0.49 direct) */
    if (r->dev->mesh->mesh_crowded && !net && !large) return kind == SPMD__KIND_ALLREDUCE ? 0 : SPMD__ALG_RD;
    return kind == SPMD__KIND_ALLREDUCE || net ? SPMD__ALG_RD : 0;
}

static uint8_t spmd__x_algo(const spmd_req *r, spmd_algo want) {
    const spmd__group *g = r->gr->g;
    const spmd__fab *f = r->dev->mesh->lf.fab;
    size_t total = 0;
    uint8_t plan = spmd__x_plan_algo(r, want);
    if (plan) return plan;
    /* a large all_gather whose group reaches a process over the network: Bruck's ceil(log2 P) messages to
       as many peers move the same (P - 1)/P of the output as the direct exchange's P - 1 messages (16
       processes over tcp, 1 MiB each: 43.6-55.4 ms against 45.5-54.5); within a host the direct one */
    if (r->sig.kind == SPMD__KIND_ALLGATHER && want == SPMD_ALGO_DEFAULT && !r->dev->mesh->check && !f->cts &&
        g->nrp + 1 >= SPMD__X_RAB_PROCS && r->in_bytes * (size_t)g->G > SPMD__X_BRUCK_MAX && !spmd__x_lanes(r))
        want = SPMD_ALGO_BRUCK;
    if (r->sig.kind == SPMD__KIND_ALLREDUCE && want != SPMD_ALGO_EAGER && want != SPMD_ALGO_BRUCK &&
        r->in_bytes > SPMD__X_INLINE && r->count >= (size_t)g->nrp + 1 &&
        (want == SPMD_ALGO_SPLIT || r->in_bytes * (size_t)g->nrp >= SPMD__X_SPLIT_MIN))
        return SPMD__ALG_SPLIT;
    if (want == SPMD_ALGO_EAGER || want == SPMD_ALGO_SPLIT || r->dev->mesh->check ||
        r->sig.kind == SPMD__KIND_PPERMUTE || r->sig.kind == SPMD__KIND_RAGGED || g->G > 65535 ||
        (want != SPMD_ALGO_BRUCK && (g->G < 2 * (g->nrp + 1) || spmd__rooted(r->sig.kind)) &&
         (g->nrp + 1 < SPMD__X_BRUCK_PROCS || (r->dev->mesh->mesh_crowded && spmd__x_lanes(r)))))
        return SPMD__ALG_EAGER; /* (crowded, within a host: Bruck's steps each wait for a process to be run) */
    { /* every record's size, as every process sees it (the short header's 32 bits): the root's, and
         the others' all alike (ragged took the direct exchange above) */
        int root = r->root >= 0 && r->root < g->G ? r->root : 0, other = (root + 1) % g->G;
        if ((uint64_t)spmd__x_expect(r, root) > UINT32_MAX || (uint64_t)spmd__x_expect(r, other) > UINT32_MAX)
            return SPMD__ALG_EAGER;
        total = spmd__x_brec(r, root) + (size_t)(g->G - 1) * spmd__x_brec(r, other);
    }
    /* with clear-to-send every message must fit the inject size (see
       SPMD__X_CTS), unless the lane carries them all (its large messages
       go through the bulk ring, announced: later ones do not stall) */
    if ((f->cts && total > f->inject && !spmd__x_lanes(r)) || (want != SPMD_ALGO_BRUCK && total > SPMD__X_BRUCK_MAX))
        return SPMD__ALG_EAGER;
    /* on few processes, a block larger than a small message pays for it
       only where it spares many messages (see SPMD__X_BRUCK_PROCS) */
    if (want != SPMD_ALGO_BRUCK && g->nrp + 1 < SPMD__X_BRUCK_PROCS && total > SPMD__X_BRUCK_SMALL &&
        g->G < 16 * (g->nrp + 1))
        return SPMD__ALG_EAGER;
    return SPMD__ALG_BRUCK;
}
/* The hooks of the libfabric backend's table (spmd__backend_vt). */
static void spmd__fab_x_start(spmd_req *r, spmd_algo algo, int blocking) {
    /* the choice reads nothing but these and what the group and the mesh
       keep: a call that repeats them (a loop's) takes it again (~150 of a
       small call's ~1,700 instructions) */
    spmd__xpick *p = &r->dev->lf.pick;
    if (p->gr != r->gr || p->count != r->count || p->in_bytes != r->in_bytes || p->root != r->root ||
        p->want != (int)algo || p->kind != r->sig.kind || p->op != r->sig.op || p->dtype != r->sig.dtype) {
        p->gr = r->gr;
        p->count = r->count;
        p->in_bytes = r->in_bytes;
        p->root = r->root;
        p->want = (int)algo;
        p->kind = r->sig.kind;
        p->op = r->sig.op;
        p->dtype = r->sig.dtype;
        p->algo = spmd__x_algo(r, algo);
    }
    r->sig.algo = p->algo;
    r->lf.xq = blocking && spmd__xq_ready(r); /* blocking, small: the quick exchange */
}
static void spmd__fab_heard_all(spmd_mesh *m) {
    if (!m->lf.fab) return;
    if (SPMD__LD_ACQ(&m->lf.fab->boot->nbroken) != SPMD__LD_ACQ(&m->lf.heard)) spmd__fab_heard(m);
    if (SPMD__LD_ACQ(&m->lf.fab->boot->nlost) != SPMD__LD_ACQ(&m->lf.lost_heard)) spmd__fab_lost_heard(m);
}
static uint64_t spmd__fab_moved(const spmd_mesh *m) { return m->lf.fab ? SPMD__LD_ACQ(&m->lf.fab->moved) : 0; }
/* After a break: a break of ours is announced (a lost process is by the
   bootstrap's LOST already), and our devices' report lines go out now;
   the other processes' lines are waited for when spmd_run ends
   (spmd__report_settle), not by the call that broke the mesh. */
static void spmd__fab_broke(spmd_mesh *m, spmd_status s, int dev, int first, char *recs) {
    if (first && dev >= 0 && s != SPMD_ERR_PEER_LOST && m->lf.fab && m->nprocs > 1) spmd__fab_announce(m);
    if (first && recs) spmd__fab_recs_send(m, recs);
    if (recs) spmd__free(&m->alloc, recs);
}
static void spmd__fab_report_settle(spmd_mesh *m, uint64_t until) {
    if (!m->lf.fab) return;
    spmd__fab_recs_wait(m, until);
    spmd__fab_recs_log(m);
}
/* One message of the survivors' agreement, another process's bytes: its
   type and its payload (len bytes): the agreement's round (4 bytes), then
   one byte per process, P of them (nonzero: lost). 1: a message of type
   `want` (GATHER at the coordinator, GATHERED at a survivor) of this round
   and exactly 4 + P bytes: its bytes are or'ed into gone (or_in: the
   coordinator's union, as 0/1) or copied there (the decision); 0: of type
   `want` and an earlier round (an agreement that failed before): skip it;
   -1: anything else (out of step). gone is written only when 1. */
static int spmd__shrink_take(unsigned type, const unsigned char *payload, size_t len, unsigned want, uint32_t round,
                             int P, int or_in, unsigned char *gone) {
    uint32_t r = len >= 4 ? spmd__boot_get32(payload) : 0;
    int k;
    if (type != want || r > round) return -1;
    if (r < round) return 0;
    if (len != 4 + (size_t)P) return -1;
    if (!or_in) memcpy(gone, payload + 4, (size_t)P);
    else
        for (k = 0; k < P; k++) gone[k] |= payload[4 + k] != 0;
    return 1;
}

/* The survivors' agreement on the processes lost: gone[p] in: what this
   process knows (nonzero: lost), out: the coordinator's decision. why gets
   the reason on failure. The bootstrap's lock (f->lock) is held. msg: room
   for the message, 4 + P bytes (spmd__shrink_agree). */
static spmd_status spmd__shrink_agree_in(spmd_mesh *m, unsigned char *gone, unsigned char *msg, char *why,
                                         size_t wlen) {
    spmd__boot *b = m->lf.fab->boot;
    int P = b->nprocs, i;
    uint64_t deadline = spmd__now_ns() + (uint64_t)(b->timeout_ms > m->timeout_ms ? b->timeout_ms : m->timeout_ms) *
                                             1000000u + (b->rank ? 1000000000u : 0u); /* (hear the verdict) */
    uint32_t round = ++b->round;
    spmd__boot_msg bm;
    char perr[160];
    spmd__boot_put32(msg, round);
    if (b->rank != 0) {
        if (b->coord.fd < 0 || b->lost[0]) {
            snprintf(why, wlen, "the coordinator (process 0) is gone: the survivors cannot agree without it");
            return SPMD_ERR_PEER_LOST;
        }
        memcpy(msg + 4, gone, (size_t)P);
        if (spmd__boot_send(b, b->coord.fd, SPMD__BM_GATHER, b->rank, msg, 4 + (size_t)P, deadline) != 0) {
            snprintf(why, wlen, "sending this process's view to the coordinator: %s", strerror(errno));
            return SPMD_ERR_PEER_LOST;
        }
        for (;;) { /* the decision; LOST and BROKEN on the way are taken in, stale answers skipped */
            struct pollfd pf;
            int rc, ms;
            if (spmd__boot_oob(b, &b->coord) < 0) {
                snprintf(why, wlen, "an invalid message from the coordinator");
                return SPMD_ERR_SYSTEM;
            }
            rc = spmd__boot_parse(b, &b->coord, 0, &bm, perr, sizeof perr);
            if (rc < 0) {
                snprintf(why, wlen, "the coordinator: %s", perr);
                return SPMD_ERR_SYSTEM;
            }
            if (rc == 1) {
                uint32_t r = bm.len >= 4 ? spmd__boot_get32(bm.payload) : 0;
                int t = spmd__shrink_take(bm.type, bm.payload, bm.len, SPMD__BM_GATHERED, round, P, 0, gone);
                spmd__boot_consume(&b->coord, bm.total);
                if (t == 1) return SPMD_OK;
                if (t == 0) continue; /* of an exchange that failed before */
                snprintf(why, wlen, "the coordinator answered exchange #%u (type %u), this process is at #%u", r,
                         bm.type, round);
                return SPMD_ERR_MISMATCH;
            }
            if (b->coord.eof || b->coord.bye) {
                spmd__boot_mark(b, 0, !b->coord.bye);
                snprintf(why, wlen, "the coordinator (process 0) was lost during the agreement");
                return SPMD_ERR_PEER_LOST;
            }
            if ((ms = spmd__boot_ms_left(deadline)) == 0) {
                snprintf(why, wlen, "the coordinator did not answer within the deadline");
                return SPMD_ERR_TIMEOUT;
            }
            pf.fd = b->coord.fd; pf.events = POLLIN; pf.revents = 0;
            poll(&pf, 1, ms);
            spmd__boot_fill(b, &b->coord);
        }
    }
    for (i = 1; i < P; i++) { /* the coordinator: every process not known lost, or its loss */
        spmd__boot_conn *c = &b->peers[i];
        if (b->lost[i] || c->fd < 0) { gone[i] = 1; continue; }
        for (;;) {
            struct pollfd pf;
            int rc, ms;
            if (spmd__boot_oob(b, c) < 0) { gone[i] = 1; break; }
            rc = spmd__boot_parse(b, c, 0, &bm, perr, sizeof perr);
            if (rc < 0) { gone[i] = 1; break; }
            if (rc == 1) {
                int t = spmd__shrink_take(bm.type, bm.payload, bm.len, SPMD__BM_GATHER, round, P, 1, gone);
                spmd__boot_consume(c, bm.total);
                if (t == 0) continue; /* of an exchange that failed before */
                if (t < 0) gone[i] = 1; /* out of step: not in the new mesh */
                break;
            }
            if (c->eof || c->bye) { /* lost during the agreement */
                spmd__boot_mark(b, i, !c->bye);
                gone[i] = 1;
                break;
            }
            if ((ms = spmd__boot_ms_left(deadline)) == 0) {
                spmd__log(m, SPMD_LOG_ERROR, -1, "mesh_shrink: process %d did not join the agreement within the "
                          "deadline: counted as lost", i);
                gone[i] = 1;
                break;
            }
            pf.fd = c->fd; pf.events = POLLIN; pf.revents = 0;
            poll(&pf, 1, ms);
            spmd__boot_fill(b, c);
        }
    }
    gone[0] = 0;
    memcpy(msg + 4, gone, (size_t)P);
    for (i = 1; i < P; i++)
        if (!gone[i] && b->peers[i].fd >= 0)
            spmd__boot_send(b, b->peers[i].fd, SPMD__BM_GATHERED, 0, msg, 4 + (size_t)P, deadline);
    return SPMD_OK;
}

static spmd_status spmd__shrink_agree(spmd_mesh *m, unsigned char *gone, char *why, size_t wlen) {
    unsigned char *msg = (unsigned char *)spmd__alloc(&m->alloc, 4 + (size_t)m->lf.fab->boot->nprocs);
    spmd_status s;
    if (!msg) {
        snprintf(why, wlen, "out of memory for the agreement's message");
        return SPMD_ERR_NOMEM;
    }
    s = spmd__shrink_agree_in(m, gone, msg, why, wlen);
    spmd__free(&m->alloc, msg);
    return s;
}

/* spmd_mesh_counters: the transport's counts, summed per link class and
   per kind, the peers' bits OR-ed row by row (or all cleared: reset). */
static void spmd__fab_counters(spmd_mesh *m, spmd_counters *out, int reset) {
    spmd__fab *f = m->lf.fab;
    int l, k, w;
    if (!f || !f->cpeers) return;
    spmd__slock(&f->lock);
    if (reset) {
        memset(f->cmsgs, 0, sizeof f->cmsgs);
        memset(f->cbytes, 0, sizeof f->cbytes);
        memset(f->cinfl, 0, sizeof f->cinfl);
        memset(f->cpeers, 0, (size_t)SPMD_LINK_COUNT * SPMD_COUNT_KINDS * (size_t)f->cwords * 8);
    }
    for (l = 0; out && l < SPMD_LINK_COUNT; l++)
        for (k = 0; k < SPMD_COUNT_KINDS; k++) {
            out->link[l].messages += f->cmsgs[l][k];
            out->link[l].bytes += f->cbytes[l][k];
            out->kind[k].messages += f->cmsgs[l][k];
            out->kind[k].bytes += f->cbytes[l][k];
            out->total.messages += f->cmsgs[l][k];
            out->total.bytes += f->cbytes[l][k];
        }
    for (k = 0; out && k < SPMD_COUNT_KINDS; k++) {
        if (f->cinfl[k] > out->kind[k].inflight) out->kind[k].inflight = f->cinfl[k];
        if (f->cinfl[k] > out->total.inflight) out->total.inflight = f->cinfl[k];
    }
    for (w = 0; out && w < f->cwords; w++) {
        uint64_t all = 0, link[SPMD_LINK_COUNT] = {0}, kind[SPMD_COUNT_KINDS] = {0}, bits;
        for (l = 0; l < SPMD_LINK_COUNT; l++)
            for (k = 0; k < SPMD_COUNT_KINDS; k++) {
                bits = f->cpeers[(size_t)(l * SPMD_COUNT_KINDS + k) * (size_t)f->cwords + (size_t)w];
                link[l] |= bits;
                kind[k] |= bits;
                all |= bits;
            }
        out->total.peers += __builtin_popcountll(all);
        for (l = 0; l < SPMD_LINK_COUNT; l++) out->link[l].peers += __builtin_popcountll(link[l]);
        for (k = 0; k < SPMD_COUNT_KINDS; k++) out->kind[k].peers += __builtin_popcountll(kind[k]);
    }
    spmd__sunlock(&f->lock);
}

/* The survivors' agreement for spmd_mesh_shrink: gone in: nothing; out:
   the processes lost, as the coordinator decided. */
static spmd_status spmd__fab_lost_agree(spmd_mesh *m, unsigned char *gone, char *why, size_t wlen) {
    spmd_status s;
    int i;
    if (!m->lf.fab) return SPMD_OK;
    spmd__slock(&m->lf.fab->lock);
    spmd__boot_poll(m->lf.fab->boot);
    for (i = 0; i < m->nprocs; i++) gone[i] = m->lf.fab->boot->lost[i] != 0;
    s = spmd__shrink_agree(m, gone, why, wlen);
    spmd__sunlock(&m->lf.fab->lock);
    return s;
}
/* spmd_mesh_lost: also the devices of the processes this one knows are gone. */
static int spmd__fab_lost_devices(const spmd_mesh *m, int *devices, int cap) {
    int n;
    if (!m->lf.fab) return spmd__shrink_lost(m, NULL, devices, cap);
    spmd__slock(&m->lf.fab->lock);
    spmd__boot_poll(m->lf.fab->boot);
    n = spmd__shrink_lost(m, m->lf.fab->boot->lost, devices, cap);
    spmd__sunlock(&m->lf.fab->lock);
    return n;
}

static const spmd__backend_vt spmd__fabric_vt = {"libfabric", spmd__fabric_init, spmd__fabric_fini,
                                                 spmd__fabric_progress, 1, spmd__fab_x_start, spmd__xq_inline,
                                                 spmd__x_gone_check, spmd__x_check_missing, spmd__x_give_up,
                                                 spmd__fab_news, spmd__fab_heard_all, spmd__fab_moved,
                                                 spmd__fab_recs_text, spmd__fab_broke, spmd__fab_recs_line,
                                                 spmd__fab_report_settle, spmd__fab_agree, spmd__fab_lost_agree,
                                                 spmd__fab_lost_devices, spmd__fab_counters};
static const spmd__backend_vt *spmd__fabric_table(void) { return &spmd__fabric_vt; }
#endif /* SPMD__HAS_LIBFABRIC */

#endif /* SPMDCOLL_IMPLEMENTATION */

/*
REVISION HISTORY
    0.2.0 (2026-11-22)  every collective: all_gather(_invariant), psum_scatter,
                        all_to_all, pswapaxes, ppermute, pshuffle, psend/precv,
                        pbroadcast, ragged_all_to_all; MPI-style allgather,
                        alltoall, bcast, gather, scatter, reduce, scan,
                        send/recv/sendrecv; a _start form for each.
    0.1.0 (2026-11-22)  first release: meshes with named axes, the thread
                        backend, psum/pmean/pmax/pmin/pprod/pargmax/pargmin
                        and barrier with async forms, deadlines, check mode.

LICENSE
MIT License

Copyright (c) 2026 the spmdcoll developers

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
*/
