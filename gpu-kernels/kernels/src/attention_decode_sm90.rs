//! Decode attention on Hopper (`abi::attention_decode`): the problems whose query rows per
//! key/value head, `seq_q × group`, fit one 16-row `mma.sync` fragment (a decode step, a few
//! speculative tokens, a GQA group's heads of one token).
//!
//! A work item is one sequence's key/value head; its rows are (query `r / group`, head
//! `kv_head · group + r % group`), so the heads of a GQA group share every K and V load. A CTA
//! of four warps takes one split of the item's keys (`logic::attention_decode::DecodeSplit`),
//! its warps every fourth 16-key step. A step: `S = Q·Kᵀ` by `mma.sync.m16n8k16`, Q and K read
//! straight from global memory in the 16-byte order of `mma::k32_steps`; the online softmax of
//! `parts::rows` on S as an m16n16 fragment (a warp's registers of an m64n16 wgmma
//! accumulator, the same layout); `O += P·V`, P's A fragment from S's own registers and V's B
//! fragments read transposed (`ldmatrix.trans`) from a swizzled shared-memory copy of the step.
//! The next step's K and V are loaded before this step's softmax and `P·V` run. Each warp
//! writes its unnormalised O rows and (max, sum) to the workspace; the combine entry merges an
//! item's warps and splits, normalises, and writes O and the log-sum-exp.

use warpforge_dsl::abi::attention_decode::{KEYS, WARPS};
use warpforge_dsl::abi::{AttentionDecodeParams, DecodeTensor};
use warpforge_dsl::global::{self, F32x4, ReadOnly, ReadOnlyNoL1, Vector16, Words};
use warpforge_dsl::kernel;
use warpforge_dsl::logic::attention::Sequence;
use warpforge_dsl::logic::attention_decode::DecodeSplit;
use warpforge_dsl::math;
use warpforge_dsl::mma::{Acc16x8, FragA, FragB, MmaInput, mma_k32};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::rows::{OnlineSoftmax, Pack16};
use warpforge_dsl::shared::{SharedPtr, StaticShared};
use warpforge_dsl::thread::{block_idx, lane_id, warp_id};
use warpforge_dsl::warp;
use warpforge_dsl::warpgroup::acc::{Acc64x16F32, Accumulator};

use crate::gemm_decode_sm90::DecodeInput;

/// The widest head dimension with an entry (the shared V copies are sized for it).
const D_MAX: usize = 128;
/// Bytes of the warps' V copies: one 16-key step of `D_MAX` 16-bit columns per warp.
const V_BYTES: usize = (WARPS * KEYS) as usize * D_MAX * 2;

/// One 16-byte piece of a V row in shared memory (aligned, so it is one vector store).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Piece(u32, u32, u32, u32);

/// What a work item reads and writes: its sequence's rows, its key/value head, its row count.
#[derive(Clone, Copy)]
struct Item {
    batch: u32,
    slice: u32,
    seq: Sequence,
    kv_head: u32,
    rows: u32,
}

impl Item {
    /// Work item `item` (`sequence · heads_kv + kv_head`) of the launch.
    ///
    /// # Safety
    /// `item < batch · heads_kv`; the offsets (when given) hold `batch + 1` entries.
    #[inline(always)]
    unsafe fn at(p: &AttentionDecodeParams, item: u32) -> Item {
        let (batch, kv_head) = (item / p.heads_kv, item % p.heads_kv);
        let (slice, seq) = if p.cu_seqlens_q == 0 {
            (batch, Sequence::fixed(p.seq_q, p.seq_k))
        } else {
            let (cu_q, cu_k, b) = (p.cu_seqlens_q as *const u32, p.cu_seqlens_k as *const u32, batch as usize);
            // SAFETY: `batch + 1` lies in both offset arrays (contract).
            let (q0, q1, k0, k1) = unsafe {
                let read = |p: *const u32| global::read_word(p);
                (read(cu_q.add(b)), read(cu_q.add(b + 1)), read(cu_k.add(b)), read(cu_k.add(b + 1)))
            };
            let seq = Sequence::from_offsets(q0, q1, k0, k1, p.seq_q, p.seq_k, p.total_q);
            // Pointers, not TMA boxes: keys past the tensor's rows are never read.
            (0, Sequence { k_len: seq.k_len.min(p.total_k.saturating_sub(k0)), ..seq })
        };
        Item { batch, slice, seq, kv_head, rows: seq.q_len * p.group }
    }

