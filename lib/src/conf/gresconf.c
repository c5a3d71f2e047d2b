/*
 * jobcg: gres.conf. Lines start with NodeName=, Name= or a lone AutoDetect= (Slurm's grammar);
 * NodeName= hostlists select the lines for this host; File=/MultipleFiles= ranges expand to one
 * record per device (or one record per MultipleFiles line). Every line's keys are checked; a bad
 * value is an error on this host's lines and only a warning on other nodes' lines (Slurm does not
 * read their values), which make no records. Lenient like Slurm where it is harmless
 * (unknown Flags words, malformed Links: warnings), strict where Slurm silently misreads
 * (reversed ranges, garbage in Cores=, a Count= suffix it does not know).
 */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "confload.h"
#include "confparse.h"
#include "parse.h"
#include "log.h"
#include "util.h"

#define GRES_MAX_RECORDS	65536
#define GRES_MAX_FILES_PER_LINE 4096

enum gkey {
	G_AUTODETECT,
	G_COUNT,
	G_CORES,
	G_FILE,
	G_FLAGS,
	G_LINKS,
	G_MULTIPLEFILES,
	G_NAME,
	G_NODENAME,
	G_TYPE,
	_G_MAX,
};

static const struct {
	const char *name;
	enum gkey key;
} gkeys[] = {
    {"AutoDetect", G_AUTODETECT},
    {"Count", G_COUNT},
    {"Cores", G_CORES},
    {"CPUs", G_CORES},
    {"File", G_FILE},
    {"Files", G_FILE},
    {"Flags", G_FLAGS},
    {"Link", G_LINKS},
    {"Links", G_LINKS},
    {"MultipleFiles", G_MULTIPLEFILES},
    {"Name", G_NAME},
    {"NodeName", G_NODENAME},
    {"Type", G_TYPE},
};

#define ENV_MASK                                                                                   \
	(JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_AMD | JOBCG_GRES_FLAG_ENV_INTEL |        \
	 JOBCG_GRES_FLAG_ENV_OPENCL | JOBCG_GRES_FLAG_NO_GPU_ENV)
#define ENV_DEFAULT_GPU                                                                            \
	(JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_AMD | JOBCG_GRES_FLAG_ENV_INTEL |        \
	 JOBCG_GRES_FLAG_ENV_OPENCL)

static const struct {
	const char *word;
	unsigned flag;
} flag_words[] = {
    {"CountOnly", JOBCG_GRES_FLAG_COUNT_ONLY},
    {"nvidia_gpu_env", JOBCG_GRES_FLAG_ENV_NVIDIA},
    {"env_nvidia", JOBCG_GRES_FLAG_ENV_NVIDIA},
    {"amd_gpu_env", JOBCG_GRES_FLAG_ENV_AMD},
    {"env_amd", JOBCG_GRES_FLAG_ENV_AMD},
    {"intel_gpu_env", JOBCG_GRES_FLAG_ENV_INTEL},
    {"env_intel", JOBCG_GRES_FLAG_ENV_INTEL},
    {"opencl_env", JOBCG_GRES_FLAG_ENV_OPENCL},
    {"env_opencl", JOBCG_GRES_FLAG_ENV_OPENCL},
    {"no_gpu_env", JOBCG_GRES_FLAG_NO_GPU_ENV},
    {"env_uuid", JOBCG_GRES_FLAG_ENV_UUID},
    {"one_sharing", JOBCG_GRES_FLAG_ONE_SHARING},
    {"all_sharing", JOBCG_GRES_FLAG_ALL_SHARING},
    {"explicit", JOBCG_GRES_FLAG_EXPLICIT},
    {"no_companions", JOBCG_GRES_FLAG_NO_COMPANIONS},
};

/* Where a record's files were written, for the stat() errors of gres_conf_finish(). */
struct rec_pos {
	const char *file;
	unsigned line, col;
};

struct name_env {
	char *name;
	unsigned env;
	unsigned next_index; /* index of the next record of this name */
	struct jobcg_origin origin;
};

struct gres_state {
	struct rec_pos *pos; /* parallel to the records */
	size_t cap;
	struct name_env *names;
	size_t nnames;
	struct jobcg_origin node_ad_origin;
};

void gres_record_done(struct jobcg_gres_record *r)
{
	free(r->name);
	free(r->type);
	for (size_t f = 0; f < r->nfiles; f++)
		free(r->files[f].path);
	free(r->files);
	free(r->cores);
	free(r->links);
	free(r->autodetect);
	*r = (struct jobcg_gres_record){};
}

void gres_conf_done(struct jobcg_gres_conf *g)
{
	for (size_t i = 0; i < g->nrecords; i++)
		gres_record_done(&g->records[i]);
	free(g->records);
	free(g->autodetect);
	free(g->node_autodetect);
	*g = (struct jobcg_gres_conf){};
}

void gres_conf_state_free(struct confload *l)
{
	struct gres_state *s = l->gres;

	if (!s)
		return;
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i].name);
	free(s->names);
	free(s->pos);
	free(s);
	l->gres = NULL;
}

static struct gres_state *state(struct confload *l)
{
	if (!l->gres)
		l->gres = calloc(1, sizeof(struct gres_state));
	return l->gres;
}

/* AutoDetect value as Slurm matches it; NULL when unknown. */
static const char *autodetect_canon(const char *v)
{
	static const char *const subs[] = {"full", "nvml", "rsmi", "oneapi", "nrt", "nvidia"};
	char low[64];
	size_t n = strlen(v);

	if (strcaseeq(v, "off"))
		return "off";
	if (n >= sizeof(low))
		return NULL;
	for (size_t i = 0; i <= n; i++)
		low[i] = (char)tolower((unsigned char)v[i]);
	for (size_t i = 0; i < ELEMENTSOF(subs); i++)
		if (strstr(low, subs[i]))
			return subs[i];
	return NULL;
}

