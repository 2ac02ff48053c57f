//! `D = act(alpha·A·B + beta·C + bias)` on Hopper tensor cores: the typed entry point, its
//! argument checks, and the plan (operand layout, schedule, grid) for each call.
//!
//! Conventions: A is M × K, B is K × N, C and D are M × N row-major (`ldc`, `ldd` ≥ N), all per
//! batch with batch strides. The kernel reads both operands K-major through TMA: A row-major
//! and B column-major (B stored as N × K, the layout of a linear layer's weight) are read in
//! place; any other layout, or a pitch TMA cannot address (not a multiple of 16 bytes), is
//! first repacked on the GPU into a K-major scratch copy (one extra read and write of that
//! operand; never a host copy). Inputs bf16 or f16, accumulation f32, output bf16, f16 or f32.

use std::sync::Arc;

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, DeviceSlice, SyncOnDrop, ValidAsZeroBits,
};
use warpforge_abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_M, PINGPONG_BLOCK_M, SMEM_BYTES, STORE_BOX_COLS, THREADS};
use warpforge_abi::signatures::GemmSm90;
use warpforge_abi::{Activation, Entry, GemmParams, PackParams, TilePlan, entries};
use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder, TmaElement};
use warpforge_host::{Error, LaunchConfig, Result, module::Arch};
use warpforge_logic::schedule::stream_k::StreamKMode;

use crate::Warpforge;

mod decode;
pub(crate) mod schedule;
pub mod tuned;
mod variant;
pub(crate) mod workspace;
pub use decode::{Cores, DECODE_MAX_ROWS, SKINNY_MAX_ROWS};
use schedule::{GemmSchedule, tile_plan};
use tuned::TablePlan;
pub use tuned::{PlanSource, PlanTable};
pub(crate) use variant::Variant;
pub use variant::{Clusters, Consumers, KSplit, MAX_K_SPLIT, TileWidth};
pub use workspace::MAX_CACHED_STREAMS;
pub(crate) use workspace::StreamKCache;

/// The cluster shape of the paired variant ([`Clusters::Pairs`]).
pub(crate) const PAIR: [u32; 3] = [2, 1, 1];

/// Storage order of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Rows contiguous; the leading dimension is the row stride.
    RowMajor,
    /// Columns contiguous; the leading dimension is the column stride.
    ColMajor,
}

/// One GEMM call's shapes, layouts, strides and epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmProblem {
    /// Rows of A and D.
    pub m: usize,
    /// Columns of B and D.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Independent problems (strided batch).
    pub batch: usize,
    /// Layout of A (M × K).
    pub a_layout: Layout,
    /// Layout of B (K × N).
    pub b_layout: Layout,
    /// Leading dimension of A, elements (0: packed).
    pub lda: usize,
    /// Leading dimension of B, elements (0: packed).
    pub ldb: usize,
    /// Row stride of C, elements (0: N).
    pub ldc: usize,
    /// Row stride of D, elements (0: N).
    pub ldd: usize,
    /// Batch strides of A, B, C, D, elements (0: packed).
    pub batch_strides: [usize; 4],
    /// Scale of A·B.
    pub alpha: f32,
    /// Scale of C (C is required when non-zero).
    pub beta: f32,
    /// Epilogue activation.
    pub activation: Activation,
    /// Consumer arrangement of the kernel (a performance choice; results are the same).
    pub consumers: Consumers,
    /// Tile width of the kernel (a performance choice; results are the same).
    pub tile_width: TileWidth,
    /// Cluster shape of the kernel (a performance choice; results are the same).
    pub clusters: Clusters,
    /// Tensor cores or the CUDA-core decode path (a performance choice; results agree within
    /// f32 accumulation-order rounding).
    pub cores: Cores,
    /// How the cooperative kernel splits K over CTAs (a performance choice; results agree
    /// within f32 accumulation-order rounding).
    pub k_split: KSplit,
}

