//! tcgen05 (sm_100a): Tensor Memory allocation, `tcgen05.mma` (dense and block-scaled),
//! `tcgen05.commit`, `tcgen05.cp`, waits and fences. The wide `tcgen05.ld/st` family is generated
//! (`tcgen05_ld_st`). Spellings are the ones `checks/tcgen05_sm100a.ptx` and
//! `checks/blockscale_sm100a.ptx` assemble (REFERENCE §10, §11); behaviour is from the ISA text
//! only — no Blackwell GPU has run any of it.
//!
//! Rules every caller shares: TMEM addresses are 32-bit `(lane << 16) | column`; descriptors are
//! built by `logic::tcgen05_desc`; a kernel uses one CTA group for all its tcgen05 instructions
//! (ptxas rejects mixing `::1` and `::2`); `enable_input_d` becomes a predicate inside the asm
//! (false: D = A·B, the first K step). mma, cp and commit are issued by one thread.

use core::arch::asm;

macro_rules! alloc_forms {
    ($group:literal, $alloc:ident, $dealloc:ident, $relinquish:ident) => {
        #[doc = concat!("Allocates `ncols` TMEM columns and writes their address to the shared slot `slot`.\n\n",
                        "Emits `tcgen05.alloc.cta_group::", $group, ".sync.aligned.shared::cta.b32 [slot], ncols;`.\n\n",
                        "# Safety\nWhole warp, converged, same operands; `ncols` is a power of two in [32, 512]; ",
                        "`slot` is a 4-byte shared-window address; blocks until the columns are free. With ",
                        "cta_group::2 one warp in each CTA of the pair executes it.")]
        #[inline(always)]
        pub unsafe fn $alloc(slot: u32, ncols: u32) {
            // SAFETY: the caller upholds the warp and column-count rules.
            unsafe {
                asm!(concat!("tcgen05.alloc.cta_group::", $group, ".sync.aligned.shared::cta.b32 [{0}], {1};"),
                     in(reg32) slot, in(reg32) ncols, options(nostack))
            };
        }

        #[doc = concat!("Frees TMEM columns allocated by this warp.\n\n",
                        "Emits `tcgen05.dealloc.cta_group::", $group, ".sync.aligned.b32 taddr, ncols;`.\n\n",
                        "# Safety\nWhole warp (the allocating one), converged; `taddr`/`ncols` as allocated; every ",
                        "TMEM access of the CTA (pair) has completed and was ordered before this.")]
        #[inline(always)]
        pub unsafe fn $dealloc(taddr: u32, ncols: u32) {
            // SAFETY: the caller guarantees nothing uses the columns any more.
            unsafe {
                asm!(concat!("tcgen05.dealloc.cta_group::", $group, ".sync.aligned.b32 {0}, {1};"),
                     in(reg32) taddr, in(reg32) ncols, options(nostack))
            };
        }

        #[doc = concat!("Promises that this CTA allocates no more TMEM (lets co-resident CTAs allocate).\n\n",
                        "Emits `tcgen05.relinquish_alloc_permit.cta_group::", $group, ".sync.aligned;`.\n\n",
                        "# Safety\nWhole warp, converged; no later alloc in this CTA.")]
        #[inline(always)]
        pub unsafe fn $relinquish() {
            // SAFETY: the caller never allocates again.
            unsafe {
                asm!(concat!("tcgen05.relinquish_alloc_permit.cta_group::", $group, ".sync.aligned;"), options(nostack))
            };
        }
    };
}

alloc_forms!("1", alloc_cta1, dealloc_cta1, relinquish_alloc_permit_cta1);
alloc_forms!("2", alloc_cta2, dealloc_cta2, relinquish_alloc_permit_cta2);

