//! The `#[kernel]` entries of the attention forward kernel (`attention_sm90`): one per row of
//! `abi::attention_sm90::SHAPES` and element type, each instantiating the generic body with its
//! shape's values as const generics, in the order of the host's entry tables.

use warpforge_dsl::abi::attention_sm90 as shape;
use warpforge_dsl::abi::{AttentionParams, TensorMap};
use warpforge_dsl::num::{Bf16, F16};
use warpforge_dsl::parts::rows::{AFragments5, AFragments8, AFragments11};
use warpforge_dsl::warpgroup::acc::{Acc64x64F32, Acc64x80F32, Acc64x128F32, Acc64x176F32, Acc64x256F32};

use crate::attention_sm90::{CHUNK, attention};

/// `#[kernel]` entries over [`attention`], per shape: its bf16 and f16 entries' names, the shape
/// (`abi::attention_sm90`'s table), scores accumulator (64 × the shape's keys), P's fragments,
/// output accumulator (64 × the head dimension).
macro_rules! attention_entries {
    ($(($bf16:ident, $f16:ident): $shape:ident, $scores:ty, $probs:ty, $acc:ty;)*) => {$(
        attention_entries!(@one $bf16: Bf16, $shape, $scores, $probs, $acc);
        attention_entries!(@one $f16: F16, $shape, $scores, $probs, $acc);
    )*};
    (@one $name:ident: $t:ty, $shape:ident, $scores:ty, $probs:ty, $acc:ty) => {
        /// Attention forward entry point; see the module docs and [`AttentionParams`].
        ///
        /// # Safety
        /// See `attention`: tensor maps and parameters as the host launcher builds them.
        #[warpforge_dsl::kernel(threads = 384, min_blocks_per_sm = 1)]
        pub unsafe fn $name(
            #[grid_constant] q_map: &TensorMap,
            #[grid_constant] k_map: &TensorMap,
            #[grid_constant] v_map: &TensorMap,
            params: AttentionParams,
        ) {
            const SHAPE: shape::Shape = shape::$shape;
            const D: usize = SHAPE.head_dim as usize;
            const RING: usize = SHAPE.stages as usize;
            const BN: usize = SHAPE.keys as usize;
            const DC: usize = D / CHUNK;
            const PRODUCER: u32 = SHAPE.producer_regs;
            const CONSUMER: u32 = SHAPE.consumer_regs;
            const PERSISTENT: bool = SHAPE.persistent;
            const DEFER: bool = SHAPE.defer_block_tail;
            const SPLIT: bool = SHAPE.split_kv_rings;
            const QS: usize = SHAPE.q_stages as usize;
            const TREE: bool = SHAPE.tree_row_folds;
            const CHAIN: bool = SHAPE.chain_tiles;
            const PREFETCH_Q: bool = SHAPE.prefetch_next_q;
            // SAFETY: forwarded to the launcher's contract.
            unsafe {
                attention::<$t, $scores, $probs, $acc, D, DC, BN, RING, { RING * DC }, QS, { QS * DC }, PRODUCER, CONSUMER, PERSISTENT, DEFER, SPLIT, TREE, CHAIN, PREFETCH_Q>(
                    q_map, k_map, v_map, &params,
                )
            }
        }
    };
}

attention_entries! {
    (attention_bf16_d64_sm90, attention_f16_d64_sm90): D64, Acc64x128F32, AFragments8, Acc64x64F32;
    (attention_bf16_d64_k176_sm90, attention_f16_d64_k176_sm90): D64_K176, Acc64x176F32, AFragments11, Acc64x64F32;
    (attention_bf16_d128_sm90, attention_f16_d128_sm90): D128, Acc64x128F32, AFragments8, Acc64x128F32;
    (attention_bf16_d128_k176_sm90, attention_f16_d128_k176_sm90): D128_K176, Acc64x176F32, AFragments11, Acc64x128F32;
    (attention_bf16_d256_sm90, attention_f16_d256_sm90): D256, Acc64x80F32, AFragments5, Acc64x256F32;
    (attention_bf16_d128_causal_sm90, attention_f16_d128_causal_sm90): D128_CAUSAL, Acc64x128F32, AFragments8, Acc64x128F32;
    (attention_bf16_d128_causal_short_sm90, attention_f16_d128_causal_short_sm90): D128_CAUSAL_SHORT, Acc64x128F32, AFragments8, Acc64x128F32;
}
