#!/bin/sh
# The documentation against the repository (sh, awk, grep; cc for check 6):
#  1. every relative link of every markdown file (README.md, docs/*.md, ...)
#     resolves: the file or directory exists, and a #anchor names a heading
#     of the target markdown file by GitHub's rule (the heading's text
#     without markup, lower-cased, punctuation dropped, blanks turned into
#     '-', a repeated heading gaining -1, -2, ...) or an <a id/name="...">
#     (non-ASCII letters are kept but not lower-cased: a link to a heading
#     that starts with one fails here though GitHub would resolve it);
#  2. every function declared SPMD_API in spmdcoll.h is named in the
#     header's top comment (the manual, before #ifndef SPMDCOLL_H_INCLUDED);
#  3. every SPMD_* environment variable the header names in a string (what
#     it reads with getenv) is named in the top comment and in a table row
#     of README.md;
#  4. every configuration macro the header tests with #if/#ifdef is named in
#     the top comment;
#  5. every status of SPMD_STATUS_LIST is named in the top comment (which
#     says what to do about it);
#  6. the header's QUICK START and the README's first C program compile with
#     warnings as errors and run with exit status 0 (threads): each as C99
#     and as C++17, each as written and with <stdio.h> included before
#     everything (a C file's usual first line; C with -D_GNU_SOURCE then, as
#     the header's USAGE says; g++ defines it itself); in strict C99 that
#     order must stop at the header's #error that says what to do (its text
#     is read from the header);
#  7. the README's first program, unchanged, compiled with
#     -DSPMDCOLL_LIBFABRIC, runs as 2 processes (tools/spmdrun --provider
#     tcp), exits 0 and prints, without spmdrun's "[k] " prefixes, the lines
#     it prints on threads (sorted: devices print in any order). Skipped
#     without the libfabric headers.
# One check per link, function, variable, macro, program and build; each
# failure says what is missing where. Closing line "N passed, N failed",
# with ", N skipped" when a check could not run (each on stderr: "SKIP: ...").
#   sh tests/docs.sh [REPO_DIR]       (default: the directory above tests/)
# Environment: CC (default cc), CXX (default g++).
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
H=spmdcoll.h
tmp=${TMPDIR:-/tmp}/spmd-docs.$$
mkdir -p "$tmp" || exit 2
trap 'rm -rf "$tmp"' EXIT
P=0 F=0 S=0
pass() { P=$((P + 1)); }
fail() { F=$((F + 1)); echo "FAIL: $*" >&2; }
skip() { S=$((S + 1)); echo "SKIP: $*" >&2; }

