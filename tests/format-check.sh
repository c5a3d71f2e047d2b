#!/bin/sh
# Checks that every tracked C source follows .clang-format (TAP, one line per file).
cd "${JOBCG_SOURCE_ROOT:?}" || exit 1
if ! command -v clang-format >/dev/null 2>&1; then
	echo "1..0 # SKIP clang-format is not installed"
	exit 77
fi
n=0 bad=0
for f in $(git ls-files '*.c' '*.h'); do
	n=$((n + 1))
	if clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "ok $n - $f is formatted"
	else
		echo "not ok $n - $f differs from .clang-format (run: clang-format -i $f)"
		bad=$((bad + 1))
	fi
done
echo "1..$n"
[ "$bad" = 0 ]
