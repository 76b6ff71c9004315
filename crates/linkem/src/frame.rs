//! Ethernet / IPv4 / TCP header reading, and the one header edit linkem makes:
//! setting ECN Congestion Experienced.
//!
//! Read this first: linkem is an L2 bridge and forwards every frame; it parses
//! headers only to fill [`aqm::PacketMeta`] (flow, size, ECN capability, pure ACK)
//! and to read TCP timestamps for the passive RTT estimate. Anything it does not
//! understand (VLAN tags, IPv6, IP fragments) is forwarded as an opaque frame of
//! its own flow. References: RFC 791 (IPv4 header and checksum), RFC 793 §3.1 (TCP
//! header, data offset), RFC 3168 §5 (the ECN field), RFC 7323 §3 (timestamps
//! option), RFC 1071 (computing the Internet checksum).

/// Ethernet II header length (no VLAN tag, no FCS: AF_PACKET frames carry neither).
pub const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// Group (multicast or broadcast) address: the I/G bit, the least significant bit
    /// of the first octet (IEEE 802-2014 §8.2).
    pub fn is_group(self) -> bool {
        self.0[0] & 1 == 1
    }
}

/// What a flow is keyed on: the IPv4 5-tuple when there is one, otherwise the MAC
/// pair and EtherType (so ARP or IPv6 traffic still gets a stable flow of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // the field names are the header fields they hold
pub enum FlowKey {
    /// IPv4 source, destination, protocol and ports; ports are zero for protocols
    /// without ports and for non-first fragments.
    V4 { src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16 },
    /// Anything else: source and destination MAC and the EtherType.
    L2 { src: Mac, dst: Mac, ethertype: u16 },
}

impl FlowKey {
    /// The key of the opposite direction (the ACKs of this flow).
    pub fn reversed(self) -> FlowKey {
        match self {
            FlowKey::V4 { src, dst, proto, sport, dport } => FlowKey::V4 { src: dst, dst: src, proto, sport: dport, dport: sport },
            FlowKey::L2 { src, dst, ethertype } => FlowKey::L2 { src: dst, dst: src, ethertype },
        }
    }
}

/// TCP facts linkem uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    /// Payload bytes (IP total length − IP header − TCP header, RFC 793 §3.1).
    pub payload_len: u32,
    /// `(TSval, TSecr)` of the timestamps option, when present (RFC 7323 §3).
    pub timestamps: Option<(u32, u32)>,
}

/// The headers of one frame, as far as linkem reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// Flow key.
    pub flow: FlowKey,
    /// Offset of the IPv4 header, when the frame is IPv4 with a sane header.
    pub ipv4_at: Option<usize>,
    /// IPv4 ECN field (RFC 3168 §5): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    pub ecn: u8,
    /// TCP facts for unfragmented TCP segments.
    pub tcp: Option<TcpInfo>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Read a frame's headers; `None` only when it is shorter than an Ethernet header
/// (such a frame cannot be forwarded meaningfully).
pub fn parse(frame: &[u8]) -> Option<Headers> {
    if frame.len() < ETH_HLEN {
        return None;
    }
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&frame[0..6]);
    src.copy_from_slice(&frame[6..12]);
    let (dst, src) = (Mac(dst), Mac(src));
    let ethertype = be16(frame, 12);
    let l2 = Headers { dst, src, flow: FlowKey::L2 { src, dst, ethertype }, ipv4_at: None, ecn: 0, tcp: None };
    if ethertype != ETHERTYPE_IPV4 {
        return Some(l2);
    }
    let ip = &frame[ETH_HLEN..];
    // RFC 791 §3.1: version 4, IHL in 32-bit words (at least 5), total length
    // covering the header and not exceeding what we received.
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Some(l2);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(be16(ip, 2));
    if ihl < 20 || total < ihl || total > ip.len() || ip.len() < ihl {
        return Some(l2);
    }
    let ecn = ip[1] & 0b11;
    let proto = ip[9];
    let frag_off = be16(ip, 6) & 0x1fff;
    let mut s = [0u8; 4];
    let mut d = [0u8; 4];
    s.copy_from_slice(&ip[12..16]);
    d.copy_from_slice(&ip[16..20]);
    let l4 = &ip[ihl..total];
    let has_ports = frag_off == 0 && (proto == IPPROTO_TCP || proto == IPPROTO_UDP) && l4.len() >= 4;
    let (sport, dport) = if has_ports { (be16(l4, 0), be16(l4, 2)) } else { (0, 0) };
    let tcp = if frag_off == 0 && proto == IPPROTO_TCP { parse_tcp(l4) } else { None };
    Some(Headers {
        dst,
        src,
        flow: FlowKey::V4 { src: s, dst: d, proto, sport, dport },
        ipv4_at: Some(ETH_HLEN),
        ecn,
        tcp,
    })
}

