//! warpforge's benchmarks, side by side with the vendor libraries on the same H200, in one binary
//! (one copy of the embedded modules in the GPU bundle). Each bench's module doc gives its
//! protocol and arguments.
//!
//! Run: `cargo bench --bench kernels -- <bench> [arguments]` (on a GPU machine:
//! `.gpu/bench <bench> [arguments]`), where `<bench>` is one of [`BENCHES`]; with none named,
//! every bench runs in turn. Benches: `gemm_bf16` (the GEMM on its square, LLM and wave-count
//! shapes, with each variant forced), `gemm_swiglu` (fused gate-up + SwiGLU against cuBLAS plus
//! the unfused epilogue), `gemm_sweep` (the 352-shape sweep of model projections and random shapes),
//! `gemm_fp8` (the block-scaled FP8 GEMM against cuBLASLt's blockwise and per-tensor FP8 GEMMs on
//! the DeepSeek-V3 projections), `gemm_grouped` (the grouped MoE GEMMs against the per-expert
//! loop), `quant` (the FP8/FP4 quantisation kernels against the copy
//! bandwidth), `attention` (the attention forward; its vendor side is
//! `benches/attention_vendor.py`).

mod attention;
mod common;
mod gemm_bf16;
mod gemm_fp8;
mod gemm_grouped;
mod gemm_sweep;
mod gemm_swiglu;
mod quant;

/// A bench's entry point (it reads its own arguments).
type Run = fn() -> common::Result<()>;

/// The benches by name, in the order a run without a name takes them.
const BENCHES: [(&str, Run); 7] = [
    ("gemm_bf16", gemm_bf16::main),
    ("gemm_swiglu", gemm_swiglu::main),
    ("gemm_sweep", gemm_sweep::main),
    ("gemm_fp8", gemm_fp8::main),
    ("gemm_grouped", gemm_grouped::main),
    ("quant", quant::main),
    ("attention", attention::main),
];

fn main() -> common::Result<()> {
    // Cargo passes `--bench`; a bench's own arguments (`quick`, `list`, `filter=…`) follow its name.
    let named: Vec<String> = std::env::args().skip(1).filter(|a| BENCHES.iter().any(|(name, _)| name == a)).collect();
    let unknown = std::env::args().nth(1).filter(|a| !a.starts_with('-') && !BENCHES.iter().any(|(n, _)| n == a));
    if let Some(other) = unknown {
        let names: Vec<&str> = BENCHES.iter().map(|(name, _)| *name).collect();
        return Err(format!("unknown bench `{other}`: one of {}", names.join(", ")).into());
    }
    for (name, run) in BENCHES {
        if named.is_empty() || named.iter().any(|n| n == name) {
            println!("==== {name}");
            run()?;
        }
    }
    Ok(())
}
