//! Warp-collective instructions: shuffle, vote, match, reduce, elect.
//!
//! All take a participation `mask`; every lane named in it must execute the same instruction
//! (`.sync.aligned` semantics are not required, but convergence of the masked lanes is).

use core::arch::asm;

macro_rules! shfl {
    ($($(#[$doc:meta])* $name:ident => $mode:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `shfl.sync.", $mode, ".b32 d, value, lane_or_delta, clamp, mask;`.")]
        ///
        /// # Safety
        /// Every lane in `mask` executes this instruction with the same `mask` and `clamp`
        /// (`clamp` is `0x1f` for a full-warp shuffle, `0` for `up`).
        #[inline(always)]
        pub unsafe fn $name(mask: u32, value: u32, lane_or_delta: u32, clamp: u32) -> u32 {
            let r: u32;
            // SAFETY: caller guarantees the masked lanes converge.
            unsafe {
                asm!(concat!("shfl.sync.", $mode, ".b32 {0}, {1}, {2}, {3}, {4};"),
                     out(reg32) r, in(reg32) value, in(reg32) lane_or_delta, in(reg32) clamp,
                     in(reg32) mask, options(nomem, nostack))
            };
            r
        }
    )*};
}

shfl! {
    /// Reads `value` from lane `lane_or_delta`.
    shfl_sync_idx => "idx";
    /// Reads `value` from lane `laneid + lane_or_delta`.
    shfl_sync_down => "down";
    /// Reads `value` from lane `laneid - lane_or_delta`.
    shfl_sync_up => "up";
    /// Reads `value` from lane `laneid ^ lane_or_delta`.
    shfl_sync_bfly => "bfly";
}

/// Bit i set iff lane i of `mask` has a non-zero `pred`.
///
/// Emits `vote.sync.ballot.b32 d, p, mask;`.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`.
#[inline(always)]
pub unsafe fn vote_sync_ballot(mask: u32, pred: bool) -> u32 {
    let r: u32;
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe {
        asm!("{{ .reg .pred %vp; setp.ne.u32 %vp, {1}, 0; vote.sync.ballot.b32 {0}, %vp, {2}; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r
}

/// True iff `pred` is set on every lane of `mask`.
///
/// Emits `vote.sync.all.pred p, q, mask;`.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`.
#[inline(always)]
pub unsafe fn vote_sync_all(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe {
        asm!("{{ .reg .pred %vp, %vq; setp.ne.u32 %vp, {1}, 0; vote.sync.all.pred %vq, %vp, {2}; selp.u32 {0}, 1, 0, %vq; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r != 0
}

/// True iff `pred` is set on any lane of `mask`.
///
/// Emits `vote.sync.any.pred p, q, mask;`.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`.
#[inline(always)]
pub unsafe fn vote_sync_any(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe {
        asm!("{{ .reg .pred %vp, %vq; setp.ne.u32 %vp, {1}, 0; vote.sync.any.pred %vq, %vp, {2}; selp.u32 {0}, 1, 0, %vq; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r != 0
}

/// Mask of the lanes in `mask` whose `value` equals this lane's.
///
/// Emits `match.any.sync.b32 d, value, mask;`.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`.
#[inline(always)]
pub unsafe fn match_any_sync(mask: u32, value: u32) -> u32 {
    let r: u32;
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe {
        asm!("match.any.sync.b32 {0}, {1}, {2};", out(reg32) r, in(reg32) value, in(reg32) mask, options(nomem, nostack))
    };
    r
}

// LLVM's own intrinsic, not `asm!`: LLVM marks it convergent, so no pass duplicates it into
// the arms of a branch that splits the warp (a `redux.sync` reached by part of its mask is
// undefined).
unsafe extern "C" {
    #[link_name = "llvm.nvvm.redux.sync.umin"]
    fn redux_sync_umin(value: u32, mask: u32) -> u32;
}

/// The minimum of `value` over the lanes of `mask`, on each of them.
///
/// Emits `redux.sync.min.u32 d, value, mask;` (sm_80+) through LLVM's convergent intrinsic. Its
/// SASS destination is a uniform register, so ptxas knows the result is the same on every
/// lane.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`.
#[inline(always)]
pub unsafe fn redux_sync_min_u32(mask: u32, value: u32) -> u32 {
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe { redux_sync_umin(value, mask) }
}

/// Elects one lane of `mask`; returns true on exactly that lane.
///
/// Emits `elect.sync _|p, mask;`.
///
/// # Safety
/// Every lane in `mask` executes this instruction with the same `mask`; sm_90+.
#[inline(always)]
pub unsafe fn elect_sync(mask: u32) -> bool {
    let r: u32;
    // SAFETY: caller guarantees the masked lanes converge.
    unsafe {
        asm!("{{ .reg .pred %ep; elect.sync _|%ep, {1}; selp.u32 {0}, 1, 0, %ep; }}",
             out(reg32) r, in(reg32) mask, options(nomem, nostack))
    };
    r != 0
}
