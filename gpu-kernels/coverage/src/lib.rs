//! Assembly coverage of warpforge-dsl's raw PTX layer.
//!
//! A wrapper that no kernel calls emits no PTX, so ptxas never sees its spelling. The kernels
//! here call every raw form for the arch they are built for; `tests/builder.rs` builds this
//! crate with warpforge-builder for sm_90a and sm_100a and requires ptxas to accept it.
#![no_std]
#![feature(abi_ptx)]

#[cfg(warpforge_arch = "sm_90a")]
pub mod hopper_l0_forms;
#[cfg(warpforge_arch = "sm_90a")]
pub mod mma_l0_forms;
#[cfg(warpforge_arch = "sm_100a")]
pub mod tcgen05_forms_sm100;
#[cfg(warpforge_arch = "sm_90a")]
pub mod vocab_l0_forms;
