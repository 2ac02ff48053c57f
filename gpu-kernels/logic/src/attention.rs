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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    proptest! {
        #[test]
        fn visited_blocks_cover_every_visible_key_and_unmasked_blocks_are_fully_visible(
            q_len in 1u32..400, k_len in 1u32..400, causal: bool, tile in 0u32..4,
            rows in prop::sample::select(vec![64u32, 128]), block_n in prop::sample::select(vec![64u32, 128]),
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
