//! The safe API's reliability promises on the GPU: buffers stay stream-ordered across streams
//! until the kernel that uses them has been enqueued, in-place accumulation (`C = D`) matches a
//! float64 reference, streams and buffers of another CUDA context are refused, and the
//! per-stream stream-K workspace cache stays bounded.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use half::bf16;
use warpforge::gemm::{GemmOutput, MAX_CACHED_STREAMS};
use warpforge::logic::schedule::stream_k::StreamKMode;
use warpforge::{
    COperand, Epilogue, Error, GemmProblem, Warpforge, abi::entries, host::KernelArgs, host::LaunchConfig,
};

use crate::common::{EPS_F32, Element, gpu, mix, random_f32};

/// Two new streams of device 0's context: cudarc's multi-stream mode, where buffers carry read
/// and write events.
fn two_streams() -> (Arc<CudaStream>, Arc<CudaStream>) {
    let (device, _) = gpu();
    let ctx = device.context();
    let streams = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    assert!(ctx.is_managing_stream_synchronization(), "multi-stream mode with event tracking");
    streams
}

/// Enqueues about 10 ms of unrelated GEMMs on `stream` (8 × 8192³ bf16) and returns their
/// buffers, which must outlive the work.
fn busy(wf: &Warpforge, stream: &Arc<CudaStream>) -> Vec<CudaSlice<bf16>> {
    const SIDE: usize = 8192;
    let a = stream.alloc_zeros::<bf16>(SIDE * SIDE).unwrap();
    let b = stream.alloc_zeros::<bf16>(SIDE * SIDE).unwrap();
    let mut d = stream.alloc_zeros::<bf16>(SIDE * SIDE).unwrap();
    let p = GemmProblem::new(SIDE, SIDE, SIDE);
    for _ in 0..8 {
        wf.gemm::<bf16, bf16>(stream, &p, &a, &b, Epilogue::default(), &mut d).unwrap();
    }
    vec![a, b, d]
}

/// `KernelArgs` records a buffer's write event when the launch has enqueued the kernel, not when
/// the address is taken. The GEMMs enqueued between the push and the launch stand for any work
/// ahead of the kernel on its stream: with the guard dropped at the push (the old
/// `push_buffer_mut`), the event fired before them and stream 2 read `y` ~10 ms before saxpy
/// wrote it (stale 2.0 everywhere). This checks the ordering cudarc's events give; it cannot
/// prove the absence of a race shorter than the GEMMs.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_second_stream_waits_for_the_launch_that_writes_a_buffer() {
    let (_, wf) = gpu();
    let (s1, s2) = two_streams();
    const N: usize = 1 << 20;
    let x = s1.clone_htod(&vec![1.0f32; N]).unwrap();
    let mut y = s1.clone_htod(&vec![2.0f32; N]).unwrap();
    let kernel = wf.module().kernel(entries::SAXPY_F32.name()).unwrap();
    let mut args = KernelArgs::new();
    args.push(N as u64).push(3.0f32).push_buffer(&x, &s1).push_buffer_mut(&mut y, &s1);
    assert_eq!(args.guards_held(), 2);
    let work = busy(wf, &s1);
    // SAFETY: (n, a, x, y) as saxpy_f32 declares; x and y hold N f32 and are distinct.
    unsafe { kernel.launch(&s1, &LaunchConfig::linear(1024, 256), args) }.unwrap();
    let seen = s2.clone_dtoh(&y).unwrap();
    assert!(seen.iter().all(|&v| v == 5.0), "stream 2 read y before saxpy wrote it: {}", seen[0]);
    s1.synchronize().unwrap();
    drop(work);
}

/// A GEMM keeps A's read guard until it is enqueued, so a write to A on another stream waits
/// for the GEMM. Every tile streams A's rows over the whole K loop (one wave of 128 × 256 tiles,
/// K = 65536, about 1 ms), so an overwrite that started with the GEMM (the old code recorded
/// A's read event before the launch) zeroes K slices the GEMM has yet to read, and D falls
/// short of K. A race the copy loses still passes: the test shows the bug when the copy engine
/// overlaps the GEMM, which it does on an idle H200, but cannot prove the ordering alone.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_write_on_another_stream_waits_for_the_gemm_that_reads_it() {
    let (_, wf) = gpu();
    let (s1, s2) = two_streams();
    let (m, n, k) = (128, 256 * wf.sm_count() as usize, 65536);
    let ones = vec![bf16::ONE; m.max(n) * k];
    let mut a = s1.clone_htod(&ones[..m * k]).unwrap();
    let b = s1.clone_htod(&ones[..n * k]).unwrap();
    let mut d = s1.alloc_zeros::<f32>(m * n).unwrap();
    let p = GemmProblem::new(m, n, k);
    wf.gemm::<bf16, f32>(&s1, &p, &a, &b, Epilogue::default(), &mut d).unwrap();
    s2.memcpy_htod(&vec![bf16::ZERO; m * k], &mut a).unwrap();
    let got = s1.clone_dtoh(&d).unwrap();
    let short = got.iter().filter(|&&v| v != k as f32).count();
    assert_eq!(short, 0, "{short} of {} elements read an A overwritten by stream 2", got.len());
}

