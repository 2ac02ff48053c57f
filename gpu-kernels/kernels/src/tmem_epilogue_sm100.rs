//! The Blackwell (sm_100a) GEMM epilogue shared by the tcgen05 kernels: the epilogue warps'
//! loop that drains each finished TMEM accumulator buffer into a row-major bf16 C, and the
//! linear-tile → output-origin mapping every role of those kernels agrees on.
//!
//! Both `gemm_bf16_tcgen05_clc_sm100` and `gemm_mxf8_blockscaled_sm100` accumulate f32 in a ring
//! of TMEM buffers published by `tcgen05.commit` and schedule tiles with cluster launch control;
//! only the tile width differs, so the loop is generic over `BLK_N` and takes the accumulator
//! ring and CLC pipeline it synchronises on instead of a kernel's private smem plan.

use warpforge_dsl::blackwell::clc::{ClcCursor, ClcPipeline};
use warpforge_dsl::blackwell::tmem::{Tmem32x32b, TmemAccumulator};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::thread::lane_id;
use warpforge_dsl::warp::Elected;

/// Columns per epilogue load: `32x32b.x32` = 32 registers per thread.
const EPILOGUE_CHUNK: u32 = 32;

/// Output tile origin (m0, n0) of linear tile `t` for tiles of `BLK_M` × `BLK_N`, row-major
/// over `tiles_n` tile columns.
#[inline(always)]
pub fn tile_origin<const BLK_M: u32, const BLK_N: u32>(t: u32, tiles_n: u32) -> (u32, u32) {
    ((t / tiles_n) * BLK_M, (t % tiles_n) * BLK_N)
}

/// Epilogue warps: per tile, wait for the accumulator buffer on `acc_ring`, read the warp's 32
/// rows in chunks of 32 columns, convert to bf16 and store the in-bounds part of the tile into
/// `c` (M × N, row-major), then hand the buffer back and follow the CLC response ring.
///
/// Each calling warp contributes one arrival per lap to `acc_ring`'s empty barrier (through its
/// `elected` lane) and reads every CLC response, so the kernel initialises `acc_ring` with the
/// number of epilogue warps and `clc` with a reader count that includes them.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn store_tiles<const BLK_M: u32, const BLK_N: u32, const ACC_BUFFERS: usize, const CLC_SLOTS: usize>(
    acc_ring: &Pipeline<ACC_BUFFERS>,
    clc: &ClcPipeline<CLC_SLOTS>,
    cursor: &mut ClcCursor<CLC_SLOTS>,
    elected: Option<&Elected>,
    acc: TmemAccumulator<BLK_N>,
    c: *mut Bf16,
    m: u32,
    n: u32,
    tiles_n: u32,
) {
    let mut acc_state = PipelineState::<ACC_BUFFERS>::START;
    while let Some(tile) = cursor.tile() {
        let (m0, n0) = tile_origin::<BLK_M, BLK_N>(tile, tiles_n);
        acc_ring.consumer_wait(acc_state);
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
            unsafe { acc_ring.consumer_release(acc_state) };
        }
        acc_state.advance();
        // SAFETY: reader warp, once per tile, converged.
        unsafe { cursor.advance(clc, elected) };
    }
}
