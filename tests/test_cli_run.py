"""`fairlab run` and `fairlab list` from the command line, as a user meets them."""

import json

import pandas as pd
import pytest

import fairlab
from cli_helpers import fairlab as cli
from fairlab.scenario import Scenario

SCEN = """
name = "tiny"
duration = "20s"
window = ["5s", "20s"]
seed = 4

[bottleneck]
rate = "20Mbit"
buffer = "100%bdp"

[[flows]]
cca = "{cca}"
rtt = "30ms"

[[flows]]
cca = "reno"
rtt = "30ms"
start = "2s"
"""


def test_run_writes_a_trace_and_prints_the_analyze_json(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(SCEN.format(cca="cubic"))
    r = cli("run", f, "--out", tmp_path / "o", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["window"] == [5.0, 20.0]
    assert [x["label"] for x in doc["flows"]] == ["cubic", "reno"]
    # both flows share a 20 Mbit/s link: together they cannot exceed it
    total = sum(x["mean_bps"] for x in doc["flows"])
    assert 0.85 * 20e6 < total <= 20e6
    tr = fairlab.Trace.from_parquet(doc["trace"])
    assert tr.meta["seed"] == 4 and tr.bottleneck is not None
    # the analyze command on the written trace gives the same numbers
    again = json.loads(cli("analyze", doc["trace"], "--json", "--window", "5:20").stdout)
    assert again["jain"] == doc["jain"]


def test_unknown_cca_is_one_sentence_with_the_known_names(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(SCEN.format(cca="turbo"))
    r = cli("run", f, "--out", tmp_path / "o")
    assert r.returncode == 2
    assert "turbo" in r.stderr and "known:" in r.stderr and "cubic" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("cca", "qdisc", "field", "suggested", "listing"), [
    ("renoo", "droptail", "flows[0].cca", "reno", "ccas"),
    ("reno", "dropail", "bottleneck.qdisc", "droptail", "qdiscs"),
    ("reno", "fq-codel", "bottleneck.qdisc", "fq_codel", "qdiscs"),
])
def test_a_misspelt_cca_or_qdisc_gets_the_closest_name_and_the_sorted_list(tmp_path, cca, qdisc, field, suggested, listing):
    f = tmp_path / "s.toml"
    f.write_text(SCEN.format(cca=cca).replace('buffer = "100%bdp"', f'buffer = "100%bdp"\nqdisc = "{qdisc}"'))
    r = cli("run", f, "--out", tmp_path / "o")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    msg = " ".join(r.stderr.split())
    wrong = qdisc if listing == "qdiscs" else cca
    assert f"field `{field}`" in msg and f"{wrong!r} (did you mean {suggested!r}?)" in msg
    known = msg.split("known: ")[1].split(" (`fairlab list")[0].split(", ")
    assert known == sorted(known) and suggested in known
    assert f"(`fairlab list {listing}`)" in msg


def test_list_ccas_and_qdiscs_print_the_name_tables():
    r = cli("list", "ccas")
    assert r.returncode == 0
    for name in ("reno", "cubic", "bic", "highspeed", "htcp", "scalable", "vegas", "westwood", "hybla", "illinois", "lp", "veno", "yeah", "compound", "bbr", "ccid2"):
        assert name in r.stdout
    r = cli("list", "qdiscs")
    for name in ("droptail", "red", "choke", "blue", "codel", "fq_codel", "pie", "zrtt", "mrtt", "prto", "csfq"):
        assert name in r.stdout


def test_same_seed_same_trace_other_seed_other_trace():
    s = Scenario.from_dict({"name": "d", "duration": "15s", "bottleneck": {"rate": "10Mbit"}, "flows": [{"cca": "cubic", "rtt": "40ms"}, {"cca": "reno", "rtt": "40ms"}]})
    a, b, c = fairlab.simulate(s, seed=1), fairlab.simulate(s, seed=1), fairlab.simulate(s, seed=2)
    pd.testing.assert_frame_equal(a.samples, b.samples)
    pd.testing.assert_frame_equal(a.bottleneck, b.bottleneck)
    assert not a.samples["throughput_bps"].equals(c.samples["throughput_bps"])


def test_simulated_bytes_are_conserved_per_flow():
    s = Scenario.from_dict({"name": "c", "duration": "20s", "bottleneck": {"rate": "10Mbit", "buffer": "20%bdp"}, "flows": [{"cca": "cubic", "rtt": "40ms"}, {"cca": "reno", "rtt": "80ms"}]})
    tr = fairlab.simulate(s)
    for ft in tr.meta["flow_totals"]:
        assert ft["bytes_sent"] == ft["bytes_delivered"] + ft["bytes_dropped"] + ft["bytes_in_flight"]
    # what the receivers' applications got equals the goodput samples integrated over time
    app = sum(ft["app_bytes"] for ft in tr.meta["flow_totals"])
    integrated = (tr.samples["throughput_bps"] * tr.meta["interval_s"] / 8).sum()
    assert integrated == pytest.approx(app, rel=0.01)


def test_one_run_of_a_pair_says_it_stands_for_one_seed_only(tmp_path):
    # A single run of flows sharing a queue can split either way with another seed;
    # the table alone invites quoting it. One flow has nothing to split.
    f = tmp_path / "s.toml"
    f.write_text(SCEN.format(cca="cubic"))
    r = cli("run", f, "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "one run: flows that share a queue can split differently with another seed" in r.stdout
    solo = SCEN.format(cca="cubic").split("[[flows]]")
    f.write_text(solo[0] + "[[flows]]" + solo[1])
    r = cli("run", f, "--out", tmp_path / "o1")
    assert r.returncode == 0, r.stderr
    assert "one run:" not in r.stdout
