/* Slurm's gres.conf beside jobcg's: Slurm hands a step GPU indices in its own file's order and
 * jobcg maps each onto the device of the same index in its file, so the two must name the same
 * device file for every index (jobcg_spank.so per step, `jobcg check --slurm-gres` per node). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_internal.h"
#include "confparse.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "parse.h"
#include "util.h"

void slurm_dirs_init(struct slurm_dirs *d, const char *slurm_conf)
{
	const char *slash = slurm_conf ? strrchr(slurm_conf, '/') : NULL;

	*d = (struct slurm_dirs){};
	if (!slurm_conf || !*slurm_conf) {
		d->dir[0] = "/etc/slurm";
		d->dir[1] = "/run/slurm/conf";
		d->n = 2;
		return;
	}
	d->slurm_conf = slurm_conf;
	if (slurm_conf[0] != '/' || (size_t)(slash - slurm_conf) >= sizeof(d->buf))
		return;
	if (slash == slurm_conf)
		strcpy(d->buf, "/");
	else
		snprintf(d->buf, sizeof(d->buf), "%.*s", (int)(slash - slurm_conf), slurm_conf);
	d->dir[0] = d->buf;
	d->n = 1;
}

int slurm_dirs_find(const struct slurm_dirs *d, const char *name, char buf[PATH_MAX])
{
	for (size_t i = 0; i < d->n; i++) {
		snprintf(buf, PATH_MAX, "%s/%s", streq(d->dir[i], "/") ? "" : d->dir[i], name);
		if (access(buf, F_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

const char *slurm_dirs_describe(const struct slurm_dirs *d, char *buf, size_t size)
{
	if (d->n == 2)
		snprintf(buf, size, "%s or %s", d->dir[0], d->dir[1]);
	else if (d->n == 1)
		snprintf(buf, size, "%s (the directory of SLURM_CONF=%s)", d->dir[0],
			 d->slurm_conf);
	else
		snprintf(buf, size, "any directory: SLURM_CONF=%s is not an absolute path",
			 d->slurm_conf);
	return buf;
}

static const struct jobcg_gres_device *gpu(const struct jobcg_gres_node *n, unsigned index)
{
	int pos = jobcg_gres_node_find(n, "gpu", index);

	return pos < 0 ? NULL : jobcg_gres_node_device(n, (unsigned)pos);
}

static const char *file_of(const struct jobcg_gres_device *d)
{
	return d->rec->nfiles ? d->rec->files[0].path : "(no file)";
}

/* "FILE:LINE" of the record, or @conf when it has no origin. */
static void where(char *buf, size_t size, const struct jobcg_gres_device *d, const char *conf)
{
	if (d->rec->origin.file && d->rec->origin.line)
		snprintf(buf, size, "%s:%u", d->rec->origin.file, d->rec->origin.line);
	else
		snprintf(buf, size, "%s", conf);
}

/* How many GPU indices @n has: one past the highest (Count-only records leave holes). */
static unsigned gpu_span(const struct jobcg_gres_node *n)
{
	unsigned span = 0;

	for (size_t p = 0; n && p < jobcg_gres_node_count(n); p++) {
		const struct jobcg_gres_device *d = jobcg_gres_node_device(n, (unsigned)p);

		if (d && streq(d->rec->name, "gpu") && d->index + 1 > span)
			span = d->index + 1;
	}
	return span;
}

