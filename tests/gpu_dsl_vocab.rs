//! The kernel-author vocabulary's hardware checks (`gpu-kernels/kernels/src/dsl_vocab_checks.rs`)
//! on a real GPU: warp and block reductions and the warp scan for f32 / i32 / u32 (integer edge
//! values included), `dsl::math` against float64 within each instruction's documented bound,
//! the 16-byte vectors under every cache policy, FP8 conversions against a CPU encoder, and
//! register arrays. Outputs start poisoned; inputs are random, signed and never zero.

use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};
use warpforge::host::{KernelArgs, LaunchConfig};

use crate::common::{EPS_F32, gpu, mix, random_f32};

/// Threads per block of the warp checks (mirrors `WARP_CHECK_THREADS`).
const WARP_CHECK_THREADS: u32 = 256;
/// Functions of `math_f32_sm90a`, in its output order (mirrors `MATH_FNS`).
const MATH_FNS: usize = 11;
/// Words per thread of `fp8_convert_sm90a` (mirrors `FP8_OUT_WORDS`).
const FP8_OUT_WORDS: usize = 22;
const SEEDS: [u64; 4] = [1, 0x5eed, 0xdead_beef, 0x1234_5678_9abc];

fn upload<T: DeviceRepr>(data: &[T]) -> CudaSlice<T> {
    gpu().0.stream().clone_htod(data).unwrap()
}

fn download<T: DeviceRepr + ValidAsZeroBits + Default + Clone>(buf: &CudaSlice<T>) -> Vec<T> {
    gpu().0.stream().clone_dtoh(buf).unwrap()
}

/// Launches `entry` with `args` on `blocks × threads`, synchronously.
fn launch(entry: &str, blocks: u32, threads: u32, args: KernelArgs<'_>) {
    let stream = gpu().0.stream();
    let kernel = crate::common::checks().kernel(entry).unwrap();
    // SAFETY: each caller sizes the buffers as the entry's doc requires for this grid.
    unsafe { kernel.launch(stream, &LaunchConfig::linear(blocks, threads), args) }.unwrap();
    stream.synchronize().unwrap();
}

/// A 32-bit value the reductions run on, with its CPU reference ops.
trait Value: Copy + PartialEq + std::fmt::Debug + DeviceRepr + ValidAsZeroBits + Default {
    const POISON: Self;
    fn sample(seed: u64, n: usize) -> Vec<Self>;
    /// Checks `got` against the sum of `xs` (exact for integers, wrapping; float64-bounded for f32).
    fn check_sum(got: Self, xs: &[Self], what: &str);
    fn max(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
}

impl Value for f32 {
    const POISON: Self = f32::NAN;
    fn sample(seed: u64, n: usize) -> Vec<Self> {
        random_f32(seed, n, 100.0)
    }
    fn check_sum(got: f32, xs: &[f32], what: &str) {
        let want: f64 = xs.iter().map(|&x| x as f64).sum();
        let tol = xs.len() as f64 * EPS_F32 * xs.iter().map(|&x| (x as f64).abs()).sum::<f64>();
        assert!((got as f64 - want).abs() <= tol, "{what}: sum {got}, want {want} (tol {tol})");
    }
    fn max(a: f32, b: f32) -> f32 {
        a.max(b)
    }
    fn min(a: f32, b: f32) -> f32 {
        a.min(b)
    }
}

macro_rules! integer_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            const POISON: Self = 0x5a5a_5a5a;
            /// Random values with the type's extremes (and their neighbours) at random places,
            /// never zero.
            fn sample(seed: u64, n: usize) -> Vec<Self> {
                let edges = [<$t>::MAX, <$t>::MIN.wrapping_add(1), <$t>::MAX - 1, 1, <$t>::MAX / 2];
                (0..n as u64)
                    .map(|i| {
                        let r = mix(seed ^ mix(i + 1));
                        let v = if r % 7 == 0 { edges[(r >> 8) as usize % edges.len()] } else { (r >> 16) as $t };
                        // MIN itself for the signed type: MIN.wrapping_add(1) - 1.
                        let v = if r % 11 == 0 { v.wrapping_sub(1) } else { v };
                        if v == 0 { 1 } else { v }
                    })
                    .collect()
            }
            fn check_sum(got: Self, xs: &[Self], what: &str) {
                let want = xs.iter().fold(0 as $t, |a, &b| a.wrapping_add(b));
                assert_eq!(got, want, "{what}: wrapping sum");
            }
            fn max(a: Self, b: Self) -> Self {
                Ord::max(a, b)
            }
            fn min(a: Self, b: Self) -> Self {
                Ord::min(a, b)
            }
        }
    )*};
}
integer_value!(i32, u32);

