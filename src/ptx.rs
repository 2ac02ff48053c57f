//! The PTX embedded in this crate, per arch, and how it was produced.
//!
//! Built by `build.rs` from `gpu-kernels/kernels` (inside this workspace, on the pinned
//! nightly) or copied from the shipped `gpu-kernels/generated/` (everywhere else). The test-only
//! probe module (`gpu-kernels/checks`) is embedded the same way but loaded only by the tests.
//! Statics, not consts: every use refers to the one copy in the binary (a `const` of a 9 MB
//! string is copied into each crate that names it).

use warpforge_host::PtxSet;
pub use warpforge_host::module::Arch;

/// sm_90a module (Hopper).
pub static SM_90A: &str = include_str!(concat!(env!("OUT_DIR"), "/sm_90a.ptx"));
/// sm_100a module (Blackwell; compile-verified, no Blackwell GPU has run it).
pub static SM_100A: &str = include_str!(concat!(env!("OUT_DIR"), "/sm_100a.ptx"));

/// The sm_90a module assembled by ptxas (a cubin; empty when this build had neither ptxas nor a
/// shipped cubin of exactly this PTX). Loaded instead of the PTX on an H100/H200: no JIT.
pub static SM_90A_CUBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sm_90a.cubin"));

/// ptxas's resource report for the sm_90a module at build time (registers, shared memory, stack
/// frame, local memory and spills per kernel, with callees and wgmma serialisation).
pub static SM_90A_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/sm_90a.report.txt"));
/// ptxas's resource report for the sm_100a module at build time.
pub static SM_100A_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/sm_100a.report.txt"));

/// The test-only module of DSL hardware probes (`gpu-kernels/checks`: TMA, mbarrier, cluster and
/// wgmma forms), sm_90a only. [`crate::Warpforge`] never loads it; warpforge's GPU tests do.
pub static CHECKS_SM_90A: &str = include_str!(concat!(env!("OUT_DIR"), "/checks_sm_90a.ptx"));
/// The probes assembled by ptxas when this build had it (empty otherwise: the driver JIT-compiles
/// the PTX, which for these small kernels takes a moment).
pub static CHECKS_SM_90A_CUBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/checks_sm_90a.cubin"));
/// ptxas's resource report for the probe module at build time.
pub static CHECKS_SM_90A_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/checks_sm_90a.report.txt"));
/// The probe module as a loadable set.
pub static CHECKS: PtxSet = PtxSet::new().with(Arch::Sm90a, CHECKS_SM_90A).with_cubin(Arch::Sm90a, CHECKS_SM_90A_CUBIN);

/// `"built"` when this build compiled the kernels from source, `"shipped"` when it embedded
/// the committed PTX.
pub const ORIGIN: &str = env!("WARPFORGE_PTX_ORIGIN");

/// Every embedded module.
pub static SET: PtxSet =
    PtxSet::new().with(Arch::Sm90a, SM_90A).with_cubin(Arch::Sm90a, SM_90A_CUBIN).with(Arch::Sm100a, SM_100A);

/// The embedded PTX of `arch`.
pub fn module(arch: Arch) -> &'static str {
    match arch {
        Arch::Sm90a => SM_90A,
        Arch::Sm100a => SM_100A,
    }
}

/// The build-time ptxas report of `arch`.
pub fn report(arch: Arch) -> &'static str {
    match arch {
        Arch::Sm90a => SM_90A_REPORT,
        Arch::Sm100a => SM_100A_REPORT,
    }
}
