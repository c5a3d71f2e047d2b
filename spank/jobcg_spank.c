/* jobcg_spank.so: a SPANK plugin that puts every step of every Slurm job into jobcg's cgroup tree
 * on its node (job_<id>/step_<sid>/user/task_<n>), with the step's CPUs, memory and GPUs, and
 * takes it out again: accounting record, devices revoked, cgroups removed, and the job with
 * its last step on the node. See docs/slurm.md.
 *
 * Hooks, all in slurmstepd (Slurm 22.05's order):
 *   init            (root, once per step)   job created if absent, the step begun, its watcher
 *                                           started (`jobcg step-watch`, detached)
 *   task_post_fork  (root, per task)        the task moved into task_<local id>
 *   task_init       (the task, as the user) its GPU variables renumbered as jobcg does
 *   task_exit       (root, per task)        after the last one: the step's cgroup killed
 *   exit            (root)                  the step ended: record, revoke, remove; then the
 *                                           job removed if no other step of it is left
 * No slurm_spank_job_epilog: with that symbol slurmd starts a slurmstepd for every job's
 * epilog, which cost far more than all of jobcg's work (docs/slurm.md). The watcher ends a
 * step whose slurmstepd was killed, which the epilog's job removal used to.
 * Any failure before a task runs returns an error: loaded as `required`, the step fails. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <slurm/spank.h>
#include <time.h>
#include <unistd.h>

#include "detach.h"
#include "gres_internal.h"
#include "jobcg-build.h"
#include "jobcg/acct.h"
#include "jobcg/acctlog.h"
#include "jobcg/adopt.h"
#include "jobcg/config.h"
#include "jobcg/context.h"
#include "jobcg/gres.h"
#include "jobcg/job.h"
#include "jobcg/jobgres.h"
#include "parse.h"
#include "jobcg/steplife.h"
#include "log.h"
#include "slurm_map.h"
#include "tree.h"
#include "util.h"

#pragma GCC visibility push(default)
SPANK_PLUGIN(jobcg, 1);
#pragma GCC visibility pop

#define KILL_TIMEOUT_MS 10000
/* How long a step waits for its watcher's word that it runs: only a broken one takes long. */
#define WATCH_READY_MS 10000
/* How long a step waits for another step's removal of its job before it makes the job again. */
#define JOB_RETRY_MS 1000
/* How long the extern step's task_post_fork looks for its sleep among slurmstepd's children. */
#define EXTERN_FIND_MS	    5000
#define EXTERN_CHILDREN_MAX 256

/* One slurmstepd serves one step: its state lives here from init to exit. */
static struct {
	struct jspank_args args;
	struct jobcg_config *conf;
	struct jobcg_ctx *ctx;
	uint32_t job; /* the job, once this step made it or found it: removed in exit if unused */
	bool begun;   /* life is a begun step */
	struct jobcg_step_life life;
	int *status; /* wait status per local task */
	unsigned exited;
	/* What task_init needs to follow Slurm's own per-task GPU binding (--gpu-bind). */
	struct jobcg_gres_node *gres_node;
	struct jobcg_gres_set step_set;
	char *slurm_step_gpus; /* the step's SLURM_STEP_GPUS, before Slurm narrows it per task */
	char *gpu_bind;	       /* jobcg's binding of the tasks, NULL when jobcg binds none */
	bool failed; /* init could not contain the step: every task fails before its exec */
	/* The extern step: slurmstepd's children when init ran, none of them its sleep. */
	struct jspank_child before[EXTERN_CHILDREN_MAX];
	size_t nbefore;
	bool have_before;
	char why[2560];	    /* and why, for slurmd's log and the task's stderr */
	bool recorded;	    /* the step's record is written: never a second one */
	uint64_t init_usec; /* when init began: a refused step's record starts then */
	bool args_bad;	    /* plugstack.conf's arguments unread: the conf dir is not known */
} st;

static void log_to_slurm(enum jobcg_log_level level, const char *msg, void *userdata)
{
	if (level <= JOBCG_LOG_ERR)
		slurm_error("jobcg: %s", msg);
	else if (level <= JOBCG_LOG_NOTICE)
		slurm_info("jobcg: %s", msg);
	else
		slurm_debug("jobcg: %s", msg);
}

/* Fail the step, with why in slurmd's log. */
static int fail(uint32_t job, const char *step, int r, const char *what)
{
	char buf[2048];

	snprintf(st.why, sizeof(st.why), "jobcg: job %u step %s: %s: %s", job, step ? step : "?",
		 what, jobcg_error_format(r, buf, sizeof(buf)));
	slurm_error("%s", st.why);
	return -1;
}

/*
 * Slurm's name for this node: two slurmd on one host are two nodes with two jobcg trees, and
 * gres.conf's NodeName= lines are Slurm's names. slurmstepd puts it in its own environment at
 * its start (slurmd in a prolog's). Never the job's environment (spank_getenv): until the task's
 * exec that is srun's, whose SLURMD_NODENAME is a user's, or the batch node's when a batch
 * script's srun starts a step on another node; nor its node lists, which a user's srun passes
 * on too. Without it, the host's name, Slurm's default node name.
 */
static void node_name(char *buf, size_t size)
{
	const char *e = getenv("SLURMD_NODENAME");

	if (e && *e && strlen(e) < size) {
		strcpy(buf, e);
		return;
	}
	if (gethostname(buf, size) < 0)
		buf[0] = 0;
	buf[size - 1] = 0;
}

static int open_ctx(char *node, size_t node_size)
{
	_cleanup_free_ char *dir = NULL;
	int r;

	node_name(node, node_size);
	if (st.args.conf && !(dir = jspank_expand(st.args.conf, node)))
		return error_set(-EINVAL, "conf=%s: bad %% sequence (only %%n and %%%% are known)",
				 st.args.conf);
	/* A missing directory would load the defaults, another tree than the site meant. */
	if (dir && access(dir, F_OK) < 0)
		return error_set(-errno, "conf=%s: %s: %s", st.args.conf, dir, strerror(errno));
	/* The environment is slurmd's: jobcg's own JOBCG_* overrides have no say here. */
	r = jobcg_config_load(dir ? dir : "/etc/jobcg", node,
			      JOBCG_CONFIG_NO_ENV | JOBCG_CONFIG_NO_ENTRIES, &st.conf);
	if (r < 0)
		return r;
	/* The tree is `jobcg init`'s (at boot, before slurmd): a step never makes it. */
	return jobcg_ctx_open(st.conf, JOBCG_CTX_NO_CREATE_ROOT, &st.ctx);
}

