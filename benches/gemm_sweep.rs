//! warpforge's bf16 GEMM against cuBLAS over a sweep of shapes: the linear layers of ten
//! open-weight model families at decode and prefill token counts, and seeded random shapes at
//! the edges (`gemm_sweep/shapes.rs` holds the table and how the subset is drawn).
//!
//! `D (M×N, bf16) = A (M×K, row-major) · B (N×K, row-major)ᵀ`, f32 accumulation, as in
//! `gemm_bf16`: both libraries read the operands in place on the same buffers, in one process.
//! Every operand is a slice of one pool of random uniform(-1, 1) values (never zero) uploaded
//! once, so a row costs no host generation; each row rotates through enough operand sets (and
//! output buffers) that L2 cannot hold them, sized as `gemm_bf16` sizes its sets. Per row: two
//! untimed calls of each side, one timed call to size the batches (`reps` calls of about
//! [`ROUND_SECONDS`] of GPU time), one untimed round, then rounds of `ours × reps` and
//! `cuBLAS × reps` timed with CUDA events, the order alternating per round (9 rounds, 5 for
//! calls over a millisecond); the medians are reported. After timing, both results of set 0
//! are checked against a float64 dot product at 64 random (i, j), 16 positions of the last row
//! and of the last column, and both corners.
//!
//! Columns: ours and cuBLAS µs per call, ratio cuBLAS ÷ ours (≥ 1: warpforge is faster), our
//! TFLOP/s and GB/s (bytes 2·(M·K + N·K + M·N)), our host time to issue a call (µs; when it
//! reaches our GPU time, the row times the host), and the check: the worst |error| ÷ tolerance
//! of ours and of cuBLAS. The SM clock is read every [`CLOCK_EVERY`] rows (nvidia-smi takes tens
//! of milliseconds a read).
//!
//! Run: `cargo bench --bench kernels -- gemm_sweep` (on a GPU machine: `.gpu/bench gemm_sweep`). Arguments:
//! `list` (print the shapes and an estimate of the run time, then exit; needs no GPU), `quick`
//! (about 30 rows across every regime), `filter=<substring>` (only groups containing it, e.g.
//! `filter=Llama`, `filter=random`), `shape=MxNxK[,MxNxK…]` (only those shapes). Writes `gemm_sweep.csv` and `gemm_sweep.svg` to `$OUT` (or
//! the current directory). Exits non-zero, after writing both, when a row errors or our result
//! fails its check (cuBLAS outside the tolerance is reported only).

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use warpforge::{Epilogue, GemmProblem, Warpforge};

mod shapes;
use crate::common::{
    Bar, BatchTimer, Bench, LinearCheck, Result, geomean, linear_layer_config, median, random_pool_bf16, ratio_svg,
    sm_clock_mhz,
};
use shapes::{REGIMES, Shape};

/// Bytes of operands and outputs that rotation must exceed (about 4× the H200's L2).
const ROTATION_BYTES: usize = 256 << 20;
const MAX_SETS: usize = 8;
/// GPU time one side's batch aims for in a round.
const ROUND_SECONDS: f64 = 1e-3;
const MAX_REPS: usize = 500;
/// Rounds for calls up to [`LONG_CALL_SECONDS`], and for longer ones (whose batches are one
/// call and already long).
const ROUNDS: usize = 9;
const ROUNDS_LONG: usize = 5;
const LONG_CALL_SECONDS: f64 = 1e-3;
/// Rows between SM-clock reads.
const CLOCK_EVERY: usize = 25;
/// Ratio below which a row counts as a clear loss in the summary.
const LOSS_RATIO: f64 = 0.85;
/// The `list` estimate's model of a row: H200 dense bf16 and HBM rates reached, our host time
/// to issue a call, and the host work per row (allocation, the check's copies).
const EST_FLOPS: f64 = 600e12;
const EST_BYTES_PER_S: f64 = 4e12;
const EST_ISSUE_S: f64 = 8e-6;
const EST_ROW_OVERHEAD_S: f64 = 0.012;

