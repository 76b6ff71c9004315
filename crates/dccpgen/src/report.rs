//! The report: JSON shaped like `iperf3 -J` output, so fairlab's iperf3 ingest
//! (python/fairlab/ingest/iperf3.py) reads it unchanged.
//!
//! What a reader relies on (see docs/dccpgen.md, "Report"):
//! - `start.connected[0]`, `start.timestamp` (`timesecs`, `timemillisecs`: the
//!   wall clock at the connection's start `t0`, so several files line up to 1 ms),
//!   `start.accepted_connection` (server file) or `start.connecting_to` (client
//!   file), `start.test_start` with `protocol` "DCCP" or "TCP", `duration`,
//!   `interval`, `blksize`.
//! - `intervals[i].streams[0]`: `start`/`end`/`seconds` on the nominal grid (s since
//!   `t0`), `bytes`, `bits_per_second`, `omitted: false`, `sender` (false on the
//!   server: these are DELIVERED bytes), and for DCCP `packets` (datagrams).
//! - `end.streams[0].sender`/`.receiver`, `end.sum_sent`/`end.sum_received`: the side
//!   this file did not measure is written as 0 bytes, as iperf3 does.
//! - `end.sender_dccp_ccid`: the sender's CCID as the kernel negotiated it.
//! - top level `generator` = "fairlab-dccpgen" and `generator_version`.

use serde::Serialize;
use std::net::SocketAddr;

use crate::accounting::Interval;
use crate::sys::Proto;

/// The program name written into every report.
pub const GENERATOR: &str = "fairlab-dccpgen";
/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Which end wrote the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The receiver: counts delivered bytes.
    Server,
    /// The sender: counts bytes the socket accepted.
    Client,
}

/// Everything one report says.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// Which end this is.
    pub role: Role,
    /// DCCP or TCP.
    pub proto: Proto,
    /// The connected socket's descriptor (iperf3's "socket", the stream id).
    pub socket: i32,
    /// Our address.
    pub local: SocketAddr,
    /// The peer's address.
    pub remote: SocketAddr,
    /// CLOCK_REALTIME at `t0`, ns since the Unix epoch.
    pub stamp_ns: u64,
    /// `uname`-style host description.
    pub system_info: String,
    /// Reporting interval, ns.
    pub interval_ns: u64,
    /// Requested test duration, ns.
    pub duration_ns: u64,
    /// Payload bytes per send.
    pub packet_size: u32,
    /// The sender's CCID as negotiated (DCCP only).
    pub ccid: Option<u8>,
    /// The measured intervals.
    pub intervals: Vec<Interval>,
}

#[derive(Serialize)]
struct Report<'a> {
    generator: &'static str,
    generator_version: &'static str,
    start: Start<'a>,
    intervals: Vec<IntervalObj>,
    end: End,
}

#[derive(Serialize)]
struct Start<'a> {
    connected: [Connected; 1],
    version: String,
    system_info: &'a str,
    timestamp: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    accepted_connection: Option<HostPort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    connecting_to: Option<HostPort>,
    test_start: TestStart,
}

#[derive(Serialize)]
struct Connected {
    socket: i32,
    local_host: String,
    local_port: u16,
    remote_host: String,
    remote_port: u16,
}

#[derive(Serialize)]
struct HostPort {
    host: String,
    port: u16,
}

#[derive(Serialize)]
struct Timestamp {
    time: String,
    timesecs: u64,
    timemillisecs: u64,
}

#[derive(Serialize)]
struct TestStart {
    protocol: &'static str,
    num_streams: u32,
    blksize: u32,
    omit: u32,
    duration: f64,
    bytes: u64,
    blocks: u64,
    reverse: u32,
    tos: u32,
    target_bitrate: u64,
    interval: f64,
}

#[derive(Serialize)]
struct Measure {
    #[serde(skip_serializing_if = "Option::is_none")]
    socket: Option<i32>,
    start: f64,
    end: f64,
    seconds: f64,
    bytes: u64,
    bits_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    omitted: Option<bool>,
    sender: bool,
}

#[derive(Serialize)]
struct IntervalObj {
    streams: [Measure; 1],
    sum: Measure,
}

#[derive(Serialize)]
struct EndStream {
    sender: Measure,
    receiver: Measure,
}

