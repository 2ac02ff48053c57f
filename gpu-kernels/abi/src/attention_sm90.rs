//! Tile and launch shape of the sm_90 attention forward kernels (`attention_*_sm90`).
//!
//! Everything that differs between entries is a row of one table ([`SHAPES`]:
//! head dimension, key block, ring, register split), so the device entries (which instantiate
//! the kernel with these values as const generics) and the host (entry choice, maps, launch
//! bytes) read the same values.

use warpforge_logic::swizzle::Swizzle128B;
use warpforge_logic::tile_spec::{SmemPlan, Tile, TileSpec, elem};

/// Query rows per CTA: two consumer warpgroups of 64 rows (wgmma's M).
pub const BLOCK_M: u32 = 128;
/// Head-dimension columns per TMA box: 128 bytes of a 16-bit element, one swizzle span.
pub const HEAD_CHUNK: u32 = 64;
/// Threads per CTA: a producer warpgroup and two consumer warpgroups.
pub const THREADS: u32 = 384;
/// Consumer warpgroups (each releases every ring stage once).
pub const CONSUMERS: u32 = 2;
/// Head dimensions with an entry.
pub const HEAD_DIMS: [u32; 3] = [64, 128, 256];
/// A Q box: 128 query rows of one head's 64-column chunk, 128-byte swizzle (the map's box is
/// `64 × 1 × 128`: chunk, head, row). Element size only matters, so bf16 stands for f16 too.
pub type QBox = TileSpec<elem::Bf16, { BLOCK_M as usize }, { HEAD_CHUNK as usize }, Swizzle128B>; // (128, 64)
/// A K or V box: `KEYS` keys of one head's 64-column chunk (box `64 × 1 × KEYS`).
pub type KvBox<const KEYS: usize> = TileSpec<elem::Bf16, KEYS, { HEAD_CHUNK as usize }, Swizzle128B>; // (KEYS, 64)

/// The tile and launch shape of one attention entry: everything the device body takes as
/// const generics and the host needs for maps and launches, so both read one table
/// ([`SHAPES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Head dimension.
    pub head_dim: u32,
    /// Keys per K/V block (one ring stage; the scores' wgmma is `m64n{keys}k16`).
    pub keys: u32,
    /// K/V ring depth (of the K ring and of the V ring where `split_kv_rings`): stage `i`
    /// holds key block `i`.
    pub stages: u32,
    /// Whether K and V have rings of their own (`stages` each; K handed back once its
    /// `Q·Kᵀ` has landed, V after its `P·V`, so the next K loads while a block's softmax and
    /// `P·V` run) rather than one ring of (K, V) stages, each handed back after its `P·V`.
    pub split_kv_rings: bool,
    /// Whether a key block's tail (wait for the previous `P·V`, release its stage, rescale
    /// O, round P) runs at the top of the next step, across the loop's back-edge from the
    /// softmax, rather than right after it in the same basic block (where ptxas hoists the
    /// wait above the whole softmax).
    pub defer_block_tail: bool,
    /// Whether the kernel may run on a persistent grid (several tiles per CTA,
    /// `logic::attention::AttentionTiles::grid`) rather than one tile per CTA.
    pub persistent: bool,
    /// Q buffers (each with its full and free barrier and tile slot): with two, a
    /// persistent CTA's producer loads the next tile's Q while the consumers still read
    /// the current one, as soon as its last key block has a ring slot, instead of after
    /// the tile's last `Q·Kᵀ` (the next tile's first `Q·Kᵀ` then waits for a Q load issued
    /// a block earlier). One where shared memory has no room for a second.
    pub q_stages: u32,
    /// Registers per producer thread after `setmaxnreg.dec` (one elected thread issues TMA).
    pub producer_regs: u32,
    /// Registers per consumer thread after `setmaxnreg.inc`: all the producer frees of the
    /// CTA's launch allocation ([`LAUNCH_REGISTERS`]; multiples of 8).
    pub consumer_regs: u32,
    /// Whether the softmax folds a block's row maximum and sum as trees
    /// (`parts::rows::fold_rows_tree`) rather than register by register: a scheduling
    /// choice ptxas's result decides, measured per entry (see [`D128_CAUSAL`]).
    pub tree_row_folds: bool,
    /// Whether a consumer warpgroup chains its tiles: a tile's last `P·V` is issued in the
    /// same turn as the next tile's first `Q·Kᵀ`, and its rows of O are stored while that
    /// block's softmax and the `P·V` run, instead of the last `P·V` taking a turn of its own
    /// and the store running with the tensor cores idle for this warpgroup. The next tile's
    /// Q must then be there before the previous tile is done: two Q buffers, or one whose next
    /// Q is asked of L2 early (`prefetch_next_q`), its load starting after the previous tile's
    /// last `Q·Kᵀ`.
    pub chain_tiles: bool,
    /// Whether the producer asks L2 for the next tile's Q boxes as soon as it has claimed the
    /// tile (`cp.async.bulk.prefetch.tensor`), before it waits for the Q buffer to be free: with
    /// one Q buffer the load itself can only start after the current tile's last `Q·Kᵀ`, and
    /// then reads L2 instead of HBM.
    pub prefetch_next_q: bool,
}

