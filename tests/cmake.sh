#!/bin/sh
# spmdcoll as a CMake or pkg-config user takes it, in a temporary directory:
# the consumer in tests/cmake (a 2-device mesh, one psum checked against
# 1 + 2) built at -O0
#   - through add_subdirectory of this repository;
#   - through find_package after make install DESTDIR=... PREFIX=/usr (the
#     package config finds the header relative to itself), with the version
#     read from spmdcoll.h: find_package(spmdcoll 999) refused;
#   - cmake --install of CMakeLists.txt installs the same files as make install;
#   - through pkg-config --cflags --libs spmdcoll and a plain cc, after make
#     install PREFIX=<tmp>.
# Each way also builds the libfabric variant (spmdcoll::spmdcoll_fabric; for
# pkg-config: spmdcoll-fabric, whose Cflags define SPMDCOLL_LIBFABRIC and which
# requires libfabric) when libfabric is installed, and runs it as two processes
# under tools/spmdrun. A missing cmake, pkg-config or libfabric skips its
# checks (reasons on stderr).
# Closing line: "N passed, N failed[, N skipped]"; exits non-zero on failure.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' INT TERM
P=0 F=0 S=0
version=$(sed -n 's/^#define SPMD_VERSION_STRING "\(.*\)"$/\1/p' "$root/spmdcoll.h")
CC=${CC:-cc}

