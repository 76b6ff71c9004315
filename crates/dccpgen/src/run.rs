//! The server and client loops: glue between the sockets, the clock, the meter
//! and the report. Timing rule and send semantics: docs/dccpgen.md.

use std::io;
use std::path::Path;
use std::time::Duration;

use crate::accounting::Meter;
use crate::cli::{ClientArgs, ServerArgs};
use crate::hello::{Hello, HELLO_LEN, READY, READY_LEN};
use crate::report::{Role, RunInfo};
use crate::sys::{self, errno_name, Proto, Socket};

/// Why a run failed; the binary prints the text on one line.
#[derive(Debug)]
pub enum Failure {
    /// The user's input cannot work (exit 2).
    Usage(String),
    /// The system or the peer failed (exit 1).
    Runtime(String),
}

impl Failure {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            Failure::Usage(m) | Failure::Runtime(m) => m,
        }
    }
}

fn runtime(what: &str, e: &io::Error) -> Failure {
    Failure::Runtime(format!("{what}: {}", errno_name(e)))
}

/// How long either end waits for the other's opening message (hello, READY).
const HELLO_TIMEOUT_NS: u64 = 10_000_000_000;
/// After its deadline the server keeps reading (uncounted) until the client
/// closes, at most this long, so that the client never meets a reset.
const DRAIN_GRACE_NS: u64 = 10_000_000_000;
/// A blocking send gives up after this long so the client notices its deadline
/// even while the connection is stalled (a CCID2 or TCP RTO backs off for seconds).
const SEND_TIMEOUT: Duration = Duration::from_millis(50);
/// Default payload per send on TCP (iperf3's default block, 128 KiB).
const TCP_BLOCK: u32 = 128 * 1024;
/// Receive buffer: larger than any DCCP datagram (MPS < 64 KiB) and a good TCP read size.
const RECV_BUF: usize = 128 * 1024;
/// Room left in each DCCP payload for an Ack Vector: `DCCPAV_MIN_OPTLEN`
/// (net/dccp/ackvec.h), which `dccp_sync_mss` subtracts only once the Ack
/// Vector is on — after a client has computed its MPS at connect. A payload of
/// the full MPS plus the Ack Vector the client piggybacks then exceeds the path
/// MTU and IP drops it (FragFails) every time: in a 6.1 guest a 1440-byte
/// payload (MPS 1440 on a 1500-byte link) stalled after 3 packets, 1432 lost
/// one packet, 1424 none.
const ACKVEC_RESERVE: u32 = 16;

/// Open a socket of `proto` for `addr`'s family; a kernel without DCCP gets
/// the one sentence that says what to load.
fn open(proto: Proto, addr: &std::net::SocketAddr) -> Result<Socket, Failure> {
    Socket::new(proto, addr).map_err(|e| {
        if proto == Proto::Dccp && sys::is_unsupported(&e) {
            let module = if addr.is_ipv4() { "dccp_ipv4" } else { "dccp_ipv6" };
            Failure::Runtime(format!(
                "this kernel has no DCCP (socket: {}); load the dccp and {module} modules (Linux removed DCCP in 6.16)",
                errno_name(&e)
            ))
        } else {
            runtime("socket", &e)
        }
    })
}

// --------------------------------------------------------------------- server
/// Listen, and for each connection measure delivered bytes and hand the report
/// to `emit`; return after one connection with `--once`.
pub fn serve(args: &ServerArgs, emit: &mut dyn FnMut(&RunInfo) -> Result<(), Failure>) -> Result<(), Failure> {
    if let Some(out) = &args.output {
        check_output_dir(out)?;
    }
    let listener = open(args.proto, &args.listen)?;
    listener.set_reuse_addr().map_err(|e| runtime("setsockopt SO_REUSEADDR", &e))?;
    if args.proto == Proto::Dccp {
        listener.set_dccp_service(args.service_code).map_err(|e| runtime("setsockopt DCCP_SOCKOPT_SERVICE", &e))?;
    }
    listener.bind(&args.listen).map_err(|e| runtime(&format!("bind {}", args.listen), &e))?;
    listener.listen(16).map_err(|e| runtime("listen", &e))?;
    let local = listener.local_addr().map_err(|e| runtime("getsockname", &e))?;
    // A readiness line for scripts (and the chosen port when --port 0).
    eprintln!("fairlab-dccpgen: listening on {local} ({})", args.proto.name());
    loop {
        let conn = listener.accept().map_err(|e| runtime("accept", &e))?;
        match measure(&conn, args.proto) {
            Ok(run) => {
                emit(&run)?;
                drain(&conn);
            }
            Err(f) if args.once => return Err(f),
            Err(f) => eprintln!("fairlab-dccpgen: {}", f.message()),
        }
        drop(conn);
        if args.once {
            return Ok(());
        }
    }
}

