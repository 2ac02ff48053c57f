//! Bit packing of Blackwell's tcgen05 descriptors: the 32-bit instruction descriptor (dense kinds
//! f16 / tf32 / f8f6f4 / i8 and the block-scaled kinds mxf8f6f4 / mxf4 / mxf4nvf4) and the 64-bit
//! shared-memory matrix descriptor in its tcgen05 variant.
//!
//! `tcgen05.mma` takes both as opaque integers, and a wrong bit is not an assembler error: it is a
//! silently wrong product (or a hang). So every field is an enum, every combination the PTX ISA
//! forbids (shape per kind and CTA group, type pairs, MN-major for sub-byte types, SF ids per scale
//! vector) is rejected here, and the host tests pin the encodings against values derived by hand
//! from the bit tables (REFERENCE §10.3, §10.4, §11; same layout as CUTLASS `UMMA::InstrDescriptor`).
//! Nothing here has run on a Blackwell GPU: the encodings are table-verified, not hardware-verified.

/// Why a descriptor cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescError {
    /// The element types are not a legal A/B pair for the kind.
    OperandTypes,
    /// The accumulator type is not legal for the kind and operand types.
    Accumulator,
    /// M is not legal for the kind and CTA group.
    ShapeM,
    /// N is not legal for the kind and CTA group.
    ShapeN,
    /// MN-major (transposed) operand with an element type that must be K-major.
    Major,
    /// Negation requested for a kind without it (i8).
    Negate,
    /// Saturation requested for a kind without it (anything but i8).
    Saturate,
    /// Sparsity selector out of range (0..=3).
    SparsitySelector,
    /// Scale-factor id not legal for the scale vector size.
    ScaleFactorId,
    /// Scale-factor element type not legal for the kind / scale vector size.
    ScaleType,
    /// The B-reuse shift exists only for weight-stationary MMAs of one CTA.
    MaxShift,
    /// A shared-memory address or byte offset is unaligned (16 B) or out of range (2^18).
    SmemField,
    /// Base offset out of range (0..=7).
    BaseOffset,
    /// LBO absolute mode is an sm_103a feature; warpforge targets sm_100a.
    LboMode,
}

/// Which tensor-core CTA group issues the MMA: one CTA, or a CTA pair of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtaGroup {
    /// `.cta_group::1`.
    One,
    /// `.cta_group::2`: M spans both CTAs of the pair.
    Two,
}

/// Operand element type, as named by the PTX ISA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemType {
    F16,
    Bf16,
    Tf32,
    E4M3,
    E5M2,
    E2M3,
    E3M2,
    E2M1,
    U8,
    S8,
}

/// Accumulator (D) type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccType {
    F16 = 0,
    F32 = 1,
    S32 = 2,
}

/// Which dimension of an operand is contiguous in shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Major {
    /// K contiguous (the "not transposed" case).
    K = 0,
    /// M (for A) or N (for B) contiguous.
    Mn = 1,
}

/// Dense MMA kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DenseKind {
    /// `.kind::f16`: F16×F16 or BF16×BF16, K = 16.
    F16,
    /// `.kind::tf32`: K = 8.
    Tf32,
    /// `.kind::f8f6f4`: any pair of E4M3/E5M2/E2M3/E3M2/E2M1, K = 32.
    F8F6F4,
    /// `.kind::i8`: U8/S8, s32 accumulator, K = 32.
    I8,
}

/// Structured sparsity of A (`.sp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sparsity {
    Dense,
    /// Sparse A with metadata selector 0..=3.
    Sparse(u8),
}

/// B-matrix reuse shift of weight-stationary (`.ws`) MMAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxShift {
    None = 0,
    By8 = 1,
    By16 = 2,
    By32 = 3,
}

/// A finished 32-bit instruction descriptor (the `idesc` operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstrDesc(pub u32);

const fn elem_code(kind: DenseKind, t: ElemType) -> Option<u32> {
    match (kind, t) {
        (DenseKind::F16, ElemType::F16) => Some(0),
        (DenseKind::F16, ElemType::Bf16) => Some(1),
        (DenseKind::Tf32, ElemType::Tf32) => Some(2),
        (DenseKind::F8F6F4, t) => f8f6f4_code(t),
        (DenseKind::I8, ElemType::U8) => Some(0),
        (DenseKind::I8, ElemType::S8) => Some(1),
        _ => None,
    }
}

