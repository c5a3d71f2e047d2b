/* Slurm's gres.conf beside jobcg's: Slurm hands a step GPU indices in its own file's order and
 * jobcg maps each onto the device of the same index in its file, so the two must name the same
 * device file for every index (jobcg_spank.so per step, `jobcg check --slurm-gres` per node). */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config_internal.h"
#include "confparse.h"
#include "gpudetect.h"
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

/* Slurm's list came from its AutoDetect=nvml merge (slurm_gpu_order). */
static bool detected(const struct jobcg_gres_node *slurm)
{
	const struct jobcg_gres_device *s = slurm ? gpu(slurm, 0) : NULL;

	return s && s->rec->slurm_detected;
}

/* The gpu device of @n whose (first) file is @file. */
static const struct jobcg_gres_device *gpu_by_file(const struct jobcg_gres_node *n,
						   const char *file)
{
	for (size_t p = 0; n && p < jobcg_gres_node_count(n); p++) {
		const struct jobcg_gres_device *d = jobcg_gres_node_device(n, (unsigned)p);

		if (d && streq(d->rec->name, "gpu") && d->rec->nfiles && streq(file_of(d), file))
			return d;
	}
	return NULL;
}

/* A GPU of jobcg's gres.conf that slurmd's AutoDetect list does not have, or NULL. */
static const struct jobcg_gres_device *jobcg_only(const struct jobcg_gres_node *jobcg,
						  const struct jobcg_gres_node *slurm)
{
	for (size_t p = 0; jobcg && p < jobcg_gres_node_count(jobcg); p++) {
		const struct jobcg_gres_device *d = jobcg_gres_node_device(jobcg, (unsigned)p);

		if (d && streq(d->rec->name, "gpu") && !gpu_by_file(slurm, file_of(d)))
			return d;
	}
	return NULL;
}

/*
 * Under AutoDetect=nvml Slurm's order is the driver's, not a file's: Slurm's index names a
 * device file and jobcg's record of that file is the one. With @all, every GPU jobcg's
 * gres.conf lists must be in Slurm's list too (the two disagree otherwise: refused).
 */
static int detected_gpu(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
			const struct jobcg_gres_node *slurm, const char *slurm_conf, unsigned index,
			bool all)
{
	const struct jobcg_gres_device *s = gpu(slurm, index), *j, *o;
	char jw[512];

	if (all && (o = jobcg_only(jobcg, slurm))) {
		where(jw, sizeof(jw), o, jobcg_conf);
		return error_set(
		    -EINVAL,
		    "jobcg's gres.conf lists %s (%s), which is not among the %u GPU(s) "
		    "slurmd numbers under AutoDetect=nvml (%s and the driver's GPUs): "
		    "a GPU off the bus, or Slurm's and jobcg's gres.conf disagree",
		    file_of(o), jw, gpu_span(slurm), slurm_conf);
	}
	for (unsigned i = 0; all && i < gpu_span(slurm); i++)
		if (i != index && gpu(slurm, i) && !gpu_by_file(jobcg, file_of(gpu(slurm, i))))
			return error_set(
			    -EINVAL,
			    "GPU %u of slurmd's AutoDetect=nvml list (%s and the "
			    "driver's GPUs) is %s, which jobcg's gres.conf (%s) does not "
			    "list: the two disagree",
			    i, slurm_conf, file_of(gpu(slurm, i)), jobcg_conf);
	if (!s)
		return error_set(-EINVAL,
				 "GPU %u is not among the %u GPU(s) slurmd numbers under "
				 "AutoDetect=nvml (%s and the driver's GPUs)",
				 index, gpu_span(slurm), slurm_conf);
	j = gpu_by_file(jobcg, file_of(s));
	if (!j)
		return error_set(
		    -EINVAL,
		    "GPU %u is %s in slurmd's AutoDetect=nvml list (%s and the driver's "
		    "GPUs), which jobcg's gres.conf (%s) does not list",
		    index, file_of(s), slurm_conf, jobcg_conf);
	return (int)j->pos;
}

