//! L2 shared-memory tiles: `SmemTile<T, ROWS, COLS, S>` is a ROWS × COLS row-major tile of `T`
//! stored under swizzle mode `S`, aligned as the swizzle requires, carved from the dynamic
//! shared memory. It knows its TMA transaction bytes and builds its wgmma descriptor, so a
//! kernel never writes a byte count or a descriptor bit by hand.
//!
//! A swizzled tile's rows are exactly one swizzle span long (`COLS · size_of::<T>() = span`),
//! the layout a TMA box with that inner extent writes and the canonical K-major wgmma layout;
//! wider K is several tiles side by side. `SmemTileMn` is the MN-major operand: K rows of M/N,
//! one span of M/N per block, blocks side by side (the canonical MN-major layout).
//! `SmemVector` is a plain run of values a 1-row TMA box writes (per-row scales riding a ring
//! slot with its operands).
//!
//! A tile the host must agree with (a TMA box) is best named from a shared description,
//! `logic::tile_spec::TileSpec`: [`TileOf`] and [`RingOf`] give its device types, and the host
//! builds the tensor map and the launch's shared-memory size from the same description.

use core::marker::PhantomData;

use crate::logic::swizzle::Swizzle;
use crate::logic::tile_spec::{Tile, TileElement, TileSpec, elem};
use crate::logic::wgmma_desc::WgmmaDesc;
use crate::pipeline::TmaLoad;
use crate::ptx::smem;
use crate::reduce::Word32;
use crate::shared::{DynamicShared, SharedPtr};

/// Swizzle modes as types (in the logic crate, so a host-compiled `TileSpec` names them too).
pub use crate::logic::swizzle::{NoSwizzle, Swizzle32B, Swizzle64B, Swizzle128B, SwizzleMode};

/// A ROWS × COLS tile of `T` in shared memory under swizzle `S`.
#[derive(Debug)]
pub struct SmemTile<T, const ROWS: usize, const COLS: usize, S: SwizzleMode> {
    ptr: SharedPtr<T>,
    _layout: PhantomData<S>,
}

impl<T, const ROWS: usize, const COLS: usize, S: SwizzleMode> Clone for SmemTile<T, ROWS, COLS, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize, const COLS: usize, S: SwizzleMode> Copy for SmemTile<T, ROWS, COLS, S> {}

impl<T: Copy, const ROWS: usize, const COLS: usize, S: SwizzleMode> SmemTile<T, ROWS, COLS, S> {
    /// Bytes of one row.
    pub const ROW_BYTES: u32 = (COLS * core::mem::size_of::<T>()) as u32;
    /// Bytes of the tile.
    pub const BYTES: u32 = ROWS as u32 * Self::ROW_BYTES;
    /// Required alignment of the tile's address.
    pub const ALIGN: u32 = S::SWIZZLE.alignment();
    const VALID: () = {
        assert!(
            matches!(S::SWIZZLE, Swizzle::None) || Self::ROW_BYTES == S::SWIZZLE.span_bytes(),
            "a swizzled tile's rows are exactly one swizzle span"
        );
        assert!(Self::ROW_BYTES.is_multiple_of(16), "rows are whole 16-byte chunks (TMA box rule)");
        assert!(ROWS.is_multiple_of(8), "rows come in 8-row core-matrix groups");
    };

