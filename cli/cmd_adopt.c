/* jobcg adopt: move a login session's process into a job (pam_slurm_adopt's job), by pid or from
 * PAM. */
#include <getopt.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/adopt.h"

static void usage(void)
{
	printf(
	    "Usage: jobcg adopt PID [--job JOB]\n"
	    "       jobcg adopt --pam\n\n"
	    "Move process PID into the extern step of a job (step_extern/user/task_special), so\n"
	    "that a login session is limited, accounted and killed with the job. Without --job\n"
	    "the newest job owned by PID's user is chosen; a user without a job is refused.\n\n"
	    "  --job JOB   adopt into this job\n"
	    "  --pam       called by pam_exec(8) in an account stack: the user is $PAM_USER and\n"
	    "              the process is our parent (the sshd handling the login). root is let\n"
	    "              through without adoption; any other user without a job is refused.\n\n"
	    "PAM: account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
}

static int cmd_adopt(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"job", required_argument, NULL, 'J'},
	    {"pam", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	uint32_t job = 0;
	bool pam = false;
	pid_t pid = 0;
	uid_t uid = (uid_t)-1;
	const char *who = NULL;
	int c, r, ret = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'J':
			if (jobcg_job_id_parse(optarg, &job) < 0)
				return cli_usage_error(
				    "adopt", "--job '%s': need a number 1..4294967294", optarg);
			break;
		case 'P':
			pam = true;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return cli_unknown_option("adopt");
		}
	}
	if (pam) {
		uid_t pw_uid;
		gid_t pw_gid;

		if (optind < argc)
			return cli_usage_error("adopt",
					       "--pam takes no PID (the process is our parent)");
		who = getenv("PAM_USER");
		if (!who || !*who)
			return cli_fail("adopt --pam: PAM_USER is not set (run from pam_exec)");
		/* A name only: PAM_USER "1000" is a user called so, not uid 1000. */
		r = cli_getent_user_name(who, &pw_uid, &pw_gid);
		if (r == -ENOENT)
			return cli_fail("adopt --pam: unknown user '%s'", who);
		if (r < 0)
			return 1;
		/* Administrators must be able to log in to a node without a job. */
		if (pw_uid == 0)
			return 0;
		uid = pw_uid;
		pid = getppid();
	} else {
		unsigned v;

		if (optind + 1 != argc)
			return cli_usage_error("adopt", "need exactly one PID");
		if (cli_parse_uint("PID", argv[optind], 4194304, &v) < 0 || v == 0)
			return cli_usage_error("adopt", "PID '%s': need a process id",
					       argv[optind]);
		pid = (pid_t)v;
	}
	r = cli_ctx_open(g, JOBCG_CTX_NO_CREATE_ROOT, &conf, &ctx);
	if (r)
		return r;
	if (uid == (uid_t)-1 && jobcg_pid_uid(pid, &uid) < 0) {
		cli_print_error("adopt");
		goto out;
	}
	if (job == 0 && jobcg_adopt_pick_job(ctx, uid, &job) < 0) {
		if (who)
			fprintf(stderr,
				"jobcg: adopt: user %s has no job on this node: access "
				"refused\n",
				who);
		else
			cli_print_error("adopt");
		goto out;
	}
	if (jobcg_adopt(ctx, pid, job) < 0) {
		cli_print_error("adopt");
		goto out;
	}
	printf("adopted pid %d into job %u (step extern)\n", (int)pid, job);
	ret = 0;
out:
	cli_ctx_close(conf, ctx);
	return ret;
}
CLI_COMMAND(adopt, cmd_adopt, "move a login session's process into a job (PAM)");