# ---- 1. links ---------------------------------------------------------------
# The anchors of a markdown file, one a line (awk: fenced code is skipped).
anchors() {
    awk '
        /^[ \t]*(```|~~~)/ { fence = !fence; next }
        fence { next }
        {
            line = $0
            while (match(line, /<a[ \t]+(id|name)="[^"]*"/)) {
                a = substr(line, RSTART, RLENGTH); sub(/^[^"]*"/, "", a); sub(/"$/, "", a); print a
                line = substr(line, RSTART + RLENGTH)
            }
        }
        /^#+[ \t]/ {
            h = $0
            sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#*[ \t]*$/, "", h)
            gsub(/!?\[/, "", h); gsub(/\]\([^)]*\)/, "", h)     # a link keeps its text
            gsub(/<[^>]*>/, "", h)                                # inline HTML
            h = tolower(h)
            # common non-ASCII punctuation (UTF-8 bytes); other non-ASCII is kept as letters
            gsub(/\342\200\224|\342\200\223|\303\227|\342\206\222|\342\200\246|\302\267/, "", h)
            gsub(/[^a-z0-9_ \200-\377-]/, "", h)
            gsub(/ /, "-", h)
            if (h in seen) { n = seen[h]++; print h "-" n } else { seen[h] = 1; print h }
        }' "$1"
}

# The links of a markdown file: "line<TAB>target", outside fenced code and
# inline code spans; inline links/images [t](target "title"), reference
# definitions [t]: target, and HTML src="..." / href="...".
links() {
    awk '
        /^[ \t]*(```|~~~)/ { fence = !fence; next }
        fence { next }
        {
            line = $0
            gsub(/``[^`]*``/, "", line); gsub(/`[^`]*`/, "", line)
            if (match(line, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {
                t = line; sub(/^[ \t]*\[[^]]+\]:[ \t]+/, "", t); sub(/[ \t].*/, "", t); print NR "\t" t
                next
            }
            rest = line                                           # HTML: <img src="..."> <a href="...">
            while (match(rest, /(src|href)="[^"]*"/)) {
                t = substr(rest, RSTART, RLENGTH); sub(/^[a-z]*="/, "", t); sub(/"$/, "", t)
                rest = substr(rest, RSTART + RLENGTH)
                if (t != "") print NR "\t" t
            }
            while (match(line, /\]\([^)]*\)/)) {
                t = substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
                sub(/^[ \t]+/, "", t); sub(/[ \t]+"[^"]*"$/, "", t); sub(/^</, "", t); sub(/>$/, "", t)
                if (t != "") print NR "\t" t
            }
        }' "$1"
}

find . -name '*.md' -not -path './.git/*' -not -path './build/*' -not -path '*/node_modules/*' | sort >"$tmp/mdfiles"
nmd=0
while read -r md; do
    nmd=$((nmd + 1))
    dir=$(dirname "$md")
    links "$md" >"$tmp/links"
    while IFS="$(printf '\t')" read -r ln target; do
        case $target in
            [a-zA-Z]*:*) continue ;;   # a scheme (https:, mailto:): not a relative link
        esac
        path=${target%%#*}
        frag=
        case $target in *'#'*) frag=${target#*#} ;; esac
        path=${path%%\?*}
        if [ -z "$path" ]; then file=$md
        else
            case $path in /*) file=.$path ;; *) file=$dir/$path ;; esac
        fi
        if [ ! -e "$file" ]; then
            fail "$md:$ln: link to $target: $file does not exist"; continue
        fi
        if [ -n "$frag" ]; then
            case $file in
                *.md)
                    if anchors "$file" | grep -qxF -- "$frag"; then pass
                    else fail "$md:$ln: link to $target: no heading or anchor '#$frag' in $file"; fi ;;
                *) pass ;;             # an anchor into another kind of file: not checked
            esac
        else pass; fi
    done <"$tmp/links"
done <"$tmp/mdfiles"
echo "links: $nmd markdown files checked"

# ---- 2-4. the header's top comment, and the README's env table ----------------
sed -n '1,/^#ifndef SPMDCOLL_H_INCLUDED/p' $H >"$tmp/top"
if [ "$(wc -l <"$tmp/top")" -lt 10 ] || ! grep -q '^#ifndef SPMDCOLL_H_INCLUDED' "$tmp/top"; then
    fail "$H: no top comment before #ifndef SPMDCOLL_H_INCLUDED"
fi
sed -n '/^#ifndef SPMDCOLL_H_INCLUDED/,$p' $H >"$tmp/body"
# 2. functions
grep '^SPMD_API' "$tmp/body" | grep -o 'spmd_[a-z0-9_]*(' | tr -d '(' | sort -u >"$tmp/api"
[ -s "$tmp/api" ] || fail "$H: no SPMD_API declaration found"
for f in $(cat "$tmp/api"); do
    if grep -qw -- "$f" "$tmp/top"; then pass; else fail "$H: $f (SPMD_API) is not named in the top comment"; fi
done
echo "functions: $(wc -l <"$tmp/api") SPMD_API functions checked"
# 3. environment variables: SPMD_* names in strings, minus status names
grep -o '"SPMD_[A-Z0-9_]*"' "$tmp/body" | tr -d '"' | grep -v -e '^SPMD_OK$' -e '^SPMD_ERR_' | sort -u >"$tmp/env"
[ -s "$tmp/env" ] || fail "$H: no SPMD_* environment variable found"
grep '^|' README.md >"$tmp/rows"
for v in $(cat "$tmp/env"); do
    if grep -qw -- "$v" "$tmp/top"; then pass; else fail "$H: environment variable $v is not named in the top comment"; fi
    if grep -qw -- "$v" "$tmp/rows"; then pass; else fail "README.md: environment variable $v is not in a table"; fi
done
echo "environment: $(wc -l <"$tmp/env") variables checked"
# 5. statuses: every name of SPMD_STATUS_LIST, with what to do, in the top comment
grep -o 'X(SPMD_[A-Z_]*,' "$tmp/body" | sed 's/^X(//; s/,$//' | sort -u >"$tmp/statuses"
[ -s "$tmp/statuses" ] || fail "$H: no SPMD_STATUS_LIST entry found"
for st in $(cat "$tmp/statuses"); do
    if grep -qw -- "$st" "$tmp/top"; then pass; else fail "$H: status $st is not named in the top comment"; fi
done
echo "statuses: $(wc -l <"$tmp/statuses") statuses checked"
# 4. configuration macros tested by the preprocessor (not the include guards)
grep -E '^[ \t]*#[ \t]*(if|ifdef|ifndef|elif)' $H | grep -oE '\bSPMD[A-Z0-9_]*' | grep -v '^SPMD__' |
    grep -v -x -e SPMDCOLL_H_INCLUDED -e SPMDCOLL_IMPLEMENTATION_DONE | sort -u >"$tmp/macros"
for mac in $(cat "$tmp/macros"); do
    if grep -qw -- "$mac" "$tmp/top"; then pass; else fail "$H: configuration macro $mac is not named in the top comment"; fi
done
echo "macros: $(wc -l <"$tmp/macros") configuration macros checked"

# 6, 7. the programs the manual shows, built as a user would and run. Every
# build is a job writing $tmp/<job>.res ("pass" or "fail: why"); NJOBS lanes
# (background subshells) run them, job k in lane k mod NJOBS; the results
# are tallied in order at the end.
sed -n '/^   QUICK START$/,/^   CONCEPTS$/p' $H | sed '1d;$d' | sed 's/^     //' >"$tmp/quick.c"
awk '/^```c/ { p = 1; next } /^```/ { if (p) exit } p' README.md >"$tmp/readme.c"
CC=${CC:-cc} CXX=${CXX:-g++}
CFLAGS_DOC="-std=c99 -Wall -Wextra -Wpedantic -Werror -O0 -pthread -I."
CXXFLAGS_DOC="-std=c++17 -Wall -Wextra -Werror -O0 -pthread -I."
NJOBS=$(nproc 2>/dev/null || echo 2)
JOBS=""
TAB=$(printf '\t')
: >"$tmp/jobs"
job_add() { # $1 = job name, $2 = a function, $3.. its arguments (at most 3, no tabs)
    JOBS="$JOBS $1"
    echo "fail: the job did not run" >"$tmp/$1.res"
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${3:-}" "${4:-}" "${5:-}" >>"$tmp/jobs"
}
jobs_run() {
    lane=0 pids=""
    while [ $lane -lt "$NJOBS" ]; do
        ( k=0
          while IFS=$TAB read -r j fn a1 a2 a3; do
              [ $((k % NJOBS)) = $lane ] && "$fn" "$a1" "$a2" "$a3" >"$tmp/$j.res" 2>&1
              k=$((k + 1))
          done <"$tmp/jobs" ) &
        pids="$pids $!" lane=$((lane + 1))
    done
    wait $pids
}
# build_run SRC EXE "FLAGS": compile (as C++ when FLAGS name c++), run; the
# program's output in EXE.out; prints "pass" or "fail: ..."
build_run() {
    case $3 in *c++*) cc=$CXX lang="-x c++" ;; *) cc=$CC lang="-x c" ;; esac
    if ! $cc $3 $lang "$1" -x none -o "$2" 2>"$2.err"; then
        echo "fail: does not compile ($cc $3): $(head -n 3 "$2.err" | tr '\n' ' ')"; return
    fi
    timeout 60 "$2" >"$2.out" 2>"$2.err"; rc=$?
    if [ $rc = 0 ]; then echo pass
    else echo "fail: exits with status $rc ($cc $3): $(head -n 3 "$2.err" | tr '\n' ' ')"; fi
}
# strict_error SRC: strict C99 with <stdio.h> first must stop at the header's
# #error (the first error the compiler reports is that text)
strict_error() {
    out=$($CC -std=c99 -pthread -I. -fsyntax-only "$1" 2>&1); rc=$?
    first=$(printf '%s\n' "$out" | grep -m 1 'error')
    if [ $rc = 0 ]; then echo "fail: compiles in strict C99 with <stdio.h> first: the header's #error did not fire"
    else case $first in
        *"$posix_error"*) echo pass ;;
        *) echo "fail: in strict C99 with <stdio.h> first the first error is not the header's #error: $first" ;;
    esac; fi
}
# across_processes EXE: the README's program as 2 processes over tcp prints
# what it printed on threads (the C99 build's output, compared at the tally)
across_processes() {
    if ! $CC $CFLAGS_DOC -DSPMDCOLL_LIBFABRIC "$tmp/readme.c" -o "$1" -lfabric 2>"$1.err"; then
        echo "fail: does not compile with -DSPMDCOLL_LIBFABRIC: $(head -n 3 "$1.err" | tr '\n' ' ')"; return
    fi
    tools/spmdrun -n 2 --provider tcp --timeout 60 -- "$1" >"$1.out" 2>"$1.err"; rc=$?
    if [ $rc = 0 ]; then echo pass
    else echo "fail: tools/spmdrun -n 2 --provider tcp exits with status $rc: $(head -n 3 "$1.err" | tr '\n' ' ')"; fi
}

posix_error=$(sed -n 's/^[ \t]*#[ \t]*error[ \t]*"\(.*_GNU_SOURCE.*\)"[ \t]*$/\1/p' $H | head -n 1)
[ -n "$posix_error" ] || fail "$H: no #error naming _GNU_SOURCE (what strict ISO C with a system header first must be told)"
have_cxx=1
command -v "$CXX" >/dev/null 2>&1 || have_cxx=0
for prog in quick readme; do
    where=$H; [ $prog = readme ] && where=README.md
    if [ ! -s "$tmp/$prog.c" ]; then fail "$where: its program was not found"; continue; fi
    { echo '#include <stdio.h>'; cat "$tmp/$prog.c"; } >"$tmp/$prog-stdio.c"
    # C++: desc{} for = {0} (g++ -Wextra warns of the missing initializers;
    # the README and the header say "C++: desc{}")
    if [ "$(grep -c 'spmd_mesh_desc desc = {0};' "$tmp/$prog.c")" != 1 ]; then
        fail "$where: its program has no 'spmd_mesh_desc desc = {0};' to make 'desc{}' for C++"
    else
        for v in "" -stdio; do
            sed 's/spmd_mesh_desc desc = {0};/spmd_mesh_desc desc{};/' "$tmp/$prog$v.c" >"$tmp/$prog$v.cpp.src"
        done
    fi
    job_add $prog-c99 build_run "$tmp/$prog.c" "$tmp/$prog-c99" "$CFLAGS_DOC"
    job_add $prog-c99-stdio build_run "$tmp/$prog-stdio.c" "$tmp/$prog-c99-stdio" "$CFLAGS_DOC -D_GNU_SOURCE"
    [ -n "$posix_error" ] && job_add $prog-c99-stdio-strict strict_error "$tmp/$prog-stdio.c"
    for v in "" -stdio; do
        if [ $have_cxx = 0 ]; then skip "$where: its program, C++17${v:+ with <stdio.h> first}: $CXX not installed"
        elif [ -f "$tmp/$prog$v.cpp.src" ]; then
            job_add $prog-cxx17$v build_run "$tmp/$prog$v.cpp.src" "$tmp/$prog-cxx17$v" "$CXXFLAGS_DOC"
        fi
    done
done
have_fabric=0
printf '#include <rdma/fabric.h>\n' | $CC -E -x c - >/dev/null 2>&1 && have_fabric=1
if [ $have_fabric = 0 ]; then skip "README.md: its program as 2 processes: no libfabric headers (apt-get install libfabric-dev)"
elif [ -s "$tmp/readme.c" ]; then job_add readme-fabric across_processes "$tmp/readme-fabric"
fi
jobs_run
for j in $JOBS; do
    res=$(cat "$tmp/$j.res")
    case $j in quick*) where=$H ;; *) where=README.md ;; esac
    case $j in
        *-c99) what="its program, C99" ;;
        *-c99-stdio) what="its program, C99 with <stdio.h> first and -D_GNU_SOURCE" ;;
        *-c99-stdio-strict) what="its program, strict C99 with <stdio.h> first" ;;
        *-cxx17) what="its program, C++17" ;;
        *-cxx17-stdio) what="its program, C++17 with <stdio.h> first" ;;
        readme-fabric) what="its program as 2 processes (libfabric, tcp)" ;;
        *) what=$j ;;
    esac
    if [ "$res" != pass ]; then fail "$where: $what: ${res#fail: }"; continue; fi
    if [ $j = readme-fabric ]; then # the same lines as on threads
        sed 's/^\[[0-9]*\] //' "$tmp/readme-fabric.out" | sort >"$tmp/fabric.sorted"
        sort "$tmp/readme-c99.out" >"$tmp/threads.sorted" 2>/dev/null
        if [ ! -s "$tmp/fabric.sorted" ] || ! cmp -s "$tmp/fabric.sorted" "$tmp/threads.sorted"; then
            fail "$where: $what: its output is not the lines it prints on threads: $(diff "$tmp/threads.sorted" "$tmp/fabric.sorted" | sed -n '2,4p' | tr '\n' ' ')"
            continue
        fi
    fi
    pass
done
echo "programs: the QUICK START and the README's first program: $(echo $JOBS | wc -w) builds checked"

if [ $S -gt 0 ]; then echo "$P passed, $F failed, $S skipped"; else echo "$P passed, $F failed"; fi
[ $F = 0 ]
