"""The catalog: what a campaign found, as tables any tool can read.

Two kinds of table (docs/campaigns.md lists every column):

- the runs' own data, read where it lies: ``samples``, ``flows`` and ``bottleneck``
  are DuckDB views over ``runs/*/<table>.parquet`` (nothing is copied);
- derived tables, one Parquet file each under ``catalog/``: ``runs`` (one row per
  run: kind, condition, seed, the set-up as numbers — ``rate_bps``, ``buffer_bdp``,
  ``rtt_ms`` … — one column per sweep axis, Jain's index, utilisation, NRU and
  harm), ``summaries`` (one row per run and flow) and ``conditions`` (one row per
  sweep point, over its runs).

``catalog.duckdb`` holds the same views (absolute paths, rewritten at each build),
so ``duckdb out/c/catalog.duckdb`` works too; `connect` makes them in memory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..scenario import Scenario
from ..trace import BOTTLENECK_COLUMNS, FLOW_COLUMNS, SAMPLE_COLUMNS, Trace, is_sorted_by
from .plan import apply_point, canonical_json, is_grouped_axis
from .store import TABLES, Store, StoreError
from .stored_run import StoredRun

DERIVED = ("runs", "summaries", "conditions")
#: Every table and view `fairlab query` offers.
ALL_TABLES = (*DERIVED, *TABLES)
#: Bytes a buffer given in packets is counted at per packet: the largest flow's MSS
#: plus 52 bytes of TCP/IP headers with timestamps (as the live backend's MTU).
HEADER_BYTES = 52

_DUCK_TYPES = {"int64": "BIGINT", "Int64": "BIGINT", "float64": "DOUBLE", "string": "VARCHAR"}
_STANDARD = {"samples": SAMPLE_COLUMNS, "flows": FLOW_COLUMNS, "bottleneck": BOTTLENECK_COLUMNS}
_PATH_PART = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(\[(?P<idx>\*|\d+)\])?$")


# ----------------------------------------------------------------- set-up as numbers
def setup_columns(model: Scenario, resolved: dict[str, Any]) -> dict[str, Any]:
    """The run's set-up as plain numbers (SI units in the column name)."""
    b = resolved["bottleneck"]
    rate = float(b["rate_bps"])
    bdp = rate * float(b["reference_rtt_ns"]) / 8e9
    buf = b["buffer"]
    per_packet = max(int(f["mss"]) for f in resolved["flows"]) + HEADER_BYTES
    buf_bytes = float(buf["bytes"]) if "bytes" in buf else float(buf["packets"]) * per_packet
    rtts = [f["rtt_ns"] / 1e6 for f in resolved["flows"]]
    window = model.window
    return {
        "rate_bps": rate,
        "buffer_bytes": buf_bytes,
        "buffer_packets": float(buf["packets"]) if "packets" in buf else None,
        "buffer_bdp": buf_bytes / bdp if bdp > 0 else None,
        "qdisc": b["qdisc"],
        "duration_s": resolved["duration_ns"] / 1e9,
        "interval_s": resolved["interval_ns"] / 1e9,
        "window_start_s": None if window is None else window[0] / 1e9,
        "window_end_s": None if window is None else window[1] / 1e9,
        "n_flows": len(resolved["flows"]),
        "ccas": "/".join(f["cca"] for f in resolved["flows"]),
        "rtt_ms": rtts[0] if len(set(rtts)) == 1 else None,
        "rtt_min_ms": min(rtts),
        "rtt_max_ms": max(rtts),
    }


def _first_expanded(model: Scenario, entry: int) -> int:
    """Index in the resolved (count-expanded) flow list of file entry ``entry``'s first flow."""
    return sum(f.count for f in model.flows[:entry])


