//! warpforge's quantisation kernels against the H200's own copy bandwidth, in one process.
//!
//! Each kernel is memory-bound: the figure of merit is bytes read + written per second, set
//! against a device-to-device copy (`cuMemcpyDtoDAsync`) of the input's size timed in the same
//! rounds. Inputs: bf16 matrices of random uniform(-1, 1) values (never zero) with an isolated
//! 1e3 spike every 4099 elements, 64 MiB and 256 MiB. Per row: a warm-up, then 7 rounds of
//! `kernel × reps` and `copy × reps` timed with CUDA events, the order alternating per round;
//! medians reported. Bytes counted per kernel (elements e): per-token 1 × 128 and 128 × 128
//! blocks read 2e and write e + scales; per-tensor reads 2e twice (amax, then the quantiser)
//! and writes e; MXFP8 encode reads 2e and writes e + e/32, decode the reverse; NVFP4 encode
//! reads 2e twice and writes e/2 + e/16, decode reads e/2 + e/16 and writes 2e. The static
//! variants (the caller's scale: the tensor's own, computed on the host) read 2e once: per-tensor
//! writes e, NVFP4 e/2 + e/16.
//!
//! After the timed rounds every output is checked at 4096 random elements against
//! `logic::quant` (the references the GPU tests use), bit for bit: each encoder's scales and
//! codes from the input, each decoder's values from the codes and scales on the device. A
//! failure stops the bench.
//!
//! Run: `cargo bench --bench kernels -- quant` (on a GPU machine: `.gpu/bench quant`), optionally
//! `filter=<text>`: only the rows whose `<Kernel> <M>x<K>` label contains the text (e.g.
//! `filter=PerTokenGroup`, `filter=16384x`; a profiler then sees one kernel at one size). Writes
//! `quant.csv` to `$OUT` (or the current directory).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use half::bf16;
use warpforge::Warpforge;
use warpforge::logic::quant::{self, Minifloat};
use warpforge::quant::{Fp8Format, ScaleRounding};

use crate::common::{BatchTimer, Bench, Result, median, mix, sm_clock_mhz};

const ROUNDS: usize = 7;
const ROUND_SECONDS: f64 = 0.02;
const SAMPLES: u64 = 4096;
/// Elements between spikes of 1e3 in the input.
const SPIKE_EVERY: usize = 4099;

/// The quantisation kernels timed.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    PerTokenGroup,
    PerBlock,
    PerTensor,
    Mxfp8Encode,
    Mxfp8Decode,
    Nvfp4Encode,
    Nvfp4Decode,
    PerTensorStatic,
    Nvfp4EncodeStatic,
}

impl Kernel {
    const ALL: [Kernel; 9] = [
        Kernel::PerTokenGroup,
        Kernel::PerBlock,
        Kernel::PerTensor,
        Kernel::Mxfp8Encode,
        Kernel::Mxfp8Decode,
        Kernel::Nvfp4Encode,
        Kernel::Nvfp4Decode,
        Kernel::PerTensorStatic,
        Kernel::Nvfp4EncodeStatic,
    ];

    /// Bytes read + written for `e` elements (module doc).
    fn bytes(self, e: f64) -> f64 {
        match self {
            Kernel::PerTokenGroup => 3.0 * e + 4.0 * e / 128.0,
            Kernel::PerBlock => 3.0 * e + 4.0 * e / 16384.0,
            Kernel::PerTensor => 5.0 * e,
            Kernel::Mxfp8Encode | Kernel::Mxfp8Decode => 3.0 * e + e / 32.0,
            Kernel::Nvfp4Encode => 4.0 * e + e / 2.0 + e / 16.0,
            Kernel::Nvfp4Decode => 2.5 * e + e / 16.0,
            Kernel::PerTensorStatic => 3.0 * e,
            Kernel::Nvfp4EncodeStatic => 2.0 * e + e / 2.0 + e / 16.0,
        }
    }
}