static bool name_is_shared(const char *name)
{
	return strcaseeq(name, "mps") || strcaseeq(name, "shard");
}

/* Parsed values of one line, before records are made. */
struct line_vals {
	const struct conf_pair *p[_G_MAX];
	uint64_t count;
	bool has_count;
	uint64_t *cores;
	size_t cores_words;
	bool cores_null;
	bool cores_step_end; /* A-B:S with B on the step, which Slurm leaves out */
	bool cores_step_empty;
	int *links;
	size_t nlinks;
	bool links_bad;
	unsigned flags;
	char **unknown_flags;
	char **files;
	size_t nfiles;
	bool multiple;
	const char *autodetect;
};

static void line_vals_done(struct line_vals *v)
{
	free(v->cores);
	free(v->links);
	strv_free(v->unknown_flags);
	strv_free(v->files);
}

/* One number of the step form at *p, at most JOBCG_CPU_MAX. */
static int step_number(const struct conf_stmt *st, const struct conf_pair *pr, const char **p,
		       const char *what, unsigned *ret)
{
	const char *q = *p;
	unsigned x = 0;

	if (!isdigit((unsigned char)*q))
		return error_set_at(-EINVAL, st->file, pr->vline,
				    pr->vcol + (unsigned)(q - pr->value),
				    "%s=%s: expected %s at '%s' (the step form is FIRST-LAST:STEP, "
				    "such as 0-30:2)",
				    pr->key, pr->value, what, q);
	for (; isdigit((unsigned char)*q); q++) {
		x = x * 10 + (unsigned)(*q - '0');
		if (x > JOBCG_CPU_MAX)
			return error_set_at(-ERANGE, st->file, pr->vline,
					    pr->vcol + (unsigned)(*p - pr->value),
					    "%s=%s: %s is beyond the limit %d", pr->key, pr->value,
					    what, JOBCG_CPU_MAX);
	}
	*p = q;
	*ret = x;
	return 0;
}

/*
 * Slurm's step form FIRST-LAST:STEP (bitfmt2int, taken whenever the value holds a ':'): one
 * range, no brackets, no list. Slurm sets FIRST, FIRST+STEP, ... while below LAST, so LAST itself
 * is never set (0-30:2 is 0-28 in steps of 2) although its comment says otherwise; jobcg sets the
 * same cores, so that a GPU binds where Slurm binds it, and warns (make_records' caller).
 */
static int parse_cores_step(const struct conf_stmt *st, const struct conf_pair *pr,
			    struct line_vals *v)
{
	const char *p = pr->value;
	unsigned lo, hi, step;
	int r;

	if ((r = step_number(st, pr, &p, "the first core", &lo)) < 0)
		return r;
	if (*p != '-')
		return error_set_at(
		    -EINVAL, st->file, pr->vline, pr->vcol + (unsigned)(p - pr->value),
		    "%s=%s: expected '-' at '%s' (the step form is FIRST-LAST:STEP, "
		    "such as 0-30:2, with no list and no brackets)",
		    pr->key, pr->value, p);
	p++;
	if ((r = step_number(st, pr, &p, "the last core", &hi)) < 0)
		return r;
	if (*p != ':')
		return error_set_at(
		    -EINVAL, st->file, pr->vline, pr->vcol + (unsigned)(p - pr->value),
		    "%s=%s: expected ':' at '%s' (the step form is FIRST-LAST:STEP, "
		    "such as 0-30:2, with no list and no brackets)",
		    pr->key, pr->value, p);
	p++;
	if ((r = step_number(st, pr, &p, "the step", &step)) < 0)
		return r;
	if (*p)
		return error_set_at(-EINVAL, st->file, pr->vline,
				    pr->vcol + (unsigned)(p - pr->value),
				    "%s=%s: unexpected '%s' after the step (the step form is "
				    "FIRST-LAST:STEP, one range only)",
				    pr->key, pr->value, p);
	if (hi < lo)
		return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
				    "%s=%s: reversed range %u-%u (write the lower core first)",
				    pr->key, pr->value, lo, hi);
	if (step == 0)
		return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
				    "%s=%s: the step must be 1 or more", pr->key, pr->value);
	/* the highest core set, as jobcg_parse_cpulist() sizes its bitmap */
	v->cores_words = hi > lo ? (lo + (hi - 1 - lo) / step * step) / 64 + 1 : 1;
	v->cores = calloc(v->cores_words, sizeof(uint64_t));
	if (!v->cores)
		return -ENOMEM;
	for (unsigned i = lo; i < hi; i += step)
		v->cores[i / 64] |= UINT64_C(1) << (i % 64);
	v->cores_step_empty = lo == hi;
	v->cores_step_end = hi > lo && (hi - lo) % step == 0;
	return 0;
}