/// Which library a call runs.
#[derive(Clone, Copy)]
enum Side {
    Ours,
    Cublas,
}

/// Where a shape's operand sets lie in the pool: set `s` reads A at `s·stride` and B at
/// `s·stride + b_at`, both 16-byte aligned, so that TMA reads them in place whenever K allows.
struct Rotation {
    sets: usize,
    stride: usize,
    b_at: usize,
}

impl Rotation {
    fn of(s: &Shape) -> Rotation {
        let aligned = |elements: usize| elements.div_ceil(8) * 8;
        let set_bytes = 2 * (s.m * s.k + s.n * s.k + 2 * s.m * s.n);
        let sets = ROTATION_BYTES.div_ceil(set_bytes).clamp(1, MAX_SETS);
        let b_at = aligned(s.m * s.k);
        Rotation { sets, stride: b_at + aligned(s.n * s.k), b_at }
    }
    fn pool_len(&self) -> usize {
        self.sets * self.stride
    }
}

/// The random values every operand is cut from: a host copy (for the float64 check) and the
/// device copy.
struct Pool {
    host: Vec<bf16>,
    device: CudaSlice<bf16>,
}

impl Pool {
    /// `len` values from [`random_pool_bf16`] (every core), uploaded.
    fn new(stream: &Arc<CudaStream>, len: usize) -> Result<Pool> {
        let host = random_pool_bf16(len);
        let device = stream.clone_htod(&host)?;
        Ok(Pool { host, device })
    }
}

/// One shape's calls: the problem as each library takes it, the pool and the output sets.
struct Calls<'a> {
    wf: &'a Warpforge,
    stream: &'a Arc<CudaStream>,
    blas: &'a CudaBlas,
    pool: &'a Pool,
    shape: &'a Shape,
    problem: GemmProblem,
    config: GemmConfig<bf16>,
    rotation: Rotation,
    d_ours: Vec<CudaSlice<bf16>>,
    d_blas: Vec<CudaSlice<bf16>>,
    /// Calls issued per side, which picks the next set.
    issued: [usize; 2],
}

impl<'a> Calls<'a> {
    fn new(
        wf: &'a Warpforge,
        stream: &'a Arc<CudaStream>,
        blas: &'a CudaBlas,
        pool: &'a Pool,
        shape: &'a Shape,
    ) -> Result<Calls<'a>> {
        let Shape { m, n, k, .. } = *shape;
        let rotation = Rotation::of(shape);
        let outputs =
            || (0..rotation.sets).map(|_| stream.alloc_zeros::<bf16>(m * n)).collect::<std::result::Result<_, _>>();
        let (d_ours, d_blas) = (outputs()?, outputs()?);
        let problem = GemmProblem::new(m, n, k);
        let config = linear_layer_config(m, n, k);
        Ok(Calls { wf, stream, blas, pool, shape, problem, config, rotation, d_ours, d_blas, issued: [0; 2] })
    }

    /// One call of `side` on set `set`.
    fn call_on(&mut self, side: Side, set: usize) -> Result<()> {
        let (m, n, k) = (self.shape.m, self.shape.n, self.shape.k);
        let at = set * self.rotation.stride;
        let a = self.pool.device.slice(at..at + m * k);
        let b = self.pool.device.slice(at + self.rotation.b_at..at + self.rotation.b_at + n * k);
        match side {
            Side::Ours => {
                let d = &mut self.d_ours[set];
                self.wf.gemm::<bf16, bf16>(self.stream, &self.problem, &a, &b, Epilogue::default(), d)?;
            }
            // SAFETY: cuBLAS reads B (n×k) and A (m×k) and writes D (m×n): the lengths sliced
            // and allocated above.
            Side::Cublas => unsafe { self.blas.gemm(self.config, &b, &a, &mut self.d_blas[set])? },
        }
        Ok(())
    }

    /// One call of `side` on the next set of its rotation.
    fn call(&mut self, side: Side) -> Result<()> {
        let set = self.issued[side as usize] % self.rotation.sets;
        self.issued[side as usize] += 1;
        self.call_on(side, set)
    }

    /// GPU and host-issue seconds per call of a batch of `reps` calls of `side`.
    fn time(&mut self, timer: &BatchTimer, side: Side, reps: usize) -> Result<(f64, f64)> {
        let stream = self.stream;
        timer.per_call(stream, reps, |_| self.call(side))
    }
}

