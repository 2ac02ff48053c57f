//! Which sm_90 GEMM kernel variant runs a call: the consumer arrangement, the tile width and
//! the cluster shape the caller forces or leaves to `Auto`, the entries that exist for each
//! input/output pair, and the measured rules behind each `Auto`.

use warpforge_abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_M, BLOCK_N, NARROW_BLOCK_N, PINGPONG_BLOCK_M};
use warpforge_abi::signatures::GemmSm90;
use warpforge_abi::{Entry, entries};
use warpforge_host::{Error, Result};
use warpforge_logic::schedule::heuristic::modeled_iterations;

use super::GemmProblem;

/// How the sm_90 kernel's two consumer warpgroups share the work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Consumers {
    /// warpforge's choice per call (see [`Consumers::PingPong`] for when it is picked).
    #[default]
    Auto,
    /// Both warpgroups on one 128 × 256 tile, 64 rows each: every schedule (data-parallel,
    /// stream-K, hybrid), every input/output type.
    Cooperative,
    /// Each warpgroup owns whole 64 × 256 tiles and the two alternate, so one warpgroup's
    /// epilogue runs while the other's main loop keeps the tensor cores busy. Data-parallel
    /// schedules only; bf16 → bf16 and f16 → f16 (other types are refused when forced).
    PingPong,
}

/// Columns of D per tile of the sm_90 kernel. The variants below describe the 16-bit GEMM
/// ([`GemmProblem`](crate::GemmProblem)); for the block-scaled FP8 GEMM
/// ([`Fp8GemmProblem`](crate::Fp8GemmProblem)) `Wide` is its 64 × 256 tile (the two consumer
/// warpgroups side by side, `Auto` at M ≤ 64) and `Narrow` its 128 × 128 tile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TileWidth {
    /// warpforge's choice per call (see [`TileWidth::Narrow`] for when it is picked).
    #[default]
    Auto,
    /// 256 columns (128 × 256 cooperative tiles, 64 × 256 ping-pong tiles), a 4-stage ring:
    /// every arrangement, schedule and input/output type.
    Wide,
    /// 128 columns (128 × 128 tiles, cooperative consumers), a 6-stage ring holding the same
    /// bytes: twice the tiles of [`TileWidth::Wide`], so problems with few tiles (small M) split
    /// K over fewer CTAs per tile and hand over half-size partials. bf16 → bf16 and f16 → f16,
    /// every schedule; forcing it with other types or with ping-pong consumers is refused.
    Narrow,
}

/// Whether the sm_90 kernel's CTAs run in clusters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clusters {
    /// warpforge's choice per call (see [`Clusters::Pairs`] for when it is picked).
    #[default]
    Auto,
    /// One CTA per tile, no clusters: every variant and schedule.
    Off,
    /// 2 × 1 clusters: the two CTAs of a cluster take vertically adjacent 128 × 256 tiles, and
    /// each loads half of every B slice from L2 and multicasts it to both, halving B's L2 → SM
    /// traffic. Cooperative consumers, wide tiles, data-parallel schedules; bf16 → bf16 and
    /// f16 → f16 (forcing it with other types, ping-pong or narrow tiles is refused).
    /// Correct on every shape, but measured no faster than single CTAs (docs/PERF.md), so
    /// `Auto` does not pick it.
    Pairs,
}

/// How the cooperative sm_90 kernel splits each tile's K loop over CTAs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KSplit {
    /// The schedule model's choice (`logic::schedule::heuristic`: data-parallel, pure stream-K
    /// or the hybrid, from the waves and the fix-up cost).
    #[default]
    Auto,
    /// At most this many CTAs per tile, 1 to [`MAX_K_SPLIT`]: with fewer tiles than resident
    /// CTAs, pure stream-K over `min(tiles · ways, resident CTAs, tiles · K slices)` CTAs (1:
    /// data-parallel); with a wave or more of tiles, data-parallel. Cooperative consumers
    /// without clusters only (ping-pong and pairs run whole tiles); others are refused.
    Ways(u32),
}

