//! Plain (non-atomic) global memory in 16-byte pieces: four `f32` per thread per instruction,
//! for bulk traffic such as partial accumulators handed between CTAs.

use crate::ptx::global as raw;

/// Four consecutive `f32`, moved as one 16-byte access.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct F32x4(pub f32, pub f32, pub f32, pub f32);

/// Loads the four `f32` at `addr`, through L2 only (no L1 line is allocated, so nothing stale
/// from earlier in the launch can be hit).
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four `f32`, readable and not written
/// concurrently; data written by another CTA is ordered before this load by the caller's
/// synchronisation.
#[inline(always)]
pub unsafe fn load_f32x4_l2(addr: *const f32) -> F32x4 {
    // SAFETY: the caller's contract.
    let (a, b, c, d) = unsafe { raw::ld_global_cg_v4_f32(addr) };
    F32x4(a, b, c, d)
}

/// Stores four `f32` at `addr`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four writable `f32` that nothing else
/// accesses concurrently.
#[inline(always)]
pub unsafe fn store_f32x4(addr: *mut f32, v: F32x4) {
    // SAFETY: the caller's contract.
    unsafe { raw::st_global_v4_f32(addr, (v.0, v.1, v.2, v.3)) }
}
