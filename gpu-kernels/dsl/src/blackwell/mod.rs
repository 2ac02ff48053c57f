//! Blackwell (sm_100a) typed layer: Tensor Memory, tcgen05 MMA issue, and cluster-launch-control
//! scheduling. Compile-verified with ptxas for sm_100a; no Blackwell GPU has run it.
//!
//! * [`tmem`] — allocation owned by one warp, publication, accumulator views and loads;
//! * [`umma`] — `tcgen05.mma` (dense, block-scaled), `tcgen05.commit`, scale-factor copies;
//! * [`clc`] — the CLC response ring and per-warp cursors over `logic::clc::ClcScheduler`.

pub mod clc;
pub mod tmem;
pub mod umma;

/// `ring[stage]` without a dynamic index: a ring of per-stage handles (tiles, addresses) indexed
/// by the runtime pipeline stage would make LLVM spill the array to local memory; this unrolled
/// select chain keeps every element in registers.
#[inline(always)]
pub fn select_stage<T: Copy, const N: usize>(ring: &[T; N], stage: u32) -> T {
    let mut chosen = ring[0];
    let mut i = 1;
    while i < N {
        if stage as usize == i {
            chosen = ring[i];
        }
        i += 1;
    }
    chosen
}
