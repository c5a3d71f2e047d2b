/* jobcg: choosing where the delegated tree root comes from (systemd scope or plain mkdir). */
#include <sys/stat.h>

#include "config_internal.h"
#include "log.h"
#include "scope.h"
#include "scope_choose.h"
#include "util.h"

bool scope_systemd_running(void)
{
	struct stat st;

	/*
	 * The same test as sd_booted(): systemd creates this directory early at boot. Done here
	 * rather than by calling sd_booted() so that libsystemd is loaded only when its backend
	 * is actually used (sdbus_dl.h).
	 */
	return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

bool scope_use_systemd(const struct jobcg_config *conf)
{
	return !conf->cgroup.ignore_systemd && scope_systemd_running();
}

int scope_ensure(const struct jobcg_config *conf, const char *mount, const char *root_rel,
		 const struct scope_backend **ret_backend, char **ret_root)
{
	const struct scope_backend *b = &scope_mkdir_backend;
	int r;

	/*
	 * THE place where the systemd backend gets chosen: systemd running and not
	 * IgnoreSystemd => systemd; if that fails and IgnoreSystemdOnFailure=yes => mkdir.
	 */
	if (scope_use_systemd(conf)) {
		r = scope_systemd_backend.ensure(conf, mount, root_rel, ret_root);
		if (r >= 0) {
			*ret_backend = &scope_systemd_backend;
			return r;
		}
		if (!conf->cgroup.ignore_systemd_on_failure)
			return r;
		log_warning("systemd scope failed (%s); IgnoreSystemdOnFailure=yes: using mkdir",
			    jobcg_last_error()->message);
	}
	r = b->ensure(conf, mount, root_rel, ret_root);
	if (r < 0)
		return r;
	*ret_backend = b;
	return r;
}

const char *scope_backend_name_for(const struct jobcg_config *conf, bool systemd_running)
{
	if (systemd_running && !conf->cgroup.ignore_systemd)
		return "systemd";
	return "mkdir";
}

const char *scope_backend_name(const struct jobcg_config *conf)
{
	return scope_backend_name_for(conf, scope_systemd_running());
}