JOBCG_EXPORT int jobcg_gres_slurm_gpu(const struct jobcg_gres_node *jobcg, const char *jobcg_conf,
				      const struct jobcg_gres_node *slurm, const char *slurm_conf,
				      unsigned index)
{
	const struct jobcg_gres_device *j = gpu(jobcg, index),
				       *s = slurm ? gpu(slurm, index) : NULL;
	char jw[512], sw[512];

	if (detected(slurm))
		return detected_gpu(jobcg, jobcg_conf, slurm, slurm_conf, index, true);

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
	if (detected(slurm)) {
		/* Each of Slurm's GPUs, then each of jobcg's that Slurm lacks. */
		for (unsigned i = 0; i < ns; i++)
			if ((r = detected_gpu(jobcg, jobcg_conf, slurm, slurm_conf, i, false)) <
				0 &&
			    (r == -ENOMEM ||
			     (r = strv_push(&diffs, strdup(jobcg_last_error()->message))) < 0))
				return r;
		for (size_t p = 0; jobcg && p < jobcg_gres_node_count(jobcg); p++) {
			const struct jobcg_gres_device *d =
			    jobcg_gres_node_device(jobcg, (unsigned)p);
			char jw[512];

			if (!d || !streq(d->rec->name, "gpu") || gpu_by_file(slurm, file_of(d)))
				continue;
			where(jw, sizeof(jw), d, jobcg_conf);
			if ((r = strv_push(
				 &diffs, strdup_printf("jobcg's gres.conf lists %s (%s), which is "
						       "not among the GPUs slurmd numbers under "
						       "AutoDetect=nvml (%s and the driver's GPUs)",
						       file_of(d), jw, slurm_conf))) < 0)
				return r;
		}
		*ret = TAKE_PTR(diffs);
		return 0;
	}
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

/* slurm_conf_read() of @path, or of @buf (its name @path, no Include followed) when given. */
static int facts_read(const char *path, const char *buf, size_t len, struct slurm_conf_facts *ret)
{
	struct slurm_conf_facts f = {};
	struct conf_parser p = {
	    .fn = on_slurm_stmt, .userdata = &f, .slurm_conf = true, .no_include = buf != NULL};
	int r = buf ? conf_parse_buffer(&p, path, buf, len) : conf_parse_file(&p, path);

	if (r > 0)
		r = error_set(-ENOENT, "%s: no such file", path);
	if (r < 0) {
		slurm_conf_facts_done(&f);
		return r;
	}
	*ret = f;
	return 0;
}

int slurm_conf_read(const char *path, struct slurm_conf_facts *ret)
{
	return facts_read(path, NULL, 0, ret);
}

int slurm_conf_read_buffer(const char *name, const char *buf, size_t len,
			   struct slurm_conf_facts *ret)
{
	return facts_read(name, buf, len, ret);
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

/* slurm_conf_node_gres() of @path, or of @buf (named @path, no Include) when given. */
static int node_gres(const char *path, const char *buf, size_t len, const char *node, char **ret)
{
	struct node_gres_scan s = {.node = node};
	struct conf_parser p = {
	    .fn = on_node_stmt, .userdata = &s, .slurm_conf = true, .no_include = buf != NULL};
	int r = buf ? conf_parse_buffer(&p, path, buf, len) : conf_parse_file(&p, path);

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

int slurm_conf_node_gres(const char *path, const char *node, char **ret)
{
	return node_gres(path, NULL, 0, node, ret);
}

int slurm_conf_node_gres_buffer(const char *name, const char *buf, size_t len, const char *node,
				char **ret)
{
	return node_gres(name, buf, len, node, ret);
}

void slurm_gpu_types_free(struct gpu_type *t, size_t n)
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

int slurm_gres_gpu_types(const char *gres, struct gpu_type **ret, size_t *ret_n,
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
		slurm_gpu_types_free(t, n);
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

/*
 * One count-1 GPU record of slurmd's AutoDetect merge (_merge_system_gres_conf): one of the
 * merged slurm.conf/gres.conf list split into single GPUs, or one GPU NVML reports.
 */
struct mgpu {
	const char *type; /* not owned */
	const char *file; /* not owned; NULL: none */
	int link;	  /* where its Links= has -1 (NVML's index of the GPU); -1: no Links= */
	const struct jobcg_gres_record *rec; /* the gres.conf record it comes from, or NULL */
	bool used;
};

/* The singles of the merged list, in _merge_config's order (NULL: not wanted). */
struct singles {
	struct mgpu *v;
	size_t n, max;
};

static int single_add(struct singles *s, const char *type, const char *file,
		      const struct jobcg_gres_record *rec)
{
	if (!s)
		return 0;
	if (s->n == s->max)
		return -E2BIG;
	s->v[s->n++] = (struct mgpu){.type = type, .file = file, .link = -1, .rec = rec};
	return 0;
}

/*
 * _merge_gres2: take lines of @type (NULL: any) until @count GPUs, the last one cut short;
 * returns the count left over (slurmd adds it as a record without File=). With @s, each GPU
 * taken is also one single (a Count-only record as many as it gives).
 */
static int take_lines(struct jobcg_gres_conf *g, struct gpu_line *lines, size_t nlines,
		      const char *type, uint64_t count, bool *taken, unsigned *order,
		      size_t *norder, struct singles *s, uint64_t *ret_left)
{
	int r = 0;

	for (size_t l = 0; l < nlines && count > 0; l++) {
		struct gpu_line *ln = &lines[l];

		if (ln->used || (type && !(ln->type && strcaseeq(ln->type, type))))
			continue;
		ln->used = true;
		for (size_t k = 0; k < ln->n && count > 0 && r == 0; k++) {
			struct jobcg_gres_record *rec = &g->records[ln->first + k];
			uint64_t c = rec->count < count ? rec->count : count;

			taken[ln->first + k] = true;
			order[(*norder)++] = (unsigned)(ln->first + k);
			count -= c;
			/* _match_type: under an untyped Gres= slurmd drops the line's Type=. */
			for (uint64_t i = 0; i < (rec->nfiles ? 1 : c) && r == 0; i++)
				r = single_add(s, type ? rec->type : NULL,
					       rec->nfiles ? rec->files[0].path : NULL, rec);
		}
	}
	*ret_left = count;
	return r;
}

static bool same_line(const struct jobcg_gres_record *a, const struct jobcg_gres_record *b)
{
	return a->origin.line == b->origin.line &&
	       (a->origin.file == b->origin.file ||
		(a->origin.file && b->origin.file && streq(a->origin.file, b->origin.file)));
}

/* ---- AutoDetect=nvml: slurmd 22.05's merge with what NVML reports (gres_gpu.c) ---- */

/* One run of digits against another, by value (compare_right in Slurm's strnatcmp.c). */
static int nat_run(const char *a, const char *b)
{
	int bias = 0;

	for (;; a++, b++) {
		bool da = isdigit((unsigned char)*a), db = isdigit((unsigned char)*b);

		if (!da && !db)
			return bias;
		if (!da || !db)
			return da ? 1 : -1;
		if (*a != *b && !bias)
			bias = *a < *b ? -1 : 1;
	}
}

/* Runs with a leading zero: digit by digit, as fractions (compare_left). */
static int nat_fraction(const char *a, const char *b)
{
	for (;; a++, b++) {
		bool da = isdigit((unsigned char)*a), db = isdigit((unsigned char)*b);

		if (!da && !db)
			return 0;
		if (!da || !db)
			return da ? 1 : -1;
		if (*a != *b)
			return *a < *b ? -1 : 1;
	}
}

/* Slurm's strnatcmp(): natural order, case kept, blanks skipped ("nvidia2" < "nvidia10"). */
static int natcmp(const char *a, const char *b)
{
	for (;;) {
		int r;

		while (isspace((unsigned char)*a))
			a++;
		while (isspace((unsigned char)*b))
			b++;
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b) &&
		    (r = (*a == '0' || *b == '0') ? nat_fraction(a, b) : nat_run(a, b)) != 0)
			return r;
		if (!*a && !*b)
			return 0;
		/* char as Slurm compares it (nat_char) */
		if (*a != *b)
			return *a < *b ? -1 : 1;
		a++;
		b++;
	}
}

/* _sort_string_null_last */
static int file_cmp(const struct mgpu *x, const struct mgpu *y)
{
	if (!x->file || !y->file)
		return !x->file - !y->file;
	return natcmp(x->file, y->file);
}

/* _sort_gpu_by_type_name: no type first, then longer types first, then by type, by file. */
static int type_cmp(const struct mgpu *x, const struct mgpu *y)
{
	size_t lx, ly;
	int r;

	if (!x->type || !y->type)
		return !y->type - !x->type;
	lx = strlen(x->type);
	ly = strlen(y->type);
	if (lx != ly)
		return lx > ly ? -1 : 1;
	r = strcmp(x->type, y->type);
	return r ? r : file_cmp(x, y);
}

/* _sort_gpu_by_links_order: by where -1 is in Links= (NVML's order), none last. */
static int link_cmp(const struct mgpu *x, const struct mgpu *y)
{
	if (x->link < 0 || y->link < 0)
		return (x->link < 0) - (y->link < 0);
	return x->link - y->link;
}

/*
 * Slurm sorts with qsort(): stable in glibc up to 2.36 (a merge sort) and not promised after.
 * Stable here; where the order of equal elements would matter the caller refuses.
 */
static void msort(struct mgpu **v, size_t n, int (*cmp)(const struct mgpu *, const struct mgpu *))
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cmp(v[j - 1], v[j]) > 0; j--) {
			struct mgpu *t = v[j - 1];

			v[j - 1] = v[j];
			v[j] = t;
		}
}

