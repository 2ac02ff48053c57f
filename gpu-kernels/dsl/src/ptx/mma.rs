//! Warp-level tensor-core MMA (`mma.sync`, sm_80 and later): the register-operand form whose
//! fragments each thread of a warp loads itself, for kernels that stream operands straight from
//! global memory (the decode GEMM) instead of staging tiles for wgmma.

use core::arch::asm;

macro_rules! mma_m16n8k16 {
    ($($(#[$doc:meta])* $name:ident => $types:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `mma.sync.aligned.m16n8k16.row.col.f32.", $types, ".f32 {d0, d1, d2, d3}, {a0, a1, a2, a3}, {b0, b1}, {d0, d1, d2, d3};`")]
        /// (D = A·B + D in place; REFERENCE's m16n8k16 fragment maps: `a` holds A's rows g and
        /// g + 8 at columns 2t, 2t + 1, then at 2t + 8, 2t + 9 as (g, g + 8, g, g + 8); `b` holds B's
        /// column g at rows 2t, 2t + 1 then 2t + 8, 2t + 9; `d` holds D's rows g, g + 8 at
        /// columns 2t, 2t + 1; g = lane / 4, t = lane % 4).
        ///
        /// # Safety
        /// Every lane of the warp executes this same instruction, converged (`.sync.aligned`).
        #[inline(always)]
        pub unsafe fn $name(d: &mut (f32, f32, f32, f32), a: (u32, u32, u32, u32), b: (u32, u32)) {
            // SAFETY: register operands only; the caller guarantees warp convergence. Not `pure`:
            // LLVM must not move a `.sync.aligned` instruction across control flow.
            unsafe {
                asm!(concat!("mma.sync.aligned.m16n8k16.row.col.f32.", $types, ".f32 ",
                             "{{{0}, {1}, {2}, {3}}}, {{{4}, {5}, {6}, {7}}}, {{{8}, {9}}}, {{{0}, {1}, {2}, {3}}};"),
                     inout(reg32) d.0, inout(reg32) d.1, inout(reg32) d.2, inout(reg32) d.3,
                     in(reg32) a.0, in(reg32) a.1, in(reg32) a.2, in(reg32) a.3,
                     in(reg32) b.0, in(reg32) b.1, options(nomem, nostack))
            };
        }
    )*};
}

mma_m16n8k16! {
    /// `D (16×8, f32) += A (16×16, bf16) · B (16×8, bf16)`.
    mma_m16n8k16_f32_bf16 => "bf16.bf16";
    /// `D (16×8, f32) += A (16×16, f16) · B (16×8, f16)`.
    mma_m16n8k16_f32_f16 => "f16.f16";
}
