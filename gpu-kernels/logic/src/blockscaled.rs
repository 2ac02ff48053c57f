//! Scale addressing of the block-scaled FP8 GEMM (`D = A·Bᵀ`, A with per-token 1 × 128 group
//! scales, B with 128 × 128 block scales, as `quant` lays them out), shared by its kernel and the
//! host's checks and references.
//!
//! The kernel promotes every [`PROMOTE_EVERY_K`] = 128 K: K block `kb` covers K elements
//! `128·kb .. 128·kb + 128`, which is exactly A's scale group `kb` and B's scale-block column
//! `kb`, so one K block needs one A scale per row and one B scale per 128 columns of D.

use crate::quant::{BLOCK, GROUP, group_scale_index, group_scale_pitch};

/// K elements per promotion (one ring slot of the kernel): the quantisers' group and block.
pub const PROMOTE_EVERY_K: usize = 128;
const _: () = assert!(PROMOTE_EVERY_K == GROUP && PROMOTE_EVERY_K == BLOCK, "one scale per promoted K block");

/// K blocks of a K-long reduction (the last one may be partial).
#[inline(always)]
pub const fn k_blocks(k: usize) -> usize {
    k.div_ceil(PROMOTE_EVERY_K)
}

/// f32 in A's scales for an `m × k` A: `round_up(m, 4) · k_blocks(k)`; `None` on overflow.
pub const fn a_scales_len(m: usize, k: usize) -> Option<usize> {
    match group_scale_pitch(m) {
        Some(pitch) => pitch.checked_mul(k_blocks(k)),
        None => None,
    }
}

/// f32 in B's scales for an `n × k` B: `ceil(n / 128) · k_blocks(k)`; `None` on overflow.
pub const fn b_scales_len(n: usize, k: usize) -> Option<usize> {
    n.div_ceil(BLOCK).checked_mul(k_blocks(k))
}

/// Index of A's scale for `row`, K block `kb` (`m` rows, scale pitch `m_pad`). Rows at or past
/// `m` (a tile's rows beyond A, which TMA fills with zeros and D never receives) read row
/// `m − 1`'s scale, so every read stays inside the buffer.
#[inline(always)]
pub const fn a_scale_at(row: u32, m: u32, kb: u32, m_pad: u32) -> usize {
    let row = if row < m { row } else { m - 1 };
    group_scale_index(row as usize, kb as usize, m_pad as usize)
}

/// Index of B's scale for the 128 columns of D from `n0` (a multiple of 128) in K block `kb`
/// (`k_blocks` K blocks in all).
#[inline(always)]
pub const fn b_scale_at(n0: u32, kb: u32, k_blocks: u32) -> usize {
    (n0 as usize / BLOCK) * k_blocks as usize + kb as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::block_scale_index;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn scale_reads_match_the_quantisers_layout_and_stay_inside(
            m in 1u32..700, n in 1u32..700, k in (1usize..40).prop_map(|x| x * 16),
        ) {
            let m_pad = group_scale_pitch(m as usize).unwrap() as u32;
            let kbs = k_blocks(k) as u32;
            let a_len = a_scales_len(m as usize, k).unwrap();
            let b_len = b_scales_len(n as usize, k).unwrap();
            // Every row a 128-row tile covers, every K element.
            for row in 0..(m.div_ceil(128) * 128) {
                for kk in (0..k).step_by(16) {
                    let kb = (kk / PROMOTE_EVERY_K) as u32;
                    let at = a_scale_at(row, m, kb, m_pad);
                    prop_assert!(at < a_len);
                    if row < m {
                        prop_assert_eq!(at, group_scale_index(row as usize, kk / GROUP, m_pad as usize));
                    }
                }
            }
            for n0 in (0..n).step_by(128) {
                for col in n0..(n0 + 128).min(n) {
                    for kk in (0..k).step_by(16) {
                        let at = b_scale_at(n0, (kk / PROMOTE_EVERY_K) as u32, kbs);
                        prop_assert!(at < b_len);
                        prop_assert_eq!(at, block_scale_index(col as usize, kk, k));
                    }
                }
            }
        }
    }

    #[test]
    fn lengths_overflow_to_none() {
        assert_eq!(a_scales_len(usize::MAX, 128), None);
        assert_eq!(a_scales_len(usize::MAX / 2, 1 << 20), None);
        assert_eq!(b_scales_len(usize::MAX, usize::MAX), None);
        assert_eq!(a_scales_len(5, 129), Some(16));
        assert_eq!(b_scales_len(129, 256), Some(4));
    }
}
