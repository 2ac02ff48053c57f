//! Hardware probes of warpforge's DSL: one kernel per TMA, mbarrier, cluster and wgmma form,
//! and per piece of the kernel-author vocabulary (reductions, math, vectors, FP8 conversions,
//! register arrays), that the GPU tests check against a host model.
//!
//! A test-only module: the root crate's build script builds it next to the kernel library and
//! embeds it as `warpforge::ptx::CHECKS`, which only the tests load (`Warpforge` never does,
//! so a service's module carries only the library's kernels). Like the library, these files
//! use only the DSL's L1+ layers, never `ptx::`.
#![no_std]
#![feature(abi_ptx)]

#[cfg(warpforge_arch = "sm_90a")]
pub mod dsl_vocab_checks;
#[cfg(warpforge_arch = "sm_90a")]
pub mod hopper_async_checks;
#[cfg(warpforge_arch = "sm_90a")]
pub mod rows_checks;
#[cfg(warpforge_arch = "sm_90a")]
pub mod wgmma_checks;
