//! The fused gate-up + SwiGLU GEMM against what a service runs without it, side by side in one
//! process on the same inputs.
//!
//! - fused: `out = silu(x·W_gateᵀ) ⊙ (x·W_upᵀ)` by `Warpforge::swiglu` over the interleaved
//!   gate-up weight, writing only `out` (M × I, bf16);
//! - unfused: one cuBLAS GEMM `h = x·[W_gate; W_up]ᵀ` (M × 2I, bf16, the weights stacked 2I × H
//!   row-major: the linear-layer call of `gemm_bf16` with N = 2I) followed by
//!   `Warpforge::silu_mul` (`h → out`), timed as one unit.
//!
//! Method (that of `gemm_bf16`): random uniform(-1, 1) inputs, never zero; weight copies and
//! activation sets rotated so that L2 (60 MiB on the H200) cannot serve one call from the
//! previous one (the copies hold the same values: only their addresses matter to the cache, and
//! the checks below can then use any of them); a warm-up; then rounds timed with CUDA events,
//! each round running `fused × reps` and `unfused × reps` in an order that alternates from round
//! to round, then `silu_mul × reps` alone; the median round of each side is reported with the SM
//! clock read right after. After timing, the fused and unfused outputs are compared at 2048
//! random elements (they differ by the unfused path's rounding of g and u to bf16), and both
//! against a float64 reference there.
//!
//! Columns: fused and unfused µs per call, ratio unfused / fused (> 1: the fused kernel is
//! faster), the fused kernel's TFLOP/s (2·M·2I·H flops), `silu_mul` alone (µs and GB/s of
//! its 6·M·I bytes), and the fused kernel with each variant forced (cooperative 128 × 256,
//! ping-pong 64 × 256, narrow 128 × 128 gate-up tiles; timed after the compared pair in every
//! round), which shows whether `Auto` picked well. docs/PERF.md keeps the measurements.
//!
//! Run: `cargo bench --bench kernels -- gemm_swiglu` (on a GPU machine: `.gpu/bench gemm_swiglu`).
//! Optional arguments: `quick` (two shapes), `m=<M>` (only that M). Writes `gemm_swiglu.csv` to
//! `$OUT` (or the current directory).

use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::{CudaBlas, Gemm};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use warpforge::{Consumers, SwigluProblem, TileWidth, Warpforge, interleave_gate_up};

use crate::common::{
    ABS_FLOOR, BatchTimer, Bench, EPS_BF16, EPS_F32, Result, geomean, linear_layer_config, median, mix, random_bf16,
    sm_clock_mhz,
};

/// Bytes of activation sets that rotation must exceed (about 4× the H200's L2).
const ROTATION_BYTES: usize = 256 << 20;
/// Most activation sets per shape.
const MAX_SETS: usize = 8;
/// Most bytes of activation sets per shape, so that M = 16384 through the largest MLP (4 GiB a
/// set) keeps one set and everything stays far inside the GPU's memory.
const MAX_SET_BYTES: usize = 16 << 30;
/// Copies of each weight: every MLP's weights exceed 3× L2 (180 MiB and up), so two copies
/// alternate with no reuse.
const WEIGHT_COPIES: usize = 2;
const ROUNDS: usize = 8;
const WARMUP_SECONDS: f64 = 0.05;
/// GPU time one round aims for, all three timed batches together.
const ROUND_SECONDS: f64 = 0.015;
/// Elements at which the two outputs are compared with each other and with float64.
const VERIFY_SAMPLES: usize = 2048;

/// (model, hidden, intermediate).
const MLPS: [(&str, usize, usize); 5] = [
    ("Llama-2-7B", 4096, 11008),
    ("Llama-3-8B", 4096, 14336),
    ("Llama-2-13B", 5120, 13824),
    ("Qwen2-7B", 3584, 18944),
    ("Llama-3-70B", 8192, 28672),
];
const TOKENS: [usize; 6] = [1, 16, 128, 1024, 4096, 16384];

