//! Strided 16-bit copy that brings a GEMM operand into the layout TMA reads: K-major rows with
//! a 16-byte-multiple pitch. Used only when the caller's layout cannot be read directly (an
//! M- or N-major operand, or a pitch TMA rejects); its cost is one extra read and write of the
//! operand, which docs/PERF.md accounts for.
//!
//! One thread per destination element, destination-order (coalesced writes); the reads of a
//! transposed source are strided and rely on L2.

use warpforge_dsl::abi::PackParams;
use warpforge_dsl::kernel;
use warpforge_dsl::thread::{global_x, grid_stride_x};

/// `dst[b][r][c] = src[b·src_batch + r·src_row + c·src_col]` for every destination element;
/// destination padding columns (`cols..dst_ld`) are written with zeros.
///
/// # Safety
/// `p.src` is valid for every element the strides address; `p.dst` for
/// `batch · dst_batch` elements with `dst_batch ≥ rows · dst_ld` and `dst_ld ≥ cols`.
#[kernel(max_threads = 1024)]
pub unsafe fn pack_b16(p: PackParams) {
    let src = p.src as *const u16;
    let dst = p.dst as *mut u16;
    let total = p.batch * p.rows * p.dst_ld;
    let mut i = global_x() as u64;
    while i < total {
        let b = i / (p.rows * p.dst_ld);
        let within = i % (p.rows * p.dst_ld);
        let (r, c) = (within / p.dst_ld, within % p.dst_ld);
        let value = if c < p.cols {
            // SAFETY: r < rows, c < cols, b < batch: an element the caller vouched for.
            unsafe { *src.add((b * p.src_batch + r * p.src_row + c * p.src_col) as usize) }
        } else {
            0
        };
        // SAFETY: b·dst_batch + r·dst_ld + c < batch·dst_batch by the contract.
        unsafe { *dst.add((b * p.dst_batch + r * p.dst_ld + c) as usize) = value };
        i += grid_stride_x() as u64;
    }
}
