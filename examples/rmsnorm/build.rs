//! Builds the device crate in `device/` to PTX for sm_90a and sm_100a with `warpforge-builder`
//! and prints ptxas's report line per kernel (registers, shared memory, stack frame, local
//! memory, spills) when a ptxas is found; a kernel whose data fell into local memory fails the
//! build (`warpforge_builder::Checks`), and with `WARPFORGE_DENY_SPILLS=1` so does a spill.
//! Needs a nightly with rust-src and llvm-tools (this crate's rust-toolchain.toml pins one).

use warpforge_builder::{Arch, Builder};

fn main() {
    let modules = Builder::new("device").arch(Arch::Sm90a).arch(Arch::Sm100a).build().unwrap_or_else(|e| panic!("{e}"));
    for module in &modules {
        let var = format!("DEVICE_PTX_{}", module.arch.name().to_uppercase());
        println!("cargo:rustc-env={var}={}", module.ptx_path.display());
        if let Some(report) = &module.ptxas {
            for k in &report.kernels {
                println!("cargo:warning={}: {k}", module.arch);
            }
        }
    }
}
