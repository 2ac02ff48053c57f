//! The fused gate-up + SwiGLU GEMM (`Warpforge::swiglu`) and the unfused path's element-wise
//! half (`Warpforge::silu_mul`) on the GPU against float64 CPU references, plus the argument
//! checks (which must reject before anything is launched) and, on the CPU, the weight
//! interleaving both sides agree on.
//!
//! Outputs are poisoned with NaN before each launch, and the buffer runs a few poisoned
//! elements past the view handed to the kernel: every element of the output must be written and
//! none after it. Inputs are uniform random and never zero (a kernel that skips a load cannot
//! pass on a zero). Small problems are checked element by element; larger ones at 4096 random
//! elements plus the whole last row and last column, where the ragged tiles are.

use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::swiglu::{GATE_UP_BLOCK, SwigluElement};
use warpforge::{Consumers, Error, SwigluProblem, TileWidth, interleave_gate_up};

use crate::common::{EPS_F32, Element, check_all, gpu, mix, random_f32};

/// Cases per property test and element type.
const GPU_CASES: u32 = 24;
/// Problems up to this many multiply-adds (`m · intermediate · hidden`, gate and up together)
/// are checked at every element.
const FULL_CHECK_MACS: usize = 1 << 26;
/// Random elements checked in larger problems (besides the last row and column).
const SAMPLES: usize = 4096;
/// Poisoned elements after the output view: a write past its end shows there.
const OUT_TAIL: usize = 7;
/// Largest slope of silu(x) = x·σ(x) (1.0998, at x ≈ 2.4): how far it carries an error in x.
const SILU_SLOPE: f64 = 1.1;
/// Relative error of the device silu per unit of `2 + |x|`: `math::silu` is
/// `x · rcp.approx(1 + ex2.approx(−x·log2 e))`, whose sigmoid is off by ex2.approx's 2^-22,
/// the rounding of x·log2 e (|x|·2^-24 relative in the exponential), the add's 2^-24 and
/// rcp.approx's 2^-23: at most 2^-21·(2 + |x|). We allow 4× that.
pub(crate) const SILU_APPROX: f64 = 1.0 / (1u64 << 19) as f64;

/// The element types of these tests: the host view ([`Element`]) of a type the fused kernel takes.
pub(crate) trait SwigluCase: Element + SwigluElement {}
impl<T: Element + SwigluElement> SwigluCase for T {}

/// `n` values uniform in [-scale, scale], rounded to `T`, none of them zero (a value that
/// rounds to zero in f16's range becomes `scale / 2`).
pub(crate) fn nonzero<T: SwigluCase>(seed: u64, n: usize, scale: f32) -> Vec<T> {
    random_f32(seed, n, scale)
        .into_iter()
        .map(|v| {
            let t = T::of(v);
            if t.f64() == 0.0 { T::of(scale * 0.5) } else { t }
        })
        .collect()
}

pub(crate) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// One MLP's gate and up weights (`intermediate × hidden` each): their rounded values on the
/// host (f32 holds bf16 and f16 exactly) and the interleaved gate-up weight on the GPU.
pub(crate) struct Weights<T> {
    pub(crate) hidden: usize,
    pub(crate) intermediate: usize,
    gate: Vec<f32>,
    up: Vec<f32>,
    pub(crate) gate_up: CudaSlice<T>,
}

impl<T: SwigluCase> Weights<T> {
    /// Uniform in ±3/√hidden, so that with x uniform in ±1 the gate and up values have unit
    /// variance (hidden · 1/3 · 3/hidden): silu is far from linear over their range.
    pub(crate) fn random(seed: u64, intermediate: usize, hidden: usize) -> Self {
        let scale = 3.0 / (hidden as f32).sqrt();
        let gate: Vec<T> = nonzero(seed ^ 0x9a7e, intermediate * hidden, scale);
        let up: Vec<T> = nonzero(seed ^ 0x0f, intermediate * hidden, scale);
        let interleaved = interleave_gate_up(&gate, &up, intermediate, hidden, T::ZERO).unwrap();
        let gate_up = gpu().0.stream().clone_htod(&interleaved).unwrap();
        let widen = |w: Vec<T>| w.into_iter().map(|v| v.f64() as f32).collect();
        Weights { hidden, intermediate, gate: widen(gate), up: widen(up), gate_up }
    }

