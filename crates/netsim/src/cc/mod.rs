//! Congestion control: one small trait, one file per algorithm.
//!
//! Read this first (STYLE.md §4–§8):
//! - A controller owns its congestion window and slow-start threshold and nothing
//!   else of the sender. It never sees packets, the event queue, a clock or an RNG
//!   it made itself: everything arrives as arguments.
//! - The sender (TCP or DCCP endpoint) does loss detection, the SACK scoreboard, RTO
//!   and pacing. It tells the controller about ACKs ([`CongestionControl::on_ack`]),
//!   about ONE loss episode at a time ([`CongestionControl::on_congestion_event`];
//!   the sender guarantees at most one call per window of data), and about recovery
//!   exit, RTO and spurious-loss undo.
//! - Linux-derived algorithms (CUBIC, BIC, HighSpeed, H-TCP) keep state in segments
//!   with a per-ACK counter, as `tcp_cubic.c` does, and convert to bytes here at the
//!   trait boundary using the MSS they were built with.
//! - [`CcKind`] is the closed set of algorithms, parsed from one name table whose
//!   error lists every allowed name (STYLE.md §7).

use netunits::{Bandwidth, SimDuration, SimTime};

/// What the sender knows when an ACK advances the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AckSample {
    /// Time the ACK arrived.
    pub now: SimTime,
    /// Bytes newly acknowledged (cumulatively or by SACK) by this ACK.
    pub acked_bytes: u64,
    /// The same in whole segments (at least 1 when `acked_bytes > 0`).
    pub acked_segments: u32,
    /// Segments this ACK removed from the retransmission queue: those the
    /// cumulative ACK point passed, including ones SACKed earlier (Linux
    /// `ack_sample.pkts_acked`; 0 for an ACK that only SACKs). Differs from
    /// `acked_segments` on the ACK that ends a recovery, which passes a whole
    /// window of segments SACKed before.
    pub cum_acked_segments: u32,
    /// RTT measured from this ACK (Karn's rule applied), if any.
    pub rtt: Option<SimDuration>,
    /// Smoothed RTT after this sample (RFC 6298).
    pub srtt: SimDuration,
    /// Lowest RTT seen on the connection.
    pub min_rtt: SimDuration,
    /// Bytes in flight BEFORE this ACK was processed.
    pub prior_in_flight: u64,
    /// Bytes in flight after it.
    pub in_flight: u64,
    /// cwnd did not limit the sending in the current window (Linux
    /// `!tcp_is_cwnd_limited`, with its slow-start allowance): loss-based
    /// controllers do not grow on such an ACK.
    pub app_limited: bool,
    /// The application left the sender short of data and that bubble is not yet
    /// delivered (Linux `tp->app_limited` after `tcp_rate_gen`): what BBR's idle
    /// restart asks (`bbr_cwnd_event`), not whether cwnd was the limit.
    pub conn_app_limited: bool,
    /// The sender is in fast recovery (loss-based controllers usually hold still).
    pub in_recovery: bool,
    /// Delivery-rate sample (BBR), computed by the sender as Linux `tcp_rate.c` does.
    pub rate: Option<RateSample>,
    /// This ACK's TCP timestamps (RFC 7323 §3.2) on 32-bit millisecond clocks, as
    /// Linux keeps them in `rx_opt.rcv_tsval`/`rcv_tsecr`: TSval is the receiver's
    /// clock when it sent the ACK, TSecr the TSval of the segment it echoes
    /// (TS.Recent: the first of two segments a delayed ACK covers, unchanged while a
    /// hole is open). The simulated receiver adds no random offset to its TSval
    /// (Linux ≥ 4.10 does; TCP-LP, the one controller that reads these, adds it).
    pub tsval_ms: u32,
    /// See [`AckSample::tsval_ms`].
    pub tsecr_ms: u32,
}

/// A delivery-rate sample (Cheng et al., draft-cheng-iccrg-delivery-rate-estimation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateSample {
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// The sampling interval.
    pub interval: SimDuration,
    /// `delivered / interval`.
    pub delivery_rate: Bandwidth,
    /// The sample was taken while the sender was application-limited.
    pub is_app_limited: bool,
    /// Total bytes delivered on the connection when the sampled packet was sent
    /// (BBR's round counting).
    pub prior_delivered: u64,
    /// Total bytes delivered on the connection now.
    pub total_delivered: u64,
}

/// Why the window is being reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionSignal {
    /// Loss detected by duplicate ACKs / SACK (fast retransmit).
    Loss,
    /// An ECN echo (RFC 3168 §6.1.2: react as to a loss, once per window).
    Ecn,
}

