/* jobcg CLI: the phases of `jobcg run` (arguments, step begin, step end), whichever process
 * does them: `jobcg run` itself, or `jobcg daemon` for it. */
#include <getopt.h>

#include "run.h"
#include "jobcg/gres.h"
#include "jobcg/oom.h"

void run_usage(void)
{
	printf(
	    "Usage: jobcg run [--job ID] [--step ID] [--ntasks N] [--acct] [--json]\n"
	    "                 [--cpus LIST] [--mem SIZE] [--pids N] [--cpu-weight W] "
	    "[--best-effort]\n"
	    "                 [--no-clone3] [--daemon|--no-daemon] [--reservation NAME]\n"
	    "                 [--gres gpu[:TYPE]:N] [--gpu-bind "
	    "none|single:N|per_task:N|map_gpu:L]\n"
	    "                 -- CMD [ARGS...]\n\n"
	    "Run CMD as the tasks of a new step. Without --job (or when that job does not\n"
	    "exist yet) an ephemeral job is created for the step and removed afterwards; the\n"
	    "limits apply to that job. In an existing job, --cpus and --mem limit the step to\n"
	    "a part of the job's allocation (never more: refused before anything is made).\n"
	    "The exit status is the command's (highest of the tasks), 128+N when a task was\n"
	    "killed by signal N.\n\n"
	    "  --job ID        run in job ID (made by 'jobcg alloc', or ephemeral if absent)\n"
	    "  --step ID       step id: a number, batch, extern or interactive (default: next "
	    "number)\n"
	    "  -n, --ntasks N  start N copies as tasks 0..N-1 (default 1)\n"
	    "  --acct          print the step's accounting to stderr when it ends\n"
	    "  --json          accounting as JSON\n"
	    "  --cpus LIST     cpuset.cpus of the ephemeral job; in an existing job, of the step:\n"
	    "                  a subset of the job's CPUs (all the node's if it has no --cpus)\n"
	    "  --mem SIZE      memory.max of the ephemeral job (K, M, G, T suffixes); in an\n"
	    "                  existing job, of the step: at most the job's --mem\n"
	    "  --pids N        pids.max of the ephemeral job\n"
	    "  --cpu-weight W  cpu.weight of the ephemeral job (1..10000, default 100): its share\n"
	    "                  of contended CPUs against other jobs\n"
	    "  --best-effort   run even when a limit cannot be enforced on this host\n"
	    "  --no-clone3     start tasks with fork and migrate-before-exec\n"
	    "  --daemon        have 'jobcg daemon' do the cgroup work (on $JOBCG_DAEMON_SOCKET,\n"
	    "                  default " RUN_DAEMON_SOCKET_DEFAULT "); without it only when that\n"
	    "                  variable is set or cgroup.conf says RunViaDaemon=yes\n"
	    "  --no-daemon     do the cgroup work in this process, whatever the rest says\n"
	    "  --reservation NAME  make the new job inside reservation NAME (jobcg resv)\n"
	    "  --gres REQ      the step's devices, a subset of its job's (default: all of them,\n"
	    "                  shared); for a new job, the job's devices too\n"
	    "  --gpu-bind B    bind each task to its GPUs: none (default), single:N (N tasks\n"
	    "                  per GPU), per_task:N (N GPUs per task), map_gpu:LIST (GPU of the\n"
	    "                  step per task); with ConstrainDevices=yes tasks see only theirs\n"
	    "Every step's accounting is appended to the log read by 'jobcg acct'.\n");
}

