"""The reporting interval read from a measurement: what -i was asked for, however
late a busy host's timers ran (a fresh two-client iperf3 recording on a loaded
2-core machine gave 1.001427 s and 0.998697 s for `-i 1`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.ingest import IngestError, load
from fairlab.ingest._common import INTERVAL_SNAP, nominal_interval

ASKED = [0.1, 0.2, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 0.125, 0.05]


@settings(max_examples=200, deadline=None)
@given(asked=st.sampled_from(ASKED), late=st.lists(st.floats(-0.4, 0.4), min_size=1, max_size=50))
def test_an_interval_that_ran_a_little_long_or_short_is_the_one_asked_for(asked, late):
    durations = [asked * (1 + x * INTERVAL_SNAP) for x in late]
    assert nominal_interval(durations) == asked


def test_an_interval_no_round_value_explains_is_kept_to_the_millisecond():
    assert nominal_interval([0.2371, 0.2372, 0.2373]) == 0.237  # 0.24 is 1.2 % away
    assert nominal_interval([]) is None and nominal_interval([0.0, -1.0, np.nan]) is None


def _iperf3_client(path, seconds: list[float], port: int, cca: str, t0: int):
    """A minimal iperf3 -J client log: one TCP stream, intervals of the given lengths."""
    intervals, t = [], 0.0
    for s in seconds:
        rec = {"socket": 5, "start": t, "end": t + s, "seconds": s, "bytes": int(12.5e6 * s),
               "bits_per_second": 100e6, "retransmits": 0, "snd_cwnd": 100000, "omitted": False, "sender": True}
        intervals.append({"streams": [rec], "sum": dict(rec)})
        t += s
    doc = {
        "start": {"connected": [{"socket": 5, "local_host": "10.0.0.1", "local_port": port,
                                 "remote_host": "10.0.0.2", "remote_port": 5201}],
                  "timestamp": {"timesecs": t0}, "tcp_mss_default": 1448,
                  "test_start": {"protocol": "TCP", "num_streams": 1, "omit": 0, "duration": len(seconds), "reverse": 0},
                  "congestion_used": cca},
        "intervals": intervals,
        "end": {"streams": [{"sender": {"socket": 5, "start": 0, "end": t, "seconds": t, "bytes": int(12.5e6 * t),
                                        "bits_per_second": 100e6, "retransmits": 0, "sender": True}}],
                "sender_tcp_congestion": cca},
    }
    path.write_text(json.dumps(doc))
    return path


def test_two_clients_whose_intervals_ran_differently_late_load_as_one_trace(tmp_path):
    a = _iperf3_client(tmp_path / "a.json", [1.000157, 0.999892, 1.00005, 1.000998], 40001, "cubic", 1_700_000_000)
    b = _iperf3_client(tmp_path / "b.json", [1.001427, 0.998697, 1.0014], 40002, "reno", 1_700_000_001)
    tr = load([a, b])
    assert len(tr.flows) == 2 and tr.meta["interval_s"] == 1.0


def test_files_recorded_with_different_intervals_are_still_refused(tmp_path):
    a = _iperf3_client(tmp_path / "a.json", [1.0] * 4, 40001, "cubic", 1_700_000_000)
    b = _iperf3_client(tmp_path / "b.json", [0.5] * 8, 40002, "reno", 1_700_000_001)
    with pytest.raises(IngestError, match="different intervals"):
        load([a, b])