static void node_freep(struct jobcg_gres_node **n)
{
	jobcg_gres_node_free(*n);
}
static void config_freep(struct jobcg_config **c)
{
	jobcg_config_free(*c);
}

/* The step's GPUs in jobcg's terms ("gpu:0", "" for none), checked against Slurm's gres.conf. */
static int step_gpus(spank_t sp, const char *step, const char *node, char **ret)
{
	_cleanup_(node_freep) struct jobcg_gres_node *jn = NULL, *sn = NULL;
	_cleanup_(config_freep) struct jobcg_config *sconf = NULL;
	_cleanup_free_ char *jpath = NULL;
	const char *var = streq(step, "batch") || streq(step, "interactive") ? "SLURM_JOB_GPUS"
									     : "SLURM_STEP_GPUS";
	const char *spath = st.args.slurm_gres;
	char value[4096], found[PATH_MAX], sc[PATH_MAX];
	struct slurm_dirs dirs;
	int r;

	/* The extern step holds no GRES in Slurm; a step without the variable has no GPUs. */
	if (streq(step, "extern") || spank_getenv(sp, var, value, sizeof(value)) != ESPANK_SUCCESS)
		value[0] = 0;
	if (!*value)
		return (*ret = strdup("")) ? 0 : -ENOMEM;
	r = jobcg_gres_node_new(st.conf, &jn);
	if (r < 0)
		return r;
	/* Without the comparison a gres.conf of Slurm's in another order would hand the step
	 * another job's GPU: a file that cannot be found is an error, not a skipped check. The
	 * environment is slurmstepd's own (slurmd's), not the job's: its SLURM_CONF names the
	 * slurm.conf slurmd reads, and Slurm reads gres.conf beside it. */
	slurm_dirs_init(&dirs, getenv("SLURM_CONF"));
	if (!spath) {
		char where[PATH_MAX + 128];

		if (slurm_dirs_find(&dirs, "gres.conf", found) < 0)
			return error_set(-ENOENT,
					 "Slurm's gres.conf is not in %s: name it with "
					 "slurm_gres=PATH in plugstack.conf (slurm_gres=none skips "
					 "the comparison)",
					 slurm_dirs_describe(&dirs, where, sizeof(where)));
		spath = found;
	}
	if (!streq(spath, "none")) {
		if (access(spath, F_OK) < 0)
			return error_set(-ENOENT, "slurm_gres=%s: no such file", spath);
		r = jobcg_config_load_files(
		    NULL, spath, node,
		    JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV | JOBCG_CONFIG_NO_ENTRIES, &sconf);
		if (r < 0) {
			jobcg_error_prefix("Slurm's gres.conf (set slurm_gres=none to skip the "
					   "comparison)");
			return r;
		}
		/* Slurm numbers GPUs by slurm.conf's Gres= types, not gres.conf's line order. */
		r = slurm_conf_locate(&dirs, sc);
		if (r >= 0)
			r = slurm_gpu_node_new(sconf, spath, sc, node, &sn);
		if (r < 0)
			return r;
	}
	jpath = strdup_printf("%s/gres.conf", st.conf->config_dir ? st.conf->config_dir : "?");
	if (!jpath)
		return -ENOMEM;
	return jspank_gpus_map(jn, jpath, sn, spath, var, value, ret);
}

/*
 * The step's --gpu-bind in jobcg's terms (NULL: tasks not bound): Slurm only sets each task's
 * CUDA_VISIBLE_DEVICES from it, jobcg also narrows each task's cgroup to its GPUs. srun puts
 * the option in the step's environment as SLURM_GPU_BIND; SLURM_TRES_BIND's "gres/gpu:" part
 * says the same where only that is set.
 */
static int step_gpu_bind(spank_t sp, const char *step, char **ret)
{
	char bind[1024], gpus[4096];
	const char *b = bind;

	*ret = NULL;
	if (streq(step, "batch") || streq(step, "extern") || streq(step, "interactive") ||
	    spank_getenv(sp, "SLURM_STEP_GPUS", gpus, sizeof(gpus)) != ESPANK_SUCCESS || !*gpus)
		return 0;
	if (spank_getenv(sp, "SLURM_GPU_BIND", bind, sizeof(bind)) != ESPANK_SUCCESS) {
		if (spank_getenv(sp, "SLURM_TRES_BIND", bind, sizeof(bind)) != ESPANK_SUCCESS ||
		    !(b = jspank_tres_gpu_bind(bind)))
			return 0;
	}
	return jspank_gpu_bind(b, gpus, ret);
}

static int cpus_of(spank_t sp, spank_item_t item, const struct cputopo *t, char **ret)
{
	char *cores = NULL;

	*ret = NULL;
	if (spank_get_item(sp, item, &cores) != ESPANK_SUCCESS || !cores || !*cores)
		return 0; /* none given: no cpuset of its own */
	return cputopo_cores_to_cpus(t, cores, ret);
}

/*
 * Is jobcg's job @job the one this plugin made for Slurm's job of uid @uid? Only such a job is
 * adopted, and removed with its last step on the node: its slurm mark (JOBCG_JOB_SLURM) and
 * its owner ("UID:GID", as job creation writes it) tell. -ENOENT when there is no such job,
 * -EEXIST naming a job jobcg made otherwise (`jobcg alloc`, by hand, an older jobcg) or a
 * stale one of another user: the step runs in neither, and takes neither away.
 */
