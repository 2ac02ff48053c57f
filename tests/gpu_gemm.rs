//! The property-based GEMM suite on the GPU: `D = act(alpha·A·B + beta·C + bias)` through the
//! public `Warpforge::gemm` API against a float64 CPU reference, over random shapes (1, small
//! primes, tile-ragged sizes, up to 2048 per dimension), every A/B layout (read in place or
//! repacked on the GPU), padded leading dimensions (16-byte pitched or not, which also picks the
//! TMA-store or the direct-store epilogue), batch strides with gaps, every input/output type, and
//! every epilogue term; plus the argument checks, which must reject before anything is launched.
//!
//! The checker (`Case`, `Geometry`, the reference, the NaN poisoning of D) lives in
//! `common/gemm.rs`, shared with the fuzzer and the soak test.

use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::logic::schedule::stream_k::StreamKMode;
use warpforge::{
    Activation, COperand, Clusters, Consumers, Cores, Epilogue, Error, GemmProblem, KSplit, Layout, TileWidth,
};

use crate::common::gemm::{Case, Geometry, run_case};
use crate::common::gpu;

/// Cases per property test: 6 type pairs × 16 cases, a few seconds in all on one H200.
const GPU_CASES: u32 = 16;

/// Sizes that stress the tiling (128 × 256 × 64): 1, small primes, sizes next to tile
/// multiples, anything small, and a few large ones.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(1usize),
        2 => prop::sample::select(vec![2usize, 3, 5, 7, 11, 13, 31, 61, 127, 251]),
        2 => prop::sample::select(vec![63usize, 64, 65, 127, 128, 129, 255, 256, 257, 383, 385, 511, 513]),
        2 => 1usize..400,
        1 => 900usize..=2048,
    ]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
}

/// Extra leading-dimension elements: packed, pitches that are not multiples of 8 elements
/// (forcing the repack and, for D, the direct-store epilogue), or 16-byte-pitched padding.
fn pad() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 2 => 1usize..8, 1 => Just(8usize), 1 => Just(64usize)]
}

fn gap() -> impl Strategy<Value = Option<isize>> {
    prop_oneof![Just(None), (0isize..40).prop_map(Some)]
}

fn activation() -> impl Strategy<Value = Activation> {
    prop::sample::select(vec![Activation::None, Activation::Relu, Activation::Silu, Activation::GeluTanh])
}

