/* Unit tests for GRES: node state, requests, selection, binding, environment, rules, xattrs. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "tap.h"
#include "util.h"

/* A hand-built node: 4 GPUs (two a100 on CPUs 0-3, two v100 on CPUs 4-7), links 0<->2 strong. */
static struct jobcg_gres_file files[6] = {
    {(char *)"/dev/nvidia0", 'c', 195, 0},     {(char *)"/dev/nvidia1", 'c', 195, 1},
    {(char *)"/dev/nvidia2", 'c', 195, 2},     {(char *)"/dev/nvidia3", 'c', 195, 3},
    {(char *)"/dev/nvidiactl", 'c', 195, 255}, {(char *)"/dev/infiniband/uverbs0", 'c', 231, 192},
};
static struct jobcg_gres_file mig_files[2];
static uint64_t cores_lo = 0x0f, cores_hi = 0xf0;
static int links[4][4] = {{-1, 0, 4, 0}, {0, -1, 0, 0}, {4, 0, -1, 0}, {0, 0, 0, -1}};
static struct jobcg_gres_record recs[6];
static struct jobcg_gres_conf conf;

static void build_conf(unsigned gpu_flags)
{
	for (int i = 0; i < 4; i++)
		recs[i] = (struct jobcg_gres_record){
		    .name = (char *)"gpu",
		    .type = (char *)(i < 2 ? "a100" : "v100"),
		    .files = &files[i],
		    .nfiles = 1,
		    .count = 1,
		    .cores = i < 2 ? &cores_lo : &cores_hi,
		    .cores_words = 1,
		    .links = links[i],
		    .nlinks = 4,
		    .flags = gpu_flags,
		    .index = (unsigned)i,
		};
	recs[4] = (struct jobcg_gres_record){.name = (char *)"bw", .count = 100};
	/* .index 0: the nic is the first of its name */
	recs[5] = (struct jobcg_gres_record){
	    .name = (char *)"nic", .files = &files[5], .nfiles = 1, .count = 1};
	conf = (struct jobcg_gres_conf){.records = recs, .nrecords = 6};
}

static struct jobcg_gres_node *node_new(unsigned gpu_flags)
{
	struct jobcg_gres_node *n = NULL;

	build_conf(gpu_flags);
	if (gres_node_new(&conf, &n) < 0)
		abort();
	return n;
}

static char *fmt(const struct jobcg_gres_node *n, const struct jobcg_gres_set *s)
{
	static char buf[256];
	char *v = NULL;

	if (jobcg_gres_set_format(n, s, &v) < 0)
		return (char *)"(error)";
	snprintf(buf, sizeof(buf), "%s", v);
	free(v);
	return buf;
}

static const char *env_get(char **env, const char *name)
{
	size_t l = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], name, l) == 0 && env[i][l] == '=')
			return env[i] + l + 1;
	return NULL;
}

static void test_node(void)
{
	struct jobcg_gres_node *n = node_new(0);
	struct jobcg_gres_set all;

	is_int(jobcg_gres_node_count(n), 5, "count-only record left out, 4 gpus + 1 nic");
	is_int(jobcg_gres_node_device(n, 3)->index, 3, "gpu 3 has index 3");
	is_int(jobcg_gres_node_device(n, 4)->index, 0, "nic gets its own index 0");
	is_int(jobcg_gres_node_find(n, "nic", 0), 4, "find nic 0");
	is_int(jobcg_gres_node_find(n, "gpu", 4), -ENOENT, "no gpu 4");
	ok(jobcg_gres_node_device(n, 5) == NULL, "out of range device is NULL");
	jobcg_gres_node_all(n, "gpu", &all);
	is_int(jobcg_gres_set_count(&all), 4, "four gpus");
	jobcg_gres_node_free(n);
}