static int job_is_slurms(uint32_t job, uid_t uid)
{
	_cleanup_free_ char *owner = NULL, *mark = NULL;
	uint64_t u = 0;
	const char *end;
	int r = jobcg_job_xattr_get(st.ctx, job, "slurm", &mark);

	if (r == -EOPNOTSUPP) { /* no xattrs here: no mark, no owner to compare */
		_cleanup_free_ char *dir = tree_job_dir(st.ctx, job);

		if (!dir)
			return -ENOMEM;
		return access(dir, F_OK) == 0 ? 0 : error_set(-ENOENT, "no job %u", job);
	}
	if (r == -ENODATA) {
		/* Another step of the job may be making it: the mark is written under the node
		 * lock, before the job is complete. Under the lock the answer is final. */
		if ((r = jobcg_ctx_lock(st.ctx)) < 0)
			return r;
		free(mark);
		mark = NULL;
		r = jobcg_job_xattr_get(st.ctx, job, "slurm", &mark);
		jobcg_ctx_unlock(st.ctx);
		if (r == -ENODATA)
			return error_set(
			    -EEXIST,
			    "jobcg's job %u was not made by jobcg_spank.so for Slurm's "
			    "job %u (a 'jobcg alloc', or one made by hand or by an older "
			    "jobcg): no Slurm step runs in it or removes it; 'jobcg release "
			    "%u' if it is stale",
			    job, job, job);
	}
	if (r == -ENOENT)
		return error_set(-ENOENT, "no job %u", job);
	if (r < 0)
		return r;
	r = jobcg_job_xattr_get(st.ctx, job, "owner", &owner);
	if (r < 0)
		return r;
	if (parse_u64_prefix(owner, UINT32_MAX, &u, &end) < 0 || *end != ':')
		return error_set(-EBADMSG, "jobcg's job %u: owner '%s' is not UID:GID", job, owner);
	if ((uid_t)u != uid)
		return error_set(-EEXIST,
				 "jobcg's job %u belongs to uid %u, Slurm's to uid %u: a stale "
				 "job of that id is left on this node ('jobcg release %u')",
				 job, (unsigned)u, (unsigned)uid, job);
	return 0;
}

/*
 * The job on this node: made by its first step here, with Slurm's allocation on this node.
 * Looked up first: every later step of the job (batch, extern and each srun start together or
 * one after another) finds it with one read. Called under the node lock (step_begin()).
 */
static int job_ensure(spank_t sp, uint32_t job, const char *cpus, uint64_t mem_mb)
{
	struct jobcg_limits l = {.cpus = cpus, .mem_bytes = mem_mb << 20, .have_owner = true};
	int r;

	if (spank_get_item(sp, S_JOB_UID, &l.uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &l.gid) != ESPANK_SUCCESS)
		return error_set(-EIO, "Slurm did not give the job's uid and gid");
	r = job_is_slurms(job, l.uid);
	if (r != -ENOENT)
		return r;
	r = jobcg_job_create(st.ctx, job, &l, JOBCG_JOB_SLURM, NULL);
	/* Made by another step of this job meanwhile, or stale. */
	return r == -EEXIST ? job_is_slurms(job, l.uid) : r;
}

static uint64_t realtime_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static const char *watch_exe(void)
{
	return st.args.jobcg ? st.args.jobcg : JOBCG_BINDIR "/jobcg";
}

/*
 * The backstop for a slurmstepd that dies without ending its step (kill -9, a crash): linuxproc
 * then loses the step's processes and nothing of Slurm's ends them. `jobcg step-watch`, detached
 * from slurmstepd (not its descendant: linuxproc neither waits for it nor kills it), waits on
 * slurmstepd's exit; on a normal end it finds the step removed and exits at once, otherwise it
 * ends the step as lost (NODE_FAIL) and removes the job if no step of it is left; a job this
 * slurmstepd made, or whose last step it removed, and then died with goes too. Started before
 * anything is made: there is no moment where a killed slurmstepd leaves a job holding its GPUs
 * with nobody to remove it. It runs in
 * slurmstepd's cgroup, which no job's cgroup.kill reaches, not in the tree's system/ leaf,
 * whose processes tell a systemd scope's keeper is alive.
 */
static int watch_start(const char *node, uint32_t job, const char *step, int *ret_fd)
{
	_cleanup_free_ char *me = tree_runner_self(), *sdir = tree_step_dir(st.ctx, job, step),
			    *target = strdup_printf("%u.%s", job, step);
	const char *exe = watch_exe();
	const char *dir = st.conf->config_dir ? st.conf->config_dir : "/etc/jobcg";
	/* slurmstepd's environment is the job's: none of it reaches jobcg. */
	char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	char *argv[] = {(char *)exe,
			(char *)"--config-dir",
			(char *)dir,
			(char *)"step-watch",
			(char *)"--ready-fd",
			(char *)"3",
			(char *)"--node",
			(char *)node,
			(char *)"--step-dir",
			sdir,
			(char *)"--remove-idle-job",
			target,
			me,
			NULL};

	if (!me || !sdir || !target)
		return -ENOMEM;
	/* Its word that it is watching slurmstepd (watch_ready) comes while the step is made: a
	 * watcher that exits at once (a jobcg too old for step-watch, jobcg= naming another
	 * program) would leave the step unguarded. */
	return jspank_spawn_start(argv, envp, false, ret_fd);
}

/* The node's cores, through a cache beside the node lock (its directory checked as the lock's). */
static int topology_load(struct cputopo *ret)
{
	_cleanup_free_ char *cache = NULL;

	if (ctx_state_dir_ready(st.ctx) < 0 ||
	    !(cache = ctx_state_file(st.ctx, CTX_CPU_TOPOLOGY_FILE)))
		return cputopo_load("/sys/devices/system/cpu", ret);
	return cputopo_load_cached("/sys/devices/system/cpu", cache,
				   "/proc/sys/kernel/random/boot_id", ret);
}

