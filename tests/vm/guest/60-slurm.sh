# jobcg under a real Slurm (Debian's 22.05: munge, slurmctld, two slurmd on this one guest as
# nodes n1 and n2 with their own ports, spool dirs and jobcg trees) through jobcg_spank.so
# (docs/slurm.md). Each node has two stand-in GPUs (c 195:N, no driver: an allowed open fails
# with ENXIO, one the device program denies with EPERM) in both Slurm's and jobcg's gres.conf.
# The numbered checks are those of docs/slurm.md's test list; the key ones run first without the
# plugin, where they must not hold.
# vmtest-timeout: 1200
. "$VMT_GUEST/lib.sh"
SO="$VMT_SHARE/bin/jobcg_spank.so"
if [ ! -f "$SO" ]; then
	skip "Slurm checks" "no jobcg_spank.so in this build (libslurm-dev's spank.h missing)"
	done_testing
fi
sd=/run/slurm-test
mkdir -p "$sd/ctld" "$sd/d-n1" "$sd/d-n2" /etc/slurm
# Slurm's logs come back with the share's out/ (VM_KEEP_SHARE=1), whatever ends this script.
keep_logs() { mkdir -p "$VMT_SHARE/out/slurm" && cp "$sd"/*.log "$VMT_SHARE/out/slurm/" 2> /dev/null; }
trap keep_logs EXIT
trap 'keep_logs; exit 1' TERM INT
# What the queue and the nodes say, and slurmd's jobcg lines: on any failure.
slurm_state() {
	diag "$(squeue 2>&1; sinfo -N -o '%N %t %E' 2>&1)"
	diag "$(grep -hE 'jobcg|error' "$sd"/slurmd-n*.log 2> /dev/null | tail -n 25)"
}
# On the guest's disk like an installed plugin (an exec'd or mapped file on 9p is slow).
mkdir -p /usr/local/lib/jobcg && cp "$SO" /usr/local/lib/jobcg/jobcg_spank.so
PLUGIN=/usr/local/lib/jobcg/jobcg_spank.so
# The jobcg each step's watcher runs (plugstack.conf's jobcg=), on the disk too.
cp "$(command -v jobcg)" /usr/local/lib/jobcg/jobcg
jd="$(dirname "$(command -v jobcg)")/jobcg-dynamic"
[ ! -f "$jd" ] || cp "$jd" /usr/local/lib/jobcg/
PLUGARGS="jobcg=/usr/local/lib/jobcg/jobcg"

# Slurm resolves names with getaddrinfo(AI_ADDRCONFIG): without a non-loopback IPv4 address
# (this VM has no NIC) its own host name does not resolve. A documentation address, never routed.
check "a non-loopback IPv4 address for Slurm's name lookups" sh -c \
	'ip link add jobcgslurm0 type dummy && ip addr add 192.0.2.2/32 dev jobcgslurm0 && ip link set jobcgslurm0 up'
for i in 0 1 2 3; do
	[ -e /dev/nvidia$i ] || mknod /dev/nvidia$i c 195 $i
done

# --- jobcg: one tree, state dir and pin dir per Slurm node ---------------------------------
for n in 1 2; do
	c=/etc/jobcg/n$n
	mkdir -p "$c"
	cat > "$c/cgroup.conf" <<-EOF
	ConstrainCores=yes
	ConstrainRAMSpace=yes
	ConstrainDevices=yes
	JobcgScope=jobcg-n$n.scope
	StateDir=/run/jobcg-n$n
	BpfPinDir=/sys/fs/bpf/jobcg-n$n
	SystemdTimeout=30000
	EOF
	a=$(( (n - 1) * 2 ))
	echo "Name=gpu File=/dev/nvidia[$a-$((a + 1))]" > "$c/gres.conf"
	check "jobcg init for node n$n (its own scope jobcg-n$n.scope)" env JOBCG_CONF_DIR="$c" jobcg init
done
j1() { JOBCG_CONF_DIR=/etc/jobcg/n1 jobcg "$@"; }

# --- Slurm: the controller and two nodes; each slurmd its own slurm.conf for its paths ------
# This suite's own key: KillWait=5, a cancelled step's SIGKILL 5 s after its SIGTERM, not 30.
# enable_configless: check 14 restarts n2 fetching its configuration from slurmctld.
common=$(slurm_conf jobcgtest "$sd" 2 600 test KillWait=5 SlurmctldParameters=enable_configless)
{ echo "$common"; echo "PlugStackConfig=/etc/slurm/plugstack.conf"; } > /etc/slurm/slurm.conf
echo "required $PLUGIN conf=/etc/jobcg/%n $PLUGARGS" > /etc/slurm/plugstack.conf
for n in 1 2; do
	{
		echo "$common"
		echo "SlurmdSpoolDir=$sd/d-n$n"
		echo "SlurmdPidFile=$sd/slurmd-n$n.pid"
		echo "SlurmdLogFile=$sd/slurmd-n$n.log"
		echo "SlurmdDebug=debug"
		echo "PlugStackConfig=/etc/slurm/plugstack-n$n.conf"
	} > /etc/slurm/n$n.conf
	echo "required $PLUGIN conf=/etc/jobcg/n$n $PLUGARGS" > /etc/slurm/plugstack-n$n.conf
done
cat > /etc/slurm/gres.conf <<-EOF
NodeName=n1 Name=gpu File=/dev/nvidia[0-1]
NodeName=n2 Name=gpu File=/dev/nvidia[2-3]
EOF
# No Constrain* in Slurm's cgroup.conf: jobcg contains the steps.
echo "CgroupPlugin=cgroup/v2" > /etc/slurm/cgroup.conf

[ -s /etc/munge/munge.key ] || { mungekey -c -k /etc/munge/munge.key &&
	chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key; }
check "systemctl unmask munge slurmctld" systemctl unmask munge.service slurmctld.service
check "munge and slurmctld start" systemctl start munge.service slurmctld.service
for n in 1 2; do
	check "slurmd -N n$n starts (port 1700$n)" slurmd -N n$n -f /etc/slurm/n$n.conf
done
i=0
until [ "$(sinfo -h -o %t -n n1,n2 2> /dev/null | sort -u)" = idle ] || [ $i -ge 150 ]; do
	sleep 1; i=$((i + 1))
done
if ! is "both nodes register and are idle (after ${i}s)" "$(sinfo -h -o %t -n n1,n2 2>&1 | sort -u)" idle; then
	diag "$(sinfo 2>&1; tail -n 20 $sd/slurmd-n1.log $sd/slurmctld.log 2>&1)"
	done_testing
fi

# What a task sees: its node, cgroup, GPU variables, and which of its node's GPUs open.
# shellcheck disable=SC2016 # expanded by the sh in the step
probe='case $SLURMD_NODENAME in n1) a=0 ;; *) a=2 ;; esac
	r=""
	for d in $a $((a + 1)); do
		e=$(head -c 0 /dev/nvidia$d 2>&1)
		case "$e" in *"not permitted"*) e=EPERM ;; *"No such device or address"*) e=ENXIO ;; "") e=open ;; esac
		r="$r nvidia$d=$e"
	done
	echo "$SLURMD_NODENAME task$SLURM_LOCALID cg=$(cut -d: -f3 /proc/self/cgroup) cuda=${CUDA_VISIBLE_DEVICES-unset} cpus=$(sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status)$r"'
S="timeout -k 5 60 srun --mem=100M"
# n1's jobcg tree root as /proc/self/cgroup shows it (CgroupSlice/JobcgScope).
root1=/system.slice/jobcg-n1.scope

# settle: every job has ended (a job is COMPLETING until its steps are done), and no node was
# drained; a drained node is named and resumed so that the next check can run.
settle() {
	_i=0
	while [ -n "$(squeue -h 2> /dev/null)" ] && [ $_i -lt 60 ]; do sleep 1; _i=$((_i + 1)); done
	[ $_i -lt 60 ] || diag "jobs still there after 60 s: $(squeue 2>&1)"
	_d=$(sinfo -h -N -t drain,drained,draining,down -o '%N: %E' 2> /dev/null)
	if [ -n "$_d" ]; then
		diag "drained: $_d"
		scontrol update nodename=n1,n2 state=resume 2> /dev/null
	fi
}
# plugin_off N / plugin_on N: the node's plugstack.conf without / with the plugin. slurmstepd
# reads it for each step: no restart (the plugin has no epilog hook, which slurmd would notice
# only at its start).
plugin_off() { settle; for n in "$@"; do : > /etc/slurm/plugstack-n$n.conf; done; }
plugin_on() { settle; for n in "$@"; do echo "required $PLUGIN conf=/etc/jobcg/n$n $PLUGARGS" > /etc/slurm/plugstack-n$n.conf; done; }
# must_fail_without "N..." TAG WHAT CHECK [ARGS]: with the plugin off on nodes N, CHECK must
# fail (every check must); WHAT says what its failure shows. The plugin is back on afterwards.
must_fail_without() {
	nodes=$1 tag=$2 what=$3
	shift 3
	plugin_off $nodes
	if out=$("$@"); then not_ok "$tag (without the plugin): the check must fail"; diag "$out"
	else ok "$tag (without the plugin): $what"; diag "$out"; fi
	plugin_on $nodes
}
# with_plugin TAG OK NOT_OK CHECK [ARGS]: with the plugin on, CHECK must pass; OK and NOT_OK
# say what it showed. Its output goes to the TAP log either way.
with_plugin() {
	tag=$1 yes=$2 no=$3
	shift 3
	if out=$("$@"); then ok "$tag: $yes"; diag "$out"
	else not_ok "$tag: $no"; diag "$out"; slurm_state; fi
}
# both_ways NODES TAG WITHOUT OK NOT_OK CHECK: must_fail_without, then with_plugin.
both_ways() {
	nodes=$1 tag=$2 without=$3 yes=$4 no=$5
	shift 5
	must_fail_without "$nodes" "$tag" "$without" "$@"
	with_plugin "$tag" "$yes" "$no" "$@"
}

# --- 1. srun -N2 -n2 --gres=gpu:1 -----------------------------------------------------------
check1() {
	out=$($S -N2 -n2 --gres=gpu:1 sh -c "$probe" 2>&1)
	J=$(echo "$out" | sed -n 's/.*cg=.*job_\([0-9]*\)\/.*/\1/p' | head -n 1)
	ok1=0
	for n in n1 n2; do
		l=$(echo "$out" | grep "^$n ")
		echo "$l" | grep -qE "^$n task0 cg=/system.slice/jobcg-$n.scope/job_[0-9]+/step_0/user/task_0 cuda=0 .* nvidia[0-9]=(ENXIO nvidia[0-9]=EPERM|EPERM nvidia[0-9]=ENXIO)\$" ||
			ok1=1
	done
	echo "$out"
	return $ok1
}
both_ways "1 2" 1 "tasks are not in jobcg's tree and open both GPUs" \
	"srun -N2 -n2 --gres=gpu:1: each task in job_<id>/step_0/user/task_0 on its node, its GPU opens, the other is EPERM, CUDA_VISIBLE_DEVICES=0" \
	"srun -N2 -n2 --gres=gpu:1 in jobcg's tree with one GPU per node" check1

