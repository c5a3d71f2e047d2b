/* jobcg check: what this host's cgroup v2 offers jobcg, and whether jobs can run here. */
#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <getopt.h>
#include <stdarg.h>

#include "common.h"
#include "devices.h"
#include "jobcg/adopt.h"
#include "gpudetect.h"
#include "gres_internal.h"
#include "jobcg/gres.h"
#include "spec.h"
#include "jobcg/sysinfo.h"

static const char *layout_name(enum jobcg_layout l)
{
	switch (l) {
	case JOBCG_LAYOUT_UNIFIED:
		return "unified";
	case JOBCG_LAYOUT_HYBRID:
		return "hybrid";
	case JOBCG_LAYOUT_CONFIGURED:
		return "configured";
	case JOBCG_LAYOUT_OTHER:
		break;
	}
	return "other";
}

static const char *layout_text(enum jobcg_layout l)
{
	switch (l) {
	case JOBCG_LAYOUT_UNIFIED:
		return "pure cgroup v2";
	case JOBCG_LAYOUT_HYBRID:
		return "hybrid: controllers on cgroup v1, cgroup v2 beside them";
	case JOBCG_LAYOUT_CONFIGURED:
		return "CgroupMountpoint= from cgroup.conf";
	case JOBCG_LAYOUT_OTHER:
		break;
	}
	return "cgroup2 mount found in /proc/self/mounts";
}

static void mask_text(char *buf, size_t size, unsigned m)
{
	buf[0] = '\0';
	for (unsigned i = 0; i < _JOBCG_CTRL_MAX; i++)
		if (m & (1u << i)) {
			strncat(buf, buf[0] ? " " : "", size - strlen(buf) - 1);
			strncat(buf, jobcg_controller_name(i), size - strlen(buf) - 1);
		}
	if (!buf[0])
		snprintf(buf, size, "(none)");
}

static struct json_object *mask_json(unsigned m)
{
	struct json_object *a = json_object_new_array();

	for (unsigned i = 0; i < _JOBCG_CTRL_MAX; i++)
		if (m & (1u << i))
			json_object_array_add(a, json_object_new_string(jobcg_controller_name(i)));
	return a;
}

static struct json_object *feature_json(const struct jobcg_feature *f)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "supported", json_object_new_boolean(f->supported));
	json_object_object_add(o, "detail", json_object_new_string(f->detail ? f->detail : ""));
	return o;
}

/* ssh logins and `jobcg adopt --pam`: what sshd's PAM stack does with them. */
struct pam_check {
	struct jobcg_pam_scan *scan; /* NULL when sshd's file cannot be read */
	char *error;		     /* why it could not */
	bool escapes;		     /* adopted logins leave their jobs (exit status 1) */
	char *escape;		     /* why */
	bool unsafe;		     /* users' environments reach a dynamic jobcg (exit status 1) */
	char *unsafe_why;	     /* why */
	char *note;		     /* weaker than that, said too */
	char *env_note;		     /* users' environments reach a static jobcg: harmless, said */
};

/*
 * Does the ELF file @path ask for a dynamic loader (a PT_INTERP header)? 1 or 0, -errno when
 * it cannot be read or is not a 64-bit ELF file of this machine's byte order.
 */
static int elf_dynamic(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), r = -ENOEXEC;
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph))
		goto out;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) !=
		    (ssize_t)sizeof(ph))
			goto out;
		if (ph.p_type == PT_INTERP) {
			r = 1;
			goto out;
		}
	}
	r = 0;
out:
	close(fd);
	return r;
}

static char *text_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *text_of(const char *fmt, ...)
{
	va_list ap;
	char *t = NULL;

	va_start(ap, fmt);
	if (vasprintf(&t, fmt, ap) < 0)
		t = NULL;
	va_end(ap);
	return t;
}

static void pam_check(const char *pam_dir, struct pam_check *pc)
{
	const struct jobcg_pam_scan *sc;
	int r = jobcg_pam_scan(pam_dir, "sshd", &pc->scan);

	if (r < 0) {
		pc->error = strdup(jobcg_error_message(r));
		return;
	}
	sc = pc->scan;
	pc->escapes = sc->adopt_account && sc->pam_systemd;
	if (pc->escapes)
		pc->escape = text_of(
		    "pam_systemd runs in sshd's session stack (%s): systemd-logind would move "
		    "every adopted login into user-UID.slice/session-N.scope, outside its job (no "
		    "limits, no device policy, not ended by release), so 'jobcg adopt --pam' "
		    "refuses those logins. In %s use '@include common-session-noninteractive' in "
		    "place of '@include common-session' (docs/pam.md)",
		    sc->pam_systemd, sc->file);
	else if (sc->adopt_account && !sc->adopt_session)
		pc->note =
		    text_of("no session line runs 'jobcg adopt --pam' after sshd's session "
			    "modules: a login "
			    "that one of them moves out of its job is not refused (docs/pam.md)");
	else if (!sc->adopt_account && sc->adopt_session)
		pc->note = text_of("a session line runs 'jobcg adopt --pam' (%s) but no "
				   "account line does: logins are not adopted, and every "
				   "login but root's is refused (docs/pam.md)",
				   sc->adopt_session);
	/* pam_exec runs its command as root with the PAM environment: a dynamic loader acts on
	 * a user's LD_PRELOAD before jobcg can drop it (jobcg adopt then refuses every login). */
	if (sc->user_env && sc->adopt_session && sc->adopt_exe) {
		int d = elf_dynamic(sc->adopt_exe);

		/* Not an ELF program (a script): its interpreter's loader reads LD_PRELOAD. */
		if (d > 0 || d == -ENOEXEC) {
			pc->unsafe = true;
			pc->unsafe_why = text_of(
			    "pam_env reads users' own ~/.pam_environment (%s) before the session "
			    "line running %s, which %s: a user's LD_PRELOAD would run as root in "
			    "it, and 'jobcg adopt --pam' refuses every login there. Name the "
			    "statically linked jobcg on the PAM lines, or take user_readenv=1 off "
			    "that line (docs/pam.md)",
			    sc->user_env, sc->adopt_exe,
			    d > 0 ? "is linked dynamically" : "is not an ELF program");
		} else if (d < 0)
			pc->env_note = text_of(
			    "pam_env hands users' own ~/.pam_environment (%s) to the session line; "
			    "whether %s is linked statically, as it must be there, is not known: "
			    "%s",
			    sc->user_env, sc->adopt_exe, strerror(-d));
		else
			pc->env_note =
			    text_of("pam_env hands users' own ~/.pam_environment (%s) to the "
				    "session line; %s is statically linked and drops it: keep it "
				    "static (docs/pam.md)",
				    sc->user_env, sc->adopt_exe);
	}
}