/// One copy of an MLP's weights in both arrangements.
struct Weights {
    /// `interleave_gate_up(gate, up)`: what the fused kernel reads.
    gate_up: CudaSlice<bf16>,
    /// `[gate; up]`, 2I × H row-major: what the unfused GEMM reads.
    stacked: CudaSlice<bf16>,
}

/// One activation set of a shape: the input and both paths' outputs.
struct Acts {
    x: CudaSlice<bf16>,
    h: CudaSlice<bf16>,
    out_fused: CudaSlice<bf16>,
    out_unfused: CudaSlice<bf16>,
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// The host copy of one MLP's weights (copy 0) and its device copies.
struct Mlp {
    name: &'static str,
    hidden: usize,
    intermediate: usize,
    gate: Vec<bf16>,
    up: Vec<bf16>,
    copies: Vec<Weights>,
}

impl Mlp {
    fn new(stream: &Arc<CudaStream>, name: &'static str, hidden: usize, intermediate: usize) -> Result<Mlp> {
        let n = intermediate * hidden;
        let gate = random_bf16(hidden as u64 * 31 + 1, n);
        let up = random_bf16(intermediate as u64 * 31 + 2, n);
        let gate_up = stream.clone_htod(&interleave_gate_up(&gate, &up, intermediate, hidden, bf16::ZERO)?)?;
        let mut stacked = stream.alloc_zeros::<bf16>(2 * n)?;
        stream.memcpy_htod(&gate, &mut stacked.slice_mut(..n))?;
        stream.memcpy_htod(&up, &mut stacked.slice_mut(n..))?;
        let mut copies = vec![Weights { gate_up, stacked }];
        while copies.len() < WEIGHT_COPIES {
            let first = &copies[0];
            copies.push(Weights {
                gate_up: stream.clone_dtod(&first.gate_up)?,
                stacked: stream.clone_dtod(&first.stacked)?,
            });
        }
        Ok(Mlp { name, hidden, intermediate, gate, up, copies })
    }

