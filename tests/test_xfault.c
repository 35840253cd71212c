/* Faults of meshes on the libfabric backend, each ending in its documented
   status on every survivor within the deadline -- never a hang, never a
   crash. Every case is a job of two processes with two devices each (one
   mesh "i" of 4 devices), started as copies of this program (--child MODE):

     kill       process 1 dies (SIGKILL) in the middle of a run of psums of
                1 MiB (the split exchange): process 0's devices get SPMD_ERR_PEER_LOST naming
                process 1 (or SPMD_ERR_BROKEN for a call started after the
                mesh broke) within 10 s;
     mismatch   check mode; process 0's devices call psum, process 1's
                all_gather, over the same axis: all four get
                SPMD_ERR_MISMATCH, and the message names both collectives
                -- or SPMD_ERR_BROKEN naming them, for a device whose call
                began after a sibling found the mismatch and broke the
                mesh (over the shared-memory lane the headers take ~1 us,
                less than two threads' start apart), but at least one
                device of each process gets SPMD_ERR_MISMATCH (found
                there, or announced by the other process);
     count      without check mode (so the short headers), psum with 5
                elements on process 0 and 7 on process 1:
                SPMD_ERR_MISMATCH on all four devices naming both counts and
                the axis (or SPMD_ERR_BROKEN naming them, as above); by
                default the two devices of a process combine first and
                their process runs recursive doubling, whose step's message
                is the wrong length: each names its own count and that
                both sides must post the same length;
     absent     process 1 skips one psum (SPMD_TIMEOUT_MS=1500): process 0's
                devices get SPMD_ERR_TIMEOUT within 2.2 s naming the psum, the
                1500 ms and what did not come (by default: process 1's part
                of step 1 of the plan; the direct exchange: the devices not
                heard from, 2 and 3), or for the second device abandoned by
                the first's timeout, naming it;
     axesmix    check mode, XF_QUICK's 2 x 2 mesh: device 3 calls pmax over
                "y" (its group {2, 3} inside process 1), the others psum over
                "x,y": all four get SPMD_ERR_MISMATCH (or SPMD_ERR_BROKEN)
                naming both within 5 s, not at the 20 s deadline;
     agree      3 processes of one device: device 1 returns at once, the
                others time out in a psum (deadline 6 s, the bootstrap's
                5 s): spmd_run's status and spmd_mesh_error are the same
                text in all three (process 0's timeout);
     returned   device 1 returns at once without calling the psum the
                others call (deadline 20 s): its process knows, so device 0
                gets SPMD_ERR_DEADLOCK naming it at once, and process 1's
                devices the same (or SPMD_ERR_BROKEN naming it), within 5 s;
     refuse     one device refuses each of ten calls for its buffers (NULL,
                overlapping; device 0 then the last): it gets its own
                status, its peers SPMD_ERR_REFUSED naming it (or the right
                result, where they read nothing of it), every next psum is
                right and the mesh stays usable (4 devices; 2, no lane; and
                4 processes of one device over tcp with SPMD_ALGO=rd and
                rab: the psums run plans, where the last rank hears of
                device 0's refusal only from the ranks it combines with);
     announce   process 0's devices wait 0.3 s for a message nobody sends
                (a timeout, which breaks the mesh), process 1's 20 s for
                another: process 0 announces the break, so process 1's
                devices end within 5 s too, with process 0's status
                (SPMD_ERR_TIMEOUT) and a message naming process 0 and its
                recv's 300 ms timeout;
     runahead   not a fault: 300 bcasts from device 0, process 1 starting
                0.3 s late; the root does not wait for the others' headers,
                so it runs ahead -- by at most max_inflight operations --
                and every device still gets every value in order (then a
                psum checks the group is intact);
     oneway     XF_QUICK=1 (groups of one device per process): bcast and
                reduce are one way, as Open MPI's -- the root of a bcast and
                the members off the root of a reduce return without waiting
                for the others' headers, within max_inflight operations
                (spmd__xq_slot). Every dtype at odd sizes (1..31 elements),
                bcast from either root, reduce max and sum to either root, on
                random data each member recomputes for the others, checked
                against a plain reference (and the non-root's output of a
                reduce left alone); then 100 one-way calls in a row
                (bcasts from member 0, every 5th a reduce to member 1,
                every 13th an all_gather), 6 times max_inflight (16);
                then the bound: member 1 starts only once member 0 has
                returned from 9 bcasts (a marker file: one-way calls run
                ahead; acknowledgements come every 8th operation), and
                member 0's 17th call must not return before member 1 has
                started (a marker it writes first); all calls took the quick exchange
                (counted: fails where rooted calls go the general way);
                also without the lane (tcp), and on the general exchange
                (SPMD_QUICK_EXCHANGE=0: no call quick, the same bound);
     onewaycheck  check mode, the group {0, 2} alone: device 2 calls a bcast
                from 0 (XF_OWKIND=bcast) or a reduce to 1 (reduce) of 7
                elements where device 0 calls it with 5: both get
                SPMD_ERR_MISMATCH naming both counts (in check mode a one-way
                call waits for every header; SPMD_ERR_BROKEN naming both
                where the other's announcement came first); without check
                mode (onewaynocheck) device 0 returns SPMD_OK (one way: it
                does not wait) and device 2 gets SPMD_ERR_MISMATCH;
     count, absent and kill once more with SPMD_ALGO=bruck (the Bruck
                exchange, where each process hears from one process per
                step; unrooted small calls but reductions of 2 devices per
                process take it by default):
                the same statuses; absent names process 1's part of the
                step not received, and its devices; absent once more with
                SPMD_ALGO=eager (the direct exchange); kill runs 4 processes of one device,
                psums of 64 KiB, and the last process dies: process 0,
                which hears only from processes 1 and 2, still gets
                SPMD_ERR_PEER_LOST naming process 3;
     localmix   SPMD_ALGO=bruck: the two devices of each process call psum
                with 16 and 5 elements (the Bruck exchange lays out the
                process's block from the first device's call): at least one
                device of each process gets SPMD_ERR_MISMATCH naming the
                other call of its process, every device SPMD_ERR_MISMATCH
                (or SPMD_ERR_BROKEN, its call begun after its sibling broke
                the mesh) naming both calls, within 6 s; nothing is
                written out of bounds;
     count, absent and kill once more with XF_QUICK=1: a mesh (2, 2) of
                axes "x" and "y", the collectives over "x" (groups {0, 2}
                and {1, 3}: one device per process, so small psums take
                the quick exchange, spmd__xq_post; count calls one
                matching psum first, through spmd__quick), kill with
                psums of 16 elements; count and absent also with
                SPMD_SHM_LANE=0 (the headers through tcp): the same
                statuses, absent naming each device's partner (2 or 3,
                process 1) or, for the device whose timeout comes second,
                the mesh broken by the first; and the quick exchange was
                taken (its calls are counted);
     kinds      XF_QUICK=1: one small blocking call of each kind over
                "x" (allgather, alltoall, bcast from either member, gather,
                scatter, reduce, scan, psum_scatter, pshuffle) on random
                int32 data, each output (and the untouched outputs of
                rooted operations off the root) compared with a reference
                computed by loops over the members' inputs; the five
                unrooted calls (made first) took the quick exchange and no
                rooted call whose output needs fewer headers than all did
                (counted), none with SPMD_QUICK_EXCHANGE=0; also with
                SPMD_SHM_LANE=0;
     rooted     XF_QUICK=1 SPMD_TIMEOUT_MS=3000: member 0 of each group
                calls bcast and scatter from 0, reduce and gather to 1,
                each followed by a send to member 1, which receives before
                it calls the operation: every call ends SPMD_OK with the
                right values (such a call does not wait for headers its
                output does not need); then, once member 0 finds those
                exchanges spare (it polls for that), a psum, which
                takes the quick exchange on member 0 too (the general
                exchanges left listed by its rooted calls are spare again
                once their last headers came);
     late       3 processes of one device: processes 1 and 2 time out in a
                psum waiting for process 0, which calls it only once both
                have returned (it waits for their marker files): its call
                gets SPMD_ERR_BROKEN at once naming their timeout (as on
                threads), not SPMD_OK from the headers that came before;
                over tcp without the lane, shm and SPMD_PROGRESS_THREAD=1;
                latebar (SPMD_QUICK_EXCHANGE=0): process 0 calls a barrier
                instead (SPMD_ERR_BROKEN, not a mismatch with their psum);
                every process's spmd_run returns SPMD_ERR_TIMEOUT (what
                broke the mesh);
     window     the agreement at the end of spmd_run (issue 21, defect 1): 2
                processes of one device, 13 rounds of a new mesh each: a
                psum both leave together, then one that process 1 calls at
                once with a 40 ms deadline and process 0 only after a delay
                swept from 34 to 46 ms by 1 ms (the fault: a late process), so that
                in some rounds process 1 times out just as process 0 finds
                its header and completes. Every round, both processes'
                spmd_run return the same status and the same cause (one's
                spmd_mesh_error contains the other's); rounds where process
                0's call succeeded and its run did not are counted (the
                window, printed); over tcp and shm;
     shrink     spmd_mesh_shrink across processes: P processes of two
                devices, mesh dp P x tp 2 (process p hosts replica p);
                SPMD_FAULTS loses device 2P-1 at its call #1 (its process
                ends with status 4); optionally (XF_LEAVE=k) process k
                leaves right after spmd_run without joining the agreement
                (it dies before or during it). Every survivor: spmd_run
                SPMD_ERR_PEER_LOST, spmd_mesh_shrink along dp SPMD_OK with
                the same mesh (dp = P minus the processes gone, the
                survivors' devices in order), and a psum over "dp,tp" and
                one over "dp" of the devices' old ids on it give the sums
                computed here; 3 processes over tcp, 4 over shm with
                process 1 leaving;
     nocoord    process 1 alone, its coordinator never started, the mesh's
                desc.timeout_ms 1000 and no SPMD_BOOT_TIMEOUT_MS (the desc
                bounds the bootstrap): spmd_mesh_create fails with
                SPMD_ERR_TIMEOUT, its message saying it could not reach the
                coordinator within 1000 ms, after 0.9 to 6 s; once more with
                SPMD_BOOT_TIMEOUT_MS=700 and desc.timeout_ms 60000 (the
                variable wins: within 700 ms);
     wrongkey   three processes, process 1 with another job key (deadline
                2000 ms): process 1 gets SPMD_ERR_INVALID (rejected: job key
                mismatch), processes 0 and 2 SPMD_ERR_TIMEOUT naming process
                1 as missing and its handshake refused for the job key
                (process 2 told by the coordinator), each within 8 s.

   Each child checks its own devices' statuses and messages and exits 0 when
   they are as documented; the parent checks the exit codes and times. */
#define SPMDCOLL_IMPLEMENTATION
#ifndef SPMDCOLL_LIBFABRIC
#define SPMDCOLL_LIBFABRIC
#endif
#include "../spmdcoll.h"
#include "harness.h"
#include "proclib.h"
#include "testlib.h"
#include <sys/stat.h>
#include <sched.h>