static void test_request(void)
{
	struct jobcg_gres_request *r = NULL;

	is_int(jobcg_gres_request_parse("gpu:a100:2,nic:1", &r), 0, "parse gpu:a100:2,nic:1");
	if (r) {
		is_int(r->nitems, 2, "two items");
		is_str(r->items[0].name, "gpu", "name");
		is_str(r->items[0].type, "a100", "type");
		is_int(r->items[0].count, 2, "count");
		ok(r->items[1].type == NULL && r->items[1].count == 1, "nic:1 has no type");
	}
	jobcg_gres_request_free(r);
	r = NULL;
	is_int(jobcg_gres_request_parse("gpu", &r), 0, "bare name");
	ok(r && r->items[0].count == 1 && !r->items[0].type, "bare name means one of any type");
	jobcg_gres_request_free(r);
	r = NULL;
	is_int(jobcg_gres_request_parse("gres/gpu:v100", &r), 0, "gres/ prefix, type only");
	ok(r && streq(r->items[0].type, "v100") && r->items[0].count == 1, "type only means one");
	jobcg_gres_request_free(r);
	r = NULL;
	is_int(jobcg_gres_request_parse("gpu:0", &r), 0, "gpu:0 is allowed");
	ok(r && r->items[0].count == 0, "gpu:0 asks for none");
	jobcg_gres_request_free(r);
	r = NULL;
	/* Counts as Slurm reads them: a suffix multiplies (and 0 with one is still none). */
	is_int(jobcg_gres_request_parse("gpu:a100:0k", &r), 0, "gpu:a100:0k is a count");
	ok(r && r->items[0].count == 0 && streq(r->items[0].type, "a100"), "...of none");
	jobcg_gres_request_free(r);
	r = NULL;
	is_int(jobcg_gres_request_parse("gpu:1x", &r), 0, "gpu:1x names a type");
	ok(r && streq(r->items[0].type, "1x") && r->items[0].count == 1, "...type 1x, one");
	jobcg_gres_request_free(r);
	r = NULL;
	/* Two types of one name are two items; a name without a type already means any. */
	is_int(jobcg_gres_request_parse("gpu:a100:1,gpu:v100:2", &r), 0, "two types of gpu");
	ok(r && r->nitems == 2, "...two items");
	jobcg_gres_request_free(r);

	static const struct {
		const char *s;
		unsigned col;
	} bad[] = {
	    {"", 0},
	    {"gpu:a100:x", 10},
	    {"gpu:a:1:2", 1},
	    {"gpu,,nic", 5},
	    {":2", 1},
	    {"gpu::2", 5},
	    {"gpu:99999999999", 5},
	    {"gpu:2,gpu:1", 7},
	    {"gp u:1", 1},
	    {"gpu:513", 5},
	    {"7:1", 1},
	    {"gpu:-1", 5},
	    {"gpu:a100:+2", 10},
	    {"gpu:a100:1,gpu:1", 12},
	    {"gpu:1,gpu:a100:1", 7},
	    {"gpu:a100:1,gpu:A100:1", 12},
	    {"gpu:1k", 5},
	    {"gpu:a100:1KiB", 10},
	    {"gpu:2kb", 5},
	    {"gpu:99999999999999999999999", 5},
	    {"gpu:-1k", 5},
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		r = NULL;
		int k = jobcg_gres_request_parse(bad[i].s, &r);

		ok(k == -EINVAL && !r, "'%s' refused", bad[i].s);
		if (bad[i].col)
			is_int(jobcg_last_error()->column, bad[i].col, "  error column");
		tap_diag("  %s", jobcg_last_error()->message);
	}
	static const struct {
		const char *s, *msg;
	} why[] = {
	    {"gpu:-1", "invalid count '-1' (need 0..512)"},
	    {"gpu:a100:1,gpu:1", "gpu given twice"},
	    {"gpu:1,gpu:a100:1", "gpu given twice"},
	    {"gpu:1,gpu:1", "gpu given twice"},
	    {"gpu:a100:1,gpu:a100:2", "gpu:a100 given twice"},
	    {"gpu:1k", "count 1k (1024) exceeds 512"},
	    {"gpu:2kb", "count 2kb (2000) exceeds 512"},
	    {"gpu:513", "count 513 exceeds 512"},
	    {"gpu:1g", "count 1g (1073741824) exceeds 512"},
	    {"gpu:99999999999999999999999", "count 99999999999999999999999 exceeds 512"},
	};
	for (size_t i = 0; i < ELEMENTSOF(why); i++) {
		r = NULL;
		jobcg_gres_request_parse(why[i].s, &r);
		ok(!r && strstr(jobcg_last_error()->message, why[i].msg) != NULL, "'%s': %s",
		   why[i].s, jobcg_last_error()->message);
		jobcg_gres_request_free(r);
	}
}