/// d = 64 with causal masks (the causal rule of [`D128`]): 128-key blocks, four stages (160
/// KiB with two Q buffers), one ring of (K, V) stages and the tail in place. Measured on the H200 (docs/PERF.md, 2026-12-04): split rings −4 to −5 %
/// and the deferred tail −3 % here (its `P·V` is short, its softmax the critical path).
/// Tiles chained (H100, 2026-12-06, both column orders): S 512 +8 %, causal +13 %; S 1k +4 %,
/// causal +10 %; non-causal S ≥ 4k (176 keys) +4 %; causal S ≥ 8k −3 %.
pub const D64: Shape = Shape {
    head_dim: 64,
    keys: 128,
    stages: 4,
    split_kv_rings: false,
    defer_block_tail: false,
    persistent: true,
    q_stages: 2,
    producer_regs: 40,
    consumer_regs: 232,
    tree_row_folds: false,
    chain_tiles: true,
    prefetch_next_q: false,
};
/// d = 64 without a causal mask: 176-key blocks (the d = 128 non-causal block, see
/// [`D128_K176`]), the rest as [`D64`]: four stages of 44 KiB with two Q buffers are 208 KiB, and 88
/// score and 44 P registers beside O's 32 fit the 232. At d = 64 a block's fixed work
/// weighs most (split rings and the deferred tail each cost 3–5 % there), so spreading it
/// over 176 keys should gain most.
pub const D64_K176: Shape = Shape { keys: 176, ..D64 };
/// d = 128 with causal masks: 128-key blocks, three stages (224 KiB with Q, just inside
/// Hopper's 227 KiB), the tail deferred (measured +5–7 % at S ≥ 2k). Causal tiles keep the
/// 128-key block: a 128-row tile's diagonal then cuts one block where a 176-key one often
/// cuts two and computes more keys past the diagonal.
pub const D128: Shape = Shape {
    head_dim: 128,
    keys: 128,
    stages: 3,
    split_kv_rings: false,
    defer_block_tail: true,
    persistent: true,
    q_stages: 1,
    producer_regs: 40,
    consumer_regs: 232,
    tree_row_folds: false,
    chain_tiles: false,
    prefetch_next_q: false,
};
/// d = 128 without causal masks (FlashAttention-3's non-causal d = 128 block): 176-key
/// blocks, so a block's softmax rounds, waits and turn are paid once per 176 keys (607 SASS
/// instructions on the hot path, 3.45 per key, against 479 per 128 keys, 3.74). Its 88
/// score and 44 P registers beside O's 64, carried across the back-edge with the deferred
/// tail, need a 24/240 split (spill-free once the wgmma descriptors moved to uniform
/// registers; 212 B spilled before). Two 176-key stages with Q are 208 KiB, so K and V get
/// rings of their own to keep the producer a block ahead.
pub const D128_K176: Shape = Shape {
    head_dim: 128,
    keys: 176,
    stages: 2,
    split_kv_rings: true,
    defer_block_tail: true,
    persistent: true,
    q_stages: 1,
    producer_regs: 24,
    consumer_regs: 240,
    tree_row_folds: false,
    chain_tiles: false,
    prefetch_next_q: false,
};
/// d = 256: a consumer thread holds O's 64 × 256 f32 (128 registers); 128-key scores (64)
/// and their P (32) would exceed the 240 a consumer can get, so the blocks narrow to 80 keys
/// (40 + 20 registers; `P·V` runs five K steps), two stages (Q 64 KiB + 2 × 80 KiB = 224
/// KiB) in split rings (measured 0.67 → 0.91 × cuDNN), a 24/240 split (at 40/232 ptxas
/// spilled 12 B of the tile's geometry across the key loop), the persistent grid (its
/// consumers hold only the tile's index across the key loop and derive where its rows lie
/// again for the store) and the tail in place (the scores carried across the back-edge
/// spilled): [`D128_K176`]'s ring, split and grid with its own block and tail. (Its next
/// tile's Q asked of L2 when claimed, `prefetch_next_q`, measured within the noise on an H100,
/// 2026-12-06: off.)
pub const D256: Shape = Shape { head_dim: 256, keys: 80, defer_block_tail: false, ..D128_K176 };
/// d = 128 with a causal mask: [`D128`] with the row maximum and sum folded as trees. Run
/// as the one d = 128 entry of 128-key blocks (H100, 2026-12-06, two runs in both column
/// orders, docs/PERF.md), the trees measured +5 to +11 % on causal problems of 512 to 2048
/// keys, +3 to +6 % at 4096 and on the causal GQA rows, and −5 to −12 % on problems without
/// a mask; so causal problems take this entry and the others keep [`D128`]'s folds.
pub const D128_CAUSAL: Shape = Shape { tree_row_folds: true, ..D128 };
/// d = 128 with a causal mask over fewer than [`LONG_KEYS_FROM`] keys: [`D128_CAUSAL`] with
/// its tiles chained on its one Q buffer (`chain_tiles`; the three (K, V) stages kept), the next
/// tile's Q asked of L2 when claimed so that it is there for the chained turn. Short causal
/// tiles have few key blocks to spread a tile's first softmax and last `P·V` over. Measured
/// against [`D128_CAUSAL`] (H100, 2026-12-06, both column orders): S 512 +1 %, S 1k +6 %,
/// S 2k +2 %; at S ≥ 4k and on the causal GQA rows −1 to −3.5 %, which keep [`D128_CAUSAL`]
/// (d = 64's chained tiles likewise lose 2–5 % on causal S ≥ 8k).
pub const D128_CAUSAL_SHORT: Shape = Shape { chain_tiles: true, prefetch_next_q: true, ..D128_CAUSAL };
/// Every entry's shape, in the order of the host's entry tables.
pub const SHAPES: [Shape; 7] = [D64, D64_K176, D128, D128_K176, D256, D128_CAUSAL, D128_CAUSAL_SHORT];

