#!/usr/bin/env python3
"""Kernel tests again, through `jobcg daemon`: run one kernel test binary with a daemon on a
private socket (JOBCG_DAEMON_SOCKET), so that every `jobcg run` it makes goes through the
daemon, and check that the daemon really served steps and stopped cleanly. The test's own TAP
lines pass through; this adds its checks before the plan."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def run_with_daemon(test, jobcg, tmp):
    """The daemon on a socket in @tmp, the test @test as its client, and the daemon's checks."""
    sock = os.path.join(tmp, "daemon.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    env = dict(os.environ)
    env.pop("JOBCG_DAEMON_SOCKET", None)
    daemon = subprocess.Popen([jobcg, "daemon", "--socket", sock], stdout=log, stderr=log,
                              stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    for _ in range(500):
        if os.path.exists(sock) or daemon.poll() is not None:
            break
        time.sleep(0.01)
    env["JOBCG_DAEMON_SOCKET"] = sock
    r = subprocess.run(test, env=env, stdout=subprocess.PIPE, text=True)
    n = 0
    plan = None
    for line in r.stdout.splitlines():
        m = re.match(r"^1\.\.(\d+)", line)
        if m:
            plan = line
            continue
        if re.match(r"^(not )?ok\b", line):
            n += 1
        print(line)
    if plan and plan.startswith("1..0"):
        print(plan)  # the test skipped itself
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        return 0
    running = daemon.poll() is None
    if running:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    log.seek(0)
    text = log.read()
    m = re.search(r"(\d+) connection\(s\), (\d+) step\(s\)", text)
    steps = int(m.group(2)) if m else 0
    checks = [
        (running, "the daemon was still running when the test ended"),
        (daemon.returncode == 0, f"the daemon stopped with exit 0 on SIGTERM (got {daemon.returncode})"),
        (steps > 0, f"the daemon started the test's steps ({steps})"),
        (not os.path.exists(sock), "the daemon removed its socket"),
    ]
    for good, what in checks:
        n += 1
        print(f"{'ok' if good else 'not ok'} {n} - {what}")
    if not all(g for g, _ in checks):
        for line in text.splitlines():
            print("# daemon: " + line)
    print(f"1..{n}")
    return 0 if r.returncode == 0 else r.returncode


def main():
    test = sys.argv[1:]
    build = os.environ.get("JOBCG_BUILD_ROOT", ".")
    jobcg = os.path.join(build, "cli", "jobcg")
    if os.geteuid() != 0:
        print("1..0 # SKIP kernel tests need root")
        return 0
    tmp = tempfile.mkdtemp(prefix="jobcg-ktest-daemon-")
    try:
        return run_with_daemon(test, jobcg, tmp)
    finally:
        # Whatever happened (the test skipped itself, a crash): nothing of ours stays in /tmp.
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
