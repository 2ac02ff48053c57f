//! Attention forward (`Warpforge::attention`) against a float64 CPU reference: random shapes
//! with sequence lengths off the 128-row tiles, `seq_q ≠ seq_k` both ways, GQA groups 1, 4 and
//! 8, causal (bottom-right aligned) and not, head dimensions 64, 128 and 256 (whose kernel walks
//! the keys in 80-key blocks), bf16 and f16, ordinary
//! and large logits (up to about ±60, for the online softmax's stability), with the log-sum-exp
//! checked and O and LSE poisoned with NaN first (every element written, nothing past the end).
//! Plus the argument checks: on the CPU for `AttentionProblem::check`, and on the GPU for the
//! refusals that need buffers (nothing is launched: the output keeps its poison). Variable-length
//! batches (`attention_varlen`) are checked sequence by sequence the same way.

use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::logic::attention::visible;
use warpforge::{AttentionElement, AttentionProblem, AttentionVarlenProblem, Error};

use crate::common::{Element, check_all, gpu, random_f32};

/// Cases per property test on the GPU.
const GPU_CASES: u32 = 24;
/// Elements of slack after O and LSE, which must keep their poison.
const TAIL: usize = 37;

/// A test case: the problem, how large the logits get, and the data seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Case {
    pub(crate) problem: AttentionProblem,
    /// Q and K uniform in ±`magnitude` (with scale 2 when large: logits of tens).
    pub(crate) large_logits: bool,
    pub(crate) seed: u64,
}

/// The float64 reference of one (sequence, head, query) row: O's `head_dim` values, the LSE,
/// and Σ p·|v| / Σ p per column (the scale of the P-rounding error).
struct RowRef {
    o: Vec<f64>,
    lse: f64,
    weighted_abs_v: Vec<f64>,
    keys: usize,
}

/// Where one sequence's rows lie in the packed tensors.
#[derive(Clone, Copy, Debug)]
struct Sequence {
    q_base: usize,
    q_len: usize,
    k_base: usize,
    k_len: usize,
}

/// The heads and scale a reference row needs.
#[derive(Clone, Copy, Debug)]
struct Heads {
    heads_q: usize,
    heads_kv: usize,
    head_dim: usize,
    causal: bool,
    scale: f32,
}

fn reference_row(x: &Heads, seq: Sequence, q: &[f64], k: &[f64], v: &[f64], h: usize, i: usize) -> RowRef {
    let d = x.head_dim;
    let hk = h / (x.heads_q / x.heads_kv);
    let q_row = &q[((seq.q_base + i) * x.heads_q + h) * d..][..d];
    let kv_at = |j: usize| ((seq.k_base + j) * x.heads_kv + hk) * d;
    let logits: Vec<(usize, f64)> = (0..seq.k_len)
        .filter(|&j| visible(i as u32, j as u32, seq.q_len as u32, seq.k_len as u32, x.causal))
        .map(|j| {
            let k_row = &k[kv_at(j)..][..d];
            (j, x.scale as f64 * q_row.iter().zip(k_row).map(|(a, b)| a * b).sum::<f64>())
        })
        .collect();
    if logits.is_empty() {
        return RowRef { o: vec![0.0; d], lse: f64::NEG_INFINITY, weighted_abs_v: vec![0.0; d], keys: 0 };
    }
    let max = logits.iter().map(|&(_, s)| s).fold(f64::NEG_INFINITY, f64::max);
    let mut o = vec![0.0; d];
    let mut weighted = vec![0.0; d];
    let mut sum = 0.0;
    for &(j, s) in &logits {
        let w = (s - max).exp();
        sum += w;
        let v_row = &v[kv_at(j)..][..d];
        for c in 0..d {
            o[c] += w * v_row[c];
            weighted[c] += w * v_row[c].abs();
        }
    }
    RowRef {
        o: o.iter().map(|x| x / sum).collect(),
        lse: max + sum.ln(),
        weighted_abs_v: weighted.iter().map(|x| x / sum).collect(),
        keys: logits.len(),
    }
}

/// Checks one row of O (`head_dim` values at `o_at`) and its LSE against the reference: P
/// rounds to T before P·V (relative EPS each, or the subnormal floor per key), O rounds once;
/// the f32 scores (their error moves P relatively by about the logit error) and ex2.approx are
/// well below; a factor of about 3 over the bound.
fn check_row<T: Element>(r: &RowRef, got: &[f64], lse: f64, what: &str) -> Option<String> {
    for (c, &want) in r.o.iter().enumerate() {
        let tol = 3.0 * T::EPS * r.weighted_abs_v[c] + 2.0 * T::EPS * want.abs() + r.keys as f64 * T::ABS_FLOOR + 1e-6;
        let x = got[c];
        // NaN (unwritten) fails too.
        let within = (x - want).abs() <= tol;
        if !within {
            return Some(format!("O[{what} c{c}] = {x}, want {want} ± {tol}"));
        }
    }
    let lse_ok = if r.lse == f64::NEG_INFINITY {
        lse == f64::NEG_INFINITY
    } else {
        (lse - r.lse).abs() <= 1e-4 * (1.0 + r.lse.abs())
    };
    (!lse_ok).then(|| format!("LSE[{what}] = {lse}, want {}", r.lse))
}

