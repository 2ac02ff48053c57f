//! The GEMM body's tile schedule on the host: which schedule a launch runs (`GemmSchedule`,
//! from `logic::schedule::heuristic`) and the `TilePlan` the kernel follows (the stream-K
//! buffers those schedules need are `workspace`'s).

use warpforge_abi::TilePlan;
use warpforge_host::{Error, Result};
use warpforge_logic::schedule::heuristic::{
    STREAM_K_MAX_SPLITS, Scheduler, TileCost, choose_scheduler, pure_stream_k_grid, tail_stream_k_grid,
};
use warpforge_logic::schedule::stream_k::{StreamKMode, StreamKScheduler};
use warpforge_logic::schedule::swizzled::{Raster, Rasterization};

/// The tile schedule of one launch: its mode, grid and band width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GemmSchedule {
    pub(crate) mode: StreamKMode,
    pub(crate) grid: u32,
    pub(crate) raster_group: u32,
}

impl GemmSchedule {
    /// `logic::schedule::heuristic` for `tiles_m × tiles_n` tiles (batches stacked along M) of
    /// `k_slices` K slices each on `capacity` resident CTAs: data-parallel when the waves are
    /// full enough (grid = tiles when they fit in one wave), the hybrid over every resident CTA
    /// when there are full waves, and pure stream-K over as many CTAs per tile (at most
    /// `STREAM_K_MAX_SPLITS`) as the fix-up cost model finds worth it (`pure_stream_k_grid`;
    /// none: data-parallel). Bands always run along M (the kernel's rasterisation).
    pub(crate) fn choose(tiles_m: u32, tiles_n: u32, k_slices: u32, capacity: u32) -> Self {
        Self::choose_with(tiles_m, tiles_n, k_slices, capacity, true)
    }

    /// As [`GemmSchedule::choose`], but pure stream-K only over even splits (every tile's K
    /// loop cut into the same ranges, `tail_stream_k_grid`): then the CTAs of the tiles of one
    /// column of B start together at the same K offsets and read each B block from L2 close
    /// in time, where ranges that straddle tiles set them off by up to a CTA's whole run, so a
    /// B of more than L2 is read from DRAM once per tile row. For problems of a few tile rows
    /// whose B is the traffic (the FP8 GEMM at M of a few hundred).
    pub(crate) fn choose_even(tiles_m: u32, tiles_n: u32, k_slices: u32, capacity: u32) -> Self {
        Self::choose_with(tiles_m, tiles_n, k_slices, capacity, false)
    }

    fn choose_with(tiles_m: u32, tiles_n: u32, k_slices: u32, capacity: u32, straddle: bool) -> Self {
        let capacity = capacity.max(1);
        let tiles = tiles_m as u64 * tiles_n as u64;
        let raster_group = raster_group(tiles_m, tiles_n);
        let mode = match choose_scheduler(tiles_m, tiles_n, k_slices, capacity, TileCost::Uniform) {
            Scheduler::StreamK(mode) => mode,
            Scheduler::Static | Scheduler::Swizzled { .. } | Scheduler::Dynamic { .. } => StreamKMode::DataParallel,
        };
        let (mode, grid) = match mode {
            StreamKMode::DataParallel => (mode, tiles.min(capacity as u64) as u32),
            StreamKMode::Pure => {
                // Fewer tiles than CTAs, so `tiles` fits u32.
                let grid = if straddle { pure_stream_k_grid } else { tail_stream_k_grid };
                let grid = grid(tiles as u32, k_slices, capacity, STREAM_K_MAX_SPLITS);
                if grid as u64 == tiles { (StreamKMode::DataParallel, grid) } else { (mode, grid) }
            }
            StreamKMode::Hybrid => (mode, capacity),
        };
        GemmSchedule { mode, grid, raster_group }
    }

    /// At most `ways` CTAs per tile ([`crate::KSplit::Ways`]): pure stream-K over
    /// `min(tiles · ways, capacity, tiles · k_slices)` CTAs when that exceeds the tiles (each
    /// CTA then has at least one K slice), data-parallel otherwise.
    pub(crate) fn split(tiles_m: u32, tiles_n: u32, k_slices: u32, capacity: u32, ways: u32) -> Self {
        let tiles = tiles_m as u64 * tiles_n as u64;
        let capacity = capacity.max(1) as u64;
        let grid = (tiles * ways.max(1) as u64).min(capacity).min(tiles * k_slices.max(1) as u64);
        if grid <= tiles {
            return Self::data_parallel(tiles_m, tiles_n, capacity as u32, 1);
        }
        // `grid` ≤ capacity fits u32.
        GemmSchedule { mode: StreamKMode::Pure, grid: grid as u32, raster_group: raster_group(tiles_m, tiles_n) }
    }

    /// 2 × 1 clusters: whole tile pairs (`pair_rows` rows of pairs) round robin over at most
    /// `clusters` clusters of two CTAs, in bands of the same height in tile rows as the
    /// cooperative schedule's.
    pub(crate) fn pairs(pair_rows: u32, tiles_n: u32, clusters: u32) -> Self {
        let pairs = pair_rows as u64 * tiles_n as u64;
        let grid = 2 * pairs.min(clusters.max(1) as u64) as u32;
        GemmSchedule {
            mode: StreamKMode::DataParallel,
            grid,
            raster_group: raster_group(pair_rows, tiles_n).div_ceil(2),
        }
    }

