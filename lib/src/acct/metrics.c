/* jobcg: the node's jobs, steps and GPUs read from the cgroup tree and the kernel's device
 * programs without the node lock, and their Prometheus text exposition (version 0.0.4). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "cgroupfs.h"
#include "context_internal.h"
#include "gresxattr.h"
#include "jobcg-build.h"
#include "devices.h"
#include "gpufiles.h"
#include "inspect_internal.h"
#include "jobcg/inspect.h"
#include "jobcg/metrics.h"
#include "log.h"
#include "metrics_internal.h"
#include "parse.h"
#include "resv_internal.h"
#include "tree.h"
#include "util.h"

/* Largest cgroup file read here (io.stat grows with the devices a job touched). */
#define FILE_MAX (64u * 1024u)
/* A tree with more jobs than this is read only up to it (memory a scrape may take). */
#define JOBS_MAX  100000u
#define STEPS_MAX 100000u

struct collector {
	struct jobcg_ctx *ctx;
	struct jobcg_metrics *m;
	struct jobcg_gres_node *node;
	struct jobcg_progcache *cache;
	struct jobcg_devpolicy *policy; /* the pinned node program's, when there is one */
	struct jobcg_devreq *reqs;	/* one per GPU of m->gpus */
	unsigned *access;
	char *buf; /* FILE_MAX bytes */
	size_t cap;
};

static void count_error(struct collector *c, const char *what, int r)
{
	c->m->errors++;
	log_debug("metrics: %s: %s", what, strerror(-r));
}

/* Read @name in @dfd into c->buf: its length, or -ENOENT when absent. */
static ssize_t read_file(struct collector *c, int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0)
		return negative_errno();
	for (;;) {
		ssize_t k = read(fd, c->buf + len, FILE_MAX - 1 - len);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (len == FILE_MAX - 1)
			return -EFBIG;
	}
	c->buf[len] = 0;
	return (ssize_t)len;
}

bool metrics_parse_value(const char *s, uint64_t *ret)
{
	const char *end;

	if (strncmp(s, "max", 3) == 0 && (s[3] == '\n' || s[3] == 0 || s[3] == ' ')) {
		*ret = UINT64_MAX;
		return true;
	}
	if (parse_u64_prefix(s, UINT64_MAX, ret, &end) < 0)
		return false;
	return *end == '\n' || *end == 0 || *end == ' ';
}

static void set_item(struct jobcg_metrics_cg *cg, enum jobcg_metric_item i, uint64_t v)
{
	cg->value[i] = v;
	cg->have |= 1u << i;
}

/* A one-value file ("123" or "max"). */
static void read_value(struct collector *c, int dfd, const char *name, struct jobcg_metrics_cg *cg,
		       enum jobcg_metric_item item)
{
	ssize_t r = read_file(c, dfd, name);
	uint64_t v;

	if (r == -ENOENT || r == -ENODEV)
		return; /* controller not enabled here, or the cgroup is going away */
	if (r < 0)
		return count_error(c, name, (int)r);
	if (!metrics_parse_value(c->buf, &v))
		return count_error(c, name, -EBADMSG);
	set_item(cg, item, v);
}

void metrics_parse_keyed(const char *text, const struct metrics_key *keys,
			 struct jobcg_metrics_cg *cg)
{
	for (const struct metrics_key *k = keys; k->key; k++) {
		uint64_t v;

		if (cgfs_parse_keyed(text, k->key, &v) == 0)
			set_item(cg, k->item, v);
	}
}

/* A flat keyed file: the keys of @keys that it has. */
static void read_keyed(struct collector *c, int dfd, const char *name,
		       const struct metrics_key *keys, struct jobcg_metrics_cg *cg)
{
	ssize_t r = read_file(c, dfd, name);

	if (r == -ENOENT || r == -ENODEV)
		return;
	if (r < 0)
		return count_error(c, name, (int)r);
	metrics_parse_keyed(c->buf, keys, cg);
}

void metrics_parse_io(const char *text, uint64_t *ret_read, uint64_t *ret_write)
{
	uint64_t rd = 0, wr = 0;

	for (const char *p = text; *p;) {
		const char *eol = strchrnul(p, '\n');

		for (const char *f = p; f < eol;) {
			const char *end;
			uint64_t v, *sum;

			f = strchr(f, ' ');
			if (!f || f >= eol)
				break;
			f++;
			sum = startswith(f, "rbytes=")	 ? &rd
			      : startswith(f, "wbytes=") ? &wr
							 : NULL;
			/* Byte counts are digits ("max" is no count), and a sum past 64 bits stays
			 * at the largest instead of wrapping to a small one. */
			if (sum && parse_u64_prefix(f + 7, UINT64_MAX, &v, &end) == 0 &&
			    (*end == ' ' || *end == '\n' || *end == 0) &&
			    __builtin_add_overflow(*sum, v, sum))
				*sum = UINT64_MAX;
		}
		p = *eol ? eol + 1 : eol;
	}
	*ret_read = rd;
	*ret_write = wr;
}