impl GemmProblem {
    /// `D = A·B` with A row-major (M × K) and B column-major (stored N × K), packed.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        GemmProblem {
            m,
            n,
            k,
            batch: 1,
            a_layout: Layout::RowMajor,
            b_layout: Layout::ColMajor,
            lda: 0,
            ldb: 0,
            ldc: 0,
            ldd: 0,
            batch_strides: [0; 4],
            alpha: 1.0,
            beta: 0.0,
            activation: Activation::None,
            consumers: Consumers::Auto,
            tile_width: TileWidth::Auto,
            clusters: Clusters::Auto,
            cores: Cores::Auto,
            k_split: KSplit::Auto,
        }
    }

    /// Leading dimension of A as used (packed if 0).
    pub fn lda(&self) -> usize {
        or(self.lda, if self.a_layout == Layout::RowMajor { self.k } else { self.m })
    }
    /// Leading dimension of B as used.
    pub fn ldb(&self) -> usize {
        or(self.ldb, if self.b_layout == Layout::RowMajor { self.n } else { self.k })
    }
    /// Row stride of C as used.
    pub fn ldc(&self) -> usize {
        or(self.ldc, self.n)
    }
    /// Row stride of D as used.
    pub fn ldd(&self) -> usize {
        or(self.ldd, self.n)
    }
    /// Batch strides of A, B, C, D as used (a packed stride that overflows `usize` saturates
    /// at `usize::MAX`, which [`GemmProblem::check`] refuses).
    pub fn strides(&self) -> [usize; 4] {
        let outer = |layout: Layout, ld: usize, row_major_rows: usize, col_major_cols: usize| match layout {
            Layout::RowMajor => ld.saturating_mul(row_major_rows),
            Layout::ColMajor => ld.saturating_mul(col_major_cols),
        };
        [
            or(self.batch_strides[0], outer(self.a_layout, self.lda(), self.m, self.k)),
            or(self.batch_strides[1], outer(self.b_layout, self.ldb(), self.k, self.n)),
            or(self.batch_strides[2], self.ldc().saturating_mul(self.m)),
            or(self.batch_strides[3], self.ldd().saturating_mul(self.m)),
        ]
    }

    /// Checks the problem on its own (no GPU, no buffers): the shape limits, the leading
    /// dimensions against the rows they hold, finite `alpha` and `beta`, and every extent with
    /// checked arithmetic. Returns what the buffers must then hold; any field values give `Ok`
    /// or [`Error::InvalidArgument`], never a panic or a wrapped size. [`Warpforge::gemm`] runs
    /// this first.
    pub fn check(&self) -> Result<GemmExtents> {
        let p = self;
        check_shape(p)?;
        check(p.alpha.is_finite() && p.beta.is_finite(), || "alpha and beta must be finite".into())?;
        let (lda, ldb, ldc, ldd) = (p.lda(), p.ldb(), p.ldc(), p.ldd());
        let a_inner = if p.a_layout == Layout::RowMajor { p.k } else { p.m };
        let b_inner = if p.b_layout == Layout::RowMajor { p.n } else { p.k };
        check(lda >= a_inner, || format!("lda {lda} < {a_inner}"))?;
        check(ldb >= b_inner, || format!("ldb {ldb} < {b_inner}"))?;
        check(ldc >= p.n && ldd >= p.n, || format!("ldc {ldc} / ldd {ldd} < n {}", p.n))?;
        let overflow = |what: &str| Error::InvalidArgument(format!("{what} overflows usize in {p:?}"));
        let packed = |ld: usize, outer: usize, what: &str| ld.checked_mul(outer).ok_or_else(|| overflow(what));
        let a_outer = if p.a_layout == Layout::RowMajor { p.m } else { p.k };
        let b_outer = if p.b_layout == Layout::RowMajor { p.k } else { p.n };
        let [sa, sb, sc, sd] = p.batch_strides;
        let strides = [
            if sa == 0 { packed(lda, a_outer, "A's packed batch stride")? } else { sa },
            if sb == 0 { packed(ldb, b_outer, "B's packed batch stride")? } else { sb },
            if sc == 0 { packed(ldc, p.m, "C's packed batch stride")? } else { sc },
            if sd == 0 { packed(ldd, p.m, "D's packed batch stride")? } else { sd },
        ];
        let pitches = [lda, ldb, ldc, ldd].into_iter().chain(strides);
        check(pitches.into_iter().all(|v| v <= MAX_PITCH), || {
            format!("leading dimensions and batch strides must be at most 2^48 elements: {p:?}")
        })?;
        let extent = |layout: Layout, rows: usize, cols: usize, ld: usize, stride: usize, what: &str| {
            span(layout, rows, cols, ld, stride, p.batch).ok_or_else(|| overflow(what))
        };
        // D's batches must not overlap: elements written by two batches would race (inputs may
        // overlap; they are only read).
        if p.batch > 1 {
            let one_batch = span(Layout::RowMajor, p.m, p.n, ldd, 0, 1).ok_or_else(|| overflow("D's extent"))?;
            check(strides[3] >= one_batch, || {
                format!(
                    "D's batch stride {} is under one batch of D ({one_batch} elements): batches overlap",
                    strides[3]
                )
            })?;
        }
        Ok(GemmExtents {
            lda,
            ldb,
            ldc,
            ldd,
            strides,
            a: extent(p.a_layout, p.m, p.k, lda, strides[0], "A's extent")?,
            b: extent(p.b_layout, p.k, p.n, ldb, strides[1], "B's extent")?,
            c: extent(Layout::RowMajor, p.m, p.n, ldc, strides[2], "C's extent")?,
            d: extent(Layout::RowMajor, p.m, p.n, ldd, strides[3], "D's extent")?,
        })
    }
}

/// Largest leading dimension or batch stride, elements: more than any GPU's memory holds, and
/// small enough that every byte offset the launch computes from one (× 4 bytes, plus a
/// checked extent) stays far inside `u64`.
pub const MAX_PITCH: usize = 1 << 48;

