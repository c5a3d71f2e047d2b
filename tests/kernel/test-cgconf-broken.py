#!/usr/bin/env python3
"""jobcg kernel test: an error in cgroup.conf keeps no job from being ended or cleaned up, and
constrains nothing with defaults. With stand-in GPUs, ConstrainDevices=yes and jobs holding GPUs,
cgroup.conf gets errors in keys that locate nothing (ConstrainDevices=maybe on its line 1, read
past it "no"; AllowedRAMSpace=abc on its line 3); then list, show, stat, pids, signal, freeze,
thaw, kill, acct, policy, release, gc and teardown work and each prints one warning naming
cgroup.conf:1 (in both device modes); after the release the released job's cgroup is gone, a directory made by hand
below the root still gets EPERM on every GPU (the device policy was not rewritten), the other
job keeps its GPU; init, alloc, run and resv create refuse, naming cgroup.conf:1, and make
nothing; `jobcg step-watch` (the Slurm plugin's watcher) ends a step whose runner died. An
error in a key that locates the tree (StateDir=, or a misspelt JobcgRoot=) still
stops every command."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pytap  # noqa: E402
from pytap import ok, diag  # noqa: E402

EPERM = 1
NGPU = 3
GOOD = "ConstrainDevices=yes\nConstrainRAMSpace=yes\nAllowedRAMSpace=90\nDeviceProgram={}\n"
BROKEN = "ConstrainDevices=maybe\nConstrainRAMSpace=yes\nAllowedRAMSpace=abc\nDeviceProgram={}\n"


class Env(pytap.KernelEnv):
    def setup(self, mode):
        self.mode = mode
        self.stand_in_gpus(NGPU, GOOD.format(mode))

    def gpu(self, i):
        return os.path.join(self.gpus, f"nvidia{i}")

    def probe(self, rel):
        """errno of opening each GPU from ROOT/REL (0: allowed)."""
        return self.open_in(rel, *[self.gpu(i) for i in range(NGPU)])

    def write_conf(self, text):
        text = text.format(self.mode)
        with open(os.path.join(self.conf, "cgroup.conf"), "w") as f:
            f.write(text)

    def jobs(self):
        return sorted(x for x in os.listdir(self.root) if x.startswith("job_"))


def warned_once(r):
    """Exactly one warning, naming cgroup.conf's line 1."""
    lines = [x for x in r.stderr.splitlines() if "warning" in x]
    return len(lines) == 1 and "cgroup.conf:1" in lines[0]


def refused(r, where="cgroup.conf:1"):
    return r.returncode != 0 and where in r.stderr


