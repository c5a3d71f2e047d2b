# vmtest-timeout: 420
# A reservation's kernel side alone (vmt-cpupart drives lib/src/resv/cpupart.c): a cpuset
# partition that the kernel really made (remote on >= 6.7 by cpuset.cpus.exclusive, local at the
# top on 6.1, refused with the reason inside system.slice on 6.1), what breaks it (a sibling's
# overlapping cpuset.cpus, an offlined CPU, an ancestor's exclusive set cut) seen by verify and
# healed by repair, nothing half-applied on failure, and memory.min down the ancestors holding a
# reservation's page cache against a hog outside, measured without the setting too.
. "$VMT_GUEST/lib.sh"
cg=/sys/fs/cgroup
root=$cg/system.slice/jobcg.scope
vc=vmt-cpupart
ncpu=$(grep -c '^processor' /proc/cpuinfo)
if [ "$ncpu" -lt 4 ]; then
	skip "CPU partition tests" "$ncpu vCPUs; they need 4 (VM_CPUS)"
	done_testing
fi
kver=$(uname -r)
major=${kver%%.*}; rest=${kver#*.}; minor=${rest%%[!0-9]*}
remote_kernel=0
[ "$major" -gt 6 ] || { [ "$major" = 6 ] && [ "$minor" -ge 7 ]; } && remote_kernel=1
diag "Linux $kver, $ncpu CPUs, remote partitions expected: $remote_kernel"
# The tree must have cpuset: EnableControllers makes jobcg enable it down every ancestor (the
# Debian guest's root cgroup has only memory and pids, unless an earlier script enabled more).
conf=$VMT_TMP/cpupartconf
mkdir -p "$conf" && printf 'SystemdTimeout=30000\nEnableControllers=yes\n' > "$conf/cgroup.conf"
jobcg --config-dir "$conf" init > /dev/null 2>&1 || { not_ok "jobcg init"; done_testing; }
grep -qw cpuset "$cg/cgroup.subtree_control" || echo +cpuset > "$cg/cgroup.subtree_control"
all=$(cat $cg/cpuset.cpus.effective)
is "all $ncpu CPUs are in the root cgroup to start with" "$all" "0-$((ncpu - 1))"

cleanup() {
	for c in 1 2 3; do echo 1 > /sys/devices/system/cpu/cpu$c/online 2> /dev/null; done
	for d in "$root/vmt-resv" "$cg/vmt-resv"; do
		[ -d "$d" ] && $vc release "$d" 2-3 > /dev/null 2>&1
	done
	for d in "$root/vmt-sib" "$cg/vmt-sib" "$root/vmt-resv" "$cg/vmt-resv" "$root/vmt-mem" "$cg/vmt-hog"; do
		[ -d "$d" ] && rmdir "$d" 2> /dev/null
	done
}
trap cleanup EXIT

# --- probe: by the file, never by the version ---
mkdir "$root/vmt-resv"
out=$($vc probe "$root/vmt-resv" 2>&1)
if [ $remote_kernel = 1 ]; then
	is "Linux $kver: a remote partition inside system.slice/jobcg.scope" "$out" "remote"
	D=$root/vmt-resv S=$root/vmt-sib
	is "...and the same for one not made yet (from its parent)" "$($vc probe $root/vmt-none 2>&1)" "remote"
else
	like "Linux $kver: a partition inside system.slice is refused" "$out" "^unsupported: "
	like "...saying why, in words a user can act on" "$out" "Linux < 6.7.*root cgroup.*/system.slice/jobcg.scope is not one.*direct child of the root cgroup"
	like "...and the same for one not made yet (from its parent)" "$($vc probe $root/vmt-none 2>&1)" "^unsupported: .*Linux < 6.7"
	out=$($vc apply "$root/vmt-resv" 2-3 2>&1); rc=$?
	check "...apply refuses it too (rc $rc)" test $rc = 1
	like "...with the explanation" "$out" "cannot reserve CPUs 2-3: .*Linux < 6.7"
	is "...and writes nothing" "$(cat $root/vmt-resv/cpuset.cpus $root/vmt-resv/cpuset.cpus.partition | tr '\n' ' ')" " member "
	rmdir "$root/vmt-resv"
	mkdir "$cg/vmt-resv"
	is "Linux $kver: a direct child of the root cgroup can be a local partition" "$($vc probe $cg/vmt-resv 2>&1)" "local"
	D=$cg/vmt-resv S=$cg/vmt-sib
fi

# --- a valid partition, and who may run on its CPUs ---
out=$($vc apply "$D" 2-3 2>&1); rc=$?
is "apply CPUs 2-3 at $D" "$rc" 0 || diag "$out"
out=$($vc verify "$D" 2-3 2>&1); rc=$?
is "verify: VALID" "$rc" 0 || diag "$out"
is "...the kernel reads root" "$(cat $D/cpuset.cpus.partition)" "root"
is "...with CPUs 2-3 effective" "$(cat $D/cpuset.cpus.effective)" "2-3"
is "the root cgroup lost them (cpuset.cpus.effective)" "$(cat $cg/cpuset.cpus.effective)" "0-1"
k=$(head -n1 "$root/system/cgroup.procs")
is "jobcg's keeper outside may not run there (Cpus_allowed_list)" \
	"$(awk '/^Cpus_allowed_list/ {print $2}' /proc/$k/status)" "0-1"
out=$(taskset -c 2 true 2>&1); rc=$?
check "taskset -c 2 from outside fails (rc $rc)" test $rc != 0
inside=$(sh -c "echo \$\$ > $D/cgroup.procs && awk '/^Cpus_allowed_list/ {print \$2}' /proc/self/status")
is "a process inside gets exactly the reserved CPUs" "$inside" "2-3"

# --- a sibling's overlapping write: accepted by the kernel, and it breaks the partition ---
mkdir "$S"
echo 3 > "$S/cpuset.cpus"; rc=$?
diag "the kernel answered $rc to '3' > $S/cpuset.cpus; $D reads '$(cat $D/cpuset.cpus.partition)', $S runs on '$(cat $S/cpuset.cpus.effective)'"
out=$($vc verify "$D" 2-3 2>&1); rc=$?
is "after a sibling's overlapping cpuset.cpus, verify: DEGRADED (rc 3)" "$rc" 3
like "...with the kernel's state" "$out" "^problem partition .* reads 'root invalid"
if [ $remote_kernel = 0 ]; then
	like "...and its reason (6.1)" "$out" "Cpu list in cpuset.cpus not exclusive"
fi
like "...naming the sibling that claims CPU 3" "$out" "claimed beside it by [^ ]*/vmt-sib cpuset.cpus 3"
diag "$out"
if [ $remote_kernel = 0 ]; then
	# At the top the sibling is no cgroup of jobcg's: repair names it and changes nothing.
	out=$($vc repair "$D" 2-3 2>&1); rc=$?
	is "repair with a foreign sibling's claim standing: still DEGRADED (rc 3)" "$rc" 3
	like "...naming it, saying nothing was changed" "$out" "claimed outside jobcg's tree by /vmt-sib cpuset.cpus 3: free them there.*nothing was changed"
	is "...the sibling's cpuset.cpus untouched" "$(cat $S/cpuset.cpus)" "3"
	echo > "$S/cpuset.cpus"
fi
out=$($vc repair "$D" 2-3 2>&1); rc=$?
is "repair: VALID again" "$rc" 0 || diag "$out"
if [ $remote_kernel = 1 ]; then
	is "...it took CPU 3 back from the sibling in jobcg's tree (cpuset.cpus)" "$(cat $S/cpuset.cpus)" ""
fi
is "...the sibling no longer runs on CPU 3" "$(cat $S/cpuset.cpus.effective)" "0-1"
is "...the root cgroup has 0-1 only" "$(cat $cg/cpuset.cpus.effective)" "0-1"
rmdir "$S"

# --- a CPU offlined: the state may still read root; only the effective set tells ---
echo 0 > /sys/devices/system/cpu/cpu3/online
out=$($vc verify "$D" 2-3 2>&1); rc=$?
is "CPU 3 offline: verify DEGRADED (rc 3)" "$rc" 3
like "...as a shrink naming CPU 3" "$out" "^problem .*(shrunk: CPU 3 missing|reads 'root invalid)"
diag "$out"
echo 1 > /sys/devices/system/cpu/cpu3/online
out=$($vc verify "$D" 2-3 2>&1) || out=$($vc repair "$D" 2-3 2>&1)
is "CPU 3 back online: VALID (after repair where needed)" "$?" 0 || diag "$out"

# --- an ancestor's exclusive set cut (remote only) ---
if [ $remote_kernel = 1 ]; then
	sl=$cg/system.slice
	before=$(cat $sl/cpuset.cpus.exclusive)
	if echo 2 > "$sl/cpuset.cpus.exclusive" 2> /dev/null; then
		out=$($vc verify "$D" 2-3 2>&1); rc=$?
		is "system.slice's cpuset.cpus.exclusive cut to 2: verify DEGRADED (rc 3)" "$rc" 3
		diag "$out"
		out=$($vc repair "$D" 2-3 2>&1); rc=$?
		is "...repair puts the exclusive set back: VALID" "$rc" 0 || diag "$out"
		is "...system.slice's exclusive set is 2-3 again" "$(cat $sl/cpuset.cpus.exclusive)" "2-3"
	else
		diag "the kernel refused to cut system.slice's exclusive set ($before) under a partition"
	fi
fi

# --- release: everything back ---
out=$($vc release "$D" 2-3 2>&1); rc=$?
is "release" "$rc" 0 || diag "$out"
is "...the root cgroup has every CPU again" "$(cat $cg/cpuset.cpus.effective)" "$all"
is "...$D is a member" "$(cat $D/cpuset.cpus.partition)" "member"
if [ $remote_kernel = 1 ]; then
	is "...no exclusive CPUs left on system.slice or the scope" \
		"$(cat $cg/system.slice/cpuset.cpus.exclusive $root/cpuset.cpus.exclusive | tr -d '\n')" ""
	out=$($vc apply "$D" 2-3 --isolated 2>&1); rc=$?
	is "an isolated partition" "$rc" 0 || diag "$out"
	is "...reads isolated" "$(cat $D/cpuset.cpus.partition)" "isolated"
	$vc release "$D" 2-3 > /dev/null 2>&1
fi

# --- a partition the kernel cannot make (every CPU): refused, nothing half-applied ---
out=$($vc apply "$D" "$all" 2>&1); rc=$?
check "a partition of every CPU is refused (rc $rc)" test $rc = 1
like "...in the kernel's words or the write's errno" "$out" "(invalid|Invalid argument|Device or resource busy|No space)"
diag "$out"
is "...$D back to member with its own cpuset.cpus" \
	"$(cat $D/cpuset.cpus.partition) [$(cat $D/cpuset.cpus)]" "member []"
if [ $remote_kernel = 1 ]; then
	is "...no exclusive CPUs left on the ancestors" \
		"$(cat $cg/system.slice/cpuset.cpus.exclusive $root/cpuset.cpus.exclusive | tr -d '\n')" ""
fi
is "...the root cgroup keeps every CPU" "$(cat $cg/cpuset.cpus.effective)" "$all"

# --- memory.min: a reservation's page cache against a hog outside ---
M=$root/vmt-mem H=$cg/vmt-hog
mkdir -p "$M" "$H"
dd if=/dev/zero of=/var/tmp/vmt-resident bs=1M count=200 conv=fsync status=none
truncate -s 3G /var/tmp/vmt-hogfile
fill() {
	sync; echo 3 > /proc/sys/vm/drop_caches
	sh -c "echo \$\$ > $M/cgroup.procs && cat /var/tmp/vmt-resident > /dev/null"
}
hog() { sh -c "echo \$\$ > $H/cgroup.procs && cat /var/tmp/vmt-hogfile > /dev/null"; }
mib() { echo $(( $(cat "$M/memory.current") >> 20 )); }
fill; b=$(mib); hog; a=$(mib)
diag "without memory.min: $b MiB resident before the hog, $a MiB after"
check "without memory.min the hog pushes the reservation's memory down ($b -> $a MiB)" test "$a" -lt $((b / 2))
out=$($vc mem-verify "$M" 268435456 2>&1); rc=$?
is "mem-verify without the setting: a problem (rc 3)" "$rc" 3
like "...naming the level" "$out" "memory.min of /system.slice/jobcg.scope/vmt-mem is 0"
out=$($vc mem-apply "$M" 268435456 2>&1); rc=$?
is "mem-apply 256 MiB" "$rc" 0 || diag "$out"
is "...memory.min of the reservation" "$(cat $M/memory.min)" 268435456
is "...of jobcg.scope (systemd's MemoryMin)" "$(cat $root/memory.min)" 268435456
is "...and of system.slice" "$(cat $cg/system.slice/memory.min)" 268435456
is "...systemd knows it (MemoryMin)" "$(systemctl show -P MemoryMin jobcg.scope)" 268435456
out=$($vc mem-verify "$M" 268435456 2>&1)
is "mem-verify: every level protects it" "$out" "ok"
fill; b=$(mib); hog; a=$(mib)
diag "with memory.min: $b MiB resident before the hog, $a MiB after"
check "with memory.min the hog cannot push it down ($b -> $a MiB)" test "$a" -ge $((b - 8))
out=$($vc mem-release "$M" 268435456 2>&1); rc=$?
is "mem-release" "$rc" 0 || diag "$out"
is "...jobcg.scope and system.slice back to 0" "$(cat $root/memory.min) $(cat $cg/system.slice/memory.min)" "0 0"
rm -f /var/tmp/vmt-resident /var/tmp/vmt-hogfile
done_testing
