/* jobcg list: the jobs under the tree root, with their steps and recorded limits. */
#include <getopt.h>
#include <stdarg.h>
#include <time.h>

#include "common.h"
#include "jobcg/jobgres.h"

static struct json_object *strv_json(char **v)
{
	struct json_object *a = json_object_new_array();

	for (; v && *v; v++)
		json_object_array_add(a, json_object_new_string(*v));
	return a;
}

/* GPUs of a job and of each of its steps (node-wide indices), added to its JSON object. Also
 * used by cmd_show.c, so that `show --json JOB` is the job's entry in `list --json`. */
void cli_job_gres_json(struct jobcg_ctx *ctx, const struct jobcg_job_info *i,
		       struct json_object *o);
void cli_job_gres_json(struct jobcg_ctx *ctx, const struct jobcg_job_info *i, struct json_object *o)
{
	struct json_object *steps = json_object_new_object();
	char *g = NULL;

	/* null for none, as acct's gres and the other limits here */
	json_object_object_add(
	    o, "gres",
	    jobcg_gres_get(ctx, i->id, NULL, &g) == 0 && *g ? json_object_new_string(g) : NULL);
	free(g);
	for (char **s = i->steps; *s; s++) {
		g = NULL;
		if (jobcg_gres_get(ctx, i->id, *s, &g) == 0)
			json_object_object_add(steps, *s, *g ? json_object_new_string(g) : NULL);
		free(g);
	}
	json_object_object_add(o, "step_gres", steps);
}

/* Also used by cmd_show.c for jobs and steps alike, so that one state has one word in list,
 * show and their JSON: "orphaned" before "running" (its processes run, nobody waits). */
const char *cli_state_word(bool orphaned, bool releasing, bool frozen, bool populated);
const char *cli_state_word(bool orphaned, bool releasing, bool frozen, bool populated)
{
	return orphaned	   ? "orphaned"
	       : releasing ? "releasing"
	       : frozen	   ? "frozen"
	       : populated ? "running"
			   : "idle";
}

/* Also used by cmd_show.c. */
const char *cli_job_state(const struct jobcg_job_info *i);
const char *cli_job_state(const struct jobcg_job_info *i)
{
	return cli_state_word(i->orphaned, i->releasing, i->frozen, i->populated);
}

/* Also used by cmd_show.c. */
struct json_object *cli_job_json(const struct jobcg_job_info *i);
struct json_object *cli_job_json(const struct jobcg_job_info *i)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "job", json_object_new_uint64(i->id));
	json_object_object_add(o, "path", json_object_new_string(i->path));
	json_object_object_add(o, "uid", i->have_owner ? json_object_new_int64(i->uid) : NULL);
	json_object_object_add(o, "gid", i->have_owner ? json_object_new_int64(i->gid) : NULL);
	json_object_object_add(o, "created",
			       i->created_sec ? json_object_new_uint64(i->created_sec) : NULL);
	json_object_object_add(o, "ephemeral", json_object_new_boolean(i->ephemeral));
	json_object_object_add(o, "runner", i->runner ? json_object_new_int(i->runner) : NULL);
	json_object_object_add(o, "reservation",
			       i->reservation ? json_object_new_string(i->reservation) : NULL);
	json_object_object_add(o, "cpus", i->cpus ? json_object_new_string(i->cpus) : NULL);
	json_object_object_add(o, "mem_bytes",
			       i->mem_bytes ? json_object_new_uint64(i->mem_bytes) : NULL);
	json_object_object_add(o, "pids_max",
			       i->pids_max ? json_object_new_uint64(i->pids_max) : NULL);
	json_object_object_add(o, "best_effort", json_object_new_boolean(i->best_effort));
	json_object_object_add(o, "skipped_limits", strv_json(i->skipped));
	json_object_object_add(o, "steps", strv_json(i->steps));
	json_object_object_add(o, "state", json_object_new_string(cli_job_state(i)));
	json_object_object_add(o, "populated", json_object_new_boolean(i->populated));
	json_object_object_add(o, "frozen", json_object_new_boolean(i->frozen));
	json_object_object_add(o, "orphaned", json_object_new_boolean(i->orphaned));
	json_object_object_add(o, "releasing", json_object_new_boolean(i->releasing));
	json_object_object_add(o, "orphaned_steps", strv_json(i->orphaned_steps));
	return o;
}

/* Also used by cmd_show.c. */
bool cli_step_orphaned(const struct jobcg_job_info *i, const char *step);
bool cli_step_orphaned(const struct jobcg_job_info *i, const char *step)
{
	for (char **s = i->orphaned_steps; s && *s; s++)
		if (strcmp(*s, step) == 0)
			return true;
	return false;
}

