#!/usr/bin/env python3
"""Kernel test: `jobcg daemon` and what happens around it. A client killed mid-step has its
step ended and recorded NODE_FAIL; a daemon killed mid-step leaves its client to end the step
itself; a stale socket, a refused or garbled exchange, and --no-daemon all end in a step run
in-process; a second daemon on the same socket is refused. Makes its own cgroup subtree, state
dir and socket, and removes them."""
import os
import signal
import socket
import struct
import subprocess
import sys
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

    def start_daemon(self):
        log = open(os.path.join(self.tmp, f"daemon{len(self.daemons)}.log"), "w+")
        d = subprocess.Popen([self.jobcg, "daemon"], env=self.env, stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        d.log = log
        self.daemons.append(d)
        for _ in range(500):
            if d.poll() is not None:
                break
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.sock)
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
        super().cleanup()


def wait_for(pred, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


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
    r2 = e.run("daemon")
    ok(r2.returncode != 0 and "another jobcg daemon" in r2.stderr,
       "a second daemon on the same socket is refused")
    ok(d.poll() is None and os.path.exists(e.sock), "and the first one keeps its socket")

    r = e.run("alloc", "5")
    ok(r.returncode == 0, "jobcg alloc 5")
    r = e.run("run", "--job", "5", "--", "sh", "-c", "echo $JOBCG_JOB_ID.$JOBCG_STEP_ID; pwd; "
              "umask", cwd=e.tmp)
    ok(r.returncode == 0 and r.stdout == f"5.0\n{e.tmp}\n0022\n",
       "a step through the daemon: its env, the client's cwd")
    diag(r.stdout + r.stderr)
    r = e.run("run", "--job", "5", "--acct", "--", "sh", "-c", "exit 7")
    ok(r.returncode == 7 and "step 5.0: exit code 7" in r.stderr and "cpu_usage_usec" in r.stderr,
       "exit code and --acct output reach the client")
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
    rec = [x for x in e.records() if x.get("job") == "5" and x.get("step") == "40"]
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
    rd, wr = os.pipe()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(e.sock)
    req = b"op=run\0v=1\0arg=run\0arg=--help\0umask=18\0verbose=0\0"
    cwd = os.open(e.tmp, os.O_RDONLY)
    socket.send_fds(s, [struct.pack("<I", len(req)) + req], [wr, wr, cwd])
    os.close(wr)
    os.close(cwd)
    s.settimeout(10)
    try:
        answer = s.recv(4096)
    except OSError:
        answer = b""
    s.close()
    helptext = os.read(rd, 65536)
    os.close(rd)
    ok(b"op=exit\0code=0\0" in answer and b"Usage: jobcg run" in helptext,
       "run --help sent to the daemon is answered with the usage, code 0")
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
    rec = [x for x in e.records() if x.get("job") == "5" and x.get("step") == "60"]
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

    # The daemon killed mid-step: the client ends the step itself.
    p = subprocess.Popen([e.jobcg, "run", "--job", "5", "--step", "50", "--", "sleep", "1"],
                         env=e.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sdir = os.path.join(e.root, "job_5", "step_50")
    wait_for(lambda: os.path.exists(os.path.join(sdir, "user", "task_0")))
    d.kill()
    d.wait()
    out, err = p.communicate(timeout=60)
    ok(p.returncode == 0 and "lost the daemon" in err,
       "daemon killed mid-step: the client finishes with the step's exit code")
    ok(not os.path.exists(sdir), "and removes the step itself")
    rec = [x for x in e.records() if x.get("job") == "5" and x.get("step") == "50"]
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
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(fake)
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
            body = b"op=spawn\0job=5\0step=bogus\0ntasks=1\0ephemeral=0\0start_usec=1\0"
            dfd = os.open(e.tmp, os.O_RDONLY | os.O_DIRECTORY)
            socket.send_fds(c, [struct.pack("<I", len(body)) + body], [dfd])
            os.close(dfd)
            try:
                got["status"] = c.recv(4096)
            except OSError:
                got["status"] = b""

    t = threading.Thread(target=serve)
    t.start()
    marker = os.path.join(e.tmp, "ran")
    r = e.run("run", "--job", "5", "--", "touch", marker,
              env=dict(e.env, JOBCG_DAEMON_SOCKET=fake))
    t.join(60)
    srv.close()
    ok(r.returncode == 1 and "does not understand" in r.stderr and not os.path.exists(marker),
       f"a garbled answer from the daemon: exit 1, nothing run ({r.returncode}, {r.stderr!r})")
    ok(b"op=status" in got.get("status", b"") and b"malformed answer" in got.get("status", b""),
       "and the daemon is told, so that it ends its step")

    r = e.run("release", "5")
    ok(r.returncode == 0, "jobcg release 5")
    left = [x for x in os.listdir(e.root) if x.startswith("job_")]
    ok(left == [], f"nothing left in the tree ({left})")


if __name__ == "__main__":
    sys.exit(main())
