#!/usr/bin/env python3
"""Record fresh, real iperf3 / iperf2 output files across an emulated bottleneck.

Read this first:

- Topology (all names carry the prefix ``fl-rec-<id>-``; ``<id>`` is 4 random hex
  digits, so two recorders never collide)::

      ns fl-rec-<id>-c  (clients, 10.71.1.1)
         veth fl-rec-<id>-c <-> fl-rec-<id>-rc
      ns fl-rec-<id>-r  (router: forwards; on BOTH egress veths a netem delay of
                         rtt/2 with a tbf rate limit as its child qdisc)
         veth fl-rec-<id>-rs <-> fl-rec-<id>-s
      ns fl-rec-<id>-s  (servers, 10.71.2.1)

  so every flow sees the same bottleneck (default 100 Mbit/s, RTT 20 ms, tbf queue
  of one bandwidth-delay product) in whichever direction it sends. A kernel without
  sch_netem (CONFIG_NET_SCH_NETEM unset, as on the machine the committed examples
  were made on) gets the tbf alone: the RTT is then the veth's (~0.1 ms) plus the
  tbf queueing delay (up to ``limit/rate`` = 20 ms), and ``recording.json`` says so.
- Everything created is removed in a ``finally`` (also on Ctrl-C / SIGTERM):
  processes we started (by their Popen handle, never by name), then the three
  namespaces, which takes their veths with them. ``--cleanup`` removes leftovers of
  a recorder that was killed with SIGKILL, by the ``fl-rec-`` prefix only.
- Needs root, ``ip``, ``tc`` and the iperf binaries. Traffic stays inside the
  namespaces.

Two sets:

- ``--set examples``: the committed recordings in ``examples/`` (20-25 s runs).
- ``--set quick`` (default): the same scenarios with 3 s runs; ``make test`` /
  ``tests/test_ingest_recorded.py`` writes them into ``tests/_recorded/``.

Each run also writes ``recording.json`` (commands, tool versions, kernel, topology)
next to the files.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "fl-rec-"
CLIENT_IP = "10.71.1.1"
SERVER_IP = "10.71.2.1"


class RecordError(RuntimeError):
    """A recording could not be made; the message says which step failed."""


def _run(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RecordError(f"command {' '.join(cmd)!r} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def tool_version(binary: str, env: dict[str, str] | None = None) -> str:
    """First line of ``<binary> --version`` (iperf2 prints it on stderr)."""
    proc = subprocess.run([binary, "-v" if Path(binary).name == "iperf" else "--version"], capture_output=True, text=True, env=env)
    out = (proc.stdout + proc.stderr).strip().splitlines()
    return out[0] if out else "unknown"


def supports_json_stream(binary: str, env: dict[str, str] | None = None) -> bool:
    """True if this iperf3 knows ``--json-stream`` (iperf3 >= 3.17)."""
    proc = subprocess.run([binary, "--help"], capture_output=True, text=True, env=env)
    return "--json-stream" in proc.stdout + proc.stderr


@dataclass
class Bottleneck:
    """Three namespaces and a router with netem delay + tbf rate on both egresses."""

    rate: str = "100mbit"
    rtt_ms: float = 20.0
    ident: str = field(default_factory=lambda: secrets.token_hex(2))
    procs: list[subprocess.Popen] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    netem: bool | None = None  # set by `up`: whether the kernel had sch_netem

    @property
    def ns_c(self) -> str:
        return f"{PREFIX}{self.ident}-c"

    @property
    def ns_r(self) -> str:
        return f"{PREFIX}{self.ident}-r"

    @property
    def ns_s(self) -> str:
        return f"{PREFIX}{self.ident}-s"

    def describe(self) -> dict[str, object]:
        return {
            "namespaces": [self.ns_c, self.ns_r, self.ns_s],
            "client_ip": CLIENT_IP,
            "server_ip": SERVER_IP,
            "router_egress_qdisc": self._qdisc_text(),
            "netem_available": self.netem,
            "base_rtt_ms": self.rtt_ms if self.netem else "veth only (no sch_netem in this kernel)",
            "tbf_limit_bytes": self._limit_bytes(),
            "tbf_limit_ms_at_rate": self._limit_bytes() * 8 / _rate_bps(self.rate) * 1000,
            "rate": self.rate,
        }

    def _limit_bytes(self) -> int:
        rate_bps = _rate_bps(self.rate)
        return max(int(rate_bps * self.rtt_ms / 1000 / 8), 30_000)  # one BDP of queue

    def _qdisc_text(self) -> str:
        tbf = f"tbf rate {self.rate} burst 32kb limit {self._limit_bytes()}"
        if self.netem is False:
            return f"{tbf} (root)"
        return f"netem delay {self.rtt_ms / 2:g}ms limit 10000 (root, handle 1:) + {tbf} (parent 1:1)"

    def up(self) -> None:
        ip = ["ip"]
        for ns in (self.ns_c, self.ns_r, self.ns_s):
            _run(ip + ["netns", "add", ns])
            self.created.append(ns)
            _run(ip + ["-n", ns, "link", "set", "lo", "up"])
        c_if, rc_if = f"{PREFIX}{self.ident}-c", f"{PREFIX}{self.ident}-rc"
        s_if, rs_if = f"{PREFIX}{self.ident}-s", f"{PREFIX}{self.ident}-rs"
        _run(ip + ["-n", self.ns_c, "link", "add", c_if, "type", "veth", "peer", "name", rc_if, "netns", self.ns_r])
        _run(ip + ["-n", self.ns_s, "link", "add", s_if, "type", "veth", "peer", "name", rs_if, "netns", self.ns_r])
        _run(ip + ["-n", self.ns_c, "addr", "add", f"{CLIENT_IP}/24", "dev", c_if])
        _run(ip + ["-n", self.ns_r, "addr", "add", "10.71.1.254/24", "dev", rc_if])
        _run(ip + ["-n", self.ns_r, "addr", "add", "10.71.2.254/24", "dev", rs_if])
        _run(ip + ["-n", self.ns_s, "addr", "add", f"{SERVER_IP}/24", "dev", s_if])
        for ns, dev in ((self.ns_c, c_if), (self.ns_r, rc_if), (self.ns_r, rs_if), (self.ns_s, s_if)):
            _run(ip + ["-n", ns, "link", "set", dev, "up"])
        _run(ip + ["-n", self.ns_c, "route", "add", "default", "via", "10.71.1.254"])
        _run(ip + ["-n", self.ns_s, "route", "add", "default", "via", "10.71.2.254"])
        _run(["ip", "netns", "exec", self.ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        for dev in (rc_if, rs_if):
            tc = ["ip", "netns", "exec", self.ns_r, "tc", "qdisc", "add", "dev", dev]
            tbf = ["tbf", "rate", self.rate, "burst", "32kb", "limit", str(self._limit_bytes())]
            netem = _run(tc + ["root", "handle", "1:", "netem", "delay", f"{self.rtt_ms / 2:g}ms", "limit", "10000"],
                         check=False)
            if netem.returncode == 0:
                self.netem = True
                _run(tc + ["parent", "1:1", "handle", "10:", *tbf])
            else:
                # Some kernels are built without sch_netem (CONFIG_NET_SCH_NETEM unset):
                # then the bottleneck is the tbf alone and the RTT is its queueing delay.
                self.netem = False
                _run(tc + ["root", "handle", "1:", *tbf])

    def spawn(self, ns: str, cmd: list[str], out: Path | None, env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``cmd`` inside ``ns``; stdout goes to ``out`` (or is discarded)."""
        stdout = open(out, "wb") if out is not None else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=stdout, stderr=subprocess.PIPE, env=env)
        finally:
            if out is not None:
                stdout.close()
        self.procs.append(proc)
        return proc

    def wait_listening(self, port: int, udp: bool = False, timeout: float = 5.0) -> None:
        """Wait until a server in the server namespace listens on ``port``."""
        deadline = time.monotonic() + timeout
        flag = "-lun" if udp else "-ltn"
        while time.monotonic() < deadline:
            out = _run(["ip", "netns", "exec", self.ns_s, "ss", "-H", flag, f"sport = :{port}"], check=False).stdout
            if out.strip():
                return
            time.sleep(0.05)
        raise RecordError(f"no server listened on port {port} within {timeout:g} s")

    def down(self) -> None:
        """Stop what we started, then delete our namespaces (their veths go with them)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created.clear()


def _rate_bps(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1.0}
    for suffix, mult in units.items():
        if rate.lower().endswith(suffix):
            return float(rate[: -len(suffix)]) * mult
    raise RecordError(f"rate {rate!r} must end in one of {list(units)}")


def _finish(proc: subprocess.Popen, what: str, timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RecordError(f"{what} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
        raise RecordError(f"{what} exited with {proc.returncode}: {err[-300:]}")


def record(out_dir: Path, *, quick: bool, iperf3: str, iperf3_stream: str | None, iperf2: str | None,
           rate: str, rtt_ms: float) -> dict[str, object]:
    """Make every recording of the set into ``out_dir``; returns the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dur = 3 if quick else 20
    two_dur, two_delay = (4, 2) if quick else (25, 5)
    env3 = dict(os.environ)
    stream_env = dict(os.environ)
    if iperf3_stream and (Path(iperf3_stream).parent.parent / "lib").is_dir():
        stream_env["LD_LIBRARY_PATH"] = str(Path(iperf3_stream).parent.parent / "lib")
    net = Bottleneck(rate=rate, rtt_ms=rtt_ms)
    manifest: dict[str, object] = {
        "set": "quick" if quick else "examples",
        "kernel": os.uname().release,
        "iperf3": tool_version(iperf3),
        "files": {},
    }
    files: dict[str, dict[str, object]] = manifest["files"]  # type: ignore[assignment]

    def note(name: str, server: list[str] | None, client: list[str], **extra: object) -> None:
        files[name] = {"client": " ".join(client), "server": " ".join(server) if server else None, **extra}

    def iperf3_pair(name: str, client_args: list[str], *, server_json: str | None = None, port: int = 5201,
                    binary: str = iperf3, env: dict[str, str] | None = None) -> None:
        srv = [binary, "-s", "-1", "-p", str(port)] + (["-J"] if server_json else [])
        s = net.spawn(net.ns_s, srv, out_dir / server_json if server_json else None, env=env)
        net.wait_listening(port)
        cli = [binary, "-c", SERVER_IP, "-p", str(port), *client_args]
        c = net.spawn(net.ns_c, cli, out_dir / name, env=env)
        _finish(c, f"iperf3 client for {name}", dur * 3 + 30)
        _finish(s, f"iperf3 server for {name}", 10)
        note(name, srv, cli)
        if server_json:
            note(server_json, srv, cli, side="server")

    try:
        net.up()
        manifest["bottleneck"] = net.describe()
        # (a) + (e1): the USC lab's `iperf3 -c ... -P 8 -J`, and the server's own -J file.
        iperf3_pair("iperf3_P8_client.json", ["-C", "cubic", "-P", "8", "-t", str(dur), "-i", "1", "-J"],
                    server_json="iperf3_P8_server.json")
        # (b): two concurrent clients, CUBIC then Reno started later, one file each.
        srv_a = [iperf3, "-s", "-1", "-p", "5201"]
        srv_b = [iperf3, "-s", "-1", "-p", "5202"]
        sa, sb = net.spawn(net.ns_s, srv_a, None), net.spawn(net.ns_s, srv_b, None)
        net.wait_listening(5201)
        net.wait_listening(5202)
        cli_a = [iperf3, "-c", SERVER_IP, "-p", "5201", "-C", "cubic", "-t", str(two_dur), "-i", "1", "-J"]
        cli_b = [iperf3, "-c", SERVER_IP, "-p", "5202", "-C", "reno", "-t", str(two_dur - two_delay), "-i", "1", "-J"]
        ca = net.spawn(net.ns_c, cli_a, out_dir / "two_clients_cubic.json")
        time.sleep(two_delay)
        cb = net.spawn(net.ns_c, cli_b, out_dir / "two_clients_reno.json")
        for proc, what in ((ca, "cubic client"), (cb, "reno client"), (sa, "server 5201"), (sb, "server 5202")):
            _finish(proc, what, two_dur * 3 + 30)
        note("two_clients_cubic.json", srv_a, cli_a)
        note("two_clients_reno.json", srv_b, cli_b, started_after_s=two_delay)
        # (c): --json-stream, with an iperf3 >= 3.17 if one was given.
        if iperf3_stream and supports_json_stream(iperf3_stream, stream_env):
            manifest["iperf3_stream"] = tool_version(iperf3_stream, stream_env)
            iperf3_pair("iperf3_stream_P2.jsonl", ["-P", "2", "-t", str(dur), "-i", "1", "--json-stream"],
                        binary=iperf3_stream, env=stream_env)
        # (e2): reverse mode: the client receives, the server sends (its -J file has cwnd/RTT).
        iperf3_pair("iperf3_R_client.json", ["-R", "-P", "2", "-t", str(dur), "-i", "1", "-J"],
                    server_json="iperf3_R_server.json")
        # (f): UDP at more than the bottleneck rate, client and server files.
        udp_rate = f"{_rate_bps(rate) * 1.2 / 1e6:g}M"
        iperf3_pair("iperf3_udp_client.json", ["-u", "-b", udp_rate, "-t", str(dur), "-i", "1", "-J"],
                    server_json="iperf3_udp_server.json")
        # (d): iperf2 CSV, client and server side.
        if iperf2:
            srv2 = [iperf2, "-s", "-p", "5001", "-y", "C", "-i", "1"]
            s2 = net.spawn(net.ns_s, srv2, out_dir / "iperf2_P2_server.csv")
            net.wait_listening(5001)
            cli2 = [iperf2, "-c", SERVER_IP, "-p", "5001", "-y", "C", "-i", "1", "-P", "2", "-t", str(dur)]
            c2 = net.spawn(net.ns_c, cli2, out_dir / "iperf2_P2_client.csv")
            _finish(c2, "iperf2 client", dur * 3 + 30)
            time.sleep(0.5)  # let the server print its final per-stream totals
            s2.send_signal(signal.SIGINT)
            try:
                s2.wait(timeout=5)
            except subprocess.TimeoutExpired:
                s2.kill()
                s2.wait()
            manifest["iperf2"] = tool_version(iperf2)
            note("iperf2_P2_client.csv", srv2, cli2)
            note("iperf2_P2_server.csv", srv2, cli2, side="server")
    finally:
        net.down()
    (out_dir / "recording.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def cleanup_stale() -> list[str]:
    """Delete namespaces left by a killed recorder (prefix ``fl-rec-`` only)."""
    out = _run(["ip", "netns", "list"], check=False).stdout
    gone = []
    for line in out.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            gone.append(name)
    return gone


def missing_requirements(iperf3: str = "iperf3") -> str | None:
    """Why recording cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "not running as root (network namespaces need it)"
    for tool in (iperf3, "ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"{tool!r} is not on PATH"
    return None


def _interrupt(signum: int, frame: object) -> None:
    # SIGTERM takes the same path as Ctrl-C, so the `finally` in `record` cleans up.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("tests/_recorded"), help="directory for the files")
    ap.add_argument("--set", choices=["quick", "examples"], default="quick")
    ap.add_argument("--iperf3", default="iperf3", help="iperf3 binary for the -J recordings")
    ap.add_argument("--iperf3-stream", default=None,
                    help="an iperf3 >= 3.17 for the --json-stream recording (default: --iperf3 if it supports it)")
    ap.add_argument("--iperf2", default="iperf", help="iperf2 binary ('' to skip)")
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--rtt-ms", type=float, default=20.0)
    ap.add_argument("--cleanup", action="store_true", help="only delete leftover fl-rec-* namespaces")
    args = ap.parse_args(argv)
    if args.cleanup:
        print("removed:", " ".join(cleanup_stale()) or "nothing")
        return 0
    why = missing_requirements(args.iperf3)
    if why:
        print(f"record_iperf: cannot record: {why}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    iperf2 = args.iperf2 if args.iperf2 and shutil.which(args.iperf2) else None
    try:
        manifest = record(args.out, quick=args.set == "quick", iperf3=args.iperf3,
                          iperf3_stream=args.iperf3_stream or args.iperf3, iperf2=iperf2,
                          rate=args.rate, rtt_ms=args.rtt_ms)
    except RecordError as exc:
        print(f"record_iperf: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("record_iperf: interrupted; everything it created was removed", file=sys.stderr)
        return 130
    print(f"recorded {len(manifest['files'])} files into {args.out}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
