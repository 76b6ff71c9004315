//! The command line: parsed and checked once; an error names the option, what
//! it got and what is allowed (the binary prints it on one line and exits 2).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use crate::sys::Proto;

/// Usage text for `--help` and for errors.
pub const USAGE: &str = "\
usage: fairlab-dccpgen server --port P [--bind ADDR] [--once] [--output FILE] [--proto dccp|tcp] [--service-code N]
       fairlab-dccpgen client --host ADDR --port P --time SECONDS --interval SECONDS [--ccid 2|3]
                              [--service-code N] [--packet-size BYTES] [--json] [--proto dccp|tcp]
The server measures delivered bytes per interval and writes an iperf3-shaped JSON report
(stdout, or --output FILE with --once); see docs/dccpgen.md.";

/// Shortest reporting interval accepted, ns (1 ms: shorter is below the timer slack of a guest).
pub const MIN_INTERVAL_NS: u64 = 1_000_000;
/// Longest test accepted, ns (one million seconds).
pub const MAX_DURATION_NS: u64 = 1_000_000 * 1_000_000_000;
/// The DCCP service code RFC 4340 §8.1.2 reserves as invalid.
pub const INVALID_SERVICE_CODE: u32 = u32::MAX;

/// A parsed command.
#[derive(Debug, PartialEq)]
pub enum Command {
    /// Receive, measure, report.
    Server(ServerArgs),
    /// Send as fast as the socket accepts.
    Client(ClientArgs),
    /// Print usage and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
}

/// `server` options.
#[derive(Debug, PartialEq)]
pub struct ServerArgs {
    /// Listen address (port 0 = any free port; the chosen one is printed).
    pub listen: SocketAddr,
    /// Serve one connection, then exit.
    pub once: bool,
    /// Write the report here (atomically) instead of stdout; needs `once`.
    pub output: Option<PathBuf>,
    /// DCCP or TCP.
    pub proto: Proto,
    /// DCCP service code the clients must present.
    pub service_code: u32,
}

/// `client` options.
#[derive(Debug, PartialEq)]
pub struct ClientArgs {
    /// Server address (an IP literal: names are not resolved).
    pub server: SocketAddr,
    /// Test duration, ns.
    pub duration_ns: u64,
    /// Reporting interval, ns.
    pub interval_ns: u64,
    /// DCCP CCID to ask for.
    pub ccid: u8,
    /// DCCP service code.
    pub service_code: u32,
    /// Payload bytes per send; None = the connection's MPS (DCCP) or 128 KiB (TCP).
    pub packet_size: Option<u32>,
    /// Print the sender-side report as JSON instead of a one-line summary.
    pub json: bool,
    /// DCCP or TCP.
    pub proto: Proto,
}

/// Parse `args` (without the program name).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut it = args.into_iter();
    let sub = it.next().ok_or("a subcommand is required (server or client)")?;
    let opts = Opts::collect(it)?;
    match sub.as_str() {
        "server" => server(opts),
        "client" => client(opts),
        "-h" | "--help" | "help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        other => Err(format!("unknown subcommand {other:?}; allowed: server, client")),
    }
}

/// `--name value` / `--name=value` pairs and bare flags, in order.
struct Opts {
    items: Vec<(String, Option<String>)>,
}

const FLAGS: [&str; 4] = ["--once", "--json", "--help", "-h"];

impl Opts {
    fn collect<I: Iterator<Item = String>>(mut it: I) -> Result<Opts, String> {
        let mut items: Vec<(String, Option<String>)> = Vec::new();
        while let Some(a) = it.next() {
            if !a.starts_with('-') {
                return Err(format!("unexpected argument {a:?}; options start with --"));
            }
            let (name, inline) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (a.clone(), None),
            };
            if items.iter().any(|(n, _)| *n == name) {
                return Err(format!("{name} is given twice"));
            }
            if FLAGS.contains(&name.as_str()) {
                if inline.is_some() {
                    return Err(format!("{name} takes no value"));
                }
                items.push((name, None));
            } else {
                let v = match inline {
                    Some(v) => v,
                    None => it.next().ok_or_else(|| format!("{name} needs a value"))?,
                };
                items.push((name, Some(v)));
            }
        }
        Ok(Opts { items })
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        for (n, _) in &self.items {
            if !known.contains(&n.as_str()) {
                return Err(format!("unknown option {n}; allowed here: {}", known.join(", ")));
            }
        }
        Ok(())
    }

    fn flag(&self, name: &str) -> bool {
        self.items.iter().any(|(n, _)| n == name)
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.items.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.as_deref())
    }

    fn required(&self, name: &str) -> Result<&str, String> {
        self.value(name).ok_or_else(|| format!("{name} is required"))
    }
}

