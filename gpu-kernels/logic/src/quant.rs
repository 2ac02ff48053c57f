//! Quantisation math shared by the quantising kernels and their host references: scale
//! selection, UE8M0 rounding, software e4m3/e5m2/e2m1 encode and decode, and the scale layouts.
//!
//! Every function is plain f32/integer arithmetic with one IEEE rounding per operation (no
//! approximate division; the one fused multiply-add, in [`div_by_reciprocal`], is IEEE's
//! `fusedMultiplyAdd`, `fma.rn.f32` on the device and a correctly rounded `fmaf` on the host), so
//! the kernel and the CPU produce the same bits.
//!
//! **Rounding and specials, every encoder:** round to nearest, ties to even, saturating to the
//! largest finite value (`satfinite`): a finite value beyond the format's range and ±∞ encode as
//! ±max (e4m3 ±448, e5m2 ±57344, e2m1 ±6). NaN encodes as NaN where the format has one (e4m3
//! `0x7F | sign`, e5m2 `0x7F | sign`); e2m1 has none, so NVFP4 carries a block's NaN in its
//! scale (see [`nvfp4_block_scale`]). Signed zero keeps its sign.
//!
//! **Amax:** every scale is chosen from the largest *finite* magnitude of its elements
//! ([`finite_abs`]): NaN and ±∞ do not widen a scale (±∞ then saturates, NaN stays NaN).
//!
//! **Layouts** (all row-major over the quantised matrix's rows):
//! - per-token groups 1 × [`GROUP`] along K: scales MN-major, `scales[g · m_pad + row]`,
//!   `m_pad = round_up(M, 4)` ([`group_scale_pitch`], [`group_scale_index`]); the padding rows'
//!   entries are written as 0.0.
//! - weight blocks [`BLOCK`] × [`BLOCK`]: `scales[(n / 128) · ceil(K / 128) + k / 128]`
//!   ([`block_scale_index`]); edge blocks cover what remains.
//! - MXFP8: one UE8M0 byte per [`MX_BLOCK`] consecutive K elements, `scales[row · K/32 + k/32]`.
//! - NVFP4: two e2m1 per byte (low nibble the even element), one e4m3 byte per [`NVFP4_BLOCK`]
//!   consecutive K elements `scales[row · K/16 + k/16]`, one f32 global scale.

/// K elements per per-token group.
pub const GROUP: usize = 128;
/// Rows and columns of a weight block.
pub const BLOCK: usize = 128;
/// Elements sharing one UE8M0 scale in MXFP8 (OCP MX).
pub const MX_BLOCK: usize = 32;
/// Elements sharing one e4m3 scale in NVFP4.
pub const NVFP4_BLOCK: usize = 16;
/// Rows a per-token group scale column is padded to (16 bytes of f32, as TMA wants).
pub const SCALE_ROW_ALIGN: usize = 4;

/// The most elements one quantisation launch takes: 2^34 (32 GiB of bf16). The encoders index
/// 8-element vectors in 32-bit registers, so `elements / 8 ≤ 2^31` leaves the grid's stride
/// room below 2^32.
pub const MAX_ELEMENTS: usize = 1 << 34;

/// A floating-point byte (or nibble) format: its mantissa bits, minimum normal exponent,
/// largest finite code and whether its all-ones code is NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Minifloat {
    /// FP8 E4M3 (OCP "fn": no infinities, `S.1111.111` is NaN), max 448.
    E4m3,
    /// FP8 E5M2 (IEEE-like: infinities and NaNs), max 57344.
    E5m2,
    /// FP4 E2M1 (no infinities, no NaN), values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
    E2m1,
}

