//! Attention forward for Hopper: `O = softmax(scale · Q·Kᵀ [+ causal mask]) · V` per query
//! head, bf16 or f16 Q/K/V/O, f32 accumulation, head dimensions 64, 128 and 256, GQA/MQA, an
//! optional per-row log-sum-exp.
//!
//! Algorithm (FlashAttention-2/3's online softmax on wgmma): one CTA per (128-query tile,
//! query head, sequence). The tile's two consumer warpgroups own 64 query rows each and walk
//! the keys in blocks of `block_n(d)` keys, 128 at d ≤ 128 and 80 at d = 256: `S = Q·Kᵀ` by
//! SS wgmma (`m64n128k16` / `m64n80k16`, Q and K from shared memory), the mask (sequence end; causal, bottom-right aligned: `logic::attention`), then
//! `parts::rows::OnlineSoftmax`: the row maximum over the quad, the old sums rescaled by
//! `2^(m_old − m_new)` *before* the exponentials, `P = 2^(S·scale·log2 e − m)`; P is rounded
//! from the S accumulator straight into RS A fragments (`parts::rows::AFragments8`, or
//! `AFragments5` for 80 keys: no shared memory, no shuffles) and `O += P·V` runs as RS wgmma
//! (`m64n{d}k16`, one per 16 keys) with V read MN-major from shared memory. FA3's intra-warpgroup overlap: each step issues block j's `Q·Kᵀ` and then block
//! j − 1's `P·V`, waits for the scores only (`wait_group 1`), computes block j's softmax while
//! `P·V` runs on the tensor cores, then waits for `P·V`, releases block j − 1's stage and
//! rescales O by block j's factor. O is normalised by the row sums once at the end and stored
//! directly (4-byte pairs, rows past the sequence skipped). The grid walks the query tiles last
//! first, so causal tiles with the most key blocks start first.
//!
//! GQA: query head `h` reads key/value head `h / group`. The grid is (query tiles × group,
//! key/value heads, sequences) with the group's heads fastest, so the CTAs of a group run side
//! by side on the same query tile and key blocks: a K/V block is read from HBM about once per
//! group and from L2 by the rest of it (with group 1 the query tiles of a head run side by side
//! and share K/V the same way).
//!
//! Warp roles (384 threads):
//! - warpgroup 0, producer: one elected thread loads Q once (its own barrier) and then the K
//!   and V boxes of every key block into a ring ([`parts::mainloop::produce`]), registers
//!   lowered to 40;
//! - warpgroups 1 and 2, consumers (registers raised to 232, also at d = 256, where O alone is
//!   128, the 80-key scores 40 and their P 20): as above; every consumer thread
//!   releases every ring stage once after its wait for the wgmmas reading it (the ring counts
//!   256 arrivals: no leader branch sits before the warpgroup's `.aligned` instructions).
//!
//! Layout: Q, K, V and O are strided (head_dim, heads, rows, sequences) tensors, head_dim
//! contiguous (packed `[batch, seq, heads, head_dim]`, torch's `[batch, heads, seq, head_dim]`,
//! views of a fused QKV projection, or variable length: one sequence slice of all the rows and
//! cumulative offsets); the tensor maps are 4-D with the caller's strides and boxes of 64
//! columns × 1 head × 128 rows (Q) or × `block_n(d)` rows (K, V) × 1 sequence under 128-byte
//! swizzle, and O is stored through `AttentionParams`' strides. A K box may run past its
//! sequence (zero fill at fixed length; the next sequence's rows or zero fill at variable
//! length); those keys are masked, so their P is 0.
//!
//! Shared memory (`abi::attention_sm90::smem_plan`): Q 128 × d, and a ring of (K, V) stages of
//! `block_n(d)` × d each: 4 stages of 128 keys at d = 64 (144 KiB), 3 at d = 128 (224 KiB), 2
//! of 80 keys at d = 256 (Q 64 KiB + 2 × 80 KiB = 224 KiB). The shape table (key block, ring
//! depth, register split per head dimension) is `abi::attention_sm90`; the entries instantiate
//! one generic body with it. The pieces around the pipeline (sequence geometry, wgmma operands,
//! mask, output store) are `attention_sm90_parts`. Measured ratio vs
//! FlashAttention/cuDNN: not yet measured (docs/PERF.md will keep it).
//!
//! FA3's inter-warpgroup ping-pong: the two consumer warpgroups take turns issuing their
//! wgmmas (two named barriers), so one's softmax runs while the tensor cores work through the
//! other's products.