/// Runs `case` on the GPU with element `T` and checks every output element and LSE value.
pub(crate) fn check_case<T: AttentionElement + Element>(case: &Case) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let p = &case.problem;
    let e = p.check().expect("a valid problem");
    let magnitude = if case.large_logits { 2.0 } else { 1.0 };
    let data = |salt: u64, n: usize, scale: f32| -> Vec<T> {
        random_f32(case.seed ^ salt, n, scale).into_iter().map(T::of).collect()
    };
    let (q, k, v) = (data(1, e.q, magnitude), data(2, e.kv, magnitude), data(3, e.kv, 1.0));
    let (dq, dk, dv) = (stream.clone_htod(&q).unwrap(), stream.clone_htod(&k).unwrap(), stream.clone_htod(&v).unwrap());
    let mut d_o = stream.clone_htod(&vec![T::NAN; e.q + TAIL]).unwrap();
    let mut d_lse = stream.clone_htod(&vec![f32::NAN; e.lse + TAIL]).unwrap();
    {
        let mut o_view = d_o.slice_mut(..e.q);
        let mut lse_view = d_lse.slice_mut(..e.lse);
        if let Err(err) = wf.attention(stream, p, &dq, &dk, &dv, &mut o_view, Some(&mut lse_view)) {
            panic!("{case:?}: attention failed: {err}");
        }
    }
    let got: Vec<f64> = stream.clone_dtoh(&d_o).unwrap().into_iter().map(T::f64).collect();
    let got_lse: Vec<f32> = stream.clone_dtoh(&d_lse).unwrap();
    assert!(got[e.q..].iter().all(|x| x.is_nan()), "{case:?}: O written past its end");
    assert!(got_lse[e.lse..].iter().all(|x| x.is_nan()), "{case:?}: LSE written past its end");

    let f = |x: &[T]| x.iter().map(|v| v.f64()).collect::<Vec<f64>>();
    let (q, k, v) = (f(&q), f(&k), f(&v));
    let d = p.head_dim;
    let heads =
        Heads { heads_q: p.heads_q, heads_kv: p.heads_kv, head_dim: d, causal: p.causal, scale: p.softmax_scale };
    // One check per (sequence, head, query) row, on all cores.
    let (bad, first) = check_all(p.batch * p.heads_q * p.seq_q, |row| {
        let (b, h, i) = (row / (p.heads_q * p.seq_q), row / p.seq_q % p.heads_q, row % p.seq_q);
        let seq = Sequence { q_base: b * p.seq_q, q_len: p.seq_q, k_base: b * p.seq_k, k_len: p.seq_k };
        let r = reference_row(&heads, seq, &q, &k, &v, h, i);
        let at = ((b * p.seq_q + i) * p.heads_q + h) * d;
        let lse = got_lse[(b * p.heads_q + h) * p.seq_q + i] as f64;
        check_row::<T>(&r, &got[at..at + d], lse, &format!("b{b} h{h} q{i}"))
    });
    assert_eq!(bad, 0, "{case:?} ({}): {bad} rows mismatch, first: {first:#?}", std::any::type_name::<T>());
}

/// Sequence lengths: 1, off the 128-row tiles, on them, and up to a few tiles.
fn seq() -> impl Strategy<Value = usize> {
    prop_oneof![
        1 => Just(1usize),
        2 => prop::sample::select(vec![2usize, 7, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383]),
        2 => 1usize..520,
    ]
}

prop_compose! {
    fn any_case()(
        batch in 1usize..=2,
        heads_kv in 1usize..=2,
        group in prop::sample::select(vec![1usize, 4, 8]),
        (seq_q, seq_k) in (seq(), seq()),
        head_dim in prop::sample::select(vec![64usize, 128, 256]),
        causal: bool,
        large_logits in prop::bool::weighted(0.3),
        seed in any::<u64>(),
    ) -> Case {
        let mut problem = AttentionProblem::new(batch, heads_kv * group, heads_kv, seq_q, seq_k, head_dim);
        problem.causal = causal;
        if large_logits {
            problem.softmax_scale = 2.0;
        }
        Case { problem, large_logits, seed }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: GPU_CASES, max_shrink_iters: 32, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn attention_bf16_matches_the_f64_reference(case in any_case()) {
        check_case::<bf16>(&case);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn attention_f16_matches_the_f64_reference(case in any_case()) {
        check_case::<f16>(&case);
    }
}

/// Fixed cases the properties may miss: one key, one query, a causal problem whose first
/// queries see nothing (`seq_q > seq_k`), MQA, and a long sequence of several ring laps.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_edge_cases() {
    check_fixed(&[
        (1, 1, 1, 1, 1, 64, false),
        (1, 2, 1, 300, 1, 128, false),
        (2, 8, 2, 200, 70, 64, true),
        (1, 4, 1, 1, 1000, 128, true),
        (1, 8, 1, 129, 129, 64, true),
        (1, 2, 2, 1100, 1500, 128, true),
        (2, 2, 1, 700, 700, 64, false),
    ]);
}

/// Head dimension 256 (80-key blocks, a two-stage ring): key counts on and off the 80-key
/// blocks and the 128-row tiles (1, 79, 80, 81, 160, 161, 300, 1000), queries longer and
/// shorter than keys, causal and not, GQA 1, 4 and 8 and MQA, both types, ordinary and large
/// logits; many ring laps (1500 keys: 19 blocks over 2 stages).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_d256_matches_the_f64_reference() {
    check_fixed(&[
        (1, 1, 1, 1, 1, 256, false),
        (1, 2, 1, 300, 1, 256, true),
        (2, 4, 1, 79, 80, 256, true),
        (1, 8, 1, 129, 81, 256, false),
        (2, 2, 2, 200, 161, 256, true),
        (1, 4, 1, 1, 1000, 256, true),
        (1, 8, 1, 160, 160, 256, true),
        (1, 2, 2, 1100, 1500, 256, true),
        (2, 16, 2, 257, 300, 256, false),
        (1, 4, 4, 383, 1000, 256, false),
    ]);
}