typedef struct child {
    const char *mode;
    const char *ax;           /* the axis of the collectives: "i", or "x" with XF_QUICK=1 */
    int proc, nprocs, bruck, quick, general; /* general: SPMD_QUICK_EXCHANGE=0 */
    int may[4];               /* kinds: calls that may take the quick exchange */
    spmd_status st[4];
    char msg[4][512];
    double took[4];
} child;

/* mode "kinds" (XF_QUICK=1): one small blocking call of each kind over
   "x" (groups {y, 2 + y}: one device per process), on random int32 inputs
   that every device can recompute for any member, each result compared
   with a reference computed here by loops over the members' inputs. */
#define KINDS_CALLS 10
static int32_t kv(int dev, int call, int j) {
    uint32_t h = (uint32_t)dev * 2654435761u ^ (uint32_t)call * 40503u ^ (uint32_t)j * 2246822519u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return (int32_t)(h % 2001u) - 1000;
}

/* One call of kind `call` (0 allgather, 1 alltoall, 2-3 bcast, 4 gather,
   5 scatter, 6 reduce, 7 scan, 8 psum_scatter, 9 pshuffle) from `root`,
   on inputs kv(device, salt, j), its output compared with the reference;
   SPMD_ERR_STATE (c->msg says) for a wrong value. */
static spmd_status one_call(spmd_dev *d, child *c, int call, int root, int salt) {
    int id = spmd_device_id(d), me = id / 2, k, j, n = 0, G = 2;
    int32_t in[16], out[16], want[16];
    int perm[2] = {1, 0};
    spmd_array xa, oa;
    spmd_status s;
#define MEMBER(k) ((id % 2) + 2 * (k))
    for (j = 0; j < 3 * G; j++) in[j] = kv(id, salt, j);
    for (j = 0; j < 16; j++) out[j] = want[j] = -7777;
    switch (call) {
    case 0: /* allgather, 3 each */
        s = spmd_allgather(d, in, out, 3, SPMD_I32, c->ax, NULL);
        for (k = 0; k < G; k++) for (j = 0; j < 3; j++) want[n++] = kv(MEMBER(k), salt, j);
        break;
    case 1: /* alltoall, blocks of 3 */
        s = spmd_alltoall(d, in, out, 3, SPMD_I32, c->ax, NULL);
        for (k = 0; k < G; k++) for (j = 0; j < 3; j++) want[n++] = kv(MEMBER(k), salt, me * 3 + j);
        break;
    case 2: case 3: /* bcast of 5 */
        s = spmd_bcast(d, in, out, 5, SPMD_I32, root, c->ax, NULL);
        for (j = 0; j < 5; j++) want[n++] = kv(MEMBER(root), salt, j);
        break;
    case 4: /* gather, 3 each */
        s = spmd_gather(d, in, out, 3, SPMD_I32, root, c->ax, NULL);
        if (me == root) for (k = 0; k < G; k++) for (j = 0; j < 3; j++) want[n++] = kv(MEMBER(k), salt, j);
        break;
    case 5: /* scatter, 3 each */
        s = spmd_scatter(d, in, out, 3, SPMD_I32, root, c->ax, NULL);
        for (j = 0; j < 3; j++) want[n++] = kv(MEMBER(root), salt, me * 3 + j);
        break;
    case 6: /* reduce (sum) of 4 */
        s = spmd_reduce(d, in, out, 4, SPMD_I32, SPMD_OP_SUM, root, c->ax, NULL);
        if (me == root)
            for (j = 0; j < 4; j++, n++) for (want[n] = 0, k = 0; k < G; k++) want[n] += kv(MEMBER(k), salt, j);
        break;
    case 7: /* inclusive scan (max) */
        s = spmd_scan(d, in, out, 4, SPMD_I32, SPMD_OP_MAX, c->ax, NULL);
        for (j = 0; j < 4; j++, n++)
            for (want[n] = kv(MEMBER(0), salt, j), k = 1; k <= me; k++)
                if (kv(MEMBER(k), salt, j) > want[n]) want[n] = kv(MEMBER(k), salt, j);
        break;
    case 8: /* psum_scatter, tiled: 2 of 4 */
        xa = spmd_array_1d(in, SPMD_I32, 4);
        oa = spmd_array_1d(out, SPMD_I32, 2);
        s = spmd_psum_scatter(d, &xa, &oa, c->ax, 0, 1, NULL);
        for (j = 0; j < 2; j++, n++) for (want[n] = 0, k = 0; k < G; k++) want[n] += kv(MEMBER(k), salt, me * 2 + j);
        break;
    default: /* pshuffle: the other member's x */
        xa = spmd_array_1d(in, SPMD_I32, 3);
        oa = spmd_array_1d(out, SPMD_I32, 3);
        s = spmd_pshuffle(d, &xa, &oa, c->ax, perm, NULL);
        for (j = 0; j < 3; j++) want[n++] = kv(MEMBER(perm[me]), salt, j);
        break;
    }
#undef MEMBER
    for (j = 0; j < 16 && s == SPMD_OK; j++)
        if (out[j] != want[j]) {
            snprintf(c->msg[id], sizeof c->msg[id], "call %d (root %d): element %d is %d, want %d", call, root, j,
                     (int)out[j], (int)want[j]);
            s = SPMD_ERR_STATE; /* a wrong value */
        }
    return s;
}

static spmd_status kinds(spmd_dev *d, child *c) {
    /* the kinds that need every header first, then the rooted ones (one
       way where their output needs fewer headers): each takes the quick
       exchange */
    static const int order[KINDS_CALLS] = {0, 1, 7, 8, 9, 2, 3, 4, 5, 6};
    int id = spmd_device_id(d), me = id / 2, t;
    spmd_status s = SPMD_OK;
    c->may[id] = 0;
    for (t = 0; t < KINDS_CALLS && s == SPMD_OK; t++) {
        int call = order[t], root = call % 2;
        c->may[id]++; /* each takes the quick exchange, one way where its output needs fewer headers */
        (void)me;
        s = one_call(d, c, call, root, call);
    }
    return s;
}

/* Member 0 after its rooted calls: until the general exchanges they left
   listed are spare (member 1's last headers came and were reaped), as the
   quick exchange's check at a call's start finds them -- a condition, not a
   sleep (at most 10 s; c->msg says if it never came). */
static void wait_spare(spmd_dev *d, child *c) {
    spmd__gref *gr = d->last_gr;
    spmd__group *g = gr && strcmp(gr->text, c->ax) == 0 ? gr->g : NULL;
    double end = p_now() + 10;
    int listed = 1;
    while (g && listed && p_now() < end) {
        spmd__fab_progress(d->mesh->lf.fab);
        pthread_mutex_lock(&d->mesh->xlock);
        spmd__x_reap(d->mesh->lf.fab, g);
        listed = g->lf.xlive != NULL;
        pthread_mutex_unlock(&d->mesh->xlock);
        if (listed) sched_yield();
    }
    if (listed) snprintf(c->msg[spmd_device_id(d)], sizeof c->msg[0], "the rooted calls' exchanges never became spare%s",
                         g ? "" : " (no group over the axis)");
}

/* mode "rooted" (XF_QUICK=1): member 0 calls a rooted operation that
   needs no header of member 1 (bcast and scatter from 0, reduce and gather
   to 1) and then sends to member 1, which receives that first and calls
   the operation after: as on threads, the call must not wait for member
   1's header (a program the general exchange runs, so the quick one must
   not be taken there). Results checked as in "kinds". */
static spmd_status rooted(spmd_dev *d, child *c) {
    static const int calls[4] = {2, 5, 6, 4}, roots[4] = {0, 0, 1, 1}; /* bcast, scatter, reduce, gather */
    int id = spmd_device_id(d), me = id / 2, i, j;
    int32_t in[4], out[4], token = 0;
    spmd_status s = SPMD_OK;
    for (i = 0; i < 4 && s == SPMD_OK; i++) {
        if (me == 1) s = spmd_recv(d, &token, 1, SPMD_I32, 0, i, c->ax, NULL, NULL);
        if (s == SPMD_OK) s = one_call(d, c, calls[i], roots[i], 100 + i);
        if (s == SPMD_OK && me == 0) s = spmd_send(d, &i, 1, SPMD_I32, 1, i, c->ax, NULL);
    }
    if (s == SPMD_OK) { /* once member 1's last headers are here, a psum takes the quick exchange again */
        if (me == 0) wait_spare(d, c);
        for (j = 0; j < 4; j++) in[j] = kv(id, 200, j);
        s = spmd_psum(d, in, out, 4, SPMD_I32, c->ax, NULL);
        for (j = 0; j < 4 && s == SPMD_OK; j++)
            if (out[j] != kv(id % 2, 200, j) + kv(id % 2 + 2, 200, j)) {
                snprintf(c->msg[id], sizeof c->msg[id], "psum after the rooted calls: element %d is %d", j,
                         (int)out[j]);
                s = SPMD_ERR_STATE;
            }
    }
    return s;
}

/* mode "oneway": see the top. Values of dtype t that every reference
   below handles exactly (small, no NaN): element j of device dev's input
   of call `call`, as a double. */
