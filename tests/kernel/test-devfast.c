/* jobcg kernel test: readers that trust jobcg's pinned node program (jobcg metrics) decide a
 * cgroup's devices from its policy map exactly as running the program does, and run it
 * wherever another program is on the cgroup's path. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inspect_internal.h"
#include "config_internal.h"
#include "devices.h"
#include "jobcg/inspect.h"
#include "ktest.h"
#include "tap.h"

#define GPU_MAJOR   195
#define OTHER_MAJOR 196
#define N_GPUS	    4
#define N_ELEMS(a)  (sizeof(a) / sizeof((a)[0]))

static const char *root, *tmp;
static char *pin_base; /* ktest_pin_dir(): static storage */

static void path_of(char *buf, size_t size, const char *rel)
{
	if (rel[0])
		snprintf(buf, size, "%s/%s", root, rel);
	else
		snprintf(buf, size, "%s", root);
}

static void mkcg(const char *rel)
{
	char p[4096];

	path_of(p, sizeof(p), rel);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		tap_diag("mkdir %s: %s", p, strerror(errno));
}

static void dev_path(char *buf, size_t size, unsigned major_, unsigned minor_)
{
	snprintf(buf, size, "%s/dev%u_%u", tmp, major_, minor_);
}

/* What the kernel decides: a child in cgroup @rel opens the node; 1 allowed, 0 denied. */
static int kernel_allows(const char *rel, unsigned major_, unsigned minor_, int flags)
{
	char cg[4096], dev[4096];
	int r;

	path_of(cg, sizeof(cg), rel);
	dev_path(dev, sizeof(dev), major_, minor_);
	r = ktest_open_in(cg, dev, flags);
	return r == 0 ? 1 : r == EPERM ? 0 : -1;
}

static int grant(struct jobcg_devpolicy *p, const char *rel, const char *const *rules, size_t n)
{
	struct jobcg_devrule r[8];
	char path[4096], buf[8192];
	int e;

	for (size_t i = 0; i < n; i++)
		if (jobcg_devrule_parse(rules[i], &r[i]) < 0)
			tap_diag("bad rule %s", rules[i]);
	path_of(path, sizeof(path), rel);
	e = jobcg_devpolicy_grant(p, path, r, n);
	if (e < 0)
		tap_diag("grant %s: %s", rel, jobcg_error_format(e, buf, sizeof(buf)));
	return e;
}

/* The cgroups asked about: granted at some levels, at none (fail closed), or not at all. */
static const char *const cgroups[] = {
    "",				/* the root itself: no level below it, denied */
    "system",			/* no grant anywhere: denied */
    "job_1",			/* granted */
    "job_1/step_0",		/* granted a subset */
    "job_1/step_0/user",	/* bounded by job and step */
    "job_1/step_0/user/task_0", /* granted again at the task level */
    "job_1/step_0/user/task_1", /* no grant of its own */
    "job_1/step_1",		/* the job's grant alone */
    "job_2",			/* a wildcard grant */
    "job_2/step_0",		/* under it */
    "job_3",			/* half made: no marker anywhere */
    "job_3/step_0",		/* below a job without a marker */
    "job_4",			/* granted, then revoked */
};

/* The devices asked about: managed stand-in GPUs, an unmanaged char and a block device. */
static const struct jobcg_devreq reqs[] = {
    {'c', GPU_MAJOR, 0, 0}, {'c', GPU_MAJOR, 1, 0},   {'c', GPU_MAJOR, 2, 0},
    {'c', GPU_MAJOR, 3, 0}, {'c', OTHER_MAJOR, 0, 0}, {'b', GPU_MAJOR, 0, 0},
};

struct answer {
	unsigned access[N_ELEMS(reqs)];
	bool opaque;
	size_t nprogs;
};

static int ask(struct jobcg_progcache *c, const char *rel, struct answer *a)
{
	char path[4096], buf[8192];
	int fd, r;

	path_of(path, sizeof(path), rel);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = jobcg_cgroup_devices_access(path, fd, c, reqs, N_ELEMS(reqs), a->access, &a->opaque,
					&a->nprogs);
	close(fd);
	if (r < 0)
		tap_diag("%s: %s", rel, jobcg_error_format(r, buf, sizeof(buf)));
	return r;
}

