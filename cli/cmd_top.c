/* jobcg top: the jobs and steps of the node with their CPU, memory, pids and GPUs, refreshed in
 * the terminal (or printed, with -b), like systemd-cgtop. */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "jobcg/metrics.h"
#include "metrics_http.h"

enum sort_by { SORT_CPU, SORT_MEM, SORT_PIDS, SORT_JOB };

struct row {
	const struct jobcg_metrics_cg *cg;
	double cpu; /* percent of one CPU since the last reading; < 0 unknown */
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void help(void)
{
	printf("Usage: jobcg top [-b] [-n N] [-d SECONDS] [-o cpu|mem|pids|job]\n\n"
	       "Show the jobs and steps of this node with their CPU use (percent of one CPU\n"
	       "over the last interval), memory, pids and the GPUs the kernel lets them open,\n"
	       "refreshed every interval. Keys: q quits; c, m, p, j sort by CPU, memory, pids,\n"
	       "job. Values a host cannot read (controller not enabled) show as '-'.\n\n"
	       "  -b, --batch          plain text, no terminal control (the default when\n"
	       "                       standard output is not a terminal)\n"
	       "  -n, --iterations N   stop after N refreshes (default: until q or a signal)\n"
	       "  -d, --delay SECONDS  seconds between refreshes (default 1, at least 0.1)\n"
	       "  -o, --order KEY      sort by cpu (default), mem, pids or job\n"
	       "  -h, --help           show this help\n");
}

static uint64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int collect(struct jobcg_ctx *ctx, struct jobcg_metrics **ret)
{
	int r = jobcg_metrics_collect(ctx, ret);

	if (r < 0) {
		cli_print_error(r, "top");
		return 1;
	}
	return 0;
}

static const struct jobcg_metrics_cg *find_cg(const struct jobcg_metrics *m, uint32_t job,
					      const char *step)
{
	for (size_t i = 0; m && i < m->n_cgs; i++)
		if (m->cgs[i].job == job && strcmp(m->cgs[i].step, step) == 0)
			return &m->cgs[i];
	return NULL;
}

static enum sort_by sort_key;

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	const struct jobcg_metrics_cg *p = x->cg, *q = y->cg;
	uint64_t u = 0, v = 0;

	switch (sort_key) {
	case SORT_CPU:
		if (x->cpu != y->cpu)
			return x->cpu > y->cpu ? -1 : 1;
		break;
	case SORT_MEM:
		u = p->value[JOBCG_METRIC_MEM_CURRENT];
		v = q->value[JOBCG_METRIC_MEM_CURRENT];
		break;
	case SORT_PIDS:
		u = p->value[JOBCG_METRIC_PIDS_CURRENT];
		v = q->value[JOBCG_METRIC_PIDS_CURRENT];
		break;
	case SORT_JOB:
		break;
	}
	if (u != v)
		return u > v ? -1 : 1;
	if (p->job != q->job)
		return p->job < q->job ? -1 : 1;
	return strcmp(p->step, q->step);
}

static void human(char *buf, size_t size, uint64_t v)
{
	static const char units[] = "BKMGTP";
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%lluB", (unsigned long long)v);
	else
		snprintf(buf, size, "%.1f%c", d, units[u]);
}

/* "0,2" of the GPUs a cgroup may open (node-wide indices), "?" appended when uncertain. */
static void gpu_list(char *buf, size_t size, const struct jobcg_metrics *m,
		     const struct jobcg_metrics_cg *cg)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t g = 0; g < m->n_gpus && len + 12 < size; g++)
		if (jobcg_gres_set_has(&cg->gpus, m->gpus[g].pos))
			len += (size_t)snprintf(buf + len, size - len, "%s%u", len ? "," : "",
						m->gpus[g].index);
	if (cg->gpus_uncertain && len + 2 < size)
		strcat(buf, "?");
	if (!buf[0])
		snprintf(buf, size, "-");
}

/* One line, cut to @width columns (0: no limit). */
static void emit(FILE *f, unsigned width, bool tty, const char *line)
{
	size_t n = strlen(line);

	if (width && n > width)
		n = width;
	fwrite(line, 1, n, f);
	fputs(tty ? "\033[K\r\n" : "\n", f);
}

