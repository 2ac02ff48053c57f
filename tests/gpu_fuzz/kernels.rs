//! The fuzzer's other entry points: `swiglu` (every `SwigluProblem` field, views of x, the
//! gate-up weight and out), `silu_mul`, `saxpy` (f32, bf16, f16; `a` including NaN and ±inf),
//! `vector_add_f32` and `sum_f32`, each with views at offsets and of mismatched lengths.

use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::kernels::SaxpyElement;
use warpforge::{Consumers, SwigluProblem, TileWidth};

use super::{Tally, draw, outcome, size, view};
use crate::common::{EPS_F32, Element, View, check_all, gpu, random_f32};
use crate::gpu_gemm_swiglu::{SILU_APPROX, SwigluCase, Weights, nonzero, silu};

const SWIGLU_CASES: usize = 120;
const SILU_MUL_CASES: usize = 200;
const SMALL_KERNEL_CASES: usize = 200;
/// Largest buffer (elements) the fuzzer allocates for a valid call; larger valid calls get
/// small buffers and must be refused.
const MAX_ALLOC: u128 = 1 << 22;
/// Poisoned elements after each output view.
const TAIL: usize = 5;

/// Two values are the same (NaN equals NaN).
fn same(x: f64, y: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan())
}

/// An output buffer of `need` elements placed per `v`, all NaN, on the GPU, with its host copy.
fn poisoned<T: Element + cudarc::driver::DeviceRepr>(v: View, need: usize) -> (Vec<T>, cudarc::driver::CudaSlice<T>) {
    let host = vec![T::NAN; v.alloc(need) + TAIL];
    let device = gpu().0.stream().clone_htod(&host).unwrap();
    (host, device)
}

/// Panics unless every element of `got` outside `touched` is still `before`'s.
fn untouched_outside<T: Element>(what: &str, got: &[T], before: &[T], touched: std::ops::Range<usize>) {
    let changed = (0..got.len()).filter(|i| !touched.contains(i) && !same(got[*i].f64(), before[*i].f64())).count();
    assert_eq!(changed, 0, "{what}: {changed} elements outside the output written");
}

#[derive(Clone, Debug)]
struct SwigluFuzz {
    problem: SwigluProblem,
    f16: bool,
    views: [View; 3],
    seed: u64,
}

fn swiglu_fuzz() -> impl Strategy<Value = SwigluFuzz> {
    let consumers = prop::sample::select(vec![Consumers::Auto, Consumers::Cooperative, Consumers::PingPong]);
    let tile_width = prop::sample::select(vec![TileWidth::Auto, TileWidth::Wide, TileWidth::Narrow]);
    (size(300), size(600), size(300), consumers, tile_width, any::<bool>(), [view(), view(), view()], any::<u64>())
        .prop_map(|(m, hidden, intermediate, consumers, tile_width, f16, views, seed)| {
            let problem = SwigluProblem { consumers, tile_width, ..SwigluProblem::new(m, hidden, intermediate) };
            SwigluFuzz { problem, f16, views, seed }
        })
}

/// Why the oracle refuses a SwiGLU problem (u128 arithmetic), or the elements of x, the
/// gate-up weight and out.
fn swiglu_oracle(p: &SwigluProblem) -> Result<[u128; 3], &'static str> {
    let (m, h, i) = (p.m as u128, p.hidden as u128, p.intermediate as u128);
    if m == 0 || h == 0 || i == 0 {
        return Err("empty problem");
    }
    if m >= 1 << 31 || h >= 1 << 31 || i >= 1 << 30 {
        return Err("size limit");
    }
    if p.consumers == Consumers::PingPong && p.tile_width == TileWidth::Narrow {
        return Err("kernel variant unavailable");
    }
    let rows = i.div_ceil(8) * 16;
    let need = [m * h, rows * h, m * i];
    if need.iter().any(|&n| n > usize::MAX as u128) {
        return Err("size overflows usize");
    }
    Ok(need)
}