    /// The f64 value of `out[i][j]` for activations `x` (rounded values) and the error the GPU
    /// result may have there.
    ///
    /// The bound, term by term (u = 2^-24, the f32 unit roundoff; g and u the exact gate and up
    /// values of the rounded inputs):
    /// - Products of bf16/f16 values are exact in f32, so the accumulations of g and u err by
    ///   at most hidden·u·Σ|x·w| each in any summation order; we allow twice that (eg, eu) for
    ///   the tensor core's internal alignment of the addends, as the GEMM suite does.
    /// - silu carries eg at most SILU_SLOPE× and the product then errs by at most
    ///   |silu(g)|·eu + SILU_SLOPE·eg·(|u| + eu).
    /// - The device silu's approximation: SILU_APPROX·(2 + |g|)·|silu(g)·u|.
    /// - One rounding to T: EPS_T·|ref|, doubled for the f32 roundings of the epilogue's own
    ///   multiplications and for EPS_T times the terms above; near zero, T's subnormal step.
    pub(crate) fn expect(&self, x: &[f32], i: usize, j: usize) -> (f64, f64) {
        let k = self.hidden;
        let row = &x[i * k..][..k];
        let (mut g, mut u, mut g_mag, mut u_mag) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for ((&a, &wg), &wu) in row.iter().zip(&self.gate[j * k..][..k]).zip(&self.up[j * k..][..k]) {
            let (pg, pu) = (a as f64 * wg as f64, a as f64 * wu as f64);
            (g, u, g_mag, u_mag) = (g + pg, u + pu, g_mag + pg.abs(), u_mag + pu.abs());
        }
        let want = silu(g) * u;
        let (eg, eu) = (2.0 * k as f64 * EPS_F32 * g_mag, 2.0 * k as f64 * EPS_F32 * u_mag);
        let propagated = silu(g).abs() * eu + SILU_SLOPE * eg * (u.abs() + eu);
        let approx = SILU_APPROX * (2.0 + g.abs()) * want.abs();
        (want, 2.0 * T::EPS * want.abs() + 1.01 * (propagated + approx) + T::ABS_FLOOR)
    }
}

/// Runs `Warpforge::swiglu` for `m` random tokens through `w` and checks the output: panics on
/// an unwritten or wrong element, or a write past the end.
fn check_swiglu<T: SwigluCase>(w: &Weights<T>, m: usize, seed: u64) {
    check_swiglu_variant(w, m, seed, Variant::Auto);
}

/// The kernel variants a caller can force (`Auto` leaves the choice to warpforge).
#[derive(Clone, Copy, Debug)]
enum Variant {
    Auto,
    Cooperative,
    PingPong,
    Narrow,
}

impl Variant {
    fn apply(self, mut problem: SwigluProblem) -> SwigluProblem {
        let (consumers, tile_width) = match self {
            Variant::Auto => (Consumers::Auto, TileWidth::Auto),
            Variant::Cooperative => (Consumers::Cooperative, TileWidth::Wide),
            Variant::PingPong => (Consumers::PingPong, TileWidth::Wide),
            Variant::Narrow => (Consumers::Cooperative, TileWidth::Narrow),
        };
        (problem.consumers, problem.tile_width) = (consumers, tile_width);
        problem
    }
}

fn variant() -> impl Strategy<Value = Variant> {
    prop::sample::select(vec![Variant::Auto, Variant::Cooperative, Variant::PingPong, Variant::Narrow])
}

