#!/usr/bin/env python3
"""Kernel test: `jobcg daemon` and what happens around it. A client killed mid-step has its
step ended and recorded NODE_FAIL; a daemon killed mid-step leaves its client to end the step
itself; a stale socket, a refused or garbled exchange, and --no-daemon all end in a step run
in-process; a second daemon on the same socket is refused. And what nobody may do to either
end: a socket in a directory others could use, a fake daemon of another user or one answering
with a variable or a directory jobcg never gives, a slow client, a full stderr pipe, too many
clients, no descriptors left, distinct JOBCG_* values piling up. Makes its own cgroup subtree,
state dir and sockets, and removes them."""
import os
import pwd
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import KernelEnv, diag, kernel_main, ok  # noqa: E402


class Env(KernelEnv):
    def __init__(self, name):
        super().__init__(name)
        os.mkdir(self.root)
        self.sock = os.path.join(self.tmp, "daemon.sock")
        self.env["JOBCG_DAEMON_SOCKET"] = self.sock
        self.daemons = []
        self.outside = []

    def start_daemon(self, sock=None, args=(), nofile=None, env=None):
        """A daemon on @sock (default: the test's), with @args; @nofile: its RLIMIT_NOFILE
        (soft, hard) from the start."""
        sock = sock or self.sock
        log = open(os.path.join(self.tmp, f"daemon{len(self.daemons)}.log"), "w+")

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        d = subprocess.Popen([self.jobcg, "daemon", "--socket", sock, *args],
                             env=env or self.env, stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, start_new_session=True,
                             preexec_fn=limits)
        d.log = log
        self.daemons.append(d)
        for _ in range(500):
            if d.poll() is not None:
                break
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock)
                s.close()
                # that connection was a garbled client to it: it must shrug it off
                break
            except OSError:
                time.sleep(0.01)
        return d

    def log_of(self, d):
        d.log.seek(0)
        return d.log.read()

    def cleanup(self):
        for d in self.daemons:
            if d.poll() is None:
                d.kill()
                d.wait()
        # cgroups a test's fake daemon made outside the tree, bottom-up
        for top in self.outside:
            for dirpath, _, _ in os.walk(top, topdown=False):
                try:
                    with open(os.path.join(dirpath, "cgroup.kill"), "w") as f:
                        f.write("1")
                except OSError:
                    pass
                for _ in range(100):
                    try:
                        os.rmdir(dirpath)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.01)
        super().cleanup()


def raw_run_request(e, args, cwd=None):
    """A well-formed op=run request with `jobcg run ARGS`, sent as a client would with its
    working directory (the descriptor @cwd instead, when given); the daemon's answer."""
    req = b"op=run\0v=2\0arg=run\0" + b"".join(b"arg=" + a + b"\0" for a in args) + \
        b"umask=18\0verbose=0\0"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    fd = os.open(e.tmp, os.O_RDONLY) if cwd is None else cwd
    socket.send_fds(s, [struct.pack("<I", len(req)) + req], [fd])
    if cwd is None:
        os.close(fd)
    answer = recv_frame(s)
    s.close()
    return answer


