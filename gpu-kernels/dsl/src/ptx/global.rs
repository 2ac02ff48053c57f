//! Global-memory vector loads and stores (16 bytes per thread per instruction).

use core::arch::asm;

/// Loads four `f32` from global memory, caching them in L2 only.
///
/// Emits `ld.global.cg.v4.f32 {a, b, c, d}, [addr];`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four readable `f32`, not written
/// concurrently (a weak load: another CTA's writes must be ordered before it by the caller's
/// synchronisation, e.g. a flag acquired with a fence).
#[inline(always)]
pub unsafe fn ld_global_cg_v4_f32(addr: *const f32) -> (f32, f32, f32, f32) {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: the caller's contract; the load only reads memory.
    unsafe {
        asm!(
            "ld.global.cg.v4.f32 {{{0}, {1}, {2}, {3}}}, [{4}];",
            out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr,
            options(pure, readonly, nostack)
        )
    };
    (a, b, c, d)
}

/// Stores four `f32` to global memory.
///
/// Emits `st.global.v4.f32 [addr], {a, b, c, d};`.
///
/// # Safety
/// `addr` is a 16-byte-aligned global address of four writable `f32` that nothing reads or
/// writes concurrently.
#[inline(always)]
pub unsafe fn st_global_v4_f32(addr: *mut f32, (a, b, c, d): (f32, f32, f32, f32)) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "st.global.v4.f32 [{0}], {{{1}, {2}, {3}, {4}}};",
            in(reg64) addr, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d,
            options(nostack)
        )
    };
}
