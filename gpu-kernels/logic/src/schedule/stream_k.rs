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
//! iteration order. Its first unit may start inside a tile ([`UnitRole::Partial`]: write the
//! partial accumulator to this worker's workspace slot and raise its flag); its last unit may
//! end inside one ([`UnitRole::Finalize`]: it holds iteration 0 of that tile, waits for the
//! flags of workers `finalizer + 1 ..= last` from [`StreamKScheduler::contributors`], adds
//! their partials in that order, which makes the result deterministic, and stores the tile);
//! the units between are whole tiles. The finaliser is the worker holding iteration 0 because
//! it reaches that tile at the very end of its range, while the contributors reach it at the
//! start of theirs: by the time it waits, the partials are long written. Every worker has at
//! most one `Partial` unit, so the workspace is one tile of accumulators per worker.
//!
//! # Hybrid rule
//! Pure stream-K pays a fix-up on up to `W` tiles even when most waves are full. The hybrid
//! ([`StreamKMode::Hybrid`]) follows the paper's "data-parallel + two-tile stream-K": with
//! `T = q·W + r`,
//! - `r = 0`: every wave is full, all tiles are data-parallel (no fix-up at all);
//! - `q = 0`: less than one wave, all tiles are stream-K;
//! - otherwise the last full wave and the partial wave, `W + r` tiles, are stream-K and the
//!   first `(q − 1)·W` tiles are data-parallel. Each worker then gets between one and two
//!   tiles of stream-K work: at least a full tile's iterations to amortise its fix-up, so a
//!   tile is split between at most two workers (one partial, one finaliser).
//!
//! Each worker runs its stream-K units first, then its data-parallel tiles round robin, so
//! every worker starts its stream-K range at the same moment and the fix-up waits are short.
//! Tile indices are positions in a [`super::swizzled::Rasterization`]; stream-K tiles are
//! `0..sk_tiles`, data-parallel ones `sk_tiles..T`.

/// Pure stream-K, the hybrid (see the module doc for the hybrid rule), or no stream-K at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamKMode {
    /// Every tile data-parallel, round robin over the workers: no fix-up. Lets one kernel run
    /// every schedule through this type.
    DataParallel,
    /// All tiles stream-K.
    Pure,
    /// Data-parallel full waves, stream-K for the last full wave plus the partial wave.
    Hybrid,
}

impl StreamKMode {
    /// The code a kernel parameter carries: 0 data-parallel, 1 pure, 2 hybrid.
    pub const fn code(self) -> u32 {
        match self {
            StreamKMode::DataParallel => 0,
            StreamKMode::Pure => 1,
            StreamKMode::Hybrid => 2,
        }
    }

