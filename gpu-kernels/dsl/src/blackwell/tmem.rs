//! Tensor Memory (TMEM): allocation by one warp, publication to the block, accumulator views
//! and their loads into registers (sm_100a, `.cta_group::1`).
//!
//! The ISA rules the types carry (REFERENCE §10.1, §10.2, §10.8):
//! * columns are allocated in powers of two in [32, 512] — [`TmemOwner<COLS>`] checks `COLS` at
//!   compile time;
//! * the allocating warp must also deallocate — only it holds the (non-`Copy`) [`TmemOwner`];
//! * the address reaches other warps through shared memory with
//!   `fence::before_thread_sync → barrier → fence::after_thread_sync` — [`TmemOwner::allocate`]
//!   does the first half, [`Tmem::published`] the second;
//! * warp `w` may touch only lanes `32·(w % 4) … +31` — [`TmemAccumulator::warp_rows`] derives
//!   the lane from the calling warp, so an epilogue cannot name another quarter.

use crate::ptx::tcgen05;
pub use crate::ptx::tcgen05_ld_st::{Tmem16x64b, Tmem16x128b, Tmem16x256b, Tmem32x32b, TmemCopy};
use crate::shared::SharedPtr;
use crate::thread::warp_id;

/// Columns of TMEM per CTA.
pub const TMEM_COLUMNS: u32 = 512;
/// Lanes (rows) of TMEM per CTA.
pub const TMEM_LANES: u32 = 128;

/// A TMEM address, `(lane << 16) | column`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmemAddr(pub u32);

impl TmemAddr {
    /// `lanes` further down and `columns` further right.
    #[inline(always)]
    pub const fn offset(self, lanes: u32, columns: u32) -> TmemAddr {
        TmemAddr(self.0 + (lanes << 16) + columns)
    }
}

/// The allocation of `COLS` columns, held by the warp that allocated them.
#[derive(Debug)]
pub struct TmemOwner<const COLS: u32> {
    _only_by_allocate: (),
}

impl<const COLS: u32> TmemOwner<COLS> {
    const VALID: () = assert!(
        COLS.is_power_of_two() && COLS >= 32 && COLS <= TMEM_COLUMNS,
        "TMEM allocations are powers of two in [32, 512] columns"
    );

    /// Allocates `COLS` columns, writes their address to `slot`, gives up the right to allocate
    /// again (so co-resident CTAs are not blocked) and fences for the publishing barrier.
    ///
    /// # Safety
    /// All 32 lanes of one warp call this, converged; `slot` is a shared `u32` reserved for it;
    /// the CTA allocates nowhere else. Follow with a block barrier, then [`Tmem::published`].
    #[inline(always)]
    pub unsafe fn allocate(slot: SharedPtr<u32>) -> Self {
        let () = Self::VALID;
        // SAFETY: whole warp, legal column count, reserved slot (caller).
        unsafe {
            tcgen05::alloc_cta1(slot.addr(), COLS);
            tcgen05::relinquish_alloc_permit_cta1();
            tcgen05::fence_before_thread_sync();
        }
        TmemOwner { _only_by_allocate: () }
    }

    /// Frees the columns.
    ///
    /// # Safety
    /// The allocating warp, all lanes, converged; every TMEM access of the CTA has completed and
    /// was ordered before this (`wait::ld`, `fence::before_thread_sync`, a barrier) — consuming
    /// `self` makes a second deallocation impossible.
    #[inline(always)]
    pub unsafe fn deallocate(self, tmem: Tmem<COLS>) {
        // SAFETY: the caller guarantees no TMEM user is left.
        unsafe {
            tcgen05::fence_after_thread_sync();
            tcgen05::dealloc_cta1(tmem.base.0, COLS);
        }
    }
}

/// The CTA's TMEM allocation as every warp sees it.
#[derive(Clone, Copy, Debug)]
pub struct Tmem<const COLS: u32> {
    base: TmemAddr,
}

