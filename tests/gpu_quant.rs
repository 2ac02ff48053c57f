//! The quantising kernels (`Warpforge::quantize_*`, `mxfp8_*`, `nvfp4_*`) on the GPU against CPU
//! references built from the same `logic::quant` functions: codes and scales bit-exact (NaN
//! codes compared as NaN-ness), decoders bit-exact against the reference decode and within each
//! format's step of the input, and the argument checks.
//!
//! Inputs are random and non-zero with isolated 1e4 spikes, whole zero groups, and (in some
//! cases) NaN and ±∞; code and scale buffers are poisoned first, so every entry must be written.

use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::logic::quant::{self as q, Minifloat};
use warpforge::{DequantOutput, Error, Fp8Format, QuantInput, QuantScheme, ScaleRounding};

use crate::common::{Element, gpu, mix, random_f32};

/// Cases per property test and input type.
const GPU_CASES: u32 = 16;
/// Poison byte of the code and scale-byte buffers (an e4m3 NaN, never a valid output of a
/// finite input).
const POISON: u8 = 0x7f;

/// The input types: the host view of a type the quantisers take.
trait Input: Element + QuantInput {}
impl<T: Element + QuantInput> Input for T {}

/// `n` inputs from `seed`: uniform in ±1, every 97th element a ±1e4 spike, the `zero_run`-th
/// run of 128 zeroed, and with `specials` a NaN, +∞ and −∞ placed by the seed.
fn inputs(seed: u64, n: usize, zero_run: usize, specials: bool) -> Vec<f32> {
    let mut v = random_f32(seed, n, 1.0);
    for (i, x) in v.iter_mut().enumerate() {
        if mix(seed ^ i as u64).is_multiple_of(97) {
            *x = if i % 2 == 0 { 1e4 } else { -1e4 };
        }
    }
    v.iter_mut().skip(zero_run * q::GROUP).take(q::GROUP).for_each(|x| *x = 0.0);
    if specials {
        for (j, s) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY].into_iter().enumerate() {
            let at = (mix(seed + j as u64) % n as u64) as usize;
            v[at] = s;
        }
    }
    v
}

/// Uploads `v` rounded to `T`, and returns the values the kernel sees (widened exactly).
fn upload<T: Input>(v: &[f32]) -> (CudaSlice<T>, Vec<f32>) {
    let host: Vec<T> = v.iter().map(|&x| T::of(x)).collect();
    let seen = host.iter().map(|x| x.f64() as f32).collect();
    (gpu().0.stream().clone_htod(&host).unwrap(), seen)
}

fn poisoned<T: cudarc::driver::DeviceRepr + Copy>(n: usize, value: T) -> CudaSlice<T> {
    gpu().0.stream().clone_htod(&vec![value; n]).unwrap()
}

fn download<T: cudarc::driver::DeviceRepr + Copy>(buf: &CudaSlice<T>) -> Vec<T> {
    gpu().0.stream().clone_dtoh(buf).unwrap()
}

/// Codes equal bit for bit, or both NaN in `format`.
pub(crate) fn same_code(format: Minifloat, got: u8, want: u8) -> bool {
    got == want || (format.decode(got).is_nan() && format.decode(want).is_nan())
}

fn check_codes(what: &str, format: Minifloat, got: &[u8], want: &[u8]) -> Result<(), TestCaseError> {
    let bad = got.iter().zip(want).position(|(&g, &w)| !same_code(format, g, w));
    prop_assert!(bad.is_none(), "{what}: code {:?}: got {:#x}, want {:#x}", bad, got[bad.unwrap()], want[bad.unwrap()]);
    Ok(())
}

fn check_f32s(what: &str, got: &[f32], want: &[f32]) -> Result<(), TestCaseError> {
    let same = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
    let bad = got.iter().zip(want).position(|(&g, &w)| !same(g, w));
    prop_assert!(bad.is_none(), "{what}: entry {:?}: got {:e}, want {:e}", bad, got[bad.unwrap()], want[bad.unwrap()]);
    Ok(())
}

