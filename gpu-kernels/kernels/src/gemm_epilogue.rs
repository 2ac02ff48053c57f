//! The plain GEMM's epilogue: `D = act(alpha·acc + beta·C + bias)` ([`Linear`]), or `D = acc`
//! ([`Plain`]), written through the staged TMA store when the host made a D map (`d_tma`) and by
//! direct stores otherwise.

use core::marker::PhantomData;

use warpforge_dsl::abi::{Activation, GemmParams};
use warpforge_dsl::math;
use warpforge_dsl::parts::epilogue::{DirectStore, Output, StagedStore, store_direct, store_staged};
use warpforge_dsl::warpgroup::acc::Accumulator;

use crate::gemm_bf16_ws_persistent_sm90::{BlockTarget, TileEpilogue};

/// `alpha·value + beta·C + bias`, activated: the value of D at (`row`, `col`) of `batch`.
///
/// # Safety
/// `p.c` (when non-zero) and `p.bias` (when non-zero) are valid for every in-bounds element.
#[inline(always)]
pub unsafe fn finish<O: Output>(p: &GemmParams, value: f32, batch: u32, row: u32, col: u32) -> f32 {
    let mut v = p.alpha * value;
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

/// The GEMM epilogue writing `O`.
pub struct Linear<O>(PhantomData<O>);

impl<O: Output, W: Accumulator<Elem = f32>> TileEpilogue<W> for Linear<O> {
    type Out = O;

    #[inline(always)]
    unsafe fn write(acc: &W, t: &BlockTarget<'_, O>) {
        let (p, batch, row0, col0) = (t.p, t.batch, t.row0, t.col0);
        // SAFETY: C and bias are valid for every in-bounds element (the kernel's contract).
        let full = |r: u32, c: u32, v: f32| unsafe { finish::<O>(p, v, batch, row0 + r, col0 + c) };
        if p.d_tma != 0 {
            let target = staged(t);
            if p.c == 0 && p.bias == 0 && p.activation == 0 {
                // The common case gets its own unrolled copy with no per-element branches.
                // SAFETY: `d_map` describes D when `d_tma` is set (host contract); the staging
                // and barrier are the calling warpgroup's (the trait's contract).
                unsafe { store_staged(acc, &target, |_, _, v| p.alpha * v) };
            } else {
                // SAFETY: as above.
                unsafe { store_staged(acc, &target, full) };
            }
        } else {
            // SAFETY: `p.d` is valid for every in-bounds element of D (kernel contract).
            unsafe { store_direct(acc, &direct::<O>(p), (batch, row0, col0), full) };
        }
    }
}

/// The epilogue of a GEMM whose D is its accumulator as is (`alpha = 1`, no C, bias or
/// activation: the block-scaled FP8 GEMMs), without [`Linear`]'s per-element paths for them.
pub struct Plain<O>(PhantomData<O>);

impl<O: Output, W: Accumulator<Elem = f32>> TileEpilogue<W> for Plain<O> {
    type Out = O;

    #[inline(always)]
    unsafe fn write(acc: &W, t: &BlockTarget<'_, O>) {
        if t.p.d_tma != 0 {
            // SAFETY: `d_map` describes D when `d_tma` is set (host contract); the staging and
            // barrier are the calling warpgroup's (the trait's contract).
            unsafe { store_staged(acc, &staged(t), |_, _, v| v) };
        } else {
            // SAFETY: `p.d` is valid for every in-bounds element of D (kernel contract).
            unsafe { store_direct(acc, &direct::<O>(t.p), (t.batch, t.row0, t.col0), |_, _, v| v) };
        }
    }
}

/// The staged TMA store of `t`'s block.
#[inline(always)]
fn staged<'a, O: Output>(t: &BlockTarget<'a, O>) -> StagedStore<'a, O> {
    StagedStore {
        d_map: t.d_map,
        staging: t.staging,
        barrier: t.barrier,
        leader: t.leader,
        batch: t.batch as i32,
        row0: t.row0,
        col0: t.col0,
    }
}

/// Direct stores into D as `p` describes it.
#[inline(always)]
fn direct<O: Output>(p: &GemmParams) -> DirectStore<O> {
    DirectStore { d: p.d as *mut O, ld: p.ldd, batch_stride: p.stride_d, rows: p.m, cols: p.n }
}