JOBCG_EXPORT int jobcg_gres_slurm_gpu(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
				      const struct jobcg_gres_node *slurm, const char *slurm_conf,
				      unsigned index)
{
	const struct jobcg_gres_device *j = gpu(jobcg, index),
				       *s = slurm ? gpu(slurm, index) : NULL;
	char jw[512], sw[512];

	if (!j && s) {
		where(sw, sizeof(sw), s, slurm_conf);
		return error_set(
		    -EINVAL,
		    "GPU %u is %s in Slurm's gres.conf (%s) but not in jobcg's (%s "
		    "has %u gpu device(s) here): Slurm's and jobcg's gres.conf disagree",
		    index, file_of(s), sw, jobcg_conf, gpu_span(jobcg));
	}
	if (!j)
		return error_set(-EINVAL,
				 "GPU %u is not in jobcg's gres.conf (%s has %u gpu device(s) "
				 "here): Slurm's and jobcg's gres.conf disagree",
				 index, jobcg_conf, gpu_span(jobcg));
	if (!slurm)
		return (int)j->pos;
	if (!s) {
		where(jw, sizeof(jw), j, jobcg_conf);
		return error_set(-EINVAL,
				 "GPU %u is %s in jobcg's gres.conf (%s) but not in Slurm's (%s "
				 "has %u gpu device(s) here; is it the file slurmd reads?)",
				 index, file_of(j), jw, slurm_conf, gpu_span(slurm));
	}
	if (!streq(file_of(s), file_of(j))) {
		where(sw, sizeof(sw), s, slurm_conf);
		where(jw, sizeof(jw), j, jobcg_conf);
		return error_set(-EINVAL,
				 "GPU %u is %s in Slurm's gres.conf (%s) but %s in jobcg's (%s): "
				 "jobcg's must list the GPUs in the order Slurm numbers them "
				 "(slurm.conf's Gres= types in order, each type's lines of Slurm's "
				 "gres.conf in order)",
				 index, file_of(s), sw, file_of(j), jw);
	}
	return (int)j->pos;
}

JOBCG_EXPORT int jobcg_gres_slurm_compare(const struct jobcg_gres_node *jobcg,
					  const char *jobcg_conf,
					  const struct jobcg_gres_node *slurm,
					  const char *slurm_conf, char ***ret)
{
	_cleanup_strv_free_ char **diffs = calloc(1, sizeof(char *));
	unsigned nj = gpu_span(jobcg), ns = gpu_span(slurm);
	int r;

	if (!diffs)
		return -ENOMEM;
	for (unsigned i = 0; i < (nj > ns ? nj : ns); i++) {
		r = jobcg_gres_slurm_gpu(jobcg, jobcg_conf, slurm, slurm_conf, i);
		if (r == -ENOMEM)
			return r;
		if (r < 0 && (r = strv_push(&diffs, strdup(jobcg_last_error()->message))) < 0)
			return r;
	}
	*ret = TAKE_PTR(diffs);
	return 0;
}

static int on_slurm_stmt(const struct conf_stmt *st, void *userdata)
{
	struct slurm_conf_facts *f = userdata;

	for (size_t i = 0; i < st->npairs; i++) {
		const char *key = st->pairs[i].key, *value = st->pairs[i].value;
		_cleanup_free_ char *v = NULL;
		char *save = NULL;

		char **str = strcaseeq(key, "PlugStackConfig") ? &f->plugstack
			     : strcaseeq(key, "ProctrackType") ? &f->proctrack
			     : strcaseeq(key, "TaskPlugin")    ? &f->task_plugin
							       : NULL;

		if (str) {
			free(*str);
			*str = *value ? strdup(value) : NULL;
			if (*value && !*str)
				return -ENOMEM;
			continue;
		}
		if (!strcaseeq(key, "GresTypes"))
			continue;
		if (!(v = strdup(value)))
			return -ENOMEM;
		f->gres_gpu = false;
		for (char *t = strtok_r(v, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save))
			if (strcaseeq(t, "gpu"))
				f->gres_gpu = true;
	}
	return 0;
}

void slurm_conf_facts_done(struct slurm_conf_facts *f)
{
	free(f->plugstack);
	free(f->proctrack);
	free(f->task_plugin);
	*f = (struct slurm_conf_facts){};
}

int slurm_conf_read(const char *path, struct slurm_conf_facts *ret)
{
	struct slurm_conf_facts f = {};
	struct conf_parser p = {.fn = on_slurm_stmt, .userdata = &f, .slurm_conf = true};
	int r = conf_parse_file(&p, path);

	if (r > 0)
		r = error_set(-ENOENT, "%s: no such file", path);
	if (r < 0) {
		slurm_conf_facts_done(&f);
		return r;
	}
	*ret = f;
	return 0;
}

enum slurm_plugstack_line slurm_plugstack_line(char *line, const char **ret_arg)
{
	char *hash = strchr(line, '#'), *tok, *save = NULL;
	bool optional;