static void show(FILE *f, const struct jobcg_metrics *m, const struct jobcg_metrics *prev,
		 uint64_t interval_usec, bool tty, unsigned width, unsigned height)
{
	struct row *rows = calloc(m->n_cgs ? m->n_cgs : 1, sizeof(*rows));
	char line[512], mem[16], pids[16], cpu[16], gpus[256], step[JOBCG_STEP_ID_MAX + 1];
	time_t now = time(NULL);
	struct tm tm;
	unsigned lines = 0;
	int user_w = 10;

	if (!rows)
		return;
	for (size_t i = 0; i < m->n_cgs; i++) {
		const struct jobcg_metrics_cg *cg = &m->cgs[i],
					      *old = find_cg(prev, cg->job, cg->step);

		rows[i].cg = cg;
		rows[i].cpu = -1;
		if (old && interval_usec && jobcg_metrics_cg_has(cg, JOBCG_METRIC_CPU_USAGE_USEC) &&
		    jobcg_metrics_cg_has(old, JOBCG_METRIC_CPU_USAGE_USEC) &&
		    cg->value[JOBCG_METRIC_CPU_USAGE_USEC] >=
			old->value[JOBCG_METRIC_CPU_USAGE_USEC])
			rows[i].cpu = 100.0 *
				      (double)(cg->value[JOBCG_METRIC_CPU_USAGE_USEC] -
					       old->value[JOBCG_METRIC_CPU_USAGE_USEC]) /
				      (double)interval_usec;
	}
	qsort(rows, m->n_cgs, sizeof(*rows), cmp_rows);
	if (tty)
		fputs("\033[H", f);
	localtime_r(&now, &tm);
	strftime(cpu, sizeof(cpu), "%H:%M:%S", &tm);
	snprintf(line, sizeof(line),
		 "jobcg top - %s  jobs %zu  steps %zu  gpus %zu (%u free)  "
		 "devices %s",
		 cpu, m->n_jobs, m->n_steps, m->n_gpus, m->gpus_free,
		 m->device_mode ? m->device_mode : "off");
	emit(f, width, tty, line);
	lines = 2;
	if (m->cgroup_conf_error || m->gres_conf_error) {
		snprintf(line, sizeof(line),
			 "%s%s%s has an error: no job is made until it is fixed (jobcg check)",
			 m->cgroup_conf_error ? "cgroup.conf" : "",
			 m->cgroup_conf_error && m->gres_conf_error ? " and " : "",
			 m->gres_conf_error ? "gres.conf" : "");
		emit(f, width, tty, line);
		lines++;
	}
	/* USER widens to the longest name shown, as cli_table's columns do: a name cut to ten
	 * characters can be another user's (the terminal's width still cuts the whole line). */
	for (size_t i = 0; i < m->n_cgs && (!height || lines + 1 + i < height); i++) {
		const char *user =
		    rows[i].cg->have_owner ? metrics_user_name(rows[i].cg->uid, NULL) : NULL;

		if (user && strnlen(user, 64) > (size_t)user_w)
			user_w = (int)strnlen(user, 64);
	}
	snprintf(line, sizeof(line), "%-10s %-11s %-*s %6s %9s %6s  %s", "JOB", "STEP", user_w,
		 "USER", "CPU%", "MEMORY", "PIDS", "GPUS");
	emit(f, width, tty, line);
	for (size_t i = 0; i < m->n_cgs && (!height || lines + 1 < height); i++, lines++) {
		const struct jobcg_metrics_cg *cg = rows[i].cg;
		const char *user = cg->have_owner ? metrics_user_name(cg->uid, NULL) : "-";
		char uid[16];

		if (!user) {
			snprintf(uid, sizeof(uid), "%u", (unsigned)cg->uid);
			user = uid;
		}
		if (rows[i].cpu < 0)
			snprintf(cpu, sizeof(cpu), "-");
		else
			snprintf(cpu, sizeof(cpu), "%.1f", rows[i].cpu);
		if (jobcg_metrics_cg_has(cg, JOBCG_METRIC_MEM_CURRENT))
			human(mem, sizeof(mem), cg->value[JOBCG_METRIC_MEM_CURRENT]);
		else
			snprintf(mem, sizeof(mem), "-");
		if (jobcg_metrics_cg_has(cg, JOBCG_METRIC_PIDS_CURRENT))
			snprintf(pids, sizeof(pids), "%llu",
				 (unsigned long long)cg->value[JOBCG_METRIC_PIDS_CURRENT]);
		else
			snprintf(pids, sizeof(pids), "-");
		gpu_list(gpus, sizeof(gpus), m, cg);
		snprintf(step, sizeof(step), "%s", cg->step[0] ? cg->step : "-");
		snprintf(line, sizeof(line), "%-10u %-11s %-*s %6s %9s %6s  %s", cg->job, step,
			 user_w, user, cpu, mem, pids, gpus);
		emit(f, width, tty, line);
	}
	if (tty)
		fputs("\033[J", f);
	else
		fputs("\n", f);
	fflush(f);
	free(rows);
}

static void term_size(unsigned *ret_w, unsigned *ret_h)
{
	struct winsize ws = {};

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
		*ret_w = ws.ws_col;
		*ret_h = ws.ws_row;
	} else {
		*ret_w = 80;
		*ret_h = 24;
	}
}

