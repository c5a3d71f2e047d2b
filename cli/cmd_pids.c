/* jobcg pids: the processes of a job, step or task. */
#include "common.h"

static int cmd_pids(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	pid_t *pids = NULL;
	size_t n = 0;
	int r;

	if (cli_target_args(argc, argv, CLI_TARGET_JSON,
			    "Usage: jobcg pids [--json] JOB[.STEP[.TASK]]\n\n"
			    "Print the pids in the target's cgroups, one a line (TASK may be "
			    "'special').\n",
			    &a, &r))
		return r;
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_pids(ctx, &a.t, &pids, &n)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	} else if (a.json) {
		struct json_object *arr = json_object_new_array();

		for (size_t i = 0; i < n; i++)
			json_object_array_add(arr, json_object_new_int(pids[i]));
		cli_json_print(stdout, arr);
	} else
		for (size_t i = 0; i < n; i++)
			printf("%d\n", (int)pids[i]);
	free(pids);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(pids, cmd_pids, "list the processes of a job, step or task");
