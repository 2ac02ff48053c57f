//! The block-scaled FP8 GEMM (`Warpforge::fp8_gemm`) on the GPU against a float64 CPU product
//! of the *dequantised* inputs (each e4m3 code times its scales), over ragged M, N and K
//! (K a multiple of 16, often not of 128), decode shapes, outliers, pitched D, and the GPU
//! quantisers' own output; plus every refusal.
//!
//! Tolerance, per element `D[i, j]` with `S = Σ_p |a[i, p] · b[j, p]|` (dequantised values):
//! - inside one 128-wide K block the tensor cores add exact e4m3 products in an accumulator of
//!   about 14 significant bits (Hopper's FP8 wgmma; the reason for promoting every 128 K): at most
//!   `128 · 2⁻¹³ · S_block` for that block, scaled — summed over blocks, `2⁻⁶ · S`;
//! - the promotion adds each scaled block sum into f32 (one product of the two scales, one
//!   `fma` per block): `(k_blocks + 2) · 2⁻²⁴ · S`;
//! - the bf16 output rounds once: `2⁻⁸ · |D|` (common's `EPS_BF16`).
//!
//! The block term dominates and is loose; [`the_tolerance_catches_a_scale_from_the_wrong_k_block`]
//! shows it still fails a reference that applies one K block's scale to another.

use cudarc::driver::CudaSlice;
use half::bf16;
use proptest::prelude::*;
use warpforge::logic::blockscaled::{PROMOTE_EVERY_K, a_scales_len, b_scales_len, k_blocks};
use warpforge::logic::quant::{self as q, Minifloat};
use warpforge::logic::schedule::stream_k::StreamKMode;
use warpforge::{Clusters, Error, Fp8GemmProblem, GemmPlan, KSplit, ScaleRounding, TileWidth};

use crate::common::{EPS_BF16, gpu, mix, random_f32};

/// Cases per property test.
const GPU_CASES: u32 = 24;
/// What D holds before the call: a bf16 NaN whose bits no result has.
pub(crate) const POISON: u16 = 0x7fc1;
/// Relative error of the tensor cores' in-block accumulation, summed over a block (see the
/// module docs).
pub(crate) const BLOCK_SUM_ERR: f64 = 128.0 / 8192.0;
/// f32 unit roundoff.
pub(crate) const EPS_F32: f64 = 1.0 / (1u64 << 24) as f64;

/// Inputs of one case: `rows × k` values uniform in ±1, each (row, K block) scaled by its own
/// power of two from the seed (so neighbouring groups' scales differ) and each K block by one
/// more, shared by all rows (so a 128 × 128 block's scale, set by its largest row, differs from
/// its neighbours' along K too), and with `outliers` every 61st element a ±3e4 spike.
pub(crate) fn inputs(seed: u64, rows: usize, k: usize, outliers: bool) -> Vec<f32> {
    let mut v = random_f32(seed, rows * k, 1.0);
    for (i, x) in v.iter_mut().enumerate() {
        let (row, kb) = (i / k, (i % k) / PROMOTE_EVERY_K);
        *x *= (1u32 << (mix(seed ^ (row * 1009 + kb) as u64) % 6)) as f32;
        *x *= (1u32 << (mix(seed.rotate_left(17) ^ kb as u64) % 4)) as f32;
        if outliers && mix(seed.wrapping_add(i as u64)).is_multiple_of(61) {
            *x = if i % 2 == 0 { 3e4 } else { -3e4 };
        }
    }
    v
}

