//! Packets as the simulator moves them: small `Copy` structs, never boxed.
//!
//! Data packets ([`Pkt`]) cross the access link, the bottleneck queue and the
//! forward propagation delay; acknowledgements ([`Ack`]) take the uncongested
//! reverse path and never enter a queue discipline.
//!
//! Wire size of a data packet = payload + [`HEADER_BYTES`] (52 = IPv4 20 + TCP 20 +
//! the 12-byte RFC 7323 timestamp option as Linux sends it; an MSS of 1448 makes a
//! 1500-byte IP packet, the seed-001 testbed's MTU). DCCP data packets are given
//! the same 52-byte overhead so that a CCID2 flow and a TCP flow with the same
//! `mss` put identical packets on the wire (RFC 4340 §5.1's generic header with
//! 48-bit sequence numbers is 16 bytes; the rest stands in for options).
//! Every packet travels in an Ethernet frame, [`LINK_FRAMING_BYTES`] more (1514
//! bytes for a full segment), and the frame is what links serialise and what queue
//! disciplines count ([`WIRE_BYTES`]): Linux's qdiscs see `skb->len` with the MAC
//! header, so a 1.25-MB `bfifo` holds 825 full segments, not 833 (the vm backend's
//! bottleneck backlog peaks at 818 × 1514 B in a 1-BDP run).

use aqm::{Packet, PacketMeta};
use netunits::SimTime;

/// Header bytes added to the payload in the IP packet (see module docs).
pub const HEADER_BYTES: u32 = 52;

/// Link-layer framing serialised on every link on top of the IP packet: the
/// 14-byte Ethernet header (no preamble, inter-frame gap or FCS), so a full
/// 1500-byte packet takes 1514 bytes of link time. That is what Linux's
/// shapers charge (htb/tbf/netem see `skb->len` with the MAC header) and what
/// fairlab's live link emulator serialises (`linkem`, the whole frame).
pub const LINK_FRAMING_BYTES: u32 = 14;

/// Bytes of a data packet on the wire beyond its payload: IP and TCP headers plus
/// the Ethernet header. `PacketMeta::bytes` = payload + this; links serialise and
/// queue disciplines count exactly that.
pub const WIRE_BYTES: u32 = HEADER_BYTES + LINK_FRAMING_BYTES;

/// Flag: ECN Congestion Experienced (RFC 3168 §5).
pub(crate) const PF_CE: u8 = 1;
/// Flag: TCP CWR (RFC 3168 §6.1.2), set on the first new segment after a reduction.
pub(crate) const PF_CWR: u8 = 2;
/// Flag: this is a retransmission (for statistics; receivers ignore it).
pub(crate) const PF_RETX: u8 = 4;
/// Flag: a TCP SYN (RFC 9293 §3.5), no payload.
pub(crate) const PF_SYN: u8 = 8;
/// Flag: the application's greeting before its bulk data (iperf3's 37-byte
/// cookie, `TcpSender::cookie`); outside the data's segment numbering.
pub(crate) const PF_COOKIE: u8 = 16;

/// IP bytes of a SYN: 20 IP + 20 TCP + 20 of options (MSS, SACK-permitted,
/// timestamps, window scale, as Linux sends them).
pub(crate) const SYN_BYTES: u32 = 60;

/// A data packet (TCP segment or DCCP-Data datagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    /// What a queue discipline sees.
    pub meta: PacketMeta,
    /// TCP: segment index (byte sequence = index × MSS). DCCP: packet sequence number.
    pub seq: u64,
    /// Payload bytes.
    pub len: u32,
    /// `PF_*` flags.
    pub flags: u8,
    /// DCCP: the sender's current Ack Ratio (RFC 4341 §6.1.2, carried by the Ack
    /// Ratio feature of RFC 4340 §11.3). TCP: the timestamp echo (RFC 7323 §3.2
    /// TSecr), the `tsval` of the newest ACK the sender had when it sent this.
    pub aux: u16,
    /// TCP: the sender's millisecond timestamp clock when it sent this (RFC 7323
    /// §3.2 TSval, [`ts_ms`]); the receiver echoes it in [`TcpAck::tsecr`]. DCCP: 0.
    pub tsval: u16,
}