# --- 2. two jobs on n1 at once, one GPU each ------------------------------------------------
check2() {
	# Each probes after a pause, so both are running when either probes.
	$S -w n1 -n1 --gres=gpu:1 sh -c "sleep 6; $probe" > "$sd/c2a" 2>&1 &
	a=$!
	$S -w n1 -n1 --gres=gpu:1 sh -c "sleep 6; $probe" > "$sd/c2b" 2>&1 &
	b=$!
	wait $a $b
	A=$(grep '^n1' "$sd/c2a") B=$(grep '^n1' "$sd/c2b")
	printf '%s\n%s\n' "$A" "$B"
	ja=$(echo "$A" | sed -n 's/.*job_\([0-9]*\).*/\1/p') jb=$(echo "$B" | sed -n 's/.*job_\([0-9]*\).*/\1/p')
	[ -n "$ja" ] && [ -n "$jb" ] && [ "$ja" != "$jb" ] || return 1
	# Disjoint: one opens nvidia0 and is denied nvidia1, the other the reverse.
	ga=$(echo "$A" | grep -o 'nvidia[01]=ENXIO' | tr '\n' ' ') gb=$(echo "$B" | grep -o 'nvidia[01]=ENXIO' | tr '\n' ' ')
	pa=$(echo "$A" | grep -o 'nvidia[01]=EPERM' | wc -l) pb=$(echo "$B" | grep -o 'nvidia[01]=EPERM' | wc -l)
	[ "$pa" = 1 ] && [ "$pb" = 1 ] && [ -n "$ga" ] && [ -n "$gb" ] && [ "$ga" != "$gb" ]
}
both_ways 1 2 "two jobs' GPUs are not kept apart" \
	"two jobs on n1 at once with --gres=gpu:1 each: disjoint GPUs, each denied the other's" \
	"two jobs on n1 at once hold disjoint GPUs" check2

# --- 3. sbatch with two srun steps: batch, 0 and 1 in jobcg's accounting ---------------------
check3() {
	out=$(timeout -k 5 180 sbatch --wait -w n1 -n1 --mem=100M --gres=gpu:1 -o "$sd/c3.out" \
		--wrap 'srun true; srun sh -c "exit 3"; exit 2' 2>&1)
	J=$(echo "$out" | sed -n 's/.*Submitted batch job \([0-9]*\).*/\1/p')
	[ -n "$J" ] || { echo "$out"; return 1; }
	recs=$(grep "\"job\":$J," /run/jobcg-n1/acct.jsonl 2> /dev/null)
	echo "$recs" | cut -c1-160
	for want in '"step":"batch".*"exit_code":2,' '"step":"0".*"exit_code":0,' '"step":"1".*"exit_code":3,'; do
		echo "$recs" | grep -qE "\"type\":\"step\".*$want" || { cat "$sd/c3.out" 2>&1; return 1; }
	done
	# One record per Slurm step, and no job record: the plugin removes the job with its last
	# step and records none for it (the steps of a job may come one after another).
	n=$(echo "$recs" | grep -c '"type":"step"') nj=$(echo "$recs" | grep -c '"type":"job"')
	echo "step records: $n, job records: $nj"
	[ "$n" = 3 ] && [ "$nj" = 0 ]
}
both_ways 1 3 "no jobcg records" \
	"sbatch with two srun steps: jobcg acct has batch (2), 0 (0) and 1 (3), one record each, no job record" \
	"sbatch's steps batch, 0 and 1 in jobcg's accounting with their exit codes" check3
settle
is "after the jobs ended, n1's tree has no job left (each went with its last step)" \
	"$(ls -d /sys/fs/cgroup/system.slice/jobcg-n1.scope/job_* 2> /dev/null)" ""

# --- 6. fail closed: jobcg's configuration broken on n1 ---------------------------------------
# The step is still recorded, FAILED with its reason, in the log cgroup.conf's StateDir names
# (read past the error, which locates nothing), written when its slurmstepd ends.
check6() {
	rm -f "$sd/c6.ran"
	out=$($S -w n1 -n1 touch "$sd/c6.ran" 2>&1); rc=$?
	echo "srun rc=$rc: $out"
	grep 'jobcg: job' "$sd/slurmd-n1.log" | tail -n 2
	J=$(echo "$out" | sed -n "s/.*jobcg: job \([0-9]*\) step 0: loading jobcg's configuration.*/\1/p" | head -n 1)
	rec=
	i=0
	while [ -n "$J" ] && [ -z "$rec" ] && [ $i -lt 20 ]; do
		rec=$(grep "\"job\":$J," /run/jobcg-n1/acct.jsonl 2> /dev/null | grep '"step":"0"')
		[ -n "$rec" ] || sleep 0.5
		i=$((i + 1))
	done
	echo "record of $J.0: $rec"
	[ $rc -ne 0 ] && [ ! -e "$sd/c6.ran" ] &&
		grep -q "jobcg: job [0-9]* step 0: loading jobcg's configuration: .*NoSuchKeyEver" "$sd/slurmd-n1.log" &&
		echo "$rec" | grep -q '"state":"FAILED"' && echo "$rec" | grep -q '"reason":"jobcg: job [0-9]* step 0: loading .*NoSuchKeyEver'
}
cp /etc/jobcg/n1/cgroup.conf "$sd/cgroup.conf.good"
echo "NoSuchKeyEver=1" >> /etc/jobcg/n1/cgroup.conf
both_ways 1 6 "the task runs whatever jobcg's configuration says" \
	"with jobcg's configuration broken the task does not run, srun fails, slurmd's log says why, jobcg acct has it FAILED with the reason" \
	"fail closed" check6