/* io.stat, summed over its devices. */
static void read_io(struct collector *c, int dfd, struct jobcg_metrics_cg *cg)
{
	ssize_t r = read_file(c, dfd, "io.stat");
	uint64_t rd, wr;

	if (r == -ENOENT || r == -ENODEV)
		return;
	if (r < 0)
		return count_error(c, "io.stat", (int)r);
	metrics_parse_io(c->buf, &rd, &wr);
	set_item(cg, JOBCG_METRIC_IO_READ_BYTES, rd);
	set_item(cg, JOBCG_METRIC_IO_WRITE_BYTES, wr);
}

const struct metrics_key metrics_cpu_keys[] = {
    {"usage_usec", JOBCG_METRIC_CPU_USAGE_USEC},
    {"user_usec", JOBCG_METRIC_CPU_USER_USEC},
    {"system_usec", JOBCG_METRIC_CPU_SYSTEM_USEC},
    {NULL, 0},
};
const struct metrics_key metrics_mem_event_keys[] = {
    {"oom_kill", JOBCG_METRIC_OOM_KILL},
    {"high", JOBCG_METRIC_MEM_HIGH_EVENTS},
    {NULL, 0},
};

/* The controllers a directory offers its children (cgroup.subtree_control: what each child's
 * cgroup.controllers shows), so that a job's steps cost no read of their own; -1 unknown. */
static int child_controllers(struct collector *c, int dfd)
{
	ssize_t r = read_file(c, dfd, "cgroup.subtree_control");

	return r < 0 ? -1 : (int)cgfs_parse_controllers(c->buf);
}

/*
 * The files of one cgroup; -ENOENT when it is gone. @ctl: its controllers as its parent's
 * cgroup.subtree_control names them, or -1 to read its cgroup.controllers.
 */
static int read_cgroup(struct collector *c, int dfd, const char *path, int ctl_known,
		       struct jobcg_metrics_cg *cg)
{
	static const char *const gone_file = "cpu.stat"; /* in every cgroup v2 directory */
	ssize_t r;
	unsigned ctl;

	if (ctl_known < 0) {
		r = read_file(c, dfd, "cgroup.controllers");
		if (r == -ENOENT || r == -ENODEV)
			return -ENOENT;
		if (r < 0) {
			count_error(c, path, (int)r);
			return 0;
		}
		ctl = cgfs_parse_controllers(c->buf);
	} else
		ctl = (unsigned)ctl_known;
	/* Files of controllers not enabled here do not exist: not even asked for. */
	r = read_file(c, dfd, gone_file);
	if (r == -ENOENT || r == -ENODEV)
		return -ENOENT;
	if (r < 0)
		count_error(c, gone_file, (int)r);
	else
		metrics_parse_keyed(c->buf, metrics_cpu_keys, cg);
	if (ctl & (1u << JOBCG_CTRL_MEMORY)) {
		read_value(c, dfd, "memory.current", cg, JOBCG_METRIC_MEM_CURRENT);
		read_value(c, dfd, "memory.peak", cg, JOBCG_METRIC_MEM_PEAK);
		read_value(c, dfd, "memory.max", cg, JOBCG_METRIC_MEM_MAX);
		read_value(c, dfd, "memory.swap.current", cg, JOBCG_METRIC_SWAP_CURRENT);
		read_value(c, dfd, "memory.swap.max", cg, JOBCG_METRIC_SWAP_MAX);
		read_keyed(c, dfd, "memory.events", metrics_mem_event_keys, cg);
	}
	if (ctl & (1u << JOBCG_CTRL_PIDS)) {
		read_value(c, dfd, "pids.current", cg, JOBCG_METRIC_PIDS_CURRENT);
		read_value(c, dfd, "pids.max", cg, JOBCG_METRIC_PIDS_MAX);
	}
	if (ctl & (1u << JOBCG_CTRL_IO))
		read_io(c, dfd, cg);
	if (!c->m->n_gpus)
		return 0;
	bool opaque = false;
	size_t nprogs = 0;
	int k = jobcg_cgroup_devices_access(path, dfd, c->cache, c->reqs, c->m->n_gpus, c->access,
					    &opaque, &nprogs);
	if (k == -ENOENT)
		return -ENOENT;
	if (k < 0) {
		count_error(c, path, k);
		return 0;
	}
	for (size_t g = 0; g < c->m->n_gpus; g++)
		if (c->access[g] & (JOBCG_DEV_ACC_READ | JOBCG_DEV_ACC_WRITE)) {
			jobcg_gres_set_add(&cg->gpus, c->m->gpus[g].pos);
			c->m->gpus[g].held = true;
		}
	cg->gpus_uncertain = opaque;
	return 0;
}

static int push_cg(struct collector *c, struct jobcg_metrics_cg **ret)
{
	struct jobcg_metrics *m = c->m;

	if (m->n_cgs == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 64;
		struct jobcg_metrics_cg *t = realloc(m->cgs, nc * sizeof(*t));

		if (!t)
			return -ENOMEM;
		m->cgs = t;
		c->cap = nc;
	}
	*ret = memset(&m->cgs[m->n_cgs], 0, sizeof(**ret));
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Steps as `jobcg list` orders them: numbers ascending, then names. */
static int cmp_step(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	bool nx = *x >= '0' && *x <= '9', ny = *y >= '0' && *y <= '9';

	if (nx && ny) {
		size_t lx = strlen(x), ly = strlen(y);
		return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
	}
	if (nx != ny)
		return nx ? -1 : 1;
	return strcmp(x, y);
}

/* The names of @dfd's subdirectories that @keep accepts. */
static int subdirs(int dfd, bool (*keep)(const char *), char ***ret)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_strv_free_ char **v = calloc(1, sizeof(char *));
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (fd < 0)
		return negative_errno();
	d = fdopendir(fd);
	if (!d) {
		r = negative_errno();
		close(fd);
		return r;
	}
	if (!v) {
		closedir(d);
		return -ENOMEM;
	}
	while ((e = readdir(d)))
		if ((e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) && keep(e->d_name) &&
		    (r = strv_push(&v, strdup(e->d_name))) < 0)
			break;
	closedir(d);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(v);
	return 0;
}

