//! warpforge's block-scaled FP8 GEMM against cuBLASLt's FP8 GEMMs, side by side in one process
//! on the same inputs.
//!
//! `D (M×N, bf16) = A (M×K, e4m3, row-major) · B (N×K, e4m3, row-major)ᵀ`, f32 accumulation, on
//! the DeepSeek-V3/R1 dense projections (N, K) at M from 64 to 4096. Three sides:
//! - **ours**: `Warpforge::fp8_gemm`, A with 1 × 128 per-token-group f32 scales, B with 128 × 128
//!   block f32 scales (the layouts of `warpforge::logic::quant`);
//! - **blockwise**: `cublasLtMatmul` in its DeepSeek-style mode, the same codes and the same scale
//!   values, each scale buffer rewritten into the layout cuBLASLt reads (see [`LtGemm`]);
//! - **per-tensor**: the same matmul with one f32 scale per operand (a ceiling: no scale work);
//!   its result differs from the other two (other scales) and is checked against its own reference.
//!
//! In cuBLAS's column-major terms the row-major `D = A·Bᵀ` is `Dᵀ (N × M) = B · Aᵀ`: cuBLAS's
//! operand "A" is our B read transposed (TRANSA = T, K × N with ld K), its "B" is our A
//! (TRANSB = N, K × M with ld K), D is N × M with ld N — the TN form Hopper's FP8 GEMMs require.
//! So cuBLAS's A takes the 128 × 128 block scales (`BLK128x128_32F`) and its B the 128-element
//! vector scales (`VEC128_32F`).
//!
//! Inputs: random e4m3 codes (never zero, never NaN) and random power-of-two scales, in enough
//! rotating sets that L2 cannot hold them. Per shape: a warm-up, batches sized to ~1 ms, then
//! rounds of one batch per side with CUDA events, the order of the three sides changing every
//! round; the median batch of each is reported, and the SM clock read right after. After the
//! timed rounds every side runs once more on set 0 and is checked at sampled positions (random,
//! last row and column, corners) against a float64 product of the dequantised inputs (code ×
//! scale), with `tests/gpu_fp8_gemm.rs`'s tolerance; the `check` column is the worst |error| ÷
//! tolerance per side. Ours above 1 makes the bench fail (after every shape has run); cuBLASLt's is
//! only reported. A shape or mode cuBLASLt refuses prints its status and reads `n/a`.
//!
//! Columns: M N K; µs per call of ours, blockwise and per-tensor; our TFLOP/s and GB/s (A + B +
//! scales read, D written); blockwise ÷ ours and per-tensor ÷ ours as time ratios (≥ 1: ours
//! faster); the SM clock; the checks. Summary: geomean ratios for M ≤ 128 and M ≥ 2048.
//!
//! Run: `cargo bench --bench kernels -- gemm_fp8` (on a GPU machine: `.gpu/bench gemm_fp8`).
//! Optional arguments: `set=models` (other models' projections at ragged M, 1 to 6000, instead
//! of DeepSeek's table), `set=holdout` (projections picked to check the 2 × 1 cluster rule after
//! it was fitted, at M 1536 to 8192), `quick` (M ∈ {128, 2048} only), `filter=<text>` (only shapes whose
//! `MxNxK` label contains the text, e.g. `filter=x7168x2048` or `filter=4096x`), `m=1,16,64`
//! (these rows instead of M 64–4096, e.g. for the decode regime), `list` (print
//! the shapes and stop), `clusters=pairs` or `clusters=off` (force warpforge's 2 × 1 cluster
//! choice instead of its own), `tile=wide` or `tile=narrow` (force its 64 × 256 or 128 × 128
//! tile), `split=N` (at most N CTAs per tile's K loop), `pdl=on` (our calls as programmatic
//! dependent launches: each starts under the previous call's tail and waits for it on the
//! GPU; the batches are back-to-back calls, so this times what a stream of GEMMs gains). Writes `gemm_fp8.csv` and `gemm_fp8.svg` to `$OUT` (or the current
//! directory).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::cublaslt::sys::cublasLtMatmulDescAttributes_t as Desc;
use cudarc::cublaslt::sys::cublasLtMatmulMatrixScale_t as ScaleMode;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;
use warpforge::logic::quant::{Minifloat, block_scale_index, group_scale_index, group_scale_pitch};
use warpforge::{Clusters, Fp8GemmProblem, KSplit, TileWidth};

use crate::common::{
    Bar, Bench, EPS_BF16, EPS_F32, Result, geomean, median, mix, ratio_svg, sample_positions, sm_clock_mhz,
};

