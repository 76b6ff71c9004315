//! The I/O loop: sockets in, [`Bridge`] in the middle, sockets out.
//!
//! One iteration: read the monotonic clock once after waking and turn it into
//! `SimTime` since `ready` (the only place wall-clock enters linkem's core, STYLE.md
//! §1; the other clock reads convert frame stamps and time the loop's own sleep);
//! receive what is waiting on every port (from its receive ring, up to
//! `PORT_BUDGET` frames), each frame entering the bridge at the instant the kernel
//! stamped it on arrival (see the loop); let the bridge run everything due; send;
//! write a stats line if one is due; then sleep until the next deadline. The sleep
//! is a `ppoll` on the sockets, the signalfd and a timerfd armed at an *absolute*
//! monotonic instant a spin window before the deadline; the window is spent
//! polling without blocking, because waking from a timer costs tens to hundreds
//! of microseconds on a VM and the delay budget is ±0.5 ms. The window follows
//! the measured lateness of the loop's own timer wake-ups ([`SpinWindow`]).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;

use netunits::SimTime;

use crate::bridge::{Bridge, Egress, PortId};
use crate::spin::SpinWindow;
use crate::stats::{self, Schedule};
use crate::sys::{self, PacketSocket, SendScratch, TermSignals, Timer};

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
    /// Longest time a frame waited between the kernel taking it in and this loop
    /// reading it (receive-ring ports only).
    pub rx_wait_max_ns: u64,
    /// Frames that waited more than 1 ms so: the loop could not keep up.
    pub rx_wait_over_1ms: u64,
    /// Frames the kernel dropped because a port's receive ring or buffer was full.
    pub kernel_drops: u64,
    /// Ports read through a receive ring (the others use `recvmmsg`).
    pub ring_ports: usize,
    /// Largest lateness of a timer wake-up (after the instant it was armed for).
    pub timer_late_max_ns: u64,
    /// Widest busy-poll window the loop used before a deadline.
    pub spin_max_ns: u64,
}

/// Receive-ring memory of port `port` of `n_ports` (the last is the receiver): the
/// sender ports share about 56 MiB, each between 512 KiB (≈ 330 MTU frames) and
/// 8 MiB (≈ 5,200, a scheduling hiccup at several Gbit/s). The receiver port, which
/// takes every flow's ACKs, gets 8 MiB.
fn ring_bytes(port: usize, n_ports: usize) -> usize {
    const MIN: usize = 512 << 10;
    const MAX: usize = 8 << 20;
    let senders = n_ports - 1;
    if port == senders {
        MAX
    } else {
        ((56 << 20) / senders).clamp(MIN, MAX)
    }
}

/// Frame buffers handed back after sending, reused for the next frames received:
/// a steady flow of frames then costs no allocation.
#[derive(Default)]
struct Pool(Vec<Vec<u8>>);

impl Pool {
    /// Room for an MTU-sized frame without reallocating.
    const CAPACITY: usize = 2048;
    /// Buffers kept at most (≈ 16 MiB).
    const KEEP: usize = 8192;

    fn copy_of(&mut self, data: &[u8]) -> Vec<u8> {
        let mut v = self.0.pop().unwrap_or_else(|| Vec::with_capacity(Self::CAPACITY));
        v.clear();
        v.extend_from_slice(data);
        v
    }

    fn give_back(&mut self, v: Vec<u8>) {
        if self.0.len() < Self::KEEP {
            self.0.push(v);
        }
    }
}

/// The ports, in bridge order (senders, then the receiver).
pub struct Ports {
    socks: Vec<PacketSocket>,
}

