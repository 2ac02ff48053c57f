//! The pieces of the attention forward kernel (`attention_sm90`) around its pipeline: which
//! tiles a CTA walks (claimed from the launch's counters on a persistent grid, handed from the
//! producer to the consumers through a shared-memory slot) and where their sequences lie, a consumer warpgroup's wgmma operands
//! (`Q·Kᵀ` and `P·V` over the rings), its mask of a key block, the tail of a key block, and the
//! store of its rows of O and the log-sum-exp.

use warpforge_dsl::abi::AttentionParams;
use warpforge_dsl::abi::attention_sm90::{BLOCK_M, TILE_SLOT_WORDS};
use warpforge_dsl::atomic::AtomicCell;
use warpforge_dsl::logic::acc_rows::slot_row;
use warpforge_dsl::logic::attention::{AttentionTile, AttentionTiles, Sequence, block_needs_mask, kv_blocks, visible};
use warpforge_dsl::logic::fragment::{WGMMA_M, acc_coord};
use warpforge_dsl::logic::schedule::claims::TileClaims;
use warpforge_dsl::parts::epilogue::{Output, store_row_pairs};
use warpforge_dsl::parts::rows::{self, AFragments, OnlineSoftmax, Pack16, RowPair};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::shared::{DynamicShared, SharedPtr};
use warpforge_dsl::sync::fence_acq_rel_gpu;
use warpforge_dsl::tile::{SmemTileMnRing, SmemTileRing, Swizzle128B};
use warpforge_dsl::warpgroup::acc::{Accumulator, WgmmaRs, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement};
use warpforge_dsl::{global, math, warp};

use crate::attention_sm90::CHUNK;

/// Rows of a Q box: the query tile.
pub(crate) const Q_ROWS: usize = BLOCK_M as usize;

/// The launch's tiles (`logic::attention::AttentionTiles`) from its parameters. One CTA per
/// tile (not `PERSISTENT`) walks band 1 whatever `p.band` says (the host passes 1): its
/// epilogue derives its tile again, and the wider band's arithmetic held live across the key
/// loop spilled at d = 256.
#[inline(always)]
pub(crate) fn attention_tiles<const PERSISTENT: bool>(p: &AttentionParams) -> AttentionTiles {
    let band = if PERSISTENT { p.band } else { 1 };
    AttentionTiles { q_tiles: p.q_tiles, group: p.group, heads_kv: p.heads_kv, batch: p.batch, band }
}

/// The producer's side of a persistent grid's tile claims (`logic::schedule::claims`) on the
/// launch's counter pair.
#[derive(Clone, Copy)]
pub(crate) struct Claims {
    pub(crate) rule: TileClaims,
    next: AtomicCell,
    finished: AtomicCell,
}

impl Claims {
    /// The claims of a launch of `grid` CTAs over `count` tiles on `p.tile_counters`.
    ///
    /// # Safety
    /// `p.tile_counters` is the launch's pair of u32 (contract), zero at its start, which only
    /// the producers access, atomically.
    #[inline(always)]
    pub(crate) unsafe fn new(p: &AttentionParams, count: u32, grid: u32) -> Self {
        let pair = p.tile_counters as *mut u32;
        // SAFETY: the contract above; the second counter is the next word.
        let (next, finished) = unsafe { (AtomicCell::new(pair), AtomicCell::new(pair.add(1))) };
        Claims { rule: TileClaims { count, grid }, next, finished }
    }

    /// Claims the next tile (one relaxed atomic): its index, `≥ count` once none is left.
    #[inline(always)]
    pub(crate) fn claim(&self) -> u32 {
        self.rule.next(self.next.fetch_add(1))
    }

    /// This CTA is done claiming: counts it finished, and the last CTA zeroes both counters
    /// for the next launch (every other CTA's claims were ordered before its count, which the
    /// fences make acquire-release).
    #[inline(always)]
    pub(crate) fn finish(&self) {
        fence_acq_rel_gpu();
        let before = self.finished.fetch_add(1);
        fence_acq_rel_gpu();
        if self.rule.is_last(before) {
            self.next.swap(0);
            self.finished.swap(0);
        }
    }
}

