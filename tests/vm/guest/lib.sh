# Sourced by every in-guest test script: TAP lines without numbers (the runner numbers them),
# and small helpers. Each check names what it proves; a skip names what is missing.
vmt_fail=0

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; vmt_fail=1; }
diag() { echo "$*" | sed 's/^/# /'; }
# check DESC CMD...: ok when CMD succeeds; on failure its output becomes diagnostics.
check() {
	_d=$1; shift
	if _o=$("$@" 2>&1); then ok "$_d"; return 0; fi
	not_ok "$_d"; diag "command: $*"; diag "$_o"; return 1
}
# is DESC GOT WANT
is() {
	if [ "$2" = "$3" ]; then ok "$1"; return 0; fi
	not_ok "$1"; diag "got:  '$2'"; diag "want: '$3'"; return 1
}
# like DESC TEXT PATTERN (grep -E)
like() {
	if printf '%s\n' "$2" | grep -qE -- "$3"; then ok "$1"; return 0; fi
	not_ok "$1"; diag "no match for /$3/ in:"; diag "$2"; return 1
}
# skip DESC REASON: a skip is a failure where the feature must work (CI: JOBCG_MUST_WORK=1).
skip() {
	if [ "${JOBCG_MUST_WORK:-0}" = 1 ]; then not_ok "$1 (JOBCG_MUST_WORK: skipped: $2)"
	else echo "ok - $1 # SKIP $2"; fi
}
done_testing() { exit $vmt_fail; }
