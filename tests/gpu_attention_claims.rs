//! The persistent attention grid's tile claims (`logic::schedule::claims`) on the GPU: problems
//! with several times more tiles than SMs, causal (unequal tiles, in bands sorted longest
//! first) and not, each checked against the float64 reference; then one causal problem run
//! back to back on one stream and on two streams at once, each output poisoned first and
//! compared bit for bit with the first run's: a launch that did not leave its counters at zero
//! would skip or repeat tiles in the next one, leaving NaN or different rows.

use half::bf16;
use warpforge::AttentionProblem;

use crate::common::{gpu, random_bf16};
use crate::gpu_attention::{Case, check_case};

/// Problems with many tiles per SM (128-query tiles × query heads × sequences).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_persistent_grid_covers_many_tiles() {
    // (batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal): 288, 336, 384, 520 and 640
    // tiles (at d = 64 each CTA cycles through both Q buffers several times, chaining its
    // tiles), then 384 and 288 at d = 256 (one Q buffer: each tile's slot record is read again
    // for its store while the next tile's is published beside it).
    let cases = [
        (2, 16, 4, 1100, 1100, 128, true),
        (3, 16, 16, 700, 900, 64, true),
        (1, 32, 4, 1500, 1500, 128, false),
        (5, 8, 1, 1600, 1300, 64, true),
        (4, 32, 8, 600, 650, 64, false),
        (3, 16, 4, 900, 1000, 256, true),
        (2, 16, 16, 1100, 700, 256, false),
    ];
    for (batch, heads_q, heads_kv, seq_q, seq_k, head_dim, causal) in cases {
        let mut problem = AttentionProblem::new(batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
        problem.causal = causal;
        check_case::<bf16>(&Case { problem, large_logits: false, seed: 11 });
    }
}

/// Launch after launch, on one stream and on two at once: the same bits every time.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn attention_counters_are_zero_again_after_every_launch() {
    let (device, wf) = gpu();
    let mut problem = AttentionProblem::new(2, 16, 2, 1000, 1000, 128);
    problem.causal = true;
    let e = problem.check().expect("a valid problem");
    let data = |salt: u64, n: usize| random_bf16(salt, n, 1.0);
    let streams = [device.stream().clone(), device.context().new_stream().unwrap()];
    let inputs: Vec<_> = streams
        .iter()
        .map(|s| {
            let (q, k, v) = (data(1, e.q), data(2, e.kv), data(3, e.kv));
            (s.clone_htod(&q).unwrap(), s.clone_htod(&k).unwrap(), s.clone_htod(&v).unwrap())
        })
        .collect();
    let poison = vec![bf16::NAN; e.q];
    let mut first: Option<Vec<u16>> = None;
    for round in 0..4 {
        // Both streams' launches are enqueued before either is read back, so they overlap.
        let outputs: Vec<_> = streams
            .iter()
            .zip(&inputs)
            .map(|(s, (q, k, v))| {
                let mut o = s.clone_htod(&poison).unwrap();
                wf.attention(s, &problem, q, k, v, &mut o, None).unwrap();
                o
            })
            .collect();
        for (which, (s, o)) in streams.iter().zip(&outputs).enumerate() {
            let bits: Vec<u16> = s.clone_dtoh(o).unwrap().into_iter().map(|x| x.to_bits()).collect();
            let unwritten = bits.iter().filter(|b| bf16::from_bits(**b).is_nan()).count();
            assert_eq!(unwritten, 0, "round {round}, stream {which}: {unwritten} elements of O not written");
            match &first {
                None => first = Some(bits),
                Some(want) => {
                    let differ = bits.iter().zip(want).filter(|(a, b)| a != b).count();
                    assert_eq!(differ, 0, "round {round}, stream {which}: {differ} elements differ from the first run");
                }
            }
        }
    }
    // The same problem and data against the float64 reference (a launch of its own: every
    // launch above gave the same bits).
    check_case::<bf16>(&Case { problem, large_logits: false, seed: 0 });
}
