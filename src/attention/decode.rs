//! The decode path of the attention entry points (`abi::attention_decode`): a problem whose
//! query rows per key/value head, `seq_q × group`, fit one 16-row fragment runs
//! `attention_decode_*` over (sequence, key/value head) items with their keys split across
//! CTAs, then `attention_combine_*`, instead of the tiled kernel's 128-row query tiles. The
//! same layouts, strides, variable-length offsets and outputs; the caller sees one call.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::attention_decode::{HEAD_DIMS, MIN_SPLIT_KEYS, ROWS, SPLIT_GRAIN, THREADS, WARPS};
use warpforge_abi::{AttentionDecodeParams, DecodeTensor};
use warpforge_host::{LaunchConfig, Result};
use warpforge_logic::attention_decode::DecodeSplit;

use super::strides::Layout;
use super::{AttentionElement, Shape, TMA_ALIGN, optional_ptrs};
use crate::Warpforge;
use crate::gemm::check;

/// The largest workspace (bytes of partial outputs) the decode path takes; a problem that
/// would need more (hundreds of thousands of items) runs on the tiled kernel.
const MAX_WORKSPACE_BYTES: usize = 256 << 20;

/// Rows of a work item's workspace slot: `seq_q · group`, the most an item has.
fn slot_rows(p: &Shape) -> usize {
    p.seq_q * (p.heads_q / p.heads_kv)
}

/// Whether `p` takes the decode path: a head dimension with a decode entry and at most
/// [`ROWS`] query rows per key/value head.
pub(super) fn takes_decode_path(p: &Shape) -> bool {
    HEAD_DIMS.iter().any(|&d| d as usize == p.head_dim) && slot_rows(p) <= ROWS as usize
}

/// The pointer form of a checked layout over the buffer at `ptr`.
fn tensor(layout: &Layout, ptr: u64) -> DecodeTensor {
    DecodeTensor { ptr, batch: layout.batch as u64, row: layout.row as u64, head: layout.head as u64 }
}