/// Per-token 1 × 128 quantisation of an `m × k` A on the CPU (`logic::quant`), the last group
/// possibly partial: e4m3 codes and MN-major scales (padding rows 0).
pub(crate) fn quantise_a(x: &[f32], m: usize, k: usize) -> (Vec<u8>, Vec<f32>) {
    let pitch = q::group_scale_pitch(m).unwrap();
    let mut scales = vec![0.0; a_scales_len(m, k).unwrap()];
    let mut codes = vec![0; m * k];
    for row in 0..m {
        for (g, group) in x[row * k..(row + 1) * k].chunks(q::GROUP).enumerate() {
            let amax = group.iter().fold(0.0f32, |a, &v| q::amax_combine(a, q::finite_abs(v)));
            let scale = q::scale_from_amax(amax, Minifloat::E4m3.max(), false);
            scales[q::group_scale_index(row, g, pitch)] = scale;
            for (i, &v) in group.iter().enumerate() {
                codes[row * k + g * q::GROUP + i] = q::quantize(Minifloat::E4m3, v, scale);
            }
        }
    }
    (codes, scales)
}

/// 128 × 128-block quantisation of an `n × k` B on the CPU, edge blocks partial.
pub(crate) fn quantise_b(w: &[f32], n: usize, k: usize) -> (Vec<u8>, Vec<f32>) {
    let mut amax = vec![0.0f32; b_scales_len(n, k).unwrap()];
    for (i, &v) in w.iter().enumerate() {
        let b = q::block_scale_index(i / k, i % k, k);
        amax[b] = q::amax_combine(amax[b], q::finite_abs(v));
    }
    let scales: Vec<f32> = amax.iter().map(|&a| q::scale_from_amax(a, Minifloat::E4m3.max(), false)).collect();
    let codes = w
        .iter()
        .enumerate()
        .map(|(i, &v)| q::quantize(Minifloat::E4m3, v, scales[q::block_scale_index(i / k, i % k, k)]))
        .collect();
    (codes, scales)
}

/// A quantised problem: codes and scales of both operands, as the kernel reads them.
pub(crate) struct Quantised {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: Vec<u8>,
    pub(crate) a_scales: Vec<f32>,
    pub(crate) b: Vec<u8>,
    pub(crate) b_scales: Vec<f32>,
}

/// Which K block's scale the reference applies to K block `kb` (the identity for the true
/// reference).
pub(crate) type ScaleBlock = fn(usize, usize) -> usize;

impl Quantised {
    pub(crate) fn new(m: usize, n: usize, k: usize, seed: u64, outliers: bool) -> Self {
        let (a, a_scales) = quantise_a(&inputs(seed, m, k, outliers), m, k);
        let (b, b_scales) = quantise_b(&inputs(!seed, n, k, outliers), n, k);
        Quantised { m, n, k, a, a_scales, b, b_scales }
    }

    /// The dequantised operands (row-major, f64), A's K block `kb` scaled by block
    /// `pick(kb, k_blocks)`'s scale.
    fn dequantised(&self, pick: ScaleBlock) -> (Vec<f64>, Vec<f64>) {
        let (m, n, k) = (self.m, self.n, self.k);
        let pitch = q::group_scale_pitch(m).unwrap();
        let kbs = k_blocks(k);
        let decode = |c: u8| Minifloat::E4m3.decode(c) as f64;
        let a = (0..m * k)
            .map(|i| {
                let (row, p) = (i / k, i % k);
                let kb = pick(p / PROMOTE_EVERY_K, kbs);
                decode(self.a[i]) * self.a_scales[q::group_scale_index(row, kb, pitch)] as f64
            })
            .collect();
        let b = (0..n * k).map(|i| decode(self.b[i]) * self.b_scales[q::block_scale_index(i / k, i % k, k)] as f64);
        (a, b.collect())
    }

