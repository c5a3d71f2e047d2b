"""A node's GPU files made up for jobcg's GPU tests: the driver's /proc files, sysfs and
/dev nodes (mknod, so root only) of two NVIDIA GPUs, the second in MIG mode with two GPU
instances (the first with two compute instances), an AMD GPU and an Intel GPU. The numbers are
the real drivers' where they are fixed (NVIDIA 195, DRM 226) and made up where the kernel
chooses them (nvidia-caps, nvidia-uvm, kfd), as /proc/devices says."""
import os

NV_CAPS, NV_UVM, KFD = 235, 236, 234
UUID0 = "GPU-0b6e3a1c-1f6d-4e61-8d3c-6e9c1a0f0001"
UUID1 = "GPU-0b6e3a1c-1f6d-4e61-8d3c-6e9c1a0f0002"
MODEL = "NVIDIA A100-SXM4-40GB"
# (gi, gi cap minor, [(ci, ci cap minor)])
MIG = [(1, 12, [(0, 13), (1, 14)]), (2, 21, [(0, 22)])]


def write(root, path, text):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


def node(root, path, major, minor):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    if os.path.lexists(p):
        os.unlink(p)
    os.mknod(p, 0o20666, os.makedev(major, minor))


def information(model, uuid, bus, minor):
    return (f"Model: \t\t {model}\nIRQ:   \t\t 42\nGPU UUID: \t {uuid}\n"
            f"Video BIOS: \t 92.00.36.00.01\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
            f"DMA Mask: \t 0x7fffffffffff\nBus Location: \t {bus}\nDevice Minor: \t {minor}\n"
            f"GPU Excluded:\t No\n")


def access(minor):
    return f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n"


def make(root):
    write(root, "/proc/devices",
          "Character devices:\n  1 mem\n  4 tty\n195 nvidia-frontend\n226 drm\n"
          f"{KFD} kfd\n{NV_CAPS} nvidia-caps\n{NV_UVM} nvidia-uvm\n\nBlock devices:\n  8 sd\n")
    # NVIDIA: GPU 0 whole, GPU 1 in MIG mode.
    for minor, (uuid, bus, cpus) in enumerate([(UUID0, "0000:3b:00.0", "0-3"),
                                                (UUID1, "0000:5e:00.0", "4-7")]):
        write(root, f"/proc/driver/nvidia/gpus/{bus}/information",
              information(MODEL, uuid, bus, minor))
        write(root, f"/sys/bus/pci/devices/{bus}/local_cpulist", cpus + "\n")
        node(root, f"/dev/nvidia{minor}", 195, minor)
    mm = "config 1\nmonitor 2\n"
    for gi, gim, cis in MIG:
        write(root, f"/proc/driver/nvidia/capabilities/gpu1/mig/gi{gi}/access", access(gim))
        node(root, f"/dev/nvidia-caps/nvidia-cap{gim}", NV_CAPS, gim)
        mm += f"gpu1/gi{gi}/access {gim}\n"
        for ci, cim in cis:
            write(root, f"/proc/driver/nvidia/capabilities/gpu1/mig/gi{gi}/ci{ci}/access",
                  access(cim))
            node(root, f"/dev/nvidia-caps/nvidia-cap{cim}", NV_CAPS, cim)
            mm += f"gpu1/gi{gi}/ci{ci}/access {cim}\n"
    mm += "gpu0/gi1/access 300\ngpu0/gi1/ci0/access 301\n"  # GPU 0 is not in MIG mode
    write(root, "/proc/driver/nvidia-caps/mig-minors", mm)
    node(root, "/dev/nvidiactl", 195, 255)
    node(root, "/dev/nvidia-uvm", NV_UVM, 0)
    node(root, "/dev/nvidia-uvm-tools", NV_UVM, 1)
    # AMD: kfd node 0 is the CPU, node 1 the GPU on render node 128.
    write(root, "/sys/class/kfd/kfd/topology/nodes/0/properties",
          "cpu_cores_count 8\nsimd_count 0\ndrm_render_minor 0\n")
    write(root, "/sys/class/kfd/kfd/topology/nodes/1/properties",
          "cpu_cores_count 0\nsimd_count 304\nunique_id 11259375\nlocation_id 768\n"
          "domain 0\ndrm_render_minor 128\n")
    for minor, vendor, dev, bus, cpus in [(128, "0x1002", "0x740f", "0000:03:00.0", "0-7"),
                                          (129, "0x8086", "0x0bd5", "0000:8a:00.0", "8-15")]:
        write(root, f"/sys/class/drm/renderD{minor}/device/vendor", vendor + "\n")
        write(root, f"/sys/class/drm/renderD{minor}/device/device", dev + "\n")
        write(root, f"/sys/class/drm/renderD{minor}/device/uevent",
              f"DRIVER=x\nPCI_CLASS=30000\nPCI_SLOT_NAME={bus}\n")
        write(root, f"/sys/bus/pci/devices/{bus}/local_cpulist", cpus + "\n")
        node(root, f"/dev/dri/renderD{minor}", 226, minor)
    node(root, "/dev/kfd", KFD, 0)


