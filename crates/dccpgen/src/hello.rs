//! The two small messages that open a test, before any payload.
//!
//! The client's **hello** tells the server (which does the measuring) the
//! reporting interval and when to stop: 32 bytes, big-endian: magic `FLDG`,
//! version (u32), interval ns (u64), duration ns (u64), packet size (u32),
//! requested CCID (u8), 3 zero bytes. The server answers with [`READY`]; the
//! test starts on both ends at that message (the server's `t0` when it is
//! sent, the client's when it arrives).
//!
//! Why wait for an answer: a DCCP client stays in PARTOPEN until a packet
//! from the server arrives (RFC 4340 §8.1.5), and in PARTOPEN Linux keeps
//! [`FEATNEG_OVERHEAD`] bytes of every packet for feature-negotiation options.
//! A larger payload sent then makes the 6.1 kernel log "dccp_xmit_packet:
//! Payload too large (1440) for featneg." and give up resending its Confirm
//! options (seen in a guest run). The server's READY moves the client to OPEN
//! before the first full-size packet.
//! Over DCCP each message is one datagram; over TCP they are the first bytes
//! of each direction. Neither is counted as payload.

/// Length of the hello on the wire.
pub const HELLO_LEN: usize = 32;
/// Length of READY on the wire.
pub const READY_LEN: usize = 8;
/// The server's answer: the test starts now.
pub const READY: &[u8; READY_LEN] = b"FLDG-GO\n";
/// Bytes Linux reserves for feature-negotiation options on a packet sent in
/// PARTOPEN (`DCCP_FEATNEG_OVERHEAD`, net/dccp/dccp.h: 32 words).
pub const FEATNEG_OVERHEAD: usize = 128;
const MAGIC: &[u8; 4] = b"FLDG";
const VERSION: u32 = 1;

/// What the client tells the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Reporting interval, ns (> 0).
    pub interval_ns: u64,
    /// Test duration, ns (> 0).
    pub duration_ns: u64,
    /// Payload bytes per send.
    pub packet_size: u32,
    /// The CCID the client asked for (0 for TCP).
    pub ccid: u8,
}

impl Hello {
    /// The wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4..8].copy_from_slice(&VERSION.to_be_bytes());
        b[8..16].copy_from_slice(&self.interval_ns.to_be_bytes());
        b[16..24].copy_from_slice(&self.duration_ns.to_be_bytes());
        b[24..28].copy_from_slice(&self.packet_size.to_be_bytes());
        b[28] = self.ccid;
        b
    }

    /// Parse the first message of a connection; the error says what was wrong.
    pub fn decode(b: &[u8]) -> Result<Hello, String> {
        if b.len() < HELLO_LEN {
            return Err(format!("its first message has {} bytes, not the {HELLO_LEN} of a fairlab-dccpgen hello", b.len()));
        }
        if &b[0..4] != MAGIC {
            return Err("its first message is not a fairlab-dccpgen hello (is the client fairlab-dccpgen?)".into());
        }
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let version = u32_at(4);
        if version != VERSION {
            return Err(format!("it speaks hello version {version}; this server speaks {VERSION}"));
        }
        let h = Hello { interval_ns: u64_at(8), duration_ns: u64_at(16), packet_size: u32_at(24), ccid: b[28] };
        if h.interval_ns == 0 || h.duration_ns == 0 {
            return Err("its hello has a zero interval or duration".into());
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_layout_is_the_documented_one() {
        let h = Hello { interval_ns: 500_000_000, duration_ns: 2_000_000_000, packet_size: 1424, ccid: 2 };
        let b = h.encode();
        // Hand-written bytes of the layout in the module doc.
        let mut want = Vec::new();
        want.extend_from_slice(b"FLDG");
        want.extend_from_slice(&[0, 0, 0, 1]);
        want.extend_from_slice(&[0, 0, 0, 0, 0x1d, 0xcd, 0x65, 0x00]); // 500e6
        want.extend_from_slice(&[0, 0, 0, 0, 0x77, 0x35, 0x94, 0x00]); // 2e9
        want.extend_from_slice(&[0, 0, 0x05, 0x90]); // 1424
        want.extend_from_slice(&[2, 0, 0, 0]);
        assert_eq!(b.to_vec(), want);
        assert_eq!(Hello::decode(&b), Ok(h));
    }

    #[test]
    fn foreign_or_short_messages_are_refused() {
        assert!(Hello::decode(b"GET / HTTP/1.1\r\n\r\n").unwrap_err().contains("bytes"));
        assert!(Hello::decode(&[b'x'; 64]).unwrap_err().contains("not a fairlab-dccpgen hello"));
        let mut b = Hello { interval_ns: 1, duration_ns: 1, packet_size: 1, ccid: 0 }.encode();
        b[7] = 9;
        assert!(Hello::decode(&b).unwrap_err().contains("version 9"));
        let z = Hello { interval_ns: 0, duration_ns: 1, packet_size: 1, ccid: 0 }.encode();
        assert!(Hello::decode(&z).is_err());
    }
}