/// Keys per sequence from which a problem without a causal mask runs on 176-key blocks
/// ([`D64_K176`], [`D128_K176`]); shorter ones keep the 128-key entries. A tile's first
/// block (its `Q·Kᵀ` and softmax with nothing to hide under) and its last (the ragged rest)
/// are fixed costs that a 176-key block makes larger, and a short sequence has few blocks
/// to spread them over.
pub const LONG_KEYS_FROM: usize = 4096;

/// The shape that runs a problem of head dimension `head_dim`, causal or not, whose longest
/// key sequence holds `seq_k` keys; `None` for a head dimension without an entry.
pub const fn shape_for(head_dim: u32, causal: bool, seq_k: usize) -> Option<Shape> {
    let long = !causal && seq_k >= LONG_KEYS_FROM;
    match head_dim {
        64 if long => Some(D64_K176),
        64 => Some(D64),
        128 if long => Some(D128_K176),
        128 if causal && seq_k < LONG_KEYS_FROM => Some(D128_CAUSAL_SHORT),
        128 if causal => Some(D128_CAUSAL),
        128 => Some(D128),
        256 => Some(D256),
        _ => None,
    }
}

/// The position of `shape` in [`SHAPES`] (the host's entry tables follow it).
pub const fn shape_index(shape: Shape) -> usize {
    let mut i = 0;
    while i < SHAPES.len() {
        let s = SHAPES[i];
        if s.head_dim == shape.head_dim
            && s.keys == shape.keys
            && s.tree_row_folds == shape.tree_row_folds
            && s.chain_tiles == shape.chain_tiles
        {
            return i;
        }
        i += 1;
    }
    panic!("not an entry's shape")
}

