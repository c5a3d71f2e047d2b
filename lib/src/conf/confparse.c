/*
 * jobcg: Slurm's configuration line grammar, as s_p_parse_file() reads cgroup.conf and gres.conf:
 * '#' comments (unless escaped), backslash continuation, backslash escapes, Key=Value pairs with
 * case-insensitive keys, optional spaces around '=', "quoted values", and "Include FILE". Stricter
 * than Slurm where Slurm silently misreads: an unterminated quote, a key with no value, and text
 * that is not Key=Value are errors naming the line and column.
 */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>

#include "confparse.h"
#include "log.h"
#include "util.h"

/* A character of a logical line with the physical position it came from. */
struct lchar {
	char c;
	unsigned line, col;
};

struct lbuf {
	struct lchar *v;
	size_t n, cap;
	bool had_comment; /* a '#' cut the line: explains an "unterminated" quote */
};

struct open_file {
	dev_t dev;
	ino_t ino;
};

struct ctx {
	const struct conf_parser *p;
	struct open_file stack[CONF_MAX_INCLUDE_DEPTH + 1];
	unsigned depth;
	uint64_t total; /* bytes read over all files: the same file included many times */
	char *cluster;	/* slurm.conf: the latest ClusterName= so far (Include's "%c") */
};

/* Room for @more characters: a line is copied with one check, not one per character. */
static int lbuf_reserve(struct lbuf *b, size_t more)
{
	size_t ncap = b->cap ? b->cap : 256;
	struct lchar *nv;

	if (b->n + more <= b->cap)
		return 0;
	while (ncap < b->n + more)
		ncap *= 2;
	nv = realloc(b->v, ncap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	b->v = nv;
	b->cap = ncap;
	return 0;
}

static bool is_space(char c)
{
	return isspace((unsigned char)c);
}

static bool is_key_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.';
}

static char *lbuf_dup(const struct lbuf *b, size_t from, size_t to)
{
	char *s = malloc(to - from + 1);

	if (!s)
		return NULL;
	for (size_t i = from; i < to; i++)
		s[i - from] = b->v[i].c;
	s[to - from] = '\0';
	return s;
}

static void pairs_free(struct conf_pair *pairs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(pairs[i].key);
		free(pairs[i].value);
	}
	free(pairs);
}

static int parse_file_at(struct ctx *c, const char *path, const char *from_file, unsigned from_line,
			 unsigned from_col);

/* An error inside an included file also says where it was included from. */
static void add_include_context(const char *file, unsigned line)
{
	const struct jobcg_error *e = jobcg_last_error();
	char efile[sizeof(e->file)], msg[sizeof(e->message)];

	if (!e->code || streq(e->file, file))
		return;
	snprintf(efile, sizeof(efile), "%s", e->file);
	snprintf(msg, sizeof(msg), "%s (included from %s:%u)", e->message, file, line);
	error_set_at(e->code, efile, e->line, e->column, "%s", msg);
}

int conf_include_expand(const char *name, const char *cluster, char **ret)
{
	size_t n = 0, clen = cluster ? strlen(cluster) : 0, len = strlen(name);
	char *out, *o;

	for (const char *p = name; (p = strstr(p, "%c")); p += 2)
		n++;
	if (n && !cluster)
		return -ENOENT;
	if (n && clen > (SIZE_MAX - len - 1) / n)
		return -ENOMEM;
	out = o = malloc(len + n * clen + 1);
	if (!out)
		return -ENOMEM;
	for (const char *p = name; *p;) {
		if (p[0] == '%' && p[1] == 'c') {
			for (size_t k = 0; k < clen; k++)
				*o++ = (char)tolower((unsigned char)cluster[k]);
			p += 2;
		} else
			*o++ = *p++;
	}
	*o = '\0';
	*ret = out;
	return 0;
}