/// `D = alpha·A·B + beta·D` in place against float64, on ragged, batched, direct-store and
/// stream-K shapes.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn in_place_accumulation_matches_a_float64_reference() {
    let (_, wf) = gpu();
    // (m, n, k, batch): ragged M and N, tiny, batched with a 16-byte pitch, and a stream-K shape.
    let shapes = [(200, 300, 136, 1), (1, 17, 64, 1), (130, 264, 520, 2), (128, 4096, 4096, 1)];
    for (m, n, k, batch) in shapes {
        let mut p = GemmProblem::new(m, n, k);
        (p.batch, p.alpha, p.beta) = (batch, 1.25, -0.5);
        check_in_place::<bf16>(wf, &p);
        check_in_place::<f32>(wf, &p);
    }
    let stream_k = GemmProblem::new(128, 4096, 4096);
    assert_ne!(wf.gemm_plan::<bf16, bf16>(&stream_k).unwrap().schedule, StreamKMode::DataParallel);
    // C's layout is D's: a different ldc is refused.
    let stream = gpu().0.stream();
    let mut p = GemmProblem::new(64, 64, 64);
    (p.beta, p.ldc, p.ldd) = (1.0, 72, 64);
    let a = stream.alloc_zeros::<bf16>(64 * 64).unwrap();
    let mut d = stream.alloc_zeros::<f32>(72 * 64).unwrap();
    let in_place = Epilogue { c: COperand::InPlace, bias: None };
    let refused = wf.gemm::<bf16, f32>(stream, &p, &a, &a, in_place, &mut d);
    assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{refused:?}");
}

fn check_in_place<O: GemmOutput + Element>(wf: &Warpforge, p: &GemmProblem) {
    let stream = gpu().0.stream();
    let (m, n, k, batch) = (p.m, p.n, p.k, p.batch);
    let seed = mix((m * 131 + n * 7 + k) as u64);
    let round = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect::<Vec<_>>();
    let a = round(random_f32(seed, batch * m * k, 1.0)); // (batch, M, K)
    let b = round(random_f32(seed ^ 1, batch * n * k, 1.0)); // (batch, N, K): B column-major
    let d0: Vec<O> = random_f32(seed ^ 2, batch * m * n, 1.0).into_iter().map(O::of).collect();
    let (da, db) = (stream.clone_htod(&a).unwrap(), stream.clone_htod(&b).unwrap());
    let mut dd = stream.clone_htod(&d0).unwrap();
    let in_place = Epilogue { c: COperand::InPlace, bias: None };
    wf.gemm::<bf16, O>(stream, p, &da, &db, in_place, &mut dd).unwrap();
    let got = stream.clone_dtoh(&dd).unwrap();
    let full = batch * m * n * k <= 1 << 25;
    let samples: Vec<usize> = if full {
        (0..batch * m * n).collect()
    } else {
        // Random elements plus the last row and column of every batch (the ragged tiles).
        let mut at: Vec<usize> = (0..4096).map(|i| mix(seed ^ i) as usize % (batch * m * n)).collect();
        for t in 0..batch {
            at.extend((0..n).map(|c| t * m * n + (m - 1) * n + c));
            at.extend((0..m).map(|r| t * m * n + r * n + n - 1));
        }
        at
    };
    for at in samples {
        let (t, r, c) = (at / (m * n), at / n % m, at % n);
        let (mut sum, mut abs) = (0.0f64, 0.0f64);
        for i in 0..k {
            let prod = a[(t * m + r) * k + i].to_f64() * b[(t * n + c) * k + i].to_f64();
            sum += prod;
            abs += prod.abs();
        }
        let c0 = d0[at].f64();
        let want = p.alpha as f64 * sum + p.beta as f64 * c0;
        let tol = 2.0 * (k + 2) as f64 * EPS_F32 * (abs + c0.abs()) + O::EPS * want.abs() + O::ABS_FLOOR;
        let err = (got[at].f64() - want).abs();
        assert!(err <= tol, "{p:?} {}: D[{t}][{r}][{c}] = {} want {want} (tol {tol})", O::NAME, got[at].f64());
    }
}

