#!/bin/sh
# Runs the test suite and prints one closing line "N passed, N failed[, N skipped]".
#   sh tests/run.sh [all|plain|nodispatch|asan|tsan|fibers|alloc|compile|cmake|faults|side|fabric|matrix|fuzz|docs|examples]
# (faults: the libfabric fault suites, the other fabric-only tests and
# FABRIC_ONCE (test_f16's fabric flavour); matrix: the fabric matrix of the
# conformance tests; fabric: both and the conformance tests under TSan;
# side: faults, cmake, compile, the bench scripts, the matrix's last configurations, fuzz and
# two scheduler settings (fibers), all's second lane; fuzz: each fuzz target
# briefly, as make fuzz built them; docs: tests/docs.sh, the documentation
# against the code; examples: each example, which must end with "OK: ...")
# Each test program prints its own closing line; this sums them. A program
# that crashes, exits non-zero (sanitizer reports do) or prints no closing
# line counts as one failure. Every skip is listed with its reason at the
# end; with CI=true (.ci/run installs every dependency) a skip is lost
# coverage and fails the run. A suite whose checks were all skipped is never
# reported as passed. Which programs run comes from the Makefile (below), and
# all fails when a program make test built was not run.
mode=${1:-all}
B=build
P=0 F=0 S=0
LOG=$B/test-logs
mkdir -p $LOG
: >$LOG/skipped-$mode
: >$LOG/ran-$mode # every program started, one path a line (checked by all)
T0=${SPMD_TEST_T0:-$(date +%s)} # make test passes the time its builds started
# libfabric's tcp (ofi_rxm) posts 4,096 receive buffers of 4 KiB to each
# endpoint's shared receive context by default and clears them when it is
# enabled: 17 MB per mesh in every process, a fifth of a small two-process
# job's time here. The tests make hundreds of meshes; 512 buffers (2 MB)
# leave every path the same (a burst beyond them waits in the socket: the
# flow control, which the tests then take more often).
export FI_OFI_RXM_MSG_RX_SIZE=${FI_OFI_RXM_MSG_RX_SIZE:-512}

# The lists of programs, as the Makefile builds them (make print-VAR): TESTS
# (plain, asan), TSAN_TESTS, NODISPATCH, EXAMPLES, FABRIC_TESTS (the fabric-only
# tests; test_alloc runs in run_alloc), FABRIC_CONF (the fabric matrix),
# FABRIC_ONCE (fabric flavour, one process), FABRIC_TSAN, FUZZ_TARGETS, and
# TEST_PROGRAMS and FABRIC_PROGRAMS: every program make test builds. make
# failing, or TESTS, EXAMPLES or TEST_PROGRAMS empty (renamed?), fails.
for v in TESTS TSAN_TESTS NODISPATCH EXAMPLES FABRIC_TESTS FABRIC_CONF FABRIC_ONCE FABRIC_TSAN FUZZ_TARGETS TEST_PROGRAMS \
         FABRIC_PROGRAMS; do
    if ! val=$(MAKEFLAGS='' make -s --no-print-directory BUILD=$B print-$v 2>$LOG/print-$mode.err) ||
       { [ -z "$val" ] && case $v in TESTS | EXAMPLES | TEST_PROGRAMS) true ;; *) false ;; esac; }; then
        echo "tests/run.sh: no list $v from the Makefile (make print-$v): $(cat $LOG/print-$mode.err)"
        echo "0 passed, 1 failed"; exit 1
    fi
    eval "$v=\$val"
done
ran() { echo "$1" >>$LOG/ran-$mode; } # $1 = the program about to run

mark() { # $1 = the section starting: a line with the time since T0 (where a run's time goes)
    el=$(($(date +%s) - T0)); echo "  -- $1 from $((el / 60))m$((el % 60))s"
}

skip() { # $1 = checks skipped, $2 = where and why
    S=$((S + $1))
    printf '%s (%s)\n' "$2" "$1" >>$LOG/skipped-$mode
}

add_line() { # $1 = closing line, $2 = exit status, $3 = name, $4 = its stderr (SKIP reasons)
    line=$1 rc=$2 name=$3 errlog=${4:-}
    p=$(printf '%s\n' "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p')
    f=$(printf '%s\n' "$line" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p')
    s=$(printf '%s\n' "$line" | sed -n 's/.*, \([0-9]*\) skipped$/\1/p')
    if [ -z "$p" ]; then
        echo "  $name: no closing line (exit $rc): FAILED"; F=$((F + 1)); return
    fi
    P=$((P + p)); F=$((F + f))
    if [ "${s:-0}" -gt 0 ]; then
        why=$( [ -n "$errlog" ] && grep -h 'SKIP' "$errlog" | head -n 3 | tr '\n' ';')
        skip "$s" "$name: ${why:-see its log}"
    fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "  $name: exit status $rc: FAILED"; F=$((F + 1))
    fi
    if [ "$p" = 0 ] && [ "$f" = 0 ] && [ "${s:-0}" -gt 0 ]; then
        echo "  $name: $line: every check skipped, not passed"
    else
        echo "  $name: $line"
    fi
}

# The thread-backend suites; asan and tsan at quick sizes, ASan's sweeps one
# case in three (SPMD_TEST_QUICK=3), TSan's one in 48 (it looks for races
# in the paths, which every kind of case takes; the plain run takes them
# all, at full sizes).
run_suite() { # $1 = plain|asan|tsan|nodispatch
    kind=$1
    tests=$TESTS
    [ "$kind" = nodispatch ] && tests=$NODISPATCH # the baseline kernels at -O0
    [ "$kind" = tsan ] && tests=$TSAN_TESTS
    for t in $tests; do
        exe=$B/$kind/$t
        if [ ! -x "$exe" ]; then echo "  $kind/$t: not built: FAILED"; F=$((F + 1)); continue; fi
        ran "$exe"
        start=$(date +%s)
        if [ "$kind" = plain ]; then
            timeout 600 "$exe" >$LOG/$kind-$t.out 2>$LOG/$kind-$t.err; rc=$?
        else
            SPMD_TEST_QUICK=$(case $kind in tsan) echo 48 ;; asan) echo 3 ;; *) echo 2 ;; esac) \
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
            TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
                timeout 900 "$exe" >$LOG/$kind-$t.out 2>$LOG/$kind-$t.err; rc=$?
        fi
        end=$(date +%s)
        add_line "$(tail -n 1 $LOG/$kind-$t.out)" $rc "$kind/$t ($((end - start))s)" $LOG/$kind-$t.err
        if [ $rc != 0 ] || grep -q '^FAIL' $LOG/$kind-$t.err; then
            sed -n '1,30p' $LOG/$kind-$t.err | sed 's/^/      /'
        fi
    done
}