/// The tile the producer hands the consumers with each Q buffer, one record of
/// `TILE_SLOT_WORDS` words per buffer and lap parity (`record`): its index and, for a tile of
/// the launch, its decoded work (the producer has decoded it already; decoding it again after
/// the wait for Q put a chain of four integer divisions between Q's arrival and the first
/// `Q·Kᵀ`). Written before the producer's arrival on the buffer's full barrier, read after
/// the consumers' wait on it (the barrier's release and acquire order the two), and not
/// rewritten before the buffer's free barrier has completed the phase after the one that
/// published it: every consumer thread arrives on that phase after its store of the tile, so
/// a consumer may read its tile's record again until then (d = 256 reads the index there
/// for the store instead of holding it across the key loop).
#[derive(Clone, Copy)]
pub(crate) struct TileSlot(pub(crate) SharedPtr<u32>);

/// The slot's words: the index, then `TileWork`'s fields in declaration order.
const WORK_WORDS: u32 = 10;
const _: () = assert!(1 + WORK_WORDS <= TILE_SLOT_WORDS, "the slot holds the index and the work");

impl TileSlot {
    /// The slot of this CTA's plan (`attention_sm90::smem_plan`'s region after the barriers):
    /// two records per Q buffer.
    #[inline(always)]
    pub(crate) fn alloc<const QS: usize>(smem: &mut DynamicShared) -> Self {
        TileSlot(smem.alloc::<u32>(2 * QS as u32 * TILE_SLOT_WORDS, 16))
    }

    /// The record of the Q buffer at `at` (its stage) on that lap (its parity).
    #[inline(always)]
    pub(crate) fn record<const QS: usize>(at: PipelineState<QS>) -> u32 {
        2 * at.stage + at.parity
    }

    /// Word `i` of record `record`.
    #[inline(always)]
    fn word(self, record: u32, i: u32) -> SharedPtr<u32> {
        self.0.add(record * TILE_SLOT_WORDS + i)
    }

    /// Writes tile `t` and, for a tile of the launch, its work into record `record`.
    ///
    /// # Safety
    /// The producer's one thread, before its arrival on the buffer's full barrier for this
    /// phase and after its wait on the free barrier for the previous one (no consumer reads
    /// the record: see the type); `record` is [`Self::record`] of that buffer and lap.
    #[inline(always)]
    pub(crate) unsafe fn publish(self, record: u32, t: u32, work: Option<&TileWork>) {
        // SAFETY: (each write) a word of this CTA's slot (the plan); unread now (contract).
        let put = |i: u32, value: u32| unsafe { self.word(record, i).as_mut_ptr().write_volatile(value) };
        put(0, t);
        if let Some(w) = work {
            let (at, seq) = (w.at, w.seq);
            put(1, at.tile);
            put(2, at.head);
            put(3, at.kv_head);
            put(4, at.batch);
            put(5, seq.q_base);
            put(6, seq.q_len);
            put(7, seq.k_base);
            put(8, seq.k_len);
            put(9, w.m0);
            put(WORK_WORDS, w.blocks);
        }
    }

    /// Waits for the Q buffer at `q_state` and reads its record: the tile's work, the buffer
    /// and the record, or `None` for an index past the launch's `count` tiles (the producer's stop). Buffer and
    /// work come out warp-uniform to ptxas (a convergent tile loop, uniform descriptors).
    ///
    /// # Safety
    /// The whole warpgroup, at its position of the Q buffers' ring, before this thread's
    /// arrival on the buffer's free barrier for this phase.
    #[inline(always)]
    pub(crate) unsafe fn next<const QS: usize>(
        self,
        q_pipe: &Pipeline<QS>,
        q_state: PipelineState<QS>,
        count: u32,
    ) -> Option<(TileWork, u32, u32)> {
        q_pipe.consumer_wait(q_state);
        // SAFETY: the whole warp (contract); with one buffer, 0.
        let q_buffer = if QS == 1 { 0 } else { unsafe { warp::uniform(q_state.stage) } };
        let record = 2 * q_buffer + q_state.parity;
        // SAFETY: after the wait, before the free arrival (contract); past the index, a tile
        // of the launch (with queries: the producer published no other) with its work.
        unsafe { (self.tile(record) < count).then(|| (self.work(record), q_buffer, record)) }
    }