	*ret_arg = "";
	if (hash)
		*hash = '\0';
	/* Slurm (_plugin_stack_line_type) takes its three keywords in lower case only, and
	 * ignores a line with any other first word. */
	tok = strtok_r(line, " \t\r\n", &save);
	if (tok && streq(tok, "include")) {
		char *pat = strtok_r(NULL, " \t\r\n", &save);

		if (!pat)
			return SLURM_PLUGSTACK_OTHER;
		*ret_arg = pat;
		return SLURM_PLUGSTACK_INCLUDE;
	}
	if (!tok || (!streq(tok, "required") && !streq(tok, "optional")))
		return SLURM_PLUGSTACK_OTHER;
	optional = streq(tok, "optional");
	/* required|optional PATH ARGS...: the path, the second word, names the plugin wherever it
	 * is; the words after it are the plugin's arguments. */
	tok = strtok_r(NULL, " \t\r\n", &save);
	if (!tok || !strstr(tok, "jobcg_spank.so"))
		return SLURM_PLUGSTACK_OTHER;
	while ((tok = strtok_r(NULL, " \t\r\n", &save)))
		if (startswith(tok, "slurm_gres="))
			*ret_arg = tok + 11;
	return optional ? SLURM_PLUGSTACK_JOBCG_OPTIONAL : SLURM_PLUGSTACK_JOBCG;
}

int slurm_conf_locate(const struct slurm_dirs *d, char buf[PATH_MAX])
{
	char where[PATH_MAX + 128];

	/* slurmd exports the very file it reads (-f, configless cache or default). */
	if (d->slurm_conf && d->slurm_conf[0] == '/') {
		snprintf(buf, PATH_MAX, "%s", d->slurm_conf);
		return 0;
	}
	if (slurm_dirs_find(d, "slurm.conf", buf) == 0)
		return 0;
	return error_set(-ENOENT, "Slurm's slurm.conf is not in %s",
			 slurm_dirs_describe(d, where, sizeof(where)));
}

struct node_gres_scan {
	const char *node;
	char *dflt; /* Gres= of the NodeName=DEFAULT lines so far */
	char *gres;
	bool found;
};

static int on_node_stmt(const struct conf_stmt *st, void *userdata)
{
	struct node_gres_scan *s = userdata;
	const char *gres = NULL;
	bool has_gres = false;
	int r;

	/* Cheap for the thousands of other lines: only NodeName= lines are looked into. */
	if (st->npairs == 0 || !strcaseeq(st->pairs[0].key, "NodeName"))
		return 0;
	for (size_t i = 1; i < st->npairs; i++)
		if (strcaseeq(st->pairs[i].key, "Gres")) {
			gres = st->pairs[i].value;
			has_gres = true;
		}
	if (strcaseeq(st->pairs[0].value, "DEFAULT")) {
		/* Slurm's defaults: a DEFAULT line sets the keys it names for the lines after. */
		if (has_gres) {
			free(s->dflt);
			if (!(s->dflt = strdup(gres)))
				return -ENOMEM;
		}
		return 0;
	}
	r = jobcg_hostlist_contains(st->pairs[0].value, s->node);
	if (r < 0) {
		char why[256];

		/* Copied: the error record is rewritten from its own message otherwise. */
		snprintf(why, sizeof(why), "%s", jobcg_last_error()->message);
		return error_set_at(r, st->file, st->line, st->pairs[0].vcol, "NodeName=%s: %s",
				    st->pairs[0].value, why);
	}
	if (r == 0)
		return 0;
	s->found = true;
	if (!has_gres)
		gres = s->dflt;
	if (gres && !(s->gres = strdup(gres)))
		return -ENOMEM;
	/* Slurm keeps a node's first line (another is an error there): nothing after it matters
	 * and a step need not parse the rest of a big cluster's file. */
	return -ECANCELED;
}

int slurm_conf_node_gres(const char *path, const char *node, char **ret)
{
	struct node_gres_scan s = {.node = node};
	struct conf_parser p = {.fn = on_node_stmt, .userdata = &s, .slurm_conf = true};
	int r = conf_parse_file(&p, path);

	free(s.dflt);
	if (r == -ECANCELED && s.found)
		r = 0;
	if (r > 0)
		r = error_set(-ENOENT, "%s: no such file", path);
	else if (r == 0 && !s.found)
		r = error_set(-ENOENT, "%s has no NodeName= line for node %s", path, node);
	if (r < 0) {
		free(s.gres);
		return r;
	}
	*ret = s.gres ? s.gres : strdup("");
	return *ret ? 0 : -ENOMEM;
}

/* One GPU type of a node's Gres=, in Slurm's order (the first time the type appears). */
struct gpu_type {
	char *name;
	uint64_t count;
};

