//! The data that crosses the launch boundary, defined once for both sides.
//!
//! Kernel parameters are passed by the driver as raw bytes in declaration order; a struct
//! defined twice (once for the kernel, once for the host) drifts. Every type here is
//! `#[repr(C)]`, `Copy`, and compiled into both the PTX and the host crate, and the host's
//! launchers name each kernel's parameter list once (see `warpforge::kernels`).
#![no_std]

pub use warpforge_logic::schedule::stream_k::StreamKScheduler;
pub use warpforge_logic::schedule::swizzled::Rasterization;

/// The 128-byte opaque image that `cuTensorMapEncodeTiled` writes.
///
/// Kernels take it as `#[grid_constant] map: &TensorMap` (the builder turns that parameter into
/// a by-value, 64-byte-aligned `.param` the TMA unit can read), and the host passes the
/// 128 bytes by value.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap {
    /// Driver-defined contents; never interpreted by warpforge.
    pub opaque: [u64; 16],
}

impl TensorMap {
    /// An all-zero image (not a valid map; for initialisation before encoding).
    pub const ZEROED: TensorMap = TensorMap { opaque: [0; 16] };
}

pub mod attention_decode;
pub use attention_decode::{AttentionDecodeParams, DecodeTensor};

/// Tile shape and launch shape of the sm_90 GEMM kernels (host planning and device code agree).
pub mod gemm_sm90 {
    /// Rows of D per CTA tile.
    pub const BLOCK_M: u32 = 128;
    /// Columns of D per CTA tile.
    pub const BLOCK_N: u32 = 256;
    /// K per pipeline stage.
    pub const BLOCK_K: u32 = 64;
    /// Pipeline depth: four 48 KiB stages, with the epilogue staged in column passes to fit.
    pub const STAGES: u32 = 4;
    /// Threads per CTA: one producer warpgroup and two consumer warpgroups.
    pub const THREADS: u32 = 384;
    /// Rows of A per TMA box (one consumer warpgroup's share of the tile).
    pub const A_BOX_ROWS: u32 = 64;
    /// Columns of D per TMA store box (128 bytes of a 16-bit output: one swizzle span).
    pub const STORE_BOX_COLS: u32 = 64;
    /// Columns of D the epilogue stages per pass (the tile's BLOCK_N columns take
    /// `BLOCK_N / EPILOGUE_COLS` passes through one staging block per consumer warpgroup).
    pub const EPILOGUE_COLS: u32 = 128;
    /// Rows of D per tile with ping-pong consumers (each consumer warpgroup owns whole tiles).
    pub const PINGPONG_BLOCK_M: u32 = 64;
    /// Columns of D per tile of the narrow entries (`*_narrow_sm90`): 128 × 128 tiles, twice as
    /// many as the wide ones, so problems with few tiles split K less and hand over half-size
    /// partials.
    pub const NARROW_BLOCK_N: u32 = 128;
    /// Pipeline depth of the narrow entries: six 32 KiB stages, the wide ring's bytes.
    pub const NARROW_STAGES: u32 = 6;
    /// Dynamic shared memory: the operand ring, the 16-bit output staging (BLOCK_M ×
    /// EPILOGUE_COLS), the ring's barriers, the two ping-pong turn barriers, and alignment slack
    /// (the same for the narrow entries, whose ring holds as many bytes in more stages).
    pub const SMEM_BYTES: u32 =
        STAGES * (BLOCK_M + BLOCK_N) * BLOCK_K * 2 + BLOCK_M * EPILOGUE_COLS * 2 + 2 * NARROW_STAGES * 8 + 2 * 8 + 1024;
    const _: () = assert!(
        NARROW_STAGES * (BLOCK_M + NARROW_BLOCK_N) == STAGES * (BLOCK_M + BLOCK_N) && NARROW_STAGES >= STAGES,
        "both rings fit the same shared-memory plan"
    );
    /// Consumer warpgroups per CTA (each owns `BLOCK_M / 2` rows of the tile).
    pub const CONSUMERS: u32 = 2;
    /// Stream-K flags per CTA: one per consumer warpgroup.
    pub const FLAGS_PER_CTA: u32 = CONSUMERS;
    /// f32 per CTA in the stream-K workspace: one partial accumulator tile (BLOCK_M × BLOCK_N).
    pub const PARTIAL_SLOT_FLOATS: u32 = BLOCK_M * BLOCK_N;
}

/// Tile shape and launch shape of the block-scaled FP8 GEMM (`gemm_fp8_blockscaled_*_sm90`):
/// 128 × 128 tiles, one 128-wide K block of e4m3 per ring slot (128 bytes per row: one
/// 128-byte swizzle span, four `wgmma` k32 steps, one promotion).
pub mod gemm_fp8_sm90 {
    use super::gemm_sm90;

    /// Rows of D per CTA tile (two consumer warpgroups of 64 rows).
    pub const BLOCK_M: u32 = 128;
    /// Columns of D per CTA tile: one 128-row block of B's scales.
    pub const BLOCK_N: u32 = 128;
    /// K per ring slot (elements = bytes of e4m3): one promotion, one scale of each operand.
    pub const BLOCK_K: u32 = 128;
    /// Rows of A per TMA box (one consumer warpgroup's share of the tile).
    pub const A_BOX_ROWS: u32 = 64;
    /// Ring depth: five slots of 32 KiB of operands and 640 bytes of scales.
    pub const STAGES: u32 = 5;
    /// f32 of B's scales per TMA box (one 128-byte line of the flattened B scales from the
    /// 16-byte chunk holding the slot's block scale: a box starts on a chunk; the kernel reads
    /// the scale at its offset in the chunk).
    pub const B_SCALE_BOX: u32 = 32;
    /// Bytes of scales per slot: the tile's BLOCK_M A scales and one B scale box.
    pub const SCALE_BYTES: u32 = (BLOCK_M + B_SCALE_BOX) * 4;
    /// Threads per CTA: one producer warpgroup and two consumer warpgroups.
    pub const THREADS: u32 = gemm_sm90::THREADS;
    /// Dynamic shared memory: the ring (operands and scales), the 16-bit output staging
    /// (BLOCK_M × EPILOGUE_COLS), the ring's barriers and alignment slack.
    pub const SMEM_BYTES: u32 = STAGES * ((BLOCK_M + BLOCK_N) * BLOCK_K + SCALE_BYTES)
        + BLOCK_M * gemm_sm90::EPILOGUE_COLS * 2
        + 2 * STAGES * 8
        + 1024;
    const _: () = assert!(
        SMEM_BYTES <= gemm_sm90::SMEM_BYTES,
        "resident like the GEMM body: the stream-K buffers sized for its grids cover this one's"
    );
    const _: () =
        assert!(BLOCK_M * BLOCK_N <= gemm_sm90::PARTIAL_SLOT_FLOATS, "a partial tile fits the body's stream-K slot");

