"""The wheel-layout logic (issue 14 item 5) without building a wheel: where linkem is
staged, that pyproject puts exactly that file into the wheel and linkem's sources into
the sdist, that an sdist's workspace gets linkem back, that the build hook stages
before maturin runs and cleans up after, and that the live backend prefers the
packaged binary. `make wheel` and `pip install dist/*.tar.gz` do the real builds."""

from __future__ import annotations

import importlib.util
import json
import os
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


def test_the_linkem_executable_is_read_from_cargos_messages():
    assert fb.linkem_executable(CARGO_OUTPUT) == Path("/t/release/linkem")
    with pytest.raises(fb.BuildError):
        fb.linkem_executable(CARGO_OUTPUT[:2] + CARGO_OUTPUT[3:])


def test_pyproject_puts_the_staged_file_into_the_wheel_and_linkem_into_the_sdist():
    includes = PYPROJECT["tool"]["maturin"]["include"]
    wheel = [i["path"] for i in includes if i["format"] == "wheel"]
    sdist = [i["path"] for i in includes if i["format"] == "sdist"]
    assert wheel == [fb.STAGED.as_posix()]
    # maturin maps python-source/... to the wheel root, so the file lands at fairlab/_bin/linkem,
    # which is where the live backend looks (importlib.resources "fairlab" / "_bin" / "linkem")
    assert fb.STAGED.relative_to(PYPROJECT["tool"]["maturin"]["python-source"]) == Path("fairlab/_bin/linkem")
    assert f"{fb.LINKEM_CRATE}/**/*" in sdist and f"{PYPROJECT['build-system']['backend-path'][0]}/*.py" in sdist
    # the staged copy is never committed by accident
    r = subprocess.run(["git", "check-ignore", "-q", fb.STAGED.as_posix()], cwd=ROOT)
    if r.returncode in (0, 1):  # 128: not a git checkout (an sdist), nothing to check
        assert r.returncode == 0
    assert "linkem" in PYPROJECT["project"]["scripts"]
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert "scipy" in " ".join(PYPROJECT["project"]["dependencies"])


def test_an_sdist_workspace_gets_linkem_back_as_a_member():
    repo = (ROOT / "Cargo.toml").read_text()
    assert fb.with_linkem_member(repo) == repo  # already a member: unchanged
    # what `maturin sdist` writes: the extension's crates only
    sdist = repo.replace(', "crates/linkem"', "")
    assert "crates/linkem" not in tomllib.loads(sdist)["workspace"]["members"]
    fixed = tomllib.loads(fb.with_linkem_member(sdist))
    assert fixed["workspace"]["members"] == tomllib.loads(repo)["workspace"]["members"]
    multi_line = '[workspace]\nmembers = [\n    "crates/a",\n    "crates/b",\n]\n'
    assert tomllib.loads(fb.with_linkem_member(multi_line))["workspace"]["members"] == ["crates/a", "crates/b", "crates/linkem"]
    with pytest.raises(fb.BuildError):
        fb.with_linkem_member("[package]\nname = 'x'\n")


def test_build_wheel_stages_linkem_for_maturin_and_removes_it(tmp_path, monkeypatch):
    import maturin

    binary = tmp_path / "built-linkem"
    binary.write_bytes(b"\x7fELF not really")
    binary.chmod(0o644)
    root = tmp_path / "tree"
    monkeypatch.setattr(fb, "ROOT", root)
    monkeypatch.setattr(fb, "build_linkem", lambda r: binary)
    seen = {}

    def fake_maturin_build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        staged = root / fb.STAGED
        seen["bytes"] = staged.read_bytes()
        seen["mode"] = stat.S_IMODE(staged.stat().st_mode)
        return "fairlab-0.1.0-cp311-abi3-linux_x86_64.whl"

    monkeypatch.setattr(maturin, "build_wheel", fake_maturin_build_wheel)
    assert fb.build_wheel(str(tmp_path)) == "fairlab-0.1.0-cp311-abi3-linux_x86_64.whl"
    assert seen == {"bytes": b"\x7fELF not really", "mode": 0o755}
    assert not (root / fb.STAGED).exists() and not (root / fb.STAGED).parent.exists()

    def failing(*a, **k):
        raise SystemExit(1)

    monkeypatch.setattr(maturin, "build_wheel", failing)
    with pytest.raises(SystemExit):
        fb.build_wheel(str(tmp_path))
    assert not (root / fb.STAGED).exists()  # removed on failure too


def test_a_wheel_build_fails_loudly_without_cargo(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no cargo on PATH
    with pytest.raises(fb.BuildError, match="cargo"):
        fb.build_linkem(ROOT)


def test_the_live_backend_prefers_the_packaged_linkem(tmp_path, monkeypatch):
    from fairlab.backends.live import linkem_link

    # in a source checkout there is no packaged copy (build_wheel removes it)
    assert linkem_link.packaged_linkem() is None or (ROOT / fb.STAGED).is_file()
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
