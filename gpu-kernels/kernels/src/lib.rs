//! warpforge's kernel library, one file per kernel family.
//!
//! Built by the root crate's build script into one PTX module per architecture
//! (`warpforge_arch = "sm_90a"` / `"sm_100a"`); the host launches the entries by the names in
//! `warpforge_abi::entries`. Kernels here use only the DSL's L1+ layers, never `ptx::`.
#![no_std]
#![feature(abi_ptx)]

#[cfg(warpforge_arch = "sm_90a")]
pub mod attention_decode_sm90;
#[cfg(warpforge_arch = "sm_90a")]
pub mod attention_sm90;
#[cfg(warpforge_arch = "sm_90a")]
mod attention_sm90_consumer;
#[cfg(warpforge_arch = "sm_90a")]
pub mod attention_sm90_entries;
#[cfg(warpforge_arch = "sm_90a")]
mod attention_sm90_parts;
#[cfg(warpforge_arch = "sm_100a")]
pub mod clc_visit_sm100;
pub mod elementwise;
#[cfg(warpforge_arch = "sm_100a")]
pub mod gemm_bf16_tcgen05_clc_sm100;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_bf16_ws_persistent_sm90;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_decode_sm90;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_epilogue;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_fp8_blockscaled_sm90;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_grouped_sm90;
#[cfg(warpforge_arch = "sm_100a")]
pub mod gemm_mxf8_blockscaled_sm100;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_skinny_sm90;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_sm90_ctas;
#[cfg(warpforge_arch = "sm_90a")]
pub mod gemm_swiglu_sm90;
pub mod pack;
pub mod persistent_visit;
pub mod quant;
pub mod quant_block;
pub mod quant_mx;
pub mod quant_tensor;
pub mod reduce;
