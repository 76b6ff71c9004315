"""`fairlab vm build|doctor`: the vm backend's guest image, and what it can do here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import console, err_console

app = typer.Typer(help="The vm backend (a stock Linux kernel in QEMU, virtual time): build its image, check the machine.",
                  no_args_is_help=True)


@app.command("build")
def build(
    kernel: Optional[Path] = typer.Option(None, "--kernel", help="your own kernel (bzImage or vmlinux, CONFIG_PVH=y) instead of Debian's"),
    modules: Optional[Path] = typer.Option(None, "--modules", help="its lib/modules/<release> directory (needed with --kernel)"),
    force: bool = typer.Option(False, "--force", help="rebuild even if the image exists"),
) -> None:
    """Download the guest's packages (no root), build the reproducible image, and make it
    the one vm runs use. With --kernel/--modules, later runs use your kernel until the
    next plain `fairlab vm build`."""
    from ..backends.vm.image import build as do_build
    from ..backends.vm.image import dccpgen_binary

    for opt, p in (("--kernel", kernel), ("--modules", modules)):
        if p is not None and not p.exists():
            err_console.print(f"[bold red]error:[/] {opt} {escape(str(p))}: no such file or directory")
            raise typer.Exit(2)
    img = do_build(kernel=kernel, modules=modules, force=force, progress=lambda s: err_console.print(escape(s)))
    console.print(f"vm image {img.key}: kernel {img.release} ({img.manifest.get('kernel_source')}), {len(img.ccas())} "
                  f"congestion controls, {len(img.qdiscs())} qdiscs, DCCP {'yes' if img.manifest.get('dccp') else 'no'}"
                  f" (traffic generator {'built' if dccpgen_binary() else 'not built: make dccpgen'}) — {img.root}")


@app.command("doctor")
def doctor(as_json: bool = typer.Option(False, "--json", help="print the findings as JSON")) -> None:
    """Check QEMU and the image, boot the guest once, and list what the kernel offers.
    Exits 1 when vm runs cannot work here."""
    from ..backends.vm.doctor import probe
    from ..backends.vm.errors import VmError
    from ..backends.vm.image import dccpgen_binary, find

    image, image_error = None, None
    try:
        image = find(progress=lambda s: err_console.print(escape(s)))
    except VmError as exc:
        image_error = str(exc)
    f = probe(image, image_error)
    if as_json:
        print(json.dumps(f.as_dict(), indent=2))
        raise typer.Exit(0 if f.ok() else 1)
    t = Table(title="fairlab vm: what this machine can do", title_justify="left")
    t.add_column("item", style="bold")
    t.add_column("finding")
    bad = "[red]{}[/]"
    t.add_row("QEMU", f"{f.qemu} ({f.qemu_version})" if f.qemu else bad.format("MISSING: apt-get install qemu-system-x86"))
    if image is None:
        t.add_row("image", bad.format(escape(image_error or "none")))
    else:
        t.add_row("image", f"{image.key} at {escape(str(image.root))}")
        t.add_row("kernel", f"{image.release} ({image.manifest.get('kernel_source')})")
        t.add_row("congestion controls", " ".join(f.ccas_running) if f.booted else " ".join(image.ccas()) + " (not booted)")
        t.add_row("queue disciplines", " ".join(image.qdiscs()))
        dccp = "yes" if image.manifest.get("dccp") else "no"
        gen = "yes" if dccpgen_binary() else "NOT BUILT (make dccpgen)"
        t.add_row("DCCP / CCID2", f"kernel {dccp}, traffic generator {gen}")
    if f.booted:
        t.add_row("boot", f"{f.boot_wall_s} s wall, {f.boot_host_cpu_s} s host CPU")
        t.add_row("high-resolution timers", "yes" if f.hres else bad.format("NO: " + escape(f.boot_error or "hres_active 0")))
        t.add_row("clocksource", str(f.clocksource))
    elif f.boot_error:
        t.add_row("boot", bad.format(escape(f.boot_error)))
    console.print(t)
    console.print("vm runs can work here" if f.ok() else "[red]vm runs cannot work here[/] (see above)")
    raise typer.Exit(0 if f.ok() else 1)
