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

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use warpforge_abi::gemm_sm90::{A_BOX_ROWS, BLOCK_K, BLOCK_M, PINGPONG_BLOCK_M, SMEM_BYTES, STORE_BOX_COLS, THREADS};
use warpforge_abi::{Activation, GemmParams, PackParams, TilePlan, entries};
use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder, TmaElement};
use warpforge_host::{Error, KernelArgs, LaunchConfig, Result, module::Arch};
use warpforge_logic::schedule::stream_k::StreamKMode;

use crate::Warpforge;

mod schedule;
mod variant;
pub(crate) use schedule::StreamKCache;
use schedule::{GemmSchedule, poisoned, tile_plan};
pub(crate) use variant::Variant;
pub use variant::{Clusters, Consumers, TileWidth};

/// The cluster shape of the paired variant ([`Clusters::Pairs`]).
const PAIR: [u32; 3] = [2, 1, 1];

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
    /// Batch strides of A, B, C, D as used.
    pub fn strides(&self) -> [usize; 4] {
        let outer = |layout: Layout, ld: usize, row_major_rows: usize, col_major_cols: usize| match layout {
            Layout::RowMajor => ld * row_major_rows,
            Layout::ColMajor => ld * col_major_cols,
        };
        [
            or(self.batch_strides[0], outer(self.a_layout, self.lda(), self.m, self.k)),
            or(self.batch_strides[1], outer(self.b_layout, self.ldb(), self.k, self.n)),
            or(self.batch_strides[2], self.ldc() * self.m),
            or(self.batch_strides[3], self.ldd() * self.m),
        ]
    }
}

fn or(value: usize, default: usize) -> usize {
    if value == 0 { default } else { value }
}

/// 16-bit GEMM input types.
pub trait GemmInput: TmaElement + DeviceRepr + ValidAsZeroBits + Copy + 'static {
    /// Name in kernel entries.
    const NAME: &'static str;
}
impl GemmInput for half::bf16 {
    const NAME: &'static str = "bf16";
}
impl GemmInput for half::f16 {
    const NAME: &'static str = "f16";
}

/// GEMM output types.
pub trait GemmOutput: TmaElement + DeviceRepr + Copy + 'static {
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
    pub c: Option<CudaView<'a, O>>,
    /// Per-column f32 bias of length N.
    pub bias: Option<CudaView<'a, f32>>,
}

impl<O> Default for Epilogue<'_, O> {
    fn default() -> Self {
        Epilogue { c: None, bias: None }
    }
}

