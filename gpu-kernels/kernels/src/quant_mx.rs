//! Microscaled formats, encode and decode: MXFP8 (OCP MX: 32 consecutive K elements share one
//! UE8M0 exponent byte, elements e4m3) and NVFP4 (16 consecutive K elements share one e4m3
//! scale under an f32 tensor scale, elements e2m1 two to a byte, the even element in the low
//! nibble).
//!
//! A block is consecutive in memory (row-major, K a multiple of the block), so every kernel is
//! a walk over 8-element vectors: an MX block is 4 lanes, its amax two butterfly shuffles of
//! magnitude keys (`quant::AmaxKey`); NVFP4's encoder gives each lane a whole 16-element block
//! (`quant::for_each_block16`: coalesced loads, then neighbours swap a vector), so its amax,
//! e4m3 scale and reciprocal are computed once per block, not on both of two lanes. The scale rules are
//! `logic::quant`'s on every arch (the MX exponent is two integer operations; NVFP4's e4m3
//! block scale divides by reciprocals, `logic::quant::nvfp4_block_scale_value_fast`, the
//! reference's byte on every input proved on the CPU, and rounds through the hardware
//! conversion, the software encoder's bits). The MX elements round through the hardware e4m3
//! conversion. NVFP4's e2m1 elements round through the hardware conversion on sm_100a
//! (`num::E2m1`, eight to a word) and through `logic::quant::nvfp4_encode8_by_inverse`
//! (branch-free, nine instructions an element with the packing) on sm_90a, which has none: the
//! same codes either way (nearest even, saturating to ±6; NaN never reaches the conversion, a
//! block holding one has the NaN scale and all-zero codes). NVFP4's tensor amax comes from
//! `quant_tensor::amax_*` in a launch before, read from device memory. NVFP4 decode on sm_90a
//! builds each e2m1 value from its code's bits (`logic::quant::e2m1_tiny`, three integer
//! instructions and a multiply), the reference's value to the bit.

use warpforge_dsl::global::{self, Bf16x8, F32x4, Streaming};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::quant as q;
#[cfg(warpforge_arch = "sm_100a")]
use warpforge_dsl::num::E2m1;
use warpforge_dsl::num::{Bf16, E4m3, F16};
use warpforge_dsl::regs::{RegArray, Regs8};
use warpforge_dsl::thread::{global_x, grid_stride_x, lane_id};
use warpforge_dsl::warp;

use crate::quant::{AmaxKey, Input16, VEC, for_each_block16, load_or_zero, max_magnitude_bits, pack8, store8};

/// Vectors per MX block (4 lanes × 8 = 32 elements).
const MX_LANES: u32 = q::MX_BLOCK as u32 / VEC;
/// Vectors per NVFP4 block (2 lanes × 8 = 16 elements).
const NVFP4_LANES: u32 = q::NVFP4_BLOCK as u32 / VEC;

/// A decoder's output element, stored eight at a time.
trait Output8 {
    /// Stores `v` at `out` (element `i` from `v.i`).
    ///
    /// # Safety
    /// `out` is 16-byte aligned with eight writable elements nothing else accesses.
    unsafe fn store8(out: *mut Self, v: Regs8<f32>);
}

impl Output8 for Bf16 {
    #[inline(always)]
    unsafe fn store8(out: *mut Self, v: Regs8<f32>) {
        // SAFETY: the caller's contract.
        unsafe { global::store::<Bf16x8, Streaming>(out, Bf16x8::from_f32(&v)) }
    }
}

impl Output8 for f32 {
    #[inline(always)]
    unsafe fn store8(out: *mut Self, v: Regs8<f32>) {
        // SAFETY: the caller's contract: 32 bytes, the second half 16 bytes on.
        unsafe {
            global::store::<F32x4, Streaming>(out, F32x4(v.0, v.1, v.2, v.3));
            global::store::<F32x4, Streaming>(out.add(4), F32x4(v.4, v.5, v.6, v.7));
        }
    }
}

