//! The 64-bit wgmma shared-memory matrix descriptor (REFERENCE §8.4).
//!
//! A wgmma operand in shared memory is described by its start address, two byte strides (LBO,
//! SBO) between 8-row × 16-byte core matrices, a base offset and the swizzle mode. The bit
//! packing lives here, host-tested, so the kernels and the tests build the same bits.
//! [`WgmmaDesc::canonical_address`] is the ISA's canonical-layout table (REFERENCE §8.4) as a
//! function: the tests check every descriptor the tiles build against it.

use crate::swizzle::{CHUNK_BYTES, Swizzle};

/// Which dimension of an operand tile is contiguous in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Major {
    /// K contiguous (A is M×K row-major, B is N×K row-major): `imm_trans = 0`.
    K,
    /// M (for A) or N (for B) contiguous: `imm_trans = 1`, 16-bit types only.
    Mn,
}

impl Major {
    /// The wgmma `imm-trans-a/b` immediate.
    pub const fn trans(self) -> u32 {
        match self {
            Major::K => 0,
            Major::Mn => 1,
        }
    }
}

/// Mask of the 18 address bits the descriptor can name (256 KiB of shared window).
const ADDR_MASK: u32 = 0x3_FFFF;
/// Each 14-bit field holds a byte quantity divided by 16.
const FIELD_MASK: u64 = 0x3FFF;

/// A wgmma shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WgmmaDesc(pub u64);

impl WgmmaDesc {
    /// Packs a descriptor. `addr`, `lbo` and `sbo` are bytes (multiples of 16); the base offset
    /// is 0, as for tiles placed at their swizzle alignment.
    pub const fn new(addr: u32, lbo: u32, sbo: u32, swizzle: Swizzle) -> Self {
        let start = (((addr & ADDR_MASK) >> 4) as u64) & FIELD_MASK;
        let lbo = ((lbo >> 4) as u64) & FIELD_MASK;
        let sbo = ((sbo >> 4) as u64) & FIELD_MASK;
        WgmmaDesc(start | lbo << 16 | sbo << 32 | swizzle.wgmma_layout_type() << 62)
    }

    /// The canonical K-major descriptor of a tile whose rows (M or N) are one swizzle span of K
    /// each, stacked contiguously (what a TMA box of `span` inner bytes writes): SBO = 8 rows,
    /// LBO unused (encoded 1). For [`Swizzle::None`] the core-matrix layout
    /// `(row / 8) * sbo + (k_chunk) * lbo + (row % 8) * 16` is assumed with the given strides.
    pub const fn k_major(addr: u32, swizzle: Swizzle, lbo_none: u32, sbo_none: u32) -> Self {
        match swizzle {
            Swizzle::None => Self::new(addr, lbo_none, sbo_none, swizzle),
            _ => Self::new(addr, 16, 8 * swizzle.span_bytes(), swizzle),
        }
    }

    /// The canonical MN-major descriptor (`imm-trans = 1`, 16-bit types only). `mn_stride`:
    /// bytes between the blocks adjacent along M/N (swizzled: blocks one span of M/N wide;
    /// unswizzled: 16-byte core-matrix columns); `k_stride`: bytes between groups of 8 K-rows.
    /// Swizzled layouts put the M/N stride in LBO and the K stride in SBO; the unswizzled one
    /// swaps them (REFERENCE §8.4), which this constructor hides.
    pub const fn mn_major(addr: u32, swizzle: Swizzle, mn_stride: u32, k_stride: u32) -> Self {
        match swizzle {
            Swizzle::None => Self::new(addr, k_stride, mn_stride, swizzle),
            _ => Self::new(addr, mn_stride, k_stride, swizzle),
        }
    }

    /// The same descriptor with its start address moved `bytes` further (a multiple of 16):
    /// stepping along K inside a swizzle atom of a K-major tile is `+ k_elems * elem_bytes`
    /// (32 B per k16 bf16 step = +2 in the field [H200 t3]); the base offset stays 0.
    pub const fn advance(self, bytes: u32) -> Self {
        let start = ((self.0 & FIELD_MASK) + (bytes >> 4) as u64) & FIELD_MASK;
        WgmmaDesc((self.0 & !FIELD_MASK) | start)
    }

    /// Start-address field in bytes (within the 256 KiB window).
    pub const fn start_address(self) -> u32 {
        ((self.0 & FIELD_MASK) as u32) << 4
    }

    /// Leading-dimension byte offset.
    pub const fn lbo(self) -> u32 {
        (((self.0 >> 16) & FIELD_MASK) as u32) << 4
    }

    /// Stride-dimension byte offset.
    pub const fn sbo(self) -> u32 {
        (((self.0 >> 32) & FIELD_MASK) as u32) << 4
    }

