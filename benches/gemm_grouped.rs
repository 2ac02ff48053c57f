//! warpforge's grouped MoE GEMMs against the per-expert loop a service would otherwise run, side
//! by side in one process on the same inputs.
//!
//! Shapes: DeepSeek-V3's expert projections (N, K) = (4096, 7168) and (7168, 2048) under the
//! grouped layouts DeepGEMM publishes: contiguous (prefill; 4 or 8 experts of about 8192 / 4096
//! tokens) and masked (decode; 1 to 32 experts of about 1024 down to 32 tokens, capacity 1.5×
//! the expected count, rounded up to a 128-row tile), and masked decode steps whose capacity is
//! rounded to 16 rows only (`masked_decode`: 32 experts of about 8 or 32 tokens, 8 of about 40:
//! capacities 16, 48, 64). Each expert's count is drawn around the expected one (0.7–1.3×), one
//! expert in eight gets none.
//! - **bf16**: `grouped_gemm_{contiguous,masked}` against a loop of cuBLAS GEMMs (one per
//!   expert with rows, on its rows only: `cublasGemmEx` through cudarc) and, masked, cuBLAS's
//!   strided-batched GEMM over the whole capacity (what a CUDA-graph decode step would run).
//! - **FP8** (e4m3, 1 × 128 / 128 × 128 scales, bf16 D): `fp8_grouped_gemm_*` against a loop of
//!   warpforge's dense `fp8_gemm`, one per expert (cuBLASLt's blockwise mode needs M % 4 == 0
//!   scale pitches per expert; `gemm_fp8` compares the dense kernel with it).
//!
//! Per shape: a warm-up, batches of ~1 ms, then 7 rounds of one batch per side with CUDA events,
//! the order of the sides rotating every round; the median batch per side is reported. After the
//! timed rounds every side runs again from a zeroed D and is checked at sampled rows of every
//! expert (first, last, random) and columns against float64, with the tests' tolerances; a
//! side above 1 fails the bench. TFLOP/s counts the valid rows only (`2 · Σ count · N · K`).
//!
//! Run: `.gpu/bench gemm_grouped [quick] [filter=<text>]`. Writes `gemm_grouped.csv` to `$OUT`.

use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::{Gemm, StridedBatchedConfig};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use warpforge::logic::quant::{Minifloat, block_scale_index, group_scale_index, group_scale_pitch};
use warpforge::{ContiguousRows, Fp8GemmProblem, GroupedContiguousProblem, GroupedMaskedProblem, Warpforge};

use crate::common::{
    ABS_FLOOR, Bench, EPS_BF16, EPS_F32, Result, geomean, linear_layer_config, median, mix, random_bf16, sm_clock_mhz,
};

const ROUNDS: usize = 7;
const WARMUP_SECONDS: f64 = 0.05;
const BATCH_SECONDS: f64 = 1e-3;
const TILE_ROWS: usize = 128;
/// `tests/gpu_fp8_gemm.rs`: the tensor cores' in-block accumulation error, summed over blocks.
const BLOCK_SUM_ERR: f64 = 128.0 / 8192.0;
/// The expert projections (N, K).
const PROJECTIONS: [(usize, usize); 2] = [(4096, 7168), (7168, 2048)];
/// Contiguous (experts, expected tokens per expert), masked (experts, expected tokens).
const CONTIGUOUS: [(usize, usize); 2] = [(4, 8192), (8, 4096)];
const MASKED: [(usize, usize); 5] = [(1, 1024), (2, 512), (4, 256), (16, 128), (32, 32)];
/// Masked decode steps whose capacity is rounded to [`DECODE_ALIGN`] rows, not a whole tile:
/// (experts, expected tokens), capacities 16, 48 and 64.
const MASKED_DECODE: [(usize, usize); 3] = [(32, 8), (32, 32), (8, 40)];
const DECODE_ALIGN: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Contiguous,
    Masked,
}

struct Shape {
    layout: Layout,
    /// Masked: the capacity is 1.5 × `expected` rounded up to this many rows.
    capacity_align: usize,
    fp8: bool,
    experts: usize,
    expected: usize,
    n: usize,
    k: usize,
}

