//! `linkem --config CONFIG.json [--stats STATS.jsonl]`: see `docs/linkem.md`.
//!
//! Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad command line or config (one
//! line on stderr naming the config file, the field and what is allowed), 1 for a runtime failure
//! (an interface that cannot be opened, a socket error).
#![deny(unsafe_code)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::BufWriter;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;

use aqm::BuildError;
use linkem::bridge::{Bridge, BridgeSetup, Frame};
use linkem::config::{Config, ConfigError};
use linkem::driver::{self, Ports};
use linkem::stats::Schedule;

const USAGE: &str = "usage: linkem --config CONFIG.json [--stats STATS.jsonl]";
/// Stream id of the bottleneck discipline's RNG within the run seed (STYLE.md §9).
const QDISC_RNG_STREAM: u64 = 1;

struct Args {
    config: PathBuf,
    stats: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut config = None;
    let mut stats = None;
    // `args_os`: a path need not be UTF-8 (`std::env::args` would panic on one).
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        let bytes = a.as_bytes();
        let (flag, inline) = match bytes.iter().position(|&b| b == b'=') {
            Some(i) if bytes.starts_with(b"--") => (&bytes[..i], Some(OsStr::from_bytes(&bytes[i + 1..]).to_owned())),
            _ => (bytes, None),
        };
        let slot = match flag {
            b"--config" => &mut config,
            b"--stats" => &mut stats,
            b"-h" | b"--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {a:?}")),
        };
        let flag = String::from_utf8_lossy(flag);
        let v = match inline {
            Some(v) => v,
            None => it.next().ok_or_else(|| format!("{flag} needs a path"))?,
        };
        if slot.replace(PathBuf::from(v)).is_some() {
            return Err(format!("{flag} given twice"));
        }
    }
    Ok(Args { config: config.ok_or("--config is required")?, stats })
}

/// The qdisc's own errors, phrased as config-field errors.
fn qdisc_error(e: BuildError) -> ConfigError {
    match e {
        BuildError::UnknownName { name, known } => {
            ConfigError { field: "qdisc".into(), problem: format!("got {name:?}"), allowed: format!("one of {known}") }
        }
        BuildError::UnknownParam { qdisc, param, known } => ConfigError {
            field: format!("params.{param}"),
            problem: format!("unknown parameter for qdisc {qdisc}"),
            allowed: format!("one of {known}"),
        },
        BuildError::Config(c) => ConfigError {
            field: format!("params.{}", c.param),
            problem: format!("got {} for qdisc {}", c.value, c.qdisc),
            allowed: c.allowed.into(),
        },
    }
}

fn build_bridge(cfg: &Config) -> Result<Bridge, ConfigError> {
    let qdisc = aqm::build::<Frame>(&cfg.qdisc, &cfg.params, &cfg.qdisc_context()).map_err(qdisc_error)?;
    Bridge::new(BridgeSetup {
        delays: cfg.sender_ports.iter().map(|p| p.one_way_delay).collect(),
        rate: cfg.rate,
        reverse_rate: cfg.reverse_rate,
        reverse_limit: cfg.buffer,
        qdisc,
        rng: netunits::rng_stream(cfg.seed, QDISC_RNG_STREAM),
    })
    .map_err(|e| qdisc_error(BuildError::Config(e)))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(m) if m.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(m) => {
            eprintln!("linkem: {m}; {USAGE}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("linkem: cannot read --config {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let cfg = match Config::from_json(&text) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("linkem: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let mut bridge = match build_bridge(&cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("linkem: {}: {e}", args.config.display());
            return ExitCode::from(2);
        }
    };
    let stats = match &args.stats {
        None => None,
        Some(p) => match File::create(p) {
            Ok(f) => Some(BufWriter::new(f)),
            Err(e) => {
                eprintln!("linkem: cannot create --stats {}: {e}", p.display());
                return ExitCode::from(2);
            }
        },
    };
    let mut names: Vec<&str> = cfg.sender_ports.iter().map(|p| p.iface.as_str()).collect();
    names.push(&cfg.receiver_iface);
    let mut ports = match Ports::open(&names) {
        Ok(p) => p,
        Err(m) => {
            eprintln!("linkem: run {}: {m}", cfg.run_id);
            return ExitCode::from(1);
        }
    };
    match driver::run(&mut bridge, &mut ports, stats, Schedule::new(cfg.sample_interval)) {
        Ok(h) => {
            let c = bridge.counters();
            let t = bridge.totals();
            eprintln!(
                "linkem: run {} stopped: forwarded {} pkts / {} B, qdisc drops {}, marks {}, reverse {} pkts ({} dropped), flooded {}, flows {}, tx errors {}{}, gso aggregates {}, truncated {}, kernel rx drops {}, rx rings {}/{} ports, rx wait max {} us (>1ms: {}), iterations {}, lateness max {} us (>100us: {}, >1ms: {}), timer wake-up late max {} us, spin window max {} us",
                cfg.run_id,
                t.forwarded_pkts,
                t.forwarded_bytes,
                c.total_drops(),
                c.total_marks(),
                t.reverse_pkts,
                t.reverse_drops,
                t.flooded,
                bridge.flow_count(),
                h.tx_errors,
                h.first_tx_error.map(|e| format!(" (first: {e})")).unwrap_or_default(),
                h.gso_frames,
                h.truncated,
                h.kernel_drops,
                h.ring_ports,
                names.len(),
                h.rx_wait_max_ns / 1000,
                h.rx_wait_over_1ms,
                h.iterations,
                h.max_late_ns / 1000,
                h.late_over_100us,
                h.late_over_1ms,
                h.timer_late_max_ns / 1000,
                h.spin_max_ns / 1000
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("linkem: run {}: {e}", cfg.run_id);
            ExitCode::from(1)
        }
    }
}
