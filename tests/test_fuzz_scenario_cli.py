"""Hostile input for the scenario loader and the command-line options (issue 13
item 2). A scenario is either valid — and then resolves into a document the engine
can take without dividing by zero or allocating beyond the documented bounds — or
refused with a ScenarioError naming the file and field. `fairlab analyze` with any
option values exits 0 or 2, and on 2 prints one sentence, never a traceback.
Profiles and the oracle: tests/fuzz_support.py."""

from __future__ import annotations

import io
import math
import sys
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from fuzz_support import FUZZ, FUZZ_SLOW, count, time_limit
from hypothesis import given
from hypothesis import strategies as st

from fairlab.scenario import Scenario, ScenarioError
from fairlab.scenario.model import MAX_SAMPLES
from fairlab.scenario.units import MAX_RATE_BPS

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "examples" / "recordings"

NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30))
UNIT_WORD = st.sampled_from(["bit", "Mbit", "mbit", "mbps", "Mbps", "MB/s", "Gbit", "Tbit", "kbit", "ns", "us",
                             "ms", "s", "min", "h", "B", "KB", "MB", "GiB", "%bdp", "p", "pkts", "", "Mb/s", "bps"])
HUMAN = st.builds(lambda n, u, sp: f"{n!r}{' ' if sp else ''}{u}", NUMBER, UNIT_WORD, st.booleans())
VALUE = st.one_of(HUMAN, NUMBER, st.text(max_size=12), st.booleans(), st.none(), st.lists(HUMAN, max_size=3))

BASE = {"name": "fz", "duration": "10s", "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
        "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "40ms", "start": "1s"}]}
FIELDS = [("duration",), ("interval",), ("window",), ("seed",), ("runs",), ("access_rate",), ("name",),
          ("bottleneck", "rate"), ("bottleneck", "buffer"), ("bottleneck", "buffer_rtt"), ("bottleneck", "qdisc"),
          ("bottleneck", "loss_rate"), ("variation", "start_jitter"), ("variation", "host_jitter"),
          ("analysis", "uc"), ("analysis", "epoch"), ("analysis", "hold"),
          ("flows", 0, "rtt"), ("flows", 0, "start"), ("flows", 0, "stop"), ("flows", 0, "bytes"),
          ("flows", 0, "count"), ("flows", 0, "mss"), ("flows", 1, "rwnd"), ("flows", 1, "initial_cwnd"),
          ("flows", 1, "cca"), ("flows", 1, "label")]


def set_path(doc, path, value):
    node = doc
    for p in path[:-1]:
        if isinstance(p, str):
            node = node.setdefault(p, {})
        else:
            node = node[p]
    node[path[-1]] = value


@FUZZ
@given(data=st.data())
def test_scenario_with_hostile_values_is_valid_or_refused_naming_the_field(data):
    count("scenario loader")
    import copy

    doc = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 3))):
        set_path(doc, data.draw(st.sampled_from(FIELDS)), data.draw(VALUE))
    with time_limit():
        try:
            sc = Scenario.from_dict(doc, source="fz.toml")
        except ScenarioError as exc:
            first = str(exc).splitlines()[0]
            assert first.startswith("fz.toml: field `"), first
            assert "Traceback" not in str(exc)
            return
        resolved = sc.resolve()
    # Valid: what the engine receives is within the documented bounds.
    b = resolved["bottleneck"]
    assert 1 <= b["rate_bps"] <= MAX_RATE_BPS
    assert resolved["access_rate_bps"] >= 1
    assert resolved["host_jitter_ns"] >= 0
    assert b["reference_rtt_ns"] > 0
    n_flows = len(resolved["flows"])
    assert n_flows * (resolved["duration_ns"] // resolved["interval_ns"]) <= MAX_SAMPLES
    assert all(isinstance(v, int) for v in b["buffer"].values())


@FUZZ
@given(text=st.text(max_size=400))
def test_scenario_toml_text_is_valid_or_refused(text, tmp_path_factory):
    count("scenario TOML text")
    from fairlab.scenario import load_scenario

    p = tmp_path_factory.mktemp("sc") / "s.toml"
    p.write_text('name = "t"\nduration = "5s"\n[bottleneck]\nrate = "1Mbit"\n' + text + "\n[[flows]]\ncca = \"reno\"\nrtt = \"10ms\"\n",
                 encoding="utf-8", errors="surrogatepass")
    try:
        load_scenario(p)
    except ScenarioError as exc:
        assert str(exc).startswith(str(p))
    except tomllib.TOMLDecodeError:  # pragma: no cover - read_toml turns it into ScenarioError
        raise


# --------------------------------------------------------------------- CLI options
def run_cli(args: list[str]) -> tuple[int, str, str]:
    """`fairlab ARGS` in this process: (exit code, stdout, stderr)."""
    from fairlab.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["fairlab", *args]
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err), time_limit():
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    return code, out.getvalue(), err.getvalue()


