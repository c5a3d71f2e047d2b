/* jobcg metrics: the node's jobs, steps and GPUs in the Prometheus text format, printed, written
 * for node_exporter's textfile collector, or served over HTTP. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "metrics_http.h"

static void help(void)
{
	printf("Usage: jobcg metrics [--textfile DIR |\n"
	       "                      --listen ADDRESS:PORT [--user USER] [--allow LIST]]\n\n"
	       "Print the node's metrics in the Prometheus text format (0.0.4): CPU, memory,\n"
	       "pids, OOM kills and I/O of every job and step, the GPUs each may open as the\n"
	       "kernel's device programs say, and node facts. Reads the cgroup tree without the\n"
	       "node lock. Series whose cgroup file does not exist on this host are left out.\n\n"
	       "  --textfile DIR          write DIR/jobcg.prom atomically (node_exporter's\n"
	       "                          textfile collector) instead of printing\n"
	       "  --listen ADDRESS:PORT   serve GET /metrics over HTTP until SIGTERM; a numeric\n"
	       "                          address (127.0.0.1:9810, [::1]:9810)\n"
	       "  --listen-fd FD          serve on an inherited listening socket (jobcg daemon)\n"
	       "  --user USER             talk HTTP as USER (default nobody; root only if named);\n"
	       "                          a child process stays root to collect the metrics\n"
	       "  --allow LIST            serve only clients from these addresses or prefixes\n"
	       "                          (10.1.2.3,10.1.0.0/16,::1,fd00::/8); others are\n"
	       "                          closed as they connect (default: everyone)\n"
	       "  -h, --help              show this help\n");
}

/* DIR/jobcg.prom replaced in one rename: a reader sees the old file or the new, whole. */
static int write_textfile(const char *dir, const char *text, size_t len)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	int fd, dfd, e = 0;
	size_t off = 0;

	/* The collector reads only *.prom: the temporary name must not end so. */
	if (snprintf(tmp, sizeof(tmp), "%s/.jobcg.prom.XXXXXX", dir) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/jobcg.prom", dir) >= (int)sizeof(dst))
		return cli_fail("--textfile %s: path too long", dir);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return cli_fail("--textfile %s: cannot create a file there: %s", dir,
				strerror(errno));
	while (off < len && !e) {
		ssize_t k = write(fd, text + off, len - off);

		if (k < 0 && errno != EINTR)
			e = errno;
		else if (k > 0)
			off += (size_t)k;
	}
	if (!e && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
		e = errno;
	if (close(fd) < 0 && !e)
		e = errno;
	if (!e && rename(tmp, dst) < 0)
		e = errno;
	if (e) {
		unlink(tmp);
		return cli_fail("--textfile: writing %s: %s", dst, strerror(e));
	}
	/* The rename itself survives a crash once the directory is synced. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	return 0;
}

static int cmd_metrics(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"textfile", required_argument, NULL, 't'},
	    {"listen", required_argument, NULL, 'l'},
	    {"listen-fd", required_argument, NULL, 'f'},
	    {"user", required_argument, NULL, 'u'},
	    {"allow", required_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	const char *textfile = NULL, *listen_addr = NULL, *fd_arg = NULL, *user = NULL;
	const char *allow = NULL;
	unsigned listen_fd = 0;
	bool have_fd = false;
	char *text = NULL;
	size_t len = 0;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 't':
			if ((r = cli_once("metrics", "--textfile", textfile, optarg)))
				return r;
			textfile = optarg;
			break;
		case 'l':
			if ((r = cli_once("metrics", "--listen", listen_addr, optarg)))
				return r;
			listen_addr = optarg;
			break;
		case 'f':
			if ((r = cli_once("metrics", "--listen-fd", fd_arg, optarg)))
				return r;
			fd_arg = optarg;
			if (cli_parse_uint("--listen-fd", optarg, INT_MAX, &listen_fd) < 0)
				return cli_usage_error(
				    "metrics", "--listen-fd '%s': need a file descriptor number",
				    optarg);
			have_fd = true;
			break;
		case 'u':
			if (!*optarg)
				return cli_usage_error("metrics", "--user: empty");
			if ((r = cli_once("metrics", "--user", user, optarg)))
				return r;
			user = optarg;
			break;
		case 'a':
			if ((r = cli_once("metrics", "--allow", allow, optarg)))
				return r;
			/* Checked at once: a usage error, before anything is bound. */
			if ((r = metrics_allow("metrics", "--allow", optarg, NULL)))
				return r;
			allow = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("metrics", argc, argv, "h");
		}
	}
	if (optind < argc)
		return cli_usage_error("metrics", "unexpected argument '%s'", argv[optind]);
	if (!!textfile + !!listen_addr + have_fd > 1)
		return cli_usage_error("metrics",
				       "--textfile, --listen and --listen-fd exclude each other");
	if (user && !listen_addr && !have_fd)
		return cli_usage_error("metrics", "--user goes with --listen or --listen-fd");
	if (allow && !listen_addr && !have_fd)
		return cli_usage_error("metrics", "--allow goes with --listen or --listen-fd");
	if (geteuid() != 0)
		return cli_fail(
		    "metrics: needs root: the jobs' owners are in trusted.* extended "
		    "attributes, which only root can read (a reading by another user would "
		    "name no owner)");
	if (have_fd) {
		struct stat st;

		if (fstat((int)listen_fd, &st) < 0 || !S_ISSOCK(st.st_mode))
			return cli_usage_error("metrics", "--listen-fd %u: not a socket",
					       listen_fd);
		return metrics_serve(g, (int)listen_fd, user, allow);
	}
	if (listen_addr) {
		char where[INET6_ADDRSTRLEN + 16];
		uid_t uid;
		gid_t gid;
		int fd;

		/* A user that cannot serve is said before anything is said to be served. getent is
		 * waited for, which a SIGCHLD ignored by whoever started this would defeat (as
		 * metrics_serve() says). */
		signal(SIGCHLD, SIG_DFL);
		if ((r = metrics_user("--user", user, &uid, &gid)) != 0)
			return r;
		r = metrics_listen("metrics", "--listen", listen_addr, &fd);
		if (r)
			return r;
		metrics_where(fd, listen_addr, where, sizeof(where));
		fprintf(stderr, "jobcg: metrics on http://%s/metrics (pid %d)\n", where,
			(int)getpid());
		r = metrics_serve(g, fd, user, allow);
		close(fd);
		return r;
	}
	if (textfile) {
		struct stat st;

		if (stat(textfile, &st) < 0 || !S_ISDIR(st.st_mode))
			return cli_usage_error("metrics", "--textfile %s: not a directory",
					       textfile);
	}
	r = metrics_text(g, 0, &text, &len, NULL);
	if (r)
		return r;
	if (textfile)
		r = write_textfile(textfile, text, len);
	else if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
		r = cli_fail("metrics: writing the output: %s", strerror(errno));
	free(text);
	return r;
}
CLI_COMMAND(metrics, cmd_metrics, "print or serve the node's metrics (Prometheus)");
