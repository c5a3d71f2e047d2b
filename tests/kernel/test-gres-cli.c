/* Kernel test: GPUs end to end through the built CLI with mknod'ed stand-in GPUs (c 195:0-3):
 * isolation between jobs, step subsets, 50 racing allocations, SIGKILL at random points + gc. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>

#include "gresxattr.h"
#include "devices.h"
#include "jobcg/gres.h"
#include "ktest.h"
#include "tap.h"

static char jobcg[4096], tmp[4096], conf_dir[4096], tree[4096], pin_dir[4096];
static char self_exe[4096];

/* The probe run inside a step: prints "<path> <result>" for each path, result OK or an errno name.
 */
static int probe(int argc, char **argv)
{
	const char *task = getenv("JOBCG_TASK_ID") ? getenv("JOBCG_TASK_ID") : "?";
	char buf[8192];
	size_t len = 0;

	/* One write per task, so that lines of parallel tasks do not interleave. */
	len +=
	    (size_t)snprintf(buf + len, sizeof(buf) - len, "CUDA=%s\nJOB_GPUS=%s\n",
			     getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "-",
			     getenv("JOBCG_JOB_GPUS") ? getenv("JOBCG_JOB_GPUS") : "-");
	len +=
	    (size_t)snprintf(buf + len, sizeof(buf) - len, "T%s STEP_GPUS=%s CUDA=%s\n", task,
			     getenv("JOBCG_STEP_GPUS") ? getenv("JOBCG_STEP_GPUS") : "-",
			     getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "-");
	for (int i = 2; i < argc && len < sizeof(buf) - 256; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		const char *res = fd >= 0	    ? "OK"
				  : errno == EPERM  ? "EPERM"
				  : errno == ENXIO  ? "ENXIO"
				  : errno == ENODEV ? "ENODEV"
						    : "OTHER";

		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s %s\nT%s %s %s\n", argv[i],
					res, task, argv[i], res);
		if (fd >= 0)
			close(fd);
	}
	if (write(1, buf, len) < 0)
		return 1;
	return 0;
}

