//! The grouped MoE GEMMs (`Warpforge::{grouped_gemm, fp8_grouped_gemm}_{contiguous, masked}`) on
//! the GPU against a float64 CPU product per expert, over random routings: experts with no rows,
//! one row, exactly a tile, a tile and one; ragged N; K a multiple of 8 (bf16) or 16 (FP8) and
//! often not of the K slice; masked counts that are negative or past the capacity; padding
//! blocks and out-of-range indices (skipped). Every row of D is checked: a tile with an expert
//! writes all its rows with `A_row · B_expertᵀ`, a skipped tile leaves D's poison untouched.
//!
//! Tolerances: bf16 as the dense GEMM's (`2·K·u_f32·Σ|ab|` for the f32 sum, the bf16 rounding);
//! FP8 as the dense FP8 GEMM's (`tests/gpu_fp8_gemm.rs`: the tensor cores' in-block sums, the
//! promotion, the bf16 rounding) on the dequantised inputs. A reference that uses the next
//! expert's weight fails both (`*_wrong_expert_*`), so the check sees which B a tile used.

use cudarc::driver::CudaSlice;
use half::bf16;
use proptest::prelude::*;
use warpforge::logic::blockscaled::k_blocks;
use warpforge::logic::quant::{self as q, Minifloat};
use warpforge::logic::schedule::grouped::{contiguous_expert, masked_tile_has_rows};
use warpforge::{ContiguousRows, Error, GroupedContiguousProblem, GroupedMaskedProblem, check_contiguous_indices};

use crate::common::{EPS_BF16, EPS_F32, gpu, mix, random_f32};
use crate::gpu_fp8_gemm::{BLOCK_SUM_ERR, inputs, quantise_a, quantise_b};

const GPU_CASES: u32 = 16;
/// What D holds before the call: a bf16 NaN whose bits no result has.
const POISON: u16 = 0x7fc1;
const TILE_ROWS: usize = 128;

/// The routing of one case, in either layout.
#[derive(Clone, Debug)]
enum Routing {
    /// Per-row expert indices (multiple of 128 rows).
    Contiguous(Vec<i32>),
    /// Capacity and per-expert device counts (clamped by the kernel).
    Masked { capacity: usize, counts: Vec<i32> },
}

impl Routing {
    /// A's and D's batches and rows per batch.
    fn shape(&self, experts: usize) -> (usize, usize) {
        match self {
            Routing::Contiguous(indices) => (1, indices.len()),
            Routing::Masked { capacity, .. } => (experts, *capacity),
        }
    }

    /// The expert whose weight row `row` of batch `batch` is multiplied by, or `None` where D
    /// stays untouched: the tile's rule (`logic::schedule::grouped`).
    fn expert_of(&self, experts: usize, batch: usize, row: usize) -> Option<usize> {
        let tile_row0 = row / TILE_ROWS * TILE_ROWS;
        match self {
            Routing::Contiguous(indices) => contiguous_expert(indices[tile_row0], experts as u32).map(|e| e as usize),
            Routing::Masked { capacity, counts } => {
                masked_tile_has_rows(tile_row0 as u32, counts[batch], *capacity as u32).then_some(batch)
            }
        }
    }

    fn groups(&self) -> Vec<i32> {
        match self {
            Routing::Contiguous(indices) => indices.clone(),
            Routing::Masked { counts, .. } => counts.clone(),
        }
    }
}

/// One case: the routing, N, K, and the operands as f64 (dequantised for FP8), A
/// `[batches · rows, K]`, B `[experts · N, K]`.
struct Case {
    routing: Routing,
    experts: usize,
    n: usize,
    k: usize,
    a: Vec<f64>,
    b: Vec<f64>,
}