/* "Include FILE" at the start of a statement; returns 1 when handled, 0 when not an include. */
static int handle_include(struct ctx *c, const char *file, const struct lbuf *b, size_t i)
{
	size_t kw = i, start, end;
	_cleanup_free_ char *name = NULL, *path = NULL;

	if (b->n - i < 7)
		return 0;
	for (size_t k = 0; k < 7; k++)
		if (tolower((unsigned char)b->v[i + k].c) != "include"[k])
			return 0;
	/* "include" then white space or the end of the line (Slurm sees the newline) */
	if (b->n - i > 7 && !is_space(b->v[i + 7].c))
		return 0;
	for (i += 7; i < b->n && is_space(b->v[i].c); i++)
		;
	if (i == b->n)
		return error_set_at(-EINVAL, file, b->v[kw].line, b->v[kw].col,
				    "Include needs a file name");
	start = i;
	while (i < b->n && !is_space(b->v[i].c))
		i++;
	end = i;
	while (i < b->n && is_space(b->v[i].c))
		i++;
	if (i < b->n)
		return error_set_at(
		    -EINVAL, file, b->v[i].line, b->v[i].col,
		    "unexpected text after the Include file name (one file per Include line)");
	name = lbuf_dup(b, start, end);
	if (!name)
		return -ENOMEM;
	if (c->p->no_include)
		return error_set_at(-EPERM, file, b->v[kw].line, b->v[kw].col,
				    "Include is not allowed here");
	if (strchr(name, '*') || strchr(name, '?') || strchr(name, '['))
		return error_set_at(-EINVAL, file, b->v[start].line, b->v[start].col,
				    "Include '%s': wildcards are not supported, name one file",
				    name);
	if (strstr(name, "%c")) {
		char *expanded = NULL;
		int e =
		    c->p->slurm_conf ? conf_include_expand(name, c->cluster, &expanded) : -EINVAL;

		if (e == -ENOENT)
			return error_set_at(
			    -EINVAL, file, b->v[start].line, b->v[start].col,
			    "Include '%s': %%c is ClusterName=, which no line before "
			    "this one sets",
			    name);
		if (e == -EINVAL)
			return error_set_at(-EINVAL, file, b->v[start].line, b->v[start].col,
					    "Include '%s': %%c (ClusterName) is expanded in "
					    "slurm.conf only; Slurm fails on it here too",
					    name);
		if (e < 0)
			return e;
		free(name);
		name = expanded;
	}
	if (name[0] == '/')
		path = strdup(name);
	else {
		const char *slash = strrchr(file, '/');

		path = slash ? strdup_printf("%.*s/%s", (int)(slash - file), file, name)
			     : strdup(name);
	}
	if (!path)
		return -ENOMEM;
	int r = parse_file_at(c, path, file, b->v[start].line, b->v[start].col);
	if (r < 0)
		add_include_context(file, b->v[kw].line);
	return r < 0 ? r : 1;
}