fn amax(v: &[f32]) -> f32 {
    v.iter().fold(0.0, |a, &x| q::amax_combine(a, q::finite_abs(x)))
}

/// The reference per-token quantisation: codes and MN-major scales (padding 0).
pub(crate) fn reference_group(x: &[f32], m: usize, k: usize, pow2: bool) -> (Vec<u8>, Vec<f32>) {
    let pitch = q::group_scale_pitch(m).unwrap();
    let mut scales = vec![0.0; k / q::GROUP * pitch];
    let mut codes = vec![0; m * k];
    for (g, group) in x.chunks(q::GROUP).enumerate() {
        let scale = q::scale_from_amax(amax(group), 448.0, pow2);
        let (row, col) = (g / (k / q::GROUP), g % (k / q::GROUP));
        scales[q::group_scale_index(row, col, pitch)] = scale;
        for (i, &v) in group.iter().enumerate() {
            codes[g * q::GROUP + i] = q::quantize(Minifloat::E4m3, v, scale);
        }
    }
    (codes, scales)
}

/// The reference 128 × 128-block quantisation.
pub(crate) fn reference_block(x: &[f32], n: usize, k: usize, pow2: bool) -> (Vec<u8>, Vec<f32>) {
    let mut block_amax = vec![0.0f32; n.div_ceil(q::BLOCK) * k.div_ceil(q::BLOCK)];
    for (i, &v) in x.iter().enumerate() {
        let b = q::block_scale_index(i / k, i % k, k);
        block_amax[b] = q::amax_combine(block_amax[b], q::finite_abs(v));
    }
    let scales: Vec<f32> = block_amax.iter().map(|&a| q::scale_from_amax(a, 448.0, pow2)).collect();
    let codes = x
        .iter()
        .enumerate()
        .map(|(i, &v)| q::quantize(Minifloat::E4m3, v, scales[q::block_scale_index(i / k, i % k, k)]))
        .collect();
    (codes, scales)
}

fn run_scaled<T: Input>(scheme: QuantScheme, m: usize, k: usize, pow2: bool, seed: u64) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let v = inputs(seed, m * k, (seed % 5) as usize, seed.is_multiple_of(3));
    let (x, seen) = upload::<T>(&v);
    let e = scheme.extents(m, k).unwrap();
    let (mut codes, mut scales) = (poisoned(e.codes, POISON), poisoned(e.scales, f32::NAN));
    let rounding = if pow2 { ScaleRounding::PowerOfTwo } else { ScaleRounding::Exact };
    let (want_codes, want_scales) = match scheme {
        QuantScheme::PerTokenGroup => {
            wf.quantize_per_token_group(stream, m, k, &x, rounding, &mut codes, &mut scales).unwrap();
            reference_group(&seen, m, k, pow2)
        }
        _ => {
            wf.quantize_per_block(stream, m, k, &x, rounding, &mut codes, &mut scales).unwrap();
            reference_block(&seen, m, k, pow2)
        }
    };
    check_f32s(&format!("{scheme:?} {m}×{k} scales"), &download(&scales), &want_scales)?;
    check_codes(&format!("{scheme:?} {m}×{k}"), Minifloat::E4m3, &download(&codes), &want_codes)
}

fn run_tensor<T: Input>(format: Fp8Format, n: usize, seed: u64) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (x, seen) = upload::<T>(&inputs(seed, n, usize::MAX / q::GROUP, seed.is_multiple_of(3)));
    let (mut codes, mut scale) = (poisoned(n, POISON), poisoned(1, f32::NAN));
    wf.quantize_per_tensor(stream, format, &x, &mut codes, &mut scale).unwrap();
    let mf = if format == Fp8Format::E4m3 { Minifloat::E4m3 } else { Minifloat::E5m2 };
    let s = q::scale_from_amax(amax(&seen), mf.max(), false);
    check_f32s("per-tensor scale", &download(&scale), &[s])?;
    let want: Vec<u8> = seen.iter().map(|&v| q::quantize(mf, v, s)).collect();
    check_codes(&format!("per-tensor {format:?} n = {n}"), mf, &download(&codes), &want)
}