static int parse_cores(const struct conf_stmt *st, const struct conf_pair *pr, struct line_vals *v)
{
	size_t n = strlen(pr->value), len = 0;
	_cleanup_free_ char *body = malloc(n + 1);
	_cleanup_free_ size_t *orig = malloc((n + 1) * sizeof(size_t));
	int r;

	if (!body || !orig)
		return -ENOMEM;
	if (strchr(pr->value, ':'))
		return parse_cores_step(st, pr, v);
	/* Slurm's bitfmt2int skips brackets ("Cores=[0-3]" is 0-3) and blanks; so does jobcg,
	 * but any other stray character is an error rather than silently ignored. */
	for (size_t i = 0; i < n; i++) {
		if (strchr("[] \t", pr->value[i]))
			continue;
		orig[len] = i;
		body[len++] = pr->value[i];
	}
	body[len] = '\0';
	orig[len] = n;
	if (!*body) {
		/* Cores="" is an empty set in Slurm: keep it as a bitmap with no bit set. */
		v->cores = calloc(1, sizeof(uint64_t));
		v->cores_words = 1;
		return v->cores ? 0 : -ENOMEM;
	}
	if (strcaseeq(body, "null")) {
		/* Slurm's bitfmt2int turns "null" into core 0; do the same, and say so. */
		v->cores = calloc(1, sizeof(uint64_t));
		if (!v->cores)
			return -ENOMEM;
		v->cores[0] = 1;
		v->cores_words = 1;
		v->cores_null = true;
		return 0;
	}
	r = jobcg_parse_cpulist(body, &v->cores, &v->cores_words);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		struct conf_pair shifted = *pr;
		unsigned c = jobcg_last_error()->column;

		/* point at the character in the value as written */
		if (c >= 1 && c - 1 <= len)
			shifted.vcol = pr->vcol + (unsigned)(orig[c - 1] - (c - 1));
		return conf_reraise(r, st->file, &shifted, "%s=%s", pr->key, pr->value);
	}
	return 0;
}

/* Links: comma-separated integers in [-2, 1023] with exactly one -1 (this device itself). */
static int parse_links(const char *s, struct line_vals *v)
{
	_cleanup_free_ int *out = NULL;
	size_t n = 0, self = 0;
	const char *p = s;

	if (!*s)
		return -EINVAL;
	out = calloc(strlen(s) / 2 + 1, sizeof(int));
	if (!out)
		return -ENOMEM;
	for (;;) {
		char *end;
		long x;

		if (!isdigit((unsigned char)*p) && *p != '-')
			return -EINVAL;
		errno = 0;
		x = strtol(p, &end, 10);
		if (end == p || errno || x < -2 || x > 1023)
			return -EINVAL;
		if (x == -1)
			self++;
		out[n++] = (int)x;
		p = end;
		if (!*p)
			break;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
	if (self != 1)
		return -EINVAL;
	v->links = TAKE_PTR(out);
	v->nlinks = n;
	return 0;
}

static int parse_flags(const struct conf_stmt *st, const struct conf_pair *pr, struct line_vals *v)
{
	_cleanup_strv_free_ char **words = strv_split(pr->value, ",");

	if (!words)
		return -ENOMEM;
	for (char **w = words; *w; w++) {
		bool found = false;

		for (size_t i = 0; i < ELEMENTSOF(flag_words); i++)
			if (strcaseeq(*w, flag_words[i].word)) {
				v->flags |= flag_words[i].flag;
				found = true;
			}
		if (!found) {
			int r = strv_push(&v->unknown_flags, strdup(*w));
			if (r < 0)
				return r;
		}
	}
	if ((v->flags & JOBCG_GRES_FLAG_NO_GPU_ENV) && (v->flags & ENV_DEFAULT_GPU))
		return error_set_at(
		    -EINVAL, st->file, pr->vline, pr->vcol,
		    "Flags=%s: no_gpu_env cannot be combined with another GPU environment flag",
		    pr->value);
	if ((v->flags & JOBCG_GRES_FLAG_ONE_SHARING) && (v->flags & JOBCG_GRES_FLAG_ALL_SHARING))
		return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
				    "Flags=%s: one_sharing and all_sharing exclude each other",
				    pr->value);
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A file named twice in one File= or MultipleFiles= value is a typo: as one device it would be
 * counted twice, and a MultipleFiles= device would list it twice. */
static int refuse_repeated_file(const struct conf_stmt *st, const struct conf_pair *pr,
				const struct line_vals *v)
{
	_cleanup_free_ char **sorted = NULL;

	if (v->nfiles < 2)
		return 0;
	sorted = malloc(v->nfiles * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, v->files, v->nfiles * sizeof(*sorted));
	qsort(sorted, v->nfiles, sizeof(*sorted), cmp_str_ptr);
	for (size_t i = 1; i < v->nfiles; i++)
		if (streq(sorted[i - 1], sorted[i]))
			return error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
					    "%s=%s names '%s' twice", pr->key, pr->value,
					    sorted[i]);
	return 0;
}

static int expand_files(const struct conf_stmt *st, const struct conf_pair *pr, struct line_vals *v)
{
	char **files = NULL;
	int r;

	r = jobcg_hostlist_expand(pr->value, GRES_MAX_FILES_PER_LINE, &files);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return conf_reraise(r, st->file, pr, "%s=%s", pr->key, pr->value);
	for (size_t i = 0; files[i]; i++) {
		if (files[i][0] != '/') {
			r = error_set_at(-EINVAL, st->file, pr->vline, pr->vcol,
					 "%s=%s: '%s' is not an absolute path (expected a device "
					 "file such as /dev/nvidia0)",
					 pr->key, pr->value, files[i]);
			strv_free(files);
			return r;
		}
	}
	v->files = files;
	v->nfiles = strv_length(files);
	return refuse_repeated_file(st, pr, v);
}

