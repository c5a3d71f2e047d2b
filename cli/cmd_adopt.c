/* jobcg adopt: move a login session's process into a job (pam_slurm_adopt's job), by pid or from
 * PAM, and check from PAM's session phase that the login is still in its job. */
#include <getopt.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/adopt.h"
#include "jobcg/error.h"
#include "util.h"

#define MAX_SERVICES 16

static void usage(void)
{
	printf(
	    "Usage: jobcg adopt PID [--job JOB]\n"
	    "       jobcg adopt --pam [--service NAME[,NAME...]]... [--pam-dir DIR]\n\n"
	    "Move process PID into the extern step of a job (step_extern/user/task_special), so\n"
	    "that a login session is limited, accounted and killed with the job. Without --job\n"
	    "the newest job owned by PID's user is chosen; a user without a job is refused. Jobs\n"
	    "not completely created, being released, or ephemeral (jobcg run's own) are never\n"
	    "chosen, and --job refuses them too.\n\n"
	    "  --job JOB       adopt into this job\n"
	    "  --pam           run by pam_exec(8): the user is $PAM_USER and the process is our\n"
	    "                  parent (the sshd serving the login). On an account line: adopt it\n"
	    "                  into the user's newest job, refusing the login when the user has\n"
	    "                  none or when pam_systemd runs in the service's session stack. On a\n"
	    "                  session line (after every other session module): refuse the "
	    "session\n"
	    "                  when the login is no longer in a job. root is let through.\n"
	    "  --service NAME  the PAM services (from $PAM_SERVICE) --pam acts for; any other is\n"
	    "                  let through untouched (default: sshd)\n"
	    "  --pam-dir DIR   where the service's PAM files are (default: /etc/pam.d)\n\n"
	    "PAM (/etc/pam.d/sshd; see docs/pam.md):\n"
	    "  account required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n"
	    "  session required pam_exec.so quiet /usr/local/bin/jobcg adopt --pam\n");
}

/* In PAM mode the output of pam_exec's child goes nowhere by default: what refuses a login is
 * also written to the authentication log, where an administrator looks. */
static bool to_syslog;

static int say(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int say(int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("jobcg: adopt: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	if (to_syslog) {
		va_start(ap, fmt);
		vsyslog(prio, fmt, ap);
		va_end(ap);
	}
	return 1;
}

static bool service_listed(char **services, size_t n, const char *service)
{
	if (n == 0)
		return strcmp(service, "sshd") == 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(services[i], service) == 0)
			return true;
	return false;
}

/*
 * Is this jobcg linked dynamically? Then the dynamic loader ran before main() with the
 * environment pam_exec gave us: LD_PRELOAD and its kin, which a user's ~/.pam_environment can
 * set, had their effect as root before anything here could drop them. A static jobcg (meson's
 * static_exe, the default) has no loader and is not touched by them.
 */
static bool dynamically_linked(void)
{
	return getauxval(AT_BASE) != 0;
}

/* Refuse when the stack would take the login out of its job (account phase), or would let a
 * user's own environment reach this dynamically linked jobcg (either phase). */
static int pam_stack_refuses(const char *pam_dir, const char *service, const char *who,
			     bool account)
{
	struct jobcg_pam_scan *scan = NULL;
	int r;

	if (!account && !dynamically_linked())
		return 0;
	if ((r = jobcg_pam_scan(pam_dir, service, &scan)) < 0) {
		/* PAM itself found a stack to run us from; it may be "other". */
		say(LOG_WARNING, "cannot check PAM service %s's stack: %s", service,
		    jobcg_error_message(r));
		return 0;
	}
	r = 0;
	if (scan->user_env && dynamically_linked())
		r = say(LOG_ERR,
			"refusing %s's login: pam_env reads users' own ~/.pam_environment in PAM "
			"service %s's stack (%s), and this jobcg is linked dynamically: a user's "
			"LD_PRELOAD there would run as root inside it. Run the statically linked "
			"jobcg from PAM (meson's static_exe, the default), or take user_readenv=1 "
			"off that line (docs/pam.md)",
			who, service, scan->user_env);
	else if (account && scan->pam_systemd)
		r = say(LOG_ERR,
			"refusing %s's login: pam_systemd runs in PAM service %s's session stack "
			"(%s), and systemd-logind would move the login out of its job (no limits, "
			"no device policy, not ended by release); take it out of that stack, e.g. "
			"'@include common-session-noninteractive' in place of '@include "
			"common-session' (docs/pam.md)",
			who, service, scan->pam_systemd);
	jobcg_pam_scan_free(scan);
	return r;
}