impl Case {
    /// The float64 value and tolerance of D at (`batch`, `row`, `col`) for `expert`.
    fn expect(&self, batch: usize, row: usize, col: usize, expert: usize, fp8: bool) -> (f64, f64) {
        let (rows, k) = (self.routing.shape(self.experts).1, self.k);
        let a = &self.a[(batch * rows + row) * k..][..k];
        let b = &self.b[(expert * self.n + col) * k..][..k];
        let (dot, mag) = a.iter().zip(b).fold((0.0, 0.0), |(s, m), (x, y)| (s + x * y, m + (x * y).abs()));
        let sum_err = if fp8 {
            (BLOCK_SUM_ERR + (k_blocks(k) + 2) as f64 * EPS_F32) * mag
        } else {
            2.0 * k as f64 * EPS_F32 * mag
        };
        (dot, EPS_BF16 * dot.abs() + 1.01 * sum_err + 2.0 * f32::MIN_POSITIVE as f64)
    }

    /// Every element of D (`[batches · rows, N]`) checked; `shift` adds to the expert the
    /// reference uses (0 for the true reference). The first miss, described.
    fn first_miss(&self, got: &[bf16], fp8: bool, shift: usize) -> Option<String> {
        self.first_miss_every(got, fp8, shift, 1)
    }

    /// As [`Case::first_miss`], the reference computed at one element in `every` of each row
    /// (a diagonal pattern, so every column is checked in some row); skipped tiles are checked
    /// in full.
    fn first_miss_every(&self, got: &[bf16], fp8: bool, shift: usize, every: usize) -> Option<String> {
        let (batches, rows) = self.routing.shape(self.experts);
        let n = self.n;
        (0..batches * rows).find_map(|r| {
            let (batch, row) = (r / rows, r % rows);
            let expert = self.routing.expert_of(self.experts, batch, row);
            (0..n).find_map(|col| {
                let g = got[r * n + col];
                match expert {
                    None => {
                        (g.to_bits() != POISON).then(|| format!("D[{batch}, {row}, {col}] written in a skipped tile"))
                    }
                    Some(_) if (r + col) % every != 0 => None,
                    Some(e) => {
                        let (want, tol) = self.expect(batch, row, col, (e + shift) % self.experts, fp8);
                        let v = g.to_f64();
                        ((v - want).abs() > tol || !v.is_finite())
                            .then(|| format!("D[{batch}, {row}, {col}] (expert {e}) = {v:e}, want {want:e} ± {tol:e}"))
                    }
                }
            })
        })
    }
}

/// A routing of `experts` experts: counts 0, 1, a tile, a tile + 1 or random up to 300.
fn counts(seed: u64, experts: usize) -> Vec<usize> {
    (0..experts)
        .map(|e| match mix(seed ^ e as u64) % 6 {
            0 => 0,
            1 => 1,
            2 => TILE_ROWS,
            3 => TILE_ROWS + 1,
            _ => (mix(seed.wrapping_add(e as u64)) % 300) as usize,
        })
        .collect()
}

/// A contiguous routing of `counts` with one extra padding block and one block of an
/// out-of-range index at the end (both skipped).
fn contiguous_routing(counts: &[usize]) -> Routing {
    let mut indices = ContiguousRows::from_counts(counts).unwrap().indices;
    indices.extend(std::iter::repeat_n(-1, TILE_ROWS));
    indices.extend(std::iter::repeat_n(counts.len() as i32 + 7, TILE_ROWS));
    Routing::Contiguous(indices)
}

/// A masked routing: capacity from the seed; counts from `counts`, with some negative and
/// some past the capacity.
fn masked_routing(seed: u64, counts: &[usize]) -> Routing {
    masked_routing_within(seed, counts, 1 + (mix(seed) % 400) as usize)
}

/// As [`masked_routing`], with the given capacity.
fn masked_routing_within(seed: u64, counts: &[usize], capacity: usize) -> Routing {
    let counts = counts
        .iter()
        .enumerate()
        .map(|(e, &c)| match mix(seed ^ (e as u64 * 31)) % 7 {
            0 => -4,
            1 => capacity as i32 + 100,
            _ => c.min(capacity) as i32,
        })
        .collect();
    Routing::Masked { capacity, counts }
}

