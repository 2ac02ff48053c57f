//! Strided attention layouts: each of Q, K, V and O given by its element strides between
//! sequences, rows and heads (head_dim contiguous), e.g. views of a fused QKV projection
//! `[batch, seq, heads_q + 2·heads_kv, head_dim]` or torch SDPA's `[batch, heads, seq, head_dim]`.
//!
//! The kernel reads Q, K and V through 4-D tensor maps (head_dim, heads, rows, sequences) built
//! from these strides, so they follow TMA's rules: every stride a multiple of 16 bytes (8
//! elements) below 2^40 bytes, every base 16-byte aligned. O is written with 4-byte pair
//! stores at `sequence·batch + row·seq + head·head + column`: its strides are even and its
//! rows distinct (no two (sequence, row, head) of O share an element). A dimension of extent 1
//! is never stepped, so its stride is free. The rules and the spans each buffer must cover are
//! pure ([`AttentionProblem::check_strides`], [`AttentionVarlenProblem::check_strides`]) and
//! CPU-tested (`tests/problem_checks.rs`; below: every accepted layout gives tensor maps the
//! driver rules accept).

use warpforge_host::{Error, Result};

use super::{AttentionProblem, AttentionVarlenProblem};
use crate::gemm::check;

/// Bytes of an attention element (bf16, f16).
const ELEMENT_BYTES: usize = 2;
/// TMA's global strides are multiples of 16 bytes.
const TMA_STRIDE_ELEMENTS: usize = 16 / ELEMENT_BYTES;
/// TMA's global strides are below 2^40 bytes.
const TMA_STRIDE_LIMIT: u128 = 1 << 40;

/// Element strides of one fixed-length attention tensor (Q, K, V or O): from one sequence to
/// the next (`batch`), one row, i.e. sequence position, to the next (`seq`), and one head to
/// the next (`head`). Head-dimension elements are contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorStrides {
    /// Elements between sequences.
    pub batch: usize,
    /// Elements between rows of a sequence.
    pub seq: usize,
    /// Elements between heads.
    pub head: usize,
}

impl TensorStrides {
    /// `[batch, seq, heads, head_dim]`, packed (the layout of [`Warpforge::attention`](crate::Warpforge::attention)).
    pub const fn bshd(seq: usize, heads: usize, head_dim: usize) -> Self {
        let row = heads.saturating_mul(head_dim);
        TensorStrides { batch: seq.saturating_mul(row), seq: row, head: head_dim }
    }

    /// `[batch, heads, seq, head_dim]`, packed (torch SDPA's layout).
    pub const fn bhsd(heads: usize, seq: usize, head_dim: usize) -> Self {
        let head = seq.saturating_mul(head_dim);
        TensorStrides { batch: heads.saturating_mul(head), seq: head_dim, head }
    }
}

/// Element strides of one variable-length tensor, whose sequences are rows back to back (the
/// cumulative offsets say where each starts): between rows and between heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowStrides {
    /// Elements between rows.
    pub row: usize,
    /// Elements between heads.
    pub head: usize,
}

impl RowStrides {
    /// `[rows, heads, head_dim]`, packed.
    pub const fn packed(heads: usize, head_dim: usize) -> Self {
        RowStrides { row: heads.saturating_mul(head_dim), head: head_dim }
    }
}

/// The strides of Q, K, V and O of a fixed-length call
/// ([`Warpforge::attention_strided`](crate::Warpforge::attention_strided)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionStrides {
    /// Of Q (`heads_q` heads, `seq_q` rows per sequence).
    pub q: TensorStrides,
    /// Of K (`heads_kv` heads, `seq_k` rows).
    pub k: TensorStrides,
    /// Of V (as K).
    pub v: TensorStrides,
    /// Of O (as Q).
    pub o: TensorStrides,
}

/// The strides of Q, K, V and O of a variable-length call
/// ([`Warpforge::attention_varlen_strided`](crate::Warpforge::attention_varlen_strided)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttentionVarlenStrides {
    /// Of Q (`heads_q` heads, `total_q` rows).
    pub q: RowStrides,
    /// Of K (`heads_kv` heads, `total_k` rows).
    pub k: RowStrides,
    /// Of V (as K).
    pub v: RowStrides,
    /// Of O (as Q).
    pub o: RowStrides,
}

