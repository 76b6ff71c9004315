//! The `--config` file: a JSON object written by fairlab's live backend.
//!
//! Every field is checked here, once; a bad field gives a one-line error that names
//! the field and what would be accepted, and `main` exits with code 2. Unknown keys
//! are refused (at every level) so a typo never silently falls back to a default.
//! The discipline's own `params` are checked by `aqm::build`, not here.

use aqm::{Limit, Params};
use netunits::{Bandwidth, SimDuration};
use serde_json::{Map, Value};

/// Longest interface name Linux accepts (`IFNAMSIZ` is 16 including the NUL).
const IFNAME_MAX: usize = 15;
/// Rates below 1 kbit/s would make one 1500-byte frame take 12 s: surely a unit slip.
const RATE_MIN_BPS: u64 = 1_000;
/// Far above anything a 2-core userspace bridge can move; guards against overflow-ish typos.
const RATE_MAX_BPS: u64 = 400_000_000_000;
/// One-way delays above 10 s are not a propagation delay any scenario means.
const DELAY_MAX_NS: u64 = 10_000_000_000;

/// One sender-side interface and the one-way propagation delay of the flows behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderPort {
    /// Interface name in the router namespace.
    pub iface: String,
    /// Added once in each direction, so the base RTT is twice this.
    pub one_way_delay: SimDuration,
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The live run's id (used in messages only).
    pub run_id: String,
    /// Sender-side ports, in the order their index is used everywhere else.
    pub sender_ports: Vec<SenderPort>,
    /// The receiver-side interface.
    pub receiver_iface: String,
    /// Bottleneck rate; `None` means unlimited (benchmarks only; an extension of the
    /// contract, which always sends a number).
    pub rate: Option<Bandwidth>,
    /// Rate of the reverse (ACK) path; `None` means unlimited.
    pub reverse_rate: Option<Bandwidth>,
    /// The bottleneck buffer (hard limit of every discipline).
    pub buffer: Limit,
    /// Name of the queue discipline (checked against `aqm::REGISTRY` by `aqm::build`).
    pub qdisc: String,
    /// The discipline's parameters, unit-parsed by `fairlab.scenario`.
    pub params: Params,
    /// Run seed; the qdisc's RNG stream derives from it.
    pub seed: u64,
    /// Period of the stats lines.
    pub sample_interval: SimDuration,
    /// Typical packet size (RED's `mean_pktsize`, packet-denominated defaults).
    pub mean_packet_bytes: u32,
    /// The scenario's reference RTT, for qdisc defaults that scale with it.
    pub reference_rtt: SimDuration,
}

/// A field the config got wrong, named as in the JSON file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("config field `{field}`: {problem}; allowed: {allowed}")]
pub struct ConfigError {
    /// Dotted path of the field (`sender_ports[0].iface`).
    pub field: String,
    /// What was wrong.
    pub problem: String,
    /// What would be accepted.
    pub allowed: String,
}

fn err(field: impl Into<String>, problem: impl Into<String>, allowed: impl Into<String>) -> ConfigError {
    ConfigError { field: field.into(), problem: problem.into(), allowed: allowed.into() }
}

/// Short form of a JSON value for error messages (a huge array should not flood the line).
fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

/// Reads the keys of one JSON object and refuses any key nobody asked for.
struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
    allowed: &'static [&'static str],
}

impl<'a> Obj<'a> {
    fn new(path: &str, v: &'a Value, allowed: &'static [&'static str]) -> Result<Self, ConfigError> {
        let map = v.as_object().ok_or_else(|| err(path, format!("got {}", show(v)), "a JSON object"))?;
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let field = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            return Err(err(field, "unknown field", format!("one of {}", allowed.join(", "))));
        }
        Ok(Obj { path: path.to_string(), map, allowed })
    }