/* Case-insensitive strstr (Slurm's xstrcasestr); an empty or missing needle never matches. */
static bool has_type(const char *haystack, const char *needle)
{
	size_t n = needle ? strlen(needle) : 0;

	for (const char *p = haystack; n && p && strlen(p) >= n; p++)
		if (strncasecmp(p, needle, n) == 0)
			return true;
	return false;
}

static const char *AD_FIX =
    "list every GPU with File= in both gres.conf files and set AutoDetect=off "
    "(`jobcg gpus --gres-conf` prints such lines)";

/*
 * What slurmd's gpu/nvml plugin lists, from the NVIDIA driver's files (the nvidia backend,
 * under $JOBCG_SYSROOT): each GPU in PCI bus order (NVML's index order, which its Links= matrix
 * keeps), /dev/nvidia<minor>, and NVML's name in lower case with '_' for ' '
 * (gpu_common_underscorify_tolower). Whatever it cannot reproduce it refuses.
 */
static int nvml_system(const char *gres_path, struct jobcg_gpus **ret_gpus, char ***ret_types)
{
	struct jobcg_gpus *gpus = NULL;
	_cleanup_strv_free_ char **types = NULL;
	int r = jobcg_gpus_detect("nvidia", &gpus);

	if (r < 0) {
		jobcg_error_prefix("Slurm's gres.conf %s sets AutoDetect=nvml, and jobcg reads the "
				   "NVIDIA driver's files for slurmd's list of GPUs",
				   gres_path);
		return r;
	}
	for (size_t i = 0; i < gpus->ngpus && r >= 0; i++)
		if (gpus->gpus[i].mig || gpus->gpus[i].mig_mode)
			r = error_set(
			    -EOPNOTSUPP,
			    "Slurm's gres.conf %s sets AutoDetect=nvml and GPU %s is in MIG "
			    "mode: slurmd then lists its MIG instances, which jobcg does not "
			    "reproduce; %s",
			    gres_path, gpus->gpus[i].pci, AD_FIX);
	if (r >= 0 && gpus->warnings)
		r = error_set(-EOPNOTSUPP,
			      "Slurm's gres.conf %s sets AutoDetect=nvml, but jobcg could not read "
			      "every NVIDIA GPU of this node (%s), so it cannot know slurmd's GPU "
			      "numbers: mend that, or %s",
			      gres_path, gpus->warnings[0], AD_FIX);
	for (size_t i = 0; i < gpus->ngpus && r >= 0; i++) {
		const struct jobcg_gpu *d = &gpus->gpus[i];
		char *t;

		/* NVML cuts names at NVML_DEVICE_NAME_BUFFER_SIZE (64); escaped bytes would
		 * differ too. */
		if (strlen(d->model) >= 64 || strchr(d->model, '\\'))
			r = error_set(
			    -EOPNOTSUPP,
			    "Slurm's gres.conf %s sets AutoDetect=nvml and GPU %s has a model "
			    "name ('%s') jobcg cannot be sure NVML spells the same; %s",
			    gres_path, d->pci, d->model, AD_FIX);
		else if (!(t = strdup(d->model)) || strv_push(&types, t) < 0)
			r = -ENOMEM;
		else
			for (; *t; t++)
				*t = *t == ' ' ? '_' : (char)tolower((unsigned char)*t);
	}
	if (r < 0) {
		jobcg_gpus_free(gpus);
		return r;
	}
	*ret_gpus = gpus;
	*ret_types = TAKE_PTR(types);
	return 0;
}