def recv_frame(s, timeout=10):
    """One frame's payload from socket @s (b"" when it closed or said nothing in time)."""
    s.settimeout(timeout)
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + struct.unpack("<I", data[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data[4:]


def wait_for(pred, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


# How long an unrelated `jobcg run -- true` may take through a daemon that another client is
# stalling or flooding: served, or told to run its step itself. Generous for a loaded host and
# sanitizer builds; the flaws this guards against cost 5 s and more each, or forever.
BOUND = 3.0


def timed_run(e, *args, env=None, timeout=20):
    """(result or None when it ran past @timeout, seconds it took)."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([e.jobcg, *args], env=env or e.env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        r = None
    return r, time.monotonic() - t0


def cpu_seconds(pid):
    """User + system CPU time of @pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def check_socket_dirs(e):
    """The socket's directory: root's or ours, mode 0700, not a link; else both ends refuse."""
    marker = os.path.join(e.tmp, "ran-socket-dir")
    bad = []
    d = os.path.join(e.tmp, "open-dir")
    os.mkdir(d, 0o755)
    os.chmod(d, 0o755)
    bad.append((d, "open to group or others"))
    d = os.path.join(e.tmp, "nobodys-dir")
    os.mkdir(d, 0o700)
    os.chown(d, 65534, 65534)
    bad.append((d, "belongs to uid 65534"))
    d = os.path.join(e.tmp, "link-dir")
    os.symlink(e.tmp, d)
    bad.append((d, "symbolic link"))
    for d, what in bad:
        sock = os.path.join(d, "x.sock")
        r = e.run("run", "--", "touch", marker, env=dict(e.env, JOBCG_DAEMON_SOCKET=sock))
        ok(r.returncode == 1 and what in r.stderr and not os.path.exists(marker),
           f"a socket in {os.path.basename(d)}: jobcg run refuses it, runs nothing "
           f"({r.returncode}, {r.stderr.strip()!r})")
        r, _ = timed_run(e, "daemon", "--socket", sock, timeout=10)
        ok(r is not None and r.returncode != 0 and what in r.stderr and
           not os.path.exists(sock),
           f"and jobcg daemon will not listen there ({r.stderr.strip() if r else 'it did'!r})")


def failed_start(e):
    """A daemon that fails once it has made its socket (here: no process left to fork its
    reservation watcher) removes the socket and its lock again: nothing is left listening to
    no one, nor a socket that clients would take for a stale daemon's."""
    uid = next(u for u in range(47110, 60000) if not has_uid(u))
    base = tempfile.mkdtemp(prefix="jobcg-ktest-nproc-")
    try:
        os.chmod(base, 0o755)
        conf, run, state = (os.path.join(base, n) for n in ("conf", "run", "state"))
        os.mkdir(conf, 0o755)
        for d in (run, state):
            os.mkdir(d, 0o700)
            os.chown(d, uid, uid)
        sock = os.path.join(run, "d.sock")

        def as_user_without_processes():
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))

        env = dict(e.env, JOBCG_CONF_DIR=conf, JOBCG_STATE_DIR=state,
                   ASAN_OPTIONS=e.env.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        r = subprocess.run([e.jobcg, "daemon", "--socket", sock, "--resv-period", "5"],
                           env=env, capture_output=True, text=True, timeout=60,
                           preexec_fn=as_user_without_processes)
        ok(r.returncode == 1 and "reservation watcher: fork" in r.stderr and
           not os.path.exists(sock) and not os.path.exists(sock + ".lock"),
           f"a daemon that cannot start its watcher fails and leaves no socket "
           f"({r.returncode}, {r.stderr.strip()!r}, left: {os.listdir(run)})")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def has_uid(uid):
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def fake_as_nobody(e):
    """A fake daemon of user nobody on a socket in a directory that passes: the client lends
    it nothing and runs nothing."""
    path = os.path.join(e.tmp, "nobody.sock")
    marker = os.path.join(e.tmp, "ran-for-nobody")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)  # by root, in root's 0700 directory; listen() says whose socket it is
    lent = os.path.join(e.tmp, "nobody-step")
    os.mkdir(lent)
    rd, wr = os.pipe()
    ready_rd, ready_wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rd)
            os.close(ready_rd)
            dfd = os.open(lent, os.O_RDONLY | os.O_DIRECTORY)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            srv.listen(4)
            # (a client that came before listen() would find a stale socket and run alone)
            os.write(ready_wr, b"1")
            os.close(ready_wr)
            srv.settimeout(30)
            c, _ = srv.accept()
            c.settimeout(10)
            got, nfds = b"", 0
            try:
                got, fds, _, _ = socket.recv_fds(c, 65536, 8)
                nfds = len(fds)
            except OSError:
                pass
            if got:  # it was lent something: try to make it run a task of ours
                body = (b"op=spawn\0job=77\0step=0\0ntasks=1\0ephemeral=0\0start_usec=1\0"
                        b"env=0:LD_PRELOAD=/nonexistent/evil.so\0")
                try:
                    socket.send_fds(c, [struct.pack("<I", len(body)) + body], [dfd])
                except OSError:
                    pass
            os.write(wr, f"{len(got)} {nfds}".encode())
        finally:
            os._exit(0)
    os.close(wr)
    os.close(ready_wr)
    srv.close()
    listening = os.read(ready_rd, 1) == b"1"
    os.close(ready_rd)
    ok(listening, "the fake daemon of user nobody listens")
    r = e.run("run", "--", "touch", marker, env=dict(e.env, JOBCG_DAEMON_SOCKET=path))
    seen = os.read(rd, 100).decode().split()
    os.close(rd)
    os.waitpid(pid, 0)
    ok(r.returncode == 1 and "uid 65534" in r.stderr and "neither root nor you" in r.stderr
       and not os.path.exists(marker),
       f"a daemon of user nobody: jobcg run refuses it and runs nothing ({r.stderr.strip()!r})")
    ok(seen == ["0", "0"],
       f"and that daemon got no request and no descriptor (bytes, descriptors: {seen})")