static double ow_val(spmd_dtype t, int dev, int call, int j) {
    uint64_t h = (uint64_t)(dev + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(call + 7) * 0xbf58476d1ce4e5b9ull ^
                 (uint64_t)(j + 3) * 0x94d049bb133111ebull;
    int64_t v;
    h ^= h >> 31;
    h *= 0xd6e9f3b5a2c14e4bull;
    h ^= h >> 29;
    v = (int64_t)(h % 101) - 50; /* -50..50 */
    switch (t) {
    case SPMD_BOOL: return (double)(h & 1);
    case SPMD_U8: case SPMD_U16: case SPMD_U32: case SPMD_U64: return (double)(v + 50);
    case SPMD_F32: case SPMD_F64: case SPMD_C64: case SPMD_C128: return (double)v / 8;
    case SPMD_F8E4M3FN: case SPMD_F8E5M2: return (double)(v % 5); /* -4..4: sums exact (e5m2: to 8) */
    default: return (double)v; /* signed integers, f16 and bf16 (exact there) */
    }
}
static void ow_put(spmd_dtype t, unsigned char *p, double v) {
    switch (t) {
    case SPMD_BOOL: case SPMD_U8: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case SPMD_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case SPMD_I16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case SPMD_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case SPMD_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case SPMD_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case SPMD_I64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case SPMD_U64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case SPMD_F16: { uint16_t x = ref_f32_to_f16((float)v); memcpy(p, &x, 2); break; }
    case SPMD_BF16: { uint16_t x = ref_f32_to_bf16((float)v); memcpy(p, &x, 2); break; }
    case SPMD_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case SPMD_C64: { float x[2] = {(float)v, (float)(2 * v)}; memcpy(p, x, 8); break; } /* (v, 2v): sums stay so */
    case SPMD_C128: { double x[2] = {v, 2 * v}; memcpy(p, x, 16); break; }
    case SPMD_F8E4M3FN: case SPMD_F8E5M2: p[0] = tl_f32_to_fp8(t, (float)v); break;
    default: { double x = v; memcpy(p, &x, 8); break; }
    }
}
static void ow_input(spmd_dtype t, unsigned char *p, int n, int dev, int call) {
    int j;
    for (j = 0; j < n; j++) ow_put(t, p + (size_t)j * dsize(t), ow_val(t, dev, call, j));
}

/* One call of the mode: bcast (what 0), reduce max (1), reduce sum (2) or
   all_gather (3) of n elements of t from/to member `root` of this device's
   group {y, 2 + y}, checked against the reference; SPMD_ERR_STATE for a
   wrong value (c->msg says). */
static spmd_status ow_call(spmd_dev *d, child *c, int what, spmd_dtype t, int n, int root, int call) {
    int id = spmd_device_id(d), me = id / 2, k, j, member[2] = {id % 2, id % 2 + 2};
    size_t es = dsize(t), outn = what == 3 ? 2 * (size_t)n : (size_t)n;
    unsigned char in[2 * 32 * 8], out[2 * 32 * 8], want[2 * 32 * 8];
    spmd_status s;
    ow_input(t, in, n, id, call);
    memset(out, 0xa5, sizeof out);
    memset(want, 0xa5, sizeof want);
    if (what == 0) {
        s = spmd_bcast(d, in, out, (size_t)n, t, root, c->ax, NULL);
        ow_input(t, want, n, member[root], call);
    } else if (what == 3) {
        s = spmd_allgather(d, in, out, (size_t)n, t, c->ax, NULL);
        for (k = 0; k < 2; k++) ow_input(t, want + (size_t)k * (size_t)n * es, n, member[k], call);
    } else {
        s = spmd_reduce(d, in, out, (size_t)n, t, what == 1 ? SPMD_OP_MAX : SPMD_OP_SUM, root, c->ax, NULL);
        for (j = 0; j < n && me == root; j++) {
            double a = ow_val(t, member[0], call, j), b = ow_val(t, member[1], call, j);
            ow_put(t, want + (size_t)j * es, what == 1 ? (a > b ? a : b) : a + b);
        }
    }
    if (s == SPMD_OK && memcmp(out, want, sizeof out) != 0) {
        for (j = 0; j < (int)sizeof out && out[j] == want[j]; j++) {}
        snprintf(c->msg[id], sizeof c->msg[id], "call %d (%s of %d %s, root %d): byte %d of the output is 0x%02x, "
                 "want 0x%02x%s", call, what == 0 ? "bcast" : what == 3 ? "all_gather" : what == 1 ? "reduce max"
                 : "reduce sum", n, dnm(t), root, j, out[j], want[j], (size_t)j >= outn * es ? " (past the result)" : "");
        s = SPMD_ERR_STATE;
    }
    return s;
}

static void ow_mark(const char *name, int y) {
    char path[400];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s.%d", getenv("XF_DIR"), name, y);
    if ((f = fopen(path, "w")) != NULL) fclose(f);
}
static int ow_marked(const char *name, int y) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s.%d", getenv("XF_DIR"), name, y);
    return access(path, F_OK) == 0;
}

static spmd_status oneway(spmd_dev *d, child *c) {
    static const int sizes[] = {1, 3, 7, 13, 31};
    int id = spmd_device_id(d), me = id / 2, y = id % 2, t, i, call = 0, what, D = 16;
    spmd_status s = SPMD_OK;
    c->may[id] = 0;
    for (t = 0; t < NDT && s == SPMD_OK; t++)
        for (i = 0; i < 5 && s == SPMD_OK; i++)
            for (what = 0; what < 3 && s == SPMD_OK; what++) {
                if (what == 2 && DTYPES[t] == SPMD_BOOL) continue; /* (bool sums: see the README) */
                if (what == 1 && iscplx(DTYPES[t])) continue;     /* (no max of complex numbers) */
                s = ow_call(d, c, what, DTYPES[t], sizes[i], (t + i + what) % 2, call++);
                c->may[id]++;
            }
    /* 100 one-way calls on member 0 in a row, mixed */
    for (i = 0; i < 100 && s == SPMD_OK; i++, c->may[id]++)
        s = ow_call(d, c, i % 13 == 12 ? 3 : i % 5 == 4 ? 2 : 0, SPMD_I32, 1 + i % 7, i % 5 == 4 ? 1 : 0, call++);
    /* the bound: member 0 runs at least D / 2 + 1 calls ahead (the acknowledgement due is at most D / 2 - 1
       operations after member 1's last call: spmd__x_ack_due), never D + 1 */
    if (s == SPMD_OK && me == 1) {
        double end = p_now() + 20;
        while (!ow_marked("ahead", y) && p_now() < end) usleep(1000); /* a condition, polled */
        if (!ow_marked("ahead", y)) {
            snprintf(c->msg[id], sizeof c->msg[id], "member 0 did not return from %d one-way calls in 20 s",
                     D / 2 + 1);
            s = SPMD_ERR_STATE;
        }
        ow_mark("started", y);
    }
    for (i = 0; i <= D && s == SPMD_OK; i++, c->may[id]++) {
        s = ow_call(d, c, 0, SPMD_F32, 2, 0, call++);
        if (me == 0 && i == D / 2) ow_mark("ahead", y); /* D / 2 + 1 calls: always room for them */
        if (me == 0 && i == D && s == SPMD_OK && !ow_marked("started", y)) {
            snprintf(c->msg[id], sizeof c->msg[id], "call %d returned %d calls ahead of member 1 (max_inflight %d)",
                     call - 1, D + 1, D);
            s = SPMD_ERR_STATE;
        }
    }
    return s;
}

static void dev_main(spmd_dev *d, void *arg) {
    child *c = (child *)arg;
    int id = spmd_device_id(d), i;
    size_t n = c->bruck ? (size_t)1 << 14 : (size_t)1 << 18;
    float *a = (float *)calloc(n, sizeof(float)), *b = (float *)calloc(n * 4, sizeof(float));
    spmd_status s = SPMD_OK;
    double t0 = p_now();
    if (strcmp(c->mode, "kill") == 0) {
        for (i = 0; i < 400 && s == SPMD_OK; i++) {
            if (c->proc == c->nprocs - 1 && i == 20) {
                printf("dying\n");
                fflush(stdout);
                raise(SIGKILL);
            }
            t0 = p_now();
            s = spmd_psum(d, a, b, c->quick ? 16 : n, SPMD_F32, c->ax, NULL);
        }
    } else if (strcmp(c->mode, "mismatch") == 0) {
        if (c->proc == 0) {
            s = spmd_psum(d, a, b, 5, SPMD_F32, "i", NULL);
        } else {
            spmd_array x = spmd_array_1d(a, SPMD_F32, 5), o = spmd_array_1d(b, SPMD_F32, 20);
            s = spmd_all_gather(d, &x, &o, "i", 0, 1, NULL);
        }
    } else if (strcmp(c->mode, "localmix") == 0) {
        s = spmd_psum(d, a, b, id % 2 ? 5 : 16, SPMD_F32, "i", NULL);
    } else if (strcmp(c->mode, "count") == 0) {
        /* (the first over the axes goes through spmd__coll_start, the next through spmd__quick) */
        if (c->quick) s = spmd_psum(d, a, b, 16, SPMD_F32, c->ax, NULL);
        if (s == SPMD_OK) s = spmd_psum(d, a, b, c->proc == 0 ? 5 : 7, SPMD_F32, c->ax, NULL);
    } else if (strcmp(c->mode, "runahead") == 0) {
        int32_t v[8], w[8], j;
        if (c->proc == 1) usleep(300000);
        for (i = 0; i < 300 && s == SPMD_OK; i++) {
            for (j = 0; j < 8; j++) v[j] = id == 0 ? i * 8 + j : -1;
            s = spmd_bcast(d, v, w, 8, SPMD_I32, 0, "i", NULL);
            for (j = 0; j < 8 && s == SPMD_OK; j++)
                if (w[j] != i * 8 + j) {
                    s = SPMD_ERR_STATE; /* a wrong value */
                    snprintf(c->msg[id], sizeof c->msg[id], "bcast %d: element %d is %d", i, (int)j, (int)w[j]);
                }
        }
        if (s == SPMD_OK) s = spmd_psum(d, a, b, 16, SPMD_F32, "i", NULL);
        c->st[id] = s;
        c->took[id] = p_now() - t0;
        if (s != SPMD_ERR_STATE) snprintf(c->msg[id], sizeof c->msg[id], "%s", spmd_last_error(d));
        free(a);
        free(b);
        return;
    } else if (strcmp(c->mode, "announce") == 0 || strcmp(c->mode, "report") == 0) {
        int32_t y[4];
        spmd_opts o;
        memset(&o, 0, sizeof o);
        o.timeout_ms = c->proc == 0 ? 300 : 20000;
        /* nobody sends; report: the call site goes into the records process 0's report shows. A
           barrier first, so that process 1's devices are in their recv (and recorded there, once
           they waited a moment) well before process 0's 300 ms run out, however late it started */
        s = spmd_barrier(d, "i", NULL);
        if (s == SPMD_OK) s = SPMD_AT(d, spmd_recv(d, y, 4, SPMD_I32, c->proc == 0 ? 2 : 0, 7, "i", &o, NULL));
    } else if (strcmp(c->mode, "kinds") == 0) {
        s = kinds(d, c);
    } else if (strcmp(c->mode, "oneway") == 0) {
        s = oneway(d, c);
    } else if (strcmp(c->mode, "onewaycheck") == 0 || strcmp(c->mode, "onewaynocheck") == 0) {
        int32_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[8];
        size_t n = c->proc == 0 ? 5 : 7;
        if (id % 2 == 0 && strcmp(getenv("XF_OWKIND"), "bcast") == 0) s = spmd_bcast(d, v, w, n, SPMD_I32, 0, c->ax, NULL);
        else if (id % 2 == 0) s = spmd_reduce(d, v, w, n, SPMD_I32, SPMD_OP_SUM, 1, c->ax, NULL);
    } else if (strcmp(c->mode, "rooted") == 0) {
        s = rooted(d, c);
    } else if (strcmp(c->mode, "axesmix") == 0) { /* device 3's group {2, 3} lies inside process 1 */
        if (id == 3) s = spmd_pmax(d, a, b, 4, SPMD_F32, "y", NULL);
        else s = spmd_psum(d, a, b, 4, SPMD_F32, "x,y", NULL);
    } else if (strcmp(c->mode, "returned") == 0) {
        if (id == 1) { /* returns without calling: its process knows */
            free(a);
            free(b);
            return;
        }
        s = spmd_psum(d, a, b, 16, SPMD_F32, c->ax, NULL);
    } else if (strcmp(c->mode, "absent") == 0) {
        s = spmd_psum(d, a, b, 16, SPMD_F32, c->ax, NULL);
        if (s == SPMD_OK && c->proc == 0) {
            t0 = p_now();
            s = spmd_psum(d, a, b, 16, SPMD_F32, c->ax, NULL); /* process 1 never calls this one */
        }
    }
    c->st[id] = s;
    c->took[id] = p_now() - t0;
    if (s != SPMD_ERR_STATE) snprintf(c->msg[id], sizeof c->msg[id], "%s", spmd_last_error(d));
    free(a);
    free(b);
}

