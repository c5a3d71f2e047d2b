# bench/run --vm, inside the VM (tests/vm/run --guest): the same constrained step, /bin/true
# with one CPU, 256M of memory and two stand-in GPUs, started through systemd-run --scope,
# crun run, jobcg and Slurm's srun, all in this one boot and reported as ratios to this boot's
# floor (fork+exec+wait of /bin/true). Timing is bench/launch's: subjects interleaved in blocks
# of 10; srun (over a second per launch under TCG) runs afterwards with a floor of its own.
# Prints TAP for the VM runner and one "# bench-json: {...}" line per subject for bench/run.
. "$VMT_GUEST/lib.sh"
[ -f "$VMT_GUEST/bench.env" ] && . "$VMT_GUEST/bench.env"
n=${BENCH_N:-100}
L="$VMT_SHARE/bin/launch"
tmp=$(mktemp -d /tmp/jobcg-bench-XXXXXX)
# Stand-in GPUs in /dev (systemd's DeviceAllow= takes /dev paths only); this VM is thrown away.
for i in 0 1; do
	[ -e /dev/nvidia$i ] || mknod /dev/nvidia$i c 195 $i
done

# --- jobcg: installed on the guest's own disk, like the peers ---------------------------------
# Not run from the 9p share: an exec from 9p re-reads the binary's pages over virtio and
# retranslates them unless some process still maps the file (measured 2026-11-24: `jobcg
# version` 81-96 ms from the share, 24 ms while a daemon held it, 20 ms from the guest's
# ext4), which made the in-process figures depend on whether the daemon was running.
JDIR=/usr/local/lib/jobcg-bench
mkdir -p "$JDIR"
for f in jobcg jobcg-dynamic empty exec-only; do
	[ -f "$VMT_SHARE/bin/$f" ] && cp "$VMT_SHARE/bin/$f" "$JDIR/"
done
export PATH="$JDIR:$PATH"
check "jobcg runs from the guest's disk" test "$(command -v jobcg)" = "$JDIR/jobcg"

# --- jobcg: its own tree, state and pins; the two stand-in GPUs in its gres.conf ----------
mkdir -p "$tmp/conf"
printf 'Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n' > "$tmp/conf/gres.conf"
# The job's GPUs are enforced like DevicePolicy=closed; TCG on a busy host is slow to start units.
printf 'ConstrainDevices=yes\nSystemdTimeout=60000\n' > "$tmp/conf/cgroup.conf"
# State (lock, accounting log) on tmpfs like crun's /run/crun and systemd's: the fsync of the
# accounting record on a disk is measured on the host (bench/run's cli_shm row).
export JOBCG_CONF_DIR="$tmp/conf" JOBCG_STATE_DIR=/run/jobcg-bench JOBCG_BPF_PIN_DIR=/sys/fs/bpf/jobcgbench
export JOBCG_KEEPER_EXE="$JDIR/jobcg"
check "jobcg init" jobcg init
check "jobcg alloc 1 --cpus 0 --mem 256M --gres gpu:2" jobcg alloc 1 --cpus 0 --mem 256M --gres gpu:2

# --- crun: a minimal bundle (only /bin/true and its libraries, a mount namespace) ---------
b="$tmp/bundle"
mkdir -p "$b/rootfs/dev" "$b/rootfs/proc"
for f in /bin/true $(ldd /bin/true | grep -o '/[^ ]*'); do
	mkdir -p "$b/rootfs$(dirname "$f")"
	cp -L "$f" "$b/rootfs$f"
done
cat > "$b/config.json" <<EOF
{"ociVersion": "1.0.2",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0}, "args": ["/bin/true"],
             "env": ["PATH=/bin:/usr/bin"], "cwd": "/"},
 "root": {"path": "rootfs", "readonly": true}, "mounts": [],
 "linux": {"namespaces": [{"type": "mount"}],
           "resources": {"cpu": {"cpus": "0"}, "memory": {"limit": 268435456},
                         "devices": [{"allow": false, "access": "rwm"},
                                     {"allow": true, "type": "c", "major": 195, "minor": 0, "access": "rw"},
                                     {"allow": true, "type": "c", "major": 195, "minor": 1, "access": "rw"}]}}}