impl Minifloat {
    /// Mantissa bits.
    const fn mantissa_bits(self) -> u32 {
        match self {
            Minifloat::E4m3 => 3,
            Minifloat::E5m2 => 2,
            Minifloat::E2m1 => 1,
        }
    }
    /// Exponent of the smallest normal.
    const fn min_exp(self) -> i32 {
        match self {
            Minifloat::E4m3 => -6,
            Minifloat::E5m2 => -14,
            Minifloat::E2m1 => 0,
        }
    }
    /// The largest finite magnitude's code.
    const fn max_code(self) -> u32 {
        match self {
            Minifloat::E4m3 => 0x7E,
            Minifloat::E5m2 => 0x7B,
            Minifloat::E2m1 => 0x7,
        }
    }
    /// Bits of a code (the sign is the top one).
    const fn bits(self) -> u32 {
        match self {
            Minifloat::E2m1 => 4,
            _ => 8,
        }
    }
    /// The largest finite magnitude.
    pub const fn max(self) -> f32 {
        match self {
            Minifloat::E4m3 => 448.0,
            Minifloat::E5m2 => 57344.0,
            Minifloat::E2m1 => 6.0,
        }
    }

    /// `x` rounded to nearest even, saturating to ±[`Self::max`]; NaN to `0x7F | sign`
    /// (e4m3, e5m2) or `+0` (e2m1, which has no NaN). The code is in the low [`Self::bits`].
    #[inline(always)]
    pub fn encode(self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = (bits >> 31) << (self.bits() - 1);
        let magnitude = bits & 0x7fff_ffff;
        if magnitude > 0x7f80_0000 {
            return match self {
                Minifloat::E2m1 => 0,
                _ => (0x7f | sign) as u8,
            };
        }
        if magnitude >= 0x7f80_0000 {
            return (self.max_code() | sign) as u8;
        }
        let m = self.mantissa_bits();
        // magnitude = sig · 2^(exp − 23), exactly.
        let biased = (magnitude >> 23) as i32;
        let (sig, exp) =
            if biased == 0 { (magnitude, -126) } else { (magnitude & 0x007f_ffff | 1 << 23, biased - 127) };
        // The target's quantum at this magnitude: 2^(max(exp, emin) − m).
        let e = if exp > self.min_exp() { exp } else { self.min_exp() };
        let shift = (e - m as i32 - (exp - 23)) as u32; // ≥ 23 − m > 0
        let n = if shift >= 40 {
            0
        } else {
            let (sig, half) = (sig as u64, 1u64 << (shift - 1));
            let (n, rem) = (sig >> shift, sig & ((half << 1) - 1));
            if rem > half || (rem == half && n & 1 == 1) { n + 1 } else { n }
        };
        // n quanta of 2^(e − m): subnormal codes are n itself, normal ones add the exponent
        // field, and a carry to 2^(m+1) moves into the exponent by the same addition.
        let code = (((e - self.min_exp()) as u64) << m) + n;
        let code = if code > self.max_code() as u64 { self.max_code() } else { code as u32 };
        (code | sign) as u8
    }

    /// The value of `code` (low [`Self::bits`] bits), exactly.
    #[inline(always)]
    pub fn decode(self, code: u8) -> f32 {
        let code = code as u32 & ((1 << self.bits()) - 1);
        let magnitude = code & ((1 << (self.bits() - 1)) - 1);
        let negative = code >> (self.bits() - 1) == 1;
        let m = self.mantissa_bits();
        let (field, mantissa) = (magnitude >> m, magnitude & ((1 << m) - 1));
        let value = match self {
            Minifloat::E4m3 if magnitude == 0x7f => f32::NAN,
            Minifloat::E5m2 if field == 0x1f && mantissa != 0 => f32::NAN,
            Minifloat::E5m2 if field == 0x1f => f32::INFINITY,
            _ if field == 0 => mantissa as f32 * exp2i(self.min_exp() - m as i32),
            _ => ((1 << m) + mantissa) as f32 * exp2i(field as i32 - 1 + self.min_exp() - m as i32),
        };
        if negative { -value } else { value }
    }
}