/* Run the CLI with @args, capture stdout+stderr into @out. Returns the exit status (or -1). */
static int run_cli(char *out, size_t outsz, const char *const *args)
{
	int pfd[2], st;
	pid_t pid;
	size_t len = 0;
	ssize_t k;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		const char *argv[64] = {jobcg};
		size_t n = 1;

		for (; args[n - 1] && n < 63; n++)
			argv[n] = args[n - 1];
		argv[n] = NULL;
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execv(jobcg, (char **)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (out && len + 1 < outsz && (k = read(pfd[0], out + len, outsz - len - 1)) > 0)
		len += (size_t)k;
	if (out)
		out[len] = 0;
	close(pfd[0]);
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define CLI(out, ...) run_cli(out, sizeof(out), (const char *const[]){__VA_ARGS__, NULL})

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f) {
		tap_diag("cannot write %s", path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static void check_consistent(const char *when);

static int count_str(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

static int job_gres(const char *job_dir, char *buf, size_t size)
{
	ssize_t l = getxattr(job_dir, JOBCG_GRES_XATTR, buf, size - 1);

	if (l < 0)
		return -errno;
	buf[l] = 0;
	return 0;
}

/* Job ids present in the tree (complete or not). */
static int tree_jobs(unsigned *ids, int max)
{
	DIR *d = opendir(tree);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, "job_", 4) == 0 && n < max)
			ids[n++] = (unsigned)strtoul(de->d_name + 4, NULL, 10);
	if (d)
		closedir(d);
	return n;
}

static void test_isolation(void)
{
	char out[8192], g1[64] = "", g2[64] = "", dev_other[4096], dev_own[4096];
	char path[4096];
	int r;

	/* Bad requests are usage errors naming the problem, and make nothing. */
	r = CLI(out, "alloc", "41", "--gres", "");
	ok(r == 2 && strstr(out, "jobcg alloc: --gres '': empty request"),
	   "--gres '' is refused, naming the argument");
	tap_diag("%s", out);
	/* One prefix, the argument named once. */
	r = CLI(out, "alloc", "41", "--gres", "gpu:");
	ok(r == 2 && strstr(out, "jobcg alloc: --gres 'gpu:': bad or empty type") &&
	       !strstr(out, "--gres: ") && count_str(out, "'gpu:'") == 1,
	   "--gres gpu: names the argument once");
	tap_diag("%s", out);
	r = CLI(out, "alloc", "41", "--gres", "gpu:1,nic:x:y:z");
	ok(r == 2 && strstr(out, "--gres 'gpu:1,nic:x:y:z': item 'nic:x:y:z': too many ':'"),
	   "an item of several is named after the request");
	tap_diag("%s", out);
	/* jobcg's message alone, not getopt's before it. */
	r = CLI(out, "alloc", "-5");
	ok(r == 2 && strstr(out, "jobcg alloc: a negative number is not an id") &&
	       !strstr(out, "invalid option"),
	   "alloc -5: one message, jobcg's");
	tap_diag("%s", out);
	r = CLI(out, "alloc", "--bogus", "41");
	ok(r == 2 && strstr(out, "jobcg alloc: unknown option '--bogus'") &&
	       !strstr(out, "unrecognized"),
	   "an unknown option is named, once");
	tap_diag("%s", out);
	r = CLI(out, "alloc", "41", "--gres", "gpu:-1");
	ok(r == 2 && strstr(out, "invalid count '-1'") && !strstr(out, "none configured"),
	   "--gres gpu:-1 says the count is invalid");
	tap_diag("%s", out);
	snprintf(path, sizeof(path), "%s/job_41", tree);
	ok(access(path, F_OK) < 0, "and no job 41 was made");
	r = CLI(out, "alloc", "1", "--gres", "gpu:1");
	ok(r == 0, "alloc job 1 with one GPU");
	if (r)
		tap_diag("%s", out);
	r = CLI(out, "alloc", "2", "--gres", "gpu:1", "--uid", "1234", "--gid", "5678");
	ok(r == 0, "alloc job 2 with one GPU");
	if (r)
		tap_diag("%s", out);
	snprintf(path, sizeof(path), "%s/job_1", tree);
	job_gres(path, g1, sizeof(g1));
	snprintf(path, sizeof(path), "%s/job_2", tree);
	job_gres(path, g2, sizeof(g2));
	ok(*g1 && *g2 && strcmp(g1, g2) != 0, "different GPUs (%s, %s)", g1, g2);
	r = CLI(out, "alloc", "1", "--gres", "gpu:1");
	ok(r != 0, "alloc of an existing job fails");

	for (int j = 1; j <= 2; j++) {
		const char *own = j == 1 ? g1 : g2, *other = j == 1 ? g2 : g1;
		char jid[8], want[64];

		snprintf(jid, sizeof(jid), "%d", j);
		snprintf(dev_own, sizeof(dev_own), "%s/nvidia%s", tmp, own + 4);
		snprintf(dev_other, sizeof(dev_other), "%s/nvidia%s", tmp, other + 4);
		r = CLI(out, "run", "--job", jid, "--", self_exe, "probe", dev_own, dev_other);
		ok(r == 0, "job %d: step runs", j);
		ok(strstr(out, "CUDA=0\n") != NULL, "job %d: CUDA_VISIBLE_DEVICES=0", j);
		snprintf(want, sizeof(want), "JOB_GPUS=%s\n", own + 4);
		ok(strstr(out, want) != NULL, "job %d: JOBCG_JOB_GPUS has the node-wide index", j);
		snprintf(want, sizeof(want), "%s EPERM", dev_other);
		ok(strstr(out, want) != NULL, "job %d: EPERM on the other job's GPU", j);
		/* No driver behind the stand-in: past the device check, open() says ENXIO. */
		snprintf(want, sizeof(want), "%s ENXIO", dev_own);
		ok(strstr(out, want) != NULL, "job %d: own GPU passes the device check (ENXIO)", j);
		if (!strstr(out, "EPERM"))
			tap_diag("%s", out);
	}

	r = CLI(out, "run", "--job", "1", "--gres", "gpu:2", "--", "true");
	ok(r != 0, "a step asking 2 GPUs of a 1-GPU job is refused");
	ok(strstr(out, "job has 1") != NULL, "  and says why");
	tap_diag("%s", out);
	ok(CLI(out, "run", "--job", "1", "--gres", "gpu:1", "--", "true") == 0,
	   "a step asking what its job has runs");
	r = CLI(out, "list", "--json");
	ok(r == 0 && strstr(out, g1) != NULL, "jobcg list shows the GPUs");
	{
		char want[96];

		snprintf(want, sizeof(want), "gres: %s\n", g1);
		r = CLI(out, "show", "1");
		ok(r == 0 && strstr(out, want) != NULL, "jobcg show shows the job's GPUs");
	}

	ok(CLI(out, "release", "1") == 0, "release job 1");
	ok(CLI(out, "release", "2") == 0, "release job 2");
	snprintf(path, sizeof(path), "%s/job_1", tree);
	ok(access(path, F_OK) < 0, "job 1's cgroup is gone");
	r = CLI(out, "acct", "--job", "1", "--json");
	ok(r == 0 && strstr(out, "\"type\":\"job\"") && strstr(out, "\"type\":\"step\""),
	   "accounting has the job and its steps");
	ok(strstr(out, "\"state\":\"COMPLETED\"") && strstr(out, "\"gres\":\"gpu:"),
	   "  COMPLETED, with the GPUs");
	{
		int jobs = 0, steps = 0;

		for (char *p = out; (p = strstr(p, "\"type\":\"job\"")); p++)
			jobs++;
		for (char *p = out; (p = strstr(p, "\"type\":\"step\"")); p++)
			steps++;
		is_int(jobs, 1, "  one job record");
		is_int(steps, 2,
		       "  one record per step that ran (2; the refused one never started)");
	}
	r = CLI(out, "acct", "--job", "2", "--json");
	ok(r == 0 && strstr(out, "\"uid\":1234") && strstr(out, "\"gid\":5678") &&
	       !strstr(out, "\"uid\":0"),
	   "job 2's records carry its owner from --uid/--gid");
}

/* Two tasks bound to one GPU each (--gpu-bind single:1): each task cgroup sees only its own. */
static void test_bind(void)
{
	char out[16384], want[4096], d0[4096], d1[4096], d2[4096];
	int r;

	r = CLI(out, "alloc", "3", "--gres", "gpu:2");
	ok(r == 0, "alloc job 3 with two GPUs");
	snprintf(d0, sizeof(d0), "%s/nvidia0", tmp);
	snprintf(d1, sizeof(d1), "%s/nvidia1", tmp);
	snprintf(d2, sizeof(d2), "%s/nvidia2", tmp);
	r = CLI(out, "run", "--job", "3", "--ntasks", "2", "--gpu-bind", "single:1", "--", self_exe,
		"probe", d0, d1, d2);
	ok(r == 0, "two tasks bound one GPU each");
	ok(strstr(out, "T0 STEP_GPUS=0,1 CUDA=0\n") && strstr(out, "T1 STEP_GPUS=0,1 CUDA=0\n"),
	   "each task: CUDA_VISIBLE_DEVICES=0 (renumbered within its own cgroup)");
	snprintf(want, sizeof(want), "T0 %s ENXIO", d0);
	ok(strstr(out, want) != NULL, "task 0 opens GPU 0");
	snprintf(want, sizeof(want), "T0 %s EPERM", d1);
	ok(strstr(out, want) != NULL, "task 0 is denied GPU 1 (its sibling's)");
	snprintf(want, sizeof(want), "T1 %s ENXIO", d1);
	ok(strstr(out, want) != NULL, "task 1 opens GPU 1");
	snprintf(want, sizeof(want), "T1 %s EPERM", d0);
	ok(strstr(out, want) != NULL, "task 1 is denied GPU 0");
	snprintf(want, sizeof(want), "T1 %s EPERM", d2);
	ok(strstr(out, want) != NULL, "GPU 2 (not the job's) is denied");
	if (!strstr(out, "T1"))
		tap_diag("%s", out);

	/* A step asking one GPU of two gets the first one, numbered 0 inside. */
	r = CLI(out, "run", "--job", "3", "--gres", "gpu:1", "--", self_exe, "probe");
	ok(r == 0 && strstr(out, "T0 STEP_GPUS=0 CUDA=0\n"), "a one-GPU step of job 3");

	/* Two steps asking one GPU each get different ones; a third finds none free. */
	{
		pid_t bg[2];
		char s0[4096], s1[4096], g0[64] = "", g1s[64] = "";
		int waited = 0;

		snprintf(s0, sizeof(s0), "%s/job_3/step_10/user/task_0", tree);
		for (int k = 0; k < 2; k++) {
			/* Step 11 only once step 10 is there: an explicit step number below
			 * the job's count is refused (ids are never reused), so 11 first
			 * would make 10 fail. They still run at once. */
			while (k == 1 && access(s0, F_OK) < 0 && waited++ < 500)
				usleep(10000);
			bg[k] = fork();
			if (bg[k] == 0) {
				char sid[8];
				int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

				snprintf(sid, sizeof(sid), "%d", 10 + k);
				dup2(fd, 1);
				dup2(fd, 2);
				execl(jobcg, jobcg, "run", "--job", "3", "--step", sid, "--gres",
				      "gpu:1", "--", "sleep", "30", (char *)NULL);
				_exit(127);
			}
		}
		snprintf(s0, sizeof(s0), "%s/job_3/step_10/user/task_0", tree);
		snprintf(s1, sizeof(s1), "%s/job_3/step_11/user/task_0", tree);
		while ((access(s0, F_OK) < 0 || access(s1, F_OK) < 0) && waited++ < 500)
			usleep(10000);
		snprintf(s0, sizeof(s0), "%s/job_3/step_10", tree);
		snprintf(s1, sizeof(s1), "%s/job_3/step_11", tree);
		job_gres(s0, g0, sizeof(g0));
		job_gres(s1, g1s, sizeof(g1s));
		ok(*g0 && *g1s && strcmp(g0, g1s) != 0,
		   "two concurrent steps got different GPUs (%s, %s)", g0, g1s);
		r = CLI(out, "run", "--job", "3", "--gres", "gpu:1", "--", "true");
		ok(r != 0 && strstr(out, "only 0 free"), "a third step asking one finds none free");
		r = CLI(out, "run", "--job", "3", "--", "true");
		ok(r == 0, "a step not asking shares the job's GPUs and runs");
		for (int k = 0; k < 2; k++) {
			kill(bg[k], SIGTERM); /* forwarded to its step, which ends */
			waitpid(bg[k], NULL, 0);
		}
	}

	/* No --job: an ephemeral job gets the GPU, its step uses it, both go afterwards. */
	r = CLI(out, "run", "--gres", "gpu:1", "--", self_exe, "probe", d2);
	snprintf(want, sizeof(want), "T0 %s ENXIO", d2);
	ok(r == 0 && strstr(out, "T0 STEP_GPUS=2 CUDA=0\n") && strstr(out, want),
	   "run --gres without --job: an ephemeral job with the free GPU 2");
	{
		unsigned ids[16];

		is_int(tree_jobs(ids, 16), 1, "  and it is gone afterwards (only job 3 left)");
	}

	/* Failing allocations leave nothing behind. */
	r = CLI(out, "alloc", "7", "--gres", "gpu:3");
	ok(r != 0 && strstr(out, "only 2 free"), "alloc of 3 GPUs with 2 free fails, saying why");
	snprintf(want, sizeof(want), "%s/job_7", tree);
	ok(access(want, F_OK) < 0, "  and leaves no cgroup");
	r = CLI(out, "alloc", "7", "--gres", "fpga:1");
	ok(r != 0 && strstr(out, "job 7: gres: fpga: none configured") &&
	       !strstr(out, "gres: gres"),
	   "unknown gres refused, 'gres' said once");
	tap_diag("%s", out);
	r = CLI(out, "alloc", "7", "--gres", "gpu:a:x");
	ok(r != 0 && strstr(out, "not a number"), "bad request refused");
	check_consistent("after failed allocations");

	/* Released while a step runs: the step and the job are both CANCELLED. */
	{
		pid_t bg = fork();
		char tdir[4096];
		int waited = 0, cancelled = 0;

		if (bg == 0) {
			int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

			dup2(fd, 1);
			dup2(fd, 2);
			execl(jobcg, jobcg, "run", "--job", "3", "--step", "20", "--", "sleep",
			      "30", (char *)NULL);
			_exit(127);
		}
		snprintf(tdir, sizeof(tdir), "%s/job_3/step_20/user/task_0", tree);
		while (access(tdir, F_OK) < 0 && waited++ < 500)
			usleep(10000);
		ok(CLI(out, "release", "3", "--grace", "2000") == 0,
		   "release job 3 while a step runs");
		waitpid(bg, NULL, 0);
		CLI(out, "acct", "--job", "3", "--json");
		for (char *p = out; (p = strstr(p, "\"state\":\"CANCELLED\"")); p++)
			cancelled++;
		/* steps 10 and 11 (their runners got SIGTERM), step 20 and the job (release) */
		is_int(cancelled, 4, "  the running step and the job are recorded CANCELLED");
	}
}

static void test_race(void)
{
	enum { N = 50 };
	pid_t pids[N];
	int got = 0, failed = 0, overlaps = 0;
	unsigned seen = 0;

	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			char id[16];
			int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

			snprintf(id, sizeof(id), "%d", 100 + i);
			dup2(fd, 1);
			dup2(fd, 2);
			execl(jobcg, jobcg, "alloc", id, "--gres", "gpu:1", (char *)NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < N; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st))
			failed++;
		else if (WEXITSTATUS(st) == 0)
			got++;
	}
	is_int(got, 4, "50 concurrent allocations: exactly 4 get a GPU");
	is_int(failed, 0, "no allocation crashed or hung");
	for (int i = 0; i < N; i++) {
		char path[4096], g[64];

		snprintf(path, sizeof(path), "%s/job_%d", tree, 100 + i);
		if (job_gres(path, g, sizeof(g)) == 0 && strncmp(g, "gpu:", 4) == 0) {
			unsigned bit = 1u << atoi(g + 4);

			if (seen & bit)
				overlaps++;
			seen |= bit;
		}
	}
	is_int(overlaps, 0, "no GPU given to two jobs");
	is_int(seen, 0xf, "all four GPUs given out");
	for (int i = 0; i < N; i++) {
		char id[16], out[4096];
		char path[4096];

		snprintf(path, sizeof(path), "%s/job_%d", tree, 100 + i);
		if (access(path, F_OK) < 0)
			continue;
		snprintf(id, sizeof(id), "%d", 100 + i);
		if (CLI(out, "release", id) != 0)
			tap_diag("release %s: %s", id, out);
	}
}

