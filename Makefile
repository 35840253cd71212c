# spmdcoll: make demo | make test | make bench | make install PREFIX=...
CC      ?= cc
CFLAGS  ?= -O2 -g
PREFIX  ?= /usr/local
BUILD   := build
WARN    := -Wall -Wextra -Werror
BASE    := -std=c11 -pthread -I.
LIBS    := -lm
TESTS   := test_mesh test_reduce test_vectors test_f16 test_errors test_movement test_mpi test_p2p test_shard test_fibers test_trace test_faults test_shrink test_plans test_async
# Under TSan, the suites that run threads (test_plans simulates its ranks in
# one, test_f16 converts; test_vectors' fixed vectors take the paths the
# sweeps take)
TSAN_TESTS := $(filter-out test_plans test_f16 test_vectors,$(TESTS))
FABRIC_TESTS := test_boot test_fabric test_xfault test_pfaults test_alloc
# those of them that read the transport's internals, so keep the implementation
# in their own file; the others link tests/impl.c's object
FABRIC_OWN   := test_boot test_fabric test_xfault
FABRIC_LINKED := $(filter-out $(FABRIC_OWN),$(FABRIC_TESTS))
# the conformance tests in the fabric flavour: run.sh's fabric matrix starts
# them under tools/spmdrun as several processes (one process: threads)
FABRIC_CONF  := test_reduce test_movement test_mpi test_shard test_p2p test_vectors
# built in the fabric flavour too but making no mesh (nothing would cross
# processes): run.sh runs each once, as one process
FABRIC_ONCE  := test_f16
FABRIC_LIBS  := -lfabric
# conformance tests that also run as two processes under ThreadSanitizer (the
# exchange path's threads of one process racing the transport; test_shard's
# sharding calls the same collectives); test_xfault too (built with its own
# implementation)
FABRIC_TSAN  := test_reduce test_movement test_mpi test_p2p
# 1 when the libfabric headers are installed (make deps installs them as root)
HAVE_FABRIC = $(shell printf "\#include <rdma/fabric.h>\n" | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
SAN_ASAN := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_TSAN := -O1 -g -fsanitize=thread

.PHONY: compile-times plots fuzz all demo test test-build test-plain test-asan test-tsan test-compile test-docs test-fabric fabric bench install clean deps

EXAMPLES := tour train pipeline moe transpose fsdp shard_matmul shard_mlp reshard elastic

all: $(EXAMPLES:%=$(BUILD)/%) $(BUILD)/bench $(TESTS:%=$(BUILD)/plain/%)

$(BUILD)/%: examples/%.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(BASE) $(WARN) $< -o $@ $(LIBS)

$(BUILD)/bench: bench/bench.c bench/bench_common.h spmdcoll.h
	@mkdir -p $(@D)
	$(CC) -O3 -g $(BASE) $(WARN) $< -o $@ $(LIBS)

# The same benchmark with the libfabric backend compiled in: run it under
# tools/spmdrun (bench/compare_mpi.sh -t fabric-tcp|fabric-shm does).
$(BUILD)/bench-fabric: bench/bench.c bench/bench_common.h spmdcoll.h
	@mkdir -p $(@D)
	$(CC) -O3 -g $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $< -o $@ $(LIBS) $(FABRIC_LIBS)

# What the flight recorder costs on a small psum: a mesh with it against one
# without, alternating in one run (bench/reccost.c; -fabric: under tools/spmdrun).
$(BUILD)/reccost: bench/reccost.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) -O3 -g $(BASE) $(WARN) $< -o $@ $(LIBS)
$(BUILD)/reccost-fabric: bench/reccost.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) -O3 -g $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $< -o $@ $(LIBS) $(FABRIC_LIBS)

# How survivors learn of a killed process (bench/killsoak.c): 4 processes,
# SIGKILL at random times; run build/killsoak [runs] [tcp|shm|both].
$(BUILD)/killsoak: bench/killsoak.c tests/proclib.h spmdcoll.h
	@mkdir -p $(@D)
	$(CC) -O2 -g $(BASE) $(WARN) -Wno-format-truncation $< -o $@ $(LIBS) $(FABRIC_LIBS)

# The floor under a small collective between two processes: one cache line
# exchanged through shared memory (bench/cacheline.c).
$(BUILD)/cacheline: bench/cacheline.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(BASE) $(WARN) $< -o $@

# The floor under a large mesh's first run: fresh pages (bench/pagefault.c).
$(BUILD)/pagefault: bench/pagefault.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(BASE) $(WARN) $< -o $@

