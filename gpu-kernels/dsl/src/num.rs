//! Narrow float storage types for device code: `Bf16` and `F16` hold raw bits (layout-equal to
//! `half::bf16` / `half::f16` on the host) and convert through the hardware `cvt`; the 8-bit
//! `E4m3` and `E5m2` hold raw bytes (a `u8` on the host), converted in pairs and quads by the
//! sm_89+ FP8 `cvt` forms (f32 and f16 pairs directly, bf16 through f32; see [`crate::ptx::cvt`]).
//!
//! [`E2m1`] (FP4) packs and unpacks eight codes to a 32-bit word with the sm_100a conversions;
//! sm_90 has none (`logic::quant` encodes e2m1 in software there).
//!
//! Packing order everywhere: element 0 in the low bits, which is the lower address in memory.

use crate::ptx::cvt;
use crate::regs::{Regs4, Regs8};

/// bfloat16, stored as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bf16(pub u16);

/// IEEE half precision, stored as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct F16(pub u16);

/// FP8 E4M3 (4 exponent bits, 3 mantissa bits, no infinities), stored as its byte.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct E4m3(pub u8);

/// FP8 E5M2 (5 exponent bits, 2 mantissa bits), stored as its byte.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct E5m2(pub u8);

impl Bf16 {
    /// Widens exactly.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        // SAFETY: conversion instruction, no preconditions on sm_90.
        unsafe { cvt::cvt_f32_bf16(self.0) }
    }
    /// Rounds to nearest even.
    #[inline(always)]
    pub fn from_f32(f: f32) -> Self {
        // SAFETY: conversion instruction.
        Bf16(unsafe { cvt::cvt_rn_bf16_f32(f) })
    }
    /// Rounds two values into one 32-bit word (`lo` in the low half, the lower address in
    /// memory), with one conversion instruction.
    #[inline(always)]
    pub fn pack2(lo: f32, hi: f32) -> u32 {
        // SAFETY: conversion instruction.
        unsafe { cvt::cvt_rn_bf16x2_f32(hi, lo) }
    }
}

impl F16 {
    /// Widens exactly.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        // SAFETY: conversion instruction.
        unsafe { cvt::cvt_f32_f16(self.0) }
    }
    /// Rounds to nearest even.
    #[inline(always)]
    pub fn from_f32(f: f32) -> Self {
        // SAFETY: conversion instruction.
        F16(unsafe { cvt::cvt_rn_f16_f32(f) })
    }
    /// Rounds two values into one 32-bit word (`lo` in the low half), as [`Bf16::pack2`].
    #[inline(always)]
    pub fn pack2(lo: f32, hi: f32) -> u32 {
        // SAFETY: conversion instruction.
        unsafe { cvt::cvt_rn_f16x2_f32(hi, lo) }
    }
}

impl Bf16 {
    /// The two values of a packed pair (`lo` from the low half, as [`Bf16::pack2`] packs),
    /// widened exactly: a bf16 is the upper half of an f32, so this is two integer operations.
    #[inline(always)]
    pub fn unpack2(word: u32) -> (f32, f32) {
        (f32::from_bits(word << 16), f32::from_bits(word & 0xffff_0000))
    }
}

impl F16 {
    /// The two values of a packed pair (`lo` from the low half, as [`F16::pack2`] packs),
    /// widened exactly.
    #[inline(always)]
    pub fn unpack2(word: u32) -> (f32, f32) {
        (F16(word as u16).to_f32(), F16((word >> 16) as u16).to_f32())
    }
}