/*
 * _merge_system_gres_conf of Slurm 22.05 on the singles @conf (in _merge_config's order) and
 * the GPUs the driver lists; replaces @g's gpu records with slurmd's final list, in its order
 * (the index of each is its position: common_node_config_load).
 */
static int nvml_merge(struct jobcg_gres_conf *g, const char *gres_path, struct singles *conf)
{
	_cleanup_strv_free_ char **types = NULL;
	struct jobcg_gpus *gpus = NULL;
	struct mgpu *sys = NULL, **cv = NULL, **sv = NULL, **fin = NULL;
	struct jobcg_gres_record *recs = NULL;
	size_t nsys = 0, nfin = 0, nonly = 0, nrecs = 0;
	bool strip = true;
	int r = nvml_system(gres_path, &gpus, &types);

	if (r < 0)
		return r;
	nsys = gpus->ngpus;
	sys = calloc(nsys + 1, sizeof(*sys));
	cv = calloc(conf->n + 1, sizeof(*cv));
	sv = calloc(nsys + 1, sizeof(*sv));
	fin = calloc(conf->n + nsys + 1, sizeof(*fin));
	recs = calloc(g->nrecords + conf->n + 1, sizeof(*recs));
	if (!sys || !cv || !sv || !fin || !recs) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nsys; i++) {
		sys[i] = (struct mgpu){
		    .type = types[i], .file = gpus->gpus[i].files[0].path, .link = (int)i};
		sv[i] = &sys[i];
	}
	for (size_t i = 0; i < conf->n; i++) {
		cv[i] = &conf->v[i];
		if (cv[i]->type && *cv[i]->type)
			strip = false;
	}
	/* _normalize_sys_gres_types: each system GPU, longest type first, takes the type of the
	 * first unused single whose type is part of its own (any case). */
	if (conf->n) {
		msort(cv, conf->n, type_cmp);
		msort(sv, nsys, type_cmp);
		for (size_t i = 0; i < nsys; i++) {
			size_t c = 0;

			while (c < conf->n && (cv[c]->used || !has_type(sv[i]->type, cv[c]->type)))
				c++;
			if (c < conf->n) {
				cv[c]->used = true;
				sv[i]->type = cv[c]->type;
			} else if (strip) {
				sv[i]->type = NULL;
			}
		}
		for (size_t c = 0; c < conf->n; c++)
			cv[c]->used = false;
	}
	/* Singles with File= first, each to the first unused system GPU (by file) of its type
	 * and file; one without a match is kept only with a File= (config-only, no Links=). */
	msort(cv, conf->n, file_cmp);
	msort(sv, nsys, file_cmp);
	for (size_t c = 0; c < conf->n; c++) {
		const struct mgpu *k = cv[c];
		size_t i = 0;

		while (i < nsys &&
		       (sv[i]->used || (k->type && !(sv[i]->type && streq(k->type, sv[i]->type))) ||
			(k->file && !streq(k->file, sv[i]->file))))
			i++;
		if (i < nsys) {
			sv[i]->used = true;
			sv[i]->rec = k->rec;
			fin[nfin++] = sv[i];
		} else if (k->file) {
			fin[nfin++] = cv[c];
			nonly++;
		}
	}
	/* Two GPUs without Links= compare equal in the last sort: their order is qsort's. */
	if (nonly > 1) {
		r = error_set(
		    -EOPNOTSUPP,
		    "Slurm's gres.conf %s sets AutoDetect=nvml and %zu of its GPUs are not "
		    "among those the driver lists (fallen off the bus?): slurmd's order of "
		    "them depends on its C library's qsort(), so jobcg cannot know their "
		    "numbers; %s",
		    gres_path, nonly, AD_FIX);
		goto out;
	}
	msort(fin, nfin, file_cmp);
	msort(fin, nfin, link_cmp);
	for (size_t i = 0; i + 1 < nfin; i++)
		for (size_t j = i + 1; j < nfin; j++)
			if (streq(fin[i]->file, fin[j]->file)) {
				r = error_set(
				    -EINVAL,
				    "Slurm's gres.conf %s sets AutoDetect=nvml and slurmd's "
				    "merge would list %s twice (slurmd refuses to start)",
				    gres_path, fin[i]->file);
				goto out;
			}
	/* The other GRES as they are, then slurmd's GPUs in its order. */
	for (size_t i = 0; i < g->nrecords; i++)
		if (!streq(g->records[i].name, "gpu"))
			recs[nrecs++] = g->records[i];
	for (size_t i = 0; i < nfin; i++) {
		struct jobcg_gres_record *n = &recs[nrecs];

		*n = (struct jobcg_gres_record){
		    .name = strdup("gpu"),
		    .type = fin[i]->type ? strdup(fin[i]->type) : NULL,
		    .files = calloc(1, sizeof(*n->files)),
		    .nfiles = 1,
		    .count = 1,
		    .flags = fin[i]->rec ? fin[i]->rec->flags : 0,
		    .origin = fin[i]->rec ? fin[i]->rec->origin : (struct jobcg_origin){},
		    .index = (unsigned)i,
		    .slurm_detected = true,
		};
		if (n->files)
			n->files[0].path = strdup(fin[i]->file);
		nrecs++;
		if (!n->name || (fin[i]->type && !n->type) || !n->files || !n->files[0].path) {
			r = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < g->nrecords; i++)
		if (streq(g->records[i].name, "gpu"))
			gres_record_done(&g->records[i]);
	free(g->records);
	g->records = TAKE_PTR(recs);
	g->nrecords = nrecs;
out:
	if (recs) {
		for (size_t i = 0; i < nrecs; i++)
			if (recs[i].slurm_detected)
				gres_record_done(&recs[i]);
		free(recs);
	}
	free(fin);
	free(sv);
	free(cv);
	free(sys);
	jobcg_gpus_free(gpus);
	return r;
}