/// `2^k` for `k` in `-149..=127`, exactly (a subnormal below `-126`).
#[inline(always)]
pub const fn exp2i(k: i32) -> f32 {
    if k >= -126 { f32::from_bits(((k + 127) as u32) << 23) } else { f32::from_bits(1 << (k + 149)) }
}

/// `|x|` when `x` is finite, else 0: what every amax sees.
#[inline(always)]
pub fn finite_abs(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7fff_ffff);
    if a < f32::INFINITY { a } else { 0.0 }
}

/// The larger of two amax values (both ≥ 0 and finite: [`finite_abs`] results). Their f32 bits
/// order the same way, which is what the device's `atom.max.u32` on the bits relies on.
#[inline(always)]
pub fn amax_combine(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// Magnitude keys: the finite amax of 16-bit floats (bf16, f16) taken on their bits, two to a
/// word, without widening them. A 16-bit float's magnitude bits `|h|` order like its value,
/// and its finite values lie below `nonfinite` (bf16 `0x7F80`, f16 `0x7C00`, the bits of +∞);
/// the key `|h| + (0x8000 − nonfinite)` is then a non-negative `i16` for every finite value
/// and a negative one for ±∞ and NaN, so a signed maximum of keys (the device's one-instruction
/// `max.s16x2`) is the key of the largest finite magnitude and never of a non-finite one: the
/// amax [`finite_abs`] defines, exactly. The keys of one word stay in their halves: `|h| ≤
/// 0x7FFF` and the bias is below `0x0400`, so no carry crosses.
#[inline(always)]
pub const fn magnitude_key_bias(nonfinite: u16) -> u16 {
    0x8000 - nonfinite
}

/// The magnitude keys of the two 16-bit floats in `word` (see [`magnitude_key_bias`]), each in
/// its half.
#[inline(always)]
pub const fn magnitude_keys(word: u32, bias: u16) -> u32 {
    (word & 0x7fff_7fff) + bias as u32 * 0x0001_0001
}

/// The larger of two keys read as `i16` (host form of `max.s16x2` on one half).
#[inline(always)]
pub const fn key_max(a: u16, b: u16) -> u16 {
    if (a as i16) < (b as i16) { b } else { a }
}

/// The magnitude bits a key (or a maximum of keys) stands for: `key − bias` for a finite
/// value, 0 for a non-finite one (no finite element: amax 0, as [`finite_abs`] gives).
#[inline(always)]
pub const fn key_magnitude(key: u16, bias: u16) -> u16 {
    key_max(key, bias) - bias
}

/// The smallest power of two ≥ `s` (`s` a positive normal f32; UE8M0 rounding up): the scale
/// then only moves exponents, so dequantising (`q · scale`) is exact.
#[inline(always)]
pub fn pow2_ceil(s: f32) -> f32 {
    let bits = s.to_bits();
    if bits & 0x007f_ffff == 0 { s } else { f32::from_bits((bits & 0x7f80_0000) + 0x0080_0000) }
}

/// The f32 scale of a group whose amax is `amax`, for a format whose largest value is
/// `qmax`: `amax / qmax`, at least the smallest normal f32 (so `x / scale` stays finite), and
/// rounded up to a power of two when `pow2`. An all-zero (or all non-finite) group, `amax == 0`,
/// gets scale 1.
#[inline(always)]
pub fn scale_from_amax(amax: f32, qmax: f32, pow2: bool) -> f32 {
    if amax.is_nan() || amax <= 0.0 {
        return 1.0;
    }
    let s = amax / qmax;
    let s = if s < f32::MIN_POSITIVE { f32::MIN_POSITIVE } else { s };
    if pow2 { pow2_ceil(s) } else { s }
}

/// `x` quantised with `scale` to `format`: `encode(x · (1 / scale))`, the reciprocal rounded
/// once (a kernel divides once per group, not per element; the product can differ from
/// `x / scale` by one f32 ulp before the format's far coarser rounding).
#[inline(always)]
pub fn quantize(format: Minifloat, x: f32, scale: f32) -> u8 {
    format.encode(x * (1.0 / scale))
}

/// Rows of the MN-major per-token scale matrix: `round_up(m, 4)`; `None` on overflow.
#[inline(always)]
pub const fn group_scale_pitch(m: usize) -> Option<usize> {
    match m.checked_add(SCALE_ROW_ALIGN - 1) {
        Some(v) => Some(v / SCALE_ROW_ALIGN * SCALE_ROW_ALIGN),
        None => None,
    }
}

/// Where the scale of row `row`, group `g` (K elements `128g..128g + 128`) lives: MN-major,
/// `g · m_pad + row`.
#[inline(always)]
pub const fn group_scale_index(row: usize, g: usize, m_pad: usize) -> usize {
    g * m_pad + row
}

/// An item's (row, column) in a row-major grid of `per_row` columns (a per-token quad's rows and
/// group column, a weight block's block row and column), moved a fixed number of items at a
/// time without dividing: the quantisers' walks, where item `first + i · step` is visited on
/// the `i`-th [`Self::advance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridCursor {
    pub row: u32,
    pub col: u32,
    per_row: u32,
    step_rows: u32,
    step_cols: u32,
}

