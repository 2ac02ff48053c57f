//! Device math for epilogues: exponentials and activations on the special-function units.
//!
//! Approximations, with their error stated: an epilogue that writes bf16 or f16 cannot see
//! them, and f32 outputs carry them (about 2^-11 relative for the tanh-based GELU).

use crate::ptx::math as raw;

/// log2(e).
pub const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// √(2/π), the GELU tanh-approximation constant.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
/// Cubic coefficient of the GELU tanh approximation.
const GELU_CUBIC: f32 = 0.044_715;

/// `e^x` (relative error about 2^-21; subnormal results flush to 0).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // SAFETY: arithmetic instruction.
    unsafe { raw::ex2_approx_ftz_f32(x * LOG2_E) }
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
    // SAFETY: arithmetic instruction.
    0.5 * x * (1.0 + unsafe { raw::tanh_approx_f32(inner) })
}

/// `max(x, 0)`.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}
