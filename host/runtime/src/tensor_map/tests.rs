//! CPU tests of the tensor-map rules: one case per driver rule, each error reachable, and the
//! boundary value of each rule accepted. No driver is needed.

use super::*;
use half::bf16;

/// A 16-byte-aligned device-looking address.
const BASE: u64 = 0x7f00_0000_0000;

/// 4096 × 4096 row-major bf16, 64 × 64 boxes with 128-byte swizzle: a GEMM K-major operand.
fn gemm_operand() -> TensorMapBuilder<bf16> {
    TensorMapBuilder::<bf16>::row_major_2d(4096, 4096, 4096, 64, 64).swizzle(Swizzle::B128)
}

const GEMM_BYTES: u64 = 4096 * 4096 * 2;

fn check<T: TmaElement>(builder: &TensorMapBuilder<T>, address: u64, bytes: u64, expected: &str) {
    let got = builder.validate(address, bytes);
    let got = match got {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("{e:?}"),
    };
    assert!(got.starts_with(expected), "expected {expected}, got {got}");
}

#[test]
fn valid_bf16_2d_with_128b_swizzle_is_accepted() {
    check(&gemm_operand(), BASE, GEMM_BYTES, "ok");
    assert_eq!(gemm_operand().box_bytes(), 64 * 64 * 2);
}

#[test]
fn rank_rules() {
    check(&TensorMapBuilder::<f32>::new(&[], &[]), BASE, 1 << 20, "RankOutOfRange { rank: 0 }");
    check(&TensorMapBuilder::<f32>::new(&[4; 6], &[4; 6]), BASE, 1 << 20, "RankOutOfRange { rank: 6 }");
    check(&TensorMapBuilder::<f32>::new(&[4; 5], &[4; 5]), BASE, 1 << 20, "ok");
    check(&TensorMapBuilder::<f32>::new(&[64], &[4]), BASE, 256, "ok");
    check(&TensorMapBuilder::<f32>::new(&[8, 8], &[4]), BASE, 256, "LengthMismatch { list: BoxDims");
    check(
        &TensorMapBuilder::<f32>::new(&[8, 8], &[4, 4]).global_strides(&[32, 256]),
        BASE,
        1 << 20,
        "LengthMismatch { list: GlobalStrides",
    );
    check(
        &TensorMapBuilder::<f32>::new(&[8, 8], &[4, 4]).element_strides(&[1]),
        BASE,
        1 << 20,
        "LengthMismatch { list: ElementStrides",
    );
}

#[test]
fn address_must_be_16_byte_aligned() {
    check(&gemm_operand(), BASE + 8, GEMM_BYTES, "MisalignedAddress");
    check(&gemm_operand(), BASE + 16, GEMM_BYTES, "ok");
}

#[test]
fn global_dim_rules() {
    check(&TensorMapBuilder::<u8>::new(&[16, 0], &[16, 1]), BASE, 1 << 20, "ZeroGlobalDim { dim: 1 }");
    let at_limit = TensorMapBuilder::<u8>::new(&[MAX_GLOBAL_DIM], &[16]);
    check(&at_limit, BASE, MAX_GLOBAL_DIM, "ok");
    let over = TensorMapBuilder::<u8>::new(&[MAX_GLOBAL_DIM + 1], &[16]);
    check(&over, BASE, u64::MAX, "GlobalDimTooLarge { dim: 0");
}

#[test]
fn global_stride_rules() {
    // A 100-column bf16 matrix packed: 200-byte rows are not 16-byte multiples.
    let packed = TensorMapBuilder::<bf16>::row_major_2d(10, 100, 100, 8, 64);
    check(&packed, BASE, 1 << 20, "MisalignedGlobalStride { dim: 1, stride: 200 }");
    // Padding the rows to 104 elements (208 bytes) fixes it.
    check(&TensorMapBuilder::<bf16>::row_major_2d(10, 100, 104, 8, 64), BASE, 1 << 20, "ok");
    let huge = TensorMapBuilder::<u8>::new(&[16, 2], &[16, 2]).global_strides(&[GLOBAL_STRIDE_LIMIT]);
    check(&huge, BASE, u64::MAX, "GlobalStrideTooLarge { dim: 1");
    let below = TensorMapBuilder::<u8>::new(&[16, 2], &[16, 2]).global_strides(&[GLOBAL_STRIDE_LIMIT - 16]);
    check(&below, BASE, u64::MAX, "ok");
}

#[test]
fn box_dim_rules() {
    check(
        &TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 0, 64),
        BASE,
        1 << 20,
        "BoxDimOutOfRange { dim: 1, extent: 0 }",
    );
    check(
        &TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 257, 64),
        BASE,
        1 << 20,
        "BoxDimOutOfRange { dim: 1, extent: 257 }",
    );
    check(&TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 256, 64), BASE, 1 << 20, "ok");
}

