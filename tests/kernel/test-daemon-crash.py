#!/usr/bin/env python3
"""Kernel test: `jobcg daemon` killed (SIGKILL) at the worst moments of a step's end, and
started twice at once. The daemon is stopped at a named point (test hooks, passed through the
client's JOBCG_* environment, which the daemon wears for its work) and killed there; the
client, which lost the daemon, must end what is left of its step itself: no orphaned job for
`jobcg gc` to sweep while the client was alive to end it, one record per step and job, with the
outcome the client saw. Two daemons started at once on a stale socket: one listens, the other
is refused (none listens where no client can reach it). A freeze racing a client's launch
waits for it. Makes its own cgroup subtree, state dir and sockets, and removes
them."""
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import KernelEnv, diag, kernel_main, ok  # noqa: E402
import pytap  # noqa: E402


class Env(KernelEnv):
    def __init__(self, name):
        super().__init__(name)
        os.mkdir(self.root)
        self.sock = os.path.join(self.tmp, "daemon.sock")
        self.pause = os.path.join(self.tmp, "pause")
        os.mkdir(self.pause)
        self.daemons = []

    def start_daemon(self, sock=None):
        sock = sock or self.sock
        log = open(os.path.join(self.tmp, f"daemon{len(self.daemons)}.log"), "w+")
        d = subprocess.Popen([self.jobcg, "daemon", "--socket", sock, "--resv-period", "0"],
                             env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        d.log = log
        self.daemons.append(d)
        wait_for(lambda: d.poll() is not None or "listening" in self.log_of(d))
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
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    return pred()


def jobs(e):
    return sorted(x for x in os.listdir(e.root) if x.startswith("job_"))


def kill_daemon_at(e, point, *run_args):
    """A client's step through a fresh daemon, which is killed at @point of its work; the
    client's exit code, stderr and the records the step and its job got."""
    for f in os.listdir(e.pause):
        os.unlink(os.path.join(e.pause, f))
    d = e.start_daemon()
    env = dict(e.env, JOBCG_DAEMON_SOCKET=e.sock, JOBCG_TEST_PAUSE=point,
               JOBCG_TEST_PAUSE_DIR=e.pause)
    before = len(e.records())
    p = subprocess.Popen([e.jobcg, "run", *run_args], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    reached = wait_for(lambda: os.path.exists(os.path.join(e.pause, point + ".reached")), 30)
    d.kill()
    d.wait()
    # The client may pass the same point later: let it through.
    open(os.path.join(e.pause, point + ".go"), "w").close()
    out, err = p.communicate(timeout=120)
    if not reached:
        diag(f"the daemon never reached {point}: {e.log_of(d)}")
    return reached, p.returncode, err, e.records()[before:]


def body(e):
    # Killed after the step's directory is gone, before its record: the record waits on the
    # ephemeral job's directory, which the client must still remove (writing it).
    for point in ("step-end-before-record", "remove-before-rmdir"):
        reached, rc, err, recs = kill_daemon_at(e, point, "--", "sh", "-c", "exit 0")
        left = jobs(e)
        kinds = sorted((x["type"], x["state"]) for x in recs)
        ok(reached and rc == 0 and "lost the daemon" in err and left == [],
           f"daemon killed at {point}: the client ends its step and removes its ephemeral "
           f"job (exit {rc}, left {left})")
        ok(kinds == [("job", "COMPLETED"), ("step", "COMPLETED")],
           f"and the step and the job get one record each, COMPLETED ({kinds})")
        if left:
            diag(err)
            e.run("gc")
    killed_before_answer(e)
    two_daemons_at_once(e)
    freeze_during_launch(e)


def killed_before_answer(e):
    """The daemon killed while it makes a client's step, before it answers: the client fails
    (nothing ran) and exits; what the daemon made in its name is then stray, and `jobcg gc`
    removes it, recording what had started (a step left half made, which never ran, gets no
    record; a complete one and an ephemeral job get NODE_FAIL)."""
    r = e.run("alloc", "7")
    ok(r.returncode == 0, "jobcg alloc 7")
    cases = (("step-create-after-mkdir", ["--job", "7"], []),
             ("daemon-before-spawn", ["--job", "7"], [("step", "NODE_FAIL")]),
             ("step-create-after-mkdir", [], [("job", "NODE_FAIL")]),
             ("daemon-before-spawn", [], [("job", "NODE_FAIL"), ("step", "NODE_FAIL")]))
    for point, args, want in cases:
        d = e.start_daemon()
        env = dict(e.env, JOBCG_DAEMON_SOCKET=e.sock, JOBCG_TEST_CRASH=point)
        before = len(e.records())
        marker = os.path.join(e.tmp, "ran-before-answer")
        r = subprocess.run([e.jobcg, "run", *args, "--", "touch", marker], env=env,
                           capture_output=True, text=True, timeout=60)
        d.wait(10)
        what = f"{point}, {'job 7' if args else 'ephemeral job'}"
        made = jobs(e) != ["job_7"] or any(x.startswith("step_")
                                            for x in os.listdir(os.path.join(e.root, "job_7")))
        ok(r.returncode == 1 and "gave no answer" in r.stderr and not os.path.exists(marker)
           and d.returncode == -signal.SIGKILL and made,
           f"daemon killed at {what}: the client fails, runs nothing, and the daemon's work "
           f"is left half done ({r.returncode}, {r.stderr.strip()!r}, {jobs(e)})")
        g = e.run("gc")
        steps = [x for x in os.listdir(os.path.join(e.root, "job_7")) if x.startswith("step_")]
        recs = sorted((x["type"], x["state"]) for x in e.records()[before:])
        ok(g.returncode == 0 and jobs(e) == ["job_7"] and steps == [] and recs == want,
           f"and jobcg gc removes it, with the records it owes ({g.returncode}, "
           f"{g.stdout.strip()!r} {g.stderr.strip()!r}, left {jobs(e)} {steps}, {recs})")
    r = e.run("release", "7")
    ok(r.returncode == 0, "jobcg release 7")


def two_daemons_at_once(e):
    """Two daemons started on a stale socket: the first stops after it found nobody listening,
    before it replaces the socket; the second must not bind meanwhile, else the first one's
    unlink takes its socket away (or its own takes the first's), and one of them listens for
    ever where no client can reach it."""
    sock = os.path.join(e.tmp, "race.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock)
    stale.close()
    for f in os.listdir(e.pause):
        os.unlink(os.path.join(e.pause, f))
    log = open(os.path.join(e.tmp, "first.log"), "w+")
    first = subprocess.Popen(
        [e.jobcg, "daemon", "--socket", sock, "--resv-period", "0"],
        env=dict(e.env, JOBCG_TEST_PAUSE="daemon-before-unlink", JOBCG_TEST_PAUSE_DIR=e.pause),
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    e.daemons.append(first)
    reached = wait_for(
        lambda: os.path.exists(os.path.join(e.pause, "daemon-before-unlink.reached")), 30)
    second = subprocess.Popen([e.jobcg, "daemon", "--socket", sock, "--resv-period", "0"],
                              env=e.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    e.daemons.append(second)
    # Refused at once, or listening (the flaw): give it the time to bind either way.
    wait_for(lambda: second.poll() is not None, 3)
    open(os.path.join(e.pause, "daemon-before-unlink.go"), "w").close()
    log.seek(0)
    wait_for(lambda: "listening" in open(log.name).read() or first.poll() is not None, 30)
    alive = [d for d in (first, second) if d.poll() is None]
    err = second.stderr.read() if second.poll() is not None else ""
    ok(reached and second.poll() is not None and second.returncode == 1 and
       "another jobcg daemon" in err,
       f"a daemon started while another is starting on the same socket is refused "
       f"({second.returncode}, {err.strip()!r})")
    r = subprocess.run([e.jobcg, "run", "--", "sh", "-c", "echo served"],
                       env=dict(e.env, JOBCG_DAEMON_SOCKET=sock), capture_output=True,
                       text=True, timeout=60)
    ok(len(alive) == 1 and alive[0] is first and r.returncode == 0 and r.stdout == "served\n",
       f"one daemon listens, and clients reach it ({len(alive)} alive)")
    first.send_signal(signal.SIGTERM)
    first.wait(60)
    # Stopped, it gives the lock back: a new daemon may start (while steps under way end).
    d = e.start_daemon(sock)
    ok(d.poll() is None, "after it stops, a new daemon takes the socket")
    d.send_signal(signal.SIGTERM)
    d.wait(60)
    left = os.listdir(os.path.dirname(sock))
    ok(d.returncode == 0 and "race.sock" not in left and "race.sock.lock" not in left,
       f"stopped, it leaves neither its socket nor its lock file ({left})")


def freeze_during_launch(e):
    """A client of the daemon starts its tasks itself, in the step directory the daemon lent
    it: stopped between its frozen check and its clone, it holds off a freeze of its job, which
    would freeze the task before its exec and leave the client waiting for that exec until a
    thaw; one that cannot wait fails, nothing frozen, and the step runs."""
    point = "spawn-before-clone"
    for f in os.listdir(e.pause):
        os.unlink(os.path.join(e.pause, f))
    ok(e.run("alloc", "9").returncode == 0, "jobcg alloc 9")
    d = e.start_daemon()
    env = dict(e.env, JOBCG_DAEMON_SOCKET=e.sock, JOBCG_TEST_PAUSE=point,
               JOBCG_TEST_PAUSE_DIR=e.pause)
    p = subprocess.Popen([e.jobcg, "run", "--job", "9", "--", "true"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reached = wait_for(lambda: os.path.exists(os.path.join(e.pause, point + ".reached")), 30)
    f = e.run("freeze", "--timeout", "300", "9")
    with open(os.path.join(e.root, "job_9", "cgroup.freeze")) as fh:
        frozen = fh.read().strip()
    ok(reached and f.returncode == 1 and "tasks are being started in job 9" in f.stderr
       and frozen == "0",
       f"a freeze while a daemon's client starts its task fails, nothing frozen "
       f"({f.returncode}, {f.stderr.strip()!r}, cgroup.freeze {frozen})")
    open(os.path.join(e.pause, point + ".go"), "w").close()
    try:
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        e.run("thaw", "9")  # the client stuck in its clone: let it go on
        p.communicate(timeout=60)
        p.returncode = -1
    ok(p.returncode == 0, f"and the client's step runs, without a thaw (exit {p.returncode})")
    d.send_signal(signal.SIGTERM)
    d.wait(60)
    ok(e.run("release", "9").returncode == 0, "jobcg release 9")


def main():
    pytap.require_hooks("the daemon is killed and stopped at its pause and crash points: a "
                        "build without test hooks")
    return kernel_main("daemon-crash", body, Env)


if __name__ == "__main__":
    sys.exit(main())
