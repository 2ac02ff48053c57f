//! CPU tests of the quantisation math: the software FP8 encoders bit-exact against the `float8`
//! crate (a port of `cuda_fp8.hpp`'s satfinite conversion), e2m1 against its 16-value table, and
//! the scale rules on outliers, zeros, NaN, ±∞ and subnormal results.

use std::vec;
use std::vec::Vec;

use float8::{F8E4M3, F8E5M2};
use proptest::prelude::*;

use super::*;

/// The reference encode of `x` in `format`: `float8`'s satfinite RNE for the FP8 formats.
fn reference_fp8(format: Minifloat, x: f32) -> u8 {
    match format {
        Minifloat::E4m3 => F8E4M3::from_f32(x).to_bits(),
        Minifloat::E5m2 => F8E5M2::from_f32(x).to_bits(),
        Minifloat::E2m1 => reference_e2m1(x),
    }
}

/// The e2m1 magnitudes by code.
const E2M1: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Table-based e2m1: the nearest of the eight magnitudes, ties to the even code, past 6 → 6,
/// NaN → +0, the sign in bit 3.
fn reference_e2m1(x: f32) -> u8 {
    if x.is_nan() {
        return 0;
    }
    let sign = if x.is_sign_negative() { 8 } else { 0 };
    if x.abs() > 6.0 {
        return 7 | sign;
    }
    let a = x.abs() as f64;
    let mut best = 0usize;
    for (code, &v) in E2M1.iter().enumerate() {
        let (d, db) = ((a - v as f64).abs(), (a - E2M1[best] as f64).abs());
        if d < db || (d == db && code % 2 == 0) {
            best = code;
        }
    }
    best as u8 | sign
}

/// Encodes agree: bit-exact, except that only NaN-ness is compared for NaN inputs.
fn check_encode(format: Minifloat, x: f32) -> Result<(), TestCaseError> {
    let (ours, reference) = (format.encode(x), reference_fp8(format, x));
    if x.is_nan() && format != Minifloat::E2m1 {
        prop_assert!(format.decode(ours).is_nan(), "{format:?}({x}) = {ours:#x}, not NaN");
    } else {
        prop_assert_eq!(ours, reference, "{:?}({:e}) bits {:#x}", format, x, x.to_bits());
    }
    Ok(())
}

/// The e2m1 encoder against the table at every f32 within 4096 ulps of each rounding
/// midpoint and range boundary (both signs), where an off-by-one rounding would show.
#[test]
fn e2m1_encode_matches_the_table_around_every_midpoint() {
    for t in [0.25f32, 0.5, 0.75, 1.0, 1.25, 1.75, 2.0, 2.5, 3.5, 4.0, 5.0, 6.0, 8.0, f32::MIN_POSITIVE] {
        let bits = t.to_bits();
        for b in bits - 4096..=bits + 4096 {
            for x in [f32::from_bits(b), -f32::from_bits(b)] {
                assert_eq!(e2m1_encode(x), reference_e2m1(x), "{x:e} bits {:#x}", x.to_bits());
                assert_eq!(e2m1_encode_not_nan(x), reference_e2m1(x) as u32, "{x:e} bits {:#x}", x.to_bits());
            }
        }
    }
    for x in [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1e30, f32::NAN, -f32::NAN] {
        assert_eq!(e2m1_encode(x), reference_e2m1(x), "{x:e}");
    }
}

#[test]
fn fp8_encode_matches_float8_on_a_sweep_of_f32_bit_patterns() {
    for bits in (0..=u32::MAX).step_by(4099).chain([0x7f80_0000, 0xff80_0000, 0x8000_0000, 0x7fc0_0000]) {
        for format in [Minifloat::E4m3, Minifloat::E5m2, Minifloat::E2m1] {
            check_encode(format, f32::from_bits(bits)).unwrap();
        }
        let x = f32::from_bits(bits);
        assert_eq!(e2m1_encode(x), Minifloat::E2m1.encode(x), "{x:e}");
        if !x.is_nan() {
            assert_eq!(e2m1_encode_not_nan(x), e2m1_encode(x) as u32, "{x:e}");
        }
    }
}

