//! `simulate(spec_json, progress=None)`: run the engine, return numpy columns.
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::{SimulationCancelled, SimulationError};

/// Run one resolved scenario (the JSON of `Scenario.resolve()`). `progress`, if given,
/// is called with the simulated time in seconds about once per simulated second and
/// may return False to cancel. Ctrl-C cancels too. `tcp_probe` also returns every TCP
/// sender's state at each ACK (`netsim::AckProbe`) under the key "tcp_probe";
/// `queue_trace` every packet's fate at the bottleneck (`netsim::QueueTrace`) under "queue".
#[pyfunction]
#[pyo3(signature = (spec_json, progress=None, tcp_probe=false, queue_trace=false))]
pub(crate) fn simulate<'py>(
    py: Python<'py>,
    spec_json: &str,
    progress: Option<Bound<'py, PyAny>>,
    tcp_probe: bool,
    queue_trace: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = parse_spec(spec_json)?;
    let mut cancelled_by_signal: Option<PyErr> = None;
    let mut on_progress = |now: netsim::SimTime| -> bool {
        if let Err(e) = py.check_signals() {
            cancelled_by_signal = Some(e);
            return false;
        }
        match &progress {
            Some(cb) => cb.call1((now.as_secs_f64(),)).and_then(|r| r.is_truthy().map(|t| t || r.is_none())).unwrap_or(false),
            None => true,
        }
    };
    let options = netsim::RunOptions { tcp_probe, queue_trace };
    let out = match netsim::run_with(&spec, &options, &mut on_progress) {
        Ok(out) => out,
        Err(netsim::SimError::Cancelled { .. }) => {
            return Err(cancelled_by_signal.unwrap_or_else(|| SimulationCancelled::new_err("simulation cancelled")));
        }
        Err(e) => return Err(SimulationError::new_err(e.to_string())),
    };
    to_dict(py, out)
}

/// Refuse a resolved scenario the engine would refuse, without running it: raises
/// `SimulationError` naming the field, as `simulate` would before its first event.
#[pyfunction]
pub(crate) fn check(spec_json: &str) -> PyResult<()> {
    let spec = parse_spec(spec_json)?;
    netsim::check(&spec).map_err(|e| SimulationError::new_err(e.to_string()))
}

/// The resolved scenario JSON as the engine's spec.
fn parse_spec(spec_json: &str) -> PyResult<netsim::ScenarioSpec> {
    serde_json::from_str(spec_json).map_err(|e| SimulationError::new_err(format!("resolved scenario is malformed: {e}")))
}

fn to_dict(py: Python<'_>, out: netsim::RunOutput) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    let f = out.flows;
    let flows = PyDict::new(py);
    flows.set_item("flow", f.flow.into_pyarray(py))?;
    flows.set_item("t_ns", f.t_ns.into_pyarray(py))?;
    flows.set_item("goodput_bps", f.goodput_bps.into_pyarray(py))?;
    flows.set_item("cwnd_bytes", f.cwnd_bytes.into_pyarray(py))?;
    flows.set_item("srtt_ns", f.srtt_ns.into_pyarray(py))?;
    flows.set_item("rttvar_ns", f.rttvar_ns.into_pyarray(py))?;
    flows.set_item("retransmits", f.retransmits.into_pyarray(py))?;
    flows.set_item("state", f.state.into_pyarray(py))?;
    flows.set_item("phase", f.phase)?;
    d.set_item("flows", flows)?;

    let b = out.bottleneck;
    let bott = PyDict::new(py);
    bott.set_item("t_ns", b.t_ns.into_pyarray(py))?;
    bott.set_item("queue_bytes", b.queue_bytes.into_pyarray(py))?;
    bott.set_item("queue_pkts", b.queue_pkts.into_pyarray(py))?;
    bott.set_item("drops", b.drops.into_pyarray(py))?;
    bott.set_item("marks", b.marks.into_pyarray(py))?;
    bott.set_item("drops_random", b.drops_random.into_pyarray(py))?;
    let names = netsim::BottleneckSamples::reason_names();
    for (name, col) in names.iter().zip(b.drops_by_reason) {
        bott.set_item(format!("drops_{name}"), col.into_pyarray(py))?;
    }
    d.set_item("bottleneck", bott)?;

    let t = out.totals;
    let totals = PyDict::new(py);
    totals.set_item("events", t.events)?;
    totals.set_item("bottleneck_packets", t.bottleneck_packets)?;
    totals.set_item("drops_random", t.drops_random)?;
    totals.set_item("marks", t.marks)?;
    let by_reason = PyDict::new(py);
    for (name, n) in names.iter().zip(t.drops_by_reason) {
        by_reason.set_item(*name, n)?;
    }
    totals.set_item("drops_by_reason", by_reason)?;
    let per_flow = pyo3::types::PyList::empty(py);
    for ft in t.flows {
        let x = PyDict::new(py);
        x.set_item("bytes_sent", ft.bytes_sent)?;
        x.set_item("bytes_delivered", ft.bytes_delivered)?;
        x.set_item("bytes_dropped", ft.bytes_dropped)?;
        x.set_item("bytes_in_flight", ft.bytes_in_flight)?;
        x.set_item("app_bytes", ft.app_bytes)?;
        x.set_item("packets_sent", ft.packets_sent)?;
        x.set_item("retransmits", ft.retransmits)?;
        x.set_item("rtos", ft.rtos)?;
        x.set_item("congestion_events", ft.congestion_events)?;
        x.set_item("completed_ns", ft.completed_ns)?;
        x.set_item("started_ns", ft.started_ns)?;
        per_flow.append(x)?;
    }
    totals.set_item("flows", per_flow)?;
    d.set_item("totals", totals)?;

    if let Some(p) = out.probe {
        let probe = PyDict::new(py);
        probe.set_item("t_ns", p.t_ns.into_pyarray(py))?;
        probe.set_item("flow", p.flow.into_pyarray(py))?;
        probe.set_item("cwnd_segments", p.cwnd_segments.into_pyarray(py))?;
        probe.set_item("current_ssthresh_segments", p.current_ssthresh_segments.into_pyarray(py))?;
        probe.set_item("srtt_ns", p.srtt_ns.into_pyarray(py))?;
        probe.set_item("snd_wnd_bytes", p.snd_wnd_bytes.into_pyarray(py))?;
        probe.set_item("acked_bytes", p.acked_bytes.into_pyarray(py))?;
        probe.set_item("outstanding_bytes", p.outstanding_bytes.into_pyarray(py))?;
        d.set_item("tcp_probe", probe)?;
    }
    if let Some(q) = out.queue {
        let queue = PyDict::new(py);
        queue.set_item("t_ns", q.t_ns.into_pyarray(py))?;
        queue.set_item("flow", q.flow.into_pyarray(py))?;
        queue.set_item("seq", q.seq.into_pyarray(py))?;
        queue.set_item("bytes", q.bytes.into_pyarray(py))?;
        queue.set_item("backlog_bytes", q.backlog_bytes.into_pyarray(py))?;
        queue.set_item("event", q.event.into_pyarray(py))?;
        d.set_item("queue", queue)?;
    }
    Ok(d)
}