/// Span in elements that a (rows × cols, `ld`, layout) matrix batch occupies.
fn span(layout: Layout, rows: usize, cols: usize, ld: usize, stride: usize, batch: usize) -> u128 {
    let (outer, inner) = if layout == Layout::RowMajor { (rows, cols) } else { (cols, rows) };
    (batch as u128 - 1) * stride as u128 + (outer as u128 - 1) * ld as u128 + inner as u128
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
    /// Runs `D = act(alpha·A·B + beta·C + bias)` on `stream`. See the module docs for layouts.
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
        check_shape(p)?;
        let (lda, ldb, ldc, ldd) = (p.lda(), p.ldb(), p.ldc(), p.ldd());
        let [sa, sb, sc, sd] = p.strides();
        let a_inner = if p.a_layout == Layout::RowMajor { p.k } else { p.m };
        let b_inner = if p.b_layout == Layout::RowMajor { p.n } else { p.k };
        check(lda >= a_inner, || format!("lda {lda} < {a_inner}"))?;
        check(ldb >= b_inner, || format!("ldb {ldb} < {b_inner}"))?;
        check(ldc >= p.n && ldd >= p.n, || format!("ldc {ldc} / ldd {ldd} < n {}", p.n))?;
        let need_a = span(p.a_layout, p.m, p.k, lda, sa, p.batch);
        let need_b = span(p.b_layout, p.k, p.n, ldb, sb, p.batch);
        let need_d = span(Layout::RowMajor, p.m, p.n, ldd, sd, p.batch);
        check(a.len() as u128 >= need_a, || format!("A holds {} elements, the problem reads {need_a}", a.len()))?;
        check(b.len() as u128 >= need_b, || format!("B holds {} elements, the problem reads {need_b}", b.len()))?;
        check(d.len() as u128 >= need_d, || format!("D holds {} elements, the problem writes {need_d}", d.len()))?;
        if let Some(c) = &epilogue.c {
            let need_c = span(Layout::RowMajor, p.m, p.n, ldc, sc, p.batch);
            check(c.len() as u128 >= need_c, || format!("C holds {} elements, the problem reads {need_c}", c.len()))?;
        } else {
            check(p.beta == 0.0, || "beta != 0 needs C".into())?;
        }
        if let Some(bias) = &epilogue.bias {
            check(bias.len() >= p.n, || format!("bias holds {} elements, N is {}", bias.len(), p.n))?;
        }
        check(p.alpha.is_finite() && p.beta.is_finite(), || "alpha and beta must be finite".into())?;

        // Operands TMA can read in place, or K-major scratch copies.
        let a_k_major = self.k_major_operand(stream, a, p.a_layout == Layout::RowMajor, p.m, p.k, lda, sa, p.batch)?;
        let b_k_major = self.k_major_operand(stream, b, p.b_layout == Layout::ColMajor, p.n, p.k, ldb, sb, p.batch)?;
        let variant = Variant::choose(p, I::NAME, O::NAME, self.sm_count())?;
        let c_access = epilogue.c.as_ref().map(|c| c.device_ptr(stream));
        let bias_access = epilogue.bias.as_ref().map(|v| v.device_ptr(stream));
        let math = EpilogueMath {
            c: if p.beta != 0.0 { c_access.as_ref().map_or(0, |(ptr, _)| *ptr) } else { 0 },
            bias: bias_access.as_ref().map_or(0, |(ptr, _)| *ptr),
            ldc: ldc as u64,
            stride_c: sc as u64,
            alpha: p.alpha,
            beta: p.beta,
            activation: p.activation,
        };
        let out = OutputShape { cols: p.n, ld: ldd, batch_stride: sd };
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
        a_k_major: &KMajor<I>,
        b_k_major: &KMajor<I>,
        d: &mut impl DevicePtrMut<O>,
    ) -> Result<()> {
        let out = launch.out;
        let (m, k, batch) = (a_k_major.rows, a_k_major.k, a_k_major.batch);
        let plan = self.plan_sm90(launch.entry, launch.variant, m, launch.tile_cols, k, batch)?;
        let a_map = a_k_major.map(launch.variant.a_box_rows())?;
        let b_map = b_k_major.map(launch.variant.b_box_rows())?;
        let kernel = self.module().kernel(plan.entry)?;
        let cluster = launch.variant.pairs.then_some(PAIR);
        let mut stream_k_cache = self.stream_k_cache().lock().map_err(|_| poisoned())?;
        let mut stream_k = if plan.schedule == StreamKMode::DataParallel {
            None
        } else {
            Some(stream_k_cache.buffers(stream, plan.grid)?)
        };
        let workspace_access = stream_k.as_mut().map(|b| b.device_ptr_mut(stream));

        let d_len = d.len();
        let (d_ptr, _d_access) = d.device_ptr_mut(stream);
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
        let params = GemmParams {
            m: m as u32,
            n: out.cols as u32,
            d: d_ptr,
            c: math.c,
            bias: math.bias,
            ldd: out.ld as u64,
            ldc: math.ldc,
            stride_d: out.batch_stride as u64,
            stride_c: math.stride_c,
            alpha: math.alpha,
            beta: math.beta,
            activation: math.activation as u32,
            d_tma: d_tma as u32,
            workspace: workspace_access.as_ref().map_or(0, |((ptr, _), _)| *ptr),
            flags: workspace_access.as_ref().map_or(0, |(_, (ptr, _))| *ptr),
        };
        let mut args = KernelArgs::new();
        args.push(a_map).push(b_map).push(d_map).push(params).push(plan.tiles);
        let mut config = LaunchConfig::linear(plan.grid, THREADS).with_dynamic_smem(SMEM_BYTES);
        if let Some(shape) = cluster {
            config = config.with_cluster(shape);
        }
        // SAFETY: (A map, B map, D map, GemmParams, TilePlan) as every GEMM-body entry declares; the D map
        // is used only when `d_tma` is set and covers exactly D; the A/B maps cover live buffers
        // (scratch copies are dropped stream-ordered); the caller checked D, C and bias against
        // the problem and holds their borrows; stream-K slots and zeroed flags cover the grid,
        // are this stream's alone, and the grid is resident, so every awaited CTA runs.
        unsafe { kernel.launch(stream, &config, &mut args)? };
        drop(workspace_access);
        drop(stream_k_cache);
        Ok(())
    }

    /// The plan of one sm_90 GEMM-body launch of `entry` as `variant` over an `m × k` A and a
    /// `tile_cols × k` B, `batch` times: the tile grid, the schedule (from the persistent
    /// capacity of this device) and the tile plan the kernel follows.
    pub(crate) fn plan_sm90(
        &self,
        entry: &'static str,
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
        let kernel = self.module().kernel(entry)?;
        // Every resident slot (one CTA per SM; with clusters, every resident pair): the
        // stream-K schedule spreads work over all.
        let cluster = variant.pairs.then_some(PAIR);
        let capacity = kernel.plan_persistent(THREADS, SMEM_BYTES, cluster, u64::MAX)?.blocks;
        let schedule = if variant.pairs {
            GemmSchedule::pairs(rows, tiles_n, capacity / 2)
        } else if variant.pingpong {
            GemmSchedule::data_parallel(rows, tiles_n, capacity, BLOCK_M / PINGPONG_BLOCK_M)
        } else {
            GemmSchedule::choose(rows, tiles_n, k_slices, capacity)
        };
        let tile_plan = tile_plan(rows, tiles_n, raster_rows, k_slices, &schedule, ctas_per_worker)?;
        Ok(GemmPlan {
            entry,
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
        check_shape(problem)?;
        let variant = Variant::choose(problem, I::NAME, O::NAME, self.sm_count())?;
        let entry = variant.entry(I::NAME, O::NAME);
        self.plan_sm90(entry, variant, problem.m, problem.n, problem.k, problem.batch)
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
    pub(crate) fn k_major_operand<T: GemmInput>(
        &self,
        stream: &Arc<CudaStream>,
        buf: &impl DevicePtr<T>,
        k_major: bool,
        rows: usize,
        k: usize,
        ld: usize,
        stride: usize,
        batch: usize,
    ) -> Result<KMajor<T>> {
        let (ptr, _access) = buf.device_ptr(stream);
        let pitched = |elems: usize| (elems * 2).is_multiple_of(16);
        if k_major && ptr.is_multiple_of(16) && pitched(ld) && (batch == 1 || pitched(stride)) {
            let stride = if batch == 1 { ld * rows } else { stride };
            return Ok(KMajor { ptr, len: buf.len(), rows, k, ld, stride, batch, _scratch: None });
        }
        // Destination pitch: K rounded up to 8 elements (16 bytes), zero-padded.
        let dst_ld = k.div_ceil(8) * 8;
        let dst_stride = dst_ld * rows;
        let mut scratch = stream.alloc_zeros::<T>(dst_stride * batch)?;
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
        drop(dst_access);
        let kernel = self.module().kernel(entries::PACK_B16)?;
        let total = (dst_stride * batch) as u64;
        let blocks = total.div_ceil(256).clamp(1, 8 * self.sm_count() as u64) as u32;
        let mut args = KernelArgs::new();
        args.push(params);
        // SAFETY: (PackParams) as declared; the source span was checked by the caller against
        // the buffer's length for this layout; the destination holds batch·dst_stride elements.
        unsafe { kernel.launch(stream, &LaunchConfig::linear(blocks, 256), &mut args)? };
        let (ptr, len) = (dst_ptr, scratch.len());
        Ok(KMajor { ptr, len, rows, k, ld: dst_ld, stride: dst_stride, batch, _scratch: Some(scratch) })
    }
}

/// What a GEMM-body call runs, decided before its launch ([`Warpforge::gemm_plan`],
/// [`Warpforge::swiglu_plan`]): the kernel, its tile, the schedule and the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmPlan {
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
    pub(crate) entry: &'static str,
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
    pub(crate) bias: u64,
    pub(crate) ldc: u64,
    pub(crate) stride_c: u64,
    pub(crate) alpha: f32,
    pub(crate) beta: f32,
    pub(crate) activation: Activation,
}

/// A K-major operand (rows × k per batch) at `ptr`, possibly owning its scratch buffer.
pub(crate) struct KMajor<T> {
    ptr: u64,
    len: usize,
    rows: usize,
    k: usize,
    ld: usize,
    stride: usize,
    batch: usize,
    _scratch: Option<CudaSlice<T>>,
}

impl<T: GemmInput> KMajor<T> {
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
