//! FP8 quantisation for Hopper GEMM operands: per-token 1 × 128 groups of an activation, e4m3
//! with f32 scales; plus the vocabulary the other quantising kernels (`quant_block`,
//! `quant_tensor`, `quant_mx`) share.
//!
//! Memory-bound, so counted in instructions: every lane moves eight 16-bit inputs by one
//! 16-byte read-only load and writes their eight FP8 bytes with one 8-byte store; the amax is
//! taken on the inputs' bits before they are widened (`AmaxKey`: four masks, four adds and
//! three packed `max.s16x2` per vector, and one per shuffle), and vector indices are 32-bit
//! (`logic::quant::MAX_ELEMENTS`). The scale math and the layouts are `logic::quant`'s, the
//! functions the host reference runs; the element rounding is the hardware's
//! `cvt.rn.satfinite` (bit-identical to the software encoder on every non-NaN input, which the
//! GPU tests check).
//!
//! Per-token groups: a group is 128 consecutive elements of a row (`K % 128 == 0`). A warp
//! step takes one group column of eight rows, two quads (8 lanes a group, two vectors per lane,
//! so a group's scale arithmetic is shared by twice the elements; all four loads in flight
//! before either quad is reduced), reduces each group's amax over its 8 lanes with three
//! butterfly shuffles, and writes each quad's four scales, consecutive in the MN-major layout
//! (`logic::quant::group_scale_index`), as one 16-byte store; the steps' (rows, group)
//! coordinates move by the grid's fixed stride instead of dividing.
//!
//! Weight blocks (128 × 128) are `quant_block`'s, on the same vocabulary.

use warpforge_dsl::global::{self, Bf16x8, F16x8, F32x4, ReadOnlyNoL1, Vector16};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::quant::{self as q, Minifloat};
use warpforge_dsl::math::max_s16x2;
use warpforge_dsl::num::{Bf16, E4m3, E5m2, F16};
use warpforge_dsl::regs::{RegArray, Regs4, Regs8};
use warpforge_dsl::thread::{global_x, grid_stride_x, lane_id};
use warpforge_dsl::warp;

/// Elements per 16-byte vector of 16-bit input.
pub(crate) const VEC: u32 = 8;

/// A 16-bit input element, read eight to a vector.
pub(crate) trait Input16: Copy {
    /// Its 16-byte vector.
    type Vector: Vector16<Elem = Self>;
    /// The bits of +∞: every finite magnitude's bits lie below (`logic::quant::magnitude_key_bias`).
    const INFINITY_BITS: u16;
    /// The eight values of a vector, widened exactly.
    fn widen(v: Self::Vector) -> Regs8<f32>;
    /// One value, widened exactly.
    fn widen_one(self) -> f32;
    /// A finite magnitude given by its bits, widened exactly.
    fn widen_magnitude(bits: u16) -> f32;
}

impl Input16 for Bf16 {
    type Vector = Bf16x8;
    const INFINITY_BITS: u16 = 0x7f80;
    #[inline(always)]
    fn widen(v: Bf16x8) -> Regs8<f32> {
        v.to_f32()
    }
    #[inline(always)]
    fn widen_one(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn widen_magnitude(bits: u16) -> f32 {
        // bf16 is the high half of an f32.
        f32::from_bits((bits as u32) << 16)
    }
}

impl Input16 for F16 {
    type Vector = F16x8;
    const INFINITY_BITS: u16 = 0x7c00;
    #[inline(always)]
    fn widen(v: F16x8) -> Regs8<f32> {
        v.to_f32()
    }
    #[inline(always)]
    fn widen_one(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn widen_magnitude(bits: u16) -> f32 {
        F16(bits).to_f32()
    }
}

/// A maximum of magnitude keys (`logic::quant::magnitude_keys`), the same key in both halves of
/// the word: the finite amax of the inputs it has seen, combined by one `max.s16x2`. Zero (no
/// input yet) stands for amax 0.
#[derive(Clone, Copy)]
pub(crate) struct AmaxKey(u32);

impl AmaxKey {
    /// The key of no input.
    pub(crate) const ZERO: AmaxKey = AmaxKey(0);