# The thread-backend suites under each scheduler set by the environment
# (plain build, quick sizes, the sweeps' cases in four quarters: each runs
# in one of the four settings; ~40 s): fibers on one carrier with two seeds,
# on two carriers with a third, and OS threads (the default is fibers where
# devices outnumber CPUs). A failure names the settings that replay it.
# run_fibers [FIRST LAST]: the settings FIRST..LAST of the four (all by
# default; make test runs two in each lane).
run_fibers() {
    first=${1:-1} last=${2:-4} k=0
    for cfg in "fibers 1 1" "fibers 1 2" "fibers 2 7" "threads 1 0"; do
        set -- $cfg
        k=$((k + 1)) quarter=$((k - 1))
        [ $k -ge $first ] && [ $k -le $last ] || continue
        for t in test_reduce test_vectors test_movement test_mpi test_p2p test_shard test_errors; do
            [ $t = test_errors ] && [ $k = 2 -o $k = 3 ] && continue # (not thinned: the first and the last)
            exe=$B/plain/$t
            if [ ! -x "$exe" ]; then echo "  fibers/$t: not built: FAILED"; F=$((F + 1)); continue; fi
            name="SPMD_TEST_QUICK=4:$quarter SPMD_SCHEDULER=$1 SPMD_CARRIERS=$2 SPMD_SCHED_SEED=$3 $t"
            out=$LOG/sched-$1-$2-$3-$t
            start=$(date +%s)
            SPMD_TEST_QUICK=4:$quarter SPMD_SCHEDULER=$1 SPMD_CARRIERS=$2 SPMD_SCHED_SEED=$3 \
                timeout 300 "$exe" >$out.out 2>$out.err; rc=$?
            end=$(date +%s)
            add_line "$(tail -n 1 $out.out)" $rc "$name ($((end - start))s)" $out.err
            if [ $rc != 0 ] || grep -q '^FAIL' $out.err; then sed -n '1,30p' $out.err | sed 's/^/      /'; fi
        done
    done
}

