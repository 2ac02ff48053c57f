//! Step 3: assemble each module with ptxas (when one is found) and keep its resource report.
//!
//! ptxas is the only check of a PTX module short of a GPU: it rejects invalid instruction forms
//! for the arch, and its `-v` report gives registers and spills per kernel. It is found at
//! `$PTXAS`, on `PATH`, under `$CUDA_HOME/bin` / `/usr/local/cuda/bin`, or in the PyPI package
//! `nvidia-cuda-nvcc` (through `python3`, or the venv at `$WARPFORGE_PTXAS_VENV`). [`Checks`]
//! decides what in the report fails the build (local memory by default; spills and wgmma
//! serialisation when spills are denied).

mod report;
#[cfg(test)]
mod tests;
mod verdict;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use report::{FunctionReport, KernelReport, PtxasReport, call_graph, parse_report};
pub use verdict::Checks;

use crate::{Arch, BuildError, env};

/// Where [`find`] looks, for messages.
pub const SEARCH_ORDER: &str = "looked at $PTXAS, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin and the \
     PyPI package nvidia-cuda-nvcc (python3 or $WARPFORGE_PTXAS_VENV/bin/python3)";

/// The error when ptxas is required but absent.
pub fn missing_error() -> BuildError {
    BuildError::Missing {
        what: "ptxas (WARPFORGE_REQUIRE_PTXAS=1)".into(),
        install: format!(
            "install it with `pip install nvidia-cuda-nvcc` (or a CUDA toolkit), or set PTXAS=/path/to/ptxas; {SEARCH_ORDER}"
        ),
    }
}

/// Finds a ptxas binary.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    for root in
        [env::var_os("CUDA_HOME"), env::var_os("CUDA_PATH"), Some("/usr/local/cuda".into())].into_iter().flatten()
    {
        let p = PathBuf::from(root).join("bin/ptxas");
        if p.is_file() {
            return Some(p);
        }
    }
    let mut pythons = vec![PathBuf::from("python3")];
    if let Some(venv) = env::var_os("WARPFORGE_PTXAS_VENV") {
        pythons.insert(0, PathBuf::from(venv).join("bin/python3"));
    }
    let probe = "import nvidia, os\nfor b in nvidia.__path__:\n  for s in ('cu13/bin/ptxas','cu12/bin/ptxas','cuda_nvcc/bin/ptxas'):\n    p=os.path.join(b,s)\n    if os.path.isfile(p): print(p); raise SystemExit(0)\nraise SystemExit(1)";
    for py in pythons {
        if let Ok(out) = Command::new(&py).args(["-c", probe]).output()
            && out.status.success()
        {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Assembles `ptx` for `arch` into a `.cubin` beside it; fails on any ptxas error and on what
/// `checks` refuses. ptxas's output is kept beside the PTX with a fingerprint of its inputs, so a
/// build script re-run for another reason (an environment variable, an allow-list) does not
/// assemble the same module again.
pub fn assemble(ptxas: &Path, ptx: &Path, arch: Arch, checks: &Checks) -> Result<PtxasReport, BuildError> {
    let cubin = ptx.with_extension("cubin");
    let log = ptx.with_extension("ptxas-v.txt");
    let source = std::fs::read_to_string(ptx).map_err(crate::io_err(ptx))?;
    let key = format!(
        "inputs {:016x}\n",
        fingerprint(&[source.as_bytes(), ptxas.as_os_str().as_encoded_bytes(), arch.name().as_bytes()])
    );
    let cached = std::fs::read_to_string(&log).ok().and_then(|t| t.strip_prefix(&key).map(str::to_string));
    let text = match cached.filter(|_| cubin.is_file()) {
        Some(text) => text,
        None => {
            let out = Command::new(ptxas)
                .arg(format!("-arch={}", arch.name()))
                .arg("-v")
                .arg("-o")
                .arg(&cubin)
                .arg(ptx)
                .output()
                .map_err(|e| BuildError::Missing {
                    what: format!("{} ({e})", ptxas.display()),
                    install: SEARCH_ORDER.into(),
                })?;
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if !out.status.success() {
                return Err(BuildError::Ptxas {
                    arch,
                    message: format!("{} rejected {}:\n{text}", ptxas.display(), ptx.display()),
                });
            }
            std::fs::write(&log, format!("{key}{text}")).map_err(crate::io_err(&log))?;
            text
        }
    };
    let mut report = parse_report(&text);
    report.attribute_calls(&source);
    report.ptxas = ptxas.to_path_buf();
    report.cubin = cubin;
    checks.verdict(&report).map_err(|message| BuildError::Ptxas { arch, message })?;
    Ok(report)
}

/// FNV-1a, 64 bit, over `parts` with a separator: a fingerprint against stale files.
fn fingerprint(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.iter().chain(&[0xff]))
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}