/// MXFP8 encode of `n` elements (`n % 32 == 0`): e4m3 bytes to `out`, one UE8M0 byte per
/// 32 elements to `scales`.
///
/// A warp step is 128 consecutive vectors, four chunks of 32 (lane `l` loads vector `l` of
/// each, all four loads first): a chunk's 8 MX blocks lie on aligned runs of 4 lanes. The
/// step's 32 scale bytes are consecutive, so after the four chunks each lane packs its blocks'
/// bytes into one word, and lane `L` stores byte `L` (chunk `L / 8`, block `L % 8`, taken from
/// lane `4 · (L % 8)` by one shuffle): one 32-byte store per step instead of four of 8 bytes.
///
/// # Safety
/// `x` (16-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` elements, read-only; `out`
/// (8-byte aligned) `n` bytes; `scales` `n / 32` bytes; disjoint; the block size a multiple of
/// 32, fewer than 2^28 threads.
#[inline(always)]
unsafe fn mxfp8_encode<T: Input16>(n: u64, x: *const T, out: *mut u8, scales: *mut u8) {
    // Below 2^31 (MAX_ELEMENTS); `base + 4 · grid_stride_x()` stays below 2^32.
    let n_vec = (n / VEC as u64) as u32;
    let lane = lane_id();
    let mut base = 4 * (global_x() as u32 - lane);
    let stride = 4 * grid_stride_x() as u32;
    // SAFETY: the caller's contract on x and n_vec.
    let load = |v: u32| unsafe { load_or_zero(x, v, n_vec) };
    // Warp-uniform: `base` is the warp's.
    while base < n_vec {
        let at = |chunk: u32| base + 32 * chunk + lane;
        let raw = [load(at(0)), load(at(1)), load(at(2)), load(at(3))];
        let mut bytes = 0u32;
        // The four chunks written out: a loop over them stays rolled, indexing registers by
        // selects.
        let mut encode = |chunk: u32| {
            let raw = raw[chunk as usize];
            // SAFETY: all 32 lanes run this loop together (its condition is warp-uniform).
            let byte = q::mx_scale_byte(unsafe { AmaxKey::of::<T>(raw).across_lanes::<MX_LANES>() }.amax::<T>());
            let factor = q::exp2i(127 - byte as i32);
            if at(chunk) < n_vec {
                // SAFETY: the vector is inside x, so its 8 bytes are inside out, this lane's.
                unsafe { store8(out, at(chunk) as usize, pack8::<E4m3>(&T::widen(raw).map(|e| e * factor))) };
            }
            bytes |= (byte as u32) << (8 * chunk);
        };
        encode(0);
        encode(1);
        encode(2);
        encode(3);
        // SAFETY: all 32 lanes, as above.
        let word = unsafe { warp::shuffle(bytes, MX_LANES * (lane % 8)) };
        let block = base / MX_LANES + lane;
        if block < n_vec / MX_LANES {
            // SAFETY: block < n / 32: inside scales, written by this lane only.
            unsafe { scales.add(block as usize).write((word >> (8 * (lane / 8))) as u8) };
        }
        base += stride;
    }
}

/// MXFP8 encode, bf16 input (OCP MX, blocks of 32 along K).
///
/// # Safety
/// As `mxfp8_encode`: `x` n bf16 (16-byte aligned, `n % 32 == 0`), `out` n bytes (8-byte
/// aligned), `scales` n/32 bytes, disjoint.
#[kernel(max_threads = 1024)]
pub unsafe fn mxfp8_encode_bf16(n: u64, x: *const Bf16, out: *mut u8, scales: *mut u8) {
    // SAFETY: the launch contract above.
    unsafe { mxfp8_encode(n, x, out, scales) }
}

/// MXFP8 encode, f16 input.
///
/// # Safety
/// As [`mxfp8_encode_bf16`], with f16 input.
#[kernel(max_threads = 1024)]
pub unsafe fn mxfp8_encode_f16(n: u64, x: *const F16, out: *mut u8, scales: *mut u8) {
    // SAFETY: the launch contract above.
    unsafe { mxfp8_encode(n, x, out, scales) }
}

/// For every 8-element vector index `< n_vec` of this thread's grid-stride share: `load(i)`,
/// then `store(i, loaded)`, two indices per step with both loads issued before either store
/// (a store through `out` could alias the next load as far as the compiler knows). 32-bit
/// indices (`n_vec ≤ 2^31`, from `n ≤ logic::quant::MAX_ELEMENTS`, and fewer than 2^30
/// threads keep `i + 2 · stride` below 2^32): the 64-bit index arithmetic was a fifth of the
/// decoders' instructions.
#[inline(always)]
fn for_each_index<L>(n_vec: u32, load: impl Fn(u32) -> L, mut store: impl FnMut(u32, L)) {
    let mut i = global_x() as u32;
    let stride = grid_stride_x() as u32;
    while i + stride < n_vec {
        let (a, b) = (load(i), load(i + stride));
        store(i, a);
        store(i + stride, b);
        i += 2 * stride;
    }
    if i < n_vec {
        store(i, load(i));
    }
}