/* After gc: the jobs `jobcg list` shows == the job dirs of the tree == the jobs in the policy map.
 */
static void check_consistent(const char *when)
{
	char out[65536];
	unsigned ids[256];
	int n = tree_jobs(ids, 256), listed = 0, mismatch = 0, map_jobs = 0, stale = 0;
	struct jobcg_config *conf = NULL;
	struct jobcg_devpolicy *p = NULL;
	struct jobcg_devgrant *g = NULL;
	size_t ng = 0;

	if (CLI(out, "list", "--json") != 0) {
		ok(false, "%s: jobcg list works", when);
		return;
	}
	for (char *s = out; (s = strstr(s, "\"job\":")); s += 6)
		listed++;
	for (int i = 0; i < n; i++) {
		char key[32];

		snprintf(key, sizeof(key), "\"job\":%u", ids[i]);
		if (!strstr(out, key))
			mismatch++;
	}
	is_int(listed, n, when);
	is_int(mismatch, 0, "  every job dir is listed");

	if (jobcg_config_load(conf_dir, NULL, 0, &conf) == 0 &&
	    jobcg_devpolicy_open_pinned(conf, tree, &p) == 0 &&
	    jobcg_devpolicy_list(p, &g, &ng) == 0) {
		for (size_t i = 0; i < ng; i++) {
			if (!g[i].path)
				stale++;
			else if (g[i].level == 1)
				map_jobs++;
		}
		is_int(stale, 0, "  no policy entry for a cgroup that is gone");
		is_int(map_jobs, n, "  every job has its grant in the policy map, no more");
	} else {
		ok(false, "  read the policy map");
	}
	jobcg_devgrants_free(g, ng);
	jobcg_devpolicy_free(p);
	jobcg_config_free(conf);
}

