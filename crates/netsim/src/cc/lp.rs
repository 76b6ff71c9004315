//! TCP-LP, a low-priority ("scavenger") transport (Kuzmanovic & Knightly,
//! "TCP-LP: A Distributed Algorithm for Low Priority Data Transfer", IEEE
//! INFOCOM 2003), as Linux's `tcp_lp.c` computes it.
//!
//! Read this first. TCP-LP wants only the bandwidth standard flows leave unused.
//! It estimates the one-way delay (OWD) from TCP timestamps, smooths it
//! (`sowd`, ×8, gain 1/8) and keeps its range `[owd_min, owd_max]`; when the
//! smoothed delay is not below `owd_min + 15 % of the range` (an *early
//! congestion indication*) it halves cwnd, or sets it to 1 if the previous
//! indication was less than an *inference period* (3 × now − echoed timestamp,
//! about 3 RTTs) ago, and resets the range to `[sowd, 2·sowd]`. Inside the
//! inference period it does not grow; otherwise it grows like Reno; losses are
//! Reno's. ssthresh is left alone, so cwnd slow-starts back up after an
//! indication.
//!
//! What Linux actually computes. Every quantity is a `u32` in milliseconds and
//! this module repeats that arithmetic, wrap-arounds included, because they
//! decide what the kernel does:
//!
//! - The receiver's clock rate `remote_hz` is an EWMA (gain 1/64) of
//!   `1000 · Δtsval / Δtsecr` between consecutive ACKs whose timestamps both
//!   changed. The OWD is `tsval · (1000 / remote_hz) − tsecr`: the integer
//!   quotient is 1 while the estimate is at most 1000 and 0 as soon as it is
//!   above (one pair of ACKs with Δtsval = 2, Δtsecr = 1 lifts it to 1015); then
//!   the "delay" is `−tsecr mod 2^32`, about 4.3·10^9.
//! - Since Linux 4.10 (`net.ipv4.tcp_timestamps = 1`, the default) every
//!   connection adds a random 32-bit offset to the timestamps it sends; the
//!   sender removes its own from the echo, not the receiver's from `tsval`. The
//!   OWD is therefore the receiver's random offset plus the forward delay.
//! - `sowd` holds 8 × the smoothed delay in a `u32`: a delay of 2^29 ms or more
//!   wraps, and the smoothed value (below 2^29) then always sits under the range
//!   (at or above 2^29): "within threshold", never an indication.
//! - A smaller offset still dwarfs any delay: the first sample indicates (the
//!   range is one value, and `s < s + 0` fails, so Linux halves on its first
//!   delay sample), which resets the range to `[s, 2s]` with `s` ≈ the offset;
//!   the next threshold is 15 % of the offset, days of delay, away — unless the
//!   quotient drops to 0. While a queue grows, the receiver's clock advances
//!   faster between two ACKs than the echoed send times do (Δtsval/Δtsecr =
//!   1 + the growth of the queueing delay per unit time), so in slow start
//!   `remote_hz` climbs above 1000, the "delay" jumps to `−tsecr` (≈ 2^32), and
//!   the smoothed value, wrapping, lands above the small-offset range: a second
//!   indication, in slow start, that halves the window the other flow keeps
//!   doubling.
//!
//! So a 6.1 LP connection whose receiver drew an offset of 2^29 or more (seven
//! in eight) never indicates and is Reno; one with a smaller offset halves on
//! its first sample and again in slow start, and leaves slow start far below the
//! other flow, which a 1-BDP buffer's synchronised losses even out only over
//! minutes. The kernel shows both: LP–CUBIC 20/80 at 100 ms, 1 BDP, where
//! Reno–CUBIC is 23/77, and in seed 000's 14-flow run LP took 5.5 % and Reno
//! 5.8 % (docs/validation/vm.md); per-ACK traces of LP–LP at 100 ms, 1 BDP
//! (`--tcp-probe`, seeds 1–5, 2026-11-30) show three of ten connections cut
//! 10 → 6 on the first data ACKs (halved, then slow start's +1) with ssthresh
//! untouched, two of them again at 1.43 s (100 → 51, 105 → 53), ending slow
//! start at cwnd 109 and 328 beside 3,151 and 2,988; one grid seed gave
//! 90.6/9.4. With `kernel = "2.6.22"` (before 4.10: no offsets, 1000-Hz
//! timestamps) the delay is the true forward delay while `remote_hz` stays at
//! or below 1000, and LP works as designed at 1-ms resolution: alone on
//! 10 Mbit/s at 40 ms it indicates twice within an inference period each time
//! its queue passes 15 % of the range. The same quotient breaks it as soon as a
//! queue grows (not checked against a 2.6.22 kernel).
//!
//! The timestamps are the ACK's own ([`AckSample::tsval_ms`], `tsecr_ms`): TSecr
//! echoes TS.Recent, so a delayed ACK echoes the first of its two segments and
//! every ACK of a loss episode the last segment that arrived in order, while
//! TSval keeps advancing — Linux's `rcv_tsecr` and `rcv_tsval`. To TSval this
//! module adds the receiver's offset, drawn from the connection's random number
//! (the simulated receiver stamps without one).

