/* jobcg CLI: printing decoded device rules, and naming devices from /dev. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "decode_out.h"

struct devname {
	char type;
	unsigned major, minor;
	char *names;
};

struct devnames {
	struct devname *v;
	size_t n, cap;
};

static void add_name(struct devnames *dn, char type, unsigned major, unsigned minor,
		     const char *path)
{
	for (size_t i = 0; i < dn->n; i++) {
		struct devname *e = &dn->v[i];
		if (e->type == type && e->major == major && e->minor == minor) {
			size_t l = strlen(e->names);
			if (l > 200)
				return; /* enough names for one line */
			char *t = realloc(e->names, l + strlen(path) + 2);
			if (!t)
				return;
			sprintf(t + l, " %s", path);
			e->names = t;
			return;
		}
	}
	if (dn->n == dn->cap) {
		size_t nc = dn->cap ? dn->cap * 2 : 256;
		struct devname *t = realloc(dn->v, nc * sizeof(*t));
		if (!t)
			return;
		dn->v = t;
		dn->cap = nc;
	}
	char *s = strdup(path);
	if (!s)
		return;
	dn->v[dn->n++] = (struct devname){type, major, minor, s};
}

static void scan(struct devnames *dn, const char *dir, int depth)
{
	DIR *d;
	struct dirent *e;

	if (depth > 3)
		return;
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[4096];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
			add_name(dn, S_ISCHR(st.st_mode) ? 'c' : 'b', major(st.st_rdev),
				 minor(st.st_rdev), path);
		else if (S_ISDIR(st.st_mode) && strcmp(e->d_name, "fd") != 0)
			scan(dn, path, depth + 1);
	}
	closedir(d);
}

struct devnames *devnames_load(const char *root)
{
	struct devnames *dn = calloc(1, sizeof(*dn));
	if (dn)
		scan(dn, root ? root : "/dev", 0);
	return dn;
}

const char *devnames_get(const struct devnames *dn, char type, unsigned major, unsigned minor)
{
	if (!dn)
		return "";
	for (size_t i = 0; i < dn->n; i++)
		if (dn->v[i].type == type && dn->v[i].major == major && dn->v[i].minor == minor)
			return dn->v[i].names;
	return "";
}

/* Nodes of every minor of a major (for "c 195:* rw" lines), at most ~200 characters. */
static void names_of_major(const struct devnames *dn, char type, unsigned major, char *buf,
			   size_t size)
{
	size_t len = 0;
	unsigned more = 0;

	buf[0] = 0;
	for (size_t i = 0; dn && i < dn->n; i++) {
		const struct devname *e = &dn->v[i];
		if (e->type != type || e->major != major)
			continue;
		const char *first_end = strchr(e->names, ' ');
		size_t l = first_end ? (size_t)(first_end - e->names) : strlen(e->names);
		if (len + l + 2 > 200 || len + l + 2 > size) {
			more++;
			continue;
		}
		len += (size_t)snprintf(buf + len, size - len, "%s%.*s", len ? " " : "", (int)l,
					e->names);
	}
	if (more && len + 16 < size)
		snprintf(buf + len, size - len, " (+%u more)", more);
}

void devnames_free(struct devnames *dn)
{
	if (!dn)
		return;
	for (size_t i = 0; i < dn->n; i++)
		free(dn->v[i].names);
	free(dn->v);
	free(dn);
}

void decode_out_text(FILE *f, const struct jobcg_decoded *d, const struct devnames *dn)
{
	const struct jobcg_decoded_line *lines;
	size_t n = jobcg_decoded_lines(d, &lines);

	for (size_t i = 0; i < n; i++) {
		char buf[128];
		if (lines[i].note) {
			fprintf(f, "# %s\n", lines[i].note);
			continue;
		}
		const struct jobcg_devrule *r = &lines[i].rule;
		jobcg_decoded_rule_format(r, buf, sizeof(buf));
		char majnames[256] = "";
		const char *names = "";
		if (r->major != JOBCG_DEV_ANY && r->minor != JOBCG_DEV_ANY)
			names = devnames_get(dn, r->type, r->major, r->minor);
		else if (r->major != JOBCG_DEV_ANY && dn) {
			names_of_major(dn, r->type, r->major, majnames, sizeof(majnames));
			names = majnames;
		}
		if (*names)
			fprintf(f, "%-16s %s\n", buf, names);
		else
			fprintf(f, "%s\n", buf);
	}
}

