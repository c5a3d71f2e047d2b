/* jobcg: configuration loading (placeholder: defaults only; the parsers replace this). */
#include "jobcg/config.h"
#include "log.h"
#include "util.h"

JOBCG_EXPORT void jobcg_config_free(struct jobcg_config *c)
{
	if (!c)
		return;
	free(c->cgroup.mountpoint);
	free(c->cgroup.plugin);
	free(c->cgroup.slice);
	strv_free(c->cgroup.enable_extra_controllers);
	free(c->cgroup.tree_root);
	free(c->cgroup.scope_name);
	free(c->cgroup.bpf_pin_dir);
	free(c->cgroup.state_dir);
	free(c->config_dir);
	free(c->hostname);
	free(c);
}

JOBCG_EXPORT int jobcg_config_load(const char *config_dir, const char *hostname, unsigned flags,
				   struct jobcg_config **ret)
{
	struct jobcg_config *c = calloc(1, sizeof(*c));
	const char *e;

	if (!c)
		return -ENOMEM;
	c->cgroup.slice = strdup("system.slice");
	c->cgroup.scope_name = strdup("jobcg.scope");
	c->cgroup.systemd_timeout_ms = 1000;
	c->cgroup.allowed_ram_space = 100;
	c->cgroup.max_ram_percent = 100;
	c->cgroup.max_swap_percent = 100;
	c->cgroup.min_ram_space_mb = 30;
	c->cgroup.bpf_pin_dir = strdup((e = getenv("JOBCG_BPF_PIN_DIR")) ? e : "/sys/fs/bpf/jobcg");
	c->cgroup.state_dir = strdup((e = getenv("JOBCG_STATE_DIR")) ? e : "/var/lib/jobcg");
	if ((e = getenv("JOBCG_ROOT")))
		c->cgroup.tree_root = strdup(e);
	*ret = c;
	return 0;
}