/// Per-tensor quantisation with the caller's scale: the tensor's own scale times `headroom`
/// (below 1, the largest elements saturate), codes bit-exact against the reference.
fn run_tensor_static<T: Input>(format: Fp8Format, n: usize, headroom: f32, seed: u64) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (x, seen) = upload::<T>(&inputs(seed, n, usize::MAX / q::GROUP, seed.is_multiple_of(3)));
    let mf = if format == Fp8Format::E4m3 { Minifloat::E4m3 } else { Minifloat::E5m2 };
    let s = q::scale_from_amax(amax(&seen), mf.max(), false) * headroom;
    let mut codes = poisoned(n, POISON);
    wf.quantize_per_tensor_static(stream, format, &x, s, &mut codes).unwrap();
    let want: Vec<u8> = seen.iter().map(|&v| q::quantize(mf, v, s)).collect();
    check_codes(&format!("per-tensor static {format:?} n = {n} scale {s:e}"), mf, &download(&codes), &want)
}

fn run_mxfp8<T: Input, O: DequantOutput + Element>(m: usize, k: usize, seed: u64) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (x, seen) = upload::<T>(&inputs(seed, m * k, (seed % 7) as usize, seed.is_multiple_of(3)));
    let e = QuantScheme::Mxfp8.extents(m, k).unwrap();
    let (mut codes, mut scales) = (poisoned(e.codes, POISON), poisoned(e.scales, POISON));
    wf.mxfp8_encode(stream, m, k, &x, &mut codes, &mut scales).unwrap();
    let want_scales: Vec<u8> = seen.chunks(q::MX_BLOCK).map(|b| q::mx_scale_byte(amax(b))).collect();
    let want: Vec<u8> = seen.iter().enumerate().map(|(i, &v)| q::mx_encode(v, want_scales[i / q::MX_BLOCK])).collect();
    let (got_codes, got_scales) = (download(&codes), download(&scales));
    prop_assert_eq!(&got_scales, &want_scales, "MXFP8 scales {}×{}", m, k);
    check_codes(&format!("MXFP8 {m}×{k}"), Minifloat::E4m3, &got_codes, &want)?;
    let mut out = poisoned::<O>(e.elements, O::NAN);
    wf.mxfp8_decode(stream, m, k, &codes, &scales, &mut out).unwrap();
    let decoded: Vec<f64> = download(&out).iter().map(|v| v.f64()).collect();
    for (i, (&d, &x)) in decoded.iter().zip(&seen).enumerate() {
        let reference = O::of(q::mx_decode(want[i], want_scales[i / q::MX_BLOCK])).f64();
        prop_assert!(d.to_bits() == reference.to_bits() || (d.is_nan() && reference.is_nan()), "MXFP8 decode {i}");
        if x.is_finite() {
            let scale = q::mx_scale(want_scales[i / q::MX_BLOCK]) as f64;
            let bound = (x.abs() as f64 / 16.0).max(scale * 2f64.powi(-10)).max(x.abs() as f64 - 448.0 * scale);
            prop_assert!((d - x as f64).abs() <= bound + 2.0 * O::EPS * x.abs() as f64, "MXFP8 {i}: {x} → {d}");
        }
    }
    Ok(())
}

fn run_nvfp4<T: Input, O: DequantOutput + Element>(m: usize, k: usize, seed: u64) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (x, seen) = upload::<T>(&inputs(seed, m * k, (seed % 7) as usize, seed.is_multiple_of(3)));
    let e = QuantScheme::Nvfp4.extents(m, k).unwrap();
    let (mut codes, mut scales, mut global) =
        (poisoned(e.codes, POISON), poisoned(e.scales, POISON), poisoned(1, f32::NAN));
    wf.nvfp4_encode(stream, m, k, &x, &mut codes, &mut scales, &mut global).unwrap();
    let g = q::nvfp4_global_scale(amax(&seen));
    check_f32s("NVFP4 global scale", &download(&global), &[g])?;
    check_nvfp4::<O>(m, k, &seen, g, &codes, &scales, &global)
}

