//! BBR v1 parameters, with the source of every default.

use crate::cc::{CcError, ParamReader, Params};
use netunits::SimDuration;

/// Number of phases in the PROBE_BW gain cycle (Cardwell et al. 2016, §"Steady
/// state"; draft-cardwell-iccrg-bbr-congestion-control-00, "ProbeBW").
pub(crate) const CYCLE_LEN: usize = 8;

/// The PROBE_BW pacing-gain cycle: probe at 5/4, drain at 3/4, cruise at 1 for
/// six phases (draft-00 "ProbeBW"; `bbr_pacing_gain[]` in Linux tcp_bbr.c).
pub(crate) const PACING_GAIN_CYCLE: [f64; CYCLE_LEN] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];

/// BBR v1's configuration. Defaults are the published constants; the fields exist
/// so that a study can vary them per flow (STYLE.md §8), not because BBR tunes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BbrConfig {
    /// STARTUP pacing and cwnd gain, 2/ln 2 ≈ 2.885: the smallest gain that lets
    /// the sending rate double every round (draft-00 "Startup"; Linux
    /// `bbr_high_gain`). DRAIN paces at its reciprocal (draft-00 "Drain").
    pub high_gain: f64,
    /// PROBE_BW cwnd gain, 2 (draft-00 "ProbeBW", cwnd_gain = 2; Linux
    /// `bbr_cwnd_gain`): tolerates delayed and stretched ACKs.
    pub cwnd_gain: f64,
    /// Length of the max-bandwidth filter window in packet-timed rounds, 10
    /// (draft-00 "BBR.BtlBw max filter", BtlBwFilterLen; Linux `bbr_bw_rtts` = cycle + 2).
    pub bw_window_rounds: u64,
    /// Lifetime of the min_rtt estimate, 10 s (draft-00 "BBR.RTprop min filter",
    /// RTpropFilterLen; Linux `bbr_min_rtt_win_sec`).
    pub min_rtt_window: SimDuration,
    /// Time spent at the minimum window in PROBE_RTT, 200 ms (draft-00 "ProbeRTT",
    /// ProbeRTTDuration; Linux `bbr_probe_rtt_mode_ms`).
    pub probe_rtt_duration: SimDuration,
    /// Smallest cwnd in packets, 4 (draft-00 "Minimum cwnd", BBRMinPipeCwnd; Linux
    /// `bbr_cwnd_min_target`): two delayed-ACK pairs in flight.
    pub min_cwnd_segments: u64,
    /// Pacing margin in percent, 1 (Linux `bbr_pacing_margin_percent`: pace ~1%
    /// below the estimate so the bottleneck queue drains).
    pub pacing_margin_percent: u64,
    /// Growth that counts as "the pipe is still filling" in STARTUP, 1.25
    /// (draft-00 "Estimating when Startup has filled the pipe"; Linux `bbr_full_bw_thresh`).
    pub full_bw_growth: f64,
    /// Rounds without that growth before the pipe is deemed full, 3 (draft-00,
    /// same section; Linux `bbr_full_bw_cnt`).
    pub full_bw_rounds: u32,
    /// PROBE_BW phase index entered from DRAIN, PROBE_RTT or the end of a
    /// long-term (policed) interval. `None` (the default) draws it as Linux does
    /// in `bbr_reset_probe_bw_mode`: uniformly from {0, 2, 3, …, 7}, never the
    /// 0.75 phase (`CYCLE_LEN - 1 - prandom_u32_max(bbr_cycle_rand)`, then one
    /// advance). fairlab controllers own no RNG, so the draw is a hash of the
    /// controller's own inputs at that moment (ACK time, bytes delivered, entry
    /// count; `probe_bw.rs`): deterministic for a seed, and different for flows
    /// whose ACK histories differ, which is what desynchronises their probing.
    /// `Some(i)` pins every entry to phase `i` (0 or 2..=7).
    pub cycle_start: Option<usize>,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig {
            high_gain: 2.885,
            cwnd_gain: 2.0,
            bw_window_rounds: 10,
            min_rtt_window: SimDuration::from_secs(10),
            probe_rtt_duration: SimDuration::from_millis(200),
            min_cwnd_segments: 4,
            pacing_margin_percent: 1,
            full_bw_growth: 1.25,
            full_bw_rounds: 3,
            cycle_start: None,
        }
    }
}

impl BbrConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "cycle_start = \"random\" (or 0, 2..7), high_gain = 2.885, cwnd_gain = 2, \
bw_window_rounds = 10, min_rtt_window_ms = 10000, probe_rtt_ms = 200, min_cwnd = 4, \
pacing_margin_percent = 1, full_bw_growth = 1.25, full_bw_rounds = 3";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let d = BbrConfig::default();
        let mut r = ParamReader::new("bbr", p);
        const CYCLE_ALLOWED: &str = "\"random\" (Linux's draw) or an integer 0 or 2..=7 (PROBE_BW phase; 1 is the 0.75 drain phase, which Linux never starts in)";
        let cycle_start = if p.get("cycle_start").is_some_and(|v| v.is_string()) {
            r.choice("cycle_start", "random", &["random"], CYCLE_ALLOWED)?;
            None
        } else {
            let c = r.u64("cycle_start", 0, 0, 7, CYCLE_ALLOWED)?;
            if c == 1 {
                return Err(CcError::BadParam { cca: "bbr", param: "cycle_start", value: "1".into(), allowed: CYCLE_ALLOWED });
            }
            p.get("cycle_start").map(|_| c as usize)
        };
        let high_gain = r.f64("high_gain", d.high_gain, 1.5, 4.0, "a number in [1.5, 4] (default 2/ln 2 = 2.885)")?;
        let cwnd_gain = r.f64("cwnd_gain", d.cwnd_gain, 1.0, 4.0, "a number in [1, 4] (default 2)")?;
        let bw_window_rounds = r.u64("bw_window_rounds", d.bw_window_rounds, 2, 100, "an integer in [2, 100] rounds (default 10)")?;
        let min_rtt_ms = r.u64("min_rtt_window_ms", 10_000, 100, 3_600_000, "an integer in [100, 3600000] ms (default 10000)")?;
        let probe_ms = r.u64("probe_rtt_ms", 200, 0, 10_000, "an integer in [0, 10000] ms; 0 disables PROBE_RTT (default 200)")?;
        let min_cwnd = r.u64("min_cwnd", d.min_cwnd_segments, 1, 100, "an integer in [1, 100] segments (default 4)")?;
        let margin = r.u64("pacing_margin_percent", d.pacing_margin_percent, 0, 50, "an integer in [0, 50] percent (default 1)")?;
        let growth = r.f64("full_bw_growth", d.full_bw_growth, 1.0, 4.0, "a number in [1, 4] (default 1.25)")?;
        let rounds = r.u64("full_bw_rounds", d.full_bw_rounds as u64, 1, 100, "an integer in [1, 100] (default 3)")?;
        r.finish()?;
        Ok(BbrConfig {
            high_gain,
            cwnd_gain,
            bw_window_rounds,
            min_rtt_window: SimDuration::from_millis(min_rtt_ms),
            probe_rtt_duration: SimDuration::from_millis(probe_ms),
            min_cwnd_segments: min_cwnd,
            pacing_margin_percent: margin,
            full_bw_growth: growth,
            full_bw_rounds: rounds as u32,
            cycle_start,
        })
    }

    /// DRAIN's pacing gain: the reciprocal of STARTUP's (draft-00 "Drain").
    pub(crate) fn drain_gain(&self) -> f64 {
        1.0 / self.high_gain
    }
}
