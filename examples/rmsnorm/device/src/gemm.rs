//! `D = A·Bᵀ` in bf16 (f32 accumulation): a small Hopper GEMM from warpforge's shared parts
//! (`warpforge_dsl::parts::{mainloop, epilogue}`) and the shared tile descriptions of `abi.rs`.
//!
//! Algorithm: one CTA per 64 × 128 tile of D (grid `N/128 × M/64`, not persistent). A (M × K)
//! and B (N × K) are K-major, read by TMA in 64-wide K slices into a 4-stage ring under 128-byte
//! swizzle; boxes past the edges are zero-filled, so ragged M, N and K need no padding.
//!
//! Warp roles (256 threads): warpgroup 0 is the producer (one elected thread fills the ring
//! with [`produce`]); warpgroup 1 the consumer (`wgmma.m64n128k16` through a [`Consumer`], one
//! group in flight), which then writes its tile with [`store_direct`].
//!
//! Shared memory: the plan `abi::GEMM_SMEM` (4 × (8 + 16) KiB of ring and its barriers), which
//! the host launches with. An example of the parts, not a tuned kernel: it has no measurements.

use warpforge_dsl::abi::TensorMap;
use warpforge_dsl::kernel;
use warpforge_dsl::mbarrier::Mbarrier;
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::epilogue::{DirectStore, store_direct};
use warpforge_dsl::parts::mainloop::{Consumer, OwnCta, SsStage, StageRelease, produce};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::sync_threads;
use warpforge_dsl::thread::{block_idx, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{RingOf, TileOf};
use warpforge_dsl::warpgroup::{self, acc::Acc64x128F32};
use warpforge_dsl::{tma, warp};

use crate::abi::{GEMM_BLOCK_K, GEMM_BLOCK_M, GEMM_BLOCK_N, GEMM_STAGES, GemmATile, GemmBTile, GemmParams};

const RING: usize = GEMM_STAGES as usize;

/// `D = A·Bᵀ`; see the module docs.
///
/// # Safety
/// `a_map` describes A (K × M) and `b_map` B (K × N), built for [`GemmATile`] and
/// [`GemmBTile`] (`TensorMapBuilder::for_tile`); `p.d` addresses D, valid for every element
/// inside `p.m × p.n` at row pitch `p.ldd`; all stay valid for the launch. 256 threads, a grid
/// covering D's tiles, and `GEMM_SMEM.launch_bytes()` of dynamic shared memory.
#[kernel(threads = 256, min_blocks_per_sm = 1)]
pub unsafe fn gemm_bf16_tn(#[grid_constant] a_map: &TensorMap, #[grid_constant] b_map: &TensorMap, p: GemmParams) {
    // Shared-memory plan: `abi::GEMM_SMEM`, in its order.
    let mut smem = DynamicShared::window();
    let a_ring = RingOf::<GemmATile, RING>::alloc(&mut smem);
    let b_ring = RingOf::<GemmBTile, RING>::alloc(&mut smem);
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(a_map);
        tma::prefetch(b_map);
        // SAFETY: one thread; the one consumer warpgroup releases each slot once per lap.
        unsafe { pipe.init(OwnCta::CTAS) };
    }
    // SAFETY: all 256 threads reach this barrier.
    unsafe { sync_threads() };

    let (m0, n0) = (block_idx().y * GEMM_BLOCK_M, block_idx().x * GEMM_BLOCK_N);
    let slices = p.k.div_ceil(GEMM_BLOCK_K).max(1);
    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let mut state = PipelineState::<RING>::START;
            let load = |stage: u32, slice: u32, full: &Mbarrier| {
                let k0 = (slice * GEMM_BLOCK_K) as i32;
                // SAFETY: the maps' boxes are the tiles (kernel contract); `produce` acquired
                // the slot free.
                unsafe {
                    tma::load_2d(&a_ring.stage(stage), a_map, k0, m0 as i32, full);
                    tma::load_2d(&b_ring.stage(stage), b_map, k0, n0 as i32, full);
                }
            };
            // SAFETY: the one producer thread; each slot gets the A and the B box, exactly the
            // stage type's bytes (whole boxes, out-of-bounds elements zero).
            unsafe { produce::<(TileOf<GemmATile>, TileOf<GemmBTile>), RING>(&pipe, &mut state, 0..slices, load) };
        }
        return;
    }

    // Consumer.
    let mut consumer = Consumer::new(pipe, OwnCta, warpgroup::thread_index() == 0);
    // SAFETY: the whole warpgroup, convergently; the producer fills these slots in order.
    let acc: Acc64x128F32 = unsafe { consumer.mainloop(slices, &SsStage { a: a_ring, b: b_ring }) };
    // SAFETY: the whole warpgroup, once after the main loop; `acc` is readable after it.
    unsafe { consumer.drain() };
    let d = DirectStore { d: p.d as *mut Bf16, ld: p.ldd as u64, batch_stride: 0, rows: p.m, cols: p.n };
    // SAFETY: D is valid for every element inside m × n at pitch `ldd` (kernel contract).
    unsafe { store_direct(&acc, &d, (0, m0, n0), |_, _, acc| acc) };
}