/// Most CTAs [`KSplit::Ways`] puts on one tile.
pub const MAX_K_SPLIT: u32 = 16;

/// The kernel variant of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Variant {
    /// Ping-pong consumers (64 × 256 tiles per warpgroup).
    pub pingpong: bool,
    /// Narrow 128 × 128 tiles.
    pub narrow: bool,
    /// 2 × 1 clusters sharing B by multicast.
    pub pairs: bool,
    /// CTAs per tile forced by [`KSplit::Ways`] (`None`: the schedule model's choice).
    pub ways: Option<u32>,
}

/// The entries with each variant, by (input, output) names: (ping-pong, narrow, clusters).
fn variant_entries(input: &str, output: &str) -> Option<[Entry<GemmSm90>; 3]> {
    match (input, output) {
        ("bf16", "bf16") => {
            Some([entries::GEMM_BF16_BF16_PINGPONG, entries::GEMM_BF16_BF16_NARROW, entries::GEMM_BF16_BF16_CLUSTER])
        }
        ("f16", "f16") => {
            Some([entries::GEMM_F16_F16_PINGPONG, entries::GEMM_F16_F16_NARROW, entries::GEMM_F16_F16_CLUSTER])
        }
        _ => None,
    }
}

/// Whether the ping-pong, narrow and cluster variants exist for the (input, output) names.
pub(crate) fn has_variants(input: &str, output: &str) -> bool {
    variant_entries(input, output).is_some()
}

/// The plain cooperative entry (every input/output pair).
fn cooperative_entry(input: &str, output: &str) -> Entry<GemmSm90> {
    by_types(
        input,
        output,
        [
            entries::GEMM_BF16_BF16,
            entries::GEMM_BF16_F16,
            entries::GEMM_BF16_F32,
            entries::GEMM_F16_BF16,
            entries::GEMM_F16_F16,
            entries::GEMM_F16_F32,
        ],
    )
}

/// The item of `table` for the (input, output) type names, the table in the order bf16 → bf16,
/// f16, f32, then f16 → bf16, f16, f32 (the six pairs every GEMM kernel family is built for).
pub(crate) fn by_types<T: Copy>(input: &str, output: &str, table: [T; 6]) -> T {
    let row = if input == "bf16" { 0 } else { 3 };
    let col = match output {
        "bf16" => 0,
        "f16" => 1,
        _ => 2,
    };
    table[row + col]
}

fn refuse(what: &str) -> Error {
    Error::InvalidArgument(what.into())
}

