"""The guest image: a distribution kernel and a sealed initramfs, built without root.

Read this first. `fairlab vm build` (and the first vm run) does, with no root and
nothing but the distribution's package registry:

1. ``apt-get download`` of the kernel (``linux-image-amd64`` resolved to its real
   package), ``busybox-static``, ``iperf3``, ``iproute2``, ``ethtool`` and the
   shared libraries they need (`PACKAGES`), into ``<cache>/debs``;
2. ``dpkg-deb -x`` of each into a staging directory;
3. an initramfs holding busybox, the tools, exactly the libraries their ELF
   ``DT_NEEDED`` entries name (checked: a missing one is an error, not a guest that
   cannot start iperf3), the network modules (`MODULE_TREES`) and fairlab's guest
   scripts (``guest/``). fairlab's own DCCP traffic generator is not part of the
   image: a run with DCCP flows appends it to its own initramfs, so the image (and
   every TCP run) does not change when the generator is rebuilt;
4. an uncompressed ELF ``vmlinux`` cut out of the ``vmlinuz`` (QEMU boots it through
   its PVH entry point, skipping the in-guest decompressor: ~1 s of virtual boot).

Everything is written reproducibly (`cpio.archive`: sorted, fixed inode numbers,
mtimes and owners), so the same packages give the same bytes and the same virtual
time. The image lives in ``<cache>/images/<key>/`` where the key hashes the package
files, the guest scripts and this builder's version; ``manifest.json`` beside it
records the packages, the kernel release and what the kernel offers (congestion
controls, qdiscs, DCCP). A user's own kernel (``--kernel``, ``--modules``) makes a
separate image whose key includes those files' hashes.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from . import cpio, kmod
from .errors import VmError

#: Bump when the image layout or the guest contract changes: it re-keys every image.
BUILDER_VERSION = 1

#: The kernel meta-package; resolved to the versioned image package it depends on.
KERNEL_META = "linux-image-amd64"
#: Userland packages. Libraries are listed so `apt-get download` fetches them; the
#: builder then copies only the ones the binaries actually need.
PACKAGES = (
    "busybox-static", "iperf3", "libiperf0", "iproute2", "ethtool",
    "libc6", "libcap2", "libsctp1", "libssl3", "libbpf1", "libelf1", "libmnl0",
    "libbsd0", "libmd0", "libxtables12", "zlib1g",
)
#: Tools copied from the packages (path inside the package → path in the guest).
TOOLS = {
    "usr/bin/iperf3": "usr/bin/iperf3",
    "bin/ip": "usr/sbin/ip",
    "sbin/tc": "usr/sbin/tc",
    "sbin/ethtool": "usr/sbin/ethtool",
}
#: Busybox applets the guest scripts use (called through /bin; `ip` and `tc` are
#: deliberately NOT linked: the iproute2 binaries must win).
APPLETS = (
    "sh", "cat", "echo", "insmod", "ls", "mkdir", "mount", "umount", "poweroff", "sleep",
    "sed", "grep", "head", "tail", "wc", "tr", "cut", "tar", "gzip", "base64", "sync",
    "sysctl", "kill", "ps", "uname", "printf", "test", "true", "false", "sort", "cp", "rm",
    "mv", "date", "dmesg", "awk", "expr", "seq", "touch", "env", "tee", "sha256sum",
)
#: Module trees under lib/modules/<release>/kernel that go into the image.
MODULE_TREES = ("net/sched", "net/ipv4", "net/dccp", "drivers/net/veth.ko", "drivers/net/ifb.ko")
#: Where the library search happens inside the guest (and in the packages).
LIB_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64")

GUEST_DIR = Path(__file__).with_name("guest")


class ImageError(VmError):
    """The image cannot be built or found; the message says what to do."""


Progress = Callable[[str], None]


@dataclass(frozen=True)
class Image:
    """A built image: where its files are and what its manifest says."""

    root: Path
    manifest: dict[str, Any]

    @property
    def kernel(self) -> Path:
        return self.root / "vmlinux"

    @property
    def initrd(self) -> Path:
        return self.root / "base.cpio"

    @property
    def key(self) -> str:
        return str(self.manifest["key"])

    @property
    def release(self) -> str:
        return str(self.manifest["kernel_release"])

    def ccas(self) -> list[str]:
        return list(self.manifest["ccas"])

    def qdiscs(self) -> list[str]:
        return list(self.manifest["qdiscs"])

    def modules(self) -> kmod.ModuleIndex:
        m = self.manifest["modules"]
        idx = kmod.ModuleIndex(release=self.release, builtin=set(m["builtin"]))
        for name, info in m["loadable"].items():
            idx.modules[name] = kmod.Module(name, info["path"], tuple(info["depends"]), tuple(info.get("params", ())))
        idx.builtin_params = {k: tuple(v) for k, v in m.get("builtin_params", {}).items()}
        return idx


# --------------------------------------------------------------------- locations
def cache_dir() -> Path:
    """``$FAIRLAB_VM_CACHE``, else ``$XDG_CACHE_HOME/fairlab/vm``, else ``~/.cache/fairlab/vm``."""
    if os.environ.get("FAIRLAB_VM_CACHE"):
        return Path(os.environ["FAIRLAB_VM_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fairlab" / "vm"


def guest_scripts_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(GUEST_DIR.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def dccpgen_binary() -> Path | None:
    """The static DCCP traffic generator, if there is one: ``$FAIRLAB_DCCPGEN`` when set
    (an explicit choice: a missing file there is None, not some other build), else the
    copy a fairlab wheel installs at ``fairlab/_bin/fairlab-dccpgen`` (see
    buildsys/fairlab_build.py), else the workspace's `make dccpgen` build. Runs with
    DCCP flows append it to their own initramfs."""
    from importlib import resources  # only the vm backend's DCCP runs need it

    if os.environ.get("FAIRLAB_DCCPGEN"):
        chosen = Path(os.environ["FAIRLAB_DCCPGEN"])
        return chosen if chosen.is_file() else None
    packaged = resources.files("fairlab") / "_bin" / "fairlab-dccpgen"
    repo = Path(__file__).resolve().parents[4]  # python/fairlab/backends/vm/image.py
    cands = [Path(str(packaged))] + [repo / "target" / triple / "fairlab-dccpgen"
                                     for triple in ("x86_64-unknown-linux-gnu/release", "release")]
    return next((c for c in cands if c.is_file()), None)


# --------------------------------------------------------------------- packages
def _run(argv: list[str], *, cwd: Path | None = None, what: str) -> str:
    try:
        cp = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=600)
    except FileNotFoundError:
        raise ImageError(f"cannot {what}: `{argv[0]}` is not installed (the vm image is built from Debian packages; "
                         "on Debian or Ubuntu it is part of apt/dpkg)") from None
    except subprocess.TimeoutExpired:
        raise ImageError(f"cannot {what}: `{' '.join(argv[:3])}` did not finish in 10 minutes") from None
    if cp.returncode != 0:
        msg = (cp.stderr.strip() or cp.stdout.strip()).splitlines()
        raise ImageError(f"cannot {what}: `{' '.join(argv[:3])} …` failed: {msg[-1] if msg else f'exit {cp.returncode}'}")
    return cp.stdout


def resolve_kernel_package() -> str:
    """The versioned kernel image package ``linux-image-amd64`` depends on."""
    out = _run(["apt-cache", "depends", "--no-recommends", "--no-suggests", KERNEL_META], what="find the kernel package")
    m = re.search(r"Depends:\s*(linux-image-[0-9][^\s]*)", out)
    if not m:
        raise ImageError(f"`apt-cache depends {KERNEL_META}` names no kernel image package; run `apt-get update` "
                         "(as root) so the package lists are present")
    return m.group(1)


def download(names: list[str], dest: Path, progress: Progress) -> list[Path]:
    """``apt-get download`` each package into ``dest`` (kept as a cache)."""
    dest.mkdir(parents=True, exist_ok=True)
    progress(f"downloading {len(names)} packages with apt-get download into {dest}")
    _run(["apt-get", "download", "-q", *names], cwd=dest, what="download the guest's packages")
    debs = []
    for n in names:
        found = sorted(dest.glob(f"{n}_*.deb"))
        if not found:
            raise ImageError(f"apt-get download said nothing went wrong but {n}_*.deb is not in {dest}")
        debs.append(found[-1])
    return debs


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _deb_field(deb: Path, field: str) -> str:
    return _run(["dpkg-deb", "-f", str(deb), field], what=f"read {deb.name}").strip()


# --------------------------------------------------------------------- building
def build(*, kernel: Path | None = None, modules: Path | None = None, progress: Progress = lambda s: None,
          force: bool = False) -> Image:
    """Download (if needed), assemble and cache the image; return it. ``kernel`` and
    ``modules`` replace the distribution kernel with the user's own (a bzImage or ELF
    vmlinux, and its ``lib/modules/<release>`` directory)."""
    root = cache_dir()
    debs_dir = root / "debs"
    kpkg = resolve_kernel_package() if kernel is None else None
    names = [*PACKAGES, *([kpkg] if kpkg else [])]
    have = {n: sorted(debs_dir.glob(f"{n}_*.deb")) for n in names}
    missing = [n for n, found in have.items() if not found]
    debs = download(missing, debs_dir, progress) if missing else []
    debs = [have[n][-1] if have[n] else next(d for d in debs if d.name.startswith(f"{n}_")) for n in names]
    key_parts = [f"builder {BUILDER_VERSION}", f"guest {guest_scripts_digest()}"]
    key_parts += [f"{d.name} {_sha256(d)}" for d in debs]
    if kernel is not None:
        key_parts.append(f"kernel {_sha256(kernel)}")
        if modules is not None:
            key_parts += [f"module {p.relative_to(modules)} {_sha256(p)}" for p in sorted(modules.rglob("*")) if p.is_file()]
    key = hashlib.sha256("\n".join(key_parts).encode()).hexdigest()[:16]
    out = root / "images" / key
    if (out / "manifest.json").exists() and not force:
        image = Image(out, json.loads((out / "manifest.json").read_text()))
        _remember(root, image, kernel, modules)
        return image
    progress(f"assembling image {key}")
    with tempfile.TemporaryDirectory(prefix="fairlab-vm-build-") as tmp:
        stage = Path(tmp) / "stage"
        stage.mkdir()
        for d in debs:
            _run(["dpkg-deb", "-x", str(d), str(stage)], what=f"unpack {d.name}")
        if kernel is None:
            release = kpkg.removeprefix("linux-image-")  # type: ignore[union-attr]
            vmlinuz = stage / "boot" / f"vmlinuz-{release}"
            modroot = stage / "lib" / "modules" / release
        else:
            vmlinuz = kernel
            if modules is None:
                raise ImageError("--kernel needs --modules too (the kernel's lib/modules/<release> directory), so the "
                                 "guest can load the network modules built for that kernel")
            modroot = modules
            release = modules.name
        tmp_out = Path(tmp) / "out"
        tmp_out.mkdir()
        progress("extracting the uncompressed kernel")
        (tmp_out / "vmlinux").write_bytes(uncompressed_kernel(vmlinuz.read_bytes()))
        idx = kmod.index(modroot, MODULE_TREES)
        entries = _rootfs(stage, modroot, idx)
        progress(f"writing the initramfs ({len(entries)} files)")
        (tmp_out / "base.cpio").write_bytes(cpio.archive(entries))
        manifest = {
            "key": key,
            "builder_version": BUILDER_VERSION,
            "kernel_release": release,
            "kernel_source": "user" if kernel is not None else "distribution",
            "packages": {_deb_field(d, "Package"): {"version": _deb_field(d, "Version"), "sha256": _sha256(d)} for d in debs},
            "ccas": offered_ccas(idx),
            "qdiscs": offered_qdiscs(idx),
            "dccp": idx.has("dccp_ipv4"),
            "modules": {
                "builtin": sorted(idx.builtin),
                "builtin_params": {k: list(v) for k, v in idx.builtin_params.items()},
                "loadable": {n: {"path": m.relpath, "depends": list(m.depends), "params": list(m.params)}
                             for n, m in sorted(idx.modules.items())},
            },
            "initrd_sha256": hashlib.sha256((tmp_out / "base.cpio").read_bytes()).hexdigest(),
        }
        (tmp_out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp_out, out)  # atomic: a half-built image is never found
    image = Image(out, manifest)
    _remember(root, image, kernel, modules)
    progress(f"image ready: {out}")
    return image


def _remember(root: Path, image: Image, kernel: Path | None = None, modules: Path | None = None) -> None:
    """``current.json`` points at the image the last build produced, which every vm
    run then uses (so a run need not resolve packages, and `fairlab vm build --kernel`
    switches all later runs to the user's kernel until the next plain build). It
    records the guest-scripts digest and the user's kernel paths, so a changed
    fairlab rebuilds the same kind of image."""
    doc = {"key": image.key, "guest": guest_scripts_digest(),
           "kernel": str(kernel) if kernel else None, "modules": str(modules) if modules else None}
    tmp = root / "current.json.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, root / "current.json")


def find(progress: Progress = lambda s: None) -> Image:
    """The current image (the last one built), built now (with progress) if there is
    none or the guest scripts changed since it was built."""
    root = cache_dir()
    cur = root / "current.json"
    doc: dict[str, Any] = {}
    if cur.exists():
        try:
            doc = json.loads(cur.read_text())
            path = root / "images" / str(doc["key"])
            if doc.get("guest") == guest_scripts_digest() and (path / "manifest.json").exists():
                return Image(path, json.loads((path / "manifest.json").read_text()))
        except (OSError, ValueError, KeyError):
            pass
    progress("no vm image for this fairlab yet: building it (once; `fairlab vm build` does the same)")
    kernel, modules = doc.get("kernel"), doc.get("modules")
    return build(kernel=Path(kernel) if kernel else None, modules=Path(modules) if modules else None, progress=progress)


def uncompressed_kernel(bzimage: bytes) -> bytes:
    """The ELF ``vmlinux`` inside a bzImage (xz-compressed, as Debian builds it), or
    the input itself when it already is an ELF file."""
    if bzimage[:4] == b"\x7fELF":
        return bzimage
    start = bzimage.find(b"\xfd7zXZ\x00")
    if start < 0:
        raise ImageError("the kernel is not an ELF vmlinux and holds no xz-compressed payload; give an uncompressed "
                         "vmlinux (built with CONFIG_PVH=y) or an xz-compressed bzImage")
    try:
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bzimage[start:])
    except lzma.LZMAError as exc:
        raise ImageError(f"the kernel's xz payload does not decompress ({exc})") from None
    if elf[:4] != b"\x7fELF":
        raise ImageError("the kernel's xz payload is not an ELF vmlinux")
    return elf


def _needed(data: bytes) -> list[str]:
    try:
        elf = ELFFile(io.BytesIO(data))
    except ELFError:
        return []
    out: list[str] = []
    for sec in elf.iter_sections():
        if isinstance(sec, DynamicSection):
            out += [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def _interp(data: bytes) -> str | None:
    try:
        elf = ELFFile(io.BytesIO(data))
    except ELFError:
        return None
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_INTERP":
            return seg.get_interp_name()
    return None


def _rootfs(stage: Path, modroot: Path, idx: kmod.ModuleIndex) -> list[cpio.Entry]:
    entries: list[cpio.Entry] = []
    for d in ("dev", "proc", "sys", "run", "tmp", "etc", "lib/modules", "fairlab", "root"):
        entries.append(cpio.directory(d))
    busybox = stage / "bin" / "busybox"
    if not busybox.exists():
        raise ImageError("busybox-static did not provide bin/busybox")
    entries.append(cpio.file("bin/busybox", busybox.read_bytes(), 0o755))
    entries += [cpio.symlink(f"bin/{a}", "busybox") for a in APPLETS]
    binaries: dict[str, bytes] = {}
    for src, dst in TOOLS.items():
        p = stage / src
        if not p.exists():
            p = stage / "usr" / src  # merged-/usr layouts
        if not p.exists():
            raise ImageError(f"the packages provide no {src}")
        binaries[dst] = p.read_bytes()
    for dst, data in binaries.items():
        entries.append(cpio.file(dst, data, 0o755))
    # Library closure: every DT_NEEDED of every binary and library, found in the packages.
    libs: dict[str, bytes] = {}
    todo = [n for data in binaries.values() for n in _needed(data)]
    interps = {i for data in binaries.values() if (i := _interp(data))}
    while todo:
        name = todo.pop()
        if name in libs:
            continue
        found = next((stage / d / name for d in LIB_DIRS if (stage / d / name).exists()), None)
        if found is None:
            raise ImageError(f"no package in the image provides {name}, which the guest's tools need; add its "
                             "package to fairlab.backends.vm.image.PACKAGES")
        libs[name] = found.resolve().read_bytes()
        todo += _needed(libs[name])
    for name, data in sorted(libs.items()):
        entries.append(cpio.file(f"lib/x86_64-linux-gnu/{name}", data, 0o755))
    for interp in sorted(interps):
        name = Path(interp).name
        src = next((stage / d / name for d in LIB_DIRS if (stage / d / name).exists()), None)
        if src is None:
            raise ImageError(f"no package provides the dynamic loader {interp}")
        entries.append(cpio.file(interp.lstrip("/"), src.resolve().read_bytes(), 0o755))
    # Modules, flat under /lib/modules/<name>.ko (the load order comes with each run).
    for name, m in sorted(idx.modules.items()):
        entries.append(cpio.file(f"lib/modules/{name}.ko", (modroot / m.relpath).read_bytes()))
    for p in sorted(GUEST_DIR.iterdir()):
        if p.is_file():
            perm = 0o755 if p.name == "init" else 0o644
            target = "init" if p.name == "init" else f"fairlab/{p.name}"
            entries.append(cpio.file(target, p.read_bytes(), perm))
    entries.append(cpio.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"))
    entries.append(cpio.file("etc/group", b"root:x:0:\n"))
    return entries


def offered_ccas(idx: kmod.ModuleIndex) -> list[str]:
    """Congestion controls this kernel offers, by their Linux names (tcp_<name>)."""
    names = {m.removeprefix("tcp_") for m in (*idx.modules, *idx.builtin) if m.startswith("tcp_")}
    # tcp_diag / tcp_probe-like helpers are not congestion controls; reno is always built in.
    names -= {"diag", "probe", "metrics"}
    return sorted(names | {"reno"})


def offered_qdiscs(idx: kmod.ModuleIndex) -> list[str]:
    """Queue disciplines this kernel offers, by their tc names (sch_<name>), plus the
    built-in FIFOs."""
    names = {m.removeprefix("sch_") for m in (*idx.modules, *idx.builtin) if m.startswith("sch_")}
    return sorted(names | {"pfifo", "bfifo"})
