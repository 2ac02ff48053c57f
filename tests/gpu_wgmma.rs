//! The single-tile wgmma checks (`gpu-kernels/checks/src/wgmma_checks.rs`) on a real GPU: every
//! entry's `D(64×N) = A(64×K) · B(K×N)` against a float64 reference, on random data drawn by
//! proptest and rounded on the host to the entry's input type, so the GPU and the reference
//! multiply exactly the same values.
//!
//! Launches mirror the module doc: 1 block × 128 threads, [`WGMMA_TILE_SMEM_BYTES`], maps under
//! 128-byte swizzle with the boxes its layout list gives. Outputs start as NaN, so an element
//! the kernel never wrote cannot pass; a failure names the first element out of tolerance.
//!
//! Operands travel as their bit patterns (u16 for bf16/f16, u32 for tf32, u8 for fp8): TMA only
//! moves bytes, and box coordinates count elements of the map's size, which these keep.

use std::any::Any;

use cudarc::driver::DeviceRepr;
use half::{bf16, f16};
use proptest::prelude::*;
use warpforge::abi::TensorMap;
use warpforge::host::{KernelArgs, LaunchConfig, TensorMapBuilder, TmaElement};
use warpforge::logic::swizzle::Swizzle;
use warpforge::logic::wgmma_desc::Major;

use crate::common::{gpu, random_f32};

const GPU_CASES: u32 = 12;
/// One warpgroup.
const THREADS: u32 = 128;
/// Mirrors `wgmma_checks::WGMMA_TILE_SMEM_BYTES`: A 8 KiB + B ≤ 32 KiB + 2 KiB slack and barrier.
const WGMMA_TILE_SMEM_BYTES: u32 = 8192 + 32768 + 2048;
/// M of every wgmma.
const M: usize = 64;
/// Bytes of one 128-byte swizzle span: every tile's K, and the MN-major blocks' width.
const SPAN_BYTES: usize = 128;

/// Input types of wgmma.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Input {
    Bf16,
    F16,
    Tf32,
    E4m3,
    E5m2,
}

impl Input {
    fn bytes(self) -> usize {
        match self {
            Input::Bf16 | Input::F16 => 2,
            Input::Tf32 => 4,
            Input::E4m3 | Input::E5m2 => 1,
        }
    }

    /// The nearest non-zero value of this type to `v` (ties either way), and its bits.
    fn round(self, v: f32) -> (f64, u32) {
        match self {
            Input::Bf16 => {
                let r = bf16::from_f32(v);
                let r = if r.to_f32() == 0.0 { bf16::MIN_POSITIVE_SUBNORMAL.copysign(r) } else { r };
                (r.to_f64(), u32::from(r.to_bits()))
            }
            Input::F16 => {
                let r = f16::from_f32(v);
                let r = if r.to_f32() == 0.0 { f16::MIN_POSITIVE_SUBNORMAL.copysign(r) } else { r };
                (r.to_f64(), u32::from(r.to_bits()))
            }
            // tf32 keeps 10 of f32's 23 fraction bits: round the other 13 away (nearest, ties
            // up); wgmma then reads the f32 storage without loss.
            Input::Tf32 => {
                let bits = (v.to_bits() + (1 << 12)) & !((1 << 13) - 1);
                (f64::from(f32::from_bits(bits)), bits)
            }
            Input::E4m3 | Input::E5m2 => {
                let byte = (0..=255u8)
                    .filter(|&b| fp8_value(self, b).is_some_and(|x| x != 0.0))
                    .min_by(|&x, &y| {
                        let d = |b| (fp8_value(self, b).unwrap() - f64::from(v)).abs();
                        d(x).total_cmp(&d(y))
                    })
                    .unwrap();
                (fp8_value(self, byte).unwrap(), u32::from(byte))
            }
        }
    }

    /// Unit roundoff of a wgmma accumulating these inputs in `acc` (module doc of the test).
    fn unit_roundoff(self, acc: Acc) -> f64 {
        match (acc, self) {
            (Acc::F16, _) => 1.0 / 1024.0,
            (Acc::F32, Input::E4m3 | Input::E5m2) => 1.0 / 8192.0,
            (Acc::F32, _) => f64::from(f32::EPSILON),
        }
    }
}

/// The value of fp8 byte `b` of `format`, `None` for NaN and infinities.
fn fp8_value(format: Input, b: u8) -> Option<f64> {
    let (exp_bits, bias) = if format == Input::E4m3 { (4, 7) } else { (5, 15) };
    let man_bits = 7 - exp_bits;
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((b >> man_bits) & ((1 << exp_bits) - 1));
    let man = f64::from(b & ((1 << man_bits) - 1));
    let scale = f64::from(1u32 << man_bits);
    let special = match format {
        Input::E4m3 => b & 0x7F == 0x7F,
        _ => exp == 31,
    };
    if special {
        return None;
    }
    Some(if exp == 0 {
        sign * man / scale * 2f64.powi(1 - bias)
    } else {
        sign * (1.0 + man / scale) * 2f64.powi(exp - bias)
    })
}

