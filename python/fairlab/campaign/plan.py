"""Campaign plans: a scenario file with a `[sweep]` expanded into runs.

A campaign file is a scenario file plus an optional `[sweep]` table whose keys are
scenario paths and whose values are lists:

    [sweep]
    "flows[*].rtt" = ["25ms", "50ms", "100ms"]     # every flow
    "flows[1].cca" = ["reno", "bic", "cubic"]      # one flow
    "bottleneck.buffer" = ["10%bdp", "100%bdp"]
    mode = "product"                               # default; "zip" pairs lists up

A key that is not a scenario path names a *grouped* axis whose values are tables of
path = value assignments made together (an optional `label` names the group in
tables and figures), e.g. both flows' controls at once:

    pair = [{"flows[0].cca" = "ccid2", "flows[1].cca" = "reno"},
            {"flows[0].cca" = "reno",  "flows[1].cca" = "ccid2"}]

Every point of the sweep is a *condition*; every condition runs `runs` times. In a
sweep, run k of a condition has its own seed, a hash of (base seed, the condition as
resolved, k) — see `condition_seed` — so conditions are independent samples and no
flow wins every condition by the luck of one shared seed. With
`common_random_numbers = true` in `[sweep]`, run k of every condition uses the same
seed instead, derived from the base seed and k only (as without a sweep). When
`[analysis]` asks for NRU or harm, the plan also holds the calibration runs those
need (seed 000 §V-A): for each condition and each congestion control in it, the same
condition with every flow using that control; for harm, each flow alone. They are
seeded by the same rule, so an identical calibration condition — whichever
conditions need it, and a main condition that already is one — is planned once.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..backends.checks import check_bottleneck, check_simulatable, check_vm
from ..scenario import Scenario, ScenarioError, protocol, read_toml

_INDEX = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(\[(?P<idx>\*|\d+)\])?$")

MAIN, CALIBRATION, SOLO = "main", "calibration", "solo"

#: The `[sweep]` key that asks for common random numbers across conditions.
CRN_KEY = "common_random_numbers"


def derive_seed(base: int, run_index: int) -> int:
    """Seed of run ``run_index`` (0-based): run 0 uses the base seed itself, later runs a
    SplitMix64 mix of (base, k) — independent streams, the same on every machine."""
    if run_index == 0:
        return base
    z = (base + 0x9E3779B97F4A7C15 * run_index) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & 0x7FFFFFFFFFFFFFFF


def condition_seed(base: int, condition: dict[str, Any] | None, run_index: int) -> int:
    """Seed of run ``run_index`` of a condition of a sweep.

    ``condition`` is the condition's resolved scenario (`Scenario.resolve`); ``None``
    asks for common random numbers, and so does a campaign without a sweep: then the
    seed is `derive_seed(base, run_index)`, and run 0 of a scenario file keeps the seed
    the file names. Otherwise it is BLAKE2b over the canonical JSON of (base seed, the
    condition without its name and seed, run index), cut to 63 bits: the same in every
    process and on every machine, whatever the order of the sweep's axes and values;
    different for conditions that differ in anything physical, so a flow's luck in
    one condition says nothing about the next; equal for physically identical ones,
    so such a run is planned once."""
    if condition is None:
        return derive_seed(base, run_index)
    physics = {k: v for k, v in condition.items() if k not in ("name", "seed")}
    digest = hashlib.blake2b(canonical_json({"base": base, "condition": physics, "run": run_index}).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFFFFFFFFFF


def set_path(doc: dict[str, Any], path: str, value: Any, *, source: str) -> None:
    """Assign ``value`` at a dotted scenario path such as ``flows[1].cca`` or
    ``flows[*].rtt`` (every element)."""
    parts = path.split(".")
    targets: list[Any] = [doc]
    for i, part in enumerate(parts):
        m = _INDEX.match(part)
        if not m:
            raise ScenarioError(f"{source}: sweep key {path!r}: {part!r} is not a field name (write e.g. \"flows[1].cca\" or \"bottleneck.rate\")")
        name, idx = m["name"], m["idx"]
        last = i == len(parts) - 1
        nxt: list[Any] = []
        for t in targets:
            if not isinstance(t, dict):
                raise ScenarioError(f"{source}: sweep key {path!r}: {'.'.join(parts[:i])!r} is not a table")
            if idx is None:
                if last:
                    t[name] = copy.deepcopy(value)
                else:
                    nxt.append(t.setdefault(name, {}))
                continue
            seq = t.get(name)
            if not isinstance(seq, list):
                raise ScenarioError(f"{source}: sweep key {path!r}: {name!r} is not a list, so it cannot be indexed")
            chosen = range(len(seq)) if idx == "*" else [int(idx)]
            for j in chosen:
                if j >= len(seq):
                    raise ScenarioError(f"{source}: sweep key {path!r}: {name} has {len(seq)} entries, so index {j} does not exist")
                if last:
                    seq[j] = copy.deepcopy(value)
                else:
                    nxt.append(seq[j])
        targets = nxt


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _engine() -> str:
    """The simulator build's source fingerprint: a changed engine never reuses runs."""
    from .._core import engine_hash

    return engine_hash()


