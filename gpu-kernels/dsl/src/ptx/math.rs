//! Floating-point arithmetic on the special-function units, and the IEEE-rounded square root and
//! reciprocal: one `unsafe fn` per PTX form, unary `f32 → f32`; and the packed 16-bit integer
//! maximum (sm_90's `VIMNMX.S16x2`).
//!
//! Error figures are the PTX ISA's for the instruction (section "Floating Point Instructions");
//! `.ftz` flushes subnormal inputs and results to sign-preserving zero.

use core::arch::asm;

macro_rules! unary_f32 {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " d, x;`.")]
        ///
        /// # Safety
        /// None beyond running on the device (sm_90 has every form here).
        #[inline(always)]
        pub unsafe fn $name(x: f32) -> f32 {
            let r: f32;
            // SAFETY: pure arithmetic on registers.
            unsafe { asm!(concat!($ptx, " {0}, {1};"), out(reg32) r, in(reg32) x, options(pure, nomem, nostack)) };
            r
        }
    )*};
}

unary_f32! {
    /// `2^x`, approximate: max relative error 2^-22.5 for normal results (about 2 ulp);
    /// subnormal results are kept.
    ex2_approx_f32 => "ex2.approx.f32";
    /// `2^x`, approximate, as [`ex2_approx_f32`] with subnormal inputs and results flushed.
    ex2_approx_ftz_f32 => "ex2.approx.ftz.f32";
    /// `log2(x)`, approximate: max absolute error 2^-22 for x in [0.5, 2], max 2 ulp elsewhere;
    /// `-inf` at ±0, NaN below 0.
    lg2_approx_f32 => "lg2.approx.f32";
    /// `1/x`, correctly rounded (IEEE 754 round to nearest even); a multi-instruction sequence
    /// after ptxas.
    rcp_rn_f32 => "rcp.rn.f32";
    /// `1/x`, approximate: max error 1 ulp over the full range.
    rcp_approx_f32 => "rcp.approx.f32";
    /// `1/x`, approximate (max error 1 ulp), subnormals flushed.
    rcp_approx_ftz_f32 => "rcp.approx.ftz.f32";
    /// `√x`, correctly rounded (IEEE 754 round to nearest even); NaN below -0.
    sqrt_rn_f32 => "sqrt.rn.f32";
    /// `√x`, approximate: max relative error 2^-23 over the full range; NaN below -0.
    sqrt_approx_f32 => "sqrt.approx.f32";
    /// `1/√x`, approximate: max relative error 2^-22.9 over the full range; `+inf` at +0, NaN
    /// below -0.
    rsqrt_approx_f32 => "rsqrt.approx.f32";
    /// `tanh(x)`, approximate: max relative error 2^-10.987 (about 2^-11); sm_75+.
    tanh_approx_f32 => "tanh.approx.f32";
}

/// The signed maximum of each 16-bit half: `d.lo = max(a.lo, b.lo)`, `d.hi = max(a.hi, b.hi)`,
/// halves read as `i16`.
///
/// Emits `max.s16x2 d, a, b;` (sm_90+; one `VIMNMX.S16x2`, and ptxas folds two into one
/// three-input `VIMNMX3`).
///
/// # Safety
/// None beyond running on sm_90 or later.
#[inline(always)]
pub unsafe fn max_s16x2(a: u32, b: u32) -> u32 {
    let r: u32;
    // SAFETY: pure integer arithmetic on registers.
    unsafe { asm!("max.s16x2 {0}, {1}, {2};", out(reg32) r, in(reg32) a, in(reg32) b, options(pure, nomem, nostack)) };
    r
}