fn fuzz_swiglu_one<T: SwigluCase>(f: &SwigluFuzz, tally: &mut Tally) {
    let (p, [vx, vw, vout]) = (&f.problem, f.views);
    let stream = gpu().0.stream();
    let need = match swiglu_oracle(p) {
        Ok(need) if need.iter().all(|&n| n <= MAX_ALLOC) => need.map(|n| n as usize),
        oracle => {
            let why = oracle.err().unwrap_or("buffers too short for a large problem");
            let call = || {
                let x = stream.clone_htod(&[T::of(1.0); 64]).unwrap();
                let (before, mut out) = poisoned::<T>(View::default(), 64);
                let result = gpu().1.swiglu(stream, p, &x, &x, &mut out);
                untouched_outside("swiglu", &stream.clone_dtoh(&out).unwrap(), &before, 0..0);
                result
            };
            return tally.record(f, Some(why), outcome(call));
        }
    };
    let [x_need, w_need, out_need] = need;
    let invalid = [(vx, x_need), (vw, w_need), (vout, out_need)].iter().any(|&(v, n)| v.len(n) < n);
    let call = || {
        let w = Weights::<T>::random(f.seed, p.intermediate, p.hidden);
        let mut w_host = vec![T::ZERO; vw.alloc(w_need)];
        w_host[vw.offset..vw.offset + w_need].copy_from_slice(&stream.clone_dtoh(&w.gate_up).unwrap());
        let x: Vec<T> = nonzero(f.seed ^ 0x5, vx.alloc(x_need), 1.0);
        let (dx, dw) = (stream.clone_htod(&x).unwrap(), stream.clone_htod(&w_host).unwrap());
        let (before, mut dout) = poisoned::<T>(vout, out_need);
        let result = gpu().1.swiglu(
            stream,
            p,
            &dx.slice(vx.range(x_need)),
            &dw.slice(vw.range(w_need)),
            &mut dout.slice_mut(vout.range(out_need)),
        );
        let got = stream.clone_dtoh(&dout).unwrap();
        let touched = if result.is_ok() { vout.offset..vout.offset + out_need } else { 0..0 };
        untouched_outside("swiglu", &got, &before, touched);
        result?;
        let x: Vec<f32> = x[vx.offset..].iter().map(|v| v.f64() as f32).collect();
        let i = p.intermediate;
        let (bad, first) = check_all(p.m * i, |t| {
            let (want, tol) = w.expect(&x, t / i, t % i);
            let value = got[vout.offset + t].f64();
            ((value - want).abs() > tol || !value.is_finite())
                .then(|| format!("out[{t}] = {value}, want {want} ± {tol:.3e}"))
        });
        assert_eq!(bad, 0, "{bad} elements wrong, e.g. {first:?}");
        Ok(())
    };
    tally.record(f, invalid.then_some("buffer too short"), outcome(call));
}

/// Every `SwigluProblem` field (extremes, forced variants) and view placement.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_fuzz_swiglu_returns_a_typed_error_or_a_verified_result() {
    let mut tally = Tally::new("swiglu");
    for f in draw(swiglu_fuzz(), SWIGLU_CASES, 2) {
        if tally.faulted {
            break;
        }
        if f.f16 { fuzz_swiglu_one::<f16>(&f, &mut tally) } else { fuzz_swiglu_one::<bf16>(&f, &mut tally) }
    }
    tally.finish();
}