def sweep_columns(point: dict[str, Any], model: Scenario, resolved: dict[str, Any]) -> dict[str, Any]:
    """One column per sweep axis, numeric where the value is a quantity: the value
    as the run used it (resolved), not the text of the campaign file. ``flows[*].rtt``
    → ``rtt_ms``; ``flows[1].rtt`` → ``flow1_rtt_ms``; ``bottleneck.buffer`` →
    ``buffer_bdp`` (and ``buffer_bytes``); a grouped axis → its label."""
    from .plan import format_sweep_value

    out: dict[str, Any] = {}
    setup = setup_columns(model, resolved)
    for key, value in point.items():
        if is_grouped_axis(key):
            out[key] = format_sweep_value(value)
            continue
        parts = key.split(".")
        m = _PATH_PART.match(parts[0])
        field = parts[-1]
        if m and m["name"] == "flows" and len(parts) == 2:
            idx = m["idx"]
            prefix = "" if idx == "*" else f"flow{idx}_"
            flow = resolved["flows"][0 if idx == "*" else _first_expanded(model, int(idx))]
            if field in ("rtt", "start", "stop", "delack_timeout"):
                ns = flow[f"{field}_ns"]
                unit, scale = ("ms", 1e6) if field in ("rtt", "delack_timeout") else ("s", 1e9)
                out[f"{prefix}{field}_{unit}"] = None if ns is None else ns / scale
            elif field in ("bytes", "rwnd"):
                out[f"{prefix}{field}_bytes"] = flow["bytes" if field == "bytes" else "rwnd_bytes"]
            elif field in flow:
                out[f"{prefix}{field}"] = flow[field]
            else:
                out[f"{prefix}{field}"] = value if isinstance(value, (int, float, str)) else json.dumps(value)
        elif key == "bottleneck.rate":
            out["rate_bps"] = setup["rate_bps"]
        elif key == "bottleneck.buffer":
            out["buffer_bdp"] = setup["buffer_bdp"]
            out["buffer_bytes"] = setup["buffer_bytes"]
        elif key in ("duration", "interval"):
            out[f"{key}_s"] = setup[f"{key}_s"]
        elif key == "access_rate":
            out["access_rate_bps"] = float(resolved["access_rate_bps"])
        else:
            out[field] = value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else json.dumps(value)
    return out


def utilisation(trace: Trace, rate_bps: float, window: tuple[float, float]) -> float | None:
    """Share of the bottleneck rate the flows delivered together in the window: the
    bits of every sample whose interval ends in (start, end], over (end - start) ×
    rate. A flow absent for part of the window contributes nothing there."""
    return _utilisation(trace.samples["t"].to_numpy(), trace.samples["throughput_bps"].to_numpy(), trace.interval, rate_bps, window)


def _utilisation(t: np.ndarray, throughput: np.ndarray, interval: float, rate_bps: float,
                 window: tuple[float, float]) -> float | None:
    lo, hi = window
    if hi <= lo or rate_bps <= 0:
        return None
    sel = (t > lo + 1e-9) & (t <= hi + 1e-9)
    bits = float(throughput[sel].sum()) * interval
    return bits / ((hi - lo) * rate_bps)


def run_utilisation(run: StoredRun, rate_bps: float, window: tuple[float, float]) -> float | None:
    """`utilisation` of a stored run from two columns of its samples file instead of
    the whole Trace. The sum runs over the samples in the order a Trace holds them
    (run, flow, t), which is the order the store writes them; a file in another
    order, or without ``meta['interval_s']``, is read as a Trace, so the value is
    the same to the last bit either way."""
    cols = run.columns("samples", ["run", "flow", "t", "throughput_bps"])
    interval = run.meta.get("interval_s")
    if cols is None or not interval or not is_sorted_by([cols["run"], cols["flow"], cols["t"]]):
        return utilisation(run.trace(), rate_bps, window)
    return _utilisation(cols["t"], cols["throughput_bps"], float(interval), rate_bps, window)


def flow_rtts(run: StoredRun) -> dict[int, float]:
    """Flow id -> RTT (s) from the run's flow table (NaN where unknown)."""
    cols = run.columns("flows", ["flow", "rtt_s"])
    if cols is None:
        fl = run.trace().flows
        return dict(zip(fl["flow"].astype(int), fl["rtt_s"].astype(float)))
    return dict(zip(cols["flow"].astype(int).tolist(), cols["rtt_s"].astype(float).tolist()))


