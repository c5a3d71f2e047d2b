/* Slurm's gres.conf beside jobcg's: Slurm hands a step GPU indices in its own file's order and
 * jobcg maps each onto the device of the same index in its file, so the two must name the same
 * device file for every index (jobcg_spank.so per step, `jobcg check --slurm-gres` per node). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "confparse.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
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
				 "the two must list the same devices in the same order",
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
	struct conf_parser p = {.fn = on_slurm_stmt, .userdata = &f};
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

	*ret_arg = "";
	if (hash)
		*hash = '\0';
	tok = strtok_r(line, " \t\r\n", &save);
	if (tok && strcaseeq(tok, "include")) {
		char *pat = strtok_r(NULL, " \t\r\n", &save);

		if (!pat)
			return SLURM_PLUGSTACK_OTHER;
		*ret_arg = pat;
		return SLURM_PLUGSTACK_INCLUDE;
	}
	/* required|optional PATH ARGS...: the path names the plugin, wherever it is. */
	while (tok && !strstr(tok, "jobcg_spank.so"))
		tok = strtok_r(NULL, " \t\r\n", &save);
	if (!tok)
		return SLURM_PLUGSTACK_OTHER;
	while ((tok = strtok_r(NULL, " \t\r\n", &save)))
		if (startswith(tok, "slurm_gres="))
			*ret_arg = tok + 11;
	return SLURM_PLUGSTACK_JOBCG;
}