static int step_begin(spank_t sp)
{
	struct cputopo topo = {};
	_cleanup_free_ char *job_cpus = NULL, *step_cpus = NULL, *gpus = NULL, *bind = NULL;
	uint32_t job = 0, step_id = 0, ntasks = 0;
	uint64_t job_mem = 0, step_mem = 0;
	char step[JOBCG_STEP_ID_MAX] = "?", node[256];
	struct jobcg_step_limits sl = {};
	struct jobcg_target tj = {.task = JOBCG_TASK_ALL};
	struct jobcg_step_gres *g = NULL;
	const char *what = NULL;
	/* Where the step's start goes, for slurmd's log: microseconds per phase. */
	uint64_t t_begin = monotonic_us(), t_conf = 0, t_map = 0, t_job = 0, t_step = 0,
		 t_watch = 0, t_grant = 0, t0;
	_cleanup_close_ int watch_fd = -EBADF;
	int r;

	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS) {
		return fail(job, NULL,
			    error_set(-EIO, "Slurm did not give job id, step id and task count"),
			    "starting");
	}
	if ((r = jspank_step_name(step_id, step)) < 0)
		return fail(job, NULL, r, "naming the step");
	if ((r = open_ctx(node, sizeof(node))) < 0)
		return fail(job, step, r, "loading jobcg's configuration");
	t_conf = monotonic_us() - t_begin;
	t0 = monotonic_us();
	/* As Slurm's task/cgroup: the allocation's memory and cores are limits only where
	 * jobcg's cgroup.conf constrains them (the topology is not even read otherwise). */
	if (st.conf->cgroup.constrain_ram_space) {
		(void)spank_get_item(sp, S_JOB_ALLOC_MEM, &job_mem);
		(void)spank_get_item(sp, S_STEP_ALLOC_MEM, &step_mem);
	}
	if (st.conf->cgroup.constrain_cores) {
		r = topology_load(&topo);
		if (r >= 0)
			r = cpus_of(sp, S_JOB_ALLOC_CORES, &topo, &job_cpus);
		if (r >= 0)
			r = cpus_of(sp, S_STEP_ALLOC_CORES, &topo, &step_cpus);
		cputopo_done(&topo);
		if (r < 0)
			return fail(job, step, r, "mapping Slurm's cores to this node's CPUs");
	}
	if ((r = step_gpus(sp, step, node, &gpus)) < 0)
		return fail(job, step, r, "mapping Slurm's GPUs onto jobcg's gres.conf");
	if (*gpus && (r = step_gpu_bind(sp, step, &bind)) < 0)
		return fail(job, step, r, "binding the tasks to their GPUs (--gpu-bind)");
	sl.cpus = step_cpus && !(job_cpus && streq(step_cpus, job_cpus)) ? step_cpus : NULL;
	/* The step's own memory.max even when it is the job's: its OOM kills are its own. */
	sl.mem_bytes = step_mem << 20;
	t_map = monotonic_us() - t0;
	/* Before the job and the step exist: from here on a killed slurmstepd leaves nothing
	 * behind. */
	t_watch = monotonic_us();
	r = watch_start(node, job, step, &watch_fd);
	t_watch = monotonic_us() - t_watch;
	if (r < 0)
		return fail(
		    job, step, r,
		    "starting its watcher (plugstack.conf's jobcg= names the jobcg to run)");
	/*
	 * The last step of the job on this node removes the job when it ends (exit), under the
	 * node lock, and only while no step is in it: a step created first keeps the job; one
	 * that comes after finds no job (-ENOENT) and makes it again, or finds it being removed
	 * (-ESHUTDOWN) for a moment and tries again.
	 */
	for (unsigned waited = 0;; waited += 10) {
		what = "creating the job";
		t0 = monotonic_us();
		/* The job, its GPUs and the step in one hold of the node lock (each takes it
		 * anyway): `jobcg gc`, which removes a job of Slurm's that no step holds, never
		 * sees this one between its creation and its step's. */
		r = jobcg_ctx_lock(st.ctx);
		if (r >= 0)
			r = job_ensure(sp, job, job_cpus, job_mem);
		if (r >= 0) {
			st.job = job;
			/* Slurm allocated them: the job holds them from now on, whichever step
			 * named them first. */
			what = "giving the job Slurm's GPUs";
			r = *gpus ? jobcg_job_gres_claim(st.ctx, job, gpus) : 0;
		}
		t_job += monotonic_us() - t0;
		if (r >= 0) {
			what = "creating the step";
			t0 = monotonic_us();
			/* Slurm's step ids: unique in the job, but two sruns' steps may
			 * reach this node in either order. */
			r = jobcg_step_create_limited(st.ctx, job, step, JOBCG_STEP_ID_SCHEDULED,
						      &sl, st.life.step);
			t_step += monotonic_us() - t0;
		}
		jobcg_ctx_unlock(st.ctx);
		if ((r != -ENOENT && r != -ESHUTDOWN) || waited >= JOB_RETRY_MS)
			break;
		(void)usleep(10 * 1000);
	}
	if (r < 0)
		return fail(job, step, r, what);
	st.life.job = job;
	st.life.ntasks = ntasks ? ntasks : 1;
	/* Granted before any task exists: no task ever runs with more than its share. */
	t0 = monotonic_us();
	/* The extern step (and the ssh logins `jobcg adopt` puts in it) shares the job's
	 * devices and follows the job's later claims: Slurm bounds it by the job's GPUs only, so
	 * a user logged in to their job's node can watch its GPUs with nvidia-smi. */
	if (streq(step, "extern"))
		r = jobcg_step_gres_setup(st.ctx, job, step, NULL, NULL, st.life.ntasks, &g);
	else
		r = jobcg_step_gres_setup_exact(st.ctx, job, step, gpus, bind, st.life.ntasks, &g);
	t_grant = monotonic_us() - t0;
	if (r >= 0) {
		/* By now the watcher has had the step's making to start in. */
		what = "starting its watcher (plugstack.conf's jobcg= names the jobcg to run)";
		t0 = monotonic_us();
		r = jspank_spawn_wait(watch_fd, watch_exe(), WATCH_READY_MS);
		t_watch += monotonic_us() - t0;
	} else
		what = "granting the step its devices";
	if (r < 0) {
		(void)fail(job, step, r, what);
		jobcg_step_gres_free(g);
		(void)jobcg_step_remove(st.ctx, job, step, 0);
		return -1;
	}
	st.life.gres = g;
	if (*gpus) {
		char v[4096];

		/* Best effort: without it task_init keeps jobcg's per-step variables. */
		if (jobcg_gres_node_new(st.conf, &st.gres_node) == 0 &&
		    jobcg_gres_set_parse(st.gres_node, gpus, &st.step_set) == 0 &&
		    spank_getenv(sp, "SLURM_STEP_GPUS", v, sizeof(v)) == ESPANK_SUCCESS)
			st.slurm_step_gpus = strdup(v);
		st.gpu_bind = TAKE_PTR(bind);
	}
	st.life.start_usec = realtime_us();
	tj.job = job;
	(void)jobcg_acct_read_file(st.ctx, &tj, "memory.events", &st.life.job_before);
	st.status = calloc(st.life.ntasks, sizeof(int));
	if (!st.status) {
		(void)jobcg_step_end(st.ctx, &st.life, NULL, 0, NULL);
		st.recorded = true;
		return fail(job, step, error_set(-ENOMEM, "out of memory"), "starting");
	}
	st.begun = true;
	/* What the step's start costs slurmstepd, for slurmd's log (docs/slurm.md). */
	slurm_verbose("jobcg: job %u step %s begun on %s: cpus %s, mem %" PRIu64
		      "M, devices '%s', gpu-bind %s, in %" PRIu64 " us (configuration %" PRIu64
		      ", Slurm's allocation mapped %" PRIu64 ", job %" PRIu64 ", step %" PRIu64
		      ", watcher %" PRIu64 ", grants %" PRIu64 " us)",
		      job, step, node, step_cpus ? step_cpus : "(job's)", step_mem, gpus,
		      st.gpu_bind ? st.gpu_bind : "none", monotonic_us() - t_begin, t_conf, t_map,
		      t_job, t_step, t_watch, t_grant);
	return 0;
}

