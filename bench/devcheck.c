/*
 * jobcg benchmark: the cost of open() on an allowed device node under no device program, the
 * node program and linear programs at 1, 64 and 4096 managed devices, as ratios to the
 * no-program baseline measured in the same run. Needs root; makes and removes its own cgroup
 * subtree and bpffs pin directory. Prints a text table, then one JSON object, to stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "config_internal.h"
#include "devices.h"

#define DEV	 "/dev/null" /* a device with a driver, so open() succeeds as it would for a GPU */
#define MAX_ITER 10000000L

static char root[4096], task[4096], base_cg[4096], orig_cgroup[4096], pin_dir[256];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static int move_self(const char *cg)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.procs", cg);
	return write_file(p, "0");
}

/* ns per open+close over @iter iterations; < 0 on error. */
static double measure(long iter)
{
	uint64_t t0 = now_ns();

	for (long i = 0; i < iter; i++) {
		int fd = open(DEV, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "devcheck: open %s: %s\n", DEV, strerror(errno));
			return -1;
		}
		close(fd);
	}
	return (double)(now_ns() - t0) / (double)iter;
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Alternate rounds in the baseline cgroup (outside the root: no device program) and in the
 * task cgroup, so that load from other processes on the machine hits both alike. The ratio is
 * the median of the per-round ratios.
 */
static int measure_pair(long iter, int rounds, double *ret_base, double *ret_ns, double *ret_ratio)
{
	double b[32], v[32], r[32];

	for (int i = 0; i < rounds; i++) {
		if (move_self(base_cg) < 0 || (b[i] = measure(iter)) < 0 || move_self(task) < 0 ||
		    (v[i] = measure(iter)) < 0)
			return -EIO;
		r[i] = v[i] / b[i];
	}
	*ret_base = median(b, rounds);
	*ret_ns = median(v, rounds);
	*ret_ratio = median(r, rounds);
	return 0;
}

/*
 * Managed: the opened device plus n-1 block devices. Block regions sort before char ones, so
 * the linear program compares against all of them before reaching the opened device: its
 * worst case, which is what a job with the last GPU of a node sees.
 */
static struct jobcg_devrule *managed_set(size_t n, unsigned dev_major, unsigned dev_minor)
{
	struct jobcg_devrule *v = calloc(n, sizeof(*v));

	if (!v)
		return NULL;
	v[0] = (struct jobcg_devrule){'c', dev_major, dev_minor, JOBCG_DEV_ACC_ALL, true};
	for (size_t i = 1; i < n; i++)
		v[i] = (struct jobcg_devrule){'b', 4000 + (uint32_t)(i / 1024),
					      (uint32_t)(i % 1024), JOBCG_DEV_ACC_ALL, true};
	return v;
}

static const char *const levels[] = {"job_1", "job_1/step_0", "job_1/step_0/user/task_0"};

struct result {
	double base, ns, ratio;
};

static int run_config(enum jobcg_device_program mode, size_t n, unsigned dmaj, unsigned dmin,
		      long iter, int rounds, struct result *res)
{
	struct jobcg_config conf = {0};
	struct jobcg_devrule *managed = managed_set(n, dmaj, dmin);
	struct jobcg_devrule grant = {'c', dmaj, dmin, JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE,
				      true};
	struct jobcg_devpolicy *p = NULL;
	char buf[8192];
	int e;

	if (!managed)
		return -ENOMEM;
	conf.cgroup.device_program = mode;
	conf.cgroup.bpf_pin_dir = pin_dir;
	e = jobcg_devpolicy_open(&conf, root, managed, n, &p);
	if (e == 0 && jobcg_devpolicy_mode(p) != mode) {
		fprintf(stderr, "devcheck: node program fell back to linear: %s\n",
			jobcg_devpolicy_fallback_reason(p));
		e = -ENOEXEC;
	}
	/* Every level granted: the node program does all its lookups, linear runs 3 programs. */
	for (size_t i = 0; e == 0 && i < 3; i++) {
		char cg[4200];
		snprintf(cg, sizeof(cg), "%s/%s", root, levels[i]);
		e = jobcg_devpolicy_grant(p, cg, &grant, 1);
	}
	if (e == 0) {
		e = measure_pair(iter, rounds, &res->base, &res->ns, &res->ratio);
	} else {
		fprintf(stderr, "devcheck: %s\n", jobcg_error_format(e, buf, sizeof(buf)));
	}
	for (size_t i = 0; p && i < 3; i++) {
		char cg[4200];
		snprintf(cg, sizeof(cg), "%s/%s", root, levels[i]);
		(void)jobcg_devpolicy_revoke(p, cg);
	}
	if (p)
		(void)jobcg_devpolicy_destroy(p);
	free(managed);
	return e;
}

static int find_v2(char *buf, size_t size)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;

	if (!f)
		return -errno;
	while ((m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, size, "%s", m->mnt_dir);
			endmntent(f);
			return 0;
		}
	endmntent(f);
	return -ENOENT;
}

