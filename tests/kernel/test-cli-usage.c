/* Kernel test: the exit status and message of bad command lines, one table for every command:
 * 2 with the argument or option named for a usage error, 1 for a failure, never a -errno
 * (234, 254), never a silent default for an empty value, nothing half printed. */
#include <sys/stat.h>

#include "kcli.h"

#define MAXARGS 8

struct row {
	/* "@top": the test's own cgroup subtree; "@rel": the same relative to the v2 mount */
	const char *args[MAXARGS];
	int exit;
	const char *err; /* in stderr (NULL: not checked) */
	const char *out; /* in stdout; "" for nothing at all on stdout, NULL: not checked */
};

static const struct row rows[] = {
    /* numbers: a usage error naming the option, not cli_parse_uint()'s -EINVAL as status */
    {{"top", "-n", "abc"}, 2, "jobcg top: -n 'abc'", ""},
    {{"top", "-n", "-1"}, 2, "jobcg top: -n '-1'", ""},
    {{"top", "-n", "0"}, 2, "jobcg top: -n '0'", ""},
    {{"metrics", "--listen-fd", "-1"}, 2, "jobcg metrics: --listen-fd '-1'", ""},
    {{"metrics", "--listen-fd", "3x"}, 2, "--listen-fd '3x'", ""},
    /* a missing step fails (1) as a missing job does */
    {{"show", "99.0"}, 1, "no step 99.0", ""},
    {{"show", "99.batch"}, 1, "no step 99.batch", ""},
    {{"show", "99.0", "--json"}, 1, "no step 99.0", ""},
    {{"show", "99"}, 1, "no job 99", ""},
    /* device numbers: digits only, within the kernel's 12-bit major and 20-bit minor */
    {{"who-has", "c -1:0", "--json"}, 2, "jobcg who-has: 'c -1:0'", ""},
    {{"who-has", "c 4294967296:0"}, 2, "'c 4294967296:0'", ""},
    {{"who-has", "c 99999999999:0"}, 2, "'c 99999999999:0'", ""},
    {{"who-has", "c 4096:0"}, 2, "MAJOR 0..4095", ""},
    {{"who-has", "b 1:1048576"}, 2, "MINOR 0..1048575", ""},
    {{"who-has", "c 1:-1"}, 2, "'c 1:-1'", ""},
    {{"who-has", "c +1:3"}, 2, "'c +1:3'", ""},
    {{"who-has", "c 1:3x"}, 2, "'c 1:3x'", ""},
    {{"who-has", "c 1: 3"}, 2, "'c 1: 3'", ""},
    {{"who-has", "c 1:3", "--root", "@top"}, 0, NULL, "may open c 1:3"},
    {{"who-has", "c 4095:1048575", "--root", "@top"}, 0, NULL, "may open c 4095:1048575"},
    /* relative to the cgroup v2 mount, as policy --root and JOBCG_ROOT, never to the cwd */
    {{"who-has", "c 1:3", "--root", "@rel", "--json"}, 0, NULL, "\"root\":\"/"},
    /* --help for every resv verb; option errors name the option as given, under the verb */
    {{"resv", "create", "--help"}, 0, NULL, "Usage: jobcg resv create"},
    {{"resv", "list", "--help"}, 0, NULL, "Usage: jobcg resv"},
    {{"resv", "show", "--help"}, 0, NULL, "Usage: jobcg resv"},
    {{"resv", "verify", "--help"}, 0, NULL, "Usage: jobcg resv"},
    {{"resv", "delete", "-h"}, 0, NULL, "Usage: jobcg resv"},
    {{"resv", "list", "--bogus"}, 2, "jobcg resv list: unknown option '--bogus'", ""},
    {{"resv", "create", "r9", "--devices"},
     2,
     "jobcg resv create: option '--devices' needs an argument",
     ""},
    {{"resv", "verify", "--repair=yes"}, 2, "option '--repair' takes no argument", ""},
    {{"resv", "show", "r1", "--repair"}, 2, "--repair goes with verify only", ""},
    {{"config", "--host"}, 2, "jobcg config: option '--host' needs an argument", ""},
    {{"config", "--json=1"}, 2, "jobcg config: option '--json' takes no argument", ""},
    {{"policy", "--bogus"}, 2, "jobcg policy: unknown option '--bogus'", ""},
    {{"alloc", "1", "--mem"}, 2, "jobcg alloc: option '--mem' needs an argument", ""},
    {{"freeze", "--timeout"}, 2, "jobcg freeze: option '--timeout' needs an argument", ""},
    {{"who-has", "--root"}, 2, "jobcg who-has: option '--root' needs an argument", ""},
    {{"gc", "--bogus=1"}, 2, "jobcg gc: unknown option '--bogus'", ""},
    {{"top", "-n"}, 2, "jobcg top: option '-n' needs an argument", ""},
    {{"run", "-n"}, 2, "jobcg run: option '-n' needs an argument", ""},
    {{"signal", "-s"}, 2, "jobcg signal: option '-s' needs an argument", ""},
    {{"top", "-x"}, 2, "jobcg top: unknown option '-x'", ""},
    {{"top", "-bx"}, 2, "jobcg top: unknown option '-x'", ""},
    {{"top", "-xb"}, 2, "jobcg top: unknown option '-x'", ""},
    {{"alloc", "-12"}, 2, "a negative number is not an id", ""},
    /* a message that names the argument as the command takes it */
    {{"adopt", "-5"}, 2, "jobcg adopt: PID '-5': need a process id", ""},
    {{"freeze", "--timeout", "-1", "1"}, 2, "--timeout '-1': need milliseconds 0..3600000", ""},
    {{"policy", "--dev-dir", "/nonexistent"}, 2, "--dev-dir '/nonexistent': No such file", ""},
    {{"help", "run", "extra"}, 2, "jobcg help: unexpected argument 'extra'", ""},
    /* an option of one value given twice: refused naming both, never the last taken */
    {{"alloc", "1", "--gres", "gpu:1", "--gres", "gpu:2"},
     2,
     "jobcg alloc: --gres given twice ('gpu:1', then 'gpu:2')",
     ""},
    {{"alloc", "1", "--mem", "1G", "--mem", "2G"}, 2, "--mem given twice", ""},
    {{"alloc", "1", "--uid", "0", "--user", "0"}, 2, "--uid/--user given twice", ""},
    {{"alloc", "1", "--gid", "0", "--gid", "0"}, 2, "--gid given twice", ""},
    {{"run", "--job", "5", "--job", "6", "--", "true"}, 2, "--job given twice ('5', then '6')", ""},
    {{"run", "-n", "1", "--ntasks", "2", "--", "true"}, 2, "--ntasks given twice", ""},
    {{"run", "--step", "1", "--step", "2", "--", "true"}, 2, "--step given twice", ""},
    {{"run", "--cpus", "0", "--cpus", "0", "--", "true"}, 2, "--cpus given twice", ""},
    {{"run", "--gpu-bind", "none", "--gpu-bind", "none", "--", "true"},
     2,
     "--gpu-bind given twice",
     ""},
    {{"acct", "--job", "1", "--job", "2"}, 2, "jobcg acct: --job given twice", ""},
    {{"acct", "--reservation", "a", "--reservation", "b"}, 2, "--reservation given twice", ""},
    {{"top", "-b", "-n", "1", "-n", "2"}, 2, "jobcg top: -n given twice ('1', then '2')", ""},
    {{"top", "-d", "1", "-d", "2"}, 2, "jobcg top: -d given twice", ""},
    {{"top", "-o", "cpu", "-o", "mem"}, 2, "jobcg top: -o given twice", ""},
    {{"who-has", "--root", "a", "--root", "b", "c 1:3"},
     2,
     "jobcg who-has: --root given twice",
     ""},
    {{"decode", "--cgroup", "a", "--cgroup", "b"}, 2, "jobcg decode: --cgroup given twice", ""},
    {{"metrics", "--textfile", "a", "--textfile", "b"},
     2,
     "jobcg metrics: --textfile given twice",
     ""},
    {{"metrics", "--listen", "a", "--listen", "b"}, 2, "jobcg metrics: --listen given twice", ""},
    {{"metrics", "--listen-fd", "7", "--listen-fd", "8"}, 2, "--listen-fd given twice", ""},
    {{"config", "--host", "a", "--host", "b"}, 2, "jobcg config: --host given twice", ""},
    {{"check", "--pam-dir", "/a", "--pam-dir", "/b"}, 2, "jobcg check: --pam-dir given twice", ""},
    {{"check", "--slurm-gres", "a", "--slurm-gres", "b"}, 2, "--slurm-gres given twice", ""},
    {{"adopt", "--job", "1", "--job", "2", "123"}, 2, "jobcg adopt: --job given twice", ""},
    {{"adopt", "--pam-dir", "/a", "--pam-dir", "/b", "123"}, 2, "--pam-dir given twice", ""},
    {{"gpus", "--backend", "a", "--backend", "b"}, 2, "jobcg gpus: --backend given twice", ""},
    {{"gpus", "--node", "a", "--node", "b"}, 2, "jobcg gpus: --node given twice", ""},
    {{"daemon", "--socket", "/a", "--socket", "/b"}, 2, "jobcg daemon: --socket given twice", ""},
    {{"daemon", "--max-clients", "1", "--max-clients", "2"}, 2, "--max-clients given twice", ""},
    {{"daemon", "--metrics-listen", "a", "--metrics-listen", "b"},
     2,
     "--metrics-listen given twice",
     ""},
    {{"daemon", "--resv-period", "1", "--resv-period", "2"}, 2, "--resv-period given twice", ""},
    {{"policy", "--root", "a", "--root", "b"}, 2, "jobcg policy: --root given twice", ""},
    {{"policy", "--dev-dir", "/dev", "--dev-dir", "/dev"}, 2, "--dev-dir given twice", ""},
    {{"release", "1", "--grace", "1", "--grace", "2"}, 2, "jobcg release: --grace given twice", ""},
    {{"teardown", "--force", "--grace", "1", "--grace", "2"},
     2,
     "jobcg teardown: --grace given twice",
     ""},
    {{"metrics", "--user", "a", "--user", "b"}, 2, "jobcg metrics: --user given twice", ""},
    {{"daemon", "--metrics-user", "a", "--metrics-user", "b"},
     2,
     "jobcg daemon: --metrics-user given twice",
     ""},
    {{"step-watch", "--node", "a", "--node", "b"}, 2, "jobcg step-watch: --node given twice", ""},
    {{"step-watch", "--step-dir", "a", "--step-dir", "b"}, 2, "--step-dir given twice", ""},
    {{"freeze", "--timeout", "1", "--timeout", "2", "1"},
     2,
     "jobcg freeze: --timeout given twice",
     ""},
    {{"signal", "-s", "TERM", "-s", "KILL", "1"}, 2, "jobcg signal: --signal given twice", ""},
    /* a job or step that is not there, said as every command says it, not as a path */
    {{"devices", "99"}, 1, "jobcg: no job 99", ""},
    {{"devices", "99.3"}, 1, "jobcg: no step 99.3", ""},
    /* real-time signals by name, as kill(1) takes them; past the range is no signal */
    {{"signal", "-s", "RTMIN+2", "99"}, 1, "no job 99", ""},
    {{"signal", "-s", "sigrtmax-1", "99"}, 1, "no job 99", ""},
    {{"signal", "-s", "RTMAX+1", "99"}, 2, "--signal 'RTMAX+1': unknown signal", ""},
    {{"signal", "-s", "RTMIN+99", "99"}, 2, "--signal 'RTMIN+99': unknown signal", ""},
    /* usage errors are 2, failures 1, and a failure prints no partial JSON */
    {{"resv", "create", "BAD", "--devices", "gpu:0"}, 2, "invalid reservation name 'BAD'", ""},
    {{"gpus", "--backend", "bogus"}, 2, "jobcg gpus: --backend: unknown GPU detection", ""},
    {{"resv", "verify", "nosuch"}, 1, "no reservation nosuch", ""},
    {{"resv", "verify", "nosuch", "--json"}, 1, "no reservation nosuch", ""},
    {{"resv", "show", "nosuch", "--json"}, 1, "no reservation nosuch", ""},
    /* an empty value is refused, not taken for the default */
    {{"--config-dir", "", "config"}, 2, "--config-dir needs a directory", ""},
    {{"--config-dir=", "config"}, 2, "--config-dir needs a directory", ""},
    {{"--config-dir", "/a", "config", "--config-dir=/b"},
     2,
     "jobcg: --config-dir given twice ('/a', then '/b')",
     ""},
    {{"devices", ""}, 2, "jobcg devices: PATH or JOB[.STEP]: empty", ""},
    {{"decode", "--cgroup", ""}, 2, "jobcg decode: --cgroup: empty", ""},
    {{"decode", ""}, 2, "jobcg decode: FILE: empty", ""},
    {{"who-has", ""}, 2, "jobcg who-has: DEVICE: empty", ""},
    {{"policy", "--root", ""}, 2, "jobcg policy: --root: empty", ""},
    {{"daemon", "--socket", ""}, 2, "jobcg daemon: --socket: empty", ""},
    {{"daemon", "--metrics-listen", ""}, 2, "jobcg daemon: --metrics-listen: empty", ""},
    {{"daemon", "--metrics-user", ""}, 2, "jobcg daemon: --metrics-user: empty", ""},
    {{"daemon", "--metrics-user", "nobody"}, 2, "--metrics-user goes with --metrics-listen", ""},
    {{"metrics", "--listen", "127.0.0.1:1", "--user", ""}, 2, "jobcg metrics: --user: empty", ""},
    {{"metrics", "--user", "nobody"}, 2, "--user goes with --listen or --listen-fd", ""},
    {{"who-has", "--root", "", "c 1:3"}, 2, "jobcg who-has: --root: empty", ""},
    {{"check", "--pam-dir", ""}, 2, "jobcg check: --pam-dir: empty", ""},
    {{"check", "--slurm-gres", ""}, 2, "jobcg check: --slurm-gres: empty", ""},
    {{"gpus", "--gres-conf", "--node", ""}, 2, "jobcg gpus: --node: empty", ""},
    {{"adopt", "--pam", "--service", ","}, 2, "jobcg adopt: --service ','", ""},
    {{"adopt", "--service", "sshd", "123"}, 2, "--service and --pam-dir go with --pam", ""},
    {{"adopt", "--pam", "--job", "5"}, 2, "jobcg adopt: --pam chooses the job: no --job", ""},
    {{"adopt", "--pam", "123"}, 2, "--pam takes no PID (the process is our parent)", ""},
    /* a --pam-dir that is not there checks no stack: refused, not read past */
    {{"adopt", "--pam", "--pam-dir", "/nonexistent-jobcg-pam.d"},
     2,
     "jobcg adopt: --pam-dir '/nonexistent-jobcg-pam.d': No such file or directory",
     ""},
    {{"adopt", "--pam", "--pam-dir", "/dev/null"},
     2,
     "jobcg adopt: --pam-dir '/dev/null': not a",
     ""},
    {{"step-watch", "--step-dir", "", "1.0", "1:1"}, 2, "jobcg step-watch: --step-dir: empty", ""},
};