/// One measured row.
struct Row {
    shape: Shape,
    ours_s: f64,
    blas_s: f64,
    issue_s: f64,
    reps: usize,
    rounds: usize,
    sets: usize,
    /// Worst |error| ÷ tolerance over the checked positions: ours, cuBLAS.
    check: [f64; 2],
    clock: String,
    /// Our kernel: the plan's path, and the wgmma path's schedule.
    kernel: String,
}

impl Row {
    /// cuBLAS time ÷ ours.
    fn ratio(&self) -> f64 {
        self.blas_s / self.ours_s
    }
    /// The row's values, one per [`COLUMNS`] entry.
    fn cells(&self) -> [String; COLUMNS.len()] {
        let s = &self.shape;
        [
            s.group.clone(),
            s.regime().into(),
            s.m.to_string(),
            s.n.to_string(),
            s.k.to_string(),
            format!("{:.2}", self.ours_s * 1e6),
            format!("{:.2}", self.blas_s * 1e6),
            format!("{:.3}", self.ratio()),
            format!("{:.1}", s.flops() / self.ours_s / 1e12),
            format!("{:.0}", s.bytes() / self.ours_s / 1e9),
            format!("{:.2}", self.issue_s * 1e6),
            self.sets.to_string(),
            self.reps.to_string(),
            self.rounds.to_string(),
            format!("{:.2}", self.check[0]),
            format!("{:.2}", self.check[1]),
            self.status().into(),
            self.clock.clone(),
            self.kernel.clone(),
        ]
    }
    fn status(&self) -> &'static str {
        match self.check.map(|c| c <= 1.0) {
            [true, true] => "ok",
            [false, true] => "FAIL ours",
            [true, false] => "FAIL cuBLAS",
            [false, false] => "FAIL both",
        }
    }
}

/// The columns of a row: (CSV name, table header, table width); the table leaves out those of
/// width 0 and aligns the text ones (group, status) left.
const COLUMNS: [(&str, &str, usize); 19] = [
    ("group", "group", 34),
    ("regime", "", 0),
    ("m", "M", 6),
    ("n", "N", 6),
    ("k", "K", 6),
    ("ours_us", "ours µs", 9),
    ("cublas_us", "cuBLAS µs", 9),
    ("ratio", "ratio", 6),
    ("ours_tflops", "TF/s", 7),
    ("ours_gbps", "GB/s", 7),
    ("ours_issue_us", "issue", 7),
    ("sets", "", 0),
    ("reps", "", 0),
    ("rounds", "", 0),
    ("check_ours", "ours", 5),
    ("check_cublas", "cuBL", 5),
    ("status", "check", 11),
    ("sm_mhz", "", 0),
    ("kernel", "kernel", 12),
];

/// A table line of `cells`, one per [`COLUMNS`] entry.
fn table_line(cells: &[String]) -> String {
    let shown = cells.iter().zip(&COLUMNS).filter(|(_, c)| c.2 > 0);
    let padded = shown.map(|(cell, &(name, _, width))| match name {
        "group" | "status" | "kernel" => format!("{cell:<width$}"),
        _ => format!("{cell:>width$}"),
    });
    padded.collect::<Vec<_>>().join(" ")
}

