//! The fixed part of the wgmma layer: operand type markers, the RS A fragment, the
//! accumulator and wgmma traits, and the `wgmma_forms!` macro that the generated table
//! (`generated/wgmma.rs`) instantiates once per shape. Hand-written; only the table is generated.
#![cfg_attr(rustfmt, rustfmt::skip)]

use core::arch::asm;

/// Input element types of wgmma, as type-level markers.
pub mod dtype {
    /// IEEE half.
    pub enum F16 {}
    /// bfloat16.
    pub enum Bf16 {}
    /// TensorFloat-32.
    pub enum Tf32 {}
    /// FP8 E4M3.
    pub enum E4m3 {}
    /// FP8 E5M2.
    pub enum E5m2 {}
}

/// The A fragment of the RS forms: 4 registers per thread (REFERENCE §8.5 gives the map).
#[derive(Clone, Copy, Debug, Default)]
pub struct RegA(pub u32, pub u32, pub u32, pub u32);

/// A wgmma accumulator tile (m64nN) held by one warpgroup, one struct field per register.
pub trait Accumulator: Copy {
    /// N of the tile.
    const N: u32;
    /// Registers per thread.
    const REGS: usize;
    /// What one register holds: `f32`, or two f16 packed in a `u32`.
    type Elem: Copy + Default;
    /// All zeros.
    const ZERO: Self;
    /// Calls `f(i, register i)` for every register with constant indices (the fields stay in
    /// registers after inlining, unlike an indexed array).
    fn for_each(&self, f: impl FnMut(usize, Self::Elem));
    /// Calls `f(i, &mut register i)` for every register, as [`Accumulator::for_each`] (e.g. to
    /// add partial sums computed elsewhere into the tile).
    fn for_each_mut(&mut self, f: impl FnMut(usize, &mut Self::Elem));
    /// Register `i`: with a constant `i` (an unrolled loop) it folds to that field; with a
    /// run-time one it is a chain of selects, never an indexed array in local memory.
    #[inline(always)]
    fn get(&self, i: usize) -> Self::Elem {
        let mut out = Self::Elem::default();
        self.for_each(|j, v| {
            if j == i {
                out = v;
            }
        });
        out
    }
    /// The tile whose register `i` is `f(i)`, `i` in order.
    #[inline(always)]
    fn from_fn(mut f: impl FnMut(usize) -> Self::Elem) -> Self {
        let mut tile = Self::ZERO;
        tile.for_each_mut(|i, r| *r = f(i));
        tile
    }
}

/// `D = A·B (+ D)` with A and B from shared-memory descriptors, for this accumulator and the
/// input types `A`, `B` (markers from [`dtype`]).
pub trait WgmmaSs<A, B>: Accumulator {
    /// Issues the wgmma.
    ///
    /// # Safety
    /// All 128 threads of a warpgroup execute it convergently with identical descriptors, after
    /// a `wgmma.fence` whenever the accumulator was last written by something else; the
    /// descriptors describe operand tiles in shared memory that stay unmodified until a
    /// `wgmma.wait_group` covers this operation, and the accumulator is not read before it.
    /// `TRANS_A`/`TRANS_B` may be 1 only for 16-bit inputs (checked at compile time).
    unsafe fn mma_ss<const SCALE_A: i32, const SCALE_B: i32, const TRANS_A: u32, const TRANS_B: u32>(
        &mut self,
        a_desc: u64,
        b_desc: u64,
        scale_d: bool,
    );
}

/// `D = A·B (+ D)` with A from registers ([`RegA`]) and B from a shared-memory descriptor.
pub trait WgmmaRs<A, B>: Accumulator {
    /// Issues the wgmma.
    ///
    /// # Safety
    /// As for [`WgmmaSs::mma_ss`]; additionally `a` must not be modified before the covering
    /// `wgmma.wait_group`.
    unsafe fn mma_rs<const SCALE_A: i32, const SCALE_B: i32, const TRANS_B: u32>(
        &mut self,
        a: &RegA,
        b_desc: u64,
        scale_d: bool,
    );
}

