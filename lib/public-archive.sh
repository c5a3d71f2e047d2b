#!/bin/sh
# Makes the installed libjobcg.a from the in-tree archive: every object linked into one (ld -r)
# and every symbol not marked JOBCG_EXPORT made local, so a program or plugin that links it sees
# only jobcg_* names and none of the library's internal helpers (cgfs_*, conf_*, ...) that could
# clash with its own. The in-tree archive keeps them global for the unit tests.
# Usage: public-archive.sh AR OBJCOPY IN.a OUT.a CC... (the C compiler's whole command line)
set -eu
ar=$1 objcopy=$2 in=$3 out=$4
shift 4
tmp="$out.tmp.o"
trap 'rm -f "$tmp"' EXIT
"$@" -r -nostdlib -o "$tmp" -Wl,--whole-archive "$in" -Wl,--no-whole-archive
"$objcopy" --localize-hidden "$tmp"
rm -f "$out"
"$ar" rcs "$out" "$tmp"