/// The start of one loss (or ECN) episode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CongestionEvent {
    /// When the sender detected it.
    pub now: SimTime,
    /// Loss or ECN.
    pub signal: CongestionSignal,
    /// Bytes in flight when it was detected (RFC 5681 FlightSize).
    pub in_flight: u64,
    /// Smoothed RTT.
    pub srtt: SimDuration,
    /// Lowest RTT seen.
    pub min_rtt: SimDuration,
}

/// Whether a retransmission timeout begins a loss episode of its own.
///
/// Linux `tcp_enter_loss` asks the controller for a new ssthresh (and sends
/// `CA_EVENT_LOSS`, and starts an undo episode) only when no reduction was made
/// inside the current window: the sender was Open or Disorder, or everything up
/// to the recovery point (`high_seq`) is acknowledged, or it was already in Loss
/// and the cumulative ACK has moved since the last timeout (`icsk_retransmits`
/// back to 0). A timeout during fast recovery, or a second one with no progress,
/// keeps ssthresh; cwnd still falls to one segment and the controller still
/// enters its Loss state (`set_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoEpisode {
    /// A new episode: the `ssthresh` op and `CA_EVENT_LOSS`.
    New,
    /// Inside an episode already counted: ssthresh unchanged.
    Ongoing,
}

impl RtoEpisode {
    /// The ssthresh a timeout leaves: `kept` inside an episode; for a new one
    /// whatever `new_episode` returns (the controller's ssthresh op, which also
    /// saves the state an undo restores).
    pub fn ssthresh<T>(self, kept: T, new_episode: impl FnOnce() -> T) -> T {
        match self {
            RtoEpisode::New => new_episode(),
            RtoEpisode::Ongoing => kept,
        }
    }
}

/// Read-only view of a controller's state for trace sampling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CcMetrics {
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Slow-start threshold in bytes (`u64::MAX` until the first loss).
    pub ssthresh: u64,
    /// Pacing rate, for controllers that pace.
    pub pacing_rate: Option<Bandwidth>,
    /// Algorithm phase, e.g. "slow_start", "congestion_avoidance", "probe_bw".
    pub phase: &'static str,
}

/// A congestion controller. Required: name, window, and the reaction to a loss
/// episode; everything else has a sensible default (STYLE.md §9).
pub trait CongestionControl: std::fmt::Debug {
    /// Scenario name, as Linux names it (`reno`, `cubic`, ...).
    fn name(&self) -> &'static str;

    /// Congestion window in bytes.
    fn cwnd(&self) -> u64;

    /// Slow-start threshold in bytes.
    fn ssthresh(&self) -> u64;

    /// An ACK advanced the window (called also during recovery, with
    /// `ack.in_recovery` set; loss-based controllers return early then).
    fn on_ack(&mut self, ack: &AckSample);

    /// A new loss or ECN episode began: reduce ssthresh and cwnd (the Linux
    /// `ssthresh` op; cwnd = ssthresh is the window once the episode ends — until
    /// then the sender paces the reduction by PRR, see `sets_recovery_window`).
    fn on_congestion_event(&mut self, ev: &CongestionEvent);

    /// Fast recovery ended (RFC 6675 §5: the recovery point was acknowledged).
    /// Default: nothing; the window set at the episode's start stands.
    fn on_recovery_exit(&mut self, _now: SimTime) {}

    /// The retransmission timer fired: the sender is about to retransmit from
    /// `snd_una` with cwnd = 1 MSS (RFC 5681 §3.1). With [`RtoEpisode::New`] the
    /// controller also sets ssthresh (its Linux `ssthresh` op) and saves what an
    /// undo restores; with [`RtoEpisode::Ongoing`] ssthresh and the saved state
    /// stay as they are.
    fn on_rto(&mut self, now: SimTime, in_flight: u64, episode: RtoEpisode);

    /// The last reduction was spurious (DSACK / Eifel): restore the window from
    /// before it, as Linux `undo_cwnd`. Default: nothing.
    fn on_spurious_loss(&mut self, _now: SimTime) {}

    /// The connection was idle for longer than an RTO (RFC 5681 §4.1 / RFC 7661).
    /// Default: nothing.
    fn on_idle_restart(&mut self, _now: SimTime) {}

    /// This controller sets its own window during CWR and fast recovery (Linux
    /// `cong_control`, as BBR). Default false: the sender reduces the window by
    /// Proportional Rate Reduction (RFC 6937) from the controller's cwnd to its
    /// ssthresh, and the controller's window applies again when recovery ends.
    fn sets_recovery_window(&self) -> bool {
        false
    }

