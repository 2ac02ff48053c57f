//! Element-wise kernels (saxpy, vector add, silu_mul): grid-stride loops, memory-bound.
//!
//! saxpy and vector add prove the build → load → launch chain for each storage dtype rather than
//! chase bandwidth; each element is touched once with f32 arithmetic. `silu_mul` is the second
//! half of an unfused gate-up + SwiGLU (the baseline of `benches/gemm_swiglu.rs`) and does chase
//! bandwidth: 16-byte loads and stores, eight elements per thread per step, whenever the row
//! length and the pointers allow, and no division in its loop.

use core::num::NonZeroU64;

use warpforge_dsl::global::{F32x4, load_f32x4_l2, store_f32x4};
use warpforge_dsl::kernel;
use warpforge_dsl::math::silu;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::thread::{global_x, grid_stride_x};

/// `y[i] = a·x[i] + y[i]` for `i < n`, f32.
///
/// # Safety
/// `x` and `y` point to at least `n` valid f32 in global memory; `y` does not alias `x`.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_f32(n: u64, a: f32, x: *const f32, y: *mut f32) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = a * *x.add(i) + *y.add(i) };
        i += grid_stride_x();
    }
}

/// `y[i] = round(a·x[i] + y[i])` for `i < n`, bf16 storage, f32 arithmetic.
///
/// # Safety
/// As for [`saxpy_f32`], with bf16 elements.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_bf16(n: u64, a: f32, x: *const Bf16, y: *mut Bf16) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = Bf16::from_f32(a * (*x.add(i)).to_f32() + (*y.add(i)).to_f32()) };
        i += grid_stride_x();
    }
}

/// `y[i] = round(a·x[i] + y[i])` for `i < n`, f16 storage, f32 arithmetic.
///
/// # Safety
/// As for [`saxpy_f32`], with f16 elements.
#[kernel(max_threads = 1024)]
pub unsafe fn saxpy_f16(n: u64, a: f32, x: *const F16, y: *mut F16) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *y.add(i) = F16::from_f32(a * (*x.add(i)).to_f32() + (*y.add(i)).to_f32()) };
        i += grid_stride_x();
    }
}

/// `out[i] = a[i] + b[i]` for `i < n`, f32.
///
/// # Safety
/// `a`, `b`, `out` point to at least `n` valid f32; `out` aliases neither input.
#[kernel(max_threads = 1024)]
pub unsafe fn vector_add_f32(n: u64, a: *const f32, b: *const f32, out: *mut f32) {
    let mut i = global_x();
    while (i as u64) < n {
        // SAFETY: i < n and the launch contract above.
        unsafe { *out.add(i) = *a.add(i) + *b.add(i) };
        i += grid_stride_x();
    }
}

/// 16-bit elements per 16-byte vector access.
const VECTOR_ELEMS: u64 = 8;
/// Alignment of a 16-byte vector access, bytes.
const VECTOR_ALIGN: usize = 16;

/// A 16-bit float storage type as `silu_mul` reads and writes it: element by element, or two
/// to a 32-bit word (the lower address in the low half).
trait Storage16: Copy {
    /// The value whose bits are `bits`.
    fn from_bits(bits: u16) -> Self;
    /// Exact widening.
    fn widen(self) -> f32;
    /// Round to nearest even.
    fn narrow(v: f32) -> Self;
    /// Rounds two values into one word, `lo` at the lower address.
    fn pack2(lo: f32, hi: f32) -> u32;
}

impl Storage16 for Bf16 {
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        Bf16(bits)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        Bf16::pack2(lo, hi)
    }
}

impl Storage16 for F16 {
    #[inline(always)]
    fn from_bits(bits: u16) -> Self {
        F16(bits)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        F16::from_f32(v)
    }
    #[inline(always)]
    fn pack2(lo: f32, hi: f32) -> u32 {
        F16::pack2(lo, hi)
    }
}

/// Where a grid-stride loop over a matrix of `cols` columns stands. The first position costs
/// one division; each stride after it is an add and a compare (the stride is a fixed number of
/// whole rows plus a remainder), instead of a 64-bit division per step.
struct Cursor {
    row: u64,
    col: u64,
    cols: u64,
    stride_rows: u64,
    stride_cols: u64,
}

impl Cursor {
    /// The position of linear index `first`, advancing by `stride` elements.
    #[inline(always)]
    fn new(first: u64, stride: u64, cols: NonZeroU64) -> Self {
        Cursor {
            row: first / cols,
            col: first % cols,
            cols: cols.get(),
            stride_rows: stride / cols,
            stride_cols: stride % cols,
        }
    }

    #[inline(always)]
    fn advance(&mut self) {
        self.row += self.stride_rows;
        self.col += self.stride_cols;
        if self.col >= self.cols {
            self.col -= self.cols;
            self.row += 1;
        }
    }
}