static int process_stmt(struct ctx *c, const char *file, const struct lbuf *b)
{
	struct conf_pair *pairs = NULL;
	size_t npairs = 0, i = 0;
	int r;

	while (i < b->n && is_space(b->v[i].c))
		i++;
	if (i == b->n)
		return 0;
	r = handle_include(c, file, b, i);
	if (r != 0)
		return r < 0 ? r : 0;

	while (i < b->n) {
		struct conf_pair pr = {};
		size_t ks = i, ke, vs, ve;
		bool space_after_eq = false;
		struct conf_pair *np;

		if (!is_key_char(b->v[i].c)) {
			unsigned char ch = (unsigned char)b->v[i].c;

			if (isprint(ch))
				r = error_set_at(-EINVAL, file, b->v[i].line, b->v[i].col,
						 "expected Key=Value, found '%c'", ch);
			else
				r = error_set_at(-EINVAL, file, b->v[i].line, b->v[i].col,
						 "expected Key=Value, found byte 0x%02X", ch);
			goto fail;
		}
		while (i < b->n && is_key_char(b->v[i].c))
			i++;
		ke = i;
		while (i < b->n && is_space(b->v[i].c))
			i++;
		/* Slurm's grammar takes Key+=, -=, *= and /= (no blank before the '='), keeps the
		 * operator, and no reader of these files ever looks at it: each is a plain '='.
		 * The readers warn, as one who writes Count+=1 means something else. */
		if (i < b->n && strchr("-*+/", b->v[i].c) && i + 1 < b->n && b->v[i + 1].c == '=') {
			pr.op = b->v[i].c;
			i++;
		}
		if (i >= b->n || b->v[i].c != '=') {
			_cleanup_free_ char *word = lbuf_dup(b, ks, ke);

			r = error_set_at(-EINVAL, file, b->v[ks].line, b->v[ks].col,
					 "expected '=' after '%s' (lines hold Key=Value pairs)",
					 word ? word : "");
			goto fail;
		}
		size_t eq = i++;
		while (i < b->n && is_space(b->v[i].c)) {
			space_after_eq = true;
			i++;
		}
		if (i >= b->n) {
			_cleanup_free_ char *word = lbuf_dup(b, ks, ke);

			r = error_set_at(
			    -EINVAL, file, b->v[eq].line, b->v[eq].col,
			    "missing value after '%s=' (write %s=\"\" for an empty value)",
			    word ? word : "", word ? word : "");
			goto fail;
		}
		if (b->v[i].c == '"') {
			size_t q = i++;

			vs = i;
			while (i < b->n && b->v[i].c != '"')
				i++;
			if (i >= b->n) {
				r = error_set_at(
				    -EINVAL, file, b->v[q].line, b->v[q].col,
				    "unterminated quote (expected a closing '\"' on this line%s)",
				    b->had_comment
					? "; '#' starts a comment even inside quotes, write \\#"
					: "");
				goto fail;
			}
			ve = i++;
			if (i < b->n && !is_space(b->v[i].c)) {
				r = error_set_at(
				    -EINVAL, file, b->v[i].line, b->v[i].col,
				    "expected white space after the closing quote, found '%c'",
				    b->v[i].c);
				goto fail;
			}
			pr.quoted = true;
		} else {
			vs = i;
			while (i < b->n && !is_space(b->v[i].c))
				i++;
			ve = i;
			if (space_after_eq) {
				/* Slurm would take "Type= File=x" as Type="File=x": refuse that. */
				size_t k = vs;

				while (k < ve && is_key_char(b->v[k].c))
					k++;
				if (k > vs && k + 1 < ve && strchr("-*+/", b->v[k].c) &&
				    b->v[k + 1].c == '=')
					k++; /* "Type= Count+=1" */
				if (k > vs && k < ve && b->v[k].c == '=') {
					_cleanup_free_ char *word = lbuf_dup(b, ks, ke);

					r = error_set_at(-EINVAL, file, b->v[eq].line, b->v[eq].col,
							 "missing value after '%s=' (the next word "
							 "is another key)",
							 word ? word : "");
					goto fail;
				}
			}
		}
		pr.key = lbuf_dup(b, ks, ke);
		pr.value = lbuf_dup(b, vs, ve);
		if (!pr.key || !pr.value) {
			free(pr.key);
			free(pr.value);
			r = -ENOMEM;
			goto fail;
		}
		pr.line = b->v[ks].line;
		pr.col = b->v[ks].col;
		if (vs < b->n) {
			pr.vline = b->v[vs].line;
			pr.vcol = b->v[vs].col;
		} else {
			pr.vline = b->v[ve - 1].line;
			pr.vcol = b->v[ve - 1].col + 1;
		}
		if (vs == ve) {
			/* empty quoted value: point just after the opening quote */
			pr.vline = b->v[vs - 1].line;
			pr.vcol = b->v[vs - 1].col + 1;
		}
		np = realloc(pairs, (npairs + 1) * sizeof(*np));
		if (!np) {
			free(pr.key);
			free(pr.value);
			r = -ENOMEM;
			goto fail;
		}
		pairs = np;
		pairs[npairs++] = pr;
		while (i < b->n && is_space(b->v[i].c))
			i++;
	}

	struct conf_stmt st = {
	    .file = file,
	    .line = b->v[0].line,
	    .pairs = pairs,
	    .npairs = npairs,
	};
	for (size_t k = 0; c->p->slurm_conf && k < npairs; k++) {
		if (strcaseeq(pairs[k].key, "ClusterName")) {
			char *v = strdup(pairs[k].value);

			if (!v) {
				r = -ENOMEM;
				goto fail;
			}
			free(c->cluster);
			c->cluster = v;
		}
	}
	r = c->p->fn(&st, c->p->userdata);
fail:
	pairs_free(pairs, npairs);
	return r < 0 ? r : 0;
}

