//! The GEMM suite's float64 checker, shared by `gpu_gemm` (valid problems, exact buffers),
//! `gpu_fuzz` (any problem, buffers of any length and offset) and `gpu_soak`: a [`Case`]
//! describes one call, [`Geometry`] places every element of A, B, C, D independently of the
//! library, [`try_case`] runs the call and checks D against a float64 [`Reference`].
//!
//! D is poisoned with NaN before each launch: every element inside the problem must be written,
//! and every element outside it (padding columns of `ldd`, gaps between batches, a tail after the
//! last batch, the elements before a view's offset) must still hold its poison. With `beta = 0`,
//! C (when passed) is NaN as well, so a kernel that reads C anyway fails. Small problems are
//! checked element by element; larger ones (the reference is O(M·N·K)) at 4096 random elements
//! plus the whole last row and last column of every batch, where the ragged tiles are.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use warpforge::Warpforge;
use warpforge::gemm::{GemmInput, GemmOutput};
use warpforge::{Activation, COperand, Clusters, Consumers, Cores, Epilogue, GemmProblem, KSplit, Layout, TileWidth};

use super::{EPS_F32, Element, View, gpu, mix, random_f32};

/// Problems up to this many multiply-adds (batch·M·N·K) are checked at every element.
const FULL_CHECK_MACS: usize = 1 << 25;
/// Random elements checked in larger problems (besides the edge rows and columns).
const SAMPLES: usize = 4096;
/// Poisoned elements after D's last batch: a write past the end of D shows there.
const D_TAIL: usize = 7;

/// One GEMM call as the tests describe it; [`Geometry`] turns it into a `GemmProblem`.
#[derive(Clone, Debug)]
pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub a_layout: Layout,
    pub b_layout: Layout,
    /// Extra elements over the packed lda, ldb, ldc, ldd; 0 passes 0 (packed) to the API.
    pub pads: [usize; 4],
    /// Elements added to (or, negative, taken from) the packed batch strides of A, B, C, D:
    /// negative gaps make batches overlap (legal for A, B and C, which are only read); `None`
    /// passes 0 (packed).
    pub gaps: [Option<isize>; 4],
    pub alpha: f32,
    pub beta: f32,
    pub with_c: bool,
    /// C is D ([`COperand::InPlace`]; `with_c` must be set too): C's values are D's before the
    /// call, read with D's pitch and batch stride.
    pub c_in_place: bool,
    pub with_bias: bool,
    pub activation: Activation,
    pub consumers: Consumers,
    pub tile_width: TileWidth,
    pub clusters: Clusters,
    pub cores: Cores,
    pub k_split: KSplit,
    pub seed: u64,
}

impl Case {
    /// A plain case: A row-major, B column-major, packed, no epilogue terms.
    pub fn plain(m: usize, n: usize, k: usize, batch: usize) -> Case {
        Case {
            m,
            n,
            k,
            batch,
            a_layout: Layout::RowMajor,
            b_layout: Layout::ColMajor,
            pads: [0; 4],
            gaps: [None; 4],
            alpha: 1.0,
            beta: 0.0,
            with_c: false,
            c_in_place: false,
            with_bias: false,
            activation: Activation::None,
            consumers: Consumers::Auto,
            tile_width: TileWidth::Auto,
            clusters: Clusters::Auto,
            cores: Cores::Auto,
            k_split: KSplit::Auto,
            seed: (m * 1_000_003 + n * 1009 + k) as u64,
        }
    }
}

/// Index of operand X in the `[A, B, C, D]` arrays below.
pub const A: usize = 0;
pub const B: usize = 1;
pub const C: usize = 2;
pub const D: usize = 3;

/// Where every element of A, B, C, D lives, computed here independently of the library.
pub struct Geometry {
    pub problem: GemmProblem,
    /// Leading dimensions as used (C's are D's in place).
    pub ld: [usize; 4],
    /// Batch strides as used (C's is D's in place).
    pub stride: [usize; 4],
    /// Elements each operand's buffer must hold: the span the problem addresses.
    pub need: [usize; 4],
}