    /// Rows of D per tile of the wide entry (`gemm_fp8_blockscaled_bf16_wide_sm90`): one
    /// 64-row A box that both consumer warpgroups read, each against its own 128 columns of B.
    pub const WIDE_BLOCK_M: u32 = A_BOX_ROWS;
    /// Columns of D per wide tile: two 128-row blocks of B (and of B's scales), side by side.
    pub const WIDE_BLOCK_N: u32 = 2 * BLOCK_N;
    /// Ring depth of the wide entry: four slots of 40 KiB of operands (A 8 KiB, B 32 KiB), all
    /// that fits beside the output staging.
    pub const WIDE_STAGES: u32 = 4;
    /// Bytes of scales per wide slot: a box of A's scales (the map's, `BLOCK_M` rows from the
    /// tile's first; the consumers read the first 64) and one B scale box per 128 columns.
    pub const WIDE_SCALE_BYTES: u32 = (BLOCK_M + 2 * B_SCALE_BOX) * 4;
    /// Dynamic shared memory of the wide entry: its ring, the same output staging (two
    /// 64 × 128 blocks), the ring's barriers and alignment slack.
    pub const WIDE_SMEM_BYTES: u32 = WIDE_STAGES * ((WIDE_BLOCK_M + WIDE_BLOCK_N) * BLOCK_K + WIDE_SCALE_BYTES)
        + BLOCK_M * gemm_sm90::EPILOGUE_COLS * 2
        + 2 * WIDE_STAGES * 8
        + 1024;
    const _: () = assert!(WIDE_SMEM_BYTES <= gemm_sm90::SMEM_BYTES, "resident like the GEMM body, as above");
    const _: () = assert!(
        WIDE_BLOCK_M * WIDE_BLOCK_N <= gemm_sm90::PARTIAL_SLOT_FLOATS,
        "a wide partial tile fits the body's stream-K slot"
    );
}

/// The scales of the block-scaled FP8 GEMM besides their tensor maps (layouts of
/// `logic::blockscaled`): A's per-token scales through a 3-D map (rows, K blocks, batches) of
/// f32 with `gemm_fp8_sm90::BLOCK_M × 1 × 1` boxes, B's block scales through a 1-D map over
/// the whole flattened buffer (`scales[e · b_stride + (n / 128) · k_blocks + kb]`) with
/// `B_SCALE_BOX` boxes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockScaleParams {
    /// K blocks: `ceil(K / 128)`.
    pub k_blocks: u32,
    /// f32 between two experts' B scales in the flattened buffer: `ceil(N / 128) · k_blocks`
    /// for a grouped GEMM, 0 for a dense one. (A's batches are the map's third dimension.)
    pub b_stride: u32,
}

/// Which experts' rows a grouped (mixture-of-experts) GEMM computes, besides the dense
/// parameters (`logic::schedule::grouped` states the layouts and how untrusted device values
/// are clamped); the layout is the entry's.
///
/// Contiguous: A is `M_total × K` (every expert's rows back to back, segments padded to the tile
/// height), D `M_total × N`, B `[experts, N, K]`; `groups` holds one i32 expert index per row of
/// A (`-1` for padding). Masked: A is `[experts, capacity, K]`, D `[experts, capacity, N]`, B
/// `[experts, N, K]`; `groups` holds one i32 valid-row count per expert.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedParams {
    /// Experts: B's batch count.
    pub experts: u32,
    /// Masked: rows per expert in A and D; contiguous: 0.
    pub capacity: u32,
    /// Device address of the i32 row indices (contiguous) or valid-row counts (masked).
    pub groups: u64,
}

pub mod attention_sm90;

/// Parameters of the attention forward kernels besides the Q, K, V tensor maps.
///
/// Q, K, V and O are strided 4-D tensors (head_dim, heads, rows, sequences), head_dim
/// contiguous: the maps are 4-D over those dimensions with the caller's strides, O is addressed
/// with the strides below. At fixed length the sequence coordinate is the batch index and rows
/// count within a sequence; at variable length there is one sequence slice holding every row,
/// and the cumulative offsets say where each sequence starts. The work is `q_tiles · heads_q ·
/// batch` tiles of `BLOCK_M` queries of one head (`logic::attention::AttentionTiles` orders
/// them); the grid is 1-D: one CTA per tile, or a persistent grid whose CTAs claim tiles from
/// `tile_counters` (`logic::schedule::claims`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Device address of O (the element type of Q), element `(sequence, row, head, column)` at
    /// `sequence · o_batch_stride + row · o_row_stride + head · o_head_stride + column`.
    pub o: u64,
    /// Device address of the f32 log-sum-exp output (natural log; `-inf` for a row that sees no
    /// key), or 0: `[batch, heads_q, seq_q]`, or `[heads_q, total_q]` with variable lengths.
    pub lse: u64,
    /// Device address of `batch + 1` u32 cumulative query offsets, or 0 (fixed length:
    /// sequence `b` is the tensors' sequence slice `b`, from its row 0). The kernel clamps each sequence to the rows
    /// below `total_q` and to `seq_q` / `seq_k` queries / keys.
    pub cu_seqlens_q: u64,
    /// As `cu_seqlens_q`, for keys and values.
    pub cu_seqlens_k: u64,
    /// Device address of the two u32 claim counters of a persistent grid (`[next, finished]`,
    /// zero at the launch and left zero by it: `logic::schedule::claims`), this stream's alone;
    /// unused with one CTA per tile.
    pub tile_counters: u64,
    /// Elements of O between sequences (fixed length; unused at variable length).
    pub o_batch_stride: u64,
    /// Elements of O between rows; even (O is stored in 4-byte pairs).
    pub o_row_stride: u64,
    /// Elements of O between heads; even.
    pub o_head_stride: u64,
    /// Queries per sequence (fixed length) or the longest (variable length).
    pub seq_q: u32,
    /// Keys per sequence (fixed length).
    pub seq_k: u32,
    /// Rows of Q and O (all sequences; the LSE row length of a variable-length batch).
    pub total_q: u32,
    /// Query heads.
    pub heads_q: u32,
    /// Query heads per key/value head (GQA/MQA group).
    pub group: u32,
    /// Softmax scale times log2(e) (> 0).
    pub scale_log2: f32,
    /// 1: causal mask aligned to the bottom right (query `i` sees keys `j ≤ i + seq_k − seq_q`).
    pub causal: u32,
    /// Query tiles of `BLOCK_M` rows per sequence, `⌈seq_q / BLOCK_M⌉`.
    pub q_tiles: u32,
    /// Key/value heads (`heads_q / group`).
    pub heads_kv: u32,
    /// Sequences.
    pub batch: u32,
    /// (Key/value head, sequence) pairs per band of the tile order
    /// (`logic::attention::AttentionTiles`).
    pub band: u32,
    /// Zero: makes the struct's tail padding explicit (the PTX parameter's size is checked).
    pub reserved: u32,
}

