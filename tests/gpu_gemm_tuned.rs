//! The measured plans on the GPU: every plan a plan table can name, forced on shapes drawn from
//! every bucket where it may stand, against float64 (so no table entry can send a call to a plan
//! that computes wrongly); Auto taking the shipped table's plan on its buckets; and the forced K
//! split's grids.

use half::{bf16, f16};
use warpforge::gemm::tuned::{Bucket, TablePlan};
use warpforge::{Activation, GemmProblem, KSplit, PlanSource};

use crate::common::gemm::{Case, Geometry, run_case};
use crate::common::{gpu, mix};

/// Largest M, N, K drawn here: the checker's float64 reference stays seconds per plan.
const MAX_DIM: [usize; 3] = [1200, 3000, 2500];
/// Shapes per plan.
const SHAPES_PER_PLAN: u64 = 10;

/// The smallest and largest of `bucket`'s tuned shapes along `axis` (0: M, 1: N, 2: K).
fn span(bucket: Bucket, axis: usize) -> (usize, usize) {
    let values: Vec<usize> = bucket.shapes().iter().map(|s| [s.0, s.1, s.2][axis]).collect();
    (*values.iter().min().unwrap(), *values.iter().max().unwrap())
}

/// Whether `bucket` has shapes within [`MAX_DIM`].
fn testable(bucket: Bucket) -> bool {
    (0..3).all(|axis| span(bucket, axis).0 <= MAX_DIM[axis])
}

/// A shape of a [`testable`] `bucket`, drawn by `r` between its tuned shapes and capped at
/// [`MAX_DIM`]; N and K rounded down to multiples of 8 half the time.
fn shape_in(bucket: Bucket, r: u64) -> (usize, usize, usize) {
    let draw = |axis: usize, salt: u64| {
        let (lo, hi) = span(bucket, axis);
        let hi = hi.min(MAX_DIM[axis]);
        lo + (mix(r ^ salt) % (hi - lo + 1) as u64) as usize
    };
    let (m, mut n, mut k) = (draw(0, 1), draw(1, 2), draw(2, 3));
    if mix(r ^ 4).is_multiple_of(2) {
        n = (n / 8 * 8).max(8);
        k = (k / 8 * 8).max(8);
    }
    (m, n, k)
}

/// Every plan the tuner may write (the union of every bucket's candidates), each forced on
/// shapes of the buckets where it is admissible, bf16 → bf16 and f16 → f16, with an epilogue,
/// against float64; and `gemm_plan` says the caller chose it.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_every_table_plan_matches_f64() {
    let (_, wf) = gpu();
    let mut plans: Vec<TablePlan> = Bucket::all().flat_map(TablePlan::candidates).collect();
    plans.sort();
    plans.dedup();
    let small: Vec<Bucket> = Bucket::all().filter(|b| testable(*b)).collect();
    for plan in plans {
        let buckets: Vec<Bucket> = small.iter().copied().filter(|b| plan.admissible(*b)).collect();
        for t in 0..SHAPES_PER_PLAN {
            let r = mix(0x7ab1e ^ (t << 8) ^ plan.to_string().len() as u64 ^ (buckets.len() as u64) << 20);
            let bucket = buckets[(r % buckets.len() as u64) as usize];
            let (m, n, k) = shape_in(bucket, mix(r));
            let p = plan.apply(&GemmProblem::new(m, n, k));
            let forced = |case: Case| Case {
                cores: p.cores,
                consumers: p.consumers,
                tile_width: p.tile_width,
                clusters: p.clusters,
                k_split: p.k_split,
                ..case
            };
            let plain = forced(Case::plain(m, n, k, 1));
            let with_epilogue = forced(Case {
                alpha: 0.5,
                beta: -0.25,
                with_c: true,
                with_bias: true,
                activation: Activation::Silu,
                ..Case::plain(m, n, k, 1)
            });
            let planned = wf.gemm_plan::<bf16, bf16>(&Geometry::of(&plain).problem);
            if !k.is_multiple_of(8) && matches!(plan, TablePlan::Decode | TablePlan::Cuda) {
                // Rows not 16-byte pitched: the vector-reading kernels refuse; every other plan runs.
                assert!(planned.is_err(), "{plan} {m}×{n}×{k}: {planned:?}");
                continue;
            }
            let planned = planned.unwrap_or_else(|e| panic!("{plan} {m}×{n}×{k}: {e}"));
            let expected = if plan == TablePlan::Model { PlanSource::Model } else { PlanSource::Caller };
            assert!(planned.chosen_by == expected || planned.chosen_by == PlanSource::Table, "{plan}: {planned:?}");
            if plan != TablePlan::Model {
                let ran = TablePlan::of(&planned);
                let family = match plan {
                    TablePlan::Wide(_) => TablePlan::Wide(None),
                    TablePlan::Narrow(_) => TablePlan::Narrow(None),
                    other => other,
                };
                assert_eq!(ran, family, "{m}×{n}×{k}: {planned:?}");
            }
            run_case::<bf16, bf16>(&plain);
            run_case::<f16, f16>(&with_epilogue);
        }
    }
}

