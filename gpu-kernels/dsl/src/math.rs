//! Device math: square roots, reciprocals, exponentials and logarithms, and the activations
//! epilogues use, each naming the PTX it emits and whether it is approximate.
//!
//! The approximate forms run on the special-function units; their error bounds are the PTX
//! ISA's. An epilogue that writes bf16 or f16 cannot see them, and f32 outputs carry them (about
//! 2^-11 relative for the tanh-based GELU).
//!
//! # What `core` gives on nvptx
//!
//! Measured by compiling each function for `nvptx64-nvidia-cuda` (sm_90a) and reading the PTX:
//!
//! | Rust | PTX | note |
//! | --- | --- | --- |
//! | `a + b`, `a - b`, `a * b` | `add.rn.f32`, `sub.rn.f32`, `mul.rn.f32` | `a * b + c` stays a `mul.rn` and an `add.rn` (no contraction; `.rn` also keeps ptxas from fusing them): write [`fma`] to fuse |
//! | `a / b` | `div.rn.f32` | IEEE, a multi-instruction sequence; multiply by [`rcp_approx`] when 1 ulp will do |
//! | `1.0 / x` | `rcp.rn.f32` | IEEE; see [`rcp`] |
//! | `-x`, `x.abs()`, `x.copysign(y)` | `neg.f32`, `abs.f32`, `copysign.f32` | exact |
//! | `x.max(y)`, `x.min(y)` | `max.f32`, `min.f32` | a NaN operand loses to a number |
//! | `x.maximum(y)`, `x.minimum(y)` (nightly `float_minimum_maximum`) | compare-and-select sequence | NaN-propagating, -0 < +0 |
//! | `x.clamp(lo, hi)` | two `setp` + `selp` | |
//! | `x % y` | `div.rn.f32`, `cvt.rzi.f32.f32`, `fma.rn.f32` | |
//! | `x as i32`, `x as u32` | `cvt.rzi.s32.f32` + saturating selects | Rust's saturating cast |
//! | `x.signum()` | `copysign.f32` + NaN select | |
//!
//! `mul_add`, `sqrt`, `floor`, `ceil`, `round`, `trunc` and friends are not inherent `f32`
//! methods in `core`; nightly's `core::f32::math` (feature `core_float_math`) has them: `mul_add`
//! → `fma.rn.f32` ([`fma`] wraps it), `sqrt` → `sqrt.rn.f32` ([`sqrt`] is the same
//! instruction), `floor` → `cvt.rmi.f32.f32`, `ceil` → `cvt.rpi.f32.f32`, `trunc` →
//! `cvt.rzi.f32.f32`, `round_ties_even` → `cvt.rni.f32.f32`, `round` (half away from zero) → a
//! `cvt.rzi` sequence, `fract` → `x - trunc(x)`. `core::f32::math::cbrt` and `powi` are calls
//! to `cbrtf` / `__powisf2`, which nothing on the device defines: the module fails to link. `exp`,
//! `ln`, `sin`, `cos`, `tanh`, `powf` do not exist in `core` at all; use this module.

use crate::ptx::math as raw;

/// log2(e).
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// √(2/π), the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// Cubic coefficient of the GELU tanh approximation.
const GELU_CUBIC: f32 = 0.044_715;

/// `a·b + c` with one rounding: `fma.rn.f32` (through `core::f32::math::mul_add`). Exact up to
/// that rounding (IEEE).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::f32::math::mul_add(a, b, c)
}

/// `√x`, correctly rounded (IEEE): `sqrt.rn.f32`. NaN below -0.
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::sqrt_rn_f32(x) }
}

/// `√x`, approximate: `sqrt.approx.f32`, max relative error 2^-23 (PTX ISA). NaN below -0.
#[inline(always)]
pub fn sqrt_approx(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::sqrt_approx_f32(x) }
}

/// `1/√x`, approximate: `rsqrt.approx.f32`, max relative error 2^-22.9 (PTX ISA); `+inf` at
/// +0. PTX has no correctly rounded form; `1.0 / sqrt(x)` is the IEEE-per-step alternative.
#[inline(always)]
pub fn rsqrt(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::rsqrt_approx_f32(x) }
}

/// `1/x`, correctly rounded (IEEE): `rcp.rn.f32` (what `1.0 / x` compiles to).
#[inline(always)]
pub fn rcp(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::rcp_rn_f32(x) }
}

/// `1/x`, approximate: `rcp.approx.f32`, max error 1 ulp over the full range (PTX ISA).
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::rcp_approx_f32(x) }
}

/// `2^x`, approximate: `ex2.approx.f32`, max relative error 2^-22.5 for normal results (PTX
/// ISA); subnormal results kept.
#[inline(always)]
pub fn exp2(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::ex2_approx_f32(x) }
}

/// `2^x`, approximate: `ex2.approx.ftz.f32`, as [`exp2`] but subnormal inputs and results flush
/// to zero (one instruction fewer on the SFU path; what softmax wants).
#[inline(always)]
pub fn exp2_ftz(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::ex2_approx_ftz_f32(x) }
}

/// `log2(x)`, approximate: `lg2.approx.f32`, max absolute error 2^-22 for x in [0.5, 2] and
/// relative error 2^-22 elsewhere (the bound warpforge's GPU test holds it to; "2 ulp" does not
/// hold: 2.04 ulp measured on the H200 at x ≈ 0.257); `-inf` at ±0, NaN below 0.
#[inline(always)]
pub fn log2(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::lg2_approx_f32(x) }
}

/// `tanh(x)`, approximate: `tanh.approx.f32`, max relative error 2^-10.987 (PTX ISA).
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::tanh_approx_f32(x) }
}

/// `e^x`: `ex2.approx.ftz.f32` of `x·log2(e)` (relative error about 2^-21: the product's
/// rounding is amplified by |x|·ln 2; subnormal results flush to 0).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp2_ftz(x * LOG2_E)
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    x * unsafe { raw::rcp_approx_ftz_f32(1.0 + exp(-x)) }
}

/// GELU, tanh form: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    let inner = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
    0.5 * x * (1.0 + tanh(inner))
}

/// The signed maximum of each 16-bit half of two words (halves read as `i16`):
/// `max.s16x2`, one instruction on sm_90. Exact.
#[inline(always)]
pub fn max_s16x2(a: u32, b: u32) -> u32 {
    // SAFETY: integer arithmetic instruction (sm_90a, the only Hopper target).
    unsafe { raw::max_s16x2(a, b) }
}

/// `max(x, 0)`.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}
