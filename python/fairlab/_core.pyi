"""Type stubs for the compiled core (crates/pybind). Keep in step with crates/pybind/src."""

from typing import Any, Callable

import numpy as np

class SimulationError(ValueError):
    """The simulator refused a scenario or failed; the message says why."""

class SimulationCancelled(KeyboardInterrupt):
    """The run was cancelled by the caller."""

def core_version() -> str: ...
def engine_hash() -> str: ...
def cc_registry() -> list[tuple[str, str, str]]: ...
def qdisc_registry() -> list[tuple[str, str, str]]: ...
def check(spec_json: str) -> None:
    """Raise SimulationError if the engine would refuse this resolved scenario; runs nothing."""
    ...
def simulate(spec_json: str, progress: Callable[[float], bool | None] | None = None, tcp_probe: bool = False) -> dict[str, Any]:
    """Run one resolved scenario; returns {"flows": {column: np.ndarray}, "bottleneck": {...}, "totals": {...}},
    and with ``tcp_probe`` also "tcp_probe": every TCP sender's state at each ACK."""
    ...

__all__ = ["SimulationCancelled", "SimulationError", "cc_registry", "check", "core_version", "engine_hash", "qdisc_registry", "simulate"]
_ = np
