"""Refuse, before anything runs, a scenario a backend would refuse when it starts.

A campaign plans every condition first and runs them for minutes to hours; a bad
value found only when its run starts fails each of that condition's runs, after
the runs before it. So the planner asks here, once per condition, and the message
names the condition and the field. The names are checked in Python (the message
lists the known ones); everything else — parameters out of range, sizes — is the
engine's own check (`_core.check`), which runs nothing.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable

from ..scenario import Scenario, ScenarioError
from .sim import cca_table, qdisc_table


def check_simulatable(scenario: Scenario, where: str) -> None:
    """Everything the simulator would refuse: a flow `cca` it lacks, a bottleneck
    `qdisc` it lacks, a controller or qdisc parameter out of range."""
    if scenario.offloads:
        raise ScenarioError(f"{where}: field `offloads`: the simulator models hosts with offloads off (MTU-sized packets "
                            "on every link); `offloads = true` runs on the live and vm backends only")
    known = [name for name, _, _ in cca_table()]
    for i, f in enumerate(scenario.flows):
        if f.cca not in known:
            raise _unknown_name(f"{where}: field `flows[{i}].cca`: the simulator has no congestion control", f.cca, known, "ccas")
    _check_qdisc_name(scenario, where)
    _engine_check(scenario, scenario.resolve(), where)


def check_bottleneck(scenario: Scenario, where: str) -> None:
    """What a live run would refuse at the bottleneck: a qdisc or qdisc parameter
    the `aqm` crate refuses (linkem runs that crate; the kernel path translates the
    same names). The flows' congestion controls are the kernel's, checked when the
    run starts against the kernel that runs it."""
    _check_qdisc_name(scenario, where)
    resolved = scenario.resolve()
    resolved.pop("offloads", None)  # a host setting the engine does not read
    # The engine's check also builds controllers; give it one it has, with no
    # parameters, so only the bottleneck (and the backend-neutral flow fields) count.
    resolved["flows"] = [{**f, "cca": "reno", "params": {}} for f in resolved["flows"]]
    _engine_check(scenario, resolved, where)


def check_vm(scenario: Scenario, where: str) -> None:
    """Everything the vm backend would refuse: a congestion control the guest kernel
    lacks, a qdisc Linux lacks, parameters it cannot translate (`vm.plan.check`)."""
    from .vm.errors import VmError
    from .vm.image import find
    from .vm.plan import check

    try:
        check(scenario, find(), where)
    except VmError as e:
        raise ScenarioError(str(e) if str(e).startswith(where) else f"{where}: {e}") from None


def _check_qdisc_name(scenario: Scenario, where: str) -> None:
    qdiscs = [name for name, _, _ in qdisc_table()]
    if scenario.bottleneck.qdisc not in qdiscs:
        raise _unknown_name(f"{where}: field `bottleneck.qdisc`: no queue discipline", scenario.bottleneck.qdisc, qdiscs, "qdiscs")


def _unknown_name(refusal: str, name: str, known: list[str], listing: str) -> ScenarioError:
    """The error for a name a table lacks (a flow's `cca`, the bottleneck's `qdisc`):
    ``refusal`` then the name, the closest known name when one is close (a typo reads
    as a typo, not as a missing feature), and every known name sorted, so the list is
    searchable by eye whatever order the engine's table keeps; ``listing`` is the
    `fairlab list` table that describes them."""
    return ScenarioError(f"{refusal} {name!r}{did_you_mean(name, known)}; known: {', '.join(sorted(known))} "
                         f"(`fairlab list {listing}`)")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name closest to ``name``, or nothing
    when none is close. The tables spell names with underscores (fq_codel, as tc
    does); a hyphen or capitals are the likeliest slips, so they are undone before
    comparing."""
    close = difflib.get_close_matches(name.lower().replace("-", "_"), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _engine_check(scenario: Scenario, resolved: dict, where: str) -> None:
    from .._core import SimulationError, check

    try:
        check(json.dumps(resolved))
    except SimulationError as e:
        raise ScenarioError(f"{where}: {_in_file_terms(str(e), scenario)}") from None


def _in_file_terms(message: str, scenario: Scenario) -> str:
    """The engine numbers flows after `count` expansion; the user's file numbers its
    [[flows]] entries. `flows[10]` of the engine is `flows[1]` of a file whose first
    entry has count = 10."""
    entry = [i for i, f in enumerate(scenario.flows) for _ in range(f.count)]

    def to_file(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return f"flows[{entry[k]}]" if k < len(entry) else m.group(0)

    return re.sub(r"flows\[(\d+)\]", to_file, message)
