//! The operating-system edge: AF_PACKET sockets, batched receive and send, poll,
//! timers, signals, the monotonic clock and network namespaces.
//!
//! This is the ONLY module of linkem with `unsafe`. Every block is a direct libc
//! call whose pointer arguments point at memory owned by the caller for the whole
//! call; each says why that holds. Nothing here keeps a pointer past a call.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use crate::bridge::OFFLOAD_LEN;

/// Turn a libc `-1`-means-error return into `io::Result`.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live reference for the duration of the call and we pass
    // its exact size, so the kernel reads only memory we own.
    cvt(unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t) })?;
    Ok(())
}

/// Socket buffer we ask for: deep enough to absorb a scheduling hiccup at several
/// Gbit/s (8 MiB ≈ 5,600 full frames) instead of dropping in the kernel.
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// A raw packet socket bound to one interface, receiving every frame that arrives
/// on it (not those it sends) and sending whole Ethernet frames.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    name: String,
}

impl PacketSocket {
    /// Open and bind a socket on interface `ifname`.
    ///
    /// - `PACKET_VNET_HDR`: each frame comes with a `virtio_net_hdr`. A frame that a
    ///   local TCP stack sent over a veth still has its TCP checksum to be filled in
    ///   (checksum offload); sending it back with that header asks the kernel to
    ///   finish the checksum, instead of delivering a frame with a wrong one.
    /// - `PACKET_IGNORE_OUTGOING`: without it the socket would read back every frame
    ///   linkem itself sends on the interface.
    /// - promiscuous membership: frames addressed to other MACs are what a bridge
    ///   forwards (dropped automatically when the socket closes).
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        let cname = CString::new(ifname).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
        // SAFETY: `cname` is a NUL-terminated string alive for the whole call.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // Protocol 0 receives nothing until `bind` names the protocol and interface,
        // so no frame of another interface slips in between socket() and bind().
        // SAFETY: plain syscall with integer arguments.
        let raw = cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &one)?;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one)?;
        // The FORCE variants (root) exceed net.core.{r,w}mem_max; fall back quietly.
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &SOCKET_BUFFER).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &SOCKET_BUFFER);
        }
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &SOCKET_BUFFER).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &SOCKET_BUFFER);
        }
        // SAFETY: an all-zero packet_mreq is a valid value of this plain C struct.
        let mut mreq: libc::packet_mreq = unsafe { zeroed() };
        mreq.mr_ifindex = ifindex as libc::c_int;
        mreq.mr_type = libc::PACKET_MR_PROMISC as libc::c_ushort;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
        // SAFETY: an all-zero sockaddr_ll is a valid value of this plain C struct.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` lives across the call and we pass its exact size.
        cvt(unsafe {
            libc::bind(raw, (&sll as *const libc::sockaddr_ll).cast(), size_of::<libc::sockaddr_ll>() as libc::socklen_t)
        })?;
        Ok(PacketSocket { fd, name: ifname.to_string() })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Receive up to `batch.capacity()` frames without blocking; returns how many
    /// (0 when nothing is waiting).
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        let n = batch.bufs.len();
        batch.iov.clear();
        batch.hdr.clear();
        for b in batch.bufs.iter_mut() {
            batch.iov.push(libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() });
        }
        for i in 0..n {
            // SAFETY: an all-zero mmsghdr is a valid value of this plain C struct.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = &mut batch.iov[i];
            h.msg_hdr.msg_iovlen = 1;
            batch.hdr.push(h);
        }
        // SAFETY: `hdr` holds `n` headers, each pointing at one iovec of `iov`, each
        // pointing at a distinct buffer of `bufs` with its true length. All three
        // vectors are borrowed mutably through `batch` for the whole call and are
        // not resized during it, so every pointer stays valid.
        let r = unsafe {
            libc::recvmmsg(self.fd.as_raw_fd(), batch.hdr.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let r = r as usize;
        batch.lens.clear();
        batch.truncated.clear();
        for h in &batch.hdr[..r] {
            batch.lens.push(h.msg_len as usize);
            batch.truncated.push(h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0);
        }
        Ok(r)
    }

    /// Send frames in order, each with its offload header. Returns how many went out
    /// and, per failed frame, its error (a failed frame is skipped, not retried: the
    /// link emulator must not stall behind one unsendable frame).
    pub fn send_batch(&self, frames: &[(&[u8; OFFLOAD_LEN], &[u8])], scratch: &mut SendScratch) -> (usize, Vec<io::Error>) {
        let n = frames.len();
        let mut errors = Vec::new();
        if n == 0 {
            return (0, errors);
        }
        scratch.iov.clear();
        scratch.hdr.clear();
        for (off, data) in frames {
            // The kernel only reads through these pointers (send path); the casts to
            // *mut are what the C struct type requires.
            scratch.iov.push(libc::iovec { iov_base: off.as_ptr() as *mut libc::c_void, iov_len: OFFLOAD_LEN });
            scratch.iov.push(libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() });
        }
        for i in 0..n {
            // SAFETY: an all-zero mmsghdr is a valid value of this plain C struct.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = &mut scratch.iov[2 * i];
            h.msg_hdr.msg_iovlen = 2;
            scratch.hdr.push(h);
        }
        let mut done = 0usize;
        let mut sent = 0usize;
        while done < n {
            // SAFETY: `hdr[done..n]` are valid headers whose iovecs point into
            // `scratch.iov` and from there into `frames`, all borrowed for this whole
            // function and not resized while the call runs. The socket is bound, so
            // no destination address is needed.
            let r = unsafe {
                libc::sendmmsg(self.fd.as_raw_fd(), scratch.hdr[done..].as_mut_ptr(), (n - done) as libc::c_uint, libc::MSG_DONTWAIT)
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                errors.push(e);
                done += 1;
            } else {
                done += r as usize;
                sent += r as usize;
            }
        }
        (sent, errors)
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Largest frame a receive buffer holds: a 64 KiB GSO aggregate plus headers. A
/// bigger one is reported truncated.
pub const MAX_FRAME: usize = 65_536 + 256;

/// Reusable receive buffers for [`PacketSocket::recv_batch`].
pub struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
}

