//! A consumer warpgroup of the attention forward kernel (`attention_sm90`) on one tile: its 64
//! query rows against the tile's key blocks (`Q·Kᵀ` by SS wgmma, the online softmax, `P·V` by
//! RS wgmma, FA3's two overlaps), then its rows of O and the log-sum-exp stored. A tile is
//! walked up to its last `P·V` ([`Consumer::walk`], leaving an [`OpenTile`]) and then closed
//! ([`Consumer::close`]), or, where the shape chains tiles, closed by the next tile's walk:
//! its last `P·V` issued in the same turn as the next tile's first `Q·Kᵀ`.

use warpforge_dsl::abi::AttentionParams;
use warpforge_dsl::logic::fragment::{WARPGROUP_THREADS, WGMMA_M};
use warpforge_dsl::mbarrier::{Mbarrier, Phase};
use warpforge_dsl::parts::epilogue::Output;
use warpforge_dsl::parts::rows::{AFragments, OnlineSoftmax, Pack16, RowPair};
use warpforge_dsl::pipeline::{Pipeline, PipelineState};
use warpforge_dsl::sync::NamedBarrier;
use warpforge_dsl::thread::{block_idx_x_in_place, thread_rank_in_place};
use warpforge_dsl::warpgroup::acc::{Accumulator, WgmmaRs, WgmmaSs};
use warpforge_dsl::warpgroup::{self, WgmmaElement};

use crate::attention_sm90::TURN_THREADS;
use crate::attention_sm90_parts::{
    Operands, Rows, TileSlot, TileWork, attention_tiles, finish_block, store_rows, tile_at,
};

/// A tile this warpgroup has walked but for its last key block's `P·V`: O rescaled up to that
/// block, the block's P rounded, the softmax's running maxima and sums, the block's ring
/// position (its stage is still held), and where the tile's rows lie.
pub(crate) struct OpenTile<P, O, const RING: usize> {
    o: O,
    probs: P,
    softmax: OnlineSoftmax,
    last: PipelineState<RING>,
    w: TileWork,
    q0: u32,
}

/// A consumer warpgroup's view of the CTA for one tile: the parameters, the K and V rings'
/// barriers, the free barrier of the tile's Q buffer, its wgmma operands (the tile's Q buffer,
/// the K and V rings), its turn barriers (its own, the other's) and the tile's slot record.
pub(crate) struct Consumer<'a, T, const DC: usize, const BN: usize, const RING: usize, const KCH: usize> {
    pub(crate) p: &'a AttentionParams,
    pub(crate) rings: (&'a Pipeline<RING>, &'a Pipeline<RING>),
    pub(crate) q_free: Mbarrier,
    pub(crate) operands: Operands<T, DC, BN, RING, KCH>,
    pub(crate) turns: (NamedBarrier<TURN_THREADS>, NamedBarrier<TURN_THREADS>),
    /// The tile slot and the record the tile came in (persistent grid; unread otherwise).
    pub(crate) tile: (TileSlot, u32),
}