/*
 * Every cgroup asked with a cache that trusts the policy and one that does not (the
 * interpreter): the same bits for every device. Returns how many disagree; @label names the
 * round.
 */
static unsigned compare_all(struct jobcg_devpolicy *p, const char *label,
			    struct progcache_counts *ret_fast, struct progcache_counts *ret_slow,
			    struct answer *ret_fast_answers)
{
	struct jobcg_progcache *fast = NULL, *slow = NULL;
	unsigned bad = 0;

	if (jobcg_progcache_new(&fast) < 0 || jobcg_progcache_new(&slow) < 0)
		return 1000;
	if (!ok(jobcg_progcache_trust_policy(fast, p) == 0,
		"%s: the cache trusts the pinned node program", label))
		bad++;
	for (size_t k = 0; k < N_ELEMS(cgroups); k++) {
		struct answer a = {0}, b = {0};

		if (ask(fast, cgroups[k], &a) < 0 || ask(slow, cgroups[k], &b) < 0) {
			bad++;
			continue;
		}
		if (ret_fast_answers)
			ret_fast_answers[k] = a;
		if (a.opaque || b.opaque || a.nprogs != b.nprogs) {
			tap_diag("%s: /%s: opaque %d/%d, programs %zu/%zu", label, cgroups[k],
				 a.opaque, b.opaque, a.nprogs, b.nprogs);
			bad++;
		}
		for (size_t d = 0; d < N_ELEMS(reqs); d++)
			if (a.access[d] != b.access[d]) {
				tap_diag("%s: /%s: %c %u:%u: fast %u, interpreter %u", label,
					 cgroups[k], reqs[d].type, reqs[d].major, reqs[d].minor,
					 a.access[d], b.access[d]);
				bad++;
			}
	}
	progcache_counts(fast, ret_fast);
	progcache_counts(slow, ret_slow);
	jobcg_progcache_free(fast);
	jobcg_progcache_free(slow);
	return bad;
}

static size_t cg_index(const char *rel)
{
	for (size_t k = 0; k < N_ELEMS(cgroups); k++)
		if (strcmp(cgroups[k], rel) == 0)
			return k;
	return 0;
}

/* A foreign program: allows everything but @deny_minor of the GPUs. */
static int load_foreign(unsigned deny_minor)
{
	struct bpf_insn insns[] = {
	    /* r2 = type, r4 = major, r5 = minor */
	    {BPF_LDX | BPF_W | BPF_MEM, BPF_REG_2, BPF_REG_1, 0, 0},
	    {BPF_ALU | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff},
	    {BPF_LDX | BPF_W | BPF_MEM, BPF_REG_4, BPF_REG_1, 4, 0},
	    {BPF_LDX | BPF_W | BPF_MEM, BPF_REG_5, BPF_REG_1, 8, 0},
	    {BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, BPF_DEVCG_DEV_CHAR},
	    {BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 3, GPU_MAJOR},
	    {BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 2, (int32_t)deny_minor},
	    {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},
	    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	    {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},
	    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	};
	return bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, "foreign", "GPL", insns, N_ELEMS(insns),
			     NULL);
}

