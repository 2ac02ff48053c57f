//! FP8 quantisation of a weight in 128 × 128 blocks, e4m3 with one f32 scale per block
//! (`logic::quant::block_scale_index` order), on the vocabulary of `quant`.
//!
//! A persistent grid of 512-thread CTAs walks the blocks (`block_idx, + grid_size, …`, the
//! block's coordinates stepped by a `quant::GridCursor`): 16 threads across a block's 128
//! columns and 32 down its rows, four rows each, held in registers from the load through the
//! block amax (a block reduction of magnitude keys' amax) to the quantised store, with the
//! next block's loads issued before the current block's reduction so the CTA keeps reads in
//! flight through it. Ragged edge blocks load and store only what lies inside the matrix.

use warpforge_dsl::block::ReduceScratch;
use warpforge_dsl::global::{self, ReadOnlyNoL1};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::quant as q;
use warpforge_dsl::num::{Bf16, E4m3, F16};
use warpforge_dsl::regs::{RegArray, Regs4};
use warpforge_dsl::thread::{block_idx, grid_size, thread_rank};

use crate::quant::{AmaxKey, Input16, VEC, pack8, store8, zero_vector};

/// Threads per weight-block CTA: 16 column vectors × 32 row lanes.
pub const BLOCK_THREADS: u32 = 512;
/// Column vectors across a 128-wide block.
const BLOCK_COL_VECS: u32 = q::BLOCK as u32 / VEC;
/// Rows between a thread's successive vectors (the row lanes).
const BLOCK_ROW_LANES: u32 = BLOCK_THREADS / BLOCK_COL_VECS;

/// One thread's share of a weight block: four vectors (rows `32 · i` apart) and where they go.
#[derive(Clone, Copy)]
struct BlockShare<V> {
    vectors: Regs4<V>,
    /// Element offset of vector 0 in the matrix, and the rows and columns it may still cover.
    offset: u64,
    rows_left: u64,
    inside_cols: bool,
}

impl<V: Copy> BlockShare<V> {
    /// Whether vector `i` lies inside the matrix (else it was never loaded and is not stored).
    #[inline(always)]
    fn inside(&self, i: usize) -> bool {
        self.inside_cols && ((i as u32 * BLOCK_ROW_LANES) as u64) < self.rows_left
    }

    /// Element offset of vector `i`.
    #[inline(always)]
    fn offset(&self, i: usize, cols: u64) -> u64 {
        self.offset + (i as u32 * BLOCK_ROW_LANES) as u64 * cols
    }
}

/// Loads this thread's share of the block at block row `block_row`, block column `block_col`
/// (zeros outside the matrix, and for a block row past the end).
///
/// # Safety
/// `x` is 16-byte aligned, holds `rows · cols` elements (`cols % 8 == 0`), not written during
/// the launch; 512 threads.
#[inline(always)]
unsafe fn load_block_share<T: Input16>(
    rows: u64,
    cols: u64,
    block_row: u32,
    block_col: u32,
    x: *const T,
) -> BlockShare<T::Vector> {
    let t = thread_rank();
    let row = block_row as u64 * q::BLOCK as u64 + (t / BLOCK_COL_VECS) as u64;
    let col = block_col as u64 * q::BLOCK as u64 + (t % BLOCK_COL_VECS * VEC) as u64;
    let mut share = BlockShare {
        vectors: Regs4::from_fn(|_| zero_vector::<T>()),
        offset: row * cols + col,
        rows_left: rows.saturating_sub(row),
        inside_cols: col < cols,
    };
    let copy = share;
    share.vectors.for_each_mut(|i, v| {
        if copy.inside(i) {
            // SAFETY: row + 32 i < rows and col + 8 ≤ cols (cols % 8 == 0): inside x, 16-byte
            // aligned.
            *v = unsafe { global::load::<T::Vector, ReadOnlyNoL1>(x.add(copy.offset(i, cols) as usize)) };
        }
    });
    share
}

/// 128 × 128-block e4m3 quantisation of the `rows × cols` row-major weight `x`; see the
/// module doc.
///
/// # Safety
/// `x` (16-byte aligned, `cols % 8 == 0`) holds `rows · cols ≤ logic::quant::MAX_ELEMENTS`
/// elements, `out` (8-byte aligned) as many bytes, `scales` `ceil(rows/128) · ceil(cols/128)`
/// f32; disjoint; 512 threads.
#[inline(always)]
unsafe fn quant_block<T: Input16>(rows: u64, cols: u64, pow2: u32, x: *const T, out: *mut u8, scales: *mut f32) {
    // SAFETY: declared once, at the top of the kernel.
    let scratch = unsafe { ReduceScratch::<f32>::declare() };
    // Below 2^20 blocks (MAX_ELEMENTS / 128²): 32-bit block indices.
    let block_cols = cols.div_ceil(q::BLOCK as u64) as u32;
    let blocks = (rows.div_ceil(q::BLOCK as u64) as u32) * block_cols;
    let mut cursor = q::GridCursor::new(block_idx().x, grid_size(), block_cols);
    let mut b = block_idx().x;
    // SAFETY: the contract above (rows past the end load nothing).
    let mut share = unsafe { load_block_share(rows, cols, cursor.row, cursor.col, x) };
    while b < blocks {
        cursor.advance();
        // SAFETY: as above; the next block may lie past the end (then nothing is loaded).
        let next = unsafe { load_block_share(rows, cols, cursor.row, cursor.col, x) };
        let mut key = AmaxKey::ZERO;
        share.vectors.for_each(|_, v| key = key.max(AmaxKey::of::<T>(v)));
        // SAFETY: every thread reaches it: `b` is the same across the block.
        let amax = unsafe { scratch.max(key.amax::<T>()) };
        let scale = q::scale_from_amax(amax, E4m3::MAX, pow2 != 0);
        let inverse = 1.0 / scale;
        share.vectors.for_each(|i, v| {
            if share.inside(i) {
                let bytes = pack8::<E4m3>(&T::widen(v).map(|e| e * inverse));
                // SAFETY: the contract above; the offset is this thread's own 8 bytes.
                unsafe { store8(out, (share.offset(i, cols) / VEC as u64) as usize, bytes) };
            }
        });
        if thread_rank() == 0 {
            // SAFETY: b < blocks = the scale count (logic::quant::block_scale_index order).
            unsafe { scales.add(b as usize).write(scale) };
        }
        share = next;
        b += grid_size();
    }
}

/// 128 × 128-block e4m3 quantisation of a bf16 weight (`N × K` row-major, `K % 8 == 0`, ragged
/// edge blocks allowed); see the module doc.
///
/// # Safety
/// As `quant_block`: `x` rows × cols bf16, `out` as many bytes, `scales`
/// `ceil(rows/128) · ceil(cols/128)` f32, disjoint and aligned as stated; 512 threads.
#[kernel(threads = 512)]
pub unsafe fn quant_block_e4m3_bf16(rows: u64, cols: u64, pow2: u32, x: *const Bf16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_block(rows, cols, pow2, x, out, scales) }
}

/// 128 × 128-block e4m3 quantisation of an f16 weight.
///
/// # Safety
/// As [`quant_block_e4m3_bf16`], with f16 input.
#[kernel(threads = 512)]
pub unsafe fn quant_block_e4m3_f16(rows: u64, cols: u64, pow2: u32, x: *const F16, out: *mut u8, scales: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { quant_block(rows, cols, pow2, x, out, scales) }
}