macro_rules! fp8 {
    ($($t:ident: $max:literal, $from_f32:ident, $from_f16x2:ident, $to_f16x2:ident;)*) => {$(
        impl $t {
            #[doc = concat!("Largest finite magnitude: where the saturating conversions clamp (±", $max, ").")]
            pub const MAX: f32 = $max;

            /// Rounds to nearest even, saturating to ±[`Self::MAX`] (NaN stays NaN).
            #[inline(always)]
            pub fn from_f32(f: f32) -> Self {
                $t(Self::pack2(f, 0.0) as u8)
            }
            /// Widens exactly.
            #[inline(always)]
            pub fn to_f32(self) -> f32 {
                Self::unpack2(self.0 as u16).0
            }
            /// Rounds two values into one 16-bit pair (`lo` in the low byte, the lower address
            /// in memory) with one saturating conversion instruction.
            #[inline(always)]
            pub fn pack2(lo: f32, hi: f32) -> u16 {
                // SAFETY: conversion instruction, sm_89+.
                unsafe { cvt::$from_f32(hi, lo) }
            }
            /// Rounds a packed f16 pair into one FP8 pair (low half to low byte), saturating.
            #[inline(always)]
            pub fn pack2_f16x2(word: u32) -> u16 {
                // SAFETY: conversion instruction, sm_89+.
                unsafe { cvt::$from_f16x2(word) }
            }
            /// Rounds a packed bf16 pair into one FP8 pair (low half to low byte), saturating:
            /// through f32, since sm_90 has no bf16x2 → FP8 conversion (widening bf16 is exact).
            #[inline(always)]
            pub fn pack2_bf16x2(word: u32) -> u16 {
                let (lo, hi) = Bf16::unpack2(word);
                Self::pack2(lo, hi)
            }
            /// Widens an FP8 pair exactly to a packed f16 pair (low byte to low half).
            #[inline(always)]
            pub fn unpack2_f16x2(pair: u16) -> u32 {
                // SAFETY: conversion instruction, sm_89+.
                unsafe { cvt::$to_f16x2(pair) }
            }
            /// Widens an FP8 pair exactly to a packed bf16 pair (low byte to low half), through
            /// f16 and f32 (every FP8 value is a bf16).
            #[inline(always)]
            pub fn unpack2_bf16x2(pair: u16) -> u32 {
                let (lo, hi) = Self::unpack2(pair);
                Bf16::pack2(lo, hi)
            }
            /// Widens an FP8 pair exactly to `(lo, hi)` f32.
            #[inline(always)]
            pub fn unpack2(pair: u16) -> (f32, f32) {
                F16::unpack2(Self::unpack2_f16x2(pair))
            }
            /// Rounds four values into one 32-bit word (element `i` in byte `i`), saturating.
            #[inline(always)]
            pub fn pack4(v: Regs4<f32>) -> u32 {
                Self::pack2(v.0, v.1) as u32 | (Self::pack2(v.2, v.3) as u32) << 16
            }
            /// Widens four FP8 values (byte `i` to element `i`) exactly.
            #[inline(always)]
            pub fn unpack4(word: u32) -> Regs4<f32> {
                let ((a, b), (c, d)) = (Self::unpack2(word as u16), Self::unpack2((word >> 16) as u16));
                Regs4(a, b, c, d)
            }
        }
    )*};
}

fp8! {
    E4m3: 448.0, cvt_rn_satfinite_e4m3x2_f32, cvt_rn_satfinite_e4m3x2_f16x2, cvt_rn_f16x2_e4m3x2;
    E5m2: 57344.0, cvt_rn_satfinite_e5m2x2_f32, cvt_rn_satfinite_e5m2x2_f16x2, cvt_rn_f16x2_e5m2x2;
}

/// FP4 E2M1 (2 exponent bits, 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}), two codes to a
/// byte, handled eight at a time in one 32-bit word (code `i` in bits `4i..4i + 4`).
#[derive(Clone, Copy, Debug)]
pub struct E2m1;

impl E2m1 {
    /// Rounds eight values to nearest even, saturating to ±6 (±∞ too), into one word. NaN has
    /// no code: callers keep it out (NVFP4 marks a block holding one by its scale instead).
    ///
    /// # Safety
    /// sm_100a only (the conversion does not exist on sm_90).
    #[inline(always)]
    pub unsafe fn pack8(v: Regs8<f32>) -> u32 {
        // SAFETY: forwarded to the caller (sm_100a).
        unsafe { cvt::cvt_rn_satfinite_e2m1x2_f32_x4([v.0, v.1, v.2, v.3, v.4, v.5, v.6, v.7]) }
    }

    /// Widens the eight codes of `word` exactly.
    ///
    /// # Safety
    /// sm_100a only (the conversion does not exist on sm_90).
    #[inline(always)]
    pub unsafe fn unpack8(word: u32) -> Regs8<f32> {
        // SAFETY: forwarded to the caller (sm_100a).
        let [p0, p1, p2, p3] = unsafe { cvt::cvt_rn_f16x2_e2m1x2_x4(word) };
        let ((a, b), (c, d)) = (F16::unpack2(p0), F16::unpack2(p1));
        let ((e, f), (g, h)) = (F16::unpack2(p2), F16::unpack2(p3));
        Regs8(a, b, c, d, e, f, g, h)
    }
}