def vm_kernel_identity() -> str:
    """The vm image's key: it hashes the kernel and every package of the guest, so a
    different kernel never reuses a stored run (DESIGN.md, virtual time)."""
    from ..backends.vm.image import find

    return find().key


def vm_dccpgen_identity() -> str | None:
    """The DCCP generator's hash: runs with DCCP flows carry it into the guest."""
    import hashlib as _h

    from ..backends.vm.image import dccpgen_binary

    gen = dccpgen_binary()
    return _h.sha256(gen.read_bytes()).hexdigest()[:16] if gen else None


def run_key(resolved: dict[str, Any], seed: int, backend: str) -> str:
    """Content address of one run: the resolved scenario (with its seed), the backend,
    the fairlab version and, for the simulator, the engine build's fingerprint
    (DESIGN.md: campaign runs are content-addressed)."""
    doc = {"scenario": {**resolved, "seed": seed}, "backend": backend, "fairlab": __version__}
    if backend == "sim":
        doc["engine"] = _engine()
    elif backend == "vm":
        from ..backends.vm.plan import VM_FORMAT_VERSION

        doc["kernel"] = vm_kernel_identity()
        doc["vm_format"] = VM_FORMAT_VERSION
        if any(protocol(f.get("cca")) == "DCCP" for f in resolved.get("flows", [])):
            doc["dccpgen"] = vm_dccpgen_identity()
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Task:
    """One run to execute."""

    key: str
    kind: str  # main | calibration | solo
    condition: str  # condition id (hash of the sweep point and kind)
    point: dict[str, Any]  # the sweep assignments of this condition ({} without a sweep)
    label: str  # human description of the condition
    run_index: int
    seed: int
    scenario: dict[str, Any]  # raw (unresolved) scenario document, validated
    for_flow: int | None = None  # solo runs: which flow of the main condition
    for_cca: str | None = None  # calibration runs: which control

    def model(self) -> Scenario:
        return Scenario.from_dict(self.scenario)


