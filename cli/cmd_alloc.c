/* jobcg alloc: create a job (with its limits) that lives until 'jobcg release'. */
#include <getopt.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/jobgres.h"

static int cmd_alloc(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"cpus", required_argument, NULL, 'c'},
	    {"mem", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'p'},
	    {"cpu-weight", required_argument, NULL, 'W'},
	    {"best-effort", no_argument, NULL, 'B'},
	    {"json", no_argument, NULL, 'j'},
	    {"user", required_argument, NULL, 'u'},
	    {"uid", required_argument, NULL, 'u'},
	    {"gid", required_argument, NULL, 'g'},
	    {"gres", required_argument, NULL, 'G'},
	    {"reservation", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct cli_limits cl = {};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	uint32_t job;
	bool json = false;
	char *gres = NULL;
	gid_t uid_gid = 0;
	bool have_uid = false, have_gid = false;
	const char *uid_arg = NULL, *gid_arg = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int code;

		r = cli_limits_option("alloc", c, optarg, &cl, &code);
		if (r < 0)
			return code;
		if (r > 0)
			continue;
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'u':
			if ((r = cli_once("alloc", "--uid/--user", uid_arg, optarg)))
				return r;
			uid_arg = optarg;
			r = cli_lookup_user(optarg, &cl.l.uid, &uid_gid);
			if (r == -ENOENT || r == -EINVAL)
				return cli_usage_error("alloc", "--uid/--user '%s': no such user",
						       optarg);
			if (r < 0)
				return 1; /* getent could not answer: said why */
			have_uid = true;
			break;
		case 'g':
			if ((r = cli_once("alloc", "--gid", gid_arg, optarg)))
				return r;
			gid_arg = optarg;
			r = cli_lookup_group(optarg, &cl.l.gid);
			if (r == -ENOENT || r == -EINVAL)
				return cli_usage_error("alloc", "--gid '%s': no such group",
						       optarg);
			if (r < 0)
				return 1;
			have_gid = true;
			break;
		case 'h':
			printf(
			    "Usage: jobcg alloc JOB [--cpus LIST] [--mem SIZE] [--pids N] "
			    "[--gres gpu[:TYPE]:N[,...]]\n"
			    "                   [--cpu-weight W] [--uid USER] [--gid GROUP] "
			    "[--best-effort]\n"
			    "                   [--reservation NAME] [--json]\n\n"
			    "Create job JOB with its limits; it stays until 'jobcg release JOB'.\n"
			    "Limits this host cannot enforce are refused unless --best-effort.\n"
			    "--gres picks free devices of gres.conf (those whose Cores match "
			    "--cpus\n"
			    "first); with ConstrainDevices=yes the job can open only its own.\n"
			    "--uid (or --user) records USER (name or uid) as the job's owner, "
			    "whose\n"
			    "logins 'jobcg adopt' puts into the job, with the user's primary "
			    "group\n"
			    "unless --gid names one (default: the caller).\n"
			    "--reservation makes the job inside reservation NAME (jobcg resv): "
			    "its\n"
			    "owner must be one of its users; --gres draws from its devices "
			    "only.\n");
			return 0;
		default:
			return cli_option_error("alloc", argc, argv, "h");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("alloc", "need exactly one job id");
	if (jobcg_job_id_parse(argv[optind], &job) < 0)
		return cli_usage_error("alloc", "invalid job id '%s'", argv[optind]);
	if (have_uid || have_gid) {
		/* Recorded with the job's other metadata, before it is marked complete. */
		cl.l.have_owner = true;
		if (!have_uid)
			cl.l.uid = getuid();
		if (!have_gid)
			cl.l.gid = have_uid ? uid_gid : getgid();
	}
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (cli_limits_refuse(ctx, &cl, true)) {
		r = 1;
	} else if ((r = jobcg_job_create(ctx, job, &cl.l, 0, &job)) < 0) {
		cli_print_error(r, NULL);
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();
		char *path = NULL;
		struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};

		(void)jobcg_target_path(ctx, &t, &path);
		json_object_object_add(o, "job", json_object_new_uint64(job));
		json_object_object_add(o, "gres",
				       jobcg_gres_get(ctx, job, NULL, &gres) == 0 && *gres
					   ? json_object_new_string(gres)
					   : NULL);
		json_object_object_add(o, "path", json_object_new_string(path ? path : ""));
		cli_json_print(stdout, o);
		free(path);
		free(gres);
	} else {
		if (jobcg_gres_get(ctx, job, NULL, &gres) == 0 && *gres)
			printf("job %u allocated with %s\n", job, gres);
		else
			printf("job %u allocated\n", job);
		free(gres);
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(alloc, cmd_alloc, "create a job that lives until it is released");