impl Shape {
    fn label(&self) -> String {
        let layout = match (self.layout, self.capacity_align) {
            (Layout::Contiguous, _) => "contig",
            (Layout::Masked, TILE_ROWS) => "masked",
            (Layout::Masked, _) => "masked_decode",
        };
        let ty = if self.fp8 { "fp8" } else { "bf16" };
        format!("{ty}-{layout}-{}x{}-{}x{}", self.experts, self.expected, self.n, self.k)
    }

    /// Rows per expert: around the expected count, one expert in eight without any.
    fn counts(&self) -> Vec<usize> {
        (0..self.experts)
            .map(|e| {
                let u = mix(self.expected as u64 * 131 + e as u64 + self.n as u64) % 1000;
                if self.experts > 1 && e % 8 == 5 { 0 } else { self.expected * (700 + 6 * u as usize / 10) / 1000 }
            })
            .collect()
    }
}

fn shapes(quick: bool, filter: Option<&str>) -> Vec<Shape> {
    let mut out = Vec::new();
    for fp8 in [false, true] {
        for &(n, k) in &PROJECTIONS {
            for &(experts, expected) in &CONTIGUOUS {
                let capacity_align = TILE_ROWS;
                out.push(Shape { layout: Layout::Contiguous, capacity_align, fp8, experts, expected, n, k });
            }
            for &(experts, expected) in &MASKED {
                let capacity_align = TILE_ROWS;
                out.push(Shape { layout: Layout::Masked, capacity_align, fp8, experts, expected, n, k });
            }
            for &(experts, expected) in &MASKED_DECODE {
                let capacity_align = DECODE_ALIGN;
                out.push(Shape { layout: Layout::Masked, capacity_align, fp8, experts, expected, n, k });
            }
        }
    }
    out.retain(|s| !quick || (s.n, s.k) == PROJECTIONS[0]);
    out.retain(|s| filter.is_none_or(|f| s.label().contains(f)));
    out
}

/// Where each expert's rows live in A and D: (first row, valid rows), and A's/D's row count.
struct Placement {
    rows: usize,
    experts: Vec<(usize, usize)>,
    /// The device buffer the kernel reads: m_indices or masked_m.
    groups: Vec<i32>,
    capacity: usize,
}

fn place(shape: &Shape) -> Placement {
    let counts = shape.counts();
    match shape.layout {
        Layout::Contiguous => {
            let r = ContiguousRows::from_counts(&counts).expect("routing fits");
            let rows = *r.offsets.last().unwrap();
            let experts = counts.iter().enumerate().map(|(e, &c)| (r.offsets[e], c)).collect();
            Placement { rows, experts, groups: r.indices, capacity: 0 }
        }
        Layout::Masked => {
            let capacity = (shape.expected * 3 / 2).next_multiple_of(shape.capacity_align);
            let experts = counts.iter().enumerate().map(|(e, &c)| (e * capacity, c.min(capacity))).collect();
            let groups = counts.iter().map(|&c| c.min(capacity) as i32).collect();
            Placement { rows: shape.experts * capacity, experts, groups, capacity }
        }
    }
}

/// `len` random e4m3 codes (never ±0 or NaN) and power-of-two scales.
fn random_codes(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| match (mix(seed ^ (i as u64).wrapping_mul(0x9e37_79b9)) & 0xff) as u8 {
            c if c & 0x7f == 0 => c | 0x38,
            c if c & 0x7f == 0x7f => c & 0xb0,
            c => c,
        })
        .collect()
}

fn random_scale(seed: u64, i: usize) -> f32 {
    (-((4 + mix(seed ^ (i as u64).wrapping_mul(0x51_7cc1)) % 8) as f32)).exp2()
}

/// One side's callable and its output.
type Side<'a> = Box<dyn FnMut(&mut CudaSlice<bf16>) -> Result<()> + 'a>;

