//! Grouped GEMMs for mixture-of-experts layers on Hopper: every expert's `D_e = A_e·B_eᵀ` in
//! one persistent launch, bf16 or block-scaled FP8 (e4m3, bf16 output), in DeepGEMM's two
//! layouts (`logic::schedule::grouped` states them and how device-side indices and counts are
//! clamped):
//! - contiguous: the rows routed to each expert back to back in one A and one D, segments padded
//!   to the 128-row tile, an i32 expert index per row (`-1` for padding);
//! - masked: a fixed capacity of rows per expert in `[experts, capacity, ·]` tensors and each
//!   expert's valid-row count on the device (a decode step a CUDA graph replays).
//!
//! Algorithm: the dense bodies unchanged (the 16-bit one, [`crate::gemm_bf16_ws_persistent_sm90`],
//! on 128 × 256 cooperative tiles; the FP8 one, [`crate::gemm_fp8_blockscaled_sm90`], on
//! 128 × 128, or on its wide 64 × 256 tiles for a masked capacity of at most 64 rows, the
//! decode regime, where one tile row holds an expert's rows either way), driven by one of two
//! schedulers (a type per entry, so no role carries the choice):
//! - contiguous, FP8 masked, and bf16 masked with a capacity of at most one tile row per
//!   expert (decode steps; `gemm_grouped_masked_bf16_sm90`): `parts::schedule::ExpertTiles`,
//!   whole tiles round robin (the host's plan is data-parallel) over the tile rows of all
//!   experts stacked along M, each unit told its expert (B's batch coordinate, and the FP8
//!   scales' expert offset) and whether it has rows; producer and consumers read the same index
//!   or count and pass over a tile without rows together, so tiles of padding and of rows past
//!   an expert's count cost one cached load. Consecutive tiles go to different CTAs, so an
//!   expert's tiles spread over the whole grid however the tokens were routed.
//! - bf16 masked with a larger capacity (`gemm_grouped_masked_balanced_bf16_sm90`, the host
//!   picks by capacity): `parts::schedule::MaskedBalanced`, which every role plans on the device
//!   from the experts' counts: only the tiles with rows, in full data-parallel waves and a last
//!   partial wave streamed over K when there are more tile rows than experts (the body's
//!   stream-K fix-up, the host's stream-K buffers), else data-parallel. A few experts of many
//!   rows under a generous capacity otherwise leave the grid a partial wave of whole tiles (one
//!   expert of 1136 rows: 144 tiles of 128 × 256 on 132 CTAs, two tile times of work where 1.09
//!   suffice). The consumers take each unit through `unit_uniform`, so the main loop stays on
//!   the uniform datapath. Within one tile row per expert the capacity walk stays: on an H100
//!   the balanced plan's walk over only the tiles with rows ran 3–6 % slower than it on 32
//!   experts of a decode step at N × K = 4096 × 7168 (the cause not established). The FP8 body
//!   does not take the balanced plan yet: with it, ptxas 13.5 spills 8–22 B per thread.
//!
//! Rows of D: a tile is written whole or not at all. A tile with an expert (contiguous: its first
//! row's index; masked: some row below the expert's count) writes all its 128 rows, the padding
//! or past-the-count rows among them from whatever A holds there; a skipped tile's rows are
//! never written.

use warpforge_dsl::abi::{BlockScaleParams, GemmParams, GroupedParams, TensorMap, TilePlan};
use warpforge_dsl::num::Bf16;
use warpforge_dsl::parts::schedule::{ExpertTiles, MaskedBalanced, TileGeometry};

use crate::gemm_bf16_ws_persistent_sm90::wide;
use crate::gemm_epilogue::Linear;
use crate::gemm_fp8_blockscaled_sm90::{RING, WIDE_RING, gemm as gemm_fp8};
use crate::gemm_sm90_ctas::Solo;

/// The grouped bf16 entries: name, layout (`MASKED`).
macro_rules! grouped_entries {
    ($($bf16:ident: schedule = $schedule:expr;)*) => {$(
        /// Grouped bf16 GEMM, bf16 output; see the module docs, [`GemmParams`] and
        /// [`GroupedParams`].
        ///
        /// # Safety
        /// As the 16-bit body's (`gemm_bf16_ws_persistent_sm90::gemm`, cooperative 128 × 256
        /// tiles) for A (K × rows × batches), B (K × N × experts) and D (N × rows × batches),
        /// with the plan's batches the experts (masked, `capacity` rows each) or one batch of
        /// all rows (contiguous, a multiple of 128); `grouped.groups` holds an i32 per row of A
        /// (contiguous) or per expert (masked).
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1)]
        pub unsafe fn $bf16(
            #[grid_constant] a_map: &TensorMap,
            #[grid_constant] b_map: &TensorMap,
            #[grid_constant] d_map: &TensorMap,
            params: GemmParams,
            plan: TilePlan,
            grouped: GroupedParams,
        ) {
            // SAFETY: the index or count buffer covers the plan's rows or experts (launcher
            // contract).
            let experts = |geometry| unsafe { $schedule(&plan, geometry, &grouped) };
            // SAFETY: forwarded to the launcher's contract.
            unsafe { wide!(Bf16, Linear<Bf16>, false, _)(a_map, b_map, d_map, &params, &plan, experts) }
        }
    )*};
}

