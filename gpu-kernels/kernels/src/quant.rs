//! FP8 quantisation for Hopper GEMM operands: per-token 1 × 128 groups of an activation and
//! 128 × 128 blocks of a weight, both e4m3 with f32 scales; plus the vocabulary the other
//! quantising kernels (`quant_tensor`, `quant_mx`) share.
//!
//! Memory-bound and register-light: every lane moves eight 16-bit inputs by one 16-byte
//! read-only load and writes their eight FP8 bytes with one 8-byte store. The scale math and the
//! layouts are `logic::quant`'s, the functions the host reference runs; the element rounding is
//! the hardware's `cvt.rn.satfinite` (bit-identical to the software encoder on every non-NaN
//! input, which the GPU tests check).
//!
//! Per-token groups: a group is 128 consecutive elements of a row, so with `K % 128 == 0` the
//! groups tile the matrix contiguously; a warp takes 256 consecutive elements per step (two
//! groups of 16 lanes), reduces each group's amax over its 16 lanes with four butterfly
//! shuffles, and writes the scale MN-major (`logic::quant::group_scale_index`). Weight blocks:
//! one 256-thread CTA per 128 × 128 block (grid-stride over blocks), 16 threads across the
//! block's 128 columns and 16 down its rows, eight rows each; a block reduction gives the amax,
//! and a second pass re-reads the block (L1/L2 hits) to quantise it.

use warpforge_dsl::block::ReduceScratch;
use warpforge_dsl::global::{self, Bf16x8, F16x8, ReadOnly, ReadOnlyNoL1, Vector16};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::quant::{self as q, Minifloat};
use warpforge_dsl::num::{Bf16, E4m3, E5m2, F16};
use warpforge_dsl::regs::{RegArray, Regs4, Regs8};
use warpforge_dsl::thread::{block_idx, global_x, grid_size, grid_stride_x, lane_id, thread_rank};
use warpforge_dsl::warp;

/// Elements per 16-byte vector of 16-bit input.
pub(crate) const VEC: u64 = 8;

/// A 16-bit input element, read eight to a vector.
pub(crate) trait Input16: Copy {
    /// Its 16-byte vector.
    type Vector: Vector16<Elem = Self>;
    /// The eight values of a vector, widened exactly.
    fn widen(v: Self::Vector) -> Regs8<f32>;
    /// One value, widened exactly.
    fn widen_one(self) -> f32;
}

macro_rules! input16 {
    ($($t:ident => $v:ident),*) => {$(
        impl Input16 for $t {
            type Vector = $v;
            #[inline(always)]
            fn widen(v: $v) -> Regs8<f32> {
                v.to_f32()
            }
            #[inline(always)]
            fn widen_one(self) -> f32 {
                self.to_f32()
            }
        }
    )*};
}
input16!(Bf16 => Bf16x8, F16 => F16x8);

/// An FP8 output format: its `logic` description and the hardware's saturating conversion.
pub(crate) trait Fp8: Copy {
    /// The format, for the scale rule.
    const FORMAT: Minifloat;
    /// Four values rounded (RN, satfinite) into one word, element `i` in byte `i`.
    fn pack4(v: Regs4<f32>) -> u32;
}

impl Fp8 for E4m3 {
    const FORMAT: Minifloat = Minifloat::E4m3;
    #[inline(always)]
    fn pack4(v: Regs4<f32>) -> u32 {
        E4m3::pack4(v)
    }
}

impl Fp8 for E5m2 {
    const FORMAT: Minifloat = Minifloat::E5m2;
    #[inline(always)]
    fn pack4(v: Regs4<f32>) -> u32 {
        E5m2::pack4(v)
    }
}

/// Eight values rounded to `F`, as the eight bytes of one little-endian word.
#[inline(always)]
pub(crate) fn pack8<F: Fp8>(v: &Regs8<f32>) -> u64 {
    let lo = F::pack4(Regs4(v.0, v.1, v.2, v.3));
    let hi = F::pack4(Regs4(v.4, v.5, v.6, v.7));
    lo as u64 | (hi as u64) << 32
}

/// The largest finite magnitude of eight values (`logic::quant::finite_abs`).
#[inline(always)]
pub(crate) fn amax8(v: &Regs8<f32>) -> f32 {
    let mut a = 0.0;
    v.for_each(|_, x| a = q::amax_combine(a, q::finite_abs(x)));
    a
}

/// The amax of `a` over each aligned run of `LANES` lanes (a power of two ≤ 32), on every lane
/// of the run: butterfly shuffles with masks `LANES/2 … 1`.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
pub(crate) unsafe fn amax_lanes<const LANES: u32>(a: f32) -> f32 {
    let mut a = a;
    let mut mask = LANES / 2;
    while mask > 0 {
        // SAFETY: the caller runs all 32 lanes here.
        a = q::amax_combine(a, f32::from_bits(unsafe { warp::shuffle_xor(a.to_bits(), mask) }));
        mask >>= 1;
    }
    a
}

