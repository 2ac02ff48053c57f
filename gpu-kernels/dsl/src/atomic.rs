//! Atomics on global memory through typed references.
//!
//! An [`AtomicCell`] is a device address the host promises stays valid and is only accessed
//! atomically for the kernel's lifetime; that promise is made once, when it is created.

use crate::ptx::atomic as raw;

/// A `u32` in global memory accessed only atomically.
#[derive(Clone, Copy, Debug)]
pub struct AtomicCell {
    addr: *mut u32,
}

impl AtomicCell {
    /// Wraps a global address.
    ///
    /// # Safety
    /// `addr` is a valid, 4-byte aligned global address for the rest of the kernel, and every
    /// concurrent access to it is atomic.
    #[inline(always)]
    pub unsafe fn new(addr: *mut u32) -> Self {
        AtomicCell { addr }
    }

    /// Adds `value`; returns the previous value.
    #[inline(always)]
    pub fn fetch_add(&self, value: u32) -> u32 {
        // SAFETY: the constructor's contract.
        unsafe { raw::atom_add_u32(self.addr, value) }
    }

    /// Stores the maximum; returns the previous value.
    #[inline(always)]
    pub fn fetch_max(&self, value: u32) -> u32 {
        // SAFETY: the constructor's contract.
        unsafe { raw::atom_max_u32(self.addr, value) }
    }

    /// Stores `value`; returns the previous value.
    #[inline(always)]
    pub fn swap(&self, value: u32) -> u32 {
        // SAFETY: the constructor's contract.
        unsafe { raw::atom_exch_b32(self.addr, value) }
    }

    /// Compare-and-swap; returns the previous value.
    #[inline(always)]
    pub fn compare_exchange(&self, expected: u32, new: u32) -> u32 {
        // SAFETY: the constructor's contract.
        unsafe { raw::atom_cas_b32(self.addr, expected, new) }
    }
}

/// Atomically adds `value` to the f32 at `addr`.
///
/// # Safety
/// `addr` is a valid, 4-byte aligned global address.
#[inline(always)]
pub unsafe fn add_f32(addr: *mut f32, value: f32) -> f32 {
    // SAFETY: forwarded.
    unsafe { raw::atom_add_f32(addr, value) }
}

/// Atomically adds `value` to the `u32` at `ptr` in shared memory; returns the old value.
#[inline(always)]
pub fn shared_fetch_add(ptr: crate::shared::SharedPtr<u32>, value: u32) -> u32 {
    // SAFETY: a SharedPtr is an aligned address in this block's shared memory by construction.
    unsafe { raw::atom_shared_add_u32(ptr.addr(), value) }
}
