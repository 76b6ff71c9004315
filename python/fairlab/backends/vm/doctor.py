"""`fairlab vm doctor`: what the vm backend can do on this machine, checked by a boot.

The image's manifest says which modules the kernel ships; only a boot says whether
they load, which congestion controls the running kernel then lists, and whether
the guest has high-resolution timers under this QEMU. The probe boot loads every
congestion-control module and the qdiscs the backend maps to, reads those facts and
powers off (a few seconds of host time).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cpio, qemu
from .errors import VmError
from .image import Image, dccpgen_binary
from .runner import _extract, _read, kernel_cmdline

PROBE_SCRIPT = """\
cat /proc/sys/net/ipv4/tcp_available_congestion_control > $RES/ccas.txt
grep -c 'hres_active.*: 1' /proc/timer_list > $RES/hres.txt
echo ok > $RES/t0
"""


@dataclass
class Findings:
    qemu: str | None
    qemu_version: str | None
    image: Image | None
    image_error: str | None = None
    booted: bool = False
    boot_error: str | None = None
    ccas_running: list[str] = field(default_factory=list)
    hres: bool | None = None
    clocksource: str | None = None
    boot_host_cpu_s: float | None = None
    boot_wall_s: float | None = None

    def ok(self) -> bool:
        return self.qemu is not None and self.image is not None and self.booted and bool(self.hres)

    def as_dict(self) -> dict[str, Any]:
        img = self.image
        return {
            "ok": self.ok(),
            "qemu": self.qemu, "qemu_version": self.qemu_version,
            "image": None if img is None else {"key": img.key, "path": str(img.root), "kernel_release": img.release,
                                               "kernel_source": img.manifest.get("kernel_source"),
                                               "ccas": img.ccas(), "qdiscs": img.qdiscs(),
                                               "dccp": img.manifest.get("dccp"), "dccpgen": str(dccpgen_binary() or "") or None},
            "image_error": self.image_error,
            "booted": self.booted, "boot_error": self.boot_error,
            "ccas_running": self.ccas_running, "high_resolution_timers": self.hres, "clocksource": self.clocksource,
            "boot_host_cpu_s": self.boot_host_cpu_s, "boot_wall_s": self.boot_wall_s,
        }


def probe(image: Image | None, image_error: str | None = None) -> Findings:
    binary = qemu.find_qemu()
    f = Findings(qemu=binary, qemu_version=qemu.qemu_version(binary) if binary else None, image=image,
                 image_error=image_error)
    if binary is None or image is None:
        return f
    idx = image.modules()
    wanted = [f"tcp_{c}" for c in image.ccas() if idx.has(f"tcp_{c}") and f"tcp_{c}" in idx.modules]
    wanted += [m for m in ("veth", "sch_htb", "sch_netem", "dccp_ipv4") if m in idx.modules]
    with tempfile.TemporaryDirectory(prefix="fairlab-vm-doctor-") as tmp:
        initrd = Path(tmp) / "initrd.cpio"
        extra = cpio.archive([cpio.file("fairlab/run.sh", PROBE_SCRIPT.encode()),
                              cpio.file("fairlab/modules", ("\n".join(idx.load_order(wanted)) + "\n").encode())])
        initrd.write_bytes(image.initrd.read_bytes() + extra)
        try:
            boot = qemu.boot(qemu.command(binary, image.kernel, initrd, kernel_cmdline(0)), timeout_s=300)
        except VmError as exc:
            f.boot_error = str(exc)
            return f
        res = Path(tmp) / "res"
        _extract(boot.archive, res)
        err = _read(res / "error.txt")
        f.booted = True
        f.boot_error = err.strip() if err else None
        f.ccas_running = (_read(res / "ccas.txt") or "").split()
        f.hres = (_read(res / "hres.txt") or "0").strip() not in ("", "0") and not err
        f.clocksource = (_read(res / "clocksource.txt") or "").strip() or None
        f.boot_host_cpu_s = round(boot.host_cpu_s, 2)
        f.boot_wall_s = round(boot.wall_s, 2)
    return f
