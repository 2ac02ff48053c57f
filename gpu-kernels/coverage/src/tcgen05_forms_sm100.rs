//! Exercise kernels for the Blackwell L0 forms: never launched, they exist so that every
//! tcgen05 / cluster-launch-control wrapper is emitted into the sm_100a PTX and assembled by
//! ptxas (a wrapper nobody calls emits nothing). It lives in the coverage crate, outside the
//! shipped library, because it calls `ptx::` directly — its purpose is to name every raw form,
//! which the typed layer deliberately does not. Operands come from kernel parameters so nothing is constant-folded away; the
//! values are meaningless. Two kernels, because ptxas rejects mixing `.cta_group::1` and `::2`
//! in one kernel.

use warpforge_dsl::kernel;
use warpforge_dsl::ptx::tcgen05_ld_st::{Tmem16x64b, Tmem16x128b, Tmem16x256b, Tmem32x32b, TmemCopy};
use warpforge_dsl::ptx::{clc, tcgen05};

/// Load (async and with wait) then store one shape; the registers flow into `acc` so the
/// loads are not dead.
#[inline(always)]
unsafe fn round_trip<S: TmemCopy>(taddr: u32) {
    // SAFETY: exercise only; every lane of the warp runs this with the same address.
    unsafe {
        let r = S::load_wait(taddr);
        S::store(taddr, r);
        let _ = S::load(taddr);
        tcgen05::wait_ld();
        tcgen05::wait_st();
    }
}

macro_rules! round_trips {
    ($taddr:expr; $($shape:ident < $($n:literal),+ >);+ $(;)?) => {
        $($(
            // SAFETY: see round_trip.
            unsafe { round_trip::<$shape<$n>>($taddr) };
        )+)+
    };
}

/// Every `.cta_group::1` tcgen05 form, every `tcgen05.ld/st` shape × repeat, and every CLC form.
///
/// # Safety
/// Not meant to be launched.
#[kernel(threads = 128)]
pub unsafe fn tcgen05_cta1_forms_exercise(slot: u32, idesc: u32, adesc: u64, bdesc: u64, flag: u32) {
    let enable = flag != 0;
    // SAFETY: exercise only (ptxas sees the forms; nothing is meant to run).
    unsafe {
        tcgen05::alloc_cta1(slot, 512);
        tcgen05::relinquish_alloc_permit_cta1();
        tcgen05::fence_before_thread_sync();
        tcgen05::fence_after_thread_sync();
        let d = slot;
        let a_tmem = slot + 256;
        tcgen05::mma_f16_ss_cta1(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_f16_ts_cta1(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_tf32_ss_cta1(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_tf32_ts_cta1(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_f8f6f4_ss_cta1(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_f8f6f4_ts_cta1(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_mxf8f6f4_ss_cta1(d, adesc, bdesc, idesc, d + 480, d + 484, enable);
        tcgen05::mma_mxf8f6f4_ts_cta1(d, a_tmem, bdesc, idesc, d + 480, d + 484, enable);
        tcgen05::cp_128x256b_cta1(d, adesc);
        tcgen05::cp_128x128b_cta1(d, adesc);
        tcgen05::cp_4x256b_cta1(d, adesc);
        tcgen05::cp_64x128b_warpx2_02_13_cta1(d, adesc);
        tcgen05::cp_64x128b_warpx2_01_23_cta1(d, adesc);
        tcgen05::cp_32x128b_warpx4_cta1(d, adesc);
        tcgen05::commit_cta1(slot + 16);
        clc::try_cancel(slot + 32, slot + 16);
        clc::try_cancel_multicast(slot + 32, slot + 16);
        let canceled = clc::query_is_canceled(slot + 32);
        let (x, y, z) = clc::query_first_ctaid(slot + 32);
        let (c2, x2) = clc::query_cancel_x(slot + 32);
        if canceled && c2 && x + y + z + x2 == 7 {
            tcgen05::fence_before_thread_sync();
        }
    }
    round_trips! { slot;
        Tmem32x32b<1, 2, 4, 8, 16, 32, 64, 128>;
        Tmem16x64b<1, 2, 4, 8, 16, 32, 64, 128>;
        Tmem16x128b<1, 2, 4, 8, 16, 32, 64>;
        Tmem16x256b<1, 2, 4, 8, 16, 32>;
    }
    // SAFETY: exercise only.
    unsafe { tcgen05::dealloc_cta1(slot, 512) };
}

/// Every `.cta_group::2` tcgen05 form (CTA pair of a 2-CTA cluster).
///
/// # Safety
/// Not meant to be launched.
#[kernel(threads = 128, cluster = (2, 1, 1))]
pub unsafe fn tcgen05_cta2_forms_exercise(slot: u32, idesc: u32, adesc: u64, bdesc: u64, flag: u32) {
    let enable = flag != 0;
    // SAFETY: exercise only (ptxas sees the forms; nothing is meant to run).
    unsafe {
        tcgen05::alloc_cta2(slot, 512);
        tcgen05::relinquish_alloc_permit_cta2();
        let d = slot;
        let a_tmem = slot + 256;
        tcgen05::mma_f16_ss_cta2(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_f16_ts_cta2(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_tf32_ss_cta2(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_tf32_ts_cta2(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_f8f6f4_ss_cta2(d, adesc, bdesc, idesc, enable);
        tcgen05::mma_f8f6f4_ts_cta2(d, a_tmem, bdesc, idesc, enable);
        tcgen05::mma_mxf8f6f4_ss_cta2(d, adesc, bdesc, idesc, d + 480, d + 484, enable);
        tcgen05::mma_mxf8f6f4_ts_cta2(d, a_tmem, bdesc, idesc, d + 480, d + 484, enable);
        tcgen05::cp_128x256b_cta2(d, adesc);
        tcgen05::cp_128x128b_cta2(d, adesc);
        tcgen05::cp_4x256b_cta2(d, adesc);
        tcgen05::cp_64x128b_warpx2_02_13_cta2(d, adesc);
        tcgen05::cp_64x128b_warpx2_01_23_cta2(d, adesc);
        tcgen05::cp_32x128b_warpx4_cta2(d, adesc);
        tcgen05::commit_cta2(slot + 16);
        tcgen05::commit_multicast_cta2(slot + 16, 0b11);
        tcgen05::dealloc_cta2(slot, 512);
    }
}