def check(e, m):
    def okm(c, msg):
        return ok(c, f"{m}: {msg}")

    e.setup(m)
    for job in (1, 2):
        r = e.run("alloc", str(job), "--gres", "gpu:1")
        okm(r.returncode == 0, f"alloc {job} --gres gpu:1 ({r.stderr.strip()})")
    held = {job: e.own_gpus(job, NGPU) for job in (1, 2)}
    okm(all(len(v) == 1 for v in held.values()), f"each job opens its one GPU ({held})")
    runner1 = e.start_step(1)
    e.start_step(2)
    r = e.run("alloc", "3")
    okm(r.returncode == 0, f"alloc 3 ({r.stderr.strip()})")
    runner3 = e.start_step(3)

    r = e.run("metrics")
    okm(r.returncode == 0 and 'jobcg_config_ok{file="cgroup.conf"} 1' in r.stdout and
        'jobcg_config_ok{file="gres.conf"} 1' in r.stdout,
        f"before: metrics says both files are read ({r.returncode}, {r.stderr.strip()})")

    e.write_conf(BROKEN)
    r = e.run("config")
    okm(refused(r), f"cgroup.conf now has an error on its line 1 ({r.stderr.strip()})")
    before = e.jobs()

    # Inspecting.
    r = e.run("list")
    okm(r.returncode == 0 and warned_once(r) and "gpu:" in r.stdout,
       f"list works, one warning, the jobs' GPUs shown ({r.returncode}, {r.stderr.strip()})")
    warn = [x for x in r.stderr.splitlines() if "warning" in x]
    okm(warn and "AllowedRAMSpace" not in warn[0] and "1 more error in it" in warn[0],
       f"... naming the first error and counting the other ({warn})")
    r = e.run("metrics")
    okm(r.returncode == 0 and warned_once(r) and
        'jobcg_config_ok{file="cgroup.conf"} 0' in r.stdout and
        'jobcg_config_ok{file="gres.conf"} 1' in r.stdout and "jobcg_jobs 3" in r.stdout,
        f"metrics goes on, saying cgroup.conf has an error ({r.returncode}, "
        f"{r.stderr.strip()})")
    r = e.run("top", "--batch", "-n", "2", "-d", "0.1")
    okm(r.returncode == 0 and warned_once(r) and
        "cgroup.conf has an error: no job is made until it is fixed" in r.stdout,
        f"top goes on, warning once and saying so on its screen ({r.returncode}, "
        f"{r.stderr.strip()})")
    for args in (("show", "1"), ("stat", "1"), ("pids", "1"), ("acct",), ("policy",),
                 ("resv", "list")):
        r = e.run(*args)
        okm(r.returncode == 0 and warned_once(r),
           f"{' '.join(args)} works, one warning ({r.returncode}, {r.stderr.strip()})")

    # Signalling, freezing, killing.
    r = e.run("signal", "-s", "CONT", "2")
    okm(r.returncode == 0 and warned_once(r), f"signal works ({r.stderr.strip()})")
    r = e.run("freeze", "2")
    okm(r.returncode == 0 and warned_once(r), f"freeze works ({r.stderr.strip()})")
    r = e.run("thaw", "2")
    okm(r.returncode == 0 and warned_once(r), f"thaw works ({r.stderr.strip()})")
    r = e.run("kill", "2")
    okm(r.returncode == 0 and warned_once(r), f"kill works ({r.stderr.strip()})")

    # Creating or constraining refuses, and makes nothing.
    for args in (("init",), ("alloc", "5"), ("alloc", "6", "--gres", "gpu:1"),
                 ("alloc", "7", "--mem", "64M"), ("run", "--", "true"),
                 ("run", "--job", "2", "--", "true"), ("resv", "create", "r1")):
        r = e.run(*args)
        okm(refused(r), f"{' '.join(args)} refuses, naming cgroup.conf:1 "
           f"({r.returncode}, {r.stderr.strip()})")
    okm(e.jobs() == before, f"no job was made ({e.jobs()})")
    okm(not os.path.exists(os.path.join(e.root, "resv_r1")), "no reservation was made")
    okm(not [s for s in os.listdir(os.path.join(e.root, "job_2")) if s.startswith("step_")
            and s != "step_0"], "no step was made in job 2")

    # Releasing.
    r = e.run("release", "1", "--grace", "500")
    okm(r.returncode == 0 and warned_once(r),
       f"release 1 works, one warning ({r.returncode}, {r.stderr.strip()})")
    okm(not os.path.exists(os.path.join(e.root, "job_1")), "job_1's cgroup is gone")
    try:
        runner1.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass
    okm(runner1.poll() is not None, "its step's runner has ended")
    recs = [x for x in e.records() if x.get("type") == "job" and str(x.get("job")) == "1"]
    okm(len(recs) == 1, f"one accounting record for job 1 ({len(recs)})")
    e.mkcg("handmade")
    got = e.probe("handmade")
    okm(got == [EPERM] * NGPU,
       f"a cgroup made by hand still gets EPERM on every GPU, job 1's freed one too ({got})")
    e.rmcg("handmade")
    got = e.own_gpus(2, NGPU)
    okm(got == held[2], f"job 2 opens exactly its own GPU still ({got})")

    # The Slurm plugin's watcher, whose step's runner died: it ends the step.
    step3 = os.path.join(e.root, "job_3", "step_0")
    try:
        runner = os.getxattr(step3, "trusted.jobcg.runner").decode()
    except OSError as x:
        runner = None
        diag(f"step 3.0's runner: {x}")
    if runner:
        runner3.kill()
        runner3.wait()
        r = e.run("step-watch", "--step-dir", step3, "3.0", runner)
        okm(r.returncode == 0 and not os.path.exists(step3),
           f"step-watch ends step 3.0, whose runner was killed ({r.returncode}, "
           f"{r.stderr.strip()})")
        recs = [x for x in e.records() if x.get("type") == "step" and str(x.get("job")) == "3"]
        okm(len(recs) == 1 and recs[0].get("state") == "NODE_FAIL",
           f"... and records it NODE_FAIL ({recs})")
    else:
        ok(True, "# SKIP no trusted xattrs: the step records no runner")
        ok(True, "# SKIP no trusted xattrs")

    # Cleaning up.
    r = e.run("gc")
    okm(r.returncode == 0 and warned_once(r), f"gc works ({r.stderr.strip()})")
    e.mkcg("handmade")
    got = e.probe("handmade")
    okm(got == [EPERM] * NGPU, f"after gc, still EPERM on every GPU ({got})")
    e.rmcg("handmade")

    # A key that locates the tree, bad or misspelt: nothing is guessed.
    for text, where in (("ConstrainCores=yes\nStateDir=var/lib/jobcg\n", "cgroup.conf:2"),
                        ("JobcgRot=elsewhere\n", "cgroup.conf:1")):
        e.write_conf(text)
        for args in (("list",), ("release", "2"), ("gc",), ("teardown", "--force")):
            r = e.run(*args)
            okm(refused(r, where), f"{text.splitlines()[-1]}: {' '.join(args)} refuses "
               f"({r.returncode}, {r.stderr.strip()})")
    okm(os.path.exists(os.path.join(e.root, "job_2")), "job 2 is still there")

    e.write_conf(BROKEN)
    r = e.run("teardown", "--force")
    okm(r.returncode == 0 and warned_once(r) and not os.path.exists(e.root),
       f"teardown --force removes the tree ({r.returncode}, {r.stderr.strip()})")
    pins = e.env["JOBCG_BPF_PIN_DIR"]
    okm(not os.path.exists(pins) or not os.listdir(pins),
       f"and the pins ({os.listdir(pins) if os.path.exists(pins) else []})")


def body(e):
    envs = [e]
    try:
        for mode in ("node", "linear"):
            x = e if mode == "node" else Env("cgconf-broken-linear")
            if x is not e:
                envs.append(x)
            check(x, mode)
    finally:
        for x in envs[1:]:
            x.cleanup()


if __name__ == "__main__":
    sys.exit(pytap.kernel_main("cgconf-broken", body, env_class=Env))
