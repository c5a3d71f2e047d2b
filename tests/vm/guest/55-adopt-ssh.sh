# A real ssh login adopted into its user's job (docs/pam.md), with systemd-logind and Debian's
# common-session running pam_systemd: with the documented sshd stack the session is in the job,
# is denied the stand-in GPU its job was not granted, and dies with `jobcg release`; with
# pam_systemd left in sshd's session stack `jobcg check` fails and the login is refused.
. "$VMT_GUEST/lib.sh"
jobcg=$VMT_SHARE/bin/jobcg
t=$VMT_TMP/ssh
mkdir -p "$t"
systemctl start ssh.service > /dev/null 2>&1
check "sshd runs" systemctl is-active ssh.service
check "systemd-logind runs" systemctl is-active systemd-logind.service
like "Debian's common-session runs pam_systemd (libpam-systemd)" \
	"$(grep -v '^#' /etc/pam.d/common-session)" 'pam_systemd\.so'

# Stand-in GPUs on the root file system (a tmpfs /tmp may be nodev), one granted per job.
gpu=/var/tmp/vmt-gpu
rm -rf "$gpu"; mkdir -p "$gpu"; chmod 755 "$gpu"
mknod -m 666 "$gpu/nvidia0" c 195 0
mknod -m 666 "$gpu/nvidia1" c 195 1
cp /etc/jobcg/cgroup.conf "$t/cgroup.conf.orig"
[ -f /etc/jobcg/gres.conf ] && cp /etc/jobcg/gres.conf "$t/gres.conf.orig"
printf 'Name=gpu File=%s/nvidia0\nName=gpu File=%s/nvidia1\n' "$gpu" "$gpu" > /etc/jobcg/gres.conf
echo "ConstrainDevices=yes" >> /etc/jobcg/cgroup.conf
cp /etc/pam.d/sshd "$t/sshd.orig"
jobcg init > /dev/null 2>&1

# carol logs in with a key; she owns job 31, which holds one of the two GPUs.
id carol > /dev/null 2>&1 || useradd -m -s /bin/sh carol
rm -f "$t/key" "$t/key.pub"
ssh-keygen -q -t ed25519 -N '' -f "$t/key"
install -d -o carol -g carol -m 700 ~carol/.ssh
install -o carol -g carol -m 600 "$t/key.pub" ~carol/.ssh/authorized_keys
ssh_carol() {
	ssh -n -i "$t/key" -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=120 \
		carol@127.0.0.1 "$@"
}
# The open of a stand-in GPU as the login sees it: EPERM from the device policy, ENXIO when the
# open got past it (no driver behind a stand-in).
probe='for d in nvidia0 nvidia1; do
	if head -c1 '"$gpu"'/$d > /dev/null 2> /tmp/err.$$; then echo "$d opened";
	elif grep -q "not permitted" /tmp/err.$$; then echo "$d EPERM";
	elif grep -q "No such device" /tmp/err.$$; then echo "$d ENXIO";
	else echo "$d $(cat /tmp/err.$$)"; fi; done; rm -f /tmp/err.$$'
adopt_log() { journalctl -q -t jobcg-adopt --no-pager -o cat 2>/dev/null; }

check "carol gets job 31 with gpu:1" jobcg alloc 31 --user carol --gres gpu:1

# --- the documented stack (docs/pam.md): Debian's sshd file with the jobcg lines -----------
sed -e "/^@include common-account/a account required pam_exec.so quiet $jobcg adopt --pam" \
	-e 's/^@include common-session$/@include common-session-noninteractive/' \
	"$t/sshd.orig" > /etc/pam.d/sshd
echo "session required pam_exec.so quiet $jobcg adopt --pam" >> /etc/pam.d/sshd
out=$(jobcg check 2>&1); rc=$?
is "jobcg check passes with the documented stack" "$rc" 0 || diag "$out"
like "...and says ssh logins are adopted and checked" "$out" "adopted into jobs .*checked after the session"
like "...noting that Debian's pam_env hands users' environments to the (static) jobcg" "$out" \
	"note: pam_env hands users' own ~/.pam_environment \(/etc/pam.d/sshd:[0-9]+\) to the session line; .* is statically linked"

out=$(ssh_carol 'grep ^0:: /proc/self/cgroup' 2>&1); rc=$?
is "carol logs in over ssh" "$rc" 0 || diag "$out"
is "...her session runs in job 31's extern step" "$out" \
	"0::/system.slice/jobcg.scope/job_31/step_extern/user/task_special"
out=$(ssh_carol "$probe" 2>&1)
diag "probe: $(echo $out)"
opened=$(printf '%s\n' "$out" | grep -c ENXIO)
denied=$(printf '%s\n' "$out" | grep -c EPERM)
is "...one stand-in GPU (the job's) opens past the device check" "$opened" 1
is "...the other is denied (EPERM)" "$denied" 1
check "...and logind made no session for her (pam_systemd did not run)" \
	sh -c "! loginctl list-sessions --no-legend | grep -qw carol"

