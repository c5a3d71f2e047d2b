/*
 * jobcg benchmark driver: times process launches (the floor, a command line such as
 * `jobcg run`, the library's step API, a bare cgroup chain) the same way, interleaved in small
 * blocks so that load from other processes hits every subject alike, and prints one JSON
 * object per subject. Also creates and removes many live jobs for the scale runs. bench/run
 * drives it; it measures, it never judges.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config_internal.h"
#include "jobcg/context.h"
#include "devices.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "jobcg/acct.h"
#include "jobcg/steplife.h"

#define MAX_SUBJECTS 16
#define MAX_ARGS     64
#define MAX_PAR	     64
#define TRUE_BIN     "/bin/true"

extern char **environ;

enum kind { K_FLOOR, K_CMD, K_LIB, K_AGENT, K_SPAWN, K_CYCLE, K_CGFLOOR };

struct subject {
	enum kind kind;
	char name[64];
	char *argv[MAX_ARGS]; /* K_CMD; "{i}" in an argument becomes the launcher index */
	uint32_t job;	      /* K_LIB, K_AGENT, K_SPAWN: the job (plus the launcher index if
				 job_plus) */
	bool job_plus;
	char *dir; /* K_CGFLOOR: parent of the chain */
	/* results */
	double *ns;
	size_t n, errors;
	double wall_ns;
	double cpu_ns; /* user+system time of this process and its reaped children (serial) */
	char first_error[256];
};

static struct jobcg_config *conf;
static struct jobcg_ctx *ctx;
static char spawn_step[JOBCG_STEP_ID_MAX];

/* -D N:MODE: a device policy at the tree root managing N devices, the first two being stand-in
 * GPUs c 195:0 and c 195:1 (never opened), the rest block devices that sort before them, so a
 * linear program compares against all of them (its worst case). Jobs made by cycle: subjects
 * and the job of -G get the two GPUs granted. */
static size_t dev_n;
static char dev_mode[16];
static struct jobcg_devpolicy *policy;
static uint32_t grant_job, grant_first, grant_count; /* -G JOB, -A FIRST:COUNT */

static int policy_open(void)
{
	struct jobcg_config c = *conf;
	struct jobcg_devrule *m = calloc(dev_n, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < dev_n; i++)
		m[i] = i < 2
			   ? (struct jobcg_devrule){'c', 195, (uint32_t)i, JOBCG_DEV_ACC_ALL, true}
			   : (struct jobcg_devrule){'b', 4000 + (uint32_t)(i / 1024),
						    (uint32_t)(i % 1024), JOBCG_DEV_ACC_ALL, true};
	c.cgroup.device_program =
	    strcmp(dev_mode, "linear") == 0 ? JOBCG_DEVPROG_LINEAR : JOBCG_DEVPROG_NODE;
	r = jobcg_ctx_ensure_tree(ctx);
	if (r == 0)
		r = jobcg_devpolicy_open(&c, jobcg_ctx_root(ctx), m, dev_n, &policy);
	free(m);
	if (r == 0 && jobcg_devpolicy_mode(policy) != c.cgroup.device_program) {
		fprintf(stderr, "launch: device program fell back: %s\n",
			jobcg_devpolicy_fallback_reason(policy));
		return -ENOEXEC;
	}
	return r;
}