    /// The key of a vector's eight inputs.
    #[inline(always)]
    pub(crate) fn of<T: Input16>(v: T::Vector) -> AmaxKey {
        let bias = q::magnitude_key_bias(T::INFINITY_BITS);
        let (a, b, c, d) = v.words();
        let key = |w| q::magnitude_keys(w, bias);
        let m = max_s16x2(max_s16x2(key(a), key(b)), max_s16x2(key(c), key(d)));
        AmaxKey(max_s16x2(m, m.rotate_left(16)))
    }

    /// The key of both sets of inputs.
    #[inline(always)]
    pub(crate) fn max(self, other: AmaxKey) -> AmaxKey {
        AmaxKey(max_s16x2(self.0, other.0))
    }

    /// The key over each aligned run of `LANES` lanes (a power of two ≤ 32), on every lane of
    /// the run: butterfly shuffles with masks `LANES/2 … 1`.
    ///
    /// # Safety
    /// All 32 lanes of the warp call it together.
    #[inline(always)]
    pub(crate) unsafe fn across_lanes<const LANES: u32>(self) -> AmaxKey {
        let mut key = self;
        let mut mask = LANES / 2;
        while mask > 0 {
            // SAFETY: the caller runs all 32 lanes here.
            key = key.max(AmaxKey(unsafe { warp::shuffle_xor(key.0, mask) }));
            mask >>= 1;
        }
        key
    }

    /// The finite amax the key stands for, as f32 (exact).
    #[inline(always)]
    pub(crate) fn amax<T: Input16>(self) -> f32 {
        T::widen_magnitude(q::key_magnitude(self.0 as u16, q::magnitude_key_bias(T::INFINITY_BITS)))
    }
}

/// The largest magnitude's bits among the sixteen inputs of two vectors, on the bits: above
/// +∞'s bits when one is NaN, +∞'s with an infinity and no NaN, else the finite amax's (which
/// [`AmaxKey`] then gives too, at twice the instructions: its keys exist to skip infinities).
#[inline(always)]
pub(crate) fn max_magnitude_bits<T: Input16>([lower, upper]: [T::Vector; 2]) -> u16 {
    let ((a, b, c, d), (e, f, g, h)) = (lower.words(), upper.words());
    // Magnitudes are at most 0x7FFF: non-negative as i16, so the signed maximum orders them.
    let mag = |w: u32| w & 0x7fff_7fff;
    let m = max_s16x2(max_s16x2(mag(a), mag(b)), max_s16x2(mag(c), mag(d)));
    let m = max_s16x2(m, max_s16x2(max_s16x2(mag(e), mag(f)), max_s16x2(mag(g), mag(h))));
    max_s16x2(m, m.rotate_left(16)) as u16
}

/// The vector of zeros (what lanes past the end see).
#[inline(always)]
pub(crate) fn zero_vector<T: Input16>() -> T::Vector {
    T::Vector::from_words((0, 0, 0, 0))
}

/// Vector `v` of `x`, or zeros where `v ≥ n_vec` (lanes past the end of a walk).
///
/// # Safety
/// `x` is 16-byte aligned, holds `8 · n_vec` elements, and is not written during the launch.
#[inline(always)]
pub(crate) unsafe fn load_or_zero<T: Input16>(x: *const T, v: u32, n_vec: u32) -> T::Vector {
    if v < n_vec {
        // SAFETY: v < n_vec, so the vector lies inside x (the caller's contract); aligned as
        // 16 · v from x.
        unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)) }
    } else {
        zero_vector::<T>()
    }
}

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

