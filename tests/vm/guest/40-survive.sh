# systemd leaves a delegated tree alone: daemon-reload, reset-failed and restarting unrelated
# units keep jobcg's controllers, limits and device programs (the failure other tools hit).
. "$VMT_GUEST/lib.sh"
cg=/sys/fs/cgroup/system.slice/jobcg.scope
jobcg init > /dev/null 2>&1
out=$(jobcg alloc 7 --cpus 1 --mem 100M --pids 50 2>&1); rc=$?
is "a job with limits is allocated ($out)" "$rc" 0
jobcg run --job 7 --step extern -- sleep 600 > /dev/null 2>&1 &
runner=$!
sleep 2

snapshot() {
	for f in "$cg/cgroup.subtree_control" "$cg/job_7/cgroup.subtree_control" \
		"$cg/job_7/cpuset.cpus" "$cg/job_7/memory.max" "$cg/job_7/pids.max"; do
		echo "$f: $(cat "$f" 2>&1)"
	done
	echo "system.slice: $(cat /sys/fs/cgroup/system.slice/cgroup.subtree_control)"
	echo "devices: $(bpftool cgroup show "$cg/job_7" 2>&1 | tail -n +2 | awk '{print $2, $3}' | sort | tr '\n' ' ')"
	echo "procs: $(cat "$cg"/job_7/step_extern/user/*/cgroup.procs 2>/dev/null | wc -l)"
}
before=$(snapshot)
diag "$before"
like "the job's controllers are enabled before" "$before" "job_7/cgroup.subtree_control: .*memory"
like "the job's memory.max is set before" "$before" "memory.max: 104857600"

for action in "daemon-reload" "reset-failed" "restart systemd-journald.service" "restart systemd-logind.service systemd-udevd.service"; do
	# shellcheck disable=SC2086
	systemctl $action > /dev/null 2>&1
	sleep 1
	is "after systemctl $action, controllers, limits, devices and processes are unchanged" "$(snapshot)" "$before"
done
is "jobcg.scope is still active" "$(systemctl show -P ActiveState jobcg.scope)" active
is "...and delegated" "$(systemctl show -P Delegate jobcg.scope)" yes

kill "$runner" 2>/dev/null
jobcg release 7 > /dev/null 2>&1
check "the job is released" test ! -e "$cg/job_7"
done_testing
