//! Grouped (mixture-of-experts) GEMM tiles: which expert's weight a tile multiplies and whether
//! the tile has any rows to compute, for the two layouts a MoE layer hands its experts.
//!
//! - [`GroupedLayout::Contiguous`]: the tokens routed to every expert back to back in one
//!   `M_total × K` A, each expert's segment padded to a multiple of the tile height, with one
//!   i32 per row naming its expert (`-1` for padding rows). A tile takes the expert of its first
//!   row; a tile whose first row is padding, or names no expert, is skipped.
//! - [`GroupedLayout::Masked`]: a fixed capacity of rows per expert (`[experts, capacity, K]`),
//!   with the number of valid rows of each expert on the device (so a CUDA graph can replay a
//!   decode step whatever the routing). Tiles at or past an expert's valid rows are skipped.
//!
//! Device-side counts and indices are untrusted data: every value maps to either a tile inside
//! the tensors or a skipped tile, never to an address outside them. The tiles of all experts
//! are rasterised as for a batched GEMM (tile rows of every expert stacked along M) and handed
//! out by the ordinary schedulers; skipping is decided per tile, identically by every role of a
//! worker, so producer and consumers stay in step. [`MaskedBalance`] instead plans the masked
//! layout on the device over only the tiles with rows (stream-K for the last partial wave).

use super::stream_k::{StreamKMode, StreamKScheduler, UnitRole, WorkUnit};

/// The two MoE layouts (the device code's `GroupedParams::layout`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedLayout {
    /// Experts' rows concatenated, segments aligned to the tile height, one expert index per row.
    Contiguous = 0,
    /// A fixed row capacity per expert, valid row counts on the device.
    Masked = 1,
}

impl GroupedLayout {
    /// The layout with discriminant `code` (anything but 1 is contiguous).
    pub const fn from_code(code: u32) -> Self {
        if code == 1 { GroupedLayout::Masked } else { GroupedLayout::Contiguous }
    }
}

/// The expert a contiguous-layout tile multiplies by, given the index stored for its first row,
/// or `None` for a tile to skip (padding, negative or `≥ experts`).
pub const fn contiguous_expert(first_row_index: i32, experts: u32) -> Option<u32> {
    if first_row_index >= 0 && (first_row_index as u32) < experts { Some(first_row_index as u32) } else { None }
}

/// The valid rows of a masked expert whose device count is `count`: clamped to `0..=capacity`.
pub const fn masked_rows(count: i32, capacity: u32) -> u32 {
    if count <= 0 {
        0
    } else if count as u32 > capacity {
        capacity
    } else {
        count as u32
    }
}

/// Whether the masked tile whose first row is `m0` (within its expert) has valid rows.
pub const fn masked_tile_has_rows(m0: u32, count: i32, capacity: u32) -> bool {
    m0 < masked_rows(count, capacity)
}

/// Tile rows of a masked expert whose device count is `count`: its valid rows (clamped as
/// [`masked_rows`]) over `block_m`, rounded up; the tiles at `m0 = 0, block_m, …` below it are
/// exactly those for which [`masked_tile_has_rows`] holds.
pub const fn masked_tile_rows(count: i32, capacity: u32, block_m: u32) -> u32 {
    masked_rows(count, capacity).div_ceil(if block_m == 0 { 1 } else { block_m })
}

/// The expert and the tile row within it of tile row `row` of the masked layout's compacted
/// raster, where expert `e` contributes `rows_of(e)` tile rows, in expert order. A `row` past
/// the sum lands in the last expert, past its rows (callers hand out rows below the sum only).
pub fn locate_tile_row(row: u32, experts: u32, rows_of: impl Fn(u32) -> u32) -> (u32, u32) {
    let (mut rest, mut expert) = (row, 0);
    while expert + 1 < experts {
        let rows = rows_of(expert);
        if rest < rows {
            break;
        }
        rest -= rows;
        expert += 1;
    }
    (expert, rest)
}

