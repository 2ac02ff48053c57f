//! Host tests of the tcgen05 descriptor encodings: hand-derived values from the bit tables,
//! field round-trips over every legal combination, and the illegal combinations rejected.

use super::*;
use proptest::prelude::*;

const ALL_ELEMS: [ElemType; 10] = [
    ElemType::F16,
    ElemType::Bf16,
    ElemType::Tf32,
    ElemType::E4M3,
    ElemType::E5M2,
    ElemType::E2M3,
    ElemType::E3M2,
    ElemType::E2M1,
    ElemType::U8,
    ElemType::S8,
];

fn dense(kind: DenseKind, a: ElemType, b: ElemType, acc: AccType, m: u32, n: u32, cta: CtaGroup) -> u32 {
    DenseMma::new(kind, a, b, acc, m, n, cta).encode().expect("legal MMA").0
}

#[test]
fn dense_encodings_match_the_table() {
    use {AccType as D, CtaGroup::*, DenseKind as K, ElemType as E};
    // Each value: sum of the fields of REFERENCE §10.4 worked out by hand.
    assert_eq!(dense(K::F16, E::Bf16, E::Bf16, D::F32, 128, 256, One), 0x0840_0490);
    assert_eq!(dense(K::F16, E::F16, E::F16, D::F32, 128, 128, One), 0x0820_0010);
    assert_eq!(dense(K::F16, E::F16, E::F16, D::F16, 64, 64, One), 0x0410_0000);
    assert_eq!(dense(K::Tf32, E::Tf32, E::Tf32, D::F32, 128, 128, One), 0x0820_0910);
    assert_eq!(dense(K::F8F6F4, E::E4M3, E::E4M3, D::F32, 128, 256, One), 0x0840_0010);
    assert_eq!(dense(K::F16, E::Bf16, E::Bf16, D::F32, 256, 256, Two), 0x1040_0490);
    // E5M2 (1<<7) × E2M1 (5<<10) → F16, A MN-major (1<<15), N8 (1<<17), M64 (4<<24).
    let mixed = DenseMma::new(K::F8F6F4, E::E5M2, E::E2M1, D::F16, 64, 8, One).with_major(Major::Mn, Major::K);
    assert_eq!(mixed.encode().unwrap().0, 0x0402_9480);
    // i8: S8 (1<<7) × U8, saturate (1<<3), S32 (2<<4), M128 N48 (6<<17).
    let int8 = DenseMma::new(K::I8, E::S8, E::U8, D::S32, 128, 48, One).with_saturate(true);
    assert_eq!(int8.encode().unwrap().0, 0x080C_00A8);
    // Negate both, sparse selector 2, max shift 3.
    let odd = DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 8, One)
        .with_negate(true, true)
        .with_sparsity(Sparsity::Sparse(2))
        .with_max_shift(MaxShift::By32);
    assert_eq!(odd.encode().unwrap().0, 0xC802_6496);
    assert_eq!(odd.k(), 32);
}

#[test]
fn block_scaled_encodings_match_the_table() {
    use CtaGroup::*;
    use ElemType::*;
    let base = BlockScaledMma::mxf8f6f4(E4M3, E4M3, 128, 256, One);
    assert_eq!(base.encode().unwrap().0, 0x08C0_0000);
    let ids = base.with_sf_ids(ScaleFactorId(1), ScaleFactorId(2));
    assert_eq!(ids.encode().unwrap().0, 0x28C0_0020);
    let nvf4 = BlockScaledMma::new(ScaledKind::MxF4NvF4, ScaleVec::X4, E2M1, E2M1, ScaleType::Ue4m3, 128, 256, One);
    assert_eq!(nvf4.encode().unwrap().0, 0x0840_0480);
    let mxf4 = BlockScaledMma::new(ScaledKind::MxF4, ScaleVec::X2, E2M1, E2M1, ScaleType::Ue8m0, 128, 256, One);
    assert_eq!(mxf4.encode().unwrap().0, 0x08C0_0480);
    // M256 on a CTA pair: M>>7 = 2 at bit 27.
    assert_eq!(BlockScaledMma::mxf8f6f4(E4M3, E5M2, 256, 128, Two).encode().unwrap().0, 0x1080_0400 | 0x0020_0000);
    assert_eq!(base.k(), 32);
    assert_eq!(mxf4.k(), 64);
}

