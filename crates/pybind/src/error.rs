//! The one place core errors become Python exceptions (STYLE.md §11).
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(_core, SimulationError, PyValueError, "The simulator refused a scenario or failed; the message says why.");
create_exception!(_core, SimulationCancelled, pyo3::exceptions::PyKeyboardInterrupt, "The run was cancelled by the caller.");

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SimulationError", m.py().get_type::<SimulationError>())?;
    m.add("SimulationCancelled", m.py().get_type::<SimulationCancelled>())?;
    Ok(())
}
