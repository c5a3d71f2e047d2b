/*
 * jobcg step-watch: internal. Waits for a step's runner to exit and, if it died without ending
 * its step, ends the step as lost (jobcg_step_reap()) and, asked to, removes its job once no
 * step is left. jobcg_spank.so starts one per Slurm step, detached, as the backstop for a
 * killed slurmstepd (docs/slurm.md); its output goes nowhere, so it reports to syslog.
 */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <syslog.h>
#include <unistd.h>

#include "common.h"

static void log_to_syslog(enum jobcg_log_level level, const char *msg, void *userdata)
{
	(void)userdata;
	syslog(level <= JOBCG_LOG_ERR	    ? LOG_ERR
	       : level <= JOBCG_LOG_WARNING ? LOG_WARNING
	       : level <= JOBCG_LOG_NOTICE  ? LOG_NOTICE
					    : LOG_INFO,
	       "%s", msg);
}

/*
 * Is the job of the step directory @step_dir (its parent) there with no step_* left in it? A
 * job whose last step's runner died before removing it: worth loading the configuration for.
 */
static bool job_left_idle(const char *step_dir)
{
	const char *slash = strrchr(step_dir, '/');
	char jdir[PATH_MAX];
	struct dirent *e;
	bool idle = true;
	DIR *d;

	if (!slash || slash == step_dir || (size_t)(slash - step_dir) >= sizeof(jdir))
		return false;
	memcpy(jdir, step_dir, (size_t)(slash - step_dir));
	jdir[slash - step_dir] = 0;
	if (!(d = opendir(jdir)))
		return false; /* gone: the common case */
	while (idle && (e = readdir(d)))
		if (strncmp(e->d_name, "step_", 5) == 0)
			idle = false;
	closedir(d);
	return idle;
}

static void step_watch_help(FILE *f)
{
	fprintf(
	    f, "Usage: jobcg step-watch [--node NAME] [--step-dir DIR] [--remove-idle-job]\n"
	       "                        [--ready-fd FD] JOB.STEP PID:STARTTIME\n\n"
	       "Internal: wait until the step's runner (PID:STARTTIME, as the step records it)\n"
	       "exits; if the step is still there, its runner died without ending it: kill what\n"
	       "is left, revoke its devices, record it NODE_FAIL and remove it, as 'jobcg gc'\n"
	       "would. jobcg_spank.so runs this for every Slurm step; you never need to.\n"
	       "  --node NAME        the node name for gres.conf's NodeName= lines\n"
	       "  --step-dir DIR     the step's cgroup: when it is gone the runner ended the step\n"
	       "                     and nothing is loaded\n"
	       "  --remove-idle-job  then remove the job if no step is left in it (no job record;\n"
	       "                     only a job jobcg_spank.so made), also when the runner ended\n"
	       "                     its step but died before removing the job\n"
	       "  --ready-fd FD      write one byte to FD, and close it, once watching\n");
}