int main(void)
{
	static const char *const job1[] = {"c 195:0 rw", "c 195:1 r", "c 195:2 rwm"};
	static const char *const step0[] = {"c 195:0 r", "c 195:2 rw"};
	static const char *const task0[] = {"c 195:0 rw"};
	static const char *const job2[] = {"c 195:* rw"};
	static const char *const job4[] = {"c 195:3 rw"};
	struct jobcg_config conf = {0};
	struct jobcg_devrule managed[N_GPUS];
	struct jobcg_devpolicy *p = NULL;
	struct progcache_counts cf, cs;
	struct answer fast_answers[N_ELEMS(cgroups)];
	char buf[8192], path[4096];
	int e;

	root = ktest_setup("devfast");
	tmp = ktest_tmpdir();
	pin_base = ktest_pin_dir("devfast");
	for (unsigned i = 0; i < N_GPUS; i++) {
		dev_path(buf, sizeof(buf), GPU_MAJOR, i);
		if (mknod(buf, S_IFCHR | 0666, makedev(GPU_MAJOR, i)) < 0)
			tap_plan_skip_all("mknod not permitted");
		snprintf(buf, sizeof(buf), "c %d:%u rwm", GPU_MAJOR, i);
		jobcg_devrule_parse(buf, &managed[i]);
	}
	dev_path(buf, sizeof(buf), OTHER_MAJOR, 0);
	mknod(buf, S_IFCHR | 0666, makedev(OTHER_MAJOR, 0));

	conf.cgroup.device_program = JOBCG_DEVPROG_NODE;
	conf.cgroup.bpf_pin_dir = pin_base;
	e = jobcg_devpolicy_open(&conf, root, managed, N_GPUS, &p);
	if (e < 0) {
		tap_diag("%s", jobcg_error_format(e, buf, sizeof(buf)));
		tap_plan_skip_all("cannot set up device programs here");
	}
	if (jobcg_devpolicy_mode(p) != JOBCG_DEVPROG_NODE) {
		tap_diag("fallback: %s", jobcg_devpolicy_fallback_reason(p));
		jobcg_devpolicy_free(p);
		tap_plan_skip_all("the node program does not load here (linear mode)");
	}

	for (size_t k = 1; k < N_ELEMS(cgroups); k++)
		mkcg(cgroups[k]);
	ok(grant(p, "job_1", job1, N_ELEMS(job1)) == 0 &&
	       grant(p, "job_1/step_0", step0, N_ELEMS(step0)) == 0 &&
	       grant(p, "job_1/step_0/user/task_0", task0, N_ELEMS(task0)) == 0 &&
	       grant(p, "job_2", job2, N_ELEMS(job2)) == 0 &&
	       grant(p, "job_4", job4, N_ELEMS(job4)) == 0,
	   "grants at job, step and task levels");
	path_of(path, sizeof(path), "job_4");
	ok(jobcg_devpolicy_revoke(p, path) == 0, "job_4's grant revoked");

	/* The pinned policy as a reader opens it (jobcg metrics). */
	struct jobcg_devpolicy *pinned = NULL;
	e = jobcg_devpolicy_open_pinned(&conf, root, &pinned);
	if (!ok(e == 0, "open the pinned policy"))
		tap_diag("%s", jobcg_error_format(e, buf, sizeof(buf)));

	unsigned bad = compare_all(pinned ? pinned : p, "node only", &cf, &cs, fast_answers);
	ok(bad == 0,
	   "node program only: the fast path and the interpreter agree on %zu cgroups x %zu "
	   "devices (%u differences)",
	   N_ELEMS(cgroups), N_ELEMS(reqs), bad);
	ok(cf.fast == N_ELEMS(cgroups) && cf.interpreted == 0,
	   "node program only: every cgroup decided from the map (fast %zu, interpreted %zu)",
	   cf.fast, cf.interpreted);
	ok(cs.fast == 0 && cs.interpreted == N_ELEMS(cgroups),
	   "without trust every cgroup is interpreted (fast %zu, interpreted %zu)", cs.fast,
	   cs.interpreted);

	/* Both readings against what the kernel lets a process open. */
	{
		unsigned agree = 0, total = 0;
		for (size_t k = 0; k < N_ELEMS(cgroups); k++)
			for (unsigned g = 0; g < 3; g++)
				for (int w = 0; w < 2; w++) {
					int kr = kernel_allows(cgroups[k], GPU_MAJOR, g,
							       w ? O_WRONLY : O_RDONLY);
					unsigned bit = w ? JOBCG_DEV_ACC_WRITE : JOBCG_DEV_ACC_READ;
					int fr = (fast_answers[k].access[g] & bit) != 0;
					if (kr < 0)
						continue;
					total++;
					if (kr == fr)
						agree++;
					else
						tap_diag("/%s: 195:%u %s: kernel %d, fast path %d",
							 cgroups[k], g, w ? "write" : "read", kr,
							 fr);
				}
		ok(total > 60 && agree == total, "the fast path matches the kernel on %u/%u opens",
		   agree, total);
	}
	/* A few answers spelled out, so that both paths being wrong alike cannot pass. */
	ok(fast_answers[cg_index("job_1")].access[0] == (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE),
	   "job_1: 195:0 rw");
	ok(fast_answers[cg_index("job_1/step_0/user/task_0")].access[0] == JOBCG_DEV_ACC_READ,
	   "task_0: 195:0 r (its step grants no write)");
	ok(fast_answers[cg_index("job_1/step_0/user/task_0")].access[2] == 0,
	   "task_0: 195:2 denied (not in the task's grant)");
	ok(fast_answers[cg_index("job_1/step_1")].access[2] == JOBCG_DEV_ACC_ALL,
	   "step_1: 195:2 rwm from the job");
	ok(fast_answers[cg_index("job_3/step_0")].access[0] == 0 &&
	       fast_answers[cg_index("job_3")].access[1] == 0 &&
	       fast_answers[cg_index("system")].access[0] == 0 &&
	       fast_answers[cg_index("")].access[0] == 0 &&
	       fast_answers[cg_index("job_4")].access[3] == 0,
	   "fail closed: no marker on the path (root, system, half-made and revoked jobs) denies "
	   "managed devices");
	ok(fast_answers[cg_index("job_3")].access[4] == JOBCG_DEV_ACC_ALL &&
	       fast_answers[cg_index("job_3")].access[5] == JOBCG_DEV_ACC_ALL,
	   "unmanaged devices stay allowed");
	ok(fast_answers[cg_index("job_2/step_0")].access[3] ==
	       (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE),
	   "job_2's wildcard grant reaches its step");

	/* A foreign program on job_1/step_1 (denying 195:2) and one on job_2 (denying 195:3):
	 * those cgroups and the ones below are interpreted, and the answers take the foreign
	 * programs into account. */
	int f1 = load_foreign(2), f2 = load_foreign(3);
	char p1[4096], p2[4096];
	path_of(p1, sizeof(p1), "job_1/step_1");
	path_of(p2, sizeof(p2), "job_2");
	int c1 = open(p1, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
	    c2 = open(p2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ok(f1 >= 0 && f2 >= 0 && c1 >= 0 && c2 >= 0 &&
		   bpf_prog_attach(f1, c1, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0 &&
		   bpf_prog_attach(f2, c2, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) == 0,
	       "foreign programs attached")) {
		bad = compare_all(pinned ? pinned : p, "foreign", &cf, &cs, fast_answers);
		ok(bad == 0,
		   "with foreign programs: the trusting cache and the interpreter agree (%u "
		   "differences)",
		   bad);
		ok(cf.interpreted == 3 && cf.fast == N_ELEMS(cgroups) - 3,
		   "a foreign program on the path forces the interpreter on its 3 cgroups "
		   "(interpreted %zu, fast %zu)",
		   cf.interpreted, cf.fast);
		ok(fast_answers[cg_index("job_1/step_1")].access[2] == 0 &&
		       fast_answers[cg_index("job_2/step_0")].access[3] == 0 &&
		       fast_answers[cg_index("job_2/step_0")].access[2] ==
			   (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE),
		   "the foreign programs' denials are in the answers");
		ok(kernel_allows("job_2/step_0", GPU_MAJOR, 3, O_RDONLY) == 0 &&
		       kernel_allows("job_2/step_0", GPU_MAJOR, 2, O_RDONLY) == 1,
		   "and in the kernel's");
		bpf_prog_detach2(f1, c1, BPF_CGROUP_DEVICE);
		bpf_prog_detach2(f2, c2, BPF_CGROUP_DEVICE);
	}
	if (f1 >= 0)
		close(f1);
	if (f2 >= 0)
		close(f2);
	if (c1 >= 0)
		close(c1);
	if (c2 >= 0)
		close(c2);

	/* A cache trusting another program id (a policy of another root) interprets. */
	{
		struct jobcg_progcache *c = NULL;
		struct answer a;
		struct progcache_counts n;
		jobcg_progcache_new(&c);
		ask(c, "job_1", &a);
		progcache_counts(c, &n);
		ok(n.fast == 0 && n.interpreted == 1, "a cache without trust interprets");
		jobcg_progcache_free(c);
	}

	jobcg_devpolicy_free(pinned);
	e = jobcg_devpolicy_destroy(p);
	ok(e == 0, "node program detached and unpinned");
	return tap_done();
}
