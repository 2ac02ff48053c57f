//! The host-API fuzzer: arbitrary arguments for every public entry point on the GPU, each call
//! judged against an oracle written here, independently of the library. A call the oracle
//! finds invalid must return a typed `Error::InvalidArgument` and leave its output untouched;
//! any other call must return `Ok` with a result that matches a float64 CPU reference
//! (`common/gemm.rs` for GEMMs, the SwiGLU suite's references for `swiglu` and `silu_mul`).
//! Never a panic, an untyped error, a GPU fault or a hang.
//!
//! What is generated: every `GemmProblem` field (shapes from 1 to ~300 with K to ~600, and
//! extremes up to `usize::MAX`; leading dimensions packed, padded, one too small or huge; batch
//! strides packed, gapped, overlapping, exactly one span for D, or huge; alpha and beta
//! including 0, NaN and ±inf; every layout, activation and forced kernel variant), C absent, a
//! buffer or in place, the bias, and each buffer as a view at an offset (odd offsets misalign
//! 16-bit data for TMA and 16-byte vectors: the call must repack or fall back, and still be
//! right) that is too short, exact or longer.
//!
//! Decisions the oracle encodes:
//! - A NaN or infinite `alpha` or `beta` is refused (`GemmProblem::check`): a GEMM with a NaN
//!   scale has no useful result, and refusing is cheaper to promise than matching the NaN
//!   propagation of every kernel path. `saxpy`'s `a` is not checked: NaN and ±inf propagate as
//!   IEEE arithmetic does, and the reference does the same.
//! - D's batches must not overlap (for `batch > 1`, D's batch stride is at least the span of
//!   one batch, `(m − 1)·ldd + n`): overlapping batches race, so no result is correct. A, B
//!   and C are only read: overlapping batches there are legal and must be computed exactly.
//!
//! The cases come from proptest strategies drawn by a seeded runner rather than `proptest!`:
//! one failure must not hide the others (a property stops and shrinks at the first), so every
//! case runs, each outcome is tallied by class, and the test fails at the end listing the
//! failures. `WARPFORGE_FUZZ_SEED` changes the seed, `WARPFORGE_FUZZ_SCALE` multiplies the
//! case counts. A buffer of another CUDA context is not fuzzed here (`gpu_reliability` covers it).

mod kernels;
mod quant;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use half::{bf16, f16};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use warpforge::gemm::{GemmInput, GemmOutput, MAX_PITCH};
use warpforge::{Activation, COperand, Clusters, Consumers, Epilogue, Error, GemmProblem, Layout, TileWidth};

use crate::common::gemm::{A, B, C, Case, D, Geometry, Views, try_case};
use crate::common::{Element, View, gpu};

/// GEMM cases (about 5 ms each on an H200, most of it the float64 reference).
const GEMM_CASES: usize = 400;
/// Largest span of any operand (elements) that the fuzzer allocates for a valid problem;
/// a valid problem beyond it is called with small buffers and must be refused.
const MAX_ALLOC: u128 = 1 << 22;
/// Elements of each buffer handed to a call the oracle refuses before looking at buffers.
const SMALL_BUFFER: usize = 64;

/// Values that break unchecked size arithmetic.
pub(crate) const EXTREMES: [usize; 8] =
    [0, (1 << 31) - 1, 1 << 31, (1 << 32) + 1, 1 << 48, (1 << 48) + 1, usize::MAX / 2 + 1, usize::MAX];

/// The outcome of one call.
pub(crate) enum Outcome {
    /// `Ok`, and the result matched the reference.
    Verified,
    /// A typed or untyped error from the library.
    Refused(Error),
    /// A check failed (wrong result, output written by a refused call) or the library panicked.
    Panicked(String),
}