static struct json_object *pam_json(const struct pam_check *pc)
{
	struct json_object *o = json_object_new_object();
	const struct jobcg_pam_scan *sc = pc->scan;

#define JSTR(v) ((v) ? json_object_new_string(v) : NULL)
	json_object_object_add(o, "service", json_object_new_string("sshd"));
	if (pc->error)
		json_object_object_add(o, "error", json_object_new_string(pc->error));
	if (sc) {
		json_object_object_add(o, "file", JSTR(sc->file));
		json_object_object_add(o, "adopt_account", JSTR(sc->adopt_account));
		json_object_object_add(o, "adopt_session", JSTR(sc->adopt_session));
		json_object_object_add(o, "pam_systemd", JSTR(sc->pam_systemd));
	}
	if (sc) {
		json_object_object_add(o, "user_env", JSTR(sc->user_env));
		json_object_object_add(o, "adopt_exe", JSTR(sc->adopt_exe));
	}
	json_object_object_add(o, "logins_escape", json_object_new_boolean(pc->escapes));
	json_object_object_add(o, "root_from_user_env", json_object_new_boolean(pc->unsafe));
	json_object_object_add(o, "warning", JSTR(pc->escape ? pc->escape : pc->note));
	json_object_object_add(o, "env_warning",
			       JSTR(pc->unsafe_why ? pc->unsafe_why : pc->env_note));
#undef JSTR
	return o;
}

static void pam_text(const struct pam_check *pc)
{
	const struct jobcg_pam_scan *sc = pc->scan;

	if (!sc)
		printf("%-22s not checked: %s\n", "ssh logins (PAM):", pc->error);
	else if (!sc->adopt_account)
		printf("%-22s not adopted (no account line runs 'jobcg adopt --pam' in %s)\n",
		       "ssh logins (PAM):", sc->file);
	else
		printf("%-22s adopted into jobs (%s), %s%s%s\n",
		       "ssh logins (PAM):", sc->adopt_account,
		       sc->adopt_session ? "checked after the session (" : "",
		       sc->adopt_session ? sc->adopt_session : "not checked after the session",
		       sc->adopt_session ? ")" : "");
	if (pc->escapes) {
		printf("WARNING: adopted ssh logins leave their jobs: %s\n", pc->escape);
		fprintf(stderr, "jobcg: check: WARNING: adopted ssh logins leave their jobs: %s\n",
			pc->escape);
	} else if (pc->note)
		printf("note: %s\n", pc->note);
	if (pc->unsafe) {
		printf("WARNING: users' environments reach a root jobcg: %s\n", pc->unsafe_why);
		fprintf(stderr,
			"jobcg: check: WARNING: users' environments reach a root jobcg: %s\n",
			pc->unsafe_why);
	} else if (pc->env_note)
		printf("note: %s\n", pc->env_note);
	for (char **n = sc ? sc->notes : NULL; n && *n; n++)
		printf("note: PAM: %s\n", *n);
}

/* @checks: the GPU and Slurm checks' objects ("gpus", "slurm_gres", ...), each added as is. */
static void print_json(const struct jobcg_sysinfo *s, struct json_object *reserved,
		       struct json_object *pam, struct json_object *checks)
{
	struct json_object *o = json_object_new_object(), *lim = json_object_new_array();

	json_object_object_add(o, "mount", json_object_new_string(s->mount));
	json_object_object_add(o, "layout", json_object_new_string(layout_name(s->layout)));
	json_object_object_add(o, "kernel", json_object_new_string(s->kernel));
	json_object_object_add(o, "root", json_object_new_string(s->root));
	json_object_object_add(o, "root_exists", json_object_new_boolean(s->root_exists));
	json_object_object_add(o, "backend", json_object_new_string(s->backend));
	json_object_object_add(o, "systemd", json_object_new_boolean(s->systemd));
	json_object_object_add(o, "controllers_available", mask_json(s->available));
	json_object_object_add(o, "controllers_enabled_top", mask_json(s->enabled_top));
	json_object_object_add(o, "controllers_usable", mask_json(s->usable));
	json_object_object_add(o, "controllers_v1", mask_json(s->v1_bound));
	json_object_object_add(o, "bpf_device", feature_json(&s->bpf_device));
	json_object_object_add(o, "freeze", feature_json(&s->freeze));
	json_object_object_add(o, "kill", feature_json(&s->kill));
	json_object_object_add(o, "memory_peak", feature_json(&s->memory_peak));
	json_object_object_add(o, "xattr", feature_json(&s->xattr));
	json_object_object_add(o, "favordynmods", feature_json(&s->favordynmods));
	for (char **l = s->limitations; l && *l; l++)
		json_object_array_add(lim, json_object_new_string(*l));
	json_object_object_add(o, "reserved", reserved);
	json_object_object_add(o, "ssh_pam", pam);
	json_object_object_foreach(checks, key, val)
	    json_object_object_add(o, key, json_object_get(val));
	json_object_object_add(o, "cannot_enforce", lim);
	json_object_object_add(o, "can_run", json_object_new_boolean(s->can_run));
	if (!s->can_run)
		json_object_object_add(o, "cannot_run_reason",
				       json_object_new_string(s->cannot_run_reason));
	cli_json_print(stdout, o);
}

