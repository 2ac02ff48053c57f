//! The decode attention path (`attention_decode_*_sm90`, then `attention_combine_*_sm90`): a
//! problem whose query rows per key/value head, `seq_q × group`, fit one 16-row `mma.sync`
//! fragment — a decode step, a few speculative tokens, a GQA group's heads of one token —
//! runs on warps that stream K and V once per key/value head, the keys split over enough CTAs
//! to fill the GPU, instead of 128-row query tiles that would be 8 to 128 times mostly empty.

/// Query rows of one work item (a sequence's key/value head): `seq_q × group` must fit.
pub const ROWS: u32 = 16;
/// Keys per warp step (two `n8` score blocks of one `m16n8k16` row fragment).
pub const KEYS: u32 = 16;
/// Warps per CTA; each takes every `WARPS`-th key step of its CTA's split.
pub const WARPS: u32 = 4;
/// Threads per CTA.
pub const THREADS: u32 = 32 * WARPS;
/// Head dimensions with a decode entry (d = 256 takes the tiled kernel).
pub const HEAD_DIMS: [u32; 2] = [64, 128];
/// A split's keys are a multiple of this (one step of every warp).
pub const SPLIT_GRAIN: u32 = KEYS * WARPS;
/// Fewest keys per split the planner gives a split of more than one (a warp's partial output,
/// 16 rows of f32, costs about what 32 of its keys of K and V do, so each warp takes at least
/// 16 steps).
pub const MIN_SPLIT_KEYS: u32 = 16 * SPLIT_GRAIN;

/// A 16-bit tensor the decode kernels address by pointer: element `(sequence, row, head,
/// column)` at `ptr + sequence · batch + row · row_stride + head · head_stride + column`
/// (element strides; a variable-length batch has one sequence of all rows and batch stride 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeTensor {
    /// Device address of element (0, 0, 0, 0).
    pub ptr: u64,
    /// Elements between sequences.
    pub batch: u64,
    /// Elements between rows.
    pub row: u64,
    /// Elements between heads.
    pub head: u64,
}

/// The rest of a decode launch (the tensors are [`DecodeTensor`]s of their own).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionDecodeParams {
    /// Device address of the f32 log-sum-exp output or 0 (as `AttentionParams::lse`).
    pub lse: u64,
    /// `batch + 1` u32 cumulative query offsets, or 0 (fixed length).
    pub cu_seqlens_q: u64,
    /// As `cu_seqlens_q`, for keys and values.
    pub cu_seqlens_k: u64,
    /// f32 workspace of the warps' unnormalised outputs: `[item, split, warp, seq_q · group,
    /// head_dim]` (item = sequence · heads_kv + key/value head); rows past the item's (a
    /// shorter sequence of a variable-length batch) are not written.
    pub partial_o: u64,
    /// f32 workspace of the warps' softmax state, `[item, split, warp, seq_q · group, 2]`: the row's
    /// largest `score · scale_log2` (`-inf` before any key) and its sum of `2^(s − max)`.
    pub partial_stats: u64,
    /// Queries per sequence (fixed length) or the longest (variable length).
    pub seq_q: u32,
    /// Keys per sequence (fixed length) or the longest.
    pub seq_k: u32,
    /// Rows of Q and O (variable length: queries past it are not written).
    pub total_q: u32,
    /// Rows of K and V (variable length: keys past it are not read).
    pub total_k: u32,
    /// Query heads.
    pub heads_q: u32,
    /// Key/value heads.
    pub heads_kv: u32,
    /// Query heads per key/value head; `seq_q · group ≤ ROWS`.
    pub group: u32,
    /// Sequences.
    pub batch: u32,
    /// CTAs per work item (the split of the keys).
    pub splits: u32,
    /// Keys per split, a multiple of [`SPLIT_GRAIN`].
    pub split_keys: u32,
    /// 1: causal mask aligned to the bottom right.
    pub causal: u32,
    /// Softmax scale times log2(e) (> 0).
    pub scale_log2: f32,
}

const _: () = assert!(core::mem::size_of::<AttentionDecodeParams>() == 5 * 8 + 12 * 4, "no padding");
const _: () = assert!(core::mem::size_of::<AttentionDecodeParams>() <= 128, "at most 128 parameter bytes");
