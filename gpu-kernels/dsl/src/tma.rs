//! L1 TMA: tensor-map loads into [`SmemTile`]s completing on an [`Mbarrier`], stores and
//! reduce-adds from tiles, multicast into a cluster, and the bulk-group waits. Destination
//! first: `load_2d(&tile, map, x, y, &bar)`, `store_2d(map, x, y, &tile)`.
//!
//! The tensor map comes from the kernel parameter `#[grid_constant] map: &TensorMap`; its box
//! must equal the tile (the host builds the map from the same tile type, so the expect-tx count
//! of [`crate::pipeline::TmaLoad`] is what the copy delivers).

use crate::abi::TensorMap;
use crate::mbarrier::Mbarrier;
use crate::ptx::tma as raw;
use crate::tile::{SmemTile, SwizzleMode};

/// Loads the 2-D box at (`x`, `y`) (innermost first, elements) into `dst`, completing on `bar`.
///
/// # Safety
/// `map` describes a 2-D tensor whose box is `COLS × ROWS` of `T` with swizzle `S`; `bar` has
/// announced the tile's bytes in its current phase; `dst` is not read or written until that
/// phase completes. `x · size_of::<T>()` is a multiple of 16: a box starts on a 16-byte chunk
/// of its innermost dimension (another start is an illegal instruction on the H200, for every
/// load form here).
#[inline(always)]
pub unsafe fn load_2d<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    dst: &SmemTile<T, R, C, S>,
    map: &TensorMap,
    x: i32,
    y: i32,
    bar: &Mbarrier,
) {
    // SAFETY: forwarded to the caller; the tile is aligned for its swizzle by construction.
    unsafe { raw::load_2d(dst.addr(), map, x, y, bar.addr()) }
}

/// As [`load_2d`] with an L2 evict-first hint (data read once).
///
/// # Safety
/// As for [`load_2d`].
#[inline(always)]
pub unsafe fn load_2d_streaming<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    dst: &SmemTile<T, R, C, S>,
    map: &TensorMap,
    x: i32,
    y: i32,
    bar: &Mbarrier,
) {
    // SAFETY: building a policy has no preconditions; the load is forwarded to the caller.
    unsafe { raw::load_2d_cache_hint(dst.addr(), map, x, y, bar.addr(), raw::create_policy_evict_first()) }
}

/// Loads the box once and delivers it to `dst` and `bar` *at the same offsets* in every CTA of
/// the cluster whose rank bit is set in `cta_mask`.
///
/// # Safety
/// As for [`load_2d`] in every destination CTA: each armed its own barrier with the tile's
/// bytes, and all of them run the same smem plan.
#[inline(always)]
pub unsafe fn load_2d_multicast<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    dst: &SmemTile<T, R, C, S>,
    map: &TensorMap,
    x: i32,
    y: i32,
    bar: &Mbarrier,
    cta_mask: u16,
) {
    // SAFETY: forwarded to the caller.
    unsafe { raw::load_2d_multicast(dst.addr(), map, x, y, bar.addr(), cta_mask) }
}

/// Stores `src` to the 2-D box at (`x`, `y`). Complete with [`commit_group`] + [`wait_group`].
///
/// # Safety
/// `map`'s box matches the tile; `src` was written by generic stores only before
/// `sync::fence_proxy_async_shared` + a barrier, and is not overwritten before [`wait_group_read`].
#[inline(always)]
pub unsafe fn store_2d<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    map: &TensorMap,
    x: i32,
    y: i32,
    src: &SmemTile<T, R, C, S>,
) {
    // SAFETY: forwarded to the caller.
    unsafe { raw::store_2d(map, x, y, src.addr()) }
}

/// Adds `src` element-wise into the 2-D box at (`x`, `y`).
///
/// # Safety
/// As for [`store_2d`]; the element type supports add reductions.
#[inline(always)]
pub unsafe fn reduce_add_2d<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    map: &TensorMap,
    x: i32,
    y: i32,
    src: &SmemTile<T, R, C, S>,
) {
    // SAFETY: forwarded to the caller.
    unsafe { raw::reduce_add_2d(map, x, y, src.addr()) }
}

/// Prefetches the tensor map into the TMA descriptor cache.
#[inline(always)]
pub fn prefetch(map: &TensorMap) {
    // SAFETY: `map` is a live reference, hence a valid generic address; a prefetch has no effect
    // beyond caching.
    unsafe { raw::prefetch_tensormap(map) }
}

/// Asks L2 for the 4-D box of `map` at (`x`, `y`, `z`, `w`), ahead of a [`load_4d`] of it: the
/// load then reads L2 instead of waiting on memory. Nothing completes or is waited for.
///
/// # Safety
/// `map` describes a tensor in global memory (a prefetch of a map whose address is not one
/// may fault); `x` times the element size is a multiple of 16 bytes.
#[inline(always)]
pub unsafe fn prefetch_l2_4d(map: &TensorMap, x: i32, y: i32, z: i32, w: i32) {
    // SAFETY: forwarded to the caller; `map` is a live reference.
    unsafe { raw::prefetch_l2_4d(map, x, y, z, w) }
}