static int pam_account(struct jobcg_ctx *ctx, const char *pam_dir, const char *service,
		       const char *who, uid_t uid, pid_t pid, int pidfd)
{
	uint32_t job = 0;
	int r;

	if (pam_stack_refuses(pam_dir, service, who, true))
		return 1;
	r = pidfd >= 0 ? jobcg_adopt_user_pidfd(ctx, pidfd, uid, &job)
		       : jobcg_adopt_user(ctx, pid, uid, &job);
	if (r < 0) {
		if (r == -ENOENT)
			return say(LOG_NOTICE, "user %s has no job on this node: access refused",
				   who);
		return say(LOG_ERR, "%s's login (pid %d) not adopted: %s", who, (int)pid,
			   jobcg_error_message(r));
	}
	/* Without a pidfd (before Linux 5.3): our parent was alive all along if it still is,
	 * and the pid moved was that process. */
	if (getppid() != pid)
		return say(LOG_ERR,
			   "%s's login process %d ended while being adopted into job %u: refused",
			   who, (int)pid, job);
	printf("adopted pid %d into job %u (step extern)\n", (int)pid, job);
	if (to_syslog)
		syslog(LOG_INFO, "adopted %s's login (pid %d) into job %u", who, (int)pid, job);
	return 0;
}

/* session phase, after the session modules: is the login still in a job? */
static int pam_session(struct jobcg_ctx *ctx, const char *pam_dir, const char *service,
		       const char *who, pid_t pid)
{
	char *cg = NULL;
	uint32_t job = 0;
	int r;

	if (pam_stack_refuses(pam_dir, service, who, false))
		return 1;
	r = jobcg_pid_job(ctx, pid, &job, &cg);
	if (r < 0)
		return say(LOG_ERR, "cannot check %s's login (pid %d): %s", who, (int)pid,
			   jobcg_error_message(r));
	if (r == 0) {
		say(LOG_ERR,
		    "refusing %s's session: its process %d is in %s, outside every job; a module "
		    "of PAM service %s's session stack moved it (pam_systemd does: see "
		    "docs/pam.md)",
		    who, (int)pid, cg, service);
		free(cg);
		return 1;
	}
	free(cg);
	return 0;
}

/*
 * pam_exec's value of @name. It appends PAM's own items after the PAM environment, in which a
 * user's ~/.pam_environment may have put the same names first: getenv() would return the
 * user's PAM_TYPE=close_session or PAM_USER=root. The last one is PAM's; @forged is set when
 * there were more.
 */
static const char *pam_item(const char *name, bool *forged)
{
	size_t len = strlen(name);
	const char *v = NULL;

	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=') {
			if (v)
				*forged = true;
			v = *e + len + 1;
		}
	return v;
}

/* The names of the dynamic loader's variables in the environment ("LD_PRELOAD, ..."), NULL
 * when there are none (or no memory to say so). */
static char *loader_variables(void)
{
	char *names = NULL, *more;

	for (char **e = environ; e && *e; e++) {
		int len = (int)strcspn(*e, "=");

		if (strncmp(*e, "LD_", 3) != 0)
			continue;
		if (asprintf(&more, "%s%s%.*s", names ? names : "", names ? ", " : "", len, *e) < 0)
			more = NULL;
		free(names);
		if (!(names = more))
			return NULL;
	}
	return names;
}

/*
 * Is glibc tuned from the environment? Its tunables (GLIBC_TUNABLES, and the MALLOC_* names
 * that alias some of them) are read at the start of every program, a static one too, and hold
 * for the process's whole life: a user's ~/.pam_environment would tune the allocator of this
 * root process, and clearenv() cannot undo it.
 */
static bool libc_tuned(void)
{
	for (char **e = environ; e && *e; e++)
		if (startswith(*e, "GLIBC_TUNABLES=") || startswith(*e, "MALLOC_"))
			return true;
	return false;
}

/*
 * Run this `jobcg adopt --pam` again (same pid: PAM's process stays our parent) with only
 * PAM's items and PATH, so that glibc starts untuned. @args: the command line as given (getopt
 * has reordered and strtok_r cut the one we parsed). Returns only on failure.
 */
