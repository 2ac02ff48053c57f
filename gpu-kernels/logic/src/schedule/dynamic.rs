//! Dynamic persistent schedule on a global atomic tile counter: the pure half of the protocol.
//!
//! A static schedule fixes which worker takes which tile before the kernel starts; when tiles
//! take unequal time (causal attention, ragged grouped GEMM, SMs shared with another kernel) a
//! slow worker holds up the end of the grid. Here workers claim tiles at run time instead:
//! Blackwell does that in hardware with cluster launch control (CLC); on Hopper the stand-in
//! is one `u32` counter in global memory. The tile index a worker obtains is mapped to
//! coordinates by the same [`Rasterization`] as the static schedules, so L2 locality is kept.
//!
//! # Protocol
//! 1. The host zeroes the counter ([`DynamicScheduler::COUNTER_INIT`]) before every launch.
//! 2. Worker `b` (its `blockIdx.x`, or cluster id) starts with tile index `b`
//!    ([`DynamicScheduler::first_tile`]): the first wave needs no atomic at all.
//! 3. To get its next tile, the worker's elected thread performs one
//!    `atomicAdd(counter, 1)`; with `c` the value it returned, the next tile index is
//!    `c + grid` ([`DynamicScheduler::next_tile`]) because indices `0..grid` were handed out
//!    in step 2. Every atomic returns a distinct `c`, so every index is claimed at most once,
//!    and the counter values form `0, 1, 2, …` without gaps, so no index is skipped.
//! 4. The worker stops when its index is `≥ tile_count` ([`DynamicScheduler::is_done`]).
//!    Each worker therefore does exactly one atomic that claims nothing.
//!
//! # Device side
//! One thread per worker (the producer warp's elected lane) issues the atomic, ideally for
//! tile `i + 1` while tile `i` is still being loaded, so the round trip to L2 is hidden. The
//! index is broadcast to the other roles through shared memory: the thread stores it to a
//! per-stage slot and the consumers read it after the same mbarrier (or `bar.sync`) that
//! orders the stage's data, so no extra synchronisation is needed. Consumers never touch the
//! counter. The counter lives in a small device buffer owned by the launcher, not in the
//! kernel parameters, and must not be shared by two kernels running at once.

use super::TileCoord;
use super::swizzled::Rasterization;

/// The tile-index arithmetic of the atomic-counter scheduler for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynamicScheduler {
    raster: Rasterization,
    grid: u32,
}

impl DynamicScheduler {
    /// The value the host writes to the counter before a launch.
    pub const COUNTER_INIT: u32 = 0;

    /// Tiles of `raster` claimed by a grid of `grid` workers (0 counts as 1).
    pub const fn new(raster: Rasterization, grid: u32) -> Self {
        DynamicScheduler { raster, grid: if grid == 0 { 1 } else { grid } }
    }

    /// Number of tiles in the grid.
    pub const fn tile_count(&self) -> u32 {
        self.raster.tile_count()
    }

    /// The rasterisation tile indices are mapped through.
    pub const fn rasterization(&self) -> Rasterization {
        self.raster
    }

    /// The index worker `worker` starts with, without touching the counter.
    pub const fn first_tile(&self, worker: u32) -> u32 {
        worker
    }

    /// The next tile index, given the value `claimed` that the worker's `atomicAdd(counter, 1)`
    /// returned. Saturates instead of wrapping, so a counter near `u32::MAX` reads as "done"
    /// rather than restarting at tile 0.
    pub const fn next_tile(&self, claimed: u32) -> u32 {
        claimed.saturating_add(self.grid)
    }

    /// Whether `index` is past the last tile (the worker exits its loop).
    pub const fn is_done(&self, index: u32) -> bool {
        index >= self.raster.tile_count()
    }

    /// The coordinates of tile `index`, or `None` when the worker is done.
    pub const fn coord(&self, index: u32) -> Option<TileCoord> {
        self.raster.coord(index)
    }
}

#[cfg(test)]
mod tests {
    use super::super::swizzled::Raster;
    use super::*;
    use proptest::prelude::*;
    use std::collections::BinaryHeap;
    use std::vec;
    use std::vec::Vec;

    /// One run of the protocol with worker `w` needing `cost[w]` time units per tile (plus a
    /// per-tile jitter), event-driven: the worker that finishes first claims first, as the
    /// atomics would serialise. Returns how often each tile was processed and per-worker counts.
    fn simulate(s: &DynamicScheduler, cost: &[u32], jitter: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let mut counter = DynamicScheduler::COUNTER_INIT;
        let mut visits = vec![0u32; s.tile_count() as usize];
        let mut per_worker = vec![0u32; cost.len()];
        // Min-heap on (time, worker): a tie is broken by worker id, one valid atomic order.
        let mut ready: BinaryHeap<core::cmp::Reverse<(u64, u32, u32)>> = BinaryHeap::new();
        for w in 0..cost.len() as u32 {
            ready.push(core::cmp::Reverse((0, w, s.first_tile(w))));
        }
        let mut step = 0usize;
        while let Some(core::cmp::Reverse((time, w, index))) = ready.pop() {
            if s.is_done(index) {
                continue;
            }
            let tile = s.coord(index).expect("not done, so inside the grid");
            visits[tile.linear as usize] += 1;
            per_worker[w as usize] += 1;
            let duration = u64::from(cost[w as usize] + jitter[step % jitter.len()]);
            step += 1;
            // atomicAdd(counter, 1) at the end of the tile.
            let claimed = counter;
            counter += 1;
            ready.push(core::cmp::Reverse((time + duration, w, s.next_tile(claimed))));
        }
        (visits, per_worker)
    }

    proptest! {
        #[test]
        fn dynamic_schedule_covers_every_tile_once_at_any_speeds(
            tm in 1u32..40, tn in 1u32..40, group in 1u32..10,
            workers in prop_oneof![Just(1u32), Just(3), Just(13), Just(132), 1u32..2000],
            speeds in proptest::collection::vec(1u32..50, 1..16),
            jitter in proptest::collection::vec(0u32..20, 1..32),
        ) {
            let s = DynamicScheduler::new(Rasterization::new(tm, tn, group, Raster::AlongM), workers);
            let cost: Vec<u32> = (0..workers as usize).map(|w| speeds[w % speeds.len()]).collect();
            let (visits, per_worker) = simulate(&s, &cost, &jitter);
            prop_assert!(visits.iter().all(|&c| c == 1), "visits {:?}", visits);
            prop_assert_eq!(per_worker.iter().sum::<u32>(), s.tile_count());
        }
    }

    #[test]
    fn faster_workers_take_more_tiles() {
        // Worker 0 is ten times faster than worker 1: a static split would give each half.
        let s = DynamicScheduler::new(Rasterization::row_major(10, 10), 2);
        let (visits, per_worker) = simulate(&s, &[1, 10], &[0]);
        assert!(visits.iter().all(|&c| c == 1));
        assert!(per_worker[0] >= 80, "{per_worker:?}");
    }

    #[test]
    fn protocol_edges() {
        let s = DynamicScheduler::new(Rasterization::row_major(2, 3), 4);
        assert_eq!(s.first_tile(3), 3);
        assert_eq!(s.next_tile(1), 5);
        assert!(!s.is_done(5));
        assert!(s.is_done(6));
        assert_eq!(s.next_tile(u32::MAX - 1), u32::MAX);
        assert!(s.is_done(s.next_tile(u32::MAX - 1)));
        // More workers than tiles: the surplus is done before claiming anything.
        assert!(s.is_done(s.first_tile(7)));
    }
}
