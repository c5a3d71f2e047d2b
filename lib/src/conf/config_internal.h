/* jobcg internal: the layout of a loaded configuration (cgroup.conf and gres.conf), which the
 * public jobcg/config.h keeps opaque. For the library, the jobcg command, its daemon, the spank
 * plugin, bench/ and the tests; never installed. */
#pragma once

#include "jobcg/config.h"

enum jobcg_device_program {
	JOBCG_DEVPROG_NODE = 0,	  /* one pinned node program + policy map (default) */
	JOBCG_DEVPROG_LINEAR = 1, /* Slurm-shaped compare-and-exit program per cgroup */
};

/* When the accounting log is fsync()ed (AccountingSync=). */
enum jobcg_acct_sync {
	JOBCG_ACCT_SYNC_JOB = 0,  /* at each job's record, which makes its steps' durable too */
	JOBCG_ACCT_SYNC_STEP = 1, /* at every record */
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
	/* Where SpecCPUs or CoreSpecCount (whichever is set) and MemSpecLimit were set: what
	 * this node cannot honour is only known when a command looks at its CPUs and RAM. */
	struct jobcg_origin spec_cpus_origin, mem_spec_origin;
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
	uint64_t count;	    /* Count= with suffix, or 1 per file. For mps/shard each file
			       gets the line's Count / files (the remainder is dropped, as
			       Slurm); a MultipleFiles record counts 1 unless shared. */
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
	bool node_line;		    /* its line starts with NodeName= (Slurm lists a gres.conf's
				       Name= lines before its NodeName= lines) */
	bool slurm_detected;	    /* a GPU of slurmd's AutoDetect=nvml list (slurm_gpu_order):
				       jobcg's record of the same file is that Slurm index */
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

/* Free one record's members (for a record taken out of its table). */
void gres_record_done(struct jobcg_gres_record *r);

struct jobcg_config {
	struct jobcg_cgroup_conf cgroup;
	struct jobcg_gres_conf gres;
	char *config_dir; /* directory the files were read from (NULL: explicit files) */
	char *hostname;	  /* host used to select NodeName= lines */
	struct jobcg_config_entry *entries; /* every cgroup.conf key with its origin (none with
					       JOBCG_CONFIG_NO_ENTRIES) */
	size_t nentries;
	char **warnings;  /* "file:line: text" for each warning (also logged), or NULL */
	char **files;	  /* every file read, includes too (origins point here), or NULL */
	char *gres_error; /* JOBCG_CONFIG_TOLERATE_GRES: gres.conf's error (gres is empty) */
	/* JOBCG_CONFIG_TOLERATE_CGROUP: cgroup.conf's first error in a key that locates nothing
	 * (the key keeps its default), and how many there were */
	char *cgroup_error;
	unsigned cgroup_errors;
};
