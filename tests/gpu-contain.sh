#!/bin/sh
# On a real GPU node, as root: jobcg's device containment against the real driver. In a tree of
# its own (a uniquely named cgroup, state, configuration and pin directory, all removed at the
# end) with gres.conf written by `jobcg gpus --gres-conf` and ConstrainDevices=yes: a job holding
# a GPU sees it (nvidia-smi, CUDA through PyTorch where installed), a job without one, and a
# cgroup made by hand under the tree, open none of the GPU's files; the kernel-truth commands
# (devices, who-has) agree. Not part of the test suites (they have no GPU); run by hand:
#   tests/gpu-contain.sh [PATH-TO-JOBCG]     (default: build/cli/jobcg, then jobcg in PATH)
# GPU_CONTAIN_GRES=FILE uses FILE instead of detection (a dry run with stand-in device nodes);
# GPU_CONTAIN_MODE=linear checks the per-cgroup device programs instead of the node program.
# Ends with "gpu-contain: N checks, N failed"; exit 1 on a failure, 2 when it cannot run.
set -u
JOBCG=${1:-}
if [ -z "$JOBCG" ]; then
	for c in build/cli/jobcg build-test/cli/jobcg "$(command -v jobcg 2>/dev/null)"; do
		[ -n "$c" ] && [ -x "$c" ] && JOBCG=$c && break
	done