/// Row and column of tile `index` of a `rows × cols` raster walked in bands of
/// [`DATA_PARALLEL_BAND`] rows, M fastest inside a band (`Rasterization`'s `AlongM` walk, with
/// less to hold: `index < rows · cols`, which fits u32).
const fn banded_along_m(index: u32, rows: u32, cols: u32) -> (u32, u32) {
    let band_tiles = DATA_PARALLEL_BAND.saturating_mul(cols);
    let first = index / band_tiles * DATA_PARALLEL_BAND;
    let local = index % band_tiles;
    let width = if rows - first < DATA_PARALLEL_BAND { rows - first } else { DATA_PARALLEL_BAND };
    (first + local % width, local / width)
}

/// One unit of a [`MaskedBalance`] plan: the work unit (its `tile` indexes the compacted
/// raster) and the tile's place: expert, tile row within the expert, tile column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskedTile {
    /// Which K slices of which compacted tile, and what the accumulator becomes.
    pub unit: WorkUnit,
    /// The expert (A's and D's batch, B's batch).
    pub expert: u32,
    /// Tile row within the expert (`m0 = tile_row · block_m`).
    pub tile_row: u32,
    /// Tile column (`n0 = tile_col · block_n`).
    pub tile_col: u32,
    /// The workers computing part of the tile, `first..=last` (`StreamKScheduler::contributors`)
    /// for a finalising unit; `(worker, worker)` otherwise.
    pub contributors: (u32, u32),
}

/// What a masked launch's balanced plan is built over, all of it known before the counts:
/// the experts, the tile columns, the K slices per tile and the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskedShape {
    /// Experts (batches of A, B and D).
    pub experts: u32,
    /// Tile columns.
    pub tiles_n: u32,
    /// K slices per tile.
    pub k_slices: u32,
    /// Workers (one CTA each).
    pub workers: u32,
}

/// Tile rows per band of [`MaskedBalance`]'s data-parallel walk: the host's capacity plan's
/// band (`gemm_grouped::grouped_plan`).
pub const DATA_PARALLEL_BAND: u32 = 4;

/// The masked layout's balanced plan, built on the device from the valid-row counts: the
/// hybrid stream-K units (`stream_k`) over only the tiles that have rows, every expert's tile
/// rows with rows stacked along M in expert order and the columns outermost (M fastest: the
/// workers of a wave share each B column tile from L2, and an expert's B is read once).
///
/// The data-parallel plan over the capacity hands out every capacity tile and skips those
/// without rows, so a wave is as long as its busiest worker's count of tiles with rows: one
/// expert of 1136 rows under a 1536-row capacity has 9 of 12 tile rows, 144 tiles of 128 × 256
/// on 132 workers, two whole tile times where 1.09 suffice. Here the workers split exactly the
/// tiles with rows, the last partial wave streamed over K. Every role of every worker builds
/// the same plan from the same counts (read-only for the launch), so they agree without talking.
///
/// Streamed only with more tile rows than experts (more than one per expert on average): with
/// one tile row per expert (decode steps) no two tiles share a B tile, the tiles stream their
/// weights from memory, and on the H200 splitting the last wave (or, under one wave, every
/// tile) cost 4–9 % against whole tiles; those plans stay data-parallel, still over the tiles
/// with rows only. (The rule reads no count beyond the sum, so a role holds nothing more.)
///
/// The data-parallel units walk the compacted tiles in the capacity plan's order, bands of
/// [`DATA_PARALLEL_BAND`] tile rows with M fastest inside a band: with one tile row per expert
/// that is the capacity plan's own walk, and on the H200 the M-fastest walk over all the experts
/// (32 experts × one tile row, B streamed from memory) ran 10–13 % slower than it.
///
/// Two values depend on the counts (the compacted raster's height and the tail's workers), and
/// the units are rebuilt from them per call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskedBalance {
    /// Tile rows with rows, summed over the experts: the compacted raster's height.
    tile_rows: u32,
    /// Workers of the hybrid's stream-K tail, or 0 for data-parallel units.
    tail_workers: u32,
}

impl MaskedBalance {
    /// The plan for `shape.experts` experts of `rows_of(e)` tile rows with rows each. Sums
    /// saturate (a launch whose capacity tiles fit u32 never does).
    pub fn new(shape: &MaskedShape, rows_of: impl Fn(u32) -> u32) -> Self {
        let mut tile_rows: u32 = 0;
        let mut expert = 0;
        while expert < shape.experts {
            tile_rows = tile_rows.saturating_add(rows_of(expert));
            // A saturated sum stays so. (The second exit also keeps LLVM from unrolling the
            // loop by a runtime factor, whose hoisted trip-count tests ptxas then holds
            // through a GEMM's main loop.)
            if tile_rows == u32::MAX {
                break;
            }
            expert += 1;
        }
        let tiles = tile_rows.saturating_mul(shape.tiles_n);
        let tail_workers = if tile_rows > shape.experts {
            StreamKScheduler::hybrid_tail_workers(tiles, shape.k_slices, shape.workers)
        } else {
            0
        };
        MaskedBalance { tile_rows, tail_workers }
    }