int run_parse(int argc, char **argv, struct run_args *a, int *ret_exit)
{
	static const struct option opts[] = {
	    {"job", required_argument, NULL, 'J'},
	    {"step", required_argument, NULL, 'S'},
	    {"ntasks", required_argument, NULL, 'n'},
	    {"acct", no_argument, NULL, 'a'},
	    {"json", no_argument, NULL, 'j'},
	    {"cpus", required_argument, NULL, 'c'},
	    {"mem", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'p'},
	    {"best-effort", no_argument, NULL, 'B'},
	    {"no-clone3", no_argument, NULL, 'X'},
	    {"daemon", no_argument, NULL, 'd'},
	    {"no-daemon", no_argument, NULL, 'D'},
	    {"gres", required_argument, NULL, 'G'},
	    {"gpu-bind", required_argument, NULL, 'b'},
	    {"cpu-weight", required_argument, NULL, 'W'},
	    {"reservation", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *job_arg = NULL, *ntasks_arg = NULL;
	int c, r;

	*a = (struct run_args){.job = JOBCG_JOB_ID_AUTO, .ntasks = 1};
	optind = 1;
	while ((c = getopt_long(argc, argv, "+hn:", opts, NULL)) != -1) {
		r = cli_limits_option("run", c, optarg, &a->cl, ret_exit);
		if (r < 0)
			return 1;
		/* A reservation admits its users' jobs: the job is made by this process, as the
		 * caller, not by a daemon acting for it. */
		if (c == 'R')
			a->no_daemon = true;
		if (r > 0)
			continue;
		switch (c) {
		case 'J':
			if ((r = cli_once("run", "--job", job_arg, optarg)))
				return cli_answered(ret_exit, r);
			job_arg = optarg;
			if (jobcg_job_id_parse(optarg, &a->job) < 0)
				return cli_answered(
				    ret_exit,
				    cli_usage_error(
					"run", "--job '%s': need a number 1..4294967294", optarg));
			break;
		case 'S':
			if ((r = cli_once("run", "--step", a->step_arg, optarg)))
				return cli_answered(ret_exit, r);
			if (!jobcg_step_id_valid(optarg))
				return cli_answered(
				    ret_exit, cli_usage_error("run",
							      "--step '%s': need a number, batch, "
							      "extern or interactive",
							      optarg));
			a->step_arg = optarg;
			break;
		case 'n':
			if ((r = cli_once("run", "--ntasks", ntasks_arg, optarg)))
				return cli_answered(ret_exit, r);
			ntasks_arg = optarg;
			if (cli_parse_uint("--ntasks", optarg, JOBCG_TASK_MAX + 1, &a->ntasks) <
				0 ||
			    a->ntasks == 0)
				return cli_answered(
				    ret_exit, cli_usage_error("run", "--ntasks '%s': need 1..%d",
							      optarg, JOBCG_TASK_MAX + 1));
			break;
		case 'a':
			a->want_acct = true;
			break;
		case 'j':
			a->json = true;
			break;
		case 'X':
			a->no_clone3 = true;
			break;
		case 'd':
			a->daemon = true;
			break;
		case 'D':
			a->no_daemon = true;
			break;
		case 'b': {
			struct jobcg_gpu_bind b = {};

			if ((r = cli_once("run", "--gpu-bind", a->gpu_bind, optarg)))
				return cli_answered(ret_exit, r);
			/* Checked before anything is made: a bad value must not leave a job (or
			 * its accounting record) behind. */
			if ((r = jobcg_gpu_bind_parse(optarg, &b)) < 0)
				return cli_answered(
				    ret_exit, cli_usage_error("run", "%s", jobcg_error_message(r)));
			free(b.map);
			a->gpu_bind = optarg;
			break;
		}
		case 'h':
			run_usage();
			return cli_answered(ret_exit, 0);
		default:
			return cli_answered(ret_exit, cli_option_error("run", argc, argv, "+hn:"));
		}
	}
	if (optind >= argc)
		return cli_answered(
		    ret_exit, cli_usage_error(
				  "run", "no command given (jobcg run [OPTIONS] -- CMD ARGS...)"));
	a->cmd_index = optind;
	return 0;
}

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
		int k;

		if (ephemeral && (k = jobcg_job_remove(ctx, job, 0)) < 0)
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
	int exit_code = 1;

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
					    : exit_code == 0		? "COMPLETED"
									: "FAILED";
			/* An ephemeral job's record is its step's (removed below); OUT_OF_MEMORY
			 * when the job had OOM kills, unless it was cancelled. */
			const char *job_state = end.cancelled && ephemeral ? "CANCELLED"
						: end.job_oom		   ? "OUT_OF_MEMORY"
						: exit_code == 0	   ? "COMPLETED"
									   : "FAILED";

			json_object_object_add(o, "job", json_object_new_uint64(job));
			json_object_object_add(o, "step", json_object_new_string(step));
			json_object_object_add(o, "ntasks", json_object_new_uint64(s->life.ntasks));
			json_object_object_add(o, "exit_code", json_object_new_int(exit_code));
			json_object_object_add(o, "state", json_object_new_string(state));
			json_object_object_add(
			    o, "oom", json_object_new_string(jobcg_oom_cause_name(end.oom)));
			json_object_object_add(o, "job_state", json_object_new_string(job_state));
			json_object_object_add(o, "acct", cli_json_acct(&end.acct));
			cli_json_print(stderr, o);
		} else {
			fprintf(stderr, "step %u.%s: exit code %d, %u task(s)\n", job, step,
				exit_code, s->life.ntasks);
			cli_print_acct(stderr, &end.acct);
		}
	}
	/* A throwaway job's outcome is its one step's. */
	if (ephemeral && (r = jobcg_job_remove(ctx, job,
					       end.cancelled	? JOBCG_JOB_REMOVE_CANCELLED
					       : exit_code != 0 ? JOBCG_JOB_REMOVE_FAILED
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