static bool is_step_dir(const char *name)
{
	char sid[JOBCG_STEP_ID_MAX];
	return tree_parse_step_dirname(name, sid) == 0;
}

static bool is_job_dir(const char *name)
{
	uint32_t id;
	return tree_parse_job_dirname(name, &id) == 0;
}

/* The owner's record; its absence (ENODATA) is no error, but any other failure is one: it
 * would show the cgroup as nobody's. (Without CAP_SYS_ADMIN the kernel hides trusted.* as
 * absent: the CLI refuses to read the node as another user.) */
static void read_owner(struct collector *c, int dfd, const char *path, struct jobcg_metrics_cg *cg)
{
	char v[64];
	ssize_t n = fgetxattr(dfd, "trusted.jobcg.owner", v, sizeof(v) - 1);
	int r = n < 0 ? negative_errno() : 0;
	char what[PATH_MAX + 32];
	unsigned u, g;

	if (n > 0) {
		v[n] = 0;
		if (parse_owner(v, &u, &g) == 0) {
			cg->have_owner = true;
			cg->uid = (uid_t)u;
			return;
		}
		r = -EINVAL;
	}
	if (r && r != -ENODATA) {
		snprintf(what, sizeof(what), "%s (trusted.jobcg.owner)", path);
		count_error(c, what, r);
	}
}

static int collect_job(struct collector *c, int rootfd, const char *parent, int job_ctl,
		       uint32_t id)
{
	char name[32], path[PATH_MAX];
	_cleanup_close_ int dfd = -1;
	_cleanup_strv_free_ char **steps = NULL;
	struct jobcg_metrics_cg *job;
	size_t at = c->m->n_cgs;
	int r;

	snprintf(name, sizeof(name), "job_%u", id);
	snprintf(path, sizeof(path), "%s/%s%s%s", jobcg_ctx_root(c->ctx), parent,
		 *parent ? "/" : "", name);
	dfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : (count_error(c, path, negative_errno()), 0);
	r = push_cg(c, &job);
	if (r < 0)
		return r;
	job->job = id;
	read_owner(c, dfd, path, job);
	if (read_cgroup(c, dfd, path, job_ctl, job) == -ENOENT)
		return 0; /* released meanwhile: not in this reading */
	c->m->n_cgs++;
	c->m->n_jobs++;
	if (c->node) {
		struct jobcg_gres_set alloc;

		r = jobcg_gres_xattr_read(c->node, dfd, NULL, &alloc);
		if (r == 0) {
			for (size_t g = 0; g < c->m->n_gpus; g++)
				if (jobcg_gres_set_has(&alloc, c->m->gpus[g].pos))
					c->m->gpus[g].allocated = true;
		} else if (r != -ENODATA && r != -ENOTSUP)
			count_error(c, path, r);
	}
	r = subdirs(dfd, is_step_dir, &steps);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		count_error(c, path, r);
		return 0;
	}
	qsort(steps, strv_length(steps), sizeof(char *), cmp_step);
	int step_ctl = steps[0] ? child_controllers(c, dfd) : -1;
	for (char **s = steps; *s && c->m->n_steps < STEPS_MAX; s++) {
		_cleanup_close_ int sfd = openat(dfd, *s, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		char spath[PATH_MAX];
		struct jobcg_metrics_cg *st;

		if (sfd < 0)
			continue; /* removed meanwhile */
		r = push_cg(c, &st);
		if (r < 0)
			return r;
		job = &c->m->cgs[at]; /* push_cg may have moved it */
		st->job = id;
		tree_parse_step_dirname(*s, st->step);
		st->have_owner = job->have_owner;
		st->uid = job->uid;
		snprintf(spath, sizeof(spath), "%s/%s", path, *s);
		if (read_cgroup(c, sfd, spath, step_ctl, st) == -ENOENT)
			continue;
		c->m->n_cgs++;
		c->m->n_steps++;
	}
	return 0;
}

int metrics_device_minor(const char *text, unsigned *ret)
{
	/* As GPU detection reads it: the line that starts so, its value all digits, a GPU's. */
	int r = gpufile_field_unsigned(text, strlen(text), "Device Minor", GPUFILE_NVIDIA_MINOR_MAX,
				       ret, NULL);

	return r == -ENOMEM ? r : r < 0 ? -EBADMSG : 0;
}

