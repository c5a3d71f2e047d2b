/* Kernel test: GRES allocation state kept as trusted.* xattrs on real cgroup v2 directories,
 * derived back by scanning the tree, and concurrent allocators under a lock never overlapping. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "cgroupfs.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "ktest.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static struct jobcg_gres_file files[4] = {
    {(char *)"/dev/nvidia0", 'c', 195, 0},
    {(char *)"/dev/nvidia1", 'c', 195, 1},
    {(char *)"/dev/nvidia2", 'c', 195, 2},
    {(char *)"/dev/nvidia3", 'c', 195, 3},
};
static struct jobcg_gres_record recs[4];
static struct jobcg_gres_conf conf = {.records = recs, .nrecords = 4};

static int count_dirs(const char *rel, unsigned depth, const struct jobcg_gres_set *s, void *u)
{
	(*(int *)u)++;
	return 0;
}

/* One allocator: lock, derive the free set from the tree, take one GPU, record it, unlock. */
static int allocate_one(const struct jobcg_gres_node *n, int rootfd, const char *lock, int id)
{
	_cleanup_close_ int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	struct jobcg_gres_request *req = NULL;
	struct jobcg_gres_set used, all, avail, got;
	char name[32];
	int r, jfd;

	if (lfd < 0 || flock(lfd, LOCK_EX) < 0)
		return 2;
	if (jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &used) < 0)
		return 3;
	jobcg_gres_node_all(n, "gpu", &all);
	for (size_t i = 0; i < ELEMENTSOF(all.w); i++)
		avail.w[i] = all.w[i] & ~used.w[i];
	if (jobcg_gres_request_parse("gpu:1", &req) < 0)
		return 4;
	r = jobcg_gres_select(n, req, &avail, NULL, 0, &got);
	jobcg_gres_request_free(req);
	if (r == -ENOSPC)
		return 1;
	if (r < 0)
		return 5;
	snprintf(name, sizeof(name), "job_%d", id);
	if (mkdirat(rootfd, name, 0755) < 0)
		return 6;
	jfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (jfd < 0 || jobcg_gres_xattr_write(n, jfd, NULL, &got) < 0)
		return 7;
	close(jfd);
	return 0;
}