static void print_feature(const char *name, const struct jobcg_feature *f)
{
	printf("%-22s %s (%s)\n", name, f->supported ? "yes" : "no", f->detail);
}

/* Resource specialisation: the reserved CPUs ("" none, NULL when the keys are wrong here, with
 * the error record set) and memory. */
static char *reserved_cpus(const struct jobcg_config *conf)
{
	char *online = NULL, *cpus = NULL;

	if (jobcg_online_cpus(&online) == 0)
		(void)jobcg_spec_cpus(&conf->cgroup, online, &cpus);
	free(online);
	return cpus;
}

/* The error record as file:line: message (where cgroup.conf set the key). */
static const char *spec_error(void)
{
	static char buf[4096];

	return jobcg_error_format(jobcg_last_error()->code, buf, sizeof(buf));
}

/*
 * A reservation this node cannot honour (SpecCPUs naming an offline CPU, no CPU or memory left
 * for jobs) fails every job that applies it: jobs cannot run. Returns 1 then, else 0.
 */
static int spec_verdict(const struct jobcg_config *conf, struct jobcg_sysinfo *s)
{
	char *why;

	if (jobcg_spec_check_node(&conf->cgroup) >= 0)
		return 0;
	if (s->can_run && (why = strdup(spec_error()))) {
		free(s->cannot_run_reason);
		s->cannot_run_reason = why;
		s->can_run = false;
	}
	return 1;
}

static void print_reserved_text(const struct jobcg_config *conf)
{
	char *cpus = reserved_cpus(conf);
	uint64_t mem = conf->cgroup.mem_spec_limit;

	if (!cpus)
		printf("%-22s error: %s\n", "reserved for system:", spec_error());
	else if (!*cpus && !mem)
		printf("%-22s nothing\n", "reserved for system:");
	else
		printf("%-22s CPUs %s, memory %s%llu MiB (system/ leaf; jobs never get them)\n",
		       "reserved for system:", *cpus ? cpus : "none",
		       mem ? "" : "none: ", (unsigned long long)(mem >> 20));
	free(cpus);
}

static struct json_object *reserved_json(const struct jobcg_config *conf)
{
	struct json_object *o = json_object_new_object();
	char *cpus = reserved_cpus(conf);

	json_object_object_add(o, "cpus", cpus ? json_object_new_string(cpus) : NULL);
	if (!cpus)
		json_object_object_add(o, "error", json_object_new_string(spec_error()));
	json_object_object_add(o, "mem_bytes", json_object_new_uint64(conf->cgroup.mem_spec_limit));
	free(cpus);
	return o;
}

static void print_text(const struct jobcg_sysinfo *s, const struct jobcg_config *conf)
{
	char buf[256];

	printf("%-22s %s (%s)\n", "cgroup v2 mount:", s->mount, layout_text(s->layout));
	printf("%-22s %s\n", "kernel:", s->kernel);
	printf("%-22s %s (%s)\n", "tree root:", s->root,
	       s->root_exists ? "exists" : "missing: 'jobcg init' or the first job creates it");
	printf("%-22s %s (systemd %s)\n", "scope backend:", s->backend,
	       s->systemd ? "running" : "not running");
	mask_text(buf, sizeof(buf), s->available);
	printf("%-22s %s\n", "v2 controllers:", buf);
	mask_text(buf, sizeof(buf), s->enabled_top);
	printf("%-22s %s\n", "enabled at the top:", buf);
	mask_text(buf, sizeof(buf), s->usable);
	printf("%-22s %s\n", "reaching jobs:", buf);
	mask_text(buf, sizeof(buf), s->v1_bound);
	printf("%-22s %s\n", "bound to cgroup v1:", buf);
	print_feature("eBPF device programs:", &s->bpf_device);
	print_feature("cgroup.freeze:", &s->freeze);
	print_feature("cgroup.kill:", &s->kill);
	print_feature("memory.peak:", &s->memory_peak);
	print_feature("xattrs:", &s->xattr);
	print_feature("favordynmods:", &s->favordynmods);
	print_reserved_text(conf);
	if (s->limitations && s->limitations[0]) {
		printf("cannot be enforced here:\n");
		for (char **l = s->limitations; *l; l++)
			printf("  - %s\n", *l);
	} else
		printf("cannot be enforced here: nothing\n");
	if (s->can_run)
		printf("jobs can run:          yes\n");
	else
		printf("jobs can run:          no: %s\n", s->cannot_run_reason);
}