/* NVIDIA's /proc/driver/nvidia/gpus/<PCI bus id>/information names each GPU's device minor. */
static void load_pci_ids(struct jobcg_metrics *m, const char *proc_dir)
{
	DIR *d = opendir(proc_dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		_cleanup_free_ char *text = NULL, *file = NULL;
		unsigned minor;

		if (e->d_name[0] == '.')
			continue;
		file = strdup_printf("%s/%s/information", proc_dir, e->d_name);
		if (!file || read_full_file_at(AT_FDCWD, file, 65536, &text, NULL) < 0)
			continue;
		if (metrics_device_minor(text, &minor) < 0)
			continue;
		for (size_t g = 0; g < m->n_gpus; g++) {
			struct stat st;

			if (!m->gpus[g].pci_bus_id && stat(m->gpus[g].device, &st) == 0 &&
			    S_ISCHR(st.st_mode) && major(st.st_rdev) == 195 &&
			    minor(st.st_rdev) == minor)
				m->gpus[g].pci_bus_id = strdup(e->d_name);
		}
	}
	closedir(d);
}

static int load_gpus(struct collector *c)
{
	const struct jobcg_config *conf = jobcg_ctx_config(c->ctx);
	const char *proc = env_secure("JOBCG_NVIDIA_PROC_DIR");
	struct jobcg_metrics *m = c->m;
	size_t n;
	int r;

	if (!proc || !*proc)
		proc = "/proc/driver/nvidia/gpus";
	r = jobcg_gres_node_new(conf, &c->node);
	if (r < 0)
		return r;
	(void)jobcg_gres_node_load_uuids(c->node, proc);
	n = jobcg_gres_node_count(c->node);
	m->gpus = calloc(n ? n : 1, sizeof(*m->gpus));
	c->reqs = calloc(n ? n : 1, sizeof(*c->reqs));
	c->access = calloc(n ? n : 1, sizeof(*c->access));
	if (!m->gpus || !c->reqs || !c->access)
		return -ENOMEM;
	for (unsigned pos = 0; pos < n; pos++) {
		const struct jobcg_gres_device *d = jobcg_gres_node_device(c->node, pos);
		struct jobcg_metrics_gpu *g = &m->gpus[m->n_gpus];

		if (!d || !streq(d->rec->name, "gpu") || d->rec->nfiles == 0 ||
		    !d->rec->files[0].type)
			continue;
		g->pos = pos;
		g->index = d->index;
		g->device = strdup(d->rec->files[0].path);
		g->type = d->rec->type ? strdup(d->rec->type) : NULL;
		g->uuid = d->uuid ? strdup(d->uuid) : NULL;
		if (!g->device || (d->rec->type && !g->type) || (d->uuid && !g->uuid))
			return -ENOMEM;
		c->reqs[m->n_gpus] = (struct jobcg_devreq){
		    d->rec->files[0].type, d->rec->files[0].major, d->rec->files[0].minor};
		m->n_gpus++;
	}
	load_pci_ids(m, proc);
	m->constrain_devices = conf->cgroup.constrain_devices && n > 0;
	return jobcg_progcache_new(&c->cache);
}

/*
 * The pinned node program, when there is one: the walk then decides the GPUs of cgroups that
 * only it constrains from its policy map instead of running it per cgroup and GPU.
 */
static void open_policy(struct collector *c)
{
	const struct jobcg_config *conf = jobcg_ctx_config(c->ctx);
	int r;

	if (!c->m->constrain_devices || !c->cache)
		return;
	if (jobcg_devpolicy_open_pinned(conf, jobcg_ctx_root(c->ctx), &c->policy) < 0) {
		jobcg_error_clear();
		return;
	}
	r = jobcg_progcache_trust_policy(c->cache, c->policy);
	if (r < 0 && r != -ENOENT)
		count_error(c, "node device program", r);
	jobcg_error_clear();
}

static void device_mode(struct collector *c)
{
	const struct jobcg_config *conf = jobcg_ctx_config(c->ctx);

	if (!c->m->constrain_devices) {
		c->m->device_mode = "off";
		return;
	}
	if (c->policy) {
		c->m->device_mode =
		    jobcg_devpolicy_mode(c->policy) == JOBCG_DEVPROG_NODE ? "node" : "linear";
		return;
	}
	/* Nothing pinned: the node program was never set up (no job yet), or it could not load
	 * here and jobs run with one program each. */
	c->m->device_mode =
	    conf->cgroup.device_program == JOBCG_DEVPROG_LINEAR || c->m->n_jobs ? "linear" : "none";
}

unsigned metrics_cpulist_count(const char *s)
{
	_cleanup_free_ uint64_t *bits = NULL;
	unsigned n = 0;
	size_t words;

	/* The parser cgroup.conf checked SpecCPUs with: a CPU named twice ("0-3,2") counts once. */
	if (!s || jobcg_parse_cpulist(s, &bits, &words) < 0) {
		jobcg_error_clear();
		return 0;
	}
	for (size_t i = 0; i < words; i++)
		n += (unsigned)__builtin_popcountll(bits[i]);
	return n;
}

static bool is_resv_dir(const char *name)
{
	const char *n;
	return tree_parse_resv_dirname(name, &n) == 0;
}

