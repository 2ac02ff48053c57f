//! warpforge's launches in CUDA graphs, as a service captures a decode step: on a stream of its
//! own, in a context without cudarc's event tracking (whose waits on events recorded outside a
//! capture would fail it), the FP8 GEMMs of the decode regime and attention (a prefill and a
//! decode step) captured once and replayed on new inputs written into the same buffers between
//! replays.
//!
//! The contract (`gemm::workspace::refuse_while_capturing`): a launch that needs per-stream
//! buffers warpforge keeps across calls (stream-K slots and flags, attention's tile counters)
//! allocates them on the stream's first such call; captured, that first call is refused with
//! an error that says to run it once before the capture. After one eager call the capture
//! records launches only, and every replay computes on the inputs the buffers then hold.

use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUgraphInstantiate_flags_enum, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use warpforge::logic::schedule::stream_k::StreamKMode;
use warpforge::{AttentionProblem, Device, Error, Fp8GemmProblem, Warpforge};

use crate::common::random_bf16;

use crate::gpu_fp8_gemm::{POISON, Quantised, first_miss, identity};

/// Device 0 in a context of its own with event tracking off, and warpforge on it.
fn untracked_gpu() -> &'static (Device, Warpforge) {
    static GPU: OnceLock<(Device, Warpforge)> = OnceLock::new();
    GPU.get_or_init(|| {
        let device = Device::new(0).expect("GPU tests need an NVIDIA GPU and driver");
        // SAFETY: every buffer of this context is used on the one stream that allocated it,
        // after its upload on that stream (the tests below), so no cross-stream ordering is
        // left for the events to provide.
        unsafe { device.context().disable_event_tracking() };
        let wf = Warpforge::new(&device).expect("warpforge kernels load on this GPU");
        (device, wf)
    })
}

/// One FP8 GEMM's buffers on a stream: A, A's scales, B, B's scales, D.
struct Buffers {
    a: CudaSlice<u8>,
    sa: CudaSlice<f32>,
    b: CudaSlice<u8>,
    sb: CudaSlice<f32>,
    d: CudaSlice<bf16>,
}

impl Buffers {
    fn upload(stream: &Arc<CudaStream>, case: &Quantised) -> Self {
        Buffers {
            a: stream.clone_htod(&case.a).unwrap(),
            sa: stream.clone_htod(&case.a_scales).unwrap(),
            b: stream.clone_htod(&case.b).unwrap(),
            sb: stream.clone_htod(&case.b_scales).unwrap(),
            d: stream.alloc_zeros(case.m * case.n).unwrap(),
        }
    }

    /// `case`'s operands into these buffers and D poisoned, on `stream` (outside any capture).
    fn rewrite(&mut self, stream: &Arc<CudaStream>, case: &Quantised) {
        stream.memcpy_htod(&case.a, &mut self.a).unwrap();
        stream.memcpy_htod(&case.a_scales, &mut self.sa).unwrap();
        stream.memcpy_htod(&case.b, &mut self.b).unwrap();
        stream.memcpy_htod(&case.b_scales, &mut self.sb).unwrap();
        stream.memcpy_htod(&vec![bf16::from_bits(POISON); case.m * case.n], &mut self.d).unwrap();
    }

    fn gemm(&mut self, wf: &Warpforge, stream: &Arc<CudaStream>, case: &Quantised) -> warpforge::Result<()> {
        let problem = Fp8GemmProblem::new(case.m, case.n, case.k);
        wf.fp8_gemm(stream, &problem, &self.a, &self.sa, &self.b, &self.sb, &mut self.d)
    }

    /// This GEMM captured alone on `stream`, then replayed once on `case`'s operands written
    /// again (D poisoned) and checked, `what` naming the replay.
    fn capture_and_replay(&mut self, wf: &Warpforge, stream: &Arc<CudaStream>, case: &Quantised, what: &str) {
        capture(stream);
        self.gemm(wf, stream, case).unwrap();
        let graph = end_capture(stream).expect("the capture recorded the launch");
        self.rewrite(stream, case);
        graph.launch().unwrap();
        self.check(stream, case, what);
    }

