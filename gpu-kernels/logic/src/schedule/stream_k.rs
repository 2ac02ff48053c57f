//! Stream-K and the data-parallel + stream-K hybrid: splitting the K loop to fill the last wave.
//!
//! With `T` output tiles of `K` main-loop iterations each on `W` workers, a data-parallel
//! schedule runs `⌈T / W⌉` waves and the last one leaves `W − T mod W` workers idle. Stream-K
//! (Osama et al., PPoPP 2023) instead lays all `T·K` iterations end to end and gives every
//! worker one contiguous range of `⌊T·K / W⌋` or `⌈T·K / W⌉` of them. A range that starts or
//! ends inside a tile computes a partial sum of it; partial tiles are combined by a fix-up.
//!
//! # Work units and fix-up
//! A worker's range is cut at tile boundaries into [`WorkUnit`]s, visited in increasing
//! iteration order. Its first stream-K unit may start inside a tile ([`UnitRole::Partial`]:
//! write the partial accumulator to this worker's workspace slot and raise its flag); its last
//! may end inside one ([`UnitRole::Finalize`]: it holds iteration 0 of that tile, waits for the
//! flags of workers `finalizer + 1 ..= last` from [`StreamKScheduler::contributors`], adds
//! their partials in that order, which makes the result deterministic, and stores the tile);
//! the units between are whole tiles. The finaliser is the worker holding iteration 0 because
//! it reaches that tile at the very end of its range, while the contributors reach it at the
//! start of theirs: by the time it waits, the partials are written. Every worker has at most
//! one `Partial` unit, so the workspace is one tile of accumulators per worker.
//!
//! # Hybrid rule
//! Pure stream-K pays a fix-up on every tile even when most waves are full. The hybrid
//! ([`StreamKMode::Hybrid`]) keeps the full waves data-parallel and streams only the last,
//! partial one: with `T = q·W + r`,
//! - `r = 0`: every wave is full, all tiles are data-parallel (no fix-up at all);
//! - `q = 0`: less than one wave, all tiles are stream-K (as [`StreamKMode::Pure`]);
//! - otherwise the first `q·W` tiles are data-parallel, `q` per worker, and the last `r` are
//!   stream-K over the first `g` workers, `g` from [`super::heuristic::tail_stream_k_grid`]
//!   (an even split of each tile over more workers shortens the tail but adds fix-up; `g = r`
//!   keeps the tail whole).
//!
//! Each worker runs its data-parallel tiles first, then its stream-K units: every worker
//! reaches the tail at the same moment, and while the tail runs, all of its workers read the
//! same few tiles' operands. (Streaming the last full wave too, the paper's "two-tile" hybrid,
//! was measured on the H200 to lose to plain data-parallel at long K: its workers read
//! scattered K offsets of many tiles at once and miss in L2; docs/PERF.md.)
//! Data-parallel tiles are `0..T − r`, stream-K tiles `T − r..T`, positions in a
//! [`super::swizzled::Rasterization`].

use super::heuristic::{STREAM_K_FIRST_PARTIAL_ITERS, STREAM_K_MAX_SPLITS, STREAM_K_NEXT_PARTIAL_ITERS};

/// Pure stream-K, the hybrid (see the module doc for the hybrid rule), or no stream-K at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKMode {
    /// Every tile data-parallel, round robin over the workers: no fix-up. Lets one kernel run
    /// every schedule through this type.
    DataParallel,
    /// All tiles stream-K.
    Pure,
    /// Data-parallel full waves, stream-K for the partial last wave.
    Hybrid,
}

/// What a worker does with the accumulator at the end of a [`WorkUnit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnitRole {
    /// The unit covers the whole K loop of its tile: store the tile, no fix-up.
    Whole,
    /// The unit covers iteration 0 but not the end: wait for the contributors, add their
    /// partials, store the tile.
    Finalize,
    /// The unit starts after iteration 0: write the partial accumulator to this worker's
    /// workspace slot and signal its flag.
    Partial,
}

/// A contiguous run of one tile's K iterations, `k_begin..k_end`, done by one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WorkUnit {
    /// Tile index (position in the rasterisation).
    pub tile: u32,
    /// First K iteration (in `0..k_iters_per_tile`).
    pub k_begin: u32,
    /// One past the last K iteration (in `1..=k_iters_per_tile`).
    pub k_end: u32,
    /// What happens to the accumulator afterwards.
    pub role: UnitRole,
}