int main(void)
{
	const char *root = kcli_setup("cli-usage", "jobcg");
	char top[PATH_MAX], conf[PATH_MAX];
	const char *rel;

	snprintf(top, sizeof(top), "%.*s", (int)(strrchr(root, '/') - root), root);
	rel = top + strlen(ktest_cgroup_mount()) + 1;
	/* No node configuration of this host's, and no daemon: a usage error must come before
	 * either would matter. */
	snprintf(conf, sizeof(conf), "%s/conf", ktest_tmpdir());
	mkdir(conf, 0755);
	setenv("JOBCG_CONF_DIR", conf, 1);
	setenv("JOBCG_DAEMON_SOCKET", "", 1);
	setenv("JOBCG_BPF_PIN_DIR", ktest_pin_dir("cli-usage"), 1);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *w = &rows[i];
		char *args[MAXARGS + 1] = {0}, line[256] = "", *out = NULL, *err = NULL;
		int rc;

		for (size_t k = 0; k < MAXARGS && w->args[k]; k++) {
			args[k] = strcmp(w->args[k], "@top") == 0   ? top
				  : strcmp(w->args[k], "@rel") == 0 ? (char *)rel
								    : (char *)w->args[k];
			snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s'%s'",
				 k ? " " : "", w->args[k]);
		}
		rc = kcli_run(args, &out, &err);
		ok(rc == w->exit && (!w->err || (err && strstr(err, w->err))) &&
		       (!w->out || (out && (*w->out ? strstr(out, w->out) != NULL : !*out))),
		   "jobcg %s: exit %d%s%s", line, w->exit, w->err ? ", says " : "",
		   w->err ? w->err : "");
		if (rc != w->exit || (w->out && !*w->out && out && *out))
			tap_diag("  got exit %d, stdout '%.80s'", rc, out ? out : "");
		free(out);
		free(err);
	}
	return tap_done();
}