/// What the persistent-scheduler test kernel records per tile.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TileVisit {
    /// How many times the tile was processed (must end at exactly 1).
    pub count: u32,
    /// Block index of the last worker that processed it.
    pub worker: u32,
    /// Iteration of that worker's loop in which it did.
    pub iteration: u32,
    /// SM that worker ran on (diagnostics).
    pub sm: u32,
}

/// A kernel entry of warpforge's modules: its name, typed by its parameter list `P` (a tuple, in
/// declaration order, of `#[repr(C)]` values and the device-address markers [`In`] and [`Out`]).
///
/// The host launches an entry only with arguments of exactly that list (`warpforge_host`'s typed
/// launch), and checks at load time that the PTX entry declares as many parameters of the same
/// sizes: a facade cannot push parameters in the wrong order or to the wrong kernel.
pub struct Entry<P> {
    name: &'static str,
    params: core::marker::PhantomData<fn(P)>,
}

impl<P> Entry<P> {
    /// The entry called `name` in the PTX, taking `P`.
    pub const fn new(name: &'static str) -> Self {
        Entry { name, params: core::marker::PhantomData }
    }

    /// Its name in the PTX.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<P> Clone for Entry<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Entry<P> {}

impl<P> core::fmt::Debug for Entry<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

/// A parameter holding the device address of a buffer of `E` the kernel only reads (`*const E`).
pub struct In<E>(core::marker::PhantomData<E>);
/// A parameter holding the device address of a buffer of `E` the kernel writes (`*mut E`).
pub struct Out<E>(core::marker::PhantomData<E>);

/// The 16-bit float element types as parameter-list markers (the host maps them to its own
/// `half` types; the device's are `warpforge_dsl::num::{Bf16, F16}`).
pub mod elements {
    /// bfloat16.
    pub enum Bf16 {}
    /// IEEE binary16.
    pub enum F16 {}
}

/// Parameter lists of warpforge's kernels, one per signature.
pub mod signatures {
    use super::{
        AttentionDecodeParams, AttentionParams, BlockScaleParams, DecodeOperands, DecodeTensor, GemmParams,
        GroupedParams, In, Out, PackParams, SkinnyOperands, TensorMap, TilePlan,
    };

    /// `saxpy_*(n, a, x, y)` over elements `E`.
    pub type Saxpy<E> = (u64, f32, In<E>, Out<E>);
    /// `silu_mul_*(m, intermediate, h, out)` over elements `E`.
    pub type SiluMul<E> = (u64, u64, In<E>, Out<E>);
    /// `vector_add_f32(n, a, b, out)`.
    pub type VectorAdd = (u64, In<f32>, In<f32>, Out<f32>);
    /// `block_sum_f32(n, x, partials)`.
    pub type BlockSum = (u64, In<f32>, Out<f32>);
    /// `persistent_static_visit(tiles_m, tiles_n, visits)`: `visits` holds one [`super::TileVisit`]
    /// (four u32) per tile.
    pub type PersistentVisit = (u32, u32, Out<u32>);
    /// `pack_b16(params)`.
    pub type Pack = (PackParams,);
    /// Every sm_90 GEMM-body entry (plain and SwiGLU): `(a_map, b_map, d_map, params, plan)`.
    pub type GemmSm90 = (TensorMap, TensorMap, TensorMap, GemmParams, TilePlan);
    /// The block-scaled FP8 GEMM (`gemm_fp8_blockscaled_*_sm90`): `(a_map, b_map, d_map,
    /// a_scale_map, b_scale_map, params, plan, scales)`.
    pub type GemmFp8Sm90 =
        (TensorMap, TensorMap, TensorMap, TensorMap, TensorMap, GemmParams, TilePlan, BlockScaleParams);
    /// The decode GEMM on the CUDA cores (`gemm_skinny_*`): `(params, operands)`.
    pub type GemmSkinny = (GemmParams, SkinnyOperands);
    /// The `mma.sync` GEMMs (`gemm_decode_*`, `gemm_gather_*`): `(params, operands)`.
    pub type GemmDecode = (GemmParams, DecodeOperands);
    /// `quant_group_e4m3_*` and `quant_block_e4m3_*`: `(rows, cols, pow2, x, codes, scales)`
    /// over input elements `E`.
    pub type QuantScaled<E> = (u64, u64, u32, In<E>, Out<u8>, Out<f32>);
    /// `amax_*(n, x, amax)`: the amax as f32 bits in one `u32`.
    pub type Amax<E> = (u64, In<E>, Out<u32>);
    /// `quant_tensor_*(n, x, amax, codes, scale)`.
    pub type QuantTensor<E> = (u64, In<E>, In<u32>, Out<u8>, Out<f32>);
    /// `quant_tensor_static_*(n, x, scale, codes)`: the caller's scale, one pass.
    pub type QuantTensorStatic<E> = (u64, In<E>, f32, Out<u8>);
    /// `mxfp8_encode_*(n, x, codes, scales)`.
    pub type Mxfp8Encode<E> = (u64, In<E>, Out<u8>, Out<u8>);
    /// `mxfp8_decode_*(n, codes, scales, out)` to output elements `O`.
    pub type Mxfp8Decode<O> = (u64, In<u8>, In<u8>, Out<O>);
    /// `nvfp4_encode_*(n, x, amax, codes, scales, global_scale)`.
    pub type Nvfp4Encode<E> = (u64, In<E>, In<u32>, Out<u8>, Out<u8>, Out<f32>);
    /// `nvfp4_encode_static_*(n, x, global_scale, codes, scales)`: the caller's global scale, one
    /// pass.
    pub type Nvfp4EncodeStatic<E> = (u64, In<E>, f32, Out<u8>, Out<u8>);
    /// `nvfp4_decode_*(n, codes, scales, global_scale, out)` to output elements `O`.
    pub type Nvfp4Decode<O> = (u64, In<u8>, In<u8>, In<f32>, Out<O>);
    /// The grouped 16-bit GEMMs (`gemm_grouped_*_sm90`): the GEMM body's parameters and the
    /// experts' indices or counts.
    pub type GemmGroupedSm90 = (TensorMap, TensorMap, TensorMap, GemmParams, TilePlan, GroupedParams);
    /// The grouped block-scaled FP8 GEMMs (`gemm_fp8_grouped_*_sm90`).
    pub type GemmFp8GroupedSm90 =
        (TensorMap, TensorMap, TensorMap, TensorMap, TensorMap, GemmParams, TilePlan, BlockScaleParams, GroupedParams);
    /// The attention forward entries (`attention_*_sm90`): `(q_map, k_map, v_map, params)`.
    pub type AttentionSm90 = (TensorMap, TensorMap, TensorMap, AttentionParams);
    /// The decode attention entries (`attention_decode_*_sm90`): `(q, k, v, params)`.
    pub type AttentionDecode = (DecodeTensor, DecodeTensor, DecodeTensor, AttentionDecodeParams);
    /// Their combine step (`attention_combine_*_sm90`): `(o, params)`.
    pub type AttentionCombine = (DecodeTensor, AttentionDecodeParams);
}

/// The kernels of warpforge's own PTX modules, shared by the kernel crate (through its
/// `#[kernel]` function names) and the host launchers.
pub mod entries {
    use super::Entry;
    use super::elements::{Bf16, F16};
    use super::signatures::*;

