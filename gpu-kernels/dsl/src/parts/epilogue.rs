//! L3 epilogue parts: how a consumer warpgroup's 64 × N f32 accumulator block leaves the
//! registers. The kernel supplies the element math as `value(row, col, acc)` (row and column
//! relative to the block, so it can read C, a bias or a scale at its coordinates); these parts
//! supply the ways out:
//!
//! - [`store_staged`]: rounded into 64 × 64 shared-memory boxes with `stmatrix` (one per 16 × 16
//!   block) and written by TMA stores, in passes of [`PASS_COLS`] columns; the global writes
//!   overlap whatever the warpgroup does next, and TMA clips the ragged edges;
//! - [`store_direct`]: element by element to any pitch and type (the fallback when D cannot be
//!   written by TMA);
//! - [`store_row_pairs`]: a 16-bit tile as 4-byte column pairs from two row addresses per
//!   thread (rows of any pitch, one branch per row, constant offsets along it);
//! - [`pair_columns`]: a register-tile op that combines the two halves of every 16-column block
//!   into a half-width tile in the accumulator's own layout (dual-GEMM epilogues such as
//!   gate-up + SwiGLU), which then leaves through either store.
//!
//! A stream-K partial is the third way out: [`super::stream_k`].

use crate::logic::fragment::{WGMMA_M, acc_coord, acc_thread_row};
use crate::num::{Bf16, F16};
use crate::sync::{NamedBarrier, fence_proxy_async_shared};
use crate::tile::{SmemTileRing, Swizzle128B};
use crate::warpgroup::{self, acc::Accumulator};
use crate::{abi::TensorMap, tma, warp};

/// Columns of one TMA store box: 128 bytes of a 16-bit output, one swizzle span.
pub const STORE_BOX_COLS: u32 = 64;
/// Columns staged per pass: a warpgroup's staging holds `PASS_COLS / STORE_BOX_COLS` boxes.
pub const PASS_COLS: u32 = 128;
const STORE_BOXES: usize = (PASS_COLS / STORE_BOX_COLS) as usize;
/// Accumulator registers per pass (two per column of a thread's two rows; see `acc_coord`).
const PASS_REGS: usize = (PASS_COLS / 2) as usize;
/// Accumulator registers per store box.
const BOX_REGS: usize = (STORE_BOX_COLS / 2) as usize;

/// An output element type: how f32 results are rounded, and what is staged for TMA stores.
pub trait Output: Copy {
    /// The 16-bit type staged in shared memory for TMA stores (16-bit outputs are staged as
    /// themselves; f32 output is stored directly and never uses its staging type).
    type Staged: Copy;
    /// Rounds an f32 result.
    fn from_f32(v: f32) -> Self;
    /// Reads an element (e.g. of C) as f32.
    fn to_f32(self) -> f32;
    /// Two rounded f32 results in the staged type, packed (`lo` in the low half).
    fn staged_pair(lo: f32, hi: f32) -> u32;
}

macro_rules! sixteen_bit_output {
    ($($t:ty),*) => {$(
        impl Output for $t {
            type Staged = $t;
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            #[inline(always)]
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            #[inline(always)]
            fn staged_pair(lo: f32, hi: f32) -> u32 {
                <$t>::pack2(lo, hi)
            }
        }
    )*};
}
sixteen_bit_output!(Bf16, F16);

impl Output for f32 {
    type Staged = Bf16;
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn staged_pair(lo: f32, hi: f32) -> u32 {
        Bf16::pack2(lo, hi)
    }
}

/// One warpgroup's staging: a pass of 64 × [`PASS_COLS`] as 64 × 64 TMA store boxes.
pub type Staging<O> = SmemTileRing<<O as Output>::Staged, { WGMMA_M as usize }, STORE_COLS, Swizzle128B, STORE_BOXES>;
const STORE_COLS: usize = STORE_BOX_COLS as usize;