pub fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let filter: Option<String> = std::env::args().find_map(|a| a.strip_prefix("filter=").map(String::from));
    let Some(Bench { device, wf, stream, blas, timer }) = Bench::open("gemm_grouped")? else {
        return Ok(());
    };
    println!(
        "{} — warpforge grouped GEMMs vs the per-expert loop (bf16: cuBLAS per expert, and cuBLAS strided-batched \
         over the capacity for masked; FP8: warpforge's dense fp8_gemm per expert); µs per call, ratio = other ÷ ours",
        device.attributes().name
    );
    println!(
        "{:<32} {:>7} {:>9} {:>9} {:>9} {:>7} {:>8} {:>8} {:>5}  check",
        "shape", "rows", "ours µs", "loop µs", "batch µs", "TF/s", "loop÷us", "bat÷us", "MHz"
    );
    let mut csv = String::from(
        "shape,valid_rows,ours_us,loop_us,batched_us,ours_tflops,loop_over_ours,batched_over_ours,sm_mhz\n",
    );
    let mut loop_ratios: Vec<(String, f64)> = Vec::new();
    let mut failures = Vec::new();
    for shape in shapes(quick, filter.as_deref()) {
        let placement = place(&shape);
        let (n, k) = (shape.n, shape.k);
        let valid: usize = placement.experts.iter().map(|&(_, c)| c).sum();
        let groups = stream.clone_htod(&placement.groups)?;
        let mut outputs: Vec<CudaSlice<bf16>> =
            (0..3).map(|_| stream.alloc_zeros::<bf16>(placement.rows * n)).collect::<std::result::Result<_, _>>()?;
        let check: Check;
        // The inputs outlive the sides that borrow them.
        let mut bf16_inputs = None;
        let mut fp8_inputs = None;
        let mut sides: Vec<Side> = Vec::new();
        if !shape.fp8 {
            let a_host = random_bf16(1, placement.rows * k);
            let b_host = random_bf16(2, shape.experts * n * k);
            let inputs = (stream.clone_htod(&a_host)?, stream.clone_htod(&b_host)?);
            check = Check::bf16(&a_host, &b_host, &placement, n, k);
            let (a, b) = &*bf16_inputs.insert(inputs);
            let (wf, stream, blas) = (&wf, &stream, &blas);
            let (groups, placement, shape) = (&groups, &placement, &shape);
            sides.push(Box::new(move |d| ours(wf, stream, shape, placement, Operands::Bf16(a, b), groups, d)));
            sides.push(Box::new(move |d| {
                for (e, &(row0, count)) in placement.experts.iter().enumerate() {
                    if count == 0 {
                        continue;
                    }
                    let cfg = linear_layer_config(count, n, k);
                    let (av, bv) = (a.slice(row0 * k..(row0 + count) * k), b.slice(e * n * k..(e + 1) * n * k));
                    let mut dv = d.slice_mut(row0 * n..(row0 + count) * n);
                    // SAFETY: the views hold exactly count × K, N × K and count × N elements,
                    // the shapes `cfg` describes.
                    unsafe { blas.gemm(cfg, &bv, &av, &mut dv)? };
                }
                Ok(())
            }));
            if shape.layout == Layout::Masked {
                let cap = placement.capacity;
                sides.push(Box::new(move |d| {
                    let cfg = StridedBatchedConfig {
                        gemm: linear_layer_config(cap, n, k),
                        batch_size: shape.experts as i32,
                        stride_a: (n * k) as i64,
                        stride_b: (cap * k) as i64,
                        stride_c: (cap * n) as i64,
                    };
                    // SAFETY: B holds experts × N × K, A and D experts × capacity rows.
                    unsafe { blas.gemm_strided_batched(cfg, b, a, d)? };
                    Ok(())
                }));
            }
        } else {
            let fp8 = Fp8Inputs::new(&shape, &placement);
            // The loop's per-expert A scales (each expert's own M-row layout) come last.
            let loop_scales: Vec<CudaSlice<f32>> = fp8
                .per_expert_a_scales(&placement, k)
                .iter()
                .map(|s| stream.clone_htod(s))
                .collect::<std::result::Result<_, _>>()?;
            let inputs = (
                stream.clone_htod(&fp8.a)?,
                stream.clone_htod(&fp8.a_scales)?,
                stream.clone_htod(&fp8.b)?,
                stream.clone_htod(&fp8.b_scales)?,
                loop_scales,
            );
            check = Check::fp8(&fp8, &placement, n, k);
            let (a, sa, b, sb, loop_scales) = &*fp8_inputs.insert(inputs);
            let (wf, stream) = (&wf, &stream);
            let (groups, placement, shape) = (&groups, &placement, &shape);
            sides.push(Box::new(move |d| ours(wf, stream, shape, placement, Operands::Fp8((a, sa, b, sb)), groups, d)));
            let sb_stride = n.div_ceil(128) * k.div_ceil(128);
            sides.push(Box::new(move |d| {
                for (e, &(row0, count)) in placement.experts.iter().enumerate() {
                    if count == 0 {
                        continue;
                    }
                    let p = Fp8GemmProblem::new(count, n, k);
                    let av = a.slice(row0 * k..(row0 + count) * k);
                    let bv = b.slice(e * n * k..(e + 1) * n * k);
                    let sbv = sb.slice(e * sb_stride..(e + 1) * sb_stride);
                    let mut dv = d.slice_mut(row0 * n..(row0 + count) * n);
                    wf.fp8_gemm(stream, &p, &av, &loop_scales[e], &bv, &sbv, &mut dv)?;
                }
                Ok(())
            }));
        }
        let count = sides.len();
        // Warm-up, then batches of ~BATCH_SECONDS for the fastest side.
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < WARMUP_SECONDS {
            for (s, side) in sides.iter_mut().enumerate() {
                side(&mut outputs[s])?;
            }
        }
        stream.synchronize()?;
        let mut fastest = f64::INFINITY;
        for (s, side) in sides.iter_mut().enumerate() {
            fastest = fastest.min(timer.per_call(&stream, 3, |_| side(&mut outputs[s]))?.0);
        }
        let reps = ((BATCH_SECONDS / fastest).ceil() as usize).clamp(2, 2000);
        let mut times = vec![Vec::new(); count];
        for round in 0..ROUNDS {
            for i in 0..count {
                let s = (i + round) % count;
                let s = if round % 2 == 1 { count - 1 - s } else { s };
                let side = &mut sides[s];
                times[s].push(timer.per_call(&stream, reps, |_| side(&mut outputs[s]))?.0);
            }
        }
        let clock = sm_clock_mhz();
        let mut worst = Vec::new();
        for (s, side) in sides.iter_mut().enumerate() {
            stream.memset_zeros(&mut outputs[s])?;
            side(&mut outputs[s])?;
            worst.push(check.worst(&stream, &outputs[s])?);
        }
        drop(sides);
        let secs: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
        let tflops = 2.0 * valid as f64 * n as f64 * k as f64 / secs[0] / 1e12;
        let ratio = |s: usize| secs.get(s).map(|t| t / secs[0]);
        let fmt = |v: Option<f64>, d: usize| v.map_or("n/a".to_string(), |x| format!("{x:.d$}"));
        let verdict = if worst.iter().any(|&w| w > 1.0) { " FAIL" } else { "" };
        println!(
            "{:<32} {:>7} {:>9.1} {:>9} {:>9} {:>7.1} {:>8} {:>8} {:>5}  {}{verdict}",
            shape.label(),
            valid,
            secs[0] * 1e6,
            fmt(secs.get(1).map(|t| t * 1e6), 1),
            fmt(secs.get(2).map(|t| t * 1e6), 1),
            tflops,
            fmt(ratio(1), 3),
            fmt(ratio(2), 3),
            clock,
            worst.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>().join("/"),
        );
        if !verdict.is_empty() {
            failures.push(shape.label());
        }
        csv.push_str(&format!(
            "{},{valid},{:.2},{},{},{tflops:.1},{},{},{clock}\n",
            shape.label(),
            secs[0] * 1e6,
            fmt(secs.get(1).map(|t| t * 1e6), 2),
            fmt(secs.get(2).map(|t| t * 1e6), 2),
            fmt(ratio(1), 4),
            fmt(ratio(2), 4),
        ));
        loop_ratios.push((shape.label(), ratio(1).unwrap_or(f64::NAN)));
    }
    // The first four over the tile-capacity rows (the table before the decode rows existed).
    let groups = [
        ("bf16", "bf16-"),
        ("fp8", "fp8-"),
        ("contiguous", "-contig-"),
        ("masked", "-masked-"),
        ("bf16 masked decode", "bf16-masked_decode-"),
        ("fp8 masked decode", "fp8-masked_decode-"),
    ];
    for (i, (name, pat)) in groups.into_iter().enumerate() {
        let in_group = |l: &str| l.contains(pat) && (i >= 4 || !l.contains("masked_decode"));
        let r: Vec<f64> = loop_ratios.iter().filter(|(l, _)| in_group(l)).map(|&(_, r)| r).collect();
        println!("geomean {name}: loop ÷ ours {:.3} ({} shapes)", geomean(r.iter().copied()), r.len());
    }
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    std::fs::write(format!("{out}/gemm_grouped.csv"), csv)?;
    if !failures.is_empty() {
        return Err(format!("grouped GEMM results outside tolerance: {}", failures.join(", ")).into());
    }
    Ok(())
}