impl GridCursor {
    /// At item `first`, moving `step` items per [`Self::advance`] (`per_row ≥ 1`).
    #[inline(always)]
    pub const fn new(first: u32, step: u32, per_row: u32) -> Self {
        GridCursor {
            row: first / per_row,
            col: first % per_row,
            per_row,
            step_rows: step / per_row,
            step_cols: step % per_row,
        }
    }

    /// Moves `step` items on.
    #[inline(always)]
    pub const fn advance(&mut self) {
        self.row += self.step_rows;
        self.col += self.step_cols;
        if self.col >= self.per_row {
            self.col -= self.per_row;
            self.row += 1;
        }
    }
}

/// Where the scale of the weight block holding element `(n, k)` of an `N × K` matrix lives.
#[inline(always)]
pub const fn block_scale_index(n: usize, k: usize, cols: usize) -> usize {
    (n / BLOCK) * cols.div_ceil(BLOCK) + k / BLOCK
}

/// E4M3's largest exponent: `floor(log2(448))`, the `emax_elem` of the OCP MX scale rule.
pub const E4M3_EMAX: i32 = 8;
/// The UE8M0 code of scale 1 (bias 127), what an all-zero MX block gets.
pub const UE8M0_ONE: u8 = 127;
/// The UE8M0 NaN code.
pub const UE8M0_NAN: u8 = 0xff;

/// The OCP MX shared exponent of a block whose amax is `amax`, as its UE8M0 byte:
/// `floor(log2(amax)) − 8 + 127`, clamped to `0..=254`; [`UE8M0_ONE`] when `amax == 0`.
/// Elements past `448 · 2^(e)` saturate (the spec's clamp).
#[inline(always)]
pub fn mx_scale_byte(amax: f32) -> u8 {
    if amax.is_nan() || amax <= 0.0 {
        return UE8M0_ONE;
    }
    // The biased exponent field is floor(log2) + 127 for normals; 0 (below −126) for subnormals.
    let biased = (amax.to_bits() >> 23) as i32;
    let byte = biased - E4M3_EMAX;
    if byte < 0 { 0 } else { byte as u8 }
}

/// An MXFP8 element: `e4m3(x / 2^(byte − 127))`, computed as `x · 2^(127 − byte)` (the same
/// single rounding: the factor is an exact power of two).
#[inline(always)]
pub fn mx_encode(x: f32, scale_byte: u8) -> u8 {
    Minifloat::E4m3.encode(x * exp2i(127 - scale_byte as i32))
}