/// Runs a bf16 case on the GPU and returns D.
fn run_bf16(routing: Routing, experts: usize, n: usize, k: usize, seed: u64) -> (Case, Vec<bf16>) {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (batches, rows) = routing.shape(experts);
    let a: Vec<bf16> = random_f32(seed, batches * rows * k, 1.0).into_iter().map(bf16::from_f32).collect();
    let b: Vec<bf16> = random_f32(!seed, experts * n * k, 1.0).into_iter().map(bf16::from_f32).collect();
    let a_dev = stream.clone_htod(&a).unwrap();
    let b_dev = stream.clone_htod(&b).unwrap();
    let groups = stream.clone_htod(&routing.groups()).unwrap();
    let mut d: CudaSlice<bf16> = stream.clone_htod(&vec![bf16::from_bits(POISON); batches * rows * n]).unwrap();
    match &routing {
        Routing::Contiguous(_) => {
            let p = GroupedContiguousProblem { rows, n, k, experts };
            wf.grouped_gemm_contiguous(stream, &p, &a_dev, &b_dev, &groups, &mut d).unwrap();
        }
        Routing::Masked { capacity, .. } => {
            let p = GroupedMaskedProblem { experts, capacity: *capacity, n, k };
            wf.grouped_gemm_masked(stream, &p, &a_dev, &b_dev, &groups, &mut d).unwrap();
        }
    }
    let got = stream.clone_dtoh(&d).unwrap();
    let to_f64 = |v: Vec<bf16>| v.into_iter().map(|x| x.to_f64()).collect();
    (Case { routing, experts, n, k, a: to_f64(a), b: to_f64(b) }, got)
}

/// Runs an FP8 case on the GPU (operands quantised on the CPU per batch of A and per expert of
/// B, with outliers) and returns D.
fn run_fp8(routing: Routing, experts: usize, n: usize, k: usize, seed: u64) -> (Case, Vec<bf16>) {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (batches, rows) = routing.shape(experts);
    let (mut a, mut a_scales, mut b, mut b_scales) = (vec![], vec![], vec![], vec![]);
    let (mut a_f64, mut b_f64) = (vec![], vec![]);
    let decode = |c: u8| Minifloat::E4m3.decode(c) as f64;
    for z in 0..batches {
        let (codes, scales) = quantise_a(&inputs(seed ^ z as u64, rows, k, true), rows, k);
        let pitch = q::group_scale_pitch(rows).unwrap();
        a_f64.extend(
            codes
                .iter()
                .enumerate()
                .map(|(i, &c)| decode(c) * scales[q::group_scale_index(i / k, (i % k) / q::GROUP, pitch)] as f64),
        );
        a.extend(codes);
        a_scales.extend(scales);
    }
    for e in 0..experts {
        let (codes, scales) = quantise_b(&inputs(!seed ^ e as u64, n, k, false), n, k);
        b_f64.extend(
            codes.iter().enumerate().map(|(i, &c)| decode(c) * scales[q::block_scale_index(i / k, i % k, k)] as f64),
        );
        b.extend(codes);
        b_scales.extend(scales);
    }
    let a_dev = stream.clone_htod(&a).unwrap();
    let sa = stream.clone_htod(&a_scales).unwrap();
    let b_dev = stream.clone_htod(&b).unwrap();
    let sb = stream.clone_htod(&b_scales).unwrap();
    let groups = stream.clone_htod(&routing.groups()).unwrap();
    let mut d: CudaSlice<bf16> = stream.clone_htod(&vec![bf16::from_bits(POISON); batches * rows * n]).unwrap();
    match &routing {
        Routing::Contiguous(_) => {
            let p = GroupedContiguousProblem { rows, n, k, experts };
            wf.fp8_grouped_gemm_contiguous(stream, &p, &a_dev, &sa, &b_dev, &sb, &groups, &mut d).unwrap();
        }
        Routing::Masked { capacity, .. } => {
            let p = GroupedMaskedProblem { experts, capacity: *capacity, n, k };
            wf.fp8_grouped_gemm_masked(stream, &p, &a_dev, &sa, &b_dev, &sb, &groups, &mut d).unwrap();
        }
    }
    let got = stream.clone_dtoh(&d).unwrap();
    (Case { routing, experts, n, k, a: a_f64, b: b_f64 }, got)
}

