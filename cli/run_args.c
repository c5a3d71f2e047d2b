/*
 * jobcg CLI: what `jobcg run` and `jobcg daemon` read from outside, as data only: `jobcg run`'s
 * arguments (its own, or those a client sends the daemon) and the daemon's messages (op=run,
 * op=spawn, op=status). Nothing here touches the host (no cgroup, socket or context), so that
 * tests/fuzz/fuzz-runargs.c can feed it.
 */
#include <getopt.h>

#include "jobcg/gres.h"
#include "msg.h"
#include "run.h"
#include "util.h"

static bool field_is(const struct jobcg_msg *m, const char *key, const char *value)
{
	const char *v = jobcg_msg_get(m, key);

	return v && strcmp(v, value) == 0;
}

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
	/* 0, not 1: getopt starts afresh. The daemon parses one client's arguments after
	 * another, and a list left in the middle of "-hn5" or "-xq" (--help, an unknown letter)
	 * left getopt on its next letter, in memory freed with that client's request: the next
	 * client's list was read from it, and refused or misread. */
	optind = 0;
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

int run_request_parse(const struct jobcg_msg *req, mode_t *ret_umask, struct cli_global *ret_g,
		      char ***ret_argv)
{
	uint64_t u;
	size_t pos = 0;
	int argc = 0;
	const char *v;
	char **argv;

	if (!field_is(req, "op", "run") || jobcg_msg_get_u64(req, "v", 1000, &u) < 0 ||
	    u != RUN_PROTOCOL_VERSION)
		return -EPROTO;
	if (jobcg_msg_get_u64(req, "umask", 0777, &u) < 0)
		return -EPROTO;
	*ret_umask = (mode_t)u;
	if (jobcg_msg_get_u64(req, "verbose", 16, &u) < 0)
		return -EPROTO;
	*ret_g = (struct cli_global){
	    .prog = "jobcg", .verbose = (int)u, .config_dir = jobcg_msg_get(req, "config_dir")};
	while ((v = jobcg_msg_next(req, "env", &pos)))
		if (strncmp(v, "JOBCG_", 6) != 0 || !strchr(v, '=') || v[6] == '=')
			return -EPROTO;
	pos = 0;
	while (jobcg_msg_next(req, "arg", &pos))
		argc++;
	if (argc < 2 || !field_is(req, "arg", "run"))
		return -EPROTO;
	argv = calloc((size_t)argc + 1, sizeof(char *));
	if (!argv)
		return -ENOMEM;
	pos = 0;
	for (int i = 0; (v = jobcg_msg_next(req, "arg", &pos)); i++)
		argv[i] = (char *)v;
	*ret_argv = argv;
	return argc;
}

/* A task's variable that jobcg itself sets (the devices' environment): nothing else may come
 * from the daemon, LD_PRELOAD and PATH least of all. */
static bool task_env_allowed(const char *name, size_t len)
{
	for (const char *const *n = jobcg_gres_env_names; *n; n++)
		if (strlen(*n) == len && strncmp(*n, name, len) == 0)
			return true;
	return false;
}

int run_spawn_parse(const struct jobcg_msg *m, const struct run_args *a, struct run_state *s,
		    char ****ret_env, char *why, size_t size)
{
	uint64_t job, ntasks, eph, start, oom;
	const char *step = jobcg_msg_get(m, "step"), *v;
	char ***env;
	size_t pos = 0;

	if (jobcg_msg_get_u64(m, "job", UINT32_MAX - 1, &job) < 0 || job == 0 || !step ||
	    !jobcg_step_id_valid(step) || strlen(step) >= sizeof(s->life.step) ||
	    (a->job != JOBCG_JOB_ID_AUTO && job != a->job) ||
	    (a->step_arg && strcmp(step, a->step_arg) != 0) ||
	    jobcg_msg_get_u64(m, "ntasks", UINT32_MAX, &ntasks) < 0 || ntasks != a->ntasks ||
	    jobcg_msg_get_u64(m, "ephemeral", 1, &eph) < 0 ||
	    jobcg_msg_get_u64(m, "start_usec", UINT64_MAX, &start) < 0)
		return -EPROTO;
	*s = (struct run_state){
	    .life = {.job = (uint32_t)job, .ntasks = a->ntasks, .start_usec = start},
	    .ephemeral = eph,
	    .want_acct = a->want_acct,
	    .json = a->json};
	memcpy(s->life.step, step, strlen(step) + 1); /* its length is checked above */
	if (jobcg_msg_get_u64(m, "oom_before", UINT64_MAX, &oom) == 0) {
		s->life.job_before.value[JOBCG_ACCT_OOM] = oom;
		s->life.job_before.have |= 1u << JOBCG_ACCT_OOM;
	}
	env = calloc(a->ntasks, sizeof(char **));
	if (!env)
		return -ENOMEM;
	*ret_env = env;
	while ((v = jobcg_msg_next(m, "env", &pos))) {
		const char *end, *eq;
		char **l;
		uint64_t t;
		size_t n = 0;

		if (parse_u64_prefix(v, UINT64_MAX, &t, &end) < 0 || *end != ':' ||
		    t >= a->ntasks || !(eq = strchr(end + 1, '=')))
			return -EPROTO;
		if (!task_env_allowed(end + 1, (size_t)(eq - end - 1))) {
			snprintf(why, size, "it would set %.*s in task %llu's environment",
				 (int)(eq - end - 1 > 64 ? 64 : eq - end - 1), end + 1,
				 (unsigned long long)t);
			return -EPERM;
		}
		for (l = env[t]; l && l[n]; n++)
			;
		l = realloc(env[t], (n + 2) * sizeof(char *));
		if (!l)
			return -ENOMEM;
		env[t] = l;
		if (!(l[n] = strdup(end + 1)))
			return -ENOMEM;
		l[n + 1] = NULL;
	}
	return 0;
}

void run_task_env_free(char ***env, unsigned n)
{
	for (unsigned t = 0; env && t < n; t++) {
		for (char **e = env[t]; e && *e; e++)
			free(*e);
		free(env[t]);
	}
	free(env);
}

int run_status_parse(const struct jobcg_msg *m, unsigned ntasks, struct jobcg_run_result *res,
		     int *ret_err, char *err_text, size_t size)
{
	uint64_t v;
	const char *st;
	size_t pos = 0;
	unsigned n = 0;

	if (!field_is(m, "op", "status"))
		return -EPROTO;
	if (jobcg_msg_get_u64(m, "error", 4095, &v) == 0) {
		const char *msg = jobcg_msg_get(m, "message");

		if (v == 0)
			return -EPROTO;
		*ret_err = -(int)v;
		snprintf(err_text, size, "%s", msg ? msg : strerror((int)v));
		return 0;
	}
	if (jobcg_msg_get_u64(m, "exit_code", 255, &v) < 0)
		return -EPROTO;
	res->exit_code = (int)v;
	if (jobcg_msg_get_u64(m, "lost_signal", 64, &v) < 0)
		return -EPROTO;
	res->lost_signal = (int)v;
	res->task_status = calloc(ntasks, sizeof(int));
	if (!res->task_status)
		return -ENOMEM;
	while ((st = jobcg_msg_next(m, "status", &pos))) {
		unsigned w;

		/* a wait status: exit code << 8, or the signal number */
		if (n >= ntasks || cli_parse_uint("status", st, 0xffff, &w) < 0)
			return -EPROTO;
		res->task_status[n++] = (int)w;
	}
	if (n != ntasks)
		return -EPROTO;
	res->ntasks = ntasks;
	*ret_err = 0;
	return 0;
}