/// A host's millisecond timestamp clock (Linux `tcp_time_stamp`, RFC 7323 §4.1), to
/// 16 bits: differences wrap as TCP's own 32-bit timestamps do, and every RTT here
/// is far below 65 s. Linux adds a random offset per connection, which no
/// difference of two stamps sees.
#[inline]
pub(crate) fn ts_ms(now: SimTime) -> u16 {
    (now.as_nanos() / 1_000_000) as u16
}

/// A host's TCP timestamp clock in milliseconds, on 32 bits as TCP carries it.
#[inline]
pub(crate) fn ts_clock_ms(now: SimTime) -> u32 {
    (now.as_nanos() / 1_000_000) as u32
}

/// A 16-bit stamp of [`ts_ms`] on the full 32-bit millisecond clock TCP carries
/// (RFC 7323 §3.2), given that it was taken at or before `now` and less than 65 s
/// earlier: what a controller that does arithmetic on the timestamps themselves
/// (TCP-LP) reads.
#[inline]
pub(crate) fn ts_ms32(now: SimTime, stamp: u16) -> u32 {
    let clock = ts_clock_ms(now);
    clock.wrapping_sub(u32::from((clock as u16).wrapping_sub(stamp)))
}

impl Packet for Pkt {
    #[inline]
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    #[inline]
    fn mark_ce(&mut self) {
        self.flags |= PF_CE;
    }
}

/// Maximum SACK blocks per ACK: 3, as Linux sends with the timestamp option
/// (RFC 2018 §3: 40 option bytes − 12 for timestamps leave room for 3 blocks).
pub(crate) const MAX_SACK_BLOCKS: usize = 3;

/// "No D-SACK" in [`TcpAck::dsack_off`].
const NO_DSACK: i32 = i32::MIN;

/// A TCP acknowledgement: 72 bytes. The DCCP-only fields live in [`DccpAck`], so
/// the ACK every TCP flow sends for every other segment carries none of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TcpAck {
    /// Cumulative ACK = next expected segment index.
    pub cum: u64,
    /// SACK blocks `[start, end)` in segment indices, most recent first
    /// (RFC 2018 §4).
    pub blocks: [(u64, u64); MAX_SACK_BLOCKS],
    /// D-SACK (RFC 2883 §4): the segment that arrived more than once, as its
    /// distance from `cum` (below it, or inside an out-of-order range above), or
    /// `NO_DSACK` (the first SACK block of a real ACK; kept apart here). Four
    /// bytes, not an `Option<u64>`'s sixteen, so that the timestamp echo fits.
    pub(crate) dsack_off: i32,
    /// Valid entries in `blocks`.
    pub nblocks: u8,
    /// `ACK_ECE` (RFC 3168 §6.1.3), `ACK_SYN` (the SYN-ACK answering the
    /// sender's SYN) and `ACK_COOKIE`; one byte, so the timestamp fits the 72 bytes.
    pub flags: u8,
    /// The receiver's timestamp clock when it sent this ACK (RFC 7323 §3.2
    /// TSval): Linux's millisecond clock, kept to 16 bits (differences wrap, as
    /// TCP's own 32-bit timestamps do; every RTT here is far below 65 s). The
    /// sender echoes it in its data (`Pkt::aux`), from which the receiver measures
    /// its RTT for receive-buffer autotuning.
    pub tsval: u16,
    /// The timestamp echo (RFC 7323 §3.2 TSecr): the `tsval` of the data segment
    /// the receiver keeps as `TS.Recent` (§4.3, Linux `tcp_replace_ts_recent`).
    /// The sender times an ACK by it when no segment it delivers can be timed
    /// (Linux `tcp_ack_update_rtt`).
    pub tsecr: u16,
    /// Advertised receive window in segments from `cum` (the TCP header's window
    /// field, RFC 9293 §3.8.6), `NO_WINDOW_LIMIT` when the receiver sets none.
    pub wnd: u32,
}