/// Accumulator types.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Acc {
    F32,
    F16,
}

/// One kernel entry: its types, N and operand placement (A in registers for RS entries).
#[derive(Clone, Copy, Debug)]
struct Case {
    entry: &'static str,
    a: Input,
    b: Input,
    acc: Acc,
    n: usize,
    rs: bool,
    a_major: Major,
    b_major: Major,
}

const fn case(entry: &'static str, a: Input, b: Input, acc: Acc, n: usize, rs: bool, majors: (Major, Major)) -> Case {
    Case { entry, a, b, acc, n, rs, a_major: majors.0, b_major: majors.1 }
}

use Input::{Bf16, E4m3, E5m2, F16, Tf32};
use Major::{K, Mn};

/// The entries of `wgmma_checks`, in its order.
const CASES: [Case; 16] = [
    case("wgmma_bf16_f32_n8_ss_kk_sm90a", Bf16, Bf16, Acc::F32, 8, false, (K, K)),
    case("wgmma_bf16_f32_n256_ss_kk_sm90a", Bf16, Bf16, Acc::F32, 256, false, (K, K)),
    case("wgmma_bf16_f32_n64_ss_km_sm90a", Bf16, Bf16, Acc::F32, 64, false, (K, Mn)),
    case("wgmma_bf16_f32_n128_ss_mm_sm90a", Bf16, Bf16, Acc::F32, 128, false, (Mn, Mn)),
    case("wgmma_bf16_f32_n64_rs_k_sm90a", Bf16, Bf16, Acc::F32, 64, true, (K, K)),
    case("wgmma_f16_f32_n64_ss_kk_sm90a", F16, F16, Acc::F32, 64, false, (K, K)),
    case("wgmma_f16_f16_n128_ss_kk_sm90a", F16, F16, Acc::F16, 128, false, (K, K)),
    case("wgmma_f16_f32_n64_ss_mk_sm90a", F16, F16, Acc::F32, 64, false, (Mn, K)),
    case("wgmma_f16_f32_n128_rs_m_sm90a", F16, F16, Acc::F32, 128, true, (K, Mn)),
    case("wgmma_tf32_f32_n64_ss_kk_sm90a", Tf32, Tf32, Acc::F32, 64, false, (K, K)),
    case("wgmma_tf32_f32_n128_rs_k_sm90a", Tf32, Tf32, Acc::F32, 128, true, (K, K)),
    case("wgmma_e4m3_f32_n128_ss_kk_sm90a", E4m3, E4m3, Acc::F32, 128, false, (K, K)),
    case("wgmma_e5m2_f32_n64_ss_kk_sm90a", E5m2, E5m2, Acc::F32, 64, false, (K, K)),
    case("wgmma_e4m3_e5m2_f32_n256_ss_kk_sm90a", E4m3, E5m2, Acc::F32, 256, false, (K, K)),
    case("wgmma_e4m3_f32_n64_rs_k_sm90a", E4m3, E4m3, Acc::F32, 64, true, (K, K)),
    case("wgmma_e5m2_f16_n128_ss_kk_sm90a", E5m2, E5m2, Acc::F16, 128, false, (K, K)),
];

/// A logical `rows × k` operand (A: M × K, B: N × K) as exact values and as stored bits.
struct Operand {
    values: Vec<f64>,
    bits: Vec<u32>,
}

impl Operand {
    fn random(input: Input, seed: u64, rows: usize, k: usize, scale: f32) -> Self {
        let (values, bits) = random_f32(seed, rows * k, scale).into_iter().map(|v| input.round(v)).unzip();
        Operand { values, bits }
    }

    /// The global tensor and its map: K-major `[rows][k]`, box k × rows; MN-major `[k][rows]`
    /// (transposed), box of one span × k. The buffer must outlive the launch.
    fn upload(&self, input: Input, rows: usize, k: usize, major: Major) -> (TensorMap, Box<dyn Any>) {
        let stored: Vec<u32> = match major {
            Major::K => self.bits.clone(),
            Major::Mn => (0..k * rows).map(|i| self.bits[(i % rows) * k + i / rows]).collect(),
        };
        let (outer, inner) = if major == Major::K { (rows, k) } else { (k, rows) };
        let box_inner = SPAN_BYTES / input.bytes();
        match input.bytes() {
            1 => map_of(stored.iter().map(|&b| b as u8).collect(), outer, inner, box_inner),
            2 => map_of(stored.iter().map(|&b| b as u16).collect(), outer, inner, box_inner),
            _ => map_of(stored, outer, inner, box_inner),
        }
    }
}

