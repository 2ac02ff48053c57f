//! L3 skeleton of a Blackwell (sm_100a) tcgen05 GEMM: TMA → shared-memory ring → `tcgen05.mma`
//! into Tensor Memory → `tcgen05.ld` epilogue, one CTA per output tile launched and tiles
//! stolen with cluster launch control (CLC). **Compile-verified**: it assembles with ptxas for
//! sm_100a; no Blackwell GPU has run it.
//!
//! A kernel supplies what differs between GEMMs — its ring's contents, the TMA loads of one
//! K block and the MMAs that read them — as an [`UmmaMainloop`], carves its operand rings from
//! the dynamic shared-memory window, and calls [`gemm`] with the rest of the window. The
//! skeleton carves the barriers, allocates TMEM, runs the three roles and frees TMEM:
//!
//! | warp | role |
//! | --- | --- |
//! | 0 | TMA producer (elected lane) and CLC issuer |
//! | 1 | TMEM owner and MMA issuer (elected lane) |
//! | 2–5 | epilogue: TMEM lane quarter `warp % 4` → 32 rows each, bf16 stores to global |
//!
//! All six warps read every CLC response. Pipelines: the smem ring of `STAGES` (full: TMA bytes
//! of [`UmmaMainloop::Stage`]; empty: `tcgen05.commit` of the MMAs that read the stage); an
//! accumulator ring of [`ACC_BUFFERS`] TMEM buffers (full: commit after the tile's last MMA;
//! empty: one arrival per epilogue warp), so the epilogue of tile i overlaps the MMAs of tile
//! i+1; a CLC ring of [`CLC_SLOTS`] responses.
//!
//! Memory ordering on the per-tile path: no GPU-scope fence. CLC readers hand a response slot
//! back to the cluster's rank 0 with a CTA-scope release (`ClcCursor::advance`): they only read
//! the slot, and its next writer is the async proxy behind a proxy fence, so a cluster-scope
//! release (`MEMBAR.ALL.GPU` in the SASS) would buy nothing. The two cluster-scope releases
//! that remain are the barrier-init fence and the cluster barriers, once per CTA.
//!
//! Launch contract: grid = ⌈M/BLK_M⌉ · ⌈N/BLK_N⌉ CTAs (x), [`THREADS`] threads, cluster 1;
//! dynamic shared memory for the kernel's rings plus [`SKELETON_SMEM_BYTES`] plus up to 1 KiB
//! of alignment. Partial tiles are zero-filled by TMA and masked in the epilogue.

use crate::blackwell::clc::{ClcCursor, ClcPipeline};
use crate::blackwell::tmem::{Tmem, Tmem32x32b, TmemAccumulator, TmemAddr, TmemOwner};
use crate::blackwell::umma;
use crate::mbarrier::Mbarrier;
use crate::num::Bf16;
use crate::pipeline::{Pipeline, PipelineState, TmaLoad};
use crate::shared::DynamicShared;
use crate::sync::sync_threads;
use crate::thread::{lane_id, thread_rank, warp_id};
use crate::warp::{Elected, elect_one};

/// Threads per CTA: producer warp, MMA warp, four epilogue warps.
pub const THREADS: u32 = 192;
/// TMEM accumulator buffers (double buffering across tiles).
pub const ACC_BUFFERS: usize = 2;
/// CLC response slots.
pub const CLC_SLOTS: usize = 2;
/// TMEM columns allocated: all 512 (allocations are powers of two; the accumulators and any
/// operand columns of the kernel, e.g. block scales, share them).
pub const TMEM_COLS: u32 = 512;
/// Shared memory the skeleton carves after the kernel's rings (barriers, CLC slots, the TMEM
/// address), a bound for the launch size.
pub const SKELETON_SMEM_BYTES: u32 = 512;

const PRODUCER_WARP: u32 = 0;
const MMA_WARP: u32 = 1;
const EPILOGUE_WARPS: u32 = 4;
const READER_WARPS: u32 = 2 + EPILOGUE_WARPS;
/// Columns per epilogue load: `32x32b.x32` = 32 registers per thread.
const EPILOGUE_CHUNK: u32 = 32;

/// What one tcgen05 GEMM loads and multiplies per K block: the kernel's half of the skeleton.
pub trait UmmaMainloop {
    /// The tiles one ring slot holds (its TMA byte count is announced from this type).
    type Stage: TmaLoad;

    /// Issues the TMA loads of K block `kb` of the tile at (`m0`, `n0`) into ring slot `slot`,
    /// completing on `full`.
    ///
    /// # Safety
    /// The producer's elected thread; the slot is free (its empty barrier completed) and `full`
    /// expects exactly `Self::Stage`'s bytes.
    unsafe fn load(&self, slot: u32, kb: u32, m0: u32, n0: u32, full: &Mbarrier);

