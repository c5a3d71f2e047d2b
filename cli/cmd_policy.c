/* jobcg policy: print the device policy in force below the jobcg root (cgroups and devices). */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "devnames.h"
#include "jobcg/context.h"
#include "devices.h"

/* What the cgroup is to jobcg: inside a reservation every level is one deeper. */
static const char *level_name(const struct jobcg_devgrant *g)
{
	int level = g->level;

	if (g->in_reservation && level == 1)
		return "reservation";
	if (g->in_reservation && level > 1)
		level--;
	switch (level) {
	case 1:
		return "job";
	case 2:
		return "step";
	case 4:
		return "task";
	default:
		return "other";
	}
}

/* Names: the gres.conf files first (what the administrator calls them), then /dev. */
struct names {
	struct jobcg_devnames *gres, *dev;
};

static const char *name_of(const struct names *n, const struct jobcg_devrule *r)
{
	const char *s;

	if (r->major == JOBCG_DEV_ANY || r->minor == JOBCG_DEV_ANY)
		return NULL;
	s = jobcg_devnames_find(n->gres, r->type, r->major, r->minor);
	return s ? s : jobcg_devnames_find(n->dev, r->type, r->major, r->minor);
}

static void rule_text(const struct jobcg_devrule *r, char *dev, size_t dsize, char *acc)
{
	char maj[16] = "*", min[16] = "*";

	if (r->major != JOBCG_DEV_ANY)
		snprintf(maj, sizeof(maj), "%u", r->major);
	if (r->minor != JOBCG_DEV_ANY)
		snprintf(min, sizeof(min), "%u", r->minor);
	snprintf(dev, dsize, "%c %s:%s", r->type, maj, min);
	jobcg_devaccess_format(r->access, acc);
}

static json_object *rule_json(const struct jobcg_devrule *r, const struct names *names)
{
	json_object *o = json_object_new_object();
	char buf[64], acc[4];
	const char *name = NULL;

	json_object_object_add(o, "rule",
			       json_object_new_string(jobcg_devrule_format(r, buf, sizeof(buf))));
	snprintf(buf, sizeof(buf), "%c", r->type);
	json_object_object_add(o, "type", json_object_new_string(buf));
	json_object_object_add(o, "major",
			       r->major == JOBCG_DEV_ANY ? json_object_new_string("*")
							 : json_object_new_int64(r->major));
	json_object_object_add(o, "minor",
			       r->minor == JOBCG_DEV_ANY ? json_object_new_string("*")
							 : json_object_new_int64(r->minor));
	json_object_object_add(o, "access",
			       json_object_new_string(jobcg_devaccess_format(r->access, acc)));
	name = name_of(names, r);
	json_object_object_add(o, "name", name ? json_object_new_string(name) : NULL);
	return o;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: jobcg policy [--json] [--root CGROUP] [--dev-dir DIR]\n\n"
	    "Print the device policy below the jobcg root: the managed devices and, for each\n"
	    "constrained job, step or task cgroup, the devices and access it is granted.\n\n"
	    "  --json           machine-readable output\n"
	    "  --root CGROUP    the jobcg root (absolute, or relative to the cgroup v2 mount)\n"
	    "  --dev-dir DIR    where to look up device names not in gres.conf (default /dev)\n");
}