    /// The tile index in record `record`, the same on every lane and warp-uniform to ptxas.
    ///
    /// # Safety
    /// The whole warp, after the wait on the full barrier phase that published the record and
    /// before this thread's arrival on the free barrier's next phase (the producer does not
    /// write it in between: see the type).
    #[inline(always)]
    pub(crate) unsafe fn tile(self, record: u32) -> u32 {
        // SAFETY: as for `publish`; written and unwritten now (contract), the same word on
        // every lane.
        unsafe { warp::uniform(self.word(record, 0).read_word()) }
    }

    /// The work the producer published with the tile (`tile` below the launch's count), its
    /// words warp-uniform to ptxas (the key loop's bounds and the store's coordinates stay on
    /// the uniform datapath).
    ///
    /// # Safety
    /// As for [`Self::tile`], for a tile of the launch.
    #[inline(always)]
    pub(crate) unsafe fn work(self, record: u32) -> TileWork {
        // SAFETY: (each read) as for `tile`; the producer wrote the work with a tile of the
        // launch.
        let get = |i: u32| unsafe { warp::uniform(self.word(record, i).read_word()) };
        TileWork {
            at: AttentionTile { tile: get(1), head: get(2), kv_head: get(3), batch: get(4) },
            seq: Sequence { q_base: get(5), q_len: get(6), k_base: get(7), k_len: get(8) },
            m0: get(9),
            blocks: get(WORK_WORDS),
        }
    }
}

/// One tile as the kernel walks it: where it works, its sequence, its first query and the key
/// blocks it visits.
#[derive(Clone, Copy)]
pub(crate) struct TileWork {
    pub(crate) at: AttentionTile,
    pub(crate) seq: Sequence,
    pub(crate) m0: u32,
    pub(crate) blocks: u32,
}

/// Tile `t`'s work with key blocks of `block_n`, or `None` when its queries start past its
/// sequence (a variable-length sequence shorter than the longest): every warp of the CTA skips
/// the same tiles.
///
/// # Safety
/// `t < tiles.count()`; the offsets (when given) hold `batch + 1` entries.
#[inline(always)]
pub(crate) unsafe fn tile_work(p: &AttentionParams, tiles: &AttentionTiles, t: u32, block_n: u32) -> Option<TileWork> {
    // SAFETY: forwarded to the caller.
    let w = unsafe { tile_at(p, tiles, t, block_n) };
    if w.m0 >= w.seq.q_len { None } else { Some(w) }
}

/// Tile `t`'s work, whether or not its queries lie in its sequence (`blocks` is then
/// meaningless).
///
/// # Safety
/// As for [`tile_work`].
#[inline(always)]
pub(crate) unsafe fn tile_at(p: &AttentionParams, tiles: &AttentionTiles, t: u32, block_n: u32) -> TileWork {
    let at = tiles.get(t);
    // SAFETY: `at.batch` < batch (contract).
    let seq = unsafe { sequence(p, at.batch) };
    let m0 = at.tile * BLOCK_M;
    let blocks = kv_blocks(m0, BLOCK_M, seq.q_len, seq.k_len, p.causal != 0, block_n);
    TileWork { at, seq, m0, blocks }
}

/// Sequence `batch` of the launch: fixed length, or from the cumulative offsets (clamped:
/// `Sequence::from_offsets`).
///
/// # Safety
/// The offsets (when given) hold `batch + 2` entries at least.
#[inline(always)]
pub(crate) unsafe fn sequence(p: &AttentionParams, batch: u32) -> Sequence {
    if p.cu_seqlens_q == 0 {
        return Sequence::fixed(p.seq_q, p.seq_k);
    }
    let (cu_q, cu_k, b) = (p.cu_seqlens_q as *const u32, p.cu_seqlens_k as *const u32, batch as usize);
    // SAFETY: `batch + 1` is inside both offset arrays (contract).
    // `.global` loads: ptxas then takes the sequence as warp-uniform (`global::read_word`).
    let (q0, q1, k0, k1) = unsafe {
        let read = |p: *const u32| global::read_word(p);
        (read(cu_q.add(b)), read(cu_q.add(b + 1)), read(cu_k.add(b)), read(cu_k.add(b + 1)))
    };
    Sequence::from_offsets(q0, q1, k0, k1, p.seq_q, p.seq_k, p.total_q)
}

