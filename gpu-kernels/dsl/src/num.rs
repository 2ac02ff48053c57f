//! Narrow float storage types for device code: `Bf16` and `F16` hold raw bits (layout-equal to
//! `half::bf16` / `half::f16` on the host) and convert through the hardware `cvt`; the 8-bit
//! `E4m3` and `E5m2` hold raw bytes (a `u8` on the host) that only tensor-core instructions read.

use crate::ptx::cvt;

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