/// Times one shape (see the module doc for the protocol), then checks it.
fn measure(calls: &mut Calls, timer: &BatchTimer) -> Result<Row> {
    for side in [Side::Ours, Side::Cublas, Side::Ours, Side::Cublas] {
        calls.call(side)?;
    }
    let probe = calls.time(timer, Side::Ours, 1)?.0.max(calls.time(timer, Side::Cublas, 1)?.0);
    let reps_for = |per_call: f64| ((ROUND_SECONDS / per_call).ceil() as usize).clamp(1, MAX_REPS);
    // An untimed round, which also sizes the batches again from a batch's time rather than one
    // call's (launch latency inflates the single-call probe of a tiny problem).
    let warm = reps_for(probe);
    let per_call = calls.time(timer, Side::Ours, warm)?.0.max(calls.time(timer, Side::Cublas, warm)?.0);
    let reps = reps_for(per_call);
    let rounds = if per_call > LONG_CALL_SECONDS { ROUNDS_LONG } else { ROUNDS };
    let (mut ours, mut blas, mut issue) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let order = if round % 2 == 0 { [Side::Ours, Side::Cublas] } else { [Side::Cublas, Side::Ours] };
        for side in order {
            let (gpu_s, issue_s) = calls.time(timer, side, reps)?;
            match side {
                Side::Ours => {
                    ours.push(gpu_s);
                    issue.push(issue_s);
                }
                Side::Cublas => blas.push(gpu_s),
            }
        }
    }
    Ok(Row {
        shape: calls.shape.clone(),
        ours_s: median(&mut ours),
        blas_s: median(&mut blas),
        issue_s: median(&mut issue),
        reps,
        rounds,
        sets: calls.rotation.sets,
        check: check(calls)?,
        clock: String::new(),
        kernel: kernel_of(calls)?,
    })
}

/// Which of our kernels a row runs: the plan's path, with the wgmma path's schedule.
fn kernel_of(calls: &Calls) -> Result<String> {
    let plan = calls.wf.gemm_plan::<bf16, bf16>(&calls.problem)?;
    Ok(match plan.path {
        warpforge::GemmPath::TensorCores => format!("wgmma/{:?}", plan.schedule).to_lowercase(),
        path => format!("{path:?}").to_lowercase(),
    })
}

/// Runs both sides once more on set 0 (outputs zeroed first) and compares each with a float64
/// dot product at the sampled positions ([`common::LinearCheck`]); returns the worst
/// |error| ÷ tolerance of each.
fn check(calls: &mut Calls) -> Result<[f64; 2]> {
    let Shape { m, n, k, .. } = *calls.shape;
    calls.stream.memset_zeros(&mut calls.d_ours[0])?;
    calls.stream.memset_zeros(&mut calls.d_blas[0])?;
    calls.call_on(Side::Ours, 0)?;
    calls.call_on(Side::Cublas, 0)?;
    let (a, b) = (&calls.pool.host[..m * k], &calls.pool.host[calls.rotation.b_at..][..n * k]);
    let reference = LinearCheck::new(a, b, m, n, k);
    Ok([reference.worst(calls.stream, &calls.d_ours[0])?, reference.worst(calls.stream, &calls.d_blas[0])?])
}

/// The `list` estimate of one row's wall time, from the `EST_*` model and the protocol above.
fn estimated_seconds(s: &Shape) -> f64 {
    let gpu = (s.flops() / EST_FLOPS).max(s.bytes() / EST_BYTES_PER_S);
    let per_call = gpu.max(EST_ISSUE_S);
    let reps = ((ROUND_SECONDS / gpu).ceil() as usize).clamp(1, MAX_REPS);
    let rounds = if gpu > LONG_CALL_SECONDS { ROUNDS_LONG } else { ROUNDS };
    let calls = 4 + 2 + 2 * reps + 2 * rounds * reps + 2;
    calls as f64 * per_call + EST_ROW_OVERHEAD_S
}

