//! Step 2: the link step rustc's `llvm-bitcode-linker` would do, plus launch attributes.
//!
//! `llvm-link` the captured bitcode → read each `#[kernel]`'s attribute string →
//! `opt internalize,globaldce` keeping only the kernels (this also drops the attribute
//! statics) → apply `nvvm.*` attributes to the kernel definitions → `llc` for the arch →
//! declare the dynamic shared-memory window if used.

use std::path::{Path, PathBuf};
use std::process::Command;

use warpforge_logic::kernel_attrs::KernelAttrs;

use crate::toolchain::{Toolchain, run_capture};
use crate::{Arch, BuildError, KernelEntry, io_err, ir};

/// PTX symbol of the dynamic shared-memory window (see `warpforge_dsl::ptx::smem`).
pub const DYNAMIC_SMEM_SYMBOL: &str = "warpforge_dsmem";

/// Links the captured objects into `<work>/<arch>.ptx`; returns its path and kernel entries.
pub fn link_module(
    tools: &Toolchain,
    objects: &[PathBuf],
    arch: Arch,
    work: &Path,
) -> Result<(PathBuf, Vec<KernelEntry>), BuildError> {
    let linked_bc = work.join("linked.bc");
    let mut cmd = Command::new(tools.llvm("llvm-link"));
    cmd.args(objects).arg("-o").arg(&linked_bc);
    run_capture(&mut cmd)?;
    let linked_ir = disassemble(tools, &linked_bc)?;

    let kernels = ir::kernel_names(&linked_ir);
    if kernels.is_empty() {
        return Err(BuildError::Invalid("the device crate defines no kernel: mark entry points with #[kernel]".into()));
    }
    let mut entries = Vec::new();
    let strings = ir::attribute_strings(&linked_ir)?;
    for name in &kernels {
        let spec = strings.iter().find(|(k, _)| k == name).map(|(_, s)| s.as_str()).unwrap_or("");
        let attrs = KernelAttrs::parse(spec)
            .map_err(|e| BuildError::Invalid(format!("bad launch attributes for {name} ({spec:?}): {e:?}")))?;
        entries.push(KernelEntry { name: name.clone(), attrs });
    }

    let internal_bc = work.join("internalized.bc");
    let mut cmd = Command::new(tools.llvm("opt"));
    cmd.arg("-passes=internalize,globaldce")
        .arg(format!("-internalize-public-api-list={}", kernels.join(",")))
        .arg(&linked_bc)
        .arg("-o")
        .arg(&internal_bc);
    run_capture(&mut cmd)?;
    let mut module_ir = disassemble(tools, &internal_bc)?;
    for entry in &entries {
        module_ir = ir::patch_kernel(&module_ir, &entry.name, &entry.attrs)?;
    }
    let patched = work.join("patched.ll");
    std::fs::write(&patched, &module_ir).map_err(io_err(&patched))?;

    let raw_ptx = work.join("llc.ptx");
    let mut cmd = Command::new(tools.llvm("llc"));
    cmd.args(["-O3", "-mtriple=nvptx64-nvidia-cuda"])
        .arg(format!("-mcpu={}", arch.name()))
        .arg(format!("-mattr=+ptx{}", arch.ptx_isa()))
        .arg(&patched)
        .arg("-o")
        .arg(&raw_ptx);
    run_capture(&mut cmd)?;
    let ptx = std::fs::read_to_string(&raw_ptx).map_err(io_err(&raw_ptx))?;
    let ptx = ir::declare_dynamic_smem(&ptx, DYNAMIC_SMEM_SYMBOL);
    let out = work.join(format!("{}.ptx", arch.name()));
    std::fs::write(&out, ptx).map_err(io_err(&out))?;
    Ok((out, entries))
}

fn disassemble(tools: &Toolchain, bc: &Path) -> Result<String, BuildError> {
    run_capture(Command::new(tools.llvm("llvm-dis")).arg(bc).arg("-o").arg("-"))
}