static struct json_object *num_or_star(uint32_t v)
{
	return v == JOBCG_DEV_ANY ? json_object_new_string("*") : json_object_new_int64(v);
}

struct json_object *decode_out_json(const struct jobcg_decoded *d)
{
	const struct jobcg_decoded_line *lines;
	size_t n = jobcg_decoded_lines(d, &lines);
	struct json_object *o = json_object_new_object(), *rules = json_object_new_array(),
			   *notes = json_object_new_array();

	for (size_t i = 0; i < n; i++) {
		if (lines[i].note) {
			json_object_array_add(notes, json_object_new_string(lines[i].note));
			continue;
		}
		const struct jobcg_devrule *r = &lines[i].rule;
		char buf[128], type[2] = {r->type, 0};
		struct json_object *j = json_object_new_object();
		jobcg_decoded_rule_format(r, buf, sizeof(buf));
		json_object_object_add(j, "type", json_object_new_string(type));
		json_object_object_add(j, "major", num_or_star(r->major));
		json_object_object_add(j, "minor", num_or_star(r->minor));
		json_object_object_add(j, "access", json_object_new_string(strrchr(buf, ' ') + 1));
		json_object_object_add(j, "rule", json_object_new_string(buf));
		json_object_array_add(rules, j);
	}
	json_object_object_add(o, "rules", rules);
	json_object_object_add(o, "notes", notes);
	return o;
}

#include <errno.h>
#include <stdlib.h>

#include "cli.h"
#include "jobcg/context.h"
#include "jobcg/inspect.h"
#include "jobcg/job.h"

int resolve_cgroup_arg(const struct cli_global *g, const char *arg, char *buf, size_t size)
{
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_target t;
	const char *mount;
	char *path = NULL;
	int r;

	/* not the mount itself: that is what "" would name below */
	if (!*arg)
		return -EINVAL;
	if (arg[0] == '/') {
		snprintf(buf, size, "%s", arg);
		return 0;
	}
	/* "JOB" or "JOB.STEP" as jobcg names them; anything else is a path below the mount. */
	if (jobcg_target_parse(arg, &t) < 0 || t.task != JOBCG_TASK_ALL) {
		jobcg_error_clear();
		r = jobcg_cgroup2_mount(&mount);
		if (r < 0)
			return r;
		snprintf(buf, size, "%s/%s", mount, arg);
		return 0;
	}
	/* The root every other command uses: JobcgRoot= (or CgroupSlice/JobcgScope) of the
	 * configuration, $JOBCG_ROOT over it; and the library's lookup of the job, inside a
	 * reservation too, with its "no job N" when there is none. */
	if (cli_load_config(g, JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENTRIES | CLI_CONFIG_TOLERATE,
			    &conf) != 0)
		return -ECANCELED;
	r = jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx);
	if (r >= 0 && (r = jobcg_target_events(ctx, &t, NULL, NULL)) >= 0 &&
	    (r = jobcg_target_path(ctx, &t, &path)) >= 0)
		snprintf(buf, size, "%s", path);
	free(path);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	if (r == -ENOENT) {
		cli_print_error(r, NULL);
		return -ECANCELED;
	}
	return r < 0 ? r : 0;
}

void job_step_from_path(const char *path, char *job, size_t jsize, char *step, size_t ssize)
{
	job[0] = step[0] = 0;
	for (const char *p = path; (p = strchr(p, '/')); p++) {
		const char *c = p + 1, *end = strchr(c, '/');
		size_t l = end ? (size_t)(end - c) : strlen(c);
		if (l > 4 && strncmp(c, "job_", 4) == 0 && !job[0])
			snprintf(job, jsize, "%.*s", (int)(l - 4), c + 4);
		else if (l > 5 && strncmp(c, "step_", 5) == 0 && job[0] && !step[0])
			snprintf(step, ssize, "%.*s", (int)(l - 5), c + 5);
	}
}