/// Walks `n_vec` 8-element vectors of `x` by warps: each step a warp takes 32 consecutive
/// vectors (lane `l` the `l`-th), so an aligned run of `2^j` lanes holds `8 · 2^j` consecutive
/// elements. Calls `f(vector, in_range, raw)` on every lane of every step (warp-uniform
/// control flow, so `f` may use warp collectives); lanes past the end see zeros. A lane's
/// successive calls see vectors `global_x()`, then each `grid_stride_x()` past the one before;
/// `BACKWARD` mirrors the order of the warps' 32-vector steps (the last step first), for a
/// second pass over data a first pass has just read forward: its first reads then find the
/// first pass's last ones still in L2. Two steps' loads are issued before either is processed,
/// so each lane keeps 32 bytes in flight.
///
/// # Safety
/// `x` is 16-byte aligned and holds `8 · n_vec` elements not written during the launch; the
/// block size is a multiple of 32; `n_vec + 2 · grid_stride_x() < 2^32`.
#[inline(always)]
pub(crate) unsafe fn for_each_vector<T: Input16, const BACKWARD: bool>(
    n_vec: u32,
    x: *const T,
    mut f: impl FnMut(u32, bool, T::Vector),
) {
    let lane = lane_id();
    let mut base = global_x() as u32 - lane;
    let stride = grid_stride_x() as u32;
    // The last step's first vector; the walk below only runs when n_vec ≥ 1.
    let last = n_vec.saturating_sub(1) / 32 * 32;
    let step = |base: u32| if BACKWARD { last - base } else { base };
    // SAFETY: the caller's contract on x and n_vec.
    let load = |v: u32| unsafe { load_or_zero(x, v, n_vec) };
    while base < n_vec {
        let (v0, v1) = (step(base) + lane, if base + stride < n_vec { step(base + stride) + lane } else { n_vec });
        let (x0, x1) = (load(v0), load(v1));
        f(v0, v0 < n_vec, x0);
        // Warp-uniform: `base` is the same on every lane of the warp.
        if base + stride < n_vec {
            f(v1, v1 < n_vec, x1);
        }
        base += 2 * stride;
    }
}

/// Walks `n_vec` 8-element vectors of `x` (`n_vec` even) as blocks of two consecutive vectors,
/// one block per lane, with loads over runs of 32 vectors, two per lane: each
/// step a warp loads 64 consecutive vectors, lane `l` of half `h` the vectors `v = base + 32h +
/// l` and `v + 16` (every load instruction reads two 256-byte runs), then neighbouring lanes
/// swap one vector (four shuffles): an even lane keeps block `v / 2` (its first vector and its
/// neighbour's), an odd lane block `(v + 15) / 2` (its neighbour's second vector and its own);
/// `logic::quant::block16_first_vector`, whose CPU test checks that every block is kept once.
/// Calls `f(block, in_range, [lower, upper])` on every lane of every step (warp-uniform control
/// flow); vectors past the end read as zeros. What a block costs once (its amax, scale and
/// reciprocal) is then paid once per 16 elements instead of on each of two lanes, with no
/// shuffle to combine them.
///
/// # Safety
/// `x` is 16-byte aligned and holds `8 · n_vec` elements not written during the launch; the
/// block size is a multiple of 32; `n_vec + 2 · grid_stride_x() < 2^32`.
#[inline(always)]
pub(crate) unsafe fn for_each_block16<T: Input16>(
    n_vec: u32,
    x: *const T,
    mut f: impl FnMut(u32, bool, [T::Vector; 2]),
) {
    let lane = lane_id();
    let offset = q::block16_load_offset(lane);
    let odd = lane % 2 == 1;
    let stride = 2 * grid_stride_x() as u32;
    let mut v = 2 * (global_x() as u32 - lane) + offset;
    // SAFETY: the caller's contract on x and n_vec.
    let load = |v: u32| unsafe { load_or_zero(x, v, n_vec) };
    // Warp-uniform: the warp's first vector, `v - offset`, is the same on every lane.
    while v - offset < n_vec {
        let (first, second) = (load(v), load(v + 16));
        let (a, b, c, d) = if odd { first.words() } else { second.words() };
        // SAFETY: all 32 lanes run this loop together (its condition is warp-uniform).
        let swapped = unsafe {
            T::Vector::from_words((
                warp::shuffle_xor(a, 1),
                warp::shuffle_xor(b, 1),
                warp::shuffle_xor(c, 1),
                warp::shuffle_xor(d, 1),
            ))
        };
        let pair = if odd { [swapped, second] } else { [first, swapped] };
        // `v - offset` is the step's first vector.
        let block_vec = q::block16_first_vector(v - offset, lane);
        // `n_vec` is even and `block_vec` too, so the block lies wholly inside or outside.
        f(block_vec / 2, block_vec < n_vec, pair);
        v += stride;
    }
}

