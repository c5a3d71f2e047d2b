/* jobcg CLI: opening the context, JSON output, accounting and option helpers for subcommands. */
#include <ctype.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/resv.h"
#include "jobcg/gres.h"
#include "jobcg/error.h"
#include "parse.h"
#include "spec.h"
#include "util.h"

static int ctx_open(const struct cli_global *g, unsigned conf_flags, unsigned flags,
		    struct jobcg_config **ret_conf, struct jobcg_ctx **ret_ctx)
{
	struct jobcg_config *conf = NULL;
	int r;

	r = cli_load_config(g, JOBCG_CONFIG_NO_ENTRIES | conf_flags, &conf);
	if (r != 0)
		return r;
	if ((r = jobcg_ctx_open(conf, flags, ret_ctx)) < 0) {
		cli_print_error(r, NULL);
		jobcg_config_free(conf);
		return 1;
	}
	*ret_conf = conf;
	return 0;
}

int cli_ctx_open(const struct cli_global *g, unsigned flags, struct jobcg_config **ret_conf,
		 struct jobcg_ctx **ret_ctx)
{
	return ctx_open(g, 0, flags, ret_conf, ret_ctx);
}

int cli_ctx_open_cleanup(const struct cli_global *g, unsigned flags, struct jobcg_config **ret_conf,
			 struct jobcg_ctx **ret_ctx)
{
	return ctx_open(g, CLI_CONFIG_TOLERATE, flags, ret_conf, ret_ctx);
}

void cli_ctx_close(struct jobcg_config *conf, struct jobcg_ctx *ctx)
{
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
}

void cli_json_print(FILE *f, struct json_object *obj)
{
	fprintf(f, "%s\n",
		json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY |
							JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(obj);
}

struct json_object *cli_json_acct(const struct jobcg_acct *a)
{
	struct json_object *o = json_object_new_object();

	for (unsigned i = 0; i < _JOBCG_ACCT_MAX; i++)
		json_object_object_add(o, jobcg_acct_item_name(i),
				       jobcg_acct_has(a, i) ? json_object_new_uint64(a->value[i])
							    : NULL);
	return o;
}

void cli_print_acct(FILE *f, const struct jobcg_acct *a)
{
	for (unsigned i = 0; i < _JOBCG_ACCT_MAX; i++) {
		if (jobcg_acct_has(a, i))
			fprintf(f, "  %-16s %llu\n", jobcg_acct_item_name(i),
				(unsigned long long)a->value[i]);
		else
			fprintf(f, "  %-16s unavailable\n", jobcg_acct_item_name(i));
	}
}

int cli_parse_signal(const char *s)
{
	unsigned v;

	if (!s || !*s)
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '9')
		return parse_uint(s, NSIG - 1, &v) < 0 || v == 0 ? -EINVAL : (int)v;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	/* Real-time signals as kill(1) names them: RTMIN, RTMIN+N, RTMAX, RTMAX-N. */
	if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
		bool min = strncasecmp(s, "RTMIN", 5) == 0;
		int base = min ? SIGRTMIN : SIGRTMAX;

		if (!s[5])
			return base;
		if (s[5] != (min ? '+' : '-') || !isdigit((unsigned char)s[6]) ||
		    parse_uint(s + 6, (unsigned)(SIGRTMAX - SIGRTMIN), &v) < 0)
			return -EINVAL;
		return min ? base + (int)v : base - (int)v;
	}
	for (int i = 1; i < 32; i++) {
		const char *n = sigabbrev_np(i);

		if (n && strcasecmp(n, s) == 0)
			return i;
	}
	return -EINVAL;
}