impl<T: WgmmaElement + Pack16 + Output, const DC: usize, const BN: usize, const RING: usize, const KCH: usize>
    Consumer<'_, T, DC, BN, RING, KCH>
{
    /// Walks tile `w`: this warpgroup's 64 query rows against the tile's key blocks, up to the
    /// last block's `P·V`, which the returned tile leaves to [`Self::close`] or to the next
    /// walk; or, with `CLOSE`, through it and the store (the returned tile is then spent). With `previous`, that tile's last `P·V` is issued in the same turn as this tile's
    /// first `Q·Kᵀ` (after it), and the previous tile's rows are stored once it has landed,
    /// after this tile's first softmax. `ring` carries the ring position from tile to tile;
    /// `q_full`, when given, is Q's full barrier and phase to wait on first (else Q has been
    /// waited for).
    ///
    /// # Safety
    /// The whole warpgroup, convergently; the producer loads `w.blocks` key blocks into the
    /// ring for this tile, and (persistent) another tile's Q into this Q buffer only after
    /// every consumer thread's arrival on its free barrier here; `previous` was walked by
    /// this warpgroup, last, on the same ring.
    #[inline(always)]
    pub(crate) unsafe fn walk<
        S,
        P,
        O,
        const PERSISTENT: bool,
        const DEFER_TAIL: bool,
        const SPLIT: bool,
        const TREE: bool,
        const CLOSE: bool,
    >(
        &self,
        w: &TileWork,
        ring: &mut PipelineState<RING>,
        q_full: Option<(&Mbarrier, &mut Phase)>,
        previous: Option<OpenTile<P, O, RING>>,
    ) -> OpenTile<P, O, RING>
    where
        S: Accumulator<Elem = f32> + WgmmaSs<T::Kind, T::Kind>,
        P: AFragments,
        O: Accumulator<Elem = f32> + WgmmaRs<T::Kind, T::Kind>,
    {
        let ((k_pipe, v_pipe), operands, (my_turn, their_turn)) = (self.rings, &self.operands, self.turns);
        let q_free = self.q_free;
        let blocks = w.blocks;
        // This warpgroup's first query, and the softmax scale in base-2 units.
        let q0 = w.m0 + operands.wg * WGMMA_M;
        let scale = self.p.scale_log2;
        let own_rows = Rows { q0, q_len: w.seq.q_len, k_len: w.seq.k_len, causal: self.p.causal != 0 };
        let mut o = O::ZERO;
        let mut softmax = OnlineSoftmax::START;
        let mut state = *ring;
        if let Some((q_full, phase)) = q_full {
            q_full.wait(phase);
        }

        // Key block 0: its scores and P (O is still zero: nothing to rescale). With `SPLIT`
        // rings (`attention_sm90::Shape::split_kv_rings`) K goes back to the producer once its `Q·Kᵀ`
        // has landed and V once its `P·V` has, so the next K loads while this block's softmax
        // and `P·V` still run; otherwise `v_pipe` is `k_pipe`, one ring of (K, V) stages each
        // handed back after its `P·V`. A previous tile's last `P·V` goes out in the same turn,
        // after the scores, so the softmax runs under it as under any block's `P·V`.
        k_pipe.consumer_wait(state);
        // The previous tile by value (a struct of registers; an `Option` matched by reference
        // went to local memory, reloaded after every `asm!`); `chained` is a constant at each
        // inlined call.
        let (chained, mut before) = match previous {
            Some(before) => (true, before),
            None => (
                false,
                OpenTile { o: O::ZERO, probs: P::default(), softmax: OnlineSoftmax::START, last: state, w: *w, q0 },
            ),
        };
        if SPLIT && chained {
            v_pipe.consumer_wait(before.last);
        }
        let mut s = S::ZERO;
        // SAFETY: the whole warpgroup, convergently; Q and the K stage have landed (waited) and
        // stay until this warpgroup's release, after the covering wait; one turn (see above);
        // each thread's release is one of the K ring's `CONSUMERS × 128` per stage and lap;
        // the previous tile's P is not modified before `wait::<0>` (the store reads O only
        // after it).
        unsafe {
            my_turn.sync();
            warpgroup::fence();
            operands.scores(&mut s, state.stage);
            warpgroup::commit();
            if chained {
                operands.pv(&mut before.o, &before.probs, before.last.stage);
                warpgroup::commit();
            }
            their_turn.arrive();
            if chained {
                warpgroup::wait::<1>();
            } else {
                warpgroup::wait::<0>();
            }
            if SPLIT {
                k_pipe.consumer_release(state);
            }
        }
        if PERSISTENT && blocks == 1 {
            // SAFETY: this thread's one arrival for the tile, after its last read of Q.
            unsafe { q_free.arrive() };
        }
        own_rows.mask(&mut s, 0);
        // SAFETY: every lane of the warpgroup is here.
        unsafe { softmax.step_folded::<TREE, S>(&mut s, scale) };
        if chained {
            // SAFETY: the whole warpgroup; after the wait no wgmma of this warpgroup reads the
            // previous tile's last stage or writes its O; this thread's one release of that
            // stage for its lap.
            unsafe {
                warpgroup::wait::<0>();
                v_pipe.consumer_release(before.last);
                self.store::<O, PERSISTENT>(before.o, &before.softmax, (&before.w, before.q0));
            }
        }
        let mut probs = P::of::<T, _>(&s);

        // Then per block: issue its `Q·Kᵀ` and the previous block's `P·V`, and compute its
        // softmax while `P·V` runs (FA3's intra-warpgroup overlap); rescale O once `P·V` has
        // landed. With `DEFER_TAIL` (`attention_sm90::Shape::defer_block_tail`) that tail (wait for
        // `P·V`, release its stage, rescale O, round P: `finish_block`) runs at the top of the
        // next step, across the loop's back-edge from the softmax: ptxas schedules within a
        // basic block and, given both in one, hoisted the `P·V` wait above the whole softmax
        // (SASS of the H200 build: `WARPGROUP.DEPBAR.LE gsb0, 0x0` before the first row
        // maximum, 13 % of the stall samples), which serialised the softmax behind `P·V`.
        let mut alpha = RowPair::splat(1.0);
        let mut block = 1;
        // The stage of the `P·V` in flight from the previous step (block − 2's; meaningful
        // once `block > 1`).
        let mut pv_stage = state;
        while block < blocks {
            let previous = state;
            state.advance();
            if DEFER_TAIL && block > 1 {
                // SAFETY: the whole warpgroup; after its wait every wgmma reading `pv_stage`'s V
                // completed, and each thread's arrival is one of the V ring's `CONSUMERS × 128`
                // per stage and lap (with two stages, before the wait below for the same slot's
                // refill).
                unsafe { finish_block::<T, _, _, _, RING>((&mut o, &mut probs), &s, alpha, v_pipe, pv_stage) };
            }
            k_pipe.consumer_wait(state);
            if SPLIT {
                v_pipe.consumer_wait(previous);
            }
            s = S::ZERO;
            // SAFETY: as above; the scores' group is committed first, so `wait::<1>` returns
            // once they have landed (K's stage is then read) while `P·V` may still run; `probs`
            // is not modified before `wait::<0>` (it is rewritten after it, by `finish_block`).
            unsafe {
                my_turn.sync();
                warpgroup::fence();
                operands.scores(&mut s, state.stage);
                warpgroup::commit();
                operands.pv(&mut o, &probs, previous.stage);
                warpgroup::commit();
                their_turn.arrive();
                warpgroup::wait::<1>();
                if SPLIT {
                    k_pipe.consumer_release(state);
                }
            }
            if PERSISTENT && block + 1 == blocks {
                // SAFETY: this thread's one arrival for the tile, after its last read of Q
                // (the scores just waited for; one tile per CTA needs no free Q).
                unsafe { q_free.arrive() };
            }
            pv_stage = previous;
            own_rows.mask(&mut s, block);
            // SAFETY: every lane of the warpgroup is here.
            alpha = unsafe { softmax.step_folded::<TREE, S>(&mut s, scale) };
            if !DEFER_TAIL {
                // SAFETY: as above, in the softmax's basic block.
                unsafe { finish_block::<T, _, _, _, RING>((&mut o, &mut probs), &s, alpha, v_pipe, pv_stage) };
            }
            block += 1;
        }
        if DEFER_TAIL && blocks > 1 {
            // SAFETY: as in the loop, for the last block's predecessor.
            unsafe { finish_block::<T, _, _, _, RING>((&mut o, &mut probs), &s, alpha, v_pipe, pv_stage) };
        }
        let last = state;
        state.advance();
        *ring = state;
        if CLOSE {
            // SAFETY: as above: this warpgroup's tile, walked last, on this ring.
            unsafe { self.finish::<P, O, PERSISTENT, SPLIT>((o, &probs), &softmax, last, (w, q0)) };
        }
        OpenTile { o, probs, softmax, last, w: *w, q0 }
    }

    /// Closes a walked tile: its last `P·V` in a turn of its own, then its rows stored.
    ///
    /// # Safety
    /// The whole warpgroup, convergently; `open` was walked by this warpgroup, last, on the
    /// same ring.
    #[inline(always)]
    pub(crate) unsafe fn close<P, O, const PERSISTENT: bool, const SPLIT: bool>(&self, open: OpenTile<P, O, RING>)
    where
        P: AFragments,
        O: Accumulator<Elem = f32> + WgmmaRs<T::Kind, T::Kind>,
    {
        let OpenTile { o, probs, softmax, last, w, q0 } = open;
        // SAFETY: forwarded.
        unsafe { self.finish::<P, O, PERSISTENT, SPLIT>((o, &probs), &softmax, last, (&w, q0)) }
    }

    /// A tile's last `P·V` (of `probs` on the stage of `last`) in a turn of its own, then its
    /// rows stored: [`Self::close`] on the parts of an open tile.
    ///
    /// # Safety
    /// As for [`Self::close`].
    #[inline(always)]
    unsafe fn finish<P, O, const PERSISTENT: bool, const SPLIT: bool>(
        &self,
        (mut o, probs): (O, &P),
        softmax: &OnlineSoftmax,
        last: PipelineState<RING>,
        (w, q0): (&TileWork, u32),
    ) where
        P: AFragments,
        O: Accumulator<Elem = f32> + WgmmaRs<T::Kind, T::Kind>,
    {
        let ((_, v_pipe), (my_turn, their_turn)) = (self.rings, self.turns);
        if SPLIT {
            v_pipe.consumer_wait(last);
        }
        // SAFETY: the whole warpgroup, convergently; the V stage has landed and stays until
        // this warpgroup's release after the covering wait (this thread's one for its lap);
        // one turn.
        unsafe {
            my_turn.sync();
            warpgroup::fence();
            self.operands.pv(&mut o, probs, last.stage);
            warpgroup::commit();
            their_turn.arrive();
            warpgroup::wait::<0>();
            v_pipe.consumer_release(last);
            self.store::<O, PERSISTENT>(o, softmax, (w, q0));
        }
    }

    /// Normalises a tile's O once and writes this warpgroup's rows of it and of the
    /// log-sum-exp.
    ///
    /// # Safety
    /// The whole warpgroup, after the wait covering every wgmma writing the tile's O.
    #[inline(always)]
    unsafe fn store<O: Accumulator<Elem = f32>, const PERSISTENT: bool>(
        &self,
        o: O,
        softmax: &OnlineSoftmax,
        (w, q0): (&TileWork, u32),
    ) {
        // Where the tile's rows lie: held from the walk, or, where O's registers leave none to
        // spare (d = 256: 128 of them), derived again from the tile's index (one register
        // across the key loop; on a grid of one tile per CTA, `blockIdx.x` read in place)
        // rather than kept live across the key loop (ptxas spilled three such values).
        let (w, q0) = if PERSISTENT && O::N < 256 {
            (*w, q0)
        } else {
            // SAFETY: the tile's record, before this thread's arrival on the free barrier's next
            // phase (it arrives there after this store: `TileSlot`).
            let t = if PERSISTENT { unsafe { self.tile.0.tile(self.tile.1) } } else { block_idx_x_in_place() };
            // SAFETY: a tile of the launch (the grid covers the tiles one per CTA: contract).
            let w = unsafe { tile_at(self.p, &attention_tiles::<PERSISTENT>(self.p), t, BN as u32) };
            // Warpgroups 1 and 2 are the consumers (the producer is warpgroup 0).
            (w, w.m0 + (thread_rank_in_place() / WARPGROUP_THREADS - 1) * WGMMA_M)
        };
        // SAFETY: the whole warpgroup, after the last wait (contract); the buffers as the
        // kernel's contract says.
        unsafe { store_rows::<T, O>(o, softmax, self.p, w.seq, (w.at.batch, w.at.head, q0)) };
    }
}
