//! Quantisation entry points: FP8 per-token groups, weight blocks and whole tensors, and the
//! microscaled MXFP8 and NVFP4 formats (encode and decode), on the kernels of
//! `gpu-kernels/kernels/src/quant*.rs`.
//!
//! [`QuantScheme::extents`] is the one place the host states each scheme's shape rules and
//! buffer sizes (pure, checked arithmetic, CPU-tested); the scale layouts themselves are
//! `logic::quant`'s (see its module doc), which the kernels and the tests' references share.
//! Every method checks the stream's and buffers' context, the extents, the buffer lengths
//! (longer buffers are fine: only the leading elements are touched) and 16-byte alignment of
//! the element and code buffers, then launches; none of them synchronises the stream.
//!
//! Numerics (all encoders): round to nearest even, saturating to the largest finite value;
//! ±∞ encodes as ±max; NaN as NaN (e4m3/e5m2 `0x7F | sign`, or a NaN block scale for NVFP4,
//! whose e2m1 elements have none); scales come from the largest *finite* magnitude, and an
//! all-zero group gets scale 1.

use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use warpforge_abi::elements::{Bf16, F16};
use warpforge_abi::signatures::{
    Amax, Mxfp8Decode, Mxfp8Encode, Nvfp4Decode, Nvfp4Encode, Nvfp4EncodeStatic, QuantScaled, QuantTensor,
    QuantTensorStatic,
};
use warpforge_abi::{Entry, entries};
use warpforge_host::{BufferElement, Error, LaunchConfig, ParamList, Result, TypedKernel};
use warpforge_logic::quant as q;

use crate::Warpforge;

/// Threads per block of the grid-stride quantising kernels.
const THREADS: u32 = 256;
/// Threads per block of the weight-block kernel (its `.reqntid`).
const BLOCK_THREADS: u32 = 512;
/// Alignment of the element and code buffers (16-byte vector accesses).
const ALIGN: u64 = 16;
/// Elements per vector (one thread's share per step).
const VEC: usize = 8;

/// A 16-bit input the quantisers read: `bf16` or `f16`. Sealed.
pub trait QuantInput: crate::sealed::Sealed + cudarc::driver::DeviceRepr + Copy + 'static {
    /// The element as the entries name it.
    type Device: BufferElement<Host = Self>;
    /// Per-token groups.
    const GROUP: Entry<QuantScaled<Self::Device>>;
    /// Weight blocks.
    const BLOCK: Entry<QuantScaled<Self::Device>>;
    /// The tensor amax.
    const AMAX: Entry<Amax<Self::Device>>;
    /// Per-tensor e4m3.
    const TENSOR_E4M3: Entry<QuantTensor<Self::Device>>;
    /// Per-tensor e5m2.
    const TENSOR_E5M2: Entry<QuantTensor<Self::Device>>;
    /// Per-tensor e4m3, the caller's scale.
    const TENSOR_STATIC_E4M3: Entry<QuantTensorStatic<Self::Device>>;
    /// Per-tensor e5m2, the caller's scale.
    const TENSOR_STATIC_E5M2: Entry<QuantTensorStatic<Self::Device>>;
    /// MXFP8 encode.
    const MXFP8: Entry<Mxfp8Encode<Self::Device>>;
    /// NVFP4 encode.
    const NVFP4: Entry<Nvfp4Encode<Self::Device>>;
    /// NVFP4 encode, the caller's global scale.
    const NVFP4_STATIC: Entry<Nvfp4EncodeStatic<Self::Device>>;
}