static int select_s(const struct jobcg_gres_node *n, const char *req,
		    const struct jobcg_gres_set *avail, uint64_t cpus, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_request *r = NULL;
	int k = jobcg_gres_request_parse(req, &r);

	if (k < 0)
		return k;
	k = jobcg_gres_select(n, r, avail, cpus ? &cpus : NULL, 1, ret);
	jobcg_gres_request_free(r);
	return k;
}

static void test_select(void)
{
	struct jobcg_gres_node *n = node_new(0);
	struct jobcg_gres_set all, got = {}, avail;

	jobcg_gres_node_all(n, NULL, &all);
	is_int(select_s(n, "gpu:1", &all, 0, &got), 0, "select one gpu");
	is_str(fmt(n, &got), "gpu:0", "lowest index without CPU preference");
	is_int(select_s(n, "gpu:1", &all, 0xf0, &got), 0, "select with CPUs 4-7");
	is_str(fmt(n, &got), "gpu:2", "prefers a GPU whose Cores match the CPUs");
	is_int(select_s(n, "gpu:2", &all, 0, &got), 0, "select two");
	is_str(fmt(n, &got), "gpu:0,2", "prefers the GPU linked to the first");
	is_int(select_s(n, "gpu:2", &all, 0x0f, &got), 0, "select two on CPUs 0-3");
	is_str(fmt(n, &got), "gpu:0,1", "core affinity beats links");
	is_int(select_s(n, "gpu:v100:1,gpu:a100:1,nic", &all, 0, &got), 0, "two types and nic");
	is_str(fmt(n, &got), "gpu:0,2;nic:0", "the second type picks by links to the first");
	is_int(select_s(n, "gpu:A100:2", &all, 0xf0, &got), 0, "type matching ignores case");
	is_str(fmt(n, &got), "gpu:0,1", "non-affine GPUs still given when the type demands");

	avail = all;
	jobcg_gres_set_del(&avail, 0);
	jobcg_gres_set_del(&avail, 2);
	is_int(select_s(n, "gpu:2", &avail, 0, &got), 0, "select from what is free");
	is_str(fmt(n, &got), "gpu:1,3", "only free ones");
	got = (struct jobcg_gres_set){.w = {1}};
	is_int(select_s(n, "gpu:3", &avail, 0, &got), -ENOSPC, "too few free: ENOSPC");
	is_str(fmt(n, &got), "gpu:0", "output untouched on failure");
	tap_diag("  %s", jobcg_last_error()->message);
	ok(strstr(jobcg_last_error()->message, "3 asked, only 2 free (4 configured)") != NULL,
	   "message gives asked, free, configured");
	is_int(select_s(n, "gpu:h100:1", &all, 0, &got), -ENOENT, "unknown type: ENOENT");
	is_int(select_s(n, "fpga:1", &all, 0, &got), -ENOENT, "unknown name: ENOENT");
	is_int(select_s(n, "bw:1", &all, 0, &got), -ENOENT,
	       "count-only gres cannot be given by device");
	ok(strstr(jobcg_last_error()->message,
		  "bw: gres.conf gives it Count=100 but no device files (File=) on this node, "
		  "so jobcg cannot allocate it"),
	   "...and says why, not 'none configured': %s", jobcg_last_error()->message);
	is_int(select_s(n, "gpu:0", &all, 0, &got), 0, "gpu:0");
	is_int(jobcg_gres_set_count(&got), 0, "gpu:0 gives nothing");
	jobcg_gres_node_free(n);
}

static void test_step(void)
{
	struct jobcg_gres_node *n = node_new(0);
	struct jobcg_gres_request *r = NULL;
	struct jobcg_gres_set job = {}, avail, got = {};

	jobcg_gres_set_add(&job, 1);
	jobcg_gres_set_add(&job, 3);
	jobcg_gres_request_parse("gpu:3", &r);
	is_int(jobcg_gres_select_step(n, r, &job, NULL, NULL, 0, &got), -E2BIG,
	       "step asking more GPUs than its job is refused");
	tap_diag("  %s", jobcg_last_error()->message);
	jobcg_gres_request_free(r);
	jobcg_gres_request_parse("gpu:1", &r);
	is_int(jobcg_gres_select_step(n, r, &job, NULL, NULL, 0, &got), 0, "step takes one");
	is_str(fmt(n, &got), "gpu:1", "from the job's devices only");
	avail = job;
	jobcg_gres_set_del(&avail, 1);
	is_int(jobcg_gres_select_step(n, r, &job, &avail, NULL, 0, &got), 0, "second step");
	is_str(fmt(n, &got), "gpu:3", "avoids the one another step holds");
	avail = (struct jobcg_gres_set){};
	is_int(jobcg_gres_select_step(n, r, &job, &avail, NULL, 0, &got), -EBUSY,
	       "all held by other steps: EBUSY");
	jobcg_gres_request_free(r);
	jobcg_gres_request_parse("gpu:v100:2", &r);
	is_int(jobcg_gres_select_step(n, r, &job, NULL, NULL, 0, &got), -E2BIG,
	       "job has only one v100");
	jobcg_gres_request_free(r);
	jobcg_gres_node_free(n);
}