/// One size's buffers: the input, every kernel's outputs, and the copy's destination.
struct Buffers {
    m: usize,
    k: usize,
    host: Vec<bf16>,
    /// The input's finite amax (the static variants' scales come from it).
    amax: f32,
    x: CudaSlice<bf16>,
    codes: CudaSlice<u8>,
    f32_scales: CudaSlice<f32>,
    byte_scales: CudaSlice<u8>,
    decoded: CudaSlice<bf16>,
    copy: CudaSlice<bf16>,
}

impl Buffers {
    fn new(stream: &Arc<CudaStream>, m: usize, k: usize) -> Result<Self> {
        let e = m * k;
        let host: Vec<bf16> = (0..e)
            .map(|i| {
                let u = (mix(i as u64 + 7) >> 11) as f64 / (1u64 << 53) as f64;
                let v = if i % SPIKE_EVERY == 0 { 1e3 } else { 2.0 * u - 1.0 };
                bf16::from_f64(if v == 0.0 { 0.5 } else { v })
            })
            .collect();
        let scales = (m.div_ceil(4) * 4) * (k / 16).max(1);
        let amax = host.iter().map(|v| quant::finite_abs(v.to_f32())).fold(0.0f32, quant::amax_combine);
        Ok(Self {
            m,
            k,
            amax,
            x: stream.clone_htod(&host)?,
            host,
            codes: stream.alloc_zeros(e)?,
            f32_scales: stream.alloc_zeros(scales)?,
            byte_scales: stream.alloc_zeros(scales)?,
            decoded: stream.alloc_zeros(e)?,
            copy: stream.alloc_zeros(e)?,
        })
    }

    /// Runs `kernel` once (the decoders decode what the matching encoder wrote last).
    fn run(&mut self, wf: &Warpforge, stream: &Arc<CudaStream>, kernel: Kernel) -> Result<()> {
        let (m, k) = (self.m, self.k);
        match kernel {
            Kernel::PerTokenGroup => wf.quantize_per_token_group(
                stream,
                m,
                k,
                &self.x,
                ScaleRounding::Exact,
                &mut self.codes,
                &mut self.f32_scales,
            )?,
            Kernel::PerBlock => wf.quantize_per_block(
                stream,
                m,
                k,
                &self.x,
                ScaleRounding::Exact,
                &mut self.codes,
                &mut self.f32_scales,
            )?,
            Kernel::PerTensor => {
                wf.quantize_per_tensor(stream, Fp8Format::E4m3, &self.x, &mut self.codes, &mut self.f32_scales)?
            }
            Kernel::Mxfp8Encode => wf.mxfp8_encode(stream, m, k, &self.x, &mut self.codes, &mut self.byte_scales)?,
            Kernel::Mxfp8Decode => wf.mxfp8_decode(stream, m, k, &self.codes, &self.byte_scales, &mut self.decoded)?,
            Kernel::Nvfp4Encode => {
                wf.nvfp4_encode(stream, m, k, &self.x, &mut self.codes, &mut self.byte_scales, &mut self.f32_scales)?
            }
            Kernel::Nvfp4Decode => {
                wf.nvfp4_decode(stream, m, k, &self.codes, &self.byte_scales, &self.f32_scales, &mut self.decoded)?
            }
            Kernel::PerTensorStatic => {
                let scale = quant::scale_from_amax(self.amax, Minifloat::E4m3.max(), false);
                wf.quantize_per_tensor_static(stream, Fp8Format::E4m3, &self.x, scale, &mut self.codes)?
            }
            Kernel::Nvfp4EncodeStatic => {
                let global = quant::nvfp4_global_scale(self.amax);
                wf.nvfp4_encode_static(stream, m, k, &self.x, global, &mut self.codes, &mut self.byte_scales)?
            }
        }
        Ok(())
    }

