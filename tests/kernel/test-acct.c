/* Kernel test: accounting at step end: what the host has is read, what it lacks is unavailable. */
#include <grp.h>
#include <json-c/json.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "jobcg/acct.h"
#include "jobcg/acctlog.h"
#include "jobcg/context.h"
#include "jobcg/job.h"
#include "kcli.h"

struct logcheck {
	int n;
	bool eph_step_ok, eph_job, killed_step, job31, job9157, noexec_step;
};

static int collect(const struct jobcg_acct_record *r, void *u)
{
	struct logcheck *c = u;
	unsigned long id = strtoul(r->job_id, NULL, 10);

	c->n++;
	if (r->kind == JOBCG_ACCT_STEP && id >= JOBCG_JOB_ID_EPHEMERAL_BASE &&
	    r->state == JOBCG_ACCT_COMPLETED && r->exit_code == 0 && r->ntasks == 1 &&
	    r->start_usec > 0 && r->end_usec >= r->start_usec)
		c->eph_step_ok = true;
	if (r->kind == JOBCG_ACCT_JOB && id >= JOBCG_JOB_ID_EPHEMERAL_BASE)
		c->eph_job = true;
	if (r->kind == JOBCG_ACCT_STEP && id == 32 && r->step_id &&
	    strcmp(r->step_id, "batch") == 0 && r->state == JOBCG_ACCT_FAILED &&
	    r->exit_signal == 9)
		c->killed_step = true;
	if (id == 9157)
		c->job9157 = true;
	if (r->kind == JOBCG_ACCT_STEP && id == 31 && r->exit_code == 127 &&
	    r->state == JOBCG_ACCT_FAILED)
		c->noexec_step = true;
	if (r->kind == JOBCG_ACCT_JOB && id == 31 && r->state == JOBCG_ACCT_COMPLETED &&
	    r->uid == 0 && r->start_usec > 0)
		c->job31 = true;
	return 0;
}

struct startcheck {
	bool seen;
	uint64_t start_usec;
};

static int find_job34(const struct jobcg_acct_record *r, void *u)
{
	struct startcheck *c = u;

	if (r->kind == JOBCG_ACCT_JOB && strcmp(r->job_id, "34") == 0) {
		c->seen = true;
		c->start_usec = r->start_usec;
	}
	return 0;
}

/* `jobcg run -- true` under RLIMIT_FSIZE = @limit, soft and hard (a child's own: we could not
 * raise our hard limit again without CAP_SYS_RESOURCE); its exit code, *err its stderr. */