fn bad(name: &str, got: &str, allowed: &str) -> String {
    format!("{name}: got {got:?}; allowed: {allowed}")
}

fn port(name: &str, v: &str, zero_ok: bool) -> Result<u16, String> {
    let allowed = if zero_ok { "0 (any free port) to 65535" } else { "1 to 65535" };
    match v.parse::<u16>() {
        Ok(p) if p > 0 || zero_ok => Ok(p),
        _ => Err(bad(name, v, allowed)),
    }
}

fn ip(name: &str, v: &str) -> Result<IpAddr, String> {
    // Names are not resolved: a static glibc binary cannot load NSS modules reliably.
    v.parse::<IpAddr>().map_err(|_| bad(name, v, "an IPv4 or IPv6 address (names are not resolved)"))
}

/// Seconds as a decimal number -> ns, within `[min_ns, max_ns]`.
fn seconds(name: &str, v: &str, min_ns: u64, max_ns: u64) -> Result<u64, String> {
    let allowed = || format!("a number of seconds from {} to {}", min_ns as f64 / 1e9, max_ns as f64 / 1e9);
    let s: f64 = v.parse().map_err(|_| bad(name, v, &allowed()))?;
    if !s.is_finite() {
        return Err(bad(name, v, &allowed()));
    }
    let ns = (s * 1e9).round();
    if ns < min_ns as f64 || ns > max_ns as f64 {
        return Err(bad(name, v, &allowed()));
    }
    Ok(ns as u64)
}

fn proto(o: &Opts) -> Result<Proto, String> {
    match o.value("--proto").unwrap_or("dccp") {
        "dccp" => Ok(Proto::Dccp),
        "tcp" => Ok(Proto::Tcp),
        v => Err(bad("--proto", v, "dccp, tcp")),
    }
}

fn service_code(o: &Opts, p: Proto) -> Result<u32, String> {
    let Some(v) = o.value("--service-code") else { return Ok(0) };
    if p != Proto::Dccp {
        return Err("--service-code is a DCCP option; drop it with --proto tcp".into());
    }
    match v.parse::<u32>() {
        Ok(c) if c != INVALID_SERVICE_CODE => Ok(c),
        _ => Err(bad("--service-code", v, "an integer from 0 to 4294967294 (RFC 4340 §8.1.2 reserves 4294967295)")),
    }
}

fn server(o: Opts) -> Result<Command, String> {
    if o.flag("--help") || o.flag("-h") {
        return Ok(Command::Help);
    }
    o.check_known(&["--port", "--bind", "--once", "--output", "--proto", "--service-code"])?;
    let p = proto(&o)?;
    let bind = match o.value("--bind") {
        Some(v) => ip("--bind", v)?,
        // IPv4 by default: DCCP over IPv6 needs the separate dccp_ipv6 module.
        None => IpAddr::from([0, 0, 0, 0]),
    };
    let once = o.flag("--once");
    let output = o.value("--output").map(PathBuf::from);
    if output.is_some() && !once {
        return Err("--output needs --once (one report per file)".into());
    }
    Ok(Command::Server(ServerArgs {
        listen: SocketAddr::new(bind, port("--port", o.required("--port")?, true)?),
        once,
        output,
        proto: p,
        service_code: service_code(&o, p)?,
    }))
}