#[test]
fn inner_box_rules() {
    // 2 f32 = 8 bytes per row.
    check(&TensorMapBuilder::<f32>::new(&[64, 64], &[2, 8]), BASE, 1 << 20, "MisalignedInnerBox { bytes: 8 }");
    // 64 f32 = 256 bytes: fine unswizzled, too wide for any swizzle span.
    let wide = TensorMapBuilder::<f32>::new(&[64, 64], &[64, 8]);
    check(&wide, BASE, 1 << 20, "ok");
    check(&wide.clone().swizzle(Swizzle::B128), BASE, 1 << 20, "InnerBoxExceedsSwizzle { bytes: 256, span: 128 }");
    let row_64b = TensorMapBuilder::<bf16>::new(&[64, 64], &[32, 8]);
    check(&row_64b.clone().swizzle(Swizzle::B64), BASE, 1 << 20, "ok");
    check(&row_64b.swizzle(Swizzle::B32), BASE, 1 << 20, "InnerBoxExceedsSwizzle { bytes: 64, span: 32 }");
}

#[test]
fn element_stride_rules() {
    let base = TensorMapBuilder::<f32>::new(&[64, 64], &[4, 8]);
    check(&base.clone().element_strides(&[1, 0]), BASE, 1 << 20, "ElementStrideOutOfRange { dim: 1, stride: 0 }");
    check(&base.clone().element_strides(&[9, 1]), BASE, 1 << 20, "ElementStrideOutOfRange { dim: 0, stride: 9 }");
    check(&base.element_strides(&[8, 2]), BASE, 1 << 20, "ok");
}

#[test]
fn buffer_must_hold_the_whole_tensor() {
    check(&gemm_operand(), BASE, GEMM_BYTES - 1, "OutOfBounds { required: 33554432");
    // A padded leading dimension: the last row needs only its own 100 elements.
    let padded = TensorMapBuilder::<bf16>::row_major_2d(10, 100, 104, 8, 64);
    check(&padded, BASE, (9 * 104 + 100) * 2, "ok");
    check(&padded, BASE, (9 * 104 + 100) * 2 - 1, "OutOfBounds");
    // Three dimensions with packed strides: 4 × 8 × 16 u32.
    check(&TensorMapBuilder::<u32>::new(&[4, 8, 16], &[4, 8, 16]), BASE, 4 * 8 * 16 * 4, "ok");
    check(&TensorMapBuilder::<u32>::new(&[4, 8, 16], &[4, 8, 16]), BASE, 4 * 8 * 16 * 4 - 4, "OutOfBounds");
}

#[test]
fn errors_read_well() {
    let e = gemm_operand().swizzle(Swizzle::B32).validate(BASE, GEMM_BYTES).unwrap_err();
    assert_eq!(e.to_string(), "inner box row is 128 bytes, wider than the 32-byte swizzle span");
}

/// Whether the driver itself encodes `builder` at `address`, bypassing our checks.
fn driver_accepts<T: TmaElement>(builder: &TensorMapBuilder<T>, address: u64) -> bool {
    builder.encode_unchecked_address(address).is_ok()
}

