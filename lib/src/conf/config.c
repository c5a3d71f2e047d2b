/*
 * jobcg: loading the configuration (cgroup.conf then gres.conf) into one immutable struct. All or
 * nothing: on any error the half-built struct is freed and only the error record remains.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "confload.h"
#include "jobcg-build.h"
#include "config_internal.h"
#include "log.h"
#include "util.h"

int confload_parse(struct confload *l, const char *path, const char *buf, size_t len,
		   conf_stmt_fn fn)
{
	struct conf_parser p = {
	    .fn = fn,
	    .userdata = l,
	    .no_include = l->no_include,
	    .files = &l->c->files,
	    .own_config = true,
	    .trusted_paths = l->trusted_paths,
	    .trusted_dir = l->trusted_dir,
	    .trusted_dirfd = l->trusted_dirfd,
	};
	int r;

	if (buf)
		return conf_parse_buffer(&p, path, buf, len);
	r = conf_parse_file(&p, path);
	return r > 0 ? 0 : r;
}

JOBCG_EXPORT void jobcg_config_free(struct jobcg_config *c)
{
	if (!c)
		return;
	cgconf_done(&c->cgroup);
	gres_conf_done(&c->gres);
	for (size_t i = 0; i < c->nentries; i++)
		free(c->entries[i].value);
	free(c->entries);
	strv_free(c->warnings);
	strv_free(c->files);
	free(c->config_dir);
	free(c->hostname);
	free(c->gres_error);
	free(c->cgroup_error);
	free(c);
}

JOBCG_EXPORT const struct jobcg_config_entry *jobcg_config_entry(const struct jobcg_config *c,
								 const char *key)
{
	for (size_t i = 0; c && i < c->nentries; i++)
		if (strcaseeq(c->entries[i].key, key))
			return &c->entries[i];
	return NULL;
}

static char *default_hostname(void)
{
	char buf[256] = "";

	if (gethostname(buf, sizeof(buf) - 1) < 0)
		return strdup("localhost");
	return strdup(buf);
}

JOBCG_EXPORT const char *jobcg_getenv(const char *name)
{
	return env_secure(name);
}

/*
 * An admin's typo in gres.conf must not keep a busy node's jobs from being ended and cleaned
 * up: a caller that only does that loads without gres.conf, and the error is kept, so that
 * the context refuses whatever would derive the device policy from the partial view (devpolicy
 * and gres code check jobcg_config_gres_error()).
 */
static int gres_tolerate(struct jobcg_config *c, int r)
{
	char buf[8192];

	jobcg_error_format(r, buf, sizeof(buf));
	jobcg_error_clear();
	gres_conf_done(&c->gres);
	c->gres_error = strdup(buf);
	if (!c->gres_error)
		return -ENOMEM;
	log_warning("%s (gres.conf ignored: no device is granted and the device policy is left "
		    "as it is)",
		    buf);
	return 0;
}

JOBCG_EXPORT const char *jobcg_config_gres_error(const struct jobcg_config *c)
{
	return c ? c->gres_error : NULL;
}

JOBCG_EXPORT const char *jobcg_config_cgroup_error(const struct jobcg_config *c)
{
	return c ? c->cgroup_error : NULL;
}

/* Logged once, after the whole file: its first error (cgroupconf.c's cg_tolerate() kept it
 * and went on) and how many more there were. */
static void cgroup_tolerated_warn(const struct jobcg_config *c)
{
	char more[64] = "";

	if (!c->cgroup_error)
		return;
	if (c->cgroup_errors > 1)
		snprintf(more, sizeof(more), ", as %s %u more error%s in it",
			 c->cgroup_errors > 2 ? "are" : "is", c->cgroup_errors - 1,
			 c->cgroup_errors > 2 ? "s" : "");
	log_warning("%s (ignored%s: jobs can be ended, inspected and cleaned up, but none is made "
		    "or constrained until cgroup.conf is fixed)",
		    c->cgroup_error, more);
}

/* Files are read from paths, or from buffers when @bufs is set (bufs[0..1] with lens); with
 * @trusted, through directories checked as open_trusted() does. */