    /// The float64 product and each element's tolerance (module docs), row-major M × N.
    pub(crate) fn reference(&self, pick: ScaleBlock) -> (Vec<f64>, Vec<f64>) {
        let (m, n, k) = (self.m, self.n, self.k);
        let (a, b) = self.dequantised(pick);
        let promote = (k_blocks(k) + 2) as f64 * EPS_F32;
        let mut want = vec![0.0; m * n];
        let mut tol = vec![0.0; m * n];
        // Rows in parallel: the larger cases are 10⁹ multiply-adds.
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let rows_per = m.div_ceil(threads);
        std::thread::scope(|scope| {
            for (chunk, (want, tol)) in want.chunks_mut(rows_per * n).zip(tol.chunks_mut(rows_per * n)).enumerate() {
                let (a, b) = (&a, &b);
                scope.spawn(move || {
                    for (e, (w, t)) in want.iter_mut().zip(tol.iter_mut()).enumerate() {
                        let (i, j) = (chunk * rows_per + e / n, e % n);
                        let (row, col) = (&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
                        let (sum, abs) =
                            row.iter().zip(col).fold((0.0, 0.0), |(s, t), (x, y)| (s + x * y, t + (x * y).abs()));
                        *w = sum;
                        *t = (BLOCK_SUM_ERR + promote) * abs + EPS_BF16 * sum.abs() + 1e-30;
                    }
                });
            }
        });
        (want, tol)
    }
}

/// The first element of `got` outside its tolerance around `want`, described.
pub(crate) fn first_miss(m: usize, n: usize, got: impl Fn(usize) -> f64, want: &[f64], tol: &[f64]) -> Option<String> {
    (0..m * n).find_map(|e| {
        let g = got(e);
        let ok = (g - want[e]).abs() <= tol[e];
        (!ok).then(|| format!("D[{}, {}] = {g:e}, want {:e} ± {:e}", e / n, e % n, want[e], tol[e]))
    })
}

pub(crate) fn identity(kb: usize, _: usize) -> usize {
    kb
}

/// Runs one case on the GPU with D's pitch `ldd` (0: N) and checks every element of D and that
/// the pitch padding is untouched.
fn run(case: &Quantised, ldd: usize) -> Result<GemmPlan, TestCaseError> {
    run_problem(case, Fp8GemmProblem { ldd, ..Fp8GemmProblem::new(case.m, case.n, case.k) })
}

/// As [`run`], for `problem` (the case's shape, with its own pitch, tile, K split and cluster
/// choice); returns the plan that ran.
fn run_problem(case: &Quantised, problem: Fp8GemmProblem) -> Result<GemmPlan, TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (m, n, k) = (case.m, case.n, case.k);
    let e = problem.check().unwrap();
    let a = stream.clone_htod(&case.a).unwrap();
    let sa = stream.clone_htod(&case.a_scales).unwrap();
    let b = stream.clone_htod(&case.b).unwrap();
    let sb = stream.clone_htod(&case.b_scales).unwrap();
    let mut d: CudaSlice<bf16> = stream.clone_htod(&vec![bf16::from_bits(POISON); m * e.ldd]).unwrap();
    wf.fp8_gemm(stream, &problem, &a, &sa, &b, &sb, &mut d).unwrap();
    let got = stream.clone_dtoh(&d).unwrap();
    let (want, tol) = case.reference(identity);
    let at = |el: usize| got[(el / n) * e.ldd + el % n].to_f64();
    let plan = wf.fp8_gemm_plan(&problem).unwrap();
    let miss = first_miss(m, n, at, &want, &tol);
    // The worst error as a fraction of its tolerance: the margin, for tightening the bound.
    let worst = (0..m * n).map(|el| (at(el) - want[el]).abs() / tol[el]).fold(0.0, f64::max);
    eprintln!("fp8_gemm {m}×{n}×{k} ldd {}: worst error {worst:.3} of the tolerance", e.ldd);
    prop_assert!(
        miss.is_none(),
        "{m}×{n}×{k} ldd {} ({:?}, {:?}, grid {}): {}",
        e.ldd,
        plan.schedule,
        plan.clusters,
        plan.grid,
        miss.unwrap()
    );
    let touched = (0..m).flat_map(|r| (n..e.ldd).map(move |c| r * e.ldd + c)).find(|&i| got[i].to_bits() != POISON);
    prop_assert!(touched.is_none(), "{m}×{n}×{k}: pitch padding written at {:?}", touched);
    Ok(plan)
}

/// Asserts that `modes` (the plans' schedules of a test's shapes) hold every stream-K mode.
fn assert_every_schedule(modes: &[StreamKMode]) {
    for mode in [StreamKMode::DataParallel, StreamKMode::Hybrid, StreamKMode::Pure] {
        assert!(modes.contains(&mode), "no {mode:?} case among {modes:?}");
    }
}

