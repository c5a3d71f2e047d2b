# The systemd scope backend (seed 001): a transient, delegated, abandoned jobcg.scope that holds
# a keeper in system/, is reused on a second start, and is left behind cleanly on failures.
. "$VMT_GUEST/lib.sh"
export JOBCG_KEEPER_EXE="$VMT_SHARE/bin/jobcg"
cg=/sys/fs/cgroup/system.slice/jobcg.scope

check "jobcg.scope does not exist before the first start" sh -c '! systemctl is-active -q jobcg.scope'
t0=$(date +%s%N)
root=$(vmt-scope 2>"$VMT_TMP/scope.err"); rc=$?
diag "scope created in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
is "the backend creates the scope (rc; $(tail -n1 "$VMT_TMP/scope.err"))" "$rc" 0
is "the tree root is system.slice/jobcg.scope" "$root" "$cg"
is "jobcg.scope is active" "$(systemctl is-active jobcg.scope)" active
is "Delegate=yes" "$(systemctl show -P Delegate jobcg.scope)" yes
is "TasksMax=infinity" "$(systemctl show -P TasksMax jobcg.scope)" infinity
is "the scope is abandoned" "$(systemctl show -P SubState jobcg.scope)" abandoned
is "the scope is transient" "$(systemctl show -P Transient jobcg.scope)" yes

keeper=$(cat "$cg/system/cgroup.procs" 2>/dev/null)
is "exactly one process in system/" "$(echo "$keeper" | grep -c .)" 1
is "the keeper shows as 'jobcg keeper' in ps" "$(ps -o args= -p "$keeper")" "jobcg keeper"
is "the keeper has no file descriptors open" "$(ls "/proc/$keeper/fd" 2>/dev/null | wc -l)" 0
is "the keeper is out of the OOM killer's reach" "$(cat "/proc/$keeper/oom_score_adj" 2>&1)" -1000
is "the keeper is not jobcg's child (parent is init)" "$(ps -o ppid= -p "$keeper" | tr -d ' ')" 1
is "nothing is left in the scope's own cgroup" "$(cat "$cg/cgroup.procs")" ""
status=$(SYSTEMD_COLORS=0 systemctl status --no-pager --lines=0 jobcg.scope 2>&1)
diag "$status"
like "systemctl status shows the keeper under system/" "$status" "system[[:space:]]*$"
like "systemctl status shows the keeper's command line" "$status" "$keeper jobcg keeper"
like "cgroup.controllers of the scope offers the delegated controllers" \
	"$(cat "$cg/cgroup.controllers")" "cpuset.*memory.*pids"

since=$(systemctl show -P ActiveEnterTimestampMonotonic jobcg.scope)
root2=$(vmt-scope 2>"$VMT_TMP/scope2.err"); rc=$?
is "a second start succeeds (restart-safe)" "$rc" 0
is "...with the same root" "$root2" "$cg"
is "...and the same single keeper" "$(cat "$cg/system/cgroup.procs")" "$keeper"
is "...and the same unit (not restarted)" "$(systemctl show -P ActiveEnterTimestampMonotonic jobcg.scope)" "$since"

# Abandoned: the scope outlives its keeper while anything runs in it; a start then adds a keeper.
mkdir -p "$cg/vmt_hold"
sh -c 'echo $$ > /sys/fs/cgroup/system.slice/jobcg.scope/vmt_hold/cgroup.procs; exec sleep 600' &
holder=$!
sleep 0.5
kill -9 "$keeper"; sleep 1
is "with the keeper gone, the abandoned scope lives on (a process is still inside)" \
	"$(systemctl is-active jobcg.scope)" active
vmt-scope > /dev/null 2>&1
k2=$(cat "$cg/system/cgroup.procs")
check "a start on a scope without keeper starts a new one" test -n "$k2" -a "$k2" != "$keeper"
kill -9 "$holder"; wait "$holder" 2>/dev/null
rmdir "$cg/vmt_hold"

root=$(vmt-scope --scope jobcgvm_jobcg.scope 2>/dev/null); rc=$?
is "a node-prefixed scope name works (jobcgvm_jobcg.scope)" "$root" /sys/fs/cgroup/system.slice/jobcgvm_jobcg.scope
systemctl stop jobcgvm_jobcg.scope 2>/dev/null

root=$(vmt-scope --slice vmt-jobs.slice --scope nested.scope --enable-controllers 2>/dev/null); rc=$?
is "a scope in a nested slice with EnableControllers" "$root" /sys/fs/cgroup/vmt.slice/vmt-jobs.slice/nested.scope
for d in /sys/fs/cgroup /sys/fs/cgroup/vmt.slice /sys/fs/cgroup/vmt.slice/vmt-jobs.slice; do
	like "EnableControllers: $d enables cpuset cpu io memory pids for its children" \
		"$(cat $d/cgroup.subtree_control)" "cpuset cpu io memory pids"
done
systemctl stop nested.scope 2>/dev/null

err=$(vmt-scope --scope short.scope --timeout 1 2>&1); rc=$?
is "a SystemdTimeout too short for systemd fails" "$rc" 1
like "...with an error naming the timeout" "$err" "SystemdTimeout|timed out"
for i in 1 2 3 4 5 6 7 8 9 10; do systemctl is-active -q short.scope || break; sleep 1; done
check "...and leaves no scope behind (keeper killed)" sh -c '! systemctl is-active -q short.scope' ||
	diag "$(systemctl status --no-pager short.scope 2>&1; pgrep -a jobcg)"

err=$(DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent vmt-scope --scope nobus.scope 2>&1); rc=$?
is "without a reachable system bus the backend fails" "$rc" 1
like "...saying it cannot reach D-Bus" "$err" "D-Bus system bus"
is "...and no keeper is left over: only jobcg.scope's runs" "$(pgrep -fx 'jobcg keeper')" "$(cat $cg/system/cgroup.procs)"
done_testing
