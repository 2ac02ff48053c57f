//! Helpers the side-by-side benches share: random non-zero inputs, the cuBLAS call of a linear
//! layer, event timing of a batch of calls, the SM clock, medians and geomeans, the float64
//! sampled check of a linear layer's output, and the ratio bar chart.

use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, GemmConfig};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, sys::CUevent_flags};
use half::bf16;
use warpforge::{Device, Warpforge};

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Unit roundoff of bf16 (8 significant bits).
pub const EPS_BF16: f64 = 1.0 / 256.0;
/// Unit roundoff of f32.
pub const EPS_F32: f64 = 1.0 / (1u64 << 24) as f64;
/// Absolute rounding step of bf16 near zero (subnormal spacing, doubled).
pub const ABS_FLOOR: f64 = 2.0 * f32::MIN_POSITIVE as f64;

/// Fills `out` with values uniform in (-1, 1), none of them zero (xorshift from `seed`).
pub fn fill_random_bf16(seed: u64, out: &mut [bf16]) {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for v in out {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
        let x = 2.0 * unit - 1.0;
        *v = bf16::from_f32(if x == 0.0 { 0.5 } else { x });
    }
}

/// `n` values uniform in (-1, 1), none of them zero (xorshift from `seed`).
pub fn random_bf16(seed: u64, n: usize) -> Vec<bf16> {
    let mut v = vec![bf16::ZERO; n];
    fill_random_bf16(seed, &mut v);
    v
}

/// SplitMix64 finaliser: deterministic sample positions (and shapes) from a seed.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Random positions of D a [`LinearCheck`] samples; besides, this many on the last row and on
/// the last column, and both corners.
pub const RANDOM_SAMPLES: u64 = 64;
pub const EDGE_SAMPLES: u64 = 16;
/// The f32 accumulation's rounding errors, of random sign, grow as √K·u·Σ|a·b| for any order
/// of summation (tensor-core, split-K, stream-K); this many of them is allowed. A lost K-slice
/// of 64 products errs by about √64·|a·b| ≈ 3, above the tolerance at every K benchmarked.
const ACCUMULATION_SIGMAS: f64 = 4.0;

/// The positions of an `m × n` output (of a GEMM with reduction length `k`) that the float64
/// checks sample: [`RANDOM_SAMPLES`] random ones seeded by the shape, [`EDGE_SAMPLES`] on the
/// last row and on the last column, and both corners.
pub fn sample_positions(m: usize, n: usize, k: usize) -> Vec<(usize, usize)> {
    let seed = mix((m * 31 + n) as u64 * 31 + k as u64);
    let draw = |t: u64, bound: usize| (mix(seed + t) % bound as u64) as usize;
    let mut positions: Vec<(usize, usize)> =
        (0..RANDOM_SAMPLES).map(|t| (draw(2 * t, m), draw(2 * t + 1, n))).collect();
    positions.extend((0..EDGE_SAMPLES).map(|t| (m - 1, draw(1000 + t, n))));
    positions.extend((0..EDGE_SAMPLES).map(|t| (draw(2000 + t, m), n - 1)));
    positions.extend([(0, 0), (m - 1, n - 1)]);
    positions
}

/// `len` values uniform in (-1, 1), none of them zero, generated on every core: one xorshift
/// stream per [`POOL_CHUNK`] values, so the values do not depend on the core count.
pub fn random_pool_bf16(len: usize) -> Vec<bf16> {
    let mut host = vec![bf16::ZERO; len];
    let mut chunks: Vec<(usize, &mut [bf16])> = host.chunks_mut(POOL_CHUNK).enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per_thread = chunks.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for group in chunks.chunks_mut(per_thread) {
            scope.spawn(move || group.iter_mut().for_each(|(i, part)| fill_random_bf16(*i as u64 + 1, part)));
        }
    });
    host
}

/// Values per generator stream of [`random_pool_bf16`].
pub const POOL_CHUNK: usize = 1 << 24;

