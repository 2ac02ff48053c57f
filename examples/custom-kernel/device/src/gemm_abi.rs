//! What the host and `gemm_relu2_bf16` must agree on: the tiles TMA fills (the host's boxes and
//! the device's shared-memory tiles both come from [`ATile`] and [`BTile`]), the shared-memory
//! plan the launch is sized from, the launch shape and the `#[repr(C)]` parameter block. Plain
//! `no_std` Rust on warpforge's logic crate (`crate::logic`: the DSL's re-export on the device,
//! the runtime's on the host): the device crate compiles it as a module and the launching
//! binary compiles the very same file (`#[path]`), so the two sides cannot drift.

use crate::logic::swizzle::Swizzle128B;
use crate::logic::tile_spec::{SmemPlan, Tile, TileSpec, elem};

/// One consumer warpgroup's rows of A per ring stage: one TMA box. // (BLOCK_M / 2, BLOCK_K)
pub type ATile = TileSpec<elem::Bf16, 64, 64, Swizzle128B>;
/// B's rows per ring stage: one TMA box. // (BLOCK_N, BLOCK_K)
pub type BTile = TileSpec<elem::Bf16, 128, 64, Swizzle128B>;

/// Rows of D per CTA tile: two consumer warpgroups of one [`ATile`] each.
pub const BLOCK_M: u32 = 2 * ATile::ROWS;
/// Columns of D per CTA tile (one `wgmma.m64n128k16` accumulator per consumer warpgroup).
pub const BLOCK_N: u32 = BTile::ROWS;
/// K per ring stage: one 128-byte swizzle span of bf16.
pub const BLOCK_K: u32 = ATile::COLS;
/// Ring depth.
pub const STAGES: u32 = 4;
/// Threads per CTA: one producer warpgroup and two consumer warpgroups.
pub const THREADS: u32 = 384;

const _: () = assert!(BTile::COLS == BLOCK_K, "A and B slices span the same K");

/// Dynamic shared memory, in the device's carve-up order: A's top and bottom rings, B's ring,
/// the ring's full and empty barriers.
pub const SMEM: SmemPlan =
    SmemPlan::new().ring::<ATile>(STAGES).ring::<ATile>(STAGES).ring::<BTile>(STAGES).pipeline(STAGES);

/// The kernel's last parameter, after the A and B tensor maps.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GemmRelu2Params {
    /// Device address of D (bf16, M × N, row-major).
    pub d: u64,
    /// Rows of A and D.
    pub m: u32,
    /// Columns of D, rows of B.
    pub n: u32,
    /// Columns of A and B.
    pub k: u32,
    /// Row pitch of D, elements (≥ n).
    pub ldd: u32,
}

// 24 bytes, no padding: every byte the host copies is a field the kernel reads.
const _: () = assert!(size_of::<GemmRelu2Params>() == 24 && align_of::<GemmRelu2Params>() == 8);
