//! Float conversions between f32 and the 16-bit storage types (held as raw `u16` bits).

use core::arch::asm;

/// f16 bits → f32.
///
/// Emits `cvt.f32.f16 f, h;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn cvt_f32_f16(h: u16) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("cvt.f32.f16 {0}, {1};", out(reg32) r, in(reg16) h, options(pure, nomem, nostack)) };
    r
}

/// f32 → f16 bits, round to nearest even.
///
/// Emits `cvt.rn.f16.f32 h, f;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn cvt_rn_f16_f32(f: f32) -> u16 {
    let r: u16;
    // SAFETY: pure arithmetic.
    unsafe { asm!("cvt.rn.f16.f32 {0}, {1};", out(reg16) r, in(reg32) f, options(pure, nomem, nostack)) };
    r
}

/// bf16 bits → f32.
///
/// Emits `cvt.f32.bf16 f, h;`.
///
/// # Safety
/// sm_90+.
#[inline(always)]
pub unsafe fn cvt_f32_bf16(h: u16) -> f32 {
    let r: f32;
    // SAFETY: pure arithmetic.
    unsafe { asm!("cvt.f32.bf16 {0}, {1};", out(reg32) r, in(reg16) h, options(pure, nomem, nostack)) };
    r
}

/// f32 → bf16 bits, round to nearest even.
///
/// Emits `cvt.rn.bf16.f32 h, f;`.
///
/// # Safety
/// sm_80+.
#[inline(always)]
pub unsafe fn cvt_rn_bf16_f32(f: f32) -> u16 {
    let r: u16;
    // SAFETY: pure arithmetic.
    unsafe { asm!("cvt.rn.bf16.f32 {0}, {1};", out(reg16) r, in(reg32) f, options(pure, nomem, nostack)) };
    r
}

/// Two f32 → packed bf16x2, round to nearest even: `hi` in the upper half, `lo` in the lower.
///
/// Emits `cvt.rn.bf16x2.f32 d, hi, lo;`.
///
/// # Safety
/// sm_80+.
#[inline(always)]
pub unsafe fn cvt_rn_bf16x2_f32(hi: f32, lo: f32) -> u32 {
    let r: u32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {0}, {1}, {2};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
    };
    r
}

/// Two f32 → packed f16x2, round to nearest even: `hi` in the upper half, `lo` in the lower.
///
/// Emits `cvt.rn.f16x2.f32 d, hi, lo;`.
///
/// # Safety
/// sm_80+.
#[inline(always)]
pub unsafe fn cvt_rn_f16x2_f32(hi: f32, lo: f32) -> u32 {
    let r: u32;
    // SAFETY: pure arithmetic.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {0}, {1}, {2};", out(reg32) r, in(reg32) hi, in(reg32) lo, options(pure, nomem, nostack))
    };
    r
}
