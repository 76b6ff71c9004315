"""fairlab's PEP 517 build backend: maturin, plus the `linkem` binary in the wheel.

maturin builds one Rust crate per wheel (the `fairlab._core` extension); the live
backend also needs `linkem` (crates/linkem), a separate program that runs inside a
network namespace. So `build_wheel` first builds linkem with cargo, copies it to
`python/fairlab/_bin/linkem` (pyproject's `[tool.maturin] include` puts that file in
the wheel, at `fairlab/_bin/linkem`, executable), lets maturin build the wheel, and
removes the copy again so a source checkout never holds a stale binary. Everything
else is maturin's. The live backend finds the packaged binary with
`importlib.resources` (`fairlab.backends.live.linkem_link.packaged_linkem`).

`maturin sdist` leaves crates/linkem out of the workspace's `members` (it keeps only
the extension's dependencies); pyproject includes its sources in the sdist, and
`build_wheel` puts it back into `members` when building from such a tree.

`python buildsys/fairlab_build.py stage|unstage` does the same two steps for
`make wheel`, which runs `maturin build` itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where the wheel carries linkem, relative to the project root (and, without the
#: leading "python/", inside the wheel). pyproject's [tool.maturin] include names it.
STAGED = Path("python/fairlab/_bin/linkem")
LINKEM_CRATE = "crates/linkem"


class BuildError(RuntimeError):
    """linkem could not be built, so the wheel would be half a tool."""


def linkem_executable(cargo_messages: Iterable[str]) -> Path:
    """The path of the linkem binary in cargo's `--message-format=json` output."""
    for line in cargo_messages:
        line = line.strip()
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        target = msg.get("target") or {}
        if msg.get("reason") == "compiler-artifact" and target.get("name") == "linkem" and "bin" in target.get("kind", []) and msg.get("executable"):
            return Path(msg["executable"])
    raise BuildError("cargo built no linkem executable (no compiler-artifact message for the linkem binary)")


def with_linkem_member(cargo_toml: str) -> str:
    """The workspace Cargo.toml text with crates/linkem in `members` (unchanged if it is)."""
    m = re.search(r"(?ms)^members\s*=\s*\[(?P<body>.*?)\]", cargo_toml)
    if m is None:
        raise BuildError("the workspace Cargo.toml has no members list")
    if re.search(rf"[\"']{re.escape(LINKEM_CRATE)}[\"']", m["body"]):
        return cargo_toml
    body = m["body"].rstrip().rstrip(",")
    new = f"{body}, \"{LINKEM_CRATE}\"" if body.strip() else f"\"{LINKEM_CRATE}\""
    return cargo_toml[: m.start("body")] + new + cargo_toml[m.end("body") :]


def build_linkem(root: Path = ROOT) -> Path:
    """`cargo build --release -p linkem` in ``root``; the binary's path."""
    if shutil.which("cargo") is None:
        raise BuildError("cargo (Rust stable) is needed to build linkem, fairlab's link emulator; install it with rustup")
    if not (root / LINKEM_CRATE / "Cargo.toml").exists():
        raise BuildError(f"{root / LINKEM_CRATE} is missing, so the wheel cannot carry linkem")
    manifest = root / "Cargo.toml"
    text = manifest.read_text()
    fixed = with_linkem_member(text)
    if fixed != text:  # an sdist tree written by maturin
        manifest.write_text(fixed)
    cp = subprocess.run(["cargo", "build", "--release", "-p", "linkem", "--message-format=json-render-diagnostics"],
                        cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    if cp.returncode != 0:
        raise BuildError(f"`cargo build --release -p linkem` failed with exit code {cp.returncode} (its messages are above)")
    return linkem_executable(cp.stdout.splitlines())


def stage(binary: Path, root: Path = ROOT) -> Path:
    """Copy ``binary`` to where the wheel takes it from, executable."""
    dest = root / STAGED
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(binary, dest)
    dest.chmod(0o755)
    return dest


def unstage(root: Path = ROOT) -> None:
    dest = root / STAGED
    dest.unlink(missing_ok=True)
    if dest.parent.exists() and not any(dest.parent.iterdir()):
        dest.parent.rmdir()


@contextmanager
def staged_linkem(root: Path = ROOT) -> Iterator[Path]:
    dest = stage(build_linkem(root), root)
    try:
        yield dest
    finally:
        unstage(root)


# ---------------------------------------------------------------- PEP 517 hooks
def build_wheel(wheel_directory: str, config_settings: Mapping[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    import maturin

    with staged_linkem(ROOT):
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    import maturin

    return maturin.build_sdist(sdist_directory, config_settings)


def build_editable(wheel_directory: str, config_settings: Mapping[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    # An editable install runs from the source tree, where the live backend finds
    # linkem in cargo's target directory: no copy to go stale.
    import maturin

    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_wheel(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    import maturin

    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    import maturin

    return maturin.get_requires_for_build_sdist(config_settings)


def get_requires_for_build_editable(config_settings: Mapping[str, Any] | None = None) -> list[str]:
    import maturin

    return maturin.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    import maturin

    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    import maturin

    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


if __name__ == "__main__":
    if sys.argv[1:] == ["stage"]:
        print(stage(build_linkem(ROOT), ROOT))
    elif sys.argv[1:] == ["unstage"]:
        unstage(ROOT)
    else:
        sys.exit("usage: python buildsys/fairlab_build.py stage|unstage")