pass() { P=$((P + 1)); echo "ok: $1"; }
fail() { # $1 = what, $2 = a log to show
    F=$((F + 1)); echo "FAIL: $1" >&2
    [ -n "${2:-}" ] && [ -f "$2" ] && tail -n 25 "$2" | sed 's/^/    /' >&2
}
skip() { S=$((S + 1)); echo "SKIP: $1" >&2; }
# expect NAME LOG EXPECTED COMMAND...: the command succeeds and its output
# (in LOG) has each line of EXPECTED (lines joined by '|')
expect() {
    e_name=$1 e_log=$2 e_rest=$3
    shift 3
    if ! "$@" >"$e_log" 2>&1; then fail "$e_name (exit status $?)" "$e_log"; return; fi
    while [ -n "$e_rest" ]; do
        e_line=${e_rest%%|*}
        [ "$e_line" = "$e_rest" ] && e_rest="" || e_rest=${e_rest#*|}
        if ! grep -qxF "$e_line" "$e_log"; then fail "$e_name (expected the line '$e_line')" "$e_log"; return; fi
    done
    pass "$e_name"
}
run_fabric() { "$root/tools/spmdrun" -n 2 --timeout 60 -- "$1"; }

have_fabric=0
printf '#include <rdma/fabric.h>\n' | $CC -E -x c - >/dev/null 2>&1 && have_fabric=1
[ $have_fabric = 1 ] || skip "libfabric headers missing: the libfabric variants are not built (apt-get install libfabric-dev)"
plain_out="psum ok on threads, spmdcoll $version"
fabric_out="[0] psum ok on libfabric, spmdcoll $version|[1] psum ok on libfabric, spmdcoll $version"

# consumer BUILDDIR NAME CMAKE-ARGS...: configure and build tests/cmake,
# run the consumer and its libfabric variant
consumer() {
    dir=$1 name=$2
    shift 2
    if ! cmake -S "$root/tests/cmake" -B "$dir" -DCMAKE_BUILD_TYPE= -DCMAKE_C_FLAGS=-O0 "$@" >"$dir.log" 2>&1 ||
       ! cmake --build "$dir" -j 2 >>"$dir.log" 2>&1; then
        fail "$name: configure and build" "$dir.log"; return 1
    fi
    expect "$name: spmdcoll::spmdcoll" "$dir.run" "$plain_out" "$dir/consumer"
    if [ $have_fabric = 1 ]; then
        if [ -x "$dir/consumer_fabric" ]; then
            expect "$name: spmdcoll::spmdcoll_fabric, 2 processes" "$dir.runf" "$fabric_out" \
                run_fabric "$dir/consumer_fabric"
        else
            fail "$name: libfabric is installed but spmdcoll::spmdcoll_fabric was not defined" "$dir.log"
        fi
    fi
    return 0
}

if ! command -v cmake >/dev/null 2>&1; then
    skip "cmake not installed: add_subdirectory, find_package and cmake --install not checked (apt-get install cmake)"
else
    consumer "$tmp/sub" "add_subdirectory" -DSPMDCOLL_SOURCE_DIR="$root"

    if make -s -C "$root" install DESTDIR="$tmp/dest" PREFIX=/usr >"$tmp/install.log" 2>&1; then
        if consumer "$tmp/pkg" "find_package" -DWANT="$version" -DCMAKE_PREFIX_PATH="$tmp/dest/usr"; then
            if grep -qF "found spmdcoll $version in $tmp/dest/usr/lib/cmake/spmdcoll" "$tmp/pkg.log"; then
                pass "find_package: version $version from spmdcoll.h, 999 refused"
            else
                fail "find_package: no 'found spmdcoll $version in $tmp/dest/usr/lib/cmake/spmdcoll'" "$tmp/pkg.log"
            fi
        fi
        # cmake --install: the same files, the same bytes
        if cmake -S "$root" -B "$tmp/self" >"$tmp/self.log" 2>&1 &&
           DESTDIR="$tmp/cdest" cmake --install "$tmp/self" --prefix /usr >>"$tmp/self.log" 2>&1 &&
           diff -r "$tmp/dest" "$tmp/cdest" >>"$tmp/self.log" 2>&1; then
            pass "cmake --install installs what make install does"
        else
            fail "cmake --install against make install (diff -r)" "$tmp/self.log"
        fi
    else
        fail "make install DESTDIR=... PREFIX=/usr" "$tmp/install.log"
    fi
fi

if ! command -v pkg-config >/dev/null 2>&1; then
    skip "pkg-config not installed: spmdcoll.pc not checked (apt-get install pkg-config)"
elif ! make -s -C "$root" install PREFIX="$tmp/prefix" >"$tmp/install2.log" 2>&1; then
    fail "make install PREFIX=$tmp/prefix" "$tmp/install2.log"
else
    export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
    expect "pkg-config: version" "$tmp/pc.log" "$version" pkg-config --modversion spmdcoll
    # the header comes from the install only: the consumer sits in $tmp
    cp "$root/tests/cmake/consumer.c" "$tmp/consumer.c"
    if $CC -O0 "$tmp/consumer.c" -o "$tmp/pc" $(pkg-config --cflags --libs spmdcoll) >"$tmp/pc.log" 2>&1; then
        expect "pkg-config: cc \$(pkg-config --cflags --libs spmdcoll)" "$tmp/pc.run" "$plain_out" "$tmp/pc"
    else
        fail "pkg-config: cc \$(pkg-config --cflags --libs spmdcoll)" "$tmp/pc.log"
    fi
    # the libfabric variant: nothing on the command line but what spmdcoll-fabric.pc gives
    if [ $have_fabric = 1 ] && ! pkg-config --exists libfabric; then
        skip "libfabric has no pkg-config file (libfabric.pc): spmdcoll-fabric.pc, which requires it, not checked"
    elif [ $have_fabric = 1 ]; then
        expect "pkg-config: spmdcoll-fabric version" "$tmp/pcf.ver" "$version" pkg-config --modversion spmdcoll-fabric
        if $CC -O0 "$tmp/consumer.c" -o "$tmp/pcf" $(pkg-config --cflags --libs spmdcoll-fabric) >"$tmp/pcf.log" 2>&1; then
            expect "pkg-config: cc \$(pkg-config --cflags --libs spmdcoll-fabric), 2 processes" "$tmp/pcf.run" "$fabric_out" \
                run_fabric "$tmp/pcf"
        else
            fail "pkg-config: cc \$(pkg-config --cflags --libs spmdcoll-fabric)" "$tmp/pcf.log"
        fi
    fi
fi

if [ $S -gt 0 ]; then echo "$P passed, $F failed, $S skipped"; else echo "$P passed, $F failed"; fi
[ $F = 0 ]
