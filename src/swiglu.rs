//! Fused gate-up projection with SwiGLU: `out = silu(x·W_gateᵀ) ⊙ (x·W_upᵀ)` in one kernel.
//!
//! An MLP block's first half is two projections of the same activations and an element-wise
//! product. Unfused, a service runs one GEMM into an `[M, 2·I]` buffer and a second kernel that
//! reads it back; fused, the GEMM's epilogue combines each gate column with its up column in
//! registers and writes only `[M, I]`.
//!
//! Weight arrangement (see [`interleave_gate_up`]): the two `I × H` weights are stored as one
//! `2·I' × H` row-major matrix (`I'` = I rounded up to [`GATE_UP_BLOCK`]) whose rows come in
//! blocks of 16: gate rows `8g..8g+8`, then up rows `8g..8g+8`. A wgmma accumulator gives each
//! thread columns `2q, 2q+1` of every 8-column group, so this order puts gate column `j` and up
//! column `j` of the same row in one thread's registers, 4 registers apart, and the combined
//! values land in the accumulator layout of a half-width tile: no shuffles, and the GEMM's own
//! staged TMA store writes them.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::elements::{Bf16, F16};
use warpforge_abi::signatures::{GemmSm90, SiluMul};
use warpforge_abi::{Entry, entries};
use warpforge_host::{BufferElement, Error, Result};

use crate::gemm::{
    Clusters, EpilogueMath, GemmInput, GemmPlan, GemmProblem, OutputShape, PlanSource, Sm90Launch, Variant, check,
};
use crate::{Activation, Consumers, TileWidth, Warpforge};

/// Rows of each weight per interleaving block of the gate-up matrix.
pub const GATE_UP_BLOCK: usize = 8;

/// Up to this many tokens (one 64-row ping-pong tile row), `Auto` runs ping-pong consumers:
/// whole 64 × 256 tiles, data-parallel, so the weight streams once with no stream-K fix-up and
/// half the 128-row tile's wasted rows. Measured on the H200 at M = 1 and 16 over five MLPs
/// (docs/PERF.md): fastest of the three variants on all ten, 9–27 % ahead of cooperative and
/// 15–55 % ahead of narrow tiles; the plain GEMM's rules (fitted to M ≥ 128) picked those.
const DECODE_ROWS: usize = 64;

/// Element types of the fused kernel: bf16 or f16 activations, weights and output. Sealed
/// through [`GemmInput`]: an outside type can implement neither.
///
/// ```compile_fail,E0277
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
/// impl warpforge::gemm::GemmOutput for Mine {
///     const NAME: &'static str = "bf16";
///     const TMA_STORE: bool = true;
/// }
/// impl warpforge::swiglu::SwigluElement for Mine {
///     type Device = warpforge::abi::elements::Bf16;
///     const SWIGLU_ENTRIES: [warpforge::abi::Entry<warpforge::abi::signatures::GemmSm90>; 3] =
///         [warpforge::abi::entries::GEMM_SWIGLU_BF16; 3];
///     const SILU_MUL: warpforge::abi::Entry<warpforge::abi::signatures::SiluMul<Self::Device>> =
///         warpforge::abi::entries::SILU_MUL_BF16;
/// }
/// ```
pub trait SwigluElement: GemmInput + crate::gemm::GemmOutput {
    /// The element as the kernels' parameter lists name it.
    type Device: BufferElement<Host = Self>;
    /// The fused kernel's entries for this type: cooperative, ping-pong, narrow.
    const SWIGLU_ENTRIES: [Entry<GemmSm90>; 3];
    /// The unfused `silu_mul` kernel for this type.
    const SILU_MUL: Entry<SiluMul<Self::Device>>;
    /// The entry of a variant.
    fn swiglu_entry(pingpong: bool, narrow: bool) -> Entry<GemmSm90> {
        let [cooperative, pingpong_entry, narrow_entry] = Self::SWIGLU_ENTRIES;
        if pingpong {
            pingpong_entry
        } else if narrow {
            narrow_entry
        } else {
            cooperative
        }
    }
}
impl SwigluElement for half::bf16 {
    type Device = Bf16;
    const SWIGLU_ENTRIES: [Entry<GemmSm90>; 3] =
        [entries::GEMM_SWIGLU_BF16, entries::GEMM_SWIGLU_BF16_PINGPONG, entries::GEMM_SWIGLU_BF16_NARROW];
    const SILU_MUL: Entry<SiluMul<Bf16>> = entries::SILU_MUL_BF16;
}
impl SwigluElement for half::f16 {
    type Device = F16;
    const SWIGLU_ENTRIES: [Entry<GemmSm90>; 3] =
        [entries::GEMM_SWIGLU_F16, entries::GEMM_SWIGLU_F16_PINGPONG, entries::GEMM_SWIGLU_F16_NARROW];
    const SILU_MUL: Entry<SiluMul<F16>> = entries::SILU_MUL_F16;
}