/// Prints the rows a run would time, their counts by regime and by family, and the estimate.
fn list(rows: &[Shape]) {
    println!("{:>4} {:<34} {:>6} {:>6} {:>6} {:<15} {:>8}", "#", "group", "M", "N", "K", "regime", "est ms");
    for (i, s) in rows.iter().enumerate() {
        let est = estimated_seconds(s) * 1e3;
        println!("{i:>4} {:<34} {:>6} {:>6} {:>6} {:<15} {est:>8.1}", s.group, s.m, s.n, s.k, s.regime());
    }
    let mut by_regime: BTreeMap<(bool, &str), usize> = BTreeMap::new();
    let mut by_family: BTreeMap<&str, usize> = BTreeMap::new();
    for s in rows {
        *by_regime.entry((s.is_model(), s.regime())).or_default() += 1;
        *by_family.entry(s.group.split('/').next().unwrap_or("")).or_default() += 1;
    }
    let models = rows.iter().filter(|s| s.is_model()).count();
    println!("{} rows: {models} model projections, {} edge and random", rows.len(), rows.len() - models);
    for ((model, regime), count) in by_regime {
        println!("  {:<7} {regime:<15} {count:>4}", if model { "model" } else { "other" });
    }
    for (family, count) in by_family {
        println!("  {family:<18} {count:>4}");
    }
    let pool_gib =
        rows.iter().map(|s| Rotation::of(s).pool_len()).max().unwrap_or(0) as f64 * 2.0 / (1u64 << 30) as f64;
    let total: f64 = rows.iter().map(estimated_seconds).sum();
    println!(
        "estimated run time {total:.0} s (model: {EST_FLOPS:.0e} flop/s, {EST_BYTES_PER_S:.0e} B/s); pool {pool_gib:.2} GiB"
    );
}

pub fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let filter = args.iter().find_map(|a| a.strip_prefix("filter="));
    let all = shapes::sweep();
    shapes::check(&all);
    let mut rows = shapes::select(all, quick, filter);
    // `shape=MxNxK[,MxNxK…]`: only those shapes (for a profiler, or a row studied alone).
    if let Some(list) = args.iter().find_map(|a| a.strip_prefix("shape=")) {
        rows = list
            .split(',')
            .map(|dims| {
                let v: Vec<usize> = dims.split('x').filter_map(|d| d.parse().ok()).collect();
                match v.as_slice() {
                    &[m, n, k] if m > 0 && n > 0 && k > 0 => Ok(Shape { group: "shape/arg".into(), m, n, k }),
                    _ => Err(format!("shape={dims}: expected MxNxK, each ≥ 1")),
                }
            })
            .collect::<std::result::Result<_, _>>()?;
    }
    if args.iter().any(|a| a == "list") {
        list(&rows);
        return Ok(());
    }
    let Some(Bench { device, wf, stream, blas, timer }) = Bench::open("gemm_sweep")? else {
        return Ok(());
    };
    let mut version = 0;
    // SAFETY: the handle is live (owned by `blas`) and `version` is a valid out-pointer.
    unsafe { cudarc::cublas::sys::cublasGetVersion_v2(*blas.handle(), &mut version) }.result()?;
    let cublas = format!("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
    let gpu = device.attributes().name.clone();
    println!(
        "{gpu} — warpforge bf16 GEMM vs cuBLAS {cublas} ({version}), bf16 in/out, f32 accumulate; SM clock {} MHz; {} shapes",
        sm_clock_mhz(),
        rows.len()
    );
    let pool_len = rows.iter().map(|s| Rotation::of(s).pool_len()).max().unwrap_or(0);
    let pool = Pool::new(&stream, pool_len)?;
    println!("{}", table_line(&COLUMNS.map(|c| c.1.to_string())));
    let (mut measured, mut errors): (Vec<Row>, usize) = (Vec::new(), 0);
    let mut clock = sm_clock_mhz();
    for (i, shape) in rows.iter().enumerate() {
        if i > 0 && i % CLOCK_EVERY == 0 {
            clock = sm_clock_mhz();
            println!("-- SM clock {clock} MHz");
        }
        // A row that errors is reported and counted, and the sweep goes on (a sticky CUDA
        // error then fails every later row too, which the log makes plain).
        match Calls::new(&wf, &stream, &blas, &pool, shape).and_then(|mut calls| measure(&mut calls, &timer)) {
            Ok(mut row) => {
                row.clock = clock.clone();
                println!("{}", table_line(&row.cells()));
                measured.push(row);
            }
            Err(e) => {
                println!("{} {}×{}×{}: ERROR {e}", shape.group, shape.m, shape.n, shape.k);
                errors += 1;
            }
        }
    }
    println!("-- SM clock {} MHz", sm_clock_mhz());
    summary(&measured);
    write_outputs(&measured, &format!("{gpu}, cuBLAS {cublas}"))?;
    // cuBLAS outside the tolerance is reported, not failed: it says the tolerance's model does
    // not fit cuBLAS's reduction, not that warpforge is wrong.
    let failed = measured.iter().filter(|r| r.check[0] > 1.0).count();
    if failed + errors > 0 {
        return Err(format!("{failed} rows failed the float64 check, {errors} rows errored").into());
    }
    Ok(())
}