/// Uploads `data` (`outer × inner`, row-major) and encodes its 128B-swizzled map with a box of
/// `box_inner × outer` (K-major: the whole tile; MN-major: one block, outer = K rows).
fn map_of<T: TmaElement + DeviceRepr + 'static>(
    data: Vec<T>,
    outer: usize,
    inner: usize,
    box_inner: usize,
) -> (TensorMap, Box<dyn Any>) {
    let (device, _) = gpu();
    let stream = device.stream();
    let buffer = stream.clone_htod(&data).unwrap();
    let (o, i) = (outer as u64, inner as u64);
    let (map, read) = TensorMapBuilder::<T>::row_major_2d(o, i, i, outer as u32, box_inner as u32)
        .swizzle(Swizzle::B128)
        .encode(&buffer, stream)
        .unwrap();
    // The map outlives this function but its guard cannot (it borrows `buffer`, which moves
    // into the box): recording the read event now is exact here because these tests use only
    // the device's default stream, where cudarc records no events (single-stream mode).
    drop(read);
    (map, Box::new(buffer))
}

/// `D = A · Bᵀ` in float64 with Σ|a||b| per element (`a`: M × K, `b`: N × K, row-major).
fn reference(a: &[f64], b: &[f64], n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut d = vec![0.0; M * n];
    let mut abs = vec![0.0; M * n];
    for i in 0..M {
        for j in 0..n {
            for p in 0..k {
                let prod = a[i * k + p] * b[j * k + p];
                d[i * n + j] += prod;
                abs[i * n + j] += prod.abs();
            }
        }
    }
    (d, abs)
}

/// Runs `c` on data from `seed` scaled by `scale` and checks every element.
///
/// Tolerance `(K + 1) · u · Σ_k |a·b| (+ K · 2⁻²⁴ for f16 accumulators)`: every addition of the
/// K-term sum rounds (or truncates) with relative error below u of a partial sum bounded by
/// Σ|a·b|, in whatever order the hardware adds; the +1 covers a rounded product or the final
/// conversion. Products are exact in f32: bf16 and f16 (≤ 11-bit significands: ≤ 22 bits), tf32
/// (11 bits: 22), fp8 (≤ 4 bits: 8). u is one ulp of the accumulator: 2⁻²³ for f32, 2⁻¹⁰ for
/// f16, except that Hopper's fp8 wgmma is reported to keep only about 14 bits while accumulating
/// in f32 (DeepSeek-V3 technical report, §3.3), so fp8 into f32 uses 2⁻¹³. The f16 term K · 2⁻²⁴
/// allows one subnormal-spacing error per addition. The float64 reference's own error
/// (K · 2⁻⁵³ · Σ|a·b|) is negligible.
fn check(c: &Case, seed: u64, scale: f32) -> Result<(), TestCaseError> {
    let (device, _) = gpu();
    let stream = device.stream();
    let kernel = crate::common::checks().kernel(c.entry).unwrap();
    let k = SPAN_BYTES / c.a.bytes();
    let a = Operand::random(c.a, seed, M, k, scale);
    let b = Operand::random(c.b, seed ^ 0xb, c.n, k, scale);
    let (a_map, a_buf) = a.upload(c.a, M, k, c.a_major);
    let (b_map, b_buf) = b.upload(c.b, c.n, k, c.b_major);
    let mut d32 = stream.clone_htod(&vec![f32::NAN; M * c.n]).unwrap();
    let mut d16 = stream.clone_htod(&vec![f16::NAN.to_bits(); M * c.n]).unwrap();
    let mut args = KernelArgs::new();
    args.push(a_map).push(b_map);
    let cfg = LaunchConfig::linear(1, THREADS).with_dynamic_smem(WGMMA_TILE_SMEM_BYTES);
    let got: Vec<f64> = if c.acc == Acc::F32 {
        args.push_buffer_mut(&mut d32, stream);
        // SAFETY: the module's launch contract: (a_map, b_map: grid-constant maps under
        // SWIZZLE_128B with the boxes of its layout list, built by `upload` for this entry's
        // majors; d: 64 × N f32), one block of 128 threads, WGMMA_TILE_SMEM_BYTES. The operand
        // buffers live until the synchronising copy below.
        unsafe { kernel.launch(stream, &cfg, args) }.unwrap();
        stream.clone_dtoh(&d32).unwrap().into_iter().map(f64::from).collect()
    } else {
        args.push_buffer_mut(&mut d16, stream);
        // SAFETY: as above, with d: 64 × N f16 (the u32 pair words of the module doc).
        unsafe { kernel.launch(stream, &cfg, args) }.unwrap();
        stream.clone_dtoh(&d16).unwrap().into_iter().map(|h| f16::from_bits(h).to_f64()).collect()
    };
    drop((a_buf, b_buf));
    let (want, abs) = reference(&a.values, &b.values, c.n, k);
    let u = c.a.unit_roundoff(c.acc).max(c.b.unit_roundoff(c.acc));
    let floor = if c.acc == Acc::F16 { k as f64 * 2f64.powi(-24) } else { 0.0 };
    for i in 0..got.len() {
        let tol = (k as f64 + 1.0) * u * abs[i] + floor;
        let err = (got[i] - want[i]).abs();
        // `!(err <= tol)` also fails on NaN: an element the kernel never wrote.
        prop_assert!(
            err <= tol,
            "{}: d[{}][{}]: got {}, want {} (error {err:e} > tol {tol:e}; first failing element)",
            c.entry,
            i / c.n,
            i % c.n,
            got[i],
            want[i]
        );
    }
    Ok(())
}