#[derive(Serialize)]
struct End {
    streams: Vec<EndStream>,
    sum_sent: Measure,
    sum_received: Measure,
    #[serde(skip_serializing_if = "Option::is_none")]
    sender_dccp_ccid: Option<u8>,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl RunInfo {
    fn measure(&self, socket: Option<i32>, iv: &Interval, omitted: Option<bool>) -> Measure {
        Measure {
            socket,
            start: secs(iv.start_ns),
            end: secs(iv.end_ns),
            seconds: iv.seconds(),
            bytes: iv.bytes,
            bits_per_second: iv.bits_per_second(),
            packets: (self.proto == Proto::Dccp).then_some(iv.packets),
            omitted,
            sender: self.role == Role::Client,
        }
    }

    /// The whole run as one interval (`0..end`), for the end summaries.
    pub fn total(&self) -> Interval {
        Interval {
            start_ns: 0,
            end_ns: self.intervals.last().map_or(0, |i| i.end_ns),
            bytes: self.intervals.iter().map(|i| i.bytes).sum(),
            packets: self.intervals.iter().map(|i| i.packets).sum(),
        }
    }

    /// The report as pretty-printed JSON (one document, ending in a newline).
    pub fn to_json(&self) -> String {
        let total = self.total();
        let unmeasured = Interval { bytes: 0, packets: 0, ..total };
        let (sent, received) = match self.role {
            Role::Client => (total, unmeasured),
            Role::Server => (unmeasured, total),
        };
        let peer = HostPort { host: self.remote.ip().to_string(), port: self.remote.port() };
        let (accepted_connection, connecting_to) = match self.role {
            Role::Server => (Some(peer), None),
            Role::Client => (None, Some(peer)),
        };
        let sock = Some(self.socket);
        let report = Report {
            generator: GENERATOR,
            generator_version: VERSION,
            start: Start {
                connected: [Connected {
                    socket: self.socket,
                    local_host: self.local.ip().to_string(),
                    local_port: self.local.port(),
                    remote_host: self.remote.ip().to_string(),
                    remote_port: self.remote.port(),
                }],
                version: format!("{GENERATOR} {VERSION}"),
                system_info: &self.system_info,
                timestamp: Timestamp {
                    time: http_date(self.stamp_ns / 1_000_000_000),
                    timesecs: self.stamp_ns / 1_000_000_000,
                    timemillisecs: self.stamp_ns / 1_000_000,
                },
                accepted_connection,
                connecting_to,
                test_start: TestStart {
                    protocol: self.proto.name(),
                    num_streams: 1,
                    blksize: self.packet_size,
                    omit: 0,
                    duration: secs(self.duration_ns),
                    bytes: 0,
                    blocks: 0,
                    reverse: 0,
                    tos: 0,
                    target_bitrate: 0,
                    interval: secs(self.interval_ns),
                },
            },
            intervals: self
                .intervals
                .iter()
                .map(|iv| IntervalObj {
                    streams: [self.measure(sock, iv, Some(false))],
                    sum: self.measure(None, iv, Some(false)),
                })
                .collect(),
            end: End {
                streams: vec![EndStream {
                    sender: self.measure(sock, &sent, None),
                    receiver: self.measure(sock, &received, None),
                }],
                sum_sent: self.measure(None, &sent, None),
                sum_received: self.measure(None, &received, None),
                sender_dccp_ccid: self.ccid,
            },
        };
        let mut s = serde_json::to_string_pretty(&report).expect("a report always serialises");
        s.push('\n');
        s
    }
}

/// `Sat, 21 Nov 2026 06:01:57 GMT` (RFC 7231 IMF-fixdate, as iperf3's `time`).
pub fn http_date(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]; // 1970-01-01 was a Thursday
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian (year, month 1-12, day 1-31) of a day count since
/// 1970-01-01: H. Hinnant's `civil_from_days` ("chrono-Compatible Low-Level Date
/// Algorithms", 2013), eras of 400 years starting on March 1st.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const MS: u64 = 1_000_000;

