/* Kernel test: a context's probe (statfs and /proc/cgroups, no mount table) sees this host as
 * `jobcg check`'s full probe (the mount table) does: mount, layout, controllers, what v1 holds,
 * what cannot be enforced. */
#include "jobcg/context.h"
#include "jobcg/sysinfo.h"
#include "kcli.h"

static bool strv_has(char **v, const char *s)
{
	for (; v && *v; v++)
		if (strcmp(*v, s) == 0)
			return true;
	return false;
}

int main(void)
{
	const unsigned wanted = (1u << JOBCG_CTRL_CPUSET) | (1u << JOBCG_CTRL_CPU) |
				(1u << JOBCG_CTRL_MEMORY) | (1u << JOBCG_CTRL_PIDS);
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct jobcg_sysinfo *full = NULL;
	const struct jobcg_sysinfo *s;
	size_t n = 0;

	kcli_setup("ctx-probe", "jobcg");
	if (jobcg_config_load(NULL, NULL, 0, &conf) < 0 || jobcg_ctx_open(conf, 0, &ctx) < 0 ||
	    jobcg_sysinfo_probe(conf, &full) < 0) {
		printf("Bail out! cannot probe: %s\n", jobcg_last_error()->message);
		return 1;
	}
	s = jobcg_ctx_sysinfo(ctx);
	tap_diag("mount %s, v2 controllers 0x%x, v1 0x%x", full->mount, full->available,
		 full->v1_bound);
	is_str(s->mount, full->mount, "the same cgroup v2 mount");
	is_int(s->layout, full->layout, "the same layout");
	is_str(s->kernel, full->kernel, "the same kernel");
	is_int(s->available, full->available, "the same v2 controllers");
	is_int(s->usable, full->usable, "the same controllers reaching jobs");
	/* A context asks which controllers v1 holds only when one it wants is missing. */
	if (wanted & ~full->available)
		is_int(s->v1_bound, full->v1_bound, "the same controllers bound to v1");
	else
		is_int(s->v1_bound & wanted, 0, "nothing wanted is bound to v1 (not asked)");
	is_int(s->freeze.supported, full->freeze.supported, "the same cgroup.freeze");
	is_int(s->kill.supported, full->kill.supported, "the same cgroup.kill");
	is_int(s->xattr.supported, full->xattr.supported, "the same xattr support");
	/* Every limitation a context states, `jobcg check` states too, word for word; check's
	 * own extra is the device program it alone loads. */
	for (char **l = s->limitations; l && *l; l++, n++)
		ok(strv_has(full->limitations, *l), "check says it too: %s", *l);
	for (char **l = full->limitations; l && *l; l++)
		if (!strv_has(s->limitations, *l))
			ok(strncmp(*l, "device access cannot be constrained", 35) == 0,
			   "only check's device line is missing from the context's: %s", *l);
	tap_diag("%zu limitations", n);

	jobcg_sysinfo_free(full);
	jobcg_ctx_free(ctx);
	jobcg_config_free(conf);
	return tap_done();
}
