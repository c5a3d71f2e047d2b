/* jobcg decode: print the device rules a cgroup device program enforces. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common.h"
#include "decode_out.h"
#include "jobcg/decode.h"
#include "jobcg/inspect.h"

#define MAX_INPUT (64u << 20)

static int read_input(const char *path, char **ret, size_t *ret_len)
{
	int fd = streq_dash(path) ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		if (len == cap) {
			if (cap >= MAX_INPUT) {
				free(buf);
				if (fd != STDIN_FILENO)
					close(fd);
				return -EFBIG;
			}
			cap = cap ? cap * 2 : 65536;
			char *t = realloc(buf, cap + 1);
			if (!t) {
				free(buf);
				if (fd != STDIN_FILENO)
					close(fd);
				return -ENOMEM;
			}
			buf = t;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = -errno;
			free(buf);
			if (fd != STDIN_FILENO)
				close(fd);
			return e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (!buf)
		buf = calloc(1, 1);
	if (!buf)
		return -ENOMEM;
	buf[len] = 0;
	*ret = buf;
	*ret_len = len;
	return 0;
}

static bool program_uses_maps(const struct bpf_insn *insns, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (insns[k].code == (BPF_LD | BPF_IMM | BPF_DW) &&
		    (insns[k].src_reg == BPF_PSEUDO_MAP_FD ||
		     insns[k].src_reg == BPF_PSEUDO_MAP_VALUE))
			return true;
	return false;
}

/* Whether the verdict depends on the calling cgroup (jobcg's node program looks its ancestors
 * up in the policy map): such a program decodes only for one cgroup. */
static bool program_per_cgroup(const struct bpf_insn *insns, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (insns[k].code == (BPF_JMP | BPF_CALL) && insns[k].src_reg == 0 &&
		    (insns[k].imm == BPF_FUNC_get_current_cgroup_id ||
		     insns[k].imm == BPF_FUNC_get_current_ancestor_cgroup_id))
			return true;
	return false;
}

static void help(void)
{
	printf("Usage: jobcg decode [--cgroup CGROUP] [FILE|-] [--json]\n\n"
	       "Print the device rules a cgroup device (eBPF) program enforces. FILE holds the\n"
	       "text of 'bpftool prog dump xlated id N', its JSON form (bpftool -j), or the raw\n"
	       "instructions 'bpftool prog dump xlated id N file F' writes; the form is detected\n"
	       "from the content. '-' or no FILE reads standard input. Maps the program names by\n"
	       "id (map[id:N]) are read from the kernel when run as root where it is loaded.\n\n"
	       "Output: 'c *:* ACCESS', its exceptions ('c MAJOR:* ACCESS', 'c MAJOR:MINOR\n"
	       "ACCESS'), then the same for 'b'. The most specific matching line decides. ACCESS\n"
	       "lists r, w, m that are each allowed alone, or '-'. Lines starting with '#' flag\n"
	       "behaviour the rules cannot express.\n\n"
	       "  --cgroup CGROUP  decode the program as processes of CGROUP see it (a cgroup\n"
	       "                   path, JOB or JOB.STEP): needed when its verdict depends on\n"
	       "                   the calling cgroup, as jobcg's node program's does\n"
	       "  --json           print JSON\n"
	       "  -h, --help       show this help\n");
}

static int cmd_decode(int argc, char **argv, const struct cli_global *g)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"cgroup", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	bool json = false;
	const char *path = "-", *cgroup = NULL;
	char cgpath[4096];
	char *data = NULL;
	size_t len = 0;
	struct jobcg_decoded *d = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'c':
			if ((r = cli_once("decode", "--cgroup", cgroup, optarg)))
				return r;
			if (!*optarg)
				return cli_usage_error("decode", "--cgroup: empty argument");
			cgroup = optarg;
			break;
		case 'h':
			help();
			return 0;
		default:
			return cli_option_error("decode", argc, argv, "h");
		}
	}
	if (optind < argc)
		path = argv[optind++];
	if (optind < argc)
		return cli_usage_error("decode", "too many arguments");
	/* "" is no file, not standard input */
	if (path && !*path)
		return cli_usage_error("decode", "FILE: empty argument");
	r = read_input(path, &data, &len);
	if (r < 0)
		return cli_fail("%s: %s", streq_dash(path) ? "standard input" : path, strerror(-r));
	const char *name = streq_dash(path) ? "<stdin>" : path;
	struct bpf_insn *insns = NULL;
	size_t n = 0;
	r = jobcg_decode_parse(data, len, name, &insns, &n);
	free(data);
	if (r < 0) {
		cli_print_error(r, "decode");
		return 1;
	}
	if (cgroup) {
		r = resolve_cgroup_arg(g, cgroup, cgpath, sizeof(cgpath));
		if (r == -ECANCELED) {
			free(insns);
			return 1;
		}
		if (r >= 0)
			r = jobcg_decode_for_cgroup(insns, n, cgpath, &d);
	} else {
		r = jobcg_decode_program(insns, n, NULL, &d);
		/* Maps named by id ("map[id:12]") are live on this host: read them when we may. */
		if (r == -EOPNOTSUPP && program_uses_maps(insns, n))
			r = jobcg_decode_with_live_maps(insns, n, &d);
	}
	bool per_cgroup = program_per_cgroup(insns, n);
	free(insns);
	if (r == -EOPNOTSUPP && !cgroup && per_cgroup) {
		cli_print_error(r, "program is opaque");
		fprintf(stderr,
			"jobcg: its verdict depends on the calling cgroup; decode it as one cgroup "
			"sees it:\n  %sjobcg decode --cgroup CGROUP %s\n"
			"jobcg: CGROUP is a cgroup directory, JOB or JOB.STEP ('jobcg devices "
			"CGROUP' combines all its programs)\n",
			streq_dash(path) ? "bpftool prog dump xlated id N | " : "",
			streq_dash(path) ? "-" : path);
		return 1;
	}
	if (r == -EOPNOTSUPP) {
		cli_print_error(r, "program is opaque");
		return 1;
	}
	if (r < 0) {
		cli_print_error(r, "decode");
		return 1;
	}
	if (json) {
		struct json_object *o = decode_out_json(d);
		printf("%s\n", json_object_to_json_string_ext(
				   o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else
		decode_out_text(stdout, d, NULL);
	jobcg_decoded_free(d);
	return 0;
}
CLI_COMMAND(decode, cmd_decode, "print the device rules an eBPF device program enforces");