    /// Issues the MMAs of ring slot `slot` into the accumulator at `d` (`first`: the tile's
    /// first K block, whose first MMA overwrites `d`).
    ///
    /// # Safety
    /// The MMA warp's elected thread; the slot's data has landed (full barrier) and `d` was
    /// drained by the epilogue; `tmem` is the skeleton's allocation.
    unsafe fn mma(&self, e: &Elected, tmem: Tmem<TMEM_COLS>, slot: u32, d: TmemAddr, first: bool);
}

/// Output tile origin (m0, n0) of linear tile `t` for tiles of `BLK_M` × `BLK_N`, row-major
/// over `tiles_n` tile columns.
#[inline(always)]
pub fn tile_origin<const BLK_M: u32, const BLK_N: u32>(t: u32, tiles_n: u32) -> (u32, u32) {
    ((t / tiles_n) * BLK_M, (t % tiles_n) * BLK_N)
}

/// The barrier rings every role shares, carved after the kernel's operand rings.
struct Rings<const STAGES: usize> {
    ring: Pipeline<STAGES>,
    acc_ring: Pipeline<ACC_BUFFERS>,
    clc: ClcPipeline<CLC_SLOTS>,
}

/// C (M × N, bf16, row-major) = the kernel's product over `k` in blocks of `BLK_K`, tiles of
/// `BLK_M` × `BLK_N` accumulated in f32 in TMEM; see the module doc for roles and contract.
///
/// # Safety
/// Every thread of a CTA launched as the module doc states calls it once, with `smem` the rest
/// of the dynamic window after `mainloop`'s rings (carved identically by every thread); `c`
/// points to M × N bf16; `mainloop`'s loads stay inside its tensors.
#[inline(always)]
pub unsafe fn gemm<L: UmmaMainloop, const BLK_M: u32, const BLK_N: u32, const BLK_K: u32, const STAGES: usize>(
    mut smem: DynamicShared,
    mainloop: &L,
    c: *mut Bf16,
    m: u32,
    n: u32,
    k: u32,
) {
    const { assert!(BLK_M == 128, "the epilogue reads TMEM layout D: 128 rows, one per lane") };
    const { assert!(ACC_BUFFERS as u32 * BLK_N <= TMEM_COLS, "accumulators exceed TMEM") };
    // SAFETY: every thread carves the same plan in the same order.
    let (ring, acc_ring) = unsafe { (Pipeline::alloc(&mut smem), Pipeline::alloc(&mut smem)) };
    let clc = ClcPipeline::alloc(&mut smem);
    let tmem_slot = smem.alloc::<u32>(1, 4);
    let rings = Rings::<STAGES> { ring, acc_ring, clc };

    // ---- barrier init and TMEM allocation
    let warp = warp_id();
    if thread_rank() == 0 {
        // SAFETY: one thread, before the block barrier below.
        unsafe {
            rings.ring.init(1);
            rings.acc_ring.init(EPILOGUE_WARPS);
            rings.clc.init(READER_WARPS);
        }
    }
    // SAFETY: the whole MMA warp; the slot is reserved for it; nothing else allocates.
    let owner = if warp == MMA_WARP { Some(unsafe { TmemOwner::<TMEM_COLS>::allocate(tmem_slot) }) } else { None };
    // SAFETY: every thread reaches this barrier.
    unsafe { sync_threads() };
    // SAFETY: the barrier above published the allocation.
    let tmem = unsafe { Tmem::<TMEM_COLS>::published(tmem_slot) };

    // ---- persistent loop per role
    let tiles_n = n.div_ceil(BLK_N);
    let k_blocks = k.div_ceil(BLK_K);
    // SAFETY: all 32 lanes of every warp are converged here.
    let elected = unsafe { elect_one() };
    let mut cursor = ClcCursor::<CLC_SLOTS>::start();
    match warp {
        PRODUCER_WARP => {
            produce::<L, BLK_M, BLK_N, STAGES>(&rings, mainloop, &mut cursor, elected.as_ref(), tiles_n, k_blocks)
        }
        MMA_WARP => issue_mmas::<L, BLK_N, STAGES>(&rings, mainloop, &mut cursor, elected.as_ref(), tmem, k_blocks),
        _ => store_tiles::<BLK_M, BLK_N, STAGES>(&rings, &mut cursor, elected.as_ref(), tmem, c, m, n, tiles_n),
    }

    // ---- teardown: every TMEM reader fenced before its last arrival; then free TMEM
    // SAFETY: every thread reaches this barrier.
    unsafe { sync_threads() };
    if let Some(owner) = owner {
        // SAFETY: the allocating warp, after all TMEM traffic completed (barrier above).
        unsafe { owner.deallocate(tmem) };
    }
}

