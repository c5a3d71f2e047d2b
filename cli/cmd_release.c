/* jobcg release: end a job's processes, record its accounting, free its GPUs, remove its cgroups.
 */
#include <getopt.h>

#include "common.h"
#include "jobcg/jobend.h"

static int cmd_release(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"grace", required_argument, NULL, 'g'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	unsigned grace_ms = CLI_GRACE_MS_DEFAULT;
	const char *grace_arg = NULL;
	uint32_t job;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf(
			    "Usage: jobcg release JOB [--grace MS]\n\n"
			    "End job JOB: SIGTERM its processes, wait up to --grace milliseconds\n"
			    "(default 5000) for them to exit, SIGKILL what remains, append the "
			    "job's\n"
			    "accounting record, revoke its device grants (freeing its GPUs) and\n"
			    "remove its cgroups.\n");
			return 0;
		}
		if (c == 'g') {
			if ((r = cli_once("release", "--grace", grace_arg, optarg)))
				return r;
			grace_arg = optarg;
			if ((r = cli_grace_option("release", optarg, &grace_ms)))
				return r;
			continue;
		}
		return cli_option_error("release", argc, argv, "h");
	}
	if (optind + 1 != argc)
		return cli_usage_error("release", "need exactly one job id");
	if (jobcg_job_id_parse(argv[optind], &job) < 0)
		return cli_usage_error("release", "invalid job id '%s'", argv[optind]);
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_job_release(ctx, job, grace_ms)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(release, cmd_release, "end a job, record its accounting and remove it");