/// Bytes of operands and outputs that rotation must exceed (about 4× the H200's L2).
const ROTATION_BYTES: usize = 256 << 20;
const MAX_SETS: usize = 8;
const ROUNDS: usize = 7;
const WARMUP_SECONDS: f64 = 0.05;
/// GPU time one timed batch aims at.
const BATCH_SECONDS: f64 = 1e-3;
/// cuBLASLt's workspace (NVIDIA's recommendation for Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;
/// Scale granularity along K (and N for B's blocks).
const GROUP: usize = 128;
/// The DeepSeek-V3/R1 dense projections, (N, K).
const PROJECTIONS: [(usize, usize); 6] =
    [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)];
const ROWS: [usize; 7] = [64, 128, 256, 512, 1024, 2048, 4096];
const QUICK_ROWS: [usize; 2] = [128, 2048];
/// `set=models`: projections of other models (N, K), none of them DeepSeek's, at ragged M —
/// the library as a service outside its DeepSeek table would call it. Llama-3-8B (QKV, O,
/// gate-up, down), Llama-3-70B (QKV, down), Qwen2.5-7B (QKV, down; K = 3584 and 18944 are not
/// powers of two) and an N = 1000 classifier-like head (N not a multiple of 128).
const MODEL_PROJECTIONS: [(usize, usize); 9] = [
    (6144, 4096),
    (4096, 4096),
    (28672, 4096),
    (4096, 14336),
    (10240, 8192),
    (8192, 28672),
    (4608, 3584),
    (3584, 18944),
    (1000, 4096),
];
/// `set=models`' rows: decode, small batches and ragged prefill chunks.
const MODEL_ROWS: [usize; 6] = [1, 24, 200, 777, 3000, 6000];
/// `set=holdout`: projections picked after the 2 × 1 cluster rule (`prefer_fp8_pairs`) was fitted
/// on the other two sets, to check it: B above the L2 of an H100 or H200 (Llama-3-8B's gate
/// alone 14336 × 4096, Llama-2-13B's down and up 5120 × 13824 and 13824 × 5120, an 8192²
/// projection, DeepSeek-V3's dense MLP 18432 × 7168) and just below it (6144 × 8192,
/// 12288 × 4096: 48 MiB).
const HOLDOUT_PROJECTIONS: [(usize, usize); 7] =
    [(14336, 4096), (5120, 13824), (13824, 5120), (8192, 8192), (18432, 7168), (6144, 8192), (12288, 4096)];
/// `set=holdout`'s rows: prefill chunks of several waves, none of the other sets' M.
const HOLDOUT_ROWS: [usize; 4] = [1536, 2500, 5000, 8192];
/// `tests/gpu_fp8_gemm.rs`: the tensor cores' in-block accumulation error, summed over blocks.
const BLOCK_SUM_ERR: f64 = 128.0 / 8192.0;

/// The three sides, also the index of their outputs and timings.
const OURS: usize = 0;
const BLOCKWISE: usize = 1;
const PER_TENSOR: usize = 2;
const SIDE_NAMES: [&str; 3] = ["ours", "cuBLASLt blockwise", "cuBLASLt per-tensor"];
/// The order of the sides in round `r` is `ORDERS[r % 6]`: every side in every position.
const ORDERS: [[usize; 3]; 6] = [[0, 1, 2], [2, 1, 0], [1, 2, 0], [0, 2, 1], [2, 0, 1], [1, 0, 2]];

/// One set of inputs on the host: codes and scales in our layouts, and the per-tensor scales.
struct HostSet {
    a: Vec<u8>,
    a_scales: Vec<f32>,
    b: Vec<u8>,
    b_scales: Vec<f32>,
    /// (A's, B's) scale for the per-tensor side.
    tensor: (f32, f32),
}

/// `len` random e4m3 codes from `seed`: every code but ±0 and NaN (those become ±1 and ±0.5).
fn random_codes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = mix(seed) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend(state.to_le_bytes().map(|code| match code & 0x7f {
            0 => code | 0x38,
            0x7f => code & 0xb0,
            _ => code,
        }));
    }
    out.truncate(len);
    out
}

/// A random power of two in 2^-11 ..= 2^-4 for scale `index` of the buffer seeded `seed`.
fn random_scale(seed: u64, index: usize) -> f32 {
    (-((4 + mix(seed ^ (index as u64).wrapping_mul(0x9e37_79b9)) % 8) as f32)).exp2()
}

impl HostSet {
    fn new(seed: u64, m: usize, n: usize, k: usize) -> HostSet {
        let (pitch, blocks) = (group_scale_pitch(m).expect("M fits"), k.div_ceil(GROUP));
        // Our layouts: A's scales MN-major (padding rows 0.0), B's one per 128 × 128 block.
        let mut a_scales = vec![0.0f32; pitch * blocks];
        for row in 0..m {
            for g in 0..blocks {
                let at = group_scale_index(row, g, pitch);
                a_scales[at] = random_scale(seed * 4 + 1, at);
            }
        }
        let b_scales = (0..n.div_ceil(GROUP) * blocks).map(|i| random_scale(seed * 4 + 2, i)).collect();
        HostSet {
            a: random_codes(seed * 4 + 3, m * k),
            a_scales,
            b: random_codes(seed * 4 + 4, n * k),
            b_scales,
            tensor: (random_scale(seed * 4 + 5, 0), random_scale(seed * 4 + 6, 0)),
        }
    }

