//! Miscellaneous control instructions.

use core::arch::asm;

/// Aborts the grid; the host sees `CUDA_ERROR_ILLEGAL_INSTRUCTION`.
///
/// Emits `trap;`.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` has no preconditions; it never returns.
    unsafe { asm!("trap;", options(noreturn, nostack)) }
}

/// Suspends the thread for about `ns` nanoseconds (at most 1 ms).
///
/// Emits `nanosleep.u32 ns;`.
///
/// # Safety
/// None beyond running on sm_70+.
#[inline(always)]
pub unsafe fn nanosleep(ns: u32) {
    // SAFETY: sleeping has no memory effects.
    unsafe { asm!("nanosleep.u32 {0};", in(reg32) ns, options(nomem, nostack)) };
}
