//! Shared-memory addressing: the dynamic window, static arrays, generic ↔ shared conversion.

use core::arch::asm;

/// PTX name of the module-scope dynamic shared-memory array. The builder declares
/// `.extern .shared .align 1024 .b8 warpforge_dsmem[];` in every module that mentions it
/// (PTX allows `.extern .shared` only at module scope, and Rust has no shared-space statics).
pub const DYNAMIC_SMEM_SYMBOL: &str = "warpforge_dsmem";

/// Shared-window address of the dynamic shared memory.
///
/// Emits `mov.u32 %r, warpforge_dsmem;`.
///
/// # Safety
/// The module must have been built by the warpforge builder (which declares the symbol). The
/// address is not 0 on Hopper (the first KiB of the window is reserved): align from it.
#[inline(always)]
pub unsafe fn dynamic_smem_base() -> u32 {
    let r: u32;
    // SAFETY: taking a symbol's address has no side effects.
    unsafe { asm!("mov.u32 {0}, warpforge_dsmem;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Bytes of dynamic shared memory this launch provided.
///
/// Emits `mov.u32 %r, %dynamic_smem_size;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn dynamic_smem_size() -> u32 {
    let r: u32;
    // SAFETY: a special-register read has no side effects.
    unsafe { asm!("mov.u32 {0}, %dynamic_smem_size;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Bytes of static + dynamic shared memory of this block.
///
/// Emits `mov.u32 %r, %total_smem_size;`.
///
/// # Safety
/// None beyond running on the device.
#[inline(always)]
pub unsafe fn total_smem_size() -> u32 {
    let r: u32;
    // SAFETY: a special-register read has no side effects.
    unsafe { asm!("mov.u32 {0}, %total_smem_size;", out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Generic address of a shared-window address.
///
/// Emits `cvta.shared.u64 %rd, addr;`.
///
/// # Safety
/// `addr` must lie in this block's shared window for the result to be dereferenceable.
#[inline(always)]
pub unsafe fn cvta_shared_to_generic(addr: u32) -> *mut u8 {
    let r: u64;
    // SAFETY: pure address arithmetic.
    unsafe { asm!("cvta.shared.u64 {0}, {1};", out(reg64) r, in(reg64) addr as u64, options(pure, nomem, nostack)) };
    r as *mut u8
}

/// Shared-window address of a generic pointer into shared memory.
///
/// Emits `cvta.to.shared.u64 %rd, p;` (truncated to 32 bits).
///
/// # Safety
/// `p` must point into this block's shared memory, or the result is meaningless.
#[inline(always)]
pub unsafe fn cvta_generic_to_shared<T>(p: *const T) -> u32 {
    let r: u64;
    // SAFETY: pure address arithmetic.
    unsafe { asm!("cvta.to.shared.u64 {0}, {1};", out(reg64) r, in(reg64) p as u64, options(pure, nomem, nostack)) };
    r as u32
}

/// Declares a block-scope static shared array of `BYTES` bytes aligned to `ALIGN` and returns
/// its shared-window address.
///
/// Emits `{ .shared .align ALIGN .b8 warpforge_static_smem[BYTES]; mov.u32 %r, warpforge_static_smem; }`.
///
/// # Safety
/// Each *emitted copy* of this instruction is its own array: call it from one place in the
/// kernel, outside loops that the compiler could unroll, and from a function that is inlined
/// once — [`crate::shared::StaticShared`] wraps it that way. `ALIGN` is a power of two.
#[inline(always)]
pub unsafe fn static_smem<const BYTES: usize, const ALIGN: usize>() -> u32 {
    let r: u32;
    // SAFETY: declaring storage and taking its address has no side effects.
    unsafe {
        asm!("{{ .shared .align {a} .b8 warpforge_static_smem[{n}]; mov.u32 {r}, warpforge_static_smem; }}",
             r = out(reg32) r, a = const ALIGN, n = const BYTES, options(pure, nomem, nostack))
    };
    r
}

/// The 32-bit word at shared-window address `addr`.
///
/// Emits `ld.shared.b32 %r, [addr];` — a shared load (LDS) from the 32-bit window address,
/// where a load through the generic pointer ([`cvta_shared_to_generic`]) takes a 64-bit
/// address and the generic path.
///
/// # Safety
/// `addr` is 4-byte aligned inside this block's shared memory, and the word's writes are
/// ordered before this read (an awaited TMA load or a barrier).
#[inline(always)]
pub unsafe fn ld_shared_b32(addr: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller's contract; `readonly` keeps it behind every write and wait before it.
    unsafe { asm!("ld.shared.b32 {0}, [{1}];", out(reg32) r, in(reg32) addr, options(readonly, nostack)) };
    r
}
