/* jobcg internal: Slurm's configuration line grammar (s_p_parse_file), shared by cgroup.conf and
 * gres.conf. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* One Key=Value of a statement, with where it was written (for errors). */
struct conf_pair {
	char *key;	      /* as written (compare case-insensitively) */
	char *value;	      /* quotes and backslash escapes removed; "" allowed when quoted */
	unsigned line, col;   /* physical line and 1-based column of the key */
	unsigned vline, vcol; /* of the value's first character (inside the quotes) */
	bool quoted;
	char op; /* '+', '-', '*' or '/' of Key+=Value (ignored, as Slurm), else 0 */
};

/* One logical line (physical lines joined by a trailing backslash) holding Key=Value pairs. */
struct conf_stmt {
	const char *file; /* path as shown to the user; lives as long as the parse */
	unsigned line;	  /* first physical line */
	struct conf_pair *pairs;
	size_t npairs;
};

/* Called for each statement in file order; a negative return stops the parse and is returned. */
typedef int (*conf_stmt_fn)(const struct conf_stmt *st, void *userdata);

struct conf_parser {
	conf_stmt_fn fn;
	void *userdata;
	bool no_include; /* "Include" is an error (fuzzing: never open files) */
	char ***files;	 /* when set, every file read is appended (paths as shown) */
	/* jobcg's own configuration: a top-level file that is a dangling symbolic link is an
	 * error (not a missing file), and with effective uid 0 every file read, includes too,
	 * must be owned by root and writable by no one else. */
	bool own_config;
	/* Root reading its configuration directory: every file, includes too, is opened with
	 * open_trusted() (directories on the way root's and writable by no one else, links
	 * followed only when root's), so that no other user can rename a file away or swap in
	 * another. A missing top-level file still gives 1 (defaults). */
	bool trusted_paths;
	/* With trusted_paths: the configuration directory, already checked, open (O_PATH) as
	 * trusted_dirfd (-1: none): a file directly in it is opened from there, without walking
	 * its path from / again. */
	const char *trusted_dir;
	int trusted_dirfd;
	/* Slurm's slurm.conf: "%c" in an Include's file name is the ClusterName= set by the
	 * lines before it, in lower case, as Slurm 22.05's parse_config.c expands it. In any
	 * other file (gres.conf, cgroup.conf) Slurm has no ClusterName to expand and the
	 * Include fails: so it does here. */
	bool slurm_conf;
};

/* Largest configuration file read (including each included file). */
#define CONF_MAX_FILE_SIZE (16u << 20)
/* Most bytes read for one parse, all included files together. */
#define CONF_MAX_TOTAL_SIZE (64u << 20)
/* Deepest chain of Include lines. */
#define CONF_MAX_INCLUDE_DEPTH 16

/**
 * Parse @path. Returns 1 (no error record) when the top-level file does not exist (callers use
 * defaults), 0 when parsed; every failure sets the error record with file, line and column.
 * Includes are resolved relative to the including file's directory.
 */
int conf_parse_file(const struct conf_parser *p, const char *path);

/** Parse a buffer; a NUL byte in it is an error at its line and column (a corrupt or binary
 * file: Slurm's fgets() reading would silently drop the rest of that line). */
int conf_parse_buffer(const struct conf_parser *p, const char *name, const char *buf, size_t len);

/**
 * An Include's file name @name with Slurm's include modifiers expanded: each "%c" is @cluster
 * in lower case (the value is not looked into again). -ENOENT when @name has one and @cluster
 * is NULL; any other '%' is left as it is, as Slurm leaves it. No error record.
 */
int conf_include_expand(const char *name, const char *cluster, char **ret);

/** Case-insensitive Damerau-free edit distance, for did-you-mean suggestions. */
unsigned conf_edit_distance(const char *a, const char *b);
/** The closest of @candidates (NULL-terminated) to @word when close enough, else NULL. */
const char *conf_suggest(const char *word, const char *const *candidates);
/**
 * -EINVAL for the key of @pr, which is none of @candidates (NULL-terminated), in a @what file
 * ("cgroup.conf"): the nearest candidate suggested where one is close, else the man page named.
 */
int conf_unknown_key(const struct conf_stmt *st, const struct conf_pair *pr, const char *what,
		     const char *const *candidates);
/** Re-raise the error record left by a value parser (column relative to the value) at @pr. */
int conf_reraise(int r, const char *file, const struct conf_pair *pr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
