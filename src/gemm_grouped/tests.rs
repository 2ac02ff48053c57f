//! CPU tests of the grouped GEMMs' rules: both layouts' extents and refusals, the routing
//! helpers, the index checks and the data-parallel plan.

use super::*;

fn refused(result: Result<GroupedExtents>, words: &str) {
    match result {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg} (wanted {words})"),
        other => panic!("should be refused ({words}), got {other:?}"),
    }
}

#[test]
fn contiguous_rules_and_extents() {
    let p = GroupedContiguousProblem { rows: 384, n: 200, k: 136, experts: 4 };
    let e = p.check(false).unwrap();
    assert_eq!((e.batches, e.rows, e.a, e.b, e.d, e.groups), (1, 384, 384 * 136, 4 * 200 * 136, 384 * 200, 384));
    assert_eq!((e.a_scales_stride, e.b_scales_stride), (0, 0));
    refused(GroupedContiguousProblem { rows: 100, ..p }.check(false), "multiple of 128");
    refused(GroupedContiguousProblem { rows: 0, ..p }.check(false), "multiple of 128");
    refused(GroupedContiguousProblem { experts: 0, ..p }.check(false), "experts, N ≥ 1");
    refused(GroupedContiguousProblem { n: 0, ..p }.check(false), "experts, N ≥ 1");
    refused(GroupedContiguousProblem { k: 12, ..p }.check(false), "multiple of 8");
    // FP8 needs 16-element K rows; its scales per expert.
    refused(GroupedContiguousProblem { k: 136, ..p }.check(true), "multiple of 16");
    let e = GroupedContiguousProblem { k: 144, ..p }.check(true).unwrap();
    assert_eq!((e.a_scales_stride, e.b_scales_stride, e.a_scales(), e.b_scales()), (384 * 2, 2 * 2, 768, 16));
    refused(GroupedContiguousProblem { rows: 1 << 31, ..p }.check(false), "< 2^31");
    refused(GroupedContiguousProblem { rows: 1 << 20, k: 1 << 12, ..p }.check(false), "2^31");
}

#[test]
fn masked_rules_and_extents() {
    let p = GroupedMaskedProblem { experts: 3, capacity: 70, n: 256, k: 256 };
    let e = p.check(true).unwrap();
    assert_eq!((e.batches, e.rows, e.groups), (3, 70, 3));
    assert_eq!((e.a, e.b, e.d), (3 * 70 * 256, 3 * 256 * 256, 3 * 70 * 256));
    // A's scales per expert: round_up(70, 4) rows × 2 K blocks.
    assert_eq!((e.a_scales_stride, e.a_scales(), e.b_scales_stride, e.b_scales()), (72 * 2, 3 * 144, 4, 12));
    refused(GroupedMaskedProblem { capacity: 0, ..p }.check(false), "capacity ≥ 1");
    // Every expert's B scales together go through one TMA coordinate (2^18 · 2^13 = 2^31).
    let many = GroupedMaskedProblem { experts: 1 << 18, capacity: 1, n: 1 << 13, k: 1 << 14 };
    refused(many.check(true), "B's scales number 2147483648");
    assert!(many.check(false).is_ok(), "16-bit inputs have no scales");
    assert!(GroupedMaskedProblem { experts: (1 << 18) - 1, ..many }.check(true).is_ok());
    refused(GroupedMaskedProblem { experts: 0, ..p }.check(false), "experts, N ≥ 1");
}

#[test]
fn routings_pad_each_expert_to_the_tile() {
    let r = ContiguousRows::from_counts(&[3, 0, 128, 129]).unwrap();
    assert_eq!(r.offsets, vec![0, 128, 128, 256, 512]);
    assert_eq!(r.indices.len(), 512);
    assert!(r.indices[..3].iter().all(|&e| e == 0) && r.indices[3..128].iter().all(|&e| e == -1));
    assert!(r.indices[128..256].iter().all(|&e| e == 2));
    assert!(r.indices[256..385].iter().all(|&e| e == 3) && r.indices[385..].iter().all(|&e| e == -1));
    check_contiguous_indices(&r.indices, 4).unwrap();
    assert!(ContiguousRows::from_counts(&[]).is_err());
    assert!(ContiguousRows::from_counts(&[usize::MAX]).is_err());
}

