#!/usr/bin/env python3
"""jobcg kernel test: containment fails closed. With stand-in GPUs and ConstrainDevices=yes, in
both device modes: a cgroup under the root that holds no grant (made by hand, a creation killed
half way, system/) opens no managed device, from `jobcg init` on; a node program that lost its
attachment is reported by policy and attached again by gc, and gc removes the entries of a grant
killed before its marker; a release that cannot remove the job keeps its
grant and writes no record, and gc finishes it with exactly one; a release waits for processes
without the node lock; a lock held too long fails with its holder's name. Races are made
deterministic with the pause points of lib/src/base/testhook.h."""
import fcntl
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pytap  # noqa: E402
from pytap import ok, diag  # noqa: E402

EPERM, ENXIO = 1, 6
NGPU = 4

class Env(pytap.KernelEnv):
    def setup(self, mode):
        self.stand_in_gpus(
            NGPU, f"ConstrainDevices=yes\nDeviceProgram={mode}\nNodeLockTimeout=700\n")
        self.pause = os.path.join(self.tmp, "pause")
        os.mkdir(self.pause)
        self.mode = mode

    def gpu(self, i):
        return os.path.join(self.gpus, f"nvidia{i}")

    def probe(self, rel, i):
        """errno of opening GPU i from the cgroup ROOT/REL (0: allowed)."""
        return self.open_in(rel, self.gpu(i))[0]

    def paused(self, point):
        env = dict(self.env, JOBCG_TEST_PAUSE=point, JOBCG_TEST_PAUSE_DIR=self.pause)
        return env

    def wait_reached(self, point, timeout=20):
        path = os.path.join(self.pause, point + ".reached")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if os.path.exists(path):
                return True
            time.sleep(0.02)
        return False

    def go(self, point):
        open(os.path.join(self.pause, point + ".go"), "w").close()

    def reset(self, point):
        for suffix in (".reached", ".go"):
            try:
                os.unlink(os.path.join(self.pause, point + suffix))
            except FileNotFoundError:
                pass

    def job_records(self, job):
        return [r for r in self.records()
                if r.get("type") == "job" and str(r.get("job")) == str(job)]


def mkcg(e, rel):
    os.makedirs(os.path.join(e.root, rel), exist_ok=True)


