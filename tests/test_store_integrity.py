"""The campaign store trusts nothing it reads: checksums and keys verified, damaged
runs moved aside and recomputed, one writer at a time, stale temporary files removed,
a full disk reported in one sentence and resumed cleanly, format-1 stores still read.

Truth here is independent of the store's code: `sha256sum -c` (coreutils) checks the
SHA256SUMS files, byte comparison of the data files of a clean store checks repairs,
and a second Python process holds the lock."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import fairlab
from fairlab.campaign import store as store_mod
from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import expand
from fairlab.campaign.store import CorruptRun, DiskFull, Store, StoreBusy

TINY = {
    "name": "tiny",
    "duration": "8s",
    "interval": "1s",
    "window": ["2s", "8s"],
    "seed": 7,
    "runs": 2,
    "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
    "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms", "start": "1s"}],
    "sweep": {"flows[*].rtt": ["10ms", "30ms"]},
}
DATA_FILES = ("samples.parquet", "flows.parquet", "bottleneck.parquet")


def data_digests(root: Path) -> dict[str, dict[str, str]]:
    """sha256 of every data file of every run: what 'bit for bit' compares."""
    out = {}
    for d in sorted((root / "runs").iterdir()):
        out[d.name] = {f: hashlib.sha256((d / f).read_bytes()).hexdigest() for f in DATA_FILES if (d / f).exists()}
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clean") / "c"
    rep = run_campaign(expand(TINY), Store(root), workers=1)
    assert rep.done == 4 and rep.failed == 0
    return root


def copy_of(clean: Path, tmp_path: Path) -> Store:
    shutil.copytree(clean, tmp_path / "c")
    return Store(tmp_path / "c")


def test_checksum_files_are_what_sha256sum_checks(clean):
    for d in (clean / "runs").iterdir():
        r = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        listed = {ln.split("  ", 1)[1] for ln in (d / "SHA256SUMS").read_text().splitlines()}
        assert listed == {"samples.parquet", "flows.parquet", "bottleneck.parquet", "run.json"}


def test_a_flipped_bit_is_refused_then_quarantined_and_recomputed_identically(clean, tmp_path):
    store = copy_of(clean, tmp_path)
    key = sorted(store.done_keys())[0]
    p = store.run_dir(key) / "samples.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    # independent check: sha256sum sees the damage too
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=p.parent, capture_output=True).returncode != 0
    with pytest.raises(CorruptRun, match=r"samples.parquet does not match its SHA-256.*run the campaign again"):
        store.load(key)
    rep = run_campaign(expand(TINY), store, workers=1)
    assert rep.quarantined and rep.quarantined[0][0] == key and "samples.parquet" in rep.quarantined[0][1]
    assert rep.done == 1 and rep.skipped == 3
    (moved,) = list(store.quarantine_dir.iterdir())
    assert (moved / key / "samples.parquet").read_bytes() == bytes(data)  # kept, not deleted
    assert "SHA-256" in (moved / "reason.txt").read_text()
    assert data_digests(store.root) == data_digests(clean)


def test_swapped_run_directories_are_both_caught(clean, tmp_path):
    store = copy_of(clean, tmp_path)
    a, b = sorted(store.done_keys())[:2]
    tmp = store.runs_dir / "swap"
    store.run_dir(a).rename(tmp)
    store.run_dir(b).rename(store.run_dir(a))
    tmp.rename(store.run_dir(b))
    for k in (a, b):
        assert "renamed or swapped" in store.verify(k)
    rep = run_campaign(expand(TINY), store, workers=1)
    assert sorted(k for k, _ in rep.quarantined) == sorted([a, b]) and rep.done == 2
    assert data_digests(store.root) == data_digests(clean)


def test_a_truncated_run_file_does_not_block_report_or_query(clean, tmp_path):
    """Before: a truncated run file blocked resume, report and query until deleted by
    hand. Now report and query move it aside, say so, and work."""
    store = copy_of(clean, tmp_path)
    key = sorted(store.done_keys())[-1]
    p = store.run_dir(key) / "flows.parquet"
    p.write_bytes(p.read_bytes()[:20])
    r = fairlab("query", store.root, "SELECT count(*) AS n FROM runs", "--csv")
    assert r.returncode == 0, r.stderr
    assert "damaged run" in r.stderr and key in r.stderr and "quarantine" in r.stderr
    assert r.stdout.split() == ["n", "3"]
    assert key not in store.done_keys()


def test_stale_temporary_files_are_removed_at_start(clean, tmp_path):
    store = copy_of(clean, tmp_path)
    (store.tmp_dir / "deadbeef.12345").mkdir(parents=True)
    (store.tmp_dir / "deadbeef.12345" / "samples.parquet").write_bytes(b"PAR1 half a file")
    (store.runs_dir / ".abc.parquet.999.tmp").write_bytes(b"format-1 leftover")
    run_campaign(expand(TINY), store, workers=1)
    assert not any(store.tmp_dir.iterdir()) if store.tmp_dir.exists() else True
    assert not list(store.runs_dir.glob(".*"))


HOLDER = """
import sys, time
from fairlab.campaign.store import Store
with Store(sys.argv[1]).exclusive():
    print("held", flush=True)
    time.sleep(30)
