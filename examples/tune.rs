//! Tunes warpforge's GEMM plan table on this GPU: every candidate plan of every shape bucket
//! (`warpforge::gemm::tuned`) timed on the bucket's shapes, each result checked against a
//! float64 dot product, and the table written for `Warpforge::set_plan_table` or to ship in
//! `src/gemm/tuned/`.
//!
//! Run on the GPU: `cargo run --release --example tune -- [out=<path>] [m=<lo>..<hi>] [list]`.
//! `out`: where the table goes (default `$OUT/gemm_plans.tsv`, else `./gemm_plans.tsv`; written
//! again after every bucket). `m=lo..hi`: only the M classes `lo..hi` (`2^(i−1) < M ≤ 2^i`).
//! `resume=<path>`: start from that table (measured on this device) and tune only the buckets
//! it lacks.
//! `list`: print the buckets, shapes and candidates, then exit (no GPU).
//!
//! Per shape: the linear layer `D (M×N) = A (M×K) · B (N×K)ᵀ`, bf16 in and out, both operands
//! cut from one pool of random uniform(-1, 1) values (never zero) and rotated through enough
//! sets that L2 cannot hold them. Candidates that plan the same launch on every shape of a
//! bucket are timed once. Each distinct candidate: a warm-up call, a probe that sizes its
//! batches (about [`BATCH_SECONDS`] of GPU time), then [`ROUNDS`] rounds of one batch per
//! candidate, the candidate order rotating per round; the median per call is kept. Afterwards
//! each candidate runs once more into an output filled with NaN and is checked at 98 positions
//! against float64 (`LinearCheck`): a candidate that fails anywhere is never written as a plan
//! (`choose_entry`), however fast. The model's plan (the table switched off) is a candidate too,
//! and a measured plan replaces it only when it is `MIN_GAIN` faster over the bucket.

#[allow(dead_code)]
#[path = "../benches/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{BatchTimer, LinearCheck, Result, median, random_pool_bf16};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};
use half::bf16;
use warpforge::gemm::tuned::{Bucket, M_CLASSES, Measurement, PlanTable, TablePlan, choose_entry};
use warpforge::{Device, Epilogue, GemmProblem, Warpforge};

/// GPU time one candidate's batch aims for.
const BATCH_SECONDS: f64 = 5e-4;
const MAX_REPS: usize = 200;
const ROUNDS: usize = 3;
/// Bytes of operands and outputs rotation must exceed (several times the L2).
const ROTATION_BYTES: usize = 256 << 20;
const MAX_SETS: usize = 8;
/// The gather kernel reads element by element: it is timed only on buckets whose shapes have at
/// most this many flops.
const GATHER_MAX_FLOPS: f64 = 2e10;

/// Where set `s` of a shape's operands lies in the pool.
struct Rotation {
    sets: usize,
    stride: usize,
    b_at: usize,
}

impl Rotation {
    fn of(m: usize, n: usize, k: usize) -> Rotation {
        let aligned = |elements: usize| elements.div_ceil(8) * 8;
        let set_bytes = 2 * (m * k + n * k + m * n);
        let sets = ROTATION_BYTES.div_ceil(set_bytes).clamp(1, MAX_SETS);
        let b_at = aligned(m * k);
        Rotation { sets, stride: b_at + aligned(n * k), b_at }
    }
}

/// A candidate's launches on one shape, as `gemm_plan` reports them: two candidates with equal
/// launches on every shape are the same plan.
type Launch = (warpforge::GemmPath, &'static str, u32, String);

fn launch_of(wf: &Warpforge, problem: &GemmProblem) -> Option<Launch> {
    let plan = wf.gemm_plan::<bf16, bf16>(problem).ok()?;
    Some((plan.path, plan.entry, plan.grid, format!("{:?}/{:?}", plan.schedule, plan.tile)))
}

/// One shape's calls on the pool.
struct Shape<'a> {
    wf: &'a Warpforge,
    stream: &'a Arc<CudaStream>,
    pool: &'a CudaSlice<bf16>,
    dims: (usize, usize, usize),
    rotation: Rotation,
    d: Vec<CudaSlice<bf16>>,
    issued: usize,
}