cp "$sd/cgroup.conf.good" /etc/jobcg/n1/cgroup.conf

settle
# --- 7. --cpu-bind=map_cpu:1,0 -n2: each task keeps what Slurm bound ------------------------
# Slurm's task/affinity binds the tasks with or without the plugin, so the mask alone proves
# nothing of jobcg. What the plugin adds is that the binding survives the move into jobcg's
# cpuset cgroup (before Linux 6.2 the move resets it): the check wants both, the task in its
# jobcg task cgroup and Slurm's mask. Without the plugin the first half fails.
check7() {
	out=$($S -w n1 -n2 --cpu-bind=map_cpu:1,0 sh -c "$probe" 2>&1)
	echo "$out"
	echo "$out" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 .*cpus=1 " &&
		echo "$out" | grep -qE "^n1 task1 cg=$root1/job_[0-9]+/step_0/user/task_1 .*cpus=0 "
}
both_ways 1 7 "Slurm binds the tasks, but they are not in jobcg's task cgroups" \
	"--cpu-bind=map_cpu:1,0: task 0 on CPU 1, task 1 on CPU 0, each in its jobcg task cgroup" \
	"--cpu-bind=map_cpu:1,0 kept inside jobcg's task cgroups" check7

# --- 8. --mem=64M and a memory hog: the step's memory.max, OUT_OF_MEMORY in jobcg's record ---
# Without the plugin nothing limits the hog (Slurm constrains no memory here) and jobcg has no
# record of the step.
check8() {
	# shellcheck disable=SC2016 # expanded by the sh in the step
	out=$(timeout -k 5 120 srun -w n1 -n1 --mem=64M sh -c 't=$(cut -d: -f3 /proc/self/cgroup); echo step.max=$(cat /sys/fs/cgroup${t%/user/*}/memory.max); echo job=$SLURM_JOB_ID; exec vmt-memhog 200' 2>&1)
	J=$(echo "$out" | sed -n 's/^job=//p')
	rec=$(grep "\"job\":$J," /run/jobcg-n1/acct.jsonl 2> /dev/null | grep '"step":"0"')
	echo "$out" | grep -v '^touched'
	echo "record: $rec" | cut -c1-200
	echo "$out" | grep -q '^step.max=67108864$' && echo "$rec" | grep -q '"state":"OUT_OF_MEMORY"'
}
both_ways 1 8 "no memory.max of jobcg's, no OUT_OF_MEMORY record" \
	"--mem=64M: the step's memory.max is 64M, jobcg's record of the step says OUT_OF_MEMORY" \
	"--mem=64M: memory.max of the step and OUT_OF_MEMORY" check8

# --- 8b. ConstrainCores=no, ConstrainRAMSpace=no in jobcg's cgroup.conf ---------------------
# As with Slurm's task/cgroup, the allocation's cores and memory are then no limits: the task is
# in jobcg's tree (its devices still contained), without cpuset.cpus or memory.max of its own.
check8b() {
	# shellcheck disable=SC2016 # expanded by the sh in the step
	out=$(timeout -k 5 120 srun -w n1 -n1 -c1 --mem=64M sh -c 't=$(cut -d: -f3 /proc/self/cgroup); s=/sys/fs/cgroup${t%/user/*}; j=${s%/step_*}; echo cg=$t; echo step.max=$(cat $s/memory.max) job.max=$(cat $j/memory.max) step.cpus=[$(cat $s/cpuset.cpus)] job.cpus=[$(cat $j/cpuset.cpus)]' 2>&1)
	echo "$out"
	echo "$out" | grep -qE "^cg=$root1/job_[0-9]+/step_0/user/task_0\$" &&
		echo "$out" | grep -q '^step.max=max job.max=max step.cpus=\[\] job.cpus=\[\]$'
}
sed -e 's/^ConstrainCores=yes/ConstrainCores=no/' -e 's/^ConstrainRAMSpace=yes/ConstrainRAMSpace=no/' \
	"$sd/cgroup.conf.good" > /etc/jobcg/n1/cgroup.conf
both_ways 1 8b "the task is not in jobcg's tree" \
	"ConstrainCores=no, ConstrainRAMSpace=no: the task in jobcg's tree, no cpuset.cpus or memory.max from Slurm's allocation" \
	"Slurm's cores and memory are limits only where jobcg's cgroup.conf constrains them" check8b
cp "$sd/cgroup.conf.good" /etc/jobcg/n1/cgroup.conf