/// Closes the group of this thread's outstanding stores.
#[inline(always)]
pub fn commit_group() {
    // SAFETY: no preconditions.
    unsafe { raw::bulk_commit_group() }
}

/// Waits until at most `N` store groups are pending (their global writes done).
#[inline(always)]
pub fn wait_group<const N: u32>() {
    // SAFETY: no preconditions.
    unsafe { raw::bulk_wait_group::<N>() }
}

/// Waits until at most `N` store groups still read shared memory (their sources are reusable).
#[inline(always)]
pub fn wait_group_read<const N: u32>() {
    // SAFETY: no preconditions.
    unsafe { raw::bulk_wait_group_read::<N>() }
}

/// Orders this thread's generic global writes before later TMA reads of them.
#[inline(always)]
pub fn fence_proxy_async_global() {
    // SAFETY: a fence has no preconditions.
    unsafe { raw::fence_proxy_async_global() }
}

/// Where a load delivers its box: this CTA's tile (any `&SmemTile` converts), or the tile at
/// the same offset in every CTA of the cluster named in a mask ([`multicast`]).
#[derive(Clone, Copy, Debug)]
pub struct LoadTarget {
    addr: u32,
    cta_mask: Option<u16>,
}

impl LoadTarget {
    /// This CTA's shared memory at `addr` (128-byte aligned, as TMA requires).
    #[inline(always)]
    pub(crate) fn local(addr: u32) -> Self {
        LoadTarget { addr, cta_mask: None }
    }
}

impl<T: Copy, const R: usize, const C: usize, S: SwizzleMode> From<&SmemTile<T, R, C, S>> for LoadTarget {
    #[inline(always)]
    fn from(tile: &SmemTile<T, R, C, S>) -> Self {
        LoadTarget { addr: tile.addr(), cta_mask: None }
    }
}

/// `tile` in every CTA of the cluster whose rank bit is set in `cta_mask`: a load into it reads
/// L2 once and delivers the box (and its barrier's bytes) at the same offsets in each.
#[inline(always)]
pub fn multicast<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    tile: &SmemTile<T, R, C, S>,
    cta_mask: u16,
) -> LoadTarget {
    LoadTarget { addr: tile.addr(), cta_mask: Some(cta_mask) }
}

/// Loads the 3-D box at (`x`, `y`, `z`) into `dst` (a box of depth 1: `z` selects a batch),
/// completing on `bar`; with a [`multicast`] target, in every CTA it names.
///
/// # Safety
/// As for [`load_2d`], with a 3-D map whose box is `COLS × ROWS × 1` of the target tile's type.
/// A multicast target: as for [`load_2d_multicast`] (every destination CTA armed its own barrier
/// with the box's bytes, and all run the same smem plan).
#[inline(always)]
pub unsafe fn load_3d(dst: impl Into<LoadTarget>, map: &TensorMap, x: i32, y: i32, z: i32, bar: &Mbarrier) {
    let dst = dst.into();
    // SAFETY: forwarded to the caller; tiles are aligned for their swizzle by construction.
    unsafe {
        match dst.cta_mask {
            None => raw::load_3d(dst.addr, map, x, y, z, bar.addr()),
            Some(mask) => raw::load_3d_multicast(dst.addr, map, x, y, z, bar.addr(), mask),
        }
    }
}

/// Loads the 4-D box at (`x`, `y`, `z`, `w`) into `dst` (a box of depth 1 in `z`'s and `w`'s
/// dimensions is the usual shape: e.g. attention's (head_dim, head, row, sequence) maps, whose
/// box is one head's rows of one sequence), completing on `bar`.
///
/// # Safety
/// As for [`load_2d`], with a 4-D map whose box is `COLS × 1 × ROWS × 1` of the target tile's
/// type. A multicast target: as for [`load_2d_multicast`].
#[inline(always)]
pub unsafe fn load_4d(dst: impl Into<LoadTarget>, map: &TensorMap, x: i32, y: i32, z: i32, w: i32, bar: &Mbarrier) {
    let dst = dst.into();
    // SAFETY: forwarded to the caller; tiles are aligned for their swizzle by construction.
    unsafe {
        match dst.cta_mask {
            None => raw::load_4d(dst.addr, map, x, y, z, w, bar.addr()),
            Some(mask) => raw::load_4d_multicast(dst.addr, map, x, y, z, w, bar.addr(), mask),
        }
    }
}

/// Stores `src` to the 3-D box at (`x`, `y`, `z`) (depth-1 box; `z` selects a batch). Complete
/// with [`commit_group`] + [`wait_group`]; elements outside the tensor are not written, except
/// past an innermost extent that is not a multiple of 16 bytes (see the raw store's safety).
///
/// # Safety
/// As for [`store_2d`], with a 3-D map whose box is `COLS × ROWS × 1`.
#[inline(always)]
pub unsafe fn store_3d<T: Copy, const R: usize, const C: usize, S: SwizzleMode>(
    map: &TensorMap,
    x: i32,
    y: i32,
    z: i32,
    src: &SmemTile<T, R, C, S>,
) {
    // SAFETY: forwarded to the caller.
    unsafe { raw::store_3d(map, x, y, z, src.addr()) }
}