/* modes "late" and "latebar": 3 processes of one device, mesh "i" of 3.
   Processes 1 and 2 call a psum of 4 f64 at once and time out
   (opts.timeout_ms 500) waiting for process 0, which calls the psum (or a
   barrier) only once both have returned: each writes XF_DIR/done.<id>
   after its call, process 0 waits for both files (a condition, not a
   sleep). Process 0's call must not succeed from the headers that came long
   before: SPMD_ERR_BROKEN naming the timeout of process 1 or 2, as on
   threads. Each process prints its call's status and message and exits 0
   when they are as documented. */
typedef struct late {
    const char *mode;
    int proc;
    spmd_status st;
    char msg[600];
    double took;
} late;

static void late_dev(spmd_dev *d, void *arg) {
    late *l = (late *)arg;
    double a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
    const char *dir = getenv("XF_DIR");
    char path[400];
    spmd_opts o;
    int i;
    if (l->proc == 0) { /* until processes 1 and 2 have failed (at most 30 s) */
        double end = p_now() + 30;
        for (i = 1; i <= 2 && p_now() < end;) {
            snprintf(path, sizeof path, "%s/done.%d", dir, i);
            if (access(path, F_OK) == 0) i++;
            else usleep(5000);
        }
        /* with the progress thread, the transport reads the bootstrap every ~2 ms and a call starting
           within 2 ms of its last read does not read it again (spmd__fab_news): wait until the thread
           has taken the announcement in, so that the call is what must notice it */
        while (getenv("SPMD_PROGRESS_THREAD") && strcmp(getenv("SPMD_PROGRESS_THREAD"), "1") == 0 &&
               !__atomic_load_n(&spmd_device_mesh(d)->lf.fab->boot->nbroken, __ATOMIC_ACQUIRE) && p_now() < end)
            usleep(1000);
    }
    memset(&o, 0, sizeof o);
    o.timeout_ms = 500;
    l->took = p_now();
    if (l->proc == 0 && strcmp(l->mode, "latebar") == 0) l->st = spmd_barrier(d, "i", &o);
    else l->st = spmd_psum(d, a, b, 4, SPMD_F64, "i", &o);
    l->took = p_now() - l->took;
    snprintf(l->msg, sizeof l->msg, "%s", spmd_last_error(d));
    if (l->proc != 0) {
        FILE *f;
        snprintf(path, sizeof path, "%s/done.%d", dir, l->proc);
        if ((f = fopen(path, "w")) != NULL) fclose(f);
    }
}

static int late_main(const char *mode) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s;
    late l;
    int ok;
    memset(&desc, 0, sizeof desc);
    memset(&l, 0, sizeof l);
    desc.ndim = 1;
    desc.shape[0] = 3;
    desc.axis_names[0] = "i";
    desc.log_level = SPMD_LOG_OFF;
    if ((s = spmd_mesh_create(&desc, &m)) != SPMD_OK) {
        printf("mesh_create: %s\n", spmd_status_name(s));
        return 1;
    }
    l.mode = mode;
    l.proc = spmd_mesh_process_id(m);
    s = spmd_run(m, late_dev, &l);
    printf("process %d: %s after %.2f s: %s; spmd_run: %s\n", l.proc, spmd_status_name(l.st), l.took, l.msg,
           spmd_status_name(s));
    if (l.proc == 0) /* the break is known before the call: refused at once, naming the peers' timeout */
        ok = l.st == SPMD_ERR_BROKEN && strstr(l.msg, "mesh is broken: process ") && strstr(l.msg, "psum(f64 x 4") &&
             strstr(l.msg, "timed out after 500 ms: devices not heard from: 0 (process 0)") && l.took < 2.0;
    else
        ok = l.st == SPMD_ERR_TIMEOUT && strstr(l.msg, "psum(f64 x 4") && strstr(l.msg, "over 'i'") &&
             strstr(l.msg, "timed out after 500 ms: devices not heard from: 0 (process 0)") && l.took < 4.0;
    /* every process's spmd_run gives the cause: the status that broke the mesh */
    ok = ok && s == SPMD_ERR_TIMEOUT && spmd_mesh_status(m) == SPMD_ERR_TIMEOUT;
    spmd_mesh_destroy(m);
    fflush(stdout);
    return !ok;
}

/* mode "window": see the top comment. Process 0's delay is the fault (how
   late it is), not an ordering: whatever the timing, both runs must agree. */
#define WINDOW_ROUNDS 13
typedef struct window {
    int proc, round;
    spmd_status call;
} window;

static void window_dev(spmd_dev *d, void *arg) {
    window *w = (window *)arg;
    double a[4] = {1, 2, 3, 4}, b[4];
    spmd_opts o;
    memset(&o, 0, sizeof o);
    w->call = spmd_psum(d, a, b, 4, SPMD_F64, "i", NULL); /* both leave it at about the same time */
    if (w->call != SPMD_OK) return;
    if (w->proc == 0) {
        double until = p_now() + (34.0 + 1.0 * w->round) * 1e-3;
        while (p_now() < until) {}
    }
    o.timeout_ms = 40;
    w->call = spmd_psum(d, a, b, 4, SPMD_F64, "i", &o);
}

static int window_main(void) {
    spmd_mesh_desc desc;
    window w;
    int r;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = 2;
    desc.axis_names[0] = "i";
    desc.log_level = SPMD_LOG_OFF;
    for (r = 0; r < WINDOW_ROUNDS; r++) {
        spmd_mesh *m;
        spmd_status s = spmd_mesh_create(&desc, &m);
        if (s != SPMD_OK) {
            printf("round %d: mesh_create %s\n", r, spmd_status_name(s));
            return 1;
        }
        memset(&w, 0, sizeof w);
        w.proc = spmd_mesh_process_id(m);
        w.round = r;
        s = spmd_run(m, window_dev, &w);
        printf("round %d: call %s run %s error %s\n", r, spmd_status_name(w.call), spmd_status_name(s),
               spmd_mesh_error(m));
        spmd_mesh_destroy(m);
    }
    fflush(stdout);
    return 0;
}

/* mode "refuse": a call one device refuses for its buffers (NULL, or
   overlapping) across processes runs on stand-ins, so that it keeps its
   place: the refuser gets its own status, a peer that reads its part
   SPMD_ERR_REFUSED naming it (or, reading nothing of it, the right result),
   and every next call is right; the mesh stays usable. Every kind the
   stand-in takes, small (quick, Bruck, direct) and large (split, data apart
   from the header), the refuser device 0 (a root) or the last. XF_DEVS
   devices on two processes; each process checks its own. */
enum { RX_PSUM, RX_PSUM_BIG, RX_PSUM_START, RX_ALLGATHER, RX_ALLTOALL, RX_BCAST, RX_REDUCE, RX_SCAN, RX_PPERMUTE,
       RX_OVERLAP, RX_N };
static const char *const rx_names[RX_N] = {"psum", "psum", "psum", "allgather", "alltoall", "bcast", "reduce", "scan",
                                           "ppermute", "allgather"};
#define RX_MAXD 4
#define RX_BIG 300000
typedef struct refuse_run {
    int G, bad;
    spmd_status st[RX_N][2][RX_MAXD], next[RX_N][2][RX_MAXD];
    int ok[RX_N][2][RX_MAXD];
} refuse_run;

/* Call A of kind k on device me (x: G * n inputs, y: G * n outputs). */
static spmd_status rx_call(spmd_dev *d, int k, int bad, float *x, float *y, int n, int G) {
    float *ry = bad ? NULL : y, *rx = bad && k == RX_REDUCE ? NULL : x;
    int pairs[2 * RX_MAXD], i;
    spmd_req *r = NULL;
    spmd_status s;
    for (i = 0; i < G; i++) pairs[2 * i] = i, pairs[2 * i + 1] = (i + 1) % G;
    switch (k) {
    case RX_PSUM: case RX_PSUM_BIG: return spmd_psum(d, x, ry, (size_t)n, SPMD_F32, "i", NULL);
    case RX_PSUM_START:
        s = spmd_psum_start(d, x, ry, (size_t)n, SPMD_F32, "i", NULL, &r);
        return s == SPMD_OK ? spmd_wait(r) : s;
    case RX_ALLGATHER: return spmd_allgather(d, x, ry, (size_t)n, SPMD_F32, "i", NULL);
    case RX_ALLTOALL: return spmd_alltoall(d, x, ry, (size_t)n, SPMD_F32, "i", NULL);
    case RX_BCAST: return spmd_bcast(d, x, ry, (size_t)n, SPMD_F32, 0, "i", NULL);
    case RX_REDUCE: return spmd_reduce(d, rx, y, (size_t)n, SPMD_F32, SPMD_OP_SUM, 0, "i", NULL);
    case RX_SCAN: return spmd_scan(d, x, ry, (size_t)n, SPMD_F32, SPMD_OP_SUM, "i", NULL);
    case RX_PPERMUTE: {
        spmd_array ax = spmd_array_1d(x, SPMD_F32, n), ay = spmd_array_1d(ry, SPMD_F32, n);
        return spmd_ppermute(d, &ax, &ay, "i", pairs, G, NULL);
    }
    default: return spmd_allgather(d, x, bad ? x + 1 : y, (size_t)n, SPMD_F32, "i", NULL); /* overlap */
    }
}

/* A peer's result that read nothing of the refuser: the root's input
   (bcast), the source's (ppermute), nothing written (reduce off the root). */
static int rx_right(int k, int me, int G, const float *y, int n) {
    int e, src = k == RX_BCAST ? 0 : (me + G - 1) % G;
    if (k == RX_REDUCE) {
        if (me == 0) return 0;
        for (e = 0; e < n; e++)
            if (y[e] != -1.0f) return 0;
        return 1;
    }
    if (k != RX_BCAST && k != RX_PPERMUTE) return 0;
    for (e = 0; e < n; e++)
        if (y[e] != (float)(1000 + 64 * src + e % 64)) return 0;
    return 1;
}

