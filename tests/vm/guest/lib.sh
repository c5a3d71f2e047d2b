# Sourced by every in-guest test script: TAP lines without numbers (the runner numbers them),
# and small helpers. Each check names what it proves; a skip names what is missing.
vmt_fail=0

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; vmt_fail=1; }
diag() { echo "$*" | sed 's/^/# /'; }
# check DESC CMD...: ok when CMD succeeds; on failure its output becomes diagnostics.
check() {
	_d=$1; shift
	if _o=$("$@" 2>&1); then ok "$_d"; return 0; fi
	not_ok "$_d"; diag "command: $*"; diag "$_o"; return 1
}
# is DESC GOT WANT
is() {
	if [ "$2" = "$3" ]; then ok "$1"; return 0; fi
	not_ok "$1"; diag "got:  '$2'"; diag "want: '$3'"; return 1
}
# like DESC TEXT PATTERN (grep -E)
like() {
	if printf '%s\n' "$2" | grep -qE -- "$3"; then ok "$1"; return 0; fi
	not_ok "$1"; diag "no match for /$3/ in:"; diag "$2"; return 1
}
# skip DESC REASON: a skip is a failure where the feature must work (CI: JOBCG_MUST_WORK=1).
skip() {
	if [ "${JOBCG_MUST_WORK:-0}" = 1 ]; then not_ok "$1 (JOBCG_MUST_WORK: skipped: $2)"
	else echo "ok - $1 # SKIP $2"; fi
}
done_testing() { exit $vmt_fail; }
# slurm_conf CLUSTER DIR COUNT MEM PARTITION [LINE...]: a slurm.conf on stdout for COUNT slurmd
# on this guest as nodes n1..nCOUNT (port 1700N, this guest's topology, MEM MB and two GPUs
# each) in PARTITION, as docs/slurm.md configures Slurm (linuxproc, task/affinity, no cgroup
# plugins of Slurm's); slurmctld's state and logs under DIR, each LINE added to the global keys.
# Shared by 60-slurm and bench/vm/peers.sh (bench/run ships this file beside peers.sh), so the
# benchmark measures the Slurm that the suite proves.
slurm_conf() {
	_sc_h=$(hostname)
	_sc_topo=$(slurmd -C | head -n 1 | sed -e 's/NodeName=[^ ]* //' -e 's/RealMemory=[0-9]*//')
	cat <<-EOF
	ClusterName=$1
	SlurmctldHost=$_sc_h
	SlurmUser=root
	AuthType=auth/munge
	StateSaveLocation=$2/ctld
	SlurmctldPidFile=$2/slurmctld.pid
	SlurmctldLogFile=$2/slurmctld.log
	ProctrackType=proctrack/linuxproc
	TaskPlugin=task/affinity
	JobAcctGatherType=jobacct_gather/linux
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core_Memory
	GresTypes=gpu
	SlurmdTimeout=300
	SlurmctldTimeout=300
	MessageTimeout=60
	ReturnToService=2
	AccountingStorageType=accounting_storage/none
	JobCompType=jobcomp/none
	MpiDefault=none
	DebugFlags=NO_CONF_HASH
	EOF
	_sc_n=$3 _sc_mem=$4 _sc_part=$5
	shift 5
	for _sc_l in "$@"; do echo "$_sc_l"; done
	_sc_i=1
	while [ "$_sc_i" -le "$_sc_n" ]; do
		echo "NodeName=n$_sc_i NodeHostname=$_sc_h NodeAddr=$_sc_h Port=$((17000 + _sc_i)) $_sc_topo RealMemory=$_sc_mem Gres=gpu:2 State=UNKNOWN"
		_sc_i=$((_sc_i + 1))
	done
	echo "PartitionName=$_sc_part Nodes=n[1-$_sc_n] Default=YES MaxTime=INFINITE State=UP"
}
