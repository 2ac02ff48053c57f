//! Fused gate-up projection with SwiGLU: `out = silu(x·W_gateᵀ) ⊙ (x·W_upᵀ)` in one kernel.
//!
//! An MLP block's first half is two projections of the same activations and an element-wise
//! product. Unfused, a service runs one GEMM into an `[M, 2·I]` buffer and a second kernel that
//! reads it back; fused, the GEMM's epilogue combines each gate column with its up column in
//! registers and writes only `[M, I]`.
//!
//! Weight arrangement (see [`interleave_gate_up`]): the two `I × H` weights are stored as one
//! `2·I' × H` row-major matrix (`I'` = I rounded up to [`GATE_UP_BLOCK`]) whose rows come in
//! blocks of 16: gate rows `8g..8g+8`, then up rows `8g..8g+8`. A wgmma accumulator gives each
//! thread columns `2q, 2q+1` of every 8-column group, so this order puts gate column `j` and up
//! column `j` of the same row in one thread's registers, 4 registers apart, and the combined
//! values land in the accumulator layout of a half-width tile: no shuffles, and the GEMM's own
//! staged TMA store writes them.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::entries;
use warpforge_host::{Error, Result};

use crate::Warpforge;
use crate::gemm::GemmInput;

/// Rows of each weight per interleaving block of the gate-up matrix.
pub const GATE_UP_BLOCK: usize = 8;

/// Element types of the fused kernel: bf16 or f16 activations, weights and output.
pub trait SwigluElement: GemmInput + crate::gemm::GemmOutput {
    /// The fused kernel's entry for this type.
    const SWIGLU_ENTRY: &'static str;
}
impl SwigluElement for half::bf16 {
    const SWIGLU_ENTRY: &'static str = entries::GEMM_SWIGLU_BF16;
}
impl SwigluElement for half::f16 {
    const SWIGLU_ENTRY: &'static str = entries::GEMM_SWIGLU_F16;
}

/// One fused gate-up + SwiGLU call: `x` is `m × hidden`, each weight `intermediate × hidden`,
/// the output `m × intermediate`, all row-major and packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwigluProblem {
    /// Tokens (rows of x and of the output), ≥ 1.
    pub m: usize,
    /// Model width H: columns of x and of each weight (the reduction length), ≥ 1.
    pub hidden: usize,
    /// Intermediate width I: rows of each weight, columns of the output, ≥ 1.
    pub intermediate: usize,
}

impl SwigluProblem {
    /// The problem of `m` tokens through an MLP of width `hidden` and intermediate width
    /// `intermediate`.
    pub fn new(m: usize, hidden: usize, intermediate: usize) -> Self {
        SwigluProblem { m, hidden, intermediate }
    }

    /// Rows of the interleaved gate-up weight: `2·I` rounded up to whole blocks (saturating at
    /// `usize::MAX`, which no buffer holds).
    pub fn gate_up_rows(&self) -> usize {
        self.intermediate.div_ceil(GATE_UP_BLOCK).saturating_mul(2 * GATE_UP_BLOCK)
    }
}

/// Interleaves `gate` and `up` (each `intermediate × hidden`, row-major) into the gate-up weight
/// [`Warpforge::swiglu`] reads: `SwigluProblem::gate_up_rows()` rows of `hidden`, blocks of
/// [`GATE_UP_BLOCK`] gate rows then the same up rows; the last block's missing rows (when
/// `intermediate` is not a multiple of the block) are `zero`. A service does this once, when it
/// loads the weights.
pub fn interleave_gate_up<T: Copy>(gate: &[T], up: &[T], intermediate: usize, hidden: usize, zero: T) -> Result<Vec<T>> {
    let len = intermediate.checked_mul(hidden).ok_or_else(|| Error::InvalidArgument("intermediate × hidden overflows".into()))?;
    if gate.len() != len || up.len() != len {
        return Err(Error::InvalidArgument(format!(
            "gate holds {} and up {} elements; intermediate × hidden is {len}",
            gate.len(),
            up.len()
        )));
    }
    let blocks = intermediate.div_ceil(GATE_UP_BLOCK);
    let rows = SwigluProblem::new(1, hidden, intermediate).gate_up_rows();
    let mut out = Vec::with_capacity(rows.saturating_mul(hidden));
    for block in 0..blocks {
        for source in [gate, up] {
            for r in block * GATE_UP_BLOCK..(block + 1) * GATE_UP_BLOCK {
                if r < intermediate {
                    out.extend_from_slice(&source[r * hidden..(r + 1) * hidden]);
                } else {
                    out.extend(std::iter::repeat_n(zero, hidden));
                }
            }
        }
    }
    Ok(out)
}

impl Warpforge {
    /// `out = silu(x·W_gateᵀ) ⊙ (x·W_upᵀ)`: `x` is `m × hidden`, `w_gate_up` the interleaved
    /// weight of [`interleave_gate_up`] (`gate_up_rows() × hidden`), `out` `m × intermediate`;
    /// all row-major, packed; f32 accumulation, one rounding at the end.
    pub fn swiglu<T: SwigluElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &SwigluProblem,
        x: &impl DevicePtr<T>,
        w_gate_up: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        crate::gemm::run_swiglu(self, stream, problem, x, w_gate_up, out)
    }
}