def amd_xcp(root, minor=130, kfd_node=2, how="modalias"):
    """An AMD partition (MI300 in CPX/DPX mode) beside the AMD GPU of make(): kfd node KFD_NODE
    on render node MINOR, whose device is a platform device of amdgpu_xcp_drv.c with no PCI
    vendor file, and kfd's location_id of the same PCI device. HOW says what tells it is one:
    "modalias" (uevent MODALIAS=platform:amdgpu_xcp_1, the name since Linux 6.10), "old"
    (MODALIAS=platform:amdgpu_xcp, before), "driver" (uevent DRIVER=amdgpu_xcp), "link"
    (the device link ends in amdgpu_xcp.1), or "none"."""
    write(root, f"/sys/class/kfd/kfd/topology/nodes/{kfd_node}/properties",
          "cpu_cores_count 0\nsimd_count 76\nunique_id 11259376\nlocation_id 768\n"
          f"domain 0\ndrm_render_minor {minor}\n")
    drm = f"/sys/class/drm/renderD{minor}"
    uevent = {"modalias": "MODALIAS=platform:amdgpu_xcp_1\n",
              "old": "MODALIAS=platform:amdgpu_xcp\n",
              "driver": "DRIVER=amdgpu_xcp\n"}.get(how, "")
    if how == "link":
        dev = os.path.join(root, "sys/devices/platform/amdgpu_xcp.1")
        os.makedirs(os.path.join(root, drm.lstrip("/")), exist_ok=True)
        os.makedirs(dev, exist_ok=True)
        os.symlink(dev, os.path.join(root, drm.lstrip("/"), "device"))
    write(root, drm + "/device/uevent", uevent)
    write(root, "/sys/bus/pci/devices/0000:03:00.0/device", "0x74a1\n")
    node(root, f"/dev/dri/renderD{minor}", 226, minor)


# What `jobcg gpus --gres-conf` gives for the tree above.
GRES_CONF = """\
# gres.conf lines from jobcg gpus (nvidia,amd,intel)
Name=gpu Type=nvidia_a100-sxm4-40gb File=/dev/nvidia0 Cores=0-3
Name=gpu Type=nvidia_a100-sxm4-40gb_mig MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13 Cores=4-7
Name=gpu Type=nvidia_a100-sxm4-40gb_mig MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap14 Cores=4-7
Name=gpu Type=nvidia_a100-sxm4-40gb_mig MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22 Cores=4-7
Name=gpu Type=amd_gpu_0x740f File=/dev/dri/renderD128 Cores=0-7
Name=gpu Type=intel_gpu_0x0bd5 File=/dev/dri/renderD129 Cores=8-15
"""

# The same GPUs as NVML describes them (tests/fakenvml).
NVML = f"""\
gpu {MODEL}|{UUID0}|00000000:3B:00.0|0|0
gpu {MODEL}|{UUID1}|00000000:5E:00.0|1|1
mig 0|1|0|MIG-7f6a0000-0000-5000-8000-000000000001|{MODEL} MIG 2g.10gb
mig 1|1|1|MIG-7f6a0000-0000-5000-8000-000000000002|{MODEL} MIG 1c.2g.10gb
mig 2|2|0|MIG-7f6a0000-0000-5000-8000-000000000003|{MODEL} MIG 3g.20gb
"""
