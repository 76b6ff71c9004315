"""Scenario files: schema, units and resolution for the backends (docs/scenario-format.md)."""

from .model import (
    HEADER_BYTES,
    AnalysisSettings,
    Bottleneck,
    Flow,
    Scenario,
    ScenarioError,
    Variation,
    load_scenario,
    protocol,
    read_toml,
)
from .units import UnitError, parse_buffer, parse_duration, parse_rate, parse_size

__all__ = [
    "HEADER_BYTES",
    "AnalysisSettings",
    "Bottleneck",
    "Flow",
    "Scenario",
    "ScenarioError",
    "UnitError",
    "Variation",
    "load_scenario",
    "protocol",
    "read_toml",
    "parse_buffer",
    "parse_duration",
    "parse_rate",
    "parse_size",
]