static int job_grant(uint32_t job, bool grant)
{
	static const struct jobcg_devrule gpus[] = {
	    {'c', 195, 0, JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE, true},
	    {'c', 195, 1, JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE, true},
	};
	char path[4200];

	if (!policy || !job)
		return 0;
	snprintf(path, sizeof(path), "%s/job_%u", jobcg_ctx_root(ctx), job);
	return grant ? jobcg_devpolicy_grant(policy, path, gpus, 2)
		     : jobcg_devpolicy_revoke(policy, path);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int lib_open(void)
{
	char buf[1024];
	int r;

	if (ctx)
		return 0;
	if ((r = jobcg_config_load(NULL, NULL, 0, &conf)) < 0 ||
	    (r = jobcg_ctx_open(conf, 0, &ctx)) < 0) {
		fprintf(stderr, "launch: %s\n", jobcg_error_format(r, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

__attribute__((format(printf, 2, 3))) static void note_error(struct subject *s, const char *fmt,
							     ...)
{
	va_list ap;

	s->errors++;
	if (s->first_error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(s->first_error, sizeof(s->first_error), fmt, ap);
	va_end(ap);
}

/* The first failure of a subject, for its note: the calls' codes are not kept, so the record
 * is taken as it is (it may be an earlier failure's when a call left none of its own). */
static const char *lib_error(void)
{
	static char buf[256];
	return jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf));
}

static int out_fd = -1, err_fd = -1; /* where commands' stdout and stderr go (cmd:) */

/* fork + exec + wait; true when the command exited 0. */
static bool fork_exec_wait(char *const argv[], bool redirect)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return false;
	if (pid == 0) {
		if (redirect && out_fd >= 0)
			dup2(out_fd, 1);
		if (redirect && err_fd >= 0)
			dup2(err_fd, 2);
		/* Leading NAME=VALUE words set the command's environment, as in sh; a command
		 * name without a slash is looked up in PATH (the floor's is absolute). */
		while (argv[0] && strchr(argv[0], '=') && argv[0][0] != '/')
			putenv(*argv++);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/*
 * The least cgroup work a contained launch needs: a 4-level chain (controllers enabled down to
 * the leaf when $BENCH_CGFLOOR_CONTROLLERS says which, e.g. "+cpuset +cpu +memory +pids"), a
 * child born in its leaf (clone3 CLONE_INTO_CGROUP), exec, wait, the chain removed.
 */
static bool cgfloor_once(const char *dir, int idx)
{
	const char *ctrl = getenv("BENCH_CGFLOOR_CONTROLLERS");
	char p[4][4200];
	char *const argv[] = {(char *)TRUE_BIN, NULL};
	bool ok = false;
	int fd, made = 0, st;
	pid_t pid;

	snprintf(p[0], sizeof(p[0]), "%s/cgf%d", dir, idx);
	for (int i = 1; i < 4; i++)
		snprintf(p[i], sizeof(p[i]), "%s/l%d", p[i - 1], i);
	for (; made < 4; made++) {
		if (mkdir(p[made], 0755) < 0)
			goto out;
		if (ctrl && *ctrl && made < 3) {
			char sc[4300];
			int cfd;

			snprintf(sc, sizeof(sc), "%s/cgroup.subtree_control", p[made]);
			cfd = open(sc, O_WRONLY | O_CLOEXEC);
			if (cfd < 0 || write(cfd, ctrl, strlen(ctrl)) < 0) {
				if (cfd >= 0)
					close(cfd);
				made++;
				goto out;
			}
			close(cfd);
		}
	}
	fd = open(p[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		goto out;
	{
		struct clone_args a = {
		    .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = (uint64_t)fd};
		pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
	}
	if (pid == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	close(fd);
	if (pid < 0)
		goto out;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
out:
	while (made-- > 0)
		if (rmdir(p[made]) < 0)
			ok = false;
	return ok;
}

static uint32_t job_of(const struct subject *s, int idx)
{
	return s->job + (s->job_plus ? (uint32_t)idx : 0);
}

/*
 * agent:JOB: the work of one `jobcg run --job JOB -- /bin/true` (cli/run.c's run_begin and
 * run_finish, minus their messages) done through the library by a resident process, as a
 * scheduler's agent linking libjobcg would: the job checked, then jobcg_step_begin() (the
 * step, its share of the job's GPUs and their environment, the job's OOM counter), the task,
 * and jobcg_step_end() (the accounting read and record, the grant revoked, the step removed).
 * The "lib" subject is only the step itself.
 */
static void agent_step(struct subject *s, uint32_t job)
{
	static char *true_argv[] = {(char *)TRUE_BIN, NULL};
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	struct jobcg_step_request req = {.ntasks = 1};
	struct jobcg_run_result res = {};
	struct jobcg_spawn_opts so = {};
	struct jobcg_step_outcome end;
	struct jobcg_step_life life;
	int r;

	/* jobcg run's check of an existing job: it exists (the step's creation refuses a job
	 * being released or another run's ephemeral job). */
	if (jobcg_target_events(ctx, &t, NULL, NULL) < 0) {
		note_error(s, "job %u: %s", job, lib_error());
		return;
	}
	if (jobcg_step_begin(ctx, job, &req, &life) < 0) {
		note_error(s, "step begin: %s", lib_error());
		return;
	}
	so.task_env = jobcg_step_gres_task_env(life.gres);
	r = jobcg_step_run(ctx, job, life.step, 1, true_argv, &so, &res);
	if (r < 0 || res.exit_code != 0)
		note_error(s, "step run: %s", lib_error());
	if (jobcg_step_end(ctx, &life, r < 0 ? NULL : &res, 0, &end) < 0)
		note_error(s, "step end: %s", lib_error());
	else if (r >= 0 && !end.recorded)
		note_error(s, "step %u.%s: no accounting record: %s", job, life.step, lib_error());
	free(res.task_status);
}

static bool run_once(struct subject *s, int idx)
{
	static char *true_argv[] = {(char *)TRUE_BIN, NULL};
	struct jobcg_run_result res = {};
	char step[JOBCG_STEP_ID_MAX];
	uint32_t job = 0;
	bool ok;

	switch (s->kind) {
	case K_FLOOR:
		if (!fork_exec_wait(true_argv, false))
			note_error(s, "%s failed", TRUE_BIN);
		return true;
	case K_CMD: {
		/* Commands separated by ";;" run one after the other, each must succeed. */
		for (int i = 0; s->argv[i];) {
			char *argv[MAX_ARGS], buf[MAX_ARGS][256];
			int k = 0;

			for (; s->argv[i] && strcmp(s->argv[i], ";;") != 0; i++, k++) {
				const char *a = s->argv[i], *m = strstr(a, "{i}");

				argv[k] = s->argv[i];
				if (m) {
					snprintf(buf[k], sizeof(buf[k]), "%.*s%d%s", (int)(m - a),
						 a, idx, m + 3);
					argv[k] = buf[k];
				}
			}
			argv[k] = NULL;
			if (s->argv[i])
				i++;
			if (!fork_exec_wait(argv, true)) {
				note_error(s, "%s %s exited non-zero", argv[0],
					   argv[1] ? argv[1] : "");
				break;
			}
		}
		return true;
	}
	case K_LIB:
		job = job_of(s, idx);
		if (jobcg_step_create(ctx, job, NULL, 0, step) < 0) {
			note_error(s, "step create: %s", lib_error());
			return true;
		}
		ok = jobcg_step_run(ctx, job, step, 1, true_argv, NULL, &res) == 0 &&
		     res.exit_code == 0;
		free(res.task_status);
		if (!ok)
			note_error(s, "step run: %s", lib_error());
		if (jobcg_step_remove(ctx, job, step, 0) < 0)
			note_error(s, "step remove: %s", lib_error());
		return true;
	case K_AGENT:
		agent_step(s, job_of(s, idx));
		return true;
	case K_SPAWN: {
		pid_t pid;
		int st;

		if (jobcg_task_spawn(ctx, job_of(s, idx), spawn_step, 0, true_argv, NULL, &pid) <
		    0) {
			note_error(s, "spawn: %s", lib_error());
			return true;
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			note_error(s, "%s", "task exited non-zero");
		return true;
	}
	case K_CYCLE:
		if (jobcg_job_create(ctx, JOBCG_JOB_ID_AUTO, NULL, 0, &job) < 0) {
			note_error(s, "job create: %s", lib_error());
			return true;
		}
		if (job_grant(job, true) < 0)
			note_error(s, "grant: %s", lib_error());
		else if (jobcg_step_create(ctx, job, NULL, 0, step) < 0)
			note_error(s, "step create: %s", lib_error());
		else {
			ok = jobcg_step_run(ctx, job, step, 1, true_argv, NULL, &res) == 0 &&
			     res.exit_code == 0;
			free(res.task_status);
			if (!ok)
				note_error(s, "step run: %s", lib_error());
			if (jobcg_step_remove(ctx, job, step, 0) < 0)
				note_error(s, "step remove: %s", lib_error());
		}
		if (job_grant(job, false) < 0)
			note_error(s, "revoke: %s", lib_error());
		if (jobcg_job_remove(ctx, job, 0) < 0)
			note_error(s, "job remove: %s", lib_error());
		return true;
	case K_CGFLOOR:
		if (!cgfloor_once(s->dir, idx))
			note_error(s, "cgroup chain in %s failed", s->dir);
		return true;
	}
	return false;
}

static int parse_subject(const char *spec, struct subject *s)
{
	char *copy = strdup(spec), *rest = strchr(copy, ':');

	memset(s, 0, sizeof(*s));
	if (rest)
		*rest++ = 0;
	if (strcmp(copy, "floor") == 0) {
		s->kind = K_FLOOR;
		snprintf(s->name, sizeof(s->name), "floor");
		return 0;
	}
	if (!rest)
		goto bad;
	if (strcmp(copy, "cmd") == 0) {
		char *name = rest, *args = strchr(rest, ':'), *save = NULL;
		int n = 0;

		if (!args)
			goto bad;
		*args++ = 0;
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->kind = K_CMD;
		for (char *a = strtok_r(args, " ", &save); a; a = strtok_r(NULL, " ", &save)) {
			if (n == MAX_ARGS - 1)
				goto bad;
			s->argv[n++] = a;
		}
		if (n == 0)
			goto bad;
		return 0;
	}
	if (strcmp(copy, "lib") == 0 || strcmp(copy, "agent") == 0 || strcmp(copy, "spawn") == 0) {
		char *end;

		s->kind = copy[0] == 'l' ? K_LIB : copy[0] == 'a' ? K_AGENT : K_SPAWN;
		s->job = (uint32_t)strtoul(rest, &end, 10);
		s->job_plus = *end == '+';
		snprintf(s->name, sizeof(s->name), "%s", copy);
		return s->job ? 0 : -1;
	}
	if (strcmp(copy, "cycle") == 0) {
		s->kind = K_CYCLE;
		snprintf(s->name, sizeof(s->name), "%s", rest);
		return 0;
	}
	if (strcmp(copy, "cgfloor") == 0) {
		s->kind = K_CGFLOOR;
		s->dir = rest;
		snprintf(s->name, sizeof(s->name), "cgfloor");
		return 0;
	}
bad:
	fprintf(stderr, "launch: bad subject '%s'\n", spec);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static void print_result(struct subject *s, int par)
{
	double sum = 0;

	qsort(s->ns, s->n, sizeof(double), cmp_double);
	for (size_t i = 0; i < s->n; i++)
		sum += s->ns[i];
	printf("{\"name\":\"%s\",\"launchers\":%d,\"n\":%zu,\"errors\":%zu", s->name, par, s->n,
	       s->errors);
	if (s->n)
		printf(",\"p50_us\":%.2f,\"p99_us\":%.2f,\"mean_us\":%.2f,\"min_us\":%.2f",
		       pct(s->ns, s->n, 0.5) / 1e3, pct(s->ns, s->n, 0.99) / 1e3,
		       sum / (double)s->n / 1e3, s->ns[0] / 1e3);
	if (s->cpu_ns > 0 && s->n)
		printf(",\"cpu_us\":%.2f", s->cpu_ns / (double)s->n / 1e3);
	if (s->wall_ns > 0)
		printf(",\"wall_s\":%.4f,\"per_s\":%.1f", s->wall_ns / 1e9,
		       (double)s->n / (s->wall_ns / 1e9));
	if (s->first_error[0]) {
		printf(",\"first_error\":\"");
		for (const char *c = s->first_error; *c; c++)
			if (*c == '"' || *c == '\\')
				printf("\\%c", *c);
			else
				putchar(*c < 32 ? ' ' : *c);
		printf("\"");
	}
	printf("}\n");
	fflush(stdout);
}

static bool needs_lib(const struct subject *s)
{
	return s->kind == K_LIB || s->kind == K_AGENT || s->kind == K_SPAWN || s->kind == K_CYCLE;
}

static double cpu_now_ns(void)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	getrusage(RUSAGE_CHILDREN, &b);
	return ((double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec +
			 b.ru_stime.tv_sec) *
		    1e9 +
		(double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
			 b.ru_stime.tv_usec) *
		    1e3);
}

/*
 * Serial: blocks of @block iterations per subject in turn, until each has @n samples. CPU time
 * (ours and the children's) is summed per block too: on a loaded machine wall time mostly
 * measures waiting for a CPU, CPU time measures the work.
 */
static int run_serial(struct subject *subj, int ns, long n, long warm, long block)
{
	for (int k = 0; k < ns; k++) {
		subj[k].ns = calloc((size_t)n, sizeof(double));
		if (!subj[k].ns)
			return -1;
		for (long i = 0; i < warm; i++)
			run_once(&subj[k], 0);
		subj[k].errors = 0;
		subj[k].first_error[0] = 0;
	}
	for (long done = 0; done < n; done += block)
		for (int k = 0; k < ns; k++) {
			double c0 = cpu_now_ns();

			for (long i = done; i < done + block && i < n; i++) {
				uint64_t t0 = now_ns();
				run_once(&subj[k], 0);
				subj[k].ns[subj[k].n++] = (double)(now_ns() - t0);
			}
			subj[k].cpu_ns += cpu_now_ns() - c0;
		}
	return 0;
}

/*
 * Throughput: @par launcher processes, each running @n/@par iterations back to back; the
 * subject's wall time is from the start signal to the last launcher's end. Subjects take turns
 * in @rounds rounds so load from outside is shared.
 */
static int run_parallel(struct subject *subj, int ns, long n, int par, int rounds)
{
	long per = n / par / rounds;

	if (per < 1)
		per = 1;
	for (int k = 0; k < ns; k++)
		subj[k].ns = calloc((size_t)(per * par * rounds), sizeof(double));
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < ns; k++) {
			struct subject *s = &subj[k];
			int go[2], back[2];
			pid_t kids[MAX_PAR];
			uint64_t t0;

			if (pipe2(go, O_CLOEXEC) < 0 || pipe2(back, O_CLOEXEC) < 0)
				return -1;
			for (int w = 0; w < par; w++) {
				kids[w] = fork();
				if (kids[w] < 0)
					return -1;
				if (kids[w] == 0) {
					char c;
					struct {
						double ns;
						uint32_t err;
					} rec;

					close(go[1]);
					close(back[0]);
					if (read(go[0], &c, 1) < 0)
						_exit(1);
					for (long i = 0; i < per; i++) {
						size_t e0 = s->errors;
						uint64_t a = now_ns();

						run_once(s, w);
						rec.ns = (double)(now_ns() - a);
						rec.err = (uint32_t)(s->errors - e0);
						if (write(back[1], &rec, sizeof(rec)) !=
						    sizeof(rec))
							_exit(1);
					}
					if (s->errors && s->first_error[0])
						fprintf(stderr, "launch: %s: %s\n", s->name,
							s->first_error);
					_exit(0);
				}
			}
			close(go[0]);
			close(back[1]);
			t0 = now_ns();
			close(go[1]); /* EOF starts every launcher at once */
			for (;;) {
				struct {
					double ns;
					uint32_t err;
				} rec;
				ssize_t got = read(back[0], &rec, sizeof(rec));

				if (got != sizeof(rec))
					break;
				s->ns[s->n++] = rec.ns;
				s->errors += rec.err;
			}
			for (int w = 0; w < par; w++) {
				int st;
				while (waitpid(kids[w], &st, 0) < 0 && errno == EINTR)
					;
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					s->errors++;
			}
			s->wall_ns += (double)(now_ns() - t0);
			close(back[0]);
			if (s->n < (size_t)(per * par * (r + 1)))
				s->errors += (size_t)(per * par * (r + 1)) - s->n;
		}
	return 0;
}

/* populate FIRST COUNT [--devices N --mode node|linear]: live jobs FIRST..FIRST+COUNT-1. */
static int populate(uint32_t first, uint32_t count, bool create)
{
	for (uint32_t i = 0; i < count; i++) {
		int r = create ? jobcg_job_create(ctx, first + i, NULL, 0, NULL)
			       : jobcg_job_remove(ctx, first + i, 0);

		if (r < 0 && !(!create && r == -ENOENT)) {
			fprintf(stderr, "launch: job %u: %s\n", first + i, lib_error());
			return 1;
		}
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: launch [-n N] [-w WARMUP] [-b BLOCK] [-P LAUNCHERS] [-r ROUNDS] [-e ERRLOG]\n"
	    "              [-D DEVICES:node|linear [-G JOB] [-A FIRST:COUNT]] SUBJECT...\n"
	    "       launch populate FIRST COUNT | depopulate FIRST COUNT\n"
	    "SUBJECT: floor | cmd:NAME:[VAR=VALUE...] ARGV (space separated, {i} = launcher "
	    "index)\n"
	    "         | lib:JOB[+] | agent:JOB[+] | spawn:JOB[+] | cycle:NAME | cgfloor:DIR\n"
	    "Library subjects use the configuration from the environment (JOBCG_*).\n");
}

int main(int argc, char **argv)
{
	struct subject subj[MAX_SUBJECTS];
	long n = 1000, warm = -1, block = 10;
	int par = 0, rounds = 3, ns = 0, c, rc = 0;
	bool spawn_made = false;

	out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (argc >= 4 && (strcmp(argv[1], "populate") == 0 || strcmp(argv[1], "depopulate") == 0)) {
		if (lib_open() < 0)
			return 1;
		rc = populate((uint32_t)strtoul(argv[2], NULL, 10),
			      (uint32_t)strtoul(argv[3], NULL, 10), argv[1][0] == 'p');
		jobcg_ctx_free(ctx);
		jobcg_config_free(conf);
		return rc;
	}
	while ((c = getopt(argc, argv, "+n:w:b:P:r:e:D:G:A:h")) >= 0) {
		switch (c) {
		case 'n':
			n = strtol(optarg, NULL, 10);
			break;
		case 'w':
			warm = strtol(optarg, NULL, 10);
			break;
		case 'b':
			block = strtol(optarg, NULL, 10);
			break;
		case 'P':
			par = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'e':
			err_fd = open(optarg, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (err_fd < 0) {
				fprintf(stderr, "launch: %s: %s\n", optarg, strerror(errno));
				return 1;
			}
			break;
		case 'A':
			if (sscanf(optarg, "%u:%u", &grant_first, &grant_count) != 2) {
				fprintf(stderr, "launch: -A FIRST:COUNT\n");
				return 2;
			}
			break;
		case 'G':
			grant_job = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'D':
			if (sscanf(optarg, "%zu:%15s", &dev_n, dev_mode) != 2 || dev_n < 2 ||
			    dev_n > 4096) {
				fprintf(stderr, "launch: -D N:node|linear, N 2..4096\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (n < 1 || n > 10000000 || block < 1 || par < 0 || par > MAX_PAR || rounds < 1 ||
	    optind >= argc || argc - optind > MAX_SUBJECTS) {
		usage(stderr);
		return 2;
	}
	if (warm < 0)
		warm = n / 20 + 1;
	if (dev_n) {
		int r = lib_open() < 0 || policy_open() < 0 || job_grant(grant_job, true) < 0;

		for (uint32_t i = 0; !r && i < grant_count; i++)
			r = job_grant(grant_first + i, true) < 0;
		if (r) {
			fprintf(stderr, "launch: device policy: %s\n", lib_error());
			if (policy)
				(void)jobcg_devpolicy_destroy(policy);
			return 1;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (parse_subject(argv[i], &subj[ns]) < 0)
			return 2;
		if (needs_lib(&subj[ns]) && lib_open() < 0)
			return 1;
		if (subj[ns].kind == K_SPAWN && !spawn_made) {
			/* One step for every spawn: the task directory is made once and reused,
			 * so only the spawn itself is timed. */
			if (jobcg_step_create(ctx, subj[ns].job, NULL, 0, spawn_step) < 0) {
				fprintf(stderr, "launch: step for spawn: %s\n", lib_error());
				return 1;
			}
			spawn_made = true;
		}
		ns++;
	}
	signal(SIGPIPE, SIG_IGN);
	if (par > 0)
		rc = run_parallel(subj, ns, n, par, rounds);
	else
		rc = run_serial(subj, ns, n, warm, block);
	if (rc < 0)
		fprintf(stderr, "launch: %s\n", strerror(errno));
	for (int k = 0; k < ns; k++)
		print_result(&subj[k], par ? par : 1);
	if (spawn_made) {
		for (int k = 0; k < ns; k++)
			if (subj[k].kind == K_SPAWN) {
				(void)jobcg_step_remove(ctx, subj[k].job, spawn_step, 0);
				break;
			}
	}
	if (policy) {
		(void)job_grant(grant_job, false);
		for (uint32_t i = 0; i < grant_count; i++)
			(void)job_grant(grant_first + i, false);
		if (jobcg_devpolicy_destroy(policy) < 0)
			fprintf(stderr, "launch: removing the device policy: %s\n", lib_error());
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return rc < 0 ? 1 : 0;
}
