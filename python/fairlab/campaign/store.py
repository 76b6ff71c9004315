"""The campaign store: a directory of ordinary Parquet tables, checked on every read.

Layout (store format 2; docs/campaigns.md has the columns)::

    campaign.json                 the campaign document (base scenario + sweep), backend, version
    .lock                         held (flock) by the one process writing the store; holds its pid
    runs/<key>/samples.parquet    one finished run: per-flow samples ...
    runs/<key>/flows.parquet      ... its flow table ...
    runs/<key>/bottleneck.parquet ... router-side samples (when the backend records them) ...
    runs/<key>/run.json           ... the run's key, task, summary and backend metadata ...
    runs/<key>/SHA256SUMS         ... and the SHA-256 of each of those files (`sha256sum -c` reads it)
    failed/<key>.json             a run that failed, with the reason (redone on the next start)
    quarantine/<key>.<time>/      a run that failed verification, moved aside with reason.txt
    tmp/                          runs being written; emptied when a writer starts
    catalog/*.parquet, catalog.duckdb   derived tables and DuckDB views (campaign/catalog.py)

Every table carries a ``run_key`` column, so ``read_parquet('runs/*/samples.parquet')``
in DuckDB or `pandas.read_parquet` on the files gives one table of every run.

Why it survives anything (DESIGN.md: a killed campaign resumes and never leaves half a
run): a run is written into ``tmp/`` and renamed into ``runs/`` as a whole directory, so
``runs/`` only ever holds complete runs; one process at a time may write (`exclusive`,
a `fcntl.flock` the kernel drops when the holder dies, even by SIGKILL); a writer
starts by emptying ``tmp/`` and by verifying every run — checksums, and that the run
is the key it is filed under — moving a bad one to ``quarantine/`` so the campaign
recomputes it. A full disk stops the campaign with one sentence (`DiskFull`) and
leaves nothing half-written. Stores written by fairlab before format 2 (one
``runs/<key>.parquet`` per run) are read as they are and converted when a writer
opens them.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Set
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..trace import Trace, TraceError
from .plan import Campaign, Task, canonical_json
from .stored_run import RUN_JSON, TABLES, StoredRun

#: Version of the directory layout; `campaign.json` records it.
STORE_FORMAT = 2
CHECKSUMS = "SHA256SUMS"
#: Files every run directory must hold (bottleneck.parquet only when recorded).
REQUIRED = ("samples.parquet", "flows.parquet", RUN_JSON)


#: Why a stored run or failure can be none of a plan's: a run's key hashes its
#: resolved scenario, backend, fairlab version and engine build (or kernel), so runs
#: made before any of them changed stay in the store under other keys.
OTHER_ADDRESS = "another engine build, fairlab version or scenario"


class StoreError(ValueError):
    """The directory is not a campaign store, holds a different campaign, is busy,
    or a file in it is damaged; the message says which and what to do."""


class StoreBusy(StoreError):
    """Another process is writing the store."""


class StoreReadOnly(StoreError):
    """The store's directory cannot be written (readers still read it)."""


class DiskFull(StoreError):
    """A write failed for lack of space (ENOSPC/EDQUOT)."""


class CorruptRun(StoreError):
    """A run directory failed verification."""


