//! Persistent tile schedulers: which output tile a worker (a CTA or a cluster) computes next.
//!
//! A persistent kernel launches at most as many workers as the GPU holds at once and loops; the
//! scheduler maps (worker, iteration) to a tile. Every scheduler here is pure arithmetic on
//! `u32`, shared by kernels and host tests, and must cover every tile exactly once.
//!
//! - [`StaticScheduler`] (here): row-major round robin, the baseline.
//! - [`swizzled`]: the same round robin over a grouped ("group-M") rasterisation for L2 reuse.
//! - [`dynamic`]: tiles claimed from an atomic counter (Hopper's stand-in for Blackwell's
//!   cluster launch control), same rasterisation.
//! - [`claims`]: the same claims on a counter pair each launch leaves zero (no reset on the
//!   host between launches).
//! - [`stream_k`]: stream-K and the data-parallel + stream-K hybrid, which split the K loop
//!   of some tiles across workers to fill a partial last wave.
//! - [`grouped`]: which expert a mixture-of-experts tile uses and whether it has rows.
//! - [`heuristic`]: the [`heuristic::Scheduler`] choice and the function that picks one.

pub mod claims;
pub mod dynamic;
pub mod grouped;
pub mod heuristic;
pub mod stream_k;
pub mod swizzled;

/// One output tile, by its coordinates in the tile grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileCoord {
    /// Tile row (along M).
    pub m: u32,
    /// Tile column (along N).
    pub n: u32,
    /// Linear tile index, `m * tiles_n + n` (independent of rasterisation order).
    pub linear: u32,
}

/// Static round-robin schedule: worker `w` takes linear tiles `w, w + W, w + 2W, …` in row-major
/// order. The baseline the others are measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticScheduler {
    tiles_m: u32,
    tiles_n: u32,
    workers: u32,
}

impl StaticScheduler {
    /// A schedule of a `tiles_m × tiles_n` tile grid over `workers` persistent workers.
    ///
    /// `workers` of 0 is treated as 1 so the schedule is always total.
    pub const fn new(tiles_m: u32, tiles_n: u32, workers: u32) -> Self {
        StaticScheduler { tiles_m, tiles_n, workers: if workers == 0 { 1 } else { workers } }
    }

    /// Number of tiles in the grid.
    pub const fn tile_count(&self) -> u32 {
        self.tiles_m * self.tiles_n
    }

    /// How many tiles worker `worker` processes.
    pub const fn tiles_of(&self, worker: u32) -> u32 {
        let total = self.tile_count();
        if worker >= total { 0 } else { (total - worker).div_ceil(self.workers) }
    }

    /// The tile that `worker` computes in its `iteration`-th turn, or `None` once it is done.
    pub const fn tile(&self, worker: u32, iteration: u32) -> Option<TileCoord> {
        let linear = match iteration.checked_mul(self.workers) {
            Some(base) => match base.checked_add(worker) {
                Some(l) => l,
                None => return None,
            },
            None => return None,
        };
        if linear >= self.tile_count() {
            return None;
        }
        Some(TileCoord { m: linear / self.tiles_n, n: linear % self.tiles_n, linear })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    fn visits(s: &StaticScheduler, workers: u32) -> std::vec::Vec<u32> {
        let mut seen = vec![0u32; s.tile_count() as usize];
        for w in 0..workers {
            let mut it = 0;
            while let Some(t) = s.tile(w, it) {
                assert_eq!(t.linear, t.m * s.tiles_n + t.n);
                seen[t.linear as usize] += 1;
                it += 1;
            }
            assert_eq!(it, s.tiles_of(w));
        }
        seen
    }

    proptest! {
        #[test]
        fn static_schedule_covers_every_tile_once(tm in 1u32..80, tn in 1u32..80, workers in 1u32..300) {
            let s = StaticScheduler::new(tm, tn, workers);
            prop_assert!(visits(&s, workers).iter().all(|&c| c == 1));
        }
    }

    #[test]
    fn zero_workers_is_one_worker() {
        let s = StaticScheduler::new(3, 3, 0);
        assert!(visits(&s, 1).iter().all(|&c| c == 1));
    }
}
