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

use warpforge_dsl::logic::acc_rows::row_slot;
use warpforge_dsl::logic::fragment::{acc_coord, acc_thread_row};
use warpforge_dsl::logic::quant::{self as q, GROUP};
use warpforge_dsl::math::silu;
use warpforge_dsl::num::{Bf16, E4m3, F16};
use warpforge_dsl::parts::epilogue::{
    DirectStore, Halves, Output, StagedStore, pair_columns, store_direct, store_staged,
};
use warpforge_dsl::parts::rows::{RowPair, fold_rows, quad_reduce};
use warpforge_dsl::warpgroup;
use warpforge_dsl::warpgroup::acc::{Acc64x128F32, Acc64x256F32, Accumulator};

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

/// The SwiGLU epilogue quantised for an FP8 down projection: each row's 128 outputs of the
/// tile (one 1 × 128 group: a wide tile's 256 gate-up columns) become e4m3 codes with one f32
/// scale, `amax / 448` (rounded up to a power of two when `POW2`: UE8M0), exactly as
/// `logic::quant`'s per-token quantiser computes them from the f32 values (NaN and ±∞ count 0
/// towards the amax, codes saturate). Codes go to `p.d` (`u8`, row pitch `p.ldd`), the scales
/// to `p.c` MN-major (`scale[g · p.ldc + row]`, `p.ldc = round_up(M, 4)`), the layout
/// `fp8_gemm` reads as A: the down projection's input, with no pass between.
pub struct SwiGluE4m3<const POW2: bool>;

impl<const POW2: bool> TileEpilogue<Acc64x256F32> for SwiGluE4m3<POW2> {
    type Out = Bf16;

    #[inline(always)]
    unsafe fn write(acc: &Acc64x256F32, t: &BlockTarget<'_, Bf16>) {
        let h: Acc64x128F32 = pair_columns(acc, |gate, up| silu(gate) * up);
        let (p, col0) = (t.p, t.col0 / 2);
        let partial = fold_rows(&h, RowPair::splat(0.0), |a, v| q::amax_combine(a, q::finite_abs(v)));
        // SAFETY: the whole warpgroup calls `write` (the trait's contract): every lane of its warps.
        let amax = unsafe { quad_reduce(partial, q::amax_combine) };
        let scale = amax.map(|a| q::scale_from_amax(a, E4m3::MAX, POW2));
        let inverse = scale.map(|s| 1.0 / s);
        let thread = warpgroup::thread_index_in_place();
        let codes = p.d as *mut u16;
        h.for_each(|i, v| {
            // Registers 2j and 2j + 1 are columns c and c + 1 of one row: one code pair.
            if i % 2 == 1 {
                return;
            }
            let (r, c) = acc_coord(thread, i as u32);
            let (row, col) = (t.row0 + r, col0 + c);
            if row >= p.m || col >= p.n {
                return;
            }
            let s = inverse.get(row_slot(i as u32));
            let pair = E4m3::pack2(v * s, h.get(i + 1) * s);
            // SAFETY: (row, col) and col + 1 lie inside the M × I codes (`p.n` = I is even and
            // `col` is even, as `p.ldd`: the host's rules), 2-byte aligned.
            unsafe { *codes.add(((row as u64 * p.ldd + col as u64) / 2) as usize) = pair };
        });
        if thread % 4 == 0 {
            // The quad's first lane writes its two rows' scales.
            let (scales, at) = (p.c as *mut f32, (col0 / GROUP as u32) as u64 * p.ldc);
            let upper = t.row0 + acc_thread_row(thread);
            if upper < p.m {
                // SAFETY: group col0 / 128 of row `upper` < M: inside the scale matrix.
                unsafe { *scales.add((at + upper as u64) as usize) = scale.0 };
            }
            if upper + 8 < p.m {
                // SAFETY: as above, row `upper + 8`.
                unsafe { *scales.add((at + upper as u64 + 8) as usize) = scale.1 };
            }
        }
    }
}

gemm_entries! {
    gemm_swiglu_e4m3_bf16_sm90: Bf16 => SwiGluE4m3<false>, wide, pingpong = false;
    gemm_swiglu_ue8m0_bf16_sm90: Bf16 => SwiGluE4m3<true>, wide, pingpong = false;
}

gemm_entries! {
    gemm_swiglu_bf16_sm90: Bf16 => SwiGlu<Bf16>, wide, pingpong = false;
    gemm_swiglu_f16_sm90: F16 => SwiGlu<F16>, wide, pingpong = false;
    gemm_swiglu_bf16_pingpong_sm90: Bf16 => SwiGlu<Bf16>, wide, pingpong = true;
    gemm_swiglu_f16_pingpong_sm90: F16 => SwiGlu<F16>, wide, pingpong = true;
    gemm_swiglu_bf16_narrow_sm90: Bf16 => SwiGlu<Bf16>, narrow, pingpong = false;
    gemm_swiglu_f16_narrow_sm90: F16 => SwiGlu<F16>, narrow, pingpong = false;
}