#[test]
fn every_code_decodes_as_float8_and_round_trips() {
    for code in 0..=255u8 {
        for (format, reference) in
            [(Minifloat::E4m3, F8E4M3::from_bits(code).to_f32()), (Minifloat::E5m2, F8E5M2::from_bits(code).to_f32())]
        {
            let v = format.decode(code);
            if reference.is_nan() {
                assert!(v.is_nan(), "{format:?} {code:#x}");
                continue;
            }
            assert_eq!(v.to_bits(), reference.to_bits(), "{format:?} {code:#x}");
            if v.is_finite() {
                assert_eq!(format.encode(v), code, "{format:?} {code:#x} round trip");
            }
        }
    }
    for code in 0..16u8 {
        let v = Minifloat::E2m1.decode(code);
        let magnitude = E2M1[code as usize & 7];
        assert_eq!(v, if code & 8 == 8 { -magnitude } else { magnitude }, "e2m1 {code:#x}");
        assert_eq!(Minifloat::E2m1.encode(v), code, "e2m1 {code:#x} round trip");
    }
}

#[test]
fn specials_saturate_or_stay_nan() {
    assert_eq!(Minifloat::E4m3.encode(f32::INFINITY), 0x7e);
    assert_eq!(Minifloat::E4m3.encode(f32::NEG_INFINITY), 0xfe);
    assert_eq!(Minifloat::E4m3.encode(1e6), 0x7e);
    assert_eq!(Minifloat::E4m3.encode(464.0), 0x7e, "the tie above 448 rounds to even, not to NaN");
    assert_eq!(Minifloat::E5m2.encode(f32::INFINITY), 0x7b);
    assert_eq!(Minifloat::E5m2.encode(-1e9), 0xfb);
    assert_eq!(Minifloat::E2m1.encode(f32::INFINITY), 0x7);
    assert_eq!(Minifloat::E2m1.encode(-7.0), 0xf);
    assert_eq!(Minifloat::E4m3.encode(f32::NAN), 0x7f);
    assert_eq!(Minifloat::E5m2.encode(f32::NAN), 0x7f);
    assert_eq!(Minifloat::E2m1.encode(f32::NAN), 0);
    assert_eq!(Minifloat::E4m3.encode(-0.0), 0x80);
    // Subnormal results: e4m3's smallest subnormal is 2^-9, ties at 2^-10 go to zero.
    assert_eq!(Minifloat::E4m3.encode(exp2i(-9)), 0x01);
    assert_eq!(Minifloat::E4m3.encode(exp2i(-10)), 0x00);
    assert_eq!(Minifloat::E4m3.encode(3.0 * exp2i(-10)), 0x02);
    // e2m1 ties: 0.25 → 0, 0.75 → 1.0, 1.25 → 1.0, 2.5 → 2, 5 → 4.
    for (x, code) in [(0.25, 0), (0.75, 2), (1.25, 2), (1.75, 4), (2.5, 4), (3.5, 6), (5.0, 6), (5.01, 7)] {
        assert_eq!(Minifloat::E2m1.encode(x), code, "e2m1({x})");
        assert_eq!(e2m1_encode(-x), code | 8, "e2m1(-{x})");
    }
}

#[test]
fn scale_rules() {
    assert_eq!(scale_from_amax(0.0, 448.0, false), 1.0);
    assert_eq!(scale_from_amax(0.0, 448.0, true), 1.0);
    assert_eq!(scale_from_amax(448.0, 448.0, false), 1.0);
    assert_eq!(scale_from_amax(449.0, 448.0, true), 2.0);
    assert_eq!(scale_from_amax(1e-44, 448.0, false), f32::MIN_POSITIVE);
    assert_eq!(pow2_ceil(0.75), 1.0);
    assert_eq!(pow2_ceil(0.5), 0.5);
    assert_eq!(mx_scale_byte(0.0), UE8M0_ONE);
    assert_eq!(mx_scale_byte(448.0), 127, "floor(log2 448) = 8 → 2^0");
    assert_eq!(mx_scale_byte(1.0), 119);
    assert_eq!(mx_scale_byte(1e-40), 0, "clamped at 2^-127");
    assert_eq!(mx_scale_byte(f32::MAX), 246);
    assert!(mx_scale(UE8M0_NAN).is_nan());
    assert_eq!(nvfp4_global_scale(0.0), 1.0);
    assert_eq!(nvfp4_block_scale(1.0, 1.0, true), 0x7f);
    assert!(nvfp4_scale(0x7f, 1.0).is_nan());
    assert_eq!(nvfp4_encode(3.0, f32::NAN), 0);
    assert_eq!(nvfp4_encode(3.0, 0.0), 0);
}

