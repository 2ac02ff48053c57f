//! The shapes `gemm_sweep` times: the linear-layer projections of public open-weight models,
//! dense and MoE, at decode and prefill token counts, and seeded random shapes at the edges
//! (primes, tiny problems, extreme aspect ratios, K not a multiple of 8).
//!
//! A projection's weight W is stored N × K row-major, as checkpoints hold it, and computes
//! `D (M × N) = X (M × K) · Wᵀ`; N and K come from each model's published config. Routed experts
//! are listed as one expert's GEMM (M is then the tokens routed to that expert).
//!
//! Which M each projection runs at (every projection at every M would take too long): the
//! distinct projections, in table order (a weight shape an earlier family already has is
//! timed once, under the earlier name), projection `p` at M ∈ [`FIXED_DECODE_M`], at
//! `ROTATING_DECODE_M[p % 4]`, and at `PREFILL_M[p % 5]` and `PREFILL_M[(p + 2) % 5]`, each
//! prefill pick stepped down to the next smaller M while the call exceeds [`MAX_FLOPS`] or
//! [`MAX_ELEMENTS`]. So each prefill M is drawn for about two fifths of the projections, each
//! rotating decode M for a quarter.

use std::collections::HashSet;

use crate::common::mix;

/// Decode token counts every projection runs at.
pub const FIXED_DECODE_M: [usize; 3] = [1, 8, 64];
/// Decode token counts drawn in turn, one per projection.
pub const ROTATING_DECODE_M: [usize; 4] = [2, 4, 16, 32];
/// Prefill token counts drawn in turn, two per projection.
pub const PREFILL_M: [usize; 5] = [128, 512, 2048, 8192, 16384];
/// Most flops of one call (about 30 ms on the H200), so that no row dominates the run time.
pub const MAX_FLOPS: f64 = 20e12;
/// Most elements of any one operand or output (2 GiB of bf16), so that the pool and the four
/// outputs stay far inside the GPU's memory.
pub const MAX_ELEMENTS: usize = 1 << 30;
/// The regimes a row is reported in, by M: decode up to 16 tokens, decode 17 to 64, prefill.
pub const REGIMES: [&str; 3] = ["decode M≤16", "decode M 17–64", "prefill"];
/// Seed of the random shapes.
const SEED: u64 = 0x5eed_0013;

/// How a model computes attention's projections.
pub enum Attention {
    /// Grouped-query attention: Q, K and V fused into one GEMM, then O.
    Gqa { q_heads: usize, kv_heads: usize, head_dim: usize },
    /// Multi-head latent attention (DeepSeek): low-rank Q (when `q_lora` is set) and KV.
    Mla { q_lora: Option<usize>, kv_lora: usize, heads: usize, nope_dim: usize, rope_dim: usize, v_dim: usize },
}

/// A model family's dims, from its published config.
pub struct Family {
    pub name: &'static str,
    pub hidden: usize,
    pub attention: Attention,
    /// Intermediate size of the dense MLP (of the dense layers in an MoE model), if any.
    pub dense_inter: Option<usize>,
    /// Intermediate size of one routed expert (MoE models).
    pub expert_inter: Option<usize>,
    pub vocab: usize,
}

const fn gqa(q_heads: usize, kv_heads: usize, head_dim: usize) -> Attention {
    Attention::Gqa { q_heads, kv_heads, head_dim }
}

const fn dense(name: &'static str, hidden: usize, attention: Attention, inter: usize, vocab: usize) -> Family {
    Family { name, hidden, attention, dense_inter: Some(inter), expert_inter: None, vocab }
}