# The floor under a psum of many fibers: a bare switch per fiber (bench/fiberfloor.c).
$(BUILD)/fiberfloor: bench/fiberfloor.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(BASE) $(WARN) $< -o $@

# The conformance tests include the header for its declarations only
# (-DSPMD_TEST_LINKED_IMPL) and link its implementation, compiled once per
# flavour from tests/impl.c: that compile is most of the suite's build time.
# The fabric-only tests that read the transport's internals (FABRIC_OWN) keep
# the implementation in their own file. tests/impl.c counts the library's
# allocations (its SPMD_MALLOC), which test_alloc reads.
LINKED := -DSPMD_TEST_LINKED_IMPL
TEST_DEPS := spmdcoll.h tests/harness.h tests/testlib.h
$(BUILD)/plain/impl.o: tests/impl.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(BASE) $(WARN) -c $< -o $@
$(BUILD)/plain/%: tests/%.c $(BUILD)/plain/impl.o $(TEST_DEPS)
	$(CC) $(CFLAGS) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/plain/impl.o -o $@ $(LIBS)
# The examples as make test runs them: linked with that same object (the
# one-file way, SPMDCOLL_IMPLEMENTATION in the program, is what make demo and
# make all build, and what the compile matrix checks).
$(BUILD)/ex/%: examples/%.c $(BUILD)/plain/impl.o spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/plain/impl.o -o $@ $(LIBS)

$(BUILD)/asan/impl.o: tests/impl.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(SAN_ASAN) $(BASE) $(WARN) -c $< -o $@
$(BUILD)/asan/%: tests/%.c $(BUILD)/asan/impl.o $(TEST_DEPS)
	$(CC) $(SAN_ASAN) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/asan/impl.o -o $@ $(LIBS)

# The baseline reduction kernels (no AVX2/F16C copies) where the CPU would
# pick the AVX2 ones, at -O0: the kernels' unoptimised form, without their
# SPMD__FAST paths (the optimised builds run those, in the AVX2 copies), as
# every -O0 build of a user's has them (-DSPMD_NO_DISPATCH says it anyway).
# The implementation in the test's own file.
$(BUILD)/nodispatch/%: tests/%.c $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) -O0 -g $(BASE) $(WARN) -DSPMD_NO_DISPATCH $< -o $@ $(LIBS)

$(BUILD)/tsan/impl.o: tests/impl.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) -c $< -o $@
$(BUILD)/tsan/%: tests/%.c $(BUILD)/tsan/impl.o $(TEST_DEPS)
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/tsan/impl.o -o $@ $(LIBS)

# test_alloc reads the count of the library's allocations that tests/impl.c
# keeps: threads (plain, ASan+UBSan, TSan) here, processes as
# build/fabric/test_alloc (FABRIC_TESTS).
ALLOC_BUILDS := $(BUILD)/alloc/test_alloc $(BUILD)/alloc-asan/test_alloc $(BUILD)/alloc-tsan/test_alloc
$(BUILD)/alloc/test_alloc: tests/test_alloc.c $(BUILD)/plain/impl.o $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/plain/impl.o -o $@ $(LIBS)
$(BUILD)/alloc-asan/test_alloc: tests/test_alloc.c $(BUILD)/asan/impl.o $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(SAN_ASAN) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/asan/impl.o -o $@ $(LIBS)
$(BUILD)/alloc-tsan/test_alloc: tests/test_alloc.c $(BUILD)/tsan/impl.o $(TEST_DEPS)
	@mkdir -p $(@D)
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) $(LINKED) $< $(BUILD)/tsan/impl.o -o $@ $(LIBS)

# The fabric flavour: the libfabric backend compiled in (-DSPMDCOLL_LIBFABRIC, -lfabric).
$(BUILD)/fabric/impl.o: tests/impl.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC -c $< -o $@
$(FABRIC_CONF:%=$(BUILD)/fabric/%) $(FABRIC_ONCE:%=$(BUILD)/fabric/%) $(FABRIC_LINKED:%=$(BUILD)/fabric/%): $(BUILD)/fabric/%: tests/%.c $(BUILD)/fabric/impl.o $(TEST_DEPS) tests/proclib.h
	$(CC) $(CFLAGS) $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $(LINKED) $< $(BUILD)/fabric/impl.o -o $@ $(LIBS) $(FABRIC_LIBS)