# ----------------------------------------------------------------- derived tables
def derive(store: Store) -> dict[str, pd.DataFrame]:
    """The derived tables from the store's runs (verified on read).

    Every run's files are read and verified once (`aggregate` and this share them);
    a run's row needs its run.json and three columns, never its whole Trace, and a
    scenario is parsed once however many runs share it (issue 15 item 5)."""
    from ..metrics.stats import run_stats
    from .aggregate import aggregate, campaign_of

    camp = campaign_of(store)
    cache: dict[str, StoredRun] = {}
    results = aggregate(store, camp, cache=cache)
    per_run = {k: v for r in results for k, v in r.per_run.items()}
    tasks = {t.key: t for t in camp.tasks}
    runs, summaries = [], []
    util_by_key: dict[str, float | None] = {}
    point_models: dict[str, dict[str, Any]] = {}
    setup_by_cond: dict[str, dict[str, Any]] = {}
    # canonical scenario -> (has a window, set-up columns), made once: runs sharing a
    # scenario (a condition's runs) differ only in the seed they resolve it with, and
    # no set-up column depends on the seed
    setups: dict[str, tuple[bool, dict[str, Any]]] = {}
    for key in sorted(store.done_keys()):
        # popped: a run's files are not needed once its rows are made
        run = cache.pop(key, None) or store.open_run(key)
        meta = run.meta
        task = meta.get("task") or {}
        summ = meta.get("summary") or {}
        row: dict[str, Any] = {
            "run_key": key,
            "kind": task.get("kind"),
            "condition": task.get("condition"),
            "label": task.get("label"),
            "point": canonical_json(task.get("point", {})),
            "run_index": task.get("run_index"),
            "seed": task.get("seed"),
            "backend": meta.get("backend"),
            "wall_s": meta.get("wall_s"),
            "fairlab": meta.get("fairlab_version"),
            "in_campaign": key in tasks,
            "scenario": canonical_json(task.get("scenario", {})),
        }
        extra: dict[str, Any] = {}
        util = None
        if task.get("scenario"):
            skey = row["scenario"]
            if skey not in setups:
                model = Scenario.from_dict(task["scenario"])
                setups[skey] = (model.window is not None, setup_columns(model, model.resolve(seed=task.get("seed"))))
            has_window, setup = setups[skey]
            # Sweep columns describe the condition the run belongs to: a calibration
            # or solo run carries the values of the main condition it serves.
            point = task.get("point", {})
            pkey = canonical_json(point)
            if pkey not in point_models:
                main = Scenario.from_dict(apply_point(camp.base, point, source=str(store.root)))
                point_models[pkey] = sweep_columns(point, main, main.resolve(seed=task.get("seed")))
            extra = {**setup, **point_models[pkey]}
            win = (setup["window_start_s"], setup["window_end_s"]) if has_window else (0.0, setup["duration_s"])
            util = run_utilisation(run, setup["rate_bps"], win)
            setup_by_cond.setdefault(task.get("condition"), extra)
        util_by_key[key] = util
        pr = per_run.get(key, {})
        metrics = {
            "jain_mean_jt": pr.get("jain_mean_jt", summ.get("jain", {}).get("mean_jt")),
            "jain_of_means": pr.get("jain_of_means", summ.get("jain", {}).get("of_means")),
            "utilisation": util,
            **{c: pr.get(c) for c in ("nru_u_plus", "nru_u_minus", "nru_u_mean", "nru_s_system", "nru_case", "nru_t_convergence_s", "harm_mean")},
        }
        runs.append({**row, **extra, **metrics})
        rtt_by_flow = flow_rtts(run)
        flows = summ.get("flows", [])
        total = sum(f["mean_bps"] or 0.0 for f in flows)
        per_flow = pr.get("flows") or []
        for i, fl in enumerate(flows):
            pf = per_flow[i] if i < len(per_flow) else {}
            rtt = rtt_by_flow.get(int(fl["flow"]))
            summaries.append({
                "run_key": key, "flow": fl["flow"], "label": fl["label"], "cca": fl.get("cca"),
                "rtt_ms": None if rtt is None or np.isnan(rtt) else rtt * 1e3,
                "mean_bps": fl["mean_bps"], "share": (fl["mean_bps"] / total) if total and fl["mean_bps"] is not None else None,
                "samples": fl["samples"], "retransmits": fl.get("retransmits"),
                "expected_bps": pf.get("expected_bps"), "nru_u_db": pf.get("nru_u_db"), "harm": pf.get("harm"),
            })
    conditions = []
    for r in results:
        utils = [util_by_key.get(k) for k in r.runs if util_by_key.get(k) is not None]
        u = run_stats(utils)
        row = {"condition": r.condition, "label": r.label, "point": canonical_json(r.point), "runs": len(r.runs), "missing_runs": r.missing_runs}
        row.update(setup_by_cond.get(r.condition, {}))
        for name, st in (("jain_mean_jt", r.jain_mean_jt), ("jain_of_means", r.jain_of_means)):
            row.update({f"{name}_mean": st.mean, f"{name}_std": st.std, f"{name}_ci_low": st.ci_low, f"{name}_ci_high": st.ci_high})
        row.update({
            "jain_cv": r.jain_cv,
            "utilisation_mean": u.mean, "utilisation_std": u.std,
            "nru_u_plus_mean": r.nru_u_plus.mean if r.nru_u_plus else None,
            "nru_u_minus_mean": r.nru_u_minus.mean if r.nru_u_minus else None,
            "nru_u_mean_mean": r.nru_u_mean.mean if r.nru_u_mean else None,
            "nru_s_system_mean": r.nru_s_system.mean if r.nru_s_system else None,
            "nru_case": r.nru_case, "nru_tuple": r.nru_tuple_text,
            "t_convergence_mean_s": r.t_convergence.mean if r.t_convergence else None,
            "n_converged": r.n_converged if r.t_convergence else None,
            "harm_mean_mean": r.harm_mean.mean if r.harm_mean else None,
            "harm_mean_std": r.harm_mean.std if r.harm_mean else None,
        })
        conditions.append(row)
    return {"runs": _frame(runs, ["run_key"]), "summaries": _frame(summaries, ["run_key", "flow"]), "conditions": _frame(conditions, ["condition"])}