/// K: a multiple of 16, mostly not of 128.
fn k16() -> impl Strategy<Value = usize> {
    prop_oneof![(1usize..40).prop_map(|x| 16 * x), prop::sample::select(vec![128usize, 256, 640, 1024])]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn ragged_shapes_match_the_dequantised_product(
        m in 1usize..300, n in 1usize..300, k in k16(), seed in any::<u64>(), outliers in any::<bool>(),
    ) {
        run(&Quantised::new(m, n, k, seed, outliers), 0)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn decode_rows_match_the_dequantised_product(
        m in 1usize..=64, n in prop::sample::select(vec![128usize, 200, 1024, 2112]), k in k16(), seed in any::<u64>(),
    ) {
        run(&Quantised::new(m, n, k, seed, seed % 3 == 0), 0)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn wide_tiles_match_the_dequantised_product(
        m in 1usize..200, n in 1usize..700, k in k16(), seed in any::<u64>(), pad in 0usize..3,
    ) {
        let ldd = if pad == 0 { 0 } else { n + pad };
        let problem = Fp8GemmProblem { ldd, tile_width: TileWidth::Wide, ..Fp8GemmProblem::new(m, n, k) };
        run_problem(&Quantised::new(m, n, k, seed, seed % 2 == 0), problem)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn pitched_outputs_leave_the_padding_alone(
        m in 1usize..200, n in 1usize..200, pad in 1usize..40, k in k16(), seed in any::<u64>(),
    ) {
        run(&Quantised::new(m, n, k, seed, false), n + pad)?;
    }
}

/// Larger shapes, each schedule: many full waves (data-parallel), a partial last wave
/// (hybrid stream-K) and a few tiles with a long K (pure stream-K).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn larger_shapes_on_every_schedule() {
    let mut modes = Vec::new();
    for (m, n, k) in [(1024, 2048, 512), (1152, 2304, 4096), (64, 4096, 7168), (200, 768, 4096)] {
        modes.push(run(&Quantised::new(m, n, k, (m * n + k) as u64, true), 0).unwrap().schedule);
    }
    // On 132 SMs (H200): data-parallel, hybrid, pure, pure.
    assert_every_schedule(&modes);
}

/// 2 × 1 clusters sharing each B slot by multicast, forced: even and odd tile rows (the last
/// pair's second CTA entirely past M), one row, ragged N, K off the 128-wide block, a pitched
/// D, and more pairs than resident clusters (the persistent loop over pairs).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn pairs_match_the_dequantised_product() {
    for (m, n, k, ldd) in
        [(256, 384, 512, 0), (129, 200, 144, 0), (1, 128, 128, 0), (300, 1000, 2064, 1003), (2304, 2048, 1024, 0)]
    {
        let problem = Fp8GemmProblem { ldd, clusters: Clusters::Pairs, ..Fp8GemmProblem::new(m, n, k) };
        let plan = run_problem(&Quantised::new(m, n, k, (3 * m + n + k) as u64, true), problem).unwrap();
        assert_eq!((plan.clusters, plan.schedule), (Clusters::Pairs, StreamKMode::DataParallel));
    }
}

/// The wide 64 × 256 tile: `Auto` takes it up to 64 rows and not above; forced, it runs every
/// schedule on 132 SMs (the CPU test `schedules_are_buildable…` pins which shape gets which) —
/// a long K on few tiles (pure stream-K), a partial last wave (hybrid), many tiles per CTA
/// (data-parallel) — and the edges: N within one 128-column block (the second warpgroup's
/// columns entirely past N), N one past a tile, several tile rows, K off the 128-wide block.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn wide_tiles_on_every_schedule_and_edge() {
    let wf = &gpu().1;
    for m in [1, 17, 64] {
        assert_eq!(wf.fp8_gemm_plan(&Fp8GemmProblem::new(m, 7168, 2048)).unwrap().tile, (64, 256), "M = {m}");
    }
    assert_eq!(wf.fp8_gemm_plan(&Fp8GemmProblem::new(65, 7168, 2048)).unwrap().tile, (128, 128));
    let mut modes = Vec::new();
    for (m, n, k) in [
        (64, 4096, 7168),
        (64, 7168, 2064),
        (1, 24576, 1536),
        (640, 4096, 512),
        (576, 4096, 4096),
        (5, 100, 144),
        (64, 257, 1024),
        (130, 700, 400),
    ] {
        let problem = Fp8GemmProblem { tile_width: TileWidth::Wide, ..Fp8GemmProblem::new(m, n, k) };
        let plan = run_problem(&Quantised::new(m, n, k, (5 * m + n + 3 * k) as u64, true), problem).unwrap();
        assert_eq!((plan.tile, plan.clusters), ((64, 256), Clusters::Off), "{m}×{n}×{k}");
        modes.push(plan.schedule);
    }
    assert_every_schedule(&modes);
}