/// MXFP8 decode: `out[i] = e4m3(q[i]) · 2^(scales[i/32] − 127)`.
///
/// # Safety
/// `codes` (8-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` bytes (`n % 32 == 0`),
/// `scales` `n / 32`, both read-only; `out` (16-byte aligned) `n` elements, disjoint from both;
/// fewer than 2^30 threads.
#[inline(always)]
unsafe fn mxfp8_decode<O: Output8>(n: u64, codes: *const u8, scales: *const u8, out: *mut O) {
    let load = |i: u32| {
        // SAFETY: i < n / 8: eight code bytes and their block's scale byte.
        unsafe {
            let bytes = codes.add(i as usize * VEC as usize).cast::<u64>().read();
            (bytes, scales.add((i / MX_LANES) as usize).read())
        }
    };
    for_each_index((n / VEC as u64) as u32, load, |i, (bytes, scale_byte)| {
        let scale = q::mx_scale(scale_byte);
        let (lo, hi) = (E4m3::unpack4(bytes as u32), E4m3::unpack4((bytes >> 32) as u32));
        let v = Regs8(lo.0, lo.1, lo.2, lo.3, hi.0, hi.1, hi.2, hi.3).map(|e| scale * e);
        // SAFETY: i < n / 8: eight outputs.
        unsafe { O::store8(out.add(i as usize * VEC as usize), v) };
    })
}

/// MXFP8 decode to bf16 (the f32 product rounded once).
///
/// # Safety
/// As `mxfp8_decode`: `codes` n bytes (8-byte aligned, `n % 32 == 0`), `scales` n/32 bytes,
/// `out` n bf16 (16-byte aligned), disjoint.
#[kernel(max_threads = 1024)]
pub unsafe fn mxfp8_decode_bf16(n: u64, codes: *const u8, scales: *const u8, out: *mut Bf16) {
    // SAFETY: the launch contract above.
    unsafe { mxfp8_decode(n, codes, scales, out) }
}

/// MXFP8 decode to f32 (exact).
///
/// # Safety
/// As [`mxfp8_decode_bf16`], with f32 output.
#[kernel(max_threads = 1024)]
pub unsafe fn mxfp8_decode_f32(n: u64, codes: *const u8, scales: *const u8, out: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { mxfp8_decode(n, codes, scales, out) }
}

/// The NVFP4 codes of eight elements at their block's effective scale, element `i` in nibble
/// `i`: `logic::quant::nvfp4_encode` of each (all +0 when the scale is 0 or NaN).
#[inline(always)]
fn nvfp4_word(values: &Regs8<f32>, scale: f32) -> u32 {
    #[cfg(warpforge_arch = "sm_100a")]
    {
        if scale > 0.0 {
            let inverse = 1.0 / scale;
            // SAFETY: sm_100a (this cfg). No NaN reaches it: a block holding one has the NaN
            // scale and takes the other branch.
            unsafe { E2m1::pack8(values.map(|e| e * inverse)) }
        } else {
            0
        }
    }
    #[cfg(not(warpforge_arch = "sm_100a"))]
    {
        let inverse = 1.0 / scale;
        let mut word = 0u32;
        if scale > 0.0 && inverse < f32::INFINITY {
            // No NaN reaches the encoder here (a block holding one has the NaN scale), so the
            // form without the NaN select: nine instructions an element, packing included.
            let v = values;
            word = q::nvfp4_encode8_by_inverse([v.0, v.1, v.2, v.3, v.4, v.5, v.6, v.7], inverse);
        } else {
            // The NaN or zero scale (all +0), or one whose reciprocal overflows (2^-128 and
            // below, a tensor amax near the f32 subnormals): there `±0 · ∞` is NaN, +0 in the
            // reference. Rare, and warp-divergent only between blocks.
            values.for_each(|i, e| word |= (q::nvfp4_encode(e, scale) as u32) << (4 * i));
        }
        word
    }
}

