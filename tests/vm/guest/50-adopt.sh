# jobcg adopt: a login session's process goes into its user's newest job (pam_slurm_adopt),
# directly and through the documented pam_exec line; a user without a job is refused.
. "$VMT_GUEST/lib.sh"
cg=/sys/fs/cgroup/system.slice/jobcg.scope
jobcg init > /dev/null 2>&1
id alice > /dev/null 2>&1 || useradd -M -s /bin/sh alice
id bob > /dev/null 2>&1 || useradd -M -s /bin/sh bob
alice=$(id -u alice)

check "alice gets job 21" jobcg alloc 21 --user alice
sleep 1.1 # creation times are in seconds: make job 22 the newer one
check "alice gets job 22 (newer)" jobcg alloc 22 --user alice
check "bob gets job 23" jobcg alloc 23 --user bob

setpriv --reuid "$alice" --regid "$alice" --clear-groups sleep 300 &
login=$!
sleep 0.5
out=$(jobcg adopt "$login" 2>&1); rc=$?
is "adopt picks alice's newest job ($out)" "$rc" 0
is "...her process is now in job 22's extern step" "$(cut -d: -f3 /proc/$login/cgroup)" \
	/system.slice/jobcg.scope/job_22/step_extern/user/task_special
out=$(jobcg adopt "$login" --job 21 2>&1); rc=$?
is "--job moves it into the named job" "$(cut -d: -f3 /proc/$login/cgroup)" \
	/system.slice/jobcg.scope/job_21/step_extern/user/task_special
jobcg gc > /dev/null 2>&1
check "gc leaves an adopted session alone" kill -0 "$login"
jobcg release 21 > /dev/null 2>&1
sleep 0.5
check "releasing the job ends the adopted session" sh -c "! kill -0 $login 2>/dev/null"
wait "$login" 2>/dev/null

setpriv --reuid 65534 --regid 65534 --clear-groups sleep 300 &
nobody=$!
sleep 0.5
out=$(jobcg adopt "$nobody" 2>&1); rc=$?
check "a user without a job is refused ($out)" test "$rc" -ne 0
like "...clearly" "$out" "no job on this node"
like "...and the process stays where it was" "$(cut -d: -f3 /proc/$nobody/cgroup)" "^/(system|user)\.slice|^/$|session"
kill "$nobody"; wait "$nobody" 2>/dev/null

# The documented PAM lines (docs/pam.md), through a real PAM stack. --pam acts for sshd only
# unless told otherwise: a line in a stack shared with su, sudo or cron captures none of them.
printf 'account required pam_exec.so stdout %s adopt --pam\n' "$VMT_SHARE/bin/jobcg" > /etc/pam.d/jobcg-adopt
out=$(pamtester jobcg-adopt nobody acct_mgmt 2>&1); rc=$?
is "a service --pam does not name is let through untouched (even a user without a job)" "$rc" 0
printf '%s required pam_exec.so stdout %s adopt --pam --service jobcg-adopt\n' \
	account "$VMT_SHARE/bin/jobcg" session "$VMT_SHARE/bin/jobcg" > /etc/pam.d/jobcg-adopt
out=$(pamtester jobcg-adopt alice acct_mgmt 2>&1); rc=$?
is "pam_exec + adopt --pam lets alice in (she has a job)" "$rc" 0
like "...and adopts the PAM caller into her newest job" "$out" "into job 22"
out=$(pamtester jobcg-adopt nobody acct_mgmt 2>&1); rc=$?
check "pam_exec + adopt --pam refuses a user without a job" test "$rc" -ne 0
like "...saying why" "$out" "no job on this node"
out=$(pamtester jobcg-adopt alice acct_mgmt open_session close_session 2>&1); rc=$?
is "account then session: the session line finds the login still in its job" "$rc" 0 ||
	diag "$out"
out=$(pamtester jobcg-adopt alice open_session 2>&1); rc=$?
check "a session whose process is in no job is refused" test "$rc" -ne 0
out=$(pamtester jobcg-adopt root acct_mgmt 2>&1); rc=$?
is "root is let through without a job" "$rc" 0
rm -f /etc/pam.d/jobcg-adopt
for j in 22 23; do jobcg release $j > /dev/null 2>&1; done
done_testing
