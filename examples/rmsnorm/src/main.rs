//! Runs the author's kernels with warpforge's host runtime and checks them against float64 CPU
//! references: `rmsnorm_bf16` (every arch) over several row lengths, with its bandwidth at
//! 8192 × 4096, and on Hopper `gemm_bf16_tn` (the DSL's GEMM parts on shared tile
//! descriptions). Exits non-zero on a mismatch; without a GPU it says so and exits 0.
//! `cargo run --release` from this folder.

mod gemm;
mod rmsnorm;
mod rng;
// What the host and the kernels agree on: the very source file the device crate compiles.
#[path = "../device/src/abi.rs"]
mod abi;
/// The logic crate under the name the shared `abi.rs` uses on both sides.
use warpforge_host::logic;

use warpforge_host::module::Arch;
use warpforge_host::{Device, Error, Module, PtxSet};

const PTX: PtxSet = PtxSet::new()
    .with(Arch::Sm90a, include_str!(env!("DEVICE_PTX_SM_90A")))
    .with(Arch::Sm100a, include_str!(env!("DEVICE_PTX_SM_100A")));

/// RMSNorm rows per check, and the row lengths: one vector, ragged block sizes, the largest row.
const RMSNORM_ROWS: usize = 67;
const RMSNORM_COLS: [usize; 6] = [8, 200, 1000, 4096, 5000, abi::RMSNORM_MAX_COLS as usize];
/// A row length that is not whole 16-byte vectors: refused with an error, never launched.
const RAGGED_COLS: usize = 1001;
/// The bandwidth measurement's shape.
const BANDWIDTH_SHAPE: (usize, usize) = (8192, 4096);
/// GEMM shapes (M, N, K): ragged edges on every side, and a few whole tiles.
const GEMM_SHAPES: [(usize, usize, usize); 2] = [(300, 200, 136), (512, 640, 1024)];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => {
            println!(
                "{} built for sm_90a and sm_100a, {} for sm_90a; no GPU to run them on ({e})",
                rmsnorm::ENTRY,
                gemm::ENTRY
            );
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let module = Module::load(&device, &PTX)?;
    let mut failed = Vec::new();
    for cols in RMSNORM_COLS {
        let worst = rmsnorm::check(&device, &module, RMSNORM_ROWS, cols)?;
        report(
            &mut failed,
            format!("{} {RMSNORM_ROWS}×{cols}", rmsnorm::ENTRY),
            worst,
            "matches x·rsqrt(mean(x²)+eps)·w",
        );
    }
    match rmsnorm::check(&device, &module, RMSNORM_ROWS, RAGGED_COLS) {
        Err(e) if e.to_string().contains("multiple of 8") => {
            println!("{RMSNORM_ROWS}×{RAGGED_COLS} refused as expected: {e}")
        }
        Err(e) => return Err(e),
        Ok(_) => failed.push(format!("{} accepted {RAGGED_COLS} columns", rmsnorm::ENTRY)),
    }
    let (rows, cols) = BANDWIDTH_SHAPE;
    let gbps = rmsnorm::bandwidth(&device, &module, rows, cols)?;
    println!("{} {rows}×{cols} on {}: {gbps:.0} GB/s (x and y once, w once)", rmsnorm::ENTRY, device.attributes().name);

    if module.arch() == Arch::Sm90a {
        for shape @ (m, n, k) in GEMM_SHAPES {
            let worst = gemm::check(&device, &module, shape)?;
            report(&mut failed, format!("{} {m}×{n}×{k}", gemm::ENTRY), worst, "matches A·Bᵀ");
        }
    } else {
        println!("{} is built for sm_90a only; skipped on {}", gemm::ENTRY, module.arch().name());
    }
    if failed.is_empty() { Ok(()) } else { Err(format!("mismatch: {}", failed.join("; ")).into()) }
}

/// Prints one check's largest error (in units of its tolerance) and records a failure.
fn report(failed: &mut Vec<String>, what: String, worst: f64, claim: &str) {
    let ok = worst <= 1.0;
    println!("{what}: largest error {worst:.3} of the tolerance, {}", if ok { claim } else { "MISMATCH" });
    if !ok {
        failed.push(what);
    }
}
