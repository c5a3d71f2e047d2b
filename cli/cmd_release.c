/* jobcg release: kill a job's processes, undo its allocation and remove its cgroups. */
#include <getopt.h>

#include "common.h"

static int cmd_release(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	uint32_t job;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("Usage: jobcg release JOB\n\n"
			       "Kill every process of JOB, undo its allocation and remove its "
			       "cgroups.\n");
			return 0;
		}
		return cli_usage_error("release", "unknown option");
	}
	if (optind + 1 != argc)
		return cli_usage_error("release", "need exactly one job id");
	if (jobcg_job_id_parse(argv[optind], &job) < 0)
		return cli_usage_error("release", "invalid job id '%s'", argv[optind]);
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (jobcg_job_remove(ctx, job, 0) < 0) {
		cli_print_error(NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(release, cmd_release, "remove a job and everything in it");