/*
 * A step that asks what its GPUs cannot give (--gpu-bind map_gpu:5 of one GPU) is a usage
 * error found once the job is there: the job made for the run goes again without a record, as
 * if the command line had been refused at once (it was recorded COMPLETED 0:0).
 */
static void test_refused_step(void)
{
	char out[65536];
	int before = 0, after = 0, r;

	r = CLI(out, "acct", "--json");
	for (char *s = out; r == 0 && (s = strstr(s, "\"job\":")); s += 6)
		before++;
	r = CLI(out, "run", "--job", "91", "--gres", "gpu:1", "--gpu-bind", "map_gpu:5", "--",
		"true");
	ok(r == 2 && strstr(out, "map_gpu"),
	   "run --job 91 --gpu-bind map_gpu:5 of one GPU: usage error");
	r = CLI(out, "run", "--gres", "gpu:1", "--gpu-bind", "map_gpu:5", "--", "true");
	ok(r == 2 && strstr(out, "map_gpu"), "the same in a throwaway job: usage error");
	ok(CLI(out, "show", "91") == 1, "  job 91 is not there");
	r = CLI(out, "acct", "--json");
	for (char *s = out; r == 0 && (s = strstr(s, "\"job\":")); s += 6)
		after++;
	is_int(after, before, "  and neither run left an accounting record");
	check_consistent("after two refused steps: jobs listed");
}

