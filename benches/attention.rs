//! Attention forward (`Warpforge::attention`) alone, on prefill, GQA and chunked-prefill shapes,
//! with the SM clock per row. The vendor comparison is `benches/attention_vendor.py`: it calls
//! this same entry point through `examples/python-ffi` inside a PyTorch process and times it
//! interleaved with cuDNN and FlashAttention-2 on the same tensors (cudarc has no cuDNN
//! attention binding).
//!
//! Method: random uniform(-1, 1) bf16 Q, K, V (never zero); a warm-up; then rounds timed with
//! CUDA events, the median round reported with the SM clock read right after. FLOPs counted:
//! 4 · batch · heads_q · seq_q · seq_k · head_dim, halved when causal.
//!
//! Run: `cargo bench --bench kernels -- attention` (on a GPU machine: `.gpu/bench attention`);
//! `quick` runs the first three shapes, `filter=<text>` only the shapes whose name contains the
//! text (e.g. `filter=d128_s4k`). docs/PERF.md keeps the measurements.

use half::bf16;
use warpforge::AttentionProblem;

use crate::common::{Bench, Result, median, random_bf16, sm_clock_mhz};

const ROUNDS: usize = 8;
const WARMUP_CALLS: usize = 3;
/// GPU time one round aims for.
const ROUND_SECONDS: f64 = 0.02;

/// (name, batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal).
type Shape = (&'static str, usize, usize, usize, usize, usize, usize, bool);

/// Prefill (head dimensions 64, 128 and 256), GQA and chunked-prefill shapes.
const SHAPES: [Shape; 17] = [
    ("prefill_d128_s1k", 16, 16, 16, 1024, 1024, 128, false),
    ("prefill_d128_s2k", 8, 16, 16, 2048, 2048, 128, false),
    ("prefill_d128_s4k", 4, 16, 16, 4096, 4096, 128, false),
    ("prefill_d128_s8k", 2, 16, 16, 8192, 8192, 128, false),
    ("prefill_d128_s16k", 1, 16, 16, 16384, 16384, 128, false),
    ("prefill_d128_s2k_causal", 8, 16, 16, 2048, 2048, 128, true),
    ("prefill_d128_s8k_causal", 2, 16, 16, 8192, 8192, 128, true),
    ("prefill_d64_s2k", 8, 32, 32, 2048, 2048, 64, false),
    ("prefill_d64_s8k", 2, 32, 32, 8192, 8192, 64, false),
    ("prefill_d64_s8k_causal", 2, 32, 32, 8192, 8192, 64, true),
    ("prefill_d256_s2k", 8, 8, 8, 2048, 2048, 256, false),
    ("prefill_d256_s8k", 2, 8, 8, 8192, 8192, 256, false),
    ("prefill_d256_s8k_causal", 2, 8, 8, 8192, 8192, 256, true),
    ("llama3_8b_gqa_s4k", 4, 32, 8, 4096, 4096, 128, false),
    ("llama3_8b_gqa_s4k_causal", 4, 32, 8, 4096, 4096, 128, true),
    ("llama3_70b_gqa_s8k_causal", 1, 64, 8, 8192, 8192, 128, true),
    ("chunk_512_of_8k", 4, 32, 8, 512, 8192, 128, false),
];

pub fn main() -> Result<()> {
    let Some(bench) = Bench::open("attention")? else { return Ok(()) };
    let quick = std::env::args().any(|a| a == "quick");
    let filter: Option<String> = std::env::args().find_map(|a| a.strip_prefix("filter=").map(String::from));
    let stream = &bench.stream;
    println!("{:32} {:>9} {:>9} {:>8}", "shape", "ms", "TFLOP/s", "SM MHz");
    for &(name, batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal) in SHAPES
        .iter()
        .take(if quick { 3 } else { SHAPES.len() })
        .filter(|s| filter.as_deref().is_none_or(|f| s.0.contains(f)))
    {
        let mut p = AttentionProblem::new(batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
        p.causal = causal;
        let e = p.check()?;
        let q = stream.clone_htod(&random_bf16(1, e.q))?;
        let k = stream.clone_htod(&random_bf16(2, e.kv))?;
        let v = stream.clone_htod(&random_bf16(3, e.kv))?;
        let mut o = stream.alloc_zeros::<bf16>(e.q)?;
        let mut call = |_| Ok(bench.wf.attention(stream, &p, &q, &k, &v, &mut o, None)?);
        let (warm, _) = bench.timer.per_call(stream, WARMUP_CALLS, &mut call)?;
        let reps = ((ROUND_SECONDS / warm.max(1e-6)) as usize).clamp(1, 1000);
        let mut rounds = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            rounds.push(bench.timer.per_call(stream, reps, &mut call)?.0);
        }
        let seconds = median(&mut rounds);
        let flops = 4.0 * (batch * heads_q * seq_q * seq_k * head_dim) as f64 / if causal { 2.0 } else { 1.0 };
        println!("{name:32} {:9.3} {:9.1} {:>8}", seconds * 1e3, flops / seconds / 1e12, sm_clock_mhz());
    }
    Ok(())
}