static int cmd_step_watch(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"node", required_argument, NULL, 'n'},
	    {"step-dir", required_argument, NULL, 'd'},
	    {"remove-idle-job", no_argument, NULL, 'r'},
	    {"ready-fd", required_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *node = NULL, *step_dir = NULL, *runner, *fd_arg = NULL;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_target t = {};
	bool remove_job = false, reaped = false, step_gone;
	int ready_fd = -1;
	unsigned fd = 0;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
		case 'd':
			if ((r = cli_once("step-watch", c == 'n' ? "--node" : "--step-dir",
					  c == 'n' ? node : step_dir, optarg)))
				return r;
			/* an empty --step-dir would be "gone", and the step taken for ended */
			if (!*optarg)
				return cli_usage_error("step-watch", "%s: empty value",
						       c == 'n' ? "--node" : "--step-dir");
			*(c == 'n' ? &node : &step_dir) = optarg;
			break;
		case 'r':
			remove_job = true;
			break;
		case 'f':
			if ((r = cli_once("step-watch", "--ready-fd", fd_arg, optarg)))
				return r;
			fd_arg = optarg;
			if (cli_parse_uint("--ready-fd", optarg, INT_MAX, &fd) < 0 || fd < 3 ||
			    fcntl((int)fd, F_GETFD) < 0)
				return cli_usage_error(
				    "step-watch", "--ready-fd %s: not an open descriptor above 2",
				    optarg);
			ready_fd = (int)fd;
			break;
		case 'h':
			step_watch_help(stdout);
			return 0;
		default:
			return cli_option_error("step-watch", argc, argv, "h");
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("step-watch", "need JOB.STEP and PID:STARTTIME");
	r = jobcg_target_parse(argv[optind], &t);
	if (r < 0 || !t.step[0] || t.task != JOBCG_TASK_ALL)
		return cli_usage_error("step-watch", "'%s': need JOB.STEP", argv[optind]);
	runner = argv[optind + 1];
	/* Ready once the runner is known to parse: it is watched from here on (its pid and
	 * start time name it, so a later reuse of its pid is told apart). Gone already is
	 * ready too: the step is looked at right away. Written before anything else, it costs
	 * slurmstepd, which waits for it, only the exec and this. */
	r = jobcg_runner_wait(runner, 0);
	if (r == -ETIMEDOUT)
		r = 0;
	if (r >= 0 && ready_fd >= 0) {
		(void)!write(ready_fd, "1", 1);
		close(ready_fd);
	}
	if (r >= 0)
		r = jobcg_runner_wait(runner, -1);
	if (r < 0) {
		cli_print_error(r, "step-watch");
		return 2;
	}
	/*
	 * The common case, every step that ended normally: its runner removed it, and its job
	 * too when it was the last step, or another step keeps the job. Otherwise (the runner
	 * died after its step's removal and before the job's, or after making the job and
	 * before the step: the watcher starts first) a job of no step is left, holding its
	 * devices, and is removed here. Read without loading anything: the job's directory.
	 */
	step_gone = step_dir && access(step_dir, F_OK) < 0 && errno == ENOENT;
	if (step_gone && (!remove_job || !job_left_idle(step_dir)))
		return 0;
	openlog("jobcg-step-watch", LOG_PID, LOG_DAEMON);
	jobcg_set_log(log_to_syslog, NULL, JOBCG_LOG_INFO);
	/* It only ends a step and its job: an error in gres.conf or cgroup.conf must not leave them
	 * behind. */
	r = jobcg_config_load(g->config_dir, node, JOBCG_CONFIG_NO_ENTRIES | CLI_CONFIG_TOLERATE,
			      &conf);
	if (r >= 0)
		r = jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx);
	if (r >= 0 && !step_gone)
		r = jobcg_step_reap(ctx, t.job, t.step, runner, &reaped);
	if (r >= 0 && !step_gone && !reaped) {
		/* A step of no runner: its creation died half way, before recording the runner.
		 * Only this runner makes this step of this job (one slurmstepd per Slurm step),
		 * and it is gone: the step is a leftover of it. */
		char *have = NULL;

		if (jobcg_step_xattr_get(ctx, t.job, t.step, "runner", &have) == -ENODATA) {
			r = jobcg_step_remove(ctx, t.job, t.step, 0);
			if (r >= 0)
				syslog(LOG_WARNING,
				       "step %u.%s: its runner %s died while making it: removed",
				       t.job, t.step, runner);
			step_gone = r >= 0 || r == -ENOENT;
			if (r == -ENOENT)
				r = 0;
		}
		free(have);
	}
	if (r >= 0 && reaped)
		syslog(LOG_WARNING,
		       "step %u.%s: its runner %s died without ending it: its processes killed, "
		       "its devices revoked, recorded NODE_FAIL, removed",
		       t.job, t.step, runner);
	if (r >= 0 && remove_job && (reaped || step_gone)) {
		/* Under the node lock, as the plugin's own removal: a step of the job that
		 * starts meanwhile either keeps it or finds it gone and makes it again. Only
		 * a job the plugin made: never an allocation of jobcg's own. */
		r = jobcg_job_remove(ctx, t.job,
				     JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD |
					 JOBCG_JOB_REMOVE_IF_SLURM);
		if (r == 0)
			syslog(LOG_NOTICE, "job %u removed: no step left in it%s", t.job,
			       reaped ? "" : " (its runner died before removing it)");
		else if (r == -EBUSY || r == -ENOENT || r == -EINPROGRESS || r == -EPERM)
			r = 0; /* other steps keep it, it is gone already, or not the plugin's */
	}
	if (r < 0) {
		char buf[1024];

		syslog(LOG_ERR, "step %u.%s: %s", t.job, t.step,
		       jobcg_error_format(r, buf, sizeof(buf)));
		cli_print_error(r, "step-watch");
	}
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return r < 0 ? 1 : 0;
}
/* The command name has a dash, which clang-format would space out. */
/* clang-format off */
CLI_COMMAND(step-watch, cmd_step_watch, "internal: end a step whose runner died (jobcg_spank.so)");
/* clang-format on */
