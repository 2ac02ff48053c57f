//! Attention forward on Hopper: `O = softmax(scale · Q·Kᵀ [+ causal mask]) · V` per query head,
//! with grouped-query attention (GQA/MQA) and an optional log-sum-exp output.
//!
//! Layout: Q and O are `[batch, seq_q, heads_q, head_dim]`, K and V `[batch, seq_k, heads_kv,
//! head_dim]`, all packed, bf16 or f16 (f32 accumulation, one rounding of P to the input type
//! before `P·V`, one rounding of O). Query head `h` attends with key/value head
//! `h / (heads_q / heads_kv)`. The causal mask is aligned to the bottom right: query `i` sees
//! keys `j ≤ i + seq_k − seq_q` (a query that sees no key gets O = 0 and LSE = `-inf`). The
//! log-sum-exp, when asked for, is `[batch, heads_q, seq_q]` f32, natural log of the row sum of
//! `exp(scale · q·k)` over the visible keys.
//!
//! Variable-length batches (sequences of different lengths back to back, with cumulative
//! offsets) go through [`Warpforge::attention_varlen`] and [`AttentionVarlenProblem`].
//!
//! Strided layouts ([`Warpforge::attention_strided`], [`Warpforge::attention_varlen_strided`]):
//! each of Q, K, V and O given by its element strides ([`AttentionStrides`], `strides.rs`), e.g.
//! torch SDPA's `[batch, heads, seq, head_dim]` or views of a fused QKV projection; the packed
//! entry points are their packed case.
//!
//! The kernel is `gpu-kernels/kernels/src/attention_sm90.rs`; the problems' `check` hold every
//! shape rule and are pure (CPU-tested).

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use warpforge_abi::attention_sm90::{
    BLOCK_M, HEAD_CHUNK, HEAD_DIMS, SHAPES, THREADS, shape_for, shape_index, smem_plan,
};
use warpforge_abi::signatures::{AttentionCombine, AttentionDecode, AttentionSm90};
use warpforge_abi::{AttentionParams, Entry, entries};
use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder};
use warpforge_host::{Error, LaunchConfig, Result};
use warpforge_logic::attention::AttentionTiles;

use crate::Warpforge;
use crate::gemm::{GemmInput, check};

mod counters;
mod decode;
mod strides;

pub(crate) use counters::TileCounterCache;
use strides::Layouts;
pub use strides::{AttentionSpans, AttentionStrides, AttentionVarlenStrides, RowStrides, TensorStrides};

/// Rows (batch × sequence) stay below 2^31: TMA coordinates are signed 32-bit.
const MAX_ROWS: usize = 1 << 31;
/// Bytes of a TMA tensor's base-address alignment.
const TMA_ALIGN: u64 = 16;

/// Element types of the attention kernels: bf16 and f16 (sealed through [`GemmInput`]).
pub trait AttentionElement: GemmInput {
    /// The entries for the shapes of `abi::attention_sm90::SHAPES`, in that order.
    const ATTENTION_ENTRIES: [Entry<AttentionSm90>; SHAPES.len()];
    /// The decode path's (decode, combine) entries at head dimensions 64 and 128.
    const DECODE_ENTRIES: [(Entry<AttentionDecode>, Entry<AttentionCombine>); 2];
}
impl AttentionElement for half::bf16 {
    const ATTENTION_ENTRIES: [Entry<AttentionSm90>; SHAPES.len()] = [
        entries::ATTENTION_BF16_D64,
        entries::ATTENTION_BF16_D64_K176,
        entries::ATTENTION_BF16_D128,
        entries::ATTENTION_BF16_D128_K176,
        entries::ATTENTION_BF16_D256,
        entries::ATTENTION_BF16_D128_CAUSAL,
        entries::ATTENTION_BF16_D128_CAUSAL_SHORT,
    ];
    const DECODE_ENTRIES: [(Entry<AttentionDecode>, Entry<AttentionCombine>); 2] = [
        (entries::ATTENTION_DECODE_BF16_D64, entries::ATTENTION_COMBINE_BF16_D64),
        (entries::ATTENTION_DECODE_BF16_D128, entries::ATTENTION_COMBINE_BF16_D128),
    ];
}
impl AttentionElement for half::f16 {
    const ATTENTION_ENTRIES: [Entry<AttentionSm90>; SHAPES.len()] = [
        entries::ATTENTION_F16_D64,
        entries::ATTENTION_F16_D64_K176,
        entries::ATTENTION_F16_D128,
        entries::ATTENTION_F16_D128_K176,
        entries::ATTENTION_F16_D256,
        entries::ATTENTION_F16_D128_CAUSAL,
        entries::ATTENTION_F16_D128_CAUSAL_SHORT,
    ];
    const DECODE_ENTRIES: [(Entry<AttentionDecode>, Entry<AttentionCombine>); 2] = [
        (entries::ATTENTION_DECODE_F16_D64, entries::ATTENTION_COMBINE_F16_D64),
        (entries::ATTENTION_DECODE_F16_D128, entries::ATTENTION_COMBINE_F16_D128),
    ];
}

