# bench/run --vm, inside the VM (tests/vm/run --guest): the same constrained step, /bin/true
# with one CPU, 256M of memory and two stand-in GPUs, started through systemd-run --scope,
# crun run and jobcg, all in this one boot and reported as ratios to this boot's floor
# (fork+exec+wait of /bin/true). Timing is bench/launch's: subjects interleaved in blocks of 10.
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

# --- jobcg: its own tree, state and pins; the two stand-in GPUs in its gres.conf ----------
mkdir -p "$tmp/conf"
printf 'Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n' > "$tmp/conf/gres.conf"
# The job's GPUs are enforced like DevicePolicy=closed; TCG on a busy host is slow to start units.
printf 'ConstrainDevices=yes\nSystemdTimeout=60000\n' > "$tmp/conf/cgroup.conf"
# State (lock, accounting log) on tmpfs like crun's /run/crun and systemd's: the fsync of the
# accounting record on a disk is measured on the host (bench/run's cli_shm row).
export JOBCG_CONF_DIR="$tmp/conf" JOBCG_STATE_DIR=/run/jobcg-bench JOBCG_BPF_PIN_DIR=/sys/fs/bpf/jobcgbench
export JOBCG_KEEPER_EXE="$VMT_SHARE/bin/jobcg"
check "jobcg init" jobcg init
gres=""
if has_opt alloc --gres; then gres="--gres gpu:2"; else diag "jobcg alloc has no --gres: the jobcg job gets no GPU grant"; fi
# shellcheck disable=SC2086 # $gres is two words or none
check "jobcg alloc 1 --cpus 0 --mem 256M $gres" jobcg alloc 1 --cpus 0 --mem 256M $gres

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

out=$("$L" -n "$n" -e "$tmp/errors.log" floor "cgfloor:$cg" \
	"cmd:systemd_run:$sr /bin/true" \
	"cmd:crun:/usr/bin/crun run --bundle $b jobcg-bench" \
	"cmd:jobcg_run:$VMT_SHARE/bin/jobcg run --job 1 -- /bin/true" \
	"lib:1" "cmd:exec_jobcg:$VMT_SHARE/bin/jobcg version" 2>&1)
rc=$?
is "bench/launch ran every subject" "$rc" 0 || diag "$out"
floor=$(echo "$out" | grep '"name":"floor"' | sed 's/.*"p50_us":\([0-9.]*\).*/\1/')
echo "$out" | grep '^{' | while IFS= read -r line; do
	echo "# bench-json: $line"
	name=$(echo "$line" | sed 's/.*"name":"\([^"]*\)".*/\1/')
	errs=$(echo "$line" | sed 's/.*"errors":\([0-9]*\).*/\1/')
	p50=$(echo "$line" | sed 's/.*"p50_us":\([0-9.]*\).*/\1/')
	ratio=$(awk -v a="$p50" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
	is "$name: $n launches without error (p50 ${p50}us, ${ratio}x the floor)" "$errs" 0
done
[ -s "$tmp/errors.log" ] && diag "$(grep -v 'warning:' "$tmp/errors.log" | sort | uniq -c | sort -rn | head -n 20)"

jobcg release 1
rmdir "$cg"/* "$cg" 2>/dev/null
rm -rf "$tmp" /run/jobcg-bench
done_testing
