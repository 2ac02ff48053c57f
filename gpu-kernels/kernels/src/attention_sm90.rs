//! Attention forward for Hopper: `O = softmax(scale · Q·Kᵀ [+ causal mask]) · V` per query
//! head, bf16 or f16 Q/K/V/O, f32 accumulation, head dimensions 64, 128 and 256, GQA/MQA, an
//! optional per-row log-sum-exp.
//!
//! Algorithm (FlashAttention-2/3's online softmax on wgmma): a CTA works on tiles of (128
//! queries, query head, sequence), one or several (`logic::attention::AttentionTiles`). The
//! grid is persistent (every entry's shape: `persistent`; the body also runs one CTA per tile):
//! each CTA starts on tile `blockIdx.x` and its producer claims
//! the next from the launch's counters (`logic::schedule::claims`: whichever CTA frees first
//! takes it, which balances causal and variable-length tiles; the counters end each launch at
//! zero), handing each index and its decoded work to the consumers through a shared-memory slot
//! under Q's full barrier (an index past the tiles stops them). The tile's two consumer warpgroups own 64 query rows each and walk the keys in blocks of the entry's shape (`abi::attention_sm90::SHAPES`): at d = 64 and 128,
//! 176 keys in non-causal problems of at least 4096 keys (FlashAttention-3's non-causal d = 128
//! block) and 128 in the others (the host picks the entry), 80 at d = 256:
//! `S = Q·Kᵀ` by SS wgmma (`m64n128k16` / `m64n176k16` / `m64n80k16`, Q and K from shared memory), the mask (sequence end; causal, bottom-right aligned: `logic::attention`), then
//! `parts::rows::OnlineSoftmax`: the row maximum over the quad, the old sums rescaled by
//! `2^(m_old − m_new)` *before* the exponentials, `P = 2^(S·scale·log2 e − m)`; P is rounded
//! from the S accumulator straight into RS A fragments (`parts::rows::AFragments8`,
//! `AFragments11` for 176 keys, `AFragments5` for 80: no shared memory, no shuffles) and `O += P·V` runs as RS wgmma
//! (`m64n{d}k16`, one per 16 keys) with V read MN-major from shared memory. FA3's intra-warpgroup overlap: each step issues block j's `Q·Kᵀ` and then block
//! j − 1's `P·V`, waits for the scores only (`wait_group 1`), computes block j's softmax while
//! `P·V` runs on the tensor cores, then waits for `P·V`, releases block j − 1's stage and
//! rescales O by block j's factor. O is normalised by the row sums once at the end and stored
//! from two row addresses per thread (4-byte pairs, rows past the sequence skipped). Tiles are numbered query tiles last
//! first, so causal tiles with the most key blocks start first. On a persistent grid the ring
//! runs on from tile to tile, and Q has a second barrier that the consumers arrive on after
//! their tile's last `Q·Kᵀ`: the producer loads the next tile's Q and first key blocks while
//! they finish `P·V` and store O (where the shape's `prefetch_next_q` says so it first asks L2
//! for that Q, as soon as it has claimed the tile, so the load reads L2). Where the shape says so (`chain_tiles`: d = 64 with two Q
//! buffers, causal d = 128 below 4096 keys with one) a consumer chains its tiles: a tile's
//! last `P·V` goes out in the same turn as the next
//! tile's first `Q·Kᵀ`, and its O is stored under that block's softmax and `P·V`.
//!
//! GQA: query head `h` reads key/value head `h / group`. The tiles are numbered with the
//! group's heads fastest, so the CTAs of a group run side by side on the same query tile and
//! key blocks: a K/V block is read from HBM about once per group and from L2 by the rest of it.
//! Equal tiles go head by head (the query tiles of a head side by side, sharing K/V the same
//! way); unequal ones in bands of heads sorted longest first, as wide as their K/V fits in L2
//! (`AttentionTiles::band_for`), so the tiles claimed last are short.
//!
//! Warp roles (384 threads):
//! - warpgroup 0, producer: one elected thread loads each tile's Q (its own full and free
//!   barriers) and then the K and V boxes of every key block into a K ring and a V ring walked
//!   in step ([`parts::mainloop::produce_pair`]), registers lowered to 40 (24 at d ≥ 128);
//! - warpgroups 1 and 2, consumers (registers raised to 232, 240 at d ≥ 128: at d = 128 a
//!   176-key block's scores are 88 and its P 44 beside O's 64, at d = 256 O alone is 128, the
//!   80-key scores 40 and their P 20): as above; every consumer thread releases every stage of
//!   both rings once after its wait for the wgmmas reading it, K after the block's `Q·Kᵀ` and V
//!   after its `P·V` a step later (each ring counts 256 arrivals: no leader branch sits before
//!   the warpgroup's `.aligned` instructions).
//!
//! Layout: Q, K, V and O are strided (head_dim, heads, rows, sequences) tensors, head_dim
//! contiguous (packed `[batch, seq, heads, head_dim]`, torch's `[batch, heads, seq, head_dim]`,
//! views of a fused QKV projection, or variable length: one sequence slice of all the rows and
//! cumulative offsets); the tensor maps are 4-D with the caller's strides and boxes of 64
//! columns × 1 head × 128 rows (Q) or × the shape's keys (K, V) × 1 sequence under 128-byte
//! swizzle, and O is stored through `AttentionParams`' strides. A K box may run past its
//! sequence (zero fill at fixed length; the next sequence's rows or zero fill at variable
//! length); those keys are masked, so their P is 0.
//!
//! Shared memory (`abi::attention_sm90::smem_plan`): Q 128 × d (two buffers at d = 64), and the
//! K and V rings, stages of the shape's keys × d each: 4 stages of 128 or 176 keys at d = 64
//! (160 or 208 KiB with both Q buffers), 3 of 128 keys at d = 128 (224 KiB) or 2 of 176 keys
//! (Q 32 KiB + 2 × 88 KiB = 208 KiB), 2 of 80 keys at d = 256 (Q 64 KiB + 2 × 80 KiB = 224 KiB).
//! The shape table (key block, ring depth, register split, row folds per entry; causal d = 128
//! has an entry of its own) is `abi::attention_sm90::SHAPES`; the entries
//! (`attention_sm90_entries`) instantiate one generic body with it. A consumer warpgroup's walk
//! of a tile is `attention_sm90_consumer`; the pieces around the pipeline (tiles and sequence geometry, wgmma
//! operands, mask, a block's tail, output store) are `attention_sm90_parts`. FA3's ping-pong:
//! the two consumer warpgroups take turns issuing their wgmmas (two named barriers), so one's
//! softmax runs while the tensor cores work through the other's products.

