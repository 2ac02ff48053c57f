//! L3 parts: the pieces every GEMM-like Hopper kernel repeats (and, in [`tcgen05`], the skeleton
//! the Blackwell GEMMs share), generic over traits (never over one kernel's parameter struct),
//! public so an outside device crate builds from them too.
//!
//! A persistent warp-specialised kernel is these parts in a fixed order: a smem plan, barrier
//! init, the register split, then per role a loop over its worker's units from a
//! [`schedule::TileScheduler`]: the producer fills the ring with [`mainloop::produce`], each
//! consumer warpgroup multiplies with a [`mainloop::Consumer`] (its per-K-block hook is a
//! [`mainloop::StageMma`]; [`blockscaled`] is the FP8 issue-and-promote one, and [`turns`] orders
//! two consumers' issues) and hands its accumulator to an epilogue: [`epilogue::store_staged`]
//! or [`epilogue::store_direct`] with the kernel's element math (after register-tile ops such
//! as [`epilogue::pair_columns`]), or a [`stream_k::PartialSlots`] hand-over. Row-wise register-tile
//! ops (row max/sum, row scale, exp2, masks, accumulator → RS A fragment) are [`rows`].

pub mod blockscaled;
pub mod epilogue;
pub mod mainloop;
pub mod rows;
pub mod schedule;
pub mod stream_k;
pub mod tcgen05;
pub mod turns;