    /// Carves the tile, aligned for its swizzle, from the dynamic shared memory.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        let () = Self::VALID;
        SmemTile { ptr: smem.alloc::<T>((ROWS * COLS) as u32, Self::ALIGN), _layout: PhantomData }
    }

    /// Shared-window address of the tile.
    #[inline(always)]
    pub fn addr(&self) -> u32 {
        self.ptr.addr()
    }

    /// Byte offset of element (`row`, `col`) from the tile start, swizzle applied. Exact
    /// because the tile starts on a swizzle-atom boundary.
    #[inline(always)]
    pub fn byte_offset(row: u32, col: u32) -> u32 {
        S::SWIZZLE.apply(row * Self::ROW_BYTES + col * core::mem::size_of::<T>() as u32)
    }

    /// Reads element (`row`, `col`) with an ordinary shared load.
    ///
    /// # Safety
    /// `row < ROWS`, `col < COLS`; the element was written and is visible to this thread (TMA
    /// data after the barrier wait, generic stores after a block barrier).
    #[inline(always)]
    pub unsafe fn read(&self, row: u32, col: u32) -> T {
        let p = SharedPtr::<u8>::as_mut_ptr(
            // SAFETY: inside the tile, aligned for T since rows and chunks are.
            unsafe { SharedPtr::from_addr(self.addr() + Self::byte_offset(row, col)) },
        ) as *const T;
        // SAFETY: see the function contract.
        unsafe { p.read_volatile() }
    }

    /// Writes element (`row`, `col`) with an ordinary shared store (before an async-proxy reader
    /// uses it: `sync::fence_proxy_async_shared` and a barrier).
    ///
    /// # Safety
    /// `row < ROWS`, `col < COLS`; no other thread or async operation accesses the element.
    #[inline(always)]
    pub unsafe fn write(&self, row: u32, col: u32, value: T) {
        // SAFETY: inside the tile.
        let p = unsafe { SharedPtr::<T>::from_addr(self.addr() + Self::byte_offset(row, col)) }.as_mut_ptr();
        // SAFETY: see the function contract.
        unsafe { p.write_volatile(value) }
    }

    /// Rows `index·PART .. (index + 1)·PART` as a tile of their own (a TMA box of `PART` rows
    /// lands there in the layout the whole tile's wgmma descriptor reads): `PART` divides `ROWS`
    /// and is whole swizzle atoms, so the part starts on an atom boundary.
    ///
    /// # Panics
    /// Never at run time; `index ≥ ROWS / PART` is the caller's bug and yields an address past
    /// the tile (debug builds assert).
    #[inline(always)]
    pub fn rows<const PART: usize>(&self, index: u32) -> SmemTile<T, PART, COLS, S> {
        const {
            assert!(PART > 0 && ROWS.is_multiple_of(PART), "whole parts of the tile");
            assert!((PART * COLS * core::mem::size_of::<T>()).is_multiple_of(1024), "parts start on swizzle atoms");
        };
        debug_assert!((index as usize) < ROWS / PART);
        let addr = self.addr() + index * (PART * COLS * core::mem::size_of::<T>()) as u32;
        // SAFETY: inside the tile for index < ROWS / PART, aligned to 1024 bytes (see the asserts).
        SmemTile { ptr: unsafe { SharedPtr::from_addr(addr) }, _layout: PhantomData }
    }

    /// The wgmma descriptor of this tile as a K-major operand (rows = M or N, columns = K).
    /// Without swizzle the tile must be one core matrix wide (8 rows of 16 bytes per group).
    #[inline(always)]
    pub fn desc_k_major(&self) -> WgmmaDesc {
        const {
            assert!(
                !matches!(S::SWIZZLE, Swizzle::None) || Self::ROW_BYTES == 16,
                "unswizzled K-major tiles are 16 bytes wide"
            )
        };
        WgmmaDesc::k_major(self.addr(), S::SWIZZLE, Self::BYTES, 8 * Self::ROW_BYTES)
    }
}

impl<T: Copy, const ROWS: usize, const COLS: usize, S: SwizzleMode> TmaLoad for SmemTile<T, ROWS, COLS, S> {
    const BYTES: u32 = Self::BYTES;
}

/// `STAGES` tiles back to back, one per pipeline stage, selected by a runtime stage index
/// without an indexed array (which would live in local memory).
#[derive(Debug)]
pub struct SmemTileRing<T, const ROWS: usize, const COLS: usize, S: SwizzleMode, const STAGES: usize> {
    first: SmemTile<T, ROWS, COLS, S>,
}