    /// Every element of D against `case`'s float64 reference.
    fn check(&self, stream: &Arc<CudaStream>, case: &Quantised, what: &str) {
        let got = stream.clone_dtoh(&self.d).unwrap();
        let (want, tol) = case.reference(identity);
        let miss = first_miss(case.m, case.n, |e| got[e].to_f64(), &want, &tol);
        assert!(miss.is_none(), "{what} ({}×{}×{}): {}", case.m, case.n, case.k, miss.unwrap());
    }
}

fn capture(stream: &Arc<CudaStream>) {
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).unwrap();
}

fn end_capture(stream: &Arc<CudaStream>) -> Option<cudarc::driver::CudaGraph> {
    stream.end_capture(CUgraphInstantiate_flags_enum(0)).unwrap()
}

/// Decode GEMMs (split over K on stream-K slots, and data-parallel) captured after one eager
/// call each, then replayed on a second set of inputs and again on the first: each replay
/// matches the reference of what its buffers held.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_captured_decode_step_replays_on_new_inputs() {
    let (device, wf) = untracked_gpu();
    let stream = device.context().new_stream().unwrap();
    let shapes = [(1, 4096, 7168), (16, 2112, 7168), (100, 1000, 1024)];
    let set = |salt: u64| -> Vec<Quantised> {
        shapes.iter().map(|&(m, n, k)| Quantised::new(m, n, k, salt ^ (m * 7 + n * 3 + k) as u64, true)).collect()
    };
    let (first, second) = (set(1), set(2));
    let modes: Vec<StreamKMode> =
        first.iter().map(|c| wf.fp8_gemm_plan(&Fp8GemmProblem::new(c.m, c.n, c.k)).unwrap().schedule).collect();
    assert!(modes.contains(&StreamKMode::Pure), "a decode GEMM splits K on the stream's slots: {modes:?}");

    let mut buffers: Vec<Buffers> = first.iter().map(|c| Buffers::upload(&stream, c)).collect();
    for (b, c) in buffers.iter_mut().zip(&first) {
        b.gemm(wf, &stream, c).unwrap();
        b.check(&stream, c, "the eager call");
    }
    capture(&stream);
    for (b, c) in buffers.iter_mut().zip(&first) {
        b.gemm(wf, &stream, c).unwrap();
    }
    let graph = end_capture(&stream).expect("the capture recorded the launches");
    for (inputs, what) in [(&second, "the first replay, on new inputs"), (&first, "the second replay")] {
        for (b, c) in buffers.iter_mut().zip(inputs) {
            b.rewrite(&stream, c);
        }
        graph.launch().unwrap();
        for (b, c) in buffers.iter().zip(inputs) {
            b.check(&stream, c, what);
        }
    }
}

/// A stream's first stream-K GEMM, captured, is refused (its slots would belong to the graph)
/// and leaves nothing launched or cached; the same call eager, then captured, replays; and on
/// a stream whose buffers `reserve_gemm_workspace` allocated, a first call captured replays.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn a_first_call_inside_a_capture_is_refused_with_the_remedy() {
    let (device, wf) = untracked_gpu();
    let stream = device.context().new_stream().unwrap();
    let case = Quantised::new(1, 4096, 7168, 77, true);
    let plan = wf.fp8_gemm_plan(&Fp8GemmProblem::new(case.m, case.n, case.k)).unwrap();
    assert_eq!(plan.schedule, StreamKMode::Pure, "the case needs the stream's slots");
    let mut buffers = Buffers::upload(&stream, &case);

    capture(&stream);
    let refused = buffers.gemm(wf, &stream, &case);
    // Nothing was recorded: whether the driver instantiates an empty graph is not the point.
    drop(stream.end_capture(CUgraphInstantiate_flags_enum(0)));
    assert_eq!(stream.capture_status().unwrap(), CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
    match refused {
        Err(Error::InvalidArgument(why)) => {
            let remedies = why.contains("once on the stream before") && why.contains("reserve_gemm_workspace");
            assert!(why.contains("CUDA graph capture") && remedies, "{why}")
        }
        other => panic!("a first stream-K call inside a capture: {other:?}"),
    }

    buffers.rewrite(&stream, &case);
    buffers.gemm(wf, &stream, &case).unwrap();
    buffers.check(&stream, &case, "the eager call after the refusal");
    buffers.capture_and_replay(wf, &stream, &case, "the replay");

    let reserved = device.context().new_stream().unwrap();
    wf.reserve_gemm_workspace(&reserved).unwrap();
    let mut buffers = Buffers::upload(&reserved, &case);
    buffers.capture_and_replay(wf, &reserved, &case, "the replay of a first call on a reserved stream");
}

