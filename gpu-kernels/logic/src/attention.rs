//! Which keys a query sees in attention, and which key blocks a query tile visits: the mask
//! rules the kernel (`attention_sm90`), the host reference and the tests share.
//!
//! Causal masks are aligned to the bottom right (as FlashAttention 2+ and cuDNN): with `q_len`
//! queries and `k_len` keys, query `i` sees key `j` iff `j ≤ i + k_len − q_len`, so the last
//! query sees every key; when `q_len > k_len` the first `q_len − k_len` queries see none (their
//! output is 0 and their log-sum-exp `-inf`).

/// Whether query `q` sees key `key` (both 0-based within their sequence).
pub const fn visible(q: u32, key: u32, q_len: u32, k_len: u32, causal: bool) -> bool {
    // `&` and `|`, not `&&` and `||`: evaluated per score in the kernel, selects beat branches.
    (key < k_len) & (!causal | (key as u64 + q_len as u64 <= q as u64 + k_len as u64))
}

/// One past the last key any of the queries `q0 .. min(q0 + rows, q_len)` sees (0 when none
/// does).
pub const fn key_end(q0: u32, rows: u32, q_len: u32, k_len: u32, causal: bool) -> u32 {
    if !causal {
        return k_len;
    }
    let last_q = if (q0 as u64 + rows as u64) < q_len as u64 { q0 + rows } else { q_len };
    // Keys ≤ last_q − 1 + k_len − q_len, i.e. fewer than last_q + k_len − q_len.
    let end = last_q as i64 + k_len as i64 - q_len as i64;
    if end <= 0 {
        0
    } else if end >= k_len as i64 {
        k_len
    } else {
        end as u32
    }
}

/// Key blocks of `block_n` a query tile of `rows` rows at `q0` visits: every block holding a
/// key one of its queries sees, and at least one (a tile whose queries see nothing still runs
/// one fully masked block, so every tile takes the same path through the pipeline).
pub const fn kv_blocks(q0: u32, rows: u32, q_len: u32, k_len: u32, causal: bool, block_n: u32) -> u32 {
    let end = key_end(q0, rows, q_len, k_len, causal);
    let blocks = end.div_ceil(block_n);
    if blocks == 0 { 1 } else { blocks }
}

/// Whether key block `block` needs masking for the queries `q0 .. q0 + rows` (some key of the
/// block is past `k_len`, or, causal, past the diagonal of the tile's first query). When this
/// is false every query of the rows sees every key of the block.
pub const fn block_needs_mask(block: u32, block_n: u32, q0: u32, q_len: u32, k_len: u32, causal: bool) -> bool {
    let last_key = block as u64 * block_n as u64 + block_n as u64 - 1;
    last_key >= k_len as u64 || (causal && last_key + q_len as u64 > q0 as u64 + k_len as u64)
}

/// Where one sequence's rows lie in its sequence slice of the (head_dim, heads, rows,
/// sequences) tensors, and how many there are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// First row of its queries (in Q and O).
    pub q_base: u32,
    /// Its queries.
    pub q_len: u32,
    /// First row of its keys (in K and V).
    pub k_base: u32,
    /// Its keys.
    pub k_len: u32,
}

impl Sequence {
    /// A sequence of a fixed-length batch: its rows start at 0 of its own sequence slice of the
    /// tensors (the kernel selects the slice by the batch index).
    pub const fn fixed(seq_q: u32, seq_k: u32) -> Self {
        Sequence { q_base: 0, q_len: seq_q, k_base: 0, k_len: seq_k }
    }

    /// The sequence between cumulative offsets `q0..q1` (queries) and `k0..k1` (keys). The
    /// offsets are device data no one checked, so they are clamped: the queries never extend
    /// past `total_q` rows (nothing is written outside O or the LSE) nor past `max_q`, the keys
    /// never past `max_k` (the longest sequences, which bound the grid and the key loop), and
    /// decreasing offsets give an empty sequence.
    pub const fn from_offsets(q0: u32, q1: u32, k0: u32, k1: u32, max_q: u32, max_k: u32, total_q: u32) -> Self {
        let q_len = min(min(q1.saturating_sub(q0), max_q), total_q.saturating_sub(q0));
        Sequence { q_base: q0, q_len, k_base: k0, k_len: min(k1.saturating_sub(k0), max_k) }
    }
}

