"""Kernel modules of a guest kernel: what each one needs and in which order to load them.

Debian's kernel packages ship the modules without ``modules.dep`` (depmod writes it
on the installed system), so the dependencies are read from each module's own
``.modinfo`` section (``depends=a,b``), as depmod itself does. A module is loaded
after everything it depends on; the order is fixed by sorting, so every boot of the
same image loads the same modules in the same order (a different order is a
different instruction count, and so a different virtual-time run).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile


class ModuleError(ValueError):
    """A module is missing or its dependencies cannot be satisfied."""


@dataclass(frozen=True)
class Module:
    name: str  # as the kernel names it: underscores, no ".ko"
    relpath: str  # path under lib/modules/<release>/
    depends: tuple[str, ...]
    params: tuple[str, ...] = ()


@dataclass
class ModuleIndex:
    """Every loadable module of one kernel release, and the built-in ones."""

    release: str
    modules: dict[str, Module] = field(default_factory=dict)
    builtin: set[str] = field(default_factory=set)
    builtin_params: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return canonical(name) in self.modules or canonical(name) in self.builtin

    def load_order(self, wanted: list[str]) -> list[str]:
        """``wanted`` plus their dependencies, each after what it depends on; built-in
        modules are left out (they need no loading)."""
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, chain: tuple[str, ...]) -> None:
            name = canonical(name)
            if name in self.builtin:
                return
            if name not in self.modules:
                via = f" (needed by {chain[-1]})" if chain else ""
                raise ModuleError(f"kernel {self.release} has no module {name!r}{via}")
            if state.get(name) == "done":
                return
            if state.get(name) == "visiting":
                raise ModuleError(f"kernel {self.release}: modules depend on each other in a cycle: {' -> '.join((*chain, name))}")
            state[name] = "visiting"
            for dep in sorted(self.modules[name].depends):
                visit(dep, (*chain, name))
            state[name] = "done"
            order.append(name)

        for w in sorted(set(wanted)):
            visit(w, ())
        return order


def canonical(name: str) -> str:
    """The kernel treats ``-`` and ``_`` in module names alike; we use ``_``."""
    return name.replace("-", "_").removesuffix(".ko")


def modinfo(data: bytes) -> dict[str, list[str]]:
    """The ``key=value`` strings of a module's ``.modinfo`` section."""
    elf = ELFFile(io.BytesIO(data))
    sec = elf.get_section_by_name(".modinfo")
    if sec is None:
        return {}
    out: dict[str, list[str]] = {}
    for item in sec.data().split(b"\0"):
        if b"=" in item:
            k, v = item.decode("utf-8", "replace").split("=", 1)
            out.setdefault(k, []).append(v)
    return out


def index(modroot: Path, subtrees: tuple[str, ...]) -> ModuleIndex:
    """Read ``modroot`` (``lib/modules/<release>``): the modules under ``subtrees`` of
    its ``kernel/`` directory, and ``modules.builtin`` / ``modules.builtin.modinfo``."""
    idx = ModuleIndex(release=modroot.name)
    builtin_file = modroot / "modules.builtin"
    if builtin_file.exists():
        for line in builtin_file.read_text().split():
            idx.builtin.add(canonical(Path(line).name))
    binfo = modroot / "modules.builtin.modinfo"
    if binfo.exists():
        params: dict[str, list[str]] = {}
        for item in binfo.read_bytes().split(b"\0"):
            s = item.decode("utf-8", "replace")
            if ".parm=" in s:
                mod, rest = s.split(".parm=", 1)
                params.setdefault(canonical(mod), []).append(rest.split(":", 1)[0])
        idx.builtin_params = {k: tuple(sorted(set(v))) for k, v in params.items()}
    for sub in subtrees:
        base = modroot / "kernel" / sub
        files = [base] if sub.endswith(".ko") else sorted(base.rglob("*.ko"))
        for ko in (f for f in files if f.exists()):
            info = modinfo(ko.read_bytes())
            name = canonical(info.get("name", [ko.name])[0])
            deps = tuple(d for d in ",".join(info.get("depends", [""])).split(",") if d)
            parms = tuple(sorted({p.split(":", 1)[0] for p in info.get("parm", [])}))
            idx.modules[name] = Module(name, str(ko.relative_to(modroot)), tuple(canonical(d) for d in deps), parms)
    # A dependency may live outside the requested subtrees: pull it in from anywhere
    # under kernel/.
    missing = {d for m in idx.modules.values() for d in m.depends} - set(idx.modules) - idx.builtin
    if missing:
        by_name = {canonical(p.name): p for p in (modroot / "kernel").rglob("*.ko")}
        while missing:
            name = missing.pop()
            if name not in by_name:
                continue  # load_order reports it if anyone asks for a module needing it
            info = modinfo(by_name[name].read_bytes())
            deps = tuple(canonical(d) for d in ",".join(info.get("depends", [""])).split(",") if d)
            idx.modules[name] = Module(name, str(by_name[name].relative_to(modroot)), deps)
            missing |= set(deps) - set(idx.modules) - idx.builtin
    return idx