# The compile matrix runs JOBS compiles at a time (default: one per CPU);
# compile_one starts one, compile_tally collects the results in order.
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
RUNNING=0 PIDS=""
compile_one() { # $1 = compiler, $2 = language flags, $3 = extra defines, $4 = name, $5 = libraries
    cc=$1 lang=$2 defs=$3 name=$4 libs=${5:-}
    if ! command -v $cc >/dev/null 2>&1; then
        echo "  compile $name: $cc not installed: skipped"; skip 1 "compile $name: $cc not installed"; return
    fi
    out=$B/compile/$(echo "$name" | tr ' +/' '_px')
    mkdir -p $B/compile
    rm -f $out.rc
    printf '%s\t%s\n' "$out" "$name" >>$B/compile/list
    ( if $cc $lang -Wall -Wextra -Wpedantic -Werror $defs -pthread \
             tests/compile/main.c tests/compile/other.c -o $out $libs 2>$out.err && $out >/dev/null; then
          echo 0 >$out.rc
      else
          echo 1 >$out.rc
      fi ) &
    PIDS="$PIDS $!" RUNNING=$((RUNNING + 1))
    if [ $RUNNING -ge $JOBS ]; then compile_wait; fi
}
# waits for the compiles only: a bare wait would also wait for all's second lane
compile_wait() { [ -n "$PIDS" ] && wait $PIDS; PIDS="" RUNNING=0; }
compile_tally() {
    compile_wait
    while IFS="$(printf '\t')" read -r out name; do
        if [ "$(cat $out.rc 2>/dev/null)" = 0 ]; then
            P=$((P + 1))
        else
            echo "  compile $name: FAILED"; sed -n '1,10p' $out.err | sed 's/^/      /'; F=$((F + 1))
        fi
    done <$B/compile/list
    rm -f $B/compile/list
}
run_compile() {
    mkdir -p $B/compile
    rm -f $B/compile/list
    for st in "" "-DSPMD_STATIC"; do
        for cc in gcc clang; do
            for std in c99 c11; do compile_one $cc "-std=$std" "$st" "$cc $std $st"; done
        done
        for cxx in g++ clang++; do compile_one $cxx "-x c++ -std=c++17" "$st" "$cxx c++17 $st"; done
    done
    for cc in gcc clang; do # <stdio.h> before the implementation, in the compilers' default dialect
        compile_one $cc "-std=gnu11" "-DSPMD_TEST_STDIO_FIRST" "$cc gnu11 stdio first"
    done
    # and in strict ISO C, where it cannot work: the first error must be the
    # header's own, saying what to do
    for cc in gcc clang; do
        if ! command -v $cc >/dev/null 2>&1; then skip 1 "compile $cc c11 stdio first: $cc not installed"; continue; fi
        first=$($cc -std=c11 -DSPMD_TEST_STDIO_FIRST -pthread -c tests/compile/main.c -o /dev/null 2>&1 | grep -m 1 'error')
        case $first in
            *"include spmdcoll.h (with SPMDCOLL_IMPLEMENTATION) before any system header"*) P=$((P + 1)) ;;
            *) echo "  compile $cc c11 stdio first: the first error is not the header's: $first: FAILED"; F=$((F + 1)) ;;
        esac
    done
    # SPMD_WARN_UNUSED: main.c reads every status, so it builds with it; a
    # status ignored (SPMD_TEST_IGNORED) must be an error naming it
    for cc in gcc clang; do compile_one $cc "-std=c11" "-DSPMD_WARN_UNUSED" "$cc c11 SPMD_WARN_UNUSED"; done
    for cc in gcc clang; do
        if ! command -v $cc >/dev/null 2>&1; then skip 1 "compile $cc ignored status: $cc not installed"; continue; fi
        first=$($cc -std=c11 -Wall -Werror -DSPMD_WARN_UNUSED -DSPMD_TEST_IGNORED -pthread -c tests/compile/main.c -o /dev/null 2>&1 | grep -m 1 'error')
        case $first in
            *"ignoring return value"*spmd_psum*|*spmd_psum*"ignoring return value"*|*"ignoring return value of function declared with"*) P=$((P + 1)) ;;
            *) echo "  compile $cc ignored status: not refused under SPMD_WARN_UNUSED: $first: FAILED"; F=$((F + 1)) ;;
        esac
    done
    if have_fabric; then # with the libfabric backend compiled in: every compiler and language once
        for cc in gcc clang; do
            compile_one $cc "-std=c99" "-DSPMDCOLL_LIBFABRIC" "$cc c99 fabric" -lfabric
            compile_one $cc "-std=c11" "-DSPMD_STATIC -DSPMDCOLL_LIBFABRIC" "$cc c11 -DSPMD_STATIC fabric" -lfabric
        done
        compile_one gcc "-std=gnu11" "-DSPMD_TEST_STDIO_FIRST -DSPMDCOLL_LIBFABRIC" "gcc gnu11 stdio first fabric" -lfabric
        compile_one g++ "-x c++ -std=c++17" "-DSPMDCOLL_LIBFABRIC" "g++ c++17 fabric" -lfabric
        compile_one clang++ "-x c++ -std=c++17" "-DSPMD_STATIC -DSPMDCOLL_LIBFABRIC" "clang++ c++17 -DSPMD_STATIC fabric" -lfabric
    else
        echo "  compile with SPMDCOLL_LIBFABRIC: libfabric headers missing: skipped"; skip 1 "compile with SPMDCOLL_LIBFABRIC: libfabric headers missing"
    fi
    compile_tally
    echo "  compile matrix: done"
}

# tests/cmake.sh: a small program built against spmdcoll through CMake
# (add_subdirectory, find_package after make install) and pkg-config, the
# libfabric variants too; a missing cmake is a skip.
run_cmake() {
    start=$(date +%s)
    timeout 300 sh tests/cmake.sh >$LOG/cmake.out 2>$LOG/cmake.err; rc=$?
    end=$(date +%s)
    add_line "$(tail -n 1 $LOG/cmake.out)" $rc "cmake ($((end - start))s)" $LOG/cmake.err
    if [ $rc != 0 ]; then sed -n '1,40p' $LOG/cmake.err | sed 's/^/      /'; fi
}

have_fabric() { printf '#include <rdma/fabric.h>\n' | ${CC:-cc} -E -x c - >/dev/null 2>&1; }