macro_rules! mma_forms {
    ($group:literal, $kind:literal, $ss:ident, $ts:ident) => {
        #[doc = concat!("D (TMEM) (+)= A·B, A and B from shared-memory descriptors.\n\n",
                        "Emits `{ .reg .pred %p; setp.ne.b32 %p, enable_input_d, 0; tcgen05.mma.cta_group::", $group,
                        ".kind::", $kind, " [d_tmem], a_desc, b_desc, idesc, %p; }`.\n\n",
                        "# Safety\nOne thread issues; `idesc` is a legal descriptor of this kind and CTA group; the ",
                        "descriptors address initialised shared memory ordered for the async proxy; `d_tmem` lies in ",
                        "allocated columns; completion is observed only through `tcgen05.commit`.")]
        #[inline(always)]
        pub unsafe fn $ss(d_tmem: u32, a_desc: u64, b_desc: u64, idesc: u32, enable_input_d: bool) {
            // SAFETY: the caller upholds the operand and issue rules.
            unsafe {
                asm!(concat!("{{ .reg .pred %p; setp.ne.b32 %p, {4}, 0; tcgen05.mma.cta_group::", $group,
                             ".kind::", $kind, " [{0}], {1}, {2}, {3}, %p; }}"),
                     in(reg32) d_tmem, in(reg64) a_desc, in(reg64) b_desc, in(reg32) idesc,
                     in(reg32) enable_input_d as u32, options(nostack))
            };
        }

        #[doc = concat!("D (TMEM) (+)= A·B, A from TMEM, B from a shared-memory descriptor.\n\n",
                        "Emits `{ .reg .pred %p; setp.ne.b32 %p, enable_input_d, 0; tcgen05.mma.cta_group::", $group,
                        ".kind::", $kind, " [d_tmem], [a_tmem], b_desc, idesc, %p; }`.\n\n",
                        "# Safety\nAs the shared-memory-A form; `a_tmem` holds A written and ordered before.")]
        #[inline(always)]
        pub unsafe fn $ts(d_tmem: u32, a_tmem: u32, b_desc: u64, idesc: u32, enable_input_d: bool) {
            // SAFETY: the caller upholds the operand and issue rules.
            unsafe {
                asm!(concat!("{{ .reg .pred %p; setp.ne.b32 %p, {4}, 0; tcgen05.mma.cta_group::", $group,
                             ".kind::", $kind, " [{0}], [{1}], {2}, {3}, %p; }}"),
                     in(reg32) d_tmem, in(reg32) a_tmem, in(reg64) b_desc, in(reg32) idesc,
                     in(reg32) enable_input_d as u32, options(nostack))
            };
        }
    };
}

mma_forms!("1", "f16", mma_f16_ss_cta1, mma_f16_ts_cta1);
mma_forms!("1", "tf32", mma_tf32_ss_cta1, mma_tf32_ts_cta1);
mma_forms!("1", "f8f6f4", mma_f8f6f4_ss_cta1, mma_f8f6f4_ts_cta1);
mma_forms!("2", "f16", mma_f16_ss_cta2, mma_f16_ts_cta2);
mma_forms!("2", "tf32", mma_tf32_ss_cta2, mma_tf32_ts_cta2);
mma_forms!("2", "f8f6f4", mma_f8f6f4_ss_cta2, mma_f8f6f4_ts_cta2);