static int pam_reexec(const struct cli_global *pg, char **args, const char *service,
		      const char *type, const char *user)
{
	char *argv[MAX_SERVICES * 2 + 64], *envp[256], items[3][512];
	size_t a = 0, n = 0;

	argv[a++] = (char *)"jobcg";
	if (pg->config_dir) {
		argv[a++] = (char *)"--config-dir";
		argv[a++] = (char *)pg->config_dir;
	}
	for (int v = 0; v < pg->verbose && a < 16; v++)
		argv[a++] = (char *)"-v";
	for (size_t i = 0; args[i]; i++) {
		if (a + 1 >= sizeof(argv) / sizeof(argv[0]))
			return -E2BIG;
		argv[a++] = args[i];
	}
	argv[a] = NULL;
	envp[n++] = (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	if ((size_t)snprintf(items[0], sizeof(items[0]), "PAM_SERVICE=%s", service) >=
		sizeof(items[0]) ||
	    (size_t)snprintf(items[1], sizeof(items[1]), "PAM_TYPE=%s", type) >= sizeof(items[1]) ||
	    (size_t)snprintf(items[2], sizeof(items[2]), "PAM_USER=%s", user ? user : "") >=
		sizeof(items[2]))
		return -E2BIG;
	envp[n++] = items[0];
	envp[n++] = items[1];
	if (user)
		envp[n++] = items[2];
#ifdef JOBCG_TEST_HOOKS
	/* Test builds only: the JOBCG_* variables their tests point jobcg at. */
	for (char **e = environ; e && *e && n < 250; e++)
		if (startswith(*e, "JOBCG_"))
			envp[n++] = *e;
#endif
	envp[n] = NULL;
	execve("/proc/self/exe", argv, envp);
	return -errno;
}

/*
 * pam_exec hands its command the PAM environment, which pam_env fills from the user's own
 * ~/.pam_environment on Debian's sshd session stack: none of it may steer a root jobcg (a
 * JOBCG_ROOT or JOBCG_CONF_DIR of the user's choosing). Only PAM's items are kept, as copies;
 * the configuration comes from --config-dir or the default. Test builds keep the JOBCG_*
 * variables their tests point jobcg at.
 */
static int pam_environment(struct cli_global *pg, char **service, char **type, char **user,
			   char **loader, bool *forged)
{
	const char *s = pam_item("PAM_SERVICE", forged), *t = pam_item("PAM_TYPE", forged),
		   *u = pam_item("PAM_USER", forged);

	*loader = loader_variables();
	*service = s ? strdup(s) : NULL;
	*type = t ? strdup(t) : NULL;
	*user = u ? strdup(u) : NULL;
	if ((s && !*service) || (t && !*type) || (u && !*user))
		return -ENOMEM;
#ifndef JOBCG_TEST_HOOKS
	if (pg->config_dir && pg->config_dir == getenv("JOBCG_CONF_DIR"))
		pg->config_dir = NULL;
	if (clearenv() != 0 || setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin", 1) < 0)
		return -ENOMEM;
#else
	(void)pg;
#endif
	return 0;
}

/* A pidfd for @pid, so that the process moved is the one meant and not a later holder of its
 * pid; -1 where the kernel has none (before Linux 5.3: the library then checks what it can),
 * -2 with the error said when there is no such process. */
static int open_pidfd(pid_t pid)
{
	int fd = -1;

#ifdef SYS_pidfd_open
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
#endif
	if (fd >= 0 || errno == ENOSYS)
		return fd;
	if (errno == EINVAL)
		cli_fail("adopt: %d is not a process id (a thread's?)", (int)pid);
	else
		cli_fail("adopt: process %d: %s", (int)pid, strerror(errno));
	return -2;
}

static int cmd_adopt(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"job", required_argument, NULL, 'J'},     {"pam", no_argument, NULL, 'P'},
	    {"service", required_argument, NULL, 'S'}, {"pam-dir", required_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},	       {},
	};
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	char *services[MAX_SERVICES];
	size_t nservices = 0;
	const char *pam_dir = NULL, *job_arg = NULL;
	char *service = NULL, *type = NULL, *who = NULL, *loader = NULL;
	_cleanup_strv_free_ char **args = NULL;
	bool forged = false;
	struct cli_global pg = *g;
	uint32_t job = 0;
	bool pam = false;
	pid_t pid = 0;
	uid_t uid = (uid_t)-1;
	struct stat st;
	int c, r, ret = 1, pidfd = -1;

	/* Before getopt reorders it and strtok_r cuts --service's list: pam_reexec()'s. */
	if (libc_tuned()) {
		args = calloc((size_t)argc + 1, sizeof(char *));
		for (int i = 0; args && i < argc; i++)
			if (!(args[i] = strdup(argv[i]))) {
				strv_free(args);
				args = NULL;
			}
		if (!args)
			return cli_fail("adopt: out of memory");
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'J':
			if ((r = cli_once("adopt", "--job", job_arg, optarg)))
				return r;
			job_arg = optarg;
			if (jobcg_job_id_parse(optarg, &job) < 0)
				return cli_usage_error(
				    "adopt", "--job '%s': need a number 1..4294967294", optarg);
			break;
		case 'P':
			pam = true;
			break;
		case 'S':
			/* strtok_r() skips empty names: "" or "," would name none, and sshd
			 * would be taken without being asked for */
			if (!optarg[strspn(optarg, ",")])
				return cli_usage_error(
				    "adopt", "--service '%s': no PAM service named", optarg);
			for (char *save = NULL, *s = strtok_r(optarg, ",", &save); s;
			     s = strtok_r(NULL, ",", &save)) {
				if (!*s || strchr(s, '/'))
					return cli_usage_error("adopt",
							       "--service '%s': not a PAM service "
							       "name",
							       s);
				if (nservices == MAX_SERVICES)
					return cli_usage_error("adopt",
							       "--service: at most %d services",
							       MAX_SERVICES);
				services[nservices++] = s;
			}
			break;
		case 'D':
			if ((r = cli_once("adopt", "--pam-dir", pam_dir, optarg)))
				return r;
			if (optarg[0] != '/')
				return cli_usage_error("adopt",
						       "--pam-dir '%s': need an absolute "
						       "path",
						       optarg);
			pam_dir = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			/* "-5": a PID given negative, not an option (nor a job id, as the generic
			 * message would say) */
			if (optopt >= '0' && optopt <= '9')
				return cli_usage_error("adopt", "PID '%s': need a process id",
						       argv[optind - 1]);
			return cli_option_error("adopt", argc, argv, "h");
		}
	}
	if (!pam && (nservices || pam_dir))
		return cli_usage_error("adopt", "--service and --pam-dir go with --pam");
	/* A mistyped one would check no stack, silently: pam_systemd could then take every
	 * login out of its job. */
	if (pam_dir && stat(pam_dir, &st) < 0)
		return cli_usage_error("adopt", "--pam-dir '%s': %s", pam_dir, strerror(errno));
	if (pam_dir && !S_ISDIR(st.st_mode))
		return cli_usage_error("adopt", "--pam-dir '%s': not a directory", pam_dir);
	if (pam) {
		uid_t pw_uid;
		gid_t pw_gid;

		if (optind < argc)
			return cli_usage_error("adopt",
					       "--pam takes no PID (the process is our parent)");
		if (job)
			return cli_usage_error("adopt", "--pam chooses the job: no --job");
		if (pam_environment(&pg, &service, &type, &who, &loader, &forged) < 0) {
			ret = cli_fail("adopt --pam: out of memory");
			goto out;
		}
		if (!service || !*service || !type || !*type) {
			ret = cli_fail("adopt --pam: PAM_SERVICE or PAM_TYPE is not set (run it "
				       "from pam_exec)");
			goto out;
		}
		/* An account line in common-account runs for su, sudo and cron too: those are
		 * not logins to adopt, nor to refuse. */
		if (!service_listed(services, nservices, service) ||
		    strcmp(type, "close_session") == 0) {
			ret = 0;
			goto out;
		}
		if (strcmp(type, "account") != 0 && strcmp(type, "open_session") != 0) {
			ret = cli_fail("adopt --pam: PAM_TYPE '%s': put it on an account line "
				       "(and a session line), not elsewhere",
				       type);
			goto out;
		}
		openlog("jobcg-adopt", LOG_PID, LOG_AUTHPRIV);
		to_syslog = true;
		if (forged)
			say(LOG_WARNING,
			    "the PAM environment sets PAM_SERVICE, PAM_TYPE or PAM_USER itself (a "
			    "user's ~/.pam_environment?): ignored, pam_exec's own values are used");
		if (loader && dynamically_linked()) {
			ret = say(LOG_ERR,
				  "refusing %s's login: the PAM environment sets %s, which the "
				  "dynamic loader of this jobcg has acted on, as root, before "
				  "jobcg could drop it. Run the statically linked jobcg from PAM "
				  "(meson's static_exe, the default) and keep users' "
				  "~/.pam_environment out of the stack (pam_env's user_readenv=1; "
				  "docs/pam.md)",
				  who && *who ? who : "a user", loader);
			goto out;
		}
		if (args) {
			r = pam_reexec(&pg, args, service, type, who);
			ret = say(LOG_ERR,
				  "refusing %s's login: the PAM environment tunes glibc "
				  "(GLIBC_TUNABLES or MALLOC_*, a user's ~/.pam_environment?), and "
				  "jobcg cannot run itself again without it: %s",
				  who && *who ? who : "a user", strerror(-r));
			goto out;
		}
		if (!who || !*who) {
			ret = say(LOG_ERR, "PAM_USER is not set");
			goto out;
		}
		/* A name only: PAM_USER "1000" is a user called so, not uid 1000. */
		r = cli_getent_user_name(who, &pw_uid, &pw_gid);
		if (r < 0) {
			ret = r == -ENOENT
				  ? say(LOG_ERR, "unknown user '%s'", who)
				  : say(LOG_ERR, "%s's login refused: no passwd entry", who);
			goto out;
		}
		/* Administrators must be able to log in to a node without a job. */
		if (pw_uid == 0) {
			ret = 0;
			goto out;
		}
		uid = pw_uid;
		pid = getppid();
		/* Our parent gone, we were reparented: that is not the login's process. Our
		 * parent still after the pidfd is open: the pidfd is the login's process, and a
		 * process that takes its pid once it ends is not moved and left in the job. */
		if (pid > 1 && (pidfd = open_pidfd(pid)) == -2) {
			ret =
			    say(LOG_ERR, "%s's login process %d: cannot follow it", who, (int)pid);
			goto out;
		}
		if (pid <= 1 || getppid() != pid) {
			ret = say(LOG_ERR, "%s's login process is gone (our parent is pid %d)", who,
				  (int)getppid());
			goto out;
		}
	} else {
		unsigned v;

		if (optind + 1 != argc)
			return cli_usage_error("adopt", "need exactly one PID");
		if (cli_parse_uint("PID", argv[optind], 4194304, &v) < 0 || v == 0)
			return cli_usage_error("adopt", "PID '%s': need a process id",
					       argv[optind]);
		if (v == 1)
			return cli_usage_error("adopt", "PID 1 is never adopted into a job");
		pid = (pid_t)v;
		/* Open before anything is read of it: what is checked and moved is this one. */
		if ((pidfd = open_pidfd(pid)) == -2)
			return 1;
	}
	r = cli_ctx_open(&pg, JOBCG_CTX_NO_CREATE_ROOT, &conf, &ctx);
	if (r) {
		if (to_syslog)
			syslog(LOG_ERR, "%s's login refused: jobcg cannot open its context", who);
		ret = r;
		goto out;
	}
	if (pam) {
		ret = strcmp(type, "account") == 0
			  ? pam_account(ctx, pam_dir, service, who, uid, pid, pidfd)
			  : pam_session(ctx, pam_dir, service, who, pid);
		goto out;
	}
	if (job)
		r = pidfd >= 0 ? jobcg_adopt_pidfd(ctx, pidfd, job) : jobcg_adopt(ctx, pid, job);
	/* The uid read after the pidfd was opened, and the library checks the process lived
	 * on after that: it is this process's user. */
	else if ((r = jobcg_pid_uid(pid, &uid)) >= 0)
		r = pidfd >= 0 ? jobcg_adopt_user_pidfd(ctx, pidfd, uid, &job)
			       : jobcg_adopt_user(ctx, pid, uid, &job);
	if (r < 0) {
		cli_print_error(r, "adopt");
		goto out;
	}
	printf("adopted pid %d into job %u (step extern)\n", (int)pid, job);
	ret = 0;
out:
	if (pidfd >= 0)
		close(pidfd);
	cli_ctx_close(conf, ctx);
	free(service);
	free(type);
	free(who);
	free(loader);
	return ret;
}
CLI_COMMAND(adopt, cmd_adopt, "move a login session's process into a job (PAM)");