# The bench scripts nothing else runs, once each at their smallest (a smoke
# run: each exits 0 and prints its figures; the figures are not judged):
# bench/hybrid.sh (libfabric) and bench/insns.sh -t fabric-shm (valgrind),
# one check each;
# and bench --plan 16384, whose Rabenseifner counts are exact (28 messages
# to 14 peers a process).
run_bench_scripts() {
    for cmd in "hybrid.sh -k 1" "insns.sh -t fabric-shm"; do
        name="bench/$cmd" log=$LOG/bench-$(echo "$cmd" | tr ' ' '_')
        case $cmd in
            hybrid*) want='^median: threads [0-9.e+-]* us, processes [0-9.e+-]* us' ;;
            *) want=' instructions per call$' ;;
        esac
        if ! have_fabric; then
            echo "  $name: libfabric missing: skipped"; skip 1 "$name: libfabric missing"; continue
        fi
        if ! command -v valgrind >/dev/null 2>&1 && [ "${cmd%% *}" = insns.sh ]; then
            echo "  $name: valgrind missing: skipped"; skip 1 "$name: valgrind missing"; continue
        fi
        start=$(date +%s)
        timeout 300 bash bench/$cmd >$log.out 2>$log.err; rc=$?
        end=$(date +%s)
        if [ $rc = 0 ] && grep -q "$want" $log.out; then line="1 passed, 0 failed"; else line="0 passed, 1 failed"; fi
        add_line "$line" $rc "$name ($((end - start))s): $(grep "$want" $log.out | head -n 1)" $log.err
        if [ $rc != 0 ]; then sed -n '1,20p' $log.err | sed 's/^/      /'; fi
    done
    # bench --plan: the plans' per-process counts at the largest P the test
    # samples (no mesh, no network)
    log=$LOG/bench-plan
    ran $B/bench
    timeout 120 $B/bench --plan 16384 >$log.out 2>$log.err; rc=$?
    want='^rab (Rabenseifner) *28 *28 *14 '
    if [ $rc = 0 ] && grep -q "$want" $log.out; then line="1 passed, 0 failed"; else line="0 passed, 1 failed"; fi
    add_line "$line" $rc "bench --plan 16384: $(grep '^rab' $log.out | head -n 1)" $log.err
}

fault_line() { # $1 = test, $2 = its logs' stem (.out, .err, .rc: exit status and seconds)
    set -- $1 $2 $(cat $2.rc)
    add_line "$(tail -n 1 $2.out)" $3 "$1 ($4s)" $2.err
    if [ $3 != 0 ] || grep -q '^FAIL' $2.err; then sed -n '1,40p' $2.err | sed 's/^/      /'; fi
}

# The libfabric fault suites and the other fabric-only tests (FABRIC_TESTS,
# built by make fabric; test_alloc is run_alloc's); each starts its own jobs
# through tools/spmdrun (test_xfault also under ThreadSanitizer: a broken
# mesh's announcement and the devices' threads race). Then FABRIC_ONCE, as
# one process each. Not built (libfabric missing): skipped.
XF_TSAN=kill,absent1,announce,report,runahead,returned,late,latebar,shrink
run_fabric() {
    bg="" list=fabric/test_xfault
    for t in $FABRIC_TESTS; do
        case $t in test_xfault | test_alloc) ;; *) list="$list fabric/$t" ;; esac
    done
    for t in $FABRIC_ONCE; do list="$list fabric/$t"; done
    for t in $list fabric-tsan/test_xfault; do
        exe=$B/$t
        log=$LOG/$(echo $t | tr / -)
        if [ ! -x "$exe" ]; then
            if have_fabric; then echo "  $t: not built: FAILED"; F=$((F + 1))
            else echo "  $t: libfabric missing: skipped"; skip 1 "$t: libfabric missing"; fi
            continue
        fi
        ran "$exe"
        # fabric/test_xfault mostly waits out deadlines (15 s of CPU in 64): it runs beside the others.
        # Under TSan (after them) the modes where a break's announcement, the deadlines and the
        # devices' threads race (XF_TSAN); the exchanges' own paths run under TSan in run_fabric_tsan
        ( start=$(date +%s)
          [ $t = fabric-tsan/test_xfault ] && export XF_ONLY=$XF_TSAN
          TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 timeout 300 "$exe" >$log.out 2>$log.err
          echo "$? $(($(date +%s) - start))" >$log.rc ) &
        if [ $t = fabric/test_xfault ]; then bg=$!; else wait $!; fault_line $t $log; fi
    done
    if [ -n "$bg" ]; then wait $bg; fault_line fabric/test_xfault $LOG/fabric-test_xfault; fi
    # Two hosts: network namespaces joined by a veth pair, test_fabric's
    # transfers between them (needs root and ip netns, else skipped).
    if [ -x $B/fabric/test_fabric ]; then
        ran $B/fabric/test_fabric; ran $B/fabric/test_reduce
        start=$(date +%s)
        timeout 400 sh tests/twohost.sh $B/fabric/test_fabric $B/fabric/test_reduce >$LOG/fabric-twohost.out 2>$LOG/fabric-twohost.err; rc=$?
        end=$(date +%s)
        add_line "$(tail -n 1 $LOG/fabric-twohost.out)" $rc "fabric/twohost ($((end - start))s)" $LOG/fabric-twohost.err
        if [ $rc != 0 ] || grep -q '^FAIL' $LOG/fabric-twohost.err; then
            sed -n '1,40p' $LOG/fabric-twohost.err | sed 's/^/      /'
        fi
    elif have_fabric; then echo "  fabric/twohost: test_fabric not built: FAILED"; F=$((F + 1))
    else echo "  fabric/twohost: libfabric missing: skipped"; skip 1 "fabric/twohost: libfabric missing"; fi
}

# A few conformance tests as two processes (two devices each on the larger
# meshes) under ThreadSanitizer, shm provider with the shared-memory lane:
# the exchange path's local members and the transport's progress race there.
# (FABRIC_TSAN, from the Makefile)
run_fabric_tsan() {
    for t in $FABRIC_TSAN; do
        exe=$B/fabric-tsan/$t
        if [ ! -x "$exe" ]; then
            if have_fabric; then echo "  fabric-tsan/$t: not built: FAILED"; F=$((F + 1))
            else echo "  fabric-tsan/$t: libfabric missing: skipped"; skip 1 "fabric-tsan/$t: libfabric missing"; fi
            continue
        fi
        ran "$exe"
        log=$LOG/fabric-tsan-$t
        start=$(date +%s)
        SPMD_TEST_QUICK=16 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
            tools/spmdrun -n 2 --provider shm --timeout 400 -- "$exe" >$log.out 2>$log.err; rc=$?
        end=$(date +%s)
        f0=$F
        add_procs $log.out $rc 2 "fabric-tsan/$t shm -n 2 ($((end - start))s)"
        if [ $F != $f0 ]; then
            grep -e 'FAIL' -e 'spmdrun:' -e 'ThreadSanitizer' -A12 $log.err | sed -n '1,40p' | sed 's/^/      /'
        fi
    done
}