static int load(const char *cgroup_conf, const char *gres_conf, const char *dir,
		const char *hostname, unsigned flags, const char *const *bufs, const size_t *lens,
		bool trusted, int trusted_dirfd, struct jobcg_config **ret)
{
	struct jobcg_config *c = calloc(1, sizeof(*c));
	struct confload l = {.c = c,
			     .flags = flags,
			     .no_include = bufs != NULL,
			     .trusted_paths = trusted,
			     .trusted_dir = trusted_dirfd >= 0 ? dir : NULL,
			     .trusted_dirfd = trusted_dirfd};
	int r;

	if (!c)
		return -ENOMEM;
	r = cgconf_defaults(&c->cgroup);
	if (r < 0)
		goto fail;
	/* Slurm matches NodeName= against slurmd's node name, which need not be the host name:
	 * JOBCG_NODENAME says which one this node is. */
	if (!hostname && !(flags & JOBCG_CONFIG_NO_ENV) && env_secure("JOBCG_NODENAME") &&
	    *env_secure("JOBCG_NODENAME"))
		hostname = env_secure("JOBCG_NODENAME");
	c->hostname = hostname ? strdup(hostname) : default_hostname();
	if (!c->hostname || (dir && !(c->config_dir = strdup(dir)))) {
		r = -ENOMEM;
		goto fail;
	}
	if (cgroup_conf) {
		r = cgconf_parse(&l, cgroup_conf, bufs ? bufs[0] : NULL, bufs ? lens[0] : 0);
		if (r < 0)
			goto fail;
	}
	r = cgconf_finish(&l);
	if (r < 0)
		goto fail;
	cgroup_tolerated_warn(c);
	r = gres_conf ? gres_conf_parse(&l, gres_conf, bufs ? bufs[1] : NULL, bufs ? lens[1] : 0)
		      : 0;
	if (r >= 0)
		r = gres_conf_finish(&l);
	gres_conf_state_free(&l);
	if (r < 0 && r != -ENOMEM && (flags & JOBCG_CONFIG_TOLERATE_GRES)) {
		r = gres_tolerate(c, r);
		if (r < 0)
			goto fail;
	} else if (r < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	if (r == -ENOMEM && jobcg_last_error()->code != -ENOMEM)
		r = error_set(-ENOMEM, "out of memory while loading the configuration");
	gres_conf_state_free(&l);
	jobcg_config_free(c);
	return r;
}

JOBCG_EXPORT int jobcg_config_load_files(const char *cgroup_conf, const char *gres_conf,
					 const char *hostname, unsigned flags,
					 struct jobcg_config **ret)
{
	return_if_null(ret);
	return load(cgroup_conf, gres_conf, NULL, hostname, flags, NULL, NULL, false, -1, ret);
}

int config_load_buffers(const char *cgroup_buf, size_t cgroup_len, const char *gres_buf,
			size_t gres_len, const char *hostname, unsigned flags,
			struct jobcg_config **ret)
{
	const char *bufs[2] = {cgroup_buf, gres_buf};
	size_t lens[2] = {cgroup_len, gres_len};

	return load(cgroup_buf ? "cgroup.conf" : NULL, gres_buf ? "gres.conf" : NULL, NULL,
		    hostname ? hostname : "node1", flags | JOBCG_CONFIG_NO_ENV, bufs, lens, false,
		    -1, ret);
}

JOBCG_EXPORT int jobcg_config_load(const char *config_dir, const char *hostname, unsigned flags,
				   struct jobcg_config **ret)
{
	_cleanup_free_ char *cg = NULL, *gr = NULL;
	_cleanup_close_ int dirfd = -1;
	const char *dir = config_dir;
	bool explicit = true, root = geteuid() == 0;
	struct stat st;

	if (!dir && !(flags & JOBCG_CONFIG_NO_ENV))
		dir = env_secure("JOBCG_CONF_DIR");
	if (!dir || !*dir) {
		dir = JOBCG_SYSCONFDIR;
		explicit = false;
	}
	/*
	 * Read as root, a directory that another user can write (or one below such) would let
	 * that user rename gres.conf away (silent defaults: no device containment) or swap a
	 * file for a link to another: the directory is checked as the state directory is, and
	 * the files are opened through checked directories only.
	 */
	if (root) {
		int r = open_trusted(dir, O_PATH | O_DIRECTORY, "configuration directory", &dirfd);

		if (r == 1 && !explicit) /* the built-in one absent: the defaults */
			return load(NULL, NULL, dir, hostname, flags, NULL, NULL, true, -1, ret);
		if (r == 1)
			return error_set_at(-ENOENT, dir, 0, 0, "configuration directory: %s",
					    strerror(ENOENT));
		if (r < 0)
			return r;
	} else if (explicit) {
		/* A directory someone named must exist; the built-in one may be absent
		 * (defaults). */
		if (stat(dir, &st) < 0) {
			int r = negative_errno();

			return error_set_at(r, dir, 0, 0, "configuration directory: %s",
					    strerror(-r));
		}
		if (!S_ISDIR(st.st_mode))
			return error_set_at(-ENOTDIR, dir, 0, 0,
					    "configuration directory: not a directory");
	}
	cg = strdup_printf("%s/cgroup.conf", dir);
	gr = strdup_printf("%s/gres.conf", dir);
	if (!cg || !gr)
		return -ENOMEM;
	return load(cg, gr, dir, hostname, flags, NULL, NULL, root, dirfd, ret);
}
