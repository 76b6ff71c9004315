//! The resolved scenario the engine runs ([`ScenarioSpec`]), as JSON produced by
//! Python's `fairlab.scenario` (`Scenario.resolve()`): every unit already an
//! integer (ns, bits/s, bytes). Unknown fields are refused so a typo never runs
//! silently with a default.

use serde::{Deserialize, Serialize};

use crate::error::SimError;

/// A whole run: one dumbbell, its flows, and how to sample them.
///
/// ```json
/// {"name": "x", "seed": 1, "duration_ns": 300000000000, "interval_ns": 1000000000,
///  "bottleneck": {"rate_bps": 100000000, "buffer": {"packets": 833}, "qdisc": "droptail",
///                 "params": {}, "reference_rtt_ns": 100000000, "loss_rate": 0.0},
///  "access_rate_bps": 1000000000, "start_jitter_ns": 0, "host_jitter_ns": 0,
///  "flows": [{"cca": "cubic", "params": {}, "rtt_ns": 100000000, "start_ns": 0,
///             "stop_ns": null, "bytes": null, "rwnd_bytes": null, "ecn": false,
///             "mss": 1448, "sack": true, "delayed_ack": true,
///             "delack_timeout_ns": 40000000, "initial_cwnd": 10}]}
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Free-form run name (not used by the engine).
    pub name: String,
    /// Run seed. Every random stream is `rng_stream(seed, component)`.
    pub seed: u64,
    /// Simulated length of the run, ns (> 0).
    pub duration_ns: u64,
    /// Sampling interval, ns (> 0, ≤ duration). Sample time `t` is the END of its
    /// interval (DESIGN.md, as iperf reports).
    pub interval_ns: u64,
    /// The shared bottleneck.
    pub bottleneck: BottleneckSpec,
    /// Rate of every sender's own access link, bits/s. Default: 10 × the
    /// bottleneck rate (so only the bottleneck queues build up).
    #[serde(default)]
    pub access_rate_bps: Option<u64>,
    /// Each flow starts at `start_ns + U[0, start_jitter_ns]` (drawn from the flow's
    /// own stream). 0 switches it off.
    #[serde(default)]
    pub start_jitter_ns: u64,
    /// Each data packet waits `U[0, host_jitter_ns]` at its sender before the access
    /// link (host processing noise), never overtaking an earlier packet of the same
    /// flow. 0 switches it off.
    #[serde(default)]
    pub host_jitter_ns: u64,
    /// The flows, in order; a flow's index is its id in the output.
    pub flows: Vec<FlowSpec>,
}

/// The bottleneck link and its queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BottleneckSpec {
    /// Link rate, bits/s (> 0).
    pub rate_bps: u64,
    /// Buffer size: `{"packets": N}` or `{"bytes": N}` (N ≥ 1).
    pub buffer: BufferSpec,
    /// Queue discipline name from `aqm::REGISTRY` (e.g. `droptail`).
    pub qdisc: String,
    /// Discipline parameters (unit-parsed), checked by the discipline.
    #[serde(default)]
    pub params: aqm::Params,
    /// RTT the discipline scales its defaults with. Default: the largest flow RTT
    /// (DESIGN.md, "Buffer as % of BDP").
    #[serde(default)]
    pub reference_rtt_ns: Option<u64>,
    /// Random loss: each data packet arriving at the bottleneck is dropped with this
    /// probability before it reaches the queue (a lossy link, drawn from its own
    /// seeded stream). Counted separately from queue drops (`drops_random`).
    /// In `[0, 1)`; 0 (the default) switches it off.
    #[serde(default)]
    pub loss_rate: f64,
}

/// Buffer size in packets or bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum BufferSpec {
    /// At most N packets queued.
    Packets(u64),
    /// At most N bytes queued.
    Bytes(u64),
}

