//! The tcgen05 shared-memory matrix descriptor (64 bit, REFERENCE §10.3): wgmma's layout plus a
//! fixed version field at bits 46..=48, an LBO mode bit, and a 3-bit layout code at 61..=63.

use super::DescError;

/// Shared-memory layout of a tcgen05 operand (bits 61..=63 of the descriptor; sm_100 codes,
/// not wgmma's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmemLayout {
    /// No swizzle ("interleave"): core matrices of 8 rows × 16 B.
    None = 0,
    /// 128-byte swizzle with 32-byte atoms.
    B128Base32B = 1,
    B128 = 2,
    B64 = 4,
    B32 = 6,
}

/// How the LBO field is read (bit 52).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LboMode {
    /// LBO is a byte distance (the only mode on sm_100a).
    Relative,
    /// LBO is an absolute smem address (sm_103a, 128B swizzle, K-major).
    Absolute,
}

/// The fixed "version" value of bits 46..=48 that tcgen05 requires (wgmma leaves them 0).
pub const SMEM_DESC_VERSION: u64 = 1;

/// Largest shared-window address / byte offset a descriptor field can hold (18 bits).
pub const SMEM_FIELD_LIMIT: u32 = 1 << 18;

/// A tcgen05 shared-memory matrix descriptor (the 64-bit `adesc`/`bdesc`/`sdesc` operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemDesc(pub u64);

/// The fields of a [`SmemDesc`]; byte values, not the >>4 encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemDescFields {
    /// Shared-window address of the operand's first core matrix / swizzle atom.
    pub start: u32,
    /// Leading-dimension byte offset (see REFERENCE §8.4 for its role per layout and major).
    pub lbo: u32,
    /// Stride-dimension byte offset.
    pub sbo: u32,
    /// Base offset (0 when the swizzle atom starts at its natural alignment).
    pub base_offset: u8,
    pub lbo_mode: LboMode,
    pub layout: SmemLayout,
}

const fn smem_field_ok(v: u32) -> bool {
    v.is_multiple_of(16) && v < SMEM_FIELD_LIMIT
}

impl SmemDescFields {
    /// Checks ranges and packs.
    pub const fn encode(&self) -> Result<SmemDesc, DescError> {
        if !smem_field_ok(self.start) || !smem_field_ok(self.lbo) || !smem_field_ok(self.sbo) {
            return Err(DescError::SmemField);
        }
        if self.base_offset > 7 {
            return Err(DescError::BaseOffset);
        }
        if matches!(self.lbo_mode, LboMode::Absolute) {
            return Err(DescError::LboMode);
        }
        Ok(SmemDesc(
            (self.start as u64 >> 4)
                | (self.lbo as u64 >> 4) << 16
                | (self.sbo as u64 >> 4) << 32
                | SMEM_DESC_VERSION << 46
                | (self.base_offset as u64) << 49
                | (self.layout as u64) << 61,
        ))
    }
}

impl SmemDesc {
    /// K-major operand whose rows are one swizzle span long (128/64/32 B), 8-row groups `sbo`
    /// bytes apart; LBO is unused there and encoded as 16 (field value 1), as CUTLASS does.
    pub const fn k_major_swizzled(start: u32, sbo: u32, layout: SmemLayout) -> Result<SmemDesc, DescError> {
        SmemDescFields { start, lbo: 16, sbo, base_offset: 0, lbo_mode: LboMode::Relative, layout }.encode()
    }

    /// No-swizzle operand of core matrices (8 rows × 16 B): `lbo` between core matrices adjacent
    /// in K (K-major), `sbo` between 8-row groups.
    pub const fn interleaved(start: u32, lbo: u32, sbo: u32) -> Result<SmemDesc, DescError> {
        SmemDescFields { start, lbo, sbo, base_offset: 0, lbo_mode: LboMode::Relative, layout: SmemLayout::None }
            .encode()
    }

    /// The same descriptor with the start address moved `bytes` on (a K-step inside a swizzle
    /// atom): the low field grows by `bytes >> 4`. `bytes` must keep the address in range.
    pub const fn advance(self, bytes: u32) -> SmemDesc {
        SmemDesc(self.0 + (bytes as u64 >> 4))
    }

    /// Reads the fields back; `None` for a layout or mode code sm_100 does not define.
    pub const fn fields(self) -> Option<SmemDescFields> {
        let v = self.0;
        let layout = match v >> 61 {
            0 => SmemLayout::None,
            1 => SmemLayout::B128Base32B,
            2 => SmemLayout::B128,
            4 => SmemLayout::B64,
            6 => SmemLayout::B32,
            _ => return None,
        };
        if (v >> 46) & 7 != SMEM_DESC_VERSION {
            return None;
        }
        let lbo_mode = if (v >> 52) & 1 == 1 { LboMode::Absolute } else { LboMode::Relative };
        Some(SmemDescFields {
            start: ((v & 0x3FFF) << 4) as u32,
            lbo: (((v >> 16) & 0x3FFF) << 4) as u32,
            sbo: (((v >> 32) & 0x3FFF) << 4) as u32,
            base_offset: ((v >> 49) & 7) as u8,
            lbo_mode,
            layout,
        })
    }
}
