#!/bin/sh
# Makes the installed libjobcg.a from the in-tree archive: every object linked into one (ld -r)
# and every symbol not marked JOBCG_EXPORT made local, so a program or plugin that links it sees
# only jobcg_* names and none of the library's internal helpers (cgfs_*, conf_*, ...) that could
# clash with its own. The in-tree archive keeps them global for the unit tests.
# Usage: public-archive.sh CC AR OBJCOPY IN.a OUT.a
set -eu
cc=$1 ar=$2 objcopy=$3 in=$4 out=$5
tmp="$out.tmp.o"
trap 'rm -f "$tmp"' EXIT
# shellcheck disable=SC2086 # $cc may be a command with arguments (ccache cc)
$cc -r -nostdlib -o "$tmp" -Wl,--whole-archive "$in" -Wl,--no-whole-archive
"$objcopy" --localize-hidden "$tmp"
rm -f "$out"
"$ar" rcs "$out" "$tmp"
