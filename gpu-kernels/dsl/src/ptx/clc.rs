//! Cluster launch control (sm_100a): ask the launcher to cancel a not-yet-started cluster and
//! decode its answer. Spellings from `checks/clc_sm100a.ptx` (REFERENCE §12); `checks/neg/clc_*`
//! lists the forms that do not exist (no `.shared::cluster` response, no `arrive::one`
//! completion, no `.multicast::cluster` without `::all`, no memory operand for `query_cancel`).
//!
//! The 16-byte response is a `.b128` value and Rust has no 128-bit register class, so every
//! decoder loads it with `ld.shared.b128` and queries it inside one asm block (REFERENCE §15.2).

use core::arch::asm;

/// Requests cancellation of one not-yet-launched cluster; the 16-byte response is written to
/// `resp` and completes as `complete_tx(16)` on `bar`.
///
/// Emits `clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [resp], [bar];`.
///
/// # Safety
/// One thread issues. `resp` is a 16-byte aligned shared-window address nobody reads until `bar`
/// completes (earlier generic reads of it were fenced with `fence.proxy.async.shared::cta` and a
/// barrier); `bar` is an initialised mbarrier armed with `expect_tx(16)` for this phase. Never
/// issued after this cluster observed a failed response.
#[inline(always)]
pub unsafe fn try_cancel(resp: u32, bar: u32) {
    // SAFETY: the caller upholds the slot, barrier and after-failure rules.
    unsafe {
        asm!("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [{0}], [{1}];",
             in(reg32) resp, in(reg32) bar, options(nostack))
    };
}

/// As [`try_cancel`], but every CTA of the cluster receives the response at `resp` and a
/// `complete_tx(16)` on its own barrier at `bar`.
///
/// Emits `clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [resp], [bar];`.
///
/// # Safety
/// As [`try_cancel`] for every CTA of the cluster: each armed its barrier at `bar` with
/// `expect_tx(16)`, and none has exited. One thread of the cluster issues.
#[inline(always)]
pub unsafe fn try_cancel_multicast(resp: u32, bar: u32) {
    // SAFETY: the caller upholds the slot, barrier and after-failure rules in every CTA.
    unsafe {
        asm!("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128 [{0}], [{1}];",
             in(reg32) resp, in(reg32) bar, options(nostack))
    };
}

/// Whether the response at `resp` cancelled a cluster.
///
/// Emits `{ .reg .b128 %clc_q; .reg .pred %clc_p; ld.shared.b128 %clc_q, [resp];
/// clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %clc_p, %clc_q; selp.u32 r, 1, 0, %clc_p; }`.
///
/// # Safety
/// `resp` holds a response whose mbarrier phase this thread has observed complete.
#[inline(always)]
pub unsafe fn query_is_canceled(resp: u32) -> bool {
    let r: u32;
    // SAFETY: the caller guarantees the response is complete.
    unsafe {
        asm!("{{ .reg .b128 %clc_q; .reg .pred %clc_p; ld.shared.b128 %clc_q, [{1}];",
             "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %clc_p, %clc_q; selp.u32 {0}, 1, 0, %clc_p; }}",
             out(reg32) r, in(reg32) resp, options(nostack))
    };
    r != 0
}

/// `%ctaid` (x, y, z) of the first CTA of the cancelled cluster (undefined if not cancelled).
///
/// Emits `{ .reg .b128 %clc_q; ld.shared.b128 %clc_q, [resp];
/// clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {x, y, z, _}, %clc_q; }`.
///
/// # Safety
/// As [`query_is_canceled`].
#[inline(always)]
pub unsafe fn query_first_ctaid(resp: u32) -> (u32, u32, u32) {
    let (x, y, z): (u32, u32, u32);
    // SAFETY: the caller guarantees the response is complete.
    unsafe {
        asm!("{{ .reg .b128 %clc_q; ld.shared.b128 %clc_q, [{3}];",
             "clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {{{0}, {1}, {2}, _}}, %clc_q; }}",
             out(reg32) x, out(reg32) y, out(reg32) z, in(reg32) resp, options(nostack))
    };
    (x, y, z)
}

/// The whole answer with one load: `(canceled, first_ctaid.x)`; x is 0 when not cancelled
/// (the ctaid of a failed response is undefined, so it is only queried under the predicate).
///
/// Emits `{ .reg .b128 %clc_q; .reg .pred %clc_p; ld.shared.b128 %clc_q, [resp];
/// clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %clc_p, %clc_q; mov.u32 x, 0;
/// @%clc_p clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 x, %clc_q;
/// selp.u32 c, 1, 0, %clc_p; }`.
///
/// # Safety
/// As [`query_is_canceled`].
#[inline(always)]
pub unsafe fn query_cancel_x(resp: u32) -> (bool, u32) {
    let (canceled, x): (u32, u32);
    // SAFETY: the caller guarantees the response is complete.
    unsafe {
        asm!("{{ .reg .b128 %clc_q; .reg .pred %clc_p; ld.shared.b128 %clc_q, [{2}];",
             "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %clc_p, %clc_q;",
             "mov.u32 {1}, 0; @%clc_p clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 {1}, %clc_q;",
             "selp.u32 {0}, 1, 0, %clc_p; }}",
             out(reg32) canceled, out(reg32) x, in(reg32) resp, options(nostack))
    };
    (canceled != 0, x)
}