/// Where one warpgroup's block goes through staging: D's tensor map, this warpgroup's staging
/// boxes and named barrier, whether this thread is its leader, and the block's batch and
/// top-left element of D.
#[derive(Clone, Copy)]
pub struct StagedStore<'a, O: Output> {
    /// D's tensor map (N × M × batch, box 64 × 64 × 1, 128-byte swizzle, the staged type).
    pub d_map: &'a TensorMap,
    /// This warpgroup's staging boxes.
    pub staging: &'a Staging<O>,
    /// This warpgroup's named barrier (128 threads).
    pub barrier: &'a NamedBarrier<128>,
    /// Whether this thread issues the warpgroup's TMA stores.
    pub leader: bool,
    /// Batch of the block.
    pub batch: i32,
    /// First row of D the block covers.
    pub row0: u32,
    /// First column of D the block covers.
    pub col0: u32,
}

/// Writes this warpgroup's 64 × N block (N = 64 or 128: one pass of one or two boxes; 256: two
/// passes) through staging and TMA stores. Each pass waits only until the previous pass's stores
/// have *read* the staging.
///
/// # Safety
/// `target.d_map` is a 3-D map of D as documented on [`StagedStore`]; `target.staging` belongs
/// to this warpgroup; `target.barrier` counts exactly its 128 threads; the whole warpgroup calls
/// this together; `value` is safe to call for every element of the block.
#[inline(always)]
pub unsafe fn store_staged<O: Output, A: Accumulator<Elem = f32>>(
    acc: &A,
    target: &StagedStore<'_, O>,
    value: impl Fn(u32, u32, f32) -> f32 + Copy,
) {
    const {
        assert!(
            A::REGS == BOX_REGS || A::REGS == PASS_REGS || A::REGS == 2 * PASS_REGS,
            "one box, one pass or two passes"
        )
    };
    // SAFETY: forwarded to each pass (function contract).
    unsafe {
        store_pass::<O, A, 0>(acc, target, value);
        if A::REGS > PASS_REGS {
            store_pass::<O, A, 1>(acc, target, value);
        }
    }
}

/// Pass `PASS` of [`store_staged`]: columns `PASS·PASS_COLS ..` of the block.
///
/// # Safety
/// As for [`store_staged`].
#[inline(always)]
unsafe fn store_pass<O: Output, A: Accumulator<Elem = f32>, const PASS: usize>(
    acc: &A,
    target: &StagedStore<'_, O>,
    value: impl Fn(u32, u32, f32) -> f32,
) {
    let StagedStore { d_map, staging, barrier, leader, batch, row0, col0 } = *target;
    if leader {
        // The previous pass's stores have finished reading the staging boxes.
        tma::wait_group_read::<0>();
    }
    // SAFETY: all 128 threads of the warpgroup arrive (function contract).
    unsafe { barrier.sync() };
    let t = warpgroup::thread_index_in_place();
    // SAFETY: forwarded (function contract).
    unsafe { stage_pass::<O, A, PASS>(acc, staging, t, value) };
    fence_proxy_async_shared();
    // SAFETY: as above.
    unsafe { barrier.sync() };
    if leader {
        let pass_col0 = col0 + PASS as u32 * PASS_COLS;
        // A 64-column block fills one box of the pass.
        let boxes = if A::REGS < PASS_REGS { A::REGS / BOX_REGS } else { STORE_BOXES };
        for j in 0..boxes as u32 {
            let x = (pass_col0 + j * STORE_BOX_COLS) as i32;
            // SAFETY: the box was written and fenced above; the map matches its type (contract).
            unsafe { tma::store_3d(d_map, x, row0 as i32, batch, &staging.stage(j)) };
        }
        tma::commit_group();
    }
}

