//! `fairlab._core`: the thin PyO3 layer over `netsim` (STYLE.md §11).
//!
//! Pure Rust lives in `netsim`/`aqm`; each function here only converts arguments in
//! and columnar results out. Errors are mapped in one place (`error.rs`).
use pyo3::prelude::*;

mod error;
mod registry;
mod simulate;

/// Version of the compiled core, to check the Python package and the extension match.
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Fingerprint of the engine sources (netunits, aqm, netsim) this extension was built
/// from; part of every campaign run's content address.
#[pyfunction]
fn engine_hash() -> &'static str {
    env!("FAIRLAB_ENGINE_HASH")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(engine_hash, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::check, m)?)?;
    m.add_function(wrap_pyfunction!(registry::cc_registry, m)?)?;
    m.add_function(wrap_pyfunction!(registry::qdisc_registry, m)?)?;
    error::register(m)?;
    Ok(())
}