/// A forced K split: at most `ways` CTAs per tile, never more than a wave, never more than the
/// K slices; data-parallel once the tiles fill the GPU; wrong values refused; results match.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_forced_k_split_plans_its_grid_and_matches_f64() {
    use warpforge::logic::schedule::stream_k::StreamKMode;
    let (_, wf) = gpu();
    let sms = wf.sm_count();
    let split = |m, n, k, ways| GemmProblem {
        k_split: KSplit::Ways(ways),
        tile_width: warpforge::TileWidth::Wide,
        ..GemmProblem::new(m, n, k)
    };
    // 1 × 16 wide tiles of 64 K slices.
    for ways in [1u32, 2, 3, 8, 16] {
        let plan = wf.gemm_plan::<bf16, bf16>(&split(100, 4096, 4096, ways)).unwrap();
        let expected = (16 * ways).min(sms);
        assert_eq!(plan.grid, expected, "{ways} ways: {plan:?}");
        let mode = if ways == 1 { StreamKMode::DataParallel } else { StreamKMode::Pure };
        assert_eq!(plan.schedule, mode, "{ways} ways");
        let wide = Case {
            k_split: KSplit::Ways(ways),
            tile_width: warpforge::TileWidth::Wide,
            ..Case::plain(100, 4096, 4096, 1)
        };
        run_case::<bf16, bf16>(&wide);
    }
    // Two K slices: at most two CTAs per tile whatever was asked.
    assert_eq!(wf.gemm_plan::<bf16, bf16>(&split(64, 512, 100, 8)).unwrap().grid, 4);
    run_case::<f16, f16>(&Case { k_split: KSplit::Ways(8), ..Case::plain(64, 512, 100, 1) });
    // Narrow tiles split the same way: 1 × 32 tiles.
    let narrow = GemmProblem { tile_width: warpforge::TileWidth::Narrow, ..split(100, 4096, 4096, 4) };
    assert_eq!(wf.gemm_plan::<bf16, bf16>(&narrow).unwrap().grid, sms.min(128));
    // A full wave of tiles: data-parallel.
    let full = wf.gemm_plan::<bf16, bf16>(&split(4096, 4096, 4096, 4)).unwrap();
    assert_eq!((full.schedule, full.grid), (StreamKMode::DataParallel, sms.min(512)));
    for bad in [0, 17] {
        assert!(wf.gemm_plan::<bf16, bf16>(&split(100, 4096, 4096, bad)).is_err(), "{bad} ways");
    }
    let pingpong = GemmProblem { consumers: warpforge::Consumers::PingPong, ..split(100, 4096, 4096, 2) };
    assert!(wf.gemm_plan::<bf16, bf16>(&pingpong).is_err());
}

/// With every knob `Auto`, a call the shipped table covers takes its bucket's plan (or the cost
/// model where the entry says `model`), and the result matches float64; a call the table does
/// not cover (a batch, f32 output, a repacked operand) is the model's.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_auto_takes_the_table_plan_and_matches_f64() {
    let (_, wf) = gpu();
    let Some(table) = wf.plan_table() else {
        crate::common::skip("no shipped plan table for this GPU");
        return;
    };
    let mut checked = 0;
    for (bucket, entry) in &table.entries {
        let (m, n, k) = bucket.shapes()[0];
        if m as f64 * n as f64 * k as f64 > 4e9 {
            continue;
        }
        let plan = wf.gemm_plan::<bf16, bf16>(&GemmProblem::new(m, n, k)).unwrap();
        if entry.plan == TablePlan::Model {
            assert_eq!(plan.chosen_by, PlanSource::Model, "{bucket:?}");
        } else {
            assert_eq!(plan.chosen_by, PlanSource::Table, "{bucket:?}: {plan:?}");
            let family = match entry.plan {
                TablePlan::Wide(_) => TablePlan::Wide(None),
                TablePlan::Narrow(_) => TablePlan::Narrow(None),
                other => other,
            };
            assert_eq!(TablePlan::of(&plan), family, "{bucket:?}");
            if checked < 40 {
                run_case::<bf16, bf16>(&Case::plain(m, n, k, 1));
                checked += 1;
            }
        }
        let batched = GemmProblem { batch: 2, ..GemmProblem::new(m, n, k) };
        assert_eq!(wf.gemm_plan::<bf16, bf16>(&batched).unwrap().chosen_by, PlanSource::Model);
        let f32_out = wf.gemm_plan::<bf16, f32>(&GemmProblem::new(m, n, k)).unwrap();
        assert_eq!(f32_out.chosen_by, PlanSource::Model);
        let repacked = GemmProblem { b_layout: warpforge::Layout::RowMajor, ..GemmProblem::new(m, n, k) };
        assert_eq!(wf.gemm_plan::<bf16, bf16>(&repacked).unwrap().chosen_by, PlanSource::Model);
    }
}
