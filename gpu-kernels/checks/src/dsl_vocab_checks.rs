//! Hardware checks of the kernel-author vocabulary (sm_90a): warp and block reductions and the
//! warp scan, `dsl::math`, the 16-byte global vectors under each cache policy, the FP8 pair and
//! quad conversions, and the register arrays. `tests/gpu_dsl_vocab.rs` runs each against a
//! float64 or exact CPU reference; each kernel's doc states its launch and output layout.
//!
//! Every entry is one thread per element group with no shared state beyond what it checks, so
//! any grid size works; the host sizes the grid from the element count.

use warpforge_dsl::block::ReduceScratch;
use warpforge_dsl::global::{
    self, Bf16x8, Cached, F16x8, F32x4, ReadOnly, ReadOnlyNoL1, Streaming, U8x16, Vector16, WriteBack,
};
use warpforge_dsl::kernel;
use warpforge_dsl::math;
use warpforge_dsl::num::{Bf16, E4m3, E5m2, F16};
use warpforge_dsl::regs::{RegArray, Regs4, Regs8};
use warpforge_dsl::thread::{block_rank, block_size, thread_rank};
use warpforge_dsl::warp::{self, Min};

/// Threads per block of the warp-reduction checks.
pub const WARP_CHECK_THREADS: u32 = 256;
/// Functions [`math_f32_sm90a`] evaluates, in its output order.
pub const MATH_FNS: usize = 11;

/// Linear index of the calling thread in the grid.
fn global_rank() -> usize {
    block_rank() as usize * block_size() as usize + thread_rank() as usize
}

macro_rules! warp_checks {
    ($($name:ident: $t:ty;)*) => {$(
        /// Warp reductions and scan of `x` (one value per thread): `reduced[3t..3t + 3]` =
        /// (sum, max, min) over thread `t`'s warp, as seen by `t`; `scanned[t]` = inclusive sum
        /// over lanes `0..=lane` of its warp. Integer sums wrap.
        ///
        /// # Safety
        /// 256 threads per block; `x` and `scanned` hold one value per launched thread,
        /// `reduced` three.
        #[kernel(threads = 256)]
        pub unsafe fn $name(x: *const $t, reduced: *mut $t, scanned: *mut $t) {
            let t = global_rank();
            // SAFETY: one value per launched thread.
            let v = unsafe { *x.add(t) };
            // SAFETY: every lane of every warp runs straight through.
            let (s, hi, lo, scan) =
                unsafe { (warp::sum(v), warp::max(v), warp::min(v), warp::inclusive_sum(v)) };
            // SAFETY: three values and one value per launched thread.
            unsafe {
                *reduced.add(3 * t) = s;
                *reduced.add(3 * t + 1) = hi;
                *reduced.add(3 * t + 2) = lo;
                *scanned.add(t) = scan;
            }
        }
    )*};
}

warp_checks! {
    warp_reduce_f32_sm90a: f32;
    warp_reduce_i32_sm90a: i32;
    warp_reduce_u32_sm90a: u32;
}

macro_rules! block_checks {
    ($($name:ident: $t:ty;)*) => {$(
        /// Block reductions of `x` (one value per thread) through one scratch reused three
        /// times: `out[3t..3t + 3]` = (sum, max, min) over thread `t`'s block, as seen by `t`.
        /// Integer sums wrap.
        ///
        /// # Safety
        /// Any block size that is a multiple of 32, at most 1024, 1-D; `x` holds one value per
        /// launched thread, `out` three.
        #[kernel(max_threads = 1024)]
        pub unsafe fn $name(x: *const $t, out: *mut $t) {
            // SAFETY: declared once, at the top of the kernel.
            let scratch = unsafe { ReduceScratch::<$t>::declare() };
            let t = global_rank();
            // SAFETY: one value per launched thread.
            let v = unsafe { *x.add(t) };
            // SAFETY: every thread of the block calls each reduction, in uniform control flow.
            let (s, hi, lo) = unsafe { (scratch.sum(v), scratch.max(v), scratch.reduce::<Min>(v)) };
            // SAFETY: three values per launched thread.
            unsafe {
                *out.add(3 * t) = s;
                *out.add(3 * t + 1) = hi;
                *out.add(3 * t + 2) = lo;
            }
        }
    )*};
}

block_checks! {
    block_reduce_f32_sm90a: f32;
    block_reduce_i32_sm90a: i32;
    block_reduce_u32_sm90a: u32;
}