/// The tensors' sequence coordinate of sequence `batch`: itself at fixed length, 0 at variable
/// length (one slice holds every row; the offsets place the sequences in it).
#[inline(always)]
pub(crate) fn slice(p: &AttentionParams, batch: u32) -> u32 {
    if p.cu_seqlens_q == 0 { batch } else { 0 }
}

/// A consumer warpgroup's wgmma operands: its 64 rows of a Q buffer, and the K and V rings of
/// `BN`-key blocks.
#[derive(Clone, Copy)]
pub(crate) struct Operands<T, const DC: usize, const BN: usize, const RING: usize, const KCH: usize> {
    pub(crate) q: SmemTileRing<T, Q_ROWS, CHUNK, Swizzle128B, DC>,
    pub(crate) k: SmemTileRing<T, BN, CHUNK, Swizzle128B, KCH>,
    pub(crate) v: SmemTileMnRing<T, BN, CHUNK, DC, Swizzle128B, RING>,
    pub(crate) wg: u32,
}

impl<T: WgmmaElement, const DC: usize, const BN: usize, const RING: usize, const KCH: usize>
    Operands<T, DC, BN, RING, KCH>
{
    /// Issues `s = Q·K_stageᵀ` for this warpgroup's rows (not committed).
    ///
    /// # Safety
    /// The whole warpgroup, convergently, after `warpgroup::fence`; Q and the stage have landed
    /// and stay until a wait covers these wgmmas.
    #[inline(always)]
    pub(crate) unsafe fn scores<S: WgmmaSs<T::Kind, T::Kind>>(&self, s: &mut S, stage: u32) {
        for c in 0..DC as u32 {
            let q = self.q.stage(c).rows::<{ WGMMA_M as usize }>(self.wg);
            // SAFETY: forwarded to the caller.
            unsafe { warpgroup::mma(s, &q, &self.k.stage(stage * DC as u32 + c), c > 0) };
        }
    }

    /// Issues `o += P·V_stage` (not committed).
    ///
    /// # Safety
    /// As for [`Self::scores`]; `probs` is not modified before the covering wait.
    #[inline(always)]
    pub(crate) unsafe fn pv<O: WgmmaRs<T::Kind, T::Kind>, P: AFragments>(&self, o: &mut O, probs: &P, stage: u32) {
        const { assert!(BN as u32 == 16 * P::STEPS, "P of a key block covers its keys") };
        for k in 0..P::STEPS {
            // SAFETY: forwarded to the caller.
            unsafe { warpgroup::mma_rs(o, probs.step(k), &self.v.stage(stage), k, true) };
        }
    }
}

/// A key block's tail once its softmax is done: waits for every wgmma of this warpgroup (the
/// previous block's `P·V`, the last reader of V's stage `pv_stage` and of `probs`), releases
/// that stage of the V ring `v_pipe`, rescales O by the block's factor `alpha` and rounds its P (`s`) into `probs` for the
/// next `P·V`. Rounding comes after the wait: the fragments may take the registers `P·V` was
/// reading (a write before it would serialise the wgmmas, ptxas C7513).
///
/// # Safety
/// The whole warpgroup, convergently; this is each thread's one release of `pv_stage` for
/// its lap, and every wgmma reading it was issued by this warpgroup.
#[inline(always)]
pub(crate) unsafe fn finish_block<T, S, P, O, const RING: usize>(
    (o, probs): (&mut O, &mut P),
    s: &S,
    alpha: RowPair,
    v_pipe: &Pipeline<RING>,
    pv_stage: PipelineState<RING>,
) where
    T: Pack16,
    S: Accumulator<Elem = f32>,
    P: AFragments,
    O: Accumulator<Elem = f32>,
{
    // SAFETY: the whole warpgroup (contract); after the wait no wgmma reads the stage.
    unsafe {
        warpgroup::wait::<0>();
        v_pipe.consumer_release(pv_stage);
    }
    rows::scale_rows(o, alpha);
    *probs = P::of::<T, _>(s);
}

