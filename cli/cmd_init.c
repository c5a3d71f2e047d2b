/* jobcg init: make sure the tree root, its system/ leaf and its controllers exist. */
#include <getopt.h>

#include "common.h"

static int cmd_init(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			printf("Usage: jobcg init\n\n"
			       "Create the jobcg tree root (systemd scope or mkdir), its system/ "
			       "leaf,\n"
			       "and enable the controllers for jobs. Safe to run again.\n");
			return 0;
		}
		return cli_option_error("init", argc, argv, "h");
	}
	if (optind != argc)
		return cli_usage_error("init", "unexpected argument '%s'", argv[optind]);
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_ctx_lock(ctx)) < 0 || (r = jobcg_ctx_ensure_tree(ctx)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	} else
		printf("%s (%s)\n", jobcg_ctx_root(ctx), jobcg_ctx_backend(ctx));
	jobcg_ctx_unlock(ctx);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(init, cmd_init, "create the jobcg cgroup tree");
