//! Decode GEMM without tensor cores: `D = act(alpha·A·Bᵀ + beta·C + bias)` for at most
//! [`SKINNY_MAX_ROWS`] rows of A, where the work is streaming B (the weight, N × K, K
//! contiguous) once from HBM. A 128-row wgmma tile would spend 94–99 % of its math on padding
//! rows and, with N/256 tiles, leave most SMs idle; here every warp of the grid streams B.
//!
//! Work split: a warp owns [`COLS_PER_WARP`] adjacent columns of D (rows of B) of one batch and
//! walks K in 16-byte vectors, lane `l` taking elements `8l .. 8l + 8` of every 256; per vector
//! it loads the columns' weights once (`ld.global.nc.L1::no_allocate`: read once) and each
//! row's activations (plain loads: A is small and every warp rereads it from L1/L2), and
//! accumulates `rows × COLS_PER_WARP` f32 dot products in registers. A warp reduction then
//! folds the lanes and lane 0 applies the GEMM epilogue (`gemm_epilogue::finish`) per element.
//! Two vectors per lane are in flight per step, so a resident grid keeps ~32 KiB of weights
//! per SM in flight, enough to cover HBM latency.
//!
//! Contract (checked by the host before it picks this path): rows ≤ 8; K, the row pitches of A
//! and B and their batch strides multiples of 8 elements; A and B 16-byte aligned.

use warpforge_dsl::abi::{GemmParams, SkinnyOperands};
use warpforge_dsl::global::{self, Bf16x8, Cached, F16x8, ReadOnlyNoL1, Vector16};
use warpforge_dsl::kernel;
use warpforge_dsl::math;
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::regs::Regs8;
use warpforge_dsl::thread::{block_idx, block_size, grid_dim, lane_id, thread_rank};
use warpforge_dsl::warp;

use crate::gemm_epilogue::finish;

/// Most rows of D (of A) one launch handles.
pub const SKINNY_MAX_ROWS: u32 = 8;
/// Columns of D each warp computes (rows of B it streams side by side).
pub const COLS_PER_WARP: u32 = 2;
/// Elements of K one warp covers per vector step (32 lanes × 8).
const WARP_K: u64 = 256;

/// 16-bit inputs as eight f32 per 16-byte vector.
pub trait SkinnyInput: Copy {
    /// The 16-byte vector of eight elements.
    type Vector: Vector16<Elem = Self>;
    /// Widens a vector exactly.
    fn widen(v: Self::Vector) -> Regs8<f32>;
}

impl SkinnyInput for Bf16 {
    type Vector = Bf16x8;
    #[inline(always)]
    fn widen(v: Bf16x8) -> Regs8<f32> {
        v.to_f32()
    }
}

impl SkinnyInput for F16 {
    type Vector = F16x8;
    #[inline(always)]
    fn widen(v: F16x8) -> Regs8<f32> {
        v.to_f32()
    }
}

/// `acc + x·w` over eight elements, one rounding per fused multiply-add.
#[inline(always)]
fn dot8(acc: f32, x: &Regs8<f32>, w: &Regs8<f32>) -> f32 {
    let mut s = math::fma(x.0, w.0, acc);
    s = math::fma(x.1, w.1, s);
    s = math::fma(x.2, w.2, s);
    s = math::fma(x.3, w.3, s);
    s = math::fma(x.4, w.4, s);
    s = math::fma(x.5, w.5, s);
    s = math::fma(x.6, w.6, s);
    math::fma(x.7, w.7, s)
}

/// The row-`m` partial sums of the warp's two columns.
type Pair = (f32, f32);

/// Eight rows of partial sums (rows past `rows` stay zero and are never stored).
type Partials = Regs8<Pair>;

/// Adds the vector at K offset `kv` (all rows, both columns) into `acc`.
///
/// # Safety
/// `kv + 8 ≤ k`; `a_row(m)` / the two weight rows are valid for 8 elements at `kv`, 16-byte
/// aligned, for every `m < rows` and every column `< n`.
#[inline(always)]
unsafe fn accumulate<I: SkinnyInput>(
    acc: &mut Partials,
    a: *const I,
    lda: u64,
    rows: u32,
    w: (Regs8<f32>, Regs8<f32>),
    kv: u64,
) {
    macro_rules! row {
        ($m:tt) => {
            if $m < rows {
                // SAFETY: row m < rows of A, elements kv..kv+8 (caller).
                let x = I::widen(unsafe { global::load::<I::Vector, Cached>(a.add(($m * lda + kv) as usize)) });
                acc.$m = (dot8(acc.$m.0, &x, &w.0), dot8(acc.$m.1, &x, &w.1));
            }
        };
    }
    row!(0);
    row!(1);
    row!(2);
    row!(3);
    row!(4);
    row!(5);
    row!(6);
    row!(7);
}