/// The stream-K (or hybrid) split of `tiles × k_iters_per_tile` iterations over `workers`.
/// `repr(C)`: the host plans it once (the hybrid's tail split is policy) and passes it to the
/// kernel, which only asks it for units.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamKScheduler {
    tiles: u32,
    k_iters: u32,
    workers: u32,
    /// Tiles `tiles − sk_tiles..tiles` are stream-K, the rest data-parallel.
    sk_tiles: u32,
    /// Workers `0..sk_workers` share the stream-K iterations.
    sk_workers: u32,
    /// Every stream-K worker gets `sk_base` iterations, the first `sk_extra` one more.
    sk_base: u32,
    sk_extra: u32,
}

/// The hybrid's (stream-K tiles, stream-K workers) for `tiles` tiles on `workers ≥ 1` workers
/// with its tail on `tail_workers`: no tail when every wave is full, every tile streamed when
/// none is, else the partial wave's tiles over `tail_workers` (clamped to `1..=workers`).
const fn hybrid_split(tiles: u32, workers: u32, tail_workers: u32) -> (u32, u32) {
    let (full_waves, rest) = (tiles / workers, tiles % workers);
    if rest == 0 {
        (0, workers)
    } else if full_waves == 0 {
        (tiles, workers)
    } else if tail_workers == 0 {
        (rest, 1)
    } else if tail_workers > workers {
        (rest, workers)
    } else {
        (rest, tail_workers)
    }
}

impl StreamKScheduler {
    /// The split of `tiles` tiles of `k_iters_per_tile` iterations over `workers` workers
    /// (0 workers or 0 iterations count as 1). `None` when the stream-K part has more than
    /// `u32::MAX` iterations.
    pub const fn try_new(tiles: u32, k_iters_per_tile: u32, workers: u32, mode: StreamKMode) -> Option<Self> {
        let workers = if workers == 0 { 1 } else { workers };
        let k_iters = if k_iters_per_tile == 0 { 1 } else { k_iters_per_tile };
        let split = match mode {
            StreamKMode::DataParallel => (0, workers),
            StreamKMode::Pure => (tiles, workers),
            StreamKMode::Hybrid => hybrid_split(tiles, workers, Self::hybrid_tail_workers(tiles, k_iters, workers)),
        };
        Self::from_split(tiles, k_iters, workers, split)
    }

    /// The scheduler of `tiles` tiles of `k_iters` (≥ 1) iterations on `workers` (≥ 1) workers
    /// whose last `sk_tiles` tiles are streamed over `sk_workers` (≥ 1) of them. `None` when
    /// the streamed part has more than `u32::MAX` iterations.
    #[inline(always)]
    const fn from_split(tiles: u32, k_iters: u32, workers: u32, (sk_tiles, sk_workers): (u32, u32)) -> Option<Self> {
        let sk_iters = match sk_tiles.checked_mul(k_iters) {
            Some(i) => i,
            None => return None,
        };
        Some(StreamKScheduler {
            tiles,
            k_iters,
            workers,
            sk_tiles,
            sk_workers,
            sk_base: sk_iters / sk_workers,
            sk_extra: sk_iters % sk_workers,
        })
    }

    /// The workers the hybrid ([`StreamKMode::Hybrid`]) streams its partial last wave over, for
    /// `tiles` tiles of `k_iters_per_tile` iterations on `workers` workers (0 counts as 1):
    /// `tail_stream_k_grid` of that wave's tiles, or all workers when no wave is partial or none
    /// is full.
    pub const fn hybrid_tail_workers(tiles: u32, k_iters_per_tile: u32, workers: u32) -> u32 {
        let workers = if workers == 0 { 1 } else { workers };
        let k_iters = if k_iters_per_tile == 0 { 1 } else { k_iters_per_tile };
        let (full_waves, rest) = (tiles / workers, tiles % workers);
        if rest == 0 || full_waves == 0 {
            return workers;
        }
        // `tail_stream_k_grid(rest, k_iters, workers, STREAM_K_MAX_SPLITS)` in u32 steps (a
        // kernel replans it per tile in a 40-register role; the test below checks the two
        // agree): an even split `s` gives each of `rest · s ≤ workers` workers `k_iters / s`
        // iterations plus the fix-up of `s` sharers; the cheapest wins, the fewest splits on a tie.
        let (mut best_split, mut best_cost) = (1, k_iters);
        let mut split = 2;
        while split <= STREAM_K_MAX_SPLITS {
            let fits = match rest.checked_mul(split) {
                Some(grid) => grid <= workers,
                None => false,
            };
            if fits && k_iters.is_multiple_of(split) {
                let fix_up = (STREAM_K_FIRST_PARTIAL_ITERS + STREAM_K_NEXT_PARTIAL_ITERS * (split as u64 - 2)) as u32;
                let cost = k_iters / split + fix_up;
                if cost < best_cost {
                    (best_split, best_cost) = (split, cost);
                }
            }
            split += 1;
        }
        rest * best_split
    }

