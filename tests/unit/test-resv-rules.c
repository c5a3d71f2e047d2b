/*
 * Unit tests for the rules a reservation is checked against before the kernel is touched
 * (jobcg_resv_rules_check()): CPUs online and not SpecCPUs, no overlap with another reservation
 * (CPUs, devices), no CPU or device of a running job, a CPU left to the rest of the node, the
 * memory sum within RAM - MemSpecLimit; and reservation names.
 */
#include <string.h>

#include "jobcg/error.h"
#include "jobcg/resv.h"
#include "tap.h"

#define GiB (1ULL << 30)

static struct jobcg_gres_set devs(unsigned a, unsigned b)
{
	struct jobcg_gres_set s = {};

	if (a != ~0u)
		jobcg_gres_set_add(&s, a);
	if (b != ~0u)
		jobcg_gres_set_add(&s, b);
	return s;
}

#define NONE (~0u)

static void expect(const struct jobcg_resv_rules *in, int want, const char *words, const char *what)
{
	int r = jobcg_resv_rules_check(in);
	const char *msg = jobcg_last_error()->message;

	if (want == 0)
		ok(r == 0, "%s: accepted (%d %s)", what, r, r ? msg : "");
	else
		ok(r == want && strstr(msg, words), "%s: refused with %d '%s' (%d: %s)", what, want,
		   words, r, msg);
	jobcg_error_clear();
}

