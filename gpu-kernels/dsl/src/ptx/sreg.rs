//! Special-register reads (`mov.u32 %r, %<sreg>;`).
//!
//! Reading a special register has no side effect, so these are `pure, nomem`; they are still
//! `unsafe fn` like every L0 item, and the safe accessors live in [`crate::thread`] and
//! [`crate::time`].

use core::arch::asm;

/// One `pub unsafe fn` per register; the parenthesised `asm!` options say whether the read is
/// `pure` (mergeable and hoistable by LLVM) or pinned where it is written.
macro_rules! sreg_u32 {
    ($options:tt $($(#[$doc:meta])* $name:ident => $reg:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `mov.u32 %r, ", $reg, ";`.")]
        ///
        /// # Safety
        /// None beyond running on the device; the register exists on every sm_90+ target
        /// (cluster registers read as a 1×1×1 cluster when the launch has none).
        #[inline(always)]
        pub unsafe fn $name() -> u32 {
            let r: u32;
            // SAFETY: a special-register read has no side effects (a read that is not `pure`
            // is declared as having some only to pin it in place).
            unsafe { asm!(concat!("mov.u32 {0}, ", $reg, ";"), out(reg32) r, options $options) };
            r
        }
    )*};
}

sreg_u32! {
    (pure, nomem, nostack)
    /// Thread index in the block, x.
    tid_x => "%tid.x";
    /// Thread index in the block, y.
    tid_y => "%tid.y";
    /// Thread index in the block, z.
    tid_z => "%tid.z";
    /// Block size, x.
    ntid_x => "%ntid.x";
    /// Block size, y.
    ntid_y => "%ntid.y";
    /// Block size, z.
    ntid_z => "%ntid.z";
    /// Block index in the grid, x.
    ctaid_x => "%ctaid.x";
    /// Block index in the grid, y.
    ctaid_y => "%ctaid.y";
    /// Block index in the grid, z.
    ctaid_z => "%ctaid.z";
    /// Grid size in blocks, x.
    nctaid_x => "%nctaid.x";
    /// Grid size in blocks, y.
    nctaid_y => "%nctaid.y";
    /// Grid size in blocks, z.
    nctaid_z => "%nctaid.z";
    /// Lane of this thread in its warp (0..32).
    laneid => "%laneid";
    /// SM this thread runs on (may change under preemption; for diagnostics only).
    smid => "%smid";
    /// Cluster index in the grid, x.
    clusterid_x => "%clusterid.x";
    /// Cluster index in the grid, y.
    clusterid_y => "%clusterid.y";
    /// Cluster index in the grid, z.
    clusterid_z => "%clusterid.z";
    /// Number of clusters in the grid, x.
    nclusterid_x => "%nclusterid.x";
    /// Number of clusters in the grid, y.
    nclusterid_y => "%nclusterid.y";
    /// Number of clusters in the grid, z.
    nclusterid_z => "%nclusterid.z";
    /// Block index inside its cluster, x.
    cluster_ctaid_x => "%cluster_ctaid.x";
    /// Block index inside its cluster, y.
    cluster_ctaid_y => "%cluster_ctaid.y";
    /// Block index inside its cluster, z.
    cluster_ctaid_z => "%cluster_ctaid.z";
    /// Cluster shape in blocks, x.
    cluster_nctaid_x => "%cluster_nctaid.x";
    /// Cluster shape in blocks, y.
    cluster_nctaid_y => "%cluster_nctaid.y";
    /// Cluster shape in blocks, z.
    cluster_nctaid_z => "%cluster_nctaid.z";
    /// Linear rank of this block inside its cluster.
    cluster_ctarank => "%cluster_ctarank";
    /// Number of blocks in this cluster.
    cluster_nctarank => "%cluster_nctarank";
}

sreg_u32! {
    (nomem, nostack)
    /// `%tid.x`, read where it is written: the read is not marked `pure`, so LLVM neither
    /// merges it with other reads nor hoists it (or anything computed from it) out of a loop.
    tid_x_in_place => "%tid.x";
    /// `%ctaid.x`, read where it is written (not `pure`; see [`tid_x_in_place`]).
    ctaid_x_in_place => "%ctaid.x";
}

/// Global nanosecond timer.
///
/// Emits `mov.u64 %rd, %globaltimer;`.
///
/// # Safety
/// None beyond running on the device. The value advances in coarse steps (about 1 µs on
/// Hopper); it is not marked `pure` so two reads are never merged.
#[inline(always)]
pub unsafe fn globaltimer() -> u64 {
    let r: u64;
    // SAFETY: reading a timer has no side effects on memory.
    unsafe { asm!("mov.u64 {0}, %globaltimer;", out(reg64) r, options(nomem, nostack)) };
    r
}

/// SM cycle counter.
///
/// Emits `mov.u64 %rd, %clock64;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn clock64() -> u64 {
    let r: u64;
    // SAFETY: reading a counter has no side effects on memory.
    unsafe { asm!("mov.u64 {0}, %clock64;", out(reg64) r, options(nomem, nostack)) };
    r
}