    /// (g, u, Σ|x·w_gate|, Σ|x·w_up|) of token `i` and column `j`, in f64.
    fn dots(&self, x: &[bf16], i: usize, j: usize) -> [f64; 4] {
        let k = self.hidden;
        let row = &x[i * k..][..k];
        let mut acc = [0.0f64; 4];
        for ((&a, &wg), &wu) in row.iter().zip(&self.gate[j * k..][..k]).zip(&self.up[j * k..][..k]) {
            let (pg, pu) = (a.to_f64() * wg.to_f64(), a.to_f64() * wu.to_f64());
            acc = [acc[0] + pg, acc[1] + pu, acc[2] + pg.abs(), acc[3] + pu.abs()];
        }
        acc
    }
}

/// Which batch of a round.
#[derive(Clone, Copy)]
enum Side {
    Fused,
    Unfused,
    SiluMul,
    /// The fused kernel with cooperative 128 × 256 tiles forced.
    Cooperative,
    /// With ping-pong consumers forced.
    PingPong,
    /// With narrow 128 × 128 tiles forced.
    Narrow,
}

/// Every side, in the order the odd rounds time them.
const SIDES: [Side; 6] = [Side::Fused, Side::Unfused, Side::SiluMul, Side::Cooperative, Side::PingPong, Side::Narrow];

struct Row {
    model: &'static str,
    m: usize,
    hidden: usize,
    intermediate: usize,
    fused_us: f64,
    unfused_us: f64,
    ratio: f64,
    fused_tflops: f64,
    silu_us: f64,
    silu_gbps: f64,
    /// µs of the fused kernel with each variant forced: cooperative, ping-pong, narrow.
    forced_us: [f64; 3],
    clock: String,
}

pub fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let only_m: Option<usize> = std::env::args().find_map(|a| a.strip_prefix("m=").and_then(|m| m.parse().ok()));
    let Some(Bench { device, wf, stream, blas, timer }) = Bench::open("gemm_swiglu")? else {
        return Ok(());
    };
    println!(
        "{} — warpforge fused gate-up + SwiGLU vs cuBLAS GEMM (M × 2I) + warpforge silu_mul; bf16, f32 accumulate",
        device.attributes().name
    );
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>6} {:>7} {:>8} {:>8} {:>8}",
        "model",
        "M",
        "H",
        "I",
        "fused µs",
        "unfused",
        "ratio",
        "fused TF",
        "silu µs",
        "GB/s",
        "MHz",
        "check",
        "coop µs",
        "pp µs",
        "narrow"
    );
    let mut rows: Vec<Row> = Vec::new();
    for &(name, hidden, intermediate) in &MLPS {
        let tokens: Vec<usize> = TOKENS
            .iter()
            .copied()
            .filter(|&m| !quick || (name, m) == ("Llama-2-7B", 128) || (name, m) == ("Llama-3-8B", 4096))
            .filter(|&m| only_m.is_none_or(|only| only == m))
            .collect();
        if tokens.is_empty() {
            continue;
        }
        let mlp = Mlp::new(&stream, name, hidden, intermediate)?;
        for m in tokens {
            rows.push(run_shape(&wf, &stream, &blas, &timer, &mlp, m)?);
        }
    }

    let ratios = |rows: &[&Row]| geomean(rows.iter().map(|r| r.ratio));
    let by_m: Vec<String> = TOKENS
        .iter()
        .filter_map(|&m| {
            let group: Vec<&Row> = rows.iter().filter(|r| r.m == m).collect();
            (!group.is_empty()).then(|| format!("M={m} {:.3}", ratios(&group)))
        })
        .collect();
    println!("geomean ratio unfused / fused: {}; all {:.3}", by_m.join(", "), ratios(&rows.iter().collect::<Vec<_>>()));

    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let mut csv = String::from(
        "model,m,hidden,intermediate,fused_us,unfused_us,ratio,fused_tflops,silu_mul_us,silu_mul_gbps,sm_mhz,coop_us,pingpong_us,narrow_us\n",
    );
    for r in &rows {
        csv.push_str(&format!(
            "{},{},{},{},{:.2},{:.2},{:.4},{:.1},{:.2},{:.0},{},{:.2},{:.2},{:.2}\n",
            r.model,
            r.m,
            r.hidden,
            r.intermediate,
            r.fused_us,
            r.unfused_us,
            r.ratio,
            r.fused_tflops,
            r.silu_us,
            r.silu_gbps,
            r.clock,
            r.forced_us[0],
            r.forced_us[1],
            r.forced_us[2]
        ));
    }
    std::fs::write(format!("{out}/gemm_swiglu.csv"), csv)?;
    Ok(())
}