/// What a consumer warpgroup's mask depends on: its first query, the sequence lengths and the
/// causal flag.
#[derive(Clone, Copy)]
pub(crate) struct Rows {
    pub(crate) q0: u32,
    pub(crate) q_len: u32,
    pub(crate) k_len: u32,
    pub(crate) causal: bool,
}

impl Rows {
    /// Sets the scores of key block `block` (of `S::N` keys) that a row must not see to `-inf`
    /// (only where the block cuts the sequence end or the causal diagonal of these rows).
    #[inline(always)]
    pub(crate) fn mask<S: Accumulator<Elem = f32>>(&self, s: &mut S, block: u32) {
        let r = *self;
        if block_needs_mask(block, S::N, r.q0, r.q_len, r.k_len, r.causal) {
            let key0 = block * S::N;
            let keep = |row: u32, col: u32| visible(r.q0 + row, key0 + col, r.q_len, r.k_len, r.causal);
            // The thread index read in place: derived from a value live across the key loop,
            // each score's column would be hoisted out of it and held in a register for the
            // whole loop (20 at d = 256, where O leaves none to spare).
            rows::mask(s, warpgroup::thread_index_in_place(), f32::NEG_INFINITY, keep);
        }
    }
}

/// Normalises `o` by the row sums of `softmax` and writes this warpgroup's rows of O (queries
/// `q0 ..` of sequence `seq`, query head `head`) and, when asked for, their log-sum-exp.
///
/// # Safety
/// The whole warpgroup (quad shuffles), after the wait covering every wgmma writing `o`; `p`'s
/// O (and LSE) buffers hold every row of the sequence (the kernel's contract).
#[inline(always)]
pub(crate) unsafe fn store_rows<T: Output, O: Accumulator<Elem = f32>>(
    mut o: O,
    softmax: &OnlineSoftmax,
    p: &AttentionParams,
    seq: Sequence,
    (batch, head, q0): (u32, u32, u32),
) {
    let t = warpgroup::thread_index();
    // SAFETY: every lane is here.
    let sum = unsafe { softmax.total() };
    let max = softmax.max;
    rows::scale_rows(&mut o, sum.map(|l| if l > 0.0 { math::rcp(l) } else { 0.0 }));
    let o_head = slice(p, batch) as u64 * p.o_batch_stride + head as u64 * p.o_head_stride;
    let o_base = p.o as *mut T;
    let row = |r: u32| {
        let q = q0 + r;
        // SAFETY: a row of this sequence inside O (contract); its strides are even, so the
        // row starts 4-byte aligned.
        (q < seq.q_len).then(|| unsafe { o_base.add((o_head + (seq.q_base + q) as u64 * p.o_row_stride) as usize) })
    };
    // SAFETY: the whole warpgroup after the last wait (contract); each row holds head_dim
    // (`O::N`) elements of the 16-bit `T`.
    unsafe { store_row_pairs::<T, O>(&o, row) };
    if p.lse != 0 && t % 4 == 0 {
        for slot in 0..2 {
            let q = q0 + slot_row(t, slot);
            if q < seq.q_len {
                let l = sum.get(slot);
                let lse =
                    if l > 0.0 { (max.get(slot) + math::log2(l)) * core::f32::consts::LN_2 } else { f32::NEG_INFINITY };
                // Fixed length: [batch, heads_q, seq_q]; variable length: [heads_q, total rows].
                let index = if p.cu_seqlens_q == 0 {
                    (batch as u64 * p.heads_q as u64 + head as u64) * p.seq_q as u64 + q as u64
                } else {
                    head as u64 * p.total_q as u64 + (seq.q_base + q) as u64
                };
                // SAFETY: inside the LSE buffer (contract).
                unsafe { *(p.lse as *mut f32).add(index as usize) = lse };
            }
        }
    }
}