static int run_fsize_limited(rlim_t limit, char **err)
{
	char *argv[] = {(char *)kcli_binary(), "run", "--", "true", NULL};
	struct rlimit lim = {.rlim_cur = limit, .rlim_max = limit};
	int e[2], st = 0;
	pid_t pid;

	if (pipe2(e, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(2, 1);
		dup2(e[1], 2);
		if (setrlimit(RLIMIT_FSIZE, &lim) == 0)
			execv(argv[0], argv);
		_exit(127);
	}
	close(e[1]);
	*err = kcli_slurp(e[0]);
	close(e[0]);
	if (*err && **err)
		ktest_diag_lines("jobcg stderr: ", *err);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* kcli_run() of @args for at most @ms: -1 (the jobcg killed) when it had not ended by then;
 * *ret_ms how long it took. */
static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int run_bounded(char *const args[], unsigned ms, unsigned *ret_ms)
{
	uint64_t start = mono_ms(), deadline = start + ms;
	pid_t pid = kcli_start(args, NULL, NULL);
	int st = 0;

	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (mono_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			*ret_ms = ms;
			return -1;
		}
		usleep(10000);
	}
	*ret_ms = (unsigned)(mono_ms() - start);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct reccheck {
	const char *id;
	bool step, job;
};

/* The COMPLETED records of job @c->id and its steps. */
static int find_job(const struct jobcg_acct_record *r, void *u)
{
	struct reccheck *c = u;

	if (strcmp(r->job_id, c->id) == 0 && r->state == JOBCG_ACCT_COMPLETED) {
		if (r->kind == JOBCG_ACCT_STEP)
			c->step = true;
		else
			c->job = true;
	}
	return 0;
}

/* The order of job 38's records in the log, "0 1 2 job" (job last: a removal writes its steps'
 * first). */
static int order38(const struct jobcg_acct_record *r, void *u)
{
	char *buf = u;

	if (strcmp(r->job_id, "38") == 0 && strlen(buf) < 64) {
		if (*buf)
			strcat(buf, " ");
		strncat(buf, r->kind == JOBCG_ACCT_STEP ? r->step_id : "job", 16);
	}
	return 0;
}

/* Job 39's records in log order: "STEP:EXIT" for a step, "job" for the job. */
static int order39(const struct jobcg_acct_record *r, void *u)
{
	char *buf = u, one[32];

	if (strcmp(r->job_id, "39") != 0 || strlen(buf) > 200)
		return 0;
	if (r->kind == JOBCG_ACCT_STEP)
		snprintf(one, sizeof(one), "%s%s:%d", *buf ? " " : "", r->step_id, r->exit_code);
	else
		snprintf(one, sizeof(one), "%sjob", *buf ? " " : "");
	strcat(buf, one);
	return 0;
}

/* A child as nobody holding LOCK_SH on @path, as anyone who can read the log may: its pid once
 * it holds it, -1 when it could not. */
static pid_t hold_read_lock(const char *path)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd;

		close(p[0]);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(1);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || flock(fd, LOCK_SH) < 0 || write(p[1], "h", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid > 0 && read(p[0], &c, 1) != 1) {
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

/* `jobcg acct --job 36` as nobody: its exit code, *out what it printed. */
static int acct_as_nobody(char **out)
{
	char *argv[] = {(char *)kcli_binary(), "acct", "--job", "36", NULL};
	int o[2], st = 0;
	pid_t pid;

	if (pipe2(o, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(o[1], 1);
		if (setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0)
			execv(argv[0], argv);
		_exit(127);
	}
	close(o[1]);
	*out = kcli_slurp(o[0]);
	close(o[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(void)
{
	const char *root = kcli_setup("acct", "jobcg");
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_acct a = {};
	struct jobcg_target t = {.job = 31, .step = "0", .task = JOBCG_TASK_ALL};
	struct jobcg_run_result res = {};
	char *argv[] = {"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", NULL};
	char *err = NULL;
	struct json_object *o, *acct, *v;
	bool mem;
	int rc;

	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0) {
		printf("Bail out! cannot open a context\n");
		return 1;
	}
	is_int(jobcg_job_create(ctx, 31, NULL, 0, NULL), 0, "job 31");
	is_int(jobcg_step_create(ctx, 31, "0", 0, NULL), 0, "step 31.0");
	is_int(jobcg_step_run(ctx, 31, "0", 2, argv, NULL, &res), 0, "two busy tasks ran");
	is_int(res.exit_code, 0, "exit 0");
	free(res.task_status);
	is_int(jobcg_acct_read(ctx, &t, &a), 0, "read step accounting after the tasks ended");
	ok(jobcg_acct_has(&a, JOBCG_ACCT_CPU_USAGE_USEC) &&
	       a.value[JOBCG_ACCT_CPU_USAGE_USEC] > 1000,
	   "cpu usage of the ended tasks is kept in the step (%llu usec)",
	   (unsigned long long)a.value[JOBCG_ACCT_CPU_USAGE_USEC]);
	mem = kcli_exists("%s/job_31/step_0/memory.current", root);
	is_int(jobcg_acct_has(&a, JOBCG_ACCT_MEM_CURRENT), mem,
	       "memory.current available exactly when the file exists");
	is_int(jobcg_acct_has(&a, JOBCG_ACCT_MEM_PEAK),
	       kcli_exists("%s/job_31/step_0/memory.peak", root), "memory.peak likewise");
	is_int(jobcg_acct_has(&a, JOBCG_ACCT_PIDS_CURRENT),
	       kcli_exists("%s/job_31/step_0/pids.current", root), "pids.current likewise");
	if (!mem)
		ok(a.value[JOBCG_ACCT_MEM_PEAK] == 0 && !jobcg_acct_has(&a, JOBCG_ACCT_OOM_KILL),
		   "unavailable items are marked so, not reported as readings");
	else
		ok(a.value[JOBCG_ACCT_MEM_PEAK] > 0, "memory peak is positive");
	{
		struct jobcg_acct one = {}, none = {.have = 1};
		struct jobcg_target gone = {.job = 31, .step = "9", .task = JOBCG_TASK_ALL};

		is_int(jobcg_acct_read_file(ctx, &t, "cpu.stat", &one), 0, "read cpu.stat alone");
		ok(jobcg_acct_has(&one, JOBCG_ACCT_CPU_USAGE_USEC) &&
		       one.value[JOBCG_ACCT_CPU_USAGE_USEC] == a.value[JOBCG_ACCT_CPU_USAGE_USEC] &&
		       !jobcg_acct_has(&one, JOBCG_ACCT_MEM_CURRENT) &&
		       !jobcg_acct_has(&one, JOBCG_ACCT_PIDS_CURRENT),
		   "cpu.stat alone gives the CPU items, and nothing of the other files");
		is_int(jobcg_acct_read_file(ctx, &t, "memory.events", &one), 0,
		       "read memory.events alone");
		is_int(jobcg_acct_has(&one, JOBCG_ACCT_OOM_KILL), mem,
		       "its OOM counters exactly when memory is enabled");
		ok(!jobcg_acct_has(&one, JOBCG_ACCT_CPU_USAGE_USEC), "and not the CPU items");
		is_int(jobcg_acct_read_file(ctx, &t, "cgroup.procs", &none), -EINVAL,
		       "a file that is not an accounting file is refused");
		is_int(none.have, 1, "output untouched on failure");
		is_int(jobcg_acct_read_file(ctx, &gone, "cpu.stat", &none), -ENOENT,
		       "a step that does not exist: -ENOENT");
	}
	is_int(jobcg_step_remove(ctx, 31, "0", 0), 0, "remove step");

	/* CLI: run --acct --json prints the accounting on stderr with nulls for unavailable. */
	{
		char *args[] = {"run", "--acct", "--json", "--", "sh", "-c", "echo hi", NULL};
		char *out = NULL;

		rc = kcli_run(args, &out, &err);
		is_int(rc, 0, "run --acct --json exits 0");
		is_str(out, "hi\n", "command output untouched on stdout");
		free(out);
	}
	o = err ? json_tokener_parse(err) : NULL;
	ok(o && json_object_object_get_ex(o, "acct", &acct), "accounting JSON on stderr");
	if (o && json_object_object_get_ex(o, "acct", &acct)) {
		ok(json_object_object_get_ex(acct, "cpu_usage_usec", &v) && v &&
		       json_object_is_type(v, json_type_int),
		   "cpu_usage_usec is a number");
		ok(json_object_object_get_ex(acct, "mem_peak", &v) && (mem ? v != NULL : v == NULL),
		   "mem_peak is %s", mem ? "a number" : "null (unavailable)");
	} else {
		tap_skip("no json");
		tap_skip("no json");
	}
	json_object_put(o);
	free(err);

	is_int(kcli(NULL, "run", "--job", "32", "--step", "batch", "--", "sh", "-c",
		    "kill -KILL $$", NULL),
	       137, "a step killed by SIGKILL");

	/* A command that cannot be started is a step too: its record says FAILED, exit 127. */
	is_int(kcli(NULL, "run", "--job", "31", "--", "/nonexistent/cmd", NULL), 127,
	       "run of a missing command exits 127");
	/* A bad option is refused before anything is made: no job, no record. */
	is_int(kcli(NULL, "run", "--job", "9157", "--gpu-bind", "bogus", "--", "true", NULL), 2,
	       "run --gpu-bind bogus is a usage error");
	is_int(kcli(NULL, "stat", "31", NULL), 0, "jobcg stat on the job");
	is_int(jobcg_job_remove(ctx, 31, 0), 0, "remove job 31");
	is_int(kcli(NULL, "stat", "31", NULL), 1, "jobcg stat on a missing job fails");

	/* The durable log has a record per step run by the CLI and per removed job. */
	{
		struct logcheck c = {};
		char *path = NULL;

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		is_int(jobcg_acctlog_read(path, NULL, collect, &c), 0, "read the accounting log");
		tap_diag("log %s: %d records", path, c.n);
		ok(c.eph_step_ok, "ephemeral step: COMPLETED, exit 0, one task, cpu and times set");
		ok(c.eph_job, "ephemeral job record");
		ok(c.killed_step, "step 32.batch: FAILED with exit_signal 9");
		ok(c.job31, "job 31 record: COMPLETED (nothing left running), uid 0");
		ok(!c.job9157, "no record of the refused run's job 9157");
		ok(c.noexec_step,
		   "the missing command's step is recorded FAILED with exit code 127");
		free(path);
	}
	/* A trusted.jobcg.created that is not a number: the record is still written, its start
	 * unknown (0), not 12 seconds after 1970, and the CLI warns naming the cgroup. */
	{
		struct startcheck c = {};
		char jd[PATH_MAX], *path = NULL, *args[] = {"release", "34", NULL};

		snprintf(jd, sizeof(jd), "%s/job_34", root);
		is_int(kcli(NULL, "alloc", "34", NULL), 0, "job 34");
		ok(setxattr(jd, "trusted.jobcg.created", "12x", 3, 0) == 0,
		   "job 34: trusted.jobcg.created set to '12x' by hand");
		err = NULL;
		rc = kcli_run(args, NULL, &err);
		is_int(rc, 0, "release 34 still succeeds (the job has ended)");
		ok(err && strstr(err, "job_34: trusted.jobcg.created '12x' is not a number"),
		   "and warns naming the cgroup and attribute");
		free(err);
		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		is_int(jobcg_acctlog_read(path, NULL, find_job34, &c), 0, "read the log again");
		/* Not 0, which would read as a job that began in 1970: its directory's time. */
		ok(c.seen && c.start_usec > 1000000000ull * 1000000u,
		   "job 34's record is written, started when its directory was made (%llu)",
		   (unsigned long long)c.start_usec);
		free(path);
	}
	/* AccountingSync= reaches 'jobcg run'. fsync() of a FIFO fails with EINVAL where a write
	 * succeeds, so with acct.jsonl a FIFO the CLI shows whether it fsynced a step's record:
	 * not by default (the job's record does it for its steps), always with
	 * AccountingSync=step. */
	{
		char sd[PATH_MAX], fifo[PATH_MAX], cd[PATH_MAX], cf[PATH_MAX];
		char *old_sd = strdup(getenv("JOBCG_STATE_DIR"));
		char *args[] = {"run", "--job", "33", "--", "true", NULL};
		FILE *f;
		int rd;

		snprintf(sd, sizeof(sd), "%s/fifo-state", ktest_tmpdir());
		snprintf(fifo, sizeof(fifo), "%s/acct.jsonl", sd);
		snprintf(cd, sizeof(cd), "%s/sync-conf", ktest_tmpdir());
		snprintf(cf, sizeof(cf), "%s/cgroup.conf", cd);
		ok(mkdir(sd, 0700) == 0 && mkfifo(fifo, 0600) == 0 && mkdir(cd, 0700) == 0,
		   "a state dir whose acct.jsonl is a FIFO");
		/* Held open read-write: the writers never block and the records are drained. */
		rd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		setenv("JOBCG_STATE_DIR", sd, 1);
		is_int(kcli(NULL, "alloc", "33", NULL), 0, "job 33");
		err = NULL;
		rc = kcli_run(args, NULL, &err);
		is_int(rc, 0, "run --job 33 with the default AccountingSync");
		ok(err && !strstr(err, "fsync"), "no fsync of the step's record by default");
		if (err && strstr(err, "fsync"))
			ktest_diag_lines("  stderr: ", err);
		free(err);
		f = fopen(cf, "w");
		ok(f && fputs("AccountingSync=step\n", f) >= 0 && fclose(f) == 0,
		   "cgroup.conf with AccountingSync=step");
		setenv("JOBCG_CONF_DIR", cd, 1);
		err = NULL;
		rc = kcli_run(args, NULL, &err);
		is_int(rc, 0, "the step's status is still the command's");
		ok(err && strstr(err, "cannot fsync") && strstr(err, "acct.jsonl"),
		   "AccountingSync=step fsyncs the step's record (the FIFO refuses it)");
		free(err);
		unsetenv("JOBCG_CONF_DIR");
		setenv("JOBCG_STATE_DIR", old_sd, 1);
		is_int(kcli(NULL, "release", "33", NULL), 0, "release job 33");
		if (rd >= 0)
			close(rd);
		unlink(fifo);
		unlink(cf);
		rmdir(sd);
		rmdir(cd);
		free(old_sd);
	}
	/* A file-size limit inherited from a batch environment, below the log's size: the run's
	 * status is its command's, not 153 (SIGXFSZ after its cgroups are gone), and no
	 * ephemeral job is left orphaned. Under a soft limit the records are written. (A coverage
	 * build writes its counters at exit, past any such limit.) */
	if (tap_coverage())
		tap_skip("a file-size limit: a coverage build's exit writes past it");
	else {
		struct rlimit old, lim;
		struct stat before = {}, after;
		char *path = NULL, *out = NULL;

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		if (getrlimit(RLIMIT_FSIZE, &old) < 0)
			old.rlim_cur = old.rlim_max = RLIM_INFINITY;
		ok(path && stat(path, &before) == 0, "the log's size");
		lim = old;
		lim.rlim_cur = (rlim_t)before.st_size;
		ok(setrlimit(RLIMIT_FSIZE, &lim) == 0, "soft RLIMIT_FSIZE = %lld bytes",
		   (long long)before.st_size);
		rc = kcli(NULL, "run", "--", "true", NULL);
		ok(setrlimit(RLIMIT_FSIZE, &old) == 0, "limit restored");
		is_int(rc, 0, "run under it exits 0");
		if (!path || stat(path, &after) < 0)
			after.st_size = -1;
		ok(after.st_size > before.st_size, "its records were written (%lld -> %lld bytes)",
		   (long long)before.st_size, (long long)after.st_size);
		/* `ulimit -f` sets the hard limit too: raised only with CAP_SYS_RESOURCE, else the
		 * records are not written, and the run says so. */
		before = after;
		rc = run_fsize_limited((rlim_t)before.st_size, &err);
		if (!path || stat(path, &after) < 0)
			after.st_size = -1;
		is_int(rc, 0, "run under a hard limit as well exits 0");
		ok(after.st_size > before.st_size || (err && strstr(err, "RLIMIT_FSIZE")),
		   "its records were written (%lld -> %lld bytes) or it says why not",
		   (long long)before.st_size, (long long)after.st_size);
		free(err);
		err = NULL;
		is_int(kcli(&out, "list", NULL), 0, "jobcg list");
		ok(out && !strstr(out, "orphaned"), "no orphaned ephemeral job left behind");
		free(out);
		free(path);
	}
	/*
	 * Anyone who can read the log (0644, or a group of log readers) can flock() it: a process
	 * as nobody holding LOCK_SH on it must not stop a step's end or a release (writers lock a
	 * file only root can open), and a reader who is not root still reads the log.
	 */
	{
		char *path = NULL, *out = NULL, lock[PATH_MAX];
		char *run[] = {"run", "--job", "36", "--", "true", NULL};
		char *rel[] = {"release", "36", NULL};
		struct reccheck c = {.id = "36"};
		struct stat lst;
		unsigned ms = 0;
		pid_t holder;

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		ok(path && chmod(ktest_tmpdir(), 0755) == 0 && chmod(path, 0644) == 0,
		   "the state directory and the log readable by all");
		holder = path ? hold_read_lock(path) : -1;
		ok(holder > 0, "a process as nobody holds LOCK_SH on the log");
		is_int(kcli(NULL, "alloc", "36", NULL), 0, "job 36");
		rc = run_bounded(run, 30000, &ms);
		ok(rc == 0, "jobcg run --job 36 -- true ends meanwhile (exit %d, %u ms)", rc, ms);
		rc = run_bounded(rel, 30000, &ms);
		ok(rc == 0, "jobcg release 36 too (exit %d, %u ms)", rc, ms);
		if (path)
			jobcg_acctlog_read(path, "36", find_job, &c);
		ok(c.step && c.job, "both wrote their record (step %d, job %d)", c.step, c.job);
		snprintf(lock, sizeof(lock), "%s.lock", path ? path : "");
		ok(stat(lock, &lst) == 0 && lst.st_uid == 0 && (lst.st_mode & 07777) == 0600,
		   "the writers' lock %s is root's, mode 0600", lock);
		if (holder > 0) {
			kill(holder, SIGKILL);
			waitpid(holder, NULL, 0);
		}
		rc = acct_as_nobody(&out);
		ok(rc == 0 && out && strstr(out, "36.0") && strstr(out, "COMPLETED"),
		   "jobcg acct --job 36 as nobody reads the log (exit %d)", rc);
		if (out && rc != 0)
			ktest_diag_lines("  ", out);
		free(out);
		chmod(ktest_tmpdir(), 0700);
		free(path);
	}
	/*
	 * A log that cannot be written (here its writers' lock refused) when steps end: their
	 * records wait on their job's directory. The job's release, which removes that directory,
	 * must keep them (in <StateDir>/pending/, with the job's own) for gc to write once the log
	 * takes them again, in the order a removal writes them, rather than lose them with the
	 * directory.
	 */
	{
		char *path = NULL, lock[PATH_MAX], pend[PATH_MAX];
		char order[128] = "";

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		snprintf(lock, sizeof(lock), "%s.lock", path ? path : "");
		snprintf(pend, sizeof(pend), "%s/pending/38.0", ktest_tmpdir());
		is_int(kcli(NULL, "alloc", "38", NULL), 0, "job 38");
		ok(chmod(lock, 0644) == 0, "the log's lock made unusable");
		for (int i = 0; i < 3; i++) {
			rc = kcli(NULL, "run", "--job", "38", "--", "true", NULL);
			ok(rc == 0,
			   "jobcg run --job 38 -- true: step 38.%d, its record not written", i);
		}
		is_int(kcli(NULL, "release", "38", NULL), 0, "jobcg release 38");
		ok(kcli_exists("%s", pend), "the steps' records are kept, as %s", pend);
		ok(chmod(lock, 0600) == 0, "the lock usable again");
		is_int(kcli(NULL, "gc", NULL), 0, "jobcg gc");
		if (path)
			jobcg_acctlog_read(path, "38", order38, order);
		is_str(order, "0 1 2 job",
		       "gc wrote the steps' records and the job's, in the order a removal does");
		ok(!kcli_exists("%s", pend), "and nothing is left pending");
		free(path);
	}
	/*
	 * The same job id made again while the log still fails: the second job's records must not
	 * clash with the first's in pending/ (and be lost with its directory). gc writes both
	 * jobs', each job's steps before it, the first job's before the second's; and the release
	 * says where the job's record waits.
	 */
	{
		char *path = NULL, lock[PATH_MAX], order[256] = "", *rerr = NULL;
		char *rel[] = {"release", "39", NULL};

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		snprintf(lock, sizeof(lock), "%s.lock", path ? path : "");
		ok(chmod(lock, 0644) == 0, "the log's lock made unusable");
		for (int k = 1; k <= 2; k++) {
			char code[32];

			snprintf(code, sizeof(code), "exit %d", k);
			ok(kcli(NULL, "alloc", "39", NULL) == 0, "job 39, the %s time",
			   k == 1 ? "first" : "second");
			ok(kcli(NULL, "run", "--job", "39", "--", "sh", "-c", code, NULL) == k,
			   "jobcg run --job 39 -- sh -c '%s'", code);
			free(rerr);
			rerr = NULL;
			is_int(kcli_run(rel, NULL, &rerr), 0, "jobcg release 39");
		}
		ok(rerr && strstr(rerr, "job 39: accounting record not written") &&
		       strstr(rerr, "kept in ") && strstr(rerr, "for jobcg gc"),
		   "the release says the job's record is kept for gc: %s", rerr ? rerr : "");
		free(rerr);
		ok(chmod(lock, 0600) == 0, "the lock usable again");
		is_int(kcli(NULL, "gc", NULL), 0, "jobcg gc");
		if (path)
			jobcg_acctlog_read(path, "39", order39, order);
		is_str(order, "0:1 job 0:2 job",
		       "gc wrote both jobs' records, steps first, in the order the jobs ended");
		free(path);
	}
	/*
	 * A step's record waiting on its job's directory that can be neither written nor kept in
	 * pending/ (here pending/ a regular file): the release must not remove the directory with
	 * it. It fails, saying why; gc finishes the job once both work again, and writes both
	 * records.
	 */
	{
		char *path = NULL, lock[PATH_MAX], pdir[PATH_MAX], jdir[PATH_MAX], *rerr = NULL;
		char *rel[] = {"release", "40", NULL};
		struct reccheck c = {.id = "40"};
		int fd;

		is_int(jobcg_acctlog_path(conf, &path), 0, "log path");
		snprintf(lock, sizeof(lock), "%s.lock", path ? path : "");
		snprintf(pdir, sizeof(pdir), "%s/pending", ktest_tmpdir());
		is_int(kcli(NULL, "alloc", "40", NULL), 0, "job 40");
		ok(chmod(lock, 0644) == 0, "the log's lock made unusable");
		is_int(kcli(NULL, "run", "--job", "40", "--", "true", NULL), 0,
		       "jobcg run --job 40 -- true: its record waits on the job");
		(void)rmdir(pdir);
		fd = open(pdir, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		ok(fd >= 0, "a regular file where pending/ should be");
		if (fd >= 0)
			close(fd);
		is_int(kcli_run(rel, NULL, &rerr), 1, "jobcg release 40 fails");
		ok(rerr && strstr(rerr, "job 40: not removed, left for jobcg gc: step 40.0: "
					"pending accounting record neither written"),
		   "saying why: %s", rerr ? rerr : "");
		snprintf(jdir, sizeof(jdir), "%s/job_40", root);
		ok(getxattr(jdir, "trusted.jobcg.pending.0", NULL, 0) >= 0,
		   "the job is still there, with its step's record");
		free(rerr);
		ok(unlink(pdir) == 0 && chmod(lock, 0600) == 0,
		   "pending/ and the lock fixed by hand");
		is_int(kcli(NULL, "gc", NULL), 0, "jobcg gc");
		ok(!kcli_exists("%s/job_40", root), "gc removed the job");
		if (path)
			jobcg_acctlog_read(path, "40", find_job, &c);
		ok(c.step && c.job, "and both records are written (step %d, job %d)", c.step,
		   c.job);
		free(path);
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