    /// A data packet of `bytes` was sent; `in_flight` (bytes) already counts it
    /// (BBR and Vegas-like controllers use it, see [`starts_transmission`]).
    fn on_packet_sent(&mut self, _now: SimTime, _bytes: u64, _in_flight: u64) {}

    /// Pacing rate, if this controller paces (BBR). `None` = send as cwnd allows.
    /// A payload rate: the TCP sender charges each packet's payload against it,
    /// as Linux charges `skb->len`.
    fn pacing_rate(&self) -> Option<Bandwidth> {
        None
    }

    /// [`Self::on_packet_sent`], then [`Self::pacing_rate`]: what the TCP sender
    /// calls for every segment it sends, in one virtual call instead of two. Not
    /// for overriding: the default is exactly the two calls in that order.
    #[inline]
    fn on_packet_sent_pacing_rate(&mut self, now: SimTime, bytes: u64, in_flight: u64) -> Option<Bandwidth> {
        self.on_packet_sent(now, bytes, in_flight);
        self.pacing_rate()
    }

    /// Segments a paced sender releases back to back per pacing step: Linux builds
    /// every TCP skb as a GSO super-packet of `tcp_tso_segs` segments (TCP always
    /// uses GSO since Linux 4.19, offloads off only move the segmentation into
    /// software) and paces whole skbs, so a paced flow leaves its host in bursts of
    /// about 1 ms of its pacing rate. Meaningful only with `pacing_rate`.
    fn send_quantum(&self) -> u64 {
        1
    }

    /// State for the trace.
    fn metrics(&self) -> CcMetrics {
        CcMetrics {
            cwnd: self.cwnd(),
            ssthresh: self.ssthresh(),
            pacing_rate: self.pacing_rate(),
            phase: if self.cwnd() < self.ssthresh() { "slow_start" } else { "congestion_avoidance" },
        }
    }
}

/// A controller's configuration error, naming the parameter and allowed values.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CcError {
    /// The scenario named an algorithm this build does not have.
    #[error("unknown congestion control `{name}`; known: {known}")]
    UnknownName {
        /// What the scenario said.
        name: String,
        /// Comma-separated allowed names.
        known: String,
    },
    /// The scenario gave a parameter this algorithm does not have.
    #[error("congestion control {cca} has no parameter `{param}`; its parameters: {known}")]
    UnknownParam {
        /// Algorithm name.
        cca: &'static str,
        /// The key the scenario gave.
        param: String,
        /// Comma-separated parameters the algorithm reads.
        known: String,
    },
    /// A parameter is out of range.
    #[error("congestion control {cca}: parameter `{param}` = {value} is not allowed; {allowed}")]
    BadParam {
        /// Algorithm name.
        cca: &'static str,
        /// Parameter name.
        param: &'static str,
        /// The value given.
        value: String,
        /// What would be accepted.
        allowed: &'static str,
    },
}

/// Parameters for one controller instance, as the scenario's `[flows.cc_params]`
/// table (already unit-parsed by `fairlab.scenario`) — a JSON object.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// What every controller is built with besides its own parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcInit {
    /// Sender maximum segment size in bytes (payload).
    pub mss: u64,
    /// Initial window in segments (RFC 6928: 10; Linux 2.6.22: 3, RFC 3390).
    pub initial_cwnd_segments: u64,
    /// A random number of this connection's own, drawn from the run's seed: what
    /// Linux draws per connection from a boot-time secret, such as the random
    /// offset it adds to its TCP timestamps since 4.10 (RFC 7323 §7.1; TCP-LP
    /// reads the peer's timestamps and so depends on it).
    pub connection_random: u64,
    /// Bytes the connection had sent before this controller was attached to it:
    /// iperf3's cookie (`tcp::sender::IPERF3_COOKIE_BYTES`), since iperf3 sets the
    /// congestion control after writing it; 0 when the controller is there from
    /// the first byte. A controller that counts rounds by sequence (Linux
    /// `beg_snd_nxt`, HyStart's `end_seq`) begins its first round after them.
    pub sent_before_attach: u64,
}

/// Reads typed parameters from a [`Params`] object, refusing unknown keys and
/// out-of-range values with the allowed range (STYLE.md §8).
#[derive(Debug)]
pub struct ParamReader<'a> {
    cca: &'static str,
    params: &'a Params,
    seen: Vec<&'static str>,
}

