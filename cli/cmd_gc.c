/* jobcg gc: remove stray job and step directories whose owners are gone. */
#include "common.h"

static int cmd_gc(int argc, char **argv, const struct cli_global *g)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_gc_stats st = {};
	bool json = false;
	int r;

	if (cli_json_only_args(
		argc, argv, "gc",
		"Usage: jobcg gc [--json]\n\n"
		"Remove ephemeral jobs and steps whose 'jobcg run' is gone, and jobs,\n"
		"steps and reservations left half made. Allocated jobs stay until released;\n"
		"a Slurm job of jobcg_spank.so's with no step and no process left goes.\n",
		&json, &r))
		return r;
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_gc(ctx, 0, &st)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "jobs_removed", json_object_new_int(st.jobs_removed));
		json_object_object_add(o, "steps_removed", json_object_new_int(st.steps_removed));
		json_object_object_add(o, "kept", json_object_new_int(st.kept));
		json_object_object_add(o, "resv_removed", json_object_new_int(st.resv_removed));
		json_object_object_add(o, "records_written",
				       json_object_new_int(st.records_written));
		cli_json_print(stdout, o);
	} else {
		printf("removed %u job(s), %u step(s) and %u reservation(s); %u job(s) kept",
		       st.jobs_removed, st.steps_removed, st.resv_removed, st.kept);
		/* records set aside by removers killed before they wrote them */
		if (st.records_written)
			printf("; %u pending accounting record(s) written", st.records_written);
		putchar('\n');
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(gc, cmd_gc, "remove stray jobs and steps whose owner is gone");