/* Also used by cmd_show.c: what an orphaned job or step is and what cleans it up. */
void cli_orphan_note(void);
void cli_orphan_note(void)
{
	fprintf(stderr, "orphaned: the jobcg process that owned it is gone; 'jobcg gc' ends what "
			"is left in it and writes its accounting record\n");
}

/* Append one limit to @buf, a blank before it unless it is the first. */
static void limit_add(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void limit_add(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len && len + 1 < size)
		buf[len++] = ' ', buf[len] = '\0';
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

static int cmd_list(int argc, char **argv, const struct cli_global *g)
{
	static const unsigned min_widths[] = {10, 9, 9, 20, 10, 0};
	struct cli_table tab;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct json_object *arr = NULL;
	uint32_t *ids = NULL;
	size_t n = 0;
	bool json = false, orphans = false;
	int r;

	cli_table_init(&tab, 6, min_widths);
	if (cli_json_only_args(argc, argv, "list",
			       "Usage: jobcg list [--json]\n\nList the jobs, their steps, owner, "
			       "creation time, limits and GPUs\n"
			       "(node-wide indices; --json also gives each step's).\n",
			       &json, &r))
		return r;
	/* Another user would see every job "orphaned" with no owner and no GPUs, and be told
	 * to gc them: what cannot be read is not reported as fact. */
	if (geteuid() != 0)
		return cli_fail("list: needs root: the jobs' owners, states and GPUs are in "
				"trusted.* extended attributes, which only root can read (a "
				"reading by another user would show every job orphaned)");
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	if ((r = jobcg_job_list(ctx, &ids, &n)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
		goto out;
	}
	if (json)
		arr = json_object_new_array();
	else
		cli_table_add(&tab, (const char *const[]){"JOB", "STATE", "OWNER", "CREATED",
							  "STEPS", "LIMITS"});
	for (size_t k = 0; k < n; k++) {
		struct jobcg_job_info *i = NULL;
		char id[16], created[32] = "-", owner[24] = "-", steps[256] = "", limits[160] = "",
			     mem[32], *gres = NULL;

		if (jobcg_job_info_get(ctx, ids[k], &i) < 0)
			continue; /* removed meanwhile */
		if (json) {
			struct json_object *o = cli_job_json(i);

			cli_job_gres_json(ctx, i, o);
			json_object_array_add(arr, o);
			jobcg_job_info_free(i);
			continue;
		}
		if (i->created_sec) {
			time_t t = (time_t)i->created_sec;
			struct tm tm;

			strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%S",
				 localtime_r(&t, &tm));
		}
		if (i->have_owner)
			snprintf(owner, sizeof(owner), "%u:%u", (unsigned)i->uid, (unsigned)i->gid);
		for (char **s = i->steps; *s; s++) {
			char *sg = NULL;

			strncat(steps, s == i->steps ? "" : ",", sizeof(steps) - strlen(steps) - 1);
			strncat(steps, *s, sizeof(steps) - strlen(steps) - 1);
			if (cli_step_orphaned(i, *s)) {
				strncat(steps, "(orphaned)", sizeof(steps) - strlen(steps) - 1);
				orphans = true;
			}
			/* A step's own GPUs, as "0[gpu:1]". */
			if (jobcg_gres_get(ctx, i->id, *s, &sg) == 0 && *sg)
				snprintf(steps + strlen(steps), sizeof(steps) - strlen(steps),
					 "[%s]", sg);
			free(sg);
		}
		/* Each limit as the option that gives it ("mem=512K", not a rounded "0M"), one
		 * blank between them. */
		if (i->cpus)
			limit_add(limits, sizeof(limits), "cpus=%s", i->cpus);
		if (i->mem_bytes) {
			cli_format_size(i->mem_bytes, mem, sizeof(mem));
			limit_add(limits, sizeof(limits), "mem=%s", mem);
		}
		if (i->pids_max)
			limit_add(limits, sizeof(limits), "pids=%llu",
				  (unsigned long long)i->pids_max);
		if (jobcg_gres_get(ctx, i->id, NULL, &gres) == 0 && *gres)
			limit_add(limits, sizeof(limits), "gres=%s", gres);
		free(gres);
		if (i->reservation)
			limit_add(limits, sizeof(limits), "resv=%s", i->reservation);
		if (i->ephemeral)
			limit_add(limits, sizeof(limits), "%s",
				  limits[0] ? "(ephemeral)" : "- (ephemeral)");
		snprintf(id, sizeof(id), "%u", i->id);
		cli_table_add(&tab, (const char *const[]){id, cli_job_state(i), owner, created,
							  steps[0] ? steps : "-",
							  limits[0] ? limits : "-"});
		orphans |= i->orphaned;
		jobcg_job_info_free(i);
	}
	if (!json)
		cli_table_print(&tab, stdout);
	if (json)
		cli_json_print(stdout, arr);
	else if (orphans)
		cli_orphan_note();
out:
	free(ids);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(list, cmd_list, "list jobs");