/// Times one shape and verifies it; prints and returns its row.
fn run_shape(
    wf: &Warpforge,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    timer: &BatchTimer,
    mlp: &Mlp,
    m: usize,
) -> Result<Row> {
    let (hidden, intermediate) = (mlp.hidden, mlp.intermediate);
    let set_bytes = 2 * (m * hidden + m * 2 * intermediate + 2 * m * intermediate);
    let sets_n = ROTATION_BYTES.div_ceil(set_bytes).clamp(1, MAX_SETS).min((MAX_SET_BYTES / set_bytes).max(1));
    let x_host = random_bf16(m as u64 * 7 + hidden as u64, m * hidden);
    let x = stream.clone_htod(&x_host)?;
    let mut sets = Vec::new();
    for _ in 0..sets_n {
        sets.push(Acts {
            x: stream.clone_dtod(&x)?,
            h: stream.alloc_zeros::<bf16>(m * 2 * intermediate)?,
            out_fused: stream.alloc_zeros::<bf16>(m * intermediate)?,
            out_unfused: stream.alloc_zeros::<bf16>(m * intermediate)?,
        });
    }
    drop(x);
    let problem = SwigluProblem::new(m, hidden, intermediate);
    let forced = |consumers: Consumers, tile_width: TileWidth| SwigluProblem { consumers, tile_width, ..problem };
    let cooperative = forced(Consumers::Cooperative, TileWidth::Wide);
    let pingpong = forced(Consumers::PingPong, TileWidth::Wide);
    let narrow = forced(Consumers::Cooperative, TileWidth::Narrow);
    let blas_cfg = linear_layer_config(m, 2 * intermediate, hidden);
    let run = |side: Side, w: &Weights, a: &mut Acts| -> Result<()> {
        match side {
            Side::Fused => wf.swiglu(stream, &problem, &a.x, &w.gate_up, &mut a.out_fused)?,
            Side::Unfused => {
                // SAFETY: cuBLAS reads the stacked weight (2I × H) and x (M × H) and writes h
                // (M × 2I), the sizes allocated above.
                unsafe { blas.gemm(blas_cfg, &w.stacked, &a.x, &mut a.h)? };
                wf.silu_mul(stream, m, intermediate, &a.h, &mut a.out_unfused)?;
            }
            Side::SiluMul => wf.silu_mul(stream, m, intermediate, &a.h, &mut a.out_unfused)?,
            Side::Cooperative => wf.swiglu(stream, &cooperative, &a.x, &w.gate_up, &mut a.out_fused)?,
            Side::PingPong => wf.swiglu(stream, &pingpong, &a.x, &w.gate_up, &mut a.out_fused)?,
            Side::Narrow => wf.swiglu(stream, &narrow, &a.x, &w.gate_up, &mut a.out_fused)?,
        }
        Ok(())
    };
    // Call c of the shape (counted across batches) uses weight copy c mod 2 and activation
    // set c mod sets_n.
    let mut calls = 0usize;
    let mut batch = |side: Side, reps: usize, sets: &mut [Acts]| -> Result<()> {
        for _ in 0..reps {
            run(side, &mlp.copies[calls % WEIGHT_COPIES], &mut sets[calls % sets_n])?;
            calls += 1;
        }
        Ok(())
    };

    // Warm-up, and reps so that one round runs about ROUND_SECONDS.
    let start = Instant::now();
    let mut iterations = 0usize;
    while start.elapsed().as_secs_f64() < WARMUP_SECONDS || iterations < 3 {
        for side in SIDES {
            batch(side, 1, &mut sets)?;
        }
        iterations += 1;
        stream.synchronize()?;
    }
    let per_iteration = start.elapsed().as_secs_f64() / iterations as f64;
    let reps = ((ROUND_SECONDS / per_iteration).ceil() as usize).clamp(1, 200);

    let mut times: [Vec<f64>; 6] = Default::default();
    for round in 0..ROUNDS {
        // The two compared sides alternate which goes first; the forced variants follow.
        let mut order = SIDES;
        if round % 2 == 0 {
            order.swap(0, 1);
        }
        for side in order {
            times[side as usize].push(timer.per_call(stream, reps, |_| batch(side, 1, &mut sets))?.0);
        }
    }
    let clock = sm_clock_mhz();
    let [fused_s, unfused_s, silu_s, cooperative_s, pingpong_s, narrow_s] = times.map(|mut t| median(&mut t));
    let flops = 2.0 * m as f64 * 2.0 * intermediate as f64 * hidden as f64;
    let silu_bytes = 6.0 * m as f64 * intermediate as f64;

    let check = verify(stream, &run, mlp, &mut sets[0], &x_host, m)?;
    let row = Row {
        model: mlp.name,
        m,
        hidden,
        intermediate,
        fused_us: fused_s * 1e6,
        unfused_us: unfused_s * 1e6,
        ratio: unfused_s / fused_s,
        fused_tflops: flops / fused_s / 1e12,
        silu_us: silu_s * 1e6,
        silu_gbps: silu_bytes / silu_s / 1e9,
        forced_us: [cooperative_s * 1e6, pingpong_s * 1e6, narrow_s * 1e6],
        clock,
    };
    println!(
        "{:<12} {:>6} {:>6} {:>6} {:>9.1} {:>9.1} {:>7.3} {:>9.1} {:>8.1} {:>8.0} {:>6} {:>7} {:>8.1} {:>8.1} {:>8.1}",
        row.model,
        m,
        hidden,
        intermediate,
        row.fused_us,
        row.unfused_us,
        row.ratio,
        row.fused_tflops,
        row.silu_us,
        row.silu_gbps,
        row.clock,
        check,
        row.forced_us[0],
        row.forced_us[1],
        row.forced_us[2]
    );
    Ok(row)
}