    /// `y = a·x + y`, f32.
    pub const SAXPY_F32: Entry<Saxpy<f32>> = Entry::new("saxpy_f32");
    /// `y = a·x + y`, bf16 storage, f32 arithmetic.
    pub const SAXPY_BF16: Entry<Saxpy<Bf16>> = Entry::new("saxpy_bf16");
    /// `y = a·x + y`, f16 storage, f32 arithmetic.
    pub const SAXPY_F16: Entry<Saxpy<F16>> = Entry::new("saxpy_f16");
    /// `out = silu(gate) ⊙ up` over an `m × 2I` row-major `[gate | up]`, bf16 storage, f32
    /// arithmetic.
    pub const SILU_MUL_BF16: Entry<SiluMul<Bf16>> = Entry::new("silu_mul_bf16");
    /// `out = silu(gate) ⊙ up`, f16 storage, f32 arithmetic.
    pub const SILU_MUL_F16: Entry<SiluMul<F16>> = Entry::new("silu_mul_f16");
    /// `out = a + b`, f32.
    pub const VECTOR_ADD_F32: Entry<VectorAdd> = Entry::new("vector_add_f32");
    /// Per-block sums of an f32 vector (warp shuffles + shared memory).
    pub const BLOCK_SUM_F32: Entry<BlockSum> = Entry::new("block_sum_f32");
    /// Persistent loop over a tile grid with the static scheduler, recording each visit.
    pub const PERSISTENT_STATIC_VISIT: Entry<PersistentVisit> = Entry::new("persistent_static_visit");
    /// Strided 16-bit copy into a GEMM operand layout.
    pub const PACK_B16: Entry<Pack> = Entry::new("pack_b16");
    /// GEMM entries: `gemm_<input>_<output>_ws_persistent_sm90`.
    pub const GEMM_BF16_BF16: Entry<GemmSm90> = Entry::new("gemm_bf16_bf16_ws_persistent_sm90");
    /// bf16 inputs, f16 output.
    pub const GEMM_BF16_F16: Entry<GemmSm90> = Entry::new("gemm_bf16_f16_ws_persistent_sm90");
    /// bf16 inputs, f32 output.
    pub const GEMM_BF16_F32: Entry<GemmSm90> = Entry::new("gemm_bf16_f32_ws_persistent_sm90");
    /// f16 inputs, bf16 output.
    pub const GEMM_F16_BF16: Entry<GemmSm90> = Entry::new("gemm_f16_bf16_ws_persistent_sm90");
    /// f16 inputs, f16 output.
    pub const GEMM_F16_F16: Entry<GemmSm90> = Entry::new("gemm_f16_f16_ws_persistent_sm90");
    /// f16 inputs, f32 output.
    pub const GEMM_F16_F32: Entry<GemmSm90> = Entry::new("gemm_f16_f32_ws_persistent_sm90");
    /// bf16 → bf16 with ping-pong consumers (64 × 256 tiles, one warpgroup each).
    pub const GEMM_BF16_BF16_PINGPONG: Entry<GemmSm90> = Entry::new("gemm_bf16_bf16_pingpong_sm90");
    /// f16 → f16 with ping-pong consumers.
    pub const GEMM_F16_F16_PINGPONG: Entry<GemmSm90> = Entry::new("gemm_f16_f16_pingpong_sm90");
    /// bf16 → bf16 with 128 × 128 tiles (cooperative consumers, six-stage ring).
    pub const GEMM_BF16_BF16_NARROW: Entry<GemmSm90> = Entry::new("gemm_bf16_bf16_narrow_sm90");
    /// f16 → f16 with 128 × 128 tiles.
    pub const GEMM_F16_F16_NARROW: Entry<GemmSm90> = Entry::new("gemm_f16_f16_narrow_sm90");
    /// bf16 → bf16, 128 × 256 tiles in 2 × 1 clusters sharing each B slice by multicast.
    pub const GEMM_BF16_BF16_CLUSTER: Entry<GemmSm90> = Entry::new("gemm_bf16_bf16_cluster_sm90");
    /// f16 → f16, 128 × 256 tiles in 2 × 1 clusters.
    pub const GEMM_F16_F16_CLUSTER: Entry<GemmSm90> = Entry::new("gemm_f16_f16_cluster_sm90");
    /// Fused gate-up projection + SwiGLU, bf16 in and out (the GEMM body with the SwiGLU
    /// epilogue over an interleaved gate-up weight).
    pub const GEMM_SWIGLU_BF16: Entry<GemmSm90> = Entry::new("gemm_swiglu_bf16_sm90");
    /// Fused gate-up projection + SwiGLU, f16 in and out.
    pub const GEMM_SWIGLU_F16: Entry<GemmSm90> = Entry::new("gemm_swiglu_f16_sm90");
    /// Fused gate-up + SwiGLU, bf16, ping-pong consumers (64 × 256 gate-up tiles).
    pub const GEMM_SWIGLU_BF16_PINGPONG: Entry<GemmSm90> = Entry::new("gemm_swiglu_bf16_pingpong_sm90");
    /// Fused gate-up + SwiGLU, f16, ping-pong consumers.
    pub const GEMM_SWIGLU_F16_PINGPONG: Entry<GemmSm90> = Entry::new("gemm_swiglu_f16_pingpong_sm90");
    /// Fused gate-up + SwiGLU, bf16, narrow 128 × 128 gate-up tiles (64 outputs per tile row).
    pub const GEMM_SWIGLU_BF16_NARROW: Entry<GemmSm90> = Entry::new("gemm_swiglu_bf16_narrow_sm90");
    /// Fused gate-up + SwiGLU, f16, narrow tiles.
    pub const GEMM_SWIGLU_F16_NARROW: Entry<GemmSm90> = Entry::new("gemm_swiglu_f16_narrow_sm90");
    /// Fused gate-up + SwiGLU quantised for an FP8 down projection: bf16 in, e4m3 codes and one
    /// f32 scale per row and 128 outputs (the per-token layout), cooperative 128 × 256 tiles.
    pub const GEMM_SWIGLU_E4M3_BF16: Entry<GemmSm90> = Entry::new("gemm_swiglu_e4m3_bf16_sm90");
    /// As [`GEMM_SWIGLU_E4M3_BF16`], the scales rounded up to powers of two (UE8M0).
    pub const GEMM_SWIGLU_UE8M0_BF16: Entry<GemmSm90> = Entry::new("gemm_swiglu_ue8m0_bf16_sm90");
    /// Block-scaled FP8 GEMM: e4m3 A (per-token 1 × 128 scales) times e4m3 Bᵀ (128 × 128 block
    /// scales), promoted into f32 every 128 K, bf16 output.
    pub const GEMM_FP8_BLOCKSCALED_BF16: Entry<GemmFp8Sm90> = Entry::new("gemm_fp8_blockscaled_bf16_sm90");
    /// Block-scaled FP8 GEMM in 2 × 1 clusters: vertically adjacent 128 × 128 tiles sharing each
    /// B slot by multicast (B's box is half a tile), data-parallel plans over pairs of tile rows.
    pub const GEMM_FP8_BLOCKSCALED_BF16_CLUSTER: Entry<GemmFp8Sm90> =
        Entry::new("gemm_fp8_blockscaled_bf16_cluster_sm90");
    /// Block-scaled FP8 GEMM on 64 × 256 tiles: one A box of 64 rows, two 128-column blocks of
    /// B side by side, one per consumer warpgroup (the decode regime's tile: a quarter of the
    /// slot is A, against half on 128 × 128 tiles at M ≤ 64).
    pub const GEMM_FP8_BLOCKSCALED_BF16_WIDE: Entry<GemmFp8Sm90> = Entry::new("gemm_fp8_blockscaled_bf16_wide_sm90");
    /// Grouped (mixture-of-experts) GEMM, bf16 in and out, contiguous layout (`GroupedParams`):
    /// the 16-bit body on 128 × 256 tiles, tiles without rows skipped.
    pub const GEMM_GROUPED_CONTIGUOUS_BF16: Entry<GemmGroupedSm90> = Entry::new("gemm_grouped_contiguous_bf16_sm90");
    /// Grouped bf16 GEMM, masked layout, for a capacity of at most one tile row per expert
    /// (decode steps): every capacity tile round robin, those without rows skipped.
    pub const GEMM_GROUPED_MASKED_BF16: Entry<GemmGroupedSm90> = Entry::new("gemm_grouped_masked_bf16_sm90");
    /// Grouped bf16 GEMM, masked layout, for a capacity of more than one tile row per expert:
    /// the plan balanced on the device over the tiles with rows (`MaskedBalanced`: the last
    /// partial wave streamed over K with more tile rows than experts), with the stream's
    /// stream-K buffers for the grid.
    pub const GEMM_GROUPED_MASKED_BALANCED_BF16: Entry<GemmGroupedSm90> =
        Entry::new("gemm_grouped_masked_balanced_bf16_sm90");
    /// Grouped block-scaled FP8 GEMM, bf16 output, contiguous layout: the FP8 body on 128 × 128
    /// tiles.
    pub const GEMM_FP8_GROUPED_CONTIGUOUS_BF16: Entry<GemmFp8GroupedSm90> =
        Entry::new("gemm_fp8_grouped_contiguous_bf16_sm90");
    /// Grouped block-scaled FP8 GEMM, masked layout.
    pub const GEMM_FP8_GROUPED_MASKED_BF16: Entry<GemmFp8GroupedSm90> = Entry::new("gemm_fp8_grouped_masked_bf16_sm90");
    /// Grouped block-scaled FP8 GEMM, masked layout, on the FP8 body's wide 64 × 256 tiles (a
    /// capacity of at most 64 rows per expert).
    pub const GEMM_FP8_GROUPED_MASKED_BF16_WIDE: Entry<GemmFp8GroupedSm90> =
        Entry::new("gemm_fp8_grouped_masked_bf16_wide_sm90");
    /// Decode GEMM (≤ 8 rows) without tensor cores, bf16 inputs, bf16 output.
    pub const GEMM_SKINNY_BF16_BF16: Entry<GemmSkinny> = Entry::new("gemm_skinny_bf16_bf16_sm90");
    /// bf16 inputs, f16 output.
    pub const GEMM_SKINNY_BF16_F16: Entry<GemmSkinny> = Entry::new("gemm_skinny_bf16_f16_sm90");
    /// bf16 inputs, f32 output.
    pub const GEMM_SKINNY_BF16_F32: Entry<GemmSkinny> = Entry::new("gemm_skinny_bf16_f32_sm90");
    /// f16 inputs, bf16 output.
    pub const GEMM_SKINNY_F16_BF16: Entry<GemmSkinny> = Entry::new("gemm_skinny_f16_bf16_sm90");
    /// f16 inputs, f16 output.
    pub const GEMM_SKINNY_F16_F16: Entry<GemmSkinny> = Entry::new("gemm_skinny_f16_f16_sm90");
    /// f16 inputs, f32 output.
    pub const GEMM_SKINNY_F16_F32: Entry<GemmSkinny> = Entry::new("gemm_skinny_f16_f32_sm90");
    /// Decode GEMM (≤ 32 rows) on `mma.sync` with the operands swapped, bf16 inputs, bf16 output.
    pub const GEMM_DECODE_BF16_BF16: Entry<GemmDecode> = Entry::new("gemm_decode_bf16_bf16_sm90");
    /// bf16 inputs, f16 output.
    pub const GEMM_DECODE_BF16_F16: Entry<GemmDecode> = Entry::new("gemm_decode_bf16_f16_sm90");
    /// bf16 inputs, f32 output.
    pub const GEMM_DECODE_BF16_F32: Entry<GemmDecode> = Entry::new("gemm_decode_bf16_f32_sm90");
    /// f16 inputs, bf16 output.
    pub const GEMM_DECODE_F16_BF16: Entry<GemmDecode> = Entry::new("gemm_decode_f16_bf16_sm90");
    /// f16 inputs, f16 output.
    pub const GEMM_DECODE_F16_F16: Entry<GemmDecode> = Entry::new("gemm_decode_f16_f16_sm90");
    /// f16 inputs, f32 output.
    pub const GEMM_DECODE_F16_F32: Entry<GemmDecode> = Entry::new("gemm_decode_f16_f32_sm90");
    /// Small GEMM on `mma.sync` reading element by element (any layout, pitch or alignment),
    /// bf16 inputs, bf16 output.
    pub const GEMM_GATHER_BF16_BF16: Entry<GemmDecode> = Entry::new("gemm_gather_bf16_bf16_sm90");
    /// bf16 inputs, f16 output.
    pub const GEMM_GATHER_BF16_F16: Entry<GemmDecode> = Entry::new("gemm_gather_bf16_f16_sm90");
    /// bf16 inputs, f32 output.
    pub const GEMM_GATHER_BF16_F32: Entry<GemmDecode> = Entry::new("gemm_gather_bf16_f32_sm90");
    /// f16 inputs, bf16 output.
    pub const GEMM_GATHER_F16_BF16: Entry<GemmDecode> = Entry::new("gemm_gather_f16_bf16_sm90");
    /// f16 inputs, f16 output.
    pub const GEMM_GATHER_F16_F16: Entry<GemmDecode> = Entry::new("gemm_gather_f16_f16_sm90");
    /// f16 inputs, f32 output.
    pub const GEMM_GATHER_F16_F32: Entry<GemmDecode> = Entry::new("gemm_gather_f16_f32_sm90");
    /// Per-token 1 × 128 e4m3 quantisation of a bf16 activation, MN-major f32 scales.
    pub const QUANT_GROUP_E4M3_BF16: Entry<QuantScaled<Bf16>> = Entry::new("quant_group_e4m3_bf16");
    /// Per-token 1 × 128 e4m3 quantisation of an f16 activation.
    pub const QUANT_GROUP_E4M3_F16: Entry<QuantScaled<F16>> = Entry::new("quant_group_e4m3_f16");
    /// 128 × 128-block e4m3 quantisation of a bf16 weight, row-major f32 block scales.
    pub const QUANT_BLOCK_E4M3_BF16: Entry<QuantScaled<Bf16>> = Entry::new("quant_block_e4m3_bf16");
    /// 128 × 128-block e4m3 quantisation of an f16 weight.
    pub const QUANT_BLOCK_E4M3_F16: Entry<QuantScaled<F16>> = Entry::new("quant_block_e4m3_f16");
    /// Largest finite magnitude of a bf16 tensor, folded into a device word.
    pub const AMAX_BF16: Entry<Amax<Bf16>> = Entry::new("amax_bf16");
    /// Largest finite magnitude of an f16 tensor.
    pub const AMAX_F16: Entry<Amax<F16>> = Entry::new("amax_f16");
    /// Per-tensor e4m3 quantisation of bf16, scale from the device-side amax.
    pub const QUANT_TENSOR_E4M3_BF16: Entry<QuantTensor<Bf16>> = Entry::new("quant_tensor_e4m3_bf16");
    /// Per-tensor e4m3 quantisation of f16.
    pub const QUANT_TENSOR_E4M3_F16: Entry<QuantTensor<F16>> = Entry::new("quant_tensor_e4m3_f16");
    /// Per-tensor e5m2 quantisation of bf16.
    pub const QUANT_TENSOR_E5M2_BF16: Entry<QuantTensor<Bf16>> = Entry::new("quant_tensor_e5m2_bf16");
    /// Per-tensor e5m2 quantisation of f16.
    pub const QUANT_TENSOR_E5M2_F16: Entry<QuantTensor<F16>> = Entry::new("quant_tensor_e5m2_f16");
    /// Per-tensor e4m3 quantisation of bf16 with the caller's scale.
    pub const QUANT_TENSOR_STATIC_E4M3_BF16: Entry<QuantTensorStatic<Bf16>> =
        Entry::new("quant_tensor_static_e4m3_bf16");
    /// Per-tensor e4m3 quantisation of f16 with the caller's scale.
    pub const QUANT_TENSOR_STATIC_E4M3_F16: Entry<QuantTensorStatic<F16>> = Entry::new("quant_tensor_static_e4m3_f16");
    /// Per-tensor e5m2 quantisation of bf16 with the caller's scale.
    pub const QUANT_TENSOR_STATIC_E5M2_BF16: Entry<QuantTensorStatic<Bf16>> =
        Entry::new("quant_tensor_static_e5m2_bf16");
    /// Per-tensor e5m2 quantisation of f16 with the caller's scale.
    pub const QUANT_TENSOR_STATIC_E5M2_F16: Entry<QuantTensorStatic<F16>> = Entry::new("quant_tensor_static_e5m2_f16");
    /// MXFP8 encode (blocks of 32, UE8M0 scales), bf16 input.
    pub const MXFP8_ENCODE_BF16: Entry<Mxfp8Encode<Bf16>> = Entry::new("mxfp8_encode_bf16");
    /// MXFP8 encode, f16 input.
    pub const MXFP8_ENCODE_F16: Entry<Mxfp8Encode<F16>> = Entry::new("mxfp8_encode_f16");
    /// MXFP8 decode to bf16.
    pub const MXFP8_DECODE_BF16: Entry<Mxfp8Decode<Bf16>> = Entry::new("mxfp8_decode_bf16");
    /// MXFP8 decode to f32.
    pub const MXFP8_DECODE_F32: Entry<Mxfp8Decode<f32>> = Entry::new("mxfp8_decode_f32");
    /// NVFP4 encode (e2m1 pairs, e4m3 scales per 16, f32 global scale), bf16 input.
    pub const NVFP4_ENCODE_BF16: Entry<Nvfp4Encode<Bf16>> = Entry::new("nvfp4_encode_bf16");
    /// NVFP4 encode, f16 input.
    pub const NVFP4_ENCODE_F16: Entry<Nvfp4Encode<F16>> = Entry::new("nvfp4_encode_f16");
    /// NVFP4 encode, bf16 input, the caller's global scale.
    pub const NVFP4_ENCODE_STATIC_BF16: Entry<Nvfp4EncodeStatic<Bf16>> = Entry::new("nvfp4_encode_static_bf16");
    /// NVFP4 encode, f16 input, the caller's global scale.
    pub const NVFP4_ENCODE_STATIC_F16: Entry<Nvfp4EncodeStatic<F16>> = Entry::new("nvfp4_encode_static_f16");
    /// NVFP4 decode to bf16.
    pub const NVFP4_DECODE_BF16: Entry<Nvfp4Decode<Bf16>> = Entry::new("nvfp4_decode_bf16");
    /// NVFP4 decode to f32.
    pub const NVFP4_DECODE_F32: Entry<Nvfp4Decode<f32>> = Entry::new("nvfp4_decode_f32");
    /// Attention forward, bf16 Q/K/V/O, head dimension 64.
    pub const ATTENTION_BF16_D64: Entry<AttentionSm90> = Entry::new("attention_bf16_d64_sm90");
    /// Attention forward, bf16, head dimension 64 (176-key blocks: problems without a causal mask).
    pub const ATTENTION_BF16_D64_K176: Entry<AttentionSm90> = Entry::new("attention_bf16_d64_k176_sm90");
    /// Attention forward, bf16, head dimension 128 (128-key blocks: causal problems).
    pub const ATTENTION_BF16_D128: Entry<AttentionSm90> = Entry::new("attention_bf16_d128_sm90");
    /// Attention forward, bf16, head dimension 128 (176-key blocks: problems without a causal mask).
    pub const ATTENTION_BF16_D128_K176: Entry<AttentionSm90> = Entry::new("attention_bf16_d128_k176_sm90");
    /// Attention forward, f16, head dimension 64.
    pub const ATTENTION_F16_D64: Entry<AttentionSm90> = Entry::new("attention_f16_d64_sm90");
    /// Attention forward, f16, head dimension 64 (176-key blocks: problems without a causal mask).
    pub const ATTENTION_F16_D64_K176: Entry<AttentionSm90> = Entry::new("attention_f16_d64_k176_sm90");
    /// Attention forward, f16, head dimension 128 (128-key blocks: causal problems).
    pub const ATTENTION_F16_D128: Entry<AttentionSm90> = Entry::new("attention_f16_d128_sm90");
    /// Attention forward, f16, head dimension 128 (176-key blocks: problems without a causal mask).
    pub const ATTENTION_F16_D128_K176: Entry<AttentionSm90> = Entry::new("attention_f16_d128_k176_sm90");
    /// Attention forward, bf16, head dimension 256 (80-key blocks).
    pub const ATTENTION_BF16_D256: Entry<AttentionSm90> = Entry::new("attention_bf16_d256_sm90");
    /// Attention forward, bf16, head dimension 128, causal problems (`attention_sm90::D128_CAUSAL`).
    pub const ATTENTION_BF16_D128_CAUSAL: Entry<AttentionSm90> = Entry::new("attention_bf16_d128_causal_sm90");
    /// Attention forward, f16, head dimension 256 (80-key blocks).
    pub const ATTENTION_F16_D256: Entry<AttentionSm90> = Entry::new("attention_f16_d256_sm90");
    /// Attention forward, f16, head dimension 128, causal problems (`attention_sm90::D128_CAUSAL`).
    pub const ATTENTION_F16_D128_CAUSAL: Entry<AttentionSm90> = Entry::new("attention_f16_d128_causal_sm90");
    /// Attention forward, bf16, head dimension 128, causal problems of fewer than
    /// `attention_sm90::LONG_KEYS_FROM` keys (`attention_sm90::D128_CAUSAL_SHORT`).
    pub const ATTENTION_BF16_D128_CAUSAL_SHORT: Entry<AttentionSm90> =
        Entry::new("attention_bf16_d128_causal_short_sm90");
    /// Attention forward, f16, head dimension 128, short causal problems (`attention_sm90::D128_CAUSAL_SHORT`).
    pub const ATTENTION_F16_D128_CAUSAL_SHORT: Entry<AttentionSm90> =
        Entry::new("attention_f16_d128_causal_short_sm90");
    /// Decode attention (`abi::attention_decode`), bf16, head dimension 64.
    pub const ATTENTION_DECODE_BF16_D64: Entry<AttentionDecode> = Entry::new("attention_decode_bf16_d64_sm90");
    /// Decode attention, bf16, head dimension 128.
    pub const ATTENTION_DECODE_BF16_D128: Entry<AttentionDecode> = Entry::new("attention_decode_bf16_d128_sm90");
    /// Decode attention, f16, head dimension 64.
    pub const ATTENTION_DECODE_F16_D64: Entry<AttentionDecode> = Entry::new("attention_decode_f16_d64_sm90");
    /// Decode attention, f16, head dimension 128.
    pub const ATTENTION_DECODE_F16_D128: Entry<AttentionDecode> = Entry::new("attention_decode_f16_d128_sm90");
    /// The decode path's combine of the splits, bf16 O, head dimension 64.
    pub const ATTENTION_COMBINE_BF16_D64: Entry<AttentionCombine> = Entry::new("attention_combine_bf16_d64_sm90");
    /// Combine, bf16, head dimension 128.
    pub const ATTENTION_COMBINE_BF16_D128: Entry<AttentionCombine> = Entry::new("attention_combine_bf16_d128_sm90");
    /// Combine, f16, head dimension 64.
    pub const ATTENTION_COMBINE_F16_D64: Entry<AttentionCombine> = Entry::new("attention_combine_f16_d64_sm90");
    /// Combine, f16, head dimension 128.
    pub const ATTENTION_COMBINE_F16_D128: Entry<AttentionCombine> = Entry::new("attention_combine_f16_d128_sm90");
}

/// Element-wise function applied in the GEMM epilogue, after `alpha·acc + beta·C + bias`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// Identity.
    #[default]
    None = 0,
    /// `max(x, 0)`.
    Relu = 1,
    /// `x · sigmoid(x)`.
    Silu = 2,
    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    GeluTanh = 3,
}