/// One attention forward call (see the module docs for layouts).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionProblem {
    /// Sequences, ≥ 1.
    pub batch: usize,
    /// Query (and output) heads, a multiple of `heads_kv`.
    pub heads_q: usize,
    /// Key/value heads, ≥ 1 (1: multi-query attention).
    pub heads_kv: usize,
    /// Queries per sequence, ≥ 1.
    pub seq_q: usize,
    /// Keys (and values) per sequence, ≥ 1.
    pub seq_k: usize,
    /// Head dimension: 64, 128 or 256.
    pub head_dim: usize,
    /// Causal mask, bottom-right aligned.
    pub causal: bool,
    /// Scale of the logits, finite and > 0 (usually `1/√head_dim`).
    pub softmax_scale: f32,
}

impl AttentionProblem {
    /// A non-causal problem with the usual scale `1/√head_dim`.
    pub fn new(batch: usize, heads_q: usize, heads_kv: usize, seq_q: usize, seq_k: usize, head_dim: usize) -> Self {
        AttentionProblem {
            batch,
            heads_q,
            heads_kv,
            seq_q,
            seq_k,
            head_dim,
            causal: false,
            softmax_scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
        }
    }

    /// Checks the problem on its own (no GPU, no buffers): every shape rule and, with checked
    /// arithmetic, the elements each buffer must hold. Any field values give `Ok` or
    /// [`Error::InvalidArgument`], never a panic. [`Warpforge::attention`] runs this first.
    pub fn check(&self) -> Result<AttentionExtents> {
        let p = self;
        check(p.batch >= 1 && p.heads_q >= 1 && p.heads_kv >= 1 && p.seq_q >= 1 && p.seq_k >= 1, || {
            format!("empty attention problem {p:?}")
        })?;
        let overflow = || Error::InvalidArgument(format!("the buffers of {p:?} overflow usize"));
        let rows_q = p.batch.checked_mul(p.seq_q).ok_or_else(overflow)?;
        let rows_k = p.batch.checked_mul(p.seq_k).ok_or_else(overflow)?;
        self.shape(rows_q, rows_k).extents()
    }

    fn shape(&self, rows_q: usize, rows_k: usize) -> Shape {
        let p = self;
        Shape {
            batch: p.batch,
            heads_q: p.heads_q,
            heads_kv: p.heads_kv,
            rows_q,
            rows_k,
            seq_q: p.seq_q,
            seq_k: p.seq_k,
            head_dim: p.head_dim,
            causal: p.causal,
            softmax_scale: p.softmax_scale,
        }
    }
}

/// A variable-length batch: `batch` sequences of different lengths packed back to back, Q and O
/// `[total_q, heads_q, head_dim]`, K and V `[total_k, heads_kv, head_dim]`, sequence `b`'s
/// queries at rows `cu_seqlens_q[b] .. cu_seqlens_q[b + 1]` and its keys likewise (the
/// cumulative offsets are `batch + 1` u32 in device memory: `0`, non-decreasing, ending at the
/// totals). The log-sum-exp is `[heads_q, total_q]`.
///
/// The offsets live on the device, so they are not checked: the kernel clamps each sequence to
/// the rows that exist and to `max_seq_q` / `max_seq_k` (so a call never writes outside O or the
/// LSE and never runs longer than the longest sequences allow); offsets that break the rules
/// give unspecified (but finite-time, in-bounds) results for the sequences concerned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionVarlenProblem {
    /// Sequences, ≥ 1.
    pub batch: usize,
    /// Query (and output) heads, a multiple of `heads_kv`.
    pub heads_q: usize,
    /// Key/value heads, ≥ 1.
    pub heads_kv: usize,
    /// Rows of Q and O (all sequences' queries), ≥ 1.
    pub total_q: usize,
    /// Rows of K and V, ≥ 1.
    pub total_k: usize,
    /// The longest query sequence, 1..=total_q (the grid covers this many queries per sequence).
    pub max_seq_q: usize,
    /// The longest key sequence, 1..=total_k.
    pub max_seq_k: usize,
    /// Head dimension: 64, 128 or 256.
    pub head_dim: usize,
    /// Causal mask, bottom-right aligned per sequence.
    pub causal: bool,
    /// Scale of the logits, finite and > 0.
    pub softmax_scale: f32,
}