#[test]
fn layouts() {
    assert_eq!(group_scale_pitch(1), Some(4));
    assert_eq!(group_scale_pitch(4), Some(4));
    assert_eq!(group_scale_pitch(5), Some(8));
    assert_eq!(group_scale_pitch(usize::MAX), None);
    assert_eq!(group_scale_index(3, 2, 8), 19);
    // 300 × 200 weight: 3 × 2 blocks.
    assert_eq!(block_scale_index(0, 0, 200), 0);
    assert_eq!(block_scale_index(0, 199, 200), 1);
    assert_eq!(block_scale_index(299, 130, 200), 5);
}

/// The quantisers' walks: a walker that starts at item `first` and advances by `step` sees
/// item `first + i · step` as (row, column) on its `i`-th advance, across row wraps, for
/// strides below, equal to and above the row length; and the per-token kernel's warps, each
/// starting at its index and stepping by the warp count, visit every (quad, group) once.
#[test]
fn grid_cursor_walks_by_a_fixed_stride() {
    for per_row in [1u32, 2, 7, 13, 15, 56, 64] {
        for step in [1u32, 3, 13, 64, 65, 1000, 8448] {
            for first in [0u32, 1, 5, step.saturating_sub(1)] {
                let mut cursor = GridCursor::new(first, step, per_row);
                for i in 0..200 {
                    let item = first + i * step;
                    assert_eq!(
                        (cursor.row, cursor.col),
                        (item / per_row, item % per_row),
                        "{first} + {i}·{step} / {per_row}"
                    );
                    cursor.advance();
                }
            }
        }
    }
    for (quads, per_row, warps) in [(750u32, 13u32, 8448u32), (2048, 15, 8448), (3, 56, 7), (1, 1, 32)] {
        let mut seen = vec![0u8; (quads * per_row) as usize];
        for warp in 0..warps {
            let (mut step, mut cursor) = (warp, GridCursor::new(warp, warps, per_row));
            while step < quads * per_row {
                seen[(cursor.row * per_row + cursor.col) as usize] += 1;
                cursor.advance();
                step += warps;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{quads} quads × {per_row} groups on {warps} warps");
    }
}

/// Exact widening of a 16-bit float's bits.
type Widen = fn(u16) -> f32;

/// The two 16-bit input formats: their +∞ bits and exact widening.
const HALF_FORMATS: [(u16, Widen); 2] =
    [(0x7f80, |h| half::bf16::from_bits(h).to_f32()), (0x7c00, |h| half::f16::from_bits(h).to_f32())];

/// Every bf16 and f16 bit pattern: a key is non-negative exactly when the value is finite, and
/// it decodes to the bits of `finite_abs` of the value (0 for ±∞ and NaN).
#[test]
fn magnitude_keys_of_every_16_bit_pattern() {
    for (nonfinite, widen) in HALF_FORMATS {
        let bias = magnitude_key_bias(nonfinite);
        for h in 0..=u16::MAX {
            let x = widen(h);
            let key = magnitude_keys(h as u32, bias) as u16;
            assert_eq!((key as i16) >= 0, x.is_finite(), "{h:#06x}");
            let back = widen(key_magnitude(key, bias));
            assert_eq!(back.to_bits(), finite_abs(x).to_bits(), "{h:#06x} → key {key:#06x}");
            // Both halves of a word are keyed independently, without carries.
            let pair = magnitude_keys((h as u32) << 16 | 0x8000 | h as u32, bias);
            assert_eq!((pair >> 16) as u16, key);
            assert_eq!(pair as u16, magnitude_keys(h as u32 | 0x8000, bias) as u16);
        }
    }
}

/// A 128-element group of values in ±`spread`, with optional 1e4 spikes.
fn group() -> impl Strategy<Value = Vec<f32>> {
    (prop::collection::vec(-1.0f32..1.0, GROUP), 1e-30f32..1e4, prop::collection::vec(0..GROUP, 0..3)).prop_map(
        |(mut v, spread, spikes)| {
            v.iter_mut().for_each(|x| *x *= spread);
            spikes.into_iter().for_each(|i| v[i] = if i % 2 == 0 { 1e4 } else { -1e4 });
            v
        },
    )
}

proptest! {
    #[test]
    fn fp8_encode_matches_float8(bits in any::<u32>()) {
        for format in [Minifloat::E4m3, Minifloat::E5m2, Minifloat::E2m1] {
            check_encode(format, f32::from_bits(bits))?;
        }
        prop_assert_eq!(e2m1_encode(f32::from_bits(bits)), Minifloat::E2m1.encode(f32::from_bits(bits)));
    }

    /// A group quantised with its scale dequantises within half a step of e4m3 at each value
    /// (a relative 2^-4, or the subnormal step 2^-10 · scale near zero); the amax element maps
    /// to ±448 exactly without pow2 and within [224, 448] with it.
    #[test]
    fn group_round_trip(v in group(), pow2 in any::<bool>()) {
        let amax = v.iter().fold(0.0, |a, &x| amax_combine(a, finite_abs(x)));
        let scale = scale_from_amax(amax, 448.0, pow2);
        prop_assert!(scale.is_finite() && scale > 0.0);
        if pow2 {
            prop_assert_eq!(scale.to_bits() & 0x007f_ffff, 0);
        }
        for &x in &v {
            let q = quantize(Minifloat::E4m3, x, scale);
            let back = Minifloat::E4m3.decode(q) as f64 * scale as f64;
            let bound = (x.abs() as f64 / 16.0).max(exp2i(-10) as f64 * scale as f64) * 1.0001;
            prop_assert!((back - x as f64).abs() <= bound, "x {x} scale {scale} q {q:#x} back {back}");
            if x.abs() == amax {
                let top = Minifloat::E4m3.decode(q).abs();
                prop_assert!(if pow2 { (224.0..=448.0).contains(&top) } else { top == 448.0 }, "amax → {top}");
            }
        }
    }

    /// The signed maximum of the keys of any 16-bit words is the key of their finite amax.
    #[test]
    fn key_maximum_is_the_finite_amax(words in prop::collection::vec(any::<u32>(), 1..64), specials in prop::collection::vec((0..128usize, 0..4u16), 0..4)) {
        let mut halves: Vec<u16> = words.iter().flat_map(|&w| [w as u16, (w >> 16) as u16]).collect();
        for (at, which) in specials {
            let n = halves.len();
            halves[at % n] = [0x7f80, 0xff80, 0x7fc1, 0x0000][which as usize];
        }
        for (nonfinite, widen) in HALF_FORMATS {
            let bias = magnitude_key_bias(nonfinite);
            let key = halves.iter().fold(0u16, |k, &h| key_max(k, magnitude_keys(h as u32, bias) as u16));
            let amax = halves.iter().fold(0.0, |a, &h| amax_combine(a, finite_abs(widen(h))));
            prop_assert_eq!(widen(key_magnitude(key, bias)).to_bits(), amax.to_bits());
        }
    }

    /// NaN and ±∞ leave the scale to the finite values; ±∞ saturates, NaN stays NaN.
    #[test]
    fn specials_in_a_group(v in group(), at in 0..GROUP, special in 0..3u8) {
        let mut v = v;
        v[at] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][special as usize];
        let amax = v.iter().fold(0.0, |a, &x| amax_combine(a, finite_abs(x)));
        prop_assert!(amax.is_finite());
        let q = quantize(Minifloat::E4m3, v[at], scale_from_amax(amax, 448.0, false));
        match special {
            0 => prop_assert!(Minifloat::E4m3.decode(q).is_nan()),
            1 => prop_assert_eq!(q, 0x7e),
            _ => prop_assert_eq!(q, 0xfe),
        }
    }

    /// The MX exponent puts the block's amax in [256, 512) before the element cast (values past
    /// 448 saturate), unless clamped; the rest dequantise within e4m3's relative step.
    #[test]
    fn mx_round_trip(v in prop::collection::vec(-1.0f32..1.0, MX_BLOCK), spread in 1e-30f32..1e30) {
        let v: Vec<f32> = v.into_iter().map(|x| x * spread).collect();
        let amax = v.iter().fold(0.0, |a, &x| amax_combine(a, finite_abs(x)));
        let byte = mx_scale_byte(amax);
        if amax > 0.0 && byte > 0 {
            let top = amax * exp2i(127 - byte as i32);
            prop_assert!((256.0..512.0).contains(&top), "amax {amax} byte {byte}: {top}");
        }
        for &x in &v {
            let back = mx_decode(mx_encode(x, byte), byte) as f64;
            let bound = (x.abs() as f64 / 16.0).max(amax as f64 / 7.0 / 16.0) ;
            // Past 448 · scale the OCP rule saturates (the block's top octave is [256, 512)).
            let saturated = x.abs() as f64 - 448.0 * mx_scale(byte) as f64;
            let bound = bound.max(mx_scale(byte) as f64 * exp2i(-10) as f64).max(saturated);
            prop_assert!((back - x as f64).abs() <= bound, "x {x:e} back {back:e} byte {byte} amax {amax:e}");
        }
    }

    /// NVFP4 blocks dequantise within a quarter of the block's amax (e2m1's top step is 1/6 of
    /// it, plus the e4m3 rounding of the block scale).
    #[test]
    fn nvfp4_round_trip(v in prop::collection::vec(-1.0f32..1.0, NVFP4_BLOCK), spread in 1e-3f32..1e4, tensor in 1.0f32..100.0) {
        let v: Vec<f32> = v.into_iter().map(|x| x * spread).collect();
        let block_amax = v.iter().fold(0.0, |a, &x| amax_combine(a, finite_abs(x)));
        let global = nvfp4_global_scale(block_amax * tensor);
        let scale = nvfp4_scale(nvfp4_block_scale(block_amax, global, false), global);
        for &x in &v {
            let back = nvfp4_decode(nvfp4_encode(x, scale), scale);
            prop_assert!(((back - x).abs() as f64) <= block_amax as f64 * 0.25 + global as f64 * 6.0 * exp2i(-9) as f64,
                "x {x} back {back} amax {block_amax} global {global}");
        }
    }
}

/// A seeded xorshift64 stream: the tests' reproducible random bits.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Every non-negative finite value of a 16-bit format (bits below `nonfinite`), widened.
fn non_negative_finite(nonfinite: u16, widen: Widen) -> Vec<f32> {
    (0..nonfinite).map(widen).collect()
}

/// The fast block scale against the two divisions for one block amax under `global`: never
/// NaN, the same e4m3 byte, and the same bits wherever the reference is in [2^-100, 2^100].
fn check_block_scale(block_amax: f32, global: f32, divisor: Nvfp4Divisor) {
    let fast = nvfp4_block_scale_value_fast(block_amax, divisor);
    let reference = nvfp4_block_scale_value(block_amax, global);
    let in_range = (exp2i(-100)..=exp2i(100)).contains(&reference);
    let same = if in_range {
        fast.to_bits() == reference.to_bits()
    } else {
        !fast.is_nan() && Minifloat::E4m3.encode(fast) == Minifloat::E4m3.encode(reference)
    };
    assert!(same, "block amax {block_amax:e} global {global:e}: {fast:e}, reference {reference:e}");
}

/// `x / 6` through the reciprocal is `x / 6` at every non-negative finite bf16 and f16.
#[test]
fn division_by_six_through_the_reciprocal_is_exact_on_every_16_bit_value() {
    for (nonfinite, widen) in HALF_FORMATS {
        for x in non_negative_finite(nonfinite, widen) {
            let fast = div_by_reciprocal(x, 6.0, INV_E2M1_MAX);
            assert_eq!(fast.to_bits(), (x / 6.0).to_bits(), "{x:e}");
        }
    }
}

/// The fast block scale on every block amax under the tightest tensor amax (the block's own)
/// and on four million seeded random pairs of 16-bit block and tensor amaxes, either format.
#[test]
fn fast_block_scale_matches_the_divisions_on_sampled_pairs() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    for (nonfinite, widen) in HALF_FORMATS {
        let values = non_negative_finite(nonfinite, widen);
        for &x in &values {
            let global = nvfp4_global_scale(x);
            check_block_scale(x, global, Nvfp4Divisor::new(global));
        }
        for _ in 0..2_000_000 {
            let r = next();
            let (block_amax, amax) = (values[(r as usize) % values.len()], values[(r >> 32) as usize % values.len()]);
            let global = nvfp4_global_scale(amax);
            check_block_scale(block_amax, global, Nvfp4Divisor::new(global));
        }
    }
}

