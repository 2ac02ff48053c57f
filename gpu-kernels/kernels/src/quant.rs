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
//! Per-token groups: a group is 128 consecutive elements of a row, so with `K % 128 == 0` the
//! groups tile the matrix contiguously; a warp takes 512 consecutive elements per step (four
//! groups of 8 lanes, two vectors per lane, so a group's scale arithmetic is shared by twice
//! the elements), reduces each group's amax over its 8 lanes with three butterfly shuffles,
//! and writes the scale MN-major (`logic::quant::group_scale_index`), each lane stepping its
//! group's (row, group) coordinates by the grid's fixed stride instead of dividing.
//!
//! Weight blocks (128 × 128) are `quant_block`'s, on the same vocabulary.

use warpforge_dsl::global::{self, Bf16x8, F16x8, ReadOnlyNoL1, Vector16};
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

/// Whether any of a vector's eight inputs is NaN (a magnitude above +∞'s bits), on the bits.
#[inline(always)]
pub(crate) fn has_nan<T: Input16>(v: T::Vector) -> bool {
    let (a, b, c, d) = v.words();
    // Magnitudes are at most 0x7FFF: non-negative as i16, so the signed maximum orders them.
    let m = max_s16x2(max_s16x2(a & 0x7fff_7fff, b & 0x7fff_7fff), max_s16x2(c & 0x7fff_7fff, d & 0x7fff_7fff));
    let m = max_s16x2(m, m.rotate_left(16)) as u16;
    m > T::INFINITY_BITS
}

/// The vector of zeros (what lanes past the end see).
#[inline(always)]
pub(crate) fn zero_vector<T: Input16>() -> T::Vector {
    T::Vector::from_words((0, 0, 0, 0))
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
    let load = |v: u32| {
        if v < n_vec {
            // SAFETY: v < n_vec, so the vector lies inside x; aligned as 16 · v from x.
            unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)) }
        } else {
            zero_vector::<T>()
        }
    };
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

/// Walks `n_vec` 8-element vectors of `x` (`n_vec` a multiple of `2 · LANES`) in runs of
/// `2 · LANES` consecutive vectors, two vectors per lane: each step a warp takes `64`
/// consecutive vectors, `32 / LANES` runs, and lane `l` holds vectors `v` and `v + LANES` with
/// `v = base + (l / LANES) · 2 · LANES + l % LANES`, so each run lies on an aligned set of
/// `LANES` lanes and each of the two loads reads `16 · LANES` contiguous bytes per run. Calls
/// `f(v, in_range, [first, second])` on every lane of every step (warp-uniform control flow, so
/// `f` may use warp collectives); runs past the end see zeros. A lane's successive calls see
/// `v` grow by `2 · grid_stride_x()`. Per run, the run's amax and scale cost half what they do
/// with one vector per lane ([`for_each_vector`]).
///
/// # Safety
/// `x` is 16-byte aligned and holds `8 · n_vec` elements not written during the launch; the
/// block size is a multiple of 32; `n_vec + 2 · grid_stride_x() < 2^32`.
#[inline(always)]
pub(crate) unsafe fn for_each_vector_pair<T: Input16, const LANES: u32>(
    n_vec: u32,
    x: *const T,
    mut f: impl FnMut(u32, bool, [T::Vector; 2]),
) {
    let lane = lane_id();
    let stride = 2 * grid_stride_x() as u32;
    let mut v = 2 * (global_x() as u32 - lane) + lane / LANES * 2 * LANES + lane % LANES;
    let load = |v: u32| {
        // SAFETY: the caller checked v < n_vec (a run lies wholly inside or outside), so the
        // vector lies inside x; aligned as 16 · v from x.
        unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)) }
    };
    // Warp-uniform: the warp's first vector, `v - lane's offset`, is the same on every lane.
    while v - (lane / LANES * 2 * LANES + lane % LANES) < n_vec {
        let in_range = v < n_vec;
        let pair = if in_range { [load(v), load(v + LANES)] } else { [zero_vector::<T>(); 2] };
        f(v, in_range, pair);
        v += stride;
    }
}