impl Variant {
    /// The variant for `p` with `input` → `output` types on `sms` SMs: forced choices are
    /// checked against the entries that exist and against each other; `Auto` picks narrow
    /// tiles first (few tiles or bad wave quantisation), then ping-pong, then clusters.
    pub fn choose(p: &GemmProblem, input: &str, output: &str, sms: u32) -> Result<Variant> {
        let types = format!("{input} → {output}");
        let has_variants = variant_entries(input, output).is_some();
        let only_16 = |what: &str| format!("{what} exist for bf16 → bf16 and f16 → f16, not {types}");
        let narrow = match p.tile_width {
            TileWidth::Wide => false,
            TileWidth::Narrow => {
                if !has_variants {
                    return Err(refuse(&only_16("narrow tiles")));
                }
                if p.consumers == Consumers::PingPong || p.clusters == Clusters::Pairs {
                    return Err(refuse("narrow tiles run cooperative consumers without clusters only"));
                }
                true
            }
            TileWidth::Auto => {
                has_variants
                    && p.consumers != Consumers::PingPong
                    && p.clusters != Clusters::Pairs
                    && prefer_narrow(p.m, p.n, p.k, p.batch, sms)
            }
        };
        let pingpong = match p.consumers {
            Consumers::Cooperative => false,
            Consumers::PingPong => {
                if !has_variants {
                    return Err(refuse(&only_16("ping-pong consumers")));
                }
                if p.clusters == Clusters::Pairs {
                    return Err(refuse("ping-pong consumers run without clusters only"));
                }
                true
            }
            Consumers::Auto => {
                has_variants
                    && !narrow
                    && p.clusters != Clusters::Pairs
                    && p.k_split == KSplit::Auto
                    && prefer_pingpong(p.m, p.n, p.k, p.batch, sms)
            }
        };
        let pairs = match p.clusters {
            Clusters::Off => false,
            Clusters::Pairs => {
                if !has_variants {
                    return Err(refuse(&only_16("2 × 1 clusters")));
                }
                true
            }
            Clusters::Auto => {
                has_variants
                    && !narrow
                    && !pingpong
                    && p.k_split == KSplit::Auto
                    && prefer_pairs(p.m, p.n, p.k, p.batch, sms)
            }
        };
        let ways = match p.k_split {
            KSplit::Auto => None,
            KSplit::Ways(ways) => {
                if !(1..=MAX_K_SPLIT).contains(&ways) {
                    return Err(refuse(&format!("KSplit::Ways({ways}): 1 to {MAX_K_SPLIT} CTAs per tile")));
                }
                if pingpong || pairs {
                    return Err(refuse("a forced K split runs cooperative consumers without clusters only"));
                }
                Some(ways)
            }
        };
        Ok(Variant { pingpong, narrow, pairs, ways })
    }

    /// The kernel entry of this variant.
    pub fn entry(&self, input: &str, output: &str) -> Entry<GemmSm90> {
        match variant_entries(input, output) {
            Some([pingpong, _, _]) if self.pingpong => pingpong,
            Some([_, narrow, _]) if self.narrow => narrow,
            Some([_, _, pairs]) if self.pairs => pairs,
            _ => cooperative_entry(input, output),
        }
    }

    /// Rows of D per tile (one CTA's, or one ping-pong warpgroup's).
    pub fn block_m(&self) -> u32 {
        if self.pingpong { PINGPONG_BLOCK_M } else { BLOCK_M }
    }

    /// Columns of D per tile.
    pub fn block_n(&self) -> u32 {
        if self.narrow { NARROW_BLOCK_N } else { BLOCK_N }
    }

    /// Rows of B per TMA box: the tile's columns, or half of them when each CTA of a pair
    /// loads half.
    pub fn b_box_rows(&self) -> u32 {
        if self.pairs { BLOCK_N / 2 } else { self.block_n() }
    }

    /// Rows of A per TMA box.
    pub fn a_box_rows(&self) -> u32 {
        A_BOX_ROWS
    }
}

/// Whether [`Clusters::Auto`] runs 2 × 1 clusters: never, for now. Forced on the H200 (same
/// bench, same rounds) the paired kernel ran within ±1.5 % of the cooperative one wherever the
/// tile rows pair up (4096³: 677 against 674 TFLOP/s; 2048³ −1.4 %), although it reads half of
/// B from L2, and slower where they do not (the last pair's second CTA computes zeros): no
/// shape gains enough to choose it (docs/PERF.md).
fn prefer_pairs(_m: usize, _n: usize, _k: usize, _batch: usize, _sms: u32) -> bool {
    false
}

