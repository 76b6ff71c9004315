"""The campaign store: one Parquet file per run plus a DuckDB catalog.

Layout of a campaign directory::

    campaign.json          the campaign document (base scenario + sweep), backend, version
    runs/<key>.parquet     one finished run: a Trace whose meta holds the task and summary
    failed/<key>.json      a run that failed, with the reason (redone on the next start)
    catalog.duckdb         tables runs, flows, samples, bottleneck, summaries (rebuilt
                           from runs/ — the Parquet files are the truth)

Every write goes to a temporary name first and is renamed into place, so a campaign
killed at any instant (even with SIGKILL) leaves either a whole run file or none; a
restart skips the keys that have a file and redoes the rest (DESIGN.md).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from .. import __version__
from ..trace import Trace
from .plan import Campaign, Task, canonical_json


class StoreError(ValueError):
    """The directory is not a campaign store, or holds a different campaign."""


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


class Store:
    """A campaign directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.failed_dir = self.root / "failed"
        self.catalog_path = self.root / "catalog.duckdb"

    # ------------------------------------------------------------------ set-up
    def init(self, campaign: Campaign) -> None:
        """Create the directory for ``campaign``, or check that it holds the same one."""
        doc = {"name": campaign.name, "base": campaign.base, "sweep": campaign.sweep, "mode": campaign.mode, "backend": campaign.backend}
        manifest = self.root / "campaign.json"
        if manifest.exists():
            old = json.loads(manifest.read_text())
            if canonical_json({k: old.get(k) for k in doc}) != canonical_json(doc):
                raise StoreError(
                    f"{self.root} already holds a different campaign ({old.get('name')!r}); "
                    "use another --out directory or delete this one"
                )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write(manifest, json.dumps({**doc, "source": campaign.source, "fairlab": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2, default=str).encode())
        self.runs_dir.mkdir(exist_ok=True)
        self.failed_dir.mkdir(exist_ok=True)

    def manifest(self) -> dict[str, Any]:
        p = self.root / "campaign.json"
        if not p.exists():
            raise StoreError(f"{self.root} is not a fairlab campaign directory (no campaign.json)")
        return json.loads(p.read_text())

    # ------------------------------------------------------------------ runs
    def path(self, key: str) -> Path:
        return self.runs_dir / f"{key}.parquet"

    def has(self, key: str) -> bool:
        return self.path(key).exists()

    def done_keys(self) -> set[str]:
        return {p.stem for p in self.runs_dir.glob("*.parquet")} if self.runs_dir.exists() else set()

    def write(self, key: str, parquet_bytes: bytes) -> None:
        _atomic_write(self.path(key), parquet_bytes)
        failed = self.failed_dir / f"{key}.json"
        if failed.exists():
            failed.unlink()

    def fail(self, task: Task, reason: str) -> None:
        _atomic_write(self.failed_dir / f"{task.key}.json", json.dumps({"key": task.key, "label": task.label, "kind": task.kind, "run_index": task.run_index, "seed": task.seed, "reason": reason}, indent=2).encode())

    def failures(self) -> list[dict[str, Any]]:
        if not self.failed_dir.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(self.failed_dir.glob("*.json"))]

    def load(self, key: str) -> Trace:
        return Trace.from_parquet(self.path(key))

    # ------------------------------------------------------------------ catalog
    def frames(self) -> dict[str, pd.DataFrame]:
        """The five catalog tables as pandas frames, read from the run files."""
        runs, flows, samples, bottleneck, summaries = [], [], [], [], []
        for p in sorted(self.runs_dir.glob("*.parquet")):
            tr = Trace.from_parquet(p)
            task = tr.meta.get("task", {})
            key = p.stem
            summ = tr.meta.get("summary", {})
            runs.append(
                {
                    "run_key": key,
                    "kind": task.get("kind"),
                    "condition": task.get("condition"),
                    "label": task.get("label"),
                    "point": canonical_json(task.get("point", {})),
                    "run_index": task.get("run_index"),
                    "seed": task.get("seed"),
                    "backend": tr.meta.get("backend"),
                    "wall_s": tr.meta.get("wall_s"),
                    "fairlab": tr.meta.get("fairlab_version"),
                    "scenario": canonical_json(task.get("scenario", {})),
                    "jain_mean_jt": summ.get("jain", {}).get("mean_jt"),
                    "jain_of_means": summ.get("jain", {}).get("of_means"),
                }
            )
            f = tr.flows.copy()
            f.insert(0, "run_key", key)
            flows.append(f[["run_key", "flow", "label", "cca", "rtt_s", "start_s", "source"]])
            s = tr.samples.copy()
            s.insert(0, "run_key", key)
            samples.append(s[["run_key", "flow", "t", "throughput_bps", "cwnd_bytes", "srtt_s", "rttvar_s", "retransmits"]])
            if tr.bottleneck is not None:
                b = tr.bottleneck.copy()
                b.insert(0, "run_key", key)
                # every column, including drops by reason (drops_overflow, drops_early, …)
                bottleneck.append(b)
            for fl in summ.get("flows", []):
                summaries.append({"run_key": key, "flow": fl["flow"], "label": fl["label"], "cca": fl.get("cca"), "mean_bps": fl["mean_bps"], "samples": fl["samples"], "retransmits": fl.get("retransmits")})
        cat = lambda parts, cols: pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)  # noqa: E731
        return {
            "runs": pd.DataFrame(runs, columns=["run_key", "kind", "condition", "label", "point", "run_index", "seed", "backend", "wall_s", "fairlab", "scenario", "jain_mean_jt", "jain_of_means"]),
            "flows": cat(flows, ["run_key", "flow", "label", "cca", "rtt_s", "start_s", "source"]),
            "samples": cat(samples, ["run_key", "flow", "t", "throughput_bps", "cwnd_bytes", "srtt_s", "rttvar_s", "retransmits"]),
            "bottleneck": cat(bottleneck, ["run_key", "t", "queue_bytes", "queue_pkts", "drops", "marks"]),
            "summaries": pd.DataFrame(summaries, columns=["run_key", "flow", "label", "cca", "mean_bps", "samples", "retransmits"]),
        }

    def build_catalog(self) -> Path:
        """(Re)build catalog.duckdb from the run files, atomically."""
        import duckdb

        frames = self.frames()
        tmp = self.root / f".catalog.{os.getpid()}.tmp.duckdb"
        if tmp.exists():
            tmp.unlink()
        con = duckdb.connect(str(tmp))
        try:
            for name, df in frames.items():
                con.register("_df", df)
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM _df")
                con.unregister("_df")
        finally:
            con.close()
        tmp.replace(self.catalog_path)
        return self.catalog_path

    def query(self, sql: str) -> pd.DataFrame:
        """Run SQL against the catalog (read-only), rebuilding it if runs were added."""
        import duckdb

        newest = max((p.stat().st_mtime for p in self.runs_dir.glob("*.parquet")), default=0.0)
        if not self.catalog_path.exists() or self.catalog_path.stat().st_mtime < newest:
            self.build_catalog()
        con = duckdb.connect(str(self.catalog_path), read_only=True)
        try:
            return con.execute(sql).df()
        except duckdb.Error as exc:
            raise StoreError(f"SQL error: {exc}; tables: runs, flows, samples, bottleneck, summaries") from None
        finally:
            con.close()


def open_campaign(root: str | Path) -> dict[str, pd.DataFrame]:
    """The catalog of a campaign directory as pandas frames: runs, flows, samples,
    bottleneck, summaries (join on run_key)."""
    store = Store(root)
    store.manifest()
    return store.frames()