/* Wait @usec for a key: its character, 0 at the end of the wait, -1 on a stop signal. */
static int wait_key(bool keys, uint64_t usec)
{
	uint64_t end = mono_usec() + usec;

	for (;;) {
		uint64_t now = mono_usec();
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		int k;

		if (stop_signal)
			return -1;
		if (now >= end)
			return 0;
		k = poll(&p, keys ? 1 : 0, (int)((end - now + 999) / 1000));
		if (k > 0) {
			char c;

			if (read(STDIN_FILENO, &c, 1) == 1)
				return (unsigned char)c;
			keys = false; /* end of input: only the clock from now on */
		}
	}
}

static int cmd_top(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"batch", no_argument, NULL, 'b'},	     {"iterations", required_argument, NULL, 'n'},
	    {"delay", required_argument, NULL, 'd'}, {"order", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},	     {},
	};
	struct sigaction sa = {.sa_handler = on_stop};
	struct jobcg_metrics *prev = NULL, *cur = NULL;
	struct jobcg_config *conf = NULL;
	struct jobcg_ctx *ctx = NULL;
	struct termios saved, raw;
	bool batch = false, keys;
	unsigned iterations = 0, done = 0;
	uint64_t delay = 1000000, t_prev = 0;
	const char *n_arg = NULL, *d_arg = NULL, *o_arg = NULL;
	int c, r = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "bn:d:o:h", opts, NULL)) >= 0) {
		switch (c) {
		case 'b':
			batch = true;
			break;
		case 'n':
			if ((r = cli_once("top", "-n", n_arg, optarg)))
				return r;
			n_arg = optarg;
			if (cli_parse_uint("-n", optarg, 1000000000, &iterations) < 0 ||
			    !iterations)
				return cli_usage_error(
				    "top", "-n '%s': need a number 1..1000000000", optarg);
			break;
		case 'd': {
			char *end;
			double d;

			if ((r = cli_once("top", "-d", d_arg, optarg)))
				return r;
			d_arg = optarg;
			errno = 0;
			d = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(d >= 0.1) || d > 86400)
				return cli_usage_error("top", "-d '%s': seconds from 0.1 to 86400",
						       optarg);
			delay = (uint64_t)(d * 1e6);
			break;
		}
		case 'o':
			if ((r = cli_once("top", "-o", o_arg, optarg)))
				return r;
			o_arg = optarg;
			if (strcmp(optarg, "cpu") == 0)
				sort_key = SORT_CPU;
			else if (strcmp(optarg, "mem") == 0)
				sort_key = SORT_MEM;
			else if (strcmp(optarg, "pids") == 0)
				sort_key = SORT_PIDS;
			else if (strcmp(optarg, "job") == 0)
				sort_key = SORT_JOB;
			else
				return cli_usage_error("top", "-o '%s': cpu, mem, pids or job",
						       optarg);
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("top", argc, argv, "bn:d:o:h");
		}
	}
	if (optind < argc)
		return cli_usage_error("top", "unexpected argument '%s'", argv[optind]);
	if (geteuid() != 0)
		return cli_fail(
		    "top: needs root: the jobs' owners are in trusted.* extended "
		    "attributes, which only root can read (a reading by another user would "
		    "name no owner)");
	if (!isatty(STDOUT_FILENO))
		batch = true;
	/* Once: the configuration's warning goes to the normal screen, not over every refresh. */
	r = cli_ctx_open_cleanup(g, 0, &conf, &ctx);
	if (r)
		return r;
	keys = !batch && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (keys) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 1;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	}
	if (!batch)
		fputs("\033[?1049h\033[H\033[2J", stdout); /* the alternate screen, as top */

	/* A first reading to measure CPU use against: the first screen has figures too. */
	r = collect(ctx, &prev);
	t_prev = mono_usec();
	if (!r && wait_key(false, delay < 200000 ? delay : 200000) < 0)
		done = iterations = 1;
	while (!r && !stop_signal && (!iterations || done < iterations)) {
		uint64_t t;
		unsigned w = 0, h = 0;
		int k;

		r = collect(ctx, &cur);
		if (r)
			break;
		t = mono_usec();
		if (!batch)
			term_size(&w, &h);
		show(stdout, cur, prev, t - t_prev, !batch, w, h);
		jobcg_metrics_free(prev);
		prev = cur;
		cur = NULL;
		t_prev = t;
		if (++done == iterations)
			break;
		do {
			k = wait_key(keys, delay);
			if (k == 'c')
				sort_key = SORT_CPU;
			else if (k == 'm')
				sort_key = SORT_MEM;
			else if (k == 'p')
				sort_key = SORT_PIDS;
			else if (k == 'j')
				sort_key = SORT_JOB;
		} while (k > 0 && k != 'q' && k != 'c' && k != 'm' && k != 'p' && k != 'j');
		if (k == 'q' || k < 0)
			break;
	}
	if (!batch)
		fputs("\033[?1049l", stdout);
	fflush(stdout);
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	jobcg_metrics_free(prev);
	jobcg_metrics_free(cur);
	cli_ctx_close(conf, ctx);
	return r;
}
CLI_COMMAND(top, cmd_top, "show the jobs and steps with their CPU, memory and GPUs, live");