/* Set each "NAME=VALUE" of @env in the task's environment; -1 with st.why set on failure. */
static int set_env(spank_t sp, int task, char **env)
{
	for (size_t i = 0; env[i]; i++) {
		_cleanup_free_ char *name = strndup(env[i], strcspn(env[i], "="));
		const char *eq = strchr(env[i], '=');

		if (!name || !eq || spank_setenv(sp, name, eq + 1, 1) != ESPANK_SUCCESS) {
			snprintf(st.why, sizeof(st.why),
				 "jobcg: job %u step %s task %d: cannot set %s", st.life.job,
				 st.life.step, task, env[i]);
			slurm_error("%s", st.why);
			return -1;
		}
	}
	return 0;
}

/*
 * Slurm computes each task's GPU binding (srun --gpu-bind) in the task itself, after
 * task_post_fork: SLURM_STEP_GPUS then names only the task's GPUs. Where jobcg bound the tasks
 * too (SLURM_GPU_BIND in the step's environment), both must agree, or the task fails. Where it
 * did not, the task's cgroup has all of the step's GPUs and only its variables can follow
 * Slurm's binding: *ret gets CUDA_VISIBLE_DEVICES and the like for the task's GPUs numbered
 * within the step's (NULL when Slurm did not bind the task). -1 with st.why set on failure.
 */
static int slurm_bound_env(spank_t sp, int task, char ***ret)
{
	_cleanup_free_ char *mapped = NULL, *jpath = NULL;
	struct jobcg_gres_set tset = {}, jset = {};
	struct jobcg_gres_env_in in = {};
	char v[4096];
	char **env = NULL;
	size_t n = 0;
	int e;

	*ret = NULL;
	if (!st.gres_node || !st.slurm_step_gpus ||
	    spank_getenv(sp, "SLURM_STEP_GPUS", v, sizeof(v)) != ESPANK_SUCCESS ||
	    streq(v, st.slurm_step_gpus))
		return 0;
	jpath = strdup_printf("%s/gres.conf", st.conf->config_dir ? st.conf->config_dir : "?");
	e = jpath ? 0 : error_set(-ENOMEM, "out of memory");
	if (e == 0)
		e = jspank_gpus_map(st.gres_node, jpath, NULL, NULL, "the task's SLURM_STEP_GPUS",
				    v, &mapped);
	if (e == 0)
		e = jobcg_gres_set_parse(st.gres_node, mapped, &tset);
	if (e < 0)
		return fail(st.life.job, st.life.step, e,
			    "following Slurm's GPU binding of a task");
	if (st.gpu_bind) {
		struct jobcg_gpu_bind b = {};
		int r = jobcg_gpu_bind_parse(st.gpu_bind, &b);

		if (r >= 0)
			r = jobcg_gpu_bind_task(st.gres_node, &b, &st.step_set, (unsigned)task,
						st.life.ntasks, &jset);
		jobcg_gpu_bind_done(&b);
		if (r >= 0 && memcmp(&jset, &tset, sizeof(jset)) != 0)
			r = error_set(-EINVAL,
				      "task %d: Slurm bound it to GPU(s) %s (SLURM_STEP_GPUS), "
				      "jobcg to others (--gpu-bind %s)",
				      task, v, st.gpu_bind);
		return r < 0 ? fail(st.life.job, st.life.step, r, "binding a task to its GPUs") : 0;
	}
	in.job = &st.step_set;
	in.step = &st.step_set;
	in.task = &tset;
	in.constrained = true;
	in.visible = &st.step_set;
	if ((e = jobcg_gres_env(st.gres_node, &in, &env)) < 0)
		return fail(st.life.job, st.life.step, e,
			    "following Slurm's GPU binding of a task");
	/* Only the runtime's variables: JOBCG_JOB_GPUS and JOBCG_STEP_GPUS stay jobcg's. */
	for (size_t i = 0; env[i]; i++) {
		if (startswith(env[i], "JOBCG_"))
			free(env[i]);
		else
			env[n++] = env[i];
	}
	env[n] = NULL;
	*ret = env;
	return 0;
}

/*
 * The processes the calling thread forked, with their start times. Slurm 22.05's slurmstepd
 * forks the extern step's sleep and calls task_post_fork from the same thread
 * (_spawn_job_container), so that thread's children file names it; where the kernel has no
 * such file (CONFIG_PROC_CHILDREN), every process whose parent is slurmstepd.
 */
static int children_now(struct jspank_child *c, size_t max, size_t *ret_n)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ pid_t *pids = calloc(max, sizeof(*pids));
	size_t n = 0, m = 0;
	int r;

	if (!pids)
		return -ENOMEM;
	r = read_full_file_at(AT_FDCWD, "/proc/thread-self/children", 1 << 16, &text, NULL);
	if (r >= 0) {
		if ((r = jspank_children_parse(text, pids, max, &n)) < 0)
			return r;
	} else if (r == -ENOENT) {
		DIR *d = opendir("/proc");
		struct dirent *de;

		if (!d)
			return error_set(negative_errno(), "/proc: %s", strerror(errno));
		while ((de = readdir(d))) {
			_cleanup_free_ char *stat = NULL;
			unsigned long long start;
			char path[64];
			uint64_t pid;
			pid_t ppid;

			if (parse_u64(de->d_name, INT32_MAX, &pid) < 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
			if (read_full_file_at(AT_FDCWD, path, 4096, &stat, NULL) < 0 ||
			    jspank_stat_parse(stat, &ppid, &start) < 0 || ppid != getpid())
				continue;
			if (n == max) {
				closedir(d);
				return error_set(-E2BIG, "slurmstepd has more than %zu children",
						 max);
			}
			pids[n++] = (pid_t)pid;
		}
		closedir(d);
	} else
		return error_set(r, "/proc/thread-self/children: %s", strerror(-r));
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *stat = NULL;
		char path[64];
		pid_t ppid;

		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pids[i]);
		/* Gone meanwhile: not a process to place. */
		if (read_full_file_at(AT_FDCWD, path, 4096, &stat, NULL) < 0 ||
		    jspank_stat_parse(stat, &ppid, &c[m].start) < 0)
			continue;
		c[m++].pid = pids[i];
	}
	*ret_n = m;
	return 0;
}

static bool child_was_there(const struct jspank_child *c)
{
	for (size_t i = 0; i < st.nbefore; i++)
		if (st.before[i].pid == c->pid && st.before[i].start == c->start)
			return true;
	return false;
}

