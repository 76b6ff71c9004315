"""fairlab's PEP 517 build backend: maturin, plus the helper binaries in the wheel.

maturin builds one Rust crate per wheel (the `fairlab._core` extension); the backends
also need separate programs, listed in `HELPERS`: `linkem` (crates/linkem), the live
backend's link emulator, and `fairlab-dccpgen` (crates/dccpgen), the DCCP traffic
generator the vm backend appends to its guest initramfs. So `build_wheel` first builds
each with cargo, copies it to `python/fairlab/_bin/<binary>` (pyproject's
`[tool.maturin] include` puts those files in the wheel, at `fairlab/_bin/<binary>`,
executable), lets maturin build the wheel, and removes the copies again so a source
checkout never holds a stale binary. Everything else is maturin's. The backends find
the packaged binaries with `importlib.resources`
(`fairlab.backends.live.linkem_link.packaged_linkem`,
`fairlab.backends.vm.image.dccpgen_binary`).

fairlab-dccpgen is built exactly as the Makefile's `make dccpgen` builds it (static,
for x86_64-unknown-linux-gnu, build paths remapped), so both give the same bytes.

`maturin sdist` leaves the helper crates out of the workspace's `members` (it keeps
only the extension's dependencies); pyproject includes their sources in the sdist, and
`build_wheel` puts them back into `members`, in the repository's order, when building
from such a tree.

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
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
#: Where the wheel carries the helpers, relative to the project root (and, without the
#: leading "python/", inside the wheel). pyproject's [tool.maturin] include names each file.
STAGE_DIR = Path("python/fairlab/_bin")
#: The guest of the vm backend is x86_64 and has no libc of ours: the Makefile's DCCPGEN_TARGET.
STATIC_TARGET = "x86_64-unknown-linux-gnu"


class Helper(NamedTuple):
    crate: str  # the workspace member, relative to the root
    package: str  # cargo's -p
    binary: str  # the [[bin]] name, also the staged file's name
    static: bool = False  # built like the Makefile's DCCPGEN rule

    @property
    def staged(self) -> Path:
        return STAGE_DIR / self.binary


#: In the order the repository's Cargo.toml lists them as the last workspace members.
HELPERS = (
    Helper("crates/linkem", "linkem", "linkem"),
    Helper("crates/dccpgen", "dccpgen", "fairlab-dccpgen", static=True),
)


class BuildError(RuntimeError):
    """A helper binary could not be built, so the wheel would be half a tool."""


def executable(cargo_messages: Iterable[str], binary: str) -> Path:
    """The path of the ``binary`` target in cargo's `--message-format=json` output."""
    for line in cargo_messages:
        line = line.strip()
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        target = msg.get("target") or {}
        if msg.get("reason") == "compiler-artifact" and target.get("name") == binary and "bin" in target.get("kind", []) and msg.get("executable"):
            return Path(msg["executable"])
    raise BuildError(f"cargo built no {binary} executable (no compiler-artifact message for the {binary} binary)")


def with_helper_members(cargo_toml: str) -> str:
    """The workspace Cargo.toml text with every helper crate in `members` (unchanged if
    they all are). A missing helper goes before the first helper listed after it in
    `HELPERS`, else at the end, which restores the repository's order for any subset."""
    m = re.search(r"(?ms)^members\s*=\s*\[(?P<body>.*?)\]", cargo_toml)
    if m is None:
        raise BuildError("the workspace Cargo.toml has no members list")
    members = re.findall(r"[\"']([^\"']+)[\"']", m["body"])
    crates = [h.crate for h in HELPERS]
    if all(c in members for c in crates):
        return cargo_toml
    for i, crate in enumerate(crates):
        if crate not in members:
            later = [members.index(c) for c in crates[i + 1 :] if c in members]
            members.insert(later[0] if later else len(members), crate)
    body = ", ".join(json.dumps(c) for c in members)
    return cargo_toml[: m.start("body")] + body + cargo_toml[m.end("body") :]


def cargo_command(helper: Helper, root: Path = ROOT) -> tuple[list[str], dict[str, str]]:
    """The `cargo build` argv and environment for ``helper``; for a static helper the
    Makefile's DCCPGEN rule, flag for flag, so the binary is byte-for-byte the same
    whichever builds it (the remapped paths keep the checkout's location out of it)."""
    argv = ["cargo", "build", "--release", "-p", helper.package]
    env = dict(os.environ)
    if helper.static:
        argv += ["--target", STATIC_TARGET]
        env["RUSTFLAGS"] = f"-C target-feature=+crt-static --remap-path-prefix={root}=. --remap-path-prefix={Path.home()}=~"
        env.pop("CARGO_ENCODED_RUSTFLAGS", None)  # cargo would prefer it to RUSTFLAGS
    return argv + ["--message-format=json-render-diagnostics"], env


def build_helper(helper: Helper, root: Path = ROOT) -> Path:
    """Build ``helper`` with cargo in ``root``; the binary's path."""
    if shutil.which("cargo") is None:
        raise BuildError(f"cargo (Rust stable) is needed to build {helper.binary}, a helper fairlab's wheel carries; install it with rustup")
    if not (root / helper.crate / "Cargo.toml").exists():
        raise BuildError(f"{root / helper.crate} is missing, so the wheel cannot carry {helper.binary}")
    manifest = root / "Cargo.toml"
    text = manifest.read_text()
    fixed = with_helper_members(text)
    if fixed != text:  # an sdist tree written by maturin
        manifest.write_text(fixed)
    argv, env = cargo_command(helper, root)
    cp = subprocess.run(argv, cwd=root, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if cp.returncode != 0:
        raise BuildError(f"`{' '.join(argv[:-1])}` failed with exit code {cp.returncode} (its messages are above)")
    return executable(cp.stdout.splitlines(), helper.binary)


def stage(binary: Path, helper: Helper, root: Path = ROOT) -> Path:
    """Copy ``binary`` to where the wheel takes ``helper`` from, executable."""
    dest = root / helper.staged
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(binary, dest)
    dest.chmod(0o755)
    return dest


def stage_all(root: Path = ROOT) -> list[Path]:
    return [stage(build_helper(h, root), h, root) for h in HELPERS]


def unstage(root: Path = ROOT) -> None:
    for h in HELPERS:
        (root / h.staged).unlink(missing_ok=True)
    stage_dir = root / STAGE_DIR
    if stage_dir.exists() and not any(stage_dir.iterdir()):
        stage_dir.rmdir()


@contextmanager
def staged_helpers(root: Path = ROOT) -> Iterator[list[Path]]:
    try:
        yield stage_all(root)
    finally:
        unstage(root)  # also what a failed build of a later helper left


# ---------------------------------------------------------------- PEP 517 hooks
def build_wheel(wheel_directory: str, config_settings: Mapping[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    import maturin

    with staged_helpers(ROOT):
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Mapping[str, Any] | None = None) -> str:
    import maturin

    return maturin.build_sdist(sdist_directory, config_settings)


def build_editable(wheel_directory: str, config_settings: Mapping[str, Any] | None = None,
                   metadata_directory: str | None = None) -> str:
    # An editable install runs from the source tree, where the live backend finds
    # the helpers in cargo's target directory: no copy to go stale.
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
        try:
            print(*stage_all(ROOT), sep="\n")
        except BuildError as e:
            unstage(ROOT)  # no half-staged set for `maturin build` to pack
            sys.exit(f"error: {e}")
    elif sys.argv[1:] == ["unstage"]:
        unstage(ROOT)
    else:
        sys.exit("usage: python buildsys/fairlab_build.py stage|unstage")