macro_rules! mma_block_scaled_forms {
    ($group:literal, $ss:ident, $ts:ident) => {
        #[doc = concat!("Block-scaled MXFP8/6/4: D (+)= (A·2^SFA)·(B·2^SFB), one UE8M0 scale per 32 K.\n\n",
                        "Emits `{ .reg .pred %p; setp.ne.b32 %p, enable_input_d, 0; tcgen05.mma.cta_group::", $group,
                        ".kind::mxf8f6f4.block_scale.scale_vec::1X [d_tmem], a_desc, b_desc, idesc, [sfa_tmem], ",
                        "[sfb_tmem], %p; }`.\n\n",
                        "# Safety\nAs the dense forms; `idesc` is a block-scaled descriptor; `sfa_tmem`/`sfb_tmem` hold ",
                        "the scale factors (replicated in the four lane quarters, e.g. by `tcgen05.cp 32x128b.warpx4`).")]
        #[inline(always)]
        pub unsafe fn $ss(d_tmem: u32, a_desc: u64, b_desc: u64, idesc: u32, sfa_tmem: u32, sfb_tmem: u32,
                          enable_input_d: bool) {
            // SAFETY: the caller upholds the operand and issue rules.
            unsafe {
                asm!(concat!("{{ .reg .pred %p; setp.ne.b32 %p, {6}, 0; tcgen05.mma.cta_group::", $group,
                             ".kind::mxf8f6f4.block_scale.scale_vec::1X [{0}], {1}, {2}, {3}, [{4}], [{5}], %p; }}"),
                     in(reg32) d_tmem, in(reg64) a_desc, in(reg64) b_desc, in(reg32) idesc, in(reg32) sfa_tmem,
                     in(reg32) sfb_tmem, in(reg32) enable_input_d as u32, options(nostack))
            };
        }

        #[doc = concat!("Block-scaled MXFP8/6/4 with A from TMEM.\n\n",
                        "Emits `{ .reg .pred %p; setp.ne.b32 %p, enable_input_d, 0; tcgen05.mma.cta_group::", $group,
                        ".kind::mxf8f6f4.block_scale.scale_vec::1X [d_tmem], [a_tmem], b_desc, idesc, [sfa_tmem], ",
                        "[sfb_tmem], %p; }`.\n\n",
                        "# Safety\nAs the shared-memory-A form; `a_tmem` holds A written and ordered before.")]
        #[inline(always)]
        pub unsafe fn $ts(d_tmem: u32, a_tmem: u32, b_desc: u64, idesc: u32, sfa_tmem: u32, sfb_tmem: u32,
                          enable_input_d: bool) {
            // SAFETY: the caller upholds the operand and issue rules.
            unsafe {
                asm!(concat!("{{ .reg .pred %p; setp.ne.b32 %p, {6}, 0; tcgen05.mma.cta_group::", $group,
                             ".kind::mxf8f6f4.block_scale.scale_vec::1X [{0}], [{1}], {2}, {3}, [{4}], [{5}], %p; }}"),
                     in(reg32) d_tmem, in(reg32) a_tmem, in(reg64) b_desc, in(reg32) idesc, in(reg32) sfa_tmem,
                     in(reg32) sfb_tmem, in(reg32) enable_input_d as u32, options(nostack))
            };
        }
    };
}

mma_block_scaled_forms!("1", mma_mxf8f6f4_ss_cta1, mma_mxf8f6f4_ts_cta1);
mma_block_scaled_forms!("2", mma_mxf8f6f4_ss_cta2, mma_mxf8f6f4_ts_cta2);

/// One arrival on the mbarrier `bar` once every prior async tcgen05 op of this thread is done.
///
/// Emits `tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];`.
///
/// # Safety
/// `bar` is an initialised mbarrier (shared-window address; a local address is a valid
/// shared::cluster address) expecting this arrival. Implies `tcgen05.fence::before_thread_sync`.
#[inline(always)]
pub unsafe fn commit_cta1(bar: u32) {
    // SAFETY: the caller guarantees the barrier expects the arrival.
    unsafe {
        asm!("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [{0}];", in(reg32) bar,
             options(nostack))
    };
}

/// One arrival on the mbarrier at offset `bar` in every CTA of `cta_mask` (the pair's MMA done).
///
/// Emits `tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [bar], cta_mask;`.
///
/// # Safety
/// The barrier at `bar` is initialised in every CTA of `cta_mask` (bit i = cluster rank i) and
/// expects the arrival; those CTAs have not exited.
#[inline(always)]
pub unsafe fn commit_multicast_cta2(bar: u32, cta_mask: u16) {
    // SAFETY: the caller guarantees the barriers exist and expect the arrival.
    unsafe {
        asm!("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [{0}], {1};",
             in(reg32) bar, in(reg16) cta_mask, options(nostack))
    };
}