/// An MXFP8 element's value: `e4m3 · 2^(byte − 127)`, NaN for the NaN scale byte.
#[inline(always)]
pub fn mx_decode(code: u8, scale_byte: u8) -> f32 {
    mx_scale(scale_byte) * Minifloat::E4m3.decode(code)
}

/// The value of a UE8M0 scale byte (`0xFF` is NaN, `f32::NAN`'s bits): `2^(byte − 127)`, built
/// without a branch. The byte is the f32 exponent field; the two edge bytes also set mantissa
/// bit 22, which makes 0 the subnormal 2^-127 and 0xFF the quiet NaN.
#[inline(always)]
pub fn mx_scale(byte: u8) -> f32 {
    let edge = byte.wrapping_add(1) < 2;
    f32::from_bits(((byte as u32) << 23) | ((edge as u32) << 22))
}

/// Vectors (8 elements each) a warp loads per step of the NVFP4 encoder's block walk.
pub const BLOCK16_WARP_VECTORS: u32 = 64;

/// The NVFP4 encoder's block walk (one 16-element block, two vectors, per lane): in a warp step
/// starting at vector `base`, lane `lane` loads vectors `base + block16_load_offset(lane)` and
/// 16 past it (each load instruction reads two runs of 16 consecutive vectors), swaps one with
/// lane `lane ^ 1`, and keeps the block whose first vector [`block16_first_vector`] gives.
#[inline(always)]
pub const fn block16_load_offset(lane: u32) -> u32 {
    lane / 16 * 32 + lane % 16
}

/// The first vector of the block lane `lane` keeps in the step starting at vector `base`: an
/// even lane its own first vector and its neighbour's (`v`, `v + 1`), an odd lane its
/// neighbour's second vector and its own (`v + 15`, `v + 16`), with `v` the lane's first load.
#[inline(always)]
pub const fn block16_first_vector(base: u32, lane: u32) -> u32 {
    let v = base + block16_load_offset(lane);
    if lane % 2 == 1 { v + 15 } else { v }
}

/// NVFP4's largest representable product of scale and element: `448 · 6`.
pub const NVFP4_RANGE: f32 = 448.0 * 6.0;

/// NVFP4's global scale for a tensor whose amax is `amax`: `amax / (448 · 6)` (so each block
/// scale fits e4m3), at least the smallest normal f32; 1 when `amax == 0`.
#[inline(always)]
pub fn nvfp4_global_scale(amax: f32) -> f32 {
    scale_from_amax(amax, NVFP4_RANGE, false)
}

/// Whether `global` can be a caller's NVFP4 global scale (static scaling): a positive normal
/// f32 below 2^117, the range [`Nvfp4Divisor::new`] takes and every [`nvfp4_global_scale`]
/// result lies in.
#[inline(always)]
pub fn nvfp4_static_global_scale_ok(global: f32) -> bool {
    global.is_normal() && global > 0.0 && global < exp2i(117)
}

/// Whether `scale` can be a caller's per-tensor FP8 scale (static scaling): a positive normal
/// f32, so that `1 / scale` is finite and [`quantize`] never multiplies by ∞.
#[inline(always)]
pub fn static_scale_ok(scale: f32) -> bool {
    scale.is_normal() && scale > 0.0
}

/// The e4m3 scale byte of an NVFP4 block with amax `block_amax` (finite magnitudes) under
/// `global`: `e4m3((block_amax / 6) / global)` ([`nvfp4_block_scale_value`] rounded); the NaN
/// byte `0x7F` when `has_nan` (e2m1 has no NaN, so a block holding one decodes to NaN as a
/// whole).
#[inline(always)]
pub fn nvfp4_block_scale(block_amax: f32, global: f32, has_nan: bool) -> u8 {
    if has_nan {
        return 0x7f;
    }
    Minifloat::E4m3.encode(nvfp4_block_scale_value(block_amax, global))
}

