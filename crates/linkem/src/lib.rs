//! linkem: fairlab's userspace link emulator, for live runs on kernels without
//! netem/RED/CoDel (DESIGN.md, "link emulator").
//!
//! Read this first: linkem runs in the router namespace of a live dumbbell and
//! bridges Ethernet frames between the sender-side interfaces and the
//! receiver-side interface. Forward frames get their port's one-way delay, then
//! the bottleneck queue discipline (any of `aqm`'s, the same code the simulator
//! uses) and the bottleneck rate; reverse frames go back to the port that owns
//! their destination MAC after the same delay. `docs/linkem.md` has the CLI and
//! config contract and the measurements.
//!
//! Map (one job per module):
//! - [`config`]: the `--config` JSON, checked once, errors name the field.
//! - [`frame`]: Ethernet/IPv4/TCP header reading and CE marking (RFC 791/793/3168).
//! - [`flows`]: dense flow ids and the passive TCP-timestamp RTT estimate.
//! - [`bridge`]: the sans-IO core — frames and `now` in, frames out; fake-time tests.
//! - [`stats`]: the `--stats` JSON lines and their schedule.
//! - [`spin`]: how long before a deadline the loop stops sleeping (adapts to the host).
//! - [`driver`]: the poll loop that reads the clock once per iteration and glues
//!   sockets to the bridge.
//! - [`sys`]: sockets, poll, timers, signals, clock, namespaces — the only `unsafe`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bridge;
pub mod config;
pub mod driver;
pub mod flows;
pub mod frame;
pub mod spin;
pub mod stats;
pub mod sys;
