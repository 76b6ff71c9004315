//! fairlab-dccpgen: a bulk traffic generator for DCCP flows (iperf3 has no
//! DCCP), used by the vm backend to measure the real kernel's CCID2.
//!
//! Read this first: the CLIENT sends payloads as fast as its socket accepts
//! them; the SERVER measures the bytes DELIVERED per reporting interval and
//! writes them as JSON shaped like `iperf3 -J` output, which fairlab's iperf3
//! ingest reads unchanged. The client's first message (the hello) tells the
//! server the interval and duration; the server's answer (READY) starts the
//! clock on both ends. `--proto tcp` runs the same path over TCP,
//! so hosts without DCCP (Linux >= 6.16) can test it end to end.
//! docs/dccpgen.md has the usage, the report format and the timing rule.
//!
//! Map (one job per module):
//! - [`cli`]: the command line, checked once.
//! - [`hello`]: the two opening messages (the client's hello, the server's READY).
//! - [`accounting`]: bytes per interval, sans-IO (times passed in; fake-clock tests).
//! - [`report`]: the iperf3-shaped JSON.
//! - [`run`]: the server and client loops gluing sockets, clock, meter, report.
//! - [`sys`]: sockets, poll, clocks, uname over libc — the only `unsafe`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod accounting;
pub mod cli;
pub mod hello;
pub mod report;
pub mod run;
pub mod sys;