const fn f8f6f4_code(t: ElemType) -> Option<u32> {
    match t {
        ElemType::E4M3 => Some(0),
        ElemType::E5M2 => Some(1),
        ElemType::E2M3 => Some(3),
        ElemType::E3M2 => Some(4),
        ElemType::E2M1 => Some(5),
        _ => None,
    }
}

/// MN-major layouts exist only for 16-bit, tf32 and 8-bit element types.
const fn may_be_mn_major(t: ElemType) -> bool {
    !matches!(t, ElemType::E2M3 | ElemType::E3M2 | ElemType::E2M1)
}

const fn m_legal(m: u32, cta: CtaGroup) -> bool {
    match cta {
        CtaGroup::One => m == 64 || m == 128,
        CtaGroup::Two => m == 128 || m == 256,
    }
}

const fn n_legal_dense(kind: DenseKind, n: u32, cta: CtaGroup) -> bool {
    if n == 0 || n > 256 {
        return false;
    }
    match (kind, cta) {
        (DenseKind::I8, CtaGroup::One) => (n <= 32 && n.is_multiple_of(8)) || n.is_multiple_of(16),
        (DenseKind::I8, CtaGroup::Two) => n.is_multiple_of(32),
        (_, CtaGroup::One) => n.is_multiple_of(8),
        (_, CtaGroup::Two) => n.is_multiple_of(16),
    }
}

/// Everything a dense `tcgen05.mma` instruction descriptor says. Build with [`DenseMma::new`]
/// (K-major operands, no negation, dense) and the `with_*` methods, then [`DenseMma::encode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseMma {
    pub kind: DenseKind,
    pub a: ElemType,
    pub b: ElemType,
    pub acc: AccType,
    pub m: u32,
    pub n: u32,
    pub cta_group: CtaGroup,
    pub a_major: Major,
    pub b_major: Major,
    pub negate_a: bool,
    pub negate_b: bool,
    pub saturate: bool,
    pub sparsity: Sparsity,
    pub max_shift: MaxShift,
}

impl DenseMma {
    /// An `m × n` MMA of `kind` with A/B types and accumulator, K-major operands.
    pub const fn new(kind: DenseKind, a: ElemType, b: ElemType, acc: AccType, m: u32, n: u32, cta: CtaGroup) -> Self {
        DenseMma {
            kind,
            a,
            b,
            acc,
            m,
            n,
            cta_group: cta,
            a_major: Major::K,
            b_major: Major::K,
            negate_a: false,
            negate_b: false,
            saturate: false,
            sparsity: Sparsity::Dense,
            max_shift: MaxShift::None,
        }
    }

    /// Sets the majorness of A and B.
    pub const fn with_major(mut self, a: Major, b: Major) -> Self {
        self.a_major = a;
        self.b_major = b;
        self
    }

    /// Negates A and/or B.
    pub const fn with_negate(mut self, a: bool, b: bool) -> Self {
        self.negate_a = a;
        self.negate_b = b;
        self
    }

    /// Saturating s32 accumulation (i8 only).
    pub const fn with_saturate(mut self, saturate: bool) -> Self {
        self.saturate = saturate;
        self
    }

    /// Sparse A.
    pub const fn with_sparsity(mut self, sparsity: Sparsity) -> Self {
        self.sparsity = sparsity;
        self
    }

    /// B-reuse shift (weight-stationary MMAs of one CTA only).
    pub const fn with_max_shift(mut self, shift: MaxShift) -> Self {
        self.max_shift = shift;
        self
    }

    /// K of one instruction (dense; sparse doubles it).
    pub const fn k(&self) -> u32 {
        let dense = match self.kind {
            DenseKind::F16 => 16,
            DenseKind::Tf32 => 8,
            DenseKind::F8F6F4 | DenseKind::I8 => 32,
        };
        match self.sparsity {
            Sparsity::Dense => dense,
            Sparsity::Sparse(_) => 2 * dense,
        }
    }