/// Stores eight FP8 bytes at byte `8 · v` of `out`.
///
/// # Safety
/// `out` is 8-byte aligned and `8 · v + 8` bytes long, and nothing else writes those bytes.
#[inline(always)]
pub(crate) unsafe fn store8(out: *mut u8, v: usize, bytes: u64) {
    // SAFETY: the caller's contract.
    unsafe { out.add(v * VEC as usize).cast::<u64>().write(bytes) }
}

/// Lanes per per-token group: 8 lanes × 2 vectors × 8 elements = 128.
const GROUP_LANES: u32 = q::GROUP as u32 / (2 * VEC);

/// Per-token 1 × 128 e4m3 quantisation of the `rows × cols` row-major `x` (`cols % 128 == 0`).
///
/// A warp step is one group column `g` of eight rows `8o … 8o + 7`, two quads (rows from
/// `rows` up to the scale pitch read as zeros and get scale 0; a quad past the pitch is
/// skipped): lane `l` takes row `4q + l / 8` of each quad and that group's vectors `l % 8` and
/// `l % 8 + 8`, so each load reads 128 contiguous bytes per row, and all four loads are issued
/// before either quad is reduced. A quad's four scales, MN-major, are consecutive: lanes 0 and
/// 1 write the two quads' with one instruction of 16-byte stores. Steps go to warps
/// round-robin, octet-major (`logic::quant::GridCursor`), so a CTA's warps walk along the same
/// eight rows.
///
/// # Safety
/// `x` (16-byte aligned) holds `rows · cols ≤ logic::quant::MAX_ELEMENTS` elements, `out`
/// (8-byte aligned) as many bytes, `scales` (16-byte aligned) `cols / 128 · round_up(rows, 4)`
/// f32; none overlap, `x` is not written; the block size is a multiple of 32 and the grid has
/// fewer than 2^30 threads.
#[inline(always)]
unsafe fn quant_group<T: Input16>(rows: u64, cols: u64, pow2: u32, x: *const T, out: *mut u8, scales: *mut f32) {
    const QUAD: u32 = q::SCALE_ROW_ALIGN as u32;
    // All below 2^31 (MAX_ELEMENTS): 32-bit arithmetic.
    let (rows, groups_per_row) = (rows as u32, (cols / q::GROUP as u64) as u32);
    let quads = rows.div_ceil(QUAD);
    let pitch = quads * QUAD;
    let steps = quads.div_ceil(2) * groups_per_row;
    let (lane, warps) = (lane_id(), grid_stride_x() as u32 / 32);
    let mut step = global_x() as u32 / 32;
    let mut cursor = q::GridCursor::new(step, warps, groups_per_row);
    // Warp-uniform: `step` is the warp's.
    while step < steps {
        let (octet, group) = (cursor.row, cursor.col);
        let rows_of = |quad: u32| quad * QUAD + lane / GROUP_LANES;
        let (first, second) = (
            GroupRun::load(x, rows, groups_per_row, rows_of(2 * octet), group),
            GroupRun::load(x, rows, groups_per_row, rows_of(2 * octet + 1), group),
        );
        // SAFETY: all 32 lanes run this loop together (its condition is warp-uniform); out
        // holds as many bytes as x has elements.
        let (s0, s1) = unsafe { (first.quantise(out, pow2), second.quantise(out, pow2)) };
        let quad = 2 * octet + lane;
        if lane < 2 && quad < quads {
            let at = q::group_scale_index((quad * QUAD) as usize, group as usize, pitch as usize);
            // SAFETY: the four scales of rows 4q … 4q + 3 in column g are consecutive inside
            // scales (q < quads: pitch rows per column), 16-byte aligned (pitch and 4q are
            // multiples of 4), and only this lane of this warp's step writes them.
            unsafe { global::store_f32x4(scales.add(at), if lane == 0 { s0 } else { s1 }) };
        }
        cursor.advance();
        step += warps;
    }
}