/// The grouped FP8 entries: name, layout (`MASKED`), tile (`WIDE`: 64 × 256, the FP8 body's
/// side-by-side consumers) and ring depth.
macro_rules! fp8_grouped_entries {
    ($($(#[$doc:meta])* $fp8:ident: schedule = $schedule:expr, wide = $wide:literal, ring = $ring:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As the FP8 body's (`gemm_fp8_blockscaled_sm90::gemm`) for A (K × rows × batches), B
        /// (K × N × experts) and D (N × rows × batches) with batches as for the bf16 entries;
        /// the A scale map's batches are A's and every expert's B scales (`scales.b_stride`
        /// apart in the flattened buffer) cover N.
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1)]
        pub unsafe fn $fp8(
            #[grid_constant] a_map: &TensorMap,
            #[grid_constant] b_map: &TensorMap,
            #[grid_constant] d_map: &TensorMap,
            #[grid_constant] a_scale_map: &TensorMap,
            #[grid_constant] b_scale_map: &TensorMap,
            params: GemmParams,
            plan: TilePlan,
            scales: BlockScaleParams,
            grouped: GroupedParams,
        ) {
            // SAFETY: the index or count buffer covers the plan's rows or experts (launcher
            // contract).
            let experts = |geometry| unsafe { $schedule(&plan, geometry, &grouped) };
            let scale_maps = (a_scale_map, b_scale_map);
            // SAFETY: forwarded to the launcher's contract.
            unsafe {
                gemm_fp8::<_, Solo, $wide, { $ring }>(a_map, b_map, d_map, scale_maps, &params, &plan, &scales, experts)
            }
        }
    )*};
}

/// Data-parallel units over every tile of the layout, skipping those without rows.
///
/// # Safety
/// As [`ExpertTiles::new`] for `grouped` and the plan's rasterisation.
#[inline(always)]
unsafe fn every_tile<const MASKED: bool>(
    plan: &TilePlan,
    geometry: TileGeometry,
    grouped: &GroupedParams,
) -> ExpertTiles<MASKED> {
    // SAFETY: the caller's contract.
    unsafe { ExpertTiles::<MASKED>::new(plan.raster, geometry, plan.units.k_iters_per_tile(), grouped) }
}

/// Masked: balanced units over the tiles with rows only (stream-K buffers for the grid).
///
/// # Safety
/// As [`MaskedBalanced::new`] for `grouped`, with the plan's tile columns and K slices.
#[inline(always)]
unsafe fn balanced(plan: &TilePlan, geometry: TileGeometry, grouped: &GroupedParams) -> MaskedBalanced {
    // SAFETY: the caller's contract.
    unsafe { MaskedBalanced::new(geometry, plan.raster.tiles_n(), plan.units.k_iters_per_tile(), grouped) }
}

grouped_entries! {
    gemm_grouped_contiguous_bf16_sm90: schedule = every_tile::<false>;
    gemm_grouped_masked_bf16_sm90: schedule = every_tile::<true>;
    gemm_grouped_masked_balanced_bf16_sm90: schedule = balanced;
}

fp8_grouped_entries! {
    /// Grouped block-scaled FP8 GEMM, bf16 output, contiguous layout; see the module docs,
    /// [`GemmParams`], [`BlockScaleParams`] and [`GroupedParams`].
    gemm_fp8_grouped_contiguous_bf16_sm90: schedule = every_tile::<false>, wide = false, ring = RING;
    /// Grouped block-scaled FP8 GEMM, bf16 output, masked layout.
    gemm_fp8_grouped_masked_bf16_sm90: schedule = every_tile::<true>, wide = false, ring = RING;
    /// Grouped block-scaled FP8 GEMM, bf16 output, masked layout on 64 × 256 tiles (a capacity of
    /// at most 64 rows per expert: one tile row, written whole as on 128 × 128 tiles).
    gemm_fp8_grouped_masked_bf16_wide_sm90: schedule = every_tile::<true>, wide = true, ring = WIDE_RING;
}