/// An NVFP4 block's scale before its e4m3 rounding: `(block_amax / 6) / global`, two IEEE
/// divisions (never NaN for a finite amax and a positive global scale; +∞ saturates to 448).
#[inline(always)]
pub fn nvfp4_block_scale_value(block_amax: f32, global: f32) -> f32 {
    block_amax / Minifloat::E2m1.max() / global
}

/// `a / b` correctly rounded, given `y = 1 / b` correctly rounded, in three instructions
/// instead of a division's dozen (Markstein's correction: `q = a·y` is within an ulp of the
/// quotient, the remainder `a − q·b` is exact in one fused multiply-add, and `q + r·y` rounds
/// to the quotient). Not a theorem for every `a` and `b`: the callers use it where a test
/// compares it with `a / b` over every input that can reach it (`tests.rs`), and the
/// remainder is meaningless once `q` overflows (the result is then NaN).
#[inline(always)]
pub fn div_by_reciprocal(a: f32, b: f32, y: f32) -> f32 {
    let q = a * y;
    let r = fma(-q, b, a);
    fma(r, y, q)
}

/// `a · b + c` rounded once: the hardware's `fma.rn.f32` on the device, and on the host the
/// same result in software ([`fma_exact_f64`]; core's fused multiply-add is unstable there).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        core::f32::math::mul_add(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        fma_exact_f64(a, b, c)
    }
}

/// `a · b + c` rounded once to f32, through f64: the product is exact there (48 significant
/// bits), the sum is rounded to odd (Knuth's two-sum gives its exact error, and a sum that
/// was rounded and came out even moves one ulp towards the error), and a value rounded to odd
/// at 53 bits rounds to nearest at 24 exactly as the exact value would (53 ≥ 24 + 2).
pub fn fma_exact_f64(a: f32, b: f32, c: f32) -> f32 {
    let (p, c) = (a as f64 * b as f64, c as f64);
    let s = p + c;
    if !s.is_finite() {
        return s as f32;
    }
    let back = s - p;
    let error = (p - (s - back)) + (c - back);
    let bits = s.to_bits();
    if error == 0.0 || bits & 1 == 1 {
        return s as f32;
    }
    // Inexact and even: one ulp away from zero when the error has the sum's sign, else
    // towards it (the sum is not zero: an inexact sum never is).
    let odd = if (error > 0.0) == (s > 0.0) { bits + 1 } else { bits - 1 };
    f64::from_bits(odd) as f32
}

/// `1 / 6` rounded to nearest: the reciprocal of [`nvfp4_block_scale_value_fast`]'s first
/// division.
pub const INV_E2M1_MAX: f32 = 1.0 / Minifloat::E2m1.max();

/// A tensor's NVFP4 global scale prepared for [`nvfp4_block_scale_value_fast`], once per
/// tensor: the scale times the power of two `up` that brings it into [1, 2), and the
/// reciprocal of that, rounded. Scaling both sides of the division by `up` leaves the quotient
/// alone and keeps the dividend far from the subnormals, where the Markstein remainder stops
/// being exact (a block amax of a tiny tensor, `global` clamped at 2^-126, would otherwise be
/// one).
#[derive(Clone, Copy, Debug)]
pub struct Nvfp4Divisor {
    /// `2^k` with `global · 2^k` in [1, 2).
    pub up: f32,
    /// `global · up`, exactly.
    pub scaled: f32,
    /// `1 / scaled`, rounded.
    pub inverse: f32,
}

impl Nvfp4Divisor {
    /// The divisor of `global`, an [`nvfp4_global_scale`] result (a positive normal f32 below
    /// 2^117).
    #[inline(always)]
    pub fn new(global: f32) -> Self {
        let up = exp2i(127 - (global.to_bits() >> 23) as i32);
        let scaled = global * up;
        Nvfp4Divisor { up, scaled, inverse: 1.0 / scaled }
    }
}

