//! The fused gate-up + SwiGLU quantised for an FP8 down projection (`Warpforge::swiglu_fp8`)
//! on the GPU against float64: the SwiGLU values of `tests/gpu_gemm_swiglu.rs`'s reference (and
//! its error bound `tol_j` per element), quantised per row and 128 outputs as the per-token
//! quantiser does.
//!
//! Checks per (row, group): the scale is `amax / 448` (exact) or its power-of-two ceiling
//! (UE8M0) for an amax within the group's largest `tol_j` of the reference amax; every code
//! dequantises (code × scale) to within e4m3's half-ulp (2⁻⁴ relative, 2⁻¹⁰ × scale near zero)
//! of a value within `tol_j` of the reference. Codes and scales start poisoned (e4m3 NaN, f32
//! NaN), so an unwritten element fails, and the bytes after the codes must stay poisoned.

use half::bf16;
use warpforge::logic::quant::{GROUP, Minifloat, group_scale_pitch};
use warpforge::{Consumers, Error, ScaleRounding, SwigluProblem};

use crate::common::gpu;
use crate::gpu_gemm_swiglu::{Weights, nonzero};

const POISON_CODE: u8 = 0x7f;
const TAIL: usize = 5;

fn check(m: usize, intermediate: usize, hidden: usize, seed: u64, rounding: ScaleRounding) {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let w = Weights::<bf16>::random(seed, intermediate, hidden);
    let x: Vec<bf16> = nonzero(seed ^ 0x51, m * hidden, 1.0);
    let x_f32: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
    let x_dev = stream.clone_htod(&x).unwrap();
    let pitch = group_scale_pitch(m).unwrap();
    let groups = intermediate.div_ceil(GROUP);
    let mut codes = stream.clone_htod(&vec![POISON_CODE; m * intermediate + TAIL]).unwrap();
    let mut scales = stream.clone_htod(&vec![f32::NAN; pitch * groups]).unwrap();
    let p = SwigluProblem::new(m, hidden, intermediate);
    wf.swiglu_fp8(stream, &p, rounding, &x_dev, &w.gate_up, &mut codes, &mut scales).unwrap();
    let codes = stream.clone_dtoh(&codes).unwrap();
    let scales = stream.clone_dtoh(&scales).unwrap();
    let label = format!("swiglu_fp8 {m}×{hidden}→{intermediate} {rounding:?}");
    assert!(codes[m * intermediate..].iter().all(|&c| c == POISON_CODE), "{label}: written past the codes");
    for i in 0..m {
        for g in 0..groups {
            let cols = g * GROUP..((g + 1) * GROUP).min(intermediate);
            let refs: Vec<(f64, f64)> = cols.clone().map(|j| w.expect(&x_f32, i, j)).collect();
            let amax = refs.iter().map(|&(v, _)| v.abs()).fold(0.0, f64::max);
            let slack = refs.iter().map(|&(_, t)| t).fold(0.0, f64::max);
            let scale = scales[g * pitch + i] as f64;
            let (lo, hi) = ((amax - slack) / 448.0, (amax + slack) / 448.0);
            let scale_ok = match rounding {
                ScaleRounding::Exact => scale >= lo * (1.0 - 1e-6) && scale <= hi * (1.0 + 1e-6),
                // The power-of-two ceiling of some amax in [lo, hi]: a power of two ≥ lo whose
                // half is < hi.
                ScaleRounding::PowerOfTwo => scale.log2().fract() == 0.0 && scale >= lo && scale / 2.0 < hi,
            };
            assert!(scale_ok, "{label}: scale[{g}, {i}] = {scale:e}, amax {amax:e} ± {slack:e}");
            for (j, &(want, tol)) in cols.zip(&refs) {
                let code = codes[i * intermediate + j];
                let got = Minifloat::E4m3.decode(code) as f64 * scale;
                let bound = (want.abs() + tol) / 16.0 + tol + scale / 1024.0;
                assert!(
                    (got - want).abs() <= bound,
                    "{label}: out[{i}, {j}] = code {code:#04x} × {scale:e} = {got:e}, want {want:e} ± {bound:e}"
                );
            }
        }
    }
}

/// Ragged rows and a partial last group, both roundings, decode to prefill sizes; a Llama-like
/// MLP slice at the end.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn swiglu_fp8_matches_the_per_token_quantiser_of_f64() {
    for (i, &(m, intermediate, hidden)) in
        [(1, 128, 64), (3, 272, 136), (64, 256, 1000), (130, 400, 72), (257, 1024, 512), (512, 1408, 2048)]
            .iter()
            .enumerate()
    {
        for rounding in [ScaleRounding::Exact, ScaleRounding::PowerOfTwo] {
            check(m, intermediate, hidden, 31 + i as u64, rounding);
        }
    }
}

/// Widths the quantised epilogue cannot take are refused before any launch.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn swiglu_fp8_rejects_invalid_arguments() {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let w = Weights::<bf16>::random(1, 128, 64);
    let x = stream.clone_htod(&nonzero::<bf16>(2, 4 * 64, 1.0)).unwrap();
    let mut codes = stream.alloc_zeros::<u8>(4 * 128).unwrap();
    let mut scales = stream.alloc_zeros::<f32>(4).unwrap();
    let refused = |r: warpforge::Result<()>, words: &str| match r {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg} (wanted {words})"),
        other => panic!("accepted ({words}): {other:?}"),
    };
    let p = SwigluProblem::new(4, 64, 128);
    let exact = ScaleRounding::Exact;
    wf.swiglu_fp8(stream, &p, exact, &x, &w.gate_up, &mut codes, &mut scales).unwrap();
    refused(
        wf.swiglu_fp8(stream, &SwigluProblem::new(4, 64, 120), exact, &x, &w.gate_up, &mut codes, &mut scales),
        "multiple of 16",
    );
    let pingpong = SwigluProblem { consumers: Consumers::PingPong, ..p };
    refused(wf.swiglu_fp8(stream, &pingpong, exact, &x, &w.gate_up, &mut codes, &mut scales), "wide cooperative");
    let mut short_codes = stream.alloc_zeros::<u8>(4 * 128 - 1).unwrap();
    refused(wf.swiglu_fp8(stream, &p, exact, &x, &w.gate_up, &mut short_codes, &mut scales), "codes hold");
    let mut short_scales = stream.alloc_zeros::<f32>(3).unwrap();
    refused(wf.swiglu_fp8(stream, &p, exact, &x, &w.gate_up, &mut codes, &mut short_scales), "scales hold");
    stream.synchronize().unwrap();
}