/// Rounds `value(row, col, acc)` for the accumulator elements of thread `t` in pass `PASS`'s
/// columns into the staging boxes. Each warp owns 16 rows; every 16 × 16 block (four 8 × 8
/// matrices: two row halves × two column groups, the accumulator's own fragment order) leaves
/// the registers in one `stmatrix.x4`.
///
/// # Safety
/// `staging` belongs to this warpgroup and no TMA store still reads it; the whole warpgroup
/// calls this together; `value` is safe to call for every element.
#[inline(always)]
unsafe fn stage_pass<O: Output, A: Accumulator<Elem = f32>, const PASS: usize>(
    acc: &A,
    staging: &Staging<O>,
    t: u32,
    value: impl Fn(u32, u32, f32) -> f32,
) {
    // Lane l addresses row l % 8 of matrix l / 8: matrices 0/1 are the warp's rows 0–7 / 8–15
    // of the first 8-column group, 2/3 the same rows of the next group.
    let (warp, lane) = (t / 32, t % 32);
    let row = 16 * warp + lane % 8 + 8 * ((lane / 8) % 2);
    let row_bytes = row * 128;
    // 128-byte swizzle: 16-byte chunk `c` of row `r` sits at chunk `c ^ (r % 8)`. The chunk of
    // column group `2q + lane / 16` is `2q ^ (lane / 16)` (2q even), so one XOR per store.
    let chunk_xor = ((lane / 16) ^ (lane % 8)) * 16;
    let mut words = [0u32; 4];
    let mut low = 0.0f32;
    acc.for_each(|i, v| {
        // Registers PASS·PASS_REGS.. hold exactly this pass's columns (`acc_coord`: 8 columns
        // per 4 registers); `i` is a constant in the unrolled body, so this test folds away.
        if i / PASS_REGS != PASS {
            return;
        }
        let (r, c) = acc_coord(t, i as u32);
        let x = value(r, c, v);
        if i % 2 == 0 {
            low = x;
            return;
        }
        // Registers 2j and 2j+1 hold columns c-1 and c of one row; four pairs make a 16 × 16
        // block: (row half, column group) = (0,0), (1,0), (0,1), (1,1).
        words[(i % 8) / 2] = O::staged_pair(low, x);
        if i % 8 == 7 {
            let q = ((i % PASS_REGS) / 8) as u32; // 16-column block of the pass, 0..8
            let boxed = staging.stage(q / 4);
            let addr = boxed.addr() + row_bytes + (((2 * (q % 4)) * 16) ^ chunk_xor);
            // SAFETY: the whole warp is here (the warpgroup calls this together); each lane's
            // address is a 16-byte chunk of this warpgroup's staging box, which no pending
            // store reads (function contract).
            unsafe { warp::store_matrices_x4(addr, words) };
        }
    });
}

/// A row-major D written element by element: base, row pitch and batch stride (elements), and
/// its extent (elements outside are not written).
#[derive(Clone, Copy)]
pub struct DirectStore<O> {
    /// Device address of D.
    pub d: *mut O,
    /// Row stride, elements.
    pub ld: u64,
    /// Batch stride, elements.
    pub batch_stride: u64,
    /// Rows of D.
    pub rows: u32,
    /// Columns of D.
    pub cols: u32,
}

/// Writes this warpgroup's 64 × N block at (`row0`, `col0`) of `batch` with direct stores:
/// `value(row, col, acc)` for the elements inside D (`row`, `col` relative to the block).
///
/// # Safety
/// `target` describes memory valid for every element inside its extent; `value` is safe to call
/// for those elements.
#[inline(always)]
pub unsafe fn store_direct<O: Output, A: Accumulator<Elem = f32>>(
    acc: &A,
    target: &DirectStore<O>,
    (batch, row0, col0): (u32, u32, u32),
    value: impl Fn(u32, u32, f32) -> f32,
) {
    let t = warpgroup::thread_index_in_place();
    let d_batch = batch as u64 * target.batch_stride;
    acc.for_each(|i, v| {
        let (r, c) = acc_coord(t, i as u32);
        let (row, col) = (row0 + r, col0 + c);
        if row >= target.rows || col >= target.cols {
            return;
        }
        let x = O::from_f32(value(r, c, v));
        // SAFETY: an element inside D's extent (function contract).
        unsafe { *target.d.add((d_batch + row as u64 * target.ld + col as u64) as usize) = x };
    });
}

