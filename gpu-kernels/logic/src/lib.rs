//! Pure logic shared by device and host: one copy, tested on the CPU.
//!
//! Everything here is plain `no_std` Rust with no `asm!` and no allocation, so the same source
//! compiles into the PTX kernels (through `warpforge-dsl`) and into the host crates and tests.
//! That is the point of the crate: a tile scheduler, a swizzle or a descriptor encoding is
//! property-tested on the host and the kernels run exactly the code that was tested.
#![no_std]
// The fused multiply-add of `quant::fma`: core's, unstable, on the device (whose build is
// nightly) and in the tests (which compare the host's exact software fma with it); a stable
// host build, a service embedding the shipped PTX, takes the software one.
#![cfg_attr(any(target_arch = "nvptx64", test), feature(core_float_math))]

pub mod acc_rows;
pub mod attention;
pub mod attention_decode;
pub mod blockscaled;
pub mod clc;
pub mod fragment;
pub mod kernel_attrs;
pub mod pipeline_ring;
pub mod quant;
pub mod schedule;
pub mod swizzle;
pub mod tcgen05_desc;
pub mod tile_spec;
pub mod wgmma_desc;

#[cfg(test)]
extern crate std;
