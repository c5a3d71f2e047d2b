/* jobcg: command-line entry point; finds the subcommand and removes global options. */
#include <getopt.h>
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