/// Geomean ratios overall, by regime and by family; the worst row; the count of clear losses.
fn summary(rows: &[Row]) {
    let Some(worst) = rows.iter().min_by(|a, b| a.ratio().total_cmp(&b.ratio())) else {
        return;
    };
    let ratio_of = |keep: &dyn Fn(&Row) -> bool| geomean(rows.iter().filter(|r| keep(r)).map(Row::ratio));
    println!(
        "geomean ratio cuBLAS ÷ ours (≥ 1: warpforge faster): all {:.3} ({} rows)",
        ratio_of(&|_| true),
        rows.len()
    );
    for regime in REGIMES {
        let count = rows.iter().filter(|r| r.shape.regime() == regime).count();
        println!("  {regime:<15} {:.3} ({count} rows)", ratio_of(&|r| r.shape.regime() == regime));
    }
    let mut families: Vec<&str> = rows.iter().map(|r| r.shape.group.split('/').next().unwrap_or("")).collect();
    families.dedup();
    for family in families {
        let prefix = format!("{family}/");
        println!("  {family:<18} {:.3}", ratio_of(&|r| r.shape.group.starts_with(&prefix)));
    }
    let mut kernels: Vec<&str> = rows.iter().map(|r| r.kernel.as_str()).collect();
    kernels.sort_unstable();
    kernels.dedup();
    for kernel in kernels {
        let count = rows.iter().filter(|r| r.kernel == kernel).count();
        println!("  kernel {kernel:<12} {:.3} ({count} rows)", ratio_of(&|r| r.kernel == kernel));
    }
    let s = &worst.shape;
    println!("min ratio {:.3} at {} {}×{}×{}", worst.ratio(), s.group, s.m, s.n, s.k);
    let losses = rows.iter().filter(|r| r.ratio() < LOSS_RATIO).count();
    let [ours, cublas] = [0, 1].map(|side| rows.iter().filter(|r| r.check[side] > 1.0).count());
    println!("{losses} rows below {LOSS_RATIO}; outside the check's tolerance: ours {ours} rows, cuBLAS {cublas}");
}

/// `gemm_sweep.csv` (one line a row) and `gemm_sweep.svg` (the ratios grouped by regime).
fn write_outputs(rows: &[Row], subtitle: &str) -> Result<()> {
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let mut csv = COLUMNS.map(|c| c.0).join(",") + "\n";
    for r in rows {
        csv.push_str(&(r.cells().join(",") + "\n"));
    }
    std::fs::write(format!("{out}/gemm_sweep.csv"), csv)?;
    let mut bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: format!("{} {}×{}×{}", r.shape.group, r.shape.m, r.shape.n, r.shape.k),
            ratio: r.ratio(),
            section: r.shape.regime().into(),
        })
        .collect();
    // Stable: within a regime, run order.
    bars.sort_by_key(|b| REGIMES.iter().position(|r| *r == b.section));
    let title = format!("cuBLAS time ÷ warpforge time, bf16 GEMM sweep ({subtitle}); ≥ 1: warpforge faster");
    std::fs::write(format!("{out}/gemm_sweep.svg"), ratio_svg(&title, &bars, 6.0))?;
    Ok(())
}
