//! Quick start: `cargo run --release --example quickstart`.
//!
//! Reports the PTX this build embedded for each arch; then, when an NVIDIA GPU is present,
//! runs saxpy (f32, bf16, f16), a reduction and the persistent-scheduler probe on it and
//! checks each against a CPU reference. Without a GPU it says so and stops after the report.

use half::bf16;
use warpforge::host::ptx_info::entry_directives;
use warpforge::ptx::{self, Arch};
use warpforge::{Device, Error, Warpforge};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("warpforge quickstart — PTX {} for this build", ptx::ORIGIN);
    for arch in [Arch::Sm90a, Arch::Sm100a] {
        let text = ptx::module(arch);
        let entries = entry_directives(text);
        println!("\n{} — {} kernels, {} KiB of PTX", arch.name(), entries.len(), text.len() / 1024);
        print!("{}", ptx::report(arch));
    }

    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!("\nNo GPU to run on ({e}). The PTX above was built and, where ptxas was found, assembled.");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let a = device.attributes();
    println!(
        "\n{} (cc {}.{}), {} SMs, {} MiB L2",
        a.name,
        a.compute_capability.0,
        a.compute_capability.1,
        a.sm_count,
        a.l2_bytes >> 20
    );
    let loading = std::time::Instant::now();
    let wf = Warpforge::new(&device)?;
    println!(
        "loaded the {} module from its {:?} in {:.2} s",
        wf.module().arch().name(),
        wf.module().image(),
        loading.elapsed().as_secs_f64()
    );
    let stream = device.stream();

    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0 + 1e-3).collect();
    let y: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 1000) as f32 / 250.0 - 2.0 + 1e-3).collect();
    let dx = stream.clone_htod(&x)?;
    let mut dy = stream.clone_htod(&y)?;
    wf.saxpy(stream, 3.0, &dx, &mut dy)?;
    let got = stream.clone_dtoh(&dy)?;
    let worst = (0..n).map(|i| (got[i] as f64 - (3.0 * x[i] as f64 + y[i] as f64)).abs()).fold(0.0, f64::max);
    println!("saxpy f32, n = {n}: max |error| vs f64 = {worst:.2e}");

    let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
    let yb: Vec<bf16> = y.iter().map(|&v| bf16::from_f32(v)).collect();
    let dxb = stream.clone_htod(&xb)?;
    let mut dyb = stream.clone_htod(&yb)?;
    wf.saxpy(stream, 3.0, &dxb, &mut dyb)?;
    let gotb = stream.clone_dtoh(&dyb)?;
    let worst_rel = (0..n)
        .map(|i| {
            let want = 3.0 * xb[i].to_f64() + yb[i].to_f64();
            (gotb[i].to_f64() - want).abs() / want.abs().max(1e-3)
        })
        .fold(0.0, f64::max);
    println!("saxpy bf16, n = {n}: max relative error = {worst_rel:.2e} (bf16 rounding 3.9e-3)");

    let sum = wf.sum_f32(stream, &dx)?;
    let want: f64 = x.iter().map(|&v| v as f64).sum();
    println!("sum f32, n = {n}: {sum:.4} vs f64 {want:.4}");

    let (plan, visits) = wf.persistent_visit(stream, 40, 40)?;
    let once = visits.iter().all(|v| v.count == 1);
    println!(
        "persistent static schedule: 1600 tiles on {} blocks ({} per SM), every tile exactly once: {once}",
        plan.blocks, plan.blocks_per_sm
    );
    let ok = worst < 1e-5 && worst_rel < 4e-3 && (sum - want).abs() < 1e-2 && once;
    println!("{}", if ok { "all checks passed" } else { "A CHECK FAILED" });
    if ok { Ok(()) } else { Err("quickstart check failed".into()) }
}