static bool runs_extern_sleep(pid_t pid)
{
	_cleanup_free_ char *cmd = NULL;
	char path[64];
	size_t len = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	return read_full_file_at(AT_FDCWD, path, 4096, &cmd, &len) >= 0 &&
	       jspank_is_extern_sleep(cmd, len);
}

/*
 * The extern step's sleep: Slurm gives task_post_fork neither its pid nor a task (S_TASK_PID
 * and S_TASK_ID fail; slurmstepd keeps the pid in its own job->pgid, which SPANK does not
 * show). It is the child slurmstepd forked since init that is in no cgroup of jobcg's tree
 * yet. Where another plugin left a child of its own meanwhile, the one that runs Slurm's
 * `sleep 100000000` (a child not yet through its exec is waited for). Neither found: an
 * error, never a guess.
 */
static int extern_sleeper(pid_t *ret)
{
	_cleanup_free_ struct jspank_child *now = calloc(EXTERN_CHILDREN_MAX, sizeof(*now));
	uint64_t deadline = monotonic_us() + EXTERN_FIND_MS * 1000ull;
	size_t n, ncand, nsleep;
	pid_t cand = 0, sleeper = 0;
	int r;

	if (!now)
		return -ENOMEM;
	for (;;) {
		if ((r = children_now(now, EXTERN_CHILDREN_MAX, &n)) < 0)
			return r;
		ncand = nsleep = 0;
		for (size_t i = 0; i < n; i++) {
			if (st.have_before && child_was_there(&now[i]))
				continue;
			/* Another step's task, or a login adopted meanwhile, is placed already. */
			if (st.ctx && jobcg_pid_job(st.ctx, now[i].pid, NULL, NULL) != 0)
				continue;
			ncand++;
			cand = now[i].pid;
			if (runs_extern_sleep(now[i].pid)) {
				nsleep++;
				sleeper = now[i].pid;
			}
		}
		if (ncand == 1 || nsleep == 1) {
			*ret = ncand == 1 ? cand : sleeper;
			return 0;
		}
		if (ncand == 0)
			return error_set(-ESRCH,
					 "slurmstepd forked no process since the step's init that "
					 "is outside jobcg's tree: its sleep is not to be found");
		if (monotonic_us() >= deadline)
			return error_set(-ENOTUNIQ,
					 "slurmstepd forked %zu processes since the step's init, "
					 "%zu of them running 'sleep 100000000': which one is the "
					 "step's is not known",
					 ncand, nsleep);
		(void)usleep(10 * 1000);
	}
}

/*
 * Put the extern step's sleep (PrologFlags=Contain) where `jobcg adopt` puts the step's logins:
 * the step's user/task_special. Not placed, it would outlive a killed slurmstepd, out of the
 * reach of the step's removal: a sleep found but not moved is killed (the extern step then
 * ends, and logins of the job are refused), one not found is reported.
 */
static int extern_place(spank_t sp)
{
	struct jobcg_target t = {.job = st.life.job, .task = JOBCG_TASK_SPECIAL};
	_cleanup_free_ char *want = NULL, *cg = NULL;
	pid_t pid = 0;
	int r;

	/* A Slurm that gives it (none before 23.02 does) is believed. */
	if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || pid <= 0) {
		if ((r = extern_sleeper(&pid)) < 0)
			return fail(st.life.job, st.life.step, r,
				    "finding the extern step's sleep");
	}
	memcpy(t.step, st.life.step, sizeof(t.step));
	r = jobcg_task_add_pid(st.ctx, st.life.job, st.life.step, JOBCG_TASK_SPECIAL, pid);
	/* Read back: in the step's leaf, not moved away again at once. */
	if (r >= 0 && (r = jobcg_target_path(st.ctx, &t, &want)) >= 0 &&
	    (r = jobcg_pid_job(st.ctx, pid, NULL, &cg)) >= 0 && !streq(cg, want))
		r = error_set(-EXDEV, "pid %d is in %s right after being moved into %s", (int)pid,
			      cg, want);
	if (r < 0) {
		(void)kill(pid, SIGKILL);
		return fail(st.life.job, st.life.step, r,
			    "moving the extern step's sleep into its cgroup (killed)");
	}
	slurm_verbose("jobcg: job %u step extern: its sleep (pid %d) moved into %s", st.life.job,
		      (int)pid, want);
	return 0;
}

/*
 * What locates the record of a step refused because jobcg's configuration did not load: the
 * same files loaded again as jobcg's cleanup commands load them, past errors in keys that
 * locate nothing (JOBCG_CONFIG_TOLERATE_*), for StateDir and AccountingSync only (no context
 * is opened from it). Nothing is guessed: a bad plugstack.conf argument may be a misspelled
 * conf=, and a record in a log the site never reads is worse than none with slurmd's log
 * saying why. -errno with the error record set when the log cannot be located.
 */
static int refused_config(struct jobcg_config **ret)
{
	_cleanup_free_ char *dir = NULL;
	char node[256];

	if (st.args_bad)
		return error_set(-EINVAL, "plugstack.conf's arguments, which name jobcg's "
					  "configuration, could not be read");
	node_name(node, sizeof(node));
	if (st.args.conf && !(dir = jspank_expand(st.args.conf, node)))
		return error_set(-EINVAL, "conf=%s: bad %% sequence", st.args.conf);
	if (dir && access(dir, F_OK) < 0)
		return error_set(-errno, "conf=%s: %s: %s", st.args.conf, dir, strerror(errno));
	return jobcg_config_load(dir ? dir : "/etc/jobcg", node,
				 JOBCG_CONFIG_NO_ENV | JOBCG_CONFIG_NO_ENTRIES |
				     JOBCG_CONFIG_TOLERATE_CGROUP | JOBCG_CONFIG_TOLERATE_GRES,
				 ret);
}

/*
 * The record of a step init refused (st.failed): FAILED, exit code 1, as sacct shows such a
 * step (each task exits 1 in task_init, before its exec), the reason with it; no usage, none
 * was read. A step refused because jobcg's configuration does not load is recorded in the
 * log that configuration's StateDir names, where it can still be read (refused_config());
 * where not, slurmd's log says that the step has no record and why.
 */