    /// The hybrid as [`StreamKScheduler::try_new`] plans it, with its tail's workers given
    /// (`tail_workers`, from [`StreamKScheduler::hybrid_tail_workers`] of the same arguments,
    /// clamped to `1..=workers`): for a kernel that plans the tail once and rebuilds the rest
    /// from two registers per unit, where holding the whole scheduler would cost seven.
    pub const fn try_hybrid(tiles: u32, k_iters_per_tile: u32, workers: u32, tail_workers: u32) -> Option<Self> {
        let workers = if workers == 0 { 1 } else { workers };
        let k_iters = if k_iters_per_tile == 0 { 1 } else { k_iters_per_tile };
        Self::from_split(tiles, k_iters, workers, hybrid_split(tiles, workers, tail_workers))
    }

    /// As [`StreamKScheduler::try_new`].
    ///
    /// # Panics
    /// When the stream-K part has more than `u32::MAX` iterations.
    pub const fn new(tiles: u32, k_iters_per_tile: u32, workers: u32, mode: StreamKMode) -> Self {
        match Self::try_new(tiles, k_iters_per_tile, workers, mode) {
            Some(s) => s,
            None => panic!("stream-K iteration space exceeds u32"),
        }
    }

    /// Number of tiles.
    pub const fn tile_count(&self) -> u32 {
        self.tiles
    }

    /// K iterations per tile.
    pub const fn k_iters_per_tile(&self) -> u32 {
        self.k_iters
    }

    /// Number of stream-K tiles (the last `stream_k_tiles()`); the rest are data-parallel.
    pub const fn stream_k_tiles(&self) -> u32 {
        self.sk_tiles
    }

    /// Number of workers sharing the stream-K tiles (`0..stream_k_workers()`).
    pub const fn stream_k_workers(&self) -> u32 {
        self.sk_workers
    }

    /// First stream-K tile.
    const fn sk_first_tile(&self) -> u32 {
        self.tiles - self.sk_tiles
    }

    /// Global stream-K iteration where `worker`'s range begins (`sk_workers` gives the end).
    const fn sk_begin(&self, worker: u32) -> u32 {
        let w = if worker > self.sk_workers { self.sk_workers } else { worker };
        let extra = if w < self.sk_extra { w } else { self.sk_extra };
        // w·sk_base + extra ≤ sk_iters ≤ u32::MAX.
        w * self.sk_base + extra
    }

    /// The global stream-K iteration range `begin..end` of `worker`.
    pub const fn stream_k_range(&self, worker: u32) -> (u32, u32) {
        (self.sk_begin(worker), self.sk_begin(worker.saturating_add(1)))
    }

    /// The worker whose stream-K range holds global iteration `iteration` (< stream-K total).
    const fn sk_owner(&self, iteration: u32) -> u32 {
        let long = self.sk_base + 1;
        // The first sk_extra workers have `long` iterations; sk_extra·long ≤ sk_iters.
        let long_span = self.sk_extra * long;
        if iteration < long_span { iteration / long } else { self.sk_extra + (iteration - long_span) / self.sk_base }
    }

    /// Number of stream-K units of `worker`.
    const fn sk_units_of(&self, worker: u32) -> u32 {
        let (begin, end) = self.stream_k_range(worker);
        if begin == end { 0 } else { (end - 1) / self.k_iters - begin / self.k_iters + 1 }
    }