/// `silu(gate) · up` for the two 16-bit elements packed in each of `gate` and `up` (32-bit
/// words as a vector load hands them over, in f32 registers), rounded into one word.
#[inline(always)]
fn silu_mul_word<S: Storage16>(gate: f32, up: f32) -> u32 {
    // The vector load moves 16-bit pairs through f32 registers; these are bit moves only.
    let (gate, up) = (gate.to_bits(), up.to_bits());
    let half = |word: u32, shift: u32| S::from_bits((word >> shift) as u16).widen();
    S::pack2(silu(half(gate, 0)) * half(up, 0), silu(half(gate, 16)) * half(up, 16))
}

/// `out[r][c] = silu(h[r][c]) · h[r][I + c]`, `h` `m × 2I` and `out` `m × I`, both row-major
/// and packed (`I = intermediate`). With `I % 8 == 0` and both pointers 16-byte aligned, each
/// row is whole 16-byte vectors (gate, up and out alike), so a thread moves eight elements per
/// step; otherwise one.
///
/// # Safety
/// `h` points to `m·2I` and `out` to `m·I` valid elements in global memory; `out` does not
/// overlap `h`.
#[inline(always)]
unsafe fn silu_mul_rows<S: Storage16>(m: u64, intermediate: u64, h: *const S, out: *mut S) {
    let Some(cols) = NonZeroU64::new(intermediate) else { return };
    let aligned = (h as usize | out as usize).is_multiple_of(VECTOR_ALIGN);
    let vectors =
        NonZeroU64::new(intermediate / VECTOR_ELEMS).filter(|_| aligned && intermediate.is_multiple_of(VECTOR_ELEMS));
    let (first, stride) = (global_x() as u64, grid_stride_x() as u64);
    if let Some(vectors) = vectors {
        // (m, I / 8) vectors.
        let mut at = Cursor::new(first, stride, vectors);
        while at.row < m {
            let col = at.col * VECTOR_ELEMS;
            let gate = (at.row * 2 * intermediate + col) as usize;
            let dst = (at.row * intermediate + col) as usize;
            // SAFETY: row < m and col + 8 ≤ I, so both 8-element runs lie inside h's row and
            // the output run inside out's; all three start a multiple of 8 elements (16 bytes)
            // from a 16-byte-aligned base (I % 8 == 0). h is only read.
            unsafe {
                let g = load_f32x4_l2(h.add(gate) as *const f32);
                let u = load_f32x4_l2(h.add(gate + intermediate as usize) as *const f32);
                let words = F32x4(
                    f32::from_bits(silu_mul_word::<S>(g.0, u.0)),
                    f32::from_bits(silu_mul_word::<S>(g.1, u.1)),
                    f32::from_bits(silu_mul_word::<S>(g.2, u.2)),
                    f32::from_bits(silu_mul_word::<S>(g.3, u.3)),
                );
                store_f32x4(out.add(dst) as *mut f32, words);
            }
            at.advance();
        }
    } else {
        // (m, I) elements.
        let mut at = Cursor::new(first, stride, cols);
        while at.row < m {
            let gate = (at.row * 2 * intermediate + at.col) as usize;
            let dst = (at.row * intermediate + at.col) as usize;
            // SAFETY: row < m and col < I: gate and gate + I lie in h's row, dst in out's.
            unsafe {
                let (g, u) = ((*h.add(gate)).widen(), (*h.add(gate + intermediate as usize)).widen());
                *out.add(dst) = S::narrow(silu(g) * u);
            }
            at.advance();
        }
    }
}

/// `out = silu(gate) ⊙ up` over `h = [gate | up]` (`m × 2I` → `m × I`), bf16 storage, f32
/// arithmetic, one rounding.
///
/// # Safety
/// As for `silu_mul_rows`: `h` holds `m·2·intermediate` and `out` `m·intermediate` bf16, not
/// overlapping.
#[kernel(max_threads = 1024)]
pub unsafe fn silu_mul_bf16(m: u64, intermediate: u64, h: *const Bf16, out: *mut Bf16) {
    // SAFETY: the launch contract above.
    unsafe { silu_mul_rows(m, intermediate, h, out) }
}

/// `out = silu(gate) ⊙ up`, f16 storage; as [`silu_mul_bf16`].
///
/// # Safety
/// As for [`silu_mul_bf16`], with f16 elements.
#[kernel(max_threads = 1024)]
pub unsafe fn silu_mul_f16(m: u64, intermediate: u64, h: *const F16, out: *mut F16) {
    // SAFETY: the launch contract above.
    unsafe { silu_mul_rows(m, intermediate, h, out) }
}
