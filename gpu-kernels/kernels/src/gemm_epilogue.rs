//! The GEMM epilogue's element math: `D = act(alpha·acc + beta·C + bias)`, and the output
//! element types.

use warpforge_dsl::abi::{Activation, GemmParams};
use warpforge_dsl::math;
use warpforge_dsl::num::{Bf16, F16};

/// An output element type of the epilogue.
pub trait Output: Copy {
    /// The 16-bit type staged in shared memory for TMA stores (16-bit outputs are staged as
    /// themselves; f32 output is always stored directly and never uses its staging type).
    type Staged: Copy;
    /// Rounds an f32 result.
    fn from_f32(v: f32) -> Self;
    /// Reads an element of C as f32.
    fn to_f32(self) -> f32;
    /// Two rounded f32 results in the staged type, packed (`lo` in the low half).
    fn staged_pair(lo: f32, hi: f32) -> u32;
}
impl Output for Bf16 {
    type Staged = Bf16;
    fn from_f32(v: f32) -> Self {
        Bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        Bf16::to_f32(self)
    }
    fn staged_pair(lo: f32, hi: f32) -> u32 {
        Bf16::pack2(lo, hi)
    }
}
impl Output for F16 {
    type Staged = F16;
    fn from_f32(v: f32) -> Self {
        F16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
    fn staged_pair(lo: f32, hi: f32) -> u32 {
        F16::pack2(lo, hi)
    }
}
impl Output for f32 {
    type Staged = Bf16;
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn staged_pair(lo: f32, hi: f32) -> u32 {
        Bf16::pack2(lo, hi)
    }
}

/// `alpha·value + beta·C + bias`, activated: the value of D at (`row`, `col`) of `batch`.
///
/// # Safety
/// `p.c` (when non-zero) and `p.bias` (when non-zero) are valid for every in-bounds element.
#[inline(always)]
pub unsafe fn finish<O: Output>(p: &GemmParams, value: f32, alpha: f32, batch: u32, row: u32, col: u32) -> f32 {
    let mut v = alpha * value;
    let inside = row < p.m && col < p.n;
    if p.c != 0 && inside {
        let at = batch as u64 * p.stride_c + row as u64 * p.ldc + col as u64;
        // SAFETY: an in-bounds element of C (function contract).
        v += p.beta * unsafe { *(p.c as *const O).add(at as usize) }.to_f32();
    }
    if p.bias != 0 && inside {
        // SAFETY: col < n, the bias length.
        v += unsafe { *(p.bias as *const f32).add(col as usize) };
    }
    match Activation::from_code(p.activation) {
        Activation::None => v,
        Activation::Relu => math::relu(v),
        Activation::Silu => math::silu(v),
        Activation::GeluTanh => math::gelu_tanh(v),
    }
}
