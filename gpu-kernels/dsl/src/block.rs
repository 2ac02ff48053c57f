//! Block-scope collectives: reductions over every thread of a block of up to 1024 threads.
//!
//! A block reduction reduces each warp with [`warp::reduce`], passes one value per warp through
//! shared memory, and reduces those again in every warp, so every thread gets the result without
//! a third barrier. Its shared memory is a [`ReduceScratch`]: 32 slots (one per possible warp)
//! typed by the value, so a scratch can be neither too small nor read as another type.

use crate::reduce::{Max, Min, ReduceOp, Sum, Word32};
use crate::shared::{DynamicShared, SharedPtr, StaticShared};
use crate::sync::sync_threads;
use crate::thread::{block_size, lane_id, warp_id};
use crate::warp;

/// Warps in the largest block (1024 threads): the slots of a [`ReduceScratch`].
pub const MAX_WARPS: u32 = 32;

/// Shared-memory scratch of block reductions over `T`: [`MAX_WARPS`] slots, one per warp.
///
/// One scratch serves any number of reductions in sequence (each call ends with a barrier
/// after its last read of the slots); two reductions in flight at once need two scratches.
#[derive(Debug)]
pub struct ReduceScratch<T: Word32> {
    slots: SharedPtr<T>,
}

impl<T: Word32> ReduceScratch<T> {
    /// Bytes of shared memory a scratch occupies.
    pub const BYTES: u32 = MAX_WARPS * 4;

    /// A scratch in static shared memory (no launch-time size needed).
    ///
    /// # Safety
    /// As [`StaticShared::declare`]: call once per kernel, at its top and outside loops.
    #[inline(always)]
    pub unsafe fn declare() -> Self {
        // SAFETY: forwarded; 128 bytes at 16-byte alignment hold 32 four-byte values.
        ReduceScratch { slots: unsafe { StaticShared::<{ (MAX_WARPS * 4) as usize }, 16>::declare::<T>() } }
    }

    /// A scratch carved from the launch's dynamic shared memory.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        ReduceScratch { slots: smem.alloc::<T>(MAX_WARPS, 16) }
    }

    /// `Op` over `value` of every thread of the block, returned on every thread (bitwise the
    /// same everywhere). Two block barriers (`barrier.sync 0`).
    ///
    /// # Safety
    /// Every thread of the block calls it, in warp-uniform control flow, like any block barrier
    /// (a thread that skips it hangs the block); the block is whole warps (its size a multiple
    /// of 32, at most 1024); no other code uses barrier 0 between the call's two barriers.
    #[inline(always)]
    pub unsafe fn reduce<Op: ReduceOp<T>>(&self, value: T) -> T {
        // SAFETY: the caller runs all 32 lanes of every warp here.
        let partial = unsafe { warp::reduce::<Op, T>(value) };
        let lane = lane_id();
        if lane == 0 {
            // SAFETY: warp_id() < 32 for a block of at most 1024 threads; one writer per slot.
            unsafe { self.slots.add(warp_id()).as_mut_ptr().write(partial) };
        }
        // SAFETY: every thread of the block reaches it (the caller's contract).
        unsafe { sync_threads() };
        let warps = block_size().div_ceil(32);
        // SAFETY: slot `lane` < `warps` was written before the barrier above.
        let slot = if lane < warps { unsafe { self.slots.add(lane).as_mut_ptr().read() } } else { Op::IDENTITY };
        // SAFETY: as the first warp::reduce.
        let total = unsafe { warp::reduce::<Op, T>(slot) };
        // SAFETY: as above; after it no thread still reads the slots, so the next call may write.
        unsafe { sync_threads() };
        total
    }

    /// Sum over the block ([`Self::reduce`] with [`Sum`]).
    ///
    /// # Safety
    /// As [`Self::reduce`].
    #[inline(always)]
    pub unsafe fn sum(&self, value: T) -> T
    where
        Sum: ReduceOp<T>,
    {
        // SAFETY: forwarded.
        unsafe { self.reduce::<Sum>(value) }
    }

    /// Maximum over the block ([`Self::reduce`] with [`Max`]).
    ///
    /// # Safety
    /// As [`Self::reduce`].
    #[inline(always)]
    pub unsafe fn max(&self, value: T) -> T
    where
        Max: ReduceOp<T>,
    {
        // SAFETY: forwarded.
        unsafe { self.reduce::<Max>(value) }
    }

    /// Minimum over the block ([`Self::reduce`] with [`Min`]).
    ///
    /// # Safety
    /// As [`Self::reduce`].
    #[inline(always)]
    pub unsafe fn min(&self, value: T) -> T
    where
        Min: ReduceOp<T>,
    {
        // SAFETY: forwarded.
        unsafe { self.reduce::<Min>(value) }
    }
}