use core::marker::PhantomData;

use warpforge_dsl::abi::attention_sm90::{self as shape, BLOCK_M, CONSUMERS, HEAD_CHUNK};
use warpforge_dsl::abi::{AttentionParams, TensorMap};
use warpforge_dsl::logic::attention::kv_blocks;
use warpforge_dsl::logic::fragment::{WARPGROUP_THREADS, WGMMA_M};
use warpforge_dsl::mbarrier::{Mbarrier, Phase};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::parts::mainloop::produce;
use warpforge_dsl::parts::rows::{self, AFragments, AFragments5, AFragments8, OnlineSoftmax, Pack16};
use warpforge_dsl::pipeline::{Pipeline, PipelineState, TmaLoad};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{NamedBarrier, sync_threads};
use warpforge_dsl::thread::{block_idx, thread_rank, warp_id, warpgroup_id};
use warpforge_dsl::tile::{SmemTile, SmemTileMnRing, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{
    Acc64x64F32, Acc64x80F32, Acc64x128F32, Acc64x256F32, Accumulator, WgmmaRs, WgmmaSs,
};
use warpforge_dsl::warpgroup::{self, WgmmaElement};
use warpforge_dsl::{tma, warp};

use crate::attention_sm90_parts::{Operands, Q_ROWS, Rows, sequence, slice, store_rows};

const _: () = assert!(BLOCK_M == CONSUMERS * WGMMA_M, "each consumer warpgroup owns one wgmma M of queries");
/// Head-dimension columns of a box.
pub(crate) const CHUNK: usize = HEAD_CHUNK as usize;
/// Threads in each phase of a ping-pong turn barrier: both consumer warpgroups.
const TURN_THREADS: u32 = CONSUMERS * WARPGROUP_THREADS;

/// A Q box: 128 query rows × 64 head columns. // (Q_ROWS, CHUNK)
type QChunk<T> = SmemTile<T, Q_ROWS, CHUNK, Swizzle128B>;
/// A K or V box: `BN` keys × 64 head columns. // (BN, CHUNK)
type KvChunk<T, const BN: usize> = SmemTile<T, BN, CHUNK, Swizzle128B>;

/// What one ring stage receives: the K and V boxes of a `BN`-key block, `DC` head chunks each.
struct KvStage<T, const DC: usize, const BN: usize>(PhantomData<T>);

impl<T: Copy, const DC: usize, const BN: usize> TmaLoad for KvStage<T, DC, BN> {
    const BYTES: u32 = 2 * DC as u32 * KvChunk::<T, BN>::BYTES;
}

/// The kernel, generic over the element `T`, the scores accumulator `S` (64 × `BN`, one key
/// block), P's fragments `P` (`BN / 16` K steps), the output accumulator `O` (64 × `D`), the
/// head dimension `D` = `DC` chunks of 64, the keys per block `BN`, the ring depth, `KCH` =
/// `RING · DC` (the K ring's boxes) and the producer's and consumers' register budgets (all
/// from `abi::attention_sm90` for `D`).
///
/// # Safety
/// The maps describe Q, K and V as 4-D (head_dim, heads, rows, sequences) tensors of `T`
/// under 128-byte swizzle with box 64 × 1 × 128 × 1 (Q) and 64 × 1 × `BN` × 1 (K and V, with
/// the key/value heads; one sequence slice of every row at variable length); `p` as documented
/// on [`AttentionParams`], its O (and LSE) buffers holding every element its strides reach for
/// every row of every sequence; grid (`q_tiles · group`, heads_kv, batch), 384 threads,
/// `attention_sm90::smem_plan(D)` launch bytes.
#[inline(always)]
unsafe fn attention<
    T,
    S,
    P,
    O,
    const D: usize,
    const DC: usize,
    const BN: usize,
    const RING: usize,
    const KCH: usize,
    const PRODUCER_REGS: u32,
    const CONSUMER_REGS: u32,
>(
    q_map: &TensorMap,
    k_map: &TensorMap,
    v_map: &TensorMap,
    p: &AttentionParams,
) where
    T: WgmmaElement + Pack16 + Output,
    S: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
    P: AFragments,
    O: Accumulator<Elem = f32> + WgmmaRs<T::Kind, T::Kind>,
{
    const {
        assert!(D == DC * CHUNK && O::N as usize == D && KCH == RING * DC, "tile shapes agree");
        assert!(S::N as usize == BN && BN as u32 == 16 * P::STEPS, "a key block is the scores' N and P's K");
        assert!(BN as u32 == shape::block_n(D as u32) && RING as u32 == shape::stages(D as u32), "the ABI's plan");
    };
    let block_n = BN as u32;
    // x walks the heads of a GQA group fastest (they read the same K/V blocks at about the same
    // time: once from HBM, then from L2), then the query tiles, last first; y is the key/value
    // head. `max(1)`: the host passes a group ≥ 1; no division-by-zero path (and no panic).
    let group = p.group.max(1);
    let (x, kv_head, batch) = (block_idx().x, block_idx().y, block_idx().z);
    let (tile, head) = (p.q_tiles - 1 - x / group, kv_head * group + x % group);
    // SAFETY: the grid's z extent is the batch (contract).
    let seq = unsafe { sequence(p, batch) };
    let m0 = tile * BLOCK_M;
    if m0 >= seq.q_len {
        // A variable-length sequence shorter than the longest: the whole CTA leaves together.
        return;
    }
    let causal = p.causal != 0;
    let blocks = kv_blocks(m0, BLOCK_M, seq.q_len, seq.k_len, causal, block_n);

    // Shared-memory plan (`abi::attention_sm90::smem_plan`).
    let mut smem = DynamicShared::window();
    let q_tile = SmemTileRing::<T, Q_ROWS, CHUNK, Swizzle128B, DC>::alloc(&mut smem);
    let k_ring = SmemTileRing::<T, BN, CHUNK, Swizzle128B, KCH>::alloc(&mut smem);
    let v_ring = SmemTileMnRing::<T, BN, CHUNK, DC, Swizzle128B, RING>::alloc(&mut smem);
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };
    // SAFETY: initialised below by thread 0 before the pipeline's init fence, published by the
    // block barrier.
    let q_full = unsafe { Mbarrier::at(Mbarrier::alloc(&mut smem)) };

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(q_map);
        tma::prefetch(k_map);
        tma::prefetch(v_map);
        // SAFETY: one thread; Q's barrier completes on the producer's one arrival plus Q's
        // bytes; every consumer thread releases every stage once per lap (no leader branch
        // before the warpgroup's `.aligned` instructions).
        unsafe {
            q_full.init(1);
            pipe.init(CONSUMERS * WARPGROUP_THREADS);
        }
    }
    // SAFETY: all 384 threads reach it.
    unsafe { sync_threads() };

    if warpgroup_id() == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            let (kv_head, seq_slice) = (kv_head as i32, slice(p, batch) as i32);
            let q_row = (seq.q_base + m0) as i32;
            // SAFETY: one arrival announcing exactly the bytes of the DC boxes loaded next.
            unsafe { q_full.arrive_expect_tx(DC as u32 * QChunk::<T>::BYTES) };
            for c in 0..DC as u32 {
                let x = c as i32 * CHUNK as i32;
                // SAFETY: Q's map has this box (contract); nothing reads the tile before the
                // barrier completes.
                unsafe { tma::load_4d(&q_tile.stage(c), q_map, x, head as i32, q_row, seq_slice, &q_full) };
            }
            let load = |stage: u32, block: u32, full: &Mbarrier| {
                let key_row = (seq.k_base + block * block_n) as i32;
                for c in 0..DC as u32 {
                    let x = c as i32 * CHUNK as i32;
                    // SAFETY: the maps' boxes are the chunk (contract); the slot was acquired
                    // free by `produce`.
                    unsafe {
                        tma::load_4d(&k_ring.stage(stage * DC as u32 + c), k_map, x, kv_head, key_row, seq_slice, full);
                        tma::load_4d(&v_ring.stage(stage).block(c), v_map, x, kv_head, key_row, seq_slice, full);
                    }
                }
            };
            let mut state = PipelineState::<RING>::START;
            // SAFETY: the one producer thread; each slot gets 2·DC boxes, `KvStage`'s bytes
            // (full boxes: out-of-bounds rows are zero-filled).
            unsafe { produce::<KvStage<T, DC, BN>, RING>(&pipe, &mut state, 0..blocks, load) };
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let wg = warpgroup_id() - 1;
    // This warpgroup's first query, and the softmax scale in base-2 units.
    let q0 = m0 + wg * WGMMA_M;
    let scale = p.scale_log2;
    let operands = Operands { q: q_tile, k: k_ring, v: v_ring, wg };
    let own_rows = Rows { q0, q_len: seq.q_len, k_len: seq.k_len, causal };
    // FA3's ping-pong: the two consumer warpgroups take turns issuing their wgmmas, so one's
    // softmax runs while the tensor cores work through the other's. Barrier 1 is warpgroup 0's
    // turn, 2 warpgroup 1's; a warpgroup syncs on its own before each issue and arrives on the
    // other's after it. Warpgroup 1 arrives once up front (warpgroup 0 goes first) and
    // warpgroup 0 syncs once at the end (taking warpgroup 1's last arrival), so every phase of
    // both barriers has exactly 256 threads.
    // SAFETY: ids 1 and 2 are used only here, with 256 threads (as above).
    let (first, second) = unsafe { (NamedBarrier::<TURN_THREADS>::new(1), NamedBarrier::<TURN_THREADS>::new(2)) };
    let (my_turn, their_turn) = if wg == 0 { (first, second) } else { (second, first) };
    if wg == 1 {
        // SAFETY: the up-front arrival of the protocol above (whole warpgroup).
        unsafe { their_turn.arrive() };
    }
    let mut o = O::ZERO;
    let mut softmax = OnlineSoftmax::START;
    let mut state = PipelineState::<RING>::START;
    q_full.wait_phase(Phase::ZERO);

    // Key block 0: its scores and P (O is still zero: nothing to rescale).
    pipe.consumer_wait(state);
    let mut s = S::ZERO;
    // SAFETY: the whole warpgroup, convergently; Q and the stage have landed (waited) and stay
    // until this warpgroup's release, after the covering wait; one turn (see above).
    unsafe {
        my_turn.sync();
        warpgroup::fence();
        operands.scores(&mut s, state.stage);
        warpgroup::commit();
        their_turn.arrive();
        warpgroup::wait::<0>();
    }
    own_rows.mask(&mut s, 0);
    // SAFETY: every lane of the warpgroup is here.
    unsafe { softmax.step(&mut s, scale) };
    let mut probs = P::of::<T, _>(&s);

    // Then per block: issue its `Q·Kᵀ` and the previous block's `P·V`, and compute its softmax
    // while `P·V` runs (FA3's intra-warpgroup overlap); rescale O once `P·V` has landed.
    let mut block = 1;
    while block < blocks {
        let previous = state;
        state.advance();
        pipe.consumer_wait(state);
        let mut s = S::ZERO;
        // SAFETY: as above; the scores' group is committed first, so `wait::<1>` returns once
        // they have landed while `P·V` may still run; `probs` is not modified before `wait::<0>`
        // (it is rewritten after it).
        unsafe {
            my_turn.sync();
            warpgroup::fence();
            operands.scores(&mut s, state.stage);
            warpgroup::commit();
            operands.pv(&mut o, &probs, previous.stage);
            warpgroup::commit();
            their_turn.arrive();
            warpgroup::wait::<1>();
        }
        own_rows.mask(&mut s, block);
        // SAFETY: every lane of the warpgroup is here.
        let alpha = unsafe { softmax.step(&mut s, scale) };
        // SAFETY: the whole warpgroup; then every wgmma reading `previous` completed, and each
        // thread's arrival is one of the ring's `CONSUMERS × 128` per stage and lap.
        unsafe {
            warpgroup::wait::<0>();
            pipe.consumer_release(previous);
        }
        rows::scale_rows(&mut o, alpha);
        // Rounded only now: the fragments may take the registers `P·V` was reading (a write
        // before its wait would serialise the wgmmas, ptxas C7513).
        probs = P::of::<T, _>(&s);
        block += 1;
    }
    // SAFETY: as above, for the last block's `P·V`.
    unsafe {
        my_turn.sync();
        warpgroup::fence();
        operands.pv(&mut o, &probs, state.stage);
        warpgroup::commit();
        their_turn.arrive();
        warpgroup::wait::<0>();
        pipe.consumer_release(state);
    }
    if wg == 0 {
        // SAFETY: the closing sync of the turn protocol (whole warpgroup).
        unsafe { my_turn.sync() };
    }

    // Normalise once, then write this warpgroup's rows of O and the log-sum-exp.
    // SAFETY: the whole warpgroup, after the last wait; the buffers as the contract says.
    unsafe { store_rows::<T, O>(o, &softmax, p, seq, (batch, head, q0)) };
}

