/* Unit tests for the Prometheus text of a node reading: units, absent series, +Inf limits, label
 * escaping, GPUs held and free, and promtool's verdict where it is installed. Every family a
 * reading with everything in it has is the one jobcg-metrics(1) and docs/metrics.md list, with
 * the same type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobcg/metrics.h"
#include "tap.h"

static const char *odd_user(uid_t uid, void *userdata)
{
	(void)userdata;
	return uid == 1000 ? "we\"ird\\name\nx" : NULL;
}

static void set(struct jobcg_metrics_cg *cg, enum jobcg_metric_item i, uint64_t v)
{
	cg->value[i] = v;
	cg->have |= 1u << i;
}

/* promtool check metrics on @text: its exit status, or -1 when it is not installed. */
static int promtool(const char *text)
{
	char path[] = "/tmp/jobcg-test-metrics-XXXXXX", cmd[256];
	int fd = mkstemp(path), st;
	FILE *f;

	if (fd < 0 || system("command -v promtool >/dev/null 2>&1") != 0) {
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		return -1;
	}
	f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
	st = system(cmd);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The text of @rel below the source tree (JOBCG_SOURCE_ROOT), or NULL. */
static char *source_file(const char *rel)
{
	const char *root = getenv("JOBCG_SOURCE_ROOT");
	char path[4096], *text = NULL;
	size_t len = 0, cap = 0, n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root ? root : "..", rel);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	do {
		char *t;

		cap = cap ? cap * 2 : 65536;
		t = realloc(text, cap + 1);
		if (!t) {
			free(text);
			fclose(f);
			return NULL;
		}
		text = t;
		n = fread(text + len, 1, cap - len, f);
		len += n;
	} while (len == cap);
	fclose(f);
	text[len] = 0;
	return text;
}

/* Whether the family @name of type @type is listed in the man page @man (".BR name \" (type)\"")
 * and in the tables of @doc ("| `name` | type" or "| `name{labels}` | type ..."). */
static bool man_lists(const char *man, const char *name, const char *type)
{
	char want[256];

	snprintf(want, sizeof(want), "\n.BR %s \" (%s)\"\n", name, type);
	return strstr(man, want) != NULL;
}

static bool doc_lists(const char *doc, const char *name, const char *type)
{
	char row[256];
	size_t n = (size_t)snprintf(row, sizeof(row), "| `%s", name);

	for (const char *p = strstr(doc, row); p; p = strstr(p + 1, row)) {
		const char *q = p + n;

		if (*q == '{')
			q += strcspn(q, "}") + (q[strcspn(q, "}")] ? 1 : 0);
		if (*q == '`' && strncmp(q + 1, " | ", 3) == 0 &&
		    strncmp(q + 4, type, strlen(type)) == 0)
			return true;
	}
	return false;
}

/* Whether "# TYPE @name " is in @text. */
static bool emitted(const char *text, const char *name, size_t len)
{
	char want[256];

	snprintf(want, sizeof(want), "# TYPE %.*s ", (int)len, name);
	return strstr(text, want) != NULL;
}

/* Each family of @text (a reading with everything in it) in the man page and docs/metrics.md,
 * and each family they list in @text. */
static void documented(const char *text)
{
	char *man = source_file("man/jobcg-metrics.1"), *doc = source_file("docs/metrics.md");
	unsigned families = 0, listed = 0;

	if (!man || !doc) {
		tap_skip("no man/jobcg-metrics.1 or docs/metrics.md (JOBCG_SOURCE_ROOT)");
		free(man);
		free(doc);
		return;
	}
	for (const char *p = strstr(text, "# TYPE "); p; p = strstr(p + 1, "# TYPE ")) {
		char name[128], type[32];

		if (sscanf(p, "# TYPE %127s %31s", name, type) != 2)
			continue;
		families++;
		ok(man_lists(man, name, type), "jobcg-metrics(1) lists %s (%s)", name, type);
		ok(doc_lists(doc, name, type), "docs/metrics.md lists %s (%s)", name, type);
	}
	ok(families >= 30, "the reading has every family (%u)", families);
	for (const char *p = strstr(man, "\n.BR jobcg_"); p; p = strstr(p + 1, "\n.BR jobcg_")) {
		const char *name = p + 5;
		size_t len = strcspn(name, " \n");

		if (strncmp(name + len, " \" (", 4) != 0)
			continue; /* a mention, not an entry */
		listed++;
		ok(emitted(text, name, len), "jobcg-metrics(1)'s %.*s is in the reading", (int)len,
		   name);
	}
	for (const char *p = strstr(doc, "| `jobcg_"); p; p = strstr(p + 1, "| `jobcg_")) {
		const char *name = p + 3;
		size_t len = strcspn(name, "`{");

		ok(emitted(text, name, len), "docs/metrics.md's %.*s is in the reading", (int)len,
		   name);
	}
	is_int((int)listed, (int)families, "jobcg-metrics(1) lists as many families as there are");
	free(man);
	free(doc);
}

