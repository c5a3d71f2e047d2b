/*
 * libFuzzer target: what `jobcg daemon` reads of a client, and a client of the daemon: op=run
 * (run_request_parse()), the `jobcg run` arguments it carries (run_parse(), also `jobcg run`'s
 * own parser), op=spawn (run_spawn_parse()) and op=status (run_status_parse()), all of
 * cli/run_args.c.
 *
 * The input is up to three messages (msg.h fields, each "key=value" and a NUL) separated by an
 * empty field (two NULs in a row): the request, then the daemon's op=spawn answer to it, then
 * the client's op=status report. An answer and a report are read against the arguments of the
 * request when they parsed, else against `jobcg run -- CMD`'s (one task, any job and step).
 * The parsers run one input after another in one process, as the daemon's do, each input's
 * fields freed after it: a parser that kept a pointer into an earlier request reads freed memory.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobcg/gres.h"
#include "msg.h"
#include "run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next message of the input: its bytes up to and with the NUL before an empty field (or
 * the end), *pos moved past that empty field. */
static void next_part(const uint8_t *data, size_t size, size_t *pos, size_t *ret_off,
		      size_t *ret_len)
{
	size_t i = *pos;

	*ret_off = i;
	while (i < size && !(data[i] == '\0' && i + 1 < size && data[i + 1] == '\0'))
		i++;
	if (i < size) {
		*ret_len = i + 1 - *ret_off;
		*pos = i + 2;
	} else {
		*ret_len = size - *ret_off;
		*pos = size;
	}
}

static int parse_part(const uint8_t *data, size_t size, size_t *pos, struct jobcg_msg *m)
{
	size_t off, len;

	if (*pos >= size)
		return -1;
	next_part(data, size, pos, &off, &len);
	return jobcg_msg_parse((const char *)data + off, len, m);
}

/* What run_parse() prints (--help, usage errors) goes nowhere; a sanitizer's report still
 * reaches the log, written to descriptor 2, not through stderr. */
static FILE *devnull(void)
{
	static FILE *f;

	if (!f && !(f = fopen("/dev/null", "we")))
		abort();
	return f;
}

static int quiet_run_parse(int argc, char **argv, struct run_args *a, int *ret_exit)
{
	FILE *out = stdout, *err = stderr;
	int r;

	opterr = 0; /* as in jobcg: cli_option_error() says it */
	stdout = stderr = devnull();
	r = run_parse(argc, argv, a, ret_exit);
	fflush(devnull());
	stdout = out;
	stderr = err;
	return r;
}

static bool env_name_jobcg_sets(const char *e)
{
	size_t len = strcspn(e, "=");

	if (!e[len])
		return false;
	for (const char *const *n = jobcg_gres_env_names; *n; n++)
		if (strlen(*n) == len && strncmp(*n, e, len) == 0)
			return true;
	return false;
}

/* A parsed argument list is one `jobcg run` can act on. */
static void check_args(int argc, char **argv, const struct run_args *a)
{
	if (a->cmd_index < 1 || a->cmd_index >= argc || !argv[a->cmd_index])
		abort();
	if (a->ntasks < 1 || a->ntasks > JOBCG_TASK_MAX + 1)
		abort();
	if (a->job == UINT32_MAX)
		abort();
	if (a->step_arg && !jobcg_step_id_valid(a->step_arg))
		abort();
	if (a->gpu_bind) {
		struct jobcg_gpu_bind b = {};

		if (jobcg_gpu_bind_parse(a->gpu_bind, &b) < 0)
			abort();
		jobcg_gpu_bind_done(&b);
	}
}

/* A spawn answer taken is one for the step asked for, with only variables jobcg sets. */
static void check_spawn(const struct run_args *a, const struct run_state *s, char ***env)
{
	if (s->life.job == 0 || s->life.job == UINT32_MAX ||
	    (a->job != JOBCG_JOB_ID_AUTO && s->life.job != a->job))
		abort();
	if (!jobcg_step_id_valid(s->life.step) ||
	    (a->step_arg && strcmp(s->life.step, a->step_arg)))
		abort();
	if (s->life.ntasks != a->ntasks)
		abort();
	for (unsigned t = 0; t < a->ntasks; t++)
		for (char **e = env[t]; e && *e; e++)
			if (!env_name_jobcg_sets(*e))
				abort();
}

/* A report taken has one wait status per task, each one a wait status can be. */
static void check_status(unsigned ntasks, const struct jobcg_run_result *res, int err)
{
	if (err) {
		if (err >= 0 || err < -4095)
			abort();
		return;
	}
	if (res->ntasks != ntasks || !res->task_status)
		abort();
	if (res->exit_code < 0 || res->exit_code > 255 || res->lost_signal < 0 ||
	    res->lost_signal > 64)
		abort();
	for (unsigned i = 0; i < ntasks; i++)
		if (res->task_status[i] < 0 || res->task_status[i] > 0xffff)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *dflt_argv[] = {"run", "--", "true", NULL};
	struct jobcg_msg req = {}, spawn = {}, status = {};
	struct run_args a = {};
	char **argv = NULL;
	size_t pos = 0;
	int argc = -1, code = -1;

	if (size > 65536)
		return 0;
	if (parse_part(data, size, &pos, &req) == 0) {
		struct cli_global g = {};
		mode_t mask = 01000;

		argc = run_request_parse(&req, &mask, &g, &argv);
		if (argc >= 0) {
			if (argc < 2 || !argv || strcmp(argv[0], "run") != 0 || argv[argc] ||
			    mask > 0777 || g.verbose < 0 || g.verbose > 16)
				abort();
			for (int i = 0; i < argc; i++)
				if (!argv[i])
					abort();
			if (quiet_run_parse(argc, argv, &a, &code) == 0)
				check_args(argc, argv, &a);
			else if (code < 0 || code > 2)
				abort();
			else
				argc = -1;
		}
	}
	if (argc < 0 && quiet_run_parse(3, dflt_argv, &a, &code) != 0)
		abort();

	if (parse_part(data, size, &pos, &spawn) == 0) {
		struct run_state s = {};
		char ***env = NULL, why[512] = "";
		int r = run_spawn_parse(&spawn, &a, &s, &env, why, sizeof(why));

		if (r == 0)
			check_spawn(&a, &s, env);
		else if (r == -EPERM && !why[0])
			abort();
		else if (r != -EPERM && r != -EPROTO && r != -ENOMEM)
			abort();
		run_task_env_free(env, a.ntasks);
	}

	if (parse_part(data, size, &pos, &status) == 0) {
		struct jobcg_run_result res = {};
		char err_text[2048] = "";
		int err = 1,
		    r = run_status_parse(&status, a.ntasks, &res, &err, err_text, sizeof(err_text));

		if (r == 0)
			check_status(a.ntasks, &res, err);
		else if (r != -EPROTO && r != -ENOMEM)
			abort();
		free(res.task_status);
	}

	free(argv);
	jobcg_msg_free(&req);
	jobcg_msg_free(&spawn);
	jobcg_msg_free(&status);
	return 0;
}
