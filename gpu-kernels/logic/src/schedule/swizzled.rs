//! Grouped ("swizzled") rasterisation and the static persistent schedule that walks it.
//!
//! Row-major order makes one wave of concurrent tiles a long thin strip of the output: it
//! reads few rows of A but nearly all of B, and B falls out of L2 before the next strip needs
//! it. Grouped rasterisation (CUTLASS's swizzle, Triton's `GROUP_M`) cuts the tile grid into
//! bands of `group` tile-rows and walks each band column by column, so a wave covers a squarer
//! block of the output and both operands are reused from L2. [`Raster::AlongN`] is the same
//! with the roles of M and N exchanged. The last band may be narrower than `group`; the walk
//! shrinks to it so every tile is still visited exactly once.

use super::TileCoord;

/// Which way consecutive tile indices move inside a band.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Raster {
    /// Bands of `group` tile-rows; inside a band the index walks down M first, then steps to
    /// the next column. `group = 1` is row-major order.
    AlongM,
    /// Bands of `group` tile-columns; inside a band the index walks along N first, then steps
    /// to the next row. `group = 1` is column-major order.
    AlongN,
}

/// A bijection between tile indices `0..tile_count` and the tiles of a `tiles_m × tiles_n`
/// grid, in grouped order. Shared by the static, dynamic and stream-K schedulers. `repr(C)`:
/// the host plans it and passes it to kernels as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rasterization {
    tiles_m: u32,
    tiles_n: u32,
    /// Band width in tiles, clamped to `1..=` the banded dimension so `group × other` never
    /// exceeds `tile_count` (and so cannot overflow).
    group: u32,
    raster: Raster,
    tile_count: u32,
}

impl Rasterization {
    /// Grouped order over a `tiles_m × tiles_n` grid; `None` when `tiles_m · tiles_n`
    /// overflows `u32`. A `group` of 0 counts as 1; a group wider than the grid is clamped.
    pub const fn try_new(tiles_m: u32, tiles_n: u32, group: u32, raster: Raster) -> Option<Self> {
        let tile_count = match tiles_m.checked_mul(tiles_n) {
            Some(c) => c,
            None => return None,
        };
        let banded = match raster {
            Raster::AlongM => tiles_m,
            Raster::AlongN => tiles_n,
        };
        let group = if group == 0 {
            1
        } else if group > banded && banded > 0 {
            banded
        } else {
            group
        };
        Some(Rasterization { tiles_m, tiles_n, group, raster, tile_count })
    }

    /// As [`Rasterization::try_new`].
    ///
    /// # Panics
    /// When `tiles_m · tiles_n` overflows `u32` (a 2³² tile grid is far beyond any GPU memory).
    pub const fn new(tiles_m: u32, tiles_n: u32, group: u32, raster: Raster) -> Self {
        match Self::try_new(tiles_m, tiles_n, group, raster) {
            Some(r) => r,
            None => panic!("tile grid has more than u32::MAX tiles"),
        }
    }

    /// Plain row-major order (what [`super::StaticScheduler`] walks).
    pub const fn row_major(tiles_m: u32, tiles_n: u32) -> Self {
        Self::new(tiles_m, tiles_n, 1, Raster::AlongM)
    }

    /// Number of tiles in the grid.
    pub const fn tile_count(&self) -> u32 {
        self.tile_count
    }

    /// Tiles along M.
    pub const fn tiles_m(&self) -> u32 {
        self.tiles_m
    }

    /// Tiles along N.
    pub const fn tiles_n(&self) -> u32 {
        self.tiles_n
    }

    /// The effective band width (after clamping).
    pub const fn group(&self) -> u32 {
        self.group
    }

    /// The orientation.
    pub const fn raster(&self) -> Raster {
        self.raster
    }

    /// The tile at position `index` of the walk, or `None` past the end.
    pub const fn coord(&self, index: u32) -> Option<TileCoord> {
        if index >= self.tile_count {
            return None;
        }
        // `banded` is the dimension cut into bands, `across` the one each band spans whole.
        let (banded, across) = match self.raster {
            Raster::AlongM => (self.tiles_m, self.tiles_n),
            Raster::AlongN => (self.tiles_n, self.tiles_m),
        };
        // group ≤ banded, so band_tiles ≤ tile_count: no overflow.
        let band_tiles = self.group * across;
        let band = index / band_tiles;
        let first = band * self.group;
        // The last band holds what is left of the banded dimension.
        let width = if banded - first < self.group { banded - first } else { self.group };
        let local = index - band * band_tiles;
        let along_band = first + local % width;
        let along_across = local / width;
        let (m, n) = match self.raster {
            Raster::AlongM => (along_band, along_across),
            Raster::AlongN => (along_across, along_band),
        };
        Some(TileCoord { m, n, linear: m * self.tiles_n + n })
    }
}

/// Static persistent schedule over a [`Rasterization`]: worker `w` takes walk positions
/// `w, w + W, w + 2W, …`. With `W` workers running at once, each wave is `W` consecutive
/// positions, i.e. a compact block of `group` bands rather than a strip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwizzledScheduler {
    raster: Rasterization,
    workers: u32,
}

