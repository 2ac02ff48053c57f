//! A service's view of warpforge: built by `.ci/run` with `cargo +stable` twice, once against the
//! workspace (`path = "../.."`) and once against the packaged crates (`.ci/package-check`: the
//! `.crate` files `cargo package` wrote, unpacked). Either way it embeds the shipped PTX (no
//! nightly, no CUDA toolkit) and checks what a service relies on, exiting non-zero on a miss:
//! the modules and the sm_90a cubin are inside, every kernel the library launches is declared,
//! and without a GPU the first call returns a typed error. With a GPU it also runs a GEMM and
//! compares it with a float64 reference.

use half::bf16;
use warpforge::host::ptx_info::entry_directives;
use warpforge::{Device, Epilogue, Error, GemmProblem, Warpforge};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    println!("warpforge PTX origin: {}", warpforge::ptx::ORIGIN);
    let (sm90, sm100) = (warpforge::ptx::SM_90A, warpforge::ptx::SM_100A);
    let kernels = entry_directives(sm90).len();
    println!(
        "sm_90a module: {} bytes, {kernels} kernels, cubin {} bytes; sm_100a module: {} bytes",
        sm90.len(),
        warpforge::ptx::SM_90A_CUBIN.len(),
        sm100.len()
    );
    check(kernels > 0 && !sm100.is_empty(), "the embedded modules declare no kernels")?;
    check(!warpforge::ptx::SM_90A_CUBIN.is_empty(), "no sm_90a cubin: the shipped cubin does not match the PTX")?;
    match Device::new(0) {
        Ok(device) => gemm_against_float64(&device),
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("no GPU here: {e}");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// D = A·Bᵀ on a ragged shape, every element against float64 (bf16 output: 2^-7 relative).
fn gemm_against_float64(device: &Device) -> Result<()> {
    let wf = Warpforge::new(device)?;
    println!("kernels loaded on {}", device.attributes().name);
    let (m, n, k) = (77, 300, 520);
    let value = |i: usize, salt: usize| ((i * 7919 + salt) % 1001) as f32 / 500.0 - 1.0 + 1e-3;
    let a: Vec<bf16> = (0..m * k).map(|i| bf16::from_f32(value(i, 1))).collect();
    let b: Vec<bf16> = (0..n * k).map(|i| bf16::from_f32(value(i, 2))).collect();
    let stream = device.stream();
    let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
    let mut dd = stream.alloc_zeros::<bf16>(m * n)?;
    wf.gemm::<bf16, bf16>(stream, &GemmProblem::new(m, n, k), &da, &db, Epilogue::default(), &mut dd)?;
    let d = stream.clone_dtoh(&dd)?;
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let (mut dot, mut magnitude) = (0.0f64, 0.0f64);
            for p in 0..k {
                let product = a[i * k + p].to_f64() * b[j * k + p].to_f64();
                dot += product;
                magnitude += product.abs();
            }
            let tolerance = dot.abs() / 128.0 + magnitude * 1e-5 + 1e-6;
            worst = worst.max((d[i * n + j].to_f64() - dot).abs() / tolerance);
        }
    }
    println!("gemm {m}×{n}×{k}: worst |error| ÷ tolerance = {worst:.3}");
    check(worst <= 1.0, "the GEMM differs from the float64 reference")
}

fn check(ok: bool, what: &str) -> Result<()> {
    if ok { Ok(()) } else { Err(what.into()) }
}
