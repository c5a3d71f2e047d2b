/* jobcg teardown: remove a whole tree (a test root, a side-by-side install) and its pins. */
#include <getopt.h>

#include "common.h"

static void teardown_help(FILE *f)
{
	fprintf(f, "Usage: jobcg teardown [--force [--grace MS]] [--json]\n\n"
		   "Remove the whole tree (JobcgRoot= / $JOBCG_ROOT), the device program pinned\n"
		   "for it, its node lock file and the Slurm plugin's CPU topology cache beside\n"
		   "it. Refused while jobs or reservations exist.\n"
		   "  --force      release every job first (cancelled, with its record; stray\n"
		   "               steps as jobcg gc records them), delete every reservation, and\n"
		   "               remove what is not jobcg's too\n"
		   "  --grace MS   forced: SIGTERM every process in the tree, wait up to MS\n"
		   "               milliseconds (default 5000, as release) for them to exit, then\n"
		   "               SIGKILL what remains\n"
		   "  --json       print what was removed as JSON\n");
}

static int cmd_teardown(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"force", no_argument, NULL, 'f'},
	    {"grace", required_argument, NULL, 'g'},
	    {"json", no_argument, NULL, 'J'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_teardown_stats st = {};
	unsigned flags = 0, grace_ms = CLI_GRACE_MS_DEFAULT;
	const char *grace = NULL;
	bool json = false;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			flags |= JOBCG_TEARDOWN_FORCE;
			break;
		case 'g':
			if ((r = cli_once("teardown", "--grace", grace, optarg)) ||
			    (r = cli_grace_option("teardown", optarg, &grace_ms)))
				return r;
			grace = optarg;
			break;
		case 'J':
			json = true;
			break;
		case 'h':
			teardown_help(stdout);
			return 0;
		default:
			return cli_option_error("teardown", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("teardown", "unexpected argument '%s'", argv[optind]);
	if (grace && !(flags & JOBCG_TEARDOWN_FORCE))
		return cli_usage_error("teardown",
				       "--grace only applies with --force (without it, a tree "
				       "with jobs is refused)");
	r = cli_ctx_open_cleanup(g, JOBCG_CTX_NO_CREATE_ROOT, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_tree_teardown(ctx, flags, grace_ms, &st)) < 0) {
		cli_print_error(r, "teardown");
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "root", json_object_new_string(jobcg_ctx_root(ctx)));
		json_object_object_add(o, "jobs_removed", json_object_new_int(st.jobs_removed));
		json_object_object_add(o, "steps_removed", json_object_new_int(st.steps_removed));
		json_object_object_add(o, "resv_removed", json_object_new_int(st.resv_removed));
		json_object_object_add(o, "pins_removed", json_object_new_boolean(st.pins_removed));
		json_object_object_add(o, "root_removed", json_object_new_boolean(st.root_removed));
		cli_json_print(stdout, o);
	} else if (!st.root_removed)
		printf("no tree at %s\n", jobcg_ctx_root(ctx));
	else
		printf("removed %s: %u job(s), %u reservation(s) and %u step(s)%s\n",
		       jobcg_ctx_root(ctx), st.jobs_removed, st.resv_removed, st.steps_removed,
		       st.pins_removed ? ", the device program and its pins" : "");
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(teardown, cmd_teardown, "remove the whole tree and its device pins");