static void usage(void)
{
	printf("Usage: jobcg check [--json] [--pam-dir DIR] [--slurm-gres FILE|none]\n\n"
	       "Describe the cgroup v2 mount, its controllers and kernel features, what jobcg\n"
	       "cannot enforce on this host, and what sshd's PAM stack does with logins that\n"
	       "'jobcg adopt --pam' adopts; with AutoDetect= in gres.conf, how the GPUs found\n"
	       "differ from gres.conf; under Slurm, whether Slurm's gres.conf lists this node's\n"
	       "GPUs as jobcg's does and slurm.conf's GresTypes= lists gpu. Exit status 0 only if\n"
	       "jobs can run, adopted ssh logins stay in their jobs (no pam_systemd in sshd's\n"
	       "session stack) and no user's environment reaches a dynamically linked jobcg on\n"
	       "its PAM lines, the GPUs agree and Slurm sets the steps' GPU variables.\n\n"
	       "  --json               the same as JSON\n"
	       "  --pam-dir DIR        read sshd's PAM stack from DIR (default: /etc/pam.d)\n"
	       "  --slurm-gres FILE    compare Slurm's gres.conf FILE with jobcg's, GPU by GPU\n"
	       "                       (default: where the plugin stack of Slurm's slurm.conf\n"
	       "                       in SLURM_CONF's directory, else /etc/slurm or\n"
	       "                       /run/slurm/conf, loads jobcg_spank.so, its slurm_gres=\n"
	       "                       file, else gres.conf beside slurm.conf; none: do not)\n");
}

/*
 * With AutoDetect= in gres.conf: what detection finds against what gres.conf says, every
 * difference named. Returns 1 when they differ or detection fails, else 0.
 */
static int gpus_check(const struct jobcg_config *conf, struct json_object *json)
{
	const char *be = jobcg_gpus_backend_for(&conf->gres);
	struct json_object *o = NULL, *d = NULL;
	struct jobcg_gpus *gpus = NULL;
	char **diffs = NULL;
	int r;

	if (!be || !strcmp(be, "off"))
		return 0;
	r = jobcg_gpus_detect(be, &gpus);
	if (r >= 0 && (r = jobcg_gpus_compare(gpus, &conf->gres, &diffs)) < 0)
		jobcg_gpus_free(gpus);
	if (json) {
		o = json_object_new_object();
		d = json_object_new_array();
		json_object_object_add(o, "backend", json_object_new_string(be));
		json_object_object_add(
		    o, "error", r < 0 ? json_object_new_string(jobcg_error_message(r)) : NULL);
		for (char **p = diffs; p && *p; p++)
			json_object_array_add(d, json_object_new_string(*p));
		json_object_object_add(o, "differences", d);
		json_object_object_add(json, "gpus", o);
	} else if (r < 0)
		printf("%-22s detection (%s) failed: %s\n", "gpus:", be, jobcg_error_message(r));
	else if (!diffs[0])
		printf("%-22s %zu found (%s), as gres.conf says\n", "gpus:", gpus->ngpus,
		       gpus->backends);
	else {
		printf("%-22s %zu found (%s); gres.conf differs:\n", "gpus:", gpus->ngpus,
		       gpus->backends);
		for (char **p = diffs; *p; p++)
			printf("  - %s\n", *p);
	}
	if (r < 0)
		return 1;
	r = diffs[0] ? 1 : 0;
	for (char **p = diffs; *p; p++)
		free(*p);
	free(diffs);
	jobcg_gpus_free(gpus);
	return r;
}

/*
 * Does Slurm's plugstack file @path load jobcg_spank.so, on a line of its own outside a comment
 * or in a file one of its `include GLOB` lines names (relative to @path's directory, as Slurm
 * resolves them)? Its slurm_gres= argument, if any, goes to @arg; the file of that line to
 * @line_file, and *@optional says whether it is loaded `optional`.
 */
static bool plugstack_loads_plugin(const char *path, char arg[PATH_MAX], char line_file[PATH_MAX],
				   bool *optional, int depth)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		const char *a;
		char dir[PATH_MAX], full[PATH_MAX * 2];
		glob_t g;

		enum slurm_plugstack_line kind = slurm_plugstack_line(line, &a);

		switch (kind) {
		case SLURM_PLUGSTACK_JOBCG:
		case SLURM_PLUGSTACK_JOBCG_OPTIONAL:
			snprintf(arg, PATH_MAX, "%s", a);
			snprintf(line_file, PATH_MAX, "%s", path);
			*optional = kind == SLURM_PLUGSTACK_JOBCG_OPTIONAL;
			found = true;
			break;
		case SLURM_PLUGSTACK_INCLUDE:
			if (depth >= 8)
				break;
			snprintf(dir, sizeof(dir), "%s", path);
			*(strrchr(dir, '/') ? strrchr(dir, '/') : dir) = '\0';
			snprintf(full, sizeof(full), "%s%s%s", *a == '/' ? "" : dir,
				 *a == '/' || !*dir ? "" : "/", a);
			if (glob(full, 0, NULL, &g) != 0)
				break;
			for (size_t k = 0; !found && k < g.gl_pathc; k++)
				found = plugstack_loads_plugin(g.gl_pathv[k], arg, line_file,
							       optional, depth + 1);
			globfree(&g);
			break;
		case SLURM_PLUGSTACK_OTHER:
			break;
		}
	}
	fclose(f);
	return found;
}

/* Whether jobcg's gres.conf gives this node GPUs (what a Slurm step's GPUs map onto). */
static bool has_gpus(const struct jobcg_config *conf)
{
	struct jobcg_gres_node *n = NULL;
	struct jobcg_gres_set all;

	if (jobcg_gres_node_new(conf, &n) < 0)
		return true; /* unreadable: the checks that follow say so */
	jobcg_gres_node_all(n, "gpu", &all);
	jobcg_gres_node_free(n);
	return jobcg_gres_set_count(&all) > 0;
}

