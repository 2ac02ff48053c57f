//! The fuzzer on the quantisers' per-token (1 × 128) and per-block (128 × 128) FP8 entry points:
//! any rows and columns (extremes included), bf16 and f16, both scale roundings, and views of
//! x, the codes and the scales at offsets (misaligned for 16-byte vectors; per-token scales
//! must be aligned too) and of mismatched
//! lengths. Each call is refused with a typed error exactly when the oracle says so, else its
//! codes and scales match `logic::quant` bit for bit and nothing outside the views is written.

use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::logic::quant::Minifloat;
use warpforge::{QuantInput, QuantScheme, ScaleRounding};

use super::{Tally, draw, outcome, size, view};
use crate::common::{Element, View, gpu, random_f32};
use crate::gpu_quant::{reference_block, reference_group, same_code};

const QUANT_CASES: usize = 200;
/// Largest input (elements) the fuzzer quantises for real; larger valid calls get small
/// buffers and must be refused.
const MAX_ELEMENTS: usize = 1 << 20;
/// Poisoned entries after each output view.
const TAIL: usize = 5;
const POISON: u8 = 0x7f;

/// Why the oracle refuses a call on buffers placed per `views` (x, codes, scales), if it does.
fn oracle<T>(scheme: QuantScheme, rows: usize, cols: usize, views: [View; 3]) -> Option<&'static str> {
    let Ok(e) = scheme.extents(rows, cols) else { return Some("shape") };
    let [vx, vc, vs] = views;
    if vx.len(e.elements) < e.elements || vc.len(e.codes) < e.codes || vs.len(e.scales) < e.scales {
        return Some("buffer too short");
    }
    let misaligned = |offset_bytes: usize| !offset_bytes.is_multiple_of(16);
    if misaligned(vx.offset * std::mem::size_of::<T>()) || misaligned(vc.offset) {
        return Some("alignment");
    }
    // The per-token kernel writes four rows' f32 scales with one 16-byte store.
    if scheme == QuantScheme::PerTokenGroup && misaligned(vs.offset * std::mem::size_of::<f32>()) {
        return Some("scale alignment");
    }
    None
}