def fake_root_daemon(e, path, reply, dfd_path):
    """A fake daemon of root at @path that answers @reply with @dfd_path lent; what the client
    said next comes back in the dict."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(30)
    got = {}

    def serve():
        try:
            c, _ = srv.accept()
        except OSError:
            return
        with c:
            c.settimeout(30)
            _, fds, _, _ = socket.recv_fds(c, 65536, 8)
            for f in fds:
                os.close(f)
            dfd = os.open(dfd_path, os.O_RDONLY | os.O_DIRECTORY)
            socket.send_fds(c, [struct.pack("<I", len(reply)) + reply], [dfd])
            os.close(dfd)
            got["status"] = recv_frame(c, 30)

    t = threading.Thread(target=serve)
    t.start()
    return srv, t, got


def fake_injections(e):
    """A daemon that passes the credentials check still cannot set a variable jobcg never
    sets, nor place the tasks anywhere but in the step's own directory."""
    spawn = b"op=spawn\0job=77\0step=0\0ntasks=1\0ephemeral=0\0start_usec=1\0"
    inside = os.path.join(e.root, "job_77", "step_0")
    outside = os.path.join(e.mount, e.tag + "-outside")
    e.outside.append(outside)
    # as a step's directory is made: its tasks go below user/
    os.makedirs(os.path.join(inside, "user"))
    os.makedirs(os.path.join(outside, "user"))
    cases = [
        ("LD_PRELOAD", spawn + b"env=0:LD_PRELOAD=/nonexistent/evil.so\0", inside,
         "LD_PRELOAD"),
        ("a directory outside the tree", spawn, outside, "is not " + inside),
    ]
    for i, (what, reply, where, says) in enumerate(cases):
        path = os.path.join(e.tmp, f"inject{i}.sock")
        marker = os.path.join(e.tmp, f"injected{i}")
        srv, t, got = fake_root_daemon(e, path, reply, where)
        r = e.run("run", "--", "sh", "-c", f"echo \"$LD_PRELOAD\" > {marker}; "
                  f"cat /proc/self/cgroup >> {marker}",
                  env=dict(e.env, JOBCG_DAEMON_SOCKET=path))
        t.join(60)
        srv.close()
        ran = open(marker).read() if os.path.exists(marker) else ""
        ok(r.returncode == 1 and says in r.stderr and "nothing was run" in r.stderr and not ran,
           f"a daemon answering with {what}: refused, nothing run "
           f"({r.returncode}, {r.stderr.strip()!r}, ran: {ran!r})")
        ok(b"op=status" in got.get("status", b"") and b"error=" in got.get("status", b""),
           "and the daemon is told, so that it ends its step")
    for d in (os.path.join(inside, "user", "task_0"), os.path.join(inside, "user"), inside,
              os.path.dirname(inside)):
        try:
            os.rmdir(d)
        except OSError:
            pass