impl RecvBatch {
    /// Room for `n` frames per call.
    pub fn new(n: usize) -> Self {
        RecvBatch {
            bufs: (0..n).map(|_| vec![0u8; OFFLOAD_LEN + MAX_FRAME].into_boxed_slice()).collect(),
            iov: Vec::with_capacity(n),
            hdr: Vec::with_capacity(n),
            lens: Vec::with_capacity(n),
            truncated: Vec::with_capacity(n),
        }
    }

    /// Frames per call.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Frame `i` of the last call: its offload header, its bytes, and whether it was
    /// cut short. `None` when the message is shorter than the offload header.
    pub fn frame(&self, i: usize) -> Option<([u8; OFFLOAD_LEN], &[u8], bool)> {
        let len = self.lens[i];
        if len < OFFLOAD_LEN {
            return None;
        }
        let b = &self.bufs[i];
        let mut off = [0u8; OFFLOAD_LEN];
        off.copy_from_slice(&b[..OFFLOAD_LEN]);
        Some((off, &b[OFFLOAD_LEN..len.min(b.len())], self.truncated[i]))
    }
}

/// Reusable vectors for [`PacketSocket::send_batch`].
#[derive(Default)]
pub struct SendScratch {
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
}

/// The `gso_type` byte of a `virtio_net_hdr` (offset 1): non-zero for a TSO/GSO
/// aggregate larger than one wire frame.
pub fn offload_is_gso(off: &[u8; OFFLOAD_LEN]) -> bool {
    off[1] != 0
}

/// Nanoseconds of `CLOCK_MONOTONIC`: linkem's only clock. Read once per loop
/// iteration by the driver and turned into `SimTime` there.
pub fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid; `ts` lives across the call.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A `CLOCK_MONOTONIC` timerfd armed at absolute instants, so a wake-up deadline
/// does not drift by however long the loop spent working since it read the clock.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    /// A disarmed timer.
    pub fn new() -> io::Result<Timer> {
        // SAFETY: plain syscall with integer arguments.
        let raw = cvt(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Fire once at monotonic instant `abs_ns` (at once if it is past). Re-arming
    /// also clears an expiry nobody read.
    pub fn arm_at(&self, abs_ns: u64) -> io::Result<()> {
        // A zero it_value would disarm; the monotonic clock is far past 1 ns anyway.
        let abs_ns = abs_ns.max(1);
        // SAFETY: an all-zero itimerspec is a valid value of this plain C struct.
        let mut spec: libc::itimerspec = unsafe { zeroed() };
        spec.it_value.tv_sec = (abs_ns / 1_000_000_000) as libc::time_t;
        spec.it_value.tv_nsec = (abs_ns % 1_000_000_000) as libc::c_long;
        // SAFETY: `spec` lives across the call; a null old-value pointer is allowed.
        cvt(unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) })?;
        Ok(())
    }
}

impl AsRawFd for Timer {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// SIGTERM and SIGINT, blocked and delivered through a signalfd so the poll loop
/// sees them as a readable descriptor (no async handler, nothing to make reentrant).
#[derive(Debug)]
pub struct TermSignals {
    fd: OwnedFd,
}

impl TermSignals {
    /// Block SIGTERM/SIGINT for this thread (the only one) and open the signalfd.
    pub fn install() -> io::Result<TermSignals> {
        // SAFETY: `set` is a local sigset_t initialised by sigemptyset before use.
        let mut set: libc::sigset_t = unsafe { zeroed() };
        // SAFETY: `set` is valid and writable for these calls; SIG_BLOCK with a null
        // old-set pointer is allowed.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
        }
        // SAFETY: `set` is a valid sigset_t; -1 asks for a new descriptor.
        let raw = cvt(unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) })?;
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        Ok(TermSignals { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Whether a termination signal has arrived (consumes it).
    pub fn received(&self) -> bool {
        // SAFETY: an all-zero signalfd_siginfo is a valid value of this plain C struct.
        let mut info: libc::signalfd_siginfo = unsafe { zeroed() };
        // SAFETY: `info` is writable and exactly the size we pass.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size_of::<libc::signalfd_siginfo>()) };
        r == size_of::<libc::signalfd_siginfo>() as isize
    }
}

impl AsRawFd for TermSignals {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Wait until a descriptor in `fds` is ready; `block = false` only checks. Sets
/// each `revents`. An interrupted wait counts as "nothing ready".
pub fn poll(fds: &mut [libc::pollfd], block: bool) -> io::Result<usize> {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let timeout: *const libc::timespec = if block { std::ptr::null() } else { &zero };
    // SAFETY: `fds` is a valid, writable slice of the length we pass; `timeout` is
    // null (block) or points at `zero`, alive across the call; null sigmask keeps
    // the current mask.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(r as usize)
}

/// Ask the kernel for timers that fire within `ns` of their deadline (the default
/// slack of 50 µs would eat a tenth of linkem's delay budget).
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an integer; the remaining arguments are unused.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong, 0 as libc::c_ulong) })?;
    Ok(())
}

/// Move the calling THREAD into the network namespace at `path` (e.g.
/// `/run/netns/NAME`). Used by tests and benchmarks to open sockets inside a
/// namespace from a helper thread; linkem itself is started inside its namespace.
pub fn enter_netns(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace file for the whole call; setns only reads it.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Whether the process runs as root (tests skip the namespace checks otherwise).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
