//! Step 1: `cargo build` of the device crate for `nvptx64-nvidia-cuda`, capturing the LTO
//! bitcode that rustc hands to its linker.
//!
//! rustc links an nvptx cdylib by calling the "linker" with the fat-LTO bitcode object. We
//! point `-C linker` at a two-line capture script that copies the objects aside; the real link
//! (`crate::link`) runs afterwards in this process. The script writes a placeholder output so
//! cargo's freshness tracking stays correct: when nothing changed, cargo skips the link and the
//! previously captured objects are still the right ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain::{Toolchain, is_under, run_capture};
use crate::{Arch, BuildError, io_err};

pub(crate) struct DeviceBuild {
    /// The captured LTO bitcode objects.
    pub objects: Vec<PathBuf>,
    /// Source files rustc read for the crate and its path dependencies, plus their manifests.
    pub sources: Vec<PathBuf>,
}

const CAPTURE_SCRIPT: &str = r#"#!/bin/sh
# Written by warpforge-builder: rustc's nvptx link step, captured. Copies the LTO bitcode
# objects to $WARPFORGE_CAPTURE_DIR and writes a placeholder output; the builder links them.
set -e
out=""
rm -f "$WARPFORGE_CAPTURE_DIR"/*.o
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *.o) cp "$1" "$WARPFORGE_CAPTURE_DIR/"; shift ;;
    *) shift ;;
  esac
done
echo "// linked by warpforge-builder" > "$out"
"#;

pub(crate) fn build_device_crate(
    tools: &Toolchain,
    manifest: &Path,
    arch: Arch,
    work: &Path,
) -> Result<DeviceBuild, BuildError> {
    let capture = work.join("captured");
    std::fs::create_dir_all(&capture).map_err(io_err(&capture))?;
    let script = work.join("capture-link.sh");
    write_if_changed(&script, CAPTURE_SCRIPT)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).map_err(io_err(&script))?;
    }

    let flags = [
        format!("-Ctarget-cpu={}", arch.name()),
        format!("-Clinker={}", script.display()),
        format!("--cfg=warpforge_arch=\"{}\"", arch.name()),
    ];
    let mut cmd = Command::new(&tools.cargo);
    cmd.args(["build", "--release", "--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(work.join("cargo"))
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"))
        .env("WARPFORGE_CAPTURE_DIR", &capture)
        .env("RUSTC", &tools.rustc);
    // The outer build's settings must not leak in: they would change the PTX (wrappers,
    // flags) or point cargo at the outer target directory and its lock.
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "RUSTDOCFLAGS",
    ] {
        cmd.env_remove(var);
    }
    run_capture(&mut cmd)?;

    let mut objects: Vec<PathBuf> = std::fs::read_dir(&capture)
        .map_err(io_err(&capture))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "o"))
        .collect();
    objects.sort();
    if objects.is_empty() {
        return Err(BuildError::Invalid(format!(
            "the device crate {} produced no bitcode: is it `crate-type = [\"cdylib\"]` with `lto = \"fat\"` in [profile.release]?",
            manifest.display()
        )));
    }

    let crate_name = crate_name(manifest)?;
    let dep_info = work.join("cargo/nvptx64-nvidia-cuda/release").join(format!("{crate_name}.d"));
    let sources = read_dep_info(&dep_info, &tools.sysroot)?;
    Ok(DeviceBuild { objects, sources })
}

fn write_if_changed(path: &Path, contents: &str) -> Result<(), BuildError> {
    if std::fs::read_to_string(path).ok().as_deref() != Some(contents) {
        std::fs::write(path, contents).map_err(io_err(path))?;
    }
    Ok(())
}

/// The lib target name of the device crate (`[lib] name`, else the package name with `_`).
fn crate_name(manifest: &Path) -> Result<String, BuildError> {
    let text = std::fs::read_to_string(manifest).map_err(io_err(manifest))?;
    let mut section = "";
    let (mut package, mut lib) = (None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if let Some(v) = line.strip_prefix("name").map(str::trim).and_then(|r| r.strip_prefix('=')) {
            let v = v.trim().trim_matches('"').to_string();
            match section {
                "[package]" => package = Some(v),
                "[lib]" => lib = Some(v),
                _ => {}
            }
        }
    }
    lib.or(package)
        .map(|n| n.replace('-', "_"))
        .ok_or_else(|| BuildError::Invalid(format!("{}: no package name", manifest.display())))
}

/// Source files listed in cargo's dep-info, minus the toolchain's own, plus the manifest of
/// every crate they belong to.
fn read_dep_info(path: &Path, sysroot: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let Some((_, deps)) = text.lines().next().and_then(|l| l.split_once(": ")) else {
        return Err(BuildError::Invalid(format!("{}: unexpected dep-info format", path.display())));
    };
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            ' ' => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            _ => current.push(c),
        }
    }
    if !current.is_empty() {
        files.push(PathBuf::from(current));
    }
    let mut out: Vec<PathBuf> = files.into_iter().filter(|f| !is_under(f, sysroot)).collect();
    let mut manifests = Vec::new();
    for f in &out {
        let mut dir = f.parent();
        while let Some(d) = dir {
            let m = d.join("Cargo.toml");
            if m.is_file() {
                manifests.push(m);
                break;
            }
            dir = d.parent();
        }
    }
    out.extend(manifests);
    out.sort();
    out.dedup();
    Ok(out)
}
