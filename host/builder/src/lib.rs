//! warpforge-builder: compile a `no_std` Rust device crate to one PTX module per GPU arch.
//!
//! The job `cuda_builder` does for Rust-CUDA, done with nothing but the Rust toolchain: rustc's
//! own `nvptx64-nvidia-cuda` target (with `-Zbuild-std=core`, fat LTO, `panic=abort`) and the
//! LLVM tools of the `llvm-tools` component. rustc's NVPTX link step normally runs the
//! `llvm-bitcode-linker` component; the builder supplies that step itself (see [`link`]): it
//! links the LTO bitcode, keeps only the kernels, applies each kernel's launch attributes
//! (recorded by `#[kernel]`) as `nvvm.*` attributes, and runs `llc`. When `ptxas` is found,
//! every module is assembled for its arch and its report is kept and checked: registers, stack
//! frame, local memory and spills per entry (called functions included), wgmma serialisation.
//! Local memory fails the build unless the entry is allowed ([`Builder::allow_stack_frame`]);
//! spills and serialised wgmma fail with [`Builder::deny_spills`] (see [`Checks`]).
//!
//! ```no_run
//! // build.rs of a crate that ships its own kernels
//! let modules = warpforge_builder::Builder::new("kernels")
//!     .arch(warpforge_builder::Arch::Sm90a)
//!     .build()
//!     .unwrap_or_else(|e| panic!("{e}"));
//! for m in &modules {
//!     println!("cargo:rustc-env=KERNELS_{}={}", m.arch.name().to_uppercase(), m.ptx_path.display());
//! }
//! ```
//!
//! The device crate is built in its own target directory (no deadlock on the outer build's
//! lock), with the toolchain of the calling cargo, and `cargo:rerun-if-changed` lines name
//! exactly the source files rustc read (from its dep-info), plus their manifests.

mod cargo_build;
pub mod env;
pub mod ir;
pub mod link;
pub mod ptxas;
pub mod toolchain;

use std::fmt;
use std::path::{Path, PathBuf};

pub use ptxas::{Checks, FunctionReport, KernelReport, PtxasReport};

/// A GPU architecture the builder can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Hopper with the arch-specific features (wgmma, setmaxnreg): H100, H200.
    Sm90a,
    /// Blackwell datacenter with the arch-specific features (tcgen05, CLC): B200.
    Sm100a,
}

impl Arch {
    /// Every arch, in the order modules are built.
    pub const ALL: [Arch; 2] = [Arch::Sm90a, Arch::Sm100a];

    /// `sm_90a`, `sm_100a`: the PTX `.target`, rustc's `target-cpu` and the `warpforge_arch` cfg.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
        }
    }

    /// PTX ISA version emitted (`llc -mattr=+ptxNN`). 8.6 covers every Hopper form the DSL
    /// uses; Blackwell's block-scaled forms need 8.8. Both stay within what a CUDA 13.0
    /// driver JIT-compiles (ISA 9.0).
    pub const fn ptx_isa(self) -> u32 {
        match self {
            Arch::Sm90a => 86,
            Arch::Sm100a => 88,
        }
    }

    /// Compute capability (major, minor) of the GPUs that run this module.
    pub const fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm90a => (9, 0),
            Arch::Sm100a => (10, 0),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One kernel entry of a built module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEntry {
    /// The PTX entry name (the Rust fn name; kernels are `no_mangle`).
    pub name: String,
    /// Launch attributes from its `#[kernel(...)]`.
    pub attrs: warpforge_logic::kernel_attrs::KernelAttrs,
}

/// A built PTX module.
#[derive(Clone, Debug)]
pub struct PtxModule {
    /// The arch it was built for.
    pub arch: Arch,
    /// Where the `.ptx` file is.
    pub ptx_path: PathBuf,
    /// Kernel entries, in name order.
    pub entries: Vec<KernelEntry>,
    /// ptxas's verdict, when a ptxas was found.
    pub ptxas: Option<PtxasReport>,
}

/// Everything that can stop a build, each with what to do about it.
#[derive(Debug)]
pub enum BuildError {
    /// A tool or toolchain component is missing.
    Missing { what: String, install: String },
    /// A command ran and failed.
    Command { command: String, status: String, output: String },
    /// The device crate produced something the builder cannot use.
    Invalid(String),
    /// ptxas rejected a module, or reported what [`Checks`] refuses (local memory, spills, wgmma
    /// serialisation).
    Ptxas { arch: Arch, message: String },
    /// Filesystem trouble.
    Io { path: PathBuf, error: std::io::Error },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Missing { what, install } => write!(f, "warpforge-builder: {what} not found; {install}"),
            BuildError::Command { command, status, output } => {
                write!(f, "warpforge-builder: `{command}` failed ({status}):\n{output}")
            }
            BuildError::Invalid(msg) => write!(f, "warpforge-builder: {msg}"),
            BuildError::Ptxas { arch, message } => write!(f, "warpforge-builder: ptxas ({arch}): {message}"),
            BuildError::Io { path, error } => write!(f, "warpforge-builder: {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for BuildError {}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |error| BuildError::Io { path: path.to_path_buf(), error }
}

/// How ptxas is used after the PTX is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxasPolicy {
    /// Use ptxas when found, skip (with a note) when not.
    IfFound,
    /// Fail the build when no ptxas is found (`WARPFORGE_REQUIRE_PTXAS=1`).
    Require,
    /// Never run ptxas.
    Skip,
}

