//! How a consumer warpgroup of the sm_90 GEMM writes its 64 × N accumulator block (N = 256 or
//! 128) to D:
//! staged through shared memory with `stmatrix` and stored by TMA (16-bit D with a TMA-able
//! pitch), or written element by element (any other D). Both apply the epilogue math of
//! [`crate::gemm_epilogue`].

use warpforge_dsl::abi::gemm_sm90::{A_BOX_ROWS, EPILOGUE_COLS, STORE_BOX_COLS};
use warpforge_dsl::abi::{GemmParams, TensorMap};
use warpforge_dsl::logic::fragment::acc_coord;
use warpforge_dsl::sync::{NamedBarrier, fence_proxy_async_shared};
use warpforge_dsl::tile::{SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::{self, acc::Accumulator};
use warpforge_dsl::{tma, warp};

use crate::gemm_epilogue::{Output, finish};

/// One consumer warpgroup's 64 × EPILOGUE_COLS pass of its output block, as 64 × 64 TMA store
/// boxes.
pub type Staging<O> =
    SmemTileRing<<O as Output>::Staged, { A_BOX_ROWS as usize }, STORE_COLS, Swizzle128B, STORE_BOXES>;
const STORE_COLS: usize = STORE_BOX_COLS as usize;
const STORE_BOXES: usize = (EPILOGUE_COLS / STORE_BOX_COLS) as usize;
/// Accumulator registers per epilogue pass (two per column of a thread's rows; see `acc_coord`).
const PASS_REGS: usize = (EPILOGUE_COLS / 2) as usize;

/// Writes this warpgroup's 64 × N block through shared memory and TMA stores, in passes of 128
/// columns (two for N = 256, one for N = 128): each pass rounds its values into the two 64 × 64 staging boxes (128-byte
/// swizzle, so the pairs written by a warp land in distinct banks), then one thread stores them
/// asynchronously. The second pass waits only until the first pass's stores have *read* the
/// staging boxes; the global writes overlap the next tile's mainloop, and TMA clips the ragged
/// edges.
///
/// # Safety
/// `target.d_map` is a 3-D map of D (N × M × batch, box 64 × 64 × 1, 128-byte swizzle) of the
/// staged type; `target.staging` belongs to this warpgroup; `target.barrier` counts exactly its
/// 128 threads; the whole warpgroup calls this together; `target.p` as for [`finish`].
#[inline(always)]
pub unsafe fn epilogue_staged<O: Output, A: Accumulator<Elem = f32>>(acc: &A, target: &StagedStore<'_, O>) {
    const { assert!(A::REGS == PASS_REGS || A::REGS == 2 * PASS_REGS, "one or two whole passes") };
    // SAFETY: forwarded to each pass (function contract).
    unsafe {
        epilogue_pass::<O, A, 0>(acc, target);
        if A::REGS > PASS_REGS {
            epilogue_pass::<O, A, 1>(acc, target);
        }
    }
}

/// Where and how one warpgroup's block goes through staging to D: the launch parameters, D's
/// tensor map, this warpgroup's staging boxes and named barrier, whether this thread is the
/// warpgroup's leader, and the block's batch and top-left element of D.
#[derive(Clone, Copy)]
pub struct StagedStore<'a, O: Output> {
    /// The launch parameters (alpha, C, bias, activation).
    pub p: &'a GemmParams,
    /// D's tensor map.
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

/// Pass `PASS` of [`epilogue_staged`]: columns `PASS·EPILOGUE_COLS ..` of the block.
///
/// # Safety
/// As for [`epilogue_staged`].
#[inline(always)]
unsafe fn epilogue_pass<O: Output, A: Accumulator<Elem = f32>, const PASS: usize>(
    acc: &A,
    target: &StagedStore<'_, O>,
) {
    let StagedStore { p, d_map, staging, barrier, leader, batch, row0, col0 } = *target;
    if leader {
        // The previous pass's stores have finished reading the staging boxes.
        tma::wait_group_read::<0>();
    }
    // SAFETY: all 128 threads of the warpgroup arrive (function contract).
    unsafe { barrier.sync() };
    let t = warpgroup::thread_index_in_place();
    if p.c == 0 && p.bias == 0 && p.activation == 0 {
        // The common case gets its own unrolled copy with no per-element branches.
        // SAFETY: forwarded (function contract).
        unsafe { stage_pass::<O, A, PASS>(acc, staging, t, |_, _, v| p.alpha * v) };
    } else {
        // SAFETY: forwarded (function contract).
        unsafe {
            stage_pass::<O, A, PASS>(acc, staging, t, |r, c, v| {
                finish::<O>(p, v, p.alpha, batch as u32, row0 + r, col0 + c)
            })
        };
    }
    fence_proxy_async_shared();
    // SAFETY: as above.
    unsafe { barrier.sync() };
    if leader {
        let pass_col0 = col0 + PASS as u32 * EPILOGUE_COLS;
        for j in 0..STORE_BOXES as u32 {
            let x = (pass_col0 + j * STORE_BOX_COLS) as i32;
            // SAFETY: the box was written and fenced above; the map matches its type (contract).
            unsafe { tma::store_3d(d_map, x, row0 as i32, batch, &staging.stage(j)) };
        }
        tma::commit_group();
    }
}

/// Rounds `value(row, col, acc)` for the accumulator elements of thread `t` in pass `PASS`'s
/// columns into the staging boxes (`row` and `col` relative to the warpgroup's block). Each
/// warp owns 16 rows; every 16 × 16 block (four 8 × 8 matrices: two row halves × two column
/// groups, the accumulator's own fragment order) leaves the registers in one `stmatrix.x4`.
///
/// # Safety
/// `staging` belongs to this warpgroup and no TMA store still reads it; the whole warpgroup
/// calls this together; `value` is safe to call for every element (it is `finish`, whose
/// contract the caller upholds, or plain arithmetic).
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

/// Writes this warpgroup's 64 × N block at (`row0`, `col0`) of `batch` with direct stores
/// (any output type and pitch; the fallback when D cannot be written by TMA).
///
/// # Safety
/// `p.d` valid for every in-bounds element; `p` as for [`finish`].
#[inline(always)]
pub unsafe fn epilogue<O: Output, A: Accumulator<Elem = f32>>(
    acc: &A,
    p: &GemmParams,
    batch: u32,
    row0: u32,
    col0: u32,
) {
    let t = warpgroup::thread_index_in_place();
    let d = p.d as *mut O;
    let d_batch = batch as u64 * p.stride_d;
    acc.for_each(|i, value| {
        let (r, col) = acc_coord(t, i as u32);
        let (row, col) = (row0 + r, col0 + col);
        if row >= p.m || col >= p.n {
            return;
        }
        // SAFETY: forwarded (function contract).
        let v = unsafe { finish::<O>(p, value, p.alpha, batch, row, col) };
        // SAFETY: in-bounds element of D (function contract).
        unsafe { *d.add((d_batch + row as u64 * p.ldd + col as u64) as usize) = O::from_f32(v) };
    });
}
