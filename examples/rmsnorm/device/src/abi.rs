//! What the host and the kernels agree on. Plain `no_std` Rust on warpforge's logic crate
//! (`crate::logic`: the DSL's re-export on the device, the runtime's on the host): the device
//! crate compiles it as a module and the launching binary compiles the very same file
//! (`#[path]`), so the two sides cannot drift.

use crate::logic::swizzle::Swizzle128B;
use crate::logic::tile_spec::{SmemPlan, Tile, TileSpec, elem};

/// bf16 per 16-byte vector: RMSNorm rows are whole vectors.
pub const RMSNORM_VECTOR: u32 = 8;
/// Vectors of its row each RMSNorm thread holds in registers (the kernel's `Regs4`).
pub const RMSNORM_VECTORS_PER_THREAD: u32 = 4;
/// Most threads of an RMSNorm block.
pub const RMSNORM_MAX_THREADS: u32 = 1024;
/// Longest RMSNorm row: every thread of the largest block holds its vectors.
pub const RMSNORM_MAX_COLS: u32 = RMSNORM_MAX_THREADS * RMSNORM_VECTORS_PER_THREAD * RMSNORM_VECTOR;

/// The GEMM's A per ring stage: its consumer warpgroup's 64 rows, one TMA box. // (BLOCK_M, BLOCK_K)
pub type GemmATile = TileSpec<elem::Bf16, 64, 64, Swizzle128B>;
/// The GEMM's B per ring stage: one TMA box. // (BLOCK_N, BLOCK_K)
pub type GemmBTile = TileSpec<elem::Bf16, 128, 64, Swizzle128B>;
/// Rows of D per CTA: one `wgmma.m64n128k16` accumulator.
pub const GEMM_BLOCK_M: u32 = GemmATile::ROWS;
/// Columns of D per CTA.
pub const GEMM_BLOCK_N: u32 = GemmBTile::ROWS;
/// K per ring stage: one 128-byte swizzle span of bf16.
pub const GEMM_BLOCK_K: u32 = GemmATile::COLS;
/// Ring depth.
pub const GEMM_STAGES: u32 = 4;
/// Threads per CTA: a producer warpgroup and a consumer warpgroup.
pub const GEMM_THREADS: u32 = 256;

const _: () = assert!(GemmBTile::COLS == GEMM_BLOCK_K, "A and B slices span the same K");

/// The GEMM's dynamic shared memory, in the device's carve-up order: A's ring, B's ring, the
/// ring's barriers.
pub const GEMM_SMEM: SmemPlan =
    SmemPlan::new().ring::<GemmATile>(GEMM_STAGES).ring::<GemmBTile>(GEMM_STAGES).pipeline(GEMM_STAGES);

/// The GEMM's last parameter, after the A and B tensor maps.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GemmParams {
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
const _: () = assert!(size_of::<GemmParams>() == 24 && align_of::<GemmParams>() == 8);