impl<T, const ROWS: usize, const COLS: usize, S: SwizzleMode, const STAGES: usize> Clone
    for SmemTileRing<T, ROWS, COLS, S, STAGES>
{
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const ROWS: usize, const COLS: usize, S: SwizzleMode, const STAGES: usize> Copy
    for SmemTileRing<T, ROWS, COLS, S, STAGES>
{
}

impl<T: Copy, const ROWS: usize, const COLS: usize, S: SwizzleMode, const STAGES: usize>
    SmemTileRing<T, ROWS, COLS, S, STAGES>
{
    /// Carves the `STAGES` tiles. Each tile is a whole number of swizzle atoms (8-row groups of
    /// span-long rows), so every stage stays aligned.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        let () = SmemTile::<T, ROWS, COLS, S>::VALID;
        let ptr = smem.alloc::<T>((STAGES * ROWS * COLS) as u32, SmemTile::<T, ROWS, COLS, S>::ALIGN);
        SmemTileRing { first: SmemTile { ptr, _layout: PhantomData } }
    }

    /// The tile of stage `stage` (`< STAGES`).
    #[inline(always)]
    pub fn stage(&self, stage: u32) -> SmemTile<T, ROWS, COLS, S> {
        let addr = self.first.addr() + stage * SmemTile::<T, ROWS, COLS, S>::BYTES;
        // SAFETY: stage < STAGES keeps the address inside the carved ring, aligned (see alloc).
        SmemTile { ptr: unsafe { SharedPtr::from_addr(addr) }, _layout: PhantomData }
    }

    /// The `N` stages from `first` (`first + N ≤ STAGES`) as a ring of their own: one buffer
    /// of a ring carved as several buffers of `N` tiles each.
    #[inline(always)]
    pub fn window<const N: usize>(&self, first: u32) -> SmemTileRing<T, ROWS, COLS, S, N> {
        SmemTileRing { first: self.stage(first) }
    }
}

/// An MN-major wgmma operand (`imm-trans = 1`, 16-bit types): `BLOCKS` tiles of `K` rows × `COLS`
/// elements back to back, block j holding M/N indices `[j·COLS, (j+1)·COLS)` with one K index per
/// row (what `BLOCKS` TMA boxes of `COLS × K` at x = j·COLS write). // (K, BLOCKS · COLS)
#[derive(Debug)]
pub struct SmemTileMn<T, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode> {
    first: SmemTile<T, K, COLS, S>,
}

impl<T, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode> Clone
    for SmemTileMn<T, K, COLS, BLOCKS, S>
{
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode> Copy
    for SmemTileMn<T, K, COLS, BLOCKS, S>
{
}

impl<T: Copy, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode>
    SmemTileMn<T, K, COLS, BLOCKS, S>
{
    /// Extent along M or N.
    pub const MN: usize = COLS * BLOCKS;
    /// Bytes of all blocks.
    pub const BYTES: u32 = BLOCKS as u32 * SmemTile::<T, K, COLS, S>::BYTES;

    /// Carves the blocks, aligned for the swizzle (each block is whole atoms, as in a ring).
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        const { assert!(!matches!(S::SWIZZLE, Swizzle::None), "MN-major tiles here are swizzled") };
        let () = SmemTile::<T, K, COLS, S>::VALID;
        let ptr = smem.alloc::<T>((BLOCKS * K * COLS) as u32, SmemTile::<T, K, COLS, S>::ALIGN);
        SmemTileMn { first: SmemTile { ptr, _layout: PhantomData } }
    }

    /// Shared-window address of block 0.
    #[inline(always)]
    pub fn addr(&self) -> u32 {
        self.first.addr()
    }

    /// Block `j` (`< BLOCKS`): the tile a TMA box of `COLS × K` at x = j·COLS fills.
    #[inline(always)]
    pub fn block(&self, j: u32) -> SmemTile<T, K, COLS, S> {
        let addr = self.addr() + j * SmemTile::<T, K, COLS, S>::BYTES;
        // SAFETY: j < BLOCKS keeps the address inside the carved blocks, aligned (see alloc).
        SmemTile { ptr: unsafe { SharedPtr::from_addr(addr) }, _layout: PhantomData }
    }

    /// The wgmma descriptor of this operand as MN-major: blocks one block apart along M/N,
    /// 8-row groups `8 · ROW_BYTES` apart along K.
    #[inline(always)]
    pub fn desc_mn_major(&self) -> WgmmaDesc {
        let block = SmemTile::<T, K, COLS, S>::BYTES;
        WgmmaDesc::mn_major(self.addr(), S::SWIZZLE, block, 8 * SmemTile::<T, K, COLS, S>::ROW_BYTES)
    }
}