/// [`nvfp4_block_scale_value`] in the form the kernels run: both divisions as
/// [`div_by_reciprocal`] (six instructions and a multiply by `up` instead of two IEEE
/// divisions), never NaN. Rounded to e4m3 it gives the reference's byte on every block amax
/// and global scale of a bf16 or f16 tensor, and the reference's f32 itself wherever that is
/// in [2^-100, 2^100] (`tests.rs` checks every pair). Below, both are far under e4m3's
/// smallest step and round to 0; above, both saturate to 448 (a block amax above the tensor's,
/// which the kernels never see, can make the dividend +∞ and the remainder NaN: the `min`
/// turns that into `f32::MAX`).
#[inline(always)]
pub fn nvfp4_block_scale_value_fast(block_amax: f32, divisor: Nvfp4Divisor) -> f32 {
    let v = div_by_reciprocal(block_amax, Minifloat::E2m1.max(), INV_E2M1_MAX) * divisor.up;
    div_by_reciprocal(v, divisor.scaled, divisor.inverse).min(f32::MAX)
}

/// The effective scale of an NVFP4 block: `e4m3(byte) · global`.
#[inline(always)]
pub fn nvfp4_scale(scale_byte: u8, global: f32) -> f32 {
    Minifloat::E4m3.decode(scale_byte) * global
}

/// An NVFP4 element's code (low nibble) given its block's effective scale
/// ([`nvfp4_scale`]): `e2m1(x · (1 / scale))` (as [`quantize`]), or +0 when the scale is 0 (a
/// block far below the tensor's amax) or NaN (the NaN block).
#[inline(always)]
pub fn nvfp4_encode(x: f32, scale: f32) -> u8 {
    if scale > 0.0 { e2m1_encode(x * (1.0 / scale)) } else { 0 }
}

/// [`nvfp4_encode`] of eight non-NaN elements, packed (element `i` in nibble `i`), given
/// `inverse = 1 / scale` (rounded), when `scale > 0` and `inverse` is finite: then no `x ·
/// inverse` is NaN and [`e2m1_magnitude_sum`] needs no NaN select. (A scale so small that its
/// reciprocal overflows makes `±0 · ∞` a NaN, which the reference encodes as +0: take
/// [`nvfp4_encode`] there.) Each element enters at the top of the word by two funnel shifts,
/// its three magnitude bits straight from the sum's low bits and then its sign, so nothing is
/// masked or shifted into place: three instructions an element besides the encoder's. Written
/// without a loop: a kernel encoding two words per lane got one of two such loops left rolled
/// by LLVM (the elements then picked by a select chain, about 30 instructions each).
#[inline(always)]
pub fn nvfp4_encode8_by_inverse(values: [f32; 8], inverse: f32) -> u32 {
    let push = |word: u32, x: f32| {
        let x = x * inverse;
        let word = (word >> 3) | (e2m1_magnitude_sum(x) << 29);
        (word >> 1) | (x.to_bits() & 0x8000_0000)
    };
    let [a, b, c, d, e, f, g, h] = values;
    push(push(push(push(push(push(push(push(0, a), b), c), d), e), f), g), h)
}

/// [`Minifloat::E2m1`]`.encode(x)` for the host and where a NaN can arrive:
/// [`e2m1_encode_not_nan`] with NaN selected to +0.
#[inline(always)]
pub fn e2m1_encode(x: f32) -> u8 {
    if x.is_nan() { 0 } else { e2m1_encode_not_nan(x) as u8 }
}

/// [`Minifloat::E2m1`]`.encode(x)` for any `x` but NaN (whose code it leaves unspecified):
/// [`e2m1_magnitude_sum`]'s three bits and the sign.
#[inline(always)]
pub fn e2m1_encode_not_nan(x: f32) -> u32 {
    (e2m1_magnitude_sum(x) & 7) | (x.to_bits() >> 28 & 8)
}