/* The file of Slurm's GPU @index after nvml_merge(), or NULL. */
static const char *merged_file(const struct jobcg_gres_conf *g, unsigned index)
{
	for (size_t i = 0; i < g->nrecords; i++)
		if (g->records[i].slurm_detected && g->records[i].index == index)
			return g->records[i].files[0].path;
	return NULL;
}

/* slurmd's numbering with NVML (@g, merged) must be the one without it (@plain). */
static int nvml_plain_agree(const struct jobcg_gres_conf *g, const char *gres_path, char **plain)
{
	_cleanup_free_ char *want = NULL;
	size_t n = strv_length(plain);
	unsigned i = 0;

	while (i < n && merged_file(g, i) && streq(merged_file(g, i), plain[i]))
		i++;
	if (i == n && !merged_file(g, i))
		return 0;
	for (unsigned k = 0; merged_file(g, k); k++) {
		char *t = strdup_printf("%s%s", want ? want : "", k ? "," : "");
		char *u = t ? strdup_printf("%s%s", t, merged_file(g, k)) : NULL;

		free(t);
		if (!u)
			return -ENOMEM;
		free(want);
		want = u;
	}
	return error_set(
	    -EOPNOTSUPP,
	    "Slurm's gres.conf %s sets AutoDetect=nvml and names the GPUs' files: a slurmd "
	    "that loads NVML numbers them in NVML's (PCI bus) order, one that cannot (built "
	    "without it, or no libnvidia-ml.so) in gres.conf's order, and here the two differ "
	    "(GPU %u is %s or %s), so jobcg cannot know which; list the files in NVML's order "
	    "(%s), or give Count= without File=",
	    gres_path, i, merged_file(g, i) ? merged_file(g, i) : "none", i < n ? plain[i] : "none",
	    want ? want : "no GPU");
}

