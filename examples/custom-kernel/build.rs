//! Builds the device crate in `device/` to PTX for sm_90a and sm_100a, as any crate that
//! extends warpforge with its own kernels would, and prints ptxas's report line per kernel
//! (registers, shared memory, stack frame, local memory, spills) when a ptxas is found. A kernel
//! whose data fell into local memory fails this build (see `warpforge_builder::Checks`). Needs a nightly with rust-src and llvm-tools (this
//! repository's rust-toolchain.toml provides one).

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
