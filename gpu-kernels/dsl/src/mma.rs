//! Warp-level tensor-core MMA on register fragments (`mma.sync.aligned.m16n8k16`): each thread
//! loads its own share of the operands (no shared-memory staging), so a kernel can stream a
//! weight straight from HBM into the tensor cores. The decode GEMM is the user.
//!
//! **Fragments from 16-byte vectors.** A dot product does not care in which order its K terms
//! are summed, so A and B may present K to the instruction in any order, as long as both use the
//! same one. [`k32_steps`] uses that: thread `(g, t)` (g = lane / 4, t = lane % 4) loads eight
//! consecutive K elements, `k0 + 8t .. k0 + 8t + 8`, of A's rows g and g + 8 and of B's column g
//! as one 16-byte vector each, and those 32 K elements of the warp feed two k16 instructions:
//! words 0 and 1 of each vector (elements 8t .. 8t + 4) become the instruction's K slots
//! 2t, 2t + 1 and 2t + 8, 2t + 9 of the first, words 2 and 3 the same slots of the second.
//! Every physical K element meets its partner exactly once, so the sum is the dot product.

pub use crate::global::Words;
use crate::num::{Bf16, F16};
use crate::ptx::mma;

/// One warp's 16 × 8 f32 accumulator: register `r` of lane `l` holds row
/// `l / 4 + 8·(r / 2)`, column `2·(l % 4) + r % 2` ([`Acc16x8::coords`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Acc16x8(pub f32, pub f32, pub f32, pub f32);

impl Acc16x8 {
    /// Zeros.
    pub const ZERO: Acc16x8 = Acc16x8(0.0, 0.0, 0.0, 0.0);

    /// (row, column) of register `reg` (0..4) of lane `lane`.
    #[inline(always)]
    pub const fn coords(lane: u32, reg: u32) -> (u32, u32) {
        (lane / 4 + 8 * (reg / 2), 2 * (lane % 4) + reg % 2)
    }

    /// Register `reg` (0..4; others give register 3).
    #[inline(always)]
    pub fn get(&self, reg: u32) -> f32 {
        match reg {
            0 => self.0,
            1 => self.1,
            2 => self.2,
            _ => self.3,
        }
    }
}

/// The A operand of one m16n8k16 instruction (16 × 16 16-bit elements, row-major: registers
/// hold rows g, g + 8, g, g + 8 at K slots 2t, 2t + 1, 2t, 2t + 1, 2t + 8, 2t + 9, 2t + 8, 2t + 9).
#[derive(Clone, Copy, Debug)]
pub struct FragA(pub u32, pub u32, pub u32, pub u32);

/// The B operand of one m16n8k16 instruction (16 × 8, column g at K slots 2t, 2t + 1, then
/// 2t + 8, 2t + 9).
#[derive(Clone, Copy, Debug)]
pub struct FragB(pub u32, pub u32);

/// 16-bit element types the m16n8k16 instruction multiplies (f32 accumulation).
pub trait MmaInput: Copy {
    /// `acc += a·b`.
    ///
    /// # Safety
    /// Every lane of the warp calls this with the warp converged (`mma.sync.aligned`): never
    /// under a branch that differs between lanes.
    unsafe fn mma_m16n8k16(acc: &mut Acc16x8, a: FragA, b: FragB);
}

macro_rules! mma_input {
    ($ty:ty, $form:ident) => {
        impl MmaInput for $ty {
            #[inline(always)]
            unsafe fn mma_m16n8k16(acc: &mut Acc16x8, a: FragA, b: FragB) {
                let mut d = (acc.0, acc.1, acc.2, acc.3);
                // SAFETY: forwarded to the caller (warp convergence).
                unsafe { mma::$form(&mut d, (a.0, a.1, a.2, a.3), (b.0, b.1)) };
                *acc = Acc16x8(d.0, d.1, d.2, d.3);
            }
        }
    };
}

mma_input!(Bf16, mma_m16n8k16_f32_bf16);
mma_input!(F16, mma_m16n8k16_f32_f16);

/// The two k16 instructions' operands for 32 consecutive K elements (see the module doc): `lo`
/// and `hi` are this thread's 16-byte vectors of A's rows g and g + 8, `x` of B's column g.
#[inline(always)]
pub const fn k32_steps(lo: Words, hi: Words, x: Words) -> [(FragA, FragB); 2] {
    [(FragA(lo.0, hi.0, lo.1, hi.1), FragB(x.0, x.1)), (FragA(lo.2, hi.2, lo.3, hi.3), FragB(x.2, x.3))]
}

/// `acc += A·B` over the 32 K elements whose fragments [`k32_steps`] builds.
///
/// # Safety
/// As [`MmaInput::mma_m16n8k16`]: the whole warp, converged.
#[inline(always)]
pub unsafe fn mma_k32<T: MmaInput>(acc: &mut Acc16x8, lo: Words, hi: Words, x: Words) {
    let [(a0, b0), (a1, b1)] = k32_steps(lo, hi, x);
    // SAFETY: forwarded to the caller.
    unsafe {
        T::mma_m16n8k16(acc, a0, b0);
        T::mma_m16n8k16(acc, a1, b1);
    }
}