/// Walks `n_vec` 8-element vectors of `x` (`n_vec` even) as blocks of two consecutive vectors,
/// one block per lane, with the loads of [`for_each_vector_pair`] over runs of 32 vectors: each
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
    let load = |v: u32| {
        if v < n_vec {
            // SAFETY: v < n_vec, so the vector lies inside x; aligned as 16 · v from x.
            unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(v as usize * VEC as usize)) }
        } else {
            zero_vector::<T>()
        }
    };
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

/// An item's (row, column) in a row-major grid of `per_row` columns (a per-token group's row
/// and group in the row, a weight block's block row and column), moved a fixed number of
/// items at a time without dividing.
pub(crate) struct GridCursor {
    pub(crate) row: u32,
    pub(crate) col: u32,
    per_row: u32,
    step_rows: u32,
    step_cols: u32,
}

impl GridCursor {
    /// At item `first`, moving `step` items per [`Self::advance`].
    #[inline(always)]
    pub(crate) fn new(first: u32, step: u32, per_row: u32) -> Self {
        GridCursor {
            row: first / per_row,
            col: first % per_row,
            per_row,
            step_rows: step / per_row,
            step_cols: step % per_row,
        }
    }

    /// Moves `step` items on.
    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        self.row += self.step_rows;
        self.col += self.step_cols;
        if self.col >= self.per_row {
            self.col -= self.per_row;
            self.row += 1;
        }
    }
}

/// Per-token 1 × 128 e4m3 quantisation of the `rows × cols` row-major `x` (`cols % 128 == 0`).
///
/// # Safety
/// `x` (16-byte aligned) holds `rows · cols ≤ logic::quant::MAX_ELEMENTS` elements, `out`
/// (8-byte aligned) as many bytes, `scales` `cols / 128 · round_up(rows, 4)` f32; none
/// overlap, `x` is not written; the grid has fewer than 2^30 threads.
#[inline(always)]
unsafe fn quant_group<T: Input16>(rows: u64, cols: u64, pow2: u32, x: *const T, out: *mut u8, scales: *mut f32) {
    // All below 2^31 (MAX_ELEMENTS): 32-bit arithmetic.
    let n_vec = (rows * cols / VEC as u64) as u32;
    let (rows, groups_per_row) = (rows as u32, (cols / q::GROUP as u64) as u32);
    let pitch = rows.div_ceil(q::SCALE_ROW_ALIGN as u32) * q::SCALE_ROW_ALIGN as u32;
    // A warp step covers 64 vectors, four groups on 8 lanes each; a lane's group moves by
    // `2 · grid_stride_x() / 16` groups per step (the stride is a multiple of 32).
    let group_of = |v: u32| v / (2 * GROUP_LANES);
    let first = 2 * (global_x() as u32 - lane_id()) + lane_id() / GROUP_LANES * 2 * GROUP_LANES;
    let mut cursor = GridCursor::new(group_of(first), group_of(2 * grid_stride_x() as u32), groups_per_row);
    // SAFETY: the contract above (n_vec is a multiple of 16, cols % 128 == 0); the closure runs
    // warp-uniformly.
    unsafe {
        for_each_vector_pair::<T, GROUP_LANES>(n_vec, x, |v, in_range, pair| {
            let key = AmaxKey::of::<T>(pair[0]).max(AmaxKey::of::<T>(pair[1]));
            let amax = key.across_lanes::<GROUP_LANES>().amax::<T>();
            let scale = q::scale_from_amax(amax, E4m3::MAX, pow2 != 0);
            if in_range {
                let inverse = 1.0 / scale;
                for (j, raw) in pair.into_iter().enumerate() {
                    let at = v as usize + j * GROUP_LANES as usize;
                    store8(out, at, pack8::<E4m3>(&T::widen(raw).map(|e| e * inverse)));
                }
                if lane_id() % GROUP_LANES == 0 {
                    let (row, group) = (cursor.row, cursor.col);
                    let at = |r: u32| q::group_scale_index(r as usize, group as usize, pitch as usize);
                    scales.add(at(row)).write(scale);
                    if row + 1 == rows {
                        (rows..pitch).for_each(|r| scales.add(at(r)).write(0.0));
                    }
                }
            }
            cursor.advance();
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
