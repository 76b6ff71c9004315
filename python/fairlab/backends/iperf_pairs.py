"""A flow measured at both ends: the receiver's throughput, the sender's TCP state.

iperf3 writes one JSON file per end. Per interval, the SENDER's file counts the bytes
the application wrote into its socket — not what crossed the bottleneck: in a flow's
first interval and around losses it exceeds the link rate (measured on the vm backend:
12.8 Mbit/s on a 10 Mbit/s link). The RECEIVER's file counts what was delivered. So a
backend that has both takes throughput from the receiver and cwnd, sRTT and
retransmits (which only the sender knows) from the sender's interval with the same
index, keeping the sender's own count as ``sent_bps``. The live and vm backends both
do this.
"""

from __future__ import annotations

import pandas as pd

from ..trace import Trace

SENDER_COLUMNS = ("cwnd_bytes", "srtt_s", "rttvar_s", "retransmits")


def receiver_samples(rx: Trace, tx: Trace | None, interval_s: float) -> pd.DataFrame:
    """Columns t (seconds from the receiver's own test start, end of interval),
    throughput_bps (received) and, with ``tx``, the sender's columns of the same
    interval index plus ``sent_bps``. ``rx`` and ``tx`` each hold one flow."""
    r = rx.samples[["t", "throughput_bps"]].copy()
    r["t"] = r["t"] - float(rx.flows.iloc[0]["start_s"])
    r["k"] = (r["t"] / interval_s).round().astype(int)
    if tx is None:
        return r.drop(columns="k")
    cols = [c for c in SENDER_COLUMNS if c in tx.samples]
    t = tx.samples[["t", "throughput_bps", *cols]].rename(columns={"throughput_bps": "sent_bps"}).copy()
    t["k"] = ((t["t"] - float(tx.flows.iloc[0]["start_s"])) / interval_s).round().astype(int)
    return r.merge(t.drop(columns="t"), on="k", how="left").drop(columns="k")
