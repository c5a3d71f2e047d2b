/* jobcg show: one job (metadata, steps) or one step (tasks, pids, state, accounting). */
#include <time.h>

#include "common.h"
#include "jobcg/jobgres.h"
#include "util.h"

/* cmd_list.c */
struct json_object *cli_job_json(const struct jobcg_job_info *i);
void cli_job_gres_json(struct jobcg_ctx *ctx, const struct jobcg_job_info *i,
		       struct json_object *o);
const char *cli_job_state(const struct jobcg_job_info *i);
const char *cli_state_word(bool orphaned, bool releasing, bool frozen, bool populated);
bool cli_step_orphaned(const struct jobcg_job_info *i, const char *step);
void cli_orphan_note(void);

static int show_step(struct jobcg_ctx *ctx, const struct jobcg_target *t, bool json)
{
	pid_t *pids = NULL;
	int *tasks = NULL;
	size_t np = 0, nt = 0;
	bool populated = false, frozen = false, orphaned = false, releasing = false;
	struct jobcg_job_info *ji = NULL;
	struct jobcg_acct acct;
	char *path = NULL, *gres = NULL, *job_gres = NULL, *cpus = NULL, *mem = NULL,
	     *skipped = NULL;
	uint64_t mem_bytes = 0;
	int r = 1;

	if ((r = jobcg_target_events(ctx, t, &populated, &frozen)) < 0 ||
	    (r = jobcg_task_list(ctx, t->job, t->step, &tasks, &nt)) < 0 ||
	    (r = jobcg_pids(ctx, t, &pids, &np)) < 0 || (r = jobcg_acct_read(ctx, t, &acct)) < 0 ||
	    (r = jobcg_target_path(ctx, t, &path)) < 0) {
		cli_print_error(r, NULL);
		r = 1; /* an exit code, never the errno */
		goto out;
	}
	if (jobcg_job_info_get(ctx, t->job, &ji) == 0) {
		orphaned = cli_step_orphaned(ji, t->step);
		releasing = ji->releasing; /* its release ends its steps */
		jobcg_job_info_free(ji);
	}
	/* A step without GPUs of its own shares every one of its job's (its job's grant bounds
	 * it): "none" would say its processes can open none. */
	if (jobcg_gres_get(ctx, t->job, t->step, &gres) < 0 || !*gres) {
		free(gres);
		gres = NULL;
		(void)jobcg_gres_get(ctx, t->job, NULL, &job_gres);
	}
	/* The step's own limits (jobcg run --job --cpus/--mem); absent: the job's. */
	(void)jobcg_step_xattr_get(ctx, t->job, t->step, "cpus", &cpus);
	(void)jobcg_step_xattr_get(ctx, t->job, t->step, "mem", &mem);
	(void)jobcg_step_xattr_get(ctx, t->job, t->step, "skipped", &skipped);
	/* jobcg wrote it as a number: anything else was edited or corrupted, and shown as
	 * unlimited or as its leading digits it would mislead. */
	if (mem && parse_u64(mem, UINT64_MAX, &mem_bytes) < 0) {
		r = cli_fail("%s: trusted.jobcg.mem '%s' is not a number", path, mem);
		goto out;
	}
	if (json) {
		struct json_object *o = json_object_new_object(), *ta = json_object_new_array(),
				   *pa = json_object_new_array();

		for (size_t i = 0; i < nt; i++)
			json_object_array_add(ta, tasks[i] == JOBCG_TASK_SPECIAL
						      ? json_object_new_string("special")
						      : json_object_new_int(tasks[i]));
		for (size_t i = 0; i < np; i++)
			json_object_array_add(pa, json_object_new_int(pids[i]));
		json_object_object_add(o, "job", json_object_new_uint64(t->job));
		json_object_object_add(o, "step", json_object_new_string(t->step));
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(
		    o, "state",
		    json_object_new_string(cli_state_word(orphaned, releasing, frozen, populated)));
		json_object_object_add(o, "populated", json_object_new_boolean(populated));
		json_object_object_add(o, "frozen", json_object_new_boolean(frozen));
		json_object_object_add(o, "orphaned", json_object_new_boolean(orphaned));
		/* The job's: its release ends its steps, and "state" says so. */
		json_object_object_add(o, "releasing", json_object_new_boolean(releasing));
		json_object_object_add(o, "tasks", ta);
		json_object_object_add(o, "pids", pa);
		/* null, as for cpus and mem: the job's */
		json_object_object_add(o, "gres", gres ? json_object_new_string(gres) : NULL);
		json_object_object_add(o, "cpus", cpus ? json_object_new_string(cpus) : NULL);
		json_object_object_add(o, "mem_bytes",
				       mem ? json_object_new_uint64(mem_bytes) : NULL);
		json_object_object_add(o, "skipped",
				       skipped ? json_object_new_string(skipped) : NULL);
		json_object_object_add(o, "acct", cli_json_acct(&acct));
		cli_json_print(stdout, o);
	} else {
		printf("step %u.%s\n  path: %s\n  state: %s\n  tasks:", t->job, t->step, path,
		       cli_state_word(orphaned, releasing, frozen, populated));
		for (size_t i = 0; i < nt; i++)
			if (tasks[i] == JOBCG_TASK_SPECIAL)
				printf(" special");
			else
				printf(" %d", tasks[i]);
		printf("\n  pids:");
		for (size_t i = 0; i < np; i++)
			printf(" %d", (int)pids[i]);
		if (gres)
			printf("\n  gres: %s", gres);
		else if (job_gres && *job_gres)
			printf("\n  gres: the job's (%s)", job_gres);
		else
			printf("\n  gres: none");
		printf("\n  cpus: %s", cpus ? cpus : "the job's");
		if (mem)
			printf("\n  mem: %s bytes", mem);
		else
			printf("\n  mem: the job's");
		if (skipped)
			printf("\n  skipped (best effort): %s", skipped);
		printf("\naccounting:\n");
		cli_print_acct(stdout, &acct);
		if (orphaned)
			cli_orphan_note();
	}
	r = 0;
out:
	free(pids);
	free(tasks);
	free(path);
	free(gres);
	free(job_gres);
	free(cpus);
	free(mem);
	free(skipped);
	return r;
}

