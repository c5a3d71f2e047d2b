# Every controller jobcg sets is enforced on a real systemd + cgroup v2 host. Each check runs
# once with the limit and once without, so a limit that is silently not applied fails.
. "$VMT_GUEST/lib.sh"
jobcg init > /dev/null 2>&1

# --- cpuset: a task sees only its CPUs ---
free=$(jobcg run -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}')
is "without --cpus a task may run on every CPU" "$free" "$(cat /sys/devices/system/cpu/online)"
pinned=$(jobcg run --cpus 1 -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}')
is "with --cpus 1 the task sees only CPU 1 (Cpus_allowed_list)" "$pinned" "1"
nproc_in=$(jobcg run --cpus 0 -- nproc)
is "...and nproc inside says 1" "$nproc_in" 1

# --- a step's own --cpus/--mem inside an allocated job: a subset of the job's, never more ---
if jobcg alloc 61 --cpus 0-1 --mem 200M > /dev/null && jobcg alloc 62 --cpus 1 > /dev/null; then
	# The task reads its own step cgroup (task_0 -> user -> step).
	stepcg='cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/../..; grep Cpus_allowed_list /proc/self/status; echo "max=$(cat $cg/memory.max) high=$(cat $cg/memory.high) cpus=$(cat $cg/cpuset.cpus)"; jobcg show 61.5'
	out=$(jobcg run --job 61 --step 5 --cpus 1 --mem 100M -- sh -c "$stepcg" 2>&1); rc=$?
	diag "$out"
	is "a step with --cpus 1 --mem 100M runs in job 61 (--cpus 0-1 --mem 200M)" "$rc" 0
	like "...its task sees only CPU 1 (Cpus_allowed_list)" "$out" "Cpus_allowed_list:[[:space:]]+1$"
	like "...its step cgroup's memory.max is what was asked (100M)" "$out" "max=104857600 high=104857600 cpus=1$"
	like "...and jobcg show reports the step's limits" "$out" "mem: 104857600 bytes"
	out=$(jobcg run --job 61 -- sh -c 'grep Cpus_allowed_list /proc/self/status' 2>&1)
	like "a step without --cpus gets all of its job's CPUs" "$out" "Cpus_allowed_list:[[:space:]]+0-1$"
	out=$(jobcg run --job 62 --cpus 0-1 -- true 2>&1); rc=$?
	is "a step asking --cpus 0-1 in a job of CPU 1 only is refused (usage error)" "$rc" 2
	like "...naming the option and the job's CPUs" "$out" "--cpus 0-1: not a subset of job 62's CPUs \\(1\\)"
	is "...and no step was made" "$(ls -d /sys/fs/cgroup/system.slice/jobcg.scope/job_62/step_* 2>/dev/null | wc -l)" 0
	out=$(jobcg run --job 61 --mem 300M -- true 2>&1); rc=$?
	is "a step asking --mem 300M in a job of 200M is refused" "$rc" 2
	like "...naming the option and the job's memory" "$out" "--mem 314572800 bytes: more than job 61 has"
	is "...and job 61 has no step left" "$(ls -d /sys/fs/cgroup/system.slice/jobcg.scope/job_61/step_* 2>/dev/null | wc -l)" 0
else
	not_ok "jobcg alloc 61 --cpus 0-1 --mem 200M and 62 --cpus 1 for the step limit tests"
fi
jobcg release 61 > /dev/null 2>&1
jobcg release 62 > /dev/null 2>&1

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

# --- metrics of an OOM-killed step: valid exposition text, the kill counted ---
# The step's shell outlives its OOM-killed child and reads the node from inside the live step.
if ! command -v promtool > /dev/null; then
	skip "metrics of an OOM-killed step" "promtool not in the image (package prometheus)"
elif jobcg alloc 63 --mem 64M > /dev/null; then
	prom="$VMT_TMP/oom.prom"
	out=$(jobcg run --job 63 --step 7 -- sh -c "vmt-memhog 160 > /dev/null; jobcg metrics > $prom" 2>&1); rc=$?
	diag "$out"
	is "job 63 (--mem 64M): step 7's child is OOM-killed, the step reads jobcg metrics" "$rc" 0
	text=$(cat "$prom" 2>/dev/null)
	check "promtool check metrics accepts the node's metrics with that step" sh -c "promtool check metrics < $prom"
	like "...jobcg_oom_kills_total counts the kill in step 7" "$text" '^jobcg_oom_kills_total\{job="63",step="7",user="(root|0)"\} [1-9][0-9]*$'
	like "...and in job 63" "$text" '^jobcg_oom_kills_total\{job="63",step="",user="(root|0)"\} [1-9][0-9]*$'
	like "...beside job 63's memory limit (64 MiB)" "$text" '^jobcg_memory_limit_bytes\{job="63",step="",user="(root|0)"\} 67108864$'
	# After the step: the job keeps the count, and the text is still valid.
	text=$(jobcg metrics 2>&1)
	check "promtool accepts the metrics once the step is gone" sh -c 'jobcg metrics | promtool check metrics'
	like "...where job 63 still counts the kill" "$text" '^jobcg_oom_kills_total\{job="63",step="",user="(root|0)"\} [1-9][0-9]*$'
	jobcg release 63 > /dev/null 2>&1
else
	not_ok "jobcg alloc 63 --mem 64M for the metrics of an OOM-killed step"
fi

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