impl Geometry {
    /// The geometry of `case`. Panics if a negative gap leaves a stride below 1 (the fuzzer
    /// builds its cases so that none does).
    pub fn of(case: &Case) -> Geometry {
        let (m, n, k) = (case.m, case.n, case.k);
        // (contiguous extent, number of lines) of each operand per batch.
        let a_shape = if case.a_layout == Layout::RowMajor { (k, m) } else { (m, k) };
        let b_shape = if case.b_layout == Layout::RowMajor { (n, k) } else { (k, n) };
        let shapes = [a_shape, b_shape, (n, m), (n, m)];
        let mut problem = GemmProblem::new(m, n, k);
        problem.batch = case.batch;
        problem.a_layout = case.a_layout;
        problem.b_layout = case.b_layout;
        problem.alpha = case.alpha;
        problem.beta = case.beta;
        problem.activation = case.activation;
        problem.consumers = case.consumers;
        problem.tile_width = case.tile_width;
        problem.clusters = case.clusters;
        problem.cores = case.cores;
        problem.k_split = case.k_split;
        let (mut ld, mut stride, mut need, mut ld_arg) = ([0; 4], [0; 4], [0; 4], [0; 4]);
        for (x, &(inner, lines)) in shapes.iter().enumerate() {
            ld[x] = inner + case.pads[x];
            ld_arg[x] = if case.pads[x] == 0 { 0 } else { ld[x] };
            let packed = ld[x] * lines;
            stride[x] = packed.checked_add_signed(case.gaps[x].unwrap_or(0)).filter(|&s| s >= 1).expect("stride ≥ 1");
            problem.batch_strides[x] = if case.gaps[x].is_some() { stride[x] } else { 0 };
            need[x] = (case.batch - 1) * stride[x] + (lines - 1) * ld[x] + inner;
        }
        [problem.lda, problem.ldb, problem.ldc, problem.ldd] = ld_arg;
        if case.c_in_place {
            (ld[C], stride[C], need[C]) = (ld[D], stride[D], need[D]);
        }
        Geometry { problem, ld, stride, need }
    }

    pub fn a_at(&self, case: &Case, z: usize, i: usize, p: usize) -> usize {
        let within = if case.a_layout == Layout::RowMajor { i * self.ld[A] + p } else { p * self.ld[A] + i };
        z * self.stride[A] + within
    }

    pub fn b_at(&self, case: &Case, z: usize, p: usize, j: usize) -> usize {
        let within = if case.b_layout == Layout::RowMajor { p * self.ld[B] + j } else { j * self.ld[B] + p };
        z * self.stride[B] + within
    }

    /// Index of (z, i, j) in the row-major C (`x = C`) or D (`x = D`).
    pub fn cd_at(&self, x: usize, z: usize, i: usize, j: usize) -> usize {
        z * self.stride[x] + i * self.ld[x] + j
    }
}

/// Where the view of each operand sits in its buffer: A, B, C, D, then the bias.
#[derive(Clone, Copy, Debug, Default)]
pub struct Views(pub [View; 5]);

/// The float64 reference of one case, with the operands densely repacked (A as batch × M × K,
/// B as batch × N × K; f32 holds bf16/f16 values exactly) so each element is one contiguous dot.
struct Reference<'a> {
    case: &'a Case,
    geometry: &'a Geometry,
    a_rows: Vec<f32>,
    b_cols: Vec<f32>,
    /// C's values, indexed by `cd_at(C, …)` (D's buffer before the call, in place).
    c: Vec<f32>,
    bias: Vec<f32>,
    eps_out: f64,
    abs_floor: f64,
}

impl Reference<'_> {
    /// The f64 value of D at (z, i, j) and the error the GPU result may have there.
    ///
    /// The bound, term by term (u = 2^-24, the f32 unit roundoff):
    /// - Products of bf16/f16 inputs are exact in f32, so the MMA's only error is the f32
    ///   accumulation of K products, at most K·u·Σ|a·b| for any summation order; we allow
    ///   2·K·u·Σ|a·b| for the tensor core's internal alignment of the addends. Scaled by |alpha|.
    /// - `alpha·acc + beta·c + bias` is at most four f32 roundings: 4·u·(|alpha|Σ|a·b| + |beta·c|
    ///   + |bias|) (C and bias themselves are exact: they are stored values).
    /// - The activations are Lipschitz with constant ≤ 1.13 (GELU-tanh's largest slope; SiLU's is
    ///   1.10, ReLU's 1), so they carry the errors above at most 1.13×.
    /// - SiLU and GELU run on the hardware approximations `ex2.approx`, `rcp.approx` and
    ///   `tanh.approx`. tanh.approx.f32 has a relative error of about 2^-11, which in
    ///   0.5·x·(1 + tanh(·)) is at most 2^-12·|x|; ex2/rcp are near 2^-22, plus the rounding of
    ///   x·log2(e) (|x|·2^-24 relative in exp). We allow 2^-10·|x| for both, x the pre-activation.
    /// - Rounding to the output type: eps_out·|want| (+ eps_out times the errors above, covered by
    ///   the 1.01 factor) and, near zero, the output type's subnormal or flush-to-zero step.
    fn expect(&self, z: usize, i: usize, j: usize) -> (f64, f64) {
        const U: f64 = EPS_F32;
        let (case, k) = (self.case, self.case.k);
        let row = &self.a_rows[(z * case.m + i) * k..][..k];
        let col = &self.b_cols[(z * case.n + j) * k..][..k];
        let (mut dot, mut mag) = (0.0f64, 0.0f64);
        for (&a, &b) in row.iter().zip(col) {
            let prod = a as f64 * b as f64;
            dot += prod;
            mag += prod.abs();
        }
        let alpha = case.alpha as f64;
        let c_term =
            if case.beta != 0.0 { case.beta as f64 * self.c[self.geometry.cd_at(C, z, i, j)] as f64 } else { 0.0 };
        let bias = if case.with_bias { self.bias[j] as f64 } else { 0.0 };
        let pre = alpha * dot + c_term + bias;
        let want = activate(case.activation, pre);
        let sum_err = alpha.abs() * 2.0 * k as f64 * U * mag;
        let epilogue_err = 4.0 * U * (alpha.abs() * mag + c_term.abs() + bias.abs());
        let (lipschitz, approx_rel) = match case.activation {
            Activation::None | Activation::Relu => (1.0, 0.0),
            Activation::Silu | Activation::GeluTanh => (1.13, 1.0 / 1024.0),
        };
        let tol = self.eps_out * want.abs()
            + self.abs_floor
            + 1.01 * (lipschitz * (sum_err + epilogue_err) + approx_rel * pre.abs());
        (want, tol)
    }
}