    /// Checks every constraint and packs the descriptor.
    pub const fn encode(&self) -> Result<InstrDesc, DescError> {
        let (a, b) = match (elem_code(self.kind, self.a), elem_code(self.kind, self.b)) {
            (Some(a), Some(b)) => (a, b),
            _ => return Err(DescError::OperandTypes),
        };
        // kind::f16 multiplies like types only.
        if matches!(self.kind, DenseKind::F16) && a != b {
            return Err(DescError::OperandTypes);
        }
        let acc_ok = match self.kind {
            DenseKind::F16 => match self.acc {
                AccType::F32 => true,
                AccType::F16 => matches!(self.a, ElemType::F16),
                AccType::S32 => false,
            },
            DenseKind::Tf32 => matches!(self.acc, AccType::F32),
            DenseKind::F8F6F4 => matches!(self.acc, AccType::F32 | AccType::F16),
            DenseKind::I8 => matches!(self.acc, AccType::S32),
        };
        if !acc_ok {
            return Err(DescError::Accumulator);
        }
        if !m_legal(self.m, self.cta_group) {
            return Err(DescError::ShapeM);
        }
        if !n_legal_dense(self.kind, self.n, self.cta_group) {
            return Err(DescError::ShapeN);
        }
        if (matches!(self.a_major, Major::Mn) && !may_be_mn_major(self.a))
            || (matches!(self.b_major, Major::Mn) && !may_be_mn_major(self.b))
        {
            return Err(DescError::Major);
        }
        let is_i8 = matches!(self.kind, DenseKind::I8);
        if is_i8 && (self.negate_a || self.negate_b) {
            return Err(DescError::Negate);
        }
        if !is_i8 && self.saturate {
            return Err(DescError::Saturate);
        }
        let (sparse, selector) = match self.sparsity {
            Sparsity::Dense => (0, 0),
            Sparsity::Sparse(s) if s < 4 => (1, s as u32),
            Sparsity::Sparse(_) => return Err(DescError::SparsitySelector),
        };
        if !matches!(self.max_shift, MaxShift::None) && matches!(self.cta_group, CtaGroup::Two) {
            return Err(DescError::MaxShift);
        }
        Ok(InstrDesc(
            selector
                | sparse << 2
                | (self.saturate as u32) << 3
                | (self.acc as u32) << 4
                | a << 7
                | b << 10
                | (self.negate_a as u32) << 13
                | (self.negate_b as u32) << 14
                | (self.a_major as u32) << 15
                | (self.b_major as u32) << 16
                | (self.n >> 3) << 17
                | (self.m >> 4) << 24
                | (self.max_shift as u32) << 30,
        ))
    }
}

/// Block-scaled MMA kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaledKind {
    /// `.kind::mxf8f6f4.block_scale.scale_vec::1X`: FP8/FP6/FP4 with one UE8M0 scale per 32 K.
    MxF8F6F4,
    /// `.kind::mxf4.block_scale.scale_vec::2X`: E2M1 with UE8M0 scales, K = 64.
    MxF4,
    /// `.kind::mxf4nvf4.block_scale.scale_vec::{2X,4X}`: E2M1 with UE8M0 or UE4M3 scales.
    MxF4NvF4,
}

/// How many scale factors one 32-bit TMEM cell feeds per MMA (PTX `.scale_vec::NX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleVec {
    /// One scale per 32 K-elements; the SF id picks one byte (0..=3) of the cell.
    X1,
    /// One scale per 32 (mxf4) K-elements, two per instruction; the id picks a half-word (0 or 2).
    X2,
    /// One scale per 16 K-elements, four per instruction; the whole cell (id 0).
    X4,
}

/// Scale-factor element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleType {
    /// Power-of-two scale (the MX formats).
    Ue8m0 = 1,
    /// FP8 scale (NVFP4, 4X only).
    Ue4m3 = 0,
}

/// Which part of the 32-bit TMEM scale-factor cell an MMA uses (the "SF id").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleFactorId(pub u8);

