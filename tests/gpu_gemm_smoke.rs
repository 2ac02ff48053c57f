//! Fast GEMM smoke checks on the GPU: a few fixed shapes against a float64 reference, so a
//! broken pipeline fails in seconds. The property-based sweep is in `gpu_gemm.rs`.

use half::bf16;
use warpforge::{Epilogue, GemmProblem, Layout};

use crate::common::{EPS_BF16, EPS_F32, gpu, random_f32};

/// Runs one bf16 → f32 GEMM and checks every element of D against A·B in f64 within
/// `K·2^-23·Σ|a||b|` (f32 accumulation; inputs are exact bf16 values).
fn check(m: usize, n: usize, k: usize, a_layout: Layout, b_layout: Layout) {
    let (device, wf) = gpu();
    let stream = device.stream();
    let a: Vec<bf16> = random_f32(m as u64 * 31 + k as u64, m * k, 1.0).into_iter().map(bf16::from_f32).collect();
    let b: Vec<bf16> = random_f32(n as u64 * 17 + k as u64, k * n, 1.0).into_iter().map(bf16::from_f32).collect();
    let at = |i: usize, p: usize| match a_layout {
        Layout::RowMajor => a[i * k + p],
        Layout::ColMajor => a[p * m + i],
    };
    let bt = |p: usize, j: usize| match b_layout {
        Layout::RowMajor => b[p * n + j],
        Layout::ColMajor => b[j * k + p],
    };
    let da = stream.clone_htod(&a).unwrap();
    let db = stream.clone_htod(&b).unwrap();
    let mut dd = stream.clone_htod(&vec![f32::NAN; m * n]).unwrap();
    let mut problem = GemmProblem::new(m, n, k);
    problem.a_layout = a_layout;
    problem.b_layout = b_layout;
    wf.gemm::<bf16, f32>(stream, &problem, &da, &db, Epilogue::default(), &mut dd).unwrap();
    let got = stream.clone_dtoh(&dd).unwrap();
    let mut bad = 0;
    for i in 0..m {
        for j in 0..n {
            let (mut want, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let prod = at(i, p).to_f64() * bt(p, j).to_f64();
                want += prod;
                mag += prod.abs();
            }
            let tol = 2.0 * k as f64 * EPS_F32 * mag + 1e-30;
            let g = got[i * n + j] as f64;
            let within = (g - want).abs() <= tol; // false for NaN (unwritten)
            if !within {
                if bad < 5 {
                    eprintln!("{m}×{n}×{k} {a_layout:?}/{b_layout:?}: D[{i},{j}] = {g}, want {want} (tol {tol:.2e})");
                }
                bad += 1;
            }
        }
    }
    assert_eq!(bad, 0, "{m}×{n}×{k}: {bad} wrong elements");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_fixed_shapes_match_f64() {
    for (m, n, k) in [
        (128, 256, 64),
        (256, 512, 256),
        (1, 1, 1),
        (129, 257, 65),
        (300, 100, 1000),
        (64, 1024, 8),
        (128, 512, 1024),
        (70, 300, 4000),
    ] {
        check(m, n, k, Layout::RowMajor, Layout::ColMajor);
    }
    check(200, 300, 77, Layout::ColMajor, Layout::RowMajor);
    check(130, 270, 96, Layout::RowMajor, Layout::RowMajor);
}

/// bf16 output through the TMA-store epilogue with every epilogue term, batched: D =
/// relu(alpha·A·B + beta·C + bias) per batch, within bf16 rounding of the f64 value.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn gemm_bf16_epilogue_batched_matches_f64() {
    use warpforge::Activation;
    let (device, wf) = gpu();
    let stream = device.stream();
    for (m, n, k, batch) in [(200, 300, 128, 3), (128, 256, 64, 1), (77, 520, 33, 2), (100, 256, 2048, 1)] {
        let to_bf16 = |v: Vec<f32>| v.into_iter().map(bf16::from_f32).collect::<Vec<_>>();
        let a = to_bf16(random_f32(1, batch * m * k, 1.0));
        let b = to_bf16(random_f32(2, batch * n * k, 1.0));
        let c = to_bf16(random_f32(3, batch * m * n, 2.0));
        let bias = random_f32(4, n, 1.0);
        let (da, db, dc, dbias) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
            stream.clone_htod(&c).unwrap(),
            stream.clone_htod(&bias).unwrap(),
        );
        let mut dd = stream.clone_htod(&vec![bf16::NAN; batch * m * n]).unwrap();
        let mut problem = GemmProblem::new(m, n, k);
        problem.batch = batch;
        problem.alpha = 0.5;
        problem.beta = 0.25;
        problem.activation = Activation::Relu;
        let epilogue =
            warpforge::Epilogue { c: warpforge::COperand::Buffer(dc.as_view()), bias: Some(dbias.as_view()) };
        wf.gemm::<bf16, bf16>(stream, &problem, &da, &db, epilogue, &mut dd).unwrap();
        let got = stream.clone_dtoh(&dd).unwrap();
        let mut bad = 0;
        for z in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    let (mut acc, mut mag) = (0.0f64, 0.0f64);
                    for p in 0..k {
                        let prod = a[z * m * k + i * k + p].to_f64() * b[z * n * k + j * k + p].to_f64();
                        acc += prod;
                        mag += prod.abs();
                    }
                    let pre = 0.5 * acc + 0.25 * c[z * m * n + i * n + j].to_f64() + bias[j] as f64;
                    let want = pre.max(0.0);
                    let g = got[z * m * n + i * n + j].to_f64();
                    let tol = EPS_BF16 * want.abs() + 2.0 * k as f64 * EPS_F32 * mag + 1e-6;
                    let within = (g - want).abs() <= tol; // false for NaN (unwritten)
                    if !within {
                        if bad < 5 {
                            eprintln!("{m}×{n}×{k}×{batch}: D[{z},{i},{j}] = {g}, want {want} (tol {tol:.2e})");
                        }
                        bad += 1;
                    }
                }
            }
        }
        assert_eq!(bad, 0, "{m}×{n}×{k}×{batch}: {bad} wrong elements");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn the_module_loads_from_its_cubin_without_jit() {
    let (_, wf) = gpu();
    // The build embeds the sm_90a cubin whenever it matches the PTX (`shipped_ptx` checks
    // that); on an H100/H200 the runtime must then have loaded it, not JIT-compiled the PTX.
    if wf.module().arch() == warpforge::ptx::Arch::Sm90a && !warpforge::ptx::SM_90A_CUBIN.is_empty() {
        assert_eq!(wf.module().image(), warpforge::host::ModuleImage::Cubin);
    }
}