#[test]
fn illegal_dense_combinations_are_rejected() {
    use {AccType as D, CtaGroup::*, DenseKind as K, ElemType as E};
    let err = |m: DenseMma| m.encode().unwrap_err();
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 256, 64, One)), DescError::ShapeM);
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 64, 64, Two)), DescError::ShapeM);
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 264, One)), DescError::ShapeN);
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 12, One)), DescError::ShapeN);
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 24, Two)), DescError::ShapeN);
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 0, One)), DescError::ShapeN);
    assert_eq!(err(DenseMma::new(K::I8, E::S8, E::S8, D::S32, 128, 40, One)), DescError::ShapeN);
    assert_eq!(err(DenseMma::new(K::I8, E::S8, E::S8, D::S32, 256, 48, Two)), DescError::ShapeN);
    assert!(DenseMma::new(K::I8, E::S8, E::S8, D::S32, 128, 24, One).encode().is_ok());
    assert!(DenseMma::new(K::I8, E::S8, E::S8, D::S32, 128, 48, One).encode().is_ok());
    assert_eq!(err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F16, 128, 64, One)), DescError::Accumulator);
    assert_eq!(err(DenseMma::new(K::Tf32, E::Tf32, E::Tf32, D::F16, 128, 64, One)), DescError::Accumulator);
    assert_eq!(err(DenseMma::new(K::F16, E::F16, E::Bf16, D::F32, 128, 64, One)), DescError::OperandTypes);
    assert_eq!(err(DenseMma::new(K::F16, E::E4M3, E::E4M3, D::F32, 128, 64, One)), DescError::OperandTypes);
    assert_eq!(err(DenseMma::new(K::F8F6F4, E::Bf16, E::E4M3, D::F32, 128, 64, One)), DescError::OperandTypes);
    let mn = |a, b| DenseMma::new(K::F8F6F4, a, b, D::F32, 128, 64, One).with_major(Major::Mn, Major::Mn);
    assert_eq!(err(mn(E::E2M1, E::E4M3)), DescError::Major);
    assert_eq!(err(mn(E::E4M3, E::E3M2)), DescError::Major);
    assert!(mn(E::E4M3, E::E5M2).encode().is_ok());
    assert_eq!(
        err(DenseMma::new(K::I8, E::S8, E::S8, D::S32, 128, 64, One).with_negate(true, false)),
        DescError::Negate
    );
    assert_eq!(
        err(DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 64, One).with_saturate(true)),
        DescError::Saturate
    );
    let sp = DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 64, One).with_sparsity(Sparsity::Sparse(4));
    assert_eq!(err(sp), DescError::SparsitySelector);
    let ws2 = DenseMma::new(K::F16, E::Bf16, E::Bf16, D::F32, 128, 64, Two).with_max_shift(MaxShift::By8);
    assert_eq!(err(ws2), DescError::MaxShift);
}

