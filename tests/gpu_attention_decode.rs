//! The decode path of `Warpforge::attention` (`abi::attention_decode`: at most 16 query rows,
//! `seq_q × group`, per key/value head, head dimensions 64 and 128) against the float64
//! reference of `gpu_attention`: one query with GQA groups 1 to 16, a few speculative queries,
//! key counts around the 16-key steps, the 64-key split grain and several splits, causal masks
//! that hide every key from the first queries, and variable-length batches with empty and
//! one-key sequences. O and the LSE are poisoned first (every row written, nothing past the
//! end). The problems just past 16 rows run the tiled kernel beside them.

use half::{bf16, f16};

use crate::gpu_attention::{check_fixed, check_varlen};

/// One query per sequence (a decode step): every group size up to 16 rows, keys on and off
/// the steps and splits, a long cache split over many CTAs.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn one_query_per_sequence_matches_the_f64_reference() {
    check_fixed(&[
        (1, 1, 1, 1, 1, 64, false),
        (3, 4, 1, 1, 15, 128, false),
        (2, 8, 2, 1, 16, 64, true),
        (1, 16, 1, 1, 17, 128, false),
        (5, 8, 1, 1, 63, 128, true),
        (2, 32, 4, 1, 65, 64, false),
        (4, 16, 2, 1, 1025, 128, false),
        (2, 8, 1, 1, 5000, 64, false),
        (1, 4, 4, 1, 20000, 128, true),
        (16, 32, 4, 1, 3001, 128, false),
    ]);
}

/// A few queries per sequence (speculative decoding, short chunks): causal masks aligned to the
/// bottom right, queries beyond the keys (the first ones see none), and the first problems past
/// 16 rows (the tiled kernel).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_few_queries_per_sequence_match_the_f64_reference() {
    check_fixed(&[
        (2, 4, 1, 4, 700, 128, true),
        (1, 8, 4, 2, 1500, 64, true),
        (3, 2, 2, 16, 300, 128, true),
        (1, 1, 1, 16, 9, 64, true),
        (2, 4, 1, 4, 2, 128, true),
        (1, 1, 1, 17, 300, 128, true),
        (1, 8, 1, 3, 100, 64, false),
    ]);
}

/// Variable-length decode batches: one or two queries per sequence, caches of 0, 1 and
/// thousands of keys, GQA 8 (16 rows at most), both head dimensions and types.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn variable_length_decode_batches_match_the_f64_reference() {
    let lens = [(1, 0), (1, 1), (0, 5), (2, 3000), (1, 17), (2, 2)];
    for (head_dim, causal) in [(64, false), (128, true), (128, false)] {
        check_varlen::<bf16>(&lens, 2, 8, head_dim, causal, 11);
        check_varlen::<f16>(&lens, 1, 8, head_dim, causal, 12);
    }
    check_varlen::<bf16>(&[(1, 4000), (1, 64), (1, 1)], 4, 1, 128, false, 13);
}