int cli_parse_time(const char *s, uint64_t now_usec, uint64_t *ret_usec)
{
	static const struct {
		char unit;
		uint64_t sec;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
	static const char *const forms[][2] = {{"%Y-%m-%dT%H:%M:%S", "9999-99-99T99:99:99"},
					       {"%Y-%m-%dT%H:%M", "9999-99-99T99:99"},
					       {"%Y-%m-%d", "9999-99-99"}};
	const uint64_t ten_years = 3660ull * 86400;
	uint64_t v;
	const char *end;

	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '@') {
		/* digits only: a sign would wrap, a fraction be dropped */
		if (!isdigit((unsigned char)s[1]) || parse_u64(s + 1, UINT64_MAX / 1000000, &v) < 0)
			return -EINVAL;
		*ret_usec = v * 1000000;
		return 0;
	}
	if (strncmp(s, "now", 3) == 0) {
		if (!s[3]) {
			*ret_usec = now_usec;
			return 0;
		}
		if (s[3] != '-' || !isdigit((unsigned char)s[4]) ||
		    parse_u64_prefix(s + 4, ten_years, &v, &end) < 0 || !end[0] || end[1])
			return -EINVAL;
		for (size_t i = 0; i < ELEMENTSOF(units); i++)
			if (units[i].unit == end[0]) {
				if (v * units[i].sec > ten_years)
					return -EINVAL;
				v *= units[i].sec * 1000000;
				*ret_usec = v < now_usec ? now_usec - v : 0;
				return 0;
			}
		return -EINVAL;
	}
	for (size_t i = 0; i < ELEMENTSOF(forms); i++) {
		struct tm tm = {}, want;
		const char *rest;
		time_t t;

		const char *shape = forms[i][1], *p = s;

		/* strptime() takes blanks and numbers of any width: the shape is checked first
		 * (a 9 of it is a digit) */
		for (; *shape && *p && (*shape == '9' ? isdigit((unsigned char)*p) : *p == *shape);
		     shape++, p++)
			;
		if (*shape || *p)
			continue;
		rest = strptime(s, forms[i][0], &tm);
		if (!rest || *rest)
			continue;
		want = tm;
		tm.tm_isdst = -1;
		t = mktime(&tm);
		/* 2026-02-30 would be March 2nd: a date that does not exist is refused */
		if (t == (time_t)-1 || tm.tm_year != want.tm_year || tm.tm_mon != want.tm_mon ||
		    tm.tm_mday != want.tm_mday || tm.tm_hour != want.tm_hour ||
		    tm.tm_min != want.tm_min || t < 0)
			return -ERANGE;
		*ret_usec = (uint64_t)t * 1000000;
		return 0;
	}
	return -EINVAL;
}