/// As [`check_swiglu`], with the kernel variant forced.
fn check_swiglu_variant<T: SwigluCase>(w: &Weights<T>, m: usize, seed: u64, variant: Variant) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let (hidden, intermediate) = (w.hidden, w.intermediate);
    let problem = variant.apply(SwigluProblem::new(m, hidden, intermediate));
    let x: Vec<T> = nonzero(seed, m * hidden, 1.0);
    let dx = stream.clone_htod(&x).unwrap();
    let len = m * intermediate;
    let mut dout = stream.clone_htod(&vec![T::NAN; len + OUT_TAIL]).unwrap();
    if let Err(e) = wf.swiglu(stream, &problem, &dx, &w.gate_up, &mut dout.slice_mut(..len)) {
        panic!("{problem:?}: swiglu failed: {e}");
    }
    let got: Vec<f64> = stream.clone_dtoh(&dout).unwrap().into_iter().map(T::f64).collect();
    let unwritten = got[..len].iter().filter(|v| v.is_nan()).count();
    assert_eq!(unwritten, 0, "{problem:?}: {unwritten} of {len} output elements are NaN (unwritten)");
    assert!(got[len..].iter().all(|v| v.is_nan()), "{problem:?}: written past the end of out: {:?}", &got[len..]);

    let x: Vec<f32> = x.into_iter().map(|v| v.f64() as f32).collect();
    // Element by element when small; otherwise the last row and column and SAMPLES random ones.
    let sampled = (m * intermediate * hidden > FULL_CHECK_MACS).then(|| {
        let mut points: Vec<(usize, usize)> =
            (0..intermediate).map(|j| (m - 1, j)).chain((0..m).map(|i| (i, intermediate - 1))).collect();
        let pick = |t: u64, len: usize| (mix(seed.wrapping_add(t)) % len as u64) as usize;
        points.extend((0..SAMPLES as u64).map(|t| (pick(2 * t, m), pick(2 * t + 1, intermediate))));
        points
    });
    let count = sampled.as_ref().map_or(len, Vec::len);
    let (bad, first) = check_all(count, |t| {
        let (i, j) = sampled.as_ref().map_or((t / intermediate, t % intermediate), |s| s[t]);
        let (want, tol) = w.expect(&x, i, j);
        let value = got[i * intermediate + j];
        ((value - want).abs() > tol || !value.is_finite())
            .then(|| format!("out[{i},{j}] = {value}, want {want} ± {tol:.3e}"))
    });
    assert_eq!(bad, 0, "{problem:?}: {bad} of {count} checked elements wrong, e.g. {first:?}");
}

/// Token counts: 1, small primes, sizes next to tile multiples, anything up to ~600.
fn tokens() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(1usize),
        2 => prop::sample::select(vec![2usize, 3, 5, 7, 13, 31, 61, 63, 64, 65, 127, 128, 129, 255, 257]),
        2 => 1usize..300,
        1 => 300usize..=600,
    ]
}

/// Model widths: reductions shorter than one K slice, not multiples of 8, up to ~1200.
fn hidden_widths() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => prop::sample::select(vec![1usize, 2, 7, 8, 9, 15, 17, 63, 64, 65, 100, 127, 129]),
        2 => 1usize..400,
        1 => 400usize..=1200,
    ]
}

/// Intermediate widths: partial interleaving blocks, ragged tiles, up to ~700.
fn intermediate_widths() -> impl Strategy<Value = usize> {
    prop_oneof![
        2 => prop::sample::select(vec![1usize, 5, 8, 9, 15, 16, 17, 127, 128, 129, 200, 264]),
        2 => 1usize..300,
        1 => 300usize..=700,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, max_shrink_iters: 64, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn swiglu_random_bf16_matches_f64(m in tokens(), hidden in hidden_widths(), intermediate in intermediate_widths(), seed: u64, variant in variant()) {
        check_swiglu_variant(&Weights::<bf16>::random(seed, intermediate, hidden), m, seed, variant);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn swiglu_random_f16_matches_f64(m in tokens(), hidden in hidden_widths(), intermediate in intermediate_widths(), seed: u64, variant in variant()) {
        check_swiglu_variant(&Weights::<f16>::random(seed, intermediate, hidden), m, seed, variant);
    }
}

/// Real MLP shapes (Llama-2-7B: 4096 → 11008; Llama-3-8B / Mistral-7B: 4096 → 14336) at one
/// token, one small batch and a prefill-sized batch, checked at samples and the edges.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn swiglu_mlp_shapes_match_f64_at_samples() {
    for intermediate in [11008, 14336] {
        let w = Weights::<bf16>::random(intermediate as u64, intermediate, 4096);
        for m in [1, 128, 1000] {
            check_swiglu(&w, m, m as u64);
        }
    }
    check_swiglu(&Weights::<f16>::random(7, 14336, 4096), 1000, 8);
}

/// Every forced variant on shapes that cover its schedules: one wave or less (stream-K for the
/// cooperative and narrow tiles), a partial last wave (hybrid), several waves, and ragged edges.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn swiglu_forced_variants_match_f64() {
    let (_, wf) = gpu();
    // Decode-sized calls run ping-pong unless told otherwise.
    for m in [1, 16, 64] {
        let plan = wf.swiglu_plan::<bf16>(&SwigluProblem::new(m, 2048, 1000)).unwrap();
        assert_eq!(plan.entry, "gemm_swiglu_bf16_pingpong_sm90", "m = {m}: {plan:?}");
    }
    let w = Weights::<bf16>::random(3, 1000, 2048);
    for (variant, entry) in [
        (Variant::Cooperative, "gemm_swiglu_bf16_sm90"),
        (Variant::PingPong, "gemm_swiglu_bf16_pingpong_sm90"),
        (Variant::Narrow, "gemm_swiglu_bf16_narrow_sm90"),
    ] {
        for m in [1, 77, 640, 2100] {
            let plan = wf.swiglu_plan::<bf16>(&variant.apply(SwigluProblem::new(m, 2048, 1000))).unwrap();
            assert_eq!(plan.entry, entry, "{variant:?}, m = {m}: {plan:?}");
            check_swiglu_variant(&w, m, m as u64 + 11, variant);
        }
    }
}