EOF
check "crun runs the bundle" crun run --bundle "$b" jobcg-bench-probe

# --- systemd-run: a transient scope with the equivalent properties --------------------------
sr="systemd-run --scope --quiet --collect -p AllowedCPUs=0 -p MemoryMax=256M -p DevicePolicy=closed -p DeviceAllow=/dev/nvidia0 -p DeviceAllow=/dev/nvidia1"
# shellcheck disable=SC2086
check "systemd-run --scope runs /bin/true" $sr /bin/true

# --- a 4-level cgroup chain with every controller enabled, the kernel's share ----------------
cg=/sys/fs/cgroup/jobcg-bench-cgfloor
mkdir -p "$cg"
export BENCH_CGFLOOR_CONTROLLERS="+cpuset +cpu +memory +pids"
echo "$BENCH_CGFLOOR_CONTROLLERS" > "$cg/cgroup.subtree_control" ||
	diag "cannot enable controllers below $cg: the chain runs without them"

# --- jobcg daemon: the same steps with the cgroup work done in a resident process ----------
dsock="$tmp/daemon.sock"
jobcg daemon --socket "$dsock" > "$tmp/daemon.log" 2>&1 < /dev/null &
dpid=$!
for _ in $(seq 300); do [ -S "$dsock" ] && break; sleep 0.1; done
check "jobcg daemon listens" test -S "$dsock"
check "jobcg run through the daemon" env JOBCG_DAEMON_SOCKET="$dsock" jobcg run --job 1 -- /bin/true

# An empty program linked like jobcg: the least any launcher built this way pays to start.
empty=""
[ -x "$JDIR/empty" ] && empty="cmd:exec_empty:$JDIR/empty"
# And one with no libc at all: the least an exec costs in this boot.
[ -x "$JDIR/exec-only" ] && empty="$empty cmd:exec_only:$JDIR/exec-only"
# shellcheck disable=SC2086 # $empty is up to two subjects
out=$("$L" -n "$n" -e "$tmp/errors.log" floor "cgfloor:$cg" \
	"cmd:systemd_run:$sr /bin/true" \
	"cmd:crun:/usr/bin/crun run --bundle $b jobcg-bench" \
	"cmd:jobcg_run:$JDIR/jobcg run --no-daemon --job 1 -- /bin/true" \
	"cmd:jobcg_daemon:JOBCG_DAEMON_SOCKET=$dsock $JDIR/jobcg run --job 1 -- /bin/true" \
	"lib:1" "agent:1" "cmd:exec_jobcg:$JDIR/jobcg version" $empty 2>&1)
rc=$?
kill "$dpid"
wait "$dpid"
is "bench/launch ran every subject" "$rc" 0 || diag "$out"
# report OUTPUT N: each subject's JSON for bench/run and a TAP line, ratio to OUTPUT's floor.
report() {
	_floor=$(echo "$1" | grep '"name":"floor' | sed 's/.*"p50_us":\([0-9.]*\).*/\1/')
	echo "$1" | grep '^{' | while IFS= read -r line; do
		echo "# bench-json: $line"
		name=$(echo "$line" | sed 's/.*"name":"\([^"]*\)".*/\1/')
		errs=$(echo "$line" | sed 's/.*"errors":\([0-9]*\).*/\1/')
		p50=$(echo "$line" | sed 's/.*"p50_us":\([0-9.]*\).*/\1/')
		ratio=$(awk -v a="$p50" -v b="$_floor" 'BEGIN { printf "%.2f", a / b }')
		is "$name: $2 launches without error (p50 ${p50}us, ${ratio}x the floor)" "$errs" 0
	done
}
report "$out" "$n"
[ -s "$tmp/errors.log" ] && diag "$(grep -v 'warning:' "$tmp/errors.log" | sort | uniq -c | sort -rn | head -n 20)"
jobcg release 1