/// The e2m1 magnitude code of a non-NaN `x` in the low three bits (bit 3 clear, the bits above
/// unspecified), in the form the sm_90a kernels run: six instructions without branches. The
/// e2m1 magnitudes are evenly spaced within three ranges, 0.5 apart below 2, 1 apart in [2, 4)
/// and 2 apart in [4, 6], so `|x|`, saturated to 6 first (everything past 5 encodes as 6),
/// plus a magic number `M` whose ulp is the range's spacing rounds to the nearest multiple of
/// the spacing, ties to even, in a single rounding: the sum is `M + k` ulps with `k = RNE(|x| /
/// spacing)`. The range comes from the exponent field of `max(|x|, 1)` (127, 128 or 129), and
/// `M = 1.5 · 2^(22 + j) + 2j` ulps for range `j` is linear in it (one multiply-add on the
/// field). The `2j` low bits are the range's first code less its first `k` (2 in the upper
/// ranges), even, so they neither move the tie-breaking nor carry (`2j + k ≤ 7`): the code is
/// the sum's low three bits.
#[inline(always)]
pub fn e2m1_magnitude_sum(x: f32) -> u32 {
    let a = f32::from_bits(x.to_bits() & 0x7fff_ffff).min(Minifloat::E2m1.max());
    let field = a.max(1.0).to_bits() >> 23;
    // (field + 22) << 23 | 1 << 22 | 2 · (field − 127): 1.5 · 2^(field − 105) + 2 · (field − 127)
    // ulps, the sum's binade [2^(field − 105), 2^(field − 104)) having ulp 2^(field − 128).
    let magic = f32::from_bits(field * ((1 << 23) + 2) + ((22 << 23) | (1 << 22)) - 254);
    (a + magic).to_bits()
}

/// `e2m1 · 2^-126` of the code in bits 31..28 of `top` (the rest ignored), exactly, in three
/// integer instructions: the magnitude bits land in f32 bits 24..22 and the sign in bit 31
/// (one arithmetic shift, which copies the sign over the bits between, and one mask). Read as
/// an f32 the magnitude field `m` is `m · 2^-127` for `m < 2` (subnormal, so code 1 is 0.5 ·
/// 2^-126) and `(1 + (m & 1) / 2) · 2^(m/2 − 126)` above: e2m1's own rule, a factor 2^126 down.
#[inline(always)]
pub fn e2m1_tiny(top: u32) -> f32 {
    f32::from_bits(((top as i32 >> 6) as u32) & 0x81c0_0000)
}

/// 2^126: [`e2m1_tiny`] times this is the e2m1 value, exactly.
pub const E2M1_UP: f32 = exp2i(126);

/// [`nvfp4_decode`] of the code in bits 31..28 of `top`: the e2m1 value built by
/// [`e2m1_tiny`] (brought up exactly: no flush of the subnormal) times `scale`, the one
/// rounding of the reference. Two multiplies; [`nvfp4_decode_top_fused`] saves one.
#[inline(always)]
pub fn nvfp4_decode_top(top: u32, scale: f32) -> f32 {
    e2m1_tiny(top) * E2M1_UP * scale
}

/// [`nvfp4_decode`] of the code in bits 31..28 of `top` given `up_scale = scale · 2^126`, when
/// that is finite (`|scale| < 4`): `e2m1 · 2^-126 · scale · 2^126` is the same real product
/// as the reference's, rounded once by one multiply. (Past 4 the prescaled scale overflows:
/// [`nvfp4_decode_top`].)
#[inline(always)]
pub fn nvfp4_decode_top_fused(top: u32, up_scale: f32) -> f32 {
    e2m1_tiny(top) * up_scale
}

/// An NVFP4 element's value: `e2m1(code) · scale`.
#[inline(always)]
pub fn nvfp4_decode(code: u8, scale: f32) -> f32 {
    Minifloat::E2m1.decode(code) * scale
}

#[cfg(test)]
mod tests;
