/*
 * VM test helper: drive the systemd scope backend directly (scope_systemd_backend.ensure), so
 * the in-guest suite can test the scope on its own, including options the CLI sets through
 * cgroup.conf. Prints the tree root on success; on failure the error record and exit 1.
 * Usage: vmt-scope [--scope NAME] [--slice SLICE] [--timeout MS] [--enable-controllers]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "log.h"
#include "scope.h"
#include "scope_systemd.h"
#include "util.h"

static void log_stderr(enum jobcg_log_level level, const char *msg, void *userdata)
{
	fprintf(stderr, "log(%d): %s\n", (int)level, msg);
}

int main(int argc, char **argv)
{
	struct jobcg_config *conf = NULL;
	char *rel = NULL, *root = NULL, buf[8192];
	int r;

	jobcg_set_log(log_stderr, NULL, JOBCG_LOG_DEBUG);
	char confdir[] = "/tmp/vmt-scope.XXXXXX";

	/* Built-in defaults (an empty configuration directory), then the options below. */
	if (!mkdtemp(confdir) || jobcg_config_load(confdir, NULL, JOBCG_CONFIG_NO_ENV, &conf) < 0) {
		fprintf(stderr, "vmt-scope: cannot load a default configuration\n");
		return 2;
	}
	rmdir(confdir);
	/* TCG on a loaded host: see guest/entry. --timeout still overrides. */
	conf->cgroup.systemd_timeout_ms = 30000;
	for (int i = 1; i < argc; i++) {
		char **slot = NULL;

		if (streq(argv[i], "--scope"))
			slot = &conf->cgroup.scope_name;
		else if (streq(argv[i], "--slice"))
			slot = &conf->cgroup.slice;
		else if (streq(argv[i], "--timeout") && i + 1 < argc)
			conf->cgroup.systemd_timeout_ms = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (streq(argv[i], "--enable-controllers"))
			conf->cgroup.enable_controllers = true;
		else {
			fprintf(stderr, "vmt-scope: bad argument '%s'\n", argv[i]);
			return 2;
		}
		if (slot && i + 1 < argc) {
			free(*slot);
			*slot = strdup(argv[++i]);
		}
	}
	r = scope_expected_root(conf->cgroup.slice, conf->cgroup.scope_name, &rel);
	if (r >= 0)
		r = scope_systemd_backend.ensure(conf, "/sys/fs/cgroup", rel, &root);
	if (r < 0) {
		fprintf(stderr, "vmt-scope: %s\n", jobcg_error_format(r, buf, sizeof(buf)));
		return 1;
	}
	printf("%s\n", root);
	free(root);
	free(rel);
	jobcg_config_free(conf);
	return 0;
}