/// The float64 check of a linear layer's bf16 output `D (m × n) = X (m × k) · W (n × k)ᵀ` at
/// sampled positions (random ones seeded by the shape, the last row and column, both corners).
/// The tolerance per position: one bf16 rounding of the output (2·u_bf16·|ref|, u = 2^-8 as
/// the tests count it), the f32 accumulation ([`ACCUMULATION_SIGMAS`]·√K·u_f32·Σ|x·w|), and
/// bf16's absolute floor.
pub struct LinearCheck {
    /// (row, column, float64 reference, tolerance) per sampled position.
    samples: Vec<(usize, usize, f64, f64)>,
    n: usize,
}

impl LinearCheck {
    /// The references at the sampled positions, from the host copies of X and W.
    pub fn new(x: &[bf16], w: &[bf16], m: usize, n: usize, k: usize) -> Self {
        let samples = sample_positions(m, n, k)
            .into_iter()
            .map(|(i, j)| {
                let (mut dot, mut magnitude) = (0.0f64, 0.0f64);
                for (a, b) in x[i * k..][..k].iter().zip(&w[j * k..][..k]) {
                    let p = a.to_f64() * b.to_f64();
                    dot += p;
                    magnitude += p.abs();
                }
                let tolerance = 2.0 * EPS_BF16 * dot.abs()
                    + ACCUMULATION_SIGMAS * (k as f64).sqrt() * EPS_F32 * magnitude
                    + ABS_FLOOR;
                (i, j, dot, tolerance)
            })
            .collect();
        Self { samples, n }
    }

    /// The worst |error| ÷ tolerance of `d` over the samples (≤ 1 passes).
    pub fn worst(&self, stream: &Arc<CudaStream>, d: &CudaSlice<bf16>) -> Result<f64> {
        let mut worst = 0.0f64;
        for &(i, j, reference, tolerance) in &self.samples {
            let at = i * self.n + j;
            let got = stream.clone_dtoh(&d.slice(at..at + 1))?[0].to_f64();
            worst = worst.max((got - reference).abs() / tolerance);
        }
        Ok(worst)
    }
}

/// cuBLAS's arguments for the linear layer `D (m × n) = X (m × k) · W (n × k)ᵀ`, all row-major
/// and packed: in cuBLAS's column-major terms `Dᵀ (n × m) = W · Xᵀ`, W read transposed, so
/// `blas.gemm(config, &w, &x, &mut d)` reads both operands in place.
pub fn linear_layer_config(m: usize, n: usize, k: usize) -> GemmConfig<bf16> {
    GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: bf16::ONE,
        lda: k as i32,
        ldb: k as i32,
        beta: bf16::ZERO,
        ldc: n as i32,
    }
}

/// A pair of CUDA events that time batches of calls on one stream.
pub struct BatchTimer {
    begin: CudaEvent,
    end: CudaEvent,
}

impl BatchTimer {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<BatchTimer> {
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        Ok(BatchTimer { begin: event()?, end: event()? })
    }

    /// Issues `call(0..reps)` between the two events and waits; returns the GPU seconds and the
    /// host seconds to issue, both per call. When the issue time reaches the GPU time the stream
    /// starves, and the GPU time measures the host.
    pub fn per_call(
        &self,
        stream: &CudaStream,
        reps: usize,
        mut call: impl FnMut(usize) -> Result<()>,
    ) -> Result<(f64, f64)> {
        self.begin.record(stream)?;
        let issue = Instant::now();
        for r in 0..reps {
            call(r)?;
        }
        let issue_s = issue.elapsed().as_secs_f64();
        self.end.record(stream)?;
        self.end.synchronize()?;
        let gpu_s = self.begin.elapsed_ms(&self.end)? as f64 / 1e3;
        Ok((gpu_s / reps as f64, issue_s / reps as f64))
    }
}

/// What every side-by-side bench opens: device 0, warpforge's kernels on it, the stream both
/// libraries run on, cuBLAS on that stream, and a batch timer.
pub struct Bench {
    pub device: Device,
    pub wf: Warpforge,
    pub stream: Arc<CudaStream>,
    pub blas: CudaBlas,
    pub timer: BatchTimer,
}