static void refused_record(spank_t sp)
{
	struct jobcg_acct_record rec = {
	    .kind = JOBCG_ACCT_STEP,
	    .state = JOBCG_ACCT_FAILED,
	    .exit_code = 1,
	    .unavailable = JOBCG_ACCTREC_NO_CPU | JOBCG_ACCTREC_NO_MEM_PEAK | JOBCG_ACCTREC_NO_OOM,
	    .reason = st.why};
	_cleanup_free_ char *path = NULL, *job_id = NULL;
	_cleanup_(config_freep) struct jobcg_config *tolerant = NULL;
	const struct jobcg_config *conf = st.conf;
	char step[JOBCG_STEP_ID_MAX];
	uint32_t job = 0, step_id = 0, ntasks = 0;
	int r;

	if (st.recorded || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
	    jspank_step_name(step_id, step) < 0)
		return;
	st.recorded = true;
	if (!conf) {
		if ((r = refused_config(&tolerant)) < 0) {
			char buf[2048];

			slurm_error("jobcg: job %u step %s: no FAILED record of it: jobcg's "
				    "accounting log cannot be located: %s",
				    job, step, jobcg_error_format(r, buf, sizeof(buf)));
			return;
		}
		conf = tolerant;
	}
	(void)spank_get_item(sp, S_JOB_UID, &rec.uid);
	(void)spank_get_item(sp, S_JOB_GID, &rec.gid);
	if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks) == ESPANK_SUCCESS)
		rec.ntasks = ntasks;
	rec.start_usec = st.init_usec;
	rec.end_usec = realtime_us();
	if (!(job_id = strdup_printf("%u", job)))
		return;
	rec.job_id = job_id;
	rec.step_id = step;
	if ((r = jobcg_acctlog_path(conf, &path)) >= 0)
		r = jobcg_acctlog_write(
		    path, &rec,
		    conf->cgroup.acct_sync == JOBCG_ACCT_SYNC_STEP ? JOBCG_ACCTLOG_SYNC : 0);
	if (r < 0)
		slurm_error("jobcg: job %u step %s: its FAILED record not written: %s", job, step,
			    jobcg_error_message(r));
}

#pragma GCC visibility push(default)

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	int r = jspank_args_parse(ac, av, &st.args);

	/* srun, sbatch, salloc: a bad plugstack.conf line stops them at once, before any job. */
	if (!spank_remote(sp)) {
		if (r < 0)
			slurm_error("jobcg: %s", jobcg_error_message(r));
		return r < 0 ? -1 : 0;
	}
	jobcg_set_log(log_to_slurm, NULL, JOBCG_LOG_INFO);
	st.init_usec = realtime_us();
	/* Before anything of this step is forked: its sleep is the child that comes after. */
	{
		uint32_t sid = 0;

		if (spank_get_item(sp, S_JOB_STEPID, &sid) == ESPANK_SUCCESS &&
		    sid == JSPANK_EXTERN_CONT)
			st.have_before =
			    children_now(st.before, EXTERN_CHILDREN_MAX, &st.nbefore) == 0;
	}
	/*
	 * Not returned: Slurm reports a failed init as a launch failure, srun exits 0 and a batch
	 * step drains the node. Each task fails instead, in task_init, before its exec: exit 1,
	 * the reason on its stderr and in slurmd's log. No user code runs meanwhile. A bad
	 * argument too: the node's plugstack.conf is the admin's, the step must not run without
	 * the containment it asked for.
	 */
	if (r < 0) {
		uint32_t job = 0, step_id = 0;
		char step[JOBCG_STEP_ID_MAX] = "?";

		(void)spank_get_item(sp, S_JOB_ID, &job);
		if (spank_get_item(sp, S_JOB_STEPID, &step_id) == ESPANK_SUCCESS)
			(void)jspank_step_name(step_id, step);
		(void)fail(job, step, r, "reading plugstack.conf's arguments");
		st.failed = st.args_bad = true;
		return 0;
	}
	if (step_begin(sp) < 0)
		st.failed = true;
	return 0;
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	pid_t pid = 0;
	int task = -1, r;
	cpu_set_t mask;
	bool have_mask;
	uint64_t t0;

	if (st.failed) {
		uint32_t sid = 0;

		if (spank_get_item(sp, S_JOB_STEPID, &sid) != ESPANK_SUCCESS ||
		    sid != JSPANK_EXTERN_CONT)
			return 0; /* it exits in task_init, before its exec */
		/* The extern step's sleep has no task_init, and Slurm only logs a failure here:
		 * it is not left running outside its cgroup. */
		if (extern_sleeper(&pid) == 0)
			(void)kill(pid, SIGKILL);
		return -1;
	}
	if (!st.begun)
		return -1; /* never a task outside its cgroup */
	/* PrologFlags=Contain: Slurm calls this for the extern step's sleep with task id -1. */
	if (streq(st.life.step, "extern"))
		return extern_place(sp);
	if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || pid <= 0 || task < 0) {
		return fail(st.life.job, st.life.step,
			    error_set(-EIO, "Slurm did not give the task's pid and id"),
			    "placing a task");
	}
	/* Before 6.2 a move into a cpuset cgroup resets the binding task/affinity made. */
	have_mask = sched_getaffinity(pid, sizeof(mask), &mask) == 0;
	t0 = monotonic_us();
	if ((r = jobcg_task_add_pid(st.ctx, st.life.job, st.life.step, task, pid)) < 0)
		return fail(st.life.job, st.life.step, r, "moving the task into its cgroup");
	/* Mostly the kernel's RCU grace period before the first move after a quiet spell, where
	 * cgroup2 is mounted without favordynmods (docs/slurm.md, "On a real host"). */
	slurm_verbose("jobcg: job %u step %s task %d moved into its cgroup in %" PRIu64 " us",
		      st.life.job, st.life.step, task, monotonic_us() - t0);
	if (have_mask && sched_setaffinity(pid, sizeof(mask), &mask) < 0)
		slurm_info("jobcg: job %u step %s task %d: cannot restore its CPU binding: %s",
			   st.life.job, st.life.step, task, strerror(errno));
	return 0;
}

/*
 * Is this task, about to exec, still where task_post_fork put it? Slurm's own cgroup plugins
 * (TaskPlugin=task/cgroup, and any plugin of the stack after this one) move a task after that
 * hook, and jobcg's limits and device grants would then silently not apply to it: the task
 * fails instead, naming where it is.
 */
