/* jobcg resv: reservations (create, list, show, verify [--repair], delete), each with --json. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "parse.h"
#include "jobcg/resv.h"
#include "util.h"

static const char usage[] =
    "Usage: jobcg resv create NAME [--devices gpu:0-1,3 | --gres gpu:N] [--cpus LIST]\n"
    "                         [--mem SIZE] [--isolated] [--users U1,U2] [--json]\n"
    "       jobcg resv list [--json]\n"
    "       jobcg resv show NAME [--json]\n"
    "       jobcg resv verify [NAME] [--repair] [--json]\n"
    "       jobcg resv delete NAME [--json]\n\n"
    "A reservation keeps devices, CPUs and memory for the jobs placed in it\n"
    "('jobcg alloc/run --reservation NAME'): its devices leave the shared pool\n"
    "(denied in the kernel to every cgroup in jobcg's tree outside it), its CPUs\n"
    "become a cpuset partition, its memory is protected with memory.min and capped\n"
    "with memory.max. verify reads the kernel's view back: VALID, or DEGRADED with\n"
    "the kernel's words (exit status 1); --repair heals what it can and verifies\n"
    "again. Needs root. See jobcg-resv(1).\n";

#define RESV_NAME_FORM "[a-z0-9][a-z0-9_-]{0,31}"

static void json_add_str(struct json_object *o, const char *k, const char *v)
{
	json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

static struct json_object *info_json(const struct jobcg_resv_info *i)
{
	struct json_object *o = json_object_new_object(), *users = json_object_new_array(),
			   *jobs = json_object_new_array();

	json_add_str(o, "name", i->name);
	json_add_str(o, "path", i->path);
	json_add_str(o, "devices", i->devices);
	json_add_str(o, "cpus", i->cpus);
	json_object_object_add(o, "mem_bytes", json_object_new_uint64(i->mem_bytes));
	json_object_object_add(o, "isolated", json_object_new_boolean(i->isolated));
	for (size_t k = 0; k < i->n_users; k++)
		json_object_array_add(users, json_object_new_uint64(i->users[k]));
	json_object_object_add(o, "users", users);
	for (size_t k = 0; k < i->n_jobs; k++)
		json_object_array_add(jobs, json_object_new_uint64(i->jobs[k]));
	json_object_object_add(o, "jobs", jobs);
	json_object_object_add(o, "created", json_object_new_int64(i->created_sec));
	json_add_str(o, "state",
		     !i->created_sec ? "incomplete"
		     : i->removing   ? "removing"
				     : "ready");
	return o;
}

static void info_text(const struct jobcg_resv_info *i)
{
	printf("reservation %s%s\n", i->name,
	       !i->created_sec ? " (incomplete: 'jobcg gc' removes it)"
	       : i->removing   ? " (being deleted: 'jobcg gc' finishes it)"
			       : "");
	printf("  path: %s\n", i->path);
	printf("  devices: %s\n", *i->devices ? i->devices : "none");
	printf("  cpus: %s%s\n", *i->cpus ? i->cpus : "none",
	       *i->cpus && i->isolated ? " (isolated)" : "");
	if (i->mem_bytes)
		printf("  memory: %" PRIu64 " bytes (memory.min)\n", i->mem_bytes);
	else
		printf("  memory: none\n");
	printf("  users: ");
	if (!i->n_users)
		printf("anyone");
	for (size_t k = 0; k < i->n_users; k++)
		printf("%s%u", k ? "," : "", (unsigned)i->users[k]);
	printf("\n  jobs:");
	if (!i->n_jobs)
		printf(" none");
	for (size_t k = 0; k < i->n_jobs; k++)
		printf(" %u", i->jobs[k]);
	printf("\n");
}

/* --users U1,U2: names or numbers, resolved here (the library stores uids). */
static int parse_users(const char *arg, uid_t **ret, size_t *ret_n)
{
	_cleanup_strv_free_ char **names = NULL;
	uid_t *v;
	size_t n = 0;
	int r = 0;

	/* One lookup per name: each asks getent, and the library drops repeats anyway. */
	if (cli_split_names(arg, &names) < 0 ||
	    !(v = calloc(strv_length(names) + 1, sizeof(uid_t))))
		return cli_usage_error("resv", "out of memory");
	for (char **tok = names; *tok; tok++) {
		gid_t gid;

		r = cli_lookup_user(*tok, &v[n], &gid);
		if (r == -ENOENT || r == -EINVAL) {
			r = cli_usage_error("resv", "--users: no such user '%s'", *tok);
			break;
		}
		if (r < 0) {
			r = 1;
			break;
		}
		n++;
	}
	if (r == 0 && n == 0)
		r = cli_usage_error("resv", "--users '%s': no user named", arg);
	if (r) {
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* The arguments of create, checked before anything is opened or made: -1 to go on, else the
 * exit code (printed). *ret->users is allocated. */
static int create_args(int argc, char **argv, struct jobcg_resv_spec *ret, bool *json)
{
	static const struct option opts[] = {
	    {"devices", required_argument, NULL, 'd'},
	    {"gres", required_argument, NULL, 'G'},
	    {"cpus", required_argument, NULL, 'c'},
	    {"mem", required_argument, NULL, 'm'},
	    {"isolated", no_argument, NULL, 'I'},
	    {"users", required_argument, NULL, 'u'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_resv_spec s = {};
	/* Freed on every way out but success, where *ret holds it. */
	_cleanup_free_ uid_t *users = NULL;
	const char *cpus_arg = NULL, *mem_arg = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if ((r = cli_once("resv", "--devices", s.devices, optarg)))
				return r;
			if (jobcg_resv_devices_syntax(optarg) < 0)
				return cli_usage_error("resv", "%s", jobcg_last_error()->message);
			s.devices = optarg;
			break;
		case 'G': {
			struct jobcg_gres_request *req = NULL;

			if ((r = cli_once("resv", "--gres", s.gres, optarg)))
				return r;
			if (jobcg_gres_request_parse(optarg, &req) < 0)
				return cli_usage_error("resv", "--gres: %s",
						       jobcg_last_error()->message);
			jobcg_gres_request_free(req);
			s.gres = optarg;
			break;
		}
		case 'c': {
			uint64_t *bits = NULL;
			size_t words = 0;

			if ((r = cli_once("resv", "--cpus", cpus_arg, optarg)))
				return r;
			cpus_arg = optarg;
			if (jobcg_parse_cpulist(optarg, &bits, &words) < 0)
				return cli_usage_error("resv", "--cpus '%s': %s", optarg,
						       jobcg_last_error()->message);
			free(bits);
			s.cpus = optarg;
			break;
		}
		case 'm':
			if ((r = cli_once("resv", "--mem", mem_arg, optarg)))
				return r;
			mem_arg = optarg;
			if (jobcg_parse_size(optarg, 1u << 20, 0, &s.mem_bytes) < 0 ||
			    s.mem_bytes == 0)
				return cli_usage_error("resv", "--mem '%s': need a size like 4G",
						       optarg);
			break;
		case 'I':
			s.isolated = true;
			break;
		case 'u': {
			/* Every --users adds its users, as a list option does (adopt --service
			 * too): a second one replacing the first would lock out whom the first
			 * named. */
			uid_t *more = NULL, *all;
			size_t n = 0;

			if ((r = parse_users(optarg, &more, &n)))
				return r;
			all = realloc(users, (s.n_users + n) * sizeof(uid_t));
			if (!all) {
				free(more);
				return cli_fail("out of memory");
			}
			memcpy(all + s.n_users, more, n * sizeof(uid_t));
			free(more);
			users = all;
			s.n_users += n;
			break;
		}
		case 'j':
			*json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return cli_option_error("resv create", argc, argv, "h");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("resv", "create needs exactly one NAME");
	if (!jobcg_resv_name_valid(argv[optind]))
		return cli_usage_error("resv", "invalid reservation name '%s': need %s",
				       argv[optind], RESV_NAME_FORM);
	s.name = argv[optind];
	s.users = TAKE_PTR(users);
	*ret = s;
	return -1;
}

static int do_create(struct jobcg_ctx *ctx, const struct jobcg_resv_spec *s, bool json)
{
	int r, e;

	r = jobcg_resv_create(ctx, s);
	if (r < 0) {
		cli_print_error(r, NULL);
		return 1;
	}
	{
		struct jobcg_resv_info *i = NULL;

		/* It exists: a failure to read it back is worth a word, not a failed create. */
		if ((e = jobcg_resv_info_get(ctx, s->name, &i)) < 0) {
			fprintf(stderr, "jobcg: warning: reservation %s created, but: %s\n",
				s->name, jobcg_last_error()->message);
			if (json) {
				struct json_object *o = json_object_new_object();

				json_add_str(o, "name", s->name);
				cli_json_print(stdout, o);
			} else
				printf("reservation %s created\n", s->name);
			return 0;
		}
		if (json)
			cli_json_print(stdout, info_json(i));
		else
			printf("reservation %s created%s%s\n", s->name, *i->devices ? " with " : "",
			       i->devices);
		jobcg_resv_info_free(i);
	}
	return 0;
}

static int show_one(struct jobcg_ctx *ctx, const char *name, bool json, struct json_object *arr)
{
	struct jobcg_resv_info *i = NULL;
	int e;

	if ((e = jobcg_resv_info_get(ctx, name, &i)) < 0) {
		cli_print_error(e, NULL);
		return -1;
	}
	if (arr)
		json_object_array_add(arr, info_json(i));
	else if (json)
		cli_json_print(stdout, info_json(i));
	else
		info_text(i);
	jobcg_resv_info_free(i);
	return 0;
}

static int verify_one(struct jobcg_ctx *ctx, const char *name, unsigned flags, bool json,
		      struct json_object *arr)
{
	struct jobcg_resv_status *st = NULL;
	int rc, e;

	if ((e = jobcg_resv_verify(ctx, name, flags, &st)) < 0) {
		cli_print_error(e, NULL);
		return -1;
	}
	rc = st->valid ? 0 : 1;
	if (json) {
		struct json_object *o = json_object_new_object(), *p = json_object_new_array();

		json_add_str(o, "name", name);
		json_add_str(o, "state", st->valid ? "VALID" : "DEGRADED");
		for (char **q = st->problems; q && *q; q++)
			json_object_array_add(p, json_object_new_string(*q));
		json_object_object_add(o, "problems", p);
		json_add_str(o, "partition", st->partition);
		json_add_str(o, "effective", st->effective);
		json_add_str(o, "note", st->note);
		json_object_object_add(o, "repaired", json_object_new_boolean(st->repaired));
		json_object_array_add(arr, o);
	} else {
		printf("%s: %s%s\n", name, st->valid ? "VALID" : "DEGRADED",
		       st->repaired ? (st->valid ? " (repaired)" : " (repair failed)") : "");
		for (char **q = st->problems; q && *q; q++)
			printf("  %s\n", *q);
		if (st->partition)
			printf("  cpuset.cpus.partition: %s\n", st->partition);
		if (st->effective)
			printf("  cpuset.cpus.effective: %s\n", st->effective);
		if (st->note)
			printf("  note: %s\n", st->note);
	}
	jobcg_resv_status_free(st);
	return rc;
}

/* Arguments of list/show/verify/delete: NAME? plus --json (and --repair for verify). */
static int simple_args(int argc, char **argv, const char *verb, bool repair_ok, bool *json,
		       bool *repair, const char **name)
{
	static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
					     {"repair", no_argument, NULL, 'r'},
					     {"help", no_argument, NULL, 'h'},
					     {}};
	char cmd[32];
	int c;

	snprintf(cmd, sizeof(cmd), "resv %s", verb);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j')
			*json = true;
		else if (c == 'r' && repair_ok)
			*repair = true;
		else if (c == 'h') {
			fputs(usage, stdout);
			return 0;
		} else if (c == 'r')
			return cli_usage_error(cmd, "--repair goes with verify only");
		else
			return cli_option_error(cmd, argc, argv, "h");
	}
	if (optind < argc - 1)
		return cli_usage_error("resv", "%s: too many arguments", verb);
	*name = optind < argc ? argv[optind] : NULL;
	return -1;
}

static int cmd_resv(int argc, char **argv, const struct cli_global *g)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	const char *verb, *name = NULL;
	struct jobcg_resv_spec spec = {};
	bool json = false, repair = false;
	int r, e;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	verb = argv[1];
	if (!!strcmp(verb, "create") && !!strcmp(verb, "list") && !!strcmp(verb, "show") &&
	    !!strcmp(verb, "verify") && !!strcmp(verb, "delete"))
		return cli_usage_error("resv",
				       "unknown verb '%s' (create, list, show, verify, "
				       "delete)",
				       verb);
	if (!strcmp(verb, "create")) {
		r = create_args(argc - 1, argv + 1, &spec, &json);
		if (r >= 0)
			return r;
	} else {
		r = simple_args(argc - 1, argv + 1, verb, !strcmp(verb, "verify"), &json, &repair,
				&name);
		if (r >= 0)
			return r;
		if ((!strcmp(verb, "show") || !strcmp(verb, "delete")) && !name)
			return cli_usage_error("resv", "%s needs a NAME", verb);
		if (!strcmp(verb, "list") && name)
			return cli_usage_error("resv", "list takes no NAME");
		if (name && !jobcg_resv_name_valid(name))
			return cli_usage_error("resv", "invalid reservation name '%s': need %s",
					       name, RESV_NAME_FORM);
	}
	/* The spec is in trusted.* xattrs, which only root reads: another user would be shown
	 * every reservation as incomplete, with no devices and no users, as metrics would. */
	if (geteuid() != 0) {
		free((uid_t *)spec.users);
		return cli_fail("resv %s: needs root: reservations are kept in trusted.* extended "
				"attributes, which only root can read",
				verb);
	}
	/* Looking goes on past a configuration error, as list and show do for jobs; changing a
	 * reservation (its devices, CPUs, memory) waits until it is fixed. */
	if (!strcmp(verb, "list") || !strcmp(verb, "show"))
		r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	else
		r = cli_ctx_open(g, 0, &conf, &ctx);
	if (r) {
		free((uid_t *)spec.users);
		return r;
	}
	if (!strcmp(verb, "create")) {
		r = do_create(ctx, &spec, json);
		free((uid_t *)spec.users);
	} else if (!strcmp(verb, "show")) {
		r = show_one(ctx, name, json, NULL) < 0 ? 1 : 0;
	} else if (!strcmp(verb, "delete")) {
		if ((e = jobcg_resv_delete(ctx, name)) < 0) {
			cli_print_error(e, NULL);
			r = 1;
		} else {
			if (json) {
				struct json_object *o = json_object_new_object();

				json_add_str(o, "deleted", name);
				cli_json_print(stdout, o);
			} else
				printf("reservation %s deleted\n", name);
			r = 0;
		}
	} else {
		char **names = NULL;
		struct json_object *arr = json ? json_object_new_array() : NULL;
		bool failed = false;

		r = 0;
		if (name) {
			names = calloc(2, sizeof(char *));
			if (!names || !(names[0] = strdup(name)))
				failed = cli_fail("out of memory");
		} else if ((e = jobcg_resv_list(ctx, &names)) < 0) {
			cli_print_error(e, NULL);
			failed = true;
		}
		for (char **k = names; k && *k; k++) {
			int one =
			    !strcmp(verb, "list")
				? show_one(ctx, *k, json, arr)
				: verify_one(ctx, *k, repair ? JOBCG_RESV_REPAIR : 0, json, arr);

			if (one < 0)
				failed = true;
			else if (one > r)
				r = one;
		}
		if (failed)
			r = 1; /* the error said; no list that lacks what could not be read */
		else if (!json && names && !names[0])
			printf("no reservations\n");
		if (arr && !failed)
			cli_json_print(stdout, arr);
		else if (arr)
			json_object_put(arr);
		jobcg_strv_free(names);
	}
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(resv, cmd_resv, "reservations: devices, CPUs and memory kept for some jobs");
