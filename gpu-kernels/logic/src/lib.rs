//! Pure logic shared by device and host: one copy, tested on the CPU.
//!
//! Everything here is plain `no_std` Rust with no `asm!` and no allocation, so the same source
//! compiles into the PTX kernels (through `warpforge-dsl`) and into the host crates and tests.
//! That is the point of the crate: a tile scheduler, a swizzle or a descriptor encoding is
//! property-tested on the host and the kernels run exactly the code that was tested.
#![no_std]
#![feature(core_float_math)]

pub mod acc_rows;
pub mod attention;
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
