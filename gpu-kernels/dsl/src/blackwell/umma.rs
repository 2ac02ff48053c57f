//! Issuing `tcgen05.mma` (dense and block-scaled), its completion (`tcgen05.commit`) and
//! scale-factor copies (`tcgen05.cp`) from the one elected thread that owns the tensor core.
//!
//! An MMA is described once, as a `const`, from `logic::tcgen05_desc`: [`Umma::new`] and
//! [`ScaledUmma::new`] panic during constant evaluation on a combination the ISA forbids, so an
//! illegal shape or type pair is a compile error, not a silently wrong product. Issuing takes an
//! [`Elected`] proof because the instructions have single-thread semantics. Only
//! `.cta_group::1` is exposed here (a kernel may not mix CTA groups; the `::2` forms are L0).

use crate::blackwell::tmem::TmemAddr;
use crate::logic::tcgen05_desc::{BlockScaledMma, CtaGroup, DenseKind, DenseMma, ScaleFactorId, SmemDesc, SmemLayout};
use crate::ptx::tcgen05;
use crate::tile::{NoSwizzle, SmemTile, Swizzle128B};
use crate::warp::Elected;

/// Bytes between 8-row core-matrix groups of a 128B-swizzled K-major tile (8 rows × 128 B).
const SW128_GROUP_BYTES: u32 = 8 * 128;

/// The tcgen05 descriptor of a 128B-swizzled K-major operand tile (rows = M or N, one 128-byte
/// swizzle span of K per row), advanced `k_bytes` along K inside the swizzle atom (the K-step
/// of one MMA: 32 bytes for bf16 K=16 or fp8 K=32).
#[inline(always)]
pub fn desc_k_major_sw128<T: Copy, const ROWS: usize, const COLS: usize>(
    tile: &SmemTile<T, ROWS, COLS, Swizzle128B>,
    k_bytes: u32,
) -> SmemDesc {
    match SmemDesc::k_major_swizzled(tile.addr(), SW128_GROUP_BYTES, SmemLayout::B128) {
        Ok(d) => d.advance(k_bytes),
        // The tile type guarantees 1024-byte alignment inside the 18-bit shared window.
        Err(_) => crate::ptx::misc::trap(),
    }
}

/// The descriptor of a 32-row × 16-byte scale-factor block (see [`scale_block_desc`]).
#[inline(always)]
pub fn desc_scale_block(tile: &SmemTile<u32, 32, 4, NoSwizzle>) -> SmemDesc {
    scale_block_desc(tile.addr())
}

/// Whether the MMA adds to D or overwrites it (the `enable_input_d` predicate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulate {
    /// D = A·B (the first K step of a tile: TMEM is not zeroed).
    Overwrite,
    /// D = A·B + D.
    Add,
}

impl Accumulate {
    /// `Overwrite` for the first K step of a tile, `Add` after.
    #[inline(always)]
    pub const fn unless_first(first: bool) -> Self {
        if first { Accumulate::Overwrite } else { Accumulate::Add }
    }

    const fn enable_input_d(self) -> bool {
        matches!(self, Accumulate::Add)
    }
}

/// A dense tcgen05 MMA of one CTA (kinds f16, tf32, f8f6f4), validated at compile time.
#[derive(Clone, Copy, Debug)]
pub struct Umma {
    kind: DenseKind,
    idesc: u32,
    k: u32,
}

impl Umma {
    /// Validates and encodes; panics (at compile time when used in a `const`) otherwise.
    pub const fn new(mma: DenseMma) -> Self {
        assert!(matches!(mma.cta_group, CtaGroup::One), "the typed layer issues .cta_group::1 only");
        assert!(!matches!(mma.kind, DenseKind::I8), "kind::i8 has no typed wrapper");
        match mma.encode() {
            Ok(d) => Umma { kind: mma.kind, idesc: d.0, k: mma.k() },
            Err(_) => panic!("illegal tcgen05.mma shape/type combination"),
        }
    }

    /// The 32-bit instruction descriptor.
    pub const fn idesc(&self) -> u32 {
        self.idesc
    }

    /// K of one instruction.
    pub const fn k(&self) -> u32 {
        self.k
    }

    /// D (+)= A·B with A and B in shared memory.
    ///
    /// # Safety
    /// `a`/`b` describe this MMA's operand tiles in shared memory, fully written and visible to
    /// the async proxy (TMA completion observed, or generic writes fenced); `d` is inside the
    /// CTA's TMEM allocation with room for M × N; the previous reader of `d` has released it.
    #[inline(always)]
    pub unsafe fn issue(&self, _issuer: &Elected, d: TmemAddr, a: SmemDesc, b: SmemDesc, acc: Accumulate) {
        let e = acc.enable_input_d();
        // SAFETY: descriptor legal by construction; operands per the caller.
        unsafe {
            match self.kind {
                DenseKind::F16 => tcgen05::mma_f16_ss_cta1(d.0, a.0, b.0, self.idesc, e),
                DenseKind::Tf32 => tcgen05::mma_tf32_ss_cta1(d.0, a.0, b.0, self.idesc, e),
                // `new` rejects kind::i8, so this arm is kind::f8f6f4.
                DenseKind::F8F6F4 | DenseKind::I8 => tcgen05::mma_f8f6f4_ss_cta1(d.0, a.0, b.0, self.idesc, e),
            }
        }
    }

