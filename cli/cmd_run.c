/* jobcg run: run a command as a step (in an ephemeral job unless --job names one), pass its status.
 * The cgroup work is done by `jobcg daemon` when one listens, else here (cli/run.c). */
#include "run.h"

static int run_in_process(char **argv, const struct run_args *a, const struct cli_global *g)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_spawn_opts so = {.no_clone3 = a->no_clone3};
	struct jobcg_run_result res = {};
	struct run_state s;
	int r;

	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	r = run_begin(ctx, a, &s);
	if (r < 0) {
		so.task_env = jobcg_step_gres_task_env(s.life.gres);
		r = jobcg_step_run(ctx, s.life.job, s.life.step, a->ntasks, argv + a->cmd_index,
				   &so, &res);
		r = run_finish(ctx, &s, r, NULL, &res, false);
	}
	free(res.task_status);
	cli_ctx_close(conf, ctx);
	return r;
}

static int cmd_run(int argc, char **argv, const struct cli_global *g)
{
	struct run_args a;
	const char *sock;
	int r = run_parse(argc, argv, &a);

	if (r >= 0)
		return r;
	if (!a.no_daemon && (sock = run_daemon_socket())) {
		r = run_via_daemon(sock, argc, argv, &a, g);
		if (r >= 0)
			return r;
	}
	return run_in_process(argv, &a, g);
}
CLI_COMMAND(run, cmd_run, "run a command as a step of a job");