static void refuse_dev(spmd_dev *d, void *arg) {
    refuse_run *w = (refuse_run *)arg;
    int me = spmd_device_id(d), G = w->G, k, b;
    float *x = (float *)malloc((size_t)G * RX_BIG * sizeof(float)), *y = (float *)malloc((size_t)G * RX_BIG * sizeof(float));
    for (b = 0; b < 2 && x && y; b++)
        for (k = 0; k < RX_N; k++) {
            int bad = (b ? G - 1 : 0), n = k == RX_PSUM_BIG ? RX_BIG : 5, i, named;
            float one = (float)(me + 1), sum = 0;
            char want[40];
            for (i = 0; i < G * n; i++) {
                x[i] = (float)(1000 + 64 * me + i % 64);
                y[i] = -1.0f;
            }
            w->st[k][b][me] = rx_call(d, k, me == bad, x, y, n, G);
            snprintf(want, sizeof want, "device %d (process", bad);
            named = strstr(spmd_last_error(d), want) && strstr(spmd_last_error(d), "refused it with SPMD_ERR_");
            if (me == bad)
                w->ok[k][b][me] = w->st[k][b][me] == (k == RX_OVERLAP ? SPMD_ERR_OVERLAP : SPMD_ERR_NULL);
            else
                w->ok[k][b][me] = w->st[k][b][me] == SPMD_ERR_REFUSED ? named
                                  : w->st[k][b][me] == SPMD_OK && rx_right(k, me, G, y, n);
            w->next[k][b][me] = spmd_psum(d, &one, &sum, 1, SPMD_F32, "i", NULL);
            if (w->next[k][b][me] == SPMD_OK && sum != (float)(G * (G + 1) / 2)) w->next[k][b][me] = SPMD_ERR_MISMATCH;
        }
    free(x);
    free(y);
}

static int refuse_main(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m;
    refuse_run *w = (refuse_run *)calloc(1, sizeof *w);
    int bad = 0, k, b, i;
    spmd_status s;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = atoi(getenv("XF_DEVS") ? getenv("XF_DEVS") : "4");
    desc.axis_names[0] = "i";
    desc.log_level = SPMD_LOG_OFF;
    desc.timeout_ms = 20000;
    if (!w || desc.shape[0] > RX_MAXD || (s = spmd_mesh_create(&desc, &m)) != SPMD_OK) {
        printf("refuse: no mesh\n");
        return 1;
    }
    w->G = desc.shape[0];
    s = spmd_run(m, refuse_dev, w);
    for (k = 0; k < RX_N; k++)
        for (b = 0; b < 2; b++)
            for (i = 0; i < w->G; i++) {
                if (!spmd_device_is_local(m, i)) continue;
                if (!w->ok[k][b][i] || w->next[k][b][i] != SPMD_OK) {
                    printf("refuse: %s (case %d) refused by device %d: device %d got %s, next psum %s\n", rx_names[k],
                           k, b ? w->G - 1 : 0, i, spmd_status_name(w->st[k][b][i]),
                           spmd_status_name(w->next[k][b][i]));
                    bad++;
                }
            }
    printf("refuse: run %s, mesh %s, %d wrong\n", spmd_status_name(s), spmd_status_name(spmd_mesh_status(m)), bad);
    bad += spmd_mesh_status(m) != SPMD_OK;
    spmd_mesh_destroy(m);
    free(w);
    fflush(stdout);
    return bad != 0;
}

/* mode "agree": 3 processes of one device; device 1 returns at once, the
   others psum (deadline 6 s, the bootstrap's 5 s) and time out. Each prints
   spmd_run's status and spmd_mesh_error; the parent compares the three. */
static void agree_dev(spmd_dev *d, void *arg) {
    float a = 1, r;
    (void)arg;
    if (spmd_device_id(d) != 1) (void)spmd_psum(d, &a, &r, 1, SPMD_F32, "i", NULL);
}
static int agree_main(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m;
    spmd_status s;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 1;
    desc.shape[0] = 3;
    desc.axis_names[0] = "i";
    desc.timeout_ms = 6000;
    desc.log_level = SPMD_LOG_OFF;
    if (spmd_mesh_create(&desc, &m) != SPMD_OK) {
        printf("agree: no mesh\n");
        return 1;
    }
    s = spmd_run(m, agree_dev, NULL);
    printf("agree: %s: %s\n", spmd_status_name(s), spmd_mesh_error(m));
    spmd_mesh_destroy(m);
    fflush(stdout);
    return 0;
}
static void run_agree(void) {
    const char *t, *at;
    char line[3][800];
    int i, n = 0, same = 1, rc;
#if defined(__SANITIZE_THREAD__) /* (it needs the mesh made within the bootstrap's deadline) */
    return;
#endif
    rc = p_spmdrun("xfault-agree", 3, "--provider tcp", "agree", "SPMD_BOOT_TIMEOUT_MS=5000");
    t = p_read("xfault-agree", "log");
    for (at = t; n < 3 && (at = strstr(at, "] agree: ")) != NULL; at += 9, n++) {
        size_t l = strcspn(at + 9, "\n");
        snprintf(line[n], sizeof line[n], "%.*s", (int)(l < 799 ? l : 799), at + 9);
    }
    for (i = 1; i < n; i++) same &= strcmp(line[i], line[0]) == 0;
    /* (process 0's reason: its own timeout, or process 2's, heard first when 2 timed out first) */
    T_CHECK(rc == 0 && n == 3 && same && strstr(line[0], "SPMD_ERR_TIMEOUT: process ") == line[0] &&
                strstr(line[0], "timed out after 6000 ms"),
            "agree: every process's spmd_run and spmd_mesh_error the same (exit %d, %d lines): %s", rc, n, t);
}

/* mode "shrink": see the top comment. */
static void shrink_train(spmd_dev *d, void *arg) {
    double x = 1, y;
    int i;
    (void)arg;
    for (i = 0; i < 3; i++)
        if (spmd_psum(d, &x, &y, 1, SPMD_F64, "dp,tp", NULL) != SPMD_OK) return;
}
typedef struct shrink_sums {
    double all[16], dp[16];
    spmd_status s[16];
} shrink_sums;
static void shrink_check(spmd_dev *d, void *arg) {
    shrink_sums *r = (shrink_sums *)arg;
    int id = spmd_device_id(d);
    double x = (double)spmd_device_origin(spmd_device_mesh(d), id);
    r->s[id] = spmd_psum(d, &x, &r->all[id], 1, SPMD_F64, "dp,tp", NULL);
    if (r->s[id] == SPMD_OK) r->s[id] = spmd_psum(d, &x, &r->dp[id], 1, SPMD_F64, "dp", NULL);
}

static int shrink_main(void) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL, *nm = NULL;
    spmd_status s, run;
    shrink_sums r;
    int P = atoi(getenv("SPMD_NUM_PROCESSES")), leave = getenv("XF_LEAVE") ? atoi(getenv("XF_LEAVE")) : -1;
    int me, i, j, ok = 1, n = 0, orig[16], kept = 0;
    memset(&desc, 0, sizeof desc);
    desc.ndim = 2;
    desc.shape[0] = P;
    desc.shape[1] = 2;
    desc.axis_names[0] = "dp";
    desc.axis_names[1] = "tp";
    desc.devices_per_process = 2;
    desc.log_level = SPMD_LOG_ERROR;
    if ((s = spmd_mesh_create(&desc, &m)) != SPMD_OK) {
        printf("mesh_create: %s\n", spmd_status_name(s));
        return 1;
    }
    me = spmd_mesh_process_id(m);
    run = spmd_run(m, shrink_train, NULL);
    if (me == leave) { /* gone without a goodbye, before or during the others' agreement */
        printf("process %d leaves (spmd_run %s)\n", me, spmd_status_name(run));
        fflush(stdout);
        _exit(0);
    }
    s = spmd_mesh_shrink(m, "dp", NULL, &nm);
    /* the reference: the replicas of the processes neither lost (the last) nor leaving */
    for (i = 0; i < P; i++)
        if (i != P - 1 && i != leave) {
            kept++;
            for (j = 0; j < 2; j++) orig[n++] = 2 * i + j;
        }
    printf("process %d: spmd_run %s, shrink %s, new mesh %d devices, dp %d\n", me, spmd_status_name(run),
           spmd_status_name(s), nm ? spmd_mesh_size(nm) : -1, nm ? spmd_mesh_axis_size(nm, "dp") : -1);
    ok = run == SPMD_ERR_PEER_LOST && s == SPMD_OK && nm && spmd_mesh_size(nm) == n &&
         spmd_mesh_axis_size(nm, "dp") == kept;
    for (i = 0; ok && i < n; i++) ok = spmd_device_origin(nm, i) == orig[i] && spmd_device_process(nm, i) == orig[i] / 2;
    if (ok) {
        memset(&r, 0, sizeof r);
        s = spmd_run(nm, shrink_check, &r);
        ok = s == SPMD_OK;
        for (i = 0; ok && i < n; i++) {
            double all = 0, col = 0;
            if (!spmd_device_is_local(nm, i)) continue;
            for (j = 0; j < n; j++) {
                all += orig[j];
                if (j % 2 == i % 2) col += orig[j];
            }
            ok = r.s[i] == SPMD_OK && r.all[i] == all && r.dp[i] == col;
            if (!ok) printf("device %d: %s, sums %g %g, want %g %g\n", i, spmd_status_name(r.s[i]), r.all[i], r.dp[i], all, col);
        }
        printf("process %d: run on the shrunk mesh %s\n", me, spmd_status_name(s));
    }
    printf("process %d: %s\n", me, ok ? "as documented" : "NOT as documented");
    fflush(stdout);
    if (nm) spmd_mesh_destroy(nm);
    spmd_mesh_destroy(m);
    return !ok;
}

/* Mesh creation's error messages (modes nocoord, wrongkey). */
static char boot_text[4096];
static void boot_log(void *user, spmd_log_level level, int device, const char *msg) {
    size_t n = strlen(boot_text);
    (void)user;
    (void)level;
    (void)device;
    snprintf(boot_text + n, sizeof boot_text - n, "%s%s", n ? " | " : "", msg);
}

/* absent: the deadline is 1500 ms; a call returns within a twentieth of
   it, at least 50 ms, after (the wait for the other processes' report
   lines; it was a whole second): 0.7 s of slack for a busy machine, more
   under ThreadSanitizer. */
#if defined(__SANITIZE_THREAD__)
#define XF_ABSENT_BY 6.0
#else
#define XF_ABSENT_BY 2.2
#endif

