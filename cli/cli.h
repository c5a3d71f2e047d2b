/* jobcg CLI: the subcommand registry and the helpers every subcommand shares. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "jobcg/config.h"
#include "jobcg/error.h"

struct cli_global {
	const char *config_dir; /* --config-dir, or NULL */
	int verbose;		/* -v count */
	const char *prog;	/* argv[0] basename */
};

struct cli_command {
	const char *name;
	/* argv[0] is the subcommand name; global options are already removed. Returns exit code. */
	int (*run)(int argc, char **argv, const struct cli_global *g);
	const char *summary;
};

/* Register a subcommand from its own file: CLI_COMMAND(run, cmd_run, "run a step"). */
#define CLI_COMMAND(cname, fn, text)                                                               \
	static const struct cli_command cli_cmd_##fn                                               \
	    __attribute__((used, section("jobcg_cmds"), aligned(sizeof(void *)))) = {              \
		.name = #cname, .run = fn, .summary = text}

/* Log library messages to stderr: notices and above, -v info, -vv debug. */
void cli_set_verbosity(int verbose);
/* Print "jobcg: " + the library error @r, the negative errno a call returned, to stderr: the
 * error record (file:line:col: message) when it explains @r, else strerror(); the record is
 * cleared afterwards. */
void cli_print_error(int r, const char *what);
/* printf-style error to stderr, prefixed "jobcg: ". Returns 1 (for `return cli_fail(...)`). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Usage error for a subcommand: prints message and a hint, returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * The usage error for what getopt_long() refused (it printed nothing: opterr is 0), called on
 * its '?' with the @argc, @argv and @optstring it was given: an unknown option, a known one
 * without its value ("option '--devices' needs an argument") or with one it does not take,
 * each named as typed; a negative number ("-1" given as a job id) gets its own message, since
 * getopt's "invalid option -- '1'" does not say that.
 */
int cli_option_error(const char *cmd, int argc, char *const *argv, const char *optstring);
/* Load the configuration honouring --config-dir; prints the error and returns non-zero on failure.
 */
int cli_load_config(const struct cli_global *g, unsigned flags, struct jobcg_config **ret);
/* For commands that only end, inspect or clean up jobs: an error in gres.conf, or in a key of
 * cgroup.conf that locates nothing, is a warning; the library then makes, constrains and grants
 * nothing (jobcg_config_gres_error(), jobcg_config_cgroup_error()). */
#define CLI_CONFIG_TOLERATE (JOBCG_CONFIG_TOLERATE_GRES | JOBCG_CONFIG_TOLERATE_CGROUP)
