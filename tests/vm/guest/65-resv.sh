# vmtest-timeout: 420
# Reservations through the CLI (jobcg resv, docs/reservations.md) in jobcg's tree under systemd:
# CPUs as a partition where the kernel can make one (remote partitions, 6.7+; on 6.1 the tree
# in system.slice is refused with the reason and nothing is made, and a tree in -.slice has its
# root made a partition root first, SpecCPUs kept for the rest of the node), jobs inside and outside
# (Cpus_allowed_list, taskset, --cpus refused), a sibling's overlapping write seen by verify and
# healed by --repair and by the daemon on its own, memory.min with the cap of the jobs outside,
# an administrator's MemoryMin above the tree kept.
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
# daemon_heals CLI DIR CPU: CLI's daemon runs (--resv-period 3, socket in DIR, log in DIR.log)
# while the cgroup $S writes CPU into its cpuset.cpus; says "yes" once r1 verifies VALID again
# within 30 s, else "no".
daemon_heals() {
	mkdir -p -m 0700 "$2"
	$1 daemon --socket "$2/sock" --resv-period 3 > "$2.log" 2>&1 &
	dpid=$!
	sleep 2
	echo "$3" > "$S/cpuset.cpus"
	healed=no
	for i in $(seq 1 30); do
		sleep 1
		if $1 resv verify r1 > /dev/null 2>&1; then healed=yes; break; fi
	done
	kill $dpid; wait $dpid 2> /dev/null
	echo $healed
}

if [ $n -lt 4 ]; then
	skip "CPU reservations" "need 4 vCPUs, have $n"