# (at -O1: each compiles the whole implementation, a third faster than at -O2)
$(FABRIC_OWN:%=$(BUILD)/fabric/%): $(BUILD)/fabric/%: tests/%.c $(TEST_DEPS) tests/proclib.h
	@mkdir -p $(@D)
	$(CC) -O1 -g $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $< -o $@ $(LIBS) $(FABRIC_LIBS)

$(BUILD)/fabric-tsan/impl.o: tests/impl.c spmdcoll.h
	@mkdir -p $(@D)
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC -c $< -o $@
$(BUILD)/fabric-tsan/test_xfault: tests/test_xfault.c $(TEST_DEPS) tests/proclib.h
	@mkdir -p $(@D)
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $< -o $@ $(LIBS) $(FABRIC_LIBS)
$(BUILD)/fabric-tsan/%: tests/%.c $(BUILD)/fabric-tsan/impl.o $(TEST_DEPS) tests/proclib.h
	$(CC) $(SAN_TSAN) $(BASE) $(WARN) -DSPMDCOLL_LIBFABRIC $(LINKED) $< $(BUILD)/fabric-tsan/impl.o -o $@ $(LIBS) $(FABRIC_LIBS)

# How long the header's implementation takes to compile, as a user's file
# that defines SPMDCOLL_IMPLEMENTATION: -O0 and -O2, with and without the
# libfabric backend (median of 3; bench/compile_times.sh).
compile-times:
	@bash bench/compile_times.sh

# Fuzz targets (fuzz/<target>.c, clang's libFuzzer with ASan and UBSan), one per
# decoder of bytes from outside the process; make fuzz builds build/fuzz/*,
# sh tests/run.sh fuzz runs each briefly; fuzz/README says how to run longer.
FUZZ_TARGETS := boot xhdr lane spec env join seg recs shrink agree endpoint hostid
FUZZ_CC ?= clang
FUZZ_SAN := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# the library and every target compiled once (fuzz/all.c), each target's
# binary an entry point (fuzz/one.c) linked to it
$(BUILD)/fuzz/all.o: fuzz/all.c $(FUZZ_TARGETS:%=fuzz/%.c) fuzz/exact_alloc.h spmdcoll.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(BASE) $(WARN) -c $< -o $@
$(FUZZ_TARGETS:%=$(BUILD)/fuzz/%): $(BUILD)/fuzz/%: fuzz/one.c $(BUILD)/fuzz/all.o
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $(BASE) $(WARN) -DFUZZ_TARGET=spmd_fuzz_$* $< $(BUILD)/fuzz/all.o -o $@ $(LIBS) $(FABRIC_LIBS)
fuzz:
	@if [ "$(HAVE_FABRIC)" = 1 ] && command -v $(FUZZ_CC) >/dev/null 2>&1; then $(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%); \
	else echo "the fuzz targets need $(FUZZ_CC) and the libfabric headers (make deps)"; fi

demo: $(BUILD)/tour
	./$(BUILD)/tour

# Every test: the suite built plainly, under ASan+UBSan, under TSan, the
# compile matrix, and the examples; one closing line "N passed, N failed".
# The builds run in parallel (one job per CPU; JOBS=1 for one at a time).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	@t0=$$(date +%s); $(MAKE) --no-print-directory -j$(JOBS) test-build && \
	  echo "builds: $$(($$(date +%s) - t0)) s" && SPMD_TEST_T0=$$t0 sh tests/run.sh all
NODISPATCH := test_f16 test_reduce
# Every program make test builds (TEST_PROGRAMS; FABRIC_PROGRAMS with
# libfabric): tests/run.sh reads these lists and the ones above (make
# print-VAR) and fails a run of all that left one of them unrun.
TEST_PROGRAMS := $(TESTS:%=$(BUILD)/plain/%) $(TESTS:%=$(BUILD)/asan/%) $(TSAN_TESTS:%=$(BUILD)/tsan/%) \
                 $(EXAMPLES:%=$(BUILD)/ex/%) $(NODISPATCH:%=$(BUILD)/nodispatch/%) $(ALLOC_BUILDS) $(BUILD)/bench
FABRIC_PROGRAMS := $(FABRIC_TESTS:%=$(BUILD)/fabric/%) $(FABRIC_CONF:%=$(BUILD)/fabric/%) \
                   $(FABRIC_ONCE:%=$(BUILD)/fabric/%) $(FABRIC_TSAN:%=$(BUILD)/fabric-tsan/%) $(BUILD)/fabric-tsan/test_xfault
print-%:
	@echo $($*)
test-build: $(TEST_PROGRAMS)
	@$(MAKE) --no-print-directory fabric fuzz