impl<'a> ParamReader<'a> {
    /// Start reading `params` for algorithm `cca`.
    pub fn new(cca: &'static str, params: &'a Params) -> Self {
        ParamReader { cca, params, seen: Vec::new() }
    }

    /// A float in `[lo, hi]`, or `default` when absent.
    pub fn f64(&mut self, key: &'static str, default: f64, lo: f64, hi: f64, allowed: &'static str) -> Result<f64, CcError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= lo && x <= hi => Ok(x),
                _ => Err(CcError::BadParam { cca: self.cca, param: key, value: v.to_string(), allowed }),
            },
        }
    }

    /// A non-negative integer in `[lo, hi]`, or `default` when absent.
    pub fn u64(&mut self, key: &'static str, default: u64, lo: u64, hi: u64, allowed: &'static str) -> Result<u64, CcError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if x >= lo && x <= hi => Ok(x),
                _ => Err(CcError::BadParam { cca: self.cca, param: key, value: v.to_string(), allowed }),
            },
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool(&mut self, key: &'static str, default: bool) -> Result<bool, CcError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| CcError::BadParam {
                cca: self.cca,
                param: key,
                value: v.to_string(),
                allowed: "true or false",
            }),
        }
    }

    /// One of a fixed set of strings, or `default` when absent.
    pub fn choice(&mut self, key: &'static str, default: &'static str, allowed: &'static [&'static str], allowed_text: &'static str) -> Result<&'static str, CcError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_str()
                .and_then(|s| allowed.iter().find(|a| **a == s).copied())
                .ok_or_else(|| CcError::BadParam { cca: self.cca, param: key, value: v.to_string(), allowed: allowed_text }),
        }
    }

    /// Call last: fails if the scenario gave a key no reader asked for.
    pub fn finish(self) -> Result<(), CcError> {
        match self.params.keys().find(|k| !self.seen.iter().any(|s| s == k)) {
            Some(k) => Err(CcError::UnknownParam { cca: self.cca, param: k.clone(), known: known_list(&self.seen) }),
            None => Ok(()),
        }
    }
}

fn known_list(seen: &[&'static str]) -> String {
    if seen.is_empty() {
        "(none)".to_string()
    } else {
        seen.join(", ")
    }
}

/// One row of the name table: every algorithm fairlab can simulate.
#[derive(Clone, Copy)]
pub struct CcEntry {
    /// Scenario name (Linux's name where Linux has the algorithm).
    pub name: &'static str,
    /// One line for `fairlab list ccas` and the docs.
    pub summary: &'static str,
    /// Parameters with defaults, one line for `fairlab list ccas`.
    pub params: &'static str,
    /// Constructor.
    pub build: fn(&Params, &CcInit) -> Result<Box<dyn CongestionControl>, CcError>,
}

impl std::fmt::Debug for CcEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcEntry").field("name", &self.name).finish()
    }
}

// Algorithm modules: one file each (BBR may be a directory). Add `pub mod x;` here
// and one `CcEntry` in REGISTRY below.
// -- modules --
pub mod compound;
pub mod lp;
pub mod illinois;
pub mod veno;
pub mod yeah;
pub mod westwood;
pub mod htcp;
pub(crate) mod jiffies;
pub(crate) mod pacing;
pub mod hybla;
pub mod scalable;
mod seg_reno;
pub mod vegas;
pub mod bic;
pub mod highspeed;
pub mod bbr;
#[cfg(test)]
mod testpath;
pub mod cubic;
mod segwin;
pub mod reno;
#[cfg(test)]
mod testkit;

