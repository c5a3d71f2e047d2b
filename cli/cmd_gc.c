/* jobcg gc: remove stray job and step directories whose owners are gone. */
#include <getopt.h>

#include "common.h"

static int cmd_gc(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_gc_stats st = {};
	bool json = false;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			printf(
			    "Usage: jobcg gc [--json]\n\n"
			    "Remove ephemeral jobs and steps whose 'jobcg run' is gone, and job\n"
			    "directories left half made. Allocated jobs stay until released.\n");
			return 0;
		default:
			return cli_usage_error("gc", "unknown option");
		}
	}
	if (optind != argc)
		return cli_usage_error("gc", "unexpected argument '%s'", argv[optind]);
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (jobcg_gc(ctx, 0, &st) < 0) {
		cli_print_error(NULL);
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "jobs_removed", json_object_new_int(st.jobs_removed));
		json_object_object_add(o, "steps_removed", json_object_new_int(st.steps_removed));
		json_object_object_add(o, "kept", json_object_new_int(st.kept));
		cli_json_print(stdout, o);
	} else
		printf("removed %u job(s) and %u step(s); %u job(s) kept\n", st.jobs_removed,
		       st.steps_removed, st.kept);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(gc, cmd_gc, "remove stray jobs and steps whose owner is gone");