type Fp8Buffers<'a> = (&'a CudaSlice<u8>, &'a CudaSlice<f32>, &'a CudaSlice<u8>, &'a CudaSlice<f32>);

/// Our side's operands: bf16 A and B, or FP8 codes with their scales.
#[derive(Clone, Copy)]
enum Operands<'a> {
    Bf16(&'a CudaSlice<bf16>, &'a CudaSlice<bf16>),
    Fp8(Fp8Buffers<'a>),
}

/// One call of our grouped GEMM in the shape's layout.
fn ours(
    wf: &Warpforge,
    stream: &Arc<CudaStream>,
    shape: &Shape,
    placement: &Placement,
    operands: Operands<'_>,
    groups: &CudaSlice<i32>,
    d: &mut CudaSlice<bf16>,
) -> Result<()> {
    let (n, k, experts) = (shape.n, shape.k, shape.experts);
    let contiguous = GroupedContiguousProblem { rows: placement.rows, n, k, experts };
    let masked = GroupedMaskedProblem { experts, capacity: placement.capacity, n, k };
    match (shape.layout, operands) {
        (Layout::Contiguous, Operands::Bf16(a, b)) => {
            wf.grouped_gemm_contiguous(stream, &contiguous, a, b, groups, d)?
        }
        (Layout::Masked, Operands::Bf16(a, b)) => wf.grouped_gemm_masked(stream, &masked, a, b, groups, d)?,
        (Layout::Contiguous, Operands::Fp8((a, sa, b, sb))) => {
            wf.fp8_grouped_gemm_contiguous(stream, &contiguous, a, sa, b, sb, groups, d)?
        }
        (Layout::Masked, Operands::Fp8((a, sa, b, sb))) => {
            wf.fp8_grouped_gemm_masked(stream, &masked, a, sa, b, sb, groups, d)?
        }
    }
    Ok(())
}