/* Check every value of a line (whatever host it is for). */
static int parse_values(struct confload *l, const struct conf_stmt *st, struct line_vals *v)
{
	const struct conf_pair *const *p = v->p;
	int r;

	if (p[G_NAME]) {
		const char *n = p[G_NAME]->value;

		if (!*n)
			return error_set_at(-EINVAL, st->file, p[G_NAME]->vline, p[G_NAME]->vcol,
					    "Name= is empty (expected a GRES name such as gpu)");
		for (const char *q = n; *q; q++)
			if (!isalnum((unsigned char)*q) && !strchr("_-.", *q))
				return error_set_at(-EINVAL, st->file, p[G_NAME]->vline,
						    p[G_NAME]->vcol + (unsigned)(q - n),
						    "Name=%s: '%c' is not allowed in a GRES name "
						    "(letters, digits, '_', '-', '.')",
						    n, *q);
	}
	if (p[G_TYPE]) {
		/* ':' and ',' separate the parts of a request such as gpu:a100:2,nic:1 */
		const char *t = p[G_TYPE]->value, *bad = t + strcspn(t, ":, \t");

		if (*bad)
			return error_set_at(
			    -EINVAL, st->file, p[G_TYPE]->vline,
			    p[G_TYPE]->vcol + (unsigned)(bad - t),
			    "Type=%s: '%c' is not allowed in a type (it separates GRES requests)",
			    t, *bad);
	}
	if (p[G_COUNT]) {
		r = jobcg_parse_size(p[G_COUNT]->value, 1, JOBCG_SIZE_DECIMAL, &v->count);
		if (r < 0)
			return conf_reraise(r, st->file, p[G_COUNT], "%s=%s", p[G_COUNT]->key,
					    p[G_COUNT]->value);
		v->has_count = true;
	}
	if (p[G_CORES]) {
		r = parse_cores(st, p[G_CORES], v);
		if (r < 0)
			return r;
	}
	if (p[G_LINKS]) {
		r = parse_links(p[G_LINKS]->value, v);
		if (r == -ENOMEM)
			return r;
		v->links_bad = r < 0;
	}
	if (p[G_FLAGS]) {
		r = parse_flags(st, p[G_FLAGS], v);
		if (r < 0)
			return r;
	}
	if (p[G_FILE] && p[G_MULTIPLEFILES])
		return error_set_at(-EINVAL, st->file, p[G_MULTIPLEFILES]->line,
				    p[G_MULTIPLEFILES]->col,
				    "File= and MultipleFiles= exclude each other (MultipleFiles= "
				    "lists every file of one device)");
	if (p[G_FILE]) {
		r = expand_files(st, p[G_FILE], v);
		if (r < 0)
			return r;
	}
	if (p[G_MULTIPLEFILES]) {
		r = expand_files(st, p[G_MULTIPLEFILES], v);
		if (r < 0)
			return r;
		v->multiple = true;
		if (v->nfiles < 2)
			return error_set_at(-EINVAL, st->file, p[G_MULTIPLEFILES]->vline,
					    p[G_MULTIPLEFILES]->vcol,
					    "MultipleFiles=%s names one file (it takes two or "
					    "more; use File= for one)",
					    p[G_MULTIPLEFILES]->value);
	}
	if (p[G_AUTODETECT]) {
		v->autodetect = autodetect_canon(p[G_AUTODETECT]->value);
		/* Slurm only logs an unknown value; a typo here would silently turn detection
		 * (and `jobcg check`'s comparison) off, so it is an error like an unknown key. */
		if (!v->autodetect)
			return error_set_at(-EINVAL, st->file, p[G_AUTODETECT]->vline,
					    p[G_AUTODETECT]->vcol,
					    "unknown AutoDetect value '%s' (known: nvml, rsmi, "
					    "oneapi, nrt, nvidia, full, off)",
					    p[G_AUTODETECT]->value);
	}
	(void)l;
	return 0;
}

static bool host_matches(struct confload *l, const struct conf_stmt *st, const struct conf_pair *pr,
			 int *ret)
{
	const char *host = l->c->hostname ? l->c->hostname : "";
	int r = jobcg_hostlist_contains(pr->value, host);

	if (r == 0 && strchr(host, '.')) {
		_cleanup_free_ char *shorthost = strndup(host, strcspn(host, "."));

		if (!shorthost) {
			*ret = -ENOMEM;
			return false;
		}
		r = jobcg_hostlist_contains(pr->value, shorthost);
	}
	if (r < 0) {
		*ret = r == -ENOMEM ? r : conf_reraise(r, st->file, pr, "NodeName=%s", pr->value);
		return false;
	}
	*ret = 0;
	return r > 0;
}

/*
 * A bad value on a line for other nodes. Slurm 22.05's slurmd checks only the key names of such
 * a line (_parse_gres_config_node() reads its values on the nodes it names), so one typo there
 * does not stop every node: the error is a warning here, naming where it is, and still an error
 * on the nodes the line is for. Keys and syntax were checked before: those stay errors.
 */
static int warn_other_node(struct confload *l, const struct conf_pair *nodename)
{
	const struct jobcg_error *e = jobcg_last_error();
	char msg[sizeof(e->message)];

	snprintf(msg, sizeof(msg), "%s", e->message);
	if (e->column)
		confload_warn(l, e->file, e->line,
			      "column %u: %s (on a line for NodeName=%s, not this node: an error "
			      "on those nodes, a warning here as Slurm reads no value of other "
			      "nodes' lines)",
			      e->column, msg, nodename->value);
	else
		confload_warn(
		    l, e->file, e->line,
		    "%s (on a line for NodeName=%s, not this node: an error on those "
		    "nodes, a warning here as Slurm reads no value of other nodes' lines)",
		    msg, nodename->value);
	jobcg_error_clear();
	return 0;
}

