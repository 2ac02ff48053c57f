//! Step 3: assemble each module with ptxas (when one is found) and keep its resource report.
//!
//! ptxas is the only check of a PTX module short of a GPU: it rejects invalid instruction forms
//! for the arch, and its `-v` report gives registers and spills per kernel. It is found at
//! `$PTXAS`, on `PATH`, under `$CUDA_HOME/bin` / `/usr/local/cuda/bin`, or in the PyPI package
//! `nvidia-cuda-nvcc` (through `python3`, or the venv at `$WARPFORGE_PTXAS_VENV`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Arch, BuildError};

/// Where [`find`] looks, for messages.
pub const SEARCH_ORDER: &str = "looked at $PTXAS, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin and the \
     PyPI package nvidia-cuda-nvcc (python3 or $WARPFORGE_PTXAS_VENV/bin/python3)";

/// Resources of one kernel as ptxas reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelReport {
    /// Entry name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of spill stores.
    pub spill_stores: u32,
    /// Bytes of spill loads.
    pub spill_loads: u32,
    /// Bytes of stack frame.
    pub stack_frame: u32,
    /// Bytes of static shared memory.
    pub shared_bytes: u32,
}

/// ptxas's report for one module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// The ptxas that ran.
    pub ptxas: PathBuf,
    /// The assembled module (a cubin next to the PTX), loadable without a driver JIT on exactly
    /// the module's compute capability.
    pub cubin: PathBuf,
    /// Per-kernel resources.
    pub kernels: Vec<KernelReport>,
    /// Informational lines worth reading (e.g. wgmma serialisation, ignored setmaxnreg).
    pub notes: Vec<String>,
}

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
    if let Some(p) = std::env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    for root in [std::env::var_os("CUDA_HOME"), std::env::var_os("CUDA_PATH"), Some("/usr/local/cuda".into())]
        .into_iter()
        .flatten()
    {
        let p = PathBuf::from(root).join("bin/ptxas");
        if p.is_file() {
            return Some(p);
        }
    }
    let mut pythons = vec![PathBuf::from("python3")];
    if let Some(venv) = std::env::var_os("WARPFORGE_PTXAS_VENV") {
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

/// Assembles `ptx` for `arch` into a `.cubin` beside it; fails on any ptxas error, and on
/// spills when `deny_spills`.
pub fn assemble(ptxas: &Path, ptx: &Path, arch: Arch, deny_spills: bool) -> Result<PtxasReport, BuildError> {
    let cubin = ptx.with_extension("cubin");
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
    let mut report = parse_report(&text);
    report.ptxas = ptxas.to_path_buf();
    report.cubin = cubin;
    if deny_spills {
        let spilling: Vec<String> = report
            .kernels
            .iter()
            .filter(|k| k.spill_stores > 0 || k.spill_loads > 0)
            .map(|k| format!("{} ({} B stores, {} B loads)", k.name, k.spill_stores, k.spill_loads))
            .collect();
        if !spilling.is_empty() {
            return Err(BuildError::Ptxas {
                arch,
                message: format!("register spills with WARPFORGE_DENY_SPILLS=1: {}", spilling.join(", ")),
            });
        }
    }
    Ok(report)
}

/// Parses `ptxas -v` output.
pub fn parse_report(text: &str) -> PtxasReport {
    let mut report = PtxasReport::default();
    // The entry whose `-v` lines are being read. `Function properties for F` switches the stack
    // frame / spill line that follows to F, which after an entry's own block is often a `.func`
    // it calls (ptxas lists those after the entry): their figures are ignored, they must not
    // overwrite the entry's.
    let mut current: Option<usize> = None;
    let mut properties_of_current = false;
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("ptxas info    : Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            report.kernels.push(KernelReport { name, ..Default::default() });
            current = Some(report.kernels.len() - 1);
            properties_of_current = false;
        } else if let Some(name) = l.strip_prefix("ptxas info    : Function properties for ") {
            properties_of_current = current.is_some_and(|i| report.kernels[i].name == name.trim());
        } else if let Some(k) = current.map(|i| &mut report.kernels[i]) {
            if l.contains("bytes stack frame") {
                if !properties_of_current {
                    continue;
                }
                k.stack_frame = number_before(l, "bytes stack frame");
                k.spill_stores = number_before(l, "bytes spill stores");
                k.spill_loads = number_before(l, "bytes spill loads");
            } else if l.starts_with("ptxas info    : Used") {
                k.registers = number_before(l, "registers");
                k.shared_bytes = number_before(l, "bytes smem");
            }
        }
        if (l.contains("(C7517)") || l.contains("(C7508)") || l.contains("(C7515)") || l.starts_with("ptxas warning"))
            && !report.notes.iter().any(|n| n == l)
        {
            report.notes.push(l.to_string());
        }
    }
    report
}

fn number_before(line: &str, unit: &str) -> u32 {
    line.find(unit).and_then(|i| line[..i].split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_registers_spills_and_notes() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'\n\
ptxas info    : Function properties for gemm\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 168 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n\
ptxas info    : (C7508) Potential Performance Loss: setmaxnreg ignored\n\
ptxas info    : Compile time = 36525.188 ms\n\
ptxas info    : Function properties for _RNvNtCsbSE61zFgCyu_4core9panicking9panic_fmt\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90a'\n\
ptxas info    : Function properties for saxpy\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]\n";
        let r = parse_report(text);
        assert_eq!(r.kernels.len(), 2);
        assert_eq!(
            r.kernels[0],
            KernelReport {
                name: "gemm".into(),
                registers: 168,
                spill_stores: 4,
                spill_loads: 12,
                stack_frame: 8,
                shared_bytes: 2048
            }
        );
        assert_eq!(r.kernels[1].registers, 10);
        assert_eq!(r.kernels[1].spill_stores, 0);
        assert_eq!(r.notes.len(), 1);
    }
}