/* Where Slurm loads jobcg_spank.so on this node, read once for the checks that need it. */
struct slurm_plugin {
	struct slurm_dirs dirs; /* where Slurm's files are, as Slurm's commands here look */
	const char *dir;	/* the first of @dirs whose plugin stack loads it, or NULL */
	char arg[PATH_MAX];	/* its slurm_gres= argument, "" when none */
	char stack[PATH_MAX];	/* the plugin stack file of its line */
	bool optional;		/* loaded `optional`, not `required` */
	bool gpus;		/* where it is loaded: jobcg's gres.conf gives this node GPUs */
	char conf[PATH_MAX];	/* @dir's slurm.conf */
	struct slurm_conf_facts facts;	 /* what was read of it */
	char conf_error[PATH_MAX + 256]; /* why it was not: file:line: what */
};

/* The plugin stack of Slurm's configuration in @dir: slurm.conf's PlugStackConfig=, else
 * plugstack.conf beside it. @f: what was read of @dir's slurm.conf. Slurm opens a relative
 * PlugStackConfig= from its daemon's working directory; @dir is the one it can mean here. */
static void plugstack_path(const char *dir, const struct slurm_conf_facts *f, char buf[PATH_MAX])
{
	const char *ps = f->plugstack;

	if (ps && *ps == '/')
		snprintf(buf, PATH_MAX, "%s", ps);
	else
		snprintf(buf, PATH_MAX, "%s/%s", dir, ps ? ps : "plugstack.conf");
}

static void plugin_find(const struct jobcg_config *conf, struct slurm_plugin *p)
{
	*p = (struct slurm_plugin){};
	/* The administrator's SLURM_CONF, as Slurm's commands take it; the plugin takes slurmd's
	 * (the same file where this shell's Slurm commands work). */
	slurm_dirs_init(&p->dirs, getenv("SLURM_CONF"));
	for (size_t i = 0; !p->dir && i < p->dirs.n; i++) {
		struct slurm_conf_facts f = {};
		char path[PATH_MAX], err[sizeof(p->conf_error)] = "";
		int r;

		snprintf(p->conf, sizeof(p->conf), "%s/slurm.conf", p->dirs.dir[i]);
		if ((r = slurm_conf_read(p->conf, &f)) < 0)
			jobcg_error_format(r, err, sizeof(err)); /* file:line: what */
		plugstack_path(p->dirs.dir[i], &f, path);
		if (plugstack_loads_plugin(path, p->arg, p->stack, &p->optional, 0)) {
			p->dir = p->dirs.dir[i];
			p->facts = f;
			snprintf(p->conf_error, sizeof(p->conf_error), "%s", err);
		} else {
			slurm_conf_facts_done(&f);
		}
	}
	p->gpus = p->dir && has_gpus(conf);
}

/*
 * The Slurm gres.conf the plugin compares with, where Slurm's plugin stack loads it: its
 * slurm_gres= argument, else the gres.conf beside slurm.conf. 0 with *ret NULL when no
 * plugin stack of Slurm's loads the plugin or it says slurm_gres=none; -ENOENT when it
 * loads it and there is no such file (its steps with GPUs fail).
 */
static int plugin_slurm_gres(const struct slurm_plugin *p, char buf[PATH_MAX], const char **ret)
{
	*ret = NULL;
	if (!p->dir || strcmp(p->arg, "none") == 0)
		return 0;
	if (*p->arg) {
		snprintf(buf, PATH_MAX, "%s", p->arg);
		*ret = buf;
		return 0;
	}
	/* Beside slurm.conf, as Slurm reads it (and the plugin, from slurmd's SLURM_CONF). */
	snprintf(buf, PATH_MAX, "%s/gres.conf", p->dir);
	if (access(buf, F_OK) < 0)
		return -ENOENT;
	*ret = buf;
	return 0;
}

/*
 * The plugin takes a step's GPUs from SLURM_STEP_GPUS, which only Slurm's gpu GRES plugin sets
 * or clears: without gpu in slurm.conf's GresTypes= a user's srun passes its own value through
 * and the plugin would grant what it names. Where Slurm's plugin stack loads the plugin
 * and jobcg's gres.conf has GPUs, that slurm.conf must list gpu. Returns 1 when it
 * does not, else 0 (a slurm.conf that cannot be read is said, not counted).
 */
static int gres_types_check(const struct slurm_plugin *p, struct json_object *json)
{
	const char *err = p->conf_error;
	bool gpu = p->facts.gres_gpu;

	if (!p->dir || !p->gpus)
		return 0;
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "file", json_object_new_string(p->conf));
		json_object_object_add(o, "gpu", *err ? NULL : json_object_new_boolean(gpu));
		json_object_object_add(o, "error", *err ? json_object_new_string(err) : NULL);
		json_object_object_add(json, "slurm_gres_types", o);
	} else if (*err) {
		printf("%-22s not checked: %s\n", "Slurm's GresTypes:", err);
	} else if (gpu) {
		printf("%-22s %s lists gpu: Slurm sets or clears each step's GPU variables\n",
		       "Slurm's GresTypes:", p->conf);
	} else {
		printf("%-22s %s does not list gpu in GresTypes=: Slurm leaves SLURM_STEP_GPUS "
		       "as a user's srun set it, and jobcg_spank.so would grant the GPUs it names; "
		       "add GresTypes=gpu\n",
		       "Slurm's GresTypes:", p->conf);
	}
	return !*err && !gpu;
}

/*
 * Whether the tree fails closed: with ConstrainDevices=yes and devices in gres.conf, the node
 * program pinned for the tree root must be attached there, or every cgroup below it opens
 * every managed device. Read only (the pins as they are). Returns 1 when a tree exists whose
 * program is missing or not attached, else 0.
 */
