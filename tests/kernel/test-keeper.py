#!/usr/bin/env python3
"""Kernel test: `jobcg keeper` as the library starts it for a systemd scope (its environment
naming the scope and a grace) leaves by itself when it is not in that scope once the grace is
over (its starter was killed before the keeper was moved there), and stays when it was moved
in time. Runs the keeper outside systemd: the scope is a cgroup of the test's own tree. Makes
its own cgroup subtree and removes it."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import KernelEnv, kernel_main, ok  # noqa: E402


class Env(KernelEnv):
    def __init__(self, name):
        super().__init__(name)
        os.mkdir(self.root)
        self.procs = []

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for d in ("system", ""):
            try:
                os.rmdir(os.path.join(self.root, d))
            except OSError:
                pass
        super().cleanup()


def keeper(e, scope, grace_ms):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "JOBCG_KEEPER_SCOPE": scope,
           "JOBCG_KEEPER_GRACE_MS": str(grace_ms)}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    p = subprocess.Popen([e.jobcg, "keeper"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    e.procs.append(p)
    return p


def body(e):
    scope = os.path.relpath(e.root, e.mount)
    sysdir = os.path.join(e.root, "system")
    os.mkdir(sysdir)
    left = keeper(e, scope, 500)
    moved = keeper(e, scope, 500)
    with open(os.path.join(sysdir, "cgroup.procs"), "w") as f:
        f.write(str(moved.pid))
    try:
        left.wait(15)
    except subprocess.TimeoutExpired:
        pass
    ok(left.poll() == 0,
       f"a keeper never moved into its scope leaves once its grace is over ({left.poll()})")
    time.sleep(1.5)
    ok(moved.poll() is None, "one moved into the scope's system/ in time stays")
    plain = subprocess.Popen([e.jobcg, "keeper"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={k: v for k, v in os.environ.items()
                                  if not k.startswith("JOBCG_KEEPER")})
    e.procs.append(plain)
    time.sleep(1)
    ok(plain.poll() is None, "one started without a scope (by hand) waits, as before")
    for p in (moved, plain):
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    ok(moved.returncode == -signal.SIGTERM, "SIGTERM ends a keeper")


def main():
    return kernel_main("keeper", body, Env)


if __name__ == "__main__":
    sys.exit(main())