impl Warpforge {
    /// Launches the decode path for `p` (`takes_decode_path`), the buffers already checked
    /// against the layouts' spans by the caller; `Ok(false)` when its workspace would be too
    /// large (the caller then runs the tiled kernel).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_attention_decode<T: AttentionElement>(
        &self,
        stream: &Arc<CudaStream>,
        p: &Shape,
        layouts: &super::strides::Layouts,
        (q, k, v): (&impl DevicePtr<T>, &impl DevicePtr<T>, &impl DevicePtr<T>),
        o: &mut impl DevicePtrMut<T>,
        lse: Option<&mut dyn DevicePtrMut<f32>>,
        offsets: Option<(&dyn DevicePtr<u32>, &dyn DevicePtr<u32>)>,
    ) -> Result<bool> {
        let (decode_entry, combine_entry) = T::DECODE_ENTRIES[usize::from(p.head_dim == 128)];
        let (decode, combine) = (self.entry(decode_entry)?, self.entry(combine_entry)?);
        let items = p.batch * p.heads_kv;
        let resident = decode.kernel().plan_persistent(THREADS, 0, None, u64::MAX)?.blocks;
        let split = DecodeSplit::plan(
            items.min(u32::MAX as usize) as u32,
            p.seq_k as u32,
            resident,
            SPLIT_GRAIN,
            MIN_SPLIT_KEYS,
        );
        let slots = items as u128 * split.splits as u128 * WARPS as u128 * slot_rows(p) as u128;
        let workspace_bytes = slots * (p.head_dim as u128 + 2) * 4;
        if workspace_bytes > MAX_WORKSPACE_BYTES as u128 || items as u128 * split.splits as u128 >= 1 << 31 {
            return Ok(false);
        }
        let slots = slots as usize;
        // SAFETY: the decode entry writes every slot row it has before the combine entry reads
        // it (every warp of every split writes its item's rows); f32 has no invalid bit patterns.
        let (mut partial_o, mut partial_stats) =
            unsafe { (stream.alloc::<f32>(slots * p.head_dim)?, stream.alloc::<f32>(slots * 2)?) };

        let aligned = |name: &str, addr: u64, align: u64| {
            check(addr.is_multiple_of(align), || format!("{name} at {addr:#x} is not {align}-byte aligned"))
        };
        let ((q_ptr, q_access), (k_ptr, k_access), (v_ptr, v_access)) =
            (q.device_ptr(stream), k.device_ptr(stream), v.device_ptr(stream));
        for (name, addr) in [("q", q_ptr), ("k", k_ptr), ("v", v_ptr)] {
            aligned(name, addr, TMA_ALIGN)?;
        }
        let (o_ptr, o_access) = o.device_ptr_mut(stream);
        aligned("o", o_ptr, 4)?;
        let [(lse_ptr, lse_access), (cu_q, cu_q_access), (cu_k, cu_k_access)] = optional_ptrs(stream, lse, offsets);
        let (po_ptr, po_access) = partial_o.device_ptr_mut(stream);
        let (ps_ptr, ps_access) = partial_stats.device_ptr_mut(stream);
        let params = AttentionDecodeParams {
            lse: lse_ptr,
            cu_seqlens_q: cu_q,
            cu_seqlens_k: cu_k,
            partial_o: po_ptr,
            partial_stats: ps_ptr,
            seq_q: p.seq_q as u32,
            seq_k: p.seq_k as u32,
            total_q: p.rows_q as u32,
            total_k: p.rows_k as u32,
            heads_q: p.heads_q as u32,
            heads_kv: p.heads_kv as u32,
            group: (p.heads_q / p.heads_kv) as u32,
            batch: p.batch as u32,
            splits: split.splits,
            split_keys: split.split_keys,
            causal: p.causal as u32,
            scale_log2: p.softmax_scale * std::f32::consts::LOG2_E,
        };
        let (q_t, k_t, v_t, o_t) = (
            tensor(&layouts.q, q_ptr),
            tensor(&layouts.k, k_ptr),
            tensor(&layouts.v, v_ptr),
            tensor(&layouts.o, o_ptr),
        );
        let grid = (items * split.splits as usize) as u32;
        let combine_grid = (items * slot_rows(p).div_ceil(WARPS as usize)) as u32;
        // SAFETY: Q, K, V and O are described by the checked layouts over buffers that hold
        // every element they reach (the caller checked the spans), 16-byte aligned with strides
        // of 8-element multiples (16-byte rows) for Q, K, V and even strides for O; `seq_q ·
        // group ≤ ROWS` (`takes_decode_path`); the workspace holds every (item, split, warp)
        // slot of `seq_q · group` rows; the offsets hold `batch + 1` entries (checked by the
        // caller) and the kernel clamps their contents to the rows that exist; the grid is one
        // CTA per (item, split) of THREADS threads, the combine grid covers every item's rows;
        // both run on `stream` in order; the guards are held until both are enqueued.
        unsafe {
            let keep = [
                Some(q_access),
                Some(k_access),
                Some(v_access),
                cu_q_access,
                cu_k_access,
                Some(po_access),
                Some(ps_access),
            ];
            decode.launch(
                stream,
                &LaunchConfig::linear(grid, THREADS),
                (q_t, k_t, v_t, params),
                keep.into_iter().flatten(),
            )?;
            let ((_, po_read), (_, ps_read)) = (partial_o.device_ptr(stream), partial_stats.device_ptr(stream));
            let keep = [Some(o_access), lse_access, Some(po_read), Some(ps_read)];
            combine.launch(
                stream,
                &LaunchConfig::linear(combine_grid, THREADS),
                (o_t, params),
                keep.into_iter().flatten(),
            )?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seq_q: usize, heads_q: usize, heads_kv: usize, head_dim: usize) -> Shape {
        Shape {
            batch: 2,
            heads_q,
            heads_kv,
            rows_q: 2 * seq_q,
            rows_k: 2 * 4096,
            seq_q,
            seq_k: 4096,
            head_dim,
            causal: false,
            softmax_scale: 0.125,
        }
    }

    /// The decode path takes at most 16 query rows per key/value head at d = 64 and 128; the
    /// rest, d = 256 included, stays on the tiled kernel.
    #[test]
    fn the_decode_path_takes_16_rows_per_key_value_head_at_most() {
        for (seq_q, heads_q, heads_kv, head_dim, decode) in [
            (1, 32, 4, 128, true),
            (1, 16, 1, 64, true),
            (2, 32, 4, 128, true),
            (16, 8, 8, 128, true),
            (4, 32, 8, 64, true),
            (17, 8, 8, 128, false),
            (3, 32, 4, 128, false),
            (1, 32, 1, 128, false),
            (1, 32, 4, 256, false),
            (1, 1, 1, 256, false),
        ] {
            let p = shape(seq_q, heads_q, heads_kv, head_dim);
            assert_eq!(takes_decode_path(&p), decode, "{p:?}");
            assert_eq!(slot_rows(&p), seq_q * heads_q / heads_kv, "{p:?}");
        }
    }
}