/// One flow of the dumbbell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// Congestion control: a name from `cc::REGISTRY`, or `ccid2` for a DCCP/CCID2
    /// flow (RFC 4341), which is not a TCP controller.
    pub cca: String,
    /// Controller parameters. For `ccid2`: `{"ack_ratio": R}` (default 2).
    #[serde(default)]
    pub params: crate::cc::Params,
    /// Two-way PROPAGATION delay, ns, split equally between the forward and the
    /// reverse direction (seed 001: "network delay split equally between the forward
    /// and reverse paths"). Queueing and serialisation come on top.
    pub rtt_ns: u64,
    /// When the flow starts sending, ns.
    #[serde(default)]
    pub start_ns: u64,
    /// When the application stops writing, ns (data in flight still completes).
    #[serde(default)]
    pub stop_ns: Option<u64>,
    /// Finite transfer of this many payload bytes; `None` = bulk (infinite backlog).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Receiver window cap, bytes; `None` = unlimited.
    #[serde(default)]
    pub rwnd_bytes: Option<u64>,
    /// `rwnd_bytes` is where Linux's receive-buffer autotuning stops (a buffer of
    /// `tcp_rmem[2]` = twice it), not a fixed buffer: the buffer starts at
    /// `tcp_rmem[1]` and grows with what the application reads per RTT.
    #[serde(default)]
    pub rwnd_autotune: bool,
    /// Release new data as Linux does: in GSO packets of about a millisecond of
    /// the pacing rate, holding one back until the window takes it whole
    /// (`tcp_tso_autosize`, `tcp_tso_should_defer`; `tcp/tso.rs`). A scenario
    /// flow's `gso`. Its host jitter is drawn once per release, not per segment.
    /// Off (the default): what each ACK frees leaves at once. It matches the
    /// kernel's per-ACK releases, but the validation grid agrees no better with
    /// it on (docs/validation/vm.md, "The kernel's sender, measured three ways").
    #[serde(default)]
    pub tso_defer: bool,
    /// SACK compression at the receiver (Linux `__tcp_ack_snd_check` since 4.19,
    /// on by default as in Linux): with out-of-order data held, after three
    /// immediate ACKs per cumulative point, hold further ones for min(1 ms,
    /// RTT/20) or 44 arrivals. It is what breaks the flows' packets into the fine
    /// interleaving the kernel shows at the bottleneck (docs/tcp-model.md).
    #[serde(default = "default_true")]
    pub sack_compress: bool,
    /// ECN (RFC 3168): data packets are ECT and CE marks are echoed.
    #[serde(default)]
    pub ecn: bool,
    /// Maximum segment size (payload bytes per packet). Default 1448.
    #[serde(default = "default_mss")]
    pub mss: u32,
    /// SACK (RFC 2018 + RFC 6675 recovery) when true, NewReno (RFC 6582) when false.
    #[serde(default = "default_true")]
    pub sack: bool,
    /// Delayed ACKs (RFC 5681 §4.2: every 2nd full segment or the timer).
    #[serde(default = "default_true")]
    pub delayed_ack: bool,
    /// Delayed-ACK timer, ns. Default 40 ms (Linux `TCP_DELACK_MIN`).
    #[serde(default = "default_delack")]
    pub delack_timeout_ns: u64,
    /// Initial window in segments (RFC 6928: 10).
    #[serde(default = "default_iw")]
    pub initial_cwnd: u64,
    /// RACK-TLP loss detection (RFC 8985) when SACK is on, as Linux's default
    /// (`net.ipv4.tcp_recovery` = 1); false = RFC 6675 DupThresh marking.
    #[serde(default = "default_true")]
    pub rack: bool,
    /// Tail loss probes (RFC 8985 §7), Linux `net.ipv4.tcp_early_retrans` = 3.
    #[serde(default = "default_true")]
    pub tlp: bool,
    /// F-RTO spurious-timeout detection (RFC 5682), Linux `net.ipv4.tcp_frto`.
    #[serde(default = "default_true")]
    pub frto: bool,
}

fn default_mss() -> u32 {
    1448
}
fn default_true() -> bool {
    true
}
fn default_delack() -> u64 {
    40_000_000
}
fn default_iw() -> u64 {
    10
}

/// The name that selects a DCCP/CCID2 endpoint instead of a TCP one.
pub const CCID2: &str = "ccid2";

impl ScenarioSpec {
    /// Parse the resolved JSON document.
    pub fn from_json(text: &str) -> Result<Self, SimError> {
        serde_json::from_str(text).map_err(|e| SimError::Json(e.to_string()))
    }

    /// The access-link rate in bits/s (default 10 × bottleneck).
    pub fn access_rate(&self) -> u64 {
        self.access_rate_bps.unwrap_or(self.bottleneck.rate_bps.saturating_mul(10))
    }

    /// The reference RTT: given, or the largest flow RTT.
    pub fn reference_rtt_ns(&self) -> u64 {
        self.bottleneck
            .reference_rtt_ns
            .unwrap_or_else(|| self.flows.iter().map(|f| f.rtt_ns).max().unwrap_or(0))
    }

