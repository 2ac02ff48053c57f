//! CPU tests of tile descriptions: each rule reachable and its boundary accepted, the sizes both
//! sides derive, and the shared-memory plan against a model of the device's bump allocator at
//! every window base the launch may see.

use super::*;
use crate::swizzle::{NoSwizzle, Swizzle32B, Swizzle64B, Swizzle128B};
use proptest::prelude::*;

type A = TileSpec<elem::Bf16, 64, 64, Swizzle128B>;
type B = TileSpec<elem::Bf16, 128, 64, Swizzle128B>;

fn layout(rows: u32, cols: u32, elem_bytes: u32, swizzle: Swizzle) -> TileLayout {
    TileLayout { rows, cols, elem_bytes, swizzle }
}

#[test]
fn each_rule_is_reachable_and_its_boundary_accepted() {
    let check = |rows, cols, bytes, s| layout(rows, cols, bytes, s).check();
    assert_eq!(check(0, 64, 2, Swizzle::B128), Err(TileError::BoxDim));
    assert_eq!(check(264, 8, 2, Swizzle::None), Err(TileError::BoxDim));
    assert_eq!(check(256, 8, 2, Swizzle::None), Ok(()));
    assert_eq!(check(8, 257, 1, Swizzle::None), Err(TileError::BoxDim));
    assert_eq!(check(8, 4, 2, Swizzle::None), Err(TileError::RowNotChunks));
    assert_eq!(check(8, 32, 2, Swizzle::B128), Err(TileError::RowNotSpan));
    assert_eq!(check(8, 16, 2, Swizzle::B32), Ok(()));
    assert_eq!(check(12, 64, 2, Swizzle::B128), Err(TileError::RowsNotGrouped));
}

#[test]
fn sizes_and_box_follow_from_the_spec() {
    assert_eq!((A::ROWS, A::COLS, A::BYTES, A::ALIGN, A::BOX), (64, 64, 8192, 1024, [64, 64]));
    assert_eq!((B::BYTES, B::BOX), (16384, [64, 128]));
    assert_eq!(<TileSpec<elem::F32, 8, 8, Swizzle32B> as Tile>::ALIGN, 256);
    assert_eq!(<TileSpec<elem::F16, 8, 32, Swizzle64B> as Tile>::BYTES, 512);
    assert_eq!(<TileSpec<elem::U8, 16, 16, NoSwizzle> as Tile>::ALIGN, 128);
}

#[test]
fn a_gemm_plan_sums_rings_and_barriers() {
    const STAGES: u32 = 4;
    const PLAN: SmemPlan = SmemPlan::new().ring::<A>(STAGES).ring::<A>(STAGES).ring::<B>(STAGES).pipeline(STAGES);
    assert_eq!(PLAN.bytes(), STAGES * (2 * 8192 + 16384) + 2 * STAGES * 8);
    assert_eq!(PLAN.align(), 1024);
    assert_eq!(PLAN.launch_bytes(), PLAN.bytes() + 1024 - WINDOW_BASE_ALIGN);
}

/// The device's bump allocator (`DynamicShared::alloc`) from window base `base`: the end of the
/// last region.
fn carve(base: u32, regions: &[(u32, u32)]) -> u32 {
    regions.iter().fold(base, |next, &(bytes, align)| next.next_multiple_of(align) + bytes)
}

fn plan_of(regions: &[(u32, u32)]) -> SmemPlan {
    regions.iter().fold(SmemPlan::new(), |plan, &(bytes, align)| plan.region(bytes, align))
}

proptest! {
    /// Carved from any 16-byte-aligned base, the regions fit `launch_bytes`, and exactly
    /// `bytes` from a base aligned to the plan's largest alignment.
    #[test]
    fn launch_bytes_cover_every_window_base(
        regions in proptest::collection::vec((0u32..20_000, 0u32..11), 0..8),
        base in 0u32..4096,
    ) {
        let regions: std::vec::Vec<(u32, u32)> = regions.into_iter().map(|(b, log)| (b, 1 << log)).collect();
        let plan = plan_of(&regions);
        let base = base * WINDOW_BASE_ALIGN;
        prop_assert!(carve(base, &regions) - base <= plan.launch_bytes());
        let aligned = base.next_multiple_of(plan.align());
        prop_assert_eq!(carve(aligned, &regions) - aligned, plan.bytes());
    }
}
