/* jobcg gpus: the GPUs and MIG instances detection finds, and the gres.conf lines for them. */
#include <getopt.h>
#include <limits.h>
#include <unistd.h>

#include "common.h"
#include "jobcg-build.h"
#include "gpudetect.h"
#include "util.h"

static void help(void)
{
	printf("Usage: jobcg gpus [--json | --gres-conf [--node NAME]] [--backend NAME]\n\n"
	       "List the GPUs and NVIDIA MIG instances on this node, one row each: type, UUID,\n"
	       "PCI bus id, device files, the devices granted with them, and the CPUs local to\n"
	       "them. --gres-conf prints gres.conf lines for them instead. Files are read under\n"
	       "$JOBCG_SYSROOT when set. Exit status 1 when something was left out (warnings).\n\n"
	       "  --backend NAME  nvidia, nvml, amd (rsmi), intel (oneapi) or all (default:\n"
	       "                  gres.conf's AutoDetect=, else all but nvml)\n"
	       "  --gres-conf     print gres.conf lines (File=, MultipleFiles= for MIG)\n"
	       "  --node NAME     start each gres.conf line with NodeName=NAME\n"
	       "  --json          print JSON\n"
	       "  -h, --help      show this help\n");
}

static const char *vendor_name(enum jobcg_gpu_vendor v)
{
	switch (v) {
	case JOBCG_GPU_NVIDIA:
		return "nvidia";
	case JOBCG_GPU_AMD:
		return "amd";
	case JOBCG_GPU_INTEL:
		return "intel";
	}
	return "unknown";
}

static struct json_object *files_json(const struct jobcg_gpu_file *v, size_t n)
{
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();
		char num[32];

