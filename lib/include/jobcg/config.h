/* jobcg: configuration read from Slurm-compatible cgroup.conf and gres.conf (immutable once
 * loaded). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jobcg/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum jobcg_device_program {
	JOBCG_DEVPROG_NODE = 0,	  /* one pinned node program + policy map (default) */
	JOBCG_DEVPROG_LINEAR = 1, /* Slurm-shaped compare-and-exit program per cgroup */
};

/* When the accounting log is fsync()ed (AccountingSync=). */
enum jobcg_acct_sync {
	JOBCG_ACCT_SYNC_JOB = 0,  /* at each job's record, which makes its steps' durable too */
	JOBCG_ACCT_SYNC_STEP = 1, /* at every record */
};

/* Where a configuration value came from, for `jobcg config`. */
struct jobcg_origin {
	const char *file; /* NULL: built-in default; "env:NAME" for the environment; else a path
			     owned by the jobcg_config (its files vector) */
	unsigned line;
};

/* cgroup.conf, with Slurm's defaults applied. Percentages are 0..100 (may exceed for Allowed*). */
struct jobcg_cgroup_conf {
	char *mountpoint;  /* CgroupMountpoint; NULL = autodetect */
	char *plugin;	   /* CgroupPlugin: "autodetect", "cgroup/v2", "cgroup/v1", "disabled" */
	char *slice;	   /* CgroupSlice, default "system.slice" */
	bool job_id_paths; /* CgroupJobIdPaths (accepted; jobcg paths are job ids anyway) */
	unsigned systemd_timeout_ms; /* SystemdTimeout, default 1000 */
	bool ignore_systemd;
	bool ignore_systemd_on_failure;
	bool enable_controllers;	 /* EnableControllers */
	char **enable_extra_controllers; /* EnableExtraControllers, NULL-terminated, may be NULL */
	/* Percentages are INFINITY for UNLIMITED/INFINITE (as Slurm's float parser gives). */
	double allowed_ram_space;  /* AllowedRAMSpace, percent of the job's memory, default 100 */
	double allowed_swap_space; /* AllowedSwapSpace, percent, default 0 */
	bool constrain_cores;
	bool constrain_devices;
	bool constrain_ram_space;
	bool constrain_swap_space;
	double max_ram_percent;	    /* MaxRAMPercent, percent of node RAM, default 100 */
	double max_swap_percent;    /* MaxSwapPercent, default 100 */
	uint64_t min_ram_space_mb;  /* MinRAMSpace in MiB, default 30 */
	bool memory_swappiness_set; /* MemorySwappiness given (ignored on cgroup v2, warned) */
	bool signal_children_processes;

	/* jobcg's own keys */
	char *tree_root; /* JobcgRoot: cgroup path (relative to the v2 mount) of the delegated root;
			    NULL = <slice>/jobcg.scope. Env JOBCG_ROOT overrides. */
	char *scope_name; /* JobcgScope: systemd scope unit name, default "jobcg.scope" */
	enum jobcg_device_program device_program; /* DeviceProgram=node|linear */
	char *bpf_pin_dir; /* BpfPinDir, default /sys/fs/bpf/jobcg. Env JOBCG_BPF_PIN_DIR */
	char *state_dir;   /* StateDir, default /var/lib/jobcg. Env JOBCG_STATE_DIR */
	enum jobcg_acct_sync acct_sync; /* AccountingSync=job|step, default job */
	unsigned node_lock_timeout_ms;	/* NodeLockTimeout: longest wait for the node lock */
	bool run_via_daemon; /* RunViaDaemon: `jobcg run` goes through `jobcg daemon`, default no */
	/* Resource specialisation (Slurm's CpuSpecList/CoreSpecCount/MemSpecLimit): CPUs and
	 * memory kept for the system/ leaf (keeper, jobcg helpers), never given to jobs. */
	char *spec_cpus;	  /* SpecCPUs: normalised CPU list, NULL = none */
	unsigned core_spec_count; /* CoreSpecCount: the N highest-numbered online CPUs, 0 = none */
	uint64_t mem_spec_limit;  /* MemSpecLimit in bytes (MiB when bare), 0 = none */
};

/* gres.conf Flags bits. */
enum {
	JOBCG_GRES_FLAG_COUNT_ONLY = 1u << 0,
	JOBCG_GRES_FLAG_ENV_NVIDIA = 1u << 1,
	JOBCG_GRES_FLAG_ENV_AMD = 1u << 2,
	JOBCG_GRES_FLAG_ENV_INTEL = 1u << 3,
	JOBCG_GRES_FLAG_ENV_OPENCL = 1u << 4,
	JOBCG_GRES_FLAG_NO_GPU_ENV = 1u << 5,
	JOBCG_GRES_FLAG_ENV_UUID = 1u << 6,
	JOBCG_GRES_FLAG_ONE_SHARING = 1u << 7,
	JOBCG_GRES_FLAG_ALL_SHARING = 1u << 8,
	JOBCG_GRES_FLAG_EXPLICIT = 1u << 9,
	/* jobcg's own: grant no companion devices (nvidiactl, kfd, ...) with this record */
	JOBCG_GRES_FLAG_NO_COMPANIONS = 1u << 10,
};

/* One device file of a GRES (stat()ed unless loading with no_stat). */
struct jobcg_gres_file {
	char *path;
	char type; /* 'c' or 'b'; 0 when not stat()ed */
	unsigned major, minor;
};

