/*
 * jobcg: reading a PAM service's stack (/etc/pam.d/SERVICE and what it includes) for what
 * matters to `jobcg adopt --pam`: where jobcg adopt runs, and whether pam_systemd runs in the
 * session phase, where systemd-logind would move an adopted login out of its job.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "jobcg/adopt.h"
#include "log.h"
#include "pamstack.h"
#include "util.h"

#define PAM_MAX_DEPTH  16	  /* Linux-PAM itself stops at a few levels of include */
#define PAM_MAX_FILE   (1u << 20) /* a PAM file is a few KiB */
#define PAM_MAX_TOKENS 64

struct scan {
	const char *dir;
	struct jobcg_pam_scan *res;
};

JOBCG_EXPORT void jobcg_pam_scan_free(struct jobcg_pam_scan *s)
{
	if (!s)
		return;
	free(s->file);
	free(s->adopt_account);
	free(s->adopt_session);
	free(s->pam_systemd);
	free(s->user_env);
	free(s->adopt_exe);
	strv_free(s->notes);
	free(s);
}

/* Takes @text (NULL: out of memory). */
static int note(struct scan *s, char *text)
{
	return strv_push(&s->res->notes, text);
}

/* Split @line in place into whitespace-separated tokens; "[...]" (a control or an argument
 * with spaces) is one token. Returns the count. */
static size_t tokenize(char *line, char **tok, size_t max)
{
	size_t n = 0;
	char *p = line;

	while (n < max) {
		p += strspn(p, " \t\r\f\v");
		if (!*p)
			break;
		tok[n++] = p;
		if (*p == '[') {
			char *end = strchr(p, ']');

			p = end ? end + 1 : p + strlen(p);
		} else
			p += strcspn(p, " \t\r\f\v");
		if (!*p)
			break;
		*p++ = '\0';
	}
	return n;
}