/// The fast block scale under global scales a caller chose (static scaling): four million
/// seeded pairs of a random f32 global scale across the whole accepted range
/// ([`nvfp4_static_global_scale_ok`]) and a 16-bit block amax, either format, blocks far
/// above the global's `6 · 448` range among them.
#[test]
fn fast_block_scale_matches_the_divisions_under_any_accepted_global_scale() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
    for (nonfinite, widen) in HALF_FORMATS {
        let values = non_negative_finite(nonfinite, widen);
        let mut checked = 0;
        while checked < 2_000_000 {
            let r = next();
            let global = f32::from_bits((r >> 32) as u32 & 0x7fff_ffff);
            if !nvfp4_static_global_scale_ok(global) {
                continue;
            }
            check_block_scale(values[r as usize % values.len()], global, Nvfp4Divisor::new(global));
            checked += 1;
        }
    }
}

/// The accepted static global scales: positive normal f32 below 2^117, nothing else.
#[test]
fn static_global_scales_outside_the_divisor_range_are_refused() {
    for ok in [f32::MIN_POSITIVE, 1e-30, 1.0, 1.0 / 2688.0, 1e35, exp2i(117).next_down()] {
        assert!(nvfp4_static_global_scale_ok(ok), "{ok:e}");
    }
    for bad in [0.0, -0.0, -1.0, f32::MIN_POSITIVE / 2.0, exp2i(117), f32::MAX, f32::INFINITY, f32::NAN] {
        assert!(!nvfp4_static_global_scale_ok(bad), "{bad:e}");
    }
    for ok in [f32::MIN_POSITIVE, 1.0, f32::MAX] {
        assert!(static_scale_ok(ok), "{ok:e}");
    }
    for bad in [0.0, -2.0, f32::MIN_POSITIVE / 2.0, f32::INFINITY, f32::NAN] {
        assert!(!static_scale_ok(bad), "{bad:e}");
    }
}

