//! Sockets, poll, clocks and uname over raw libc: the ONLY module with `unsafe`.
//!
//! Every block is one libc call on memory this module owns. DCCP is reached
//! through the ordinary BSD socket calls with the constants below; the same
//! code opens a TCP socket for `--proto tcp` (a host without DCCP can then
//! exercise the whole client/server/report path).
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

// Linux DCCP constants. Checked against the kernel sources (torvalds/linux):
// SOCK_DCCP in include/linux/net.h, IPPROTO_DCCP in include/uapi/linux/in.h,
// SOL_DCCP in include/linux/socket.h, the DCCP_SOCKOPT_* in
// include/uapi/linux/dccp.h; a unit test below also compares them with the
// `libc` crate's copies.
/// `SOCK_DCCP`: the socket type (include/linux/net.h).
pub const SOCK_DCCP: libc::c_int = 6;
/// `IPPROTO_DCCP` (include/uapi/linux/in.h).
pub const IPPROTO_DCCP: libc::c_int = 33;
/// `SOL_DCCP`: the level of DCCP socket options (include/linux/socket.h).
pub const SOL_DCCP: libc::c_int = 269;
/// Service code, a `__be32` (RFC 4340 §8.1.2); must match on both ends.
pub const DCCP_SOCKOPT_SERVICE: libc::c_int = 2;
/// Current maximum packet size (payload bytes one send may carry).
pub const DCCP_SOCKOPT_GET_CUR_MPS: libc::c_int = 5;
/// Preferred CCIDs for both half-connections, a list of `u8`, set before connect/listen.
pub const DCCP_SOCKOPT_CCID: libc::c_int = 13;
/// The CCID of the half-connection this socket sends on.
pub const DCCP_SOCKOPT_TX_CCID: libc::c_int = 14;
/// The CCID of the half-connection this socket receives on.
pub const DCCP_SOCKOPT_RX_CCID: libc::c_int = 15;
/// Per-socket bound on the transmit queue in packets; 0 = unbounded (net/dccp/qpolicy.c).
pub const DCCP_SOCKOPT_QPOLICY_TXQLEN: libc::c_int = 17;

/// The transport a socket speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// DCCP (RFC 4340), `SOCK_DCCP`.
    Dccp,
    /// TCP, `SOCK_STREAM`: for testing on hosts without DCCP.
    Tcp,
}

impl Proto {
    /// The name iperf3's `test_start.protocol` would use.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Dccp => "DCCP",
            Proto::Tcp => "TCP",
        }
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// The symbolic name of the errno values this program meets, for error lines
/// ("socket: ESOCKTNOSUPPORT"); others print as `errno N`.
pub fn errno_name(e: &io::Error) -> String {
    let Some(code) = e.raw_os_error() else { return e.to_string() };
    let name = match code {
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::EPROTOTYPE => "EPROTOTYPE",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EACCES => "EACCES",
        libc::EPIPE => "EPIPE",
        libc::EMSGSIZE => "EMSGSIZE",
        libc::ENOPROTOOPT => "ENOPROTOOPT",
        libc::EINVAL => "EINVAL",
        libc::EAGAIN => "EAGAIN",
        libc::ENOTCONN => "ENOTCONN",
        libc::EBADRQC => "EBADRQC",
        _ => return format!("errno {code} ({})", io::Error::from_raw_os_error(code)),
    };
    format!("{name} ({})", strip_os_error(&io::Error::from_raw_os_error(code)))
}

/// `io::Error`'s text without Rust's " (os error N)" suffix.
fn strip_os_error(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// True for the errors `socket()` gives when the kernel lacks the protocol
/// (no `dccp`/`dccp_ipv4` module, or a kernel from 6.16 on, which removed DCCP).
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::ESOCKTNOSUPPORT | libc::EPROTONOSUPPORT | libc::EPROTOTYPE)
    )
}