static int show_job(struct jobcg_ctx *ctx, uint32_t job, bool json)
{
	struct jobcg_job_info *i = NULL;
	char *gres = NULL;
	int r;

	if ((r = jobcg_job_info_get(ctx, job, &i)) < 0) {
		cli_print_error(r, NULL);
		return 1;
	}
	if (json) {
		struct json_object *o = cli_job_json(i);

		/* gres and step_gres as list gives them: the same object for the same job. */
		cli_job_gres_json(ctx, i, o);
		cli_json_print(stdout, o);
	} else {
		bool orphans = i->orphaned;

		(void)jobcg_gres_get(ctx, job, NULL, &gres);
		printf("job %u\n  path: %s\n  state: %s\n", i->id, i->path, cli_job_state(i));
		if (i->have_owner)
			printf("  owner: %u:%u\n", (unsigned)i->uid, (unsigned)i->gid);
		if (i->created_sec) {
			time_t t = (time_t)i->created_sec;
			char created[32];
			struct tm tm;

			/* as jobcg list prints it */
			strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%S",
				 localtime_r(&t, &tm));
			printf("  created: %s\n", created);
		}
		printf("  ephemeral: %s\n", i->ephemeral ? "yes" : "no");
		printf("  cpus: %s\n", i->cpus ? i->cpus : "all");
		if (i->mem_bytes)
			printf("  mem: %llu bytes\n", (unsigned long long)i->mem_bytes);
		else
			printf("  mem: unlimited\n");
		if (i->pids_max)
			printf("  pids: %llu\n", (unsigned long long)i->pids_max);
		else
			printf("  pids: unlimited\n");
		for (char **s = i->skipped; s && *s; s++)
			printf("  not enforced (best effort): %s\n", *s);
		printf("  gres: %s\n", gres && *gres ? gres : "none");
		printf("  reservation: %s\n", i->reservation ? i->reservation : "none");
		printf("  steps:");
		for (char **s = i->steps; *s; s++) {
			bool o = cli_step_orphaned(i, *s);

			printf(" %s%s", *s, o ? "(orphaned)" : "");
			orphans |= o;
		}
		printf("\n");
		if (orphans)
			cli_orphan_note();
	}
	jobcg_job_info_free(i);
	free(gres);
	return 0;
}

static int cmd_show(int argc, char **argv, const struct cli_global *g)
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	if (cli_target_args(
		argc, argv, CLI_TARGET_JSON,
		"Usage: jobcg show [--json] JOB[.STEP]\n\n"
		"Show a job (owner, creation time, limits, steps) or a step (tasks, pids,\n"
		"state, its own --cpus/--mem if it has them, accounting).\n",
		&a, &r))
		return r;
	if (a.t.task != JOBCG_TASK_ALL)
		return cli_usage_error("show", "give JOB or JOB.STEP, not a task");
	if (geteuid() != 0)
		return cli_fail(
		    "show: needs root: the job's owner, state and GPUs are in trusted.* "
		    "extended attributes, which only root can read (a reading by "
		    "another user would show it orphaned)");
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	r = a.t.step[0] ? show_step(ctx, &a.t, a.json) : show_job(ctx, a.t.job, a.json);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(show, cmd_show, "show a job or a step");
