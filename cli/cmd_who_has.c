/* jobcg who-has: every cgroup whose processes may open a given device, from the kernel's
 * device programs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "decode_out.h"
#include "jobcg/context.h"
#include "devices.h"
#include "inspect_internal.h"
#include "jobcg/inspect.h"
#include "util.h"

#define MAX_DEPTH      64
#define MAX_CGROUPS    200000
#define MAX_PIDS_SHOWN 64

static void help(void)
{
	printf("Usage: jobcg who-has DEVICE [--root PATH] [--json]\n\n"
	       "List every cgroup under PATH (default: the whole cgroup v2 tree) whose processes\n"
	       "may open DEVICE, with the access allowed (subset of rwm), the job and step ids\n"
	       "where the path is a jobcg or Slurm job (job_<id>/step_<id>), and the pids in it.\n"
	       "DEVICE is a /dev path or 'c MAJOR:MINOR' / 'b MAJOR:MINOR'. Needs root.\n\n"
	       "  --root PATH  walk only this cgroup subtree (absolute, or relative to the\n"
	       "               cgroup v2 mount)\n"
	       "  --json       print JSON\n"
	       "  -h, --help   show this help\n");
}

struct walk {
	struct jobcg_progcache *cache;
	char type;
	uint32_t major, minor;
	bool json;
	struct json_object *arr;
	unsigned visited, matched, errors;
	int first_err;
	bool stop; /* not privileged: no other cgroup will do better */
};

static char *read_pids(const char *path)
{
	char p[PATH_MAX];
	FILE *f;
	char line[64];
	size_t len = 0, n = 0;
	char *out = calloc(1, 16);

	if (!out)
		return NULL;
	snprintf(p, sizeof(p), "%s/cgroup.procs", path);
	f = fopen(p, "re");
	if (!f)
		return out;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (n++ >= MAX_PIDS_SHOWN) {
			char *t = realloc(out, len + 8);
			if (t) {
				out = t;
				strcpy(out + len, " ...");
			}
			break;
		}
		char *t = realloc(out, len + strlen(line) + 2);
		if (!t)
			break;
		out = t;
		len += (size_t)sprintf(out + len, "%s%s", len ? " " : "", line);
	}
	fclose(f);
	return out;
}

static void visit(struct walk *w, const char *path)
{
	unsigned access = 0;
	bool opaque = false;
	size_t nprogs = 0;
	char acc[8], *a = acc, job[64], step[64];
	int r;

	w->visited++;
	r = jobcg_cgroup_device_access(path, w->cache, w->type, w->major, w->minor, &access,
				       &opaque, &nprogs);
	if (r < 0) {
		if (!w->errors++)
			w->first_err = r;
		if (w->errors == 1) {
			char *shown = str_escape_controls(path);

			cli_print_error(r, shown ? shown : "?");
			free(shown);
		}
		if (r == -EPERM)
			w->stop = true;
		return;
	}
	if (!(access & (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE)))
		return; /* cannot open it (mknod alone does not open) */
	w->matched++;
	if (access & JOBCG_DEV_ACC_READ)
		*a++ = 'r';
	if (access & JOBCG_DEV_ACC_WRITE)
		*a++ = 'w';
	if (access & JOBCG_DEV_ACC_MKNOD)
		*a++ = 'm';
	if (opaque)
		*a++ = '?';
	*a = 0;
	job_step_from_path(path, job, sizeof(job), step, sizeof(step));
	char *pids = read_pids(path);
	if (w->json) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "cgroup", json_object_new_string(path));
		json_object_object_add(o, "access", json_object_new_string(acc));
		json_object_object_add(o, "uncertain", json_object_new_boolean(opaque));
		json_object_object_add(o, "programs", json_object_new_int64((int64_t)nprogs));
		uint64_t jid;

		/* a number as everywhere else; a job_ directory jobcg did not name as it is */
		json_object_object_add(o, "job",
				       !job[0] ? NULL
				       : parse_u64(job, UINT32_MAX, &jid) == 0
					   ? json_object_new_uint64(jid)
					   : json_object_new_string(job));
		json_object_object_add(o, "step", step[0] ? json_object_new_string(step) : NULL);
		struct json_object *pa = json_object_new_array();
		char *save = NULL;
		for (char *t = pids ? strtok_r(pids, " ", &save) : NULL; t;
		     t = strtok_r(NULL, " ", &save))
			if (strcmp(t, "...") != 0) {
				uint64_t pid;

				if (parse_u64(t, INT32_MAX, &pid) == 0)
					json_object_array_add(pa, json_object_new_int((int)pid));
				else
					fprintf(
					    stderr,
					    "jobcg: warning: %s/cgroup.procs: '%s' is not a pid\n",
					    path, t);
			}
		json_object_object_add(o, "pids", pa);
		json_object_array_add(w->arr, o);
	} else {
		/* Cgroups below a delegated one (a user's systemd instance) are named by their
		 * user: control characters in a name are shown escaped, not sent to the terminal.
		 */
		char *shown = str_escape_controls(path), *sjob = str_escape_controls(job),
		     *sstep = str_escape_controls(step);

		printf("%-4s %s", acc, shown ? shown : "?");
		if (job[0])
			printf("  job %s%s%s", sjob ? sjob : "?", step[0] ? " step " : "",
			       sstep ? sstep : "?");
		free(shown);
		free(sjob);
		free(sstep);
		if (!nprogs)
			printf("  (no device program)");
		if (pids && *pids)
			printf("  pids %s", pids);
		printf("\n");
	}
	free(pids);
}