impl<T: Copy, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode> TmaLoad
    for SmemTileMn<T, K, COLS, BLOCKS, S>
{
    const BYTES: u32 = Self::BYTES;
}

/// `STAGES` MN-major operands back to back, one per pipeline stage (a ring of
/// [`SmemTileMn`]: e.g. attention's V tiles, read MN-major by `O += P·V`), selected by a
/// runtime stage index. // (STAGES, K, BLOCKS · COLS)
#[derive(Debug)]
pub struct SmemTileMnRing<
    T,
    const K: usize,
    const COLS: usize,
    const BLOCKS: usize,
    S: SwizzleMode,
    const STAGES: usize,
> {
    first: SmemTileMn<T, K, COLS, BLOCKS, S>,
}

impl<T, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode, const STAGES: usize> Clone
    for SmemTileMnRing<T, K, COLS, BLOCKS, S, STAGES>
{
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode, const STAGES: usize> Copy
    for SmemTileMnRing<T, K, COLS, BLOCKS, S, STAGES>
{
}

impl<T: Copy, const K: usize, const COLS: usize, const BLOCKS: usize, S: SwizzleMode, const STAGES: usize>
    SmemTileMnRing<T, K, COLS, BLOCKS, S, STAGES>
{
    /// Carves the `STAGES` operands; each is whole swizzle atoms, so every stage stays aligned.
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        const { assert!(!matches!(S::SWIZZLE, Swizzle::None), "MN-major tiles here are swizzled") };
        let () = SmemTile::<T, K, COLS, S>::VALID;
        let ptr = smem.alloc::<T>((STAGES * BLOCKS * K * COLS) as u32, SmemTile::<T, K, COLS, S>::ALIGN);
        SmemTileMnRing { first: SmemTileMn { first: SmemTile { ptr, _layout: PhantomData } } }
    }

    /// The operand of stage `stage` (`< STAGES`).
    #[inline(always)]
    pub fn stage(&self, stage: u32) -> SmemTileMn<T, K, COLS, BLOCKS, S> {
        let addr = self.first.addr() + stage * SmemTileMn::<T, K, COLS, BLOCKS, S>::BYTES;
        // SAFETY: stage < STAGES keeps the address inside the carved ring, aligned (see alloc).
        SmemTileMn { first: SmemTile { ptr: unsafe { SharedPtr::from_addr(addr) }, _layout: PhantomData } }
    }
}

/// `N` values of `T` in shared memory, contiguous: what a TMA box of `N` elements along the
/// innermost dimension writes (e.g. a block-scaled GEMM's per-row scales of one K block).
#[derive(Debug)]
pub struct SmemVector<T, const N: usize> {
    ptr: SharedPtr<T>,
}

impl<T, const N: usize> Clone for SmemVector<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for SmemVector<T, N> {}

impl<T: Copy, const N: usize> SmemVector<T, N> {
    /// Bytes of the vector.
    pub const BYTES: u32 = (N * core::mem::size_of::<T>()) as u32;
    /// TMA writes whole 128-byte-aligned boxes; stages of a ring stay aligned when each vector
    /// is a multiple of 128 bytes.
    const VALID: () = assert!(Self::BYTES.is_multiple_of(128), "a TMA vector is whole 128-byte lines");

    /// Shared-window address of element 0.
    #[inline(always)]
    pub fn addr(&self) -> u32 {
        self.ptr.addr()
    }
}

impl<T: Word32, const N: usize> SmemVector<T, N> {
    /// Reads element `i` (one shared load from the window address).
    ///
    /// # Safety
    /// `i < N`; the vector's bytes were written (a TMA load into it completed and was awaited,
    /// or a barrier ordered ordinary stores before this read) and are not being rewritten.
    #[inline(always)]
    pub unsafe fn read(&self, i: u32) -> T {
        const { assert!(core::mem::size_of::<T>() == 4, "a 32-bit element") };
        // SAFETY: inside the carved vector (i < N, 4-byte elements of an aligned vector) and
        // initialised (the caller's contract).
        T::from_word(unsafe { smem::ld_shared_b32(self.addr() + i * 4) })
    }
}

