/* Unit tests: parsing of cgroup file contents and /proc/self/mounts (discovery), and the walk
 * up a tree for a freeze asked (on plain files standing in for cgroupfs). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"
#include "cgroupfs.h"
#include "sysinfo_internal.h"
#include "jobcg/acct.h"
#include "jobcg/job.h"
#include "tap.h"

static const char *hybrid_mounts =
    "sysfs /sys sysfs rw 0 0\n"
    "tmpfs /sys/fs/cgroup tmpfs rw,mode=755 0 0\n"
    "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n"
    "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n"
    "cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0\n"
    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

static void put(const char *dir, const char *file, const char *value)
{
	char p[PATH_MAX + 32];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	if (!(f = fopen(p, "w")) || fputs(value, f) < 0 || fclose(f) != 0)
		abort();
}

/* cgfs_freeze_asked(@dir, @above_only) finds @want (NULL: none, *ret_dir left alone). */
static bool asked(const char *dir, bool above_only, const char *want)
{
	char untouched[] = "untouched", *at = untouched;
	int r = cgfs_freeze_asked(dir, above_only, &at);
	bool good = want ? r == 1 && strcmp(at, want) == 0 : r == 0 && at == untouched;

	if (!good)
		tap_diag("cgfs_freeze_asked(%s, %d): %d, %s", dir, above_only, r, at);
	if (at != untouched)
		free(at);
	return good;
}

/* cgfs_freeze_asked(): serves spawn's frozen check (the directory and all above it) and thaw's
 * refusal below a frozen cgroup (only above it). A tree as the kernel makes it: every cgroup
 * but the root has a cgroup.freeze; the root's parent is another file system. */
static void freeze_asked(void)
{
	char base[] = "/tmp/jobcg-unit-freeze-XXXXXX", root[PATH_MAX], resv[PATH_MAX + 8],
	     job[PATH_MAX + 16], step[PATH_MAX + 32], user[PATH_MAX + 48], task[PATH_MAX + 64];

	if (!mkdtemp(base))
		abort();
	jobcg_error_clear();
	/* above the cgroup root: not a cgroup, must not count */
	put(base, "cgroup.freeze", "1\n");
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(resv, sizeof(resv), "%s/resv_r", root);
	snprintf(job, sizeof(job), "%s/job_1", resv);
	snprintf(step, sizeof(step), "%s/step_0", job);
	snprintf(user, sizeof(user), "%s/user", step);
	snprintf(task, sizeof(task), "%s/task_0", user);
	if (mkdir(root, 0755) || mkdir(resv, 0755) || mkdir(job, 0755) || mkdir(step, 0755) ||
	    mkdir(user, 0755) || mkdir(task, 0755))
		abort();
	put(resv, "cgroup.freeze", "0\n");
	put(job, "cgroup.freeze", "0\n");
	put(step, "cgroup.freeze", "0\n");
	put(user, "cgroup.freeze", "0\n");
	put(task, "cgroup.freeze", "0\n");
	ok(asked(task, false, NULL), "no freeze asked: 0, *ret_dir untouched");
	is_int(cgfs_freeze_asked(task, false, NULL), 0, "  the same with no ret_dir");
	ok(jobcg_last_error()->code == 0, "  no error record (the root's missing file)");

	put(job, "cgroup.freeze", "1\n");
	ok(asked(task, false, job), "the job frozen: asked for its task, naming the job");
	ok(asked(job, true, NULL), "above the job itself: none");
	is_int(cgfs_freeze_asked(job, false, NULL), 1, "the job itself, counted: 1");

	put(task, "cgroup.freeze", "1\n");
	ok(asked(task, false, task), "the task frozen too: its own first");
	ok(asked(task, true, job), "above the task: the job, the nearest frozen above");

	put(job, "cgroup.freeze", "0\n");
	put(task, "cgroup.freeze", "0\n");
	put(step, "cgroup.freeze", "1\n");
	ok(asked(task, false, step), "the step frozen: asked for its task");
	put(step, "cgroup.freeze", "0\n");
	/* A freeze asked above the job (its reservation, the tree root, by anyone) freezes a new
	 * task before its exec as surely as one of the job. */
	put(resv, "cgroup.freeze", "1\n");
	ok(asked(task, false, resv), "the reservation frozen: asked for the task");
	put(resv, "cgroup.freeze", "0\n");
	ok(asked(task, false, NULL),
	   "the walk ends at the root (no cgroup.freeze), not at the 1 above it");

	{
		const char *dirs[] = {task, user, step, job, resv, root, base};
		char p[PATH_MAX + 32];

		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			snprintf(p, sizeof(p), "%s/cgroup.freeze", dirs[i]);
			(void)unlink(p);
			(void)rmdir(dirs[i]);
		}
	}
}

