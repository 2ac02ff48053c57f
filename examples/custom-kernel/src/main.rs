//! Launches the author's kernels with warpforge's host runtime and checks them against the CPU:
//! `histogram_u8` (every arch) against a CPU histogram, and on Hopper `gemm_relu2_bf16` (a GEMM
//! with its own epilogue, built from the DSL's L3 parts) against a float64 reference.
//! `cargo run --release` from this folder.

mod gemm;
// The host half of the GEMM's contract: the very source file the device crate compiles.
#[path = "../device/src/gemm_abi.rs"]
mod gemm_abi;
/// The logic crate under the name the shared `gemm_abi.rs` uses on both sides.
use warpforge_host::logic;

use warpforge_host::module::Arch;
use warpforge_host::{Device, Error};
use warpforge_host::{KernelArgs, LaunchConfig, Module, PtxSet};

use crate::gemm::Shape;

const PTX: PtxSet = PtxSet::new()
    .with(Arch::Sm90a, include_str!(env!("DEVICE_PTX_SM_90A")))
    .with(Arch::Sm100a, include_str!(env!("DEVICE_PTX_SM_100A")));

/// Ragged GEMM shapes (no extent a multiple of the 128 × 128 tile but K's 8).
const GEMM_SHAPES: [Shape; 2] = [Shape { m: 300, n: 200, k: 136 }, Shape { m: 1024, n: 640, k: 512 }];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!(
                "histogram_u8 built for sm_90a and sm_100a, {} for sm_90a; no GPU to run them on ({e})",
                gemm::ENTRY
            );
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let module = Module::load(&device, &PTX)?;
    check_histogram(&device, &module)?;
    if module.arch() != Arch::Sm90a {
        println!("{} is built for sm_90a only; skipped on {}", gemm::ENTRY, module.arch().name());
        return Ok(());
    }
    let mut failed = false;
    for shape in GEMM_SHAPES {
        let worst = gemm::check(&device, &module, shape)?;
        let ok = worst <= 1.0;
        failed |= !ok;
        println!(
            "{} {}×{}×{}: largest error {worst:.3} of the tolerance, {}",
            gemm::ENTRY,
            shape.m,
            shape.n,
            shape.k,
            if ok { "matches relu(A·Bᵀ)²" } else { "MISMATCH" }
        );
    }
    if failed { Err("gemm_relu2_bf16 mismatch".into()) } else { Ok(()) }
}

/// Counts 10 M pseudo-random bytes on the GPU and compares with the CPU.
fn check_histogram(device: &Device, module: &Module) -> Result<(), Box<dyn std::error::Error>> {
    let kernel = module.kernel("histogram_u8")?;
    let stream = device.stream();

    let n = 10_000_019usize;
    let bytes: Vec<u8> = (0..n).map(|i| ((i as u64 * 2_654_435_761) >> 13) as u8 ^ (i % 7) as u8).collect();
    let mut want = vec![0u32; 256];
    for &b in &bytes {
        want[b as usize] += 1;
    }
    let d_bytes = stream.clone_htod(&bytes)?;
    let mut d_hist = stream.alloc_zeros::<u32>(256)?;
    let plan = kernel.plan_persistent(256, 0, None, n.div_ceil(256) as u64)?;
    let mut args = KernelArgs::new();
    args.push(n as u64).push_buffer(&d_bytes, stream).push_buffer_mut(&mut d_hist, stream);
    // SAFETY: (n, bytes, hist) as the kernel declares; `d_bytes` holds n bytes and `d_hist`
    // 256 zeroed counters that nothing else touches during the launch.
    unsafe { kernel.launch(stream, &LaunchConfig::linear(plan.blocks, 256), args)? };
    let got = stream.clone_dtoh(&d_hist)?;
    let ok = got == want;
    println!(
        "histogram_u8 on {} ({} blocks of 256): {n} bytes, {}",
        device.attributes().name,
        plan.blocks,
        if ok { "matches the CPU histogram" } else { "MISMATCH" }
    );
    if ok { Ok(()) } else { Err("histogram mismatch".into()) }
}
