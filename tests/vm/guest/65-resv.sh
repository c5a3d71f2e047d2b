# Reservations through the CLI (jobcg resv, docs/reservations.md) in jobcg's tree under systemd:
# CPUs as a partition where the kernel can make one (remote partitions, 6.7+; on 6.1 the tree
# in system.slice is refused with the reason and nothing is made), jobs inside and outside
# (Cpus_allowed_list, taskset, --cpus refused), a sibling's overlapping write seen by verify and
# healed by --repair and by the daemon on its own, memory.min with the cap of the jobs outside.
. "$VMT_GUEST/lib.sh"
root=/sys/fs/cgroup/system.slice/jobcg.scope
# cpuset down to the tree, as a node that reserves CPUs has it: at the top, and through
# system.slice by EnableControllers=yes.
grep -qw cpuset /sys/fs/cgroup/cgroup.subtree_control || echo +cpuset > /sys/fs/cgroup/cgroup.subtree_control
conf="$VMT_TMP/resvconf"
mkdir -p "$conf"
printf 'SystemdTimeout=30000\nEnableControllers=yes\n' > "$conf/cgroup.conf"
export JOBCG_CONF_DIR="$conf"
jobcg init > /dev/null 2>&1
diag "jobcg.scope cgroup.subtree_control: $(cat $root/cgroup.subtree_control)"
n=$(grep -c '^processor' /proc/cpuinfo)
cpus_in() { jobcg run "$@" -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}'; }
range() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
all=$(range 0 $((n - 1)))

if [ $n -lt 4 ]; then
	skip "CPU reservations" "need 4 vCPUs, have $n"
elif [ ! -e "$root/cpuset.cpus.exclusive" ]; then
	out=$(jobcg resv create r1 --cpus 2-3 2>&1); rc=$?
	check "6.1, tree in system.slice: resv create --cpus refused (rc $rc)" test $rc -ne 0
	like "...with the reason" "$out" "no CPU partition can be made here: .*Linux < 6.7"
	check "...and nothing made" test ! -e "$root/resv_r1"
else
	out=$(jobcg resv create r1 --cpus 2-3 2>&1); rc=$?
	is "resv create r1 --cpus 2-3" "$rc" 0 || diag "$out"
	out=$(jobcg resv verify r1 2>&1); rc=$?
	is "verify r1: VALID (rc $rc)" "$(echo "$out" | head -n1)" "r1: VALID" || diag "$out"
	is "...the kernel reads root" "$(cat $root/resv_r1/cpuset.cpus.partition)" "root"
	is "a job outside runs on 0-1 only (Cpus_allowed_list)" "$(cpus_in)" "0-1"
	out=$(jobcg run -- taskset -c 2 true 2>&1); rc=$?
	check "...taskset -c 2 inside a job outside fails (rc $rc)" test $rc -ne 0
	is "a job inside gets 2-3" "$(cpus_in --reservation r1)" "2-3"
	out=$(jobcg alloc 6501 --cpus 2 2>&1); rc=$?
	check "alloc --cpus 2 outside refused (rc $rc)" test $rc -ne 0
	like "...naming the reservation" "$out" "reserved by reservation r1"
	out=$(jobcg resv create r2 --cpus 3 2>&1); rc=$?
	check "overlap refused (rc $rc)" test $rc -ne 0
	like "...naming r1" "$out" "already reserved by reservation r1"
	out=$(jobcg resv create r2 --cpus 0-1 2>&1); rc=$?
	check "taking the last CPUs refused (rc $rc)" test $rc -ne 0
	like "...saying why" "$out" "no CPU to the rest of the node"
	check "...nothing half-applied" test ! -e "$root/resv_r2"

	# A cgroup of jobcg's tree that writes the reserved CPUs into its cpuset.cpus.
	S="$root/vmt-intruder"
	mkdir "$S" && echo 3 > "$S/cpuset.cpus"
	out=$(jobcg resv verify r1 2>&1); rc=$?
	is "a sibling's overlapping cpuset.cpus: verify exits 1" "$rc" 1
	like "...DEGRADED with the kernel's words" "$out" "DEGRADED"
	like "...the partition state" "$out" "invalid"
	diag "$out"
	out=$(jobcg alloc 6502 --reservation r1 2>&1); rc=$?
	check "a DEGRADED reservation admits no job (rc $rc)" test $rc -ne 0
	like "...saying so" "$out" "DEGRADED"
	out=$(jobcg resv verify r1 --repair 2>&1); rc=$?
	is "verify --repair: VALID again (rc $rc)" "$rc" 0 || diag "$out"
	is "...the intruder no longer runs on CPU 3" "$(cat $S/cpuset.cpus.effective)" "0-1"

	# The daemon heals it on its own within its period.
	sock="$VMT_TMP/resvd"
	mkdir -p -m 0700 "$sock"
	jobcg daemon --socket "$sock/sock" --resv-period 3 > "$VMT_TMP/resvd.log" 2>&1 &
	dpid=$!
	sleep 2
	echo 3 > "$S/cpuset.cpus"
	healed=no
	for i in $(seq 1 30); do
		sleep 1
		if jobcg resv verify r1 > /dev/null 2>&1; then healed=yes; break; fi
	done
	is "the daemon repaired r1 on its own" "$healed" yes
	like "...and logged what it found" "$(cat $VMT_TMP/resvd.log)" "reservation r1 is DEGRADED"
	kill $dpid; wait $dpid 2> /dev/null
	diag "$(cat $VMT_TMP/resvd.log)"
	rmdir "$S"
	check "delete r1" jobcg resv delete r1
	is "...every CPU back for jobs outside" "$(cpus_in)" "$all"
fi

# Memory: memory.min, and the cap of jobs outside.
ram=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
job_mem_max='cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/../../../memory.max'
out=$(jobcg resv create rm --mem 256M 2>&1); rc=$?
is "resv create rm --mem 256M" "$rc" 0 || diag "$out"
is "...memory.min on it" "$(cat $root/resv_rm/memory.min 2> /dev/null)" 268435456
out=$(jobcg resv verify rm 2>&1); rc=$?
is "...verify VALID" "$rc" 0 || diag "$out"
is "a job outside without --mem is capped at RAM minus the reservation" \
	"$(jobcg run -- sh -c "$job_mem_max")" "$((ram - 268435456))"
check "delete rm" jobcg resv delete rm
is "...a job outside has no cap again" "$(jobcg run -- sh -c "$job_mem_max")" "max"
done_testing