/* A runner killed once its step is granted: gc must remove the step and its policy entries. */
static void test_kill_granted_step(void)
{
	char out[8192], step_dir[4096];
	pid_t pid;
	int waited = 0;

	ok(CLI(out, "alloc", "300", "--gres", "gpu:1") == 0, "alloc job 300");
	snprintf(step_dir, sizeof(step_dir), "%s/job_300/step_0/user/task_0", tree);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(jobcg, jobcg, "run", "--job", "300", "--gres", "gpu:1", "--", "sleep", "30",
		      (char *)NULL);
		_exit(127);
	}
	/* Bounded wait for the task cgroup to appear (the step is granted before it). */
	while (access(step_dir, F_OK) < 0 && waited++ < 500)
		usleep(10000);
	ok(access(step_dir, F_OK) == 0, "the step started");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	check_consistent("runner killed, before gc: the step's grant is still there");
	ok(CLI(out, "gc") == 0, "gc");
	snprintf(step_dir, sizeof(step_dir), "%s/job_300/step_0", tree);
	ok(access(step_dir, F_OK) < 0, "gc removed the step of the dead runner");
	check_consistent("after gc");
	ok(CLI(out, "release", "300") == 0, "release job 300");
}

/* A release killed after revoking the grant but before rmdir: gc finishes it. */
static void test_half_released(void)
{
	char out[8192], dir[4096];
	struct jobcg_config *conf = NULL;
	struct jobcg_devpolicy *p = NULL;
	int revoked = -1;

	ok(CLI(out, "alloc", "401", "--gres", "gpu:1") == 0, "alloc job 401");
	snprintf(dir, sizeof(dir), "%s/job_401", tree);
	ok(setxattr(dir, "trusted.jobcg.removing", "1", 1, 0) == 0, "mark it as being removed");
	if (jobcg_config_load(conf_dir, NULL, 0, &conf) == 0 &&
	    jobcg_devpolicy_open_pinned(conf, tree, &p) == 0)
		revoked = jobcg_devpolicy_revoke(p, dir);
	jobcg_devpolicy_free(p);
	jobcg_config_free(conf);
	is_int(revoked, 0, "its grant revoked, as release does before rmdir");
	ok(CLI(out, "gc") == 0, "gc");
	ok(access(dir, F_OK) < 0, "gc finished the removal");
	check_consistent("after a half-done release and gc");
	ok(CLI(out, "alloc", "402", "--gres", "gpu:4") == 0, "all four GPUs free again");
	ok(CLI(out, "release", "402") == 0, "release 402");
}