/// Runs `silu_mul` over `h` starting `h_offset` elements into its buffer, into `out` starting
/// `out_offset` elements into its buffer (an offset that is not a multiple of 8 misaligns the
/// pointer and forces the scalar path), and checks every element against f64.
fn check_silu_mul<T: SwigluCase>(m: usize, intermediate: usize, h_offset: usize, out_offset: usize) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let what = format!("silu_mul m={m} I={intermediate} offsets ({h_offset}, {out_offset})");
    // Gate values over ±4, where silu is far from linear.
    let h: Vec<T> = nonzero((m * 7919 + intermediate) as u64, h_offset + 2 * m * intermediate, 4.0);
    let dh = stream.clone_htod(&h).unwrap();
    let len = m * intermediate;
    let mut dout = stream.clone_htod(&vec![T::NAN; out_offset + len + OUT_TAIL]).unwrap();
    let mut view = dout.slice_mut(out_offset..out_offset + len);
    if let Err(e) = wf.silu_mul(stream, m, intermediate, &dh.slice(h_offset..), &mut view) {
        panic!("{what}: failed: {e}");
    }
    let got: Vec<f64> = stream.clone_dtoh(&dout).unwrap().into_iter().map(T::f64).collect();
    let outside = got[..out_offset].iter().chain(&got[out_offset + len..]);
    assert!(outside.clone().all(|v| v.is_nan()), "{what}: written outside out: {:?}", outside.collect::<Vec<_>>());
    let h = &h[h_offset..];
    let (bad, first) = check_all(len, |t| {
        let (i, j) = (t / intermediate, t % intermediate);
        let (g, u) = (h[2 * i * intermediate + j].f64(), h[(2 * i + 1) * intermediate + j].f64());
        let want = silu(g) * u;
        // One rounding to T (plus the two f32 multiplications), and the device silu's error.
        let tol = 1.01 * T::EPS * want.abs() + SILU_APPROX * (2.0 + g.abs()) * want.abs() + T::ABS_FLOOR;
        let value = got[out_offset + t];
        ((value - want).abs() > tol || !value.is_finite())
            .then(|| format!("out[{i},{j}] = {value}, want {want} ± {tol:.3e}"))
    });
    assert_eq!(bad, 0, "{what}: {bad} of {len} elements wrong, e.g. {first:?}");
}

/// The vector path (I % 8 == 0, aligned) and the scalar one (ragged I, or a misaligned h or
/// out), each over grids that visit every element once and over grid-stride loops of many
/// steps (the largest cases stride over more than a row per step).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn silu_mul_matches_f64() {
    let cases: [(usize, usize, usize, usize); 12] = [
        (1, 8, 0, 0),
        (3, 64, 0, 0),
        (257, 11008, 0, 0),
        (1000, 4096, 0, 0),
        (4096, 11008, 0, 0),
        (1, 1, 0, 0),
        (5, 13, 0, 0),
        (129, 1001, 0, 0),
        (600, 1001, 0, 0),
        (64, 64, 1, 0),
        (64, 64, 0, 3),
        (300, 4096, 8, 5),
    ];
    for (m, intermediate, h_offset, out_offset) in cases {
        check_silu_mul::<bf16>(m, intermediate, h_offset, out_offset);
        check_silu_mul::<f16>(m, intermediate, h_offset, out_offset);
    }
}