OPTION_VALUE = st.one_of(st.sampled_from(["-1", "5", "0", "nan", "inf", "-inf", "1e999", "abc", "", "60:", ":5",
                                          "5:1", "1:2:3", "GBps", "Mbps", "mbps", "MBps", "x=1", "two_clients_reno.json=nan",
                                          "two_clients_reno.json=1e9", "two_clients_reno.json=-3", "9" * 50]),
                         st.floats().map(repr), st.integers(-(10**20), 10**20).map(str),
                         st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                                 max_size=10))
OPTIONS = ["--window", "--uc", "--epoch", "--hold", "--unit", "--run", "--label", "--offset"]


@FUZZ_SLOW
@given(data=st.data())
def test_analyze_options_exit_0_or_2_with_one_sentence(data, tmp_path_factory):
    count("CLI analyze options")
    files = [str(REC / "two_clients_cubic.json"), str(REC / "two_clients_reno.json")]
    args = ["analyze", *files[: data.draw(st.integers(1, 2))], "--json"]
    for _ in range(data.draw(st.integers(1, 3))):
        opt = data.draw(st.sampled_from(OPTIONS))
        args += [opt, data.draw(OPTION_VALUE)]
    code, out, err = run_cli(args)
    assert code in (0, 2), (args, code, err[-500:])
    assert "Traceback" not in out + err
    if code == 2:
        msg = " ".join(err.split())
        assert msg.startswith("error:") or "Usage:" in err, err
    else:
        import json

        doc = json.loads(out)  # --json must be valid JSON (no NaN/Infinity)
        assert doc["schema"] == 1


@pytest.mark.parametrize("args, fragment", [
    (["--uc", "5"], "--uc 5 is outside the allowed range"),
    (["--uc", "nan"], "--uc nan is outside"),
    (["--epoch", "-1"], "--epoch -1 is not a time"),
    (["--plot", "README.md"], "exists and is not a directory"),
    (["--offset", "nope.json=1"], "is none of the analysed files"),
])
def test_out_of_range_options_are_refused(args, fragment):
    code, out, err = run_cli(["analyze", str(REC / "two_clients_cubic.json"), *args])
    assert code == 2
    msg = " ".join(err.split())
    assert fragment.lower() in msg.lower() or fragment in msg, msg
    assert "Traceback" not in err
    assert math.isfinite(code)


def test_unit_option_is_case_exact(tmp_path):
    """--unit GBps is gigaBYTES per second: 1 GBps = 8 Gbit/s (it was read as 1 Gbit/s);
    --unit gbps is refused with the two spellings that exist."""
    import json

    p = tmp_path / "t.csv"
    p.write_text("time,flow,throughput\n1,a,1\n2,a,1\n1,b,0.5\n2,b,0.5\n")
    code, out, err = run_cli(["analyze", str(p), "--unit", "GBps", "--json"])
    assert code == 0, err
    means = [f["mean_bps"] for f in json.loads(out)["flows"]]
    assert means == [8e9, 4e9]
    code, out, err = run_cli(["analyze", str(p), "--unit", "gbps"])
    assert code == 2 and "'Gbps' or 'GBps'" in err


def test_a_full_disk_while_plotting_is_one_sentence(tmp_path, monkeypatch):
    import errno

    import fairlab.report.plots as plots

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plots, "plot_analysis", full)
    code, out, err = run_cli(["analyze", str(REC / "two_clients_cubic.json"), "--plot", str(tmp_path / "figs")])
    assert code == 2 and "No space left on device" in err and "Traceback" not in err