int cli_parse_device(const char *s, char *type, uint32_t *major, uint32_t *minor)
{
	struct stat st;
	uint64_t ma, mi;
	const char *p;
	int r;

	if ((s[0] == 'c' || s[0] == 'b') && s[1] == ' ') {
		/* digits only: a sign or a number past 32 bits must not name another device */
		if ((r = parse_u64_prefix(s + 2, CLI_DEV_MAJOR_MAX, &ma, &p)) < 0)
			return r;
		if (*p != ':')
			return -EINVAL;
		if ((r = parse_u64(p + 1, CLI_DEV_MINOR_MAX, &mi)) < 0)
			return r;
		*type = s[0];
		*major = (uint32_t)ma;
		*minor = (uint32_t)mi;
		return 0;
	}
	if (stat(s, &st) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		return -ENODEV;
	*type = S_ISCHR(st.st_mode) ? 'c' : 'b';
	*major = major(st.st_rdev);
	*minor = minor(st.st_rdev);
	return 0;
}

int cli_parse_uint(const char *opt, const char *s, unsigned max, unsigned *ret)
{
	(void)opt;
	return parse_uint(s, max, ret) < 0 ? -EINVAL : 0;
}

int cli_grace_option(const char *cmd, const char *s, unsigned *ret)
{
	if (cli_parse_uint("--grace", s, 3600000, ret) < 0)
		return cli_usage_error(cmd, "--grace '%s': need 0..3600000", s);
	return 0;
}

int cli_once(const char *cmd, const char *opt, const char *first, const char *again)
{
	if (!first)
		return 0;
	return cli_usage_error(cmd, "%s given twice ('%s', then '%s'): give it once", opt, first,
			       again);
}

/* A bad option value: @exit_code (the usage error printed) for the caller, -EINVAL. */
static int usage_einval(int *ret_exit, int exit_code)
{
	*ret_exit = exit_code;
	return -EINVAL;
}

int cli_limits_option(const char *cmd, int c, const char *arg, struct cli_limits *out,
		      int *ret_exit)
{
	const char *first = c == 'c'   ? out->l.cpus
			    : c == 'm' ? out->mem_arg
			    : c == 'p' ? out->pids_arg
			    : c == 'W' ? out->weight_arg
			    : c == 'G' ? out->l.gres
			    : c == 'R' ? out->l.reservation
				       : NULL;
	static const char *const names[128] = {
	    ['c'] = "--cpus",	    ['m'] = "--mem",  ['p'] = "--pids",
	    ['W'] = "--cpu-weight", ['G'] = "--gres", ['R'] = "--reservation"};
	int e;

	if (first && (e = cli_once(cmd, names[c], first, arg)))
		return usage_einval(ret_exit, e);

	switch (c) {
	case 'c': {
		uint64_t *bits = NULL;
		size_t words = 0;
		int r;

		/* Checked here, not first by the kernel: a reversed range or a typo must not be
		 * recorded on a job as its CPUs (with --best-effort nothing else would read it). */
		/* the parser's message names the list already */
		if ((r = jobcg_parse_cpulist(arg, &bits, &words)) < 0)
			return usage_einval(
			    ret_exit, cli_usage_error(cmd, "--cpus: %s", jobcg_error_message(r)));
		free(bits);
		out->l.cpus = arg;
		return 1;
	}
	case 'm':
		if (jobcg_parse_size(arg, 1u << 20, 0, &out->l.mem_bytes) < 0 ||
		    out->l.mem_bytes == 0)
			return usage_einval(
			    ret_exit,
			    cli_usage_error(cmd, "--mem '%s': need a size like 512M or 4G", arg));
		out->mem_arg = arg;
		return 1;
	case 'p': {
		unsigned v;

		if (cli_parse_uint("--pids", arg, 4194304, &v) < 0 || v == 0)
			return usage_einval(
			    ret_exit,
			    cli_usage_error(cmd, "--pids '%s': need a number 1..4194304", arg));
		out->l.pids_max = v;
		out->pids_arg = arg;
		return 1;
	}
	case 'W': {
		unsigned v;

		if (cli_parse_uint("--cpu-weight", arg, 10000, &v) < 0 || v == 0)
			return usage_einval(
			    ret_exit,
			    cli_usage_error(cmd, "--cpu-weight '%s': need a number 1..10000", arg));
		out->l.cpu_weight = v;
		out->weight_arg = arg;
		return 1;
	}
	case 'B':
		out->l.best_effort = true;
		return 1;
	case 'G': {
		struct jobcg_gres_request *req = NULL;
		int r;

		/* Checked here, before anything is made, with the parser's own words. */
		if ((r = jobcg_gres_request_parse(arg, &req)) < 0)
			return usage_einval(ret_exit, cli_usage_error(cmd, "--gres '%s': %s", arg,
								      jobcg_error_message(r)));
		jobcg_gres_request_free(req);
		out->l.gres = arg;
		return 1;
	}
	case 'R':
		if (!jobcg_resv_name_valid(arg))
			return usage_einval(ret_exit,
					    cli_usage_error(cmd,
							    "--reservation '%s': need a name "
							    "[a-z0-9][a-z0-9_-]{0,31}",
							    arg));
		out->l.reservation = arg;
		return 1;
	}
	return 0;
}

int cli_limits_refuse(struct jobcg_ctx *ctx, const struct cli_limits *cl, bool new_job)
{
	char **why = NULL;
	unsigned bad;
	int i = 0;

	/* A CPU this node does not have online, or one reserved for the system, is refused first,
	 * best effort or not: no host makes it right, and with --best-effort it would be
	 * recorded as the job's CPUs (and pick GPUs by Cores=) without anything refusing it. */
	if (cl->l.cpus && *cl->l.cpus) {
		const struct jobcg_cgroup_conf *c = &jobcg_ctx_config(ctx)->cgroup;
		char *online = NULL;
		int r;

		/* (a step's are checked against its job's CPUs, all online, when it begins) */
		if ((r = jobcg_online_cpus(&online)) < 0 ||
		    (new_job && (r = jobcg_check_cpus_online(strstrip(online), cl->l.cpus)) < 0) ||
		    ((c->spec_cpus || c->core_spec_count) &&
		     (r = jobcg_spec_check_cpus(c, online, cl->l.cpus)) < 0))
			cli_print_error(r, NULL);
		free(online);
		if (r < 0)
			return 1;
	}
	bad = jobcg_limits_check(ctx, &cl->l, &why);
	if (!bad || cl->l.best_effort) {
		jobcg_strv_free(why);
		return 0;
	}
	if (bad & JOBCG_LIMIT_CPUS)
		fprintf(stderr, "jobcg: --cpus %s: %s\n", cl->l.cpus,
			why && why[i] ? why[i++] : "");
	if (bad & JOBCG_LIMIT_MEM)
		fprintf(stderr, "jobcg: --mem %s: %s\n", cl->mem_arg,
			why && why[i] ? why[i++] : "");
	if (bad & JOBCG_LIMIT_PIDS)
		fprintf(stderr, "jobcg: --pids %s: %s\n", cl->pids_arg,
			why && why[i] ? why[i++] : "");
	if (bad & JOBCG_LIMIT_CPU_WEIGHT)
		fprintf(stderr, "jobcg: --cpu-weight %s: %s\n", cl->weight_arg,
			why && why[i] ? why[i++] : "");
	fprintf(stderr, "jobcg: refusing to run without these limits (use --best-effort to run "
			"anyway)\n");
	jobcg_strv_free(why);
	return 1;
}

int cli_target_args(int argc, char **argv, unsigned what, const char *help,
		    struct cli_target_args *ret, int *ret_exit)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'},
	    {"signal", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *cmd = argv[0], *timeout_arg = NULL, *sig_arg = NULL;
	int c, e;

	ret->json = false;
	ret->timeout_ms = 10000;
	ret->sig = SIGTERM;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hs:", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			if (!(what & CLI_TARGET_JSON))
				return cli_answered(
				    ret_exit, cli_usage_error(
						  cmd, "--json is not an option of this command"));
			ret->json = true;
			break;
		case 't':
			if (!(what & CLI_TARGET_TIMEOUT))
				return cli_answered(
				    ret_exit,
				    cli_usage_error(cmd,
						    "--timeout is not an option of this command"));
			if ((e = cli_once(cmd, "--timeout", timeout_arg, optarg)))
				return cli_answered(ret_exit, e);
			timeout_arg = optarg;
			if (cli_parse_uint("--timeout", optarg, 3600000, &ret->timeout_ms) < 0)
				return cli_answered(
				    ret_exit,
				    cli_usage_error(cmd,
						    "--timeout '%s': need milliseconds 0..3600000",
						    optarg));
			break;
		case 's':
			if (!(what & CLI_TARGET_SIGNAL))
				return cli_answered(
				    ret_exit,
				    cli_usage_error(cmd,
						    "--signal is not an option of this command"));
			if ((e = cli_once(cmd, "--signal", sig_arg, optarg)))
				return cli_answered(ret_exit, e);
			sig_arg = optarg;
			ret->sig = cli_parse_signal(optarg);
			if (ret->sig < 0)
				return cli_answered(
				    ret_exit,
				    cli_usage_error(cmd, "--signal '%s': unknown signal", optarg));
			break;
		case 'h':
			fputs(help, stdout);
			return cli_answered(ret_exit, 0);
		default:
			if ((what & CLI_TARGET_SIGNAL) && optopt >= '0' && optopt <= '9')
				return cli_answered(
				    ret_exit,
				    cli_usage_error(cmd, "give the signal with -s (-s %c...)",
						    optopt));
			return cli_answered(ret_exit, cli_option_error(cmd, argc, argv, "hs:"));
		}
	}
	if (optind + 1 != argc)
		return cli_answered(
		    ret_exit, cli_usage_error(cmd, "need exactly one target JOB[.STEP[.TASK]]"));
	int r = jobcg_target_parse(argv[optind], &ret->t);
	if (r < 0) {
		char buf[4096];

		return cli_answered(
		    ret_exit, cli_usage_error(cmd, "%s", jobcg_error_format(r, buf, sizeof(buf))));
	}
	return 0;
}

