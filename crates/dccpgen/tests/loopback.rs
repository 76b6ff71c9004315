//! End to end over TCP on 127.0.0.1 (this host's kernel has no DCCP): the real
//! binary as server and client, the report checked against invariants that do
//! not come from the code under test (the grid the options ask for, byte
//! conservation between the intervals and the totals, sent >= delivered).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fairlab-dccpgen");

/// A child process that is killed if the test panics.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
}

impl Guard {
    /// Wait up to `limit` for exit; panic (killing it) if it runs longer.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s;
            }
            assert!(t.elapsed() < limit, "process still running after {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fl-dccpgen-{}-{name}", std::process::id()))
}

/// Start a server with `extra` args; return it and the port from its readiness line.
fn start_server(extra: &[&str]) -> (Guard, u16, BufReader<std::process::ChildStderr>) {
    let mut child = Command::new(BIN)
        .args(["server", "--port", "0", "--bind", "127.0.0.1", "--once"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start server");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let guard = Guard(child);
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let port = line
        .trim_end()
        .strip_suffix(" (TCP)")
        .and_then(|s| s.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in the readiness line {line:?}"));
    (guard, port, err)
}

#[test]
fn a_two_second_tcp_run_reports_four_half_second_intervals_that_add_up() {
    let out = temp_path("server.json");
    let (mut server, port, _err) = start_server(&["--proto", "tcp", "--output", out.to_str().unwrap()]);
    let client = Command::new(BIN)
        .args(["client", "--proto", "tcp", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--time", "2", "--interval", "0.5", "--packet-size", "16384", "--json"])
        .output()
        .expect("run client");
    assert!(client.status.success(), "client: {}", String::from_utf8_lossy(&client.stderr));
    assert!(server.wait(Duration::from_secs(10)).success());
    let text = std::fs::read_to_string(&out).expect("server report");
    std::fs::remove_file(&out).ok();
    let srv: Value = serde_json::from_str(&text).unwrap();
    let cli: Value = serde_json::from_slice(&client.stdout).unwrap();

    assert_eq!(srv["generator"], "fairlab-dccpgen");
    assert_eq!(srv["start"]["test_start"]["protocol"], "TCP");
    assert_eq!(srv["start"]["test_start"]["interval"], 0.5);
    assert_eq!(srv["start"]["test_start"]["duration"], 2.0);
    assert_eq!(srv["start"]["test_start"]["blksize"], 16384);
    // The server's connection is the client's, seen from the other end.
    let (sc, cc) = (&srv["start"]["connected"][0], &cli["start"]["connected"][0]);
    assert_eq!(sc["remote_port"], cc["local_port"]);
    assert_eq!(sc["local_port"], port);

    // 2 s in 0.5-s intervals: four, on the grid, contiguous, times increasing.
    let ivs = srv["intervals"].as_array().unwrap();
    assert_eq!(ivs.len(), 4, "{ivs:?}");
    let mut prev_end = 0.0;
    let mut sum = 0u64;
    for (k, iv) in ivs.iter().enumerate() {
        let s = &iv["streams"][0];
        let (start, end, secs) = (s["start"].as_f64().unwrap(), s["end"].as_f64().unwrap(), s["seconds"].as_f64().unwrap());
        assert_eq!(start, prev_end, "interval {k} starts where {} ended", k.saturating_sub(1));
        assert_eq!(start, 0.5 * k as f64);
        assert!(end > start && end <= start + 0.5 + 1e-12, "interval {k}: {start}-{end}");
        assert!((secs - (end - start)).abs() < 1e-9);
        if k < 3 {
            assert_eq!(secs, 0.5);
        }
        let bytes = s["bytes"].as_u64().unwrap();
        assert!(bytes > 0, "interval {k} is empty on loopback");
        assert!((s["bits_per_second"].as_f64().unwrap() - bytes as f64 * 8.0 / secs).abs() < 1e-3);
        assert_eq!(s["sender"], false);
        assert_eq!(iv["sum"]["bytes"], bytes);
        sum += bytes;
        prev_end = end;
    }
    // The run ends at the server's deadline or at the client's close just before it.
    assert!(prev_end > 1.9 && prev_end <= 2.0, "ended at {prev_end}");
    let end = &srv["end"];
    assert_eq!(end["sum_received"]["bytes"], sum);
    assert_eq!(end["streams"][0]["receiver"]["bytes"], sum);
    assert_eq!(end["sum_received"]["seconds"], prev_end);
    assert_eq!(end["sum_sent"]["bytes"], 0, "the server never learns the sender's count");

    // The client's own report: what its socket accepted, on the same grid.
    let sent = cli["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    let civs = cli["intervals"].as_array().unwrap();
    assert_eq!(civs.len(), 4);
    assert_eq!(civs.iter().map(|i| i["streams"][0]["bytes"].as_u64().unwrap()).sum::<u64>(), sent);
    assert_eq!(cli["intervals"][0]["streams"][0]["sender"], true);
    // Delivered <= sent, up to the one send that returned after the client's
    // deadline (not counted by the client, maybe still read by the server).
    assert!(sum <= sent + 16384, "delivered {sum} > sent {sent} + one packet");
    assert!(sum > 0);
}

#[test]
fn a_foreign_client_is_refused_and_no_report_is_written() {
    let out = temp_path("foreign.json");
    let (mut server, port, mut err) = start_server(&["--proto", "tcp", "--output", out.to_str().unwrap()]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /index.html HTTP/1.1\r\nHost: example\r\n\r\n").unwrap(); // > 32 bytes
    let status = server.wait(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1));
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("not a fairlab-dccpgen hello"), "{line}");
    assert!(!out.exists(), "a refused connection must not leave a report");
}

#[test]
fn dccp_either_works_or_says_which_modules_to_load() {
    let mut child = Guard(
        Command::new(BIN)
            .args(["server", "--port", "0", "--bind", "127.0.0.1", "--once"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stderr.take().unwrap()).read_line(&mut line).unwrap();
    if line.contains("listening on") {
        // A kernel with DCCP (the vm guest): the listener is up; nothing more to check here.
        assert!(line.trim_end().ends_with("(DCCP)"), "{line}");
    } else {
        assert_eq!(child.wait(Duration::from_secs(5)).code(), Some(1));
        assert!(line.starts_with("fairlab-dccpgen: this kernel has no DCCP (socket: "), "{line}");
        assert!(line.contains("load the dccp and dccp_ipv4 modules"), "{line}");
        assert_eq!(line.trim_end().lines().count(), 1);
    }
}

#[test]
fn bad_command_lines_exit_2_with_one_line() {
    for args in [
        vec![],
        vec!["client", "--host", "localhost", "--port", "1", "--time", "1", "--interval", "1"],
        vec!["client", "--host", "127.0.0.1", "--port", "1", "--time", "1"],
        vec!["server", "--port", "1", "--output", "/nonexistent-dir/x.json", "--once"],
        vec!["server", "--port", "1", "--output", "x.json"],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("fairlab-dccpgen: "), "{err}");
    }
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("usage:"));
}

#[test]
fn a_refused_connection_exits_1_naming_the_address() {
    // Bind then drop a listener to find a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = Command::new(BIN)
        .args(["client", "--proto", "tcp", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--time", "1", "--interval", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("connect to 127.0.0.1:{port}: ECONNREFUSED")), "{err}");
}

#[test]
fn a_server_that_is_not_dccpgen_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = [0u8; 32];
        std::io::Read::read_exact(&mut s, &mut hello).unwrap();
        s.write_all(b"HTTP/1.1 400\r\n\r\n").unwrap();
        hello
    });
    let out = Command::new(BIN)
        .args(["client", "--proto", "tcp", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--time", "1", "--interval", "0.5"])
        .output()
        .unwrap();
    let hello = fake.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did not answer like a fairlab-dccpgen server"), "{err}");
    // What the client sent first is the documented hello: magic, version 1, 0.5 s, 1 s.
    assert_eq!(&hello[0..8], b"FLDG\0\0\0\x01");
    assert_eq!(u64::from_be_bytes(hello[8..16].try_into().unwrap()), 500_000_000);
    assert_eq!(u64::from_be_bytes(hello[16..24].try_into().unwrap()), 1_000_000_000);
}
