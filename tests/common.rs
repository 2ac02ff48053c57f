//! Shared test helpers: the GPU handle, deterministic non-zero data, float tolerances, views
//! placed at offsets in larger buffers, a parallel checker, skips that the GPU runner reports,
//! and (in `gemm`) the GEMM suite's float64 checker.

pub mod gemm;

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use warpforge::{Device, Warpforge};

/// Device 0 and warpforge's kernels on it, opened once per test binary.
pub fn gpu() -> &'static (Device, Warpforge) {
    static GPU: OnceLock<(Device, Warpforge)> = OnceLock::new();
    GPU.get_or_init(|| {
        let device = Device::new(0).expect("GPU tests need an NVIDIA GPU and driver");
        let wf = Warpforge::new(&device).expect("warpforge kernels load on this GPU");
        (device, wf)
    })
}

/// The test-only probe module (`warpforge::ptx::CHECKS`) on device 0, loaded once per test binary.
pub fn checks() -> &'static warpforge::host::module::Module {
    static CHECKS: OnceLock<warpforge::host::module::Module> = OnceLock::new();
    CHECKS.get_or_init(|| {
        warpforge::host::module::Module::load(&gpu().0, &warpforge::ptx::CHECKS).expect("the probe module loads")
    })
}

/// [`random_f32`]'s values rounded to bf16.
pub fn random_bf16(seed: u64, n: usize, scale: f32) -> Vec<half::bf16> {
    random_f32(seed, n, scale).into_iter().map(half::bf16::from_f32).collect()
}

/// `n` values uniform in [-scale, scale] from `seed`, none of them zero (SplitMix64).
pub fn random_f32(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let unit = (z >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
            let v = (2.0 * unit - 1.0) * scale;
            if v == 0.0 { scale * 0.5 } else { v }
        })
        .collect()
}

/// Unit roundoff of f32.
pub const EPS_F32: f64 = f32::EPSILON as f64 / 2.0;
/// Unit roundoff of bf16 (8 significant bits).
pub const EPS_BF16: f64 = 1.0 / 256.0;
/// Unit roundoff of f16 (11 significant bits).
pub const EPS_F16: f64 = 1.0 / 2048.0;

/// Host-side view of the element types: conversion from the generator's f32 and to f64, and
/// the rounding bounds the tolerances are built from.
pub trait Element: Copy + Send + Sync + 'static {
    /// Unit roundoff of the type.
    const EPS: f64;
    /// Largest absolute rounding error near zero (subnormal spacing, or flush-to-zero).
    const ABS_FLOOR: f64;
    const NAN: Self;
    const ZERO: Self;
    fn of(v: f32) -> Self;
    fn f64(self) -> f64;
}

macro_rules! sixteen_bit_element {
    ($($t:ty: $eps:expr, $abs_floor:expr;)*) => {$(
        impl Element for $t {
            const EPS: f64 = $eps;
            const ABS_FLOOR: f64 = $abs_floor;
            const NAN: Self = <$t>::NAN;
            const ZERO: Self = <$t>::ZERO;
            fn of(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn f64(self) -> f64 {
                self.to_f64()
            }
        }
    )*};
}
sixteen_bit_element! {
    half::bf16: EPS_BF16, 2.0 * f32::MIN_POSITIVE as f64;
    // f16 subnormals are spaced 2^-24 apart.
    half::f16: EPS_F16, 1.0 / (1u64 << 24) as f64;
}

impl Element for f32 {
    const EPS: f64 = EPS_F32;
    const ABS_FLOOR: f64 = 2.0 * f32::MIN_POSITIVE as f64;
    const NAN: Self = f32::NAN;
    const ZERO: Self = 0.0;
    fn of(v: f32) -> Self {
        v
    }
    fn f64(self) -> f64 {
        self as f64
    }
}

/// SplitMix64 finaliser: deterministic sample positions from a seed.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where a view of `need` elements sits in a buffer: `offset` elements in (an odd offset of a
/// 16-bit buffer misaligns it for TMA and 16-byte vectors), `delta` elements longer (or,
/// negative, shorter) than needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View {
    pub offset: usize,
    pub delta: isize,
}

impl View {
    /// Length of the view of an operand that needs `need` elements.
    pub fn len(self, need: usize) -> usize {
        need.saturating_add_signed(self.delta)
    }
    /// Elements of the buffer the view lives in: the offset, then the view or the `need`
    /// elements, whichever is longer (at least one element: CUDA allocates none of zero).
    pub fn alloc(self, need: usize) -> usize {
        (self.offset + need.max(self.len(need))).max(1)
    }
    /// The view's range in its buffer.
    pub fn range(self, need: usize) -> Range<usize> {
        self.offset..self.offset + self.len(need)
    }
}

/// Runs `check(t)` for `t` in `0..count` on up to 16 cores; returns how many failed and the
/// first few messages.
pub fn check_all(count: usize, check: impl Fn(usize) -> Option<String> + Sync) -> (usize, Vec<String>) {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get()).min(16);
    let chunk = count.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let check = &check;
                scope.spawn(move || {
                    let (mut bad, mut first) = (0usize, Vec::new());
                    for t in w * chunk..((w + 1) * chunk).min(count) {
                        if let Some(message) = check(t) {
                            bad += 1;
                            if first.len() < 4 {
                                first.push(message);
                            }
                        }
                    }
                    (bad, first)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).fold((0, Vec::new()), |(bad, mut first), (b, f)| {
            first.extend(f);
            (bad + b, first)
        })
    })
}

/// Records that the running test could not do its work here and returns: prints
/// `SKIPPED: <test>: <why>` and, when `WARPFORGE_SKIPPED` names a file, appends that line to
/// it. libtest has no "skipped" outcome, so such a test still counts as passed; `.ci/gpu-run`
/// sets the variable and lists and counts these lines in its summary, so a skip is never
/// silent.
pub fn skip(why: &str) {
    let thread = std::thread::current();
    let line = format!("SKIPPED: {}: {why}", thread.name().unwrap_or("unnamed test"));
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("WARPFORGE_SKIPPED") {
        use std::io::Write;
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Err(e) = file.and_then(|mut f| writeln!(f, "{line}")) {
            eprintln!("could not record the skip: {e}");
        }
    }
}

/// The repository's source tree, where this binary was built from; `None` (after [`skip`])
/// where it is absent, as on the GPU machine, which runs a copied test binary.
pub fn source_tree() -> Option<&'static Path> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if root.join("Cargo.toml").is_file() && root.join("src").is_dir() {
        Some(root)
    } else {
        skip(&format!("needs the source tree at {}, absent here", root.display()));
        None
    }
}