/// Runs one call and its check, catching a panic of either.
pub(crate) fn outcome(call: impl FnOnce() -> warpforge::Result<()>) -> Outcome {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => Outcome::Verified,
        Ok(Err(e)) => Outcome::Refused(e),
        Err(panic) => Outcome::Panicked(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

/// The class of a refusal, from the library's message (for the tally only).
fn class(message: &str) -> &'static str {
    const CLASSES: [(&str, &str); 12] = [
        ("holds", "buffer too short"),
        ("equal lengths", "length mismatch"),
        ("needs C", "beta without C"),
        ("in place", "in-place C is not D"),
        ("finite", "alpha/beta not finite"),
        ("empty problem", "empty problem"),
        ("≥ 1", "empty problem"),
        ("overflow", "size overflows usize"),
        ("overlap", "D batches overlap"),
        ("< 2^", "size limit"),
        ("at most", "pitch or tile limit"),
        ("ld", "leading dimension too small"),
    ];
    let variant = ["exist for", "run cooperative", "without clusters"].iter().any(|w| message.contains(w));
    if variant {
        return "kernel variant unavailable";
    }
    CLASSES.iter().find(|(word, _)| message.contains(word)).map_or("other", |(_, class)| class)
}

/// Outcomes of one entry point's cases, by class.
pub(crate) struct Tally {
    entry: &'static str,
    cases: usize,
    verified: usize,
    refused: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
    /// A driver error: the context may be broken, so the remaining cases are not run.
    pub(crate) faulted: bool,
}

impl Tally {
    pub(crate) fn new(entry: &'static str) -> Tally {
        Tally { entry, cases: 0, verified: 0, refused: BTreeMap::new(), failures: Vec::new(), faulted: false }
    }

    /// Records one call: `invalid` is the oracle's reason to refuse it (`None`: it is valid).
    pub(crate) fn record(&mut self, what: &dyn std::fmt::Debug, invalid: Option<&str>, outcome: Outcome) {
        self.cases += 1;
        let failure = match (invalid, outcome) {
            (None, Outcome::Verified) => {
                self.verified += 1;
                return;
            }
            (Some(_), Outcome::Refused(Error::InvalidArgument(m))) => {
                *self.refused.entry(class(&m)).or_default() += 1;
                return;
            }
            (None, Outcome::Refused(Error::InvalidArgument(m))) => format!("refused a valid call ({m})"),
            (Some(why), Outcome::Verified) => format!("accepted an invalid call ({why})"),
            (Some(why), Outcome::Panicked(m)) => format!("accepted an invalid call ({why}); {m}"),
            (None, Outcome::Panicked(m)) => m,
            (_, Outcome::Refused(e)) => {
                self.faulted |= matches!(e, Error::Driver { .. });
                format!("untyped error: {e}")
            }
        };
        self.failures.push(format!("{failure}\n    in {what:?}"));
    }

    /// Prints the tally and fails the test if any call failed.
    pub(crate) fn finish(self) {
        Tally::finish_all([self]);
    }

    /// Prints every tally, then fails the test if any call of any failed.
    pub(crate) fn finish_all<const N: usize>(tallies: [Tally; N]) {
        let failed: Vec<String> = tallies.iter().filter_map(Tally::report).collect();
        assert!(failed.is_empty(), "{}", failed.join("; "));
    }

    /// Prints the tally; what failed, if anything.
    fn report(&self) -> Option<String> {
        let refused: usize = self.refused.values().sum();
        println!(
            "{}: {} cases, {} ok (verified), {} refused (typed), {} failed",
            self.entry,
            self.cases,
            self.verified,
            refused,
            self.failures.len()
        );
        for (class, count) in &self.refused {
            println!("    refused, {class}: {count}");
        }
        for failure in self.failures.iter().take(20) {
            println!("  FAILED: {failure}");
        }
        if self.faulted {
            return Some(format!("{}: a driver error; the cases after it were not run", self.entry));
        }
        (!self.failures.is_empty())
            .then(|| format!("{}: {} of {} calls failed", self.entry, self.failures.len(), self.cases))
    }
}

/// `count` values of `strategy` from a runner seeded by `salt` and `WARPFORGE_FUZZ_SEED`, the
/// count scaled by `WARPFORGE_FUZZ_SCALE`.
pub(crate) fn draw<S: Strategy>(strategy: S, count: usize, salt: u64) -> Vec<S::Value> {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("WARPFORGE_FUZZ_SEED").unwrap_or(0x5eed) ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let count = count * env("WARPFORGE_FUZZ_SCALE").unwrap_or(1).max(1) as usize;
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&crate::common::mix(seed.wrapping_add(i as u64)).to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    (0..count).map(|_| strategy.new_tree(&mut runner).expect("the strategy draws").current()).collect()
}

/// A view: mostly exact; else at an odd or a 16-byte offset, one short, short by many, or
/// longer than needed.
pub(crate) fn view() -> impl Strategy<Value = View> {
    let at = |offset: usize, delta: isize| View { offset, delta };
    prop_oneof![
        8 => Just(View::default()),
        2 => prop::sample::select(vec![1usize, 3, 5, 7]).prop_map(move |o| at(o, 0)),
        1 => Just(at(8, 0)),
        1 => Just(at(0, -1)),
        1 => (1isize..1000).prop_map(move |d| at(1, -d)),
        1 => (1isize..100).prop_map(move |d| at(0, d)),
    ]
}

/// A size: 1, sizes around the tiles, anything up to `max`, or an extreme.
pub(crate) fn size(max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(1usize),
        2 => prop::sample::select(vec![2usize, 3, 7, 8, 9, 16, 63, 64, 65, 127, 128, 129, 255, 256, 257]),
        5 => 1usize..=max,
        1 => prop::sample::select(EXTREMES.to_vec()),
    ]
}