# --- Slurm: a one-node cluster (Debian's slurmctld, slurmd, munge), the same job, srun ------
# Started only now: the daemons' background work must not load the subjects above.
srun_n=${BENCH_SRUN_N:-$((n < 50 ? n : 50))}
srun_step() {
	if ! command -v srun > /dev/null || ! command -v slurmd > /dev/null; then
		skip "srun" "Slurm is not in this image (tests/vm/packages)"; return 1
	fi
	# Slurm resolves names with getaddrinfo(AI_ADDRCONFIG), which returns no IPv4 address
	# on a host whose only one is loopback (this VM has no NIC): SlurmctldHost would not
	# resolve. A dummy interface with a documentation address (never routed) fixes that.
	check "a non-loopback IPv4 address for Slurm's name lookups" sh -c \
		'ip link add jobcgbench0 type dummy && ip addr add 192.0.2.1/32 dev jobcgbench0 && ip link set jobcgbench0 up' ||
		return 1
	sd=/run/slurm-bench
	mkdir -p "$sd/ctld" "$sd/d" /etc/slurm
	# The node as slurmd sees it (CPUs, sockets, RealMemory), two stand-in GPUs. TCG on a busy
	# host is slow: timeouts generous. Root runs everything; state and logs on tmpfs.
	node=$(slurmd -C | head -n 1)
	cat > /etc/slurm/slurm.conf <<-EOF
	ClusterName=jobcgbench
	SlurmctldHost=$(hostname)
	SlurmUser=root
	AuthType=auth/munge
	StateSaveLocation=$sd/ctld
	SlurmdSpoolDir=$sd/d
	SlurmctldPidFile=$sd/slurmctld.pid
	SlurmdPidFile=$sd/slurmd.pid
	SlurmctldLogFile=$sd/slurmctld.log
	SlurmdLogFile=$sd/slurmd.log
	ProctrackType=proctrack/cgroup
	TaskPlugin=task/cgroup,task/affinity
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core_Memory
	GresTypes=gpu
	SlurmdTimeout=300
	SlurmctldTimeout=300
	MessageTimeout=60
	ReturnToService=2
	AccountingStorageType=accounting_storage/none
	JobAcctGatherType=jobacct_gather/none
	JobCompType=jobcomp/none
	MpiDefault=none
	$node Gres=gpu:2 State=UNKNOWN
	PartitionName=bench Nodes=$(hostname) Default=YES MaxTime=INFINITE State=UP
	EOF
	printf 'CgroupPlugin=cgroup/v2\nConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n' \
		> /etc/slurm/cgroup.conf
	echo 'Name=gpu File=/dev/nvidia[0-1]' > /etc/slurm/gres.conf
	# Slurm's own containment, no SPANK plugin (a boot that ran 60-slurm left one configured).
	: > /etc/slurm/plugstack.conf
	# munge's postinst made a key when the image was built; make one if it did not.
	[ -s /etc/munge/munge.key ] || { mungekey -c -k /etc/munge/munge.key &&
		chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key; }
	# Masked in the image so the test suite boots without them; slurmd's unit has
	# Delegate=yes, which Slurm's cgroup/v2 plugin needs for its slurmstepd scope.
	check "systemctl unmask munge slurmctld slurmd" systemctl unmask munge.service slurmctld.service slurmd.service &&
		check "systemctl start munge slurmctld slurmd" systemctl start munge.service slurmctld.service slurmd.service ||
		return 1
	i=0
	until [ "$(sinfo -h -n "$(hostname)" -o %t 2> /dev/null)" = idle ] || [ $i -ge 120 ]; do
		sleep 1; i=$((i + 1))
	done
	if ! is "slurmd registers, the node is idle (after ${i}s)" "$(sinfo -h -n "$(hostname)" -o %t 2>&1)" idle; then
		diag "$(scontrol show node 2>&1; tail -n 20 $sd/slurmd.log $sd/slurmctld.log 2>&1)"; return 1
	fi
	like "Slurm uses cgroup/v2" "$(scontrol show config 2>&1 | grep -E '^(CgroupPlugin|ProctrackType|TaskPlugin) ')" \
		'CgroupPlugin += cgroup/v2' || return 1
	# The same job as jobcg's: one CPU, 256M, both GPUs; no shell, steps come from srun --jobid.
	a=$(timeout 180 salloc --no-shell -n 1 -c 1 --mem=256M --gres=gpu:2 -J jobcg-bench 2>&1)
	J=$(echo "$a" | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	if [ -z "$J" ]; then
		not_ok "salloc --no-shell -n 1 -c 1 --mem=256M --gres=gpu:2"; diag "$a"; return 1
	fi
	ok "salloc: job $J with one CPU, 256M and gpu:2"
	# What a step launched like the measured one really gets: its cgroup, its job's cpuset and
	# memory.max, and which GPUs open. There is no driver: an allowed open of a c 195:N node fails with ENXIO, one the
	# device program denies with EPERM.
	# shellcheck disable=SC2016 # expanded by the sh in the step
	probe='p=$(cut -d: -f3 /proc/self/cgroup); j=/sys/fs/cgroup${p%%/step_*}
		echo "cgroup=$p"; echo "cpus=$(cat $j/cpuset.cpus.effective)"; echo "mem=$(cat $j/memory.max)"
		for d in 0 1; do
			e=$(head -c 0 /dev/nvidia$d 2>&1)
			case "$e" in *"not permitted"*) r=EPERM ;; *"No such device or address"*) r=ENXIO ;; "") r=open ;; *) r="$e" ;; esac
			printf "nvidia%s=%s " $d "$r"
		done; echo'
	is "outside Slurm both stand-in GPUs open to the driver (ENXIO)" "$(sh -c "$probe" | tail -n 1)" \
		"nvidia0=ENXIO nvidia1=ENXIO "
	s=$(timeout 120 srun --jobid="$J" --overlap sh -c "$probe" 2>&1)
	like "an srun step runs in slurmd's delegated cgroup v2 tree ($(echo "$s" | sed -n 's/^cgroup=//p'))" \
		"$s" "cgroup=/system.slice/.*_slurmstepd\.scope/job_$J/step_[0-9]+/" || diag "$s"
	is "its job's cpuset is CPU 0" "$(echo "$s" | sed -n 's/^cpus=//p')" 0
	is "its job's memory.max is 256M" "$(echo "$s" | sed -n 's/^mem=//p')" 268435456
	is "the step opens both GPUs of its job" "$(echo "$s" | tail -n 1)" "nvidia0=ENXIO nvidia1=ENXIO "
	s=$(timeout 120 srun --jobid="$J" --overlap --gres=gpu:1 sh -c "$probe" 2>&1)
	is "a step with --gres=gpu:1 opens one GPU, the other is denied (EPERM)" "$(echo "$s" | tail -n 1)" \
		"nvidia0=ENXIO nvidia1=EPERM "
	s=$(timeout 120 srun --jobid="$J" --overlap --gres=gpu:0 sh -c "$probe" 2>&1)
	is "a step with --gres=gpu:0 is denied both (EPERM)" "$(echo "$s" | tail -n 1)" \
		"nvidia0=EPERM nvidia1=EPERM "

	# The measured step: the analog of `jobcg run --job J -- /bin/true`, the job's CPU,
	# memory and GPUs. --overlap: slurmctld frees a step's resources when slurmstepd reports
	# its end, which can come after srun has returned; without it the next step may wait.
	# bench/launch sees only srun's own CPU: the daemons' (slurmctld, slurmd, the
	# slurmstepd scope, munged) is read from their cgroups around the run.
	cgs="/sys/fs/cgroup/system.slice/slurmctld.service /sys/fs/cgroup/system.slice/slurmd.service
		/sys/fs/cgroup/system.slice/munge.service /sys/fs/cgroup/system.slice/$(hostname)_slurmstepd.scope"
	cpu_usec() {
		for c in $cgs; do cat "$c/cpu.stat"; done | awk '$1 == "usage_usec" { s += $2 } END { print s }'
	}
	u0=$(cpu_usec)
	out=$(timeout -k 10 600 "$L" -n "$srun_n" -e "$tmp/errors-srun.log" floor \
		"cmd:srun:srun --jobid=$J --overlap /bin/true" 2>&1)
	rc=$?
	u1=$(cpu_usec)
	is "bench/launch ran srun and its floor" "$rc" 0 || diag "$out"
	# Every srun bench/launch made counts, its warm-up too (n/20+1, bench/launch's default).
	daemons=$(awk -v a="$u0" -v b="$u1" -v n="$srun_n" 'BEGIN { printf "%.2f", (b - a) / (n + int(n / 20) + 1) }')
	out=$(echo "$out" | sed -e 's/"name":"floor"/"name":"floor_srun"/' \
		-e "s/\"name\":\"srun\"/&,\"cpu_daemons_us\":$daemons/")
	report "$out" "$srun_n"
	[ -s "$tmp/errors-srun.log" ] && diag "$(sort "$tmp/errors-srun.log" | uniq -c | sort -rn | head -n 20)"
	scancel "$J"
}
srun_step