fn n_dim() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=300, Just(256), Just(512), Just(1000)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn grouped_bf16_contiguous_matches_f64(seed in any::<u64>(), experts in 1usize..=9, n in n_dim(), k8 in 1usize..=90) {
        let routing = contiguous_routing(&counts(seed, experts));
        let (case, got) = run_bf16(routing, experts, n, 8 * k8, seed);
        let miss = case.first_miss(&got, false, 0);
        prop_assert!(miss.is_none(), "experts {experts}, N {n}, K {}: {}", 8 * k8, miss.unwrap());
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn grouped_bf16_masked_matches_f64(seed in any::<u64>(), experts in 1usize..=9, n in n_dim(), k8 in 1usize..=90) {
        let routing = masked_routing(seed, &counts(seed, experts));
        let (case, got) = run_bf16(routing.clone(), experts, n, 8 * k8, seed);
        let miss = case.first_miss(&got, false, 0);
        prop_assert!(miss.is_none(), "{routing:?} N {n}, K {}: {}", 8 * k8, miss.unwrap());
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn grouped_fp8_contiguous_matches_f64(seed in any::<u64>(), experts in 1usize..=6, n in n_dim(), k16 in 1usize..=40) {
        let routing = contiguous_routing(&counts(seed, experts));
        let (case, got) = run_fp8(routing, experts, n, 16 * k16, seed);
        let miss = case.first_miss(&got, true, 0);
        prop_assert!(miss.is_none(), "experts {experts}, N {n}, K {}: {}", 16 * k16, miss.unwrap());
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn grouped_fp8_masked_matches_f64(seed in any::<u64>(), experts in 1usize..=6, n in n_dim(), k16 in 1usize..=40) {
        let routing = masked_routing(seed, &counts(seed, experts));
        let (case, got) = run_fp8(routing.clone(), experts, n, 16 * k16, seed);
        let miss = case.first_miss(&got, true, 0);
        prop_assert!(miss.is_none(), "{routing:?} N {n}, K {}: {}", 16 * k16, miss.unwrap());
    }

    /// The decode regime: a capacity of at most 64 rows, which runs on the FP8 body's wide
    /// 64 × 256 tiles (each expert one tile row, written whole or not at all, as on 128 × 128).
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn grouped_fp8_masked_decode_matches_f64(
        seed in any::<u64>(), experts in 1usize..=12, n in n_dim(), k16 in 1usize..=40, capacity in 1usize..=64,
    ) {
        let routing = masked_routing_within(seed, &counts(seed, experts), capacity);
        let (case, got) = run_fp8(routing.clone(), experts, n, 16 * k16, seed);
        let miss = case.first_miss(&got, true, 0);
        prop_assert!(miss.is_none(), "{routing:?} N {n}, K {}: {}", 16 * k16, miss.unwrap());
    }
}

/// DeepSeek-V3-like expert shapes (N 4096 / 7168, K 7168 / 2048) with a skewed routing: one
/// element in 61 of every computed row checked against float64 (a diagonal pattern: every column
/// of D in some row), every element of the skipped tiles for its poison.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_moe_shapes_match_f64() {
    let skewed = [700, 0, 3, 129, 256, 1, 0, 60];
    for (n, k) in [(4096, 7168), (7168, 2048)] {
        let (case, got) = run_bf16(contiguous_routing(&skewed), skewed.len(), n, k, 11);
        assert_eq!(case.first_miss_every(&got, false, 0, 61), None, "bf16 contiguous {n} × {k}");
        if k == 2048 {
            // The CPU quantisation of the larger weight would dominate the test's time.
            let (case, got) = run_fp8(masked_routing(5, &skewed), skewed.len(), n, k, 12);
            assert_eq!(case.first_miss_every(&got, true, 0, 61), None, "fp8 masked {n} × {k}");
            let (case, got) = run_bf16(masked_routing(6, &skewed), skewed.len(), n, k, 13);
            assert_eq!(case.first_miss_every(&got, false, 0, 61), None, "bf16 masked {n} × {k}");
        }
    }
}

/// Masked problems of few experts with many rows, where the tiles with rows are one to a few
/// waves of the grid and not whole waves: the balanced plan (`MaskedBalanced`) runs them as
/// data-parallel waves plus a tail streamed over K, fix-ups included. Exact counts (no
/// negative or oversized ones), one element in 7 of every computed row checked.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_masked_few_experts_stream_their_tail() {
    let cases: [(&[i32], usize, usize); 4] =
        [(&[1136], 1536, 4096), (&[500, 465], 768, 4096), (&[0, 1000, 37], 1024, 7168), (&[129; 16], 192, 1000)];
    for (i, &(counts, capacity, n)) in cases.iter().enumerate() {
        let routing = Routing::Masked { capacity, counts: counts.to_vec() };
        let k = 384 + 64 * i;
        let (case, got) = run_bf16(routing.clone(), counts.len(), n, k, 21 + i as u64);
        assert_eq!(case.first_miss_every(&got, false, 0, 7), None, "bf16 {counts:?} of {capacity}, N {n}, K {k}");
        let (case, got) = run_fp8(routing, counts.len(), n, k, 31 + i as u64);
        assert_eq!(case.first_miss_every(&got, true, 0, 7), None, "fp8 {counts:?} of {capacity}, N {n}, K {k}");
    }
}