impl Activation {
    /// The activation with discriminant `code` (unknown codes are the identity).
    pub const fn from_code(code: u32) -> Self {
        match code {
            1 => Activation::Relu,
            2 => Activation::Silu,
            3 => Activation::GeluTanh,
            _ => Activation::None,
        }
    }
}

/// The tile schedule of one GEMM launch, planned once by the host; the kernel's roles only ask
/// it for units (`dsl::parts::schedule::GroupedStreamK`) and decide nothing. The GEMM entries
/// take it as their last parameter (ping-pong and cluster entries run data-parallel plans only).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TilePlan {
    /// Order of the tiles: the tile rows of every batch stacked along M (rows of tile pairs with
    /// 2 × 1 clusters) × tile columns, in bands along M.
    pub raster: Rasterization,
    /// Which worker (CTA, or cluster) runs which K slices of which tile: data-parallel,
    /// stream-K or the hybrid, over exactly the launch's workers.
    pub units: StreamKScheduler,
    /// Rasterisation rows per batch.
    pub raster_rows: u32,
}

/// The operands of the decode GEMM without tensor cores (`gemm_skinny_*_sm90`): A (M × K,
/// M ≤ 8) and B (N × K) per batch, K contiguous, read by 16-byte vectors (so K, the pitches and
/// the batch strides are multiples of 8 elements and both bases 16-byte aligned).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkinnyOperands {
    /// Device address of A.
    pub a: u64,
    /// Device address of B.
    pub b: u64,
    /// Row pitch of A, elements.
    pub lda: u64,
    /// Row pitch of B, elements.
    pub ldb: u64,
    /// Batch stride of A, elements.
    pub stride_a: u64,
    /// Batch stride of B, elements.
    pub stride_b: u64,
    /// The reduction length.
    pub k: u32,
    /// Batches.
    pub batch: u32,
}

