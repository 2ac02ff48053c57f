//! The soak test: one `Warpforge` shared (`Arc`) by 16 threads, each calling it on its own
//! stream or on one of 4 shared streams, with random GEMMs (every type pair, shapes from decode
//! rows to ~1000, batches, epilogues), fused SwiGLUs, `silu_mul` and `saxpy` for
//! `WARPFORGE_SOAK_SECONDS` (default 20), every result verified against float64 (large GEMMs at
//! samples and their edges). Then the per-thread streams are dropped, everything synchronised,
//! and device memory and the stream-K workspace cache must be back near where they started:
//! calls leak neither buffers nor cache entries, and concurrent use of one service from many
//! threads and streams computes what one thread would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;
use half::{bf16, f16};
use warpforge::gemm::MAX_CACHED_STREAMS;
use warpforge::{Activation, GemmProblem, Layout, SwigluProblem, Warpforge};

use crate::common::gemm::{Case, Views, try_case_on};
use crate::common::{EPS_F32, Element, gpu, mix, random_f32};
use crate::gpu_gemm_swiglu::{SILU_APPROX, Weights, nonzero, silu};

/// Threads calling the shared service.
const THREADS: usize = 16;
/// Streams every thread may also use.
const SHARED_STREAMS: usize = 4;
/// Device memory the run may leave behind (pool rounding, one evicted stream's workspace).
const MEMORY_TOLERANCE: usize = 256 << 20;
/// The kinds of call, in the order of the counts printed.
const KINDS: [&str; 4] = ["gemm", "swiglu", "silu_mul", "saxpy"];

/// Free device memory, bytes, with device 0's context bound to this thread.
fn free_memory() -> usize {
    gpu().0.context().bind_to_thread().unwrap();
    cudarc::driver::result::mem_get_info().unwrap().0
}

/// A random GEMM case from `r`: decode rows (the skinny path), small and medium shapes, both
/// layouts, padded pitches, batches and every epilogue term.
fn gemm_case(r: u64) -> Case {
    let pick = |salt: u64, below: u64| (mix(r ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) % below) as usize;
    let m = [1 + pick(1, 8), 1 + pick(2, 300), 128 + pick(3, 900)][pick(4, 3)];
    let (n, k, batch) = (1 + pick(5, 1024), [8 * (1 + pick(6, 128)), 1 + pick(7, 1500)][pick(8, 2)], 1 + pick(9, 2));
    let layout = |salt| if pick(salt, 4) == 0 { Layout::ColMajor } else { Layout::RowMajor };
    let beta = [0.0, 0.5][pick(12, 2)];
    let activations = [Activation::None, Activation::Relu, Activation::Silu, Activation::GeluTanh];
    let c_in_place = beta != 0.0 && pick(16, 3) == 0;
    let pads = [[0, 0, 0, 0], [8, 8, 8, 8], [3, 0, 1, 5]][pick(13, 3)];
    Case {
        a_layout: layout(10),
        b_layout: if layout(11) == Layout::RowMajor { Layout::ColMajor } else { Layout::RowMajor },
        // In place, C is D: its pitch must be D's (or 0).
        pads: if c_in_place { [pads[0], pads[1], 0, pads[3]] } else { pads },
        alpha: [1.0, -0.75][pick(14, 2)],
        beta,
        with_c: beta != 0.0 || pick(15, 2) == 0,
        c_in_place,
        with_bias: pick(17, 2) == 0,
        activation: activations[pick(18, 4)],
        seed: r,
        ..Case::plain(m, n, k, batch)
    }
}

/// One random call of kind `kind` through `wf` on `stream`, verified; panics on a wrong result.
fn call(wf: &Warpforge, stream: &Arc<CudaStream>, kind: usize, r: u64, weights: &Weights<bf16>) {
    match kind {
        0 => {
            let case = gemm_case(r);
            let views = Views::default();
            let result = match r % 6 {
                0 => try_case_on::<bf16, bf16>(wf, stream, &case, &views),
                1 => try_case_on::<bf16, f16>(wf, stream, &case, &views),
                2 => try_case_on::<bf16, f32>(wf, stream, &case, &views),
                3 => try_case_on::<f16, bf16>(wf, stream, &case, &views),
                4 => try_case_on::<f16, f16>(wf, stream, &case, &views),
                _ => try_case_on::<f16, f32>(wf, stream, &case, &views),
            };
            result.unwrap_or_else(|e| panic!("{case:?}: {e}"));
        }
        1 => {
            let (m, h, i) = (1 + (mix(r) % 300) as usize, weights.hidden, weights.intermediate);
            let x: Vec<bf16> = nonzero(r, m * h, 1.0);
            let dx = stream.clone_htod(&x).unwrap();
            let mut out = stream.alloc_zeros::<bf16>(m * i).unwrap();
            wf.swiglu(stream, &SwigluProblem::new(m, h, i), &dx, &weights.gate_up, &mut out).unwrap();
            let got = stream.clone_dtoh(&out).unwrap();
            let x: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
            // Sampled: 256 elements and the last one.
            for t in (0..256).map(|s| (mix(r ^ s) % (m * i) as u64) as usize).chain([m * i - 1]) {
                let (want, tol) = weights.expect(&x, t / i, t % i);
                let value = got[t].to_f64();
                assert!((value - want).abs() <= tol, "swiglu {m}×{h}×{i}: out[{t}] = {value}, want {want} ± {tol:.3e}");
            }
        }
        2 => {
            let (m, i) = (1 + (mix(r) % 64) as usize, 1 + (mix(r ^ 1) % 2048) as usize);
            let h: Vec<f16> = nonzero(r, 2 * m * i, 4.0);
            let dh = stream.clone_htod(&h).unwrap();
            let mut out = stream.alloc_zeros::<f16>(m * i).unwrap();
            wf.silu_mul(stream, m, i, &dh, &mut out).unwrap();
            for (t, v) in stream.clone_dtoh(&out).unwrap().into_iter().enumerate() {
                let (g, u) = (h[2 * (t / i) * i + t % i].f64(), h[(2 * (t / i) + 1) * i + t % i].f64());
                let want = silu(g) * u;
                let tol = 1.01 * f16::EPS * want.abs() + SILU_APPROX * (2.0 + g.abs()) * want.abs() + f16::ABS_FLOOR;
                assert!((v.f64() - want).abs() <= tol, "silu_mul {m}×{i}: out[{t}] = {v}, want {want}");
            }
        }
        _ => {
            let n = 1 + (mix(r) % 200_000) as usize;
            let (x, y) = (random_f32(r, n, 1.0), random_f32(r ^ 1, n, 1.0));
            let dx = stream.clone_htod(&x).unwrap();
            let mut dy = stream.clone_htod(&y).unwrap();
            wf.saxpy(stream, 1.5, &dx, &mut dy).unwrap();
            for (t, v) in stream.clone_dtoh(&dy).unwrap().into_iter().enumerate() {
                let want = 1.5 * x[t] as f64 + y[t] as f64;
                assert!((v as f64 - want).abs() <= 4.0 * EPS_F32 * 3.0, "saxpy n={n}: y[{t}] = {v}, want {want}");
            }
        }
    }
}