/// Whether [`Consumers::Auto`] runs ping-pong for this shape on `sms` SMs (measured on the
/// H200, docs/PERF.md, both arrangements forced in one process):
/// - 128 × 256 tiles for at most half the SMs (the cooperative kernel splits K or leaves SMs
///   idle): ping-pong's 64-row tiles double the CTAs that work without a fix-up, and win once
///   they fill ≥ 40 % of the SMs (M = 128: N = 7168, 11008, 14336 gained 21 %, 25 %, 15 %;
///   N = 4096, 32 tiles, lost 8–38 % against the split). With one nearly full cooperative wave
///   (2048³: 128 tiles) cooperative was 1–3 % ahead;
/// - long persistent loops (≥ 10 cooperative tiles per SM) with K ≤ 4096, where the hidden
///   epilogue is a visible share of a tile: +1 % to +5 % (M = 4096 and 16384); at longer K, or
///   fewer tiles per SM, cooperative was equal or ahead (its 128-row tiles read B half as often);
/// - ping-pong's waves ≥ 95 % full where cooperative's are ≤ 90 % (1024 × 14336: 96 % against
///   84 %; ping-pong +2.4 to +3.5 % in three runs, ahead of the cooperative stream-K tail).
///   With ping-pong's own waves at 87–92 % (1152 and 2176 × 8192), cooperative was ahead.
fn prefer_pingpong(m: usize, n: usize, k: usize, batch: usize, sms: u32) -> bool {
    let sms = sms.max(1) as u64;
    let tiles_n = n.div_ceil(BLOCK_N as usize) as u64;
    let cooperative_tiles_m = (m.div_ceil(BLOCK_M as usize) * batch) as u64;
    let cooperative_tiles = cooperative_tiles_m * tiles_n;
    let pingpong_tiles = (m.div_ceil(PINGPONG_BLOCK_M as usize) * batch) as u64 * tiles_n;
    if cooperative_tiles * 2 <= sms {
        return pingpong_tiles * 5 >= sms * 2;
    }
    if cooperative_tiles >= 10 * sms && k <= 4096 {
        return true;
    }
    // Percent of the rounds of waves that is busy (100 × tiles / (rounds × SMs)).
    let fill = |tiles: u64| 100 * tiles / (tiles.div_ceil(sms) * sms);
    fill(pingpong_tiles) >= 95 && fill(cooperative_tiles) <= 90
}

/// Whether [`TileWidth::Auto`] runs 128 × 128 tiles for this shape on `sms` SMs: where the
/// schedule model (`modeled_iterations`: whole waves, and the last partial wave whole or split
/// by stream-K) says they finish at least 5 % sooner. A narrow iteration moves half a wide
/// one's work, and each narrow tile costs about 1.5 narrow iterations more in fixed overhead
/// (fill, epilogue); both fitted to the H200 with the variants forced in one process
/// (docs/PERF.md). The margin is there because the narrow tile reads 1.33× the L2 bytes per
/// FLOP: on a power-limited, hot card (1050–1560 MHz) it won wherever the model said so
/// (8192³ +2.9 %, 1152 × 8192 +4 %), but at 1980 MHz it lost 4–10 % on every shape with
/// more than a wave of wide tiles. Where the wide tiles quantise very badly it wins in both
/// regimes: few tiles (every M = 128 projection: +18 to +27 %, fewer CTAs per split tile,
/// half-size partials).
fn prefer_narrow(m: usize, n: usize, k: usize, batch: usize, sms: u32) -> bool {
    let (tiles_m, k_slices) = ((m.div_ceil(BLOCK_M as usize) * batch) as u64, k.div_ceil(BLOCK_K as usize) as u64);
    let narrow_tiles_n = n.div_ceil(NARROW_BLOCK_N as usize) as u64;
    let (Ok(tiles_m), Ok(k_slices), Ok(wide_n), Ok(narrow_n)) = (
        u32::try_from(tiles_m),
        u32::try_from(k_slices),
        u32::try_from(n.div_ceil(BLOCK_N as usize)),
        u32::try_from(narrow_tiles_n),
    ) else {
        return false;
    };
    let wide = modeled_iterations(tiles_m, wide_n, k_slices, sms) as u128;
    let narrow = modeled_iterations(tiles_m, narrow_n, k_slices, sms) as u128;
    let narrow_rounds = (tiles_m as u128 * narrow_n as u128).div_ceil(sms.max(1) as u128);
    // narrow/2 + 0.75 · rounds ≤ 0.95 · wide, in integers.
    20 * (2 * narrow + 3 * narrow_rounds) <= 19 * 4 * wide
}

