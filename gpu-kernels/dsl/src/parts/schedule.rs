//! L3 tile scheduling as a kernel's roles see it: a [`TileScheduler`] answers "which tile and
//! which K slices does worker `w` run as its `i`-th unit", the same answer for the producer and
//! every consumer of the worker (so they agree on the ring's order without talking), decoded
//! into the tile's coordinates. The policy (how many workers, which tiles are split over which
//! CTAs) is decided before the launch; a scheduler only follows it.
//!
//! [`GroupedStreamK`] is the persistent GEMMs' scheduler: `logic::schedule::stream_k` units
//! (data-parallel, stream-K or the hybrid) over a grouped rasterisation
//! (`logic::schedule::swizzled`) of the tiles of every batch stacked along M. A worker is a
//! CTA, or a cluster of CTAs stacked along M that take adjacent tile rows of each unit.
//!
//! [`ExpertTiles`] is the grouped (mixture-of-experts) GEMMs' scheduler: the same units over the
//! tiles of every expert, each told which expert's B it multiplies and whether it has rows at
//! all (`logic::schedule::grouped`); the kernel's roles skip the units without rows together.
//! [`MaskedBalanced`] is the masked layout's balanced scheduler: stream-K (hybrid) units over
//! only the tiles with rows, planned on the device from the experts' counts.

use crate::abi::GroupedParams;
use crate::global;
use crate::logic::schedule::grouped::{
    MaskedBalance, MaskedShape, contiguous_expert, masked_tile_has_rows, masked_tile_rows,
};
use crate::logic::schedule::stream_k::{StreamKScheduler, UnitRole};
use crate::logic::schedule::swizzled::Rasterization;
use crate::thread::grid_dim;
use crate::warp;

/// One scheduled piece of work: K slices `k_begin..k_end` of the output tile at (`m0`, `n0`)
/// of `batch`, multiplying by B's batch `b_batch`.
#[derive(Clone, Copy)]
pub struct TileUnit {
    /// Batch of the tile (of A and D).
    pub batch: i32,
    /// Batch of B (`batch` for a batched GEMM; the expert of a grouped one).
    pub b_batch: i32,
    /// The tile has no rows to compute (a grouped GEMM's padding or an expert's rows past its
    /// count): every role of the worker passes over the unit without loading or storing.
    pub skip: bool,
    /// First row of the tile.
    pub m0: i32,
    /// First column of the tile.
    pub n0: i32,
    /// First K slice; `k_begin < k_end`: a scheduler never hands out an empty run.
    pub k_begin: u32,
    /// One past the last K slice.
    pub k_end: u32,
    /// What the accumulator becomes: the whole tile, a partial to publish, or the tile after
    /// adding the contributors' partials.
    pub role: UnitRole,
    /// The workers that compute part of this tile (`first..=last`; the first finalises it).
    pub contributors: (u32, u32),
}

impl TileUnit {
    /// K slices in the unit (≥ 1).
    #[inline(always)]
    pub fn slices(&self) -> u32 {
        self.k_end - self.k_begin
    }
}

/// The unit sequence of each worker.
pub trait TileScheduler {
    /// Whether some units may come with [`TileUnit::skip`] set.
    const SKIPS: bool = false;
    /// The `index`-th unit of `worker`, or `None` when the worker is done.
    fn unit(&self, worker: u32, index: u32) -> Option<TileUnit>;

    /// As [`TileScheduler::unit`], for a caller whose 32 lanes of each warp call it together (a
    /// consumer warpgroup): a scheduler whose units derive from values read from memory returns
    /// them through `warp::uniform`, so the main loop's counts and wgmma descriptors stay on the
    /// uniform datapath. The default is `unit`.
    ///
    /// # Safety
    /// Every lane of the calling warp calls it together, with the same arguments.
    #[inline(always)]
    unsafe fn unit_uniform(&self, worker: u32, index: u32) -> Option<TileUnit> {
        self.unit(worker, index)
    }
}

/// Tile extents and how a worker's CTAs share a unit.
#[derive(Clone, Copy)]
pub struct TileGeometry {
    /// Rows per tile.
    pub block_m: u32,
    /// Columns per tile.
    pub block_n: u32,
    /// Rasterisation rows per batch (tile rows, or groups of `ctas_per_worker` tile rows).
    pub raster_rows: u32,
    /// CTAs per worker, stacked along M (1, or 2 for 2 × 1 clusters).
    pub ctas_per_worker: u32,
    /// This CTA's place in its worker (0 without clusters): it takes tile row
    /// `ctas_per_worker · row + rank` of each unit's rasterisation row.
    pub rank: u32,
}