    /// D (+)= A·B with A in TMEM.
    ///
    /// # Safety
    /// As [`Umma::issue`]; `a` holds A, written and ordered before this.
    #[inline(always)]
    pub unsafe fn issue_tmem_a(&self, _issuer: &Elected, d: TmemAddr, a: TmemAddr, b: SmemDesc, acc: Accumulate) {
        let e = acc.enable_input_d();
        // SAFETY: descriptor legal by construction; operands per the caller.
        unsafe {
            match self.kind {
                DenseKind::F16 => tcgen05::mma_f16_ts_cta1(d.0, a.0, b.0, self.idesc, e),
                DenseKind::Tf32 => tcgen05::mma_tf32_ts_cta1(d.0, a.0, b.0, self.idesc, e),
                // `new` rejects kind::i8, so this arm is kind::f8f6f4.
                DenseKind::F8F6F4 | DenseKind::I8 => tcgen05::mma_f8f6f4_ts_cta1(d.0, a.0, b.0, self.idesc, e),
            }
        }
    }
}

/// Block-scaled MXFP8/6/4 MMA of one CTA (`kind::mxf8f6f4`, scale_vec 1X, UE8M0 scales):
/// each 32-bit TMEM scale cell holds the scales of 4 consecutive K-blocks of 32; the K-step
/// `j` of a 128-wide K block uses byte `j` (the SF id), so four descriptors are kept.
#[derive(Clone, Copy, Debug)]
pub struct ScaledUmma {
    idesc_by_sf_id: [u32; 4],
}

impl ScaledUmma {
    /// Validates and encodes the four SF-id variants of `mma` (its own ids are ignored).
    pub const fn new(mma: BlockScaledMma) -> Self {
        assert!(matches!(mma.cta_group, CtaGroup::One), "the typed layer issues .cta_group::1 only");
        let mut idesc_by_sf_id = [0u32; 4];
        let mut id = 0;
        while id < 4 {
            let sf = ScaleFactorId(id as u8);
            match mma.with_sf_ids(sf, sf).encode() {
                Ok(d) => idesc_by_sf_id[id] = d.0,
                Err(_) => panic!("illegal block-scaled tcgen05.mma combination"),
            }
            id += 1;
        }
        ScaledUmma { idesc_by_sf_id }
    }

    /// The descriptor for K-step `sf_id` (0..4) of a scale cell.
    pub const fn idesc(&self, sf_id: usize) -> u32 {
        self.idesc_by_sf_id[sf_id]
    }

    /// D (+)= (A·SFA)(B·SFB) for K-step `sf_id` (0..4) of the scale cells at `sfa`/`sfb`.
    ///
    /// # Safety
    /// As [`Umma::issue`]; `sfa`/`sfb` hold the UE8M0 scales (replicated in the four lane
    /// quarters, e.g. by [`copy_scales_32x128b`] issued earlier by this thread); `sf_id < 4`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn issue(
        &self,
        _issuer: &Elected,
        d: TmemAddr,
        a: SmemDesc,
        b: SmemDesc,
        sfa: TmemAddr,
        sfb: TmemAddr,
        sf_id: usize,
        acc: Accumulate,
    ) {
        let idesc = self.idesc_by_sf_id[sf_id & 3];
        // SAFETY: descriptor legal by construction; operands per the caller.
        unsafe { tcgen05::mma_mxf8f6f4_ss_cta1(d.0, a.0, b.0, idesc, sfa.0, sfb.0, acc.enable_input_d()) }
    }
}

/// One arrival on the mbarrier at `bar` when every async tcgen05 op this thread issued so far
/// (MMAs, copies) has completed — how the MMA warp frees a smem stage or publishes an
/// accumulator. Implies `tcgen05.fence::before_thread_sync`.
///
/// # Safety
/// `bar` is an initialised mbarrier of this CTA whose phase expects this arrival.
#[inline(always)]
pub unsafe fn commit(_issuer: &Elected, bar: u32) {
    // SAFETY: the caller guarantees the barrier expects the arrival.
    unsafe { tcgen05::commit_cta1(bar) }
}

/// Shared-memory descriptor of a 32-row × 16-byte scale-factor block (no swizzle, 8-row
/// groups 128 B apart), the source [`copy_scales_32x128b`] expects.
#[inline(always)]
pub const fn scale_block_desc(smem_addr: u32) -> SmemDesc {
    match SmemDesc::interleaved(smem_addr, 0, 128) {
        Ok(d) => d,
        Err(_) => panic!("scale-factor block must be 16-byte aligned in the shared window"),
    }
}

/// Copies 32 rows × 128 bits of scale factors from shared memory into TMEM, replicated into all
/// four lane quarters (`tcgen05.cp 32x128b.warpx4`): 4 columns × 128 lanes. Smem row l holds the
/// cells of rows l, 32+l, 64+l, 96+l (REFERENCE §11).
///
/// # Safety
/// `src` describes 512 bytes of shared memory written and visible to the async proxy; `dst` is
/// 4 allocated columns no in-flight MMA is reading. Ordered before later MMAs of this thread.
#[inline(always)]
pub unsafe fn copy_scales_32x128b(_issuer: &Elected, dst: TmemAddr, src: SmemDesc) {
    // SAFETY: forwarded to the caller.
    unsafe { tcgen05::cp_32x128b_warpx4_cta1(dst.0, src.0) }
}
