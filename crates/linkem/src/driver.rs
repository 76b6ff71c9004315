//! The I/O loop: sockets in, [`Bridge`] in the middle, sockets out.
//!
//! One iteration: read the monotonic clock once and turn it into `SimTime` since
//! `ready` (the only place wall-clock enters linkem, STYLE.md §1); receive what is
//! waiting on every port (in batches); let the bridge run everything due; send;
//! write a stats line if one is due; then sleep until the next deadline. The sleep
//! is a `ppoll` on the sockets, the signalfd and a timerfd armed at an *absolute*
//! monotonic instant `SPIN_NS` before the deadline; the last `SPIN_NS` are spent
//! polling without blocking, because waking from a timer costs tens of
//! microseconds of jitter on a VM and the delay budget is ±0.5 ms.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;

use netunits::SimTime;

use crate::bridge::{Bridge, Egress, PortId};
use crate::stats::{self, Schedule};
use crate::sys::{self, PacketSocket, RecvBatch, SendScratch, TermSignals, Timer};

/// Busy-poll this close to a deadline instead of sleeping.
pub const SPIN_NS: u64 = 50_000;
/// Frames per `recvmmsg`.
const BATCH: usize = 64;
/// At most this many frames from one port per iteration, so a flooded port cannot
/// starve the others or delay due departures by much (256 × 1500 B at 10 Gbit/s ≈ 0.3 ms).
const PORT_BUDGET: usize = 256;

/// What the loop saw besides the bridge's own counters, for the exit summary.
#[derive(Debug, Default, Clone)]
pub struct Health {
    /// Frames the kernel refused to send (per-frame send errors).
    pub tx_errors: u64,
    /// The first send error, for the summary.
    pub first_tx_error: Option<String>,
    /// TSO/GSO aggregates received (the sender side left segmentation offload on).
    pub gso_frames: u64,
    /// Frames larger than a receive buffer, discarded.
    pub truncated: u64,
    /// Loop iterations (a measure of how busy the loop was).
    pub iterations: u64,
    /// Largest lateness of a due bridge event when the loop got to it.
    pub max_late_ns: u64,
    /// Due events handled more than 100 µs late.
    pub late_over_100us: u64,
    /// Due events handled more than 1 ms late.
    pub late_over_1ms: u64,
}

/// The ports, in bridge order (senders, then the receiver).
pub struct Ports {
    socks: Vec<PacketSocket>,
}