/// One lane's share of a per-token group: its row, its first vector and the two vectors it
/// loaded (zeros past the last row).
#[derive(Clone, Copy)]
struct GroupRun<T: Input16> {
    in_range: bool,
    v: u32,
    pair: [T::Vector; 2],
}

impl<T: Input16> GroupRun<T> {
    /// Lane's vectors `l % 8` and `l % 8 + 8` of group `group` in `row`.
    #[inline(always)]
    fn load(x: *const T, rows: u32, groups_per_row: u32, row: u32, group: u32) -> Self {
        let per_group = 2 * GROUP_LANES;
        let in_range = row < rows;
        let v = row.wrapping_mul(groups_per_row * per_group) + group * per_group + lane_id() % GROUP_LANES;
        let load = |v: u32| {
            // SAFETY: the row is in range, so vector v (< rows · cols / 8) lies inside x (the
            // caller's x, rows × cols elements); aligned as 16 · v from x.
            unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)) }
        };
        let pair = if in_range { [load(v), load(v + GROUP_LANES)] } else { [zero_vector::<T>(); 2] };
        GroupRun { in_range, v, pair }
    }

    /// Reduces the group's amax over its 8 lanes, writes its e4m3 codes, and returns the
    /// scales of the quad's four rows (0 for rows past the end) on every lane.
    ///
    /// # Safety
    /// All 32 lanes call it together, `out` holds a byte per element of x.
    #[inline(always)]
    unsafe fn quantise(self, out: *mut u8, pow2: u32) -> F32x4 {
        let key = AmaxKey::of::<T>(self.pair[0]).max(AmaxKey::of::<T>(self.pair[1]));
        // SAFETY: all 32 lanes (the caller's contract).
        let amax = unsafe { key.across_lanes::<GROUP_LANES>() }.amax::<T>();
        let scale = q::scale_from_amax(amax, E4m3::MAX, pow2 != 0);
        if self.in_range {
            let inverse = 1.0 / scale;
            let codes = |raw: T::Vector| pack8::<E4m3>(&T::widen(raw).map(|e| e * inverse));
            // SAFETY: vectors v and v + 8 are inside the row, so their 8 bytes each are inside
            // out, written by this lane only. (Two stores written out: a loop over the pair
            // stays rolled, indexing registers by selects.)
            unsafe {
                store8(out, self.v as usize, codes(self.pair[0]));
                store8(out, (self.v + GROUP_LANES) as usize, codes(self.pair[1]));
            }
        }
        let own = if self.in_range { scale } else { 0.0 };
        // SAFETY: all 32 lanes; each row's scale is on every lane of its 8.
        unsafe {
            F32x4(
                own,
                gather_scale(own, GROUP_LANES),
                gather_scale(own, 2 * GROUP_LANES),
                gather_scale(own, 3 * GROUP_LANES),
            )
        }
    }
}

/// Lane `src`'s `value`, on every lane.
///
/// # Safety
/// All 32 lanes of the warp call it together.
#[inline(always)]
unsafe fn gather_scale(value: f32, src: u32) -> f32 {
    // SAFETY: the caller's contract.
    f32::from_bits(unsafe { warp::shuffle(value.to_bits(), src) })
}

/// Per-token 1 × 128 e4m3 quantisation of a bf16 activation; see the module doc.
///
/// # Safety
/// As `quant_group`: `x` rows × cols bf16 (16-byte aligned, `cols % 128 == 0`), `out` as many
/// bytes (8-byte aligned), `scales` `cols/128 · round_up(rows, 4)` f32, disjoint.
#[kernel(max_threads = 1024, max_registers = 40)]
pub unsafe fn quant_group_e4m3_bf16(rows: u64, cols: u64, pow2: u32, x: *const Bf16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_group(rows, cols, pow2, x, out, scales) }
}

/// Per-token 1 × 128 e4m3 quantisation of an f16 activation.
///
/// # Safety
/// As [`quant_group_e4m3_bf16`], with f16 input.
#[kernel(max_threads = 1024, max_registers = 40)]
pub unsafe fn quant_group_e4m3_f16(rows: u64, cols: u64, pow2: u32, x: *const F16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_group(rows, cols, pow2, x, out, scales) }
}