/// Sixteen threads on one service for `WARPFORGE_SOAK_SECONDS`: every result right, and no
/// device memory or workspace-cache entry left behind once their streams are gone.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_soak_shared_service_many_streams_verified_and_leak_free() {
    let seconds = std::env::var("WARPFORGE_SOAK_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20u64);
    let (device, _) = gpu();
    let ctx = device.context();
    // A service of its own: the shared one's workspace cache also sees other tests' streams.
    let wf = Arc::new(Warpforge::new(device).unwrap());
    let shared: Vec<Arc<CudaStream>> = (0..SHARED_STREAMS).map(|_| ctx.new_stream().unwrap()).collect();
    for s in &shared {
        wf.reserve_gemm_workspace(s).unwrap();
    }
    // Weights (one per thread, made up front) and a warm-up call of each kind, before the baseline.
    let weights: Vec<Weights<bf16>> =
        (0..THREADS).map(|t| Weights::random(t as u64, 64 + 97 * t, 128 + 64 * (t % 5))).collect();
    for kind in 0..KINDS.len() {
        call(&wf, &shared[0], kind, kind as u64, &weights[0]);
    }
    device.stream().synchronize().unwrap();
    shared.iter().for_each(|s| s.synchronize().unwrap());
    let (free_before, cached_before) = (free_memory(), wf.gemm_workspace_streams().unwrap());

    let (stop, counts) = (AtomicBool::new(false), [(); 4].map(|_| AtomicUsize::new(0)));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (wf, shared, weights, stop, counts) = (&wf, &shared, &weights[t], &stop, &counts);
                scope.spawn(move || {
                    ctx.bind_to_thread().unwrap();
                    let own = ctx.new_stream().unwrap();
                    let mut r = mix(t as u64 + 1);
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        r = mix(r);
                        let stream =
                            if r.is_multiple_of(2) { &own } else { &shared[(r >> 8) as usize % SHARED_STREAMS] };
                        let kind = [0, 0, 0, 1, 2, 3][(r >> 16) as usize % 6];
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            call(wf, stream, kind, r, weights);
                        }));
                        if let Err(panic) = run {
                            stop.store(true, Ordering::Relaxed);
                            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
                            return Some(format!("thread {t}, {}: {message}", KINDS[kind]));
                        }
                        counts[kind].fetch_add(1, Ordering::Relaxed);
                    }
                    own.synchronize().unwrap();
                    None
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().unwrap()).collect()
    });
    shared.iter().for_each(|s| s.synchronize().unwrap());
    // A stream-K call on a new stream drops the cache entries of streams only the cache holds.
    let last = ctx.new_stream().unwrap();
    wf.reserve_gemm_workspace(&last).unwrap();
    last.synchronize().unwrap();
    drop(last);
    device.stream().synchronize().unwrap();
    let (free_after, cached_after) = (free_memory(), wf.gemm_workspace_streams().unwrap());

    let counts = counts.map(|c| c.into_inner());
    let calls: usize = counts.iter().sum();
    println!("soak: {seconds} s, {THREADS} threads, {SHARED_STREAMS} shared streams: {calls} calls verified");
    for (kind, count) in KINDS.iter().zip(counts) {
        println!("    {kind}: {count}");
    }
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!("free device memory: {:.1} MiB before, {:.1} MiB after", mib(free_before), mib(free_after));
    println!("workspace-cache streams: {cached_before} before, {cached_after} after (at most {MAX_CACHED_STREAMS})");
    assert!(failures.is_empty(), "{} threads failed: {failures:#?}", failures.len());
    assert!(calls >= THREADS, "only {calls} calls in {seconds} s");
    let grown = free_before.saturating_sub(free_after);
    assert!(grown <= MEMORY_TOLERANCE, "{:.1} MiB of device memory not returned", mib(grown));
    assert!(cached_after <= cached_before + 1, "workspace-cache entries left: {cached_before} → {cached_after}");
    assert!(wf.gemm_plan::<bf16, bf16>(&GemmProblem::new(128, 256, 64)).is_ok());
}
