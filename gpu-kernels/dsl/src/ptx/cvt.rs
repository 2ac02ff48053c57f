//! Float conversions between f32 and the 16-bit storage types (held as raw `u16` bits), and
//! between pairs of f32 / f16 and pairs of FP8 (E4M3, E5M2; two bytes in a `u16`).
//!
//! sm_90a has FP8 pairs from f32 pairs and from f16x2, and f16x2 from FP8 pairs; the bf16x2 ↔
//! FP8 forms need PTX ISA 9.1+ and sm_100 (ptxas rejects them for sm_90a), so bf16 goes through
//! f32, which is exact in both directions for FP8 values.

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

macro_rules! fp8x2_from_f32x2 {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " d, hi, lo;` (`hi` to the upper byte of `d`).")]
        ///
        /// # Safety
        /// sm_89+.
        #[inline(always)]
        pub unsafe fn $name(hi: f32, lo: f32) -> u16 {
            let r: u16;
            // SAFETY: pure arithmetic on registers.
            unsafe {
                asm!(concat!($ptx, " {0}, {1}, {2};"), out(reg16) r, in(reg32) hi, in(reg32) lo,
                     options(pure, nomem, nostack))
            };
            r
        }
    )*};
}

fp8x2_from_f32x2! {
    /// Two f32 → two E4M3 bytes, round to nearest even; out-of-range values saturate to ±448
    /// (NaN stays NaN).
    cvt_rn_satfinite_e4m3x2_f32 => "cvt.rn.satfinite.e4m3x2.f32";
    /// Two f32 → two E5M2 bytes, round to nearest even; out-of-range values saturate to ±57344
    /// (NaN stays NaN).
    cvt_rn_satfinite_e5m2x2_f32 => "cvt.rn.satfinite.e5m2x2.f32";
}

macro_rules! fp8x2_f16x2 {
    ($($(#[$doc:meta])* $name:ident($a:ty => $d:ty, $ain:ident, $dout:ident) => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " d, a;` (upper half of `a` to upper half of `d`).")]
        ///
        /// # Safety
        /// sm_89+.
        #[inline(always)]
        pub unsafe fn $name(a: $a) -> $d {
            let r: $d;
            // SAFETY: pure arithmetic on registers.
            unsafe {
                asm!(concat!($ptx, " {0}, {1};"), out($dout) r, in($ain) a, options(pure, nomem, nostack))
            };
            r
        }
    )*};
}

fp8x2_f16x2! {
    /// Packed f16x2 → two E4M3 bytes, round to nearest even, saturating to ±448.
    cvt_rn_satfinite_e4m3x2_f16x2(u32 => u16, reg32, reg16) => "cvt.rn.satfinite.e4m3x2.f16x2";
    /// Packed f16x2 → two E5M2 bytes, round to nearest even, saturating to ±57344.
    cvt_rn_satfinite_e5m2x2_f16x2(u32 => u16, reg32, reg16) => "cvt.rn.satfinite.e5m2x2.f16x2";
    /// Two E4M3 bytes → packed f16x2, exact (every E4M3 value is an f16).
    cvt_rn_f16x2_e4m3x2(u16 => u32, reg16, reg32) => "cvt.rn.f16x2.e4m3x2";
    /// Two E5M2 bytes → packed f16x2, exact (E5M2 is f16 with the low 8 bits dropped).
    cvt_rn_f16x2_e5m2x2(u16 => u32, reg16, reg32) => "cvt.rn.f16x2.e5m2x2";
}

/// Eight f32 → eight FP4 E2M1 codes in one word (element `i` in bits `4i..4i + 4`), each
/// rounded to nearest even and saturated to ±6 (`.satfinite`; e2m1 has no infinity or NaN).
///
/// Emits `cvt.rn.satfinite.e2m1x2.f32 b, hi, lo;` four times into `.b8` temporaries (`hi` to
/// the upper nibble) and `mov.b32 d, {b0, b1, b2, b3};` (`b0` the low byte).
///
/// # Safety
/// sm_100a (PTX ISA 8.6+): ptxas rejects the form for sm_90a.
#[inline(always)]
pub unsafe fn cvt_rn_satfinite_e2m1x2_f32_x4(v: [f32; 8]) -> u32 {
    let r: u32;
    // SAFETY: pure arithmetic on registers; the `.b8` temporaries are scoped to the block.
    unsafe {
        asm!(
            "{{",
            ".reg .b8 e2m1_0, e2m1_1, e2m1_2, e2m1_3;",
            "cvt.rn.satfinite.e2m1x2.f32 e2m1_0, {2}, {1};",
            "cvt.rn.satfinite.e2m1x2.f32 e2m1_1, {4}, {3};",
            "cvt.rn.satfinite.e2m1x2.f32 e2m1_2, {6}, {5};",
            "cvt.rn.satfinite.e2m1x2.f32 e2m1_3, {8}, {7};",
            "mov.b32 {0}, {{e2m1_0, e2m1_1, e2m1_2, e2m1_3}};",
            "}}",
            out(reg32) r,
            in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
            in(reg32) v[4], in(reg32) v[5], in(reg32) v[6], in(reg32) v[7],
            options(pure, nomem, nostack)
        )
    };
    r
}

/// One word of eight FP4 E2M1 codes → four packed f16 pairs, exact (every e2m1 value is an
/// f16): pair `j` holds code `2j` in its low half and code `2j + 1` in its high half.
///
/// Emits `mov.b32 {b0, b1, b2, b3}, w;` and `cvt.rn.f16x2.e2m1x2 d, b;` four times (the upper
/// nibble of `b` to the upper half of `d`).
///
/// # Safety
/// sm_100a (PTX ISA 8.6+): ptxas rejects the form for sm_90a.
#[inline(always)]
pub unsafe fn cvt_rn_f16x2_e2m1x2_x4(w: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: pure arithmetic on registers; the `.b8` temporaries are scoped to the block.
    unsafe {
        asm!(
            "{{",
            ".reg .b8 e2m1_0, e2m1_1, e2m1_2, e2m1_3;",
            "mov.b32 {{e2m1_0, e2m1_1, e2m1_2, e2m1_3}}, {4};",
            "cvt.rn.f16x2.e2m1x2 {0}, e2m1_0;",
            "cvt.rn.f16x2.e2m1x2 {1}, e2m1_1;",
            "cvt.rn.f16x2.e2m1x2 {2}, e2m1_2;",
            "cvt.rn.f16x2.e2m1x2 {3}, e2m1_3;",
            "}}",
            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d,
            in(reg32) w,
            options(pure, nomem, nostack)
        )
    };
    [a, b, c, d]
}