/// Walks `n_vec` 8-element vectors of `x` by warps: each step a warp takes 32 consecutive
/// vectors (lane `l` the `l`-th), so an aligned run of `2^j` lanes holds `8 · 2^j` consecutive
/// elements. Calls `f(vector, in_range, values)` on every lane of every step (warp-uniform
/// control flow, so `f` may use warp collectives); lanes past the end see zeros. Two steps'
/// loads are issued before either is processed, so each lane keeps 32 bytes in flight.
///
/// # Safety
/// `x` is 16-byte aligned and holds `8 · n_vec` elements not written during the launch; the
/// block size is a multiple of 32.
#[inline(always)]
pub(crate) unsafe fn for_each_vector<T: Input16>(n_vec: u64, x: *const T, mut f: impl FnMut(u64, bool, Regs8<f32>)) {
    let lane = lane_id() as u64;
    let mut base = global_x() as u64 - lane;
    let stride = grid_stride_x() as u64;
    let load = |v: u64| {
        if v < n_vec {
            // SAFETY: v < n_vec, so the vector lies inside x; aligned as 16 · v from x.
            T::widen(unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add((v * VEC) as usize)) })
        } else {
            Regs8::splat(0.0)
        }
    };
    while base < n_vec {
        let (v0, v1) = (base + lane, base + stride + lane);
        let (x0, x1) = (load(v0), load(v1));
        f(v0, v0 < n_vec, x0);
        // Warp-uniform: `base` is the same on every lane of the warp.
        if base + stride < n_vec {
            f(v1, v1 < n_vec, x1);
        }
        base += 2 * stride;
    }
}

/// Stores eight FP8 bytes at byte `8 · v` of `out`.
///
/// # Safety
/// `out` is 8-byte aligned and `8 · v + 8` bytes long, and nothing else writes those bytes.
#[inline(always)]
pub(crate) unsafe fn store8(out: *mut u8, v: u64, bytes: u64) {
    // SAFETY: the caller's contract.
    unsafe { out.add((v * VEC) as usize).cast::<u64>().write(bytes) }
}

/// Vectors per per-token group (16 lanes × 8 elements = 128).
const GROUP_LANES: u32 = (q::GROUP as u64 / VEC) as u32;

/// Per-token 1 × 128 e4m3 quantisation of the `rows × cols` row-major `x` (`cols % 128 == 0`).
///
/// # Safety
/// `x` (16-byte aligned) holds `rows · cols` elements, `out` (8-byte aligned) as many bytes,
/// `scales` `cols / 128 · round_up(rows, 4)` f32; none overlap, `x` is not written.
#[inline(always)]
unsafe fn quant_group<T: Input16>(rows: u64, cols: u64, pow2: u32, x: *const T, out: *mut u8, scales: *mut f32) {
    let groups_per_row = cols / q::GROUP as u64;
    let pitch = rows.div_ceil(q::SCALE_ROW_ALIGN as u64) * q::SCALE_ROW_ALIGN as u64;
    // SAFETY: the contract above; the closure runs warp-uniformly.
    unsafe {
        for_each_vector(rows * cols / VEC, x, |v, in_range, values| {
            let amax = amax_lanes::<GROUP_LANES>(amax8(&values));
            let scale = q::scale_from_amax(amax, E4m3::MAX, pow2 != 0);
            if in_range {
                store8(out, v, pack8::<E4m3>(&values.map(|e| e * (1.0 / scale))));
                if v % GROUP_LANES as u64 == 0 {
                    let g = v / GROUP_LANES as u64;
                    let (row, group) = (g / groups_per_row, g % groups_per_row);
                    let at = |r: u64| q::group_scale_index(r as usize, group as usize, pitch as usize);
                    scales.add(at(row)).write(scale);
                    if row + 1 == rows {
                        (rows..pitch).for_each(|r| scales.add(at(r)).write(0.0));
                    }
                }
            }
        })
    }
}

/// Per-token 1 × 128 e4m3 quantisation of a bf16 activation; see the module doc.
///
/// # Safety
/// As `quant_group`: `x` rows × cols bf16 (16-byte aligned, `cols % 128 == 0`), `out` as many
/// bytes (8-byte aligned), `scales` `cols/128 · round_up(rows, 4)` f32, disjoint.
#[kernel(max_threads = 1024)]
pub unsafe fn quant_group_e4m3_bf16(rows: u64, cols: u64, pow2: u32, x: *const Bf16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_group(rows, cols, pow2, x, out, scales) }
}

