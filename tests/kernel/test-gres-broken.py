#!/usr/bin/env python3
"""jobcg kernel test: an error in gres.conf keeps no job from being ended or cleaned up, and
widens no access. With stand-in GPUs, ConstrainDevices=yes and jobs holding GPUs, gres.conf gets
an error on its line 2; then, in both device modes: list, show, stat, pids, signal, freeze,
thaw, kill, acct, policy, release, gc and teardown work and each prints one warning naming
gres.conf:2; after the release the released job's cgroup is gone, a directory made by hand
below the root still gets EPERM on every GPU (the managed set was not rewritten), the other
jobs keep exactly their own GPU; alloc, run and resv create refuse, naming gres.conf:2."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pytap  # noqa: E402
from pytap import ok  # noqa: E402

EPERM = 1
NGPU = 4
BROKEN = "Name=gpu Count=many\n"  # line 2: not a number


class Env(pytap.KernelEnv):
    def setup(self, mode):
        self.stand_in_gpus(NGPU, f"ConstrainDevices=yes\nDeviceProgram={mode}\n")
        self.mode = mode

    def gpu(self, i):
        return os.path.join(self.gpus, f"nvidia{i}")

    def probe(self, rel):
        """errno of opening each GPU from ROOT/REL (0: allowed)."""
        return self.open_in(rel, *[self.gpu(i) for i in range(NGPU)])


def warned_once(r):
    """Exactly one warning, naming gres.conf's line 2."""
    lines = [x for x in r.stderr.splitlines() if "warning" in x]
    return len(lines) == 1 and "gres.conf:2" in lines[0]