/// [`TcpAck::flags`]: ECN-Echo.
pub(crate) const ACK_ECE: u8 = 1;
/// [`TcpAck::flags`]: a SYN-ACK.
pub(crate) const ACK_SYN: u8 = 2;
/// [`TcpAck::flags`]: the acknowledgement of the application's greeting
/// ([`PF_COOKIE`]).
pub(crate) const ACK_COOKIE: u8 = 4;

/// "No receive-window limit" in [`TcpAck::wnd`].
pub(crate) const NO_WINDOW_LIMIT: u32 = u32::MAX;

impl Default for TcpAck {
    fn default() -> Self {
        TcpAck { cum: 0, blocks: [(0, 0); MAX_SACK_BLOCKS], dsack_off: NO_DSACK, nblocks: 0, flags: 0, tsval: 0, tsecr: 0, wnd: NO_WINDOW_LIMIT }
    }
}

impl TcpAck {
    /// ECN-Echo set (RFC 3168 §6.1.3).
    #[inline]
    pub fn ece(&self) -> bool {
        self.flags & ACK_ECE != 0
    }
    /// This is the SYN-ACK answering the sender's SYN.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags & ACK_SYN != 0
    }
    /// This acknowledges the application's greeting ([`PF_COOKIE`]).
    #[inline]
    pub fn cookie(&self) -> bool {
        self.flags & ACK_COOKIE != 0
    }
    /// The D-SACKed segment, if this ACK reports one.
    #[inline]
    pub fn dsack(&self) -> Option<u64> {
        (self.dsack_off != NO_DSACK).then(|| self.cum.wrapping_add_signed(self.dsack_off as i64))
    }
    /// Report segment `s` as received twice (set `cum` first).
    #[inline]
    pub fn set_dsack(&mut self, s: u64) {
        let off = s.wrapping_sub(self.cum) as i64;
        debug_assert!(off > NO_DSACK as i64 && off <= i32::MAX as i64, "D-SACK {s} too far from the cumulative ACK {}", self.cum);
        self.dsack_off = off as i32;
        // With timestamps the option has room for three blocks, the D-SACK first
        // (RFC 2883 §4; Linux `tcp_established_options`).
        self.nblocks = self.nblocks.min(MAX_SACK_BLOCKS as u8 - 1);
    }
}

/// A DCCP-Ack (RFC 4340 §5.3, with the CCID2 feedback of RFC 4341 §5). Its Ack
/// Vector is not carried here: the flow's receiver keeps what each Ack reports
/// (`dccp::AckVector`), by this Ack's number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DccpAck {
    /// Greatest sequence number received (RFC 4340 §5.3 Acknowledgement Number).
    pub cum: u64,
    /// Cumulative count of CE-marked packets received (the "ECN marked" state of
    /// the Ack Vector, RFC 4340 §11.4, summarised).
    pub ce_count: u64,
    /// This Ack's own sequence number (Acks are sequenced in DCCP, RFC 4340 §7.1;
    /// the sender detects lost Acks from gaps, RFC 4341 §6.1.2).
    pub ack_seq: u64,
}

impl DccpAck {
    /// The Ack numbered `ack_seq` of `cum`.
    pub fn new(cum: u64, ce_count: u64, ack_seq: u64) -> Self {
        DccpAck { cum, ce_count, ack_seq }
    }
}

/// An acknowledgement on the reverse path: what the reverse pipes carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ack {
    /// From a TCP receiver.
    Tcp(TcpAck),
    /// From a DCCP receiver.
    Dccp(DccpAck),
}

// The point of the split: a reverse-pipe entry (time, flow, Ack) stays small.
const _: () = assert!(std::mem::size_of::<Ack>() <= 80);
const _: () = assert!(std::mem::size_of::<Pkt>() <= 48);