/*
 * One GRES record for this host after hostlist filtering and range expansion: a line
 * `Name=gpu File=/dev/nvidia[0-1]` gives two records, one per file. With MultipleFiles= a record
 * has several files (a MIG GPU and its capability files). A record without files (Count only)
 * has nfiles == 0.
 */
struct jobcg_gres_record {
	char *name; /* "gpu", "mps", "shard", "nic", ... */
	char *type; /* Type= or NULL */
	struct jobcg_gres_file *files;
	size_t nfiles;
	uint64_t count;	    /* Count= with suffix, or 1 per file. For mps/shard the line's
			       Count is spread over its files (the first ones take the
			       remainder); a MultipleFiles record counts 1 unless shared. */
	uint64_t *cores;    /* CPU bitmap (Cores=/CPUs=), bit i = CPU i; NULL = any.
			       Cores="" gives a bitmap with no bit set (as Slurm). */
	size_t cores_words; /* number of uint64_t words in cores */
	int *links;	    /* Links= values, or NULL */
	size_t nlinks;
	unsigned flags;		    /* JOBCG_GRES_FLAG_*, effective: a gpu line without GPU
				       environment flags has all four (Slurm's default), and the
				       env flags of a name carry over to its next lines */
	char *autodetect;	    /* AutoDetect= in effect for this record, or NULL */
	struct jobcg_origin origin; /* file and line of the record */
	/*
	 * Stable node-wide index among this host's records of the same name, in gres.conf order
	 * (includes followed in place): the first gpu record is gpu 0, the next gpu 1, and so on,
	 * whatever their Type. Count-only records are numbered too.
	 */
	unsigned index;
};

struct jobcg_gres_conf {
	struct jobcg_gres_record *records;
	size_t nrecords;
	char *autodetect;      /* global AutoDetect= or NULL (lower case: "nvml", "off", ...) */
	char *node_autodetect; /* AutoDetect= of this host's NodeName= lines, or NULL */
};

/* How an effective cgroup.conf value is typed, for `jobcg config --json`. */
enum jobcg_config_kind {
	JOBCG_CONFIG_STRING = 0,
	JOBCG_CONFIG_BOOL,
	JOBCG_CONFIG_NUMBER,
	JOBCG_CONFIG_LIST,
};

/* One effective cgroup.conf setting, Slurm's keys then jobcg's, for display. */
struct jobcg_config_entry {
	const char *key; /* canonical spelling ("ConstrainCores") */
	enum jobcg_config_kind kind;
	char *value; /* as text: "yes"/"no", "100", "a,b"; NULL when unset */
	struct jobcg_origin origin;
};

struct jobcg_config {
	struct jobcg_cgroup_conf cgroup;
	struct jobcg_gres_conf gres;
	char *config_dir; /* directory the files were read from (NULL: explicit files) */
	char *hostname;	  /* host used to select NodeName= lines */
	struct jobcg_config_entry *entries; /* every cgroup.conf key with its origin (none with
					       JOBCG_CONFIG_NO_ENTRIES) */
	size_t nentries;
	char **warnings; /* "file:line: text" for each warning (also logged), or NULL */
	char **files;	 /* every file read, includes too (origins point here), or NULL */
};

enum {
	JOBCG_CONFIG_NO_STAT = 1u << 0, /* do not stat() gres device files */
	JOBCG_CONFIG_NO_ENV = 1u << 1,	/* ignore JOBCG_* environment overrides */
	/* leave entries/nentries empty: their display text formats every key (doubles
	 * included), a cost every launch paid for what only `jobcg config` shows */
	JOBCG_CONFIG_NO_ENTRIES = 1u << 2,
};

/**
 * The value of one of jobcg's own environment variables (JOBCG_*) as the library reads them:
 * as secure_getenv(3), so NULL in a setuid, setgid or capability-raised process, and NULL too
 * where the real and effective user or group ids differ. Programs that link the library read
 * JOBCG_* through this so that they follow the same rules.
 */
JOBCG_EXPORT const char *jobcg_getenv(const char *name);

/**
 * Load cgroup.conf and gres.conf from @config_dir (NULL: $JOBCG_CONF_DIR, else /etc/jobcg).
 * Missing files give the defaults (an empty gres.conf). @hostname NULL: $JOBCG_NODENAME (unless
 * JOBCG_CONFIG_NO_ENV), else gethostname(); NodeName= lines also match the name up to its first
 * dot. On error returns -errno with the thread's error record naming file, line and column; nothing
 * is returned (no partial configuration). Free with jobcg_config_free().
 */
JOBCG_EXPORT int jobcg_config_load(const char *config_dir, const char *hostname, unsigned flags,
				   struct jobcg_config **ret);
/**
 * Same, from explicit paths (either may be NULL: defaults / no gres). Errors name the paths as
 * given. config_dir stays NULL.
 */
JOBCG_EXPORT int jobcg_config_load_files(const char *cgroup_conf, const char *gres_conf,
					 const char *hostname, unsigned flags,
					 struct jobcg_config **ret);
JOBCG_EXPORT void jobcg_config_free(struct jobcg_config *c);

/** The entry of cgroup.conf key @key (case-insensitive), or NULL. */
JOBCG_EXPORT const struct jobcg_config_entry *jobcg_config_entry(const struct jobcg_config *c,
								 const char *key);

#ifdef __cplusplus
}
#endif