#[test]
fn illegal_block_scaled_combinations_are_rejected() {
    use CtaGroup::*;
    use ElemType::*;
    let err = |m: BlockScaledMma| m.encode().unwrap_err();
    let mx = |a, b| BlockScaledMma::mxf8f6f4(a, b, 128, 128, One);
    assert_eq!(
        err(BlockScaledMma::new(ScaledKind::MxF8F6F4, ScaleVec::X2, E4M3, E4M3, ScaleType::Ue8m0, 128, 128, One)),
        DescError::ScaleType
    );
    assert_eq!(
        err(BlockScaledMma::new(ScaledKind::MxF8F6F4, ScaleVec::X1, E4M3, E4M3, ScaleType::Ue4m3, 128, 128, One)),
        DescError::ScaleType
    );
    assert_eq!(
        err(BlockScaledMma::new(ScaledKind::MxF4NvF4, ScaleVec::X2, E2M1, E2M1, ScaleType::Ue4m3, 128, 128, One)),
        DescError::ScaleType
    );
    assert_eq!(
        err(BlockScaledMma::new(ScaledKind::MxF4, ScaleVec::X2, E4M3, E2M1, ScaleType::Ue8m0, 128, 128, One)),
        DescError::OperandTypes
    );
    assert_eq!(err(mx(Bf16, E4M3)), DescError::OperandTypes);
    assert_eq!(err(BlockScaledMma::mxf8f6f4(E4M3, E4M3, 64, 128, One)), DescError::ShapeM);
    assert_eq!(err(BlockScaledMma::mxf8f6f4(E4M3, E4M3, 128, 120, Two)), DescError::ShapeN);
    assert_eq!(err(mx(E4M3, E4M3).with_sf_ids(ScaleFactorId(4), ScaleFactorId(0))), DescError::ScaleFactorId);
    assert!(mx(E4M3, E4M3).with_sf_ids(ScaleFactorId(3), ScaleFactorId(3)).encode().is_ok());
    let mxf4 = BlockScaledMma::new(ScaledKind::MxF4, ScaleVec::X2, E2M1, E2M1, ScaleType::Ue8m0, 128, 128, One);
    assert_eq!(err(mxf4.with_sf_ids(ScaleFactorId(1), ScaleFactorId(0))), DescError::ScaleFactorId);
    assert!(mxf4.with_sf_ids(ScaleFactorId(2), ScaleFactorId(2)).encode().is_ok());
    assert_eq!(err(mxf4.with_major(Major::K, Major::Mn)), DescError::Major);
    assert_eq!(err(mx(E2M3, E4M3).with_major(Major::Mn, Major::K)), DescError::Major);
    assert!(mx(E5M2, E4M3).with_major(Major::Mn, Major::Mn).encode().is_ok());
}