impl Ports {
    /// Open every interface; the error names the interface.
    pub fn open(names: &[&str]) -> Result<Ports, String> {
        let socks = names
            .iter()
            .map(|n| PacketSocket::open(n).map_err(|e| format!("cannot open interface {n:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ports { socks })
    }
}

/// Run until SIGTERM/SIGINT. `stats` receives the JSON lines. Prints `ready` on
/// stdout once everything is bound.
pub fn run(bridge: &mut Bridge, ports: &Ports, mut stats: Option<BufWriter<File>>, schedule: Schedule) -> io::Result<Health> {
    let signals = TermSignals::install()?;
    let timer = Timer::new()?;
    // Best effort: without it the timer may fire up to 50 µs late, which the spin
    // window still absorbs.
    let _ = sys::set_timer_slack_ns(1);
    let mut schedule = schedule;
    let mut health = Health::default();
    let mut batch = RecvBatch::new(BATCH);
    let mut scratch = SendScratch::default();
    let mut out: Vec<Egress> = Vec::with_capacity(4 * BATCH);
    let n_ports = ports.socks.len();
    let mut fds: Vec<libc::pollfd> = ports
        .socks
        .iter()
        .map(|s| s.as_raw_fd())
        .chain([signals.as_raw_fd(), timer.as_raw_fd()])
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    let sig_slot = n_ports;
    let mut gso_warned = false;

    {
        let mut so = io::stdout().lock();
        writeln!(so, "ready")?;
        so.flush()?;
    }
    let start_ns = sys::monotonic_ns();
    let spin_ns: u64 = std::env::var("LINKEM_SPIN_NS").ok().and_then(|v| v.parse().ok()).unwrap_or(SPIN_NS);
    let mut block = false;
    let mut armed: Option<u64> = None;
    loop {
        health.iterations += 1;
        sys::poll(&mut fds, block)?;
        // The edge: the one clock read of this iteration.
        let now = SimTime::from_nanos(sys::monotonic_ns().saturating_sub(start_ns));

        if fds[sig_slot].revents & libc::POLLIN != 0 && signals.received() {
            if let Some(w) = stats.as_mut() {
                writeln!(w, "{}", stats::line(now, bridge))?;
                w.flush()?;
            }
            return Ok(health);
        }

        for (port, sock) in ports.socks.iter().enumerate() {
            if fds[port].revents & (libc::POLLIN | libc::POLLERR) == 0 {
                continue;
            }
            let mut got = 0;
            while got < PORT_BUDGET {
                let k = match sock.recv_batch(&mut batch) {
                    Ok(k) => k,
                    // A port that went away (interface deleted) ends the run loudly.
                    Err(e) => return Err(io::Error::new(e.kind(), format!("receive on {}: {e}", sock.name()))),
                };
                for i in 0..k {
                    let Some((off, data, truncated)) = batch.frame(i) else { continue };
                    if truncated {
                        health.truncated += 1;
                        continue;
                    }
                    if sys::offload_is_gso(&off) {
                        health.gso_frames += 1;
                        if !gso_warned {
                            gso_warned = true;
                            eprintln!(
                                "linkem: warning: {}-byte TSO/GSO aggregate on {}; it is queued as ONE packet. Disable segmentation offload on the peer (ethtool -K IFACE tso off gso off) for per-packet fidelity",
                                data.len(),
                                sock.name()
                            );
                        }
                    }
                    bridge.on_frame(now, port as PortId, data.to_vec(), off, &mut out);
                }
                got += k;
                if k < batch.capacity() {
                    break;
                }
            }
        }

        if let Some(due) = bridge.next_wakeup().filter(|&t| t <= now) {
            let late = (now - due).as_nanos();
            health.max_late_ns = health.max_late_ns.max(late);
            health.late_over_100us += u64::from(late > 100_000);
            health.late_over_1ms += u64::from(late > 1_000_000);
        }
        bridge.poll(now, &mut out);
        send_all(ports, &mut out, &mut scratch, &mut health);

        // Stamp the sample with the instant its counters were read (`now`), not the
        // scheduled one: under CPU contention the two can differ by milliseconds,
        // and a rate computed from mislabelled samples would be off by that much.
        if schedule.take_due(now).is_some() {
            if let Some(w) = stats.as_mut() {
                writeln!(w, "{}", stats::line(now, bridge))?;
                w.flush()?;
            }
        }

        // Next deadline: the bridge's next event or the next stats sample.
        let next = bridge.next_wakeup().map_or(schedule.next_due(), |t| t.min(schedule.next_due()));
        let until = next.as_nanos().saturating_sub(now.as_nanos());
        block = until > spin_ns;
        if block {
            // Re-arm only when the target moved (a syscall per iteration shows up
            // in profiles at high packet rates). A fired timer always moves it: the
            // event it was armed for has been handled, so `next` is later now.
            let target = start_ns + next.as_nanos() - spin_ns;
            if armed != Some(target) {
                timer.arm_at(target)?;
                armed = Some(target);
            }
        }
    }
}

/// Send everything in `out`, per port in the order the bridge produced it.
fn send_all(ports: &Ports, out: &mut Vec<Egress>, scratch: &mut SendScratch, health: &mut Health) {
    if out.is_empty() {
        return;
    }
    for (p, sock) in ports.socks.iter().enumerate() {
        let frames: Vec<(&[u8; crate::bridge::OFFLOAD_LEN], &[u8])> =
            out.iter().filter(|e| e.port == p).map(|e| (&e.frame.offload, e.frame.data.as_slice())).collect();
        if frames.is_empty() {
            continue;
        }
        let (_, errors) = sock.send_batch(&frames, scratch);
        if !errors.is_empty() {
            health.tx_errors += errors.len() as u64;
            if health.first_tx_error.is_none() {
                health.first_tx_error = Some(format!("send on {}: {}", sock.name(), errors[0]));
            }
        }
    }
    out.clear();
}