# --- memory.high and swap, from cgroup.conf (Slurm's formulas), with a swap file ---
conf="$VMT_TMP/memconf"
mkdir -p "$conf/high" "$conf/ram" "$conf/noswap" "$conf/swap"
printf 'SystemdTimeout=30000\nConstrainRAMSpace=yes\nAllowedRAMSpace=200\n' > "$conf/high/cgroup.conf"
printf 'SystemdTimeout=30000\nConstrainRAMSpace=yes\n' > "$conf/ram/cgroup.conf"
printf 'SystemdTimeout=30000\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n' > "$conf/noswap/cgroup.conf"
printf 'SystemdTimeout=30000\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\nAllowedSwapSpace=100\n' > "$conf/swap/cgroup.conf"
if fallocate -l 384M /swapfile && chmod 600 /swapfile && mkswap -q /swapfile && swapon /swapfile; then
	# The step reads its job's memory.events (task_0 -> user -> step -> job).
	events='vmt-memhog 96 > /dev/null; cg=/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/../../..; echo "high=$(cat $cg/memory.high)"; grep -E "^(high|oom_kill) " $cg/memory.events'
	out=$(jobcg --config-dir "$conf/high" run --mem 48M -- sh -c "$events" 2>&1); rc=$?
	diag "$out"
	is "AllowedRAMSpace=200: a 96 MiB step over its 48M request completes (memory.max 96M)" "$rc" 0
	like "...with memory.high at the request (48M)" "$out" "high=50331648"
	like "...which throttled and reclaimed it (memory.events high > 0)" "$out" "^high [1-9]"
	out=$(jobcg run -- sh -c "$events" 2>&1); rc=$?
	like "without a memory request there is no memory.high" "$out" "high=max"
	like "...and no high event" "$out" "^high 0"

	out=$(jobcg --config-dir "$conf/ram" run --mem 64M -- vmt-memhog 128 2>&1); rc=$?
	is "swap not constrained: 128 MiB over a 64M limit completes by swapping" "$rc" 0
	out=$(jobcg --config-dir "$conf/noswap" run --mem 64M -- vmt-memhog 128 2>&1); rc=$?
	is "ConstrainSwapSpace=yes, AllowedSwapSpace=0: the same step is OOM-killed" "$rc" 137
	out=$(jobcg --config-dir "$conf/swap" run --mem 64M -- vmt-memhog 112 2>&1); rc=$?
	is "AllowedSwapSpace=100: 64M of swap lets a 112 MiB step complete" "$rc" 0
	swapoff /swapfile
else
	not_ok "a swap file for the memory.high and swap tests"
fi
rm -f /swapfile
# --- cpu.weight: two jobs spinning on the same CPU share it by their weights ---
# Prints job 1's CPU time as a percentage of job 2's over a window in which both spin on CPU 0,
# read from their task cgroups' cpu.stat at its start and end. (The steps' whole CPU time, as
# measured before, also counted the wait for the other job's slow start under TCG, equal for
# both, and the starved job's late start and lone tail: 9:1 weights came out as 1.8-4.2x.)
usage() { sed -n 's/^usage_usec //p' "$1"; }
share() {
	rm -f "$VMT_TMP"/ready* "$VMT_TMP/go" "$VMT_TMP/stop"
	# each spinner: its cgroup into its ready file, then wait for go, then spin in this shell
	# (no exec for the starved one to be slow at) until stop
	spin='cut -d: -f3 /proc/self/cgroup > "$0.tmp" && mv "$0.tmp" "$0"
	while [ ! -e "$1" ]; do sleep 0.1; done
	while [ ! -e "$2" ]; do :; done'
	jobcg run --cpus 0 $1 -- sh -c "$spin" "$VMT_TMP/ready1" "$VMT_TMP/go" "$VMT_TMP/stop" &
	a=$!
	jobcg run --cpus 0 $2 -- sh -c "$spin" "$VMT_TMP/ready2" "$VMT_TMP/go" "$VMT_TMP/stop" &
	b=$!
	for i in $(seq 1 300); do [ -e "$VMT_TMP/ready1" ] && [ -e "$VMT_TMP/ready2" ] && break; sleep 0.1; done
	c1=/sys/fs/cgroup$(cat "$VMT_TMP/ready1")/cpu.stat
	c2=/sys/fs/cgroup$(cat "$VMT_TMP/ready2")/cpu.stat
	touch "$VMT_TMP/go"
	if [ ! -s "$VMT_TMP/ready1" ] || [ ! -s "$VMT_TMP/ready2" ]; then
		touch "$VMT_TMP/stop"
		wait $a $b
		echo 0 # a spinner never started: both checks fail
		return
	fi
	sleep 1 # both have seen it
	u1=$(usage "$c1") u2=$(usage "$c2")
	sleep 4
	v1=$(usage "$c1") v2=$(usage "$c2")
	touch "$VMT_TMP/stop"
	wait $a $b
	echo $(( (${v1:-0} - ${u1:-0}) * 100 / (${v2:-0} - ${u2:-0} + 1) ))
}
even=$(share "" "")
weighted=$(share "--cpu-weight 900" "--cpu-weight 100")
diag "CPU time of job 1 as % of job 2: equal weights $even, weights 900:100 $weighted"
check "equal weights share the CPU about evenly ($even%)" test "$even" -gt 60 -a "$even" -lt 160
check "weights 900:100 give the first job over five times the CPU, nine expected ($weighted%)" \
	test "$weighted" -gt 500
done_testing
