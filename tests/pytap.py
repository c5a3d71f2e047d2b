"""Shared by jobcg's Python tests: TAP output, and for kernel tests a private cgroup subtree,
state, configuration and BPF pin directory that are removed at the end, whatever happened. A
test imports it after putting tests/ on sys.path."""
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

_n = 0
_failed = 0


def ok(good, what):
    global _n, _failed
    _n += 1
    if not good:
        _failed += 1
    what = " ".join(str(what).split("\n"))  # one TAP line, whatever the description holds
    print(f"{'ok' if good else 'not ok'} {_n} - {what}", flush=True)
    return good


def skip(what):
    """A skipped check, as tests/tap.h's tap_skip(): a failure where JOBCG_MUST_WORK=1."""
    global _n, _failed
    _n += 1
    what = " ".join(str(what).split("\n"))
    if os.environ.get("JOBCG_MUST_WORK") == "1":
        _failed += 1
        print(f"not ok {_n} - (JOBCG_MUST_WORK) skipped: {what}", flush=True)
    else:
        print(f"ok {_n} # SKIP {what}", flush=True)


def test_hooks():
    """Whether the jobcg under test has pause and crash points and test flags
    (-Dtest_hooks=true: tests/meson.build says so in JOBCG_TEST_HOOKS)."""
    return os.environ.get("JOBCG_TEST_HOOKS") == "1"


def coverage():
    """Whether the build counts coverage (-Db_coverage=true: JOBCG_COVERAGE), as
    tests/tap.h's tap_coverage()."""
    return os.environ.get("JOBCG_COVERAGE") == "1"


def require_hooks(why):
    """For a program that is all pause and crash points: without them it skips as a whole (a
    failure where JOBCG_MUST_WORK=1), before it makes anything; exits."""
    if test_hooks():
        return
    if os.environ.get("JOBCG_MUST_WORK") == "1":
        print(f"not ok 1 - (JOBCG_MUST_WORK) skipped: {why}\n1..1", flush=True)
        sys.exit(1)
    print(f"1..0 # SKIP {why}", flush=True)
    sys.exit(0)


def diag(text):
    for line in str(text).splitlines():
        print("# " + line, flush=True)


def finish():
    """The plan line; the exit status for sys.exit()."""
    print(f"1..{_n}", flush=True)
    return 1 if _failed else 0


def run_checks(body, *args):
    """body(*args), a crash counted as a failure with its traceback."""
    try:
        body(*args)
    except Exception as x:
        ok(False, f"the test ran to its end ({x!r})")
        diag(traceback.format_exc())


def v2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if parts[sep + 1] == "cgroup2":
                return parts[4]
    return None


def kernel_skip():
    """Prints the TAP skip and returns True where a kernel test cannot run."""
    if os.geteuid() != 0:
        print("1..0 # SKIP kernel tests need root")
        return True
    if not v2_mount():
        print("1..0 # SKIP no cgroup v2 mount")
        return True
    return False


def wait_file(path, pred, secs=10):
    """The text of the file at @path once @pred(text) holds, or after @secs (a daemon's log)."""
    end = time.monotonic() + secs
    while True:
        with open(path) as f:
            text = f.read()
        if pred(text) or time.monotonic() >= end:
            return text
        time.sleep(0.2)


def zombie(pid):
    """Whether @pid is a child that ended and was not reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return False


# Run by KernelEnv.open_in in a process of its own: joins the cgroup (argv[1], its cgroup.procs),
# then opens each further argument and prints what it got.
_OPEN_IN = r"""
import errno, os, sys
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
out = []
for p in sys.argv[2:]:
    try:
        os.close(os.open(p, os.O_RDONLY))
        out.append(0)
    except OSError as e:
        out.append(0 if e.errno in (errno.ENXIO, errno.ENODEV) else e.errno)