    fn field(&self, key: &str) -> String {
        debug_assert!(self.allowed.contains(&key));
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn required(&self, key: &str, allowed: &str) -> Result<&'a Value, ConfigError> {
        self.map.get(key).ok_or_else(|| err(self.field(key), "missing", allowed))
    }

    /// An integer in `[lo, hi]`.
    fn u64(&self, key: &str, lo: u64, hi: u64, allowed: &str) -> Result<u64, ConfigError> {
        let v = self.required(key, allowed)?;
        match v.as_u64() {
            Some(x) if (lo..=hi).contains(&x) => Ok(x),
            _ => Err(err(self.field(key), format!("got {}", show(v)), allowed)),
        }
    }

    /// An integer in `[lo, hi]` or `null` (or absent, when `may_be_absent`).
    fn opt_u64(&self, key: &str, lo: u64, hi: u64, may_be_absent: bool, allowed: &str) -> Result<Option<u64>, ConfigError> {
        match self.map.get(key) {
            None if may_be_absent => Ok(None),
            None => Err(err(self.field(key), "missing", allowed)),
            Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(x) if (lo..=hi).contains(&x) => Ok(Some(x)),
                _ => Err(err(self.field(key), format!("got {}", show(v)), allowed)),
            },
        }
    }

    fn str(&self, key: &str, allowed: &str) -> Result<&'a str, ConfigError> {
        let v = self.required(key, allowed)?;
        v.as_str().ok_or_else(|| err(self.field(key), format!("got {}", show(v)), allowed))
    }

    fn iface(&self, key: &str) -> Result<String, ConfigError> {
        const ALLOWED: &str = "an interface name of 1 to 15 characters, no '/', ':' or whitespace";
        let s = self.str(key, ALLOWED)?;
        let ok = !s.is_empty()
            && s.len() <= IFNAME_MAX
            && s != "."
            && s != ".."
            && !s.chars().any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
        if ok {
            Ok(s.to_string())
        } else {
            Err(err(self.field(key), format!("got {s:?}"), ALLOWED))
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "run_id",
    "sender_ports",
    "receiver_port",
    "rate_bps",
    "reverse_rate_bps",
    "buffer",
    "qdisc",
    "params",
    "seed",
    "sample_interval_ns",
    "mean_packet_bytes",
    "reference_rtt_ns",
];

impl Config {
    /// Parse and check a config file's text.
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| err("(file)", format!("not valid JSON: {e}"), "one JSON object as in docs/linkem.md"))?;
        Self::from_value(&v)
    }

    /// Check an already-parsed JSON value.
    pub fn from_value(v: &Value) -> Result<Config, ConfigError> {
        let top = Obj::new("", v, TOP_KEYS)?;

        let run_id = top.str("run_id", "a non-empty string")?;
        if run_id.is_empty() {
            return Err(err("run_id", "empty", "a non-empty string"));
        }

        let ports_v = top.required("sender_ports", "a non-empty array of {\"iface\", \"one_way_delay_ns\"}")?;
        let ports_a = match ports_v.as_array() {
            Some(a) if !a.is_empty() => a,
            _ => {
                return Err(err(
                    "sender_ports",
                    format!("got {}", show(ports_v)),
                    "a non-empty array of {\"iface\", \"one_way_delay_ns\"}",
                ))
            }
        };
        let mut sender_ports = Vec::with_capacity(ports_a.len());
        for (i, p) in ports_a.iter().enumerate() {
            let o = Obj::new(&format!("sender_ports[{i}]"), p, &["iface", "one_way_delay_ns"])?;
            let iface = o.iface("iface")?;
            let d = o.u64("one_way_delay_ns", 0, DELAY_MAX_NS, "an integer number of nanoseconds from 0 to 10000000000 (10 s)")?;
            sender_ports.push(SenderPort { iface, one_way_delay: SimDuration::from_nanos(d) });
        }

        let recv = Obj::new("receiver_port", top.required("receiver_port", "an object {\"iface\": NAME}")?, &["iface"])?;
        let receiver_iface = recv.iface("iface")?;

        // An interface bound twice would receive its own forwarded frames as new arrivals.
        let mut names: Vec<&str> = sender_ports.iter().map(|p| p.iface.as_str()).collect();
        names.push(&receiver_iface);
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                let field = if i == names.len() - 1 { "receiver_port.iface".to_string() } else { format!("sender_ports[{i}].iface") };
                return Err(err(field, format!("{n:?} is used twice"), "distinct interfaces for every port"));
            }
        }

        const RATE_ALLOWED: &str = "an integer number of bits/s from 1000 to 400000000000, or null for unlimited";
        let rate = top.opt_u64("rate_bps", RATE_MIN_BPS, RATE_MAX_BPS, false, RATE_ALLOWED)?.map(Bandwidth::from_bps);
        let reverse_rate =
            top.opt_u64("reverse_rate_bps", RATE_MIN_BPS, RATE_MAX_BPS, true, RATE_ALLOWED)?.map(Bandwidth::from_bps);

        const BUF_ALLOWED: &str = "{\"bytes\": N} or {\"packets\": N} with an integer N >= 1";
        let buf_v = top.required("buffer", BUF_ALLOWED)?;
        let buf = Obj::new("buffer", buf_v, &["bytes", "packets"])?;
        let buffer = match (buf.map.contains_key("bytes"), buf.map.contains_key("packets")) {
            (true, false) => Limit::Bytes(buf.u64("bytes", 1, u64::MAX, BUF_ALLOWED)?),
            (false, true) => Limit::Packets(buf.u64("packets", 1, u64::MAX, BUF_ALLOWED)?),
            _ => return Err(err("buffer", format!("got {}", show(buf_v)), BUF_ALLOWED)),
        };

        let qdisc = top.str("qdisc", &format!("one of {}", aqm::known_names()))?.to_string();
        let params = match v.get("params") {
            None => Params::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(p) => return Err(err("params", format!("got {}", show(p)), "a JSON object of the discipline's parameters")),
        };

        let seed = top.u64("seed", 0, u64::MAX, "a non-negative integer")?;
        let sample_interval = SimDuration::from_nanos(top.u64(
            "sample_interval_ns",
            1_000_000,
            3_600_000_000_000,
            "an integer number of nanoseconds from 1000000 (1 ms) to 3600000000000 (1 h)",
        )?);
        let mean_packet_bytes = top.u64("mean_packet_bytes", 1, 65_535, "an integer from 1 to 65535")? as u32;
        let reference_rtt = SimDuration::from_nanos(top.u64(
            "reference_rtt_ns",
            1,
            3_600_000_000_000,
            "an integer number of nanoseconds from 1 to 3600000000000",
        )?);

        Ok(Config {
            run_id: run_id.to_string(),
            sender_ports,
            receiver_iface,
            rate,
            reverse_rate,
            buffer,
            qdisc,
            params,
            seed,
            sample_interval,
            mean_packet_bytes,
            reference_rtt,
        })
    }

    /// What every discipline is built with besides its own parameters.
    pub fn qdisc_context(&self) -> aqm::QdiscContext {
        aqm::QdiscContext {
            limit: self.buffer,
            // An unlimited link still needs a rate for RED's idle-time estimate and
            // PIE's drain rate; 100 Gbit/s is "faster than anything here".
            rate_bps: self.rate.map_or(100_000_000_000, |r| r.as_bps()),
            mean_packet_bytes: self.mean_packet_bytes,
            reference_rtt: self.reference_rtt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({"run_id": "fl-ab12",
         "sender_ports": [{"iface": "fl-ab12-a0", "one_way_delay_ns": 25000000}],
         "receiver_port": {"iface": "fl-ab12-b"},
         "rate_bps": 100000000, "reverse_rate_bps": null,
         "buffer": {"bytes": 1250000},
         "qdisc": "droptail", "params": {},
         "seed": 1, "sample_interval_ns": 1000000000,
         "mean_packet_bytes": 1500, "reference_rtt_ns": 100000000})
    }

    fn with(k: &str, v: Value) -> Value {
        let mut g = good();
        g[k] = v;
        g
    }

    #[test]
    fn the_documented_example_parses() {
        let c = Config::from_value(&good()).unwrap();
        assert_eq!(c.sender_ports[0].one_way_delay, SimDuration::from_millis(25));
        assert_eq!(c.rate, Some(Bandwidth::from_mbps(100)));
        assert_eq!(c.reverse_rate, None);
        assert_eq!(c.buffer, Limit::Bytes(1_250_000));
        assert_eq!(c.receiver_iface, "fl-ab12-b");
    }

    #[test]
    fn unknown_fields_are_refused_at_every_level() {
        let e = Config::from_value(&with("rate", json!(1))).unwrap_err();
        assert_eq!(e.field, "rate");
        assert!(e.to_string().contains("rate_bps"), "{e}");
        let mut g = good();
        g["sender_ports"][0]["delay_ns"] = json!(1);
        assert_eq!(Config::from_value(&g).unwrap_err().field, "sender_ports[0].delay_ns");
        let e = Config::from_value(&with("buffer", json!({"bytes": 1, "pkts": 2}))).unwrap_err();
        assert_eq!(e.field, "buffer.pkts");
    }

    #[test]
    fn bad_values_name_the_field_and_what_is_allowed() {
        for (k, v) in [
            ("rate_bps", json!("100Mbit")),
            ("rate_bps", json!(0)),
            ("reverse_rate_bps", json!(-5)),
            ("seed", json!(1.5)),
            ("sample_interval_ns", json!(10)),
            ("mean_packet_bytes", json!(0)),
            ("reference_rtt_ns", json!(0)),
            ("qdisc", json!(3)),
            ("params", json!([1])),
            ("run_id", json!("")),
            ("sender_ports", json!([])),
        ] {
            let e = Config::from_value(&with(k, v.clone())).unwrap_err();
            assert_eq!(e.field, k, "{k}={v}: {e}");
            assert!(!e.allowed.is_empty());
            assert!(!e.to_string().contains('\n'));
        }
        let e = Config::from_value(&with("buffer", json!({"bytes": 1, "packets": 2}))).unwrap_err();
        assert_eq!(e.field, "buffer");
        let e = Config::from_value(&with("buffer", json!({"packets": 0}))).unwrap_err();
        assert_eq!(e.field, "buffer.packets");
    }

    #[test]
    fn missing_required_field_is_named() {
        let mut g = good();
        g.as_object_mut().unwrap().remove("seed");
        assert_eq!(Config::from_value(&g).unwrap_err().field, "seed");
        // rate_bps must be present (null is the explicit "unlimited").
        let mut g = good();
        g.as_object_mut().unwrap().remove("rate_bps");
        assert_eq!(Config::from_value(&g).unwrap_err().field, "rate_bps");
    }

    #[test]
    fn interface_names_are_checked_and_distinct() {
        let mut g = good();
        g["sender_ports"][0]["iface"] = json!("a-name-that-is-too-long");
        assert_eq!(Config::from_value(&g).unwrap_err().field, "sender_ports[0].iface");
        let mut g = good();
        g["receiver_port"]["iface"] = json!("fl-ab12-a0");
        assert_eq!(Config::from_value(&g).unwrap_err().field, "receiver_port.iface");
    }

    #[test]
    fn null_rate_means_unlimited_and_packets_buffer_parses() {
        let mut g = with("rate_bps", Value::Null);
        g["buffer"] = json!({"packets": 100});
        let c = Config::from_value(&g).unwrap();
        assert_eq!(c.rate, None);
        assert_eq!(c.buffer, Limit::Packets(100));
        assert_eq!(c.qdisc_context().limit_packets(), 100);
    }
}
