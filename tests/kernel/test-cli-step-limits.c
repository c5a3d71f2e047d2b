/* Kernel test: `jobcg run --job J --cpus/--mem` limits a step to a part of its job: more than the
 * job has is refused naming the option and what the job has, an unenforceable limit is refused
 * without --best-effort, nothing is left behind, and what a step got shows in `jobcg show`. */
#include <json-c/json.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "kcli.h"

/* Steps of job @job: the step_* directories under its cgroup. */
static int steps_of(const char *root, const char *job)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/job_%s", root, job);
	return kcli_count_dirs(p);
}

static int run_err(char **err, ...)
{
	char *args[32];
	size_t n = 0;
	va_list ap;

	va_start(ap, err);
	while (n < 31 && (args[n] = va_arg(ap, char *)))
		n++;
	args[n] = NULL;
	va_end(ap);
	return kcli_run(args, NULL, err);
}

int main(void)
{
	const char *root = kcli_setup("cli-step-limits", "jobcg");
	bool cpuset_ok, mem_ok;
	char *err = NULL, *out = NULL, cpu_beyond[16];
	const char *be;
	int rc;

	is_int(kcli(NULL, "init", NULL), 0, "init");
	cpuset_ok = kcli_usable("cpuset");
	mem_ok = kcli_usable("memory");
	tap_diag("cpuset %s, memory %s", cpuset_ok ? "usable" : "not usable",
		 mem_ok ? "usable" : "not usable");
	/* Best effort only where something cannot be enforced (else a no-op option in its place):
	 * the subset rules hold either way. */
	be = cpuset_ok && mem_ok ? "--ntasks=1" : "--best-effort";

	is_int(kcli(NULL, "alloc", "5", "--cpus", "1", "--mem", "200M", "--best-effort", NULL), 0,
	       "alloc 5 --cpus 1 --mem 200M");
	is_int(kcli_count_dirs(root), 2, "the job exists (and system/)");

	rc = run_err(&err, "run", "--job", "5", "--cpus", "0-1", "--best-effort", "--", "true",
		     NULL);
	is_int(rc, 2, "--cpus 0-1 in a job of CPU 1 is a usage error");
	ok(err && strstr(err, "--cpus 0-1") && strstr(err, "not a subset of job 5's CPUs (1)"),
	   "the error names the option and the job's CPUs");
	free(err);
	is_int(steps_of(root, "5"), 0, "no step was made");

	rc = run_err(&err, "run", "--job", "5", "--mem", "300M", "--best-effort", "--", "true",
		     NULL);
	is_int(rc, 2, "--mem 300M in a job of 200M is a usage error");
	ok(err && strstr(err, "--mem 314572800 bytes") &&
	       strstr(err, "more than job 5 has (209715200 bytes)"),
	   "the error names the option and the job's memory");
	free(err);
	is_int(steps_of(root, "5"), 0, "no step was made");

	rc = run_err(&err, "run", "--job", "5", "--pids", "10", "--", "true", NULL);
	is_int(rc, 1, "--pids in an existing job is still refused");
	ok(err && strstr(err, "--pids/--cpu-weight only apply to a new job"), "naming --pids");
	free(err);

	if (!cpuset_ok) {
		rc = run_err(&err, "run", "--job", "5", "--cpus", "1", "--", "true", NULL);
		is_int(rc, 1, "--cpus 1 is refused where cpuset cannot be enforced");
		ok(err && strstr(err, "--cpus 1") && strstr(err, "cpuset controller") &&
		       strstr(err, "--best-effort"),
		   "the error names the option, the reason and the way out");
		free(err);
		is_int(steps_of(root, "5"), 0, "no step was made");
	} else
		for (int i = 0; i < 3; i++)
			tap_skip("cpuset is usable here: the VM tier checks enforcement");
	if (!mem_ok) {
		rc = run_err(&err, "run", "--job", "5", "--mem", "100M", "--", "true", NULL);
		is_int(rc, 1, "--mem 100M is refused where memory cannot be enforced");
		ok(err && strstr(err, "--mem 100M") && strstr(err, "--best-effort"),
		   "the error names the option and the way out");
		free(err);
		is_int(steps_of(root, "5"), 0, "no step was made");
	} else
		for (int i = 0; i < 3; i++)
			tap_skip("memory is usable here: the VM tier checks enforcement");

	/* A step within the job: its limits are recorded on the step and shown. */
	{
		char *args[] = {"run",	"--job", "5",	   "--step",   "7",  "--cpus",
				"1",	"--mem", "100M",   (char *)be, "--", (char *)kcli_binary(),
				"show", "5.7",	 "--json", NULL};
		struct json_object *o = NULL, *x;

		rc = kcli_run(args, &out, NULL);
		is_int(rc, 0, "a step with --cpus 1 --mem 100M runs in the job");
		o = out ? json_tokener_parse(out) : NULL;
		ok(o && json_object_object_get_ex(o, "cpus", &x) &&
		       strcmp(json_object_get_string(x), "1") == 0,
		   "show 5.7 from inside the step: cpus 1");
		ok(o && json_object_object_get_ex(o, "mem_bytes", &x) &&
		       json_object_get_uint64(x) == 104857600,
		   "show 5.7: mem_bytes 104857600");
		ok(o && json_object_object_get_ex(o, "skipped", &x) &&
		       ((cpuset_ok && mem_ok)
			    ? x == NULL
			    : x && strstr(json_object_get_string(x), cpuset_ok ? "mem" : "cpus")),
		   "show 5.7: skipped lists exactly what this host cannot enforce");
		json_object_put(o);
		free(out);
	}
	/* A step's trusted.jobcg.mem that is not a number: show fails naming it, not "12". */
	{
		char sd[PATH_MAX];
		char *args[] = {"run",
				"--job",
				"5",
				"--step",
				"8",
				"--mem",
				"100M",
				(char *)be,
				"--",
				"sh",
				"-c",
				"python3 -c 'import os, sys; os.setxattr(sys.argv[1], "
				"\"trusted.jobcg.mem\", b\"12x\")' \"$0\" && exec \"$1\" show 5.8",
				sd,
				(char *)kcli_binary(),
				NULL};

		snprintf(sd, sizeof(sd), "%s/job_5/step_8", root);
		rc = kcli_run(args, NULL, &err);
		is_int(rc, 1, "show 5.8 with trusted.jobcg.mem '12x' fails");
		ok(err && strstr(err, "job_5/step_8: trusted.jobcg.mem '12x' is not a number"),
		   "naming the cgroup and the attribute");
		free(err);
		err = NULL;
	}
	is_int(steps_of(root, "5"), 0, "the step is gone after it ended");

	/* A job without --cpus has all the node's CPUs: CPU 0 is within, one past the last is not.
	 */
	is_int(kcli(NULL, "alloc", "6", NULL), 0, "alloc 6 without --cpus");
	snprintf(cpu_beyond, sizeof(cpu_beyond), "%ld", sysconf(_SC_NPROCESSORS_CONF));
	is_int(kcli(NULL, "run", "--job", "6", "--cpus", "0", "--best-effort", "--", "true", NULL),
	       0, "--cpus 0 in a job without --cpus runs");
	rc = run_err(&err, "run", "--job", "6", "--cpus", cpu_beyond, "--best-effort", "--", "true",
		     NULL);
	is_int(rc, 2, "a CPU the node does not have is refused");
	ok(err && strstr(err, "not a subset of job 6's CPUs"), "naming the job's CPUs");
	free(err);
	is_int(steps_of(root, "6"), 0, "no step left in job 6");

	/* A job's own numbers in trusted.jobcg.* that do not parse are named and ignored, never
	 * read as whatever their first digits say. */
	{
		char jd[PATH_MAX];
		char *args[] = {(char *)"show", (char *)"6", (char *)"--json", NULL};
		char *shown = NULL;

		snprintf(jd, sizeof(jd), "%s/job_6", root);
		ok(setxattr(jd, "trusted.jobcg.mem", "12x", 3, 0) == 0 &&
		       setxattr(jd, "trusted.jobcg.runner", "7abc", 4, 0) == 0,
		   "job 6's mem and runner attributes corrupted");
		err = NULL;
		rc = kcli_run(args, &shown, &err);
		is_int(rc, 0, "show 6 still works");
		ok(err && strstr(err, "job_6: trusted.jobcg.mem '12x' is not a number"),
		   "naming the cgroup and the mem attribute");
		ok(err && strstr(err, "job_6: trusted.jobcg.runner '7abc' is not PID:STARTTIME"),
		   "and the runner attribute");
		ok(shown && !strstr(shown, "\"mem_bytes\":12") &&
		       !strstr(shown, "\"mem_bytes\": 12"),
		   "the memory is not read as 12 bytes");
		free(shown);
		free(err);
		err = NULL;
		(void)removexattr(jd, "trusted.jobcg.mem");
		(void)removexattr(jd, "trusted.jobcg.runner");
	}

	/* With SpecCPUs=1 a job without --cpus has every CPU but 1 (cgroup.conf, resource
	 * specialisation): a step naming CPU 1 asks for what the job does not have, and the rest
	 * is the job's. */
	if (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && !cpuset_ok) {
		char dir[PATH_MAX], f[PATH_MAX + 16];
		FILE *c;

		snprintf(dir, sizeof(dir), "%s/spec", ktest_tmpdir());
		snprintf(f, sizeof(f), "%s/cgroup.conf", dir);
		ok(mkdir(dir, 0755) == 0 && (c = fopen(f, "we")) && fputs("SpecCPUs=1\n", c) >= 0 &&
		       fclose(c) == 0,
		   "a cgroup.conf with SpecCPUs=1");
		is_int(kcli(NULL, "--config-dir", dir, "alloc", "7", "--best-effort", NULL), 0,
		       "alloc 7 without --cpus under SpecCPUs=1");
		rc = run_err(&err, "--config-dir", dir, "run", "--job", "7", "--cpus", "1",
			     "--best-effort", "--", "true", NULL);
		is_int(rc, 1, "a step naming the reserved CPU 1 is refused, as a job would be");
		ok(err && strstr(err, "--cpus 1: CPU 1 is reserved for the system") &&
		       steps_of(root, "7") == 0,
		   "naming the option and the reservation, with no step made");
		free(err);
		is_int(kcli(NULL, "--config-dir", dir, "run", "--job", "7", "--cpus", "0",
			    "--best-effort", "--", "true", NULL),
		       0, "a step on CPU 0 runs");
		is_int(kcli(NULL, "release", "7", NULL), 0, "release 7");
	} else
		for (int i = 0; i < 6; i++)
			tap_skip("needs 2 CPUs and no usable cpuset (else its cpuset says)");

	is_int(kcli(NULL, "release", "5", NULL), 0, "release 5");
	is_int(kcli(NULL, "release", "6", NULL), 0, "release 6");
	is_int(kcli_count_dirs(root), 1, "nothing left behind");
	return tap_done();
}