    /// Check every value the engine relies on; the error names the field.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.duration_ns == 0 {
            return Err(SimError::invalid("duration_ns", 0, "a positive number of nanoseconds"));
        }
        if self.interval_ns == 0 || self.interval_ns > self.duration_ns {
            return Err(SimError::invalid("interval_ns", self.interval_ns, "a positive number of ns, at most duration_ns"));
        }
        let b = &self.bottleneck;
        if b.rate_bps == 0 {
            return Err(SimError::invalid("bottleneck.rate_bps", 0, "a positive rate in bits/s"));
        }
        match b.buffer {
            BufferSpec::Packets(0) => return Err(SimError::invalid("bottleneck.buffer.packets", 0, "at least 1 packet")),
            BufferSpec::Bytes(0) => return Err(SimError::invalid("bottleneck.buffer.bytes", 0, "at least 1 byte")),
            _ => {}
        }
        if !(b.loss_rate.is_finite() && (0.0..1.0).contains(&b.loss_rate)) {
            return Err(SimError::invalid("bottleneck.loss_rate", b.loss_rate, "a probability in [0, 1)"));
        }
        if b.reference_rtt_ns == Some(0) {
            return Err(SimError::invalid("bottleneck.reference_rtt_ns", 0, "a positive number of ns, or null for the largest flow RTT"));
        }
        if self.access_rate_bps == Some(0) {
            return Err(SimError::invalid("access_rate_bps", 0, "a positive rate in bits/s, or null for 10 × the bottleneck rate"));
        }
        if self.flows.is_empty() {
            return Err(SimError::invalid("flows", "[]", "at least one flow"));
        }
        if self.flows.len() > u32::MAX as usize / 2 {
            return Err(SimError::invalid("flows", self.flows.len(), "fewer than 2^31 flows"));
        }
        for (i, f) in self.flows.iter().enumerate() {
            let field = |name: &str| format!("flows[{i}].{name}");
            if f.rtt_ns == 0 {
                return Err(SimError::invalid(field("rtt_ns"), 0, "a positive two-way propagation delay in ns"));
            }
            if f.mss < 1 || f.mss > 65_000 {
                return Err(SimError::invalid(field("mss"), f.mss, "1 to 65000 payload bytes"));
            }
            if let Some(stop) = f.stop_ns {
                if stop <= f.start_ns {
                    return Err(SimError::invalid(field("stop_ns"), stop, "later than start_ns, or null"));
                }
            }
            if f.bytes == Some(0) {
                return Err(SimError::invalid(field("bytes"), 0, "a positive number of bytes, or null for a bulk transfer"));
            }
            if let Some(r) = f.rwnd_bytes {
                if r < f.mss as u64 {
                    return Err(SimError::invalid(field("rwnd_bytes"), r, "at least one MSS, or null for no receiver-window cap"));
                }
            }
            if f.delayed_ack && f.delack_timeout_ns == 0 {
                return Err(SimError::invalid(field("delack_timeout_ns"), 0, "a positive timeout in ns when delayed_ack is true"));
            }
            if f.initial_cwnd == 0 || f.initial_cwnd > 10_000 {
                return Err(SimError::invalid(field("initial_cwnd"), f.initial_cwnd, "1 to 10000 segments"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"name": "x", "seed": 1, "duration_ns": 300000000000, "interval_ns": 1000000000,
 "bottleneck": {"rate_bps": 100000000, "buffer": {"packets": 833} , "qdisc": "droptail", "params": {}, "reference_rtt_ns": 100000000},
 "access_rate_bps": 1000000000,
 "start_jitter_ns": 0, "host_jitter_ns": 0,
 "flows": [{"cca": "cubic", "params": {}, "rtt_ns": 100000000, "start_ns": 0, "stop_ns": null, "bytes": null,
            "rwnd_bytes": null, "ecn": false, "mss": 1448, "sack": true, "delayed_ack": true,
            "delack_timeout_ns": 40000000, "initial_cwnd": 10}]}"#;

    #[test]
    fn the_documented_example_parses() {
        let s = ScenarioSpec::from_json(EXAMPLE).unwrap();
        assert_eq!(s.bottleneck.buffer, BufferSpec::Packets(833));
        assert_eq!(s.flows[0].mss, 1448);
        assert_eq!(s.bottleneck.loss_rate, 0.0);
        s.validate().unwrap();
    }

    #[test]
    fn unknown_fields_are_refused() {
        let bad = EXAMPLE.replace("\"seed\": 1", "\"seed\": 1, \"sede\": 2");
        let e = ScenarioSpec::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("sede"), "{e}");
        let bad = EXAMPLE.replace("\"packets\": 833", "\"pkts\": 833");
        assert!(ScenarioSpec::from_json(&bad).is_err());
    }

    #[test]
    fn bytes_buffer_and_loss_rate_parse() {
        let s = EXAMPLE.replace("{\"packets\": 833}", "{\"bytes\": 1250000}").replace("\"reference_rtt_ns\": 100000000", "\"reference_rtt_ns\": null, \"loss_rate\": 0.01");
        let s = ScenarioSpec::from_json(&s).unwrap();
        assert_eq!(s.bottleneck.buffer, BufferSpec::Bytes(1_250_000));
        assert_eq!(s.reference_rtt_ns(), 100_000_000);
        assert_eq!(s.bottleneck.loss_rate, 0.01);
    }

    #[test]
    fn bad_values_name_their_field() {
        let mut s = ScenarioSpec::from_json(EXAMPLE).unwrap();
        s.bottleneck.rate_bps = 0;
        assert!(s.validate().unwrap_err().to_string().contains("bottleneck.rate_bps"));
        let mut s = ScenarioSpec::from_json(EXAMPLE).unwrap();
        s.flows[0].rtt_ns = 0;
        assert!(s.validate().unwrap_err().to_string().contains("flows[0].rtt_ns"));
        let mut s = ScenarioSpec::from_json(EXAMPLE).unwrap();
        s.bottleneck.loss_rate = 1.5;
        assert!(s.validate().unwrap_err().to_string().contains("[0, 1)"));
    }
}