/// The reference NVFP4 encoding of `seen` under the global scale `g`: scale bytes and codes.
fn reference_nvfp4(seen: &[f32], g: f32) -> (Vec<u8>, Vec<u8>) {
    let scales: Vec<u8> =
        seen.chunks(q::NVFP4_BLOCK).map(|b| q::nvfp4_block_scale(amax(b), g, b.iter().any(|v| v.is_nan()))).collect();
    let nibble = |i: usize| q::nvfp4_encode(seen[i], q::nvfp4_scale(scales[i / q::NVFP4_BLOCK], g));
    let codes = (0..seen.len() / 2).map(|b| nibble(2 * b) | nibble(2 * b + 1) << 4).collect();
    (scales, codes)
}

/// An NVFP4 encoding of `seen` (`m × k`) under `g` (also in `global` on the device): scales and
/// codes bit-exact against the reference, then decoded to `O` bit-exact against the reference
/// decode and within a quarter of each block's amax of the input (saturated blocks and ±∞ at
/// ±6 · scale).
fn check_nvfp4<O: DequantOutput + Element>(
    m: usize,
    k: usize,
    seen: &[f32],
    g: f32,
    codes: &CudaSlice<u8>,
    scales: &CudaSlice<u8>,
    global: &CudaSlice<f32>,
) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let e = QuantScheme::Nvfp4.extents(m, k).unwrap();
    let (want_scales, want) = reference_nvfp4(seen, g);
    prop_assert_eq!(download(scales), want_scales.clone(), "NVFP4 scales {}×{}", m, k);
    prop_assert_eq!(download(codes), want.clone(), "NVFP4 codes {}×{}", m, k);
    let mut out = poisoned::<O>(e.elements, O::NAN);
    wf.nvfp4_decode(stream, m, k, codes, scales, global, &mut out).unwrap();
    let decoded: Vec<f64> = download(&out).iter().map(|v| v.f64()).collect();
    for (i, (&d, &x)) in decoded.iter().zip(seen).enumerate() {
        let scale = q::nvfp4_scale(want_scales[i / q::NVFP4_BLOCK], g);
        let reference = O::of(q::nvfp4_decode(want[i / 2] >> (4 * (i % 2)), scale)).f64();
        prop_assert!(d.to_bits() == reference.to_bits() || (d.is_nan() && reference.is_nan()), "NVFP4 decode {i}");
        let block = &seen[i / q::NVFP4_BLOCK * q::NVFP4_BLOCK..][..q::NVFP4_BLOCK];
        if block.iter().any(|v| v.is_nan()) {
            prop_assert!(d.is_nan(), "NVFP4 {i}: a NaN block decodes to NaN");
        } else if x.is_finite() {
            // Past the scale's range (a caller's global scale below the tensor's) the element
            // saturates to ±6 · scale: the bound grows by what saturation cuts off.
            let saturated = x.abs() as f64 - 6.0 * scale as f64;
            let bound = (amax(block) as f64 * 0.25 + g as f64 * 6.0 * 2f64.powi(-9)).max(saturated);
            prop_assert!((d - x as f64).abs() <= bound + 2.0 * O::EPS * x.abs() as f64, "NVFP4 {i}: {x} → {d}");
        } else {
            prop_assert_eq!(d.abs(), O::of(6.0 * scale).f64(), "NVFP4 {}: ±∞ saturates to ±6 · scale", i);
        }
    }
    Ok(())
}