fn fuzz_silu_mul_one<T: SwigluCase>(m: usize, i: usize, vh: View, vout: View, tally: &mut Tally) {
    let stream = gpu().0.stream();
    let what = (m, i, vh, vout, <T as warpforge::gemm::GemmInput>::NAME);
    let (out_need, h_need) = (m as u128 * i as u128, 2 * m as u128 * i as u128);
    let problem = if m == 0 || i == 0 {
        Some("empty problem")
    } else {
        (h_need > usize::MAX as u128).then_some("size overflows usize")
    };
    if problem.is_some() || h_need > MAX_ALLOC {
        let call = || {
            let h = stream.clone_htod(&[T::of(1.0); 64]).unwrap();
            let (before, mut out) = poisoned::<T>(View::default(), 32);
            let result = gpu().1.silu_mul(stream, m, i, &h, &mut out);
            untouched_outside("silu_mul", &stream.clone_dtoh(&out).unwrap(), &before, 0..0);
            result
        };
        return tally.record(&what, Some(problem.unwrap_or("buffers too short for a large problem")), outcome(call));
    }
    let (out_need, h_need) = (out_need as usize, h_need as usize);
    let invalid = vh.len(h_need) < h_need || vout.len(out_need) < out_need;
    let call = || {
        let h: Vec<T> = nonzero((m * 7919 + i) as u64, vh.alloc(h_need), 4.0);
        let dh = stream.clone_htod(&h).unwrap();
        let (before, mut dout) = poisoned::<T>(vout, out_need);
        let result =
            gpu().1.silu_mul(stream, m, i, &dh.slice(vh.range(h_need)), &mut dout.slice_mut(vout.range(out_need)));
        let got = stream.clone_dtoh(&dout).unwrap();
        let touched = if result.is_ok() { vout.offset..vout.offset + out_need } else { 0..0 };
        untouched_outside("silu_mul", &got, &before, touched);
        result?;
        let h = &h[vh.offset..];
        let (bad, first) = check_all(out_need, |t| {
            let (r, c) = (t / i, t % i);
            let (g, u) = (h[2 * r * i + c].f64(), h[(2 * r + 1) * i + c].f64());
            let want = silu(g) * u;
            let tol = 1.01 * T::EPS * want.abs() + SILU_APPROX * (2.0 + g.abs()) * want.abs() + T::ABS_FLOOR;
            let value = got[vout.offset + t].f64();
            ((value - want).abs() > tol || !value.is_finite()).then(|| format!("out[{r},{c}] = {value}, want {want}"))
        });
        assert_eq!(bad, 0, "{bad} elements wrong, e.g. {first:?}");
        Ok(())
    };
    tally.record(&what, invalid.then_some("buffer too short"), outcome(call));
}

/// `silu_mul` over sizes with extremes and overflowing products, misaligned and mismatched views.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_fuzz_silu_mul_returns_a_typed_error_or_a_verified_result() {
    let mut tally = Tally::new("silu_mul");
    let overflowing = prop::sample::select(vec![(1usize << 62, 4usize), (1 << 62, 2), (usize::MAX, 1), (3, 1 << 62)]);
    let sizes = prop_oneof![8 => (size(300), size(1200)), 1 => overflowing];
    for ((m, i), vh, vout, f16) in draw((sizes, view(), view(), any::<bool>()), SILU_MUL_CASES, 3) {
        if tally.faulted {
            break;
        }
        if f16 {
            fuzz_silu_mul_one::<f16>(m, i, vh, vout, &mut tally)
        } else {
            fuzz_silu_mul_one::<bf16>(m, i, vh, vout, &mut tally)
        }
    }
    tally.finish();
}

/// `y = a·x + y` for `T` over views of `n` elements; lengths that differ must be refused.
fn fuzz_saxpy_one<T: SaxpyElement + Element>(n: usize, a: f32, vx: View, vy: View, tally: &mut Tally) {
    let stream = gpu().0.stream();
    let what = (n, a, vx, vy, std::any::type_name::<T>());
    let invalid = (vx.len(n) != vy.len(n)).then_some("length mismatch");
    let call = || {
        let x: Vec<T> = random_f32(n as u64, vx.alloc(n), 1.0).into_iter().map(T::of).collect();
        let y: Vec<T> = random_f32(n as u64 ^ 0x7, vy.alloc(n) + TAIL, 1.0).into_iter().map(T::of).collect();
        let dx = stream.clone_htod(&x).unwrap();
        let mut dy = stream.clone_htod(&y).unwrap();
        let result = gpu().1.saxpy(stream, a, &dx.slice(vx.range(n)), &mut dy.slice_mut(vy.range(n)));
        let got = stream.clone_dtoh(&dy).unwrap();
        let touched = if result.is_ok() { vy.range(n) } else { 0..0 };
        untouched_outside("saxpy", &got, &y, touched);
        result?;
        for t in 0..vy.len(n) {
            let (xv, yv) = (x[vx.offset + t].f64(), y[vy.offset + t].f64());
            let want = a as f64 * xv + yv;
            let value = got[vy.offset + t].f64();
            // f32 arithmetic (an FMA or a product and a sum), then one rounding to T.
            let tol = 2.0 * EPS_F32 * ((a as f64 * xv).abs() + yv.abs()) + T::EPS * want.abs() + T::ABS_FLOOR;
            let ok = if want.is_finite() { (value - want).abs() <= tol } else { same(value, want) };
            assert!(ok, "y[{t}] = {value}, want {want} ± {tol:.3e}");
        }
        Ok(())
    };
    tally.record(&what, invalid, outcome(call));
}