impl Shape<'_> {
    fn call_on(&mut self, problem: &GemmProblem, set: usize) -> Result<()> {
        let (m, n, k) = self.dims;
        let at = set * self.rotation.stride;
        let a = self.pool.slice(at..at + m * k);
        let b = self.pool.slice(at + self.rotation.b_at..at + self.rotation.b_at + n * k);
        self.wf.gemm::<bf16, bf16>(self.stream, problem, &a, &b, Epilogue::default(), &mut self.d[set])?;
        Ok(())
    }

    fn call(&mut self, problem: &GemmProblem) -> Result<()> {
        let set = self.issued % self.rotation.sets;
        self.issued += 1;
        self.call_on(problem, set)
    }
}

/// µs per call of each candidate on one shape (the candidates' problems), then whether each
/// passed the float64 check.
fn measure(
    shape: &mut Shape,
    timer: &BatchTimer,
    problems: &[GemmProblem],
    check: &LinearCheck,
) -> Result<Vec<(f64, bool)>> {
    let mut reps = Vec::new();
    for p in problems {
        shape.call(p)?;
        let probe = timer.per_call(shape.stream, 1, |_| shape.call(p))?.0;
        reps.push(((BATCH_SECONDS / probe).ceil() as usize).clamp(1, MAX_REPS));
    }
    let mut times = vec![Vec::new(); problems.len()];
    for round in 0..ROUNDS {
        for i in 0..problems.len() {
            let c = (i + round) % problems.len();
            times[c].push(timer.per_call(shape.stream, reps[c], |_| shape.call(&problems[c]))?.0);
        }
    }
    let mut out = Vec::new();
    for (c, p) in problems.iter().enumerate() {
        // NaN everywhere first (every byte 0xFF): an element the plan does not write fails the
        // check.
        fill_nan(shape.stream, &mut shape.d[0])?;
        shape.call_on(p, 0)?;
        let ok = check.worst(shape.stream, &shape.d[0])? <= 1.0;
        out.push((median(&mut times[c]) * 1e6, ok));
    }
    Ok(out)
}