/// The eight weights of column `col` at `kv` (zeros past N: that column is never stored).
///
/// # Safety
/// For `col < n`: row `col` of B is valid for 8 elements at `kv`, 16-byte aligned.
#[inline(always)]
unsafe fn weights<I: SkinnyInput>(b: *const I, ldb: u64, col: u32, n: u32, kv: u64) -> Regs8<f32> {
    if col < n {
        // SAFETY: caller.
        I::widen(unsafe { global::load::<I::Vector, ReadOnlyNoL1>(b.add((col as u64 * ldb + kv) as usize)) })
    } else {
        Regs8(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    }
}

/// The body of every `gemm_skinny_*_sm90` entry.
///
/// # Safety
/// The module doc's contract; `p` and `s` describe live buffers of `I` (A, B) and `O` (C, D).
#[inline(always)]
pub unsafe fn skinny<I: SkinnyInput, O: Output>(p: &GemmParams, s: &SkinnyOperands) {
    let warps_per_block = block_size() / 32;
    let warp_global = block_idx().x * warps_per_block + thread_rank() / 32;
    let warps = grid_dim().x * warps_per_block;
    // At least one group, so the divisions below have no zero divisor (with N = 0 there are
    // no items: the host never launches that, and the loop would not run).
    let groups = p.n.div_ceil(COLS_PER_WARP).max(1);
    let items = if p.n == 0 { 0 } else { groups as u64 * s.batch as u64 };
    let lane = lane_id() as u64;
    let mut item = warp_global as u64;
    while item < items {
        let (z, col0) = ((item / groups as u64) as u32, (item % groups as u64) as u32 * COLS_PER_WARP);
        let a = (s.a as *const I).wrapping_add((z as u64 * s.stride_a) as usize);
        let b = (s.b as *const I).wrapping_add((z as u64 * s.stride_b) as usize);
        let zero = (0.0, 0.0);
        let mut acc: Partials = Regs8(zero, zero, zero, zero, zero, zero, zero, zero);
        let mut kv = lane * 8;
        // Two vectors per step: both columns' weights of both issued before any math.
        while kv + WARP_K < s.k as u64 {
            // SAFETY: kv + WARP_K + 8 ≤ k; columns < n only (`weights`); the host checked the
            // alignment and extents of A and B.
            unsafe {
                let w0 = (weights(b, s.ldb, col0, p.n, kv), weights(b, s.ldb, col0 + 1, p.n, kv));
                let w1 = (weights(b, s.ldb, col0, p.n, kv + WARP_K), weights(b, s.ldb, col0 + 1, p.n, kv + WARP_K));
                accumulate(&mut acc, a, s.lda, p.m, w0, kv);
                accumulate(&mut acc, a, s.lda, p.m, w1, kv + WARP_K);
            }
            kv += 2 * WARP_K;
        }
        if kv < s.k as u64 {
            // SAFETY: as above, for the one vector left.
            unsafe {
                let w = (weights(b, s.ldb, col0, p.n, kv), weights(b, s.ldb, col0 + 1, p.n, kv));
                accumulate(&mut acc, a, s.lda, p.m, w, kv);
            }
        }
        macro_rules! store_row {
            ($m:tt) => {
                if $m < p.m {
                    // SAFETY: the whole warp is converged here (uniform loop and branch).
                    let (v0, v1) = unsafe { (warp::sum(acc.$m.0), warp::sum(acc.$m.1)) };
                    if lane == 0 {
                        // SAFETY: lane 0 alone writes these elements; C and bias as the
                        // epilogue's contract.
                        unsafe {
                            store::<O>(p, z, $m, col0, v0);
                            store::<O>(p, z, $m, col0 + 1, v1);
                        }
                    }
                }
            };
        }
        store_row!(0);
        store_row!(1);
        store_row!(2);
        store_row!(3);
        store_row!(4);
        store_row!(5);
        store_row!(6);
        store_row!(7);
        item += warps as u64;
    }
}

/// Writes D at (`z`, `row`, `col`) from the dot product `v` through the GEMM epilogue, when
/// `col` is inside D.
///
/// # Safety
/// `row < m`; D, C and bias valid for every in-bounds element; no other thread writes it.
#[inline(always)]
unsafe fn store<O: Output>(p: &GemmParams, z: u32, row: u32, col: u32, v: f32) {
    if col < p.n {
        let at = z as u64 * p.stride_d + row as u64 * p.ldd + col as u64;
        // SAFETY: (z, row, col) is inside D (caller, and `col < n` here).
        unsafe { (p.d as *mut O).add(at as usize).write(O::from_f32(finish::<O>(p, v, z, row, col))) };
    }
}

/// Declares a `gemm_skinny_<input>_<output>_sm90` entry.
macro_rules! skinny_entries {
    ($($name:ident: $input:ty => $output:ty;)*) => {$(
        /// See the module doc; parameters as the host's skinny launcher builds them.
        ///
        /// # Safety
        /// The module doc's contract.
        #[kernel(threads = 256)]
        pub unsafe fn $name(p: GemmParams, s: SkinnyOperands) {
            // SAFETY: forwarded (the host's contract).
            unsafe { skinny::<$input, $output>(&p, &s) }
        }
    )*};
}

skinny_entries! {
    gemm_skinny_bf16_bf16_sm90: Bf16 => Bf16;
    gemm_skinny_bf16_f16_sm90: Bf16 => F16;
    gemm_skinny_bf16_f32_sm90: Bf16 => f32;
    gemm_skinny_f16_bf16_sm90: F16 => Bf16;
    gemm_skinny_f16_f16_sm90: F16 => F16;
    gemm_skinny_f16_f32_sm90: F16 => f32;
}
