//! Cache prefetch hints for the engine's many-flow runs.
//!
//! Why this exists: with a thousand flows, each event touches per-flow state that
//! has left the L2 cache since that flow's last event, and the engine knows the
//! next few events in advance (the heads of its FIFOs). A plain read of that state
//! ("warming" it) makes the core wait for the load before it can retire anything
//! after it; a prefetch instruction starts the same transfer and lets the core go
//! on with the current event. Hints change timing only, never a result.
//!
//! This is the engine's one `unsafe` block (the other `unsafe` in the workspace is
//! linkem's system-call layer, `crates/linkem/src/sys.rs`), kept here so netsim
//! and aqm stay `deny(unsafe_code)` without exception.

/// Bytes per cache line on the machines we target (x86_64 and aarch64 servers).
const LINE: usize = 64;

/// At most this many lines are hinted per call: the hint is for the hot head of a
/// structure, and a long stream of prefetches would only evict useful lines.
const MAX_LINES: usize = 8;

/// Hint that the memory of `value` (up to [`MAX_LINES`] cache lines of it) will be
/// read soon.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let start = value as *const T as *const u8;
    let bytes = std::mem::size_of_val(value).clamp(1, MAX_LINES * LINE);
    // One hint per line touched, including a partial first or last line. The
    // first line may begin before `value`, so step back to it with wrapping
    // pointer arithmetic (never `line - start`, which underflows).
    let skew = start as usize % LINE;
    let first = start.wrapping_sub(skew);
    for k in 0..(skew + bytes).div_ceil(LINE) {
        hint_line(first.wrapping_add(k * LINE));
    }
}

/// Hint bytes `offset .. offset + len` of `value`'s memory (clamped to the value and
/// to [`MAX_LINES`] lines), without reading any of it. For a part whose place is
/// known in advance: reaching it through the value (an enum's variant, say) would
/// load the value's first line, a cache miss that stalls the core — the very
/// thing the hint is meant to avoid.
#[inline(always)]
pub fn prefetch_bytes<T: ?Sized>(value: &T, offset: usize, len: usize) {
    let size = std::mem::size_of_val(value);
    let offset = offset.min(size);
    let bytes = len.min(size - offset).clamp(1, MAX_LINES * LINE);
    let start = (value as *const T as *const u8).wrapping_add(offset);
    let skew = start as usize % LINE;
    let first = start.wrapping_sub(skew);
    for k in 0..(skew + bytes).div_ceil(LINE) {
        hint_line(first.wrapping_add(k * LINE));
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn hint_line(p: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: PREFETCHT0 is a hint: it never faults, whatever the address (even
    // unmapped), and has no architectural effect. SSE, which provides it, is part
    // of the x86_64 baseline, so the target feature is always present.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn hint_line(_p: *const u8) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line arithmetic must not overflow or panic for any size, including an
    /// empty slice (size 0) and a value larger than `MAX_LINES` lines, nor at any
    /// offset within a cache line (run in a build with overflow checks: an
    /// unaligned start used to underflow `line - start`).
    #[test]
    fn hints_values_of_any_size_and_alignment() {
        let big = [7u8; 4096];
        prefetch(&big);
        prefetch(&big[..0]);
        prefetch(&3u64);
        prefetch(&());
        for offset in 0..LINE {
            prefetch(&big[offset..offset + 100]);
            prefetch(&big[offset..offset + 1]);
        }
    }

    /// A part given by offset and length: any offset (past the end too) and any
    /// length clamp to the value, never panic or overflow.
    #[test]
    fn hints_parts_at_any_offset() {
        let big = [7u8; 4096];
        for (offset, len) in [(0, 0), (0, 64), (100, 300), (4000, 1000), (4096, 1), (usize::MAX, usize::MAX), (5, usize::MAX)] {
            prefetch_bytes(&big, offset, len);
            prefetch_bytes(&big[..0], offset, len);
            prefetch_bytes(&3u64, offset, len);
        }
    }
}
