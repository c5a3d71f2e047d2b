/* jobcg run: run a command as a step (in an ephemeral job unless --job names one), pass its status.
 * The cgroup work is done here (cli/run.c), or by `jobcg daemon` when asked to and one listens. */
#include "config_internal.h"
#include "run.h"

/* @conf: the configuration if already loaded (taken over), else NULL. */
static int run_in_process(char **argv, const struct run_args *a, const struct cli_global *g,
			  struct jobcg_config *conf)
{
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_spawn_opts so = {.no_clone3 = a->no_clone3};
	struct jobcg_run_result res = {};
	struct run_state s;
	int r;

	if (!conf && (r = cli_load_config(g, JOBCG_CONFIG_NO_ENTRIES, &conf)))
		return r;
	if ((r = jobcg_ctx_open(conf, 0, &ctx)) < 0) {
		cli_print_error(r, NULL);
		jobcg_config_free(conf);
		return 1;
	}
	if (!run_begin(ctx, a, &s, &r)) {
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
	struct jobcg_config *conf = NULL;
	const char *sock;
	int r;

	if (run_parse(argc, argv, &a, &r))
		return r;
	/* The daemon is opt-in: no socket is looked at unless --daemon, $JOBCG_DAEMON_SOCKET or
	 * RunViaDaemon=yes asks for it (on an ordinary host it only adds a round trip). */
	if (!a.no_daemon && (sock = run_daemon_socket())) {
		bool via = a.daemon || jobcg_getenv("JOBCG_DAEMON_SOCKET");

		if (!via) {
			r = cli_load_config(g, JOBCG_CONFIG_NO_ENTRIES, &conf);
			if (r)
				return r;
			via = conf->cgroup.run_via_daemon;
		}
		if (via && run_via_daemon(sock, argc, argv, &a, g, &r)) {
			jobcg_config_free(conf);
			return r;
		}
	}
	return run_in_process(argv, &a, g, conf);
}
CLI_COMMAND(run, cmd_run, "run a command as a step of a job");
