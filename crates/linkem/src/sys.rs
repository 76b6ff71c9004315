//! The operating-system edge: AF_PACKET sockets (a shared-memory receive ring per
//! port, batched send), poll, timers, signals, the clocks and network namespaces.
//!
//! This is the ONLY module of linkem with `unsafe`. Every block is a direct libc
//! call whose pointer arguments point at memory owned by the caller for the whole
//! call, or a read of the receive ring; each says why that holds. The one pointer
//! kept past a call is the ring's mapping, owned by `RxRing` and unmapped when it
//! drops.

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
/// Gbit/s (8 MiB ≈ 5,600 full frames) instead of dropping in the kernel. With a
/// receive ring it bounds only the frames too big for a ring slot (see `RxRing`).
const SOCKET_BUFFER: libc::c_int = 8 << 20;

/// A raw packet socket bound to one interface, receiving every frame that arrives
/// on it (not those it sends) and sending whole Ethernet frames.
#[derive(Debug)]
pub struct PacketSocket {
    // `rx` is declared first so the ring is unmapped before the socket closes.
    rx: Receiver,
    fd: OwnedFd,
    name: String,
}

/// One received frame, as [`PacketSocket::recv_each`] hands it over.
#[derive(Debug)]
pub struct Received<'a> {
    /// The offload header to send the frame on with.
    pub offload: [u8; OFFLOAD_LEN],
    /// The frame from the destination MAC on; only valid during the call.
    pub data: &'a [u8],
    /// Cut short (bigger than any buffer): must not be forwarded.
    pub truncated: bool,
    /// When the kernel took the frame in, in `CLOCK_REALTIME` nanoseconds: the
    /// ring's per-frame timestamp (`None` on the `recvmmsg` path).
    pub arrival_realtime_ns: Option<u64>,
}

/// How frames are read: from a shared-memory ring (the normal case) or, when the
/// kernel refuses the ring, one `recvmmsg` copy per frame.
#[derive(Debug)]
enum Receiver {
    Ring(RxRing),
    Batch(RecvBatch),
}