static int devprog_check(const struct jobcg_config *conf, const struct jobcg_sysinfo *s,
			 struct json_object *json)
{
	struct jobcg_devpolicy *p = NULL;
	const char *state, *detail;
	char buf[PATH_MAX + 128];
	bool attached = false;
	int bad = 0, e;

	if (secure_getenv("JOBCG_SYSROOT")) {
		state = "not checked";
		detail = "a tree replayed under JOBCG_SYSROOT has no device program";
	} else if (!conf->cgroup.constrain_devices || conf->gres.nrecords == 0) {
		state = "not used";
		detail = "ConstrainDevices=no or no device in gres.conf";
	} else if (!s->root_exists) {
		state = "none yet";
		detail = "'jobcg init' or the first job creation attaches it with the tree";
	} else if (conf->cgroup.device_program == JOBCG_DEVPROG_LINEAR) {
		state = "linear";
		detail = "DeviceProgram=linear: jobcg_guard at the root, a program per job";
	} else if ((e = jobcg_devpolicy_open_pinned(conf, s->root, &p)) == -ENOENT) {
		state = "missing";
		snprintf(buf, sizeof(buf),
			 "no node program pinned for %s: no managed device is denied below it; "
			 "'jobcg gc' sets it up",
			 s->root);
		detail = buf;
		bad = 1;
	} else if (e < 0 || (e = jobcg_devpolicy_attached(p, &attached)) < 0) {
		state = "unknown";
		snprintf(buf, sizeof(buf), "%s", jobcg_last_error()->message);
		detail = buf;
	} else if (!attached) {
		state = "not attached";
		snprintf(buf, sizeof(buf),
			 "jobcg_node is pinned in %s but not attached at %s: no managed device is "
			 "denied below it; 'jobcg gc' attaches it again",
			 jobcg_devpolicy_pin_dir(p), s->root);
		detail = buf;
		bad = 1;
	} else {
		state = "attached";
		snprintf(buf, sizeof(buf), "jobcg_node at %s, maps pinned in %s", s->root,
			 jobcg_devpolicy_pin_dir(p));
		detail = buf;
	}
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "state", json_object_new_string(state));
		json_object_object_add(o, "detail", json_object_new_string(detail));
		json_object_object_add(json, "device_program", o);
	} else {
		printf("%-22s %s (%s)\n", "device program:", state, detail);
	}
	jobcg_devpolicy_free(p);
	return bad;
}

/* Does Slurm's plugin list @list ("task/affinity,task/cgroup") name @plugin ("cgroup" for
 * task/cgroup), with or without its type prefix? */
static bool plugin_listed(const char *list, const char *type, const char *plugin)
{
	char buf[1024], *save = NULL;
	size_t n = strlen(type);

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		if (strncasecmp(t, type, n) == 0 && t[n] == '/')
			t += n + 1;
		if (strcasecmp(t, plugin) == 0)
			return true;
	}
	return false;
}

/*
 * Slurm's own cgroup plugins and jobcg cannot both own the tasks: task/cgroup moves each task
 * after jobcg_spank.so placed it (the plugin then fails the task: its limits would not apply),
 * and proctrack/cgroup signals only what is in Slurm's cgroups, so scancel stops killing the
 * tasks. Where Slurm's plugin stack loads the plugin, its slurm.conf must name neither
 * (proctrack/cgroup is Slurm's default). Returns 1 when it does, else 0 (a slurm.conf that
 * cannot be read is said by the GresTypes check, not counted here).
 */
static int slurm_plugins_check(const struct slurm_plugin *p, struct json_object *json)
{
	const char *proctrack = p->facts.proctrack ? p->facts.proctrack : "proctrack/cgroup";
	const char *task = p->facts.task_plugin ? p->facts.task_plugin : "task/none";
	bool bad_proctrack = plugin_listed(proctrack, "proctrack", "cgroup"),
	     bad_task = plugin_listed(task, "task", "cgroup");

	if (!p->dir || *p->conf_error)
		return 0;
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "file", json_object_new_string(p->conf));
		json_object_object_add(o, "proctrack", json_object_new_string(proctrack));
		json_object_object_add(o, "task_plugin", json_object_new_string(task));
		json_object_object_add(o, "conflict",
				       json_object_new_boolean(bad_proctrack || bad_task));
		json_object_object_add(json, "slurm_plugins", o);
	} else if (!bad_proctrack && !bad_task) {
		printf("%-22s %s: ProctrackType=%s, TaskPlugin=%s leave the tasks' cgroups to "
		       "jobcg\n",
		       "Slurm's plugins:", p->conf, proctrack, task);
	} else {
		printf("%-22s %s:", "Slurm's plugins:", p->conf);
		if (bad_proctrack)
			printf(" ProctrackType=%s (%sscancel would kill only what is in Slurm's "
			       "cgroups);",
			       proctrack, p->facts.proctrack ? "" : "Slurm's default: ");
		if (bad_task)
			printf(" TaskPlugin= lists task/cgroup (it moves each task out of jobcg's "
			       "cgroup, and the plugin fails the task);");
		printf(" jobcg_spank.so needs ProctrackType=proctrack/linuxproc and "
		       "TaskPlugin=task/affinity\n");
	}
	return bad_proctrack || bad_task;
}

/*
 * jobcg_spank.so loaded `optional`: Slurm then ignores the plugin's failures, to load (a
 * missing library after an upgrade) as well as a hook's, and runs such a step without it,
 * uncontained. (Once loaded the plugin exits a refused task itself; a plugin that does not
 * load can do nothing.) Returns 1 when it is, else 0.
 */
