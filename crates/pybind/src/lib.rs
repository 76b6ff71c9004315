//! `fairlab._core`: the thin PyO3 layer over `netsim` (STYLE.md §11). No logic here.
use pyo3::prelude::*;

/// Version of the compiled core, to check the Python package and the extension match.
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    Ok(())
}