/* One process of a job: make the mesh, run the mode, check our devices. */
static int child_main(const char *mode) {
    spmd_mesh_desc desc;
    spmd_mesh *m = NULL;
    spmd_status s, run;
    child c;
    int i, bad = 0, found = 0, bruck16, plan16;
    double t0 = p_now();
    if (strcmp(mode, "late") == 0 || strcmp(mode, "latebar") == 0) return late_main(mode);
    if (strcmp(mode, "window") == 0) return window_main();
    if (strcmp(mode, "refuse") == 0) return refuse_main();
    if (strcmp(mode, "agree") == 0) return agree_main();
    if (strcmp(mode, "shrink") == 0) return shrink_main();
    memset(&desc, 0, sizeof desc);
    memset(&c, 0, sizeof c);
    c.quick = getenv("XF_QUICK") && strcmp(getenv("XF_QUICK"), "1") == 0;
    c.general = getenv("SPMD_QUICK_EXCHANGE") && strcmp(getenv("SPMD_QUICK_EXCHANGE"), "0") == 0;
    c.ax = c.quick ? "x" : "i";
    desc.ndim = c.quick ? 2 : 1;
    desc.shape[0] = c.quick ? 2 : 4;
    desc.shape[1] = 2;
    desc.axis_names[0] = c.quick ? "x" : "i";
    desc.axis_names[1] = "y";
    desc.check = strcmp(mode, "mismatch") == 0 || strcmp(mode, "onewaycheck") == 0 || strcmp(mode, "axesmix") == 0
                     ? SPMD_CHECK_ON : SPMD_CHECK_OFF;
    desc.log_level = SPMD_LOG_OFF;
    if (strcmp(mode, "nocoord") == 0 || strcmp(mode, "wrongkey") == 0) { /* the reason is logged: keep it */
        desc.timeout_ms = atoi(getenv("XF_BOOT_MS") ? getenv("XF_BOOT_MS") : "1500");
        desc.log_level = SPMD_LOG_ERROR;
        desc.log_fn = boot_log;
    }
    s = spmd_mesh_create(&desc, &m);
    if (strcmp(mode, "nocoord") == 0 || strcmp(mode, "wrongkey") == 0) {
        printf("mesh_create: %s after %.2f s: %s\n", spmd_status_name(s), p_now() - t0, boot_text);
        if (m) spmd_mesh_destroy(m);
        return 0; /* the parent checks what it printed */
    }
    if (s != SPMD_OK) {
        printf("mesh_create: %s\n", spmd_status_name(s));
        return 1;
    }
    c.mode = mode;
    c.proc = spmd_mesh_process_id(m);
    c.nprocs = spmd_mesh_process_count(m);
    c.bruck = getenv("SPMD_ALGO") && strcmp(getenv("SPMD_ALGO"), "bruck") == 0;
    if (spmd_mesh_backend(m) != SPMD_BACKEND_LIBFABRIC || c.nprocs != (c.bruck && !strcmp(mode, "kill") ? 4 : 2)) {
        printf("not a libfabric mesh of the expected processes (%d)\n", c.nprocs);
        return 1;
    }
    run = spmd_run(m, dev_main, &c);
    /* the 16-element psum takes the Bruck exchange when asked, and by default on the 2 x 2 mesh
       recursive doubling over the processes (two devices per process: they combine first; the quick
       mesh's axis has one per process) */
    bruck16 = c.bruck;
    plan16 = !getenv("SPMD_ALGO") && !c.quick;
    for (i = 0; i < 4; i++) {
        int ok = 1;
        char over[32], partner[32], other[32], sig16[64];
        if (!spmd_device_is_local(m, i)) continue;
        snprintf(over, sizeof over, "over '%s' but", c.ax);
        snprintf(partner, sizeof partner, "%d (process 1", c.quick ? i + 2 : 2); /* the first not heard from */
        snprintf(other, sizeof other, "%d (process 1)", (i ^ 1) + 2); /* (quick) the sibling's partner */
        snprintf(sig16, sizeof sig16, "psum(f32 x 16, %s) over '%s'", bruck16 ? "bruck" : plan16 ? "rd" : "eager", c.ax);
        printf("device %d: %s after %.2f s (%llu quick): %s\n", i, spmd_status_name(c.st[i]), c.took[i],
               (unsigned long long)m->devs[i]->lf.xq_calls, c.msg[i]);
        if (strcmp(mode, "kill") == 0) { /* found here, or (BROKEN) by the sibling first: naming the op and the dead */
            char victim[32], sig[48], axes[16];
            snprintf(victim, sizeof victim, "process %d lost", c.nprocs - 1);
            snprintf(sig, sizeof sig, "psum(f32 x %d", c.quick ? 16 : c.bruck ? 1 << 14 : 1 << 18);
            snprintf(axes, sizeof axes, " over '%s'", c.ax);
            ok = (c.st[i] == SPMD_ERR_PEER_LOST || c.st[i] == SPMD_ERR_BROKEN) && strstr(c.msg[i], victim) &&
                 strstr(c.msg[i], sig) && strstr(c.msg[i], axes) && !strstr(c.msg[i], "tag group") && c.took[i] < 10.0;
        }
        else if (strcmp(mode, "mismatch") == 0)
            ok = (c.st[i] == SPMD_ERR_MISMATCH || c.st[i] == SPMD_ERR_BROKEN) && strstr(c.msg[i], "psum") &&
                 strstr(c.msg[i], "all_gather");
        else if (strcmp(mode, "count") == 0 && plan16) /* a step's message of the other length */
            ok = (c.st[i] == SPMD_ERR_BROKEN || /* (announced by the other process: its own count) */
                  (c.st[i] == SPMD_ERR_MISMATCH && strstr(c.msg[i], c.proc == 0 ? "psum(f32 x 5, rd)" : "psum(f32 x 7, rd)") &&
                   strstr(c.msg[i], c.proc == 0 ? "carried 76 bytes, expected 68" : "carried 68 bytes, expected 76"))) &&
                 strstr(c.msg[i], "both sides must post the same length");
        else if (strcmp(mode, "count") == 0)
            ok = (c.st[i] == SPMD_ERR_MISMATCH || c.st[i] == SPMD_ERR_BROKEN) && strstr(c.msg[i], "x 5") &&
                 strstr(c.msg[i], "x 7") && strstr(c.msg[i], over);
        else if (strcmp(mode, "absent") == 0) /* timed out here, or abandoned naming the sibling's timeout */
            ok = c.proc == 1 ? c.st[i] == SPMD_OK
                             : c.st[i] == SPMD_ERR_TIMEOUT && c.took[i] < XF_ABSENT_BY && strstr(c.msg[i], sig16) &&
                                   strstr(c.msg[i], "timed out after 1500 ms: ") &&
                                   strstr(c.msg[i], bruck16   ? "process 1's part of step 1 of 1 not received"
                                                    : plan16  ? "process 1's part of step 1 of 1 of its plan not received"
                                                    : c.quick ? "devices not heard from: "
                                                              : "devices not heard from: 2 (process 1), 3 (process 1)") &&
                                   (!c.quick || strstr(c.msg[i], partner) ||
                                    (strstr(c.msg[i], "abandoned: mesh broken by device") && strstr(c.msg[i], other)));
        else if (strcmp(mode, "runahead") == 0)
            ok = c.st[i] == SPMD_OK;
        else if (strcmp(mode, "axesmix") == 0) /* found by a member of process 1, not at the 20 s deadline */
            ok = (c.st[i] == SPMD_ERR_MISMATCH || c.st[i] == SPMD_ERR_BROKEN) && c.took[i] < 5.0 &&
                 strstr(c.msg[i], "pmax") && strstr(c.msg[i], "psum");
        else if (strcmp(mode, "returned") == 0) /* at once (the deadline is 20 s), here or announced */
            ok = i == 1 || ((c.st[i] == SPMD_ERR_DEADLOCK || c.st[i] == SPMD_ERR_BROKEN) && c.took[i] < 5.0 &&
                            strstr(c.msg[i], "device 1 returned from its function without calling it"));
        else if (strcmp(mode, "rooted") == 0) /* every call quick: the rooted ones one way where they need fewer */
            ok = c.st[i] == SPMD_OK && c.took[i] < 2.5 && m->devs[i]->lf.xq_calls == 5;
        else if (strcmp(mode, "oneway") == 0) /* every call took the quick exchange */
            ok = c.st[i] == SPMD_OK && m->devs[i]->lf.xq_calls == (c.general ? 0 : (uint64_t)c.may[i]) && c.may[i] > 300;
        else if (strcmp(mode, "onewaycheck") == 0) /* both members, the one-way one too */
            ok = i % 2 || ((c.st[i] == SPMD_ERR_MISMATCH || c.st[i] == SPMD_ERR_BROKEN) && strstr(c.msg[i], "x 5") &&
                           strstr(c.msg[i], "x 7"));
        else if (strcmp(mode, "onewaynocheck") == 0) /* device 0 returns at once, device 2 finds the mismatch */
            ok = i % 2 || (i == 0 ? c.st[i] == SPMD_OK
                                  : c.st[i] == SPMD_ERR_MISMATCH && strstr(c.msg[i], "x 5") && strstr(c.msg[i], "x 7"));
        else if (strcmp(mode, "kinds") == 0) /* every call took the quick exchange (rooted ones one way) */
            ok = c.st[i] == SPMD_OK && (c.quick && !c.general ? m->devs[i]->lf.xq_calls == (uint64_t)c.may[i]
                                                              : m->devs[i]->lf.xq_calls == 0);
        else if (strcmp(mode, "announce") == 0 || strcmp(mode, "report") == 0) /* process 1 names process 0's timeout */
            ok = c.st[i] == SPMD_ERR_TIMEOUT && c.took[i] < 5.0 && strstr(c.msg[i], "recv of i32 x 4 from 2 (tag 7") &&
                 strstr(c.msg[i], "timed out after 300 ms") &&
                 (c.proc == 0 || strstr(c.msg[i], "mesh broken by process 0"));
        else if (strcmp(mode, "localmix") == 0) {
            /* found here, or in the other process (announced), or by the sibling that found it (BROKEN
               if its call began after that): naming both calls */
            ok = (c.st[i] == SPMD_ERR_MISMATCH || c.st[i] == SPMD_ERR_BROKEN) &&
                 (strstr(c.msg[i], "another device of this process called") ||
                  strstr(c.msg[i], "another device of this process failed")) &&
                 strstr(c.msg[i], "psum(f32 x 16, bruck)") && strstr(c.msg[i], "psum(f32 x 5, bruck)") &&
                 c.took[i] < 6.0;
        }
        if (c.took[i] > 10.0) ok = 0;
        found += c.st[i] == SPMD_ERR_MISMATCH;
        bad += !ok;
    }
    if (c.quick && !c.general && strcmp(mode, "rooted") != 0 && strcmp(mode, "onewaycheck") != 0 &&
        strcmp(mode, "axesmix") != 0) { /* (check mode never takes it) */
        uint64_t taken = 0;
        for (i = 0; i < 4; i++)
            if (spmd_device_is_local(m, i)) taken += m->devs[i]->lf.xq_calls;
        if (!taken) {
            printf("no call of this process took the quick exchange\n");
            bad++;
        }
    }
    if (strcmp(mode, "report") == 0) {
        /* the report across processes: each process's report names the other's devices and their recv
           (from 0 on process 1, from 2 on process 0) with the call site (the line of SPMD_AT above).
           Process 1's devices are blocked in it when they send their lines (the break reaches them
           there); of process 0's, the one that broke the mesh is, its sibling may have timed out too
           and returned by then */
        static char rep[16384];
        char want[300], gone[300];
        int k, blocked = 0;
        spmd_report(m, -1, rep, sizeof rep);
        for (k = 0; k < 2; k++) {
            int dev = c.proc == 0 ? 2 + k : k;
            snprintf(want, sizeof want, "  device %d: (process %d) blocked in #1 recv(i32 x 4) from %d over 'i' "
                     "(group [0 1 2 3], index %d): waiting for ", dev, 1 - c.proc, c.proc == 0 ? 0 : 2, dev);
            snprintf(gone, sizeof gone, "  device %d: (process %d) returned from its function (detached) after 2 calls; "
                     "last call #1 recv(i32 x 4) from %d over 'i' (group [0 1 2 3], index %d): failed: "
                     "SPMD_ERR_TIMEOUT, at tests/test_xfault.c:", dev, 1 - c.proc, c.proc == 0 ? 0 : 2, dev);
            blocked += strstr(rep, want) != NULL;
            if (!strstr(rep, want) && (c.proc == 0 || !strstr(rep, gone))) {
                printf("report: no line '%s'%s\n", want, c.proc == 0 ? "" : " (nor that it returned)");
                bad++;
            }
        }
        if (!blocked) {
            printf("report: none of process %d's devices blocked\n", 1 - c.proc);
            bad++;
        }
        if (!strstr(rep, "ms, at tests/test_xfault.c:")) {
            printf("report: no call site of the other process\n");
            bad++;
        }
        printf("---- the report (process %d)\n%s----\n", c.proc, rep);
    }
    if ((strcmp(mode, "mismatch") == 0 || strcmp(mode, "count") == 0) && !found) {
        printf("no device of this process got SPMD_ERR_MISMATCH\n");
        bad++;
    }
    /* localmix: the process that did not find it may only hear of it (its
       calls then begin on a broken mesh: SPMD_ERR_BROKEN naming both calls),
       but its spmd_run returns the cause, as every process's does */
    if (strcmp(mode, "localmix") == 0 && run != SPMD_ERR_MISMATCH) {
        printf("localmix: spmd_run %s (want SPMD_ERR_MISMATCH in every process), %d devices here found it\n",
               spmd_status_name(run), found);
        bad++;
    }
    spmd_mesh_destroy(m);
    fflush(stdout);
    return bad != 0;
}