/// Arrival on the local barrier once the pair's prior async tcgen05 ops are done.
///
/// Emits `tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [bar];`.
///
/// # Safety
/// As [`commit_cta1`].
#[inline(always)]
pub unsafe fn commit_cta2(bar: u32) {
    // SAFETY: the caller guarantees the barrier expects the arrival.
    unsafe {
        asm!("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64 [{0}];", in(reg32) bar,
             options(nostack))
    };
}

macro_rules! cp_forms {
    ($group:literal, $( $name:ident => $shape:literal ),* $(,)?) => { $(
        #[doc = concat!("Copies shared memory (tcgen05 descriptor) into TMEM, shape `", $shape, "`.\n\n",
                        "Emits `tcgen05.cp.cta_group::", $group, ".", $shape, " [taddr], sdesc;`.\n\n",
                        "# Safety\nOne thread issues; `sdesc` describes initialised shared memory ordered for the async ",
                        "proxy (`fence.proxy.async.shared::cta` + barrier after generic writes); `taddr` lies in ",
                        "allocated columns; completion through `tcgen05.commit` (pipelined before a later mma).")]
        #[inline(always)]
        pub unsafe fn $name(taddr: u32, sdesc: u64) {
            // SAFETY: the caller upholds the operand and issue rules.
            unsafe {
                asm!(concat!("tcgen05.cp.cta_group::", $group, ".", $shape, " [{0}], {1};"),
                     in(reg32) taddr, in(reg64) sdesc, options(nostack))
            };
        }
    )* };
}

cp_forms!("1",
    cp_128x256b_cta1 => "128x256b",
    cp_128x128b_cta1 => "128x128b",
    cp_4x256b_cta1 => "4x256b",
    cp_64x128b_warpx2_02_13_cta1 => "64x128b.warpx2::02_13",
    cp_64x128b_warpx2_01_23_cta1 => "64x128b.warpx2::01_23",
    cp_32x128b_warpx4_cta1 => "32x128b.warpx4",
);
cp_forms!("2",
    cp_128x256b_cta2 => "128x256b",
    cp_128x128b_cta2 => "128x128b",
    cp_4x256b_cta2 => "4x256b",
    cp_64x128b_warpx2_02_13_cta2 => "64x128b.warpx2::02_13",
    cp_64x128b_warpx2_01_23_cta2 => "64x128b.warpx2::01_23",
    cp_32x128b_warpx4_cta2 => "32x128b.warpx4",
);

/// Waits until this thread's prior `tcgen05.ld`s have written their registers.
///
/// Emits `tcgen05.wait::ld.sync.aligned;`.
///
/// # Safety
/// Whole warp, converged.
#[inline(always)]
pub unsafe fn wait_ld() {
    // SAFETY: a wait has no operands; the caller guarantees convergence.
    unsafe { asm!("tcgen05.wait::ld.sync.aligned;", options(nostack)) };
}

/// Waits until this thread's prior `tcgen05.st`s have completed.
///
/// Emits `tcgen05.wait::st.sync.aligned;`.
///
/// # Safety
/// Whole warp, converged.
#[inline(always)]
pub unsafe fn wait_st() {
    // SAFETY: a wait has no operands; the caller guarantees convergence.
    unsafe { asm!("tcgen05.wait::st.sync.aligned;", options(nostack)) };
}

/// Orders this thread's prior tcgen05 ops before its next synchronisation (arrive, bar.sync).
///
/// Emits `tcgen05.fence::before_thread_sync;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_before_thread_sync() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("tcgen05.fence::before_thread_sync;", options(nostack)) };
}

/// Orders this thread's later tcgen05 ops after its last synchronisation (wait, bar.sync).
///
/// Emits `tcgen05.fence::after_thread_sync;`.
///
/// # Safety
/// None: a fence only orders.
#[inline(always)]
pub unsafe fn fence_after_thread_sync() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("tcgen05.fence::after_thread_sync;", options(nostack)) };
}
