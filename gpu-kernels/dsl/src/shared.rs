//! Shared memory: the dynamic window carved into typed, aligned regions, and static arrays.
//!
//! Addresses are kept as 32-bit shared-window addresses ([`SharedPtr`]), the form every async
//! instruction takes; [`SharedPtr::as_mut_ptr`] gives the generic pointer for ordinary loads
//! and stores.

use core::marker::PhantomData;

use crate::ptx::smem;

/// A typed address in this block's shared memory.
#[derive(Debug)]
pub struct SharedPtr<T> {
    addr: u32,
    _ty: PhantomData<*mut T>,
}

impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    /// Wraps a shared-window address.
    ///
    /// # Safety
    /// `addr` lies in this block's shared memory and is aligned for `T`.
    #[inline(always)]
    pub const unsafe fn from_addr(addr: u32) -> Self {
        SharedPtr { addr, _ty: PhantomData }
    }

    /// The 32-bit shared-window address (what `.shared::cta` operands take).
    #[inline(always)]
    pub const fn addr(self) -> u32 {
        self.addr
    }

    /// Element `i` further on.
    #[inline(always)]
    pub const fn add(self, i: u32) -> Self {
        SharedPtr { addr: self.addr + i * core::mem::size_of::<T>() as u32, _ty: PhantomData }
    }

    /// Generic pointer for ordinary loads and stores.
    #[inline(always)]
    pub fn as_mut_ptr(self) -> *mut T {
        // SAFETY: the constructor guarantees the address is in the shared window.
        unsafe { smem::cvta_shared_to_generic(self.addr) as *mut T }
    }
}

impl SharedPtr<u32> {
    /// The word, by one shared load (`ld.shared.b32` from the window address; a load through
    /// [`SharedPtr::as_mut_ptr`] takes the generic path).
    ///
    /// # Safety
    /// The word was written, its writes ordered before this read (an awaited barrier), and it
    /// is not being rewritten.
    #[inline(always)]
    pub unsafe fn read_word(self) -> u32 {
        // SAFETY: the constructor's address, and the caller's ordering.
        unsafe { smem::ld_shared_b32(self.addr) }
    }
}

/// Bump allocator over the dynamic shared memory of the launch: each kernel carves its
/// regions once, at the top, in a fixed order (the "smem plan").
#[derive(Debug)]
pub struct DynamicShared {
    next: u32,
    end: u32,
}

impl DynamicShared {
    /// The whole dynamic window of this launch.
    #[inline(always)]
    pub fn window() -> Self {
        // SAFETY: the builder declares the symbol in every module that uses it.
        let base = unsafe { smem::dynamic_smem_base() };
        // SAFETY: special-register read.
        let size = unsafe { smem::dynamic_smem_size() };
        DynamicShared { next: base, end: base + size }
    }

    /// Bytes still free.
    #[inline(always)]
    pub fn remaining(&self) -> u32 {
        self.end - self.next
    }

    /// Reserves `count` values of `T` aligned to `align` bytes (a power of two, at least
    /// `align_of::<T>()`). Traps when the launch gave too little shared memory: a kernel's
    /// launch contract states its shared-memory size, so this means a host bug.
    #[inline(always)]
    pub fn alloc<T>(&mut self, count: u32, align: u32) -> SharedPtr<T> {
        let align = if align < core::mem::align_of::<T>() as u32 { core::mem::align_of::<T>() as u32 } else { align };
        let start = (self.next + align - 1) & !(align - 1);
        let bytes = count * core::mem::size_of::<T>() as u32;
        if start > self.end || self.end - start < bytes {
            crate::ptx::misc::trap();
        }
        self.next = start + bytes;
        // SAFETY: [start, start + bytes) lies inside the window and is aligned for T.
        unsafe { SharedPtr::from_addr(start) }
    }
}

/// Static shared memory: `BYTES` bytes aligned to `ALIGN`, declared in the PTX itself, so it
/// needs no launch-time size.
pub struct StaticShared<const BYTES: usize, const ALIGN: usize>;

impl<const BYTES: usize, const ALIGN: usize> StaticShared<BYTES, ALIGN> {
    const VALID: () = assert!(ALIGN.is_power_of_two() && BYTES > 0, "ALIGN must be a power of two");

    /// Declares the array and returns its address as `*T`.
    ///
    /// # Safety
    /// Call once per kernel, at its top and outside loops: every emitted copy of the
    /// declaration is a separate array (see [`smem::static_smem`]).
    #[inline(always)]
    pub unsafe fn declare<T>() -> SharedPtr<T> {
        let () = Self::VALID;
        // SAFETY: forwarded to the caller.
        let addr = unsafe { smem::static_smem::<BYTES, ALIGN>() };
        // SAFETY: the declaration is ALIGN-aligned; the caller picks T to fit.
        unsafe { SharedPtr::from_addr(addr) }
    }
}