fn expect_invalid(what: &str, result: warpforge::Result<()>) {
    match result {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// Each invalid argument of `swiglu` and `silu_mul` is an `Error::InvalidArgument`, and nothing
/// is launched: the output keeps its poison. A valid call on the same buffers succeeds first,
/// so each rejection is due to its one change. The overflowing sizes are chosen so that their
/// products wrap to lengths the buffers do satisfy: wrapping arithmetic would launch them.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn swiglu_and_silu_mul_reject_invalid_arguments_without_launching() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let (m, hidden, intermediate) = (16, 24, 13);
    let base = SwigluProblem::new(m, hidden, intermediate);
    let (x_len, w_len, out_len) = (m * hidden, base.gate_up_rows() * hidden, m * intermediate);
    let x = stream.clone_htod(&vec![bf16::ONE; x_len]).unwrap();
    let w = stream.clone_htod(&vec![bf16::ONE; w_len]).unwrap();
    let poison = vec![bf16::NAN; out_len];
    let mut out = stream.clone_htod(&poison).unwrap();
    wf.swiglu(stream, &base, &x, &w, &mut out).unwrap();
    let valid: Vec<f32> = stream.clone_dtoh(&out).unwrap().into_iter().map(bf16::to_f32).collect();
    let want = bf16::from_f64(silu(hidden as f64) * hidden as f64).to_f32();
    assert!(valid.iter().all(|&v| v == want), "the valid call computes silu(H)·H everywhere: {valid:?}");
    stream.memcpy_htod(&poison, &mut out).unwrap();

    let top = 1usize << (usize::BITS - 1);
    let bad_problems: [(&str, SwigluProblem); 8] = [
        ("m = 0", SwigluProblem::new(0, hidden, intermediate)),
        ("hidden = 0", SwigluProblem::new(m, 0, intermediate)),
        ("intermediate = 0", SwigluProblem::new(m, hidden, 0)),
        // m·hidden and m·intermediate wrap to 0.
        ("m · hidden overflows (m = 2^63)", SwigluProblem::new(top, 2, 2)),
        ("m · hidden overflows (m = 2^62)", SwigluProblem::new(top >> 1, 4, 4)),
        // m·hidden and gate_up_rows·hidden wrap to 0.
        ("hidden overflows", SwigluProblem::new(2, top, 8)),
        // gate_up_rows = 2^63: gate_up_rows·hidden and m·intermediate wrap to 0.
        ("gate_up_rows · hidden overflows", SwigluProblem::new(4, 2, top >> 1)),
        // 2·I rounded up to whole blocks does not fit in usize.
        ("gate_up_rows overflows", SwigluProblem::new(1, 1, usize::MAX - 3)),
    ];
    for (what, problem) in &bad_problems {
        expect_invalid(what, wf.swiglu(stream, problem, &x, &w, &mut out));
    }
    expect_invalid("x one short", wf.swiglu(stream, &base, &x.slice(..x_len - 1), &w, &mut out));
    expect_invalid("w one short", wf.swiglu(stream, &base, &x, &w.slice(..w_len - 1), &mut out));
    expect_invalid("out one short", wf.swiglu(stream, &base, &x, &w, &mut out.slice_mut(..out_len - 1)));
    assert!(stream.clone_dtoh(&out).unwrap().iter().all(|v| v.is_nan()), "a rejected swiglu call wrote out");

    // silu_mul over h = [gate | up] of the same m and intermediate.
    let h = stream.clone_htod(&vec![bf16::ONE; 2 * out_len]).unwrap();
    wf.silu_mul(stream, m, intermediate, &h, &mut out).unwrap();
    let want = bf16::from_f64(silu(1.0)).to_f32();
    assert!(stream.clone_dtoh(&out).unwrap().iter().all(|v| v.to_f32() == want), "the valid call computes silu(1)");
    stream.memcpy_htod(&poison, &mut out).unwrap();
    let bad_sizes: [(&str, usize, usize); 4] = [
        ("m = 0", 0, intermediate),
        ("intermediate = 0", m, 0),
        // m·I wraps to 0.
        ("m · intermediate overflows", top >> 1, 4),
        // m·I = 2^63 fits (out is too short for it); 2·m·I, h's length, wraps to 0.
        ("2 · m · intermediate overflows", top >> 1, 2),
    ];
    for (what, rows, cols) in bad_sizes {
        expect_invalid(what, wf.silu_mul(stream, rows, cols, &h, &mut out));
    }
    expect_invalid("h one short", wf.silu_mul(stream, m, intermediate, &h.slice(..2 * out_len - 1), &mut out));
    let mut out_short = out.slice_mut(..out_len - 1);
    expect_invalid("out one short", wf.silu_mul(stream, m, intermediate, &h, &mut out_short));
    assert!(stream.clone_dtoh(&out).unwrap().iter().all(|v| v.is_nan()), "a rejected silu_mul call wrote out");
}

/// Interleaving: blocks of GATE_UP_BLOCK gate rows then the same up rows, the last block padded
/// with `zero`, for an intermediate width that is one block, a partial second block, and two.
#[test]
fn interleave_gate_up_places_gate_and_up_rows_in_blocks() {
    const B: usize = GATE_UP_BLOCK;
    let hidden = 3;
    for intermediate in [8, 13, 16] {
        // Gate element (r, c) holds 1000 + 3r + c, up element 100000 + 3r + c; padding -1.
        let gate: Vec<i32> = (0..intermediate * hidden).map(|e| 1000 + e as i32).collect();
        let up: Vec<i32> = (0..intermediate * hidden).map(|e| 100_000 + e as i32).collect();
        let w = interleave_gate_up(&gate, &up, intermediate, hidden, -1).unwrap();
        let rows = SwigluProblem::new(1, hidden, intermediate).gate_up_rows();
        assert_eq!(rows, 2 * intermediate.div_ceil(B) * B);
        assert_eq!(w.len(), rows * hidden, "intermediate {intermediate}");
        for row in 0..rows {
            let (block, within) = (row / (2 * B), row % (2 * B));
            let (source, r) = if within < B { (&gate, block * B + within) } else { (&up, block * B + within - B) };
            for c in 0..hidden {
                let want = if r < intermediate { source[r * hidden + c] } else { -1 };
                assert_eq!(w[row * hidden + c], want, "intermediate {intermediate}: row {row}, column {c}");
            }
        }
        let padding = w.iter().filter(|&&v| v == -1).count();
        assert_eq!(padding, 2 * (rows / 2 - intermediate) * hidden, "intermediate {intermediate}: padding");
    }

    // The same positions written out by hand, for intermediate 13 (rows: gate 0..8, up 0..8,
    // gate 8..13, 3 padding, up 8..13, 3 padding).
    let gate: Vec<i32> = (0..13 * 3).map(|e| 1000 + e).collect();
    let up: Vec<i32> = (0..13 * 3).map(|e| 100_000 + e).collect();
    let w = interleave_gate_up(&gate, &up, 13, 3, -1).unwrap();
    let at = |row: usize, c: usize| w[row * 3 + c];
    assert_eq!((at(0, 0), at(7, 2), at(8, 0), at(15, 1)), (1000, 1023, 100_000, 100_022));
    assert_eq!((at(16, 0), at(20, 2), at(21, 0), at(23, 2)), (1024, 1038, -1, -1));
    assert_eq!((at(24, 1), at(28, 2), at(29, 0), at(31, 2)), (100_025, 100_038, -1, -1));

    let refused = |what: &str, result: warpforge::Result<Vec<i32>>| {
        assert!(matches!(result, Err(Error::InvalidArgument(_))), "{what}: {result:?}");
    };
    refused("gate one short", interleave_gate_up(&gate[1..], &up, 13, 3, -1));
    refused("up one long", interleave_gate_up(&gate, &[&up[..], &[0]].concat(), 13, 3, -1));
    refused("hidden off by one", interleave_gate_up(&gate, &up, 13, 4, -1));
    refused("intermediate × hidden overflows", interleave_gate_up(&[], &[], usize::MAX, 2, -1));
}