static int parse_buffer(struct ctx *c, const char *name, const char *buf, size_t len)
{
	struct lbuf raw = {}, esc = {};
	size_t pos = 0;

	/* An editor's UTF-8 byte order mark is not part of the first key. */
	if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
		pos = 3;
	unsigned line = 0;
	int r = 0;

	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - buf) : len;
		const char *nul = memchr(buf + pos, '\0', end - pos);
		size_t tend = end;
		size_t cut = tend;
		unsigned bs = 0;
		bool cont = false;

		line++;
		/* Slurm's fgets() reading would silently drop the rest of the line after a NUL byte
		 * (and with it any key there): a file with one is corrupt or binary, say where. */
		if (nul) {
			r = error_set_at(-EINVAL, name, line, (unsigned)(nul - (buf + pos)) + 1,
					 "NUL byte in the line (a corrupt or binary file?)");
			goto out;
		}
		/* A '#' after an even number of backslashes starts a comment. */
		for (size_t k = pos; k < tend; k++) {
			if (buf[k] == '#' && bs % 2 == 0) {
				cut = k;
				raw.had_comment = true;
				break;
			}
			bs = buf[k] == '\\' ? bs + 1 : 0;
		}
		/* An odd number of trailing backslashes (white space after them allowed) continues.
		 */
		size_t k = cut;
		while (k > pos && is_space(buf[k - 1]))
			k--;
		bs = 0;
		while (k > pos && buf[k - 1] == '\\') {
			bs++;
			k--;
		}
		if (bs % 2 == 1) {
			cont = true;
			cut = k + bs - 1;
		}
		r = lbuf_reserve(&raw, cut - pos);
		if (r < 0)
			goto out;
		for (size_t j = pos; j < cut; j++)
			raw.v[raw.n++] = (struct lchar){buf[j], line, (unsigned)(j - pos + 1)};
		pos = nl ? end + 1 : len;
		if (cont && pos < len)
			continue;

		/* Backslash escapes: "\x" is "x" (so "\\" is a backslash and "\#" a '#'). */
		esc.n = 0;
		esc.had_comment = raw.had_comment;
		r = lbuf_reserve(&esc, raw.n);
		if (r < 0)
			goto out;
		for (size_t j = 0; j < raw.n; j++) {
			if (raw.v[j].c == '\\') {
				if (++j >= raw.n)
					break;
			}
			esc.v[esc.n++] = raw.v[j];
		}
		if (esc.n > 0) {
			r = process_stmt(c, name, &esc);
			if (r < 0)
				goto out;
		}
		raw.n = 0;
		raw.had_comment = false;
	}
out:
	free(raw.v);
	free(esc.v);
	return r;
}

static const char *file_type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFIFO:
		return "a FIFO";
	case S_IFDIR:
		return "a directory";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	default:
		return "a special file";
	}
}

/* 0 for a @path that open() did not find because nothing is there; a dangling symbolic link is
 * an error naming it instead: the administrator meant a file to be read, and silent defaults
 * would hide that it is not. */
static int dangling_link(const char *path)
{
	char target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(path, &st) < 0 || !S_ISLNK(st.st_mode))
		return 0;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return error_set_at(-ENOENT, path, 0, 0,
				    "a symbolic link whose target does not exist");
	target[n] = '\0';
	return error_set_at(-ENOENT, path, 0, 0, "a symbolic link to '%s', which does not exist",
			    target);
}

/* Read as root, a file another user can change would let that user choose what root's jobcg
 * does (the devices a job may open, the state directory, the limits): refused unread. */