/// Stream-K (or data-parallel, or hybrid) units over a grouped rasterisation.
#[derive(Clone, Copy)]
pub struct GroupedStreamK {
    /// Order of the tiles (batches stacked along M).
    pub raster: Rasterization,
    /// Which worker runs which K slices of which tile.
    pub schedule: StreamKScheduler,
    /// Decoding into coordinates.
    pub geometry: TileGeometry,
}

impl TileScheduler for GroupedStreamK {
    /// Decoded per call: a few divisions per tile, where a decoded unit carried across the
    /// main loop would hold registers through it. With several CTAs per worker, a tile row past
    /// the last (odd `tiles_m`) reads zeros and its stores are clipped.
    #[inline(always)]
    fn unit(&self, worker: u32, index: u32) -> Option<TileUnit> {
        let unit = self.schedule.unit(worker, index)?;
        let tile = self.raster.coord(unit.tile)?;
        let contributors = match unit.role {
            UnitRole::Finalize => self.schedule.contributors(unit.tile)?,
            _ => (worker, worker),
        };
        let g = self.geometry;
        let row = tile.m % g.raster_rows;
        let tile_row = g.ctas_per_worker * row + g.rank;
        let batch = (tile.m / g.raster_rows) as i32;
        Some(TileUnit {
            batch,
            b_batch: batch,
            skip: false,
            m0: (tile_row * g.block_m) as i32,
            n0: (tile.n * g.block_n) as i32,
            k_begin: unit.k_begin,
            k_end: unit.k_end,
            role: unit.role,
            contributors,
        })
    }
}

/// The units of a grouped GEMM in one layout (`MASKED`, fixed per entry so that neither role
/// carries the layout, nor, contiguous, A's batch): whole tiles round robin over the grid
/// (data-parallel: worker `w` takes tiles `w`, `w + grid`, …) of `raster`, the tile rows of
/// every expert stacked along M (contiguous: one batch of `M_total` rows; masked: a batch of
/// `capacity` rows per expert), each told its expert and whether it has rows from the device
/// (the row's expert index or the expert's valid-row count), every value mapped inside the
/// tensors or to a skip. Simpler than [`GroupedStreamK`] on purpose: the producer decodes a
/// unit within its 40 registers.
#[derive(Clone, Copy)]
pub struct ExpertTiles<const MASKED: bool> {
    raster: Rasterization,
    geometry: TileGeometry,
    k_slices: u32,
    groups: *const i32,
    experts: u32,
    capacity: u32,
}

impl<const MASKED: bool> ExpertTiles<MASKED> {
    /// The grouped units of `raster` (one worker per CTA of the grid, `k_slices` K slices per
    /// tile) under `params`.
    ///
    /// # Safety
    /// `params.groups` addresses one readable i32 per row of A (contiguous: the raster's rows ×
    /// the tile height, a multiple of it, in one batch) or per expert (masked: the raster's
    /// batches of `geometry.raster_rows` rows are the experts, `params.capacity` rows each), for
    /// the whole launch; `k_slices ≥ 1`; the raster has fewer than `2^32 − gridDim.x` tiles.
    #[inline(always)]
    pub unsafe fn new(raster: Rasterization, geometry: TileGeometry, k_slices: u32, params: &GroupedParams) -> Self {
        ExpertTiles {
            raster,
            geometry,
            k_slices,
            groups: params.groups as *const i32,
            experts: params.experts,
            capacity: params.capacity,
        }
    }
}

impl<const MASKED: bool> TileScheduler for ExpertTiles<MASKED> {
    const SKIPS: bool = true;

    #[inline(always)]
    fn unit(&self, worker: u32, index: u32) -> Option<TileUnit> {
        let tile = self.raster.coord(worker + index * grid_dim().x)?;
        let g = self.geometry;
        let mut unit = TileUnit {
            batch: (tile.m / g.raster_rows) as i32,
            b_batch: 0,
            skip: false,
            m0: ((tile.m % g.raster_rows) * g.block_m) as i32,
            n0: (tile.n * g.block_n) as i32,
            k_begin: 0,
            k_end: self.k_slices,
            role: UnitRole::Whole,
            contributors: (worker, worker),
        };
        if MASKED {
            unit.b_batch = unit.batch;
            // SAFETY: the unit's batch is an expert (the raster's batches are the experts).
            let count = unsafe { global::read_word(self.groups.add(unit.batch as usize)) };
            unit.skip = !masked_tile_has_rows(unit.m0 as u32, count, self.capacity);
        } else {
            // One batch: A's and D's batch coordinate is 0 (a constant for the roles).
            unit.batch = 0;
            // SAFETY: `m0` is a row of A (a tile's first row; A's rows are whole tiles), and
            // the constructor's contract gives one index per row.
            let first = unsafe { global::read_word(self.groups.add(unit.m0 as usize)) };
            match contiguous_expert(first, self.experts) {
                Some(expert) => unit.b_batch = expert as i32,
                None => unit.skip = true,
            }
        }
        Some(unit)
    }
}