/// Forced K splits (`KSplit::Ways`) on both tiles: up to 16 CTAs per tile, splits that do and do
/// not divide the K loop, and more CTAs than the problem has K blocks per tile.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn forced_k_splits_match_the_dequantised_product() {
    for tile_width in [TileWidth::Narrow, TileWidth::Wide] {
        for (m, n, k, ways) in [(64, 2112, 7168, 16), (16, 700, 1040, 5), (100, 300, 384, 4), (1, 4096, 2048, 2)] {
            let problem = Fp8GemmProblem { tile_width, k_split: KSplit::Ways(ways), ..Fp8GemmProblem::new(m, n, k) };
            let case = Quantised::new(m, n, k, (m + 7 * n + k + ways as usize) as u64, false);
            let plan = run_problem(&case, problem).unwrap();
            let tiles = (m.div_ceil(plan.tile.0 as usize) * n.div_ceil(plan.tile.1 as usize)) as u32;
            assert!(plan.grid <= tiles * ways, "{m}×{n}×{k} {tile_width:?}: grid {} over {tiles} tiles", plan.grid);
        }
    }
}

/// Programmatic dependent launches keep the stream's order: a long one-CTA GEMM (K 32768 on a
/// single tile) followed at once by a short GEMM into the same D, which may start on the idle
/// SMs, must leave the short one's product (without the kernel's wait its stores land first and
/// the long one's overwrite them); then a chain of stream-K and hybrid GEMMs, launched
/// back-to-back into their own Ds through one stream's shared partial slots and flags, each
/// matches its own reference.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn programmatic_launches_keep_stream_order() {
    let (dev, wf) = gpu();
    let mut wf = wf.clone();
    wf.set_programmatic_launch(true);
    let stream = dev.stream();
    let upload = |case: &Quantised| {
        let a = stream.clone_htod(&case.a).unwrap();
        let sa = stream.clone_htod(&case.a_scales).unwrap();
        let b = stream.clone_htod(&case.b).unwrap();
        let sb = stream.clone_htod(&case.b_scales).unwrap();
        (a, sa, b, sb)
    };
    let check = |case: &Quantised, d: &CudaSlice<bf16>, what: &str| {
        let got = stream.clone_dtoh(d).unwrap();
        let (want, tol) = case.reference(identity);
        let miss = first_miss(case.m, case.n, |e| got[e].to_f64(), &want, &tol);
        assert!(miss.is_none(), "{what} ({}×{}×{}): {}", case.m, case.n, case.k, miss.unwrap());
    };

    let (m, n) = (128, 128);
    let slow = Quantised::new(m, n, 32768, 11, false);
    let fast = Quantised::new(m, n, 128, 12, true);
    let slow_problem =
        Fp8GemmProblem { tile_width: TileWidth::Narrow, k_split: KSplit::Ways(1), ..Fp8GemmProblem::new(m, n, slow.k) };
    assert_eq!(wf.fp8_gemm_plan(&slow_problem).unwrap().grid, 1, "the long GEMM runs on one CTA");
    let (slow_in, fast_in) = (upload(&slow), upload(&fast));
    let mut d: CudaSlice<bf16> = stream.alloc_zeros(m * n).unwrap();
    for _ in 0..3 {
        wf.fp8_gemm(stream, &slow_problem, &slow_in.0, &slow_in.1, &slow_in.2, &slow_in.3, &mut d).unwrap();
        let problem = Fp8GemmProblem::new(m, n, fast.k);
        wf.fp8_gemm(stream, &problem, &fast_in.0, &fast_in.1, &fast_in.2, &fast_in.3, &mut d).unwrap();
    }
    check(&fast, &d, "the short GEMM after the long one");

    let chain: Vec<Quantised> =
        [(64, 4096, 7168), (576, 4096, 4096), (130, 700, 400), (256, 2112, 7168), (1, 24576, 1536)]
            .iter()
            .map(|&(m, n, k)| Quantised::new(m, n, k, (m + 3 * n + 5 * k) as u64, true))
            .collect();
    let inputs: Vec<_> = chain.iter().map(upload).collect();
    let mut ds: Vec<CudaSlice<bf16>> = chain.iter().map(|c| stream.alloc_zeros(c.m * c.n).unwrap()).collect();
    let mut modes = Vec::new();
    for ((case, (a, sa, b, sb)), d) in chain.iter().zip(&inputs).zip(&mut ds) {
        let problem = Fp8GemmProblem::new(case.m, case.n, case.k);
        modes.push(wf.fp8_gemm_plan(&problem).unwrap().schedule);
        wf.fp8_gemm(stream, &problem, a, sa, b, sb, d).unwrap();
    }
    assert!(modes.iter().any(|&mode| mode != StreamKMode::DataParallel), "the chain shares stream-K slots: {modes:?}");
    for (case, d) in chain.iter().zip(&ds) {
        check(case, d, "a GEMM of the back-to-back chain");
    }
}