static int check_trusted(const struct stat *st, const char *path, const char *from_file,
			 unsigned from_line, unsigned from_col)
{
	static const char why[] =
	    "jobcg runs as root and reads no configuration that another user can change";
	char what[PATH_MAX + 32] = "";

	if (st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	if (from_file)
		snprintf(what, sizeof(what), "included file '%s' is ", path);
	if (st->st_uid != 0)
		return error_set_at(-EPERM, from_file ? from_file : path, from_line, from_col,
				    "%sowned by uid %u, not by root: %s", what,
				    (unsigned)st->st_uid, why);
	return error_set_at(-EPERM, from_file ? from_file : path, from_line, from_col,
			    "%swritable by its group or by others (mode %04o): %s", what,
			    (unsigned)(st->st_mode & 07777), why);
}

/* The error record's message set again at @file:@line:@col. */
static int error_move_to(int r, const char *file, unsigned line, unsigned col)
{
	char msg[sizeof(jobcg_last_error()->message)];

	snprintf(msg, sizeof(msg), "%s", jobcg_last_error()->message);
	return error_set_at(r, file, line, col, "%s", msg);
}

static int parse_file_at(struct ctx *c, const char *path, const char *from_file, unsigned from_line,
			 unsigned from_col)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t len;
	int r;

	if (c->depth > CONF_MAX_INCLUDE_DEPTH)
		return error_set_at(-ELOOP, from_file, from_line, from_col,
				    "Include nested more than %d deep", CONF_MAX_INCLUDE_DEPTH);
	/* O_NONBLOCK: opening a FIFO (or a device that waits for a carrier) must not block
	 * every command and login that reads the configuration; only a regular file is read. */
	if (c->p->trusted_paths) {
		const char *what = from_file ? "included file" : "configuration file";
		const char *dir = c->p->trusted_dir, *base = strrchr(path, '/');
		size_t dl = dir ? strlen(dir) : 0;

		/* In the directory already checked: from its descriptor, not walked again. */
		if (dir && c->p->trusted_dirfd >= 0 && base && (size_t)(base - path) == dl &&
		    strncmp(path, dir, dl) == 0 && base[1])
			r = open_trusted_at(c->p->trusted_dirfd, dir, base + 1,
					    O_RDONLY | O_NOCTTY | O_NONBLOCK, what, &fd);
		else
			r = open_trusted(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, what, &fd);
		if (r == -ENOMEM)
			return r;
		if (r < 0 && from_file)
			return error_move_to(r, from_file, from_line, from_col);
		if (r < 0)
			return error_move_to(r, path, 0, 0);
		if (r == 1 && !from_file)
			return 1; /* top-level file missing: the caller uses defaults */
		if (r == 1)
			return error_set_at(-ENOENT, from_file, from_line, from_col,
					    "cannot read included file '%s': %s", path,
					    strerror(ENOENT));
	} else
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = negative_errno();
		if (r == -ENOENT && !from_file) {
			if (c->p->own_config && (r = dangling_link(path)) < 0)
				return r;
			return 1; /* top-level file missing: the caller uses defaults */
		}
		if (from_file)
			return error_set_at(r, from_file, from_line, from_col,
					    "cannot read included file '%s': %s", path,
					    strerror(-r));
		return error_set_at(r, path, 0, 0, "cannot open: %s", strerror(-r));
	}
	if (fstat(fd, &st) < 0)
		return error_set_at(negative_errno(), path, 0, 0, "cannot stat: %s",
				    strerror(errno));
	if (!S_ISREG(st.st_mode)) {
		if (from_file)
			return error_set_at(-EINVAL, from_file, from_line, from_col,
					    "included file '%s' is %s, not a regular file", path,
					    file_type_name(st.st_mode));
		return error_set_at(-EINVAL, path, 0, 0, "%s, not a regular file",
				    file_type_name(st.st_mode));
	}
	if (c->p->own_config && geteuid() == 0 &&
	    (r = check_trusted(&st, path, from_file, from_line, from_col)) < 0)
		return r;
	if (c->total + (uint64_t)st.st_size > CONF_MAX_TOTAL_SIZE)
		return error_set_at(-EFBIG, from_file ? from_file : path, from_line, from_col,
				    "the configuration and its includes exceed %u bytes",
				    CONF_MAX_TOTAL_SIZE);
	for (unsigned i = 0; i < c->depth; i++)
		if (c->stack[i].dev == st.st_dev && c->stack[i].ino == st.st_ino)
			return error_set_at(-ELOOP, from_file, from_line, from_col,
					    "Include loop: '%s' is already being read", path);
	r = read_full_fd(fd, CONF_MAX_FILE_SIZE, &buf, &len);
	if (r == -EFBIG)
		return error_set_at(r, path, 0, 0, "larger than %u bytes", CONF_MAX_FILE_SIZE);
	if (r < 0)
		return error_set_at(r, path, 0, 0, "cannot read: %s", strerror(-r));
	c->total += len;
	if (c->total > CONF_MAX_TOTAL_SIZE)
		return error_set_at(-EFBIG, from_file ? from_file : path, from_line, from_col,
				    "the configuration and its includes exceed %u bytes",
				    CONF_MAX_TOTAL_SIZE);
	if (c->p->files) {
		r = strv_push(c->p->files, strdup(path));
		if (r < 0)
			return r;
	}
	c->stack[c->depth].dev = st.st_dev;
	c->stack[c->depth].ino = st.st_ino;
	c->depth++;
	/* The stored copy of the path outlives this frame (origins point at it). */
	const char *shown = path;
	if (c->p->files)
		shown = (*c->p->files)[strv_length(*c->p->files) - 1];
	r = parse_buffer(c, shown, buf, len);
	c->depth--;
	return r;
}