/// What a valid [`GemmProblem`] touches ([`GemmProblem::check`]): its leading dimensions and
/// batch strides as used, and the elements each operand's buffer must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmExtents {
    /// Leading dimension of A.
    pub lda: usize,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Row stride of C.
    pub ldc: usize,
    /// Row stride of D.
    pub ldd: usize,
    /// Batch strides of A, B, C, D.
    pub strides: [usize; 4],
    /// Elements A must hold.
    pub a: usize,
    /// Elements B must hold.
    pub b: usize,
    /// Elements C must hold (when passed as a buffer of its own).
    pub c: usize,
    /// Elements D must hold.
    pub d: usize,
}

fn or(value: usize, default: usize) -> usize {
    if value == 0 { default } else { value }
}

/// 16-bit GEMM input types: `bf16` and `f16`. Sealed: a kernel reads these bytes as its
/// declared type, so the set is exactly the types warpforge has kernels for.
///
/// ```compile_fail,E0277
/// // Every other supertrait is satisfied; only warpforge's private seal is missing.
/// #[derive(Clone, Copy)]
/// struct Mine(u16);
/// // SAFETY: (doctest) a plain 16-bit value.
/// unsafe impl cudarc::driver::DeviceRepr for Mine {}
/// // SAFETY: (doctest) zero is a valid `Mine`.
/// unsafe impl cudarc::driver::ValidAsZeroBits for Mine {}
/// impl warpforge::host::TmaElement for Mine {
///     const DATA_TYPE: cudarc::driver::sys::CUtensorMapDataType =
///         cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
/// }
/// impl warpforge::gemm::GemmInput for Mine {
///     const NAME: &'static str = "bf16";
/// }
/// ```
pub trait GemmInput: crate::sealed::Sealed + TmaElement + DeviceRepr + ValidAsZeroBits + Copy + 'static {
    /// Name in kernel entries.
    const NAME: &'static str;
}
impl GemmInput for half::bf16 {
    const NAME: &'static str = "bf16";
}
impl GemmInput for half::f16 {
    const NAME: &'static str = "f16";
}

/// GEMM output types: `bf16`, `f16` and `f32`. Sealed, as [`GemmInput`]:
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Mine(u16);
/// // SAFETY: (doctest) a plain 16-bit value.
/// unsafe impl cudarc::driver::DeviceRepr for Mine {}
/// impl warpforge::host::TmaElement for Mine {
///     const DATA_TYPE: cudarc::driver::sys::CUtensorMapDataType =
///         cudarc::driver::sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
/// }
/// impl warpforge::gemm::GemmOutput for Mine {
///     const NAME: &'static str = "f16";
///     const TMA_STORE: bool = true;
/// }
/// ```
pub trait GemmOutput: crate::sealed::Sealed + TmaElement + DeviceRepr + Copy + 'static {
    /// Name in kernel entries.
    const NAME: &'static str;
    /// Whether the kernel can write D of this type through a TMA store (16-bit types).
    const TMA_STORE: bool;
}
impl GemmOutput for half::bf16 {
    const NAME: &'static str = "bf16";
    const TMA_STORE: bool = true;
}
impl GemmOutput for half::f16 {
    const NAME: &'static str = "f16";
    const TMA_STORE: bool = true;
}
impl GemmOutput for f32 {
    const NAME: &'static str = "f32";
    const TMA_STORE: bool = false;
}

/// Optional epilogue operands.
pub struct Epilogue<'a, O> {
    /// C (required when `beta != 0`).
    pub c: COperand<'a, O>,
    /// Per-column f32 bias of length N.
    pub bias: Option<CudaView<'a, f32>>,
}

impl<O> Default for Epilogue<'_, O> {
    fn default() -> Self {
        Epilogue { c: COperand::None, bias: None }
    }
}

/// Where the epilogue's C comes from. D is borrowed mutably by [`Warpforge::gemm`], so Rust
/// cannot pass the same buffer as C too: `InPlace` says so instead.
pub enum COperand<'a, O> {
    /// No C (`beta` must be 0).
    None,
    /// A buffer of its own, read with `ldc` and C's batch stride.
    Buffer(CudaView<'a, O>),
    /// D itself: `D = act(alpha·A·B + beta·D + bias)`, no copy. C takes D's layout, so the
    /// problem's `ldc` and C batch stride must be 0 or equal D's.
    InPlace,
}

/// Span in elements that a (rows × cols, `ld`, layout) matrix batch occupies (`None` when it
/// overflows `usize`); rows, cols and batch are ≥ 1.
fn span(layout: Layout, rows: usize, cols: usize, ld: usize, stride: usize, batch: usize) -> Option<usize> {
    let (outer, inner) = if layout == Layout::RowMajor { (rows, cols) } else { (cols, rows) };
    let batches = (batch - 1).checked_mul(stride)?;
    let rows = (outer - 1).checked_mul(ld)?;
    batches.checked_add(rows)?.checked_add(inner)
}

/// The shape limits of every GEMM call (before any stride or buffer is looked at).
fn check_shape(p: &GemmProblem) -> Result<()> {
    check(p.m >= 1 && p.n >= 1 && p.k >= 1 && p.batch >= 1, || format!("empty problem {p:?}"))?;
    check(p.m < 1 << 31 && p.n < 1 << 31 && p.k < 1 << 31 && p.batch < 1 << 16, || {
        "m, n, k must be < 2^31 and batch < 2^16".into()
    })
}