static int plugin_required_check(const struct slurm_plugin *p, struct json_object *json)
{
	if (!p->dir)
		return 0;
	if (json) {
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "file", json_object_new_string(p->stack));
		json_object_object_add(o, "required", json_object_new_boolean(!p->optional));
		json_object_object_add(json, "slurm_plugin_line", o);
	} else if (!p->optional) {
		printf("%-22s %s loads jobcg_spank.so as required\n",
		       "Slurm's plugin line:", p->stack);
	} else {
		printf("%-22s %s loads jobcg_spank.so as optional: Slurm ignores its failures "
		       "and runs the step uncontained where it does not load; use 'required'\n",
		       "Slurm's plugin line:", p->stack);
	}
	return p->optional;
}

/*
 * Slurm's gres.conf against jobcg's, GPU index by index (what jobcg_spank.so checks for each
 * step's GPUs, here for all of them before any job runs). @path NULL: the file the plugin
 * compares with where Slurm's plugin stack loads it, else nothing. Returns 1 when they
 * differ or Slurm's file cannot be read or found, else 0.
 */
static int slurm_gres_check(const struct jobcg_config *conf, const struct slurm_plugin *plugin,
			    const char *path, struct json_object *json)
{
	struct jobcg_gres_node *jn = NULL, *sn = NULL;
	struct jobcg_config *sconf = NULL;
	char jpath[PATH_MAX], err[PATH_MAX + 256] = "", found[PATH_MAX], sconf_path[PATH_MAX];
	char **diffs = NULL;
	int r = 0;

	if (path && !strcmp(path, "none"))
		return 0;
	if (!path && plugin_slurm_gres(plugin, found, &path) < 0) {
		char where[PATH_MAX + 128];

		if (!plugin->gpus)
			return 0; /* no step has a GPU to map */
		snprintf(
		    err, sizeof(err),
		    "jobcg_spank.so is loaded, but Slurm's gres.conf is not in %s: its "
		    "steps with GPUs fail; name the file with slurm_gres=PATH in plugstack.conf",
		    slurm_dirs_describe(&plugin->dirs, where, sizeof(where)));
		snprintf(found, sizeof(found), "%s/gres.conf", plugin->dir);
		path = found;
	}
	if (!path)
		return 0;
	snprintf(jpath, sizeof(jpath), "%s/gres.conf", conf->config_dir ? conf->config_dir : ".");
	/* A missing file is an error here, not the empty gres.conf a missing one of jobcg's is.
	 * Slurm's syntax is jobcg's: its NodeName= lines are picked for this node's name. */
	if (!*err && access(path, R_OK) < 0)
		snprintf(err, sizeof(err), "%s: %s", path, strerror(errno));
	/* Slurm numbers GPUs by this node's Gres= in slurm.conf: the one beside the plugin
	 * stack that loads jobcg, else the one Slurm's commands here read. */
	else if (!*err && !plugin->dir && slurm_conf_locate(&plugin->dirs, sconf_path) < 0)
		snprintf(err, sizeof(err), "%s", jobcg_last_error()->message);
	else if (!*err && (jobcg_config_load_files(NULL, path, conf->hostname,
						   JOBCG_CONFIG_NO_STAT | JOBCG_CONFIG_NO_ENV |
						       JOBCG_CONFIG_NO_ENTRIES,
						   &sconf) < 0 ||
			   slurm_gpu_node_new(sconf, path, plugin->dir ? plugin->conf : sconf_path,
					      conf->hostname, &sn) < 0 ||
			   jobcg_gres_node_new(conf, &jn) < 0 ||
			   jobcg_gres_slurm_compare(jn, jpath, sn, path, &diffs) < 0))
		snprintf(err, sizeof(err), "%s", jobcg_last_error()->message);
	if (json) {
		struct json_object *o = json_object_new_object(), *d = json_object_new_array();

		json_object_object_add(o, "file", json_object_new_string(path));
		json_object_object_add(o, "error", *err ? json_object_new_string(err) : NULL);
		for (char **p = diffs; p && *p; p++)
			json_object_array_add(d, json_object_new_string(*p));
		json_object_object_add(o, "differences", d);
		json_object_object_add(json, "slurm_gres", o);
	} else if (*err) {
		printf("%-22s %s cannot be compared: %s\n", "Slurm's gres.conf:", path, err);
	} else if (!diffs[0]) {
		struct jobcg_gres_set all;

		jobcg_gres_node_all(jn, "gpu", &all);
		printf("%-22s %s lists this node's %u GPU(s) as jobcg's gres.conf does\n",
		       "Slurm's gres.conf:", path, jobcg_gres_set_count(&all));
	} else {
		printf("%-22s %s differs from jobcg's gres.conf (%s):\n",
		       "Slurm's gres.conf:", path, jpath);
		for (char **p = diffs; *p; p++)
			printf("  - %s\n", *p);
	}
	r = *err || diffs[0] ? 1 : 0;
	for (char **p = diffs; p && *p; p++)
		free(*p);
	free(diffs);
	jobcg_gres_node_free(jn);
	jobcg_gres_node_free(sn);
	jobcg_config_free(sconf);
	return r;
}

/*
 * Jobs jobcg_spank.so made that no live step holds any more: their slurmstepds and watchers
 * died without removing them, nothing of Slurm's ever will, and they keep their GPUs, which
 * every later step needing them is refused. Read only. Returns 1 when there is one, else 0 (a
 * tree that cannot be read is a matter for the other checks).
 */
static int slurm_stale_check(const struct jobcg_config *conf, const struct jobcg_sysinfo *s,
			     struct json_object *json)
{
	struct jobcg_ctx *ctx = NULL;
	uint32_t *ids = NULL;
	size_t n = 0, nstale = 0;
	char list[512] = "";
	struct json_object *arr = json ? json_object_new_array() : NULL;