/* slurmd reads fake_gpus.conf beside slurm.conf, when it is there, instead of any driver. */
static int no_fake_gpus(const char *slurm_conf)
{
	const char *slash = slurm_conf ? strrchr(slurm_conf, '/') : NULL;
	_cleanup_free_ char *fake = NULL;

	if (!slash)
		return 0;
	fake = strdup_printf("%.*s/fake_gpus.conf", (int)(slash - slurm_conf), slurm_conf);
	if (!fake)
		return -ENOMEM;
	if (access(fake, F_OK) < 0)
		return 0;
	return error_set(-EOPNOTSUPP,
			 "%s exists: slurmd then merges its stand-in GPUs into its list whatever "
			 "AutoDetect= says, which jobcg does not reproduce; remove it (it is "
			 "Slurm's test stand-in for a driver)",
			 fake);
}

/* Under AutoDetect=nvml, what slurmd matches against the system that jobcg cannot. */
static int nvml_conf_check(const struct jobcg_gres_conf *g, const char *gres_path)
{
	for (size_t i = 0; i < g->nrecords; i++) {
		const struct jobcg_gres_record *rec = &g->records[i];
		const char *what = rec->nfiles > 1 ? "MultipleFiles="
				   : rec->cores	   ? "Cores="
				   : rec->links	   ? "Links="
						   : NULL;

		if (!streq(rec->name, "gpu") || !what)
			continue;
		return error_set_at(
		    -EOPNOTSUPP, rec->origin.file ? rec->origin.file : gres_path, rec->origin.line,
		    0,
		    "%s on a gpu line under AutoDetect=nvml: slurmd checks it against what NVML "
		    "reports (CPU affinity, NVLinks, MIG) and drops the GPU when they differ, "
		    "which jobcg cannot tell; leave it out of Slurm's gres.conf, or %s",
		    what, AD_FIX);
	}
	return 0;
}

