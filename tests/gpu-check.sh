#!/bin/sh
# On a real NVIDIA node: what `jobcg gpus` finds with the nvidia and nvml backends, against
# nvidia-smi. Not part of the test suites (they have no GPU); run by hand, as root or not:
#   tests/gpu-check.sh [PATH-TO-JOBCG]      (default: build/cli/jobcg, then jobcg in PATH)
# Prints what it compares and ends with "gpu-check: N checks, N failed"; exit 1 on a failure.
set -u
JOBCG=${1:-}
if [ -z "$JOBCG" ]; then
	for c in build/cli/jobcg build-test/cli/jobcg "$(command -v jobcg 2>/dev/null)"; do
		[ -n "$c" ] && [ -x "$c" ] && JOBCG=$c && break
	done
fi
[ -n "$JOBCG" ] || { echo "gpu-check: no jobcg found (give its path)"; exit 2; }
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found"; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

nvidia-smi -q -x >"$tmp/smi.xml" || { echo "gpu-check: nvidia-smi -q -x failed"; exit 2; }
nvidia-smi -L >"$tmp/smi.L" 2>&1
nvidia-smi -q >"$tmp/smi.txt" 2>&1
for b in nvidia nvml; do
	"$JOBCG" gpus --json --backend $b >"$tmp/$b.json" 2>"$tmp/$b.err"
	echo $? >"$tmp/$b.rc"
	"$JOBCG" gpus --gres-conf --backend $b >"$tmp/$b.conf" 2>>"$tmp/$b.err"
done

python3 - "$tmp" <<'PY'
import json, os, re, sys
import xml.etree.ElementTree as ET

tmp = sys.argv[1]
n = failed = 0


def check(good, what):
    global n, failed
    n += 1
    failed += not good
    print(("ok     " if good else "FAILED ") + what)


def bus(s):
    d, b, rest = s.lower().split(":")
    return f"{int(d, 16):04x}:{b}:{rest}"


smi = ET.parse(os.path.join(tmp, "smi.xml")).getroot()
gpus = []
for g in smi.findall("gpu"):
    mig = g.find("mig_mode/current_mig")
    gpus.append({
        "model": g.findtext("product_name", "").strip(),
        "uuid": g.findtext("uuid", "").strip(),
        "minor": int(g.findtext("minor_number", "-1")),
        "pci": bus(g.get("id")),
        "mig": mig is not None and mig.text.strip() == "Enabled",
    })
migs = re.findall(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)",
                  open(os.path.join(tmp, "smi.L")).read(), re.M)
print(f"nvidia-smi: {len(gpus)} GPUs, {len(migs)} MIG instances "
      f"({sum(g['mig'] for g in gpus)} GPUs in MIG mode)")

for b in ("nvidia", "nvml"):
    rc = open(os.path.join(tmp, f"{b}.rc")).read().strip()
    err = open(os.path.join(tmp, f"{b}.err")).read().strip()
    try:
        j = json.load(open(os.path.join(tmp, f"{b}.json")))
    except ValueError:
        check(False, f"{b}: jobcg gpus --json gave JSON (rc {rc}: {err})")
        continue
    check(rc == "0" and not j["warnings"], f"{b}: exit 0 and no warning ({err or 'none'})")
    whole = [x for x in j["gpus"] if not x["mig"]]
    check(len(whole) == len(gpus), f"{b}: {len(whole)} GPUs, nvidia-smi {len(gpus)}")
    for s, x in zip(gpus, whole):
        what = f"{b}: GPU {s['pci']}"
        check(x["uuid"] == s["uuid"], f"{what}: UUID {x['uuid']} / {s['uuid']}")
        check(x["pci"] == s["pci"], f"{what}: bus id {x['pci']}")
        check(x["model"] == s["model"], f"{what}: model '{x['model']}' / '{s['model']}'")
        check(x["files"][0]["path"] == f"/dev/nvidia{s['minor']}" and
              x["files"][0]["device"] == f"195:{s['minor']}",
              f"{what}: {x['files'][0]} / minor {s['minor']}")
        if b == "nvml":
            check(x["mig_mode"] == s["mig"], f"{what}: MIG mode {x['mig_mode']} / {s['mig']}")
        check(x["cpus"] is not None, f"{what}: local CPUs {x['cpus']}")
    inst = [x for x in j["gpus"] if x["mig"]]
    check(len(inst) == len(migs), f"{b}: {len(inst)} MIG instances, nvidia-smi -L {len(migs)}")
    if b == "nvml":
        check(sorted(x["uuid"] for x in inst) == sorted(m[2] for m in migs),
              "nvml: MIG UUIDs are nvidia-smi's")
        check(sorted(x["profile"] for x in inst) == sorted(m[0] for m in migs),
              "nvml: MIG profiles are nvidia-smi's")
    for x in inst:
        check(len(x["files"]) == 3 and all(os.path.exists(f["path"]) for f in x["files"]),
              f"{b}: MIG GI {x['gi']} CI {x['ci']}: parent, GI and CI cap files exist "
              f"({[f['path'] for f in x['files']]})")


def files_of(path):
    out = []
    for line in open(path):
        m = re.search(r"(?:Multiple)?Files?=(\S+)", line)
        if m:
            out.append(m.group(1))
    return out


a, b = files_of(os.path.join(tmp, "nvidia.conf")), files_of(os.path.join(tmp, "nvml.conf"))
check(a == b, "--gres-conf: both backends give the same device files in the same order")
print("--- jobcg gpus --gres-conf --backend nvml:")
print(open(os.path.join(tmp, "nvml.conf")).read(), end="")
print(f"gpu-check: {n} checks, {failed} failed")
sys.exit(1 if failed else 0)
PY