def check_init_alone(e, m):
    """Before any job: the tree that `jobcg init` makes fails closed from its first moment."""
    r = e.run("init")
    ok(r.returncode == 0, f"{m}: jobcg init ({r.stderr.strip()})")
    got = [e.probe("system", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: after init alone, system/ gets EPERM on every GPU ({got})")
    mkcg(e, "early")
    got = [e.probe("early", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: ... and so does a directory made by hand ({got})")
    os.rmdir(os.path.join(e.root, "early"))


def policy_json(e):
    r = e.run("policy", "--json")
    try:
        return json.loads(r.stdout), r
    except ValueError:
        return {}, r


def check_detached(e, m):
    """A node program pinned but not attached (a jobcg killed as it attached it): policy says
    so, and gc attaches it again."""
    pins = [d for d in os.listdir(e.env["JOBCG_BPF_PIN_DIR"]) if d.startswith("root-")]
    ok(len(pins) == 1, f"{m}: one node program pinned ({pins})")
    prog = os.path.join(e.env["JOBCG_BPF_PIN_DIR"], pins[0], "prog")
    r = subprocess.run(["bpftool", "cgroup", "detach", e.root, "device", "pinned", prog],
                       capture_output=True, text=True)
    ok(r.returncode == 0, f"{m}: bpftool detaches it from the root ({r.stderr.strip()})")
    mkcg(e, "loose")
    got = [e.probe("loose", i) for i in range(NGPU)]
    ok(got == [0] * NGPU, f"{m}: detached, nothing is denied ({got})")
    pol, r = policy_json(e)
    ok(pol.get("attached") is False and "not attached" in r.stderr,
       f"{m}: policy --json says attached: false, and warns ({r.stderr.strip()})")
    r = e.run("policy")
    ok("NOT ATTACHED" in r.stdout, f"{m}: policy's mode line says NOT ATTACHED")
    r = e.run("check", "--json")
    try:
        state = json.loads(r.stdout).get("device_program", {}).get("state")
    except ValueError:
        state = None
    ok(r.returncode == 1 and state == "not attached",
       f"{m}: check --json says not attached and exits 1 (rc {r.returncode}, {state})")
    r = e.run("gc")
    ok(r.returncode == 0 and "attached it again" in r.stderr,
       f"{m}: gc attaches it again, with a warning ({r.stderr.strip()})")
    got = [e.probe("loose", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: then the directory gets EPERM again ({got})")
    pol, r = policy_json(e)
    ok(pol.get("attached") is True, f"{m}: policy --json: attached: true")
    r = e.run("check", "--json")
    try:
        state = json.loads(r.stdout).get("device_program", {}).get("state")
    except ValueError:
        state = None
    ok(state == "attached", f"{m}: check --json: attached ({state})")
    os.rmdir(os.path.join(e.root, "loose"))


def check_markerless(e, m):
    """A grant killed after its entries and before its marker: gc removes those entries."""
    env = dict(e.env, JOBCG_TEST_CRASH="grant-before-marker")
    r = e.run("alloc", "30", "--gres", "gpu:1", env=env)
    ok(r.returncode == -9, f"{m}: alloc 30 killed before its grant's marker (rc {r.returncode})")
    pol, _ = policy_json(e)
    held = [g for g in pol.get("grants", []) if (g.get("path") or "").endswith("job_30")]
    ok(len(held) == 1, f"{m}: the policy map holds job 30's entries without a marker")
    got = [e.probe("job_30", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: without its marker they grant nothing ({got})")
    r = e.run("gc")
    ok(r.returncode == 0 and not os.path.exists(os.path.join(e.root, "job_30")),
       f"{m}: gc removes the job ({r.stderr.strip()})")
    pol, _ = policy_json(e)
    gone = [g for g in pol.get("grants", []) if not g.get("path")]
    ok(gone == [], f"{m}: and the entries of its cgroup, now gone ({gone})")


def check_rollback(e, m):
    """A job whose creation fails after its GPU was granted (its last write, the complete mark,
    refused on request) is rolled back whole: no directory, no grant left in the policy, and
    the GPU free for the next job."""
    before, _ = policy_json(e)
    env = dict(e.env, JOBCG_TEST_FLAGS="job-mark-fails")
    r = e.run("alloc", "31", "--gres", "gpu:1", env=env)
    ok(r.returncode == 1 and "cannot mark it complete" in r.stderr,
       f"{m}: alloc 31 fails at its complete mark, saying so ({r.stderr.strip()})")
    ok(not os.path.exists(os.path.join(e.root, "job_31")), f"{m}: job_31/ is removed")
    after, _ = policy_json(e)
    ok(len(after.get("grants", [])) == len(before.get("grants", [])) and
       not [g for g in after.get("grants", []) if not g.get("path")],
       f"{m}: no grant of it is left in the policy ({len(before.get('grants', []))} -> "
       f"{len(after.get('grants', []))})")
    r = e.run("alloc", "31", "--gres", f"gpu:{NGPU}")
    ok(r.returncode == 0, f"{m}: every GPU is free for the next alloc 31 ({r.stderr.strip()})")
    e.run("release", "31")


def check_ungranted(e, m):
    r = e.run("alloc", "5", "--gres", "gpu:1")
    ok(r.returncode == 0, f"{m}: alloc 5 --gres gpu:1 ({r.stderr.strip()})")
    mkcg(e, "job_5/step_0/user/task_0")
    own = [i for i in range(NGPU) if e.probe("job_5/step_0/user/task_0", i) == 0]
    ok(len(own) == 1, f"{m}: job 5's task opens exactly its one GPU (opens {own})")

    # A job directory made by hand: no grant anywhere on its path.
    mkcg(e, "job_77/step_0/user/task_0")
    got = [e.probe("job_77/step_0/user/task_0", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: a job made by hand gets EPERM on every GPU ({got})")
    got = [e.probe("job_77", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: ... at its job level too ({got})")
    mkcg(e, "handmade")
    got = [e.probe("handmade", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: any other directory below the root: EPERM ({got})")
    got = [e.probe("system", i) for i in range(NGPU)] if os.path.isdir(
        os.path.join(e.root, "system")) else None
    if got is not None:
        ok(got == [EPERM] * NGPU, f"{m}: system/ gets EPERM on every GPU ({got})")
    r = e.run("run", "--job", "77", "--", "true")
    ok(r.returncode != 0 and "not completely created" in r.stderr,
       f"{m}: no step in a job without the created mark ({r.stderr.strip()})")
    # /dev/null-like devices are not managed: still allowed in an ungranted cgroup.
    ok(e.open_in("handmade", "/dev/null") == [0],
       f"{m}: an unmanaged device (/dev/null) still opens")
    for d in ("job_77/step_0/user/task_0", "job_77/step_0/user", "job_77/step_0", "job_77",
              "handmade"):
        os.rmdir(os.path.join(e.root, d))


def check_half_created(e, m):
    env = dict(e.env, JOBCG_TEST_CRASH="gres-before-grant")
    r = e.run("alloc", "8", "--gres", "gpu:1", env=env)
    ok(r.returncode == -9, f"{m}: alloc 8 killed before its grant (rc {r.returncode})")
    jdir = os.path.join(e.root, "job_8")
    ok(os.path.isdir(jdir), f"{m}: the half-created job_8 is left behind")
    mkcg(e, "job_8/step_0/user/task_0")
    got = [e.probe("job_8/step_0/user/task_0", i) for i in range(NGPU)]
    ok(got == [EPERM] * NGPU, f"{m}: a process in the half-created job gets EPERM on every "
       f"GPU, the one it claims included ({got})")
    r = e.run("run", "--job", "8", "--", "true")
    ok(r.returncode != 0, f"{m}: no step in the half-created job ({r.stderr.strip()})")
    r = e.run("gc")
    ok(r.returncode == 0 and not os.path.exists(jdir), f"{m}: gc removes it ({r.stderr.strip()})")


def check_failed_release(e, m):
    r = e.run("alloc", "9", "--gres", "gpu:1")
    ok(r.returncode == 0, f"{m}: alloc 9")
    before = len(e.job_records(9))
    e.reset("remove-before-rmdir")
    rel = subprocess.Popen([e.jobcg, "release", "9"], env=e.paused("remove-before-rmdir"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    intruder = None
    try:
        ok(e.wait_reached("remove-before-rmdir"), f"{m}: release 9 paused before its rmdir")
        # What an adopt racing the release would do: a process enters the job.
        mkcg(e, "job_9/late")
        intruder = subprocess.Popen(["sleep", "1000"])
        with open(os.path.join(e.root, "job_9/late/cgroup.procs"), "w") as f:
            f.write(str(intruder.pid))
    finally:
        e.go("remove-before-rmdir")
        out, err = rel.communicate(timeout=60)
    ok(rel.returncode != 0, f"{m}: the release fails while a process is inside ({err.strip()})")
    got = [e.probe("job_9/late", i) for i in range(NGPU)]
    ok(got.count(0) == 1 and got.count(EPERM) == NGPU - 1,
       f"{m}: the job keeps exactly its grant: one GPU opens, the others EPERM ({got})")
    ok(len(e.job_records(9)) == before, f"{m}: a failed release writes no job record")
    intruder.kill()
    intruder.wait()
    r = e.run("gc")
    ok(r.returncode == 0 and not os.path.exists(os.path.join(e.root, "job_9")),
       f"{m}: gc finishes the removal ({r.stderr.strip()})")
    recs = e.job_records(9)
    ok(len(recs) == before + 1, f"{m}: exactly one record for job 9 ({len(recs) - before})")
    if recs:
        ok(recs[-1].get("state") == "COMPLETED",
           f"{m}: with the outcome the release meant (COMPLETED, got {recs[-1].get('state')})")
    r = e.run("gc")
    ok(len(e.job_records(9)) == before + 1, f"{m}: a second gc records nothing more")


def check_unlocked_wait(e, m):
    # The release pauses there only when its kill leaves a process alive for an instant; a
    # SIGKILLed task that the other CPU ends at once empties the job first. Then the release
    # simply completes, and another job is tried (a few times, never job 11 or 12).
    for jid in (10, 13, 14, 15, 16):
        r = e.run("alloc", str(jid))
        ok(r.returncode == 0, f"{m}: alloc {jid}")
        # Deaf to the release's SIGTERM: only its kill ends it, and the release waits for it.
        step = subprocess.Popen([e.jobcg, "run", "--job", str(jid), "--", "sh", "-c",
                                 "trap '' TERM; exec sleep 1000"], env=e.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        task = os.path.join(e.root, f"job_{jid}/step_0/user/task_0/cgroup.procs")
        end = time.monotonic() + 60
        while time.monotonic() < end and not (os.path.exists(task) and open(task).read().strip()):
            time.sleep(0.05)
        e.reset("kill-unlocked")
        rel = subprocess.Popen([e.jobcg, "release", str(jid)], env=e.paused("kill-unlocked"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        reached = e.wait_reached("kill-unlocked", timeout=60 if jid == 10 else 20)
        if not reached and rel.poll() is not None:
            step.wait(timeout=60)
            diag(f"{m}: release {jid} emptied the job at once (rc {rel.returncode}); again")
            continue
        break
    try:
        ok(reached, f"{m}: release {jid} waits for its processes")
        t0 = time.monotonic()
        r = subprocess.run([e.jobcg, "alloc", "11"], env=e.env, capture_output=True, text=True,
                           timeout=30)
        ok(r.returncode == 0, f"{m}: meanwhile another alloc takes the node lock and succeeds "
           f"in {time.monotonic() - t0:.2f} s ({r.stderr.strip()})")
        r = e.run("run", "--job", str(jid), "--", "true")
        ok(r.returncode != 0, f"{m}: ... but no new step enters the job being released")
    finally:
        e.go("kill-unlocked")
        rel.communicate(timeout=60)
        step.wait(timeout=60)
    ok(rel.returncode == 0, f"{m}: the release then completes")
    e.run("release", "11")


def check_lock_timeout(e, m):
    os.makedirs(e.state, exist_ok=True)
    fd = os.open(os.path.join(e.state, "jobcg.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        t0 = time.monotonic()
        try:
            r = subprocess.run([e.jobcg, "alloc", "12"], env=e.env, capture_output=True,
                               text=True, timeout=20)
            rc, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            rc, err = None, "(still waiting after 20 s)"
        took = time.monotonic() - t0
    finally:
        os.close(fd)
    ok(rc not in (0, None) and took < 10,
       f"{m}: a held node lock fails the command after NodeLockTimeout ({took:.1f} s)")
    ok(f"pid {os.getpid()}" in err, f"{m}: the error names the holder ({err.strip()})")


def check_unconstrained(e, m):
    with open(os.path.join(e.conf, "cgroup.conf"), "w") as f:
        f.write("ConstrainDevices=no\n")
    r = e.run("alloc", "20", "--gres", "gpu:1")
    ok(r.returncode == 0, f"{m}: with ConstrainDevices=no, alloc 20 ({r.stderr.strip()})")
    mkcg(e, "job_20/step_0/user/task_0")
    got = [e.probe("job_20/step_0/user/task_0", i) for i in range(NGPU)]
    ok(got == [0] * NGPU, f"{m}: the node program left attached constrains nothing any more "
       f"({got})")
    os.rmdir(os.path.join(e.root, "job_20/step_0/user/task_0"))
    e.run("release", "20")


def body(e):
    if not pytap.test_hooks():
        pytap.skip("every check here stops jobcg at a pause point: a build without test hooks")
        return
    envs = [e]
    try:
        for mode in ("node", "linear"):
            x = e if mode == "node" else Env("failclosed-linear")
            if x is not e:
                envs.append(x)
            x.setup(mode)
            check_init_alone(x, mode)
            check_rollback(x, mode)
            check_ungranted(x, mode)
            check_half_created(x, mode)
            check_failed_release(x, mode)
        check_detached(e, "node")
        check_markerless(e, "node")
        check_unlocked_wait(e, "node")
        check_lock_timeout(e, "node")
        check_unconstrained(e, "node")
    finally:
        for x in envs[1:]:
            x.cleanup()


if __name__ == "__main__":
    sys.exit(pytap.kernel_main("failclosed", body, env_class=Env))
