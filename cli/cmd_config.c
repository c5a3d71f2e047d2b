/* jobcg config: print the effective configuration, where each value came from, and the warnings. */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common.h"
#include "config_internal.h"
#include "parse.h"
#include "spec.h"

static const struct {
	unsigned flag;
	const char *name;
} flag_names[] = {
    {JOBCG_GRES_FLAG_COUNT_ONLY, "CountOnly"},
    {JOBCG_GRES_FLAG_ENV_NVIDIA, "nvidia_gpu_env"},
    {JOBCG_GRES_FLAG_ENV_AMD, "amd_gpu_env"},
    {JOBCG_GRES_FLAG_ENV_INTEL, "intel_gpu_env"},
    {JOBCG_GRES_FLAG_ENV_OPENCL, "opencl_env"},
    {JOBCG_GRES_FLAG_NO_GPU_ENV, "no_gpu_env"},
    {JOBCG_GRES_FLAG_ENV_UUID, "env_uuid"},
    {JOBCG_GRES_FLAG_ONE_SHARING, "one_sharing"},
    {JOBCG_GRES_FLAG_ALL_SHARING, "all_sharing"},
    {JOBCG_GRES_FLAG_EXPLICIT, "explicit"},
    {JOBCG_GRES_FLAG_NO_COMPANIONS, "no_companions"},
};

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: jobcg config [--json] [--no-stat] [--host NAME]\n\n"
	       "Read cgroup.conf and gres.conf (from --config-dir, $JOBCG_CONF_DIR or /etc/jobcg)\n"
	       "and print the effective configuration with where each value came from, the GRES\n"
	       "records for this host, and every warning. Exits 1 on any error.\n\n"
	       "  --json         print JSON\n"
	       "  --no-stat      do not stat() the gres.conf device files nor compare the\n"
	       "                 reserved CPUs and memory with this node (check files written\n"
	       "                 for another node)\n"
	       "  --host NAME    select gres.conf NodeName= lines as host NAME would\n"
	       "                 (default: $JOBCG_NODENAME, else the host name)\n"
	       "  -h, --help     show this help\n");
}

/* Warnings are part of this command's report, so the log callback does not repeat them. */
static void log_quiet_warnings(enum jobcg_log_level level, const char *msg, void *userdata)
{
	if (level == JOBCG_LOG_WARNING || level > JOBCG_LOG_NOTICE)
		return;
	fprintf(stderr, "jobcg: %s\n", msg);
}

static char *origin_text(const struct jobcg_origin *o)
{
	char *s = NULL;

	if (!o->file)
		return strdup("default");
	if (!o->line)
		return strdup(o->file);
	if (asprintf(&s, "%s:%u", o->file, o->line) < 0)
		return NULL;
	return s;
}

static char *flags_text(unsigned flags)
{
	char buf[512] = "";

	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (flags & flag_names[i].flag) {
			if (buf[0])
				strcat(buf, ",");
			strcat(buf, flag_names[i].name);
		}
	return strdup(buf);
}

static char *files_text(const struct jobcg_gres_record *r)
{
	size_t cap = 64, len = 0;
	char *s = calloc(1, cap);

	for (size_t i = 0; s && i < r->nfiles; i++) {
		const struct jobcg_gres_file *f = &r->files[i];
		char one[4200];
		int n;

		if (f->type)
			n = snprintf(one, sizeof(one), "%s%s(%c %u:%u)", i ? "," : "", f->path,
				     f->type, f->major, f->minor);
		else
			n = snprintf(one, sizeof(one), "%s%s", i ? "," : "", f->path);
		if (len + (size_t)n + 1 > cap) {
			char *ns;

			cap = (len + (size_t)n + 1) * 2;
			ns = realloc(s, cap);
			if (!ns) {
				free(s);
				return NULL;
			}
			s = ns;
		}
		memcpy(s + len, one, (size_t)n + 1);
		len += (size_t)n;
	}
	return s;
}

static char *cores_text(const struct jobcg_gres_record *r)
{
	char *s = NULL;

	if (!r->cores)
		return NULL;
	if (jobcg_format_cpulist(r->cores, r->cores_words, &s) < 0)
		return NULL;
	return s;
}