print(" ".join(map(str, out)))
"""


class KernelEnv:
    """JOBCG_ROOT (a uniquely named subtree of the v2 mount), JOBCG_STATE_DIR, JOBCG_CONF_DIR
    (an empty configuration directory, `conf`) and JOBCG_BPF_PIN_DIR of the test's own, and
    the build's jobcg. Nothing is created in the cgroup tree here."""

    def __init__(self, name):
        self.mount = v2_mount()
        self.tag = f"jobcg-test-{name}-{os.getpid()}-{time.time_ns() % 1000000:x}"
        self.root = os.path.join(self.mount, self.tag)
        self.tmp = tempfile.mkdtemp(prefix="jobcg-ktest-")
        self.state = os.path.join(self.tmp, "state")
        self.conf = os.path.join(self.tmp, "conf")
        os.mkdir(self.conf)
        self.env = dict(os.environ)
        self.env.update(JOBCG_ROOT=self.tag, JOBCG_STATE_DIR=self.state,
                        JOBCG_CONF_DIR=self.conf)
        self.env.setdefault("JOBCG_BPF_PIN_DIR", os.path.join("/sys/fs/bpf", self.tag))
        self.build = os.path.abspath(os.environ.get("JOBCG_BUILD_ROOT", "."))
        self.jobcg = os.path.join(self.build, "cli", "jobcg")
        self.runners = []  # start_step()'s

    def run(self, *args, env=None, **kw):
        return subprocess.run([self.jobcg, *args], env=env or self.env, capture_output=True,
                              text=True, timeout=120, **kw)

    def stand_in_gpus(self, n, cgroup_conf):
        """@n stand-in GPUs, character nodes 195:i with no driver behind them, in <tmp>/gpus
        (self.gpus) and gres.conf (Type=a100); cgroup.conf holds @cgroup_conf."""
        self.gpus = os.path.join(self.tmp, "gpus")
        os.mkdir(self.gpus)
        for i in range(n):
            os.mknod(os.path.join(self.gpus, f"nvidia{i}"), 0o20666, os.makedev(195, i))
        with open(os.path.join(self.conf, "gres.conf"), "w") as f:
            f.write(f"Name=gpu Type=a100 File={self.gpus}/nvidia[0-{n - 1}]\n")
        with open(os.path.join(self.conf, "cgroup.conf"), "w") as f:
            f.write(cgroup_conf)

    def open_in(self, rel, *paths):
        """What a process in the cgroup ROOT/@rel gets opening each of @paths for reading: 0
        where the device check let it through (ENXIO or ENODEV from a node without a driver),
        else the errno (EPERM: refused); all -1 when it could not join the cgroup."""
        procs = os.path.join(self.root, rel, "cgroup.procs")
        r = subprocess.run([sys.executable, "-c", _OPEN_IN, procs, *paths],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            diag(f"no process joined {procs}: {r.stderr.strip()}")
            return [-1] * len(paths)
        return [int(x) for x in r.stdout.split()]

    def mkcg(self, rel):
        os.makedirs(os.path.join(self.root, rel), exist_ok=True)

    def rmcg(self, rel, keep=0):
        """Remove ROOT/@rel and its parents up to (not including) its first @keep components."""
        parts = rel.split("/")
        for k in range(len(parts), keep, -1):
            try:
                os.rmdir(os.path.join(self.root, *parts[:k]))
            except OSError:
                break

    def own_gpus(self, job, n):
        """Which of the first @n stand-in GPUs a cgroup made by hand in job @job's tree opens."""
        rel = f"job_{job}/step_90/user/task_0"
        self.mkcg(rel)
        got = self.open_in(rel, *[os.path.join(self.gpus, f"nvidia{i}") for i in range(n)])
        self.rmcg(rel, keep=1)
        return [i for i in range(n) if got[i] == 0]

    def start_step(self, job):
        """A `jobcg run --job JOB -- sleep` of our own, once its task is in the job's step 0;
        cleanup() kills it if it is still there."""
        p = subprocess.Popen([self.jobcg, "run", "--job", str(job), "--", "sleep", "300"],
                             env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        self.runners.append(p)
        procs = os.path.join(self.root, f"job_{job}", "step_0", "user", "task_0",
                             "cgroup.procs")
        end = time.monotonic() + 20
        while time.monotonic() < end and p.poll() is None:
            try:
                with open(procs) as f:
                    if f.read().strip():
                        return p
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        diag(f"job {job}: no task started ({p.poll()})")
        return p

    def records(self):
        """The accounting log's records (<StateDir>/acct.jsonl), oldest first."""
        try:
            with open(os.path.join(self.state, "acct.jsonl")) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def cleanup(self):
        for p in self.runners:
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", self.tmp])
        # Kill what is left (only ours: below our own subtree), then remove bottom-up.
        for dirpath, _, _ in os.walk(self.root, topdown=False):
            try:
                with open(os.path.join(dirpath, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
        for dirpath, _, _ in os.walk(self.root, topdown=False):
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
        pins = self.env["JOBCG_BPF_PIN_DIR"]
        if pins.startswith("/sys/fs/bpf/" + self.tag):
            subprocess.run(["rm", "-rf", pins])


def kernel_main(name, body, env_class=KernelEnv):
    """The whole of a kernel test's main(): skip where it cannot run, else body(env) in a
    fresh environment that is cleaned up afterwards."""
    if kernel_skip():
        return 0
    e = env_class(name)
    try:
        run_checks(body, e)
    finally:
        e.cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit("pytap.py is a module for jobcg's tests")