/// The GPU quantisers' output (K a multiple of 128 there) goes straight into the GEMM.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_gpu_quantisers_feed_the_gemm() {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    for (m, n, k) in [(1, 256, 512), (77, 300, 384), (256, 384, 1024)] {
        let x: Vec<bf16> = inputs(7, m, k, true).iter().map(|&v| bf16::from_f32(v)).collect();
        let w: Vec<bf16> = inputs(8, n, k, false).iter().map(|&v| bf16::from_f32(v)).collect();
        let (x, w) = (stream.clone_htod(&x).unwrap(), stream.clone_htod(&w).unwrap());
        let mut a: CudaSlice<u8> = stream.alloc_zeros(m * k).unwrap();
        let mut b: CudaSlice<u8> = stream.alloc_zeros(n * k).unwrap();
        let mut sa: CudaSlice<f32> = stream.alloc_zeros(a_scales_len(m, k).unwrap()).unwrap();
        let mut sb: CudaSlice<f32> = stream.alloc_zeros(b_scales_len(n, k).unwrap()).unwrap();
        wf.quantize_per_token_group(stream, m, k, &x, ScaleRounding::Exact, &mut a, &mut sa).unwrap();
        wf.quantize_per_block(stream, n, k, &w, ScaleRounding::PowerOfTwo, &mut b, &mut sb).unwrap();
        let case = Quantised {
            m,
            n,
            k,
            a: stream.clone_dtoh(&a).unwrap(),
            a_scales: stream.clone_dtoh(&sa).unwrap(),
            b: stream.clone_dtoh(&b).unwrap(),
            b_scales: stream.clone_dtoh(&sb).unwrap(),
        };
        run(&case, 0).unwrap();
    }
}

