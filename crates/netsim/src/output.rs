//! What a run returns: columnar samples (one `Vec` per column, ready for numpy)
//! plus per-run totals.

use aqm::DropReason;

/// Flow samples, one row per (flow, sample time) while the flow is active.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowSamples {
    /// Flow index (position in `ScenarioSpec::flows`).
    pub flow: Vec<u32>,
    /// END of the sampling interval, ns.
    pub t_ns: Vec<u64>,
    /// In-order payload bytes delivered to the receiving application during the
    /// interval × 8 / interval length (DCCP: datagrams delivered × payload).
    pub goodput_bps: Vec<f64>,
    /// Congestion window at `t`, bytes (DCCP: packets × mss).
    pub cwnd_bytes: Vec<f64>,
    /// Smoothed RTT at `t`, ns (0 before the first sample).
    pub srtt_ns: Vec<u64>,
    /// RTT variation at `t`, ns.
    pub rttvar_ns: Vec<u64>,
    /// Segments retransmitted during the interval (always 0 for DCCP).
    pub retransmits: Vec<u64>,
    /// Sender state at `t`: 0 open, 1 cwr (ECN reduction), 2 fast recovery,
    /// 3 loss (after RTO), 4 finished/idle. See [`FlowState`].
    pub state: Vec<u8>,
    /// Controller phase at `t` (`CcMetrics::phase`, e.g. "slow_start").
    pub phase: Vec<&'static str>,
}

/// Codes of [`FlowSamples::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FlowState {
    /// Sending normally.
    Open = 0,
    /// Reducing after an ECN echo.
    Cwr = 1,
    /// Fast recovery.
    Recovery = 2,
    /// Recovering from a retransmission timeout.
    Loss = 3,
    /// No data left to send.
    Idle = 4,
}

impl FlowState {
    /// Name for a state code.
    pub fn name(code: u8) -> &'static str {
        match code {
            0 => "open",
            1 => "cwr",
            2 => "recovery",
            3 => "loss",
            4 => "idle",
            _ => "unknown",
        }
    }
}

/// Bottleneck samples, one row per sample time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BottleneckSamples {
    /// END of the interval, ns.
    pub t_ns: Vec<u64>,
    /// Bytes queued at `t` (excluding the packet being serialised).
    pub queue_bytes: Vec<u64>,
    /// Packets queued at `t`.
    pub queue_pkts: Vec<u64>,
    /// Packets dropped during the interval: queue drops of every reason plus
    /// random (`loss_rate`) drops.
    pub drops: Vec<u64>,
    /// Packets ECN-marked during the interval.
    pub marks: Vec<u64>,
    /// Queue drops during the interval by reason, indexed as [`DropReason::ALL`].
    pub drops_by_reason: [Vec<u64>; 5],
    /// Random-loss drops (the bottleneck's `loss_rate`) during the interval.
    pub drops_random: Vec<u64>,
}

impl BottleneckSamples {
    /// Column names of `drops_by_reason`, in order.
    pub fn reason_names() -> [&'static str; 5] {
        DropReason::ALL.map(|r| r.name())
    }
}

/// Per-flow totals at the end of the run. Byte counts are PAYLOAD bytes of data
/// packets; `sent = delivered + dropped + in_flight` holds for every flow
/// (byte conservation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowTotals {
    /// Payload bytes put on the access link, retransmissions included.
    pub bytes_sent: u64,
    /// Payload bytes that reached the receiver (duplicates included).
    pub bytes_delivered: u64,
    /// Payload bytes dropped at the bottleneck (queue or random loss).
    pub bytes_dropped: u64,
    /// Payload bytes still in the network at the end (host/access link, queue,
    /// link, propagation).
    pub bytes_in_flight: u64,
    /// In-order payload bytes handed to the receiving application (goodput).
    pub app_bytes: u64,
    /// Data packets sent (retransmissions included).
    pub packets_sent: u64,
    /// Segments retransmitted (TCP).
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Window reductions signalled to the controller (loss episodes + ECN).
    pub congestion_events: u64,
    /// When a finite transfer was completely acknowledged, ns.
    pub completed_ns: Option<u64>,
    /// When the flow actually started (after start jitter), ns.
    pub started_ns: u64,
}

