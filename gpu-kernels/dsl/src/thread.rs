//! Where the calling thread is: thread, block, grid and cluster indices; warp, lane and
//! warpgroup ids. All safe: they only read special registers.

use crate::ptx::sreg;

/// Threads per warp.
pub const WARP_SIZE: u32 = 32;
/// Threads per warpgroup (four consecutive warps; the unit that issues wgmma).
pub const WARPGROUP_SIZE: u32 = 128;

/// A 3-component launch dimension or index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    /// x component.
    pub x: u32,
    /// y component.
    pub y: u32,
    /// z component.
    pub z: u32,
}

macro_rules! dim3_reader {
    ($($(#[$doc:meta])* $name:ident => $x:ident, $y:ident, $z:ident;)*) => {$(
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> Dim3 {
            // SAFETY: special-register reads have no preconditions on the device.
            unsafe { Dim3 { x: sreg::$x(), y: sreg::$y(), z: sreg::$z() } }
        }
    )*};
}

dim3_reader! {
    /// `threadIdx`.
    thread_idx => tid_x, tid_y, tid_z;
    /// `blockDim`.
    block_dim => ntid_x, ntid_y, ntid_z;
    /// `blockIdx`.
    block_idx => ctaid_x, ctaid_y, ctaid_z;
    /// `gridDim`.
    grid_dim => nctaid_x, nctaid_y, nctaid_z;
}

/// Linear thread index inside the block.
#[inline(always)]
pub fn thread_rank() -> u32 {
    let t = thread_idx();
    let d = block_dim();
    (t.z * d.y + t.y) * d.x + t.x
}

/// [`thread_rank`], computed where it is called: values derived from it stay inside the loop
/// that uses them instead of being hoisted out and kept live across it. For code that runs
/// once per loop trip under high register pressure (a GEMM epilogue's addresses, recomputed
/// per tile for a few integer instructions instead of occupying registers through the main
/// loop).
#[inline(always)]
pub fn thread_rank_in_place() -> u32 {
    // SAFETY: special-register reads have no preconditions on the device.
    let x = unsafe { sreg::tid_x_in_place() };
    let t = thread_idx();
    let d = block_dim();
    (t.z * d.y + t.y) * d.x + x
}

/// `blockIdx.x`, read where it is called: what a persistent kernel derives from it per work
/// unit (schedule decoding, divisions included) is recomputed per unit instead of being hoisted
/// out of the unit loop and kept live, or spilled, across the main loop.
#[inline(always)]
pub fn block_idx_x_in_place() -> u32 {
    // SAFETY: special-register reads have no preconditions on the device.
    unsafe { sreg::ctaid_x_in_place() }
}

/// Linear block index inside the grid.
#[inline(always)]
pub fn block_rank() -> u32 {
    let b = block_idx();
    let g = grid_dim();
    (b.z * g.y + b.y) * g.x + b.x
}

/// Threads in the block.
#[inline(always)]
pub fn block_size() -> u32 {
    let d = block_dim();
    d.x * d.y * d.z
}

/// Blocks in the grid.
#[inline(always)]
pub fn grid_size() -> u32 {
    let g = grid_dim();
    g.x * g.y * g.z
}

/// Global x index: `blockIdx.x * blockDim.x + threadIdx.x`, widened so it cannot overflow.
#[inline(always)]
pub fn global_x() -> usize {
    // SAFETY: special-register reads have no preconditions on the device.
    unsafe { sreg::ctaid_x() as usize * sreg::ntid_x() as usize + sreg::tid_x() as usize }
}

/// Total threads along x in the grid (the stride of a grid-stride loop).
#[inline(always)]
pub fn grid_stride_x() -> usize {
    // SAFETY: special-register reads have no preconditions on the device.
    unsafe { sreg::nctaid_x() as usize * sreg::ntid_x() as usize }
}

/// Lane of the calling thread in its warp.
#[inline(always)]
pub fn lane_id() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::laneid() }
}

/// Warp index inside the block (from the linear thread rank, not `%warpid`, which can change).
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_rank() / WARP_SIZE
}

/// Warpgroup index inside the block.
#[inline(always)]
pub fn warpgroup_id() -> u32 {
    thread_rank() / WARPGROUP_SIZE
}

/// Rank of the calling block inside its cluster (0 without a cluster launch).
#[inline(always)]
pub fn cluster_rank() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::cluster_ctarank() }
}

/// Blocks per cluster (1 without a cluster launch).
#[inline(always)]
pub fn cluster_size() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::cluster_nctarank() }
}

/// Cluster index in the grid along x.
#[inline(always)]
pub fn cluster_idx_x() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::clusterid_x() }
}

/// Clusters in the grid along x.
#[inline(always)]
pub fn cluster_count_x() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::nclusterid_x() }
}

/// SM the calling thread runs on (diagnostics: it may change under preemption).
#[inline(always)]
pub fn sm_id() -> u32 {
    // SAFETY: special-register read.
    unsafe { sreg::smid() }
}