prop_compose! {
    fn any_case()(
        (m, n, k) in (dim(), dim(), dim()),
        batch in 1usize..=3,
        (a_layout, b_layout) in (layout(), layout()),
        pads in [pad(), pad(), pad(), pad()],
        gaps in [gap(), gap(), gap(), gap()],
        alpha in prop_oneof![Just(1.0f32), -2.0f32..2.0],
        beta in prop_oneof![Just(0.0f32), -2.0f32..2.0],
        (with_c, with_bias) in (any::<bool>(), any::<bool>()),
        activation in activation(),
        seed in any::<u64>(),
    ) -> Case {
        // beta != 0 needs C; with beta == 0, C is passed or not (and must be ignored).
        let with_c = with_c || beta != 0.0;
        let (consumers, tile_width, clusters) = (Consumers::Auto, TileWidth::Auto, Clusters::Auto);
        Case {
            m, n, k, batch, a_layout, b_layout, pads, gaps, alpha, beta, with_c, c_in_place: false, with_bias,
            activation, consumers, tile_width, clusters, cores: Cores::Auto, k_split: KSplit::Auto, seed,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_bf16_to_bf16_matches_f64(case in any_case()) {
        run_case::<bf16, bf16>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_bf16_to_f16_matches_f64(case in any_case()) {
        run_case::<bf16, f16>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_bf16_to_f32_matches_f64(case in any_case()) {
        run_case::<bf16, f32>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_f16_to_bf16_matches_f64(case in any_case()) {
        run_case::<f16, bf16>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_f16_to_f16_matches_f64(case in any_case()) {
        run_case::<f16, f16>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_f16_to_f32_matches_f64(case in any_case()) {
        run_case::<f16, f32>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_pingpong_matches_f64(case in any_case(), f16_types in any::<bool>()) {
        run_same_16bit_types(&Case { consumers: Consumers::PingPong, ..case }, f16_types);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_narrow_matches_f64(case in any_case(), f16_types in any::<bool>()) {
        run_same_16bit_types(&Case { consumers: Consumers::Cooperative, tile_width: TileWidth::Narrow, ..case }, f16_types);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn gemm_random_cluster_pairs_match_f64(case in any_case(), f16_types in any::<bool>()) {
        run_same_16bit_types(&Case { clusters: Clusters::Pairs, ..case }, f16_types);
    }
}

/// `case` with f16 or bf16 in and out: the type pairs every kernel variant exists for.
fn run_same_16bit_types(case: &Case, f16_types: bool) {
    if f16_types {
        run_case::<f16, f16>(case);
    } else {
        run_case::<bf16, bf16>(case);
    }
}

/// Every layout pair under three pitch regimes, so each host path is taken for certain:
/// packed (A row-major and B column-major read in place, D through TMA stores), pitches of
/// +3 elements with odd batch gaps (every operand repacked, D by direct stores) and +8
/// elements (in place and TMA stores again, now with padding columns that must keep poison).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_every_layout_and_pitch_path_matches_f64() {
    for a_layout in [Layout::RowMajor, Layout::ColMajor] {
        for b_layout in [Layout::RowMajor, Layout::ColMajor] {
            for (pad, gap) in [(0, None), (3, Some(5)), (8, Some(8))] {
                let case = Case {
                    a_layout,
                    b_layout,
                    pads: [pad; 4],
                    gaps: [gap; 4],
                    beta: 0.5,
                    with_c: true,
                    with_bias: true,
                    ..Case::plain(131, 264, 72, 2)
                };
                run_case::<bf16, bf16>(&case);
                run_case::<f16, f32>(&case);
            }
        }
    }
}

/// Each activation with every other epilogue term, for 16-bit and f32 outputs; the
/// pre-activations span roughly [-8, 8], where SiLU and GELU are far from linear.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_each_activation_with_full_epilogue_matches_f64() {
    for activation in [Activation::None, Activation::Relu, Activation::Silu, Activation::GeluTanh] {
        let case =
            Case { alpha: -0.75, beta: 0.5, with_c: true, with_bias: true, activation, ..Case::plain(200, 300, 96, 2) };
        run_case::<bf16, bf16>(&case);
        run_case::<f16, f16>(&case);
        run_case::<bf16, f32>(&case);
        run_case::<f16, bf16>(&case);
    }
}

/// Large and extreme-aspect problems, checked at sampled elements and the ragged edges.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_large_shapes_match_f64_at_samples() {
    let col_row =
        |m, n, k, batch| Case { a_layout: Layout::ColMajor, b_layout: Layout::RowMajor, ..Case::plain(m, n, k, batch) };
    run_case::<bf16, bf16>(&Case::plain(2048, 2048, 2048, 1));
    run_case::<f16, f32>(&col_row(2047, 1999, 1031, 2));
    run_case::<bf16, f32>(&Case::plain(1, 2048, 2048, 1));
    run_case::<f16, f16>(&Case { activation: Activation::GeluTanh, ..col_row(2048, 1, 1999, 3) });
    run_case::<bf16, f16>(&Case { pads: [5, 3, 0, 1], gaps: [Some(1); 4], ..col_row(1537, 2048, 64, 2) });
    // Stream-K schedules (the host picks them from the wave fill; see `GemmSchedule`):
    // 16 tiles of 64 K slices over 132 CTAs, each tile finished from ~8 partials (pure) ...
    run_case::<bf16, f32>(&Case::plain(128, 4096, 4096, 1));
    // ... 288 tiles, the third wave 18 % full (hybrid: the last two waves split) ...
    run_case::<bf16, bf16>(&Case::plain(1152, 8192, 1024, 1));
    // ... and a batched hybrid with the whole epilogue, ragged in every dimension.
    let epilogue = Case {
        with_c: true,
        with_bias: true,
        beta: 0.5,
        activation: Activation::Silu,
        ..Case::plain(641, 2303, 777, 3)
    };
    run_case::<f16, bf16>(&epilogue);
}

/// Ping-pong consumers (forced) where their bookkeeping is stressed: several units per CTA and
/// per warpgroup (each warpgroup skipping the other's ring stages), an odd unit count (the
/// second warpgroup idle at the end), one unit per CTA, ragged 64-row tiles, K of one slice,
/// batches, the whole epilogue, and direct stores (a padded D pitch).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_pingpong_shapes_match_f64() {
    let pp = |m, n, k, batch| Case { consumers: Consumers::PingPong, ..Case::plain(m, n, k, batch) };
    // 2048 × 2048: 256 tiles of 64 × 256 on 132 CTAs: 1–2 units per warpgroup.
    run_case::<bf16, bf16>(&pp(2048, 2048, 2048, 1));
    // 133 tiles: CTA 0 has two units (one per warpgroup), the rest one (warpgroup 1 idle).
    run_case::<f16, f16>(&pp(64 * 133, 256, 200, 1));
    // 88 × 8 tiles × 3 batches = 2112: 16 units per CTA, 8 per warpgroup; K of one slice.
    run_case::<bf16, bf16>(&pp(8 * 64 * 11, 8 * 256, 40, 3));
    run_case::<f16, f16>(&Case {
        alpha: -0.75,
        beta: 0.5,
        with_c: true,
        with_bias: true,
        activation: Activation::Silu,
        pads: [0, 0, 0, 3],
        ..pp(1000, 777, 333, 2)
    });
    run_case::<bf16, bf16>(&pp(1, 1, 1, 1));
    run_case::<bf16, bf16>(&Case { a_layout: Layout::ColMajor, b_layout: Layout::RowMajor, ..pp(129, 300, 1031, 2) });
}

/// Narrow (128 × 128) tiles, forced, on every schedule they meet: pure stream-K over the whole
/// GPU (32 tiles split four ways, ranges straddling tiles), the hybrid (576 tiles: four full
/// waves, the 48 left over split), several tiles per CTA, a ragged N that is not a multiple of
/// 128, batches with the whole epilogue, direct stores (a padded D pitch), both layouts, and
/// a 1 × 1 × 1 problem.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_narrow_shapes_match_f64() {
    let narrow = |m, n, k, batch| Case { tile_width: TileWidth::Narrow, ..Case::plain(m, n, k, batch) };
    run_case::<bf16, bf16>(&narrow(128, 4096, 4096, 1));
    run_case::<f16, f16>(&narrow(128, 4096 - 72, 4096 + 40, 1));
    run_case::<bf16, bf16>(&narrow(1152, 8192, 1024, 1));
    run_case::<f16, f16>(&narrow(2048, 2048, 512, 1));
    run_case::<bf16, bf16>(&Case {
        alpha: -0.75,
        beta: 0.5,
        with_c: true,
        with_bias: true,
        activation: Activation::GeluTanh,
        ..narrow(641, 2303, 777, 3)
    });
    run_case::<f16, f16>(&Case { pads: [0, 0, 0, 3], ..narrow(300, 200, 1000, 2) });
    run_case::<bf16, bf16>(&Case {
        a_layout: Layout::ColMajor,
        b_layout: Layout::RowMajor,
        ..narrow(129, 300, 1031, 2)
    });
    run_case::<bf16, bf16>(&narrow(1, 1, 1, 1));
}

/// Each tile schedule, reached on purpose and asserted from the plan the call launches (not
/// assumed from a comment), then run against the reference: data-parallel waves, the hybrid
/// (full waves data-parallel, the partial last wave split over the first CTAs) and pure stream-K
/// across the GPU (fewer tiles than SMs), with the cooperative wide tile; the pure stream-K
/// narrow tile; and the ping-pong entry's data-parallel grid.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_plans_reach_every_schedule_and_match_f64() {
    let (_, wf) = gpu();
    let cooperative =
        |m, n, k| Case { consumers: Consumers::Cooperative, tile_width: TileWidth::Wide, ..Case::plain(m, n, k, 1) };
    let cases = [
        (cooperative(4096, 4096, 1024), StreamKMode::DataParallel, "gemm_bf16_bf16_ws_persistent_sm90"),
        (cooperative(1152, 8192, 4096), StreamKMode::Hybrid, "gemm_bf16_bf16_ws_persistent_sm90"),
        (cooperative(2176, 8192, 4096), StreamKMode::Hybrid, "gemm_bf16_bf16_ws_persistent_sm90"),
        (cooperative(128, 4096, 4096), StreamKMode::Pure, "gemm_bf16_bf16_ws_persistent_sm90"),
        (
            Case { tile_width: TileWidth::Narrow, ..Case::plain(128, 4096, 4096, 1) },
            StreamKMode::Pure,
            "gemm_bf16_bf16_narrow_sm90",
        ),
        (
            Case { consumers: Consumers::PingPong, ..Case::plain(640, 4096, 1024, 1) },
            StreamKMode::DataParallel,
            "gemm_bf16_bf16_pingpong_sm90",
        ),
    ];
    for (case, schedule, entry) in cases {
        let problem = GemmProblem {
            consumers: case.consumers,
            tile_width: case.tile_width,
            ..GemmProblem::new(case.m, case.n, case.k)
        };
        let plan = wf.gemm_plan::<bf16, bf16>(&problem).unwrap();
        assert_eq!((plan.entry, plan.schedule), (entry, schedule), "{}×{}×{}: {plan:?}", case.m, case.n, case.k);
        assert!(plan.grid >= 1 && plan.grid <= wf.sm_count(), "{plan:?}");
        run_case::<bf16, bf16>(&case);
    }
}

/// Stream-K's partial-tile hand-over carries f32 exactly as data-parallel accumulation does:
/// the first 128 rows of a 4096-row problem (data-parallel) computed alone (pure stream-K, each
/// tile's K split over several CTAs and summed through the workspace), f32 output, compared
/// element by element. The two differ only in where the f32 sums are split, so they agree to a
/// few f32 roundings of the accumulator; the bound, 32·u·‖a_i‖·‖b_j‖ (Cauchy–Schwarz over
/// Σ|a·b|), is about 2.6e-3 here, against about 2e-2 if a partial went through bf16 (a partial
/// of 1024 products is ≈ 10; bf16 keeps 2^-9 of it) — which the f64 reference's f32 tolerance
/// (2·K·u·Σ|a·b|) would not catch at large K.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_stream_k_partials_match_data_parallel_in_f32() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let (rows, m, n, k) = (4096, 128, 4096, 4096);
    let whole =
        GemmProblem { consumers: Consumers::Cooperative, tile_width: TileWidth::Wide, ..GemmProblem::new(rows, n, k) };
    let head = GemmProblem { m, ..whole };
    let (plan_whole, plan_head) =
        (wf.gemm_plan::<bf16, f32>(&whole).unwrap(), wf.gemm_plan::<bf16, f32>(&head).unwrap());
    assert_eq!(plan_whole.schedule, StreamKMode::DataParallel, "{plan_whole:?}");
    assert_eq!(plan_head.schedule, StreamKMode::Pure, "{plan_head:?}");
    let a: Vec<bf16> = crate::common::random_f32(41, rows * k, 1.0).into_iter().map(bf16::from_f32).collect();
    let b: Vec<bf16> = crate::common::random_f32(43, n * k, 1.0).into_iter().map(bf16::from_f32).collect();
    let (da, db) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&b).unwrap());
    let mut d_whole = stream.alloc_zeros::<f32>(rows * n).unwrap();
    let mut d_head = stream.alloc_zeros::<f32>(m * n).unwrap();
    wf.gemm::<bf16, f32>(stream, &whole, &da, &db, Epilogue::default(), &mut d_whole).unwrap();
    wf.gemm::<bf16, f32>(stream, &head, &da.slice(..m * k), &db, Epilogue::default(), &mut d_head).unwrap();
    let (whole_rows, head_rows) =
        (stream.clone_dtoh(&d_whole.slice(..m * n)).unwrap(), stream.clone_dtoh(&d_head).unwrap());
    let norm = |v: &[bf16]| v.iter().map(|x| x.to_f64() * x.to_f64()).sum::<f64>().sqrt();
    let a_norms: Vec<f64> = (0..m).map(|i| norm(&a[i * k..][..k])).collect();
    let b_norms: Vec<f64> = (0..n).map(|j| norm(&b[j * k..][..k])).collect();
    let mut worst = (0.0f64, 0, 0);
    for i in 0..m {
        for j in 0..n {
            let bound = 32.0 * crate::common::EPS_F32 * a_norms[i] * b_norms[j];
            let ratio = (head_rows[i * n + j] as f64 - whole_rows[i * n + j] as f64).abs() / bound;
            if ratio > worst.0 {
                worst = (ratio, i, j);
            }
        }
    }
    let (ratio, i, j) = worst;
    assert!(
        ratio <= 1.0,
        "stream-K differs from data-parallel at ({i}, {j}): {} vs {}, {ratio:.2} × the bound",
        head_rows[i * n + j],
        whole_rows[i * n + j]
    );
    println!("stream-K vs data-parallel, f32: worst difference {ratio:.3} × 32·u·‖a‖·‖b‖");
}

/// 2 × 1 clusters (forced) where the pairing is stressed: an odd number of tile rows (the last
/// pair's second CTA past M: zeros in, every store clipped), one tile row, several pairs per
/// cluster with batches (pairs never straddle a batch), K of one slice, the whole epilogue,
/// direct stores (a padded D pitch), both layouts, fewer pairs than clusters, and 1 × 1 × 1.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_cluster_pair_shapes_match_f64() {
    let pairs = |m, n, k, batch| Case { clusters: Clusters::Pairs, ..Case::plain(m, n, k, batch) };
    run_case::<bf16, bf16>(&pairs(4096, 4096, 1024, 1));
    run_case::<f16, f16>(&pairs(128 * 9, 8192, 256, 1));
    run_case::<bf16, bf16>(&pairs(100, 2000, 300, 1));
    run_case::<f16, f16>(&pairs(128 * 3 + 5, 256 * 5, 40, 5));
    run_case::<bf16, bf16>(&Case {
        alpha: -0.75,
        beta: 0.5,
        with_c: true,
        with_bias: true,
        activation: Activation::Silu,
        pads: [0, 0, 0, 3],
        ..pairs(641, 2303, 777, 3)
    });
    run_case::<f16, f16>(&Case { a_layout: Layout::ColMajor, b_layout: Layout::RowMajor, ..pairs(257, 300, 1031, 2) });
    run_case::<bf16, bf16>(&pairs(1, 1, 1, 1));
}