/// Builds one device crate for a set of archs. See the crate docs.
#[derive(Clone, Debug)]
pub struct Builder {
    crate_dir: PathBuf,
    archs: Vec<Arch>,
    target_dir: Option<PathBuf>,
    ptxas: PtxasPolicy,
    checks: Checks,
    rerun_if_changed: bool,
}

impl Builder {
    /// A builder for the device crate at `crate_dir` (relative paths are taken from
    /// `CARGO_MANIFEST_DIR` when set, else the current directory).
    ///
    /// Defaults come from the environment (each read through [`env`], which declares it a
    /// build-script dependency): `WARPFORGE_REQUIRE_PTXAS=1` makes ptxas mandatory,
    /// `WARPFORGE_DENY_SPILLS=1` fails the build on any register spill or wgmma serialisation,
    /// `WARPFORGE_ALLOW_STACK_FRAME=entry[,entry…]` (or `*`) lets entries keep a stack frame,
    /// which fails the build otherwise (see [`Checks`]).
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        let dir = crate_dir.as_ref();
        let crate_dir = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::var_os("CARGO_MANIFEST_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::current_dir().unwrap_or_default())
                .join(dir)
        };
        let allowed = env::var("WARPFORGE_ALLOW_STACK_FRAME").unwrap_or_default();
        let allow_stack_frame = allowed.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        Builder {
            crate_dir,
            archs: Vec::new(),
            target_dir: None,
            ptxas: if env::flag("WARPFORGE_REQUIRE_PTXAS") { PtxasPolicy::Require } else { PtxasPolicy::IfFound },
            checks: Checks { deny_spills: env::flag("WARPFORGE_DENY_SPILLS"), allow_stack_frame },
            rerun_if_changed: std::env::var_os("OUT_DIR").is_some(),
        }
    }

    /// Adds an arch (at least one is required).
    pub fn arch(mut self, arch: Arch) -> Self {
        if !self.archs.contains(&arch) {
            self.archs.push(arch);
        }
        self
    }

    /// Where the device crate's cargo build goes (default: `$OUT_DIR/warpforge-device`, or
    /// `target/warpforge-device` under the crate outside a build script).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Overrides the ptxas policy taken from the environment.
    pub fn ptxas(mut self, policy: PtxasPolicy) -> Self {
        self.ptxas = policy;
        self
    }

    /// Fails the build when ptxas reports a spill (in an entry or a function it calls) or
    /// serialises wgmma; overrides `WARPFORGE_DENY_SPILLS`.
    pub fn deny_spills(mut self, deny: bool) -> Self {
        self.checks.deny_spills = deny;
        self
    }

    /// Lets `entry` (or a called function of that name) keep a stack frame, i.e. data in local
    /// memory, which otherwise fails the build; `"*"` allows every entry. Spills still fail when
    /// spills are denied. Adds to `WARPFORGE_ALLOW_STACK_FRAME`.
    pub fn allow_stack_frame(mut self, entry: impl Into<String>) -> Self {
        self.checks.allow_stack_frame.push(entry.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` lines for the device crate's sources (default:
    /// inside a build script). Environment variables are declared by [`env`] as they are read.
    pub fn rerun_if_changed(mut self, emit: bool) -> Self {
        self.rerun_if_changed = emit;
        self
    }

    /// Builds every requested arch; returns the modules in request order.
    pub fn build(&self) -> Result<Vec<PtxModule>, BuildError> {
        if self.archs.is_empty() {
            return Err(BuildError::Invalid(
                "no arch requested: call .arch(Arch::Sm90a) and/or .arch(Arch::Sm100a)".into(),
            ));
        }
        let manifest = self.crate_dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(BuildError::Invalid(format!(
                "no device crate at {} (Cargo.toml missing)",
                self.crate_dir.display()
            )));
        }
        let tools = toolchain::Toolchain::locate()?;
        let ptxas = match self.ptxas {
            PtxasPolicy::Skip => None,
            PtxasPolicy::IfFound => ptxas::find(),
            PtxasPolicy::Require => Some(ptxas::find().ok_or_else(ptxas::missing_error)?),
        };
        if ptxas.is_none() && self.ptxas == PtxasPolicy::IfFound && self.rerun_if_changed {
            println!("cargo:warning=warpforge-builder: no ptxas found, PTX not assembled ({})", ptxas::SEARCH_ORDER);
        }
        let target_root = self.target_dir.clone().unwrap_or_else(|| match std::env::var_os("OUT_DIR") {
            Some(out) => PathBuf::from(out).join("warpforge-device"),
            None => self.crate_dir.join("target").join("warpforge-device"),
        });
        let mut modules = Vec::new();
        let mut sources = std::collections::BTreeSet::new();
        for &arch in &self.archs {
            let work = target_root.join(arch.name());
            let built = cargo_build::build_device_crate(&tools, &manifest, arch, &work)?;
            sources.extend(built.sources);
            let (ptx_path, entries) = link::link_module(&tools, &built.objects, arch, &work)?;
            let report = match &ptxas {
                Some(bin) => Some(ptxas::assemble(bin, &ptx_path, arch, &self.checks)?),
                None => None,
            };
            if let (Some(r), true) = (&report, self.rerun_if_changed) {
                // Reported, not refused, unless spills are denied (see `Checks`).
                for k in r.kernels.iter().filter(|k| !k.wgmma_serialized.is_empty()) {
                    println!("cargo:warning={arch}: {}: wgmma serialized: {}", k.name, k.wgmma_serialized.join("; "));
                }
            }
            modules.push(PtxModule { arch, ptx_path, entries, ptxas: report });
        }
        if self.rerun_if_changed {
            for path in &sources {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        Ok(modules)
    }
}
