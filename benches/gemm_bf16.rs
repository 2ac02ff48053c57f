//! warpforge's bf16 GEMM against cuBLAS, side by side in one process on the same buffers.
//!
//! `D (M×N, bf16) = A (M×K, row-major) · B (N×K, row-major)ᵀ`, f32 accumulation — the layout of
//! a linear layer, which both libraries read in place. For each shape: random uniform(-1, 1)
//! inputs (never zeros), enough rotating buffer sets that L2 (60 MiB on the H200) cannot hold
//! them, a warm-up, then rounds of `ours × reps, cuBLAS × reps` (interleaved) timed with CUDA
//! events, the order of the two alternating per round; the median round of each is reported
//! with the SM clock read right after. After the timed rounds, every plan timed runs once more
//! on set 0 and is checked against a float64 reference at sampled positions (random, last row
//! and column, corners); the `check` column is the worst |error| ÷ tolerance, ours / cuBLAS,
//! and a value above 1 for ours stops the bench.
//! The last three columns are our GPU time per call and the host time to issue one call,
//! ours and cuBLAS's (µs): a small problem whose issue time reaches its GPU time is timing
//! the host.
//!
//! Run: `cargo bench --bench kernels -- gemm_bf16` (on a GPU machine: `.gpu/bench gemm_bf16`).
//! Optional arguments: `quick` (three squares only), `probe` (a K sweep at two M × N, to
//! separate per-slice from fixed costs), `m=<M>` (only shapes with that M), `clusters` (also time
//! the 2 × 1 cluster variant forced; off by default: it is slower, and its rounds change the
//! card's thermal rhythm for the others). Writes `gemm_bf16.csv` and
//! `gemm_bf16.svg` to `$OUT` (or the current directory).

use std::time::Instant;

use cudarc::cublas::Gemm;
use cudarc::driver::CudaSlice;
use half::bf16;
use warpforge::{Clusters, Consumers, Epilogue, GemmProblem, TileWidth};

use crate::common::{
    Bar, Bench, LinearCheck, Result, geomean, linear_layer_config, median, random_bf16, ratio_svg, sm_clock_mhz,
};

/// Bytes of operands that rotation must exceed (about 4× the H200's L2).
const ROTATION_BYTES: usize = 256 << 20;
const MAX_SETS: usize = 8;
const ROUNDS: usize = 7;
const WARMUP_SECONDS: f64 = 0.05;

struct Shape {
    group: &'static str,
    m: usize,
    n: usize,
    k: usize,
}

fn shapes(quick: bool, probe: bool) -> Vec<Shape> {
    let mut s = Vec::new();
    if probe {
        // Time against K at fixed M × N: the slope is the per-K-slice cost, the intercept the
        // fixed cost (launch, pipeline fill, fix-up, epilogue) of one call. One shape per
        // schedule: pure stream-K, data-parallel (87 % full waves), hybrid (73 %), and a square
        // (data-parallel, four tiles per CTA: the intercept holds four tile boundaries).
        for (m, n) in [(128, 4096), (1024, 11008), (1152, 8192), (4096, 4096)] {
            for k in [256, 512, 1024, 2048, 4096, 8192, 16384] {
                s.push(Shape { group: "probe", m, n, k });
            }
        }
        return s;
    }
    for d in [2048, 4096, 6144, 8192] {
        if quick && d == 6144 {
            continue;
        }
        s.push(Shape { group: "square", m: d, n: d, k: d });
    }
    if quick {
        return s;
    }
    for m in [128, 1024, 4096, 16384] {
        for (n, k) in [(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096), (4096, 14336), (7168, 2048)] {
            s.push(Shape { group: "llm", m, n, k });
        }
    }
    for tiles in [8, 9, 16, 17, 33, 34] {
        s.push(Shape { group: "wave", m: tiles * 128, n: 8192, k: 4096 });
    }
    s
}

struct Set {
    a: CudaSlice<bf16>,
    b: CudaSlice<bf16>,
    d_ours: CudaSlice<bf16>,
    d_blas: CudaSlice<bf16>,
}