int main(void)
{
	const char *root = ktest_setup("gres-xattr");
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_set s = {}, back = {}, used = {};
	char path[4096], lock[4096];
	int rootfd, jfd, sfd, dirs = 0;

	for (int i = 0; i < 4; i++)
		recs[i] = (struct jobcg_gres_record){.name = (char *)"gpu",
						     .files = &files[i],
						     .nfiles = 1,
						     .count = 1,
						     .index = (unsigned)i};
	if (gres_node_new(&conf, &n) < 0)
		abort();
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(rootfd >= 0, "open the test cgroup");
	snprintf(path, sizeof(path), "%s/job_1", root);
	ok(mkdir(path, 0755) == 0, "mkdir job_1 (a cgroup)");
	snprintf(path, sizeof(path), "%s/job_1/step_0", root);
	ok(mkdir(path, 0755) == 0, "mkdir job_1/step_0");
	jfd = openat(rootfd, "job_1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	sfd = openat(rootfd, "job_1/step_0", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	jobcg_gres_set_add(&s, 0);
	jobcg_gres_set_add(&s, 2);
	is_int(jobcg_gres_xattr_write(n, jfd, NULL, &s), 0, "trusted.jobcg.gres on a cgroup dir");
	{
		char raw[64] = "";
		ssize_t l = fgetxattr(jfd, JOBCG_GRES_XATTR, raw, sizeof(raw) - 1);
		is_str(l > 0 ? raw : "", "gpu:0,2", "stored as node-wide indices");
	}
	jobcg_gres_set_del(&s, 0);
	is_int(jobcg_gres_xattr_write(n, sfd, NULL, &s), 0, "step attribute");
	is_int(jobcg_gres_xattr_read(n, sfd, NULL, &back), 0, "read back");
	ok(memcmp(&back, &s, sizeof(s)) == 0, "same set");
	is_int(jobcg_gres_scan(n, rootfd, NULL, count_dirs, &dirs, &used), 0,
	       "scan the cgroup tree");
	/* The step's devices are a part of its job's: the walk stops at jobs. */
	is_int(dirs, 1, "the job's attribute is read, not its step's");
	is_int(jobcg_gres_set_count(&used), 2, "two GPUs in use");
	dirs = 0;
	is_int(jobcg_gres_scan(n, rootfd, NULL, count_dirs, &dirs, &used), 0,
	       "scan the same fd again");
	is_int(dirs, 1, "a second scan sees the same (the caller's fd offset is not consumed)");
	{
		/* Values of any size the kernel stores are read whole: well past a page, and the
		 * largest (XATTR_SIZE_MAX), as a scan and a direct read find them. */
		size_t big = 9000, max = 65536;
		char *v = malloc(max + 1), *got = NULL;

		if (!v)
			abort();
		memcpy(v, "gpu:3", 5);
		for (size_t i = 5; i + 2 <= big; i += 2)
			memcpy(v + i, ",1", 2);
		v[big - (big - 5) % 2] = 0;
		ok(fsetxattr(sfd, JOBCG_GRES_XATTR, v, strlen(v), 0) == 0,
		   "a %zu-byte trusted.jobcg.gres is stored", strlen(v));
		is_int(jobcg_gres_xattr_read(n, sfd, NULL, &back), 0, "... and read back");
		ok(jobcg_gres_set_has(&back, 1) && jobcg_gres_set_has(&back, 3) &&
		       jobcg_gres_set_count(&back) == 2,
		   "... as GPUs 1 and 3");
		ok(fsetxattr(jfd, JOBCG_GRES_XATTR, v, strlen(v), 0) == 0, "the job's too");
		is_int(jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &used), 0, "a scan reads it");
		is_int(jobcg_gres_set_count(&used), 2, "... GPUs 1 and 3 in use");
		memset(v, 'x', max);
		v[max] = 0;
		snprintf(path, sizeof(path), "%s/job_1", root);
		ok(setxattr(path, "trusted.jobcg.big", v, max, 0) == 0, "a %zu-byte value", max);
		is_int(cgfs_xattr_get(path, "trusted.jobcg.big", &got), 0,
		       "cgfs_xattr_get reads it");
		ok(got && strlen(got) == max && memcmp(got, v, max) == 0, "... whole");
		free(got);
		free(v);
		is_int(jobcg_gres_xattr_write(n, jfd, NULL, &s), 0, "the job's set as before");
	}
	close(sfd);
	close(jfd);
	snprintf(path, sizeof(path), "%s/job_1/step_0", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/job_1", root);
	ok(rmdir(path) == 0, "removing the job cgroup frees its GPUs");
	is_int(jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &used), 0, "scan again");
	is_int(jobcg_gres_set_count(&used), 0, "nothing in use: the state is the tree");
	{
		/* A job whose list does not parse may still hold grants in the kernel: it must
		 * not read as holding nothing (its GPUs would go to the next job). */
		struct jobcg_gres_set all;
		int hfd;

		snprintf(path, sizeof(path), "%s/job_7", root);
		ok(mkdir(path, 0755) == 0, "a job whose device list is damaged");
		hfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ok(hfd >= 0 && fsetxattr(hfd, JOBCG_GRES_XATTR, "gpu:0,,zz", 9, 0) == 0,
		   "trusted.jobcg.gres='gpu:0,,zz'");
		is_int(jobcg_gres_scan(n, rootfd, NULL, NULL, NULL, &used), 0,
		       "a scan goes on past it");
		jobcg_gres_node_all(n, NULL, &all);
		ok(memcmp(&used, &all, sizeof(all)) == 0 && jobcg_gres_set_count(&used) == 4,
		   "... counting it as holding every device (fail closed), not none");
		if (hfd >= 0)
			close(hfd);
		ok(rmdir(path) == 0, "removed");
	}

	/* 50 allocators race for 4 GPUs. */
	snprintf(lock, sizeof(lock), "%s/lock", ktest_tmpdir());
	pid_t pids[50];
	int got = 0, none = 0, bad = 0;
	for (int i = 0; i < 50; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(allocate_one(n, rootfd, lock, 100 + i));
	}
	for (int i = 0; i < 50; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st))
			bad++;
		else if (WEXITSTATUS(st) == 0)
			got++;
		else if (WEXITSTATUS(st) == 1)
			none++;
		else {
			bad++;
			tap_diag("allocator %d exit %d", i, WEXITSTATUS(st));
		}
	}
	is_int(got, 4, "exactly four of 50 allocators got a GPU");
	is_int(none, 46, "the others were told none is free");
	is_int(bad, 0, "no allocator failed otherwise");
	{
		struct jobcg_gres_set seen = {};
		int overlaps = 0;
		DIR *d = opendir(root);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			struct jobcg_gres_set js;
			int fd;

			if (strncmp(de->d_name, "job_", 4) != 0)
				continue;
			fd = openat(rootfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd >= 0 && jobcg_gres_xattr_read(n, fd, NULL, &js) == 0) {
				for (size_t w = 0; w < ELEMENTSOF(js.w); w++) {
					if (seen.w[w] & js.w[w])
						overlaps++;
					seen.w[w] |= js.w[w];
				}
			}
			if (fd >= 0)
				close(fd);
			unlinkat(rootfd, de->d_name, AT_REMOVEDIR);
		}
		if (d)
			closedir(d);
		is_int(overlaps, 0, "no GPU given twice");
		is_int(jobcg_gres_set_count(&seen), 4, "all four given out");
	}
	close(rootfd);
	jobcg_gres_node_free(n);
	return tap_done();
}