impl AttentionVarlenProblem {
    /// A non-causal problem with the usual scale `1/√head_dim`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        batch: usize,
        heads_q: usize,
        heads_kv: usize,
        total_q: usize,
        total_k: usize,
        max_seq_q: usize,
        max_seq_k: usize,
        head_dim: usize,
    ) -> Self {
        AttentionVarlenProblem {
            batch,
            heads_q,
            heads_kv,
            total_q,
            total_k,
            max_seq_q,
            max_seq_k,
            head_dim,
            causal: false,
            softmax_scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
        }
    }

    /// Checks the problem on its own, as [`AttentionProblem::check`] (the LSE extent is
    /// `heads_q × total_q`).
    pub fn check(&self) -> Result<AttentionExtents> {
        let p = self;
        check(p.batch >= 1 && p.heads_q >= 1 && p.heads_kv >= 1 && p.total_q >= 1 && p.total_k >= 1, || {
            format!("empty attention problem {p:?}")
        })?;
        check((1..=p.total_q).contains(&p.max_seq_q) && (1..=p.total_k).contains(&p.max_seq_k), || {
            format!("max_seq_q {} / max_seq_k {} must be 1..=total_q / total_k", p.max_seq_q, p.max_seq_k)
        })?;
        self.shape().extents()
    }

    fn shape(&self) -> Shape {
        let p = self;
        Shape {
            batch: p.batch,
            heads_q: p.heads_q,
            heads_kv: p.heads_kv,
            rows_q: p.total_q,
            rows_k: p.total_k,
            seq_q: p.max_seq_q,
            seq_k: p.max_seq_k,
            head_dim: p.head_dim,
            causal: p.causal,
            softmax_scale: p.softmax_scale,
        }
    }
}

/// What both problem kinds reduce to: the rows of the packed tensors, the (longest) sequence
/// lengths, and the rest of the launch.
#[derive(Clone, Copy, Debug)]
struct Shape {
    batch: usize,
    heads_q: usize,
    heads_kv: usize,
    rows_q: usize,
    rows_k: usize,
    seq_q: usize,
    seq_k: usize,
    head_dim: usize,
    causal: bool,
    softmax_scale: f32,
}

impl Shape {
    /// The rules both problem kinds share, and the buffer extents (checked arithmetic).
    fn extents(&self) -> Result<AttentionExtents> {
        let p = self;
        check(HEAD_DIMS.iter().any(|&d| d as usize == p.head_dim), || {
            format!("head_dim {} is not supported (supported: {HEAD_DIMS:?})", p.head_dim)
        })?;
        check(p.heads_q.is_multiple_of(p.heads_kv), || {
            format!("heads_q {} is not a multiple of heads_kv {} (GQA groups)", p.heads_q, p.heads_kv)
        })?;
        check(p.softmax_scale.is_finite() && p.softmax_scale > 0.0, || {
            format!("softmax_scale {} must be finite and > 0", p.softmax_scale)
        })?;
        // The tiles (query tiles × query heads × sequences) are numbered in 32 bits and a grid
        // of one CTA per tile stays below 2^31.
        let q_tiles = p.seq_q.div_ceil(BLOCK_M as usize);
        check((q_tiles as u128) * (p.heads_q as u128) * (p.batch as u128) < MAX_ROWS as u128, || {
            format!("{q_tiles} query tiles × {} heads × batch {} must be < 2^31", p.heads_q, p.batch)
        })?;
        check(p.rows_q < MAX_ROWS && p.rows_k < MAX_ROWS, || {
            format!("{} query rows and {} key rows: each must be < 2^31", p.rows_q, p.rows_k)
        })?;
        let overflow = || Error::InvalidArgument(format!("the buffers of {p:?} overflow usize"));
        let product = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
        Ok(AttentionExtents {
            group: p.heads_q / p.heads_kv,
            q: product(product(p.rows_q, p.heads_q)?, p.head_dim)?,
            kv: product(product(p.rows_k, p.heads_kv)?, p.head_dim)?,
            lse: product(p.rows_q, p.heads_q)?,
        })
    }
}