impl SwizzledScheduler {
    /// The schedule of `raster` over `workers` workers (0 counts as 1).
    pub const fn new(raster: Rasterization, workers: u32) -> Self {
        SwizzledScheduler { raster, workers: if workers == 0 { 1 } else { workers } }
    }

    /// The rasterisation walked.
    pub const fn rasterization(&self) -> Rasterization {
        self.raster
    }

    /// Number of tiles in the grid.
    pub const fn tile_count(&self) -> u32 {
        self.raster.tile_count()
    }

    /// How many tiles worker `worker` processes.
    pub const fn tiles_of(&self, worker: u32) -> u32 {
        let total = self.tile_count();
        if worker >= total { 0 } else { (total - worker).div_ceil(self.workers) }
    }

    /// The tile that `worker` computes in its `iteration`-th turn, or `None` once it is done.
    pub const fn tile(&self, worker: u32, iteration: u32) -> Option<TileCoord> {
        let index = match iteration.checked_mul(self.workers) {
            Some(base) => match base.checked_add(worker) {
                Some(i) => i,
                None => return None,
            },
            None => return None,
        };
        self.raster.coord(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    fn raster_strategy() -> impl Strategy<Value = Raster> {
        prop_oneof![Just(Raster::AlongM), Just(Raster::AlongN)]
    }

    fn check_bijection(r: &Rasterization) {
        let mut seen = vec![false; r.tile_count() as usize];
        for i in 0..r.tile_count() {
            let t = r.coord(i).expect("index inside the grid");
            assert!(t.m < r.tiles_m() && t.n < r.tiles_n(), "{t:?} outside {r:?}");
            assert_eq!(t.linear, t.m * r.tiles_n() + t.n);
            assert!(!seen[t.linear as usize], "tile {t:?} visited twice by {r:?}");
            seen[t.linear as usize] = true;
        }
        assert_eq!(r.coord(r.tile_count()), None);
    }

    proptest! {
        #[test]
        fn rasterisation_is_a_bijection(
            tm in 1u32..70, tn in 1u32..70, group in 0u32..20, raster in raster_strategy()
        ) {
            check_bijection(&Rasterization::new(tm, tn, group, raster));
        }

        #[test]
        fn swizzled_schedule_covers_every_tile_once(
            tm in 1u32..60, tn in 1u32..60, group in 1u32..12, raster in raster_strategy(),
            workers in prop_oneof![Just(1u32), Just(2), Just(7), Just(131), Just(132), 1u32..5000],
        ) {
            let s = SwizzledScheduler::new(Rasterization::new(tm, tn, group, raster), workers);
            let mut seen = vec![0u32; s.tile_count() as usize];
            for w in 0..workers.min(s.tile_count() + 3) {
                let mut it = 0;
                while let Some(t) = s.tile(w, it) {
                    seen[t.linear as usize] += 1;
                    it += 1;
                }
                prop_assert_eq!(it, s.tiles_of(w));
            }
            prop_assert!(seen.iter().all(|&c| c == 1));
        }
    }

    #[test]
    fn group_m_walks_columns_inside_a_band() {
        // 5 × 3 grid, bands of 2 rows: band 0 is rows 0–1, band 1 rows 2–3, band 2 is row 4 alone.
        let r = Rasterization::new(5, 3, 2, Raster::AlongM);
        let order: std::vec::Vec<(u32, u32)> = (0..15).map(|i| r.coord(i).map(|t| (t.m, t.n)).unwrap()).collect();
        let band_0 = [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)];
        let band_1 = [(2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2)];
        let band_2 = [(4, 0), (4, 1), (4, 2)];
        let expected: std::vec::Vec<(u32, u32)> = band_0.into_iter().chain(band_1).chain(band_2).collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn group_n_walks_rows_inside_a_band() {
        let r = Rasterization::new(2, 3, 2, Raster::AlongN);
        let order: std::vec::Vec<(u32, u32)> = (0..6).map(|i| r.coord(i).map(|t| (t.m, t.n)).unwrap()).collect();
        assert_eq!(order, [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (1, 2)]);
    }

    #[test]
    fn group_one_along_m_is_row_major() {
        let r = Rasterization::row_major(4, 6);
        for i in 0..24 {
            assert_eq!(r.coord(i).unwrap().linear, i);
        }
    }

    #[test]
    fn oversized_group_is_clamped_and_overflow_is_refused() {
        assert_eq!(Rasterization::new(3, 100, 64, Raster::AlongM).group(), 3);
        assert_eq!(Rasterization::try_new(1 << 16, 1 << 16, 8, Raster::AlongM), None);
        let huge = Rasterization::new(u32::MAX, 1, u32::MAX, Raster::AlongM);
        let last = huge.coord(u32::MAX - 1).unwrap();
        assert_eq!((last.m, last.n), (u32::MAX - 1, 0));
    }
}