/* Both processes through spmdrun; each child checks itself. */
static void run_pair(const char *mode, const char *envs) {
    char tag[64], env[600];
    double t0 = p_now();
    int rc;
    snprintf(tag, sizeof tag, "xfault-%s%s%s%s%s%s", mode, strstr(envs, "bruck") ? "-bruck" : "",
             strstr(envs, "ALGO=eager") ? "-eager" : "",
             strstr(envs, "XF_QUICK") ? "-quick" : "", strstr(envs, "SHM_LANE=0") ? "-nolane" : "",
             strstr(envs, "QUICK_EXCHANGE=0") ? "-general" : "");
    /* SPMD_TIMEOUT_MS would bound the bootstrap too: under a sanitizer on a busy machine the processes may take
       longer than an operation's deadline to start */
    snprintf(env, sizeof env, "SPMD_BOOT_TIMEOUT_MS=30000 %s", envs);
    rc = p_spmdrun(tag, 2, "--provider tcp", mode, env);
    T_CHECK(rc == 0, "%s: exit %d after %.1f s", mode, rc, p_now() - t0);
    if (rc != 0) p_show(tag, "log");
}

/* mode refuse as 4 processes of one device, the reductions run by plan algo. */
static void run_refuse_plan(const char *algo) {
    char tag[64], env[200];
    double t0 = p_now();
    int rc;
    snprintf(tag, sizeof tag, "xfault-refuse-4-%s", algo);
    snprintf(env, sizeof env, "SPMD_BOOT_TIMEOUT_MS=30000 XF_DEVS=4 SPMD_SHM_LANE=0 SPMD_ALGO=%s", algo);
    rc = p_spmdrun(tag, 4, "--provider tcp", "refuse", env);
    T_CHECK(rc == 0, "refuse (4 processes, %s): exit %d after %.1f s", algo, rc, p_now() - t0);
    if (rc != 0) p_show(tag, "log");
}

/* mode oneway: run_pair with a directory for the markers (XF_DIR). */
static void run_oneway(const char *mode, const char *envs) {
    char dir[400], env[900], path[480];
    snprintf(dir, sizeof dir, "%s/xfault-%s%s.d", p_logdir, mode, strstr(envs, "SHM_LANE=0") ? "-nolane" : "");
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/ahead.0", dir); unlink(path);
    snprintf(path, sizeof path, "%s/ahead.1", dir); unlink(path);
    snprintf(path, sizeof path, "%s/started.0", dir); unlink(path);
    snprintf(path, sizeof path, "%s/started.1", dir); unlink(path);
    snprintf(env, sizeof env, "XF_DIR=%s %s", dir, envs);
    run_pair(mode, env);
}

/* 3 processes (late_main); each child checks itself. */
static void run_late(const char *mode, const char *provider, const char *envs) {
    char tag[96], dir[400], env[900], extra[64], path[480];
    double t0 = p_now();
    int rc, i;
    snprintf(tag, sizeof tag, "xfault-%s-%s%s%s%s", mode, provider, strstr(envs, "SHM_LANE=0") ? "-nolane" : "",
             strstr(envs, "QUICK_EXCHANGE=0") ? "-general" : "", strstr(envs, "PROGRESS_THREAD=1") ? "-thread" : "");
    snprintf(dir, sizeof dir, "%s/%s.d", p_logdir, tag);
    mkdir(dir, 0755);
    for (i = 1; i <= 2; i++) {
        snprintf(path, sizeof path, "%s/done.%d", dir, i);
        unlink(path);
    }
    snprintf(env, sizeof env, "XF_DIR=%s %s", dir, envs);
    snprintf(extra, sizeof extra, "--provider %s", provider);
    rc = p_spmdrun(tag, 3, extra, mode, env);
    T_CHECK(rc == 0, "%s (%s %s): exit %d after %.1f s", mode, provider, envs, rc, p_now() - t0);
    if (rc != 0) p_show(tag, "log");
}

/* The last of n processes killed: spmdrun would stop the survivors, so
   start them here (algo: SPMD_ALGO's value, or "default"; quick: XF_QUICK=1). */
static void run_kill(const char *algo, int n, int quick) {
    char coord[64], a[32], np[32], id[4][32], tag[4][48];
    const char *env[4][8];
    double t0 = p_now();
    pid_t pid[4];
    int i, rc[4];
    snprintf(a, sizeof a, "SPMD_ALGO=%s", algo);
    snprintf(np, sizeof np, "SPMD_NUM_PROCESSES=%d", n);
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    for (i = 0; i < n; i++) {
        snprintf(id[i], sizeof id[i], "SPMD_PROCESS_ID=%d", i);
        snprintf(tag[i], sizeof tag[i], "xfault-kill-%s%s-p%d", algo, quick ? "-quick" : "", i);
        env[i][0] = np;
        env[i][1] = id[i];
        env[i][2] = coord;
        env[i][3] = "SPMD_JOB_KEY=xf";
        env[i][4] = "SPMD_PROVIDER=tcp";
        env[i][5] = a;
        env[i][6] = quick ? "XF_QUICK=1" : NULL;
        env[i][7] = NULL;
        pid[i] = p_spawn(tag[i], "kill", env[i]);
    }
    for (i = n - 1; i >= 0; i--) rc[i] = p_exit_code(p_wait(pid[i], 60));
    T_CHECK(rc[n - 1] == 128 + SIGKILL, "kill (%s): process %d ended with %d", algo, n - 1, rc[n - 1]);
    for (i = 0; i < n - 1; i++) {
        T_CHECK(rc[i] == 0, "kill (%s): survivor %d exit %d after %.1f s: %s", algo, i, rc[i], p_now() - t0,
                p_read(tag[i], "out"));
        if (rc[i] != 0) p_show(tag[i], "err");
    }
}

/* Mode window over a provider: both processes' lines, round by round. */
static void run_window(const char *provider) {
    char coord[64], prov[48], tag[2][48], *out[2];
    const char *env[2][7];
    pid_t pid[2];
    int i, r, rc[2], hits = 0, bad = 0;
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    snprintf(prov, sizeof prov, "SPMD_PROVIDER=%s", provider);
    for (i = 0; i < 2; i++) {
        snprintf(tag[i], sizeof tag[i], "xfault-window-%s-p%d", provider, i);
        env[i][0] = "SPMD_NUM_PROCESSES=2";
        env[i][1] = i ? "SPMD_PROCESS_ID=1" : "SPMD_PROCESS_ID=0";
        env[i][2] = coord;
        env[i][3] = "SPMD_JOB_KEY=xf";
        env[i][4] = prov;
        env[i][5] = "SPMD_BOOT_TIMEOUT_MS=30000";
        env[i][6] = NULL;
        pid[i] = p_spawn(tag[i], "window", env[i]);
    }
    for (i = 0; i < 2; i++) rc[i] = p_exit_code(p_wait(pid[i], 120));
    for (i = 0; i < 2; i++) out[i] = strdup(p_read(tag[i], "out"));
    T_CHECK(rc[0] == 0 && rc[1] == 0, "window (%s): exit codes %d and %d", provider, rc[0], rc[1]);
    for (r = 0; r < WINDOW_ROUNDS && out[0] && out[1]; r++) {
        char key[32], call[2][64], run[2][64], err[2][600];
        int ok = 1;
        snprintf(key, sizeof key, "round %d: ", r);
        for (i = 0; i < 2; i++) {
            const char *l = strstr(out[i], key), *e = l ? strstr(l, " error ") : NULL, *nl = e ? strchr(e, '\n') : NULL;
            if (!l || !e || !nl || sscanf(l + strlen(key), "call %63s run %63s", call[i], run[i]) != 2) {
                ok = 0;
                break;
            }
            snprintf(err[i], sizeof err[i], "%.*s", (int)(nl - e - 7), e + 7);
        }
        if (ok)
            ok = strcmp(run[0], run[1]) == 0 && (strstr(err[0], err[1]) != NULL || strstr(err[1], err[0]) != NULL);
        if (ok && strcmp(call[0], "SPMD_OK") == 0 && strcmp(run[0], "SPMD_OK") != 0) hits++;
        if (!ok) {
            bad++;
            fprintf(stderr, "window (%s) round %d: process 0: call %s run %s '%s'; process 1: call %s run %s '%s'\n",
                    provider, r, call[0], run[0], err[0], call[1], run[1], err[1]);
        }
    }
    T_CHECK(r == WINDOW_ROUNDS && bad == 0, "window (%s): %d of %d rounds read, %d where the runs disagree", provider,
            r, WINDOW_ROUNDS, bad);
    printf("window (%s): %d of %d rounds hit the window (process 0's call OK, the run failed)\n", provider, hits,
           WINDOW_ROUNDS);
    for (i = 0; i < 2; i++) free(out[i]);
}