    /// Number of data-parallel tiles of `worker`.
    const fn dp_tiles_of(&self, worker: u32) -> u32 {
        let dp = self.sk_first_tile();
        if worker >= dp { 0 } else { (dp - worker).div_ceil(self.workers) }
    }

    /// How many units `worker` processes.
    pub const fn units_of(&self, worker: u32) -> u32 {
        if worker >= self.workers {
            return 0;
        }
        let sk_units = if worker < self.sk_workers { self.sk_units_of(worker) } else { 0 };
        sk_units + self.dp_tiles_of(worker)
    }

    /// The `index`-th unit of `worker`, or `None` once it is done.
    pub const fn unit(&self, worker: u32, index: u32) -> Option<WorkUnit> {
        if worker >= self.workers {
            return None;
        }
        let dp_tiles = self.dp_tiles_of(worker);
        if index < dp_tiles {
            // index·workers + worker < tiles − sk_tiles: no overflow.
            let tile = index * self.workers + worker;
            return Some(WorkUnit { tile, k_begin: 0, k_end: self.k_iters, role: UnitRole::Whole });
        }
        let index = index - dp_tiles;
        if worker >= self.sk_workers || index >= self.sk_units_of(worker) {
            return None;
        }
        {
            let (begin, end) = self.stream_k_range(worker);
            let sk_tile = begin / self.k_iters + index;
            // sk_tile < sk_tiles, so tile_start + k_iters ≤ sk_iters fits u32.
            let tile_start = sk_tile * self.k_iters;
            let first = if begin > tile_start { begin } else { tile_start };
            let tile_end = tile_start + self.k_iters;
            let last = if end < tile_end { end } else { tile_end };
            let (k_begin, k_end) = (first - tile_start, last - tile_start);
            let role = if k_begin > 0 {
                UnitRole::Partial
            } else if k_end < self.k_iters {
                UnitRole::Finalize
            } else {
                UnitRole::Whole
            };
            Some(WorkUnit { tile: self.sk_first_tile() + sk_tile, k_begin, k_end, role })
        }
    }

    /// The workers that compute part of `tile`, as an inclusive range `first..=last`; `first`
    /// finalises the tile and adds the partials of `first + 1 ..= last` in that order. A tile
    /// computed whole by one worker gives `first == last`. `None` for a tile out of range.
    pub const fn contributors(&self, tile: u32) -> Option<(u32, u32)> {
        if tile >= self.tiles {
            return None;
        }
        if tile < self.sk_first_tile() {
            let owner = tile % self.workers;
            return Some((owner, owner));
        }
        let start = (tile - self.sk_first_tile()) * self.k_iters;
        Some((self.sk_owner(start), self.sk_owner(start + self.k_iters - 1)))
    }

