//! End to end through real namespaces: sender ns ── router ns (linkem) ── receiver ns.
//!
//! Needs root (network namespaces, AF_PACKET); without it the test prints why and
//! passes without checking anything. Everything it creates is named `fl-lktest-…`
//! and removed by a drop guard on every path, panics included; the test ends by
//! checking that `ip netns list` holds none of its names.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use linkem::sys;

const ONE_WAY_MS: u64 = 5;
const TOLERANCE_MS: f64 = 0.5;
const SENDER_IP: &str = "192.0.2.1"; // RFC 5737 documentation range, only inside our namespaces
const RECEIVER_IP: &str = "192.0.2.2";

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The namespaces, the linkem child and temp files; all removed on drop.
struct Lab {
    prefix: String,
    namespaces: Vec<String>,
    child: Option<Child>,
    files: Vec<PathBuf>,
}

impl Lab {
    fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.prefix)
    }
    /// Interface names: prefix (13 chars) + 2 = 15, Linux's limit.
    fn ifname(&self, tag: &str) -> String {
        format!("{}{tag}", self.prefix)
    }

    fn build(prefix: &str) -> Result<Lab, String> {
        let mut lab = Lab { prefix: prefix.to_string(), namespaces: vec![], child: None, files: vec![] };
        for role in ["s", "r", "m"] {
            let ns = lab.ns(role);
            ip(&["netns", "add", &ns])?;
            lab.namespaces.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        let (s, r, m) = (lab.ns("s"), lab.ns("r"), lab.ns("m"));
        let (sa, ma, rb, mb) = (lab.ifname("sa"), lab.ifname("ma"), lab.ifname("rb"), lab.ifname("mb"));
        // Create each veth pair directly inside its two namespaces: nothing appears in
        // the namespace the test runs in.
        ip(&["link", "add", &sa, "netns", &s, "type", "veth", "peer", "name", &ma, "netns", &m])?;
        ip(&["link", "add", &rb, "netns", &r, "type", "veth", "peer", "name", &mb, "netns", &m])?;
        ip(&["-n", &s, "addr", "add", &format!("{SENDER_IP}/24"), "dev", &sa])?;
        ip(&["-n", &r, "addr", "add", &format!("{RECEIVER_IP}/24"), "dev", &rb])?;
        for (ns, dev) in [(&s, &sa), (&r, &rb), (&m, &ma), (&m, &mb)] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(lab)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Only the linkem process this test started, by its own handle.
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in self.namespaces.drain(..) {
            let _ = ip(&["netns", "del", &ns]);
        }
        for f in self.files.drain(..) {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn leftovers(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with(prefix)).map(str::to_string).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// 21 UDP echoes from the sender namespace to the receiver namespace, timed with
/// the monotonic clock; the first (which waits for ARP) is discarded.
///
/// One thread plays both ends: it binds the echo socket inside the receiver
/// namespace and the probe socket inside the sender namespace (a socket keeps the
/// namespace it was created in), then busy-polls both. A thread blocked in `recv`
/// on this VM takes 50 µs to several hundred µs to wake, twice per echo, which
/// would be measured as linkem's delay; one busy thread adds almost nothing of its
/// own and leaves the other core to linkem (and yields its own to anyone waiting). So this measures the path: veth and
/// linkem.
fn udp_rtts_ms(lab: &Lab) -> Result<Vec<f64>, String> {
    let rns = PathBuf::from("/run/netns").join(lab.ns("r"));
    let sns = PathBuf::from("/run/netns").join(lab.ns("s"));
    let probe = std::thread::spawn(move || -> Result<Vec<f64>, String> {
        sys::enter_netns(&rns).map_err(|e| format!("setns receiver: {e}"))?;
        let echo = UdpSocket::bind((RECEIVER_IP, 7007)).map_err(|e| format!("bind echo: {e}"))?;
        sys::enter_netns(&sns).map_err(|e| format!("setns sender: {e}"))?;
        let probe = UdpSocket::bind((SENDER_IP, 0)).map_err(|e| format!("bind probe: {e}"))?;
        probe.connect((RECEIVER_IP, 7007)).map_err(|e| e.to_string())?;
        for s in [&echo, &probe] {
            s.set_nonblocking(true).map_err(|e| e.to_string())?;
        }
        let mut rtts = Vec::new();
        let mut buf = [0u8; 64];
        for i in 0u32..21 {
            let t0 = Instant::now();
            probe.send(&i.to_be_bytes()).map_err(|e| e.to_string())?;
            loop {
                if let Some((n, from)) = ready(echo.recv_from(&mut buf))? {
                    echo.send_to(&buf[..n], from).map_err(|e| format!("echo: {e}"))?;
                }
                if let Some(n) = ready(probe.recv(&mut buf))? {
                    if n == 4 && buf[..4] == i.to_be_bytes() {
                        break;
                    }
                }
                if t0.elapsed() > Duration::from_secs(2) {
                    return Err(format!("echo {i} lost"));
                }
                // Give the core away if anyone else wants it (linkem on a
                // one-CPU runner), else come straight back.
                std::thread::yield_now();
            }
            if i > 0 {
                rtts.push(t0.elapsed().as_secs_f64() * 1e3);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(rtts)
    });
    probe.join().map_err(|_| "probe thread panicked".to_string())?
}

/// RTTs (ms) through linkem: median 2 × the one-way delay within the budget, none
/// below it (a 20 µs allowance for the two clock reads of each measurement).
fn check_rtts(what: &str, rtts: &[f64]) -> Result<(), String> {
    let want = 2.0 * ONE_WAY_MS as f64;
    let m = median(rtts.to_vec());
    let lo = rtts.iter().copied().fold(f64::INFINITY, f64::min);
    println!("{what} RTT through linkem: median {m:.3} ms, min {lo:.3} ms over {} (want {want} ± {TOLERANCE_MS})", rtts.len());
    // Early is always a defect: no host stall can make a packet arrive sooner.
    assert!(lo >= want - 0.02, "{what} RTT {lo:.3} ms, below 2 × the one-way delay: {rtts:?}");
    if (m - want).abs() > TOLERANCE_MS {
        return Err(format!("{what} RTT median {m:.3} ms, want {want} ± {TOLERANCE_MS}: {rtts:?}"));
    }
    Ok(())
}

/// How many times linkem says it forwarded a packet more than 1 ms late (its exit
/// summary's `lateness max … (>100us: …, >1ms: N)`); `None` if the summary lacks it.
fn late_over_1ms(summary: &str) -> Option<u64> {
    let rest = summary.split("lateness max").nth(1)?;
    rest.split(">1ms: ").nth(1)?.split(')').next()?.trim().parse().ok()
}

/// The prefix of `run_lab`'s error when the RTTs missed while linkem itself reports
/// that the host held it back: the run measured the host, not linkem.
const HOST_STALLED: &str = "host stalled: ";

/// The result of a non-blocking socket call: `None` when it would block.
fn ready<T>(r: std::io::Result<T>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The same with the system `ping`, when it is installed.
fn ping_rtts_ms(lab: &Lab) -> Option<Vec<f64>> {
    let out = Command::new("ip")
        .args(["netns", "exec", &lab.ns("s"), "ping", "-n", "-c", "21", "-i", "0.05", "-W", "2", RECEIVER_IP])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut t: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|s| s.split_whitespace().next()?.parse().ok())
        .collect();
    if t.len() < 21 {
        return None;
    }
    t.remove(0);
    Some(t)
}

fn config(lab: &Lab) -> String {
    format!(
        r#"{{"run_id": "{p}", "sender_ports": [{{"iface": "{ma}", "one_way_delay_ns": {d}}}],
 "receiver_port": {{"iface": "{mb}"}}, "rate_bps": 100000000, "reverse_rate_bps": null,
 "buffer": {{"bytes": 125000}}, "qdisc": "droptail", "params": {{}}, "seed": 1,
 "sample_interval_ns": 100000000, "mean_packet_bytes": 1500, "reference_rtt_ns": 10000000}}"#,
        p = lab.prefix,
        ma = lab.ifname("ma"),
        mb = lab.ifname("mb"),
        d = ONE_WAY_MS * 1_000_000
    )
}

fn run_lab(prefix: &str) -> Result<(), String> {
    let mut lab = match Lab::build(prefix) {
        Ok(l) => l,
        Err(e) if e.contains("Operation not permitted") || e.contains("Permission denied") => {
            println!("skipping linkem namespace test: cannot create namespaces here ({e})");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let cfg = std::env::temp_dir().join(format!("{prefix}.json"));
    let stats = std::env::temp_dir().join(format!("{prefix}.jsonl"));
    lab.files.extend([cfg.clone(), stats.clone()]);
    std::fs::write(&cfg, config(&lab)).map_err(|e| e.to_string())?;

    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.ns("m"), env!("CARGO_BIN_EXE_linkem")])
        .args([Path::new("--config"), &cfg, Path::new("--stats"), &stats])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start linkem: {e}"))?;
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    lab.child = Some(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let err_reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l == "ready" => {}
        other => return Err(format!("linkem did not print ready: {other:?}")),
    }

    // Kept as a Result: a lost echo is reported after linkem's exit summary too.
    let udp = udp_rtts_ms(&lab);
    let ping = ping_rtts_ms(&lab);

    // SIGTERM: a final stats line and exit 0, promptly. Done before the RTTs are
    // judged so a failure below comes with linkem's own account (lateness, timer
    // wake-ups, receive waits).
    let pid = lab.child.as_ref().unwrap().id();
    let t0 = Instant::now();
    let st = Command::new("kill").args(["-TERM", &pid.to_string()]).status().map_err(|e| e.to_string())?;
    assert!(st.success());
    let status = loop {
        if let Some(s) = lab.child.as_mut().unwrap().try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err("linkem ignored SIGTERM for 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = t0.elapsed();
    lab.child = None;
    let err_text = err_reader.join().unwrap_or_default();
    println!("linkem exited in {:.1} ms: {}", took.as_secs_f64() * 1e3, err_text.trim());

    // linkem adds exactly the configured delay each way: the busy-polling probe's
    // median RTT is 2 × delay within the ±0.5 ms budget, and no echo ever comes
    // back early.
    let mut missed = check_rtts("UDP echo", &udp?).err();
    // ping measures the same path without a helper of ours: the receiver's kernel
    // answers the echo in softirq, and iputils ping times the reply by the kernel's
    // receive stamp, so neither end's wake-up is counted. The same bounds hold.
    match ping {
        Some(p) => missed = missed.or(check_rtts("ping", &p).err()),
        None => println!("note: `ping` not available or failed; checked with UDP echoes only"),
    }
    if let Some(miss) = missed {
        // A median off by more than the budget, with linkem reporting more than one
        // packet over 1 ms late (a healthy run shows at most the first, while the
        // rings warm up), is a host that did not schedule linkem: seen once in CI on
        // a 2-core VM (lateness max 20 ms, 14 packets over 1 ms, median 13.5 ms).
        return Err(match late_over_1ms(&err_text) {
            Some(n) if n > 1 => format!("{HOST_STALLED}{n} packets over 1 ms late; {miss}"),
            _ => miss,
        });
    }
    assert!(status.success(), "exit status {status}: {err_text}");
    assert!(took < Duration::from_millis(500), "SIGTERM took {took:?} (goal 100 ms)");
    // The fast receive path (PACKET_RX_RING) is in use on both ports, and the kernel
    // dropped nothing on the way in.
    assert!(err_text.contains("kernel rx drops 0,"), "{err_text}");
    assert!(err_text.contains("rx rings 2/2 ports"), "receive rings not in use: {err_text}");

    let text = std::fs::read_to_string(&stats).map_err(|e| e.to_string())?;
    let lines: Vec<&str> = text.lines().collect();
    let parse = |l: &str| serde_json::from_str::<serde_json::Value>(l).map_err(|e| format!("stats line {l:?}: {e}"));
    // The shutdown writes the final sample, then the health line.
    let [.., last, health_text] = lines.as_slice() else { return Err(format!("fewer than two stats lines: {text}")) };
    let v = parse(last)?;
    for k in ["t_ns", "queue_bytes", "queue_pkts", "drops", "marks", "drops_by_reason", "forwarded_pkts", "forwarded_bytes"] {
        assert!(v.get(k).is_some(), "stats line lacks {k}: {last}");
    }
    assert!(v["forwarded_pkts"].as_u64().unwrap() >= 20, "{last}");
    assert!(lines.len() >= 3, "periodic samples expected: {text}");
    // The health line says what the exit summary says, in numbers.
    let h = parse(health_text)?;
    assert_eq!(h["health"]["kernel_drops"], 0, "{health_text}");
    assert_eq!(h["health"]["ring_ports"], 2, "{health_text}");
    assert_eq!(h["health"]["late_over_1ms"].as_u64(), late_over_1ms(&err_text), "{health_text} vs {err_text}");
    Ok(())
}

#[test]
fn rtt_through_linkem_is_twice_the_one_way_delay() {
    if !sys::is_root() {
        println!("skipping linkem namespace test: needs root (network namespaces, AF_PACKET)");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        println!("skipping linkem namespace test: iproute2 `ip` not installed");
        return;
    }
    // 3 hex digits keep interface names within 15 characters.
    let prefix = format!("fl-lktest-{:03x}", std::process::id() & 0xfff);
    // Up to three labs, but only while linkem's own account says the host stalled
    // it; any other miss fails at once.
    for attempt in 1..=3 {
        let result = std::panic::catch_unwind(|| run_lab(&prefix));
        // The Lab inside run_lab has been dropped by now, on every path.
        let left = leftovers(&prefix);
        assert!(left.is_empty(), "namespaces left over: {left:?}");
        match result {
            Ok(Ok(())) => return,
            Ok(Err(e)) if e.starts_with(HOST_STALLED) && attempt < 3 => println!("attempt {attempt}: {e}; again"),
            Ok(Err(e)) => panic!("{e}"),
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

#[test]
fn a_stalled_host_is_read_off_linkems_exit_summary() {
    // The summary of the CI run that stalled (2026-12-02), and of a healthy one.
    let stalled = "linkem: run fl-lktest-bcc stopped: forwarded 21 pkts / 672 B, rx wait max 16956 us (>1ms: 6), \
                   iterations 28690, lateness max 20463 us (>100us: 21, >1ms: 14), timer wake-up late max 6851 us";
    let healthy = "linkem: run fl-lktest-0a5 stopped: rx wait max 134 us (>1ms: 0), iterations 8279, \
                   lateness max 197 us (>100us: 2, >1ms: 0), timer wake-up late max 243 us";
    assert_eq!(late_over_1ms(stalled), Some(14));
    assert_eq!(late_over_1ms(healthy), Some(0));
    assert_eq!(late_over_1ms("linkem: exited"), None);
}
