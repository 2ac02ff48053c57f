//! Block-scaled FP8 GEMM on Hopper: `D = A·Bᵀ`, A and B e4m3 with the scales of warpforge's
//! FP8 quantisers, D bf16; the typed entry point, its argument checks and its plan.
//!
//! The operands are what [`QuantScheme`](crate::QuantScheme)'s per-token and per-block
//! quantisers produce (`logic::quant` states the layouts):
//! - A: M × K e4m3 bytes, row-major (pitch K), with f32 scales per row and 128 K (per-token
//!   groups), MN-major: `a_scales[(k / 128) · round_up(M, 4) + row]`;
//! - B: N × K e4m3 bytes, row-major (a linear layer's weight, pitch K), with f32 scales per
//!   128 × 128 block: `b_scales[(n / 128) · ceil(K / 128) + k / 128]`;
//! - D: M × N bf16, row-major with pitch `ldd` (≥ N; 0 means N).
//!
//! `D[i, j] = Σ_kb scale_a[i, kb] · scale_b[j / 128, kb] · Σ_{k in kb} A[i, k] · B[j, k]`: the
//! tensor cores sum each 128-wide K block exactly in f32, and the kernel adds the scaled block
//! sums into an f32 accumulator (promotion every 128 K), then rounds to bf16 once.
//!
//! **Rules** ([`Fp8GemmProblem::check`] and [`Warpforge::fp8_gemm`] refuse everything else
//! with [`Error::InvalidArgument`] naming the rule):
//! - M, N ≥ 1; K ≥ 16 and a multiple of 16 (TMA reads rows of 16-byte multiples); M, N, K
//!   below 2^31; `ldd` ≥ N (or 0) and at most [`MAX_PITCH`];
//! - A holds at least M·K bytes, B N·K, `a_scales` `round_up(M, 4) · ceil(K / 128)` f32,
//!   `b_scales` `ceil(N / 128) · ceil(K / 128)` f32, D `(M − 1)·ldd + N` elements;
//! - A, B and both scale buffers start 16-byte aligned (D needs no alignment beyond its
//!   element's: it is written by TMA stores when its base and pitch allow, else directly);
//!   the scales reach the kernel through TMA with the operands, so B's scales number below
//!   2^31 (one map coordinate);
//! - every buffer and the stream belong to warpforge's CUDA context; the device is sm_90a.
//!
//! A partial last K block (K not a multiple of 128) is read zero-filled past K; its scales are
//! still read (both layouts give the partial group and block a scale; the GPU per-token
//! quantiser takes only K % 128 == 0, so such an A comes from another quantiser, e.g.
//! `logic::quant` on the CPU). Scales should be finite: a NaN or infinite scale
//! poisons the rows or columns it applies to, as in any dequantisation.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use half::bf16;
use warpforge_abi::gemm_fp8_sm90::{
    A_BOX_ROWS, B_SCALE_BOX, BLOCK_K, BLOCK_M, BLOCK_N, SMEM_BYTES, THREADS, WIDE_BLOCK_M, WIDE_BLOCK_N,
    WIDE_SMEM_BYTES,
};
use warpforge_abi::gemm_sm90::STORE_BOX_COLS;
use warpforge_abi::{BlockScaleParams, GemmParams, TensorMap, TilePlan, entries};
use warpforge_host::tensor_map::{Swizzle, TensorMapBuilder};
use warpforge_host::{Error, LaunchConfig, Result};
use warpforge_logic::blockscaled::{a_scales_len, b_scales_len, k_blocks};
use warpforge_logic::quant::group_scale_pitch;

use crate::Warpforge;
use crate::gemm::schedule::{GemmSchedule, tile_plan};
use crate::gemm::{Clusters, Consumers, GemmPath, GemmPlan, KSplit, MAX_K_SPLIT, MAX_PITCH, PAIR, TileWidth, check};

/// K must be a multiple of this many elements (16 bytes of e4m3: TMA's row-pitch unit).
pub const FP8_K_ALIGN: usize = 16;
/// Byte alignment of the base addresses of A, B and both scale buffers.
pub const FP8_BASE_ALIGN: u64 = 16;
/// Bound (exclusive) on the flat index of a B scale: the kernels address B's scales through one
/// TMA coordinate (an i32).
pub(crate) const MAX_SCALE_INDEX: usize = 1 << 31;

/// The builders of the two scale maps of the FP8 GEMMs' ring ([`BlockScaleParams`]): A's
/// per-token scales as `rows × k_blocks × batches` f32 with pitch `round_up(rows, 4)` and
/// batches `a_batch_stride` f32 apart, read in boxes of one tile's rows; B's first `b_scales`
/// f32 flattened, read in boxes of [`B_SCALE_BOX`]. No swizzle; out-of-bounds elements read as
/// zeros. (Pure: `validate` checks them against buffers without a driver.)
fn scale_map_builders(
    (rows, k_blocks, batches, a_batch_stride): (usize, usize, usize, usize),
    b_scales: usize,
) -> Result<(TensorMapBuilder<f32>, TensorMapBuilder<f32>)> {
    let pitch = group_scale_pitch(rows).ok_or_else(|| Error::InvalidArgument(format!("{rows} rows overflow")))?;
    let batch_stride = if batches > 1 { a_batch_stride } else { pitch * k_blocks };
    let a = TensorMapBuilder::<f32>::new(&[rows as u64, k_blocks as u64, batches as u64], &[BLOCK_M, 1, 1])
        .global_strides(&[(pitch * 4) as u64, (batch_stride * 4) as u64]);
    let line = (b_scales * 4).next_multiple_of(16) as u64;
    let b = TensorMapBuilder::<f32>::new(&[b_scales as u64, 1, 1], &[B_SCALE_BOX, 1, 1]).global_strides(&[line, line]);
    Ok((a, b))
}