static void cleanup(void)
{
	char p[4200];

	if (orig_cgroup[0])
		(void)move_self(orig_cgroup);
	/* Bottom-up: task_0, user, step_0, job_1. */
	static const char *const dirs[] = {"job_1/step_0/user/task_0", "job_1/step_0/user",
					   "job_1/step_0", "job_1"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		(void)rmdir(p);
	}
	(void)rmdir(root);
	(void)rmdir(base_cg);
	(void)rmdir(pin_dir);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {1, 64, 4096};
	long iter = 100000;
	int rounds = 5, c;
	char mnt[4096], line[4096] = "";
	struct stat st;
	FILE *f;

	while ((c = getopt(argc, argv, "n:r:h")) >= 0) {
		if (c == 'n')
			iter = strtol(optarg, NULL, 10);
		else if (c == 'r')
			rounds = atoi(optarg);
		else {
			fprintf(c == 'h' ? stdout : stderr,
				"Usage: devcheck [-n ITERATIONS] [-r ROUNDS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (iter < 1 || iter > MAX_ITER || rounds < 1 || rounds > 31) {
		fprintf(stderr, "devcheck: -n must be 1..%ld and -r 1..31\n", MAX_ITER);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "devcheck: needs root (loads device programs)\n");
		return 77;
	}
	if (stat(DEV, &st) < 0 || !S_ISCHR(st.st_mode) || find_v2(mnt, sizeof(mnt)) < 0) {
		fprintf(stderr, "devcheck: needs %s and a cgroup v2 mount\n", DEV);
		return 77;
	}
	f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(orig_cgroup, sizeof(orig_cgroup), "%s%s", mnt, line + 3);
		}
	if (f)
		fclose(f);
	snprintf(root, sizeof(root), "%s/jobcg-bench-%d", mnt, (int)getpid());
	snprintf(task, sizeof(task), "%s/job_1/step_0/user/task_0", root);
	snprintf(base_cg, sizeof(base_cg), "%s/jobcg-bench-%d-base", mnt, (int)getpid());
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/jobcg-bench-%d", (int)getpid());
	atexit(cleanup);
	{
		char p[4200];
		const char *parts[] = {"", "/job_1", "/job_1/step_0", "/job_1/step_0/user",
				       "/job_1/step_0/user/task_0"};
		for (size_t i = 0; i < 5; i++) {
			snprintf(p, sizeof(p), "%s%s", root, parts[i]);
			if (mkdir(p, 0755) < 0) {
				fprintf(stderr, "devcheck: mkdir %s: %s\n", p, strerror(errno));
				return 1;
			}
		}
	}
	if (mkdir(base_cg, 0755) < 0) {
		fprintf(stderr, "devcheck: mkdir %s: %s\n", base_cg, strerror(errno));
		return 1;
	}
	if (move_self(task) < 0) {
		fprintf(stderr, "devcheck: cannot move into %s\n", task);
		return 1;
	}

	(void)measure(iter / 10 + 1); /* warm caches */
	struct result res[2][3], none;
	{
		double b[32], v[32];
		for (int i = 0; i < rounds; i++) {
			if (move_self(base_cg) < 0 || (b[i] = measure(iter)) < 0 ||
			    move_self(task) < 0 || (v[i] = measure(iter)) < 0)
				return 1;
			v[i] /= b[i];
		}
		/* Both cgroups without programs: shows the noise floor of the method. */
		none.base = median(b, rounds);
		none.ns = none.base;
		none.ratio = median(v, rounds);
	}
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < 3; i++)
			if (run_config(m ? JOBCG_DEVPROG_LINEAR : JOBCG_DEVPROG_NODE, sizes[i],
				       major(st.st_rdev), minor(st.st_rdev), iter, rounds,
				       &res[m][i]) < 0)
				return 1;

	printf("# open(\"%s\") + close() from a task cgroup, job, step and task all granted;\n"
	       "# %d rounds of %ld, alternating with a cgroup without programs; ratio = median of\n"
	       "# per-round ratios to that baseline\n",
	       DEV, rounds, iter);
	printf("%-8s %8s %10s %10s %7s\n", "program", "devices", "ns/open", "base ns", "ratio");
	printf("%-8s %8d %10.1f %10.1f %7.2f\n", "none", 0, none.ns, none.base, none.ratio);
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < 3; i++)
			printf("%-8s %8zu %10.1f %10.1f %7.2f\n", m ? "linear" : "node", sizes[i],
			       res[m][i].ns, res[m][i].base, res[m][i].ratio);
	printf("{\"device\":\"%s\",\"iterations\":%ld,\"rounds\":%d,\"results\":["
	       "{\"program\":\"none\",\"devices\":0,\"ns_per_open\":%.1f,\"baseline_ns\":%.1f,"
	       "\"ratio\":%.3f}",
	       DEV, iter, rounds, none.ns, none.base, none.ratio);
	for (int m = 0; m < 2; m++)
		for (size_t i = 0; i < 3; i++)
			printf(",{\"program\":\"%s\",\"devices\":%zu,\"ns_per_open\":%.1f,"
			       "\"baseline_ns\":%.1f,\"ratio\":%.3f}",
			       m ? "linear" : "node", sizes[i], res[m][i].ns, res[m][i].base,
			       res[m][i].ratio);
	printf("]}\n");
	return 0;
}