use super::seg_reno::SegReno;
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use crate::packet::ts_clock_ms;
use netunits::{SimDuration, SimTime};

/// Linux's TCP timestamp clock (`TCP_TS_HZ`), which is also `LP_RESOL`.
const TS_HZ: u32 = 1000;

/// Which kernel's timestamps TCP-LP reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpKernel {
    /// Linux ≥ 4.10: the receiver's timestamps carry a random per-connection offset.
    Modern,
    /// Linux 2.6.22 (seeds 000/001): no offset.
    Linux2622,
}

/// TCP-LP parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LpConfig {
    /// Whose timestamps: with or without the receiver's random offset.
    pub kernel: LpKernel,
}

impl LpConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "kernel = \"6.1\" (timestamps with random per-connection offsets, Linux >= 4.10) or \"2.6.22\" (no offsets)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("lp", p);
        let kernel = r.choice("kernel", "6.1", &["6.1", "2.6.22"], "\"6.1\" or \"2.6.22\"")?;
        r.finish()?;
        Ok(LpConfig { kernel: if kernel == "2.6.22" { LpKernel::Linux2622 } else { LpKernel::Modern } })
    }
}

/// TCP-LP state: Linux's `struct lp`, field for field.
#[derive(Clone, Debug)]
pub struct Lp {
    mss: u64,
    w: SegReno,
    /// The receiver's timestamp offset.
    ts_offset: u32,
    valid_rhz: bool,
    valid_owd: bool,
    within_inference: bool,
    /// Smoothed OWD × 8.
    sowd: u32,
    owd_min: u32,
    owd_max: u32,
    owd_max_rsv: u32,
    remote_hz: u32,
    remote_ref_time: u32,
    local_ref_time: u32,
    last_drop: u32,
    inference: u32,
    indications: u64,
}

impl Lp {
    /// A TCP-LP controller at the initial window.
    pub fn new(cfg: LpConfig, init: &CcInit) -> Self {
        Lp {
            mss: init.mss.max(1),
            w: SegReno::new(init.initial_cwnd_segments),
            ts_offset: match cfg.kernel {
                LpKernel::Modern => init.connection_random as u32,
                LpKernel::Linux2622 => 0,
            },
            valid_rhz: false,
            valid_owd: false,
            within_inference: false,
            sowd: 0,
            owd_min: u32::MAX,
            owd_max: 0,
            owd_max_rsv: 0,
            remote_hz: 0,
            remote_ref_time: 0,
            local_ref_time: 0,
            last_drop: 0,
            inference: 0,
            indications: 0,
        }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Lp::new(LpConfig::from_params(p)?, init)))
    }

    /// Early congestion indications so far.
    pub fn indications(&self) -> u64 {
        self.indications
    }

    /// The receiver clock-rate estimate (`tcp_lp_remote_hz_estimator`).
    fn estimate_remote_hz(&mut self, tsval: u32, tsecr: u32) {
        let mut rhz = i64::from(self.remote_hz << 6);
        let unchanged = tsval == self.remote_ref_time || tsecr == self.local_ref_time;
        if self.remote_ref_time != 0 && self.local_ref_time != 0 && !unchanged {
            // u32 throughout, as in C: 1000 · Δtsval wraps, then divides.
            let mut m = i64::from(TS_HZ.wrapping_mul(tsval.wrapping_sub(self.remote_ref_time)) / tsecr.wrapping_sub(self.local_ref_time));
            if rhz > 0 {
                m -= rhz >> 6;
                rhz += m;
            } else {
                rhz = m << 6;
            }
        }
        self.valid_rhz = (rhz >> 6) > 0;
        self.remote_ref_time = tsval;
        self.local_ref_time = tsecr;
        self.remote_hz = (rhz >> 6) as u32;
    }

    /// The "one-way delay" (`tcp_lp_owd_calculator`).
    fn owd(&mut self, tsval: u32, tsecr: u32) -> u32 {
        self.estimate_remote_hz(tsval, tsecr);
        let owd = if self.valid_rhz { tsval.wrapping_mul(TS_HZ / self.remote_hz).wrapping_sub(tsecr) } else { 0 };
        self.valid_owd = owd > 0;
        owd
    }

    /// Fold one delay sample into the range and the smoothed delay (`tcp_lp_rtt_sample`).
    fn rtt_sample(&mut self, tsval: u32, tsecr: u32) {
        let mut mowd = i64::from(self.owd(tsval, tsecr));
        if !self.valid_rhz || !self.valid_owd {
            return;
        }
        if mowd < i64::from(self.owd_min) {
            self.owd_min = mowd as u32;
        }
        // Forget the largest sample: the range grows to the one below it.
        if mowd > i64::from(self.owd_max) {
            if mowd > i64::from(self.owd_max_rsv) {
                self.owd_max = if self.owd_max_rsv == 0 { mowd as u32 } else { self.owd_max_rsv };
                self.owd_max_rsv = mowd as u32;
            } else {
                self.owd_max = mowd as u32;
            }
        }
        if self.sowd != 0 {
            mowd -= i64::from(self.sowd >> 3);
            self.sowd = (i64::from(self.sowd) + mowd) as u32;
        } else {
            self.sowd = (mowd << 3) as u32;
        }
    }
}