/// The two scale maps of [`scale_map_builders`] over A's scales `sa` and B's `sb` (device
/// address, length in f32).
///
/// # Safety
/// `sa` and `sb` address live buffers of their lengths that outlive every use of the maps.
pub(crate) unsafe fn scale_maps(
    (sa, sa_len): (u64, usize),
    (sb, sb_len): (u64, usize),
    a_layout: (usize, usize, usize, usize),
    b_scales: usize,
) -> Result<(TensorMap, TensorMap)> {
    let (a, b) = scale_map_builders(a_layout, b_scales)?;
    // SAFETY: the caller's contract; each map covers a prefix of its buffer (validated).
    unsafe { Ok((a.encode_raw(sa, (sa_len * 4) as u64)?, b.encode_raw(sb, (sb_len * 4) as u64)?)) }
}

/// The shape of one block-scaled FP8 GEMM (see the module docs for layouts and rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp8GemmProblem {
    /// Rows of A and D.
    pub m: usize,
    /// Rows of B, columns of D.
    pub n: usize,
    /// The reduction length: columns of A and B.
    pub k: usize,
    /// Row pitch of D in elements; 0 means N.
    pub ldd: usize,
    /// Whether the CTAs run in 2 × 1 clusters sharing each B slot by multicast (a performance
    /// choice; results are the same): `Auto` (warpforge's choice per shape), `Off`, or `Pairs`
    /// (data-parallel over pairs of tile rows).
    pub clusters: Clusters,
    /// The tile (a performance choice; results are the same): `Auto` (warpforge's choice per
    /// shape), `Narrow` (128 × 128, the two consumer warpgroups stacked, 64 rows each) or `Wide`
    /// (64 × 256, the two side by side, 128 columns each, sharing one A box: the decode regime's
    /// tile). `Wide` runs without clusters: forcing it with `Clusters::Pairs` is refused.
    pub tile_width: TileWidth,
    /// How many CTAs share one tile's K loop (a performance choice): `Auto` (warpforge's model),
    /// or `Ways(n)`, 1 to [`MAX_K_SPLIT`], as for the 16-bit GEMM
    /// ([`KSplit::Ways`]); not with `Clusters::Pairs`, whose pairs run whole tiles.
    pub k_split: KSplit,
}

/// What a valid [`Fp8GemmProblem`] reads and writes (elements of each buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp8GemmExtents {
    /// D's row pitch.
    pub ldd: usize,
    /// Bytes of A read: M·K.
    pub a: usize,
    /// f32 of A's scales read: `round_up(M, 4) · ceil(K / 128)`.
    pub a_scales: usize,
    /// Bytes of B read: N·K.
    pub b: usize,
    /// f32 of B's scales read: `ceil(N / 128) · ceil(K / 128)`.
    pub b_scales: usize,
    /// Elements of D written up to the last: `(M − 1)·ldd + N`.
    pub d: usize,
    /// A's scale pitch: `round_up(M, 4)`.
    pub a_scale_pitch: usize,
    /// K blocks: `ceil(K / 128)`.
    pub k_blocks: usize,
}

impl Fp8GemmProblem {
    /// An `m × n × k` problem with a packed D (`ldd = n`).
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Fp8GemmProblem { m, n, k, ldd: 0, clusters: Clusters::Auto, tile_width: TileWidth::Auto, k_split: KSplit::Auto }
    }

    /// Checks the shape rules and returns the extents (pure, checked arithmetic).
    pub fn check(&self) -> Result<Fp8GemmExtents> {
        let Fp8GemmProblem { m, n, k, ldd, clusters, tile_width, k_split } = *self;
        check(m >= 1 && n >= 1, || format!("FP8 GEMM needs M, N ≥ 1 (got M = {m}, N = {n})"))?;
        check(!(clusters == Clusters::Pairs && tile_width == TileWidth::Wide), || {
            "FP8 GEMM: wide 64 × 256 tiles run without clusters (Clusters::Pairs takes 128 × 128 tiles)".into()
        })?;
        if let KSplit::Ways(ways) = k_split {
            check((1..=MAX_K_SPLIT).contains(&ways), || {
                format!("FP8 GEMM: KSplit::Ways({ways}): 1 to {MAX_K_SPLIT} CTAs per tile")
            })?;
            check(clusters != Clusters::Pairs, || "FP8 GEMM: a forced K split runs without clusters".into())?;
        }
        check(k >= FP8_K_ALIGN && k.is_multiple_of(FP8_K_ALIGN), || {
            format!("FP8 GEMM needs K a positive multiple of {FP8_K_ALIGN} (16-byte e4m3 rows for TMA); got {k}")
        })?;
        check(m < 1 << 31 && n < 1 << 31 && k < 1 << 31, || {
            format!("FP8 GEMM needs M, N, K < 2^31 (got {m}, {n}, {k})")
        })?;
        let ldd = if ldd == 0 { n } else { ldd };
        check(ldd >= n && ldd <= MAX_PITCH, || format!("ldd must be 0 or in N..=2^48 (N = {n}, ldd = {ldd})"))?;
        let overflow = || Error::InvalidArgument(format!("FP8 GEMM {m} × {n} × {k}: buffer sizes overflow usize"));
        let a = m.checked_mul(k).ok_or_else(overflow)?;
        let b = n.checked_mul(k).ok_or_else(overflow)?;
        let d = (m - 1).checked_mul(ldd).and_then(|v| v.checked_add(n)).ok_or_else(overflow)?;
        let a_scales = a_scales_len(m, k).ok_or_else(overflow)?;
        let b_scales = b_scales_len(n, k).ok_or_else(overflow)?;
        let a_scale_pitch = group_scale_pitch(m).ok_or_else(overflow)?;
        check(b_scales < MAX_SCALE_INDEX, || {
            format!("FP8 GEMM: B's scales number {b_scales}, above 2^31 − 1 (N = {n}, K = {k})")
        })?;
        Ok(Fp8GemmExtents { ldd, a, a_scales, b, b_scales, d, a_scale_pitch, k_blocks: k_blocks(k) })
    }
}