/// The operands of the `mma.sync` GEMMs (`gemm_decode_*_sm90`, `gemm_gather_*_sm90`): A viewed
/// as M × K and B as N × K per batch, element (row, k) of each at `row·row_step + k·k_step`
/// (row-major A: `(lda, 1)`, column-major A: `(1, lda)`; B stored N × K: `(ldb, 1)`, K × N:
/// `(1, ldb)`). The decode entries read 16-byte vectors and need `k_step = 1`, K, the row steps
/// and the batch strides multiples of 8 elements and both bases 16-byte aligned; the gather
/// entries read element by element and take any of them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOperands {
    /// Device address of A.
    pub a: u64,
    /// Device address of B.
    pub b: u64,
    /// Elements between rows of A's M × K view.
    pub a_row_step: u64,
    /// Elements between consecutive K of A's view.
    pub a_k_step: u64,
    /// Elements between rows of B's N × K view.
    pub b_row_step: u64,
    /// Elements between consecutive K of B's view.
    pub b_k_step: u64,
    /// Batch stride of A, elements.
    pub stride_a: u64,
    /// Batch stride of B, elements.
    pub stride_b: u64,
    /// The reduction length.
    pub k: u32,
    /// Batches.
    pub batch: u32,
    /// Column groups per block of the gather kernels (1, 2, 4 or 8): a block covers
    /// `16 · col_groups` columns of D, its warps split into that many groups of 16 columns that
    /// each split K (`gemm_gather_*`; the decode kernels take 1).
    pub col_groups: u32,
    /// Padding (0).
    pub _pad: u32,
}