    #[test]
    fn dates_match_known_calendar_days() {
        // Checked against `date -u -d @N` and the iperf3 recordings in examples/recordings.
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(http_date(1_795_240_917), "Sat, 21 Nov 2026 06:01:57 GMT"); // iperf3_P8_server.json
        assert_eq!(http_date(1_577_836_800), "Wed, 01 Jan 2020 00:00:00 GMT");
        assert_eq!(http_date(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT"); // 2100 is not a leap year
        assert_eq!(http_date(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
    }

    fn server_run() -> RunInfo {
        RunInfo {
            role: Role::Server,
            proto: Proto::Dccp,
            socket: 4,
            local: "10.0.2.1:5001".parse().unwrap(),
            remote: "10.0.1.1:40000".parse().unwrap(),
            stamp_ns: 1_795_240_917_250 * MS,
            system_info: "Linux vm 6.1.0-28-amd64 #1 SMP x86_64".into(),
            interval_ns: 1000 * MS,
            duration_ns: 3000 * MS,
            packet_size: 1424,
            ccid: Some(2),
            intervals: vec![
                Interval { start_ns: 0, end_ns: 1000 * MS, bytes: 1_424_000, packets: 1000 },
                Interval { start_ns: 1000 * MS, end_ns: 2000 * MS, bytes: 2_848_000, packets: 2000 },
                Interval { start_ns: 2000 * MS, end_ns: 2400 * MS, bytes: 142_400, packets: 100 },
            ],
        }
    }

    #[test]
    fn a_server_report_has_the_iperf3_shape_and_hand_computed_rates() {
        let v: Value = serde_json::from_str(&server_run().to_json()).unwrap();
        assert_eq!(v["generator"], "fairlab-dccpgen");
        assert_eq!(v["generator_version"], VERSION);
        let start = &v["start"];
        assert_eq!(start["connected"][0]["socket"], 4);
        assert_eq!(start["connected"][0]["local_host"], "10.0.2.1");
        assert_eq!(start["connected"][0]["remote_port"], 40000);
        assert_eq!(start["accepted_connection"]["host"], "10.0.1.1");
        assert!(start.get("connecting_to").is_none());
        assert_eq!(start["timestamp"]["timesecs"], 1_795_240_917u64);
        assert_eq!(start["timestamp"]["timemillisecs"], 1_795_240_917_250u64);
        assert_eq!(start["timestamp"]["time"], "Sat, 21 Nov 2026 06:01:57 GMT");
        assert_eq!(start["test_start"]["protocol"], "DCCP");
        assert_eq!(start["test_start"]["duration"], 3.0);
        assert_eq!(start["test_start"]["interval"], 1.0);
        assert_eq!(start["test_start"]["blksize"], 1424);
        assert_eq!(start["test_start"]["num_streams"], 1);

        let ivs = v["intervals"].as_array().unwrap();
        assert_eq!(ivs.len(), 3);
        let s0 = &ivs[0]["streams"][0];
        assert_eq!(s0["socket"], 4);
        assert_eq!((s0["start"].as_f64(), s0["end"].as_f64(), s0["seconds"].as_f64()), (Some(0.0), Some(1.0), Some(1.0)));
        assert_eq!(s0["bytes"], 1_424_000);
        assert_eq!(s0["bits_per_second"], 11_392_000.0); // 1 424 000 B * 8 / 1 s
        assert_eq!(s0["packets"], 1000);
        assert_eq!(s0["omitted"], false);
        assert_eq!(s0["sender"], false);
        assert_eq!(ivs[1]["streams"][0]["bits_per_second"], 22_784_000.0); // 2 848 000 * 8
        let last = &ivs[2]["streams"][0];
        assert!((last["seconds"].as_f64().unwrap() - 0.4).abs() < 1e-12);
        assert!((last["bits_per_second"].as_f64().unwrap() - 2_848_000.0).abs() < 1e-6); // 142 400 * 8 / 0.4
        assert_eq!(ivs[1]["sum"]["bytes"], 2_848_000);
        assert!(ivs[1]["sum"].get("socket").is_none());

        let end = &v["end"];
        let recv = &end["streams"][0]["receiver"];
        assert_eq!(recv["bytes"], 4_414_400); // 1 424 000 + 2 848 000 + 142 400
        assert!((recv["seconds"].as_f64().unwrap() - 2.4).abs() < 1e-12);
        assert!((recv["bits_per_second"].as_f64().unwrap() - 4_414_400.0 * 8.0 / 2.4).abs() < 1e-6);
        assert_eq!(end["streams"][0]["sender"]["bytes"], 0);
        assert_eq!(end["sum_received"]["bytes"], 4_414_400);
        assert_eq!(end["sum_sent"]["bytes"], 0);
        assert_eq!(end["sender_dccp_ccid"], 2);
    }

    #[test]
    fn a_client_report_marks_its_bytes_as_sent() {
        let mut run = server_run();
        run.role = Role::Client;
        run.proto = Proto::Tcp;
        run.ccid = None;
        let v: Value = serde_json::from_str(&run.to_json()).unwrap();
        assert_eq!(v["start"]["connecting_to"]["port"], 40000);
        assert!(v["start"].get("accepted_connection").is_none());
        assert_eq!(v["start"]["test_start"]["protocol"], "TCP");
        assert_eq!(v["intervals"][0]["streams"][0]["sender"], true);
        assert!(v["intervals"][0]["streams"][0].get("packets").is_none());
        assert_eq!(v["end"]["sum_sent"]["bytes"], 4_414_400);
        assert_eq!(v["end"]["sum_received"]["bytes"], 0);
        assert!(v["end"].get("sender_dccp_ccid").is_none());
    }
}
