//! Tile descriptions both halves compile: one [`TileSpec`] names a TMA tile's rows, columns,
//! element and swizzle, and everything that must agree with it is derived from it — the
//! device's shared-memory tile type (`warpforge_dsl::tile::TileOf`), the host's tensor-map box
//! and swizzle (`warpforge_host::TensorMapBuilder::for_tile`), and the launch's dynamic
//! shared-memory size ([`SmemPlan`]). Nothing is matched by hand, so nothing can drift.
//!
//! ```
//! use warpforge_logic::swizzle::Swizzle128B;
//! use warpforge_logic::tile_spec::{SmemPlan, Tile, TileSpec, elem};
//!
//! type ATile = TileSpec<elem::Bf16, 64, 64, Swizzle128B>; // (BLOCK_M / 2, BLOCK_K)
//! const STAGES: u32 = 4;
//! const SMEM: SmemPlan = SmemPlan::new().ring::<ATile>(STAGES).pipeline(STAGES);
//! assert_eq!(ATile::BYTES, 64 * 64 * 2);
//! assert_eq!(ATile::BOX, [64, 64]); // TMA order: columns, then rows
//! assert_eq!(SMEM.bytes(), 4 * 8192 + 2 * 4 * 8);
//! ```
//!
//! A description that breaks a tile rule (a swizzled row that is not one swizzle span, rows
//! not in 8-row groups, a box extent over 256) fails to compile where its sizes are used:
//!
//! ```compile_fail,E0080
//! use warpforge_logic::swizzle::Swizzle128B;
//! use warpforge_logic::tile_spec::{Tile, TileSpec, elem};
//! // 32 bf16 are 64 bytes, not the 128-byte span.
//! const BYTES: u32 = <TileSpec<elem::Bf16, 64, 32, Swizzle128B> as Tile>::BYTES;
//! ```

use core::marker::PhantomData;

use crate::swizzle::{CHUNK_BYTES, Swizzle, SwizzleMode};

/// Largest TMA box extent in one dimension, in elements (the driver's rule).
pub const MAX_BOX_DIM: u32 = 256;
/// Rows of a tile come in 8-row core-matrix groups (the swizzle atom's height).
pub const ROW_GROUP: u32 = 8;
/// Bytes of one mbarrier.
pub const MBARRIER_BYTES: u32 = 8;
/// The alignment the dynamic shared-memory window is guaranteed to start on. The builder
/// declares it `.align 1024`; the plan assumes only CUDA's documented 16 bytes, so a launch
/// sized by [`SmemPlan::launch_bytes`] fits wherever the window lands.
pub const WINDOW_BASE_ALIGN: u32 = 16;

/// An element type a tile holds, named the same on both sides; the device and the host each
/// map it to their own Rust type (`num::Bf16`, `half::bf16`) and check the sizes agree.
pub trait TileElement {
    /// Bytes of one element.
    const BYTES: u32;
}

/// The element types of [`TileSpec`]s.
pub mod elem {
    macro_rules! elements {
        ($($(#[$doc:meta])* $name:ident = $bytes:literal;)*) => {$(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug)]
            pub struct $name;
            impl super::TileElement for $name {
                const BYTES: u32 = $bytes;
            }
        )*};
    }

    elements! {
        /// bfloat16.
        Bf16 = 2;
        /// IEEE half.
        F16 = 2;
        /// IEEE single.
        F32 = 4;
        /// A byte (`u8`, and FP8 values, which TMA moves as bytes).
        U8 = 1;
    }
}

/// A tile's layout as plain values: what [`Tile`] derives its sizes from and what host code
/// prints or compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileLayout {
    /// Rows (the TMA box's outer extent).
    pub rows: u32,
    /// Columns (the TMA box's inner, contiguous extent).
    pub cols: u32,
    /// Bytes of one element.
    pub elem_bytes: u32,
    /// The shared-memory swizzle.
    pub swizzle: Swizzle,
}

/// A tile rule a [`TileLayout`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileError {
    /// A dimension is 0 or above [`MAX_BOX_DIM`] (the TMA box limit).
    BoxDim,
    /// A row is not a whole number of 16-byte chunks (the TMA inner-box rule).
    RowNotChunks,
    /// A swizzled row is not exactly one swizzle span.
    RowNotSpan,
    /// Rows are not whole 8-row groups.
    RowsNotGrouped,
}

impl TileError {
    /// What the rule says.
    pub const fn message(self) -> &'static str {
        match self {
            TileError::BoxDim => "tile rows and columns are 1..=256 (the TMA box limit)",
            TileError::RowNotChunks => "a tile row is whole 16-byte chunks (the TMA inner-box rule)",
            TileError::RowNotSpan => "a swizzled tile's rows are exactly one swizzle span",
            TileError::RowsNotGrouped => "tile rows come in 8-row core-matrix groups",
        }
    }
}

impl TileLayout {
    /// Bytes of one row.
    pub const fn row_bytes(&self) -> u32 {
        self.cols * self.elem_bytes
    }

    /// Bytes of the tile (one TMA box: the transaction bytes its load delivers).
    pub const fn bytes(&self) -> u32 {
        self.rows * self.row_bytes()
    }

    /// Required alignment of the tile's shared-memory address.
    pub const fn align(&self) -> u32 {
        self.swizzle.alignment()
    }