/// The fast block scale on every pair of non-negative finite block amax and tensor amax of
/// bf16 and of f16 (2 · 2^30 pairs: run once with `cargo test --release -- --ignored`).
#[test]
#[ignore = "exhaustive, about 2 · 10^9 pairs: run in release"]
fn fast_block_scale_matches_the_divisions_on_every_16_bit_pair() {
    for (nonfinite, widen) in HALF_FORMATS {
        let values = non_negative_finite(nonfinite, widen);
        let half = values.len() / 2;
        std::thread::scope(|s| {
            for part in [&values[..half], &values[half..]] {
                let values = &values;
                s.spawn(move || {
                    for &amax in part {
                        let global = nvfp4_global_scale(amax);
                        let divisor = Nvfp4Divisor::new(global);
                        for &block_amax in values {
                            check_block_scale(block_amax, global, divisor);
                        }
                    }
                });
            }
        });
    }
}

/// The non-NaN e2m1 encoder against the table on every f32 bit pattern but the NaNs (2^32:
/// run once with `cargo test --release -- --ignored`).
#[test]
#[ignore = "exhaustive, 2^32 patterns: run in release"]
fn e2m1_encode_matches_the_table_on_every_f32() {
    std::thread::scope(|s| {
        for half in [0u32, 1] {
            s.spawn(move || {
                for low in 0..=u32::MAX >> 1 {
                    let x = f32::from_bits(half << 31 | low);
                    if !x.is_nan() {
                        assert_eq!(e2m1_encode_not_nan(x), reference_e2m1(x) as u32, "{x:e} bits {:#x}", x.to_bits());
                    }
                }
            });
        }
    });
}