/// Warp 0: asks CLC for the next tile, then streams the tile's K blocks into the ring.
#[inline(always)]
fn produce<L: UmmaMainloop, const BLK_M: u32, const BLK_N: u32, const STAGES: usize>(
    rings: &Rings<STAGES>,
    mainloop: &L,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    tiles_n: u32,
    k_blocks: u32,
) {
    let mut state = PipelineState::<STAGES>::START;
    while let Some(tile) = cursor.tile() {
        // SAFETY: the only issuing warp, once per tile, before its advance.
        unsafe { cursor.request(&rings.clc, elected) };
        let (m0, n0) = tile_origin::<BLK_M, BLK_N>(tile, tiles_n);
        for kb in 0..k_blocks {
            if elected.is_some() {
                // SAFETY: the one producer thread; the slot the empty barrier handed back, its
                // full barrier armed for exactly `L::Stage`'s bytes.
                unsafe {
                    let full = rings.ring.producer_acquire::<L::Stage>(state);
                    mainloop.load(state.stage, kb, m0, n0, &full);
                }
            }
            state.advance();
        }
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&rings.clc, elected) };
    }
}

/// Warp 1: per tile, waits for a drained accumulator buffer, issues each ring stage's MMAs
/// (each stage freed by a commit) and publishes the buffer with a final commit.
#[inline(always)]
fn issue_mmas<L: UmmaMainloop, const BLK_N: u32, const STAGES: usize>(
    rings: &Rings<STAGES>,
    mainloop: &L,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    tmem: Tmem<TMEM_COLS>,
    k_blocks: u32,
) {
    let acc = tmem.accumulator::<0, BLK_N>();
    let mut state = PipelineState::<STAGES>::START;
    let mut acc_state = PipelineState::<ACC_BUFFERS>::START;
    while cursor.tile().is_some() {
        if let Some(e) = elected {
            rings.acc_ring.producer_wait(acc_state);
            let d = acc.buffer(acc_state.stage);
            d.acquire();
            for kb in 0..k_blocks {
                rings.ring.consumer_wait(state);
                // SAFETY: the stage's TMA data is complete (full barrier); the buffer was drained
                // by the epilogue (empty barrier + fence).
                unsafe { mainloop.mma(e, tmem, state.stage, d.addr(), kb == 0) };
                // SAFETY: the ring's empty barriers expect one arrival per stage and lap.
                unsafe { umma::commit(e, rings.ring.empty(state.stage).addr()) };
                state.advance();
            }
            // SAFETY: the accumulator's full barrier expects this one arrival per lap.
            unsafe { umma::commit(e, rings.acc_ring.full(acc_state.stage).addr()) };
        }
        acc_state.advance();
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&rings.clc, elected) };
    }
}

/// Warps 2–5: per tile, wait for the accumulator buffer, read the warp's 32 rows in chunks of
/// 32 columns, convert to bf16 and store the in-bounds part into `c`; hand the buffer back.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn store_tiles<const BLK_M: u32, const BLK_N: u32, const STAGES: usize>(
    rings: &Rings<STAGES>,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    tmem: Tmem<TMEM_COLS>,
    c: *mut Bf16,
    m: u32,
    n: u32,
    tiles_n: u32,
) {
    let acc = tmem.accumulator::<0, BLK_N>();
    let mut acc_state = PipelineState::<ACC_BUFFERS>::START;
    while let Some(tile) = cursor.tile() {
        let (m0, n0) = tile_origin::<BLK_M, BLK_N>(tile, tiles_n);
        rings.acc_ring.consumer_wait(acc_state);
        let d = acc.buffer(acc_state.stage);
        d.acquire();
        let row = m0 + TmemAccumulator::<BLK_N>::warp_first_row() + lane_id();
        for chunk in 0..BLK_N / EPILOGUE_CHUNK {
            // SAFETY: whole warp; the tile's MMAs completed (full barrier) and were fenced.
            let regs = unsafe { d.warp_rows::<Tmem32x32b<32>>(chunk * EPILOGUE_CHUNK) };
            let col0 = n0 + chunk * EPILOGUE_CHUNK;
            regs.for_each(|j, bits| {
                if row < m && col0 + j < n {
                    // SAFETY: (row, col) is inside the M × N output.
                    unsafe {
                        c.add(row as usize * n as usize + (col0 + j) as usize)
                            .write(Bf16::from_f32(f32::from_bits(bits)))
                    };
                }
            });
        }
        d.release();
        if elected.is_some() {
            // SAFETY: one arrival per epilogue warp per lap, after the warp's last TMEM load.
            unsafe { rings.acc_ring.consumer_release(acc_state) };
        }
        acc_state.advance();
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(&rings.clc, elected) };
    }
}
