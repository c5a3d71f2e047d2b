/* jobcg stat: accounting of a job, step or task now (unavailable items say so). */
#include "common.h"

static int cmd_stat(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_acct acct;
	char buf[128];
	int r;

	if (cli_target_args(
		argc, argv, CLI_TARGET_JSON,
		"Usage: jobcg stat [--json] JOB[.STEP[.TASK]]\n\n"
		"Print the target's CPU, memory, OOM and pids accounting. Items whose\n"
		"controller is not available are 'unavailable' (null in JSON), never 0.\n",
		&a, &r))
		return r;
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_acct_read(ctx, &a.t, &acct)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	} else if (a.json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(
		    o, "target",
		    json_object_new_string(jobcg_target_format(&a.t, buf, sizeof(buf))));
		json_object_object_add(o, "acct", cli_json_acct(&acct));
		cli_json_print(stdout, o);
	} else {
		printf("%s:\n", jobcg_target_format(&a.t, buf, sizeof(buf)));
		cli_print_acct(stdout, &acct);
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(stat, cmd_stat, "print the accounting of a job, step or task");