/// The cluster entry's persistent grid holds about one pair per two SMs (clusters must fit in
/// one GPC, so a few SMs may stay unpaired), not one cluster in all.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_cluster_entry_fills_the_gpu_with_pairs() {
    use warpforge::abi::{entries, gemm_sm90};
    let (_device, wf) = gpu();
    let kernel = wf.module().kernel(entries::GEMM_BF16_BF16_CLUSTER.name()).unwrap();
    let plan = kernel.plan_persistent(gemm_sm90::THREADS, gemm_sm90::SMEM_BYTES, Some([2, 1, 1]), u64::MAX).unwrap();
    println!("cluster plan on {} SMs: {plan:?}", wf.sm_count());
    assert_eq!(plan.cluster_size, 2);
    assert!(plan.blocks >= wf.sm_count() * 3 / 4, "{plan:?}");
}

/// Each invalid argument is an `Error::InvalidArgument`, and nothing is launched: D keeps its
/// poison. A valid call on the same buffers succeeds first, so each rejection is due to its
/// one change.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_rejects_invalid_arguments_without_launching() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let (m, n, k) = (64, 48, 40);
    let poison = vec![f32::NAN; m * n];
    let a = stream.clone_htod(&vec![bf16::ONE; m * k]).unwrap();
    let b = stream.clone_htod(&vec![bf16::ONE; k * n]).unwrap();
    let c = stream.clone_htod(&vec![1.0f32; m * n]).unwrap();
    let bias = stream.clone_htod(&vec![1.0f32; n]).unwrap();
    let mut d = stream.clone_htod(&poison).unwrap();
    let base = GemmProblem::new(m, n, k);
    wf.gemm::<bf16, f32>(stream, &base, &a, &b, Epilogue::default(), &mut d).unwrap();
    assert!(stream.clone_dtoh(&d).unwrap().iter().all(|&v| v == k as f32), "the valid call computes D");
    stream.memcpy_htod(&poison, &mut d).unwrap();

    let expect_invalid = |what: &str, result: warpforge::Result<()>| match result {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    };
    let with = |change: &dyn Fn(&mut GemmProblem)| {
        let mut p = base;
        change(&mut p);
        p
    };
    let bad_problems: [(&str, GemmProblem); 15] = [
        ("k = 0", with(&|p| p.k = 0)),
        ("m = 0", with(&|p| p.m = 0)),
        ("n = 0", with(&|p| p.n = 0)),
        ("batch = 0", with(&|p| p.batch = 0)),
        ("lda < K (A row-major)", with(&|p| p.lda = k - 1)),
        ("lda < M (A column-major)", with(&|p| (p.a_layout, p.lda) = (Layout::ColMajor, m - 1))),
        ("ldb < K (B column-major)", with(&|p| p.ldb = k - 1)),
        ("ldb < N (B row-major)", with(&|p| (p.b_layout, p.ldb) = (Layout::RowMajor, n - 1))),
        ("ldd < N", with(&|p| p.ldd = n - 1)),
        ("beta != 0 without C", with(&|p| p.beta = 0.5)),
        ("alpha NaN", with(&|p| p.alpha = f32::NAN)),
        ("batch 2 on one batch of buffers", with(&|p| p.batch = 2)),
        ("ping-pong forced for bf16 → f32", with(&|p| p.consumers = Consumers::PingPong)),
        ("narrow tiles forced for bf16 → f32", with(&|p| p.tile_width = TileWidth::Narrow)),
        ("clusters forced for bf16 → f32", with(&|p| p.clusters = Clusters::Pairs)),
    ];
    for (what, problem) in &bad_problems {
        expect_invalid(what, wf.gemm::<bf16, f32>(stream, problem, &a, &b, Epilogue::default(), &mut d));
    }
    let short = |len: usize| ..len - 1;
    expect_invalid("A one short", wf.gemm(stream, &base, &a.slice(short(m * k)), &b, Epilogue::default(), &mut d));
    expect_invalid("B one short", wf.gemm(stream, &base, &a, &b.slice(short(k * n)), Epilogue::default(), &mut d));
    let mut d_short = d.slice_mut(short(m * n));
    expect_invalid("D one short", wf.gemm::<bf16, f32>(stream, &base, &a, &b, Epilogue::default(), &mut d_short));
    let with_c = with(&|p| p.beta = 0.5);
    let c_short = Epilogue { c: COperand::Buffer(c.slice(short(m * n))), bias: None };
    expect_invalid("C one short", wf.gemm(stream, &with_c, &a, &b, c_short, &mut d));
    let ldc_small = Epilogue { c: COperand::Buffer(c.as_view()), bias: None };
    expect_invalid("ldc < N", wf.gemm(stream, &with(&|p| (p.beta, p.ldc) = (0.5, n - 1)), &a, &b, ldc_small, &mut d));
    let bias_short = Epilogue { c: COperand::None, bias: Some(bias.slice(short(n))) };
    expect_invalid("bias one short", wf.gemm(stream, &base, &a, &b, bias_short, &mut d));

    // A combination that no entry runs, with types that have both variants.
    let both = with(&|p| (p.tile_width, p.consumers) = (TileWidth::Narrow, Consumers::PingPong));
    let d16_poison = vec![bf16::NAN; m * n];
    let mut d16 = stream.clone_htod(&d16_poison).unwrap();
    expect_invalid("narrow tiles with ping-pong forced", wf.gemm(stream, &both, &a, &b, Epilogue::default(), &mut d16));
    let narrow_pairs = with(&|p| (p.tile_width, p.clusters) = (TileWidth::Narrow, Clusters::Pairs));
    expect_invalid("narrow tiles in clusters", wf.gemm(stream, &narrow_pairs, &a, &b, Epilogue::default(), &mut d16));
    let pingpong_pairs = with(&|p| (p.consumers, p.clusters) = (Consumers::PingPong, Clusters::Pairs));
    expect_invalid("ping-pong in clusters", wf.gemm(stream, &pingpong_pairs, &a, &b, Epilogue::default(), &mut d16));
    assert!(stream.clone_dtoh(&d16).unwrap().iter().all(|v| v.is_nan()), "a rejected call wrote D");

    let after = stream.clone_dtoh(&d).unwrap();
    assert!(after.iter().all(|v| v.is_nan()), "a rejected call wrote D");
}

