//! Assembly coverage of the kernel-author vocabulary's L0 forms (sm_90a): one kernel that calls
//! each raw PTX form of `ptx::{math, cvt, global, warp}` that the vocabulary added (the SFU and
//! IEEE unary math, the FP8 pair conversions, the 16-byte global vector loads and stores with
//! their cache policies, `shfl.sync.up`), so ptxas assembles every spelling. Never launched;
//! `tests/builder.rs` builds and assembles it with the other coverage kernels.

use warpforge_dsl::kernel;
use warpforge_dsl::ptx::{cvt, global, math, warp};

/// Calls each vocabulary L0 wrapper once. Assembly coverage only: never launched.
///
/// # Safety
/// Not to be launched.
#[kernel(threads = 32)]
pub unsafe fn vocab_l0_forms_sm90a(src: *const u32, dst: *mut u32, x: f32) {
    // SAFETY: assembly coverage only; nothing here runs.
    unsafe {
        let f = math::sqrt_rn_f32(x)
            + math::sqrt_approx_f32(x)
            + math::rsqrt_approx_f32(x)
            + math::rcp_rn_f32(x)
            + math::rcp_approx_f32(x)
            + math::rcp_approx_ftz_f32(x)
            + math::ex2_approx_f32(x)
            + math::ex2_approx_ftz_f32(x)
            + math::lg2_approx_f32(x)
            + math::tanh_approx_f32(x);

        let e4 = cvt::cvt_rn_satfinite_e4m3x2_f32(f, x);
        let e5 = cvt::cvt_rn_satfinite_e5m2x2_f32(x, f);
        let h2 = cvt::cvt_rn_f16x2_e4m3x2(e4) ^ cvt::cvt_rn_f16x2_e5m2x2(e5);
        let p = cvt::cvt_rn_satfinite_e4m3x2_f16x2(h2) as u32 | (cvt::cvt_rn_satfinite_e5m2x2_f16x2(h2) as u32) << 16;
        let scanned = warp::shfl_sync_up(0xffff_ffff, p, 1, 0);

        let a = global::ld_global_v4_b32(src);
        let b = global::ld_global_nc_v4_b32(src.add(4));
        let c = global::ld_global_nc_l1_no_allocate_v4_b32(src.add(8));
        global::st_global_v4_b32(dst, (a.0 ^ scanned, a.1, a.2, a.3));
        global::st_global_cs_v4_b32(dst.add(4), (b.0 ^ c.0, b.1 ^ c.1, b.2 ^ c.2, b.3 ^ c.3));
    }
}