    /// Checks `kernel`'s outputs at sampled elements against `logic::quant`, bit for bit (module
    /// doc): each encoder's scales and codes, each decoder's values from the codes and scales on
    /// the device. Returns how many elements were checked.
    fn check(&self, stream: &Arc<CudaStream>, kernel: Kernel) -> Result<usize> {
        let (m, k) = (self.m, self.k);
        let codes = stream.clone_dtoh(&self.codes)?;
        let f32_scales = stream.clone_dtoh(&self.f32_scales)?;
        let byte_scales = stream.clone_dtoh(&self.byte_scales)?;
        let decoded = stream.clone_dtoh(&self.decoded)?;
        let x = |i: usize| self.host[i].to_f32();
        let amax =
            |range: std::ops::Range<usize>| range.map(|i| quant::finite_abs(x(i))).fold(0.0f32, quant::amax_combine);
        let tensor_amax = self.amax;
        let fail = |what: String| -> Result<usize> { Err(format!("{kernel:?} {m}×{k}: {what}").into()) };
        let e4m3 = Minifloat::E4m3;
        for t in 0..SAMPLES {
            let i = (mix(t * 7919 + 3) % (m * k) as u64) as usize;
            let (row, col) = (i / k, i % k);
            let nibble = (codes[i / 2] >> (4 * (i % 2))) & 0xf;
            let (got, want): (String, String) = match kernel {
                Kernel::PerTokenGroup => {
                    let g = col / 128;
                    let scale =
                        quant::scale_from_amax(amax(row * k + g * 128..row * k + g * 128 + 128), e4m3.max(), false);
                    let at = quant::group_scale_index(row, g, quant::group_scale_pitch(m).unwrap_or(0));
                    let code = quant::quantize(e4m3, x(i), scale);
                    (format!("{} {:#x}", f32_scales[at], codes[i]), format!("{scale} {code:#x}"))
                }
                Kernel::PerBlock => {
                    let (r0, c0) = (row / 128 * 128, col / 128 * 128);
                    let block = (r0..(r0 + 128).min(m))
                        .map(|r| amax(r * k + c0..r * k + (c0 + 128).min(k)))
                        .fold(0.0f32, quant::amax_combine);
                    let scale = quant::scale_from_amax(block, e4m3.max(), false);
                    let at = quant::block_scale_index(row, col, k);
                    (
                        format!("{} {:#x}", f32_scales[at], codes[i]),
                        format!("{scale} {:#x}", quant::quantize(e4m3, x(i), scale)),
                    )
                }
                Kernel::PerTensor => {
                    let scale = quant::scale_from_amax(tensor_amax, e4m3.max(), false);
                    (
                        format!("{} {:#x}", f32_scales[0], codes[i]),
                        format!("{scale} {:#x}", quant::quantize(e4m3, x(i), scale)),
                    )
                }
                Kernel::Mxfp8Encode => {
                    let byte = quant::mx_scale_byte(amax(i / 32 * 32..i / 32 * 32 + 32));
                    (
                        format!("{} {:#x}", byte_scales[i / 32], codes[i]),
                        format!("{byte} {:#x}", quant::mx_encode(x(i), byte)),
                    )
                }
                Kernel::Mxfp8Decode => {
                    let want = bf16::from_f32(quant::mx_decode(codes[i], byte_scales[i / 32]));
                    (format!("{}", decoded[i]), format!("{want}"))
                }
                Kernel::Nvfp4Encode => {
                    let global = quant::nvfp4_global_scale(tensor_amax);
                    let byte = quant::nvfp4_block_scale(amax(i / 16 * 16..i / 16 * 16 + 16), global, false);
                    let code = quant::nvfp4_encode(x(i), quant::nvfp4_scale(byte, global));
                    (
                        format!("{} {} {nibble:#x}", f32_scales[0], byte_scales[i / 16]),
                        format!("{global} {byte} {code:#x}"),
                    )
                }
                Kernel::PerTensorStatic => {
                    let scale = quant::scale_from_amax(tensor_amax, e4m3.max(), false);
                    (format!("{:#x}", codes[i]), format!("{:#x}", quant::quantize(e4m3, x(i), scale)))
                }
                Kernel::Nvfp4EncodeStatic => {
                    let global = quant::nvfp4_global_scale(tensor_amax);
                    let byte = quant::nvfp4_block_scale(amax(i / 16 * 16..i / 16 * 16 + 16), global, false);
                    let code = quant::nvfp4_encode(x(i), quant::nvfp4_scale(byte, global));
                    (format!("{} {nibble:#x}", byte_scales[i / 16]), format!("{byte} {code:#x}"))
                }
                Kernel::Nvfp4Decode => {
                    let scale = quant::nvfp4_scale(byte_scales[i / 16], f32_scales[0]);
                    let want = bf16::from_f32(quant::nvfp4_decode(nibble, scale));
                    (format!("{}", decoded[i]), format!("{want}"))
                }
            };
            if got != want {
                return fail(format!("element ({row}, {col}): got {got}, want {want}"));
            }
        }
        Ok(SAMPLES as usize)
    }
}