static void gpu_types_free(struct gpu_type *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(t[i].name);
	free(t);
}

static int gpu_type_add(struct gpu_type **t, size_t *n, const char *name, size_t len,
			uint64_t count)
{
	struct gpu_type *nt;

	/* Slurm tells types apart by a hash of their exact spelling (gres_build_id). */
	for (size_t i = 0; i < *n; i++)
		if (strlen((*t)[i].name) == len && strncmp((*t)[i].name, name, len) == 0) {
			(*t)[i].count += count;
			return 0;
		}
	if (!(nt = realloc(*t, (*n + 1) * sizeof(*nt))))
		return -ENOMEM;
	*t = nt;
	nt[*n] = (struct gpu_type){.name = strndup(name, len), .count = count};
	if (!nt[*n].name)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/*
 * slurm.conf's Gres= of a node (gpu:2,gpu:a100:2(S:0-1),gpu:tesla:no_consume:1,mps:100) as
 * slurmd reads it (_get_gres_cnt, gres_add_type): the gpu types in their first order with
 * their counts, or none and *ret_untyped, the count of untyped GPUs.
 */
static int slurm_gres_gpu_types(const char *gres, struct gpu_type **ret, size_t *ret_n,
				uint64_t *ret_untyped)
{
	_cleanup_free_ char *copy = strdup(gres);
	struct gpu_type *t = NULL;
	uint64_t total = 0;
	size_t n = 0;
	char *save = NULL;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok && r == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		char *paren, *num, *end;
		uint64_t c;

		if (streq(tok, "gpu")) {
			total = 1; /* Slurm stops reading the node's GRES here */
			break;
		}
		if (!startswith(tok, "gpu:"))
			continue;
		if ((paren = strrchr(tok, '(')))
			*paren = '\0'; /* socket binding */
		num = strrchr(tok, ':');
		if (num[1] < '0' || num[1] > '9') {
			c = 1; /* a type without a count */
		} else {
			errno = 0;
			c = strtoull(num + 1, &end, 10);
			uint64_t mult = !*end		      ? 1
					: strcaseeq(end, "k") ? 1ull << 10
					: strcaseeq(end, "m") ? 1ull << 20
					: strcaseeq(end, "g") ? 1ull << 30
					: strcaseeq(end, "t") ? 1ull << 40
					: strcaseeq(end, "p") ? 1ull << 50
							      : 0;
			if (errno || !mult || c > UINT64_MAX / mult) {
				r = error_set(-EINVAL, "Gres=%s: '%s' is not a GPU count", gres,
					      num + 1);
				break;
			}
			c *= mult;
			*num = '\0';
		}
		total += c;
		/* The types after the name (the count cut off above, when there is one). */
		for (char *s = strlen(tok) > 4 ? tok + 4 : "", *e; *s && r == 0;
		     s = *e ? e + 1 : e) {
			e = strchrnul(s, ':');
			/* strtok_r in Slurm: no empty types. */
			if (e == s ||
			    ((size_t)(e - s) == 10 && strncasecmp(s, "no_consume", 10) == 0))
				continue;
			r = gpu_type_add(&t, &n, s, (size_t)(e - s), c);
		}
	}
	if (r < 0) {
		gpu_types_free(t, n);
		return r;
	}
	*ret = t;
	*ret_n = n;
	*ret_untyped = n ? 0 : total;
	return 0;
}

/* One gres.conf line's gpu records (consecutive in the table: a File= range expands in place). */
struct gpu_line {
	size_t first, n;
	uint64_t count;
	const char *type;
	bool used;
};

/* _merge_gres2: take lines of @type (NULL: any) until @count GPUs, the last one cut short. */
static void take_lines(struct jobcg_gres_conf *g, struct gpu_line *lines, size_t nlines,
		       const char *type, uint64_t count, bool *taken, unsigned *order,
		       size_t *norder)
{
	for (size_t l = 0; l < nlines && count > 0; l++) {
		struct gpu_line *ln = &lines[l];

		if (ln->used || (type && !(ln->type && strcaseeq(ln->type, type))))
			continue;
		ln->used = true;
		for (size_t k = 0; k < ln->n && count > 0; k++) {
			struct jobcg_gres_record *rec = &g->records[ln->first + k];

			taken[ln->first + k] = true;
			order[(*norder)++] = (unsigned)(ln->first + k);
			count = rec->count >= count ? 0 : count - rec->count;
		}
	}
}

