//! Builds warpforge's kernels (gpu-kernels/kernels) to PTX for sm_90a and sm_100a and embeds it,
//! with the test-only module of DSL probes (gpu-kernels/checks, sm_90a) beside it.
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

/// A device crate the root crate embeds: its folder, the archs it is built for, and the prefix
/// of its files in `OUT_DIR` and `gpu-kernels/generated/`.
struct DeviceCrate {
    dir: &'static str,
    archs: &'static [Arch],
    prefix: &'static str,
    /// Whether its cubin ships beside its PTX (the library's does; the test probes' is
    /// assembled when ptxas is at hand and JIT-compiled by the driver otherwise).
    ships_cubin: bool,
}

/// The kernel library: what `Warpforge` loads.
const LIBRARY: DeviceCrate =
    DeviceCrate { dir: "gpu-kernels/kernels", archs: &Arch::ALL, prefix: "", ships_cubin: true };
/// The DSL's hardware probes: loaded by the GPU tests only.
const CHECKS: DeviceCrate =
    DeviceCrate { dir: "gpu-kernels/checks", archs: &[Arch::Sm90a], prefix: "checks_", ships_cubin: false };

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
    let bless = env::flag("WARPFORGE_BLESS");
    let embed = Embed { out: &out, shipped: &shipped, bless };

    if rebuild {
        // The two crates build in their own target folders, side by side: ptxas, the long pole,
        // then assembles both modules at once on a machine with two cores.
        let device = device_target_dir(&out);
        std::thread::scope(|scope| {
            let builds = [LIBRARY, CHECKS].map(|krate| {
                let target = device.join(krate.prefix.trim_end_matches('_'));
                scope.spawn(move || (krate.build(&target), krate))
            });
            for build in builds {
                let (modules, krate) = build.join().expect("device build thread");
                for module in &modules {
                    embed.built(&krate, module);
                }
            }
        });
        println!("cargo:rustc-env=WARPFORGE_PTX_ORIGIN=built");
    } else {
        for krate in [LIBRARY, CHECKS] {
            for &arch in krate.archs {
                embed.shipped(&krate, arch);
            }
        }
        println!("cargo:rustc-env=WARPFORGE_PTX_ORIGIN=shipped");
    }
}

impl DeviceCrate {
    fn build(&self, target: &Path) -> Vec<PtxModule> {
        let mut builder = Builder::new(self.dir).target_dir(target);
        for &arch in self.archs {
            builder = builder.arch(arch);
        }
        builder.build().unwrap_or_else(|e| panic!("{e}"))
    }

    fn file(&self, arch: Arch, extension: &str) -> String {
        format!("{}{arch}.{extension}", self.prefix)
    }
}

/// Where the modules go: `OUT_DIR` for `include_str!`, and the shipped folder when blessing.
struct Embed<'a> {
    out: &'a Path,
    shipped: &'a Path,
    bless: bool,
}

impl Embed<'_> {
    /// Embeds a module just built (and blesses it into the shipped folder when asked).
    fn built(&self, krate: &DeviceCrate, module: &PtxModule) {
        let arch = module.arch;
        let ptx = std::fs::read_to_string(&module.ptx_path).expect("builder wrote the PTX");
        write(&self.out.join(krate.file(arch, "ptx")), &ptx);
        write(&self.out.join(krate.file(arch, "report.txt")), &report(module));
        if self.bless {
            write(&self.shipped.join(krate.file(arch, "ptx")), &ptx);
        }
        let fresh = module.ptxas.as_ref().map(|r| std::fs::read(&r.cubin).expect("ptxas wrote the cubin"));
        let cubin = if krate.ships_cubin && CUBIN_ARCHS.contains(&arch) {
            if let (Some(cubin), true) = (&fresh, self.bless) {
                write_bytes(&self.shipped.join(krate.file(arch, "cubin")), cubin);
                write(&self.shipped.join(krate.file(arch, "cubin.source")), &cubin_source(&ptx));
            }
            fresh.unwrap_or_else(|| shipped_cubin(self.shipped, &krate.file(arch, "cubin"), &ptx))
        } else if CUBIN_ARCHS.contains(&arch) {
            fresh.unwrap_or_default()
        } else {
            Vec::new()
        };
        write_bytes(&self.out.join(krate.file(arch, "cubin")), &cubin);
    }

    /// Embeds the shipped module of `arch` as is.
    fn shipped(&self, krate: &DeviceCrate, arch: Arch) {
        let file = self.shipped.join(krate.file(arch, "ptx"));
        println!("cargo:rerun-if-changed={}", file.display());
        let ptx = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("warpforge: shipped PTX {} unreadable ({e})", file.display()));
        write(&self.out.join(krate.file(arch, "ptx")), &ptx);
        write(&self.out.join(krate.file(arch, "report.txt")), "shipped PTX, not rebuilt: no ptxas report\n");
        let cubin = if krate.ships_cubin && CUBIN_ARCHS.contains(&arch) {
            shipped_cubin(self.shipped, &krate.file(arch, "cubin"), &ptx)
        } else {
            Vec::new()
        };
        write_bytes(&self.out.join(krate.file(arch, "cubin")), &cubin);
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

/// The shipped cubin `name` when it was assembled from exactly `ptx`; empty otherwise.
fn shipped_cubin(shipped: &Path, name: &str, ptx: &str) -> Vec<u8> {
    let cubin = shipped.join(name);
    let source = shipped.join(format!("{name}.source"));
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