/// Read and discard until the client closes (or `DRAIN_GRACE_NS` passes):
/// the client's clock started one one-way delay later, so it is still sending
/// at our deadline; closing now would hit it with a reset.
fn drain(conn: &Socket) {
    let give_up = sys::monotonic_ns() + DRAIN_GRACE_NS;
    let mut buf = vec![0u8; RECV_BUF];
    loop {
        let now = sys::monotonic_ns();
        if now >= give_up {
            return;
        }
        match conn.wait_readable(Duration::from_nanos(give_up - now)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(_) => return,
        }
        loop {
            match conn.recv_now(&mut buf) {
                Ok(None) => break,
                Ok(Some(0)) | Err(_) => return,
                Ok(Some(_)) => {}
            }
        }
    }
}

fn check_output_dir(out: &Path) -> Result<(), Failure> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(Failure::Usage(format!(
            "--output {}: the directory {} does not exist; allowed: a file in an existing directory",
            out.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Read an opening message of `N` bytes: one datagram (DCCP) or the next `N`
/// bytes of the stream (TCP). `what` names it in errors ("hello", "READY").
fn read_opening<const N: usize>(conn: &Socket, proto: Proto, what: &str) -> Result<([u8; N], usize), Failure> {
    let give_up_ns = sys::monotonic_ns() + HELLO_TIMEOUT_NS;
    let mut buf = [0u8; N];
    let mut have = 0;
    while have < N {
        let now = sys::monotonic_ns();
        if now >= give_up_ns {
            return Err(Failure::Runtime(format!(
                "the peer sent no {what} within {} s",
                HELLO_TIMEOUT_NS / 1_000_000_000
            )));
        }
        if !conn.wait_readable(Duration::from_nanos(give_up_ns - now)).map_err(|e| runtime("poll", &e))? {
            continue;
        }
        match conn.recv_now(&mut buf[have..]) {
            Ok(None) => continue,
            Ok(Some(0)) => return Err(Failure::Runtime(format!("the peer closed the connection before its {what}"))),
            Ok(Some(n)) => {
                have += n;
                if proto == Proto::Dccp {
                    break; // one datagram is the whole message
                }
            }
            Err(e) => return Err(runtime(&format!("recv ({what})"), &e)),
        }
    }
    Ok((buf, have))
}

/// Measure one accepted connection: read the hello, answer READY, then count
/// delivered bytes until the client's duration has passed since READY was
/// sent (`t0`) or the connection ends, whichever is first.
fn measure(conn: &Socket, proto: Proto) -> Result<RunInfo, Failure> {
    let local = conn.local_addr().map_err(|e| runtime("getsockname", &e))?;
    let remote = conn.peer_addr().map_err(|e| runtime("getpeername", &e))?;
    let (raw, n) = read_opening::<HELLO_LEN>(conn, proto, "hello")?;
    let hello = Hello::decode(&raw[..n]).map_err(|m| Failure::Runtime(format!("rejected a connection: {m}")))?;
    send_all(conn, READY, sys::monotonic_ns() + HELLO_TIMEOUT_NS).map_err(|e| runtime("send (READY)", &e))?;
    // t0 of the timing rule: READY has been handed to the kernel.
    let t0 = sys::monotonic_ns();
    let stamp_ns = sys::realtime_ns();
    let ccid = match proto {
        Proto::Dccp => Some(conn.dccp_rx_ccid().map_err(|e| runtime("getsockopt DCCP_SOCKOPT_RX_CCID", &e))?),
        Proto::Tcp => None,
    };
    let deadline = t0 + hello.duration_ns;
    let mut meter = Meter::new(hello.interval_ns);
    let mut buf = vec![0u8; RECV_BUF];
    let end = 'run: loop {
        let now = sys::monotonic_ns();
        if now >= deadline {
            break 'run deadline;
        }
        if !conn.wait_readable(Duration::from_nanos(deadline - now)).map_err(|e| runtime("poll", &e))? {
            continue;
        }
        // Drain what is queued, stamping each read as it returns.
        loop {
            let got = conn.recv_now(&mut buf);
            let t = sys::monotonic_ns();
            if t >= deadline {
                break 'run deadline; // this read returned after the end: not counted
            }
            match got {
                Ok(None) => break,
                Ok(Some(0)) => break 'run t, // the client closed: the run ends here
                Ok(Some(n)) => meter.record(t - t0, n as u64),
                Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => {
                    eprintln!(
                        "fairlab-dccpgen: the connection from {remote} was reset after {:.3} s; reporting what arrived",
                        (t - t0) as f64 / 1e9
                    );
                    break 'run t;
                }
                Err(e) => return Err(runtime("recv", &e)),
            }
        }
    };
    Ok(RunInfo {
        role: Role::Server,
        proto,
        socket: std::os::fd::AsRawFd::as_raw_fd(conn),
        local,
        remote,
        stamp_ns,
        system_info: sys::system_info(),
        interval_ns: hello.interval_ns,
        duration_ns: hello.duration_ns,
        packet_size: hello.packet_size,
        ccid,
        intervals: meter.finish(end - t0),
    })
}

/// Write `text` to `path` atomically (a temporary file in the same directory, renamed).
pub fn write_atomically(path: &Path, text: &str) -> Result<(), Failure> {
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}",
        path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        std::process::id()
    ));
    let result = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        std::fs::remove_file(&tmp).ok();
        return Err(Failure::Usage(format!("--output {}: cannot write the report ({e})", path.display())));
    }
    Ok(())
}