static void test_bind(void)
{
	struct jobcg_gres_node *n = node_new(0);
	struct jobcg_gres_set step = {}, t;
	struct jobcg_gpu_bind b;

	for (unsigned i = 0; i < 4; i++)
		jobcg_gres_set_add(&step, i);
	jobcg_gres_set_add(&step, 4); /* the nic stays with every task */

	is_int(jobcg_gpu_bind_parse("none", &b), 0, "parse none");
	is_int(jobcg_gpu_bind_task(n, &b, &step, 1, 4, &t), 0, "none");
	is_str(fmt(n, &t), "gpu:0,1,2,3;nic:0", "none: all step devices");

	is_int(jobcg_gpu_bind_parse("single:2", &b), 0, "parse single:2");
	jobcg_gpu_bind_task(n, &b, &step, 0, 8, &t);
	is_str(fmt(n, &t), "gpu:0;nic:0", "single:2 task 0");
	jobcg_gpu_bind_task(n, &b, &step, 3, 8, &t);
	is_str(fmt(n, &t), "gpu:1;nic:0", "single:2 task 3");
	jobcg_gpu_bind_task(n, &b, &step, 7, 8, &t);
	is_str(fmt(n, &t), "gpu:3;nic:0", "single:2 task 7");

	is_int(jobcg_gpu_bind_parse("per_task:2", &b), 0, "parse per_task:2");
	jobcg_gpu_bind_task(n, &b, &step, 1, 2, &t);
	is_str(fmt(n, &t), "gpu:2,3;nic:0", "per_task:2 task 1");
	is_int(jobcg_gpu_bind_parse("per_task:5", &b), 0, "parse per_task:5");
	is_int(jobcg_gpu_bind_task(n, &b, &step, 0, 1, &t), -EINVAL,
	       "per_task:5 with 4 GPUs fails");

	is_int(jobcg_gpu_bind_parse("map_gpu:3,0*2", &b), 0, "parse map_gpu:3,0*2");
	is_int(b.nmap, 3, "map expands repeats");
	jobcg_gpu_bind_task(n, &b, &step, 0, 4, &t);
	is_str(fmt(n, &t), "gpu:3;nic:0", "map task 0");
	jobcg_gpu_bind_task(n, &b, &step, 2, 4, &t);
	is_str(fmt(n, &t), "gpu:0;nic:0", "map task 2");
	jobcg_gpu_bind_task(n, &b, &step, 3, 4, &t);
	is_str(fmt(n, &t), "gpu:3;nic:0", "map wraps around");
	jobcg_gpu_bind_done(&b);

	/* map ids count within the step: a step with gpu 1,3 has ids 0 and 1 */
	struct jobcg_gres_set small = {};
	jobcg_gres_set_add(&small, 1);
	jobcg_gres_set_add(&small, 3);
	jobcg_gpu_bind_parse("map_gpu:1,2", &b);
	jobcg_gpu_bind_task(n, &b, &small, 0, 2, &t);
	is_str(fmt(n, &t), "gpu:3", "map id 1 is the step's second GPU");
	is_int(jobcg_gpu_bind_task(n, &b, &small, 1, 2, &t), -EINVAL, "map id beyond the step");
	jobcg_gpu_bind_done(&b);

	static const char *bad[] = {"single",	    "single:0",	  "per_task:x", "map_gpu:",
				    "map_gpu:1,,2", "map_gpu:1*", "closest",	"map_gpu:-1"};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		b = (struct jobcg_gpu_bind){};
		ok(jobcg_gpu_bind_parse(bad[i], &b) == -EINVAL, "--gpu-bind %s refused", bad[i]);
		jobcg_gpu_bind_done(&b);
	}
	jobcg_gres_node_free(n);
}