macro_rules! quant_inputs {
    ($($host:ty => $dev:ident: $group:ident, $block:ident, $amax:ident, $e4:ident, $e5:ident, $s4:ident, $s5:ident,
        $mx:ident, $nv:ident, $nvs:ident;)*) => {$(
        impl QuantInput for $host {
            type Device = $dev;
            const GROUP: Entry<QuantScaled<$dev>> = entries::$group;
            const BLOCK: Entry<QuantScaled<$dev>> = entries::$block;
            const AMAX: Entry<Amax<$dev>> = entries::$amax;
            const TENSOR_E4M3: Entry<QuantTensor<$dev>> = entries::$e4;
            const TENSOR_E5M2: Entry<QuantTensor<$dev>> = entries::$e5;
            const TENSOR_STATIC_E4M3: Entry<QuantTensorStatic<$dev>> = entries::$s4;
            const TENSOR_STATIC_E5M2: Entry<QuantTensorStatic<$dev>> = entries::$s5;
            const MXFP8: Entry<Mxfp8Encode<$dev>> = entries::$mx;
            const NVFP4: Entry<Nvfp4Encode<$dev>> = entries::$nv;
            const NVFP4_STATIC: Entry<Nvfp4EncodeStatic<$dev>> = entries::$nvs;
        }
    )*};
}
quant_inputs! {
    half::bf16 => Bf16: QUANT_GROUP_E4M3_BF16, QUANT_BLOCK_E4M3_BF16, AMAX_BF16, QUANT_TENSOR_E4M3_BF16,
        QUANT_TENSOR_E5M2_BF16, QUANT_TENSOR_STATIC_E4M3_BF16, QUANT_TENSOR_STATIC_E5M2_BF16, MXFP8_ENCODE_BF16,
        NVFP4_ENCODE_BF16, NVFP4_ENCODE_STATIC_BF16;
    half::f16 => F16: QUANT_GROUP_E4M3_F16, QUANT_BLOCK_E4M3_F16, AMAX_F16, QUANT_TENSOR_E4M3_F16,
        QUANT_TENSOR_E5M2_F16, QUANT_TENSOR_STATIC_E4M3_F16, QUANT_TENSOR_STATIC_E5M2_F16, MXFP8_ENCODE_F16,
        NVFP4_ENCODE_F16, NVFP4_ENCODE_STATIC_F16;
}

/// What the decoders write: `bf16` (the f32 value rounded once) or `f32` (exact). Sealed.
pub trait DequantOutput: crate::sealed::Sealed + cudarc::driver::DeviceRepr + Copy + 'static {
    /// The element as the entries name it.
    type Device: BufferElement<Host = Self>;
    /// MXFP8 decode.
    const MXFP8: Entry<Mxfp8Decode<Self::Device>>;
    /// NVFP4 decode.
    const NVFP4: Entry<Nvfp4Decode<Self::Device>>;
}

impl DequantOutput for half::bf16 {
    type Device = Bf16;
    const MXFP8: Entry<Mxfp8Decode<Bf16>> = entries::MXFP8_DECODE_BF16;
    const NVFP4: Entry<Nvfp4Decode<Bf16>> = entries::NVFP4_DECODE_BF16;
}

impl DequantOutput for f32 {
    type Device = f32;
    const MXFP8: Entry<Mxfp8Decode<f32>> = entries::MXFP8_DECODE_F32;
    const NVFP4: Entry<Nvfp4Decode<f32>> = entries::NVFP4_DECODE_F32;
}

/// An FP8 format of the per-tensor quantiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// E4M3, max 448.
    E4m3,
    /// E5M2, max 57344.
    E5m2,
}

/// How a per-token or per-block scale `amax / 448` is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScaleRounding {
    /// As computed.
    #[default]
    Exact,
    /// Rounded up to a power of two (UE8M0-style: dequantising only moves exponents).
    PowerOfTwo,
}

/// A quantisation layout over a `rows × cols` row-major matrix (K = `cols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantScheme {
    /// 1 × 128 groups along K (`cols % 128 == 0`), f32 scales MN-major:
    /// `scales[g · round_up(rows, 4) + row]`, padding rows written as 0.
    PerTokenGroup,
    /// 128 × 128 blocks (`cols % 8 == 0`, ragged edge blocks allowed), f32 scales row-major
    /// over blocks: `scales[(n / 128) · ceil(cols / 128) + k / 128]`.
    PerBlock,
    /// One f32 scale (any shape).
    PerTensor,
    /// OCP MXFP8: e4m3 elements, one UE8M0 byte per 32 K elements (`cols % 32 == 0`),
    /// `scales[row · cols/32 + k/32]`.
    Mxfp8,
    /// NVFP4: e2m1 pairs (low nibble even), one e4m3 byte per 16 K elements (`cols % 16 == 0`),
    /// `scales[row · cols/16 + k/16]`, and one f32 global scale.
    Nvfp4,
}