use core::marker::PhantomData;

use warpforge_dsl::abi::attention_sm90::{BLOCK_M, CONSUMERS, HEAD_CHUNK};
use warpforge_dsl::abi::{AttentionParams, TensorMap};
use warpforge_dsl::logic::fragment::{WARPGROUP_THREADS, WGMMA_M};
use warpforge_dsl::mbarrier::{Mbarrier, Phase};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::parts::mainloop::{produce, produce_pair};
use warpforge_dsl::parts::rows::{AFragments, Pack16};
use warpforge_dsl::pipeline::{Pipeline, PipelineState, TmaLoad};
use warpforge_dsl::shared::DynamicShared;
use warpforge_dsl::sync::{NamedBarrier, sync_threads};
use warpforge_dsl::thread::{block_idx, grid_dim, thread_rank, warp_id};
use warpforge_dsl::tile::{SmemTile, SmemTileMnRing, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Accumulator, WgmmaRs, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement};
use warpforge_dsl::{tma, warp};

use crate::attention_sm90_consumer::Consumer;
use crate::attention_sm90_parts::{Claims, Operands, Q_ROWS, TileSlot, attention_tiles, slice, tile_work};

const _: () = assert!(BLOCK_M == CONSUMERS * WGMMA_M, "each consumer warpgroup owns one wgmma M of queries");
/// Head-dimension columns of a box.
pub(crate) const CHUNK: usize = HEAD_CHUNK as usize;
/// Threads in each phase of a ping-pong turn barrier: both consumer warpgroups.
pub(crate) const TURN_THREADS: u32 = CONSUMERS * WARPGROUP_THREADS;