static void test_env(void)
{
	struct jobcg_gres_node *n = node_new(0);
	struct jobcg_gres_set job = {}, step = {}, task = {};
	struct jobcg_gres_env_in in = {.job = &job, .step = &step, .constrained = true};
	char **env = NULL;

	jobcg_gres_set_add(&job, 1);
	jobcg_gres_set_add(&job, 2);
	jobcg_gres_set_add(&job, 3);
	jobcg_gres_set_add(&step, 2);
	jobcg_gres_set_add(&step, 3);

	is_int(jobcg_gres_env(n, &in, &env), 0, "env, constrained");
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "0,1", "constrained: renumbered from 0");
	is_str(env_get(env, "ROCR_VISIBLE_DEVICES"), "0,1", "ROCR too (default: all variables)");
	is_str(env_get(env, "ZE_AFFINITY_MASK"), "0,1", "ZE_AFFINITY_MASK");
	is_str(env_get(env, "GPU_DEVICE_ORDINAL"), "0,1", "GPU_DEVICE_ORDINAL");
	is_str(env_get(env, "JOBCG_JOB_GPUS"), "1,2,3", "JOBCG_JOB_GPUS node-wide");
	is_str(env_get(env, "JOBCG_STEP_GPUS"), "2,3", "JOBCG_STEP_GPUS node-wide");
	strv_free(env);

	in.constrained = false;
	jobcg_gres_env(n, &in, &env);
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "2,3", "unconstrained: node-wide indices");
	strv_free(env);

	/* task bound to gpu 3: step-constrained sees 2,3 -> 1; task-constrained sees only 3 -> 0 */
	jobcg_gres_set_add(&task, 3);
	in.constrained = true;
	in.task = &task;
	jobcg_gres_env(n, &in, &env);
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "1", "task bound, step visible");
	strv_free(env);
	in.visible = &task;
	jobcg_gres_env(n, &in, &env);
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "0", "task bound and constrained");
	strv_free(env);
	jobcg_gres_node_free(n);

	n = node_new(JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_UUID);
	jobcg_gres_node_set_uuid(n, 2, "GPU-2222");
	in = (struct jobcg_gres_env_in){.job = &job, .step = &step, .constrained = true};
	jobcg_gres_env(n, &in, &env);
	is_str(env_get(env, "CUDA_VISIBLE_DEVICES"), "GPU-2222,1", "env_uuid: uuid where known");
	ok(!env_get(env, "ROCR_VISIBLE_DEVICES") && !env_get(env, "ZE_AFFINITY_MASK"),
	   "env_nvidia only: no other runtime variables");
	strv_free(env);
	jobcg_gres_node_free(n);

	n = node_new(JOBCG_GRES_FLAG_NO_GPU_ENV);
	jobcg_gres_env(n, &in, &env);
	ok(!env_get(env, "CUDA_VISIBLE_DEVICES") && !env_get(env, "GPU_DEVICE_ORDINAL"),
	   "no_gpu_env: no runtime variables");
	is_str(env_get(env, "JOBCG_STEP_GPUS"), "2,3", "no_gpu_env: JOBCG_STEP_GPUS still set");
	strv_free(env);

	struct jobcg_gres_set none = {};
	in = (struct jobcg_gres_env_in){.job = &none, .step = &none, .constrained = true};
	{
		struct jobcg_gres_env_in bad = {.step = &none};
		char **e2 = NULL;

		is_int(jobcg_gres_env(n, &bad, &e2), -EINVAL, "env without the job's set refused");
		ok(e2 == NULL, "  nothing returned");
	}
	is_int(jobcg_gres_env(n, &in, &env), 0, "env with no GPUs");
	ok(env && !env[0], "no GPUs: empty environment");
	strv_free(env);
	jobcg_gres_node_free(n);
}

static void test_uuid_proc(void)
{
	struct jobcg_gres_node *n = node_new(0);
	char dir[] = "/tmp/jobcg-test-gres-XXXXXX";
	char path[256];
	FILE *f;

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	snprintf(path, sizeof(path), "%s/0000:3b:00.0", dir);
	mkdir(path, 0755);
	strcat(path, "/information");
	f = fopen(path, "we");
	fprintf(f, "Model: \t\t NVIDIA A100\nIRQ:   \t\t 100\nGPU UUID: \t GPU-abc-def\n"
		   "Video BIOS: \t ??\nDevice Minor: \t 3\n");
	fclose(f);
	is_int(jobcg_gres_node_load_uuids(n, dir), 1, "one UUID learnt from the proc files");
	is_str(jobcg_gres_node_device(n, 3)->uuid, "GPU-abc-def", "matched by device minor");
	ok(jobcg_gres_node_device(n, 0)->uuid == NULL, "others stay unknown");
	unlink(path);
	*strrchr(path, '/') = 0;
	rmdir(path);
	rmdir(dir);
	is_int(jobcg_gres_node_load_uuids(n, "/nonexistent/jobcg"), 0, "no proc dir: none");
	jobcg_gres_node_free(n);
}

