//! fairlab's packet-level dumbbell simulator.
//!
//! Read this first: the engine is sans-IO and deterministic (STYLE.md §1, §3, §9).
//! Every entry point takes `now`; nothing here reads a clock, does file I/O or
//! prints. Same scenario + same seed ⇒ bit-identical trace.
//!
//! Map of the crate:
//! - [`spec`]: the resolved scenario JSON ([`ScenarioSpec`]) and its validation.
//! - [`run`] (in `sim`): topology, event loop, sampling → [`RunOutput`].
//! - `event`: the `(time, sequence)` min-heap.
//! - `tcp/`: TCP sender (SACK/RFC 6675, NewReno/RFC 6582, RFC 6298 RTO, ECN,
//!   pacing, delivery-rate samples) and receiver (delayed ACK, SACK blocks).
//! - `dccp`: DCCP/CCID2 endpoint (RFC 4340/4341).
//! - [`cc`]: the congestion-control trait and one file per algorithm.
//! - [`output`]: columnar samples and totals.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
mod dccp;
mod error;
mod event;
pub mod output;
pub mod packet;
mod rtt;
mod sim;
pub mod spec;
mod tcp;
mod timers;

pub use error::SimError;
pub use netunits::{Bandwidth, SimDuration, SimRng, SimTime};
pub use output::{AckProbe, BottleneckSamples, FlowSamples, FlowState, FlowTotals, QueueEvent, QueueTrace, RunOutput, RunTotals};
pub use sim::{check, run, run_with, RunOptions, FLOW_STREAM_BASE, LOSS_STREAM, QDISC_STREAM};
pub use spec::{BottleneckSpec, BufferSpec, FlowSpec, ScenarioSpec, CCID2};
pub use tcp::CaState;