/// Checks one group's (sum, max, min) triples: every thread holds bitwise the same triple, and it
/// matches the CPU reference over `xs`.
fn check_group<T: Value>(triples: &[T], xs: &[T], what: &str) {
    let first = &triples[..3];
    for (t, triple) in triples.chunks(3).enumerate() {
        assert_eq!(triple, first, "{what}: thread {t} disagrees with thread 0");
    }
    T::check_sum(first[0], xs, what);
    assert_eq!(first[1], xs.iter().copied().reduce(T::max).unwrap(), "{what}: max");
    assert_eq!(first[2], xs.iter().copied().reduce(T::min).unwrap(), "{what}: min");
}

fn check_warp<T: Value>(entry: &str) {
    let stream = gpu().0.stream();
    for seed in SEEDS {
        let blocks = 3;
        let n = (blocks * WARP_CHECK_THREADS) as usize;
        let x = T::sample(seed, n);
        let dx = upload(&x);
        let mut reduced = upload(&vec![T::POISON; 3 * n]);
        let mut scanned = upload(&vec![T::POISON; n]);
        let mut args = KernelArgs::new();
        args.push_buffer(&dx, stream).push_buffer_mut(&mut reduced, stream).push_buffer_mut(&mut scanned, stream);
        launch(entry, blocks, WARP_CHECK_THREADS, args);
        let (reduced, scanned) = (download(&reduced), download(&scanned));
        for w in 0..n / 32 {
            let xs = &x[32 * w..32 * w + 32];
            check_group(&reduced[96 * w..96 * w + 96], xs, &format!("{entry} seed {seed} warp {w}"));
            for lane in 0..32 {
                T::check_sum(scanned[32 * w + lane], &xs[..=lane], &format!("{entry} scan warp {w} lane {lane}"));
            }
        }
    }
}