    /// A's scales as cuBLASLt's `VEC128_32F` reads its operand B (our A): `M × L` (M rows of
    /// ours, L = ceil(K / 128) groups), M-contiguous, pitch exactly M (cuBLASLt wants M % 4 == 0).
    fn lt_vec128(&self, m: usize, k: usize) -> Vec<f32> {
        let pitch = group_scale_pitch(m).expect("M fits");
        let blocks = k.div_ceil(GROUP);
        let mut out = vec![0.0f32; m * blocks];
        for g in 0..blocks {
            out[g * m..][..m].copy_from_slice(&self.a_scales[g * pitch..][..m]);
        }
        out
    }

    /// B's scales as cuBLASLt's `BLK128x128_32F` reads its operand A (our B): K-major,
    /// `L4 × ceil(N / 128)` with L4 = round_up(ceil(K / 128), 4) (the column stride a multiple of
    /// 4), so block (n / 128, k / 128) at `(n / 128) · L4 + k / 128`, the padding 0.0.
    fn lt_blk128(&self, n: usize, k: usize) -> Vec<f32> {
        let blocks = k.div_ceil(GROUP);
        let padded = blocks.div_ceil(4) * 4;
        let mut out = vec![0.0f32; n.div_ceil(GROUP) * padded];
        for nb in 0..n.div_ceil(GROUP) {
            out[nb * padded..][..blocks].copy_from_slice(&self.b_scales[nb * blocks..][..blocks]);
        }
        out
    }
}

/// One set of inputs on the device, with each side's output.
struct DeviceSet {
    a: CudaSlice<u8>,
    a_scales: CudaSlice<f32>,
    b: CudaSlice<u8>,
    b_scales: CudaSlice<f32>,
    /// cuBLASLt's layouts of the same scale values: A's (`VEC128_32F`), B's (`BLK128x128_32F`).
    lt_a_scales: CudaSlice<f32>,
    lt_b_scales: CudaSlice<f32>,
    /// The per-tensor side's scales, one f32 each.
    tensor_a: CudaSlice<f32>,
    tensor_b: CudaSlice<f32>,
    d: [CudaSlice<bf16>; 3],
}

impl DeviceSet {
    fn new(stream: &Arc<CudaStream>, host: &HostSet, m: usize, n: usize, k: usize) -> Result<DeviceSet> {
        let d = || stream.alloc_zeros::<bf16>(m * n);
        Ok(DeviceSet {
            a: stream.clone_htod(&host.a)?,
            a_scales: stream.clone_htod(&host.a_scales)?,
            b: stream.clone_htod(&host.b)?,
            b_scales: stream.clone_htod(&host.b_scales)?,
            lt_a_scales: stream.clone_htod(&host.lt_vec128(m, k))?,
            lt_b_scales: stream.clone_htod(&host.lt_blk128(n, k))?,
            tensor_a: stream.clone_htod(&[host.tensor.0])?,
            tensor_b: stream.clone_htod(&[host.tensor.1])?,
            d: [d()?, d()?, d()?],
        })
    }

    /// The device addresses of the scales cuBLASLt's side `side` reads: (its A's = ours B's,
    /// its B's = our A's).
    fn lt_scale_ptrs(&self, stream: &Arc<CudaStream>, side: usize) -> (u64, u64) {
        if side == BLOCKWISE {
            (self.lt_b_scales.device_ptr(stream).0, self.lt_a_scales.device_ptr(stream).0)
        } else {
            (self.tensor_b.device_ptr(stream).0, self.tensor_a.device_ptr(stream).0)
        }
    }
}

/// A cuBLASLt handle and its workspace.
struct Lt {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
}