/// The eight NVFP4 values of a word of codes at their block's effective scale (code `i` from
/// nibble `i`): `logic::quant::nvfp4_decode` of each.
#[inline(always)]
fn nvfp4_values(word: u32, scale: f32) -> Regs8<f32> {
    #[cfg(warpforge_arch = "sm_100a")]
    {
        // SAFETY: sm_100a (this cfg).
        unsafe { E2m1::unpack8(word) }.map(|e| e * scale)
    }
    #[cfg(not(warpforge_arch = "sm_100a"))]
    {
        // Code `j` moved to bits 31..28 (the construction's input): one shift, none for j = 7.
        let top = |j: usize| word << (28 - 4 * j as u32);
        if scale.abs() < 4.0 {
            // `scale · 2^126` finite (every block of a tensor whose amax is below 24; one
            // compare on |scale|): one multiply each.
            let up_scale = scale * q::E2M1_UP;
            Regs8::from_fn(|j| q::nvfp4_decode_top_fused(top(j), up_scale))
        } else {
            Regs8::from_fn(|j| q::nvfp4_decode_top(top(j), scale))
        }
    }
}

/// `logic::quant::nvfp4_block_scale` with the divisions by reciprocal
/// (`logic::quant::nvfp4_block_scale_value_fast`, the same byte on every input a bf16 or f16
/// tensor gives) and the e4m3 rounding in hardware: one `cvt.rn.satfinite` (the software
/// encoder's bits on every non-NaN input; the value is never NaN).
#[inline(always)]
fn nvfp4_block_scale(block_amax: f32, divisor: q::Nvfp4Divisor, has_nan: bool) -> u8 {
    if has_nan { 0x7f } else { E4m3::from_f32(q::nvfp4_block_scale_value_fast(block_amax, divisor)).0 }
}

/// NVFP4 encode of `n` elements (`n % 16 == 0`) under the tensor amax `*amax` (f32 bits, from
/// `amax_*`): the global scale `nvfp4_global_scale(amax)` to `*global_out` (thread 0), then
/// `nvfp4_encode_under` that scale.
///
/// # Safety
/// As `nvfp4_encode_under`, and `amax` one word written before the launch, `global_out` one
/// f32, disjoint from the outputs.
#[inline(always)]
unsafe fn nvfp4_encode<T: Input16>(
    n: u64,
    x: *const T,
    amax: *const u32,
    out: *mut u8,
    scales: *mut u8,
    global_out: *mut f32,
) {
    // SAFETY: one readable word, not written during the launch.
    let global = q::nvfp4_global_scale(f32::from_bits(unsafe { amax.read() }));
    if global_x() == 0 {
        // SAFETY: one writable f32, this thread's only.
        unsafe { global_out.write(global) };
    }
    // SAFETY: the contract above; `nvfp4_global_scale` is a positive normal f32 below 2^117.
    unsafe { nvfp4_encode_under(n, x, global, out, scales) }
}

/// NVFP4 encode of `n` elements (`n % 16 == 0`) under the global scale `global`: e2m1 pairs to
/// `out` (`n / 2` bytes), e4m3 block scales `e4m3(block_amax / 6 / global)` to `scales` (`n /
/// 16`); a block whose amax exceeds `6 · 448 · global` (possible only with a caller's global
/// scale) gets the scale byte 448 and its elements past `±6` saturate.
///
/// # Safety
/// `x` (16-byte aligned) holds `n ≤ logic::quant::MAX_ELEMENTS` elements, read-only; `out`
/// (4-byte aligned) `n / 2` bytes; `scales` `n / 16` bytes; disjoint; `global` a positive
/// normal f32 below 2^117 (`Nvfp4Divisor::new`).
#[inline(always)]
unsafe fn nvfp4_encode_under<T: Input16>(n: u64, x: *const T, global: f32, out: *mut u8, scales: *mut u8) {
    let divisor = q::Nvfp4Divisor::new(global);
    // SAFETY: the contract above (n / 8 < 2^31, and even as n % 16 == 0).
    unsafe {
        // Forward: bound by its per-element instructions, the encoder gained nothing from
        // starting on what `amax_*` left in L2 and lost 3 % at 256 MiB (docs/PERF.md, build E).
        for_each_block16::<T>((n / VEC as u64) as u32, x, |block, in_range, [lower, upper]| {
            // One reduction of the magnitudes finds a NaN and, without an infinity, the finite
            // amax; only a block holding an infinity (rare) reduces again to skip it.
            let top = max_magnitude_bits::<T>([lower, upper]);
            let amax = if top < T::INFINITY_BITS {
                T::widen_magnitude(top)
            } else {
                AmaxKey::of::<T>(lower).max(AmaxKey::of::<T>(upper)).amax::<T>()
            };
            let byte = nvfp4_block_scale(amax, divisor, top > T::INFINITY_BITS);
            let scale = E4m3(byte).to_f32() * global;
            if in_range {
                // Eight code bytes per block; `out` is only 4-byte aligned, so two words.
                let words = out.add(block as usize * q::NVFP4_BLOCK / 2).cast::<u32>();
                words.write(nvfp4_word(&T::widen(lower), scale));
                words.add(1).write(nvfp4_word(&T::widen(upper), scale));
                scales.add(block as usize).write(byte);
            }
        })
    }
}