/// Legal immediates: scales ±1, transposes 0/1.
pub(crate) const fn imm_ok(scale_a: i32, scale_b: i32, trans_a: u32, trans_b: u32) -> bool {
    (scale_a == 1 || scale_a == -1) && (scale_b == 1 || scale_b == -1) && trans_a <= 1 && trans_b <= 1
}

macro_rules! wgmma_forms {
    ($ss:ident, $rs:ident, $acc:ident, $regs:ident, $n:literal, $shape:literal, $a:ident, $b:ident, trans) => {
        #[doc = concat!("`D(64×", $n, ") = A·B + scale_d·D`, A and B from shared-memory descriptors.")]
        #[doc = concat!("\n\nEmits `wgmma.mma_async.sync.aligned.m64n", $n, $shape, " {d…}, a_desc, b_desc, p, SCALE_A, SCALE_B, TRANS_A, TRANS_B;`.")]
        ///
        /// # Safety
        /// See [`WgmmaSs::mma_ss`].
        #[inline(always)]
        pub unsafe fn $ss<const SCALE_A: i32, const SCALE_B: i32, const TRANS_A: u32, const TRANS_B: u32>(
            d: &mut $acc, a_desc: u64, b_desc: u64, scale_d: bool,
        ) {
            const { assert!(imm_ok(SCALE_A, SCALE_B, TRANS_A, TRANS_B), "wgmma: scale ±1, trans 0/1") };
            // SAFETY: forwarded to the caller.
            unsafe {
                $regs!(d, $shape, "{a}, {b}, %p, {sa}, {sb}, {ta}, {tb}";
                       a = in(reg64) a_desc, b = in(reg64) b_desc, sd = in(reg32) scale_d as u32,
                       sa = const SCALE_A, sb = const SCALE_B, ta = const TRANS_A, tb = const TRANS_B)
            };
        }

        #[doc = concat!("`D(64×", $n, ") = A·B + scale_d·D`, A from registers, B from a shared-memory descriptor.")]
        #[doc = concat!("\n\nEmits `wgmma.mma_async.sync.aligned.m64n", $n, $shape, " {d…}, {a0, a1, a2, a3}, b_desc, p, SCALE_A, SCALE_B, TRANS_B;`.")]
        ///
        /// # Safety
        /// See [`WgmmaRs::mma_rs`].
        #[inline(always)]
        pub unsafe fn $rs<const SCALE_A: i32, const SCALE_B: i32, const TRANS_B: u32>(
            d: &mut $acc, a: &RegA, b_desc: u64, scale_d: bool,
        ) {
            const { assert!(imm_ok(SCALE_A, SCALE_B, 0, TRANS_B), "wgmma: scale ±1, trans 0/1") };
            // SAFETY: forwarded to the caller.
            unsafe {
                $regs!(d, $shape, "{{{a0}, {a1}, {a2}, {a3}}}, {b}, %p, {sa}, {sb}, {tb}";
                       a0 = in(reg32) a.0, a1 = in(reg32) a.1, a2 = in(reg32) a.2, a3 = in(reg32) a.3,
                       b = in(reg64) b_desc, sd = in(reg32) scale_d as u32,
                       sa = const SCALE_A, sb = const SCALE_B, tb = const TRANS_B)
            };
        }

        impl WgmmaSs<dtype::$a, dtype::$b> for $acc {
            #[inline(always)]
            unsafe fn mma_ss<const SCALE_A: i32, const SCALE_B: i32, const TRANS_A: u32, const TRANS_B: u32>(
                &mut self, a_desc: u64, b_desc: u64, scale_d: bool,
            ) {
                // SAFETY: forwarded to the caller.
                unsafe { $ss::<SCALE_A, SCALE_B, TRANS_A, TRANS_B>(self, a_desc, b_desc, scale_d) }
            }
        }

        impl WgmmaRs<dtype::$a, dtype::$b> for $acc {
            #[inline(always)]
            unsafe fn mma_rs<const SCALE_A: i32, const SCALE_B: i32, const TRANS_B: u32>(
                &mut self, a: &RegA, b_desc: u64, scale_d: bool,
            ) {
                // SAFETY: forwarded to the caller.
                unsafe { $rs::<SCALE_A, SCALE_B, TRANS_B>(self, a, b_desc, scale_d) }
            }
        }
    };
    ($ss:ident, $rs:ident, $acc:ident, $regs:ident, $n:literal, $shape:literal, $a:ident, $b:ident, k_major) => {
        #[doc = concat!("`D(64×", $n, ") = A·B + scale_d·D`, A and B (both K-major) from shared-memory descriptors.")]
        #[doc = concat!("\n\nEmits `wgmma.mma_async.sync.aligned.m64n", $n, $shape, " {d…}, a_desc, b_desc, p, SCALE_A, SCALE_B;`.")]
        ///
        /// # Safety
        /// See [`WgmmaSs::mma_ss`].
        #[inline(always)]
        pub unsafe fn $ss<const SCALE_A: i32, const SCALE_B: i32>(d: &mut $acc, a_desc: u64, b_desc: u64, scale_d: bool) {
            const { assert!(imm_ok(SCALE_A, SCALE_B, 0, 0), "wgmma: scale ±1") };
            // SAFETY: forwarded to the caller.
            unsafe {
                $regs!(d, $shape, "{a}, {b}, %p, {sa}, {sb}";
                       a = in(reg64) a_desc, b = in(reg64) b_desc, sd = in(reg32) scale_d as u32,
                       sa = const SCALE_A, sb = const SCALE_B)
            };
        }

        #[doc = concat!("`D(64×", $n, ") = A·B + scale_d·D`, A from registers, B (K-major) from a shared-memory descriptor.")]
        #[doc = concat!("\n\nEmits `wgmma.mma_async.sync.aligned.m64n", $n, $shape, " {d…}, {a0, a1, a2, a3}, b_desc, p, SCALE_A, SCALE_B;`.")]
        ///
        /// # Safety
        /// See [`WgmmaRs::mma_rs`].
        #[inline(always)]
        pub unsafe fn $rs<const SCALE_A: i32, const SCALE_B: i32>(d: &mut $acc, a: &RegA, b_desc: u64, scale_d: bool) {
            const { assert!(imm_ok(SCALE_A, SCALE_B, 0, 0), "wgmma: scale ±1") };
            // SAFETY: forwarded to the caller.
            unsafe {
                $regs!(d, $shape, "{{{a0}, {a1}, {a2}, {a3}}}, {b}, %p, {sa}, {sb}";
                       a0 = in(reg32) a.0, a1 = in(reg32) a.1, a2 = in(reg32) a.2, a3 = in(reg32) a.3,
                       b = in(reg64) b_desc, sd = in(reg32) scale_d as u32, sa = const SCALE_A, sb = const SCALE_B)
            };
        }

        impl WgmmaSs<dtype::$a, dtype::$b> for $acc {
            #[inline(always)]
            unsafe fn mma_ss<const SCALE_A: i32, const SCALE_B: i32, const TRANS_A: u32, const TRANS_B: u32>(
                &mut self, a_desc: u64, b_desc: u64, scale_d: bool,
            ) {
                const { assert!(TRANS_A == 0 && TRANS_B == 0, "wgmma: only 16-bit operands may be MN-major") };
                // SAFETY: forwarded to the caller.
                unsafe { $ss::<SCALE_A, SCALE_B>(self, a_desc, b_desc, scale_d) }
            }
        }

        impl WgmmaRs<dtype::$a, dtype::$b> for $acc {
            #[inline(always)]
            unsafe fn mma_rs<const SCALE_A: i32, const SCALE_B: i32, const TRANS_B: u32>(
                &mut self, a: &RegA, b_desc: u64, scale_d: bool,
            ) {
                const { assert!(TRANS_B == 0, "wgmma: only 16-bit operands may be MN-major") };
                // SAFETY: forwarded to the caller.
                unsafe { $rs::<SCALE_A, SCALE_B>(self, a, b_desc, scale_d) }
            }
        }
    };
}
pub(crate) use wgmma_forms;
