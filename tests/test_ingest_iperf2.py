"""iperf2 ``-y C`` importer, checked against the raw CSV rows of real recordings."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairlab.ingest import IngestError, load

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "examples" / "recordings"
DATA = ROOT / "tests" / "data"


def rows(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines() if line.strip()]


def interval_rows(path: Path, stream_id: str) -> list[list[str]]:
    """Per-interval rows of one stream: the ID matches and the row is not the final
    0.0-T total (whose span is longer than the 1-s reporting interval)."""
    out = []
    for r in rows(path):
        if r[5] != stream_id:
            continue
        a, b = (float(x) for x in r[6].split("-"))
        if not (a == 0 and b - a > 1.5):
            out.append(r)
    return out


def test_client_file_one_flow_per_id_and_means_match_the_rows():
    p = REC / "iperf2_P2_client.csv"
    tr = load(p)
    ids = sorted({r[5] for r in rows(p)})
    assert ids == ["1", "2"]
    assert sorted(tr.flows["label"]) == ["iperf2_P2_client#1", "iperf2_P2_client#2"]
    for _, f in tr.flows.iterrows():
        sid = f["label"].split("#")[1]
        mine = interval_rows(p, sid)
        got = tr.samples.loc[tr.samples["flow"] == f["flow"]]
        assert len(got) == len(mine)
        assert got["throughput_bps"].mean() == pytest.approx(sum(float(r[8]) for r in mine) / len(mine), rel=1e-12)
        assert got["t"].tolist() == [float(r[6].split("-")[1]) for r in mine]
        total = [r for r in rows(p) if r[5] == sid and r[6].startswith("0.0-") and r not in mine]
        assert f["end_bps"] == float(total[-1][8])
    assert tr.meta["tool"] == "iperf2" and tr.meta["interval_s"] == 1.0


def test_sum_rows_are_not_flows_and_change_nothing():
    legacy = load(DATA / "iperf2_legacy_sum_rows.csv")
    n_sum = sum(1 for r in rows(DATA / "iperf2_legacy_sum_rows.csv") if r[5] == "-1")
    assert n_sum > 0
    assert len(legacy.flows) == 2
    assert any(f"skipped {n_sum} sum row(s)" in n for n in legacy.meta["notes"])
    # The legacy file is the first 12 rows of the real recording plus sum rows.
    full = load(REC / "iperf2_P2_client.csv")
    head = full.samples[full.samples["t"] <= 6.0].reset_index(drop=True)
    assert legacy.samples[["flow", "t", "throughput_bps"]].equals(head[["flow", "t", "throughput_bps"]])


def test_enhanced_csv_with_millisecond_stamps():
    p = DATA / "iperf2_P2_enhanced.csv"
    tr = load(p)
    assert len(tr.flows) == 2
    assert tr.meta["sources"][0]["epoch_s"] % 1 != 0  # the .mmm stamps are used
    assert tr.meta["alignment"]["method"] == "none (one file)"


def test_udp_rows_and_half_second_intervals():
    udp = load(DATA / "iperf2_udp.csv")
    assert udp.flows["protocol"].tolist() == ["UDP"]
    assert len(udp.samples) == 3
    half = load(DATA / "iperf2_i05.csv")
    assert half.meta["interval_s"] == 0.5
    assert half.samples["t"].tolist() == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]


def test_client_and_server_side_files_of_one_test_are_refused_together():
    """Both files list the connections 10.71.1.1:58482/58488 -> 10.71.2.1:5001: loaded
    together they used to give 4 flows out of 2 streams (issue 13: nothing counted
    twice). Each side alone loads, with whole-second alignment precision noted."""
    with pytest.raises(IngestError, match="same iperf2 connection 10.71.1.1:5848[28] -> 10.71.2.1:5001"):
        load([REC / "iperf2_P2_client.csv", REC / "iperf2_P2_server.csv"], labels=["cli", "srv"])
    for side in ("client", "server"):
        assert len(load(REC / f"iperf2_P2_{side}.csv").flows) == 2
    two = load([REC / "iperf2_P2_client.csv", DATA / "iperf2_P2_enhanced.csv"])
    assert len(two.flows) == 4 and two.meta["alignment"]["precision_s"] == 1.0


def test_different_intervals_are_refused():
    with pytest.raises(IngestError, match="different intervals"):
        load([REC / "iperf2_P2_client.csv", DATA / "iperf2_i05.csv"])


def test_cut_row_and_garbage_field_are_refused_with_the_line(tmp_path):
    text = (REC / "iperf2_P2_client.csv").read_text()
    lines = text.splitlines()
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:5]) + "\n" + lines[5][:30])
    with pytest.raises(IngestError, match="line 6") as ei:
        load(cut)
    assert str(cut) in str(ei.value) and "\n" not in str(ei.value)
    bad = tmp_path / "bad.csv"
    fields = lines[3].split(",")
    fields[8] = "12x"
    bad.write_text("\n".join(lines[:3] + [",".join(fields)] + lines[4:]) + "\n")
    with pytest.raises(IngestError, match=r"line 4, field 'bits_per_second'"):
        load(bad)
