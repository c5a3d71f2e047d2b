/* jobcg policy: print the device policy in force below the jobcg root (cgroups and devices). */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobcg/devices.h"

static const char *level_name(int level)
{
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

/* The v2 mount, for roots given relative to it. */
static int find_v2_mount(char *buf, size_t size)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;

	if (!f)
		return -errno;
	while ((m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, size, "%s", m->mnt_dir);
			endmntent(f);
			return 0;
		}
	endmntent(f);
	return -ENOENT;
}

static int root_path(const struct jobcg_config *conf, const char *opt, char *buf, size_t size)
{
	char mnt[4096];
	const struct jobcg_cgroup_conf *c = &conf->cgroup;

	if (opt && opt[0] == '/') {
		snprintf(buf, size, "%s", opt);
		return 0;
	}
	if (!opt && c->tree_root && c->tree_root[0] == '/') {
		snprintf(buf, size, "%s", c->tree_root);
		return 0;
	}
	if (find_v2_mount(mnt, sizeof(mnt)) < 0)
		return -ENOENT;
	if (opt)
		snprintf(buf, size, "%s/%s", mnt, opt);
	else if (c->tree_root)
		snprintf(buf, size, "%s/%s", mnt, c->tree_root);
	else
		snprintf(buf, size, "%s/%s/%s", mnt, c->slice ? c->slice : "system.slice",
			 c->scope_name ? c->scope_name : "jobcg.scope");
	return 0;
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

static json_object *rule_json(const struct jobcg_devrule *r, const struct jobcg_devnames *names)
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
	if (r->major != JOBCG_DEV_ANY && r->minor != JOBCG_DEV_ANY)
		name = jobcg_devnames_find(names, r->type, r->major, r->minor);
	json_object_object_add(o, "name", name ? json_object_new_string(name) : NULL);
	return o;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: jobcg policy [--json] [--root CGROUP] [--dev-dir DIR]\n\n"
		"Print the device policy below the jobcg root: the managed devices and, for each\n"
		"constrained job, step or task cgroup, the devices and access it is granted.\n\n"
		"  --json           machine-readable output\n"
		"  --root CGROUP    the jobcg root (absolute, or relative to the cgroup v2 mount)\n"
		"  --dev-dir DIR    where to look up device names (default /dev)\n");
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
	struct jobcg_devpolicy *p = NULL;
	struct jobcg_devnames *names = NULL;
	struct jobcg_devgrant *grants = NULL;
	struct jobcg_devrule *managed = NULL;
	size_t n_grants = 0, n_managed = 0;
	bool json = false;
	char root[4096];
	int c, e, rc = 1;

	optind = 0;
	opterr = 0; /* our own message names the option */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'r':
			root_opt = optarg;
			break;
		case 'd':
			dev_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_usage_error("policy", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_error("policy", "unexpected argument '%s'", argv[optind]);
	if (cli_load_config(g, JOBCG_CONFIG_NO_STAT, &conf) != 0)
		return 1;
	if (root_path(conf, root_opt, root, sizeof(root)) < 0) {
		jobcg_config_free(conf);
		return cli_fail("no cgroup v2 mount found");
	}
	e = jobcg_devpolicy_open_pinned(conf, root, &p);
	if (e == -ENOENT) {
		/* No node program for this root: list linear programs, touching nothing. */
		conf->cgroup.device_program = JOBCG_DEVPROG_LINEAR;
		e = jobcg_devpolicy_open(conf, root, NULL, 0, &p);
	}
	if (e < 0) {
		cli_print_error("policy");
		goto out;
	}
	if (jobcg_devpolicy_list(p, &grants, &n_grants) < 0 ||
	    jobcg_devpolicy_managed(p, &managed, &n_managed) < 0) {
		cli_print_error("policy");
		goto out;
	}
	(void)jobcg_devnames_scan(dev_dir, &names);

	bool node = jobcg_devpolicy_mode(p) == JOBCG_DEVPROG_NODE;
	if (json) {
		json_object *o = json_object_new_object(), *a;
		json_object_object_add(o, "root", json_object_new_string(jobcg_devpolicy_root(p)));
		json_object_object_add(o, "mode", json_object_new_string(node ? "node" : "linear"));
		json_object_object_add(
		    o, "pin_dir", node ? json_object_new_string(jobcg_devpolicy_pin_dir(p)) : NULL);
		a = json_object_new_array();
		for (size_t i = 0; i < n_managed; i++)
			json_object_array_add(a, rule_json(&managed[i], names));
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
					       json_object_new_string(level_name(grants[i].level)));
			if (grants[i].prog_id)
				json_object_object_add(gj, "prog_id",
						       json_object_new_int64(grants[i].prog_id));
			for (size_t j = 0; j < grants[i].n_rules; j++)
				json_object_array_add(rj, rule_json(&grants[i].rules[j], names));
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
			printf("mode: node (jobcg_node, maps pinned in %s)\n",
			       jobcg_devpolicy_pin_dir(p));
		else
			printf("mode: linear (one jobcg_linear program per constrained cgroup)\n");
		if (node) {
			printf("managed devices (%zu):", n_managed);
			for (size_t i = 0; i < n_managed; i++) {
				const char *nm = jobcg_devnames_find(
				    names, managed[i].type, managed[i].major, managed[i].minor);
				rule_text(&managed[i], dev, sizeof(dev), acc);
				printf("%s %s%s%s%s", i ? "," : "", dev, nm ? " (" : "",
				       nm ? nm : "", nm ? ")" : "");
			}
			printf("\n");
		}
		if (n_grants == 0) {
			printf("no constrained cgroups\n");
		} else {
			printf("%-32s %-5s %-12s %-6s %s\n", "CGROUP", "LEVEL", "DEVICE", "ACCESS",
			       "NAME");
			for (size_t i = 0; i < n_grants; i++) {
				char idbuf[32];
				const char *path = grants[i].path;
				if (!path) {
					snprintf(idbuf, sizeof(idbuf), "(gone, id %llu)",
						 (unsigned long long)grants[i].cgroup_id);
					path = idbuf;
				}
				if (grants[i].n_rules == 0)
					printf("%-32s %-5s %-12s %-6s %s\n", path,
					       level_name(grants[i].level), "(none)", "-",
					       "every managed device denied");
				for (size_t j = 0; j < grants[i].n_rules; j++) {
					const struct jobcg_devrule *r = &grants[i].rules[j];
					const char *nm =
					    r->major != JOBCG_DEV_ANY && r->minor != JOBCG_DEV_ANY
						? jobcg_devnames_find(names, r->type, r->major,
								      r->minor)
						: NULL;
					rule_text(r, dev, sizeof(dev), acc);
					printf("%-32s %-5s %-12s %-6s %s\n", j ? "" : path,
					       j ? "" : level_name(grants[i].level), dev, acc,
					       nm ? nm : "");
				}
			}
		}
	}
	rc = 0;
out:
	jobcg_devnames_free(names);
	jobcg_devgrants_free(grants, n_grants);
	free(managed);
	jobcg_devpolicy_free(p);
	jobcg_config_free(conf);
	return rc;
}
CLI_COMMAND(policy, cmd_policy, "print the device policy (cgroups, devices, access)");
