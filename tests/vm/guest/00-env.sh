# The guest is the environment the VM tier exists for: systemd as init, a pure cgroup v2
# hierarchy with every controller jobcg enforces, eBPF device programs, and jobcg itself.
. "$VMT_GUEST/lib.sh"

is "cgroup2 is mounted at /sys/fs/cgroup" "$(stat -fc %T /sys/fs/cgroup)" cgroup2fs
ctrls=$(cat /sys/fs/cgroup/cgroup.controllers)
for c in cpuset cpu io memory pids; do
	like "controller $c is available at the root" "$ctrls" "(^| )$c( |$)"
done
is "systemd is PID 1" "$(cat /proc/1/comm)" systemd
check "/run/systemd/system exists (systemd is the running init)" test -d /run/systemd/system
# The suite itself is a boot job, so the system stays "starting" until it ends: ask for the
# target it runs after instead, and name any failed unit.
is "multi-user.target is active" "$(systemctl is-active multi-user.target)" active
is "no unit failed during boot" "$(systemctl --failed --no-legend --no-pager | wc -l)" 0 ||
	diag "$(systemctl --failed --no-legend --no-pager)"
check "the D-Bus system bus answers" busctl --system status org.freedesktop.systemd1
check "swap is off at boot (swap tests add their own)" test "$(swapon --noheadings | wc -l)" = 0

probe=/sys/fs/cgroup/vmt-devprobe.$$
out=$(vmt-devprobe "$probe" 2>&1); rc=$?
is "eBPF device programs are enforced (vmt-devprobe: $out)" "$rc" 0

check "jobcg runs (its runtime libraries are in the image)" jobcg --version
out=$(jobcg check 2>&1); rc=$?
diag "$out"
is "jobcg check passes on systemd + full cgroup v2" "$rc" 0
like "jobcg check reports the systemd scope backend" "$out" 'systemd'
# favordynmods (Linux 6.0+): check reads it from the mount table; 90-mount turns it on.
like "jobcg check: favordynmods off as systemd mounts cgroup2" "$(jobcg check 2>&1)" \
	'favordynmods: +no \(/sys/fs/cgroup is mounted without favordynmods'
done_testing
