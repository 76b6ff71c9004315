"""The wheel-layout logic (issue 14 item 5) without building a wheel: where the helper
binaries (linkem, fairlab-dccpgen) are staged, that pyproject puts exactly those files
into the wheel and their crates into the sdist, that an sdist's workspace gets them back
as members in the repository's order, that fairlab-dccpgen is built with the Makefile's
flags, that the build hook stages before maturin runs and cleans up after, and that the
live and vm backends prefer the packaged binaries. `make wheel` and
`pip install dist/*.tar.gz` do the real builds."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def load_backend():
    bs = PYPROJECT["build-system"]
    (backend_dir,) = bs["backend-path"]
    path = ROOT / backend_dir / f"{bs['build-backend']}.py"
    spec = importlib.util.spec_from_file_location("fairlab_build_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fb = load_backend()

# What cargo prints with --message-format=json for a binary target (the fields cargo
# documents for "compiler-artifact"), plus the lines around it.
CARGO_OUTPUT = [
    '{"reason":"compiler-artifact","package_id":"path+file:///w/crates/aqm#0.1.0","target":{"kind":["lib"],"crate_types":["lib"],"name":"aqm","src_path":"/w/crates/aqm/src/lib.rs"},"filenames":["/w/target/release/libaqm.rlib"],"executable":null,"fresh":true}',
    '{"reason":"compiler-artifact","package_id":"path+file:///w/crates/linkem#0.1.0","target":{"kind":["lib"],"crate_types":["lib"],"name":"linkem","src_path":"/w/crates/linkem/src/lib.rs"},"filenames":["/w/target/release/liblinkem.rlib"],"executable":null,"fresh":false}',
    '{"reason":"compiler-artifact","package_id":"path+file:///w/crates/linkem#0.1.0","target":{"kind":["bin"],"crate_types":["bin"],"name":"linkem","src_path":"/w/crates/linkem/src/main.rs"},"filenames":["/t/release/linkem"],"executable":"/t/release/linkem","fresh":false}',
    '{"reason":"build-finished","success":true}',
]


REPO_MEMBERS = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["members"]


def test_the_helpers_are_the_repositorys_two_binary_crates_and_staged_under_fairlab_bin():
    assert [(h.crate, h.binary) for h in fb.HELPERS] == [("crates/linkem", "linkem"), ("crates/dccpgen", "fairlab-dccpgen")]
    for h in fb.HELPERS:
        assert h.staged == Path("python/fairlab/_bin") / h.binary
        manifest = tomllib.loads((ROOT / h.crate / "Cargo.toml").read_text())
        assert manifest["package"]["name"] == h.package
        bins = [b["name"] for b in manifest.get("bin", [])] or [h.package]  # cargo's default bin name
        assert h.binary in bins
    # the vm guest has no libc of ours: only dccpgen is static
    assert [h.static for h in fb.HELPERS] == [False, True]


def test_the_executables_are_read_from_cargos_messages():
    dccpgen = ('{"reason":"compiler-artifact","package_id":"path+file:///w/crates/dccpgen#0.1.0","target":{"kind":["bin"],'
               '"crate_types":["bin"],"name":"fairlab-dccpgen","src_path":"/w/crates/dccpgen/src/main.rs"},'
               '"filenames":["/t/x86_64-unknown-linux-gnu/release/fairlab-dccpgen"],'
               '"executable":"/t/x86_64-unknown-linux-gnu/release/fairlab-dccpgen","fresh":false}')
    assert fb.executable(CARGO_OUTPUT, "linkem") == Path("/t/release/linkem")
    assert fb.executable(["not json", dccpgen, *CARGO_OUTPUT], "fairlab-dccpgen") == Path("/t/x86_64-unknown-linux-gnu/release/fairlab-dccpgen")
    with pytest.raises(fb.BuildError, match="linkem"):
        fb.executable(CARGO_OUTPUT[:2] + CARGO_OUTPUT[3:], "linkem")  # only linkem's library was built
    with pytest.raises(fb.BuildError, match="fairlab-dccpgen"):
        fb.executable(CARGO_OUTPUT, "fairlab-dccpgen")


def test_dccpgen_is_built_with_the_makefiles_flags_so_both_give_the_same_bytes():
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"(?m)^\$\(DCCPGEN\): .*\n\tRUSTFLAGS='(?P<flags>[^']*)' \\\n\t\s*(?P<cargo>.*)\n", makefile)
    make_target = re.search(r"(?m)^DCCPGEN_TARGET := (\S+)$", makefile)[1]
    make_argv = rule["cargo"].replace("$(CARGO)", "cargo").replace("$(DCCPGEN_TARGET)", make_target).split()
    dccpgen = next(h for h in fb.HELPERS if h.static)
    argv, env = fb.cargo_command(dccpgen, Path("/src/fairlab"))
    # make expands $(CURDIR) to the directory it runs in and $(HOME) from the environment
    assert env["RUSTFLAGS"] == rule["flags"].replace("$(CURDIR)", "/src/fairlab").replace("$(HOME)", str(Path.home()))
    assert argv == make_argv + ["--message-format=json-render-diagnostics"]
    linkem = next(h for h in fb.HELPERS if not h.static)
    argv, env = fb.cargo_command(linkem, ROOT)
    assert argv == ["cargo", "build", "--release", "-p", "linkem", "--message-format=json-render-diagnostics"]
    assert env.get("RUSTFLAGS") == os.environ.get("RUSTFLAGS")  # the user's own, as `make` leaves it


def test_pyproject_puts_the_staged_files_into_the_wheel_and_the_helper_crates_into_the_sdist():
    includes = PYPROJECT["tool"]["maturin"]["include"]
    wheel = [i["path"] for i in includes if i["format"] == "wheel"]
    sdist = [i["path"] for i in includes if i["format"] == "sdist"]
    assert wheel == [h.staged.as_posix() for h in fb.HELPERS]
    # maturin maps python-source/... to the wheel root, so the files land at fairlab/_bin/<binary>,
    # which is where the backends look (importlib.resources "fairlab" / "_bin" / ...)
    src = PYPROJECT["tool"]["maturin"]["python-source"]
    assert [h.staged.relative_to(src).as_posix() for h in fb.HELPERS] == ["fairlab/_bin/linkem", "fairlab/_bin/fairlab-dccpgen"]
    assert all(f"{h.crate}/**/*" in sdist for h in fb.HELPERS)
    assert f"{PYPROJECT['build-system']['backend-path'][0]}/*.py" in sdist
    # the staged copies are never committed by accident
    for h in fb.HELPERS:
        r = subprocess.run(["git", "check-ignore", "-q", h.staged.as_posix()], cwd=ROOT)
        if r.returncode in (0, 1):  # 128: not a git checkout (an sdist), nothing to check
            assert r.returncode == 0
    assert "linkem" in PYPROJECT["project"]["scripts"]
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert "scipy" in " ".join(PYPROJECT["project"]["dependencies"])


@pytest.mark.parametrize("missing", [m for n in range(1, len(fb.HELPERS) + 1)
                                     for m in itertools.combinations([h.crate for h in fb.HELPERS], n)])
def test_an_sdist_workspace_gets_missing_helpers_back_in_the_repositorys_order(missing):
    repo = (ROOT / "Cargo.toml").read_text()
    assert fb.with_helper_members(repo) == repo  # all members already: unchanged
    # what `maturin sdist` writes: the members without (some of) the helper crates
    kept = [m for m in REPO_MEMBERS if m not in missing]
    sdist = re.sub(r"(?m)^members\s*=\s*\[.*?\]", "members = [" + ", ".join(f'"{m}"' for m in kept) + "]", repo)
    assert tomllib.loads(sdist)["workspace"]["members"] == kept
    fixed = tomllib.loads(fb.with_helper_members(sdist))
    assert fixed["workspace"]["members"] == REPO_MEMBERS
    assert fixed["workspace"]["package"] == tomllib.loads(repo)["workspace"]["package"]  # the rest untouched


def test_missing_helpers_go_before_later_helpers_in_any_members_layout():
    multi_line = '[workspace]\nmembers = [\n    "crates/a",\n    "crates/dccpgen",\n    \'crates/b\',\n]\n'
    assert tomllib.loads(fb.with_helper_members(multi_line))["workspace"]["members"] == [
        "crates/a", "crates/linkem", "crates/dccpgen", "crates/b"]
    assert tomllib.loads(fb.with_helper_members("[workspace]\nmembers = []\n"))["workspace"]["members"] == [
        "crates/linkem", "crates/dccpgen"]
    with pytest.raises(fb.BuildError):
        fb.with_helper_members("[package]\nname = 'x'\n")


def test_build_wheel_stages_every_helper_for_maturin_and_removes_them(tmp_path, monkeypatch):
    import maturin

    built = {}
    for h in fb.HELPERS:
        built[h.binary] = tmp_path / f"built-{h.binary}"
        built[h.binary].write_bytes(b"\x7fELF not really " + h.binary.encode())
        built[h.binary].chmod(0o644)
    root = tmp_path / "tree"
    monkeypatch.setattr(fb, "ROOT", root)
    monkeypatch.setattr(fb, "build_helper", lambda h, r: built[h.binary])
    seen = {}

    def fake_maturin_build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        for h in fb.HELPERS:
            staged = root / h.staged
            seen[h.staged.as_posix()] = (staged.read_bytes(), stat.S_IMODE(staged.stat().st_mode))
        return "fairlab-0.1.0-cp311-abi3-linux_x86_64.whl"

    monkeypatch.setattr(maturin, "build_wheel", fake_maturin_build_wheel)
    assert fb.build_wheel(str(tmp_path)) == "fairlab-0.1.0-cp311-abi3-linux_x86_64.whl"
    assert seen == {"python/fairlab/_bin/linkem": (b"\x7fELF not really linkem", 0o755),
                    "python/fairlab/_bin/fairlab-dccpgen": (b"\x7fELF not really fairlab-dccpgen", 0o755)}
    assert not (root / fb.STAGE_DIR).exists()

    def failing(*a, **k):
        raise SystemExit(1)

    monkeypatch.setattr(maturin, "build_wheel", failing)
    with pytest.raises(SystemExit):
        fb.build_wheel(str(tmp_path))
    assert not (root / fb.STAGE_DIR).exists()  # removed on failure too

    def dccpgen_fails(h, r):
        if h.static:
            raise fb.BuildError("no static target")
        return built[h.binary]

    monkeypatch.setattr(fb, "build_helper", dccpgen_fails)
    monkeypatch.setattr(maturin, "build_wheel", fake_maturin_build_wheel)
    with pytest.raises(fb.BuildError, match="no static target"):
        fb.build_wheel(str(tmp_path))
    assert not (root / fb.STAGE_DIR).exists()  # linkem, staged first, is gone again


def test_a_wheel_build_fails_loudly_without_cargo(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no cargo on PATH
    for h in fb.HELPERS:
        with pytest.raises(fb.BuildError, match=f"cargo.*{h.binary}"):
            fb.build_helper(h, ROOT)


def test_the_live_backend_prefers_the_packaged_linkem(tmp_path, monkeypatch):
    from fairlab.backends.live import linkem_link

    # in a source checkout there is no packaged copy (build_wheel removes it)
    assert linkem_link.packaged_linkem() is None or (ROOT / fb.HELPERS[0].staged).is_file()
    shipped = tmp_path / "pkg" / "linkem"
    shipped.parent.mkdir()
    shipped.write_text("#!/bin/sh\n")
    shipped.chmod(0o755)
    dev = tmp_path / "target" / "release" / "linkem"
    dev.parent.mkdir(parents=True)
    dev.write_text("#!/bin/sh\n")
    dev.chmod(0o755)
    monkeypatch.delenv("FAIRLAB_LINKEM", raising=False)
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    monkeypatch.setattr(linkem_link, "packaged_linkem", lambda: shipped)
    assert linkem_link.find_linkem() == (str(shipped), "installed with fairlab")
    monkeypatch.setattr(linkem_link, "packaged_linkem", lambda: None)
    assert linkem_link.find_linkem() == (str(dev), "under $CARGO_TARGET_DIR")


def test_the_vm_backend_prefers_the_packaged_dccpgen(tmp_path, monkeypatch):
    from importlib import resources

    from fairlab.backends.vm import image

    # a stand-in for an installed fairlab (…/site-packages/fairlab/_bin/…) and a source tree
    site_pkg = tmp_path / "site-packages" / "fairlab"
    shipped = site_pkg / "_bin" / "fairlab-dccpgen"
    tree = tmp_path / "checkout"
    static = tree / "target" / "x86_64-unknown-linux-gnu" / "release" / "fairlab-dccpgen"
    dynamic = tree / "target" / "release" / "fairlab-dccpgen"
    for f in (shipped, static, dynamic):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"\x7fELF")
    real_files = resources.files
    monkeypatch.setattr(resources, "files", lambda pkg: site_pkg if pkg == "fairlab" else real_files(pkg))
    monkeypatch.setattr(image, "__file__", str(tree / "python" / "fairlab" / "backends" / "vm" / "image.py"))
    monkeypatch.delenv("FAIRLAB_DCCPGEN", raising=False)
    assert image.dccpgen_binary() == shipped
    shipped.unlink()  # a source checkout: the Makefile's static build, then a plain release build
    assert image.dccpgen_binary() == static
    static.unlink()
    assert image.dccpgen_binary() == dynamic
    dynamic.unlink()
    assert image.dccpgen_binary() is None
    # an explicit $FAIRLAB_DCCPGEN wins over everything, and a wrong one is not silently replaced
    shipped.write_bytes(b"\x7fELF")
    own = tmp_path / "my-dccpgen"
    own.write_bytes(b"\x7fELF")
    monkeypatch.setenv("FAIRLAB_DCCPGEN", str(own))
    assert image.dccpgen_binary() == own
    monkeypatch.setenv("FAIRLAB_DCCPGEN", str(tmp_path / "missing"))
    assert image.dccpgen_binary() is None


def test_the_linkem_command_runs_the_found_binary(tmp_path):
    fake = tmp_path / "linkem"
    fake.write_text('#!/bin/sh\necho "fake linkem $*"\nexit 3\n')
    fake.chmod(0o755)
    env = {**os.environ, "FAIRLAB_LINKEM": str(fake)}
    r = subprocess.run([sys.executable, "-c", "from fairlab.cli.linkem_command import main; main()", "--config", "c.json"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 3 and r.stdout.strip() == "fake linkem --config c.json"
    env["FAIRLAB_LINKEM"] = str(tmp_path / "missing")
    r = subprocess.run([sys.executable, "-c", "from fairlab.cli.linkem_command import main; main()"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "is not an executable file" in r.stderr


def test_citation_file_is_valid_cff_shape():
    import yaml  # noqa: F401  (pyyaml comes with distributed/dask)

    doc = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert doc["cff-version"] == "1.2.0" and doc["type"] == "software" and doc["authors"]
    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    assert doc["version"] == version and doc["license"] == PYPROJECT["project"]["license"]
    assert json.dumps(doc)  # plain data