/// `dsl::math` at `n` points: `out[k·n + i]` is function `k` of `pos[i]` (k < 6: `sqrt`,
/// `sqrt_approx`, `rsqrt`, `rcp`, `rcp_approx`, `log2`) or of `signed[i]` (k ≥ 6: `exp2`,
/// `exp2_ftz`, `tanh`, `exp`, and `fma(signed, pos, signed)`).
///
/// # Safety
/// `pos` and `signed` hold `n` values, `out` `MATH_FNS · n`.
#[kernel(max_threads = 1024)]
pub unsafe fn math_f32_sm90a(n: u32, pos: *const f32, signed: *const f32, out: *mut f32) {
    let i = global_rank();
    if i >= n as usize {
        return;
    }
    // SAFETY: i < n.
    let (p, s) = unsafe { (*pos.add(i), *signed.add(i)) };
    // SAFETY: (each call) k·n + i < MATH_FNS · n. One store per value, no array: see `regs`.
    let put = |k: usize, v: f32| unsafe { *out.add(k * n as usize + i) = v };
    put(0, math::sqrt(p));
    put(1, math::sqrt_approx(p));
    put(2, math::rsqrt(p));
    put(3, math::rcp(p));
    put(4, math::rcp_approx(p));
    put(5, math::log2(p));
    put(6, math::exp2(s));
    put(7, math::exp2_ftz(s));
    put(8, math::tanh(s));
    put(9, math::exp(s));
    put(10, math::fma(s, p, s));
}

/// Loads vector `i` under load policy `i % 3` (cached, read-only, read-only without L1).
///
/// # Safety
/// `src` points to a readable `V`, 16-byte aligned, unwritten during the launch.
#[inline(always)]
unsafe fn load_by_index<V: Vector16>(src: *const V::Elem, i: usize) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        match i % 3 {
            0 => global::load::<V, Cached>(src),
            1 => global::load::<V, ReadOnly>(src),
            _ => global::load::<V, ReadOnlyNoL1>(src),
        }
    }
}

/// Stores vector `i` under store policy `i % 2` (write-back, streaming).
///
/// # Safety
/// `dst` points to a writable `V`, 16-byte aligned, that nothing else accesses.
#[inline(always)]
unsafe fn store_by_index<V: Vector16>(dst: *mut V::Elem, i: usize, v: V) {
    // SAFETY: the caller's contract.
    unsafe { if i % 2 == 0 { global::store::<V, WriteBack>(dst, v) } else { global::store::<V, Streaming>(dst, v) } }
}