/// Checks each buffer's length and base alignment against `e` (pure: lengths in elements,
/// addresses as the device sees them).
pub(crate) fn check_buffers(e: &Fp8GemmExtents, lens: [usize; 5], addrs: [u64; 4]) -> Result<()> {
    let [a, a_scales, b, b_scales, d] = lens;
    check(a >= e.a, || format!("A holds {a} bytes, the problem reads {}", e.a))?;
    check(a_scales >= e.a_scales, || {
        format!("A's scales hold {a_scales} f32, the problem reads {} (round_up(M, 4) · ceil(K / 128))", e.a_scales)
    })?;
    check(b >= e.b, || format!("B holds {b} bytes, the problem reads {}", e.b))?;
    check(b_scales >= e.b_scales, || {
        format!("B's scales hold {b_scales} f32, the problem reads {} (ceil(N / 128) · ceil(K / 128))", e.b_scales)
    })?;
    check(d >= e.d, || format!("D holds {d} elements, the problem writes {}", e.d))?;
    for (name, addr) in ["A", "A's scales", "B", "B's scales"].into_iter().zip(addrs) {
        check(addr.is_multiple_of(FP8_BASE_ALIGN), || {
            format!("{name} must start {FP8_BASE_ALIGN}-byte aligned (device address {addr:#x})")
        })?;
    }
    Ok(())
}

/// The schedule and tile plan of an FP8 launch: the 16-bit GEMM's (`gemm/schedule.rs`: the same
/// wave and fix-up model, over `tile` (rows × columns: 128 × 128, or 64 × 256 for the wide
/// entry) tiles of `k_blocks` 128-wide K blocks), or with `pairs` whole pairs of vertically
/// adjacent tiles over `capacity / 2` clusters, or with `ways` at most that many CTAs per tile
/// (`GemmSchedule::split`).
pub(crate) fn fp8_schedule(
    (m, n): (usize, usize),
    tile: (u32, u32),
    k_blocks: u32,
    capacity: u32,
    (pairs, ways): (bool, Option<u32>),
) -> Result<(GemmSchedule, TilePlan)> {
    let tiles_m = m.div_ceil(tile.0 as usize) as u32;
    let tiles_n = n.div_ceil(tile.1 as usize) as u32;
    if pairs {
        let rows = tiles_m.div_ceil(2);
        let schedule = GemmSchedule::pairs(rows, tiles_n, capacity / 2);
        let tiles = tile_plan(rows, tiles_n, rows, k_blocks, &schedule, 2)?;
        return Ok((schedule, tiles));
    }
    let schedule = match ways {
        Some(ways) => GemmSchedule::split(tiles_m, tiles_n, k_blocks, capacity, ways),
        // Several tile rows share each B column: splits that keep them in step (B read once).
        None if tiles_m > 1 => GemmSchedule::choose_even(tiles_m, tiles_n, k_blocks, capacity),
        None => GemmSchedule::choose(tiles_m, tiles_n, k_blocks, capacity),
    };
    let tiles = tile_plan(tiles_m, tiles_n, tiles_m, k_blocks, &schedule, 1)?;
    Ok((schedule, tiles))
}

/// The least share of the pair slots of the last wave that [`prefer_fp8_pairs`] accepts
/// filled: pairs run whole tiles (no stream-K tail), so a wave left 15 % idle costs more than
/// multicast saves.
const PAIR_WAVE_FILL: f64 = 0.9;

/// The fewest tile rows [`prefer_fp8_pairs`] takes: two bands of the pair raster (8 tile rows
/// each). Below it pairs lost on every B measured (M = 777: −9 to −16 %, M = 1536: −6 to +2 %).
const PAIR_MIN_TILE_ROWS: usize = 16;

