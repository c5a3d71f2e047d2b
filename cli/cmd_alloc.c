/* jobcg alloc: create a job (with its limits) that lives until 'jobcg release'. */
#include <getopt.h>

#include "common.h"
#include "jobcg/jobgres.h"

static int cmd_alloc(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"cpus", required_argument, NULL, 'c'},
	    {"mem", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'p'},
	    {"best-effort", no_argument, NULL, 'B'},
	    {"gres", required_argument, NULL, 'G'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct cli_limits cl = {};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	uint32_t job;
	char *gres = NULL;
	bool json = false;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		r = cli_limits_option("alloc", c, optarg, &cl);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			printf(
			    "Usage: jobcg alloc JOB [--cpus LIST] [--mem SIZE] [--pids N] "
			    "[--gres gpu[:TYPE]:N[,...]]\n"
			    "                   [--best-effort] [--json]\n\n"
			    "Create job JOB with its limits; it stays until 'jobcg release JOB'.\n"
			    "Limits this host cannot enforce are refused unless --best-effort.\n"
			    "--gres picks free devices of gres.conf (those whose Cores match --cpus\n"
			    "first); with ConstrainDevices=yes the job can open only its own.\n");
			return 0;
		default:
			return cli_usage_error("alloc", "unknown option");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("alloc", "need exactly one job id");
	if (jobcg_job_id_parse(argv[optind], &job) < 0)
		return cli_usage_error("alloc", "invalid job id '%s'", argv[optind]);
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (cli_limits_refuse(ctx, &cl)) {
		r = 1;
	} else if (jobcg_job_create(ctx, job, &cl.l, 0, &job) < 0) {
		cli_print_error(NULL);
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();
		char *path = NULL;
		struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};

		(void)jobcg_target_path(ctx, &t, &path);
		json_object_object_add(o, "job", json_object_new_uint64(job));
		if (jobcg_gres_get(ctx, job, NULL, &gres) == 0)
			json_object_object_add(o, "gres", json_object_new_string(gres));
		json_object_object_add(o, "path", json_object_new_string(path ? path : ""));
		cli_json_print(stdout, o);
		free(path);
		free(gres);
	} else {
		if (jobcg_gres_get(ctx, job, NULL, &gres) == 0 && *gres)
			printf("job %u allocated with %s\n", job, gres);
		else
			printf("job %u allocated\n", job);
		free(gres);
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(alloc, cmd_alloc, "create a job that lives until it is released");