/// A connected or listening stream/DCCP socket; closed on drop.
#[derive(Debug)]
pub struct Socket {
    fd: OwnedFd,
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Socket {
    /// `socket(family of addr, SOCK_DCCP|SOCK_STREAM, IPPROTO_DCCP|IPPROTO_TCP)`.
    pub fn new(proto: Proto, addr: &SocketAddr) -> io::Result<Socket> {
        let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        let (ty, protocol) = match proto {
            Proto::Dccp => (SOCK_DCCP, IPPROTO_DCCP),
            Proto::Tcp => (libc::SOCK_STREAM, libc::IPPROTO_TCP),
        };
        let raw = cvt(unsafe { libc::socket(family, ty | libc::SOCK_CLOEXEC, protocol) })?;
        Ok(Socket { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    fn setsockopt_bytes(&self, level: libc::c_int, name: libc::c_int, value: &[u8]) -> io::Result<()> {
        cvt(unsafe {
            libc::setsockopt(self.as_raw_fd(), level, name, value.as_ptr().cast(), value.len() as libc::socklen_t)
        })?;
        Ok(())
    }

    fn setsockopt_int(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        self.setsockopt_bytes(level, name, &value.to_ne_bytes())
    }

    fn getsockopt_int(&self, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        cvt(unsafe { libc::getsockopt(self.as_raw_fd(), level, name, (&mut v as *mut libc::c_int).cast(), &mut len) })?;
        Ok(v)
    }

    /// `SO_REUSEADDR`, so a server can be restarted on its port at once.
    pub fn set_reuse_addr(&self) -> io::Result<()> {
        self.setsockopt_int(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
    }

    /// `SO_SNDTIMEO`: a blocking send gives up with EAGAIN after `t`.
    pub fn set_send_timeout(&self, t: Duration) -> io::Result<()> {
        let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as libc::suseconds_t };
        let bytes =
            unsafe { std::slice::from_raw_parts((&tv as *const libc::timeval).cast::<u8>(), size_of::<libc::timeval>()) };
        self.setsockopt_bytes(libc::SOL_SOCKET, libc::SO_SNDTIMEO, bytes)
    }

    /// The DCCP service code (host order in, network order to the kernel,
    /// which copies it into the Request's `__be32` field as is).
    pub fn set_dccp_service(&self, code: u32) -> io::Result<()> {
        self.setsockopt_bytes(SOL_DCCP, DCCP_SOCKOPT_SERVICE, &code.to_be_bytes())
    }

    /// Ask for exactly this CCID on both half-connections (before connect/listen).
    pub fn set_dccp_ccid(&self, ccid: u8) -> io::Result<()> {
        self.setsockopt_bytes(SOL_DCCP, DCCP_SOCKOPT_CCID, &[ccid])
    }

    /// The transmit-queue bound in packets (0 = unbounded).
    pub fn set_dccp_tx_qlen(&self, packets: u32) -> io::Result<()> {
        self.setsockopt_int(SOL_DCCP, DCCP_SOCKOPT_QPOLICY_TXQLEN, packets as libc::c_int)
    }

    /// Payload bytes one send may carry on this connection now.
    pub fn dccp_mps(&self) -> io::Result<u32> {
        Ok(self.getsockopt_int(SOL_DCCP, DCCP_SOCKOPT_GET_CUR_MPS)? as u32)
    }

    /// The CCID this socket sends with.
    pub fn dccp_tx_ccid(&self) -> io::Result<u8> {
        Ok(self.getsockopt_int(SOL_DCCP, DCCP_SOCKOPT_TX_CCID)? as u8)
    }

    /// The CCID of the half-connection this socket receives on (the peer's sender CCID).
    pub fn dccp_rx_ccid(&self) -> io::Result<u8> {
        Ok(self.getsockopt_int(SOL_DCCP, DCCP_SOCKOPT_RX_CCID)? as u8)
    }

    /// `bind(addr)`.
    pub fn bind(&self, addr: &SocketAddr) -> io::Result<()> {
        let (storage, len) = to_sockaddr(addr);
        cvt(unsafe { libc::bind(self.as_raw_fd(), (&storage as *const libc::sockaddr_storage).cast(), len) })?;
        Ok(())
    }

    /// `listen(backlog)`.
    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        cvt(unsafe { libc::listen(self.as_raw_fd(), backlog) })?;
        Ok(())
    }

    /// `accept()`, retried on EINTR.
    pub fn accept(&self) -> io::Result<Socket> {
        loop {
            let r = unsafe {
                libc::accept4(self.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC)
            };
            match cvt(r) {
                Ok(raw) => return Ok(Socket { fd: unsafe { OwnedFd::from_raw_fd(raw) } }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// A blocking `connect(addr)`.
    pub fn connect(&self, addr: &SocketAddr) -> io::Result<()> {
        let (storage, len) = to_sockaddr(addr);
        cvt(unsafe { libc::connect(self.as_raw_fd(), (&storage as *const libc::sockaddr_storage).cast(), len) })?;
        Ok(())
    }

    /// `getsockname()`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.name(libc::getsockname)
    }

    /// `getpeername()`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.name(libc::getpeername)
    }

    fn name(
        &self,
        call: unsafe extern "C" fn(libc::c_int, *mut libc::sockaddr, *mut libc::socklen_t) -> libc::c_int,
    ) -> io::Result<SocketAddr> {
        let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        cvt(unsafe { call(self.as_raw_fd(), (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len) })?;
        from_sockaddr(&storage)
    }

    /// One blocking `send` (MSG_NOSIGNAL: a closed peer is an EPIPE error, not a signal).
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        cvt_size(unsafe { libc::send(self.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) })
    }

    /// One non-blocking `recv` (`MSG_DONTWAIT`): `Ok(None)` when nothing is queued,
    /// `Ok(Some(0))` at the end of the connection.
    pub fn recv_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let r = unsafe { libc::recv(self.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        match cvt_size(r) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Wait until the socket is readable or `timeout` passes (`poll`); true if readable.
    /// EINTR counts as "not yet": the caller re-checks its deadline.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd { fd: self.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // Round up so a wait never returns before the deadline it was computed from.
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        match cvt(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Ok(n) => Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            (storage, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            (storage, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

fn from_sockaddr(storage: &libc::sockaddr_storage) -> io::Result<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            let sin: libc::sockaddr_in = unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Ok(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            let sin6: libc::sockaddr_in6 = unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), sin6.sin6_flowinfo, sin6.sin6_scope_id)))
        }
        f => Err(io::Error::new(io::ErrorKind::Unsupported, format!("address family {f}"))),
    }
}

/// Nanoseconds on `clock` (CLOCK_MONOTONIC for intervals, CLOCK_REALTIME for the stamp).
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts: libc::timespec = unsafe { zeroed() };
    // clock_gettime cannot fail for these two clocks with a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in ns: the clock every interval boundary is measured on.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns since the Unix epoch: only for `start.timestamp`.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `uname -a`-style text (sysname nodename release version machine), as
/// iperf3 writes in `start.system_info`.
pub fn system_info() -> String {
    let mut u: libc::utsname = unsafe { zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    [field(&u.sysname), field(&u.nodename), field(&u.release), field(&u.version), field(&u.machine)].join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dccp_constants_match_the_libc_crate() {
        // A second, independent transcription of the kernel headers.
        assert_eq!(SOL_DCCP, libc::SOL_DCCP);
        assert_eq!(IPPROTO_DCCP, libc::IPPROTO_DCCP);
        assert_eq!(DCCP_SOCKOPT_SERVICE, libc::DCCP_SOCKOPT_SERVICE);
        assert_eq!(DCCP_SOCKOPT_GET_CUR_MPS, libc::DCCP_SOCKOPT_GET_CUR_MPS);
        assert_eq!(DCCP_SOCKOPT_CCID, libc::DCCP_SOCKOPT_CCID);
        assert_eq!(DCCP_SOCKOPT_TX_CCID, libc::DCCP_SOCKOPT_TX_CCID);
        assert_eq!(DCCP_SOCKOPT_RX_CCID, libc::DCCP_SOCKOPT_RX_CCID);
        assert_eq!(DCCP_SOCKOPT_QPOLICY_TXQLEN, libc::DCCP_SOCKOPT_QPOLICY_TXQLEN);
    }

    #[test]
    fn sockaddr_round_trips() {
        for a in ["127.0.0.1:5201", "[::1]:80", "10.1.2.3:65535"] {
            let addr: SocketAddr = a.parse().unwrap();
            let (st, _) = to_sockaddr(&addr);
            assert_eq!(from_sockaddr(&st).unwrap(), addr);
        }
    }

    #[test]
    fn errno_names_the_dccp_refusals() {
        let e = io::Error::from_raw_os_error(libc::ESOCKTNOSUPPORT);
        assert!(errno_name(&e).starts_with("ESOCKTNOSUPPORT ("));
        assert!(is_unsupported(&e));
        assert!(!is_unsupported(&io::Error::from_raw_os_error(libc::ECONNREFUSED)));
    }
}
