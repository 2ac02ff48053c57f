//! Builds warpforge's kernels (gpu-kernels/kernels) to PTX for sm_90a and sm_100a and embeds it.
//!
//! Two sources of PTX, one rule: inside this workspace, on the pinned nightly, the kernels are
//! rebuilt from source with warpforge-builder (and checked by ptxas when found); everywhere
//! else — a service building `warpforge` with stable Rust and no CUDA toolkit — the PTX shipped
//! in `gpu-kernels/generated/` is embedded as is. `tests/shipped_ptx.rs` fails when the shipped
//! files differ from a fresh build; `WARPFORGE_BLESS=1 cargo build` refreshes them.
//! `WARPFORGE_PTX=shipped|build` forces either path.

use std::path::{Path, PathBuf};
use std::process::Command;

use warpforge_builder::{Arch, Builder, PtxModule};

/// The toolchain that rebuilds the shipped PTX (rust-toolchain.toml pins the same one).
const PINNED_COMMIT: &str = "e50aa6fba4e63ab34c72bf9acfd2c307c1155d1a";

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let shipped = root.join("gpu-kernels/generated");
    println!("cargo:rerun-if-env-changed=WARPFORGE_PTX");
    println!("cargo:rerun-if-env-changed=WARPFORGE_BLESS");

    let forced = std::env::var("WARPFORGE_PTX").ok();
    let rebuild = match forced.as_deref() {
        Some("build") => true,
        Some("shipped") => false,
        Some(other) => panic!("WARPFORGE_PTX must be `build` or `shipped`, not `{other}`"),
        None => root.join("gpu-kernels/kernels/Cargo.toml").is_file() && on_pinned_toolchain(),
    };

    if rebuild {
        let modules = Builder::new("gpu-kernels/kernels")
            .arch(Arch::Sm90a)
            .arch(Arch::Sm100a)
            .target_dir(device_target_dir(&out))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let bless = std::env::var("WARPFORGE_BLESS").is_ok_and(|v| v == "1");
        for module in &modules {
            let ptx = std::fs::read_to_string(&module.ptx_path).expect("builder wrote the PTX");
            write(&out.join(format!("{}.ptx", module.arch)), &ptx);
            write(&out.join(format!("{}.report.txt", module.arch)), &report(module));
            if bless {
                write(&shipped.join(format!("{}.ptx", module.arch)), &ptx);
            }
        }
        println!("cargo:rustc-env=WARPFORGE_PTX_ORIGIN=built");
    } else {
        for arch in Arch::ALL {
            let file = shipped.join(format!("{arch}.ptx"));
            println!("cargo:rerun-if-changed={}", file.display());
            let ptx = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("warpforge: shipped PTX {} unreadable ({e})", file.display()));
            write(&out.join(format!("{arch}.ptx")), &ptx);
            write(&out.join(format!("{arch}.report.txt")), "shipped PTX, not rebuilt: no ptxas report\n");
        }
        println!("cargo:rustc-env=WARPFORGE_PTX_ORIGIN=shipped");
    }
}

/// True when the rustc of this build is the pinned nightly.
fn on_pinned_toolchain() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(PINNED_COMMIT))
        .unwrap_or(false)
}

/// `target/warpforge-device`: one device build shared by every profile and by check/clippy
/// (the PTX is always built in release), next to the outer build's own folders.
fn device_target_dir(out: &Path) -> PathBuf {
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out (or with a <triple>/ level).
    out.ancestors()
        .find(|p| p.join("CACHEDIR.TAG").is_file())
        .map(|t| t.join("warpforge-device"))
        .unwrap_or_else(|| out.join("warpforge-device"))
}

fn report(module: &PtxModule) -> String {
    let mut s = format!("{}: {} entries\n", module.arch, module.entries.len());
    match &module.ptxas {
        None => s.push_str("ptxas: not found, module not assembled\n"),
        Some(r) => {
            s.push_str(&format!("ptxas: {}\n", r.ptxas.display()));
            for k in &r.kernels {
                s.push_str(&format!(
                    "  {:<40} {:>3} regs  {:>6} B smem  spills {}/{} B  stack {} B\n",
                    k.name, k.registers, k.shared_bytes, k.spill_stores, k.spill_loads, k.stack_frame
                ));
            }
            for n in &r.notes {
                s.push_str(&format!("  note: {n}\n"));
            }
        }
    }
    s
}

fn write(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(contents) {
        std::fs::write(path, contents).unwrap_or_else(|e| panic!("warpforge: cannot write {}: {e}", path.display()));
    }
}