/// A few fixed shapes that fail in seconds when the pipeline is broken (the first GPU test to
/// read when everything fails): tile-exact, single element, ragged in every dimension, K of
/// one slice, long K, every layout pair; and the full epilogue on batched bf16 output.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_fixed_shapes_match_f64() {
    for (m, n, k) in
        [(128, 256, 64), (256, 512, 256), (1, 1, 1), (129, 257, 65), (300, 100, 1000), (64, 1024, 8), (70, 300, 4000)]
    {
        run_case::<bf16, f32>(&Case::plain(m, n, k, 1));
    }
    let layouts = |m, n, k, a_layout, b_layout| Case { a_layout, b_layout, ..Case::plain(m, n, k, 1) };
    run_case::<bf16, f32>(&layouts(200, 300, 77, Layout::ColMajor, Layout::RowMajor));
    run_case::<bf16, f32>(&layouts(130, 270, 96, Layout::RowMajor, Layout::RowMajor));
    for (m, n, k, batch) in [(200, 300, 128, 3), (128, 256, 64, 1), (77, 520, 33, 2), (100, 256, 2048, 1)] {
        let case = Case {
            alpha: 0.5,
            beta: 0.25,
            with_c: true,
            with_bias: true,
            activation: Activation::Relu,
            ..Case::plain(m, n, k, batch)
        };
        run_case::<bf16, bf16>(&case);
    }
}

