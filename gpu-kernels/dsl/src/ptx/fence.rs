//! Memory fences.

use core::arch::asm;

/// Sequentially consistent fence at GPU scope.
///
/// Emits `fence.sc.gpu;`.
///
/// # Safety
/// None: a fence only orders; it is `unsafe` as every L0 item is.
#[inline(always)]
pub unsafe fn fence_sc_gpu() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.sc.gpu;", options(nostack)) };
}

/// Acquire-release fence at GPU scope.
///
/// Emits `fence.acq_rel.gpu;`.
///
/// # Safety
/// None.
#[inline(always)]
pub unsafe fn fence_acq_rel_gpu() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) };
}

/// Acquire-release fence at block scope.
///
/// Emits `fence.acq_rel.cta;`.
///
/// # Safety
/// None.
#[inline(always)]
pub unsafe fn fence_acq_rel_cta() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.acq_rel.cta;", options(nostack)) };
}

/// Orders generic-proxy shared-memory writes before later async-proxy (TMA, wgmma) reads.
///
/// Emits `fence.proxy.async.shared::cta;`.
///
/// # Safety
/// None.
#[inline(always)]
pub unsafe fn fence_proxy_async_shared_cta() {
    // SAFETY: a fence has no preconditions.
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) };
}