/// A leading dimension relative to the rows it holds (`inner` elements).
#[derive(Clone, Copy, Debug)]
enum Ld {
    Packed,
    Extra(usize),
    OneShort,
    Abs(usize),
}

impl Ld {
    fn arg(self, inner: usize) -> usize {
        match self {
            Ld::Packed => 0,
            Ld::Extra(e) => inner.saturating_add(e),
            Ld::OneShort => inner - 1,
            Ld::Abs(v) => v,
        }
    }
}

/// A batch stride relative to the operand's packed stride and span of one batch.
#[derive(Clone, Copy, Debug)]
enum Stride {
    Packed,
    Gap(usize),
    /// A percentage of the packed stride (at least 1 element): batches overlap.
    Overlap(u8),
    /// Exactly one batch's span: no padding after the last row, no overlap.
    Span,
    Abs(usize),
}

impl Stride {
    fn arg(self, packed: usize, span: usize) -> usize {
        match self {
            Stride::Packed => 0,
            Stride::Gap(g) => packed.saturating_add(g),
            Stride::Overlap(percent) => (packed / 100).saturating_mul(percent as usize).max(1),
            Stride::Span => span,
            Stride::Abs(v) => v,
        }
    }
}

/// One generated GEMM call.
#[derive(Clone, Debug)]
struct GemmFuzz {
    dims: [usize; 4],
    layouts: (Layout, Layout),
    ld: [Ld; 4],
    strides: [Stride; 4],
    alpha: f32,
    beta: f32,
    /// 0: no C, 1: a buffer, 2: in place.
    c_mode: u8,
    bias: bool,
    activation: Activation,
    variant: (Consumers, TileWidth, Clusters),
    types: usize,
    views: [View; 5],
    seed: u64,
}

fn scale() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => Just(1.0f32),
        4 => -2.0f32..2.0,
        2 => Just(0.0f32),
        1 => prop::sample::select(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
    ]
}