/// Head dimensions 64 and 128 without a causal mask from `LONG_KEYS_FROM` = 4096 keys
/// (176-key blocks; at d = 128 two stages in split rings): key counts on and off the 176-key
/// blocks (4096 = 23 · 176 + 48, 4224 = 24 · 176, 4225, 4399, 4400 = 25 · 176), query counts on
/// and off the 128-row tiles, queries longer and shorter than keys, GQA 1, 4 and 8 and MQA,
/// both types, ordinary and large logits; many ring laps (24–26 blocks over 2 or 4 stages).
/// 4095 keys beside them take the 128-key entries (the threshold's other side), causal cases
/// the 128-key entries on the same shapes.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_176_key_blocks_match_the_f64_reference() {
    check_fixed(&[
        (1, 1, 1, 1, 4096, 128, false),
        (1, 2, 1, 127, 4095, 128, false),
        (2, 4, 1, 79, 4224, 128, false),
        (1, 8, 1, 129, 4225, 128, false),
        (1, 8, 8, 64, 4399, 128, false),
        (1, 8, 1, 200, 4225, 128, true),
        (1, 2, 2, 300, 4400, 128, false),
        (2, 4, 1, 79, 4224, 64, false),
        (1, 8, 1, 129, 4225, 64, false),
        (1, 4, 1, 1, 4096, 64, false),
        (1, 8, 8, 64, 4095, 64, false),
        (1, 2, 2, 300, 4400, 64, false),
        (1, 2, 2, 300, 4400, 64, true),
    ]);
}

/// Runs every `(batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal)` with ordinary and
/// large logits, in bf16 and f16.
pub(crate) fn check_fixed(cases: &[(usize, usize, usize, usize, usize, usize, bool)]) {
    for &(batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal) in cases {
        let mut problem = AttentionProblem::new(batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
        problem.causal = causal;
        for large_logits in [false, true] {
            if large_logits {
                problem.softmax_scale = 2.0;
            }
            let case = Case { problem, large_logits, seed: 7 };
            check_case::<bf16>(&case);
            check_case::<f16>(&case);
        }
    }
}

/// A variable-length batch: random per-sequence lengths (0 included) packed back to back,
/// through `attention_varlen`, each sequence checked against the reference on its own rows;
/// the LSE is `[heads_q, total_q]`.
pub(crate) fn check_varlen<T: AttentionElement + Element>(
    lens: &[(usize, usize)],
    heads_kv: usize,
    group: usize,
    head_dim: usize,
    causal: bool,
    seed: u64,
) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let offsets = |pick: fn(&(usize, usize)) -> usize| -> Vec<u32> {
        std::iter::once(0)
            .chain(lens.iter().scan(0u32, |acc, l| {
                *acc += pick(l) as u32;
                Some(*acc)
            }))
            .collect()
    };
    let (cu_q, cu_k) = (offsets(|l| l.0), offsets(|l| l.1));
    let (total_q, total_k) = (*cu_q.last().unwrap() as usize, *cu_k.last().unwrap() as usize);
    let (max_q, max_k) = (lens.iter().map(|l| l.0).max().unwrap(), lens.iter().map(|l| l.1).max().unwrap());
    let heads_q = heads_kv * group;
    let mut p = AttentionVarlenProblem::new(lens.len(), heads_q, heads_kv, total_q, total_k, max_q, max_k, head_dim);
    p.causal = causal;
    let e = p.check().expect("a valid problem");
    let data = |salt: u64, n: usize| -> Vec<T> { random_f32(seed ^ salt, n, 1.0).into_iter().map(T::of).collect() };
    let (q, k, v) = (data(1, e.q), data(2, e.kv), data(3, e.kv));
    let (dq, dk, dv) = (stream.clone_htod(&q).unwrap(), stream.clone_htod(&k).unwrap(), stream.clone_htod(&v).unwrap());
    let (dcu_q, dcu_k) = (stream.clone_htod(&cu_q).unwrap(), stream.clone_htod(&cu_k).unwrap());
    let mut d_o = stream.clone_htod(&vec![T::NAN; e.q + TAIL]).unwrap();
    let mut d_lse = stream.clone_htod(&vec![f32::NAN; e.lse + TAIL]).unwrap();
    {
        let mut o_view = d_o.slice_mut(..e.q);
        let mut lse_view = d_lse.slice_mut(..e.lse);
        let result = wf.attention_varlen(stream, &p, &dq, &dk, &dv, &dcu_q, &dcu_k, &mut o_view, Some(&mut lse_view));
        if let Err(err) = result {
            panic!("{p:?}: attention_varlen failed: {err}");
        }
    }
    let got: Vec<f64> = stream.clone_dtoh(&d_o).unwrap().into_iter().map(T::f64).collect();
    let got_lse: Vec<f32> = stream.clone_dtoh(&d_lse).unwrap();
    assert!(
        got[e.q..].iter().all(|x| x.is_nan()) && got_lse[e.lse..].iter().all(|x| x.is_nan()),
        "{p:?}: written past the end"
    );
    let f = |x: &[T]| x.iter().map(|v| v.f64()).collect::<Vec<f64>>();
    let (q, k, v) = (f(&q), f(&k), f(&v));
    let heads = Heads { heads_q, heads_kv, head_dim, causal, scale: p.softmax_scale };
    let (bad, first) = check_all(total_q * heads_q, |row| {
        let (r, h) = (row / heads_q, row % heads_q);
        let b = cu_q.partition_point(|&c| c as usize <= r) - 1;
        let seq = Sequence { q_base: cu_q[b] as usize, q_len: lens[b].0, k_base: cu_k[b] as usize, k_len: lens[b].1 };
        let i = r - seq.q_base;
        let want = reference_row(&heads, seq, &q, &k, &v, h, i);
        let at = (r * heads_q + h) * head_dim;
        check_row::<T>(&want, &got[at..at + head_dim], got_lse[h * total_q + r] as f64, &format!("seq{b} h{h} q{i}"))
    });
    assert_eq!(
        bad,
        0,
        "{lens:?} causal {causal} d{head_dim} ({}): {bad} rows mismatch, first: {first:#?}",
        std::any::type_name::<T>()
    );
}

