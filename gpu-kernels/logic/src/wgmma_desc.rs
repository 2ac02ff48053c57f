//! The 64-bit wgmma shared-memory matrix descriptor (REFERENCE §8.4).
//!
//! A wgmma operand in shared memory is described by its start address, two byte strides (LBO,
//! SBO) between 8-row × 16-byte core matrices, a base offset and the swizzle mode. The bit
//! packing lives here, host-tested, so the kernels and the tests build the same bits.

use crate::swizzle::Swizzle;

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

    proptest! {
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