static int add_record(struct confload *l, const struct conf_stmt *st, const struct line_vals *v,
		      struct name_env *ne, char **files, size_t nfiles, uint64_t count,
		      unsigned flags)
{
	struct jobcg_gres_conf *g = &l->c->gres;
	struct gres_state *s = state(l);
	struct jobcg_gres_record rec = {};
	struct jobcg_gres_record *nr;
	const struct conf_pair *fp = v->p[G_FILE] ? v->p[G_FILE] : v->p[G_MULTIPLEFILES];

	if (!s)
		return -ENOMEM;
	if (g->nrecords >= GRES_MAX_RECORDS)
		return error_set_at(-E2BIG, st->file, st->line, 0, "more than %d GRES records",
				    GRES_MAX_RECORDS);
	if (g->nrecords == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 16;
		struct rec_pos *np;

		nr = realloc(g->records, ncap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		g->records = nr;
		np = realloc(s->pos, ncap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		s->pos = np;
		s->cap = ncap;
	}
	/* Slurm matches Name= to its plugin case-insensitively (Name=GPU is the gpu plugin) and
	 * requests case-sensitively against the plugin's lower-case name: store it so. */
	rec.name = strdup(v->p[G_NAME]->value);
	for (char *q = rec.name; q && *q; q++)
		*q = (char)tolower((unsigned char)*q);
	if (v->p[G_TYPE] && *v->p[G_TYPE]->value)
		rec.type = strdup(v->p[G_TYPE]->value);
	rec.count = count;
	rec.flags = flags;
	rec.index = ne->next_index++;
	rec.origin = (struct jobcg_origin){st->file, st->line};
	rec.node_line = v->p[G_NODENAME] != NULL;
	if (nfiles) {
		rec.files = calloc(nfiles, sizeof(*rec.files));
		for (size_t i = 0; rec.files && i < nfiles; i++) {
			rec.files[i].path = strdup(files[i]);
			rec.nfiles = i + 1;
			if (!rec.files[i].path)
				break;
		}
	}
	if (v->cores) {
		rec.cores = malloc(v->cores_words * sizeof(uint64_t));
		if (rec.cores)
			memcpy(rec.cores, v->cores, v->cores_words * sizeof(uint64_t));
		rec.cores_words = v->cores_words;
	}
	if (v->links && !v->links_bad) {
		rec.links = malloc(v->nlinks * sizeof(int));
		if (rec.links)
			memcpy(rec.links, v->links, v->nlinks * sizeof(int));
		rec.nlinks = v->nlinks;
	}
	/* Stored before the allocation checks so that gres_conf_done() frees whatever exists. */
	g->records[g->nrecords] = rec;
	s->pos[g->nrecords] = fp ? (struct rec_pos){st->file, fp->vline, fp->vcol}
				 : (struct rec_pos){st->file, st->line, 0};
	g->nrecords++;
	if (!rec.name || (v->p[G_TYPE] && *v->p[G_TYPE]->value && !rec.type) ||
	    (nfiles && (!rec.files || rec.nfiles != nfiles || !rec.files[nfiles - 1].path)) ||
	    (v->cores && !rec.cores) || (rec.nlinks && !rec.links))
		return -ENOMEM;
	return 0;
}

static int check_env_flags(struct confload *l, const struct conf_stmt *st,
			   const struct line_vals *v, unsigned *flags, struct name_env **ret)
{
	struct gres_state *s = state(l);
	const char *name = v->p[G_NAME]->value;
	unsigned env = *flags & ENV_MASK;
	struct name_env *ne = NULL;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < s->nnames; i++)
		if (strcaseeq(s->names[i].name, name))
			ne = &s->names[i];
	if (!env)
		env = ne ? ne->env : strcaseeq(name, "gpu") ? ENV_DEFAULT_GPU : 0;
	else if (ne && ne->env != env)
		return error_set_at(
		    -EINVAL, st->file, v->p[G_FLAGS]->vline, v->p[G_FLAGS]->vcol,
		    "Flags=%s: the GPU environment flags differ from the earlier %s line at %s:%u "
		    "(every line of one name must agree; a line without Flags means all of them "
		    "for gpu)",
		    v->p[G_FLAGS]->value, name, ne->origin.file, ne->origin.line);
	if (!ne) {
		struct name_env *nn = realloc(s->names, (s->nnames + 1) * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		s->names = nn;
		ne = &s->names[s->nnames];
		*ne = (struct name_env){.name = strdup(name)};
		if (!ne->name)
			return -ENOMEM;
		s->nnames++;
	}
	ne->env = env;
	ne->origin = (struct jobcg_origin){st->file, st->line};
	*flags = (*flags & ~ENV_MASK) | env;
	*ret = ne;
	return 0;
}

static int make_records(struct confload *l, const struct conf_stmt *st, struct line_vals *v)
{
	const char *name = v->p[G_NAME]->value;
	bool shared = name_is_shared(name);
	unsigned flags = v->flags;
	struct name_env *ne = NULL;
	int r;

	r = check_env_flags(l, st, v, &flags, &ne);
	if (r < 0)
		return r;
	if (v->multiple) {
		if (v->has_count && !shared && v->count != 1)
			return error_set_at(
			    -EINVAL, st->file, v->p[G_COUNT]->vline, v->p[G_COUNT]->vcol,
			    "Count=%s: a MultipleFiles= line is one %s, so its Count must be 1",
			    v->p[G_COUNT]->value, name);
		return add_record(l, st, v, ne, v->files, v->nfiles, v->has_count ? v->count : 1,
				  flags);
	}
	if (v->nfiles == 0) {
		/* Slurm completes such a line from AutoDetect or the gpu lines; jobcg only
		 * allocates listed files, so say so now rather than at the first job. */
		if (strcaseeq(name, "gpu"))
			confload_warn(
			    l, st->file, st->line,
			    "Name=%s with no File= or MultipleFiles=: jobcg cannot allocate it "
			    "(Slurm takes the device files from AutoDetect, jobcg does not); "
			    "write one line per GPU with its File=: `jobcg gpus --gres-conf` "
			    "prints them for this node",
			    name);
		else if (shared)
			confload_warn(l, st->file, st->line,
				      "Name=%s with no File= or MultipleFiles=: jobcg cannot "
				      "allocate it (Slurm spreads it over the gpu lines' files, "
				      "jobcg does not); give it the GPUs' device files, such as "
				      "File=/dev/nvidia[0-3]",
				      name);
		return add_record(l, st, v, ne, NULL, 0, v->has_count ? v->count : 1, flags);
	}
	if (v->has_count && !shared && v->count != v->nfiles)
		return error_set_at(
		    -EINVAL, st->file, v->p[G_COUNT]->vline, v->p[G_COUNT]->vcol,
		    "Count=%s does not match the %zu file%s of %s=%s (each file is one %s)",
		    v->p[G_COUNT]->value, v->nfiles, v->nfiles == 1 ? "" : "s", v->p[G_FILE]->key,
		    v->p[G_FILE]->value, name);
	/* Shared GRES (mps, shard): each file gets Count / files and the remainder is dropped, as
	 * Slurm's _build_shared_list() does (so both count the same shares per GPU). */
	uint64_t total = v->has_count ? v->count : v->nfiles;
	if (total % v->nfiles)
		confload_warn(l, st->file, st->line,
			      "Count=%s over %zu files: each file gets %" PRIu64
			      " and the remainder of %" PRIu64 " is dropped (as in Slurm)",
			      v->p[G_COUNT]->value, v->nfiles, total / v->nfiles,
			      total % v->nfiles);
	for (size_t i = 0; i < v->nfiles; i++) {
		uint64_t c = total / v->nfiles;

		r = add_record(l, st, v, ne, &v->files[i], 1, c, flags);
		if (r < 0)
			return r;
	}
	return 0;
}

static int on_stmt(const struct conf_stmt *st, void *userdata)
{
	struct confload *l = userdata;
	struct jobcg_gres_conf *g = &l->c->gres;
	struct line_vals v = {};
	enum gkey first = _G_MAX;
	bool matches = true;
	int r = 0;

	for (size_t i = 0; i < st->npairs; i++) {
		const struct conf_pair *pr = &st->pairs[i];
		enum gkey k = _G_MAX;

		for (size_t j = 0; j < ELEMENTSOF(gkeys) && k == _G_MAX; j++)
			if (strcaseeq(pr->key, gkeys[j].name))
				k = gkeys[j].key;
		if (k == _G_MAX) {
			const char *cands[ELEMENTSOF(gkeys) + 1];

			for (size_t j = 0; j < ELEMENTSOF(gkeys); j++)
				cands[j] = gkeys[j].name;
			cands[ELEMENTSOF(gkeys)] = NULL;
			r = conf_unknown_key(st, pr, "gres.conf", cands);
			goto out;
		}
		if (i == 0) {
			first = k;
			if (k != G_NODENAME && k != G_NAME && k != G_AUTODETECT) {
				r = error_set_at(-EINVAL, st->file, pr->line, pr->col,
						 "a gres.conf line must start with NodeName=, "
						 "Name= or AutoDetect= (found '%s=')",
						 pr->key);
				goto out;
			}
		} else if (first == G_AUTODETECT) {
			r = error_set_at(
			    -EINVAL, st->file, pr->line, pr->col,
			    "AutoDetect= must be alone on its line (found '%s=' after it; "
			    "put AutoDetect= on a NodeName= line to set it for some nodes)",
			    pr->key);
			goto out;
		} else if (k == G_NODENAME) {
			r = error_set_at(-EINVAL, st->file, pr->line, pr->col,
					 "NodeName= must be the first key of its line (this line "
					 "starts with %s=)",
					 st->pairs[0].key);
			goto out;
		}
		if (v.p[k] && v.p[k] != pr) {
			/* Slurm takes the last value of one key, but between aliases it prefers
			 * File, Cores and Link whatever their order, and a line's first Name=
			 * names its record: refuse those rather than pick another device. */
			if (k == G_NAME || !strcaseeq(pr->key, v.p[k]->key)) {
				r = error_set_at(-EINVAL, st->file, pr->line, pr->col,
						 "%s= given twice on this line (also as %s= at "
						 "column %u): keep one",
						 pr->key, v.p[k]->key, v.p[k]->col);
				goto out;
			}
			confload_warn(l, st->file, pr->line,
				      "%s= given twice on this line, the latest value is used (as "
				      "in Slurm)",
				      pr->key);
		}
		v.p[k] = pr;
	}

	if (v.p[G_NODENAME]) {
		matches = host_matches(l, st, v.p[G_NODENAME], &r);
		if (r < 0)
			goto out;
	}
	for (size_t i = 0; matches && i < st->npairs; i++)
		if (st->pairs[i].op)
			confload_warn_op(l, st->file, &st->pairs[i], st->pairs[i].key);
	r = parse_values(l, st, &v);
	if (r < 0 && r != -ENOMEM && !matches) {
		r = warn_other_node(l, v.p[G_NODENAME]);
		goto out;
	}
	if (r < 0)
		goto out;

	if (first == G_AUTODETECT) {
		if (g->autodetect && !streq(g->autodetect, v.autodetect))
			confload_warn(l, st->file, st->line,
				      "AutoDetect given again (was %s), the latest value is used",
				      g->autodetect);
		free(g->autodetect);
		g->autodetect = strdup(v.autodetect);
		r = g->autodetect ? 0 : -ENOMEM;
		goto out;
	}
	if (!matches)
		goto out;

	if (v.p[G_AUTODETECT]) {
		if (!v.p[G_NODENAME])
			confload_warn(
			    l, st->file, st->line,
			    "AutoDetect= on a line without NodeName= has no effect (as in Slurm)");
		else {
			struct gres_state *s = state(l);

			if (!s) {
				r = -ENOMEM;
				goto out;
			}
			if (g->node_autodetect && !streq(g->node_autodetect, v.autodetect)) {
				r = error_set_at(-EINVAL, st->file, v.p[G_AUTODETECT]->vline,
						 v.p[G_AUTODETECT]->vcol,
						 "AutoDetect=%s conflicts with AutoDetect=%s for "
						 "this node at %s:%u",
						 v.p[G_AUTODETECT]->value, g->node_autodetect,
						 s->node_ad_origin.file, s->node_ad_origin.line);
				goto out;
			}
			if (!g->node_autodetect) {
				g->node_autodetect = strdup(v.autodetect);
				if (!g->node_autodetect) {
					r = -ENOMEM;
					goto out;
				}
				s->node_ad_origin = (struct jobcg_origin){st->file, st->line};
			}
		}
	}
	if (!v.p[G_NAME]) {
		/* Slurm: with AutoDetect the line only sets it (any File= is dropped); without,
		 * "Invalid GRES data, no type name" and the line is skipped. */
		if (!v.p[G_AUTODETECT])
			confload_warn(l, st->file, st->line,
				      "line has no Name= and is ignored (as Slurm does)");
		goto out;
	}
	for (char **w = v.unknown_flags; w && *w; w++)
		confload_warn(l, st->file, st->line, "unknown Flags word '%s' ignored", *w);
	if (v.links_bad)
		confload_warn(l, st->file, st->line,
			      "ignoring invalid Links=%s (expected integers from -2 to 1023 with "
			      "exactly one -1)",
			      v.p[G_LINKS]->value);
	if (v.cores_step_empty)
		confload_warn(l, st->file, st->line,
			      "%s=%s names no core: Slurm's step form stops before its last "
			      "core, and jobcg reads it as Slurm does",
			      v.p[G_CORES]->key, v.p[G_CORES]->value);
	else if (v.cores_step_end)
		confload_warn(l, st->file, st->line,
			      "%s=%s leaves out its last core, as Slurm reads the step form (it "
			      "stops before the end); jobcg binds the same cores. Write an end one "
			      "higher to include it",
			      v.p[G_CORES]->key, v.p[G_CORES]->value);
	if (v.cores_null)
		confload_warn(
		    l, st->file, st->line,
		    "%s=%s is read as core 0, as Slurm does; remove it for no core binding",
		    v.p[G_CORES]->key, v.p[G_CORES]->value);
	r = make_records(l, st, &v);
out:
	line_vals_done(&v);
	return r;
}

int gres_conf_parse(struct confload *l, const char *path, const char *buf, size_t len)
{
	if (!state(l))
		return -ENOMEM;
	return confload_parse(l, path, buf, len, on_stmt);
}

/* One device file of a record, for the duplicate check. */
struct dev_ref {
	const struct jobcg_gres_record *rec;
	const struct jobcg_gres_file *file;
};

/* Files ordered by name, then device (major:minor once stat()ed, else path). */
static int cmp_by_name_device(const void *a, const void *b)
{
	const struct dev_ref *x = a, *y = b;
	const struct jobcg_gres_file *fx = x->file, *fy = y->file;
	int r = strcmp(x->rec->name, y->rec->name);

	if (r)
		return r;
	if (fx->type && fy->type) {
		if (fx->type != fy->type)
			return fx->type < fy->type ? -1 : 1;
		if (fx->major != fy->major)
			return fx->major < fy->major ? -1 : 1;
		if (fx->minor != fy->minor)
			return fx->minor < fy->minor ? -1 : 1;
	} else if ((r = strcmp(fx->path, fy->path)))
		return r;
	return x->rec < y->rec ? -1 : x->rec > y->rec; /* file order among equals */
}

static bool same_device(const struct jobcg_gres_file *a, const struct jobcg_gres_file *b)
{
	if (a->type && b->type)
		return a->type == b->type && a->major == b->major && a->minor == b->minor;
	return streq(a->path, b->path);
}

/*
 * Two File= records of one name on the same device (the same path, or once stat()ed the same
 * major:minor through another name) would be two devices to the allocator: two jobs would each
 * be granted the one device. Slurm does not check; refuse it, naming both lines. MultipleFiles=
 * records legitimately share a parent GPU's file with each other (MIG instances), but a File=
 * record on one of their files (a stale whole-GPU line next to the MIG lines) is the same
 * clash.
 */
static int refuse_duplicate_files(struct confload *l)
{
	struct jobcg_gres_conf *g = &l->c->gres;
	struct gres_state *s = l->gres;
	_cleanup_free_ struct dev_ref *v = NULL;
	size_t n = 0, total = 0;

	for (size_t i = 0; i < g->nrecords; i++)
		total += g->records[i].nfiles;
	v = calloc(total + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < g->nrecords; i++)
		for (size_t f = 0; f < g->records[i].nfiles; f++)
			v[n++] = (struct dev_ref){&g->records[i], &g->records[i].files[f]};
	qsort(v, n, sizeof(*v), cmp_by_name_device);
	for (size_t i = 0; i < n;) {
		size_t e = i + 1, single = n, other = n;

		while (e < n && streq(v[i].rec->name, v[e].rec->name) &&
		       same_device(v[i].file, v[e].file))
			e++;
		/* In a run of one name and device, a single-file record clashes with any other. */
		for (size_t j = i; j < e; j++)
			if (v[j].rec->nfiles == 1 && single == n)
				single = j;
		for (size_t j = i; j < e && single < n; j++)
			if (j != single && v[j].rec != v[single].rec) {
				other = j;
				break;
			}
		if (other < n) {
			const struct jobcg_gres_record *a = v[single].rec, *b = v[other].rec;
			const struct jobcg_gres_file *fa = v[single].file, *fb = v[other].file;

			/* Name the later line, pointing at the earlier one. */
			if (a->origin.line > b->origin.line &&
			    streq(a->origin.file, b->origin.file)) {
				const struct jobcg_gres_record *t = a;
				const struct jobcg_gres_file *tf = fa;

				a = b;
				b = t;
				fa = fb;
				fb = tf;
			}
			const struct rec_pos *pos = s ? &s->pos[b - g->records] : NULL;

			return error_set_at(
			    -EINVAL, b->origin.file, b->origin.line, pos ? pos->col : 0,
			    "%s is the device of %s again (%s at %s:%u%s): one device "
			    "cannot be two %s",
			    fb->path, b->name, fa->path, a->origin.file, a->origin.line,
			    a->nfiles > 1 || b->nfiles > 1 ? ", in MultipleFiles=" : "", b->name);
		}
		i = e;
	}
	return 0;
}

/* The directories of File= paths checked so far in this load, each held open. */
struct dev_dirs {
	char **paths;
	int *fds;
	size_t n;
	int root; /* -1 until asked: are we root? */
};

static void dev_dirs_done(struct dev_dirs *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->paths[i]);
		close(d->fds[i]);
	}
	free(d->paths);
	free(d->fds);
}