#[test]
fn mixed_or_out_of_range_blocks_are_named() {
    let mut indices = ContiguousRows::from_counts(&[130, 5]).unwrap().indices;
    check_contiguous_indices(&indices, 2).unwrap();
    let refused = |indices: &[i32], experts: usize, words: &str| match check_contiguous_indices(indices, experts) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg}"),
        other => panic!("accepted ({words}): {other:?}"),
    };
    refused(&indices, 1, "neither -1 nor below 1");
    refused(&indices[..100], 2, "multiple of 128");
    indices[140] = 1; // expert 0's second block, after its padding began
    refused(&indices, 2, "mixes experts");
    indices[140] = -1;
    indices[5] = 1; // inside expert 0's first block
    refused(&indices, 2, "rows 0..128");
}

#[test]
fn plans_cover_every_tile_data_parallel() {
    let e = GroupedMaskedProblem { experts: 8, capacity: 300, n: 4096, k: 7168 }.check(false).unwrap();
    let (grid, plan) = grouped_plan(&e, (128, 256), 112, 132).unwrap();
    // 8 experts × 3 tile rows × 16 tile columns.
    assert_eq!((grid, plan.raster.tile_count(), plan.raster_rows), (132, 8 * 3 * 16, 3));
    assert_eq!(plan.units.stream_k_tiles(), 0);
    let e = GroupedContiguousProblem { rows: 128, n: 100, k: 16, experts: 1 }.check(true).unwrap();
    let (grid, plan) = grouped_plan(&e, (128, 128), 1, 132).unwrap();
    assert_eq!((grid, plan.raster.tile_count(), plan.raster_rows), (1, 1, 1));
    // Wide FP8 tiles: 32 experts of 48 rows, one 64-row tile row each, 16 tiles of 256 columns.
    let e = GroupedMaskedProblem { experts: 32, capacity: 48, n: 4096, k: 7168 }.check(true).unwrap();
    let (grid, plan) = grouped_plan(&e, (64, 256), 56, 132).unwrap();
    assert_eq!((grid, plan.raster.tile_count(), plan.raster_rows), (132, 32 * 16, 1));
}

#[test]
fn wide_tiles_only_for_masked_fp8_capacities_within_one_tile_row() {
    let masked = |capacity| GroupedMaskedProblem { experts: 4, capacity, n: 4096, k: 7168 }.check(true).unwrap();
    assert!(prefer_fp8_grouped_wide(&masked(1)) && prefer_fp8_grouped_wide(&masked(64)));
    assert!(!prefer_fp8_grouped_wide(&masked(65)) && !prefer_fp8_grouped_wide(&masked(1024)));
    let contiguous = GroupedContiguousProblem { rows: 128, n: 4096, k: 7168, experts: 4 }.check(true).unwrap();
    assert!(!prefer_fp8_grouped_wide(&contiguous));
    // The second B scale box of the last expert's last wide tile must be one TMA coordinate:
    // 2^22 − 1 experts of 512 K blocks are 2^31 − 512 scales, plus one expert's K blocks 2^31.
    let edge = GroupedMaskedProblem { experts: (1 << 22) - 1, capacity: 8, n: 128, k: 1 << 16 }.check(true).unwrap();
    assert_eq!(edge.b_scales(), (1 << 31) - 512);
    assert!(!prefer_fp8_grouped_wide(&edge));
    let fits = GroupedMaskedProblem { experts: (1 << 22) - 2, capacity: 8, n: 128, k: 1 << 16 };
    assert!(prefer_fp8_grouped_wide(&fits.check(true).unwrap()));
}