/// Everything a block-scaled `tcgen05.mma` instruction descriptor says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockScaledMma {
    pub kind: ScaledKind,
    pub scale_vec: ScaleVec,
    pub a: ElemType,
    pub b: ElemType,
    pub scale_type: ScaleType,
    pub m: u32,
    pub n: u32,
    pub cta_group: CtaGroup,
    pub a_major: Major,
    pub b_major: Major,
    pub negate_a: bool,
    pub negate_b: bool,
    pub sparse: bool,
    pub sfa_id: ScaleFactorId,
    pub sfb_id: ScaleFactorId,
}

impl BlockScaledMma {
    /// MXFP8/6/4 (`kind::mxf8f6f4`, scale_vec 1X, UE8M0), K-major, SF ids 0.
    pub const fn mxf8f6f4(a: ElemType, b: ElemType, m: u32, n: u32, cta: CtaGroup) -> Self {
        Self::new(ScaledKind::MxF8F6F4, ScaleVec::X1, a, b, ScaleType::Ue8m0, m, n, cta)
    }

    /// Any block-scaled kind; K-major, no negation, dense, SF ids 0.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        kind: ScaledKind,
        scale_vec: ScaleVec,
        a: ElemType,
        b: ElemType,
        scale_type: ScaleType,
        m: u32,
        n: u32,
        cta: CtaGroup,
    ) -> Self {
        BlockScaledMma {
            kind,
            scale_vec,
            a,
            b,
            scale_type,
            m,
            n,
            cta_group: cta,
            a_major: Major::K,
            b_major: Major::K,
            negate_a: false,
            negate_b: false,
            sparse: false,
            sfa_id: ScaleFactorId(0),
            sfb_id: ScaleFactorId(0),
        }
    }

    /// Selects the parts of the scale cells this MMA uses (e.g. the k-th K-block of 32 for 1X).
    pub const fn with_sf_ids(mut self, sfa: ScaleFactorId, sfb: ScaleFactorId) -> Self {
        self.sfa_id = sfa;
        self.sfb_id = sfb;
        self
    }

    /// Sets the majorness of A and B.
    pub const fn with_major(mut self, a: Major, b: Major) -> Self {
        self.a_major = a;
        self.b_major = b;
        self
    }

    /// Negates A and/or B.
    pub const fn with_negate(mut self, a: bool, b: bool) -> Self {
        self.negate_a = a;
        self.negate_b = b;
        self
    }

    /// K of one (dense) instruction.
    pub const fn k(&self) -> u32 {
        match self.kind {
            ScaledKind::MxF8F6F4 => 32,
            ScaledKind::MxF4 | ScaledKind::MxF4NvF4 => 64,
        }
    }

    const fn sf_id_legal(&self, id: ScaleFactorId) -> bool {
        match self.scale_vec {
            ScaleVec::X1 => id.0 < 4,
            ScaleVec::X2 => id.0 == 0 || id.0 == 2,
            ScaleVec::X4 => id.0 == 0,
        }
    }

    /// Checks every constraint and packs the descriptor.
    pub const fn encode(&self) -> Result<InstrDesc, DescError> {
        let fp4_kind = !matches!(self.kind, ScaledKind::MxF8F6F4);
        let (a, b) = if fp4_kind {
            // mxf4 kinds know one element type, E2M1, coded 1 (bits 7..=8 and 10..=11).
            match (self.a, self.b) {
                (ElemType::E2M1, ElemType::E2M1) => (1, 1),
                _ => return Err(DescError::OperandTypes),
            }
        } else {
            match (f8f6f4_code(self.a), f8f6f4_code(self.b)) {
                (Some(a), Some(b)) => (a, b),
                _ => return Err(DescError::OperandTypes),
            }
        };
        let vec_ok = match self.kind {
            ScaledKind::MxF8F6F4 => matches!(self.scale_vec, ScaleVec::X1),
            ScaledKind::MxF4 => matches!(self.scale_vec, ScaleVec::X2),
            ScaledKind::MxF4NvF4 => matches!(self.scale_vec, ScaleVec::X2 | ScaleVec::X4),
        };
        let type_ok = match self.scale_type {
            ScaleType::Ue8m0 => true,
            ScaleType::Ue4m3 => matches!(self.kind, ScaledKind::MxF4NvF4) && matches!(self.scale_vec, ScaleVec::X4),
        };
        if !vec_ok || !type_ok {
            return Err(DescError::ScaleType);
        }
        let m_ok = match self.cta_group {
            CtaGroup::One => self.m == 128,
            CtaGroup::Two => self.m == 128 || self.m == 256,
        };
        if !m_ok {
            return Err(DescError::ShapeM);
        }
        if !n_legal_dense(DenseKind::F8F6F4, self.n, self.cta_group) {
            return Err(DescError::ShapeN);
        }
        let a_mn = matches!(self.a_major, Major::Mn);
        let b_mn = matches!(self.b_major, Major::Mn);
        if ((a_mn || b_mn) && fp4_kind) || (a_mn && !may_be_mn_major(self.a)) || (b_mn && !may_be_mn_major(self.b)) {
            return Err(DescError::Major);
        }
        if !self.sf_id_legal(self.sfa_id) || !self.sf_id_legal(self.sfb_id) {
            return Err(DescError::ScaleFactorId);
        }
        Ok(InstrDesc(
            (self.sparse as u32) << 2
                | (self.sfb_id.0 as u32) << 4
                | a << 7
                | b << 10
                | (self.negate_a as u32) << 13
                | (self.negate_b as u32) << 14
                | (self.a_major as u32) << 15
                | (self.b_major as u32) << 16
                | (self.n >> 3) << 17
                | (self.scale_type as u32) << 23
                | (self.m >> 7) << 27
                | (self.sfa_id.0 as u32) << 29,
        ))
    }
}