/*
 * stat() of the device file @path, named at @pos. As root, through directories that no other
 * user can change (open_trusted()): in a directory a user can write, that user could swap a
 * GPU's node for a link to any device, which jobcg would then deny to every job or grant as
 * that GPU. Each directory is walked once per load (`jobcg run` loads on every launch).
 */
static int device_stat(struct dev_dirs *d, const char *path, const struct rec_pos *pos,
		       struct stat *ret)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int fd = -1;
	const char *slash = strrchr(path, '/'), *base;
	size_t i;
	int r = 0;

	if (d->root < 0)
		d->root = geteuid() == 0;
	if (!d->root || !slash) {
		if (stat(path, ret) < 0)
			r = negative_errno();
		goto out;
	}
	base = slash[1] ? slash + 1 : ".";
	dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	for (i = 0; i < d->n && !streq(d->paths[i], dir); i++)
		;
	if (i == d->n) {
		char **np = realloc(d->paths, (d->n + 1) * sizeof(*np));
		int *nf, dfd;

		if (!np)
			return -ENOMEM;
		d->paths = np;
		nf = realloc(d->fds, (d->n + 1) * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		d->fds = nf;
		r = open_trusted(dir, O_PATH | O_DIRECTORY, "device directory", &dfd);
		if (r != 0)
			goto out;
		d->paths[d->n] = TAKE_PTR(dir);
		d->fds[d->n] = dfd;
		d->n++;
	}
	/* The usual case in a trusted directory, one system call: the node itself, no link to
	 * follow (no other user can replace it there). A link is walked as a path. */
	if (fstatat(d->fds[i], base, ret, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(ret->st_mode))
		goto out;
	r = open_trusted_at(d->fds[i], d->paths[i], base, O_PATH, "device file", &fd);
	if (r == 0 && fstat(fd, ret) < 0)
		r = negative_errno();
out:
	if (r == -ENOMEM)
		return r;
	if (r == 1 || r == -ENOENT || (r < 0 && (!d->root || !slash)))
		return error_set_at(r == 1 ? -ENOENT : r, pos->file, pos->line, pos->col,
				    "device file %s: %s (check it exists on this node; "
				    "`jobcg config --no-stat` checks a file written for another "
				    "node)",
				    path, strerror(r == 1 ? ENOENT : -r));
	if (r < 0) {
		char msg[sizeof(jobcg_last_error()->message)];

		snprintf(msg, sizeof(msg), "%s", jobcg_last_error()->message);
		return error_set_at(r, pos->file, pos->line, pos->col,
				    "%s: jobcg runs as root and manages only device files whose "
				    "path no other user can change",
				    msg);
	}
	return 0;
}

int gres_conf_finish(struct confload *l)
{
	struct jobcg_gres_conf *g = &l->c->gres;
	struct gres_state *s = l->gres;
	const char *ad = g->node_autodetect ? g->node_autodetect : g->autodetect;
	_cleanup_(dev_dirs_done) struct dev_dirs dirs = {.root = -1};
	int r;

	for (size_t i = 0; i < g->nrecords; i++) {
		struct jobcg_gres_record *rec = &g->records[i];

		if (ad && !(rec->autodetect = strdup(ad)))
			return -ENOMEM;
		if (l->flags & JOBCG_CONFIG_NO_STAT)
			continue;
		for (size_t f = 0; f < rec->nfiles; f++) {
			struct jobcg_gres_file *gf = &rec->files[f];
			const struct rec_pos *pos = s ? &s->pos[i] : &(struct rec_pos){};
			struct stat st;

			r = device_stat(&dirs, gf->path, pos, &st);
			if (r < 0)
				return r;
			if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
				return error_set_at(-ENODEV, pos->file, pos->line, pos->col,
						    "%s is not a character or block device",
						    gf->path);
			gf->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
			gf->major = major(st.st_rdev);
			gf->minor = minor(st.st_rdev);
		}
	}
	return refuse_duplicate_files(l);
}