pub fn activate(activation: Activation, x: f64) -> f64 {
    match activation {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Silu => x / (1.0 + (-x).exp()),
        Activation::GeluTanh => {
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }
    }
}

/// Runs `case` with input type `I` and output type `O` on the GPU with exact buffers and
/// checks D: panics on an error, an unwritten or wrong element inside the problem, or a
/// written one outside.
pub fn run_case<I: GemmInput + Element, O: GemmOutput + Element>(case: &Case) {
    if let Err(e) = try_case::<I, O>(case, &Views::default()) {
        panic!("{case:?}: gemm failed: {e}");
    }
}

/// Two values are the same (NaN counts as equal to NaN).
fn same(x: f64, y: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan())
}

/// Runs `case` on the GPU with each operand's view placed as `views` says (A, B and C views
/// hold random values beyond what the problem reads; D's buffer is poison around its view).
/// Returns the call's error after checking that D is untouched, or checks D as [`run_case`]
/// does (panicking on a wrong element) and returns `Ok`.
pub fn try_case<I: GemmInput + Element, O: GemmOutput + Element>(case: &Case, views: &Views) -> warpforge::Result<()> {
    let (device, wf) = gpu();
    try_case_on::<I, O>(wf, device.stream(), case, views)
}

/// [`try_case`] through `wf` on `stream`.
pub fn try_case_on<I: GemmInput + Element, O: GemmOutput + Element>(
    wf: &Warpforge,
    stream: &Arc<CudaStream>,
    case: &Case,
    views: &Views,
) -> warpforge::Result<()> {
    let g = Geometry::of(case);
    let [va, vb, vc, vd, vbias] = views.0;
    // Padding elements of A and B hold random values too: a kernel reading them is caught.
    let a: Vec<I> = random_f32(case.seed, va.alloc(g.need[A]), 1.0).into_iter().map(I::of).collect();
    let b: Vec<I> = random_f32(case.seed ^ 0xb, vb.alloc(g.need[B]), 1.0).into_iter().map(I::of).collect();
    let c_len = vc.alloc(g.need[C]);
    let c: Vec<O> = if case.beta != 0.0 {
        random_f32(case.seed ^ 0xc, c_len, 2.0).into_iter().map(O::of).collect()
    } else {
        vec![O::NAN; c_len] // beta = 0 must not read C at all
    };
    let bias = random_f32(case.seed ^ 0xd, vbias.alloc(case.n), 1.0);
    // D: the view, whole batches (up to 64 Ki elements past the span: a fuzzed pitch or
    // stride may be huge where it multiplies nothing) and a tail, all poison; in place, C's
    // values inside the problem.
    let whole_batches = case.batch.saturating_mul(g.stride[D]).min(g.need[D] + (1 << 16));
    let mut d0 = vec![O::NAN; vd.alloc(g.need[D]).max(vd.offset + whole_batches) + D_TAIL];
    let in_place = case.c_in_place && case.with_c && case.beta != 0.0;
    if in_place {
        for (t, v) in random_f32(case.seed ^ 0xc, case.batch * case.m * case.n, 2.0).into_iter().enumerate() {
            let (z, i, j) = (t / (case.m * case.n), t / case.n % case.m, t % case.n);
            d0[vd.offset + g.cd_at(D, z, i, j)] = O::of(v);
        }
    }
    let (da, db) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&b).unwrap());
    let (dc, dbias) = (stream.clone_htod(&c).unwrap(), stream.clone_htod(&bias).unwrap());
    let mut dd = stream.clone_htod(&d0).unwrap();
    let result = {
        let c_operand = match (case.with_c, case.c_in_place) {
            (false, _) => COperand::None,
            (true, true) => COperand::InPlace,
            (true, false) => COperand::Buffer(dc.slice(vc.range(g.need[C]))),
        };
        let epilogue = Epilogue { c: c_operand, bias: case.with_bias.then(|| dbias.slice(vbias.range(case.n))) };
        let (a_view, b_view) = (da.slice(va.range(g.need[A])), db.slice(vb.range(g.need[B])));
        let mut d_view = dd.slice_mut(vd.range(g.need[D]));
        wf.gemm::<I, O>(stream, &g.problem, &a_view, &b_view, epilogue, &mut d_view)
    };
    let got: Vec<O> = stream.clone_dtoh(&dd).unwrap();
    if let Err(e) = result {
        let changed = got.iter().zip(&d0).filter(|(x, y)| !same(x.f64(), y.f64())).count();
        assert_eq!(changed, 0, "{case:?}: refused ({e}) but {changed} elements of D changed");
        return Err(e);
    }
    let changed = got[..vd.offset].iter().filter(|v| !v.f64().is_nan()).count();
    assert_eq!(changed, 0, "{case:?}: {changed} elements before D's view were written");
    let got = &got[vd.offset..];

    let (m, n, k, batch) = (case.m, case.n, case.k, case.batch);
    let (mut unwritten, mut overwritten) = (0usize, 0usize);
    for (at, v) in got.iter().enumerate() {
        let (z, within) = (at / g.stride[D], at % g.stride[D]);
        let (i, j) = (within / g.ld[D], within % g.ld[D]);
        match (z < batch && i < m && j < n, v.f64().is_nan()) {
            (true, true) => unwritten += 1,
            (false, false) => overwritten += 1,
            _ => {}
        }
    }
    assert_eq!(unwritten, 0, "{case:?}: {unwritten} elements of D are NaN (unwritten, or C read with beta = 0)");
    assert_eq!(overwritten, 0, "{case:?}: {overwritten} elements of D outside the problem were written");

    let (a, b) = (&a[va.offset..], &b[vb.offset..]);
    let mut a_rows = vec![0.0f32; batch * m * k];
    let mut b_cols = vec![0.0f32; batch * n * k];
    for z in 0..batch {
        for p in 0..k {
            for i in 0..m {
                a_rows[(z * m + i) * k + p] = a[g.a_at(case, z, i, p)].f64() as f32;
            }
            for j in 0..n {
                b_cols[(z * n + j) * k + p] = b[g.b_at(case, z, p, j)].f64() as f32;
            }
        }
    }
    let c_values = if in_place { &d0[vd.offset..] } else { &c[vc.offset..] };
    let c = c_values.iter().map(|v| v.f64() as f32).collect();
    let bias = bias[vbias.offset..].to_vec();
    let reference = Reference { case, geometry: &g, a_rows, b_cols, c, bias, eps_out: O::EPS, abs_floor: O::ABS_FLOOR };

    // Element by element when small; otherwise the last row and column of every batch (the
    // ragged tiles) and SAMPLES random elements.
    let sampled: Option<Vec<(usize, usize, usize)>> = (batch * m * n * k > FULL_CHECK_MACS).then(|| {
        let mut points: Vec<_> = (0..batch)
            .flat_map(|z| (0..n).map(move |j| (z, m - 1, j)).chain((0..m).map(move |i| (z, i, n - 1))))
            .collect();
        let pick = |t: u64, len: usize| (mix(case.seed.wrapping_add(t)) % len as u64) as usize;
        points.extend((0..SAMPLES as u64).map(|t| (pick(3 * t, batch), pick(3 * t + 1, m), pick(3 * t + 2, n))));
        points
    });
    let count = sampled.as_ref().map_or(batch * m * n, Vec::len);
    let point = |t: usize| sampled.as_ref().map_or((t / (m * n), t / n % m, t % n), |s| s[t]);
    let (bad, first) = super::check_all(count, |t| {
        let (z, i, j) = point(t);
        let (want, tol) = reference.expect(z, i, j);
        let value = got[g.cd_at(D, z, i, j)].f64();
        ((value - want).abs() > tol || !value.is_finite())
            .then(|| format!("D[{z},{i},{j}] = {value}, want {want} ± {tol:.3e}"))
    });
    assert_eq!(bad, 0, "{case:?}: {bad} of {count} checked elements of D wrong, e.g. {first:?}");
    Ok(())
}