/// Writes this warpgroup's 64 × N block of a 16-bit output as column pairs, one row at a time:
/// `row(r)` is the address of element 0 of block row `r` (< 64), or `None` for a row not to
/// be written. Each thread asks for its two rows once and stores its `N / 8` pairs of each at
/// constant offsets from them (column `8j + 2 · (lane % 4)` is 4-byte word `4j + lane % 4` of
/// the row), so a store costs its conversion and the store itself: no per-element address
/// arithmetic or bounds test, one branch per row.
///
/// # Safety
/// The whole warpgroup, after the wait covering every wgmma writing `acc`. Every address
/// `row` returns is 4-byte aligned and valid for writes of `A::N` elements of `O`; `O` is a
/// 16-bit output (its staged pair is the stored pair).
#[inline(always)]
pub unsafe fn store_row_pairs<O: Output, A: Accumulator<Elem = f32>>(acc: &A, row: impl Fn(u32) -> Option<*mut O>) {
    const { assert!(core::mem::size_of::<O>() == 2, "16-bit outputs: a pair is one 4-byte word") };
    let t = warpgroup::thread_index();
    let quad_word = (t % 4) as usize;
    // Registers 4j + 2h and 4j + 2h + 1 are columns 8j + 2 · (lane % 4) and the next one of
    // row `top + 8h` (`acc_coord`); `half` is a constant at both calls, so the register test
    // below folds away.
    let store_half = |half: usize| {
        if let Some(base) = row(acc_thread_row(t) + 8 * half as u32) {
            let words = base.cast::<u32>();
            let mut low = 0.0;
            acc.for_each(|i, v| {
                if (i / 2) % 2 != half {
                    return;
                }
                if i % 2 == 0 {
                    low = v;
                } else {
                    // SAFETY: word `4j + lane % 4` of a row valid for `A::N` 16-bit elements
                    // (contract; `4j + 3 < A::N / 2`).
                    unsafe { words.add(4 * (i / 4) + quad_word).write(O::staged_pair(low, v)) };
                }
            });
        }
    };
    store_half(0);
    store_half(1);
}

/// Combines the two 8-column halves of every 16-column block of `acc`: column `16b + c` and
/// column `16b + 8 + c` (`c < 8`) become column `8b + c` of the half-width tile `H`, as
/// `f(first, second)`. Each thread holds both inputs of each of its outputs (four registers
/// apart), and the outputs land in `H`'s own fragment layout: no data moves between threads.
///
/// A dual GEMM whose B rows come in blocks of 8 "first" rows then 8 "second" rows (gate and up
/// projections, say) gets its pairs this way.
#[inline(always)]
pub fn pair_columns<A, H>(acc: &A, f: impl Fn(f32, f32) -> f32) -> H
where
    A: Accumulator<Elem = f32>,
    H: Accumulator<Elem = f32>,
{
    const { assert!(2 * H::REGS == A::REGS && 2 * H::N == A::N, "H is half as wide as A") };
    // Output register 4b + k (k < 4) is column 8b + 2q + k % 2; its inputs are registers
    // 8b + k (column 16b + 2q + k % 2) and 8b + 4 + k (8 columns further), `acc_coord`.
    H::from_fn(|o| {
        let (block, k) = (o / 4, o % 4);
        f(acc.get(8 * block + k), acc.get(8 * block + 4 + k))
    })
}

/// An f32 accumulator tile with a half-width twin, the result type of [`pair_columns`].
pub trait Halves: Accumulator<Elem = f32> {
    /// The tile of the same rows and half the columns.
    type Half: Accumulator<Elem = f32>;
}

macro_rules! halves {
    ($($full:ident => $half:ident),*) => {$(
        impl Halves for crate::warpgroup::acc::$full {
            type Half = crate::warpgroup::acc::$half;
        }
    )*};
}
halves!(Acc64x256F32 => Acc64x128F32, Acc64x128F32 => Acc64x64F32, Acc64x64F32 => Acc64x32F32);