fn client(o: Opts) -> Result<Command, String> {
    if o.flag("--help") || o.flag("-h") {
        return Ok(Command::Help);
    }
    o.check_known(&[
        "--host",
        "--port",
        "--time",
        "--interval",
        "--ccid",
        "--service-code",
        "--packet-size",
        "--json",
        "--proto",
    ])?;
    let p = proto(&o)?;
    let host = ip("--host", o.required("--host")?)?;
    let duration_ns = seconds("--time", o.required("--time")?, MIN_INTERVAL_NS, MAX_DURATION_NS)?;
    let interval_ns = seconds("--interval", o.required("--interval")?, MIN_INTERVAL_NS, MAX_DURATION_NS)?;
    if interval_ns > duration_ns {
        return Err(format!(
            "--interval {} is longer than --time {}; allowed: an interval no longer than the test",
            interval_ns as f64 / 1e9,
            duration_ns as f64 / 1e9
        ));
    }
    let ccid = match o.value("--ccid") {
        None => 2,
        Some(_) if p != Proto::Dccp => return Err("--ccid is a DCCP option; drop it with --proto tcp".into()),
        // RFC 4340 §10: CCID 2 (TCP-like, RFC 4341) and 3 (TFRC, RFC 4342) are what Linux implements.
        Some("2") => 2,
        Some("3") => 3,
        Some(v) => return Err(bad("--ccid", v, "2 (TCP-like, RFC 4341) or 3 (TFRC, RFC 4342)")),
    };
    let packet_size = match o.value("--packet-size") {
        None => None,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=16 << 20).contains(&n) => Some(n),
            _ => return Err(bad("--packet-size", v, "1 to 16777216 bytes (DCCP: at most the connection's MPS)")),
        },
    };
    Ok(Command::Client(ClientArgs {
        server: SocketAddr::new(host, port("--port", o.required("--port")?, false)?),
        duration_ns,
        interval_ns,
        ccid,
        service_code: service_code(&o, p)?,
        packet_size,
        json: o.flag("--json"),
        proto: p,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn a_full_client_line_parses_to_its_values() {
        let c = parse(args(
            "client --host 10.0.0.2 --port 5001 --time 2.5 --interval=0.5 --ccid 2 --service-code 42 --packet-size 1000 --json",
        ))
        .unwrap();
        assert_eq!(
            c,
            Command::Client(ClientArgs {
                server: "10.0.0.2:5001".parse().unwrap(),
                duration_ns: 2_500_000_000,
                interval_ns: 500_000_000,
                ccid: 2,
                service_code: 42,
                packet_size: Some(1000),
                json: true,
                proto: Proto::Dccp,
            })
        );
    }

    #[test]
    fn server_defaults_are_ipv4_any_and_dccp() {
        let c = parse(args("server --port 5001")).unwrap();
        assert_eq!(
            c,
            Command::Server(ServerArgs {
                listen: "0.0.0.0:5001".parse().unwrap(),
                once: false,
                output: None,
                proto: Proto::Dccp,
                service_code: 0,
            })
        );
        let c = parse(args("server --port 0 --bind ::1 --once --output r.json --proto tcp")).unwrap();
        let Command::Server(s) = c else { panic!() };
        assert_eq!((s.listen, s.once, s.proto), ("[::1]:0".parse().unwrap(), true, Proto::Tcp));
    }

    #[test]
    fn bad_values_name_the_option_and_what_is_allowed() {
        let cases = [
            ("client --host h.example --port 1 --time 1 --interval 1", "--host"),
            ("client --host 1.2.3.4 --port 0 --time 1 --interval 1", "--port"),
            ("client --host 1.2.3.4 --port 1 --time -1 --interval 1", "--time"),
            ("client --host 1.2.3.4 --port 1 --time nan --interval 1", "--time"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 0", "--interval"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --ccid 4", "--ccid"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --packet-size 0", "--packet-size"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --service-code 4294967295", "--service-code"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --proto udp", "--proto"),
            ("server --port 70000", "--port"),
        ];
        for (line, opt) in cases {
            let e = parse(args(line)).unwrap_err();
            assert!(e.starts_with(opt) && e.contains("allowed"), "{line}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn structural_mistakes_are_refused() {
        for (line, what) in [
            ("", "subcommand"),
            ("serve --port 1", "unknown subcommand"),
            ("server", "--port is required"),
            ("server --port 1 --port 2", "twice"),
            ("server --port 1 --output x", "needs --once"),
            ("server --port 1 --time 3", "unknown option --time"),
            ("client --host 1.2.3.4 --port 1 --time 1", "--interval is required"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 2", "longer than --time"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --proto tcp --ccid 2", "DCCP option"),
            ("client --host 1.2.3.4 --port 1 --time 1 --interval 1 --json=yes", "takes no value"),
            ("client stray", "unexpected argument"),
            ("client --host", "needs a value"),
        ] {
            let e = parse(args(line)).unwrap_err();
            assert!(e.contains(what), "{line:?}: {e}");
        }
        assert_eq!(parse(args("--help")).unwrap(), Command::Help);
        assert_eq!(parse(args("client --help")).unwrap(), Command::Help);
    }
}