# The conformance tests as several processes (make fabric builds them): each
# test under tools/spmdrun for every provider and process count of
# FABRIC_MATRIX (provider:processes[:modes], modes joined by +: strict sets
# SPMD_FABRIC_STRICT=1, nolane SPMD_SHM_LANE=0: tcp then carries the small
# messages too, which the shared-memory lane takes otherwise; small
# SPMD_SHM_LANE=small: the lane carries small messages only, the provider
# the large ones, which the lane's bulk rings take otherwise; bruck
# SPMD_ALGO=bruck: every collective but ppermute and ragged_all_to_all
# through the Bruck exchange, which small operations take by default from
# 8 processes on, and unrooted ones with two or more devices per process;
# eager SPMD_ALGO=eager: the direct exchange for those; rd, rab SPMD_ALGO=rd
# or rab: the reductions over one device per process by those plans (on 8
# processes small ones take rd and large ones rab by default; 3 and 6 give
# the plans' pre-steps one and two pairs; tcp:4:nolane+mixq takes the plans
# that are the default across hosts from 4 processes on: Rabenseifner,
# psum_scatter's halving, scatter and gather trees); mixq SPMD_QUICK_EXCHANGE=0 in the odd processes only:
# their small blocking collectives take the general exchange while the even
# ones take the quick one, and the two must agree; fibers each process's
# devices as fibers on one carrier (SPMD_SCHEDULER=fibers SPMD_CARRIERS=1);
# net is libfabric 1.17's
# native tcp RDM provider, with its own limits on early messages),
# configurations outer, tests inner. Meshes of 4 and more devices under two
# processes cover "two processes of two devices". SPMD_TEST_QUICK=$FABRIC_QUICK:K
# keeps one sweep case in $FABRIC_QUICK (every collective crosses processes),
# configuration number c taking K = c mod $FABRIC_QUICK: over the matrix's
# configurations every case crosses processes at least once. Cases that only
# wait out a deadline run where K = 0 (tcp:2:nolane+fibers; tests/testlib.h
# tl_slow_cases). Not in the matrix (to keep make test within 10 minutes):
# shm:2 (four of the tests run so under ThreadSanitizer, run_fabric_tsan),
# tcp:2:nolane (tcp:2:nolane+fibers; threads over tcp are tcp:3 and tcp:4),
# shm:2:small (the lane's small mode is test_fabric's fabric-small-shm-2),
# shm:5:bruck (Bruck is tcp:3:strict+bruck's, and shm:8's by default),
# tcp:3:nolane+bruck (Bruck over tcp is tcp:3:strict+bruck), tcp:2:strict
# (strict is tcp:3:strict+bruck and test_fabric's strict jobs) and
# shm:2:fibers (fibers are tcp:2:nolane+fibers), shm:3:mixq (mixq is
# tcp:4:nolane+mixq's, the lane with few processes shm:4:eager's). A
# run has FABRIC_RUN_TIMEOUT seconds (spmdrun --timeout) and the matrix
# FABRIC_MATRIX_BUDGET in all: a run not started within it is a failure. A
# provider fi_info does not offer is skipped. One line per run: the closing
# lines of all its processes summed; a process without one, or a non-zero
# exit with no failure counted, is one failure more. The tests: FABRIC_CONF
# (from the Makefile).
FABRIC_MATRIX=${FABRIC_MATRIX:-"tcp:2:nolane+fibers tcp:3:nolane+rab shm:4:eager tcp:3:strict+bruck
    shm:8 shm:6:rd tcp:4:nolane+mixq net:3:nolane"}
FABRIC_QUICK=${FABRIC_QUICK:-8} # (8 configurations: every offset 0..7 runs once)
FABRIC_MAIN=${FABRIC_MAIN:-5} # make test: the first 5 configurations in the main lane, the rest beside it
FABRIC_RUN_TIMEOUT=${FABRIC_RUN_TIMEOUT:-150}
FABRIC_MATRIX_BUDGET=${FABRIC_MATRIX_BUDGET:-600}

add_procs() { # $1 = spmdrun's stdout, $2 = exit status, $3 = processes, $4 = name
    out=$1 rc=$2 np=$3 name=$4
    # per process "[i] N passed, N failed[, N skipped]" (its last one): the
    # sums and how many processes printed none
    set -- $(awk -v np="$np" '
        /^\[[0-9]+\] [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$/ {
            i = substr($1, 2, length($1) - 2); p[i] = $2; f[i] = $4; s[i] = $6 == "" ? 0 : $6; seen[i] = 1
        }
        END {
            for (i = 0; i < np; i++)
                if (i in seen) { tp += p[i]; tf += f[i]; ts += s[i] } else miss++
            printf "%d %d %d %d\n", tp, tf, ts, miss
        }' "$out")
    p=$1 f=$2 s=$3 miss=$4
    P=$((P + p)); F=$((F + f))
    [ "$s" -gt 0 ] && skip "$s" "$name: $(grep -h 'SKIP' "${out%.out}.err" 2>/dev/null | head -n 3 | tr '\n' ';')"
    line="$p passed, $f failed"
    [ "$s" -gt 0 ] && line="$line, $s skipped"
    if [ "$miss" -gt 0 ]; then
        echo "  $name: $line ($miss of $np processes without a closing line, exit $rc): FAILED"; F=$((F + 1))
    elif [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "  $name: $line (exit status $rc): FAILED"; F=$((F + 1))
    else
        echo "  $name: $line ($np processes)"
    fi
}

# The tests of configuration $1: all of FABRIC_CONF in the strict ones and
# tcp:4:nolane+mixq; where it only forces an algorithm, or has 8 processes
# (where the defaults change algorithm), the sweeps of the collectives that
# changes: test_reduce, test_movement and test_mpi; elsewhere all but
# test_shard and test_vectors (they call the same collectives as the sweeps,
# test_p2p none).
matrix_tests() {
    case "+${1#*:*:}+" in
        *+strict+* | +tcp:4:nolane+mixq+) echo $FABRIC_CONF ;;
        *+eager+* | *+bruck+* | *+rd+* | *+rab+* | +shm:8+)
            for t in $FABRIC_CONF; do case $t in test_reduce | test_movement | test_mpi) echo $t ;; esac; done ;;
        *) for t in $FABRIC_CONF; do case $t in test_shard | test_vectors) ;; *) echo $t ;; esac; done ;;
    esac
}