/// Whether [`Clusters::Auto`] runs the FP8 GEMM in 2 × 1 clusters (`clusters` of them resident):
/// when B (`n · k` bytes) takes more than three quarters of the device's L2 (`l2_bytes`), so the
/// bands of tile rows stream it from DRAM again and again, the tile rows fill two bands
/// ([`PAIR_MIN_TILE_ROWS`]), and the tiles fill at least two waves of pairs, the last at least
/// to [`PAIR_WAVE_FILL`]. Multicast then halves what the CTAs read of B (ncu, H100, 3000 × 8192 ×
/// 28672: DRAM traffic 2.17 → 1.45 GB, SM throughput 74 → 82 %).
///
/// Fitted on an H100 (2026-12-06, docs/PERF.md: DeepSeek's table, other models' projections, and
/// a third set, whose B of 0.96 L2 at M ≥ 5000 gained 3–8 % from pairs and moved the threshold
/// from the whole L2 to three quarters of it): pairs +2 to +14 % on every row the rule takes; −1
/// to −7 % on big problems whose B fits L2 easily, and −5 to −30 % where whole pairs leave a wave
/// partly idle (M ≤ 1024; 3000 × 3584 × 18944, 5.1 waves), which the rule leaves cooperative. Not
/// yet measured on an H200.
fn prefer_fp8_pairs(m: usize, n: usize, k: usize, clusters: u32, l2_bytes: u64) -> bool {
    let tiles_m = m.div_ceil(BLOCK_M as usize);
    let tiles_n = n.div_ceil(BLOCK_N as usize) as u64;
    let pairs = tiles_m.div_ceil(2) as u64 * tiles_n;
    let clusters = clusters.max(1) as u64;
    let waves = pairs.div_ceil(clusters);
    let tiles = tiles_m as u64 * tiles_n;
    // An L2 size of 0 (a device that does not report it) means unknown: no pairs.
    let b_crowds_l2 =
        l2_bytes > 0 && (n as u64).saturating_mul(k as u64).saturating_mul(4) > l2_bytes.saturating_mul(3);
    tiles_m >= PAIR_MIN_TILE_ROWS
        && b_crowds_l2
        && waves >= 2
        && tiles as f64 >= PAIR_WAVE_FILL * (2 * waves * clusters) as f64
}

/// Whether [`TileWidth::Auto`] takes the wide 64 × 256 tile for an `m`-row problem: when the
/// rows fit one wide tile row (M ≤ 64, the decode regime, where the kernel streams B and the
/// 128 × 128 tile spends half of each slot on A rows it re-reads from L2 for every column tile).
fn prefer_fp8_wide(m: usize) -> bool {
    m <= WIDE_BLOCK_M as usize
}

/// Whether the wide entry may run `e`: the B scale index of a wide tile's second 128 columns
/// (one block past the last for a ragged last tile) is one TMA coordinate too.
fn wide_scales_fit(e: &Fp8GemmExtents) -> bool {
    e.b_scales + e.k_blocks < MAX_SCALE_INDEX
}