/// `saxpy` for each element type, `a` including 0, NaN and ±inf (propagated, not refused),
/// `n = 0`, misaligned views and mismatched lengths; `vector_add_f32` (exact: one f32 addition)
/// and `sum_f32` likewise.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_fuzz_small_kernels_return_a_typed_error_or_a_verified_result() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let a = prop_oneof![
        4 => -4.0f32..4.0,
        1 => prop::sample::select(vec![0.0f32, -0.0, 1.0, 1e-30, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
    ];
    let n = prop_oneof![1 => Just(0usize), 1 => 1usize..40, 2 => 1usize..100_000];
    let cases = draw((n, a, [view(), view(), view()], 0u8..3), SMALL_KERNEL_CASES, 4);
    let mut saxpy = Tally::new("saxpy");
    for &(n, a, [vx, vy, _], t) in &cases {
        match t {
            0 if !saxpy.faulted => fuzz_saxpy_one::<f32>(n, a, vx, vy, &mut saxpy),
            1 if !saxpy.faulted => fuzz_saxpy_one::<bf16>(n, a, vx, vy, &mut saxpy),
            _ if !saxpy.faulted => fuzz_saxpy_one::<f16>(n, a, vx, vy, &mut saxpy),
            _ => {}
        }
    }
    let (mut add, mut sum) = (Tally::new("vector_add_f32"), Tally::new("sum_f32"));
    for &(n, _, [va, vb, vout], _) in &cases {
        if add.faulted || sum.faulted || saxpy.faulted {
            break;
        }
        let lens = [va.len(n), vb.len(n), vout.len(n)];
        let invalid = (lens[0] != lens[1] || lens[1] != lens[2]).then_some("length mismatch");
        let xa = random_f32(n as u64 ^ 0xa, va.alloc(n), 1e3);
        let xb = random_f32(n as u64 ^ 0xb, vb.alloc(n), 1.0);
        let (da, db) = (stream.clone_htod(&xa).unwrap(), stream.clone_htod(&xb).unwrap());
        let call = || {
            let (before, mut dout) = poisoned::<f32>(vout, n);
            let result = wf.vector_add_f32(
                stream,
                &da.slice(va.range(n)),
                &db.slice(vb.range(n)),
                &mut dout.slice_mut(vout.range(n)),
            );
            let got = stream.clone_dtoh(&dout).unwrap();
            untouched_outside("vector_add_f32", &got, &before, if result.is_ok() { vout.range(n) } else { 0..0 });
            result?;
            let wrong = (0..lens[2]).filter(|&t| got[vout.offset + t] != xa[va.offset + t] + xb[vb.offset + t]).count();
            assert_eq!(wrong, 0, "{wrong} sums differ from the f32 addition");
            Ok(())
        };
        add.record(&(n, va, vb, vout), invalid, outcome(call));
        let call = || {
            let x = &xa[va.offset..va.offset + lens[0]];
            let got = wf.sum_f32(stream, &da.slice(va.range(n)))?;
            let (want, magnitude) = x.iter().fold((0.0f64, 0.0f64), |(s, m), &v| (s + v as f64, m + (v as f64).abs()));
            // Per-block f32 tree sums (8 levels of 256 elements, then a grid-stride tail), f64 across blocks.
            let tol = 2.0 * (x.len() as f64).max(1.0) * EPS_F32 * magnitude;
            assert!((got - want).abs() <= tol, "sum of {} = {got}, want {want} ± {tol:.3e}", x.len());
            Ok(())
        };
        sum.record(&(n, va), None, outcome(call));
    }
    Tally::finish_all([saxpy, add, sum]);
}