/// `seg` is the TCP header plus payload (up to the IP total length).
fn parse_tcp(seg: &[u8]) -> Option<TcpInfo> {
    if seg.len() < 20 {
        return None;
    }
    // RFC 793 §3.1: Data Offset counts 32-bit words, at least 5.
    let doff = usize::from(seg[12] >> 4) * 4;
    if doff < 20 || doff > seg.len() {
        return None;
    }
    Some(TcpInfo { payload_len: (seg.len() - doff) as u32, timestamps: find_timestamps(&seg[20..doff]) })
}

/// Walk TCP options for the timestamps option (kind 8, length 10; RFC 7323 §3).
/// RFC 793 §3.1: kind 0 ends the list, kind 1 is one byte of padding, every other
/// option carries its total length in its second byte.
fn find_timestamps(mut opts: &[u8]) -> Option<(u32, u32)> {
    while let Some(&kind) = opts.first() {
        match kind {
            0 => return None,
            1 => opts = &opts[1..],
            _ => {
                let len = usize::from(*opts.get(1)?);
                if len < 2 || len > opts.len() {
                    return None;
                }
                if kind == 8 && len == 10 {
                    return Some((be32(opts, 2), be32(opts, 6)));
                }
                opts = &opts[len..];
            }
        }
    }
    None
}