int main(void)
{
	struct jobcg_config conf = {};
	char *m = NULL, *s = NULL;
	enum jobcg_layout l;
	uint64_t v = 0;
	pid_t *pids = NULL;
	size_t n = 0;
	struct jobcg_acct a = {};

	is_int(discover_mount(hybrid_mounts, NULL, &m, &l), 0, "hybrid mount found");
	is_str(m, "/sys/fs/cgroup/unified", "hybrid mount point");
	is_int(l, JOBCG_LAYOUT_HYBRID, "hybrid layout");
	free(m);
	is_int(discover_v1_controllers(hybrid_mounts),
	       (1u << JOBCG_CTRL_CPU) | (1u << JOBCG_CTRL_MEMORY) | (1u << JOBCG_CTRL_IO) |
		   (1u << JOBCG_CTRL_PIDS),
	       "v1 controllers: cpu memory io(blkio) pids");
	/* The same host as /proc/cgroups says it: hierarchy 0 is v2 (hugetlb here). */
	is_int(discover_v1_from_proc_cgroups("#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
					     "cpuset\t0\t1\t1\n"
					     "cpu\t12\t1\t1\n"
					     "cpuacct\t2\t1\t1\n"
					     "blkio\t7\t1\t1\n"
					     "memory\t4\t88\t1\n"
					     "hugetlb\t0\t4\t1\n"
					     "a_controller_name_longer_than_32_bytes\t3\t1\t1\n"
					     "pids\t8\t1\t1"),
	       (1u << JOBCG_CTRL_CPU) | (1u << JOBCG_CTRL_MEMORY) | (1u << JOBCG_CTRL_IO) |
		   (1u << JOBCG_CTRL_PIDS),
	       "v1 controllers from /proc/cgroups: cpu memory io(blkio) pids");
	is_int(discover_v1_from_proc_cgroups("#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
					     "cpuset\t0\t1\t1\nmemory\t0\t1\t1\n"),
	       0, "v1 controllers from /proc/cgroups: none on a unified host");
	is_int(discover_v1_from_proc_cgroups(""), 0, "v1 controllers from empty text: none");
	is_int(discover_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", NULL, &m, &l), 0,
	       "unified mount found");
	is_int(l, JOBCG_LAYOUT_UNIFIED, "unified layout");
	free(m);
	is_int(discover_mount(hybrid_mounts, "/sys/fs/cgroup/", &m, &l), 0,
	       "CgroupMountpoint=/sys/fs/cgroup on hybrid uses unified/");
	is_str(m, "/sys/fs/cgroup/unified", "configured hybrid");
	free(m);
	is_int(discover_mount("cgroup2 /run/cg cgroup2 rw 0 0\n", "/run/cg", &m, &l), 0,
	       "configured mount point");
	is_int(l, JOBCG_LAYOUT_CONFIGURED, "configured layout");
	free(m);
	is_int(discover_mount(hybrid_mounts, "/nowhere", &m, &l), -ENOENT,
	       "configured mount point that is not cgroup2");
	ok(strstr(jobcg_last_error()->message, "CgroupMountpoint=/nowhere") != NULL,
	   "error names the setting");
	is_int(discover_mount("cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n", NULL, &m, &l),
	       -EOPNOTSUPP, "v1-only host is refused");
	ok(strstr(jobcg_last_error()->message, "only cgroup v1") != NULL,
	   "clear v1-only message: %s", jobcg_last_error()->message);
	is_int(discover_mount("proc /proc proc rw 0 0\n", NULL, &m, &l), -ENOENT,
	       "no cgroup at all");
	is_int(discover_mount("cgroup2 /mnt/x cgroup2 rw 0 0\n", NULL, &m, &l), 0, "other mount");
	is_int(l, JOBCG_LAYOUT_OTHER, "other layout");
	free(m);

	conf.cgroup.slice = "system.slice";
	conf.cgroup.scope_name = "jobcg.scope";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), 0, "default root");
	is_str(s, "system.slice/jobcg.scope", "default root is <slice>/<scope>");
	free(s);
	conf.cgroup.slice = "-.slice";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), 0, "root slice");
	is_str(s, "jobcg.scope", "the root slice -.slice is the root cgroup");
	free(s);
	conf.cgroup.slice = "hpc-jobs.slice";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), 0, "nested slice");
	is_str(s, "hpc.slice/hpc-jobs.slice/jobcg.scope", "a-b.slice lives in a.slice");
	free(s);
	conf.cgroup.slice = "system.slice";
	conf.cgroup.tree_root = "/test/sub/";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), 0, "configured root");
	is_str(s, "test/sub", "leading and trailing slashes dropped");
	free(s);
	conf.cgroup.tree_root = "a/../b";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), -EINVAL, "'..' refused");
	/* A file name below the mount is the cgroup path after it; one that starts as the mount
	 * does but is elsewhere would make "sys/fs/..." cgroups below the mount. */
	conf.cgroup.tree_root = "/sys/fs/cgroup/unified/jobcg-x/";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), 0, "file name below mount");
	is_str(s, "jobcg-x", "the mount is dropped from a file name below it");
	free(s);
	conf.cgroup.tree_root = "/sys/fs/cgroup/unified";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), -EINVAL,
	       "the mount itself refused");
	conf.cgroup.tree_root = "/sys/fs/cgroup/unifiedx/a";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), -EINVAL,
	       "a file name beside the mount refused");
	conf.cgroup.tree_root = "/sys/fs/cgroup/jobcg";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup/unified", &s), -EINVAL,
	       "a file name above the mount refused");
	conf.cgroup.tree_root = "/sys";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup", &s), -EINVAL, "/sys refused");
	conf.cgroup.tree_root = "/system.slice/jobcg.scope";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup", &s), 0, "cgroup notation");
	is_str(s, "system.slice/jobcg.scope", "cgroup notation kept");
	free(s);
	conf.cgroup.tree_root = "/sys/fs/cgroup/x";
	is_int(discover_root_rel(&conf, "/sys/fs/cgroup", &s), 0, "unified mount");
	is_str(s, "x", "the unified mount dropped");
	free(s);
	ok(discover_kernel_at_least("6.18.44-fc", 5, 19), "6.18 >= 5.19");
	ok(!discover_kernel_at_least("5.4.0", 5, 14), "5.4 < 5.14");
	ok(discover_kernel_at_least("5.14", 5, 14), "5.14 >= 5.14");

	is_int(cgfs_parse_controllers("cpuset cpu io memory hugetlb pids rdma misc\n"),
	       (1u << _JOBCG_CTRL_MAX) - 1, "all controllers");
	is_int(cgfs_parse_controllers("hugetlb frobnicator\n"), 1u << JOBCG_CTRL_HUGETLB,
	       "unknown names ignored");
	is_int(cgfs_parse_controllers(""), 0, "empty");

	is_int(cgfs_parse_keyed("populated 1\nfrozen 0\n", "frozen", &v), 0, "frozen line");
	is_int(v, 0, "frozen 0");
	is_int(cgfs_parse_keyed("usage_usec 17\nuser_usec 5\n", "user_usec", &v), 0, "user_usec");
	is_int(v, 5, "value 5");
	is_int(cgfs_parse_keyed("oom_kill 1\n", "oom", &v), -ENOENT, "oom is not oom_kill");
	is_int(cgfs_parse_keyed("oom x\n", "oom", &v), -EINVAL, "non-numeric value");

	is_int(cgfs_parse_pids("12\n7\n", &pids, &n), 0, "pids parse");
	is_int(n, 2, "two pids");
	is_int(cgfs_parse_pids("x\n", &pids, &n), -EINVAL, "bad pid line");
	is_int(cgfs_parse_pids("5\n0\n", &pids, &n), -EREMOTE,
	       "pid 0: a process of another pid namespace, not a pid to signal");
	ok(strstr(jobcg_last_error()->message, "another pid namespace") != NULL,
	   "  and the error says so");
	free(pids);

	is_int(jobcg_acct_parse("cpu.stat",
				"usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 0\n", &a),
	       0, "cpu.stat");
	ok(jobcg_acct_has(&a, JOBCG_ACCT_CPU_USER_USEC) && a.value[JOBCG_ACCT_CPU_USER_USEC] == 60,
	   "user_usec 60");
	ok(!jobcg_acct_has(&a, JOBCG_ACCT_MEM_PEAK), "memory.peak not read: unavailable");
	is_int(jobcg_acct_parse("memory.stat", "anon 4096\nfile 8192\npgmajfault 3\n", &a), 0,
	       "memory.stat");
	ok(a.value[JOBCG_ACCT_MEM_FILE] == 8192 && a.value[JOBCG_ACCT_PGMAJFAULT] == 3,
	   "file and pgmajfault");
	is_int(jobcg_acct_parse("memory.events", "low 0\nhigh 0\nmax 2\noom 1\noom_kill 0\n", &a),
	       0, "memory.events");
	ok(jobcg_acct_has(&a, JOBCG_ACCT_OOM_KILL) && a.value[JOBCG_ACCT_OOM_KILL] == 0 &&
	       a.value[JOBCG_ACCT_OOM] == 1,
	   "oom 1, oom_kill 0 (a real 0, available)");
	is_int(jobcg_acct_parse("memory.peak", "123456\n", &a), 0, "memory.peak");
	is_int(a.value[JOBCG_ACCT_MEM_PEAK], 123456, "peak value");
	is_int(jobcg_acct_parse("pids.peak", "max\n", &a), 0, "max");
	ok(a.value[JOBCG_ACCT_PIDS_PEAK] == UINT64_MAX, "max is UINT64_MAX");
	is_int(jobcg_acct_parse("memory.current", "12k\n", &a), -EINVAL, "garbage single value");
	is_int(jobcg_acct_parse("cpu.stat", "usage_usec 1\nuser_usec\n", &a), -EINVAL,
	       "key without value");
	is_int(jobcg_last_error()->line, 2, "error names line 2");
	is_int(jobcg_acct_parse("cpu.pressure", "", &a), -ENOENT, "not an accounting file");

	freeze_asked();
	return tap_done();
}