static bool same_line(const struct jobcg_gres_record *a, const struct jobcg_gres_record *b)
{
	return a->origin.line == b->origin.line &&
	       (a->origin.file == b->origin.file ||
		(a->origin.file && b->origin.file && streq(a->origin.file, b->origin.file)));
}

int slurm_gpu_order(struct jobcg_gres_conf *g, const char *gres_path, const char *node_gres,
		    const char *slurm_conf, const char *node)
{
	const char *ad = g->node_autodetect ? g->node_autodetect : g->autodetect;
	_cleanup_free_ struct gpu_line *lines = calloc(g->nrecords + 1, sizeof(*lines));
	_cleanup_free_ bool *taken = calloc(g->nrecords + 1, sizeof(*taken));
	_cleanup_free_ unsigned *order = calloc(g->nrecords + 1, sizeof(*order));
	struct gpu_type *types = NULL;
	size_t ntypes = 0, nlines = 0, norder = 0, out = 0;
	uint64_t untyped = 0;
	unsigned next = 0;
	int r;

	if (!lines || !taken || !order)
		return -ENOMEM;
	if (ad && !strcaseeq(ad, "off"))
		return error_set(
		    -EOPNOTSUPP,
		    "Slurm's gres.conf %s sets AutoDetect=%s: slurmd then numbers this "
		    "node's GPUs by what the driver reports (device file names in "
		    "natural order, then NVLinks), which jobcg does not read, so it "
		    "cannot be sure which GPU a Slurm index is; set AutoDetect=off and "
		    "list every GPU with File= in both gres.conf files",
		    gres_path, ad);
	r = slurm_gres_gpu_types(node_gres, &types, &ntypes, &untyped);
	if (r < 0) {
		jobcg_error_prefix("%s, NodeName=%s", slurm_conf, node);
		return r;
	}
	/* slurmd's list: the Name= lines, then the NodeName= lines (s_p_get_array "Name", then
	 * "NodeName"), each group in file order. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < g->nrecords; i++) {
			struct jobcg_gres_record *rec = &g->records[i];

			if (!streq(rec->name, "gpu") || rec->node_line != (pass == 1))
				continue;
			if (nlines && lines[nlines - 1].first + lines[nlines - 1].n == i &&
			    same_line(&g->records[lines[nlines - 1].first], rec)) {
				lines[nlines - 1].n++;
				lines[nlines - 1].count += rec->count;
				continue;
			}
			lines[nlines++] = (struct gpu_line){
			    .first = i, .n = 1, .count = rec->count, .type = rec->type};
		}
	if (ntypes == 0)
		take_lines(g, lines, nlines, NULL, untyped, taken, order, &norder);
	for (size_t t = 0; t < ntypes; t++)
		take_lines(g, lines, nlines, types[t].name, types[t].count, taken, order, &norder);
	gpu_types_free(types, ntypes);
	/* common_node_config_load: each device file, in that order, is the next index; records
	 * without a file (Count only) take none. */
	for (size_t k = 0; k < norder; k++)
		if (g->records[order[k]].nfiles)
			g->records[order[k]].index = next++;
	for (size_t k = 0; k < norder; k++)
		if (!g->records[order[k]].nfiles)
			g->records[order[k]].index = next++;
	/* The lines slurmd leaves out (a type slurm.conf does not give the node, beyond its
	 * count) are no GPU of Slurm's. */
	for (size_t i = 0; i < g->nrecords; i++) {
		if (streq(g->records[i].name, "gpu") && !taken[i]) {
			gres_record_done(&g->records[i]);
			continue;
		}
		g->records[out++] = g->records[i];
	}
	g->nrecords = out;
	return 0;
}

int slurm_gpu_node_new(struct jobcg_config *sconf, const char *gres_path, const char *slurm_conf,
		       const char *node, struct jobcg_gres_node **ret)
{
	_cleanup_free_ char *gres = NULL;
	int r = slurm_conf_node_gres(slurm_conf, node, &gres);

	if (r < 0) {
		jobcg_error_prefix("Slurm's GPU numbers come from this node's Gres= in slurm.conf");
		return r;
	}
	r = slurm_gpu_order(&sconf->gres, gres_path, gres, slurm_conf, node);
	if (r < 0)
		return r;
	return gres_node_new(&sconf->gres, ret);
}