int cli_target_wait_cmd(int argc, char **argv, const struct cli_global *g, const char *help,
			int (*fn)(struct jobcg_ctx *ctx, const struct jobcg_target *t,
				  unsigned timeout_ms))
{
	struct cli_target_args a;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	int r;

	if (cli_target_args(argc, argv, CLI_TARGET_TIMEOUT, help, &a, &r))
		return r;
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	r = fn(ctx, &a.t, a.timeout_ms);
	if (r < 0) {
		cli_print_error(r, NULL);
		r = 1;
	}
	cli_ctx_close(conf, ctx);
	return r;
}

int cli_json_only_args(int argc, char **argv, const char *cmd, const char *help, bool *ret_json,
		       int *ret_exit)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	bool json = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(help, stdout);
			return cli_answered(ret_exit, 0);
		default:
			return cli_answered(ret_exit, cli_option_error(cmd, argc, argv, "h"));
		}
	}
	if (optind < argc)
		return cli_answered(ret_exit,
				    cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]));
	*ret_json = json;
	return 0;
}

/* By absolute path, never through PATH: `jobcg adopt --pam` runs as root with whatever
 * environment its PAM caller has. */
static const char *getent_path(void)
{
#ifdef JOBCG_TEST_HOOKS
	/* Test builds only: a getent that cannot be run. */
	if (getenv("JOBCG_TEST_GETENT"))
		return getenv("JOBCG_TEST_GETENT");
#endif
	return access("/usr/bin/getent", X_OK) == 0 ? "/usr/bin/getent" : "/bin/getent";
}