impl<T: Copy, const N: usize> TmaLoad for SmemVector<T, N> {
    const BYTES: u32 = Self::BYTES;
}

impl<T: Copy, const N: usize> From<&SmemVector<T, N>> for crate::tma::LoadTarget {
    #[inline(always)]
    fn from(vector: &SmemVector<T, N>) -> Self {
        crate::tma::LoadTarget::local(vector.addr())
    }
}

/// `STAGES` [`SmemVector`]s back to back, one per pipeline stage.
#[derive(Debug)]
pub struct SmemVectorRing<T, const N: usize, const STAGES: usize> {
    first: SmemVector<T, N>,
}

impl<T, const N: usize, const STAGES: usize> Clone for SmemVectorRing<T, N, STAGES> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize, const STAGES: usize> Copy for SmemVectorRing<T, N, STAGES> {}

impl<T: Copy, const N: usize, const STAGES: usize> SmemVectorRing<T, N, STAGES> {
    /// Bytes of the ring.
    pub const BYTES: u32 = STAGES as u32 * SmemVector::<T, N>::BYTES;

    /// Carves the `STAGES` vectors, 128-byte aligned (TMA's shared-memory alignment).
    #[inline(always)]
    pub fn alloc(smem: &mut DynamicShared) -> Self {
        let () = SmemVector::<T, N>::VALID;
        SmemVectorRing { first: SmemVector { ptr: smem.alloc::<T>((STAGES * N) as u32, 128) } }
    }

    /// The vector of stage `stage` (`< STAGES`).
    #[inline(always)]
    pub fn stage(&self, stage: u32) -> SmemVector<T, N> {
        let addr = self.first.addr() + stage * SmemVector::<T, N>::BYTES;
        // SAFETY: stage < STAGES keeps the address inside the carved ring, aligned (see alloc).
        SmemVector { ptr: unsafe { SharedPtr::from_addr(addr) } }
    }
}

/// The device type of a [`TileSpec`](crate::logic::tile_spec::TileSpec) element marker; its
/// size is the marker's (checked where the impls are declared).
pub trait DeviceElement: TileElement {
    /// What the kernel reads and writes.
    type Value: Copy;
}

macro_rules! device_elements {
    ($($marker:ident => $value:ty),* $(,)?) => {$(
        impl DeviceElement for elem::$marker {
            type Value = $value;
        }
        const _: () = assert!(core::mem::size_of::<$value>() as u32 == <elem::$marker as TileElement>::BYTES);
    )*};
}

device_elements! { Bf16 => crate::num::Bf16, F16 => crate::num::F16, F32 => f32, U8 => u8 }

/// The shared-memory types a tile description stands for: its tile and its rings. Implemented
/// for every [`TileSpec`], so a kernel names `TileOf<ASpec>` and the host builds its tensor map
/// from the same `ASpec`: the box, swizzle and element cannot disagree.
pub trait SpecTile: Tile {
    /// The tile.
    type Tile: TmaLoad + Copy;
    /// `STAGES` tiles back to back.
    type Ring<const STAGES: usize>: Copy;
}

impl<E: DeviceElement, const ROWS: usize, const COLS: usize, S: SwizzleMode> SpecTile for TileSpec<E, ROWS, COLS, S> {
    type Tile = SmemTile<E::Value, ROWS, COLS, S>;
    type Ring<const STAGES: usize> = SmemTileRing<E::Value, ROWS, COLS, S, STAGES>;
}

/// The device tile a description stands for: `TileOf<TileSpec<elem::Bf16, 64, 64, Swizzle128B>>`
/// is `SmemTile<Bf16, 64, 64, Swizzle128B>`.
pub type TileOf<T> = <T as SpecTile>::Tile;
/// A ring of `STAGES` tiles of a description: `SmemTileRing<…, STAGES>`.
pub type RingOf<T, const STAGES: usize> = <T as SpecTile>::Ring<STAGES>;
