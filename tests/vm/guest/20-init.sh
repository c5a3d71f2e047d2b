# `jobcg init` through the backend chooser: the systemd scope when systemd runs, reused on a
# restart; IgnoreSystemd uses mkdir; IgnoreSystemdOnFailure falls back when D-Bus fails.
. "$VMT_GUEST/lib.sh"
cg=/sys/fs/cgroup/system.slice/jobcg.scope
conf="$VMT_TMP/conf"

systemctl stop jobcg.scope 2>/dev/null
out=$(jobcg init 2>&1); rc=$?
is "jobcg init succeeds ($out)" "$rc" 0
is "...and starts jobcg.scope" "$(systemctl is-active jobcg.scope)" active
keeper=$(cat "$cg/system/cgroup.procs" 2>/dev/null)
is "...with one keeper in system/" "$(ps -o args= -p "${keeper:-0}")" "jobcg keeper"
like "jobcg check names the systemd backend" "$(jobcg check 2>&1)" "backend: *systemd"

# A statically linked jobcg (meson static_exe, the default) never loads libsystemd: its
# dynamically linked twin, jobcg-dynamic, asks systemd for the scope.
if [ -x "$VMT_SHARE/bin/jobcg-dynamic" ]; then
	is "the keeper is the static jobcg: no libc.so.6 mapped" \
		"$(grep -c 'libc\.so' "/proc/${keeper:-0}/maps" 2>&1)" 0
	systemctl stop jobcg.scope 2>/dev/null
	out=$(JOBCG_DYNAMIC_EXE=/nonexistent/jobcg-dynamic jobcg init 2>&1); rc=$?
	check "without its twin a static jobcg cannot ask systemd: init fails" test "$rc" -ne 0
	like "...naming the twin it could not run" "$out" "/nonexistent/jobcg-dynamic"
	check "...and makes no scope" sh -c '! systemctl is-active -q jobcg.scope'
	out=$(jobcg init 2>&1); rc=$?
	is "with the twin found beside it, init creates the scope again ($out)" "$rc" 0
	keeper=$(cat "$cg/system/cgroup.procs" 2>/dev/null)
	is "...with one keeper in system/" "$(ps -o args= -p "${keeper:-0}")" "jobcg keeper"
else
	skip "a static jobcg asks systemd through jobcg-dynamic" "this build has no jobcg-dynamic (static_exe off)"
fi

since=$(systemctl show -P ActiveEnterTimestampMonotonic jobcg.scope)
jobcg init > /dev/null 2>&1
is "a restarted jobcg reuses the scope (same keeper)" "$(cat "$cg/system/cgroup.procs")" "$keeper"
is "...without restarting the unit" "$(systemctl show -P ActiveEnterTimestampMonotonic jobcg.scope)" "$since"

mkdir -p "$conf/ignore" "$conf/fallback" "$conf/nofallback"
printf 'IgnoreSystemd=yes\nJobcgScope=plain.scope\n' > "$conf/ignore/cgroup.conf"
printf 'IgnoreSystemdOnFailure=yes\nJobcgScope=fallback.scope\nSystemdTimeout=30000\n' > "$conf/fallback/cgroup.conf"
printf 'JobcgScope=nofallback.scope\nSystemdTimeout=30000\n' > "$conf/nofallback/cgroup.conf"

out=$(jobcg --config-dir "$conf/ignore" init 2>&1); rc=$?
is "IgnoreSystemd=yes: init succeeds ($out)" "$rc" 0
check "...the tree is a plain directory" test -d /sys/fs/cgroup/system.slice/plain.scope/system
check "...that systemd does not know as a unit" sh -c '! systemctl is-active -q plain.scope'
like "...and check says mkdir" "$(jobcg --config-dir "$conf/ignore" check 2>&1)" "backend: *mkdir"

nobus="unix:path=/nonexistent/bus"
out=$(DBUS_SYSTEM_BUS_ADDRESS=$nobus jobcg --config-dir "$conf/nofallback" init 2>&1); rc=$?
check "D-Bus down, no IgnoreSystemdOnFailure: init fails ($out)" test "$rc" -ne 0
check "...and makes nothing" test ! -e /sys/fs/cgroup/system.slice/nofallback.scope
out=$(DBUS_SYSTEM_BUS_ADDRESS=$nobus jobcg --config-dir "$conf/fallback" init 2>&1); rc=$?
is "D-Bus down, IgnoreSystemdOnFailure=yes: init falls back to mkdir" "$rc" 0
like "...with a warning saying so" "$out" "warning.*IgnoreSystemdOnFailure"
check "...the tree exists as a plain directory" test -d /sys/fs/cgroup/system.slice/fallback.scope/system
check "...not as a unit" sh -c '! systemctl is-active -q fallback.scope'
for d in plain fallback; do
	rmdir /sys/fs/cgroup/system.slice/$d.scope/system /sys/fs/cgroup/system.slice/$d.scope 2>/dev/null
done
done_testing