int main(void)
{
	struct jobcg_resv_rules_entry others[] = {
	    {.name = "a", .cpus = "2-3", .devices = devs(0, 1), .mem_bytes = 4 * GiB},
	    {.name = "b", .cpus = NULL, .devices = devs(4, NONE), .mem_bytes = 0},
	};
	struct jobcg_resv_rules_job jobs[] = {
	    {.id = 7, .cpus = "6", .devices = devs(5, NONE)},
	    {.id = 8, .cpus = NULL, .devices = devs(NONE, NONE)},
	};
	struct jobcg_resv_rules base = {
	    .others = others,
	    .n_others = 2,
	    .jobs = jobs,
	    .n_jobs = 2,
	    .online = "0-7",
	    .spec_cpus = "0",
	    .mem_avail = 16 * GiB,
	};
	struct jobcg_resv_rules in;

	in = base;
	in.want =
	    (struct jobcg_resv_rules_entry){.name = "c", .cpus = "4-5", .devices = devs(2, 3)};
	expect(&in, 0, NULL, "CPUs 4-5 and devices 2,3: free");
	in.want.cpus = "3-4";
	expect(&in, -EBUSY, "CPUs 3 are already reserved by reservation a", "CPU overlap");
	in.want.cpus = NULL;
	in.want.devices = devs(1, 2);
	expect(&in, -EBUSY, "devices #1 are already reserved by reservation a", "device overlap");
	in.want.devices = devs(4, NONE);
	expect(&in, -EBUSY, "reserved by reservation b", "device overlap with a device-only one");
	in.want.devices = devs(5, NONE);
	expect(&in, -EBUSY, "held by running job 7: drain it first", "device of a running job");
	in.want.devices = devs(NONE, NONE);
	in.want.cpus = "5-6";
	expect(&in, -EBUSY, "CPUs 6 are bound to running job 7", "CPU of a running job");
	in.want.cpus = "0";
	expect(&in, -EINVAL, "kept for the system (SpecCPUs)", "a SpecCPU");
	in.want.cpus = "8";
	expect(&in, -EINVAL, "CPUs 8 are not online", "an offline CPU");
	in.want.cpus = "1,4-7";
	in.jobs = NULL;
	in.n_jobs = 0;
	expect(&in, -EINVAL, "would leave no CPU to the rest of the node", "every CPU left");
	in.want.cpus = "1,4-5";
	expect(&in, 0, NULL, "CPUs 6-7 left to the node");
	in.want.cpus = "1-3";
	in.want.devices = devs(NONE, NONE);
	in.jobs = jobs;
	in.n_jobs = 2;
	expect(&in, -EBUSY, "reservation a",
	       "a floating job (8) does not block, a reservation does");
	in.want.cpus = NULL;
	in.want.mem_bytes = 12 * GiB;
	expect(&in, 0, NULL, "memory: 4 + 12 GiB of 16");
	in.want.mem_bytes = 12 * GiB + 1;
	expect(&in, -EINVAL, "RAM - MemSpecLimit", "memory: one byte too many");
	in = base;
	in.n_others = 0;
	in.n_jobs = 0;
	in.want = (struct jobcg_resv_rules_entry){.name = "d", .cpus = "1-7"};
	in.spec_cpus = NULL;
	expect(&in, 0, NULL, "without SpecCPUs, CPU 0 is the node's");
	in.want.cpus = "0-7";
	expect(&in, -EINVAL, "no CPU to the rest", "all CPUs");
	in.want.cpus = "5-2";
	expect(&in, -EINVAL, "invalid CPU list", "a reversed CPU list");

	ok(jobcg_resv_name_valid("a") && jobcg_resv_name_valid("gpu-pool_2") &&
	       jobcg_resv_name_valid("0123456789abcdef0123456789abcdef"),
	   "valid names: a, gpu-pool_2, 32 characters");
	ok(!jobcg_resv_name_valid("") && !jobcg_resv_name_valid("A") &&
	       !jobcg_resv_name_valid("_a") && !jobcg_resv_name_valid("-a") &&
	       !jobcg_resv_name_valid("a/b") && !jobcg_resv_name_valid("a.b") &&
	       !jobcg_resv_name_valid("0123456789abcdef0123456789abcdef0") &&
	       !jobcg_resv_name_valid(NULL),
	   "invalid names: empty, upper case, leading _ or -, '/', '.', 33 characters, NULL");

	/* --devices as written, before gres.conf is read. */
	{
		static const char *const good[] = {NULL,
						   "",
						   "gpu:0",
						   "gpu:0,2",
						   "gpu:0;nic:0",
						   "gpu:1;nic:1,2",
						   "gpu:1;gpu:2",
						   "gpu:0-3",
						   "gpu:0-1,3;nic:0",
						   "gpu:2-2",
						   "gpu:0-3;gpu:4-7",
						   "gpu:511"};
		static const struct {
			const char *in, *words;
		} bad[] = {
		    {"gpu:3;gpu:3", "--devices 'gpu:3;gpu:3': gpu 3 named twice"},
		    {"gpu:1,3;nic:0;gpu:03", "gpu 3 named twice"},
		    {"gpu:0-3,2", "gpu 2 named twice"},
		    {"gpu:1-3;gpu:3-4", "gpu 3 named twice"},
		    {"gpu:5;gpu:0-9", "gpu 5 named twice"},
		    {"gpu:3-1", "'3-1' is not an index or a range"},
		    {"gpu:x", "'x' is not an index or a range"},
		    {"gpu:-1", "'-1' is not an index"},
		    {"gpu:1-", "'1-' is not an index"},
		    {"gpu:1-2-3", "'1-2-3' is not an index"},
		    {"gpu:+1", "'+1' is not an index"},
		    {"gpu:512", "'512' is not an index or a range (N or N-M, below 512)"},
		    {"gpu:0,0", "gpu 0 named twice"},
		    {"gpu:3;;", "--devices 'gpu:3;;': empty group"},
		    {"gpu:3;", "empty group"},
		    {";gpu:3", "empty group"},
		    {"gpu:1,,2", "empty item in 'gpu:1,,2'"},
		    {"gpu:1,", "empty item"},
		    {"gpu:", "empty item"},
		    {"gpu", "'gpu' is not NAME:INDEX[,INDEX]"},
		    {":1", "is not NAME:INDEX"},
		};

		for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
			ok(jobcg_resv_devices_syntax(good[i]) == 0, "--devices '%s': accepted (%s)",
			   good[i] ? good[i] : "(null)",
			   good[i] ? jobcg_last_error()->message : "");
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			int r = jobcg_resv_devices_syntax(bad[i].in);

			ok(r == -EINVAL && strstr(jobcg_last_error()->message, bad[i].words),
			   "--devices '%s': refused with '%s' (%d %s)", bad[i].in, bad[i].words, r,
			   jobcg_last_error()->message);
			jobcg_error_clear();
		}
	}
	return tap_done();
}