# Debian's sshd stack reads the user's own ~/.pam_environment (pam_env user_readenv=1) before
# the session line: what carol puts there reaches the root jobcg it runs, and must not steer it.
cp /etc/pam.d/sshd "$t/sshd.documented"
printf 'JOBCG_ROOT DEFAULT=user.slice\nJOBCG_CONF_DIR DEFAULT=/nonexistent-jobcg\n' > ~carol/.pam_environment
chown carol:carol ~carol/.pam_environment
sed -i '$i session optional pam_exec.so log=/var/tmp/vmt-pamenv /usr/bin/env' /etc/pam.d/sshd
rm -f /var/tmp/vmt-pamenv
out=$(ssh_carol 'grep ^0:: /proc/self/cgroup' 2>&1); rc=$?
like "(pam_env hands the session line carol's own JOBCG_ROOT and JOBCG_CONF_DIR)" \
	"$(grep ^JOBCG_ /var/tmp/vmt-pamenv 2>&1 | tr '\n' ' ')" "JOBCG_ROOT=user.slice JOBCG_CONF_DIR="
is "...which adopt --pam ignores: her login still passes the session check" "$rc" 0
is "...in job 31" "$out" "0::/system.slice/jobcg.scope/job_31/step_extern/user/task_special"
cp "$t/sshd.documented" /etc/pam.d/sshd
rm -f ~carol/.pam_environment /var/tmp/vmt-pamenv

ssh_carol 'echo started; exec sleep 300' > "$t/long.out" 2>&1 &
client=$!
for _ in $(seq 1 120); do grep -q started "$t/long.out" && break; sleep 0.5; done
sleeper=$(pgrep -u carol -x sleep | head -n1)
check "a long ssh session is running (sleep pid ${sleeper:-none})" test -n "$sleeper"
like "...in job 31" "$(cut -d: -f3 /proc/${sleeper:-0}/cgroup 2>&1)" "^/system.slice/jobcg.scope/job_31/"
check "jobcg release 31" jobcg release 31
sleep 1
check "...ended the ssh session's processes" sh -c "! kill -0 ${sleeper:-0} 2>/dev/null"
for _ in $(seq 1 20); do kill -0 $client 2> /dev/null || break; sleep 0.5; done
check "...and the ssh connection" sh -c "! kill -0 $client 2>/dev/null"
kill $client 2> /dev/null; wait $client 2> /dev/null

# --- pam_systemd left in sshd's session stack (Debian's @include common-session) -----------
check "carol gets job 32 with gpu:1" jobcg alloc 32 --user carol --gres gpu:1
sed -e "/^@include common-account/a account required pam_exec.so quiet $jobcg adopt --pam" \
	"$t/sshd.orig" > /etc/pam.d/sshd
echo "session required pam_exec.so quiet $jobcg adopt --pam" >> /etc/pam.d/sshd
out=$(jobcg check 2>&1); rc=$?
is "jobcg check fails with pam_systemd beside adopt" "$rc" 1
like "...warning loudly, naming the line" "$out" "WARNING: adopted ssh logins leave their jobs: pam_systemd runs in sshd's session stack \(/etc/pam.d/common-session:[0-9]+"
out=$(ssh_carol 'grep ^0:: /proc/self/cgroup' 2>&1); rc=$?
check "the login is refused at the account phase ($rc: $out)" test "$rc" -ne 0
like "...the authentication log says why" "$(adopt_log)" "refusing carol's login: pam_systemd runs"

# The account phase misses it (here: its stack is read from elsewhere): the session line,
# after pam_systemd, finds the login moved out of its job and refuses the session.
mkdir -p "$t/pam.d"
sed -e 's/^@include common-session$/@include common-session-noninteractive/' "$t/sshd.orig" > "$t/pam.d/sshd"
cp /etc/pam.d/common-* "$t/pam.d/"
sed -e "/^@include common-account/a account required pam_exec.so quiet $jobcg adopt --pam --pam-dir $t/pam.d" \
	"$t/sshd.orig" > /etc/pam.d/sshd
cp /etc/pam.d/sshd "$t/sshd.nocheck"
echo "session required pam_exec.so quiet $jobcg adopt --pam" >> /etc/pam.d/sshd
out=$(ssh_carol 'grep ^0:: /proc/self/cgroup' 2>&1); rc=$?
# OpenSSH runs nothing of a session whose pam_open_session failed: it exits 254.
is "a login pam_systemd moved out of its job is refused at the session phase" "$rc" 254 ||
	diag "$out"
check "...none of its commands ran" sh -c "! printf '%s' \"\$1\" | grep -q '^0::'" sh "$out"
like "...the authentication log says where it went" "$(adopt_log)" \
	"refusing carol's session: its process [0-9]+ is in /sys/fs/cgroup/user.slice/.*session-[0-9]+\.scope, outside every job"
# Without the session line that is the escape issue 19 describes: shown, so that the checks
# above are known to guard against something real here.
cp "$t/sshd.nocheck" /etc/pam.d/sshd
out=$(ssh_carol 'grep ^0:: /proc/self/cgroup' 2>&1)
like "(without either check pam_systemd really moves an adopted login out of its job)" "$out" \
	"^0::/user.slice/.*session-[0-9]+\.scope$"

# Back to how the image was.
cp "$t/sshd.orig" /etc/pam.d/sshd
jobcg release 32 > /dev/null 2>&1
pkill -u carol > /dev/null 2>&1
cp "$t/cgroup.conf.orig" /etc/jobcg/cgroup.conf
if [ -f "$t/gres.conf.orig" ]; then cp "$t/gres.conf.orig" /etc/jobcg/gres.conf; else rm -f /etc/jobcg/gres.conf; fi
done_testing
