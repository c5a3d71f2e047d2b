/* jobcg: command-line entry point; finds the subcommand and removes global options. */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobcg-build.h"

extern const struct cli_command __start_jobcg_cmds[];
extern const struct cli_command __stop_jobcg_cmds[];

static int cmd_version(int argc, char **argv, const struct cli_global *g)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("Usage: jobcg version\n\nPrint jobcg's version.\n");
		return 0;
	}
	if (argc > 1)
		return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
	printf("jobcg %s\n", JOBCG_VERSION);
	return 0;
}
CLI_COMMAND(version, cmd_version, "print the version");

static int cmp_cmd(const void *a, const void *b)
{
	return strcmp((*(const struct cli_command *const *)a)->name,
		      (*(const struct cli_command *const *)b)->name);
}

static void usage(FILE *f)
{
	size_t n = (size_t)(__stop_jobcg_cmds - __start_jobcg_cmds);
	const struct cli_command *sorted[256];

	fprintf(f, "Usage: jobcg [--config-dir DIR] [-v] COMMAND [ARGS...]\n\n"
		   "Node-level job containment for Linux cgroup v2. Commands:\n");
	if (n > 256)
		n = 256;
	for (size_t i = 0; i < n; i++)
		sorted[i] = &__start_jobcg_cmds[i];
	qsort(sorted, n, sizeof(sorted[0]), cmp_cmd);
	int width = 0;

	for (size_t i = 0; i < n; i++)
		if ((int)strlen(sorted[i]->name) > width)
			width = (int)strlen(sorted[i]->name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-*s %s\n", width, sorted[i]->name, sorted[i]->summary);
	fprintf(f, "\nRun 'jobcg COMMAND --help' for a command's options; man jobcg(1).\n");
}

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

static int run_main(int argc, char **argv, char **rest);

int main(int argc, char **argv)
{
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	int r;

	if (!rest)
		return 1;
	r = run_main(argc, argv, rest);
	free(rest);
	return r;
}

static int run_main(int argc, char **argv, char **rest)
{
	struct cli_global g = {.prog = "jobcg"};
	int nrest = 0;
	const char *name = NULL;
	bool end_of_opts = false;

	/* Global options may come before or after the subcommand name, but never after "--". */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!end_of_opts && strcmp(a, "--") == 0)
			end_of_opts = true;
		else if (!end_of_opts &&
			 (strcmp(a, "--config-dir") == 0 || strncmp(a, "--config-dir=", 13) == 0)) {
			const char *dir = a[12] == '=' ? a + 13 : i + 1 < argc ? argv[++i] : NULL;

			/* "" is no directory: it must not fall back to /etc/jobcg, past
			 * $JOBCG_CONF_DIR */
			if (!dir || !*dir) {
				fprintf(stderr, "jobcg: --config-dir needs a directory\n");
				return 2;
			}
			if (g.config_dir) {
				fprintf(
				    stderr,
				    "jobcg: --config-dir given twice ('%s', then '%s'): give it "
				    "once\n",
				    g.config_dir, dir);
				return 2;
			}
			g.config_dir = dir;
			continue;
		} else if (!end_of_opts && !name &&
			   (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0)) {
			g.verbose++;
			continue;
		} else if (!end_of_opts && !name &&
			   (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			usage(stdout);
			return 0;
		} else if (!end_of_opts && !name && strcmp(a, "--version") == 0) {
			return cmd_version(0, NULL, &g);
		}
		if (!name) {
			if (a[0] == '-') {
				fprintf(stderr, "jobcg: unknown option '%s' before the command\n",
					a);
				usage(stderr);
				return 2;
			}
			name = a;
		}
		rest[nrest++] = argv[i];
	}
	if (!name) {
		usage(stderr);
		return 2;
	}
	if (!g.config_dir)
		g.config_dir = jobcg_getenv("JOBCG_CONF_DIR");
	cli_set_verbosity(g.verbose);
	/* "jobcg help [COMMAND]", as git and systemctl take it. */
	if (strcmp(name, "help") == 0) {
		if (nrest < 2) {
			usage(stdout);
			return 0;
		}
		if (nrest > 2) {
			fprintf(stderr,
				"jobcg help: unexpected argument '%s' (jobcg help [COMMAND])\n",
				rest[2]);
			return 2;
		}
		if (strcmp(rest[1], "--help") == 0 || strcmp(rest[1], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		name = rest[1];
		rest[0] = rest[1];
		rest[1] = (char *)"--help";
		nrest = 2;
	}
	opterr = 0; /* cli_option_error() says it, once */
	for (const struct cli_command *c = __start_jobcg_cmds; c < __stop_jobcg_cmds; c++)
		if (strcmp(c->name, name) == 0) {
			int r = c->run(nrest, rest, &g);

			/* An exit status, never a -errno (which would leave as 234, 254...): one
			 * that slipped through still fails, and says why. */
			if (r < 0) {
				cli_print_error(r, name);
				r = 1;
			}
			return r;
		}
	fprintf(stderr, "jobcg: unknown command '%s'\n", name);
	usage(stderr);
	return 2;
}