/// Per-token 1 × 128 e4m3 quantisation of an f16 activation.
///
/// # Safety
/// As [`quant_group_e4m3_bf16`], with f16 input.
#[kernel(max_threads = 1024)]
pub unsafe fn quant_group_e4m3_f16(rows: u64, cols: u64, pow2: u32, x: *const F16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_group(rows, cols, pow2, x, out, scales) }
}

/// Threads per weight-block CTA: 16 column vectors × 16 row lanes.
pub const BLOCK_THREADS: u32 = 256;
/// Column vectors across a 128-wide block.
const BLOCK_COL_VECS: u64 = q::BLOCK as u64 / VEC;
/// Rows each thread covers (128 rows / 16 row lanes).
const ROWS_PER_THREAD: u64 = q::BLOCK as u64 / (BLOCK_THREADS as u64 / BLOCK_COL_VECS);

/// Calls `f(element offset, values)` for this thread's vectors of the block at
/// `(row0, col0)` that lie inside the `rows × cols` matrix.
///
/// # Safety
/// `x` is 16-byte aligned, holds `rows · cols` elements (`cols % 8 == 0`), not written during
/// the launch.
#[inline(always)]
unsafe fn for_block_vectors<T: Input16>(
    rows: u64,
    cols: u64,
    row0: u64,
    col0: u64,
    x: *const T,
    mut f: impl FnMut(u64, Regs8<f32>),
) {
    let t = thread_rank() as u64;
    let col = col0 + (t % BLOCK_COL_VECS) * VEC;
    let first = row0 + t / BLOCK_COL_VECS;
    for i in 0..ROWS_PER_THREAD {
        let row = first + i * (BLOCK_THREADS as u64 / BLOCK_COL_VECS);
        if row < rows && col < cols {
            let at = row * cols + col;
            // SAFETY: row < rows and col + 8 ≤ cols (cols % 8 == 0): inside x, 16-byte aligned.
            f(at, T::widen(unsafe { global::load::<T::Vector, ReadOnly>(x.add(at as usize)) }));
        }
    }
}

/// 128 × 128-block e4m3 quantisation of the `rows × cols` row-major weight `x`.
///
/// # Safety
/// `x` (16-byte aligned, `cols % 8 == 0`) holds `rows · cols` elements, `out` (8-byte aligned)
/// as many bytes, `scales` `ceil(rows/128) · ceil(cols/128)` f32; disjoint; 256 threads.
#[inline(always)]
unsafe fn quant_block<T: Input16>(rows: u64, cols: u64, pow2: u32, x: *const T, out: *mut u8, scales: *mut f32) {
    // SAFETY: declared once, at the top of the kernel.
    let scratch = unsafe { ReduceScratch::<f32>::declare() };
    let block_cols = cols.div_ceil(q::BLOCK as u64);
    let blocks = rows.div_ceil(q::BLOCK as u64) * block_cols;
    let mut b = block_idx().x as u64;
    while b < blocks {
        let (row0, col0) = ((b / block_cols) * q::BLOCK as u64, (b % block_cols) * q::BLOCK as u64);
        let mut amax = 0.0;
        // SAFETY: the contract above.
        unsafe { for_block_vectors(rows, cols, row0, col0, x, |_, v| amax = q::amax_combine(amax, amax8(&v))) };
        // SAFETY: every thread reaches it: `b` is the same across the block.
        let amax = unsafe { scratch.max(amax) };
        let scale = q::scale_from_amax(amax, E4m3::MAX, pow2 != 0);
        // SAFETY: the contract above; each element offset is this thread's own 8 bytes.
        unsafe {
            for_block_vectors(rows, cols, row0, col0, x, |at, v| {
                store8(out, at / VEC, pack8::<E4m3>(&v.map(|e| e * (1.0 / scale))))
            })
        };
        if thread_rank() == 0 {
            // SAFETY: b < blocks = the scale count (logic::quant::block_scale_index order).
            unsafe { scales.add(b as usize).write(scale) };
        }
        b += grid_size() as u64;
    }
}

/// 128 × 128-block e4m3 quantisation of a bf16 weight (`N × K` row-major, `K % 8 == 0`, ragged
/// edge blocks allowed); see the module doc.
///
/// # Safety
/// As `quant_block`: `x` rows × cols bf16, `out` as many bytes, `scales`
/// `ceil(rows/128) · ceil(cols/128)` f32, disjoint and aligned as stated; 256 threads.
#[kernel(threads = 256)]
pub unsafe fn quant_block_e4m3_bf16(rows: u64, cols: u64, pow2: u32, x: *const Bf16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_block(rows, cols, pow2, x, out, scales) }
}

/// 128 × 128-block e4m3 quantisation of an f16 weight.
///
/// # Safety
/// As [`quant_block_e4m3_bf16`], with f16 input.
#[kernel(threads = 256)]
pub unsafe fn quant_block_e4m3_f16(rows: u64, cols: u64, pow2: u32, x: *const F16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_block(rows, cols, pow2, x, out, scales) }
}
