#!/usr/bin/env python3
"""jobcg gpus and jobcg check against made-up GPU trees (tests/gpufixture.py) read through
JOBCG_SYSROOT: the nvidia, amd and intel backends, nvml through a stand-in libnvidia-ml.so.1,
the gres.conf lines, the differences check names, and broken trees that must leave a GPU out
with a warning naming the file, never list a wrong device. mknod needs root: skipped without."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpufixture as fx  # noqa: E402
import pytap  # noqa: E402
from pytap import ok, diag  # noqa: E402

BUILD = os.path.abspath(os.environ.get("JOBCG_BUILD_ROOT", "."))
JOBCG = os.path.join(BUILD, "cli", "jobcg")
FAKE_NVML_DIR = os.path.join(BUILD, "tests", "fakenvml")


class T:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="jobcg-gpus-")
        self.conf = os.path.join(self.tmp, "conf")
        os.mkdir(self.conf)
        self.n = 0

    def tree(self):
        self.n += 1
        root = os.path.join(self.tmp, f"root{self.n}")
        fx.make(root)
        return root

    def run(self, root, *args, env=None):
        e = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        e.update(JOBCG_SYSROOT=root, JOBCG_CONF_DIR=self.conf)
        e.update(env or {})
        return subprocess.run([JOBCG, *args], env=e, capture_output=True, text=True,
                              timeout=60)

    def gpus(self, root, *args, env=None):
        r = self.run(root, "gpus", "--json", *args, env=env)
        try:
            return r, json.loads(r.stdout)
        except ValueError:
            diag(r.stdout + r.stderr)
            return r, {"gpus": [], "warnings": []}

    def nvml_env(self, text):
        p = os.path.join(self.tmp, f"nvml{self.n}")
        with open(p, "w") as f:
            f.write(text)
        return {"LD_LIBRARY_PATH": FAKE_NVML_DIR, "JOBCG_FAKE_NVML": p}


def paths(files):
    return [f["path"] for f in files]


def check_all(t):
    root = t.tree()
    r, j = t.gpus(root)
    g = j["gpus"]
    ok(r.returncode == 0 and j["warnings"] == [], f"gpus --json: exit 0, no warning ({r.stderr})")
    ok(j["backends"] == "nvidia,amd,intel", f"the library-free backends ran ({j['backends']})")
    ok(len(g) == 7, f"2 GPUs, 3 MIG instances, an AMD and an Intel GPU: 7 rows (got {len(g)})")
    if len(g) != 7:
        diag(json.dumps(j, indent=1))
        return
    ok(g[0]["uuid"] == fx.UUID0 and g[0]["pci"] == "0000:3b:00.0" and
       g[0]["files"] == [{"path": "/dev/nvidia0", "device": "195:0"}] and g[0]["cpus"] == "0-3"
       and g[0]["type"] == "nvidia_a100-sxm4-40gb" and not g[0]["mig_mode"],
       "GPU 0: UUID, bus id, /dev/nvidia0 (195:0), local CPUs, type")
    ok(paths(g[0]["companions"]) == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"],
       f"its companions: nvidiactl, nvidia-uvm, nvidia-uvm-tools ({paths(g[0]['companions'])})")
    ok(g[1]["mig_mode"] and g[1]["uuid"] == fx.UUID1, "GPU 1 is in MIG mode")
    want = [(1, 0, 12, 13), (1, 1, 12, 14), (2, 0, 21, 22)]
    for row, (gi, ci, gim, cim) in zip(g[2:5], want):
        ok(row["mig"] and row["parent"] == 1 and row["gi"] == gi and row["ci"] == ci and
           row["files"] == [{"path": "/dev/nvidia1", "device": "195:1"},
                            {"path": f"/dev/nvidia-caps/nvidia-cap{gim}",
                             "device": f"{fx.NV_CAPS}:{gim}"},
                            {"path": f"/dev/nvidia-caps/nvidia-cap{cim}",
                             "device": f"{fx.NV_CAPS}:{cim}"}] and
           row["uuid"] == f"MIG-{fx.UUID1}/{gi}/{ci}" and row["cpus"] == "4-7",
           f"MIG GI {gi} CI {ci}: parent /dev/nvidia1, its GI cap {gim} and CI cap {cim}")
    amd, intel = g[5], g[6]
    ok(amd["vendor"] == "amd" and amd["files"] == [{"path": "/dev/dri/renderD128",
                                                     "device": "226:128"}] and
       amd["companions"] == [{"path": "/dev/kfd", "device": f"{fx.KFD}:0"}] and
       amd["uuid"] == "GPU-0000000000abcdef" and amd["pci"] == "0000:03:00.0",
       "AMD: its render node, /dev/kfd as companion, ROCm's UUID from unique_id")
    ok(intel["vendor"] == "intel" and intel["files"] == [{"path": "/dev/dri/renderD129",
                                                         "device": "226:129"}] and
       intel["companions"] == [] and intel["cpus"] == "8-15", "Intel: its render node")
    r = t.run(root, "gpus", "--gres-conf")
    ok(r.returncode == 0 and r.stdout == fx.GRES_CONF, "gpus --gres-conf: File= and MultipleFiles=")
    if r.stdout != fx.GRES_CONF:
        diag(r.stdout + r.stderr)
    r = t.run(root, "gpus", "--gres-conf", "--node", "gpu01", "--backend", "intel")
    ok(r.stdout.splitlines()[1:] == ["NodeName=gpu01 Name=gpu Type=intel_gpu_0x0bd5 "
                                     "File=/dev/dri/renderD129 Cores=8-15"],
       f"--backend intel --node gpu01: one line ({r.stdout.strip()!r})")
    r = t.run(root, "gpus")
    ok(r.returncode == 0 and "MIG GI 1 CI 1 of row 1" in r.stdout, "the table names MIG rows")
    r = t.run(root, "gpus", "--backend", "nrt")
    ok(r.returncode == 1 and "nrt" in r.stderr, f"nrt is refused ({r.stderr.strip()})")
    r = t.run(root, "gpus", "--backend", "cuda")
    ok(r.returncode == 2 and "--backend: unknown GPU detection backend 'cuda'" in r.stderr,
       "an unknown --backend is a usage error naming it")


def check_nvml(t):
    root = t.tree()
    r, j = t.gpus(root, "--backend", "nvml", env=t.nvml_env(fx.NVML))
    g = j["gpus"]
    ok(r.returncode == 0 and len(g) == 5, f"nvml: 2 GPUs, 3 instances ({r.stderr.strip()})")
    if len(g) == 5:
        ok(g[0]["pci"] == "0000:3b:00.0" and g[0]["uuid"] == fx.UUID0 and g[1]["mig_mode"],
           "nvml: bus id normalised, UUID, MIG mode")
        ok([x["profile"] for x in g[2:]] == ["2g.10gb", "1c.2g.10gb", "3g.20gb"] and
           [x["uuid"] for x in g[2:]] == [f"MIG-7f6a0000-0000-5000-8000-00000000000{i}"
                                        for i in (1, 2, 3)],
           "nvml: MIG profiles and the instances' own UUIDs")
        ok([paths(x["files"]) for x in g[2:]] ==
           [paths(y["files"]) for y in t.gpus(root)[1]["gpus"][2:5]],
           "nvml: the same device files as the driver's files give")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvml", env=t.nvml_env(fx.NVML))
    ok("Type=nvidia_a100-sxm4-40gb_3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/"
       "nvidia-cap21,/dev/nvidia-caps/nvidia-cap22" in r.stdout, "nvml: Type= has the profile")
    r = t.run(root, "gpus", "--backend", "nvml",
              env=t.nvml_env(fx.NVML + "fail nvmlDeviceGetUUID 999\n"))
    ok(r.returncode == 1 and "nvmlDeviceGetUUID failed" in r.stderr,
       f"an NVML error return is an error naming the call ({r.stderr.strip()})")
    r = t.run(root, "gpus", "--backend", "nvml", env=t.nvml_env(fx.NVML + "fail nvmlInit_v2 9\n"))
    ok(r.returncode == 1 and "Driver Not Loaded" in r.stderr, "nvmlInit_v2 failing")
    r, j = t.gpus(root, "--backend", "nvml",
                  env=t.nvml_env(fx.NVML.replace("|1|1\n", "|1|-1\n")))
    ok(r.returncode == 0 and len(j["gpus"]) == 2 and not j["gpus"][1]["mig_mode"],
       "nvml: MIG mode not supported is a whole GPU")
    have_real = subprocess.run(["sh", "-c", "ldconfig -p | grep -q libnvidia-ml.so.1"]).returncode == 0
    if not have_real:
        r = t.run(root, "gpus", "--backend", "nvml")
        ok(r.returncode == 1 and "libnvidia-ml.so.1" in r.stderr,
           f"no NVML library: an error naming it ({r.stderr.strip()})")


def check_conf(t, root, text):
    with open(os.path.join(t.conf, "gres.conf"), "w") as f:
        f.write(text)
    r = t.run(root, "check", "--json")
    try:
        return json.loads(r.stdout)["gpus"]["differences"]
    except (ValueError, KeyError, TypeError):
        diag(r.stdout + r.stderr)
        return None


def check_compare(t):
    root = t.tree()
    nv = [x for x in fx.GRES_CONF.splitlines() if "nvidia" in x and not x.startswith("#")]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(nv) + "\n")
    ok(d == [], f"check: gres.conf from --gres-conf agrees ({d})")
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(nv[:3]) + "\n")
    ok(d and len(d) == 1 and "GI 2 CI 0" in d[0] and "not in gres.conf" in d[0],
       f"check: a MIG instance missing from gres.conf is named ({d})")
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join([nv[1], nv[0]] + nv[2:]) + "\n")
    ok(d and any("different order" in x and ":3: gpu 1" in x for x in d),
       f"check: a different order is named ({d})")
    fx.node(root, "/dev/nvidia2", 195, 2)
    bad = [nv[0].replace("/dev/nvidia0", "/dev/nvidia2")] + nv[1:]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(bad) + "\n")
    ok(d and any("/dev/nvidia2, c 195:2) matches no detected GPU" in x for x in d) and
       any("(/dev/nvidia0)" in x and "not in gres.conf" in x for x in d),
       f"check: a wrong minor names both sides ({d})")
    bad = [nv[0].replace("Cores=0-3", "Cores=0-5").replace("Type=nvidia_a100-sxm4-40gb",
                                                            "Type=h100")] + nv[1:]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(bad) + "\n")
    ok(d and any("Type=h100" in x for x in d) and any("Cores=0-5" in x for x in d),
       f"check: a wrong Type and Cores are named ({d})")
    bad = nv[:1] + [nv[1].replace("nvidia-cap13", "nvidia-cap22")] + nv[2:]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(bad) + "\n")
    ok(d and any("GI 1 CI 0" in x for x in d), f"check: another instance's cap is named ({d})")
    os.unlink(os.path.join(t.conf, "gres.conf"))


def smt_topology(root):
    """2 sockets x 2 cores x 2 threads numbered as Linux does (siblings N and N+4): Slurm's core
    0 is CPUs 0,4, core 1 CPUs 1,5, core 2 CPUs 2,6, core 3 CPUs 3,7."""
    for cpu in range(8):
        top = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        fx.write(root, f"{top}/physical_package_id", f"{(cpu % 4) // 2}\n")
        fx.write(root, f"{top}/die_id", "0\n")
        fx.write(root, f"{top}/core_id", f"{cpu % 2}\n")


def check_smt(t):
    # Slurm reads Cores= as core indices: on an SMT node the GPU's CPUs are not its cores.
    root = t.tree()
    smt_topology(root)
    fx.write(root, "/sys/bus/pci/devices/0000:3b:00.0/local_cpulist", "0-1,4-5\n")
    fx.write(root, "/sys/bus/pci/devices/0000:5e:00.0/local_cpulist", "2-3,6-7\n")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvidia")
    lines = [x for x in r.stdout.splitlines() if not x.startswith("#")]
    ok(r.returncode == 0 and lines and
       lines[0] == "Name=gpu Type=nvidia_a100-sxm4-40gb File=/dev/nvidia0 Cores=0-1" and
       all(x.endswith(" Cores=2-3") for x in lines[1:]),
       f"gpus --gres-conf on SMT: Cores= are core indices, not CPU ids ({r.stdout}{r.stderr})")
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(lines) + "\n")
    ok(d == [], f"check on SMT: the core indices agree with the GPUs' local CPUs ({d})")
    bad = [lines[0].replace("Cores=0-1", "Cores=0-1,4-5")] + lines[1:]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(bad) + "\n")
    ok(d and len(d) == 1 and "gres.conf:2: gpu 0: Cores=0-1,4-5 names 2 cores beyond" in d[0],
       f"check on SMT: CPU ids written as Cores= name cores beyond the node's, with the line ({d})")
    bad = [lines[0].replace("Cores=0-1", "Cores=0")] + lines[1:]
    d = check_conf(t, root, "AutoDetect=nvidia\n" + "\n".join(bad) + "\n")
    ok(d and len(d) == 1 and "Cores=0, but the CPUs local to the" in d[0] and
       d[0].endswith("are 0-1,4-5 (Cores=0-1)"),
       f"check on SMT: a wrong core is named, with the Cores= to write ({d})")
    os.unlink(os.path.join(t.conf, "gres.conf"))


def check_bad(t):
    root = t.tree()
    info = "/proc/driver/nvidia/gpus/0000:3b:00.0/information"
    fx.write(root, info, fx.information(fx.MODEL, fx.UUID0, "0000:3b:00.0", 0).split("Device")[0])
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and any(root + info in w and "Device Minor" in w for w in j["warnings"])
       and [x["files"][0]["path"] for x in j["gpus"]][:1] == ["/dev/nvidia1"],
       f"a truncated information file: GPU 0 left out, the file named ({j['warnings']})")
    root = t.tree()
    os.unlink(os.path.join(root, info.lstrip("/")))
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and any(root + info in w for w in j["warnings"]) and len(j["gpus"]) == 4,
       f"a missing information file: named, GPU left out ({j['warnings']})")
    root = t.tree()
    fx.node(root, "/dev/nvidia0", 195, 5)
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and any(f"{root}/dev/nvidia0 is c 195:5" in w and "Device Minor: 0" in w
                                 for w in j["warnings"]) and
       all(f["device"] != "195:5" for x in j["gpus"] for f in x["files"]) and len(j["gpus"]) == 4,
       f"/dev/nvidia0 with another minor: left out, never listed ({j['warnings']})")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvidia")
    ok(r.returncode == 1 and "/dev/nvidia0" not in r.stdout, "and not in the gres.conf lines")
    root = t.tree()
    acc = "/proc/driver/nvidia/capabilities/gpu1/mig/gi2/ci0/access"
    fx.write(root, acc, fx.access(23))
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and any(root + acc in w and "mig-minors" in w for w in j["warnings"]) and
       len(j["gpus"]) == 4, f"a cap minor mig-minors disagrees with: left out ({j['warnings']})")
    mm = os.path.join(root, "proc/driver/nvidia-caps/mig-minors")
    with open(mm) as f:
        text = f.read()
    with open(mm, "w") as f:
        f.write(text.replace("gpu1/gi2/ci0/access 22", "gpu1/gi2/ci0/access 23"))
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and any(f"{root}/dev/nvidia-caps/nvidia-cap23" in w
                                 for w in j["warnings"]) and len(j["gpus"]) == 4 and
       not any("nvidia-cap23" in f["path"] for x in j["gpus"] for f in x["files"]),
       f"a cap file naming an absent device: left out, named ({j['warnings']})")
    root = t.tree()
    os.unlink(os.path.join(root, "dev/kfd"))
    r, j = t.gpus(root, "--backend", "amd")
    ok(r.returncode == 1 and j["gpus"] == [] and any(f"{root}/dev/kfd" in w for w in j["warnings"]),
       "AMD without /dev/kfd: left out, named")
    # A kfd property that is not a number is not read as its leading digits.
    for line, bad in (("drm_render_minor 128", "drm_render_minor 128x"),
                      ("unique_id 11259375", "unique_id 0x11259375")):
        root = t.tree()
        props = os.path.join(root, "sys/class/kfd/kfd/topology/nodes/1/properties")
        with open(props) as f:
            text = f.read()
        with open(props, "w") as f:
            f.write(text.replace(line, bad))
        r, j = t.gpus(root, "--backend", "amd")
        no = text.splitlines().index(line) + 1
        named = any(f"{props}:{no}: '{bad}' is not a number" in w for w in j["warnings"])
        if bad.startswith("drm"):
            ok(r.returncode == 1 and j["gpus"] == [] and named,
               f"kfd '{bad}': GPU left out, the file named ({j['warnings']})")
        else:
            ok(r.returncode == 1 and len(j["gpus"]) == 1 and j["gpus"][0]["uuid"] is None and
               named, f"kfd '{bad}': no UUID, the file named ({j['warnings']}, {j['gpus']})")


MM = "/proc/driver/nvidia-caps/mig-minors"
INFO0 = "/proc/driver/nvidia/gpus/0000:3b:00.0/information"


def edit(root, path, old, new):
    p = os.path.join(root, path.lstrip("/"))
    with open(p) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(p, "w") as f:
        f.write(text.replace(old, new))


def all_files(j):
    return [f["device"] for x in j["gpus"] if not x["mig_mode"] for f in x["files"][-1:]]


def check_mig_minors(t):
    # Without mig-minors, an access file could name any capability (here config, 1).
    root = t.tree()
    os.unlink(os.path.join(root, MM.lstrip("/")))
    fx.write(root, "/proc/driver/nvidia/capabilities/gpu1/mig/gi1/access", fx.access(1))
    fx.node(root, "/dev/nvidia-caps/nvidia-cap1", fx.NV_CAPS, 1)
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and len(j["gpus"]) == 2 and
       any(root + MM in w and "MIG instances of GPU 0000:5e:00.0 left out" in w
           for w in j["warnings"]),
       f"no mig-minors: MIG instances left out, the file named ({j['warnings']})")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvidia")
    ok("nvidia-cap1," not in r.stdout and "nvidia-cap1 " not in r.stdout,
       "... and the config capability is never in a gres.conf line")
    # A cap minor on two lines of mig-minors: whose it is cannot be told.
    root = t.tree()
    edit(root, MM, "monitor 2\n", "monitor 2\ngpu0/gi9/access 22\n")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and len(j["gpus"]) == 4 and
       not any(f["path"].endswith("nvidia-cap22") for x in j["gpus"] for f in x["files"]) and
       any(root + MM in w and "gpu1/gi2/ci0/access's minor twice" in w
           for w in j["warnings"]),
       f"a cap minor on two mig-minors lines: its instance left out ({j['warnings']})")
    r, j = t.gpus(root, "--backend", "nvml", env=t.nvml_env(fx.NVML))
    ok(r.returncode == 1 and len(j["gpus"]) == 4 and
       any("gpu1/gi2/ci0/access's minor twice" in w for w in j["warnings"]),
       f"nvml: the same ({j['warnings']})")
    # A line missing: the message names it (not "-2"), in both backends.
    root = t.tree()
    edit(root, MM, "gpu1/gi1/ci0/access 13\n", "")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(any("mig-minors has no gpu1/gi1/ci0/access line: MIG instance left out" in w
           for w in j["warnings"]) and not any("has no such line" in w for w in j["warnings"]),
       f"nvidia: a missing mig-minors line is named ({j['warnings']})")
    r, j = t.gpus(root, "--backend", "nvml", env=t.nvml_env(fx.NVML))
    ok(any("has no line for gpu1/gi1/ci0/access: MIG instance" in w for w in j["warnings"]),
       f"nvml: the missing line is named with its CI ({j['warnings']})")
    # A malformed line: the file and line named.
    root = t.tree()
    edit(root, MM, "gpu1/gi1/ci0/access 13\n", "gpu1/gi1/ci0/access 13x\n")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and
       any(f"{root}{MM}:4: 'gpu1/gi1/ci0/access 13x'" in w for w in j["warnings"]),
       f"a malformed mig-minors line: file:line named ({j['warnings']})")


def check_duplicates(t):
    root = t.tree()
    other = "/proc/driver/nvidia/gpus/0000:af:00.0/information"
    fx.write(root, other, fx.information(fx.MODEL, fx.UUID0[:-1] + "9", "0000:af:00.0", 0))
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and all_files(j).count("195:0") == 1 and
       any(root + other in w and root + INFO0 in w for w in j["warnings"]),
       f"two information files with one minor: the second refused, both named "
       f"({j['warnings']})")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvidia")
    ok(r.stdout.count("File=/dev/nvidia0 ") == 1, "... and one gres.conf line for /dev/nvidia0")
    root = t.tree()
    mig = os.path.join(root, "proc/driver/nvidia/capabilities/gpu1/mig")
    subprocess.run(["cp", "-r", mig + "/gi1", mig + "/gi01"], check=True)
    subprocess.run(["cp", "-r", mig + "/gi1/ci0", mig + "/gi1/ci00"], check=True)
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 0 and len(j["gpus"]) == 5 and
       len(set(all_files(j))) == len(all_files(j)),
       f"gi01, ci00: not instance ids, nothing listed twice ({len(j['gpus'])} rows)")
    root = t.tree()
    nodes = os.path.join(root, "sys/class/kfd/kfd/topology/nodes")
    subprocess.run(["cp", "-r", nodes + "/1", nodes + "/2"], check=True)
    subprocess.run(["cp", "-r", nodes + "/1", nodes + "/01"], check=True)
    r, j = t.gpus(root, "--backend", "amd")
    ok(r.returncode == 1 and len(j["gpus"]) == 1 and
       any(nodes + "/2/properties" in w and nodes + "/1/properties" in w
           for w in j["warnings"]),
       f"two kfd nodes on one render node: the second refused, both named ({j['warnings']})")


def check_strings(t):
    root = t.tree()
    edit(root, INFO0, fx.MODEL, "NVIDIA A100 #2")
    r = t.run(root, "gpus", "--gres-conf", "--backend", "nvidia")
    ok("Name=gpu Type=nvidia_a100_2 File=/dev/nvidia0 Cores=0-3\n" in r.stdout,
       f"'#' in a model: not in Type= ({r.stdout!r})")
    root = t.tree()
    edit(root, INFO0, fx.MODEL, "NVIDIA\x1b[31mA100\x07")
    r = t.run(root, "gpus", "--backend", "nvidia")
    ok(r.returncode == 0 and "\x1b" not in r.stdout and "\x07" not in r.stdout and
       "NVIDIA\\x1b[31mA100\\x07" not in r.stdout and "nvidia_31ma100" in r.stdout,
       f"control characters in a model never reach the terminal ({r.stdout!r})")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(j["gpus"] and j["gpus"][0]["model"] == "NVIDIA\\x1b[31mA100\\x07",
       f"... the model escaped ({j['gpus'][:1]})")
    root = t.tree()
    edit(root, INFO0, "Device Minor: \t 0", "Device Minor: \t 0\x1b")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and "\x1b" not in r.stderr and
       any(f"{root}{INFO0}:9: not a valid 'Device Minor:' line" in w for w in j["warnings"]),
       f"a bad value: file:line named, control characters escaped ({j['warnings']})")
    # Whitespace in a UUID: what the runtime refuses, detection does not list.
    root = t.tree()
    edit(root, INFO0, fx.UUID0, "GPU-aa bb")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and len(j["gpus"]) == 4 and
       any(f"{root}{INFO0}:3: not a valid 'GPU UUID:' line" in w for w in j["warnings"]),
       f"'GPU-aa bb': GPU left out, file:line named ({j['warnings']})")
    r, j = t.gpus(root, "--backend", "nvml",
                  env=t.nvml_env(fx.NVML.replace(fx.UUID0, "GPU-aa,bb")))
    ok(len(j["gpus"]) == 4 and any("GPU-aa,bb" in w for w in j["warnings"]),
       f"nvml: a UUID CUDA_VISIBLE_DEVICES cannot carry, left out ({j['warnings']})")
    # GPU minors stop at 253: 255 is nvidiactl's.
    root = t.tree()
    edit(root, INFO0, "Device Minor: \t 0", "Device Minor: \t 255")
    fx.node(root, "/dev/nvidia255", 195, 255)
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 1 and "195:255" not in all_files(j) and
       any(f"{root}{INFO0}:9: not a valid 'Device Minor:' line (GPU minors are 0-253" in w
           for w in j["warnings"]), f"Device Minor: 255 refused, named ({j['warnings']})")
    r, j = t.gpus(root, "--backend", "nvml",
                  env=t.nvml_env(fx.NVML.replace("3B:00.0|0|0", "3B:00.0|255|0")))
    ok("195:255" not in all_files(j) and any("minor 255" in w for w in j["warnings"]),
       f"nvml: minor 255 refused ({j['warnings']})")
    # NVML's short bus id form.
    root = t.tree()
    r, j = t.gpus(root, "--backend", "nvml",
                  env=t.nvml_env(fx.NVML.replace("00000000:3B:00.0", "0:3b:0.0")))
    ok(j["gpus"] and j["gpus"][0]["pci"] == "0000:3b:00.0" and j["gpus"][0]["cpus"] == "0-3",
       f"nvml: bus id 0:3b:0.0 normalised whole ({j['gpus'][:1]})")
    # kfd properties written with CRLF line ends.
    root = t.tree()
    props = "/sys/class/kfd/kfd/topology/nodes/1/properties"
    with open(os.path.join(root, props.lstrip("/"))) as f:
        text = f.read()
    fx.write(root, props, text.replace("\n", "\r\n"))
    r, j = t.gpus(root, "--backend", "amd")
    ok(r.returncode == 0 and len(j["gpus"]) == 1 and j["gpus"][0]["uuid"] == "GPU-0000000000abcdef",
       f"kfd properties with CRLF: read as lines ({r.stderr.strip()})")
    # GPU Excluded: the driver keeps it from NVML and CUDA: left out with a note.
    root = t.tree()
    edit(root, INFO0, "GPU Excluded:\t No", "GPU Excluded:\t Yes")
    r, j = t.gpus(root, "--backend", "nvidia")
    ok(r.returncode == 0 and j["warnings"] == [] and len(j["gpus"]) == 4 and
       "GPU Excluded: Yes" in r.stderr and "195:0" not in all_files(j),
       f"GPU Excluded: Yes: left out with a note, exit 0 ({r.stderr.strip()})")


def check_xcp(t):
    for how in ("modalias", "old", "driver", "link"):
        root = t.tree()
        fx.amd_xcp(root, how=how)
        r, j = t.gpus(root, "--backend", "amd")
        g = j["gpus"]
        ok(r.returncode == 0 and len(g) == 2 and
           g[1]["files"] == [{"path": "/dev/dri/renderD130", "device": "226:130"}] and
           g[1]["pci"] == "0000:03:00.0" and g[1]["cpus"] == "0-7" and
           g[1]["model"] == "AMD GPU 0x74a1",
           f"an amdgpu_xcp partition ({how}): listed, PCI address from kfd ({j})")
    root = t.tree()
    fx.amd_xcp(root, how="none")
    r, j = t.gpus(root, "--backend", "amd")
    ok(r.returncode == 1 and len(j["gpus"]) == 1 and
       any("renderD130/device has no vendor file and is not an amdgpu_xcp partition" in w
           for w in j["warnings"]), f"no vendor, not a partition: said so ({j['warnings']})")


REAL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpunodes")


def real_tree(t, name):
    """A copy of tests/gpunodes/NAME (driver files read off a real node) with its device nodes."""
    root = os.path.join(t.tmp, "real-" + name)
    subprocess.run(["cp", "-r", os.path.join(REAL, name), root], check=True)
    with open(os.path.join(root, "dev-nodes")) as f:
        for line in f:
            kind, major, minor, path = line.split()
            fx.node(root, path, int(major), int(minor))
    return root


def check_real(t):
    # What nvidia-smi said on that node (tests/gpunodes/h200/README).
    root = real_tree(t, "h200")
    for b in ("nvidia", "all"):
        r, j = t.gpus(root, "--backend", b)
        g = j["gpus"]
        ok(r.returncode == 0 and j["warnings"] == [] and len(g) == 1,
           f"H200 node, {b}: one GPU, no warning ({r.stderr.strip()}, {j['warnings']})")
        if len(g) != 1:
            continue
        g = g[0]
        ok(g["uuid"] == "GPU-0e31e5ef-0c2d-f606-3b38-3af0f5de0deb" and g["pci"] == "0000:00:06.0"
           and g["model"] == "NVIDIA H200" and g["cpus"] == "0-15" and not g["mig_mode"],
           f"H200 node, {b}: nvidia-smi's UUID, bus id, model; local CPUs 0-15 ({g})")
        ok(g["files"] == [{"path": "/dev/nvidia0", "device": "195:0"}] and
           g["companions"] == [{"path": "/dev/nvidiactl", "device": "195:255"},
                               {"path": "/dev/nvidia-uvm", "device": "238:0"},
                               {"path": "/dev/nvidia-uvm-tools", "device": "238:1"}],
           f"H200 node, {b}: /dev/nvidia0 and its companions with the node's numbers "
           f"({g['files']}, {g['companions']})")
    r = t.run(root, "gpus", "--gres-conf")
    ok(r.returncode == 0 and r.stdout.splitlines()[1:] ==
       ["Name=gpu Type=nvidia_h200 File=/dev/nvidia0 Cores=0-15"],
       f"H200 node: the gres.conf line jobcg wrote on that node ({r.stdout!r})")


def check_twin(t):
    """JOBCG_DYNAMIC_EXE names a program a static jobcg runs as root for NVML: honoured only
    for a trusted file (jobcg(1)). The test hook sends this dynamic jobcg the same way."""
    if not pytap.test_hooks():
        pytap.skip("JOBCG_DYNAMIC_EXE: a build without test hooks has no way to send a "
                   "dynamically linked jobcg to its twin")
        return
    root = t.tree()
    d = os.path.join(t.tmp, "twin")
    os.mkdir(d, 0o755)
    mark = os.path.join(t.tmp, "twin-ran")
    twin = os.path.join(d, "twin")
    with open(twin, "w") as f:
        f.write(f"#!/bin/sh\necho \"$@\" > {mark}\n")
    os.chmod(twin, 0o755)
    env = {"JOBCG_TEST_GPUS_TWIN": "1", "JOBCG_DYNAMIC_EXE": twin}
    r = t.run(root, "gpus", "--json", env=env)
    ok(r.returncode == 0 and os.path.exists(mark) and "gpus --json" in open(mark).read(),
       f"a trusted JOBCG_DYNAMIC_EXE is run with the command ({r.returncode}, {r.stderr!r})")
    for what, mode, owner in (("other-writable", 0o757, 0), ("group-writable", 0o775, 0),
                              ("not root's", 0o755, 4242)):
        if os.path.exists(mark):
            os.unlink(mark)
        os.chmod(twin, mode)
        os.chown(twin, owner, 0)
        r = t.run(root, "gpus", env=env)
        ok(r.returncode != 0 and not os.path.exists(mark) and
           "JOBCG_DYNAMIC_EXE" in r.stderr and twin in r.stderr,
           f"a JOBCG_DYNAMIC_EXE that is {what} is refused, naming it, and not run "
           f"({r.returncode}, {r.stderr.strip()!r})")
    os.chown(twin, 0, 0)
    os.chmod(twin, 0o755)


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP the fixture's device nodes need mknod (root)")
        return 0
    t = T()
    try:
        for f in (check_all, check_nvml, check_compare, check_smt, check_bad, check_mig_minors,
                  check_duplicates, check_strings, check_xcp, check_real, check_twin):
            pytap.run_checks(f, t)
    finally:
        subprocess.run(["rm", "-rf", t.tmp])
    return pytap.finish()


if __name__ == "__main__":
    sys.exit(main())