    /// Tile rows with rows, over all experts.
    pub const fn tile_rows(&self) -> u32 {
        self.tile_rows
    }

    /// The work units over the compacted raster's tiles: `StreamKScheduler::try_new`'s hybrid
    /// for them. `None` only when the stream-K tail has more than `u32::MAX` iterations, which
    /// `shape.workers · shape.k_slices < 2^32` rules out (the tail has fewer tiles than workers).
    pub const fn units(&self, shape: &MaskedShape) -> Option<StreamKScheduler> {
        let tiles = self.tile_rows.saturating_mul(shape.tiles_n);
        if self.tail_workers == 0 {
            StreamKScheduler::try_new(tiles, shape.k_slices, shape.workers, StreamKMode::DataParallel)
        } else {
            StreamKScheduler::try_hybrid(tiles, shape.k_slices, shape.workers, self.tail_workers)
        }
    }

    /// The `index`-th unit of `worker` and its tile's place (`rows_of` as for [`Self::new`]),
    /// or `None` once the worker is done.
    pub fn unit(
        &self,
        shape: &MaskedShape,
        worker: u32,
        index: u32,
        rows_of: impl Fn(u32) -> u32,
    ) -> Option<MaskedTile> {
        let rows = self.tile_rows;
        if rows == 0 {
            return None;
        }
        let units = self.units(shape)?;
        let unit = units.unit(worker, index)?;
        let contributors = match unit.role {
            UnitRole::Finalize => units.contributors(unit.tile)?,
            _ => (worker, worker),
        };
        let (row, tile_col) = if self.tail_workers == 0 {
            // Data-parallel: the capacity plan's order (bands of `DATA_PARALLEL_BAND` tile rows,
            // M fastest within a band) over the tiles with rows.
            banded_along_m(unit.tile, rows, shape.tiles_n)
        } else {
            (unit.tile % rows, unit.tile / rows)
        };
        let (expert, tile_row) = locate_tile_row(row, shape.experts, rows_of);
        Some(MaskedTile { unit, expert, tile_row, tile_col, contributors })
    }
}

