/* jobcg signal: send a signal to every process of a job, step or task. */
#include "common.h"

static int cmd_signal(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r, n;

	if (cli_target_args(
		argc, argv, CLI_TARGET_SIGNAL | CLI_TARGET_JSON,
		"Usage: jobcg signal [-s SIG] [--json] JOB[.STEP[.TASK]]\n\n"
		"Send SIG (a name such as TERM or RTMIN+2, or a number; default TERM) to\n"
		"every process of the target.\nPrints how many processes were signalled.\n",
		&a, &r))
		return r;
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	/* A signal 0 probes; any other, noted first, makes the steps it ends CANCELLED. */
	n = a.sig > 0 ? jobcg_target_note_signal(ctx, &a.t, a.sig) : 0;
	if (n >= 0)
		n = jobcg_signal(ctx, &a.t, a.sig);
	if (n < 0) {
		cli_print_error(n, NULL);
		r = 1;
	} else if (a.json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "signal", json_object_new_int(a.sig));
		json_object_object_add(o, "signalled", json_object_new_int(n));
		cli_json_print(stdout, o);
	} else
		printf("%d process(es) signalled\n", n);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(signal, cmd_signal, "send a signal to every process of a job, step or task");