    /// Row `row`'s query and head: (query within the sequence, query head).
    #[inline(always)]
    fn query(&self, p: &AttentionDecodeParams, row: u32) -> (u32, u32) {
        (row / p.group, self.kv_head * p.group + row % p.group)
    }
}

/// Element `(slice, row, head, 0)` of `t`.
#[inline(always)]
fn element<T>(t: &DecodeTensor, slice: u32, row: u32, head: u32) -> *mut T {
    let offset = slice as u64 * t.batch + row as u64 * t.row + head as u64 * t.head;
    (t.ptr as *mut T).wrapping_add(offset as usize)
}

/// Eight elements at `row + column` under policy `P`, or zeros without a row.
///
/// # Safety
/// A given row holds `column + 8` elements, 16-byte aligned there, not written by the launch.
#[inline(always)]
unsafe fn eight<T: DecodeInput, P: global::LoadPolicy>(row: Option<*const T>, column: usize) -> Words {
    match row {
        // SAFETY: the caller's contract.
        Some(row) => unsafe { global::load::<T::Vector, P>(row.add(column)).words() },
        None => (0, 0, 0, 0),
    }
}

/// The K and V of one 16-key step: per 32-column chunk `c`, K words `2c` (key `g`) and `2c + 1`
/// (key `8 + g`) in `mma::k32_steps` order; V words `u` are 16-byte piece `lane + 32u` of the
/// step's `16 × D` block (key `(lane + 32u) / (D/8)`, piece `(lane + 32u) % (D/8)`).
#[derive(Clone, Copy)]
struct Step<const KW: usize, const VW: usize> {
    k: [Words; KW],
    v: [Words; VW],
}

/// The decode entries' body; `CH = D / 32`, `KW = D / 16`, `NB = D / 8`, `VW = D / 16`.
///
/// # Safety
/// The tensors and parameters as the host launcher builds them: grid `items × splits` of
/// `abi::attention_decode::THREADS` threads; Q, K, V rows 16-byte aligned with `D` columns;
/// `seq_q · group ≤ ROWS`; workspace for every (item, split, warp).
#[inline(always)]
unsafe fn decode<
    T: DecodeInput + Pack16,
    const D: usize,
    const CH: usize,
    const KW: usize,
    const NB: usize,
    const VW: usize,
