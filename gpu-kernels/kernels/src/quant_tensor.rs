//! Per-tensor FP8 quantisation in two launches with no host round-trip: `amax_*` reduces the
//! tensor's largest finite magnitude into one device word, then `quant_tensor_*` reads it,
//! derives the scale (`logic::quant::scale_from_amax`), writes it, and quantises.
//!
//! The amax travels as the f32's bits in a `u32`: for non-negative floats the bit patterns
//! order like the values, so one `atom.global.max.u32` per CTA (after a block max) combines
//! the CTAs; the host zeroes the word first. NaN and ±∞ are left out of the amax
//! (`logic::quant::finite_abs`). Both kernels are grid-stride loops over 16-byte vectors of
//! eight inputs with a scalar tail for `n % 8`, the quantiser walking backward so that its
//! first reads hit what the amax pass left in L2; NVFP4's encoder (`quant_mx`) reuses `amax_*`
//! the same way. With a scale the caller already has (static scaling, e.g. calibrated
//! activation scales), `quant_tensor_static_*` is the quantiser alone: one pass.

use warpforge_dsl::atomic::AtomicCell;
use warpforge_dsl::block::ReduceScratch;
use warpforge_dsl::global::{self, ReadOnlyNoL1};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::quant as q;
use warpforge_dsl::num::{Bf16, E4m3, E5m2, F16};
use warpforge_dsl::regs::{RegArray, Regs4};
use warpforge_dsl::thread::{global_x, grid_stride_x, thread_rank};

use crate::quant::{AmaxKey, Fp8, Input16, VEC, for_each_vector, pack8, store8};

/// Folds the largest finite magnitude of `x[0..n]` into `*amax` (f32 bits, `atom.max.u32`).
///
/// # Safety
/// `x` (16-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` elements, not written during the launch; `amax` is a
/// 4-byte-aligned word accessed only atomically during the launch; block size a multiple of 32,
/// fewer than 2^30 threads.
#[inline(always)]
unsafe fn amax_of<T: Input16>(n: u64, x: *const T, amax: *mut u32) {
    // SAFETY: once per kernel, outside any loop (this function is the kernels' whole body).
    let scratch = unsafe { ReduceScratch::<f32>::declare() };
    // Below 2^31 (MAX_ELEMENTS): 32-bit vector indices.
    let n_vec = (n / VEC as u64) as u32;
    let mut key = AmaxKey::ZERO;
    // Two vectors per lane in flight (`for_each_vector`); lanes past the end see zeros, whose
    // key is the identity.
    // SAFETY: the contract above (n_vec < 2^31, the grid below 2^30 threads).
    unsafe { for_each_vector::<T, false>(n_vec, x, |_, _, raw| key = key.max(AmaxKey::of::<T>(raw))) };
    let mut a = key.amax::<T>();
    let tail = n_vec as u64 * VEC as u64 + global_x() as u64;
    if tail < n {
        // SAFETY: tail < n.
        a = q::amax_combine(a, q::finite_abs(unsafe { (*x.add(tail as usize)).widen_one() }));
    }
    // SAFETY: every thread of the block reaches this (no early exit above), and nothing else
    // uses barrier 0.
    let a = unsafe { scratch.max(a) };
    // One atomic per CTA: a thousand warps' atomics on one word queue at its L2 slice.
    if thread_rank() == 0 && a > 0.0 {
        // SAFETY: the contract above.
        unsafe { AtomicCell::new(amax) }.fetch_max(a.to_bits());
    }
}

/// `*amax = max(*amax, max |x[i]|)` over finite bf16 `x[0..n]` (f32 bits; zero it first).
///
/// # Safety
/// As `amax_of`: `x` n bf16, 16-byte aligned, read-only; `amax` one word, atomics only.
#[kernel(max_threads = 1024)]
pub unsafe fn amax_bf16(n: u64, x: *const Bf16, amax: *mut u32) {
    // SAFETY: the launch contract above.
    unsafe { amax_of(n, x, amax) }
}

/// `*amax = max(*amax, max |x[i]|)` over finite f16 `x[0..n]`.
///
/// # Safety
/// As [`amax_bf16`], with f16 input.
#[kernel(max_threads = 1024)]
pub unsafe fn amax_f16(n: u64, x: *const F16, amax: *mut u32) {
    // SAFETY: the launch contract above.
    unsafe { amax_of(n, x, amax) }
}