@dataclass
class Campaign:
    """A campaign file: base scenario, sweep and the resulting plan."""

    name: str
    source: str
    base: dict[str, Any]
    sweep: dict[str, list[Any]]
    mode: str
    backend: str = "sim"
    #: `[sweep] common_random_numbers = true`: run k of every condition shares one seed
    common_random_numbers: bool = False
    tasks: list[Task] = field(default_factory=list)
    #: main condition id -> {"calibration": {cca: [run keys]}, "solo": {flow entry index: [run keys]}}.
    #: Keys, not condition ids: a calibration run that is physically identical to a
    #: main run (reno vs reno is reno's self-competition) is planned once and shared.
    links: dict[str, dict[str, dict[Any, list[str]]]] = field(default_factory=dict)

    @property
    def conditions(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.tasks:
            if t.kind == MAIN:
                seen.setdefault(t.condition, None)
        return list(seen)

    def count(self, kind: str | None = None) -> int:
        return sum(1 for t in self.tasks if kind is None or t.kind == kind)

    @property
    def keys(self) -> frozenset[str]:
        """The run keys (content addresses) this plan reads and writes in a store."""
        return frozenset(t.key for t in self.tasks)


def _points(sweep: dict[str, list[Any]], mode: str, source: str) -> list[dict[str, Any]]:
    if not sweep:
        return [{}]
    keys = list(sweep)
    for k, v in sweep.items():
        if not isinstance(v, list) or not v:
            raise ScenarioError(f"{source}: sweep key {k!r} must be a non-empty list of values")
    if mode == "zip":
        lengths = {k: len(v) for k, v in sweep.items()}
        if len(set(lengths.values())) != 1:
            raise ScenarioError(f"{source}: sweep mode \"zip\" needs lists of one length; got {lengths}")
        return [dict(zip(keys, vals)) for vals in zip(*sweep.values())]
    if mode != "product":
        raise ScenarioError(f"{source}: sweep mode {mode!r} is not known; allowed: \"product\" (default), \"zip\"")
    return [dict(zip(keys, vals)) for vals in itertools.product(*sweep.values())]


#: Top-level scenario fields; a sweep key naming none of them (and holding no "." or
#: "[") is a grouped axis.
_SCENARIO_FIELDS = set(Scenario.model_fields)


def is_grouped_axis(key: str) -> bool:
    """A sweep key that names a group of assignments rather than one scenario path."""
    return "." not in key and "[" not in key and key not in _SCENARIO_FIELDS


def format_sweep_value(v: Any) -> str:
    """How a sweep value is shown: a grouped value by its `label` key, else by its
    scalar assignments joined with "/" (tables such as controller params are left out)."""
    if isinstance(v, dict):
        if "label" in v:
            return str(v["label"])
        return "/".join(str(x) for x in v.values() if isinstance(x, (str, int, float)) and not isinstance(x, bool))
    return str(v)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


#: Paths that name one thing of the whole scenario, read by their name ("RTT 50ms"
#: rather than "flows[*].rtt=50ms"); a path of one flow keeps its index, so two
#: flows' settings never read alike.
_READABLE = {
    "flows[*].rtt": "RTT",
    "flows[*].cca": "every flow",
    "bottleneck.rate": "rate",
    "bottleneck.buffer": "buffer",
    "bottleneck.qdisc": "qdisc",
}


def assignment_text(key: str, value: Any) -> str:
    """One sweep assignment: a grouped value by its label (or, unlabelled, by every
    scalar path=value it sets), a whole-scenario path by its name, any other
    scenario path as path=value."""
    if is_grouped_axis(key):
        if isinstance(value, dict):
            if "label" in value:
                return str(value["label"])
            parts = [f"{p}={_value(x)}" for p, x in value.items() if isinstance(x, (str, int, float))]
            return ", ".join(parts) or key
        return f"{key}={_value(value)}"
    if key in _READABLE:
        return f"{_READABLE[key]} {_value(value)}"
    return f"{key}={_value(value)}"


def condition_label(point: dict[str, Any], *, leave_out: str | tuple[str | None, ...] | None = None) -> str:
    """A sweep point as text, optionally without the axis (or axes) ``leave_out`` (the
    x-axis of a figure, the columns of a table, the axis that splits panels); "all"
    when nothing is left.

    The one name of a condition: the plan's tasks carry it (`fairlab plan`, failed-run
    lines, the catalog's `label`; errors while planning differ only for an unlabelled
    group, see `_error_label`) and the report's tables,
    legends and panel titles print it, so a condition reads the same wherever it is
    met. Every assignment keeps its flow's index, so two flows' controls stay two
    different things ("flows[0].cca=reno; flows[1].cca=cubic", never "cca=reno;
    cca=cubic")."""
    skip = set(leave_out) if isinstance(leave_out, tuple) else {leave_out}
    parts = [assignment_text(k, v) for k, v in point.items() if k not in skip]
    return "; ".join(parts) if parts else ("base scenario" if not point else "all")


def _error_label(point: dict[str, Any]) -> str:
    """A sweep point as errors about its condition name it: as `condition_label`, but
    an unlabelled group by its axis and values as the catalog's column shows them
    ("pair=reno/cubic"). Its label's paths ("flows[0].cca=renoo") read as a sweep key
    or a field of the base scenario, neither of which the file has, so the user could
    not find the group the error is about."""
    def name(key: str, value: Any) -> str:
        if is_grouped_axis(key) and isinstance(value, dict) and "label" not in value:
            shown = format_sweep_value(value)
            return f"{key}={shown}" if shown else key
        return assignment_text(key, value)

    return "; ".join(name(k, v) for k, v in point.items()) or condition_label({})


def apply_point(doc: dict[str, Any], point: dict[str, Any], *, source: str) -> dict[str, Any]:
    """A copy of ``doc`` with every assignment of a sweep point made."""
    d = copy.deepcopy(doc)
    for key, value in point.items():
        if is_grouped_axis(key):
            if not isinstance(value, dict):
                raise ScenarioError(f"{source}: sweep axis {key!r} is not a scenario path, so its values must be tables of path = value (e.g. {{\"flows[0].cca\" = \"reno\"}})")
            for path, v in value.items():
                if path != "label":  # the group's display name, not an assignment
                    set_path(d, path, v, source=source)
        else:
            set_path(d, key, value, source=source)
    return d


def _condition_id(doc: dict[str, Any], kind: str) -> str:
    body = {k: v for k, v in doc.items() if k not in ("seed", "runs", "name")}
    return hashlib.sha256(canonical_json({"kind": kind, "doc": body}).encode()).hexdigest()[:16]


def _calibration_doc(doc: dict[str, Any], cca_entry: dict[str, Any]) -> dict[str, Any]:
    """Seed 000 §V-A: the same conditions with every flow using one control."""
    out = copy.deepcopy(doc)
    for f in out["flows"]:
        f["cca"] = cca_entry["cca"]
        if "params" in cca_entry:
            f["params"] = copy.deepcopy(cca_entry["params"])
        else:
            f.pop("params", None)
        f.pop("label", None)
    out.pop("analysis", None)
    return out


def _solo_doc(doc: dict[str, Any], flow_index: int) -> dict[str, Any]:
    """Harm baseline: flow ``flow_index`` alone on the same path (Ware et al. 2019)."""
    # Copy only the one flow: copying the whole document per solo run made planning
    # quadratic in flows (minutes for a 1,000-flow scenario with harm).
    out = {k: [copy.deepcopy(v[flow_index])] if k == "flows" else copy.deepcopy(v) for k, v in doc.items() if k != "analysis"}
    out["flows"][0]["count"] = 1
    return out


def _absolute_files(doc: dict[str, Any], source: str) -> None:
    """Calibration/baseline files named in `[analysis]` are relative to the campaign
    file; make them absolute so the plan does not depend on the working directory."""
    analysis = doc.get("analysis") or {}
    base = Path(source).parent if Path(source).exists() else Path.cwd()
    for key in ("calibration_files", "baseline_files"):
        if key in analysis:
            files = []
            for f in analysis[key]:
                p = Path(f)
                p = p if p.is_absolute() else (base / p)
                if not p.exists():
                    raise ScenarioError(f"{source}: field `analysis.{key}` names {f!r}, which does not exist (looked at {p})")
                files.append(str(p.resolve()))
            analysis[key] = files
            _check_readable(files, key, source)


def _check_readable(files: list[str], key: str, source: str) -> None:
    """Read the measured calibration/baseline files now, as the report will, so a bad
    one is refused before any run instead of after the whole campaign."""
    if not files:
        return
    from ..ingest import IngestError
    from ..ingest import load as ingest_load

    try:
        ingest_load(files)
    except IngestError as exc:
        raise ScenarioError(f"{source}: field `analysis.{key}`: {exc}") from None


def expand(doc: dict[str, Any], *, source: str = "<campaign>", backend: str = "sim", check: bool = True) -> Campaign:
    """Expand a campaign document into its plan, validating every condition against
    the schema and, with ``check``, against what ``backend`` would refuse when the
    run starts (backends/checks.py)."""
    doc = copy.deepcopy(doc)
    _absolute_files(doc, source)
    sweep = doc.pop("sweep", {}) or {}
    if not isinstance(sweep, dict):
        raise ScenarioError(f"{source}: [sweep] must be a table of path = [values]")
    mode = sweep.pop("mode", "product")
    crn = sweep.pop(CRN_KEY, False)
    if not isinstance(crn, bool):
        raise ScenarioError(f"{source}: [sweep] {CRN_KEY} = {crn!r} is not allowed; write true (run k of every condition shares one seed) "
                            "or false (the default: each condition has seeds of its own)")
    base = Scenario.from_dict(doc, source=source)  # the base itself must be valid
    camp = Campaign(name=base.name, source=source, base=doc, sweep=sweep, mode=mode, backend=backend, common_random_numbers=crn)
    shared_seeds = crn or not sweep
    planned: set[str] = set()
    # Identical documents (e.g. the solo runs of flows that differ only in position)
    # are validated, checked and hashed once; their runs are planned once anyway.
    added: dict[tuple[str, str], tuple[str, list[str], Scenario]] = {}

    def add(kind: str, d: dict[str, Any], point: dict[str, Any], suffix: str = "", **extra: Any) -> tuple[str, list[str], Scenario]:
        memo = (kind, canonical_json(d))
        if memo in added:
            return added[memo]
        label = condition_label(point) + suffix
        # A plain scenario's one condition (labelled as the empty sweep point is)
        # needs no name in an error.
        where = source if label == condition_label({}) else f"{source} [{_error_label(point)}{suffix}]"
        model = Scenario.from_dict(d, source=where)
        if check and backend == "sim":
            check_simulatable(model, where)
        elif check and backend == "vm":
            check_vm(model, where)
        elif check:
            check_bottleneck(model, where)
        cond = _condition_id(d, kind)
        keys = []
        physics = None if shared_seeds else model.resolve()
        for k in range(model.runs):
            seed = condition_seed(model.seed, physics, k)
            key = run_key(model.resolve(seed=seed), seed, backend)
            keys.append(key)
            if key in planned:
                continue
            planned.add(key)
            camp.tasks.append(Task(key=key, kind=kind, condition=cond, point=point, label=label, run_index=k, seed=seed, scenario=d, **extra))
        added[memo] = (cond, keys, model)
        return added[memo]

    for point in _points(sweep, mode, source):
        d = apply_point(doc, point, source=source)
        main, _, model = add(MAIN, d, point)
        links: dict[str, dict[Any, list[str]]] = camp.links.setdefault(main, {"calibration": {}, "solo": {}})
        if model.analysis.nru and not model.analysis.calibration_files:
            seen_cca: set[str] = set()
            for f in d["flows"]:
                entry = {"cca": f["cca"], **({"params": f["params"]} if f.get("params") else {})}
                sig = canonical_json(entry)
                if sig in seen_cca:
                    continue
                seen_cca.add(sig)
                links["calibration"][f["cca"]] = add(CALIBRATION, _calibration_doc(d, entry), point, f" | calibration {f['cca']}", for_cca=f["cca"])[1]
        if model.analysis.harm and not model.analysis.baseline_files:
            for i, f in enumerate(d["flows"]):
                links["solo"][i] = add(SOLO, _solo_doc(d, i), point, f" | solo flow {i} ({f['cca']})", for_flow=i)[1]
    return camp


def load_campaign(path: str | Path, *, backend: str = "sim") -> Campaign:
    """Read a scenario/campaign TOML file and expand it."""
    return expand(read_toml(path), source=str(path), backend=backend)
