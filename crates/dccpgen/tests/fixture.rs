//! The DCCP report fixtures in tests/data/ that the Python ingest test reads
//! (tests/test_ingest_dccpgen.py) are the output of the binary's own report
//! code (`RunInfo::to_json`, what `main` prints) for hand-chosen byte counts.
//! This test fails when the code and the committed files drift apart;
//! `DCCPGEN_BLESS=1 cargo test -p dccpgen --test fixture` rewrites them.

use std::path::PathBuf;

use dccpgen::accounting::Interval;
use dccpgen::report::{Role, RunInfo};
use dccpgen::sys::Proto;

const MS: u64 = 1_000_000;
/// Payload bytes per datagram in the fixtures (an example DCCP packet size).
const MPS: u64 = 1424;

fn iv(k: u64, end_ms: u64, packets: u64) -> Interval {
    Interval { start_ns: k * 1000 * MS, end_ns: end_ms * MS, bytes: packets * MPS, packets }
}

fn run(stamp_ms: u64, remote_port: u16, duration_s: u64, intervals: Vec<Interval>) -> RunInfo {
    RunInfo {
        role: Role::Server,
        proto: Proto::Dccp,
        socket: 4,
        local: "10.0.2.1:5001".parse().unwrap(),
        remote: format!("10.0.1.1:{remote_port}").parse().unwrap(),
        stamp_ns: stamp_ms * MS,
        system_info: "Linux fairlab-vm 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 x86_64".into(),
        interval_ns: 1000 * MS,
        duration_ns: duration_s * 1000 * MS,
        packet_size: MPS as u32,
        ccid: Some(2),
        intervals,
    }
}

fn fixtures() -> Vec<(&'static str, RunInfo)> {
    vec![
        // Flow A: 1000 and 2000 datagrams in its two full seconds, then the
        // client closed 0.4 s into the third (100 datagrams).
        ("dccpgen_dccp_server_a.json", run(1_577_836_800_000, 40000, 3, vec![iv(0, 1000, 1000), iv(1, 2000, 2000), iv(2, 2400, 100)])),
        // Flow B: connected 1.5 s after A; 500 then 1500 datagrams; ran to its 2-s deadline.
        ("dccpgen_dccp_server_b.json", run(1_577_836_801_500, 40002, 2, vec![iv(0, 1000, 500), iv(1, 2000, 1500)])),
    ]
}

#[test]
fn committed_fixtures_are_what_the_report_code_writes() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let bless = std::env::var_os("DCCPGEN_BLESS").is_some();
    for (name, run) in fixtures() {
        let path = dir.join(name);
        let now = run.to_json();
        if bless {
            std::fs::write(&path, &now).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run with DCCPGEN_BLESS=1 to create it", path.display()));
        assert_eq!(committed, now, "{} is stale; run with DCCPGEN_BLESS=1 and review the diff", path.display());
    }
}