/// One call of `scheme` on `T`.
fn fuzz_one<T: QuantInput + Element>(
    scheme: QuantScheme,
    rows: usize,
    cols: usize,
    pow2: bool,
    views: [View; 3],
    seed: u64,
    tally: &mut Tally,
) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let rounding = if pow2 { ScaleRounding::PowerOfTwo } else { ScaleRounding::Exact };
    let what = (scheme, rows, cols, pow2, views, std::any::type_name::<T>());
    let extents = scheme.extents(rows, cols).ok().filter(|e| e.elements <= MAX_ELEMENTS);
    let invalid = oracle::<T>(scheme, rows, cols, views);
    let Some(e) = extents else {
        // A shape the oracle refuses, or too large to run here: small buffers, to be refused.
        let call = || {
            let x = stream.clone_htod(&vec![T::of(1.0); 64]).unwrap();
            let mut codes = stream.clone_htod(&vec![POISON; 64]).unwrap();
            let mut scales = stream.clone_htod(&vec![f32::NAN; 64]).unwrap();
            match scheme {
                QuantScheme::PerTokenGroup => {
                    wf.quantize_per_token_group(stream, rows, cols, &x, rounding, &mut codes, &mut scales)?
                }
                _ => wf.quantize_per_block(stream, rows, cols, &x, rounding, &mut codes, &mut scales)?,
            }
            let written = stream.clone_dtoh(&codes).unwrap().iter().filter(|&&c| c != POISON).count();
            assert_eq!(written, 0, "{written} codes written by a refused call");
            Ok(())
        };
        tally.record(&what, Some(invalid.unwrap_or("buffer too short")), outcome(call));
        return;
    };
    let [vx, vc, vs] = views;
    let call = || {
        let values: Vec<T> = random_f32(seed, vx.alloc(e.elements), 2.0).into_iter().map(T::of).collect();
        let x = stream.clone_htod(&values).unwrap();
        let codes_before = vec![POISON; vc.alloc(e.codes) + TAIL];
        let scales_before = vec![f32::NAN; vs.alloc(e.scales) + TAIL];
        let mut codes = stream.clone_htod(&codes_before).unwrap();
        let mut scales = stream.clone_htod(&scales_before).unwrap();
        let result = {
            let x_view = x.slice(vx.range(e.elements));
            let mut codes_view = codes.slice_mut(vc.range(e.codes));
            let mut scales_view = scales.slice_mut(vs.range(e.scales));
            match scheme {
                QuantScheme::PerTokenGroup => wf.quantize_per_token_group(
                    stream,
                    rows,
                    cols,
                    &x_view,
                    rounding,
                    &mut codes_view,
                    &mut scales_view,
                ),
                _ => wf.quantize_per_block(stream, rows, cols, &x_view, rounding, &mut codes_view, &mut scales_view),
            }
        };
        let (got_codes, got_scales) = (stream.clone_dtoh(&codes).unwrap(), stream.clone_dtoh(&scales).unwrap());
        let (code_range, scale_range) = if result.is_ok() {
            (vc.offset..vc.offset + e.codes, vs.offset..vs.offset + e.scales)
        } else {
            (0..0, 0..0)
        };
        let stray = (0..got_codes.len()).filter(|i| !code_range.contains(i) && got_codes[*i] != POISON).count()
            + (0..got_scales.len()).filter(|i| !scale_range.contains(i) && !got_scales[*i].is_nan()).count();
        assert_eq!(stray, 0, "{stray} codes or scales written outside the outputs");
        result?;
        let seen: Vec<f32> = values[vx.offset..vx.offset + e.elements].iter().map(|v| v.f64() as f32).collect();
        let (want_codes, want_scales) = match scheme {
            QuantScheme::PerTokenGroup => reference_group(&seen, rows, cols, pow2),
            _ => reference_block(&seen, rows, cols, pow2),
        };
        let bad_scale = (0..e.scales).find(|&i| {
            let (g, w) = (got_scales[vs.offset + i], want_scales[i]);
            g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan())
        });
        assert!(bad_scale.is_none(), "scale {bad_scale:?} differs from the reference");
        let bad_code = (0..e.codes).find(|&i| !same_code(Minifloat::E4m3, got_codes[vc.offset + i], want_codes[i]));
        assert!(bad_code.is_none(), "code {bad_code:?} differs from the reference");
        Ok(())
    };
    tally.record(&what, invalid, outcome(call));
}

/// Per-token and per-block FP8 quantisation over arbitrary shapes and buffer placements:
/// each call a typed refusal exactly when the oracle says so, else bit-exact.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gpu_fuzz_quantisers_return_a_typed_error_or_a_verified_result() {
    let cols =
        prop_oneof![3 => (1usize..24).prop_map(|g| g * 128), 1 => (1usize..400).prop_map(|c| c * 8), 1 => size(3000)];
    let scheme = prop::sample::select(vec![QuantScheme::PerTokenGroup, QuantScheme::PerBlock]);
    let cases = draw(
        (scheme, size(300), cols, any::<bool>(), any::<bool>(), [view(), view(), view()], any::<u64>()),
        QUANT_CASES,
        5,
    );
    let mut tally = Tally::new("quantize_per_token_group / quantize_per_block");
    for &(scheme, rows, cols, pow2, f16_input, views, seed) in &cases {
        if tally.faulted {
            break;
        }
        if f16_input {
            fuzz_one::<f16>(scheme, rows, cols, pow2, views, seed, &mut tally);
        } else {
            fuzz_one::<bf16>(scheme, rows, cols, pow2, views, seed, &mut tally);
        }
    }
    tally.finish();
}
