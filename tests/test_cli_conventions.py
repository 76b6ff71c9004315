"""Command-line conventions (issue 14 item 4): --version, completion, python -m,
--json documents, --set overrides, plan PRESET, title/description, progress in logs,
repeatable options and `live doctor`'s exit code."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from cli_helpers import fairlab as cli
from fairlab.trace import Trace

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"

SCEN = """
name = "conv"
title = "Reno against CUBIC"
description = "two flows, 10 Mbit/s"
duration = "6s"
seed = 3

[bottleneck]
rate = "10Mbit"

[[flows]]
cca = "reno"
rtt = "20ms"

[[flows]]
cca = "cubic"
rtt = "40ms"
"""


def scenario(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SCEN + extra)
    return p


def one_error_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    return " ".join(lines)


# ------------------------------------------------------------------ version, python -m, completion
def test_version_is_the_workspace_version_and_python_m_works():
    want = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"fairlab {want}"
    r = subprocess.run([sys.executable, "-m", "fairlab", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"fairlab {want}"
    r = subprocess.run([sys.executable, "-m", "fairlab", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "Usage: fairlab" in r.stdout  # not "__main__.py"


def test_shell_completion_completes_commands_and_subcommands():
    env = {**os.environ, "_FAIRLAB_COMPLETE": "complete_bash", "COMP_WORDS": "fairlab li", "COMP_CWORD": "1"}
    r = subprocess.run([sys.executable, "-m", "fairlab"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and set(r.stdout.split()) == {"list", "live"}
    env.update(COMP_WORDS="fairlab list ", COMP_CWORD="2")
    r = subprocess.run([sys.executable, "-m", "fairlab"], capture_output=True, text=True, env=env)
    assert set(r.stdout.split()) == {"ccas", "qdiscs", "presets"}
    r = cli("--show-completion", "bash")
    assert r.returncode == 0 and "_FAIRLAB_COMPLETE" in r.stdout


@pytest.mark.parametrize("command", [(), ("run",), ("plan",), ("query",), ("list", "ccas"), ("live", "cleanup"), ("vm", "build")])
def test_help_gives_flags_no_value_type(command):
    # A flag takes no value; typer's rich help printed "--json <bool>" (and "--help
    # <bool>"), as if `--json true` were the syntax. Options that take a value keep
    # their type.
    r = cli(*command, "--help")
    assert r.returncode == 0, r.stderr
    assert "<bool>" not in r.stdout
    flag = {(): "--version", ("query",): "--csv", ("live", "cleanup"): "--dry-run", ("vm", "build"): "--force"}.get(command, "--json")
    line = next(ln for ln in r.stdout.splitlines() if f" {flag} " in ln)
    assert line.split(flag, 1)[1].split()[0] != "<bool>"
    if command == ("run",):
        assert any(" --seed " in ln and "<int>" in ln for ln in r.stdout.splitlines())


@pytest.mark.parametrize("command", [(), ("run",), ("list", "ccas"), ("vm",), ("vm", "build")])
def test_the_app_invoked_directly_prints_the_help_fairlab_prints(command):
    # The help was tidied in `main` only, so the app run by typer's CliRunner (as
    # tests and notebooks do) still printed "--json <bool>" and the docstrings' breaks.
    from typer.testing import CliRunner

    from fairlab.cli import app

    env = {"COLUMNS": "240"}
    direct = CliRunner().invoke(app, [*command, "--help"], env=env)
    assert direct.exit_code == 0, direct.output
    assert "<bool>" not in direct.output
    assert direct.output == cli(*command, "--help", env={**os.environ, **env}).stdout


@pytest.mark.parametrize("command", [(), ("vm",)])
def test_the_command_list_flows_each_summary_as_one_paragraph(command):
    # Typer kept the docstrings' own line breaks in the command list, so a summary
    # broke where its source wrapped ("… in a VM;" / "write the Trace …"). On a wide
    # terminal each command's summary is now one line of the table.
    from cli_helpers import FAIRLAB_CLI

    r = subprocess.run([*FAIRLAB_CLI, *command, "--help"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "240"})
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("│ ") and "  " in ln.strip("│ ")]
    names = {(): ("run", "compare", "validate", "vm"), ("vm",): ("build", "doctor")}[command]
    for name in names:
        row = next(ln for ln in rows if ln.startswith(f"│ {name} "))
        nxt = rows[rows.index(row) + 1] if rows.index(row) + 1 < len(rows) else "│ x"
        assert not nxt.startswith("│  "), f"{name}'s summary continues on a second line:\n{row}\n{nxt}"
    if command == ():
        assert any("on a real kernel in a VM; write the Trace and print the analysis." in ln for ln in rows)


def test_flags_still_parse_after_their_help_lost_the_value_type():
    r = cli("list", "ccas", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)
    r = cli("list", "ccas", "--json", "true")
    assert r.returncode == 2  # a flag takes no value, as before


# ------------------------------------------------------------------ repeatable options
def test_option_values_that_start_with_a_dash_are_values(tmp_path):
    r = cli("analyze", DATA / "ms_clients_cubic.json", "--label", "-x", "--json")
    assert r.returncode == 0, r.stderr
    assert [f["label"] for f in json.loads(r.stdout)["flows"]] == ["-x"]
    # a calibration file whose name starts with "-"
    (tmp_path / "-cal.json").write_bytes((DATA / "ms_clients_cubic.json").read_bytes())
    r = subprocess.run([*cli_argv(), "analyze", str(DATA / "ms_clients_cubic.json"), "--calibration", "-cal.json", "--json"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dashed = json.loads(r.stdout)["nru"]
    plain = json.loads(cli("analyze", DATA / "ms_clients_cubic.json", "--calibration", DATA / "ms_clients_cubic.json", "--json").stdout)["nru"]
    assert dashed["flows"][0]["expected_bps"] == plain["flows"][0]["expected_bps"] > 0
    assert dashed["flows"][0]["u_db"] == plain["flows"][0]["u_db"]


def test_repeated_calibration_options_and_the_old_spelling_is_refused():
    a, b = DATA / "ms_clients_cubic.json", DATA / "ms_clients_reno.json"
    r = cli("analyze", a, "--calibration", a, "--calibration", b, "--json")
    assert r.returncode == 0, r.stderr
    r = cli("analyze", a, "--calibration", a, b)
    msg = one_error_line(r)
    assert "repeat the option" in msg and str(b) in msg


def cli_argv() -> list[str]:
    from cli_helpers import FAIRLAB_CLI

    return list(FAIRLAB_CLI)


# ------------------------------------------------------------------ --set
def test_set_overrides_fields_with_units_and_indices(tmp_path):
    s = scenario(tmp_path)
    r = cli("run", s, "--out", tmp_path / "o", "--json", "--set", "bottleneck.rate=20Mbit", "--set", "flows[1].cca=bbr",
            "--set", "duration=4s", "--set", 'description="changed"')
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [f["cca"] for f in doc["flows"]] == ["reno", "bbr"]
    assert doc["title"] == "Reno against CUBIC" and doc["description"] == "changed"
    tr = Trace.from_parquet(doc["trace"])
    resolved = tr.meta["resolved_scenario"]
    assert resolved["bottleneck"]["rate_bps"] == 20_000_000 and resolved["duration_ns"] == 4_000_000_000
    assert tr.meta["title"] == "Reno against CUBIC" and tr.meta["description"] == "changed"


def test_set_every_flow_and_numbers(tmp_path):
    r = cli("plan", scenario(tmp_path), "--json", "--set", "flows[*].rtt=80ms", "--set", "runs=3")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["counts"] == {"conditions": 1, "main": 3, "calibration": 0, "solo": 0, "total": 3}
    assert [t["run_index"] for t in doc["runs"]] == [0, 1, 2]


@pytest.mark.parametrize("assignment,words", [
    ("bottleneck.rat=20Mbit", ["bottleneck has no field 'rat'", "rate", "buffer", "qdisc"]),
    ("speed=1", ["the scenario has no field 'speed'", "duration", "flows", "title"]),
    ("flows[2].cca=bbr", ["flows has 2 entries", "index 2 does not exist"]),
    ("duration=60", ["with --set duration=60", "duration", "has no unit"]),
    ("bottleneck.rate", ["must be PATH=VALUE"]),
])
def test_bad_set_is_one_sentence(tmp_path, assignment, words):
    msg = one_error_line(cli("run", scenario(tmp_path), "--out", tmp_path / "o", "--set", assignment))
    for w in words:
        assert w in msg
    assert not (tmp_path / "o").exists()


def test_set_of_a_swept_path_is_refused(tmp_path):
    s = scenario(tmp_path, '\n[sweep]\n"flows[*].rtt" = ["20ms", "40ms"]\n')
    msg = one_error_line(cli("plan", s, "--set", "flows[0].rtt=10ms"))
    assert "the [sweep] sets flows[0].rtt as well" in msg
    r = cli("plan", s, "--json", "--set", "bottleneck.rate=5Mbit")  # not swept: fine
    assert r.returncode == 0 and json.loads(r.stdout)["counts"]["main"] == 2


# ------------------------------------------------------------------ plan PRESET, list --json
def test_plan_takes_a_preset_name():
    r = cli("plan", "bhatti2008-dccp", "--quick", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    preset = tomllib.loads((ROOT / "python/fairlab/presets/bhatti2008-dccp.toml").read_text())
    other_axes = [v for k, v in preset["sweep"].items() if k not in ("flows[*].rtt", "mode")]
    n_other = 1
    for v in other_axes:
        n_other *= len(v)
    # --quick: 3 RTTs and 2 runs (presets/__init__.py quick table)
    assert doc["counts"]["conditions"] == 3 * n_other and doc["counts"]["main"] == 2 * 3 * n_other
    assert doc["name"] == preset["name"] + "-quick" and doc["notes"] and "3 RTTs" in doc["notes"][0]
    msg = one_error_line(cli("plan", "no-such-preset"))
    assert "no such scenario file" in msg and "bhatti2008-dccp" in msg


def test_list_json():
    for what in ("ccas", "qdiscs", "presets"):
        r = cli("list", what, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["schema"] == 1 and all(item["name"] for item in doc[what])
    names = {c["name"] for c in json.loads(cli("list", "ccas", "--json").stdout)["ccas"]}
    assert {"reno", "cubic", "bbr", "ccid2"} <= names


# ------------------------------------------------------------------ campaign --json, query, report, progress
def test_campaign_json_query_report_and_plain_progress(tmp_path):
    s = tmp_path / "s.toml"
    s.write_text(SCEN.replace("seed = 3", "seed = 3\nruns = 2"))
    out = tmp_path / "camp"
    r = cli("run", s, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout holds the document and nothing else
    assert doc["kind"] == "campaign" and doc["runs"] == {"total": 2, "skipped": 0, "done": 2, "failed": 0}
    assert doc["title"] == "Reno against CUBIC" and doc["failures"] == []
    # stderr is not a terminal here: plain progress lines instead of a bar
    assert "2/2 runs finished (0 failed)" in r.stderr
    manifest = json.loads((out / "campaign.json").read_text())
    assert manifest["base"]["title"] == "Reno against CUBIC" and manifest["base"]["description"] == "two flows, 10 Mbit/s"
    for p in (out / "runs").glob("*.parquet"):
        assert Trace.from_parquet(p).meta["title"] == "Reno against CUBIC"

    r = cli("run", s, "--out", out, "--json")  # resumed: nothing to do
    assert json.loads(r.stdout)["runs"] == {"total": 2, "skipped": 2, "done": 0, "failed": 0}

    r = cli("query", out, "SELECT run_index, jain_mean_jt FROM runs ORDER BY run_index", "--json")
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)
    assert q["columns"] == ["run_index", "jain_mean_jt"] and [row["run_index"] for row in q["rows"]] == [0, 1]
    assert all(0 < row["jain_mean_jt"] <= 1 for row in q["rows"])
    r = cli("query", out, "SELECT 'nan'::DOUBLE AS x, NULL AS y", "--json")
    assert json.loads(r.stdout)["rows"] == [{"x": None, "y": None}]

    r = cli("report", out, "--json")
    assert r.returncode == 0, r.stderr
    paths = json.loads(r.stdout)["report"]
    assert Path(paths["markdown"]).is_file() and Path(paths["html"]).is_file()
    assert "writing the report" in r.stderr and "done in" in r.stderr


def test_plain_lines_per_step_and_per_interval():
    from fairlab.cli.progress import PlainLines

    buf = io.StringIO()
    con = Console(file=buf, width=200)
    with PlainLines(100, lambda d, t, e, f: f"{d:.0f}/{t:.0f}", console=con, every_s=3600) as p:
        for k in range(1, 101):
            p.update(k)
    assert buf.getvalue().split() == [f"{k}/100" for k in range(5, 101, 5)]  # a line per 5 %
    buf = io.StringIO()
    con = Console(file=buf, width=200)
    with PlainLines(100, lambda d, t, e, f: f"{d:.0f}", console=con, every_s=0.05) as p:
        p.update(1)
        time.sleep(0.4)  # nothing finishes, yet the log hears from us
    lines = buf.getvalue().split()
    assert len(lines) >= 3 and set(lines) == {"1"}


def test_a_long_single_run_reports_simulated_seconds_in_a_log(monkeypatch):
    from fairlab.cli import progress

    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)  # "a minute has passed" at once
    buf = io.StringIO()
    st = progress.SimulatedTime("xue", 300.0, console=Console(file=buf, width=200))
    for sim_s in (10.0, 20.0, 40.0, 150.0, 300.0):
        assert st(sim_s) is True  # never asks the engine to stop
    st.stop()
    lines = buf.getvalue().splitlines()
    # a line whenever another tenth of the run is simulated (30 s here), and at the end
    assert [ln.split(" ", 1)[1].split(" s simulated")[0] for ln in lines] == ["xue: 40/300", "xue: 150/300", "xue: 300/300"]


# ------------------------------------------------------------------ live doctor
def caps(**kw):
    from fairlab.backends.live.capabilities import Capabilities

    base = dict(root=True, kernel="6.1", iperf3="/usr/bin/iperf3", iperf3_version="3.12",
                tools={"ip": "/sbin/ip", "tc": "/sbin/tc"}, pyroute2="0.7", ccas=["reno", "cubic"],
                qdiscs={"netem": False, "tbf": True}, linkem="/x/linkem", linkem_how="installed with fairlab")
    base.update(kw)
    return Capabilities(**base)


def test_doctor_blockers():
    from fairlab.cli.live_cmd import blockers

    assert blockers(caps()) == []  # linkem path
    assert blockers(caps(linkem=None, qdiscs={"netem": True, "htb": True})) == []  # kernel path
    no_path = blockers(caps(linkem=None, linkem_how="not found (looked in …)"))
    assert len(no_path) == 1 and "no emulation path" in no_path[0] and "not found" in no_path[0]
    assert any("not root" in b for b in blockers(caps(root=False)))
    assert any("iperf3" in b for b in blockers(caps(iperf3=None)))


def test_doctor_exit_code_matches_its_verdict():
    r = subprocess.run([*cli_argv(), "live", "doctor", "--json"], capture_output=True, text=True,
                       env={**os.environ, "FAIRLAB_LINKEM": "/nonexistent/linkem"})
    doc = json.loads(r.stdout)
    assert doc["linkem"] is None
    assert r.returncode == (0 if doc["usable"] else 1) and doc["usable"] == (not doc["blockers"])


def test_cleanup_json_dry_run():
    r = cli("live", "cleanup", "--dry-run", "--json")
    doc = json.loads(r.stdout)
    assert doc["dry_run"] is True and set(doc) >= {"processes", "namespaces", "links", "left_running", "problems"}
    assert r.returncode == (1 if doc["problems"] else 0)


def test_reproduce_refuses_a_bad_set_before_running_anything(tmp_path):
    out = tmp_path / "never"
    msg = one_error_line(cli("reproduce", "bhatti2008-dccp", "--quick", "--out", out, "--set", "bottleneck.rat=1Gbit"))
    assert "bottleneck has no field 'rat'" in msg and not out.exists()
