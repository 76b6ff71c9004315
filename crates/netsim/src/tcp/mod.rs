//! The TCP endpoint: a [`sender::TcpSender`] and a [`receiver::TcpReceiver`] joined
//! into one flow.

mod pending;
pub(crate) mod receiver;
pub(crate) mod sender;
mod tso;

pub use sender::CaState;

use netunits::{SimDuration, SimTime};

use crate::cc::CongestionControl;
use crate::packet::{Pkt, TcpAck as Ack, PF_COOKIE, PF_SYN};

/// One TCP flow: both ends. `repr(C)` with the receiver first: the simulator
/// keeps each flow on its own cache lines, and this way the receiver's hot fields
/// (see `TcpReceiver`) fill the first two lines exactly.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct TcpFlow {
    pub rcv: receiver::TcpReceiver,
    pub snd: sender::TcpSender,
}

/// What a TCP flow is built from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TcpConfig {
    pub flow: u32,
    pub mss: u32,
    pub ecn: bool,
    pub sack: bool,
    pub bytes: Option<u64>,
    pub start: SimTime,
    pub stop: SimTime,
    pub rwnd_bytes: Option<u64>,
    /// `rwnd_bytes` is the autotuning maximum (Linux `tcp_rmem[2]` / 2), not a
    /// fixed buffer: the receive buffer grows to it as Linux's does.
    pub rwnd_autotune: bool,
    pub delayed_ack: bool,
    /// Minimum delayed-ACK timeout (Linux `TCP_ATO_MIN`).
    pub delack_timeout: SimDuration,
    /// The path's base RTT: what the receiver measured on the handshake.
    pub base_rtt: SimDuration,
    pub ring_hint: usize,
    /// Linux `tcp_recovery` bit 0: RACK loss detection.
    pub rack: bool,
    /// Linux `tcp_early_retrans` = 3: tail loss probes.
    pub tlp: bool,
    /// Linux `tcp_frto`: F-RTO.
    pub frto: bool,
    /// Group new data into autosized GSO skbs and defer them as Linux does (`tso.rs`).
    pub tso_defer: bool,
    /// Linux's SACK compression at the receiver (`receiver.rs`).
    pub sack_compress: bool,
}

impl TcpFlow {
    pub fn new(c: TcpConfig, cc: Box<dyn CongestionControl>) -> Self {
        let mss = c.mss as u64;
        let (total_segs, last_len) = match c.bytes {
            Some(b) => (b.div_ceil(mss), b - (b.div_ceil(mss) - 1) * mss),
            None => (u64::MAX, mss),
        };
        let rwnd_segs = c.rwnd_bytes.map_or(u64::MAX, |r| (r / mss).max(1));
        let snd = sender::TcpSender::new(
            sender::SenderConfig {
                flow: c.flow,
                mss: c.mss,
                ecn: c.ecn,
                sack: c.sack,
                total_segs,
                last_seg_len: last_len as u32,
                start: c.start,
                stop: c.stop,
                rwnd_segs,
                rack: c.rack,
                tlp: c.tlp,
                frto: c.frto,
                tso_defer: c.tso_defer,
                handshake: true,
                cookie_bytes: sender::IPERF3_COOKIE_BYTES,
            },
            cc,
            c.ring_hint,
        );
        let rcv = receiver::TcpReceiver::new(
            mss,
            total_segs,
            last_len,
            c.sack,
            c.ecn,
            c.delayed_ack,
            c.delack_timeout,
            c.base_rtt,
            c.rwnd_bytes,
            c.rwnd_autotune,
            c.sack_compress,
        );
        TcpFlow { snd, rcv }
    }

    #[inline]
    pub fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        self.snd.on_ack(now, ack, out);
    }

    #[inline]
    pub fn on_data(&mut self, now: SimTime, pkt: &Pkt) -> Option<Ack> {
        if pkt.flags & PF_SYN != 0 {
            // RFC 9293 §3.5: the listener answers every SYN (a retransmitted one
            // too) with a SYN-ACK at once.
            return Some(self.rcv.syn_ack(now));
        }
        if pkt.flags & PF_COOKIE != 0 {
            return Some(self.rcv.cookie_ack(now, pkt));
        }
        self.rcv.on_data(now, pkt)
    }

    pub fn on_timer(&mut self, now: SimTime, out: &mut Vec<Pkt>) -> Option<Ack> {
        let ack = self.rcv.on_timer(now);
        if now >= self.snd.next_wakeup() {
            self.snd.on_timer(now, out);
        }
        ack
    }

    #[inline]
    pub fn next_wakeup(&self) -> SimTime {
        self.snd.next_wakeup().min(self.rcv.wakeup())
    }
}
