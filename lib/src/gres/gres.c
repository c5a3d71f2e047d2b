/* jobcg: GRES (GPU) node state, request parsing, selection, task binding, environment, xattrs. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "gpudetect.h"
#include "jobcg/gres.h"
#include "log.h"
#include "util.h"

struct jobcg_gres_node {
	struct jobcg_gres_device *dev;
	size_t ndev;
};

JOBCG_EXPORT unsigned jobcg_gres_set_count(const struct jobcg_gres_set *s)
{
	unsigned c = 0;

	for (size_t i = 0; i < ELEMENTSOF(s->w); i++)
		c += (unsigned)__builtin_popcountll(s->w[i]);
	return c;
}

JOBCG_EXPORT bool jobcg_gres_set_subset(const struct jobcg_gres_set *a,
					const struct jobcg_gres_set *b)
{
	for (size_t i = 0; i < ELEMENTSOF(a->w); i++)
		if (a->w[i] & ~b->w[i])
			return false;
	return true;
}

JOBCG_EXPORT int jobcg_gres_node_new(const struct jobcg_gres_conf *conf,
				     struct jobcg_gres_node **ret)
{
	struct jobcg_gres_node *n = calloc(1, sizeof(*n));
	size_t ndev = 0;

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; conf && i < conf->nrecords; i++)
		if (conf->records[i].nfiles > 0)
			ndev++;
	if (ndev > JOBCG_GRES_MAX) {
		free(n);
		return error_set(-E2BIG, "gres.conf lists %zu devices, jobcg handles at most %d",
				 ndev, JOBCG_GRES_MAX);
	}
	n->dev = calloc(ndev ? ndev : 1, sizeof(*n->dev));
	if (!n->dev) {
		free(n);
		return -ENOMEM;
	}
	for (size_t i = 0; conf && i < conf->nrecords; i++) {
		const struct jobcg_gres_record *r = &conf->records[i];

		if (r->nfiles == 0) {
			log_debug(
			    "gres %s (Count only) has no device file: not given out by device",
			    r->name);
			continue;
		}
		/* The index is the configuration's (stable, shown by `jobcg config`); it is what
		 * the persisted state names, so two devices must never share one. */
		for (size_t j = 0; j < n->ndev; j++)
			if (n->dev[j].index == r->index && streq(n->dev[j].rec->name, r->name)) {
				int k =
				    error_set_at(-EINVAL, r->origin.file, r->origin.line, 0,
						 "gres %s index %u given twice", r->name, r->index);
				jobcg_gres_node_free(n);
				return k;
			}
		n->dev[n->ndev] = (struct jobcg_gres_device){
		    .pos = (unsigned)n->ndev,
		    .index = r->index,
		    .rec = r,
		};
		n->ndev++;
	}
	*ret = n;
	return 0;
}

JOBCG_EXPORT void jobcg_gres_node_free(struct jobcg_gres_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->ndev; i++)
		free((char *)n->dev[i].uuid);
	free(n->dev);
	free(n);
}

JOBCG_EXPORT size_t jobcg_gres_node_count(const struct jobcg_gres_node *n)
{
	return n->ndev;
}

JOBCG_EXPORT const struct jobcg_gres_device *jobcg_gres_node_device(const struct jobcg_gres_node *n,
								    unsigned pos)
{
	return pos < n->ndev ? &n->dev[pos] : NULL;
}

JOBCG_EXPORT int jobcg_gres_node_find(const struct jobcg_gres_node *n, const char *name,
				      unsigned index)
{
	for (size_t i = 0; i < n->ndev; i++)
		if (n->dev[i].index == index && streq(n->dev[i].rec->name, name))
			return (int)i;
	return -ENOENT;
}

JOBCG_EXPORT void jobcg_gres_node_all(const struct jobcg_gres_node *n, const char *name,
				      struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set s = {};

	for (size_t i = 0; i < n->ndev; i++)
		if (!name || streq(n->dev[i].rec->name, name))
			jobcg_gres_set_add(&s, (unsigned)i);
	*ret = s;
}

JOBCG_EXPORT int jobcg_gres_node_set_uuid(struct jobcg_gres_node *n, unsigned pos, const char *uuid)
{
	char *u;

	if (pos >= n->ndev)
		return -ENOENT;
	u = strdup(uuid);
	if (!u)
		return -ENOMEM;
	free((char *)n->dev[pos].uuid);
	n->dev[pos].uuid = u;
	return 0;
}

/* NVIDIA's character major: the minor of /dev/nvidiaN is the "Device Minor" of the driver. */
#define NVIDIA_MAJOR 195

#define GPUS_SUFFIX "/driver/nvidia/gpus"

static bool endswith_gpus(const char *dir)
{
	size_t l = strlen(dir), k = strlen(GPUS_SUFFIX);

	return l >= k && streq(dir + l - k, GPUS_SUFFIX);
}

