//! Builds warpforge's kernels (gpu-kernels/kernels) to PTX for sm_90a and sm_100a and embeds it.
//!
//! Two sources of PTX, one rule: inside this workspace, on the pinned nightly, the kernels are
//! rebuilt from source with warpforge-builder (and checked by ptxas when found); everywhere
//! else — a service building `warpforge` with stable Rust and no CUDA toolkit — the PTX shipped
//! in `gpu-kernels/generated/` is embedded as is. `tests/shipped_ptx.rs` fails when the shipped
//! files differ from a fresh build; `WARPFORGE_BLESS=1 cargo build` refreshes them.
//! `WARPFORGE_PTX=shipped|build` forces either path.
//!
//! Cubins: when ptxas assembled the sm_90a module, its cubin is embedded too (the runtime loads
//! it instead of JIT-compiling the PTX, which takes minutes for the GEMM module on a cold
//! driver cache). A cubin is shipped beside the PTX with the FNV-1a hash of the PTX it was
//! assembled from (`sm_90a.cubin.source`); a build without ptxas embeds the shipped cubin only
//! when that hash matches the PTX it embeds, and no cubin otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

use warpforge_builder::{Arch, Builder, PtxModule, env};

/// Arches whose cubin is embedded and shipped.
const CUBIN_ARCHS: [Arch; 1] = [Arch::Sm90a];

/// The toolchain that rebuilds the shipped PTX (rust-toolchain.toml pins the same one).
const PINNED_COMMIT: &str = "e50aa6fba4e63ab34c72bf9acfd2c307c1155d1a";

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let shipped = root.join("gpu-kernels/generated");
    // Every variable a build script reads goes through warpforge_builder::env, which prints its
    // rerun-if-env-changed line; CARGO_MANIFEST_DIR, OUT_DIR and RUSTC are cargo's own.
    let forced = env::var("WARPFORGE_PTX");
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
        let bless = env::flag("WARPFORGE_BLESS");
        for module in &modules {
            let ptx = std::fs::read_to_string(&module.ptx_path).expect("builder wrote the PTX");
            write(&out.join(format!("{}.ptx", module.arch)), &ptx);
            write(&out.join(format!("{}.report.txt", module.arch)), &report(module));
            if bless {
                write(&shipped.join(format!("{}.ptx", module.arch)), &ptx);
            }
            if CUBIN_ARCHS.contains(&module.arch) {
                let fresh = module.ptxas.as_ref().map(|r| std::fs::read(&r.cubin).expect("ptxas wrote the cubin"));
                if let (Some(cubin), true) = (&fresh, bless) {
                    write_bytes(&shipped.join(format!("{}.cubin", module.arch)), cubin);
                    write(&shipped.join(format!("{}.cubin.source", module.arch)), &cubin_source(&ptx));
                }
                let cubin = fresh.unwrap_or_else(|| shipped_cubin(&shipped, module.arch, &ptx));
                write_bytes(&out.join(format!("{}.cubin", module.arch)), &cubin);
            } else {
                write_bytes(&out.join(format!("{}.cubin", module.arch)), &[]);
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
            let cubin = if CUBIN_ARCHS.contains(&arch) { shipped_cubin(&shipped, arch, &ptx) } else { Vec::new() };
            write_bytes(&out.join(format!("{arch}.cubin")), &cubin);
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
                s.push_str(&format!("  {k}\n"));
            }
            for n in &r.notes {
                s.push_str(&format!("  note: {n}\n"));
            }
        }
    }
    s
}

/// The shipped cubin of `arch` when it was assembled from exactly `ptx`; empty otherwise.
fn shipped_cubin(shipped: &Path, arch: Arch, ptx: &str) -> Vec<u8> {
    let cubin = shipped.join(format!("{arch}.cubin"));
    let source = shipped.join(format!("{arch}.cubin.source"));
    println!("cargo:rerun-if-changed={}", cubin.display());
    println!("cargo:rerun-if-changed={}", source.display());
    match (std::fs::read(&cubin), std::fs::read_to_string(&source)) {
        (Ok(bytes), Ok(recorded)) if recorded == cubin_source(ptx) => bytes,
        _ => Vec::new(),
    }
}

/// What `<arch>.cubin.source` records: the hash of the PTX the cubin was assembled from.
fn cubin_source(ptx: &str) -> String {
    // FNV-1a, 64 bit: a fingerprint against stale files, not a security measure.
    let hash = ptx.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("fnv1a64 {hash:016x}\n")
}

fn write_bytes(path: &Path, contents: &[u8]) {
    if std::fs::read(path).ok().as_deref() != Some(contents) {
        std::fs::write(path, contents).unwrap_or_else(|e| panic!("warpforge: cannot write {}: {e}", path.display()));
    }
}

fn write(path: &Path, contents: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(contents) {
        std::fs::write(path, contents).unwrap_or_else(|e| panic!("warpforge: cannot write {}: {e}", path.display()));
    }
}