/// The constructed e2m1 value of every code is the decoder's, bit for bit (±0 included).
#[test]
fn e2m1_tiny_is_every_code_scaled_down() {
    for code in 0..16u32 {
        let built = e2m1_tiny((code << 28) | (0x0fff_ffff * (code & 1))) * E2M1_UP;
        assert_eq!(built.to_bits(), Minifloat::E2m1.decode(code as u8).to_bits(), "code {code:#x}");
    }
}

/// Scales for the decode tests: specials, subnormals, the fused form's limit 4 and its
/// neighbours, every e4m3 value times a few globals, and a stride through all f32 patterns.
fn decode_scales() -> Vec<f32> {
    let mut scales = vec![
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x0040_0001),
        exp2i(-127),
        exp2i(-149),
        4.0,
        -4.0,
        f32::from_bits(4.0f32.to_bits() - 1),
        f32::from_bits(4.0f32.to_bits() + 1),
        exp2i(127),
        1.0 / 3.0,
    ];
    for byte in 0..=255u8 {
        for global in [1.0, f32::MIN_POSITIVE, 1.0 / 2688.0, 3.7e-3, 1e30] {
            scales.push(nvfp4_scale(byte, global));
        }
    }
    scales.extend((0..=u32::MAX).step_by(1021).map(f32::from_bits));
    scales
}