# --- Slurm with jobcg_spank.so: srun true on nodes with the plugin against nodes without -----
# The same slurmctld, four slurmd on this guest as nodes n1 and n2 (plugstack.conf with the
# plugin) and n3 and n4 (without), all configured as docs/slurm.md says (linuxproc,
# task/affinity, no cgroup constraints of Slurm's); each srun is a job of its own (allocation,
# step, and with the plugin the job's removal with its step and the step's watcher), one node
# or two, the four subjects interleaved.
spank_step() {
	so="$VMT_SHARE/bin/jobcg_spank.so"
	if [ ! -f "$so" ] || ! command -v slurmd > /dev/null; then
		skip "srun with jobcg_spank.so" "no jobcg_spank.so in this build, or no Slurm"; return 1
	fi
	systemctl stop slurmd.service
	mkdir -p /usr/local/lib/jobcg-bench-spank && cp "$so" /usr/local/lib/jobcg-bench-spank/
	so=/usr/local/lib/jobcg-bench-spank/jobcg_spank.so
	c="$tmp/spank-conf" sp=/run/slurm-bench-spank
	# slurmd's logs come back with the share's out/ (VM_KEEP_SHARE=1), whatever ends this.
	trap 'mkdir -p "$VMT_SHARE/out/slurm-bench" && cp "$sp"/*.log "$VMT_SHARE/out/slurm-bench/" 2> /dev/null' EXIT
	trap 'exit 1' TERM INT
	mkdir -p "$c" "$sp/ctld" "$sp/d-n1" "$sp/d-n2" "$sp/d-n3" "$sp/d-n4"
	# One jobcg tree, state dir and pin dir per node with the plugin, as on two real nodes.
	for n in 1 2; do
		mkdir -p "$c/n$n"
		printf 'ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\nJobcgScope=jobcg-spank-n%s.scope\nStateDir=/run/jobcg-bench-spank-n%s\nBpfPinDir=/sys/fs/bpf/jobcgspank%s\nSystemdTimeout=60000\n' $n $n $n > "$c/n$n/cgroup.conf"
		echo 'Name=gpu File=/dev/nvidia[0-1]' > "$c/n$n/gres.conf"
		# The plugin reads only its own files; this script's JOBCG_* overrides must not reach init.
		check "jobcg init for n$n's tree" env -u JOBCG_STATE_DIR -u JOBCG_BPF_PIN_DIR \
			JOBCG_CONF_DIR="$c/n$n" jobcg init || return 1
	done
	common=$(slurm_conf jobcgbench "$sp" 4 400 bench)
	echo "$common" > /etc/slurm/slurm.conf
	echo 'CgroupPlugin=cgroup/v2' > /etc/slurm/cgroup.conf
	echo 'Name=gpu File=/dev/nvidia[0-1]' > /etc/slurm/gres.conf
	# jobcg=: each step's watcher runs this jobcg (from the guest's disk), not an installed one.
	for n in 1 2; do echo "required $so conf=$c/n$n jobcg=$JDIR/jobcg" > "$sp/plugstack-n$n.conf"; done
	for n in 3 4; do : > "$sp/plugstack-n$n.conf"; done
	# Beside slurm.conf: slurmd reads gres.conf and cgroup.conf from its slurm.conf's directory.
	for n in 1 2 3 4; do
		{ echo "$common"; printf 'SlurmdSpoolDir=%s\nSlurmdPidFile=%s\nSlurmdLogFile=%s\nPlugStackConfig=%s\n' \
			"$sp/d-n$n" "$sp/slurmd-n$n.pid" "$sp/slurmd-n$n.log" "$sp/plugstack-n$n.conf"; } > "/etc/slurm/bench-n$n.conf"
	done
	check "slurmctld restarts with four nodes" systemctl restart slurmctld.service || return 1
	check "slurmd n1, n2 (with the plugin), n3 and n4 (without) start" sh -c \
		"for n in 1 2 3 4; do slurmd -N n\$n -f /etc/slurm/bench-n\$n.conf || exit 1; done" || return 1
	i=0
	until [ "$(sinfo -h -o %t -n n[1-4] 2> /dev/null | sort -u)" = idle ] || [ $i -ge 180 ]; do
		sleep 1; i=$((i + 1))
	done
	is "n1 to n4 are idle (after ${i}s)" "$(sinfo -h -o %t -n n[1-4] 2>&1 | sort -u)" idle ||
		{ diag "$(sinfo -N -o '%N %t %E' 2>&1; tail -n 5 "$sp"/slurmd-n1.log 2>&1)"; return 1; }
	like "a step on n1 runs in jobcg's tree" "$(timeout 120 srun -w n1 --mem=100M cat /proc/self/cgroup 2>&1)" \
		'jobcg-spank-n1.scope/job_[0-9]+/step_0/user/task_0' || return 1
	sn=${BENCH_SPANK_N:-$((srun_n < 25 ? 25 : srun_n))}
	# Each srun bounded (timeout, the same for all four): one that hangs is an error, not the end
	# of the boot.
	out=$(timeout -k 10 900 "$L" -n "$sn" -e "$tmp/errors-spank.log" floor \
		"cmd:srun_jobcg_spank:timeout 120 srun -w n1 --mem=100M /bin/true" \
		"cmd:srun_no_plugin:timeout 120 srun -w n3 --mem=100M /bin/true" \
		"cmd:srun2_jobcg_spank:timeout 120 srun -N2 -w n1,n2 --mem=100M /bin/true" \
		"cmd:srun2_no_plugin:timeout 120 srun -N2 -w n3,n4 --mem=100M /bin/true" 2>&1)
	is "bench/launch ran srun and srun -N2 with and without the plugin" "$?" 0 || diag "$out"
	out=$(echo "$out" | sed -e 's/"name":"floor"/"name":"floor_spank"/')
	report "$out" "$sn"
	p50() { echo "$out" | grep "\"name\":\"$1\"" | sed 's/.*"p50_us":\([0-9.]*\).*/\1/'; }
	for pre in srun srun2; do
		with=$(p50 ${pre}_jobcg_spank) without=$(p50 ${pre}_no_plugin)
		what="srun true"; [ $pre = srun2 ] && what="srun -N2 true"
		[ -n "$with" ] && [ -n "$without" ] &&
			ok "$what with jobcg_spank.so: p50 $(awk -v a="$with" -v b="$without" 'BEGIN { printf "%.2f", a / b }')x the same srun without it (${with}us, ${without}us)"
	done
	[ -s "$tmp/errors-spank.log" ] && diag "$(sort "$tmp/errors-spank.log" | uniq -c | sort -rn | head -n 10)"
	for n in 1 2 3 4; do kill "$(cat "$sp/slurmd-n$n.pid")" 2> /dev/null; done
}
spank_step

rmdir "$cg"/* "$cg" 2>/dev/null
rm -rf "$tmp" /run/jobcg-bench "$JDIR"
done_testing