fn gemm_fuzz() -> impl Strategy<Value = GemmFuzz> {
    let ld = prop_oneof![
        6 => Just(Ld::Packed),
        2 => (1usize..8).prop_map(Ld::Extra),
        1 => prop::sample::select(vec![8usize, 64]).prop_map(Ld::Extra),
        1 => Just(Ld::OneShort),
        1 => prop::sample::select(EXTREMES.to_vec()).prop_map(Ld::Abs),
    ];
    let stride = prop_oneof![
        6 => Just(Stride::Packed),
        2 => (0usize..40).prop_map(Stride::Gap),
        1 => (1u8..100).prop_map(Stride::Overlap),
        1 => Just(Stride::Span),
        1 => prop::sample::select(EXTREMES.to_vec()).prop_map(Stride::Abs),
    ];
    let batch =
        prop_oneof![8 => 1usize..=3, 1 => prop::sample::select(vec![0usize, (1 << 16) - 1, 1 << 16, usize::MAX])];
    let layout = || prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)];
    let activation =
        prop::sample::select(vec![Activation::None, Activation::Relu, Activation::Silu, Activation::GeluTanh]);
    let consumers = prop::sample::select(vec![Consumers::Cooperative, Consumers::PingPong]);
    let tile_width = prop::sample::select(vec![TileWidth::Wide, TileWidth::Narrow]);
    let clusters = prop::sample::select(vec![Clusters::Off, Clusters::Pairs]);
    let variant = prop_oneof![
        6 => Just((Consumers::Auto, TileWidth::Auto, Clusters::Auto)),
        1 => (consumers, tile_width, clusters),
    ];
    let dims = (size(300), size(300), size(600), batch).prop_map(|(m, n, k, batch)| [m, n, k, batch]);
    let shape = (dims, (layout(), layout()), [ld.clone(), ld.clone(), ld.clone(), ld]);
    let epilogue = (scale(), scale(), 0u8..3, any::<bool>(), activation, variant);
    let buffers = (
        [stride.clone(), stride.clone(), stride.clone(), stride],
        0usize..6,
        [view(), view(), view(), view(), view()],
        any::<u64>(),
    );
    (shape, epilogue, buffers).prop_map(
        |((dims, layouts, ld), (alpha, beta, c_mode, bias, activation, variant), (strides, types, views, seed))| {
            GemmFuzz { dims, layouts, ld, strides, alpha, beta, c_mode, bias, activation, variant, types, views, seed }
        },
    )
}

/// The generated call's `GemmProblem`, its fields as generated (nothing clamped).
fn gemm_problem(f: &GemmFuzz) -> GemmProblem {
    let [m, n, k, batch] = f.dims;
    let mut p = GemmProblem::new(m, n, k);
    (p.batch, p.a_layout, p.b_layout) = (batch, f.layouts.0, f.layouts.1);
    (p.alpha, p.beta, p.activation) = (f.alpha, f.beta, f.activation);
    (p.consumers, p.tile_width, p.clusters) = f.variant;
    let [(a_inner, a_lines), (b_inner, b_lines), cd] = operand_shapes(&p);
    let shapes = [(a_inner, a_lines), (b_inner, b_lines), cd, cd];
    let mut ld = [0; 4];
    for (x, &(inner, lines)) in shapes.iter().enumerate() {
        ld[x] = f.ld[x].arg(inner.max(1));
        let used = if ld[x] == 0 { inner } else { ld[x] };
        let span = lines.saturating_sub(1).saturating_mul(used).saturating_add(inner);
        p.batch_strides[x] = f.strides[x].arg(used.saturating_mul(lines), span);
    }
    [p.lda, p.ldb, p.ldc, p.ldd] = ld;
    p
}

/// (contiguous extent, lines) per batch of A, B and C/D.
fn operand_shapes(p: &GemmProblem) -> [(usize, usize); 3] {
    let a = if p.a_layout == Layout::RowMajor { (p.k, p.m) } else { (p.m, p.k) };
    let b = if p.b_layout == Layout::RowMajor { (p.n, p.k) } else { (p.k, p.n) };
    [a, b, (p.n, p.m)]
}

/// The oracle on the problem alone, in u128 arithmetic: why it must be refused, or each
/// operand's (leading dimension, batch stride, span) as used.
fn problem_oracle(p: &GemmProblem) -> Result<[(u128, u128, u128); 4], &'static str> {
    let (m, n, k, batch) = (p.m as u128, p.n as u128, p.k as u128, p.batch as u128);
    if m == 0 || n == 0 || k == 0 || batch == 0 {
        return Err("empty problem");
    }
    if m >= 1 << 31 || n >= 1 << 31 || k >= 1 << 31 || batch >= 1 << 16 {
        return Err("size limit");
    }
    if !(p.alpha.is_finite() && p.beta.is_finite()) {
        return Err("alpha/beta not finite");
    }
    let [a, b, cd] = operand_shapes(p);
    let args = [(p.lda, a), (p.ldb, b), (p.ldc, cd), (p.ldd, cd)];
    let mut used = [(0, 0, 0); 4];
    for (x, &(ld, (inner, lines))) in args.iter().enumerate() {
        let (inner, lines) = (inner as u128, lines as u128);
        let ld = if ld == 0 { inner } else { ld as u128 };
        if ld < inner {
            return Err("leading dimension too small");
        }
        let packed = ld * lines;
        if packed > usize::MAX as u128 {
            return Err("packed stride overflows usize");
        }
        let stride = if p.batch_strides[x] == 0 { packed } else { p.batch_strides[x] as u128 };
        if ld > MAX_PITCH as u128 || stride > MAX_PITCH as u128 {
            return Err("pitch above 2^48");
        }
        let span = (batch - 1) * stride + (lines - 1) * ld + inner;
        if span > usize::MAX as u128 {
            return Err("span overflows usize");
        }
        used[x] = (ld, stride, span);
    }
    let (ldd, stride_d, _) = used[D];
    if batch > 1 && stride_d < (m - 1) * ldd + n {
        return Err("D batches overlap");
    }
    Ok(used)
}

