/* jobcg: the node's GRES table (gres.conf records, one device each), device sets, UUIDs, and
 * the device rules a set of devices needs (companions included). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "cputopo.h"
#include "gpudetect_internal.h"
#include "gresxattr.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "log.h"
#include "util.h"

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

/*
 * gres.conf's Cores= are Slurm's core indices, the CPUs a job runs on are CPU ids: each
 * device's cores in CPUs, once per table, on the first selection that has CPUs to match
 * (gres_cores_match()). Never when the table is built: every step's start builds one, and a
 * node's topology is three sysfs reads per CPU. Affinity is a preference: without a topology
 * the indices are taken as CPU ids rather than failing anything.
 */
void gres_node_cores_to_cpus(const struct jobcg_gres_node *cn)
{
	/* A cache of the table's own: filled once, by the one thread that uses the table. */
	struct jobcg_gres_node *n = (struct jobcg_gres_node *)cn;
	struct cputopo t = {};
	bool any = false;
	int r;

	if (n->cores_tried)
		return;
	n->cores_tried = true;
	for (size_t i = 0; i < n->ndev && !any; i++)
		any = n->dev[i].rec->cores != NULL;
	if (!any)
		return;
	r = cputopo_load_node(&t);
	if (r < 0) {
		log_debug("gres.conf Cores= taken as CPU ids: no CPU topology (%s)",
			  jobcg_error_message(r));
		jobcg_error_clear();
		return;
	}
	n->dev_cpus = calloc(n->ndev, sizeof(*n->dev_cpus));
	for (size_t i = 0; n->dev_cpus && i < n->ndev; i++) {
		const struct jobcg_gres_record *rec = n->dev[i].rec;

		if (rec->cores)
			cputopo_cores_to_cpu_bits(&t, rec->cores, rec->cores_words, n->dev_cpus[i],
						  NULL);
	}
	cputopo_done(&t);
}

int gres_node_new(const struct jobcg_gres_conf *conf, struct jobcg_gres_node **ret)
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
	n->conf = conf;
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

JOBCG_EXPORT int jobcg_gres_node_new(const struct jobcg_config *conf, struct jobcg_gres_node **ret)
{
	return_if_null(conf);
	return_if_null(ret);
	return gres_node_new(conf ? &conf->gres : NULL, ret);
}

JOBCG_EXPORT void jobcg_gres_node_free(struct jobcg_gres_node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->ndev; i++)
		free((char *)n->dev[i].uuid);
	free(n->dev);
	free(n->dev_cpus);
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
		_cleanup_free_ char *path = NULL, *text = NULL, *uuid = NULL;
		unsigned minor;
		int k;

		if (de->d_name[0] == '.')
			continue;
		path = strdup_printf("%s/%s/information", dir, de->d_name);
		if (!path) {
			closedir(d);
			return -ENOMEM;
		}
		if (read_full_file_at(AT_FDCWD, path, 65536, &text, NULL) < 0)
			continue;
		k = gpufile_nvidia_minor_uuid(text, strlen(text), &minor, &uuid);
		if (k == -ENOMEM) {
			closedir(d);
			return k;
		}
		if (k < 0)
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
	 * above; CUDA needs the instance's own. Where mig-minors cannot be found beside
	 * @proc_dir, none: the parent's would give the job the whole GPU's name. */
	for (size_t i = 0; i < n->ndev; i++) {
		const struct jobcg_gres_record *r = n->dev[i].rec;
		_cleanup_free_ char *proc = NULL, *uuid = NULL;
		int k = -ENOENT;

		if (!gres_record_is_mig(r))
			continue;
		if (proc_dir && !endswith_gpus(proc_dir)) {
			free((char *)n->dev[i].uuid);
			n->dev[i].uuid = NULL;
			continue;
		}
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
	struct gres_companions_seen seen = {};
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
				gres_companions_done(&seen);
				return error_set_at(-ENODEV, r->origin.file, r->origin.line, 0,
						    "gres %s: %s is not a known device node (not "
						    "stat()ed or not a device)",
						    r->name, file->path);
			}
			if (rules_add(&rs, file->type, file->major, file->minor) < 0) {
				free(rs.v);
				gres_companions_done(&seen);
				return -ENOMEM;
			}
		}
		/* What the GPU's runtime opens beside it (nvidiactl, nvidia-uvm, kfd): in the
		 * grant of every job holding such a GPU, and with @set NULL in the managed set,
		 * so that jobs without one are denied them. */
		k = companions ? gres_companions(r, &seen, companion_add, &rs) : 0;
		if (k < 0) {
			free(rs.v);
			gres_companions_done(&seen);
			return k;
		}
	}
	gres_companions_done(&seen);
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

int gres_append(char **s, const char *item)
{
	char *t = *s ? strdup_printf("%s,%s", *s, item) : strdup(item);

	if (!t)
		return -ENOMEM;
	free(*s);
	*s = t;
	return 0;
}

bool gres_same_type(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcasecmp(a, b) == 0;
}