int cli_getent(const char *db, const char *key, char ***ret_fields)
{
	size_t want = strcmp(db, "passwd") == 0 ? 7 : 4, n = 0, len = 0;
	const char *exe = getent_path();
	char *argv[] = {(char *)exe, (char *)db, (char *)key, NULL};
	char out[4096], **f, *c;
	ssize_t k;
	int p[2], st, r;
	pid_t pid;

	/* getent would take "-x" for an option; no user or group name starts with '-'. */
	if (!*key || key[0] == '-' || strchr(key, ':') || strchr(key, '\n'))
		return -ENOENT;
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		cli_fail("pipe: %s", strerror(-r));
		return r;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(p[0]);
		close(p[1]);
		cli_fail("fork: %s", strerror(-r));
		return r;
	}
	if (pid == 0) {
		if (dup2(p[1], 1) < 0)
			_exit(127);
		/* Nothing of the caller's environment reaches it (LOCALDOMAIN, RES_OPTIONS,
		 * HOSTALIASES steer glibc's resolver): only what NSS needs. */
		execve(exe, argv,
		       (char *[]){(char *)"PATH=/usr/bin:/bin", (char *)"LC_ALL=C", NULL});
		_exit(127);
	}
	close(p[1]);
	/* One entry is a line; a longer one (a group with thousands of members) is cut, and only
	 * its first fields are used. */
	r = 0;
	for (;;) {
		char drain[512];
		bool full = len == sizeof(out) - 1;

		/* Past the buffer, read on and drop it: getent must not block on a full pipe. */
		k = full ? read(p[0], drain, sizeof(drain))
			 : read(p[0], out + len, sizeof(out) - 1 - len);
		if (k == 0)
			break;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (!full)
			len += (size_t)k;
	}
	out[len] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			r = -errno;
			cli_fail("waiting for getent: %s", strerror(-r));
			return r;
		}
	if (r < 0) {
		cli_fail("reading what getent %s %s printed: %s", db, key, strerror(-r));
		return r;
	}
	/* getent: 2 is "not found"; 127 (ours) is "could not be run". */
	if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
		return -ENOENT;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		cli_fail("getent %s %s failed (%s %d)%s", db, key,
			 WIFEXITED(st) ? "exit status" : "signal",
			 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
			 WIFEXITED(st) && WEXITSTATUS(st) == 127
			     ? ": is getent (libc-bin) installed?"
			     : "");
		return -EIO;
	}
	if (len == sizeof(out) - 1 && !strchr(out, '\n') && want == 7) {
		cli_fail("getent %s %s: entry longer than %zu bytes", db, key, sizeof(out) - 1);
		return -EIO;
	}
	out[strcspn(out, "\n")] = '\0';
	f = calloc(want + 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	/* Fields may be empty (no password, no members): split by hand, keeping them. */
	for (c = out; n < want; n++) {
		char *sep = strchr(c, ':');

		if (sep)
			*sep = '\0';
		f[n] = strdup(c);
		if (!f[n] || !sep)
			break;
		c = sep + 1;
	}
	if (n + 1 != want || !f[n] || strchr(c, ':')) {
		bool oom = n < want && !f[n];

		jobcg_strv_free(f);
		if (oom)
			return -ENOMEM;
		cli_fail("getent %s %s: not an entry of %zu ':'-separated fields", db, key, want);
		return -EIO;
	}
	*ret_fields = f;
	return 0;
}

int cli_split_names(const char *s, char ***ret)
{
	_cleanup_strv_free_ char **fields = strv_split(s, ",");
	char **v = calloc(1, sizeof(char *));

	if (!fields || !v) {
		free(v);
		return -ENOMEM;
	}
	/* Each name once, whatever the commas before it: one lookup per name. */
	for (char **f = fields; *f; f++)
		if (!strv_contains(v, *f) && strv_push(&v, strdup(*f)) < 0) {
			strv_free(v);
			return -ENOMEM;
		}
	*ret = v;
	return 0;
}

int cli_parse_id(const char *s, unsigned *ret)
{
	return cli_parse_uint(NULL, s, UINT32_MAX - 1, ret);
}

