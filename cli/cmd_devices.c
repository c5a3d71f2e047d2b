/* jobcg devices: which devices a live cgroup may open, read back from its eBPF programs. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <linux/bpf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "decode_out.h"
#include "jobcg/inspect.h"

static void help(void)
{
	printf("Usage: jobcg devices PATH|JOB[.STEP] [--json]\n\n"
	       "Show the device programs that apply to a cgroup (BPF_PROG_QUERY, effective), each\n"
	       "with its name, id, the cgroup it is attached to and its attach flags, and the\n"
	       "device rules they enforce together (every program must allow), naming device\n"
	       "nodes from /dev. PATH is a cgroup directory (absolute, or relative to the cgroup\n"
	       "v2 mount); JOB[.STEP], a job id and a step id, is resolved under the jobcg root\n"
	       "(JobcgRoot= of cgroup.conf, or $JOBCG_ROOT). Needs root.\n\n"
	       "  --json     print JSON\n"
	       "  -h, --help show this help\n");
}

static const char *flags_str(uint32_t f)
{
	if (f & BPF_F_ALLOW_MULTI)
		return "multi";
	if (f & BPF_F_ALLOW_OVERRIDE)
		return "override";
	return "none";
}

static struct json_object *prog_json(const struct jobcg_cgprog *p)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_int64(p->id));
	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "attached_at",
			       p->attached_at ? json_object_new_string(p->attached_at) : NULL);
	json_object_object_add(o, "attach_flags",
			       json_object_new_string(flags_str(p->attach_flags)));
	json_object_object_add(o, "instructions", json_object_new_int64((int64_t)p->n_insns));
	if (p->decoded)
		json_object_object_add(o, "decoded", decode_out_json(p->decoded));
	else
		json_object_object_add(
		    o, "opaque",
		    json_object_new_string(p->opaque_reason ? p->opaque_reason : "unknown"));
	return o;
}

static int cmd_devices(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	bool json = false;
	char path[PATH_MAX];
	struct jobcg_cginspect *in = NULL;
	char **v1 = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("devices", argc, argv, "h");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("devices", "expected one PATH or JOB[.STEP]");
	if (!*argv[optind])
		return cli_usage_error("devices", "PATH or JOB[.STEP]: empty argument");
	r = resolve_cgroup_arg(g, argv[optind], path, sizeof(path));
	if (r < 0) {
		if (r != -ECANCELED)
			cli_print_error(r, "devices");
		return 1;
	}
	r = jobcg_cgroup_inspect(path, NULL, &in);
	if (r < 0) {
		cli_print_error(r, NULL);
		if (r == -EPERM && geteuid() != 0)
			fprintf(
			    stderr,
			    "jobcg: run as root: reading device programs needs CAP_SYS_ADMIN\n");
		return 1;
	}
	v1 = in->notes;
	struct devnames *dn = devnames_load("/dev");

	if (json) {
		struct json_object *o = json_object_new_object(), *progs = json_object_new_array(),
				   *notes = json_object_new_array();
		json_object_object_add(o, "cgroup", json_object_new_string(in->path));
		json_object_object_add(o, "cgroup_id",
				       json_object_new_int64((int64_t)in->cgroup_id));
		for (size_t k = 0; k < in->n_progs; k++)
			json_object_array_add(progs, prog_json(&in->progs[k]));
		json_object_object_add(o, "programs", progs);
		if (in->combined)
			json_object_object_add(o, "combined", decode_out_json(in->combined));
		json_object_object_add(o, "all_allowed", json_object_new_boolean(in->n_progs == 0));
		bool approx = in->combined && jobcg_decoded_approximate(in->combined);
		json_object_object_add(o, "complete", json_object_new_boolean(!in->any_opaque));
		json_object_object_add(o, "approximate", json_object_new_boolean(approx));
		for (char **n = v1; n && *n; n++)
			json_object_array_add(notes, json_object_new_string(*n));
		json_object_object_add(o, "notes", notes);
		printf("%s\n", json_object_to_json_string_ext(
				   o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else {
		printf("cgroup %s (id %llu)\n", in->path, (unsigned long long)in->cgroup_id);
		if (in->n_progs == 0)
			printf("no device programs apply: every device may be opened (as far as "
			       "cgroup v2 is concerned)\n");
		else
			printf("%zu effective device program%s (a request must pass all):\n",
			       in->n_progs, in->n_progs == 1 ? "" : "s");
		for (size_t k = 0; k < in->n_progs; k++) {
			const struct jobcg_cgprog *p = &in->progs[k];
			printf("  id %u  name %s  attached at %s  flags %s  %zu instructions\n",
			       p->id, p->name[0] ? p->name : "(none)",
			       p->attached_at ? p->attached_at : "(not found)",
			       flags_str(p->attach_flags), p->n_insns);
			if (!p->decoded)
				printf("    opaque: %s\n",
				       p->opaque_reason ? p->opaque_reason : "unknown");
		}
		if (in->n_progs > 1) {
			for (size_t k = 0; k < in->n_progs; k++) {
				if (!in->progs[k].decoded)
					continue;
				printf("\nrules of program %u (%s):\n", in->progs[k].id,
				       in->progs[k].name);
				decode_out_text(stdout, in->progs[k].decoded, NULL);
			}
			printf("\ncombined rules:\n");
		} else if (in->n_progs == 1)
			printf("\nrules:\n");
		if (in->combined)
			decode_out_text(stdout, in->combined, dn);
		if (in->any_opaque)
			printf("# incomplete: an opaque program may deny more than shown\n");
		if (in->combined && jobcg_decoded_approximate(in->combined))
			printf("# uncertain: the rules are approximate (sampled, not proven); ask "
			       "'jobcg who-has' about a device for an exact answer\n");
		for (char **n = v1; n && *n; n++)
			printf("note: %s\n", *n);
	}
	fflush(stdout);
	devnames_free(dn);
	jobcg_cginspect_free(in);
	return 0;
}
CLI_COMMAND(devices, cmd_devices, "show which devices a cgroup may open (decoded eBPF programs)");
