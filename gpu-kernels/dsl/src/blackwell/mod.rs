//! Blackwell (sm_100a) typed layer: Tensor Memory, tcgen05 MMA issue, and cluster-launch-control
//! scheduling. Compile-verified with ptxas for sm_100a; no Blackwell GPU has run it.
//!
//! * [`tmem`] — allocation owned by one warp, publication, accumulator views and loads;
//! * [`umma`] — `tcgen05.mma` (dense, block-scaled), `tcgen05.commit`, scale-factor copies;
//! * [`clc`] — the CLC response ring and per-warp cursors over `logic::clc::ClcScheduler`.

pub mod clc;
pub mod tmem;
pub mod umma;