    /// Base-offset field (bits 49–51).
    pub const fn base_offset(self) -> u32 {
        ((self.0 >> 49) & 7) as u32
    }

    /// Layout-type field (bits 62–63).
    pub const fn layout_type(self) -> u64 {
        self.0 >> 62
    }

    /// The swizzle the layout-type field names.
    pub const fn swizzle(self) -> Swizzle {
        match self.layout_type() {
            1 => Swizzle::B128,
            2 => Swizzle::B64,
            3 => Swizzle::B32,
            _ => Swizzle::None,
        }
    }

    /// Shared-window byte address at which wgmma reads element (`mn`, `k`) of the operand this
    /// descriptor names, read as `major` with `elem_bytes`-byte elements: the canonical layouts
    /// of REFERENCE §8.4 (T = elements per 16 bytes, E = elements per swizzle span),
    ///
    /// | major | swizzle | element (mn, k) at start + …, then the swizzle of the absolute address |
    /// | --- | --- | --- |
    /// | K | none | `16·(mn%8) + SBO·(mn/8) + size·(k%T) + LBO·(k/T)` |
    /// | K | 32/64/128B | `span·(mn%8) + SBO·(mn/8) + size·k` |
    /// | MN | none | `size·(mn%T) + SBO·(mn/T) + 16·(k%8) + LBO·(k/8)` |
    /// | MN | 32/64/128B | `size·(mn%E) + LBO·(mn/E) + span·(k%8) + SBO·(k/8)` |
    ///
    /// `k` ranges over one instruction's K (two 16-byte chunks of a K-major row), `mn` over M
    /// or N. The base offset is assumed 0 (tiles start on a swizzle atom).
    pub const fn canonical_address(self, major: Major, elem_bytes: u32, mn: u32, k: u32) -> u32 {
        let (s, lbo, sbo) = (self.swizzle(), self.lbo(), self.sbo());
        let (t, span) = (CHUNK_BYTES / elem_bytes, s.span_bytes());
        let e = span / elem_bytes;
        let logical = match (major, s) {
            (Major::K, Swizzle::None) => 16 * (mn % 8) + sbo * (mn / 8) + elem_bytes * (k % t) + lbo * (k / t),
            (Major::K, _) => span * (mn % 8) + sbo * (mn / 8) + elem_bytes * k,
            (Major::Mn, Swizzle::None) => elem_bytes * (mn % t) + sbo * (mn / t) + 16 * (k % 8) + lbo * (k / 8),
            (Major::Mn, _) => elem_bytes * (mn % e) + lbo * (mn / e) + span * (k % 8) + sbo * (k / 8),
        };
        s.apply(self.start_address() + logical)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // [H200 t3]: 128B-swizzled K-major bf16 tile at 0x400.
        assert_eq!(WgmmaDesc::k_major(0x400, Swizzle::B128, 0, 0).0, 0x4000_0040_0001_0040);
        // [H200 t1]: no swizzle, LBO = 128, SBO = 256.
        let d = WgmmaDesc::k_major(0x400, Swizzle::None, 128, 256);
        assert_eq!(d.0, 0x40 | 8 << 16 | 16 << 32);
        assert_eq!((d.lbo(), d.sbo(), d.layout_type()), (128, 256, 0));
        assert_eq!(WgmmaDesc::new(0, 16, 512, Swizzle::B64).layout_type(), 2);
        assert_eq!(WgmmaDesc::new(0, 16, 256, Swizzle::B32).layout_type(), 3);
    }

    #[test]
    fn k_step_adds_two_to_the_address_field() {
        let d = WgmmaDesc::k_major(0x400, Swizzle::B128, 0, 0);
        for k in 0..4u32 {
            let step = d.advance(32 * k);
            assert_eq!(step.0, d.0 + 2 * k as u64);
            assert_eq!(step.start_address(), 0x400 + 32 * k);
            assert_eq!((step.sbo(), step.lbo(), step.base_offset()), (1024, 16, 0));
        }
    }

    #[test]
    fn mn_major_encodings() {
        // 128B-swizzled MN-major bf16 operand at 0x400: 8 KiB blocks along N, 1 KiB per 8 K-rows.
        assert_eq!(WgmmaDesc::mn_major(0x400, Swizzle::B128, 8192, 1024).0, 0x4000_0040_0200_0040);
        let d = WgmmaDesc::mn_major(0x400, Swizzle::None, 256, 1024);
        assert_eq!((d.lbo(), d.sbo(), d.swizzle()), (1024, 256, Swizzle::None), "unswizzled swaps the roles");
        for s in Swizzle::ALL {
            assert_eq!(WgmmaDesc::new(0, 16, 16, s).swizzle(), s);
        }
    }

    /// Where a TMA box of `span`-byte rows at an atom-aligned `addr` puts (row, byte).
    fn tma_tile(addr: u32, s: Swizzle, row: u32, byte: u32) -> u32 {
        addr + s.apply(row * s.span_bytes() + byte)
    }

