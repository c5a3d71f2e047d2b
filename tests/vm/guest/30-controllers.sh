# Every controller jobcg sets is enforced on a real systemd + cgroup v2 host. Each check runs
# once with the limit and once without, so a limit that is silently not applied fails.
. "$VMT_GUEST/lib.sh"
if ! has_cmd run; then
	skip "controller tests" "this jobcg has no 'run' command yet"
	done_testing
fi
jobcg init > /dev/null 2>&1

# --- cpuset: a task sees only its CPUs ---
free=$(jobcg run -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}')
is "without --cpus a task may run on every CPU" "$free" "0-1"
pinned=$(jobcg run --cpus 1 -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}')
is "with --cpus 1 the task sees only CPU 1 (Cpus_allowed_list)" "$pinned" "1"
nproc_in=$(jobcg run --cpus 0 -- nproc)
is "...and nproc inside says 1" "$nproc_in" 1

# --- memory.max: a step over its limit is OOM-killed, and jobcg says so ---
out=$(jobcg run -- vmt-memhog 160 2>&1); rc=$?
is "without --mem a 160 MiB step completes" "$rc" 0
out=$(jobcg run --mem 64M --acct --json -- vmt-memhog 160 2>&1); rc=$?
diag "$out"
is "with --mem 64M the same step is killed (SIGKILL: 137)" "$rc" 137
like "...after touching less than its limit" "$(echo "$out" | grep touched | tail -n1)" "touched ([0-9]|[1-5][0-9]|6[0-4]) MiB"
like "...and the accounting counts an OOM kill" "$out" '"oom_kill": *[1-9]'
like "...and jobcg reports OUT_OF_MEMORY for the step" "$out" '"state": *"OUT_OF_MEMORY"'
like "...caused by the job's own limit" "$out" '"oom": *"job"'
like "...and the job too" "$out" '"job_state": *"OUT_OF_MEMORY"'

# An OOM from outside the job (here a limit above it, on jobcg.scope, as when the node runs
# out) is told apart from the job's own: the job has no limit and none of its own was hit.
systemctl set-property --runtime jobcg.scope MemoryMax=96M
out=$(jobcg run --acct --json -- vmt-memhog 160 2>&1); rc=$?
systemctl set-property --runtime jobcg.scope MemoryMax=infinity
is "a step is OOM-killed by a limit outside its job" "$rc" 137
like "...reported as OUT_OF_MEMORY" "$out" '"state": *"OUT_OF_MEMORY"'
like "...caused outside the job ('node'), not by the job's limit" "$out" '"oom": *"node"'

# --- pids.max: a fork bomb is contained, then killed with its step ---
out=$(jobcg run -- vmt-forkbomb 300 2>&1)
like "without --pids the (capped) bomb reaches its cap of 300 forks" "$out" "forks=300 eagain=0"
out=$(jobcg run --pids 32 -- vmt-forkbomb 5000 --leave 2>&1); rc=$?
diag "$out"
n=$(echo "$out" | sed -n 's/.*forks=\([0-9]*\).*/\1/p')
check "with --pids 32 the bomb is stopped below 32 processes (forks=$n)" test "${n:-999}" -lt 32
like "...by fork() failing with EAGAIN" "$out" "eagain=[1-9]"
sleep 1
is "...and nothing of it survives the step" "$(pgrep -c vmt-forkbomb)" 0

# --- memory.high, swap, cpu weight: only where jobcg sets them ---
if has_opt run --mem-high; then
	out=$(jobcg run --mem-high 48M --acct --json -- vmt-memhog 96 2>&1); rc=$?
	like "memory.high throttles and reclaims (high events counted)" "$out" '"high": *[1-9]'
else
	skip "memory.high is enforced" "jobcg run has no memory.high option"
fi
if has_opt run --swap; then
	fallocate -l 256M /swapfile && chmod 600 /swapfile && mkswap -q /swapfile && swapon /swapfile
	out=$(jobcg run --mem 64M --swap 0 -- vmt-memhog 128 2>&1); rc=$?
	is "with no swap allowed, 128 MiB over a 64M limit is OOM-killed" "$rc" 137
	out=$(jobcg run --mem 64M --swap 128M -- vmt-memhog 128 2>&1); rc=$?
	is "with 128M of swap allowed the same step completes" "$rc" 0
	swapoff /swapfile; rm -f /swapfile
else
	skip "swap limits are enforced" "jobcg run has no swap option"
fi
if has_opt run --cpu-weight; then
	ok "cpu weight option present (test not written)"
else
	skip "cpu.weight is enforced" "jobcg sets no cpu.weight"
fi
done_testing
