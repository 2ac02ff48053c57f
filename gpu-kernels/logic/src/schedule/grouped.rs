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
//! worker, so producer and consumers stay in step.

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
}
