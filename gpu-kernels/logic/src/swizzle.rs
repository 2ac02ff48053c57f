//! Shared-memory swizzles of TMA and wgmma (REFERENCE §6.4).
//!
//! A swizzle permutes the 16-byte chunks inside each row of its span by XOR-ing address bits
//! `[4, 4+b)` with bits `[7, 7+b)` of the *absolute* shared-window address, so TMA, wgmma
//! descriptors and ordinary loads agree only if a swizzled tile starts on an atom boundary
//! ([`Swizzle::alignment`]). The same functions run on the device (to read a swizzled tile) and
//! on the host (to check what the device wrote).

/// A TMA / wgmma shared-memory swizzle mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// Identity (rows are 16-byte core-matrix rows).
    None,
    /// 32-byte span: bit 4 ^= bit 7 (256-byte atom).
    B32,
    /// 64-byte span: bits [5:4] ^= bits [8:7] (512-byte atom).
    B64,
    /// 128-byte span: bits [6:4] ^= bits [9:7] (1024-byte atom).
    B128,
}

/// Bytes of one swizzled chunk (the unit the XOR permutes).
pub const CHUNK_BYTES: u32 = 16;

impl Swizzle {
    /// All modes, for tests and tables.
    pub const ALL: [Swizzle; 4] = [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128];

    /// Number of address bits XOR-ed (log2 of the chunks per span).
    pub const fn bits(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }

    /// Length in bytes of one swizzled row: the most a TMA box's inner extent may span.
    /// `None` has no span limit; it reports one 16-byte core-matrix row.
    pub const fn span_bytes(self) -> u32 {
        CHUNK_BYTES << self.bits()
    }

    /// Period of the pattern: 8 rows of the span (`None`: one chunk).
    pub const fn atom_bytes(self) -> u32 {
        match self {
            Swizzle::None => CHUNK_BYTES,
            _ => 8 * self.span_bytes(),
        }
    }

    /// Required alignment of a tile's shared-memory address: the atom (so the pattern starts at
    /// row 0), and at least 128 bytes, the TMA destination alignment.
    pub const fn alignment(self) -> u32 {
        if self.atom_bytes() > 128 { self.atom_bytes() } else { 128 }
    }

    /// The byte address where the byte at logical (unswizzled) address `addr` is stored.
    /// An involution: applying it twice gives `addr` back.
    pub const fn apply(self, addr: u32) -> u32 {
        let mask = (1u32 << self.bits()) - 1;
        addr ^ (((addr >> 7) & mask) << 4)
    }

    /// Byte offset of (`row`, `byte`) in a tile of span-long rows that starts on an atom
    /// boundary (`byte < span_bytes`).
    pub const fn offset(self, row: u32, byte: u32) -> u32 {
        self.apply(row * self.span_bytes() + byte)
    }

    /// The `CUtensorMapSwizzle` value the host encodes for this mode.
    pub const fn tensor_map_code(self) -> u32 {
        self.bits()
    }

    /// The 2-bit layout-type field of a wgmma shared-memory descriptor (bits 62–63).
    pub const fn wgmma_layout_type(self) -> u64 {
        match self {
            Swizzle::None => 0,
            Swizzle::B128 => 1,
            Swizzle::B64 => 2,
            Swizzle::B32 => 3,
        }
    }
}

/// A swizzle mode as a type, so a tile's layout is part of its type (the device's `SmemTile`,
/// a [`crate::tile_spec::TileSpec`] both sides compile).
pub trait SwizzleMode {
    /// The mode.
    const SWIZZLE: Swizzle;
}

/// No swizzle.
#[derive(Clone, Copy, Debug)]
pub struct NoSwizzle;
/// 32-byte swizzle.
#[derive(Clone, Copy, Debug)]
pub struct Swizzle32B;
/// 64-byte swizzle.
#[derive(Clone, Copy, Debug)]
pub struct Swizzle64B;
/// 128-byte swizzle.
#[derive(Clone, Copy, Debug)]
pub struct Swizzle128B;

impl SwizzleMode for NoSwizzle {
    const SWIZZLE: Swizzle = Swizzle::None;
}
impl SwizzleMode for Swizzle32B {
    const SWIZZLE: Swizzle = Swizzle::B32;
}
impl SwizzleMode for Swizzle64B {
    const SWIZZLE: Swizzle = Swizzle::B64;
}
impl SwizzleMode for Swizzle128B {
    const SWIZZLE: Swizzle = Swizzle::B128;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    #[test]
    fn sizes_match_the_isa() {
        assert_eq!(Swizzle::ALL.map(Swizzle::span_bytes), [16, 32, 64, 128]);
        assert_eq!(Swizzle::ALL.map(Swizzle::atom_bytes), [16, 256, 512, 1024]);
        assert_eq!(Swizzle::ALL.map(Swizzle::alignment), [128, 256, 512, 1024]);
        assert_eq!(Swizzle::ALL.map(Swizzle::tensor_map_code), [0, 1, 2, 3]);
        assert_eq!(Swizzle::ALL.map(Swizzle::wgmma_layout_type), [0, 3, 2, 1]);
    }

    #[test]
    fn is_a_bijection_on_every_atom_of_a_tile() {
        for s in Swizzle::ALL {
            let tile = 4 * 1024;
            let mut hit = vec![false; tile as usize];
            for a in 0..tile {
                let b = s.apply(a);
                assert!(b < tile && b / s.atom_bytes() == a / s.atom_bytes(), "{s:?} leaves its atom");
                assert!(!hit[b as usize], "{s:?} maps two bytes to {b}");
                hit[b as usize] = true;
            }
        }
    }

    #[test]
    fn known_points_from_the_h200() {
        // 128B [H200 t2]: chunk 0 of row 1 lands in chunk 1; chunk 3 of row 5 in chunk 6.
        assert_eq!(Swizzle::B128.offset(1, 0), 128 + 16);
        assert_eq!(Swizzle::B128.offset(5, 3 * 16 + 2), 5 * 128 + 6 * 16 + 2);
        assert_eq!(Swizzle::B128.offset(8, 16), 8 * 128 + 16, "period of 8 rows");
        // 64B [H200 t14]: row r XORs with (r / 2) % 4.
        assert_eq!(Swizzle::B64.offset(2, 0), 2 * 64 + 16);
        // 32B [H200 t14]: row r XORs with (r / 4) % 2.
        assert_eq!(Swizzle::B32.offset(4, 0), 4 * 32 + 16);
        assert_eq!(Swizzle::None.offset(7, 5), 7 * 16 + 5);
    }

    proptest! {
        #[test]
        fn chunk_rule_holds(row in 0u32..64, chunk in 0u32..8, byte in 0u32..16) {
            let c = chunk % 8;
            prop_assert_eq!(Swizzle::B128.offset(row, c * 16 + byte), row * 128 + (c ^ (row % 8)) * 16 + byte);
            let c = chunk % 4;
            prop_assert_eq!(Swizzle::B64.offset(row, c * 16 + byte), row * 64 + (c ^ ((row / 2) % 4)) * 16 + byte);
            let c = chunk % 2;
            prop_assert_eq!(Swizzle::B32.offset(row, c * 16 + byte), row * 32 + (c ^ ((row / 4) % 2)) * 16 + byte);
        }

        #[test]
        fn is_an_involution(addr in 0u32..(1 << 18)) {
            for s in Swizzle::ALL {
                prop_assert_eq!(s.apply(s.apply(addr)), addr);
            }
        }
    }
}