/// `out[i] = F(x[i] · (1 / scale))` with `scale = scale_from_amax(*amax, F::MAX)`, written to
/// `*scale_out` by thread 0.
///
/// # Safety
/// `x` (16-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` elements, read-only; `out`
/// (8-byte aligned) `n` bytes; `amax` one word written before the launch; `scale_out` one f32; disjoint.
#[inline(always)]
unsafe fn quant_tensor<T: Input16, F: Fp8>(n: u64, x: *const T, amax: *const u32, out: *mut u8, scale_out: *mut f32) {
    // SAFETY: one readable word, not written during the launch.
    let scale = q::scale_from_amax(f32::from_bits(unsafe { amax.read() }), F::FORMAT.max(), false);
    if global_x() == 0 {
        // SAFETY: one writable f32, written by this thread only.
        unsafe { scale_out.write(scale) };
    }
    // SAFETY: the contract above.
    unsafe { quant_tensor_under::<T, F>(n, x, scale, out) }
}

/// `out[i] = F(x[i] · (1 / scale))` for every `i < n`.
///
/// # Safety
/// `x` (16-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` elements, read-only; `out`
/// (8-byte aligned) `n` bytes, disjoint from `x`; `scale` a positive normal f32 (so `1 /
/// scale` is finite).
#[inline(always)]
unsafe fn quant_tensor_under<T: Input16, F: Fp8>(n: u64, x: *const T, scale: f32, out: *mut u8) {
    let n_vec = (n / VEC as u64) as u32;
    // Backward (vector n_vec − 1 − i): `amax_*` has just read x forward, so the first vectors
    // read here are the ones still in L2 (with a caller's scale there is no amax pass, and
    // the direction does not matter).
    let mut i = global_x() as u32;
    while i < n_vec {
        let v = n_vec - 1 - i;
        // SAFETY: v < n / 8: the vector lies inside x (16-byte aligned) and its bytes in out.
        unsafe {
            let values = T::widen(global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)));
            store8(out, v as usize, pack8::<F>(&values.map(|e| e * (1.0 / scale))));
        }
        i += grid_stride_x() as u32;
    }
    let tail = n_vec as u64 * VEC as u64 + global_x() as u64;
    if tail < n {
        // SAFETY: tail < n, one element in and one byte out.
        unsafe {
            let v = (*x.add(tail as usize)).widen_one() * (1.0 / scale);
            out.add(tail as usize).write(F::pack4(Regs4(v, 0.0, 0.0, 0.0)) as u8);
        }
    }
}

macro_rules! quant_tensor_entries {
    ($($name:ident: $t:ident -> $f:ident;)*) => {$(
        #[doc = concat!("Per-tensor ", stringify!($f), " quantisation of ", stringify!($t),
            " with the scale from the device-side amax (see the module doc).")]
        ///
        /// # Safety
        /// As `quant_tensor`: `x` n elements (16-byte aligned), `out` n bytes (8-byte aligned),
        /// `amax` one word, `scale` one f32, disjoint.
        #[kernel(max_threads = 1024)]
        pub unsafe fn $name(n: u64, x: *const $t, amax: *const u32, out: *mut u8, scale: *mut f32) {
            // SAFETY: the launch contract above.
            unsafe { quant_tensor::<$t, $f>(n, x, amax, out, scale) }
        }
    )*};
}

macro_rules! quant_tensor_static_entries {
    ($($name:ident: $t:ident -> $f:ident;)*) => {$(
        #[doc = concat!("Per-tensor ", stringify!($f), " quantisation of ", stringify!($t),
            " with the caller's scale (static scaling: one pass, no amax).")]
        ///
        /// # Safety
        /// As `quant_tensor_under`: `x` n elements (16-byte aligned), `out` n bytes (8-byte
        /// aligned), disjoint; `scale` a positive normal f32.
        #[kernel(max_threads = 1024)]
        pub unsafe fn $name(n: u64, x: *const $t, scale: f32, out: *mut u8) {
            // SAFETY: the launch contract above.
            unsafe { quant_tensor_under::<$t, $f>(n, x, scale, out) }
        }
    )*};
}

quant_tensor_static_entries! {
    quant_tensor_static_e4m3_bf16: Bf16 -> E4m3;
    quant_tensor_static_e4m3_f16: F16 -> E4m3;
    quant_tensor_static_e5m2_bf16: Bf16 -> E5m2;
    quant_tensor_static_e5m2_f16: F16 -> E5m2;
}

quant_tensor_entries! {
    quant_tensor_e4m3_bf16: Bf16 -> E4m3;
    quant_tensor_e4m3_f16: F16 -> E4m3;
    quant_tensor_e5m2_bf16: Bf16 -> E5m2;
    quant_tensor_e5m2_f16: F16 -> E5m2;
}