/// Everything the GEMM kernels need besides the two operand tensor maps:
/// `D = act(alpha·A·Bᵀ + beta·C + bias)` per batch, D and C row-major (M × N).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmParams {
    /// Rows of D.
    pub m: u32,
    /// Columns of D.
    pub n: u32,
    /// Device address of D.
    pub d: u64,
    /// Device address of C, or 0 when `beta == 0`.
    pub c: u64,
    /// Device address of an f32 bias of length N, or 0.
    pub bias: u64,
    /// Row stride of D, elements.
    pub ldd: u64,
    /// Row stride of C, elements.
    pub ldc: u64,
    /// Batch stride of D, elements.
    pub stride_d: u64,
    /// Batch stride of C, elements.
    pub stride_c: u64,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of C.
    pub beta: f32,
    /// [`Activation`] code.
    pub activation: u32,
    /// 1 when D is written through its tensor map (16-bit output, 16-byte pitch), 0 for
    /// direct stores.
    pub d_tma: u32,
    /// Device address of the stream-K partial-tile slots: one per CTA of the grid, each
    /// [`gemm_sm90::PARTIAL_SLOT_FLOATS`] f32, 16-byte aligned (contents need no initialisation);
    /// 0 when the plan has no stream-K units.
    pub workspace: u64,
    /// Device address of the stream-K flags: [`gemm_sm90::FLAGS_PER_CTA`] u32 per CTA of the
    /// grid, zero at launch (the kernel leaves them zero again); 0 when the plan has no stream-K
    /// units.
    pub flags: u64,
}

const _: () = assert!(core::mem::size_of::<AttentionParams>() == 8 * 8 + 12 * 4, "AttentionParams has no padding");
const _: () = assert!(
    core::mem::size_of::<GemmParams>() <= 128
        && core::mem::size_of::<TilePlan>() <= 128
        && core::mem::size_of::<AttentionParams>() <= 128,
    "the runtime passes kernel parameters of at most 128 bytes"
);

/// Parameters of the strided copy used to bring GEMM operands into the K-major, 16-byte-pitched
/// layout TMA reads: `dst[b][r][c] = src[b·src_batch + r·src_row + c·src_col]`, 2-byte elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackParams {
    /// Rows of the destination.
    pub rows: u64,
    /// Columns of the destination.
    pub cols: u64,
    /// Batches.
    pub batch: u64,
    /// Source address.
    pub src: u64,
    /// Source stride between destination rows, elements.
    pub src_row: u64,
    /// Source stride between destination columns, elements.
    pub src_col: u64,
    /// Source stride between batches, elements.
    pub src_batch: u64,
    /// Destination address.
    pub dst: u64,
    /// Destination row pitch, elements.
    pub dst_ld: u64,
    /// Destination batch stride, elements.
    pub dst_batch: u64,
}
