/* jobcg kernel tests: per-test cgroup subtree and scratch directory, cleaned up at exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ftw.h>

#include "ktest.h"
#include "tap.h"

static char mount_path[PATH_MAX];
static char test_root[PATH_MAX];
static char tmp_dir[PATH_MAX];
static char pin_dir[PATH_MAX];

static int find_cgroup2(void)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;

	if (!f)
		return -errno;
	while ((m = getmntent(f))) {
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(mount_path, sizeof(mount_path), "%s", m->mnt_dir);
			endmntent(f);
			return 0;
		}
	}
	endmntent(f);
	return -ENOENT;
}

const char *ktest_cgroup_mount(void)
{
	return mount_path;
}

static int kill_and_wait_empty(const char *path)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/cgroup.kill", path);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0) {
			/* fall through: rmdir will report EBUSY */
		}
		close(fd);
	}
	/* Wait (bounded) for cgroup.events to say populated 0. */
	snprintf(p, sizeof(p), "%s/cgroup.events", path);
	for (int i = 0; i < 200; i++) {
		char buf[256] = "";
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 0;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0 && strstr(buf, "populated 0"))
			return 0;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

static int remove_rec(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];
		if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
		remove_rec(sub);
	}
	closedir(d);
	for (int i = 0; i < 100; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

int ktest_remove_tree(const char *path)
{
	kill_and_wait_empty(path);
	return remove_rec(path);
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void cleanup(void)
{
	if (test_root[0] && ktest_remove_tree(test_root) < 0)
		fprintf(stderr, "# warning: could not remove %s\n", test_root);
	if (tmp_dir[0])
		nftw(tmp_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	if (pin_dir[0])
		nftw(pin_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

const char *ktest_setup(const char *name)
{
	struct timespec ts;

	if (geteuid() != 0)
		tap_plan_skip_all("kernel tests need root");
	if (find_cgroup2() < 0)
		tap_plan_skip_all("no cgroup v2 mount");
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(test_root, sizeof(test_root), "%s/jobcg-test-%s-%d-%lx", mount_path, name,
		 (int)getpid(), (unsigned long)ts.tv_nsec);
	if (mkdir(test_root, 0755) < 0) {
		printf("Bail out! mkdir %s: %s\n", test_root, strerror(errno));
		exit(1);
	}
	atexit(cleanup);
	return test_root;
}

const char *ktest_tmpdir(void)
{
	if (!tmp_dir[0]) {
		snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/jobcg-ktest-XXXXXX");
		if (!mkdtemp(tmp_dir)) {
			printf("Bail out! mkdtemp: %s\n", strerror(errno));
			exit(1);
		}
		if (!test_root[0])
			atexit(cleanup);
	}
	return tmp_dir;
}

char *ktest_pin_dir(const char *name)
{
	if (!pin_dir[0]) {
		snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/jobcg-test-%s-%d-%ld", name,
			 (int)getpid(), (long)time(NULL));
		if (!test_root[0] && !tmp_dir[0])
			atexit(cleanup);
	}
	return pin_dir;
}

const char *ktest_gpu_conf(unsigned n, const char *type, const char *pins,
			   char (*ret_devs)[PATH_MAX])
{
	static char dir[PATH_MAX];
	char path[PATH_MAX + 16], dev[PATH_MAX];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/conf", ktest_tmpdir());
	snprintf(path, sizeof(path), "%s/gres.conf", dir);
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || !(f = fopen(path, "we"))) {
		printf("Bail out! cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(dev, sizeof(dev), "%s/nvidia%u", ktest_tmpdir(), i);
		/* No driver behind it: an open past the device check fails with ENXIO. */
		if (mknod(dev, S_IFCHR | 0600, makedev(195, i)) < 0) {
			printf("Bail out! mknod %s: %s\n", dev, strerror(errno));
			exit(1);
		}
		fprintf(f, "Name=gpu%s%s File=%s\n", type ? " Type=" : "", type ? type : "", dev);
		if (ret_devs)
			memcpy(ret_devs[i], dev, sizeof(dev));
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/cgroup.conf", dir);
	if (!(f = fopen(path, "we"))) {
		printf("Bail out! cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fprintf(f, "ConstrainDevices=yes\nBpfPinDir=%s\n", pins);
	fclose(f);
	return dir;
}

void ktest_diag_lines(const char *prefix, const char *text)
{
	for (const char *p = text; p && *p;) {
		const char *eol = strchr(p, '\n');
		int len = eol ? (int)(eol - p) : (int)strlen(p);

		tap_diag("%s%.*s", prefix, len, p);
		p = eol ? eol + 1 : NULL;
	}
}

char *ktest_capture(const char *cmd, size_t *ret_len)
{
	static char out[1 << 20];
	FILE *f = popen(cmd, "re");
	size_t n;

	if (!f)
		return NULL;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	if (pclose(f) != 0)
		return NULL;
	if (ret_len)
		*ret_len = n;
	return out;
}

/* Fork a child in cgroup @dir that runs open(@dev, @flags), or mknod(@dev, @rdev) and unlink
 * when @flags is -1; the child exits with the errno it saw (0 for none), 255 if it could not
 * join @dir. */
static int in_cgroup(const char *dir, const char *dev, int flags, dev_t rdev)
{
	char procs[PATH_MAX + 16];
	int status;
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(procs, O_WRONLY | O_CLOEXEC), e;

		if (fd < 0 || write(fd, "0", 1) != 1)
			_exit(255);
		close(fd);
		if (flags == -1) {
			e = mknod(dev, S_IFCHR | 0600, rdev) < 0 ? errno : 0;
			if (e == 0)
				unlink(dev);
		} else {
			fd = open(dev, flags | O_CLOEXEC);
			e = fd >= 0 || errno == ENXIO || errno == ENODEV ? 0 : errno;
		}
		_exit(e > 0 && e < 255 ? e : e ? 254 : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) == 255)
		return -1;
	return WEXITSTATUS(status);
}

int ktest_open_in(const char *dir, const char *dev, int flags)
{
	return in_cgroup(dir, dev, flags, 0);
}

int ktest_mknod_in(const char *dir, const char *path, dev_t rdev)
{
	return in_cgroup(dir, path, -1, rdev);
}