# run_fabric_matrix [FIRST LAST]: configurations FIRST..LAST (1-based; all by
# default), numbered as in the whole matrix (so K stays the same).
run_fabric_matrix() {
    first=${1:-1} last=${2:-999} nruns=0 c=0
    for cfg in $FABRIC_MATRIX; do
        c=$((c + 1)); [ $c -ge $first ] && [ $c -le $last ] || continue
        for t in $(matrix_tests "$cfg"); do nruns=$((nruns + 1)); done
    done
    if ! have_fabric; then
        echo "  fabric matrix ($nruns runs): libfabric missing: skipped"; skip $nruns "fabric matrix: libfabric missing"; return
    fi
    deadline=$(($(date +%s) + FABRIC_MATRIX_BUDGET))
    c=0
    for cfg in $FABRIC_MATRIX; do
        thin=$FABRIC_QUICK:$((c % FABRIC_QUICK)); c=$((c + 1))
        [ $c -ge $first ] && [ $c -le $last ] || continue
        prov=${cfg%%:*} rest=${cfg#*:}
        np=${rest%%:*} modes=""
        [ "$rest" != "$np" ] && modes=${rest#*:}
        strict="" lane="" algo="" mixq=""
        case "+$modes+" in *+strict+*) strict=1 ;; esac
        case "+$modes+" in *+nolane+*) lane=0 ;; esac
        case "+$modes+" in *+small+*) lane=small ;; esac
        case "+$modes+" in *+bruck+*) algo=bruck ;; esac
        case "+$modes+" in *+eager+*) algo=eager ;; esac
        case "+$modes+" in *+rd+*) algo=rd ;; esac
        case "+$modes+" in *+rab+*) algo=rab ;; esac
        case "+$modes+" in *+mixq+*) mixq=1 ;; esac
        fib=""; case "+$modes+" in *+fibers+*) fib=1 ;; esac
        if command -v fi_info >/dev/null 2>&1 && ! fi_info -p "$prov" -t FI_EP_RDM >/dev/null 2>&1; then
            n=0; for t in $(matrix_tests "$cfg"); do n=$((n + 1)); done
            echo "  fabric $prov -n $np${modes:+ $modes}: provider $prov not offered here (fi_info): $n runs skipped"
            skip $n "fabric matrix $prov -n $np: provider $prov not offered here (fi_info)"; continue
        fi
        for t in $(matrix_tests "$cfg"); do
            exe=$B/fabric/$t
            name="fabric/$t $prov -n $np${modes:+ $modes}"
            if [ ! -x "$exe" ]; then echo "  $name: not built: FAILED"; F=$((F + 1)); continue; fi
            if [ "$(date +%s)" -ge $deadline ]; then
                echo "  $name: not started, the matrix's $FABRIC_MATRIX_BUDGET s are spent: FAILED"; F=$((F + 1)); continue
            fi
            log=$LOG/fabric-$t-$prov-$np${modes:+-$modes}
            ran "$exe"
            start=$(date +%s)
            set -- "$exe"
            [ -n "$mixq" ] && set -- sh -c '[ $((SPMD_PROCESS_ID % 2)) = 1 ] && export SPMD_QUICK_EXCHANGE=0; exec "$0"' "$exe"
            env SPMD_TEST_QUICK=$thin ${fib:+SPMD_SCHEDULER=fibers SPMD_CARRIERS=1} ${strict:+SPMD_FABRIC_STRICT=1} ${lane:+SPMD_SHM_LANE=$lane} ${algo:+SPMD_ALGO=$algo} \
                tools/spmdrun -n "$np" --provider "$prov" --timeout "$FABRIC_RUN_TIMEOUT" -- "$@" \
                >$log.out 2>$log.err; rc=$?
            end=$(date +%s)
            f0=$F
            add_procs $log.out $rc "$np" "$name ($((end - start))s)"
            if [ $F != $f0 ]; then
                grep -e 'FAIL' -e 'spmdrun:' $log.err | sed -n '1,6p' | sed 's/^/      /'
            fi
        done
    done
}

