//! Global-memory loads and stores: one 32-bit word (schedule data a warp reads alike), and
//! vectors of 16 bytes per thread per instruction with their cache policies: the `f32` forms the stream-K hand-over uses, and 32-bit-word forms any 16-byte
//! vector type moves through.

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

/// Loads one 32-bit word from global memory.
///
/// Emits `ld.global.b32 d, [addr];`. A load through a generic address (what a Rust
/// dereference becomes) may reach thread-local memory, so ptxas never takes its result as
/// warp-uniform, even from a uniform address; a `.global` load from a uniform address is.
///
/// # Safety
/// `addr` is a 4-byte-aligned global address of a readable word, not written concurrently (a
/// weak load).
#[inline(always)]
pub unsafe fn ld_global_b32(addr: *const u32) -> u32 {
    let r: u32;
    // SAFETY: the caller's contract; the load only reads memory.
    unsafe { asm!("ld.global.b32 {0}, [{1}];", out(reg32) r, in(reg64) addr, options(pure, readonly, nostack)) };
    r
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

macro_rules! ld_v4_b32 {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " {a, b, c, d}, [addr];`.")]
        ///
        /// # Safety
        /// `addr` is a 16-byte-aligned global address of 16 readable bytes that nothing writes
        /// while this kernel may read them (a weak load; the `.nc` forms read through the
        /// non-coherent texture path and need the bytes unwritten for the whole launch).
        #[inline(always)]
        pub unsafe fn $name(addr: *const u32) -> (u32, u32, u32, u32) {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller's contract; the load only reads memory.
            unsafe {
                asm!(concat!($ptx, " {{{0}, {1}, {2}, {3}}}, [{4}];"),
                     out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr,
                     options(pure, readonly, nostack))
            };
            (a, b, c, d)
        }
    )*};
}

ld_v4_b32! {
    /// Loads 16 bytes from global memory, cached in L1 and L2 (the default `.ca` policy).
    ld_global_v4_b32 => "ld.global.v4.b32";
    /// Loads 16 bytes of read-only data through the non-coherent (texture) path.
    ld_global_nc_v4_b32 => "ld.global.nc.v4.b32";
    /// Loads 16 bytes of read-only data through the non-coherent path without allocating an L1
    /// line (data read once: streamed weights or activations).
    ld_global_nc_l1_no_allocate_v4_b32 => "ld.global.nc.L1::no_allocate.v4.b32";
}

macro_rules! st_v4_b32 {
    ($($(#[$doc:meta])* $name:ident => $ptx:literal;)*) => {$(
        $(#[$doc])*
        #[doc = concat!("\n\nEmits `", $ptx, " [addr], {a, b, c, d};`.")]
        ///
        /// # Safety
        /// `addr` is a 16-byte-aligned global address of 16 writable bytes that nothing reads or
        /// writes concurrently.
        #[inline(always)]
        pub unsafe fn $name(addr: *mut u32, (a, b, c, d): (u32, u32, u32, u32)) {
            // SAFETY: the caller's contract.
            unsafe {
                asm!(concat!($ptx, " [{0}], {{{1}, {2}, {3}, {4}}};"),
                     in(reg64) addr, in(reg32) a, in(reg32) b, in(reg32) c, in(reg32) d,
                     options(nostack))
            };
        }
    )*};
}

st_v4_b32! {
    /// Stores 16 bytes to global memory (the default write-back policy).
    st_global_v4_b32 => "st.global.v4.b32";
    /// Stores 16 bytes to global memory as streaming data (`.cs`: evict first, likely not read
    /// again soon).
    st_global_cs_v4_b32 => "st.global.cs.v4.b32";
}