/// FP8 operands in the grouped layouts: A's scales one matrix over all rows (contiguous) or one
/// per expert's capacity (masked), B's per expert.
struct Fp8Inputs {
    a: Vec<u8>,
    a_scales: Vec<f32>,
    b: Vec<u8>,
    b_scales: Vec<f32>,
    /// Rows per A-scale matrix and matrices.
    scale_rows: usize,
}

impl Fp8Inputs {
    fn new(shape: &Shape, placement: &Placement) -> Fp8Inputs {
        let (n, k) = (shape.n, shape.k);
        let blocks = k.div_ceil(128);
        let (scale_rows, matrices) = match shape.layout {
            Layout::Contiguous => (placement.rows, 1),
            Layout::Masked => (placement.capacity, shape.experts),
        };
        let pitch = group_scale_pitch(scale_rows).unwrap();
        let a_scales = (0..matrices * pitch * blocks).map(|i| random_scale(3, i)).collect();
        let b_scales = (0..shape.experts * n.div_ceil(128) * blocks).map(|i| random_scale(4, i)).collect();
        Fp8Inputs {
            a: random_codes(5, placement.rows * k),
            a_scales,
            b: random_codes(6, shape.experts * n * k),
            b_scales,
            scale_rows,
        }
    }

    /// A's scale of row `row` (of all A) and K block `kb`.
    fn a_scale(&self, row: usize, kb: usize, k: usize) -> f32 {
        let pitch = group_scale_pitch(self.scale_rows).unwrap();
        let (matrix, r) = (row / self.scale_rows, row % self.scale_rows);
        self.a_scales[matrix * pitch * k.div_ceil(128) + group_scale_index(r, kb, pitch)]
    }