>(
    q: &DecodeTensor,
    k: &DecodeTensor,
    v: &DecodeTensor,
    p: &AttentionDecodeParams,
) {
    // SAFETY: declared once, at the top; V_BYTES holds every warp's step at D ≤ D_MAX.
    let smem: SharedPtr<u8> = unsafe { StaticShared::<V_BYTES, 128>::declare::<u8>() };
    let cta = block_idx().x;
    let (item, split) = (cta / p.splits, cta % p.splits);
    // SAFETY: the grid holds `batch · heads_kv · splits` CTAs (contract).
    let it = unsafe { Item::at(p, item) };
    let (lane, warp) = (lane_id(), warp_id());
    let (g, t) = (lane / 4, lane % 4);
    let (k_begin, k_end) = DecodeSplit { splits: p.splits, split_keys: p.split_keys }.keys_of(split, it.seq.k_len);
    let q_row = |row: u32| {
        let (query, head) = it.query(p, row);
        (row < it.rows).then(|| element::<T>(q, it.slice, it.seq.q_base + query, head) as *const T)
    };
    let (q_lo, q_hi) = (q_row(g), q_row(g + 8));
    let mut qf = [((0, 0, 0, 0), (0, 0, 0, 0)); CH];
    for c in 0..CH {
        let column = 32 * c + 8 * t as usize;
        // SAFETY: rows of the item's queries, D columns, 16-byte aligned (contract).
        qf[c] = unsafe { (eight::<T, ReadOnly>(q_lo, column), eight::<T, ReadOnly>(q_hi, column)) };
    }
    // Causal: row r sees keys j ≤ r / group + k_len − q_len (a negative bound: none).
    let bound = |row: u32| {
        let offset = it.seq.k_len as i32 - it.seq.q_len as i32;
        if p.causal != 0 { (row / p.group) as i32 + offset } else { i32::MAX }
    };
    let (bound_lo, bound_hi) = (bound(g), bound(g + 8));
    let key_row = |tensor: &DecodeTensor, key: u32| {
        (key < k_end).then(|| element::<T>(tensor, it.slice, it.seq.k_base + key, it.kv_head) as *const T)
    };
    let load = |step: u32| {
        let kb = k_begin + step * KEYS;
        let mut s = Step { k: [(0, 0, 0, 0); KW], v: [(0, 0, 0, 0); VW] };
        let (k_lo, k_hi) = (key_row(k, kb + g), key_row(k, kb + 8 + g));
        for c in 0..CH {
            let column = 32 * c + 8 * t as usize;
            // SAFETY: keys of the item below k_end, D columns (contract).
            s.k[2 * c] = unsafe { eight::<T, ReadOnlyNoL1>(k_lo, column) };
            // SAFETY: as above.
            s.k[2 * c + 1] = unsafe { eight::<T, ReadOnlyNoL1>(k_hi, column) };
        }
        for u in 0..VW {
            let piece = lane as usize + 32 * u;
            let (key, column) = ((piece / (D / 8)) as u32, 8 * (piece % (D / 8)));
            // SAFETY: as above.
            s.v[u] = unsafe { eight::<T, ReadOnlyNoL1>(key_row(v, kb + key), column) };
        }
        s
    };
    // This warp's V copy: piece `c` of key `j` at `j · 2D + 16 · (c ^ (j % 8))` bytes, so the
    // eight rows one `ldmatrix` reads lie in eight different bank groups.
    let v_copy = smem.addr() + warp * KEYS * (2 * D) as u32;
    let piece_addr = |key: u32, piece: u32| v_copy + key * (2 * D) as u32 + 16 * (piece ^ (key % 8));
    let steps = (k_end - k_begin).div_ceil(KEYS);
    let mut softmax = OnlineSoftmax::START;
    let mut o = [Acc16x8::ZERO; NB];
    let mut step = warp;
    if step < steps {
        let mut next_step = load(step);
        loop {
            let cur = next_step;
            let kb = k_begin + step * KEYS;
            let (mut s0, mut s1) = (Acc16x8::ZERO, Acc16x8::ZERO);
            for c in 0..CH {
                let (lo, hi) = qf[c];
                // SAFETY: the whole warp, converged (the loop's trip count is the warp's).
                unsafe {
                    mma_k32::<T>(&mut s0, lo, hi, cur.k[2 * c]);
                    mma_k32::<T>(&mut s1, lo, hi, cur.k[2 * c + 1]);
                }
            }
            // SAFETY: all lanes; the previous step's `ldmatrix` reads are done before any store.
            unsafe { warp::converge() };
            for u in 0..VW {
                let (a, b, c, d) = cur.v[u];
                let piece = lane + 32 * u as u32;
                let (key, column) = (piece / (D as u32 / 8), piece % (D as u32 / 8));
                // SAFETY: this warp's copy, 16-byte aligned, inside the static array.
                unsafe {
                    (SharedPtr::<Piece>::from_addr(piece_addr(key, column)).as_mut_ptr()).write(Piece(a, b, c, d))
                };
            }
            let next = step + WARPS;
            if next < steps {
                next_step = load(next);
            }
            let mut s = Acc64x16F32(s0.0, s0.1, s0.2, s0.3, s1.0, s1.1, s1.2, s1.3);
            s.for_each_mut(|i, x| {
                let key = kb + 8 * (i as u32 / 4) + 2 * t + i as u32 % 2;
                let bound = if (i / 2) % 2 == 0 { bound_lo } else { bound_hi };
                if key >= k_end || key as i32 > bound {
                    *x = f32::NEG_INFINITY;
                }
            });
            // SAFETY: all lanes (the row maxima's shuffles).
            let alpha = unsafe { softmax.step(&mut s, p.scale_log2) };
            for j in 0..NB {
                let acc = o[j];
                o[j] = Acc16x8(acc.0 * alpha.0, acc.1 * alpha.0, acc.2 * alpha.1, acc.3 * alpha.1);
            }
            let probs = FragA(T::pack2(s.0, s.1), T::pack2(s.2, s.3), T::pack2(s.4, s.5), T::pack2(s.6, s.7));
            // SAFETY: all lanes; the copy's stores are visible to the whole warp after it.
            unsafe { warp::converge() };
            for pair in 0..NB / 2 {
                let m = lane / 8;
                let addr = piece_addr(lane % 8 + 8 * (m % 2), 2 * pair as u32 + m / 2);
                // SAFETY: all lanes, converged; rows of this warp's copy, written above.
                unsafe {
                    let b = warp::load_matrices_x4_trans(addr);
                    T::mma_m16n8k16(&mut o[2 * pair], probs, FragB(b[0], b[1]));
                    T::mma_m16n8k16(&mut o[2 * pair + 1], probs, FragB(b[2], b[3]));
                }
            }
            step = next;
            if step >= steps {
                break;
            }
        }
    }
    // SAFETY: all lanes.
    let sums = unsafe { softmax.total() };
    // The workspace's slots hold `seq_q · group` rows (the most an item has).
    let slot = ((item * p.splits + split) * WARPS + warp) as usize * (p.seq_q * p.group) as usize;
    let partial = (p.partial_o as *mut f32).wrapping_add(slot * D);
    let stats = (p.partial_stats as *mut f32).wrapping_add(slot * 2);
    for half in 0..2u32 {
        let row = g + 8 * half;
        if row >= it.rows {
            continue;
        }
        let out = partial.wrapping_add(row as usize * D + 2 * t as usize);
        for j in 0..NB {
            let acc = o[j];
            let (a, b) = if half == 0 { (acc.0, acc.1) } else { (acc.2, acc.3) };
            // SAFETY: the workspace holds every slot's rows × D (contract); 8-byte aligned.
            unsafe { out.add(8 * j).cast::<[f32; 2]>().write([a, b]) };
        }
        if t == 0 {
            let (max, sum) = if half == 0 { (softmax.max.0, sums.0) } else { (softmax.max.1, sums.1) };
            // SAFETY: the workspace holds every slot's rows of pairs (contract).
            unsafe { stats.add(2 * row as usize).cast::<[f32; 2]>().write([max, sum]) };
        }
    }
}