/// NVFP4 encode under the caller's global scale: the tensor's own times `headroom` (below 1,
/// blocks above the range get the scale byte 448 and saturate), then the checks of
/// `check_nvfp4` with that global scale uploaded for the decoder.
fn run_nvfp4_static<T: Input, O: DequantOutput + Element>(
    m: usize,
    k: usize,
    headroom: f32,
    seed: u64,
) -> Result<(), TestCaseError> {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let (x, seen) = upload::<T>(&inputs(seed, m * k, (seed % 7) as usize, seed.is_multiple_of(3)));
    let e = QuantScheme::Nvfp4.extents(m, k).unwrap();
    let g = q::nvfp4_global_scale(amax(&seen)) * headroom;
    let (mut codes, mut scales) = (poisoned(e.codes, POISON), poisoned(e.scales, POISON));
    wf.nvfp4_encode_static(stream, m, k, &x, g, &mut codes, &mut scales).unwrap();
    let global = stream.clone_htod(&[g]).unwrap();
    check_nvfp4::<O>(m, k, &seen, g, &codes, &scales, &global)
}

fn k_group() -> impl Strategy<Value = usize> {
    prop::sample::select(vec![128usize, 256, 384, 1024, 7168])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn per_token_group_matches_the_reference(m in 1usize..70, k in k_group(), pow2 in any::<bool>(), seed in any::<u64>()) {
        run_scaled::<bf16>(QuantScheme::PerTokenGroup, m, k, pow2, seed)?;
        run_scaled::<f16>(QuantScheme::PerTokenGroup, m, k, pow2, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn per_block_matches_the_reference(n in 1usize..300, k8 in 1usize..50, pow2 in any::<bool>(), seed in any::<u64>()) {
        run_scaled::<bf16>(QuantScheme::PerBlock, n, 8 * k8, pow2, seed)?;
        run_scaled::<f16>(QuantScheme::PerBlock, n, 8 * k8, pow2, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn per_tensor_matches_the_reference(n in 1usize..20_000, seed in any::<u64>()) {
        run_tensor::<bf16>(Fp8Format::E4m3, n, seed)?;
        run_tensor::<f16>(Fp8Format::E5m2, n, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn per_tensor_static_matches_the_reference(n in 1usize..20_000, headroom in 0.05f32..4.0, seed in any::<u64>()) {
        run_tensor_static::<f16>(Fp8Format::E4m3, n, headroom, seed)?;
        run_tensor_static::<bf16>(Fp8Format::E5m2, n, headroom, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn mxfp8_round_trips(m in 1usize..40, k32 in 1usize..40, seed in any::<u64>()) {
        run_mxfp8::<bf16, f32>(m, 32 * k32, seed)?;
        run_mxfp8::<f16, bf16>(m, 32 * k32, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn nvfp4_round_trips(m in 1usize..40, k16 in 1usize..60, seed in any::<u64>()) {
        run_nvfp4::<bf16, f32>(m, 16 * k16, seed)?;
        run_nvfp4::<f16, bf16>(m, 16 * k16, seed)?;
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn nvfp4_static_round_trips(m in 1usize..40, k16 in 1usize..60, headroom in 0.05f32..4.0, seed in any::<u64>()) {
        run_nvfp4_static::<bf16, bf16>(m, 16 * k16, headroom, seed)?;
        run_nvfp4_static::<f16, f32>(m, 16 * k16, headroom, seed)?;
    }
}

/// Matrices larger than one pass of the grid (about 2^18 vectors of eight on an H200): each
/// lane walks many vectors, so the per-token kernels' (row, group) cursor wraps rows at group
/// counts that do not divide the grid's stride (13, 15 groups per row), and the weight-block
/// grid-stride revisits CTAs; odd row counts pad the scale columns; NVFP4's encoder ends inside
/// a warp step.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn scaled_quantisers_over_many_grid_passes() {
    for (m, k, seed) in [(2999, 1664, 11u64), (8191, 1920, 12)] {
        for pow2 in [false, true] {
            run_scaled::<bf16>(QuantScheme::PerTokenGroup, m, k, pow2, seed).unwrap();
            run_scaled::<f16>(QuantScheme::PerTokenGroup, m, k, pow2, seed + 3).unwrap();
        }
        run_scaled::<bf16>(QuantScheme::PerBlock, m, k, false, seed).unwrap();
        run_scaled::<f16>(QuantScheme::PerBlock, m, k, true, seed).unwrap();
    }
    // NVFP4's encoder walks 64-vector warp steps (one 16-element block per lane); 2999 × 1664
    // ends 48 vectors into its last step.
    run_nvfp4::<bf16, f32>(2999, 1664, 13).unwrap();
    run_nvfp4::<f16, bf16>(8191, 1920, 14).unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bad_arguments_are_refused() {
    let (dev, wf) = gpu();
    let stream = dev.stream();
    let x: CudaSlice<bf16> = poisoned(4 * 256 + 8, bf16::ONE);
    let mut codes: CudaSlice<u8> = poisoned(4 * 256, 0);
    let mut scales: CudaSlice<f32> = poisoned(64, 0.0);
    let invalid = |r: warpforge::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    let exact = ScaleRounding::Exact;
    assert!(invalid(wf.quantize_per_token_group(stream, 4, 200, &x, exact, &mut codes, &mut scales)), "K % 128");
    assert!(invalid(wf.quantize_per_token_group(stream, 0, 256, &x, exact, &mut codes, &mut scales)), "m = 0");
    assert!(invalid(wf.quantize_per_token_group(stream, 5, 256, &x, exact, &mut codes, &mut scales)), "short x");
    assert!(invalid(wf.quantize_per_token_group(stream, usize::MAX, 256, &x, exact, &mut codes, &mut scales)));
    let mut few: CudaSlice<f32> = poisoned(3, 0.0);
    assert!(invalid(wf.quantize_per_token_group(stream, 4, 256, &x, exact, &mut codes, &mut few)), "short scales");
    let shifted = x.slice(1..);
    assert!(invalid(wf.quantize_per_token_group(stream, 4, 256, &shifted, exact, &mut codes, &mut scales)), "align");
    let mut shifted_scales = scales.slice_mut(1..);
    let refused = wf.quantize_per_token_group(stream, 4, 256, &x, exact, &mut codes, &mut shifted_scales);
    assert!(invalid(refused), "per-token scales 16-byte aligned");
    assert!(invalid(wf.quantize_per_block(stream, 4, 250, &x, exact, &mut codes, &mut scales)), "K % 8");
    assert!(invalid(wf.mxfp8_encode(stream, 4, 48, &x, &mut codes, &mut poisoned(64, 0u8))), "K % 32");
    let mut global: CudaSlice<f32> = poisoned(1, 0.0);
    assert!(invalid(wf.nvfp4_encode(stream, 4, 24, &x, &mut codes, &mut poisoned(64, 0u8), &mut global)), "K % 16");
    let empty: CudaSlice<bf16> = stream.alloc_zeros(1).unwrap();
    let empty = empty.slice(0..0);
    assert!(invalid(wf.quantize_per_tensor(stream, Fp8Format::E4m3, &empty, &mut codes, &mut global)), "n = 0");
    for bad in [0.0, -1.0, f32::MIN_POSITIVE / 4.0, f32::INFINITY, f32::NAN] {
        assert!(invalid(wf.quantize_per_tensor_static(stream, Fp8Format::E4m3, &x, bad, &mut codes)), "scale {bad}");
        let mut scale_bytes = poisoned(64, 0u8);
        assert!(invalid(wf.nvfp4_encode_static(stream, 4, 256, &x, bad, &mut codes, &mut scale_bytes)), "global {bad}");
    }
    let mut scale_bytes = poisoned(64, 0u8);
    assert!(invalid(wf.nvfp4_encode_static(stream, 4, 256, &x, 1e36, &mut codes, &mut scale_bytes)), "global ≥ 2^117");
    assert!(invalid(wf.nvfp4_encode_static(stream, 4, 24, &x, 1.0, &mut codes, &mut scale_bytes)), "static K % 16");
    let mut out: CudaSlice<f32> = poisoned(10, 0.0);
    assert!(invalid(wf.mxfp8_decode(stream, 4, 256, &codes, &poisoned(32, 0u8), &mut out)), "short out");
    // The good call still runs after the refusals.
    wf.quantize_per_token_group(stream, 4, 256, &x, exact, &mut codes, &mut scales).unwrap();
}