impl Ports {
    /// Open every interface (the last is the receiver port); the error names the
    /// interface.
    pub fn open(names: &[&str]) -> Result<Ports, String> {
        let socks = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                PacketSocket::open(n, ring_bytes(i, names.len())).map_err(|e| format!("cannot open interface {n:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ports { socks })
    }
}

/// Run until SIGTERM/SIGINT. `stats` receives the JSON lines. Prints `ready` on
/// stdout once everything is bound.
pub fn run(bridge: &mut Bridge, ports: &mut Ports, mut stats: Option<BufWriter<File>>, schedule: Schedule) -> io::Result<Health> {
    let signals = TermSignals::install()?;
    let timer = Timer::new()?;
    // Best effort: without it the timer may fire up to 50 µs late, which the spin
    // window then learns to absorb.
    let _ = sys::set_timer_slack_ns(1);
    let mut schedule = schedule;
    let mut health = Health { ring_ports: ports.socks.iter().filter(|s| s.has_ring()).count(), ..Health::default() };
    let mut pool = Pool::default();
    let mut scratch = SendScratch::default();
    let mut out: Vec<Egress> = Vec::with_capacity(4 * PORT_BUDGET);
    let n_ports = ports.socks.len();
    let mut fds: Vec<libc::pollfd> = ports
        .socks
        .iter()
        .map(|s| s.as_raw_fd())
        .chain([signals.as_raw_fd(), timer.as_raw_fd()])
        .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
        .collect();
    let sig_slot = n_ports;
    let timer_slot = n_ports + 1;
    let mut gso_warned = false;

    {
        let mut so = io::stdout().lock();
        writeln!(so, "ready")?;
        so.flush()?;
    }
    let start_ns = sys::monotonic_ns();
    let mut spin = SpinWindow::new();
    let mut block = false;
    let mut armed: Option<u64> = None;
    // The latest instant handed to the core: the next frame may not be older.
    let mut floor = SimTime::ZERO;
    loop {
        health.iterations += 1;
        // Only a sleep that began before the timer's instant measures how late the
        // host wakes the loop; if this iteration's own work ran past it, the timer
        // fired while the loop was busy and the "lateness" would be that work. (This
        // clock read only times the sleep; the core never sees it.)
        let sleep_target = armed.filter(|&target| block && sys::monotonic_ns() < target);
        sys::poll(&mut fds, block)?;
        // The edge: the one clock read of this iteration that becomes `now` (the
        // realtime read beside it only converts the ring's frame timestamps).
        let mono_ns = sys::monotonic_ns();
        let now = SimTime::from_nanos(mono_ns.saturating_sub(start_ns));
        let realtime_minus_start = i128::from(sys::realtime_ns()) - i128::from(mono_ns) + i128::from(start_ns);
        if let Some(target) = sleep_target.filter(|_| fds[timer_slot].revents & libc::POLLIN != 0) {
            let late = mono_ns.saturating_sub(target);
            health.timer_late_max_ns = health.timer_late_max_ns.max(late);
            spin.timer_woke(mono_ns, late);
        }

        if fds[sig_slot].revents & libc::POLLIN != 0 && signals.received() {
            health.kernel_drops = ports.socks.iter().map(|s| s.kernel_drops().unwrap_or(0)).sum();
            if let Some(w) = stats.as_mut() {
                writeln!(w, "{}", stats::line(now, bridge))?;
                writeln!(w, "{}", stats::health_line(&health))?;
                w.flush()?;
            }
            return Ok(health);
        }

        for (port, sock) in ports.socks.iter_mut().enumerate() {
            if fds[port].revents & (libc::POLLIN | libc::POLLERR) == 0 {
                continue;
            }
            let mut gso_len = None;
            let got = sock.recv_each(PORT_BUDGET, |f| {
                if f.truncated {
                    health.truncated += 1;
                    return;
                }
                if sys::offload_is_gso(&f.offload) {
                    health.gso_frames += 1;
                    gso_len = Some(f.data.len());
                }
                // The frame's delay starts when the kernel took it in, not when this
                // loop got to it (a wake-up on this VM takes ~50 µs; under load frames
                // wait longer). Kept within [floor, now] so the core's time never
                // runs backwards.
                let t = match f.arrival_realtime_ns {
                    Some(a) => {
                        let (t, wait) = entry_instant(a, realtime_minus_start, floor, now);
                        health.rx_wait_max_ns = health.rx_wait_max_ns.max(wait);
                        health.rx_wait_over_1ms += u64::from(wait > 1_000_000);
                        t
                    }
                    None => now,
                };
                floor = t;
                bridge.on_frame(t, port as PortId, pool.copy_of(f.data), f.offload, &mut out);
            });
            // A port that went away (interface deleted) ends the run loudly.
            got.map_err(|e| io::Error::new(e.kind(), format!("receive on {}: {e}", sock.name())))?;
            if let (Some(len), false) = (gso_len, gso_warned) {
                gso_warned = true;
                eprintln!(
                    "linkem: warning: {len}-byte TSO/GSO aggregate on {}; it is queued as ONE packet. Disable segmentation offload on the peer (ethtool -K IFACE tso off gso off) for per-packet fidelity",
                    sock.name()
                );
            }
        }

        if let Some(due) = bridge.next_wakeup().filter(|&t| t <= now) {
            let late = (now - due).as_nanos();
            health.max_late_ns = health.max_late_ns.max(late);
            health.late_over_100us += u64::from(late > 100_000);
            health.late_over_1ms += u64::from(late > 1_000_000);
        }
        bridge.poll(now, &mut out);
        floor = now;
        send_all(ports, &mut out, &mut scratch, &mut health, &mut pool);

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
        let spin_ns = spin.ns_at(mono_ns);
        health.spin_max_ns = health.spin_max_ns.max(spin_ns);
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

/// The instant a frame enters the bridge, and how long it waited to be read (ns):
/// its kernel arrival stamp `arrival_rt` (`CLOCK_REALTIME` ns) placed on linkem's
/// clock (`realtime_minus_start` = realtime − monotonic at this iteration + the
/// monotonic instant of `ready`), then kept within `[floor, now]`: not before what
/// the core has already been given (its time must not run backwards), not after
/// the clock read of this iteration (a realtime step cannot move a frame into the
/// future).
fn entry_instant(arrival_rt: u64, realtime_minus_start: i128, floor: SimTime, now: SimTime) -> (SimTime, u64) {
    let arrived = SimTime::from_nanos(u64::try_from(i128::from(arrival_rt) - realtime_minus_start).unwrap_or(0));
    (arrived.clamp(floor, now), now.saturating_since(arrived).as_nanos())
}

/// Send everything in `out`, per port in the order the bridge produced it.
fn send_all(ports: &Ports, out: &mut Vec<Egress>, scratch: &mut SendScratch, health: &mut Health, pool: &mut Pool) {
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
    for e in out.drain(..) {
        pool.give_back(e.frame.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_ports_share_56_mib_of_ring_within_512_kib_and_8_mib() {
        const MIB: usize = 1 << 20;
        // 1 sender + receiver: both at the 8 MiB cap.
        assert_eq!((ring_bytes(0, 2), ring_bytes(1, 2)), (8 * MIB, 8 * MIB));
        // 8 senders: 7 MiB each; the receiver keeps 8 MiB.
        assert_eq!((ring_bytes(3, 9), ring_bytes(8, 9)), (7 * MIB, 8 * MIB));
        // 200 senders: 56 MiB / 200 ≈ 287 KiB, raised to the 512 KiB floor.
        assert_eq!(ring_bytes(0, 201), 512 << 10);
    }

    #[test]
    fn a_frame_enters_at_its_arrival_stamp_within_floor_and_now() {
        // Realtime is 1,000 s ahead of linkem's clock.
        let off: i128 = 1_000_000_000_000;
        let us = SimTime::from_micros;
        let floor = us(900);
        let now = us(1_000);
        // Arrived 60 µs before this iteration's clock read: enters then, waited 60 µs.
        assert_eq!(entry_instant(1_000_000_940_000, off, floor, now), (us(940), 60_000));
        // Arrived before the previous iteration: the core is already at `floor`.
        assert_eq!(entry_instant(1_000_000_500_000, off, floor, now), (us(900), 500_000));
        // A stamp ahead of `now` (realtime stepped back): no later than `now`, no wait.
        assert_eq!(entry_instant(1_000_002_000_000, off, floor, now), (us(1_000), 0));
        // A stamp before linkem started: clamped, never a negative instant.
        assert_eq!(entry_instant(5, off, SimTime::ZERO, now), (SimTime::ZERO, 1_000_000));
    }
}