/// The families swept, dense then MoE, smaller first within each kind.
pub const FAMILIES: [Family; 10] = [
    dense("Phi-3-mini", 3072, gqa(32, 32, 96), 8192, 32064),
    dense("Llama-3.1-8B", 4096, gqa(32, 8, 128), 14336, 128256),
    dense("Qwen2.5-7B", 3584, gqa(28, 4, 128), 18944, 152064),
    dense("Gemma-2-9B", 3584, gqa(16, 8, 256), 14336, 256000),
    dense("Llama-3.1-70B", 8192, gqa(64, 8, 128), 28672, 128256),
    dense("Qwen2.5-72B", 8192, gqa(64, 8, 128), 29568, 152064),
    Family {
        name: "Mixtral-8x7B",
        hidden: 4096,
        attention: gqa(32, 8, 128),
        dense_inter: None,
        expert_inter: Some(14336),
        vocab: 32000,
    },
    Family {
        name: "Qwen3-30B-A3B",
        hidden: 2048,
        attention: gqa(32, 4, 128),
        dense_inter: None,
        expert_inter: Some(768),
        vocab: 151936,
    },
    Family {
        name: "DeepSeek-V2-Lite",
        hidden: 2048,
        attention: Attention::Mla { q_lora: None, kv_lora: 512, heads: 16, nope_dim: 128, rope_dim: 64, v_dim: 128 },
        dense_inter: Some(10944),
        expert_inter: Some(1408),
        vocab: 102400,
    },
    Family {
        name: "DeepSeek-V3",
        hidden: 7168,
        attention: Attention::Mla {
            q_lora: Some(1536),
            kv_lora: 512,
            heads: 128,
            nope_dim: 128,
            rope_dim: 64,
            v_dim: 128,
        },
        dense_inter: Some(18432),
        expert_inter: Some(2048),
        vocab: 129280,
    },
];

impl Family {
    /// Every linear projection as (name, N, K).
    pub fn projections(&self) -> Vec<(&'static str, usize, usize)> {
        let h = self.hidden;
        let mut p = Vec::new();
        match self.attention {
            Attention::Gqa { q_heads, kv_heads, head_dim } => {
                p.push(("qkv", (q_heads + 2 * kv_heads) * head_dim, h));
                p.push(("o", h, q_heads * head_dim));
            }
            Attention::Mla { q_lora, kv_lora, heads, nope_dim, rope_dim, v_dim } => {
                let q_out = heads * (nope_dim + rope_dim);
                match q_lora {
                    Some(rank) => p.extend([("q_a", rank, h), ("q_b", q_out, rank)]),
                    None => p.push(("q", q_out, h)),
                }
                p.push(("kv_a", kv_lora + rope_dim, h));
                p.push(("kv_b", heads * (nope_dim + v_dim), kv_lora));
                p.push(("o", h, heads * v_dim));
            }
        }
        if let Some(i) = self.dense_inter {
            p.extend([("gate_up", 2 * i, h), ("down", h, i)]);
        }
        if let Some(e) = self.expert_inter {
            p.extend([("expert_gate_up", 2 * e, h), ("expert_down", h, e)]);
        }
        p.push(("lm_head", self.vocab, h));
        p
    }
}

/// One timed problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// `family/projection`, or `random/<kind>` and `edge/<kind>`.
    pub group: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
    /// Bytes a call must move at least: A, B and D once each, bf16.
    pub fn bytes(&self) -> f64 {
        2.0 * (self.m * self.k + self.n * self.k + self.m * self.n) as f64
    }
    pub fn regime(&self) -> &'static str {
        match self.m {
            ..=16 => REGIMES[0],
            17..=64 => REGIMES[1],
            _ => REGIMES[2],
        }
    }
    pub fn is_model(&self) -> bool {
        !self.group.starts_with("random/") && !self.group.starts_with("edge/")
    }
    fn fits(&self) -> bool {
        let dims = [self.m, self.n, self.k];
        dims.iter().all(|&d| (1..1 << 31).contains(&d))
            && self.flops() <= MAX_FLOPS
            && [self.m * self.k, self.n * self.k, self.m * self.n].iter().all(|&e| e <= MAX_ELEMENTS)
    }
}

/// Every shape of the full sweep: the model projections, then the edge and random shapes.
pub fn sweep() -> Vec<Shape> {
    let mut seen_weights = HashSet::new();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |shape: Shape, out: &mut Vec<Shape>| {
        if shape.fits() && seen.insert((shape.m, shape.n, shape.k)) {
            out.push(shape);
        }
    };
    let mut p = 0;
    for family in &FAMILIES {
        for (name, n, k) in family.projections() {
            if !seen_weights.insert((n, k)) {
                continue;
            }
            let group = format!("{}/{name}", family.name);
            let at = |m| Shape { group: group.clone(), m, n, k };
            let prefill = |pick: usize| {
                (0..=pick).rev().map(|i| at(PREFILL_M[i])).find(Shape::fits).unwrap_or_else(|| at(PREFILL_M[0]))
            };
            for m in FIXED_DECODE_M.into_iter().chain([ROTATING_DECODE_M[p % 4]]) {
                push(at(m), &mut out);
            }
            push(prefill(p % 5), &mut out);
            push(prefill((p + 2) % 5), &mut out);
            p += 1;
        }
    }
    for shape in edge_and_random() {
        push(shape, &mut out);
    }
    out
}