/// The masked grouped GEMMs' balanced units: `logic::schedule::grouped::MaskedBalance`, built
/// by every role of every CTA from the experts' valid-row counts (read from the device, the
/// same for all), one worker per CTA. Only tiles with rows are handed out (no unit is skipped),
/// the full waves data-parallel and the last partial wave streamed over K, so the launch needs
/// the stream-K partial slots and flags for its grid. It holds nothing but the launch's
/// parameters: every unit plans again from the counts (one cached load per expert, and the
/// hybrid's tail rule, a few hundred instructions a tile), so no register is held across a main
/// loop for it.
#[derive(Clone, Copy)]
pub struct MaskedBalanced {
    shape: MaskedShape,
    geometry: TileGeometry,
    counts: *const i32,
    capacity: u32,
}

impl MaskedBalanced {
    /// The balanced units of a masked launch of `tiles_n` tile columns of `k_slices` K slices
    /// under `params` (`experts` batches of `capacity` rows), on a grid of one-CTA workers.
    ///
    /// # Safety
    /// `params.groups` addresses one readable i32 per expert, unchanged for the whole launch;
    /// `geometry.ctas_per_worker == 1`; the experts' capacity tiles (`experts · ⌈capacity /
    /// block_m⌉ · tiles_n`) and `gridDim.x · k_slices` are below 2^32.
    #[inline(always)]
    pub unsafe fn new(geometry: TileGeometry, tiles_n: u32, k_slices: u32, params: &GroupedParams) -> Self {
        let shape = MaskedShape { experts: params.experts, tiles_n, k_slices, workers: grid_dim().x };
        MaskedBalanced { shape, geometry, counts: params.groups as *const i32, capacity: params.capacity }
    }
}

/// Tile rows with rows of `expert` (its device count clamped to the capacity).
///
/// # Safety
/// `counts` addresses a readable i32 for `expert`.
#[inline(always)]
unsafe fn expert_tile_rows(counts: *const i32, expert: u32, capacity: u32, block_m: u32) -> u32 {
    // SAFETY: the caller's contract.
    masked_tile_rows(unsafe { global::read_word(counts.add(expert as usize)) }, capacity, block_m)
}

impl TileScheduler for MaskedBalanced {
    /// The counts are loads, so every field of a unit is a vector register to ptxas; the
    /// consumers take the main loop's through a warp reduction (the lanes agree on all).
    #[inline(always)]
    unsafe fn unit_uniform(&self, worker: u32, index: u32) -> Option<TileUnit> {
        let unit = self.unit(worker, index);
        // SAFETY: the caller's contract: the warp's lanes call together and hold the same unit.
        let uniform = |value: u32| unsafe { warp::uniform(value) };
        if uniform(unit.is_some() as u32) == 0 {
            return None;
        }
        let u = unit?;
        // The main loop's count and the tile's coordinates; the role and the contributors are
        // read once after it (taking them through the datapath too cost the FP8 body a spill).
        Some(TileUnit {
            batch: uniform(u.batch as u32) as i32,
            b_batch: uniform(u.b_batch as u32) as i32,
            m0: uniform(u.m0 as u32) as i32,
            n0: uniform(u.n0 as u32) as i32,
            k_begin: uniform(u.k_begin),
            k_end: uniform(u.k_end),
            ..u
        })
    }

    #[inline(always)]
    fn unit(&self, worker: u32, index: u32) -> Option<TileUnit> {
        let g = self.geometry;
        // SAFETY: the plan asks only for experts below `experts` (the constructor's contract
        // gives each a count).
        let rows_of = |expert| unsafe { expert_tile_rows(self.counts, expert, self.capacity, g.block_m) };
        // Planned again per unit, from the counts (cached loads) and the launch's parameters:
        // a consumer holds no plan across its main loop, where its registers are all taken.
        let plan = MaskedBalance::new(&self.shape, rows_of);
        let tile = plan.unit(&self.shape, worker, index, rows_of)?;
        let unit = tile.unit;
        Some(TileUnit {
            batch: tile.expert as i32,
            b_batch: tile.expert as i32,
            skip: false,
            m0: (tile.tile_row * g.block_m) as i32,
            n0: (tile.tile_col * g.block_n) as i32,
            k_begin: unit.k_begin,
            k_end: unit.k_end,
            role: unit.role,
            contributors: tile.contributors,
        })
    }
}