fi
[ -n "$JOBCG" ] || { echo "gpu-contain: no jobcg found (give its path)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "gpu-contain: needs root"; exit 2; }
mnt=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
[ -n "$mnt" ] || { echo "gpu-contain: no cgroup v2 mount"; exit 2; }

n=0
failed=0
check() { # check GOOD WHAT...
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok     $2"
	else
		failed=$((failed + 1))
		echo "FAILED $2"
	fi
}
# Exit status of opening PATH read-write from the current process: 0, or the errno.
openrc() {
	python3 -c 'import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
except OSError as e:
    sys.exit(e.errno)' "$1"
}

tag=jobcg-gpucontain-$$
tmp=$(mktemp -d) || exit 2
export JOBCG_ROOT=$tag JOBCG_STATE_DIR=$tmp/state JOBCG_CONF_DIR=$tmp/conf
export JOBCG_BPF_PIN_DIR=/sys/fs/bpf/$tag
cleanup() {
	"$JOBCG" teardown --force >/dev/null 2>&1
	[ -d "$mnt/$tag/handmade" ] && rmdir "$mnt/$tag/handmade" 2>/dev/null
	[ -d "$mnt/$tag" ] && rmdir "$mnt/$tag" 2>/dev/null
	rm -rf "$tmp" "/sys/fs/bpf/$tag"
}
trap cleanup EXIT
mkdir "$tmp/conf"

echo "--- before: who may open /dev/nvidia0 on this node (kernel truth, whole tree)"
"$JOBCG" who-has /dev/nvidia0 2>&1 | head -20

if [ -n "${GPU_CONTAIN_GRES:-}" ]; then
	cp "$GPU_CONTAIN_GRES" "$tmp/conf/gres.conf" 2>"$tmp/gpus.err"
else
	"$JOBCG" gpus --gres-conf >"$tmp/conf/gres.conf" 2>"$tmp/gpus.err"
fi
check $? "jobcg gpus --gres-conf ($(cat "$tmp/gpus.err"))"
echo "--- gres.conf:"
cat "$tmp/conf/gres.conf"
ngpu=$(grep -c '^Name=gpu' "$tmp/conf/gres.conf")
[ "$ngpu" -ge 1 ]
check $? "gres.conf has $ngpu GPU lines"
[ "$ngpu" -ge 1 ] || exit 1
printf 'ConstrainDevices=yes\nDeviceProgram=%s\n' "${GPU_CONTAIN_MODE:-node}" \
	>"$tmp/conf/cgroup.conf"
"$JOBCG" check 2>&1 | sed 's/^/check: /'

# The first GPU's device file and its companions, from what detection wrote.
gpu=$(sed -n 's/^Name=gpu.* \(Multiple\)\{0,1\}Files\{0,1\}=\([^ ,]*\).*/\2/p' \
	"$tmp/conf/gres.conf" | head -1)
echo "--- first GPU file: $gpu"

"$JOBCG" alloc 1 --gres gpu:1 >"$tmp/a1" 2>&1
check $? "alloc 1 --gres gpu:1 ($(tr '\n' ' ' <"$tmp/a1"))"
"$JOBCG" alloc 2 >"$tmp/a2" 2>&1
check $? "alloc 2 without GPU ($(tr '\n' ' ' <"$tmp/a2"))"

# Which GPU job 1 got: its CUDA_VISIBLE_DEVICES and the file the kernel lets it open.
out=$("$JOBCG" run --job 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"' 2>&1)
check $? "job 1: CUDA_VISIBLE_DEVICES=$out"
[ "$out" = 0 ] || [ "${out#MIG-}" != "$out" ]
check $? "job 1: CUDA_VISIBLE_DEVICES is 0 or a MIG UUID"

out=$("$JOBCG" run --job 1 -- nvidia-smi -L 2>&1)
rc=$?
echo "$out" | sed 's/^/job 1 nvidia-smi: /'
check $rc "job 1: nvidia-smi -L works (exit $rc)"
[ "$(echo "$out" | grep -c '^GPU ')" = 1 ]
check $? "job 1: nvidia-smi lists exactly one GPU"

out=$("$JOBCG" run --job 2 -- nvidia-smi -L 2>&1)
rc=$?
echo "$out" | sed 's/^/job 2 nvidia-smi: /'
[ $rc != 0 ] && ! echo "$out" | grep -q '^GPU '
check $? "job 2: nvidia-smi sees no GPU (exit $rc)"

for f in $gpu /dev/nvidiactl /dev/nvidia-uvm; do
	[ -e "$f" ] || continue
	"$JOBCG" run --job 2 -- python3 -c 'import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
except OSError as e:
    sys.exit(e.errno)' "$f"
	rc=$?
	[ $rc = 1 ]
	check $? "job 2: open $f -> errno $rc (EPERM expected)"
done

# Fail closed: a cgroup made by hand under the tree, holding no grant, opens nothing managed.
mkdir "$mnt/$tag/handmade"
rc=$(sh -c "echo \$\$ >'$mnt/$tag/handmade/cgroup.procs' && python3 -c 'import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
except OSError as e:
    sys.exit(e.errno)' '$gpu'; echo \$?")
[ "$rc" = 1 ]
check $? "hand-made cgroup: open $gpu -> errno $rc (EPERM expected)"
rmdir "$mnt/$tag/handmade"

if python3 -c 'import torch' 2>/dev/null; then
	prog='import torch; n = torch.cuda.device_count(); print(n)
if n:
    x = torch.ones(1024, device="cuda"); print(torch.cuda.get_device_name(0), float(x.sum()))'
	out=$("$JOBCG" run --job 1 -- python3 -c "$prog" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/job 1 torch: /'
	[ $rc = 0 ] && [ "$(echo "$out" | head -1)" = 1 ] && echo "$out" | grep -q ' 1024.0$'
	check $? "job 1: CUDA through PyTorch sees 1 device and computes on it"
	out=$("$JOBCG" run --job 2 -- python3 -c "$prog" 2>&1)
	rc=$?
	echo "$out" | tail -3 | sed 's/^/job 2 torch: /'
	[ "$(echo "$out" | tail -1)" = 0 ]
	check $? "job 2: CUDA through PyTorch sees no device"
else
	echo "skip: no PyTorch, CUDA not tried"
fi

# Kernel truth: the node program's rules as decoded for each job.
mm=$(python3 -c 'import os, sys
r = os.stat(sys.argv[1]).st_rdev
print(f"{os.major(r)}:{os.minor(r)}")' "$gpu")
out=$("$JOBCG" devices 2 2>&1)
echo "$out" | sed 's/^/devices 2: /'
echo "$out" | grep -q "^c $mm -"
check $? "jobcg devices 2: c $mm ($gpu) denied"
out=$("$JOBCG" devices 1 2>&1)
echo "$out" | sed 's/^/devices 1: /'
! echo "$out" | grep -q "^c $mm -"
check $? "jobcg devices 1: c $mm not denied"
out=$("$JOBCG" who-has "$gpu" --root "$mnt/$tag" 2>&1)
echo "$out" | sed 's/^/who-has: /'
echo "$out" | grep -q "job_1" && ! echo "$out" | grep -q "job_2"
check $? "jobcg who-has $gpu names job 1, not job 2"

# What operators scrape: the GPU's series names job 1 with the driver's UUID, never job 2.
uuid=$(sed -n 's/^GPU UUID:[[:space:]]*//p' /proc/driver/nvidia/gpus/*/information 2>/dev/null |
	head -1)
out=$("$JOBCG" metrics 2>&1)
echo "$out" | grep '^jobcg_gpu' | sed 's/^/metrics: /'
echo "$out" | grep -q "^jobcg_gpu_info{gpu=\"0\",uuid=\"$uuid\",.*device=\"$gpu\",job=\"1\"" &&
	! echo "$out" | grep -q '^jobcg_gpu_info{.*job="2"'
check $? "jobcg metrics: job 1 may open the GPU (UUID '$uuid'), job 2 may not"

"$JOBCG" release 1 >/dev/null 2>&1
check $? "release 1"
"$JOBCG" release 2 >/dev/null 2>&1
check $? "release 2"
"$JOBCG" teardown >/dev/null 2>&1
check $? "teardown"
[ ! -e "$mnt/$tag" ]
check $? "nothing left in the cgroup tree"
echo "gpu-contain: $n checks, $failed failed"
[ $failed = 0 ]
