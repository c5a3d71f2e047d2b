#!/usr/bin/env python3
"""Kernel test: examples/step-agent, a resident launcher built against the installed form of
libjobcg (public headers, the archive exporting only jobcg_*), does what `jobcg run --job J`
does: tasks born in their step's task cgroups with the job's GPUs in their environment, exit
codes passed on, one accounting record per step, the step removed; a missing job and a command
that cannot be run are reported and leave nothing behind. Makes its own cgroup subtree, state
dir and configuration, and removes them."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pytap import KernelEnv, diag, kernel_main, ok  # noqa: E402


class Env(KernelEnv):
    def __init__(self, name):
        super().__init__(name)
        # Two stand-in GPUs: character nodes nobody opens (no driver has major 195 here, and
        # the nodes live in our temporary directory).
        gpus = []
        for i in range(2):
            p = os.path.join(self.tmp, f"gpu{i}")
            os.mknod(p, 0o600 | 0o020000, os.makedev(195, 220 + i))
            gpus.append(p)
        with open(os.path.join(self.conf, "gres.conf"), "w") as f:
            f.write("".join(f"Name=gpu File={p}\n" for p in gpus))
        with open(os.path.join(self.conf, "cgroup.conf"), "w") as f:
            f.write("ConstrainDevices=yes\n")
        self.env["JOBCG_DAEMON_SOCKET"] = ""
        self.agent = os.path.join(self.build, "examples", "step-agent")

    def agent_run(self, *args):
        return subprocess.run([self.agent, *args], env=self.env, capture_output=True, text=True,
                              timeout=120)

    def step_records(self, job):
        return [r for r in self.records()
                if r.get("type") == "step" and str(r.get("job")) == str(job)]

    def steps(self, job):
        d = os.path.join(self.root, f"job_{job}")
        return sorted(x for x in os.listdir(d) if x.startswith("step_"))


def checks(e):
    if not ok(os.path.exists(e.agent), f"{e.agent} was built"):
        return
    r = e.run("init")
    if not ok(r.returncode == 0, "jobcg init"):
        diag(r.stderr)
        return
    r = e.run("alloc", "7", "--best-effort", "--gres", "gpu:2")
    if not ok(r.returncode == 0, "jobcg alloc 7 --gres gpu:2"):
        diag(r.stderr)
        return

    # Two steps of two tasks each; every task says who it is and where it runs, then fails.
    script = ('echo "task=$JOBCG_TASK_ID step=$JOBCG_STEP_ID gpus=$CUDA_VISIBLE_DEVICES '
              'cg=$(grep ^0:: /proc/self/cgroup | cut -d: -f3)"; exit 3')
    r = e.agent_run("-n", "2", "-t", "2", "7", "--", "sh", "-c", script)
    ok(r.returncode == 3, f"the last step's exit code is the agent's (exit {r.returncode})")
    lines = r.stdout.splitlines()
    tasks = sorted(x for x in lines if x.startswith("task="))
    # Step numbers count up over the job's life: the two steps are 7.0 and 7.1.
    want = sorted(f"task={t} step={s} gpus=0,1 cg=/{e.tag}/job_7/step_{s}/user/task_{t}"
                  for t in (0, 1) for s in (0, 1))
    ok(tasks == want, "each task is born in its own task cgroup of the step, with both of the "
       "job's GPUs in CUDA_VISIBLE_DEVICES")
    if tasks != want:
        diag(r.stdout)
        diag(r.stderr)
    ok([x for x in lines if x.startswith("step ")] ==
       ["step 7.0: exit code 3", "step 7.1: exit code 3"],
       "one line per step with its exit code")
    recs = e.step_records(7)
    ok(len(recs) == 2 and all(x.get("exit_code") == 3 and x.get("state") == "FAILED"
                              for x in recs),
       f"one accounting record per step, FAILED with exit code 3 ({len(recs)} records)")
    if len(recs) != 2:
        diag(json.dumps(recs))
    ok(e.steps(7) == [], "the steps are removed")

    r = e.agent_run("7", "--", "true")
    ok(r.returncode == 0 and r.stdout.strip() == "step 7.2: exit code 0",
       f"a step that succeeds: exit 0 ({r.returncode}, {r.stdout.strip()!r})")
    recs = e.step_records(7)
    ok(len(recs) == 3 and recs[-1].get("state") == "COMPLETED", "and is recorded COMPLETED")

    r = e.agent_run("8", "--", "true")
    ok(r.returncode == 1 and "no job 8" in r.stderr,
       f"a job that does not exist: exit 1 and the library's message ({r.stderr.strip()!r})")
    ok(not os.path.exists(os.path.join(e.root, "job_8")), "and nothing is created for it")

    missing = os.path.join(e.tmp, "no-such-command")
    r = e.agent_run("7", "--", missing)
    ok(r.returncode == 127 and missing in r.stderr,
       f"a command that cannot be run: exit 127, named ({r.returncode}, {r.stderr.strip()!r})")
    ok(e.steps(7) == [], "and its step is removed")

    for args, what in ((["7"], "no command"), (["-n", "0", "7", "--", "true"], "-n 0"),
                       (["x", "--", "true"], "a job id that is not a number")):
        r = e.agent_run(*args)
        ok(r.returncode == 2 and r.stderr.strip(), f"{what}: exit 2 with a message")

    r = e.run("release", "7")
    ok(r.returncode == 0, "jobcg release 7")
    left = [x for x in os.listdir(e.root) if x.startswith("job_")]
    ok(left == [], f"nothing left in the tree ({left})")


if __name__ == "__main__":
    sys.exit(kernel_main("agent", checks, Env))
