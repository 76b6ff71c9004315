//! Test harness for controllers (test builds only): drives any
//! [`CongestionControl`] through the trait with a fake clock, the way the sender
//! would, so every algorithm's tests read "one RTT of ACKs", "a loss", "an RTO"
//! (STYLE.md §13: through the trait, fake clock, closed-form expectations).
//!
//! The harness is an idealised sender: every ACK acknowledges `acked_segments`
//! full segments, the flight before a round is the whole window, and RTT samples
//! are whatever the test sets in [`Harness::rtt`].

use super::{AckSample, CcInit, CongestionControl, CongestionEvent, CongestionSignal, Params};
use netunits::{SimDuration, SimTime};

/// MSS used by every controller test.
pub(crate) const MSS: u64 = 1000;

/// One ACK for controller tests: `segs` full segments newly and cumulatively
/// acknowledged at `now`, an RTT sample (also the SRTT and the minimum) of `rtt`,
/// `in_flight` bytes still out after it (`segs`·MSS more before it); the sender
/// cwnd-limited and in Open, no rate sample, zero timestamps. A test changes what
/// it needs with `AckSample { field: .., ..ack_sample(..) }`, so a new field of
/// [`AckSample`] is given its test default here once.
pub(crate) fn ack_sample(now: SimTime, segs: u32, rtt: SimDuration, in_flight: u64) -> AckSample {
    AckSample {
        now,
        acked_bytes: segs as u64 * MSS,
        acked_segments: segs,
        cum_acked_segments: segs,
        rtt: Some(rtt),
        srtt: rtt,
        min_rtt: rtt,
        prior_in_flight: in_flight + segs as u64 * MSS,
        in_flight,
        app_limited: false,
        conn_app_limited: false,
        in_recovery: false,
        rate: None,
        tsval_ms: 0,
        tsecr_ms: 0,
    }
}

/// Build parameters from a JSON literal, e.g. `params(r#"{"beta": 0.5}"#)`.
pub(crate) fn params(json: &str) -> Params {
    match serde_json::from_str::<serde_json::Value>(json).expect("test params are JSON") {
        serde_json::Value::Object(m) => m,
        other => panic!("params must be an object, got {other}"),
    }
}

/// The init every test uses unless it says otherwise.
pub(crate) fn init(iw_segments: u64) -> CcInit {
    CcInit { mss: MSS, initial_cwnd_segments: iw_segments, connection_random: 0, sent_before_attach: 0 }
}

/// A controller plus a fake clock and an idealised sender.
#[derive(Debug)]
pub(crate) struct Harness {
    pub cc: Box<dyn CongestionControl>,
    pub now: SimTime,
    /// RTT reported on every ACK (tests change it to model queueing).
    pub rtt: SimDuration,
    /// Lowest RTT seen (updated automatically from `rtt`).
    pub min_rtt: SimDuration,
    /// Set while the fake sender is in fast recovery.
    pub in_recovery: bool,
    /// Set to make ACKs report an application-limited sender.
    pub app_limited: bool,
    /// Segments covered by each ACK in [`Harness::round`] and [`Harness::grow_to`]
    /// (2 models a delayed-ACK receiver, RFC 1122 §4.2.3.2).
    pub segs_per_ack: u32,
}

impl Harness {
    pub(crate) fn new(cc: Box<dyn CongestionControl>, rtt: SimDuration) -> Self {
        Harness { cc, now: SimTime::from_millis(1), rtt, min_rtt: rtt, in_recovery: false, app_limited: false, segs_per_ack: 1 }
    }

    /// Congestion window in segments (rounded down).
    pub(crate) fn cwnd_segs(&self) -> u64 {
        self.cc.cwnd() / MSS
    }

    /// Advance the fake clock.
    pub(crate) fn advance(&mut self, d: SimDuration) {
        self.now += d;
    }

    /// One ACK for `segs` segments at the current time, with the window full.
    pub(crate) fn ack(&mut self, segs: u32) {
        if self.rtt < self.min_rtt {
            self.min_rtt = self.rtt;
        }
        let inflight = self.cc.cwnd();
        let acked = segs as u64 * MSS;
        let a = AckSample {
            min_rtt: self.min_rtt,
            prior_in_flight: inflight,
            app_limited: self.app_limited,
            in_recovery: self.in_recovery,
            ..ack_sample(self.now, segs, self.rtt, inflight.saturating_sub(acked))
        };
        self.cc.on_ack(&a);
    }