impl Bench {
    /// Opens it, or returns `None` after saying so where there is no GPU: the bench `name` then
    /// measures nothing and succeeds.
    pub fn open(name: &str) -> Result<Option<Bench>> {
        let device = match Device::new(0) {
            Ok(device) => device,
            Err(e) => {
                println!("{name} bench: no GPU ({e}); nothing to measure");
                return Ok(None);
            }
        };
        let wf = Warpforge::new(&device)?;
        let stream = device.stream().clone();
        let blas = CudaBlas::new(stream.clone())?;
        let timer = BatchTimer::new(device.context())?;
        Ok(Some(Bench { device, wf, stream, blas, timer }))
    }
}

/// The SM clock nvidia-smi reports now, MHz ("?" without nvidia-smi).
pub fn sm_clock_mhz() -> String {
    std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=clocks.sm", "--format=csv,noheader,nounits"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The geometric mean of `ratios` (NaN when empty).
pub fn geomean(ratios: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, count) = ratios.into_iter().fold((0.0, 0usize), |(s, c), r| (s + r.ln(), c + 1));
    if count == 0 { f64::NAN } else { (sum / count as f64).exp() }
}

/// One bar of [`ratio_svg`]: a ratio, its label, and the section it is drawn in.
pub struct Bar {
    pub label: String,
    pub ratio: f64,
    pub section: String,
}

/// A bar chart of ratios (1.0 line dashed; green at or above it), one bar per entry, `pitch`
/// pixels apart. Where `section` changes a separator and the section's name are drawn. Below
/// 16 pixels a pitch has no room for labels: each bar carries its label and ratio as a tooltip.
pub fn ratio_svg(title: &str, bars: &[Bar], pitch: f64) -> String {
    let (w, h, pad) = (pitch * bars.len() as f64 + 80.0, 360.0, 60.0);
    let max = bars.iter().map(|b| b.ratio).fold(1.2f64, f64::max);
    let y = |v: f64| h - pad - v / max * (h - 2.0 * pad);
    let labelled = pitch >= 16.0;
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='9'>\n"
    );
    s.push_str(&format!("<text x='10' y='20' font-size='13'>{title}</text>\n"));
    for (i, bar) in bars.iter().enumerate() {
        let (label, ratio) = (&bar.label, bar.ratio);
        let x = 60.0 + pitch * i as f64;
        if !bar.section.is_empty() && (i == 0 || bars[i - 1].section != bar.section) {
            s.push_str(&format!(
                "<line x1='{0:.1}' x2='{0:.1}' y1='30' y2='{1:.1}' stroke='#888'/>\n",
                x - 2.0,
                h - pad
            ));
            s.push_str(&format!("<text x='{x:.1}' y='40' font-size='11'>{}</text>\n", bar.section));
        }
        let color = if ratio >= 1.0 { "#2a7" } else { "#c64" };
        s.push_str(&format!(
            "<rect x='{x:.1}' y='{:.1}' width='{:.1}' height='{:.1}' fill='{color}'><title>{label}: {ratio:.3}</title></rect>\n",
            y(ratio),
            (pitch * 0.75).max(1.0),
            y(0.0) - y(ratio)
        ));
        if labelled {
            s.push_str(&format!(
                "<text transform='translate({:.1},{:.1}) rotate(60)'>{label}</text>\n",
                x + 4.0,
                h - pad + 8.0
            ));
            s.push_str(&format!("<text x='{x:.1}' y='{:.1}'>{ratio:.2}</text>\n", y(ratio) - 3.0));
        }
    }
    s.push_str(&format!(
        "<line x1='50' x2='{w}' y1='{0:.1}' y2='{0:.1}' stroke='#000' stroke-dasharray='4'/>\n",
        y(1.0)
    ));
    s.push_str("</svg>\n");
    s
}