    /// The first rule the layout breaks: the device tile's rules and the TMA box's, so a layout
    /// that passes is one both `SmemTile` and the tensor-map encoder accept.
    pub const fn check(&self) -> Result<(), TileError> {
        if self.rows == 0 || self.rows > MAX_BOX_DIM || self.cols == 0 || self.cols > MAX_BOX_DIM {
            return Err(TileError::BoxDim);
        }
        if !self.row_bytes().is_multiple_of(CHUNK_BYTES) {
            return Err(TileError::RowNotChunks);
        }
        if !matches!(self.swizzle, Swizzle::None) && self.row_bytes() != self.swizzle.span_bytes() {
            return Err(TileError::RowNotSpan);
        }
        if !self.rows.is_multiple_of(ROW_GROUP) {
            return Err(TileError::RowsNotGrouped);
        }
        Ok(())
    }

    /// The layout itself, or a compile error (in a `const`) naming the broken rule.
    pub const fn checked(self) -> Self {
        match self.check() {
            Ok(()) => self,
            Err(e) => panic!("{}", e.message()),
        }
    }
}

/// What both sides read off a tile description. Implemented by [`TileSpec`]; every size is a
/// constant, and using one of a layout that breaks a rule is a compile error.
pub trait Tile {
    /// The element type.
    type Elem: TileElement;
    /// The swizzle mode as a type (what the device tile type takes).
    type Swizzle: SwizzleMode;
    /// The layout, checked.
    const LAYOUT: TileLayout;
    /// Rows.
    const ROWS: u32 = Self::LAYOUT.rows;
    /// Columns.
    const COLS: u32 = Self::LAYOUT.cols;
    /// Bytes of the tile: the transaction bytes of its TMA load.
    const BYTES: u32 = Self::LAYOUT.bytes();
    /// Required alignment of its shared-memory address.
    const ALIGN: u32 = Self::LAYOUT.align();
    /// The TMA box, innermost first: `[cols, rows]` (outer dimensions of the map take 1).
    const BOX: [u32; 2] = [Self::LAYOUT.cols, Self::LAYOUT.rows];
}

/// A `ROWS × COLS` row-major tile of `E` under swizzle `S`: one TMA box and the shared-memory
/// tile it fills. A type, not a value, so the device can name its tile type from it.
pub struct TileSpec<E, const ROWS: usize, const COLS: usize, S>(PhantomData<(E, S)>);

impl<E: TileElement, const ROWS: usize, const COLS: usize, S: SwizzleMode> Tile for TileSpec<E, ROWS, COLS, S> {
    type Elem = E;
    type Swizzle = S;
    const LAYOUT: TileLayout = {
        assert!(ROWS <= u32::MAX as usize && COLS <= u32::MAX as usize, "tile extents fit u32");
        TileLayout { rows: ROWS as u32, cols: COLS as u32, elem_bytes: E::BYTES, swizzle: S::SWIZZLE }.checked()
    };
}

/// A kernel's dynamic shared memory as the device carves it: regions in order, each aligned,
/// as `warpforge_dsl::shared::DynamicShared` bumps through the window. Built in a `const` next
/// to the tile descriptions; the host reads [`SmemPlan::launch_bytes`] for the launch, so the
/// byte count is never summed by hand.
///
/// The device must carve the same regions in the same order (tiles and rings with
/// `TileOf::alloc`/`RingOf::alloc`, a `Pipeline` with its `alloc`); if it carves more, the
/// device allocator traps at launch rather than overrun the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemPlan {
    /// End of the last region, from a base aligned to `align`.
    end: u32,
    /// Largest alignment of any region.
    align: u32,
}

impl Default for SmemPlan {
    fn default() -> Self {
        Self::new()
    }
}

impl SmemPlan {
    /// An empty plan.
    pub const fn new() -> Self {
        SmemPlan { end: 0, align: WINDOW_BASE_ALIGN }
    }

    /// Appends `bytes` aligned to `align` (a power of two). Overflow is a compile error in a
    /// `const`.
    pub const fn region(self, bytes: u32, align: u32) -> Self {
        assert!(align.is_power_of_two(), "alignments are powers of two");
        let start = self.end.next_multiple_of(align);
        SmemPlan { end: start + bytes, align: if align > self.align { align } else { self.align } }
    }

    /// Appends one tile of `T`.
    pub const fn tile<T: Tile>(self) -> Self {
        self.region(T::BYTES, T::ALIGN)
    }

    /// Appends a ring of `stages` tiles of `T` back to back (`SmemTileRing`).
    pub const fn ring<T: Tile>(self, stages: u32) -> Self {
        self.region(stages * T::BYTES, T::ALIGN)
    }

    /// Appends `count` mbarriers.
    pub const fn mbarriers(self, count: u32) -> Self {
        self.region(count * MBARRIER_BYTES, MBARRIER_BYTES)
    }

    /// Appends the barriers of a `stages`-deep pipeline (a full and an empty barrier per stage).
    pub const fn pipeline(self, stages: u32) -> Self {
        self.mbarriers(2 * stages)
    }

    /// Bytes the regions span from a window base aligned to [`Self::align`].
    pub const fn bytes(&self) -> u32 {
        self.end
    }

    /// The largest alignment any region needs.
    pub const fn align(&self) -> u32 {
        self.align
    }

    /// The dynamic shared memory to launch with: [`Self::bytes`] plus the worst-case padding
    /// before the first aligned region when the window starts only [`WINDOW_BASE_ALIGN`]-aligned.
    /// Carving the plan from any such base stays inside this many bytes (a bump allocator's end
    /// only grows with its start).
    pub const fn launch_bytes(&self) -> u32 {
        self.end + (self.align - WINDOW_BASE_ALIGN)
    }
}

#[cfg(test)]
mod tests;