/// Parts (a warp's or a split's partial state of one row) whose loads the combine issues before
/// it adds any of them: the row's partial O is read in rounds of this many parts.
const COMBINE_UNROLL: u32 = 8;

/// The combine entries' body: one warp per (item, row). A lane reads four columns of a part
/// (one 16-byte load), so a warp reads `128 / D` parts at once, and a round issues
/// [`COMBINE_UNROLL`] such loads before adding them: a row of many parts (a GQA decode split
/// over 16 CTAs has 64) costs a few L2 round trips instead of one per part or two.
///
/// # Safety
/// After the decode entry of the same parameters on the same stream; grid `items ·
/// ⌈seq_q · group / WARPS⌉` CTAs of `THREADS` threads; O rows 4-byte aligned, even strides.
#[inline(always)]
unsafe fn combine<T: Pack16, const D: usize>(o: &DecodeTensor, p: &AttentionDecodeParams) {
    let cta = block_idx().x;
    let slot_rows = p.seq_q * p.group;
    let ctas_per_item = slot_rows.div_ceil(WARPS);
    let (item, row) = (cta / ctas_per_item, (cta % ctas_per_item) * WARPS + warp_id());
    // SAFETY: the grid covers the items (contract).
    let it = unsafe { Item::at(p, item) };
    if row >= it.rows {
        return;
    }
    let lane = lane_id();
    let parts = p.splits * WARPS;
    let first = item * parts;
    let stat = |part: u32| {
        let at = ((first + part) * slot_rows + row) as usize * 2;
        // SAFETY: written by the decode entry for every part's rows of the item.
        unsafe { (p.partial_stats as *const f32).add(at).cast::<[f32; 2]>().read() }
    };
    let mut max = f32::NEG_INFINITY;
    let mut part = lane;
    while part < parts {
        max = max.max(stat(part)[0]);
        part += 32;
    }
    // SAFETY: all lanes (the row is the warp's).
    let max = unsafe { warp::max(max) };
    let base = if max == f32::NEG_INFINITY { 0.0 } else { max };
    let mut sum = 0.0;
    let mut part = lane;
    while part < parts {
        let [m, l] = stat(part);
        sum += math::exp2_ftz(m - base) * l;
        part += 32;
    }
    // SAFETY: all lanes.
    let sum = unsafe { warp::sum_f32(sum) };
    // Lane `lane` reads columns `4 · (lane % (D/4))` .. + 4 of parts `lane / (D/4)` + k · side.
    let (quads, side) = (D as u32 / 4, 128 / D as u32);
    let (column, mut part) = (4 * (lane % quads), lane / quads);
    let mut acc = F32x4::default();
    while part < parts {
        let mut weight = [0.0f32; COMBINE_UNROLL as usize];
        let mut x = [F32x4::default(); COMBINE_UNROLL as usize];
        for i in 0..COMBINE_UNROLL as usize {
            let at = part + i as u32 * side;
            // Past the parts: the last part read again, weighted zero.
            let (valid, at) = (at < parts, at.min(parts - 1));
            let offset = ((first + at) * slot_rows + row) as usize * D + column as usize;
            // SAFETY: written by the decode entry for every part's rows of the item; 16-byte
            // aligned (the workspace is, D and `column` are multiples of 4); nothing writes
            // the workspace during this launch.
            x[i] = unsafe { global::load::<F32x4, ReadOnly>((p.partial_o as *const f32).add(offset)) };
            // Read and weighed unconditionally, then selected: no branch between the loads.
            let w = math::exp2_ftz(stat(at)[0] - base);
            weight[i] = if valid { w } else { 0.0 };
        }
        for i in 0..COMBINE_UNROLL as usize {
            let (w, v) = (weight[i], x[i]);
            acc = F32x4(acc.0 + w * v.0, acc.1 + w * v.1, acc.2 + w * v.2, acc.3 + w * v.3);
        }
        part += COMBINE_UNROLL * side;
    }
    if side == 2 {
        // SAFETY: all lanes; lane l and l ^ 16 hold the same columns of the even and odd parts.
        let other = |v: f32| unsafe { f32::from_bits(warp::shuffle_xor(v.to_bits(), 16)) };
        acc = F32x4(acc.0 + other(acc.0), acc.1 + other(acc.1), acc.2 + other(acc.2), acc.3 + other(acc.3));
    }
    let inverse = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    let (query, head) = it.query(p, row);
    if lane < quads {
        let out = element::<T>(o, it.slice, it.seq.q_base + query, head);
        let words = out.wrapping_add(column as usize) as *mut u32;
        // SAFETY: the query's row of O (contract): columns `column .. column + 4` as two
        // 4-byte aligned pairs.
        unsafe {
            words.write(T::pack2(acc.0 * inverse, acc.1 * inverse));
            words.add(1).write(T::pack2(acc.2 * inverse, acc.3 * inverse));
        }
    }
    if p.lse != 0 && lane == 0 {
        let at = if p.cu_seqlens_q == 0 {
            (it.batch * p.heads_q + head) as usize * p.seq_q as usize + query as usize
        } else {
            head as usize * p.total_q as usize + (it.seq.q_base + query) as usize
        };
        let lse = if sum > 0.0 { (max + math::log2(sum)) * core::f32::consts::LN_2 } else { f32::NEG_INFINITY };
        // SAFETY: the LSE holds every (head, query) of the problem (contract).
        unsafe { (p.lse as *mut f32).add(at).write(lse) };
    }
}

