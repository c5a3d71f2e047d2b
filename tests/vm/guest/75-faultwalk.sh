# vmtest-timeout: 420
# Every change of a job's creation and of a step's, with the limits only this guest enforces
# (cpuset, memory, pids: controllers enabled in the job, limits written), made to fail in turn
# (JOBCG_TEST_FAIL_AT, lib/src/base/testhook.h; through the share's bin-hooks/jobcg, the same
# jobcg built with the test hooks, which the one on PATH, as installed, has not): a failed
# alloc leaves no job and the tree's controllers as they were; a failed step leaves its job as
# it was. The host's tests/kernel/test-fault-walk.py walks the rest without controllers.
. "$VMT_GUEST/lib.sh"
cg=/sys/fs/cgroup/system.slice/jobcg.scope
log=$VMT_TMP/faultwalk.log
hooked=$VMT_SHARE/bin-hooks/jobcg
jobcg init > /dev/null 2>&1
check "a jobcg with the test hooks is in the share ($hooked)" test -x "$hooked"

state() {
	echo "tree: $(cd "$cg" && find . -mindepth 1 -type d -path './job_8[01]*' | sort | tr '\n' ' ')"
	echo "root: $(cat "$cg/cgroup.subtree_control")"
	[ -d "$cg/job_81" ] && echo "job_81: $(cat "$cg/job_81/cgroup.subtree_control")" \
		"cpus $(cat "$cg/job_81/cpuset.cpus") mem $(cat "$cg/job_81/memory.max")" \
		"pids $(cat "$cg/job_81/pids.max")"
}

# failing N ARGS...: jobcg ARGS with its Nth change failing; $rc, $out, and $what (empty when
# the command made fewer than N changes).
failing() {
	n=$1
	shift
	rm -f "$log"
	out=$(JOBCG_TEST_FAIL_AT=$n JOBCG_TEST_FAIL_LOG=$log "$hooked" "$@" 2>&1)
	rc=$?
	what=$(head -n 1 "$log" 2>/dev/null | cut -d' ' -f2-)
}

# --- a job's creation with every limit ---
before=$(state)
diag "$before"
n=1
while [ $n -le 80 ]; do
	failing $n alloc 80 --cpus 0 --mem 64M --pids 64
	[ -z "$what" ] && break
	if [ $rc -ne 0 ]; then
		is "alloc failing at change $n ($what) leaves no job and the tree as it was ($out)" \
			"$(state)" "$before"
	else
		# An optional change (the key index): the job is whole, with its limits.
		like "alloc with change $n failing ($what) made a whole job" \
			"$(cat "$cg/job_80/memory.max" 2>&1) $(cat "$cg/job_80/cpuset.cpus" 2>&1)" \
			"^67108864 0$"
		jobcg release 80 > /dev/null 2>&1
	fi
	n=$((n + 1))
done
# (a jobcg without test hooks fails nothing: the walk would prove nothing)
check "the walk made some of alloc's changes fail" test $n -gt 1
is "alloc 80 with no change failing works ($((n - 1)) changes; $out)" "$rc" 0
diag "a job with --cpus, --mem and --pids: $((n - 1)) changes"
like "...with its limits" "$(cat "$cg/job_80/memory.max") $(cat "$cg/job_80/pids.max")" \
	"^67108864 64$"
jobcg release 80 > /dev/null 2>&1

# --- a step with limits of its own, in a job with limits ---
if jobcg alloc 81 --cpus 0-1 --mem 128M > /dev/null 2>&1; then
	before=$(state)
	diag "$before"
	n=1
	while [ $n -le 80 ]; do
		failing $n run --job 81 --cpus 1 --mem 32M -- true
		[ -z "$what" ] && break
		jobcg gc > /dev/null 2>&1
		if [ $rc -ne 0 ]; then
			is "a step failing at change $n ($what) leaves job 81 as it was, once gc ran ($out)" \
				"$(state)" "$before"
		else
			is "a step with change $n failing ($what) ran, and left job 81 as it was" \
				"$(state)" "$before"
		fi
		n=$((n + 1))
	done
	check "the walk made some of the step's changes fail" test $n -gt 1
	is "a step with no change failing works ($((n - 1)) changes; $out)" "$rc" 0
	diag "a step with --cpus and --mem: $((n - 1)) changes"
	jobcg release 81 > /dev/null 2>&1
else
	not_ok "jobcg alloc 81 --cpus 0-1 --mem 128M for the step walk"
fi
done_testing