/// Whether the variant forced in `p` has no kernel for these types or combines variants that
/// no kernel does.
fn variant_refused(p: &GemmProblem, same_16bit: bool) -> bool {
    let (narrow, pingpong, pairs) =
        (p.tile_width == TileWidth::Narrow, p.consumers == Consumers::PingPong, p.clusters == Clusters::Pairs);
    ((narrow || pingpong || pairs) && !same_16bit) || (narrow && (pingpong || pairs)) || (pingpong && pairs)
}

/// The `Case` of a problem the oracle accepts (its leading dimensions as pads, its strides as
/// gaps over the packed ones).
fn case_of(f: &GemmFuzz, p: &GemmProblem, used: &[(u128, u128, u128); 4]) -> Case {
    let [a, b, cd] = operand_shapes(p);
    let shapes = [a, b, cd, cd];
    let mut case = Case::plain(p.m, p.n, p.k, p.batch);
    for x in [A, B, C, D] {
        let (ld, stride, _) = used[x];
        case.pads[x] = ld as usize - shapes[x].0;
        let packed = ld as usize * shapes[x].1;
        case.gaps[x] = (p.batch_strides[x] != 0).then(|| stride as isize - packed as isize);
    }
    (case.a_layout, case.b_layout) = (p.a_layout, p.b_layout);
    (case.alpha, case.beta, case.activation) = (p.alpha, p.beta, p.activation);
    (case.consumers, case.tile_width, case.clusters) = (p.consumers, p.tile_width, p.clusters);
    (case.with_c, case.c_in_place, case.with_bias, case.seed) = (f.c_mode > 0, f.c_mode == 2, f.bias, f.seed);
    case
}

/// The oracle on the call: the problem's reason, or the buffers' and epilogue's.
fn call_oracle(case: &Case, views: &Views, same_16bit: bool) -> Option<&'static str> {
    let g = Geometry::of(case);
    let [va, vb, vc, vd, vbias] = views.0;
    let short = |v: View, need: usize| v.len(need) < need;
    let c_buffer = case.with_c && !case.c_in_place;
    if short(va, g.need[A]) || short(vb, g.need[B]) || short(vd, g.need[D]) || (c_buffer && short(vc, g.need[C])) {
        return Some("buffer too short");
    }
    if case.with_bias && short(vbias, case.n) {
        return Some("bias too short");
    }
    if case.beta != 0.0 && !case.with_c {
        return Some("beta without C");
    }
    let p = &g.problem;
    let c_is_not_d = (p.ldc != 0 && p.ldc != g.ld[D]) || (p.batch_strides[C] != 0 && p.batch_strides[C] != g.stride[D]);
    if case.with_c && case.c_in_place && c_is_not_d {
        return Some("in-place C is not D");
    }
    variant_refused(p, same_16bit).then_some("kernel variant unavailable")
}