/* Local formatting: the devrule printer belongs to another part and is not needed here. */
static char *rule_fmt(const struct jobcg_devrule *r, char *buf, size_t size)
{
	snprintf(buf, size, "%c %u:%u %s%s%s%s", r->type, r->major, r->minor,
		 r->access & JOBCG_DEV_ACC_READ ? "r" : "",
		 r->access & JOBCG_DEV_ACC_WRITE ? "w" : "",
		 r->access & JOBCG_DEV_ACC_MKNOD ? "m" : "", r->allow ? "" : " deny");
	return buf;
}

static void test_devrules(void)
{
	struct jobcg_gres_node *n;
	struct jobcg_gres_set s = {};
	struct jobcg_devrule *rules = NULL;
	size_t nr = 0;
	char buf[64];

	build_conf(0);
	/* A MIG-like record: GPU 1 carries a capability file and the shared control file. */
	mig_files[0] = files[1];
	mig_files[1] = files[4];
	recs[1].files = mig_files;
	recs[1].nfiles = 2;
	recs[0].files = mig_files + 1; /* pretend gpu 0 also lists nvidiactl only */
	if (gres_node_new(&conf, &n) < 0)
		abort();
	jobcg_gres_set_add(&s, 1);
	is_int(jobcg_gres_devrules(n, &s, &rules, &nr), 0, "rules for gpu 1");
	is_int(nr, 2, "MultipleFiles: both files");
	if (nr == 2) {
		is_str(rule_fmt(&rules[0], buf, sizeof(buf)), "c 195:1 rwm", "rule 0");
		is_str(rule_fmt(&rules[1], buf, sizeof(buf)), "c 195:255 rwm", "rule 1");
	}
	free(rules);
	is_int(jobcg_gres_devrules(n, NULL, &rules, &nr), 0, "managed rules");
	is_int(nr, 5, "managed: every file once (nvidiactl deduplicated), nic included");
	free(rules);
	jobcg_gres_node_free(n);

	files[2].type = 0;
	n = node_new(0);
	is_int(jobcg_gres_devrules(n, NULL, &rules, &nr), -ENODEV, "unstat()ed file refused");
	files[2].type = 'c';
	jobcg_gres_node_free(n);
}

static int scan_cb(const char *rel, unsigned depth, const struct jobcg_gres_set *s, void *u)
{
	int *count = u;

	(*count)++;
	return 0;
}