/// `#[kernel]` entries over [`attention`]: name, element, head dimension, scores accumulator
/// (64 × `block_n(d)`), P's fragments, output accumulator (64 × d).
macro_rules! attention_entries {
    ($($name:ident: $t:ty, $d:literal, $scores:ty, $probs:ty, $acc:ty;)*) => {$(
        /// Attention forward entry point; see the module docs and [`AttentionParams`].
        ///
        /// # Safety
        /// See `attention`: tensor maps and parameters as the host launcher builds them.
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1)]
        pub unsafe fn $name(
            #[grid_constant] q_map: &TensorMap,
            #[grid_constant] k_map: &TensorMap,
            #[grid_constant] v_map: &TensorMap,
            params: AttentionParams,
        ) {
            const RING: usize = shape::stages($d) as usize;
            const BN: usize = shape::block_n($d) as usize;
            const DC: usize = $d / CHUNK;
            const PRODUCER: u32 = shape::producer_regs($d);
            const CONSUMER: u32 = shape::consumer_regs($d);
            // SAFETY: forwarded to the launcher's contract.
            unsafe {
                attention::<$t, $scores, $probs, $acc, $d, DC, BN, RING, { RING * DC }, PRODUCER, CONSUMER>(
                    q_map, k_map, v_map, &params,
                )
            }
        }
    )*};
}

attention_entries! {
    attention_bf16_d64_sm90: Bf16, 64, Acc64x128F32, AFragments8, Acc64x64F32;
    attention_bf16_d128_sm90: Bf16, 128, Acc64x128F32, AFragments8, Acc64x128F32;
    attention_bf16_d256_sm90: Bf16, 256, Acc64x80F32, AFragments5, Acc64x256F32;
    attention_f16_d64_sm90: F16, 64, Acc64x128F32, AFragments8, Acc64x64F32;
    attention_f16_d128_sm90: F16, 128, Acc64x128F32, AFragments8, Acc64x128F32;
    attention_f16_d256_sm90: F16, 256, Acc64x80F32, AFragments5, Acc64x256F32;
}
