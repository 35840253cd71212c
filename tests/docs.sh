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
#  6. the header's QUICK START and the README's first C program compile as
#     C99 with warnings as errors, and run with exit status 0.
# One check per link, function, variable and macro; each failure says what
# is missing where. Closing line "N passed, N failed".
#   sh tests/docs.sh [REPO_DIR]       (default: the directory above tests/)
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
H=spmdcoll.h
tmp=${TMPDIR:-/tmp}/spmd-docs.$$
mkdir -p "$tmp" || exit 2
trap 'rm -rf "$tmp"' EXIT
P=0 F=0
pass() { P=$((P + 1)); }
fail() { F=$((F + 1)); echo "FAIL: $*" >&2; }

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

# 6. the programs the manual shows compile (C99, warnings as errors) and run:
#    the header's QUICK START and README.md's first C block
sed -n '/^   QUICK START$/,/^   CONCEPTS$/p' $H | sed '1d;$d' | sed 's/^     //' >"$tmp/quick.c"
awk '/^```c/ { p = 1; next } /^```/ { if (p) exit } p' README.md >"$tmp/readme.c"
for prog in quick readme; do
    where=$H; [ $prog = readme ] && where=README.md
    if [ ! -s "$tmp/$prog.c" ]; then fail "$where: its program was not found"; continue; fi
    if ! ${CC:-cc} -std=c99 -Wall -Wextra -Wpedantic -Werror -O0 -pthread -I. "$tmp/$prog.c" -o "$tmp/$prog" \
            2>"$tmp/$prog.err"; then
        fail "$where: its program does not compile: $(head -n 3 "$tmp/$prog.err" | tr '\n' ' ')"
    else
        timeout 60 "$tmp/$prog" >"$tmp/$prog.out" 2>&1; rc=$?
        if [ $rc = 0 ]; then pass
        else fail "$where: its program exits with status $rc: $(head -n 3 "$tmp/$prog.out" | tr '\n' ' ')"; fi
    fi
done
echo "programs: the QUICK START and the README's first program checked"

echo "$P passed, $F failed"
[ $F = 0 ]
