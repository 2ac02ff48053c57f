//! What the host and `gemm_relu2_bf16` must agree on: the tile shape (the TMA boxes follow
//! from it), the launch shape and the `#[repr(C)]` parameter block. Plain `no_std` Rust with no
//! DSL: the device crate compiles it as a module and the launching binary compiles the very
//! same file (`#[path]`), so the two sides cannot drift.

/// Rows of D per CTA tile: two consumer warpgroups of [`A_BOX_ROWS`] rows.
pub const BLOCK_M: u32 = 128;
/// Columns of D per CTA tile (one `wgmma.m64n128k16` accumulator per consumer warpgroup).
pub const BLOCK_N: u32 = 128;
/// K per ring stage: one 128-byte swizzle span of bf16.
pub const BLOCK_K: u32 = 64;
/// Rows of A per TMA box: one consumer warpgroup's share of the tile.
pub const A_BOX_ROWS: u32 = 64;
/// Ring depth.
pub const STAGES: u32 = 4;
/// Threads per CTA: one producer warpgroup and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// bf16 bytes.
const ELEM_BYTES: u32 = 2;
/// Each full and empty barrier of the ring: one 8-byte mbarrier.
const RING_BARRIER_BYTES: u32 = 2 * STAGES * 8;
/// Dynamic shared memory: the operand ring (per stage A's two 64 × 64 boxes and B's 128 × 64
/// box, 32 KiB), its barriers, and slack to align the ring to the 1024-byte swizzle atom.
pub const SMEM_BYTES: u32 = STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * ELEM_BYTES + RING_BARRIER_BYTES + 1024;

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