impl AttentionStrides {
    /// Every tensor packed `[batch, seq, heads, head_dim]`: what [`Warpforge::attention`](crate::Warpforge::attention) uses.
    pub const fn packed(p: &AttentionProblem) -> Self {
        let (q, kv) =
            (TensorStrides::bshd(p.seq_q, p.heads_q, p.head_dim), TensorStrides::bshd(p.seq_k, p.heads_kv, p.head_dim));
        AttentionStrides { q, k: kv, v: kv, o: q }
    }

    /// Every tensor `[batch, heads, seq, head_dim]` (torch SDPA's layout).
    pub const fn bhsd(p: &AttentionProblem) -> Self {
        let (q, kv) =
            (TensorStrides::bhsd(p.heads_q, p.seq_q, p.head_dim), TensorStrides::bhsd(p.heads_kv, p.seq_k, p.head_dim));
        AttentionStrides { q, k: kv, v: kv, o: q }
    }

    /// Q, K and V as views of one fused projection `[batch, seq, heads_q + 2·heads_kv,
    /// head_dim]` (Q's heads, then K's, then V's: pass the buffer from element 0, `heads_q ·
    /// head_dim` and `(heads_q + heads_kv) · head_dim` as q, k and v), O packed. The fused
    /// tensor has one sequence length: `seq_q` must equal `seq_k`.
    pub const fn fused_qkv(p: &AttentionProblem) -> Self {
        let row = (p.heads_q.saturating_add(p.heads_kv.saturating_mul(2))).saturating_mul(p.head_dim);
        let fused = TensorStrides { batch: p.seq_q.saturating_mul(row), seq: row, head: p.head_dim };
        AttentionStrides { q: fused, k: fused, v: fused, o: TensorStrides::bshd(p.seq_q, p.heads_q, p.head_dim) }
    }
}

impl AttentionVarlenStrides {
    /// Every tensor packed `[rows, heads, head_dim]`: what
    /// [`Warpforge::attention_varlen`](crate::Warpforge::attention_varlen) uses.
    pub const fn packed(p: &AttentionVarlenProblem) -> Self {
        let (q, kv) = (RowStrides::packed(p.heads_q, p.head_dim), RowStrides::packed(p.heads_kv, p.head_dim));
        AttentionVarlenStrides { q, k: kv, v: kv, o: q }
    }

    /// Q, K and V as views of one fused projection `[rows, heads_q + 2·heads_kv, head_dim]`
    /// (as [`AttentionStrides::fused_qkv`]; `total_q` must equal `total_k`), O packed.
    pub const fn fused_qkv(p: &AttentionVarlenProblem) -> Self {
        let row = (p.heads_q.saturating_add(p.heads_kv.saturating_mul(2))).saturating_mul(p.head_dim);
        let fused = RowStrides { row, head: p.head_dim };
        AttentionVarlenStrides { q: fused, k: fused, v: fused, o: RowStrides::packed(p.heads_q, p.head_dim) }
    }
}

/// Elements each buffer must hold from its first element (the highest element the strides
/// reach, plus one), and the LSE's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionSpans {
    /// Of Q.
    pub q: usize,
    /// Of K.
    pub k: usize,
    /// Of V.
    pub v: usize,
    /// Of O.
    pub o: usize,
    /// Of the log-sum-exp (always packed: `[batch, heads_q, seq_q]`, or `[heads_q, total_q]`).
    pub lse: usize,
}

/// One tensor as the kernel addresses it: 4-D (head_dim, heads, rows, sequences), element
/// strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub heads: usize,
    pub rows: usize,
    pub batches: usize,
    pub head: usize,
    pub row: usize,
    pub batch: usize,
}

impl Layout {
    pub(super) const fn fixed(s: TensorStrides, batches: usize, rows: usize, heads: usize) -> Self {
        Layout { heads, rows, batches, head: s.head, row: s.seq, batch: s.batch }
    }

    /// A variable-length tensor: one "sequence" of all the rows (its batch stride is never
    /// stepped).
    pub(super) const fn varlen(s: RowStrides, rows: usize, heads: usize) -> Self {
        Layout { heads, rows, batches: 1, head: s.head, row: s.row, batch: 0 }
    }

    /// The stepped dimensions other than head_dim: (extent, stride).
    fn dims(&self) -> [(usize, usize); 3] {
        [(self.heads, self.head), (self.rows, self.row), (self.batches, self.batch)]
    }

