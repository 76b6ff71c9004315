"""The scenario schema: a dumbbell, its flows and the run settings.

One scenario file runs on every backend (DESIGN.md). This module validates a TOML
file with pydantic, turns every human unit into integers exactly once
(`fairlab.scenario.units`), and resolves the result into the plain JSON document the
Rust engine reads (`Scenario.resolve`). Every error names the file, the field and the
allowed values. The format is documented in docs/scenario-format.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import units

#: Wire overhead added to each MSS-sized segment: 20 B IPv4 + 20 B TCP + 12 B
#: timestamp option, as Linux sends by default (so MSS 1448 ⇒ 1500-byte packets).
HEADER_BYTES = 52

#: The `cca` names that are DCCP congestion-control IDs (RFC 4340 §10) rather than
#: TCP controllers: a flow naming one runs DCCP, which changes what its numbers mean
#: (no retransmissions) and what runs it (fairlab-dccpgen on the vm backend). A new
#: CCID is added here, and everything that asks `protocol` follows.
DCCP_CCIDS = frozenset({"ccid2"})


def protocol(cca: str | None) -> str | None:
    """The transport protocol a flow with congestion control ``cca`` runs: "DCCP"
    for a DCCP CCID, "TCP" for any other name, None when the control is unknown (a
    recording that does not name it, a UDP stream)."""
    if cca is None:
        return None
    return "DCCP" if cca in DCCP_CCIDS else "TCP"


class ScenarioError(ValueError):
    """A scenario file is wrong; the message names the file, field and allowed values."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Bottleneck(_Strict):
    """The shared link: its rate, buffer and queue discipline."""

    rate: int = Field(description="bits/s")
    buffer: tuple[str, float] = ("bdp", 1.0)
    buffer_rtt: int | None = Field(default=None, description="ns; BDP reference RTT, default the largest flow RTT")
    qdisc: str = "droptail"
    params: dict[str, Any] = Field(default_factory=dict)
    loss_rate: float = Field(default=0.0, ge=0.0, lt=1.0, description="random loss probability per data packet (simulator only)")

    _rate = field_validator("rate", mode="before")(lambda v: units.parse_rate(v))
    _buffer = field_validator("buffer", mode="before")(lambda v: units.parse_buffer(v) if not isinstance(v, tuple) else v)
    _brtt = field_validator("buffer_rtt", mode="before")(lambda v: None if v is None else units.parse_duration(v))

    @field_validator("buffer_rtt")
    @classmethod
    def _positive_brtt(cls, v: int | None) -> int | None:
        if v is not None and v <= 0:
            raise ValueError("buffer_rtt must be greater than 0 (leave it out to use the largest flow RTT)")
        return v