/// The decode kernels on every shape they take and refused with a typed error where they
/// cannot run: the `mma.sync` kernel (`Cores::Decode`, and `Cores::Auto`'s choice wherever it
/// fits but for wide weights) up to 32 rows — every count of its 8-row tiles, N not a multiple of its 16-row blocks,
/// K of one vector, K not a multiple of its 32-element chunks, long K split over its warps,
/// batches, padded pitches — and the CUDA-core kernel (`Cores::Cuda`) up to 8 rows. The plan
/// each call takes is asserted; every call matches float64 over three output types and the
/// full epilogue (in place where C is D).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_decode_rows_take_the_decode_paths_and_match_f64() {
    use warpforge::GemmPath;
    let (_, wf) = gpu();
    let mut model = wf.clone();
    model.set_plan_table(None).unwrap();
    // (m, n, k, batch, pad, fits the CUDA-core kernel, fits the decode kernel, Auto's path)
    let (dec, gat, wg) = (GemmPath::Decode, GemmPath::Gather, GemmPath::TensorCores);
    for (m, n, k, batch, pad, fits_cuda, fits_decode, auto) in [
        (1, 4096, 4096, 1, 0, true, true, dec),
        (1, 7, 256, 2, 8, true, true, dec),
        (1, 300, 64, 1, 0, true, true, dec),
        (2, 7, 64, 1, 0, true, true, dec),
        (3, 301, 520, 2, 8, true, true, dec),
        (5, 1, 8, 1, 0, true, true, dec),
        (8, 1000, 2048, 3, 0, true, true, dec),
        (8, 258, 16, 1, 16, true, true, dec),
        (9, 512, 512, 1, 0, false, true, dec),
        (16, 4100, 1000, 1, 0, false, true, dec),
        (17, 33, 3000, 2, 8, false, true, dec),
        (24, 2048, 8, 1, 0, false, true, dec),
        (31, 17, 11_008, 1, 0, false, true, dec),
        (32, 1536, 4096, 1, 0, false, true, dec),
        (1, 16_400, 512, 1, 0, true, true, GemmPath::Skinny), // wide weight, one row: CUDA cores
        (8, 16_400, 256, 1, 0, true, true, wg),               // wide weight, eight rows: wgmma
        (4, 300, 1001, 1, 0, false, false, gat),              // K not a multiple of 8: small, gathered
        (6, 64, 256, 1, 3, false, false, gat),                // pitches not multiples of 8: gathered
        (33, 512, 512, 1, 0, false, false, wg),               // past the decode rows, 2^24 flops: wgmma
    ] {
        let case = Case {
            pads: [pad; 4],
            gaps: [(batch > 1).then_some(8); 4],
            alpha: 0.75,
            beta: 0.5,
            with_c: true,
            with_bias: true,
            activation: Activation::Silu,
            ..Case::plain(m, n, k, batch)
        };
        // The cost model's path (the plan table, which may choose otherwise for the linear layout,
        // is `gpu_gemm_tuned`'s to test).
        let auto_plan = model.gemm_plan::<bf16, bf16>(&Geometry::of(&case).problem).unwrap();
        assert_eq!(auto_plan.path, auto, "Auto, {m}×{n}×{k} batch {batch} pad {pad}: {auto_plan:?}");
        run_case::<bf16, bf16>(&case);
        run_case::<f16, f16>(&Case { c_in_place: true, ..case.clone() });
        for (cores, fits, path) in
            [(Cores::Decode, fits_decode, GemmPath::Decode), (Cores::Cuda, fits_cuda, GemmPath::Skinny)]
        {
            let forced = Case { cores, ..case.clone() };
            let forced_plan = wf.gemm_plan::<bf16, bf16>(&Geometry::of(&forced).problem);
            if !fits {
                assert!(forced_plan.is_err(), "{cores:?} must refuse {m}×{n}×{k} pad {pad}: {forced_plan:?}");
                continue;
            }
            assert_eq!(forced_plan.unwrap().path, path, "{cores:?}, {m}×{n}×{k}");
            run_case::<bf16, bf16>(&forced);
            run_case::<f16, f32>(&forced);
            run_case::<bf16, f16>(&Case { activation: Activation::None, beta: 0.0, with_c: false, ..forced.clone() });
        }
    }
}