    /// One past the highest element reached, `None` on overflow.
    fn span(&self, head_dim: usize) -> Option<usize> {
        self.dims().iter().try_fold(head_dim, |end, &(n, s)| end.checked_add((n - 1).checked_mul(s)?))
    }

    /// The tensor-map rules: strides of stepped dimensions in 16-byte units, below 2^40 bytes.
    fn check_tma(&self, name: &str) -> Result<()> {
        for ((n, s), what) in self.dims().into_iter().zip(["head", "row", "batch"]) {
            if n > 1 {
                check(s.is_multiple_of(TMA_STRIDE_ELEMENTS), || {
                    format!(
                        "{name}'s {what} stride {s} is not a multiple of {TMA_STRIDE_ELEMENTS} elements (TMA strides are 16-byte multiples)"
                    )
                })?;
                check((s as u128) * (ELEMENT_BYTES as u128) < TMA_STRIDE_LIMIT, || {
                    format!("{name}'s {what} stride {s} elements is not below 2^40 bytes (the TMA limit)")
                })?;
            }
        }
        Ok(())
    }

    /// O's rules: even strides (4-byte pair stores) and distinct elements for distinct
    /// (sequence, row, head, column): sorted by stride, each stepped dimension steps past
    /// everything below it.
    fn check_output(&self, name: &str, head_dim: usize) -> Result<()> {
        let mut dims: Vec<(usize, usize)> = self.dims().into_iter().filter(|&(n, _)| n > 1).collect();
        for &(_, s) in &dims {
            check(s.is_multiple_of(2), || format!("{name}'s stride {s} is odd (O is written in 4-byte pairs)"))?;
        }
        dims.sort_by_key(|&(_, s)| s);
        let mut below = head_dim;
        for (n, s) in dims {
            check(s >= below, || {
                format!("{name}'s strides make elements overlap: a stride of {s} steps inside a span of {below}")
            })?;
            below = (n - 1)
                .checked_mul(s)
                .and_then(|x| x.checked_add(below))
                .ok_or_else(|| Error::InvalidArgument(format!("{name}'s strides overflow usize")))?;
        }
        Ok(())
    }

    /// The tensor map's global strides in bytes for dimensions 1..4 (heads, rows, sequences);
    /// a dimension of extent 1 gets the span below it, rounded up to 16 bytes (never stepped,
    /// but the map still needs a valid stride).
    pub(super) fn tma_strides(&self, head_dim: usize) -> [u64; 3] {
        let mut below = (head_dim * ELEMENT_BYTES) as u64;
        self.dims().map(|(n, s)| {
            let bytes = if n > 1 { (s * ELEMENT_BYTES) as u64 } else { below.next_multiple_of(16) };
            below = below.max(bytes.saturating_mul(n as u64));
            bytes
        })
    }
}

/// The four layouts of a call, checked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layouts {
    pub q: Layout,
    pub k: Layout,
    pub v: Layout,
    pub o: Layout,
}

impl Layouts {
    /// Checks every rule and returns the spans (`lse`: the LSE's elements).
    pub(super) fn spans(&self, head_dim: usize, lse: usize) -> Result<AttentionSpans> {
        let span = |name: &str, l: &Layout| {
            l.span(head_dim).ok_or_else(|| Error::InvalidArgument(format!("{name}'s strides overflow usize")))
        };
        for (name, l) in [("q", &self.q), ("k", &self.k), ("v", &self.v)] {
            l.check_tma(name)?;
        }
        self.o.check_output("o", head_dim)?;
        Ok(AttentionSpans {
            q: span("q", &self.q)?,
            k: span("k", &self.k)?,
            v: span("v", &self.v)?,
            o: span("o", &self.o)?,
            lse,
        })
    }
}

impl AttentionProblem {
    /// Checks the problem ([`AttentionProblem::check`]) and `strides` against it, and returns
    /// the elements each buffer must hold. Pure: any values give `Ok` or
    /// [`Error::InvalidArgument`], never a panic.
    pub fn check_strides(&self, strides: &AttentionStrides) -> Result<AttentionSpans> {
        let e = self.check()?;
        self.layouts(strides).spans(self.head_dim, e.lse)
    }

    pub(super) fn layouts(&self, s: &AttentionStrides) -> Layouts {
        let p = self;
        Layouts {
            q: Layout::fixed(s.q, p.batch, p.seq_q, p.heads_q),
            k: Layout::fixed(s.k, p.batch, p.seq_k, p.heads_kv),
            v: Layout::fixed(s.v, p.batch, p.seq_k, p.heads_kv),
            o: Layout::fixed(s.o, p.batch, p.seq_q, p.heads_q),
        }
    }
}