/*
 * Where this node's configuration names a jobcg tree with a pinned node program, cgroups that
 * only it constrains are answered from its policy map (the program's own decision, without
 * running it per cgroup). Best effort and silent: without a configuration, a tree or a pin,
 * every program is run as before.
 */
static void trust_node_program(const struct cli_global *g, struct jobcg_progcache *cache)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_devpolicy *p = NULL;

	if (jobcg_config_load(g->config_dir, NULL, 0, &conf) == 0 &&
	    jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx) == 0 &&
	    jobcg_devpolicy_open_pinned(conf, jobcg_ctx_root(ctx), &p) == 0)
		(void)jobcg_progcache_trust_policy(cache, p);
	jobcg_devpolicy_free(p);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	jobcg_error_clear();
}

static void walk_tree(struct walk *w, const char *path, int depth)
{
	DIR *d;
	struct dirent *e;

	if (w->visited >= MAX_CGROUPS || w->stop)
		return;
	visit(w, path);
	if (depth >= MAX_DEPTH)
		return;
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		walk_tree(w, sub, depth + 1);
	}
	closedir(d);
}

static int cmd_who_has(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"root", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct walk w = {0};
	const char *root = NULL, *mount;
	char rootbuf[PATH_MAX], rel[PATH_MAX];
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'j':
			w.json = true;
			break;
		case 'r':
			if ((r = cli_once("who-has", "--root", root, optarg)))
				return r;
			if (!*optarg)
				return cli_usage_error("who-has", "--root: empty path");
			root = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("who-has", argc, argv, "h");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("who-has",
				       "expected one DEVICE (a /dev path or 'c MAJOR:MINOR')");
	if (!*argv[optind])
		return cli_usage_error("who-has", "DEVICE: empty argument");
	r = cli_parse_device(argv[optind], &w.type, &w.major, &w.minor);
	if (r == -EINVAL || r == -ERANGE)
		return cli_usage_error("who-has",
				       "'%s': need 'c MAJOR:MINOR' or 'b MAJOR:MINOR' with MAJOR "
				       "0..%u and MINOR 0..%u",
				       argv[optind], CLI_DEV_MAJOR_MAX, CLI_DEV_MINOR_MAX);
	if (r < 0)
		return cli_usage_error("who-has", "%s: not a device (%s)", argv[optind],
				       r == -ENODEV ? "not a character or block device"
						    : strerror(-r));
	if ((r = jobcg_cgroup2_mount(&mount)) < 0) {
		cli_print_error(r, "who-has");
		return 1;
	}
	/* Relative to the v2 mount, as policy --root, decode --cgroup and JOBCG_ROOT: a cgroup
	 * is named by its place in the tree, not by the caller's working directory. */
	if (!root)
		root = mount;
	else if (root[0] != '/') {
		if (snprintf(rel, sizeof(rel), "%s/%s", mount, root) >= (int)sizeof(rel))
			return cli_fail("--root %s: %s", root, strerror(ENAMETOOLONG));
		root = rel;
	}
	if (!realpath(root, rootbuf))
		return cli_fail("--root %s: %s", root, strerror(errno));
	if (strncmp(rootbuf, mount, strlen(mount)) != 0)
		return cli_fail("--root %s is not under the cgroup v2 mount %s", rootbuf, mount);
	r = jobcg_progcache_new(&w.cache);
	if (r < 0)
		return cli_fail("out of memory");
	trust_node_program(g, w.cache);
	if (w.json)
		w.arr = json_object_new_array();
	walk_tree(&w, rootbuf, 0);
	if (w.json) {
		struct json_object *o = json_object_new_object();
		char dev[64];
		snprintf(dev, sizeof(dev), "%c %u:%u", w.type, w.major, w.minor);
		json_object_object_add(o, "device", json_object_new_string(dev));
		json_object_object_add(o, "root", json_object_new_string(rootbuf));
		json_object_object_add(o, "cgroups_visited", json_object_new_int64(w.visited));
		json_object_object_add(o, "cgroups", w.arr);
		printf("%s\n", json_object_to_json_string_ext(
				   o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else if (!w.stop)
		printf("# %u of %u cgroups may open %c %u:%u ('?': an opaque program may still "
		       "deny)\n",
		       w.matched, w.visited, w.type, w.major, w.minor);
	fflush(stdout);
	jobcg_progcache_free(w.cache);
	if (w.errors) {
		fprintf(stderr, "jobcg: who-has: %u cgroups could not be read\n", w.errors);
		return 1;
	}
	return 0;
}
/* The command name has a dash, which clang-format would space out. */
/* clang-format off */
CLI_COMMAND(who-has, cmd_who_has, "list the cgroups whose processes may open a device");
/* clang-format on */