static void test_xattr(void)
{
	struct jobcg_gres_node *n = node_new(0);
	char dir[] = "/tmp/jobcg-test-gres-XXXXXX";
	char path[256];
	struct jobcg_gres_set s = {}, back = {}, used = {};
	int fd, jfd, sfd, count = 0;
	const char *xa = "user.jobcg.gres";

	ok(jobcg_gres_set_parse(n, "gpu:0,2;nic:0", &s) == 0, "parse a set");
	is_str(fmt(n, &s), "gpu:0,2;nic:0", "format round trip");
	ok(jobcg_gres_set_parse(n, "gpu:7", &back) == -ENOENT, "unknown index refused");
	ok(jobcg_gres_set_parse(n, "gpu", &back) == -EINVAL, "missing indices refused");
	ok(jobcg_gres_set_parse(n, "gpu:x", &back) == -EINVAL, "bad index refused");
	ok(jobcg_gres_set_parse(n, "gpu:0-2;nic:0", &back) == 0, "a range: gpu:0-2");
	is_str(fmt(n, &back), "gpu:0,1,2;nic:0", "  is gpu:0,1,2");
	ok(jobcg_gres_set_parse(n, "gpu:2-0", &back) == -EINVAL &&
	       strstr(jobcg_last_error()->message, "bad index '2-0' (N or N-M)"),
	   "a range backwards is refused");
	ok(jobcg_gres_set_parse(n, "gpu:2-7", &back) == -ENOENT &&
	       strstr(jobcg_last_error()->message, "gres.conf has no gpu 4"),
	   "a range past the node's GPUs names the first one missing (%s)",
	   jobcg_last_error()->message);

	if (!mkdtemp(dir)) {
		ok(false, "mkdtemp");
		return;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/job_1", dir);
	mkdir(path, 0755);
	strcat(path, "/step_0");
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/job_2", dir);
	mkdir(path, 0755);
	jfd = openat(fd, "job_1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	sfd = openat(fd, "job_1/step_0", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int w = jobcg_gres_xattr_write(n, jfd, xa, &s);
	if (w == -EOPNOTSUPP || w == -ENOTSUP) {
		tap_skip("user xattrs not supported on /tmp here");
	} else {
		struct jobcg_gres_set st = {};

		is_int(w, 0, "write the job's xattr");
		jobcg_gres_set_add(&st, 2);
		is_int(jobcg_gres_xattr_write(n, sfd, xa, &st), 0, "write the step's xattr");
		is_int(jobcg_gres_xattr_read(n, jfd, xa, &back), 0, "read it back");
		is_str(fmt(n, &back), "gpu:0,2;nic:0", "same set");
		is_int(jobcg_gres_xattr_read(n, fd, xa, &back), -ENODATA, "no xattr: ENODATA");
		fsetxattr(jfd, "user.other", "1", 1, 0);
		{
			int j2 = openat(fd, "job_2", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			fsetxattr(j2, xa, "gpu:3;gpu:9", 11, 0);
			close(j2);
		}
		/* A job inside a reservation is read too; its steps are not walked either. */
		mkdirat(fd, "resv_r1", 0755);
		mkdirat(fd, "resv_r1/job_3", 0755);
		{
			int j3 = openat(fd, "resv_r1/job_3", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			fsetxattr(j3, xa, "gpu:1", 5, 0);
			close(j3);
		}
		is_int(jobcg_gres_scan(n, fd, xa, scan_cb, &count, &used), 0, "scan the tree");
		is_int(count, 3,
		       "the three jobs' attributes are read, not the step's (a part of its "
		       "job's)");
		is_str(fmt(n, &used), "gpu:0,1,2,3;nic:0", "used = union; unknown gpu 9 ignored");
	}
	close(sfd);
	close(jfd);
	close(fd);
	snprintf(path, sizeof(path), "%s/job_1/step_0", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/job_1", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/job_2", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/resv_r1/job_3", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/resv_r1", dir);
	rmdir(path);
	rmdir(dir);
	jobcg_gres_node_free(n);
}

static void test_too_many(void)
{
	size_t nrec = JOBCG_GRES_MAX + 1;
	struct jobcg_gres_record *many = calloc(nrec, sizeof(*many));
	struct jobcg_gres_conf c = {.records = many, .nrecords = nrec};
	struct jobcg_gres_node *n = NULL;

	for (size_t i = 0; i < nrec; i++)
		many[i] = (struct jobcg_gres_record){.name = (char *)"gpu",
						     .files = &files[0],
						     .nfiles = 1,
						     .count = 1,
						     .index = (unsigned)i};
	is_int(gres_node_new(&c, &n), -E2BIG, "more than JOBCG_GRES_MAX devices refused");
	ok(n == NULL, "nothing returned");
	many[1].index = 0;
	c.nrecords = 4;
	is_int(gres_node_new(&c, &n), -EINVAL, "two devices with the same index refused");
	many[1].index = 1;
	c.nrecords = JOBCG_GRES_MAX;
	is_int(gres_node_new(&c, &n), 0, "exactly JOBCG_GRES_MAX devices is fine");
	is_int(jobcg_gres_node_find(n, "gpu", JOBCG_GRES_MAX - 1), JOBCG_GRES_MAX - 1,
	       "last one found");
	jobcg_gres_node_free(n);
	free(many);
}

int main(void)
{
	/* No CPU topology to read: Cores= indices are taken as CPU ids, the same on every host
	 * (the SMT conversion is test-cputopo's). */
	setenv("JOBCG_SYSROOT", "/nonexistent/jobcg-test-no-sysfs", 1);
	test_node();
	test_request();
	test_select();
	test_step();
	test_bind();
	test_env();
	test_uuid_proc();
	test_devrules();
	test_xattr();
	test_too_many();
	return tap_done();
}