def check(e, m):
    e.setup(m)
    for job in (1, 2, 3):
        r = e.run("alloc", str(job), "--gres", "gpu:1")
        ok(r.returncode == 0, f"{m}: alloc {job} --gres gpu:1 ({r.stderr.strip()})")
    r = e.run("alloc", "4")
    ok(r.returncode == 0, f"{m}: alloc 4 without GPUs ({r.stderr.strip()})")
    held = {job: e.own_gpus(job, NGPU) for job in (1, 2, 3)}
    ok(all(len(v) == 1 for v in held.values()), f"{m}: each job opens its one GPU ({held})")
    runner1 = e.start_step(1)
    e.start_step(2)

    with open(os.path.join(e.conf, "gres.conf"), "a") as f:
        f.write(BROKEN)
    r = e.run("config")
    ok(r.returncode != 0 and "gres.conf:2" in r.stderr,
       f"{m}: gres.conf now has an error on its line 2 ({r.stderr.strip()})")

    # Inspecting.
    r = e.run("list")
    ok(r.returncode == 0 and warned_once(r) and "job_1" not in r.stderr,
       f"{m}: list works, one warning ({r.returncode}, {r.stderr.strip()})")
    ok("gpu:" in r.stdout, f"{m}: ... and shows the GPUs the jobs recorded ({r.stdout!r})")
    r = e.run("metrics")
    ok(r.returncode == 0 and warned_once(r) and
       'jobcg_config_ok{file="gres.conf"} 0' in r.stdout and
       'jobcg_config_ok{file="cgroup.conf"} 1' in r.stdout,
       f"{m}: metrics goes on, saying gres.conf has an error ({r.returncode}, "
       f"{r.stderr.strip()})")
    for args in (("show", "1"), ("stat", "1"), ("pids", "1"), ("acct",), ("policy",)):
        r = e.run(*args)
        ok(r.returncode == 0 and warned_once(r),
           f"{m}: {' '.join(args)} works, one warning ({r.returncode}, {r.stderr.strip()})")

    # Signalling, freezing, killing.
    r = e.run("signal", "-s", "CONT", "2")
    ok(r.returncode == 0 and warned_once(r), f"{m}: signal works ({r.stderr.strip()})")
    r = e.run("freeze", "2")
    ok(r.returncode == 0 and warned_once(r), f"{m}: freeze works ({r.stderr.strip()})")
    r = e.run("thaw", "2")
    ok(r.returncode == 0 and warned_once(r), f"{m}: thaw works ({r.stderr.strip()})")
    r = e.run("kill", "2")
    ok(r.returncode == 0 and warned_once(r), f"{m}: kill works ({r.stderr.strip()})")

    # Creating or granting refuses.
    r = e.run("alloc", "5", "--gres", "gpu:1")
    ok(r.returncode != 0 and "gres.conf:2" in r.stderr
       and not os.path.exists(os.path.join(e.root, "job_5")),
       f"{m}: alloc --gres refuses, naming gres.conf:2 ({r.stderr.strip()})")
    r = e.run("alloc", "6")
    ok(r.returncode != 0 and "gres.conf:2" in r.stderr,
       f"{m}: alloc without GPUs refuses too ({r.stderr.strip()})")
    r = e.run("run", "--", "true")
    ok(r.returncode != 0 and "gres.conf:2" in r.stderr,
       f"{m}: run refuses ({r.stderr.strip()})")
    r = e.run("resv", "create", "r1", "--devices", "gpu:3")
    ok(r.returncode != 0 and "gres.conf:2" in r.stderr,
       f"{m}: resv create refuses ({r.stderr.strip()})")

    # Releasing.
    r = e.run("release", "1", "--grace", "500")
    ok(r.returncode == 0 and warned_once(r),
       f"{m}: release 1 works, one warning ({r.returncode}, {r.stderr.strip()})")
    ok(not os.path.exists(os.path.join(e.root, "job_1")), f"{m}: job_1's cgroup is gone")
    try:
        runner1.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    ok(runner1.poll() is not None, f"{m}: its step's runner has ended")
    recs = [x for x in e.records() if x.get("type") == "job" and str(x.get("job")) == "1"]
    ok(len(recs) == 1, f"{m}: one accounting record for job 1 ({len(recs)})")
    e.mkcg("handmade")
    got = e.probe("handmade")
    ok(got == [EPERM] * NGPU,
       f"{m}: a cgroup made by hand still gets EPERM on every GPU, job 1's freed one too "
       f"({got})")
    e.rmcg("handmade")
    e.mkcg("job_4/step_90/user/task_0")
    got = e.probe("job_4/step_90/user/task_0")
    ok(got == [EPERM] * NGPU, f"{m}: job 4, which holds no GPU, still opens none ({got})")
    e.rmcg("job_4/step_90/user/task_0", keep=1)
    for job in (2, 3):
        got = e.own_gpus(job, NGPU)
        ok(got == held[job], f"{m}: job {job} opens exactly its own GPU still ({got})")
    if m == "node":
        r = e.run("policy", "--json")
        try:
            managed = json.loads(r.stdout).get("managed", [])
        except ValueError:
            managed = None
        ok(managed is not None and len(managed) == NGPU,
           f"{m}: the managed set keeps every GPU ({managed})")

    # Cleaning up.
    r = e.run("gc")
    ok(r.returncode == 0 and warned_once(r), f"{m}: gc works ({r.stderr.strip()})")
    e.mkcg("handmade")
    got = e.probe("handmade")
    ok(got == [EPERM] * NGPU, f"{m}: after gc, still EPERM on every GPU ({got})")
    e.rmcg("handmade")
    r = e.run("teardown", "--force")
    ok(r.returncode == 0 and warned_once(r) and not os.path.exists(e.root),
       f"{m}: teardown --force removes the tree ({r.returncode}, {r.stderr.strip()})")
    pins = e.env["JOBCG_BPF_PIN_DIR"]
    ok(not os.path.exists(pins) or not os.listdir(pins),
       f"{m}: and the pins ({os.listdir(pins) if os.path.exists(pins) else []})")


def body(e):
    envs = [e]
    try:
        for mode in ("node", "linear"):
            x = e if mode == "node" else Env("gres-broken-linear")
            if x is not e:
                envs.append(x)
            check(x, mode)
    finally:
        for x in envs[1:]:
            x.cleanup()


if __name__ == "__main__":
    sys.exit(pytap.kernel_main("gres-broken", body, env_class=Env))