def _frame(rows: list[dict[str, Any]], first: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(dict.fromkeys([*first, *(k for r in rows for k in r)])))
    # Object columns mixing None and numbers become float (None -> NaN/NULL), so
    # Parquet and DuckDB see numbers, not strings.
    for c in df.columns:
        if df[c].dtype == object:
            vals = [v for v in df[c] if v is not None]
            if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df


# ----------------------------------------------------------------- DuckDB
def _empty_table_sql(name: str) -> str:
    cols = ", ".join(f'"{c}" {_DUCK_TYPES[t]}' for c, t in {"run_key": "string", **_STANDARD[name]}.items())
    return f"CREATE TABLE {name} ({cols})"


def _create_views(con: Any, store: Store) -> None:
    for name in TABLES:
        files = sorted(store.runs_dir.glob(f"*/{name}.parquet")) if store.runs_dir.exists() else []
        if files:
            pattern = str(store.runs_dir.resolve() / "*" / f"{name}.parquet").replace("'", "''")
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{pattern}', union_by_name = true)")
        else:
            con.execute(_empty_table_sql(name))
    for name in DERIVED:
        p = store.catalog_dir / f"{name}.parquet"
        if p.exists():
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{str(p.resolve()).replace(chr(39), chr(39) * 2)}')")
        else:
            con.execute(f"CREATE TABLE {name} (run_key VARCHAR)")


def connect(store: Store) -> Any:
    """An in-memory DuckDB connection with every catalog table and view."""
    import duckdb

    con = duckdb.connect()
    _create_views(con, store)
    return con


def _parquet_bytes(df: pd.DataFrame) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), sink)
    return sink.getvalue().to_pybytes()


def build_catalog(store: Store) -> Path:
    """Under the store's lock: write catalog/{runs,summaries,conditions}.parquet and
    catalog.duckdb (views over the run files and those tables)."""
    import duckdb

    with store.exclusive():
        tables = derive(store)
        store.catalog_dir.mkdir(exist_ok=True)
        for name, df in tables.items():
            store._atomic_write(store.catalog_dir / f"{name}.parquet", _parquet_bytes(df))
        store.tmp_dir.mkdir(exist_ok=True)
        tmp = store.tmp_dir / "catalog.duckdb"
        tmp.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
        try:
            _create_views(con, store)
        finally:
            con.close()
        tmp.replace(store.catalog_path)
    return store.catalog_path


def _stale(store: Store) -> bool:
    p = store.catalog_dir / "runs.parquet"
    if not p.exists():
        return True
    import pyarrow.parquet as pq

    try:
        keys = set(pq.read_table(p, columns=["run_key"]).column("run_key").to_pylist())
    except Exception:  # noqa: BLE001 - a damaged derived table is rebuilt
        return True
    return keys != store.done_keys()


def refresh(store: Store) -> None:
    """When no other process is writing: repair the store and rebuild the catalog if
    runs were added or removed since it was built. While a campaign is writing,
    readers use the catalog as it is (the views always see every finished run)."""
    if not store.try_exclusive():
        return
    with store.exclusive():
        store.repair()
        if _stale(store):
            build_catalog(store)


def query(store: Store, sql: str) -> pd.DataFrame:
    """Run SQL over the catalog; tables are named in the error when it fails."""
    import duckdb

    refresh(store)
    con = connect(store)
    try:
        return con.execute(sql).df()
    except duckdb.Error as exc:
        raise StoreError(f"SQL error: {exc}; tables: {', '.join(ALL_TABLES)}") from None
    finally:
        con.close()


def frames(store: Store) -> dict[str, pd.DataFrame]:
    """Every table as a pandas frame."""
    refresh(store)
    con = connect(store)
    try:
        return {name: con.execute(f"SELECT * FROM {name}").df() for name in ALL_TABLES}
    finally:
        con.close()