/* Reservations, their jobs (after the top-level ones) and their state. */
static int collect_resvs(struct collector *c, int rootfd)
{
	_cleanup_strv_free_ char **resvs = NULL;
	int r;

	if (rootfd < 0)
		return 0;
	r = subdirs(rootfd, is_resv_dir, &resvs);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		count_error(c, jobcg_ctx_root(c->ctx), r);
		return 0;
	}
	qsort(resvs, strv_length(resvs), sizeof(char *), cmp_step);
	c->m->resvs = calloc(strv_length(resvs) + 1, sizeof(*c->m->resvs));
	if (!c->m->resvs)
		return -ENOMEM;
	for (char **k = resvs; *k; k++) {
		_cleanup_close_ int rfd = openat(rootfd, *k, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_cleanup_strv_free_ char **jobs = NULL;
		struct jobcg_metrics_resv *mr = &c->m->resvs[c->m->n_resvs];
		struct jobcg_resv_info *info = NULL;
		struct jobcg_resv_status *st = NULL;
		const char *name = *k + strlen(TREE_RESV_PREFIX);

		if (rfd < 0)
			continue; /* deleted meanwhile */
		r = jobcg_resv_info_get(c->ctx, name, &info);
		if (r == -ENOMEM)
			return r;
		if (r == -ENOENT) {
			jobcg_error_clear();
			continue; /* deleted meanwhile */
		}
		mr->name = strdup(name);
		if (r < 0) {
			/* Its recorded state does not read (trusted.* edited or corrupted): shown
			 * without devices, CPUs or memory and not valid, its jobs still counted. */
			log_warning("metrics: reservation %s unreadable: %s", name,
				    jobcg_last_error()->message);
			jobcg_error_clear();
			count_error(c, name, r);
			mr->devices = strdup("");
			mr->cpus = strdup("");
			c->m->n_resvs++;
			if (!mr->name || !mr->devices || !mr->cpus)
				return -ENOMEM;
			goto jobs;
		}
		mr->devices = TAKE_PTR(info->devices);
		mr->cpus = TAKE_PTR(info->cpus);
		mr->mem_bytes = info->mem_bytes;
		mr->isolated = info->isolated;
		mr->jobs = (unsigned)info->n_jobs;
		if (c->node && *mr->devices) {
			struct jobcg_gres_set set;

			if (jobcg_gres_set_parse(c->node, mr->devices, &set) == 0)
				for (size_t g = 0; g < c->m->n_gpus; g++)
					if (jobcg_gres_set_has(&set, c->m->gpus[g].pos))
						c->m->gpus[g].allocated = true;
		}
		jobcg_resv_info_free(info);
		c->m->n_resvs++;
		if (!mr->name)
			return -ENOMEM;
		if (resv_verify_unlocked(c->ctx, name, &st) == 0)
			mr->valid = st->valid;
		else
			jobcg_error_clear();
		jobcg_resv_status_free(st);
	jobs:
		if (subdirs(rfd, is_job_dir, &jobs) < 0)
			continue;
		int job_ctl = jobs[0] ? child_controllers(c, rfd) : -1;
		for (char **j = jobs; *j; j++) {
			uint32_t id;

			if (tree_parse_job_dirname(*j, &id) == 0 &&
			    (r = collect_job(c, rfd, *k, job_ctl, id)) < 0)
				return r;
		}
	}
	return 0;
}

JOBCG_EXPORT void jobcg_metrics_free(struct jobcg_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_resvs; i++) {
		free(m->resvs[i].name);
		free(m->resvs[i].devices);
		free(m->resvs[i].cpus);
	}
	free(m->resvs);
	for (size_t g = 0; g < m->n_gpus; g++) {
		free(m->gpus[g].type);
		free(m->gpus[g].device);
		free(m->gpus[g].uuid);
		free(m->gpus[g].pci_bus_id);
	}
	free(m->gpus);
	free(m->cgs);
	free(m);
}

