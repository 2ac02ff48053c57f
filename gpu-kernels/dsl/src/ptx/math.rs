//! Fast transcendental approximations (the SFU instructions epilogues use).

use core::arch::asm;

/// `2^x`, approximate (max relative error 2^-22.5 for normal results), subnormals flushed.
///
/// Emits `ex2.approx.ftz.f32 d, x;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn ex2_approx_ftz_f32(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("ex2.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack)) };
    r
}

/// `1/x`, approximate (max error 1 ulp), subnormals flushed.
///
/// Emits `rcp.approx.ftz.f32 d, x;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn rcp_approx_ftz_f32(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("rcp.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack)) };
    r
}

/// `tanh(x)`, approximate (max relative error about 2^-11).
///
/// Emits `tanh.approx.f32 d, x;`.
///
/// # Safety
/// sm_75+.
#[inline(always)]
pub unsafe fn tanh_approx_f32(x: f32) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("tanh.approx.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack)) };
    r
}