/// Variable-length batches: ragged lengths, empty sequences, queries longer and shorter than
/// keys, GQA, every head dimension and both types, causal and not.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_varlen_matches_the_f64_reference() {
    let batches: [&[(usize, usize)]; 4] = [
        &[(1, 1)],
        &[(129, 300), (7, 7), (0, 5), (256, 100), (300, 1)],
        &[(64, 0), (65, 64), (200, 513)],
        &[(383, 383), (1, 640)],
    ];
    for (n, lens) in batches.iter().enumerate() {
        for (head_dim, group, causal) in
            [(64, 1, false), (128, 4, true), (64, 8, true), (128, 1, false), (256, 4, true), (256, 1, false)]
        {
            check_varlen::<bf16>(lens, 2, group, head_dim, causal, n as u64);
            check_varlen::<f16>(lens, 1, group, head_dim, causal, n as u64 + 100);
        }
    }
}

/// The kernel's arithmetic on the CPU for query `i` of head `h`: f32 scores, blocks of
/// `block_n` keys (an entry's key block, `abi::attention_sm90::SHAPES`), the online
/// softmax in base 2 (rescale before the exponentials), P rounded to `T` before `P·V`, f32
/// sums, one division and one rounding of O at the end. Used to check that the GPU tests'
/// tolerance holds for an exact implementation of the kernel's algorithm.
fn model_row<T: Element>(
    x: &Heads,
    seq: Sequence,
    (q, k, v): (&[f64], &[f64], &[f64]),
    h: usize,
    i: usize,
    block_n: usize,
) -> (Vec<f64>, f64) {
    let d = x.head_dim;
    let hk = h / (x.heads_q / x.heads_kv);
    let q_row = &q[((seq.q_base + i) * x.heads_q + h) * d..][..d];
    let kv_at = |j: usize| ((seq.k_base + j) * x.heads_kv + hk) * d;
    let scale = x.scale * std::f32::consts::LOG2_E;
    let (mut max, mut sum, mut o) = (f32::NEG_INFINITY, 0f32, vec![0f32; d]);
    for block in 0..seq.k_len.div_ceil(block_n).max(1) {
        let keys = block * block_n..((block + 1) * block_n).min(seq.k_len);
        let s: Vec<f32> = keys
            .clone()
            .map(|j| {
                if visible(i as u32, j as u32, seq.q_len as u32, seq.k_len as u32, x.causal) {
                    q_row.iter().zip(&k[kv_at(j)..][..d]).map(|(a, b)| (a * b) as f32).sum()
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect();
        let new_max = s.iter().fold(max, |m, &x| m.max(x * scale));
        let base = if new_max == f32::NEG_INFINITY { 0.0 } else { new_max };
        let alpha = (max - base).exp2();
        sum *= alpha;
        o.iter_mut().for_each(|x| *x *= alpha);
        for (j, &sj) in keys.zip(&s) {
            let pj = sj.mul_add(scale, -base).exp2();
            sum += pj;
            let pr = T::of(pj).f64() as f32;
            for (c, oc) in o.iter_mut().enumerate() {
                *oc += pr * v[kv_at(j) + c] as f32;
            }
        }
        max = new_max;
    }
    let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    let lse = if sum > 0.0 { ((max + sum.log2()) * std::f32::consts::LN_2) as f64 } else { f64::NEG_INFINITY };
    (o.iter().map(|&x| T::of(x * inv).f64()).collect(), lse)
}

fn check_model<T: Element>(case: &Case) -> Result<(), TestCaseError> {
    let p = &case.problem;
    let e = p.check().unwrap();
    let magnitude = if case.large_logits { 2.0 } else { 1.0 };
    let data = |salt: u64, n: usize, scale: f32| -> Vec<f64> {
        random_f32(case.seed ^ salt, n, scale).into_iter().map(|x| T::of(x).f64()).collect()
    };
    let (q, k, v) = (data(1, e.q, magnitude), data(2, e.kv, magnitude), data(3, e.kv, 1.0));
    let heads = Heads {
        heads_q: p.heads_q,
        heads_kv: p.heads_kv,
        head_dim: p.head_dim,
        causal: p.causal,
        scale: p.softmax_scale,
    };
    // Every key block an entry of this head dimension runs (which one runs depends on the
    // mask and the sequence length; the model is checked on each).
    let mut blocks: Vec<usize> = warpforge::abi::attention_sm90::SHAPES
        .iter()
        .filter(|s| s.head_dim as usize == p.head_dim)
        .map(|s| s.keys as usize)
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    for block_n in blocks {
        let (bad, first) = check_all(p.batch * p.heads_q * p.seq_q, |row| {
            let (b, h, i) = (row / (p.heads_q * p.seq_q), row / p.seq_q % p.heads_q, row % p.seq_q);
            let seq = Sequence { q_base: b * p.seq_q, q_len: p.seq_q, k_base: b * p.seq_k, k_len: p.seq_k };
            let (o, lse) = model_row::<T>(&heads, seq, (&q, &k, &v), h, i, block_n);
            check_row::<T>(&reference_row(&heads, seq, &q, &k, &v, h, i), &o, lse, &format!("b{b} h{h} q{i}"))
        });
        prop_assert_eq!(bad, 0, "{:?}, {}-key blocks: the model breaks the tolerance: {:#?}", case, block_n, first);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// The tolerance of the GPU tests holds for the kernel's algorithm computed exactly as the
    /// kernel does (CPU model), large logits included: a GPU failure is the kernel's, not the
    /// tolerance's.
    #[test]
    fn the_tolerance_holds_for_a_cpu_model_of_the_kernel(case in any_case(), f16_case: bool) {
        let mut case = case;
        (case.problem.seq_q, case.problem.seq_k) = (case.problem.seq_q.min(160), case.problem.seq_k.min(300));
        if f16_case { check_model::<f16>(&case)? } else { check_model::<bf16>(&case)? }
    }
}

/// Offsets in the output of `rows_vocab_sm90a` (mirror `rows_checks::ROWS_OUT_*`).
const ROWS_OUT_P: usize = 128;
const ROWS_OUT_STATE: usize = ROWS_OUT_P + 64 * 128;
const ROWS_OUT_PV: usize = ROWS_OUT_STATE + 128;
/// Its dynamic shared memory (mirrors `ROWS_SMEM_BYTES`).
const ROWS_SMEM_BYTES: u32 = 128 * 64 * 2 + 1024;

/// The register-tile vocabulary alone on the GPU (`gpu-kernels/checks/src/rows_checks.rs`): row
/// max and sum over the quads, one online-softmax step, and P rounded into RS fragments times
/// the identity by wgmma, against the CPU. Where the attention tests fail, this says whether
/// the vocabulary or the pipeline is at fault.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn rows_vocabulary_on_the_gpu() {
    use warpforge::host::{KernelArgs, LaunchConfig};
    let stream = gpu().0.stream();
    let mut x = random_f32(11, 64 * 128, 4.0);
    // A fully masked row and a row with one unmasked score: the softmax's edge cases.
    x[5 * 128..6 * 128].iter_mut().for_each(|v| *v = f32::NEG_INFINITY);
    x[9 * 128..10 * 128].iter_mut().enumerate().for_each(|(c, v)| *v = if c == 77 { 3.0 } else { f32::NEG_INFINITY });
    // The step's scale in base-2 units (softmax scale 0.7).
    let scale2 = 0.7f32 * std::f32::consts::LOG2_E;
    let dx = stream.clone_htod(&x).unwrap();
    let mut out = stream.clone_htod(&vec![f32::NAN; ROWS_OUT_PV + 64 * 64]).unwrap();
    {
        let mut args = KernelArgs::new();
        args.push_buffer(&dx, stream).push(scale2).push_buffer_mut(&mut out, stream);
        let kernel = crate::common::checks().kernel("rows_vocab_sm90a").unwrap();
        let config = LaunchConfig::linear(1, 128).with_dynamic_smem(ROWS_SMEM_BYTES);
        // SAFETY: one block of 128 threads with the entry's shared memory; `x` and `out` are
        // sized as its doc requires.
        unsafe { kernel.launch(stream, &config, args) }.unwrap();
    }
    let got: Vec<f32> = stream.clone_dtoh(&out).unwrap();
    for r in 0..64 {
        let row = &x[r * 128..(r + 1) * 128];
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = row.iter().map(|&v| v as f64).sum();
        assert_eq!(got[2 * r], max, "row_max of row {r}");
        let sum_ok = if sum.is_finite() {
            (got[2 * r + 1] as f64 - sum).abs() <= 1e-4 * (1.0 + sum.abs())
        } else {
            got[2 * r + 1] as f64 == sum
        };
        assert!(sum_ok, "row_sum of row {r}: {} vs {sum}", got[2 * r + 1]);
        let base = if max == f32::NEG_INFINITY { 0.0 } else { (max * scale2) as f64 };
        let p: Vec<f64> = row.iter().map(|&v| (v as f64 * scale2 as f64 - base).exp2()).collect();
        let total: f64 = p.iter().sum();
        assert_eq!(got[ROWS_OUT_STATE + 2 * r], max * scale2, "softmax max of row {r}");
        assert!(
            (got[ROWS_OUT_STATE + 2 * r + 1] as f64 - total).abs() <= 1e-5 * (1.0 + total),
            "softmax total of row {r}"
        );
        for c in 0..128 {
            let g = got[ROWS_OUT_P + r * 128 + c] as f64;
            assert!((g - p[c]).abs() <= 1e-5 * (1.0 + p[c]), "P[{r}][{c}] = {g}, want {}", p[c]);
        }
        for n in 0..64 {
            let want = bf16::from_f32(got[ROWS_OUT_P + r * 128 + n]).to_f32();
            assert_eq!(got[ROWS_OUT_PV + r * 64 + n], want, "(P·I)[{r}][{n}]: the A fragment of P");
        }
    }
}

fn expect_invalid(what: &str, result: warpforge::Result<impl std::fmt::Debug>) {
    match result {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

/// `AttentionProblem::check` refuses every bad shape with `InvalidArgument` (no GPU needed).
#[test]
fn attention_problem_check_refuses_bad_shapes() {
    let ok = AttentionProblem::new(2, 8, 2, 100, 300, 128);
    let e = ok.check().unwrap();
    assert_eq!((e.group, e.q, e.kv, e.lse), (4, 2 * 100 * 8 * 128, 2 * 300 * 2 * 128, 2 * 8 * 100));
    let with = |f: &dyn Fn(&mut AttentionProblem)| {
        let mut p = ok;
        f(&mut p);
        p
    };
    let top = 1usize << (usize::BITS - 1);
    let bad: [(&str, AttentionProblem); 14] = [
        ("batch 0", with(&|p| p.batch = 0)),
        ("heads_q 0", with(&|p| p.heads_q = 0)),
        ("heads_kv 0", with(&|p| p.heads_kv = 0)),
        ("seq_q 0", with(&|p| p.seq_q = 0)),
        ("seq_k 0", with(&|p| p.seq_k = 0)),
        ("head_dim 96", with(&|p| p.head_dim = 96)),
        ("head_dim 512", with(&|p| p.head_dim = 512)),
        ("heads_q not a multiple of heads_kv", with(&|p| p.heads_kv = 3)),
        ("scale 0", with(&|p| p.softmax_scale = 0.0)),
        ("scale negative", with(&|p| p.softmax_scale = -1.0)),
        ("scale NaN", with(&|p| p.softmax_scale = f32::NAN)),
        ("rows ≥ 2^31", with(&|p| p.seq_k = 1 << 30)),
        ("seq_q overflows", with(&|p| p.seq_q = top)),
        // 8192 query tiles × 2^18 heads × 2 sequences = 2^32 tiles: not numbered in 32 bits.
        ("tiles ≥ 2^31", with(&|p| (p.seq_q, p.heads_q, p.heads_kv) = (1 << 20, 1 << 18, 1 << 18))),
    ];
    for (what, p) in bad {
        expect_invalid(what, p.check());
    }
    // The grid is 1-D over the tiles: batches and heads past 65 535 (the old y and z limits)
    // are fine while the tiles stay below 2^31.
    with(&|p| p.batch = 70_000).check().unwrap();
    with(&|p| (p.heads_q, p.heads_kv) = (70_000, 70_000)).check().unwrap();
}

/// The shape table the entries are instantiated with (`abi::attention_sm90::SHAPES`) and the
/// host's entry per problem: at d = 64 four stages of 128-key blocks, of 176-key blocks for
/// problems without a causal mask from `LONG_KEYS_FROM` keys, two Q buffers and tiles chained;
/// at d = 128 128-key blocks and
/// three stages, for those long non-causal problems 176-key blocks, two split stages and a
/// 24/240 register split, and causal problems on an entry of their own with the row folds as
/// trees, those of fewer than `LONG_KEYS_FROM` keys with tiles chained on the one Q buffer and
/// the next tile's Q asked of L2; 80-key blocks, two split stages and 24/240 at d = 256; every plan
/// inside Hopper's 227 KiB and 64 Ki registers, every entry named for its shape.
#[test]
fn attention_shape_table_per_problem() {
    use warpforge::abi::attention_sm90::{
        CONSUMERS, HEAD_DIMS, LAUNCH_REGISTERS, LONG_KEYS_FROM, SHAPES, SM90_SMEM_LIMIT, THREADS, shape_for,
        shape_index, smem_plan,
    };
    let table: Vec<_> = SHAPES
        .iter()
        .map(|s| {
            let regs = (s.producer_regs, s.consumer_regs);
            let folds = (s.tree_row_folds, s.chain_tiles, s.prefetch_next_q);
            (s.head_dim, s.keys, s.stages, s.split_kv_rings, regs, s.persistent, s.q_stages, folds)
        })
        .collect();
    assert_eq!(
        table,
        [
            (64, 128, 4, false, (40, 232), true, 2, (false, true, false)),
            (64, 176, 4, false, (40, 232), true, 2, (false, true, false)),
            (128, 128, 3, false, (40, 232), true, 1, (false, false, false)),
            (128, 176, 2, true, (24, 240), true, 1, (false, false, false)),
            (256, 80, 2, true, (24, 240), true, 1, (false, false, false)),
            (128, 128, 3, false, (40, 232), true, 1, (true, false, false)),
            (128, 128, 3, false, (40, 232), true, 1, (true, true, true))
        ]
    );
    assert_eq!(LONG_KEYS_FROM, 4096);
    for d in HEAD_DIMS {
        for seq_k in [1, 512, LONG_KEYS_FROM - 1, LONG_KEYS_FROM, 1 << 20] {
            let (causal, plain) = (shape_for(d, true, seq_k).unwrap(), shape_for(d, false, seq_k).unwrap());
            assert_eq!((causal.head_dim, plain.head_dim), (d, d));
            let long = seq_k >= LONG_KEYS_FROM;
            let want = match d {
                256 => (80, 80),
                _ if long => (128, 176),
                _ => (128, 128),
            };
            assert_eq!((causal.keys, plain.keys), want, "d{d}, {seq_k} keys");
            // Only causal d = 128 folds its rows as trees, and chains its tiles below LONG_KEYS_FROM.
            assert_eq!((causal.tree_row_folds, plain.tree_row_folds), (d == 128, false), "d{d}, {seq_k} keys");
            if d == 128 {
                assert_eq!((causal.chain_tiles, plain.chain_tiles), (!long, false), "d{d}, {seq_k} keys");
            }
        }
    }
    assert_eq!(shape_for(96, false, 4096), None);
    // 168 registers per thread at launch (⌊65536 / 384⌋ rounded down to 8): what setmaxnreg moves.
    assert_eq!(LAUNCH_REGISTERS, 168 * 384);
    for (index, s) in SHAPES.into_iter().enumerate() {
        assert_eq!(shape_index(s), index);
        let (d, keys) = (s.head_dim, s.keys);
        let kv_stage = 2 * keys * d * 2;
        let bytes = smem_plan(s).bytes();
        assert!(bytes >= s.q_stages * 128 * d * 2 + s.stages * kv_stage, "d{d}/{keys}: Q and the ring fit the plan");
        assert!(smem_plan(s).launch_bytes() <= SM90_SMEM_LIMIT, "d{d}/{keys}: {} bytes", smem_plan(s).launch_bytes());
        let consumers = CONSUMERS * 128;
        assert!((THREADS - consumers) * s.producer_regs + consumers * s.consumer_regs <= LAUNCH_REGISTERS);
        let suffix = match (keys, s.tree_row_folds, s.chain_tiles) {
            (176, _, _) => "_k176",
            (_, true, true) => "_causal_short",
            (_, true, false) => "_causal",
            _ => "",
        };
        for (entry, dtype) in [(bf16::ATTENTION_ENTRIES, "bf16"), (f16::ATTENTION_ENTRIES, "f16")] {
            assert_eq!(entry[index].name(), format!("attention_{dtype}_d{d}{suffix}_sm90"));
        }
    }
}

proptest! {
    /// Any field values: `Err(InvalidArgument)` or extents that are the exact products.
    #[test]
    fn attention_problem_check_never_panics(
        batch in prop_oneof![0usize..4, any::<usize>()],
        heads_kv in prop_oneof![0usize..4, any::<usize>()],
        group in prop_oneof![0usize..9, any::<usize>()],
        seq_q in prop_oneof![0usize..2000, any::<usize>()],
        seq_k in prop_oneof![0usize..2000, any::<usize>()],
        head_dim in prop::sample::select(vec![0usize, 32, 64, 100, 128, 192, 256, 512]),
        scale in prop_oneof![Just(0.125f32), any::<f32>()],
    ) {
        let mut p = AttentionProblem::new(batch, heads_kv.wrapping_mul(group), heads_kv, seq_q, seq_k, head_dim);
        p.softmax_scale = scale;
        match p.check() {
            Err(Error::InvalidArgument(_)) => {}
            Err(other) => prop_assert!(false, "untyped error {other:?}"),
            Ok(e) => {
                let q = batch as u128 * seq_q as u128 * p.heads_q as u128 * head_dim as u128;
                let kv = batch as u128 * seq_k as u128 * heads_kv as u128 * head_dim as u128;
                prop_assert_eq!((e.q as u128, e.kv as u128), (q, kv));
                prop_assert_eq!(e.lse as u128, batch as u128 * seq_q as u128 * p.heads_q as u128);
                prop_assert!(head_dim == 64 || head_dim == 128 || head_dim == 256);
                prop_assert!(scale > 0.0 && scale.is_finite());
                prop_assert_eq!(e.group * heads_kv, p.heads_q);
            }
        }
    }
}

/// Each invalid argument of `attention` is an `Error::InvalidArgument`, and nothing is
/// launched: the output keeps its poison. A valid call on the same buffers succeeds first.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_refuses_invalid_arguments_without_launching() {
    let (device, wf) = gpu();
    let stream = device.stream();
    let p = AttentionProblem::new(1, 4, 2, 33, 40, 64);
    let e = p.check().unwrap();
    let q = stream.clone_htod(&vec![bf16::ONE; e.q + 8]).unwrap();
    let kv = stream.clone_htod(&vec![bf16::ONE; e.kv + 8]).unwrap();
    let poison = vec![bf16::NAN; e.q + 8];
    let mut o = stream.clone_htod(&poison).unwrap();
    let mut lse = stream.clone_htod(&vec![f32::NAN; e.lse]).unwrap();
    wf.attention(stream, &p, &q, &kv, &kv, &mut o, Some(&mut lse)).unwrap();
    let valid: Vec<bf16> = stream.clone_dtoh(&o).unwrap();
    assert!(valid[..e.q].iter().all(|&x| x == bf16::ONE), "all-ones V gives O = 1");
    let lse_host: Vec<f32> = stream.clone_dtoh(&lse).unwrap();
    let want = 0.125f32 * 64.0 + (40f32).ln();
    assert!(lse_host.iter().all(|&l| (l - want).abs() < 1e-3), "LSE = scale·d + ln(seq_k): {lse_host:?}");
    stream.memcpy_htod(&poison, &mut o).unwrap();

    let untouched = |o: &cudarc::driver::CudaSlice<bf16>, what: &str| {
        let now: Vec<bf16> = stream.clone_dtoh(o).unwrap();
        assert!(now.iter().all(|x| x.is_nan()), "{what}: O was written");
    };
    let short_q = q.slice(..e.q - 1);
    expect_invalid("q too short", wf.attention(stream, &p, &short_q, &kv, &kv, &mut o, None));
    let short_kv = kv.slice(..e.kv - 1);
    expect_invalid("k too short", wf.attention(stream, &p, &q, &short_kv, &kv, &mut o, None));
    expect_invalid("v too short", wf.attention(stream, &p, &q, &kv, &short_kv, &mut o, None));
    {
        let mut short_o = o.slice_mut(..e.q - 1);
        expect_invalid("o too short", wf.attention(stream, &p, &q, &kv, &kv, &mut short_o, None));
    }
    {
        let mut short_lse = lse.slice_mut(..e.lse - 1);
        expect_invalid("lse too short", wf.attention(stream, &p, &q, &kv, &kv, &mut o, Some(&mut short_lse)));
    }
    let odd_q = q.slice(1..);
    expect_invalid("q misaligned for TMA", wf.attention(stream, &p, &odd_q, &kv, &kv, &mut o, None));
    let odd_kv = kv.slice(1..);
    expect_invalid("k misaligned for TMA", wf.attention(stream, &p, &q, &odd_kv, &kv, &mut o, None));
    {
        let mut odd_o = o.slice_mut(1..);
        expect_invalid("o misaligned", wf.attention(stream, &p, &q, &kv, &kv, &mut odd_o, None));
    }
    let mut bad = p;
    bad.heads_kv = 3;
    expect_invalid("GQA not divisible", wf.attention(stream, &bad, &q, &kv, &kv, &mut o, None));
    bad = p;
    bad.head_dim = 96;
    expect_invalid("head_dim 96", wf.attention(stream, &bad, &q, &kv, &kv, &mut o, None));
    let cu = stream.clone_htod(&[0u32, 33]).unwrap();
    let short_cu = cu.slice(..1);
    let varlen = AttentionVarlenProblem::new(1, 4, 2, 33, 40, 33, 40, 64);
    expect_invalid(
        "cu_seqlens_q too short",
        wf.attention_varlen(stream, &varlen, &q, &kv, &kv, &short_cu, &cu, &mut o, None),
    );
    expect_invalid(
        "cu_seqlens_k too short",
        wf.attention_varlen(stream, &varlen, &q, &kv, &kv, &cu, &short_cu, &mut o, None),
    );
    let mut bad_varlen = varlen;
    bad_varlen.max_seq_q = 34;
    expect_invalid(
        "max_seq_q > total_q",
        wf.attention_varlen(stream, &bad_varlen, &q, &kv, &kv, &cu, &cu, &mut o, None),
    );
    untouched(&o, "after the refusals");
}

/// `AttentionVarlenProblem::check`: the shared rules, and the longest sequences within the totals.
#[test]
fn attention_varlen_problem_check_refuses_bad_shapes() {
    let ok = AttentionVarlenProblem::new(3, 8, 2, 500, 700, 300, 400, 64);
    let e = ok.check().unwrap();
    assert_eq!((e.group, e.q, e.kv, e.lse), (4, 500 * 8 * 64, 700 * 2 * 64, 8 * 500));
    let with = |f: &dyn Fn(&mut AttentionVarlenProblem)| {
        let mut p = ok;
        f(&mut p);
        p
    };
    let bad: [(&str, AttentionVarlenProblem); 9] = [
        ("batch 0", with(&|p| p.batch = 0)),
        ("total_q 0", with(&|p| p.total_q = 0)),
        ("max_seq_q 0", with(&|p| p.max_seq_q = 0)),
        ("max_seq_q > total_q", with(&|p| p.max_seq_q = 501)),
        ("max_seq_k > total_k", with(&|p| p.max_seq_k = 701)),
        ("head_dim 32", with(&|p| p.head_dim = 32)),
        ("GQA not divisible", with(&|p| p.heads_kv = 3)),
        ("total rows ≥ 2^31", with(&|p| p.total_k = 1 << 31)),
        ("scale inf", with(&|p| p.softmax_scale = f32::INFINITY)),
    ];
    for (what, p) in bad {
        expect_invalid(what, p.check());
    }
}