		snprintf(num, sizeof(num), "%u:%u", v[i].major, v[i].minor);
		json_object_object_add(o, "path", json_object_new_string(v[i].path));
		json_object_object_add(o, "device", json_object_new_string(num));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *str_or_null(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

static void print_json(const struct jobcg_gpus *g)
{
	struct json_object *o = json_object_new_object(), *a = json_object_new_array(),
			   *w = json_object_new_array();

	for (size_t i = 0; i < g->ngpus; i++) {
		const struct jobcg_gpu *d = &g->gpus[i];
		struct json_object *j = json_object_new_object();

		json_object_object_add(j, "index", json_object_new_int64(d->index));
		json_object_object_add(j, "vendor", json_object_new_string(vendor_name(d->vendor)));
		json_object_object_add(j, "model", json_object_new_string(d->model));
		json_object_object_add(j, "type", json_object_new_string(d->type));
		json_object_object_add(j, "uuid", str_or_null(d->uuid));
		json_object_object_add(j, "pci", str_or_null(d->pci));
		json_object_object_add(j, "cpus", str_or_null(d->cpus));
		json_object_object_add(j, "files", files_json(d->files, d->nfiles));
		json_object_object_add(j, "companions", files_json(d->companions, d->ncompanions));
		json_object_object_add(j, "mig_mode", json_object_new_boolean(d->mig_mode));
		json_object_object_add(j, "mig", json_object_new_boolean(d->mig));
		if (d->mig) {
			json_object_object_add(j, "parent", json_object_new_int64(d->parent));
			json_object_object_add(j, "gi", json_object_new_int64(d->gi));
			json_object_object_add(j, "ci", json_object_new_int64(d->ci));
			json_object_object_add(j, "profile", str_or_null(d->profile));
		}
		json_object_array_add(a, j);
	}
	for (char **s = g->warnings; s && *s; s++)
		json_object_array_add(w, json_object_new_string(*s));
	json_object_object_add(o, "backends", str_or_null(g->backends));
	json_object_object_add(o, "gpus", a);
	json_object_object_add(o, "warnings", w);
	cli_json_print(stdout, o);
}

static void print_files(const struct jobcg_gpu_file *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%s%s(%u:%u)", i ? "," : "", v[i].path, v[i].major, v[i].minor);
	if (!n)
		printf("-");
}

static void print_text(const struct jobcg_gpus *g)
{
	/* a header over no row reads as a table that failed to fill */
	if (!g->ngpus) {
		printf("no GPU found (backends: %s)\n", g->backends ? g->backends : "none");
		return;
	}
	printf("%-3s %-6s %-28s %-12s %-44s %s\n", "ROW", "VENDOR", "TYPE", "PCI", "UUID",
	       "FILES / CPUS");
	for (size_t i = 0; i < g->ngpus; i++) {
		const struct jobcg_gpu *d = &g->gpus[i];

		printf("%-3u %-6s %-28s %-12s %-44s ", d->index, vendor_name(d->vendor), d->type,
		       d->pci ? d->pci : "-", d->uuid ? d->uuid : "-");
		print_files(d->files, d->nfiles);
		printf(" cpus %s", d->cpus ? d->cpus : "-");
		if (d->mig_mode)
			printf(" (MIG mode: its instances follow)");
		if (d->mig)
			printf(" (MIG GI %u CI %u of row %d%s%s)", d->gi, d->ci, d->parent,
			       d->profile ? ", profile " : "", d->profile ? d->profile : "");
		printf("\n");
	}
}

/*
 * NVML cannot be loaded into a statically linked process: the dynamically linked twin does
 * the same command (JOBCG_DYNAMIC_EXE, else jobcg-dynamic beside this one, else installed).
 * JOBCG_DYNAMIC_EXE names a program run as root, so it goes through the same trusted-file
 * check as the scope helper's (env_program): an untrusted one fails the command, never runs.
 */
static int run_twin(int argc, char **argv, const struct cli_global *gl)
{
	_cleanup_free_ char *e = NULL;
	char self[PATH_MAX], twin[PATH_MAX + 32];
	char **args;
	ssize_t n;
	size_t k = 0;
	int r = env_program("JOBCG_DYNAMIC_EXE", &e);

	if (r < 0) {
		cli_print_error(r, "gpus");
		return 1;
	}
	args = calloc((size_t)argc + 4, sizeof(char *));
	if (!args)
		return cli_fail("out of memory");
	if (e)
		snprintf(twin, sizeof(twin), "%s", e);
	else if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if (strrchr(self, '/'))
			*strrchr(self, '/') = '\0';
		snprintf(twin, sizeof(twin), "%s/jobcg-dynamic", self);
		if (access(twin, X_OK) < 0)
			snprintf(twin, sizeof(twin), "%s/jobcg-dynamic", JOBCG_LIBEXECDIR);
	} else
		snprintf(twin, sizeof(twin), "%s/jobcg-dynamic", JOBCG_LIBEXECDIR);
	args[k++] = twin;
	if (gl->config_dir) {
		args[k++] = (char *)"--config-dir";
		args[k++] = (char *)gl->config_dir;
	}
	for (int i = 0; i < argc; i++)
		args[k++] = argv[i];
	fflush(NULL);
	execv(twin, args);
	free(args);
	return cli_fail("NVML needs the dynamically linked jobcg, and %s cannot run: %s", twin,
			strerror(errno));
}

static int cmd_gpus(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},	       {"gres-conf", no_argument, NULL, 'g'},
	    {"backend", required_argument, NULL, 'b'}, {"node", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},	       {},
	};
	const char *backend = NULL, *node = NULL;
	struct jobcg_config *conf = NULL;
	struct jobcg_gpus *gpus = NULL;
	bool json = false, gres = false, named;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'g':
			gres = true;
			break;
		case 'b':
			if ((r = cli_once("gpus", "--backend", backend, optarg)))
				return r;
			backend = optarg;
			break;
		case 'n':
			if ((r = cli_once("gpus", "--node", node, optarg)))
				return r;
			if (!*optarg)
				return cli_usage_error("gpus", "--node: empty name");
			node = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("gpus", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("gpus", "unexpected argument '%s'", argv[optind]);
	if (json && gres)
		return cli_usage_error("gpus", "--json and --gres-conf exclude each other");
	if (node && !gres)
		return cli_usage_error("gpus", "--node only goes with --gres-conf");
	named = backend != NULL;
	if (!backend) {
		/* gres.conf only chooses the backend here: its device files need not exist. */
		r = cli_load_config(g, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENTRIES, &conf);
		if (r)
			return r;
		backend = jobcg_gpus_backend_for(&conf->gres);
		if (backend && !strcmp(backend, "off"))
			backend = NULL;
	}
	r = jobcg_gpus_detect(backend, &gpus);
	jobcg_config_free(conf);
#ifdef JOBCG_TEST_HOOKS
	/* Test builds only: a dynamically linked jobcg goes to its twin as a static one does. */
	if (getenv("JOBCG_TEST_GPUS_TWIN")) {
		jobcg_gpus_free(gpus);
		return run_twin(argc, argv, g);
	}
#endif
	if (r == -ELIBEXEC)
		return run_twin(argc, argv, g);
	/* -EINVAL is an unknown backend name: a usage error when it was --backend's */
	if (r == -EINVAL && named) {
		char buf[512];

		return cli_usage_error("gpus", "--backend: %s",
				       jobcg_error_format(r, buf, sizeof(buf)));
	}
	if (r < 0) {
		cli_print_error(r, "GPU detection");
		return 1;
	}
	if (json)
		print_json(gpus);
	else if (gres) {
		char *text = NULL;

		if (jobcg_gpus_gres_conf(gpus, node, &text) < 0) {
			jobcg_gpus_free(gpus);
			return cli_fail("out of memory");
		}
		fputs(text, stdout);
		free(text);
	} else
		print_text(gpus);
	/* The warnings reached stderr through the library's log. */
	r = gpus->warnings ? 1 : 0;
	jobcg_gpus_free(gpus);
	return r;
}
CLI_COMMAND(gpus, cmd_gpus, "list the GPUs and MIG instances found, or gres.conf lines for them");