/// What a valid [`AttentionProblem`] touches ([`AttentionProblem::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionExtents {
    /// Query heads per key/value head.
    pub group: usize,
    /// Elements of Q (and of O).
    pub q: usize,
    /// Elements of K (and of V).
    pub kv: usize,
    /// Elements of the log-sum-exp output.
    pub lse: usize,
}

impl Warpforge {
    /// `o = softmax(scale · q·kᵀ [+ causal mask]) · v` for every sequence and query head, and
    /// the row log-sum-exp into `lse` when given (see the module docs for layouts and rules).
    /// Buffers may be longer than the problem needs; q, k and v must start 16-byte aligned and
    /// o 4-byte aligned. The packed case of [`Warpforge::attention_strided`].
    #[allow(clippy::too_many_arguments)]
    pub fn attention<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &AttentionProblem,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        self.attention_strided(stream, problem, &AttentionStrides::packed(problem), q, k, v, o, lse)
    }

    /// As [`Warpforge::attention`] with Q, K, V and O laid out by `strides` (element strides,
    /// head_dim contiguous; the rules are [`AttentionProblem::check_strides`]'s). Each buffer
    /// starts at its tensor's element (0, 0, 0, 0) and holds the span the strides reach; the LSE
    /// stays packed `[batch, heads_q, seq_q]`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_strided<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &AttentionProblem,
        strides: &AttentionStrides,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        self.check_sm90("attention")?;
        let spans = problem.check_strides(strides)?;
        let shape = problem.shape(problem.batch * problem.seq_q, problem.batch * problem.seq_k);
        let layouts = problem.layouts(strides);
        self.launch_attention(stream, &shape, (&layouts, &spans), (q, k, v), o, lse, None)
    }

    /// As [`Warpforge::attention`] for a variable-length batch ([`AttentionVarlenProblem`]):
    /// `cu_seqlens_q` and `cu_seqlens_k` hold `batch + 1` u32 offsets each (contents are the
    /// caller's; see the problem's docs for what bad offsets do); the LSE is
    /// `[heads_q, total_q]`. The packed case of [`Warpforge::attention_varlen_strided`].
    #[allow(clippy::too_many_arguments)]
    pub fn attention_varlen<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &AttentionVarlenProblem,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        cu_seqlens_q: &impl DevicePtr<u32>,
        cu_seqlens_k: &impl DevicePtr<u32>,
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        let strides = AttentionVarlenStrides::packed(problem);
        self.attention_varlen_strided(stream, problem, &strides, q, k, v, cu_seqlens_q, cu_seqlens_k, o, lse)
    }

    /// As [`Warpforge::attention_varlen`] with Q, K, V and O laid out by `strides` (row and head
    /// strides in elements, head_dim contiguous; the rules are
    /// [`AttentionVarlenProblem::check_strides`]'s); the LSE stays packed `[heads_q, total_q]`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_varlen_strided<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &AttentionVarlenProblem,
        strides: &AttentionVarlenStrides,
        q: &impl DevicePtr<T>,
        k: &impl DevicePtr<T>,
        v: &impl DevicePtr<T>,
        cu_seqlens_q: &impl DevicePtr<u32>,
        cu_seqlens_k: &impl DevicePtr<u32>,
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
    ) -> Result<()> {
        self.check_sm90("attention_varlen")?;
        let spans = problem.check_strides(strides)?;
        for (name, offsets) in [("cu_seqlens_q", cu_seqlens_q.len()), ("cu_seqlens_k", cu_seqlens_k.len())] {
            check(offsets > problem.batch, || {
                format!("{name} holds {offsets} offsets, the batch of {} needs {}", problem.batch, problem.batch + 1)
            })?;
        }
        let offsets: (&dyn DevicePtr<u32>, &dyn DevicePtr<u32>) = (cu_seqlens_q, cu_seqlens_k);
        let layouts = problem.layouts(strides);
        self.launch_attention(stream, &problem.shape(), (&layouts, &spans), (q, k, v), o, lse, Some(offsets))
    }

    /// Allocates `stream`'s tile-claim counters, which attention calls on a persistent grid use
    /// (prefills whose kernel shape runs one), so the first such call on `stream` may be made
    /// inside a CUDA graph capture (as long as at most
    /// [`MAX_CACHED_STREAMS`](crate::gemm::MAX_CACHED_STREAMS) streams use them; the cache
    /// evicts beyond that). Without it, that first call must run eagerly before the capture.
    pub fn reserve_attention_workspace(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.check_sm90("reserve_attention_workspace")?;
        self.module().check_context(stream, &[])?;
        counters::counters(&mut *self.attention_counters().lock()?, stream)?;
        Ok(())
    }

    /// Checks the buffers against `spans` (lengths, alignment, context), builds the maps from
    /// `layouts` (both from the checked strides) and launches; `offsets` makes the launch
    /// variable-length.
    #[allow(clippy::too_many_arguments)]
    fn launch_attention<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        shape: &Shape,
        (layouts, spans): (&Layouts, &AttentionSpans),
        (q, k, v): (&impl DevicePtr<T>, &impl DevicePtr<T>, &impl DevicePtr<T>),
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        offsets: Option<(&dyn DevicePtr<u32>, &dyn DevicePtr<u32>)>,
    ) -> Result<()> {
        let p = shape;
        let mut owners = vec![&**q.stream(), &**k.stream(), &**v.stream(), &**o.stream()];
        if let Some(l) = &lse {
            owners.push(&**l.stream());
        }
        if let Some((cu_q, cu_k)) = offsets {
            owners.extend([&**cu_q.stream(), &**cu_k.stream()]);
        }
        self.module().check_context(stream, &owners)?;
        let s = spans;
        for (name, len, need) in [("q", q.len(), s.q), ("k", k.len(), s.k), ("v", v.len(), s.v), ("o", o.len(), s.o)] {
            check(len >= need, || format!("{name} holds {len} elements, the problem needs {need}"))?;
        }
        if let Some(l) = &lse {
            check(l.len() >= s.lse, || format!("lse holds {} elements, the problem writes {}", l.len(), s.lse))?;
        }

        // A few query rows per key/value head: the decode path (`attention/decode.rs`), unless
        // its workspace would be too large.
        let lse = match lse {
            Some(l) if decode::takes_decode_path(p) => {
                if self.launch_attention_decode(stream, p, layouts, (q, k, v), o, Some(&mut *l), offsets)? {
                    return Ok(());
                }
                Some(l)
            }
            None if decode::takes_decode_path(p) => {
                if self.launch_attention_decode(stream, p, layouts, (q, k, v), o, None, offsets)? {
                    return Ok(());
                }
                None
            }
            other => other,
        };
        let shape = u32::try_from(p.head_dim).ok().and_then(|d| shape_for(d, p.causal, p.seq_k)).ok_or_else(|| {
            Error::InvalidArgument(format!("head_dim {} is not supported (supported: {HEAD_DIMS:?})", p.head_dim))
        })?;
        let kernel = self.entry(T::ATTENTION_ENTRIES[shape_index(shape)])?;
        let keys = shape.keys;
        let map = |layout: &strides::Layout, box_rows: u32| {
            let d = p.head_dim as u64;
            let dims = [d, layout.heads as u64, layout.rows as u64, layout.batches as u64];
            TensorMapBuilder::<T>::new(&dims, &[HEAD_CHUNK, 1, box_rows, 1])
                .global_strides(&layout.tma_strides(p.head_dim))
                .swizzle(Swizzle::B128)
        };
        let aligned = |name: &str, addr: u64, align: u64| {
            check(addr.is_multiple_of(align), || format!("{name} at {addr:#x} is not {align}-byte aligned"))
        };
        let (q_map, q_access) = {
            let (addr, _) = q.device_ptr(stream);
            aligned("q", addr, TMA_ALIGN)?;
            map(&layouts.q, BLOCK_M).encode(q, stream)?
        };
        let (k_map, k_access) = {
            let (addr, _) = k.device_ptr(stream);
            aligned("k", addr, TMA_ALIGN)?;
            map(&layouts.k, keys).encode(k, stream)?
        };
        let (v_map, v_access) = {
            let (addr, _) = v.device_ptr(stream);
            aligned("v", addr, TMA_ALIGN)?;
            map(&layouts.v, keys).encode(v, stream)?
        };
        let (o_ptr, o_access) = o.device_ptr_mut(stream);
        aligned("o", o_ptr, 4)?;
        let [(lse_ptr, lse_access), (cu_q, cu_q_access), (cu_k, cu_k_access)] = optional_ptrs(stream, lse, offsets);
        let tiles = p.seq_q.div_ceil(BLOCK_M as usize) as u32;
        // Checked: heads_kv ≥ 1 divides heads_q.
        let group = p.heads_q / p.heads_kv;
        let params = AttentionParams {
            o: o_ptr,
            lse: lse_ptr,
            cu_seqlens_q: cu_q,
            cu_seqlens_k: cu_k,
            tile_counters: 0,
            o_batch_stride: layouts.o.batch as u64,
            o_row_stride: layouts.o.row as u64,
            o_head_stride: layouts.o.head as u64,
            seq_q: p.seq_q as u32,
            seq_k: p.seq_k as u32,
            total_q: p.rows_q as u32,
            heads_q: p.heads_q as u32,
            group: group as u32,
            scale_log2: p.softmax_scale * std::f32::consts::LOG2_E,
            causal: p.causal as u32,
            q_tiles: tiles,
            heads_kv: p.heads_kv as u32,
            batch: p.batch as u32,
            band: 1,
            reserved: 0,
        };
        // Unequal tiles (causal, variable length) of 8 or more query tiles in bands sorted
        // longest first, as wide as their K/V fits in L2 (the last tiles claimed are short);
        // the rest head by head.
        let pairs = params.heads_kv * params.batch;
        let kv_bytes_per_pair = 2 * p.seq_k as u64 * p.head_dim as u64 * std::mem::size_of::<T>() as u64;
        // A persistent grid (shapes `persistent` holds for) claims its tiles from this stream's
        // counters; the others run one CTA per tile, in band 1 (the kernel's rule).
        let persistent_grid = shape.persistent;
        let equal_tiles = !p.causal && offsets.is_none();
        let band = if equal_tiles || !persistent_grid {
            1
        } else {
            AttentionTiles::band_for(self.l2_bytes(), kv_bytes_per_pair, pairs, tiles)
        };
        let mut counter_cache = self.attention_counters().lock()?;
        let (tile_counters, counters_access) = if persistent_grid {
            let (ptr, access) = counters::counters(&mut counter_cache, stream)?.device_ptr_mut(stream);
            (ptr, Some(access))
        } else {
            (0, None)
        };
        let params = AttentionParams { band, tile_counters, ..params };
        let config = LaunchConfig::linear(tiles_of(&params).grid(persistent_grid, self.sm_count()), THREADS)
            .with_dynamic_smem(smem_plan(shape).launch_bytes());
        let keep = [
            Some(q_access),
            Some(k_access),
            Some(v_access),
            Some(o_access),
            lse_access,
            cu_q_access,
            cu_k_access,
            counters_access,
        ];
        // SAFETY: the maps describe Q, K and V with the checked strides, validated against the
        // buffers' lengths (each holds every element its strides reach: checked above), with the
        // kernel's box and swizzle; O spans every element its even, non-overlapping strides reach
        // (an extent-1 stride is only multiplied by 0) and LSE every row × head, both borrowed
        // mutably; the offsets hold `batch + 1` entries each and the kernel clamps their contents;
        // the grid is 1-D over the checked tile count (< 2^31) with 384 threads and the kernel's
        // shared-memory plan, as its contract asks; a persistent grid's counters are this
        // stream's alone and zero (every launch leaves them so); the guards (and the cache's
        // lock) are held until it is enqueued.
        let args = (q_map, k_map, v_map, params);
        // SAFETY: as just said.
        let launched = unsafe { kernel.launch(stream, &config, args, keep.into_iter().flatten()) };
        drop(counter_cache);
        launched
    }
}