/// The tolerance is tight enough to see a mis-indexed scale: a reference that scales each K
/// block of A with the next block's scale disagrees with the true one beyond the tolerance
/// (CPU only: if the kernel made this mistake, the GPU tests above would fail the same way).
#[test]
fn the_tolerance_catches_a_scale_from_the_wrong_k_block() {
    fn next(kb: usize, blocks: usize) -> usize {
        (kb + 1) % blocks
    }
    for (m, n, k, outliers) in [(5, 7, 256, false), (33, 20, 400, true), (3, 130, 144, false), (64, 64, 1024, true)] {
        let case = Quantised::new(m, n, k, 42 + k as u64, outliers);
        let (want, tol) = case.reference(identity);
        let (wrong, _) = case.reference(next);
        let misses = (0..m * n).filter(|&e| (wrong[e] - want[e]).abs() > tol[e]).count();
        assert!(misses * 4 > m * n, "{m}×{n}×{k}: only {misses} of {} elements caught", m * n);
    }
}

/// The same for B: a kernel that applied the block scale of another K block of B (as a
/// stream-K unit starting mid-K would, reading its scales from the wrong offset) fails the
/// tolerance on most elements, because the inputs give B's blocks different scales along K.
#[test]
fn the_tolerance_catches_a_b_scale_from_the_wrong_k_block() {
    for (m, n, k) in [(5, 7, 256), (33, 130, 640), (64, 300, 1024)] {
        let case = Quantised::new(m, n, k, 7 + k as u64, false);
        let (want, tol) = case.reference(identity);
        let kbs = k_blocks(k);
        // The same case with every block row's scales moved one K block along.
        let mut wrong = Quantised::new(m, n, k, 7 + k as u64, false);
        wrong.b_scales.chunks_mut(kbs).for_each(|scales| scales.rotate_left(1));
        let (shifted, _) = wrong.reference(identity);
        let misses = (0..m * n).filter(|&e| (shifted[e] - want[e]).abs() > tol[e]).count();
        assert!(misses * 4 > m * n, "{m}×{n}×{k}: only {misses} of {} elements caught", m * n);
    }
}

/// The CPU quantisers here agree with `logic::quant`'s dequantisation bound: every value
/// dequantises within e4m3's step of the input (a check of the test's own inputs).
#[test]
fn cpu_quantisers_round_trip_within_e4m3_steps() {
    let (m, k) = (9, 272);
    let x = inputs(3, m, k, true);
    let (codes, scales) = quantise_a(&x, m, k);
    let pitch = q::group_scale_pitch(m).unwrap();
    for (i, &v) in x.iter().enumerate() {
        let s = scales[q::group_scale_index(i / k, (i % k) / q::GROUP, pitch)];
        let back = Minifloat::E4m3.decode(codes[i]) * s;
        // e4m3 keeps 3 mantissa bits: relative step 2⁻³, plus the subnormal spacing 2⁻⁹ · s.
        assert!((back - v).abs() <= v.abs() / 16.0 + s / 512.0, "{i}: {v} → {back}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bad_arguments_are_refused() {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (m, n, k) = (5, 130, 144);
    let problem = Fp8GemmProblem::new(m, n, k);
    let e = problem.check().unwrap();
    let bytes = |len: usize| -> CudaSlice<u8> { stream.alloc_zeros(len + 16).unwrap() };
    let floats = |len: usize| -> CudaSlice<f32> { stream.alloc_zeros(len + 4).unwrap() };
    let (a, b, sa, sb) = (bytes(e.a), bytes(e.b), floats(e.a_scales), floats(e.b_scales));
    let mut d: CudaSlice<bf16> = stream.alloc_zeros(e.d).unwrap();
    let invalid = |r: warpforge::Result<()>, what: &str| match r {
        Err(Error::InvalidArgument(msg)) => eprintln!("refused ({what}): {msg}"),
        other => panic!("{what}: expected a refusal, got {other:?}"),
    };
    for bad in [
        Fp8GemmProblem::new(0, n, k),
        Fp8GemmProblem::new(m, 0, k),
        Fp8GemmProblem::new(m, n, 0),
        Fp8GemmProblem::new(m, n, 8),
        Fp8GemmProblem::new(m, n, 136),
        Fp8GemmProblem::new(m, n, 1 << 31),
        Fp8GemmProblem { ldd: n - 1, ..problem },
    ] {
        invalid(wf.fp8_gemm(stream, &bad, &a, &sa, &b, &sb, &mut d), &format!("{bad:?}"));
        assert!(matches!(wf.fp8_gemm_plan(&bad), Err(Error::InvalidArgument(_))), "plan of {bad:?}");
    }
    // Short buffers, one at a time.
    invalid(wf.fp8_gemm(stream, &problem, &a.slice(..e.a - 1), &sa, &b, &sb, &mut d), "short A");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa.slice(..e.a_scales - 1), &b, &sb, &mut d), "short A scales");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa, &b.slice(..e.b - 1), &sb, &mut d), "short B");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa, &b, &sb.slice(..e.b_scales - 1), &mut d), "short B scales");
    let mut short_d = d.slice_mut(..e.d - 1);
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa, &b, &sb, &mut short_d), "short D");
    // Misaligned bases (the buffers have slack, so only the alignment is wrong).
    invalid(wf.fp8_gemm(stream, &problem, &a.slice(1..), &sa, &b, &sb, &mut d), "A + 1 byte");
    invalid(wf.fp8_gemm(stream, &problem, &a.slice(8..), &sa, &b, &sb, &mut d), "A + 8 bytes");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa.slice(1..), &b, &sb, &mut d), "A scales + 4 bytes");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa, &b.slice(4..), &sb, &mut d), "B + 4 bytes");
    invalid(wf.fp8_gemm(stream, &problem, &a, &sa, &b, &sb.slice(2..), &mut d), "B scales + 8 bytes");
    // A 16-byte offset is fine; so is D at any element offset (direct stores).
    let mut d_shifted: CudaSlice<bf16> = stream.alloc_zeros(e.d + 1).unwrap();
    let mut d_view = d_shifted.slice_mut(1..);
    wf.fp8_gemm(stream, &problem, &a.slice(16..), &sa, &b.slice(16..), &sb, &mut d_view).unwrap();
    // The good call still runs after the refusals.
    wf.fp8_gemm(stream, &problem, &a, &sa, &b, &sb, &mut d).unwrap();
    stream.synchronize().unwrap();
}