pub fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let probe = std::env::args().any(|a| a == "probe");
    // The forced variants timed: cooperative, ping-pong, narrow, and clusters on request.
    let forced_variants = if std::env::args().any(|a| a == "clusters") { 4 } else { 3 };
    let only_m: Option<usize> = std::env::args().find_map(|a| a.strip_prefix("m=").and_then(|m| m.parse().ok()));
    let Some(Bench { device, wf, stream, blas, timer }) = Bench::open("gemm_bf16")? else {
        return Ok(());
    };
    println!(
        "{} — warpforge bf16 GEMM (variant chosen per shape; cooperative, ping-pong and narrow-tile \
         variants, and 2 × 1 clusters, forced in the last columns) vs cuBLAS (bf16 in/out, f32 accumulate)",
        device.attributes().name
    );
    println!(
        "{:<7} {:>6} {:>6} {:>6} {:>10} {:>10} {:>7} {:>6} {:>9} {:>8} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8}",
        "group",
        "M",
        "N",
        "K",
        "ours TF/s",
        "cuBLAS",
        "ratio",
        "MHz",
        "check",
        "ours µs",
        "issue",
        "cuBLAS",
        "coop",
        "pingpong",
        "narrow",
        "cluster"
    );
    let mut rows = Vec::new();
    for shape in shapes(quick, probe).into_iter().filter(|s| only_m.is_none_or(|m| s.m == m)) {
        let Shape { group, m, n, k } = shape;
        let set_bytes = 2 * (m * k + n * k + 2 * m * n);
        let sets_n = ROTATION_BYTES.div_ceil(set_bytes).clamp(1, MAX_SETS);
        let mut sets = Vec::new();
        // Set 0's operands stay on the host for the float64 check after timing.
        let (a0, b0) = (random_bf16(1, m * k), random_bf16(2, n * k));
        for s in 0..sets_n {
            sets.push(Set {
                a: stream.clone_htod(&if s == 0 { a0.clone() } else { random_bf16(s as u64 * 2 + 1, m * k) })?,
                b: stream.clone_htod(&if s == 0 { b0.clone() } else { random_bf16(s as u64 * 2 + 2, n * k) })?,
                d_ours: stream.alloc_zeros::<bf16>(m * n)?,
                d_blas: stream.alloc_zeros::<bf16>(m * n)?,
            });
        }
        let problem = GemmProblem::new(m, n, k);
        let blas_cfg = linear_layer_config(m, n, k);
        let run_ours = |set: &mut Set| {
            wf.gemm::<bf16, bf16>(&stream, &problem, &set.a, &set.b, Epilogue::default(), &mut set.d_ours)
        };
        let arrangements = [
            (Consumers::Cooperative, TileWidth::Wide, Clusters::Off),
            (Consumers::PingPong, TileWidth::Wide, Clusters::Off),
            (Consumers::Cooperative, TileWidth::Narrow, Clusters::Off),
            (Consumers::Cooperative, TileWidth::Wide, Clusters::Pairs),
        ]
        .map(|(consumers, tile_width, clusters)| GemmProblem { consumers, tile_width, clusters, ..problem });
        let run_forced = |forced: &GemmProblem, set: &mut Set| {
            wf.gemm::<bf16, bf16>(&stream, forced, &set.a, &set.b, Epilogue::default(), &mut set.d_ours)
        };
        let run_blas = |set: &mut Set| -> Result<()> {
            // SAFETY: cuBLAS reads B (n×k) and A (m×k) and writes D (m×n), the sizes allocated above.
            unsafe { blas.gemm(blas_cfg, &set.b, &set.a, &mut set.d_blas)? };
            Ok(())
        };
        // Warm-up, and reps so one timed batch runs ≥ ~10 ms.
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let start = Instant::now();
        let mut launches = 0usize;
        while start.elapsed().as_secs_f64() < WARMUP_SECONDS || launches < 4 {
            let set = &mut sets[launches % sets_n];
            run_ours(set)?;
            run_blas(set)?;
            launches += 1;
        }
        stream.synchronize()?;
        let per_pair = start.elapsed().as_secs_f64() / launches as f64;
        let reps = ((0.01 / (per_pair / 2.0)).ceil() as usize).clamp(3, 200);
        let (mut t_ours, mut t_blas) = (Vec::new(), Vec::new());
        let mut t_forced = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        // Host time to issue one call (validation, descriptors, launch): see BatchTimer.
        let (mut issue_ours, mut issue_blas) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            // Ours and cuBLAS in an order that alternates per round, then the forced variants.
            for ours_first in [round % 2 == 0, round % 2 == 1] {
                if ours_first {
                    let (gpu_s, issue_s) = timer.per_call(&stream, reps, |r| Ok(run_ours(&mut sets[r % sets_n])?))?;
                    t_ours.push(gpu_s);
                    issue_ours.push(issue_s);
                } else {
                    let (gpu_s, issue_s) = timer.per_call(&stream, reps, |r| run_blas(&mut sets[r % sets_n]))?;
                    t_blas.push(gpu_s);
                    issue_blas.push(issue_s);
                }
            }
            for (forced, times) in arrangements.iter().zip(t_forced.iter_mut()).take(forced_variants) {
                times.push(timer.per_call(&stream, reps, |r| Ok(run_forced(forced, &mut sets[r % sets_n])?))?.0);
            }
        }
        let clock = sm_clock_mhz();
        // After the timed rounds: set 0 again from zeroed outputs, by our plan, cuBLAS and each
        // forced variant timed, against float64 at sampled positions (LinearCheck).
        let reference = LinearCheck::new(&a0, &b0, m, n, k);
        let mut worst = 0.0f64;
        for forced in std::iter::once(&problem).chain(arrangements.iter().take(forced_variants)) {
            stream.memset_zeros(&mut sets[0].d_ours)?;
            run_forced(forced, &mut sets[0])?;
            let error = reference.worst(&stream, &sets[0].d_ours)?;
            let variant = (forced.consumers, forced.tile_width, forced.clusters);
            assert!(error <= 1.0, "{m}×{n}×{k} {variant:?}: |error| reaches {error:.2} × the tolerance");
            worst = worst.max(error);
        }
        stream.memset_zeros(&mut sets[0].d_blas)?;
        run_blas(&mut sets[0])?;
        let blas_error = reference.worst(&stream, &sets[0].d_blas)?;
        let ours_tf = flops / median(&mut t_ours) / 1e12;
        let blas_tf = flops / median(&mut t_blas) / 1e12;
        let ratio = ours_tf / blas_tf;
        let (gpu_us, issue_us) = (flops / ours_tf / 1e6, median(&mut issue_ours) * 1e6);
        let issue_blas_us = median(&mut issue_blas) * 1e6;
        // Not timed (clusters off): NaN.
        let [coop_tf, pingpong_tf, narrow_tf, cluster_tf] =
            t_forced.map(|mut t| if t.is_empty() { f64::NAN } else { flops / median(&mut t) / 1e12 });
        println!(
            "{group:<7} {m:>6} {n:>6} {k:>6} {ours_tf:>10.1} {blas_tf:>10.1} {ratio:>7.3} {clock:>6} {worst:>5.2}/{blas_error:<4.2} \
             {gpu_us:>8.1} {issue_us:>7.1} {issue_blas_us:>7.1} {coop_tf:>8.1} {pingpong_tf:>8.1} {narrow_tf:>8.1} {cluster_tf:>8.1}"
        );
        rows.push((group, m, n, k, ours_tf, blas_tf, ratio, clock));
    }
    let of_group = |g: &str| geomean(rows.iter().filter(|x| x.0 == g).map(|x| x.6));
    println!(
        "geomean ratio: square {:.3}, llm {:.3}, wave {:.3}",
        of_group("square"),
        of_group("llm"),
        of_group("wave")
    );
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let mut csv = String::from("group,m,n,k,warpforge_tflops,cublas_tflops,ratio,sm_mhz\n");
    for r in &rows {
        csv.push_str(&format!("{},{},{},{},{:.1},{:.1},{:.4},{}\n", r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7));
    }
    std::fs::write(format!("{out}/gemm_bf16.csv"), csv)?;
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar { label: format!("{}×{}×{}", r.1, r.2, r.3), ratio: r.6, section: String::new() })
        .collect();
    std::fs::write(format!("{out}/gemm_bf16.svg"), ratio_svg("warpforge bf16 GEMM ÷ cuBLAS (H200)", &bars, 28.0))?;
    Ok(())
}