# tests/docs.sh: every relative link of the markdown resolves; every SPMD_API
# function, configuration macro and SPMD_* variable of the header is named in
# its top comment (the variables also in the README's table); the QUICK START
# and the README's program compile (C99 and C++17, <stdio.h> first or not) and
# run, the README's also as 2 processes over libfabric (~20 s).
run_docs() {
    start=$(date +%s)
    sh tests/docs.sh >$LOG/docs.out 2>$LOG/docs.err; rc=$?
    end=$(date +%s)
    add_line "$(tail -n 1 $LOG/docs.out)" $rc "docs ($((end - start))s)" $LOG/docs.err
    if [ $rc != 0 ]; then sed -n '1,30p' $LOG/docs.err | sed 's/^/      /'; fi
}

# The examples (EXAMPLES, from the Makefile): each checks its own results
# and ends, when they are right, with a line "OK: ..." on its standard
# output. Anything else (another last line, a non-zero exit, a timeout) fails.
run_examples() {
    for ex in $EXAMPLES; do
        exe=$B/ex/$ex log=$LOG/example-$ex
        if [ ! -x "$exe" ]; then echo "  example $ex: not built: FAILED"; F=$((F + 1)); continue; fi
        ran "$exe"
        timeout 120 "$exe" >$log.out 2>$log.err; rc=$?
        last=$(tail -n 1 $log.out)
        case $rc:$last in
            0:OK:*) P=$((P + 1)); echo "  example $ex: $last" ;;
            124:*) F=$((F + 1)); echo "  example $ex: FAILED (timed out after 120 s)" ;;
            0:*) F=$((F + 1)); echo "  example $ex: FAILED (exit 0, but its last line is not \"OK: ...\")" ;;
            *) F=$((F + 1)); echo "  example $ex: FAILED (exit $rc)" ;;
        esac
        case $rc:$last in 0:OK:*) ;; *) tail -n 20 $log.out $log.err | sed 's/^/      /' ;; esac
    done
}

# all: every program make test built (TEST_PROGRAMS, FABRIC_PROGRAMS) must
# have run in one lane or the other; one that did not counts as a failure (a
# list of the Makefile that this script does not run, or a test left out by a
# case above). One not built is the failure of the section that runs it.
check_ran() {
    progs=$TEST_PROGRAMS
    have_fabric && progs="$progs $FABRIC_PROGRAMS" # (else those sections skip)
    for exe in $progs; do
        if [ -x "$exe" ] && ! grep -qxF "$exe" $LOG/ran-all $LOG/ran-side 2>/dev/null; then
            echo "  $exe: built by make test but never run: FAILED"; F=$((F + 1))
        fi
    done
}

# No allocation in the steady state (tests/test_alloc.c): the thread backend
# under fibers (the default where devices outnumber CPUs) and OS threads, under
# ASan+UBSan and TSan, and 2 processes of 2 devices over the shared-memory
# lane (shm) and over libfabric alone (tcp, SPMD_SHM_LANE=0).
run_alloc() {
    for cfg in "alloc fibers" "alloc threads" "alloc-asan" "alloc-tsan" "fabric shm" "fabric tcp"; do
        set -- $cfg
        exe=$B/$1/test_alloc name="$1/test_alloc${2:+ $2}" log=$LOG/$1-test_alloc${2:+-$2}
        if [ ! -x "$exe" ]; then
            if [ $1 != fabric ] || have_fabric; then echo "  $name: not built: FAILED"; F=$((F + 1))
            else echo "  $name: libfabric missing: skipped"; skip 1 "$name: libfabric missing"; fi
            continue
        fi
        ran "$exe"
        start=$(date +%s)
        if [ $1 = fabric ]; then
            lane=1; [ $2 = tcp ] && lane=0
            SPMD_SHM_LANE=$lane tools/spmdrun -n 2 --provider $2 --timeout 120 -- "$exe" >$log.out 2>$log.err; rc=$?
            end=$(date +%s)
            add_procs $log.out $rc 2 "$name ($((end - start))s)"
        else
            env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
                ${2:+SPMD_SCHEDULER=$2} timeout 300 "$exe" >$log.out 2>$log.err; rc=$?
            end=$(date +%s)
            add_line "$(tail -n 1 $log.out)" $rc "$name ($((end - start))s)" $log.err
        fi
        if [ $rc != 0 ] || grep -q '^FAIL' $log.err; then sed -n '1,20p' $log.err | sed 's/^/      /'; fi
    done
}