# Locks this process holds, by store root: flock(2) treats two descriptors of one
# file as two owners, so a nested `exclusive` in the same process must reuse the first.
_HELD: dict[Path, list[int]] = {}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_file(path: Path, data: bytes) -> None:
    """Write and fsync one file (the one place the store writes bytes, so a test can
    make it fail as a full disk would)."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def encode_run(key: str, trace: Trace) -> dict[str, bytes]:
    """The files of one run directory, as bytes (computed where the run ran, written
    by the store's owner). Deterministic: the same trace gives the same bytes."""
    files: dict[str, bytes] = {}
    for name, table in trace.tables().items():
        table = table.add_column(0, "run_key", pa.array([key] * table.num_rows, pa.string()))
        files[f"{name}.parquet"] = _parquet_bytes(table)
    files[RUN_JSON] = json.dumps({"store_format": STORE_FORMAT, "key": key, "meta": trace.meta},
                                 indent=1, sort_keys=True, default=str, allow_nan=True).encode()
    files[CHECKSUMS] = "".join(f"{_sha256(files[n])}  {n}\n" for n in sorted(files)).encode()
    return files


def _parse_checksums(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or "/" in name or not name:
            raise ValueError(f"{CHECKSUMS} line {line[:80]!r} is not '<sha256>  <file>'")
        out[name] = digest
    return out


def _disk_full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


class Store:
    """A campaign directory."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.failed_dir = self.root / "failed"
        self.tmp_dir = self.root / "tmp"
        self.quarantine_dir = self.root / "quarantine"
        self.catalog_dir = self.root / "catalog"
        self.catalog_path = self.root / "catalog.duckdb"
        self.lock_path = self.root / ".lock"
        #: (key, reason) of runs moved to quarantine by this object's `repair`.
        self.quarantined: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ the lock
    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's write lock for the block; another process holding it makes
        this raise `StoreBusy` naming that process (no waiting, no second writer)."""
        key = self.root.resolve()
        if key in _HELD:
            _HELD[key][1] += 1
            try:
                yield
            finally:
                _HELD[key][1] -= 1
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreReadOnly(f"{self.root} cannot be written ({exc.strerror or exc}); run the campaign into a "
                                "directory you can write (--out)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreBusy(f"{self.root} is being written by process {holder} (another fairlab run of this campaign); "
                            "wait for it to finish or stop it, then run the command again") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = [fd, 1]
        try:
            yield
        finally:
            del _HELD[key]
            os.close(fd)  # releases the flock

    def try_exclusive(self) -> bool:
        """True when no other process holds the lock right now (a reader's check
        before it repairs anything)."""
        try:
            with self.exclusive():
                return True
        except (StoreBusy, StoreReadOnly):
            return False

    # ------------------------------------------------------------------ set-up
    def init(self, campaign: Campaign) -> None:
        """Create the directory for ``campaign``, or check that it holds the same one."""
        # Without a sweep there is one condition, and the choice changes no seed.
        crn = campaign.common_random_numbers if campaign.sweep else None
        doc = {"name": campaign.name, "base": campaign.base, "sweep": campaign.sweep, "mode": campaign.mode, "backend": campaign.backend,
               "common_random_numbers": crn}
        manifest = self.root / "campaign.json"
        if manifest.exists():
            old = self.manifest()
            stored = {**{k: old.get(k) for k in doc}, "common_random_numbers": manifest_crn(old) if old.get("sweep") else None}
            same_but_seeding = canonical_json({**stored, "common_random_numbers": crn}) == canonical_json(doc)
            if same_but_seeding and "common_random_numbers" not in old and old.get("sweep"):
                # Written before conditions had seeds of their own. Its runs are
                # recomputed under the new seeds, as after an engine rebuild (the
                # engine's fingerprint is in every key); the manifest records the choice.
                self._atomic_write(manifest, json.dumps({**old, "common_random_numbers": crn}, indent=2, default=str).encode())
            elif canonical_json(stored) != canonical_json(doc):
                if same_but_seeding:
                    # The same campaign planned with the other seeding: its runs carry
                    # other seeds, so resuming it would silently start over.
                    was = "one seed per run index shared by all conditions" if stored["common_random_numbers"] else "each condition's own seeds"
                    raise StoreError(f"{self.root} holds this campaign run with {was}; set `common_random_numbers = "
                                     f"{str(stored['common_random_numbers']).lower()}` in [sweep] to resume it, or use another --out directory")
                raise StoreError(
                    f"{self.root} already holds a different campaign ({old.get('name')!r}); "
                    "use another --out directory or delete this one"
                )
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            self._atomic_write(manifest, json.dumps({**doc, "source": campaign.source, "fairlab": __version__, "store_format": STORE_FORMAT,
                                                     "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2, default=str).encode())
        self.runs_dir.mkdir(exist_ok=True)
        self.failed_dir.mkdir(exist_ok=True)

    def manifest(self) -> dict[str, Any]:
        p = self.root / "campaign.json"
        if not p.exists():
            raise StoreError(f"{self.root} is not a fairlab campaign directory (no campaign.json)")
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(f"{p} cannot be read ({exc}); the campaign's runs are intact in {self.runs_dir}: "
                             "restore campaign.json or run the campaign into a new --out directory") from None

    def _atomic_write(self, path: Path, data: bytes) -> None:
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.tmp_dir / f"{path.name}.{os.getpid()}"
        try:
            _write_file(tmp, data)
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if _disk_full(exc):
                raise DiskFull(f"the disk holding {self.root} is full (writing {path.name}); free space and run the same "
                               "command again to resume") from None
            raise

    # ------------------------------------------------------------------ repair
    def repair(self, planned: dict[str, Task] | None = None) -> list[tuple[str, str]]:
        """Under the lock: empty ``tmp/``, convert format-1 run files, and move every
        run that fails verification to ``quarantine/``. With ``planned`` (key ->
        task of the campaign), a run must also hold the scenario, seed and backend its
        key was computed from. Returns (key, reason) of what was moved (also kept in
        ``self.quarantined``)."""
        with self.exclusive():
            self._remove_stale_temp_files()
            self._convert_format_1()
            for key in sorted(self.done_keys()):
                reason = self.verify(key, planned.get(key) if planned else None)
                if reason is not None:
                    self.quarantine(key, reason)
        return list(self.quarantined)

    def _remove_stale_temp_files(self) -> None:
        """Temporary files of writers that died (kill -9, a full disk). Only this
        process holds the lock, so none of them is being written."""
        if self.tmp_dir.exists():
            shutil.rmtree(self.tmp_dir, ignore_errors=True)
        # format-1 writers left ".<name>.<pid>.tmp" next to the file
        for d in (self.root, self.runs_dir, self.failed_dir):
            if d.exists():
                for p in d.glob(".*.tmp*"):
                    p.unlink(missing_ok=True)

    def _convert_format_1(self) -> None:
        if not self.runs_dir.exists():
            return
        for old in sorted(self.runs_dir.glob("*.parquet")):
            try:
                trace = Trace.from_parquet(old)
            except TraceError as exc:
                self.quarantine(old.stem, f"a format-1 run file that cannot be read ({exc})", path=old)
                continue
            self.write(old.stem, encode_run(old.stem, trace))
            old.unlink()

    def quarantine(self, key: str, reason: str, *, path: Path | None = None) -> Path:
        """Move a bad run aside (never delete data) with a reason.txt."""
        src = path or self.runs_dir / key
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        dest = self.quarantine_dir / f"{key}.{time.strftime('%Y%m%dT%H%M%S')}.{os.getpid()}"
        dest.mkdir()
        src.rename(dest / src.name)
        (dest / "reason.txt").write_text(reason + "\n")
        self.quarantined.append((key, reason))
        return dest

    # ------------------------------------------------------------------ runs
    def run_dir(self, key: str) -> Path:
        return self.runs_dir / key

    def has(self, key: str) -> bool:
        return key in self.done_keys()

    def done_keys(self) -> set[str]:
        """Keys of the finished runs: complete run directories (and format-1 files)."""
        if not self.runs_dir.exists():
            return set()
        out = set()
        for p in self.runs_dir.iterdir():
            if p.is_dir() and (p / CHECKSUMS).exists():
                out.add(p.name)
            elif p.suffix == ".parquet" and not p.name.startswith("."):
                out.add(p.stem)
        return out

    def write(self, key: str, files: dict[str, bytes]) -> None:
        """Write one finished run (the files of `encode_run`) atomically: into
        ``tmp/``, then one rename into ``runs/``."""
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.tmp_dir / f"{key}.{os.getpid()}"
        final = self.run_dir(key)
        try:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
            # SHA256SUMS last: a directory with it is complete.
            for name in sorted(files, key=lambda n: n == CHECKSUMS):
                _write_file(tmp / name, files[name])
            _fsync_dir(tmp)
            if final.exists():  # a run that failed verification and was redone in place
                shutil.rmtree(final)
            tmp.rename(final)
            _fsync_dir(self.runs_dir)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if _disk_full(exc):
                raise DiskFull(f"the disk holding {self.root} is full (writing run {key}); the runs finished so far are "
                               "kept: free space and run the same command again to resume") from None
            raise
        failed = self.failed_dir / f"{key}.json"
        if failed.exists():
            failed.unlink()

    def fail(self, task: Task, reason: str) -> None:
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        self._atomic_write(self.failed_dir / f"{task.key}.json", json.dumps({"key": task.key, "label": task.label, "kind": task.kind, "run_index": task.run_index, "seed": task.seed, "reason": reason}, indent=2).encode())

    def failures_of(self, keys: Set[str]) -> tuple[list[dict[str, Any]], int]:
        """The failure records of the runs ``keys`` address (a plan's tasks), and how
        many other records the store holds: failures of runs an older engine build,
        fairlab version or scenario addressed differently (`OTHER_ADDRESS`), which say
        nothing about this plan."""
        recorded = self.failures()
        mine = [f for f in recorded if f.get("key") in keys]
        return mine, len(recorded) - len(mine)

    def failures(self) -> list[dict[str, Any]]:
        if not self.failed_dir.exists():
            return []
        out = []
        for p in sorted(self.failed_dir.glob("*.json")):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue  # a damaged failure record only means the run is retried
        return out

    def _read_verified(self, key: str) -> tuple[dict[str, bytes] | None, str | None]:
        """The run's files, or None and why they cannot be trusted."""
        d = self.run_dir(key)
        try:
            sums = _parse_checksums((d / CHECKSUMS).read_text())
        except FileNotFoundError:
            return None, f"{CHECKSUMS} is missing"
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return None, f"{CHECKSUMS} cannot be read ({exc})"
        for name in REQUIRED:
            if name not in sums:
                return None, f"{CHECKSUMS} does not list {name}"
        files: dict[str, bytes] = {}
        for name, want in sums.items():
            try:
                data = (d / name).read_bytes()
            except OSError:
                return None, f"{name} is missing"
            if _sha256(data) != want:
                return None, f"{name} does not match its SHA-256 in {CHECKSUMS} (damaged or replaced)"
            files[name] = data
        try:
            doc = json.loads(files[RUN_JSON])
        except ValueError as exc:
            return None, f"{RUN_JSON} is not JSON ({exc})"
        task_key = (doc.get("meta") or {}).get("task", {}).get("key", key)
        if doc.get("key") != key or task_key != key:
            return None, f"the files are run {doc.get('key')!r}, not {key!r} (a run directory was renamed or swapped)"
        return files, None

    def verify(self, key: str, task: Task | None = None) -> str | None:
        """None when run ``key`` is whole and is that run (and, given the planned
        ``task``, ran that task's scenario and seed); else the reason."""
        if (self.runs_dir / f"{key}.parquet").exists():
            return None  # format 1: no checksums to check; converted by `repair`
        files, reason = self._read_verified(key)
        if files is None or task is None:
            return reason
        stored = json.loads(files[RUN_JSON])["meta"].get("task") or {}
        if canonical_json([stored.get("scenario"), stored.get("seed")]) != canonical_json([task.scenario, task.seed]):
            return "its run.json holds another scenario or seed than the run its key names (edited or replaced)"
        return None

    def open_run(self, key: str) -> StoredRun:
        """Run ``key``'s files, checksums and key verified, parsed only as far as the
        caller asks (`StoredRun`: run.json, a few columns, or the whole Trace)."""
        old = self.runs_dir / f"{key}.parquet"
        if old.exists():  # format 1: read as the next writer will convert it
            return StoredRun(key, encode_run(key, Trace.from_parquet(old)))
        files, reason = self._read_verified(key)
        if files is None:
            raise CorruptRun(f"{self.run_dir(key)}: {reason}; run the campaign again (the same fairlab run/reproduce "
                             "command) to move it to quarantine/ and recompute it")
        return StoredRun(key, files)

    def load(self, key: str) -> Trace:
        """Read run ``key``, verifying its checksums and key first."""
        old = self.runs_dir / f"{key}.parquet"
        if old.exists():
            return Trace.from_parquet(old)
        return self.open_run(key).trace()

    def run_meta(self, key: str) -> dict[str, Any]:
        """run.json's metadata of a run (task, summary, backend ...), verified."""
        old = self.runs_dir / f"{key}.parquet"
        if old.exists():
            return Trace.from_parquet(old).meta
        files, reason = self._read_verified(key)
        if files is None:
            raise CorruptRun(f"{self.run_dir(key)}: {reason}")
        return StoredRun(key, files).meta

    # ------------------------------------------------------------------ catalog
    def build_catalog(self) -> Path:
        """(Re)build the derived tables and catalog.duckdb (campaign/catalog.py)."""
        from .catalog import build_catalog

        return build_catalog(self)

    def frames(self) -> dict[str, pd.DataFrame]:
        from .catalog import frames

        return frames(self)

    def query(self, sql: str) -> pd.DataFrame:
        """Run SQL over the catalog's tables and views."""
        from .catalog import query

        return query(self, sql)


def open_campaign(root: str | Path) -> dict[str, pd.DataFrame]:
    """The catalog of a campaign directory as pandas frames: runs, flows, samples,
    bottleneck, summaries, conditions (join on run_key / condition)."""
    store = Store(root)
    store.manifest()
    return store.frames()


def manifest_crn(manifest: dict[str, Any]) -> bool:
    """Whether a stored campaign shares seeds across conditions. A manifest written
    from before the choice existed lacks the field; every campaign then shared them."""
    return bool(manifest.get("common_random_numbers", True))