/// One proptest per entry of [`CASES`].
macro_rules! wgmma_tests {
    ($($name:ident => $index:literal,)*) => {
        proptest! {
            #![proptest_config(ProptestConfig { cases: GPU_CASES, ..ProptestConfig::default() })]
            $(
                #[test]
                #[ignore = "needs an NVIDIA GPU"]
                fn $name(seed: u64, scale in 0.25f32..8.0) {
                    check(&CASES[$index], seed, scale)?;
                }
            )*
        }
    };
}

wgmma_tests! {
    gpu_wgmma_bf16_f32_n8_ss_kk => 0,
    gpu_wgmma_bf16_f32_n256_ss_kk => 1,
    gpu_wgmma_bf16_f32_n64_ss_km => 2,
    gpu_wgmma_bf16_f32_n128_ss_mm => 3,
    gpu_wgmma_bf16_f32_n64_rs_k => 4,
    gpu_wgmma_f16_f32_n64_ss_kk => 5,
    gpu_wgmma_f16_f16_n128_ss_kk => 6,
    gpu_wgmma_f16_f32_n64_ss_mk => 7,
    gpu_wgmma_f16_f32_n128_rs_m => 8,
    gpu_wgmma_tf32_f32_n64_ss_kk => 9,
    gpu_wgmma_tf32_f32_n128_rs_k => 10,
    gpu_wgmma_e4m3_f32_n128_ss_kk => 11,
    gpu_wgmma_e5m2_f32_n64_ss_kk => 12,
    gpu_wgmma_e4m3_e5m2_f32_n256_ss_kk => 13,
    gpu_wgmma_e4m3_f32_n64_rs_k => 14,
    gpu_wgmma_e5m2_f16_n128_ss_kk => 15,
}

#[test]
fn host_models_of_the_wgmma_checks_hold_known_points() {
    assert_eq!(fp8_value(E4m3, 0x7E), Some(448.0), "e4m3 max");
    assert_eq!(fp8_value(E4m3, 0x7F), None, "e4m3 NaN");
    assert_eq!(fp8_value(E4m3, 0x01), Some(2f64.powi(-9)), "e4m3 smallest subnormal");
    assert_eq!(fp8_value(E4m3, 0xB8), Some(-1.0));
    assert_eq!(fp8_value(E5m2, 0x7B), Some(57344.0), "e5m2 max");
    assert_eq!(fp8_value(E5m2, 0x7C), None, "e5m2 infinity");
    assert_eq!(fp8_value(E5m2, 0x01), Some(2f64.powi(-16)), "e5m2 smallest subnormal");
    assert_eq!(E4m3.round(1.06), (1.0, 0x38));
    assert_eq!(E5m2.round(0.0), (2f64.powi(-16), 0x01), "never zero");
    assert_eq!(Tf32.round(1.0 + 2f32.powi(-11)).0, 1.0 + 2f64.powi(-10), "ties round up");
    assert_eq!(Tf32.round(1.0 + 2f32.powi(-12)).0, 1.0);
    assert_eq!(Bf16.round(1e-30).0, bf16::from_f32(1e-30).to_f64());
    assert!(F16.round(1e-30).0 > 0.0, "never zero");
    for (i, c) in CASES.iter().enumerate() {
        assert!(c.entry.contains(&format!("_n{}_", c.n)), "case {i} {}: N", c.entry);
        assert_eq!(c.entry.contains("_rs_"), c.rs, "case {i} {}: form", c.entry);
        assert!(c.a.bytes() == 2 || (c.a_major == K && c.b_major == K), "case {i}: only 16-bit MN-major");
        assert!(c.n <= 256 && c.n * SPAN_BYTES <= 32768, "case {i}: B fits the smem budget");
    }
    let (d, abs) = reference(&[1.0, 2.0].repeat(M), &[3.0, -4.0], 1, 2);
    assert_eq!((d[0], abs[0]), (-5.0, 11.0));
}