    /// One round trip: the window at the start of the round is ACKed
    /// `segs_per_ack` segments per ACK, the ACKs spread evenly over one RTT. Returns the number of ACKs.
    pub(crate) fn round(&mut self) -> u64 {
        let k = self.segs_per_ack.max(1) as u64;
        let n = (self.cwnd_segs() / k).max(1);
        let step = SimDuration::from_nanos(self.rtt.as_nanos() / n);
        for _ in 0..n {
            self.advance(step);
            self.ack(k as u32);
        }
        // Land exactly one RTT after the round began.
        let rest = self.rtt.as_nanos() - step.as_nanos() * n;
        self.advance(SimDuration::from_nanos(rest));
        n
    }

    /// A loss episode with the whole window in flight; the sender then enters
    /// recovery (set `in_recovery`). Call [`Harness::exit_recovery`] to end it.
    pub(crate) fn loss(&mut self) {
        self.congestion(CongestionSignal::Loss);
        self.in_recovery = true;
    }

    /// A congestion event of the given kind with the whole window in flight.
    pub(crate) fn congestion(&mut self, signal: CongestionSignal) {
        let ev = CongestionEvent {
            now: self.now,
            signal,
            in_flight: self.cc.cwnd(),
            srtt: self.rtt,
            min_rtt: self.min_rtt,
        };
        self.cc.on_congestion_event(&ev);
    }

    /// Recovery ended.
    pub(crate) fn exit_recovery(&mut self) {
        self.in_recovery = false;
        self.cc.on_recovery_exit(self.now);
    }

    /// A loss, one RTT of recovery, and recovery exit.
    pub(crate) fn loss_and_recover(&mut self) {
        self.loss();
        self.advance(self.rtt);
        self.exit_recovery();
    }

    /// Grow the window (slow start then CA) until it reaches `segs`, bounded.
    pub(crate) fn grow_to(&mut self, segs: u64) {
        for _ in 0..100_000 {
            if self.cwnd_segs() >= segs {
                return;
            }
            let k = self.segs_per_ack.max(1);
            self.advance(SimDuration::from_nanos(self.rtt.as_nanos() * k as u64 / self.cwnd_segs().max(1)));
            self.ack(k);
        }
        panic!("window never reached {segs} segments (at {})", self.cwnd_segs());
    }
}

/// Relative closeness for floating-point expectations.
#[allow(dead_code)]
pub(crate) fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

/// One invariant suite over every algorithm in the name table (quiche runs its
/// recovery tests over all algorithms with rstest `#[values]`; a loop over
/// [`REGISTRY`](super::REGISTRY) does the same without a dependency).
#[cfg(test)]
mod every_registry_entry {
    use super::super::{build, CcError, CongestionSignal, REGISTRY};
    use super::*;

    /// Run `f` on a fresh harness for every entry, naming the entry on failure.
    fn for_each(f: impl Fn(&str, &mut Harness)) {
        assert!(!REGISTRY.is_empty());
        for e in REGISTRY {
            let cc = build(e.name, &params("{}"), &init(10)).unwrap_or_else(|err| panic!("{}: default build failed: {err}", e.name));
            assert_eq!(cc.name(), e.name, "entry and controller disagree on the name");
            // 20 ms keeps every slow start modest (Hybla's ρ = max(RTT/25 ms, 1)
            // would multiply the window 16-fold per round at 100 ms).
            let mut h = Harness::new(cc, SimDuration::from_millis(20));
            f(e.name, &mut h);
        }
    }

    fn check_floor(name: &str, h: &Harness, step: &str) {
        assert!(h.cc.cwnd() >= MSS, "{name}: cwnd {} < 1 MSS after {step}", h.cc.cwnd());
    }