/// Cross-checks the rules against the real driver: every request rejected here for a rule the
/// driver enforces is rejected by the driver too, and each rule's boundary value is accepted
/// by both (so no rule is stricter than the driver's).
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn driver_agrees_with_the_rules() {
    let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA device");
    let stream = ctx.default_stream();
    let buffer = stream.alloc_zeros::<bf16>(4096 * 4096).expect("32 MiB of device memory");

    let (map, _read) = gemm_operand().encode(&buffer, &stream).expect("valid GEMM operand map");
    assert_ne!(map, TensorMap::ZEROED);
    let short = buffer.slice(..4096 * 4095);
    assert!(matches!(gemm_operand().encode(&short, &stream), Err(TensorMapError::OutOfBounds { .. })));

    let (address, _access) = buffer.device_ptr(&stream);
    let rejected: [(&str, bool); 11] = [
        ("misaligned address", driver_accepts(&gemm_operand(), address + 8)),
        ("zero dim", driver_accepts(&TensorMapBuilder::<u8>::new(&[16, 0], &[16, 1]), address)),
        ("dim over 2^32", driver_accepts(&TensorMapBuilder::<u8>::new(&[MAX_GLOBAL_DIM + 1], &[16]), address)),
        ("stride of 200 B", driver_accepts(&TensorMapBuilder::<bf16>::row_major_2d(10, 100, 100, 8, 64), address)),
        (
            "stride of 2^40",
            driver_accepts(
                &TensorMapBuilder::<u8>::new(&[16, 2], &[16, 2]).global_strides(&[GLOBAL_STRIDE_LIMIT]),
                address,
            ),
        ),
        ("box of 0", driver_accepts(&TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 0, 64), address)),
        ("box of 257", driver_accepts(&TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 257, 64), address)),
        ("8-byte inner box", driver_accepts(&TensorMapBuilder::<f32>::new(&[64, 64], &[2, 8]), address)),
        (
            "256-byte row, 128-byte swizzle",
            driver_accepts(&TensorMapBuilder::<f32>::new(&[64, 64], &[64, 8]).swizzle(Swizzle::B128), address),
        ),
        (
            "element stride 0",
            driver_accepts(&TensorMapBuilder::<f32>::new(&[64, 64], &[4, 8]).element_strides(&[1, 0]), address),
        ),
        (
            "element stride 9",
            driver_accepts(&TensorMapBuilder::<f32>::new(&[64, 64], &[4, 8]).element_strides(&[9, 1]), address),
        ),
    ];
    let accepted: [(&str, bool); 6] = [
        ("GEMM operand", driver_accepts(&gemm_operand(), address)),
        ("dim of 2^32", driver_accepts(&TensorMapBuilder::<u8>::new(&[MAX_GLOBAL_DIM], &[16]), address)),
        (
            "stride just below 2^40",
            driver_accepts(
                &TensorMapBuilder::<u8>::new(&[16, 2], &[16, 2]).global_strides(&[GLOBAL_STRIDE_LIMIT - 16]),
                address,
            ),
        ),
        ("box of 256", driver_accepts(&TensorMapBuilder::<bf16>::row_major_2d(512, 512, 512, 256, 64), address)),
        (
            "64-byte row, 64-byte swizzle",
            driver_accepts(&TensorMapBuilder::<bf16>::new(&[64, 64], &[32, 8]).swizzle(Swizzle::B64), address),
        ),
        (
            "element stride 8",
            driver_accepts(&TensorMapBuilder::<f32>::new(&[64, 64], &[4, 8]).element_strides(&[8, 2]), address),
        ),
    ];
    let disagreements: Vec<&str> = rejected
        .iter()
        .filter(|(_, driver_ok)| *driver_ok)
        .chain(accepted.iter().filter(|(_, driver_ok)| !*driver_ok))
        .map(|(name, _)| *name)
        .collect();
    assert!(disagreements.is_empty(), "driver disagrees on: {disagreements:?}");
}

#[test]
fn swizzle_maps_to_the_driver_code_the_logic_crate_names() {
    for swizzle in Swizzle::ALL {
        assert_eq!(swizzle_to_driver(swizzle) as u32, swizzle.tensor_map_code(), "{swizzle:?}");
    }
    assert_eq!(swizzle_span_limit(Swizzle::None), None);
    assert_eq!(swizzle_span_limit(Swizzle::B64), Some(64));
}

/// The GEMM operand's tile as a shared description: 64 rows × 64 bf16 under 128-byte swizzle.
type GemmTile = warpforge_logic::tile_spec::TileSpec<
    warpforge_logic::tile_spec::elem::Bf16,
    64,
    64,
    warpforge_logic::swizzle::Swizzle128B,
>;

#[test]
fn a_map_for_a_tile_takes_its_box_and_swizzle() {
    let map = TensorMapBuilder::for_tile::<GemmTile>(&[4096, 4096]);
    check(&map, BASE, GEMM_BYTES, "ok");
    check(&gemm_operand().expect_tile::<GemmTile>(), BASE, GEMM_BYTES, "ok");
    assert_eq!(map.box_bytes(), 64 * 64 * 2);
    // Outer dimensions of a 3-D map take box 1.
    check(&TensorMapBuilder::for_tile::<GemmTile>(&[4096, 4096, 1]), BASE, GEMM_BYTES, "ok");
}

#[test]
fn a_box_or_swizzle_that_disagrees_with_the_tile_is_refused() {
    let wrong_box = TensorMapBuilder::<bf16>::row_major_2d(4096, 4096, 4096, 128, 64).swizzle(Swizzle::B128);
    check(&wrong_box.expect_tile::<GemmTile>(), BASE, GEMM_BYTES, "TileMismatch");
    check(&gemm_operand().swizzle(Swizzle::B64).expect_tile::<GemmTile>(), BASE, GEMM_BYTES, "TileMismatch");
    check(
        &TensorMapBuilder::for_tile::<GemmTile>(&[4096, 4096]).swizzle(Swizzle::None),
        BASE,
        GEMM_BYTES,
        "TileMismatch",
    );
    let outer_box = TensorMapBuilder::<bf16>::new(&[4096, 4096, 2], &[64, 64, 2]).swizzle(Swizzle::B128);
    check(&outer_box.expect_tile::<GemmTile>(), BASE, 2 * GEMM_BYTES, "TileMismatch");
    check(&TensorMapBuilder::for_tile::<GemmTile>(&[4096]), BASE, GEMM_BYTES, "TileMismatch");
    let message = TensorMapBuilder::for_tile::<GemmTile>(&[4096, 4096])
        .swizzle(Swizzle::B64)
        .validate(BASE, GEMM_BYTES)
        .unwrap_err()
        .to_string();
    assert!(message.contains("does not load tile"), "{message}");
}