JOBCG_EXPORT int jobcg_metrics_collect(struct jobcg_ctx *ctx, struct jobcg_metrics **ret)
{
	const struct jobcg_cgroup_conf *cc = &jobcg_ctx_config(ctx)->cgroup;
	struct collector c = {.ctx = ctx};
	_cleanup_free_ uint32_t *ids = NULL;
	_cleanup_strv_free_ char **kids = NULL;
	_cleanup_close_ int rootfd = -1;
	uint64_t t0 = now_usec();
	size_t nids = 0;
	int r;

	c.m = calloc(1, sizeof(*c.m));
	c.buf = malloc(FILE_MAX);
	if (!c.m || !c.buf) {
		r = -ENOMEM;
		goto out;
	}
	c.m->realtime_usec = realtime_usec();
	c.m->cgroup_conf_error = jobcg_config_cgroup_error(jobcg_ctx_config(ctx)) != NULL;
	c.m->gres_conf_error = jobcg_config_gres_error(jobcg_ctx_config(ctx)) != NULL;
	r = load_gpus(&c);
	if (r == -ENOMEM)
		goto out;
	if (r < 0) { /* a gres.conf the node table refuses: jobs are still worth reading */
		count_error(&c, "gres.conf", r);
		jobcg_gres_node_free(c.node);
		c.node = NULL;
		c.m->n_gpus = 0;
		jobcg_error_clear();
	}
	open_policy(&c);
	rootfd = open(jobcg_ctx_root(ctx), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 && errno != ENOENT)
		count_error(&c, jobcg_ctx_root(ctx), negative_errno());
	if (rootfd >= 0) {
		r = subdirs(rootfd, is_job_dir, &kids);
		if (r == -ENOMEM)
			goto out;
		if (r < 0)
			count_error(&c, jobcg_ctx_root(ctx), r);
	}
	ids = calloc(strv_length(kids) + 1, sizeof(*ids));
	if (!ids) {
		r = -ENOMEM;
		goto out;
	}
	for (char **k = kids; k && *k && nids < JOBS_MAX; k++)
		if (tree_parse_job_dirname(*k, &ids[nids]) == 0)
			nids++;
	qsort(ids, nids, sizeof(*ids), cmp_u32);
	int job_ctl = nids ? child_controllers(&c, rootfd) : -1;
	for (size_t k = 0; k < nids; k++) {
		r = collect_job(&c, rootfd, "", job_ctl, ids[k]);
		if (r < 0)
			goto out;
	}
	r = collect_resvs(&c, rootfd);
	if (r < 0)
		goto out;
	for (size_t g = 0; g < c.m->n_gpus; g++)
		if (!c.m->gpus[g].allocated)
			c.m->gpus_free++;
	device_mode(&c);
	if (cc->spec_cpus) {
		c.m->have_reserved_cpus = true;
		c.m->reserved_cpus = metrics_cpulist_count(cc->spec_cpus);
	} else if (cc->core_spec_count) {
		c.m->have_reserved_cpus = true;
		c.m->reserved_cpus = cc->core_spec_count;
	}
	c.m->reserved_mem_bytes = cc->mem_spec_limit;
	c.m->duration_usec = now_usec() - t0;
	*ret = TAKE_PTR(c.m);
	r = 0;
out:
	jobcg_metrics_free(c.m);
	jobcg_gres_node_free(c.node);
	jobcg_progcache_free(c.cache);
	jobcg_devpolicy_free(c.policy);
	free(c.reqs);
	free(c.access);
	free(c.buf);
	return r;
}

/* ---- the text exposition ---- */

struct out {
	char *s;
	size_t len, cap;
	bool oom;
};

static void put_n(struct out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t nc = o->cap ? o->cap : 16384;
		char *t;

		while (o->len + n + 1 > nc)
			nc *= 2;
		t = realloc(o->s, nc);
		if (!t) {
			o->oom = true;
			return;
		}
		o->s = t;
		o->cap = nc;
	}
	memcpy(o->s + o->len, s, n);
	o->len += n;
	o->s[o->len] = 0;
}

static void put(struct out *o, const char *s)
{
	put_n(o, s, strlen(s));
}

static void put_u64(struct out *o, uint64_t v)
{
	char b[24], *p = b + sizeof(b);

	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	put_n(o, p, (size_t)(b + sizeof(b) - p));
}

/* A label value: backslash, double quote and line feed escaped, as the format wants. */
static void put_label(struct out *o, const char *name, const char *v, bool first)
{
	if (!first)
		put_n(o, ",", 1);
	put(o, name);
	put_n(o, "=\"", 2);
	for (const char *p = v ? v : ""; *p; p++) {
		size_t k = strcspn(p, "\\\"\n");

		put_n(o, p, k);
		p += k;
		if (!*p)
			break;
		put(o, *p == '\\' ? "\\\\" : *p == '"' ? "\\\"" : "\\n");
	}
	put_n(o, "\"", 1);
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP ");
	put(o, name);
	put_n(o, " ", 1);
	put(o, help);
	put(o, "\n# TYPE ");
	put(o, name);
	put_n(o, " ", 1);
	put(o, type);
	put_n(o, "\n", 1);
}

struct fmt {
	struct out o;
	const struct jobcg_metrics_format_opts *opts;
};

static void put_user(struct fmt *f, const struct jobcg_metrics_cg *cg)
{
	const char *name = NULL;
	char num[16];

	if (!cg->have_owner) {
		put_label(&f->o, "user", "", false);
		return;
	}
	if (f->opts->user_name)
		name = f->opts->user_name(cg->uid, f->opts->userdata);
	if (!name) {
		snprintf(num, sizeof(num), "%u", (unsigned)cg->uid);
		name = num;
	}
	put_label(&f->o, "user", name, false);
}

static void cg_labels(struct fmt *f, const struct jobcg_metrics_cg *cg)
{
	char job[16];

	snprintf(job, sizeof(job), "%u", cg->job);
	put_n(&f->o, "{", 1);
	put_label(&f->o, "job", job, true);
	put_label(&f->o, "step", cg->step, false);
	put_user(f, cg);
	put_n(&f->o, "} ", 2);
}

/* How an item is shown: seconds from microseconds, +Inf for "max". */
enum unit { RAW, USEC, LIMIT };