/// Runs both paths once more on activation set 0 (weight copies hold the same values) and
/// compares them at VERIFY_SAMPLES elements with each other and with float64; panics on a
/// mismatch. Returns the largest |fused − f64| / tolerance, formatted.
///
/// Tolerances (u = 2^-24): the accumulation of g and u errs by at most 2·H·u·Σ|x·w| (eg, eu;
/// the GEMM suite's bound), which silu (slope ≤ 1.1) and the product carry into
/// |silu(g)|·eu + 1.1·eg·(|u| + eu). The fused output then has one rounding (2·2^-8·|ref|
/// allowed); the unfused one rounds g and u to bf16 first (2^-8·|g| and 2^-8·|u| more, carried
/// the same way) and then the output, so the two differ by at most about 3 bf16 ulps of
/// |silu(g)·u| + |g·u|; we allow 4 plus twice the accumulation terms.
fn verify(
    stream: &Arc<CudaStream>,
    run: &dyn Fn(Side, &Weights, &mut Acts) -> Result<()>,
    mlp: &Mlp,
    set: &mut Acts,
    x_host: &[bf16],
    m: usize,
) -> Result<String> {
    let intermediate = mlp.intermediate;
    stream.memset_zeros(&mut set.out_fused)?;
    stream.memset_zeros(&mut set.out_unfused)?;
    run(Side::Fused, &mlp.copies[0], set)?;
    run(Side::Unfused, &mlp.copies[0], set)?;
    let fused = stream.clone_dtoh(&set.out_fused)?;
    let unfused = stream.clone_dtoh(&set.out_unfused)?;
    let k = mlp.hidden as f64;
    let mut worst = 0.0f64;
    for t in 0..VERIFY_SAMPLES as u64 {
        let (i, j) = ((mix(2 * t) % m as u64) as usize, (mix(2 * t + 1) % intermediate as u64) as usize);
        let [g, u, g_mag, u_mag] = mlp.dots(x_host, i, j);
        let want = silu(g) * u;
        let (eg, eu) = (2.0 * k * EPS_F32 * g_mag, 2.0 * k * EPS_F32 * u_mag);
        let accumulation = silu(g).abs() * eu + 1.1 * eg * (u.abs() + eu);
        let (f, uf) = (fused[i * intermediate + j].to_f64(), unfused[i * intermediate + j].to_f64());
        let tol_fused = 2.0 * EPS_BF16 * want.abs() + 1.01 * accumulation + ABS_FLOOR;
        let (ge, ue) = (EPS_BF16 * g.abs() + eg, EPS_BF16 * u.abs() + eu);
        let tol_unfused =
            2.0 * EPS_BF16 * want.abs() + 1.01 * (silu(g).abs() * ue + 1.1 * ge * (u.abs() + ue)) + ABS_FLOOR;
        let magnitude = (silu(g) * u).abs() + (g * u).abs();
        let tol_pair = 4.0 * EPS_BF16 * magnitude + 2.0 * accumulation + ABS_FLOOR;
        let at = format!("{}: M={m} out[{i},{j}]: fused {f}, unfused {uf}, f64 {want}", mlp.name);
        assert!((f - want).abs() <= tol_fused, "{at}: fused off by more than {tol_fused:.3e}");
        assert!((uf - want).abs() <= tol_unfused, "{at}: unfused off by more than {tol_unfused:.3e}");
        assert!((f - uf).abs() <= tol_pair, "{at}: the paths differ by more than {tol_pair:.3e}");
        worst = worst.max((f - want).abs() / tol_fused);
    }
    Ok(format!("{worst:.2}"))
}