/// The buffer sizes a [`QuantScheme`] needs, from [`QuantScheme::extents`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantExtents {
    /// Input (or decoded) elements: `rows · cols`.
    pub elements: usize,
    /// Code bytes: `rows · cols`, half that for NVFP4.
    pub codes: usize,
    /// Scale entries (f32, or bytes for MXFP8 and NVFP4).
    pub scales: usize,
}

impl QuantScheme {
    /// The K multiple the scheme needs.
    fn k_multiple(self) -> usize {
        match self {
            QuantScheme::PerTokenGroup => q::GROUP,
            QuantScheme::PerBlock => VEC,
            QuantScheme::PerTensor => 1,
            QuantScheme::Mxfp8 => q::MX_BLOCK,
            QuantScheme::Nvfp4 => q::NVFP4_BLOCK,
        }
    }

    /// Checks `rows × cols` against the scheme's rules (both ≥ 1, K a multiple of the
    /// scheme's block, sizes without overflow) and returns its buffer sizes.
    pub fn extents(self, rows: usize, cols: usize) -> Result<QuantExtents> {
        let invalid =
            |why: String| Err(Error::InvalidArgument(format!("{self:?} quantisation of {rows} × {cols}: {why}")));
        if rows == 0 || cols == 0 {
            return invalid("rows and cols must be ≥ 1".into());
        }
        let multiple = self.k_multiple();
        if !cols.is_multiple_of(multiple) {
            return invalid(format!("cols (K) must be a multiple of {multiple}"));
        }
        let Some(elements) = rows.checked_mul(cols).filter(|&e| e <= isize::MAX as usize / 4) else {
            return invalid("rows · cols overflows".into());
        };
        if elements > q::MAX_ELEMENTS {
            return invalid(format!("{elements} elements, more than one launch takes ({})", q::MAX_ELEMENTS));
        }
        let scales = match self {
            QuantScheme::PerTokenGroup => match q::group_scale_pitch(rows) {
                Some(pitch) => (cols / q::GROUP).checked_mul(pitch),
                None => None,
            },
            QuantScheme::PerBlock => rows.div_ceil(q::BLOCK).checked_mul(cols.div_ceil(q::BLOCK)),
            QuantScheme::PerTensor => Some(1),
            QuantScheme::Mxfp8 => Some(elements / q::MX_BLOCK),
            QuantScheme::Nvfp4 => Some(elements / q::NVFP4_BLOCK),
        };
        let Some(scales) = scales else { return invalid("the scale count overflows".into()) };
        let codes = if self == QuantScheme::Nvfp4 { elements / 2 } else { elements };
        Ok(QuantExtents { elements, codes, scales })
    }
}

/// `InvalidArgument` naming the value when a caller's static scale is outside what the kernel
/// takes (`ok`, from `logic::quant`'s rule for that scale).
fn check_static_scale(op: &str, name: &str, value: f32, ok: bool) -> Result<()> {
    if ok {
        return Ok(());
    }
    let range = if name == "global_scale" { "a positive normal f32 below 2^117" } else { "a positive normal f32" };
    Err(Error::InvalidArgument(format!("{op}: {name} is {value:e}; it must be {range}")))
}

/// A buffer's role, length and address for the checks.
struct Buffer {
    name: &'static str,
    len: usize,
    need: usize,
    addr: Option<u64>,
}

impl Buffer {
    /// A buffer with no alignment rule (scales).
    fn unaligned(name: &'static str, len: usize, need: usize) -> Self {
        Buffer { name, len, need, addr: None }
    }
}

/// Checks lengths and (where given) 16-byte alignment.
fn check_buffers(op: &str, buffers: &[Buffer]) -> Result<()> {
    for b in buffers {
        if b.len < b.need {
            return Err(Error::InvalidArgument(format!("{op}: {} holds {} elements, needs {}", b.name, b.len, b.need)));
        }
        if b.addr.is_some_and(|a| !a.is_multiple_of(ALIGN)) {
            return Err(Error::InvalidArgument(format!("{op}: {} must be 16-byte aligned", b.name)));
        }
    }
    Ok(())
}