/// The checks see which expert's weight a tile used: the reference with the next expert's
/// weight fails both element types.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_wrong_expert_reference_fails() {
    let routing = contiguous_routing(&[200, 130, 5]);
    let (case, got) = run_bf16(routing.clone(), 3, 96, 256, 3);
    assert_eq!(case.first_miss(&got, false, 0), None);
    assert!(case.first_miss(&got, false, 1).is_some(), "bf16: the wrong expert's weight passed");
    let (case, got) = run_fp8(routing, 3, 96, 256, 4);
    assert_eq!(case.first_miss(&got, true, 0), None);
    assert!(case.first_miss(&got, true, 1).is_some(), "fp8: the wrong expert's weight passed");
}

/// Short buffers, misaligned operands and foreign indices are refused before any launch.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn grouped_rejects_invalid_buffers() {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let p = GroupedContiguousProblem { rows: 256, n: 64, k: 64, experts: 2 };
    let a = stream.alloc_zeros::<bf16>(256 * 64 + 8).unwrap();
    let b = stream.alloc_zeros::<bf16>(2 * 64 * 64).unwrap();
    let idx = stream.clone_htod(&vec![0i32; 256]).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(256 * 64).unwrap();
    let refused = |r: warpforge::Result<()>, words: &str| match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg} (wanted {words})"),
        other => panic!("accepted ({words}): {other:?}"),
    };
    wf.grouped_gemm_contiguous(stream, &p, &a, &b, &idx, &mut d).unwrap();
    refused(wf.grouped_gemm_contiguous(stream, &p, &b, &b, &idx, &mut d), "A holds");
    refused(wf.grouped_gemm_contiguous(stream, &p, &a, &a.slice(0..100), &idx, &mut d), "B holds");
    refused(wf.grouped_gemm_contiguous(stream, &p, &a, &b, &idx.slice(0..255), &mut d), "m_indices");
    refused(wf.grouped_gemm_contiguous(stream, &p, &a.slice(1..), &b, &idx, &mut d), "16-byte aligned");
    let mut short = stream.alloc_zeros::<bf16>(256 * 64 - 1).unwrap();
    refused(wf.grouped_gemm_contiguous(stream, &p, &a, &b, &idx, &mut short), "D holds");
    let m = GroupedMaskedProblem { experts: 2, capacity: 128, n: 64, k: 64 };
    refused(wf.grouped_gemm_masked(stream, &m, &a, &b, &idx.slice(0..1), &mut d), "masked_m");
    stream.synchronize().unwrap();
    // Host-side index checks name the block.
    let mut indices = ContiguousRows::from_counts(&[100, 40]).unwrap().indices;
    indices[120] = 1;
    assert!(check_contiguous_indices(&indices, 2).is_err());
}