static const struct cg_family {
	const char *name, *type, *help;
	enum jobcg_metric_item item;
	enum unit unit;
} cg_families[] = {
    {"jobcg_cpu_user_seconds_total", "counter", "CPU time spent in user mode (cpu.stat).",
     JOBCG_METRIC_CPU_USER_USEC, USEC},
    {"jobcg_cpu_system_seconds_total", "counter", "CPU time spent in kernel mode (cpu.stat).",
     JOBCG_METRIC_CPU_SYSTEM_USEC, USEC},
    {"jobcg_memory_usage_bytes", "gauge", "Memory in use (memory.current).",
     JOBCG_METRIC_MEM_CURRENT, RAW},
    {"jobcg_memory_peak_bytes", "gauge", "Highest memory use seen (memory.peak).",
     JOBCG_METRIC_MEM_PEAK, RAW},
    {"jobcg_memory_limit_bytes", "gauge", "Memory limit (memory.max; +Inf when none).",
     JOBCG_METRIC_MEM_MAX, LIMIT},
    {"jobcg_swap_usage_bytes", "gauge", "Swap in use (memory.swap.current).",
     JOBCG_METRIC_SWAP_CURRENT, RAW},
    {"jobcg_swap_limit_bytes", "gauge", "Swap limit (memory.swap.max; +Inf when none).",
     JOBCG_METRIC_SWAP_MAX, LIMIT},
    {"jobcg_oom_kills_total", "counter",
     "Processes killed by the OOM killer in the cgroup (memory.events oom_kill).",
     JOBCG_METRIC_OOM_KILL, RAW},
    {"jobcg_memory_high_events_total", "counter",
     "Times the cgroup was throttled over memory.high (memory.events high).",
     JOBCG_METRIC_MEM_HIGH_EVENTS, RAW},
    {"jobcg_pids", "gauge", "Processes and threads in the cgroup (pids.current).",
     JOBCG_METRIC_PIDS_CURRENT, RAW},
    {"jobcg_pids_limit", "gauge", "Limit on processes and threads (pids.max; +Inf when none).",
     JOBCG_METRIC_PIDS_MAX, LIMIT},
    {"jobcg_io_read_bytes_total", "counter", "Bytes read from block devices (io.stat rbytes).",
     JOBCG_METRIC_IO_READ_BYTES, RAW},
    {"jobcg_io_write_bytes_total", "counter", "Bytes written to block devices (io.stat wbytes).",
     JOBCG_METRIC_IO_WRITE_BYTES, RAW},
};

static void put_value(struct out *o, uint64_t v, enum unit u)
{
	char b[48];

	if (u == LIMIT && v == UINT64_MAX)
		put(o, "+Inf");
	else if (u == USEC) {
		snprintf(b, sizeof(b), "%llu.%06llu", (unsigned long long)(v / 1000000),
			 (unsigned long long)(v % 1000000));
		put(o, b);
	} else
		put_u64(o, v);
}

static void gpu_labels(struct fmt *f, const struct jobcg_metrics_gpu *g)
{
	char idx[16];

	snprintf(idx, sizeof(idx), "%u", g->index);
	put_n(&f->o, "{", 1);
	put_label(&f->o, "gpu", idx, true);
	put_label(&f->o, "uuid", g->uuid, false);
	put_label(&f->o, "pci_bus_id", g->pci_bus_id, false);
	put_label(&f->o, "device", g->device, false);
}

static void simple(struct out *o, const char *name, const char *type, const char *help, uint64_t v)
{
	family(o, name, type, help);
	put(o, name);
	put_n(o, " ", 1);
	put_u64(o, v);
	put_n(o, "\n", 1);
}

