# The cgroup2 mount's favordynmods option (Linux 6.0+), which jobcg check reports: turned on by
# a remount. The last script, because a remount without the option does not turn it off again
# (seen on 6.1 and 6.12): it stays on until this VM is thrown away.
. "$VMT_GUEST/lib.sh"

opts=$(awk '$2 == "/sys/fs/cgroup" && $3 == "cgroup2" { o = $4 } END { print o }' /proc/mounts)
diag "cgroup2 at /sys/fs/cgroup: $opts"
if check "mount -o remount,...,favordynmods /sys/fs/cgroup" mount -o "remount,$opts,favordynmods" /sys/fs/cgroup; then
	like "the mount table lists favordynmods" "$(grep ' /sys/fs/cgroup cgroup2 ' /proc/mounts)" favordynmods
	out=$(jobcg check 2>&1)
	like "jobcg check: favordynmods yes after the remount" "$out" 'favordynmods: +yes \(/sys/fs/cgroup is mounted with favordynmods\)'
	like "jobcg check --json: favordynmods supported" "$(jobcg check --json 2>&1 | tr -d ' \n')" \
		'"favordynmods":\{"supported":true'
fi
done_testing