/// One fused gate-up + SwiGLU call: `x` is `m × hidden`, each weight `intermediate × hidden`,
/// the output `m × intermediate`, all row-major and packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwigluProblem {
    /// Tokens (rows of x and of the output), ≥ 1.
    pub m: usize,
    /// Model width H: columns of x and of each weight (the reduction length), ≥ 1.
    pub hidden: usize,
    /// Intermediate width I: rows of each weight, columns of the output, ≥ 1.
    pub intermediate: usize,
    /// Consumer arrangement (a performance choice; `Auto` applies the GEMM's rules to the tile
    /// grid of the gate-up weight).
    pub consumers: Consumers,
    /// Tile width (a performance choice, as `consumers`): 256 gate-up columns (128 outputs) per
    /// tile, or 128 (64 outputs).
    pub tile_width: TileWidth,
}

impl SwigluProblem {
    /// The problem of `m` tokens through an MLP of width `hidden` and intermediate width
    /// `intermediate`.
    pub fn new(m: usize, hidden: usize, intermediate: usize) -> Self {
        SwigluProblem { m, hidden, intermediate, consumers: Consumers::Auto, tile_width: TileWidth::Auto }
    }

    /// Rows of the interleaved gate-up weight: `2·I` rounded up to whole blocks (saturating at
    /// `usize::MAX`, which no buffer holds).
    pub fn gate_up_rows(&self) -> usize {
        self.intermediate.div_ceil(GATE_UP_BLOCK).saturating_mul(2 * GATE_UP_BLOCK)
    }

    /// Checks the problem on its own (no GPU, no buffers): the shape limits and, with checked
    /// arithmetic, the elements each buffer must hold. Any field values give `Ok` or
    /// [`Error::InvalidArgument`], never a panic. [`Warpforge::swiglu`] runs this first.
    pub fn check(&self) -> Result<SwigluExtents> {
        let p = self;
        check(p.m >= 1 && p.hidden >= 1 && p.intermediate >= 1, || format!("empty problem {p:?}"))?;
        check(p.m < 1 << 31 && p.hidden < 1 << 31 && p.intermediate < 1 << 30, || {
            "m and hidden must be < 2^31, intermediate < 2^30".into()
        })?;
        let overflow = || Error::InvalidArgument(format!("the buffers of {p:?} overflow usize"));
        let product = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
        let rows = p.gate_up_rows();
        Ok(SwigluExtents {
            gate_up_rows: rows,
            x: product(p.m, p.hidden)?,
            w_gate_up: product(rows, p.hidden)?,
            out: product(p.m, p.intermediate)?,
        })
    }
}

/// What a valid [`SwigluProblem`] touches ([`SwigluProblem::check`]): the rows of the
/// interleaved weight and the elements each buffer must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwigluExtents {
    /// Rows of the interleaved gate-up weight.
    pub gate_up_rows: usize,
    /// Elements of x.
    pub x: usize,
    /// Elements of the interleaved weight.
    pub w_gate_up: usize,
    /// Elements of the output.
    pub out: usize,
}

/// Interleaves `gate` and `up` (each `intermediate × hidden`, row-major) into the gate-up weight
/// [`Warpforge::swiglu`] reads: `SwigluProblem::gate_up_rows()` rows of `hidden`, blocks of
/// [`GATE_UP_BLOCK`] gate rows then the same up rows; the last block's missing rows (when
/// `intermediate` is not a multiple of the block) are `zero`. A service does this once, when it
/// loads the weights.
pub fn interleave_gate_up<T: Copy>(
    gate: &[T],
    up: &[T],
    intermediate: usize,
    hidden: usize,
    zero: T,
) -> Result<Vec<T>> {
    let len = intermediate
        .checked_mul(hidden)
        .ok_or_else(|| Error::InvalidArgument("intermediate × hidden overflows".into()))?;
    if gate.len() != len || up.len() != len {
        return Err(Error::InvalidArgument(format!(
            "gate holds {} and up {} elements; intermediate × hidden is {len}",
            gate.len(),
            up.len()
        )));
    }
    let blocks = intermediate.div_ceil(GATE_UP_BLOCK);
    let rows = SwigluProblem::new(1, hidden, intermediate).gate_up_rows();
    let mut out = Vec::with_capacity(rows.saturating_mul(hidden));
    for block in 0..blocks {
        for source in [gate, up] {
            for r in block * GATE_UP_BLOCK..(block + 1) * GATE_UP_BLOCK {
                if r < intermediate {
                    out.extend_from_slice(&source[r * hidden..(r + 1) * hidden]);
                } else {
                    out.extend(std::iter::repeat_n(zero, hidden));
                }
            }
        }
    }
    Ok(out)
}

