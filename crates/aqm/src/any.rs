//! [`AnyQdisc`]: every discipline in one enum, so an owner that picks the
//! discipline at run time (from the scenario's name) still calls it without a
//! virtual call per packet.
//!
//! Why not `Box<dyn Qdisc>`: the simulator enqueues and dequeues every packet
//! through the discipline; through a trait object each call is an indirect call
//! that cannot be inlined (the simulator's profile showed the boxed DropTail's
//! enqueue and dequeue as separate, un-inlined frames). A `match` over a closed set
//! lets the compiler inline the common disciplines into the caller's loop.

use crate::{
    Blue, Choke, Codel, Csfq, DropReason, DropTail, FqCodel, MarkReason, Mrtt, Packet, Pie, Prto, Qdisc, Red, SimRng,
    SimTime, Verdict, Zrtt,
};

/// One discipline of [`crate::REGISTRY`], chosen at run time ([`crate::build_any`]).
#[derive(Debug)]
pub enum AnyQdisc<P> {
    /// `droptail`
    DropTail(DropTail<P>),
    /// `red`
    Red(Red<P>),
    /// `choke`
    Choke(Choke<P>),
    /// `blue`
    Blue(Blue<P>),
    /// `codel`
    Codel(Codel<P>),
    /// `fq_codel`
    FqCodel(FqCodel<P>),
    /// `pie`
    Pie(Pie<P>),
    /// `zrtt`
    Zrtt(Zrtt<P>),
    /// `mrtt`
    Mrtt(Mrtt<P>),
    /// `prto`
    Prto(Prto<P>),
    /// `csfq`
    Csfq(Csfq<P>),
}

/// `$body` with `$q` bound to the discipline inside `$self`, whichever it is.
macro_rules! each {
    ($self:expr, $q:ident => $body:expr) => {
        match $self {
            AnyQdisc::DropTail($q) => $body,
            AnyQdisc::Red($q) => $body,
            AnyQdisc::Choke($q) => $body,
            AnyQdisc::Blue($q) => $body,
            AnyQdisc::Codel($q) => $body,
            AnyQdisc::FqCodel($q) => $body,
            AnyQdisc::Pie($q) => $body,
            AnyQdisc::Zrtt($q) => $body,
            AnyQdisc::Mrtt($q) => $body,
            AnyQdisc::Prto($q) => $body,
            AnyQdisc::Csfq($q) => $body,
        }
    };
}

impl<P: Packet> Qdisc<P> for AnyQdisc<P> {
    fn name(&self) -> &'static str {
        each!(self, q => q.name())
    }
    #[inline]
    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        match self {
            AnyQdisc::DropTail(q) => q.enqueue(now, pkt, rng, dropped),
            _ => self.enqueue_other(now, pkt, rng, dropped),
        }
    }
    #[inline]
    fn dequeue(
        &mut self,
        now: SimTime,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        match self {
            AnyQdisc::DropTail(q) => q.dequeue(now, rng, dropped, marked),
            _ => self.dequeue_other(now, rng, dropped, marked),
        }
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        each!(self, q => q.len_bytes())
    }
    #[inline]
    fn len_packets(&self) -> usize {
        each!(self, q => q.len_packets())
    }
}

/// The default discipline, DropTail, inline in the caller; the others behind one
/// call. With all eleven inlined in one `match`, the caller's enqueue was a large
/// function whose prologue and epilogue alone cost DropTail 20 instructions a
/// packet.
impl<P: Packet> AnyQdisc<P> {
    #[inline(never)]
    fn enqueue_other(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        each!(self, q => q.enqueue(now, pkt, rng, dropped))
    }
    #[inline(never)]
    fn dequeue_other(
        &mut self,
        now: SimTime,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        each!(self, q => q.dequeue(now, rng, dropped, marked))
    }
}