    /// The worker that stores `tile` (the one holding its iteration 0).
    pub const fn finalizer(&self, tile: u32) -> Option<u32> {
        match self.contributors(tile) {
            Some((first, _)) => Some(first),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::schedule::heuristic::tail_stream_k_grid;

    /// The u32 tail rule the kernels replan per tile is `tail_stream_k_grid`'s choice for the
    /// partial wave, over every small problem.
    #[test]
    fn hybrid_tail_workers_is_the_tail_stream_k_grid() {
        for workers in [1, 2, 3, 7, 16, 33, 66, 114, 132, 264] {
            for k in 1..=40 {
                for tiles in 0..=3 * workers + 5 {
                    let (full, rest) = (tiles / workers, tiles % workers);
                    let want = if rest == 0 || full == 0 {
                        workers
                    } else {
                        tail_stream_k_grid(rest, k, workers, STREAM_K_MAX_SPLITS)
                    };
                    let got = StreamKScheduler::hybrid_tail_workers(tiles, k, workers);
                    assert_eq!(got, want, "tiles {tiles}, k {k}, workers {workers}");
                    let hybrid = StreamKScheduler::new(tiles, k, workers, StreamKMode::Hybrid);
                    assert_eq!(StreamKScheduler::try_hybrid(tiles, k, workers, got), Some(hybrid));
                }
            }
        }
    }
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn mode_strategy() -> impl Strategy<Value = StreamKMode> {
        prop_oneof![Just(StreamKMode::DataParallel), Just(StreamKMode::Pure), Just(StreamKMode::Hybrid)]
    }

    fn workers_strategy() -> impl Strategy<Value = u32> {
        prop_oneof![Just(1u32), Just(2), Just(7), Just(131), Just(132), 1u32..700]
    }

    /// Walks every worker's units and checks the invariants that hold for both modes.
    /// Returns the iterations done per worker.
    fn check(s: &StreamKScheduler, workers: u32) -> Vec<u32> {
        let k = s.k_iters_per_tile();
        let mut done = vec![vec![false; k as usize]; s.tile_count() as usize];
        let mut finalised = vec![0u32; s.tile_count() as usize];
        let mut load = vec![0u32; workers as usize];
        for w in 0..workers {
            let mut partials = 0;
            let mut i = 0;
            while let Some(u) = s.unit(w, i) {
                assert!(u.k_begin < u.k_end && u.k_end <= k, "{u:?}");
                for it in u.k_begin..u.k_end {
                    assert!(!done[u.tile as usize][it as usize], "({}, {it}) twice", u.tile);
                    done[u.tile as usize][it as usize] = true;
                }
                load[w as usize] += u.k_end - u.k_begin;
                let (first, last) = s.contributors(u.tile).unwrap();
                assert!((first..=last).contains(&w));
                match u.role {
                    UnitRole::Whole => assert_eq!((first, last, u.k_begin, u.k_end), (w, w, 0, k)),
                    UnitRole::Finalize => {
                        assert_eq!(s.finalizer(u.tile), Some(w));
                        assert!(last > w && u.k_end < k);
                        // The finalise unit is the worker's last one.
                        assert_eq!(s.unit(w, i + 1), None, "a unit after {u:?}");
                    }
                    UnitRole::Partial => {
                        partials += 1;
                        assert!(first < w);
                        // Its first stream-K unit: only data-parallel tiles precede it.
                        assert!(i == 0 || s.unit(w, i - 1).unwrap().tile < s.tile_count() - s.stream_k_tiles());
                    }
                }
                if matches!(u.role, UnitRole::Whole | UnitRole::Finalize) {
                    finalised[u.tile as usize] += 1;
                }
                i += 1;
            }
            assert_eq!(i, s.units_of(w));
            assert!(partials <= 1);
        }
        assert!(done.iter().flatten().all(|&d| d), "some (tile, k) not covered");
        assert!(finalised.iter().all(|&f| f == 1), "finalised {finalised:?}");
        load
    }

    proptest! {
        #[test]
        fn every_tile_iteration_once_and_every_tile_finalised_once(
            tiles in 0u32..400, k in 1u32..40, workers in workers_strategy(), mode in mode_strategy(),
        ) {
            let s = StreamKScheduler::new(tiles, k, workers, mode);
            check(&s, workers);
            prop_assert_eq!(s.unit(workers, 0), None);
        }

        #[test]
        fn stream_k_load_is_within_one_iteration_of_the_mean(
            tiles in 1u32..400, k in 1u32..40, workers in workers_strategy(),
            mode in prop_oneof![Just(StreamKMode::Pure), Just(StreamKMode::Hybrid)],
        ) {
            let s = StreamKScheduler::new(tiles, k, workers, mode);
            let load = check(&s, workers);
            let total: u64 = load.iter().map(|&l| u64::from(l)).sum();
            prop_assert_eq!(total, u64::from(tiles) * u64::from(k));
            // Every worker has the same number of data-parallel tiles, and the stream-K
            // workers' shares differ by at most one iteration.
            let dp = u64::from(tiles - s.stream_k_tiles()) / u64::from(workers) * u64::from(k);
            let sk = u64::from(s.stream_k_tiles()) * u64::from(k);
            let g = u64::from(s.stream_k_workers());
            for (w, &l) in load.iter().enumerate() {
                let (lo, hi) = if (w as u64) < g { (dp + sk / g, dp + sk.div_ceil(g)) } else { (dp, dp) };
                prop_assert!((lo..=hi).contains(&u64::from(l)), "worker {} load {} not in {}..={}", w, l, lo, hi);
            }
        }

        #[test]
        fn data_parallel_hands_out_whole_tiles_round_robin(tiles in 1u32..2000, k in 1u32..64, workers in workers_strategy()) {
            let s = StreamKScheduler::new(tiles, k, workers, StreamKMode::DataParallel);
            prop_assert_eq!(s.stream_k_tiles(), 0);
            check(&s, workers);
            for w in 0..workers.min(tiles) {
                let mut i = 0;
                while let Some(u) = s.unit(w, i) {
                    prop_assert_eq!(u, WorkUnit { tile: w + i * workers, k_begin: 0, k_end: k, role: UnitRole::Whole });
                    i += 1;
                }
            }
        }

        #[test]
        fn hybrid_streams_only_the_partial_last_wave(tiles in 1u32..2000, k in 1u32..80, workers in 1u32..300) {
            let s = StreamKScheduler::new(tiles, k, workers, StreamKMode::Hybrid);
            let (full_waves, rest) = (tiles / workers, tiles % workers);
            let expected = match (full_waves, rest) {
                (_, 0) => 0,
                (0, _) => tiles,
                (_, r) => r,
            };
            prop_assert_eq!(s.stream_k_tiles(), expected);
            if full_waves > 0 && rest > 0 {
                prop_assert_eq!(s.stream_k_workers(), tail_stream_k_grid(rest, k, workers, STREAM_K_MAX_SPLITS));
                for tile in 0..tiles {
                    let (first, last) = s.contributors(tile).unwrap();
                    // At most the split bound of workers per tile (+1 where ranges straddle).
                    prop_assert!(last - first <= STREAM_K_MAX_SPLITS, "tile {} split over {}..={}", tile, first, last);
                }
            }
        }
    }

    #[test]
    fn paper_example_splits_as_expected() {
        // 9 tiles of 4 iterations on 4 workers: 36 iterations, 9 each.
        let s = StreamKScheduler::new(9, 4, 4, StreamKMode::Pure);
        assert_eq!(s.stream_k_range(1), (9, 18));
        let units: Vec<WorkUnit> = (0..s.units_of(1)).map(|i| s.unit(1, i).unwrap()).collect();
        assert_eq!(
            units,
            [
                WorkUnit { tile: 2, k_begin: 1, k_end: 4, role: UnitRole::Partial },
                WorkUnit { tile: 3, k_begin: 0, k_end: 4, role: UnitRole::Whole },
                WorkUnit { tile: 4, k_begin: 0, k_end: 2, role: UnitRole::Finalize },
            ]
        );
        assert_eq!(s.contributors(2), Some((0, 1)));
        assert_eq!(s.contributors(4), Some((1, 2)));
        assert_eq!(s.finalizer(9), None);
    }

    #[test]
    fn full_waves_make_the_hybrid_data_parallel() {
        let s = StreamKScheduler::new(264, 64, 132, StreamKMode::Hybrid);
        assert_eq!(s.stream_k_tiles(), 0);
        assert_eq!(s.unit(5, 1), Some(WorkUnit { tile: 137, k_begin: 0, k_end: 64, role: UnitRole::Whole }));
    }

    #[test]
    fn the_hybrid_tail_on_an_h200() {
        // 288 tiles (1152 × 8192) on 132: two full waves, then 24 tiles split four ways over
        // 96 workers, each after its two data-parallel tiles.
        let s = StreamKScheduler::new(288, 64, 132, StreamKMode::Hybrid);
        assert_eq!((s.stream_k_tiles(), s.stream_k_workers()), (24, 96));
        assert_eq!(s.unit(0, 1), Some(WorkUnit { tile: 132, k_begin: 0, k_end: 64, role: UnitRole::Whole }));
        assert_eq!(s.unit(0, 2), Some(WorkUnit { tile: 264, k_begin: 0, k_end: 16, role: UnitRole::Finalize }));
        assert_eq!(s.unit(1, 2), Some(WorkUnit { tile: 264, k_begin: 16, k_end: 32, role: UnitRole::Partial }));
        assert_eq!(s.contributors(264), Some((0, 3)));
        assert_eq!(s.unit(100, 2), None);
    }

    #[test]
    fn iteration_space_overflow_is_refused() {
        assert_eq!(StreamKScheduler::try_new(1 << 20, 1 << 12, 132, StreamKMode::Pure), None);
        // The hybrid only needs the last wave in u32.
        assert!(StreamKScheduler::try_new(1 << 20, 1 << 12, 132, StreamKMode::Hybrid).is_some());
    }
}