/// The brief's named edge cases, then seeded random shapes by kind (SplitMix64 over a counter;
/// a draw that exceeds the caps is drawn again).
fn edge_and_random() -> Vec<Shape> {
    const PRIMES: [usize; 12] = [3, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191];
    let shape = |group: &str, m, n, k| Shape { group: group.into(), m, n, k };
    let mut out = vec![
        shape("edge/primes", 7, 1021, 509),
        shape("edge/wide", 1, 65536, 64),
        shape("edge/tall", 65536, 1, 4096),
        shape("edge/long_k", 1, 1, 65536),
    ];
    let mut rng = SplitMix(SEED);
    let kinds: [(&str, usize); 6] = [("prime", 8), ("tiny", 8), ("wide", 3), ("tall", 3), ("odd_k", 8), ("any", 6)];
    for (kind, count) in kinds {
        let group = format!("random/{kind}");
        let mut made = 0;
        while made < count {
            let r = &mut rng;
            let (m, n, k) = match kind {
                "prime" => (r.pick(&PRIMES), r.pick(&PRIMES), r.pick(&PRIMES)),
                "tiny" => (r.log_uniform(1, 63), r.log_uniform(1, 63), r.log_uniform(1, 63)),
                "wide" => (r.log_uniform(1, 16), r.log_uniform(16384, 131072), r.log_uniform(64, 2048)),
                "tall" => (r.log_uniform(16384, 65536), r.log_uniform(1, 16), r.log_uniform(64, 4096)),
                "odd_k" => (
                    r.log_uniform(1, 16384),
                    r.log_uniform(64, 16384),
                    r.log_uniform(8, 8192) / 8 * 8 + r.pick(&[1, 2, 3, 4, 5, 6, 7]),
                ),
                _ => (r.log_uniform(1, 16384), r.log_uniform(1, 32768), r.log_uniform(1, 16384)),
            };
            let candidate = shape(&group, m, n, k);
            if candidate.fits() {
                out.push(candidate);
                made += 1;
            }
        }
    }
    out
}

/// SplitMix64: a counter stepped by the golden ratio, then mixed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// An integer log-uniform in [lo, hi].
    fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let (lo_ln, hi_ln) = ((lo as f64).ln(), (hi as f64).ln());
        ((lo_ln + u * (hi_ln - lo_ln)).exp().round() as usize).clamp(lo, hi)
    }
    fn pick(&mut self, from: &[usize]) -> usize {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// The subset a run times: every `len / 30`-th shape with `quick` (about 30 across every
/// regime and kind), then only groups containing `filter`.
pub fn select(all: Vec<Shape>, quick: bool, filter: Option<&str>) -> Vec<Shape> {
    let stride = if quick { (all.len() / 30).max(1) } else { 1 };
    all.into_iter().step_by(stride).filter(|s| filter.is_none_or(|f| s.group.contains(f))).collect()
}

/// Checks the full sweep's invariants; panics with the one broken. Runs before anything is
/// timed, and in `list`, so that a table edit that breaks them fails without a GPU.
pub fn check(all: &[Shape]) {
    let models = all.iter().filter(|s| s.is_model()).count();
    assert!(models >= 150, "{models} model-projection shapes; the sweep promises at least 150");
    assert!(all.len() - models >= 30, "{} edge and random shapes; at least 30", all.len() - models);
    let mut seen = HashSet::new();
    for s in all {
        assert!(s.fits(), "{s:?} exceeds the caps");
        assert!(seen.insert((s.m, s.n, s.k)), "{s:?} listed twice");
    }
    for regime in REGIMES {
        assert!(all.iter().any(|s| s.is_model() && s.regime() == regime), "no model shape in {regime}");
    }
    for family in &FAMILIES {
        assert!(all.iter().any(|s| s.group.starts_with(family.name)), "{} contributes no shape", family.name);
    }
    let moe = FAMILIES.iter().filter(|f| f.expert_inter.is_some()).count();
    assert!(FAMILIES.len() - moe >= 3 && moe >= 3, "dense and MoE families both needed");
    assert!(all.iter().any(|s| !s.k.is_multiple_of(8)), "no K off a multiple of 8");
    assert!(all.iter().any(|s| s.m.max(s.n).max(s.k) < 64), "no tiny problem");
    assert!(all.iter().any(|s| s.m == 1 && s.n >= 65536), "no M = 1 × wide N shape");
    assert!(all.iter().any(|s| s.m >= 65536 && s.n == 1), "no tall N = 1 shape");
}