    /// Each expert's rows' scales in the dense kernel's layout (pitch `round_up(count, 4)`).
    fn per_expert_a_scales(&self, placement: &Placement, k: usize) -> Vec<Vec<f32>> {
        let blocks = k.div_ceil(128);
        placement
            .experts
            .iter()
            .map(|&(row0, count)| {
                let pitch = group_scale_pitch(count.max(1)).unwrap();
                let mut out = vec![0.0f32; pitch * blocks];
                for r in 0..count {
                    for kb in 0..blocks {
                        out[group_scale_index(r, kb, pitch)] = self.a_scale(row0 + r, kb, k);
                    }
                }
                out
            })
            .collect()
    }
}

/// Sampled float64 references: (row of D, column, value, tolerance).
struct Check {
    samples: Vec<(usize, usize, f64, f64)>,
    n: usize,
}

impl Check {
    /// Rows sampled per expert: the first, the last, two random; columns: first, last, random.
    fn positions(placement: &Placement, n: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        for (e, &(row0, count)) in placement.experts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let rows =
                [0, count - 1, (mix(e as u64) % count as u64) as usize, (mix(!(e as u64)) % count as u64) as usize];
            for (i, r) in rows.into_iter().enumerate() {
                for c in [0, n - 1, (mix((e * 7 + i) as u64) % n as u64) as usize] {
                    out.push((e, row0 + r, c));
                }
            }
        }
        out
    }

    fn bf16(a: &[bf16], b: &[bf16], placement: &Placement, n: usize, k: usize) -> Check {
        let samples = Self::positions(placement, n)
            .into_iter()
            .map(|(e, row, col)| {
                let (x, w) = (&a[row * k..][..k], &b[(e * n + col) * k..][..k]);
                let (dot, mag) = x.iter().zip(w).fold((0.0, 0.0), |(s, m), (p, q)| {
                    let v = p.to_f64() * q.to_f64();
                    (s + v, m + v.abs())
                });
                (row, col, dot, EPS_BF16 * dot.abs() + 2.0 * k as f64 * EPS_F32 * mag + ABS_FLOOR)
            })
            .collect();
        Check { samples, n }
    }

    fn fp8(inputs: &Fp8Inputs, placement: &Placement, n: usize, k: usize) -> Check {
        let decode = |c: u8| Minifloat::E4m3.decode(c) as f64;
        let samples = Self::positions(placement, n)
            .into_iter()
            .map(|(e, row, col)| {
                let (mut dot, mut mag) = (0.0, 0.0);
                let b_blocks = n.div_ceil(128) * k.div_ceil(128);
                for p in 0..k {
                    let x = decode(inputs.a[row * k + p]) * inputs.a_scale(row, p / 128, k) as f64;
                    let w = decode(inputs.b[(e * n + col) * k + p])
                        * inputs.b_scales[e * b_blocks + block_scale_index(col, p, k)] as f64;
                    dot += x * w;
                    mag += (x * w).abs();
                }
                let tol =
                    EPS_BF16 * dot.abs() + (BLOCK_SUM_ERR + (k.div_ceil(128) + 2) as f64 * EPS_F32) * mag + ABS_FLOOR;
                (row, col, dot, tol)
            })
            .collect();
        Check { samples, n }
    }

    /// The worst |error| ÷ tolerance over the samples (≤ 1 passes).
    fn worst(&self, stream: &Arc<CudaStream>, d: &CudaSlice<bf16>) -> Result<f64> {
        let host = stream.clone_dtoh(d)?;
        Ok(self.samples.iter().fold(0.0f64, |w, &(r, c, want, tol)| {
            let got = host[r * self.n + c].to_f64();
            if got.is_finite() { w.max((got - want).abs() / tol) } else { f64::INFINITY }
        }))
    }
}