fn check_block<T: Value>(entry: &str) {
    let stream = gpu().0.stream();
    for (seed, threads) in SEEDS.into_iter().zip([32u32, 96, 544, 1024]) {
        let blocks = 3;
        let n = (blocks * threads) as usize;
        let x = T::sample(seed, n);
        let dx = upload(&x);
        let mut out = upload(&vec![T::POISON; 3 * n]);
        let mut args = KernelArgs::new();
        args.push_buffer(&dx, stream).push_buffer_mut(&mut out, stream);
        launch(entry, blocks, threads, args);
        let out = download(&out);
        let t = threads as usize;
        for b in 0..blocks as usize {
            check_group(
                &out[3 * t * b..3 * t * (b + 1)],
                &x[t * b..t * (b + 1)],
                &format!("{entry} {threads} threads block {b}"),
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn warp_reductions_and_scan_match_cpu() {
    check_warp::<f32>("warp_reduce_f32_sm90a");
    check_warp::<i32>("warp_reduce_i32_sm90a");
    check_warp::<u32>("warp_reduce_u32_sm90a");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn block_reductions_match_cpu() {
    check_block::<f32>("block_reduce_f32_sm90a");
    check_block::<i32>("block_reduce_i32_sm90a");
    check_block::<u32>("block_reduce_u32_sm90a");
}

/// Unit in the last place of the f32 nearest `x`.
fn ulp(x: f64) -> f64 {
    let f = (x as f32).abs();
    (f32::from_bits(f.to_bits() + 1) - f) as f64
}

/// A reference and a bound for one `math_f32_sm90a` function, given (pos, signed).
type MathCase = (&'static str, fn(f64, f64) -> f64, fn(f64, f64, f64) -> f64);

/// The documented bound of each function (`dsl::math`), in its output order. `tol(p, s, want)`.
const MATH_CASES: [MathCase; MATH_FNS] = [
    ("sqrt", |p, _| p.sqrt(), |_, _, _| 0.0),
    ("sqrt_approx", |p, _| p.sqrt(), |_, _, w| w.abs() * 2f64.powf(-23.0)),
    ("rsqrt", |p, _| 1.0 / p.sqrt(), |_, _, w| w.abs() * 2f64.powf(-22.9)),
    ("rcp", |p, _| 1.0 / p, |_, _, _| 0.0),
    ("rcp_approx", |p, _| 1.0 / p, |_, _, w| ulp(w)),
    (
        "log2",
        |p, _| p.log2(),
        |p, _, w| if (0.5..=2.0).contains(&p) { 2f64.powi(-22) } else { w.abs() * 2f64.powi(-22) },
    ),
    ("exp2", |_, s| s.exp2(), |_, _, w| w.abs() * 2f64.powf(-22.5)),
    ("exp2_ftz", |_, s| s.exp2(), |_, _, w| w.abs() * 2f64.powf(-22.5)),
    ("tanh", |_, s| s.tanh(), |_, _, w| w.abs() * 2f64.powf(-10.987)),
    // ex2 of x·log2(e) rounded to f32: the product's rounding (≤ 2^-24 relative) moves the
    // exponent by up to |x·log2 e|·2^-24, i.e. the result by that times ln 2, relatively.
    (
        "exp",
        |_, s| s.exp(),
        |_, s, w| {
            w.abs()
                * (2f64.powf(-22.5) + (s * std::f64::consts::LOG2_E).abs() * 2f64.powi(-24) * std::f64::consts::LN_2)
        },
    ),
    ("fma", |p, s| s * p + s, |_, _, w| 0.5 * ulp(w)),
];

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn math_matches_f64_within_documented_bounds() {
    let stream = gpu().0.stream();
    let n = 1 << 16;
    for seed in SEEDS {
        // Positive inputs log-uniform over 2^-30 .. 2^30, plus a dense share in [0.5, 2] for log2.
        let pos: Vec<f32> = random_f32(seed, n, 1.0)
            .into_iter()
            .enumerate()
            .map(|(i, u)| if i % 4 == 0 { 1.25 + 0.75 * u } else { 2f32.powf(30.0 * u) })
            .collect();
        let signed = random_f32(seed ^ 0xa5, n, 20.0);
        let (dp, ds) = (upload(&pos), upload(&signed));
        let mut out = upload(&vec![f32::NAN; MATH_FNS * n]);
        let mut args = KernelArgs::new();
        args.push(n as u32).push_buffer(&dp, stream).push_buffer(&ds, stream).push_buffer_mut(&mut out, stream);
        launch("math_f32_sm90a", (n as u32).div_ceil(256), 256, args);
        let out = download(&out);
        // Every function is checked over every input before the verdict, so one run reports
        // each function whose bound does not hold (with its worst case), not only the first.
        let mut failures = Vec::new();
        for (k, (name, reference, tol)) in MATH_CASES.iter().enumerate() {
            let mut worst: Option<(f64, String)> = None;
            let mut bad = 0;
            for i in 0..n {
                let (p, s) = (pos[i] as f64, signed[i] as f64);
                let want = reference(p, s);
                // A zero bound means correctly rounded: within half an f32 ulp of the exact value.
                // The f64 reference itself is rounded (2^-53): a hair of slack for it.
                let bound = (1.0 + 1e-9) * if tol(p, s, want) == 0.0 { 0.5 * ulp(want) } else { tol(p, s, want) };
                let got = out[k * n + i] as f64;
                let excess = (got - want).abs() / bound;
                if excess.is_nan() || excess > 1.0 {
                    bad += 1;
                    if worst.as_ref().is_none_or(|(e, _)| excess > *e) {
                        let case = format!("(pos {p:e}, signed {s}): got {got:e}, want {want:e} (bound {bound:e})");
                        worst = Some((excess, case));
                    }
                }
            }
            if let Some((excess, case)) = worst {
                failures.push(format!("{name}: {bad} of {n} outside the bound, worst {excess:.2}× at {case}"));
            }
        }
        assert!(failures.is_empty(), "documented bounds that do not hold:\n{}", failures.join("\n"));
    }
}

/// Runs a vector entry over `n` 16-byte vectors of `src` and returns `dst`.
fn run_vector<T: DeviceRepr + ValidAsZeroBits + Default + Clone>(
    entry: &str,
    src: &[T],
    poison: T,
    lanes: usize,
) -> Vec<T> {
    let stream = gpu().0.stream();
    let n = src.len() / lanes;
    let dsrc = upload(src);
    let mut dst = upload(&vec![poison; src.len()]);
    let mut args = KernelArgs::new();
    args.push(n as u32).push_buffer(&dsrc, stream).push_buffer_mut(&mut dst, stream);
    launch(entry, (n as u32).div_ceil(128), 128, args);
    download(&dst)
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn vectors_move_sixteen_bytes_under_every_policy() {
    // 999 vectors: every load policy (i % 3) meets every store policy (i % 2), and the grid has
    // a partial last block.
    let vectors = 999;
    for seed in SEEDS {
        let x = random_f32(seed, 8 * vectors, 1000.0);
        let b: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let got = run_vector("vector_bf16x8_sm90a", &b, bf16::NAN, 8);
        let want: Vec<bf16> = b.iter().map(|v| bf16::from_f32(2.0 * v.to_f32())).collect();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "bf16x8"
        );
        let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
        let got = run_vector("vector_f16x8_sm90a", &h, f16::NAN, 8);
        let want: Vec<f16> = h.iter().map(|v| f16::from_f32(2.0 * v.to_f32())).collect();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "f16x8"
        );
        let f = &x[..4 * vectors];
        let got = run_vector("vector_f32x4_sm90a", f, f32::NAN, 4);
        assert_eq!(got, f.iter().map(|v| 2.0 * v).collect::<Vec<_>>(), "f32x4");
        let bytes: Vec<u8> = (0..16 * vectors as u64).map(|i| (mix(seed ^ i) >> 24) as u8).collect();
        let got = run_vector("vector_u8x16_sm90a", &bytes, 0xee, 16);
        let want: Vec<u8> = bytes.iter().enumerate().map(|(j, &v)| v ^ 0x5a ^ (j % 16) as u8).collect();
        assert_eq!(got, want, "u8x16");
    }
}

/// Rounds `x` to the FP8 format with `man` mantissa bits and exponent `bias`, to nearest even,
/// saturating at `max` (the `.satfinite` conversion), and returns its byte.
fn fp8_encode(x: f64, man: u32, bias: i32, max: f64) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs().min(max);
    let min_normal = 2f64.powi(1 - bias);
    // Value spacing at `a`: subnormal spacing below the smallest normal.
    let exp = if a < min_normal { 1 - bias } else { a.log2().floor() as i32 };
    let step = 2f64.powi(exp - man as i32);
    let q = a / step;
    let mut k = q.floor();
    let frac = q - k;
    if frac > 0.5 || (frac == 0.5 && k % 2.0 == 1.0) {
        k += 1.0;
    }
    let rounded = (k * step).min(max);
    // Re-encode the rounded magnitude (it may have carried into the next binade).
    let bits = if rounded < min_normal {
        (rounded / 2f64.powi(1 - bias - man as i32)) as u8
    } else {
        let e = rounded.log2().floor() as i32;
        let m = (rounded / 2f64.powi(e) - 1.0) * (1u32 << man) as f64;
        (((e + bias) as u32) << man | m as u32) as u8
    };
    sign | bits
}

/// The value of FP8 byte `b` with `man` mantissa bits and exponent `bias`.
fn fp8_decode(b: u8, man: u32, bias: i32) -> f32 {
    let (e, m) = ((b & 0x7f) >> man, b & ((1 << man) - 1));
    let mag = if e == 0 {
        m as f64 * 2f64.powi(1 - bias - man as i32)
    } else {
        (1.0 + m as f64 / (1u32 << man) as f64) * 2f64.powi(e as i32 - bias)
    };
    (if b & 0x80 != 0 { -mag } else { mag }) as f32
}

const E4M3: (u32, i32, f64) = (3, 7, 448.0);
const E5M2: (u32, i32, f64) = (2, 15, 57344.0);

fn quad(x: &[f32], (man, bias, max): (u32, i32, f64), round: impl Fn(f32) -> f32) -> u32 {
    u32::from_le_bytes(std::array::from_fn(|j| fp8_encode(round(x[j]) as f64, man, bias, max)))
}

fn widened(word: u32, (man, bias, _): (u32, i32, f64)) -> [f32; 4] {
    std::array::from_fn(|j| fp8_decode(word.to_le_bytes()[j], man, bias))
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn fp8_conversions_match_cpu_encoder() {
    let stream = gpu().0.stream();
    let n = 4096;
    for seed in SEEDS {
        // Signed magnitudes log-uniform over 2^-8 .. 2^15.8: E4M3 subnormals (from 2^-9) through
        // both formats' saturation (448, 57344), inside f16 range (65504).
        let x: Vec<f32> = random_f32(seed, 4 * n, 1.0)
            .into_iter()
            .zip(random_f32(seed ^ 3, 4 * n, 1.0))
            .map(|(u, s)| 2f32.powf(-8.0 + 11.9 * (u + 1.0)).copysign(s))
            .collect();
        let dx = upload(&x);
        let mut out = upload(&vec![0xdead_beefu32; FP8_OUT_WORDS * n]);
        let mut args = KernelArgs::new();
        args.push(n as u32).push_buffer(&dx, stream).push_buffer_mut(&mut out, stream);
        launch("fp8_convert_sm90a", (n as u32).div_ceil(256), 256, args);
        let out = download(&out);
        let to_f16 = |v: f32| f16::from_f32(v).to_f32();
        let to_bf16 = |v: f32| bf16::from_f32(v).to_f32();
        let pair = |a: f32, b: f32, bits: fn(f32) -> u16| bits(a) as u32 | (bits(b) as u32) << 16;
        let f16_bits: fn(f32) -> u16 = |v| f16::from_f32(v).to_bits();
        let bf16_bits: fn(f32) -> u16 = |v| bf16::from_f32(v).to_bits();
        for t in 0..n {
            let (xs, got) = (&x[4 * t..4 * t + 4], &out[FP8_OUT_WORDS * t..FP8_OUT_WORDS * (t + 1)]);
            let (e4, e5) = (quad(xs, E4M3, |v| v), quad(xs, E5M2, |v| v));
            let (w4, w5) = (widened(e4, E4M3), widened(e5, E5M2));
            let mut want = vec![e4, e5, quad(xs, E4M3, to_f16), quad(xs, E5M2, to_f16)];
            want.extend([quad(xs, E4M3, to_bf16), quad(xs, E5M2, to_bf16)]);
            want.extend(w4.iter().chain(&w5).map(|v| v.to_bits()));
            for bits in [f16_bits, bf16_bits] {
                want.extend([pair(w4[0], w4[1], bits), pair(w4[2], w4[3], bits)]);
                want.extend([pair(w5[0], w5[1], bits), pair(w5[2], w5[3], bits)]);
            }
            assert_eq!(got, &want[..], "thread {t}, inputs {xs:?} (word order: fp8_convert_sm90a's doc)");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn register_arrays_match_cpu() {
    let stream = gpu().0.stream();
    let n = 1000;
    for seed in SEEDS {
        let x: Vec<u32> = (0..8 * n as u64).map(|i| (mix(seed ^ (i + 1)) >> 7) as u32 | 1).collect();
        let sel: Vec<u32> = (0..n as u64).map(|i| mix(seed.wrapping_add(i)) as u32).collect();
        let (dx, dsel) = (upload(&x), upload(&sel));
        let mut out = upload(&vec![0xdead_beefu32; 8 * n]);
        let mut args = KernelArgs::new();
        args.push(n as u32).push_buffer(&dx, stream).push_buffer(&dsel, stream).push_buffer_mut(&mut out, stream);
        launch("regs_sm90a", (n as u32).div_ceil(128), 128, args);
        let out = download(&out);
        for t in 0..n {
            let r = &x[8 * t..8 * t + 8];
            let mut want: Vec<u32> = r.iter().map(|&e| e.wrapping_mul(3).wrapping_add(1).wrapping_add(e)).collect();
            want[0] = r[7];
            want[7] = r[sel[t] as usize % 8];
            assert_eq!(&out[8 * t..8 * t + 8], &want[..], "thread {t}");
        }
    }
}

#[test]
fn fp8_cpu_encoder_holds_known_points() {
    // Largest finite values, saturation, the smallest subnormals, a tie to even, and signs.
    assert_eq!(fp8_encode(448.0, 3, 7, 448.0), 0x7e);
    assert_eq!(fp8_encode(1.0e4, 3, 7, 448.0), 0x7e);
    assert_eq!(fp8_encode(-1.0e6, 2, 15, 57344.0), 0xfb);
    assert_eq!(fp8_encode(2f64.powi(-9), 3, 7, 448.0), 0x01);
    assert_eq!(fp8_encode(2f64.powi(-16), 2, 15, 57344.0), 0x01);
    assert_eq!(fp8_encode(1.0, 3, 7, 448.0), 0x38);
    assert_eq!(fp8_encode(1.0625, 3, 7, 448.0), 0x38); // halfway 1 .. 1.125: to even (1.0)
    assert_eq!(fp8_encode(1.1875, 3, 7, 448.0), 0x3a); // halfway 1.125 .. 1.25: to even (1.25)
    assert_eq!(fp8_encode(-1.5, 2, 15, 57344.0), 0xbe);
    assert_eq!(fp8_encode(0.9999, 3, 7, 448.0), 0x38); // carries into the next binade
    for b in (0u8..=255).filter(|b| b & 0x7f != 0x7f) {
        assert_eq!(fp8_encode(fp8_decode(b, 3, 7) as f64, 3, 7, 448.0), b, "E4M3 {b:#x}");
    }
    for b in (0u8..=255).filter(|b| (b & 0x7f) < 0x7c) {
        assert_eq!(fp8_encode(fp8_decode(b, 2, 15) as f64, 2, 15, 57344.0), b, "E5M2 {b:#x}");
    }
}