#[cfg(test)]
mod tests {
    const H200_SMS: u32 = 132;

    #[test]
    fn every_type_pair_picks_its_own_entry() {
        let pairs =
            [("bf16", "bf16"), ("bf16", "f16"), ("bf16", "f32"), ("f16", "bf16"), ("f16", "f16"), ("f16", "f32")];
        for (i, (input, output)) in pairs.into_iter().enumerate() {
            assert_eq!(super::by_types(input, output, [0, 1, 2, 3, 4, 5]), i, "{input} → {output}");
            let entry = super::cooperative_entry(input, output).name();
            assert_eq!(entry, format!("gemm_{input}_{output}_ws_persistent_sm90"));
            let paths = [
                (crate::GemmPath::Skinny, "skinny"),
                (crate::GemmPath::Decode, "decode"),
                (crate::GemmPath::Gather, "gather"),
            ];
            for (path, kind) in paths {
                let entry = crate::gemm::decode::DecodeEntry::of(path, input, output).name();
                assert_eq!(entry, format!("gemm_{kind}_{input}_{output}_sm90"));
            }
        }
    }

    #[test]
    fn pingpong_is_chosen_where_it_measured_faster() {
        use super::prefer_pingpong;
        let pp = |m, n, k| prefer_pingpong(m, n, k, 1, H200_SMS);
        // M = 128: ping-pong once its 64-row tiles fill 40 % of the SMs; split K below that.
        assert!(pp(128, 14336, 4096) && pp(128, 11008, 4096) && pp(128, 7168, 2048));
        assert!(!pp(128, 4096, 4096) && !pp(128, 4096, 14336));
        // Long persistent loops with K ≤ 4096.
        assert!(pp(16384, 4096, 4096) && pp(16384, 7168, 2048) && pp(4096, 11008, 4096));
        assert!(!pp(16384, 4096, 11008) && !pp(8192, 8192, 8192));
        // A few waves: cooperative (and its stream-K tail).
        assert!(!pp(2048, 2048, 2048) && !pp(4096, 4096, 4096));
        assert!(!pp(1024, 11008, 4096) && !pp(1152, 8192, 4096));
        // Ping-pong's waves full where cooperative's are not; not where both are partial.
        assert!(pp(1024, 14336, 4096));
        assert!(!pp(2176, 8192, 4096) && !pp(4352, 8192, 4096) && !pp(1024, 7168, 2048));
        // Batches count like rows.
        assert_eq!(prefer_pingpong(128, 7168, 2048, 1, H200_SMS), prefer_pingpong(64, 7168, 2048, 2, H200_SMS));
    }