impl<const COLS: u32> Tmem<COLS> {
    /// Reads the address [`TmemOwner::allocate`] wrote to `slot`.
    ///
    /// # Safety
    /// A block barrier separates the allocation from this call.
    #[inline(always)]
    pub unsafe fn published(slot: SharedPtr<u32>) -> Self {
        // SAFETY: fence only; the barrier (caller) published the slot.
        unsafe { tcgen05::fence_after_thread_sync() };
        // SAFETY: the slot is a valid shared u32 written before the barrier.
        let base = unsafe { core::ptr::read_volatile(slot.as_mut_ptr()) };
        Tmem { base: TmemAddr(base) }
    }

    /// Base address (lane 0, first allocated column).
    #[inline(always)]
    pub const fn base(self) -> TmemAddr {
        self.base
    }

    /// The `COLUMNS`-wide accumulator starting `first_column` columns into the allocation.
    /// Compile-time checked to fit.
    #[inline(always)]
    pub const fn accumulator<const FIRST: u32, const COLUMNS: u32>(self) -> TmemAccumulator<COLUMNS> {
        const { assert!(FIRST + COLUMNS <= COLS, "accumulator outside the TMEM allocation") };
        TmemAccumulator { base: self.base.offset(0, FIRST) }
    }

    /// A column range for scale factors or other operands, `FIRST .. FIRST + COLUMNS`.
    #[inline(always)]
    pub const fn columns<const FIRST: u32, const COLUMNS: u32>(self) -> TmemAddr {
        const { assert!(FIRST + COLUMNS <= COLS, "column range outside the TMEM allocation") };
        self.base.offset(0, FIRST)
    }
}

/// An M = 128 accumulator of `COLUMNS` 32-bit columns ("layout D": row i ↔ lane i).
#[derive(Clone, Copy, Debug)]
pub struct TmemAccumulator<const COLUMNS: u32> {
    base: TmemAddr,
}

impl<const COLUMNS: u32> TmemAccumulator<COLUMNS> {
    /// The MMA destination address.
    #[inline(always)]
    pub const fn addr(self) -> TmemAddr {
        self.base
    }

    /// The same accumulator shape `COLUMNS · index` columns further on (double buffering).
    #[inline(always)]
    pub const fn buffer(self, index: u32) -> TmemAccumulator<COLUMNS> {
        TmemAccumulator { base: self.base.offset(0, COLUMNS * index) }
    }

    /// First accumulator row the calling warp may read: `32 · (warp % 4)`.
    #[inline(always)]
    pub fn warp_first_row() -> u32 {
        32 * (warp_id() % 4)
    }

    /// Loads the calling warp's rows, columns `column .. column + S::COLUMNS`, and waits, so the
    /// registers are valid on return. With `Tmem32x32b<N>` lane l of the warp receives row
    /// `warp_first_row() + l`, register j = column `column + j`.
    ///
    /// # Safety
    /// The whole warp calls this, converged; the MMA that wrote the columns has completed and was
    /// ordered before (commit → mbarrier wait → `fence::after_thread_sync`, see
    /// [`TmemAccumulator::acquire`]); `column + S::COLUMNS <= COLUMNS`.
    #[inline(always)]
    pub unsafe fn warp_rows<S: TmemCopy>(self, column: u32) -> S::Regs {
        let taddr = self.base.offset(Self::warp_first_row(), column);
        // SAFETY: own lane quarter (derived from the warp), columns inside the allocation and
        // ordered after the MMA (caller).
        unsafe { S::load_wait(taddr.0) }
    }

    /// Orders this thread's later TMEM reads after the synchronisation that observed the MMA's
    /// completion (call right after the mbarrier wait).
    #[inline(always)]
    pub fn acquire(self) {
        // SAFETY: a fence has no preconditions.
        unsafe { tcgen05::fence_after_thread_sync() };
    }

    /// Orders this thread's earlier TMEM reads before its next synchronisation (call before the
    /// arrive that hands the accumulator back to the MMA warp).
    #[inline(always)]
    pub fn release(self) {
        // SAFETY: a fence has no preconditions.
        unsafe { tcgen05::fence_before_thread_sync() };
    }
}
