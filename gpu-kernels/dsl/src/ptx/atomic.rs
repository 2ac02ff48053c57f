//! Global-memory atomics (relaxed, GPU scope unless stated).

use core::arch::asm;

macro_rules! atom_global {
    ($($(#[$doc:meta])* $name:ident: $ty:ty, $reg:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " d, [addr], value;` and returns the old value.")]
        ///
        /// # Safety
        /// `addr` is a valid, naturally aligned global-memory address for the whole kernel.
        #[inline(always)]
        pub unsafe fn $name(addr: *mut $ty, value: $ty) -> $ty {
            let r: $ty;
            // SAFETY: caller guarantees `addr` is a valid global address.
            unsafe {
                asm!(concat!($ptx, " {0}, [{1}], {2};"), out($reg) r, in(reg64) addr, in($reg) value, options(nostack))
            };
            r
        }
    )*};
}

atom_global! {
    /// Atomic add, u32.
    atom_add_u32: u32, reg32 => "atom.global.add.u32";
    /// Atomic add, u64.
    atom_add_u64: u64, reg64 => "atom.global.add.u64";
    /// Atomic add, f32 (round to nearest).
    atom_add_f32: f32, reg32 => "atom.global.add.f32";
    /// Atomic max, u32.
    atom_max_u32: u32, reg32 => "atom.global.max.u32";
    /// Atomic min, u32.
    atom_min_u32: u32, reg32 => "atom.global.min.u32";
    /// Atomic exchange, b32.
    atom_exch_b32: u32, reg32 => "atom.global.exch.b32";
}

/// Atomic compare-and-swap: stores `new` if `*addr == expected`; returns the old value.
///
/// Emits `atom.global.cas.b32 d, [addr], expected, new;`.
///
/// # Safety
/// `addr` is a valid, 4-byte aligned global-memory address.
#[inline(always)]
pub unsafe fn atom_cas_b32(addr: *mut u32, expected: u32, new: u32) -> u32 {
    let r: u32;
    // SAFETY: caller guarantees `addr` is a valid global address.
    unsafe {
        asm!("atom.global.cas.b32 {0}, [{1}], {2}, {3};", out(reg32) r, in(reg64) addr, in(reg32) expected,
             in(reg32) new, options(nostack))
    };
    r
}

/// Atomic add on shared memory, u32.
///
/// Emits `atom.shared::cta.add.u32 d, [addr], value;`.
///
/// # Safety
/// `addr` is a 4-byte aligned shared-window address of this block.
#[inline(always)]
pub unsafe fn atom_shared_add_u32(addr: u32, value: u32) -> u32 {
    let r: u32;
    // SAFETY: caller guarantees `addr` is a valid shared address.
    unsafe {
        asm!("atom.shared::cta.add.u32 {0}, [{1}], {2};", out(reg32) r, in(reg32) addr, in(reg32) value, options(nostack))
    };
    r
}