impl PacketSocket {
    /// Open and bind a socket on interface `ifname`, with a receive ring of about
    /// `ring_bytes` (one 64 KiB block at least), or on `recvmmsg` when the kernel
    /// refuses the ring.
    ///
    /// - `PACKET_VNET_HDR`: each frame comes with a `virtio_net_hdr`. A frame that a
    ///   local TCP stack sent over a veth still has its TCP checksum to be filled in
    ///   (checksum offload); sending it back with that header asks the kernel to
    ///   finish the checksum, instead of delivering a frame with a wrong one.
    /// - `PACKET_IGNORE_OUTGOING`: without it the socket would read back every frame
    ///   linkem itself sends on the interface.
    /// - `PACKET_RX_RING` of about `ring_bytes`: see `RxRing` below.
    /// - promiscuous membership: frames addressed to other MACs are what a bridge
    ///   forwards (dropped automatically when the socket closes).
    pub fn open(ifname: &str, ring_bytes: usize) -> io::Result<PacketSocket> {
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
        // Before the ring: the kernel refuses to change the header once a ring exists.
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, &one)?;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one)?;
        // The FORCE variants (root) exceed net.core.{r,w}mem_max; fall back quietly.
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &SOCKET_BUFFER).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &SOCKET_BUFFER);
        }
        if setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &SOCKET_BUFFER).is_err() {
            let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, &SOCKET_BUFFER);
        }
        // A ring the kernel refuses leaves the port on `recvmmsg` (counted in the
        // exit summary's "rx rings k/n").
        let rx = match RxRing::new(raw, &cname, ring_bytes) {
            Ok(r) => Receiver::Ring(r),
            Err(_) => Receiver::Batch(RecvBatch::new(BATCH)),
        };
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
        Ok(PacketSocket { rx, fd, name: ifname.to_string() })
    }

    /// The interface name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether frames are read from a receive ring (else with `recvmmsg`).
    pub fn has_ring(&self) -> bool {
        matches!(self.rx, Receiver::Ring(_))
    }

    /// Frames the kernel dropped for this socket since the last call because the ring
    /// or the socket buffer was full (`PACKET_STATISTICS`, which resets on read).
    pub fn kernel_drops(&self) -> io::Result<u64> {
        // SAFETY: an all-zero tpacket_stats is a valid value of this plain C struct.
        let mut st: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` and `len` are writable and live across the call; `len` holds
        // the size of `st`, which bounds what the kernel writes.
        cvt(unsafe {
            libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS, (&mut st as *mut libc::tpacket_stats).cast(), &mut len)
        })?;
        Ok(u64::from(st.tp_drops))
    }

    /// Hand up to about `max` waiting frames to `each` without blocking, in arrival
    /// order; returns how many were consumed (0 when nothing is waiting).
    pub fn recv_each(&mut self, max: usize, mut each: impl FnMut(Received<'_>)) -> io::Result<usize> {
        let fd = self.fd.as_raw_fd();
        match &mut self.rx {
            Receiver::Ring(r) => r.recv_each(fd, max, each),
            Receiver::Batch(b) => {
                let mut got = 0;
                while got < max {
                    let k = b.recv(fd)?;
                    for i in 0..k {
                        if let Some((offload, data, truncated)) = b.frame(i) {
                            each(Received { offload, data, truncated, arrival_realtime_ns: None });
                        }
                    }
                    got += k;
                    if k < b.bufs.len() {
                        break;
                    }
                }
                Ok(got)
            }
        }
    }

    /// Send frames in order, each with its offload header. Returns how many went out
    /// and, per failed frame, its error (a failed frame is skipped, not retried: the
    /// link emulator must not stall behind one unsendable frame).
    ///
    /// Why not a `PACKET_TX_RING`: it hands the frame to the device as pages of the
    /// ring, and over a veth the slot is given back once the frame is queued at the
    /// receiving socket — before the application there has read it — so reusing the
    /// slot could change bytes already "delivered". `sendmmsg` copies.
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

/// Frames per `recvmmsg` (the fallback receive path).
const BATCH: usize = 64;

/// Receive one message (offload header + frame) into `buf` without blocking;
/// `Ok(None)` when nothing is waiting, else its full length (which exceeds
/// `buf.len()` when it was cut short).
fn recv_one(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is writable for its whole length during the call; MSG_TRUNC
    // makes the kernel return the message's real length but it still writes at
    // most `buf.len()` bytes.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(r as usize))
}

/// A `PACKET_RX_RING` (TPACKET_V2): the kernel copies each frame, in its softirq,
/// into the next free slot of a buffer shared with linkem and flips the slot's
/// status word; linkem reads frames straight from the slots and hands them back.
/// Compared with `recvmmsg` this saves, per frame, the socket-queue round trip, the
/// message-header handling and a copy out of the kernel — the receive half of
/// linkem's own kernel time.
///
/// - Why V2, not V3: V3 hands frames over a whole block at a time, after a block
///   timeout of at least 1 ms when traffic is light — as much as the delay budget.
///   V2 hands over (and wakes `poll`) per frame.
/// - Slots hold an MTU-sized frame (the interface's MTU at open). A bigger frame (a
///   TSO/GSO aggregate; a later MTU change) fills its slot only partially and is
///   marked `TP_STATUS_COPY`: with `PACKET_COPY_THRESH` set the kernel also queues
///   the whole frame on the socket, in order, and it is read from there. Nothing is
///   ever silently truncated.
/// - When every slot is full the kernel drops the frame and counts it
///   ([`PacketSocket::kernel_drops`], in the exit summary) — like a full socket
///   buffer without the ring.
///
/// Unlike everything else in this module the ring keeps a pointer across calls: the
/// mapping, owned by this value for its whole life and unmapped in `Drop`.
#[derive(Debug)]
struct RxRing {
    map: *mut u8,
    map_len: usize,
    block_size: usize,
    frame_size: usize,
    frames_per_block: usize,
    frames: usize,
    /// The next slot to read: the kernel fills slots in order and so do we read them.
    head: usize,
    /// Lazily allocated buffer for frames bigger than a slot.
    big: Vec<u8>,
}

/// Ring blocks: 64 KiB (order-4 page runs, which the kernel finds easily; it falls
/// back to vmalloc when it cannot).
const RING_BLOCK: usize = 1 << 16;

impl RxRing {
    /// Set up and map a ring of about `bytes` on the unbound socket `fd`.
    fn new(fd: RawFd, ifname: &CString, bytes: usize) -> io::Result<RxRing> {
        let mtu = interface_mtu(fd, ifname).unwrap_or(1500);
        // Where the kernel puts the Ethernet header in a slot (SOCK_RAW, net/packet
        // tpacket_rcv): the aligned V2 header + sockaddr_ll + 16, plus the offload
        // header, minus the 14-byte Ethernet header.
        let mac_at = align16(libc::TPACKET2_HDRLEN + 16) + OFFLOAD_LEN - 14;
        let frame_size = align16(mac_at + 14 + mtu as usize + 4);
        let block_size = RING_BLOCK.max(frame_size.next_multiple_of(4096));
        let frames_per_block = block_size / frame_size;
        let blocks = (bytes / block_size).max(1);
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)?;
        // Any non-zero threshold turns on the queue-the-whole-frame path for frames
        // bigger than a slot.
        let copy_thresh: libc::c_int = 1;
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_COPY_THRESH, &copy_thresh)?;
        let req = libc::tpacket_req {
            tp_block_size: block_size as libc::c_uint,
            tp_block_nr: blocks as libc::c_uint,
            tp_frame_size: frame_size as libc::c_uint,
            tp_frame_nr: (blocks * frames_per_block) as libc::c_uint,
        };
        setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
        let map_len = blocks * block_size;
        // SAFETY: a fresh shared mapping of the socket's ring, of exactly the size the
        // kernel just allocated; we own it until `Drop` unmaps it.
        let map = unsafe { libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // Without the mapping the ring must go, or the kernel would keep filling
            // it and the `recvmmsg` fallback would read nothing. A zero-block request
            // frees it.
            // SAFETY: an all-zero tpacket_req is a valid value of this plain C struct.
            let none: libc::tpacket_req = unsafe { zeroed() };
            setsockopt(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &none)?;
            return Err(e);
        }
        Ok(RxRing {
            map: map.cast(),
            map_len,
            block_size,
            frame_size,
            frames_per_block,
            frames: blocks * frames_per_block,
            head: 0,
            big: Vec::new(),
        })
    }

    /// The status word of slot `i`: written by the kernel (hand-over to us) and by us
    /// (hand-back), so it is read and written atomically.
    fn status(&self, i: usize) -> &std::sync::atomic::AtomicU32 {
        let off = (i / self.frames_per_block) * self.block_size + (i % self.frames_per_block) * self.frame_size;
        // SAFETY: `off` is the start of slot `i` inside the mapping (i < frames); the
        // slot starts with the 4-byte-aligned `tp_status` u32 of a tpacket2_hdr, which
        // AtomicU32 has the layout of; the mapping outlives `&self`.
        unsafe { &*self.map.add(off).cast::<std::sync::atomic::AtomicU32>() }
    }

    fn recv_each(&mut self, fd: RawFd, max: usize, mut each: impl FnMut(Received<'_>)) -> io::Result<usize> {
        use std::sync::atomic::Ordering;
        let mut got = 0;
        while got < max {
            let i = self.head;
            let status = self.status(i).load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 {
                break;
            }
            let slot = (self.status(i) as *const std::sync::atomic::AtomicU32).cast::<u8>();
            // SAFETY: the slot is ours until we hand it back (TP_STATUS_USER, read with
            // Acquire, so the kernel's writes to it are visible); it starts with a
            // tpacket2_hdr, read unaligned-safely by value.
            let hdr: libc::tpacket2_hdr = unsafe { std::ptr::read_unaligned(slot.cast()) };
            let (mac, snap) = (hdr.tp_mac as usize, hdr.tp_snaplen as usize);
            // The kernel stamps every ring frame: the software receive timestamp when
            // the stack took one (netif_rx), else the time of the copy into the ring.
            let arrival_realtime_ns = Some(u64::from(hdr.tp_sec) * 1_000_000_000 + u64::from(hdr.tp_nsec));
            // The whole frame waits on the socket queue (see the type's doc).
            let mut whole = None;
            if status & libc::TP_STATUS_COPY != 0 {
                if self.big.is_empty() {
                    self.big = vec![0u8; OFFLOAD_LEN + MAX_FRAME];
                }
                whole = recv_one(fd, &mut self.big)?.filter(|&len| len >= OFFLOAD_LEN);
            }
            if let Some(len) = whole {
                let mut offload = [0u8; OFFLOAD_LEN];
                offload.copy_from_slice(&self.big[..OFFLOAD_LEN]);
                let data = &self.big[OFFLOAD_LEN..len.min(self.big.len())];
                each(Received { offload, data, truncated: len > self.big.len(), arrival_realtime_ns });
            } else if mac >= OFFLOAD_LEN && mac + snap <= self.frame_size {
                // SAFETY: [mac - OFFLOAD_LEN, mac + snap) lies inside this slot
                // (checked just above), which is ours until handed back below.
                let bytes = unsafe { std::slice::from_raw_parts(slot.add(mac - OFFLOAD_LEN), OFFLOAD_LEN + snap) };
                let mut offload = [0u8; OFFLOAD_LEN];
                offload.copy_from_slice(&bytes[..OFFLOAD_LEN]);
                // Cut short when bigger than the slot and the whole copy could not be
                // queued (socket buffer full): reported, never forwarded as is.
                let truncated = snap < hdr.tp_len as usize;
                each(Received { offload, data: &bytes[OFFLOAD_LEN..], truncated, arrival_realtime_ns });
            } else {
                // A slot whose header does not fit it (never seen): counted, not sent.
                each(Received { offload: [0; OFFLOAD_LEN], data: &[], truncated: true, arrival_realtime_ns });
            }
            // Hand the slot back; Release orders our reads of it before the kernel
            // may reuse it.
            self.status(i).store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.head = (i + 1) % self.frames;
            got += 1;
        }
        Ok(got)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` created; nothing borrows it any more.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

fn align16(x: usize) -> usize {
    x.next_multiple_of(libc::TPACKET_ALIGNMENT)
}

/// The interface's MTU (`SIOCGIFMTU`).
fn interface_mtu(fd: RawFd, ifname: &CString) -> io::Result<u32> {
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut req: libc::ifreq = unsafe { zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= req.ifr_name.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    // SAFETY: `req` is a valid, writable ifreq with a NUL-terminated name, alive
    // across the call; SIOCGIFMTU writes only its ifru_mtu field.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) })?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu }.max(68) as u32)
}

/// Reusable receive buffers for the `recvmmsg` path.
#[derive(Debug)]
struct RecvBatch {
    bufs: Vec<Box<[u8]>>,
    iov: Vec<libc::iovec>,
    hdr: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
    truncated: Vec<bool>,
}

impl RecvBatch {
    /// Room for `n` frames per call.
    fn new(n: usize) -> Self {
        RecvBatch {
            bufs: (0..n).map(|_| vec![0u8; OFFLOAD_LEN + MAX_FRAME].into_boxed_slice()).collect(),
            iov: Vec::with_capacity(n),
            hdr: Vec::with_capacity(n),
            lens: Vec::with_capacity(n),
            truncated: Vec::with_capacity(n),
        }
    }

    /// Receive up to `bufs.len()` frames without blocking; returns how many (0 when
    /// nothing is waiting).
    fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        let n = self.bufs.len();
        self.iov.clear();
        self.hdr.clear();
        for b in self.bufs.iter_mut() {
            self.iov.push(libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() });
        }
        for i in 0..n {
            // SAFETY: an all-zero mmsghdr is a valid value of this plain C struct.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = &mut self.iov[i];
            h.msg_hdr.msg_iovlen = 1;
            self.hdr.push(h);
        }
        // SAFETY: `hdr` holds `n` headers, each pointing at one iovec of `iov`, each
        // pointing at a distinct buffer of `bufs` with its true length. All three
        // vectors are borrowed mutably through `self` for the whole call and are not
        // resized during it, so every pointer stays valid.
        let r = unsafe { libc::recvmmsg(fd, self.hdr.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let r = r as usize;
        self.lens.clear();
        self.truncated.clear();
        for h in &self.hdr[..r] {
            self.lens.push(h.msg_len as usize);
            self.truncated.push(h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0);
        }
        Ok(r)
    }

    /// Frame `i` of the last call: its offload header, its bytes, and whether it was
    /// cut short. `None` when the message is shorter than the offload header.
    fn frame(&self, i: usize) -> Option<([u8; OFFLOAD_LEN], &[u8], bool)> {
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

/// Nanoseconds of `CLOCK_MONOTONIC`: linkem's only clock. Read by the driver, once
/// per loop iteration for `now`, and turned into `SimTime` there.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of `CLOCK_REALTIME`, only to place the ring's frame timestamps on
/// the monotonic clock (the driver reads both clocks together).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: an all-zero timespec is valid; `ts` lives across the call.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: `ts` is a valid, writable timespec; both clocks passed here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
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
