#!/usr/bin/env python3
# On a real GPU node, as root: jobcg_spank.so under a private Slurm (its own munged, slurmctld and
# slurmd on free ports, everything under one temporary directory, stopped by pid at the end) with
# jobcg's gres.conf from `jobcg gpus --gres-conf`, Slurm's made from it, and ConstrainDevices=yes.
# A step Slurm gives a GPU runs in the job's jobcg cgroup, sees that GPU and only it (nvidia-smi,
# CUDA through PyTorch where installed), with jobcg's CUDA_VISIBLE_DEVICES equal to Slurm's; a
# step of a job without one sees none and gets EPERM on the GPU's files; `jobcg who-has` names
# the job; the job's cgroup is gone once Slurm ends the job. Not part of the test suites (they
# have no GPU); run by hand:
#   tests/gpu-slurm.py [--jobcg PATH] [--spank PATH] [--stepd PATH] [--gres-conf FILE]
#                      [--slurm-autodetect]
# (defaults: build/cli/jobcg, build/spank/jobcg_spank.so, slurmd's own slurmstepd; --gres-conf
# takes FILE's Name=gpu lines instead of detection: a dry run with stand-in device nodes, where
# the checks that need nvidia-smi are skipped; --slurm-autodetect puts AutoDetect=nvml in Slurm's
# gres.conf, so the plugin maps Slurm's GPU numbers through the driver's files as slurmd's NVML
# merge orders them).
# Ends with "gpu-slurm: N checks, N failed"; exit 1 on a failure, 2 when it cannot run.
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
n = failed = 0


def check(good, what):
    global n, failed
    n += 1
    failed += not good
    print(("ok     " if good else "FAILED ") + what, flush=True)


def cannot(msg):
    print(f"gpu-slurm: {msg}", flush=True)
    sys.exit(2)


def free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


OPEN = ("import os, sys\ntry:\n    os.close(os.open(sys.argv[1], os.O_RDWR))\n"
        "except OSError as e:\n    sys.exit(e.errno)")
TORCH = ('import torch; n = torch.cuda.device_count(); print(n)\nif n:\n'
         '    x = torch.ones(1024, device="cuda"); print(torch.cuda.get_device_name(0), '
         'float(x.sum()))')


# Slurm's own cgroup.conf: no Constrain* (jobcg constrains). Without systemd, slurmd's cgroup/v2
# plugin (22.05 and later) cannot ask D-Bus for its slurmstepd scope and refuses to start unless
# told to make it with mkdir.
# (Slurm takes cgroup v2 when /sys/fs/cgroup is cgroup2.)
SLURM_CGROUP_CONF = ("IgnoreSystemd=yes\nCgroupAutomount=yes\n"
                     if not os.path.isdir("/run/systemd/system") and
                     any(ln.split()[1:3] == ["/sys/fs/cgroup", "cgroup2"]
                         for ln in open("/proc/self/mounts")) else "")


def slurm_scopes(mnt):
    """The cgroups slurmd's cgroup/v2 plugin makes for itself with IgnoreSystemd (system.slice,
    [NODE_]slurmstepd.scope): removed at the end if they were not there before."""
    d = os.path.join(mnt, "system.slice")
    try:
        return {d} | {os.path.join(d, x) for x in os.listdir(d) if x.endswith("slurmstepd.scope")}
    except OSError:
        return set()


def remove_new(paths):
    """rmdir each path and the cgroups slurmd and slurmstepd made below it, deepest first."""
    dirs = []
    for top in paths:
        dirs += [d for d, _, _ in os.walk(top)]
    for p in sorted(set(dirs), key=lambda d: d.count("/"), reverse=True):
        for _ in range(50):
            try:
                os.rmdir(p)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