/// The Internet checksum of `data` (RFC 1071): the one's complement of the one's
/// complement sum of its 16-bit big-endian words.
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Set CE on an ECN-capable IPv4 packet whose header starts at `ip_at`, and
/// recompute the header checksum (RFC 791 §3.1: the checksum covers the header
/// only, so the TCP checksum — whose pseudo-header has no ECN bits — stays valid).
/// RFC 3168 §5: only ECT(0)/ECT(1) packets may be marked; a Not-ECT packet is left
/// alone. Returns whether the frame changed.
pub fn set_ce(frame: &mut [u8], ip_at: usize) -> bool {
    let Some(ip) = frame.get_mut(ip_at..) else { return false };
    if ip.len() < 20 {
        return false;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let ecn = ip[1] & 0b11;
    if ihl < 20 || ip.len() < ihl || ecn == 0 || ecn == 0b11 {
        return false;
    }
    ip[1] |= 0b11;
    ip[10] = 0;
    ip[11] = 0;
    let c = internet_checksum(&ip[..ihl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Build an Ethernet + IPv4 + TCP frame by hand, byte by byte, with a correct IP
    /// checksum computed by the test's own summing (not `internet_checksum`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tcp_frame(
        dst: [u8; 6],
        src: [u8; 6],
        ip_src: [u8; 4],
        ip_dst: [u8; 4],
        sport: u16,
        dport: u16,
        ecn: u8,
        payload: usize,
        ts: Option<(u32, u32)>,
    ) -> Vec<u8> {
        let opts: Vec<u8> = match ts {
            // NOP, NOP, TS(kind 8, len 10, TSval, TSecr): Linux's usual layout.
            Some((v, e)) => {
                let mut o = vec![1, 1, 8, 10];
                o.extend_from_slice(&v.to_be_bytes());
                o.extend_from_slice(&e.to_be_bytes());
                o
            }
            None => vec![],
        };
        let tcp_len = 20 + opts.len();
        let total = 20 + tcp_len + payload;
        let mut f = Vec::new();
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, ecn, (total >> 8) as u8, total as u8, 0x12, 0x34, 0x40, 0x00, 64, 6, 0, 0];
        ip.extend_from_slice(&ip_src);
        ip.extend_from_slice(&ip_dst);
        let mut sum: u32 = ip.chunks(2).map(|c| (u32::from(c[0]) << 8) | u32::from(c[1])).sum();
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        let ck = !(sum as u16);
        ip[10] = (ck >> 8) as u8;
        ip[11] = ck as u8;
        f.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&sport.to_be_bytes());
        tcp[2..4].copy_from_slice(&dport.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        tcp[13] = 0x10; // ACK
        f.extend_from_slice(&tcp);
        f.extend_from_slice(&opts);
        f.extend(std::iter::repeat_n(0xab, payload));
        f
    }

    /// Independent check of an IPv4 header checksum: RFC 1071 §1's receiver rule —
    /// summing all 16-bit words *including* the checksum field gives 0xffff.
    pub(crate) fn header_sums_to_ffff(ip: &[u8]) -> bool {
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let mut sum: u64 = 0;
        for i in (0..ihl).step_by(2) {
            sum += (u64::from(ip[i]) << 8) | u64::from(ip[i + 1]);
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    #[test]
    fn checksum_of_a_published_header_matches() {
        // A widely reproduced worked example of the IPv4 header checksum: the header
        // 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7 has checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
        h[10] = 0xb8;
        h[11] = 0x61;
        assert!(header_sums_to_ffff(&h));
        // Odd length pads with a zero byte (RFC 1071 §4.1).
        assert_eq!(internet_checksum(&[0x12]), !0x1200);
    }

    #[test]
    fn parses_tcp_five_tuple_size_ecn_and_timestamps() {
        let f = tcp_frame(B, A, [192, 0, 2, 1], [192, 0, 2, 2], 40000, 5201, 0b10, 1448, Some((111, 222)));
        let h = parse(&f).unwrap();
        assert_eq!(h.src, Mac(A));
        assert_eq!(h.dst, Mac(B));
        assert_eq!(h.ecn, 0b10);
        assert_eq!(h.ipv4_at, Some(ETH_HLEN));
        assert_eq!(
            h.flow,
            FlowKey::V4 { src: [192, 0, 2, 1], dst: [192, 0, 2, 2], proto: 6, sport: 40000, dport: 5201 }
        );
        assert_eq!(h.tcp, Some(TcpInfo { payload_len: 1448, timestamps: Some((111, 222)) }));
        assert_eq!(f.len(), ETH_HLEN + 20 + 32 + 1448);
    }

    #[test]
    fn pure_ack_has_no_payload_and_options_may_be_absent() {
        let f = tcp_frame(B, A, [192, 0, 2, 2], [192, 0, 2, 1], 5201, 40000, 0, 0, None);
        let h = parse(&f).unwrap();
        assert_eq!(h.tcp, Some(TcpInfo { payload_len: 0, timestamps: None }));
    }

    #[test]
    fn ethernet_padding_beyond_ip_total_length_is_not_payload() {
        // A 54-byte ACK padded to the 60-byte Ethernet minimum.
        let mut f = tcp_frame(B, A, [192, 0, 2, 2], [192, 0, 2, 1], 5201, 40000, 0, 0, None);
        f.extend_from_slice(&[0; 6]);
        assert_eq!(parse(&f).unwrap().tcp.unwrap().payload_len, 0);
    }

    #[test]
    fn non_ip_and_broken_ip_are_opaque_l2_flows() {
        let mut arp = vec![0xff; 6];
        arp.extend_from_slice(&A);
        arp.extend_from_slice(&[0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        let h = parse(&arp).unwrap();
        assert!(h.dst.is_group());
        assert_eq!(h.ipv4_at, None);
        assert!(matches!(h.flow, FlowKey::L2 { ethertype: 0x0806, .. }));
        // IPv4 whose total length exceeds the frame.
        let mut f = tcp_frame(B, A, [1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 0, 10, None);
        f.truncate(f.len() - 5);
        assert_eq!(parse(&f).unwrap().ipv4_at, None);
        assert!(parse(&[0u8; 13]).is_none());
    }

    #[test]
    fn set_ce_marks_ect_and_fixes_the_header_checksum() {
        for ect in [0b01u8, 0b10] {
            let mut f = tcp_frame(B, A, [10, 1, 2, 3], [10, 4, 5, 6], 1, 2, ect, 100, None);
            let before = f.clone();
            assert!(header_sums_to_ffff(&f[ETH_HLEN..]));
            assert!(set_ce(&mut f, ETH_HLEN));
            assert_eq!(f[ETH_HLEN + 1] & 0b11, 0b11);
            assert!(header_sums_to_ffff(&f[ETH_HLEN..]), "checksum broken after marking ECT={ect}");
            // Nothing but the TOS byte and the checksum changed.
            let diff: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
            assert!(diff.iter().all(|&i| [ETH_HLEN + 1, ETH_HLEN + 10, ETH_HLEN + 11].contains(&i)), "{diff:?}");
        }
    }

    #[test]
    fn set_ce_leaves_not_ect_and_ce_alone() {
        for ecn in [0b00u8, 0b11] {
            let mut f = tcp_frame(B, A, [10, 1, 2, 3], [10, 4, 5, 6], 1, 2, ecn, 0, None);
            let before = f.clone();
            assert!(!set_ce(&mut f, ETH_HLEN));
            assert_eq!(f, before);
        }
    }

    #[test]
    fn timestamp_option_is_found_after_other_options() {
        // MSS(4) then NOP, then SACK-permitted(2), then TS, then EOL.
        let mut o = vec![2, 4, 0x05, 0xb4, 1, 4, 2, 8, 10];
        o.extend_from_slice(&7u32.to_be_bytes());
        o.extend_from_slice(&9u32.to_be_bytes());
        o.push(0);
        assert_eq!(find_timestamps(&o), Some((7, 9)));
        // A length byte that runs off the end stops the walk.
        assert_eq!(find_timestamps(&[2, 40, 0]), None);
        assert_eq!(find_timestamps(&[3, 0]), None);
    }
}