/// The attention launch's work: one tile per (query tile of `BLOCK_M` rows, query head,
/// sequence), numbered in bands of `band` (key/value head, sequence) pairs. Within a band the
/// query tiles go last first (causal tiles with the most key blocks first), and at each query
/// tile a GQA group's heads are fastest, then the band's pairs; the bands follow one another,
/// key/value heads before sequences. With `band` = 1 consecutive tiles share one pair's K/V
/// (every query tile of a head side by side); a wider band sorts more of the work longest
/// first, so the tiles claimed last on a persistent grid (`schedule::claims`) are short ones,
/// while its pairs' K/V still fits in L2 ([`AttentionTiles::band_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionTiles {
    /// Query tiles per sequence.
    pub q_tiles: u32,
    /// Query heads per key/value head.
    pub group: u32,
    /// Key/value heads.
    pub heads_kv: u32,
    /// Sequences.
    pub batch: u32,
    /// (Key/value head, sequence) pairs per band (0 counts as 1; more than there are, as all).
    pub band: u32,
}

/// Fewest query tiles per sequence for which unequal tiles are banded: on the H200 (causal,
/// bf16, docs/PERF.md 2026-12-04) bands gained 2–3 % from S = 2k up, nothing at 1k, and cost
/// 7 % at S = 512, d = 128 (4 query tiles), for a reason not measured.
pub const MIN_BANDED_Q_TILES: u32 = 8;

/// Where tile `t` of an [`AttentionTiles`] works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionTile {
    /// The query tile within its sequence (its first query is `tile · BLOCK_M`).
    pub tile: u32,
    /// The query head.
    pub head: u32,
    /// The key/value head (`head / group`).
    pub kv_head: u32,
    /// The sequence.
    pub batch: u32,
}

impl AttentionTiles {
    /// How many tiles there are (the host keeps it below 2^31).
    pub const fn count(&self) -> u32 {
        self.q_tiles * self.group * self.heads_kv * self.batch
    }

    /// The launch's 1-D grid: a persistent grid of at most one CTA per SM claiming tiles
    /// (`schedule::claims`: the next tile goes to whichever CTA frees first, and the producer
    /// loads a tile's Q and first keys while the consumers finish the one before), or one CTA
    /// per tile when `persistent` is false.
    pub const fn grid(&self, persistent: bool, sm_count: u32) -> u32 {
        let (count, sms) = (self.count(), max1(sm_count));
        if persistent && count > sms { sms } else { count }
    }

    /// The band for tiles of unequal length (causal, variable length) of `q_tiles` query
    /// tiles: as many pairs as keep their K/V (`kv_bytes_per_pair`, at the longest sequence)
    /// within a third of the L2, at least 1 and at most every pair. Band 1 below
    /// [`MIN_BANDED_Q_TILES`] query tiles, and for equal tiles (sorting them gains nothing).
    pub const fn band_for(l2_bytes: u64, kv_bytes_per_pair: u64, pairs: u32, q_tiles: u32) -> u32 {
        if q_tiles < MIN_BANDED_Q_TILES {
            return 1;
        }
        let fit = l2_bytes / 3 / if kv_bytes_per_pair == 0 { 1 } else { kv_bytes_per_pair };
        let fit = if fit > pairs as u64 { pairs as u64 } else { fit };
        if fit == 0 { 1 } else { fit as u32 }
    }

    /// Tile `t` (< [`Self::count`]). `max(1)`: no division by zero on any input (a group or a
    /// tile count of 0 never reaches here from the host).
    pub const fn get(&self, t: u32) -> AttentionTile {
        let (group, q_tiles, heads_kv) = (max1(self.group), max1(self.q_tiles), max1(self.heads_kv));
        let pairs = heads_kv * max1(self.batch);
        let band = min(max1(self.band), pairs);
        let per_band = band * q_tiles * group;
        let (first_pair, r) = ((t / per_band) * band, t % per_band);
        // The last band may hold fewer pairs.
        let level_width = min(band, pairs - first_pair) * group;
        let (level, x) = (r / level_width, r % level_width);
        let pair = first_pair + x / group;
        let (kv_head, batch) = (pair % heads_kv, pair / heads_kv);
        AttentionTile { tile: q_tiles - 1 - level, head: kv_head * group + x % group, kv_head, batch }
    }
}

const fn max1(v: u32) -> u32 {
    if v == 0 { 1 } else { v }
}