# --- 9. srun --jobid --overlap into a running job lands in that job -------------------------
# And jobcg's own tools see the Slurm job while it lives (the step left, the job stays).
check9() {
	a=$(timeout 120 salloc --no-shell -w n1 -n1 --mem=100M --gres=gpu:1 2>&1)
	J=$(echo "$a" | sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p')
	[ -n "$J" ] || { echo "salloc --no-shell: $a"; return 1; }
	# The step waits for c9.go, so that jobcg's tools look while it runs.
	rm -f "$sd/c9.go"
	timeout -k 5 120 srun --jobid="$J" --overlap sh -c "$probe; i=0; while [ ! -e $sd/c9.go ] && [ \$i -lt 60 ]; do sleep 1; i=\$((i + 1)); done" > "$sd/c9" 2>&1 &
	sp=$!
	i=0
	until grep -q 'cg=' "$sd/c9" || [ $i -ge 60 ]; do sleep 1; i=$((i + 1)); done
	l=$(j1 list 2>&1)
	w=$(j1 who-has /dev/nvidia0 2>&1; j1 who-has /dev/nvidia1 2>&1)
	touch "$sd/c9.go"
	wait $sp
	out=$(cat "$sd/c9")
	# Its only step on n1 ended: the job leaves the node (slurmstepd's exit hook, which may
	# run just after srun returned), though Slurm's allocation stays. The next step makes it
	# again.
	i=0
	while [ -d "/sys/fs/cgroup$root1/job_$J" ] && [ $i -lt 10 ]; do sleep 1; i=$((i + 1)); done
	gone=$(ls -d "/sys/fs/cgroup$root1/job_$J" 2> /dev/null)
	out2=$(timeout -k 5 120 srun --jobid="$J" --overlap sh -c "$probe" 2>&1)
	scancel "$J"
	printf 'job %s\nsrun: %s\njobcg list: %s\nwho-has: %s\nbetween the steps: %s\nsecond srun: %s\n' \
		"$J" "$out" "$l" "$w" "${gone:-no job_$J}" "$out2"
	echo "$out" | grep -qE "cg=$root1/job_$J/step_[0-9]+/user/task_0 " &&
		echo "$l" | grep -qE "^ *$J .*gpu:[01]" && echo "$w" | grep -q "job_$J" &&
		[ -z "$gone" ] && echo "$out2" | grep -qE "cg=$root1/job_$J/step_[0-9]+/user/task_0 "
}
both_ways 1 9 "the step is not in jobcg's tree, jobcg knows no job" \
	"srun --jobid --overlap runs in that job's tree; jobcg list and who-has show the Slurm job and its GPU; between two steps the job leaves the node, the next step makes it again" \
	"srun --jobid --overlap lands in the running job" check9

# --- 4. scancel of a job whose task daemonised ----------------------------------------------
# check4 TAG: the escapee is `sleep TAG`, unique per run, daemonised the usual way: a new
# session, and its parent (the subshell) gone, so that init adopts it. linuxproc follows only
# parent links from slurmstepd: without the plugin the escapee survives scancel and the job
# (srun returns once slurmstepd stops waiting for the step's output); it is killed by pid
# afterwards. (An escapee whose parent still runs is found by linuxproc, plugin or not.)
check4() {
	# shellcheck disable=SC2016 # expanded in the step
	timeout -k 5 120 srun -w n1 -n1 --mem=50M sh -c "(setsid sleep $1 < /dev/null &); echo started job=\$SLURM_JOB_ID; sleep 1000" > "$sd/c4" 2>&1 &
	sp=$!
	i=0
	until grep -q started "$sd/c4" || [ $i -ge 60 ]; do sleep 1; i=$((i + 1)); done
	J=$(sed -n 's/^started job=//p' "$sd/c4")
	esc=$(pgrep -f "^sleep $1\$")
	[ -n "$J" ] && [ -n "$esc" ] || { echo "no job or no escapee: $(cat "$sd/c4")"; kill $sp; return 1; }
	ppid=$(ps -o ppid= -p "$esc" | tr -d ' ')
	t0=$(date +%s)
	scancel "$J"
	i=0
	while kill -0 $sp 2> /dev/null && [ $i -lt 15 ]; do sleep 1; i=$((i + 1)); done
	kill -0 $sp 2> /dev/null && back=no || back="after $(( $(date +%s) - t0 ))s"
	sleep 2
	alive=$(pgrep -f "^sleep $1\$" | wc -l)
	# Leave nothing behind: the escapee by its pid, then srun ends.
	[ "$alive" = 0 ] || kill $esc
	wait $sp
	i=0
	until [ ! -d "/sys/fs/cgroup$root1/job_$J" ] || [ $i -ge 30 ]; do sleep 1; i=$((i + 1)); done
	cg=$(ls -d "/sys/fs/cgroup$root1/job_$J" 2> /dev/null)
	grants=$(j1 policy 2>&1 | grep -c "job_$J")
	echo "job $J: escapee's parent pid $ppid ($(ps -o comm= -p "$ppid" 2> /dev/null)); srun returned: $back; escapee alive: $alive; cgroup left: '$cg'; grants left: $grants"
	[ "$back" != no ] && [ "$alive" = 0 ] && [ -z "$cg" ] && [ "$grants" = 0 ]
}
settle
must_fail_without 1 4 "the daemonised task survives scancel" check4 1016
with_plugin 4 "scancel: the escapee dies, srun returns within 15 s, job cgroup and device grants are gone" \
	"scancel of a job whose task daemonised" check4 1017

# --- 5. kill -9 of a slurmstepd: its watcher ends the step, nothing remains -----------------
# check5 TAG: the task is `sleep TAG`, with a daemonised escapee `sleep TAG+1`. With its
# slurmstepd killed linuxproc cannot reach either: only the plugin's watcher (`jobcg
# step-watch`, waiting on slurmstepd's exit) ends them, at once, while Slurm's job still runs.
# Killed by pid afterwards if alive.
check5() {
	e=$(($1 + 1))
	# shellcheck disable=SC2016 # expanded in the step
	timeout -k 5 120 srun -w n1 -n1 --mem=50M sh -c "(setsid sleep $e < /dev/null &); echo started job=\$SLURM_JOB_ID; exec sleep $1" > "$sd/c5" 2>&1 &
	sp=$!
	i=0
	until grep -q started "$sd/c5" || [ $i -ge 60 ]; do sleep 1; i=$((i + 1)); done
	J=$(sed -n 's/^started job=//p' "$sd/c5")
	pid=$(pgrep -f "slurmstepd: \[$J\.0\]")
	task=$(pgrep -f "^sleep $1\$") esc=$(pgrep -f "^sleep $e\$")
	[ -n "$J" ] && [ -n "$pid" ] && [ -n "$task" ] && [ -n "$esc" ] ||
		{ echo "no step $J.0 with its slurmstepd ($pid), task ($task) and escapee ($esc): $(cat "$sd/c5")"; kill $sp; return 1; }
	watcher=$(pgrep -f "step-watch .* $J\.0 ")
	t0=$(date +%s)
	kill -9 $pid
	i=0
	while [ $i -lt 10 ] && { pgrep -f "^sleep ($1|$e)\$" > /dev/null || [ -d "/sys/fs/cgroup$root1/job_$J" ]; }; do
		sleep 1; i=$((i + 1))
	done
	took=$(( $(date +%s) - t0 ))
	alive=$(pgrep -f "^sleep ($1|$e)\$" | wc -l)
	cg=$(ls -d "/sys/fs/cgroup$root1/job_$J" 2> /dev/null)
	grants=$(j1 policy 2>&1 | grep -c "job_$J")
	rec=$(grep "\"job\":$J," /run/jobcg-n1/acct.jsonl 2> /dev/null | grep '"step":"0"' | grep -o '"state":"[A-Z_]*"')
	# Leave nothing behind: the task and escapee by pid, then Slurm's job.
	[ "$alive" = 0 ] || kill $task $esc 2> /dev/null
	scancel "$J"
	wait $sp
	settle
	echo "job $J: slurmstepd $pid killed, its watcher was pid ${watcher:-none}; after ${took}s: task and escapee alive: $alive; cgroup left: '$cg'; grants left: $grants; record of $J.0: ${rec:-none}"
	[ "$alive" = 0 ] && [ -z "$cg" ] && [ "$grants" = 0 ] && [ "$rec" = '"state":"NODE_FAIL"' ]
}
must_fail_without 1 5 "the task of a killed slurmstepd and its escapee live on" check5 1018
with_plugin 5 "kill -9 of slurmstepd: within seconds its watcher kills the task and its escapee, records NODE_FAIL, removes job, cgroup and grants" \
	"kill -9 of slurmstepd: the watcher ends the step and removes the job" check5 1020

# --- 10. --gpu-bind: each task only its GPU ---------------------------------------------------
# Slurm 22.05 binds a task's GPUs (--gpu-bind) in the task itself, after the last hook in which
# the plugin can still change cgroups, and keeps the option out of the step's environment: the
# plugin can narrow a task's cgroup only where SLURM_GPU_BIND is in that environment (sbatch or
# salloc --gpu-bind, or exported, which srun also takes as its option). Slurm alone then sets
# each task's CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS only; with the plugin each task's cgroup
# has only its GPU, so the other one is EPERM.
probe10='; echo "n1 env$SLURM_LOCALID: SLURM_GPU_BIND=${SLURM_GPU_BIND-unset} SLURM_STEP_GPUS=${SLURM_STEP_GPUS-unset} JOBCG_STEP_GPUS=${JOBCG_STEP_GPUS-unset}"'
check10() {
	out=$(SLURM_GPU_BIND=map_gpu:0,1 $S -w n1 -n2 --gres=gpu:2 sh -c "$probe$probe10" 2>&1)
	echo "$out"
	echo "$out" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 cuda=0 .* nvidia0=ENXIO nvidia1=EPERM\$" &&
		echo "$out" | grep -qE "^n1 task1 cg=$root1/job_[0-9]+/step_0/user/task_1 cuda=0 .* nvidia0=EPERM nvidia1=ENXIO\$"
}
settle
both_ways 1 10 "--gpu-bind sets the environment only, each task opens both GPUs" \
	"SLURM_GPU_BIND=map_gpu:0,1 srun -n2 --gres=gpu:2: task 0 opens only nvidia0, task 1 only nvidia1, each CUDA_VISIBLE_DEVICES=0" \
	"--gpu-bind from the step's environment gives each task only its GPU" check10
# srun --gpu-bind on the command line: the binding is Slurm's alone, the task's cgroup has the
# step's GPUs, and its variables must still say what Slurm bound, numbered within those
# (before, the plugin replaced them with the whole step's: cuda=0,1 for both tasks).
check10b() {
	out=$($S -w n1 -n2 --gres=gpu:2 --gpu-bind=map_gpu:1,0 sh -c "$probe$probe10" 2>&1)
	echo "$out"
	echo "$out" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 cuda=1 " &&
		echo "$out" | grep -qE "^n1 task1 cg=$root1/job_[0-9]+/step_0/user/task_1 cuda=0 "
}
with_plugin 10b "srun --gpu-bind=map_gpu:1,0: each task in its jobcg cgroup keeps Slurm's binding in CUDA_VISIBLE_DEVICES (1, 0)" \
	"srun --gpu-bind keeps Slurm's per-task CUDA_VISIBLE_DEVICES" check10b

# --- 11. GPU variables a user exports give no GPU ---------------------------------------------
# The plugin takes a step's GPUs from SLURM_STEP_GPUS (SLURM_JOB_GPUS for the batch step), which
# Slurm's gpu GRES plugin sets or clears for every step whatever the submitter's environment
# held (docs/slurm.md, "Limits"). A user who exports them gets no GPU without --gres, and only
# the one Slurm gave with --gres=gpu:1; so does a batch script submitted with them.
check11() {
	forged="SLURM_STEP_GPUS=0,1 SLURM_JOB_GPUS=0,1"
	a=$(env $forged $S -w n1 -n1 sh -c "$probe" 2>&1)
	b=$(env $forged $S -w n1 -n1 --gres=gpu:1 sh -c "$probe" 2>&1)
	rm -f "$sd/c11.out"
	c=$(env $forged timeout -k 5 180 sbatch --wait --export=ALL -w n1 -n1 --mem=100M \
		-o "$sd/c11.out" --wrap "$probe" 2>&1)
	c="$c
$(cat "$sd/c11.out" 2>&1)"
	printf 'srun, no --gres: %s\nsrun --gres=gpu:1: %s\nsbatch, no --gres: %s\n' "$a" "$b" "$c"
	echo "$a" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 .* nvidia0=EPERM nvidia1=EPERM\$" &&
		echo "$b" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 .* (nvidia0=ENXIO nvidia1=EPERM|nvidia0=EPERM nvidia1=ENXIO)\$" &&
		echo "$c" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_batch/user/task_0 .* nvidia0=EPERM nvidia1=EPERM\$"
}
settle
both_ways 1 11 "the exported variables' GPUs open" \
	"SLURM_STEP_GPUS=0,1 SLURM_JOB_GPUS=0,1 exported: srun without --gres opens no GPU, with --gres=gpu:1 one, a batch script none" \
	"GPU variables in the submitter's environment give no GPU" check11

# --- 12. Slurm's gres.conf not found: steps with GPUs fail, jobcg check says so ---------------
# The comparison with Slurm's gres.conf is what keeps Slurm's GPU indices on the devices Slurm
# meant: when the plugin does not find the file beside the slurm.conf slurmd reads (SLURM_CONF,
# here n1's -f /etc/slurm/n1.conf) and plugstack.conf names none, a step with GPUs fails and one
# without runs. `jobcg check`, with no SLURM_CONF, looks in /etc/slurm and /run/slurm/conf. slurmd read its gres.conf at its start: moving it away now
# changes only what the plugin and jobcg check find. (Not a containment check: plugin only.)
check12() {
	c1=$(JOBCG_NODENAME=n1 j1 check 2>&1 | grep "^Slurm's gres.conf:")
	mv /etc/slurm/gres.conf "$sd/slurm-gres.conf.away"
	a=$($S -w n1 -n1 --gres=gpu:1 true 2>&1); arc=$?
	b=$($S -w n1 -n1 true 2>&1); brc=$?
	c2=$(JOBCG_NODENAME=n1 j1 check 2>&1 | grep "^Slurm's gres.conf:")
	mv "$sd/slurm-gres.conf.away" /etc/slurm/gres.conf
	log=$(grep "mapping Slurm's GPUs onto jobcg's gres.conf" "$sd/slurmd-n1.log" | tail -n 1)
	printf 'check, file there: %s\nsrun --gres=gpu:1: rc %s %s\nsrun: rc %s %s\ncheck, file gone: %s\nslurmd: %s\n' \
		"$c1" "$arc" "$a" "$brc" "$b" "$c2" "$log"
	echo "$c1" | grep -q "/etc/slurm/gres.conf lists this node's 2 GPU(s)" &&
		[ "$arc" -ne 0 ] && [ "$brc" -eq 0 ] &&
		echo "$log" | grep -q "not in /etc/slurm (the directory of SLURM_CONF=/etc/slurm/n1.conf): name it with slurm_gres=PATH" &&
		echo "$c2" | grep -q "jobcg_spank.so is loaded, but Slurm's gres.conf is not in /etc/slurm or /run/slurm/conf"
}
settle
with_plugin 12 "Slurm's gres.conf moved away: a step with a GPU fails naming slurm_gres=, one without runs, jobcg check says why (and found the file in /etc/slurm before)" \
	"the plugin and jobcg check refuse to go without Slurm's gres.conf" check12

# --- 13. jobcg check: GresTypes=gpu in the slurm.conf beside the plugstack.conf ----------------
# Only Slurm's gpu GRES plugin sets or clears SLURM_STEP_GPUS (check 11); without gpu in
# GresTypes= a user's value would reach the plugin. slurmctld read slurm.conf at its start:
# rewriting it for a moment changes only what jobcg check reads.
check13() {
	a=$(JOBCG_NODENAME=n1 j1 check 2>&1 | grep "^Slurm's GresTypes:")
	cp /etc/slurm/slurm.conf "$sd/slurm.conf.keep"
	grep -v '^GresTypes=' "$sd/slurm.conf.keep" > /etc/slurm/slurm.conf
	b=$(JOBCG_NODENAME=n1 j1 check 2>&1 | grep "^Slurm's GresTypes:")
	brc=$(JOBCG_NODENAME=n1 j1 check --json > "$sd/c13.json" 2>&1; echo $?)
	cp "$sd/slurm.conf.keep" /etc/slurm/slurm.conf
	j=$(tr -d ' \n\t' < "$sd/c13.json" | grep -o '"slurm_gres_types":{[^}]*}')
	printf 'with GresTypes=gpu: %s\nwithout: %s (rc %s)\njson: %s\n' "$a" "$b" "$brc" "$j"
	echo "$a" | grep -q "/etc/slurm/slurm.conf lists gpu" &&
		echo "$b" | grep -q "does not list gpu in GresTypes=" && [ "$brc" -ne 0 ] &&
		[ "$j" = '"slurm_gres_types":{"file":"/etc/slurm/slurm.conf","gpu":false,"error":null}' ]
}
with_plugin 13 "jobcg check finds GresTypes=gpu in the slurm.conf beside the plugstack.conf that loads the plugin, and fails without it" \
	"jobcg check says whether Slurm's GresTypes lists gpu" check13

# --- 14. a configless node: the plugin compares with the gres.conf slurmd fetched ------------
# slurmd exports the slurm.conf it reads as SLURM_CONF to each slurmstepd (-f, its configless
# cache or the default), and Slurm reads gres.conf beside it: the plugin compares with that file,
# whatever /etc/slurm holds. n2 restarts configless (--conf-server: slurmctld sends its files,
# slurmd keeps them in <SlurmdSpoolDir>/conf-cache, linked from /run/slurm/conf). Then
# /etc/slurm/gres.conf lists n2's GPUs swapped: a step with a GPU still runs on its GPU (the
# cache agrees with jobcg's); then the cache's copy is swapped instead: the step fails naming it.
n2_restart() { # n2_restart ARGS...: n2's slurmd stopped, started again with ARGS, idle
	p=$(pgrep -f "^slurmd -N n2( |\$)" | head -n 1)
	[ -z "$p" ] || kill "$p"
	_i=0
	while [ -n "$p" ] && kill -0 "$p" 2> /dev/null && [ $_i -lt 30 ]; do sleep 1; _i=$((_i + 1)); done
	slurmd -N n2 "$@" || return 1
	_i=0
	until [ "$(sinfo -h -o %t -n n2 2> /dev/null)" = idle ] || [ $_i -ge 150 ]; do
		sleep 1; _i=$((_i + 1))
	done
	[ $_i -lt 150 ]
}
check14() {
	swapped="NodeName=n1 Name=gpu File=/dev/nvidia[0-1]
NodeName=n2 Name=gpu File=/dev/nvidia3
NodeName=n2 Name=gpu File=/dev/nvidia2"
	n2_restart --conf-server "$(hostname)" -L "$sd/slurmd-n2c.log" ||
		{ echo "configless slurmd n2 did not come up"; tail -n 20 "$sd/slurmd-n2c.log"; return 1; }
	cache=$(readlink -f /run/slurm/conf)
	cp /etc/slurm/gres.conf "$sd/gres.conf.keep"
	echo "$swapped" > /etc/slurm/gres.conf
	a=$($S -w n2 -n1 --gres=gpu:1 sh -c "$probe" 2>&1); arc=$?
	# jobcg check with SLURM_CONF naming the cache, as Slurm's commands take it, compares so too.
	j=$(SLURM_CONF="$cache/slurm.conf" JOBCG_NODENAME=n2 JOBCG_CONF_DIR=/etc/jobcg/n2 jobcg check 2>&1 |
		grep "^Slurm's gres.conf:")
	cp "$sd/gres.conf.keep" /etc/slurm/gres.conf
	cp "$cache/gres.conf" "$sd/cache-gres.conf.keep"
	echo "$swapped" > "$cache/gres.conf"
	b=$($S -w n2 -n1 --gres=gpu:1 sh -c "$probe" 2>&1); brc=$?
	cp "$sd/cache-gres.conf.keep" "$cache/gres.conf"
	log=$(grep "mapping Slurm's GPUs onto jobcg's gres.conf" "$sd/slurmd-n2c.log" | tail -n 1)
	n2_restart -f /etc/slurm/n2.conf || echo "n2 did not come back with its own slurm.conf"
	rm -f /run/slurm/conf
	printf 'cache: %s\n/etc/slurm swapped: rc %s %s\njobcg check, SLURM_CONF in the cache: %s\ncache swapped: rc %s %s\nslurmd: %s\n' \
		"$cache" "$arc" "$a" "$j" "$brc" "$b" "$log"
	[ -n "$cache" ] && [ -f "$cache/slurm.conf" ] && [ "$arc" -eq 0 ] &&
		echo "$j" | grep -qF "$cache/gres.conf lists this node's 2 GPU(s)" &&
		echo "$a" | grep -qE "^n2 task0 cg=/system.slice/jobcg-n2.scope/job_[0-9]+/step_0/user/task_0 cuda=0 .* (nvidia2=ENXIO nvidia3=EPERM|nvidia2=EPERM nvidia3=ENXIO)\$" &&
		[ "$brc" -ne 0 ] && echo "$log" | grep -qF "in Slurm's gres.conf ($cache/gres.conf:"
}
settle
with_plugin 14 "configless n2: the plugin compares with the gres.conf slurmd fetched (a GPU step runs with /etc/slurm's swapped, fails with the cache's swapped, naming it), and jobcg check with SLURM_CONF in the cache too" \
	"the plugin compares with the gres.conf of the slurm.conf slurmd reads" check14

# --- 15. the node's name is slurmstepd's, never the step's environment's ----------------------
# Until a task's exec a step's environment is srun's: its SLURMD_NODENAME is what a user exported,
# or the batch node's when a batch script's srun starts a step on another node. The plugin's node
# (conf=/etc/jobcg/%n, gres.conf's NodeName= lines) is slurmstepd's own: n2's steps in n2's tree
# with n2's GPUs, whatever srun's environment says.
check15() {
	echo "$probe" > "$sd/probe.sh"
	a=$(SLURMD_NODENAME=n1 $S -w n2 -n1 --gres=gpu:1 sh "$sd/probe.sh" 2>&1)
	rm -f "$sd/c15.out"
	b=$(timeout -k 5 180 sbatch --wait -N2 -n2 --mem=100M --gres=gpu:1 -o "$sd/c15.out" \
		--wrap "srun -n2 sh $sd/probe.sh" 2>&1)
	b="$b
$(cat "$sd/c15.out" 2>&1)"
	printf 'srun with SLURMD_NODENAME=n1 exported, on n2: %s\nsbatch -N2, its srun: %s\n' "$a" "$b"
	gpu2='cuda=0 .* (nvidia2=ENXIO nvidia3=EPERM|nvidia2=EPERM nvidia3=ENXIO)$'
	echo "$a" | grep -qE "^n2 task0 cg=/system.slice/jobcg-n2.scope/job_[0-9]+/step_0/user/task_0 $gpu2" &&
		echo "$b" | grep -qE "^n2 task0 cg=/system.slice/jobcg-n2.scope/job_[0-9]+/step_0/user/task_0 $gpu2" &&
		echo "$b" | grep -qE "^n1 task0 cg=$root1/job_[0-9]+/step_0/user/task_0 cuda=0 .* (nvidia0=ENXIO nvidia1=EPERM|nvidia0=EPERM nvidia1=ENXIO)\$"
}
settle
both_ways "1 2" 15 "the tasks are not in jobcg's trees" \
	"SLURMD_NODENAME=n1 exported to srun -w n2, and sbatch -N2 (batch on n1) starting srun on both: n2's task in n2's tree with n2's GPU" \
	"each step in its own node's tree, whatever srun's environment names" check15

# --- 16. a task moved after the plugin placed it fails before its exec -----------------------
# Slurm's task/cgroup, or any plugin later in the stack, moves a task after jobcg's
# task_post_fork: jobcg's limits and device grants would then silently not apply to it. A
# stand-in plugin after jobcg's (tests/vm/vmt-spank-mover.c) moves each task into
# /sys/fs/cgroup/vmt-mover: the task must not run, and the reason names where it was. Without
# jobcg's plugin only the mover is loaded, and the moved task runs.
mkdir -p /sys/fs/cgroup/vmt-mover
cp "$VMT_SHARE/bin/vmt-spank-mover.so" /usr/local/lib/jobcg/
mover="required /usr/local/lib/jobcg/vmt-spank-mover.so /sys/fs/cgroup/vmt-mover"
check16() {
	out=$($S -w n1 -n1 sh -c 'echo ran; cat /proc/self/cgroup' 2>&1); rc=$?
	log=$(grep "checking the task's cgroup" "$sd/slurmd-n1.log" | tail -n 1)
	printf 'rc %s: %s\nslurmd: %s\n' "$rc" "$out" "$log"
	[ "$rc" -ne 0 ] && ! echo "$out" | grep -q '^ran' &&
		echo "$out$log" | grep -q "task 0 is in /vmt-mover, not in its jobcg cgroup /sys/fs/cgroup$root1/job_[0-9]*/step_0/user/task_0"
}
settle
echo "$mover" > /etc/slurm/plugstack-n1.conf
if out=$(check16); then not_ok "16 (without the plugin): the check must fail"; diag "$out"
else ok "16 (without the plugin): the moved task runs"; diag "$out"; fi
settle
printf 'required %s conf=/etc/jobcg/n1 %s\n%s\n' "$PLUGIN" "$PLUGARGS" "$mover" > /etc/slurm/plugstack-n1.conf
with_plugin 16 "a task another plugin moves after jobcg placed it fails before its exec, naming where it is" \
	"a task moved out of its jobcg cgroup does not run" check16
plugin_on 1
rmdir /sys/fs/cgroup/vmt-mover

# --- 17. a burst: eight steps of one job and three jobs of one step each, all at once -------
# What a job array or a parallel pipeline does to a node: steps of one job begun and ended side by
# side (each under the node lock, the job kept while any is in it), and whole jobs made and
# removed with their only step at the same moment. Every step must land in its own step cgroup
# of its job, be recorded once, and leave nothing behind.
check17() {
	rm -f "$sd"/c17.*
	cat > "$sd/c17.sh" <<-EOF
	#!/bin/sh
	for i in 1 2 3 4 5 6 7 8; do
		(srun --overlap -n1 --mem=20M sh -c 'echo "c17 \$(cut -d: -f3 /proc/self/cgroup)"'; echo "rc=\$?") > "$sd/c17.\$i" 2>&1 &
	done
	wait
	EOF
	# shellcheck disable=SC2016 # expanded by the sh in the step
	for i in 1 2 3; do
		(timeout -k 5 180 srun -w n2 -n1 --mem=100M sh -c 'echo "c17 $(cut -d: -f3 /proc/self/cgroup)"'; echo "rc=$?") > "$sd/c17.n2-$i" 2>&1 &
	done
	out=$(timeout -k 5 300 sbatch --wait -w n1 -n1 --mem=300M -o "$sd/c17.out" "$sd/c17.sh" 2>&1)
	wait
	J=$(echo "$out" | sed -n 's/.*Submitted batch job \([0-9]*\).*/\1/p')
	head -n 3 "$sd"/c17.[0-9] "$sd"/c17.n2-* 2>&1
	[ -n "$J" ] || { echo "$out"; return 1; }
	# n1: eight different step cgroups of job J, every srun exit 0, a record per step (the
	# batch step's too).
	n=$(cat "$sd"/c17.[0-9] | grep -E "^c17 $root1/job_$J/step_[0-9]+/user/task_0$" | sort -u | wc -l)
	n0=$(cat "$sd"/c17.[0-9] | grep -c '^rc=0$')
	recs=$(grep -c "\"type\":\"step\",\"job\":$J," /run/jobcg-n1/acct.jsonl 2> /dev/null)
	# n2: three jobs, each its step 0 in its own job.
	m=$(cat "$sd"/c17.n2-* | grep -E '^c17 /system.slice/jobcg-n2.scope/job_[0-9]+/step_0/user/task_0$' | sort -u | wc -l)
	m0=$(cat "$sd"/c17.n2-* | grep -c '^rc=0$')
	echo "n1: job $J, $n step cgroups, $n0 sruns exit 0, $recs step records; n2: $m jobs, $m0 sruns exit 0"
	[ "$n" = 8 ] && [ "$n0" = 8 ] && [ "$recs" = 9 ] && [ "$m" = 3 ] && [ "$m0" = 3 ]
}
both_ways "1 2" 17 "the steps are not in jobcg's tree" \
	"eight steps of one job on n1 and three jobs on n2 at once: each step in its own cgroup, exit 0, one record per step" \
	"a burst of concurrent steps and jobs all contained and recorded" check17
settle
is "after the burst, neither node's tree has a job left" \
	"$(ls -d /sys/fs/cgroup/system.slice/jobcg-n[12].scope/job_* 2> /dev/null)" ""

# --- 18. a bad plugstack.conf argument fails the step closed, never the node ---------------
# (plugin only) An unknown argument on n1's line: the task does not run, srun fails, slurmd's
# log names the argument; a batch job fails the same way (exit 1) and the node is not drained
# (before, init failed: srun exited 0 on a "launch failure" and the batch job drained n1).
check18() {
	rm -f "$sd/c18.ran" "$sd/c18.out"
	out=$($S -w n1 -n1 touch "$sd/c18.ran" 2>&1); rc=$?
	echo "srun rc=$rc: $out"
	b=$(timeout -k 5 120 sbatch --wait -w n1 -n1 --mem=100M -o "$sd/c18.out" --wrap "touch $sd/c18.ran" 2>&1); brc=$?
	drained=$(sinfo -h -N -n n1 -t drain,drained,draining,down -o %N 2> /dev/null)
	echo "sbatch rc=$brc: $b; drained: '${drained}'"
	grep 'jobcg: job' "$sd/slurmd-n1.log" | tail -n 2
	[ $rc -ne 0 ] && [ $brc -ne 0 ] && [ ! -e "$sd/c18.ran" ] && [ -z "$drained" ] &&
		grep -q "jobcg: job [0-9]* step 0: reading plugstack.conf's arguments: .*'bogus'" "$sd/slurmd-n1.log" &&
		grep -q "jobcg: job [0-9]* step batch: reading plugstack.conf's arguments: .*'bogus'" "$sd/slurmd-n1.log" &&
		grep -q "jobcg: job [0-9]* step 0: no FAILED record of it: jobcg's accounting log cannot be located: plugstack.conf's arguments" "$sd/slurmd-n1.log"
}
settle
echo "required $PLUGIN conf=/etc/jobcg/n1 $PLUGARGS bogus" > /etc/slurm/plugstack-n1.conf
with_plugin 18 "a bad plugstack.conf argument: srun and sbatch fail, nothing runs, slurmd's log names it and says the step has no record, n1 not drained" \
	"a bad plugstack.conf argument fails the step, not the node" check18
plugin_on 1

# --- 19. an allocation of jobcg's own with a Slurm job's id is neither used nor removed -----
# (plugin only) `jobcg alloc J --uid root --gres gpu:2` on n1 by an admin, then Slurm's job J
# (root's, held until then) on n1: its step fails naming 'jobcg release J', runs nothing, and
# the admin's allocation is still there with its GPUs afterwards (before, the step ran in it and
# its end removed it).
check19() {
	rm -f "$sd/c19.ran" "$sd/c19.out"
	J=$(sbatch --parsable --hold -w n1 -n1 --mem=100M -o "$sd/c19.out" --wrap "touch $sd/c19.ran" 2>&1)
	case "$J" in ''|*[!0-9]*) echo "sbatch: $J"; return 1 ;; esac
	j1 alloc "$J" --uid root --gres gpu:2 || { scancel "$J"; return 1; }
	scontrol release "$J"
	i=0
	while [ -n "$(squeue -h -j "$J" 2> /dev/null)" ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
	left=$(ls -d "/sys/fs/cgroup$root1/job_$J" 2> /dev/null)
	gres=$(j1 show "$J" 2>&1 | grep -ci 'gpu')
	echo "job $J: output: $(cat "$sd/c19.out" 2>&1); n1's job_$J left: '$left' (gpu lines in show: $gres)"
	grep 'jobcg: job' "$sd/slurmd-n1.log" | tail -n 2
	ok19=0
	[ ! -e "$sd/c19.ran" ] && [ -n "$left" ] && [ "$gres" -gt 0 ] &&
		grep -q "jobcg release $J" "$sd/c19.out" && ok19=1
	j1 release "$J"
	[ $ok19 = 1 ]
}
with_plugin 19 "a 'jobcg alloc' with Slurm's job id: the step fails naming 'jobcg release', the allocation stays" \
	"a jobcg allocation with a Slurm job's id is neither adopted nor removed" check19
settle

# --- 20. a slurmstepd killed between its last step's removal and its job's ------------------
# (plugin only) A step with both of n1's GPUs; its slurmstepd stopped, the step's processes
# killed and its cgroups removed by hand (what the step's end does before the job's removal),
# then slurmstepd killed: its watcher must remove the job, GPUs and all, so that the next job
# with those GPUs runs (before, the watcher saw the step gone and exited: the job stayed and
# every later step given those GPUs failed, "held by job_N").
check20() {
	# shellcheck disable=SC2016 # expanded in the step
	timeout -k 5 120 srun -w n1 -n1 --mem=50M --gres=gpu:2 sh -c 'echo started job=$SLURM_JOB_ID; exec sleep 1030' > "$sd/c20" 2>&1 &
	sp=$!
	i=0
	until grep -q started "$sd/c20" || [ $i -ge 60 ]; do sleep 1; i=$((i + 1)); done
	J=$(sed -n 's/^started job=//p' "$sd/c20")
	pid=$(pgrep -f "slurmstepd: \[$J\.0\]")
	[ -n "$J" ] && [ -n "$pid" ] || { echo "no step $J.0 ($pid): $(cat "$sd/c20")"; kill $sp; return 1; }
	kill -STOP "$pid"
	j1 kill "$J.0"
	i=0
	while [ -n "$(cat "/sys/fs/cgroup$root1/job_$J/step_0/cgroup.procs" "/sys/fs/cgroup$root1/job_$J"/step_0/user/task_*/cgroup.procs 2> /dev/null)" ] && [ $i -lt 20 ]; do
		sleep 0.5; i=$((i + 1))
	done
	find "/sys/fs/cgroup$root1/job_$J/step_0" -depth -type d -exec rmdir {} \; 2> /dev/null
	kill -9 "$pid"
	i=0
	while [ -d "/sys/fs/cgroup$root1/job_$J" ] && [ $i -lt 10 ]; do sleep 1; i=$((i + 1)); done
	cg=$(ls -d "/sys/fs/cgroup$root1/job_$J" 2> /dev/null)
	scancel "$J"
	wait $sp
	settle
	out=$($S -w n1 -n1 --gres=gpu:2 sh -c "$probe" 2>&1); rc=$?
	echo "job $J: slurmstepd $pid killed after its step's removal; job left after ${i}s: '$cg'; next job with gpu:2 (rc $rc): $out"
	[ -z "$cg" ] && [ $rc = 0 ] && echo "$out" | grep -q 'nvidia0=ENXIO nvidia1=ENXIO'
}
with_plugin 20 "slurmstepd killed between its last step's removal and its job's: the watcher removes the job, the next job gets its GPUs" \
	"a job left by a slurmstepd killed at its end is removed with its GPUs" check20
settle

# --- 21. a watcher that does not confirm it watches fails the step -------------------------
# (plugin only) jobcg=/bin/false on n1's line: the program starts and exits at once, as an
# older jobcg without `step-watch --ready-fd` would. The step fails, nothing runs, slurmd's log
# names the program (before, the step ran with no watcher at all).
check21() {
	rm -f "$sd/c21.ran"
	out=$($S -w n1 -n1 touch "$sd/c21.ran" 2>&1); rc=$?
	echo "srun rc=$rc: $out"
	grep 'jobcg: job' "$sd/slurmd-n1.log" | tail -n 2
	[ $rc -ne 0 ] && [ ! -e "$sd/c21.ran" ] &&
		grep -q "jobcg: job [0-9]* step 0: starting its watcher .*/bin/false started but exited without saying it was ready" "$sd/slurmd-n1.log"
}
settle
echo "required $PLUGIN conf=/etc/jobcg/n1 jobcg=/bin/false" > /etc/slurm/plugstack-n1.conf
with_plugin 21 "jobcg=/bin/false: the step fails naming it, nothing runs" \
	"a watcher that never says it watches fails the step" check21
plugin_on 1

# --- 22. PrologFlags=Contain: the extern step's sleep in job_<id>/step_extern ----------------
# With Contain slurmstepd runs an extern step for every job, whose `sleep 100000000` Slurm
# hands task_post_fork with task id -1 and no pid. The plugin finds it among slurmstepd's
# children and moves it where `jobcg adopt` puts the job's logins (step_extern/user/
# task_special); before, the hook failed for every job ("spank extern task post-fork failed" in
# slurmd's log) and the sleep stayed in slurmd's cgroup, where no removal of the step reaches
# it. slurmctld and n1's slurmd read the flag at their start: both restart with it, last in this
# script so that the checks above keep their jobs without an extern step.
contain_on() {
	settle
	for f in /etc/slurm/slurm.conf /etc/slurm/n1.conf; do echo "PrologFlags=Contain" >> "$f"; done
	systemctl restart slurmctld.service || return 1
	p=$(cat "$sd/slurmd-n1.pid" 2> /dev/null)
	[ -z "$p" ] || kill "$p"
	_i=0
	while [ -n "$p" ] && kill -0 "$p" 2> /dev/null && [ $_i -lt 30 ]; do sleep 1; _i=$((_i + 1)); done
	slurmd -N n1 -f /etc/slurm/n1.conf || return 1
	_i=0
	until [ "$(sinfo -h -o %t -n n1 2> /dev/null)" = idle ] || [ $_i -ge 150 ]; do
		sleep 1; _i=$((_i + 1))
	done
	[ $_i -lt 150 ]
}
check22() {
	from=$(($(wc -l < "$sd/slurmd-n1.log") + 1))
	out=$(timeout -k 5 60 sbatch -w n1 -n1 --mem=100M --gres=gpu:1 -o /dev/null --wrap 'sleep 120' 2>&1)
	J=$(echo "$out" | sed -n 's/.*Submitted batch job \([0-9]*\).*/\1/p')
	[ -n "$J" ] || { echo "sbatch: $out"; return 1; }
	want="$root1/job_$J/step_extern/user/task_special"
	sl="" i=0
	while [ -z "$sl" ] && [ $i -lt 120 ]; do
		st=$(pgrep -f "slurmstepd: \[$J\.extern\]" | head -n 1)
		[ -z "$st" ] || sl=$(pgrep -P "$st" -x sleep | head -n 1)
		[ -n "$sl" ] || { sleep 0.5; i=$((i + 1)); }
	done
	# task_post_fork runs right after slurmstepd forks it: a moment to get there.
	i=0
	while [ -n "$sl" ] && [ "$(cut -d: -f3 "/proc/$sl/cgroup" 2> /dev/null)" != "$want" ] &&
		[ $i -lt 20 ]; do
		sleep 0.5; i=$((i + 1))
	done
	cg=$(cut -d: -f3 "/proc/$sl/cgroup" 2> /dev/null)
	cmd=$(tr '\0' ' ' < "/proc/$sl/cmdline" 2> /dev/null)
	# A login of the job's owner, as pam_exec's `jobcg adopt --pam` would place it. Once
	# adopted (and the batch step has claimed the job's GPU) it tries n1's two GPUs: the
	# extern step shares the job's, as under Slurm's task/cgroup.
	go="$VMT_TMP/c22.go" opened="$VMT_TMP/c22.opened"
	rm -f "$go" "$opened"
	# shellcheck disable=SC2016 # expanded by the login's sh
	sh -c 'while [ ! -e "$1" ]; do sleep 0.2; done
		for d in 0 1; do
			e=$(head -c 0 /dev/nvidia$d 2>&1)
			case "$e" in *"not permitted"*) e=EPERM ;; *"No such device or address"*) e=ENXIO ;; "") e=open ;; esac
			printf " nvidia%s=%s" "$d" "$e"
		done > "$2.part" && mv "$2.part" "$2"
		exec sleep 300' login "$go" "$opened" > /dev/null 2>&1 &
	lg=$!
	ad=$(j1 adopt "$lg" --job "$J" 2>&1)
	lcg=$(cut -d: -f3 "/proc/$lg/cgroup" 2> /dev/null)
	i=0
	while [ ! -d "/sys/fs/cgroup$root1/job_$J/step_batch" ] && [ $i -lt 40 ]; do
		sleep 0.5; i=$((i + 1))
	done
	touch "$go"
	i=0
	while [ ! -e "$opened" ] && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
	gpus=$(cat "$opened" 2> /dev/null)
	scancel "$J"
	i=0
	while { kill -0 "$sl" 2> /dev/null || kill -0 "$lg" 2> /dev/null; } && [ $i -lt 30 ]; do
		sleep 1; i=$((i + 1))
	done
	left=$(kill -0 "$sl" 2> /dev/null && echo "sleep $sl")
	kill -9 "$lg" 2> /dev/null
	wait "$lg" 2> /dev/null
	failed=$(sed -n "$from,\$p" "$sd/slurmd-n1.log" | grep -E "post-fork failed|task_post_fork\(\) failed")
	printf 'job %s: extern sleep %s (%s) in %s (want %s)\nadopt: %s, in %s, GPUs:%s\nafter scancel: %s\nslurmd: %s\n' \
		"$J" "$sl" "$cmd" "$cg" "$want" "$ad" "$lcg" "$gpus" "${left:-nothing left}" "${failed:-no post-fork failure}"
	[ -n "$sl" ] && [ "$cmd" = "sleep 100000000 " ] && [ "$cg" = "$want" ] && [ "$lcg" = "$want" ] &&
		echo "$gpus" | grep -qE '^ nvidia0=(ENXIO nvidia1=EPERM|EPERM nvidia1=ENXIO)$' &&
		[ -z "$left" ] && [ -z "$failed" ]
}
if contain_on; then
	both_ways 1 22 "the extern step's sleep is not in jobcg's step_extern" \
		"PrologFlags=Contain: the extern step's sleep and an adopted login in job_<id>/step_extern/user/task_special, the login opens the job's GPU and not the other, no post-fork failure in slurmd's log, both gone after scancel" \
		"the extern step's sleep is contained in step_extern" check22
else
	not_ok "22: slurmctld and slurmd n1 restart with PrologFlags=Contain"
	slurm_state
fi
settle

# --- what jobcg's own tools see of Slurm's jobs ---------------------------------------------
diag "$(j1 acct 2>&1 | tail -n 12)"
diag "$(tail -n 15 $sd/slurmd-n1.log)"

for n in 1 2; do kill "$(cat $sd/slurmd-n$n.pid)" 2> /dev/null; done
systemctl stop slurmctld.service
done_testing