class Flow(_Strict):
    """One flow (or `count` identical flows) through the bottleneck."""

    cca: str
    rtt: int = Field(description="ns, two-way propagation delay, split equally both ways (seed 001)")
    start: int = 0
    stop: int | None = None
    bytes: int | None = Field(default=None, description="finite transfer size; default an infinite backlog")
    count: int = Field(default=1, ge=1, le=100_000)
    label: str | None = None
    rwnd: int | None = Field(default=None, description="receiver window cap in bytes")
    ecn: bool = False
    mss: int = Field(default=1448, ge=88, le=65_000)
    sack: bool = True
    delayed_ack: bool = True
    initial_cwnd: int = Field(default=10, ge=1, le=1000)
    # A model of Linux TCP's write path; a DCCP flow sends packet by packet whatever
    # it says, as `sack` and `delayed_ack` leave CCID2 alone, so `--set
    # flows[*].gso=true` can be asked of a grid that mixes the two.
    gso: bool = Field(default=False, description="simulator: release new data in Linux's GSO packets (docs/tcp-model.md)")
    params: dict[str, Any] = Field(default_factory=dict)

    _durations = field_validator("rtt", "start", mode="before")(lambda v: units.parse_duration(v))
    _stop = field_validator("stop", mode="before")(lambda v: None if v is None else units.parse_duration(v))
    _sizes = field_validator("bytes", "rwnd", mode="before")(lambda v: None if v is None else units.parse_size(v))

    @field_validator("rtt")
    @classmethod
    def _positive_rtt(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("a flow's RTT must be greater than 0")
        return v

    @model_validator(mode="after")
    def _stop_after_start(self) -> Flow:
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must be later than start")
        return self

    @model_validator(mode="after")
    def _ccid2_takes_no_initial_window(self) -> Flow:
        # Linux 6.1's CCID2 starts every sender at RFC 3390's window for its packet
        # size (`ccid2_hc_tx_init`); no route or socket option changes it, and the
        # simulator's 6.1 rules do the same (crates/netsim/src/dccp.rs). Only the
        # 2.6.22 rules (seed 001's hosts) take a window from the scenario.
        if self.cca == "ccid2" and "initial_cwnd" in self.model_fields_set and str(self.params.get("kernel", "6.1")) != "2.6.22":
            raise ValueError("initial_cwnd: a CCID2 flow under Linux 6.1 rules starts at RFC 3390's window for its "
                             "packet size (3 packets for the default 1448-byte mss) and takes no initial_cwnd; "
                             "remove the field, or set params.kernel = \"2.6.22\" for the 2.6.22 rules, which use it")
        return self


class Variation(_Strict):
    """Seeded, documented sources of run-to-run variation (docs/scenario-format.md).
    Both default on so repeated runs differ like testbed runs; set them to "0s" for a
    purely deterministic schedule.

    ``host_jitter = "auto"`` (the default) is one bottleneck transmission time of a
    full-size packet: Floyd & Jacobson ("On Traffic Phase Effects in Packet-Switched
    Gateways", 1992) show that a DropTail dumbbell of identical flows locks into a
    deterministic phase pattern unless sender timing varies by about one bottleneck
    service time; a random processing delay of that size breaks the lock, as ns-2's
    ``overhead_`` does."""

    start_jitter: int = Field(default=10_000_000, description="ns; each flow starts uniformly in [start, start + jitter]")
    host_jitter: int | None = Field(default=None, description="ns; per-packet sender processing delay, uniform in [0, jitter]; None = auto")

    _s = field_validator("start_jitter", mode="before")(lambda v: units.parse_duration(v))
    _h = field_validator("host_jitter", mode="before")(lambda v: None if v in (None, "auto") else units.parse_duration(v))


class AnalysisSettings(_Strict):
    """What a campaign computes for each condition beyond throughput and Jain's index
    (`[analysis]` table). NRU and harm make the campaign derive and run calibration
    scenarios (seed 000 §V-A) and solo runs automatically."""

    nru: bool = False
    harm: bool = False
    epoch: int | None = Field(default=None, description="ns; t_e for NRU convergence times")
    uc: float = Field(default=-0.46, gt=-30.0, le=0.0, allow_inf_nan=False, description="dB; NRU convergence threshold U_c, above the -30 dB floor")
    hold: int = Field(default=1, ge=1, description="samples the threshold must hold for T_U")
    calibration_files: list[str] = Field(default_factory=list, description="measured self-competition runs to use instead of derived calibration runs")
    baseline_files: list[str] = Field(default_factory=list, description="measured solo runs to use instead of derived solo runs")

    _epoch = field_validator("epoch", mode="before")(lambda v: None if v is None else units.parse_duration(v))


#: Most samples one run may record (flows x duration / interval): each costs ~100
#: bytes in the engine and in pandas, so 2e7 is ~2 GB. Beyond it the engine's
#: allocation would abort the process instead of saying why.
MAX_SAMPLES = 20_000_000
#: Most bottleneck packet transmissions one run may simulate (rate x duration /
#: packet size); at the engine's ~5 M packets per second this is ~10 hours.
MAX_PACKETS = 2 * 10**11
#: Largest bottleneck buffer in bytes (2^34, 17 GB: 100% BDP of 10 Tbit/s at 13 ms).
MAX_BUFFER_BYTES = 2**34


class Scenario(_Strict):
    """A validated scenario. Build with `load_scenario` or `Scenario.from_dict`."""

    name: str = Field(min_length=1)
    #: Free text for readers, carried into run metadata, campaign.json and reports
    #: (Flent's TITLE and NOTE); never part of a run's content address.
    title: str | None = Field(default=None, description="one line naming the experiment")
    description: str | None = Field(default=None, description="free text: purpose, set-up notes")
    duration: int
    interval: int = 1_000_000_000
    window: tuple[int, int] | None = None
    seed: int = Field(default=1, ge=0, lt=2**63)
    runs: int = Field(default=1, ge=1, le=10_000)
    bottleneck: Bottleneck
    access_rate: int | None = Field(default=None, description="bits/s, default 10x the bottleneck rate")
    variation: Variation = Variation()
    #: Hosts hand TSO/GSO super-packets to their NICs and coalesce with GRO, as a
    #: server's defaults do; off (the default), every link carries MTU-sized
    #: packets as on a hardware testbed of seed 001's kind. Real-kernel backends
    #: only: the simulator models the off case (docs/backends.md).
    offloads: bool = Field(default=False, description="TSO/GSO/GRO on at every host (live and vm backends)")
    analysis: AnalysisSettings = AnalysisSettings()
    flows: list[Flow] = Field(min_length=1)

    _dur = field_validator("duration", "interval", mode="before")(lambda v: units.parse_duration(v))
    _acc = field_validator("access_rate", mode="before")(lambda v: None if v is None else units.parse_rate(v))

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise ValueError("window is a list of two durations, e.g. [\"60s\", \"300s\"]")
        return (units.parse_duration(v[0]), units.parse_duration(v[1]))

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.duration <= 0:
            raise ValueError("field `duration`: must be greater than 0")
        if self.interval <= 0 or self.interval > self.duration:
            raise ValueError(f"field `interval`: must be greater than 0 and at most the duration ({self.duration / 1e9:g} s)")
        n_flows = sum(f.count for f in self.flows)
        samples = n_flows * (self.duration // self.interval)
        if samples > MAX_SAMPLES:
            raise ValueError(f"field `interval`: {n_flows} flow(s) x {self.duration // self.interval} samples each "
                             f"(duration / interval) is {samples:.3g} samples, more than the {MAX_SAMPLES:.0e} one run "
                             "may record; use a longer interval or a shorter duration")
        packets = self.bottleneck.rate * (self.duration / 1e9) / (8 * (min(f.mss for f in self.flows) + HEADER_BYTES))
        if packets > MAX_PACKETS:
            raise ValueError(f"field `duration`: the bottleneck would send about {packets:.3g} packets ({self.bottleneck.rate:.3g} bit/s for "
                             f"{self.duration / 1e9:g} s), more than the {MAX_PACKETS:.0e} one run may simulate")
        if self.bottleneck.buffer[0] == "bdp":
            bdp_bytes = self.bottleneck.rate * self.reference_rtt / 8e9 * self.bottleneck.buffer[1]
            if bdp_bytes > MAX_BUFFER_BYTES:
                raise ValueError(f"field `bottleneck.buffer`: is {bdp_bytes:.3g} bytes, more than the {MAX_BUFFER_BYTES:.3g} "
                                 "bytes allowed")
        elif self.bottleneck.buffer[0] == "bytes" and self.bottleneck.buffer[1] > MAX_BUFFER_BYTES:
            raise ValueError(f"field `bottleneck.buffer`: is more than the {MAX_BUFFER_BYTES:.3g} bytes allowed")
        if self.window is not None:
            lo, hi = self.window
            if not lo < hi <= self.duration:
                raise ValueError(f"field `window`: [{lo / 1e9:g} s, {hi / 1e9:g} s] must start before it ends and end by the "
                                 f"run's duration ({self.duration / 1e9:g} s)")
        for i, f in enumerate(self.flows):
            if f.start >= self.duration:
                raise ValueError(f"field `flows[{i}].start`: {f.start / 1e9:g} s is not before the end of the run "
                                 f"(duration {self.duration / 1e9:g} s)")
        return self

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<scenario>") -> Scenario:
        """Validate a parsed TOML/JSON document; errors become one `ScenarioError`."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ScenarioError(_explain(exc, source)) from None

    # ------------------------------------------------------------------ derived facts
    @property
    def reference_rtt(self) -> int:
        """The BDP reference RTT (ns): `bottleneck.buffer_rtt`, else the largest flow RTT."""
        return self.bottleneck.buffer_rtt if self.bottleneck.buffer_rtt is not None else max(f.rtt for f in self.flows)

    def buffer_bytes_or_packets(self) -> dict[str, int]:
        """The buffer as the engine takes it: {"packets": n} or {"bytes": n}.
        A % of BDP becomes bytes: rate x reference RTT / 8 x fraction (DESIGN.md)."""
        kind, value = self.bottleneck.buffer
        if kind == "packets":
            return {"packets": int(value)}
        if kind == "bytes":
            return {"bytes": int(value)}
        bdp = self.bottleneck.rate * self.reference_rtt / 8 / 1e9
        return {"bytes": max(1, int(round(bdp * value)))}

    def host_jitter_ns(self) -> int:
        """Per-packet sender jitter bound: as given, or one bottleneck transmission
        time of the largest packet (see `Variation`)."""
        if self.variation.host_jitter is not None:
            return self.variation.host_jitter
        packet_bits = (max(f.mss for f in self.flows) + HEADER_BYTES) * 8
        return max(1, round(packet_bits * 1e9 / self.bottleneck.rate))

    def expanded_flows(self) -> list[tuple[str, Flow]]:
        """Every flow after `count` expansion, with its label: the given label (or the
        cca), plus "-k" (k = 1, 2, … per label) when that label names more than one
        flow."""
        base = [(f.label or f.cca) for f in self.flows]
        total: dict[str, int] = {}  # flows per label, in one pass (a sum per label was quadratic)
        for f, b in zip(self.flows, base):
            total[b] = total.get(b, 0) + f.count
        seen: dict[str, int] = {}
        out: list[tuple[str, Flow]] = []
        for f, b in zip(self.flows, base):
            for _ in range(f.count):
                seen[b] = seen.get(b, 0) + 1
                out.append((f"{b}-{seen[b]}" if total[b] > 1 else b, f))
        return out

    def qdisc_params(self) -> tuple[dict[str, Any], str | None]:
        """The bottleneck's parameters as the engine takes them — given ones in engine
        units, plus BLUE's steps and freeze time derived from the link where the
        scenario leaves them out (`qdisc_defaults`) — and a sentence naming where
        BLUE's came from (None for other disciplines)."""
        from .qdisc_defaults import complete_params

        return complete_params(self, resolve_params(self.bottleneck.params))

    def resolve(self, *, seed: int | None = None) -> dict[str, Any]:
        """The resolved document the Rust engine reads (integers only)."""
        return {
            "name": self.name,
            "seed": self.seed if seed is None else seed,
            "duration_ns": self.duration,
            "interval_ns": self.interval,
            "bottleneck": {
                "rate_bps": self.bottleneck.rate,
                "buffer": self.buffer_bytes_or_packets(),
                "qdisc": self.bottleneck.qdisc,
                "params": self.qdisc_params()[0],
                "reference_rtt_ns": self.reference_rtt,
                "loss_rate": self.bottleneck.loss_rate,
            },
            "access_rate_bps": self.access_rate if self.access_rate is not None else 10 * self.bottleneck.rate,
            "start_jitter_ns": self.variation.start_jitter,
            "host_jitter_ns": self.host_jitter_ns(),
            # Present only when on, so every run planned before the field existed
            # keeps its content address.
            **({"offloads": True} if self.offloads else {}),
            "flows": [
                {
                    "cca": f.cca,
                    "params": resolve_params(f.params),
                    "rtt_ns": f.rtt,
                    "start_ns": f.start,
                    "stop_ns": f.stop,
                    "bytes": f.bytes,
                    "rwnd_bytes": f.rwnd,
                    "ecn": f.ecn,
                    "mss": f.mss,
                    "sack": f.sack,
                    "delayed_ack": f.delayed_ack,
                    "delack_timeout_ns": 40_000_000,
                    "initial_cwnd": f.initial_cwnd,
                    # Present only when on, so every run planned before the field
                    # existed keeps its content address.
                    **({"tso_defer": True} if f.gso else {}),
                }
                for _, f in self.expanded_flows()
            ],
        }


def resolve_params(params: dict[str, Any]) -> dict[str, Any]:
    """Qdisc and controller parameters with human units turned into integers, like
    every other field: a duration string ("50ms") becomes nanoseconds, a rate
    ("10Mbit") bits/s, a size ("64KB") bytes. Other values (numbers, booleans, names
    such as kernel = "2.6.22") pass through; the engine checks them and names the
    allowed range."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, str):
            for parse in (units.parse_duration, units.parse_rate, units.parse_size):
                try:
                    value = parse(value)
                    break
                except units.UnitError:
                    continue
        out[key] = value
    return out


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; errors become one `ScenarioError` naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory, not a scenario file (.toml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read it ({exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML ({exc})") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a single-scenario TOML file (no `[sweep]`; campaigns are read
    by `fairlab.campaign.load_campaign`).

    >>> import fairlab
    >>> scenario = fairlab.load_scenario("examples/ccid2-vs-cubic-100ms.toml")
    >>> scenario.bottleneck.rate
    100000000
    """
    data = read_toml(path)
    if "sweep" in data:
        raise ScenarioError(f"{path}: has a [sweep] table, so it is a campaign; load it with fairlab.campaign.load_campaign (or `fairlab run`, which expands it)")
    return Scenario.from_dict(data, source=str(path))


def _explain(exc: ValidationError, source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        msg = err["msg"]
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err["type"] == "extra_forbidden":
            msg = "is not a known field (see docs/scenario-format.md for the allowed fields)"
        elif err["type"] == "missing":
            msg = "is required"
        elif err["type"] in ("bool_parsing", "bool_type"):
            msg = f"{err.get('input')!r} is not a yes/no value; write true or false"
        if not loc:  # a rule across fields (the window against the duration, a flow's start)
            lines.append(msg)
        else:
            lines.append(f"field `{loc}` {msg}" if err["type"] in ("extra_forbidden", "missing") else f"field `{loc}`: {msg}")
    head = f"{source}: " + lines[0]
    return head if len(lines) == 1 else head + "\n" + "\n".join(f"{source}: {ln}" for ln in lines[1:])

