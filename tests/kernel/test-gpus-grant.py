#!/usr/bin/env python3
"""jobcg kernel test: what a job holding a GPU may open, with stand-in nodes of the made-up tree
(tests/gpufixture.py) and gres.conf written the way `jobcg gpus --gres-conf` writes it. A job
holding one MIG instance opens its parent GPU and its own GI and CI caps, never another
instance's caps or another GPU; every job holding an NVIDIA GPU opens nvidiactl and
nvidia-uvm, a job without one does not; an AMD GPU comes with /dev/kfd; `jobcg who-has` on a
cap device names its job. In both device program modes."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpufixture as fx  # noqa: E402
import pytap  # noqa: E402
from pytap import ok  # noqa: E402

EPERM = 1
MIG = "gpu:nvidia_a100-sxm4-40gb_mig:1"
WHOLE = "gpu:nvidia_a100-sxm4-40gb:1"
AMD = "gpu:amd_gpu_0x740f:1"

class Env(pytap.KernelEnv):
    def setup(self, mode):
        self.fx = os.path.join(self.tmp, f"node-{mode}")
        fx.make(self.fx)
        lines = [x.replace("/dev/", self.fx + "/dev/") for x in fx.GRES_CONF.splitlines()
                 if not x.startswith("#") and "intel" not in x]
        with open(os.path.join(self.conf, "gres.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(self.conf, "cgroup.conf"), "w") as f:
            f.write(f"ConstrainDevices=yes\nDeviceProgram={mode}\n")

    def dev(self, name):
        return os.path.join(self.fx, "dev", name)

    def probe(self, job, names):
        rel = f"job_{job}/step_0/user/task_0"
        os.makedirs(os.path.join(self.root, rel), exist_ok=True)
        return self.open_in(rel, *[self.dev(n) for n in names])


def check(e, m):
    for job, gres in ((5, MIG), (6, None), (7, WHOLE), (8, AMD)):
        r = e.run("alloc", str(job), *(["--gres", gres] if gres else []))
        ok(r.returncode == 0, f"{m}: alloc {job} {gres or ''} ({r.stderr.strip()})")
    names = ["nvidia1", "nvidia-caps/nvidia-cap12", "nvidia-caps/nvidia-cap13", "nvidiactl",
             "nvidia-uvm", "nvidia-uvm-tools"]
    got = e.probe(5, names)
    ok(got == [0] * len(names), f"{m}: the MIG job opens its parent GPU, its GI and CI caps, "
       f"nvidiactl and nvidia-uvm(-tools) ({got})")
    others = ["nvidia-caps/nvidia-cap14", "nvidia-caps/nvidia-cap21",
              "nvidia-caps/nvidia-cap22", "nvidia0", "kfd", "dri/renderD128"]
    got = e.probe(5, others)
    ok(got == [EPERM] * len(others), f"{m}: ... and EPERM on another instance's caps (CI 1 of "
       f"its own GI, GI 2), on GPU 0 and on the AMD GPU ({got})")
    got = e.probe(6, ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia0", "kfd"])
    ok(got == [EPERM] * 5, f"{m}: a job without a GPU opens no companion device ({got})")
    got = e.probe(7, ["nvidia0", "nvidiactl", "nvidia-uvm", "nvidia1",
                      "nvidia-caps/nvidia-cap12", "kfd"])
    ok(got == [0, 0, 0, EPERM, EPERM, EPERM], f"{m}: the whole-GPU job: its GPU and the "
       f"companions, not the MIG GPU or its caps, not kfd ({got})")
    got = e.probe(8, ["dri/renderD128", "kfd", "nvidiactl", "nvidia0"])
    ok(got == [0, 0, EPERM, EPERM], f"{m}: the AMD job: its render node and /dev/kfd only "
       f"({got})")
    r = e.run("who-has", e.dev("nvidia-caps/nvidia-cap13"), "--root", e.root)
    ok(r.returncode == 0 and "job_5" in r.stdout and "job_7" not in r.stdout and
       "job_6" not in r.stdout, f"{m}: who-has on the CI cap names job 5 only ({r.stdout!r})")
    r = e.run("who-has", e.dev("nvidiactl"), "--root", e.root)
    ok("job_5" in r.stdout and "job_7" in r.stdout and "job_6" not in r.stdout and
       "job_8" not in r.stdout, f"{m}: who-has on nvidiactl names the NVIDIA jobs ({r.stdout!r})")
    for job in (5, 6, 7, 8):
        r = e.run("release", str(job))
        ok(r.returncode == 0, f"{m}: release {job} ({r.stderr.strip()})")


def body(e):
    for mode in ("node", "linear"):
        e.setup(mode)
        check(e, mode)


if __name__ == "__main__":
    sys.exit(pytap.kernel_main("gpus-grant", body, env_class=Env))