/// Calls `gemm` on small buffers, for a problem the oracle refuses or that needs more memory
/// than the fuzzer allocates: it must be refused, D untouched.
fn small_buffers<I: GemmInput + Element, O: GemmOutput + Element>(
    p: &GemmProblem,
    f: &GemmFuzz,
) -> warpforge::Result<()> {
    let stream = gpu().0.stream();
    let a = stream.clone_htod(&vec![I::of(1.0); SMALL_BUFFER]).unwrap();
    let c = stream.clone_htod(&vec![O::of(1.0); SMALL_BUFFER]).unwrap();
    let bias = stream.clone_htod(&vec![1.0f32; SMALL_BUFFER]).unwrap();
    let mut d = stream.clone_htod(&vec![O::NAN; SMALL_BUFFER]).unwrap();
    let c = match f.c_mode {
        0 => COperand::None,
        1 => COperand::Buffer(c.as_view()),
        _ => COperand::InPlace,
    };
    let epilogue = Epilogue { c, bias: f.bias.then(|| bias.as_view()) };
    let result = gpu().1.gemm::<I, O>(stream, p, &a, &a, epilogue, &mut d);
    let written = stream.clone_dtoh(&d).unwrap().iter().filter(|v| !v.f64().is_nan()).count();
    assert_eq!(written, 0, "{p:?}: {written} elements of D written ({result:?})");
    result
}

/// One generated call with input `I` and output `O`: `gemm_plan` (must not panic, and must
/// refuse what the oracle refuses on the problem), then `gemm`.
fn fuzz_gemm_one<I: GemmInput + Element, O: GemmOutput + Element>(f: &GemmFuzz, plan: &mut Tally, call: &mut Tally) {
    let p = gemm_problem(f);
    let same_16bit = I::NAME == O::NAME;
    let oracle = problem_oracle(&p);
    let plan_invalid = oracle.as_ref().err().copied().or(variant_refused(&p, same_16bit).then_some("variant"));
    // A valid problem's plan may still be refused (more than 2^32 tiles); an invalid one's must be.
    let result = outcome(|| gpu().1.gemm_plan::<I, O>(&p).map(drop));
    let plan_refusable = match (&result, plan_invalid) {
        (Outcome::Refused(Error::InvalidArgument(_)), None) => Some("beyond a kernel limit"),
        (_, invalid) => invalid,
    };
    plan.record(&p, plan_refusable, result);
    // What the fuzzer allocates and the float64 reference computes stays small.
    let (m, n, k, batch) = (p.m as u128, p.n as u128, p.k as u128, p.batch as u128);
    let small = |used: &[(u128, u128, u128); 4]| {
        used.iter().all(|&(_, _, span)| span <= MAX_ALLOC) && batch * (m + n) * k <= 1 << 24 && batch * m * n <= 1 << 22
    };
    match oracle {
        Ok(used) if small(&used) => {
            let case = case_of(f, &p, &used);
            let views = Views(f.views);
            let invalid = call_oracle(&case, &views, same_16bit);
            call.record(&case, invalid, outcome(|| try_case::<I, O>(&case, &views)));
        }
        Ok(_) => {
            call.record(&p, Some("buffers too short for a large problem"), outcome(|| small_buffers::<I, O>(&p, f)))
        }
        Err(why) => call.record(&p, Some(why), outcome(|| small_buffers::<I, O>(&p, f))),
    }
}

/// Every field of `GemmProblem`, every epilogue operand and every buffer placement, over the
/// six type pairs: each call refused with a typed error or verified against float64.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_fuzz_gemm_returns_a_typed_error_or_a_verified_result() {
    let (mut plan, mut call) = (Tally::new("gemm_plan"), Tally::new("gemm"));
    for f in draw(gemm_fuzz(), GEMM_CASES, 1) {
        if call.faulted {
            break;
        }
        match f.types {
            0 => fuzz_gemm_one::<bf16, bf16>(&f, &mut plan, &mut call),
            1 => fuzz_gemm_one::<bf16, f16>(&f, &mut plan, &mut call),
            2 => fuzz_gemm_one::<bf16, f32>(&f, &mut plan, &mut call),
            3 => fuzz_gemm_one::<f16, bf16>(&f, &mut plan, &mut call),
            4 => fuzz_gemm_one::<f16, f16>(&f, &mut plan, &mut call),
            _ => fuzz_gemm_one::<f16, f32>(&f, &mut plan, &mut call),
        }
    }
    Tally::finish_all([plan, call]);
}