"""


def test_a_second_writer_is_refused_naming_the_holder(clean, tmp_path):
    store = copy_of(clean, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy, match=rf"being written by process {holder.pid} "):
            run_campaign(expand(TINY), store, workers=1)
        spec = tmp_path / "tiny.toml"
        spec.write_text(_toml(TINY))
        r = fairlab("run", spec, "--out", store.root, "--workers", "1")
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"process {holder.pid}" in " ".join(r.stderr.split())
    finally:
        holder.kill()
        holder.wait()
    # the kernel drops the lock with its holder: the next writer proceeds
    assert run_campaign(expand(TINY), store, workers=1).skipped == 4


def _toml(d: dict) -> str:
    lines = [f'name = "{d["name"]}"', f'duration = "{d["duration"]}"', f'interval = "{d["interval"]}"',
             f'window = {json.dumps(d["window"])}', f'seed = {d["seed"]}', f'runs = {d["runs"]}',
             "[bottleneck]", 'rate = "10Mbit"', 'buffer = "100%bdp"']
    for f in d["flows"]:
        lines += ["[[flows]]"] + [f'{k} = "{v}"' for k, v in f.items()]
    lines += ["[sweep]", '"flows[*].rtt" = ["10ms", "30ms"]']
    return "\n".join(lines) + "\n"


def test_a_full_disk_is_one_sentence_and_the_campaign_resumes_cleanly(clean, tmp_path, monkeypatch):
    store = Store(tmp_path / "c")
    real = store_mod._write_file
    calls = {"n": 0}

    def nearly_full(path, data):
        calls["n"] += 1
        if calls["n"] > 12:  # the third run's files (the manifest is written first)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(store_mod, "_write_file", nearly_full)
    with pytest.raises(DiskFull) as e:
        run_campaign(expand(TINY), store, workers=1)
    msg = str(e.value)
    assert "disk holding" in msg and "is full" in msg and "run the same command again to resume" in msg
    assert "\n" not in msg
    assert 1 <= len(store.done_keys()) < 4
    assert not any(store.tmp_dir.iterdir())  # nothing half-written left behind
    assert store.try_exclusive()  # the lock was released
    monkeypatch.setattr(store_mod, "_write_file", real)
    rep = run_campaign(expand(TINY), store, workers=1)
    assert rep.failed == 0 and rep.done + rep.skipped == 4
    assert data_digests(store.root) == data_digests(clean)


def test_a_full_disk_from_the_command_line_exits_2_with_one_sentence(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(_toml(TINY))
    code = (
        "import errno, sys\n"
        "from fairlab.campaign import store\n"
        "def full(path, data): raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "store._write_file = full\n"
        "from fairlab.cli import main\n"
        f"sys.argv = ['fairlab', 'run', {str(spec)!r}, '--out', {str(tmp_path / 'c')!r}, '--workers', '2']\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "is full" in r.stderr


def test_a_format_1_store_is_read_and_converted(clean, tmp_path):
    """Stores written before format 2 held runs/<key>.parquet (the Trace file with
    flows in its metadata). They are read as they are and converted by a writer."""
    store = copy_of(clean, tmp_path)
    for key in sorted(store.done_keys()):
        tr = store.load(key)
        shutil.rmtree(store.run_dir(key))
        tr.to_parquet(store.runs_dir / f"{key}.parquet")
    assert len(store.done_keys()) == 4
    frames_old = {k: store.load(k).samples for k in store.done_keys()}
    rep = run_campaign(expand(TINY), store, workers=1)
    assert rep.skipped == 4 and rep.done == 0
    assert not list(store.runs_dir.glob("*.parquet"))
    assert data_digests(store.root) == data_digests(clean)
    for k, s in frames_old.items():
        assert store.load(k).samples.equals(s)


def test_readers_work_while_a_campaign_holds_the_lock(clean, tmp_path):
    store = copy_of(clean, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        df = store.query("SELECT count(DISTINCT run_key) AS n FROM samples")
        assert int(df["n"][0]) == 4 and time.monotonic() - t0 < 20
    finally:
        holder.kill()
        holder.wait()
    assert os.path.exists(store.lock_path)


def test_a_run_whose_files_agree_but_hold_another_scenario_is_caught(clean, tmp_path):
    """Consistent checksums are not enough: run.json edited to another seed, with
    SHA256SUMS recomputed to match, no longer holds the run its key was computed from."""
    store = copy_of(clean, tmp_path)
    key = sorted(store.done_keys())[0]
    d = store.run_dir(key)
    doc = json.loads((d / "run.json").read_text())
    doc["meta"]["task"]["seed"] += 1
    (d / "run.json").write_text(json.dumps(doc))
    subprocess.run(["sh", "-c", "sha256sum bottleneck.parquet flows.parquet run.json samples.parquet > SHA256SUMS"], cwd=d, check=True)
    assert store.verify(key) is None  # whole and self-consistent ...
    rep = run_campaign(expand(TINY), store, workers=1)
    assert [k for k, _ in rep.quarantined] == [key] and "another scenario or seed" in rep.quarantined[0][1]
    assert data_digests(store.root) == data_digests(clean)


def test_a_single_run_on_a_full_disk_is_one_sentence_and_leaves_no_temp_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from fairlab.trace import TraceError

    def full(table, where, *a, **kw):
        Path(where).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    from fairlab.trace import Trace

    tr = Trace.from_frames(
        pd.DataFrame({"run": [0], "flow": [0], "t": [1.0], "throughput_bps": [1e6]}),
        pd.DataFrame({"flow": [0], "label": ["a"]}),
    )
    with pytest.raises(TraceError, match=r"cannot write the trace \(No space left on device\)"):
        tr.to_parquet(tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_store_is_still_queried_and_a_writer_is_told(clean, tmp_path, monkeypatch):
    """A store on a read-only medium (an archive, another user's results): readers
    read it without the lock; a writer gets one sentence. (Tests run as root, for
    whom permissions do not stop a write, so the lock file's open fails by hand.)"""
    store = copy_of(clean, tmp_path)
    real_open = os.open

    def read_only(path, flags, *a):
        if str(path).endswith(".lock"):
            raise PermissionError(errno.EROFS, "Read-only file system")
        return real_open(path, flags, *a)

    monkeypatch.setattr(store_mod.os, "open", read_only)
    df = store.query("SELECT count(*) AS n FROM runs")
    assert int(df["n"][0]) == 4
    with pytest.raises(store_mod.StoreReadOnly, match="cannot be written \\(Read-only file system\\)"):
        run_campaign(expand(TINY), store, workers=1)