/// A Q box: 128 query rows × 64 head columns. // (Q_ROWS, CHUNK)
type QChunk<T> = SmemTile<T, Q_ROWS, CHUNK, Swizzle128B>;
/// A K or V box: `BN` keys × 64 head columns. // (BN, CHUNK)
type KvChunk<T, const BN: usize> = SmemTile<T, BN, CHUNK, Swizzle128B>;

/// What a Q buffer receives: the Q boxes of a 128-row tile, `DC` head chunks.
struct QStage<T, const DC: usize>(PhantomData<T>);
impl<T: Copy, const DC: usize> TmaLoad for QStage<T, DC> {
    const BYTES: u32 = DC as u32 * QChunk::<T>::BYTES;
}
/// What one stage of the K ring or of the V ring receives: the K (or V) boxes of a `BN`-key
/// block, `DC` head chunks.
struct KvStage<T, const DC: usize, const BN: usize>(PhantomData<T>);
impl<T: Copy, const DC: usize, const BN: usize> TmaLoad for KvStage<T, DC, BN> {
    const BYTES: u32 = DC as u32 * KvChunk::<T, BN>::BYTES;
}

/// The kernel, generic over the element `T`, the scores accumulator `S` (64 × `BN`, one key
/// block), P's fragments `P` (`BN / 16` K steps), the output accumulator `O` (64 × `D`), the
/// head dimension `D` = `DC` chunks of 64, the keys per block `BN`, the ring depth, `KCH` =
/// `RING · DC` (the K ring's boxes), the Q buffers `QS` and `QCH` = `QS · DC` (their boxes) and
/// the producer's and consumers' register budgets, and the shape's flags (all from
/// `abi::attention_sm90`).
///
/// # Safety
/// The maps describe Q, K and V as 4-D (head_dim, heads, rows, sequences) tensors of `T`
/// under 128-byte swizzle with box 64 × 1 × 128 × 1 (Q) and 64 × 1 × `BN` × 1 (K and V, with
/// the key/value heads; one sequence slice of every row at variable length); `p` as documented
/// on [`AttentionParams`], its O (and LSE) buffers holding every element its strides reach for
/// every row of every sequence; a 1-D grid of at most `AttentionTiles::count` CTAs (< 2^31),
/// exactly that many unless `PERSISTENT` (the shape's `persistent`), whose launches take
/// `p.tile_counters` (two u32, zero at the launch, this launch's alone while it runs); 384
/// threads, `attention_sm90::smem_plan(shape)` launch bytes, for the `attention_sm90::Shape`
/// whose values the const generics are.
#[inline(always)]
pub(crate) unsafe fn attention<
    T,
    S,
    P,
    O,
    const D: usize,
    const DC: usize,
    const BN: usize,
    const RING: usize,
    const KCH: usize,
    const QS: usize,
    const QCH: usize,
    const PRODUCER_REGS: u32,
    const CONSUMER_REGS: u32,
    const PERSISTENT: bool,
    const DEFER_TAIL: bool,
    const SPLIT: bool,
    const TREE: bool,
    const CHAIN: bool,
    const PREFETCH_Q: bool,
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
        assert!(D == DC * CHUNK && O::N as usize == D && KCH == RING * DC && QCH == QS * DC, "tile shapes agree");
        assert!(S::N as usize == BN && BN as u32 == 16 * P::STEPS, "a key block is the scores' N and P's K");
        assert!(!CHAIN || PERSISTENT, "a chained tile's successor is on the same CTA");
    };
    // Shared-memory plan (`abi::attention_sm90::smem_plan`).
    let mut smem = DynamicShared::window();
    let q_tile = SmemTileRing::<T, Q_ROWS, CHUNK, Swizzle128B, QCH>::alloc(&mut smem);
    let k_ring = SmemTileRing::<T, BN, CHUNK, Swizzle128B, KCH>::alloc(&mut smem);
    let v_ring = SmemTileMnRing::<T, BN, CHUNK, DC, Swizzle128B, RING>::alloc(&mut smem);
    // With one ring of (K, V) stages (not `SPLIT`: the shape's `split_kv_rings`) V's
    // barriers are K's.
    // SAFETY: every thread runs this same plan; init precedes the barrier below.
    let k_pipe = unsafe { Pipeline::<RING>::alloc(&mut smem) };
    // SAFETY: as for K's.
    let v_pipe = if SPLIT { unsafe { Pipeline::<RING>::alloc(&mut smem) } } else { k_pipe };
    // The Q buffers' full and free barriers: a buffer is full on the producer's one arrival
    // plus Q's bytes, free on every consumer thread's arrival after its tile's last `Q·Kᵀ`.
    // SAFETY: as for K's.
    let q_pipe = unsafe { Pipeline::<QS>::alloc(&mut smem) };
    let slot = TileSlot::alloc::<QS>(&mut smem);

    // Barrier init.
    if thread_rank() == 0 {
        tma::prefetch(q_map);
        tma::prefetch(k_map);
        tma::prefetch(v_map);
        // SAFETY: one thread; every consumer thread releases every Q buffer and every stage of
        // both rings once per lap (no leader branch before the warpgroup's `.aligned`
        // instructions).
        unsafe {
            // The Q buffers' barriers (published by the rings' init fence below).
            for b in 0..QS as u32 {
                q_pipe.full(b).init(1);
                q_pipe.empty(b).init(CONSUMERS * WARPGROUP_THREADS);
            }
            k_pipe.init(CONSUMERS * WARPGROUP_THREADS);
            if SPLIT {
                v_pipe.init(CONSUMERS * WARPGROUP_THREADS);
            }
        }
    }
    // SAFETY: all 384 threads reach it.
    unsafe { sync_threads() };

    // This CTA's tiles: `blockIdx.x`, then (persistent grid) those its producer claims from the
    // launch's counters (`logic::schedule::claims`), handed to the consumers through `slot`.
    let tiles = attention_tiles::<PERSISTENT>(p);
    let first = block_idx().x;
    // SAFETY: every thread of the block, convergently (after the barrier above).
    let role = unsafe { warpgroup::uniform_id() };

    if role == 0 {
        // Producer.
        // SAFETY: the whole warpgroup executes it; the kernel declares threads + min blocks.
        unsafe { warpgroup::setmaxnreg_dec::<PRODUCER_REGS>() };
        // SAFETY: all 32 lanes of warp 0 call it together.
        if warp_id() == 0 && unsafe { warp::elect_one() }.is_some() {
            // SAFETY: the launch's counter pair (contract), only this thread of the CTA uses it.
            let claims = unsafe { Claims::new(p, tiles.count(), grid_dim().x) };
            let mut state = PipelineState::<RING>::START;
            // A Q buffer (and its slot) is free for the next tile once the consumers' free
            // barrier has completed its phase (the first lap passes at once): with two buffers
            // the next tile's Q loads while the consumers still read this tile's.
            let mut q_state = PipelineState::<QS>::START;
            let mut t = claims.rule.first(first);
            loop {
                // The next tile with queries (variable length skips the rest), or none.
                let work = loop {
                    if claims.rule.is_done(t) {
                        break None;
                    }
                    // SAFETY: `t` is a tile of the launch; the offsets as the contract says.
                    if let Some(w) = unsafe { tile_work(p, &tiles, t, BN as u32) } {
                        break Some(w);
                    }
                    t = if PERSISTENT { claims.claim() } else { tiles.count() };
                };
                if let (true, Some(next)) = (PREFETCH_Q, &work) {
                    // The next tile's Q asked of L2 now, a block or more before its buffer is
                    // free (the shape's `prefetch_next_q`).
                    let (q_row, seq_slice) = ((next.seq.q_base + next.m0) as i32, slice(p, next.at.batch) as i32);
                    for c in 0..DC as i32 {
                        // SAFETY: the box the load below reads (Q's map, contract).
                        unsafe { tma::prefetch_l2_4d(q_map, c * CHUNK as i32, next.at.head as i32, q_row, seq_slice) };
                    }
                }
                if PERSISTENT {
                    q_pipe.producer_wait(q_state);
                    // SAFETY: the one thread, after the free barrier, before the arrival below.
                    unsafe { slot.publish(TileSlot::record(q_state), t, work.as_ref()) };
                }
                let Some(w) = work else {
                    if PERSISTENT {
                        // SAFETY: the phase's one arrival, with no bytes: the consumers read
                        // the index past the tiles and stop.
                        unsafe { q_pipe.producer_commit(q_state) };
                    }
                    break;
                };
                let (kv_head, seq_slice) = (w.at.kv_head as i32, slice(p, w.at.batch) as i32);
                let q_row = (w.seq.q_base + w.m0) as i32;
                let q_full = q_pipe.full(q_state.stage);
                // SAFETY: one arrival announcing exactly the bytes of the DC boxes loaded
                // next, into a buffer no consumer reads any more (waited above).
                unsafe { q_full.arrive_expect_tx(QStage::<T, DC>::BYTES) };
                for c in 0..DC as u32 {
                    let x = c as i32 * CHUNK as i32;
                    let box_ = q_tile.stage(q_state.stage * DC as u32 + c);
                    // SAFETY: Q's map has this box (contract); nothing reads the buffer before
                    // the barrier completes.
                    unsafe { tma::load_4d(&box_, q_map, x, w.at.head as i32, q_row, seq_slice, &q_full) };
                }
                q_state.advance();
                let key_row = |block: u32| (w.seq.k_base + block * BN as u32) as i32;
                let load_k = |stage: u32, block: u32, full: &Mbarrier| {
                    for c in 0..DC as u32 {
                        let (x, box_) = (c as i32 * CHUNK as i32, k_ring.stage(stage * DC as u32 + c));
                        // SAFETY: the map's box is the chunk (contract); the slot was acquired
                        // free by `produce_pair`.
                        unsafe { tma::load_4d(&box_, k_map, x, kv_head, key_row(block), seq_slice, full) };
                    }
                };
                let load_v = |stage: u32, block: u32, full: &Mbarrier| {
                    for c in 0..DC as u32 {
                        let (x, box_) = (c as i32 * CHUNK as i32, v_ring.stage(stage).block(c));
                        // SAFETY: as for K.
                        unsafe { tma::load_4d(&box_, v_map, x, kv_head, key_row(block), seq_slice, full) };
                    }
                };
                // SAFETY: the one producer thread; each slot of either ring gets DC boxes,
                // `KvStage`'s bytes, or each (K, V) slot both (full boxes: out-of-bounds rows are
                // zero-filled).
                unsafe {
                    if SPLIT {
                        let rings = (&k_pipe, &v_pipe);
                        produce_pair::<KvStage<T, DC, BN>, KvStage<T, DC, BN>, RING>(
                            rings,
                            &mut state,
                            0..w.blocks,
                            load_k,
                            load_v,
                        )
                    } else {
                        let load = |stage: u32, block: u32, full: &Mbarrier| {
                            load_k(stage, block, full);
                            load_v(stage, block, full);
                        };
                        produce::<(KvStage<T, DC, BN>, KvStage<T, DC, BN>), RING>(
                            &k_pipe,
                            &mut state,
                            0..w.blocks,
                            load,
                        )
                    }
                };
                if !PERSISTENT {
                    break;
                }
                // Claimed once the tile's last key block has a slot, while the consumers still
                // work through the ring: a claim made earlier would commit this CTA to the next
                // tile while a long one still runs (the H200 at S = 16k causal: 3.5 % slower
                // than one CTA per tile, where the next tile goes to whichever SM frees first).
                t = claims.claim();
            }
            if PERSISTENT {
                claims.finish();
            }
        }
        return;
    }

    // Consumers.
    // SAFETY: whole warpgroup; see the producer.
    unsafe { warpgroup::setmaxnreg_inc::<CONSUMER_REGS>() };
    let wg = role - 1;
    // FA3's ping-pong: the two consumer warpgroups take turns issuing their wgmmas, so one's
    // softmax runs while the tensor cores work through the other's. Barrier 1 is warpgroup 0's
    // turn, 2 warpgroup 1's; a warpgroup syncs on its own before each issue and arrives on the
    // other's after it. Warpgroup 1 arrives once up front (warpgroup 0 goes first) and
    // warpgroup 0 syncs once at the end (taking warpgroup 1's last arrival), so every phase of
    // both barriers has exactly 256 threads (both take the same turns: the same tiles, the
    // same blocks).
    // SAFETY: ids 1 and 2 are used only here, with 256 threads (as above).
    let (first_turn, second_turn) =
        unsafe { (NamedBarrier::<TURN_THREADS>::new(1), NamedBarrier::<TURN_THREADS>::new(2)) };
    let turns = if wg == 0 { (first_turn, second_turn) } else { (second_turn, first_turn) };
    if wg == 1 {
        // SAFETY: the up-front arrival of the protocol above (whole warpgroup).
        unsafe { turns.1.arrive() };
    }
    // A tile's view: its Q buffer (a window of DC boxes) and free barrier, K and V, the turns.
    let consumer = |buffer: u32, record: u32| {
        let q_free = q_pipe.empty(buffer);
        let operands = Operands { q: q_tile.window::<DC>(buffer * DC as u32), k: k_ring, v: v_ring, wg };
        Consumer { p, rings: (&k_pipe, &v_pipe), q_free, operands, turns, tile: (slot, record) }
    };
    let mut ring = PipelineState::<RING>::START;
    let mut q_state = PipelineState::<QS>::START;
    if PERSISTENT {
        // The tiles the producer hands over, until an index past the last.
        // SAFETY: the whole warpgroup, at one position of the Q buffers' ring.
        let next_tile = |q_state| unsafe { slot.next(&q_pipe, q_state, tiles.count()) };
        // Each tile is walked and closed; chained (`CHAIN`: the shape's `chain_tiles`), each
        // stays open until the next one's walk closes it, and the last one after the loop.
        // SAFETY (each walk and close): the whole warpgroup; Q has landed and the producer
        // fills the ring for the tile; an open tile is this warpgroup's last, on this ring.
        // After each tile, `warp::converge`: the tile loop's back-edge reached by the whole
        // warp (O's and the LSE's stores branch per row).
        if CHAIN {
            if let Some((w, q_buffer, record)) = next_tile(q_state) {
                // SAFETY: as above.
                let mut open = unsafe {
                    consumer(q_buffer, record)
                        .walk::<S, P, O, true, DEFER_TAIL, SPLIT, TREE, false>(&w, &mut ring, None, None)
                };
                q_state.advance();
                // SAFETY: as above.
                unsafe { warp::converge() };
                while let Some((w, q_buffer, record)) = next_tile(q_state) {
                    let before = Some(open);
                    // SAFETY: as above.
                    open = unsafe {
                        consumer(q_buffer, record)
                            .walk::<S, P, O, true, DEFER_TAIL, SPLIT, TREE, false>(&w, &mut ring, None, before)
                    };
                    q_state.advance();
                    // SAFETY: as above.
                    unsafe { warp::converge() };
                }
                // SAFETY: as above (closing reads only the V ring).
                unsafe { consumer(0, 0).close::<P, O, true, SPLIT>(open) };
            }
        } else {
            while let Some((w, q_buffer, record)) = next_tile(q_state) {
                let own = consumer(q_buffer, record);
                // SAFETY: as above.
                unsafe { own.walk::<S, P, O, true, DEFER_TAIL, SPLIT, TREE, true>(&w, &mut ring, None, None) };
                q_state.advance();
                // SAFETY: as above.
                unsafe { warp::converge() };
            }
        }
    } else {
        // SAFETY: this CTA's one tile, as for the producer.
        let work = unsafe { tile_work(p, &tiles, first, BN as u32) };
        if let Some(w) = work {
            let q_full = q_pipe.full(0);
            let own = consumer(0, 0);
            let mut first_phase = Phase::ZERO;
            let q = Some((&q_full, &mut first_phase));
            // SAFETY: the whole warpgroup; `walk` waits for Q (buffer 0, first phase; waiting
            // here instead spilled 32 bytes at d = 256), the producer loads the key blocks.
            unsafe { own.walk::<S, P, O, false, DEFER_TAIL, SPLIT, TREE, true>(&w, &mut ring, q, None) };
        }
    }
    if wg == 0 {
        // SAFETY: the closing sync of the turn protocol (whole warpgroup).
        unsafe { turns.0.sync() };
    }
}
