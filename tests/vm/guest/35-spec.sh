# Resource specialisation (SpecCPUs/CoreSpecCount/MemSpecLimit): the scope's system/ leaf (the
# keeper) gets the reserved CPU and memory, jobs get the rest and can never name a reserved CPU.
# Every check is made without the keys too, so a reservation that is silently not applied fails.
. "$VMT_GUEST/lib.sh"
root=/sys/fs/cgroup/system.slice/jobcg.scope
conf="$VMT_TMP/specconf"
mkdir -p "$conf/spec" "$conf/count"
printf 'SystemdTimeout=30000\nSpecCPUs=1\nMemSpecLimit=128\n' > "$conf/spec/cgroup.conf"
printf 'SystemdTimeout=30000\nCoreSpecCount=1\n' > "$conf/count/cgroup.conf"
cpus_in_job() { jobcg "$@" -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}'; }
keeper_cpus() {
	k=$(head -n1 "$root/system/cgroup.procs")
	grep Cpus_allowed_list "/proc/$k/status" | awk '{print $2}'
}
# Any number of vCPUs (tests/vm/run boots 4): SpecCPUs=1 leaves the others, CoreSpecCount=1
# takes the last one.
range() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
n=$(grep -c '^processor' /proc/cpuinfo); last=$((n - 1))
all=$(range 0 $last)
spec_others=0; [ $n -gt 2 ] && spec_others="0,$(range 2 $last)"
count_others=$(range 0 $((last - 1)))
ram=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
# the job's memory.max, read from a task (task_0 -> user -> step -> job)
job_mem_max='cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/../../../memory.max'

# --- without the keys: as before ---
jobcg init > /dev/null 2>&1
is "without the keys system/ has no CPU restriction (cpuset.cpus empty)" "$(cat $root/system/cpuset.cpus)" ""
is "...and no memory.max" "$(cat $root/system/memory.max)" "max"
is "...the keeper may run on every CPU" "$(keeper_cpus)" "$all"
is "...a job without --cpus may use every CPU" "$(cpus_in_job run)" "$all"
is "...a job may ask for CPU 1" "$(cpus_in_job run --cpus 1)" "1"
is "...a job without --mem has no memory.max" "$(jobcg run -- sh -c "$job_mem_max")" "max"
like "...jobcg check reserves nothing" "$(jobcg check)" "reserved for system: +nothing"

# --- SpecCPUs=1, MemSpecLimit=128 (MiB) ---
check "jobcg init with SpecCPUs=1 MemSpecLimit=128" jobcg --config-dir "$conf/spec" init
is "system/ cpuset.cpus is the reserved CPU" "$(cat $root/system/cpuset.cpus)" "1"
is "system/ memory.max is MemSpecLimit (128 MiB)" "$(cat $root/system/memory.max)" 134217728
like "the keeper is in system/" "$(ps -o args= -p "$(head -n1 $root/system/cgroup.procs)")" "jobcg keeper"
is "...and runs only on CPU 1 (Cpus_allowed_list)" "$(keeper_cpus)" "1"
like "jobcg check shows the reservation" "$(jobcg --config-dir "$conf/spec" check)" "reserved for system: +CPUs 1, memory 128 MiB"
like "jobcg config shows SpecCPUs" "$(jobcg --config-dir "$conf/spec" config)" "^SpecCPUs +1 "
like "jobcg config shows MemSpecLimit" "$(jobcg --config-dir "$conf/spec" config)" "^MemSpecLimit +128M "
is "a job without --cpus gets the other CPUs only (Cpus_allowed_list)" "$(cpus_in_job --config-dir "$conf/spec" run)" "$spec_others"
is "...and nproc inside says $last" "$(jobcg --config-dir "$conf/spec" run -- nproc)" $last
is "a job asking for CPU 0 gets it" "$(cpus_in_job --config-dir "$conf/spec" run --cpus 0)" "0"
out=$(jobcg --config-dir "$conf/spec" run --cpus 1 -- true 2>&1); rc=$?
check "a job asking for the reserved CPU is refused (rc $rc)" test "$rc" -ne 0
like "...naming --cpus and the CPU" "$out" "--cpus 1: CPU 1 is reserved for the system by SpecCPUs"
out=$(jobcg --config-dir "$conf/spec" alloc 3501 --cpus 0-1 --best-effort 2>&1); rc=$?
check "alloc --cpus 0-1 is refused even with --best-effort (rc $rc)" test "$rc" -ne 0
like "...naming the option and the CPU" "$out" "--cpus 0-1: CPU 1 is reserved"
check "...and no job was made" test ! -e "$root/job_3501"
is "a job without --mem is capped at RAM minus MemSpecLimit" \
	"$(jobcg --config-dir "$conf/spec" run -- sh -c "$job_mem_max")" "$((ram - 134217728))"

# --- CoreSpecCount=1: the highest-numbered CPU, as Slurm picks it ---
check "jobcg init with CoreSpecCount=1" jobcg --config-dir "$conf/count" init
is "CoreSpecCount=1: system/ cpuset.cpus is the last CPU, $last" "$(cat $root/system/cpuset.cpus)" "$last"
is "...the memory reservation is gone (memory.max)" "$(cat $root/system/memory.max)" "max"
is "...a job without --cpus gets the others, $count_others" "$(cpus_in_job --config-dir "$conf/count" run)" "$count_others"
out=$(jobcg --config-dir "$conf/count" run --cpus $last -- true 2>&1); rc=$?
like "...and --cpus $last is refused naming CoreSpecCount (rc $rc)" "$out" "CPU $last is reserved for the system by CoreSpecCount"

# --- the keys removed: everything back as before ---
check "jobcg init without the keys" jobcg init
# (a populated cgroup's cpuset.cpus cannot be emptied again: it gets all the root's CPUs)
is "system/ may use every CPU again (cpuset.cpus.effective)" "$(cat $root/system/cpuset.cpus.effective)" "$all"
is "...memory.max is max again" "$(cat $root/system/memory.max)" "max"
is "...the keeper may run on every CPU again" "$(keeper_cpus)" "$all"
is "...a job without --cpus may use every CPU again" "$(cpus_in_job run)" "$all"
done_testing