macro_rules! vector_checks {
    ($($(#[$doc:meta])* $name:ident: $v:ident, $elem:ty, $lanes:literal, |$x:ident| $f:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// Vector `i` (of `n`) is loaded under policy `i % 3` and stored under `i % 2`.
        ///
        /// # Safety
        /// `src` and `dst` hold `n` 16-byte-aligned vectors and do not overlap.
        #[kernel(max_threads = 1024)]
        pub unsafe fn $name(n: u32, src: *const $elem, dst: *mut $elem) {
            let i = global_rank();
            if i >= n as usize {
                return;
            }
            // SAFETY: vector i < n of `src`.
            let $x: $v = unsafe { load_by_index(src.add($lanes * i), i) };
            // SAFETY: vector i < n of `dst`.
            unsafe { store_by_index(dst.add($lanes * i), i, $f) };
        }
    )*};
}

vector_checks! {
    /// `dst = 2·src`, eight bf16 per thread through `Bf16x8::{to_f32, from_f32}` (exact).
    vector_bf16x8_sm90a: Bf16x8, Bf16, 8, |x| Bf16x8::from_f32(&x.to_f32().map(|e| 2.0 * e));
    /// `dst = 2·src`, eight f16 per thread through `F16x8::{to_f32, from_f32}` (exact below 32768).
    vector_f16x8_sm90a: F16x8, F16, 8, |x| F16x8::from_f32(&x.to_f32().map(|e| 2.0 * e));
    /// `dst = 2·src`, four f32 per thread.
    vector_f32x4_sm90a: F32x4, f32, 4, |x| F32x4(2.0 * x.0, 2.0 * x.1, 2.0 * x.2, 2.0 * x.3);
    /// `dst[j] = src[j] ^ 0x5a ^ (j % 16)`, sixteen bytes per thread through `U8x16::{bytes, from_bytes}`.
    vector_u8x16_sm90a: U8x16, u8, 16, |x| U8x16::from_bytes(&{
        let mut b = x.bytes();
        b.for_each_mut(|j, e| *e ^= 0x5a ^ j as u8);
        b
    });
}

/// Words of [`fp8_convert_sm90a`]'s output per thread.
pub const FP8_OUT_WORDS: usize = 22;

/// FP8 conversions of `x[4t..4t + 4]`; `out[22t..22t + 22]` holds, as u32 words:
/// 0 `E4m3::pack4(x)`, 1 `E5m2::pack4(x)`, 2 / 3 the E4M3 / E5M2 quads through `pack2_f16x2` of
/// `F16::pack2` pairs, 4 / 5 the same through `pack2_bf16x2` of `Bf16::pack2` pairs, 6–9
/// `E4m3::unpack4(word 0)` as f32 bits, 10–13 `E5m2::unpack4(word 1)`, 14–15 / 16–17 the E4M3 /
/// E5M2 quads widened by `unpack2_f16x2` (one f16x2 word per pair), 18–19 / 20–21 the same by
/// `unpack2_bf16x2`.
///
/// # Safety
/// `x` holds `4n`, `out` `22n` values; `n` threads or more.
#[kernel(max_threads = 1024)]
pub unsafe fn fp8_convert_sm90a(n: u32, x: *const f32, out: *mut u32) {
    let t = global_rank();
    if t >= n as usize {
        return;
    }
    // SAFETY: 4t + 3 < 4n.
    let v = unsafe { Regs4::from_fn(|j| *x.add(4 * t + j)) };
    let quad = |lo: u16, hi: u16| lo as u32 | (hi as u32) << 16;
    let (h01, h23) = (F16::pack2(v.0, v.1), F16::pack2(v.2, v.3));
    let (b01, b23) = (Bf16::pack2(v.0, v.1), Bf16::pack2(v.2, v.3));
    let (e4, e5) = (E4m3::pack4(v), E5m2::pack4(v));
    let (w4, w5) = (E4m3::unpack4(e4), E5m2::unpack4(e5));
    let (e4lo, e4hi, e5lo, e5hi) = (e4 as u16, (e4 >> 16) as u16, e5 as u16, (e5 >> 16) as u16);
    // SAFETY: (each call) FP8_OUT_WORDS·t + k < FP8_OUT_WORDS·n.
    let put = |k: usize, w: u32| unsafe { *out.add(FP8_OUT_WORDS * t + k) = w };
    put(0, e4);
    put(1, e5);
    put(2, quad(E4m3::pack2_f16x2(h01), E4m3::pack2_f16x2(h23)));
    put(3, quad(E5m2::pack2_f16x2(h01), E5m2::pack2_f16x2(h23)));
    put(4, quad(E4m3::pack2_bf16x2(b01), E4m3::pack2_bf16x2(b23)));
    put(5, quad(E5m2::pack2_bf16x2(b01), E5m2::pack2_bf16x2(b23)));
    w4.for_each(|j, f| put(6 + j, f.to_bits()));
    w5.for_each(|j, f| put(10 + j, f.to_bits()));
    put(14, E4m3::unpack2_f16x2(e4lo));
    put(15, E4m3::unpack2_f16x2(e4hi));
    put(16, E5m2::unpack2_f16x2(e5lo));
    put(17, E5m2::unpack2_f16x2(e5hi));
    put(18, E4m3::unpack2_bf16x2(e4lo));
    put(19, E4m3::unpack2_bf16x2(e4hi));
    put(20, E5m2::unpack2_bf16x2(e5lo));
    put(21, E5m2::unpack2_bf16x2(e5hi));
}

/// Register arrays under every access path: from `x[8t..8t + 8]` (as `r`), with `s = sel[t] % 8`:
/// `out[8t + j]` = `r.map(3·e + 1).zip_with(r, a + b)` element `j`, then element 0 replaced
/// by `r.get::<7>()` and element 7 by `r.select(s)` (a run-time index). ptxas must report
/// 0 bytes of stack for this entry: the arrays never reach local memory.
///
/// # Safety
/// `x` and `out` hold `8n`, `sel` `n` values; `n` threads or more.
#[kernel(max_threads = 1024)]
pub unsafe fn regs_sm90a(n: u32, x: *const u32, sel: *const u32, out: *mut u32) {
    let t = global_rank();
    if t >= n as usize {
        return;
    }
    // SAFETY: 8t + 7 < 8n and t < n.
    let (r, s) = unsafe { (Regs8::from_fn(|j| *x.add(8 * t + j)), *sel.add(t) as usize % 8) };
    let mut y = r.map(|e| e.wrapping_mul(3).wrapping_add(1)).zip_with(&r, u32::wrapping_add);
    y.set::<0>(r.get::<7>());
    y.set::<7>(r.select(s));
    // SAFETY: 8t + j < 8n.
    y.for_each(|j, e| unsafe { *out.add(8 * t + j) = e });
}