/// Times `kernel` and the copy in alternating rounds; returns (kernel s, copy s) per call.
fn time(
    wf: &Warpforge,
    stream: &Arc<CudaStream>,
    timer: &BatchTimer,
    bufs: &mut Buffers,
    kernel: Kernel,
) -> Result<(f64, f64)> {
    for _ in 0..3 {
        bufs.run(wf, stream, kernel)?;
    }
    let probe = timer.per_call(stream, 3, |_| bufs.run(wf, stream, kernel))?.0;
    let reps = ((ROUND_SECONDS / probe).ceil() as usize).clamp(3, 200);
    let (mut ours, mut copy) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for kernel_first in [round % 2 == 0, round % 2 == 1] {
            if kernel_first {
                ours.push(timer.per_call(stream, reps, |_| bufs.run(wf, stream, kernel))?.0);
            } else {
                copy.push(timer.per_call(stream, reps, |_| Ok(stream.memcpy_dtod(&bufs.x, &mut bufs.copy)?))?.0);
            }
        }
    }
    Ok((median(&mut ours), median(&mut copy)))
}

pub fn main() -> Result<()> {
    let Some(Bench { device, wf, stream, timer, .. }) = Bench::open("quant")? else {
        return Ok(());
    };
    println!(
        "{} — warpforge quantisation kernels vs a device-to-device copy of the input (same run); SM clock {} MHz",
        device.attributes().name,
        sm_clock_mhz()
    );
    println!(
        "{:<18} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>8}",
        "kernel", "M", "K", "µs", "GB/s", "copy GB/s", "ratio", "checked"
    );
    let filter: Option<String> = std::env::args().find_map(|a| a.strip_prefix("filter=").map(String::from));
    let mut csv = String::from("kernel,m,k,us,gbps,copy_gbps,ratio\n");
    for (m, k) in [(4096, 8192), (16384, 8192)] {
        let picked = |kernel: &Kernel| filter.as_deref().is_none_or(|f| format!("{kernel:?} {m}x{k}").contains(f));
        if !Kernel::ALL.iter().any(picked) {
            continue;
        }
        let mut bufs = Buffers::new(&stream, m, k)?;
        for kernel in Kernel::ALL.into_iter().filter(picked) {
            let (ours_s, copy_s) = time(&wf, &stream, &timer, &mut bufs, kernel)?;
            let checked = bufs.check(&stream, kernel)?;
            let e = (m * k) as f64;
            let gbps = kernel.bytes(e) / ours_s / 1e9;
            let copy_gbps = 2.0 * 2.0 * e / copy_s / 1e9;
            let ratio = gbps / copy_gbps;
            println!(
                "{:<18} {m:>6} {k:>6} {:>9.1} {gbps:>9.0} {copy_gbps:>9.0} {ratio:>7.3} {checked:>8}",
                format!("{kernel:?}"),
                ours_s * 1e6
            );
            csv.push_str(&format!("{kernel:?},{m},{k},{:.2},{gbps:.0},{copy_gbps:.0},{ratio:.4}\n", ours_s * 1e6));
        }
    }
    let out = std::env::var("OUT").unwrap_or_else(|_| ".".into());
    std::fs::write(format!("{out}/quant.csv"), csv)?;
    Ok(())
}