pub(crate) fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond { Ok(()) } else { Err(Error::InvalidArgument(msg())) }
}

impl Warpforge {
    /// Runs `D = act(alpha·A·B + beta·C + bias)` on `stream`. See the module docs for layouts;
    /// [`COperand::InPlace`] accumulates into D.
    pub fn gemm<I: GemmInput, O: GemmOutput>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &GemmProblem,
        a: &impl DevicePtr<I>,
        b: &impl DevicePtr<I>,
        epilogue: Epilogue<'_, O>,
        d: &mut impl DevicePtrMut<O>,
    ) -> Result<()> {
        let p = problem;
        self.check_sm90("gemm")?;
        let e = p.check()?;
        let mut owners = vec![&**a.stream(), &**b.stream(), &**d.stream()];
        owners.extend(epilogue.bias.as_ref().map(|v| &**v.stream()));
        if let COperand::Buffer(c) = &epilogue.c {
            owners.push(&**c.stream());
        }
        self.module().check_context(stream, &owners)?;
        check(a.len() >= e.a, || format!("A holds {} elements, the problem reads {}", a.len(), e.a))?;
        check(b.len() >= e.b, || format!("B holds {} elements, the problem reads {}", b.len(), e.b))?;
        check(d.len() >= e.d, || format!("D holds {} elements, the problem writes {}", d.len(), e.d))?;
        match &epilogue.c {
            COperand::None => check(p.beta == 0.0, || "beta != 0 needs C".into())?,
            COperand::Buffer(c) => {
                check(c.len() >= e.c, || format!("C holds {} elements, the problem reads {}", c.len(), e.c))?
            }
            COperand::InPlace => {
                let same = (p.ldc == 0 || p.ldc == e.ldd) && (p.batch_strides[2] == 0 || e.strides[2] == e.strides[3]);
                check(same, || format!("in place, C is D: ldc and C's batch stride must be 0 or D's ({p:?})"))?;
            }
        }
        if let Some(bias) = &epilogue.bias {
            check(bias.len() >= p.n, || format!("bias holds {} elements, N is {}", bias.len(), p.n))?;
        }

        // The plan table's choice for this bucket, or the caller's knobs, or the cost model's.
        let (tuned, _) = self.table_problem(problem, &e, I::NAME, O::NAME);
        let p = &tuned;
        let variant = Variant::choose(p, I::NAME, O::NAME, self.sm_count())?;
        // C's and bias's read guards live to the end of this function, after the launch.
        let c_access = match &epilogue.c {
            COperand::Buffer(c) if p.beta != 0.0 => Some(c.device_ptr(stream)),
            _ => None,
        };
        let bias_access = epilogue.bias.as_ref().map(|v| v.device_ptr(stream));
        let in_place = matches!(epilogue.c, COperand::InPlace) && p.beta != 0.0;
        let (ldc, stride_c) = if in_place { (e.ldd, e.strides[3]) } else { (e.ldc, e.strides[2]) };
        let math = EpilogueMath {
            c: c_access.as_ref().map_or(0, |(ptr, _)| *ptr),
            c_is_d: in_place,
            bias: bias_access.as_ref().map_or(0, |(ptr, _)| *ptr),
            ldc: ldc as u64,
            stride_c: stride_c as u64,
            alpha: p.alpha,
            beta: p.beta,
            activation: p.activation,
        };
        if let Some(path) = decode::path(p, &e)? {
            let entry = decode::DecodeEntry::of(path, I::NAME, O::NAME);
            if self.launch_decode(stream, p, &e, entry, a, b, &math, d)? {
                return Ok(());
            }
            check(problem.cores == Cores::Auto, || format!("{:?} needs A and B 16-byte aligned", p.cores))?;
        }
        // Operands TMA can read in place, or K-major scratch copies; each holds its buffer's
        // read guard until it drops, after the launch below.
        let a_k_major =
            self.k_major_operand(stream, a, p.a_layout == Layout::RowMajor, p.m, p.k, e.lda, e.strides[0], p.batch)?;
        let b_k_major =
            self.k_major_operand(stream, b, p.b_layout == Layout::ColMajor, p.n, p.k, e.ldb, e.strides[1], p.batch)?;
        let out = OutputShape { cols: p.n, ld: e.ldd, batch_stride: e.strides[3] };
        let launch = Sm90Launch { entry: variant.entry(I::NAME, O::NAME), variant, tile_cols: p.n, out, math };
        self.launch_sm90(stream, &launch, &a_k_major, &b_k_major, d)
    }

    /// Launches one sm_90 GEMM-body kernel (`launch.entry`) over K-major A (M × K) and B
    /// (`tile_cols` × K), writing D (`out`): the tile grid, schedule, stream-K buffers, D's
    /// tensor map and the parameters, shared by every kernel built on that body.
    pub(crate) fn launch_sm90<I: GemmInput, O: GemmOutput>(
        &self,
        stream: &Arc<CudaStream>,
        launch: &Sm90Launch,
        a_k_major: &KMajor<'_, I>,
        b_k_major: &KMajor<'_, I>,
        d: &mut impl DevicePtrMut<O>,
    ) -> Result<()> {
        let out = launch.out;
        let (m, batch) = (a_k_major.rows, a_k_major.batch);
        let d_len = d.len();
        let (d_ptr, d_access) = d.device_ptr_mut(stream);
        // D through TMA stores when its type and pitch allow; direct stores otherwise.
        let pitched = |elems: usize| (elems * std::mem::size_of::<O>()).is_multiple_of(16);
        // The row length in whole 16-byte chunks too: TMA stores clip the innermost edge per 16
        // bytes, and would otherwise write into the padding between rows (measured on the H200).
        let d_tma = O::TMA_STORE
            && d_ptr.is_multiple_of(16)
            && pitched(out.cols)
            && pitched(out.ld)
            && (batch == 1 || pitched(out.batch_stride));
        let d_map = if d_tma {
            let batch_bytes = if batch == 1 { out.ld * m } else { out.batch_stride } * 2;
            let builder = TensorMapBuilder::<O>::new(
                &[out.cols as u64, m as u64, batch as u64],
                &[STORE_BOX_COLS, A_BOX_ROWS, 1],
            )
            .global_strides(&[(out.ld * 2) as u64, batch_bytes as u64])
            .swizzle(Swizzle::B128);
            // SAFETY: `d_ptr` addresses `d_len` elements of the caller's D, borrowed mutably for
            // this call; the map is used only by the launch below.
            unsafe { builder.encode_raw(d_ptr, (d_len * std::mem::size_of::<O>()) as u64)? }
        } else {
            warpforge_abi::TensorMap::ZEROED
        };
        let math = launch.math;
        // In place, C is D. Sound because every element of D is read as C and then written by
        // one thread of the one tile that owns it, and by nothing else: `gemm_epilogue::finish`
        // loads C at (row, col) with a plain (coherent) load -- the shipped PTX has no
        // `ld.global.nc` -- and the value stored at (row, col), directly or through the staging
        // and a TMA store issued after the warpgroup barrier, depends on that load; tiles
        // partition D (TMA store boxes are clipped to D's extent, rows padded to 16-byte
        // pitches); and with stream-K only the `Finalize` (or `Whole`) unit of a tile runs the
        // epilogue -- `Partial` units write the workspace, never D
        // (`gemm_bf16_ws_persistent_sm90`, `parts::stream_k`).
        let c = if math.c_is_d { d_ptr } else { math.c };
        let params = GemmParams {
            m: m as u32,
            n: out.cols as u32,
            d: d_ptr,
            c,
            bias: math.bias,
            ldd: out.ld as u64,
            ldc: math.ldc,
            stride_d: out.batch_stride as u64,
            stride_c: math.stride_c,
            alpha: math.alpha,
            beta: math.beta,
            activation: math.activation as u32,
            d_tma: d_tma as u32,
            workspace: 0,
            flags: 0,
        };
        // SAFETY: the D map is used only when `d_tma` is set and covers exactly D; the caller
        // checked D, C and bias against the problem and holds their borrows (D's guard travels
        // with the launch).
        unsafe { self.launch_sm90_body(stream, launch, a_k_major, b_k_major, d_map, params, [d_access]) }
    }

    /// Launches the sm_90 GEMM body of `launch` over the two K-major operands with the
    /// epilogue's parameters `params` and D's map `d_map` (read when `params.d_tma` is set); the
    /// launch fills in the stream-K workspace and flags. `keep`'s guards drop after the kernel is
    /// enqueued.
    ///
    /// # Safety
    /// `params` (its D, C, bias, pitches and extents) and `d_map` describe memory the epilogue
    /// of `launch.entry` may read and write for this launch, alive until the kernel completes
    /// (stream-ordered), with `params.m` the rows of A.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch_sm90_body<'g, I: GemmInput>(
        &self,
        stream: &Arc<CudaStream>,
        launch: &Sm90Launch,
        a_k_major: &KMajor<'_, I>,
        b_k_major: &KMajor<'_, I>,
        d_map: warpforge_abi::TensorMap,
        params: GemmParams,
        keep: impl IntoIterator<Item = SyncOnDrop<'g>>,
    ) -> Result<()> {
        let (m, k, batch) = (a_k_major.rows, a_k_major.k, a_k_major.batch);
        let plan = self.plan_sm90(launch.entry, launch.variant, m, launch.tile_cols, k, batch)?;
        let a_map = a_k_major.map(launch.variant.a_box_rows())?;
        let b_map = b_k_major.map(launch.variant.b_box_rows())?;
        let kernel = self.entry(launch.entry)?;
        let cluster = launch.variant.pairs.then_some(PAIR);
        let mut stream_k_cache = self.stream_k_cache().lock()?;
        let ((workspace, workspace_access), (flags, flags_access)) =
            stream_k_cache.launch_ptrs(stream, plan.schedule, plan.grid)?;
        let params = GemmParams { workspace, flags, ..params };
        // The caller's and the stream-K buffers' guards drop after the kernel is enqueued.
        let mut guards = Vec::new();
        for guard in keep {
            guards.push(guard);
        }
        guards.extend([workspace_access, flags_access].into_iter().flatten());
        let mut config = LaunchConfig::linear(plan.grid, THREADS).with_dynamic_smem(SMEM_BYTES);
        if let Some(shape) = cluster {
            config = config.with_cluster(shape);
        }
        // SAFETY: D's side is the caller's contract; the A/B maps cover live buffers (scratch
        // copies are dropped stream-ordered); stream-K slots and zeroed flags cover the grid,
        // are this stream's alone, and the grid is resident, so every awaited CTA runs.
        unsafe { kernel.launch(stream, &config, (a_map, b_map, d_map, params, plan.tiles), guards)? };
        drop(stream_k_cache);
        Ok(())
    }

    /// The plan of one sm_90 GEMM-body launch of `entry` as `variant` over an `m × k` A and a
    /// `tile_cols × k` B, `batch` times: the tile grid, the schedule (from the persistent
    /// capacity of this device) and the tile plan the kernel follows.
    pub(crate) fn plan_sm90(
        &self,
        entry: Entry<GemmSm90>,
        variant: Variant,
        m: usize,
        tile_cols: usize,
        k: usize,
        batch: usize,
    ) -> Result<GemmPlan> {
        let tiles_m = m.div_ceil(variant.block_m() as usize) as u32;
        let tiles_n = tile_cols.div_ceil(variant.block_n() as usize) as u32;
        // Tiles counted in pairs of tile rows per batch with clusters (each cluster takes two).
        let ctas_per_worker = if variant.pairs { 2 } else { 1 };
        let raster_rows = tiles_m.div_ceil(ctas_per_worker);
        let rows = raster_rows as u64 * batch as u64;
        let tiles = rows * tiles_n as u64 * ctas_per_worker as u64;
        check(tiles <= u32::MAX as u64, || format!("{tiles} output tiles; at most 2^32 - 1"))?;
        let (rows, k_slices) = (rows as u32, k.div_ceil(BLOCK_K as usize) as u32);
        let kernel = self.entry(entry)?;
        let kernel = kernel.kernel();
        // Every resident slot (one CTA per SM; with clusters, every resident pair): the
        // stream-K schedule spreads work over all.
        let cluster = variant.pairs.then_some(PAIR);
        let capacity = kernel.plan_persistent(THREADS, SMEM_BYTES, cluster, u64::MAX)?.blocks;
        let schedule = if variant.pairs {
            GemmSchedule::pairs(rows, tiles_n, capacity / 2)
        } else if variant.pingpong {
            GemmSchedule::data_parallel(rows, tiles_n, capacity, BLOCK_M / PINGPONG_BLOCK_M)
        } else if let Some(ways) = variant.ways {
            GemmSchedule::split(rows, tiles_n, k_slices, capacity, ways)
        } else {
            GemmSchedule::choose(rows, tiles_n, k_slices, capacity)
        };
        let tile_plan = tile_plan(rows, tiles_n, raster_rows, k_slices, &schedule, ctas_per_worker)?;
        Ok(GemmPlan {
            chosen_by: PlanSource::Model,
            path: GemmPath::TensorCores,
            entry: entry.name(),
            consumers: if variant.pingpong { Consumers::PingPong } else { Consumers::Cooperative },
            tile_width: if variant.narrow { TileWidth::Narrow } else { TileWidth::Wide },
            clusters: if variant.pairs { Clusters::Pairs } else { Clusters::Off },
            tile: (variant.block_m(), variant.block_n()),
            schedule: schedule.mode,
            grid: schedule.grid,
            tiles: tile_plan,
        })
    }

    /// The plan [`Warpforge::gemm`] launches for `problem` with `I` → `O` (after the same shape
    /// checks; buffers are not needed): which kernel, tile and schedule, on how many CTAs.
    pub fn gemm_plan<I: GemmInput, O: GemmOutput>(&self, problem: &GemmProblem) -> Result<GemmPlan> {
        self.check_sm90("gemm")?;
        let extents = problem.check()?;
        let (tuned, chosen_by) = self.table_problem(problem, &extents, I::NAME, O::NAME);
        let problem = &tuned;
        let variant = Variant::choose(problem, I::NAME, O::NAME, self.sm_count())?;
        let entry = variant.entry(I::NAME, O::NAME);
        let plan =
            GemmPlan { chosen_by, ..self.plan_sm90(entry, variant, problem.m, problem.n, problem.k, problem.batch)? };
        let Some(path) = decode::path(problem, &extents)? else {
            return Ok(plan);
        };
        let entry = decode::DecodeEntry::of(path, I::NAME, O::NAME);
        let grid = self.decode_grid(entry, problem)?;
        Ok(GemmPlan { entry: entry.name(), path, grid, ..plan })
    }

    /// `p` as it runs: with the plan table's entry for its bucket applied when the caller left
    /// every knob `Auto` and the call is one the table was measured for (one batch, bf16 → bf16
    /// or f16 → f16, A row-major and B stored N × K, read in place or repacked); otherwise `p`
    /// itself, planned by the caller's knobs or the cost model.
    fn table_problem(&self, p: &GemmProblem, e: &GemmExtents, input: &str, output: &str) -> (GemmProblem, PlanSource) {
        let unforced = p.cores == Cores::Auto
            && p.consumers == Consumers::Auto
            && p.tile_width == TileWidth::Auto
            && p.clusters == Clusters::Auto
            && p.k_split == KSplit::Auto;
        if !unforced {
            return (*p, PlanSource::Caller);
        }
        let linear = p.a_layout == Layout::RowMajor && p.b_layout == Layout::ColMajor;
        let measured_kind = p.batch == 1 && linear && variant::has_variants(input, output);
        let repacked = !decode::reads_in_place(p, e);
        match self.plan_table().filter(|_| measured_kind).and_then(|t| t.entry(p.m, p.n, p.k, repacked)) {
            Some(entry) if entry.plan != TablePlan::Model => (entry.plan.apply(p), PlanSource::Table),
            _ => (*p, PlanSource::Model),
        }
    }

    /// Allocates `stream`'s stream-K buffers for the largest grid any GEMM or SwiGLU call on
    /// this device launches, so later calls on `stream` allocate none on their hot path (as
    /// long as at most [`MAX_CACHED_STREAMS`] streams use them; the cache evicts beyond that).
    /// Without it, the first stream-K call on a stream allocates them.
    pub fn reserve_gemm_workspace(&self, stream: &Arc<CudaStream>) -> Result<()> {
        self.check_sm90("reserve_gemm_workspace")?;
        self.module().check_context(stream, &[])?;
        // Every GEMM-body entry has the same block and shared memory, so the same persistent
        // capacity; the stream-K grids never exceed it.
        let kernel = self.entry(entries::GEMM_BF16_BF16)?;
        let capacity = kernel.kernel().plan_persistent(THREADS, SMEM_BYTES, None, u64::MAX)?.blocks;
        self.stream_k_cache().lock()?.buffers(stream, capacity.max(self.sm_count()))?;
        Ok(())
    }

    /// Streams whose stream-K buffers are cached now (at most [`MAX_CACHED_STREAMS`]).
    pub fn gemm_workspace_streams(&self) -> Result<usize> {
        Ok(self.stream_k_cache().lock()?.len())
    }

    /// Refuses every GPU but Hopper (sm_90a), naming `what`.
    pub(crate) fn check_sm90(&self, what: &str) -> Result<()> {
        if self.module().arch() == Arch::Sm90a {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{what} runs on Hopper (sm_90a); this device loaded {} (the Blackwell GEMM is compile-verified only)",
            self.module().arch().name()
        )))
    }

    /// A K-major view of an operand with `rows` rows (M or N) of `k` elements: the caller's
    /// buffer when TMA can read it (`k_major`, 16-byte pitch and batch stride, 16-byte base),
    /// otherwise a packed scratch copy made on the GPU.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn k_major_operand<'a, T: GemmInput>(
        &self,
        stream: &'a Arc<CudaStream>,
        buf: &'a impl DevicePtr<T>,
        k_major: bool,
        rows: usize,
        k: usize,
        ld: usize,
        stride: usize,
        batch: usize,
    ) -> Result<KMajor<'a, T>> {
        let (ptr, access) = buf.device_ptr(stream);
        // `ld` and `stride` are at most MAX_PITCH (checked by the caller): no overflow.
        let pitched = |elems: usize| (elems * 2).is_multiple_of(16);
        if k_major && ptr.is_multiple_of(16) && pitched(ld) && (batch == 1 || pitched(stride)) {
            let stride = if batch == 1 { ld.saturating_mul(rows) } else { stride };
            let len = buf.len();
            return Ok(KMajor { ptr, len, rows, k, ld, stride, batch, _source: Some(access), _scratch: None });
        }
        // Destination pitch: K rounded up to 8 elements (16 bytes), zero-padded.
        let too_big = || Error::InvalidArgument(format!("a {batch} × {rows} × {k} operand copy overflows usize"));
        let dst_ld = k.div_ceil(8) * 8;
        let dst_stride = dst_ld.checked_mul(rows).ok_or_else(too_big)?;
        let total = dst_stride.checked_mul(batch).ok_or_else(too_big)?;
        let mut scratch = stream.alloc_zeros::<T>(total)?;
        let (src_row, src_col) = if k_major { (ld, 1) } else { (1, ld) };
        let (dst_ptr, dst_access) = scratch.device_ptr_mut(stream);
        let params = PackParams {
            rows: rows as u64,
            cols: k as u64,
            batch: batch as u64,
            src: ptr,
            src_row: src_row as u64,
            src_col: src_col as u64,
            src_batch: stride as u64,
            dst: dst_ptr,
            dst_ld: dst_ld as u64,
            dst_batch: dst_stride as u64,
        };
        let kernel = self.entry(entries::PACK_B16)?;
        let blocks = (total as u64).div_ceil(256).clamp(1, 8 * self.sm_count() as u64) as u32;
        let config = LaunchConfig::linear(blocks, 256);
        // SAFETY: the source span was checked by the caller against the buffer's length for
        // this layout; the destination holds batch·dst_stride elements. The source's read and
        // the scratch's write guards drop after the pack is enqueued.
        unsafe { kernel.launch(stream, &config, (params,), [access, dst_access])? };
        let (ptr, len) = (dst_ptr, scratch.len());
        let stride = dst_stride;
        Ok(KMajor { ptr, len, rows, k, ld: dst_ld, stride, batch, _source: None, _scratch: Some(scratch) })
    }
}