/// An encoder's checks: its input `x` (the extents' elements) and `codes` (their code bytes),
/// both 16-byte aligned, then the `scales` and other outputs in `rest`.
fn check_encoder_buffers<T>(
    op: &str,
    stream: &CudaStream,
    e: &QuantExtents,
    x: &impl DevicePtr<T>,
    codes: &mut impl DevicePtrMut<u8>,
    rest: &[Buffer],
) -> Result<()> {
    let inputs = [
        Buffer { name: "x", len: x.len(), need: e.elements, addr: address(x, stream) },
        Buffer { name: "codes", len: codes.len(), need: e.codes, addr: address_mut(codes, stream) },
    ];
    check_buffers(op, &inputs)?;
    check_buffers(op, rest)
}

fn address<T>(buffer: &impl DevicePtr<T>, stream: &CudaStream) -> Option<u64> {
    Some(buffer.device_ptr(stream).0)
}

fn address_mut<T>(buffer: &mut impl DevicePtrMut<T>, stream: &CudaStream) -> Option<u64> {
    Some(buffer.device_ptr_mut(stream).0)
}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver { call, source }
}

impl Warpforge {
    /// A grid for `work` units of one thread each: at most the blocks of `kernel` resident at
    /// once (its occupancy at `THREADS` threads), since the kernels walk by the grid's stride.
    fn quant_grid<L: ParamList>(kernel: &TypedKernel<L>, work: usize) -> Result<LaunchConfig> {
        let plan = kernel.kernel().plan_persistent(THREADS, 0, None, work.div_ceil(THREADS as usize).max(1) as u64)?;
        Ok(LaunchConfig::linear(plan.blocks, THREADS))
    }

