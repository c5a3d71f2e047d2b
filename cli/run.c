/* jobcg CLI: the phases of `jobcg run` (step begin, step end; its arguments are read in
 * run_args.c), whichever process does them: `jobcg run` itself, or `jobcg daemon` for it. */
#include "run.h"
#include "jobcg/gres.h"
#include "jobcg/oom.h"

/* Whether existing job JOB lives inside reservation RESV (resv_<RESV>/job_<JOB>). */
static bool job_in_resv(struct jobcg_ctx *ctx, uint32_t job, const char *resv)
{
	struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};
	char *path = NULL, want[64];
	bool in;

	if (jobcg_target_path(ctx, &t, &path) < 0)
		return false;
	snprintf(want, sizeof(want), "/resv_%s/job_%u", resv, job);
	in = strlen(path) >= strlen(want) && !strcmp(path + strlen(path) - strlen(want), want);
	free(path);
	return in;
}

int run_begin(struct jobcg_ctx *ctx, const struct run_args *a, struct run_state *s, int *ret_exit)
{
	const struct cli_limits *cl = &a->cl;
	struct jobcg_step_limits sl = {
	    .cpus = cl->l.cpus, .mem_bytes = cl->l.mem_bytes, .best_effort = cl->l.best_effort};
	struct jobcg_step_request req = {.step_id = a->step_arg,
					 .gres = cl->l.gres,
					 .gpu_bind = a->gpu_bind,
					 .ntasks = a->ntasks};
	uint32_t job = a->job;
	bool ephemeral = false;
	int r, exit_code = 1;

	*s = (struct run_state){.want_acct = a->want_acct, .json = a->json};
	if (job != JOBCG_JOB_ID_AUTO) {
		struct jobcg_target jt = {.job = job, .task = JOBCG_TASK_ALL};

		/* Only whether the job exists: one read of its cgroup.events, not its record
		 * (a directory listing and nine xattrs) on every step. */
		r = jobcg_target_events(ctx, &jt, NULL, NULL);
		if (r == -ENOENT)
			ephemeral = true;
		else if (r < 0) {
			cli_print_error(r, NULL);
			return cli_answered(ret_exit, 1);
		} else if (cl->l.reservation && !job_in_resv(ctx, job, cl->l.reservation)) {
			fprintf(stderr,
				"jobcg: job %u exists outside reservation %s: --reservation only "
				"places a new job\n",
				job, cl->l.reservation);
			return cli_answered(ret_exit, 1);
		} else if (cl->l.pids_max || cl->l.cpu_weight) {
			fprintf(stderr,
				"jobcg: job %u exists: its limits were set by 'jobcg alloc'; "
				"--pids/--cpu-weight only apply to a new job (a step takes --cpus "
				"and --mem within its job's)\n",
				job);
			return cli_answered(ret_exit, 1);
		} else {
			/* The step's own --cpus/--mem: refused here, as for a job, when this host
			 * cannot enforce them. */
			req.limits = &sl;
			if (cli_limits_refuse(ctx, cl, false))
				return cli_answered(ret_exit, 1);
		}
	} else
		ephemeral = true;
	if (ephemeral) {
		if (cli_limits_refuse(ctx, cl, true))
			return cli_answered(ret_exit, 1);
		/* The limits are the new job's; its one step has all of them. */
		if ((r = jobcg_job_create(ctx, job, &cl->l, JOBCG_JOB_EPHEMERAL, &job)) < 0) {
			cli_print_error(r, "cannot create the job");
			return cli_answered(ret_exit, 1);
		}
	}
	r = jobcg_step_begin(ctx, job, &req, &s->life);
	if (r == -EINVAL)
		/* a step asking what its job cannot have is a usage error */
		exit_code = cli_usage_error("run", "%s", jobcg_error_message(r));
	else if (r < 0)
		cli_print_error(r, "cannot begin the step");
	if (r < 0) {
		/* The job made for this run goes again. After a usage error as if it had never
		 * been (no record: the command line was refused); otherwise its record says
		 * FAILED, since its step could not begin. */
		unsigned flags =
		    r == -EINVAL ? JOBCG_JOB_REMOVE_NO_RECORD : JOBCG_JOB_REMOVE_FAILED;
		int k;

		if (ephemeral && (k = jobcg_job_remove(ctx, job, flags)) < 0)
			cli_print_error(k, "cannot remove the job");
		return cli_answered(ret_exit, exit_code);
	}
	s->ephemeral = ephemeral;
	return 0;
}