static int print_text(const struct jobcg_config *c)
{
	printf("# jobcg configuration for host %s", c->hostname);
	if (c->config_dir)
		printf(", from %s", c->config_dir);
	printf("\n# files read:");
	for (char **f = c->files; f && *f; f++)
		printf(" %s", *f);
	printf("%s\n\n[cgroup.conf]\n", c->files ? "" : " none (defaults)");
	for (size_t i = 0; i < c->nentries; i++) {
		const struct jobcg_config_entry *e = &c->entries[i];
		char *o = origin_text(&e->origin);

		printf("%-24s %-28s # %s\n", e->key,
		       !e->value   ? "(unset)"
		       : *e->value ? e->value
				   : "(none)",
		       o ? o : "?");
		free(o);
	}
	printf("\n[gres.conf]\n");
	printf("%-24s %-28s # %s\n", "AutoDetect",
	       c->gres.node_autodetect ? c->gres.node_autodetect
	       : c->gres.autodetect    ? c->gres.autodetect
				       : "(unset)",
	       c->gres.node_autodetect ? "NodeName line for this host"
	       : c->gres.autodetect    ? "global"
				       : "default");
	if (!c->gres.nrecords)
		printf("# no GRES records for this host\n");
	for (size_t i = 0; i < c->gres.nrecords; i++) {
		const struct jobcg_gres_record *r = &c->gres.records[i];
		char *files = files_text(r), *cores = cores_text(r), *flags = flags_text(r->flags),
		     *o = origin_text(&r->origin);

		printf("%s %u", r->name, r->index);
		if (r->type)
			printf(" type=%s", r->type);
		printf(" count=%llu", (unsigned long long)r->count);
		if (r->nfiles)
			printf(" %s=%s", r->nfiles > 1 ? "files" : "file", files ? files : "?");
		if (r->cores)
			printf(" cores=%s", cores && *cores ? cores : "(none)");
		if (r->nlinks) {
			printf(" links=");
			for (size_t l = 0; l < r->nlinks; l++)
				printf("%s%d", l ? "," : "", r->links[l]);
		}
		if (flags && *flags)
			printf(" flags=%s", flags);
		printf("  # %s\n", o ? o : "?");
		free(files);
		free(cores);
		free(flags);
		free(o);
	}
	if (c->warnings) {
		printf("\n[warnings]\n");
		for (char **w = c->warnings; *w; w++)
			printf("%s\n", *w);
	}
	return 0;
}

static struct json_object *entry_json(const struct jobcg_config_entry *e)
{
	if (!e->value)
		return NULL;
	switch (e->kind) {
	case JOBCG_CONFIG_BOOL:
		return json_object_new_boolean(strcmp(e->value, "yes") == 0);
	case JOBCG_CONFIG_NUMBER: {
		char *end;
		long long ll;

		errno = 0;
		ll = strtoll(e->value, &end, 10);
		if (end != e->value && !*end && !errno)
			return json_object_new_int64(ll);
		double d = strtod(e->value, &end);
		if (!*end)
			return json_object_new_double(d);
		return json_object_new_string(e->value); /* "UNLIMITED" */
	}
	case JOBCG_CONFIG_LIST: {
		struct json_object *a = json_object_new_array();
		char *dup = strdup(e->value), *save = NULL;

		for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save))
			json_object_array_add(a, json_object_new_string(t));
		free(dup);
		return a;
	}
	case JOBCG_CONFIG_STRING:
		break;
	}
	return json_object_new_string(e->value);
}

