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

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "jobcg/config.h"
#include "jobcg/inspect.h"
#include "sysinfo_internal.h"

static bool is_id(const char *s, size_t l)
{
	if (l == 0)
		return false;
	for (size_t i = 0; i < l; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

int resolve_cgroup_arg(const char *arg, char *buf, size_t size)
{
	const char *mount, *root = jobcg_getenv("JOBCG_ROOT");
	const char *dot = strchr(arg, '.');
	int r;

	/* not the mount itself: that is what "" would name below */
	if (!*arg)
		return -EINVAL;
	if (arg[0] == '/') {
		snprintf(buf, size, "%s", arg);
		return 0;
	}
	r = jobcg_cgroup2_mount(&mount);
	if (r < 0)
		return r;
	if (!root || !*root)
		root = "system.slice/jobcg.scope";
	r = discover_root_strip(mount, root, &root);
	if (r < 0)
		return r;
	if (!strchr(arg, '/') && is_id(arg, dot ? (size_t)(dot - arg) : strlen(arg)) &&
	    (!dot || is_id(dot + 1, strlen(dot + 1)))) {
		char top[PATH_MAX];
		DIR *d;
		struct dirent *de;

		if (dot)
			snprintf(buf, size, "%s/%s/job_%.*s/step_%s", mount, root, (int)(dot - arg),
				 arg, dot + 1);
		else
			snprintf(buf, size, "%s/%s/job_%s", mount, root, arg);
		/* Not at the top: a job inside a reservation, resv_<name>/job_<id>. */
		snprintf(top, sizeof(top), "%s/%s", mount, root);
		if (access(buf, F_OK) == 0 || !(d = opendir(top)))
			return 0;
		while ((de = readdir(d))) {
			char alt[PATH_MAX];

			if (strncmp(de->d_name, "resv_", 5) != 0)
				continue;
			if (dot)
				snprintf(alt, sizeof(alt), "%s/%s/job_%.*s/step_%s", top,
					 de->d_name, (int)(dot - arg), arg, dot + 1);
			else
				snprintf(alt, sizeof(alt), "%s/%s/job_%s", top, de->d_name, arg);
			if (access(alt, F_OK) == 0) {
				snprintf(buf, size, "%s", alt);
				break;
			}
		}
		closedir(d);
		return 0;
	}
	snprintf(buf, size, "%s/%s", mount, arg);
	return 0;
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
