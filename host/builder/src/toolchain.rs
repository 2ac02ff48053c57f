//! Finding the pieces of the Rust toolchain the builder drives.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BuildError;

/// The cargo/rustc pair of the calling build and the LLVM tools that match its LLVM.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// cargo of the calling build (`$CARGO`), so the device crate uses the same toolchain.
    pub cargo: PathBuf,
    /// rustc of the calling build (`$RUSTC`).
    pub rustc: PathBuf,
    /// `rustc --print sysroot`.
    pub sysroot: PathBuf,
    /// Folder holding `llc`, `opt`, `llvm-link`, `llvm-dis`.
    pub llvm_bin: PathBuf,
}

impl Toolchain {
    /// Locates the toolchain; fails with the `rustup` command that fixes what is missing.
    pub fn locate() -> Result<Self, BuildError> {
        // CARGO and RUSTC: set by cargo for the build script, tracked by cargo itself (see `env`).
        let cargo = std::env::var_os("CARGO").map(PathBuf::from).unwrap_or_else(|| "cargo".into());
        let rustc = std::env::var_os("RUSTC").map(PathBuf::from).unwrap_or_else(|| "rustc".into());
        let version = run_capture(Command::new(&rustc).arg("-vV"))?;
        let field = |key: &str| {
            version.lines().find_map(|l| l.strip_prefix(key)).map(str::trim).unwrap_or_default().to_string()
        };
        let release = field("release:");
        let host = field("host:");
        let toolchain_hint = crate::env::var("RUSTUP_TOOLCHAIN").unwrap_or_else(|| "<your nightly>".into());
        if !release.contains("nightly") && !release.contains("dev") {
            return Err(BuildError::Missing {
                what: format!("a nightly rustc (found {release})"),
                install: "device crates need nightly features (-Zbuild-std, abi_ptx, asm_experimental_arch); \
                          build from a directory whose rust-toolchain.toml pins a nightly, e.g. nightly-2026-05-20"
                    .into(),
            });
        }
        let sysroot = PathBuf::from(run_capture(Command::new(&rustc).args(["--print", "sysroot"]))?.trim());
        let llvm_bin = sysroot.join("lib/rustlib").join(&host).join("bin");
        for tool in ["llc", "opt", "llvm-link", "llvm-dis"] {
            if !llvm_bin.join(tool).is_file() {
                return Err(BuildError::Missing {
                    what: format!("{tool} (component llvm-tools) in {}", llvm_bin.display()),
                    install: format!("run `rustup component add llvm-tools --toolchain {toolchain_hint}`"),
                });
            }
        }
        if !sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml").is_file() {
            return Err(BuildError::Missing {
                what: "the Rust sources of `core` (component rust-src), needed by -Zbuild-std".into(),
                install: format!("run `rustup component add rust-src --toolchain {toolchain_hint}`"),
            });
        }
        Ok(Toolchain { cargo, rustc, sysroot, llvm_bin })
    }

    /// Path of one LLVM tool.
    pub fn llvm(&self, tool: &str) -> PathBuf {
        self.llvm_bin.join(tool)
    }
}

/// Runs a command, returning its stdout, or a `BuildError::Command` with its output.
pub(crate) fn run_capture(cmd: &mut Command) -> Result<String, BuildError> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| BuildError::Missing {
        what: format!("`{}` ({e})", cmd.get_program().to_string_lossy()),
        install: "check that the Rust toolchain is installed and on PATH".into(),
    })?;
    if !out.status.success() {
        return Err(BuildError::Command {
            command: shown,
            status: out.status.to_string(),
            output: format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True when `path` lies inside `root`.
pub(crate) fn is_under(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}