/// Sets every byte of `d` to 0xFF (a NaN in bf16), ordered on `stream`.
fn fill_nan(stream: &Arc<CudaStream>, d: &mut CudaSlice<bf16>) -> Result<()> {
    let bytes = d.len() * 2;
    let (ptr, _write) = d.device_ptr_mut(stream);
    // SAFETY: `ptr` addresses the `bytes` bytes of `d`, borrowed mutably here; the write guard
    // lives until the memset is enqueued on `stream`.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, 0xff, bytes, stream.cu_stream())? };
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().find_map(|a| a.strip_prefix(name).map(str::to_string));
    let classes = match arg("m=") {
        Some(range) => {
            let (lo, hi) = range.split_once("..").ok_or("m=lo..hi")?;
            lo.parse::<u8>()?..hi.parse::<u8>()?
        }
        None => 0..M_CLASSES,
    };
    let buckets: Vec<Bucket> = Bucket::all().filter(|b| classes.contains(&b.m)).collect();
    let flops = |(m, n, k): (usize, usize, usize)| 2.0 * m as f64 * n as f64 * k as f64;
    let candidates = |b: Bucket| -> Vec<TablePlan> {
        let gather_ok = b.shapes().into_iter().all(|s| flops(s) <= GATHER_MAX_FLOPS);
        TablePlan::candidates(b).into_iter().filter(|p| *p != TablePlan::Gather || gather_ok).collect()
    };
    if args.iter().any(|a| a == "list") {
        let shapes: usize = buckets.iter().map(|b| b.shapes().len()).sum();
        for b in &buckets {
            let plans: Vec<String> = candidates(*b).iter().map(|p| p.to_string()).collect();
            println!("{b:?} shapes {:?} candidates {}", b.shapes(), plans.join(" "));
        }
        println!("{} buckets, {shapes} shapes", buckets.len());
        return Ok(());
    }
    let out = arg("out=").unwrap_or_else(|| match std::env::var("OUT") {
        Ok(dir) => format!("{dir}/gemm_plans.tsv"),
        Err(_) => "gemm_plans.tsv".into(),
    });

    let device = Device::new(0)?;
    let mut wf = Warpforge::new(&device)?;
    // The model's plans are measured as the model makes them: no table.
    wf.set_plan_table(None)?;
    let stream = device.stream().clone();
    let timer = BatchTimer::new(device.context())?;
    let attributes = device.attributes();
    let mut table = match arg("resume=") {
        Some(path) => {
            let table = PlanTable::parse(&std::fs::read_to_string(&path)?)?;
            if table.device != attributes.name || table.sms != attributes.sm_count {
                return Err(format!("{path} was measured on {} ({} SMs)", table.device, table.sms).into());
            }
            table
        }
        None => PlanTable { device: attributes.name.clone(), sms: attributes.sm_count, entries: BTreeMap::new() },
    };
    let buckets: Vec<Bucket> = buckets.into_iter().filter(|b| !table.entries.contains_key(b)).collect();
    println!("{} ({} SMs): tuning {} buckets into {out}", attributes.name, attributes.sm_count, buckets.len());

    let pool_len = buckets
        .iter()
        .flat_map(|b| b.shapes())
        .map(|(m, n, k)| {
            let r = Rotation::of(m, n, k);
            r.sets * r.stride
        })
        .max()
        .unwrap_or(0);
    let host = random_pool_bf16(pool_len);
    let pool = stream.clone_htod(&host)?;

    let started = std::time::Instant::now();
    for bucket in buckets {
        let shapes = bucket.shapes();
        let plans = candidates(bucket);
        let problems_of = |plan: TablePlan| -> Vec<GemmProblem> {
            shapes.iter().map(|&(m, n, k)| plan.apply(&GemmProblem::new(m, n, k))).collect()
        };
        // Distinct candidates: those every shape can run, by their launches.
        let mut distinct: Vec<(TablePlan, Vec<Launch>)> = Vec::new();
        let mut same_as: Vec<(TablePlan, usize)> = Vec::new();
        for plan in plans {
            let launches: Option<Vec<Launch>> = problems_of(plan).iter().map(|p| launch_of(&wf, p)).collect();
            let Some(launches) = launches else { continue };
            match distinct.iter().position(|(_, l)| *l == launches) {
                Some(i) => same_as.push((plan, i)),
                None => distinct.push((plan, launches)),
            }
        }
        let model_plans = shapes
            .iter()
            .map(|&(m, n, k)| Ok(TablePlan::of(&wf.gemm_plan::<bf16, bf16>(&GemmProblem::new(m, n, k))?)))
            .collect::<Result<Vec<_>>>()?;
        let mut times = vec![vec![None; shapes.len()]; distinct.len()];
        let mut verified = vec![true; distinct.len()];
        for (s, &(m, n, k)) in shapes.iter().enumerate() {
            let rotation = Rotation::of(m, n, k);
            let d =
                (0..rotation.sets).map(|_| stream.alloc_zeros::<bf16>(m * n)).collect::<std::result::Result<_, _>>()?;
            let check = LinearCheck::new(&host[..m * k], &host[rotation.b_at..][..n * k], m, n, k);
            let mut shape = Shape { wf: &wf, stream: &stream, pool: &pool, dims: (m, n, k), rotation, d, issued: 0 };
            let problems: Vec<GemmProblem> = distinct.iter().map(|(plan, _)| problems_of(*plan)[s]).collect();
            for (c, (us, ok)) in measure(&mut shape, &timer, &problems, &check)?.into_iter().enumerate() {
                times[c][s] = Some(us);
                verified[c] &= ok;
                if !ok {
                    println!("  {} on {m}×{n}×{k}: FAILED the float64 check", distinct[c].0);
                }
            }
        }
        let mut measurements: Vec<Measurement> = distinct
            .iter()
            .enumerate()
            .map(|(c, (plan, _))| Measurement { plan: *plan, times_us: times[c].clone(), verified: verified[c] })
            .collect();
        let copies: Vec<Measurement> =
            same_as.iter().map(|&(plan, i)| Measurement { plan, ..measurements[i].clone() }).collect();
        measurements.extend(copies);
        let entry = choose_entry(bucket, &measurements, model_plans)?;
        println!(
            "{bucket:?} {} shapes, {} distinct plans: model {:.2} µs, {} {:.2} µs ({:.3}×) [{:.0} s]",
            shapes.len(),
            distinct.len(),
            entry.model_us,
            entry.plan,
            entry.plan_us,
            entry.model_us / entry.plan_us,
            started.elapsed().as_secs_f64()
        );
        table.entries.insert(bucket, entry);
        std::fs::write(&out, table.to_text())?;
    }
    // What was written reads back.
    PlanTable::parse(&std::fs::read_to_string(&out)?)?;
    let changed = table.entries.values().filter(|e| e.plan != TablePlan::Model).count();
    let gain =
        table.entries.values().map(|e| (e.model_us / e.plan_us).ln()).sum::<f64>() / table.entries.len().max(1) as f64;
    println!(
        "{} buckets, {changed} with a measured plan; geomean gain over the model {:.3}×",
        table.entries.len(),
        gain.exp()
    );
    Ok(())
}