    #[test]
    fn narrow_tiles_are_chosen_where_they_measured_faster() {
        use super::prefer_narrow;
        let narrow = |m, n, k| prefer_narrow(m, n, k, 1, H200_SMS);
        // Few tiles: every M = 128 projection.
        for (n, k) in [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336), (7168, 2048)] {
            assert!(narrow(128, n, k), "128 × {n} × {k}");
        }
        // A partial last wave the narrow tiles fill much better (modelled ≥ 5 % sooner).
        assert!(narrow(1152, 8192, 4096) && narrow(1024, 11008, 4096));
        // Modelled 1–3.5 % sooner: inside the margin, wide (the narrow tile's win there
        // depended on the card's clock).
        assert!(!narrow(2176, 8192, 4096) && !narrow(6144, 6144, 6144) && !narrow(8192, 8192, 8192));
        assert!(!narrow(16384, 4096, 14336) && !narrow(1024, 14336, 4096));
        // Both tilings quantise the same: wide (narrow measured 1.5–4 % slower).
        assert!(!narrow(2048, 2048, 2048) && !narrow(4096, 4096, 4096) && !narrow(1024, 8192, 4096));
        assert!(!narrow(4096, 7168, 2048) && !narrow(1024, 7168, 2048) && !narrow(16384, 11008, 4096));
        // Batches count like rows; absurd sizes do not overflow.
        assert_eq!(prefer_narrow(128, 4096, 4096, 9, H200_SMS), prefer_narrow(1152, 4096, 4096, 1, H200_SMS));
        assert!(!prefer_narrow(usize::MAX / 2, 1 << 40, 1 << 40, 1, H200_SMS));
    }

    #[test]
    fn forced_variants_are_checked_and_auto_prefers_narrow_tiles() {
        use super::{Clusters, Consumers, GemmProblem, TileWidth, Variant};
        let with = |m, n, k, consumers, tile_width| GemmProblem { consumers, tile_width, ..GemmProblem::new(m, n, k) };
        let choose = |p: &GemmProblem, i: &str, o: &str| Variant::choose(p, i, o, H200_SMS);
        let auto = |m, n, k| {
            let v = choose(&with(m, n, k, Consumers::Auto, TileWidth::Auto), "bf16", "bf16").unwrap();
            (v.pingpong, v.narrow, v.pairs)
        };
        assert_eq!(auto(128, 4096, 4096), (false, true, false));
        assert_eq!(auto(128, 14336, 4096), (false, true, false), "narrow before ping-pong");
        assert_eq!(auto(16384, 11008, 4096), (true, false, false));
        assert_eq!(auto(4096, 4096, 4096), (false, false, false));
        // Types without the variants fall back to the wide cooperative kernel.
        let plain = with(128, 4096, 4096, Consumers::Auto, TileWidth::Auto);
        let v = choose(&plain, "bf16", "f32").unwrap();
        assert_eq!((v.pingpong, v.narrow, v.pairs), (false, false, false));
        assert_eq!(v.entry("bf16", "f32").name(), warpforge_abi::entries::GEMM_BF16_F32.name());
        // Forcing one choice steers the others' Auto.
        let pingpong = with(128, 4096, 4096, Consumers::PingPong, TileWidth::Auto);
        assert!(choose(&pingpong, "f16", "f16").unwrap().pingpong);
        assert!(!choose(&pingpong, "f16", "f16").unwrap().narrow);
        let narrow = with(4096, 4096, 4096, Consumers::Auto, TileWidth::Narrow);
        let v = choose(&narrow, "f16", "f16").unwrap();
        assert!(v.narrow && !v.pingpong && v.block_n() == 128);
        let pairs = GemmProblem { clusters: Clusters::Pairs, ..GemmProblem::new(128, 4096, 4096) };
        let v = choose(&pairs, "bf16", "bf16").unwrap();
        assert!(v.pairs && !v.narrow && !v.pingpong && v.b_box_rows() == 128);
        assert_eq!(v.entry("bf16", "bf16").name(), warpforge_abi::entries::GEMM_BF16_BF16_CLUSTER.name());
        let wide = with(128, 4096, 4096, Consumers::Auto, TileWidth::Wide);
        assert_eq!(
            choose(&wide, "bf16", "bf16").unwrap(),
            Variant { pingpong: false, narrow: false, pairs: false, ways: None }
        );
        // Refused: a variant the types lack, and combinations no entry runs.
        assert!(choose(&narrow, "bf16", "f32").is_err());
        assert!(choose(&pairs, "f16", "f32").is_err());
        assert!(choose(&with(128, 4096, 4096, Consumers::PingPong, TileWidth::Narrow), "bf16", "bf16").is_err());
        assert!(choose(&GemmProblem { tile_width: TileWidth::Narrow, ..pairs }, "bf16", "bf16").is_err());
        assert!(choose(&GemmProblem { consumers: Consumers::PingPong, ..pairs }, "bf16", "bf16").is_err());
    }
}
