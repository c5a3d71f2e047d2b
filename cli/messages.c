/* jobcg CLI: what every subcommand prints (library log, errors, usage errors), apart from main()
 * so that a fuzz target can link the parsers that print them. */
#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"

static void log_to_stderr(enum jobcg_log_level level, const char *msg, void *userdata)
{
	const char *tag = level <= JOBCG_LOG_ERR       ? "error"
			  : level == JOBCG_LOG_WARNING ? "warning"
			  : level <= JOBCG_LOG_INFO    ? "info"
						       : "debug";
	fprintf(stderr, "jobcg: %s: %s\n", tag, msg);
}

void cli_set_verbosity(int verbose)
{
	jobcg_set_log(log_to_stderr, NULL,
		      verbose >= 2   ? JOBCG_LOG_DEBUG
		      : verbose == 1 ? JOBCG_LOG_INFO
				     : JOBCG_LOG_NOTICE);
}

void cli_print_error(int r, const char *what)
{
	char buf[8192];

	jobcg_error_format(r, buf, sizeof(buf));
	/* Said once: a later failure that leaves no record of its own must not repeat it. */
	jobcg_error_clear();
	if (what)
		fprintf(stderr, "jobcg: %s: %s\n", what, buf);
	else
		fprintf(stderr, "jobcg: %s\n", buf);
}

int cli_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("jobcg: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "jobcg %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'jobcg %s --help'.\n", cmd);
	return 2;
}

int cli_option_error(const char *cmd, int argc, char *const *argv, const char *optstring)
{
	const char *cur = optind < argc ? argv[optind] : NULL, *arg;
	const char *known = optopt > 0 && optopt != ':' ? strchr(optstring, optopt) : NULL;

	/* "-1" or "-12": a job id, step or count given negative, not options */
	if (optopt >= '0' && optopt <= '9' && !known)
		return cli_usage_error(cmd, "a negative number is not an id (job ids are "
					    "1..4294967294, steps and tasks count from 0)");
	/* getopt stays on an element whose later letters are still to come ("-xb"): only an
	 * unknown letter stops there, since a known one would take the rest as its value. */
	if (optopt > 0 && cur && cur[0] == '-' && cur[1] && cur[1] != '-') {
		const char *at = strchr(cur + 1, optopt);

		if (at && at[1])
			return cli_usage_error(cmd, "unknown option '-%c' (in '%s')", optopt, cur);
	}
	arg = optind > 0 && optind <= argc ? argv[optind - 1] : NULL;
	if (arg && strncmp(arg, "--", 2) == 0 && arg[2]) {
		int n = (int)strcspn(arg, "=");

		/* getopt_long names the option in optopt only when it knows it */
		if (!optopt)
			return cli_usage_error(cmd, "unknown option '%.*s'", n, arg);
		if (arg[n] == '=')
			return cli_usage_error(cmd, "option '%.*s' takes no argument", n, arg);
		return cli_usage_error(cmd, "option '%s' needs an argument", arg);
	}
	if (known && known[1] == ':')
		return cli_usage_error(cmd, "option '-%c' needs an argument", optopt);
	if (optopt > 0)
		return cli_usage_error(cmd, "unknown option '-%c'", optopt);
	return cli_usage_error(cmd, "unknown option '%s'", arg ? arg : "?");
}

int cli_load_config(const struct cli_global *g, unsigned flags, struct jobcg_config **ret)
{
	int r = jobcg_config_load(g->config_dir, NULL, flags, ret);

	if (r < 0) {
		cli_print_error(r, "configuration");
		return 1;
	}
	return 0;
}
