//! Device clocks.

use crate::ptx::{misc, sreg};

/// Nanoseconds on the GPU's global timer (coarse: about 1 µs steps on Hopper).
#[inline(always)]
pub fn global_timer_ns() -> u64 {
    // SAFETY: timer read.
    unsafe { sreg::globaltimer() }
}

/// Cycles on this SM's clock.
#[inline(always)]
pub fn clock_cycles() -> u64 {
    // SAFETY: counter read.
    unsafe { sreg::clock64() }
}

/// Sleeps the calling thread for about `ns` nanoseconds (back-off in spin loops).
#[inline(always)]
pub fn sleep_ns(ns: u32) {
    // SAFETY: sleeping has no preconditions.
    unsafe { misc::nanosleep(ns) }
}