int conf_parse_file(const struct conf_parser *p, const char *path)
{
	struct ctx c = {.p = p};
	int r = parse_file_at(&c, path, NULL, 0, 0);

	free(c.cluster);
	return r;
}

int conf_parse_buffer(const struct conf_parser *p, const char *name, const char *buf, size_t len)
{
	struct ctx c = {.p = p};
	int r = parse_buffer(&c, name, buf, len);

	free(c.cluster);
	return r;
}

unsigned conf_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[64];

	if (la >= 63 || lb >= 63)
		return 1000;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned prev = row[0];

		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned cur = row[j];
			unsigned cost =
			    tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			unsigned v = prev + cost;

			if (row[j] + 1 < v)
				v = row[j] + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			row[j] = v;
			prev = cur;
		}
	}
	return row[lb];
}

const char *conf_suggest(const char *word, const char *const *candidates)
{
	const char *best = NULL;
	unsigned bestd = 1000, limit = (unsigned)strlen(word) / 3;

	if (limit < 2)
		limit = 2;
	for (; *candidates; candidates++) {
		unsigned d = conf_edit_distance(word, *candidates);

		if (d < bestd) {
			bestd = d;
			best = *candidates;
		}
	}
	return bestd <= limit ? best : NULL;
}

int conf_unknown_key(const struct conf_stmt *st, const struct conf_pair *pr, const char *what,
		     const char *const *candidates)
{
	const char *sugg = conf_suggest(pr->key, candidates);

	if (sugg)
		return error_set_at(-EINVAL, st->file, pr->line, pr->col,
				    "unknown %s key '%s' (did you mean '%s'?)", what, pr->key,
				    sugg);
	return error_set_at(-EINVAL, st->file, pr->line, pr->col,
			    "unknown %s key '%s' (see jobcg-%s(5) for the keys)", what, pr->key,
			    what);
}

int conf_reraise(int r, const char *file, const struct conf_pair *pr, const char *fmt, ...)
{
	const struct jobcg_error *e = jobcg_last_error();
	char msg[sizeof(e->message)], prefix[1024];
	unsigned col = pr->vcol + (e->column ? e->column - 1 : 0);
	va_list ap;

	snprintf(msg, sizeof(msg), "%s", e->message);
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	return error_set_at(r, file, pr->vline, col, "%s: %s", prefix, msg);
}