/* Mode shrink: n processes over provider, process `leave` (-1: none) leaving. */
static void run_shrink(int n, const char *provider, int leave) {
    char coord[64], prov[48], np[48], lv[32], faults[64], id[4][32], tag[4][48];
    const char *env[4][9];
    double t0 = p_now();
    pid_t pid[4];
    int i, rc[4];
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    snprintf(prov, sizeof prov, "SPMD_PROVIDER=%s", provider);
    snprintf(np, sizeof np, "SPMD_NUM_PROCESSES=%d", n);
    snprintf(lv, sizeof lv, "XF_LEAVE=%d", leave);
    snprintf(faults, sizeof faults, "SPMD_FAULTS=device=%d,seq=1,kind=lose", 2 * n - 1);
    for (i = 0; i < n; i++) {
        snprintf(id[i], sizeof id[i], "SPMD_PROCESS_ID=%d", i);
        snprintf(tag[i], sizeof tag[i], "xfault-shrink-%s-%d-p%d", provider, n, i);
        env[i][0] = np;
        env[i][1] = id[i];
        env[i][2] = coord;
        env[i][3] = "SPMD_JOB_KEY=xf";
        env[i][4] = prov;
        env[i][5] = faults;
        env[i][6] = "SPMD_BOOT_TIMEOUT_MS=30000";
        env[i][7] = lv;
        env[i][8] = NULL;
        pid[i] = p_spawn(tag[i], "shrink", env[i]);
    }
    for (i = 0; i < n; i++) rc[i] = p_exit_code(p_wait(pid[i], 60));
    for (i = 0; i < n; i++) {
        int want = i == n - 1 ? 4 : 0; /* the lost process: the fault plan's status */
        T_CHECK(rc[i] == want, "shrink (%d over %s, leaving %d): process %d exit %d (want %d) after %.1f s: %s", n,
                provider, leave, i, rc[i], want, p_now() - t0, p_read(tag[i], "out"));
        if (rc[i] != want) p_show(tag[i], "err");
    }
    T_CHECK(p_now() - t0 < 30, "shrink (%d over %s): ended within 30 s (%.1f s)", n, provider, p_now() - t0);
}

/* What a boot-fault child printed: its status, seconds and messages all
   as documented (want: strings that must all appear, NULL-terminated). */
static void check_boot_child(const char *what, const char *tag, int rc, double lo, double hi,
                             const char *const *want) {
    const char *out = p_read(tag, "out"), *at = strstr(out, " after ");
    double took = at ? atof(at + 7) : -1;
    int i, ok = rc == 0 && took >= lo && took < hi;
    for (i = 0; want[i]; i++) ok = ok && strstr(out, want[i]) != NULL;
    T_CHECK(ok, "%s: exit %d, took %.2f s (want %.1f to %.1f), printed: %s", what, rc, took, lo, hi, out);
}

/* A lone process whose coordinator never comes, and a job key that differs. */
static void run_boot_faults(void) {
    char coord[64];
    const char *e1[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=1", coord, "SPMD_JOB_KEY=xf", "SPMD_PROVIDER=tcp",
                        "SPMD_BOOT_TIMEOUT_MS=", "SPMD_TIMEOUT_MS=", "XF_BOOT_MS=1000", NULL};
    const char *e2[] = {"SPMD_NUM_PROCESSES=2", "SPMD_PROCESS_ID=1", coord, "SPMD_JOB_KEY=xf", "SPMD_PROVIDER=tcp",
                        "SPMD_BOOT_TIMEOUT_MS=700", "SPMD_TIMEOUT_MS=", "XF_BOOT_MS=60000", NULL};
    const char *k[3][9] = {{"SPMD_NUM_PROCESSES=3", "SPMD_PROCESS_ID=0", coord, "SPMD_JOB_KEY=one", "SPMD_PROVIDER=tcp",
                            "SPMD_BOOT_TIMEOUT_MS=", "SPMD_TIMEOUT_MS=", "XF_BOOT_MS=2000", NULL},
                           {"SPMD_NUM_PROCESSES=3", "SPMD_PROCESS_ID=1", coord, "SPMD_JOB_KEY=two", "SPMD_PROVIDER=tcp",
                            "SPMD_BOOT_TIMEOUT_MS=", "SPMD_TIMEOUT_MS=", "XF_BOOT_MS=2000", NULL},
                           {"SPMD_NUM_PROCESSES=3", "SPMD_PROCESS_ID=2", coord, "SPMD_JOB_KEY=one", "SPMD_PROVIDER=tcp",
                            "SPMD_BOOT_TIMEOUT_MS=", "SPMD_TIMEOUT_MS=", "XF_BOOT_MS=2000", NULL}};
    static const char *const nocoord[] = {"mesh_create: SPMD_ERR_TIMEOUT", "could not reach the coordinator",
                                          "within 1000 ms", NULL};
    static const char *const nocoord_env[] = {"mesh_create: SPMD_ERR_TIMEOUT", "could not reach the coordinator",
                                              "within 700 ms", NULL};
    static const char *const key[3][6] = {
        {"mesh_create: SPMD_ERR_TIMEOUT", "after 2000 ms, 1 of 3 processes have not joined (missing: 1)",
         "as process 1 was refused: job key mismatch", NULL},
        {"mesh_create: SPMD_ERR_INVALID", "rejected process 1: job key mismatch", NULL},
        {"mesh_create: SPMD_ERR_TIMEOUT", "the coordinator (process 0) ended the job",
         "after 2000 ms, 1 of 3 processes have not joined (missing: 1)", "as process 1 was refused: job key mismatch",
         NULL}};
    char tag[3][32];
    pid_t pid[3];
    int i, rc[3];
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    rc[0] = p_exit_code(p_wait(p_spawn("xfault-nocoord", "nocoord", e1), 20));
    check_boot_child("nocoord, desc.timeout_ms 1000", "xfault-nocoord", rc[0], 0.9, 6.0, nocoord);
    rc[0] = p_exit_code(p_wait(p_spawn("xfault-nocoord-env", "nocoord", e2), 20));
    check_boot_child("nocoord, SPMD_BOOT_TIMEOUT_MS=700", "xfault-nocoord-env", rc[0], 0.6, 6.0, nocoord_env);
    snprintf(coord, sizeof coord, "SPMD_COORDINATOR=127.0.0.1:%d", p_free_port());
    for (i = 0; i < 3; i++) {
        snprintf(tag[i], sizeof tag[i], "xfault-wrongkey-p%d", i);
        pid[i] = p_spawn(tag[i], "wrongkey", k[i]);
    }
    for (i = 0; i < 3; i++) rc[i] = p_exit_code(p_wait(pid[i], 20));
    for (i = 0; i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "wrongkey, process %d", i);
        check_boot_child(what, tag[i], rc[i], i == 1 ? 0.0 : 1.9, 8.0, key[i]);
    }
}

/* XF_ONLY=name[,name...]: run only those cases (kill, mismatch, ..., late,
   latebar, boot; absent1: absent's first run alone); unset: all. */
static int want(const char *mode) {
    const char *only = getenv("XF_ONLY"), *p;
    size_t n = strlen(mode);
    if (!only || !*only) return 1;
    for (p = only; (p = strstr(p, mode)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    p_self = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child_main(argv[2]);
    signal(SIGPIPE, SIG_IGN);
    if (want("kill")) run_kill("default", 2, 0);
    if (want("kill")) run_kill("bruck", 4, 0);
    if (want("kill")) run_kill("default", 2, 1);
    if (want("mismatch")) run_pair("mismatch", "");
    if (want("count")) run_pair("count", "");
    if (want("count")) run_pair("count", "SPMD_ALGO=bruck");
    if (want("absent") || want("absent1")) run_pair("absent", "SPMD_TIMEOUT_MS=1500");
    if (want("absent")) run_pair("absent", "SPMD_TIMEOUT_MS=1500 SPMD_ALGO=bruck");
    if (want("absent")) run_pair("absent", "SPMD_TIMEOUT_MS=1500 SPMD_ALGO=eager");
    if (want("count")) run_pair("count", "XF_QUICK=1");
    if (want("absent")) run_pair("absent", "SPMD_TIMEOUT_MS=1500 XF_QUICK=1");
    if (want("count")) run_pair("count", "XF_QUICK=1 SPMD_SHM_LANE=0");
    if (want("absent")) run_pair("absent", "SPMD_TIMEOUT_MS=1500 XF_QUICK=1 SPMD_SHM_LANE=0");
    if (want("kinds")) run_pair("kinds", "XF_QUICK=1");
    if (want("kinds")) run_pair("kinds", "XF_QUICK=1 SPMD_SHM_LANE=0");
    if (want("kinds")) run_pair("kinds", "XF_QUICK=1 SPMD_QUICK_EXCHANGE=0");
    if (want("rooted")) run_pair("rooted", "XF_QUICK=1 SPMD_TIMEOUT_MS=3000");
    if (want("oneway")) run_oneway("oneway", "XF_QUICK=1");
    if (want("oneway")) run_oneway("oneway", "XF_QUICK=1 SPMD_SHM_LANE=0");
    if (want("oneway")) run_oneway("oneway", "XF_QUICK=1 SPMD_QUICK_EXCHANGE=0");
    if (want("onewaycheck")) run_pair("onewaycheck", "XF_QUICK=1 XF_OWKIND=bcast");
    if (want("onewaycheck")) run_pair("onewaycheck", "XF_QUICK=1 XF_OWKIND=reduce");
    if (want("onewaycheck")) run_pair("onewaynocheck", "XF_QUICK=1 XF_OWKIND=bcast");
    if (want("onewaycheck")) run_pair("onewaynocheck", "XF_QUICK=1 XF_OWKIND=reduce");
    if (want("localmix")) run_pair("localmix", "SPMD_TIMEOUT_MS=1500 SPMD_ALGO=bruck");
    if (want("refuse")) run_pair("refuse", "XF_DEVS=4");
    if (want("refuse")) run_pair("refuse", "XF_DEVS=2 SPMD_SHM_LANE=0");
    if (want("refuse")) run_refuse_plan("rd");
    if (want("refuse")) run_refuse_plan("rab");
    if (want("axesmix")) run_pair("axesmix", "XF_QUICK=1 SPMD_TIMEOUT_MS=20000");
    if (want("agree")) run_agree();
    if (want("returned")) run_pair("returned", "SPMD_TIMEOUT_MS=20000");
    if (want("announce")) run_pair("announce", "");
    if (want("report")) run_pair("report", "");
    if (want("runahead")) run_pair("runahead", "");
    if (want("late")) run_late("late", "tcp", "SPMD_SHM_LANE=0");
    if (want("late")) run_late("late", "shm", "");
    if (want("late")) run_late("late", "tcp", "SPMD_PROGRESS_THREAD=1");
    if (want("latebar")) run_late("latebar", "tcp", "SPMD_QUICK_EXCHANGE=0");
    if (want("window")) run_window("tcp");
    if (want("window")) run_window("shm");
    if (want("shrink")) run_shrink(3, "tcp", -1);
    if (want("shrink")) run_shrink(4, "shm", 1);
    if (want("boot")) run_boot_faults();
    return t_summary();
}