    /// The mode of [`StreamKMode::code`]; unknown codes are data-parallel.
    pub const fn from_code(code: u32) -> Self {
        match code {
            1 => StreamKMode::Pure,
            2 => StreamKMode::Hybrid,
            _ => StreamKMode::DataParallel,
        }
    }
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamKScheduler {
    tiles: u32,
    k_iters: u32,
    workers: u32,
    /// Tiles `0..sk_tiles` are stream-K, the rest data-parallel.
    sk_tiles: u32,
    /// Every worker gets `sk_base` stream-K iterations, the first `sk_extra` one more.
    sk_base: u32,
    sk_extra: u32,
}

impl StreamKScheduler {
    /// The split of `tiles` tiles of `k_iters_per_tile` iterations over `workers` workers
    /// (0 workers or 0 iterations count as 1). `None` when the stream-K part has more than
    /// `u32::MAX` iterations.
    pub const fn try_new(tiles: u32, k_iters_per_tile: u32, workers: u32, mode: StreamKMode) -> Option<Self> {
        let workers = if workers == 0 { 1 } else { workers };
        let k_iters = if k_iters_per_tile == 0 { 1 } else { k_iters_per_tile };
        let sk_tiles = match mode {
            StreamKMode::DataParallel => 0,
            StreamKMode::Pure => tiles,
            StreamKMode::Hybrid => {
                let (full_waves, rest) = (tiles / workers, tiles % workers);
                if rest == 0 {
                    0
                } else if full_waves == 0 {
                    tiles
                } else {
                    // workers + rest ≤ tiles, so no overflow.
                    workers + rest
                }
            }
        };
        let sk_iters = match sk_tiles.checked_mul(k_iters) {
            Some(i) => i,
            None => return None,
        };
        Some(StreamKScheduler {
            tiles,
            k_iters,
            workers,
            sk_tiles,
            sk_base: sk_iters / workers,
            sk_extra: sk_iters % workers,
        })
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

    /// Number of stream-K tiles (`0..stream_k_tiles()`); the rest are data-parallel.
    pub const fn stream_k_tiles(&self) -> u32 {
        self.sk_tiles
    }

    /// Global stream-K iteration where `worker`'s range begins (`workers` gives the end of all).
    const fn sk_begin(&self, worker: u32) -> u32 {
        let w = if worker > self.workers { self.workers } else { worker };
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
        let dp = self.tiles - self.sk_tiles;
        if worker >= dp { 0 } else { (dp - worker).div_ceil(self.workers) }
    }

    /// How many units `worker` processes.
    pub const fn units_of(&self, worker: u32) -> u32 {
        if worker >= self.workers {
            return 0;
        }
        self.sk_units_of(worker) + self.dp_tiles_of(worker)
    }

    /// The `index`-th unit of `worker`, or `None` once it is done.
    pub const fn unit(&self, worker: u32, index: u32) -> Option<WorkUnit> {
        if worker >= self.workers {
            return None;
        }
        let sk_units = self.sk_units_of(worker);
        if index < sk_units {
            let (begin, end) = self.stream_k_range(worker);
            let tile = begin / self.k_iters + index;
            // tile < sk_tiles, so tile_start + k_iters ≤ sk_iters fits u32.
            let tile_start = tile * self.k_iters;
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
            return Some(WorkUnit { tile, k_begin, k_end, role });
        }
        let turn = index - sk_units;
        if turn >= self.dp_tiles_of(worker) {
            return None;
        }
        // turn·workers + worker < tiles − sk_tiles: no overflow.
        let tile = self.sk_tiles + turn * self.workers + worker;
        Some(WorkUnit { tile, k_begin: 0, k_end: self.k_iters, role: UnitRole::Whole })
    }

    /// The workers that compute part of `tile`, as an inclusive range `first..=last`; `first`
    /// finalises the tile and adds the partials of `first + 1 ..= last` in that order. A tile
    /// computed whole by one worker gives `first == last`. `None` for a tile out of range.
    pub const fn contributors(&self, tile: u32) -> Option<(u32, u32)> {
        if tile >= self.tiles {
            return None;
        }
        if tile >= self.sk_tiles {
            let owner = (tile - self.sk_tiles) % self.workers;
            return Some((owner, owner));
        }
        let start = tile * self.k_iters;
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
                        // The finalise unit is the worker's last stream-K one: only
                        // data-parallel tiles may follow it.
                        if let Some(next) = s.unit(w, i + 1) {
                            assert!(next.tile >= s.stream_k_tiles(), "{next:?} after {u:?}");
                        }
                    }
                    UnitRole::Partial => {
                        partials += 1;
                        assert!(first < w);
                        assert_eq!(i, 0, "a partial unit is the worker's first");
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
            let (lo, hi) = (total / u64::from(workers), total.div_ceil(u64::from(workers)));
            for (w, &l) in load.iter().enumerate() {
                // Hybrid: every worker has the same number of data-parallel tiles, so it keeps
                // the stream-K balance.
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
        fn hybrid_splits_at_most_two_waves(tiles in 1u32..2000, k in 1u32..16, workers in 1u32..300) {
            let s = StreamKScheduler::new(tiles, k, workers, StreamKMode::Hybrid);
            let expected = match (tiles / workers, tiles % workers) {
                (_, 0) => 0,
                (0, _) => tiles,
                (_, r) => workers + r,
            };
            prop_assert_eq!(s.stream_k_tiles(), expected);
            prop_assert!(s.stream_k_tiles() < 2 * workers);
            if tiles >= workers {
                for tile in 0..tiles {
                    let (first, last) = s.contributors(tile).unwrap();
                    prop_assert!(last - first <= 1, "tile {} split over workers {}..={}", tile, first, last);
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
    fn iteration_space_overflow_is_refused() {
        assert_eq!(StreamKScheduler::try_new(1 << 20, 1 << 12, 132, StreamKMode::Pure), None);
        // The hybrid only needs the last two waves in u32.
        assert!(StreamKScheduler::try_new(1 << 20, 1 << 12, 132, StreamKMode::Hybrid).is_some());
    }
}