test-plain: $(TESTS:%=$(BUILD)/plain/%)
	@sh tests/run.sh plain
test-asan: $(TESTS:%=$(BUILD)/asan/%)
	@sh tests/run.sh asan
test-tsan: $(TSAN_TESTS:%=$(BUILD)/tsan/%)
	@sh tests/run.sh tsan
test-compile:
	@sh tests/run.sh compile
# The documentation against the code: links, functions, variables, macros (tests/docs.sh).
test-docs:
	@sh tests/run.sh docs

# Builds the fabric flavour (the fabric tests and the conformance tests) when
# libfabric is installed; else says how to get it.
fabric:
	@if [ "$(HAVE_FABRIC)" = 1 ]; then $(MAKE) --no-print-directory $(FABRIC_PROGRAMS); \
	else echo "libfabric headers missing: the fabric tests will be skipped (make deps, or apt-get install libfabric-dev libfabric-bin)"; fi
test-fabric: fabric
	@sh tests/run.sh fabric

# The compile matrix needs g++ and clang, the fabric flavour libfabric-dev and
# libfabric-bin, the two-host test ip (iproute2), tests/cmake.sh cmake and
# pkg-config, the launch under mpirun (PMIx) openmpi-bin; installed here when we are root.
deps:
	@missing=""; \
	printf "#include <rdma/fabric.h>\n" | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing libfabric-dev libfabric-bin"; \
	command -v g++ >/dev/null 2>&1 || missing="$$missing g++"; \
	command -v clang >/dev/null 2>&1 || missing="$$missing clang"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	command -v valgrind >/dev/null 2>&1 || missing="$$missing valgrind"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v mpirun >/dev/null 2>&1 || missing="$$missing openmpi-bin"; \
	command -v clang >/dev/null 2>&1 && ! ls $$(clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1 && \
	  missing="$$missing libclang-rt-14-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing for the compile and fabric tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing) >/dev/null || \
	      { echo "make deps: installing$$missing failed (apt-get above)"; exit 1; }; \
	  else \
	    echo "the compile and fabric tests need:$$missing; install with: sudo apt-get install -y$$missing"; \
	  fi; \
	fi

bench: $(BUILD)/bench
	./$(BUILD)/bench -c all -d 2 -b 8 -e 256M
	./$(BUILD)/bench -d 8 -b 8 -e 1M
	./$(BUILD)/bench --overlap
	./$(BUILD)/bench --kernels
	bash bench/compare_mpi.sh -c all -d 2 -b 8 -e 64M

# SVG plots in build/plots: bus bandwidth and time per call against size for
# psum, all_gather and all_to_all, spmdcoll next to Open MPI (when installed)
# and the memcpy floor (bench/plot.sh; bench/plot.sh -s FILE plots time per
# call against devices per scheduler from a CSV), and time per call against
# devices 8..16384 per scheduler (bench/plot.sh -S: build/bench --scale --max 16384).
plots: $(BUILD)/bench
	bash bench/plot.sh -o $(BUILD)/plots
	bash bench/plot.sh -S -o $(BUILD)/plots

# The header, spmdcoll.pc and spmdcoll-fabric.pc (the libfabric backend:
# -DSPMDCOLL_LIBFABRIC, requires libfabric's own .pc) for pkg-config, and the
# package config for CMake's find_package(spmdcoll) (CMAKE_PREFIX_PATH=PREFIX);
# cmake --install of CMakeLists.txt installs the same files.
SPMD_VERSION = $(shell sed -n 's/^\#define SPMD_VERSION_STRING "\(.*\)"/\1/p' spmdcoll.h)
install:
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/lib/cmake/spmdcoll
	install -m 644 spmdcoll.h $(DESTDIR)$(PREFIX)/include/spmdcoll.h
	install -m 755 tools/spmdrun $(DESTDIR)$(PREFIX)/bin/spmdrun
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SPMD_VERSION)|' tools/spmdcoll.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spmdcoll.pc
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SPMD_VERSION)|' tools/spmdcoll-fabric.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/spmdcoll-fabric.pc
	install -m 644 tools/spmdcollConfig.cmake $(DESTDIR)$(PREFIX)/lib/cmake/spmdcoll/spmdcollConfig.cmake
	sed -e 's|@VERSION@|$(SPMD_VERSION)|' tools/spmdcollConfigVersion.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/spmdcoll/spmdcollConfigVersion.cmake

clean:
	rm -rf $(BUILD)