/// Rows of a contiguous-layout A for experts with `counts` rows each, every segment padded to a
/// multiple of `align` (the tile height): the sum of the padded counts, or `None` on overflow.
pub fn contiguous_rows(counts: &[u32], align: u32) -> Option<u32> {
    let mut rows: u32 = 0;
    let mut i = 0;
    while i < counts.len() {
        let padded = counts[i].checked_next_multiple_of(align)?;
        rows = rows.checked_add(padded)?;
        i += 1;
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::stream_k::{StreamKMode, StreamKScheduler};
    use crate::schedule::swizzled::{Raster, Rasterization};
    use std::vec;
    use std::vec::Vec;

    /// A small deterministic generator (no dependency on a crate in a no_std crate's tests).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, bound: u32) -> u32 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) % bound as u64) as u32
        }
    }

    /// A masked launch of 1 to `most[i]` experts, tile columns, workers and K slices (drawn in
    /// that order).
    fn random_shape(rng: &mut Lcg, [experts, tiles_n, workers, k_slices]: [u32; 4]) -> MaskedShape {
        let experts = 1 + rng.next(experts);
        let tiles_n = 1 + rng.next(tiles_n);
        let workers = 1 + rng.next(workers);
        MaskedShape { experts, tiles_n, k_slices: 1 + rng.next(k_slices), workers }
    }

    #[test]
    fn untrusted_indices_and_counts_map_inside_or_skip() {
        assert_eq!(contiguous_expert(-1, 8), None);
        assert_eq!(contiguous_expert(i32::MIN, 8), None);
        assert_eq!(contiguous_expert(0, 8), Some(0));
        assert_eq!(contiguous_expert(7, 8), Some(7));
        assert_eq!(contiguous_expert(8, 8), None);
        assert_eq!(contiguous_expert(i32::MAX, 8), None);
        assert_eq!(contiguous_expert(0, 0), None);
        assert_eq!(masked_rows(-5, 256), 0);
        assert_eq!(masked_rows(0, 256), 0);
        assert_eq!(masked_rows(100, 256), 100);
        assert_eq!(masked_rows(256, 256), 256);
        assert_eq!(masked_rows(i32::MAX, 256), 256);
        assert!(!masked_tile_has_rows(0, 0, 256));
        assert!(masked_tile_has_rows(0, 1, 256));
        assert!(masked_tile_has_rows(128, 129, 256));
        assert!(!masked_tile_has_rows(128, 128, 256));
        assert!(!masked_tile_has_rows(256, 1000, 256));
        assert_eq!(GroupedLayout::from_code(1), GroupedLayout::Masked);
        assert_eq!(GroupedLayout::from_code(0), GroupedLayout::Contiguous);
    }

    #[test]
    fn contiguous_rows_pad_each_segment() {
        assert_eq!(contiguous_rows(&[], 128), Some(0));
        assert_eq!(contiguous_rows(&[0, 1, 128, 129], 128), Some(128 + 128 + 256));
        assert_eq!(contiguous_rows(&[u32::MAX], 128), None);
        assert_eq!(contiguous_rows(&[1 << 31, 1 << 31], 128), None);
    }

    /// Simulates the persistent workers of a data-parallel plan over the grouped tiles of random
    /// routings of both layouts: every tile with rows is computed exactly once, with its own
    /// expert, and no skipped tile has rows.
    #[test]
    fn workers_cover_every_tile_with_rows_once_and_skip_the_rest() {
        let mut rng = Lcg(0x5eed);
        for case in 0..300 {
            let experts = 1 + rng.next(16);
            let tiles_n = 1 + rng.next(5);
            let workers = 1 + rng.next(40);
            let block_m = 128;
            let capacity_tiles = 1 + rng.next(4);
            let capacity = capacity_tiles * block_m;
            let counts: Vec<i32> = (0..experts)
                .map(|_| match rng.next(5) {
                    0 => 0,
                    1 => -3,
                    2 => 10_000,
                    _ => rng.next(capacity + 1) as i32,
                })
                .collect();
            for layout in [GroupedLayout::Contiguous, GroupedLayout::Masked] {
                // Per-row indices of the contiguous layout (counts clamped like a router would).
                let mut row_expert: Vec<i32> = vec![];
                for (e, &c) in counts.iter().enumerate() {
                    let c = masked_rows(c, capacity);
                    let padded = c.next_multiple_of(block_m);
                    row_expert.extend((0..padded).map(|r| if r < c { e as i32 } else { -1 }));
                }
                // A trailing padding tile and one with a bad index: both skipped.
                row_expert.extend((0..block_m).map(|_| -1));
                row_expert.extend((0..block_m).map(|_| experts as i32 + 3));
                let tiles_m = match layout {
                    GroupedLayout::Contiguous => row_expert.len() as u32 / block_m,
                    GroupedLayout::Masked => experts * capacity_tiles,
                };
                let raster = Rasterization::new(tiles_m, tiles_n, 1 + rng.next(8), Raster::AlongM);
                let units = StreamKScheduler::new(raster.tile_count(), 3, workers, StreamKMode::DataParallel);
                let mut seen = vec![0u32; raster.tile_count() as usize];
                for worker in 0..workers {
                    let mut index = 0;
                    while let Some(unit) = units.unit(worker, index) {
                        index += 1;
                        let tile = raster.coord(unit.tile).unwrap();
                        let (expert, has_rows) = match layout {
                            GroupedLayout::Contiguous => {
                                match contiguous_expert(row_expert[(tile.m * block_m) as usize], experts) {
                                    Some(e) => (e, true),
                                    None => (u32::MAX, false),
                                }
                            }
                            GroupedLayout::Masked => {
                                let e = tile.m / capacity_tiles;
                                let m0 = (tile.m % capacity_tiles) * block_m;
                                (e, masked_tile_has_rows(m0, counts[e as usize], capacity))
                            }
                        };
                        if has_rows {
                            assert!(expert < experts, "case {case}: expert {expert} of {experts}");
                            seen[tile.linear as usize] += 1;
                        }
                    }
                }
                // Every tile with rows once; no tile without rows.
                for m in 0..tiles_m {
                    let rows_in_tile = match layout {
                        GroupedLayout::Contiguous => (0..block_m)
                            .filter(|r| contiguous_expert(row_expert[(m * block_m + r) as usize], experts).is_some())
                            .count() as u32,
                        GroupedLayout::Masked => {
                            let valid = masked_rows(counts[(m / capacity_tiles) as usize], capacity);
                            valid.saturating_sub((m % capacity_tiles) * block_m).min(block_m)
                        }
                    };
                    for n in 0..tiles_n {
                        let want = u32::from(rows_in_tile > 0);
                        assert_eq!(seen[(m * tiles_n + n) as usize], want, "case {case} {layout:?} tile ({m}, {n})");
                    }
                }
            }
        }
    }

    /// Simulates every worker of the balanced masked plan over random counts (empty experts,
    /// negative and oversized counts among them): every K slice of every tile with rows is
    /// computed exactly once, by units whose expert, row and column are the tile's; no tile
    /// without rows is touched; a split tile's finaliser is the worker holding slice 0 and its
    /// contributors are exactly the workers holding its other slices; and the busiest worker
    /// runs no more slices than a data-parallel plan over the tiles with rows would give it.
    #[test]
    fn balanced_masked_plan_covers_each_slice_of_each_tile_with_rows_once() {
        let mut rng = Lcg(0xba1a);
        for case in 0..400 {
            let shape = random_shape(&mut rng, [20, 6, 48, 9]);
            let MaskedShape { experts, tiles_n, k_slices, workers } = shape;
            let block_m = 128;
            let capacity = (1 + rng.next(4)) * block_m - rng.next(2) * rng.next(block_m);
            let counts: Vec<i32> = (0..experts)
                .map(|_| match rng.next(6) {
                    0 => 0,
                    1 => -7,
                    2 => i32::MAX,
                    _ => rng.next(capacity + 1) as i32,
                })
                .collect();
            let rows_of = |e: u32| masked_tile_rows(counts[e as usize], capacity, block_m);
            let plan = MaskedBalance::new(&shape, rows_of);
            let units = plan.units(&shape).unwrap();
            let tiles = plan.tile_rows() * tiles_n;
            let mode = if plan.tile_rows() > experts { StreamKMode::Hybrid } else { StreamKMode::DataParallel };
            assert_eq!(units, StreamKScheduler::new(tiles, k_slices, workers, mode), "case {case}");
            let capacity_rows = capacity.div_ceil(block_m);
            // Per (expert, tile row, column): which worker ran each K slice.
            let mut owner = vec![u32::MAX; (experts * capacity_rows * tiles_n * k_slices) as usize];
            let mut busiest = 0;
            for worker in 0..workers {
                let (mut index, mut slices) = (0, 0);
                while let Some(t) = plan.unit(&shape, worker, index, rows_of) {
                    index += 1;
                    assert!(t.expert < experts && t.tile_col < tiles_n, "case {case}: {t:?}");
                    assert!(
                        masked_tile_has_rows(t.tile_row * block_m, counts[t.expert as usize], capacity),
                        "case {case}: a tile without rows {t:?}"
                    );
                    let tile = (t.expert * capacity_rows + t.tile_row) * tiles_n + t.tile_col;
                    for k in t.unit.k_begin..t.unit.k_end {
                        let slot = &mut owner[(tile * k_slices + k) as usize];
                        assert_eq!(*slot, u32::MAX, "case {case}: slice {k} of {t:?} twice");
                        *slot = worker;
                    }
                    slices += t.unit.k_end - t.unit.k_begin;
                    if t.unit.role == UnitRole::Finalize {
                        assert_eq!(t.unit.k_begin, 0, "case {case}");
                    }
                    let (first, last) = units.contributors(t.unit.tile).unwrap();
                    if t.unit.role == UnitRole::Finalize {
                        assert_eq!(t.contributors, (first, last), "case {case}");
                    } else {
                        assert_eq!(t.contributors, (worker, worker), "case {case}");
                    }
                    assert!(first <= worker && worker <= last, "case {case}: {worker} not in {first}..={last}");
                    match t.unit.role {
                        UnitRole::Whole => assert_eq!((first, last), (worker, worker), "case {case}"),
                        UnitRole::Finalize => assert!(first == worker && last > worker, "case {case}"),
                        UnitRole::Partial => assert!(first < worker, "case {case}"),
                    }
                }
                busiest = busiest.max(slices);
            }
            let mut with_rows = 0;
            for e in 0..experts {
                for r in 0..capacity_rows {
                    let has_rows = masked_tile_has_rows(r * block_m, counts[e as usize], capacity);
                    with_rows += u32::from(has_rows) * tiles_n;
                    for n in 0..tiles_n {
                        let tile = (e * capacity_rows + r) * tiles_n + n;
                        for k in 0..k_slices {
                            let ran = owner[(tile * k_slices + k) as usize] != u32::MAX;
                            assert_eq!(ran, has_rows, "case {case}: expert {e} row {r} col {n} slice {k}");
                        }
                    }
                }
            }
            assert_eq!(plan.tile_rows() * tiles_n, with_rows, "case {case}");
            assert!(busiest <= with_rows.div_ceil(workers) * k_slices, "case {case}: busiest {busiest}");
        }
    }

    #[test]
    fn one_tile_row_per_expert_walks_the_capacity_plans_order() {
        use super::super::swizzled::{Raster, Rasterization};
        // Every expert with rows in one tile row, the capacity one tile row: the compacted
        // tiles are the capacity tiles, and each worker's units come in the capacity plan's
        // order (the host's banded raster, round robin), as `ExpertTiles` hands them out.
        let mut rng = Lcg(0x0de0);
        for case in 0..200 {
            let shape = random_shape(&mut rng, [40, 20, 140, 9]);
            let MaskedShape { experts, tiles_n, k_slices, workers } = shape;
            let counts: Vec<i32> = (0..experts).map(|_| 1 + rng.next(128) as i32).collect();
            let rows_of = |e: u32| masked_tile_rows(counts[e as usize], 128, 128);
            let plan = MaskedBalance::new(&shape, rows_of);
            assert_eq!(plan.tile_rows(), experts, "case {case}");
            let raster = Rasterization::try_new(experts, tiles_n, DATA_PARALLEL_BAND, Raster::AlongM).unwrap();
            for worker in 0..workers {
                let mut index = 0;
                while let Some(t) = plan.unit(&shape, worker, index, rows_of) {
                    let expected = raster.coord(worker + index * workers).unwrap();
                    assert_eq!((t.expert, t.tile_row, t.tile_col), (expected.m, 0, expected.n), "case {case}");
                    assert_eq!((t.unit.k_begin, t.unit.k_end, t.unit.role), (0, k_slices, UnitRole::Whole));
                    index += 1;
                }
                assert_eq!(raster.coord(worker + index * workers), None, "case {case}: worker {worker} stopped early");
            }
        }
    }

    #[test]
    fn banded_walk_is_the_rasterisations() {
        use super::super::swizzled::{Raster, Rasterization};
        let mut rng = Lcg(0xba7d);
        for _ in 0..300 {
            let (rows, cols) = (1 + rng.next(30), 1 + rng.next(30));
            let raster = Rasterization::try_new(rows, cols, DATA_PARALLEL_BAND, Raster::AlongM).unwrap();
            for index in 0..rows * cols {
                let c = raster.coord(index).unwrap();
                assert_eq!(banded_along_m(index, rows, cols), (c.m, c.n), "{rows} × {cols}, tile {index}");
            }
        }
    }

    #[test]
    fn tile_rows_are_located_in_expert_order() {
        let rows = [2, 0, 3, 1];
        let rows_of = |e: u32| rows[e as usize];
        let located: Vec<(u32, u32)> = (0..6).map(|r| locate_tile_row(r, 4, rows_of)).collect();
        assert_eq!(located, [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2), (3, 0)]);
        assert_eq!(locate_tile_row(9, 4, rows_of), (3, 4));
        assert_eq!(masked_tile_rows(1136, 1536, 128), 9);
        assert_eq!(masked_tile_rows(-1, 1536, 128), 0);
        assert_eq!(masked_tile_rows(5000, 1536, 128), 12);
    }
}