/// A second `CudaContext::new(0)` retains the same primary context: it compares equal and its
/// streams are accepted. A non-primary context is another context: its streams and buffers are
/// refused with a typed error before anything is launched.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn streams_and_buffers_of_another_context_are_refused() {
    let (device, wf) = gpu();
    let again = CudaContext::new(0).unwrap();
    assert_eq!(*again, **device.context(), "the primary context again");
    let same = again.default_stream();
    let x = same.clone_htod(&[1.0f32; 4]).unwrap();
    let mut y = same.clone_htod(&[1.0f32; 4]).unwrap();
    wf.saxpy(&same, 1.0, &x, &mut y).unwrap();
    assert_eq!(same.clone_dtoh(&y).unwrap(), [2.0; 4]);

    let other = CudaContext::new_non_primary(0, 0).unwrap();
    assert_ne!(*other, **device.context());
    let foreign = other.default_stream();
    let fx = foreign.clone_htod(&[1.0f32; 4]).unwrap();
    let mut fy = foreign.clone_htod(&[1.0f32; 4]).unwrap();
    let ours = device.stream();
    let invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(wf.saxpy(&foreign, 1.0, &fx, &mut fy)), "foreign stream");
    assert!(invalid(wf.saxpy(ours, 1.0, &fx, &mut y)), "foreign input");
    assert!(invalid(wf.saxpy(ours, 1.0, &x, &mut fy)), "foreign output");
    let p = GemmProblem::new(64, 64, 64);
    let a = ours.alloc_zeros::<bf16>(64 * 64).unwrap();
    let fa = foreign.alloc_zeros::<bf16>(64 * 64).unwrap();
    let mut d = ours.alloc_zeros::<f32>(64 * 64).unwrap();
    assert!(invalid(wf.gemm::<bf16, f32>(&foreign, &p, &a, &a, Epilogue::default(), &mut d)), "GEMM stream");
    assert!(invalid(wf.gemm::<bf16, f32>(ours, &p, &fa, &a, Epilogue::default(), &mut d)), "GEMM A");
    let kernel = wf.module().kernel(entries::SAXPY_F32.name()).unwrap();
    let mut args = KernelArgs::new();
    args.push(4u64).push(1.0f32).push_buffer(&x, &foreign).push_buffer_mut(&mut y, &foreign);
    // SAFETY: refused before any driver call (asserted).
    assert!(invalid(unsafe { kernel.launch(&foreign, &LaunchConfig::linear(1, 256), args) }), "raw launch");
    ours.synchronize().unwrap();
}

/// Streams that come and go leave no buffers behind: each new stream's entry drops the entries
/// of streams only the cache still holds, and live streams are capped at MAX_CACHED_STREAMS.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_stream_k_workspace_cache_stays_bounded() {
    let (device, _) = gpu();
    // A Warpforge of its own: the shared one's cache also sees the other tests' streams.
    let wf = Warpforge::new(device).unwrap();
    let p = GemmProblem::new(128, 4096, 4096);
    assert_ne!(wf.gemm_plan::<bf16, bf16>(&p).unwrap().schedule, StreamKMode::DataParallel);
    let ctx = device.context();
    let run = |stream: &Arc<CudaStream>| {
        let a = stream.alloc_zeros::<bf16>(p.m * p.k).unwrap();
        let b = stream.alloc_zeros::<bf16>(p.n * p.k).unwrap();
        let mut d = stream.alloc_zeros::<bf16>(p.m * p.n).unwrap();
        wf.gemm::<bf16, bf16>(stream, &p, &a, &b, Epilogue::default(), &mut d).unwrap();
        stream.synchronize().unwrap();
    };
    for i in 0..100 {
        let stream = ctx.new_stream().unwrap();
        run(&stream);
        drop(stream);
        let cached = wf.gemm_workspace_streams().unwrap();
        assert!(cached <= 1, "after stream {i}: {cached} streams cached");
    }
    let live: Vec<_> = (0..MAX_CACHED_STREAMS + 4).map(|_| ctx.new_stream().unwrap()).collect();
    for s in &live {
        wf.reserve_gemm_workspace(s).unwrap();
        run(s);
    }
    assert_eq!(wf.gemm_workspace_streams().unwrap(), MAX_CACHED_STREAMS);
}
