//! Fused gate-up projection + SwiGLU on the sm_90 GEMM body: `out = silu(x·W_gateᵀ) ⊙
//! (x·W_upᵀ)`, one kernel, `out` written once.
//!
//! The kernel is the persistent warp-specialised GEMM of [`crate::gemm_bf16_ws_persistent_sm90`]
//! (same ring, roles, schedules and stream-K fix-up) run over the interleaved gate-up weight
//! (`2·I'` rows: blocks of 8 gate rows, then the same 8 up rows), with this file's epilogue:
//! [`pair_columns`] turns each warpgroup's 64 × BN accumulator (BN / 2 gate-up column pairs)
//! into the 64 × BN/2 tile of `silu(gate) · up` in registers, which leaves through the GEMM's
//! staged TMA store (or direct stores) at output column `n0 / 2`. `p.n` is I (the output's
//! columns); the plan's tile columns are those of the gate-up weight. Entries: cooperative
//! 128 × 256 tiles, ping-pong 64 × 256 tiles, narrow 128 × 128 tiles, chosen by the host as for
//! the plain GEMM. Measured against cuBLAS + a separate SwiGLU kernel: docs/PERF.md.

use core::marker::PhantomData;

use warpforge_dsl::math::silu;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::{
    DirectStore, Halves, Output, StagedStore, pair_columns, store_direct, store_staged,
};

use crate::gemm_bf16_ws_persistent_sm90::{BlockTarget, TileEpilogue, gemm_entries, narrow, wide};

/// The SwiGLU epilogue writing `O`.
pub struct SwiGlu<O>(PhantomData<O>);

impl<O: Output, W: Halves> TileEpilogue<W> for SwiGlu<O> {
    type Out = O;

    #[inline(always)]
    unsafe fn write(acc: &W, t: &BlockTarget<'_, O>) {
        let h: W::Half = pair_columns(acc, |gate, up| silu(gate) * up);
        let (p, col0) = (t.p, t.col0 / 2);
        if p.d_tma != 0 {
            let target = StagedStore::<O> {
                d_map: t.d_map,
                staging: t.staging,
                barrier: t.barrier,
                leader: t.leader,
                batch: t.batch as i32,
                row0: t.row0,
                col0,
            };
            // SAFETY: `d_map` describes the output when `d_tma` is set (host contract); the
            // staging and barrier are the calling warpgroup's (the trait's contract).
            unsafe { store_staged(&h, &target, |_, _, v| v) };
        } else {
            let d = DirectStore { d: p.d as *mut O, ld: p.ldd, batch_stride: p.stride_d, rows: p.m, cols: p.n };
            // SAFETY: `p.d` is valid for every element inside m × n (kernel contract).
            unsafe { store_direct(&h, &d, (t.batch, t.row0, col0), |_, _, v| v) };
        }
    }
}

gemm_entries! {
    gemm_swiglu_bf16_sm90: Bf16 => SwiGlu<Bf16>, wide, pingpong = false;
    gemm_swiglu_f16_sm90: F16 => SwiGlu<F16>, wide, pingpong = false;
    gemm_swiglu_bf16_pingpong_sm90: Bf16 => SwiGlu<Bf16>, wide, pingpong = true;
    gemm_swiglu_f16_pingpong_sm90: F16 => SwiGlu<F16>, wide, pingpong = true;
    gemm_swiglu_bf16_narrow_sm90: Bf16 => SwiGlu<Bf16>, narrow, pingpong = false;
    gemm_swiglu_f16_narrow_sm90: F16 => SwiGlu<F16>, narrow, pingpong = false;
}