class Slurm:
    def __init__(self, a):
        self.a = a
        self.pids = []
        self.tmp = tempfile.mkdtemp(prefix="jobcg-gpuslurm-")
        self.tag = os.path.basename(self.tmp)
        self.conf = os.path.join(self.tmp, "jobcg")
        self.pins = f"/sys/fs/bpf/{self.tag}"
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "JOBCG_CONF_DIR": self.conf, "JOBCG_DAEMON_SOCKET": ""}
        self.senv = None
        self.mnt = next(ln.split()[1] for ln in open("/proc/self/mounts")
                        if ln.split()[2] == "cgroup2")
        self.mnt_tree = os.path.join(self.mnt, self.tag)
        self.scopes = slurm_scopes(self.mnt)

    def path(self, *p):
        return os.path.join(self.tmp, "slurm", *p)

    def jobcg(self, *args):
        return subprocess.run([self.a.jobcg, *args], capture_output=True, text=True,
                              env=self.env)

    def daemon(self, args, pidfile):
        with open(self.path(os.path.basename(args[0]) + ".out"), "a") as fh:
            r = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=fh,
                               stderr=subprocess.STDOUT, timeout=120)
        if r.returncode:
            raise RuntimeError(f"{' '.join(args)} exited {r.returncode}")
        for _ in range(100):
            try:
                self.pids.append(int(open(pidfile).read().split()[0]))
                return
            except (OSError, ValueError, IndexError):
                time.sleep(0.05)
        raise RuntimeError(f"{args[0]} wrote no pid file {pidfile}")

    def start(self, progs, gres_lines):
        a = self.a
        os.makedirs(self.path("ctld"))
        ctrls = open(os.path.join(self.mnt, "cgroup.controllers")).read().split()
        os.makedirs(self.conf)
        with open(os.path.join(self.conf, "cgroup.conf"), "w") as fh:
            fh.write(f"ConstrainCores={'yes' if 'cpuset' in ctrls else 'no'}\n"
                     f"ConstrainRAMSpace={'yes' if 'memory' in ctrls else 'no'}\n"
                     f"ConstrainDevices=yes\nJobcgRoot={self.tag}\n"
                     f"StateDir={os.path.join(self.tmp, 'state')}\nBpfPinDir={self.pins}\n")
        with open(os.path.join(self.conf, "gres.conf"), "w") as fh:
            fh.write("".join(ln + "\n" for ln in gres_lines))
        r = self.jobcg("init")
        if r.returncode:
            raise RuntimeError(f"jobcg init: {r.stderr.strip()}")
        key = self.path("munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as fh:
            fh.write(os.urandom(1024))
        sock = self.path("munge.sock")
        self.daemon([progs["munged"], "--force", f"--socket={sock}", f"--key-file={key}",
                     f"--pid-file={self.path('munged.pid')}",
                     f"--log-file={self.path('munged.log')}",
                     f"--seed-file={self.path('munged.seed')}"], self.path("munged.pid"))
        host = socket.gethostname()
        topo = subprocess.run([progs["slurmd"], "-C"], capture_output=True,
                              text=True).stdout.split("\n")[0]
        topo = " ".join(w for w in topo.split()
                        if not w.startswith(("NodeName=", "RealMemory=", "UpTime=")))
        # Slurm's gres.conf: jobcg's lines for this node, without Cores= (Slurm reads core
        # indices there, jobcg CPU ids; the check here is about devices).
        sgres = [re.sub(r"\s*Cores=\S+", "", f"NodeName=g1 {ln}") for ln in gres_lines]
        if a.slurm_autodetect:
            sgres.insert(0, "AutoDetect=nvml")
        conf = [f"ClusterName={self.tag.replace('-', '')[:16]}", f"SlurmctldHost={host}",
                "SlurmctldAddr=127.0.0.1", f"SlurmctldPort={free_port()}", "SlurmUser=root",
                "AuthType=auth/munge", f"AuthInfo=socket={sock}", "CredType=cred/munge",
                f"StateSaveLocation={self.path('ctld')}",
                f"SlurmctldPidFile={self.path('slurmctld.pid')}",
                f"SlurmctldLogFile={self.path('slurmctld.log')}",
                f"SlurmdSpoolDir={self.path('d')}", f"SlurmdPidFile={self.path('slurmd.pid')}",
                f"SlurmdLogFile={self.path('slurmd.log')}",
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity",
                "JobAcctGatherType=jobacct_gather/linux", "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core", "GresTypes=gpu", "SlurmdTimeout=300",
                "ReturnToService=2", "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none", "MpiDefault=none", "DebugFlags=NO_CONF_HASH",
                # The plugin's phase timings (slurm_verbose) in slurmd's log, printed at the end.
                "SlurmdDebug=verbose",
                # Every job has an extern step, where ssh logins are adopted.
                "PrologFlags=Contain",
                f"PlugStackConfig={self.path('plugstack.conf')}",
                f"NodeName=g1 NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} {topo}"
                f" Gres=gpu:{len(gres_lines)}",
                "PartitionName=gpu Nodes=g1 Default=YES MaxTime=INFINITE State=UP"]
        os.makedirs(self.path("d"))
        with open(self.path("slurm.conf"), "w") as fh:
            fh.write("\n".join(conf) + "\n")
        with open(self.path("gres.conf"), "w") as fh:
            fh.write("\n".join(sgres) + "\n")
        with open(self.path("cgroup.conf"), "w") as fh:
            fh.write(SLURM_CGROUP_CONF)
        if SLURM_CGROUP_CONF:  # slurmd makes its scope there, but not system.slice itself
            os.makedirs(os.path.join(self.mnt, "system.slice"), exist_ok=True)
        with open(self.path("plugstack.conf"), "w") as fh:
            fh.write(f"required {a.spank} conf={self.conf} jobcg={a.jobcg}\n")
        print("--- slurm.conf:\n" + "\n".join(conf) + "\n--- Slurm's gres.conf:\n" +
              "\n".join(sgres), flush=True)
        self.daemon([progs["slurmctld"], "-i", "-f", self.path("slurm.conf")],
                    self.path("slurmctld.pid"))
        self.daemon([progs["slurmd"], "-N", "g1", "-f", self.path("slurm.conf")] +
                    (["-d", a.stepd] if a.stepd else []), self.path("slurmd.pid"))
        self.senv = dict(os.environ, SLURM_CONF=self.path("slurm.conf"))
        for _ in range(300):
            r = subprocess.run([progs["sinfo"], "-h", "-o", "%t"], capture_output=True,
                               text=True, env=self.senv)
            if r.returncode == 0 and r.stdout.split() == ["idle"]:
                return
            time.sleep(0.1)
        raise RuntimeError(f"slurmd did not register: {r.stdout}{r.stderr}")

    def srun(self, progs, *args, timeout=120):
        r = subprocess.run([progs["srun"], "-N1", *args], capture_output=True, text=True,
                           env=self.senv, timeout=timeout)
        return r.returncode, r.stdout + r.stderr

    def stop(self, logs, progs):
        # Every job ended through Slurm first: a slurmstepd left when slurmd stops would run
        # on, with its step's watcher.
        if self.senv:
            subprocess.run([progs["scancel"], "--user=root"], env=self.senv,
                           capture_output=True)
            for _ in range(300):
                r = subprocess.run([progs["squeue"], "-h"], env=self.senv, capture_output=True,
                                   text=True)
                if r.returncode or not r.stdout.strip():
                    break
                time.sleep(0.1)
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        remove_new(slurm_scopes(self.mnt) - self.scopes)
        if os.path.isdir(self.conf):
            self.jobcg("teardown", "--force")
        try:
            lines = [ln for ln in open(self.path("slurmd.log")) if "jobcg" in ln]
            print("--- jobcg_spank.so in slurmd's log:\n" + "".join(lines[-40:]), end="")
        except OSError:
            pass
        for log in ("slurmd.log", "slurmctld.log") if logs else ():
            try:
                lines = [ln for ln in open(self.path(log)) if "error" in ln.lower()]
                for ln in lines[-8:]:
                    print(f"{log}: {ln}", end="")
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(prog="tests/gpu-slurm.py")
    ap.add_argument("--jobcg", default=os.path.join(TOP, "build", "cli", "jobcg"))
    ap.add_argument("--spank", default=os.path.join(TOP, "build", "spank", "jobcg_spank.so"))
    ap.add_argument("--stepd", default=None, help="slurmstepd for slurmd -d")
    ap.add_argument("--gres-conf", default=None, help="Name=gpu lines instead of detection")
    ap.add_argument("--slurm-autodetect", action="store_true",
                    help="AutoDetect=nvml in Slurm's gres.conf")
    a = ap.parse_args()
    a.jobcg, a.spank = os.path.abspath(a.jobcg), os.path.abspath(a.spank)
    if os.geteuid():
        cannot("needs root")
    for f in (a.jobcg, a.spank):
        if not os.path.exists(f):
            cannot(f"{f} not found (give its path)")
    search = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    progs = {x: shutil.which(x, path=search)
             for x in ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scancel", "squeue")}
    missing = [x for x, p in progs.items() if not p]
    if missing:
        cannot(f"not found: {' '.join(missing)}")
    if not any(ln.split()[2] == "cgroup2" for ln in open("/proc/self/mounts")):
        cannot("no cgroup v2 mount")
    if a.gres_conf:
        gres = [ln.strip() for ln in open(a.gres_conf) if ln.startswith("Name=gpu")]
        smi = False
    else:
        r = subprocess.run([a.jobcg, "gpus", "--gres-conf"], capture_output=True, text=True)
        gres = [ln for ln in r.stdout.splitlines() if ln.startswith("Name=gpu")]
        smi = shutil.which("nvidia-smi") is not None
        if r.returncode or not gres:
            cannot(f"jobcg gpus --gres-conf found no GPU: {r.stderr.strip()}")
    gpu = re.search(r"Files?=([^ ,]+)", gres[0]).group(1)
    sl = Slurm(a)

    def stop(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, stop)
    try:
        sl.start(progs, gres)
        check(True, f"a private Slurm with jobcg_spank.so is up ({len(gres)} GPU(s), {gpu})")
        rc, out = sl.srun(progs, "--gres=gpu:1", "sh", "-c",
                          'echo "JOB=$SLURM_JOB_ID CVD=$CUDA_VISIBLE_DEVICES '
                          'SJG=$SLURM_JOB_GPUS SSG=$SLURM_STEP_GPUS"; cat /proc/self/cgroup; '
                          + ('nvidia-smi -L' if smi else 'true'))
        print("\n".join("step gpu:1: " + ln for ln in out.splitlines()), flush=True)
        m = re.search(r"JOB=(\d+) CVD=(\S*) SJG=(\S*) SSG=(\S*)", out)
        check(rc == 0 and m is not None, f"srun --gres=gpu:1 runs (exit {rc})")
        if m:
            check(f"/{sl.tag}/job_{m.group(1)}/" in out,
                  f"the step runs in jobcg's cgroup of job {m.group(1)}")
            check(m.group(2) == "0", f"CUDA_VISIBLE_DEVICES={m.group(2)} (0 expected)")
            check(m.group(3) in ("0", "") and m.group(4) in ("0", ""),
                  f"Slurm's SLURM_JOB_GPUS={m.group(3)} SLURM_STEP_GPUS={m.group(4)} agree")
        if smi:
            check(len(re.findall(r"^GPU \d+:", out, re.M)) == 1, "nvidia-smi -L lists one GPU")
            rc, out = sl.srun(progs, "nvidia-smi", "-L")
            print("\n".join("step no gpu: " + ln for ln in out.splitlines()), flush=True)
            check(rc != 0 and not re.search(r"^GPU \d+:", out, re.M),
                  f"a job without a GPU: nvidia-smi sees none (exit {rc})")
        rc, out = sl.srun(progs, "--gres=gpu:1", sys.executable, "-c", OPEN, gpu)
        check(rc != 1, f"a job with a GPU: open {gpu} -> exit {rc} (not EPERM)")
        for f in (gpu, "/dev/nvidiactl", "/dev/nvidia-uvm"):
            if os.path.exists(f):
                rc, out = sl.srun(progs, sys.executable, "-c", OPEN, f)
                check(rc == 1, f"a job without a GPU: open {f} -> exit {rc} (EPERM: 1)")

        if smi and subprocess.run([sys.executable, "-c", "import torch"],
                                  capture_output=True).returncode == 0:
            rc, out = sl.srun(progs, "--gres=gpu:1", sys.executable, "-c", TORCH)
            print("\n".join("torch gpu:1: " + ln for ln in out.splitlines()[-3:]), flush=True)
            check(rc == 0 and out.splitlines()[0:1] == ["1"] and " 1024.0" in out,
                  "with a GPU: PyTorch sees 1 device and computes on it")
            rc, out = sl.srun(progs, sys.executable, "-c", TORCH)
            print("\n".join("torch no gpu: " + ln for ln in out.splitlines()[-3:]), flush=True)
            check(out.splitlines()[0:1] == ["0"], "without: PyTorch sees no device")
        else:
            print("skip: no PyTorch, CUDA not tried")

        rc, out = sl.srun(progs, "--gres=gpu:1", "sh", "-c",
                          f'echo "JOB=$SLURM_JOB_ID"; JOBCG_CONF_DIR={sl.conf} '
                          f'JOBCG_DAEMON_SOCKET= {a.jobcg} who-has {gpu} --root {sl.mnt_tree}')
        print("\n".join("who-has: " + ln for ln in out.splitlines()), flush=True)
        m = re.search(r"JOB=(\d+)", out)
        holders = [ln for ln in out.splitlines() if "/" in ln and not ln.startswith("#")]
        check(m is not None and holders and
              all(f"/job_{m.group(1)}" in ln for ln in holders),
              f"jobcg who-has {gpu} names only the running job")
        # An ssh login adopted into a job lands in its extern step: it may open the GPUs the
        # job's steps were given (as with Slurm's task/cgroup), a login of another job not.
        for gres, want in (("--gres=gpu:1", True), (None, False)):
            args = [progs["srun"], "-N1"] + ([gres] if gres else []) + [
                "sh", "-c", 'echo "JOB=$SLURM_JOB_ID"; sleep 10']
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=sl.senv)
            try:
                m = None
                for _ in range(20):  # srun's own lines ("queued and waiting") may come first
                    line = p.stdout.readline()
                    m = re.search(r"JOB=(\d+)", line)
                    if m or not line:
                        break
                ext = m and os.path.join(sl.mnt_tree, f"job_{m.group(1)}", "step_extern",
                                         "user", "task_special")
                rc = subprocess.run(
                    [sys.executable, "-c", "import os, sys\n"
                     "open(os.path.join(sys.argv[2], 'cgroup.procs'), 'w').write(str(os.getpid()))\n"
                     + OPEN.split("\n", 1)[1], gpu, ext or "/nonexistent"],
                    capture_output=True, text=True).returncode if ext else -1
                # ENXIO (6) from a stand-in node: the device check let it through.
                opened = rc in (0, 6)
                check(m is not None and opened == want,
                      f"a login in the extern step of a job {'with' if gres else 'without'} a "
                      f"GPU: open {gpu} -> exit {rc} ({'allowed' if want else 'EPERM: 1'})")
            finally:
                if m:
                    subprocess.run([progs["scancel"], m.group(1)], env=sl.senv)
                p.wait(timeout=60)
        left = []
        for _ in range(100):
            left = [d for d in os.listdir(sl.mnt_tree) if d.startswith("job_")]
            if not left:
                break
            time.sleep(0.1)
        check(not left, f"every job's cgroup is gone after Slurm ended it ({left})")
    except (RuntimeError, subprocess.TimeoutExpired, KeyboardInterrupt) as e:
        check(False, f"stopped: {e}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sl.stop(logs=failed > 0, progs=progs)
    check(not os.path.exists(sl.mnt_tree) and not os.path.exists(sl.pins),
          "nothing left in the cgroup tree or bpffs")
    print(f"gpu-slurm: {n} checks, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
