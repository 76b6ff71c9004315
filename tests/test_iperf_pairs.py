"""Receiver-side throughput with the sender's TCP state (backends/iperf_pairs.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from fairlab.backends.iperf_pairs import receiver_samples
from fairlab.trace import Trace


def _trace(ts: list[float], bps: list[float], start: float, **cols: list) -> Trace:
    s = pd.DataFrame({"run": 0, "flow": 0, "t": ts, "throughput_bps": bps, **cols})
    return Trace.from_frames(s, pd.DataFrame({"flow": [0], "label": ["f"], "start_s": [start]}), None, {"interval_s": 1.0})


def test_throughput_is_the_receivers_and_tcp_state_the_senders_of_the_same_interval():
    # Sender stamps run 0.2 ms behind the receiver's (another process, another file);
    # its first interval counts 12.8 Mbit/s written into the socket on a 10 Mbit/s link.
    rx = _trace([5.0, 6.0, 7.0], [8e6, 9.5e6, 9.9e6], start=4.0)
    tx = _trace([3.0002, 4.0002, 5.0002], [12.8e6, 9e6, 9.6e6], start=2.0002,
                cwnd_bytes=[1e5, 2e5, 3e5], srtt_s=[0.05, 0.06, 0.07], retransmits=[0, 2, 1])
    out = receiver_samples(rx, tx, 1.0)
    assert list(out["t"]) == [1.0, 2.0, 3.0]  # from the receiver's own test start
    assert list(out["throughput_bps"]) == [8e6, 9.5e6, 9.9e6]
    assert list(out["sent_bps"]) == [12.8e6, 9e6, 9.6e6]
    assert list(out["cwnd_bytes"]) == [1e5, 2e5, 3e5] and list(out["retransmits"]) == [0, 2, 1]


def test_a_receiver_interval_the_sender_lacks_keeps_its_throughput_with_no_state():
    rx = _trace([1.0, 2.0, 3.0], [1e6, 2e6, 3e6], start=0.0)
    tx = _trace([1.0, 2.0], [1e6, 2e6], start=0.0, cwnd_bytes=[1e4, 2e4])
    out = receiver_samples(rx, tx, 1.0)
    assert list(out["throughput_bps"]) == [1e6, 2e6, 3e6]
    assert out["cwnd_bytes"].iloc[2] != out["cwnd_bytes"].iloc[2]  # NaN: absent, never 0


def test_without_a_sender_file_only_throughput_remains():
    out = receiver_samples(_trace([1.5, 2.5], [4e6, 5e6], start=0.5), None, 1.0)
    assert list(out.columns) == ["t", "throughput_bps"] and list(out["t"]) == pytest.approx([1.0, 2.0])
