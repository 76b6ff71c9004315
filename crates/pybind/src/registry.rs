//! The engine's name tables, for `fairlab list` and scenario validation.
use pyo3::prelude::*;

/// Every congestion control the simulator has: (name, summary, parameters).
#[pyfunction]
pub(crate) fn cc_registry() -> Vec<(&'static str, &'static str, &'static str)> {
    netsim::cc::REGISTRY.iter().map(|e| (e.name, e.summary, e.params)).collect()
}

/// Every queue discipline: (name, summary, parameters).
#[pyfunction]
pub(crate) fn qdisc_registry() -> Vec<(&'static str, &'static str, &'static str)> {
    aqm::REGISTRY.iter().map(|e| (e.name, e.summary, e.params)).collect()
}