JOBCG_EXPORT int jobcg_gres_node_load_uuids(struct jobcg_gres_node *n, const char *proc_dir)
{
	const char *dir = proc_dir ? proc_dir : "/proc/driver/nvidia/gpus";
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	if (!d)
		return errno == ENOENT ? 0 : error_set(negative_errno(), "cannot open %s", dir);
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL, *text = NULL;
		char *minor_s, *uuid_s;
		unsigned minor;
		char uuid[128];

		if (de->d_name[0] == '.')
			continue;
		path = strdup_printf("%s/%s/information", dir, de->d_name);
		if (!path) {
			closedir(d);
			return -ENOMEM;
		}
		if (read_full_file_at(AT_FDCWD, path, 65536, &text, NULL) < 0)
			continue;
		minor_s = strstr(text, "Device Minor:");
		uuid_s = strstr(text, "GPU UUID:");
		if (!minor_s || !uuid_s || sscanf(minor_s, "Device Minor: %u", &minor) != 1 ||
		    sscanf(uuid_s, "GPU UUID: %127s", uuid) != 1)
			continue;
		for (size_t i = 0; i < n->ndev; i++) {
			const struct jobcg_gres_record *r = n->dev[i].rec;

			for (size_t f = 0; f < r->nfiles; f++)
				if (r->files[f].type == 'c' && r->files[f].major == NVIDIA_MAJOR &&
				    r->files[f].minor == minor) {
					if (jobcg_gres_node_set_uuid(n, (unsigned)i, uuid) < 0) {
						closedir(d);
						return -ENOMEM;
					}
					found++;
					/* MultipleFiles records share control files: first file
					 * only. */
					break;
				}
		}
	}
	closedir(d);
	/* A MIG instance's record names its parent GPU's file too, and got that GPU's UUID
	 * above; CUDA needs the instance's own. */
	for (size_t i = 0; i < n->ndev && (!proc_dir || endswith_gpus(proc_dir)); i++) {
		const struct jobcg_gres_record *r = n->dev[i].rec;
		_cleanup_free_ char *proc = NULL, *uuid = NULL;
		int k;

		if (!gres_record_is_mig(r))
			continue;
		proc = proc_dir ? strndup(proc_dir, strlen(proc_dir) - strlen(GPUS_SUFFIX))
				: strdup("/proc");
		if (!proc)
			return -ENOMEM;
		k = gres_mig_uuid(r, proc, r->autodetect && streq(r->autodetect, "nvml"), &uuid);
		if (k == -ENOMEM)
			return k;
		if (k < 0) {
			jobcg_error_clear();
			free((char *)n->dev[i].uuid);
			n->dev[i].uuid = NULL;
			continue;
		}
		if (jobcg_gres_node_set_uuid(n, (unsigned)i, uuid) < 0)
			return -ENOMEM;
	}
	return found;
}

/* ---- requests ---- */

JOBCG_EXPORT void jobcg_gres_request_free(struct jobcg_gres_request *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nitems; i++) {
		free(r->items[i].name);
		free(r->items[i].type);
	}
	free(r->items);
	free(r);
}