impl Warpforge {
    /// Runs the block-scaled FP8 GEMM `D = A·Bᵀ` (bf16 D) on `stream`; see the module docs
    /// ([`crate::gemm_fp8`]) for the layouts and the rules every argument must meet.
    #[allow(clippy::too_many_arguments)]
    pub fn fp8_gemm(
        &self,
        stream: &Arc<CudaStream>,
        problem: &Fp8GemmProblem,
        a: &impl DevicePtr<u8>,
        a_scales: &impl DevicePtr<f32>,
        b: &impl DevicePtr<u8>,
        b_scales: &impl DevicePtr<f32>,
        d: &mut impl DevicePtrMut<bf16>,
    ) -> Result<()> {
        self.check_sm90("fp8_gemm")?;
        let e = problem.check()?;
        let owners = [&**a.stream(), &**a_scales.stream(), &**b.stream(), &**b_scales.stream(), &**d.stream()];
        self.module().check_context(stream, &owners)?;
        let lens = [a.len(), a_scales.len(), b.len(), b_scales.len(), d.len()];
        // The read guards live to the end of this function, after the launch.
        let (a_ptr, a_access) = a.device_ptr(stream);
        let (sa_ptr, sa_access) = a_scales.device_ptr(stream);
        let (b_ptr, b_access) = b.device_ptr(stream);
        let (sb_ptr, sb_access) = b_scales.device_ptr(stream);
        check_buffers(&e, lens, [a_ptr, sa_ptr, b_ptr, sb_ptr])?;

        let plan = self.fp8_gemm_plan(problem)?;
        let wide = plan.tile_width == TileWidth::Wide;
        let (m, n, k) = (problem.m, problem.n, problem.k);
        let operand = |ptr: u64, len: usize, rows: usize, box_rows: u32| -> Result<TensorMap> {
            let builder = TensorMapBuilder::<u8>::new(&[k as u64, rows as u64, 1], &[BLOCK_K, box_rows, 1])
                .global_strides(&[k as u64, (k * rows) as u64])
                .swizzle(Swizzle::B128);
            // SAFETY: `ptr` addresses `len` bytes of the caller's buffer, borrowed for this
            // call; the map is used only by the launch below.
            Ok(unsafe { builder.encode_raw(ptr, len as u64)? })
        };
        let pairs = plan.clusters == Clusters::Pairs;
        let a_map = operand(a_ptr, lens[0], m, A_BOX_ROWS)?;
        // A pair's CTAs each load half of B's rows per slot and multicast them.
        let b_map = operand(b_ptr, lens[2], n, if pairs { BLOCK_N / 2 } else { BLOCK_N })?;

        let (entry, smem) = match (pairs, wide) {
            (true, _) => (entries::GEMM_FP8_BLOCKSCALED_BF16_CLUSTER, SMEM_BYTES),
            (false, true) => (entries::GEMM_FP8_BLOCKSCALED_BF16_WIDE, WIDE_SMEM_BYTES),
            (false, false) => (entries::GEMM_FP8_BLOCKSCALED_BF16, SMEM_BYTES),
        };
        let kernel = self.entry(entry)?;
        let mut stream_k_cache = self.stream_k_cache().lock()?;
        let ((workspace, workspace_access), (flags, flags_access)) =
            stream_k_cache.launch_ptrs(stream, plan.schedule, plan.grid)?;

        let d_len = d.len();
        let (d_ptr, d_access) = d.device_ptr_mut(stream);
        // D through TMA stores when its base, row length and pitch are whole 16-byte chunks (TMA
        // stores clip the innermost edge per 16 bytes); direct stores otherwise.
        let pitched = |elems: usize| (elems * 2).is_multiple_of(16);
        let d_tma = d_ptr.is_multiple_of(16) && pitched(n) && pitched(e.ldd);
        let d_map = if d_tma {
            let builder = TensorMapBuilder::<bf16>::new(&[n as u64, m as u64, 1], &[STORE_BOX_COLS, A_BOX_ROWS, 1])
                .global_strides(&[(e.ldd * 2) as u64, (e.ldd * m * 2) as u64])
                .swizzle(Swizzle::B128);
            // SAFETY: `d_ptr` addresses `d_len` elements of the caller's D, borrowed mutably for
            // this call; the map is used only by the launch below.
            unsafe { builder.encode_raw(d_ptr, (d_len * 2) as u64)? }
        } else {
            TensorMap::ZEROED
        };
        let params = GemmParams {
            m: m as u32,
            n: n as u32,
            d: d_ptr,
            c: 0,
            bias: 0,
            ldd: e.ldd as u64,
            ldc: 0,
            stride_d: 0,
            stride_c: 0,
            alpha: 1.0,
            beta: 0.0,
            activation: 0,
            d_tma: d_tma as u32,
            workspace,
            flags,
        };
        let scales = BlockScaleParams { k_blocks: e.k_blocks as u32, b_stride: 0 };
        // SAFETY: both scale buffers are the caller's, borrowed for this call and checked
        // against the problem above; the maps are used only by the launch below.
        let (sa_map, sb_map) =
            unsafe { scale_maps((sa_ptr, lens[1]), (sb_ptr, lens[3]), (m, e.k_blocks, 1, 0), e.b_scales)? };
        let keep = [Some(d_access), workspace_access, flags_access].into_iter().flatten();
        let mut config = LaunchConfig::linear(plan.grid, THREADS)
            .with_dynamic_smem(smem)
            .with_programmatic_dependency(self.programmatic_launch());
        if pairs {
            config = config.with_cluster(PAIR);
        }
        // SAFETY: the A/B maps cover the caller's buffers (lengths checked, 16-byte aligned);
        // the D map is used only when `d_tma` is set and covers exactly D; D and both scale
        // buffers were checked (`check_buffers`: A's scale pitch ≤ 2^31, K blocks ≤ 2^24); `m ≥
        // 1`; the stream-K slots and zeroed flags cover the grid, are this stream's alone, and the
        // resident grid runs every awaited CTA; pairs: whole resident clusters, B boxes of half a
        // tile; wide: 64 × 256 tiles, second B scale index fits (`wide_scales_fit`); programmatic:
        // the FP8 body waits for the previous grid before its first global access.
        unsafe {
            kernel.launch(stream, &config, (a_map, b_map, d_map, sa_map, sb_map, params, plan.tiles, scales), keep)?;
        }
        drop(stream_k_cache);
        drop((a_access, sa_access, b_access, sb_access));
        Ok(())
    }

