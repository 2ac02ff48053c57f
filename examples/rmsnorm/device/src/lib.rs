//! A kernel author's device crate on warpforge's DSL: a fused RMSNorm (`rmsnorm.rs`, every arch)
//! written in the DSL's vocabulary, and for Hopper a small GEMM from the DSL's shared parts and
//! the shared tile descriptions (`gemm.rs`). `abi.rs` is what the host and the kernels agree on;
//! the launching binary compiles the same file.
#![no_std]
#![feature(abi_ptx)]

pub mod abi;
// wgmma and TMA are Hopper's: the builder sets `warpforge_arch` per module.
#[cfg(warpforge_arch = "sm_90a")]
mod gemm;
mod rmsnorm;

/// The logic crate under the name the shared `abi.rs` uses on both sides.
use warpforge_dsl::logic;