    #[test]
    fn k_major_tiles_and_their_k_steps_are_canonical() {
        for s in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            for elem in [1u32, 2, 4] {
                let addr = 3 * 1024;
                let step = 32; // one instruction's K: 32 bytes
                for k_step in 0..s.span_bytes() / step {
                    let d = WgmmaDesc::k_major(addr, s, 0, 0).advance(k_step * step);
                    for mn in 0..64 {
                        for k in 0..step / elem {
                            let want = tma_tile(addr, s, mn, k_step * step + k * elem);
                            assert_eq!(
                                d.canonical_address(Major::K, elem, mn, k),
                                want,
                                "{s:?} size {elem} k-step {k_step} ({mn}, {k})"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn unswizzled_k_major_matches_the_h200_layout() {
        // [H200 t1, t10]: (row, k) → (row/8)·256 + (k/8)·128 + (row%8)·16 + (k%8)·2 for bf16.
        let d = WgmmaDesc::k_major(0x400, Swizzle::None, 128, 256);
        for (row, k) in [(0, 0), (7, 15), (9, 3), (63, 8)] {
            let want = 0x400 + (row / 8) * 256 + (k / 8) * 128 + (row % 8) * 16 + (k % 8) * 2;
            assert_eq!(d.canonical_address(Major::K, 2, row, k), want);
        }
    }

    proptest! {
        /// An MN-major operand as `blocks` TMA boxes side by side: block j holds M/N indices
        /// `[j·E, (j+1)·E)` as `rows` K-rows of one span each. [`WgmmaDesc::mn_major`] with the
        /// block size and 8 rows names exactly that layout, at every 16-row (k16) step.
        #[test]
        fn mn_major_blocks_are_canonical(s in 1usize..4, blocks in 1u32..5, steps in 1u32..5, atom in 0u32..8) {
            let s = Swizzle::ALL[s];
            let (span, elem, rows) = (s.span_bytes(), 2, 16 * steps);
            let e = span / elem;
            let addr = atom * 1024;
            let block_bytes = rows * span;
            let d0 = WgmmaDesc::mn_major(addr, s, block_bytes, 8 * span);
            for step in 0..steps {
                let d = d0.advance(step * 16 * span);
                for mn in 0..blocks * e {
                    for k in 0..16 {
                        let want = tma_tile(addr + (mn / e) * block_bytes, s, 16 * step + k, (mn % e) * elem);
                        prop_assert_eq!(d.canonical_address(Major::Mn, elem, mn, k), want, "{:?} block {} ({}, {})", s, mn / e, mn, k);
                    }
                }
            }
        }

        /// Unswizzled MN-major: 8 K-rows × 16 bytes core matrices, `mn_stride` apart along M/N
        /// and `k_stride` apart along K.
        #[test]
        fn unswizzled_mn_major_is_canonical(mn_cm in 1u32..16, k_cm in 1u32..16, mn in 0u32..64, k in 0u32..16) {
            let (mn_stride, k_stride) = (128 * mn_cm, 128 * 16 * k_cm);
            let d = WgmmaDesc::mn_major(0x800, Swizzle::None, mn_stride, k_stride);
            let want = 0x800 + (mn / 8) * mn_stride + (k / 8) * k_stride + (k % 8) * 16 + (mn % 8) * 2;
            prop_assert_eq!(d.canonical_address(Major::Mn, 2, mn, k), want);
        }

        #[test]
        fn fields_round_trip(addr in 0u32..(1 << 18), lbo in 0u32..(1 << 14), sbo in 0u32..(1 << 14), s in 0usize..4) {
            let (addr, lbo, sbo) = (addr & !15, lbo << 4 & 0x3FFF0, sbo << 4 & 0x3FFF0);
            let d = WgmmaDesc::new(addr, lbo, sbo, Swizzle::ALL[s]);
            prop_assert_eq!(d.start_address(), addr);
            prop_assert_eq!(d.lbo(), lbo);
            prop_assert_eq!(d.sbo(), sbo);
            prop_assert_eq!(d.layout_type(), Swizzle::ALL[s].wgmma_layout_type());
            prop_assert_eq!(d.base_offset(), 0);
            prop_assert_eq!(d.0 & !(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 3 << 62), 0, "reserved bits stay 0");
        }

        #[test]
        fn advance_only_touches_the_address(addr in 0u32..(1 << 17), bytes in 0u32..4096) {
            let d = WgmmaDesc::k_major(addr & !15, Swizzle::B128, 0, 0);
            let a = d.advance(bytes & !15);
            prop_assert_eq!(a.start_address(), ((addr & !15) + (bytes & !15)) & 0x3FFFF);
            prop_assert_eq!(a.0 >> 14, d.0 >> 14);
        }
    }
}