JOBCG_EXPORT int jobcg_metrics_format(const struct jobcg_metrics *m,
				      const struct jobcg_metrics_format_opts *opts, char **ret,
				      size_t *ret_len)
{
	return_if_null(m);
	return_if_null(ret);
	static const struct jobcg_metrics_format_opts none = {.size = sizeof(none)};
	struct jobcg_metrics_format_opts o = none;
	struct fmt f = {.opts = &o};
	char b[64];

	if (opts)
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));

	for (size_t k = 0; k < ELEMENTSOF(cg_families); k++) {
		const struct cg_family *cf = &cg_families[k];
		bool any = false;

		for (size_t i = 0; i < m->n_cgs; i++) {
			const struct jobcg_metrics_cg *cg = &m->cgs[i];

			if (!jobcg_metrics_cg_has(cg, cf->item))
				continue;
			if (!any)
				family(&f.o, cf->name, cf->type, cf->help);
			any = true;
			put(&f.o, cf->name);
			cg_labels(&f, cg);
			put_value(&f.o, cg->value[cf->item], cf->unit);
			put_n(&f.o, "\n", 1);
		}
	}
	if (m->n_gpus)
		family(
		    &f.o, "jobcg_gpu_info", "gauge",
		    "A GPU and a job or step whose processes may open it, from the device programs "
		    "the kernel runs (job=\"\": no job may).");
	for (size_t g = 0; g < m->n_gpus; g++) {
		const struct jobcg_metrics_gpu *gpu = &m->gpus[g];

		for (size_t i = 0; i < m->n_cgs; i++) {
			const struct jobcg_metrics_cg *cg = &m->cgs[i];

			if (!jobcg_gres_set_has(&cg->gpus, gpu->pos))
				continue;
			put(&f.o, "jobcg_gpu_info");
			gpu_labels(&f, gpu);
			snprintf(b, sizeof(b), "%u", cg->job);
			put_label(&f.o, "job", b, false);
			put_label(&f.o, "step", cg->step, false);
			put_user(&f, cg);
			put(&f.o, "} 1\n");
		}
		if (!gpu->held) {
			put(&f.o, "jobcg_gpu_info");
			gpu_labels(&f, gpu);
			put(&f.o, ",job=\"\",step=\"\",user=\"\"} 1\n");
		}
	}
	if (m->n_resvs) {
		family(&f.o, "jobcg_reservation_info", "gauge",
		       "A reservation and what it holds (jobcg resv).");
		for (size_t i = 0; i < m->n_resvs; i++) {
			const struct jobcg_metrics_resv *r = &m->resvs[i];

			put(&f.o, "jobcg_reservation_info{");
			put_label(&f.o, "reservation", r->name, true);
			put_label(&f.o, "devices", r->devices, false);
			put_label(&f.o, "cpus", r->cpus, false);
			put_label(&f.o, "isolated", r->isolated ? "1" : "0", false);
			put(&f.o, "} 1\n");
		}
		family(&f.o, "jobcg_reservation_valid", "gauge",
		       "1 when the kernel holds the reservation as made (VALID), 0 when DEGRADED.");
		for (size_t i = 0; i < m->n_resvs; i++) {
			put(&f.o, "jobcg_reservation_valid{");
			put_label(&f.o, "reservation", m->resvs[i].name, true);
			put(&f.o, "} ");
			put_u64(&f.o, m->resvs[i].valid);
			put_n(&f.o, "\n", 1);
		}
		family(&f.o, "jobcg_reservation_jobs", "gauge", "Jobs inside a reservation.");
		for (size_t i = 0; i < m->n_resvs; i++) {
			put(&f.o, "jobcg_reservation_jobs{");
			put_label(&f.o, "reservation", m->resvs[i].name, true);
			put(&f.o, "} ");
			put_u64(&f.o, m->resvs[i].jobs);
			put_n(&f.o, "\n", 1);
		}
		family(&f.o, "jobcg_reservation_memory_bytes", "gauge",
		       "Memory a reservation protects (memory.min), 0 for none.");
		for (size_t i = 0; i < m->n_resvs; i++) {
			put(&f.o, "jobcg_reservation_memory_bytes{");
			put_label(&f.o, "reservation", m->resvs[i].name, true);
			put(&f.o, "} ");
			put_u64(&f.o, m->resvs[i].mem_bytes);
			put_n(&f.o, "\n", 1);
		}
	}
	simple(&f.o, "jobcg_jobs", "gauge", "Jobs in the tree.", m->n_jobs);
	simple(&f.o, "jobcg_steps", "gauge", "Steps in the tree.", m->n_steps);
	simple(&f.o, "jobcg_gpus", "gauge", "GPUs configured in gres.conf.", m->n_gpus);
	simple(&f.o, "jobcg_gpus_free", "gauge",
	       "Configured GPUs recorded on no job and no reservation.", m->gpus_free);
	simple(&f.o, "jobcg_devices_constrained", "gauge",
	       "1 when devices are constrained (ConstrainDevices=yes and devices in gres.conf).",
	       m->constrain_devices);
	/* An alert's handle on a configuration pushed broken: the commands that clean up and these
	 * metrics go on, but nothing is made until it is fixed. */
	family(
	    &f.o, "jobcg_config_ok", "gauge",
	    "0 when jobcg read the file past an error: no job is made or constrained until it is "
	    "fixed (jobcg check names the line).");
	put(&f.o, "jobcg_config_ok{file=\"cgroup.conf\"} ");
	put_u64(&f.o, !m->cgroup_conf_error);
	put(&f.o, "\njobcg_config_ok{file=\"gres.conf\"} ");
	put_u64(&f.o, !m->gres_conf_error);
	put_n(&f.o, "\n", 1);
	family(&f.o, "jobcg_build_info", "gauge", "The jobcg version serving these metrics.");
	put(&f.o, "jobcg_build_info{");
	put_label(&f.o, "version", o.version ? o.version : JOBCG_VERSION, true);
	put(&f.o, "} 1\n");
	family(&f.o, "jobcg_device_mode_info", "gauge",
	       "How devices are enforced: node (one pinned program and its policy map), linear "
	       "(a program per cgroup), none (no program set up yet), off (not constrained).");
	put(&f.o, "jobcg_device_mode_info{");
	put_label(&f.o, "mode", m->device_mode ? m->device_mode : "off", true);
	put(&f.o, "} 1\n");
	if (m->have_reserved_cpus)
		simple(&f.o, "jobcg_reserved_cpus", "gauge",
		       "CPUs reserved for the system (SpecCPUs or CoreSpecCount).",
		       m->reserved_cpus);
	if (m->reserved_mem_bytes)
		simple(&f.o, "jobcg_reserved_memory_bytes", "gauge",
		       "Memory reserved for the system (MemSpecLimit).", m->reserved_mem_bytes);
	simple(&f.o, "jobcg_collect_errors_total", "counter",
	       "Files or programs that could not be read while collecting, since this process "
	       "started.",
	       o.errors_before + m->errors);
	family(&f.o, "jobcg_collect_duration_seconds", "gauge", "How long reading the node took.");
	put(&f.o, "jobcg_collect_duration_seconds ");
	put_value(&f.o, m->duration_usec, USEC);
	put_n(&f.o, "\n", 1);
	if (f.o.oom) {
		free(f.o.s);
		return -ENOMEM;
	}
	if (ret_len)
		*ret_len = f.o.len;
	*ret = f.o.s;
	return 0;
}
