/* jobcg kernel test: a node program of an earlier device layout, left attached at the root by
 * the jobcg installed before, is detached (and its pins removed) when this jobcg attaches its
 * own, instead of judging every open beside it by a map nobody writes any more. */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "devices.h"
#include "devprog.h"
#include "config_internal.h"
#include "ktest.h"
#include "tap.h"

#define GPU_MAJOR  195
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *root, *tmp;
static char *pin_base; /* ktest_pin_dir(): static storage */

/* 1 when a child in cgroup @dir may open @dev, 0 on EPERM, -1 otherwise. */
static int opens(const char *dir, const char *dev)
{
	int r = ktest_open_in(dir, dev, O_RDWR);

	return r == 0 ? 1 : r == EPERM ? 0 : -1;
}

/* The stand-in for an earlier layout's node program: it denies every GPU, as the old program
 * does for a job whose grant only the new map holds. */
static int load_old(void)
{
	struct bpf_insn insns[] = {
	    {BPF_LDX | BPF_W | BPF_MEM, BPF_REG_4, BPF_REG_1, 4, 0},
	    {BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 2, GPU_MAJOR},
	    {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},
	    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	    {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1},
	    {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
	};
	return bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, DEVPROG_NODE_NAME, "GPL", insns,
			     N_ELEMS(insns), NULL);
}

static bool attached(int root_fd, int prog_fd)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info), ids[64], n = N_ELEMS(ids), flags = 0;

	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0 ||
	    bpf_prog_query(root_fd, BPF_CGROUP_DEVICE, 0, &flags, ids, &n) < 0)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == info.id)
			return true;
	return false;
}

int main(void)
{
	struct jobcg_config conf = {0};
	struct jobcg_devrule managed, grant;
	struct jobcg_devpolicy *p = NULL;
	char dev[4096], job[4096], old_dir[512], old_pin[600], foreign_pin[600], buf[4096];
	int root_fd, old_fd, foreign_fd, e;
	uint64_t root_id;

	root = ktest_setup("devupgrade");
	tmp = ktest_tmpdir();
	pin_base = ktest_pin_dir("devupgrade");
	snprintf(dev, sizeof(dev), "%s/nvidia0", tmp);
	if (mknod(dev, S_IFCHR | 0666, makedev(GPU_MAJOR, 0)) < 0)
		tap_plan_skip_all("mknod not permitted");
	snprintf(job, sizeof(job), "%s/job_1", root);
	if (mkdir(job, 0755) < 0) {
		tap_diag("mkdir %s: %s", job, strerror(errno));
		return 1;
	}
	jobcg_devrule_parse("c 195:0 rwm", &managed);
	jobcg_devrule_parse("c 195:0 rw", &grant);
	root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0 || jobcg_cgroup_id(root, &root_id) < 0) {
		tap_diag("cannot open %s", root);
		return 1;
	}

	/* What the jobcg of layout v2 left: its program attached and pinned under root-<id>-v2,
	 * and one more program of the same name that no pin directory of ours names. */
	old_fd = load_old();
	foreign_fd = load_old();
	if (old_fd < 0 || foreign_fd < 0)
		tap_plan_skip_all("cannot load a device program here");
	snprintf(old_dir, sizeof(old_dir), "%s/root-%" PRIu64 "-v2", pin_base, root_id);
	snprintf(old_pin, sizeof(old_pin), "%s/%s", old_dir, DEVPROG_PIN_PROG);
	snprintf(foreign_pin, sizeof(foreign_pin), "%s/elsewhere", pin_base);
	if (mkdir(pin_base, 0700) < 0 || mkdir(old_dir, 0700) < 0 ||
	    bpf_obj_pin(old_fd, old_pin) < 0 || bpf_obj_pin(foreign_fd, foreign_pin) < 0) {
		tap_diag("cannot pin the old program: %s", strerror(errno));
		return 1;
	}
	if (bpf_prog_attach(old_fd, root_fd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) < 0 ||
	    bpf_prog_attach(foreign_fd, root_fd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) < 0) {
		tap_diag("cannot attach the old program: %s", strerror(errno));
		return 1;
	}
	ok(opens(job, dev) == 0, "the old layout's program denies the GPU");
	/* The second one is detached by hand below, as its owner would: it only shows that a
	 * program no pin of ours names is left alone. */

	conf.cgroup.device_program = JOBCG_DEVPROG_NODE;
	conf.cgroup.bpf_pin_dir = pin_base;
	e = jobcg_devpolicy_open(&conf, root, &managed, 1, &p);
	if (e < 0) {
		tap_diag("%s", jobcg_error_format(e, buf, sizeof(buf)));
		tap_plan_skip_all("cannot set up device programs here");
	}
	if (jobcg_devpolicy_mode(p) != JOBCG_DEVPROG_NODE) {
		jobcg_devpolicy_free(p);
		tap_plan_skip_all("the node program does not load here (linear mode)");
	}
	ok(!attached(root_fd, old_fd), "the earlier layout's node program is detached");
	ok(access(old_pin, F_OK) < 0 && access(old_dir, F_OK) < 0,
	   "its pins and pin directory are gone");
	ok(attached(root_fd, foreign_fd),
	   "a program of the same name that no earlier layout pinned stays attached");
	(void)bpf_prog_detach2(foreign_fd, root_fd, BPF_CGROUP_DEVICE);
	ok(jobcg_devpolicy_grant(p, job, &grant, 1) == 0, "grant job_1 the GPU");
	ok(opens(job, dev) == 1, "job_1 opens its GPU: nothing of the old layout judges it");
	jobcg_devpolicy_free(p);
	close(old_fd);
	close(foreign_fd);
	close(root_fd);
	return tap_done();
}