int slurm_gpu_order(struct jobcg_gres_conf *g, const char *gres_path, const char *node_gres,
		    const char *slurm_conf, const char *node)
{
	const char *ad = g->node_autodetect ? g->node_autodetect : g->autodetect;
	bool nvml = ad && strcaseeq(ad, "nvml");
	_cleanup_free_ struct gpu_line *lines = calloc(g->nrecords + 1, sizeof(*lines));
	_cleanup_free_ bool *taken = calloc(g->nrecords + 1, sizeof(*taken));
	_cleanup_free_ unsigned *order = calloc(g->nrecords + 1, sizeof(*order));
	_cleanup_free_ struct mgpu *sv = nvml ? calloc(JOBCG_GRES_MAX, sizeof(*sv)) : NULL;
	struct singles singles = {.v = sv, .max = JOBCG_GRES_MAX};
	struct gpu_type *types = NULL;
	size_t ntypes = 0, nlines = 0, norder = 0, out = 0;
	uint64_t untyped = 0, left = 0;
	unsigned next = 0;
	int r;

	if (!lines || !taken || !order || (nvml && !sv))
		return -ENOMEM;
	if (ad && !strcaseeq(ad, "off") && !nvml)
		return error_set(
		    -EOPNOTSUPP,
		    "Slurm's gres.conf %s sets AutoDetect=%s: slurmd then numbers this "
		    "node's GPUs by what that library reports, which jobcg reproduces only for "
		    "AutoDetect=nvml (non-MIG NVIDIA GPUs, from the driver's files); %s",
		    gres_path, ad, AD_FIX);
	if ((r = no_fake_gpus(slurm_conf)) < 0 || (nvml && (r = nvml_conf_check(g, gres_path)) < 0))
		return r;
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
	/* _merge_gres2 adds what slurm.conf gives beyond the lines as one record without File=
	 * (which only AutoDetect turns into GPUs). */
	if (ntypes == 0 && (r = take_lines(g, lines, nlines, NULL, untyped, taken, order, &norder,
					   nvml ? &singles : NULL, &left)) == 0)
		for (uint64_t i = 0; nvml && i < left && r == 0; i++)
			r = single_add(&singles, NULL, NULL, NULL);
	for (size_t t = 0; t < ntypes && r == 0; t++)
		if ((r = take_lines(g, lines, nlines, types[t].name, types[t].count, taken, order,
				    &norder, nvml ? &singles : NULL, &left)) == 0)
			for (uint64_t i = 0; nvml && i < left && r == 0; i++)
				r = single_add(&singles, types[t].name, NULL, NULL);
	if (r == -E2BIG)
		r = error_set(-E2BIG, "%s, NodeName=%s: Gres= gives the node more than %d GPUs",
			      slurm_conf, node, JOBCG_GRES_MAX);
	if (r == 0 && nvml) {
		/* A slurmd that cannot load NVML (built without it, no gpu_nvml.so, or no
		 * libnvidia-ml.so to dlopen: _get_gpu_type) only logs it and keeps the rule of
		 * AutoDetect=off: the files of the lines, in order. Which one it did, jobcg cannot
		 * know, so the two numberings must agree; Count-only lines give no device file
		 * without NVML, and so no GPU a step could be handed. */
		_cleanup_strv_free_ char **plain = NULL;

		for (size_t k = 0; k < norder && r == 0; k++)
			if (g->records[order[k]].nfiles)
				r = strv_push(&plain, strdup(g->records[order[k]].files[0].path));
		if (r == 0)
			r = nvml_merge(g, gres_path, &singles);
		if (r == 0 && plain)
			r = nvml_plain_agree(g, gres_path, plain);
	}
	slurm_gpu_types_free(types, ntypes);
	if (r < 0 || nvml)
		return r;
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
