//! The pacing rate and GSO size Linux keeps for every TCP socket, paced or not:
//! the sender's GSO model sizes its bursts from them (`tcp/tso.rs`) and CUBIC's
//! HyStart reads the rate for its ACK-delay allowance (`hystart_ack_delay`).

use netunits::SimDuration;

/// A socket's GSO size limit (`sk_gso_max_size`): the device's 64 KB, which TCP
/// keeps with offloads off too (it then segments in software).
pub(crate) const GSO_MAX_SIZE: u64 = 65_536;
/// The most payload one GSO packet carries: `GSO_MAX_SIZE − 1 − MAX_TCP_HEADER`
/// (`tcp_xmit_size_goal`; MAX_TCP_HEADER is 320 on a typical x86-64 build).
pub(crate) const GSO_PAYLOAD_MAX: u64 = GSO_MAX_SIZE - 1 - 320;
/// Linux `sk_pacing_shift` default: a send burst (one skb) carries 2^-10 s, about
/// a millisecond, of the pacing rate (`tcp_tso_autosize`).
pub(crate) const PACING_SHIFT: u32 = 10;
/// Linux `sysctl_tcp_pacing_ss_ratio`, %.
const PACING_SS_RATIO: u64 = 200;
/// Linux `sysctl_tcp_pacing_ca_ratio`, %.
const PACING_CA_RATIO: u64 = 120;

/// Linux `tcp_update_pacing_rate`, bytes per second: 200 % of cwnd·MSS/sRTT while
/// cwnd is below half of ssthresh, 120 % after, the window being the larger of
/// cwnd and the packets out (segments). `None` before an RTT sample (Linux then
/// leaves the rate unlimited).
pub(crate) fn linux_pacing_rate(mss: u64, cwnd: u64, ssthresh: u64, packets_out: u64, srtt: SimDuration) -> Option<u64> {
    let srtt_ns = srtt.as_nanos();
    if srtt_ns == 0 {
        return None;
    }
    let ratio = if cwnd < ssthresh / 2 { PACING_SS_RATIO } else { PACING_CA_RATIO };
    let w = cwnd.max(packets_out) as u128;
    // mss · ratio/100 · w / srtt, with srtt in ns: · 10^9 / 100 = · 10^7.
    let rate = mss as u128 * ratio as u128 * w * 10_000_000 / srtt_ns as u128;
    Some(rate.min(u64::MAX as u128) as u64)
}