/// A stream or any buffer of another CUDA context is refused before anything is launched.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn another_context_is_refused() {
    let (device, wf) = gpu();
    let ours = device.stream();
    let other = cudarc::driver::CudaContext::new_non_primary(0, 0).unwrap();
    let foreign = other.default_stream();
    let problem = Fp8GemmProblem::new(4, 128, 128);
    let e = problem.check().unwrap();
    let a: CudaSlice<u8> = ours.alloc_zeros(e.a).unwrap();
    let b: CudaSlice<u8> = ours.alloc_zeros(e.b).unwrap();
    let sa: CudaSlice<f32> = ours.alloc_zeros(e.a_scales).unwrap();
    let sb: CudaSlice<f32> = ours.alloc_zeros(e.b_scales).unwrap();
    let mut d: CudaSlice<bf16> = ours.alloc_zeros(e.d).unwrap();
    let fa: CudaSlice<u8> = foreign.alloc_zeros(e.a).unwrap();
    let fsb: CudaSlice<f32> = foreign.alloc_zeros(e.b_scales).unwrap();
    let mut fd: CudaSlice<bf16> = foreign.alloc_zeros(e.d).unwrap();
    let invalid = |r: warpforge::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(wf.fp8_gemm(&foreign, &problem, &a, &sa, &b, &sb, &mut d)), "foreign stream");
    assert!(invalid(wf.fp8_gemm(ours, &problem, &fa, &sa, &b, &sb, &mut d)), "foreign A");
    assert!(invalid(wf.fp8_gemm(ours, &problem, &a, &sa, &b, &fsb, &mut d)), "foreign B scales");
    assert!(invalid(wf.fp8_gemm(ours, &problem, &a, &sa, &b, &sb, &mut fd)), "foreign D");
    wf.fp8_gemm(ours, &problem, &a, &sa, &b, &sb, &mut d).unwrap();
    ours.synchronize().unwrap();
}
