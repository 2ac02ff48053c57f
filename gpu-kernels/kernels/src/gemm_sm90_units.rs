//! Which output tile and K range each worker of the sm_90 GEMM runs next: the schedule's
//! units (`logic::schedule::stream_k`) over the grouped rasterisation, decoded into tile
//! coordinates. A worker is a CTA, or with 2 × 1 clusters a cluster, whose two CTAs take the
//! two vertically adjacent tiles of each unit.

use warpforge_dsl::abi::GemmParams;
use warpforge_dsl::abi::gemm_sm90::{A_BOX_ROWS, BLOCK_M};
use warpforge_dsl::logic::schedule::stream_k::{StreamKScheduler, UnitRole};
use warpforge_dsl::logic::schedule::swizzled::Rasterization;
use warpforge_dsl::thread::block_idx_x_in_place;

/// One scheduled piece of work: K slices `k_begin..k_end` of an output tile of a batch.
pub struct WorkUnit {
    pub batch: i32,
    pub m0: i32,
    pub n0: i32,
    /// `k_begin < k_end`: the schedule never hands out an empty run.
    pub k_begin: u32,
    pub k_end: u32,
    pub role: UnitRole,
    /// The CTAs that compute part of this tile (`first..=last`; the first finalises it).
    pub contributors: (u32, u32),
}

/// The tile geometry a launch decodes units with: tile columns, and this CTA's rank in its
/// 2 × 1 cluster (0 without clusters).
#[derive(Clone, Copy)]
pub struct Tiling {
    pub block_n: u32,
    pub rank: u32,
}

/// Rows of the rasterisation per batch: tile rows, or pairs of them with clusters.
#[inline(always)]
pub fn raster_rows<const CLUSTER: bool>(p: &GemmParams) -> u32 {
    if CLUSTER { p.tiles_m.div_ceil(2) } else { p.tiles_m }
}

/// This CTA's worker index, read in place (see `thread::block_idx_x_in_place`): its block, or
/// its cluster.
#[inline(always)]
pub fn unit_worker<const CLUSTER: bool>() -> u32 {
    if CLUSTER { block_idx_x_in_place() / 2 } else { block_idx_x_in_place() }
}

/// The `index`-th unit of `worker`, decoded: the rasterisation's M axis runs over the
/// [`raster_rows`] of each batch, batch after batch; tiles have 128 rows (cooperative) or 64
/// (ping-pong) and `tiling.block_n` columns. With clusters, rank r takes tile row 2·row + r of
/// its batch (past the last tile row when `tiles_m` is odd: its boxes read zeros and its stores
/// are clipped).
#[inline(always)]
pub fn work_unit<const PINGPONG: bool, const CLUSTER: bool>(
    p: &GemmParams,
    raster: &Rasterization,
    schedule: &StreamKScheduler,
    tiling: Tiling,
    worker: u32,
    index: u32,
) -> Option<WorkUnit> {
    let unit = schedule.unit(worker, index)?;
    let tile = raster.coord(unit.tile)?;
    let contributors = match unit.role {
        UnitRole::Finalize => schedule.contributors(unit.tile)?,
        _ => (worker, worker),
    };
    let rows = raster_rows::<CLUSTER>(p);
    let row = tile.m % rows;
    let tile_row = if CLUSTER { 2 * row + tiling.rank } else { row };
    Some(WorkUnit {
        batch: (tile.m / rows) as i32,
        m0: (tile_row * if PINGPONG { A_BOX_ROWS } else { BLOCK_M }) as i32,
        n0: (tile.n * tiling.block_n) as i32,
        k_begin: unit.k_begin,
        k_end: unit.k_end,
        role: unit.role,
        contributors,
    })
}