def slow_client(e, d):
    """A client trickling its request 4 bytes at a time holds up nobody, and is dropped."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    stop = threading.Event()

    def trickle():
        try:
            s.sendall(struct.pack("<I", 4000))
            for _ in range(8):
                if stop.wait(1.5):
                    return
                s.sendall(b"op=r")
        except OSError:
            pass

    t = threading.Thread(target=trickle)
    t.start()
    time.sleep(0.3)
    r, took = timed_run(e, "run", "--job", "5", "--", "true")
    stop.set()
    t.join()
    ok(r is not None and r.returncode == 0 and took < BOUND,
       f"a client sending 4 bytes every 1.5 s: an unrelated step through the daemon took "
       f"{took:.1f} s (at most {BOUND} s)")
    ok(recv_frame(s, 15) == b"" and wait_for(lambda: "byte(s) of its request" in e.log_of(d), 5),
       "and the slow client is dropped at its deadline, with a line in the daemon's log")
    s.close()


def full_pipe(e):
    """--acct output for a client whose stderr pipe is full: the daemon does not wait on it."""
    rd, wr = os.pipe()
    os.set_blocking(wr, False)
    try:
        while True:
            os.write(wr, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(wr, True)
    before = len(e.records())
    p = subprocess.Popen([e.jobcg, "run", "--job", "5", "--acct", "--", "true"], env=e.env,
                         stdout=subprocess.DEVNULL, stderr=wr)
    os.close(wr)
    # its step's record is written, its accounting is being printed
    wait_for(lambda: len(e.records()) > before)
    time.sleep(0.3)
    r, took = timed_run(e, "run", "--job", "5", "--", "true")
    drained = b""
    while True:
        chunk = os.read(rd, 65536)
        if not chunk:
            break
        drained += chunk
    os.close(rd)
    p.wait(60)
    ok(r is not None and r.returncode == 0 and took < BOUND,
       f"a client whose stderr pipe is full, with --acct: an unrelated step took {took:.1f} s "
       f"(at most {BOUND} s)")
    ok(p.returncode == 0 and b"cpu_usage_usec" in drained,
       "and that client prints its accounting once the pipe drains")


def connection_cap(e):
    """--max-clients: one more is told why, and runs its step itself."""
    sock = os.path.join(e.tmp, "cap.sock")
    d = e.start_daemon(sock, ("--max-clients", "2"))
    if not ok(d.poll() is None, "jobcg daemon --max-clients 2 runs"):
        diag(e.log_of(d))
        return
    env = dict(e.env, JOBCG_DAEMON_SOCKET=sock)
    time.sleep(0.3)  # start_daemon's own probe is gone
    idle = []
    for _ in range(2):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        idle.append(s)
    time.sleep(0.3)  # accepted, waiting for their requests
    r, took = timed_run(e, "run", "--", "sh", "-c", "echo capped", env=env)
    ok(r is not None and r.returncode == 0 and r.stdout == "capped\n" and
       "did not take the step" in r.stderr and "at most 2 clients" in r.stderr,
       f"--max-clients 2 with 2 connected: a third runs its step itself and says why "
       f"({r.stderr.strip() if r else 'timed out'!r}, {took:.1f} s)")
    for s in idle:
        s.close()
    time.sleep(0.3)
    r = e.run("run", "--", "sh", "-c", "echo served", env=env)
    ok(r.returncode == 0 and r.stdout == "served\n" and r.stderr == "",
       "once they leave, the daemon serves again")
    ok("--max-clients" in e.log_of(d), "the daemon's log says it refused clients")
    d.send_signal(signal.SIGTERM)
    d.wait(60)


def idle_connections(d, sock, n=30):
    """@n connections to daemon @d at @sock that say nothing, and the CPU seconds the daemon
    spends in the 2 s after they are made (a daemon that spins on them shows here)."""
    idle = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        idle.append(s)
    time.sleep(0.5)
    c0 = cpu_seconds(d.pid)
    time.sleep(2)
    return idle, cpu_seconds(d.pid) - c0


def fd_limits(e):
    """The open-file limit raised to the hard one; out of descriptors, no busy loop."""
    sock = os.path.join(e.tmp, "nofile.sock")
    hard = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    d = e.start_daemon(sock, nofile=(min(256, hard), hard))
    with open(f"/proc/{d.pid}/limits") as f:
        line = [x for x in f if x.startswith("Max open files")]
    ok(line and line[0].split()[3:5] == [str(hard), str(hard)],
       f"the daemon raises its open-file limit to the hard one ({line})")
    d.send_signal(signal.SIGTERM)
    d.wait(60)

    # As found: RLIMIT_NOFILE=17 and 30 idle connections.
    env = dict(e.env, JOBCG_DAEMON_SOCKET=sock)
    d = e.start_daemon(sock, nofile=(17, 17))
    idle, used = idle_connections(d, sock)
    r, took = timed_run(e, "run", "--", "true", env=env)
    ok(used < 0.1, f"RLIMIT_NOFILE 17 and 30 idle connections: the daemon used {used:.2f} s "
       "of CPU in 2 s (less than 0.1 s)")
    ok(r is not None and r.returncode == 0 and took < BOUND,
       f"and an unrelated step took {took:.1f} s (at most {BOUND} s)")
    for s in idle:
        s.close()
    d.send_signal(signal.SIGTERM)
    d.wait(60)

    # A running daemon that has no descriptor left: it refuses, it does not spin.
    d = e.start_daemon(sock)
    time.sleep(0.3)  # start_daemon's own probe is gone
    n = fd_count(d.pid)
    soft, hard = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (n, hard))
    idle, used = idle_connections(d, sock)
    r, took = timed_run(e, "run", "--", "true", env=env)
    answers = [recv_frame(s, 2) for s in idle[:5]]
    ok(used < 0.1, f"out of descriptors with 30 connections waiting: the daemon used "
       f"{used:.2f} s of CPU in 2 s (less than 0.1 s)")
    ok(r is not None and r.returncode == 0 and took < BOUND and
       "out of file descriptors" in r.stderr,
       f"and an unrelated client is told so and runs its step itself in {took:.1f} s "
       f"({r.stderr.strip() if r else 'timed out'!r})")
    ok(all(b"fallback=1" in a for a in answers), "the waiting connections are refused too")
    for s in idle:
        s.close()
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (soft, hard))
    r = e.run("run", "--", "sh", "-c", "echo again", env=env)
    ok(r.returncode == 0 and r.stdout == "again\n" and r.stderr == "",
       "with descriptors back, it serves again")
    d.send_signal(signal.SIGTERM)
    d.wait(60)


def env_no_leak(e):
    """Distinct JOBCG_* values per request cost the daemon no memory that stays."""
    sock = os.path.join(e.tmp, "leak.sock")
    # ASan keeps freed memory in quarantine: that is not a leak
    env = dict(e.env, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=0")
    d = e.start_daemon(sock, env=env)
    env = dict(e.env, JOBCG_DAEMON_SOCKET=sock)

    def rss():
        with open(f"/proc/{d.pid}/status") as f:
            return [int(x.split()[1]) for x in f if x.startswith("VmRSS:")][0]

    def refused_step(i):
        # refused by the daemon (a usage error), after it took the client's environment
        return e.run("run", "--job", "5", "--mem", "99T", "--", "true",
                     env=dict(env, JOBCG_PAD=f"{i:06d}" + "x" * 100000))

    for i in range(5):
        refused_step(i)
    before = rss()
    for i in range(5, 65):
        r = refused_step(i)
    grew = rss() - before
    ok(r.returncode != 0 and "--mem" in r.stderr and grew < 2048,
       f"60 requests with distinct 100 kB JOBCG_* values: the daemon's RSS grew {grew} kB "
       "(less than 2 MB)")
    d.send_signal(signal.SIGTERM)
    d.wait(60)


def traced(e, *args, env):
    """`jobcg ARGS` under strace -f: (exit status, the file and network calls it made)."""
    out = os.path.join(e.tmp, "strace.out")
    # LeakSanitizer cannot run under ptrace (sanitized test builds).
    asan = env.get("ASAN_OPTIONS")
    env = dict(env, ASAN_OPTIONS=(asan + ":" if asan else "") + "detect_leaks=0")
    r = subprocess.run(["strace", "-f", "-qq", "-o", out, "-e", "trace=%file,%network",
                        e.jobcg, *args], env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        diag(f"jobcg {' '.join(args)}: exit {r.returncode}: {r.stderr}")
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    return r.returncode, text


def opt_in(e):
    """The daemon is opt-in: with one listening but not asked for, `jobcg run` looks at no
    socket; --daemon or RunViaDaemon=yes makes it look at the default one, $JOBCG_DAEMON_SOCKET
    at that one, and --no-daemon overrides the configuration."""
    if not shutil.which("strace"):
        ok(True, "# SKIP strace not installed: the opt-in of the daemon not traced")
        return
    plain = dict(e.env)
    plain.pop("JOBCG_DAEMON_SOCKET", None)
    rc, t = traced(e, "run", "--job", "5", "--", "true", env=plain)
    ok(rc == 0 and "connect(" not in t and "daemon.sock" not in t and "/run/jobcg" not in t,
       "not configured: jobcg run connects nowhere and looks at no socket")
    if "connect(" in t or "daemon.sock" in t:
        diag("\n".join(x for x in t.splitlines() if "connect(" in x or "daemon.sock" in x))
    rc, t = traced(e, "run", "--daemon", "--job", "5", "--", "true", env=plain)
    ok(rc == 0 and "/run/jobcg" in t, "--daemon: jobcg run looks for the default socket")
    conf = os.path.join(e.tmp, "conf-via-daemon")
    os.makedirs(conf, exist_ok=True)
    with open(os.path.join(conf, "cgroup.conf"), "w") as f:
        f.write("RunViaDaemon=yes\n")
    env = dict(plain, JOBCG_CONF_DIR=conf)
    rc, t = traced(e, "run", "--job", "5", "--", "true", env=env)
    ok(rc == 0 and "/run/jobcg" in t, "RunViaDaemon=yes: jobcg run looks for the default socket")
    rc, t = traced(e, "run", "--no-daemon", "--job", "5", "--", "true", env=env)
    ok(rc == 0 and "/run/jobcg" not in t and "connect(" not in t,
       "RunViaDaemon=yes and --no-daemon: no socket")
    rc, t = traced(e, "run", "--job", "5", "--", "true", env=e.env)
    ok(rc == 0 and f'connect(' in t and e.sock in t,
       "$JOBCG_DAEMON_SOCKET set: jobcg run connects to that socket")


def stopped_daemon(e):
    """A daemon alive but stopped (SIGSTOP) while a client waits for its answer: the client
    gives up past NodeLockTimeout + SystemdTimeout + 10 s, naming the socket, and runs
    nothing itself (the daemon may have made the step); so does one whose request is bigger
    than the socket takes; one whose tasks ran ends its step itself; resumed, the daemon finds
    the clients gone and ends what it made, recording nothing twice."""
    conf = os.path.join(e.tmp, "conf-stop")
    os.mkdir(conf)
    with open(os.path.join(conf, "cgroup.conf"), "w") as f:
        f.write("NodeLockTimeout=500\nSystemdTimeout=1000\n")
    sock = os.path.join(e.tmp, "stop.sock")
    env = dict(e.env, JOBCG_CONF_DIR=conf, JOBCG_DAEMON_SOCKET=sock)
    d = e.start_daemon(sock=sock, env=env)
    marker = os.path.join(e.tmp, "ran-stopped")
    # A step whose tasks run when the daemon stops: its report is not answered.
    late = subprocess.Popen([e.jobcg, "run", "--job", "5", "--step", "901", "--", "sleep", "1"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    late_dir = os.path.join(e.root, "job_5", "step_901")
    wait_for(lambda: os.path.exists(os.path.join(late_dir, "user", "task_0")), 30)
    os.kill(d.pid, signal.SIGSTOP)
    fillers = []
    try:
        r, took = timed_run(e, "run", "--job", "5", "--step", "900", "--", "touch", marker,
                            env=env, timeout=60)
        ok(r is not None and r.returncode == 1 and "did not answer within 11500 ms" in r.stderr
           and sock in r.stderr and not os.path.exists(marker) and took < 40,
           f"a stopped daemon: the client fails within its bound, naming the socket, and runs "
           f"nothing ({None if r is None else (r.returncode, r.stderr)!r}, {took:.1f} s)")
        # A request bigger than the socket takes: send() itself would wait for the daemon.
        big = ["x" * 999] * 700
        r, took = timed_run(e, "run", "--job", "5", "--", "touch", marker, *big, env=env,
                            timeout=60)
        ok(r is not None and r.returncode == 1 and "took no request within 11500 ms" in r.stderr
           and sock in r.stderr and not os.path.exists(marker) and took < 40,
           f"a 700 kB request to a stopped daemon: the client fails within its bound "
           f"({None if r is None else (r.returncode, r.stderr[-300:])!r}, {took:.1f} s)")
        try:
            _, err = late.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            late.kill()
            _, err = late.communicate()
            err = "(still waiting on the daemon) " + err
        rec = [x for x in e.records() if x.get("job") == 5 and x.get("step") == "901"]
        ok(late.returncode == 0 and "lost the daemon" in err and not os.path.exists(late_dir)
           and [x["state"] for x in rec] == ["COMPLETED"],
           f"a step whose end the stopped daemon does not answer: the client ends it itself "
           f"within its bound, one record ({late.returncode}, {err.strip()!r}, "
           f"{[x['state'] for x in rec]})")
        # Clients that gave up leave their connections in its queue: once it is full,
        # connect() itself waits, and must be bounded too.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 10000)), hard))
        full = False
        for _ in range(9000):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(sock)
            except BlockingIOError:
                c.close()
                full = True
                break
            fillers.append(c)
        r, took = timed_run(e, "run", "--job", "5", "--", "touch", marker, env=env, timeout=60)
        ok(full and r is not None and r.returncode == 1
           and "accepted no connection within 11500 ms" in r.stderr and sock in r.stderr
           and not os.path.exists(marker) and took < 40,
           f"its queue full ({len(fillers)} connections): the client fails within its bound "
           f"({None if r is None else (r.returncode, r.stderr)!r}, {took:.1f} s)")
    finally:
        for c in fillers:
            c.close()
        os.kill(d.pid, signal.SIGCONT)
    sdir = os.path.join(e.root, "job_5", "step_900")
    ok(wait_for(lambda: not os.path.exists(sdir), 30) and not os.path.exists(marker),
       "resumed, the daemon leaves no step of the client that gave up")
    r = e.run("run", "--job", "5", "--", "sh", "-c", "echo served", env=env)
    ok(r.returncode == 0 and r.stdout == "served\n" and d.poll() is None,
       "and serves the next client")
    rec = [x for x in e.records() if x.get("job") == 5 and x.get("step") == "901"]
    ok(len(rec) == 1, f"the step its client ended is not recorded twice ({len(rec)})")
    d.send_signal(signal.SIGTERM)
    d.wait(60)
    old_daemon_stopped(e)


def old_daemon_stopped(e):
    """Something listens on the socket without the daemon's lock (a daemon of an older jobcg)
    and is stopped, its queue full: a new daemon's check for it must not wait for ever."""
    sock = os.path.join(e.tmp, "old.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(0)
    queued = []
    for _ in range(64):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(sock)
        except BlockingIOError:
            c.close()
            break
        queued.append(c)
    try:
        r, took = timed_run(e, "daemon", "--socket", sock, "--resv-period", "0", timeout=30)
        ok(r is not None and r.returncode != 0 and "took no connection within" in r.stderr
           and sock in r.stderr and took < 20,
           f"a new daemon next to a stopped one whose queue is full: refused within its "
           f"bound, naming the socket ({None if r is None else r.stderr.strip()!r}, "
           f"{took:.1f} s)")
        ok(os.path.exists(sock), "and the socket is left to the one that holds it")
    finally:
        for c in queued:
            c.close()
        srv.close()


def main():
    return kernel_main("daemon", body, Env)


def body(e):
    # No daemon, no socket: the step runs here.
    r = e.run("run", "--", "sh", "-c", "echo here")
    ok(r.returncode == 0 and r.stdout == "here\n", "without a daemon, jobcg run runs in-process")

    d = e.start_daemon()
    ok(d.poll() is None and os.path.exists(e.sock), "jobcg daemon listens on its socket")
    st = os.stat(e.sock)
    ok(st.st_mode & 0o777 == 0o600, f"the socket is for its owner only ({oct(st.st_mode & 0o777)})")

    notsock = os.path.join(e.tmp, "not-a-socket")
    with open(notsock, "w") as f:
        f.write("keep me\n")
    r2 = e.run("daemon", "--socket", notsock)
    ok(r2.returncode != 0 and "not a socket" in r2.stderr and open(notsock).read() == "keep me\n",
       "a file that is not a socket is refused, not removed")
    # Nor is a link there, dangling or to a live daemon's socket: never followed to probe or
    # replace what it points to, never removed.
    link = os.path.join(e.tmp, "link.sock")
    for target, what in ((os.path.join(e.tmp, "nowhere"), "dangling"), (e.sock, "to a daemon")):
        os.symlink(target, link)
        r2 = e.run("daemon", "--socket", link)
        ok(r2.returncode == 1 and
           f"{link}: exists and is not a socket (a symbolic link)" in r2.stderr and
           os.readlink(link) == target and not os.path.exists(link + ".lock"),
           f"a symbolic link ({what}) at the socket's path is refused, left alone "
           f"({r2.returncode}, {r2.stderr.strip()!r})")
        os.unlink(link)
    r2 = e.run("daemon", "--socket", os.path.join(e.tmp, "no-dir", "x.sock"))
    ok(r2.returncode == 1 and
       f"{os.path.join(e.tmp, 'no-dir', 'x.sock')}: its directory: No such file" in r2.stderr,
       f"a socket in no directory: the socket named ({r2.stderr.strip()!r})")
    r2 = e.run("daemon")
    ok(r2.returncode != 0 and "another jobcg daemon" in r2.stderr,
       "a second daemon on the same socket is refused")
    ok(d.poll() is None and os.path.exists(e.sock), "and the first one keeps its socket")
    check_socket_dirs(e)
    failed_start(e)

    r = e.run("alloc", "5")
    ok(r.returncode == 0, "jobcg alloc 5")
    r = e.run("run", "--job", "5", "--", "sh", "-c", "echo $JOBCG_JOB_ID.$JOBCG_STEP_ID; pwd; "
              "umask", cwd=e.tmp)
    ok(r.returncode == 0 and r.stdout == f"5.0\n{e.tmp}\n0022\n",
       "a step through the daemon: its env, the client's cwd")
    diag(r.stdout + r.stderr)
    r = e.run("run", "--job", "5", "--acct", "--", "sh", "-c", "exit 7")
    # Step numbers count up over the job's life: this is its second step.
    ok(r.returncode == 7 and "step 5.1: exit code 7" in r.stderr and "cpu_usage_usec" in r.stderr,
       "exit code and --acct output reach the client")
    warnconf = os.path.join(e.tmp, "conf-warn")
    os.mkdir(warnconf)
    with open(os.path.join(warnconf, "cgroup.conf"), "w") as f:
        f.write("CgroupAutomount=yes\n")
    r = e.run("run", "--job", "5", "--", "true", env=dict(e.env, JOBCG_CONF_DIR=warnconf))
    ok(r.returncode == 0 and r.stderr.count("CgroupAutomount") == 1,
       f"a configuration's warning is printed once, as in-process ({r.stderr!r})")
    r = e.run("run", "--job", "5", "--", "/nonexistent/cmd")
    ok(r.returncode == 127 and "cannot execute '/nonexistent/cmd'" in r.stderr,
       "a command that cannot run: 127 and the error, as in-process")
    r = e.run("run", "--job", "5", "--mem", "99T", "--", "true")
    ok(r.returncode != 0 and "--mem" in r.stderr, "a refused step's error reaches the client")
    ok(not os.path.exists(os.path.join(e.root, "job_5", "step_3")), "and no step is left")

    # Runner: gc must watch the client, not the daemon.
    p = subprocess.Popen([e.jobcg, "run", "--job", "5", "--step", "40", "--", "sleep", "60"],
                         env=e.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sdir = os.path.join(e.root, "job_5", "step_40")
    wait_for(lambda: os.path.exists(os.path.join(sdir, "user", "task_0")))
    try:
        runner = os.getxattr(sdir, "trusted.jobcg.runner").decode()
    except OSError as x:
        runner = f"({x})"
    ok(runner.split(":")[0] == str(p.pid), f"the step's runner is the client (pid {p.pid}): {runner}")

    # The client killed mid-step: the daemon ends the step and records NODE_FAIL.
    sleeper = wait_for(lambda: os.path.exists(os.path.join(sdir, "user", "task_0", "cgroup.procs"))
                       and open(os.path.join(sdir, "user", "task_0", "cgroup.procs")).read().strip())
    p.kill()
    p.wait()
    ok(wait_for(lambda: not os.path.exists(sdir)), "client killed: the daemon removes its step")
    rec = [x for x in e.records() if x.get("job") == 5 and x.get("step") == "40"]
    ok(len(rec) == 1 and rec[0]["state"] == "NODE_FAIL",
       f"and records it NODE_FAIL ({rec[-1]['state'] if rec else 'no record'})")
    ok(d.poll() is None, "the daemon lives on")

    # A garbled client and one of another protocol version: the daemon shrugs them off.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    s.sendall(struct.pack("<I", 12) + b"op=run\0v=99\0")
    hdr = s.recv(4)
    body_ = s.recv(4096) if len(hdr) == 4 else b""
    s.close()
    ok(b"fallback=1" in body_, "another protocol version is told to run its step itself")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    s.sendall(struct.pack("<I", 0xFFFFFF00) + b"junk")
    s.close()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    s.sendall(struct.pack("<I", 5) + b"x=\xff\x00\x01")
    s.close()
    # A well-formed request a real client never sends (it answers --help itself).
    answer = raw_run_request(e, [b"--help"])
    ok(answer.startswith(b"op=exit\0code=0\0") and b"out=Usage: jobcg run" in answer,
       "run --help sent to the daemon is answered with the usage (for the client to print), "
       "code 0")
    # Arguments that stop the parser inside a cluster of letters ("-xq": an unknown one) must
    # not leave it there for the next client: it would go on from "q", in the freed request.
    answer = raw_run_request(e, [b"-xq", b"--", b"true"])
    ok(answer.startswith(b"op=exit\0code=2\0") and b"unknown option '-x' (in '-xq')" in answer,
       f"run -xq sent to the daemon is a usage error ({answer[:80]!r})")
    r = e.run("run", "--", "sh", "-c", "echo afresh")
    ok(d.poll() is None and r.returncode == 0 and r.stdout == "afresh\n",
       f"and the next client's arguments are read afresh ({r.stderr.strip()!r})")
    # The same with a descriptor that is no directory as its working directory: not served in
    # the daemon's own, but handed back.
    pipe_r, pipe_w = os.pipe()
    os.close(pipe_w)
    for what, fd in (("a regular file", os.open(os.path.join(e.tmp, "notdir"),
                                                os.O_RDWR | os.O_CREAT, 0o600)),
                     ("a pipe", pipe_r)):
        answer = raw_run_request(e, [b"--help"], fd)
        os.close(fd)
        ok(answer.startswith(b"op=exit\0code=1\0fallback=1\0") and b"not a directory" in answer
           and b"out=" not in answer,
           f"a request lending {what} as its working directory is told to run its step itself "
           f"({answer[:80]!r})")
    r = e.run("run", "--job", "5", "--", "true")
    ok(d.poll() is None and r.returncode == 0, "after garbled messages the daemon still serves")

    # A client that connects and says nothing holds up nobody, and is dropped at its deadline.
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(e.sock)
    r = e.run("run", "--job", "5", "--step", "60", "--", "sh", "-c", "echo served")
    silent.setblocking(False)
    try:
        silent.recv(1)
        waiting = False  # answered or closed: the daemon gave up on it first
    except BlockingIOError:
        waiting = True
    rec = [x for x in e.records() if x.get("job") == 5 and x.get("step") == "60"]
    ok(r.returncode == 0 and r.stdout == "served\n" and waiting and len(rec) == 1,
       "a step is served while a silent client is still connected")
    silent.settimeout(30)
    try:
        gone = silent.recv(4096) == b""
    except OSError:
        gone = False
    silent.close()
    ok(gone and "sent no request" in e.log_of(d) and d.poll() is None,
       "the silent client is dropped at its deadline, with a line in the daemon's log")
    slow_client(e, d)
    full_pipe(e)

    # The daemon killed mid-step: the client ends the step itself.
    # (a step number past those used so far: one below the job's count is refused)
    p = subprocess.Popen([e.jobcg, "run", "--job", "5", "--step", "500", "--", "sleep", "1"],
                         env=e.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sdir = os.path.join(e.root, "job_5", "step_500")
    wait_for(lambda: os.path.exists(os.path.join(sdir, "user", "task_0")))
    d.kill()
    d.wait()
    out, err = p.communicate(timeout=60)
    ok(p.returncode == 0 and "lost the daemon" in err,
       "daemon killed mid-step: the client finishes with the step's exit code")
    ok(not os.path.exists(sdir), "and removes the step itself")
    rec = [x for x in e.records() if x.get("job") == 5 and x.get("step") == "500"]
    ok(len(rec) == 1 and rec[0]["state"] == "COMPLETED", "and writes its record once: COMPLETED")

    # A stale socket (the daemon is gone): in-process, silently.
    ok(os.path.exists(e.sock), "a killed daemon leaves its socket")
    r = e.run("run", "--job", "5", "--", "sh", "-c", "echo stale")
    ok(r.returncode == 0 and r.stdout == "stale\n" and r.stderr == "",
       "with a stale socket the step runs in-process")

    # A new daemon replaces the stale socket; --no-daemon bypasses it; SIGTERM stops it.
    d = e.start_daemon()
    ok(d.poll() is None, "a new daemon takes over the stale socket")
    r = e.run("run", "--no-daemon", "--job", "5", "--", "true")
    ok(r.returncode == 0, "--no-daemon runs in-process")
    opt_in(e)
    r = e.run("run", "--job", "5", "-n", "3", "--", "sh", "-c", "echo $JOBCG_TASK_ID")
    ok(r.returncode == 0 and sorted(r.stdout.split()) == ["0", "1", "2"],
       "three tasks through the daemon")
    env = dict(e.env, JOBCG_DAEMON_SOCKET="/" + "x" * 200)
    r = e.run("run", "--", "true", env=env)
    ok(r.returncode == 2 and "JOBCG_DAEMON_SOCKET" in r.stderr,
       "a socket path too long for AF_UNIX is a usage error naming the variable")
    p = subprocess.Popen([e.jobcg, "run", "--job", "5", "--", "sleep", "1"], env=e.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: any(x.startswith("step_") for x in os.listdir(os.path.join(e.root, "job_5"))))
    # Connected, request not yet sent (perhaps not even accepted) when the daemon stops.
    late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    late.connect(e.sock)
    d.send_signal(signal.SIGTERM)
    ok(wait_for(lambda: not os.path.exists(e.sock), 5), "SIGTERM: the daemon removes its socket")
    late.settimeout(30)
    try:
        answer = late.recv(4096)
    except OSError as x:
        answer = repr(x).encode()
    late.close()
    ok(b"fallback=1" in answer,
       f"a client waiting when the daemon stops is told to run its step itself ({answer!r})")
    p.wait(timeout=60)
    d.wait(timeout=60)
    ok(p.returncode == 0 and d.returncode == 0,
       "the step under way finishes before the daemon exits 0")
    text = e.log_of(d)
    ok("step(s)" in text, "the daemon says what it served when it stops")
    diag(text)
    # A daemon that answers nonsense (a step id no daemon would give): the client starts
    # nothing, tells the daemon so that it can end the step, and says what happened.
    fake = os.path.join(e.tmp, "fake.sock")
    srv, t, got = fake_root_daemon(
        e, fake, b"op=spawn\0job=5\0step=bogus\0ntasks=1\0ephemeral=0\0start_usec=1\0", e.tmp)
    marker = os.path.join(e.tmp, "ran")
    r = e.run("run", "--job", "5", "--", "touch", marker,
              env=dict(e.env, JOBCG_DAEMON_SOCKET=fake))
    t.join(60)
    srv.close()
    ok(r.returncode == 1 and "does not understand" in r.stderr and not os.path.exists(marker),
       f"a garbled answer from the daemon: exit 1, nothing run ({r.returncode}, {r.stderr!r})")
    ok(b"op=status" in got.get("status", b"") and b"malformed answer" in got.get("status", b""),
       "and the daemon is told, so that it ends its step")
    fake_as_nobody(e)
    fake_injections(e)
    connection_cap(e)
    fd_limits(e)
    env_no_leak(e)
    stopped_daemon(e)

    r = e.run("release", "5")
    ok(r.returncode == 0, "jobcg release 5")
    left = [x for x in os.listdir(e.root) if x.startswith("job_")]
    ok(left == [], f"nothing left in the tree ({left})")


if __name__ == "__main__":
    sys.exit(main())