static const char *basename_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* pam_exec.so's arguments: its own options, then the command. Is the command `jobcg adopt
 * --pam`? Returns the command's path, NULL when it is not. */
static const char *runs_adopt_pam(char **arg, size_t n)
{
	size_t i = 0, exe;
	bool adopt = false;

	while (i < n && arg[i][0] != '/')
		i++; /* pam_exec's options (quiet, stdout, log=..., type=...) */
	if (i == n || !startswith(basename_of(arg[i]), "jobcg"))
		return NULL;
	for (exe = i++; i < n; i++) {
		if (streq(arg[i], "adopt"))
			adopt = true;
		else if (adopt && (streq(arg[i], "--pam") || startswith(arg[i], "--pam=")))
			return arg[exe];
	}
	return NULL;
}

/* pam_env.so's arguments: does it read the user's own file? pam_env takes the last value of
 * an option it is given twice. */
static bool reads_user_env(char **arg, size_t n)
{
	bool on = false;

	for (size_t i = 0; i < n; i++)
		if (startswith(arg[i], "user_readenv="))
			on = !streq(arg[i] + strlen("user_readenv="), "0");
	return on;
}

static int where(char **ret, const char *path, unsigned line, const char *from)
{
	if (*ret)
		return 0; /* the first one in stack order is what runs first */
	*ret = from ? strdup_printf("%s:%u (included from %s)", path, line, from)
		    : strdup_printf("%s:%u", path, line);
	return *ret ? 0 : -ENOMEM;
}

static int scan_file(struct scan *s, const char *name, const char *only_type, unsigned depth,
		     const char *from);

static int scan_line(struct scan *s, char *line, const char *path, unsigned lineno,
		     const char *only_type, unsigned depth, const char *from)
{
	char *tok[PAM_MAX_TOKENS];
	size_t n = tokenize(line, tok, PAM_MAX_TOKENS);
	const char *type, *exe;
	_cleanup_free_ char *here = NULL;

	if (n == 0)
		return 0;
	here = from ? strdup_printf("%s:%u, from %s", path, lineno, from)
		    : strdup_printf("%s:%u", path, lineno);
	if (!here)
		return -ENOMEM;
	if (streq(tok[0], "@include"))
		return n < 2 ? 0 : scan_file(s, tok[1], only_type, depth + 1, here);
	if (n < 3)
		return 0;
	/* "-session": the same line, only quiet when the module is missing. */
	type = tok[0][0] == '-' ? tok[0] + 1 : tok[0];
	if (only_type && !strcaseeq(type, only_type))
		return 0;
	if (strcaseeq(tok[1], "include") || strcaseeq(tok[1], "substack"))
		return scan_file(s, tok[2], type, depth + 1, here);
	if (strcaseeq(type, "session") && streq(basename_of(tok[2]), "pam_systemd.so"))
		return where(&s->res->pam_systemd, path, lineno, from);
	/* pam_env sets the environment at pam_setcred (auth lines) and at the session's opening:
	 * both come before a session line of ours, neither before an account line. */
	if ((strcaseeq(type, "auth") || (strcaseeq(type, "session") && !s->res->adopt_session)) &&
	    streq(basename_of(tok[2]), "pam_env.so") && reads_user_env(tok + 3, n - 3))
		return where(&s->res->user_env, path, lineno, from);
	if (streq(basename_of(tok[2]), "pam_exec.so") && (exe = runs_adopt_pam(tok + 3, n - 3))) {
		if (!s->res->adopt_exe && !(s->res->adopt_exe = strdup(exe)))
			return -ENOMEM;
		if (strcaseeq(type, "account"))
			return where(&s->res->adopt_account, path, lineno, from);
		if (strcaseeq(type, "session"))
			return where(&s->res->adopt_session, path, lineno, from);
	}
	return 0;
}

static int read_pam_file(const char *path, char **ret)
{
	_cleanup_close_ int fd = -1;
	struct stat st;

	/* Not blocking on a FIFO, nor reading a device: only a regular file is a PAM file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	return read_full_fd(fd, PAM_MAX_FILE, ret, NULL);
}

/* One file's text (modified in place): '#' starts a comment, a backslash joins lines. */
static int scan_text(struct scan *s, char *text, const char *path, const char *only_type,
		     unsigned depth, const char *from)
{
	unsigned lineno = 0;
	int r;

	for (char *p = text; *p;) {
		unsigned first = ++lineno;
		char *start = p, *out = p;

		while (*p && *p != '\n') {
			if (p[0] == '\\' && p[1] == '\n') {
				p += 2;
				lineno++;
				*out++ = ' ';
				continue;
			}
			*out++ = *p++;
		}
		if (*p)
			p++;
		*out = '\0';
		if ((out = strchr(start, '#')))
			*out = '\0';
		r = scan_line(s, start, path, first, only_type, depth, from);
		if (r < 0)
			return r;
	}
	return 0;
}

static int scan_file(struct scan *s, const char *name, const char *only_type, unsigned depth,
		     const char *from)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	int r;

	if (depth > PAM_MAX_DEPTH)
		return note(s, strdup_printf("%s: includes nested deeper than %d (from %s)", name,
					     PAM_MAX_DEPTH, from ? from : ""));
	path = name[0] == '/' ? strdup(name) : strdup_printf("%s/%s", s->dir, name);
	if (!path)
		return -ENOMEM;
	r = read_pam_file(path, &text);
	if (r < 0) {
		if (depth == 0)
			return error_set(r, "cannot read %s: %s", path,
					 r == -EINVAL ? "not a regular file" : strerror(-r));
		return note(s, strdup_printf("%s: cannot be read (%s; included from %s)", path,
					     strerror(-r), from));
	}
	if (depth == 0 && !(s->res->file = strdup(path)))
		return -ENOMEM;
	return scan_text(s, text, path, only_type, depth, from);
}

int pam_scan_buffer(const char *pam_dir, const char *name, const char *text, size_t len,
		    struct jobcg_pam_scan **ret)
{
	struct jobcg_pam_scan *res = calloc(1, sizeof(*res));
	_cleanup_free_ char *copy = strndup(text, len);
	struct scan s = {.dir = pam_dir, .res = res};
	int r;

	if (!res || !copy || !(res->file = strdup(name))) {
		jobcg_pam_scan_free(res);
		return -ENOMEM;
	}
	r = scan_text(&s, copy, name, NULL, 0, NULL);
	if (r < 0) {
		jobcg_pam_scan_free(res);
		return r;
	}
	*ret = res;
	return 0;
}

JOBCG_EXPORT int jobcg_pam_scan(const char *pam_dir, const char *service,
				struct jobcg_pam_scan **ret)
{
	return_if_null(ret);
	struct jobcg_pam_scan *res;
	struct scan s;
	int r;

	if (!service || !*service || strchr(service, '/') || streq(service, "..") ||
	    streq(service, "."))
		return error_set(-EINVAL, "invalid PAM service name '%s'", service ? service : "");
	res = calloc(1, sizeof(*res));
	if (!res)
		return -ENOMEM;
	s = (struct scan){.dir = pam_dir && *pam_dir ? pam_dir : "/etc/pam.d", .res = res};
	r = scan_file(&s, service, NULL, 0, NULL);
	if (r < 0) {
		jobcg_pam_scan_free(res);
		return r;
	}
	*ret = res;
	return 0;
}
