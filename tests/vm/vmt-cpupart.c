/*
 * VM test helper: drive a reservation's kernel side (lib/src/resv/cpupart.c) directly, so the
 * in-guest suite can test partitions and memory.min on each kernel before and apart from the CLI.
 * Usage: vmt-cpupart [--config-dir DIR] CMD ARGS
 *   probe DIR                       prints "remote", "local" or "unsupported: <reason>"
 *   apply|verify|repair DIR CPUS [--isolated]
 *   release DIR CPUS
 *   mem-apply|mem-release|mem-verify DIR BYTES
 * verify and repair print the state (valid, partition, effective, missing, leaks, problem) and
 * exit 3 when the partition is degraded; any error prints the error record and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context_internal.h"
#include "cpupart.h"
#include "jobcg/config.h"
#include "log.h"
#include "util.h"

static void log_stderr(enum jobcg_log_level level, const char *msg, void *userdata)
{
	if (level <= JOBCG_LOG_INFO)
		fprintf(stderr, "log(%d): %s\n", (int)level, msg);
}

static int fail(const char *what)
{
	fprintf(stderr, "vmt-cpupart %s: %s\n", what, jobcg_last_error()->message);
	return 1;
}

static void show(const struct cpupart_state *s)
{
	printf("valid %d\npartition %s\neffective %s\nmissing %s\nleaks %s\nproblem %s\n", s->valid,
	       s->partition, s->effective, s->missing, s->leaks, s->problem ? s->problem : "");
}

int main(int argc, char **argv)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	const char *confdir = "/etc/jobcg", *cmd, *dir;
	bool isolated = false;
	int i = 1, r;

	jobcg_set_log(log_stderr, NULL, JOBCG_LOG_DEBUG);
	if (argc > 2 && streq(argv[1], "--config-dir")) {
		confdir = argv[2];
		i = 3;
	}
	if (argc - i < 2) {
		fprintf(stderr, "usage: vmt-cpupart [--config-dir DIR] CMD DIR [ARGS]\n");
		return 2;
	}
	cmd = argv[i];
	dir = argv[i + 1];
	if (argc - i > 3 && streq(argv[i + 3], "--isolated"))
		isolated = true;
	if (jobcg_config_load(confdir, NULL, 0, &conf) < 0 ||
	    jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx) < 0)
		return fail("context");

	if (streq(cmd, "probe")) {
		enum cpupart_kind kind;
		char *reason = NULL;

		if (cpupart_probe(ctx, dir, &kind, &reason) < 0)
			return fail(cmd);
		printf("%s%s%s\n",
		       kind == CPUPART_REMOTE  ? "remote"
		       : kind == CPUPART_LOCAL ? "local"
		       : kind == CPUPART_TREE  ? "tree"
					       : "unsupported",
		       reason ? ": " : "", reason ? reason : "");
		free(reason);
		return 0;
	}
	if (argc - i < 3) {
		fprintf(stderr, "vmt-cpupart %s: needs DIR and an argument\n", cmd);
		return 2;
	}
	const char *arg = argv[i + 2];
	uint64_t bytes = strtoull(arg, NULL, 10);

	if (streq(cmd, "apply"))
		r = cpupart_apply(ctx, dir, arg, isolated);
	else if (streq(cmd, "release"))
		r = cpupart_release(ctx, dir, arg);
	else if (streq(cmd, "verify") || streq(cmd, "repair")) {
		struct cpupart_state s = {0};

		r = streq(cmd, "verify") ? cpupart_verify(ctx, dir, arg, isolated, &s)
					 : cpupart_repair(ctx, dir, arg, isolated, &s);
		if (r < 0 && !s.partition)
			return fail(cmd);
		show(&s);
		r = s.valid ? 0 : 3;
		cpupart_state_clear(&s);
		return r;
	} else if (streq(cmd, "mem-apply"))
		r = memresv_apply(ctx, dir, bytes);
	else if (streq(cmd, "mem-release"))
		r = memresv_release(ctx, dir, bytes);
	else if (streq(cmd, "mem-verify")) {
		char *problem = NULL;

		if (memresv_verify(ctx, dir, bytes, &problem) < 0)
			return fail(cmd);
		printf("%s\n", problem ? problem : "ok");
		r = problem ? 3 : 0;
		free(problem);
		return r;
	} else {
		fprintf(stderr, "vmt-cpupart: unknown command '%s'\n", cmd);
		return 2;
	}
	if (r < 0)
		return fail(cmd);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return 0;
}