/// The closed name table (STYLE.md §7). `ccid2` is not here: it is a DCCP endpoint
/// whose AIMD lives in `crate::dccp`, selected by the scenario layer.
pub static REGISTRY: &[CcEntry] = &[
    // -- entries --
    CcEntry {
        name: "compound",
        summary: "Compound TCP (Tan et al. 2006; draft-sridharan-tcpm-ctcp-02): win = cwnd + dwnd; Windows' CTCP, never merged in Linux",
        params: compound::CompoundConfig::PARAMS,
        build: compound::Compound::build,
    },
    CcEntry {
        name: "lp",
        summary: "TCP-LP low-priority (Kuzmanovic & Knightly 2003) as Linux tcp_lp.c computes it from TCP timestamps",
        params: lp::LpConfig::PARAMS,
        build: lp::Lp::build,
    },
    CcEntry {
        name: "illinois",
        summary: "TCP-Illinois (Liu, Başar & Srikant 2006; Linux tcp_illinois.c): α, β from queueing delay",
        params: illinois::IllinoisConfig::PARAMS,
        build: illinois::Illinois::build,
    },
    CcEntry {
        name: "veno",
        summary: "TCP Veno (Fu & Liew 2003; Linux tcp_veno.c): Vegas backlog separates random from congestive loss",
        params: veno::VenoConfig::PARAMS,
        build: veno::Veno::build,
    },
    CcEntry {
        name: "yeah",
        summary: "YeAH-TCP (Baiocchi et al. 2007; Linux tcp_yeah.c): Scalable/Reno modes by queue estimate",
        params: yeah::YeahConfig::PARAMS,
        build: yeah::Yeah::build,
    },
    CcEntry {
        name: "westwood",
        summary: "TCP Westwood+ (Mascolo et al. 2001, Grieco & Mascolo 2004; Linux tcp_westwood.c): cwnd = ssthresh = BWE·RTTmin when recovery ends",
        params: westwood::WestwoodConfig::PARAMS,
        build: westwood::Westwood::build,
    },
    CcEntry {
        name: "htcp",
        summary: "H-TCP (Leith & Shorten 2004; Linux tcp_htcp.c): α from time since congestion, adaptive β",
        params: htcp::HtcpConfig::PARAMS,
        build: htcp::Htcp::build,
    },
    CcEntry {
        name: "hybla",
        summary: "TCP Hybla (Caini & Firrincieli 2004; Linux tcp_hybla.c): RTT-normalised growth, RTT0 = 25 ms",
        params: hybla::HyblaConfig::PARAMS,
        build: hybla::Hybla::build,
    },
    CcEntry {
        name: "scalable",
        summary: "Scalable TCP (Kelly 2003; Linux tcp_scalable.c): MIMD a = 0.01, b = 0.125",
        params: scalable::ScalableConfig::PARAMS,
        build: scalable::Scalable::build,
    },
    CcEntry {
        name: "vegas",
        summary: "TCP Vegas (Brakmo & Peterson 1995; Linux tcp_vegas.c: diff = ⌊cwnd·(RTT−BaseRTT)/BaseRTT⌋ held in [α, β])",
        params: vegas::VegasConfig::PARAMS,
        build: vegas::Vegas::build,
    },
    CcEntry {
        name: "bic",
        summary: "BIC-TCP (Xu, Harfoush & Rhee 2004; Linux tcp_bic.c)",
        params: bic::BicConfig::PARAMS,
        build: bic::Bic::build,
    },
    CcEntry {
        name: "highspeed",
        summary: "HighSpeed TCP (RFC 3649 a(w)/b(w) table; Linux tcp_highspeed.c)",
        params: highspeed::HighSpeedConfig::PARAMS,
        build: highspeed::HighSpeed::build,
    },
    CcEntry {
        name: "bbr",
        summary: "BBR v1 (Cardwell et al. 2016; draft-cardwell-iccrg-bbr-congestion-control-00; Linux 6.18 tcp_bbr.c incl. lt_bw policer detection and ACK-aggregation allowance)",
        params: bbr::BbrConfig::PARAMS,
        build: bbr::Bbr::build,
    },
    CcEntry {
        name: "cubic",
        summary: "CUBIC (RFC 9438; Linux tcp_cubic.c, modern or 2.6.22 constants)",
        params: cubic::CubicConfig::PARAMS,
        build: cubic::Cubic::build,
    },
    CcEntry {
        name: "reno",
        summary: "Reno/NewReno (RFC 5681 + RFC 3465 ABC; SACK recovery in the sender, RFC 6675)",
        params: reno::RenoConfig::PARAMS,
        build: reno::Reno::build,
    },
];

/// Linux `tcp_event_data_sent` raises `CA_EVENT_TX_START` for a data packet sent
/// while `tcp_packets_in_flight` is 0: true when the packet of `bytes` just sent is
/// all of `in_flight` (as [`CongestionControl::on_packet_sent`] passes it; a
/// short last segment still counts as one full-sized packet, `mss`).
pub(crate) fn starts_transmission(bytes: u64, in_flight: u64, mss: u64) -> bool {
    in_flight <= bytes.max(mss)
}

/// Comma-separated names of every algorithm (for error messages and `--help`).
pub fn known_names() -> String {
    REGISTRY.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

/// Build the controller `name` with `params`; an unknown name lists the known ones.
pub fn build(name: &str, params: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
    match REGISTRY.iter().find(|e| e.name == name) {
        Some(e) => (e.build)(params, init),
        None => Err(CcError::UnknownName { name: name.to_string(), known: known_names() }),
    }
}