int main(void)
{
	struct jobcg_metrics_cg cgs[3] = {};
	struct jobcg_metrics_gpu gpus[2] = {
	    {.pos = 0,
	     .index = 0,
	     .device = (char *)"/dev/nvidia0",
	     .uuid = (char *)"GPU-abc",
	     .pci_bus_id = (char *)"0000:3b:00.0",
	     .held = true,
	     .allocated = true},
	    {.pos = 1, .index = 1, .device = (char *)"/dev/nvidia1"},
	};
	struct jobcg_metrics m = {
	    .cgs = cgs,
	    .n_cgs = 3,
	    .n_jobs = 2,
	    .n_steps = 1,
	    .gpus = gpus,
	    .n_gpus = 2,
	    .gpus_free = 1,
	    .constrain_devices = true,
	    .device_mode = "node",
	    .errors = 2,
	    .duration_usec = 1234,
	};
	struct jobcg_metrics_format_opts o = {
	    .size = sizeof(o), .user_name = odd_user, .errors_before = 5, .version = "9.9"};
	char *text = NULL;
	size_t len = 0;
	int r;

	cgs[0].job = 7;
	cgs[0].have_owner = true;
	cgs[0].uid = 1000;
	set(&cgs[0], JOBCG_METRIC_CPU_USER_USEC, 1500000);
	set(&cgs[0], JOBCG_METRIC_CPU_SYSTEM_USEC, 7);
	set(&cgs[0], JOBCG_METRIC_MEM_MAX, UINT64_MAX);
	set(&cgs[0], JOBCG_METRIC_OOM_KILL, 0);
	jobcg_gres_set_add(&cgs[0].gpus, 0);
	cgs[1] = cgs[0];
	strcpy(cgs[1].step, "0");
	cgs[1].have = 0;
	set(&cgs[1], JOBCG_METRIC_CPU_USER_USEC, 250);
	cgs[2].job = 8; /* no owner recorded, nothing readable */

	r = jobcg_metrics_format(&m, &o, &text, &len);
	is_int(r, 0, "formats");
	if (r < 0)
		return tap_done();
	is_int((int)len, (int)strlen(text), "length without the NUL");
	ok(strstr(text, "# TYPE jobcg_cpu_user_seconds_total counter\n") != NULL,
	   "counters are typed counter, in seconds");
	ok(strstr(text, "jobcg_cpu_user_seconds_total{job=\"7\",step=\"\",user=\"we\\\"ird\\\\name"
			"\\nx\"} 1.500000\n") != NULL,
	   "microseconds as seconds; quote, backslash and newline escaped in a label value");
	ok(strstr(text, "jobcg_cpu_user_seconds_total{job=\"7\",step=\"0\",") != NULL &&
	       strstr(text, "} 0.000250\n") != NULL,
	   "a step's series carries its step id");
	ok(strstr(text, "jobcg_cpu_system_seconds_total{job=\"7\",step=\"\",") != NULL &&
	       strstr(text, "} 0.000007\n") != NULL,
	   "small values keep their leading zeros");
	ok(strstr(text, "jobcg_memory_limit_bytes{job=\"7\",step=\"\",user=") != NULL &&
	       strstr(text, "\"} +Inf\n") != NULL,
	   "a limit of max is +Inf");
	ok(strstr(text, "jobcg_oom_kills_total{job=\"7\",step=\"\",") != NULL,
	   "a counter read as 0 is there, as 0");
	ok(strstr(text, "jobcg_memory_usage_bytes") == NULL,
	   "an item read nowhere (file absent) has no family at all, never 0");
	ok(strstr(text, "job=\"8\"") == NULL, "a job with nothing readable has no series");
	ok(strstr(text, "jobcg_gpu_info{gpu=\"0\",uuid=\"GPU-abc\",pci_bus_id=\"0000:3b:00.0\","
			"device=\"/dev/nvidia0\",job=\"7\",step=\"\",") != NULL,
	   "the GPU a job may open, with uuid and PCI bus id");
	ok(strstr(text, "jobcg_gpu_info{gpu=\"0\",uuid=\"GPU-abc\",pci_bus_id=\"0000:3b:00.0\","
			"device=\"/dev/nvidia0\",job=\"7\",step=\"0\",") != NULL,
	   "... and its step");
	ok(strstr(text,
		  "jobcg_gpu_info{gpu=\"1\",uuid=\"\",pci_bus_id=\"\",device=\"/dev/nvidia1\","
		  "job=\"\",step=\"\",user=\"\"} 1\n") != NULL,
	   "a GPU no cgroup may open: job=\"\"");
	ok(strstr(text, "\njobcg_jobs 2\n") && strstr(text, "\njobcg_steps 1\n") &&
	       strstr(text, "\njobcg_gpus 2\n") && strstr(text, "\njobcg_gpus_free 1\n"),
	   "counts of jobs, steps, GPUs and free GPUs");
	ok(strstr(text, "jobcg_build_info{version=\"9.9\"} 1\n") != NULL,
	   "version as an info gauge");
	ok(strstr(text, "jobcg_device_mode_info{mode=\"node\"} 1\n") != NULL, "device mode");
	ok(strstr(text, "\njobcg_collect_errors_total 7\n") != NULL,
	   "the error counter adds the earlier readings' errors");
	ok(strstr(text, "jobcg_reserved_cpus") == NULL, "no reservation: no reservation series");
	r = promtool(text);
	if (r < 0)
		tap_skip("promtool is not installed (Debian package prometheus)");
	else
		is_int(r, 0, "promtool check metrics accepts it");
	free(text);

	/* Reservations, where the configuration has them. */
	m.have_reserved_cpus = true;
	m.reserved_cpus = 2;
	m.reserved_mem_bytes = 1 << 30;
	r = jobcg_metrics_format(&m, &o, &text, &len);
	ok(r == 0 && strstr(text, "\njobcg_reserved_cpus 2\n") &&
	       strstr(text, "\njobcg_reserved_memory_bytes 1073741824\n"),
	   "reserved CPUs and memory when set");
	if (r == 0)
		free(text);

	/* Everything: every item of a job read, a reservation. */
	struct jobcg_metrics_resv resv = {.name = (char *)"r1",
					  .devices = (char *)"gpu:1",
					  .cpus = (char *)"2-3",
					  .mem_bytes = 1 << 20,
					  .jobs = 1,
					  .valid = true};

	for (unsigned i = 0; i < _JOBCG_METRIC_MAX; i++)
		set(&cgs[2], (enum jobcg_metric_item)i, i);
	m.resvs = &resv;
	m.n_resvs = 1;
	r = jobcg_metrics_format(&m, &o, &text, &len);
	is_int(r, 0, "formats a reading with everything in it");
	if (r == 0) {
		documented(text);
		free(text);
	}
	m.resvs = NULL;
	m.n_resvs = 0;

	/* A node with nothing at all. */
	struct jobcg_metrics empty = {.device_mode = "off"};
	r = jobcg_metrics_format(&empty, NULL, &text, &len);
	is_int(r, 0, "formats an empty node");
	if (r == 0) {
		ok(strstr(text, "\njobcg_jobs 0\n") && !strstr(text, "jobcg_gpu_info"),
		   "no jobs, no GPU family");
		r = promtool(text);
		if (r < 0)
			tap_skip("promtool is not installed");
		else
			is_int(r, 0, "promtool accepts the empty node");
		free(text);
	}
	return tap_done();
}