impl Warpforge {
    /// `out = silu(x·W_gateᵀ) ⊙ (x·W_upᵀ)`: `x` is `m × hidden`, `w_gate_up` the interleaved
    /// weight of [`interleave_gate_up`] (`gate_up_rows() × hidden`), `out` `m × intermediate`;
    /// all row-major, packed; f32 accumulation, one rounding at the end.
    pub fn swiglu<T: SwigluElement>(
        &self,
        stream: &Arc<CudaStream>,
        problem: &SwigluProblem,
        x: &impl DevicePtr<T>,
        w_gate_up: &impl DevicePtr<T>,
        out: &mut impl DevicePtrMut<T>,
    ) -> Result<()> {
        let p = problem;
        let launch = swiglu_launch::<T>(self, p)?;
        let e = p.check()?;
        let owners = [&**x.stream(), &**w_gate_up.stream(), &**out.stream()];
        self.module().check_context(stream, &owners)?;
        let rows = launch.tile_cols;
        let (need_x, need_w, need_out) = (e.x, e.w_gate_up, e.out);
        check(x.len() >= need_x, || format!("x holds {} elements, the problem reads {need_x}", x.len()))?;
        check(w_gate_up.len() >= need_w, || {
            format!(
                "w_gate_up holds {} elements, the problem reads {need_w} ({rows} interleaved rows)",
                w_gate_up.len()
            )
        })?;
        check(out.len() >= need_out, || format!("out holds {} elements, the problem writes {need_out}", out.len()))?;
        let x_k_major = self.k_major_operand(stream, x, true, p.m, p.hidden, p.hidden, 0, 1)?;
        let w_k_major = self.k_major_operand(stream, w_gate_up, true, rows, p.hidden, p.hidden, 0, 1)?;
        self.launch_sm90(stream, &launch, &x_k_major, &w_k_major, out)
    }

    /// The fused gate-up + SwiGLU of [`Warpforge::swiglu`] (bf16) with its output quantised for
    /// an FP8 down projection in the same epilogue: `codes` (`m × intermediate` e4m3, row-major)
    /// and `scales` (one f32 per row and 128 outputs, MN-major:
    /// `scales[g · round_up(m, 4) + row]`), exactly what [`Warpforge::quantize_per_token_group`]
    /// would write from the f32 SwiGLU values, and what [`Warpforge::fp8_gemm`] reads as A —
    /// one pass instead of a bf16 round trip and a quantisation kernel. `rounding` picks exact
    /// or power-of-two (UE8M0) scales. Rules beyond [`SwigluProblem::check`]'s: `intermediate`
    /// a multiple of 16 (the FP8 GEMM's K rule), the wide cooperative tile (`consumers` and
    /// `tile_width` `Auto` or `Cooperative`/`Wide`: one tile row's 128 outputs are one group),
    /// `codes` ≥ m·intermediate bytes, `scales` ≥ round_up(m, 4)·ceil(intermediate / 128) f32.
    #[allow(clippy::too_many_arguments)]
    pub fn swiglu_fp8(
        &self,
        stream: &Arc<CudaStream>,
        problem: &SwigluProblem,
        rounding: crate::ScaleRounding,
        x: &impl DevicePtr<half::bf16>,
        w_gate_up: &impl DevicePtr<half::bf16>,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let p = problem;
        check(p.intermediate.is_multiple_of(16), || {
            format!("swiglu_fp8 needs intermediate a multiple of 16 (the FP8 GEMM's K); got {}", p.intermediate)
        })?;
        check(
            matches!(p.consumers, Consumers::Auto | Consumers::Cooperative)
                && matches!(p.tile_width, TileWidth::Auto | TileWidth::Wide),
            || "swiglu_fp8 runs the wide cooperative tile (128 outputs per tile row: one scale group)".to_string(),
        )?;
        let forced = SwigluProblem { consumers: Consumers::Cooperative, tile_width: TileWidth::Wide, ..*p };
        let mut launch = swiglu_launch::<half::bf16>(self, &forced)?;
        launch.entry = match rounding {
            crate::ScaleRounding::Exact => entries::GEMM_SWIGLU_E4M3_BF16,
            crate::ScaleRounding::PowerOfTwo => entries::GEMM_SWIGLU_UE8M0_BF16,
        };
        let e = p.check()?;
        let owners = [&**x.stream(), &**w_gate_up.stream(), &**codes.stream(), &**scales.stream()];
        self.module().check_context(stream, &owners)?;
        let pitch = warpforge_logic::quant::group_scale_pitch(p.m)
            .ok_or_else(|| Error::InvalidArgument(format!("{p:?}: the scale pitch overflows")))?;
        let need_scales = pitch
            .checked_mul(p.intermediate.div_ceil(warpforge_logic::quant::GROUP))
            .ok_or_else(|| Error::InvalidArgument(format!("{p:?}: the scales overflow usize")))?;
        let rows = launch.tile_cols;
        check(x.len() >= e.x, || format!("x holds {} elements, the problem reads {}", x.len(), e.x))?;
        check(w_gate_up.len() >= e.w_gate_up, || {
            format!(
                "w_gate_up holds {} elements, the problem reads {} ({rows} interleaved rows)",
                w_gate_up.len(),
                e.w_gate_up
            )
        })?;
        check(codes.len() >= e.out, || format!("codes hold {} bytes, the problem writes {}", codes.len(), e.out))?;
        check(scales.len() >= need_scales, || {
            format!(
                "scales hold {} f32, the problem writes {need_scales} (round_up(m, 4) · ceil(I / 128))",
                scales.len()
            )
        })?;
        let x_k_major = self.k_major_operand(stream, x, true, p.m, p.hidden, p.hidden, 0, 1)?;
        let w_k_major = self.k_major_operand(stream, w_gate_up, true, rows, p.hidden, p.hidden, 0, 1)?;
        let (codes_ptr, codes_access) = codes.device_ptr_mut(stream);
        let (scales_ptr, scales_access) = scales.device_ptr_mut(stream);
        let params = warpforge_abi::GemmParams {
            m: p.m as u32,
            n: p.intermediate as u32,
            d: codes_ptr,
            c: scales_ptr,
            bias: 0,
            ldd: p.intermediate as u64,
            ldc: pitch as u64,
            stride_d: 0,
            stride_c: 0,
            alpha: 1.0,
            beta: 0.0,
            activation: 0,
            d_tma: 0,
            workspace: 0,
            flags: 0,
        };
        // SAFETY: the epilogue writes codes inside m × intermediate (pitch intermediate, even)
        // and scales inside round_up(m, 4) × ceil(I / 128), both checked above and borrowed
        // mutably until the kernel is enqueued (their guards travel with the launch); `d_tma`
        // is 0, so the zeroed D map is never read.
        unsafe {
            self.launch_sm90_body(
                stream,
                &launch,
                &x_k_major,
                &w_k_major,
                warpforge_abi::TensorMap::ZEROED,
                params,
                [codes_access, scales_access],
            )
        }
    }