static void test_kill_gc(void)
{
	char out[8192];
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	tap_diag("SIGKILL seed %u", seed);
	srand(seed);
	for (int i = 0; i < 30; i++) {
		char id[16];
		pid_t pid;
		int which = rand() % 3;

		snprintf(id, sizeof(id), "%d", 200 + i % 6);
		pid = fork();
		if (pid == 0) {
			int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

			dup2(fd, 1);
			dup2(fd, 2);
			if (which == 0)
				execl(jobcg, jobcg, "alloc", id, "--gres", "gpu:1", (char *)NULL);
			else if (which == 1)
				execl(jobcg, jobcg, "run", "--job", id, "--gres", "gpu:1", "--",
				      "sleep", "5", (char *)NULL);
			else
				execl(jobcg, jobcg, "release", id, (char *)NULL);
			_exit(127);
		}
		usleep((useconds_t)(rand() % 150000));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	{
		unsigned ids[256];

		tap_diag("before gc: %d job dirs", tree_jobs(ids, 256));
	}
	ok(CLI(out, "gc") == 0, "jobcg gc after 30 SIGKILLs");
	check_consistent("after SIGKILLs and gc: list == tree");
	for (int i = 0; i < 6; i++) {
		char id[16];

		snprintf(id, sizeof(id), "%d", 200 + i);
		CLI(out, "release", id);
	}
	check_consistent("after releasing everything");
}

int main(int argc, char **argv)
{
	const char *root, *mount, *build = getenv("JOBCG_BUILD_ROOT");
	char path[4096], text[4096];

	if (argc > 1 && strcmp(argv[1], "probe") == 0)
		return probe(argc, argv);
	root = ktest_setup("gres-cli");
	mount = ktest_cgroup_mount();
	if (!build)
		tap_plan_skip_all("JOBCG_BUILD_ROOT not set");
	if (readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1) < 0)
		tap_plan_skip_all("no /proc/self/exe");
	snprintf(jobcg, sizeof(jobcg), "%s/cli/jobcg", build);
	snprintf(tmp, sizeof(tmp), "%s", ktest_tmpdir());
	snprintf(tree, sizeof(tree), "%s/jobcg", root);
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/jobcg-test-gres-%d", (int)getpid());
	snprintf(conf_dir, sizeof(conf_dir), "%s/conf", tmp);
	mkdir(conf_dir, 0755);

	text[0] = 0;
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/nvidia%d", tmp, i);
		if (mknod(path, S_IFCHR | 0666, makedev(195, i)) < 0)
			tap_plan_skip_all("cannot mknod stand-in GPUs");
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 "Name=gpu Type=test File=%s\n", path);
	}
	snprintf(path, sizeof(path), "%s/gres.conf", conf_dir);
	write_file(path, text);
	snprintf(path, sizeof(path), "%s/cgroup.conf", conf_dir);
	write_file(path, "ConstrainDevices=yes\nIgnoreSystemd=yes\n");

	setenv("JOBCG_CONF_DIR", conf_dir, 1);
	setenv("JOBCG_ROOT", tree + strlen(mount) + 1, 1);
	snprintf(path, sizeof(path), "%s/state", tmp);
	setenv("JOBCG_STATE_DIR", path, 1);
	setenv("JOBCG_BPF_PIN_DIR", pin_dir, 1);
	setenv("ASAN_OPTIONS", "detect_leaks=0", 0);

	test_isolation();
	test_bind();
	test_race();
	test_kill_granted_step();
	test_half_released();
	test_kill_gc();
	test_refused_step();

	/* The same isolation with one compare-and-exit program per cgroup (Slurm's shape). */
	snprintf(path, sizeof(path), "%s/cgroup.conf", conf_dir);
	write_file(path, "ConstrainDevices=yes\nIgnoreSystemd=yes\nDeviceProgram=linear\n");
	snprintf(tree, sizeof(tree), "%s/jobcg-linear", root);
	setenv("JOBCG_ROOT", tree + strlen(mount) + 1, 1);
	snprintf(path, sizeof(path), "%s/state-linear", tmp);
	setenv("JOBCG_STATE_DIR", path, 1); /* a fresh accounting log: job ids repeat */
	tap_diag("DeviceProgram=linear");
	test_isolation();
	snprintf(tree, sizeof(tree), "%s/jobcg", root);
	snprintf(path, sizeof(path), "%s/cgroup.conf", conf_dir);
	write_file(path, "ConstrainDevices=yes\nIgnoreSystemd=yes\n");

	/* Our pins: detach the node program and remove them. */
	{
		struct jobcg_config *conf = NULL;
		struct jobcg_devpolicy *p = NULL;

		if (jobcg_config_load(conf_dir, NULL, 0, &conf) == 0 &&
		    jobcg_devpolicy_open_pinned(conf, tree, &p) == 0)
			jobcg_devpolicy_destroy(p);
		jobcg_config_free(conf);
		rmdir(pin_dir);
	}
	return tap_done();
}