/// Attention in a capture: a prefill on the persistent grid (its claim counters are the
/// stream's, so its first call captured is refused unless `reserve_attention_workspace`
/// allocated them) and a GQA decode step (split over the keys, its partials allocated and freed
/// inside the call, so inside the graph). Each, captured after one eager call, replays on
/// rewritten queries to exactly what an eager call on those queries writes (one CTA computes
/// each output tile, in a fixed key order).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn captured_attention_replays_what_it_computes_eagerly() {
    let (device, wf) = untracked_gpu();
    let mut prefill = AttentionProblem::new(2, 8, 2, 1000, 1000, 128);
    prefill.causal = true;
    let decode = AttentionProblem::new(4, 32, 8, 1, 4096, 128);
    for (problem, persistent, reserved) in [(prefill, true, false), (prefill, true, true), (decode, false, false)] {
        let stream = device.context().new_stream().unwrap();
        if reserved {
            wf.reserve_attention_workspace(&stream).unwrap();
        }
        let e = problem.check().unwrap();
        let host = |seed: u64, n: usize| random_bf16(seed, n, 1.0);
        let (q1, q2) = (host(1, e.q), host(2, e.q));
        let mut q: CudaSlice<bf16> = stream.clone_htod(&q1).unwrap();
        let k: CudaSlice<bf16> = stream.clone_htod(&host(3, e.kv)).unwrap();
        let v: CudaSlice<bf16> = stream.clone_htod(&host(4, e.kv)).unwrap();
        let mut o: CudaSlice<bf16> = stream.alloc_zeros(e.q).unwrap();
        let poison = vec![bf16::from_bits(POISON); e.q];

        capture(&stream);
        let first = wf.attention(&stream, &problem, &q, &k, &v, &mut o, None);
        drop(stream.end_capture(CUgraphInstantiate_flags_enum(0)));
        match (first, persistent && !reserved) {
            (Err(Error::InvalidArgument(why)), true) => {
                assert!(why.contains("CUDA graph capture") && why.contains("reserve_attention_workspace"), "{why}")
            }
            (Ok(()), false) => {}
            (other, _) => panic!("{problem:?}: a first call inside a capture: {other:?}"),
        }

        let eager = |q_host: &[bf16], q: &mut CudaSlice<bf16>, o: &mut CudaSlice<bf16>| {
            stream.memcpy_htod(q_host, q).unwrap();
            stream.memcpy_htod(&poison, o).unwrap();
            wf.attention(&stream, &problem, &*q, &k, &v, o, None).unwrap();
            stream.clone_dtoh(&*o).unwrap()
        };
        let want1 = eager(&q1, &mut q, &mut o);
        assert!(want1.iter().all(|x| x.is_finite()), "{problem:?}: eager O is finite");
        capture(&stream);
        wf.attention(&stream, &problem, &q, &k, &v, &mut o, None).unwrap();
        let graph = end_capture(&stream).expect("the capture recorded the launches");
        for (q_host, what) in [(&q2, "new queries"), (&q1, "the first queries again")] {
            stream.memcpy_htod(q_host, &mut q).unwrap();
            stream.memcpy_htod(&poison, &mut o).unwrap();
            graph.launch().unwrap();
            let got = stream.clone_dtoh(&o).unwrap();
            let want = eager(q_host, &mut q, &mut o);
            let differ = got.iter().zip(&want).position(|(g, w)| g.to_bits() != w.to_bits());
            assert_eq!(differ, None, "{problem:?}: the replay on {what} differs from the eager call");
        }
    }
}