const fn min(a: u32, b: u32) -> u32 {
    if a < b { a } else { b }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    proptest! {
        #[test]
        fn visited_blocks_cover_every_visible_key_and_unmasked_blocks_are_fully_visible(
            q_len in 1u32..400, k_len in 1u32..400, causal: bool, tile in 0u32..4,
            rows in prop::sample::select(vec![64u32, 128]), block_n in prop::sample::select(vec![64u32, 80, 128]),
        ) {
            let q0 = tile * rows;
            prop_assume!(q0 < q_len);
            let blocks = kv_blocks(q0, rows, q_len, k_len, causal, block_n);
            prop_assert!(blocks >= 1);
            for q in q0..(q0 + rows).min(q_len) {
                for key in 0..k_len {
                    if visible(q, key, q_len, k_len, causal) {
                        prop_assert!(key < blocks * block_n, "q{} key{} outside {} blocks", q, key, blocks);
                    }
                }
            }
            // A non-empty tile never visits a block of keys none of its queries sees.
            let end = key_end(q0, rows, q_len, k_len, causal);
            if end > 0 {
                prop_assert!((blocks - 1) * block_n < end);
            }
            for half in [0, rows / 2] {
                for block in 0..blocks {
                    if !block_needs_mask(block, block_n, q0 + half, q_len, k_len, causal) {
                        for q in q0 + half..q0 + rows {
                            for key in block * block_n..(block + 1) * block_n {
                                prop_assert!(visible(q, key, q_len, k_len, causal), "q{} key{}", q, key);
                            }
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn offsets_never_reach_past_the_rows(q0: u32, q1: u32, k0: u32, k1: u32, max_q in 1u32..5000, max_k in 1u32..5000, total_q in 1u32..100_000) {
            let s = Sequence::from_offsets(q0, q1, k0, k1, max_q, max_k, total_q);
            prop_assert!(s.q_len <= max_q && s.k_len <= max_k);
            if s.q_len > 0 {
                prop_assert!(s.q_base as u64 + s.q_len as u64 <= total_q as u64);
            }
            if q0 <= q1 && q1 <= total_q && q1 - q0 <= max_q && k0 <= k1 && k1 - k0 <= max_k {
                prop_assert_eq!((s.q_len, s.k_len), (q1 - q0, k1 - k0), "valid offsets are kept");
            }
        }
    }

    proptest! {
        #[test]
        fn attention_tiles_cover_every_tile_once_longest_first_within_a_band(
            q_tiles in 1u32..9, group in 1u32..5, heads_kv in 1u32..4, batch in 1u32..4, band in 0u32..14,
        ) {
            let tiles = AttentionTiles { q_tiles, group, heads_kv, batch, band };
            let pairs = heads_kv * batch;
            let width = band.clamp(1, pairs);
            let mut seen = std::collections::BTreeSet::new();
            for t in 0..tiles.count() {
                let w = tiles.get(t);
                prop_assert!(w.tile < q_tiles && w.head < group * heads_kv && w.batch < batch);
                prop_assert_eq!(w.kv_head, w.head / group);
                prop_assert!(seen.insert((w.tile, w.head, w.batch)), "tile {} repeats {:?}", t, w);
                // The band is the pair's: the band's pairs are consecutive, kv heads first.
                let pair = w.batch * heads_kv + w.kv_head;
                prop_assert_eq!(pair / width, t / (width * q_tiles * group), "tile {} {:?}", t, w);
                if t % group != 0 {
                    // The next head of the same group on the same query tile and sequence.
                    let before = tiles.get(t - 1);
                    prop_assert_eq!((w.tile, w.kv_head, w.batch, w.head), (before.tile, before.kv_head, before.batch, before.head + 1));
                }
                if t > 0 && (t - 1) / (width * q_tiles * group) == t / (width * q_tiles * group) {
                    // Within a band, query tiles never grow: the longest first.
                    prop_assert!(tiles.get(t - 1).tile >= w.tile);
                }
            }
            prop_assert_eq!(seen.len() as u32, q_tiles * group * heads_kv * batch);
            prop_assert_eq!(tiles.get(0).tile, q_tiles - 1);
            // The band of every pair at once ends on the shortest tiles: the last
            // `pairs · group` tiles are all query tile 0.
            if band >= pairs {
                let last = tiles.count() - pairs * group;
                prop_assert!((last..tiles.count()).all(|t| tiles.get(t).tile == 0));
            }
        }

        #[test]
        fn band_one_is_a_heads_query_tiles_side_by_side(
            q_tiles in 1u32..9, group in 1u32..5, heads_kv in 1u32..4, batch in 1u32..4,
        ) {
            let tiles = AttentionTiles { q_tiles, group, heads_kv, batch, band: 1 };
            for t in 0..tiles.count() {
                // Tile t: head group fastest, then the query tiles last first, then the pairs.
                let (per_pair, w) = (q_tiles * group, tiles.get(t));
                let (pair, x) = (t / per_pair, t % per_pair);
                prop_assert_eq!(
                    (w.tile, w.head, w.batch),
                    (q_tiles - 1 - x / group, (pair % heads_kv) * group + x % group, pair / heads_kv)
                );
            }
        }

        #[test]
        fn a_persistent_grid_holds_at_most_one_cta_per_sm(count in 1u32..2000, sm_count in 0u32..200, persistent: bool) {
            let tiles = AttentionTiles { q_tiles: count, group: 1, heads_kv: 1, batch: 1, band: 1 };
            let grid = tiles.grid(persistent, sm_count);
            prop_assert!(grid >= 1 && grid <= count);
            prop_assert_eq!(grid, if persistent { count.min(sm_count.max(1)) } else { count });
        }

        #[test]
        fn a_band_fits_a_third_of_the_l2(
            l2 in 0u64..1 << 30, per_pair in 0u64..1 << 32, pairs in 1u32..100_000, q_tiles in 0u32..300,
        ) {
            let band = AttentionTiles::band_for(l2, per_pair, pairs, q_tiles);
            prop_assert!(band >= 1 && band <= pairs);
            if q_tiles < MIN_BANDED_Q_TILES {
                prop_assert_eq!(band, 1);
            } else {
                prop_assert!(band == 1 || band as u64 * per_pair.max(1) <= l2 / 3);
                prop_assert!(band == pairs || (band as u64 + 1) * per_pair.max(1) > l2 / 3);
            }
        }
    }

    #[test]
    fn eighty_key_blocks() {
        // Head dimension 256 walks the keys in blocks of 80: 300 keys are 4 blocks (the last
        // holds keys 240..320, 20 of them past the end), 320 keys exactly 4.
        assert_eq!(kv_blocks(0, 128, 128, 300, false, 80), 4);
        assert_eq!(kv_blocks(0, 128, 128, 320, false, 80), 4);
        assert_eq!(kv_blocks(0, 128, 128, 321, false, 80), 5);
        assert!(block_needs_mask(3, 80, 0, 128, 300, false) && !block_needs_mask(2, 80, 0, 128, 300, false));
        assert!(!block_needs_mask(3, 80, 0, 128, 320, false));
        // Causal, 300 × 300: the tile of queries 128..256 sees keys < 256, i.e. blocks 0..=3
        // (block 3 is keys 240..320, cut by the diagonal); its first half (queries 128..192,
        // the first seeing keys ≤ 128) needs no mask on block 0 but does on block 1 (80..160).
        assert_eq!(kv_blocks(128, 128, 300, 300, true, 80), 4);
        assert!(!block_needs_mask(0, 80, 128, 300, 300, true) && block_needs_mask(1, 80, 128, 300, 300, true));
        // The second half (queries 192..256) sees keys ≤ 192 unmasked on blocks 0 and 1; block 2
        // (keys 160..240) needs a mask.
        assert!(!block_needs_mask(1, 80, 192, 300, 300, true) && block_needs_mask(2, 80, 192, 300, 300, true));
        // Bottom-right with more keys than queries: 100 queries, 1000 keys; the first query
        // sees keys ≤ 900, so a 128-row tile visits ⌈1000 / 80⌉ = 13 blocks and block 11
        // (keys 880..960) is the first that the diagonal cuts.
        assert_eq!(kv_blocks(0, 128, 100, 1000, true, 80), 13);
        assert!(!block_needs_mask(10, 80, 0, 100, 1000, true) && block_needs_mask(11, 80, 0, 100, 1000, true));
    }

    #[test]
    fn bottom_right_alignment() {
        // 2 queries, 5 keys: query 0 sees keys 0..=3, query 1 all five.
        assert!(visible(0, 3, 2, 5, true) && !visible(0, 4, 2, 5, true) && visible(1, 4, 2, 5, true));
        // 5 queries, 2 keys: queries 0..=2 see nothing, query 3 sees key 0.
        assert!(!visible(2, 0, 5, 2, true) && visible(3, 0, 5, 2, true) && !visible(3, 1, 5, 2, true));
        assert_eq!(key_end(0, 2, 5, 2, true), 0);
        assert_eq!(kv_blocks(0, 2, 5, 2, true, 128), 1);
        assert_eq!(key_end(0, 128, 300, 300, true), 128);
        assert_eq!(kv_blocks(128, 128, 300, 300, true, 128), 2);
        assert_eq!(kv_blocks(0, 128, 300, 1000, false, 128), 8);
    }
}