# all: the fault suites (mostly waiting out deadlines, little CPU), the
# conformance tests as 2 processes under ThreadSanitizer, the cmake test, the
# compile matrix, the
# fabric matrix's configurations after the first $FABRIC_MAIN, the short
# fuzz runs and two of the four scheduler settings run in a second lane
# (mode side) beside the others; their lines
# and counts join at the end. The lines "-- X from T" say when each section
# began: balance the lanes by them, so that both end together.
run_all() {
    sh tests/run.sh side >$LOG/lane-side.out 2>&1 &
    side_pid=$! # (not "lane": run_fabric_matrix and run_alloc set that)
    mark docs; run_docs; mark plain; run_suite plain; mark nodispatch; run_suite nodispatch
    mark asan; run_suite asan; mark tsan; run_suite tsan; mark alloc; run_alloc
    mark matrix; run_fabric_matrix 1 $FABRIC_MAIN; mark examples; run_examples
    mark fibers; run_fibers 1 2; mark "waiting for the second lane"
    wait $side_pid
    sed -n '/^skipped:$/q; /^total time/q; /^[0-9]* passed, [0-9]* failed/q; p' $LOG/lane-side.out
    set -- $(tail -n 1 $LOG/lane-side.out | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed\(, \([0-9]*\) skipped\)*$/\1 \2 \4/p')
    if [ $# -lt 2 ]; then
        echo "  second lane (fault suites, cmake, matrix, fuzz): no closing line: FAILED"; F=$((F + 1))
    else
        P=$((P + $1)); F=$((F + $2)); S=$((S + ${3:-0}))
        cat $LOG/skipped-side >>$LOG/skipped-all
    fi
    check_ran
}

# The fuzz targets (make fuzz builds them): each runs FUZZ_SECONDS (1; longer runs: fuzz/README) from
# a copy of its seed corpus (fuzz/corpus/<target>; what it adds stays in
# build/), then once over each input that once crashed it (fuzz/regress/
# <target>: fixed since, kept as regression tests). A target that finds
# something, or a regression input that fails, is a failure (the input is
# left in build/test-logs). Not built: skipped without clang or libfabric,
# else failed. The targets: FUZZ_TARGETS (from the Makefile).
FUZZ_SECONDS=${FUZZ_SECONDS:-1}
run_fuzz() {
    for t in $FUZZ_TARGETS; do
        exe=$B/fuzz/$t
        if [ ! -x "$exe" ]; then
            if have_fabric && command -v clang >/dev/null 2>&1; then echo "  fuzz/$t: not built: FAILED"; F=$((F + 1))
            else echo "  fuzz/$t: clang or libfabric missing: skipped"; skip 1 "fuzz/$t: clang or libfabric missing"; fi
            continue
        fi
        log=$LOG/fuzz-$t
        rm -rf $B/fuzz/corpus-$t && mkdir -p $B/fuzz/corpus-$t
        if timeout $((FUZZ_SECONDS + 60)) "$exe" -max_total_time=$FUZZ_SECONDS -timeout=10 -rss_limit_mb=2048 \
               -print_final_stats=1 -artifact_prefix=$LOG/fuzz-$t- $B/fuzz/corpus-$t fuzz/corpus/$t >$log.out 2>&1; then
            P=$((P + 1))
            echo "  fuzz/$t: $(sed -n 's/^stat::number_of_executed_units: *//p' $log.out) runs in ${FUZZ_SECONDS}s, $(grep -a -o 'cov: [0-9]*' $log.out | tail -n 1)"
        else
            F=$((F + 1)); echo "  fuzz/$t: FAILED (log: $log.out)"
            grep -a -e 'ERROR' -e 'runtime error' -e 'Assertion' -e 'Test unit written' $log.out | sed -n '1,6p' | sed 's/^/      /'
        fi
        if [ -d fuzz/regress/$t ]; then
            if "$exe" fuzz/regress/$t/* >$log-regress.out 2>&1; then
                P=$((P + 1)); echo "  fuzz/$t regressions: $(ls fuzz/regress/$t | wc -l) inputs ok"
            else
                F=$((F + 1)); echo "  fuzz/$t regressions: FAILED (log: $log-regress.out)"
                grep -a -e 'Running:' -e 'ERROR' -e 'runtime error' -e 'Assertion' $log-regress.out | sed -n '1,6p' | sed 's/^/      /'
            fi
        fi
    done
}

case $mode in
    plain|asan|tsan|nodispatch) run_suite $mode ;;
    compile) run_compile ;;
    cmake) run_cmake ;;
    faults) run_fabric ;;
    side) mark faults; run_fabric; mark fabric-tsan; run_fabric_tsan; mark cmake; run_cmake; mark compile; run_compile
          mark "bench scripts"; run_bench_scripts
          mark "matrix's last configurations"; run_fabric_matrix $((FABRIC_MAIN + 1)) 999; mark fuzz; run_fuzz
          mark fibers; run_fibers 3 4 ;;
    fabric) run_fabric; run_fabric_tsan; run_fabric_matrix ;;
    matrix) run_fabric_matrix ;;
    fibers) run_fibers ;;
    alloc) run_alloc ;;
    fuzz) run_fuzz ;;
    bench) run_bench_scripts ;;
    docs) run_docs ;;
    examples) run_examples ;;
    all) run_all ;;
    *) echo "usage: sh tests/run.sh [all|plain|nodispatch|asan|tsan|fibers|alloc|compile|cmake|faults|side|fabric|matrix|fuzz|bench|docs|examples]"; exit 2 ;;
esac
if [ $S -gt 0 ]; then
    echo "skipped:"; sed 's/^/  /' $LOG/skipped-$mode
    if [ "${CI:-}" = true ] && [ "$mode" != side ]; then
        echo "CI: $S checks skipped where every dependency is installed (.ci/run): coverage lost, the run fails"
        F=$((F + 1))
    fi
fi
el=$(($(date +%s) - T0))
echo "total time: $((el / 60))m$((el % 60))s"
if [ $S -gt 0 ]; then echo "$P passed, $F failed, $S skipped"; else echo "$P passed, $F failed"; fi
[ $F = 0 ]