static struct json_object *str_or_null(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

static int print_json(const struct jobcg_config *c)
{
	struct json_object *root = json_object_new_object(), *cg = json_object_new_object(),
			   *gres = json_object_new_object(), *recs = json_object_new_array(),
			   *warn = json_object_new_array(), *files = json_object_new_array();

	json_object_object_add(root, "config_dir", str_or_null(c->config_dir));
	json_object_object_add(root, "hostname", str_or_null(c->hostname));
	for (char **f = c->files; f && *f; f++)
		json_object_array_add(files, json_object_new_string(*f));
	json_object_object_add(root, "files", files);
	for (size_t i = 0; i < c->nentries; i++) {
		struct json_object *o = json_object_new_object();
		char *org = origin_text(&c->entries[i].origin);

		json_object_object_add(o, "value", entry_json(&c->entries[i]));
		json_object_object_add(o, "origin", str_or_null(org));
		free(org);
		json_object_object_add(cg, c->entries[i].key, o);
	}
	json_object_object_add(root, "cgroup", cg);
	json_object_object_add(gres, "autodetect", str_or_null(c->gres.autodetect));
	json_object_object_add(gres, "node_autodetect", str_or_null(c->gres.node_autodetect));
	for (size_t i = 0; i < c->gres.nrecords; i++) {
		const struct jobcg_gres_record *r = &c->gres.records[i];
		struct json_object *o = json_object_new_object(), *fa = json_object_new_array(),
				   *fl = json_object_new_array();
		char *cores = cores_text(r), *org = origin_text(&r->origin);

		json_object_object_add(o, "name", json_object_new_string(r->name));
		json_object_object_add(o, "index", json_object_new_int64(r->index));
		json_object_object_add(o, "type", str_or_null(r->type));
		json_object_object_add(o, "count", json_object_new_uint64(r->count));
		for (size_t f = 0; f < r->nfiles; f++) {
			struct json_object *fo = json_object_new_object();
			char t[2] = {r->files[f].type, 0};

			json_object_object_add(fo, "path",
					       json_object_new_string(r->files[f].path));
			if (r->files[f].type) {
				json_object_object_add(fo, "type", json_object_new_string(t));
				json_object_object_add(fo, "major",
						       json_object_new_int64(r->files[f].major));
				json_object_object_add(fo, "minor",
						       json_object_new_int64(r->files[f].minor));
			}
			json_object_array_add(fa, fo);
		}
		json_object_object_add(o, "files", fa);
		json_object_object_add(o, "cores", str_or_null(cores));
		if (r->nlinks) {
			struct json_object *la = json_object_new_array();

			for (size_t l = 0; l < r->nlinks; l++)
				json_object_array_add(la, json_object_new_int64(r->links[l]));
			json_object_object_add(o, "links", la);
		} else
			json_object_object_add(o, "links", NULL);
		for (size_t k = 0; k < sizeof(flag_names) / sizeof(flag_names[0]); k++)
			if (r->flags & flag_names[k].flag)
				json_object_array_add(fl,
						      json_object_new_string(flag_names[k].name));
		json_object_object_add(o, "flags", fl);
		json_object_object_add(o, "autodetect", str_or_null(r->autodetect));
		json_object_object_add(o, "origin", str_or_null(org));
		free(cores);
		free(org);
		json_object_array_add(recs, o);
	}
	json_object_object_add(gres, "records", recs);
	json_object_object_add(root, "gres", gres);
	for (char **w = c->warnings; w && *w; w++)
		json_object_array_add(warn, json_object_new_string(*w));
	json_object_object_add(root, "warnings", warn);
	puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
						      JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
	return 0;
}

/* The failure @r: where the error record explains it, with its file, line and column. */
static void print_json_error(int r)
{
	const struct jobcg_error *e = jobcg_last_error();
	struct json_object *root = json_object_new_object(), *err = json_object_new_object();
	bool mine = e->code == r;

	json_object_object_add(err, "file",
			       mine && e->file[0] ? json_object_new_string(e->file) : NULL);
	json_object_object_add(err, "line", json_object_new_int64(mine ? e->line : 0));
	json_object_object_add(err, "column", json_object_new_int64(mine ? e->column : 0));
	json_object_object_add(err, "message", json_object_new_string(jobcg_error_message(r)));
	json_object_object_add(err, "errno", json_object_new_int64(-r));
	json_object_object_add(root, "error", err);
	puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
						      JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
}

static int cmd_config(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"no-stat", no_argument, NULL, 'n'},
	    {"host", required_argument, NULL, 'H'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *c = NULL;
	const char *host = NULL;
	bool json = false;
	unsigned flags = 0;
	int opt, r;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 'n':
			flags |= JOBCG_CONFIG_NO_STAT;
			break;
		case 'H':
			if ((r = cli_once("config", "--host", host, optarg)))
				return r;
			if (!*optarg)
				return cli_usage_error("config", "--host needs a name");
			host = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_option_error("config", argc, argv, "+h");
		}
	}
	if (optind < argc)
		return cli_usage_error("config", "unexpected argument '%s'", argv[optind]);

	jobcg_set_log(log_quiet_warnings, NULL, g->verbose ? JOBCG_LOG_DEBUG : JOBCG_LOG_NOTICE);
	r = jobcg_config_load(g->config_dir, host, flags, &c);
	/* As the device files are, the reservation is checked against this node unless the
	 * files were written for another (--no-stat). */
	if (r >= 0 && !(flags & JOBCG_CONFIG_NO_STAT) &&
	    (r = jobcg_spec_check_node(&c->cgroup)) < 0) {
		jobcg_config_free(c);
		c = NULL;
	}
	if (r < 0) {
		if (json)
			print_json_error(r);
		cli_print_error(r, "configuration");
		return 1;
	}
	r = json ? print_json(c) : print_text(c);
	jobcg_config_free(c);
	return r < 0 ? 1 : 0;
}
CLI_COMMAND(config, cmd_config, "check the configuration and show where each value comes from");