/// NVFP4 encode, bf16 input; see the module doc.
///
/// # Safety
/// As `nvfp4_encode`: `x` n bf16 (16-byte aligned, `n % 16 == 0`), `amax` one word, `out` n/2
/// bytes (4-byte aligned), `scales` n/16 bytes, `global` one f32, disjoint.
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_encode_bf16(
    n: u64,
    x: *const Bf16,
    amax: *const u32,
    out: *mut u8,
    scales: *mut u8,
    global: *mut f32,
) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_encode(n, x, amax, out, scales, global) }
}

/// NVFP4 encode, f16 input.
///
/// # Safety
/// As [`nvfp4_encode_bf16`], with f16 input.
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_encode_f16(
    n: u64,
    x: *const F16,
    amax: *const u32,
    out: *mut u8,
    scales: *mut u8,
    global: *mut f32,
) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_encode(n, x, amax, out, scales, global) }
}

/// NVFP4 encode, bf16 input, under the caller's global scale (static scaling: one pass, no
/// amax).
///
/// # Safety
/// As `nvfp4_encode_under`: `x` n bf16 (16-byte aligned, `n % 16 == 0`), `out` n/2 bytes
/// (4-byte aligned), `scales` n/16 bytes, disjoint; `global` positive, normal, below 2^117.
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_encode_static_bf16(n: u64, x: *const Bf16, global: f32, out: *mut u8, scales: *mut u8) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_encode_under(n, x, global, out, scales) }
}

/// As [`nvfp4_encode_static_bf16`], with f16 input.
///
/// # Safety
/// As [`nvfp4_encode_static_bf16`].
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_encode_static_f16(n: u64, x: *const F16, global: f32, out: *mut u8, scales: *mut u8) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_encode_under(n, x, global, out, scales) }
}

/// NVFP4 decode: `out[i] = e2m1(q[i]) · (e4m3(scales[i/16]) · *global)`.
///
/// # Safety
/// `codes` (4-byte aligned) holds `n / 2` bytes (`n % 16 == 0`, `n ≤
/// logic::quant::MAX_ELEMENTS`), `scales` `n / 16`, `global` one f32, all read-only; `out`
/// (16-byte aligned) `n` elements, disjoint from them; fewer than 2^30 threads.
#[inline(always)]
unsafe fn nvfp4_decode<O: Output8>(n: u64, codes: *const u8, scales: *const u8, global: *const f32, out: *mut O) {
    // SAFETY: one readable f32.
    let global = unsafe { global.read() };
    let load = |i: u32| {
        // SAFETY: i < n / 8: four code bytes and their block's scale byte.
        unsafe {
            let word = codes.add(i as usize * VEC as usize / 2).cast::<u32>().read();
            (word, scales.add((i / NVFP4_LANES) as usize).read())
        }
    };
    for_each_index((n / VEC as u64) as u32, load, |i, (word, scale_byte)| {
        // `logic::quant::nvfp4_scale` with the e4m3 decode in hardware (exact through f16; the
        // NaN byte NaN): two conversions instead of a branchy software decode.
        let scale = E4m3(scale_byte).to_f32() * global;
        let v = nvfp4_values(word, scale);
        // SAFETY: i < n / 8: eight outputs.
        unsafe { O::store8(out.add(i as usize * VEC as usize), v) };
    })
}

/// NVFP4 decode to bf16 (the f32 product rounded once).
///
/// # Safety
/// As `nvfp4_decode`: `codes` n/2 bytes (4-byte aligned, `n % 16 == 0`), `scales` n/16 bytes,
/// `global` one f32, `out` n bf16 (16-byte aligned), disjoint.
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_decode_bf16(n: u64, codes: *const u8, scales: *const u8, global: *const f32, out: *mut Bf16) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_decode(n, codes, scales, global, out) }
}

/// NVFP4 decode to f32.
///
/// # Safety
/// As [`nvfp4_decode_bf16`], with f32 output.
#[kernel(max_threads = 1024)]
pub unsafe fn nvfp4_decode_f32(n: u64, codes: *const u8, scales: *const u8, global: *const f32, out: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { nvfp4_decode(n, codes, scales, global, out) }
}