    /// Per-token 1 × 128 e4m3 quantisation of the `m × k` row-major activation `x`
    /// (`k % 128 == 0`): `codes` gets `m · k` e4m3 bytes (row-major), `scales` (16-byte
    /// aligned) the f32 scale of each group MN-major, `scales[g · round_up(m, 4) + row]`
    /// (`k/128 · round_up(m, 4)` entries; the padding rows get 0). Scale `amax/448` (or its power-of-two ceiling), 1 for
    /// an all-zero group.
    #[allow(clippy::too_many_arguments)]
    pub fn quantize_per_token_group<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        x: &impl DevicePtr<T>,
        rounding: ScaleRounding,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        self.quantize_scaled(stream, QuantScheme::PerTokenGroup, T::GROUP, m, k, x, rounding, codes, scales)
    }

    /// 128 × 128-block e4m3 quantisation of the `n × k` row-major weight `w` (`k % 8 == 0`;
    /// edge blocks cover what remains): `codes` gets `n · k` e4m3 bytes, `scales` one f32 per
    /// block, `scales[(row / 128) · ceil(k / 128) + col / 128]`.
    #[allow(clippy::too_many_arguments)]
    pub fn quantize_per_block<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        n: usize,
        k: usize,
        w: &impl DevicePtr<T>,
        rounding: ScaleRounding,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        self.quantize_scaled(stream, QuantScheme::PerBlock, T::BLOCK, n, k, w, rounding, codes, scales)
    }

    #[allow(clippy::too_many_arguments)]
    fn quantize_scaled<E: BufferElement>(
        &self,
        stream: &Arc<CudaStream>,
        scheme: QuantScheme,
        entry: Entry<QuantScaled<E>>,
        rows: usize,
        cols: usize,
        x: &impl DevicePtr<E::Host>,
        rounding: ScaleRounding,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), codes.stream(), scales.stream()])?;
        let e = scheme.extents(rows, cols)?;
        check_encoder_buffers(
            &format!("{scheme:?}"),
            stream,
            &e,
            x,
            codes,
            // The per-token kernel writes a quad of rows' scales with one 16-byte store.
            &[match scheme {
                QuantScheme::PerTokenGroup => {
                    Buffer { name: "scales", len: scales.len(), need: e.scales, addr: address_mut(scales, stream) }
                }
                _ => Buffer::unaligned("scales", scales.len(), e.scales),
            }],
        )?;
        let kernel = self.entry(entry)?;
        let config = if scheme == QuantScheme::PerBlock {
            // Persistent: as many CTAs as fit at once (each walks blocks), at most one per block.
            let plan = kernel.kernel().plan_persistent(BLOCK_THREADS, 0, None, e.scales as u64)?;
            LaunchConfig::linear(plan.blocks, BLOCK_THREADS)
        } else {
            Self::quant_grid(&kernel, e.elements / VEC)?
        };
        let pow2 = (rounding == ScaleRounding::PowerOfTwo) as u32;
        // SAFETY: x, codes and scales hold what the scheme's extents need (checked above), x and
        // codes (and per-token scales) are 16-byte aligned, and codes and scales are borrowed mutably, so they overlap
        // nothing else; cols meets the scheme's multiple (extents).
        unsafe { kernel.launch(stream, &config, (rows as u64, cols as u64, pow2, x, codes, scales), []) }
    }

    /// Per-tensor FP8 quantisation of `x` (any length ≥ 1): a device-side amax (finite
    /// magnitudes), then `codes[i] = format(x[i] · (1 / scale))` with `scale = amax / max(format)`
    /// (1 when the amax is 0), written to `scale[0]`. No host round-trip between the passes.
    pub fn quantize_per_tensor<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        format: Fp8Format,
        x: &impl DevicePtr<T>,
        codes: &mut impl DevicePtrMut<u8>,
        scale: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), codes.stream(), scale.stream()])?;
        let e = QuantScheme::PerTensor.extents(1, x.len())?;
        check_encoder_buffers(
            "quantize_per_tensor",
            stream,
            &e,
            x,
            codes,
            &[Buffer::unaligned("scale", scale.len(), 1)],
        )?;
        let amax = self.launch_amax::<T>(stream, x, e.elements)?;
        let entry = if format == Fp8Format::E4m3 { T::TENSOR_E4M3 } else { T::TENSOR_E5M2 };
        let kernel = self.entry(entry)?;
        let config = Self::quant_grid(&kernel, e.elements.div_ceil(VEC))?;
        // SAFETY: x holds n elements (16-byte aligned), codes n bytes (16-byte aligned), scale
        // one f32, amax one word written by the launch before on this stream; codes and scale
        // are borrowed mutably and amax is this call's own.
        unsafe { kernel.launch(stream, &config, (e.elements as u64, x, &amax, codes, scale), []) }
    }

    /// Per-tensor FP8 quantisation of `x` (any length ≥ 1) with the caller's `scale` (static
    /// scaling, e.g. a calibrated activation scale): `codes[i] = format(x[i] · (1 / scale))`,
    /// one pass over `x` and no amax. Elements past `max(format) · scale` saturate. `scale` must
    /// be a positive normal f32 (`InvalidArgument` otherwise: zero, negative, subnormal, ∞ or
    /// NaN).
    pub fn quantize_per_tensor_static<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        format: Fp8Format,
        x: &impl DevicePtr<T>,
        scale: f32,
        codes: &mut impl DevicePtrMut<u8>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), codes.stream()])?;
        check_static_scale("quantize_per_tensor_static", "scale", scale, q::static_scale_ok(scale))?;
        let e = QuantScheme::PerTensor.extents(1, x.len())?;
        check_encoder_buffers("quantize_per_tensor_static", stream, &e, x, codes, &[])?;
        let entry = if format == Fp8Format::E4m3 { T::TENSOR_STATIC_E4M3 } else { T::TENSOR_STATIC_E5M2 };
        let kernel = self.entry(entry)?;
        let config = Self::quant_grid(&kernel, e.elements.div_ceil(VEC))?;
        // SAFETY: x holds n elements (16-byte aligned), codes n bytes (16-byte aligned) and is
        // borrowed mutably; scale is a positive normal f32 (checked above).
        unsafe { kernel.launch(stream, &config, (e.elements as u64, x, scale, codes), []) }
    }

    /// A fresh zeroed word with the amax of `x[..n]` folded in by `amax_*`.
    fn launch_amax<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        x: &impl DevicePtr<T>,
        n: usize,
    ) -> Result<cudarc::driver::CudaSlice<u32>> {
        let mut amax = stream.alloc_zeros::<u32>(1).map_err(driver("cuMemAlloc"))?;
        let kernel = self.entry(T::AMAX)?;
        let config = Self::quant_grid(&kernel, n.div_ceil(VEC))?;
        // SAFETY: x holds n elements, 16-byte aligned (the caller checked); amax is one zeroed
        // word of this call's own, only touched atomically by the kernel.
        unsafe { kernel.launch(stream, &config, (n as u64, x, &mut amax), [])? };
        Ok(amax)
    }

    /// MXFP8 (OCP MX) encode of the `m × k` row-major `x` (`k % 32 == 0`): `codes` gets e4m3
    /// bytes, `scales` one UE8M0 byte per 32 consecutive K elements, `scales[row · k/32 +
    /// k_idx/32]`, the exponent `floor(log2(amax)) − 8` clamped to `−127..=127` (byte 127, scale
    /// 1, for an all-zero block); elements past `448 · scale` saturate.
    pub fn mxfp8_encode<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        x: &impl DevicePtr<T>,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<u8>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), codes.stream(), scales.stream()])?;
        let e = QuantScheme::Mxfp8.extents(m, k)?;
        check_encoder_buffers(
            "mxfp8_encode",
            stream,
            &e,
            x,
            codes,
            &[Buffer::unaligned("scales", scales.len(), e.scales)],
        )?;
        let kernel = self.entry(T::MXFP8)?;
        let config = Self::quant_grid(&kernel, e.elements / VEC)?;
        // SAFETY: extents and buffers checked above (16-byte aligned x and codes); codes and
        // scales are borrowed mutably.
        unsafe { kernel.launch(stream, &config, (e.elements as u64, x, codes, scales), []) }
    }

    /// MXFP8 decode: `out[i] = e4m3(codes[i]) · 2^(scales[i/32] − 127)` over an `m × k` matrix
    /// (`k % 32 == 0`); NaN codes and the NaN scale byte 0xFF decode to NaN.
    pub fn mxfp8_decode<O: DequantOutput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        codes: &impl DevicePtr<u8>,
        scales: &impl DevicePtr<u8>,
        out: &mut impl DevicePtrMut<O>,
    ) -> Result<()> {
        self.module().check_context(stream, &[codes.stream(), scales.stream(), out.stream()])?;
        let e = QuantScheme::Mxfp8.extents(m, k)?;
        check_buffers(
            "mxfp8_decode",
            &[
                Buffer { name: "codes", len: codes.len(), need: e.codes, addr: address(codes, stream) },
                Buffer::unaligned("scales", scales.len(), e.scales),
                Buffer { name: "out", len: out.len(), need: e.elements, addr: address_mut(out, stream) },
            ],
        )?;
        let kernel = self.entry(O::MXFP8)?;
        let config = Self::quant_grid(&kernel, e.elements / VEC)?;
        // SAFETY: extents and buffers checked above (16-byte aligned codes and out); out is
        // borrowed mutably.
        unsafe { kernel.launch(stream, &config, (e.elements as u64, codes, scales, out), []) }
    }

    /// NVFP4 encode of the `m × k` row-major `x` (`k % 16 == 0`): a device-side tensor amax,
    /// the global scale `amax / (448 · 6)` written to `global_scale[0]` (1 when the amax is 0),
    /// one e4m3 scale byte per 16 K elements `e4m3(block_amax / 6 / global)` (the NaN byte
    /// 0x7F for a block holding a NaN: e2m1 has none), and e2m1 codes two to a byte (`k/2`
    /// bytes a row, the even element in the low nibble), `e2m1(x / (scale · global))`, ±∞ and
    /// overflow saturating to ±6.
    #[allow(clippy::too_many_arguments)]
    pub fn nvfp4_encode<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        x: &impl DevicePtr<T>,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<u8>,
        global_scale: &mut impl DevicePtrMut<f32>,
    ) -> Result<()> {
        let streams: [&CudaStream; 4] = [x.stream(), codes.stream(), scales.stream(), global_scale.stream()];
        self.module().check_context(stream, &streams)?;
        let e = QuantScheme::Nvfp4.extents(m, k)?;
        check_encoder_buffers(
            "nvfp4_encode",
            stream,
            &e,
            x,
            codes,
            &[
                Buffer::unaligned("scales", scales.len(), e.scales),
                Buffer::unaligned("global_scale", global_scale.len(), 1),
            ],
        )?;
        let amax = self.launch_amax::<T>(stream, x, e.elements)?;
        let kernel = self.entry(T::NVFP4)?;
        let config = Self::quant_grid(&kernel, e.elements / VEC)?;
        // SAFETY: extents and buffers checked above (16-byte aligned x and codes); amax is this
        // call's word, written by the launch before on this stream; the outputs are borrowed
        // mutably.
        unsafe { kernel.launch(stream, &config, (e.elements as u64, x, &amax, codes, scales, global_scale), []) }
    }

    /// NVFP4 encode of the `m × k` row-major `x` (`k % 16 == 0`) under the caller's
    /// `global_scale` (static scaling): as [`Warpforge::nvfp4_encode`] with `global_scale` in
    /// place of `amax / (448 · 6)`, one pass over `x` and no amax. A block whose amax exceeds
    /// `6 · 448 · global_scale` gets the scale byte for 448 and its elements saturate to ±6.
    /// `global_scale` must be a positive normal f32 below 2^117 (`InvalidArgument`
    /// otherwise); decode with the same value.
    #[allow(clippy::too_many_arguments)]
    pub fn nvfp4_encode_static<T: QuantInput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        x: &impl DevicePtr<T>,
        global_scale: f32,
        codes: &mut impl DevicePtrMut<u8>,
        scales: &mut impl DevicePtrMut<u8>,
    ) -> Result<()> {
        self.module().check_context(stream, &[x.stream(), codes.stream(), scales.stream()])?;
        let ok = q::nvfp4_static_global_scale_ok(global_scale);
        check_static_scale("nvfp4_encode_static", "global_scale", global_scale, ok)?;
        let e = QuantScheme::Nvfp4.extents(m, k)?;
        check_encoder_buffers(
            "nvfp4_encode_static",
            stream,
            &e,
            x,
            codes,
            &[Buffer::unaligned("scales", scales.len(), e.scales)],
        )?;
        let kernel = self.entry(T::NVFP4_STATIC)?;
        let config = Self::quant_grid(&kernel, e.elements / VEC)?;
        // SAFETY: extents and buffers checked above (16-byte aligned x and codes); the outputs
        // are borrowed mutably; global_scale is in the divisor's range (checked above).
        unsafe { kernel.launch(stream, &config, (e.elements as u64, x, global_scale, codes, scales), []) }
    }

    /// NVFP4 decode: `out[i] = e2m1(code i) · (e4m3(scales[i/16]) · global_scale[0])` over an
    /// `m × k` matrix (`k % 16 == 0`); a NaN scale byte decodes its block to NaN.
    #[allow(clippy::too_many_arguments)]
    pub fn nvfp4_decode<O: DequantOutput>(
        &self,
        stream: &Arc<CudaStream>,
        m: usize,
        k: usize,
        codes: &impl DevicePtr<u8>,
        scales: &impl DevicePtr<u8>,
        global_scale: &impl DevicePtr<f32>,
        out: &mut impl DevicePtrMut<O>,
    ) -> Result<()> {
        let streams: [&CudaStream; 4] = [codes.stream(), scales.stream(), global_scale.stream(), out.stream()];
        self.module().check_context(stream, &streams)?;
        let e = QuantScheme::Nvfp4.extents(m, k)?;
        check_buffers(
            "nvfp4_decode",
            &[
                Buffer { name: "codes", len: codes.len(), need: e.codes, addr: address(codes, stream) },
                Buffer::unaligned("scales", scales.len(), e.scales),
                Buffer::unaligned("global_scale", global_scale.len(), 1),
                Buffer { name: "out", len: out.len(), need: e.elements, addr: address_mut(out, stream) },
            ],
        )?;
        let kernel = self.entry(O::NVFP4)?;
        let config = Self::quant_grid(&kernel, e.elements / VEC)?;
        // SAFETY: extents and buffers checked above (16-byte aligned codes and out); out is
        // borrowed mutably.
        unsafe { kernel.launch(stream, &config, (e.elements as u64, codes, scales, global_scale, out), []) }
    }
}