/// Dynamic shared memory a block may use on sm_90 (227 KiB).
pub const SM90_SMEM_LIMIT: u32 = 227 * 1024;
/// Registers of one SM.
const SM_REGISTERS: u32 = 65_536;
/// The CTA's register allocation at launch, all `setmaxnreg` can move between the roles:
/// ptxas gives each of the 384 threads `⌊65536 / 384⌋` rounded down to 8 = 168 registers.
/// A split asking for more than this (`setmaxnreg.inc` past what the producer freed) waits
/// forever: d = 256's first split, 32/240, hung on the H200 this way.
pub const LAUNCH_REGISTERS: u32 = SM_REGISTERS / THREADS / 8 * 8 * THREADS;
const _: () = {
    let mut i = 0;
    while i < SHAPES.len() {
        let s = SHAPES[i];
        assert!(smem_plan(s).launch_bytes() <= SM90_SMEM_LIMIT, "the attention plans fit Hopper's shared memory");
        assert!(
            (THREADS - CONSUMERS * 128) * s.producer_regs + CONSUMERS * 128 * s.consumer_regs <= LAUNCH_REGISTERS,
            "the register split fits the CTA's launch allocation"
        );
        assert!(s.head_dim.is_multiple_of(HEAD_CHUNK) && s.keys.is_multiple_of(16), "whole chunks, whole K steps");
        assert!(s.stages >= 2, "the producer runs a block ahead");
        assert!(s.q_stages == 1 || (s.q_stages == 2 && s.persistent), "a second Q buffer serves a next tile");
        assert!(!s.chain_tiles || s.persistent, "a chained tile's successor is on the same CTA");
        i += 1;
    }
};

/// Words of a record of a Q buffer's tile slot (two records per buffer, one per lap parity):
/// the tile the producer hands the consumers with that buffer, decoded (its index, then
/// `TileWork`'s ten words; one spare), so that the consumers read it instead of dividing it
/// out again after their wait for Q.
pub const TILE_SLOT_WORDS: u32 = 12;

/// The kernel's dynamic shared memory for `shape`, as the device carves it: the Q buffers
/// (one box per chunk each), the K ring, the V ring, the ring's barriers, the Q buffers'
/// full and free barriers, their tile slots.
pub const fn smem_plan(shape: Shape) -> SmemPlan {
    match shape.keys {
        128 => plan::<KvBox<128>>(shape),
        176 => plan::<KvBox<176>>(shape),
        80 => plan::<KvBox<80>>(shape),
        _ => panic!("a key block without a plan"),
    }
}

const fn plan<Kv: Tile>(shape: Shape) -> SmemPlan {
    let chunks = shape.head_dim / HEAD_CHUNK;
    let stages = shape.stages;
    let q = shape.q_stages;
    let plan = SmemPlan::new().ring::<QBox>(q * chunks).ring::<Kv>(stages * chunks).ring::<Kv>(stages * chunks);
    let plan = if shape.split_kv_rings { plan.pipeline(stages).pipeline(stages) } else { plan.pipeline(stages) };
    plan.pipeline(q).region(4 * TILE_SLOT_WORDS * 2 * q, 16)
}