impl CongestionControl for Lp {
    fn name(&self) -> &'static str {
        "lp"
    }

    fn cwnd(&self) -> u64 {
        self.w.cwnd * self.mss
    }

    fn ssthresh(&self) -> u64 {
        self.w.ssthresh.saturating_mul(self.mss)
    }

    /// `tcp_lp_pkts_acked`, then `tcp_lp_cong_avoid` (Linux calls them in that
    /// order for every ACK).
    fn on_ack(&mut self, ack: &AckSample) {
        let now = ts_clock_ms(ack.now);
        let (tsval, tsecr) = (ack.tsval_ms.wrapping_add(self.ts_offset), ack.tsecr_ms);
        if ack.rtt.is_some_and(|r| r > SimDuration::ZERO) {
            self.rtt_sample(tsval, tsecr);
        }
        let delta = now.wrapping_sub(tsecr);
        if (delta as i32) > 0 {
            self.inference = 3u32.wrapping_mul(delta);
        }
        self.within_inference = self.last_drop != 0 && now.wrapping_sub(self.last_drop) < self.inference;
        let threshold = self.owd_min.wrapping_add(15u32.wrapping_mul(self.owd_max.wrapping_sub(self.owd_min)) / 100);
        if (self.sowd >> 3) >= threshold {
            self.owd_min = self.sowd >> 3;
            self.owd_max = self.sowd >> 2;
            self.owd_max_rsv = self.sowd >> 2;
            // In recovery PRR sets cwnd after this hook, so Linux's write is lost.
            if !ack.in_recovery {
                self.w.cwnd = if self.within_inference { 1 } else { (self.w.cwnd >> 1).max(1) };
            }
            self.last_drop = now;
            self.indications += 1;
        }
        if !self.within_inference {
            self.w.reno_on_ack(ack);
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.w.halve();
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        self.w.rto(episode);
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        self.w.undo();
    }

    fn metrics(&self) -> CcMetrics {
        let phase = if self.within_inference {
            "inference"
        } else if self.w.in_slow_start() {
            "slow_start"
        } else {
            "congestion_avoidance"
        };
        CcMetrics { cwnd: self.cwnd(), ssthresh: self.ssthresh(), pacing_rate: None, phase }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::ack_sample;
    use super::*;
    use crate::cc::testpath::{Path, Synth, PATH_MSS};
    use crate::cc::{build, CongestionSignal};
    use netunits::Bandwidth;

    fn lp(kernel: LpKernel, offset: u32) -> Lp {
        Lp::new(LpConfig { kernel }, &CcInit { mss: PATH_MSS, initial_cwnd_segments: 10, connection_random: u64::from(offset), sent_before_attach: 0 })
    }

    fn ms_(x: u64) -> SimDuration {
        SimDuration::from_millis(x)
    }

    /// `n` ACKs one millisecond apart, each with RTT sample `rtt`.
    fn acks<C: CongestionControl>(s: &mut Synth<C>, rtt: SimDuration, n: u64) {
        for _ in 0..n {
            s.now += ms_(1);
            s.ack(rtt);
        }
    }

    #[test]
    fn the_remote_clock_estimate_is_linux_integer_arithmetic() {
        let mut c = lp(LpKernel::Linux2622, 0);
        c.estimate_remote_hz(100, 50); // no references yet
        assert!(!c.valid_rhz);
        c.estimate_remote_hz(101, 51); // m = 1000·1/1 = 1000, first estimate
        assert_eq!(c.remote_hz, 1000);
        c.estimate_remote_hz(103, 52); // m = 2000: 64000 + (2000 − 1000) = 65000 → 1015
        assert_eq!(c.remote_hz, 1015);
        c.estimate_remote_hz(103, 53); // tsval unchanged: no update, references move
        assert_eq!(c.remote_hz, 1015);
        // m = 1000·1/2 = 500. Each call starts again from remote_hz << 6 (the
        // fraction is lost): 1015·64 = 64960; 64960 + (500 − 1015) = 64445 → 1006.
        c.estimate_remote_hz(104, 55);
        assert_eq!(c.remote_hz, 1006);
        // Above 1000 Hz the quotient 1000 / remote_hz is 0, and the "delay" is −tsecr.
        assert_eq!(c.owd(105, 56), 0u32.wrapping_sub(56));
    }

    /// Steady RTT 100 ms (OWD = 100 − 100/2 = 50 ms), long enough to leave the
    /// inference period of the first indication, then the RTT jumps to 200 ms
    /// (OWD 150 ms). Returns the cwnd just before the jump and after each of the
    /// next two ACKs.
    fn delay_step(c: Lp) -> (Synth<Lp>, [u64; 3]) {
        let mut s = Synth::new(c);
        acks(&mut s, ms_(100), 1000);
        let before = s.cwnd();
        acks(&mut s, ms_(200), 1);
        let first = s.cwnd();
        acks(&mut s, ms_(200), 1);
        let second = s.cwnd();
        (s, [before, first, second])
    }

    #[test]
    fn without_an_offset_a_delay_rise_halves_cwnd_then_drops_it_to_one() {
        let (s, [before, first, second]) = delay_step(lp(LpKernel::Linux2622, 0));
        // Indication 1 is on the first valid sample: the range is the single
        // value 50 and `50 < 50 + 0` fails (Linux halves on its first delay
        // sample). Reset range [50, 100]: threshold 50 + 15·50/100 = 57.
        // The 150-ms sample: sowd = 400 + (150 − 50) = 500, 500 >> 3 = 62 ≥ 57:
        // indication 2, more than 3·200 ms after the first: cwnd halves, and this
        // ACK, not yet inside an inference period, still slow-starts it by one
        // (ssthresh was never lowered).
        assert_eq!(first, before / 2 + 1);
        // Reset [62, 125]; the next sample: max 125 (reserve 150), sowd = 500 +
        // 150 − 62 = 588, 588 >> 3 = 73 ≥ 62 + 15·63/100 = 71: indication 3, inside
        // the 600-ms inference period: cwnd = 1.
        assert_eq!(second, 1);
        assert_eq!(s.cc.indications(), 3);
        assert_eq!(s.cc.metrics().phase, "inference");
    }

    #[test]
    fn a_receiver_offset_leaves_one_indication_on_the_first_sample_and_none_after() {
        // OWD = offset + 50 ms. The first sample indicates (as without offset) and
        // resets the range to [s, 2s] with s ≈ the offset: the next threshold is
        // 15 % of the offset (here 18.5 million ms) above it; the 100-ms delay rise
        // is nothing to it. From then on LP grows like Reno.
        let (s, [before, first, second]) = delay_step(lp(LpKernel::Modern, 123_456_789));
        assert_eq!(s.cc.indications(), 1);
        assert_eq!([first, second], [before + 1, before + 2]);
    }

    #[test]
    fn a_receiver_offset_of_two_to_the_29_or_more_makes_lp_reno() {
        // OWD = offset + 50 ≥ 2^29: 8 × it wraps in the u32 `sowd`, whose value
        // then stays below 2^29 ≤ owd_min: always "within threshold".
        for offset in [1u32 << 29, 1 << 31, u32::MAX - 1000] {
            let mut s = Synth::new(lp(LpKernel::Modern, offset));
            let mut r = Synth::new(crate::cc::reno::Reno::new(Default::default(), &lp_init()));
            for rtt in [100, 200, 120, 300, 100] {
                acks(&mut s, ms_(rtt), 400);
                acks(&mut r, ms_(rtt), 400);
            }
            assert_eq!(s.cc.indications(), 0, "offset {offset}");
            assert_eq!(s.cwnd(), r.cwnd(), "offset {offset}");
        }
    }

    #[test]
    fn an_indication_leaves_ssthresh_alone_so_cwnd_slow_starts_back() {
        let mut s = Synth::new(lp(LpKernel::Linux2622, 0));
        acks(&mut s, ms_(100), 3);
        assert_eq!(s.cc.indications(), 1);
        assert_eq!(s.cc.ssthresh(), Lp::new(LpConfig { kernel: LpKernel::Modern }, &lp_init()).ssthresh());
        // Out of the inference period (3 × 100 ms), each ACK adds a segment.
        acks(&mut s, ms_(100), 400);
        let w = s.cwnd();
        acks(&mut s, ms_(100), 5);
        assert_eq!(s.cwnd(), w + 5);
    }

    /// One ACK of one segment at `s.now` with RTT sample 100 ms, stamped by the
    /// receiver 50 ms ago and echoing `tsecr`.
    fn ack_echoing(s: &mut Synth<Lp>, tsecr: u32) {
        s.now += ms_(1);
        let now_ms = ts_clock_ms(s.now);
        let flight = s.cc.cwnd();
        // One PATH_MSS segment (testkit's MSS is the same 1,000 bytes).
        s.cc.on_ack(&AckSample { tsval_ms: now_ms - 50, tsecr_ms: tsecr, ..ack_sample(s.now, 1, ms_(100), flight - PATH_MSS) });
    }

    #[test]
    fn the_delay_is_read_off_the_echo_not_the_rtt_sample() {
        // Without an offset. 1,000 ACKs with the echo 100 ms behind: delay 50 ms,
        // one indication (the first sample), range [50, 100], threshold 57. Then
        // the echo stops (TS.Recent while a hole is open) but every RTT sample is
        // still 100 ms: the delay tsval − tsecr grows by 1 ms per ACK, the smoothed
        // value (gain 1/8) passes 57 after about 14 ACKs and LP indicates. An echo
        // that keeps pace gives no second indication.
        let run = |frozen: bool| {
            let mut s = Synth::new(lp(LpKernel::Linux2622, 0));
            for _ in 0..1000 {
                let echo = ts_clock_ms(s.now) + 1 - 100;
                ack_echoing(&mut s, echo);
            }
            assert_eq!(s.cc.indications(), 1);
            let stuck = ts_clock_ms(s.now) - 100;
            for _ in 0..30 {
                let echo = if frozen { stuck } else { ts_clock_ms(s.now) + 1 - 100 };
                ack_echoing(&mut s, echo);
            }
            s.cc.indications()
        };
        assert_eq!(run(false), 1);
        assert!(run(true) >= 2, "a frozen echo must read as a growing delay");
    }

    #[test]
    fn loss_is_reno() {
        let mut s = Synth::new(lp(LpKernel::Modern, 1 << 30));
        acks(&mut s, ms_(100), 50);
        let w = s.cwnd();
        s.loss(CongestionSignal::Loss);
        assert_eq!(s.cwnd(), w / 2);
    }

    #[test]
    fn against_reno_lp_yields_without_an_offset_and_is_reno_with_one() {
        // TCP-LP's purpose (paper §I, §V) holds for the 2.6.22 arithmetic: with a
        // Reno flow filling a 100-packet buffer, LP's share is small. With the
        // random offset of a modern kernel it shares like a second Reno flow.
        let rtt = ms_(40);
        let share = |params: &str, offset: u64| {
            let init = CcInit { mss: PATH_MSS, initial_cwnd_segments: 10, connection_random: offset, sent_before_attach: 0 };
            let mut p = Path::new(Bandwidth::from_mbps(10), 100);
            let reno = p.add(build("reno", &Params::new(), &lp_init()).unwrap(), rtt, SimTime::ZERO);
            let lp = p.add(build("lp", &serde_json::from_str::<Params>(params).unwrap(), &init).unwrap(), rtt, SimTime::ZERO);
            p.run_until(SimTime::from_secs(30));
            let (r, l) = (p.goodput_bps(reno), p.goodput_bps(lp));
            assert!(r + l > 0.85 * 10e6, "link underused: {}", r + l);
            l / (r + l)
        };
        let old = share(r#"{"kernel": "2.6.22"}"#, 0);
        assert!(old < 0.1, "2.6.22 LP share {old:.3}");
        let modern = share("{}", 0x9E37_79B9);
        assert!((0.3..0.7).contains(&modern), "6.1 LP share {modern:.3}");
    }

    #[test]
    fn params_are_validated() {
        let p = |s: &str| serde_json::from_str::<Params>(s).unwrap();
        let e = Lp::build(&p(r#"{"kernel": "5.4"}"#), &lp_init()).unwrap_err();
        assert!(matches!(e, CcError::BadParam { param: "kernel", .. }), "{e}");
        let e = Lp::build(&p(r#"{"delta": 0.2}"#), &lp_init()).unwrap_err();
        assert!(e.to_string().contains("delta"));
    }

    fn lp_init() -> CcInit {
        crate::cc::testkit::init(10)
    }
}