/// The kinds of GEMM kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPath {
    /// The persistent warp-specialised wgmma kernels; the plan's tile, schedule and tile plan
    /// are theirs.
    TensorCores,
    /// The decode kernel on the CUDA cores (at most [`SKINNY_MAX_ROWS`] rows; see
    /// `gemm/decode.rs`): `entry` and `grid` are theirs, the other fields describe the wgmma
    /// plan the call would take if A or B turn out not 16-byte aligned.
    Skinny,
    /// The `mma.sync` decode kernel (at most [`DECODE_MAX_ROWS`] rows, operands swapped; see
    /// `gemm/decode.rs`): `entry` and `grid` are theirs, the rest as for [`GemmPath::Skinny`].
    Decode,
    /// The `mma.sync` gather kernel (small problems, any layout or alignment; see
    /// `gemm/decode.rs`): `entry` and `grid` are theirs; the other fields describe the wgmma
    /// plan the call would take if forced.
    Gather,
}

/// What a GEMM-body call runs, decided before its launch ([`Warpforge::gemm_plan`],
/// [`Warpforge::swiglu_plan`]): the kernel, its tile, the schedule and the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmPlan {
    /// What chose it: the caller's knobs, the plan table, or the cost model.
    pub chosen_by: PlanSource,
    /// Which kind of kernel runs.
    pub path: GemmPath,
    /// Kernel entry.
    pub entry: &'static str,
    /// Consumer arrangement run: `Cooperative` or `PingPong`.
    pub consumers: Consumers,
    /// Tile width run: `Wide` or `Narrow`.
    pub tile_width: TileWidth,
    /// Clusters run: `Off` or `Pairs`.
    pub clusters: Clusters,
    /// Rows × columns of one tile of the kernel's product (columns of B's rows: a SwiGLU tile
    /// of 256 gate-up columns writes 128 outputs).
    pub tile: (u32, u32),
    /// How the K loops are split: data-parallel, pure stream-K or the hybrid.
    pub schedule: StreamKMode,
    /// CTAs launched.
    pub grid: u32,
    /// The tile order and each worker's units, as the kernel receives them.
    pub tiles: TilePlan,
}