elif [ ! -e "$root/cpuset.cpus.exclusive" ]; then
	out=$(jobcg resv create r1 --cpus 2-3 2>&1); rc=$?
	check "6.1, tree in system.slice: resv create --cpus refused (rc $rc)" test $rc -ne 0
	like "...with the reason" "$out" "no CPU partition can be made here: .*Linux < 6.7"
	check "...and nothing made" test ! -e "$root/resv_r1"

	# 6.1 with jobcg's tree directly below the root cgroup (a scope in -.slice): jobcg makes
	# the tree root a partition root of the jobs' CPUs, the reservation one inside it.
	top="$VMT_TMP/topconf"
	T=/sys/fs/cgroup/jobcg-top.scope
	mkdir -p "$top"
	printf 'SystemdTimeout=30000\nEnableControllers=yes\nCgroupSlice=-.slice\nJobcgScope=jobcg-top.scope\nStateDir=%s\n' \
		"$VMT_TMP/topstate" > "$top/cgroup.conf"
	J() { JOBCG_CONF_DIR="$top" jobcg "$@"; }
	top_cpus() { J run "$@" -- sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $2}'; }
	J init > /dev/null 2>&1
	check "6.1: jobcg's tree at the top ($T)" test -d "$T"
	out=$(J resv create r1 --cpus 2-3 2>&1); rc=$?
	check "...without SpecCPUs: resv create --cpus refused (rc $rc)" test $rc -ne 0
	like "...saying what the administrator must decide" "$out" "set SpecCPUs"
	check "...nothing made" test ! -e "$T/resv_r1"
	is "...the tree root left alone" "$(cat $T/cpuset.cpus.partition)" member
	echo SpecCPUs=0 >> "$top/cgroup.conf"
	J init > /dev/null 2>&1
	out=$(J resv create r1 --cpus 2-3 2>&1); rc=$?
	is "with SpecCPUs=0: resv create r1 --cpus 2-3" "$rc" 0 || diag "$out"
	is "...the tree root is a partition root" "$(cat $T/cpuset.cpus.partition)" root
	is "...of the jobs' CPUs" "$(cat $T/cpuset.cpus)" "1-$((n - 1))"
	is "...r1 a partition inside it" "$(cat $T/resv_r1/cpuset.cpus.partition)" root
	is "...the rest of the node keeps CPU 0 (the root cgroup's effective set)" \
		"$(cat /sys/fs/cgroup/cpuset.cpus.effective)" 0
	out=$(J resv verify r1 2>&1); rc=$?
	is "verify r1: VALID (rc $rc)" "$(echo "$out" | head -n1)" "r1: VALID" || diag "$out"
	outside=1; [ $n -gt 4 ] && outside="1,$(range 4 $((n - 1)))"
	is "a job outside runs on CPU $outside" "$(top_cpus)" "$outside"
	out=$(J run -- taskset -c 2 true 2>&1); rc=$?
	check "...taskset -c 2 inside a job outside fails (rc $rc)" test $rc -ne 0
	is "a job inside gets 2-3" "$(top_cpus --reservation r1)" "2-3"
	# A cgroup beside the tree that claims one of its CPUs: 6.1 accepts the write and
	# invalidates the tree root, and r1 with it.
	S=/sys/fs/cgroup/vmt-top-intruder
	mkdir "$S" && echo 1 > "$S/cpuset.cpus"
	out=$(J resv verify r1 2>&1); rc=$?
	is "a cgroup beside the tree claims CPU 1: verify exits 1" "$rc" 1
	like "...naming the tree root's state" "$out" "tree root /jobcg-top.scope reads 'root invalid"
	diag "$out"
	out=$(J resv verify r1 --repair 2>&1); rc=$?
	check "...--repair refuses while the claim stands (rc $rc)" test $rc -ne 0
	like "...naming the claim" "$out" "vmt-top-intruder cpuset.cpus 1"
	rmdir "$S"
	out=$(J resv verify r1 --repair 2>&1); rc=$?
	is "...once it is gone, --repair: VALID again" "$rc" 0 || diag "$out"
	is "...the tree root a partition root again" "$(cat $T/cpuset.cpus.partition)" root
	is "...r1 too" "$(cat $T/resv_r1/cpuset.cpus.partition)" root
	# A cgroup of jobcg's tree beside r1 claiming CPU 3: healed by the daemon on its own.
	S="$T/vmt-intruder"
	mkdir "$S"
	is "a cgroup of the tree beside r1 claims CPU 3: the daemon repaired r1 on its own" \
		"$(daemon_heals J "$VMT_TMP/topd" 3)" yes
	is "...the intruder no longer has CPU 3" "$(cat $S/cpuset.cpus.effective)" 1
	# The daemon is notified at once and heals before a reader could look: its log tells.
	like "...having seen r1 invalid, in the kernel's words" "$(cat $VMT_TMP/topd.log)" \
		"reservation r1: CPUs: partition /jobcg-top.scope/resv_r1 reads 'root invalid \(Cpu list in cpuset.cpus not exclusive\)'"
	diag "$(cat $VMT_TMP/topd.log)"
	rmdir "$S"
	check "delete r1" J resv delete r1
	is "...the tree root is a member again" "$(cat $T/cpuset.cpus.partition)" member
	is "...the root cgroup has every CPU back" "$(cat /sys/fs/cgroup/cpuset.cpus.effective)" "$all"
	is "...a job outside runs on every CPU but SpecCPUs" "$(top_cpus)" "1-$((n - 1))"
	out=$(J teardown 2>&1); rc=$?
	is "teardown of the tree at the top" "$rc" 0 || diag "$out"
	check "...gone" test ! -e "$T"
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
	is "the daemon repaired r1 on its own" "$(daemon_heals jobcg "$VMT_TMP/resvd" 3)" yes
	like "...and logged what it found" "$(cat $VMT_TMP/resvd.log)" "reservation r1 is DEGRADED"
	diag "$(cat $VMT_TMP/resvd.log)"
	rmdir "$S"

	# A reserved CPU offlined: r1's effective set is short and no repair heals it, while each
	# repair's writes notify the partition file the daemon watches. It is reported once, not
	# repaired in a loop (nor every period); the CPU back, r1 is VALID again.
	cpu3=/sys/devices/system/cpu/cpu3/online
	if [ -w "$cpu3" ]; then
		mkdir -p -m 0700 "$VMT_TMP/offd"
		jobcg daemon --socket "$VMT_TMP/offd/sock" --resv-period 2 > "$VMT_TMP/offd.log" 2>&1 &
		dpid=$!
		sleep 2
		echo 0 > "$cpu3"
		sleep 8
		is "CPU 3 offline under the daemon: r1 repaired once in 8 s (4 periods)" \
			"$(grep -c 'repair failed' "$VMT_TMP/offd.log")" 1
		is "...reported DEGRADED once" "$(grep -c 'reservation r1 is DEGRADED' "$VMT_TMP/offd.log")" 1
		echo 1 > "$cpu3"
		healed=no
		for i in $(seq 1 20); do
			sleep 1
			if jobcg resv verify r1 > /dev/null 2>&1; then healed=yes; break; fi
		done
		is "...CPU 3 online again: r1 VALID again" "$healed" yes
		sleep 3
		kill $dpid; wait $dpid 2> /dev/null
		diag "$(cat $VMT_TMP/offd.log)"
	else
		skip "offlining a reserved CPU" "no $cpu3"
	fi
	check "delete r1" jobcg resv delete r1
	is "...every CPU back for jobs outside" "$(cpus_in)" "$all"
fi

# Memory: memory.min, and the cap of jobs outside.
ram=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
job_mem_max='cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/../../../memory.max'
# The administrator's own MemoryMin on system.slice, below the reservation: raised while rm
# needs more, given back to it (not to what the children need, 0) when rm is deleted.
slice=/sys/fs/cgroup/system.slice
systemctl set-property --runtime system.slice MemoryMin=64M
for _ in $(seq 50); do [ "$(cat $slice/memory.min)" = 67108864 ] && break; sleep 0.1; done
out=$(jobcg resv create rm --mem 256M 2>&1); rc=$?
is "resv create rm --mem 256M" "$rc" 0 || diag "$out"
is "...memory.min on it" "$(cat $root/resv_rm/memory.min 2> /dev/null)" 268435456
is "...memory.max on it: its jobs together never take more" \
	"$(cat $root/resv_rm/memory.max 2> /dev/null)" 268435456
out=$(jobcg resv verify rm 2>&1); rc=$?
is "...verify VALID" "$rc" 0 || diag "$out"
is "a job outside without --mem is capped at RAM minus the reservation" \
	"$(jobcg run -- sh -c "$job_mem_max")" "$((ram - 268435456))"
check "delete rm" jobcg resv delete rm
is "...the administrator's MemoryMin on system.slice stays" "$(cat $slice/memory.min)" 67108864
systemctl set-property --runtime system.slice MemoryMin=0
is "...a job outside has no cap again" "$(jobcg run -- sh -c "$job_mem_max")" "max"
done_testing
