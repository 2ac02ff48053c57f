//! warpforge's integration tests: one binary, one module per area.
//!
//! CPU tests run everywhere (`cargo test`). GPU tests are `#[ignore = "needs an NVIDIA GPU"]`
//! and run on a GPU machine with `--include-ignored` (see `.ci/gpu-bundle`).

mod common;

mod builder;
mod gpu_attention;
mod gpu_attention_claims;
mod gpu_attention_decode;
mod gpu_attention_strided;
mod gpu_dsl_vocab;
mod gpu_foundation;
mod gpu_fp8_gemm;
mod gpu_fuzz;
mod gpu_gemm;
mod gpu_gemm_swiglu;
mod gpu_gemm_tuned;
mod gpu_graphs;
mod gpu_grouped_gemm;
mod gpu_hopper_async;
mod gpu_quant;
mod gpu_reliability;
mod gpu_soak;
mod gpu_swiglu_fp8;
mod gpu_wgmma;
mod no_driver;
mod problem_checks;
mod shipped_ptx;
mod tidy;