    /// Whole tiles round robin over at most `capacity` CTAs, in bands of the same height as
    /// the cooperative schedule's (`band_scale` tile rows per cooperative tile row).
    pub(super) fn data_parallel(tiles_m: u32, tiles_n: u32, capacity: u32, band_scale: u32) -> Self {
        let tiles = tiles_m as u64 * tiles_n as u64;
        let raster_group = (raster_group(tiles_m, tiles_n) * band_scale).min(tiles_m.max(1));
        GemmSchedule { mode: StreamKMode::DataParallel, grid: tiles.min(capacity.max(1) as u64) as u32, raster_group }
    }
}

/// The kernel's schedule for `rows × tiles_n` rasterisation positions (`raster_rows` per batch)
/// of `k_slices` K slices each, as `schedule` chose it: the tile order and each worker's units,
/// planned here once so the kernel derives no policy of its own.
pub(crate) fn tile_plan(
    rows: u32,
    tiles_n: u32,
    raster_rows: u32,
    k_slices: u32,
    schedule: &GemmSchedule,
    ctas_per_worker: u32,
) -> Result<TilePlan> {
    let raster = Rasterization::try_new(rows, tiles_n, schedule.raster_group, Raster::AlongM)
        .ok_or_else(|| Error::InvalidArgument(format!("{rows} × {tiles_n} tiles; at most 2^32 - 1")))?;
    let workers = schedule.grid / ctas_per_worker;
    let units = StreamKScheduler::try_new(raster.tile_count(), k_slices, workers, schedule.mode).ok_or_else(|| {
        Error::InvalidArgument(format!("{} tiles × {k_slices} K slices: too many to split", raster.tile_count()))
    })?;
    Ok(TilePlan { raster, units, raster_rows })
}

/// Band width (in tile rows) of the grouped schedule: bands of 8 tile rows keep one band's A
/// rows and a sweep of B columns in L2 while it is swept; narrower grids use the whole height.
fn raster_group(tiles_m: u32, _tiles_n: u32) -> u32 {
    tiles_m.clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::{GemmSchedule, StreamKMode, StreamKScheduler};

    const H200_SMS: u32 = 132;

    fn schedule(m: u32, n: u32, k: u32) -> GemmSchedule {
        GemmSchedule::choose(m.div_ceil(128), n.div_ceil(256), k.div_ceil(64), H200_SMS)
    }

    #[test]
    fn full_waves_stay_data_parallel_and_partial_waves_use_stream_k() {
        // 4096³: 512 tiles, 4 waves at 97 %.
        let square = GemmSchedule { mode: StreamKMode::DataParallel, grid: 132, raster_group: 8 };
        assert_eq!(schedule(4096, 4096, 4096), square);
        // One wave at 97 %: 128 CTAs, one tile each.
        assert_eq!(schedule(1024, 4096, 4096).grid, 128);
        // M = 128: 16 tiles, less than a wave: 4 CTAs share each tile's K loop evenly.
        let small_m = GemmSchedule { mode: StreamKMode::Pure, grid: 64, raster_group: 1 };
        assert_eq!(schedule(128, 4096, 4096), small_m);
        // 1152 × 8192: 288 tiles, the third wave 18 % full: hybrid.
        assert_eq!(schedule(1152, 8192, 4096).mode, StreamKMode::Hybrid);
        // 344 tiles: two full waves and 80 tiles, which only split unevenly: data-parallel.
        assert_eq!(schedule(1024, 11008, 4096).mode, StreamKMode::DataParallel);
        // 4096² with K = 14336: 116 tail tiles, the same (a straddling tail measured 15 % slower).
        assert_eq!(schedule(4096, 4096, 14336).mode, StreamKMode::DataParallel);
        // M = 1024, N = 14336: 448 tiles, the 52 left over split two ways.
        assert_eq!(schedule(1024, 14336, 4096).mode, StreamKMode::Hybrid);
        // 544 tiles: four full waves and 16 tiles, split four ways.
        assert_eq!(schedule(2176, 8192, 4096).mode, StreamKMode::Hybrid);
        // Too little K to split: data-parallel whatever the waves.
        assert_eq!(schedule(1152, 8192, 128).mode, StreamKMode::DataParallel);
        // Less than a wave but a short K loop: the fix-up would cost more than splitting saves.
        let short_k = GemmSchedule { mode: StreamKMode::DataParallel, grid: 16, raster_group: 1 };
        assert_eq!(schedule(128, 4096, 1024), short_k);
        // K = 2048: two CTAs per tile.
        assert_eq!(schedule(128, 4096, 2048).grid, 32);
    }

    #[test]
    fn every_choice_is_buildable() {
        for tm in [1u32, 2, 7, 9, 17, 33, 130, 131, 133, 264, 1000] {
            for tn in [1u32, 3, 16, 43, 56] {
                for k in [1u32, 3, 4, 64, 224] {
                    let s = GemmSchedule::choose(tm, tn, k, H200_SMS);
                    assert!(s.grid >= 1 && s.grid <= H200_SMS);
                    assert!((1..=8).contains(&s.raster_group));
                    let built = StreamKScheduler::try_new(tm * tn, k, s.grid, s.mode);
                    assert!(built.is_some(), "{tm}×{tn}, k {k}: {s:?}");
                }
            }
        }
    }
}