	if (!secure_getenv("JOBCG_SYSROOT") && s->root_exists &&
	    jobcg_ctx_open(conf, JOBCG_CTX_NO_CREATE_ROOT, &ctx) == 0 &&
	    jobcg_job_list(ctx, &ids, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			struct jobcg_job_info *info = NULL;
			size_t len = strlen(list);

			if (jobcg_job_info_get(ctx, ids[i], &info) < 0 || !info->slurm_stale) {
				jobcg_job_info_free(info);
				continue;
			}
			nstale++;
			if (arr)
				json_object_array_add(arr, json_object_new_int64(ids[i]));
			if (len + 16 < sizeof(list))
				snprintf(list + len, sizeof(list) - len, "%s%u", len ? ", " : "",
					 ids[i]);
			else if (!strstr(list, "..."))
				strcat(list, ", ...");
			jobcg_job_info_free(info);
		}
	}
	jobcg_error_clear();
	free(ids);
	jobcg_ctx_free(ctx);
	if (json) {
		json_object_object_add(json, "stale_slurm_jobs", arr);
	} else if (nstale) {
		printf("WARNING: stale Slurm job(s) %s: made by jobcg_spank.so, no live step left "
		       "in them (their slurmstepds died); they keep their GPUs until 'jobcg gc' "
		       "removes them\n",
		       list);
		fprintf(stderr,
			"jobcg: check: WARNING: stale Slurm job(s) %s: 'jobcg gc' removes them\n",
			list);
	}
	return nstale > 0;
}

/*
 * The configuration's warnings (each also logged while it loaded, on stderr), counted in the
 * report and listed in JSON: among them bad values on gres.conf lines for other nodes, which
 * stop only those nodes and which an administrator checking any node should still see.
 */
static void config_warnings(const struct jobcg_config *conf, struct json_object *json)
{
	size_t n = 0;

	for (char **w = conf->warnings; w && *w; w++)
		n++;
	if (json) {
		struct json_object *a = json_object_new_array();

		for (char **w = conf->warnings; w && *w; w++)
			json_object_array_add(a, json_object_new_string(*w));
		json_object_object_add(json, "config_warnings", a);
	} else if (n)
		printf("%-22s %zu warning%s (on stderr above; `jobcg config` lists them)\n",
		       "configuration:", n, n == 1 ? "" : "s");
	else
		printf("%-22s no warnings\n", "configuration:");
}

static int cmd_check(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"pam-dir", required_argument, NULL, 'D'},
	    {"slurm-gres", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_sysinfo *s = NULL;
	struct pam_check pc = {};
	struct slurm_plugin plugin;
	const char *pam_dir = NULL, *slurm_gres = NULL;
	bool json = false;
	int c, r, rs, rspec;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'D':
		case 'S':
			if ((r = cli_once("check", c == 'D' ? "--pam-dir" : "--slurm-gres",
					  c == 'D' ? pam_dir : slurm_gres, optarg)))
				return r;
			/* "" is no file: it must not stand for the default one */
			if (!*optarg)
				return cli_usage_error("check", "%s: empty path",
						       c == 'D' ? "--pam-dir" : "--slurm-gres");
			*(c == 'D' ? &pam_dir : &slurm_gres) = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return cli_option_error("check", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("check", "unexpected argument '%s'", argv[optind]);
	/* A node's tree replayed under JOBCG_SYSROOT: its gres.conf names its /dev, not ours. */
	r = cli_load_config(g,
			    JOBCG_CONFIG_NO_ENTRIES |
				(secure_getenv("JOBCG_SYSROOT") ? JOBCG_CONFIG_NO_STAT : 0),
			    &conf);
	if (r)
		return r;
	if ((r = jobcg_sysinfo_probe(conf, &s)) < 0) {
		cli_print_error(r, NULL);
		jobcg_config_free(conf);
		return 1;
	}
	rspec = spec_verdict(conf, s);
	pam_check(pam_dir, &pc);
	plugin_find(conf, &plugin);
	if (json) {
		struct json_object *gj = json_object_new_object();

		r = gpus_check(conf, gj);
		rs = slurm_gres_check(conf, &plugin, slurm_gres, gj);
		rs |= gres_types_check(&plugin, gj);
		rs |= slurm_plugins_check(&plugin, gj);
		rs |= plugin_required_check(&plugin, gj);
		rs |= devprog_check(conf, s, gj);
		rs |= slurm_stale_check(conf, s, gj);
		config_warnings(conf, gj);
		print_json(s, reserved_json(conf), pam_json(&pc), gj);
		json_object_put(gj);
	} else {
		print_text(s, conf);
		rs = devprog_check(conf, s, NULL);
		pam_text(&pc);
		r = gpus_check(conf, NULL);
		rs |= slurm_gres_check(conf, &plugin, slurm_gres, NULL);
		rs |= gres_types_check(&plugin, NULL);
		rs |= slurm_plugins_check(&plugin, NULL);
		rs |= plugin_required_check(&plugin, NULL);
		rs |= slurm_stale_check(conf, s, NULL);
		config_warnings(conf, NULL);
	}
	r = s->can_run && !rspec && !pc.escapes && !pc.unsafe && !r && !rs ? 0 : 1;
	jobcg_pam_scan_free(pc.scan);
	slurm_conf_facts_done(&plugin.facts);
	free(pc.error);
	free(pc.escape);
	free(pc.note);
	free(pc.unsafe_why);
	free(pc.env_note);
	jobcg_sysinfo_free(s);
	jobcg_config_free(conf);
	return r;
}
CLI_COMMAND(check, cmd_check, "describe this host's cgroup v2 and what jobcg can enforce");