    #[test]
    fn unknown_parameters_are_refused_naming_the_key() {
        for e in REGISTRY {
            match build(e.name, &params(r#"{"surely_not_a_parameter": 1}"#), &init(10)) {
                Err(CcError::UnknownParam { param, known, .. }) => {
                    assert_eq!(param, "surely_not_a_parameter", "{}", e.name);
                    // The message lists what the algorithm does accept: the names
                    // its reader asked for, each documented in the registry's
                    // parameter line, or "(none)" exactly when that line says so.
                    let documented: Vec<&str> = e.params.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
                    if known == "(none)" {
                        assert!(e.params.starts_with("(none"), "{}: reads no parameter, documents {:?}", e.name, e.params);
                    } else {
                        for k in known.split(", ") {
                            assert!(documented.contains(&k), "{}: reads `{k}`, not in {:?}", e.name, e.params);
                        }
                    }
                }
                Err(other) => panic!("{}: wrong error {other}", e.name),
                Ok(_) => panic!("{}: accepted an unknown parameter", e.name),
            }
        }
    }

    #[test]
    fn window_never_below_one_mss_through_a_rough_life() {
        for_each(|name, h| {
            for _ in 0..6 {
                h.round();
                check_floor(name, h, "slow start");
            }
            h.rtt += SimDuration::from_millis(30);
            for _ in 0..3 {
                h.round();
                check_floor(name, h, "rtt rise");
            }
            h.loss();
            check_floor(name, h, "loss");
            for _ in 0..10 {
                h.ack(1);
            }
            h.exit_recovery();
            h.round();
            h.cc.on_rto(h.now, h.cc.cwnd(), crate::cc::RtoEpisode::New);
            check_floor(name, h, "rto");
            h.ack(1);
            check_floor(name, h, "ack after rto");
            for _ in 0..3 {
                h.round();
            }
            h.loss();
            h.cc.on_spurious_loss(h.now);
            h.exit_recovery();
            check_floor(name, h, "spurious undo");
            h.cc.on_idle_restart(h.now);
            check_floor(name, h, "idle restart");
            h.rtt = SimDuration::from_millis(1);
            for _ in 0..5 {
                h.round();
                check_floor(name, h, "rtt drop");
            }
            // Repeated losses drive any window to its floor.
            for _ in 0..40 {
                h.loss_and_recover();
                check_floor(name, h, "repeated loss");
            }
            let m = h.cc.metrics();
            assert_eq!(m.cwnd, h.cc.cwnd(), "{name}: metrics disagree with cwnd()");
            assert!(!m.phase.is_empty(), "{name}: empty phase name");
        });
    }

    /// Window-based loss controllers; BBR-style model-based controllers set the
    /// window from their path model (and may let it recover within recovery, as
    /// Linux `bbr_set_cwnd_to_recover_or_restore` does), so the two loss rules
    /// below are checked only for controllers that do not pace.
    fn loss_based(h: &Harness) -> bool {
        h.cc.pacing_rate().is_none()
    }

    #[test]
    fn a_loss_event_reduces_the_window() {
        for_each(|name, h| {
            for _ in 0..5 {
                h.round();
            }
            if !loss_based(h) {
                return;
            }
            for signal in [CongestionSignal::Loss, CongestionSignal::Ecn] {
                let before = h.cc.cwnd();
                h.congestion(signal);
                assert!(h.cc.cwnd() < before, "{name}: {signal:?} left cwnd at {} (was {before})", h.cc.cwnd());
                assert!(h.cc.ssthresh() < u64::MAX, "{name}: no ssthresh after {signal:?}");
                h.exit_recovery();
                for _ in 0..3 {
                    h.round();
                }
            }
        });
    }

    #[test]
    fn the_window_never_grows_during_recovery() {
        for_each(|name, h| {
            for _ in 0..5 {
                h.round();
            }
            if !loss_based(h) {
                return;
            }
            h.loss();
            let at_entry = h.cc.cwnd();
            for i in 0..200 {
                h.advance(SimDuration::from_millis(1));
                h.ack(if i % 2 == 0 { 1 } else { 2 });
                assert!(h.cc.cwnd() <= at_entry, "{name}: cwnd grew in recovery ({} > {at_entry})", h.cc.cwnd());
            }
        });
    }
}