/// The gather kernel (`mma.sync` reading element by element), forced (`Cores::Gather`) where no
/// other kernel reads the operands in place — both layouts of A and B, pitches and K of any
/// parity, several 32 × 16 blocks of D in both directions, batches with gaps, the whole
/// epilogue, in place — and chosen by `Cores::Auto` for small problems; each against float64
/// over three output types.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_gather_any_layout_matches_f64() {
    use warpforge::GemmPath;
    let (_, wf) = gpu();
    for (m, n, k, batch, a_layout, b_layout, pad) in [
        (1, 1, 1, 1, Layout::RowMajor, Layout::ColMajor, 0),
        (7, 7, 13, 1, Layout::RowMajor, Layout::ColMajor, 0),
        (33, 17, 31, 2, Layout::ColMajor, Layout::ColMajor, 3),
        (64, 48, 33, 1, Layout::RowMajor, Layout::RowMajor, 1),
        (100, 130, 7, 3, Layout::ColMajor, Layout::RowMajor, 5),
        (5, 600, 250, 1, Layout::RowMajor, Layout::ColMajor, 1),
        (300, 20, 97, 1, Layout::ColMajor, Layout::ColMajor, 0),
    ] {
        let case = Case {
            a_layout,
            b_layout,
            pads: [pad, pad + 1, pad + 2, pad + 2],
            gaps: [(batch > 1).then_some(5); 4],
            alpha: -0.5,
            beta: 0.75,
            with_c: true,
            with_bias: true,
            activation: Activation::GeluTanh,
            ..Case::plain(m, n, k, batch)
        };
        let auto_plan = wf.gemm_plan::<bf16, bf16>(&Geometry::of(&case).problem).unwrap();
        assert_eq!(auto_plan.path, GemmPath::Gather, "Auto, {m}×{n}×{k}: {auto_plan:?}");
        run_case::<bf16, bf16>(&case);
        let forced = Case { cores: Cores::Gather, ..case.clone() };
        run_case::<f16, f32>(&forced);
        run_case::<bf16, f16>(&Case { c_in_place: true, ..forced.clone() });
        run_case::<f16, f16>(&Case { activation: Activation::None, beta: 0.0, with_c: false, ..forced });
    }
    // Column groups per block (`gather_col_groups`): eight on a short K over a large output
    // (ragged N: a block's last groups lie past N), four and two in between, one on a long K.
    for (m, n, k) in [(6360, 513, 30), (129, 1000, 160), (70, 2001, 300), (40, 3000, 1500), (3, 40, 8)] {
        let forced = Case { cores: Cores::Gather, b_layout: Layout::RowMajor, ..Case::plain(m, n, k, 1) };
        assert_eq!(wf.gemm_plan::<bf16, bf16>(&Geometry::of(&forced).problem).unwrap().path, GemmPath::Gather);
        run_case::<bf16, bf16>(&forced);
        run_case::<f16, f32>(&Case { alpha: 0.5, beta: 1.0, with_c: true, ..forced });
    }
}
