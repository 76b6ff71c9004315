//! Errors a run can end with. Every refusal of a spec value names the field, the
//! value and what would be accepted.

use netunits::SimTime;

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario document is not valid JSON or does not match [`crate::ScenarioSpec`]
    /// (unknown fields are refused).
    #[error("scenario JSON does not match the engine's spec: {0}")]
    Json(String),
    /// A field has a value the engine cannot run.
    #[error("`{field}` = {value} is not allowed; {allowed}")]
    Invalid {
        /// Dotted path of the field, e.g. `flows[1].rtt_ns`.
        field: String,
        /// The value given.
        value: String,
        /// What would be accepted.
        allowed: String,
    },
    /// A flow's congestion control name or parameter was refused (the message of
    /// `cc::build`, which lists the known names).
    #[error("`{field}`: {source}")]
    Cc {
        /// Dotted path, e.g. `flows[0].cca`.
        field: String,
        /// The controller's error.
        #[source]
        source: crate::cc::CcError,
    },
    /// The bottleneck queue discipline or one of its parameters was refused.
    #[error("`{}`: {}", qdisc_field(.0), .0)]
    Qdisc(#[from] aqm::BuildError),
    /// The progress callback returned `false`.
    #[error("run cancelled at simulated time {at}")]
    Cancelled {
        /// Simulated time reached.
        at: SimTime,
    },
}

impl SimError {
    pub(crate) fn invalid(field: impl Into<String>, value: impl std::fmt::Display, allowed: impl Into<String>) -> Self {
        SimError::Invalid { field: field.into(), value: value.to_string(), allowed: allowed.into() }
    }
}

/// The scenario field a qdisc error is about: the name, or its parameters.
fn qdisc_field(e: &aqm::BuildError) -> &'static str {
    match e {
        aqm::BuildError::UnknownName { .. } => "bottleneck.qdisc",
        _ => "bottleneck.params",
    }
}
