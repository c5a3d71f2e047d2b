/* jobcg alloc: create a job (with its limits) that lives until 'jobcg release'. */
#include <getopt.h>
#include <pwd.h>

#include "common.h"

static int cmd_alloc(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"cpus", required_argument, NULL, 'c'},
	    {"mem", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'p'},
	    {"best-effort", no_argument, NULL, 'B'},
	    {"json", no_argument, NULL, 'j'},
	    {"user", required_argument, NULL, 'u'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct cli_limits cl = {};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	uint32_t job;
	bool json = false;
	const char *user = NULL;
	char owner[64] = "";
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		r = cli_limits_option("alloc", c, optarg, &cl);
		if (r < 0)
			return -r;
		if (r > 0)
			continue;
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'u':
			user = optarg;
			break;
		case 'h':
			printf(
			    "Usage: jobcg alloc JOB [--cpus LIST] [--mem SIZE] [--pids N] "
			    "[--user USER] [--best-effort] [--json]\n\n"
			    "Create job JOB with its limits; it stays until 'jobcg release JOB'.\n"
			    "Limits this host cannot enforce are refused unless --best-effort.\n"
			    "--user records USER (name or uid) as the job's owner, whose logins\n"
			    "'jobcg adopt' puts into the job (default: the caller).\n");
			return 0;
		default:
			return cli_usage_error("alloc", "unknown option");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("alloc", "need exactly one job id");
	if (jobcg_job_id_parse(argv[optind], &job) < 0)
		return cli_usage_error("alloc", "invalid job id '%s'", argv[optind]);
	if (user) {
		struct passwd *pw = getpwnam(user);
		char *end;
		unsigned long v = strtoul(user, &end, 10);

		if (!pw && *user && !*end && v < (uid_t)-1)
			pw = getpwuid((uid_t)v);
		if (!pw)
			return cli_usage_error("alloc", "--user '%s': no such user", user);
		snprintf(owner, sizeof(owner), "%u:%u", (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
	}
	r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r)
		return r;
	if (cli_limits_refuse(ctx, &cl)) {
		r = 1;
	} else if (jobcg_job_create(ctx, job, &cl.l, 0, &job) < 0) {
		cli_print_error(NULL);
		r = 1;
	} else if (*owner && jobcg_job_xattr_set(ctx, job, "owner", owner) < 0) {
		/* Nothing half made: a job with the wrong owner would adopt the wrong logins. */
		cli_print_error("cannot record the job's owner");
		(void)jobcg_job_remove(ctx, job, 0);
		r = 1;
	} else if (json) {
		struct json_object *o = json_object_new_object();
		char *path = NULL;
		struct jobcg_target t = {.job = job, .task = JOBCG_TASK_ALL};

		(void)jobcg_target_path(ctx, &t, &path);
		json_object_object_add(o, "job", json_object_new_uint64(job));
		json_object_object_add(o, "path", json_object_new_string(path ? path : ""));
		cli_json_print(stdout, o);
		free(path);
	} else
		printf("job %u allocated\n", job);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(alloc, cmd_alloc, "create a job that lives until it is released");