/// The addresses of the optional LSE and variable-length offsets (0 for an absent one), with
/// the guards that record the launch's access to them.
fn optional_ptrs<'a, 'b: 'a>(
    stream: &'a Arc<CudaStream>,
    lse: Option<&'a mut (dyn DevicePtrMut<f32> + 'b)>,
    offsets: Option<(&'a dyn DevicePtr<u32>, &'a dyn DevicePtr<u32>)>,
) -> [(u64, Option<SyncOnDrop<'a>>); 3] {
    let lse = lse.map_or((0, None), |l| {
        let (ptr, access) = l.device_ptr_mut(stream);
        (ptr, Some(access))
    });
    let read = |buffer: &'a dyn DevicePtr<u32>| {
        let (ptr, access) = buffer.device_ptr(stream);
        (ptr, Some(access))
    };
    match offsets {
        Some((cu_q, cu_k)) => [lse, read(cu_q), read(cu_k)],
        None => [lse, (0, None), (0, None)],
    }
}

/// The launch's tiles (as the kernel reads them from `params`).
fn tiles_of(params: &AttentionParams) -> AttentionTiles {
    AttentionTiles {
        q_tiles: params.q_tiles,
        group: params.group,
        heads_kv: params.heads_kv,
        batch: params.batch,
        band: params.band,
    }
}
