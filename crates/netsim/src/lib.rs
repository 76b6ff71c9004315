//! fairlab's packet-level dumbbell simulator.
//!
//! Read this first: the engine is sans-IO and deterministic (STYLE.md §1, §3, §9).
//! Every entry point takes `now`; nothing here reads a clock, does file I/O or
//! prints. Same scenario + same seed ⇒ bit-identical trace.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;

pub use netunits::{Bandwidth, SimDuration, SimRng, SimTime};