/// What one sm_90 GEMM-body launch runs: the entry, its variant, the columns of the tile grid
/// (rows of B), D's shape and the epilogue math.
pub(crate) struct Sm90Launch {
    pub(crate) entry: Entry<GemmSm90>,
    pub(crate) variant: Variant,
    pub(crate) tile_cols: usize,
    pub(crate) out: OutputShape,
    pub(crate) math: EpilogueMath,
}

/// D's columns, row pitch and batch stride (elements); its rows are A's.
#[derive(Clone, Copy)]
pub(crate) struct OutputShape {
    pub(crate) cols: usize,
    pub(crate) ld: usize,
    pub(crate) batch_stride: usize,
}

/// The plain GEMM epilogue's operands and scalars (device addresses, 0 for absent).
#[derive(Clone, Copy)]
pub(crate) struct EpilogueMath {
    pub(crate) c: u64,
    /// C is D (in place): the launch passes D's address as C.
    pub(crate) c_is_d: bool,
    pub(crate) bias: u64,
    pub(crate) ldc: u64,
    pub(crate) stride_c: u64,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) activation: Activation,
}

/// A K-major operand (rows × k per batch) at `ptr`: the caller's buffer with its read guard
/// (held until this drops, after the launch that reads it), or a scratch copy it owns.
pub(crate) struct KMajor<'a, T> {
    ptr: u64,
    len: usize,
    rows: usize,
    k: usize,
    ld: usize,
    stride: usize,
    batch: usize,
    _source: Option<SyncOnDrop<'a>>,
    _scratch: Option<CudaSlice<T>>,
}

impl<T: GemmInput> KMajor<'_, T> {
    fn map(&self, box_rows: u32) -> Result<warpforge_abi::TensorMap> {
        let builder =
            TensorMapBuilder::<T>::new(&[self.k as u64, self.rows as u64, self.batch as u64], &[BLOCK_K, box_rows, 1])
                .global_strides(&[self.ld as u64 * 2, self.stride as u64 * 2])
                .swizzle(Swizzle::B128);
        // SAFETY: `ptr` addresses `len` elements of a live buffer (the caller's, borrowed for
        // the whole `gemm` call, or our scratch, owned by `self`); the map is used only by the
        // launch inside that call.
        Ok(unsafe { builder.encode_raw(self.ptr, self.len as u64 * 2)? })
    }
}