impl Lt {
    fn new(stream: &Arc<CudaStream>) -> Result<Lt> {
        Ok(Lt { handle: lt::create_handle()?, workspace: stream.alloc_zeros::<u8>(WORKSPACE_BYTES)? })
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `Lt::new` and is destroyed once, here; every
        // descriptor made with it (`LtGemm`) is dropped before it.
        unsafe {
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

/// The cuBLASLt FP8 GEMM of one shape and scale mode: its descriptors and heuristic algorithm.
///
/// `D (M × N row-major) = A·Bᵀ` as cuBLAS's column-major `Dᵀ (N × M) = op(A_lt) · op(B_lt)`:
/// - `A_lt` = our B: e4m3, K × N column-major with ld K (our row-major N × K), TRANSA = T;
/// - `B_lt` = our A: e4m3, K × M column-major with ld K (our row-major M × K), TRANSB = N;
/// - C = D: bf16, N × M column-major with ld N (our row-major M × N), beta = 0.
///
/// Blockwise: `A_SCALE_MODE = BLK128x128_32F` (one scale per 128 rows of op(A_lt), i.e. per 128
/// of our N, and 128 of K) and `B_SCALE_MODE = VEC128_32F` (one scale per column of op(B_lt),
/// i.e. per row of our A, and 128 of K). Per-tensor: both `SCALAR_32F`.
struct LtGemm {
    desc: sys::cublasLtMatmulDesc_t,
    a_layout: sys::cublasLtMatrixLayout_t,
    b_layout: sys::cublasLtMatrixLayout_t,
    d_layout: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
}

/// Sets the descriptor attribute `attr` to `value`.
fn set_desc<T>(desc: sys::cublasLtMatmulDesc_t, attr: Desc, value: &T) -> std::result::Result<(), lt::CublasError> {
    // SAFETY: `desc` is a live descriptor (LtGemm owns it until drop) and `value` points at
    // `size_of::<T>()` readable bytes, the type cuBLASLt documents for `attr` (i32 enums,
    // 8-byte device pointers); cuBLASLt copies them before returning.
    unsafe { lt::set_matmul_desc_attribute(desc, attr, value as *const T as *const c_void, size_of::<T>()) }
}

impl LtGemm {
    /// The GEMM for an `m × n × k` problem, `blockwise` or per-tensor, with the scale pointers
    /// `scales` (cuBLASLt's A's, B's: set 0's, so that the heuristic sees a complete descriptor;
    /// [`LtGemm::run`] sets each call's); `Err` with cuBLASLt's status where it refuses the
    /// descriptors or finds no algorithm.
    fn new(
        lt: &Lt,
        (m, n, k): (usize, usize, usize),
        blockwise: bool,
        scales: (u64, u64),
    ) -> std::result::Result<LtGemm, String> {
        let say = |what: &'static str| move |e: lt::CublasError| format!("{what}: {e:?}");
        let desc = lt::create_matmul_desc(sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, sys::cudaDataType::CUDA_R_32F)
            .map_err(say("cublasLtMatmulDescCreate"))?;
        let layout = |ty, rows: usize, cols: usize, ld: usize| {
            lt::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64).map_err(say("cublasLtMatrixLayoutCreate"))
        };
        // Built first so that Drop frees whatever was created if a later step fails.
        let mut gemm = LtGemm {
            desc,
            a_layout: std::ptr::null_mut(),
            b_layout: std::ptr::null_mut(),
            d_layout: std::ptr::null_mut(),
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
        };
        gemm.a_layout = layout(sys::cudaDataType::CUDA_R_8F_E4M3, k, n, k)?;
        gemm.b_layout = layout(sys::cudaDataType::CUDA_R_8F_E4M3, k, m, k)?;
        gemm.d_layout = layout(sys::cudaDataType::CUDA_R_16BF, n, m, n)?;
        let (t, n_op) = (cublasOperation_t::CUBLAS_OP_T as i32, cublasOperation_t::CUBLAS_OP_N as i32);
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_TRANSA, &t).map_err(say("TRANSA"))?;
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_TRANSB, &n_op).map_err(say("TRANSB"))?;
        let (a_mode, b_mode) = if blockwise {
            (ScaleMode::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, ScaleMode::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F)
        } else {
            (ScaleMode::CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, ScaleMode::CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
        };
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &(a_mode as i32)).map_err(say("A_SCALE_MODE"))?;
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &(b_mode as i32)).map_err(say("B_SCALE_MODE"))?;
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scales.0).map_err(say("A_SCALE_POINTER"))?;
        set_desc(desc, Desc::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales.1).map_err(say("B_SCALE_POINTER"))?;
        let pref = lt::create_matmul_pref().map_err(say("cublasLtMatmulPreferenceCreate"))?;
        let workspace = WORKSPACE_BYTES as u64;
        // SAFETY: `pref` is live until destroyed below; the attribute is a u64 read from
        // `workspace`, which outlives the call.
        let set = unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspace as *const u64 as *const c_void,
                size_of::<u64>(),
            )
        };
        // SAFETY: the handle, descriptor and layouts are live (created above, dropped later);
        // the heuristic only reads them. C and D share D's layout.
        let heuristic = set.and_then(|()| unsafe {
            lt::get_matmul_algo_heuristic(
                lt.handle,
                desc,
                gemm.a_layout,
                gemm.b_layout,
                gemm.d_layout,
                gemm.d_layout,
                pref,
            )
        });
        // SAFETY: `pref` was created above and is not used after this.
        unsafe {
            let _ = lt::destroy_matmul_pref(pref);
        }
        let heuristic = heuristic.map_err(say("cublasLtMatmulAlgoGetHeuristic"))?;
        gemm.algo = heuristic.algo;
        Ok(gemm)
    }

    /// Issues one call on `stream` reading `set` (codes, and the scales of `side`) into
    /// `set.d[side]`.
    fn run(&self, lt: &Lt, stream: &Arc<CudaStream>, set: &mut DeviceSet, side: usize) -> Result<()> {
        let (a_lt, _a_guard) = set.b.device_ptr(stream);
        let (b_lt, _b_guard) = set.a.device_ptr(stream);
        let (a_scales, b_scales) = set.lt_scale_ptrs(stream, side);
        set_desc(self.desc, Desc::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales)?;
        set_desc(self.desc, Desc::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales)?;
        let (d, _d_guard) = set.d[side].device_ptr_mut(stream);
        let (workspace, _w_guard) = lt.workspace.device_ptr(stream);
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the descriptors are live and describe exactly these buffers: our B (N·K bytes)
        // as A_lt, our A (M·K bytes) as B_lt, D (M·N bf16) as C and D (beta = 0: C unread); the
        // scale pointers set above address buffers of the sizes their modes read (`lt_blk128` /
        // `lt_vec128`, or one f32); all live in `set`, borrowed for this call, allocated on
        // `stream`, the one stream everything runs on; the workspace holds WORKSPACE_BYTES, the
        // size the heuristic was allowed; alpha and beta are host f32 (pointer mode host, scale
        // type f32), read before the call returns.
        unsafe {
            lt::matmul(
                lt.handle,
                self.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                a_lt as *const c_void,
                self.a_layout,
                b_lt as *const c_void,
                self.b_layout,
                d as *const c_void,
                self.d_layout,
                d as *mut c_void,
                self.d_layout,
                &self.algo,
                workspace as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )?;
        }
        Ok(())
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created once in `LtGemm::new` (null where creation did not
        // get that far) and is destroyed once, here; no call uses them afterwards.
        unsafe {
            for layout in [self.a_layout, self.b_layout, self.d_layout] {
                if !layout.is_null() {
                    let _ = lt::destroy_matrix_layout(layout);
                }
            }
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

/// The float64 references at sampled positions of D, for the block-scaled sides (ours and
/// blockwise) and the per-tensor side, with `tests/gpu_fp8_gemm.rs`'s tolerance: the in-block
/// accumulation `2⁻⁶ · S`, the f32 promotion `(k_blocks + 2) · 2⁻²⁴ · S`, one bf16 rounding
/// `2⁻⁸ · |D|` (`S = Σ|a·b|` of the dequantised products).
struct Fp8Check {
    samples: Vec<Sample>,
    n: usize,
}

/// One sampled position of D: row, column, and (reference, tolerance) for the block-scaled sides
/// and for the per-tensor side.
type Sample = (usize, usize, [(f64, f64); 2]);

impl Fp8Check {
    fn new(host: &HostSet, m: usize, n: usize, k: usize) -> Fp8Check {
        let decode: Vec<f64> = (0..=255u8).map(|c| Minifloat::E4m3.decode(c) as f64).collect();
        let (pitch, blocks) = (group_scale_pitch(m).expect("M fits"), k.div_ceil(GROUP));
        let positions = sample_positions(m, n, k);
        let promote = (blocks + 2) as f64 * EPS_F32;
        let tolerance = |sum: f64, abs: f64| (BLOCK_SUM_ERR + promote) * abs + EPS_BF16 * sum.abs() + 1e-30;
        let samples = positions
            .into_iter()
            .map(|(i, j)| {
                let (mut sum, mut abs, mut codes_sum, mut codes_abs) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
                for p in 0..k {
                    let codes = decode[host.a[i * k + p] as usize] * decode[host.b[j * k + p] as usize];
                    let scale = host.a_scales[group_scale_index(i, p / GROUP, pitch)] as f64
                        * host.b_scales[block_scale_index(j, p, k)] as f64;
                    sum += codes * scale;
                    abs += (codes * scale).abs();
                    codes_sum += codes;
                    codes_abs += codes.abs();
                }
                let tensor = host.tensor.0 as f64 * host.tensor.1 as f64;
                let (t_sum, t_abs) = (codes_sum * tensor, codes_abs * tensor);
                (i, j, [(sum, tolerance(sum, abs)), (t_sum, tolerance(t_sum, t_abs))])
            })
            .collect();
        Fp8Check { samples, n }
    }

    /// The worst |error| ÷ tolerance of `d` (a block-scaled side's output, or the per-tensor
    /// side's when `per_tensor`); infinite where an output is NaN.
    fn worst(&self, stream: &Arc<CudaStream>, d: &CudaSlice<bf16>, per_tensor: bool) -> Result<f64> {
        let mut worst = 0.0f64;
        for &(i, j, refs) in &self.samples {
            let (reference, tolerance) = refs[per_tensor as usize];
            let at = i * self.n + j;
            let got = stream.clone_dtoh(&d.slice(at..at + 1))?[0].to_f64();
            let error = (got - reference).abs() / tolerance;
            worst = if error.is_nan() { f64::INFINITY } else { worst.max(error) };
        }
        Ok(worst)
    }
}

struct Shape {
    m: usize,
    n: usize,
    k: usize,
}

impl Shape {
    fn label(&self) -> String {
        format!("{}x{}x{}", self.m, self.n, self.k)
    }
}

/// The problems a run covers (`set=`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Set {
    DeepSeek,
    Models,
    Holdout,
}

fn shapes(quick: bool, set: Set, filter: Option<&str>, rows: Option<&[usize]>) -> Vec<Shape> {
    let (projections, default_rows): (&[(usize, usize)], &[usize]) = match (set, quick) {
        (Set::Models, _) => (&MODEL_PROJECTIONS, &MODEL_ROWS),
        (Set::Holdout, _) => (&HOLDOUT_PROJECTIONS, &HOLDOUT_ROWS),
        (Set::DeepSeek, true) => (&PROJECTIONS, &QUICK_ROWS),
        (Set::DeepSeek, false) => (&PROJECTIONS, &ROWS),
    };
    let rows = rows.unwrap_or(default_rows);
    projections
        .iter()
        .flat_map(|&(n, k)| rows.iter().map(move |&m| Shape { m, n, k }))
        .filter(|s| filter.is_none_or(|f| s.label().contains(f)))
        .collect()
}

/// `value` with `digits` decimals, or `n/a`.
fn or_na(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_string(), |v| format!("{v:.digits$}"))
}

/// One shape's results.
struct Row {
    m: usize,
    n: usize,
    k: usize,
    /// Median seconds per call of each side (None: cuBLASLt refused it).
    seconds: [Option<f64>; 3],
    clock: String,
}

impl Row {
    /// Side `side`'s time ÷ ours (≥ 1: ours faster).
    fn ratio(&self, side: usize) -> Option<f64> {
        Some(self.seconds[side]? / self.seconds[OURS]?)
    }
}

pub fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let filter: Option<String> = std::env::args().find_map(|a| a.strip_prefix("filter=").map(String::from));
    // `m=1,16,64` replaces the rows (M) of every projection.
    let rows: Option<Vec<usize>> = match std::env::args().find_map(|a| a.strip_prefix("m=").map(String::from)) {
        None => None,
        Some(list) => Some(
            list.split(',')
                .map(|m| m.parse::<usize>().map_err(|e| format!("m={list}: {e}")))
                .collect::<std::result::Result<_, _>>()?,
        ),
    };
    // `set=models`: other models' projections at ragged M; `set=holdout`: the cluster rule's
    // check (default: DeepSeek's table).
    let set = match std::env::args().find_map(|a| a.strip_prefix("set=").map(String::from)).as_deref() {
        None | Some("deepseek") => Set::DeepSeek,
        Some("models") => Set::Models,
        Some("holdout") => Set::Holdout,
        Some(other) => return Err(format!("set={other}: expected deepseek, models or holdout").into()),
    };
    let shapes = shapes(quick, set, filter.as_deref(), rows.as_deref());
    // `clusters=pairs` / `clusters=off` force warpforge's cluster choice (default: its own).
    let clusters = match std::env::args().find_map(|a| a.strip_prefix("clusters=").map(String::from)).as_deref() {
        None => Clusters::Auto,
        Some("pairs") => Clusters::Pairs,
        Some("off") => Clusters::Off,
        Some(other) => return Err(format!("clusters={other}: expected pairs or off").into()),
    };
    // `tile=wide` / `tile=narrow` force warpforge's tile (default: its own).
    let tile_width = match std::env::args().find_map(|a| a.strip_prefix("tile=").map(String::from)).as_deref() {
        None => TileWidth::Auto,
        Some("wide") => TileWidth::Wide,
        Some("narrow") => TileWidth::Narrow,
        Some(other) => return Err(format!("tile={other}: expected wide or narrow").into()),
    };
    // `split=N` forces at most N CTAs per tile (default: warpforge's model).
    let k_split = match std::env::args().find_map(|a| a.strip_prefix("split=").map(String::from)) {
        None => KSplit::Auto,
        Some(ways) => KSplit::Ways(ways.parse().map_err(|e| format!("split={ways}: {e}"))?),
    };
    if std::env::args().any(|a| a == "list") {
        shapes.iter().for_each(|s| println!("{}", s.label()));
        return Ok(());
    }
    // `pdl=on`: warpforge's calls as programmatic dependent launches (default: plain).
    let programmatic = match std::env::args().find_map(|a| a.strip_prefix("pdl=").map(String::from)).as_deref() {
        None | Some("off") => false,
        Some("on") => true,
        Some(other) => return Err(format!("pdl={other}: expected on or off").into()),
    };
    let Some(Bench { device, mut wf, stream, timer, .. }) = Bench::open("gemm_fp8")? else {
        return Ok(());
    };
    wf.set_programmatic_launch(programmatic);
    // SAFETY: cublasLtGetVersion takes no arguments and only reads the loaded library's version.
    let version = unsafe { sys::cublasLtGetVersion() };
    println!(
        "{} — warpforge block-scaled FP8 GEMM (e4m3, 1×128 / 128×128 f32 scales, bf16 D) vs cuBLASLt {}.{}.{} \
         ({version}): blockwise (A_lt BLK128x128_32F, B_lt VEC128_32F) and per-tensor (SCALAR_32F); \
         times in µs, ratios = cuBLASLt time ÷ ours; warpforge's clusters: {clusters:?}, tile: {tile_width:?}, K split: {k_split:?}, \
         programmatic launches: {programmatic}",
        device.attributes().name,
        version / 10000,
        version % 10000 / 100,
        version % 100
    );
    println!(
        "{:>5} {:>6} {:>6} {:>9} {:>9} {:>9} {:>8} {:>7} {:>8} {:>8} {:>5}  check ours/blk/pt  our plan",
        "M", "N", "K", "ours µs", "blk µs", "pt µs", "TF/s", "GB/s", "blk÷ours", "pt÷ours", "MHz"
    );
    let lt = Lt::new(&stream)?;
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for shape in &shapes {
        let Shape { m, n, k } = *shape;
        let blocks = k.div_ceil(GROUP);
        let scale_bytes = 4 * (group_scale_pitch(m).expect("M fits") * blocks + n.div_ceil(GROUP) * blocks);
        let set_bytes = m * k + n * k + 3 * 2 * m * n + scale_bytes;
        let sets_n = ROTATION_BYTES.div_ceil(set_bytes).clamp(1, MAX_SETS);
        // Set 0 stays on the host for the float64 check after timing.
        let host0 = HostSet::new(1, m, n, k);
        let mut sets = vec![DeviceSet::new(&stream, &host0, m, n, k)?];
        for s in 1..sets_n {
            sets.push(DeviceSet::new(&stream, &HostSet::new(s as u64 + 1, m, n, k), m, n, k)?);
        }
        let problem = Fp8GemmProblem { clusters, tile_width, k_split, ..Fp8GemmProblem::new(m, n, k) };
        // cuBLASLt's two modes; a refusal (descriptors, heuristic, or the first call) reads n/a.
        let mut lt_gemms: [Option<LtGemm>; 3] = [None, None, None];
        for side in [BLOCKWISE, PER_TENSOR] {
            match LtGemm::new(&lt, (m, n, k), side == BLOCKWISE, sets[0].lt_scale_ptrs(&stream, side)) {
                Ok(gemm) => {
                    let first = gemm.run(&lt, &stream, &mut sets[0], side).and_then(|()| Ok(stream.synchronize()?));
                    match first {
                        Ok(()) => lt_gemms[side] = Some(gemm),
                        Err(e) => println!("  {} {}: the first call failed: {e}", SIDE_NAMES[side], shape.label()),
                    }
                }
                Err(e) => println!("  {} refuses {}: {e}", SIDE_NAMES[side], shape.label()),
            }
        }
        let available: Vec<usize> = (0..3).filter(|&s| s == OURS || lt_gemms[s].is_some()).collect();
        let run = |side: usize, set: &mut DeviceSet| -> Result<()> {
            if side == OURS {
                return Ok(wf.fp8_gemm(
                    &stream,
                    &problem,
                    &set.a,
                    &set.a_scales,
                    &set.b,
                    &set.b_scales,
                    &mut set.d[OURS],
                )?);
            }
            let gemm = lt_gemms[side].as_ref().ok_or("a refused cuBLASLt side is never run")?;
            gemm.run(&lt, &stream, set, side)
        };
        // Warm-up: every side in turn over the rotating sets.
        let start = Instant::now();
        let mut launches = 0usize;
        while start.elapsed().as_secs_f64() < WARMUP_SECONDS || launches < 4 {
            for &side in &available {
                run(side, &mut sets[launches % sets_n])?;
            }
            launches += 1;
        }
        stream.synchronize()?;
        // Batches of ~BATCH_SECONDS for the fastest side, the same count for every side.
        let mut fastest = f64::INFINITY;
        for &side in &available {
            let (gpu_s, _) = timer.per_call(&stream, 3, |r| run(side, &mut sets[r % sets_n]))?;
            fastest = fastest.min(gpu_s);
        }
        let reps = ((BATCH_SECONDS / fastest).ceil() as usize).clamp(2, 2000);
        let mut times: [Vec<f64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        // Our host time to issue one call (when it reaches the GPU time, the stream starves).
        let mut our_issue = Vec::new();
        for round in 0..ROUNDS {
            for side in ORDERS[round % ORDERS.len()] {
                if available.contains(&side) {
                    let (gpu_s, issue_s) = timer.per_call(&stream, reps, |r| run(side, &mut sets[r % sets_n]))?;
                    times[side].push(gpu_s);
                    if side == OURS {
                        our_issue.push(issue_s);
                    }
                }
            }
        }
        let our_issue_us = median(&mut our_issue) * 1e6;
        let clock = sm_clock_mhz();
        // After the timed rounds: set 0 again from zeroed outputs, every side, against float64.
        let check = Fp8Check::new(&host0, m, n, k);
        let mut errors: [Option<f64>; 3] = [None, None, None];
        for &side in &available {
            stream.memset_zeros(&mut sets[0].d[side])?;
            run(side, &mut sets[0])?;
            errors[side] = Some(check.worst(&stream, &sets[0].d[side], side == PER_TENSOR)?);
        }
        let ours_error = errors[OURS].unwrap_or(f64::INFINITY);
        if ours_error > 1.0 {
            failures.push(format!("{}: |error| reaches {ours_error:.2} × the tolerance", shape.label()));
        }
        let seconds = times.map(|mut t| if t.is_empty() { None } else { Some(median(&mut t)) });
        let row = Row { m, n, k, seconds, clock };
        let ours_s = seconds[OURS].expect("ours always runs");
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let bytes = (m * k + n * k + 2 * m * n + scale_bytes) as f64;
        let us = |side: usize| or_na(seconds[side].map(|s| s * 1e6), 1);
        let verdict = if ours_error > 1.0 { " FAIL" } else { "" };
        let plan = wf.fp8_gemm_plan(&problem)?;
        let pairs = if plan.clusters == Clusters::Pairs { " 2×1 pairs" } else { "" };
        let plan = format!(
            "{}×{}{pairs} {:?} grid {} issue {our_issue_us:.1} µs",
            plan.tile.0, plan.tile.1, plan.schedule, plan.grid
        );
        println!(
            "{m:>5} {n:>6} {k:>6} {:>9} {:>9} {:>9} {:>8.1} {:>7.0} {:>8} {:>8} {:>5}  {}/{}/{}{verdict}  {plan}",
            us(OURS),
            us(BLOCKWISE),
            us(PER_TENSOR),
            flops / ours_s / 1e12,
            bytes / ours_s / 1e9,
            or_na(row.ratio(BLOCKWISE), 3),
            or_na(row.ratio(PER_TENSOR), 3),
            row.clock,
            or_na(errors[OURS], 2),
            or_na(errors[BLOCKWISE], 2),
            or_na(errors[PER_TENSOR], 2),
        );
        rows.push(row);
        // The cuBLASLt descriptors go before the next shape's (the handle outlives them all).
        drop(lt_gemms);
    }
    let regime = |side: usize, keep: fn(usize) -> bool| {
        let ratios: Vec<f64> = rows.iter().filter(|r| keep(r.m)).filter_map(|r| r.ratio(side)).collect();
        (geomean(ratios.iter().copied()), ratios.len())
    };
    for (name, keep) in
        [("M ≤ 128", (|m| m <= 128) as fn(usize) -> bool), ("M ≥ 2048", |m| m >= 2048), ("all", |_| true)]
    {
        let ((blk, blk_n), (pt, pt_n)) = (regime(BLOCKWISE, keep), regime(PER_TENSOR, keep));
        println!(
            "geomean {name}: blockwise ÷ ours {blk:.3} ({blk_n} shapes), per-tensor ÷ ours {pt:.3} ({pt_n} shapes)"
        );
    }
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    let mut csv =
        String::from("m,n,k,ours_us,blockwise_us,per_tensor_us,blockwise_over_ours,per_tensor_over_ours,sm_mhz\n");
    for r in &rows {
        let us = |side: usize| r.seconds[side].map_or(String::new(), |s| format!("{:.2}", s * 1e6));
        let ratio = |side: usize| r.ratio(side).map_or(String::new(), |x| format!("{x:.4}"));
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            r.m,
            r.n,
            r.k,
            us(OURS),
            us(BLOCKWISE),
            us(PER_TENSOR),
            ratio(BLOCKWISE),
            ratio(PER_TENSOR),
            r.clock
        ));
    }
    std::fs::write(format!("{out}/gemm_fp8.csv"), csv)?;
    let bars: Vec<Bar> = rows
        .iter()
        .filter_map(|r| {
            let ratio = r.ratio(BLOCKWISE)?;
            Some(Bar { label: format!("{}×{}×{}", r.m, r.n, r.k), ratio, section: format!("N={} K={}", r.n, r.k) })
        })
        .collect();
    std::fs::write(
        format!("{out}/gemm_fp8.svg"),
        ratio_svg("cuBLASLt FP8 blockwise time ÷ warpforge fp8_gemm (H200; ≥ 1: ours faster)", &bars, 22.0),
    )?;
    if !failures.is_empty() {
        return Err(format!("fp8_gemm failed its check: {}", failures.join("; ")).into());
    }
    Ok(())
}