/// Per-run totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Events popped from the event queue.
    pub events: u64,
    /// Packets the bottleneck link finished serialising.
    pub bottleneck_packets: u64,
    /// Queue drops by reason over the run, indexed as [`DropReason::ALL`].
    pub drops_by_reason: [u64; 5],
    /// Random-loss drops over the run.
    pub drops_random: u64,
    /// ECN marks over the run.
    pub marks: u64,
    /// Per-flow totals, indexed by flow.
    pub flows: Vec<FlowTotals>,
}

/// Every TCP sender's state as each ACK reaches it, before the ACK is processed:
/// the simulator's counterpart of Linux's `tcp:tcp_probe` tracepoint, which the
/// vm backend records (docs/vm.md, "Per-ACK trace"), with the same quantities so
/// the two traces of one scenario can be laid side by side. Only with
/// [`RunOptions::tcp_probe`](crate::RunOptions); the SYN-ACK is not traced (the
/// tracepoint sits in `tcp_rcv_established`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AckProbe {
    /// When the ACK arrived, ns.
    pub t_ns: Vec<u64>,
    /// Flow index.
    pub flow: Vec<u32>,
    /// Congestion window, segments (PRR's during a reduction, as Linux's `snd_cwnd`).
    pub cwnd_segments: Vec<u64>,
    /// Linux's `tcp_current_ssthresh()`, segments: ssthresh in CWR and Recovery,
    /// max(ssthresh, ¾·cwnd) otherwise; NaN while ssthresh is infinite.
    pub current_ssthresh_segments: Vec<f64>,
    /// Smoothed RTT, ns (0 before the first sample, as the kernel's).
    pub srtt_ns: Vec<u64>,
    /// The peer's advertised window from the last ACK, bytes (`u64::MAX`: none).
    pub snd_wnd_bytes: Vec<u64>,
    /// Payload bytes cumulatively acknowledged (`snd_una`).
    pub acked_bytes: Vec<u64>,
    /// Payload bytes sent and not cumulatively acknowledged (`snd_nxt − snd_una`).
    pub outstanding_bytes: Vec<u64>,
}

/// What happened to a packet at the bottleneck, one row of a [`QueueTrace`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QueueEvent {
    /// It arrived and was queued.
    Queued = 0,
    /// It arrived and was refused (a full DropTail queue, an AQM's early drop).
    Dropped = 1,
    /// It arrived and was queued with CE set (RED, PIE, BLUE … marking).
    Marked = 2,
    /// It had been queued and was dropped later: an AQM's drop at the head
    /// (CoDel) or a queued victim of CHOKe's match.
    DroppedFromQueue = 3,
    /// It was lost to the bottleneck's random loss (`loss_rate`) before the queue.
    Lost = 4,
    /// It was marked CE as it left the queue (CoDel); its arrival has a row of its own.
    MarkedLeaving = 5,
}

/// Every packet's fate at the bottleneck, in time order: the simulator's
/// counterpart of a capture at the router's queue, with the queue's backlog
/// each packet found (docs/queue-trace.md). Only with
/// [`RunOptions::queue_trace`](crate::RunOptions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueTrace {
    /// When it happened, ns.
    pub t_ns: Vec<u64>,
    /// Flow index.
    pub flow: Vec<u32>,
    /// TCP: segment index from the flow's first data segment. DCCP: packet sequence number.
    pub seq: Vec<u64>,
    /// What the queue counts for it: its Ethernet frame, bytes.
    pub bytes: Vec<u32>,
    /// Bytes queued when it happened, the packet itself not counted (the packet
    /// on the link is not queued).
    pub backlog_bytes: Vec<u64>,
    /// [`QueueEvent`] as its `u8` value.
    pub event: Vec<u8>,
}

impl QueueTrace {
    #[inline]
    pub(crate) fn push(&mut self, t_ns: u64, flow: u32, seq: u64, bytes: u32, backlog_bytes: u64, event: QueueEvent) {
        self.t_ns.push(t_ns);
        self.flow.push(flow);
        self.seq.push(seq);
        self.bytes.push(bytes);
        self.backlog_bytes.push(backlog_bytes);
        self.event.push(event as u8);
    }
}

/// Everything a run produces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOutput {
    /// Per-flow time series.
    pub flows: FlowSamples,
    /// Bottleneck time series.
    pub bottleneck: BottleneckSamples,
    /// Totals.
    pub totals: RunTotals,
    /// The per-ACK trace, when asked for.
    pub probe: Option<AckProbe>,
    /// The bottleneck's per-packet trace, when asked for.
    pub queue: Option<QueueTrace>,
}
