//! Tensor maps from shared tile descriptions (`logic::tile_spec`): the box, swizzle and element
//! type of a map come from the same [`Tile`] the kernel's shared-memory tile is named from.
//!
//! The element type is checked by the compiler: a description of bf16 tiles builds a
//! `TensorMapBuilder<bf16>`, which encodes only over bf16 buffers.
//!
//! ```compile_fail,E0277
//! use warpforge_host::TensorMapBuilder;
//! use warpforge_host::logic::swizzle::Swizzle128B;
//! use warpforge_host::logic::tile_spec::{TileSpec, elem};
//! type ATile = TileSpec<elem::Bf16, 64, 64, Swizzle128B>;
//! fn encode(a: &cudarc::driver::CudaSlice<f32>, stream: &cudarc::driver::CudaStream) {
//!     let _ = TensorMapBuilder::for_tile::<ATile>(&[4096, 4096]).encode(a, stream);
//! }
//! ```
//!
//! Nor can a builder be named with another element than its tile's:
//!
//! ```compile_fail,E0271
//! use warpforge_host::TensorMapBuilder;
//! use warpforge_host::logic::swizzle::Swizzle128B;
//! use warpforge_host::logic::tile_spec::{TileSpec, elem};
//! let _ = TensorMapBuilder::<f32>::for_tile::<TileSpec<elem::Bf16, 64, 64, Swizzle128B>>(&[64, 64]);
//! ```
//!
//! A box or swizzle set by hand that disagrees with the description is refused by
//! [`TensorMapBuilder::validate`] (and so by `encode`) with [`TensorMapError::TileMismatch`].

use warpforge_logic::tile_spec::{Tile, TileElement, TileLayout, elem};

use super::{MAX_RANK, TensorMapBuilder, TensorMapError, TmaElement};

/// The host type of a tile description's element marker (its size checked equal to the
/// marker's where the impls are declared).
pub trait HostElement: TileElement {
    /// The buffer element type.
    type Host: TmaElement;
}

macro_rules! host_elements {
    ($($marker:ident => $host:ty),* $(,)?) => {$(
        impl HostElement for elem::$marker {
            type Host = $host;
        }
        const _: () = assert!(size_of::<$host>() as u32 == <elem::$marker as TileElement>::BYTES);
    )*};
}

host_elements! { Bf16 => half::bf16, F16 => half::f16, F32 => f32, U8 => u8 }

/// The box a tile's map reads in `rank` dimensions: `[cols, rows, 1, …]`.
fn tile_box(tile: &TileLayout, rank: usize) -> [u32; MAX_RANK] {
    let mut dims = [1; MAX_RANK];
    dims[0] = tile.cols;
    if rank >= 2 {
        dims[1] = tile.rows;
    }
    dims
}

impl<T: TmaElement> TensorMapBuilder<T> {
    /// A map over a tensor of extents `global_dims` (innermost first, packed) read in boxes of
    /// tile `S`: box `[S::COLS, S::ROWS, 1, …]` and `S`'s swizzle. The element type follows from
    /// `S`, so the map encodes only over buffers of the tile's element.
    pub fn for_tile<S: Tile>(global_dims: &[u64]) -> Self
    where
        S::Elem: HostElement<Host = T>,
    {
        let rank = global_dims.len().min(MAX_RANK);
        Self::new(global_dims, &tile_box(&S::LAYOUT, rank)[..rank]).swizzle(S::LAYOUT.swizzle).expect_tile::<S>()
    }

    /// Records that the map fills tiles `S`: [`Self::validate`] then refuses a box or swizzle
    /// that disagrees with `S` (a map whose element type is not `S`'s does not compile).
    pub fn expect_tile<S: Tile>(mut self) -> Self
    where
        S::Elem: HostElement<Host = T>,
    {
        self.tile = Some(S::LAYOUT);
        self
    }

    /// The expected tile against the box and swizzle (after the list lengths are checked).
    pub(super) fn check_tile(&self) -> Result<(), TensorMapError> {
        let Some(tile) = self.tile else { return Ok(()) };
        let rank = self.rank;
        if self.box_dims[..rank] != tile_box(&tile, rank)[..rank] || self.swizzle != tile.swizzle || rank < 2 {
            return Err(TensorMapError::TileMismatch {
                tile,
                box_dims: self.box_dims[..rank].to_vec(),
                swizzle: self.swizzle,
            });
        }
        Ok(())
    }
}