    /// The plan [`Warpforge::fp8_gemm`] launches for `problem` (after the same shape checks;
    /// buffers are not needed): the entry, its tile (128 × 128, or 64 × 256 wide), the schedule
    /// and the grid.
    pub fn fp8_gemm_plan(&self, problem: &Fp8GemmProblem) -> Result<GemmPlan> {
        self.check_sm90("fp8_gemm")?;
        let e = problem.check()?;
        let wide = match problem.tile_width {
            TileWidth::Narrow => false,
            TileWidth::Wide => {
                check(wide_scales_fit(&e), || {
                    format!("FP8 GEMM: wide tiles index B's scales past 2^31 − 1 ({} of them)", e.b_scales)
                })?;
                true
            }
            TileWidth::Auto => problem.clusters != Clusters::Pairs && prefer_fp8_wide(problem.m) && wide_scales_fit(&e),
        };
        let pair_capacity = || -> Result<u32> {
            let kernel = self.entry(entries::GEMM_FP8_BLOCKSCALED_BF16_CLUSTER)?;
            Ok(kernel.kernel().plan_persistent(THREADS, SMEM_BYTES, Some(PAIR), u64::MAX)?.blocks)
        };
        let pairs = match problem.clusters {
            Clusters::Off => false,
            Clusters::Pairs => true,
            Clusters::Auto => {
                !wide
                    && problem.k_split == KSplit::Auto
                    && pair_capacity().is_ok_and(|capacity| {
                        // A device on which no pair is resident runs the cooperative kernel.
                        capacity >= 2
                            && prefer_fp8_pairs(problem.m, problem.n, problem.k, capacity / 2, self.l2_bytes())
                    })
            }
        };
        let (entry, capacity, tile) = if pairs {
            (entries::GEMM_FP8_BLOCKSCALED_BF16_CLUSTER, pair_capacity()?, (BLOCK_M, BLOCK_N))
        } else if wide {
            let entry = entries::GEMM_FP8_BLOCKSCALED_BF16_WIDE;
            let kernel = self.entry(entry)?;
            let capacity = kernel.kernel().plan_persistent(THREADS, WIDE_SMEM_BYTES, None, u64::MAX)?.blocks;
            (entry, capacity, (WIDE_BLOCK_M, WIDE_BLOCK_N))
        } else {
            let solo = self.entry(entries::GEMM_FP8_BLOCKSCALED_BF16)?;
            let capacity = solo.kernel().plan_persistent(THREADS, SMEM_BYTES, None, u64::MAX)?.blocks;
            (entries::GEMM_FP8_BLOCKSCALED_BF16, capacity, (BLOCK_M, BLOCK_N))
        };
        check(capacity >= 2 || !pairs, || "no 2 × 1 cluster of the FP8 GEMM is resident on this device".into())?;
        let ways = match problem.k_split {
            KSplit::Auto => None,
            KSplit::Ways(ways) => Some(ways),
        };
        let (schedule, tiles) = fp8_schedule((problem.m, problem.n), tile, e.k_blocks as u32, capacity, (pairs, ways))?;
        let (schedule, grid) = (schedule.mode, schedule.grid);
        Ok(GemmPlan {
            chosen_by: crate::PlanSource::Model,
            path: GemmPath::TensorCores,
            entry: entry.name(),
            consumers: Consumers::Cooperative,
            tile_width: if wide { TileWidth::Wide } else { TileWidth::Narrow },
            clusters: if pairs { Clusters::Pairs } else { Clusters::Off },
            tile,
            schedule,
            grid,
            tiles,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpforge_logic::schedule::stream_k::StreamKMode;

    const H200_SMS: u32 = 132;
    const SQUARE: (u32, u32) = (BLOCK_M, BLOCK_N);
    const WIDE: (u32, u32) = (WIDE_BLOCK_M, WIDE_BLOCK_N);

    fn refused(p: Fp8GemmProblem, words: &str) {
        match p.check() {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{p:?}: {msg}"),
            other => panic!("{p:?} should be refused ({words}), got {other:?}"),
        }
    }

    #[test]
    fn shape_rules() {
        refused(Fp8GemmProblem::new(0, 8, 128), "M, N ≥ 1");
        refused(Fp8GemmProblem::new(8, 0, 128), "M, N ≥ 1");
        refused(Fp8GemmProblem::new(8, 8, 0), "multiple of 16");
        refused(Fp8GemmProblem::new(8, 8, 8), "multiple of 16");
        refused(Fp8GemmProblem::new(8, 8, 136 + 4), "multiple of 16");
        refused(Fp8GemmProblem::new(1 << 31, 8, 128), "< 2^31");
        refused(Fp8GemmProblem::new(8, 1 << 31, 128), "< 2^31");
        refused(Fp8GemmProblem::new(8, 8, 1 << 31), "< 2^31");
        refused(Fp8GemmProblem { ldd: 7, ..Fp8GemmProblem::new(8, 8, 128) }, "ldd");
        refused(Fp8GemmProblem { ldd: (1 << 48) + 1, ..Fp8GemmProblem::new(8, 8, 128) }, "ldd");
        // B's scales go through one TMA coordinate: 2^23 · 2^8 = 2^31 of them is one too many.
        refused(Fp8GemmProblem::new(8, 1 << 30, 1 << 15), "B's scales number 2147483648");
        assert!(Fp8GemmProblem::new(8, 1 << 30, (1 << 15) - 128).check().is_ok());
        let e = Fp8GemmProblem::new(5, 129, 144).check().unwrap();
        assert_eq!(
            e,
            Fp8GemmExtents {
                ldd: 129,
                a: 5 * 144,
                a_scales: 8 * 2,
                b: 129 * 144,
                b_scales: 2 * 2,
                d: 4 * 129 + 129,
                a_scale_pitch: 8,
                k_blocks: 2,
            }
        );
        let e = Fp8GemmProblem { ldd: 200, ..Fp8GemmProblem::new(3, 129, 16) }.check().unwrap();
        assert_eq!((e.ldd, e.d, e.k_blocks, e.a_scales), (200, 2 * 200 + 129, 1, 4));
    }

    #[test]
    fn scale_maps_fit_the_buffers_the_rules_admit() {
        // Dense problems (one batch) and masked grouped ones (batches a stride apart): the maps
        // pass every driver rule over scale buffers of exactly the length the problem reads.
        for (m, n, k) in [(1usize, 1usize, 16usize), (5, 129, 144), (128, 7168, 16384), (4099, 300, 7168)] {
            let e = Fp8GemmProblem::new(m, n, k).check().unwrap();
            let (a, b) = scale_map_builders((m, e.k_blocks, 1, 0), e.b_scales).unwrap();
            a.validate(0x1000, (e.a_scales * 4) as u64).unwrap();
            b.validate(0x2000, (e.b_scales * 4) as u64).unwrap();
            assert_eq!((a.box_bytes(), b.box_bytes()), (512, 128));
            if m.is_multiple_of(4) {
                // No padding rows: one f32 short of the problem's count is out of bounds.
                assert!(a.validate(0x1000, (e.a_scales * 4 - 4) as u64).is_err());
            }
        }
        let (rows, kb, experts) = (70usize, 2usize, 3usize);
        let stride = 72 * kb;
        let (a, _) = scale_map_builders((rows, kb, experts, stride), experts * 4).unwrap();
        a.validate(0x1000, (experts * stride * 4) as u64).unwrap();
        assert!(a.validate(0x1000, (experts * stride * 4 - 16) as u64).is_err(), "the last expert's rows");
        assert!(a.validate(0x1004, (experts * stride * 4) as u64).is_err(), "16-byte base");
    }

    #[test]
    fn buffer_rules() {
        let e = Fp8GemmProblem::new(5, 129, 144).check().unwrap();
        let lens = [e.a, e.a_scales, e.b, e.b_scales, e.d];
        let aligned = [0x1000, 0x2000, 0x3000, 0x4000];
        check_buffers(&e, lens, aligned).unwrap();
        let short = |i: usize, words: &str| {
            let mut l = lens;
            l[i] -= 1;
            match check_buffers(&e, l, aligned) {
                Err(Error::InvalidArgument(msg)) => assert!(msg.contains(words), "{msg}"),
                other => panic!("short buffer {i} accepted: {other:?}"),
            }
        };
        short(0, "A holds");
        short(1, "A's scales hold");
        short(2, "B holds");
        short(3, "B's scales hold");
        short(4, "D holds");
        for (i, name) in ["A", "A's scales", "B", "B's scales"].into_iter().enumerate() {
            for off in [1, 4, 8] {
                let mut addrs = aligned;
                addrs[i] += off;
                match check_buffers(&e, lens, addrs) {
                    Err(Error::InvalidArgument(msg)) => assert!(msg.starts_with(name), "{msg}"),
                    other => panic!("{name} at +{off} accepted: {other:?}"),
                }
            }
        }
    }

    /// Several tile rows per B column: a pure stream-K grid is a whole number of CTAs per tile
    /// (every tile's K loop cut at the same offsets, so the CTAs of one B column walk it in
    /// step); one tile row keeps the grid that may straddle tiles.
    #[test]
    fn splits_are_even_when_tile_rows_share_b() {
        for m in [129usize, 200, 256, 300, 512, 777] {
            for (n, k) in [(3584usize, 18944usize), (4608, 3584), (7168, 16384), (2112, 7168), (1000, 4096)] {
                let (schedule, _) =
                    fp8_schedule((m, n), SQUARE, k.div_ceil(128) as u32, H200_SMS, (false, None)).unwrap();
                let tiles = (m.div_ceil(128) * n.div_ceil(128)) as u32;
                if schedule.mode == StreamKMode::Pure {
                    assert!(schedule.grid.is_multiple_of(tiles), "{m}×{n}×{k}: {schedule:?} over {tiles} tiles");
                }
            }
        }
        // Qwen2.5-7B's down projection at M = 200: 56 tiles of 148 K blocks, two CTAs each.
        let (schedule, _) = fp8_schedule((200, 3584), SQUARE, 148, H200_SMS, (false, None)).unwrap();
        assert_eq!((schedule.mode, schedule.grid), (StreamKMode::Pure, 112));
        // One tile row: the 16-bit GEMM's choice, straddling ranges allowed.
        let (schedule, _) = fp8_schedule((100, 3584), SQUARE, 148, H200_SMS, (false, None)).unwrap();
        assert_eq!(schedule, GemmSchedule::choose(1, 28, 148, H200_SMS));
    }

    #[test]
    fn schedules_are_buildable_and_use_stream_k_for_decode_shapes() {
        for m in [1usize, 7, 64, 128, 129, 1000, 4096, 16384] {
            for n in [1usize, 100, 4096, 7168, 18432] {
                for k in [16usize, 112, 128, 2048, 7168] {
                    let kb = k.div_ceil(128) as u32;
                    let grid = fp8_schedule((m, n), SQUARE, kb, H200_SMS, (false, None)).unwrap().0.grid;
                    assert!((1..=H200_SMS).contains(&grid), "{m}×{n}×{k}: grid {grid}");
                    let (wide, plan) = fp8_schedule((m, n), WIDE, kb, H200_SMS, (false, None)).unwrap();
                    assert!((1..=H200_SMS).contains(&wide.grid), "{m}×{n}×{k}: wide grid {}", wide.grid);
                    let wide_tiles = (m.div_ceil(64) * n.div_ceil(256)) as u32;
                    assert_eq!(plan.raster.tile_count(), wide_tiles, "{m}×{n}×{k}");
                    let (paired, plan) = fp8_schedule((m, n), SQUARE, kb, H200_SMS, (true, None)).unwrap();
                    assert!(paired.grid.is_multiple_of(2) && (2..=H200_SMS).contains(&paired.grid));
                    assert_eq!(paired.mode, StreamKMode::DataParallel, "{m}×{n}×{k}");
                    // Pairs of tile rows: a ragged last pair's second CTA still has a tile slot.
                    let pair_tiles = (m.div_ceil(128).div_ceil(2) * n.div_ceil(128)) as u32;
                    assert_eq!(plan.raster.tile_count(), pair_tiles, "{m}×{n}×{k}");
                }
            }
        }
        // One row, a 4096-wide weight, K = 7168: 32 tiles on 132 SMs split K.
        assert_eq!(fp8_schedule((1, 4096), SQUARE, 56, H200_SMS, (false, None)).unwrap().0.mode, StreamKMode::Pure);
        // On wide tiles the same weight is 16 tiles: still K split over the SMs.
        assert_eq!(fp8_schedule((1, 4096), WIDE, 56, H200_SMS, (false, None)).unwrap().0.mode, StreamKMode::Pure);
        // The wide shapes of `tests/gpu_fp8_gemm.rs` cover every schedule on 132 SMs: 144 tiles
        // of 32 K blocks (hybrid), 160 tiles (data-parallel), 16 tiles of 56 K blocks (pure).
        let wide_mode = |m, n, k: usize| fp8_schedule((m, n), WIDE, k.div_ceil(128) as u32, H200_SMS, (false, None));
        assert_eq!(wide_mode(576, 4096, 4096).unwrap().0.mode, StreamKMode::Hybrid);
        assert_eq!(wide_mode(640, 4096, 512).unwrap().0.mode, StreamKMode::DataParallel);
        assert_eq!(wide_mode(64, 4096, 7168).unwrap().0.mode, StreamKMode::Pure);
    }

    #[test]
    fn pairs_are_chosen_where_b_crowds_l2_and_the_pairs_fill_their_waves() {
        const H100_L2: u64 = 50 << 20;
        let pairs = |m, n, k| prefer_fp8_pairs(m, n, k, H200_SMS / 2, H100_L2);
        // The H100 runs of 2026-12-06 (docs/PERF.md), each shape with the choice that measured
        // faster. Pairs (true): 2–14 %. Cooperative (false): B well within L2, too few tile rows,
        // or whole pairs leaving a wave partly idle (1024 × 7168 × 16384: 224 pairs on 66
        // clusters, 3.4 waves; 3000 × 3584 × 18944: 5.1 waves).
        let measured = [
            (2048, 7168, 16384, true),
            (4096, 7168, 16384, true),
            (3000, 4096, 14336, true),
            (6000, 4096, 14336, true),
            (3000, 10240, 8192, true),
            (3000, 28672, 4096, true),
            (3000, 8192, 28672, true),
            (6000, 8192, 28672, true),
            (6000, 3584, 18944, true),
            (2500, 14336, 4096, true),
            (8192, 18432, 7168, true),
            (5000, 6144, 8192, true),
            (8192, 12288, 4096, true),
            (4096, 24576, 1536, false),
            (6000, 4608, 3584, false),
            (6000, 6144, 4096, false),
            (4096, 32768, 512, false),
            (512, 7168, 16384, false),
            (1024, 7168, 16384, false),
            (3000, 3584, 18944, false),
            (2048, 2112, 7168, false),
            (777, 28672, 4096, false),
            (777, 8192, 28672, false),
            (1536, 14336, 4096, false),
            (1536, 6144, 8192, false),
        ];
        for (m, n, k, faster_in_pairs) in measured {
            assert_eq!(pairs(m, n, k), faster_in_pairs, "{m} × {n} × {k}");
        }
        // The B threshold: three quarters of L2, exclusive.
        let k_at = |fraction_of_l2: u64| (H100_L2 * fraction_of_l2 / 4 / 1024) as usize;
        assert!(!pairs(16384, 1024, k_at(3)));
        assert!(pairs(16384, 1024, k_at(3) + 16));
        // An odd number of tile rows leaves half of the last pair row empty: counted in the fill.
        // 17 tile rows × 33 columns: 297 pairs on 66 clusters (4.5 waves), 561 of 660 slots used.
        assert!(!pairs(17 * 128, 33 * 128, 16384));
        assert!(pairs(18 * 128, 33 * 128, 16384));
        // A device that reports no L2 size keeps the cooperative kernel.
        assert!(!prefer_fp8_pairs(4096, 7168, 16384, H200_SMS / 2, 0));
    }

    #[test]
    fn wide_tiles_are_the_decode_rule_and_refused_with_pairs() {
        assert!(prefer_fp8_wide(1) && prefer_fp8_wide(64));
        assert!(!prefer_fp8_wide(65) && !prefer_fp8_wide(4096));
        let forced = |clusters, tile_width| Fp8GemmProblem { clusters, tile_width, ..Fp8GemmProblem::new(8, 8, 128) };
        refused(forced(Clusters::Pairs, TileWidth::Wide), "wide 64 × 256 tiles run without clusters");
        assert!(forced(Clusters::Off, TileWidth::Wide).check().is_ok());
        assert!(forced(Clusters::Pairs, TileWidth::Narrow).check().is_ok());
        let split =
            |clusters, ways| Fp8GemmProblem { clusters, k_split: KSplit::Ways(ways), ..Fp8GemmProblem::new(8, 8, 128) };
        refused(split(Clusters::Off, 0), "KSplit::Ways(0): 1 to 16");
        refused(split(Clusters::Off, 17), "KSplit::Ways(17): 1 to 16");
        refused(split(Clusters::Pairs, 2), "a forced K split runs without clusters");
        assert!(split(Clusters::Auto, 16).check().is_ok());
        // The second B scale box of a ragged last wide tile indexes one block row past B's.
        // (2^23 − 1) block rows × 256 K blocks: B scales + K blocks = 2^31, refused for wide tiles.
        let e = Fp8GemmProblem::new(8, (1 << 30) - 128, 1 << 15).check().unwrap();
        assert_eq!(e.b_scales, MAX_SCALE_INDEX - 256);
        assert!(!wide_scales_fit(&e));
        assert!(wide_scales_fit(&Fp8GemmProblem::new(64, 7168, 16384).check().unwrap()));
    }
}