    /// The plan [`Warpforge::swiglu`] launches for `problem` with `T` (after the same shape
    /// checks; buffers are not needed): which kernel, tile and schedule, on how many CTAs.
    pub fn swiglu_plan<T: SwigluElement>(&self, problem: &SwigluProblem) -> Result<GemmPlan> {
        swiglu_plan::<T>(self, problem)
    }
}

/// The plan [`Warpforge::swiglu`] launches for `problem` (shape checks only; no buffers).
fn swiglu_plan<T: SwigluElement>(wf: &Warpforge, problem: &SwigluProblem) -> Result<GemmPlan> {
    let launch = swiglu_launch::<T>(wf, problem)?;
    let plan = wf.plan_sm90(launch.entry, launch.variant, problem.m, launch.tile_cols, problem.hidden, 1)?;
    let forced = problem.consumers != Consumers::Auto || problem.tile_width != TileWidth::Auto;
    Ok(GemmPlan { chosen_by: if forced { PlanSource::Caller } else { PlanSource::Model }, ..plan })
}

/// The checked shape of a SwiGLU call and its launch: the plain GEMM's variant rules over the
/// same tile grid (N = the gate-up rows); the fused kernel has cooperative, ping-pong and narrow
/// entries, no clusters.
fn swiglu_launch<T: SwigluElement>(wf: &Warpforge, p: &SwigluProblem) -> Result<Sm90Launch> {
    wf.check_sm90("swiglu")?;
    let extents = p.check()?;
    let rows = extents.gate_up_rows;
    let mut tiles_of = GemmProblem::new(p.m, rows, p.hidden);
    (tiles_of.consumers, tiles_of.tile_width, tiles_of.clusters) = (p.consumers, p.tile_width, Clusters::Off);
    if p.consumers == Consumers::Auto && p.tile_width != TileWidth::Narrow && p.m <= DECODE_ROWS {
        tiles_of.consumers = Consumers::PingPong;
    }
    let name = <T as GemmInput>::NAME;
    let variant = Variant::choose(&tiles_of, name, name, wf.sm_count())?;
    let math = EpilogueMath {
        c: 0,
        c_is_d: false,
        bias: 0,
        ldc: 0,
        stride_c: 0,
        alpha: 1.0,
        beta: 0.0,
        activation: Activation::None,
    };
    let shape = OutputShape { cols: p.intermediate, ld: p.intermediate, batch_stride: extents.out };
    let entry = T::swiglu_entry(variant.pingpong, variant.narrow);
    Ok(Sm90Launch { entry, variant, tile_cols: rows, out: shape, math })
}