int run_finish(struct jobcg_ctx *ctx, struct run_state *s, int r, const char *err_text,
	       const struct jobcg_run_result *res, bool runner_lost)
{
	struct jobcg_step_outcome end = {};
	struct jobcg_run_result never_ran = {0};
	uint32_t job = s->life.job;
	const char *step = s->life.step;
	bool ephemeral = s->ephemeral;
	int exit_code = 1, task_exit;

	if (runner_lost)
		res = NULL;
	else if (r < 0) {
		if (err_text)
			fprintf(stderr, "jobcg: %s\n", err_text);
		else
			cli_print_error(r, NULL);
		exit_code = r == -ENOENT ? 127 : r == -EACCES || r == -ENOEXEC ? 126 : 1;
		/* The command could not be started: the step still gets its record (FAILED, with
		 * the shell's exit code for it), as every step does. */
		never_ran.exit_code = exit_code;
		res = &never_ran;
	} else
		exit_code = res->exit_code;
	/* What the step's record and a throwaway job's say: how its command ended, whatever
	 * happens to its directories (our own exit status says that too). */
	task_exit = exit_code;
	/* Accounting, the record, the devices, the directories; failures of the first three are
	 * printed through the log callback as they happen. */
	r = jobcg_step_end(ctx, &s->life, res, runner_lost ? JOBCG_STEP_END_LOST : 0, &end);
	if (r < 0) {
		cli_print_error(r, "cannot remove the step");
		if (exit_code == 0)
			exit_code = 1;
	} else if (end.job_gone)
		ephemeral = false; /* released while it ran, which removed the job too */
	if (end.oom != JOBCG_OOM_NONE)
		fprintf(stderr, "jobcg: step %u.%s: OUT_OF_MEMORY: %llu process(es) killed by %s\n",
			job, step, (unsigned long long)end.acct.value[JOBCG_ACCT_OOM_KILL],
			end.oom == JOBCG_OOM_JOB ? "the job's memory limit"
						 : "a node-wide out-of-memory condition");
	if (s->want_acct && res && !end.have_acct && end.job_gone)
		fprintf(stderr, "jobcg: step %u.%s: no accounting: its job was released\n", job,
			step);
	if (s->want_acct && res && end.have_acct) {
		if (s->json) {
			struct json_object *o = json_object_new_object();
			/* As the step's record says: CANCELLED before OUT_OF_MEMORY, as there. */
			const char *state = end.cancelled		? "CANCELLED"
					    : end.oom != JOBCG_OOM_NONE ? "OUT_OF_MEMORY"
					    : task_exit == 0		? "COMPLETED"
									: "FAILED";
			/* An ephemeral job's record is its step's (removed below); OUT_OF_MEMORY
			 * when the job had OOM kills, unless it was cancelled. */
			const char *job_state = end.cancelled && ephemeral ? "CANCELLED"
						: end.job_oom		   ? "OUT_OF_MEMORY"
						: task_exit == 0	   ? "COMPLETED"
									   : "FAILED";

			json_object_object_add(o, "job", json_object_new_uint64(job));
			json_object_object_add(o, "step", json_object_new_string(step));
			json_object_object_add(o, "ntasks", json_object_new_uint64(s->life.ntasks));
			json_object_object_add(o, "exit_code", json_object_new_int(task_exit));
			json_object_object_add(o, "state", json_object_new_string(state));
			json_object_object_add(
			    o, "oom", json_object_new_string(jobcg_oom_cause_name(end.oom)));
			json_object_object_add(o, "job_state", json_object_new_string(job_state));
			json_object_object_add(o, "acct", cli_json_acct(&end.acct));
			cli_json_print(stderr, o);
		} else {
			fprintf(stderr, "step %u.%s: exit code %d, %u task(s)\n", job, step,
				task_exit, s->life.ntasks);
			cli_print_acct(stderr, &end.acct);
		}
	}
	/* A throwaway job's outcome is its one step's. */
	if (ephemeral && (r = jobcg_job_remove(ctx, job,
					       end.cancelled	? JOBCG_JOB_REMOVE_CANCELLED
					       : task_exit != 0 ? JOBCG_JOB_REMOVE_FAILED
								: 0)) < 0) {
		/* A live `jobcg release` of this job ended the step and removes the job itself,
		 * with its record: nothing went wrong here. */
		if (r == -EINPROGRESS) {
			jobcg_error_clear();
			return exit_code;
		}
		cli_print_error(r, "cannot remove the job");
		if (exit_code == 0)
			exit_code = 1;
	}
	return exit_code;
}

const char *run_daemon_socket(void)
{
	const char *e = jobcg_getenv("JOBCG_DAEMON_SOCKET");

	if (!e)
		return RUN_DAEMON_SOCKET_DEFAULT;
	return *e ? e : NULL;
}
