/*
 * jobcg scope-helper: internal. The D-Bus half of the systemd scope backend for a statically
 * linked jobcg, which must not dlopen() libsystemd: it runs this in its dynamically linked twin
 * (jobcg-dynamic) while it holds the node lock, so nothing here takes that lock.
 */
#include <string.h>

#include "common.h"

static int cmd_scope_helper(int argc, char **argv, const struct cli_global *g)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf(
		    "Usage: jobcg scope-helper\n\n"
		    "Internal: create or revive jobcg's systemd scope over D-Bus for a\n"
		    "statically linked jobcg, which runs it as jobcg-dynamic; you never need to\n"
		    "run it yourself.\n");
		return 0;
	}
	if (argc > 1)
		return cli_usage_error("scope-helper", "takes no arguments");
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_ctx_systemd_scope(ctx)) < 0) {
		cli_print_error(r, "scope-helper");
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}
/* The command name has a dash, which clang-format would space out. */
/* clang-format off */
CLI_COMMAND(scope-helper, cmd_scope_helper, "internal: ask systemd for a static jobcg's scope");
/* clang-format on */
