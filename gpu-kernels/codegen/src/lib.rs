//! Generators for the PTX instruction families too wide to write by hand.
//!
//! Each generator renders one file under `gpu-kernels/dsl/src/ptx/generated/` from a table of the
//! forms that exist; a test fails when the committed file differs from the generator's output, and
//! `WARPFORGE_BLESS=1 cargo test -p warpforge-codegen` rewrites it.

pub mod tcgen05;