static int cmd_policy(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"root", required_argument, NULL, 'r'},
	    {"dev-dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *root_opt = NULL, *dev_dir = NULL;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_devpolicy *p = NULL;
	struct names names = {NULL, NULL};
	struct jobcg_devgrant *grants = NULL;
	struct jobcg_devrule *managed = NULL;
	size_t n_grants = 0, n_managed = 0;
	bool json = false;
	char root[4096];
	int c, e, rc = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'r':
			if ((e = cli_once("policy", "--root", root_opt, optarg)))
				return e;
			/* "" would be the cgroup v2 mount itself, which no one means */
			if (!*optarg)
				return cli_usage_error("policy", "--root: empty path");
			root_opt = optarg;
			break;
		case 'd': {
			struct stat st;

			if ((e = cli_once("policy", "--dev-dir", dev_dir, optarg)))
				return e;
			if (!*optarg)
				return cli_usage_error("policy", "--dev-dir: empty path");
			/* One that is not there would name no device, silently. */
			if (stat(optarg, &st) < 0)
				return cli_usage_error("policy", "--dev-dir '%s': %s", optarg,
						       strerror(errno));
			if (!S_ISDIR(st.st_mode))
				return cli_usage_error("policy", "--dev-dir '%s': not a directory",
						       optarg);
			dev_dir = optarg;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_option_error("policy", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("policy", "unexpected argument '%s'", argv[optind]);
	/* Another user finds no pinned program and reads no attached one: it would be told
	 * that no cgroup is constrained. */
	if (geteuid() != 0)
		return cli_fail("policy: needs root: the device programs are pinned in bpffs and "
				"read with bpf(2), which only root can (a reading by another user "
				"would show no constrained cgroup)");
	if (cli_load_config(g, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENTRIES | CLI_CONFIG_TOLERATE,
			    &conf) != 0)
		return 1;
	/* The same root as every other command, unless --root names another. */
	if ((e = jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx)) < 0) {
		cli_print_error(e, NULL);
		goto out;
	}
	if (root_opt && root_opt[0] == '/')
		snprintf(root, sizeof(root), "%s", root_opt);
	else if (root_opt)
		snprintf(root, sizeof(root), "%s/%s", jobcg_ctx_mount(ctx), root_opt);
	else
		snprintf(root, sizeof(root), "%s", jobcg_ctx_root(ctx));
	e = jobcg_devpolicy_open_pinned(conf, root, &p);
	if (e == -ENOENT) {
		/* No node program for this root: list linear programs, touching nothing. */
		conf->cgroup.device_program = JOBCG_DEVPROG_LINEAR;
		e = jobcg_devpolicy_open(conf, root, NULL, 0, &p);
	}
	if (e < 0) {
		cli_print_error(e, "policy");
		goto out;
	}
	if ((e = jobcg_devpolicy_list(p, &grants, &n_grants)) < 0 ||
	    (e = jobcg_devpolicy_managed(p, &managed, &n_managed)) < 0) {
		cli_print_error(e, "policy");
		goto out;
	}
	if (jobcg_devnames_new(&names.gres) == 0)
		for (size_t i = 0; i < conf->gres.nrecords; i++)
			for (size_t j = 0; j < conf->gres.records[i].nfiles; j++)
				(void)jobcg_devnames_add(names.gres,
							 conf->gres.records[i].files[j].path);
	(void)jobcg_devnames_scan(dev_dir, &names.dev);

	bool node = jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE, attached = true;
	if ((e = jobcg_devpolicy_attached(p, &attached)) < 0) {
		cli_print_error(e, "policy");
		goto out;
	}
	if (!attached)
		fprintf(stderr,
			"jobcg: warning: %s is pinned but not attached at %s: no device is "
			"denied to any cgroup there ('jobcg gc' attaches it again)\n",
			"jobcg_node", jobcg_devpolicy_root(p));
	if (json) {
		json_object *o = json_object_new_object(), *a;
		json_object_object_add(o, "root", json_object_new_string(jobcg_devpolicy_root(p)));
		json_object_object_add(o, "mode", json_object_new_string(node ? "node" : "linear"));
		json_object_object_add(
		    o, "pin_dir", node ? json_object_new_string(jobcg_devpolicy_pin_dir(p)) : NULL);
		json_object_object_add(o, "attached", json_object_new_boolean(attached));
		a = json_object_new_array();
		for (size_t i = 0; i < n_managed; i++)
			json_object_array_add(a, rule_json(&managed[i], &names));
		json_object_object_add(o, "managed", node ? a : (json_object_put(a), NULL));
		a = json_object_new_array();
		for (size_t i = 0; i < n_grants; i++) {
			json_object *gj = json_object_new_object(), *rj = json_object_new_array();
			json_object_object_add(gj, "cgroup_id",
					       json_object_new_uint64(grants[i].cgroup_id));
			json_object_object_add(
			    gj, "path",
			    grants[i].path ? json_object_new_string(grants[i].path) : NULL);
			json_object_object_add(gj, "level",
					       json_object_new_string(level_name(&grants[i])));
			if (grants[i].prog_id)
				json_object_object_add(gj, "prog_id",
						       json_object_new_int64(grants[i].prog_id));
			for (size_t j = 0; j < grants[i].n_rules; j++)
				json_object_array_add(rj, rule_json(&grants[i].rules[j], &names));
			json_object_object_add(gj, "allow", rj);
			json_object_array_add(a, gj);
		}
		json_object_object_add(o, "grants", a);
		printf("%s\n", json_object_to_json_string_ext(
				   o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		char dev[48], acc[4];
		printf("root: %s\n", jobcg_devpolicy_root(p));
		if (node)
			printf("mode: node (jobcg_node, maps pinned in %s)%s\n",
			       jobcg_devpolicy_pin_dir(p), attached ? "" : ", NOT ATTACHED");
		else
			printf("mode: linear (one jobcg_linear program per constrained cgroup)\n");
		if (node) {
			printf("managed devices (%zu):", n_managed);
			for (size_t i = 0; i < n_managed; i++) {
				const char *nm = name_of(&names, &managed[i]);
				rule_text(&managed[i], dev, sizeof(dev), acc);
				printf("%s %s%s%s%s", i ? "," : "", dev, nm ? " (" : "",
				       nm ? nm : "", nm ? ")" : "");
			}
			printf("\n");
		}
		if (n_grants == 0) {
			printf("no constrained cgroups\n");
		} else {
			/* Columns as wide as their longest entry: a task's path (an ephemeral
			 * job's, one in a reservation) is longer than the header's 32. */
			static const unsigned min_widths[] = {32, 11, 12, 6, 0};
			struct cli_table tab;

			cli_table_init(&tab, 5, min_widths);
			cli_table_add(&tab, (const char *const[]){"CGROUP", "LEVEL", "DEVICE",
								  "ACCESS", "NAME"});
			for (size_t i = 0; i < n_grants; i++) {
				char idbuf[32];
				const char *path = grants[i].path;
				if (!path) {
					snprintf(idbuf, sizeof(idbuf), "(gone, id %llu)",
						 (unsigned long long)grants[i].cgroup_id);
					path = idbuf;
				}
				if (grants[i].n_rules == 0)
					cli_table_add(&tab,
						      (const char *const[]){
							  path, level_name(&grants[i]), "(none)",
							  "-", "every managed device denied"});
				for (size_t j = 0; j < grants[i].n_rules; j++) {
					const struct jobcg_devrule *r = &grants[i].rules[j];
					const char *nm = name_of(&names, r);
					rule_text(r, dev, sizeof(dev), acc);
					cli_table_add(&tab, (const char *const[]){
								j ? "" : path,
								j ? "" : level_name(&grants[i]),
								dev, acc, nm ? nm : ""});
				}
			}
			cli_table_print(&tab, stdout);
		}
	}
	rc = 0;
out:
	jobcg_devnames_free(names.gres);
	jobcg_devnames_free(names.dev);
	jobcg_devgrants_free(grants, n_grants);
	free(managed);
	jobcg_devpolicy_free(p);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return rc;
}
CLI_COMMAND(policy, cmd_policy, "print the device policy (cgroups, devices, access)");
