//! Tiles claimed at run time from a pair of global counters that every launch leaves zero:
//! the pure half of the protocol (the attention kernel's persistent grid runs it).
//!
//! [`super::dynamic`] claims tiles the same way but has the host zero its counter before
//! every launch, which is one more operation on the stream per call (a memset, microseconds:
//! a few percent of a 100 µs kernel). Here the launch cleans up after itself instead, so a
//! per-stream pair of counters is zeroed once, when it is allocated, and never again.
//!
//! # Protocol
//! The pair is `[next, finished]`, both 0 when a launch starts (launches on one stream are
//! ordered; two launches running at once never share a pair).
//! 1. Worker `b` (its `blockIdx.x`) starts with tile `b` ([`TileClaims::first`]): the first
//!    wave needs no atomic.
//! 2. Its next tile is `c + grid`, where `c` is what one relaxed `atomicAdd(next, 1)` returned
//!    ([`TileClaims::next`]): every `c` is returned once and they run `0, 1, 2, …` without
//!    gaps, so every tile is claimed exactly once.
//! 3. A worker stops at its first index `≥ count` ([`TileClaims::is_done`]): each makes one
//!    claim that takes nothing, so a launch adds exactly `count − grid + grid` = `count` to
//!    `next` when `grid ≤ count`, and `grid` to `finished` (step 4).
//! 4. Having stopped, the worker makes an acquire-release `atomicAdd(finished, 1)` (a
//!    `fence.acq_rel.gpu` before and after a relaxed add). The worker that returns `grid − 1`
//!    ([`TileClaims::is_last`]) is the last: every other worker's claims were ordered before
//!    its own add to `finished`, which the last one's acquire sees, so no claim is still in
//!    flight, and it stores 0 to both counters. The kernel's end publishes the stores to the
//!    next launch on the stream.
//!
//! A launch must run to its end for the pair to be zero again; a launch that faults leaves
//! the context unusable anyway.

/// The claim arithmetic of one launch: `count` tiles over a grid of `grid` workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileClaims {
    /// Tiles of the launch.
    pub count: u32,
    /// Workers (CTAs) of the launch, ≥ 1.
    pub grid: u32,
}

impl TileClaims {
    /// The tile worker `worker` starts with, without touching the counters.
    pub const fn first(&self, worker: u32) -> u32 {
        worker
    }

    /// The tile a claim that returned `claimed` (the old value of `next`) stands for.
    /// Saturating: an index that cannot be a tile stays one.
    pub const fn next(&self, claimed: u32) -> u32 {
        claimed.saturating_add(self.grid)
    }

    /// Whether index `t` is past the last tile (the worker stops).
    pub const fn is_done(&self, t: u32) -> bool {
        t >= self.count
    }

    /// Whether the worker whose add to `finished` returned `finished_before` is the last to
    /// stop, and resets both counters.
    pub const fn is_last(&self, finished_before: u32) -> bool {
        finished_before + 1 == self.grid
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::vec::Vec;

    use proptest::prelude::*;

    use super::TileClaims;

    /// One launch on the CPU: `grid` threads run the protocol on `pair`, each spinning
    /// `cost[t]` times per tile (so workers finish tiles at different times); returns how
    /// often each tile was taken.
    fn launch(claims: TileClaims, pair: &[AtomicU32; 2], cost: &[u32]) -> Vec<u32> {
        let taken: Vec<AtomicU32> = (0..claims.count).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|scope| {
            for worker in 0..claims.grid {
                let taken = &taken;
                scope.spawn(move || {
                    let mut t = claims.first(worker);
                    while !claims.is_done(t) {
                        taken[t as usize].fetch_add(1, Ordering::Relaxed);
                        for _ in 0..cost[t as usize] {
                            std::hint::spin_loop();
                        }
                        t = claims.next(pair[0].fetch_add(1, Ordering::Relaxed));
                    }
                    if claims.is_last(pair[1].fetch_add(1, Ordering::AcqRel)) {
                        pair[0].store(0, Ordering::Relaxed);
                        pair[1].store(0, Ordering::Relaxed);
                    }
                });
            }
        });
        taken.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn every_tile_is_claimed_once_and_the_counters_end_at_zero_launch_after_launch(
            count in 1u32..400,
            grid in 1u32..12,
            cost in proptest::collection::vec(0u32..2000, 400),
        ) {
            let grid = grid.min(count);
            let claims = TileClaims { count, grid };
            let pair = [AtomicU32::new(0), AtomicU32::new(0)];
            for _launch in 0..3 {
                let taken = launch(claims, &pair, &cost);
                prop_assert!(taken.iter().all(|&n| n == 1), "taken {:?}", taken);
                prop_assert_eq!(pair[0].load(Ordering::Relaxed), 0);
                prop_assert_eq!(pair[1].load(Ordering::Relaxed), 0);
            }
        }
    }

    #[test]
    fn protocol_edges() {
        let claims = TileClaims { count: 10, grid: 4 };
        assert_eq!(claims.first(3), 3);
        assert_eq!(claims.next(0), 4);
        assert!(!claims.is_done(9) && claims.is_done(10));
        assert_eq!(claims.next(u32::MAX), u32::MAX, "saturates past every tile");
        assert!(claims.is_last(3) && !claims.is_last(2));
        // One worker: its first index after the last tile stops it, and it is the last.
        let one = TileClaims { count: 1, grid: 1 };
        assert!(one.is_done(one.next(0)) && one.is_last(0));
    }
}