/// Every combination of kind × types × accumulator × major × a set of shapes: whatever is
/// accepted reads back to the same fields, and each kind accepts at least one combination.
#[test]
fn dense_fields_round_trip_over_every_legal_combination() {
    let kinds = [DenseKind::F16, DenseKind::Tf32, DenseKind::F8F6F4, DenseKind::I8];
    let accs = [AccType::F16, AccType::F32, AccType::S32];
    let majors = [Major::K, Major::Mn];
    let shapes = [(64, 8), (64, 256), (128, 16), (128, 24), (128, 136), (256, 32), (256, 256)];
    let mut accepted = [0u32; 4];
    for (ki, &kind) in kinds.iter().enumerate() {
        for &a in &ALL_ELEMS {
            for &b in &ALL_ELEMS {
                for &acc in &accs {
                    for &am in &majors {
                        for &(m, n) in &shapes {
                            for cta in [CtaGroup::One, CtaGroup::Two] {
                                let mma = DenseMma::new(kind, a, b, acc, m, n, cta).with_major(am, Major::K);
                                let Ok(desc) = mma.encode() else { continue };
                                accepted[ki] += 1;
                                let f = desc.dense_fields();
                                assert_eq!((f.m, f.n, f.acc), (m, n, acc as u32), "{mma:?}");
                                assert_eq!(f.a, elem_code(kind, a).unwrap());
                                assert_eq!(f.b, elem_code(kind, b).unwrap());
                                assert_eq!(f.a_mn_major, am == Major::Mn);
                                assert!(!f.b_mn_major && !f.sparse && !f.negate_a && !f.saturate);
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(accepted.iter().all(|&c| c > 0), "{accepted:?}");
}

#[test]
fn smem_descriptor_matches_the_table() {
    // 128B-swizzled K-major tile at 0x400, 8-row groups 1024 B apart (REFERENCE §10.3).
    let d = SmemDesc::k_major_swizzled(0x400, 1024, SmemLayout::B128).unwrap();
    assert_eq!(d.0, 0x4000_4040_0001_0040);
    // Scale-factor staging, no swizzle, SBO 128, LBO 0 (REFERENCE §11).
    assert_eq!(SmemDesc::interleaved(0x400, 0, 128).unwrap().0, 0x0000_4008_0000_0040);
    // A K-step of 32 bytes inside the atom adds 2 to the start field only.
    assert_eq!(d.advance(32).0, 0x4000_4040_0001_0042);
    let f = d.advance(32).fields().unwrap();
    assert_eq!((f.start, f.lbo, f.sbo, f.layout), (0x420, 16, 1024, SmemLayout::B128));
}

#[test]
fn smem_descriptor_rejects_bad_fields() {
    let ok = SmemDescFields {
        start: 0x400,
        lbo: 16,
        sbo: 1024,
        base_offset: 0,
        lbo_mode: LboMode::Relative,
        layout: SmemLayout::B64,
    };
    assert!(ok.encode().is_ok());
    assert_eq!(SmemDescFields { start: 0x408, ..ok }.encode(), Err(DescError::SmemField));
    assert_eq!(SmemDescFields { start: SMEM_FIELD_LIMIT, ..ok }.encode(), Err(DescError::SmemField));
    assert_eq!(SmemDescFields { sbo: 24, ..ok }.encode(), Err(DescError::SmemField));
    assert_eq!(SmemDescFields { lbo: 1 << 18, ..ok }.encode(), Err(DescError::SmemField));
    assert_eq!(SmemDescFields { base_offset: 8, ..ok }.encode(), Err(DescError::BaseOffset));
    assert_eq!(SmemDescFields { lbo_mode: LboMode::Absolute, ..ok }.encode(), Err(DescError::LboMode));
    // Undefined layout codes and a missing version bit do not decode.
    assert_eq!(SmemDesc(ok.encode().unwrap().0 | 1 << 61).fields(), None);
    assert_eq!(SmemDesc(ok.encode().unwrap().0 & !(1 << 46)).fields(), None);
}

fn layout_strategy() -> impl Strategy<Value = SmemLayout> {
    prop_oneof![
        Just(SmemLayout::None),
        Just(SmemLayout::B128Base32B),
        Just(SmemLayout::B128),
        Just(SmemLayout::B64),
        Just(SmemLayout::B32),
    ]
}

proptest! {
    #[test]
    fn smem_descriptor_round_trips(start in 0u32..(1 << 14), lbo in 0u32..(1 << 14), sbo in 0u32..(1 << 14),
                                   base_offset in 0u8..8, layout in layout_strategy()) {
        let fields = SmemDescFields {
            start: start << 4, lbo: lbo << 4, sbo: sbo << 4, base_offset, lbo_mode: LboMode::Relative, layout,
        };
        let desc = fields.encode().unwrap();
        prop_assert_eq!(desc.fields(), Some(fields));
        // Reserved bits 14..16, 30..32, 53..61 stay zero; the version bits are exactly 0b001.
        prop_assert_eq!(desc.0 & 0x1FE0_0000_C000_C000, 0);
        prop_assert_eq!((desc.0 >> 46) & 7, 1);
    }

    #[test]
    fn block_scaled_fields_round_trip(n in 1u32..=32, sfa in 0u8..4, sfb in 0u8..4, a_mn: bool, b_mn: bool,
                                      two: bool, neg_a: bool, neg_b: bool) {
        let (cta, n) = if two { (CtaGroup::Two, (n * 8).div_ceil(16) * 16) } else { (CtaGroup::One, n * 8) };
        let major = |mn| if mn { Major::Mn } else { Major::K };
        let mma = BlockScaledMma::mxf8f6f4(ElemType::E5M2, ElemType::E4M3, 128, n, cta)
            .with_sf_ids(ScaleFactorId(sfa), ScaleFactorId(sfb))
            .with_major(major(a_mn), major(b_mn))
            .with_negate(neg_a, neg_b);
        let f = mma.encode().unwrap().scaled_fields();
        prop_assert_eq!((f.n, f.m, f.sfa_id, f.sfb_id), (n, 128, sfa as u32, sfb as u32));
        prop_assert_eq!((f.a, f.b, f.ue8m0, f.sparse), (1, 0, true, false));
        prop_assert_eq!((f.a_mn_major, f.b_mn_major, f.negate_a, f.negate_b), (a_mn, b_mn, neg_a, neg_b));
    }
}
