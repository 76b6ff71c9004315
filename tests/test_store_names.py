"""A scenario's `name` never steers where fairlab writes: `fairlab run` writes only
inside `--out` (or `out/`), whatever the name says. Before: `name = "../../escaped"`
wrote outside `--out` and an absolute name wrote anywhere (as root)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from typer.testing import CliRunner

from fairlab.campaign.paths import MAX_SLUG_BYTES, slug
from fairlab.cli import app


def fairlab(*args, cwd):
    """`fairlab ARGS` in this process (a fresh interpreter per name would take
    seconds each), from the working directory ``cwd``."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(old)

SCENARIO = """name = {name}
duration = "3s"
[bottleneck]
rate = "10Mbit"
buffer = "100%bdp"
[[flows]]
cca = "reno"
rtt = "20ms"
"""

HOSTILE = {
    "dotdot": "..",
    "escape": "../../escaped",
    "absolute": "/tmp/fairlab-absolute-escape",
    "nul": "a\u0000b",
    "long": "x" * 300,  # > 255 bytes: too long for a file name
    "dots": "....",
    "separators": "a/b\\c",
    "hidden": ".bashrc",
}


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def toml_string(s: str) -> str:
    """A TOML basic string (escapes NUL and backslashes)."""
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 32 or c in '"\\' else c for c in s) + '"'


def test_hostile_names_write_only_inside_out(tmp_path):
    sandbox = tmp_path / "sandbox"
    work = sandbox / "work"
    work.mkdir(parents=True)
    for tag, name in HOSTILE.items():
        spec = work / f"{tag}.toml"
        spec.write_text(SCENARIO.format(name=toml_string(name)))
        out = work / "out" / tag
        before = files_under(sandbox)
        r = fairlab("run", spec, "--out", out, cwd=work)
        assert r.exit_code == 0, (tag, r.output)
        new = files_under(sandbox) - before
        assert len(new) == 1, (tag, new)
        (written,) = new
        # independent of fairlab: the new file's real path lies directly in --out
        assert written.resolve().parent == out.resolve(), (tag, written)
        assert len(written.name.encode()) <= 255 and not written.name.startswith(".")
        assert "\x00" not in str(written)
    assert not os.path.exists("/tmp/fairlab-absolute-escape.parquet")
    assert not (tmp_path / "escaped.parquet").exists()


def test_the_default_out_directory_is_a_slug_inside_out(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SCENARIO.format(name=toml_string("../../escaped")))
    r = fairlab("run", spec, cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / "escaped" / "escaped.parquet").exists()
    assert not (tmp_path.parent / "escaped").exists()


def test_ordinary_names_are_kept():
    assert slug("xue-10g-aqm-quick") == "xue-10g-aqm-quick"
    assert slug("ccid2_vs_cubic.v2") == "ccid2_vs_cubic.v2"
    assert slug("CCID2 vs CUBIC (100 ms)") == "CCID2-vs-CUBIC-100-ms"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=400))
def test_any_name_gives_one_safe_path_component(name):
    s = slug(name)
    assert s and s not in (".", "..") and not s.startswith((".", "-"))
    assert "/" not in s and "\\" not in s and "\x00" not in s
    assert len(s.encode()) <= MAX_SLUG_BYTES
    base = Path("/srv/out")
    assert (base / s).resolve().parent == base


def test_long_names_sharing_a_prefix_stay_apart():
    a, b = "p" * 200 + "a", "p" * 200 + "b"
    assert slug(a) != slug(b)