/// Both decode forms are `nvfp4_decode` at every code and nibble position over the scales
/// (NaN: both NaN); the fused one wherever `scale · 2^126` is finite, which is `|scale| < 4`.
#[test]
fn decode_by_construction_matches_the_decoder() {
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for scale in decode_scales() {
        let up_scale = scale * E2M1_UP;
        // The kernel's test for the fused form.
        assert_eq!(scale.abs() < 4.0, up_scale.abs() < f32::INFINITY, "{scale:e}");
        for code in 0..16u32 {
            let reference = nvfp4_decode(code as u8, scale);
            for j in 0..8 {
                let word = (code << (4 * j)) | (0x9696_9696 & !(0xf << (4 * j)));
                let top = word << (28 - 4 * j);
                assert!(same(nvfp4_decode_top(top, scale), reference), "code {code} scale {scale:e}");
                if up_scale.abs() < f32::INFINITY {
                    assert!(same(nvfp4_decode_top_fused(top, up_scale), reference), "code {code} scale {scale:e}");
                }
            }
        }
    }
}

/// The packed fast form is `nvfp4_encode` of each element (and the generic encoder of each
/// product) on every seventh bf16 and f16 bit pattern but the NaNs, in every nibble position,
/// under every effective scale it applies to among every e4m3 byte times a range of global
/// scales (the smallest included, where the reciprocal of the smallest scales overflows and the
/// reference path is taken instead).
#[test]
fn encode8_by_inverse_matches_nvfp4_encode() {
    let mut checked = 0u64;
    for byte in 0..=255u8 {
        for global in [f32::MIN_POSITIVE, 3.0 * f32::MIN_POSITIVE, exp2i(-100), 1.0 / 2688.0, 0.37, 1.0, 1e20, 1e34] {
            let scale = nvfp4_scale(byte, global);
            let inverse = 1.0 / scale;
            if !(scale > 0.0 && inverse < f32::INFINITY) {
                continue;
            }
            for (_, widen) in HALF_FORMATS {
                let values: Vec<f32> = (0..=u16::MAX).step_by(7).map(widen).filter(|x| !x.is_nan()).collect();
                for (n, chunk) in values.chunks_exact(8).enumerate() {
                    // Rotate so every value visits every nibble.
                    let mut v: [f32; 8] = chunk.try_into().unwrap();
                    v.rotate_left(n % 8);
                    let word = nvfp4_encode8_by_inverse(v, inverse);
                    for (i, &x) in v.iter().enumerate() {
                        let code = (word >> (4 * i)) & 0xf;
                        assert_eq!(code, nvfp4_encode(x, scale) as u32, "{x:e} scale {scale:e}");
                        assert_eq!(code, Minifloat::E2m1.encode(x * inverse) as u32, "{x:e} scale {scale:e}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 10_000_000, "{checked}");
}

/// The branch-free UE8M0 scale is `2^(byte − 127)` for every byte but 0xFF, which is
/// `f32::NAN` bit for bit.
#[test]
fn mx_scale_of_every_byte() {
    for byte in 0..=255u8 {
        let want = if byte == UE8M0_NAN { f32::NAN } else { exp2i(byte as i32 - 127) };
        assert_eq!(mx_scale(byte).to_bits(), want.to_bits(), "{byte:#x}");
    }
}

/// The host's software fused multiply-add against core's (the hardware's rounding) on random
/// bit patterns, on products that nearly cancel the addend, and on the specials.
#[test]
fn software_fma_rounds_once() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    let specials =
        [0.0f32, -0.0, 1.0, -1.0, f32::MIN_POSITIVE, 1e-45, f32::MAX, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let check = |a: f32, b: f32, c: f32| {
        let (want, got) = (core::f32::math::mul_add(a, b, c), super::fma_exact_f64(a, b, c));
        assert!(
            want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
            "fma({a:e}, {b:e}, {c:e}) = {got:e}, want {want:e}"
        );
    };
    for &a in &specials {
        for &b in &specials {
            for &c in &specials {
                check(a, b, c);
            }
        }
    }
    for _ in 0..2_000_000 {
        let r = next();
        let (a, b) = (f32::from_bits(r as u32), f32::from_bits((r >> 32) as u32));
        let c = f32::from_bits(next() as u32);
        check(a, b, c);
        // Near cancellation: c ≈ −a·b, off by a few ulps either way.
        let p = a * b;
        if p.is_finite() {
            let jitter = (next() % 9) as i32 - 4;
            check(a, b, -f32::from_bits(p.to_bits().wrapping_add(jitter as u32)));
        }
    }
}

/// The NVFP4 encoder's block walk covers every block exactly once, whatever the vector count
/// (even) and the grid, and each lane's block is two consecutive vectors that it or its
/// neighbour (`lane ^ 1`) loaded in the same step.
#[test]
fn the_block16_walk_covers_every_block_once() {
    for n_vec in [2u32, 30, 62, 64, 66, 126, 128, 1000, 4098, 12_346] {
        for threads in [32u32, 64, 96, 256, 1024] {
            let mut seen = vec![0u32; n_vec as usize / 2];
            for warp in 0..threads / 32 {
                let mut base = warp * BLOCK16_WARP_VECTORS;
                while base < n_vec {
                    let loads = |lane: u32| {
                        let v = base + block16_load_offset(lane);
                        [v, v + 16]
                    };
                    for lane in 0..32 {
                        let first = block16_first_vector(base, lane);
                        assert_eq!(first % 2, 0, "a block starts on an even vector");
                        let held = [loads(lane), loads(lane ^ 1)].concat();
                        assert!(held.contains(&first) && held.contains(&(first + 1)), "lane {lane} at {base}");
                        if first < n_vec {
                            seen[first as usize / 2] += 1;
                        }
                    }
                    base += 2 * threads;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n_vec {n_vec}, {threads} threads: {seen:?}");
        }
    }
}