// --------------------------------------------------------------------- client
/// Connect, send the hello, wait for READY, then send `packet_size` payloads
/// as fast as the socket accepts them until `--time` has passed since READY
/// arrived; return the sender-side record.
pub fn client(args: &ClientArgs) -> Result<RunInfo, Failure> {
    let sock = open(args.proto, &args.server)?;
    if args.proto == Proto::Dccp {
        sock.set_dccp_service(args.service_code).map_err(|e| runtime("setsockopt DCCP_SOCKOPT_SERVICE", &e))?;
        sock.set_dccp_ccid(args.ccid).map_err(|e| {
            Failure::Runtime(format!(
                "--ccid {}: this kernel does not offer that CCID (setsockopt DCCP_SOCKOPT_CCID: {})",
                args.ccid,
                errno_name(&e)
            ))
        })?;
        // An unbounded DCCP transmit queue, so that send() BLOCKS on the socket's
        // send buffer like TCP's. With the kernel's default bound (the tx_qlen
        // sysctl, 5 packets) a full queue makes even a blocking send() return
        // EAGAIN at once (net/dccp/proto.c, dccp_sendmsg), and no poll() event
        // says when there is room again: a greedy sender would have to spin or
        // sleep and risk leaving CCID2 idle. The queue holds data CCID2 has not
        // yet released; its depth does not change what goes on the wire.
        sock.set_dccp_tx_qlen(0).map_err(|e| runtime("setsockopt DCCP_SOCKOPT_QPOLICY_TXQLEN", &e))?;
    }
    sock.connect(&args.server).map_err(|e| {
        if args.proto == Proto::Dccp && e.raw_os_error() == Some(libc::EBADRQC) {
            // The kernel's translation of a Reset with code "Bad Service Code" (RFC 4340 §5.6).
            Failure::Usage(format!(
                "--service-code {}: the server at {} refused it (EBADRQC); allowed: the code the server was started with",
                args.service_code, args.server
            ))
        } else {
            runtime(&format!("connect to {}", args.server), &e)
        }
    })?;
    let local = sock.local_addr().map_err(|e| runtime("getsockname", &e))?;
    // The MPS is final once connect() returns (features were activated on the
    // server's Response), so the hello can carry the packet size.
    let (packet_size, ccid) = match args.proto {
        Proto::Dccp => {
            let mps = sock.dccp_mps().map_err(|e| runtime("getsockopt DCCP_SOCKOPT_GET_CUR_MPS", &e))?;
            let tx = sock.dccp_tx_ccid().map_err(|e| runtime("getsockopt DCCP_SOCKOPT_TX_CCID", &e))?;
            if tx != args.ccid {
                return Err(Failure::Runtime(format!(
                    "asked for CCID {} but the connection negotiated CCID {tx}",
                    args.ccid
                )));
            }
            let largest = mps.saturating_sub(ACKVEC_RESERVE).max(1);
            let size = args.packet_size.unwrap_or(largest);
            if size > largest {
                return Err(Failure::Usage(format!(
                    "--packet-size {size} does not fit this connection: its maximum packet size is {mps} \
                     (DCCP_SOCKOPT_GET_CUR_MPS) less {ACKVEC_RESERVE} bytes for the Ack Vector Linux adds; \
                     allowed: 1 to {largest}"
                )));
            }
            (size, Some(tx))
        }
        Proto::Tcp => (args.packet_size.unwrap_or(TCP_BLOCK), None),
    };
    let hello = Hello {
        interval_ns: args.interval_ns,
        duration_ns: args.duration_ns,
        packet_size,
        ccid: ccid.unwrap_or(0),
    };
    send_all(&sock, &hello.encode(), sys::monotonic_ns() + HELLO_TIMEOUT_NS).map_err(|e| runtime("send (hello)", &e))?;
    let (ready, n) = read_opening::<READY_LEN>(&sock, args.proto, "READY").map_err(|f| {
        Failure::Runtime(format!("{} (the server's stderr says why it refused the test)", f.message()))
    })?;
    if &ready[..n] != READY {
        return Err(Failure::Runtime(format!("{} did not answer like a fairlab-dccpgen server", args.server)));
    }
    // t0 of the timing rule: the server's READY arrived (and a DCCP client is now OPEN).
    let t0 = sys::monotonic_ns();
    let stamp_ns = sys::realtime_ns();
    sock.set_send_timeout(SEND_TIMEOUT).map_err(|e| runtime("setsockopt SO_SNDTIMEO", &e))?;

    let deadline = t0 + args.duration_ns;
    let mut meter = Meter::new(args.interval_ns);
    let payload = vec![0u8; packet_size as usize];
    loop {
        if sys::monotonic_ns() >= deadline {
            break;
        }
        let sent = sock.send(&payload);
        let t = sys::monotonic_ns();
        match sent {
            // The same rule as the server's: a call that returned after the end is not counted.
            Ok(n) if t < deadline => meter.record(t - t0, n as u64),
            Ok(_) => break,
            // SO_SNDTIMEO expired (the queue stayed full for SEND_TIMEOUT), or a signal.
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => continue,
            // A send that was still blocked when the time was up: the run is over anyway.
            Err(_) if t >= deadline => break,
            Err(e) => {
                return Err(Failure::Runtime(format!(
                    "send to {} failed after {:.3} s: {}",
                    args.server,
                    (t - t0) as f64 / 1e9,
                    errno_name(&e)
                )))
            }
        }
    }
    Ok(RunInfo {
        role: Role::Client,
        proto: args.proto,
        socket: std::os::fd::AsRawFd::as_raw_fd(&sock),
        local,
        remote: args.server,
        stamp_ns,
        system_info: sys::system_info(),
        interval_ns: args.interval_ns,
        duration_ns: args.duration_ns,
        packet_size,
        ccid,
        intervals: meter.finish(args.duration_ns),
    })
    // `sock` closes here: DCCP sends Close and drops what CCID2 has not released.
}

/// Send all of `buf` (the hello), retrying timeouts until `give_up_ns`.
fn send_all(sock: &Socket, buf: &[u8], give_up_ns: u64) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        match sock.send(&buf[off..]) {
            Ok(n) => off += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                if sys::monotonic_ns() >= give_up_ns {
                    return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