static int task_still_placed(int task)
{
	struct jobcg_target t = {.job = st.life.job, .task = task};
	_cleanup_free_ char *want = NULL, *cg = NULL;
	const char *mount = jobcg_ctx_mount(st.ctx), *where;
	int r;

	memcpy(t.step, st.life.step, sizeof(t.step));
	if ((r = jobcg_target_path(st.ctx, &t, &want)) < 0 ||
	    (r = jobcg_pid_job(st.ctx, getpid(), NULL, &cg)) < 0)
		return fail(st.life.job, st.life.step, r, "checking the task's cgroup");
	if (streq(cg, want))
		return 0;
	/* As /proc/self/cgroup says it: relative to the mount. */
	where = startswith(cg, mount) && cg[strlen(mount)] ? cg + strlen(mount) : "/";
	return fail(st.life.job, st.life.step,
		    error_set(-EPERM,
			      "task %d is in %s, not in its jobcg cgroup %s: moved after "
			      "jobcg_spank.so placed it (Slurm's TaskPlugin=task/cgroup or "
			      "ProctrackType=proctrack/cgroup? jobcg needs task/affinity and "
			      "proctrack/linuxproc)",
			      task, where, want),
		    "checking the task's cgroup");
}

/*
 * The task, about to exec, refused: the reason on its stderr, and it exits here. Returning -1
 * is not enough: slurmstepd's exec_task exits 1 on it only for a plugin loaded as `required`,
 * and runs the task anyway, uncontained, for one loaded as `optional` (plugstack.c's
 * _do_call_stack ignores an optional plugin's failure).
 */
static _Noreturn void task_refuse(const char *why)
{
	slurm_spank_log("%s", why);
	_exit(1);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	_cleanup_strv_free_ char **bound_env = NULL;
	int task = -1;
	char **env;

	if (spank_remote(sp) && st.failed)
		task_refuse(st.why);
	if (!spank_remote(sp) || !st.begun)
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || task < 0 ||
	    (unsigned)task >= st.life.ntasks) {
		snprintf(st.why, sizeof(st.why),
			 "jobcg: job %u step %s: Slurm did not give the task's id", st.life.job,
			 st.life.step);
		task_refuse(st.why);
	}
	if (task_still_placed(task) < 0)
		task_refuse(st.why);
	if (!jobcg_step_gres_task_env(st.life.gres))
		return 0;
	env = jobcg_step_gres_task_env(st.life.gres)[task];
	if (!env || !env[0])
		return 0; /* no devices here: Slurm's variables stand */
	if (slurm_bound_env(sp, task, &bound_env) < 0)
		task_refuse(st.why);
	/* The task's cgroup grants only its devices, which the GPU runtime numbers from 0. */
	for (size_t i = 0; jobcg_gres_env_names[i]; i++)
		(void)spank_unsetenv(sp, jobcg_gres_env_names[i]);
	/* Then Slurm's binding of this task, numbered within the step's GPUs its cgroup grants. */
	if (set_env(sp, task, env) < 0 || (bound_env && set_env(sp, task, bound_env) < 0))
		task_refuse(st.why);
	return 0;
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	struct jobcg_target t = {.job = st.life.job, .task = JOBCG_TASK_ALL};
	int task = -1, status = 0, r;
	uint64_t t0;

	if (!spank_remote(sp) || !st.begun)
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &task) == ESPANK_SUCCESS && task >= 0 &&
	    (unsigned)task < st.life.ntasks &&
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS)
		st.status[task] = status;
	if (++st.exited < st.life.ntasks)
		return 0;
	/* linuxproc follows only the process tree: what escaped it (setsid) dies with the step,
	 * and with it the step's stdout that srun waits on. */
	memcpy(t.step, st.life.step, sizeof(t.step));
	t0 = monotonic_us();
	if ((r = jobcg_kill(st.ctx, &t, KILL_TIMEOUT_MS)) < 0)
		return fail(st.life.job, st.life.step, r, "killing what is left of the step");
	/* Slurm tells srun the task ended only after this: its cost is srun's. */
	slurm_verbose("jobcg: job %u step %s: what was left of it killed in %" PRIu64 " us",
		      st.life.job, st.life.step, monotonic_us() - t0);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	struct jobcg_run_result res = {};
	int r = 0;

	if (spank_remote(sp) && st.failed && !st.begun)
		refused_record(sp);
	if (st.begun) {
		uint64_t t0 = monotonic_us();

		res.ntasks = st.exited ? st.life.ntasks : 0;
		res.task_status = st.exited ? st.status : NULL;
		res.exit_code = jspank_exit_code(st.status, res.ntasks);
		/* No task seen ending (the extern step, a failed launch): the record says
		 * NODE_FAIL only when tasks were started and nobody saw them end. */
		if ((r = jobcg_step_end(st.ctx, &st.life, &res, 0, NULL)) < 0)
			r = fail(st.life.job, st.life.step, r, "ending the step");
		else
			slurm_verbose(
			    "jobcg: job %u step %s ended (record, revoke, remove) in %" PRIu64
			    " us",
			    st.life.job, st.life.step, monotonic_us() - t0);
		st.begun = false;
	}
	if (st.job && st.ctx) {
		uint64_t t0 = monotonic_us();
		/* Its last step on this node: the job goes, devices and all. No job record: the
		 * next step may make it again (salloc, then sruns one after another), and the
		 * steps' records are the truth of it here (docs/slurm.md). */
		int k = jobcg_job_remove(st.ctx, st.job,
					 JOBCG_JOB_REMOVE_IF_UNUSED | JOBCG_JOB_REMOVE_NO_RECORD |
					     JOBCG_JOB_REMOVE_IF_SLURM);

		if (k == 0)
			slurm_verbose("jobcg: job %u removed (no step left in it) in %" PRIu64
				      " us",
				      st.job, monotonic_us() - t0);
		else if (k != -EBUSY && k != -ENOENT && k != -EINPROGRESS && r == 0)
			r = fail(st.job, st.life.step[0] ? st.life.step : NULL, k,
				 "removing the job after its last step");
		st.job = 0;
	}
	free(st.status);
	st.status = NULL;
	jobcg_gres_node_free(st.gres_node);
	st.gres_node = NULL;
	free(st.slurm_step_gpus);
	st.slurm_step_gpus = NULL;
	free(st.gpu_bind);
	st.gpu_bind = NULL;
	jobcg_ctx_free(st.ctx);
	st.ctx = NULL;
	jobcg_config_free(st.conf);
	st.conf = NULL;
	jspank_args_done(&st.args);
	/* One slurmstepd, one step; a process that loads the plugin for more (the tests) starts
	 * each one afresh. */
	st.failed = st.recorded = st.args_bad = false;
	st.why[0] = 0;
	return r;
}

#pragma GCC visibility pop