/* The uid and gid of passwd entry @key; with @name_only, the entry's name must be @key (getent
 * also answers uids). */
static int passwd_ids(const char *key, bool name_only, uid_t *ret_uid, gid_t *ret_gid)
{
	char **f = NULL;
	unsigned uid, gid;
	int r = cli_getent("passwd", key, &f);

	if (r < 0)
		return r;
	if (name_only && strcmp(f[0], key) != 0)
		r = -ENOENT;
	else if (cli_parse_id(f[2], &uid) < 0 || cli_parse_id(f[3], &gid) < 0) {
		cli_fail("getent passwd %s: bad uid or gid '%s:%s'", key, f[2], f[3]);
		r = -EIO;
	}
	jobcg_strv_free(f);
	if (r < 0)
		return r;
	*ret_uid = uid;
	*ret_gid = gid;
	return 0;
}

int cli_lookup_user(const char *s, uid_t *ret_uid, gid_t *ret_gid)
{
	unsigned uid;
	int r = passwd_ids(s, false, ret_uid, ret_gid);

	if (r != -ENOENT)
		return r;
	if (cli_parse_id(s, &uid) < 0)
		return isdigit((unsigned char)s[0]) ? -EINVAL : -ENOENT;
	/* A number without an entry is its own group, as for files owned by a vanished user. */
	*ret_uid = uid;
	*ret_gid = uid;
	return 0;
}

int cli_getent_user_name(const char *name, uid_t *ret_uid, gid_t *ret_gid)
{
	return passwd_ids(name, true, ret_uid, ret_gid);
}

int cli_getent_user(const char *s, uid_t *ret_uid, gid_t *ret_gid)
{
	return passwd_ids(s, false, ret_uid, ret_gid);
}

int cli_lookup_group(const char *s, gid_t *ret_gid)
{
	char **f = NULL;
	unsigned gid;
	int r = cli_getent("group", s, &f);

	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = cli_parse_id(f[2], &gid) < 0 ? -EIO : 0;
		if (r < 0)
			cli_fail("getent group %s: bad gid '%s'", s, f[2]);
		jobcg_strv_free(f);
		if (r < 0)
			return r;
		*ret_gid = gid;
		return 0;
	}
	if (cli_parse_id(s, &gid) < 0)
		return isdigit((unsigned char)s[0]) ? -EINVAL : -ENOENT;
	*ret_gid = gid;
	return 0;
}

void cli_table_init(struct cli_table *t, size_t ncols, const unsigned *min_widths)
{
	if (ncols > CLI_TABLE_MAX_COLS)
		abort(); /* a programming error */
	*t = (struct cli_table){.ncols = ncols, .min_widths = min_widths};
}

void cli_table_add(struct cli_table *t, const char *const *cells)
{
	char **c = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(char *));

	if (!c)
		abort(); /* as json-c does: a listing has no better way out */
	t->cells = c;
	c += t->nrows * t->ncols;
	for (size_t j = 0; j < t->ncols; j++)
		if (!(c[j] = strdup(cells[j] ? cells[j] : "-")))
			abort();
	t->nrows++;
}

void cli_table_print(struct cli_table *t, FILE *f)
{
	size_t w[CLI_TABLE_MAX_COLS] = {0};

	for (size_t j = 0; j < t->ncols; j++) {
		w[j] = t->min_widths ? t->min_widths[j] : 0;
		for (size_t i = 0; i < t->nrows; i++)
			if (strlen(t->cells[i * t->ncols + j]) > w[j])
				w[j] = strlen(t->cells[i * t->ncols + j]);
	}
	for (size_t i = 0; i < t->nrows; i++)
		for (size_t j = 0; j < t->ncols; j++) {
			char *c = t->cells[i * t->ncols + j];

			if (j + 1 == t->ncols)
				fprintf(f, "%s\n", c);
			else
				fprintf(f, "%-*s ", (int)w[j], c);
			free(c);
		}
	free(t->cells);
	t->cells = NULL;
	t->nrows = 0;
}

void cli_format_size(uint64_t bytes, char *buf, size_t size)
{
	static const char units[] = "TGMK";

	for (int u = 0; u < 4 && bytes; u++) {
		unsigned shift = 10 * (4 - u);

		if (bytes % (UINT64_C(1) << shift) == 0) {
			snprintf(buf, size, "%llu%c", (unsigned long long)(bytes >> shift),
				 units[u]);
			return;
		}
	}
	snprintf(buf, size, "%lluB", (unsigned long long)bytes);
}
