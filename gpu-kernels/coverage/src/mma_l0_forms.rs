//! Assembly coverage of the warp-level `mma.sync` forms (`ptx::mma`, sm_90a): one kernel that
//! issues each m16n8k16 form once, so ptxas assembles every spelling. Never launched;
//! `tests/builder.rs` builds and assembles it with the other coverage kernels.

use warpforge_dsl::kernel;
use warpforge_dsl::ptx::mma;

/// Calls each `mma.sync` wrapper once. Assembly coverage only: never launched.
///
/// # Safety
/// Not to be launched.
#[kernel(threads = 32)]
pub unsafe fn mma_l0_forms_sm90a(dst: *mut f32, a: u32, b: u32) {
    // SAFETY: assembly coverage only; nothing here runs.
    unsafe {
        let mut d = (0.0f32, 0.0, 0.0, 0.0);
        mma::mma_m16n8k16_f32_bf16(&mut d, (a, b, a, b), (b, a));
        mma::mma_m16n8k16_f32_f16(&mut d, (b, a, b, a), (a, b));
        dst.write(d.0 + d.1 + d.2 + d.3);
    }
}