/// Fields of a dense instruction descriptor read back from its bits (for tests and debugging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseFields {
    pub sparsity_selector: u32,
    pub sparse: bool,
    pub saturate: bool,
    pub acc: u32,
    pub a: u32,
    pub b: u32,
    pub negate_a: bool,
    pub negate_b: bool,
    pub a_mn_major: bool,
    pub b_mn_major: bool,
    pub n: u32,
    pub m: u32,
    pub max_shift: u32,
}

/// Fields of a block-scaled instruction descriptor read back from its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaledFields {
    pub sparse: bool,
    pub sfb_id: u32,
    pub a: u32,
    pub b: u32,
    pub negate_a: bool,
    pub negate_b: bool,
    pub a_mn_major: bool,
    pub b_mn_major: bool,
    pub n: u32,
    pub ue8m0: bool,
    pub m: u32,
    pub sfa_id: u32,
}

const fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1 << width) - 1)
}

impl InstrDesc {
    /// The dense reading of the bits.
    pub const fn dense_fields(self) -> DenseFields {
        let v = self.0;
        DenseFields {
            sparsity_selector: bits(v, 0, 2),
            sparse: bits(v, 2, 1) == 1,
            saturate: bits(v, 3, 1) == 1,
            acc: bits(v, 4, 2),
            a: bits(v, 7, 3),
            b: bits(v, 10, 3),
            negate_a: bits(v, 13, 1) == 1,
            negate_b: bits(v, 14, 1) == 1,
            a_mn_major: bits(v, 15, 1) == 1,
            b_mn_major: bits(v, 16, 1) == 1,
            n: bits(v, 17, 6) << 3,
            m: bits(v, 24, 5) << 4,
            max_shift: bits(v, 30, 2),
        }
    }

    /// The block-scaled reading of the bits.
    pub const fn scaled_fields(self) -> ScaledFields {
        let v = self.0;
        ScaledFields {
            sparse: bits(v, 2, 1) == 1,
            sfb_id: bits(v, 4, 2),
            a: bits(v, 7, 3),
            b: bits(v, 10, 3),
            negate_a: bits(v, 13, 1) == 1,
            negate_b: bits(v, 14, 1) == 1,
            a_mn_major: bits(v, 15, 1) == 1,
            b_mn_major: bits(v, 16, 1) == 1,
            n: bits(v, 17, 6) << 3,
            ue8m0: bits(v, 23, 1) == 1,
            m: bits(v, 27, 2) << 7,
            sfa_id: bits(v, 29, 2),
        }
    }
}

mod smem;
pub use smem::{LboMode, SMEM_DESC_VERSION, SMEM_FIELD_LIMIT, SmemDesc, SmemDescFields, SmemLayout};

#[cfg(test)]
mod tests;