static bool valid_word(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(s[i] == '_' || s[i] == '-' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* One "NAME[:TYPE][:COUNT]" item spanning s[0..len), at column col (1-based) of the request. */
static int parse_item(const char *whole, const char *s, size_t len, struct jobcg_gres_req_item *ret)
{
	unsigned col = (unsigned)(s - whole) + 1;
	const char *parts[3] = {0};
	size_t plen[3] = {0}, np = 0;
	const char *p = s, *end = s + len;
	const char *name, *type = NULL;
	size_t name_len, type_len = 0;
	unsigned long count = 1;

	if (len >= 5 && strncmp(s, "gres/", 5) == 0) {
		p += 5;
		col += 5;
	}
	while (p <= end) {
		const char *c = memchr(p, ':', (size_t)(end - p));

		if (np == 3)
			return error_set_at(-EINVAL, NULL, 0, col,
					    "gres '%.*s': too many ':' (want NAME[:TYPE][:COUNT])",
					    (int)len, s);
		parts[np] = p;
		plen[np] = c ? (size_t)(c - p) : (size_t)(end - p);
		np++;
		if (!c)
			break;
		p = c + 1;
	}
	name = parts[0];
	name_len = plen[0];
	if (!valid_word(name, name_len) || all_digits(name, name_len))
		return error_set_at(-EINVAL, NULL, 0, col, "gres '%.*s': bad or missing name",
				    (int)len, s);
	if (np >= 2) {
		const char *last = parts[np - 1];
		size_t last_len = plen[np - 1];
		unsigned last_col = col + (unsigned)(last - parts[0]);

		/* "gpu:-1" is a count gone wrong, not a type named "-1". */
		if (last_len > 1 && (last[0] == '-' || last[0] == '+') &&
		    all_digits(last + 1, last_len - 1))
			return error_set_at(-EINVAL, NULL, 0, last_col,
					    "gres '%.*s': invalid count '%.*s' (need 1..%d)",
					    (int)len, s, (int)last_len, last, JOBCG_GRES_MAX);
		if (all_digits(last, last_len)) {
			char buf[32];

			if (last_len > 9)
				return error_set_at(-EINVAL, NULL, 0, last_col,
						    "gres '%.*s': count too large", (int)len, s);
			memcpy(buf, last, last_len);
			buf[last_len] = 0;
			count = strtoul(buf, NULL, 10);
			if (count > JOBCG_GRES_MAX)
				return error_set_at(-EINVAL, NULL, 0, last_col,
						    "gres '%.*s': count %lu exceeds %d", (int)len,
						    s, count, JOBCG_GRES_MAX);
			if (np == 3) {
				type = parts[1];
				type_len = plen[1];
			}
		} else if (np == 3) {
			return error_set_at(-EINVAL, NULL, 0, last_col,
					    "gres '%.*s': count '%.*s' is not a number", (int)len,
					    s, (int)last_len, last);
		} else {
			type = parts[1];
			type_len = plen[1];
		}
		if (type && !valid_word(type, type_len))
			return error_set_at(-EINVAL, NULL, 0, col + (unsigned)(type - parts[0]),
					    "gres '%.*s': bad or empty type", (int)len, s);
	}
	ret->name = strndup(name, name_len);
	ret->type = type ? strndup(type, type_len) : NULL;
	ret->count = (unsigned)count;
	if (!ret->name || (type && !ret->type)) {
		free(ret->name);
		free(ret->type);
		return -ENOMEM;
	}
	return 0;
}

static bool same_type(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcasecmp(a, b) == 0;
}

JOBCG_EXPORT int jobcg_gres_request_parse(const char *s, struct jobcg_gres_request **ret)
{
	struct jobcg_gres_request *r;
	const char *p = s;

	if (!s || !*s)
		return error_set(-EINVAL, "empty gres request");
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (;;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		struct jobcg_gres_req_item item = {}, *items;
		int k;

		if (len == 0) {
			jobcg_gres_request_free(r);
			return error_set_at(-EINVAL, NULL, 0, (unsigned)(p - s) + 1,
					    "gres request '%s': empty item", s);
		}
		if (r->nitems >= 64) {
			jobcg_gres_request_free(r);
			return error_set(-E2BIG, "gres request '%s': more than 64 items", s);
		}
		k = parse_item(s, p, len, &item);
		if (k < 0) {
			jobcg_gres_request_free(r);
			return k;
		}
		for (size_t i = 0; i < r->nitems; i++)
			if (streq(r->items[i].name, item.name) &&
			    same_type(r->items[i].type, item.type)) {
				k = error_set_at(-EINVAL, NULL, 0, (unsigned)(p - s) + 1,
						 "gres request '%s': %s%s%s given twice", s,
						 item.name, item.type ? ":" : "",
						 item.type ? item.type : "");
				free(item.name);
				free(item.type);
				jobcg_gres_request_free(r);
				return k;
			}
		items = realloc(r->items, (r->nitems + 1) * sizeof(*items));
		if (!items) {
			free(item.name);
			free(item.type);
			jobcg_gres_request_free(r);
			return -ENOMEM;
		}
		r->items = items;
		r->items[r->nitems++] = item;
		if (!c)
			break;
		p = c + 1;
	}
	*ret = r;
	return 0;
}

/* ---- selection ---- */

static bool record_matches(const struct jobcg_gres_record *r, const struct jobcg_gres_req_item *it)
{
	return streq(r->name, it->name) && (!it->type || same_type(r->type, it->type));
}

static bool cores_match(const struct jobcg_gres_record *r, const uint64_t *cpus, size_t cpus_words)
{
	if (!cpus || !r->cores)
		return true;
	for (size_t i = 0; i < r->cores_words && i < cpus_words; i++)
		if (r->cores[i] & cpus[i])
			return true;
	return false;
}

/* Links from device @d to the devices of the same name already in @chosen. */
static int link_score(const struct jobcg_gres_node *n, const struct jobcg_gres_device *d,
		      const struct jobcg_gres_set *chosen)
{
	int score = 0;

	for (size_t i = 0; i < n->ndev; i++) {
		const struct jobcg_gres_device *o = &n->dev[i];

		if (o == d || !jobcg_gres_set_has(chosen, o->pos) ||
		    !streq(o->rec->name, d->rec->name))
			continue;
		if (o->index < d->rec->nlinks && d->rec->links[o->index] > 0)
			score += d->rec->links[o->index];
	}
	return score;
}

static void describe(const struct jobcg_gres_req_item *it, char *buf, size_t size)
{
	format_buf(buf, size, "%s%s%s", it->name, it->type ? ":" : "", it->type ? it->type : "");
}

static unsigned count_matching(const struct jobcg_gres_node *n,
			       const struct jobcg_gres_req_item *it,
			       const struct jobcg_gres_set *in)
{
	unsigned c = 0;

	for (size_t i = 0; i < n->ndev; i++)
		if (record_matches(n->dev[i].rec, it) &&
		    (!in || jobcg_gres_set_has(in, (unsigned)i)))
			c++;
	return c;
}

static int select_item(const struct jobcg_gres_node *n, const struct jobcg_gres_req_item *it,
		       const struct jobcg_gres_set *avail, const uint64_t *cpus, size_t cpus_words,
		       struct jobcg_gres_set *chosen, int short_err)
{
	unsigned configured = count_matching(n, it, NULL), usable = 0;
	char what[256];

	describe(it, what, sizeof(what));
	if (it->count == 0)
		return 0;
	if (configured == 0)
		return error_set(-ENOENT, "gres %s: none configured on this node", what);
	for (size_t i = 0; i < n->ndev; i++)
		if (record_matches(n->dev[i].rec, it) && jobcg_gres_set_has(avail, (unsigned)i) &&
		    !jobcg_gres_set_has(chosen, (unsigned)i))
			usable++;
	if (usable < it->count)
		return error_set(short_err, "gres %s: %u asked, only %u free (%u configured)", what,
				 it->count, usable, configured);

	for (unsigned k = 0; k < it->count; k++) {
		const struct jobcg_gres_device *best = NULL;
		bool best_aff = false;
		int best_links = -1;

		for (size_t i = 0; i < n->ndev; i++) {
			const struct jobcg_gres_device *d = &n->dev[i];
			bool aff;
			int links;

			if (!record_matches(d->rec, it) || !jobcg_gres_set_has(avail, d->pos) ||
			    jobcg_gres_set_has(chosen, d->pos))
				continue;
			aff = cores_match(d->rec, cpus, cpus_words);
			links = link_score(n, d, chosen);
			/* Devices come in position order, so ties keep the lowest index. */
			if (!best || (aff && !best_aff) ||
			    (aff == best_aff && links > best_links)) {
				best = d;
				best_aff = aff;
				best_links = links;
			}
		}
		jobcg_gres_set_add(chosen, best->pos);
	}
	return 0;
}

JOBCG_EXPORT int jobcg_gres_select(const struct jobcg_gres_node *n,
				   const struct jobcg_gres_request *req,
				   const struct jobcg_gres_set *avail, const uint64_t *cpus,
				   size_t cpus_words, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set chosen = {};

	/* Typed items first, so "gpu:a100:1,gpu:1" does not let the untyped one take the a100. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < req->nitems; i++) {
			const struct jobcg_gres_req_item *it = &req->items[i];
			int r;

			if ((pass == 0) != (it->type != NULL))
				continue;
			r = select_item(n, it, avail, cpus, cpus_words, &chosen, -ENOSPC);
			if (r < 0)
				return r;
		}
	*ret = chosen;
	return 0;
}

JOBCG_EXPORT int jobcg_gres_select_step(const struct jobcg_gres_node *n,
					const struct jobcg_gres_request *req,
					const struct jobcg_gres_set *job,
					const struct jobcg_gres_set *avail, const uint64_t *cpus,
					size_t cpus_words, struct jobcg_gres_set *ret)
{
	struct jobcg_gres_set free_in_job = *job, chosen = {};

	if (avail)
		for (size_t i = 0; i < ELEMENTSOF(free_in_job.w); i++)
			free_in_job.w[i] &= avail->w[i];

	/* A step never gets more than its job: refuse before looking at what is free. */
	for (size_t i = 0; i < req->nitems; i++) {
		const struct jobcg_gres_req_item *it = &req->items[i];
		unsigned have = count_matching(n, it, job);
		char what[256];

		describe(it, what, sizeof(what));
		if (it->count > have)
			return error_set(-E2BIG, "step asks for %u %s but its job has %u",
					 it->count, what, have);
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < req->nitems; i++) {
			const struct jobcg_gres_req_item *it = &req->items[i];
			int r;

			if ((pass == 0) != (it->type != NULL))
				continue;
			r = select_item(n, it, &free_in_job, cpus, cpus_words, &chosen, -EBUSY);
			if (r < 0) {
				jobcg_error_prefix("step");
				return r;
			}
		}
	*ret = chosen;
	return 0;
}

/* ---- task binding ---- */

JOBCG_EXPORT void jobcg_gpu_bind_done(struct jobcg_gpu_bind *b)
{
	if (!b)
		return;
	free(b->map);
	*b = (struct jobcg_gpu_bind){};
}

static int parse_uint(const char *s, const char *what, unsigned max, unsigned *ret)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return error_set(-EINVAL, "--gpu-bind: %s '%s' is not a number", what, s);
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return error_set(-EINVAL, "--gpu-bind: %s '%s' is not a number up to %u", what, s,
				 max);
	*ret = (unsigned)v;
	return 0;
}

JOBCG_EXPORT int jobcg_gpu_bind_parse(const char *s, struct jobcg_gpu_bind *ret)
{
	struct jobcg_gpu_bind b = {};
	int r;

	if (!s || streq(s, "none")) {
		*ret = b;
		return 0;
	}
	if (startswith(s, "single:") || startswith(s, "per_task:")) {
		bool single = startswith(s, "single:");

		b.mode = single ? JOBCG_GPU_BIND_SINGLE : JOBCG_GPU_BIND_PER_TASK;
		r = parse_uint(strchr(s, ':') + 1, single ? "tasks per GPU" : "GPUs per task",
			       JOBCG_GRES_MAX, &b.n);
		if (r < 0)
			return r;
		if (b.n == 0)
			return error_set(-EINVAL, "--gpu-bind %s: N must be at least 1", s);
		*ret = b;
		return 0;
	}
	if (startswith(s, "map_gpu:")) {
		_cleanup_strv_free_ char **v = strv_split(s + 8, ",");
		_cleanup_free_ unsigned *map = NULL;
		size_t nmap = 0;

		if (!v)
			return -ENOMEM;
		if (!v[0] || strstr(s, ",,") || s[8] == ',' || s[strlen(s) - 1] == ',')
			return error_set(-EINVAL, "--gpu-bind %s: empty list entry", s);
		for (size_t i = 0; v[i]; i++) {
			char *star = strchr(v[i], '*');
			unsigned id = 0, rep = 1;
			unsigned *m;

			if (star) {
				*star = 0;
				r = parse_uint(star + 1, "repeat count", 1024, &rep);
				if (r < 0)
					return r;
				if (rep == 0)
					return error_set(-EINVAL, "--gpu-bind %s: repeat count 0",
							 s);
			}
			r = parse_uint(v[i], "GPU id", JOBCG_GRES_MAX - 1, &id);
			if (r < 0)
				return r;
			if (nmap + rep > 4096)
				return error_set(-E2BIG, "--gpu-bind: map_gpu list too long");
			m = realloc(map, (nmap + rep) * sizeof(*m));
			if (!m)
				return -ENOMEM;
			map = m;
			for (unsigned k = 0; k < rep; k++)
				map[nmap++] = id;
		}
		if (nmap == 0)
			return error_set(-EINVAL, "--gpu-bind %s: empty list", s);
		b.mode = JOBCG_GPU_BIND_MAP;
		b.map = TAKE_PTR(map);
		b.nmap = nmap;
		*ret = b;
		return 0;
	}
	return error_set(-EINVAL,
			 "--gpu-bind '%s': want none, single:N, per_task:N or map_gpu:LIST", s);
}

JOBCG_EXPORT int jobcg_gpu_bind_task(const struct jobcg_gres_node *n,
				     const struct jobcg_gpu_bind *b,
				     const struct jobcg_gres_set *step, unsigned task,
				     unsigned ntasks, struct jobcg_gres_set *ret)
{
	unsigned gpus[JOBCG_GRES_MAX], ngpu = 0;
	struct jobcg_gres_set s = *step;

	if (task >= ntasks)
		return error_set(-EINVAL, "task %u out of %u tasks", task, ntasks);
	for (size_t i = 0; i < n->ndev; i++)
		if (jobcg_gres_set_has(step, (unsigned)i) && streq(n->dev[i].rec->name, "gpu")) {
			gpus[ngpu++] = (unsigned)i;
			jobcg_gres_set_del(&s, (unsigned)i);
		}
	if (b->mode == JOBCG_GPU_BIND_NONE || ngpu == 0) {
		*ret = *step;
		return 0;
	}
	switch (b->mode) {
	case JOBCG_GPU_BIND_SINGLE:
		jobcg_gres_set_add(&s, gpus[(task / b->n) % ngpu]);
		break;
	case JOBCG_GPU_BIND_PER_TASK:
		if (b->n > ngpu)
			return error_set(-EINVAL, "--gpu-bind per_task:%u but the step has %u GPUs",
					 b->n, ngpu);
		for (unsigned k = 0; k < b->n; k++)
			jobcg_gres_set_add(&s, gpus[((size_t)task * b->n + k) % ngpu]);
		break;
	case JOBCG_GPU_BIND_MAP: {
		unsigned id = b->map[task % b->nmap];

		if (id >= ngpu)
			return error_set(-EINVAL,
					 "--gpu-bind map_gpu: GPU %u for task %u, but the "
					 "step has %u GPUs (ids count from 0 within the step)",
					 id, task, ngpu);
		jobcg_gres_set_add(&s, gpus[id]);
		break;
	}
	case JOBCG_GPU_BIND_NONE:
		break;
	}
	*ret = s;
	return 0;
}

/* ---- environment ---- */

JOBCG_EXPORT const char *const jobcg_gres_env_names[] = {
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
    "JOBCG_JOB_GPUS",
    "JOBCG_STEP_GPUS",
    NULL,
};

enum { ENV_CUDA, ENV_ROCR, ENV_ZE, ENV_OPENCL, ENV_MAX };

/* Append ",item" (or "item") to a growing string; returns -ENOMEM. */
static int append(char **s, const char *item)
{
	char *t = *s ? strdup_printf("%s,%s", *s, item) : strdup(item);

	if (!t)
		return -ENOMEM;
	free(*s);
	*s = t;
	return 0;
}

static int push_env(char ***env, const char *name, const char *value)
{
	char *e = strdup_printf("%s=%s", name, value ? value : "");

	if (!e)
		return -ENOMEM;
	return strv_push(env, e);
}

JOBCG_EXPORT int jobcg_gres_env(const struct jobcg_gres_node *n, const struct jobcg_gres_env_in *in,
				char ***ret)
{
	static const unsigned env_flag[ENV_MAX] = {
	    JOBCG_GRES_FLAG_ENV_NVIDIA,
	    JOBCG_GRES_FLAG_ENV_AMD,
	    JOBCG_GRES_FLAG_ENV_INTEL,
	    JOBCG_GRES_FLAG_ENV_OPENCL,
	};
	const unsigned env_all = JOBCG_GRES_FLAG_ENV_NVIDIA | JOBCG_GRES_FLAG_ENV_AMD |
				 JOBCG_GRES_FLAG_ENV_INTEL | JOBCG_GRES_FLAG_ENV_OPENCL;
	const struct jobcg_gres_set *task = in->task ? in->task : in->step;
	const struct jobcg_gres_set *visible = in->visible ? in->visible : in->step;
	_cleanup_strv_free_ char **env = NULL;
	_cleanup_free_ char *job_s = NULL, *step_s = NULL;
	char *val[ENV_MAX] = {};
	unsigned flags = 0;
	bool any_gpu = false;
	int r = 0;

	if (!in->step || !in->job)
		return error_set(-EINVAL,
				 "a task's environment needs its job's and step's devices");
	if (jobcg_gres_set_format_name(n, in->job, "gpu", &job_s) < 0 ||
	    jobcg_gres_set_format_name(n, in->step, "gpu", &step_s) < 0)
		return -ENOMEM;

	for (size_t i = 0; i < n->ndev && r >= 0; i++) {
		const struct jobcg_gres_device *d = &n->dev[i];
		unsigned f = d->rec->flags, rank = 0;
		char num[32];

		if (!streq(d->rec->name, "gpu") || !jobcg_gres_set_has(task, d->pos))
			continue;
		any_gpu = true;
		/* Slurm: a record with no env_* flag sets every variable; no_gpu_env sets none. */
		if (f & JOBCG_GRES_FLAG_NO_GPU_ENV)
			f = 0;
		else if (!(f & env_all))
			f |= env_all;
		flags |= f;
		if (in->constrained) {
			for (size_t j = 0; j < i; j++)
				if (streq(n->dev[j].rec->name, "gpu") &&
				    jobcg_gres_set_has(visible, (unsigned)j))
					rank++;
		} else {
			rank = d->index;
		}
		format_buf(num, sizeof(num), "%u", rank);
		for (int e = 0; e < ENV_MAX && r >= 0; e++) {
			const char *item = num;

			if (!(f & env_flag[e]))
				continue;
			if (e == ENV_CUDA && gres_record_is_mig(d->rec)) {
				/* CUDA finds a MIG instance by its UUID only: an index would
				 * name whichever instance it enumerates first. */
				if (d->uuid && startswith(d->uuid, "MIG-"))
					item = d->uuid;
				else
					log_warning("the MIG UUID of gpu %u is unknown (no "
						    "mig-minors line for its caps?): "
						    "CUDA_VISIBLE_DEVICES gets its index",
						    d->index);
			} else if ((e == ENV_CUDA || e == ENV_ROCR) &&
				   (f & JOBCG_GRES_FLAG_ENV_UUID)) {
				if (d->uuid)
					item = d->uuid;
				else
					log_warning(
					    "gres.conf asks env_uuid but the UUID of gpu %u is "
					    "unknown (only NVIDIA's /proc/driver/nvidia is read); "
					    "using its index",
					    d->index);
			}
			r = append(&val[e], item);
		}
	}
	for (int e = 0; e < ENV_MAX && r >= 0; e++)
		if (any_gpu && (flags & env_flag[e]))
			r = push_env(&env, jobcg_gres_env_names[e], val[e] ? val[e] : "");
	for (int e = 0; e < ENV_MAX; e++)
		free(val[e]);
	if (r < 0)
		return r;
	if (*job_s && (r = push_env(&env, "JOBCG_JOB_GPUS", job_s)) < 0)
		return r;
	if (*step_s && (r = push_env(&env, "JOBCG_STEP_GPUS", step_s)) < 0)
		return r;
	if (!env) {
		env = calloc(1, sizeof(char *));
		if (!env)
			return -ENOMEM;
	}
	*ret = TAKE_PTR(env);
	return 0;
}

/* ---- device rules ---- */

struct rules {
	struct jobcg_devrule *v;
	size_t n, cap;
};

static int rules_add(struct rules *rs, char type, unsigned major, unsigned minor)
{
	for (size_t k = 0; k < rs->n; k++)
		if (rs->v[k].type == type && rs->v[k].major == major && rs->v[k].minor == minor)
			return 0;
	if (rs->n == rs->cap) {
		size_t ncap = rs->cap ? rs->cap * 2 : 8;
		struct jobcg_devrule *t = realloc(rs->v, ncap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		rs->v = t;
		rs->cap = ncap;
	}
	rs->v[rs->n++] = (struct jobcg_devrule){
	    .type = type,
	    .major = major,
	    .minor = minor,
	    .access = JOBCG_DEV_ACC_ALL,
	    .allow = true,
	};
	return 0;
}

static int companion_add(void *ud, unsigned major, unsigned minor)
{
	return rules_add(ud, 'c', major, minor);
}

static int devrules(const struct jobcg_gres_node *n, const struct jobcg_gres_set *set,
		    bool companions, struct jobcg_devrule **ret, size_t *ret_n)
{
	struct rules rs = {};
	int k;

	for (size_t i = 0; i < n->ndev; i++) {
		const struct jobcg_gres_record *r = n->dev[i].rec;

		if (set && !jobcg_gres_set_has(set, (unsigned)i))
			continue;
		for (size_t f = 0; f < r->nfiles; f++) {
			const struct jobcg_gres_file *file = &r->files[f];

			if (file->type != 'c' && file->type != 'b') {
				free(rs.v);
				return error_set_at(-ENODEV, r->origin.file, r->origin.line, 0,
						    "gres %s: %s is not a known device node (not "
						    "stat()ed or not a device)",
						    r->name, file->path);
			}
			if (rules_add(&rs, file->type, file->major, file->minor) < 0) {
				free(rs.v);
				return -ENOMEM;
			}
		}
		/* What the GPU's runtime opens beside it (nvidiactl, nvidia-uvm, kfd): in the
		 * grant of every job holding such a GPU, and with @set NULL in the managed set,
		 * so that jobs without one are denied them. */
		k = companions ? gres_companions(r, companion_add, &rs) : 0;
		if (k < 0) {
			free(rs.v);
			return k;
		}
	}
	if (!rs.v && !(rs.v = calloc(1, sizeof(*rs.v))))
		return -ENOMEM;
	*ret = rs.v;
	*ret_n = rs.n;
	return 0;
}

JOBCG_EXPORT int jobcg_gres_devrules(const struct jobcg_gres_node *n,
				     const struct jobcg_gres_set *set, struct jobcg_devrule **ret,
				     size_t *ret_n)
{
	return devrules(n, set, true, ret, ret_n);
}

JOBCG_EXPORT int jobcg_gres_file_devrules(const struct jobcg_gres_node *n,
					  const struct jobcg_gres_set *set,
					  struct jobcg_devrule **ret, size_t *ret_n)
{
	return devrules(n, set, false, ret, ret_n);
}

/* ---- persisted sets ---- */

JOBCG_EXPORT int jobcg_gres_set_format_name(const struct jobcg_gres_node *n,
					    const struct jobcg_gres_set *s, const char *name,
					    char **ret)
{
	_cleanup_free_ char *out = NULL;

	for (size_t i = 0; i < n->ndev; i++) {
		char num[16];

		if (!jobcg_gres_set_has(s, (unsigned)i) || !streq(n->dev[i].rec->name, name))
			continue;
		format_buf(num, sizeof(num), "%u", n->dev[i].index);
		if (append(&out, num) < 0)
			return -ENOMEM;
	}
	if (!out && !(out = strdup("")))
		return -ENOMEM;
	*ret = TAKE_PTR(out);
	return 0;
}

JOBCG_EXPORT int jobcg_gres_set_format(const struct jobcg_gres_node *n,
				       const struct jobcg_gres_set *s, char **ret)
{
	_cleanup_free_ char *out = strdup("");

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < n->ndev; i++) {
		const char *name = n->dev[i].rec->name;
		_cleanup_free_ char *idx = NULL;
		bool seen = false;
		char *t;

		for (size_t j = 0; j < i && !seen; j++)
			seen = streq(n->dev[j].rec->name, name);
		if (seen)
			continue;
		if (jobcg_gres_set_format_name(n, s, name, &idx) < 0)
			return -ENOMEM;
		if (!*idx)
			continue;
		t = strdup_printf("%s%s%s:%s", out, *out ? ";" : "", name, idx);
		if (!t)
			return -ENOMEM;
		free(out);
		out = t;
	}
	*ret = TAKE_PTR(out);
	return 0;
}

/* Parse "gpu:0,2;nic:1". With @lenient, unknown names and indices are skipped with a warning. */
static int set_parse(const struct jobcg_gres_node *n, const char *s, bool lenient,
		     struct jobcg_gres_set *ret)
{
	_cleanup_strv_free_ char **groups = strv_split(s, ";");
	struct jobcg_gres_set set = {};

	if (!groups)
		return -ENOMEM;
	for (size_t g = 0; groups[g]; g++) {
		char *colon = strchr(groups[g], ':');
		_cleanup_strv_free_ char **idx = NULL;

		if (!colon || colon == groups[g] || !colon[1])
			return error_set(-EINVAL, "gres set '%s': '%s' is not NAME:INDEX[,INDEX]",
					 s, groups[g]);
		*colon = 0;
		idx = strv_split(colon + 1, ",");
		if (!idx)
			return -ENOMEM;
		for (size_t i = 0; idx[i]; i++) {
			char *end;
			unsigned long v;
			int pos;

			errno = 0;
			v = strtoul(idx[i], &end, 10);
			if (errno || *end || idx[i][0] < '0' || idx[i][0] > '9' ||
			    v >= JOBCG_GRES_MAX)
				return error_set(-EINVAL, "gres set '%s': bad index '%s'", s,
						 idx[i]);
			pos = jobcg_gres_node_find(n, groups[g], (unsigned)v);
			if (pos < 0) {
				if (lenient) {
					log_warning(
					    "gres set '%s': %s %lu is not in gres.conf any more", s,
					    groups[g], v);
					continue;
				}
				return error_set(-ENOENT, "gres set '%s': no %s %lu in gres.conf",
						 s, groups[g], v);
			}
			jobcg_gres_set_add(&set, (unsigned)pos);
		}
	}
	*ret = set;
	return 0;
}

JOBCG_EXPORT int jobcg_gres_set_parse(const struct jobcg_gres_node *n, const char *s,
				      struct jobcg_gres_set *ret)
{
	return set_parse(n, s, false, ret);
}

JOBCG_EXPORT int jobcg_gres_xattr_write(const struct jobcg_gres_node *n, int dirfd,
					const char *xattr, const struct jobcg_gres_set *s)
{
	_cleanup_free_ char *v = NULL;
	int r = jobcg_gres_set_format(n, s, &v);

	if (r < 0)
		return r;
	if (fsetxattr(dirfd, xattr ? xattr : JOBCG_GRES_XATTR, v, strlen(v), 0) < 0)
		return error_set(negative_errno(), "cannot set %s: %s",
				 xattr ? xattr : JOBCG_GRES_XATTR, strerror(errno));
	return 0;
}

static int xattr_get(int dirfd, const char *name, char **ret)
{
	char buf[8192];
	ssize_t l = fgetxattr(dirfd, name, buf, sizeof(buf) - 1);

	if (l < 0)
		return negative_errno();
	buf[l] = 0;
	*ret = strdup(buf);
	return *ret ? 0 : -ENOMEM;
}

JOBCG_EXPORT int jobcg_gres_xattr_read(const struct jobcg_gres_node *n, int dirfd,
				       const char *xattr, struct jobcg_gres_set *ret)
{
	_cleanup_free_ char *v = NULL;
	const char *name = xattr ? xattr : JOBCG_GRES_XATTR;
	int r = xattr_get(dirfd, name, &v);

	if (r == -ENODATA)
		return r;
	if (r < 0)
		return error_set(r, "cannot read %s: %s", name, strerror(-r));
	if (!*v) {
		*ret = (struct jobcg_gres_set){};
		return 0;
	}
	r = jobcg_gres_set_parse(n, v, ret);
	if (r == -EINVAL) {
		char why[1024];

		/* Stored state, not a request: the caller's input is not what is wrong. */
		format_buf(why, sizeof(why), "%s", jobcg_last_error()->message);
		return error_set(-EBADMSG,
				 "%s holds '%s', which this node's devices do not match: %s", name,
				 v, why);
	}
	return r;
}

#define SCAN_MAX_DEPTH 8

static int scan_dir(const struct jobcg_gres_node *n, int fd, const char *rel, unsigned depth,
		    const char *xattr, jobcg_gres_scan_fn fn, void *userdata,
		    struct jobcg_gres_set *used)
{
	_cleanup_free_ char *v = NULL;
	DIR *d;
	struct dirent *de;
	int r, dfd;

	r = xattr_get(fd, xattr, &v);
	if (r >= 0) {
		struct jobcg_gres_set s = {};

		if (*v && set_parse(n, v, true, &s) < 0)
			log_warning("%s: %s='%s' does not parse, ignored", *rel ? rel : ".", xattr,
				    v);
		for (size_t i = 0; i < ELEMENTSOF(s.w); i++)
			used->w[i] |= s.w[i];
		if (fn && (r = fn(rel, depth, &s, userdata)) != 0)
			return r;
	} else if (r != -ENODATA && r != -EOPNOTSUPP) {
		return error_set(r, "%s: cannot read %s: %s", *rel ? rel : ".", xattr,
				 strerror(-r));
	}
	if (depth >= SCAN_MAX_DEPTH)
		return 0;

	/* A new open file description: a dup() would share (and move) the caller's offset. */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	d = fdopendir(dfd);
	if (!d) {
		r = negative_errno();
		close(dfd);
		return r;
	}
	r = 0;
	while (r == 0 && (de = readdir(d))) {
		_cleanup_close_ int cfd = -1;
		_cleanup_free_ char *crel = NULL;

		if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			/* A job removed while we look is simply gone. */
			if (errno == ENOENT)
				continue;
			r = error_set(negative_errno(), "cannot open %s/%s: %s", *rel ? rel : ".",
				      de->d_name, strerror(errno));
			break;
		}
		crel = *rel ? strdup_printf("%s/%s", rel, de->d_name) : strdup(de->d_name);
		if (!crel) {
			r = -ENOMEM;
			break;
		}
		r = scan_dir(n, cfd, crel, depth + 1, xattr, fn, userdata, used);
	}
	closedir(d);
	return r;
}

JOBCG_EXPORT int jobcg_gres_scan(const struct jobcg_gres_node *n, int rootfd, const char *xattr,
				 jobcg_gres_scan_fn fn, void *userdata,
				 struct jobcg_gres_set *ret_used)
{
	struct jobcg_gres_set used = {};
	int r = scan_dir(n, rootfd, "", 0, xattr ? xattr : JOBCG_GRES_XATTR, fn, userdata, &used);

	if (r != 0)
		return r;
	if (ret_used)
		*ret_used = used;
	return 0;
}