impl AttentionVarlenProblem {
    /// As [`AttentionProblem::check_strides`] for a variable-length batch.
    pub fn check_strides(&self, strides: &AttentionVarlenStrides) -> Result<AttentionSpans> {
        let e = self.check()?;
        self.layouts(strides).spans(self.head_dim, e.lse)
    }

    pub(super) fn layouts(&self, s: &AttentionVarlenStrides) -> Layouts {
        let p = self;
        Layouts {
            q: Layout::varlen(s.q, p.total_q, p.heads_q),
            k: Layout::varlen(s.k, p.total_k, p.heads_kv),
            v: Layout::varlen(s.v, p.total_k, p.heads_kv),
            o: Layout::varlen(s.o, p.total_q, p.heads_q),
        }
    }
}

#[cfg(test)]
mod tests {
    use warpforge_abi::attention_sm90::{BLOCK_M, HEAD_CHUNK};
    use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder};

    use super::*;

    /// The maps the launch builds from `layout` pass every driver rule over a buffer of exactly
    /// the checked span (no GPU: `TensorMapBuilder::validate`).
    fn maps_validate(layout: &Layout, head_dim: usize, span: usize) {
        let dims = [head_dim as u64, layout.heads as u64, layout.rows as u64, layout.batches as u64];
        let map = TensorMapBuilder::<half::bf16>::new(&dims, &[HEAD_CHUNK, 1, BLOCK_M, 1])
            .global_strides(&layout.tma_strides(head_dim))
            .swizzle(Swizzle::B128);
        if let Err(e) = map.validate(256, (span * ELEMENT_BYTES) as u64) {
            panic!("{layout:?}: {e}");
        }
    }

    #[test]
    fn accepted_layouts_give_valid_tensor_maps() {
        for (batch, heads_q, heads_kv, seq, d) in [(2, 4, 2, 100, 64), (1, 8, 1, 129, 128), (3, 2, 2, 1, 256)] {
            let p = AttentionProblem::new(batch, heads_q, heads_kv, seq, seq, d);
            let padded = TensorStrides { batch: 5 * seq * heads_q * d, seq: heads_q * d + 8, head: d + 8 };
            for s in [
                AttentionStrides::packed(&p),
                AttentionStrides::bhsd(&p),
                AttentionStrides::fused_qkv(&p),
                AttentionStrides { q: padded, ..AttentionStrides::bhsd(&p) },
            ] {
                let spans = p.check_strides(&s).unwrap();
                let l = p.layouts(&s);
                maps_validate(&l.q, d, spans.q);
                maps_validate(&l.k, d, spans.k);
                maps_validate(&l.v, d, spans.v);
            }
            let v = AttentionVarlenProblem::new(batch, heads_q, heads_kv, 300, 300, 200, 200, d);
            for s in [AttentionVarlenStrides::packed(&v), AttentionVarlenStrides::fused_qkv(&v)] {
                let spans = v.check_strides(&s).unwrap();
                let l = v.layouts(&s);
                maps_validate(&l.q, d, spans.q);
                maps_validate(&l.k, d, spans.k);
            }
        }
    }

    /// A packed tensor's map strides are the packed ones; a dimension of extent 1 (one sequence,
    /// or a variable-length batch's single slice) gets the span below it, 16-byte rounded.
    #[test]
    fn map_strides_of_packed_and_single_sequence_tensors() {
        let p = AttentionProblem::new(2, 4, 2, 100, 100, 64);
        let l = p.layouts(&AttentionStrides::packed(&p));
        assert_eq!(l.q.tma_strides(64), [128, 4 * 128, 100 * 4 * 128]);
        let one = AttentionProblem::new(1, 4, 2, 100, 100, 64);
        let l = one.layouts(&AttentionStrides::packed(&one));
        assert_eq!(l.k.tma_strides(64), [128, 2 * 128, 100 * 2 * 128]);
        let v = AttentionVarlenProblem::new(3, 4, 2, 300, 300, 200, 200, 64);
        let l = v.layouts(&AttentionVarlenStrides::packed(&v));
        assert_eq!(l.q.tma_strides(64), [128, 4 * 128, 300 * 4 * 128]);
    }
}