/// Decode and combine entries: names, element, head dimension.
macro_rules! decode_entries {
    ($($decode:ident, $combine:ident: $t:ty, $d:literal;)*) => {$(
        /// Decode attention entry; see the module docs and `abi::attention_decode`.
        ///
        /// # Safety
        /// See `decode`: tensors and parameters as the host launcher builds them.
        #[kernel(threads = 128)]
        pub unsafe fn $decode(q: DecodeTensor, k: DecodeTensor, v: DecodeTensor, p: AttentionDecodeParams) {
            // SAFETY: forwarded (the host's contract).
            unsafe { decode::<$t, $d, { $d / 32 }, { $d / 16 }, { $d / 8 }, { $d / 16 }>(&q, &k, &v, &p) }
        }

        /// The decode path's combine of an item's warps and splits into O and the LSE. Up to
        /// 64 registers: left to itself ptxas keeps this small kernel at 32 (full occupancy)
        /// and then waits on each part's load before issuing the next.
        ///
        /// # Safety
        /// See `combine`.
        #[kernel(threads = 128, max_registers = 64)]
        pub unsafe fn $combine(o: DecodeTensor, p: AttentionDecodeParams) {
            // SAFETY: forwarded (the host's contract).
            unsafe { combine::<$t, $d>(&o, &p) }
        }
    )*};
}

decode_entries! {
    attention_decode_bf16_d64_sm90, attention_combine_bf16_d64_sm90: Bf16, 64;
    attention_decode_bf16_d128_sm90, attention_combine_bf16_d128_sm90: Bf16, 128;
    attention_decode_f16_d64_sm90, attention_combine_f16_d64_sm90: F16, 64;
    attention_decode_f16_d128_sm90, attention_combine_f16_d128_sm90: F16, 128;
}
